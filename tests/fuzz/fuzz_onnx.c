/* libFuzzer target for the ONNX importer: any bytes given to graph_load must be rejected with
 * a message or imported, never crash, hang or leak. Each input is imported twice:
 *
 *   - against the operator registry, as npud does; an imported graph also goes through the
 *     cost estimate npud makes on the loop thread for every run (shape inference of each
 *     node with data that is not there yet), inputs bound with their declared shapes (open
 *     extents as 1);
 *   - with a lookup that accepts every operator, so that models the registry would refuse
 *     (If, Loop, custom domains) still exercise the conversion of subgraphs, outer-scope
 *     references, attributes and the topological order. */
#include <stddef.h>
#include <stdint.h>

#include "graph/exec.h"
#include "graph/onnx-import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Any operator: outputs shaped like the first input (a float scalar without inputs). */
static int any_infer(const struct ops_def *def, struct ops_call *c, char *err, size_t errlen)
{
        for (int j = 0; j < c->nout; j++) {
                struct ops_tensor t = { .dtype = 1 };
                if (c->nin > 0 && c->in[0].dtype)
                        t = c->in[0];
                t.data = NULL;
                c->out[j] = t;
        }
        return 0;
}

static const struct ops_def any_def = {
        .name = "Any", .min_inputs = 0, .max_inputs = OPS_MAX_INPUTS, .outputs = OPS_MAX_OUTPUTS,
        .infer = any_infer,
};

static const struct ops_def *any_lookup(void *ctx, const char *domain, const char *op, int version)
{
        return &any_def;
}

static void estimate(const struct graph *g)
{
        static struct ops_tensor in[GRAPH_MAX_IO];

        for (int i = 0; i < g->ninputs && i < GRAPH_MAX_IO; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                in[i].dtype = v->dtype ? v->dtype : 1;
                in[i].ndim = v->ndim < 0 ? 1 : v->ndim;
                for (int d = 0; d < OPS_MAX_DIMS; d++)
                        in[i].dims[d] = d < v->ndim && v->dims[d] >= 0 ? v->dims[d] : 1;
                in[i].data = NULL;
        }
        (void)graph_estimate_ns(g, g->ninputs, in, 1e9, 1e11, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const struct onnx_import_env any = { .lookup = any_lookup };
        struct graph *g;
        char err[4096];

        if (onnx_import(data, size, NULL, &g, err, sizeof(err)) == 0) {
                estimate(g);
                graph_free(g);
        }
        if (onnx_import(data, size, &any, &g, err, sizeof(err)) == 0) {
                estimate(g);
                graph_free(g);
        }
        return 0;
}

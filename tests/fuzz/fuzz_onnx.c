/* libFuzzer target for the ONNX importer: any bytes given to graph_load must be rejected with
 * a message or imported, never crash, hang or leak. An imported graph also goes through the
 * cost estimate npud makes on the loop thread for every run (shape inference of each node
 * with data that is not there yet), inputs bound with their declared shapes (open extents
 * as 1). */
#include <stddef.h>
#include <stdint.h>

#include "../../daemon/graph/exec.h"
#include "../../daemon/graph/onnx-import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct ops_tensor in[GRAPH_MAX_IO];
        struct graph *g;
        char err[4096];

        if (onnx_import(data, size, NULL, &g, err, sizeof(err)) != 0)
                return 0;
        for (int i = 0; i < g->ninputs && i < GRAPH_MAX_IO; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                in[i].dtype = v->dtype ? v->dtype : 1;
                in[i].ndim = v->ndim < 0 ? 1 : v->ndim;
                for (int d = 0; d < OPS_MAX_DIMS; d++)
                        in[i].dims[d] = d < v->ndim && v->dims[d] >= 0 ? v->dims[d] : 1;
                in[i].data = NULL;
        }
        (void)graph_estimate_ns(g, g->ninputs, in, 1e9, 1e11, NULL);
        graph_free(g);
        return 0;
}

/* The importer and the ai.onnx.preview.training domain: a model importing the domain runs
 * its optimizers; the domain holds nothing else, the optimizers are not in the default
 * domain, a node of a domain the model does not import and a malformed optimizer node are
 * import errors naming the node. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "proto/dtype.h"

#include "tests/onnx-build.h"

#define TRAIN "ai.onnx.preview.training"
#define F32 PROTO_DTYPE_FLOAT32
#define I64 PROTO_DTYPE_INT64

static float r_val = 0.1f;
static int64_t t_val = 0;

static struct ops_tensor tensor1(int dtype, void *data, int ndim, int64_t d0)
{
        struct ops_tensor t = { .dtype = dtype, .ndim = ndim, .data = data };

        t.dims[0] = d0;
        return t;
}

static void near(float got, double want)
{
        ck_assert_msg(fabs(got - want) <= 1e-6 + 1e-5 * fabs(want), "%.9g, wanted %.9g", got,
                      want);
}


/* One node with inputs in[] and outputs out[] (float32 [2], except R and T) in domain dom;
 * the model imports the default domain at 17 and, when train_version > 0, the training
 * domain at that version. 0 or the import's error. */
static int import_one(const char *op, const char *dom, int train_version, int nin,
                      const char *const *in, int nout, const char *const *out,
                      struct graph **ret, char *err, size_t errlen)
{
        static const int64_t d2[] = { 2 };
        Onnx__ModelProto *m = K(sizeof(*m));
        Onnx__OperatorSetIdProto *o = K(sizeof(*o)), *ot = K(sizeof(*ot));
        Onnx__GraphProto *g = K(sizeof(*g));
        Onnx__NodeProto *n = node(op, nin, in, nout, out);
        Onnx__ValueInfoProto **vin = K(sizeof(void *) * (size_t)nin);
        Onnx__ValueInfoProto **vout = K(sizeof(void *) * (size_t)nout);
        uint8_t *buf;
        size_t len;
        int rc, i;

        onnx__model_proto__init(m);
        onnx__operator_set_id_proto__init(o);
        onnx__operator_set_id_proto__init(ot);
        onnx__graph_proto__init(g);
        o->domain = (char *)"";
        o->has_version = 1;
        o->version = 17;
        ot->domain = (char *)TRAIN;
        ot->has_version = 1;
        ot->version = train_version;
        m->n_opset_import = train_version > 0 ? 2 : 1;
        m->opset_import = (Onnx__OperatorSetIdProto **)list(2, o, ot);
        n->domain = (char *)dom;
        if (strcmp(op, "Momentum") == 0) {
                attr_f(n, "alpha", 0.9f);
                attr_f(n, "beta", 0.1f);
                attr_f(n, "norm_coefficient", 0);
                attr_s(n, "mode", "nesterov");
        }
        for (i = 0; i < nin; i++)
                vin[i] = i == 0   ? tvalue(in[i], F32, 0, NULL)
                         : i == 1 ? tvalue(in[i], I64, 0, NULL)
                                  : tvalue(in[i], F32, 1, d2);
        for (i = 0; i < nout; i++)
                vout[i] = tvalue(out[i], F32, 1, d2);
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, n);
        g->n_input = (size_t)nin;
        g->input = vin;
        g->n_output = (size_t)nout;
        g->output = vout;
        m->graph = g;
        len = onnx__model_proto__get_packed_size(m);
        buf = malloc(len);
        ck_assert_ptr_nonnull(buf);
        onnx__model_proto__pack(m, buf);
        keep_free();
        rc = onnx_import(buf, len, NULL, ret, err, errlen);
        free(buf);
        return rc;
}

static const char *const mom_in[] = { "R", "T", "X", "G", "V" };
static const char *const mom_out[] = { "X_new", "V_new" };

START_TEST(test_import_training_domain)
{
        float x[2] = { 1, 2 }, gr[2] = { 0.5f, -1 }, v[2] = { 0, 1 }, xo[2], vo[2];
        struct ops_tensor in[5], out[2];
        struct graph *g;
        char err[512];

        /* imported from its domain, it runs */
        ck_assert_msg(import_one("Momentum", TRAIN, 1, 5, mom_in, 2, mom_out, &g, err,
                                 sizeof(err)) == 0, "%s", err);
        t_val = 0;
        in[0] = tensor1(F32, &r_val, 0, 0);
        in[1] = tensor1(I64, &t_val, 0, 0);
        in[2] = tensor1(F32, x, 1, 2);
        in[3] = tensor1(F32, gr, 1, 2);
        in[4] = tensor1(F32, v, 1, 2);
        out[0] = tensor1(F32, xo, 1, 2);
        out[1] = tensor1(F32, vo, 1, 2);
        ck_assert_msg(graph_exec(g, 5, in, 2, out, err, sizeof(err)) == 0, "%s", err);
        /* nesterov, T = 0: v = 0.9 v + g; x -= r (g + 0.9 v) */
        near(vo[1], 0.9 * 1 - 1);
        near(xo[1], 2 - 0.1f * (-1 + 0.9 * (0.9 - 1)));
        graph_free(g);

        /* the training domain holds only the optimizers */
        ck_assert_int_ne(import_one("Add", TRAIN, 1, 2, (const char *[]){ "R", "T" }, 1,
                                    (const char *[]){ "y" }, &g, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "ai.onnx.preview.training.Add") &&
                              strstr(err, "unsupported"), "%s", err);
        /* and the optimizers are not in the default domain */
        ck_assert_int_ne(import_one("Momentum", "", 1, 5, mom_in, 2, mom_out, &g, err,
                                    sizeof(err)), 0);
        ck_assert_msg(strstr(err, "unsupported"), "%s", err);
        /* a node of a domain the model does not import */
        ck_assert_int_ne(import_one("Momentum", TRAIN, 0, 5, mom_in, 2, mom_out, &g, err,
                                    sizeof(err)), 0);
        ck_assert_msg(strstr(err, "does not import domain"), "%s", err);
        /* a bad attribute is an import error naming the node, not a crash at run */
        ck_assert_int_ne(import_one("Momentum", TRAIN, 1, 4, mom_in, 2, mom_out, &g, err,
                                    sizeof(err)), 0);
        ck_assert_msg(strstr(err, "Momentum"), "%s", err);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("onnx-train");
        TCase *tc = tcase_create("import");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_import_training_domain);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

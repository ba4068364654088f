/* What the importer and the operators do according to the opset a model declares, on small
 * hand-built models run through the registry: Cast/CastLike to bfloat16 truncating in
 * models of opset 17 and older and rounding after, graph inputs whose data no node reads
 * (CastLike's "like") accepting any shape of their dtype, and one test per rule converting
 * models of opsets 1 to 8 to the operators' current form (graph/convert-opset.c). */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "proto/dtype.h"
#include "proto/errors.h"

#include "tests/onnx-build.h"

/* A float32 initializer. */
static Onnx__TensorProto *finit(const char *name, int ndim, const int64_t *dims, int n,
                                const float *v)
{
        Onnx__TensorProto *t = K(sizeof(*t));

        onnx__tensor_proto__init(t);
        t->name = (char *)name;
        t->has_data_type = 1;
        t->data_type = PROTO_DTYPE_FLOAT32;
        t->n_dims = (size_t)ndim;
        t->dims = K(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
        memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
        t->n_float_data = (size_t)n;
        t->float_data = K(sizeof(float) * (size_t)n);
        memcpy(t->float_data, v, sizeof(float) * (size_t)n);
        return t;
}

struct model {
        int opset;
        int nnode, nin, nout, ninit;
        Onnx__NodeProto *nodes[8];
        Onnx__ValueInfoProto *in[8], *out[8];
        Onnx__TensorProto *init[8];
};

/* Packs m and imports it with the registry's operators; 0 or the import's error. */
static int import(const struct model *mm, struct graph **ret, char *err, size_t errlen)
{
        Onnx__GraphProto *g = graph_proto();
        uint8_t *buf;
        size_t len;
        int rc;

        g->n_node = (size_t)mm->nnode;
        g->node = (Onnx__NodeProto **)mm->nodes;
        g->n_input = (size_t)mm->nin;
        g->input = (Onnx__ValueInfoProto **)mm->in;
        g->n_output = (size_t)mm->nout;
        g->output = (Onnx__ValueInfoProto **)mm->out;
        g->n_initializer = (size_t)mm->ninit;
        g->initializer = (Onnx__TensorProto **)mm->init;
        buf = model_pack(g, mm->opset, &len);
        rc = onnx_import(buf, len, NULL, ret, err, errlen);
        free(buf);
        return rc;
}

static struct ops_tensor tens(int dtype, void *data, int ndim, ...)
{
        struct ops_tensor t = { .dtype = dtype, .ndim = ndim, .data = data };
        va_list ap;

        va_start(ap, ndim);
        for (int i = 0; i < ndim; i++)
                t.dims[i] = va_arg(ap, int64_t);
        va_end(ap);
        return t;
}

/* ---- bfloat16 ---- */

/* y = Cast(x, to=bfloat16) and z = CastLike(x, like) at the given opset. */
static struct graph *bf16_model(int opset)
{
        static const int64_t d4[] = { 4 }, d23[] = { 2, 3 };
        struct model m = { .opset = opset };
        struct graph *g;
        char err[512];

        m.nodes[m.nnode] = node("Cast", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        attr_i(m.nodes[m.nnode++], "to", PROTO_DTYPE_BFLOAT16);
        m.nodes[m.nnode++] = node("CastLike", 2, (const char *[]){ "x", "like" }, 1,
                                  (const char *[]){ "z" });
        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 1, d4);
        m.in[m.nin++] = tvalue("like", PROTO_DTYPE_BFLOAT16, 2, d23);
        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_BFLOAT16, 1, d4);
        m.out[m.nout++] = tvalue("z", PROTO_DTYPE_BFLOAT16, 1, d4);
        ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
        return g;
}

START_TEST(test_bf16_by_opset)
{
        /* 0x3ef5e000 lies above the midpoint of 0x3ef5 and 0x3ef6; 0x3f808000 is a tie */
        uint32_t bits[4] = { 0x3ef5e000, 0x3f808000, 0x7fc00001, 0xbf7fffff };
        float x[4];
        uint16_t like = 0, y[4], z[4];
        static const uint16_t trunc[4] = { 0x3ef5, 0x3f80, 0x7fc0, 0xbf7f };
        static const uint16_t rne[4] = { 0x3ef6, 0x3f80, 0x7fc0, 0xbf80 };
        struct ops_tensor in[2], out[2];
        char err[512];

        memcpy(x, bits, sizeof(x));
        for (int opset = 17; opset <= 18; opset++) {
                struct graph *g = bf16_model(opset);
                const uint16_t *want = opset == 17 ? trunc : rne;

                /* "like" is declared [2,3]: only its dtype matters, any shape binds */
                in[0] = tens(PROTO_DTYPE_FLOAT32, x, 1, (int64_t)4);
                in[1] = tens(PROTO_DTYPE_BFLOAT16, &like, 1, (int64_t)1);
                out[0] = tens(PROTO_DTYPE_BFLOAT16, y, 1, (int64_t)4);
                out[1] = tens(PROTO_DTYPE_BFLOAT16, z, 1, (int64_t)4);
                ck_assert_msg(graph_check_inputs(g, 2, in, err, sizeof(err)) == 0, "%s", err);
                ck_assert_msg(graph_exec(g, 2, in, 2, out, err, sizeof(err)) == 0, "%s", err);
                for (int i = 0; i < 4; i++) {
                        ck_assert_msg(y[i] == want[i], "opset %d Cast [%d]: %#x, want %#x",
                                      opset, i, y[i], want[i]);
                        ck_assert_msg(z[i] == want[i], "opset %d CastLike [%d]: %#x, want %#x",
                                      opset, i, z[i], want[i]);
                }
                /* the dtype still binds */
                in[1].dtype = PROTO_DTYPE_FLOAT16;
                ck_assert_int_ne(graph_check_inputs(g, 2, in, err, sizeof(err)), 0);
                ck_assert_msg(strstr(err, "input 'like' is bfloat16"), "%s", err);
                /* an input whose data is read keeps its shape */
                in[1].dtype = PROTO_DTYPE_BFLOAT16;
                in[0].dims[0] = 3;
                ck_assert_int_ne(graph_check_inputs(g, 2, in, err, sizeof(err)), 0);
                ck_assert_msg(strstr(err, "input 'x' has shape [4]"), "%s", err);
                graph_free(g);
        }
}
END_TEST


/* ---- old opsets ---- */

/* Runs g on float32 inputs into one float32 output of n elements and compares. */
static void run_f32(struct graph *g, int nin, struct ops_tensor *in, struct ops_tensor out,
                    const float *want, int n)
{
        char err[512];

        ck_assert_msg(graph_exec(g, nin, in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < n; i++)
                ck_assert_msg(fabsf(((float *)out.data)[i] - want[i]) < 1e-5f,
                              "[%d]: %g, want %g", i, ((float *)out.data)[i], want[i]);
}

/* Add/Sub/Mul/Div/Pow-6 with broadcast = 1 and axis = 1: B [3] lines up with A [2,3,2]'s
 * channels; without axis it lines up with the last dimensions (numpy's way); the old
 * consumed_inputs attribute is dropped. */
START_TEST(test_opset6_broadcast_axis)
{
        static const char *const ops[] = { "Add", "Sub", "Mul", "Div", "Pow" };
        static const int64_t da[] = { 2, 3, 2 }, db[] = { 3 }, db2[] = { 2 };
        float a[12], b[3] = { 1, 2, 3 }, b2[2] = { 2, 4 }, y[12], want[12];
        char err[512];

        for (int i = 0; i < 12; i++)
                a[i] = (float)(i + 1);
        for (int k = 0; k < 5; k++)
                for (int axis = 0; axis <= 1; axis++) {
                        struct model m = { .opset = 6 };
                        struct ops_tensor in[2];
                        struct graph *g;

                        m.nodes[0] = node(ops[k], 2, (const char *[]){ "a", "b" }, 1,
                                          (const char *[]){ "y" });
                        attr_i(m.nodes[0], "broadcast", 1);
                        if (axis)
                                attr_i(m.nodes[0], "axis", 1);
                        attr_ints(m.nodes[0], "consumed_inputs", 2, (const int64_t[]){ 0, 0 });
                        m.nnode = 1;
                        m.in[m.nin++] = tvalue("a", PROTO_DTYPE_FLOAT32, 3, da);
                        m.in[m.nin++] = tvalue("b", PROTO_DTYPE_FLOAT32, 1, axis ? db : db2);
                        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_FLOAT32, 3, da);
                        ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s: %s", ops[k], err);
                        for (int i = 0; i < 12; i++) {
                                float x = a[i], v = axis ? b[(i / 2) % 3] : b2[i % 2];

                                want[i] = k == 0 ? x + v : k == 1 ? x - v : k == 2 ? x * v
                                        : k == 3 ? x / v : powf(x, v);
                        }
                        in[0] = tens(PROTO_DTYPE_FLOAT32, a, 3, (int64_t)2, (int64_t)3, (int64_t)2);
                        in[1] = axis ? tens(PROTO_DTYPE_FLOAT32, b, 1, (int64_t)3)
                                     : tens(PROTO_DTYPE_FLOAT32, b2, 1, (int64_t)2);
                        run_f32(g, 2, in, tens(PROTO_DTYPE_FLOAT32, y, 3, (int64_t)2, (int64_t)3,
                                               (int64_t)2), want, 12);
                        graph_free(g);
                }
        /* B that does not fit A from axis: the run names the node */
        {
                struct model m = { .opset = 6 };
                struct ops_tensor in[2];
                struct graph *g;

                m.nodes[0] = node("Add", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
                m.nodes[0]->name = (char *)"old_add";
                attr_i(m.nodes[0], "broadcast", 1);
                attr_i(m.nodes[0], "axis", 2);
                m.nnode = 1;
                m.in[m.nin++] = tvalue("a", PROTO_DTYPE_FLOAT32, -1, NULL);
                m.in[m.nin++] = tvalue("b", PROTO_DTYPE_FLOAT32, -1, NULL);
                m.out[m.nout++] = tvalue("y", PROTO_DTYPE_FLOAT32, -1, NULL);
                ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
                in[0] = tens(PROTO_DTYPE_FLOAT32, a, 3, (int64_t)2, (int64_t)3, (int64_t)2);
                in[1] = tens(PROTO_DTYPE_FLOAT32, b, 1, (int64_t)3);
                ck_assert_int_ne(graph_exec(g, 2, in, 1,
                                            &(struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32,
                                                                  .ndim = 3, .dims = { 2, 3, 2 },
                                                                  .data = y },
                                            err, sizeof(err)), 0);
                ck_assert_msg(strstr(err, "old_add/broadcast_axis") && strstr(err, "does not match"),
                              "%s", err);
                graph_free(g);
        }
}
END_TEST

/* PRelu-6: a slope of one value per channel (axis 1), and of one value. */
START_TEST(test_opset6_prelu)
{
        static const int64_t dx[] = { 2, 3, 2 }, ds[] = { 3 }, d1[] = { 1 };
        float x[12], s[3] = { 0.1f, 0.2f, 0.3f }, y[12], want[12];
        char err[512];

        for (int i = 0; i < 12; i++)
                x[i] = (float)(i - 6);
        for (int one = 0; one <= 1; one++) {
                struct model m = { .opset = 6 };
                struct ops_tensor in[2];
                struct graph *g;

                m.nodes[m.nnode++] = node("PRelu", 2, (const char *[]){ "x", "s" }, 1,
                                          (const char *[]){ "y" });
                m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 3, dx);
                m.in[m.nin++] = tvalue("s", PROTO_DTYPE_FLOAT32, 1, one ? d1 : ds);
                m.out[m.nout++] = tvalue("y", PROTO_DTYPE_FLOAT32, 3, dx);
                ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
                for (int i = 0; i < 12; i++)
                        want[i] = x[i] >= 0 ? x[i] : x[i] * (one ? s[0] : s[(i / 2) % 3]);
                in[0] = tens(PROTO_DTYPE_FLOAT32, x, 3, (int64_t)2, (int64_t)3, (int64_t)2);
                in[1] = tens(PROTO_DTYPE_FLOAT32, s, 1, (int64_t)(one ? 1 : 3));
                run_f32(g, 2, in, tens(PROTO_DTYPE_FLOAT32, y, 3, (int64_t)2, (int64_t)3,
                                       (int64_t)2), want, 12);
                graph_free(g);
        }
}
END_TEST

/* BatchNormalization of opset 8 with spatial = 1 (and is_test, consumed_inputs of opset 5)
 * runs as the current operator; spatial = 0 is refused naming the node. */
START_TEST(test_opset8_batchnorm_spatial)
{
        static const int64_t dx[] = { 1, 2, 2 }, dc[] = { 2 };
        static const float one2[] = { 1, 1 }, zero2[] = { 0, 0 }, mean[] = { 1, 2 },
                           var[] = { 4, 16 };
        float x[4] = { 1, 3, 2, 6 }, y[4];
        const float want[4] = { 0, 1, 0, 1 };
        char err[512];

        for (int spatial = 1; spatial >= 0; spatial--)
                for (int opset = 5; opset <= 8; opset += 3) {
                        struct model m = { .opset = opset };
                        struct ops_tensor in = tens(PROTO_DTYPE_FLOAT32, x, 3, (int64_t)1,
                                                    (int64_t)2, (int64_t)2);
                        struct graph *g;
                        int rc;

                        m.nodes[0] = node("BatchNormalization", 5,
                                          (const char *[]){ "x", "s", "b", "m", "v" }, 1,
                                          (const char *[]){ "y" });
                        m.nodes[0]->name = (char *)"bn";
                        attr_i(m.nodes[0], "spatial", spatial);
                        attr_i(m.nodes[0], "is_test", 1);
                        attr_f(m.nodes[0], "epsilon", 0);
                        if (opset < 6)
                                attr_ints(m.nodes[0], "consumed_inputs", 2,
                                          (const int64_t[]){ 0, 0 });
                        m.nnode = 1;
                        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 3, dx);
                        m.init[m.ninit++] = finit("s", 1, dc, 2, one2);
                        m.init[m.ninit++] = finit("b", 1, dc, 2, zero2);
                        m.init[m.ninit++] = finit("m", 1, dc, 2, mean);
                        m.init[m.ninit++] = finit("v", 1, dc, 2, var);
                        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_FLOAT32, 3, dx);
                        rc = import(&m, &g, err, sizeof(err));
                        if (!spatial) {
                                ck_assert_int_eq(rc, PROTO_E_UNSUPPORTED);
                                ck_assert_msg(strstr(err, "node 'bn'") && strstr(err, "spatial = 0"),
                                              "%s", err);
                                continue;
                        }
                        ck_assert_msg(rc == 0, "opset %d: %s", opset, err);
                        run_f32(g, 1, &in, tens(PROTO_DTYPE_FLOAT32, y, 3, (int64_t)1, (int64_t)2,
                                                (int64_t)2), want, 4);
                        graph_free(g);
                }
}
END_TEST

/* Upsample-1: height_scale and width_scale become Upsample-7's scales. */
START_TEST(test_opset6_upsample)
{
        static const int64_t dx[] = { 1, 1, 2, 2 }, dy[] = { 1, 1, 4, 6 };
        float x[4] = { 1, 2, 3, 4 }, y[24], want[24];
        struct model m = { .opset = 6 };
        struct ops_tensor in = tens(PROTO_DTYPE_FLOAT32, x, 4, (int64_t)1, (int64_t)1, (int64_t)2,
                                    (int64_t)2);
        struct graph *g;
        char err[512];

        m.nodes[0] = node("Upsample", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        attr_f(m.nodes[0], "height_scale", 2);
        attr_f(m.nodes[0], "width_scale", 3);
        attr_s(m.nodes[0], "mode", "nearest");
        m.nnode = 1;
        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 4, dx);
        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_FLOAT32, 4, dy);
        ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 4; i++)
                for (int j = 0; j < 6; j++)
                        want[i * 6 + j] = x[(i / 2) * 2 + j / 3];
        run_f32(g, 1, &in, tens(PROTO_DTYPE_FLOAT32, y, 4, (int64_t)1, (int64_t)1, (int64_t)4,
                                (int64_t)6), want, 24);
        graph_free(g);
}
END_TEST

/* Cast-1 names its target type; Concat-1 without axis joins on axis 1; Relu-1 and
 * Sum-1 lose consumed_inputs. */
START_TEST(test_opset1_cast_concat_consumed)
{
        static const int64_t d22[] = { 2, 2 }, d24[] = { 2, 4 };
        float x[4] = { 1.5f, -2.5f, 3, 4 }, y[8];
        int32_t yi[4];
        struct model m = { .opset = 1 };
        struct ops_tensor in = tens(PROTO_DTYPE_FLOAT32, x, 2, (int64_t)2, (int64_t)2), out;
        const float want[8] = { 1.5f, 0, 1.5f, 0, 3, 4, 3, 4 };
        struct graph *g;
        char err[512];

        m.nodes[m.nnode] = node("Relu", 1, (const char *[]){ "x" }, 1, (const char *[]){ "r" });
        attr_ints(m.nodes[m.nnode++], "consumed_inputs", 1, (const int64_t[]){ 0 });
        m.nodes[m.nnode] = node("Sum", 1, (const char *[]){ "r" }, 1, (const char *[]){ "s" });
        attr_ints(m.nodes[m.nnode++], "consumed_inputs", 1, (const int64_t[]){ 0 });
        m.nodes[m.nnode++] = node("Concat", 2, (const char *[]){ "s", "r" }, 1,
                                  (const char *[]){ "y" });
        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 2, d22);
        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_FLOAT32, 2, d24);
        ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
        run_f32(g, 1, &in, tens(PROTO_DTYPE_FLOAT32, y, 2, (int64_t)2, (int64_t)4), want, 8);
        graph_free(g);

        m = (struct model){ .opset = 1 };
        m.nodes[0] = node("Cast", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        attr_s(m.nodes[0], "to", "INT32");
        m.nnode = 1;
        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 2, d22);
        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_INT32, 2, d22);
        ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
        out = tens(PROTO_DTYPE_INT32, yi, 2, (int64_t)2, (int64_t)2);
        ck_assert_msg(graph_exec(g, 1, &in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(yi[0], 1);
        ck_assert_int_eq(yi[1], -2);
        ck_assert_int_eq(yi[3], 4);
        graph_free(g);

        m = (struct model){ .opset = 1 };
        m.nodes[0] = node("Cast", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        m.nodes[0]->name = (char *)"c1";
        attr_s(m.nodes[0], "to", "COMPLEX64");
        m.nnode = 1;
        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 2, d22);
        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_INT32, 2, d22);
        ck_assert_int_ne(import(&m, &g, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "node 'c1'") && strstr(err, "unknown target type 'COMPLEX64'"),
                      "%s", err);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("onnx_opset");
        TCase *tc = tcase_create("onnx_opset");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_bf16_by_opset);
        tcase_add_test(tc, test_opset6_broadcast_axis);
        tcase_add_test(tc, test_opset6_prelu);
        tcase_add_test(tc, test_opset8_batchnorm_spatial);
        tcase_add_test(tc, test_opset6_upsample);
        tcase_add_test(tc, test_opset1_cast_concat_consumed);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

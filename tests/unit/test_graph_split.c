/* Graph steps split into parts (graph/split.h): a MatMul (leading dimensions flattened into
 * rows), a Gemm by rows (C with a row per output row) and by columns (transB, a row-vector
 * bias), a Conv by output channels and by images, each run as its graph's steps with the
 * node step in parts (last part first, uneven counts) gives exactly, bit for bit, what the
 * whole node gives; the estimate says how many parts each step may take (a small MatMul
 * stays whole). The same for the FusedGemm the compiler makes of each of them with a bias Add
 * and a Relu behind it (the bias sliced with the columns or channels). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "graph/compile.h"
#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "graph/split.h"
#include "graph/steps.h"
#include "proto/dtype.h"

#include "tests/check-run.h"
#include "tests/onnx-build.h"

#define MAXIN 3

struct model {
        Onnx__NodeProto *n;
        int bias_ndim;        /* > 0: the node is followed by Add(bias) and Relu, fused */
        int64_t bias_dims[4]; /* the bias initializer's shape */
        int ninit;            /* more of the node's inputs as initializers (a fused Conv's
                               * weights must be constants) */
        const char *init_names[2];
        int init_ndim[2];
        int64_t init_dims[2][4];
        int nin;
        const char *names[MAXIN];
        int ndim[MAXIN];
        int64_t dims[MAXIN][4];
        int ydim;
        int64_t ydims[4];
};

static int64_t count(int ndim, const int64_t *dims)
{
        int64_t n = 1;
        for (int i = 0; i < ndim; i++)
                n *= dims[i];
        return n;
}

/* A float32 initializer of the given shape holding varied values. */
static Onnx__TensorProto *finit(const char *name, int ndim, const int64_t *dims)
{
        int64_t n = count(ndim, dims);
        float *v = K(sizeof(float) * (size_t)n);

        for (int64_t k = 0; k < n; k++)
                v[k] = (float)((k * 7919) % 23) / 11.0f - 1.0f;
        return finit_data(name, ndim, dims, v);
}

static struct graph *import(const struct model *m)
{
        Onnx__GraphProto *g = graph_proto();
        Onnx__ValueInfoProto **in = K(sizeof(*in) * MAXIN);
        struct graph *gr = NULL;
        char err[256] = "";
        size_t len;

        for (int i = 0; i < m->nin; i++)
                in[i] = tvalue(m->names[i], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, m->ndim[i], m->dims[i]);
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, m->n);
        if (m->bias_ndim) { /* y = Relu(op(...) + bias) */
                m->n->output[0] = (char *)"p";
                g->n_node = 3;
                g->node = (Onnx__NodeProto **)list(3, m->n,
                                                   node("Add", 2, (const char *[]){ "p", "bias" }, 1,
                                                        (const char *[]){ "q" }),
                                                   node("Relu", 1, (const char *[]){ "q" }, 1,
                                                        (const char *[]){ "y" }));
                g->n_initializer = (size_t)(1 + m->ninit);
                g->initializer = K(sizeof(*g->initializer) * g->n_initializer);
                g->initializer[0] = finit("bias", m->bias_ndim, m->bias_dims);
                for (int i = 0; i < m->ninit; i++)
                        g->initializer[1 + i] = finit(m->init_names[i], m->init_ndim[i], m->init_dims[i]);
        }
        g->n_input = (size_t)m->nin;
        g->input = in;
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, m->ydim, m->ydims));
        uint8_t *buf = model_pack(g, 17, &len);
        keep_free();
        ck_assert_msg(onnx_import(buf, len, NULL, &gr, err, sizeof(err)) == 0, "import: %s", err);
        free(buf);
        if (m->bias_ndim) {
                ck_assert_msg(graph_compile(gr, GRAPH_COMPILE_ALL & ~GRAPH_COMPILE_TUNE, err, sizeof(err)) == 0,
                              "compile: %s", err);
                ck_assert_int_eq(gr->nnodes, 1);
                ck_assert_str_eq(gr->nodes[0].def->name, "FusedGemm");
        }
        ck_assert_int_eq(graph_steps_build(gr, err, sizeof(err)), 0);
        return gr;
}

/* Parts are exact, but for a Conv's row blocks: their GEMM over fewer columns may sum in
 * another order (graph/split.h), which the spatial test allows within 1e-5 relative. */
static int approx_ok;
/* The accumulation check_parts loads the graph with (enum graph_accumulate), and the parts a
 * worker should take of its node step as the estimate says (graph_estimate_steps_parts). */
static int accumulate;
static uint8_t balance_seen;

static int same(float a, float b)
{
        if (!approx_ok)
                return memcmp(&a, &b, sizeof(a)) == 0;
        return fabsf(a - b) <= 1e-5f * fmaxf(fabsf(a), fabsf(b)) + 1e-7f;
}

/* Whole against parts (nparts of them, run last first); returns the most parts the
 * estimate allows for the node step. */
static uint32_t check_parts(const struct model *m, int nparts)
{
        struct graph *g = import(m);
        struct ops_tensor t[MAXIN + 1];

        graph_set_accumulate(g, accumulate);
        float *data[MAXIN], *y0, *y1;
        int64_t yn = count(m->ydim, m->ydims);
        char err[256] = "";
        uint32_t seed = 12345;

        for (int i = 0; i < m->nin; i++) {
                int64_t n = count(m->ndim[i], m->dims[i]);
                data[i] = malloc(sizeof(float) * (size_t)n);
                for (int64_t k = 0; k < n; k++) {
                        seed = seed * 1664525u + 1013904223u;
                        data[i][k] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
                }
                t[i] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = m->ndim[i], .data = data[i] };
                memcpy(t[i].dims, m->dims[i], sizeof(int64_t) * (size_t)m->ndim[i]);
        }
        y0 = calloc((size_t)yn, sizeof(float));
        y1 = calloc((size_t)yn, sizeof(float));
        t[m->nin] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = m->ydim, .data = y0 };
        memcpy(t[m->nin].dims, m->ydims, sizeof(int64_t) * (size_t)m->ydim);
        ck_assert_msg(graph_exec(g, m->nin, t, 1, &t[m->nin], err, sizeof(err)) == 0, "whole: %s", err);

        t[m->nin].data = y1;
        struct graph_bind b = { .g = g, .nin = m->nin, .nout = 1 };
        ck_assert_msg(graph_run_step(&b, 0, t, err, sizeof(err)) == 0, "bind: %s", err);
        for (int k = nparts - 1; k >= 0; k--)
                ck_assert_msg(graph_run_step_part(&b, 1, k, nparts, t, err, sizeof(err)) == 0,
                              "part %d of %d: %s", k, nparts, err);
        graph_run_step_done(&b, 1);
        ck_assert_msg(graph_run_step(&b, 2, t, err, sizeof(err)) == 0, "outputs: %s", err);
        graph_run_free(b.run);
        for (int64_t k = 0; k < yn; k++)
                ck_assert_msg(same(y0[k], y1[k]),
                              "%s in %d parts: y[%lld] = %.9g, whole %.9g", m->n->op_type, nparts,
                              (long long)k, y1[k], y0[k]);

        uint64_t cost[3 * OPS_ENGINE_COUNT];
        uint32_t parts[3];
        uint8_t balance[3];
        double rate[OPS_ENGINE_COUNT] = { 1e12, 1e11, 1e10, 1e10 };
        int cores[OPS_ENGINE_COUNT] = { 1, 1, 1, 1 };
        t[m->nin].data = NULL;
        ck_assert_int_eq(graph_estimate_steps_parts(g, m->nin, t, rate, cores, 1e10, cost, parts, balance, NULL), 0);
        ck_assert_uint_eq(parts[0], 1);
        ck_assert_uint_eq(parts[2], 1);
        ck_assert_uint_eq(balance[0], 1);
        ck_assert_uint_eq(balance[2], 1);
        balance_seen = balance[1];
        for (int i = 0; i < m->nin; i++)
                free(data[i]);
        free(y0);
        free(y1);
        graph_free(g);
        return parts[1];
}

#define DIMS(...) { __VA_ARGS__ }

START_TEST(test_matmul_rows)
{
        struct model m = { .nin = 2, .names = { "a", "b" }, .ndim = { 3, 2 },
                           .dims = { DIMS(3, 200, 64), DIMS(64, 48) }, .ydim = 3, .ydims = { 3, 200, 48 } };
        m.n = node("MatMul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&m, 2), 600 / GRAPH_SPLIT_MIN_GEMM_ROWS);
        m.n = node("MatMul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        check_parts(&m, 7);
        /* small: one part */
        struct model s = { .nin = 2, .names = { "a", "b" }, .ndim = { 2, 2 },
                           .dims = { DIMS(16, 16), DIMS(16, 16) }, .ydim = 2, .ydims = { 16, 16 } };
        s.n = node("MatMul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&s, 1), 1);
}
END_TEST

START_TEST(test_gemm_rows_and_columns)
{
        /* rows: C with a row per output row goes with them */
        struct model r = { .nin = 3, .names = { "a", "b", "c" }, .ndim = { 2, 2, 2 },
                           .dims = { DIMS(600, 32), DIMS(32, 40), DIMS(600, 40) }, .ydim = 2, .ydims = { 600, 40 } };
        r.n = node("Gemm", 3, (const char *[]){ "a", "b", "c" }, 1, (const char *[]){ "y" });
        attr_f(r.n, "alpha", 0.5f);
        attr_f(r.n, "beta", 2.0f);
        ck_assert_uint_eq(check_parts(&r, 3), 600 / GRAPH_SPLIT_MIN_GEMM_ROWS);
        /* columns: an MLP layer (transB, row-vector bias) on a small batch */
        struct model c = { .nin = 3, .names = { "a", "b", "c" }, .ndim = { 2, 2, 1 },
                           .dims = { DIMS(8, 64), DIMS(1100, 64), DIMS(1100) }, .ydim = 2, .ydims = { 8, 1100 } };
        c.n = node("Gemm", 3, (const char *[]){ "a", "b", "c" }, 1, (const char *[]){ "y" });
        attr_i(c.n, "transB", 1);
        ck_assert_uint_eq(check_parts(&c, 3), 1100 / GRAPH_SPLIT_MIN_ROWS);
        /* a full [M,N] C cannot follow a column split: whole */
        struct model w = { .nin = 3, .names = { "a", "b", "c" }, .ndim = { 2, 2, 2 },
                           .dims = { DIMS(8, 64), DIMS(600, 64), DIMS(8, 600) }, .ydim = 2, .ydims = { 8, 600 } };
        w.n = node("Gemm", 3, (const char *[]){ "a", "b", "c" }, 1, (const char *[]){ "y" });
        attr_i(w.n, "transB", 1);
        ck_assert_uint_eq(check_parts(&w, 2), 1);
}
END_TEST

/* One image of many rows: blocks of output rows, each with its own pads at the top and the
 * bottom; strides, dilations and asymmetric pads too; a padded-to-SAME (auto_pad) one
 * stays by channels. */
START_TEST(test_conv_spatial)
{
        approx_ok = 1;
        struct model sp = { .nin = 3, .names = { "x", "w", "b" }, .ndim = { 4, 4, 1 },
                            .dims = { DIMS(1, 5, 90, 23), DIMS(7, 5, 3, 3), DIMS(7) },
                            .ydim = 4, .ydims = { 1, 7, 90, 23 } };
        for (int n = 2; n <= 5; n++) {
                sp.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
                attr_ints(sp.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
                uint32_t max = check_parts(&sp, n);
                ck_assert_uint_eq(max, 90 / GRAPH_SPLIT_MIN_SPATIAL);
        }
        /* stride 2, dilation 2, pads 3 at the top and 0 at the bottom: (121 + 3 - 5) / 2 + 1 */
        struct model st = { .nin = 2, .names = { "x", "w" }, .ndim = { 4, 4 },
                            .dims = { DIMS(1, 4, 121, 16), DIMS(6, 2, 3, 3) },
                            .ydim = 4, .ydims = { 1, 6, 60, 8 } };
        for (int n = 2; n <= 3; n++) {
                st.n = node("Conv", 2, (const char *[]){ "x", "w" }, 1, (const char *[]){ "y" });
                attr_ints(st.n, "pads", 4, (const int64_t[]){ 3, 1, 0, 0 });
                attr_ints(st.n, "strides", 2, (const int64_t[]){ 2, 2 });
                attr_ints(st.n, "dilations", 2, (const int64_t[]){ 2, 1 });
                attr_i(st.n, "group", 2);
                ck_assert_uint_eq(check_parts(&st, n), 60 / GRAPH_SPLIT_MIN_SPATIAL);
        }
        struct model au = { .nin = 2, .names = { "x", "w" }, .ndim = { 4, 4 },
                            .dims = { DIMS(1, 4, 60, 8), DIMS(64, 4, 3, 3) },
                            .ydim = 4, .ydims = { 1, 64, 60, 8 } };
        au.n = node("Conv", 2, (const char *[]){ "x", "w" }, 1, (const char *[]){ "y" });
        attr_s(au.n, "auto_pad", "SAME_UPPER");
        ck_assert_uint_eq(check_parts(&au, 2), 64 / GRAPH_SPLIT_MIN_CHANNELS);
        ck_assert_uint_eq(balance_seen, 1);
        approx_ok = 0;
}
END_TEST

/* Under float64 and mixed accumulation a Conv's row blocks are computed in place, the same
 * sums whatever the blocks (bit for bit against the whole), so they may be as small as
 * GRAPH_SPLIT_MIN_SPATIAL_IN_PLACE rows and a gang takes GRAPH_SPLIT_BALANCE a worker; under
 * float32 the parts stay GRAPH_SPLIT_MIN_SPATIAL rows, one a worker. */
START_TEST(test_conv_spatial_in_place)
{
        struct model sp = { .nin = 3, .names = { "x", "w", "b" }, .ndim = { 4, 4, 1 },
                            .dims = { DIMS(1, 5, 90, 23), DIMS(7, 5, 3, 3), DIMS(7) },
                            .ydim = 4, .ydims = { 1, 7, 90, 23 } };
        static const int modes[2] = { GRAPH_ACCUMULATE_MIXED, GRAPH_ACCUMULATE_FLOAT64 };
        for (int a = 0; a < 2; a++) {
                accumulate = modes[a];
                for (int n = 2; n <= 12; n += 5) {
                        sp.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
                        attr_ints(sp.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
                        ck_assert_uint_eq(check_parts(&sp, n), 90 / GRAPH_SPLIT_MIN_SPATIAL_IN_PLACE);
                        ck_assert_uint_eq(balance_seen, GRAPH_SPLIT_BALANCE);
                }
        }
        /* a fused epilogue with a bias of its own: graph_conv_acc_rows leaves such a Conv's
         * rows to the path that copies them, whose parts cost more when small: the
         * estimate gives it the float32 parts */
        struct model fb = { .nin = 1, .names = { "x" }, .ndim = { 4 }, .dims = { DIMS(1, 5, 90, 23) },
                            .ninit = 2, .init_names = { "w", "b" }, .init_ndim = { 4, 1 },
                            .init_dims = { DIMS(7, 5, 3, 3), DIMS(7) },
                            .ydim = 4, .ydims = { 1, 7, 90, 23 }, .bias_ndim = 4, .bias_dims = { 1, 7, 1, 1 } };
        accumulate = GRAPH_ACCUMULATE_MIXED;
        fb.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
        attr_ints(fb.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        ck_assert_uint_eq(check_parts(&fb, 3), 90 / GRAPH_SPLIT_MIN_SPATIAL);
        ck_assert_uint_eq(balance_seen, 1);
        accumulate = GRAPH_ACCUMULATE_FLOAT32;
        approx_ok = 1;
        sp.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
        attr_ints(sp.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        ck_assert_uint_eq(check_parts(&sp, 3), 90 / GRAPH_SPLIT_MIN_SPATIAL);
        ck_assert_uint_eq(balance_seen, 1);
        approx_ok = 0;
}
END_TEST

/* Row-wise operators over the dims before their axis, a batched MatMul over its batch
 * dims: ranges of the first dim larger than 1, a broadcast operand whole. */
START_TEST(test_leading)
{
        struct model ln = { .nin = 3, .names = { "x", "s", "b" }, .ndim = { 3, 1, 1 },
                            .dims = { DIMS(1, 96, 200), DIMS(200), DIMS(200) },
                            .ydim = 3, .ydims = { 1, 96, 200 } };
        for (int n = 2; n <= 3; n++) {
                ln.n = node("LayerNormalization", 3, (const char *[]){ "x", "s", "b" }, 1, (const char *[]){ "y" });
                attr_i(ln.n, "axis", -1);
                ck_assert_uint_eq(check_parts(&ln, n), 96 / ((GRAPH_SPLIT_MIN_ELEMS / 4 + 199) / 200));
        }
        struct model sm = { .nin = 1, .names = { "x" }, .ndim = { 4 }, .dims = { DIMS(1, 12, 50, 64) },
                            .ydim = 4, .ydims = { 1, 12, 50, 64 } };
        sm.n = node("Softmax", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&sm, 3), 2); /* heads of 3200 elements: 6 (16 K) a part */
        struct model mm = { .nin = 2, .names = { "a", "b" }, .ndim = { 4, 4 },
                            .dims = { DIMS(1, 8, 64, 32), DIMS(1, 8, 32, 48) }, .ydim = 4,
                            .ydims = { 1, 8, 64, 48 } };
        mm.n = node("MatMul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&mm, 4), 8 / ((GRAPH_SPLIT_MIN_ELEMS / 4 + 64 * 48 - 1) / (64 * 48)));
        struct model bc = { .nin = 2, .names = { "a", "b" }, .ndim = { 4, 4 },
                            .dims = { DIMS(1, 8, 64, 32), DIMS(1, 1, 32, 48) }, .ydim = 4,
                            .ydims = { 1, 8, 64, 48 } };
        bc.n = node("MatMul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        check_parts(&bc, 2);
        /* the axis first: nothing before it to share out */
        struct model a0 = { .nin = 1, .names = { "x" }, .ndim = { 2 }, .dims = { DIMS(300, 400) },
                            .ydim = 2, .ydims = { 300, 400 } };
        a0.n = node("Softmax", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        attr_i(a0.n, "axis", 0);
        ck_assert_uint_eq(check_parts(&a0, 1), 1);
}
END_TEST

START_TEST(test_conv_channels_and_images)
{
        struct model ch = { .nin = 3, .names = { "x", "w", "b" }, .ndim = { 4, 4, 1 },
                            .dims = { DIMS(1, 8, 12, 12), DIMS(96, 8, 3, 3), DIMS(96) },
                            .ydim = 4, .ydims = { 1, 96, 12, 12 } };
        ch.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
        attr_ints(ch.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        ck_assert_uint_eq(check_parts(&ch, 3), 96 / GRAPH_SPLIT_MIN_CHANNELS);
        ch.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
        attr_ints(ch.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        check_parts(&ch, 5);
        struct model im = { .nin = 2, .names = { "x", "w" }, .ndim = { 4, 4 },
                            .dims = { DIMS(3, 4, 10, 10), DIMS(6, 2, 3, 3) },
                            .ydim = 4, .ydims = { 3, 6, 8, 8 } };
        im.n = node("Conv", 2, (const char *[]){ "x", "w" }, 1, (const char *[]){ "y" });
        attr_i(im.n, "group", 2);
        ck_assert_uint_eq(check_parts(&im, 2), 3);
}
END_TEST

/* Elementwise: ranges of elements, a one-element input whole; an input that broadcasts
 * for real keeps the node whole. */
START_TEST(test_elementwise_flat)
{
        struct model m = { .nin = 2, .names = { "a", "b" }, .ndim = { 2, 1 },
                           .dims = { DIMS(3, 100000), DIMS(1) }, .ydim = 2, .ydims = { 3, 100000 } };
        m.n = node("Sub", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&m, 3), 300000 / GRAPH_SPLIT_MIN_ELEMS);
        struct model u = { .nin = 1, .names = { "a" }, .ndim = { 1 }, .dims = { DIMS(200003) },
                           .ydim = 1, .ydims = { 200003 } };
        u.n = node("Sigmoid", 1, (const char *[]){ "a" }, 1, (const char *[]){ "y" });
        check_parts(&u, 5);
        struct model w = { .nin = 2, .names = { "a", "b" }, .ndim = { 2, 1 },
                           .dims = { DIMS(300, 1000), DIMS(1000) }, .ydim = 2, .ydims = { 300, 1000 } };
        w.n = node("Mul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&w, 1), 1);
}
END_TEST

/* Each operator above with a bias Add and a Relu fused into it: the bias follows column and
 * channel splits, stays whole for row and image splits. */
START_TEST(test_fused_gemm_parts)
{
        struct model mm = { .nin = 2, .names = { "a", "b" }, .ndim = { 2, 2 },
                            .dims = { DIMS(600, 64), DIMS(64, 48) }, .ydim = 2, .ydims = { 600, 48 },
                            .bias_ndim = 1, .bias_dims = { 48 } };
        mm.n = node("MatMul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&mm, 2), 600 / GRAPH_SPLIT_MIN_GEMM_ROWS);
        /* an MLP layer: Gemm with transB and C, then the bias Add: columns */
        struct model c = { .nin = 3, .names = { "a", "b", "c" }, .ndim = { 2, 2, 1 },
                           .dims = { DIMS(8, 64), DIMS(1100, 64), DIMS(1100) }, .ydim = 2, .ydims = { 8, 1100 },
                           .bias_ndim = 1, .bias_dims = { 1100 } };
        c.n = node("Gemm", 3, (const char *[]){ "a", "b", "c" }, 1, (const char *[]){ "y" });
        attr_i(c.n, "transB", 1);
        ck_assert_uint_eq(check_parts(&c, 3), 1100 / GRAPH_SPLIT_MIN_ROWS);
        /* Gemm without C: the bias is its third input */
        struct model c2 = { .nin = 2, .names = { "a", "b" }, .ndim = { 2, 2 },
                            .dims = { DIMS(8, 64), DIMS(700, 64) }, .ydim = 2, .ydims = { 8, 700 },
                            .bias_ndim = 1, .bias_dims = { 700 } };
        c2.n = node("Gemm", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        attr_i(c2.n, "transB", 1);
        check_parts(&c2, 2);
        /* Conv with its own bias, then a [1, M, 1, 1] one: output channels */
        struct model ch = { .nin = 1, .names = { "x" }, .ndim = { 4 }, .dims = { DIMS(1, 8, 12, 12) },
                            .ninit = 2, .init_names = { "w", "b" }, .init_ndim = { 4, 1 },
                            .init_dims = { DIMS(96, 8, 3, 3), DIMS(96) },
                            .ydim = 4, .ydims = { 1, 96, 12, 12 }, .bias_ndim = 4, .bias_dims = { 1, 96, 1, 1 } };
        ch.n = node("Conv", 3, (const char *[]){ "x", "w", "b" }, 1, (const char *[]){ "y" });
        attr_ints(ch.n, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        ck_assert_uint_eq(check_parts(&ch, 3), 96 / GRAPH_SPLIT_MIN_CHANNELS);
        /* Conv without bias takes the Add's [M, 1, 1] as its own; images */
        struct model im = { .nin = 1, .names = { "x" }, .ndim = { 4 }, .dims = { DIMS(3, 4, 10, 10) },
                            .ninit = 1, .init_names = { "w" }, .init_ndim = { 4 },
                            .init_dims = { DIMS(6, 4, 3, 3) },
                            .ydim = 4, .ydims = { 3, 6, 8, 8 }, .bias_ndim = 3, .bias_dims = { 6, 1, 1 } };
        im.n = node("Conv", 2, (const char *[]){ "x", "w" }, 1, (const char *[]){ "y" });
        ck_assert_uint_eq(check_parts(&im, 2), 3);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("graph-split");
        TCase *tc = tcase_create("split");
        tcase_add_test(tc, test_matmul_rows);
        tcase_add_test(tc, test_gemm_rows_and_columns);
        tcase_add_test(tc, test_conv_channels_and_images);
        tcase_add_test(tc, test_conv_spatial);
        tcase_add_test(tc, test_conv_spatial_in_place);
        tcase_add_test(tc, test_leading);
        tcase_add_test(tc, test_fused_gemm_parts);
        tcase_add_test(tc, test_elementwise_flat);
        suite_add_tcase(s, tc);
        return check_run(s);
}

/* Graph compiler (graph/compile.h) on small hand-built graphs of registry operators: each
 * pass (constant folding, BatchNormalization into Conv, dead nodes, elementwise fusion) and
 * the memory plan, with every compiled graph's results compared against the same graph run
 * as built; and the accuracy of the float32 Sigmoid and Tanh kernels the fused chain runs. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/compile.h"
#include "graph/exec.h"
#include "graph/graph.h"
#include "proto/dtype.h"

#define OPSET 17

static struct graph *G;

static int value(const char *name, int kind, int ndim, const int64_t *dims)
{
        int v = graph_add_value(G, name, kind, kind == GRAPH_VALUE_NODE ? 0 : PROTO_DTYPE_FLOAT32,
                                kind == GRAPH_VALUE_NODE ? -1 : ndim, dims);
        ck_assert_int_ge(v, 0);
        return v;
}

static void init(const char *name, int ndim, const int64_t *dims, const float *data)
{
        int v = value(name, GRAPH_VALUE_INIT, ndim, dims);
        struct ops_tensor *t = graph_alloc(G, sizeof(*t));
        int64_t n = 1;

        for (int d = 0; d < ndim; d++)
                n *= dims[d];
        t->dtype = PROTO_DTYPE_FLOAT32;
        t->ndim = ndim;
        if (ndim)
                memcpy(t->dims, dims, sizeof(dims[0]) * (size_t)ndim);
        t->data = graph_alloc(G, sizeof(float) * (size_t)n);
        memcpy(t->data, data, sizeof(float) * (size_t)n);
        G->values[v].tensor = t;
}

static void scalar(const char *name, float x)
{
        init(name, 0, NULL, &x);
}

/* out = op(in...) with the registry's definition at OPSET. */
static void node(const char *op, const char *out, int nin, const char *const *in, int nattr,
                 const struct ops_attr *attr)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, op, OPSET);
        int n, v;
        struct graph_node *gn;

        ck_assert_msg(def != NULL, "no %s", op);
        n = graph_add_node(G, NULL, op, "", def);
        ck_assert_int_ge(n, 0);
        v = graph_find_value(G, out) >= 0 ? graph_find_value(G, out) : value(out, GRAPH_VALUE_NODE, -1, NULL);
        gn = &G->nodes[n];
        gn->nin = nin;
        gn->in = graph_alloc(G, sizeof(int) * (size_t)(nin + 1));
        for (int i = 0; i < nin; i++) {
                gn->in[i] = graph_find_value(G, in[i]);
                ck_assert_msg(gn->in[i] >= 0, "no value %s", in[i]);
        }
        gn->nout = 1;
        gn->out = graph_alloc(G, sizeof(int));
        gn->out[0] = v;
        gn->nattr = nattr;
        if (nattr) {
                gn->attr = graph_alloc(G, sizeof(*attr) * (size_t)nattr);
                memcpy(gn->attr, attr, sizeof(*attr) * (size_t)nattr);
        }
        G->values[v].producer = n;
}

#define N1(op, out, a) node(op, out, 1, (const char *const[]){ a }, 0, NULL)
#define N2(op, out, a, b) node(op, out, 2, (const char *const[]){ a, b }, 0, NULL)

static void io(const char *in, const char *out)
{
        char err[256];

        G->inputs = graph_alloc(G, sizeof(int));
        G->outputs = graph_alloc(G, sizeof(int));
        G->output_decl = graph_alloc(G, sizeof(*G->output_decl));
        G->inputs[G->ninputs++] = graph_find_value(G, in);
        G->outputs[G->noutputs++] = graph_find_value(G, out);
        G->values[G->outputs[0]].output = 0;
        ck_assert_msg(graph_finalize(G, err, sizeof(err)) == 0, "%s", err);
}

static struct graph *begin(void)
{
        G = graph_new(NULL);
        ck_assert_ptr_nonnull(G);
        G->opset = OPSET;
        return G;
}

static float *run(struct graph *g, const float *x, int xnd, const int64_t *xd, int ynd,
                  const int64_t *yd)
{
        struct ops_tensor in = { .dtype = PROTO_DTYPE_FLOAT32, .ndim = xnd }, out = in;
        int64_t n = 1;
        char err[512];

        memcpy(in.dims, xd, sizeof(xd[0]) * (size_t)xnd);
        in.data = (void *)x;
        out.ndim = ynd;
        memcpy(out.dims, yd, sizeof(yd[0]) * (size_t)ynd);
        for (int d = 0; d < ynd; d++)
                n *= yd[d];
        out.data = calloc((size_t)n, sizeof(float));
        ck_assert_msg(graph_exec(g, 1, &in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        return out.data;
}

static void same(const float *a, const float *b, int64_t n, double tol)
{
        for (int64_t i = 0; i < n; i++)
                ck_assert_msg(fabs((double)a[i] - b[i]) <= tol * (1 + fabs((double)b[i])),
                              "element %lld: %g vs %g", (long long)i, a[i], b[i]);
}

/* Runs plain and g (compiled from the same graph) on x, compares their n floats of output
 * within tol, and frees both graphs. */
static void same_runs(struct graph *plain, struct graph *g, const float *x, int xnd, const int64_t *xd, int ynd,
                      const int64_t *yd, int64_t n, double tol)
{
        float *r0 = run(plain, x, xnd, xd, ynd, yd), *r1 = run(g, x, xnd, xd, ynd, yd);

        same(r1, r0, n, tol);
        free(r0);
        free(r1);
        graph_free(plain);
        graph_free(g);
}

static void compile(struct graph *g, unsigned flags)
{
        char err[256];

        ck_assert_msg(graph_compile(g, flags, err, sizeof(err)) == 0, "%s", err);
        ck_assert_ptr_nonnull(g->stats);
}

/* ---- the elementwise chain of the bench: 8 operators, two of them with a tensor ---- */

/* tiles of 1024 float32 (GRAPH_FUSE_TILE_BYTES, every step runs its kernel directly): the
 * last one is short */
#define CHAIN_N 40000

static struct graph *chain(void)
{
        static float c2[CHAIN_N];
        int64_t d[1] = { CHAIN_N };

        for (int i = 0; i < CHAIN_N; i++)
                c2[i] = 0.5f + (float)(i % 7) * 0.25f;
        begin();
        value("x", GRAPH_VALUE_INPUT, 1, d);
        scalar("one", 1.0f);
        scalar("three", 3.0f);
        init("c2", 1, d, c2);
        N2("Add", "a", "x", "one");
        N2("Mul", "b", "a", "c2");
        N2("Sub", "c", "b", "three");
        N1("Relu", "e", "c");
        N2("Div", "f", "e", "three");
        N1("Sigmoid", "h", "f");
        N2("Mul", "k", "h", "x");
        N1("Tanh", "y", "k");
        io("x", "y");
        return G;
}

START_TEST(test_fuse_chain)
{
        struct graph *plain = chain(), *fused = chain();
        static float x[CHAIN_N];
        int64_t d[1] = { CHAIN_N };

        for (int i = 0; i < CHAIN_N; i++)
                x[i] = (float)((i * 37) % 101) / 10.0f - 5.0f;
        compile(fused, GRAPH_COMPILE_ALL);
        ck_assert_int_eq(fused->stats->nodes_before, 8);
        ck_assert_int_eq(fused->stats->nodes_after, 1);
        ck_assert_int_eq(fused->stats->fused_groups, 1);
        ck_assert_int_eq(fused->stats->fused_nodes, 8);
        ck_assert_ptr_eq(fused->nodes[0].def, &graph_fused_def);
        unsigned long direct = graph_fuse_direct_runs;
        /* the same kernels on the same elements: the same bits */
        same_runs(plain, fused, x, 1, d, 1, d, CHAIN_N, 0);
        ck_assert_uint_eq(graph_fuse_direct_runs, direct + 1);
}
END_TEST

/* A chain with Clip, its bounds given (every step runs its kernel directly) or its upper one
 * omitted (Clip's preparation substitutes a scalar for it: the chain calls the operators,
 * block by block); bit for bit the unfused graph's results either way. */
static struct graph *clip_chain(int both)
{
        begin();
        value("x", GRAPH_VALUE_INPUT, 1, (int64_t[]){ CHAIN_N });
        scalar("k", 1.75f);
        scalar("lo", -2.0f);
        scalar("hi", 3.0f);
        N2("Mul", "a", "x", "k");
        node("Clip", "b", both ? 3 : 2, (const char *const[]){ "a", "lo", "hi" }, 0, NULL);
        N2("Add", "c", "b", "k");
        N1("Neg", "y", "c");
        io("x", "y");
        return G;
}

START_TEST(test_fuse_chain_direct_or_not)
{
        static float x[CHAIN_N];
        int64_t d[1] = { CHAIN_N };

        for (int i = 0; i < CHAIN_N; i++)
                x[i] = (float)((i * 53) % 211) / 17.0f - 6.0f;
        for (int both = 0; both < 2; both++) {
                struct graph *plain = clip_chain(both), *fused = clip_chain(both);
                compile(fused, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(fused->nnodes, 1);
                ck_assert_int_eq(fused->stats->fused_nodes, 4);
                unsigned long direct = graph_fuse_direct_runs;
                same_runs(plain, fused, x, 1, d, 1, d, CHAIN_N, 0);
                ck_assert_uint_eq(graph_fuse_direct_runs, direct + (unsigned long)both);
        }
}
END_TEST

/* Dtypes change along the chain (float -> int32 -> double -> float): the blocks carry each
 * step's own element type, in blocks of the widest's (8192 elements: 2 whole and a short
 * one). */
#define CASTS_N 20000

static struct graph *casts(void)
{
        struct ops_attr to_i32 = { .name = "to", .type = OPS_ATTR_INT, .i = PROTO_DTYPE_INT32 };
        struct ops_attr to_f64 = { .name = "to", .type = OPS_ATTR_INT, .i = PROTO_DTYPE_FLOAT64 };
        struct ops_attr to_f32 = { .name = "to", .type = OPS_ATTR_INT, .i = PROTO_DTYPE_FLOAT32 };

        begin();
        value("x", GRAPH_VALUE_INPUT, 1, (int64_t[]){ CASTS_N });
        scalar("k", 2.75f);
        N2("Mul", "a", "x", "k");
        node("Cast", "b", 1, (const char *const[]){ "a" }, 1, &to_i32);
        node("Cast", "c", 1, (const char *const[]){ "b" }, 1, &to_f64);
        node("Cast", "d", 1, (const char *const[]){ "c" }, 1, &to_f32);
        N2("Sub", "y", "d", "x");
        io("x", "y");
        return G;
}

START_TEST(test_fuse_casts)
{
        struct graph *plain = casts(), *fused = casts();
        static float x[CASTS_N];

        for (int i = 0; i < CASTS_N; i++)
                x[i] = (float)(i - CASTS_N / 2) / 7.0f;
        compile(fused, GRAPH_COMPILE_ALL);
        ck_assert_int_eq(fused->nnodes, 1);
        ck_assert_int_eq(fused->stats->fused_nodes, 5);
        same_runs(plain, fused, x, 1, (int64_t[]){ CASTS_N }, 1, (int64_t[]){ CASTS_N }, CASTS_N, 0);
}
END_TEST

/* A constant node too costly to compute on the loop thread stays a node. */
START_TEST(test_fold_cost_cap)
{
        static float w[1024 * 1024];
        struct graph *g;
        float x = 1.0f, *r;

        begin();
        value("x", GRAPH_VALUE_INPUT, 1, (int64_t[]){ 1 });
        init("w", 2, (int64_t[]){ 1024, 1024 }, w);
        N2("MatMul", "ww", "w", "w"); /* 2 G operations */
        node("ReduceSum", "s", 1, (const char *const[]){ "ww" }, 0, NULL);
        N2("Add", "y", "s", "x");
        io("x", "y");
        g = G;
        compile(g, GRAPH_COMPILE_FOLD);
        ck_assert_int_eq(g->stats->folded, 0);
        ck_assert_int_eq(g->nnodes, 3);
        r = run(g, &x, 1, (int64_t[]){ 1 }, 2, (int64_t[]){ 1, 1 }); /* keepdims */
        ck_assert_float_eq(r[0], 1.0f);
        free(r);
        graph_free(g);
}
END_TEST

/* A chain whose first step broadcasts for real ([3,1] + [4] -> [3,4]) runs step by step. */
static struct graph *bcast(void)
{
        float w[4] = { 1, -2, 3, -4 };

        begin();
        value("x", GRAPH_VALUE_INPUT, 2, (int64_t[]){ 3, 1 });
        init("w", 1, (int64_t[]){ 4 }, w);
        N2("Add", "a", "x", "w");
        N1("Relu", "b", "a");
        N2("Mul", "y", "b", "w");
        io("x", "y");
        return G;
}

START_TEST(test_fuse_broadcast)
{
        struct graph *plain = bcast(), *fused = bcast();
        float x[3] = { -1, 0.5f, 7 };

        compile(fused, GRAPH_COMPILE_ALL);
        ck_assert_int_eq(fused->stats->fused_groups, 1);
        ck_assert_int_eq(fused->nnodes, 1);
        same_runs(plain, fused, x, 2, (int64_t[]){ 3, 1 }, 2, (int64_t[]){ 3, 4 }, 12, 0);
}
END_TEST

/* y = x * (w1 + w2) + Relu(x) read by nobody: the sum is folded, the Relu is dead. */
static struct graph *foldable(void)
{
        float w1[4] = { 1, 2, 3, 4 }, w2[4] = { 0.5f, 0.25f, -1, 2 };

        begin();
        value("x", GRAPH_VALUE_INPUT, 1, (int64_t[]){ 4 });
        init("w1", 1, (int64_t[]){ 4 }, w1);
        init("w2", 1, (int64_t[]){ 4 }, w2);
        N2("Add", "c", "w1", "w2");
        N1("Relu", "unused", "x");
        N2("Mul", "y", "x", "c");
        io("x", "y");
        return G;
}

START_TEST(test_fold_and_dead)
{
        struct graph *plain = foldable(), *g = foldable();
        float x[4] = { 1, -1, 2, -2 };

        compile(g, GRAPH_COMPILE_FOLD | GRAPH_COMPILE_DEAD);
        ck_assert_int_eq(g->stats->folded, 1);
        ck_assert_int_eq(g->stats->dead, 1);
        ck_assert_int_eq(g->nnodes, 1);
        ck_assert_str_eq(g->nodes[0].op_type, "Mul");
        ck_assert_int_eq(g->values[graph_find_value(g, "c")].kind, GRAPH_VALUE_INIT);
        same_runs(plain, g, x, 1, (int64_t[]){ 4 }, 1, (int64_t[]){ 4 }, 4, 0);
}
END_TEST

/* Conv (pads 1) then BatchNormalization, with and without a Conv bias. */
static struct graph *conv_bn(int with_bias)
{
        float w[3 * 2 * 3 * 3], b[3] = { 0.1f, -0.2f, 0.3f };
        float scale[3] = { 1.5f, 0.5f, -1 }, beta[3] = { 0.1f, 0.2f, 0.3f };
        float mean[3] = { 0.2f, -0.1f, 0.05f }, var[3] = { 1, 4, 0.25f };
        static const int64_t pad1[4] = { 1, 1, 1, 1 }; /* outlives the graph */
        struct ops_attr pads = { .name = "pads", .type = OPS_ATTR_INTS, .n = 4, .ints = pad1 };
        struct ops_attr eps = { .name = "epsilon", .type = OPS_ATTR_FLOAT, .f = 1e-3 };

        for (int i = 0; i < (int)(sizeof(w) / sizeof(w[0])); i++)
                w[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
        begin();
        value("x", GRAPH_VALUE_INPUT, 4, (int64_t[]){ 1, 2, 5, 5 });
        init("w", 4, (int64_t[]){ 3, 2, 3, 3 }, w);
        init("b", 1, (int64_t[]){ 3 }, b);
        init("scale", 1, (int64_t[]){ 3 }, scale);
        init("beta", 1, (int64_t[]){ 3 }, beta);
        init("mean", 1, (int64_t[]){ 3 }, mean);
        init("var", 1, (int64_t[]){ 3 }, var);
        if (with_bias)
                node("Conv", "c", 3, (const char *const[]){ "x", "w", "b" }, 1, &pads);
        else
                node("Conv", "c", 2, (const char *const[]){ "x", "w" }, 1, &pads);
        node("BatchNormalization", "y", 5, (const char *const[]){ "c", "scale", "beta", "mean", "var" },
             1, &eps);
        io("x", "y");
        return G;
}

START_TEST(test_bn_into_conv)
{
        float x[50];
        int64_t xd[4] = { 1, 2, 5, 5 }, yd[4] = { 1, 3, 5, 5 };

        for (int i = 0; i < 50; i++)
                x[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
        for (int bias = 0; bias < 2; bias++) {
                struct graph *plain = conv_bn(bias), *g = conv_bn(bias);
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->stats->bn_folded, 1);
                ck_assert_int_eq(g->nnodes, 1);
                ck_assert_str_eq(g->nodes[0].op_type, "Conv");
                same_runs(plain, g, x, 4, xd, 4, yd, 75, 1e-5);
        }
}
END_TEST

/* An MLP of three layers: MatMul, Add, Relu each; the plan reuses bytes across layers and,
 * fused, Add+Relu writes over the MatMul's output that dies there. */
#define H 64
static struct graph *mlp(void)
{
        static float w[H * H], b[H];
        int64_t wd[2] = { H, H }, bd[1] = { H };
        char wn[16], bn[16], m[16], a[16], r[16], prev[16] = "x";

        for (int i = 0; i < H * H; i++)
                w[i] = (float)((i * 31) % 29) / 64.0f - 0.2f;
        for (int i = 0; i < H; i++)
                b[i] = (float)(i % 5) / 10.0f;
        begin();
        value("x", GRAPH_VALUE_INPUT, 2, (int64_t[]){ 8, H });
        for (int l = 0; l < 3; l++) {
                snprintf(wn, sizeof(wn), "w%d", l);
                snprintf(bn, sizeof(bn), "b%d", l);
                snprintf(m, sizeof(m), "m%d", l);
                snprintf(a, sizeof(a), "a%d", l);
                snprintf(r, sizeof(r), l == 2 ? "y" : "r%d", l);
                init(wn, 2, wd, w);
                init(bn, 1, bd, b);
                N2("MatMul", m, prev, wn);
                N2("Add", a, m, bn);
                N1("Relu", r, a);
                snprintf(prev, sizeof(prev), "%s", r);
        }
        io("x", "y");
        return G;
}

START_TEST(test_memory_plan)
{
        static float x[8 * H];
        int64_t d[2] = { 8, H };

        for (int i = 0; i < 8 * H; i++)
                x[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
        for (int fuse = 0; fuse < 2; fuse++) {
                struct graph *plain = mlp(), *g = mlp();
                float *r0, *r1;
                compile(g, GRAPH_COMPILE_PLAN | (fuse ? GRAPH_COMPILE_FUSE : 0));
                ck_assert_ptr_nonnull(g->plan);
                /* 8 intermediates of 2 KiB (the last Relu is the output) */
                ck_assert_int_eq(g->stats->planned, fuse ? 5 : 8);
                ck_assert_int_eq(g->stats->intermediate_bytes, (fuse ? 5 : 8) * 8 * H * 4);
                /* the model's own, before fusion, whichever passes run */
                ck_assert_int_eq(g->stats->model_intermediate_bytes, 8 * 8 * H * 4);
                ck_assert_int_le(g->stats->arena_bytes, 2 * 8 * H * 4);
                /* in place: only the fused Add+Relu over its dying MatMul output (the
                 * last layer's is the graph output, not planned) */
                ck_assert_int_eq(g->stats->inplace, fuse ? 2 : 0);
                r0 = run(plain, x, 2, d, 2, d);
                r1 = run(g, x, 2, d, 2, d);
                same(r1, r0, 8 * H, 0);
                /* a second run reuses nothing of the first */
                free(r1);
                r1 = run(g, x, 2, d, 2, d);
                same(r1, r0, 8 * H, 0);
                free(r0);
                free(r1);
                graph_free(plain);
                graph_free(g);
        }
}
END_TEST

/* Identity and Flatten copy their input unchanged: planned, each writes over its input that
 * dies there (a block shared, the copy skipped), and the results are the plain graph's. */
START_TEST(test_plan_copy_in_place)
{
        static float x[8 * H];
        int64_t d[2] = { 8, H };

        for (int i = 0; i < 8 * H; i++)
                x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
        struct graph *g[2];
        float *r[2];
        for (int k = 0; k < 2; k++) {
                begin();
                value("x", GRAPH_VALUE_INPUT, 2, (int64_t[]){ 8, H });
                N1("Neg", "a", "x");
                N1("Identity", "b", "a");
                N1("Flatten", "c", "b");
                N1("Relu", "y", "c");
                io("x", "y");
                g[k] = G;
                if (k)
                        compile(g[k], GRAPH_COMPILE_PLAN);
                r[k] = run(g[k], x, 2, d, 2, d);
        }
        ck_assert_ptr_nonnull(g[1]->plan);
        ck_assert_int_eq(g[1]->stats->planned, 3);
        ck_assert_int_eq(g[1]->stats->inplace, 2);
        ck_assert_int_eq(g[1]->stats->arena_bytes, 8 * H * 4);
        same(r[1], r[0], 8 * H, 0);
        for (int k = 0; k < 2; k++) {
                free(r[k]);
                graph_free(g[k]);
        }
}
END_TEST

/* Tuning times a node no variant is tuned for when its step splits into parts (a fused
 * elementwise chain of 256 K elements): its time on one thread sizes the step's parts. A
 * chain too small to split is not run. */
START_TEST(test_time_untuned)
{
        for (int big = 0; big < 2; big++) {
                int64_t n = big ? 256 << 10 : 1024;
                begin();
                value("x", GRAPH_VALUE_INPUT, 1, (int64_t[]){ n });
                N1("Neg", "a", "x");
                N1("Sigmoid", "b", "a");
                N1("Relu", "y", "b");
                io("x", "y");
                struct graph *g = G;
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->nnodes, 1);
                const struct graph_node *gn = &g->nodes[0];
                ck_assert_int_eq(gn->variant, 0);
                if (big) {
                        ck_assert_uint_gt(gn->tuned_ns, 0);
                        ck_assert_uint_gt(gn->tuned_flops, 0);
                } else {
                        ck_assert_uint_eq(gn->tuned_ns, 0);
                }
                graph_free(g);
        }
}
END_TEST

/* A planned graph bound with a shape the model leaves open runs without the plan's sizes. */
START_TEST(test_plan_open_shapes)
{
        struct graph *g;
        float x[6] = { -1, 2, -3, 4, -5, 6 }, *r;

        begin();
        value("x", GRAPH_VALUE_INPUT, 1, (int64_t[]){ -1 });
        N1("Neg", "a", "x");
        N1("Relu", "b", "a");
        N1("Exp", "y", "b");
        io("x", "y");
        g = G;
        compile(g, GRAPH_COMPILE_PLAN);
        ck_assert_int_eq(g->stats->planned, 0);
        r = run(g, x, 1, (int64_t[]){ 6 }, 1, (int64_t[]){ 6 });
        for (int i = 0; i < 6; i++)
                ck_assert_float_eq_tol(r[i], expf(x[i] < 0 ? -x[i] : 0), 1e-6);
        free(r);
        graph_free(g);
}
END_TEST


/* ---- pattern fusions: GELU, LayerNormalization, epilogues ---- */

static void fill(float *x, int64_t n, int k)
{
        for (int64_t i = 0; i < n; i++)
                x[i] = (float)(((i + k) * 37) % 101) / 25.0f - 2.0f;
}

/* x * 0.5 * (1 + Erf(x / sqrt 2)) in three exporters' orders */
static struct graph *gelu_graph(int form)
{
        begin();
        value("x", GRAPH_VALUE_INPUT, 2, (int64_t[]){ 3, 700 });
        scalar("sqrt2", 1.4142135f);
        scalar("rsqrt2", 0.70710677f);
        scalar("one", 1.0f);
        scalar("half", 0.5f);
        if (form == 0)
                N2("Div", "d", "x", "sqrt2");
        else
                N2("Mul", "d", "rsqrt2", "x");
        N1("Erf", "e", "d");
        N2("Add", "a", "e", "one");
        if (form == 0) {                /* (x * a) * 0.5 */
                N2("Mul", "m", "x", "a");
                N2("Mul", "y", "m", "half");
        } else if (form == 1) {         /* (x * 0.5) * a */
                N2("Mul", "h", "x", "half");
                N2("Mul", "y", "h", "a");
        } else {                        /* (a * 0.5) * x */
                N2("Mul", "m", "a", "half");
                N2("Mul", "y", "x", "m");
        }
        io("x", "y");
        return G;
}

START_TEST(test_fuse_gelu)
{
        static float x[3 * 700];
        int64_t d[2] = { 3, 700 };

        fill(x, 3 * 700, 0);
        for (int form = 0; form < 3; form++) {
                struct graph *plain = gelu_graph(form), *g = gelu_graph(form);
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->stats->gelu_fused, 1);
                ck_assert_int_eq(g->nnodes, 1);
                ck_assert_str_eq(g->nodes[0].op_type, "Gelu");
                same_runs(plain, g, x, 2, d, 2, d, 3 * 700, 1e-6);
        }
}
END_TEST

#define LN_C 96
static struct graph *ln_graph(int form)
{
        static float gamma[LN_C], beta[LN_C];
        static const int64_t last[1] = { -1 };
        struct ops_attr axes = { .name = "axes", .type = OPS_ATTR_INTS, .n = 1, .ints = last };

        fill(gamma, LN_C, 3);
        fill(beta, LN_C, 5);
        begin();
        value("x", GRAPH_VALUE_INPUT, 3, (int64_t[]){ 2, 5, LN_C });
        init("gamma", 1, (int64_t[]){ LN_C }, gamma);
        init("beta", 1, (int64_t[]){ LN_C }, beta);
        scalar("two", 2.0f);
        scalar("eps", 1e-5f);
        node("ReduceMean", "mu", 1, (const char *const[]){ "x" }, 1, &axes);
        N2("Sub", "d", "x", "mu");
        if (form == 0)
                N2("Pow", "sq", "d", "two");
        else
                N2("Mul", "sq", "d", "d");
        node("ReduceMean", "var", 1, (const char *const[]){ "sq" }, 1, &axes);
        N2("Add", "ve", "var", "eps");
        N1("Sqrt", "sd", "ve");
        N2("Div", "n", "d", "sd");
        N2("Mul", "s", "gamma", "n");
        N2("Add", "y", "s", "beta");
        io("x", "y");
        return G;
}

START_TEST(test_fuse_layernorm)
{
        static float x[2 * 5 * LN_C];
        int64_t d[3] = { 2, 5, LN_C };

        fill(x, 2 * 5 * LN_C, 1);
        for (int form = 0; form < 2; form++) {
                struct graph *plain = ln_graph(form), *g = ln_graph(form);
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->stats->layernorm_fused, 1);
                ck_assert_int_eq(g->nnodes, 1);
                ck_assert_str_eq(g->nodes[0].op_type, "LayerNormalization");
                same_runs(plain, g, x, 3, d, 3, d, 2 * 5 * LN_C, 1e-5);
        }
}
END_TEST

/* MatMul [R, K] x [K, N] + bias [N], then an activation (act 0: Relu, 1: erf GELU, which
 * the GELU pass makes a Gelu first, 2: Clip with constant bounds, 3: none). N is large
 * enough that the product runs in several row blocks. */
#define EP_R 200
#define EP_K 16
#define EP_N 2048
static struct graph *epi_graph(int act)
{
        static float w[EP_K * EP_N], b[EP_N];

        fill(w, EP_K * EP_N, 7);
        fill(b, EP_N, 11);
        begin();
        value("x", GRAPH_VALUE_INPUT, 2, (int64_t[]){ EP_R, EP_K });
        init("w", 2, (int64_t[]){ EP_K, EP_N }, w);
        init("b", 1, (int64_t[]){ EP_N }, b);
        scalar("sqrt2", 1.4142135f);
        scalar("one", 1.0f);
        scalar("half", 0.5f);
        scalar("lo", -0.5f);
        scalar("hi", 1.5f);
        N2("MatMul", "m", "x", "w");
        N2("Add", act == 3 ? "y" : "a", "m", "b");
        if (act == 0) {
                N1("Relu", "y", "a");
        } else if (act == 1) {
                N2("Div", "d", "a", "sqrt2");
                N1("Erf", "e", "d");
                N2("Add", "p", "e", "one");
                N2("Mul", "q", "a", "p");
                N2("Mul", "y", "q", "half");
        } else if (act == 2) {
                node("Clip", "y", 3, (const char *const[]){ "a", "lo", "hi" }, 0, NULL);
        }
        io("x", "y");
        return G;
}

START_TEST(test_fuse_epilogue)
{
        static float x[EP_R * EP_K];
        int64_t xd[2] = { EP_R, EP_K }, yd[2] = { EP_R, EP_N };

        fill(x, EP_R * EP_K, 2);
        for (int act = 0; act < 4; act++) {
                struct graph *plain = epi_graph(act), *g = epi_graph(act);
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->stats->epilogue_fused, 1);
                ck_assert_int_eq(g->nnodes, 1);
                ck_assert_ptr_eq(g->nodes[0].def, &graph_fused_gemm_def);
                same_runs(plain, g, x, 2, xd, 2, yd, EP_R * EP_N, 1e-5);
        }
}
END_TEST

/* Residual Adds (a tensor of the output's shape) join the epilogue, after the bias and
 * before the activation: MatMul + bias + x + Relu (form 0), MatMul + Sigmoid(x) (form 1:
 * the residual an intermediate, no bias or activation), a ResNet block's Conv + x + Relu
 * (form 2, the Conv's bias taken from the Add); an Add that broadcasts ([R, 1], form 3) is
 * no residual and stays a node of its own. */
static struct graph *res_graph(int form)
{
        static float w[EP_K * EP_K], b[EP_K], cw[4 * 4 * 3 * 3], cb[4], r1[EP_R];
        static const int64_t pads[4] = { 1, 1, 1, 1 };

        fill(w, EP_K * EP_K, 5);
        fill(b, EP_K, 6);
        fill(cw, 4 * 4 * 3 * 3, 7);
        fill(cb, 4, 8);
        fill(r1, EP_R, 9);
        begin();
        if (form == 2) {
                value("x", GRAPH_VALUE_INPUT, 4, (int64_t[]){ 1, 4, 6, 6 });
                init("w", 4, (int64_t[]){ 4, 4, 3, 3 }, cw);
                init("b", 3, (int64_t[]){ 4, 1, 1 }, cb);
                node("Conv", "c", 2, (const char *const[]){ "x", "w" }, 1,
                     (const struct ops_attr[]){ { .name = "pads", .type = OPS_ATTR_INTS, .n = 4,
                                                  .ints = pads } });
                N2("Add", "a", "c", "b");
                N2("Add", "s", "a", "x");
                N1("Relu", "y", "s");
                io("x", "y");
                return G;
        }
        value("x", GRAPH_VALUE_INPUT, 2, (int64_t[]){ EP_R, EP_K });
        init("w", 2, (int64_t[]){ EP_K, EP_K }, w);
        init("b", 1, (int64_t[]){ EP_K }, b);
        init("r1", 2, (int64_t[]){ EP_R, 1 }, r1);
        N2("MatMul", "m", "x", "w");
        if (form == 0) {
                N2("Add", "a", "m", "b");
                N2("Add", "s", "x", "a");
                N1("Relu", "y", "s");
        } else if (form == 1) {
                N1("Sigmoid", "g", "x");
                N2("Add", "y", "m", "g");
        } else {
                N2("Add", "y", "m", "r1");
        }
        io("x", "y");
        return G;
}

START_TEST(test_fuse_residual)
{
        static float x[EP_R * EP_K];
        int64_t xd[2] = { EP_R, EP_K }, cd[4] = { 1, 4, 6, 6 };

        fill(x, EP_R * EP_K, 3);
        for (int form = 0; form < 4; form++) {
                struct graph *plain = res_graph(form), *g = res_graph(form);
                compile(g, GRAPH_COMPILE_ALL);
                const struct graph_node *fg = NULL;
                for (int n = 0; n < g->nnodes; n++)
                        if (g->nodes[n].def == &graph_fused_gemm_def)
                                fg = &g->nodes[n];
                const struct graph_epilogue *ep = NULL;
                for (int a = 0; fg && a < fg->nattr; a++)
                        if (fg->attr[a].type == OPS_ATTR_OPAQUE)
                                ep = fg->attr[a].graph;
                if (form == 3) {
                        ck_assert_int_eq(g->stats->epilogue_fused, 0);
                        ck_assert_ptr_null(fg);
                } else {
                        ck_assert_int_eq(g->stats->epilogue_fused, 1);
                        ck_assert_ptr_nonnull(ep);
                        ck_assert_int_eq(ep->resid, 1);
                        ck_assert_int_eq(ep->bias, form == 0);
                        ck_assert_int_eq(g->nnodes, form == 1 ? 2 : 1);
                }
                if (form == 2)
                        same_runs(plain, g, x, 4, cd, 4, cd, 4 * 6 * 6, 1e-5);
                else
                        same_runs(plain, g, x, 2, xd, 2, xd, EP_R * EP_K, 1e-5);
        }
}
END_TEST

/* Conv + per-channel Add [C, 1, 1] + Sigmoid: a Conv without bias takes the Add as its bias,
 * the Sigmoid becomes the epilogue; with a bias already, the Add is the epilogue's. */
static struct graph *conv_epi(int with_bias)
{
        static float w[4 * 2 * 3 * 3], b[4], cb[4];

        fill(w, 4 * 2 * 3 * 3, 1);
        fill(b, 4, 2);
        fill(cb, 4, 9);
        begin();
        value("x", GRAPH_VALUE_INPUT, 4, (int64_t[]){ 2, 2, 6, 6 });
        init("w", 4, (int64_t[]){ 4, 2, 3, 3 }, w);
        init("cb", 1, (int64_t[]){ 4 }, cb);
        init("b", 3, (int64_t[]){ 4, 1, 1 }, b);
        if (with_bias)
                node("Conv", "c", 3, (const char *const[]){ "x", "w", "cb" }, 0, NULL);
        else
                N2("Conv", "c", "x", "w");
        N2("Add", "a", "c", "b");
        N1("Sigmoid", "y", "a");
        io("x", "y");
        return G;
}

START_TEST(test_fuse_conv_epilogue)
{
        static float x[2 * 2 * 6 * 6];
        int64_t xd[4] = { 2, 2, 6, 6 }, yd[4] = { 2, 4, 4, 4 };

        fill(x, 2 * 2 * 6 * 6, 4);
        for (int bias = 0; bias < 2; bias++) {
                struct graph *plain = conv_epi(bias), *g = conv_epi(bias);
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->stats->epilogue_fused, 1);
                ck_assert_int_eq(g->nnodes, 1);
                ck_assert_ptr_eq(g->nodes[0].def, &graph_fused_gemm_def);
                same_runs(plain, g, x, 4, xd, 4, yd, 2 * 4 * 4 * 4, 1e-5);
        }
}
END_TEST


/* Softmax(x / 8 + mask) over the last axis (form 0), Softmax(mask + 0.125 * x) (form 1),
 * Softmax(x * 0.125) (form 2); the mask causal ([1, 1, 5, 40], -1e9 above the diagonal)
 * and broadcast over batch and heads. */
static struct graph *sm_graph(int form)
{
        static float mask[5 * 40];
        struct ops_attr axis = { .name = "axis", .type = OPS_ATTR_INT, .i = -1 };

        for (int i = 0; i < 5; i++)
                for (int j = 0; j < 40; j++)
                        mask[i * 40 + j] = j > i + 30 ? -1e9f : 0.0f;
        begin();
        value("x", GRAPH_VALUE_INPUT, 4, (int64_t[]){ 2, 3, 5, 40 });
        init("mask", 4, (int64_t[]){ 1, 1, 5, 40 }, mask);
        scalar("eight", 8.0f);
        scalar("eighth", 0.125f);
        if (form == 0) {
                N2("Div", "s", "x", "eight");
                N2("Add", "m", "s", "mask");
        } else if (form == 1) {
                N2("Mul", "s", "eighth", "x");
                N2("Add", "m", "mask", "s");
        } else {
                N2("Mul", "m", "x", "eighth");
        }
        node("Softmax", "y", 1, (const char *const[]){ "m" }, 1, &axis);
        io("x", "y");
        return G;
}

START_TEST(test_fuse_softmax)
{
        static float x[2 * 3 * 5 * 40];
        int64_t d[4] = { 2, 3, 5, 40 };

        fill(x, 2 * 3 * 5 * 40, 6);
        for (int i = 0; i < 2 * 3 * 5 * 40; i++)
                x[i] *= 8;
        for (int form = 0; form < 3; form++) {
                struct graph *plain = sm_graph(form), *g = sm_graph(form);
                compile(g, GRAPH_COMPILE_ALL);
                ck_assert_int_eq(g->stats->softmax_fused, 1);
                ck_assert_int_eq(g->nnodes, 1);
                ck_assert_ptr_eq(g->nodes[0].def, &graph_fused_softmax_def);
                same_runs(plain, g, x, 4, d, 4, d, 2 * 3 * 5 * 40, 1e-6);
        }
}
END_TEST

/* The fused chain is bound by Sigmoid and Tanh: their float32 kernels run on ew_expf
 * (ops/ew.h, vectorized) rather than libm. Within a few ulp of the double-precision
 * functions over the whole range, saturating at the ends, NaN kept. */
START_TEST(test_sigmoid_tanh_f32_accuracy)
{
        enum { NS = 200003 };
        static float x[NS + 6], y[NS + 6];
        int64_t n = NS + 6;
        const char *ops[2] = { "Sigmoid", "Tanh" };
        char err[256];

        for (int i = 0; i < NS; i++)
                x[i] = -120.0f + 240.0f * (float)i / (float)(NS - 1);
        x[NS] = 0.0f;
        x[NS + 1] = -1e-30f;
        x[NS + 2] = __builtin_inff();
        x[NS + 3] = -__builtin_inff();
        x[NS + 4] = __builtin_nanf("");
        x[NS + 5] = 1e-6f;
        for (int k = 0; k < 2; k++) {
                const struct ops_def *def = ops_lookup_onnx(NULL, ops[k], OPSET);
                struct ops_call *c = calloc(1, sizeof(*c));
                c->nin = c->nout = 1;
                c->in[0] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = 1, .dims = { n }, .data = x };
                c->out[0] = c->in[0];
                c->out[0].data = y;
                c->opset = OPSET;
                ck_assert_msg(ops_run(def, c, err, sizeof(err)) == 0, "%s", err);
                for (int64_t i = 0; i < n; i++) {
                        double want = k ? tanh((double)x[i]) : 1.0 / (1.0 + exp(-(double)x[i]));
                        double e;
                        if (isnan(x[i])) {
                                ck_assert_msg(isnan(y[i]), "%s(NaN) = %g", ops[k], y[i]);
                                continue;
                        }
                        /* results below FLT_MIN flush to zero: judged absolutely there */
                        e = fabs(want) < 1.2e-38 ? fabs(y[i] - want) : fabs(y[i] - want) / fabs(want);
                        ck_assert_msg(e < 4e-7, "%s(%.9g) = %.9g, want %.9g", ops[k], x[i], y[i], want);
                }
                free(c);
        }
}
END_TEST

int main(void)
{
        Suite *s = suite_create("compile");
        TCase *tc = tcase_create("passes");
        SRunner *sr;
        int failed;

        /* test_fuse_epilogue compiles (and tunes) eight graphs: 3-4 s here, as long as
         * Check's default limit */
        tcase_set_timeout(tc, 30);

        tcase_add_test(tc, test_fuse_chain);
        tcase_add_test(tc, test_fuse_broadcast);
        tcase_add_test(tc, test_fuse_chain_direct_or_not);
        tcase_add_test(tc, test_fuse_casts);
        tcase_add_test(tc, test_fold_cost_cap);
        tcase_add_test(tc, test_fold_and_dead);
        tcase_add_test(tc, test_bn_into_conv);
        tcase_add_test(tc, test_memory_plan);
        tcase_add_test(tc, test_fuse_gelu);
        tcase_add_test(tc, test_fuse_layernorm);
        tcase_add_test(tc, test_fuse_epilogue);
        tcase_add_test(tc, test_fuse_residual);
        tcase_add_test(tc, test_fuse_conv_epilogue);
        tcase_add_test(tc, test_fuse_softmax);
        tcase_add_test(tc, test_plan_open_shapes);
        tcase_add_test(tc, test_plan_copy_in_place);
        tcase_add_test(tc, test_time_untuned);
        tcase_add_test(tc, test_sigmoid_tanh_f32_accuracy);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

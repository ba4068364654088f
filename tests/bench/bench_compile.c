/* bench_compile: what compiling graphs at load (graph/compile.h) buys, measured through two
 * npuds started side by side in the same run, one with NPUD_GRAPH_COMPILE=0 (graphs run as
 * imported: node by node, one buffer per intermediate) and one with the passes on:
 *   1. the 8-operator elementwise chain of issue 11 over 4 M float32 elements
 *      (Add, Mul, Sub, Relu, Div, Sigmoid, Mul, Tanh, scalar constants): time per run
 *      before and after, the ratio (target <= 0.5 with fusion), results compared;
 *   2. a 3-layer MLP (32x1024, 1024x1024 layers, MatMul + Add + Relu): time before and after;
 *   3. the memory plan of each: arena bytes against the sum of the planned intermediates
 *      (from graph_info; target <= 0.5x).
 * A fourth npud runs with all passes on but the kernels as they were before SLEEF and oneDNN
 * (NPUD_VMATH=0: scalar libm and gcc's vectorization; NPUD_SGEMM=openblas): each model's
 * time with those kernels against the default ones, and the ratio.
 * Each side is timed best of 5 rounds of several back-to-back runs, the sides' rounds
 * interleaved. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npu.h"
#include "onnx.pb-c.h"
#include "tests/integration/harness.h"

#define CHECK(call)                                                                            \
        do {                                                                                   \
                npu_status_t st_ = (call);                                                     \
                if (st_ != NPU_OK) {                                                           \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_),             \
                                npu_error_message());                                          \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

#define CHAIN_N (4 << 20)
#define MLP_B 32
#define MLP_H 1024

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
        void *p = calloc(1, n);

        if (!p)
                exit(1);
        return p;
}

static float *rand_buf(size_t n, unsigned seed)
{
        float *p = xmalloc(n * sizeof(float));

        for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
        return p;
}

/* ---- a small ONNX builder: one float32 input X, one output Y, float32 initializers ---- */

struct model {
        Onnx__GraphProto g;
        Onnx__NodeProto *nodes[32];
        Onnx__TensorProto *inits[32];
        Onnx__ValueInfoProto *io[2];
};

static Onnx__ValueInfoProto *value_info(const char *name, int ndim, const int64_t *dims)
{
        Onnx__ValueInfoProto *v = xmalloc(sizeof(*v));
        Onnx__TypeProto *t = xmalloc(sizeof(*t));
        Onnx__TypeProto__Tensor *tt = xmalloc(sizeof(*tt));
        Onnx__TensorShapeProto *s = xmalloc(sizeof(*s));

        onnx__value_info_proto__init(v);
        onnx__type_proto__init(t);
        onnx__type_proto__tensor__init(tt);
        onnx__tensor_shape_proto__init(s);
        s->n_dim = (size_t)ndim;
        s->dim = xmalloc(sizeof(*s->dim) * (size_t)(ndim ? ndim : 1));
        for (int i = 0; i < ndim; i++) {
                s->dim[i] = xmalloc(sizeof(**s->dim));
                onnx__tensor_shape_proto__dimension__init(s->dim[i]);
                s->dim[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                s->dim[i]->dim_value = dims[i];
        }
        tt->has_elem_type = 1;
        tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        tt->shape = s;
        t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        t->tensor_type = tt;
        v->name = strdup(name);
        v->type = t;
        return v;
}

static void add_init(struct model *m, const char *name, int ndim, const int64_t *dims,
                     const float *data)
{
        Onnx__TensorProto *t = xmalloc(sizeof(*t));
        size_t n = 1;

        onnx__tensor_proto__init(t);
        for (int d = 0; d < ndim; d++)
                n *= (size_t)dims[d];
        t->name = strdup(name);
        t->n_dims = (size_t)ndim;
        t->dims = xmalloc(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
        if (ndim)
                memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->has_raw_data = 1;
        t->raw_data.len = n * sizeof(float);
        t->raw_data.data = xmalloc(n * sizeof(float));
        memcpy(t->raw_data.data, data, n * sizeof(float));
        m->inits[m->g.n_initializer++] = t;
}

static void add_scalar(struct model *m, const char *name, float v)
{
        add_init(m, name, 0, NULL, &v);
}

static void add_node(struct model *m, const char *op, const char *a, const char *b, const char *out)
{
        Onnx__NodeProto *n = xmalloc(sizeof(*n));

        onnx__node_proto__init(n);
        n->op_type = strdup(op);
        n->n_input = b ? 2 : 1;
        n->input = xmalloc(sizeof(char *) * 2);
        n->input[0] = strdup(a);
        if (b)
                n->input[1] = strdup(b);
        n->n_output = 1;
        n->output = xmalloc(sizeof(char *));
        n->output[0] = strdup(out);
        m->nodes[m->g.n_node++] = n;
}

static void model_begin(struct model *m, int ndim, const int64_t *xd, const int64_t *yd)
{
        memset(m, 0, sizeof(*m));
        onnx__graph_proto__init(&m->g);
        m->g.name = "bench";
        m->g.node = m->nodes;
        m->g.initializer = m->inits;
        m->io[0] = value_info("X", ndim, xd);
        m->io[1] = value_info("Y", ndim, yd);
        m->g.n_input = 1;
        m->g.input = &m->io[0];
        m->g.n_output = 1;
        m->g.output = &m->io[1];
}

/* Serialized bytes (malloc'd). The builder's allocations are left to the process. */
static uint8_t *model_bytes(struct model *m, size_t *ret)
{
        Onnx__ModelProto mp;
        Onnx__OperatorSetIdProto o, *ops[1] = { &o };
        uint8_t *buf;

        onnx__model_proto__init(&mp);
        onnx__operator_set_id_proto__init(&o);
        o.domain = "";
        o.has_version = 1;
        o.version = 13;
        mp.has_ir_version = 1;
        mp.ir_version = 8;
        mp.n_opset_import = 1;
        mp.opset_import = ops;
        mp.graph = &m->g;
        *ret = onnx__model_proto__get_packed_size(&mp);
        buf = xmalloc(*ret);
        onnx__model_proto__pack(&mp, buf);
        return buf;
}

static uint8_t *chain_model(size_t *ret)
{
        struct model m;
        int64_t d[1] = { CHAIN_N };

        model_begin(&m, 1, d, d);
        add_scalar(&m, "c1", 0.5f);
        add_scalar(&m, "c2", 1.5f);
        add_scalar(&m, "c3", 0.25f);
        add_scalar(&m, "c4", 2.0f);
        add_scalar(&m, "c5", 3.0f);
        add_node(&m, "Add", "X", "c1", "t1");
        add_node(&m, "Mul", "t1", "c2", "t2");
        add_node(&m, "Sub", "t2", "c3", "t3");
        add_node(&m, "Relu", "t3", NULL, "t4");
        add_node(&m, "Div", "t4", "c4", "t5");
        add_node(&m, "Sigmoid", "t5", NULL, "t6");
        add_node(&m, "Mul", "t6", "c5", "t7");
        add_node(&m, "Tanh", "t7", NULL, "Y");
        return model_bytes(&m, ret);
}

static uint8_t *mlp_model(size_t *ret)
{
        struct model m;
        int64_t d[2] = { MLP_B, MLP_H }, wd[2] = { MLP_H, MLP_H }, bd[1] = { MLP_H };
        float *w = rand_buf((size_t)MLP_H * MLP_H, 5), *b = rand_buf(MLP_H, 6);
        char wn[16], bn[16], mm[16], ad[16], re[16], prev[16] = "X";

        for (size_t i = 0; i < (size_t)MLP_H * MLP_H; i++)
                w[i] *= 0.05f;
        model_begin(&m, 2, d, d);
        for (int l = 0; l < 3; l++) {
                snprintf(wn, sizeof(wn), "W%d", l);
                snprintf(bn, sizeof(bn), "B%d", l);
                snprintf(mm, sizeof(mm), "M%d", l);
                snprintf(ad, sizeof(ad), "A%d", l);
                snprintf(re, sizeof(re), l == 2 ? "Y" : "R%d", l);
                add_init(&m, wn, 2, wd, w);
                add_init(&m, bn, 1, bd, b);
                add_node(&m, "MatMul", prev, wn, mm);
                add_node(&m, "Add", mm, bn, ad);
                add_node(&m, "Relu", ad, NULL, re);
                snprintf(prev, sizeof(prev), "%s", re);
        }
        free(w);
        free(b);
        return model_bytes(&m, ret);
}

/* ---- measurement ---- */

struct result {
        double s;            /* best time per run */
        float *y;            /* output */
        long long nodes_after, arena, inter;
        /* the loaded graph and its buffers on one npud */
        npu_context_t *ctx;
        npu_graph_t g;
        npu_buffer_t bx, by;
        npu_stream_t st;
        npu_tensor_t tx, ty;
        size_t n;
};

static void side_load(const char *sock, const uint8_t *model, size_t msize, int ndim,
                      const int64_t *dims, const float *x, size_t n, struct result *r)
{
        char *info;
        json_t *j, *c;

        memset(r, 0, sizeof(*r));
        r->n = n;
        r->s = 1e9;
        CHECK(npu_connect(sock, &r->ctx));
        CHECK(npu_graph_load(r->ctx, 0, model, msize, &r->g));
        CHECK(npu_graph_info(r->ctx, r->g, &info));
        j = json_loads(info, 0, NULL);
        free(info);
        c = j ? json_object_get(j, "compile") : NULL;
        r->nodes_after = c ? json_integer_value(json_object_get(c, "nodes_after")) : -1;
        r->arena = c ? json_integer_value(json_object_get(c, "arena_bytes")) : -1;
        r->inter = c ? json_integer_value(json_object_get(c, "intermediate_bytes")) : -1;
        json_decref(j);
        CHECK(npu_malloc(r->ctx, 0, n * sizeof(float), &r->bx));
        CHECK(npu_malloc(r->ctx, 0, n * sizeof(float), &r->by));
        CHECK(npu_memcpy_to_device(r->ctx, r->bx, 0, x, n * sizeof(float)));
        CHECK(npu_stream_create(r->ctx, 0, 0, &r->st));
        r->tx = (npu_tensor_t){ .buf = r->bx, .dtype = NPU_FLOAT32, .ndim = ndim };
        memcpy(r->tx.dims, dims, sizeof(int64_t) * (size_t)ndim);
        r->ty = r->tx;
        r->ty.buf = r->by;
        CHECK(npu_graph_run(r->ctx, r->st, r->g, &r->tx, 1, &r->ty, 1, NULL)); /* warm */
        CHECK(npu_stream_synchronize(r->ctx, r->st));
}

/* One round of reps back-to-back runs; keeps the best time per run. */
static void side_round(struct result *r, int reps)
{
        double t0 = now_s(), t;

        for (int i = 0; i < reps; i++)
                CHECK(npu_graph_run(r->ctx, r->st, r->g, &r->tx, 1, &r->ty, 1, NULL));
        CHECK(npu_stream_synchronize(r->ctx, r->st));
        t = (now_s() - t0) / reps;
        if (t < r->s)
                r->s = t;
}

static void side_done(struct result *r)
{
        r->y = xmalloc(r->n * sizeof(float));
        CHECK(npu_memcpy_from_device(r->ctx, r->y, r->by, 0, r->n * sizeof(float)));
        CHECK(npu_graph_unload(r->ctx, r->g));
        CHECK(npu_free(r->ctx, r->bx));
        CHECK(npu_free(r->ctx, r->by));
        npu_disconnect(r->ctx);
}

/* passes off, plan only, all passes, all passes with the old kernels */
#define NSIDES 4

/* The model on the npuds, rounds interleaved so that a busy host slows all alike. */
static void run_sides(const char *const socks[NSIDES], const uint8_t *model, size_t msize,
                      int ndim, const int64_t *dims, const float *x, size_t n, int reps,
                      struct result r[NSIDES])
{
        for (int k = 0; k < NSIDES; k++)
                side_load(socks[k], model, msize, ndim, dims, x, n, &r[k]);
        for (int round = 0; round < 5; round++)
                for (int k = 0; k < NSIDES; k++)
                        side_round(&r[k], reps);
        for (int k = 0; k < NSIDES; k++)
                side_done(&r[k]);
}

static double max_diff(const float *a, const float *b, size_t n)
{
        double worst = 0;

        for (size_t i = 0; i < n; i++) {
                double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
                if (d > worst)
                        worst = d;
        }
        return worst;
}

static void report(const char *name, const struct result *off, const struct result *plan,
                   const struct result *on, const struct result *old, size_t n)
{
        double dold = max_diff(old->y, on->y, n);

        double diff = max_diff(on->y, off->y, n), diff2 = max_diff(plan->y, off->y, n);

        printf("%s: passes off %.2f ms, plan only %.2f ms, all passes %.2f ms (%lld nodes); "
               "all/off %.2f; max rel diff %.1e%s\n",
               name, off->s * 1e3, plan->s * 1e3, on->s * 1e3, on->nodes_after, on->s / off->s,
               diff > diff2 ? diff : diff2, diff < 1e-5 && diff2 < 1e-5 ? "" : " WRONG RESULT");
        for (int k = 0; k < 2; k++) {
                const struct result *r = k ? on : plan;
                if (r->inter > 0)
                        printf("%s memory plan (%s): arena %lld bytes for %lld bytes of intermediates, "
                               "ratio %.2f (target <= 0.5)\n", name, k ? "all passes" : "plan only",
                               r->arena, r->inter, (double)r->arena / (double)r->inter);
                else
                        printf("%s memory plan (%s): no intermediate left to plan\n", name,
                               k ? "all passes" : "plan only");
        }
        /* SLEEF is 1 ulp where libm is 0.5, and oneDNN sums in another order: a last-bits
         * difference, far inside the ONNX suite's tolerances */
        printf("%s kernels (all passes): scalar libm + OpenBLAS %.2f ms, SLEEF + oneDNN %.2f ms; "
               "new/old %.2f; max rel diff %.1e%s\n",
               name, old->s * 1e3, on->s * 1e3, on->s / old->s, dold,
               dold < 1e-4 ? "" : " WRONG RESULT");
}

int main(void)
{
        const char *extra[] = { "--sim-devices", "1", NULL };
        struct npud_proc off = { 0 }, plan = { 0 }, on = { 0 }, old = { 0 };
        size_t csize, msize;
        uint8_t *chain = chain_model(&csize), *mlp = mlp_model(&msize);
        float *cx = rand_buf(CHAIN_N, 1), *mx = rand_buf((size_t)MLP_B * MLP_H, 2);
        int rc = 0;

        setenv("NPUD_GRAPH_COMPILE", "0", 1);
        if (harness_start(&off, extra) < 0) {
                fprintf(stderr, "bench_compile: cannot start npud\n");
                return 1;
        }
        setenv("NPUD_GRAPH_COMPILE", "16", 1); /* GRAPH_COMPILE_PLAN */
        if (harness_start(&plan, extra) < 0) {
                fprintf(stderr, "bench_compile: cannot start npud\n");
                harness_stop(&off);
                return 1;
        }
        unsetenv("NPUD_GRAPH_COMPILE");
        if (harness_start(&on, extra) < 0) {
                fprintf(stderr, "bench_compile: cannot start npud\n");
                harness_stop(&off);
                harness_stop(&plan);
                return 1;
        }
        setenv("NPUD_VMATH", "0", 1);
        setenv("NPUD_SGEMM", "openblas", 1);
        if (harness_start(&old, extra) < 0) {
                fprintf(stderr, "bench_compile: cannot start npud\n");
                harness_stop(&off);
                harness_stop(&plan);
                harness_stop(&on);
                return 1;
        }
        unsetenv("NPUD_VMATH");
        unsetenv("NPUD_SGEMM");
        const char *socks[NSIDES] = { off.sock, plan.sock, on.sock, old.sock };
        struct result r[NSIDES];

        run_sides(socks, chain, csize, 1, (int64_t[]){ CHAIN_N }, cx, CHAIN_N, 4, r);
        report("elementwise chain, 8 ops over 4 M float32", &r[0], &r[1], &r[2], &r[3], CHAIN_N);
        for (int k = 0; k < NSIDES; k++)
                free(r[k].y);
        run_sides(socks, mlp, msize, 2, (int64_t[]){ MLP_B, MLP_H }, mx, (size_t)MLP_B * MLP_H, 10,
                  r);
        report("MLP 3 layers 32x1024x1024", &r[0], &r[1], &r[2], &r[3], (size_t)MLP_B * MLP_H);
        for (int k = 0; k < NSIDES; k++)
                free(r[k].y);
        if (harness_stop(&off) != 0 || harness_stop(&plan) != 0 || harness_stop(&on) != 0 ||
            harness_stop(&old) != 0) {
                fprintf(stderr, "bench_compile: npud did not exit cleanly\n");
                rc = 1;
        }
        free(chain);
        free(mlp);
        free(cx);
        free(mx);
        return rc;
}

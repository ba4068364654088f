/* Graph runs under a run context (ops/runctx.h), on models imported from bytes written
 * here: control flow without iterations (the cost estimate used to crash on them), the Loop
 * trip cap, cancellation from another thread and the deadline ending a Loop that would never
 * end, the byte budget refusing a huge ConstantOfShape, the LSTM whose sequence_lens are out
 * of range (a use after free), the keyed hash of value names (SipHash test vectors, and an
 * import of names that all collide under the former FNV-1a index). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "ops/runctx.h"
#include "util/siphash.h"
#include "proto/dtype.h"
#include "proto/errors.h"

#define F32 PROTO_DTYPE_FLOAT32
#define I32 PROTO_DTYPE_INT32
#define I64 PROTO_DTYPE_INT64
#define BOOL PROTO_DTYPE_BOOL

/* ---- protobuf wire format, enough for ONNX models ---- */

struct pb {
        uint8_t *p;
        size_t n, cap;
};

static void pb_put(struct pb *b, const void *d, size_t n)
{
        if (b->n + n > b->cap) {
                b->cap = (b->n + n) * 2 + 64;
                b->p = realloc(b->p, b->cap);
                ck_assert_ptr_nonnull(b->p);
        }
        if (n)
                memcpy(b->p + b->n, d, n);
        b->n += n;
}

static void pb_varint(struct pb *b, uint64_t v)
{
        uint8_t t[10];
        int n = 0;

        do {
                t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
        pb_put(b, t, (size_t)n);
}

static void pb_bytes(struct pb *b, int f, const void *d, size_t n)
{
        pb_varint(b, (uint64_t)f << 3 | 2);
        pb_varint(b, n);
        pb_put(b, d, n);
}

static void pb_str(struct pb *b, int f, const char *s)
{
        pb_bytes(b, f, s, strlen(s));
}

/* Appends m as field f and frees m. */
static void pb_msg(struct pb *b, int f, struct pb *m)
{
        pb_bytes(b, f, m->p, m->n);
        free(m->p);
        memset(m, 0, sizeof(*m));
}

static void pb_int(struct pb *b, int f, uint64_t v)
{
        pb_varint(b, (uint64_t)f << 3);
        pb_varint(b, v);
}

/* ValueInfoProto as field f of a graph: ndim < 0 leaves the shape out. */
static void pb_value(struct pb *g, int f, const char *name, int dtype, int ndim, const int64_t *dims)
{
        struct pb vi = { 0 }, tp = { 0 }, tt = { 0 }, sh = { 0 };

        pb_str(&vi, 1, name);
        pb_int(&tt, 1, (uint64_t)dtype);
        if (ndim >= 0) {
                for (int d = 0; d < ndim; d++) {
                        struct pb dim = { 0 };
                        pb_int(&dim, 1, (uint64_t)dims[d]);
                        pb_msg(&sh, 1, &dim);
                }
                pb_bytes(&tt, 2, sh.p ? sh.p : (const uint8_t *)"", sh.n);
                free(sh.p);
        }
        pb_msg(&tp, 1, &tt);
        pb_msg(&vi, 2, &tp);
        pb_msg(g, f, &vi);
}

/* TensorProto with raw data. */
static void pb_tensor(struct pb *t, const char *name, int dtype, int ndim, const int64_t *dims,
                      const void *raw, size_t len)
{
        for (int d = 0; d < ndim; d++)
                pb_int(t, 1, (uint64_t)dims[d]);
        pb_int(t, 2, (uint64_t)dtype);
        if (name)
                pb_str(t, 8, name);
        pb_bytes(t, 9, raw, len);
}

static void pb_init(struct pb *g, const char *name, int dtype, int ndim, const int64_t *dims,
                    const void *raw, size_t len)
{
        struct pb t = { 0 };

        pb_tensor(&t, name, dtype, ndim, dims, raw, len);
        pb_msg(g, 5, &t);
}

static void pb_attr_int(struct pb *node, const char *name, int64_t v)
{
        struct pb a = { 0 };

        pb_str(&a, 1, name);
        pb_int(&a, 3, (uint64_t)v);
        pb_int(&a, 20, 2);
        pb_msg(node, 5, &a);
}

static void pb_attr_graph(struct pb *node, const char *name, struct pb *graph)
{
        struct pb a = { 0 };

        pb_str(&a, 1, name);
        pb_msg(&a, 6, graph);
        pb_int(&a, 20, 5);
        pb_msg(node, 5, &a);
}

/* A node (attributes already in *node, or an empty pb) appended to g. "" names an omitted
 * input. */
static void pb_node(struct pb *g, struct pb *node, const char *op, const char *name, int nin,
                    const char *const *in, int nout, const char *const *out)
{
        struct pb n = { 0 };

        for (int i = 0; i < nin; i++)
                pb_str(&n, 1, in[i]);
        for (int j = 0; j < nout; j++)
                pb_str(&n, 2, out[j]);
        pb_str(&n, 3, name);
        pb_str(&n, 4, op);
        if (node && node->n)
                pb_put(&n, node->p, node->n);
        if (node) {
                free(node->p);
                memset(node, 0, sizeof(*node));
        }
        pb_msg(g, 1, &n);
}

static struct pb pb_model(struct pb *graph, int opset)
{
        struct pb m = { 0 }, o = { 0 };

        pb_int(&m, 1, 8);
        pb_str(&o, 1, "");
        pb_int(&o, 2, (uint64_t)opset);
        pb_msg(&m, 8, &o);
        pb_str(graph, 2, "g");
        pb_msg(&m, 7, graph);
        return m;
}

static struct graph *import(struct pb *m)
{
        struct graph *g = NULL;
        char err[512] = "";
        int rc = onnx_import(m->p, m->n, NULL, &g, err, sizeof(err));

        ck_assert_msg(rc == 0, "import: %s", err);
        free(m->p);
        return g;
}

/* ---- models ---- */

/* vout = Loop(M, c, v) with a body that passes its condition and value through: M absent
 * when has_m is 0, else an initializer; c a true initializer. v is float [2]. */
static struct graph *loop_model(int has_m, int64_t m)
{
        static const int64_t two[] = { 2 };
        struct pb g = { 0 }, body = { 0 }, node = { 0 }, model;
        uint8_t t = 1;

        pb_node(&body, NULL, "Identity", "pass_cond", 1, (const char *[]){ "cin" }, 1,
                (const char *[]){ "cout" });
        pb_node(&body, NULL, "Identity", "pass_v", 1, (const char *[]){ "vin" }, 1,
                (const char *[]){ "vb" });
        pb_str(&body, 2, "body");
        pb_value(&body, 11, "i", I64, 0, NULL);
        pb_value(&body, 11, "cin", BOOL, 0, NULL);
        pb_value(&body, 11, "vin", F32, -1, NULL);
        pb_value(&body, 12, "cout", BOOL, 0, NULL);
        pb_value(&body, 12, "vb", F32, -1, NULL);
        pb_attr_graph(&node, "body", &body);
        pb_node(&g, &node, "Loop", "the_loop", 3, (const char *[]){ has_m ? "M" : "", "c", "v" }, 1,
                (const char *[]){ "vout" });
        if (has_m)
                pb_init(&g, "M", I64, 0, NULL, &m, sizeof(m));
        pb_init(&g, "c", BOOL, 0, NULL, &t, 1);
        pb_value(&g, 11, "v", F32, 1, two);
        pb_value(&g, 12, "vout", F32, 1, two);
        model = pb_model(&g, 13);
        return import(&model);
}

/* sout = Scan(s, x) over x's axis 0, body so = Add(sin, xt); s float [2], x float [steps, 2]. */
static struct graph *scan_model(int64_t steps)
{
        const int64_t two[] = { 2 }, xd[] = { steps, 2 };
        struct pb g = { 0 }, body = { 0 }, node = { 0 }, model;

        pb_node(&body, NULL, "Add", "acc", 2, (const char *[]){ "sin", "xt" }, 1,
                (const char *[]){ "so" });
        pb_str(&body, 2, "body");
        pb_value(&body, 11, "sin", F32, 1, two);
        pb_value(&body, 11, "xt", F32, 1, two);
        pb_value(&body, 12, "so", F32, 1, two);
        pb_attr_graph(&node, "body", &body);
        pb_attr_int(&node, "num_scan_inputs", 1);
        pb_node(&g, &node, "Scan", "the_scan", 2, (const char *[]){ "s", "x" }, 1,
                (const char *[]){ "sout" });
        pb_value(&g, 11, "s", F32, 1, two);
        pb_value(&g, 11, "x", F32, 2, xd);
        pb_value(&g, 12, "sout", F32, 1, two);
        model = pb_model(&g, 11);
        return import(&model);
}

/* dims = Shape(ConstantOfShape(shape)): a float intermediate of the given shape. */
static struct graph *cos_model(int64_t a, int64_t b)
{
        const int64_t two[] = { 2 }, shape[] = { a, b };
        struct pb g = { 0 }, model;

        pb_node(&g, NULL, "ConstantOfShape", "huge", 1, (const char *[]){ "shape" }, 1,
                (const char *[]){ "big" });
        pb_node(&g, NULL, "Shape", "dims_of", 1, (const char *[]){ "big" }, 1,
                (const char *[]){ "dims" });
        pb_init(&g, "shape", I64, 1, two, shape, sizeof(shape));
        pb_value(&g, 12, "dims", I64, 1, two);
        model = pb_model(&g, 13);
        return import(&model);
}

static struct ops_tensor f32v(int ndim, const int64_t *dims, float *data)
{
        struct ops_tensor t = { .dtype = F32, .ndim = ndim, .data = data };

        for (int d = 0; d < ndim; d++)
                t.dims[d] = dims[d];
        return t;
}

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- control flow without iterations ---- */

START_TEST(test_loop_zero_trips)
{
        struct graph *g = loop_model(1, 0);
        float v[2] = { 3, 4 }, out[2] = { 0 };
        struct ops_tensor in = f32v(1, (int64_t[]){ 2 }, v), o = f32v(1, (int64_t[]){ 2 }, out);
        char err[512] = "";
        int counted = -1;

        /* the estimate on the loop thread: the carried value has no data there */
        in.data = NULL;
        ck_assert_uint_gt(graph_estimate_ns(g, 1, &in, 1e9, 1e9, &counted), 0);
        in.data = v;
        ck_assert_msg(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert(out[0] == 3 && out[1] == 4);
        graph_free(g);
}
END_TEST

START_TEST(test_scan_zero_steps)
{
        struct graph *g = scan_model(0);
        float s[2] = { 5, 6 }, out[2] = { 0 };
        struct ops_tensor in[2] = { f32v(1, (int64_t[]){ 2 }, NULL), f32v(2, (int64_t[]){ 0, 2 }, NULL) };
        struct ops_tensor o = f32v(1, (int64_t[]){ 2 }, out);
        char err[512] = "";

        ck_assert_uint_gt(graph_estimate_ns(g, 2, in, 1e9, 1e9, NULL), 0);
        in[0].data = s;
        ck_assert_msg(graph_exec(g, 2, in, 1, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert(out[0] == 5 && out[1] == 6);
        graph_free(g);
}
END_TEST

/* ---- trip cap, cancellation, deadline ---- */

START_TEST(test_loop_trip_cap)
{
        struct ops_mem_budget budget = { .name = "tenant 't'", .limit = 1 << 20 };
        struct ops_runctx ctx = { .max_loop_trips = 1000, .mem = &budget };
        struct graph *g = loop_model(1, INT64_MAX);
        float v[2] = { 1, 2 }, out[2];
        struct ops_tensor in = f32v(1, (int64_t[]){ 2 }, v), o = f32v(1, (int64_t[]){ 2 }, out);
        char err[512] = "";
        double t0 = now_s();

        ops_runctx_set(&ctx);
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)), PROTO_E_LIMIT);
        ck_assert_msg(strstr(err, "the_loop") && strstr(err, "1000"), "%s", err);
        ck_assert(now_s() - t0 < 5.0); /* refused up front (generous for loaded CI hosts) */
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        graph_free(g);

        /* no M, a condition that stays true: stopped at the cap */
        ctx.code = 0;
        g = loop_model(0, 0);
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)), PROTO_E_LIMIT);
        ck_assert_msg(strstr(err, "the_loop") && strstr(err, "after 1000 iterations"), "%s", err);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);

        /* M within the cap runs */
        graph_free(g);
        ctx.code = 0;
        g = loop_model(1, 1000);
        ck_assert_msg(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert(out[0] == 1 && out[1] == 2);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        ck_assert_uint_gt(atomic_load(&budget.peak), 0);
        ops_runctx_set(NULL);
        graph_free(g);
}
END_TEST

static atomic_int cancel_flag;

static void *canceller(void *arg)
{
        usleep(100000);
        atomic_store(&cancel_flag, 1);
        return NULL;
}

START_TEST(test_loop_cancel)
{
        struct ops_runctx ctx = { .cancel = &cancel_flag };
        struct graph *g = loop_model(1, INT64_MAX);
        float v[2] = { 1, 2 }, out[2];
        struct ops_tensor in = f32v(1, (int64_t[]){ 2 }, v), o = f32v(1, (int64_t[]){ 2 }, out);
        char err[512] = "";
        pthread_t th;
        double t0;

        atomic_store(&cancel_flag, 0);
        ops_runctx_set(&ctx);
        ck_assert_int_eq(pthread_create(&th, NULL, canceller, NULL), 0);
        t0 = now_s();
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)), PROTO_E_CANCELLED);
        /* cancelled 0.1 s in; it notices within milliseconds (the bound leaves room for
         * sanitizer builds on loaded hosts; before the checks it never returned) */
        ck_assert_msg(now_s() - t0 < 5.0, "took %.3f s", now_s() - t0);
        ck_assert_msg(strstr(err, "the_loop") && strstr(err, "cancelled"), "%s", err);
        pthread_join(th, NULL);
        ops_runctx_set(NULL);
        graph_free(g);
}
END_TEST

START_TEST(test_loop_deadline)
{
        struct ops_runctx ctx = { .deadline_ns = now_ns() + 150000000ull };
        struct graph *g = loop_model(0, 0);
        float v[2] = { 1, 2 }, out[2];
        struct ops_tensor in = f32v(1, (int64_t[]){ 2 }, v), o = f32v(1, (int64_t[]){ 2 }, out);
        char err[512] = "";
        double t0 = now_s();

        ops_runctx_set(&ctx);
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)), PROTO_E_LIMIT);
        ck_assert_msg(now_s() - t0 < 5.0, "took %.3f s", now_s() - t0);
        ck_assert_msg(strstr(err, "the_loop") && strstr(err, "time limit"), "%s", err);
        /* a run already past its deadline stops before its first node */
        ctx.code = 0;
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &o, err, sizeof(err)), PROTO_E_LIMIT);
        ops_runctx_set(NULL);
        graph_free(g);
}
END_TEST

/* ---- byte budget ---- */

START_TEST(test_budget_constant_of_shape)
{
        struct ops_mem_budget parent = { .name = "npud", .limit = 1ull << 40 };
        struct ops_mem_budget budget = { .name = "tenant 'batch'", .limit = 256ull << 20,
                                         .parent = &parent };
        struct ops_runctx ctx = { .mem = &budget };
        struct graph *g = cos_model(1 << 20, 1 << 20); /* 4 TiB of float */
        int64_t dims[2];
        struct ops_tensor o = { .dtype = I64, .ndim = 1, .dims = { 2 }, .data = dims };
        char err[512] = "";

        ops_runctx_set(&ctx);
        ck_assert_int_eq(graph_exec(g, 0, NULL, 1, &o, err, sizeof(err)), PROTO_E_QUOTA);
        ck_assert_msg(strstr(err, "huge") && strstr(err, "batch"), "%s", err);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        ck_assert_uint_eq(atomic_load(&parent.used), 0);
        graph_free(g);

        /* 300 MiB: over a 256 MiB budget too */
        ctx.code = 0;
        g = cos_model(300, 1 << 18);
        ck_assert_int_eq(graph_exec(g, 0, NULL, 1, &o, err, sizeof(err)), PROTO_E_QUOTA);
        graph_free(g);

        /* 64 MiB fits, and the budget is back to zero afterwards */
        ctx.code = 0;
        g = cos_model(64, 1 << 18);
        ck_assert_msg(graph_exec(g, 0, NULL, 1, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(dims[0], 64);
        ck_assert_int_eq(dims[1], 1 << 18);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        ck_assert_uint_ge(atomic_load(&budget.peak), 64ull << 20);
        ops_runctx_set(NULL);
        graph_free(g);
}
END_TEST

/* A Loop stacking a 1 MiB scan output per iteration for 1,000 iterations: the stacked
 * output grows in the budget's sight and the run fails with QUOTA at 256 MiB, everything
 * given back. */
START_TEST(test_budget_loop_scan_output)
{
        static const int64_t two[] = { 2 }, one[] = { 1 }, sdims[] = { 1000, 262144 };
        const int64_t m = 1000, slice = 262144;
        struct ops_mem_budget budget = { .name = "tenant 'batch'", .limit = 256ull << 20 };
        struct ops_runctx ctx = { .mem = &budget };
        struct pb g = { 0 }, body = { 0 }, node = { 0 }, model;
        struct graph *gr;
        float v[2] = { 1, 2 }, out[2];
        struct ops_tensor in = f32v(1, two, v), o[2] = { f32v(1, two, out), f32v(2, sdims, NULL) };
        uint8_t t = 1;
        char err[512] = "";

        pb_node(&body, NULL, "Identity", "pass_cond", 1, (const char *[]){ "cin" }, 1,
                (const char *[]){ "cout" });
        pb_node(&body, NULL, "Identity", "pass_v", 1, (const char *[]){ "vin" }, 1,
                (const char *[]){ "vb" });
        pb_node(&body, NULL, "ConstantOfShape", "slab", 1, (const char *[]){ "shp" }, 1,
                (const char *[]){ "s" });
        pb_init(&body, "shp", I64, 1, one, &slice, sizeof(slice));
        pb_str(&body, 2, "body");
        pb_value(&body, 11, "i", I64, 0, NULL);
        pb_value(&body, 11, "cin", BOOL, 0, NULL);
        pb_value(&body, 11, "vin", F32, -1, NULL);
        pb_value(&body, 12, "cout", BOOL, 0, NULL);
        pb_value(&body, 12, "vb", F32, -1, NULL);
        pb_value(&body, 12, "s", F32, -1, NULL);
        pb_attr_graph(&node, "body", &body);
        pb_node(&g, &node, "Loop", "the_loop", 3, (const char *[]){ "M", "c", "v" }, 2,
                (const char *[]){ "vout", "sc" });
        pb_init(&g, "M", I64, 0, NULL, &m, sizeof(m));
        pb_init(&g, "c", BOOL, 0, NULL, &t, 1);
        pb_value(&g, 11, "v", F32, 1, two);
        pb_value(&g, 12, "vout", F32, 1, two);
        pb_value(&g, 12, "sc", F32, 2, sdims);
        model = pb_model(&g, 13);
        gr = import(&model);
        ops_runctx_set(&ctx);
        ck_assert_int_eq(graph_exec(gr, 1, &in, 2, o, err, sizeof(err)), PROTO_E_QUOTA);
        ck_assert_msg(strstr(err, "the_loop") && strstr(err, "batch"), "%s", err);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        ck_assert_uint_le(atomic_load(&budget.peak), 256ull << 20);
        ops_runctx_set(NULL);
        graph_free(gr);
}
END_TEST

/* ---- LSTM sequence_lens ---- */

START_TEST(test_lstm_sequence_lens)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "LSTM", 14);
        float x[2] = { 1, 2 }, w[4] = { 0.1f, 0.2f, 0.3f, 0.4f }, r[4] = { 0.5f, 0.6f, 0.7f, 0.8f };
        float y[2], yh[1];
        int32_t lens[1] = { 5 };
        struct ops_call c;
        char err[256] = "";

        ck_assert_ptr_nonnull(def);
        memset(&c, 0, sizeof(c));
        c.nin = 5;
        c.in[0] = f32v(3, (int64_t[]){ 2, 1, 1 }, x); /* S = 2, B = 1, I = 1 */
        c.in[1] = f32v(3, (int64_t[]){ 1, 4, 1 }, w);
        c.in[2] = f32v(3, (int64_t[]){ 1, 4, 1 }, r);
        c.in[4] = (struct ops_tensor){ .dtype = I32, .ndim = 1, .dims = { 1 }, .data = lens };
        c.nout = 2;
        c.out[0] = f32v(4, (int64_t[]){ 2, 1, 1, 1 }, y);
        c.out[1] = f32v(3, (int64_t[]){ 1, 1, 1 }, yh);
        c.opset = 14;
        ck_assert_int_eq(ops_run(def, &c, err, sizeof(err)), -EINVAL);
        /* the value quoted is the one given (it was read from freed memory) */
        ck_assert_msg(strstr(err, "sequence_lens") && strstr(err, "is 5"), "%s", err);
        lens[0] = -1;
        ck_assert_int_eq(ops_run(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "is -1"), "%s", err);
        lens[0] = 2;
        ck_assert_msg(ops_run(def, &c, err, sizeof(err)) == 0, "%s", err);
        lens[0] = 1;
        ck_assert_msg(ops_run(def, &c, err, sizeof(err)) == 0, "%s", err);
}
END_TEST

/* Found by fuzz_graph: a model whose only initializer is empty has no storage block, and
 * placing that tensor computed NULL + 0 (undefined; UBSan stops the ASan build there). */
START_TEST(test_only_empty_initializer)
{
        const int64_t zero[] = { 0 };
        struct pb g = { 0 }, model;
        struct graph *gr;
        float out = 0;
        struct ops_tensor o = { .dtype = F32, .ndim = 0, .data = &out };
        char err[512] = "";

        pb_node(&g, NULL, "ConstantOfShape", "scalar", 1, (const char *[]){ "shape" }, 1,
                (const char *[]){ "y" });
        pb_init(&g, "shape", I64, 1, zero, "", 0);
        pb_value(&g, 12, "y", F32, 0, NULL);
        model = pb_model(&g, 13);
        gr = import(&model);
        ck_assert_msg(graph_exec(gr, 0, NULL, 1, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert(out == 0);
        graph_free(gr);
}
END_TEST

/* ---- long kernels stop within a block of work ---- */

static void fill(float *p, int64_t n, float v)
{
        for (int64_t i = 0; i < n; i++)
                p[i] = v;
}

/* A run cancelled before the kernel starts: MatMul computes its first row block only, Add its
 * first OPS_POLL_ELEMS elements, Tile its first runs; each leaves the stop code recorded. */
START_TEST(test_kernel_cancel)
{
        enum { M = 2048, K = 1024, N = 1024, E = 1 << 22 };
        atomic_int flag = 1;
        struct ops_runctx ctx = { .cancel = &flag };
        const struct ops_def *mm = ops_lookup_onnx(NULL, "MatMul", 13);
        const struct ops_def *add = ops_lookup_onnx(NULL, "Add", 14);
        const struct ops_def *tile = ops_lookup_onnx(NULL, "Tile", 13);
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *c = malloc(sizeof(float) * (size_t)E);
        int64_t reps[1] = { 4096 };
        struct ops_call call;
        char err[256] = "";

        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_nonnull(c);
        fill(a, (int64_t)M * K, 1);
        fill(b, (int64_t)K * N, 1);
        fill(c, E, -1);
        memset(&call, 0, sizeof(call));
        call.nin = 2;
        call.nout = 1;
        call.in[0] = f32v(2, (int64_t[]){ M, K }, a);
        call.in[1] = f32v(2, (int64_t[]){ K, N }, b);
        call.out[0] = f32v(2, (int64_t[]){ M, N }, c);
        ops_runctx_set(&ctx);
        ck_assert_int_lt(ops_run(mm, &call, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "MatMul") && strstr(err, "cancelled"), "%s", err);
        ck_assert_int_eq(ctx.code, PROTO_E_CANCELLED);
        ck_assert(c[0] == (float)K);                   /* the first block ran */
        ck_assert(c[(int64_t)M * N - 1] == -1);        /* the last did not */

        fill(c, E, -1);
        ctx.code = 0;
        call.in[0] = f32v(1, (int64_t[]){ E }, a);
        call.in[1] = f32v(1, (int64_t[]){ E }, a + 1);
        call.out[0] = f32v(1, (int64_t[]){ E }, c);
        ck_assert_int_lt(ops_run(add, &call, err, sizeof(err)), 0);
        ck_assert_int_eq(ctx.code, PROTO_E_CANCELLED);
        ck_assert(c[0] == 2 && c[E - 1] == -1);

        fill(c, E, -1);
        ctx.code = 0;
        call.in[0] = f32v(1, (int64_t[]){ 1024 }, a);
        call.in[1] = (struct ops_tensor){ .dtype = I64, .ndim = 1, .dims = { 1 }, .data = reps };
        call.out[0] = f32v(1, (int64_t[]){ E }, c);
        (void)ops_run(tile, &call, err, sizeof(err)); /* stops quietly: the code tells */
        ck_assert_int_eq(ctx.code, PROTO_E_CANCELLED);
        ck_assert(c[0] == 1 && c[E - 1] == -1);
        /* MaxPool, whose work is the output times the kernel's extent */
        {
                const struct ops_def *pool = ops_lookup_onnx(NULL, "MaxPool", 12);
                static const int64_t ks[2] = { 8, 8 };

                ctx.code = 0;
                memset(&call, 0, sizeof(call));
                call.nin = 1;
                call.nout = 1;
                call.in[0] = f32v(4, (int64_t[]){ 1, 1, 1024, 1024 }, a);
                call.out[0] = f32v(4, (int64_t[]){ 1, 1, 1017, 1017 }, c);
                call.nattr = 1;
                strcpy(call.attr[0].name, "kernel_shape");
                call.attr[0].type = OPS_ATTR_INTS;
                call.attr[0].n = 2;
                call.attr[0].ints = ks;
                ck_assert_int_eq(ops_run(pool, &call, err, sizeof(err)), -ECANCELED);
                ck_assert_msg(strstr(err, "MaxPool") && strstr(err, "cancelled"), "%s", err);
                ck_assert_int_eq(ctx.code, PROTO_E_CANCELLED);
        }
        ops_runctx_set(NULL);

        /* without a context nothing stops */
        memset(&call, 0, sizeof(call));
        call.nin = 2;
        call.nout = 1;
        call.in[0] = f32v(1, (int64_t[]){ 1024 }, a);
        call.in[1] = (struct ops_tensor){ .dtype = I64, .ndim = 1, .dims = { 1 }, .data = reps };
        call.out[0] = f32v(1, (int64_t[]){ E }, c);
        fill(c, E, -1);
        ck_assert_msg(ops_run(tile, &call, err, sizeof(err)) == 0, "%s", err);
        ck_assert(c[E - 1] == 1);
        free(a);
        free(b);
        free(c);
}
END_TEST

/* ---- keyed hash ---- */

START_TEST(test_siphash_vectors)
{
        uint8_t key[16], msg[64], zero[16] = { 0 };

        for (int i = 0; i < 16; i++)
                key[i] = (uint8_t)i;
        for (int i = 0; i < 64; i++)
                msg[i] = (uint8_t)i;
        /* the SipHash paper's vectors (2-4), key 00..0f, messages 00.. of length 0, 8, 15 */
        ck_assert_uint_eq(siphash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
        ck_assert_uint_eq(siphash24(key, msg, 8), 0x93f5f5799a932462ull);
        ck_assert_uint_eq(siphash24(key, msg, 15), 0xa129ca6149be45e5ull);
        /* SipHash-1-3 under the zero key */
        ck_assert_uint_eq(siphash13(zero, "", 0), 0xd1fba762150c532cull);
        ck_assert_uint_eq(siphash13(zero, "siphash", 7), 0x8264ceeccb16bcbeull);
        /* the process key: stable within the process, and not the zero key */
        ck_assert_uint_eq(util_hash_str("abc"), util_hash_str("abc"));
        ck_assert_uint_ne(util_hash_str(""), 0xd1fba762150c532cull);
}
END_TEST

static uint32_t fnv1a(const char *s, size_t n)
{
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < n; i++)
                h = (h ^ (uint8_t)s[i]) * 16777619u;
        return h;
}

/* A printable name "v<i>_..." whose FNV-1a hash has the low 20 bits T: the last multiply is
 * invertible mod 2^20, so two free characters and a third solved for do it. */
static void colliding_name(int i, uint32_t T, char *out)
{
        const uint32_t mask = (1u << 20) - 1;
        uint32_t pinv = 16777619u;

        for (int k = 0; k < 5; k++)
                pinv *= 2 - 16777619u * pinv;
        for (int extra = 0; extra < 90; extra++) {
                int n = extra ? sprintf(out, "v%d_%c", i, 0x21 + extra) : sprintf(out, "v%d_", i);
                uint32_t h0 = fnv1a(out, (size_t)n), x = (T * pinv) & mask;

                for (uint32_t c1 = 0x21; c1 < 0x7f; c1++)
                        for (uint32_t c2 = 0x21; c2 < 0x7f; c2++) {
                                uint32_t h = (((h0 ^ c1) * 16777619u) ^ c2) * 16777619u, c3;

                                if ((h ^ x) & mask & ~0xffu)
                                        continue;
                                c3 = (h ^ x) & 0xff;
                                if (c3 < 0x21 || c3 > 0x7e)
                                        continue;
                                out[n] = (char)c1;
                                out[n + 1] = (char)c2;
                                out[n + 2] = (char)c3;
                                out[n + 3] = 0;
                                return;
                        }
        }
        ck_abort_msg("no colliding name for %d", i);
}

/* A chain of n Identity nodes through the given value names. */
static struct pb chain_model(int n, char (*nm)[32])
{
        const int64_t four[] = { 4 };
        struct pb g = { 0 };

        for (int i = 0; i < n; i++)
                pb_node(&g, NULL, "Identity", "", 1, (const char *[]){ nm[i] }, 1,
                        (const char *[]){ nm[i + 1] });
        pb_value(&g, 11, nm[0], F32, 1, four);
        pb_value(&g, 12, nm[n], F32, 1, four);
        return pb_model(&g, 13);
}

/* 30,000 Identity nodes whose value names share their FNV-1a slot import about as fast as
 * the same chain with plain names. Under the former index the colliding chain took some
 * 100 times longer (quadratic probing); the comparison holds on a slow or sanitized build. */
START_TEST(test_import_colliding_names)
{
        enum { N = 30000 };
        static char nm[N + 1][32], plain[N + 1][32];
        struct pb model;
        struct graph *gr;
        double t0, t_collide, t_plain;

        for (int i = 0; i <= N; i++) {
                colliding_name(i, 12345, nm[i]);
                ck_assert_uint_eq(fnv1a(nm[i], strlen(nm[i])) & 0xfffff, 12345);
                snprintf(plain[i], sizeof(plain[i]), "value_%d", i);
        }
        model = chain_model(N, plain);
        t0 = now_s();
        gr = import(&model);
        t_plain = now_s() - t0;
        graph_free(gr);
        model = chain_model(N, nm);
        t0 = now_s();
        gr = import(&model);
        t_collide = now_s() - t0;
        ck_assert_msg(t_collide < 4 * t_plain + 0.5, "colliding names %.2f s, plain %.2f s",
                      t_collide, t_plain);
        ck_assert_int_eq(gr->nnodes, N);
        ck_assert_int_eq(graph_find_value(gr, nm[N / 2]), N / 2);
        graph_free(gr);
}
END_TEST

/* An If whose branches both read the same 2,000 values of the enclosing graph: its implicit
 * inputs list each value once (they were deduplicated by a search per value, quadratic in
 * what a subgraph reads: 120,000 reads took 13.4 s against 3.5 s for the same nodes without
 * the If; now sorted once). */
START_TEST(test_import_wide_subgraph)
{
        enum { N = 2000 };
        static char v[N][16], t[N][16];
        const int64_t four[] = { 4 };
        struct pb g = { 0 }, body = { 0 }, other = { 0 }, node = { 0 }, model;
        struct graph *gr;
        const struct graph_node *gn = NULL;

        for (int i = 0; i < N; i++) {
                snprintf(v[i], sizeof(v[i]), "v%d", i);
                snprintf(t[i], sizeof(t[i]), "t%d", i);
        }
        for (int i = 0; i < N; i++) {
                pb_node(&g, NULL, "Identity", "", 1, (const char *[]){ "x" }, 1, (const char *[]){ v[i] });
                pb_node(&body, NULL, "Identity", "", 1, (const char *[]){ v[i] }, 1, (const char *[]){ t[i] });
                pb_node(&other, NULL, "Identity", "", 1, (const char *[]){ v[N - 1 - i] }, 1,
                        (const char *[]){ t[i] });
        }
        pb_str(&body, 2, "then");
        pb_value(&body, 12, t[0], F32, 1, four);
        pb_str(&other, 2, "else");
        pb_value(&other, 12, t[0], F32, 1, four);
        pb_attr_graph(&node, "then_branch", &body);
        pb_attr_graph(&node, "else_branch", &other);
        pb_node(&g, &node, "If", "wide", 1, (const char *[]){ "c" }, 1, (const char *[]){ "y" });
        pb_value(&g, 11, "x", F32, 1, four);
        pb_value(&g, 11, "c", BOOL, 0, NULL);
        pb_value(&g, 12, "y", F32, 1, four);
        model = pb_model(&g, 13);
        gr = import(&model);
        for (int n = 0; n < gr->nnodes; n++)
                if (strcmp(gr->nodes[n].name, "wide") == 0)
                        gn = &gr->nodes[n];
        ck_assert_ptr_nonnull(gn);
        ck_assert_int_eq(gn->nimplicit, N);
        for (int i = 1; i < gn->nimplicit; i++)
                ck_assert_int_lt(gn->implicit[i - 1], gn->implicit[i]);
        for (int i = 0; i < N; i++) /* every v_i read twice by the If, once counted */
                ck_assert_int_eq(gr->values[graph_find_value(gr, v[i])].uses, 1);
        graph_free(gr);
}
END_TEST

/* Each node's domain is looked up in the model's opset_import list, so an import of millions
 * of entries would be quadratic in the model's size: more than ONNX_MAX_OPSET_IMPORTS are
 * refused. */
START_TEST(test_opset_import_limit)
{
        struct pb m = { 0 }, g = { 0 };
        struct graph *gr = NULL;
        char err[512] = "", dom[32];

        pb_int(&m, 1, 8);
        for (int i = 0; i <= ONNX_MAX_OPSET_IMPORTS; i++) {
                struct pb o = { 0 };

                snprintf(dom, sizeof(dom), "com.d%d", i);
                pb_str(&o, 1, i ? dom : "");
                pb_int(&o, 2, 13);
                pb_msg(&m, 8, &o);
        }
        pb_node(&g, NULL, "Identity", "id", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        pb_value(&g, 11, "x", F32, 1, (const int64_t[]){ 4 });
        pb_value(&g, 12, "y", F32, 1, (const int64_t[]){ 4 });
        pb_str(&g, 2, "g");
        pb_msg(&m, 7, &g);
        ck_assert_int_eq(onnx_import(m.p, m.n, NULL, &gr, err, sizeof(err)), PROTO_E_LIMIT);
        ck_assert_msg(strstr(err, "operator sets"), "%s", err);
        ck_assert_ptr_null(gr);
        free(m.p);
}
END_TEST

static Suite *limits_suite(void)
{
        Suite *s = suite_create("graph-limits");
        TCase *tc = tcase_create("limits");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_loop_zero_trips);
        tcase_add_test(tc, test_scan_zero_steps);
        tcase_add_test(tc, test_loop_trip_cap);
        tcase_add_test(tc, test_loop_cancel);
        tcase_add_test(tc, test_loop_deadline);
        tcase_add_test(tc, test_budget_constant_of_shape);
        tcase_add_test(tc, test_budget_loop_scan_output);
        tcase_add_test(tc, test_lstm_sequence_lens);
        tcase_add_test(tc, test_kernel_cancel);
        tcase_add_test(tc, test_only_empty_initializer);
        tcase_add_test(tc, test_siphash_vectors);
        tcase_add_test(tc, test_import_colliding_names);
        tcase_add_test(tc, test_opset_import_limit);
        tcase_add_test(tc, test_import_wide_subgraph);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(limits_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

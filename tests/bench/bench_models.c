/* bench_models: four realistic models (issue 11, "Figures") timed through npud against ONNX
 * Runtime on the same inputs with the same thread count:
 *   - an MLP 32x1024 -> 1024 -> 1024 -> 10 (Gemm transB=1 + Relu as PyTorch exports
 *     nn.Linear, the last layer MatMul + Add);
 *   - a ResNet basic block on 1x64x56x56 (Conv3x3 + BatchNormalization + Relu, Conv3x3 +
 *     BatchNormalization, residual Add, Relu);
 *   - a transformer encoder layer, seq 128, d 256, 4 heads, FFN 1024 (attention by
 *     MatMul / Div by sqrt(d_k) / additive causal mask / Softmax, LayerNormalization after
 *     each residual Add, GELU in its Erf form);
 *   - the 8-operator elementwise chain of bench_compile over 4 M float32 (same operators,
 *     same constants).
 * The models are built here with tests/onnx-build.h and written to a temporary directory at
 * bench time (no binary model in the repository). npud (passes on, one device, --workers T)
 * loads each once and runs it N times: median and p90 per run (npu_graph_run + synchronize).
 * ONNX Runtime runs the same .onnx file and input through tests/bench/ort-time.js under node
 * when ORT_NODE_MODULES names a node_modules folder holding onnxruntime-node (see
 * docs/benchmarks.md); otherwise that column is skipped with a message and the npud figures
 * still print. Both get T threads: T = NPUD_BENCH_THREADS, else the number of online CPUs,
 * which is npud's default host worker count in compute mode. Also printed: ONNX Runtime on
 * 1 thread, the largest difference between the two outputs against the ONNX suite's
 * tolerance (rtol 1e-3, atol 1e-7, as npu-onnx-test), and the memory plan from
 * npu_graph_info (arena bytes against the sum of the intermediates; target <= 0.5). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npu.h"
#include "tests/integration/harness.h"

#define ONNX_BUILD_ASSERT(cond)                                                                \
        do {                                                                                   \
                if (!(cond)) {                                                                 \
                        fprintf(stderr, "bench_models: %s:%d: %s failed\n", __FILE__,          \
                                __LINE__, #cond);                                              \
                        abort();                                                               \
                }                                                                              \
        } while (0)
#include "tests/onnx-build.h"

#define CHECK(call)                                                                            \
        do {                                                                                   \
                npu_status_t st_ = (call);                                                     \
                if (st_ != NPU_OK) {                                                           \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_),             \
                                npu_error_message());                                          \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define RTOL 1e-3 /* ONNX_TEST_RTOL, ONNX_TEST_ATOL (client/onnx-tensor.h) */
#define ATOL 1e-7
#define SECONDS_PER_SIDE 2.0 /* time npud runs a model for, about; ORT runs as many */
#define ROUNDS 3             /* npud and ORT take turns, ROUNDS times */

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
        void *p = calloc(1, n ? n : 1);

        if (!p) {
                fprintf(stderr, "bench_models: out of memory\n");
                exit(1);
        }
        return p;
}

/* Uniform in [-scale, scale), the same sequence on every run. */
static void fill(float *p, size_t n, unsigned seed, float scale)
{
        for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                p[i] = ((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f) * scale;
        }
}

/* ---- models: one float32 input X, one float32 output Y ---- */

struct bmodel {
        const char *name;
        double target;      /* npud / ORT latency target */
        int ndim, ydim;
        int64_t dims[4], ydims[4];
        size_t n, yn;       /* elements of X and Y */
        uint8_t *bytes;     /* serialized ModelProto */
        size_t len;
        /* while building */
        Onnx__NodeProto *nodes[64];
        Onnx__TensorProto *init[64];
        int nnode, ninit;
        unsigned seed;
};

static size_t count(int ndim, const int64_t *d)
{
        size_t n = 1;

        for (int i = 0; i < ndim; i++)
                n *= (size_t)d[i];
        return n;
}

static const char *S(const char *fmt, ...)
{
        char buf[64];
        va_list ap;
        char *s;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        s = K(strlen(buf) + 1);
        memcpy(s, buf, strlen(buf) + 1);
        return s;
}

static Onnx__TensorProto *tensor(struct bmodel *m, const char *name, int dtype, int ndim,
                                 const int64_t *dims, const void *data, size_t elem)
{
        Onnx__TensorProto *t = K(sizeof(*t));
        size_t bytes = count(ndim, dims) * elem;

        ONNX_BUILD_ASSERT(m->ninit < 64);
        onnx__tensor_proto__init(t);
        t->name = (char *)name;
        t->n_dims = (size_t)ndim;
        t->dims = K(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
        if (ndim)
                memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
        t->has_data_type = 1;
        t->data_type = dtype;
        t->has_raw_data = 1;
        t->raw_data.len = bytes;
        t->raw_data.data = K(bytes);
        if (data)
                memcpy(t->raw_data.data, data, bytes);
        m->init[m->ninit++] = t;
        return t;
}

/* A float32 weight of the given shape, uniform in [-scale, scale) plus offset. */
static const char *weight(struct bmodel *m, const char *name, int ndim, const int64_t *dims,
                          float scale, float offset)
{
        Onnx__TensorProto *t = tensor(m, name, F32, ndim, dims, NULL, sizeof(float));
        float *p = (float *)t->raw_data.data;
        size_t n = count(ndim, dims);

        fill(p, n, m->seed++, scale);
        for (size_t i = 0; i < n; i++)
                p[i] += offset;
        return name;
}

static const char *scalar(struct bmodel *m, const char *name, float v)
{
        tensor(m, name, F32, 0, NULL, &v, sizeof(v));
        return name;
}

static const char *shape(struct bmodel *m, const char *name, int n, const int64_t *v)
{
        tensor(m, name, I64, 1, (int64_t[]){ n }, v, sizeof(int64_t));
        return name;
}

static Onnx__NodeProto *add(struct bmodel *m, const char *op, const char *out, int nin,
                            const char *const *in)
{
        ONNX_BUILD_ASSERT(m->nnode < 64);
        return m->nodes[m->nnode++] = node(op, nin, in, 1, (const char *const[]){ out });
}

#define OP(m, op, out, ...)                                                                     \
        add(m, op, out, (int)(sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *)), \
            (const char *const[]){ __VA_ARGS__ })

static void begin(struct bmodel *m, const char *name, double target, int ndim,
                  const int64_t *dims, int ydim, const int64_t *ydims)
{
        memset(m, 0, sizeof(*m));
        m->name = name;
        m->target = target;
        m->ndim = ndim;
        m->ydim = ydim;
        memcpy(m->dims, dims, sizeof(int64_t) * (size_t)ndim);
        memcpy(m->ydims, ydims, sizeof(int64_t) * (size_t)ydim);
        m->n = count(ndim, dims);
        m->yn = count(ydim, ydims);
        m->seed = 100;
}

/* Pack the model (opset 17 for LayerNormalization; IR 8) and free the builder's memory. */
static void finish(struct bmodel *m)
{
        Onnx__ModelProto *mp = K(sizeof(*mp));
        Onnx__OperatorSetIdProto *o = K(sizeof(*o));
        Onnx__GraphProto *g = K(sizeof(*g));

        onnx__model_proto__init(mp);
        onnx__operator_set_id_proto__init(o);
        onnx__graph_proto__init(g);
        o->domain = (char *)"";
        o->has_version = 1;
        o->version = 17;
        mp->has_ir_version = 1;
        mp->ir_version = 8;
        mp->producer_name = (char *)"npud bench_models";
        mp->n_opset_import = 1;
        mp->opset_import = (Onnx__OperatorSetIdProto **)list(1, o);
        g->name = (char *)m->name;
        g->n_node = (size_t)m->nnode;
        g->node = m->nodes;
        g->n_initializer = (size_t)m->ninit;
        g->initializer = m->init;
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("X", F32, m->ndim, m->dims));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", F32, m->ydim, m->ydims));
        mp->graph = g;
        m->len = onnx__model_proto__get_packed_size(mp);
        m->bytes = xmalloc(m->len);
        onnx__model_proto__pack(mp, m->bytes);
        keep_free();
}

static void mlp(struct bmodel *m)
{
        enum { B = 32, H = 1024, OUT = 10 };
        const char *h = "X";

        begin(m, "MLP 32x1024 -> 1024 -> 1024 -> 10", 1.0, 2, (int64_t[]){ B, H }, 2,
              (int64_t[]){ B, OUT });
        for (int l = 0; l < 2; l++) {
                float sc = sqrtf(3.0f / H);
                const char *w = weight(m, S("fc%d.weight", l), 2, (int64_t[]){ H, H }, sc, 0);
                const char *b = weight(m, S("fc%d.bias", l), 1, (int64_t[]){ H }, sc, 0);
                Onnx__NodeProto *n = OP(m, "Gemm", S("gemm%d", l), h, w, b);

                attr_i(n, "transB", 1);
                h = S("relu%d", l);
                OP(m, "Relu", h, S("gemm%d", l));
        }
        OP(m, "MatMul", "logits_mm", h,
           weight(m, "fc2.weight", 2, (int64_t[]){ H, OUT }, sqrtf(3.0f / H), 0));
        OP(m, "Add", "Y", "logits_mm", weight(m, "fc2.bias", 1, (int64_t[]){ OUT }, 0.1f, 0));
        finish(m);
}

static void resnet_block(struct bmodel *m)
{
        enum { C = 64, HW = 56 };
        static const int64_t pads[4] = { 1, 1, 1, 1 }, k3[2] = { 3, 3 };
        const char *in = "X";

        begin(m, "ResNet basic block 1x64x56x56", 1.0, 4, (int64_t[]){ 1, C, HW, HW }, 4,
              (int64_t[]){ 1, C, HW, HW });
        for (int l = 1; l <= 2; l++) {
                const char *w = weight(m, S("conv%d.weight", l), 4, (int64_t[]){ C, C, 3, 3 },
                                       sqrtf(3.0f / (C * 9)), 0);
                Onnx__NodeProto *n = OP(m, "Conv", S("conv%d", l), in, w);

                attr_ints(n, "kernel_shape", 2, k3);
                attr_ints(n, "pads", 4, pads);
                n = OP(m, "BatchNormalization", S("bn%d", l), S("conv%d", l),
                       weight(m, S("bn%d.weight", l), 1, (int64_t[]){ C }, 0.2f, 1.0f),
                       weight(m, S("bn%d.bias", l), 1, (int64_t[]){ C }, 0.1f, 0),
                       weight(m, S("bn%d.running_mean", l), 1, (int64_t[]){ C }, 0.1f, 0),
                       weight(m, S("bn%d.running_var", l), 1, (int64_t[]){ C }, 0.25f, 0.75f));
                attr_f(n, "epsilon", 1e-5f);
                if (l == 1) {
                        OP(m, "Relu", "relu1", "bn1");
                        in = "relu1";
                }
        }
        OP(m, "Add", "residual", "bn2", "X");
        OP(m, "Relu", "Y", "residual");
        finish(m);
}

static void encoder_layer(struct bmodel *m)
{
        enum { T = 128, D = 256, NH = 4, DK = D / NH, FF = 1024 };
        static const int64_t split_heads[4] = { 1, T, NH, DK }, merge[3] = { 1, T, D },
                             p0213[4] = { 0, 2, 1, 3 }, p0231[4] = { 0, 2, 3, 1 };
        const float sd = sqrtf(3.0f / D), sf = sqrtf(3.0f / FF);
        Onnx__NodeProto *n;
        Onnx__TensorProto *mask;

        begin(m, "transformer encoder layer seq 128 d 256 4 heads", 1.0, 3,
              (int64_t[]){ 1, T, D }, 3, (int64_t[]){ 1, T, D });
        shape(m, "heads_shape", 4, split_heads);
        shape(m, "merge_shape", 3, merge);
        /* Q, K and V projections, split into heads: [1, NH, T, DK] ([1, NH, DK, T] for K). */
        static const char *const qkv[3] = { "q", "k", "v" };
        for (int i = 0; i < 3; i++) {
                const char *x = qkv[i];

                OP(m, "MatMul", S("%s_mm", x), "X",
                   weight(m, S("attn.%s.weight", x), 2, (int64_t[]){ D, D }, sd, 0));
                OP(m, "Add", S("%s_b", x), S("%s_mm", x),
                   weight(m, S("attn.%s.bias", x), 1, (int64_t[]){ D }, 0.1f, 0));
                OP(m, "Reshape", S("%s_heads", x), S("%s_b", x), "heads_shape");
                n = OP(m, "Transpose", S("%s_t", x), S("%s_heads", x));
                attr_ints(n, "perm", 4, i == 1 ? p0231 : p0213);
        }
        /* softmax(Q K^T / sqrt(d_k) + mask) V, the mask additive and causal */
        OP(m, "MatMul", "scores", "q_t", "k_t");
        OP(m, "Div", "scaled", "scores", scalar(m, "sqrt_dk", sqrtf((float)DK)));
        mask = tensor(m, "causal_mask", F32, 4, (int64_t[]){ 1, 1, T, T }, NULL, sizeof(float));
        for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                        ((float *)mask->raw_data.data)[i * T + j] = j > i ? -10000.0f : 0.0f;
        OP(m, "Add", "masked", "scaled", "causal_mask");
        n = OP(m, "Softmax", "probs", "masked");
        attr_i(n, "axis", -1);
        OP(m, "MatMul", "context", "probs", "v_t");
        n = OP(m, "Transpose", "context_t", "context");
        attr_ints(n, "perm", 4, p0213);
        OP(m, "Reshape", "context_m", "context_t", "merge_shape");
        OP(m, "MatMul", "attn_mm", "context_m",
           weight(m, "attn.out.weight", 2, (int64_t[]){ D, D }, sd, 0));
        OP(m, "Add", "attn_out", "attn_mm", weight(m, "attn.out.bias", 1, (int64_t[]){ D }, 0.1f, 0));
        OP(m, "Add", "res1", "attn_out", "X");
        n = OP(m, "LayerNormalization", "ln1", "res1",
               weight(m, "ln1.weight", 1, (int64_t[]){ D }, 0.1f, 1.0f),
               weight(m, "ln1.bias", 1, (int64_t[]){ D }, 0.1f, 0));
        attr_i(n, "axis", -1);
        attr_f(n, "epsilon", 1e-5f);
        /* feed-forward with GELU(x) = 0.5 x (1 + erf(x / sqrt 2)) */
        OP(m, "MatMul", "ff1_mm", "ln1", weight(m, "ff1.weight", 2, (int64_t[]){ D, FF }, sd, 0));
        OP(m, "Add", "ff1", "ff1_mm", weight(m, "ff1.bias", 1, (int64_t[]){ FF }, 0.1f, 0));
        OP(m, "Div", "gelu_div", "ff1", scalar(m, "sqrt2", 1.4142135f));
        OP(m, "Erf", "gelu_erf", "gelu_div");
        OP(m, "Add", "gelu_add", "gelu_erf", scalar(m, "one", 1.0f));
        OP(m, "Mul", "gelu_mul", "ff1", "gelu_add");
        OP(m, "Mul", "gelu", "gelu_mul", scalar(m, "half", 0.5f));
        OP(m, "MatMul", "ff2_mm", "gelu", weight(m, "ff2.weight", 2, (int64_t[]){ FF, D }, sf, 0));
        OP(m, "Add", "ff2", "ff2_mm", weight(m, "ff2.bias", 1, (int64_t[]){ D }, 0.1f, 0));
        OP(m, "Add", "res2", "ff2", "ln1");
        n = OP(m, "LayerNormalization", "Y", "res2",
               weight(m, "ln2.weight", 1, (int64_t[]){ D }, 0.1f, 1.0f),
               weight(m, "ln2.bias", 1, (int64_t[]){ D }, 0.1f, 0));
        attr_i(n, "axis", -1);
        attr_f(n, "epsilon", 1e-5f);
        finish(m);
}

/* bench_compile's chain: the same operators and constants. */
static void chain(struct bmodel *m)
{
        enum { N = 4 << 20 };

        begin(m, "elementwise chain, 8 ops over 4 M float32", 0.5, 1, (int64_t[]){ N }, 1,
              (int64_t[]){ N });
        OP(m, "Add", "t1", "X", scalar(m, "c1", 0.5f));
        OP(m, "Mul", "t2", "t1", scalar(m, "c2", 1.5f));
        OP(m, "Sub", "t3", "t2", scalar(m, "c3", 0.25f));
        OP(m, "Relu", "t4", "t3");
        OP(m, "Div", "t5", "t4", scalar(m, "c4", 2.0f));
        OP(m, "Sigmoid", "t6", "t5");
        OP(m, "Mul", "t7", "t6", scalar(m, "c5", 3.0f));
        OP(m, "Tanh", "Y", "t7");
        finish(m);
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

/* Run times of one side over all rounds. */
struct samples {
        double *t; /* seconds */
        int n, cap;
};

static void push(struct samples *s, double v)
{
        if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 64;
                s->t = realloc(s->t, sizeof(double) * (size_t)s->cap);
                if (!s->t) {
                        fprintf(stderr, "bench_models: out of memory\n");
                        exit(1);
                }
        }
        s->t[s->n++] = v;
}

/* The q quantile (0.5: median), 0 without samples; sorts the samples. */
static double quant(struct samples *s, double q)
{
        int i = (int)(q * s->n);

        if (!s->n)
                return 0;
        qsort(s->t, (size_t)s->n, sizeof(double), cmp_double);
        return s->t[i < s->n ? i : s->n - 1];
}

/* The model loaded once on npud, with its bound input and output. */
struct npud_side {
        npu_context_t *ctx;
        npu_graph_t g;
        npu_buffer_t bx, by;
        npu_stream_t st;
        npu_tensor_t tx, ty;
        int runs; /* per round */
        long long nodes_before, nodes_after, arena, inter;
        struct samples t;
        float *y;
};

static long long info_int(json_t *o, const char *key)
{
        json_t *v = o ? json_object_get(o, key) : NULL;

        return json_is_integer(v) ? json_integer_value(v) : -1;
}

static void npud_open(const char *sock, const struct bmodel *m, const float *x,
                      struct npud_side *r)
{
        char *info;
        json_t *j, *c;
        double t0 = 0;

        memset(r, 0, sizeof(*r));
        CHECK(npu_connect(sock, &r->ctx));
        CHECK(npu_graph_load(r->ctx, 0, m->bytes, m->len, &r->g));
        CHECK(npu_graph_info(r->ctx, r->g, &info));
        j = json_loads(info, 0, NULL);
        free(info);
        c = j ? json_object_get(j, "compile") : NULL;
        r->nodes_before = info_int(c, "nodes_before");
        r->nodes_after = info_int(c, "nodes_after");
        r->arena = info_int(c, "arena_bytes");
        r->inter = info_int(c, "intermediate_bytes");
        json_decref(j);
        CHECK(npu_malloc(r->ctx, 0, m->n * sizeof(float), &r->bx));
        CHECK(npu_malloc(r->ctx, 0, m->yn * sizeof(float), &r->by));
        CHECK(npu_memcpy_to_device(r->ctx, r->bx, 0, x, m->n * sizeof(float)));
        CHECK(npu_stream_create(r->ctx, 0, 0, &r->st));
        r->tx = (npu_tensor_t){ .buf = r->bx, .dtype = NPU_FLOAT32, .ndim = m->ndim };
        memcpy(r->tx.dims, m->dims, sizeof(int64_t) * (size_t)m->ndim);
        r->ty = (npu_tensor_t){ .buf = r->by, .dtype = NPU_FLOAT32, .ndim = m->ydim };
        memcpy(r->ty.dims, m->ydims, sizeof(int64_t) * (size_t)m->ydim);
        /* three warm-up runs; the last sizes the run count */
        for (int i = 0; i < 3; i++) {
                t0 = now_s();
                CHECK(npu_graph_run(r->ctx, r->st, r->g, &r->tx, 1, &r->ty, 1, NULL));
                CHECK(npu_stream_synchronize(r->ctx, r->st));
        }
        r->runs = (int)(SECONDS_PER_SIDE / ROUNDS / (now_s() - t0));
        r->runs = r->runs < 4 ? 4 : r->runs > 100 ? 100 : r->runs;
}

/* One round: runs runs one after another, each timed from submission to completion. */
static void npud_round(struct npud_side *r)
{
        for (int i = 0; i < r->runs; i++) {
                double t0 = now_s();

                CHECK(npu_graph_run(r->ctx, r->st, r->g, &r->tx, 1, &r->ty, 1, NULL));
                CHECK(npu_stream_synchronize(r->ctx, r->st));
                push(&r->t, now_s() - t0);
        }
}

static void npud_close(const struct bmodel *m, struct npud_side *r)
{
        r->y = xmalloc(m->yn * sizeof(float));
        CHECK(npu_memcpy_from_device(r->ctx, r->y, r->by, 0, m->yn * sizeof(float)));
        CHECK(npu_graph_unload(r->ctx, r->g));
        CHECK(npu_free(r->ctx, r->bx));
        CHECK(npu_free(r->ctx, r->by));
        npu_disconnect(r->ctx);
}

/* ---- ONNX Runtime through node ---- */

struct ort {
        char script[4096];
        char dir[64]; /* temporary directory for the model, input and output files */
        const char *skip; /* why the column is skipped; NULL when it runs */
        char why[10000];
};

static int safe_path(const char *p)
{
        return p && !strchr(p, '\'');
}

static void ort_probe(struct ort *o)
{
        const char *mods = getenv("ORT_NODE_MODULES"), *script = getenv("NPUD_BENCH_ORT_SCRIPT");
        char path[4096];
        struct stat sb;

        o->skip = NULL;
        /* the script beside this source file, the bench running from the repository root */
        if (script)
                snprintf(o->script, sizeof(o->script), "%s", script);
        else {
                const char *slash = strrchr(__FILE__, '/');
                snprintf(o->script, sizeof(o->script), "%.*sort-time.js",
                         slash ? (int)(slash - __FILE__ + 1) : 0, __FILE__);
        }
        if (!mods || !*mods) {
                o->skip = "ORT_NODE_MODULES is not set; to get it: mkdir -p DIR && cd DIR && "
                          "npm install --ignore-scripts onnxruntime-node, then "
                          "ORT_NODE_MODULES=DIR/node_modules (docs/benchmarks.md)";
                return;
        }
        snprintf(path, sizeof(path), "%s/onnxruntime-node/package.json", mods);
        if (stat(path, &sb) < 0) {
                snprintf(o->why, sizeof(o->why), "no onnxruntime-node in ORT_NODE_MODULES=%s "
                         "(%s: %s)", mods, path, strerror(errno));
                o->skip = o->why;
                return;
        }
        if (stat(o->script, &sb) < 0 || !safe_path(o->script)) {
                snprintf(o->why, sizeof(o->why), "cannot use %s (run from the repository root or "
                         "set NPUD_BENCH_ORT_SCRIPT)", o->script);
                o->skip = o->why;
                return;
        }
        if (system("node --version >/dev/null 2>&1") != 0) {
                o->skip = "node is not on PATH";
                return;
        }
        snprintf(o->dir, sizeof(o->dir), "/tmp/bench_models.XXXXXX");
        if (!mkdtemp(o->dir)) {
                snprintf(o->why, sizeof(o->why), "mkdtemp: %s", strerror(errno));
                o->skip = o->why;
        }
}

static int write_file(const char *path, const void *p, size_t n)
{
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(p, 1, n, f) == n;

        if (f && fclose(f) != 0)
                ok = 0;
        return ok ? 0 : -1;
}

static int read_file(const char *path, void *p, size_t n)
{
        FILE *f = fopen(path, "rb");
        int ok = f && fread(p, 1, n, f) == n;

        if (f)
                fclose(f);
        return ok ? 0 : -1;
}

/* One round through ONNX Runtime on threads threads: appends the run times to t and, when
 * y, reads the output. 0, or -1 when node failed (its stderr passes through). */
static int ort_round(struct ort *o, const struct bmodel *m, int threads, int runs,
                     struct samples *t, float *y, char *version, size_t vlen)
{
        char cmd[16384], dims[128] = "", ver[64], *line = NULL, *p, *end;
        size_t off = 0, cap = 0;
        double med, p90;
        FILE *f;
        int ok = 0, th, nr, got = 0;

        for (int i = 0; i < m->ndim; i++)
                off += (size_t)snprintf(dims + off, sizeof(dims) - off, "%s%lld", i ? "," : "",
                                        (long long)m->dims[i]);
        snprintf(cmd, sizeof(cmd), "node '%s' %s/model.onnx %d %d X %s/x.bin %s Y %s/y.bin",
                 o->script, o->dir, threads, runs, o->dir, dims, o->dir);
        f = popen(cmd, "r");
        if (!f)
                return -1;
        while (getline(&line, &cap, f) > 0) {
                if (sscanf(line, "ort %63s threads %d runs %d median_ms %lf p90_ms %lf", ver, &th,
                           &nr, &med, &p90) == 5)
                        ok = 1;
                if (strncmp(line, "times ", 6) == 0)
                        for (p = line + 6;; p = end) {
                                double v = strtod(p, &end);
                                if (end == p)
                                        break;
                                push(t, v * 1e-3);
                                got++;
                        }
        }
        free(line);
        if (pclose(f) != 0 || !ok || got != runs)
                return -1;
        snprintf(version, vlen, "%s", ver);
        if (y) {
                char path[128];

                snprintf(path, sizeof(path), "%s/y.bin", o->dir);
                if (read_file(path, y, m->yn * sizeof(float)) < 0)
                        return -1;
        }
        return 0;
}

/* ---- comparison ---- */

struct diff {
        double max_abs;        /* largest |npud - ORT| */
        size_t bad;            /* elements outside atol + rtol |ORT| */
        double bad_got, bad_want; /* the one furthest outside */
        double gross;          /* largest |npud - ORT| / (1 + |ORT|) */
};

static void compare(const float *a, const float *e, size_t n, struct diff *d)
{
        double worst = -1;

        memset(d, 0, sizeof(*d));
        for (size_t i = 0; i < n; i++) {
                double x = fabs((double)a[i] - (double)e[i]), lim = ATOL + RTOL * fabs((double)e[i]);

                if (x > d->max_abs || isnan(x))
                        d->max_abs = x;
                if (x / (1 + fabs((double)e[i])) > d->gross || isnan(x))
                        d->gross = isnan(x) ? INFINITY : x / (1 + fabs((double)e[i]));
                if (!(x <= lim)) {
                        d->bad++;
                        if (!(x - lim <= worst)) {
                                worst = x - lim;
                                d->bad_got = a[i];
                                d->bad_want = e[i];
                        }
                }
        }
}

int main(void)
{
        struct bmodel models[4];
        struct npud_proc npud = { 0 };
        struct ort o;
        char workers[16], path[128];
        const char *env = getenv("NPUD_BENCH_THREADS");
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int threads = env ? atoi(env) : cpus > 0 ? (int)cpus : 2, rc = 0;

        if (threads < 1 || threads > 256) {
                fprintf(stderr, "bench_models: NPUD_BENCH_THREADS must be 1..256\n");
                return 2;
        }
        mlp(&models[0]);
        resnet_block(&models[1]);
        encoder_layer(&models[2]);
        chain(&models[3]);
        snprintf(workers, sizeof(workers), "%d", threads);
        const char *extra[] = { "--sim-devices", "1", "--workers", workers, NULL };
        if (harness_start(&npud, extra) < 0) {
                fprintf(stderr, "bench_models: cannot start npud\n");
                return 1;
        }
        ort_probe(&o);
        printf("threads: %d (npud --workers %d, ONNX Runtime intraOpNumThreads %d; "
               "NPUD_BENCH_THREADS overrides)\n", threads, threads, threads);
        if (o.skip)
                printf("ONNX Runtime column skipped: %s\n", o.skip);
        for (int k = 0; k < 4; k++) {
                struct bmodel *m = &models[k];
                struct npud_side r;
                struct samples ot = { 0 }, o1t = { 0 };
                float *x = xmalloc(m->n * sizeof(float)), *ey = NULL;
                double om, op90, o1m;
                char version[64] = "";
                int have_ort = !o.skip, have_ort1 = !o.skip && threads > 1;

                fill(x, m->n, 1 + (unsigned)k, 1.0f);
                npud_open(npud.sock, m, x, &r);
                if (have_ort) {
                        snprintf(path, sizeof(path), "%s/model.onnx", o.dir);
                        int wr = write_file(path, m->bytes, m->len);
                        snprintf(path, sizeof(path), "%s/x.bin", o.dir);
                        if (wr < 0 || write_file(path, x, m->n * sizeof(float)) < 0) {
                                fprintf(stderr, "bench_models: cannot write %s\n", path);
                                have_ort = have_ort1 = 0;
                        }
                        ey = xmalloc(m->yn * sizeof(float));
                }
                /* the sides take turns, so that a busy host slows all alike */
                for (int round = 0; round < ROUNDS; round++) {
                        npud_round(&r);
                        if (have_ort)
                                have_ort = ort_round(&o, m, threads, r.runs, &ot, ey, version,
                                                     sizeof(version)) == 0;
                        if (have_ort1)
                                have_ort1 = ort_round(&o, m, 1, r.runs, &o1t, NULL, version,
                                                      sizeof(version)) == 0;
                }
                npud_close(m, &r);
                om = quant(&ot, 0.5) * 1e3;
                op90 = quant(&ot, 0.9) * 1e3;
                o1m = quant(&o1t, 0.5) * 1e3;
                double nm = quant(&r.t, 0.5) * 1e3, np90 = quant(&r.t, 0.9) * 1e3;
                printf("%s:\n  npud       median %8.3f ms  p90 %8.3f ms  (%d runs, %lld -> %lld nodes)\n",
                       m->name, nm, np90, r.t.n, r.nodes_before, r.nodes_after);
                if (have_ort) {
                        struct diff d;

                        compare(r.y, ey, m->yn, &d);
                        printf("  ORT %-6s median %8.3f ms  p90 %8.3f ms  (%d threads)",
                               version, om, op90, threads);
                        if (have_ort1)
                                printf("; 1 thread median %.3f ms", o1m);
                        printf("\n  ratio npud/ORT %.2f (target <= %.1f)%s; max abs diff %.2e\n",
                               nm / om, m->target,
                               nm / om <= m->target ? "" : " MISSED", d.max_abs);
                        if (!d.bad)
                                printf("  outputs agree within the ONNX suite tolerance (rtol %g, atol %g)\n",
                                       RTOL, ATOL);
                        else
                                printf("  %zu of %zu elements outside the ONNX suite tolerance (rtol %g, "
                                       "atol %g); furthest: npud %.9g, ORT %.9g\n",
                                       d.bad, m->yn, RTOL, ATOL, d.bad_got, d.bad_want);
                        /* Summation order differs between any two GEMM or convolution
                         * implementations; a few near-zero outputs can miss atol 1e-7 by float32
                         * rounding. A difference of 1e-4 relative to 1 + |ORT| is a wrong result. */
                        if (d.gross > 1e-4) {
                                printf("  WRONG RESULT: largest |npud - ORT| / (1 + |ORT|) is %.2e\n",
                                       d.gross);
                                rc = 1;
                        }
                } else if (!o.skip) {
                        printf("  ORT: the node run failed (see its message above)\n");
                        rc = 1;
                }
                if (r.inter > 0)
                        printf("  memory plan: arena %lld bytes for %lld bytes of intermediates, "
                               "ratio %.2f (target <= 0.5)\n", r.arena, r.inter,
                               (double)r.arena / (double)r.inter);
                else
                        printf("  memory plan: none reported (no intermediate left to plan, or "
                               "passes off)\n");
                free(x);
                free(ey);
                free(r.y);
                free(r.t.t);
                free(ot.t);
                free(o1t.t);
                free(m->bytes);
        }
        if (!o.skip) {
                const char *files[] = { "model.onnx", "x.bin", "y.bin" };
                for (int i = 0; i < 3; i++) {
                        snprintf(path, sizeof(path), "%s/%s", o.dir, files[i]);
                        unlink(path);
                }
                rmdir(o.dir);
        }
        if (harness_stop(&npud) != 0) {
                fprintf(stderr, "bench_models: npud did not exit cleanly\n");
                rc = 1;
        }
        return rc;
}

/* The models of bench_models (issue 11, "Figures"), built with tests/onnx-build.h, for the
 * benches that run them: bench_models times them against ONNX Runtime, npubench's isolation
 * section runs the ResNet block and the elementwise chain as best-effort load. Each builder
 * fills a struct bmodel with the packed ModelProto (one float32 input X, one float32 output
 * Y; free m->bytes). Header-only, static functions; a program includes it once. A program
 * may define ONNX_BUILD_ASSERT(cond) before including it; the default prints the condition
 * and aborts. */
#ifndef NPUD_TESTS_BENCH_MODELS_H
#define NPUD_TESTS_BENCH_MODELS_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ONNX_BUILD_ASSERT
#define ONNX_BUILD_ASSERT(cond)                                                                \
        do {                                                                                   \
                if (!(cond)) {                                                                 \
                        fprintf(stderr, "bench: %s:%d: %s failed\n", __FILE__, __LINE__,       \
                                #cond);                                                        \
                        abort();                                                               \
                }                                                                              \
        } while (0)
#endif
#include "tests/onnx-build.h"

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* A program uses some of the builders, not all of them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

static void *xmalloc(size_t n)
{
        void *p = calloc(1, n ? n : 1);

        if (!p) {
                fprintf(stderr, "bench: out of memory\n");
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

/* The fixed cost of a run: one Relu over the MLP's input. No target: it shows how much of
 * each model's time is the request's round trip (npud) or the binding's call (ORT). */
static void round_trip(struct bmodel *m)
{
        begin(m, "fixed cost: one Relu over 32x1024 (reference, no target)", 0.0, 2,
              (int64_t[]){ 32, 1024 }, 2, (int64_t[]){ 32, 1024 });
        OP(m, "Relu", "Y", "X");
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

#pragma GCC diagnostic pop

#endif

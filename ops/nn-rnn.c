/* Recurrent layers for the cube engine: RNN, GRU and LSTM with forward, reverse and
 * bidirectional directions, configurable activations (with their alpha / beta), clip,
 * sequence_lens, initial states, LSTM peepholes and input_forget, GRU linear_before_reset,
 * and both layouts (opset 14).
 *
 * For each direction the input projection of every time step is a single GEMM, X [S * B, I]
 * by W^T [I, G * H], with both biases added once where they are not gated (GRU's
 * recurrent candidate bias is). Each step then costs one GEMM of the hidden state [B, H] by
 * R^T, plus elementwise gate arithmetic. sequence_lens: a batch entry stops at its length
 * (later Y rows stay zero, its state is kept for Y_h); in reverse it starts from its own
 * last valid step. Work is in float32 (other floating dtypes converted). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cblas.h>

#include "blas.h"
#include "nn-common.h"

enum rnn_kind { RNN_SIMPLE, RNN_GRU, RNN_LSTM };

enum act_fn {
        ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU,
        ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS,
};

struct act {
        enum act_fn fn;
        float alpha, beta;
};

#define RNN_MAX_ACTS 6

struct rnn {
        enum rnn_kind kind;
        const struct ops_def *def;
        int64_t s, b, in, h, dirs, gates;
        int reverse, layout, lbr, input_forget;
        float clip;               /* 0 = none */
        struct act act[RNN_MAX_ACTS];
};

static const struct {
        const char *name;
        enum act_fn fn;
        float alpha, beta; /* defaults */
} act_names[] = {
        { "Relu", ACT_RELU, 0, 0 },
        { "Tanh", ACT_TANH, 0, 0 },
        { "Sigmoid", ACT_SIGMOID, 0, 0 },
        { "Affine", ACT_AFFINE, 1.0f, 0 },
        { "LeakyRelu", ACT_LEAKY_RELU, 0.01f, 0 },
        { "ThresholdedRelu", ACT_THRESHOLDED_RELU, 1.0f, 0 },
        { "ScaledTanh", ACT_SCALED_TANH, 1.0f, 1.0f },
        { "HardSigmoid", ACT_HARD_SIGMOID, 0.2f, 0.5f },
        { "Elu", ACT_ELU, 1.0f, 0 },
        { "Softsign", ACT_SOFTSIGN, 0, 0 },
        { "Softplus", ACT_SOFTPLUS, 0, 0 },
};

static float act_apply(const struct act *a, float x)
{
        switch (a->fn) {
        case ACT_RELU:
                return x > 0 ? x : 0;
        case ACT_TANH:
                return tanhf(x);
        case ACT_SIGMOID:
                return 1.0f / (1.0f + expf(-x));
        case ACT_AFFINE:
                return a->alpha * x + a->beta;
        case ACT_LEAKY_RELU:
                return x >= 0 ? x : a->alpha * x;
        case ACT_THRESHOLDED_RELU:
                return x > a->alpha ? x : 0;
        case ACT_SCALED_TANH:
                return a->alpha * tanhf(a->beta * x);
        case ACT_HARD_SIGMOID: {
                float v = a->alpha * x + a->beta;

                return v < 0 ? 0 : v > 1 ? 1 : v;
        }
        case ACT_ELU:
                return x >= 0 ? x : a->alpha * (expf(x) - 1);
        case ACT_SOFTSIGN:
                return x / (1 + fabsf(x));
        case ACT_SOFTPLUS:
                return log1pf(expf(x));
        }
        return x;
}

static int rnn_setup(const struct ops_def *def, enum rnn_kind kind, const struct ops_call *call,
                     struct rnn *r, char *err, size_t errlen)
{
        static const enum act_fn defaults[3][3] = {
                { ACT_TANH }, { ACT_SIGMOID, ACT_TANH }, { ACT_SIGMOID, ACT_TANH, ACT_TANH },
        };
        const struct ops_tensor *x = &call->in[0], *w = &call->in[1], *rr = &call->in[2];
        const char *dir = nn_attr_str(call, "direction", "forward");
        const struct ops_attr *acts = ops_attr_find(call, "activations");
        float alpha[RNN_MAX_ACTS], beta[RNN_MAX_ACTS];
        int nalpha, nbeta, per = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 2 : 3, i, j;

        memset(r, 0, sizeof(*r));
        r->kind = kind;
        r->def = def;
        r->gates = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 3 : 4;
        r->layout = (int)ops_attr_int(call, "layout", 0);
        r->lbr = ops_attr_int(call, "linear_before_reset", 0) != 0;
        r->input_forget = ops_attr_int(call, "input_forget", 0) != 0;
        r->clip = (float)ops_attr_float(call, "clip", 0);
        if (r->clip < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: clip must be positive", def->name);
        if (strcmp(dir, "forward") == 0) {
                r->dirs = 1;
        } else if (strcmp(dir, "reverse") == 0) {
                r->dirs = 1;
                r->reverse = 1;
        } else if (strcmp(dir, "bidirectional") == 0) {
                r->dirs = 2;
        } else {
                return ops_fail(err, errlen, -EINVAL, "%s: direction '%s' unknown", def->name, dir);
        }
        if (x->ndim != 3 || w->ndim != 3 || rr->ndim != 3)
                return ops_fail(err, errlen, -EINVAL, "%s: X, W and R must be 3-D", def->name);
        if (r->layout != 0 && r->layout != 1)
                return ops_fail(err, errlen, -EINVAL, "%s: layout %d", def->name, r->layout);
        r->s = x->dims[r->layout ? 1 : 0];
        r->b = x->dims[r->layout ? 0 : 1];
        r->in = x->dims[2];
        r->h = ops_attr_int(call, "hidden_size", rr->dims[2]);
        if (r->h < 1 || r->h > INT32_MAX / 8 || r->in > INT32_MAX || r->s * r->b > INT32_MAX)
                return ops_fail(err, errlen, -EINVAL, "%s: invalid sizes", def->name);
        if (w->dims[0] != r->dirs || w->dims[1] != r->gates * r->h || w->dims[2] != r->in ||
            rr->dims[0] != r->dirs || rr->dims[1] != r->gates * r->h || rr->dims[2] != r->h)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: W or R does not fit %lld directions of hidden size %lld",
                                def->name, (long long)r->dirs, (long long)r->h);
        if (nn_has_in(call, 3) && (ops_tensor_numel(&call->in[3]) != r->dirs * 2 * r->gates * r->h ||
                                   call->in[3].ndim != 2))
                return ops_fail(err, errlen, -EINVAL, "%s: B must be [%lld,%lld]", def->name,
                                (long long)r->dirs, (long long)(2 * r->gates * r->h));
        if (nn_has_in(call, 4) && (call->in[4].ndim != 1 || call->in[4].dims[0] != r->b ||
                                   (call->in[4].dtype != PROTO_DTYPE_INT32 &&
                                    call->in[4].dtype != PROTO_DTYPE_INT64)))
                return ops_fail(err, errlen, -EINVAL, "%s: sequence_lens must be int32 [%lld]",
                                def->name, (long long)r->b);
        for (i = 5; i < 7 && i < call->nin; i++) {
                if (!nn_has_in(call, i) || (i == 6 && kind != RNN_LSTM))
                        continue;
                if (call->in[i].ndim != 3 ||
                    ops_tensor_numel(&call->in[i]) != r->dirs * r->b * r->h)
                        return ops_fail(err, errlen, -EINVAL, "%s: initial state of wrong shape",
                                        def->name);
        }
        if (nn_has_in(call, 7) && ops_tensor_numel(&call->in[7]) != r->dirs * 3 * r->h)
                return ops_fail(err, errlen, -EINVAL, "%s: P must be [%lld,%lld]", def->name,
                                (long long)r->dirs, (long long)(3 * r->h));
        for (i = 1; i < call->nin; i++)
                if (i != 4 && nn_has_in(call, i) && call->in[i].dtype != x->dtype)
                        return ops_fail(err, errlen, -EINVAL, "%s: input %d dtype differs from X",
                                        def->name, i);
        /* activations: per direction, defaults by kind; alpha / beta consumed in list order */
        nalpha = nn_attr_floats(call, "activation_alpha", alpha, RNN_MAX_ACTS);
        nbeta = nn_attr_floats(call, "activation_beta", beta, RNN_MAX_ACTS);
        if (nalpha == -2 || nbeta == -2)
                return ops_fail(err, errlen, -EINVAL, "%s: too many activation parameters",
                                def->name);
        if (acts && (acts->type != OPS_ATTR_STRINGS || !acts->strings ||
                     (acts->n != per * r->dirs && acts->n != per)))
                return ops_fail(err, errlen, -EINVAL, "%s: 'activations' needs %lld names",
                                def->name, (long long)(per * r->dirs));
        for (i = 0; i < per * r->dirs; i++) {
                const char *name = NULL;

                r->act[i].fn = defaults[kind][i % per];
                if (acts)
                        name = acts->strings[i % acts->n];
                if (!name) {
                        r->act[i].alpha = r->act[i].beta = 0;
                        continue;
                }
                for (j = 0; j < (int)(sizeof(act_names) / sizeof(act_names[0])); j++)
                        if (strcasecmp(act_names[j].name, name) == 0)
                                break;
                if (j == (int)(sizeof(act_names) / sizeof(act_names[0])))
                        return ops_fail(err, errlen, -EINVAL, "%s: activation '%s' unknown",
                                        def->name, name);
                r->act[i].fn = act_names[j].fn;
                r->act[i].alpha = i < nalpha ? alpha[i] : act_names[j].alpha;
                r->act[i].beta = i < nbeta ? beta[i] : act_names[j].beta;
        }
        return 0;
}

static int rnn_infer(const struct ops_def *def, enum rnn_kind kind, struct ops_call *call,
                     char *err, size_t errlen)
{
        struct rnn r;
        int64_t y[4], st[3];
        int rc, i;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (!rc)
                rc = rnn_setup(def, kind, call, &r, err, errlen);
        if (rc)
                return rc;
        if (r.layout) {
                y[0] = r.b, y[1] = r.s, y[2] = r.dirs, y[3] = r.h;
                st[0] = r.b, st[1] = r.dirs, st[2] = r.h;
        } else {
                y[0] = r.s, y[1] = r.dirs, y[2] = r.b, y[3] = r.h;
                st[0] = r.dirs, st[1] = r.b, st[2] = r.h;
        }
        nn_set_out(call, 0, call->in[0].dtype, 4, y);
        for (i = 1; i < call->nout; i++)
                nn_set_out(call, i, call->in[0].dtype, 3, st);
        return 0;
}

static float clipf(const struct rnn *r, float v)
{
        if (r->clip > 0)
                return v < -r->clip ? -r->clip : v > r->clip ? r->clip : v;
        return v;
}

/* Scratch and views of one run. */
struct rnn_bufs {
        struct nn_f32 x, w, r, b, h0, c0, p, y, yh, yc;
        float *xs, *xw, *hr, *h, *c, *rh;
        int64_t *len;
};

/* One direction. gates of step rows: [B, G * H]; the state h, c: [B, H]. Checks the run
 * context once per step: 0, or the stop code (cancelled, past the deadline). */
static int rnn_direction(const struct rnn *r, struct rnn_bufs *bf, int d, int reverse,
                         char *err, size_t errlen)
{
        const int64_t S = r->s, B = r->b, H = r->h, G = r->gates, GH = G * H;
        const float *W = bf->w.p + d * GH * r->in, *R = bf->r.p + d * GH * H;
        const float *bias = bf->b.p ? bf->b.p + d * 2 * GH : NULL;
        const float *P = bf->p.p ? bf->p.p + d * 3 * H : NULL;
        const struct act *f = &r->act[d * (r->kind == RNN_SIMPLE ? 1 : r->kind == RNN_GRU ? 2 : 3)];
        int64_t step, b, j, t;

        /* input projection of every step, plus the biases that are not gated */
        if (S * B > 0 && r->in > 0)
                ops_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)(S * B), (blasint)GH,
                          (blasint)r->in, 1.0f, bf->xs, (blasint)r->in, W, (blasint)r->in, 0.0f,
                          bf->xw, (blasint)GH);
        else
                memset(bf->xw, 0, (size_t)(S * B * GH) * sizeof(float));
        if (bias)
                for (t = 0; t < S * B; t++)
                        for (j = 0; j < GH; j++) {
                                int rec_gated = r->kind == RNN_GRU && j >= 2 * H;

                                bf->xw[t * GH + j] += bias[j] + (rec_gated ? 0 : bias[GH + j]);
                        }
        /* rows of finished batch entries still go through the GEMMs: keep them defined */
        memset(bf->rh, 0, (size_t)(B * H) * sizeof(float));
        /* initial state */
        for (b = 0; b < B * H; b++) {
                bf->h[b] = bf->h0.p ? bf->h0.p[d * B * H + b] : 0;
                if (bf->c)
                        bf->c[b] = bf->c0.p ? bf->c0.p[d * B * H + b] : 0;
        }
        for (step = 0; step < S; step++) {
                int rc = ops_runctx_check(err, errlen);

                if (rc)
                        return rc;
                ops_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)B, (blasint)GH,
                          (blasint)H, 1.0f, bf->h, (blasint)H, R, (blasint)H, 0.0f, bf->hr,
                          (blasint)GH);
                if (r->kind == RNN_GRU && !r->lbr) {
                        /* the candidate sees (r (.) H) R_h^T: r first, then its own GEMM */
                        for (b = 0; b < B; b++) {
                                int64_t len = bf->len[b];

                                t = reverse ? len - 1 - step : step;
                                if (step >= len)
                                        continue;
                                for (j = 0; j < H; j++) {
                                        float xr = bf->xw[(t * B + b) * GH + H + j] +
                                                   bf->hr[b * GH + H + j];

                                        bf->rh[b * H + j] = act_apply(&f[0], clipf(r, xr)) *
                                                            bf->h[b * H + j];
                                }
                        }
                        ops_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)B,
                                  (blasint)H, (blasint)H, 1.0f, bf->rh, (blasint)H,
                                  R + 2 * H * H, (blasint)H, 0.0f, bf->hr + 2 * H, (blasint)GH);
                }
                for (b = 0; b < B; b++) {
                        int64_t len = bf->len[b];
                        const float *xg, *hg;
                        float *hb = bf->h + b * H, *cb = bf->c ? bf->c + b * H : NULL, *yrow;

                        if (step >= len)
                                continue;
                        t = reverse ? len - 1 - step : step;
                        xg = bf->xw + (t * B + b) * GH;
                        hg = bf->hr + b * GH;
                        for (j = 0; j < H; j++) {
                                if (r->kind == RNN_SIMPLE) {
                                        hb[j] = act_apply(&f[0], clipf(r, xg[j] + hg[j]));
                                } else if (r->kind == RNN_GRU) {
                                        float z = act_apply(&f[0], clipf(r, xg[j] + hg[j]));
                                        float hh;

                                        if (r->lbr) {
                                                float rr = act_apply(&f[0], clipf(r, xg[H + j] +
                                                                                       hg[H + j]));
                                                float rb = bias ? bias[GH + 2 * H + j] : 0;

                                                hh = xg[2 * H + j] + rr * (hg[2 * H + j] + rb);
                                        } else {
                                                float rb = bias ? bias[GH + 2 * H + j] : 0;

                                                hh = xg[2 * H + j] + hg[2 * H + j] + rb;
                                        }
                                        hh = act_apply(&f[1], clipf(r, hh));
                                        hb[j] = (1 - z) * hh + z * hb[j];
                                } else {
                                        /* gates i, o, f, c; peepholes i, o, f */
                                        float cprev = cb[j], gi, go, gf, gc;

                                        gi = xg[j] + hg[j] + (P ? P[j] * cprev : 0);
                                        gf = xg[2 * H + j] + hg[2 * H + j] +
                                             (P ? P[2 * H + j] * cprev : 0);
                                        gi = act_apply(&f[0], clipf(r, gi));
                                        gf = r->input_forget ? 1 - gi
                                                             : act_apply(&f[0], clipf(r, gf));
                                        gc = act_apply(&f[1], clipf(r, xg[3 * H + j] + hg[3 * H + j]));
                                        cb[j] = gf * cprev + gi * gc;
                                        go = xg[H + j] + hg[H + j] + (P ? P[H + j] * cb[j] : 0);
                                        go = act_apply(&f[0], clipf(r, go));
                                        hb[j] = go * act_apply(&f[2], cb[j]);
                                }
                        }
                        if (bf->y.p) {
                                yrow = r->layout ? bf->y.p + ((b * S + t) * r->dirs + d) * H
                                                 : bf->y.p + ((t * r->dirs + d) * B + b) * H;
                                memcpy(yrow, hb, (size_t)H * sizeof(float));
                        }
                }
        }
        /* final states */
        for (b = 0; b < B; b++) {
                int64_t off = r->layout ? (b * r->dirs + d) * H : (d * B + b) * H;

                if (bf->yh.p)
                        memcpy(bf->yh.p + off, bf->h + b * H, (size_t)H * sizeof(float));
                if (bf->yc.p)
                        memcpy(bf->yc.p + off, bf->c + b * H, (size_t)H * sizeof(float));
        }
        return 0;
}

static void rnn_free(struct rnn_bufs *bf)
{
        struct nn_f32 *v[] = { &bf->x, &bf->w, &bf->r, &bf->b, &bf->h0, &bf->c0, &bf->p,
                               &bf->y, &bf->yh, &bf->yc };
        size_t i;

        for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
                nn_f32_done(v[i]);
        ops_buf_free(bf->xs);
        ops_buf_free(bf->xw);
        ops_buf_free(bf->hr);
        ops_buf_free(bf->h);
        ops_buf_free(bf->c);
        ops_buf_free(bf->rh);
        ops_buf_free(bf->len);
}

/* Initial states in layout 1 are [B, D, H]; the kernel wants [D, B, H]. */
static int rnn_state_in(const struct rnn *r, const struct ops_tensor *t, struct nn_f32 *v)
{
        float *tmp;
        int64_t d, b;

        if (nn_f32_in(t, v))
                return -ENOMEM;
        if (!r->layout)
                return 0;
        tmp = ops_buf_alloc(ops_bytes((uint64_t)(r->dirs * r->b * r->h), sizeof(float)), NULL, 0);
        if (!tmp)
                return -ENOMEM;
        for (b = 0; b < r->b; b++)
                for (d = 0; d < r->dirs; d++)
                        memcpy(tmp + (d * r->b + b) * r->h, v->p + (b * r->dirs + d) * r->h,
                               (size_t)r->h * sizeof(float));
        nn_f32_done(v);
        v->p = v->owned = tmp;
        return 0;
}

static int rnn_run(const struct ops_def *def, enum rnn_kind kind, const struct ops_call *call,
                   char *err, size_t errlen)
{
        struct rnn r;
        struct rnn_bufs bf;
        int64_t S, B, H, GH, i, t;
        int rc, d;
        char msg[200] = "";

        rc = rnn_setup(def, kind, call, &r, err, errlen);
        if (rc)
                return rc;
        S = r.s, B = r.b, H = r.h, GH = r.gates * H;
        memset(&bf, 0, sizeof(bf));
        rc = nn_f32_in(&call->in[0], &bf.x);
        rc |= nn_f32_in(&call->in[1], &bf.w);
        rc |= nn_f32_in(&call->in[2], &bf.r);
        if (nn_has_in(call, 3))
                rc |= nn_f32_in(&call->in[3], &bf.b);
        if (nn_has_in(call, 5))
                rc |= rnn_state_in(&r, &call->in[5], &bf.h0);
        if (kind == RNN_LSTM && nn_has_in(call, 6))
                rc |= rnn_state_in(&r, &call->in[6], &bf.c0);
        if (kind == RNN_LSTM && nn_has_in(call, 7))
                rc |= nn_f32_in(&call->in[7], &bf.p);
        if (nn_want_out(call, 0))
                rc |= nn_f32_out(&call->out[0], &bf.y);
        if (nn_want_out(call, 1))
                rc |= nn_f32_out(&call->out[1], &bf.yh);
        if (kind == RNN_LSTM && nn_want_out(call, 2))
                rc |= nn_f32_out(&call->out[2], &bf.yc);
        /* Workspaces scale with the model's sizes: charged to the run's budget, sizes
         * saturating so that an overflow is an allocation that fails. */
        if (!rc)
                bf.xs = ops_buf_alloc(ops_bytes(ops_bytes(ops_bytes((uint64_t)S, (uint64_t)B),
                                                          (uint64_t)r.in), sizeof(float)),
                                      msg, sizeof(msg));
        if (bf.xs)
                bf.xw = ops_buf_alloc(ops_bytes(ops_bytes(ops_bytes((uint64_t)S, (uint64_t)B),
                                                          (uint64_t)GH), sizeof(float)),
                                      msg, sizeof(msg));
        if (bf.xw)
                bf.hr = ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)B, (uint64_t)GH), sizeof(float)),
                                      msg, sizeof(msg));
        if (bf.hr)
                bf.h = ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)B, (uint64_t)H), sizeof(float)),
                                     msg, sizeof(msg));
        if (bf.h)
                bf.rh = ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)B, (uint64_t)H), sizeof(float)),
                                      msg, sizeof(msg));
        if (bf.rh)
                bf.len = ops_buf_alloc(ops_bytes((uint64_t)B, sizeof(int64_t)), msg, sizeof(msg));
        if (bf.len && kind == RNN_LSTM)
                bf.c = ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)B, (uint64_t)H), sizeof(float)),
                                     msg, sizeof(msg));
        if (rc || !bf.xs || !bf.xw || !bf.hr || !bf.h || !bf.rh || !bf.len ||
            (kind == RNN_LSTM && !bf.c)) {
                rnn_free(&bf);
                return ops_fail(err, errlen, -ENOMEM, "%s: %s", def->name,
                                msg[0] ? msg : "out of memory");
        }
        for (i = 0; i < B; i++) {
                int64_t len = nn_has_in(call, 4) ? nn_get_int(&call->in[4], i) : S;

                /* the message is made before the buffers go */
                if (len < 0 || len > S) {
                        rnn_free(&bf);
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: input 'sequence_lens' [%lld] is %lld, outside 0..%lld (the sequence length)",
                                        def->name, (long long)i, (long long)len, (long long)S);
                }
                bf.len[i] = len;
        }
        /* X as [S, B, I] rows */
        if (r.layout) {
                for (i = 0; i < B; i++)
                        for (t = 0; t < S; t++)
                                memcpy(bf.xs + (t * B + i) * r.in, bf.x.p + (i * S + t) * r.in,
                                       (size_t)r.in * sizeof(float));
        } else {
                memcpy(bf.xs, bf.x.p, (size_t)(S * B * r.in) * sizeof(float));
        }
        if (bf.y.p)
                memset(bf.y.p, 0, (size_t)(S * r.dirs * B * H) * sizeof(float));
        for (d = 0; d < r.dirs; d++) {
                rc = rnn_direction(&r, &bf, d, r.dirs == 2 ? d == 1 : r.reverse, msg, sizeof(msg));
                if (rc) {
                        rnn_free(&bf);
                        return ops_fail(err, errlen, -ECANCELED, "%s: %s", def->name, msg);
                }
        }
        if (bf.y.p)
                nn_f32_commit(&call->out[0], &bf.y);
        if (bf.yh.p)
                nn_f32_commit(&call->out[1], &bf.yh);
        if (bf.yc.p)
                nn_f32_commit(&call->out[2], &bf.yc);
        rnn_free(&bf);
        return 0;
}

static void rnn_cost(const struct ops_def *def, enum rnn_kind kind, const struct ops_call *call,
                     uint64_t *ret_flops, uint64_t *ret_bytes)
{
        struct rnn r;

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        if (!rnn_setup(def, kind, call, &r, NULL, 0))
                *ret_flops = ops_mul_sat(ops_mul_sat(2 * (uint64_t)(r.s * r.b * r.dirs),
                                                     (uint64_t)(r.gates * r.h)),
                                         (uint64_t)(r.in + r.h + 4));
}

#define RNN_DEF(var, sym, opname, kind, maxin, nout)                                           \
        static int sym##_infer(const struct ops_def *def, struct ops_call *call, char *err,    \
                               size_t errlen)                                                  \
        {                                                                                      \
                return rnn_infer(def, kind, call, err, errlen);                                \
        }                                                                                      \
        static int sym##_run(const struct ops_def *def, const struct ops_call *call, char *err,\
                             size_t errlen)                                                    \
        {                                                                                      \
                return rnn_run(def, kind, call, err, errlen);                                  \
        }                                                                                      \
        static void sym##_cost(const struct ops_def *def, const struct ops_call *call,         \
                               uint64_t *f, uint64_t *b)                                       \
        {                                                                                      \
                rnn_cost(def, kind, call, f, b);                                               \
        }                                                                                      \
        const struct ops_def var = {                                                           \
                .name = opname, .min_inputs = 3, .max_inputs = maxin, .outputs = nout,         \
                .engine = OPS_ENGINE_CUBE, .run = sym##_run, .cost = sym##_cost,               \
                .infer = sym##_infer, .since_version = 1,                                      \
        };

RNN_DEF(ops_rnn_def, simple_rnn, "RNN", RNN_SIMPLE, 6, 2)
RNN_DEF(ops_gru_def, gru, "GRU", RNN_GRU, 6, 2)
RNN_DEF(ops_lstm_def, lstm, "LSTM", RNN_LSTM, 8, 3)

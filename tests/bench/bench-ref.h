/* Float64 references of the bench models (bench-models.h), computed here from the weights in
 * each packed model, so that bench_models can say how far npud's and ONNX Runtime's float32
 * outputs are from the exact answer, not only from each other. Straightforward loops in
 * double; the constants the models hold as float32 (sqrt(2), sqrt(d_k), epsilon) are taken as
 * those float32 values. Included by bench_models.c and bench_npud.c, after bench-models.h. */
#ifndef NPUD_TESTS_BENCH_REF_H
#define NPUD_TESTS_BENCH_REF_H

#include <math.h>

/* Set: every tensor between two nodes of the model is rounded to float32, as ONNX declares it,
 * the arithmetic within a node staying exact (float64): what an ideal float32 engine would
 * compute. Clear: float64 throughout. */
static int ref_round32;

static double ref_f(double x)
{
        return ref_round32 ? (double)(float)x : x;
}

static void ref_r(double *x, size_t n)
{
        for (size_t i = 0; i < n; i++)
                x[i] = ref_f(x[i]);
}

static const float *ref_init(const Onnx__ModelProto *mp, const char *name)
{
        for (size_t i = 0; i < mp->graph->n_initializer; i++)
                if (strcmp(mp->graph->initializer[i]->name, name) == 0)
                        return (const float *)mp->graph->initializer[i]->raw_data.data;
        fprintf(stderr, "bench_models: no initializer %s for the float64 reference\n", name);
        exit(1);
}

/* y [m, n] = x [m, k] w + b, w [k, n] (or [n, k] when wt: the Gemm transB of nn.Linear) */
static void ref_linear(const double *x, const float *w, const float *b, double *y, int m, int k, int n,
                       int wt)
{
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0.0;
                        for (int q = 0; q < k; q++)
                                s += x[(size_t)i * k + q] * (double)(wt ? w[(size_t)j * k + q] : w[(size_t)q * n + j]);
                        /* MatMul, then Add of the bias: two tensors */
                        y[(size_t)i * n + j] = ref_f(ref_f(s) + (b ? (double)b[j] : 0.0));
                }
}

static void ref_relu(double *x, size_t n)
{
        for (size_t i = 0; i < n; i++)
                x[i] = x[i] > 0 ? x[i] : 0;
}

static void ref_mlp(const Onnx__ModelProto *mp, const float *x, double *y)
{
        enum { B = 32, H = 1024, OUT = 10 };
        double *a = malloc(sizeof(double) * B * H), *h = malloc(sizeof(double) * B * H);

        for (int i = 0; i < B * H; i++)
                a[i] = x[i];
        ref_linear(a, ref_init(mp, "fc0.weight"), ref_init(mp, "fc0.bias"), h, B, H, H, 1);
        ref_relu(h, B * H);
        ref_linear(h, ref_init(mp, "fc1.weight"), ref_init(mp, "fc1.bias"), a, B, H, H, 1);
        ref_relu(a, B * H);
        ref_linear(a, ref_init(mp, "fc2.weight"), ref_init(mp, "fc2.bias"), y, B, H, OUT, 0);
        free(a);
        free(h);
}

/* out = BatchNormalization(Conv3x3 pad 1 (in)) of layer l, C channels of HW x HW */
static void ref_conv_bn(const Onnx__ModelProto *mp, int l, const double *in, double *out, int C, int HW)
{
        char name[64];
        const float *w, *sc, *bi, *mean, *var;

        snprintf(name, sizeof(name), "conv%d.weight", l);
        w = ref_init(mp, name);
        snprintf(name, sizeof(name), "bn%d.weight", l);
        sc = ref_init(mp, name);
        snprintf(name, sizeof(name), "bn%d.bias", l);
        bi = ref_init(mp, name);
        snprintf(name, sizeof(name), "bn%d.running_mean", l);
        mean = ref_init(mp, name);
        snprintf(name, sizeof(name), "bn%d.running_var", l);
        var = ref_init(mp, name);
        memset(out, 0, sizeof(double) * (size_t)C * HW * HW);
        for (int co = 0; co < C; co++) {
                double *o = out + (size_t)co * HW * HW;
                for (int ci = 0; ci < C; ci++)
                        for (int kh = 0; kh < 3; kh++)
                                for (int kw = 0; kw < 3; kw++) {
                                        double k = w[((co * C + ci) * 3 + kh) * 3 + kw];
                                        const double *src = in + (size_t)ci * HW * HW;
                                        for (int oh = 0; oh < HW; oh++) {
                                                int ih = oh + kh - 1;
                                                if (ih < 0 || ih >= HW)
                                                        continue;
                                                for (int ow = 0; ow < HW; ow++) {
                                                        int iw = ow + kw - 1;
                                                        if (iw >= 0 && iw < HW)
                                                                o[oh * HW + ow] += k * src[ih * HW + iw];
                                                }
                                        }
                                }
                double a = sc[co] / sqrt((double)var[co] + (double)1e-5f), b = bi[co] - mean[co] * a;
                ref_r(o, (size_t)HW * HW); /* Conv's output */
                for (int i = 0; i < HW * HW; i++)
                        o[i] = o[i] * a + b;
                ref_r(o, (size_t)HW * HW); /* BatchNormalization's */
        }
}

static void ref_resnet(const Onnx__ModelProto *mp, const struct bmodel *m, const float *x, double *y)
{
        const int C = (int)m->dims[1], HW = (int)m->dims[2];
        double *xd = malloc(sizeof(double) * m->n), *t = malloc(sizeof(double) * m->n);

        for (size_t i = 0; i < m->n; i++)
                xd[i] = x[i];
        ref_conv_bn(mp, 1, xd, t, C, HW);
        ref_relu(t, m->n);
        ref_conv_bn(mp, 2, t, y, C, HW);
        for (size_t i = 0; i < m->n; i++)
                y[i] += xd[i];
        ref_r(y, m->n);
        ref_relu(y, m->n);
        free(xd);
        free(t);
}

/* LayerNormalization over rows of d, in place */
static void ref_layernorm(double *x, const float *g, const float *b, int rows, int d)
{
        for (int i = 0; i < rows; i++) {
                double *r = x + (size_t)i * d, mu = 0, var = 0;
                for (int j = 0; j < d; j++)
                        mu += r[j];
                mu /= d;
                for (int j = 0; j < d; j++)
                        var += (r[j] - mu) * (r[j] - mu);
                var /= d;
                double inv = 1 / sqrt(var + (double)1e-5f);
                for (int j = 0; j < d; j++)
                        r[j] = (r[j] - mu) * inv * g[j] + b[j];
        }
}

static void ref_encoder(const Onnx__ModelProto *mp, const float *x, double *y)
{
        enum { T = 128, D = 256, NH = 4, DK = D / NH, FF = 1024 };
        double *xd = malloc(sizeof(double) * T * D), *q = malloc(sizeof(double) * T * D);
        double *k = malloc(sizeof(double) * T * D), *v = malloc(sizeof(double) * T * D);
        double *ctx = malloc(sizeof(double) * T * D), *a = malloc(sizeof(double) * T * D);
        double *f = malloc(sizeof(double) * T * FF), p[T];
        const double sdk = (double)sqrtf((float)DK), s2 = (double)1.4142135f;

        for (int i = 0; i < T * D; i++)
                xd[i] = x[i];
        ref_linear(xd, ref_init(mp, "attn.q.weight"), ref_init(mp, "attn.q.bias"), q, T, D, D, 0);
        ref_linear(xd, ref_init(mp, "attn.k.weight"), ref_init(mp, "attn.k.bias"), k, T, D, D, 0);
        ref_linear(xd, ref_init(mp, "attn.v.weight"), ref_init(mp, "attn.v.bias"), v, T, D, D, 0);
        for (int h = 0; h < NH; h++)
                for (int i = 0; i < T; i++) {
                        double mx = -INFINITY, sum = 0;
                        for (int j = 0; j < T; j++) {
                                double s = 0;
                                for (int d = 0; d < DK; d++)
                                        s += q[i * D + h * DK + d] * k[j * D + h * DK + d];
                                p[j] = ref_f(ref_f(ref_f(s) / sdk) + (j > i ? (double)-10000.0f : 0.0));
                                mx = p[j] > mx ? p[j] : mx;
                        }
                        for (int j = 0; j < T; j++)
                                sum += (p[j] = exp(p[j] - mx));
                        for (int d = 0; d < DK; d++) {
                                double c = 0;
                                for (int j = 0; j < T; j++)
                                        c += ref_f(p[j] / sum) * v[j * D + h * DK + d];
                                ctx[i * D + h * DK + d] = ref_f(c);
                        }
                }
        ref_linear(ctx, ref_init(mp, "attn.out.weight"), ref_init(mp, "attn.out.bias"), a, T, D, D, 0);
        for (int i = 0; i < T * D; i++)
                a[i] = ref_f(a[i] + xd[i]);
        ref_layernorm(a, ref_init(mp, "ln1.weight"), ref_init(mp, "ln1.bias"), T, D);
        ref_r(a, (size_t)T * D);
        ref_linear(a, ref_init(mp, "ff1.weight"), ref_init(mp, "ff1.bias"), f, T, D, FF, 0);
        for (int i = 0; i < T * FF; i++)
                f[i] = ref_f(ref_f(f[i] * ref_f(1 + ref_f(erf(ref_f(f[i] / s2))))) * 0.5);
        ref_linear(f, ref_init(mp, "ff2.weight"), ref_init(mp, "ff2.bias"), y, T, FF, D, 0);
        for (int i = 0; i < T * D; i++)
                y[i] = ref_f(y[i] + a[i]);
        ref_layernorm(y, ref_init(mp, "ln2.weight"), ref_init(mp, "ln2.bias"), T, D);
        ref_r(y, (size_t)T * D);
        free(xd);
        free(q);
        free(k);
        free(v);
        free(ctx);
        free(a);
        free(f);
}

/* chain(): Add 0.5, Mul 1.5, Sub 0.25, Relu, Div 2, Sigmoid, Mul 3, Tanh */
static void ref_chain(const float *x, double *y, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                double t = ((double)x[i] + 0.5) * 1.5 - 0.25;
                t = (t > 0 ? t : 0) / 2;
                y[i] = tanh(3 / (1 + exp(-t)));
        }
}

/* The models by the order bench_models runs them in. */
enum ref_kind { REF_MLP, REF_RESNET, REF_ENCODER, REF_CHAIN, REF_RELU };

/* The float64 output of model m (of kind k) on x; NULL when memory is short. Free it. */
static double *ref_model(enum ref_kind k, const struct bmodel *m, const float *x)
{
        double *y = malloc(sizeof(double) * m->yn);
        Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, m->len, m->bytes);

        if (!y || !mp) {
                free(y);
                if (mp)
                        onnx__model_proto__free_unpacked(mp, NULL);
                return NULL;
        }
        switch (k) {
        case REF_MLP: ref_mlp(mp, x, y); break;
        case REF_RESNET: ref_resnet(mp, m, x, y); break;
        case REF_ENCODER: ref_encoder(mp, x, y); break;
        case REF_CHAIN: ref_chain(x, y, m->n); break;
        case REF_RELU:
                for (size_t i = 0; i < m->n; i++)
                        y[i] = x[i] > 0 ? x[i] : 0;
        }
        onnx__model_proto__free_unpacked(mp, NULL);
        return y;
}

#endif

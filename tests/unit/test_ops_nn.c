/* Unit tests of the nn operator family (ops/nn-*.c, matmul.c): each operator's
 * results against a straightforward reference computed here in double (direct convolution
 * loops, window scans, per-element gate formulas), on random data and on shapes that
 * exercise pads, strides, dilations, groups, auto_pad, ceil_mode and the optional inputs
 * and outputs; a known result from the ONNX documentation; the infer-based checks
 * rejecting bad calls with a message naming the operator; and the cost estimates. Calls go
 * through the registry as the graph executor makes them: infer with data, outputs
 * allocated, check on a copy without data, run. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define F32 PROTO_DTYPE_FLOAT32
#define F16 PROTO_DTYPE_FLOAT16
#define F64 PROTO_DTYPE_FLOAT64
#define I32 PROTO_DTYPE_INT32
#define I64 PROTO_DTYPE_INT64
#define U8 PROTO_DTYPE_UINT8
#define I8 PROTO_DTYPE_INT8

#define ARRAY_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x243f6a8885a308d3ULL;

static uint32_t rng(void)
{
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t)(rng_state >> 33);
}

/* Uniform in [-1, 1). */
static float unit(void)
{
        return (float)((double)rng() / 2147483648.0 - 1.0);
}

static float *rand_f32(int64_t n)
{
        float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
        int64_t i;

        ck_assert_ptr_nonnull(p);
        for (i = 0; i < n; i++)
                p[i] = unit();
        return p;
}

static int64_t prod(int n, const int64_t *d)
{
        int64_t p = 1;
        int i;

        for (i = 0; i < n; i++)
                p *= d[i];
        return p;
}

static void set_in(struct ops_call *c, int i, int dtype, const void *data, int ndim,
                   const int64_t *dims)
{
        struct ops_tensor *t = &c->in[i];

        memset(t, 0, sizeof(*t));
        t->dtype = dtype;
        t->ndim = ndim;
        if (ndim)
                memcpy(t->dims, dims, (size_t)ndim * sizeof(*dims));
        t->data = (void *)data;
        if (c->nin <= i)
                c->nin = i + 1;
}

static struct ops_attr *new_attr(struct ops_call *c, const char *name, int type)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = type;
        return a;
}

static void a_int(struct ops_call *c, const char *name, int64_t v)
{
        new_attr(c, name, OPS_ATTR_INT)->i = v;
}

static void a_float(struct ops_call *c, const char *name, double v)
{
        new_attr(c, name, OPS_ATTR_FLOAT)->f = v;
}

/* ints / strings must outlive the call (static or the caller's arrays). */
static void a_ints(struct ops_call *c, const char *name, int n, const int64_t *v)
{
        struct ops_attr *a = new_attr(c, name, OPS_ATTR_INTS);

        a->n = n;
        a->ints = v;
}

static void a_str(struct ops_call *c, const char *name, const char *s)
{
        new_attr(c, name, OPS_ATTR_STRING)->s = s;
}

static void a_strs(struct ops_call *c, const char *name, int n, const char *const *s)
{
        struct ops_attr *a = new_attr(c, name, OPS_ATTR_STRINGS);

        a->n = n;
        a->strings = s;
}

static const struct ops_def *def_of(const char *name, int opset)
{
        const struct ops_def *d = ops_lookup_onnx(NULL, name, opset);

        ck_assert_msg(d != NULL, "%s not registered for opset %d", name, opset);
        ck_assert_ptr_nonnull(d->infer);
        ck_assert(d->check || d->infer); /* NULL: the default check through infer */
        ck_assert_ptr_nonnull(d->run);
        ck_assert_ptr_nonnull(d->cost);
        return d;
}

/* infer (data readable), allocate the outputs (zeroed), check a copy without data, run. */
static void invoke_at(const char *name, int opset, struct ops_call *c)
{
        const struct ops_def *d = def_of(name, opset);
        struct ops_call probe;
        uint64_t flops = 0, bytes = 0;
        char err[512] = "";
        int i, rc;

        if (!c->nout)
                c->nout = 1;
        c->opset = opset;
        rc = ops_infer(d, c, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s infer: %d %s", name, rc, err);
        for (i = 0; i < c->nout; i++) {
                int64_t n = prod(c->out[i].ndim, c->out[i].dims);

                ck_assert_int_ne(c->out[i].dtype, 0);
                c->out[i].data = calloc((size_t)(n ? n : 1), proto_dtype_size(c->out[i].dtype));
                ck_assert_ptr_nonnull(c->out[i].data);
        }
        probe = *c;
        for (i = 0; i < OPS_MAX_INPUTS; i++)
                probe.in[i].data = NULL;
        for (i = 0; i < OPS_MAX_OUTPUTS; i++)
                probe.out[i].data = NULL;
        rc = ops_check(d, &probe, err, sizeof(err));
        /* operators whose shapes depend on input data cannot be checked without it */
        ck_assert_msg(rc == 0 || strstr(err, "running"), "%s check: %d %s", name, rc, err);
        ops_cost(d, &probe, &flops, &bytes);
        ck_assert_uint_gt(bytes, 0);
        rc = ops_run(d, c, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s run: %d %s", name, rc, err);
}

static void invoke(const char *name, struct ops_call *c)
{
        invoke_at(name, 17, c);
}

static void free_outs(struct ops_call *c)
{
        int i;

        for (i = 0; i < c->nout; i++) {
                free(c->out[i].data);
                c->out[i].data = NULL;
        }
}

static void expect_shape(const struct ops_tensor *t, int ndim, const int64_t *dims)
{
        int i;

        ck_assert_int_eq(t->ndim, ndim);
        for (i = 0; i < ndim; i++)
                ck_assert_msg(t->dims[i] == dims[i], "dim %d: %lld vs %lld", i,
                              (long long)t->dims[i], (long long)dims[i]);
}

/* got (float32) against want within abs + rel * |want|. */
static void expect_close(const char *what, const float *got, const double *want, int64_t n,
                         double abs_tol, double rel_tol)
{
        int64_t i;

        for (i = 0; i < n; i++)
                ck_assert_msg(fabs(got[i] - want[i]) <= abs_tol + rel_tol * fabs(want[i]),
                              "%s [%lld]: %.9g vs %.9g", what, (long long)i, got[i], want[i]);
}

/* infer must fail with -EINVAL and a message "<op>: ..." containing want. */
static void expect_reject(const char *name, struct ops_call *c, const char *want)
{
        const struct ops_def *d = def_of(name, 17);
        char err[512] = "";
        size_t n = strlen(d->name);
        int rc;

        c->opset = 17;
        if (!c->nout)
                c->nout = 1;
        rc = ops_infer(d, c, err, sizeof(err));
        ck_assert_msg(rc == -EINVAL, "%s: infer returned %d, wanted -EINVAL (%s)", name, rc, want);
        ck_assert_msg(strncmp(err, d->name, n) == 0 && err[n] == ':',
                      "message \"%s\" does not name %s", err, d->name);
        if (want)
                ck_assert_msg(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

/* ---------------------------------------------------------------- registry */

START_TEST(test_registry_nn)
{
        static const char *const names[] = {
                "MatMul", "Gemm", "Conv", "ConvTranspose", "ConvInteger", "QLinearConv",
                "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
                "GlobalLpPool", "MaxUnpool", "BatchNormalization", "LayerNormalization",
                "InstanceNormalization", "LRN", "LpNormalization", "MeanVarianceNormalization",
                "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "QuantizeLinear",
                "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QLinearMatMul",
                "RNN", "GRU", "LSTM", "Einsum", "NonMaxSuppression", "RoiAlign", "GridSample",
                "Det",
        };
        const struct ops_def *d10, *d16;
        int i;

        for (i = 0; i < ARRAY_N(names); i++) {
                const struct ops_def *d = def_of(names[i], 17);

                ck_assert_str_eq(d->name, names[i]);
                ck_assert_ptr_eq(ops_lookup(names[i]), ops_lookup_onnx("", names[i], 99));
        }
        /* old models find the same definitions */
        ck_assert_ptr_eq(ops_lookup_onnx(NULL, "Conv", 6), ops_lookup("Conv"));
        ck_assert_ptr_eq(ops_lookup_onnx("ai.onnx", "BatchNormalization", 6),
                         ops_lookup("BatchNormalization"));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "LayerNormalization", 16));
        /* RoiAlign changed its default coordinate mode in opset 16 */
        d10 = ops_lookup_onnx(NULL, "RoiAlign", 15);
        d16 = ops_lookup_onnx(NULL, "RoiAlign", 16);
        ck_assert_ptr_nonnull(d10);
        ck_assert_ptr_nonnull(d16);
        ck_assert_ptr_ne(d10, d16);
        ck_assert_int_eq(d10->since_version, 10);
        ck_assert_ptr_eq(ops_lookup("RoiAlign"), d16);
        ck_assert_int_eq(ops_lookup("Conv")->engine, OPS_ENGINE_CUBE);
        ck_assert_int_eq(ops_lookup("MaxPool")->engine, OPS_ENGINE_VECTOR);
}
END_TEST

/* ---------------------------------------------------------------- MatMul, Gemm */

START_TEST(test_matmul_infer)
{
        static const int64_t da[] = { 2, 1, 3, 4 }, db[] = { 5, 4, 6 }, want[] = { 2, 5, 3, 6 };
        struct ops_call c;
        char err[256];

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 4, da);
        set_in(&c, 1, F32, NULL, 3, db);
        c.nout = 1;
        ck_assert_int_eq(ops_infer(ops_lookup("MatMul"), &c, err, sizeof(err)), 0);
        ck_assert_int_eq(c.out[0].dtype, F32);
        expect_shape(&c.out[0], 4, want);
        set_in(&c, 1, F32, NULL, 1, (const int64_t[]){ 4 });
        ck_assert_int_eq(ops_infer(ops_lookup("MatMul"), &c, err, sizeof(err)), 0);
        expect_shape(&c.out[0], 3, (const int64_t[]){ 2, 1, 3 });
        set_in(&c, 1, F32, NULL, 1, (const int64_t[]){ 5 });
        ck_assert_int_eq(ops_infer(ops_lookup("MatMul"), &c, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "MatMul: inner dimensions differ"), "%s", err);
}
END_TEST

START_TEST(test_matmul_f64)
{
        static const int64_t da[] = { 3, 5, 7 }, db[] = { 7, 4 };
        double a[105], b[28], *y;
        struct ops_call c;
        int64_t i, j, k, p;

        for (i = 0; i < 105; i++)
                a[i] = unit();
        for (i = 0; i < 28; i++)
                b[i] = unit();
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F64, a, 3, da);
        set_in(&c, 1, F64, b, 2, db);
        invoke("MatMul", &c);
        y = c.out[0].data;
        for (p = 0; p < 3; p++)
                for (i = 0; i < 5; i++)
                        for (j = 0; j < 4; j++) {
                                double s = 0;

                                for (k = 0; k < 7; k++)
                                        s += a[(p * 5 + i) * 7 + k] * b[k * 4 + j];
                                ck_assert_double_eq_tol(y[(p * 5 + i) * 4 + j], s, 1e-12);
                        }
        free_outs(&c);
}
END_TEST

static void gemm_case(int ta, int tb, int64_t m, int64_t n, int64_t k, int cnd,
                      const int64_t *cdims, double alpha, double beta)
{
        int64_t ad[2] = { ta ? k : m, ta ? m : k }, bd[2] = { tb ? n : k, tb ? k : n }, i, j, p;
        float *a = rand_f32(m * k), *b = rand_f32(k * n), *cc = rand_f32(prod(cnd, cdims));
        double *want = malloc((size_t)(m * n) * sizeof(double));
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, a, 2, ad);
        set_in(&c, 1, F32, b, 2, bd);
        if (cnd >= 0)
                set_in(&c, 2, F32, cc, cnd, cdims);
        a_int(&c, "transA", ta);
        a_int(&c, "transB", tb);
        a_float(&c, "alpha", alpha);
        a_float(&c, "beta", beta);
        invoke("Gemm", &c);
        expect_shape(&c.out[0], 2, (const int64_t[]){ m, n });
        for (i = 0; i < m; i++)
                for (j = 0; j < n; j++) {
                        double s = 0, cv = 0;

                        for (p = 0; p < k; p++)
                                s += (double)(ta ? a[p * m + i] : a[i * k + p]) *
                                     (tb ? b[j * k + p] : b[p * n + j]);
                        if (cnd >= 0) {
                                int64_t r = cnd == 2 && cdims[0] != 1 ? i : 0;
                                int64_t q = cnd >= 1 && cdims[cnd - 1] != 1 ? j : 0;

                                cv = cc[r * (cnd >= 1 ? cdims[cnd - 1] : 1) + q];
                        }
                        want[i * n + j] = alpha * s + beta * cv;
                }
        expect_close("Gemm", c.out[0].data, want, m * n, 1e-5, 1e-5);
        free_outs(&c);
        free(a);
        free(b);
        free(cc);
        free(want);
}

START_TEST(test_gemm)
{
        gemm_case(0, 0, 5, 6, 7, 2, (const int64_t[]){ 5, 6 }, 1.0, 1.0);
        gemm_case(1, 0, 5, 6, 7, 1, (const int64_t[]){ 6 }, 0.5, 2.0);
        gemm_case(0, 1, 5, 6, 7, 2, (const int64_t[]){ 5, 1 }, 1.0, -1.0);
        gemm_case(1, 1, 33, 17, 65, 0, NULL, 2.0, 0.25);
        gemm_case(0, 0, 4, 3, 2, -1, NULL, 1.0, 1.0);
        gemm_case(0, 0, 4, 3, 0, 2, (const int64_t[]){ 1, 3 }, 1.0, 3.0);
}
END_TEST

START_TEST(test_gemm_reject)
{
        static const int64_t a[] = { 3, 4 }, b[] = { 5, 6 }, cbad[] = { 2, 6 };
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 2, a);
        set_in(&c, 1, F32, NULL, 2, b);
        expect_reject("Gemm", &c, "inner dimensions differ (4 vs 5)");
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 2, a);
        set_in(&c, 1, F32, NULL, 2, (const int64_t[]){ 4, 6 });
        set_in(&c, 2, F32, NULL, 2, cbad);
        expect_reject("Gemm", &c, "does not broadcast");
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, I32, NULL, 2, a);
        set_in(&c, 1, I32, NULL, 2, (const int64_t[]){ 4, 6 });
        expect_reject("Gemm", &c, "unsupported dtype int32");
}
END_TEST

/* ---------------------------------------------------------------- Conv */

struct conv_p {
        int nsp;
        int64_t n, c, m, group;
        int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
        int bias;
        const char *auto_pad;
};

/* Direct convolution in double over spatial dims right-aligned in 3. */
static void ref_conv(const struct conv_p *p, const float *x, const float *w, const float *b,
                     const int64_t *out, double *y)
{
        int64_t in[3] = { 1, 1, 1 }, k[3] = { 1, 1, 1 }, s[3] = { 1, 1, 1 }, d[3] = { 1, 1, 1 };
        int64_t pb[3] = { 0, 0, 0 }, o[3] = { 1, 1, 1 }, cg = p->c / p->group, mg = p->m / p->group;
        int64_t n, m, ci, od, oh, ow, kd, kh, kw;
        int i, off = 3 - p->nsp;

        for (i = 0; i < p->nsp; i++) {
                in[off + i] = p->in[i];
                k[off + i] = p->k[i];
                s[off + i] = p->s[i];
                d[off + i] = p->d[i];
                pb[off + i] = p->pb[i];
                o[off + i] = out[i];
        }
        for (n = 0; n < p->n; n++)
        for (m = 0; m < p->m; m++)
        for (od = 0; od < o[0]; od++)
        for (oh = 0; oh < o[1]; oh++)
        for (ow = 0; ow < o[2]; ow++) {
                double acc = b ? b[m] : 0;
                int64_t g = m / mg;

                for (ci = 0; ci < cg; ci++)
                for (kd = 0; kd < k[0]; kd++)
                for (kh = 0; kh < k[1]; kh++)
                for (kw = 0; kw < k[2]; kw++) {
                        int64_t id = od * s[0] - pb[0] + kd * d[0];
                        int64_t ih = oh * s[1] - pb[1] + kh * d[1];
                        int64_t iw = ow * s[2] - pb[2] + kw * d[2];

                        if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2])
                                continue;
                        acc += (double)x[(((n * p->c + g * cg + ci) * in[0] + id) * in[1] + ih) *
                                                 in[2] + iw] *
                               w[(((m * cg + ci) * k[0] + kd) * k[1] + kh) * k[2] + kw];
                }
                y[(((n * p->m + m) * o[0] + od) * o[1] + oh) * o[2] + ow] = acc;
        }
}

static void conv_case(struct conv_p p)
{
        int64_t xd[5], wd[5], out[3], pads[6], i;
        int64_t k3[3], s3[3], d3[3];
        float *x, *w, *b;
        double *want;
        struct ops_call c;
        int rank = p.nsp + 2;

        xd[0] = p.n;
        xd[1] = p.c;
        wd[0] = p.m;
        wd[1] = p.c / p.group;
        for (i = 0; i < p.nsp; i++) {
                int64_t ek = (p.k[i] - 1) * p.d[i] + 1;

                xd[2 + i] = p.in[i];
                wd[2 + i] = p.k[i];
                if (p.auto_pad) {
                        int64_t total;

                        out[i] = (p.in[i] + p.s[i] - 1) / p.s[i];
                        total = (out[i] - 1) * p.s[i] + ek - p.in[i];
                        total = total < 0 ? 0 : total;
                        p.pb[i] = strcmp(p.auto_pad, "SAME_UPPER") == 0 ? total / 2
                                                                        : total - total / 2;
                        p.pe[i] = total - p.pb[i];
                } else {
                        out[i] = (p.in[i] + p.pb[i] + p.pe[i] - ek) / p.s[i] + 1;
                }
                pads[i] = p.pb[i];
                pads[p.nsp + i] = p.pe[i];
                k3[i] = p.k[i];
                s3[i] = p.s[i];
                d3[i] = p.d[i];
        }
        x = rand_f32(prod(rank, xd));
        w = rand_f32(prod(rank, wd));
        b = rand_f32(p.m);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, rank, xd);
        set_in(&c, 1, F32, w, rank, wd);
        if (p.bias)
                set_in(&c, 2, F32, b, 1, &p.m);
        a_ints(&c, "kernel_shape", p.nsp, k3);
        a_ints(&c, "strides", p.nsp, s3);
        a_ints(&c, "dilations", p.nsp, d3);
        if (p.auto_pad)
                a_str(&c, "auto_pad", p.auto_pad);
        else
                a_ints(&c, "pads", 2 * p.nsp, pads);
        a_int(&c, "group", p.group);
        invoke("Conv", &c);
        ck_assert_int_eq(c.out[0].ndim, rank);
        ck_assert_int_eq(c.out[0].dims[0], p.n);
        ck_assert_int_eq(c.out[0].dims[1], p.m);
        for (i = 0; i < p.nsp; i++)
                ck_assert_int_eq(c.out[0].dims[2 + i], out[i]);
        want = malloc((size_t)prod(rank, c.out[0].dims) * sizeof(double));
        ref_conv(&p, x, w, p.bias ? b : NULL, out, want);
        expect_close("Conv", c.out[0].data, want, prod(rank, c.out[0].dims), 1e-5, 1e-5);
        free_outs(&c);
        free(x);
        free(w);
        free(b);
        free(want);
}

START_TEST(test_conv_2d)
{
        /* pads, strides, dilations and groups together */
        conv_case((struct conv_p){ 2, 2, 4, 6, 2, { 7, 6 }, { 3, 2 }, { 2, 1 }, { 1, 2 },
                                   { 1, 0 }, { 2, 1 }, 1, NULL });
        /* plain 3x3 with padding 1 and no bias */
        conv_case((struct conv_p){ 2, 1, 3, 5, 1, { 8, 9 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
                                   { 1, 1 }, { 1, 1 }, 0, NULL });
        /* depthwise, strided */
        conv_case((struct conv_p){ 2, 1, 4, 4, 4, { 9, 9 }, { 3, 3 }, { 2, 2 }, { 1, 1 },
                                   { 1, 1 }, { 0, 0 }, 1, NULL });
        /* 1x1, the path without im2col */
        conv_case((struct conv_p){ 2, 2, 5, 3, 1, { 4, 6 }, { 1, 1 }, { 1, 1 }, { 1, 1 },
                                   { 0, 0 }, { 0, 0 }, 1, NULL });
        /* 1x1 strided needs im2col after all */
        conv_case((struct conv_p){ 2, 1, 5, 3, 1, { 5, 6 }, { 1, 1 }, { 2, 3 }, { 1, 1 },
                                   { 0, 0 }, { 0, 0 }, 1, NULL });
        /* padding larger than the kernel reach */
        conv_case((struct conv_p){ 2, 1, 2, 2, 1, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 1, 1 },
                                   { 3, 2 }, { 2, 3 }, 1, NULL });
}
END_TEST

START_TEST(test_conv_1d_3d)
{
        conv_case((struct conv_p){ 1, 2, 3, 4, 1, { 10 }, { 3 }, { 1 }, { 2 }, { 2 }, { 1 }, 1,
                                   NULL });
        conv_case((struct conv_p){ 1, 1, 4, 6, 2, { 11 }, { 4 }, { 3 }, { 1 }, { 0 }, { 2 }, 0,
                                   NULL });
        conv_case((struct conv_p){ 3, 1, 2, 3, 1, { 4, 5, 3 }, { 2, 3, 2 }, { 1, 2, 1 },
                                   { 1, 1, 1 }, { 1, 1, 1 }, { 1, 1, 1 }, 1, NULL });
        conv_case((struct conv_p){ 3, 2, 4, 2, 2, { 5, 4, 6 }, { 2, 2, 2 }, { 2, 1, 2 },
                                   { 2, 1, 1 }, { 0, 1, 0 }, { 1, 0, 1 }, 1, NULL });
}
END_TEST

START_TEST(test_conv_auto_pad)
{
        conv_case((struct conv_p){ 2, 1, 2, 3, 1, { 7, 8 }, { 3, 2 }, { 2, 2 }, { 1, 1 },
                                   { 0, 0 }, { 0, 0 }, 1, "SAME_UPPER" });
        conv_case((struct conv_p){ 2, 1, 2, 3, 1, { 7, 8 }, { 3, 2 }, { 2, 2 }, { 1, 1 },
                                   { 0, 0 }, { 0, 0 }, 1, "SAME_LOWER" });
        conv_case((struct conv_p){ 1, 1, 2, 3, 1, { 9 }, { 4 }, { 1 }, { 2 }, { 0 }, { 0 }, 1,
                                   "SAME_UPPER" });
}
END_TEST

/* The ONNX Conv documentation example: 5x5 input 0..24, 3x3 kernel of ones, pads 1. */
START_TEST(test_conv_known)
{
        static const int64_t xd[] = { 1, 1, 5, 5 }, wd[] = { 1, 1, 3, 3 }, ks[] = { 3, 3 };
        static const int64_t pads[] = { 1, 1, 1, 1 };
        static const double want[] = { 12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108,
                                       117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84 };
        float x[25], w[9];
        struct ops_call c;
        int i;

        for (i = 0; i < 25; i++)
                x[i] = (float)i;
        for (i = 0; i < 9; i++)
                w[i] = 1;
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        set_in(&c, 1, F32, w, 4, wd);
        a_ints(&c, "kernel_shape", 2, ks);
        a_ints(&c, "pads", 4, pads);
        invoke_at("Conv", 11, &c);
        expect_close("Conv", c.out[0].data, want, 25, 0, 0);
        free_outs(&c);
}
END_TEST

START_TEST(test_conv_f16)
{
        static const int64_t xd[] = { 1, 2, 5, 5 }, wd[] = { 3, 2, 3, 3 }, pads[] = { 1, 1, 1, 1 };
        uint16_t x[50], w[54];
        float xf[50], wf[54], got[75];
        double want[75];
        struct conv_p p = { 2, 1, 2, 3, 1, { 5, 5 }, { 3, 3 }, { 1, 1 }, { 1, 1 }, { 1, 1 },
                            { 1, 1 }, 0, NULL };
        struct ops_call c;
        int i;

        for (i = 0; i < 50; i++) {
                x[i] = ops_float_to_half(unit());
                xf[i] = ops_half_to_float(x[i]);
        }
        for (i = 0; i < 54; i++) {
                w[i] = ops_float_to_half(unit());
                wf[i] = ops_half_to_float(w[i]);
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F16, x, 4, xd);
        set_in(&c, 1, F16, w, 4, wd);
        a_ints(&c, "pads", 4, pads);
        invoke("Conv", &c);
        ck_assert_int_eq(c.out[0].dtype, F16);
        for (i = 0; i < 75; i++)
                got[i] = ops_half_to_float(((uint16_t *)c.out[0].data)[i]);
        ref_conv(&p, xf, wf, NULL, (const int64_t[]){ 5, 5 }, want);
        expect_close("Conv f16", got, want, 75, 4e-3, 2e-3);
        free_outs(&c);
}
END_TEST

START_TEST(test_conv_f64)
{
        static const int64_t xd[] = { 2, 4, 6, 5 }, wd[] = { 6, 2, 3, 2 }, bd[] = { 6 };
        static const int64_t pads[] = { 1, 0, 2, 1 }, strides[] = { 2, 1 };
        struct conv_p p = { 2, 2, 4, 6, 2, { 6, 5 }, { 3, 2 }, { 2, 1 }, { 1, 1 }, { 1, 0 },
                            { 2, 1 }, 1, NULL };
        float *xf = rand_f32(240), *wf = rand_f32(72), *bf = rand_f32(6);
        double x[240], w[72], b[6], *want;
        struct ops_call c;
        int64_t n, i;

        for (i = 0; i < 240; i++)
                x[i] = xf[i];
        for (i = 0; i < 72; i++)
                w[i] = wf[i];
        for (i = 0; i < 6; i++)
                b[i] = bf[i];
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F64, x, 4, xd);
        set_in(&c, 1, F64, w, 4, wd);
        set_in(&c, 2, F64, b, 1, bd);
        a_ints(&c, "pads", 4, pads);
        a_ints(&c, "strides", 2, strides);
        a_int(&c, "group", 2);
        invoke("Conv", &c);
        ck_assert_int_eq(c.out[0].dtype, F64);
        expect_shape(&c.out[0], 4, (const int64_t[]){ 2, 6, 4, 5 });
        n = 2 * 6 * 4 * 5;
        want = malloc((size_t)n * sizeof(double));
        ref_conv(&p, xf, wf, bf, (const int64_t[]){ 4, 5 }, want);
        for (i = 0; i < n; i++)
                ck_assert_double_eq_tol(((double *)c.out[0].data)[i], want[i], 1e-12);
        free(want);
        free_outs(&c);
        free(xf);
        free(wf);
        free(bf);
}
END_TEST

START_TEST(test_conv_reject)
{
        static const int64_t xd[] = { 1, 4, 5, 5 }, wd[] = { 6, 3, 3, 3 }, pads[] = { 1, 1 };
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 4, xd);
        set_in(&c, 1, F32, NULL, 4, wd);
        expect_reject("Conv", &c, "do not fit 4 channels in 1 groups");
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 4, xd);
        set_in(&c, 1, F32, NULL, 4, (const int64_t[]){ 6, 4, 7, 3 });
        expect_reject("Conv", &c, "exceeds padded input");
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 4, xd);
        set_in(&c, 1, F32, NULL, 4, (const int64_t[]){ 6, 4, 3, 3 });
        a_ints(&c, "pads", 2, pads);
        expect_reject("Conv", &c, "'pads' needs 4 values");
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 4, xd);
        set_in(&c, 1, F32, NULL, 4, (const int64_t[]){ 6, 4, 3, 3 });
        set_in(&c, 2, F32, NULL, 1, (const int64_t[]){ 5 });
        expect_reject("Conv", &c, "bias must be [6]");
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 2, xd);
        set_in(&c, 1, F32, NULL, 2, wd);
        expect_reject("Conv", &c, "rank 2");
}
END_TEST

START_TEST(test_conv_check_and_cost)
{
        static const int64_t xd[] = { 1, 64, 56, 56 }, wd[] = { 64, 64, 3, 3 };
        static const int64_t pads[] = { 1, 1, 1, 1 };
        const struct ops_def *d = ops_lookup("Conv");
        uint64_t flops, bytes;
        struct ops_call c;
        char err[256];

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, NULL, 4, xd);
        set_in(&c, 1, F32, NULL, 4, wd);
        a_ints(&c, "pads", 4, pads);
        c.nout = 1;
        c.out[0].dtype = F32;
        c.out[0].ndim = 4;
        memcpy(c.out[0].dims, xd, sizeof(xd));
        ck_assert_int_eq(ops_check(d, &c, err, sizeof(err)), 0);
        ops_cost(d, &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 2ULL * 64 * 56 * 56 * 64 * 9);
        ck_assert_uint_eq(bytes, 4ULL * (2 * 64 * 56 * 56 + 64 * 64 * 9));
        c.out[0].dims[2] = 55;
        ck_assert_int_eq(ops_check(d, &c, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "Conv: output shape [1,64,55,56] but expected [1,64,56,56]"),
                      "%s", err);
}
END_TEST

/* ---------------------------------------------------------------- ConvTranspose */

static void convt_case(int64_t n, int64_t cin, int64_t m, int64_t group, int64_t h, int64_t w,
                       const int64_t *k, const int64_t *s, const int64_t *d,
                       const int64_t *pads, const int64_t *opad, const int64_t *oshape)
{
        int64_t xd[4] = { n, cin, h, w }, wd[4] = { cin, m / group, k[0], k[1] }, yd[4];
        int64_t cg = cin / group, mg = m / group, b, ci, mo, i, j, kh, kw, pb[2], o[2];
        float *x = rand_f32(prod(4, xd)), *wt = rand_f32(prod(4, wd)), *bias = rand_f32(m);
        double *want;
        struct ops_call c;

        for (i = 0; i < 2; i++) {
                int64_t in = i ? w : h, ek = (k[i] - 1) * d[i] + 1;

                if (oshape) {
                        int64_t total = s[i] * (in - 1) + opad[i] + ek - oshape[i];

                        /* a larger output than the input reaches is zero past it */
                        total = total < 0 ? 0 : total;
                        o[i] = oshape[i];
                        pb[i] = total - total / 2;
                } else {
                        o[i] = s[i] * (in - 1) + opad[i] + ek - pads[i] - pads[2 + i];
                        pb[i] = pads[i];
                }
        }
        yd[0] = n;
        yd[1] = m;
        yd[2] = o[0];
        yd[3] = o[1];
        want = calloc((size_t)prod(4, yd), sizeof(double));
        for (b = 0; b < n; b++)
                for (mo = 0; mo < m; mo++)
                        for (i = 0; i < o[0] * o[1]; i++)
                                want[(b * m + mo) * o[0] * o[1] + i] = bias[mo];
        for (b = 0; b < n; b++)
        for (ci = 0; ci < cin; ci++)
        for (mo = 0; mo < mg; mo++)
        for (i = 0; i < h; i++)
        for (j = 0; j < w; j++)
        for (kh = 0; kh < k[0]; kh++)
        for (kw = 0; kw < k[1]; kw++) {
                int64_t oy = i * s[0] - pb[0] + kh * d[0], ox = j * s[1] - pb[1] + kw * d[1];
                int64_t mm = ci / cg * mg + mo;

                if (oy < 0 || oy >= o[0] || ox < 0 || ox >= o[1])
                        continue;
                want[((b * m + mm) * o[0] + oy) * o[1] + ox] +=
                        (double)x[((b * cin + ci) * h + i) * w + j] *
                        wt[((ci * mg + mo) * k[0] + kh) * k[1] + kw];
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        set_in(&c, 1, F32, wt, 4, wd);
        set_in(&c, 2, F32, bias, 1, &m);
        a_ints(&c, "strides", 2, s);
        a_ints(&c, "dilations", 2, d);
        a_ints(&c, "output_padding", 2, opad);
        a_int(&c, "group", group);
        if (oshape)
                a_ints(&c, "output_shape", 2, oshape);
        else
                a_ints(&c, "pads", 4, pads);
        invoke("ConvTranspose", &c);
        expect_shape(&c.out[0], 4, yd);
        expect_close("ConvTranspose", c.out[0].data, want, prod(4, yd), 1e-5, 1e-5);
        free_outs(&c);
        free(x);
        free(wt);
        free(bias);
        free(want);
}

START_TEST(test_conv_transpose)
{
        static const int64_t k3[] = { 3, 3 }, k23[] = { 2, 3 }, s2[] = { 2, 2 }, s31[] = { 3, 1 };
        static const int64_t d1[] = { 1, 1 }, d21[] = { 2, 1 }, p1[] = { 1, 1, 1, 1 };
        static const int64_t p0[] = { 0, 0, 0, 0 }, p12[] = { 1, 0, 0, 2 }, op0[] = { 0, 0 };
        static const int64_t op1[] = { 1, 1 }, os[] = { 12, 9 };

        convt_case(2, 4, 6, 2, 4, 5, k3, s2, d1, p1, op1, NULL);
        convt_case(1, 3, 2, 1, 5, 4, k23, s31, d21, p12, op0, NULL);
        convt_case(1, 2, 3, 1, 3, 3, k3, s2, d1, p0, op0, NULL);
        convt_case(1, 2, 2, 1, 4, 4, k3, s31, d1, p0, op0, os);
}
END_TEST

/* ---------------------------------------------------------------- integer convolution */

START_TEST(test_conv_integer)
{
        static const int64_t xd[] = { 1, 2, 4, 4 }, wd[] = { 3, 2, 2, 2 }, pads[] = { 1, 0, 0, 1 };
        static const int64_t three[] = { 3 };
        uint8_t x[32], w[24], xz = 7, wz[3] = { 1, 2, 3 };
        struct conv_p p = { 2, 1, 2, 3, 1, { 4, 4 }, { 2, 2 }, { 1, 1 }, { 1, 1 }, { 1, 0 },
                            { 0, 1 }, 0, NULL };
        float xf[32], wf[24];
        double want[75];
        int32_t *got;
        struct ops_call c;
        int i;

        for (i = 0; i < 32; i++) {
                x[i] = (uint8_t)(rng() & 0xff);
                xf[i] = (float)(x[i] - xz);
        }
        for (i = 0; i < 24; i++) {
                w[i] = (uint8_t)(rng() & 0xff);
                wf[i] = (float)(w[i] - wz[i / 8]);
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, U8, x, 4, xd);
        set_in(&c, 1, U8, w, 4, wd);
        set_in(&c, 2, U8, &xz, 0, NULL);
        set_in(&c, 3, U8, wz, 1, three);
        a_ints(&c, "pads", 4, pads);
        invoke("ConvInteger", &c);
        ck_assert_int_eq(c.out[0].dtype, I32);
        expect_shape(&c.out[0], 4, (const int64_t[]){ 1, 3, 4, 4 });
        ref_conv(&p, xf, wf, NULL, (const int64_t[]){ 4, 4 }, want);
        got = c.out[0].data;
        for (i = 0; i < 48; i++)
                ck_assert_int_eq(got[i], (int32_t)want[i]);
        free_outs(&c);
}
END_TEST

/* ---------------------------------------------------------------- pools */

/* MaxPool / AveragePool reference over a 2-D plane set. kind: 0 max, 1 avg, 2 avg with
 * pads counted. */
static void ref_pool(int kind, const float *x, int64_t planes, int64_t H, int64_t W,
                     const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *pads,
                     int64_t OH, int64_t OW, double *y, int64_t *idx)
{
        int64_t p, oh, ow, i, j;

        for (p = 0; p < planes; p++)
        for (oh = 0; oh < OH; oh++)
        for (ow = 0; ow < OW; ow++) {
                double best = -INFINITY, sum = 0;
                int64_t cnt = 0, pcnt = 0, bi = -1;

                for (i = 0; i < k[0]; i++)
                for (j = 0; j < k[1]; j++) {
                        int64_t h = oh * s[0] - pads[0] + i * d[0], w = ow * s[1] - pads[1] + j * d[1];

                        if (h >= -pads[0] && h < H + pads[2] && w >= -pads[1] && w < W + pads[3])
                                pcnt++;
                        if (h < 0 || h >= H || w < 0 || w >= W)
                                continue;
                        if (x[(p * H + h) * W + w] > best) {
                                best = x[(p * H + h) * W + w];
                                bi = (p * H + h) * W + w;
                        }
                        sum += x[(p * H + h) * W + w];
                        cnt++;
                }
                y[(p * OH + oh) * OW + ow] = kind == 0 ? best : sum / (double)(kind == 1 ? cnt : pcnt);
                if (idx)
                        idx[(p * OH + oh) * OW + ow] = bi;
        }
}

static void pool_case(const char *op, int kind, int ceil_mode, const int64_t *k, const int64_t *s,
                      const int64_t *d, const int64_t *pads)
{
        static const int64_t xd[] = { 2, 3, 9, 8 };
        int64_t oh, ow, n, i;
        float *x = rand_f32(prod(4, xd));
        double *want;
        int64_t *widx, *gidx;
        struct ops_call c;

        oh = (9 + pads[0] + pads[2] - ((k[0] - 1) * d[0] + 1) + (ceil_mode ? s[0] - 1 : 0)) / s[0] + 1;
        ow = (8 + pads[1] + pads[3] - ((k[1] - 1) * d[1] + 1) + (ceil_mode ? s[1] - 1 : 0)) / s[1] + 1;
        n = 6 * oh * ow;
        want = malloc((size_t)n * sizeof(double));
        widx = malloc((size_t)n * sizeof(int64_t));
        ref_pool(kind, x, 6, 9, 8, k, s, d, pads, oh, ow, want, widx);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        a_ints(&c, "kernel_shape", 2, k);
        a_ints(&c, "strides", 2, s);
        a_ints(&c, "pads", 4, pads);
        a_int(&c, "ceil_mode", ceil_mode);
        if (kind == 0) {
                a_ints(&c, "dilations", 2, d);
                c.nout = 2;
        } else {
                a_int(&c, "count_include_pad", kind == 2);
        }
        invoke(op, &c);
        expect_shape(&c.out[0], 4, (const int64_t[]){ 2, 3, oh, ow });
        expect_close(op, c.out[0].data, want, n, 1e-6, 1e-6);
        if (kind == 0) {
                ck_assert_int_eq(c.out[1].dtype, I64);
                gidx = c.out[1].data;
                for (i = 0; i < n; i++)
                        ck_assert_int_eq(gidx[i], widx[i]);
        }
        free_outs(&c);
        free(x);
        free(want);
        free(widx);
}

START_TEST(test_pools)
{
        static const int64_t k33[] = { 3, 3 }, k23[] = { 2, 3 }, s11[] = { 1, 1 }, s22[] = { 2, 2 };
        static const int64_t s21[] = { 2, 1 }, d11[] = { 1, 1 }, d21[] = { 2, 1 };
        static const int64_t p0[] = { 0, 0, 0, 0 }, p1[] = { 1, 1, 1, 1 }, p12[] = { 1, 2, 0, 1 };

        pool_case("MaxPool", 0, 0, k33, s11, d11, p0);
        pool_case("MaxPool", 0, 0, k33, s22, d11, p1);
        pool_case("MaxPool", 0, 1, k23, s22, d21, p12);
        pool_case("MaxPool", 0, 0, k23, s21, d21, p12);
        pool_case("AveragePool", 1, 0, k33, s22, d11, p1);
        pool_case("AveragePool", 2, 0, k33, s22, d11, p1);
        pool_case("AveragePool", 1, 1, k23, s21, d11, p12);
        pool_case("AveragePool", 2, 0, k23, s11, d11, p12);
}
END_TEST

START_TEST(test_global_and_lp_pools)
{
        static const int64_t xd[] = { 2, 3, 4, 5 }, k[] = { 2, 2 }, s[] = { 2, 2 };
        float *x = rand_f32(120);
        double avg[6], mx[6], lp[6], lpw[24];
        struct ops_call c;
        int64_t p, i, oh, ow;

        for (p = 0; p < 6; p++) {
                double sum = 0, m = -INFINITY, sq = 0;

                for (i = 0; i < 20; i++) {
                        sum += x[p * 20 + i];
                        m = fmax(m, x[p * 20 + i]);
                        sq += (double)x[p * 20 + i] * x[p * 20 + i];
                }
                avg[p] = sum / 20;
                mx[p] = m;
                lp[p] = sqrt(sq);
                for (oh = 0; oh < 2; oh++)
                        for (ow = 0; ow < 2; ow++) {
                                double a = 0;
                                int64_t h, w;

                                for (h = 2 * oh; h < 2 * oh + 2; h++)
                                        for (w = 2 * ow; w < 2 * ow + 2; w++)
                                                a += (double)x[p * 20 + h * 5 + w] * x[p * 20 + h * 5 + w];
                                lpw[p * 4 + oh * 2 + ow] = sqrt(a);
                        }
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        invoke("GlobalAveragePool", &c);
        expect_shape(&c.out[0], 4, (const int64_t[]){ 2, 3, 1, 1 });
        expect_close("GlobalAveragePool", c.out[0].data, avg, 6, 1e-6, 1e-6);
        free_outs(&c);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        invoke("GlobalMaxPool", &c);
        expect_close("GlobalMaxPool", c.out[0].data, mx, 6, 0, 0);
        free_outs(&c);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        invoke("GlobalLpPool", &c);
        expect_close("GlobalLpPool", c.out[0].data, lp, 6, 1e-6, 1e-6);
        free_outs(&c);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        a_ints(&c, "kernel_shape", 2, k);
        a_ints(&c, "strides", 2, s);
        a_int(&c, "p", 2);
        invoke("LpPool", &c);
        expect_shape(&c.out[0], 4, (const int64_t[]){ 2, 3, 2, 2 });
        expect_close("LpPool", c.out[0].data, lpw, 24, 1e-6, 1e-6);
        free_outs(&c);
        free(x);
}
END_TEST

START_TEST(test_maxpool_int8_and_unpool)
{
        static const int64_t xd[] = { 1, 2, 4, 4 }, k[] = { 2, 2 }, s[] = { 2, 2 };
        int8_t x[32];
        float *pooled, xf[32];
        int64_t *idx;
        struct ops_call c, u;
        int i;

        for (i = 0; i < 32; i++) {
                x[i] = (int8_t)(rng() & 0xff);
                xf[i] = x[i];
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, I8, x, 4, xd);
        a_ints(&c, "kernel_shape", 2, k);
        a_ints(&c, "strides", 2, s);
        c.nout = 2;
        invoke("MaxPool", &c);
        ck_assert_int_eq(c.out[0].dtype, I8);
        idx = c.out[1].data;
        for (i = 0; i < 8; i++)
                ck_assert_int_eq(((int8_t *)c.out[0].data)[i], x[idx[i]]);
        /* MaxUnpool puts every maximum back where it came from, zeros elsewhere */
        pooled = malloc(8 * sizeof(float));
        for (i = 0; i < 8; i++)
                pooled[i] = ((int8_t *)c.out[0].data)[i];
        memset(&u, 0, sizeof(u));
        set_in(&u, 0, F32, pooled, 4, (const int64_t[]){ 1, 2, 2, 2 });
        set_in(&u, 1, I64, idx, 4, (const int64_t[]){ 1, 2, 2, 2 });
        a_ints(&u, "kernel_shape", 2, k);
        a_ints(&u, "strides", 2, s);
        invoke("MaxUnpool", &u);
        expect_shape(&u.out[0], 4, xd);
        for (i = 0; i < 32; i++) {
                float v = ((float *)u.out[0].data)[i];
                int j, hit = 0;

                for (j = 0; j < 8; j++)
                        hit |= idx[j] == i;
                ck_assert_float_eq(v, hit ? xf[i] : 0.0f);
        }
        free_outs(&u);
        free_outs(&c);
        free(pooled);
}
END_TEST

/* ---------------------------------------------------------------- normalizations */

START_TEST(test_batch_norm)
{
        static const int64_t xd[] = { 2, 3, 4, 5 }, cd[] = { 3 };
        float *x = rand_f32(120), sc[3], b[3], mean[3], var[3];
        double want[120], bm[3], bv[3], rm[3], rv[3];
        struct ops_call c;
        int64_t n, ch, i;

        for (i = 0; i < 3; i++) {
                sc[i] = unit();
                b[i] = unit();
                mean[i] = unit();
                var[i] = 0.5f + unit() * unit();
        }
        for (n = 0; n < 2; n++)
                for (ch = 0; ch < 3; ch++)
                        for (i = 0; i < 20; i++) {
                                int64_t k = (n * 3 + ch) * 20 + i;

                                want[k] = sc[ch] * (x[k] - mean[ch]) / sqrt(var[ch] + 1e-3) + b[ch];
                        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        set_in(&c, 1, F32, sc, 1, cd);
        set_in(&c, 2, F32, b, 1, cd);
        set_in(&c, 3, F32, mean, 1, cd);
        set_in(&c, 4, F32, var, 1, cd);
        a_float(&c, "epsilon", 1e-3);
        invoke("BatchNormalization", &c);
        expect_close("BatchNormalization", c.out[0].data, want, 120, 1e-5, 1e-5);
        free_outs(&c);
        /* training mode: batch statistics, running averages with momentum */
        for (ch = 0; ch < 3; ch++) {
                double s = 0, s2 = 0;

                for (n = 0; n < 2; n++)
                        for (i = 0; i < 20; i++)
                                s += x[(n * 3 + ch) * 20 + i];
                bm[ch] = s / 40;
                for (n = 0; n < 2; n++)
                        for (i = 0; i < 20; i++)
                                s2 += pow(x[(n * 3 + ch) * 20 + i] - bm[ch], 2);
                bv[ch] = s2 / 40;
                rm[ch] = mean[ch] * 0.8 + bm[ch] * 0.2;
                rv[ch] = var[ch] * 0.8 + bv[ch] * 0.2;
                for (n = 0; n < 2; n++)
                        for (i = 0; i < 20; i++) {
                                int64_t k = (n * 3 + ch) * 20 + i;

                                want[k] = sc[ch] * (x[k] - bm[ch]) / sqrt(bv[ch] + 1e-5) + b[ch];
                        }
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        set_in(&c, 1, F32, sc, 1, cd);
        set_in(&c, 2, F32, b, 1, cd);
        set_in(&c, 3, F32, mean, 1, cd);
        set_in(&c, 4, F32, var, 1, cd);
        a_int(&c, "training_mode", 1);
        a_float(&c, "momentum", 0.8);
        c.nout = 3;
        invoke("BatchNormalization", &c);
        expect_close("BatchNormalization training", c.out[0].data, want, 120, 1e-5, 1e-5);
        expect_close("running_mean", c.out[1].data, rm, 3, 1e-6, 1e-6);
        expect_close("running_var", c.out[2].data, rv, 3, 1e-6, 1e-6);
        free_outs(&c);
        free(x);
}
END_TEST

START_TEST(test_layer_norm)
{
        static const int64_t xd[] = { 2, 3, 4 }, sd[] = { 3, 4 }, bd[] = { 4 };
        float *x = rand_f32(24), *sc = rand_f32(12), *b = rand_f32(4);
        double want[24], mean[2], inv[2];
        struct ops_call c;
        int64_t i, j;

        for (i = 0; i < 2; i++) {
                double s = 0, s2 = 0;

                for (j = 0; j < 12; j++)
                        s += x[i * 12 + j];
                mean[i] = s / 12;
                for (j = 0; j < 12; j++)
                        s2 += pow(x[i * 12 + j] - mean[i], 2);
                inv[i] = 1 / sqrt(s2 / 12 + 1e-5);
                for (j = 0; j < 12; j++)
                        want[i * 12 + j] = (x[i * 12 + j] - mean[i]) * inv[i] * sc[j] + b[j % 4];
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 3, xd);
        set_in(&c, 1, F32, sc, 2, sd);
        set_in(&c, 2, F32, b, 1, bd);
        a_int(&c, "axis", 1);
        c.nout = 3;
        invoke("LayerNormalization", &c);
        expect_close("LayerNormalization", c.out[0].data, want, 24, 1e-5, 1e-5);
        expect_shape(&c.out[1], 3, (const int64_t[]){ 2, 1, 1 });
        expect_close("Mean", c.out[1].data, mean, 2, 1e-6, 1e-6);
        expect_close("InvStdDev", c.out[2].data, inv, 2, 1e-5, 1e-5);
        free_outs(&c);
        free(x);
        free(sc);
        free(b);
}
END_TEST

START_TEST(test_instance_norm_lrn_mvn_lpnorm)
{
        static const int64_t xd[] = { 2, 5, 3, 4 }, cd[] = { 5 };
        static const int64_t axes[] = { 0, 2, 3 };
        float *x = rand_f32(120), *sc = rand_f32(5), *b = rand_f32(5);
        double want[120];
        struct ops_call c;
        int64_t n, ch, i, k;

        /* InstanceNormalization: per (n, c) over the 12 spatial elements */
        for (n = 0; n < 2; n++)
                for (ch = 0; ch < 5; ch++) {
                        const float *p = x + (n * 5 + ch) * 12;
                        double s = 0, s2 = 0, m;

                        for (i = 0; i < 12; i++)
                                s += p[i];
                        m = s / 12;
                        for (i = 0; i < 12; i++)
                                s2 += pow(p[i] - m, 2);
                        for (i = 0; i < 12; i++)
                                want[(n * 5 + ch) * 12 + i] =
                                        sc[ch] * (p[i] - m) / sqrt(s2 / 12 + 1e-5) + b[ch];
                }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        set_in(&c, 1, F32, sc, 1, cd);
        set_in(&c, 2, F32, b, 1, cd);
        invoke("InstanceNormalization", &c);
        expect_close("InstanceNormalization", c.out[0].data, want, 120, 1e-5, 1e-5);
        free_outs(&c);

        /* LRN size 3: channels c-1..c+1 */
        for (n = 0; n < 2; n++)
                for (ch = 0; ch < 5; ch++)
                        for (i = 0; i < 12; i++) {
                                double sq = 0;

                                for (k = ch - 1; k <= ch + 1; k++)
                                        if (k >= 0 && k < 5)
                                                sq += pow(x[(n * 5 + k) * 12 + i], 2);
                                want[(n * 5 + ch) * 12 + i] =
                                        x[(n * 5 + ch) * 12 + i] / pow(2.0 + 0.1 / 3 * sq, 0.6);
                        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        a_int(&c, "size", 3);
        a_float(&c, "alpha", 0.1);
        a_float(&c, "beta", 0.6);
        a_float(&c, "bias", 2.0);
        invoke("LRN", &c);
        expect_close("LRN", c.out[0].data, want, 120, 1e-6, 1e-5);
        free_outs(&c);

        /* MeanVarianceNormalization over axes 0, 2, 3: per channel */
        for (ch = 0; ch < 5; ch++) {
                double s = 0, s2 = 0, m, sd;

                for (n = 0; n < 2; n++)
                        for (i = 0; i < 12; i++) {
                                s += x[(n * 5 + ch) * 12 + i];
                                s2 += pow(x[(n * 5 + ch) * 12 + i], 2);
                        }
                m = s / 24;
                sd = sqrt(s2 / 24 - m * m);
                for (n = 0; n < 2; n++)
                        for (i = 0; i < 12; i++)
                                want[(n * 5 + ch) * 12 + i] = (x[(n * 5 + ch) * 12 + i] - m) / (sd + 1e-9);
        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        a_ints(&c, "axes", 3, axes);
        invoke("MeanVarianceNormalization", &c);
        expect_close("MeanVarianceNormalization", c.out[0].data, want, 120, 1e-5, 1e-5);
        free_outs(&c);

        /* LpNormalization p = 1 along axis 1 */
        for (n = 0; n < 2; n++)
                for (i = 0; i < 12; i++) {
                        double s = 0;

                        for (ch = 0; ch < 5; ch++)
                                s += fabs(x[(n * 5 + ch) * 12 + i]);
                        for (ch = 0; ch < 5; ch++)
                                want[(n * 5 + ch) * 12 + i] = x[(n * 5 + ch) * 12 + i] / s;
                }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 4, xd);
        a_int(&c, "axis", 1);
        a_int(&c, "p", 1);
        invoke("LpNormalization", &c);
        expect_close("LpNormalization", c.out[0].data, want, 120, 1e-6, 1e-5);
        free_outs(&c);
        free(x);
        free(sc);
        free(b);
}
END_TEST

/* ---------------------------------------------------------------- losses */

START_TEST(test_losses)
{
        static const int64_t xd[] = { 3, 4, 2 }, td[] = { 3, 2 }, wd[] = { 4 };
        int64_t t[6] = { 0, 3, 2, -1, 1, 1 };
        float *x = rand_f32(24), w[4] = { 0.5f, 1.0f, 2.0f, 0.25f };
        double loss[6], lp[24], sum = 0, wsum = 0, want;
        struct ops_call c;
        int64_t n, k, cl;

        /* SoftmaxCrossEntropyLoss: log-softmax over the 4 classes, ignore_index -1 */
        for (n = 0; n < 3; n++)
                for (k = 0; k < 2; k++) {
                        double m = -INFINITY, s = 0;

                        for (cl = 0; cl < 4; cl++)
                                m = fmax(m, x[(n * 4 + cl) * 2 + k]);
                        for (cl = 0; cl < 4; cl++)
                                s += exp(x[(n * 4 + cl) * 2 + k] - m);
                        for (cl = 0; cl < 4; cl++)
                                lp[(n * 4 + cl) * 2 + k] = x[(n * 4 + cl) * 2 + k] - m - log(s);
                }
        for (n = 0; n < 3; n++)
                for (k = 0; k < 2; k++) {
                        int64_t tc = t[n * 2 + k];

                        loss[n * 2 + k] = tc < 0 ? 0 : -lp[(n * 4 + tc) * 2 + k] * w[tc];
                        sum += loss[n * 2 + k];
                        wsum += tc < 0 ? 0 : w[tc];
                }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 3, xd);
        set_in(&c, 1, I64, t, 2, td);
        set_in(&c, 2, F32, w, 1, wd);
        a_int(&c, "ignore_index", -1);
        c.nout = 2;
        invoke("SoftmaxCrossEntropyLoss", &c);
        ck_assert_int_eq(c.out[0].ndim, 0);
        want = sum / wsum;
        expect_close("SoftmaxCrossEntropyLoss", c.out[0].data, &want, 1, 1e-6, 1e-5);
        expect_close("log_prob", c.out[1].data, lp, 24, 1e-6, 1e-5);
        free_outs(&c);

        /* NegativeLogLikelihoodLoss on the log-probabilities: none and sum */
        {
                float lpf[24];
                int i;

                for (i = 0; i < 24; i++)
                        lpf[i] = (float)lp[i];
                memset(&c, 0, sizeof(c));
                set_in(&c, 0, F32, lpf, 3, xd);
                set_in(&c, 1, I64, t, 2, td);
                set_in(&c, 2, F32, w, 1, wd);
                a_int(&c, "ignore_index", -1);
                a_str(&c, "reduction", "none");
                invoke("NegativeLogLikelihoodLoss", &c);
                expect_shape(&c.out[0], 2, td);
                expect_close("NLL none", c.out[0].data, loss, 6, 1e-6, 1e-5);
                free_outs(&c);
                memset(&c, 0, sizeof(c));
                set_in(&c, 0, F32, lpf, 3, xd);
                set_in(&c, 1, I64, t, 2, td);
                set_in(&c, 2, F32, w, 1, wd);
                a_int(&c, "ignore_index", -1);
                a_str(&c, "reduction", "sum");
                invoke("NegativeLogLikelihoodLoss", &c);
                expect_close("NLL sum", c.out[0].data, &sum, 1, 1e-6, 1e-5);
                free_outs(&c);
        }
        /* a class out of range is an error at run time */
        t[3] = 4;
        {
                const struct ops_def *d = def_of("NegativeLogLikelihoodLoss", 13);
                char err[256];
                float out;

                memset(&c, 0, sizeof(c));
                set_in(&c, 0, F32, x, 3, xd);
                set_in(&c, 1, I64, t, 2, td);
                c.nout = 1;
                c.out[0].dtype = F32;
                c.out[0].data = &out;
                ck_assert_int_eq(ops_run(d, &c, err, sizeof(err)), -EINVAL);
                ck_assert_msg(strstr(err, "NegativeLogLikelihoodLoss: target 4 out of range"), "%s",
                              err);
        }
        free(x);
}
END_TEST

/* ---------------------------------------------------------------- quantization */

START_TEST(test_quantize)
{
        static const int64_t xd[] = { 2, 3, 2 }, cd[] = { 3 };
        float x[12] = { 0.5f, 1.5f, 2.5f, -2.5f, 300, -300, 0.25f, 0.75f, 1.0f, -1.0f, 7.0f, 0.0f };
        float sc[3] = { 1.0f, 0.5f, 2.0f }, *back;
        int8_t zp[3] = { 0, -3, 10 };
        int8_t want[12];
        struct ops_call c;
        int i;

        /* per-axis along axis 1; round half to even, saturate */
        for (i = 0; i < 12; i++) {
                int ch = (i / 2) % 3;
                double v = nearbyint(x[i] / sc[ch]) + zp[ch];

                want[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
        }
        /* the cases the reference must get right: ties to even, saturation both ways */
        ck_assert_int_eq(want[0], 0);
        ck_assert_int_eq(want[1], 2);
        ck_assert_int_eq(want[4], 127);
        ck_assert_int_eq(want[5], -128);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 3, xd);
        set_in(&c, 1, F32, sc, 1, cd);
        set_in(&c, 2, I8, zp, 1, cd);
        invoke("QuantizeLinear", &c);
        ck_assert_int_eq(c.out[0].dtype, I8);
        for (i = 0; i < 12; i++)
                ck_assert_int_eq(((int8_t *)c.out[0].data)[i], want[i]);
        /* and back */
        {
                struct ops_call d;
                double wb[12];

                for (i = 0; i < 12; i++)
                        wb[i] = (want[i] - zp[(i / 2) % 3]) * (double)sc[(i / 2) % 3];
                memset(&d, 0, sizeof(d));
                set_in(&d, 0, I8, c.out[0].data, 3, xd);
                set_in(&d, 1, F32, sc, 1, cd);
                set_in(&d, 2, I8, zp, 1, cd);
                invoke("DequantizeLinear", &d);
                back = d.out[0].data;
                expect_close("DequantizeLinear", back, wb, 12, 0, 0);
                free_outs(&d);
        }
        free_outs(&c);
}
END_TEST

START_TEST(test_dynamic_quantize)
{
        static const int64_t xd[] = { 2, 3 };
        float x[6] = { -1.0f, 0.5f, 2.0f, 3.0f, -0.25f, 1.75f };
        float scale = 4.0f / 255.0f;
        uint8_t zp = (uint8_t)nearbyintf(1.0f / scale);
        struct ops_call c;
        int i;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 2, xd);
        c.nout = 3;
        invoke("DynamicQuantizeLinear", &c);
        ck_assert_float_eq(*(float *)c.out[1].data, scale);
        ck_assert_int_eq(*(uint8_t *)c.out[2].data, zp);
        for (i = 0; i < 6; i++) {
                float v = nearbyintf(x[i] / scale) + zp;

                ck_assert_int_eq(((uint8_t *)c.out[0].data)[i], (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v));
        }
        free_outs(&c);
}
END_TEST

START_TEST(test_matmul_integer)
{
        static const int64_t ad[] = { 2, 3, 5 }, bd[] = { 5, 4 }, md[] = { 3 }, nd[] = { 4 };
        uint8_t a[30], azp[3] = { 1, 100, 255 };
        int8_t b[20], bzp[4] = { -1, 0, 5, -128 };
        struct ops_call c;
        int64_t p, i, j, k;

        for (i = 0; i < 30; i++)
                a[i] = (uint8_t)(rng() & 0xff);
        for (i = 0; i < 20; i++)
                b[i] = (int8_t)(rng() & 0xff);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, U8, a, 3, ad);
        set_in(&c, 1, I8, b, 2, bd);
        set_in(&c, 2, U8, azp, 1, md);
        set_in(&c, 3, I8, bzp, 1, nd);
        invoke("MatMulInteger", &c);
        expect_shape(&c.out[0], 3, (const int64_t[]){ 2, 3, 4 });
        for (p = 0; p < 2; p++)
                for (i = 0; i < 3; i++)
                        for (j = 0; j < 4; j++) {
                                int32_t s = 0;

                                for (k = 0; k < 5; k++)
                                        s += (a[(p * 3 + i) * 5 + k] - azp[i]) * (b[k * 4 + j] - bzp[j]);
                                ck_assert_int_eq(((int32_t *)c.out[0].data)[(p * 3 + i) * 4 + j], s);
                        }
        free_outs(&c);
}
END_TEST

START_TEST(test_qlinear_matmul)
{
        static const int64_t ad[] = { 2, 3 }, bd[] = { 3, 2 };
        uint8_t a[6] = { 10, 20, 30, 40, 50, 60 }, b[6] = { 1, 2, 3, 4, 5, 6 };
        uint8_t azp = 5, bzp = 2, yzp = 100;
        float as = 0.1f, bs = 0.2f, ys = 0.05f;
        struct ops_call c;
        int64_t i, j, k;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, U8, a, 2, ad);
        set_in(&c, 1, F32, &as, 0, NULL);
        set_in(&c, 2, U8, &azp, 0, NULL);
        set_in(&c, 3, U8, b, 2, bd);
        set_in(&c, 4, F32, &bs, 0, NULL);
        set_in(&c, 5, U8, &bzp, 0, NULL);
        set_in(&c, 6, F32, &ys, 0, NULL);
        set_in(&c, 7, U8, &yzp, 0, NULL);
        invoke("QLinearMatMul", &c);
        for (i = 0; i < 2; i++)
                for (j = 0; j < 2; j++) {
                        int s = 0;
                        float v;

                        for (k = 0; k < 3; k++)
                                s += (a[i * 3 + k] - azp) * (b[k * 2 + j] - bzp);
                        v = nearbyintf((float)s * (float)((double)as * bs / ys)) + yzp;
                        ck_assert_int_eq(((uint8_t *)c.out[0].data)[i * 2 + j],
                                         (uint8_t)(v > 255 ? 255 : v < 0 ? 0 : v));
                }
        free_outs(&c);
}
END_TEST

/* ---------------------------------------------------------------- recurrent layers */

static double sigm(double x)
{
        return 1 / (1 + exp(-x));
}

/* One LSTM step with peepholes for batch 2, input 3, hidden 4, against the gate formulas. */
START_TEST(test_lstm_step)
{
        enum { B = 2, I = 3, H = 4 };
        static const int64_t xd[] = { 1, B, I }, wd[] = { 1, 4 * H, I }, rd[] = { 1, 4 * H, H };
        static const int64_t bd[] = { 1, 8 * H }, sd[] = { 1, B, H }, pd[] = { 1, 3 * H };
        float *x = rand_f32(B * I), *w = rand_f32(4 * H * I), *r = rand_f32(4 * H * H);
        float *b = rand_f32(8 * H), *h0 = rand_f32(B * H), *c0 = rand_f32(B * H), *p = rand_f32(3 * H);
        double wy[B * H], wc[B * H];
        struct ops_call c;
        int64_t n, j, k;

        for (n = 0; n < B; n++)
                for (j = 0; j < H; j++) {
                        double g[4], ig, og, fg, cg, ct;
                        int q;

                        for (q = 0; q < 4; q++) {
                                g[q] = b[q * H + j] + b[4 * H + q * H + j];
                                for (k = 0; k < I; k++)
                                        g[q] += (double)x[n * I + k] * w[(q * H + j) * I + k];
                                for (k = 0; k < H; k++)
                                        g[q] += (double)h0[n * H + k] * r[(q * H + j) * H + k];
                        }
                        /* gates i, o, f, c; peepholes i, o, f */
                        ig = sigm(g[0] + p[j] * c0[n * H + j]);
                        fg = sigm(g[2] + p[2 * H + j] * c0[n * H + j]);
                        cg = tanh(g[3]);
                        ct = fg * c0[n * H + j] + ig * cg;
                        og = sigm(g[1] + p[H + j] * ct);
                        wc[n * H + j] = ct;
                        wy[n * H + j] = og * tanh(ct);
                }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 3, xd);
        set_in(&c, 1, F32, w, 3, wd);
        set_in(&c, 2, F32, r, 3, rd);
        set_in(&c, 3, F32, b, 2, bd);
        set_in(&c, 4, 0, NULL, 0, NULL);
        set_in(&c, 5, F32, h0, 3, sd);
        set_in(&c, 6, F32, c0, 3, sd);
        set_in(&c, 7, F32, p, 2, pd);
        a_int(&c, "hidden_size", H);
        c.nout = 3;
        invoke("LSTM", &c);
        expect_shape(&c.out[0], 4, (const int64_t[]){ 1, 1, B, H });
        expect_close("LSTM Y", c.out[0].data, wy, B * H, 1e-5, 1e-5);
        expect_close("LSTM Y_h", c.out[1].data, wy, B * H, 1e-5, 1e-5);
        expect_close("LSTM Y_c", c.out[2].data, wc, B * H, 1e-5, 1e-5);
        free_outs(&c);
        free(x);
        free(w);
        free(r);
        free(b);
        free(h0);
        free(c0);
        free(p);
}
END_TEST

/* GRU over a sequence in both directions with per-batch lengths, both reset variants. */
static void gru_case(int lbr)
{
        enum { S = 4, B = 3, I = 2, H = 3, D = 2 };
        static const int64_t xd[] = { S, B, I }, wd[] = { D, 3 * H, I }, rd[] = { D, 3 * H, H };
        static const int64_t bd[] = { D, 6 * H }, ld[] = { B };
        static const char *const acts[] = { "Sigmoid", "Tanh", "Sigmoid", "Tanh" };
        float *x = rand_f32(S * B * I), *w = rand_f32(D * 3 * H * I), *r = rand_f32(D * 3 * H * H);
        float *b = rand_f32(D * 6 * H);
        int32_t len[B] = { 4, 2, 0 };
        double wy[S * D * B * H], wh[D * B * H];
        struct ops_call c;
        int64_t d, n, t, j, k, step;

        memset(wy, 0, sizeof(wy));
        for (d = 0; d < D; d++)
                for (n = 0; n < B; n++) {
                        double h[H] = { 0 };

                        for (step = 0; step < len[n]; step++) {
                                double z[H], rr[H], hn[H];
                                const float *W = w + d * 3 * H * I, *R = r + d * 3 * H * H;
                                const float *bb = b + d * 6 * H;

                                t = d ? len[n] - 1 - step : step;
                                for (j = 0; j < H; j++) {
                                        double gz = bb[j] + bb[3 * H + j], gr = bb[H + j] + bb[4 * H + j];

                                        for (k = 0; k < I; k++) {
                                                gz += (double)x[(t * B + n) * I + k] * W[j * I + k];
                                                gr += (double)x[(t * B + n) * I + k] * W[(H + j) * I + k];
                                        }
                                        for (k = 0; k < H; k++) {
                                                gz += h[k] * R[j * H + k];
                                                gr += h[k] * R[(H + j) * H + k];
                                        }
                                        z[j] = sigm(gz);
                                        rr[j] = sigm(gr);
                                }
                                for (j = 0; j < H; j++) {
                                        double gx = bb[2 * H + j], gh = 0;

                                        for (k = 0; k < I; k++)
                                                gx += (double)x[(t * B + n) * I + k] * W[(2 * H + j) * I + k];
                                        for (k = 0; k < H; k++)
                                                gh += (lbr ? h[k] : rr[k] * h[k]) * R[(2 * H + j) * H + k];
                                        gh += bb[5 * H + j];
                                        hn[j] = tanh(gx + (lbr ? rr[j] * gh : gh));
                                }
                                for (j = 0; j < H; j++) {
                                        h[j] = (1 - z[j]) * hn[j] + z[j] * h[j];
                                        wy[((t * D + d) * B + n) * H + j] = h[j];
                                }
                        }
                        for (j = 0; j < H; j++)
                                wh[(d * B + n) * H + j] = h[j];
                }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 3, xd);
        set_in(&c, 1, F32, w, 3, wd);
        set_in(&c, 2, F32, r, 3, rd);
        set_in(&c, 3, F32, b, 2, bd);
        set_in(&c, 4, I32, len, 1, ld);
        a_int(&c, "hidden_size", H);
        a_str(&c, "direction", "bidirectional");
        a_strs(&c, "activations", 4, acts);
        a_int(&c, "linear_before_reset", lbr);
        c.nout = 2;
        invoke("GRU", &c);
        expect_close("GRU Y", c.out[0].data, wy, S * D * B * H, 1e-5, 1e-5);
        expect_close("GRU Y_h", c.out[1].data, wh, D * B * H, 1e-5, 1e-5);
        free_outs(&c);
        free(x);
        free(w);
        free(r);
        free(b);
}

START_TEST(test_gru_sequence)
{
        gru_case(0);
        gru_case(1);
}
END_TEST

START_TEST(test_rnn_layout)
{
        enum { S = 3, B = 2, I = 2, H = 2 };
        static const int64_t xd[] = { B, S, I }, wd[] = { 1, H, I }, rd[] = { 1, H, H };
        static const char *const acts[] = { "LeakyRelu" };
        static const float alpha[] = { 0.5f };
        float *x = rand_f32(S * B * I), *w = rand_f32(H * I), *r = rand_f32(H * H);
        double wy[B * S * H], h[B][H];
        struct ops_call c;
        struct ops_attr *a;
        int64_t n, t, j, k;

        memset(h, 0, sizeof(h));
        for (t = 0; t < S; t++)
                for (n = 0; n < B; n++) {
                        double nh[H];

                        for (j = 0; j < H; j++) {
                                double g = 0;

                                for (k = 0; k < I; k++)
                                        g += (double)x[(n * S + t) * I + k] * w[j * I + k];
                                for (k = 0; k < H; k++)
                                        g += h[n][k] * r[j * H + k];
                                nh[j] = g >= 0 ? g : 0.5 * g;
                        }
                        for (j = 0; j < H; j++) {
                                h[n][j] = nh[j];
                                wy[(n * S + t) * H + j] = nh[j];
                        }
                }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, x, 3, xd);
        set_in(&c, 1, F32, w, 3, wd);
        set_in(&c, 2, F32, r, 3, rd);
        a_int(&c, "hidden_size", H);
        a_int(&c, "layout", 1);
        a_strs(&c, "activations", 1, acts);
        a = new_attr(&c, "activation_alpha", OPS_ATTR_FLOATS);
        a->n = 1;
        a->floats = alpha;
        invoke("RNN", &c);
        expect_shape(&c.out[0], 4, (const int64_t[]){ B, S, 1, H });
        expect_close("RNN Y", c.out[0].data, wy, B * S * H, 1e-5, 1e-5);
        free_outs(&c);
        free(x);
        free(w);
        free(r);
}
END_TEST

/* ---------------------------------------------------------------- Einsum, Det, NMS */

START_TEST(test_einsum)
{
        static const int64_t ad[] = { 2, 3, 4 }, bd[] = { 2, 4, 5 }, sq[] = { 3, 3 };
        double a[24], b[40], m[9], want[30], tr;
        struct ops_call c;
        int64_t p, i, j, k;

        for (i = 0; i < 24; i++)
                a[i] = unit();
        for (i = 0; i < 40; i++)
                b[i] = unit();
        for (i = 0; i < 9; i++)
                m[i] = unit();
        /* batched matmul, output transposed */
        for (p = 0; p < 2; p++)
                for (i = 0; i < 3; i++)
                        for (j = 0; j < 5; j++) {
                                double s = 0;

                                for (k = 0; k < 4; k++)
                                        s += a[(p * 3 + i) * 4 + k] * b[(p * 4 + k) * 5 + j];
                                want[(p * 5 + j) * 3 + i] = s;
                        }
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F64, a, 3, ad);
        set_in(&c, 1, F64, b, 3, bd);
        a_str(&c, "equation", "bij, bjk -> bki");
        invoke("Einsum", &c);
        expect_shape(&c.out[0], 3, (const int64_t[]){ 2, 5, 3 });
        for (i = 0; i < 30; i++)
                ck_assert_double_eq_tol(((double *)c.out[0].data)[i], want[i], 1e-12);
        free_outs(&c);
        /* trace through the diagonal, implicit output */
        tr = m[0] + m[4] + m[8];
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F64, m, 2, sq);
        a_str(&c, "equation", "ii");
        invoke("Einsum", &c);
        ck_assert_int_eq(c.out[0].ndim, 0);
        ck_assert_double_eq_tol(*(double *)c.out[0].data, tr, 1e-12);
        free_outs(&c);
        /* broadcast dims and a sum over a label of one operand */
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F64, a, 3, ad);
        a_str(&c, "equation", "...j->...");
        invoke("Einsum", &c);
        expect_shape(&c.out[0], 2, (const int64_t[]){ 2, 3 });
        for (i = 0; i < 6; i++)
                ck_assert_double_eq_tol(((double *)c.out[0].data)[i],
                                        a[i * 4] + a[i * 4 + 1] + a[i * 4 + 2] + a[i * 4 + 3], 1e-12);
        free_outs(&c);
        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F64, a, 3, ad);
        a_str(&c, "equation", "ij->i");
        expect_reject("Einsum", &c, "does not fit rank 3");
}
END_TEST

START_TEST(test_det)
{
        static const int64_t d[] = { 2, 3, 3 };
        float m[18] = { 2, 0, 1, 1, 3, 2, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 5 };
        double want[2] = { 2 * (3 - 2) - 0 + 1 * (1 - 3), -5 };
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, m, 3, d);
        invoke("Det", &c);
        expect_shape(&c.out[0], 1, (const int64_t[]){ 2 });
        expect_close("Det", c.out[0].data, want, 2, 1e-6, 1e-6);
        free_outs(&c);
}
END_TEST

START_TEST(test_nms)
{
        static const int64_t bd[] = { 1, 4, 4 }, sd[] = { 1, 1, 4 };
        /* two overlapping boxes, one apart, one overlapping the first a little */
        float boxes[16] = { 0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11, 0, 0.8f, 1, 1.8f };
        float scores[4] = { 0.9f, 0.95f, 0.5f, 0.3f }, iou = 0.5f, thr = 0.4f;
        int64_t maxout = 3;
        static const int64_t want[] = { 0, 0, 1, 0, 0, 2 };
        struct ops_call c;
        int i;

        memset(&c, 0, sizeof(c));
        set_in(&c, 0, F32, boxes, 3, bd);
        set_in(&c, 1, F32, scores, 3, sd);
        set_in(&c, 2, I64, &maxout, 1, (const int64_t[]){ 1 });
        set_in(&c, 3, F32, &iou, 1, (const int64_t[]){ 1 });
        set_in(&c, 4, F32, &thr, 1, (const int64_t[]){ 1 });
        invoke("NonMaxSuppression", &c);
        expect_shape(&c.out[0], 2, (const int64_t[]){ 2, 3 });
        for (i = 0; i < 6; i++)
                ck_assert_int_eq(((int64_t *)c.out[0].data)[i], want[i]);
        free_outs(&c);
}
END_TEST

static Suite *nn_suite(void)
{
        Suite *s = suite_create("ops_nn");
        TCase *tc;

        tc = tcase_create("registry");
        tcase_add_test(tc, test_registry_nn);
        suite_add_tcase(s, tc);

        tc = tcase_create("gemm");
        tcase_add_test(tc, test_matmul_infer);
        tcase_add_test(tc, test_matmul_f64);
        tcase_add_test(tc, test_gemm);
        tcase_add_test(tc, test_gemm_reject);
        suite_add_tcase(s, tc);

        tc = tcase_create("conv");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_conv_2d);
        tcase_add_test(tc, test_conv_1d_3d);
        tcase_add_test(tc, test_conv_auto_pad);
        tcase_add_test(tc, test_conv_known);
        tcase_add_test(tc, test_conv_f16);
        tcase_add_test(tc, test_conv_f64);
        tcase_add_test(tc, test_conv_reject);
        tcase_add_test(tc, test_conv_check_and_cost);
        tcase_add_test(tc, test_conv_transpose);
        tcase_add_test(tc, test_conv_integer);
        suite_add_tcase(s, tc);

        tc = tcase_create("pool");
        tcase_add_test(tc, test_pools);
        tcase_add_test(tc, test_global_and_lp_pools);
        tcase_add_test(tc, test_maxpool_int8_and_unpool);
        suite_add_tcase(s, tc);

        tc = tcase_create("norm");
        tcase_add_test(tc, test_batch_norm);
        tcase_add_test(tc, test_layer_norm);
        tcase_add_test(tc, test_instance_norm_lrn_mvn_lpnorm);
        suite_add_tcase(s, tc);

        tc = tcase_create("loss");
        tcase_add_test(tc, test_losses);
        suite_add_tcase(s, tc);

        tc = tcase_create("quant");
        tcase_add_test(tc, test_quantize);
        tcase_add_test(tc, test_dynamic_quantize);
        tcase_add_test(tc, test_matmul_integer);
        tcase_add_test(tc, test_qlinear_matmul);
        suite_add_tcase(s, tc);

        tc = tcase_create("rnn");
        tcase_add_test(tc, test_lstm_step);
        tcase_add_test(tc, test_gru_sequence);
        tcase_add_test(tc, test_rnn_layout);
        suite_add_tcase(s, tc);

        tc = tcase_create("misc");
        tcase_add_test(tc, test_einsum);
        tcase_add_test(tc, test_det);
        tcase_add_test(tc, test_nms);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(nn_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

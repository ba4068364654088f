/* Float64 accumulation of a graph's products (npu_graph_load_with, npu_load_options_t's
 * accumulate, graph_load's "accumulate", session protocol 6) through the real npud and
 * libnpu, on models built here with tests/onnx-build.h and references computed here in
 * (compensated) double:
 * - a MatMul of K = 4096 whose exact results cancel to about 1e-5 against partial sums of
 *   about 170: loaded with float64 accumulation it is within float32 rounding of the exact
 *   sum of its float32 products, loaded with the default float32 accumulation it is off by
 *   more than 1e-6 (the data discriminate);
 * - a Conv with bias, and a MatMul + Add + Relu that the compiler fuses into one FusedGemm
 *   with an epilogue, are as exact when loaded with float64 accumulation (and their float32
 *   loads are not, again proving the bounds discriminate);
 * - the Conv loaded with mixed accumulation is within the mixed bound of the exact sums, not
 *   float64's results, and on an AVX-512 CPU those of its runs (im2col order, float32 runs of
 *   32, four runs in float32, the rest and the bias in float64) bit for bit;
 * - graph_info and graph_load's reply say "accumulate":"float64" / "float32", and
 *   compile.tuned names the MatMul / Conv / fused nodes of a float64 graph with variant
 *   "float64" (and no node of a float32 graph);
 * - a raw graph_load whose "accumulate" is not "float32" or "float64" (another string, an
 *   integer, null, another case, an array) is refused as invalid naming 'accumulate', and
 *   the session goes on;
 * - libnpu refuses options of a size short of npu_load_options_t's first layout and unknown
 *   accumulate values (NPU_ERR_INVALID) without a round trip to npud, and float64
 *   accumulation on a session of protocol 5 (a stand-in npud answering hello with version 5)
 *   with NPU_ERR_VERSION without sending anything, while a float32 load there goes out
 *   without the parameter. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <onnx.pb-c.h>

#include "proto/frame.h"
#include "harness.h"
#include "npu.h"

#include "tests/onnx-build.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx;

static void setup(void)
{
        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0);
        ck_assert_int_eq(npu_connect(daemon_proc.sock, &ctx), NPU_OK);
}

static void teardown(void)
{
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())
#define FAILS(expr, st) \
        ck_assert_msg((expr) == (st), "%s: expected %s, got: %s", #expr, npu_strerror(st), npu_error_message())

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static const npu_load_options_t acc64 = { .size = sizeof(npu_load_options_t),
                                          .accumulate = NPU_ACCUMULATE_FLOAT64 };
static const npu_load_options_t accmx = { .size = sizeof(npu_load_options_t),
                                          .accumulate = NPU_ACCUMULATE_MIXED };

/* ---- data and references ---- */

static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
        rng_state = seed;
}

/* splitmix64: the same numbers on every machine */
static uint64_t rng_next(void)
{
        uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

/* A float uniform in [-scale, scale). */
static float urand(float scale)
{
        return (float)(((double)(rng_next() >> 11) * 0x1p-53 * 2.0 - 1.0) * scale);
}

static float *fill(size_t n, float scale)
{
        float *v = malloc(n * sizeof(float));

        ck_assert_ptr_nonnull(v);
        for (size_t i = 0; i < n; i++)
                v[i] = urand(scale);
        return v;
}

/* Neumaier's compensated sum: the products of two floats are exact in double, and their
 * sum comes out within about a double ulp of the exact one, whatever the cancellation. abs
 * is the sum of the terms' magnitudes, for the bound of a float64 accumulation. */
struct acc {
        double s, c, abs;
};

static void acc_add(struct acc *a, double v)
{
        double t = a->s + v;

        if (fabs(a->s) >= fabs(v))
                a->c += (a->s - t) + v;
        else
                a->c += (v - t) + a->s;
        a->s = t;
        a->abs += fabs(v);
}

static double acc_sum(const struct acc *a)
{
        return a->s + a->c;
}

/* The rounding unit of float32 and of float64. */
#define U32 0x1p-24
#define U64 0x1p-53

/* The graphs of these tests: float32 products of float32 operands whose terms, summed in
 * float64 in any order, are within K * U64 * sum|terms| of the exact sum; one rounding to
 * float32 adds U32 * |result|. What float64 accumulation must meet, with room for a second
 * rounding (an output written through a float32 intermediate): */
static double bound64(double ref, const struct acc *a, int k)
{
        return 2 * U32 * fabs(ref) + k * U64 * a->abs + 1e-30;
}

/* ---- models ---- */

/* Y [m, n] = X [m, k] W [k, n], W an initializer; the node named "mm". */
static uint8_t *matmul_model(int m, int k, int n, float *w, size_t *ret_len)
{
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *mm = node("MatMul", 2, (const char *const[]){ "X", "W" }, 1, (const char *const[]){ "Y" });

        mm->name = (char *)"mm";
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, mm);
        g->n_initializer = 1;
        g->initializer = (Onnx__TensorProto **)list(1, finit_data("W", 2, (const int64_t[]){ k, n }, w));
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("X", FLOAT, 2, (const int64_t[]){ m, k }));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", FLOAT, 2, (const int64_t[]){ m, n }));
        return model_pack(g, 13, ret_len);
}

/* Y [m, n] = X [m, k] W [k, n], both graph inputs of fixed shapes (no weights to send). */
static uint8_t *matmul_inputs_model(int m, int k, int n, size_t *ret_len)
{
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *mm = node("MatMul", 2, (const char *const[]){ "X", "W" }, 1, (const char *const[]){ "Y" });

        mm->name = (char *)"mm";
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, mm);
        g->n_input = 2;
        g->input = (Onnx__ValueInfoProto **)list(2, tvalue("X", FLOAT, 2, (const int64_t[]){ m, k }),
                                                 tvalue("W", FLOAT, 2, (const int64_t[]){ k, n }));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", FLOAT, 2, (const int64_t[]){ m, n }));
        return model_pack(g, 13, ret_len);
}

/* Y [m, n] = Relu(X [m, k] W [k, n] + B [n]): what the epilogue pass fuses. */
static uint8_t *gemm_relu_model(int m, int k, int n, float *w, float *b, size_t *ret_len)
{
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *mm = node("MatMul", 2, (const char *const[]){ "X", "W" }, 1, (const char *const[]){ "P" });
        Onnx__NodeProto *add = node("Add", 2, (const char *const[]){ "P", "B" }, 1, (const char *const[]){ "S" });
        Onnx__NodeProto *relu = node("Relu", 1, (const char *const[]){ "S" }, 1, (const char *const[]){ "Y" });

        mm->name = (char *)"mm";
        add->name = (char *)"bias";
        relu->name = (char *)"relu";
        g->n_node = 3;
        g->node = (Onnx__NodeProto **)list(3, mm, add, relu);
        g->n_initializer = 2;
        g->initializer = (Onnx__TensorProto **)list(2, finit_data("W", 2, (const int64_t[]){ k, n }, w),
                                                    finit_data("B", 1, (const int64_t[]){ n }, b));
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("X", FLOAT, 2, (const int64_t[]){ m, k }));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", FLOAT, 2, (const int64_t[]){ m, n }));
        return model_pack(g, 13, ret_len);
}

/* The Conv of these tests: X [1, CI, H, W], filters [CO, CI, 3, 3], pads 1, bias [CO]. */
enum { CI = 8, CO = 16, H = 12, WD = 12, KS = 3 };

static uint8_t *conv_model(float *w, float *b, size_t *ret_len)
{
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *cv = node("Conv", 3, (const char *const[]){ "X", "W", "B" }, 1, (const char *const[]){ "Y" });

        cv->name = (char *)"conv";
        attr_ints(cv, "kernel_shape", 2, (const int64_t[]){ KS, KS });
        attr_ints(cv, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, cv);
        g->n_initializer = 2;
        g->initializer = (Onnx__TensorProto **)list(2, finit_data("W", 4, (const int64_t[]){ CO, CI, KS, KS }, w),
                                                    finit_data("B", 1, (const int64_t[]){ CO }, b));
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("X", FLOAT, 4, (const int64_t[]){ 1, CI, H, WD }));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", FLOAT, 4, (const int64_t[]){ 1, CO, H, WD }));
        return model_pack(g, 13, ret_len);
}

/* Conv (X [1, ci, h, h], filters [co, ci, 3, 3], pads 1, bias) into BatchNormalization
 * (scale, beta, mean, var; epsilon EPS), then Relu when relu: the compiler folds the
 * BatchNormalization into the Conv (and the Relu into a FusedGemm's epilogue). */
#define EPS 1e-5f
/* Y = Conv(X) + BatchNormalization (+ R, an initializer of Y's shape, where resid is not
 * NULL) (+ Relu) */
static uint8_t *conv_bn_resid_model(int ci, int co, int h, int relu, float *w, float *b, float *bn[4], float *resid,
                                    size_t *ret_len)
{
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *cv = node("Conv", 3, (const char *const[]){ "X", "W", "B" }, 1, (const char *const[]){ "C" });
        const char *bn_out = resid ? "S" : relu ? "N" : "Y";
        Onnx__NodeProto *bnn = node("BatchNormalization", 5,
                                    (const char *const[]){ "C", "scale", "beta", "mean", "var" }, 1,
                                    (const char *const[]){ bn_out });
        Onnx__NodeProto *ad = node("Add", 2, (const char *const[]){ "S", "R" }, 1,
                                   (const char *const[]){ relu ? "N" : "Y" });
        Onnx__NodeProto *rl = node("Relu", 1, (const char *const[]){ "N" }, 1, (const char *const[]){ "Y" });
        static const char *const names[4] = { "scale", "beta", "mean", "var" };

        cv->name = (char *)"conv";
        bnn->name = (char *)"bn";
        ad->name = (char *)"residual";
        rl->name = (char *)"relu";
        attr_ints(cv, "kernel_shape", 2, (const int64_t[]){ KS, KS });
        attr_ints(cv, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        attr_f(bnn, "epsilon", EPS);
        g->n_node = 2 + (resid != NULL) + (relu != 0);
        g->node = resid ? (Onnx__NodeProto **)list(4, cv, bnn, ad, rl) : (Onnx__NodeProto **)list(3, cv, bnn, rl);
        g->n_initializer = resid ? 7 : 6;
        g->initializer = (Onnx__TensorProto **)list(7, finit_data("W", 4, (const int64_t[]){ co, ci, KS, KS }, w),
                                                    finit_data("B", 1, (const int64_t[]){ co }, b),
                                                    finit_data(names[0], 1, (const int64_t[]){ co }, bn[0]),
                                                    finit_data(names[1], 1, (const int64_t[]){ co }, bn[1]),
                                                    finit_data(names[2], 1, (const int64_t[]){ co }, bn[2]),
                                                    finit_data(names[3], 1, (const int64_t[]){ co }, bn[3]),
                                                    resid ? finit_data("R", 4, (const int64_t[]){ 1, co, h, h }, resid)
                                                          : NULL);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("X", FLOAT, 4, (const int64_t[]){ 1, ci, h, h }));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", FLOAT, 4, (const int64_t[]){ 1, co, h, h }));
        return model_pack(g, 15, ret_len);
}

static uint8_t *conv_bn_model(int ci, int co, int h, int relu, float *w, float *b, float *bn[4], size_t *ret_len)
{
        return conv_bn_resid_model(ci, co, h, relu, w, b, bn, NULL, ret_len);
}

/* npu_graph_load_with (opts NULL: npu_graph_load) of a model; frees the bytes. */
static npu_graph_t load(uint8_t *bytes, size_t len, const npu_load_options_t *opts)
{
        npu_graph_t g;

        if (opts)
                OK(npu_graph_load_with(ctx, 0, bytes, len, opts, &g));
        else
                OK(npu_graph_load(ctx, 0, bytes, len, &g));
        free(bytes);
        return g;
}

/* One run of a graph of one float32 input and one float32 output through device buffers. */
static void run(npu_graph_t g, const float *x, int xnd, const int64_t *xdims, float *y, int ynd,
                const int64_t *ydims)
{
        npu_tensor_t in = { .dtype = NPU_FLOAT32, .ndim = xnd }, out = { .dtype = NPU_FLOAT32, .ndim = ynd };
        uint64_t xn = 1, yn = 1;
        npu_stream_t s;

        for (int i = 0; i < xnd; i++)
                xn *= (uint64_t)(in.dims[i] = xdims[i]);
        for (int i = 0; i < ynd; i++)
                yn *= (uint64_t)(out.dims[i] = ydims[i]);
        OK(npu_malloc(ctx, 0, xn * sizeof(float), &in.buf));
        OK(npu_malloc(ctx, 0, yn * sizeof(float), &out.buf));
        OK(npu_memcpy_to_device(ctx, in.buf, 0, x, xn * sizeof(float)));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_graph_run(ctx, s, g, &in, 1, &out, 1, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, y, out.buf, 0, yn * sizeof(float)));
        OK(npu_stream_destroy(ctx, s));
        OK(npu_free(ctx, in.buf));
        OK(npu_free(ctx, out.buf));
}

/* npu_graph_info as JSON. */
static json_t *info(npu_graph_t g)
{
        char *text;
        json_t *j;

        OK(npu_graph_info(ctx, g, &text));
        j = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(j);
        return j;
}

static const char *accumulate_of(json_t *j)
{
        const char *v = json_string_value(json_object_get(j, "accumulate"));

        return v ? v : "(none)";
}

/* Entries of compile.tuned (a graph_info or graph_load result) whose op is op (NULL: any)
 * and whose variant is variant (want 1) or is not (want 0). */
static int tuned_count(json_t *j, const char *op, const char *variant, int want)
{
        json_t *tuned = json_object_get(json_object_get(j, "compile"), "tuned"), *e;
        size_t i;
        int n = 0;

        ck_assert_msg(json_is_array(tuned), "no compile.tuned");
        json_array_foreach(tuned, i, e) {
                const char *o = json_string_value(json_object_get(e, "op"));
                const char *v = json_string_value(json_object_get(e, "variant"));
                if ((!op || (o && strcmp(o, op) == 0)) && (v && (strcmp(v, variant) == 0) == want))
                        n++;
        }
        return n;
}

/* ---- accuracy ---- */

/* The cancelling MatMul: X one row of K values in [-1, 1] (the last 0.75), W [K, N] in
 * [-WS, WS] but for its last row, chosen per column to cancel the sum of the others; rounded
 * to float32, that row leaves exact results of about WS * 1e-6 against partial sums of
 * about WS * 20. */
enum { MK = 4096, MN = 64, WS = 8 };

static void cancelling(const float *x, float *w, int k, int n)
{
        for (int j = 0; j < n; j++) {
                struct acc a = { 0 };
                for (int i = 0; i < k - 1; i++)
                        acc_add(&a, (double)x[i] * (double)w[(size_t)i * (size_t)n + (size_t)j]);
                w[(size_t)(k - 1) * (size_t)n + (size_t)j] = (float)(-acc_sum(&a) / (double)x[k - 1]);
        }
}

START_TEST(test_matmul_cancellation)
{
        float *x, *w, y32[MN], y64[MN], ymx[MN];
        double ref[MN], err32 = 0, err64 = 0, errmx = 0, worst = 0;
        struct acc a[MN];
        size_t len;
        uint8_t *bytes;

        rng_seed(1);
        x = fill(MK, 1.0f);
        x[MK - 1] = 0.75f;
        w = fill((size_t)MK * MN, WS);
        cancelling(x, w, MK, MN);
        for (int j = 0; j < MN; j++) {
                memset(&a[j], 0, sizeof(a[j]));
                for (int i = 0; i < MK; i++)
                        acc_add(&a[j], (double)x[i] * (double)w[(size_t)i * MN + (size_t)j]);
                ref[j] = acc_sum(&a[j]);
        }
        bytes = matmul_model(1, MK, MN, w, &len);
        npu_graph_t g32 = load(bytes, len, NULL);
        bytes = matmul_model(1, MK, MN, w, &len);
        npu_graph_t g64 = load(bytes, len, &acc64);
        bytes = matmul_model(1, MK, MN, w, &len);
        npu_graph_t gmx = load(bytes, len, &accmx);

        run(g32, x, 2, (const int64_t[]){ 1, MK }, y32, 2, (const int64_t[]){ 1, MN });
        run(g64, x, 2, (const int64_t[]){ 1, MK }, y64, 2, (const int64_t[]){ 1, MN });
        run(gmx, x, 2, (const int64_t[]){ 1, MK }, ymx, 2, (const int64_t[]){ 1, MN });
        for (int j = 0; j < MN; j++) {
                double e32 = fabs((double)y32[j] - ref[j]), e64 = fabs((double)y64[j] - ref[j]);
                err32 = fmax(err32, e32);
                err64 = fmax(err64, e64);
                errmx = fmax(errmx, fabs((double)ymx[j] - ref[j]));
                worst = fmax(worst, e64 / bound64(ref[j], &a[j], MK));
                ck_assert_msg(fabs(ref[j]) < WS * 1e-5, "column %d does not cancel: %g", j, ref[j]);
        }
        /* The exact results are about 1e-5: float64 accumulation gets them to within float32
         * rounding (about 1e-12), float32 accumulation is off by 1e-4 or more (1.4e-4 to
         * 5e-4 with the float32 variants of this npud: a hundred times the 1e-6 asserted). */
        ck_assert_msg(err64 < 1e-9, "float64 accumulation: max error %g", err64);
        ck_assert_msg(worst <= 1.0, "float64 accumulation: an error %g times its bound", worst);
        ck_assert_msg(err32 > 1e-6, "float32 accumulation: max error only %g (the data do not discriminate)",
                      err32);
        /* Mixed accumulation sums 128 runs of 32 terms (32 quads of four): each run's
         * float32 error is that of a 32-term sum (its quad adds two roundings of sums no
         * larger than its terms), and they add up like a random walk, several times less
         * than the float32 sum's (measured when runs were added one by one: 4.8e-5 against
         * 2.5e-4 for this npud's float32 variant; 1.4e-4 to 5e-4 with the others). A float32
         * sum over all K stays above 1e-4. */
        ck_assert_msg(errmx < 1e-4 && errmx < err32 / 2, "mixed accumulation: max error %g, float32's %g", errmx,
                      err32);
        ck_assert_msg(errmx > err64, "mixed accumulation: max error %g, float64's %g", errmx, err64);
        OK(npu_graph_unload(ctx, g32));
        OK(npu_graph_unload(ctx, g64));
        OK(npu_graph_unload(ctx, gmx));
        free(x);
        free(w);
}
END_TEST

/* Output (m, oy, ox) of a 3x3 convolution with pads 1 (x [ci, h, wd], w [co, ci, 3, 3]) as
 * a mixed graph sums it: its terms in the im2col's order (channel, then the kernel's row and
 * column; a tap in the padding is a zero term) in float32 runs of 32 by fused multiply-adds,
 * four runs in float32 as (r0 + r1) + (r2 + r3), the rest in float64, no bias. e (when not
 * NULL) gets every term, for the exact sum. */
static double mixed_runs(const float *x, const float *w, int ci, int h, int wd, int m, int oy, int ox,
                         struct acc *e)
{
        const int terms = ci * KS * KS;
        double s = 0.0;

        for (int q0 = 0; q0 < terms; q0 += 4 * 32) {
                float r[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
                for (int t = q0; t < terms && t < q0 + 4 * 32; t++) {
                        int c = t / (KS * KS), ky = t / KS % KS, kx = t % KS;
                        int iy = oy + ky - 1, ix = ox + kx - 1;
                        float xv = iy < 0 || iy >= h || ix < 0 || ix >= wd ? 0.0f : x[(c * h + iy) * wd + ix];
                        float wv = w[(m * ci + c) * KS * KS + ky * KS + kx];
                        r[(t - q0) / 32] = fmaf(xv, wv, r[(t - q0) / 32]);
                        if (e)
                                acc_add(e, (double)xv * (double)wv);
                }
                s += (double)((r[0] + r[1]) + (r[2] + r[3]));
        }
        return s;
}

/* Whether a mixed convolution sums output v again in float64 (ops_mixed_cancels in
 * ops/gemm-mixed.c, on the paths these tests take where the CPU has AVX-512): its stored
 * value v (the runs' sum with the bias or BatchNormalization applied, rounded) is 2^10
 * below |against| (that bias or shift), or v + r (the residual, r not NULL) 2^10 below |r|.
 * The output is then the exact value rounded once. */
static int cancels(float v, double against, const float *r)
{
        return fabsf(v) * 1024.0f < (float)fabs(against) || (r && fabsf(v + *r) * 1024.0f < fabsf(*r));
}

/* y is the exact value v rounded once, then Relu (relu), within a unit in the last place
 * and slack (float64's error over the terms: where the output cancels, the float64
 * roundings of terms near 1 are of the size of the output's own unit) */
static int exact_once(float y, double v, int relu, double slack)
{
        double want = relu && v < 0 ? 0.0 : v;

        return fabs((double)y - want) <= 0x1p-23 * fabs(want) + slack + 1e-30;
}

/* Elements of y off ref by more than the float64 bound; *ret_worst the largest error in
 * units of it. */
static int beyond(const float *y, const double *ref, const struct acc *a, int n, int k, double *ret_worst)
{
        int bad = 0;

        *ret_worst = 0;
        for (int i = 0; i < n; i++) {
                double r = fabs((double)y[i] - ref[i]) / bound64(ref[i], &a[i], k);
                *ret_worst = fmax(*ret_worst, r);
                bad += r > 1.0;
        }
        return bad;
}

START_TEST(test_conv_float64)
{
        enum { NX = CI * H * WD, NW = CO * CI * KS * KS, NY = CO * H * WD, TERMS = CI * KS * KS };
        float *x, *w, *b, *y32 = malloc(NY * sizeof(float)), *y64 = malloc(NY * sizeof(float));
        double *ref = malloc(NY * sizeof(double)), worst64, worst32;
        struct acc *a = calloc(NY, sizeof(*a));
        size_t len;

        ck_assert(y32 && y64 && ref && a);
        rng_seed(2);
        x = fill(NX, 1.0f);
        w = fill(NW, 1.0f);
        b = fill(CO, 1.0f);
        for (int m = 0; m < CO; m++)
                for (int oy = 0; oy < H; oy++)
                        for (int ox = 0; ox < WD; ox++) {
                                struct acc *e = &a[(m * H + oy) * WD + ox];
                                acc_add(e, b[m]);
                                for (int c = 0; c < CI; c++)
                                        for (int ky = 0; ky < KS; ky++)
                                                for (int kx = 0; kx < KS; kx++) {
                                                        int iy = oy + ky - 1, ix = ox + kx - 1;
                                                        if (iy < 0 || iy >= H || ix < 0 || ix >= WD)
                                                                continue;
                                                        acc_add(e, (double)x[(c * H + iy) * WD + ix] *
                                                                           (double)w[((m * CI + c) * KS + ky) * KS + kx]);
                                                }
                                ref[(m * H + oy) * WD + ox] = acc_sum(e);
                        }
        uint8_t *bytes = conv_model(w, b, &len);
        npu_graph_t g64 = load(bytes, len, &acc64);
        bytes = conv_model(w, b, &len);
        npu_graph_t g32 = load(bytes, len, NULL);
        bytes = conv_model(w, b, &len);
        npu_graph_t gmx = load(bytes, len, &accmx);
        run(g64, x, 4, (const int64_t[]){ 1, CI, H, WD }, y64, 4, (const int64_t[]){ 1, CO, H, WD });
        /* a mixed graph's convolution sums its products in the im2col's order (channel,
         * then the kernel's row and column; a tap in the padding is a zero term) in float32
         * runs of 32, four runs in float32, the rest and the bias in float64: within the
         * mixed bound of the exact sums, and where the CPU has AVX-512 (its kernel) those
         * very sums bit for bit */
        run(gmx, x, 4, (const int64_t[]){ 1, CI, H, WD }, y32, 4, (const int64_t[]){ 1, CO, H, WD });
        int exact = __builtin_cpu_supports("avx512f"), bits = 0, again = 0;
        for (int i = 0; i < NY; i++) {
                int m = i / (H * WD), oy = i / WD % H, ox = i % WD;
                float want = (float)(mixed_runs(x, w, CI, H, WD, m, oy, ox, NULL) + (double)b[m]);
                /* an output that cancels against its bias: the exact one */
                if (exact && cancels(want, b[m], NULL)) {
                        again++;
                        bits += exact_once(y32[i], ref[i], 0, 0x1p-46 * a[i].abs);
                } else {
                        bits += y32[i] == want;
                }
                ck_assert_msg(fabs((double)y32[i] - ref[i]) <= 2 * U32 * fabs(ref[i]) + 34 * U32 * a[i].abs + 1e-30,
                              "mixed Conv: element %d is %.9g, the exact value %.17g", i, y32[i], ref[i]);
        }
        ck_assert_msg(!exact || bits == NY, "mixed Conv: %d of %d elements are the runs' sums (%d summed again)", bits,
                      NY, again);
        ck_assert_msg(memcmp(y32, y64, NY * sizeof(float)) != 0, "mixed Conv: float64's results");
        run(g32, x, 4, (const int64_t[]){ 1, CI, H, WD }, y32, 4, (const int64_t[]){ 1, CO, H, WD });
        OK(npu_graph_unload(ctx, gmx));
        /* within 2^-22 |ref| + 1e-12 of the exact convolution + bias */
        for (int i = 0; i < NY; i++)
                ck_assert_msg(fabs((double)y64[i] - ref[i]) <= 0x1p-22 * fabs(ref[i]) + 1e-12,
                              "float64 Conv: element %d is %.9g, the exact value %.17g", i, y64[i], ref[i]);
        ck_assert_msg(beyond(y64, ref, a, NY, TERMS + 1, &worst64) == 0, "float64 Conv: an error %g times its bound",
                      worst64);
        /* the float32 load misses that bound: the test tells them apart */
        int bad32 = beyond(y32, ref, a, NY, TERMS + 1, &worst32);
        ck_assert_msg(bad32 > 0, "float32 Conv within the float64 bound everywhere (worst %g)", worst32);
        OK(npu_graph_unload(ctx, g32));
        OK(npu_graph_unload(ctx, g64));
        free(x);
        free(w);
        free(b);
        free(y32);
        free(y64);
        free(ref);
        free(a);
}
END_TEST

/* Conv + BatchNormalization (+ Relu), the BatchNormalization folded into the Conv by the
 * compiler. Loaded with float64 accumulation, the fold keeps the model's filters and each
 * channel's factor and shift in float64 (graph_bn_affine): every element is the exact
 * convolution + bias, through the BatchNormalization in double, rounded once to float32.
 * Loaded with mixed accumulation, on an AVX-512 CPU, every element is fma(the runs' sum on
 * the model's filters, factor, shift) rounded once, bit for bit. The float32 load, on the
 * folded filters rounded to float32, is not exact everywhere (the test tells them apart).
 * Three shapes: a small Conv, which runs whole; with Relu (a FusedGemm), one whose runs go in
 * parts of output channels and one in parts of output lines (graph_conv_acc_rows on each
 * part, the filters and factors of its channels). */
/* A Conv (3x3, pads 1, bias) + BatchNormalization case: input, filters, bias and the
 * BatchNormalization's four tensors drawn from seed; each channel's factor and shift in
 * float64; each output's mixed runs' sum on the model's filters (sum), the exact Conv +
 * BatchNormalization (ref) and the magnitudes its float64 terms sum to (mag). */
struct bn_case {
        int ci, co, h, ny;
        float *x, *w, *b, *bn[4];
        double *sc, *sh, *sum, *ref, *mag;
};

static void bn_case_init(struct bn_case *c, int ci, int co, int h, uint64_t seed)
{
        const int nx = ci * h * h, nw = co * ci * KS * KS, ny = co * h * h;

        *c = (struct bn_case){ .ci = ci, .co = co, .h = h, .ny = ny };
        c->sc = malloc(sizeof(double) * (size_t)co);
        c->sh = malloc(sizeof(double) * (size_t)co);
        c->sum = malloc(sizeof(double) * (size_t)ny);
        c->ref = malloc(sizeof(double) * (size_t)ny);
        c->mag = malloc(sizeof(double) * (size_t)ny);
        ck_assert(c->sc && c->sh && c->sum && c->ref && c->mag);
        rng_seed(seed);
        c->x = fill((size_t)nx, 1.0f);
        c->w = fill((size_t)nw, 1.0f);
        c->b = fill((size_t)co, 1.0f);
        for (int i = 0; i < 4; i++)
                c->bn[i] = fill((size_t)co, 0.5f);
        for (int m = 0; m < co; m++) {
                c->bn[0][m] += 1.0f; /* scale in [0.5, 1.5) */
                c->bn[3][m] += 1.0f; /* var too */
                c->sc[m] = (double)c->bn[0][m] / sqrt((double)c->bn[3][m] + (double)EPS);
                c->sh[m] = ((double)c->b[m] - (double)c->bn[2][m]) * c->sc[m] + (double)c->bn[1][m];
        }
        for (int i = 0; i < ny; i++) {
                int m = i / (h * h), oy = i / h % h, ox = i % h;
                struct acc e = { 0 };
                acc_add(&e, (double)c->b[m]);
                /* the mixed runs' sum, and the exact one */
                c->sum[i] = mixed_runs(c->x, c->w, ci, h, h, m, oy, ox, &e);
                c->ref[i] = (acc_sum(&e) - (double)c->bn[2][m]) * c->sc[m] + (double)c->bn[1][m];
                c->mag[i] = (e.abs + fabs((double)c->bn[2][m])) * c->sc[m] + fabs((double)c->bn[1][m]);
        }
}

static void bn_case_free(struct bn_case *c)
{
        free(c->x);
        free(c->w);
        free(c->b);
        for (int i = 0; i < 4; i++)
                free(c->bn[i]);
        free(c->sc);
        free(c->sh);
        free(c->sum);
        free(c->ref);
        free(c->mag);
}

START_TEST(test_conv_bn_exact)
{
        static const int shapes[3][3] = { { CI, CO, H }, { 32, 64, 40 }, { 16, 64, 56 } };
        const int ci = shapes[_i][0], co = shapes[_i][1], h = shapes[_i][2], relu = _i > 0, ny = co * h * h;
        float *y = malloc(sizeof(float) * (size_t)ny);
        int exact = __builtin_cpu_supports("avx512f");
        struct bn_case c;
        size_t len;

        ck_assert_ptr_nonnull(y);
        bn_case_init(&c, ci, co, h, 5);
        const double *sc = c.sc, *sh = c.sh, *sum = c.sum, *ref = c.ref, *mag = c.mag;
        static const npu_load_options_t *const opts[3] = { &acc64, &accmx, NULL };
        static const char *const names[3] = { "float64", "mixed", "float32" };
        for (int o = 0; o < 3; o++) {
                uint8_t *bytes = conv_bn_model(ci, co, h, relu, c.w, c.b, c.bn, &len);
                npu_graph_t g = load(bytes, len, opts[o]);
                json_t *j = info(g);
                ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "compile"), "bn_folded")), 1);
                /* kept in float64 under float64 and mixed accumulation */
                ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "compile"), "bn_exact")),
                                 o < 2);
                json_decref(j);
                for (int r = 0; r < 2; r++)
                        run(g, c.x, 4, (const int64_t[]){ 1, ci, h, h }, y, 4, (const int64_t[]){ 1, co, h, h });
                j = info(g);
                int parts = (int)json_integer_value(json_object_get(j, "parts_sent"));
                json_decref(j);
                OK(npu_graph_unload(ctx, g));
                int off = 0, refined = 0;
                for (int i = 0; i < ny; i++) {
                        int m = i / (h * h);
                        float want = o == 1 ? (float)fma(sum[i], sc[m], sh[m]) : (float)ref[i];
                        /* an output that cancels against its shift: the exact one */
                        if (o == 1 && exact && cancels(want, sh[m], NULL)) {
                                refined++;
                                ck_assert_msg(exact_once(y[i], ref[i], relu, 0x1p-46 * mag[i]),
                                              "mixed Conv + BatchNormalization: element %d is %.9g, the exact value "
                                              "%.9g",
                                              i, y[i], ref[i]);
                                continue;
                        }
                        if (relu && want < 0)
                                want = 0.0f;
                        if (o == 1 && !exact) { /* libxsmm's kernels: within the mixed bound */
                                ck_assert_msg(fabs((double)y[i] - (double)want) <= 0x1p-21 * fabs((double)want) + 1e-6,
                                              "mixed Conv + BatchNormalization: element %d is %.9g, want %.9g", i,
                                              y[i], want);
                                continue;
                        }
                        off += memcmp(&y[i], &want, sizeof(float)) != 0;
                        ck_assert_msg(o == 2 || off == 0, "%s Conv + BatchNormalization%s: element %d is %.9g, want %.9g",
                                      names[o], relu ? " + Relu" : "", i, y[i], want);
                }
                printf("Conv + BatchNormalization%s %dx%dx%d, %s: %d parts sent in 2 runs; %d of %d elements off the "
                       "exact result rounded once%s\n",
                       relu ? " + Relu" : "", ci, co, h, names[o], parts, off, ny,
                       o == 1 && refined ? " (those that cancel against their shift summed again)" : "");
                if (o == 2)
                        ck_assert_msg(off > 0, "float32 Conv + BatchNormalization exact everywhere");
        }
        free(y);
        bn_case_free(&c);
}
END_TEST

/* A residual that cancels the convolution: Conv + BatchNormalization + Add (+ Relu), the
 * residual R an initializer of the output's shape, fused into the convolution's store. R is
 * random, but minus the mixed runs' own result at some elements, so that the mixed sum's
 * error is all that is left of those outputs. Two shapes: 64 channels of lines of 56 in line
 * parts (the transposed kernel, the residual and Relu in its store), and 20 channels of
 * lines of 14 (the other kernel, the residual added after it). AVX-512 (the runs' bits).
 *   - Pass 0, every 211th element cancelled: every output that cancels (ops_mixed_cancels) is
 *     summed again in float64 and must be the exact value rounded once, where the runs'
 *     result plus R would have given 0; every other element is the runs' result plus R, bit
 *     for bit. Float64 accumulation gives every element exactly.
 *   - Pass 1, every element cancelled (what a hostile model can ask for): a store sums again
 *     at most its budget (ops_mixed_resum_budget: one output in 128, at least 16, of a chunk
 *     of a line by a block of channels or a channel's band of lines), the others keep the
 *     runs' result plus R; so each element is one of the two, and at most the budget's sum
 *     over the stores are the exact ones. */
START_TEST(test_conv_resid_cancel)
{
        static const int shapes[2][4] = { { 16, 64, 56, 1 }, { 8, 20, 14, 0 } };
        const int ci = shapes[_i][0], co = shapes[_i][1], h = shapes[_i][2], relu = shapes[_i][3], ny = co * h * h;
        /* the budget summed over the stores either kernel makes (lines by blocks of 64
         * channels, channels by bands of at most 16 lines) */
        const int most = ny / 128 + 16 * (h * ((co + 63) / 64) + co * ((h + 15) / 16));
        float *r, *y = malloc(sizeof(float) * (size_t)ny);
        struct bn_case c;
        size_t len;

        ck_assert_ptr_nonnull(y);
        if (!__builtin_cpu_supports("avx512f")) {
                printf("test_conv_resid_cancel: no AVX-512 (the mixed kernels' bits), skipped\n");
                free(y);
                return;
        }
        bn_case_init(&c, ci, co, h, 7);
        const double *sc = c.sc, *sh = c.sh, *sum = c.sum, *ref = c.ref;
        const float *rand_r = fill((size_t)ny, 1.0f);
        r = malloc(sizeof(float) * (size_t)ny);
        ck_assert_ptr_nonnull(r);
        for (int pass = 0; pass < 2; pass++) {
                const int every = pass ? 1 : 211;
                for (int i = 0; i < ny; i++)
                        r[i] = i % every ? rand_r[i] : -(float)fma(sum[i], sc[i / (h * h)], sh[i / (h * h)]);
                for (int o = 0; o < 2 - pass; o++) {
                        uint8_t *bytes = conv_bn_resid_model(ci, co, h, relu, c.w, c.b, c.bn, r, &len);
                        npu_graph_t g = load(bytes, len, o ? &acc64 : &accmx);
                        json_t *j = info(g);
                        /* one node: the residual (and Relu) fused into the Conv */
                        ck_assert_int_eq(
                                json_integer_value(json_object_get(json_object_get(j, "compile"), "nodes_after")), 1);
                        json_decref(j);
                        run(g, c.x, 4, (const int64_t[]){ 1, ci, h, h }, y, 4, (const int64_t[]){ 1, co, h, h });
                        OK(npu_graph_unload(ctx, g));
                        int again = 0, saved = 0;
                        for (int i = 0; i < ny; i++) {
                                int m = i / (h * h);
                                /* the exact convolution rounded once, then the residual in float32 (its
                                 * rounding may go either way where float64's error straddles a rounding
                                 * boundary: a unit of it) */
                                double exact = (double)((float)ref[i] + r[i]);
                                double slack = 0x1p-46 * (c.mag[i] + fabsf(r[i])) + 0x1p-23 * fabs(ref[i]);
                                float v = (float)fma(sum[i], sc[m], sh[m]), naive = v + r[i];
                                if (relu && naive < 0)
                                        naive = 0.0f;
                                int is_naive = memcmp(&y[i], &naive, sizeof(float)) == 0;
                                if (pass || o || cancels(v, sh[m], &r[i])) {
                                        again += !o;
                                        saved += !o && !is_naive;
                                        ck_assert_msg((pass && is_naive) || exact_once(y[i], exact, relu, slack),
                                                      "%s Conv + BatchNormalization + residual (pass %d): element %d "
                                                      "is %.9g, the exact value %.9g, the runs' %.9g",
                                                      o ? "float64" : "mixed", pass, i, y[i], exact, naive);
                                        continue;
                                }
                                ck_assert_msg(is_naive,
                                              "mixed Conv + BatchNormalization + residual: element %d is %.9g, want "
                                              "%.9g",
                                              i, y[i], naive);
                        }
                        if (o)
                                continue;
                        printf("Conv + BatchNormalization + residual%s %dx%dx%d, mixed, every %selement cancelled: "
                               "%d of %d outputs cancel; %d of them summed again to other bits than the runs'%s\n",
                               relu ? " + Relu" : "", ci, co, h, pass ? "" : "211th ", again, ny, saved,
                               pass ? " (the budget)" : "");
                        ck_assert_int_gt(saved, 0);
                        if (pass)
                                ck_assert_msg(saved <= most, "%d outputs summed again, the budget allows %d", saved,
                                              most);
                        else
                                ck_assert_int_ge(again, ny / 211);
                }
        }
        free(r);
        free((void *)rand_r);
        free(y);
        bn_case_free(&c);
}
END_TEST

/* MatMul + Add + Relu, fused into one node with a bias and Relu epilogue: row 0 of X cancels
 * as in test_matmul_cancellation, the other rows are random. The fused node may add the bias
 * before or after rounding the product: the bound allows a rounding of each. */
enum { GM = 4, GK = 1024, GN = 64 };

START_TEST(test_fused_epilogue_float64)
{
        float *x, *w, *b, y64[GM * GN], y32[GM * GN];
        double ref[GM * GN], tol[GM * GN], err32 = 0;
        struct acc a[GM * GN];
        size_t len;
        json_t *j;

        rng_seed(3);
        x = fill(GM * GK, 1.0f);
        x[GK - 1] = 0.75f;
        w = fill((size_t)GK * GN, 1.0f);
        b = fill(GN, 1.0f);
        cancelling(x, w, GK, GN);
        for (int r = 0; r < GM; r++)
                for (int c = 0; c < GN; c++) {
                        struct acc *e = &a[r * GN + c];
                        memset(e, 0, sizeof(*e));
                        for (int i = 0; i < GK; i++)
                                acc_add(e, (double)x[r * GK + i] * (double)w[i * GN + c]);
                        double p = acc_sum(e), s = p + (double)b[c]; /* rounds below 1e-16 */
                        ref[r * GN + c] = s > 0 ? s : 0;
                        /* the float64 bound of the sum, and a rounding of the product */
                        tol[r * GN + c] = bound64(s, e, GK) + U32 * fabs(p);
                }
        uint8_t *bytes = gemm_relu_model(GM, GK, GN, w, b, &len);
        npu_graph_t g64 = load(bytes, len, &acc64);
        bytes = gemm_relu_model(GM, GK, GN, w, b, &len);
        npu_graph_t g32 = load(bytes, len, NULL);

        /* one fused node: the MatMul with a bias and Relu epilogue */
        j = info(g64);
        json_t *epis = json_object_get(json_object_get(j, "compile"), "epilogues"), *ep = json_array_get(epis, 0);
        ck_assert_msg(json_array_size(epis) == 1, "epilogues: %zu", json_array_size(epis));
        ck_assert_str_eq(json_string_value(json_object_get(ep, "op")), "MatMul");
        ck_assert(json_is_true(json_object_get(ep, "bias")));
        ck_assert_str_eq(json_string_value(json_object_get(ep, "act")), "Relu");
        ck_assert_str_eq(accumulate_of(j), "float64");
        ck_assert_int_eq(tuned_count(j, "FusedGemm", "float64", 1), 1);
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 0), 0);
        json_decref(j);

        run(g64, x, 2, (const int64_t[]){ GM, GK }, y64, 2, (const int64_t[]){ GM, GN });
        run(g32, x, 2, (const int64_t[]){ GM, GK }, y32, 2, (const int64_t[]){ GM, GN });
        for (int i = 0; i < GM * GN; i++) {
                double e = fabs((double)y64[i] - ref[i]) / tol[i];
                ck_assert_msg(e <= 1.0, "float64 fused: element %d is %.9g, the exact value %.17g", i, y64[i],
                              ref[i]);
                if (i < GN) /* the cancelling row */
                        err32 = fmax(err32, fabs((double)y32[i] - ref[i]) / tol[i]);
        }
        ck_assert_msg(err32 > 1.0, "float32 fused within the float64 bound on the cancelling row (worst %g)",
                      err32);
        OK(npu_graph_unload(ctx, g32));
        OK(npu_graph_unload(ctx, g64));
        free(x);
        free(w);
        free(b);
}
END_TEST

/* ---- what graph_info says ---- */

START_TEST(test_info_reports_accumulation)
{
        enum { K = 256, N = 32 };
        float *w, *cw, *cb;
        size_t len;
        json_t *j;

        rng_seed(4);
        w = fill((size_t)K * N, 1.0f);
        cw = fill(CO * CI * KS * KS, 1.0f);
        cb = fill(CO, 1.0f);
        uint8_t *bytes = matmul_model(8, K, N, w, &len);
        npu_graph_t m32 = load(bytes, len, NULL);
        bytes = matmul_model(8, K, N, w, &len);
        npu_graph_t m64 = load(bytes, len, &acc64);
        bytes = matmul_model(8, K, N, w, &len);
        npu_load_options_t o32 = { .size = sizeof(o32), .accumulate = NPU_ACCUMULATE_FLOAT32 };
        npu_graph_t m32b = load(bytes, len, &o32);
        bytes = conv_model(cw, cb, &len);
        npu_graph_t c64 = load(bytes, len, &acc64);
        bytes = conv_model(cw, cb, &len);
        npu_graph_t c32 = load(bytes, len, NULL);

        /* npu_graph_load, and npu_graph_load_with asking for float32: float32, no node of
         * theirs tuned to the float64 variant */
        j = info(m32);
        ck_assert_str_eq(accumulate_of(j), "float32");
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 1), 0);
        json_decref(j);
        j = info(m32b);
        ck_assert_str_eq(accumulate_of(j), "float32");
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 1), 0);
        json_decref(j);
        j = info(c32);
        ck_assert_str_eq(accumulate_of(j), "float32");
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 1), 0);
        json_decref(j);

        /* float64: the MatMul and the Conv listed with variant "float64", nothing else */
        j = info(m64);
        ck_assert_str_eq(accumulate_of(j), "float64");
        ck_assert_int_eq(tuned_count(j, "MatMul", "float64", 1), 1);
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 0), 0);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(j, "compile"),
                                                                                          "tuned"), 0), "node")),
                         "mm");
        json_decref(j);
        j = info(c64);
        ck_assert_str_eq(accumulate_of(j), "float64");
        ck_assert_int_eq(tuned_count(j, "Conv", "float64", 1), 1);
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 0), 0);
        json_decref(j);

        /* a second load of the same model takes its tuning from the cache: still float64
         * for the float64 one, still not for the float32 one */
        bytes = matmul_model(8, K, N, w, &len);
        npu_graph_t m64b = load(bytes, len, &acc64);
        j = info(m64b);
        ck_assert_str_eq(accumulate_of(j), "float64");
        ck_assert_int_eq(tuned_count(j, "MatMul", "float64", 1), 1);
        json_decref(j);
        bytes = matmul_model(8, K, N, w, &len);
        npu_graph_t m32c = load(bytes, len, NULL);
        j = info(m32c);
        ck_assert_str_eq(accumulate_of(j), "float32");
        ck_assert_int_eq(tuned_count(j, NULL, "float64", 1), 0);
        json_decref(j);

        /* mixed: the MatMul and the Conv listed with variant "mixed" */
        bytes = matmul_model(8, K, N, w, &len);
        npu_graph_t mmx = load(bytes, len, &accmx);
        j = info(mmx);
        ck_assert_str_eq(accumulate_of(j), "mixed");
        ck_assert_int_eq(tuned_count(j, "MatMul", "mixed", 1), 1);
        ck_assert_int_eq(tuned_count(j, NULL, "mixed", 0), 0);
        json_decref(j);
        bytes = conv_model(cw, cb, &len);
        npu_graph_t cmx = load(bytes, len, &accmx);
        j = info(cmx);
        ck_assert_str_eq(accumulate_of(j), "mixed");
        ck_assert_int_eq(tuned_count(j, "Conv", "mixed", 1), 1);
        json_decref(j);

        npu_graph_t all[] = { m32, m64, m32b, c64, c32, m64b, m32c, mmx, cmx };
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                OK(npu_graph_unload(ctx, all[i]));
        free(w);
        free(cw);
        free(cb);
}
END_TEST

/* ---- the protocol ---- */

/* A sealed memfd holding len bytes. */
static int model_memfd(const uint8_t *bytes, size_t len)
{
        int fd = memfd_create("model", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
        return fd;
}

/* A raw graph_load of the model with params_tail after "device":0,"fd":0; its reply. */
static json_t *raw_load(int fd, uint64_t id, const uint8_t *bytes, size_t len, const char *params_tail)
{
        char req[256];
        int m = model_memfd(bytes, len), kind;
        uint64_t rid;
        json_t *r;

        snprintf(req, sizeof(req), "{\"method\":\"graph_load\",\"params\":{\"device\":0,\"fd\":0%s}}", params_tail);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, id, req, strlen(req), &m, 1), 0);
        close(m);
        while ((r = harness_raw_recv(fd, &kind, &rid)) && !(kind == PROTO_KIND_REPLY && rid == id))
                json_decref(r); /* notifications */
        ck_assert_msg(r != NULL, "graph_load%s: no reply", params_tail);
        return r;
}

static const char *reply_message(json_t *r)
{
        const char *m = json_string_value(json_object_get(json_object_get(r, "error"), "message"));

        return m ? m : "";
}

START_TEST(test_raw_bad_accumulate)
{
        static const char *const bad[] = { ",\"accumulate\":\"float16\"", ",\"accumulate\":64",
                                           ",\"accumulate\":null",        ",\"accumulate\":\"FLOAT64\"",
                                           ",\"accumulate\":\"\"",        ",\"accumulate\":[\"float64\"]",
                                           ",\"accumulate\":\"MIXED\"" };
        int fd = harness_raw_connect(daemon_proc.sock);
        uint64_t id = 2;
        float *w;
        size_t len;
        uint8_t *bytes;
        json_t *r;

        ck_assert_int_ge(fd, 0);
        r = harness_raw_call(fd, 1, "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":6}}");
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r, "result"), "version")), 6);
        json_decref(r);
        rng_seed(5);
        w = fill(64 * 16, 1.0f);
        bytes = matmul_model(4, 64, 16, w, &len);

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                r = raw_load(fd, id++, bytes, len, bad[i]);
                ck_assert_msg(harness_reply_code(r) == NPU_ERR_INVALID, "%s: code %d (%s)", bad[i],
                              harness_reply_code(r), reply_message(r));
                ck_assert_msg(strstr(reply_message(r), "'accumulate'"), "%s: message '%s'", bad[i],
                              reply_message(r));
                json_decref(r);
        }
        /* the session goes on: loads with either value and with none, each saying which */
        static const struct {
                const char *tail, *want;
        } good[] = { { ",\"accumulate\":\"float64\"", "float64" },
                     { ",\"accumulate\":\"mixed\"", "mixed" },
                     { ",\"accumulate\":\"float32\"", "float32" },
                     { "", "float32" } };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                r = raw_load(fd, id++, bytes, len, good[i].tail);
                ck_assert_msg(harness_reply_code(r) == 0, "%s: %s", good[i].tail, reply_message(r));
                json_t *res = json_object_get(r, "result");
                ck_assert_str_eq(accumulate_of(res), good[i].want);
                ck_assert_int_eq(tuned_count(res, NULL, "float64", 1), strcmp(good[i].want, "float64") == 0);
                json_decref(r);
        }
        r = harness_raw_call(fd, id++, "{\"method\":\"ping\"}");
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0);
        json_decref(r);
        close(fd);
        free(bytes);
        free(w);
}
END_TEST

/* ---- libnpu's checks ---- */

/* npu_load_options_t's first layout, through accumulate */
#define V1_SIZE (offsetof(npu_load_options_t, accumulate) + sizeof(int))

START_TEST(test_options_checked)
{
        float *w;
        size_t len;
        uint8_t *bytes;
        npu_graph_t g = { 4242 };
        npu_load_options_t o;
        json_t *j;

        rng_seed(6);
        w = fill(64 * 16, 1.0f);
        bytes = matmul_model(4, 64, 16, w, &len);

        /* refused by libnpu itself: with npud stopped a round trip would hang the test */
        ck_assert_int_eq(kill(daemon_proc.pid, SIGSTOP), 0);
        o = acc64;
        o.size = 0;
        FAILS(npu_graph_load_with(ctx, 0, bytes, len, &o, &g), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "size"), "%s", npu_error_message());
        o.size = V1_SIZE - 1; /* short of the first layout's last member */
        FAILS(npu_graph_load_with(ctx, 0, bytes, len, &o, &g), NPU_ERR_INVALID);
        o = acc64;
        o.accumulate = 7;
        FAILS(npu_graph_load_with(ctx, 0, bytes, len, &o, &g), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "accumulate"), "%s", npu_error_message());
        o.accumulate = -1;
        FAILS(npu_graph_load_with(ctx, 0, bytes, len, &o, &g), NPU_ERR_INVALID);
        o.accumulate = 3;
        FAILS(npu_graph_load_with(ctx, 0, bytes, len, &o, &g), NPU_ERR_INVALID);
        ck_assert_uint_eq(g.id, 4242); /* nothing returned */
        ck_assert_int_eq(kill(daemon_proc.pid, SIGCONT), 0);

        /* sized like npu_run_options_t: a larger struct (a newer header) is taken */
        struct {
                npu_load_options_t o;
                unsigned char more[32];
        } big;
        memset(&big, 0, sizeof(big));
        big.o.size = sizeof(big);
        big.o.accumulate = NPU_ACCUMULATE_FLOAT64;
        OK(npu_graph_load_with(ctx, 0, bytes, len, &big.o, &g));
        j = info(g);
        ck_assert_str_eq(accumulate_of(j), "float64");
        json_decref(j);
        OK(npu_graph_unload(ctx, g));
        /* opts NULL: exactly npu_graph_load */
        OK(npu_graph_load_with(ctx, 0, bytes, len, NULL, &g));
        j = info(g);
        ck_assert_str_eq(accumulate_of(j), "float32");
        json_decref(j);
        OK(npu_graph_unload(ctx, g));
        free(bytes);
        free(w);
}
END_TEST

/* A stand-in npud of protocol 5 on a listening socket: answers hello with version 5, then
 * every graph_load with an error saying whether it carried "accumulate", and any other
 * request with an empty result, until the client goes. Exit status: 0 when exactly one
 * graph_load came, without "accumulate"; 1 when one carried it; 2 for any other count; 3
 * when the hello was not the first request. */
static int old_npud(int lfd)
{
        int c = accept(lfd, NULL, NULL), kind, loads = 0, with = 0;
        uint64_t id;
        json_t *r;

        if (c < 0)
                return 4;
        r = harness_raw_recv(c, &kind, &id);
        if (!r || kind != PROTO_KIND_REQUEST ||
            !json_is_string(json_object_get(r, "method")) ||
            strcmp(json_string_value(json_object_get(r, "method")), "hello") != 0)
                return 3;
        json_decref(r);
        static const char hello[] = "{\"result\":{\"version\":5,\"server\":\"npud\",\"server_version\":\"0\","
                                    "\"session\":1,\"devices\":2,\"admin\":false,\"tenant\":\"default\","
                                    "\"class\":\"normal\"}}";
        if (harness_raw_send(c, PROTO_KIND_REPLY, id, hello, strlen(hello), NULL, 0) < 0)
                return 4;
        while ((r = harness_raw_recv(c, &kind, &id))) {
                const char *m = json_string_value(json_object_get(r, "method"));
                char reply[256];
                if (kind != PROTO_KIND_REQUEST) {
                        json_decref(r);
                        continue;
                }
                if (m && strcmp(m, "graph_load") == 0) {
                        int has = json_object_get(json_object_get(r, "params"), "accumulate") != NULL;
                        loads++;
                        with += has;
                        snprintf(reply, sizeof(reply),
                                 "{\"error\":{\"code\":7,\"name\":\"unsupported\",\"message\":\"stand-in npud: "
                                 "graph_load %s accumulate\"}}", has ? "with" : "without");
                } else {
                        snprintf(reply, sizeof(reply), "{\"result\":{}}");
                }
                json_decref(r);
                if (harness_raw_send(c, PROTO_KIND_REPLY, id, reply, strlen(reply), NULL, 0) < 0)
                        break;
        }
        close(c);
        return with ? 1 : loads != 1 ? 2 : 0;
}

START_TEST(test_version_5_session)
{
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/npu-acc-XXXXXX";
        npu_context_t *old;
        npu_graph_t g = { 4242 };
        float *w;
        size_t len;
        uint8_t *bytes;
        int lfd, status;
        pid_t pid;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/sock", dir);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
        ck_assert_int_eq(listen(lfd, 1), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(old_npud(lfd));
        close(lfd);

        rng_seed(7);
        w = fill(64 * 16, 1.0f);
        bytes = matmul_model(4, 64, 16, w, &len);
        OK(npu_connect(addr.sun_path, &old));
        /* float64 needs protocol 6: refused before anything is sent */
        FAILS(npu_graph_load_with(old, 0, bytes, len, &acc64, &g), NPU_ERR_VERSION);
        ck_assert_msg(strstr(npu_error_message(), "6") && strstr(npu_error_message(), "5"), "%s",
                      npu_error_message());
        ck_assert_uint_eq(g.id, 4242);
        /* mixed needs protocol 7 */
        FAILS(npu_graph_load_with(old, 0, bytes, len, &accmx, &g), NPU_ERR_VERSION);
        ck_assert_msg(strstr(npu_error_message(), "mixed") && strstr(npu_error_message(), "7"), "%s",
                      npu_error_message());
        ck_assert_uint_eq(g.id, 4242);
        /* float32 asked for explicitly: the request goes, without the parameter an npud of 5
         * would refuse (the stand-in says which it got) */
        npu_load_options_t o32 = { .size = sizeof(o32), .accumulate = NPU_ACCUMULATE_FLOAT32 };
        FAILS(npu_graph_load_with(old, 0, bytes, len, &o32, &g), NPU_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(npu_error_message(), "graph_load without accumulate"), "%s", npu_error_message());
        npu_disconnect(old);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "stand-in npud: status %#x", status);
        unlink(addr.sun_path);
        rmdir(dir);
        free(bytes);
        free(w);
}
END_TEST

/* The estimate of the plan (graph_info's plan, from the cost model: model mode's time and
 * the engine choice) counts a float64 multiply-add as two float32 ones: for a product large
 * enough that its compute dwarfs the launch (2 x 1024 x 4096 x 4096 operations), the
 * MatMul step of the float64 graph is estimated at about twice the float32 one's. */
static double mm_est_us(npu_graph_t g)
{
        json_t *j = info(g), *plan = json_object_get(j, "plan"), *step;
        double est = -1;
        size_t i;

        json_array_foreach(plan, i, step)
                if (strcmp(json_string_value(json_object_get(step, "op")) ?: "", "MatMul") == 0)
                        est = json_number_value(json_object_get(step, "est_us"));
        json_decref(j);
        return est;
}

START_TEST(test_plan_estimate)
{
        size_t len;
        uint8_t *bytes = matmul_inputs_model(1024, 4096, 4096, &len);
        npu_graph_t g32 = load(bytes, len, NULL);
        bytes = matmul_inputs_model(1024, 4096, 4096, &len);
        npu_graph_t g64 = load(bytes, len, &acc64);
        bytes = matmul_inputs_model(1024, 4096, 4096, &len);
        npu_graph_t gmx = load(bytes, len, &accmx);
        double e32 = mm_est_us(g32), e64 = mm_est_us(g64), emx = mm_est_us(gmx);

        ck_assert_msg(e32 > 0 && e64 > 1.8 * e32 && e64 < 2.2 * e32, "MatMul step estimated %.3f us in float32, "
                      "%.3f us in float64", e32, e64);
        /* mixed: one and a fifth */
        ck_assert_msg(emx > 1.1 * e32 && emx < 1.3 * e32, "MatMul step estimated %.3f us in float32, "
                      "%.3f us mixed", e32, emx);
        OK(npu_graph_unload(ctx, g32));
        OK(npu_graph_unload(ctx, g64));
        OK(npu_graph_unload(ctx, gmx));
}
END_TEST

/* The host's default: an npud configured with "graph_accumulate": "float64" loads a graph
 * that names no accumulation (npu_graph_load, or npu_graph_load_with without options) in
 * float64, computes the cancelling MatMul exactly, and still gives a client that asks for
 * float32 its float32. */
START_TEST(test_config_default)
{
        enum { K = MK, N = 8 };
        char conf[128];
        const char *cfg = "{\"graph_accumulate\": \"float64\"}\n";
        npu_load_options_t o32 = { .size = sizeof(o32), .accumulate = NPU_ACCUMULATE_FLOAT32 };
        float *x, *w, y[N];
        size_t len;
        json_t *j;
        int fd;

        snprintf(conf, sizeof(conf), "/tmp/npud-accumulate-%d.json", (int)getpid());
        fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, cfg, strlen(cfg)), (ssize_t)strlen(cfg));
        close(fd);
        const char *extra[] = { "--config", conf, NULL };
        ck_assert_int_eq(harness_start(&daemon_proc, extra), 0);
        unlink(conf);
        OK(npu_connect(daemon_proc.sock, &ctx));

        rng_seed(9);
        x = fill(K, 1.0f);
        x[K - 1] = 0.75f;
        w = fill((size_t)K * N, (float)WS);
        cancelling(x, w, K, N);
        uint8_t *bytes = matmul_model(1, K, N, w, &len);
        npu_graph_t g = load(bytes, len, NULL);
        bytes = matmul_model(1, K, N, w, &len);
        npu_graph_t g32 = load(bytes, len, &o32);
        j = info(g);
        ck_assert_str_eq(accumulate_of(j), "float64");
        json_decref(j);
        j = info(g32);
        ck_assert_str_eq(accumulate_of(j), "float32");
        json_decref(j);
        const int64_t xd[2] = { 1, K }, yd[2] = { 1, N };
        run(g, x, 2, xd, y, 2, yd);
        for (int c = 0; c < N; c++) {
                struct acc a = { 0 };
                for (int i = 0; i < K; i++)
                        acc_add(&a, (double)x[i] * (double)w[(size_t)i * N + (size_t)c]);
                ck_assert_msg(fabs((double)y[c] - acc_sum(&a)) < 1e-9, "column %d: %.9g, exact %.9g", c, y[c],
                              acc_sum(&a));
        }
        OK(npu_graph_unload(ctx, g));
        OK(npu_graph_unload(ctx, g32));
        free(x);
        free(w);
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-accumulate");
        TCase *tc = tcase_create("accumulate");
        TCase *old = tcase_create("old-npud");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_matmul_cancellation);
        tcase_add_test(tc, test_conv_float64);
        tcase_add_test(tc, test_fused_epilogue_float64);
        tcase_add_loop_test(tc, test_conv_bn_exact, 0, 3);
        tcase_add_loop_test(tc, test_conv_resid_cancel, 0, 2);
        tcase_add_test(tc, test_info_reports_accumulation);
        tcase_add_test(tc, test_raw_bad_accumulate);
        tcase_add_test(tc, test_options_checked);
        tcase_add_test(tc, test_plan_estimate);
        suite_add_tcase(s, tc);
        tcase_set_timeout(old, 10);
        tcase_add_test(old, test_version_5_session);
        tcase_add_test(old, test_config_default);
        suite_add_tcase(s, old);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

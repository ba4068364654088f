/* bench_kernels: the kernel back ends under the operators, in-process on one thread, each
 * beside its baseline in the same run:
 *   1. ops_sgemm (ops/blas.c: oneDNN from 4096 multiply-adds up, OpenBLAS below) against
 *      cblas_sgemm (OpenBLAS as the host configures it) for the products of MatMul, Gemm
 *      and Conv's im2col in the bench models: GFLOP/s of each, the ratio, the larger
 *      difference between the two results, and the thread count of the process before and
 *      after (oneDNN must not start an OpenMP team of its own); and ops_sgemm on B packed
 *      once (the onednn-packed variant of a node with constant weights, ops_packed_b_new)
 *      and on its libxsmm layout (the xsmm-packed variant);
 *   2. vmath (ops/vmath.c: SLEEF at the CPU's widest vector width) against libm over 4 M
 *      floats for exp, tanh, erf and sigmoid;
 *   3. GELU of the erf form (ops_gelu_erf, ops/rows.c: polynomials for erf and erfc)
 *      against the same through SLEEF's erf, 0.5 x (1 + erf(x / sqrt 2)), over 4 M floats;
 *   4. float64 accumulation (OPS_SGEMM_F64, ops/gemm-f64.c) against the float32 variants on
 *      the products of the bench models (constant weights packed for both, as a graph's
 *      are; the attention products on operands that change): the time of each, the ratio,
 *      and each one's largest error against the exact product of the float32 operands,
 *      relative to the sum of the magnitudes of the terms, sum |a b|.
 * Each figure is the best of 5 rounds; rounds of the two sides alternate. */
#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/blas.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "ops/vmath.h"

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_threads(void)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int n = 0;

        if (!d)
                return -1;
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

static float *rand_buf(size_t n, unsigned seed)
{
        float *p = malloc(n * sizeof(float));

        if (!p) {
                perror("malloc");
                exit(1);
        }
        srand(seed);
        for (size_t i = 0; i < n; i++)
                p[i] = (float)rand() / (float)RAND_MAX * 2 - 1;
        return p;
}

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                         blasint, blasint, float, const float *, blasint, const float *,
                         blasint, float, float *, blasint);

static const struct {
        const char *what;
        int m, n, k, tb;
} shapes[] = {
        { "MLP layer (MatMul)", 32, 1024, 1024, 0 },
        { "MLP layer (Gemm transB)", 32, 1024, 1024, 1 },
        { "batch 1 (MatMul)", 1, 1024, 1024, 0 },
        { "conv 3x3 64ch 56x56 (im2col)", 64, 3136, 576, 0 },
        { "conv 1x1 256->64 56x56", 64, 3136, 256, 0 },
        { "attention proj 128x768", 128, 768, 768, 1 },
        { "FFN 128x768->3072", 128, 3072, 768, 1 },
        { "square 1024", 1024, 1024, 1024, 0 },
        { "small 8x16x32", 8, 16, 32, 0 },
        { "tiny 4x4x4", 4, 4, 4, 0 },
};

static double time_gemm(sgemm_fn f, int m, int n, int k, int tb, const float *a, const float *b,
                        float *c, int reps)
{
        double t = now_s();

        for (int r = 0; r < reps; r++)
                f(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
                  k, b, tb ? k : n, 0.0f, c, n);
        return (now_s() - t) / reps;
}

static void bench_gemm(void)
{
        int before = count_threads();

        printf("sgemm, one thread: ops_sgemm against OpenBLAS (cblas_sgemm) in the same run\n");
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                int m = shapes[s].m, n = shapes[s].n, k = shapes[s].k, tb = shapes[s].tb;
                double flop = 2.0 * m * n * k, best[4] = { 1e9, 1e9, 1e9, 1e9 }, diff = 0;
                float *a = rand_buf((size_t)m * k, 1), *b = rand_buf((size_t)k * n, 2);
                float *c[4] = { malloc(sizeof(float) * (size_t)m * n),
                                malloc(sizeof(float) * (size_t)m * n),
                                malloc(sizeof(float) * (size_t)m * n),
                                malloc(sizeof(float) * (size_t)m * n) };
                /* sides: OpenBLAS, ops_sgemm, then on packed B: oneDNN, libxsmm */
                static const int forced[4] = { OPS_SGEMM_AUTO, OPS_SGEMM_AUTO, OPS_SGEMM_ONEDNN_PACKED,
                                               OPS_SGEMM_XSMM_PACKED };
                char err[128] = "";
                struct ops_packed_b *pb = ops_packed_b_new(b, k, n, tb, m, err, sizeof(err));
                int reps = (int)(2e8 / flop) + 1;

                int sides = pb ? 4 : 2;
                if (!c[0] || !c[1] || !c[2] || !c[3]) {
                        perror("malloc");
                        exit(1);
                }
                time_gemm(ops_sgemm, m, n, k, tb, a, b, c[0], 1); /* warm: oneDNN's JIT */
                ops_sgemm_packed(pb);
                for (int side = 2; side < sides; side++) { /* its primitive, its layout */
                        ops_sgemm_force(forced[side]);
                        time_gemm(ops_sgemm, m, n, k, tb, a, b, c[side], 1);
                }
                ops_sgemm_force(OPS_SGEMM_AUTO);
                for (int round = 0; round < 5; round++)
                        for (int side = 0; side < sides; side++) {
                                ops_sgemm_force(forced[side]);
                                double t = time_gemm(side ? ops_sgemm : cblas_sgemm, m, n, k,
                                                     tb, a, b, c[side], reps);
                                ops_sgemm_force(OPS_SGEMM_AUTO);
                                if (t < best[side])
                                        best[side] = t;
                        }
                ops_sgemm_packed(NULL);
                for (size_t i = 0; i < (size_t)m * n; i++)
                        for (int side = 1; side < sides; side++) {
                                double d = fabs((double)c[0][i] - c[side][i]) / (1 + fabs((double)c[0][i]));
                                if (d > diff)
                                        diff = d;
                        }
                printf("  %-30s %4dx%4dx%4d%s: OpenBLAS %8.1f us %6.1f GFLOP/s, ops_sgemm (%s) "
                       "%8.1f us %6.1f GFLOP/s; OpenBLAS/ops_sgemm %.2fx; ",
                       shapes[s].what, m, n, k, tb ? "^T" : "  ", best[0] * 1e6,
                       flop / best[0] * 1e-9, ops_sgemm_backend(m, n, k), best[1] * 1e6,
                       flop / best[1] * 1e-9, best[0] / best[1]);
                if (pb)
                        printf("packed B: oneDNN %8.1f us %6.1f GFLOP/s, ops_sgemm/packed %.2fx, "
                               "libxsmm %8.1f us %6.1f GFLOP/s, oneDNN/libxsmm %.2fx%s; ",
                               best[2] * 1e6, flop / best[2] * 1e-9, best[1] / best[2],
                               best[3] * 1e6, flop / best[3] * 1e-9, best[2] / best[3],
                               ops_xsmm_usable() ? "" : " (no libxsmm kernels: the plain path)");
                else
                        printf("packed B: %s; ", err);
                printf("max rel diff %.1e\n", diff);
                ops_packed_b_free(pb);
                free(a);
                free(b);
                free(c[0]);
                free(c[1]);
                free(c[2]);
                free(c[3]);
        }
        printf("  threads of this process: %d before the products, %d after (must not grow)\n",
               before, count_threads());
}

static float sigmoid_libm(float x)
{
        float e = expf(-fabsf(x));
        return x >= 0 ? 1 / (1 + e) : e / (1 + e);
}

static void bench_vmath(void)
{
        static const struct {
                const char *name;
                enum ops_vm f;
                float (*libm)(float);
        } fns[] = {
                { "exp", OPS_VM_EXP, expf },
                { "tanh", OPS_VM_TANH, tanhf },
                { "erf", OPS_VM_ERF, erff },
                { "sigmoid", OPS_VM_SIGMOID, sigmoid_libm },
        };
        enum { N = 4 << 20 };
        float *x = rand_buf(N, 3), *y[2] = { malloc(N * sizeof(float)), malloc(N * sizeof(float)) };

        if (!y[0] || !y[1]) {
                perror("malloc");
                exit(1);
        }
        for (size_t i = 0; i < N; i++)
                x[i] *= 8;
        printf("float32 math over 4 M elements, one thread: vmath (%s) against libm\n",
               ops_vmath_isa());
        for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
                ops_vm_fn vf = ops_vmath_get(fns[f].f);
                double best[2] = { 1e9, 1e9 }, diff = 0;

                if (!vf) {
                        printf("  %-8s: no vector version on this CPU (or NPUD_VMATH=0)\n",
                               fns[f].name);
                        continue;
                }
                for (int round = 0; round < 5; round++) {
                        double t = now_s();
                        for (size_t i = 0; i < N; i++)
                                y[0][i] = fns[f].libm(x[i]);
                        t = now_s() - t;
                        if (t < best[0])
                                best[0] = t;
                        t = now_s();
                        vf(y[1], x, N);
                        t = now_s() - t;
                        if (t < best[1])
                                best[1] = t;
                }
                for (size_t i = 0; i < N; i++) {
                        double d = fabs((double)y[0][i] - y[1][i]) / (1e-30 + fabs((double)y[0][i]));
                        if (d > diff)
                                diff = d;
                }
                printf("  %-8s: libm %7.2f ms, vmath %6.2f ms; libm/vmath %5.2fx; max rel diff "
                       "%.1e\n", fns[f].name, best[0] * 1e3, best[1] * 1e3, best[0] / best[1],
                       diff);
        }
        free(x);
        free(y[0]);
        free(y[1]);
}

static void bench_gelu(void)
{
        enum { N = 4 << 20 };
        float *x = rand_buf(N, 5), *y[2] = { malloc(N * sizeof(float)), malloc(N * sizeof(float)) };
        ops_vm_fn verf = ops_vmath_get(OPS_VM_ERF);
        double best[2] = { 1e9, 1e9 }, diff = 0;

        if (!y[0] || !y[1]) {
                perror("malloc");
                exit(1);
        }
        if (!verf) {
                printf("GELU: no vector erf on this CPU (or NPUD_VMATH=0)\n");
                goto out;
        }
        for (size_t i = 0; i < N; i++)
                x[i] *= 6;
        for (int round = 0; round < 5; round++) {
                double t = now_s();
                for (size_t off = 0; off < N; off += 256) { /* as the Gelu kernel did */
                        float u[256];
                        for (int k = 0; k < 256; k++)
                                u[k] = x[off + k] * 0.70710678f;
                        verf(u, u, 256);
                        for (int k = 0; k < 256; k++)
                                y[0][off + k] = 0.5f * x[off + k] * (1.0f + u[k]);
                }
                t = now_s() - t;
                if (t < best[0])
                        best[0] = t;
                t = now_s();
                ops_gelu_erf(y[1], x, N);
                t = now_s() - t;
                if (t < best[1])
                        best[1] = t;
        }
        for (size_t i = 0; i < N; i++) {
                double ref = 0.5 * (double)x[i] * erfc(-(double)x[i] / sqrt(2.0));
                double d = fabs((double)y[1][i] - ref) / (1e-30 + fabs(ref));
                if (fabs(x[i]) < 5.6 && d > diff)
                        diff = d;
        }
        printf("GELU (erf form) over 4 M floats, one thread: SLEEF erf %.2f ms, polynomials %.2f ms; "
               "ratio %.2fx; max rel error %.1e (|x| < 5.6, against erfc in double)\n",
               best[0] * 1e3, best[1] * 1e3, best[0] / best[1], diff);
out:
        free(x);
        free(y[0]);
        free(y[1]);
}

static const struct {
        const char *what;
        int m, n, k, tb, packed;
} shapes64[] = {
        { "MLP layer (Gemm transB)", 32, 1024, 1024, 1, 1 },
        { "encoder Q/K/V projection", 128, 256, 256, 0, 1 },
        { "encoder FFN up", 128, 1024, 256, 0, 1 },
        { "encoder FFN down", 128, 256, 1024, 0, 1 },
        { "attention scores (QK^T)", 128, 128, 64, 1, 0 },
        { "attention values (AV)", 128, 64, 128, 0, 0 },
        { "conv 3x3 64ch 56x56 (im2col)", 64, 3136, 576, 0, 0 },
};

/* Largest |c - exact| / sum |a b| over the elements (exact: float64 sums of the products). */
static double rel_err(const float *a, const float *b, const float *c, int m, int n, int k, int tb)
{
        double worst = 0;

        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0, mag = 0;
                        for (int q = 0; q < k; q++) {
                                double t = (double)a[i * k + q] * (tb ? b[j * k + q] : b[q * n + j]);
                                s += t;
                                mag += fabs(t);
                        }
                        double e = fabs(c[i * n + j] - s) / (mag > 0 ? mag : 1);
                        if (e > worst)
                                worst = e;
                }
        return worst;
}

/* Rounds of bench_f64's sides in turn (the first warms up): besides each side's best time, the
 * median of each round's ratio to the float32 side, as bench_conv_f64 prints. */
#define GEMM_ROUNDS 21

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static void bench_f64(void)
{
        int avx512 = ops_mixed_kernel(-1);

        printf("float64 and mixed accumulation, one thread: OPS_SGEMM_F64 and OPS_SGEMM_MIXED (%s, and libxsmm's "
               "kernels a run at a time) against the best float32 variant in the same run (error: largest |c - "
               "exact| / sum |a b|)\n",
               avx512 ? "its AVX-512 kernel" : "no AVX-512F: libxsmm's kernels on both mixed sides");
        for (size_t s = 0; s < sizeof(shapes64) / sizeof(shapes64[0]); s++) {
                int m = shapes64[s].m, n = shapes64[s].n, k = shapes64[s].k, tb = shapes64[s].tb;
                double flop = 2.0 * m * n * k, best[4] = { 1e9, 1e9, 1e9, 1e9 }, t_round[4] = { 0 };
                double ratio[4][GEMM_ROUNDS - 1];
                float *a = rand_buf((size_t)m * k, 3), *b = rand_buf((size_t)k * n, 4);
                float *c[4];
                char err[128] = "";
                /* float32: libxsmm on its packed layout for constant weights, else ops_sgemm's
                 * plain path (oneDNN) */
                int packed = shapes64[s].packed;
                struct ops_packed_b *p[4] = {
                        packed ? ops_packed_b_new(b, k, n, tb, m, err, sizeof(err)) : NULL,
                        packed ? ops_packed_b_new_f64(b, k, n, tb, err, sizeof(err)) : NULL,
                        packed ? ops_packed_b_new_mixed(b, k, n, tb, err, sizeof(err)) : NULL,
                        NULL,
                };
                int f32 = p[0] && ops_xsmm_usable() ? OPS_SGEMM_XSMM_PACKED : OPS_SGEMM_AUTO;
                int variant[4] = { f32, OPS_SGEMM_F64, OPS_SGEMM_MIXED, OPS_SGEMM_MIXED };
                int reps = (int)(1e8 / flop) + 1;

                p[3] = p[2]; /* the same copy: sides 2 and 3 differ in the kernel only */
                for (int side = 0; side < 4; side++)
                        if (!(c[side] = malloc(sizeof(float) * (size_t)m * n))) {
                                perror("malloc");
                                exit(1);
                        }
                for (int round = 0; round < GEMM_ROUNDS; round++) {
                        for (int side = 0; side < 4; side++) {
                                ops_sgemm_force(variant[side]);
                                ops_sgemm_packed(p[side]);
                                ops_mixed_kernel(side == 3 ? 0 : avx512);
                                double t = time_gemm(ops_sgemm, m, n, k, tb, a, b, c[side], round ? reps : 1);
                                if (round && t < best[side]) /* round 0 warms up */
                                        best[side] = t;
                                t_round[side] = t;
                        }
                        for (int side = 1; round && side < 4; side++)
                                ratio[side][round - 1] = t_round[side] / t_round[0];
                }
                for (int side = 1; side < 4; side++)
                        qsort(ratio[side], GEMM_ROUNDS - 1, sizeof(double), cmp_double);
                ops_sgemm_force(OPS_SGEMM_AUTO);
                ops_sgemm_packed(NULL);
                ops_mixed_kernel(avx512);
                printf("  %-30s %4dx%4dx%4d%s: float32 (%s) %7.1f us %5.1f GFLOP/s, error %.1e; "
                       "float64 %7.1f us %5.1f GFLOP/s, error %.1e, %.2fx float32's time; "
                       "mixed %7.1f us %5.1f GFLOP/s, error %.1e, %.2fx; "
                       "mixed on libxsmm %7.1f us, %.2fx\n",
                       shapes64[s].what, m, n, k, tb ? "^T" : "  ",
                       f32 == OPS_SGEMM_XSMM_PACKED ? "xsmm-packed" : ops_sgemm_backend(m, n, k), best[0] * 1e6,
                       flop / best[0] * 1e-9, rel_err(a, b, c[0], m, n, k, tb), best[1] * 1e6,
                       flop / best[1] * 1e-9, rel_err(a, b, c[1], m, n, k, tb), best[1] / best[0],
                       best[2] * 1e6, flop / best[2] * 1e-9, rel_err(a, b, c[2], m, n, k, tb), best[2] / best[0],
                       best[3] * 1e6, best[3] / best[0]);
                printf("  %-30s paired rounds (%d, each side in turn): mixed/float32 time median %.3f (lower quartile "
                       "%.3f), mixed on libxsmm %.3f, float64 %.3f\n",
                       shapes64[s].what, GEMM_ROUNDS - 1, ratio[2][(GEMM_ROUNDS - 1) / 2],
                       ratio[2][(GEMM_ROUNDS - 1) / 4], ratio[3][(GEMM_ROUNDS - 1) / 2],
                       ratio[1][(GEMM_ROUNDS - 1) / 2]);
                for (int side = 0; side < 3; side++)
                        ops_packed_b_free(p[side]);
                for (int side = 0; side < 4; side++)
                        free(c[side]);
                free(a);
                free(b);
        }
}

/* The ResNet block's 3x3 convolution (64 channels, 56x56, pads 1): float64 accumulation
 * (ops_conv2d_f64, shifted products) and mixed accumulation (ops_conv2d_mixed: the mixed
 * kernel over a padded copy of the input, channels across the vectors, and on AVX-512 also
 * positions across them: ops_mixed_conv_transposed) against the float32 direct convolution
 * on packed filters (oneDNN, the variant tuning picks for it). The sides take turns for
 * CONV_ROUNDS rounds: besides each side's best time, the median (and lower quartile) of each
 * round's ratio to the float32 side, which the host's swings from second to second move far
 * less than a ratio of two best times (a kernel change of a few per cent shows there). */
#define CONV_ROUNDS 31
static void bench_conv_f64(void)
{
        const int64_t c = 64, m = 64, h = 56, w = 56;
        float *x = rand_buf((size_t)(c * h * w), 5), *f = rand_buf((size_t)(m * c * 9), 6);
        float *y[4] = { malloc(sizeof(float) * (size_t)(m * h * w)), malloc(sizeof(float) * (size_t)(m * h * w)),
                        malloc(sizeof(float) * (size_t)(m * h * w)), malloc(sizeof(float) * (size_t)(m * h * w)) };
        int64_t wd[4] = { m, c, 3, 3 }, st[2] = { 1, 1 }, dil[2] = { 1, 1 }, hw[2] = { h, w }, pads[4] = { 1, 1, 1, 1 };
        char err[128] = "";
        struct ops_packed_conv *pc = ops_packed_conv_new(f, wd, st, dil, hw, pads, err, sizeof(err));
        struct ops_conv_direct_args d = { .packed = pc, .x = x, .w = f, .y = y[0], .n = 1, .c = c, .ih = h, .iw = w,
                                          .oh = h, .ow = w, .wdims = { m, c, 3, 3 }, .strides = { 1, 1 },
                                          .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 } };
        struct ops_conv2d_f64_args a = { .x = x, .w = f, .y = y[1], .n = 1, .c = c, .ih = h, .iw = w, .m = m, .oh = h,
                                         .ow = w, .kh = 3, .kw = 3, .group = 1, .strides = { 1, 1 },
                                         .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 } };
        struct ops_conv2d_f64_args am = a, ap = a;
        double flop = 2.0 * m * h * w * c * 9, best[4] = { 1e9, 1e9, 1e9, 1e9 }, diff = 0, diffm = 0;
        double t_round[4] = { 0 }, ratio[4][CONV_ROUNDS - 1] = { { 0 } };
        int transposed = ops_mixed_conv_transposed(-1), same = 1;

        am.y = y[2];
        ap.y = y[3];
        if (!y[0] || !y[1] || !y[2] || !y[3]) {
                perror("malloc");
                exit(1);
        }
        for (int round = 0; round < CONV_ROUNDS; round++) {
                for (int side = 0; side < 4; side++) {
                        if ((side == 0 && !pc) || (side == 3 && !transposed))
                                continue;
                        ops_mixed_conv_transposed(side == 2);
                        double t = now_s();
                        int rc = side == 3   ? ops_conv2d_mixed(&ap, err, sizeof(err))
                                 : side == 2 ? ops_conv2d_mixed(&am, err, sizeof(err))
                                 : side == 1 ? ops_conv2d_f64(&a, err, sizeof(err))
                                             : ops_conv_direct(&d, err, sizeof(err));
                        t = now_s() - t;
                        if (rc) {
                                printf("  conv: side %d failed (%d): %s\n", side, rc, err);
                                exit(1);
                        }
                        if (round && t < best[side])
                                best[side] = t;
                        t_round[side] = t;
                }
                for (int side = 1; round && pc && side < 4; side++)
                        ratio[side][round - 1] = t_round[side] / t_round[0];
        }
        for (int side = 1; side < 4; side++)
                qsort(ratio[side], CONV_ROUNDS - 1, sizeof(double), cmp_double);
        for (int64_t i = 0; i < m * h * w; i++) {
                double e = pc ? fabs((double)y[0][i] - y[1][i]) / (1 + fabs((double)y[1][i])) : 0;
                double em = fabs((double)y[2][i] - y[1][i]) / (1 + fabs((double)y[1][i]));
                diff = e > diff ? e : diff;
                diffm = em > diffm ? em : diffm;
                same &= !transposed || y[3][i] == y[2][i];
        }
        ops_mixed_conv_transposed(transposed);
        printf("  %-30s 64ch 56x56 3x3  : float32 (onednn-direct) %8.1f us %6.1f GFLOP/s; float64 (shifted "
               "products) %8.1f us %6.1f GFLOP/s; float64/float32 time %.2fx; max rel diff %.1e\n",
               "conv of the ResNet block", best[0] * 1e6, flop / best[0] * 1e-9, best[1] * 1e6,
               flop / best[1] * 1e-9, best[1] / best[0], diff);
        printf("  %-30s 64ch 56x56 3x3  : mixed (%s) %8.1f us %6.1f GFLOP/s; mixed/float32 time %.2fx; max rel "
               "diff to float64 %.1e\n",
               "conv of the ResNet block",
               transposed ? "AVX-512 kernel, padded input, channels across the vectors" : "libxsmm, im2col",
               best[2] * 1e6, flop / best[2] * 1e-9, best[2] / best[0], diffm);
        if (pc)
                printf("  %-30s paired rounds (%d, each side in turn): mixed/float32 time median %.3f (lower quartile "
                       "%.3f), float64/float32 %.3f\n",
                       "conv of the ResNet block", CONV_ROUNDS - 1, ratio[2][(CONV_ROUNDS - 1) / 2],
                       ratio[2][(CONV_ROUNDS - 1) / 4], ratio[1][(CONV_ROUNDS - 1) / 2]);
        if (transposed)
                printf("  %-30s 64ch 56x56 3x3  : mixed (AVX-512 kernel, padded input, positions across the "
                       "vectors) %8.1f us %6.1f GFLOP/s; %.2fx the channels' time; the same sums: %s\n",
                       "conv of the ResNet block", best[3] * 1e6, flop / best[3] * 1e-9, best[3] / best[2],
                       same ? "yes" : "NO");
        ops_packed_conv_free(pc);
        free(x);
        free(f);
        free(y[0]);
        free(y[1]);
        free(y[2]);
        free(y[3]);
}

int main(int argc, char **argv)
{
        ops_set_threads(1);
        /* bench_kernels f64: that section only */
        if (argc > 1 && strcmp(argv[1], "f64") == 0) {
                bench_f64();
                bench_conv_f64();
                return 0;
        }
        bench_gemm();
        bench_vmath();
        bench_gelu();
        bench_f64();
        bench_conv_f64();
        return 0;
}

/* The float64-accumulation GEMM variant (ops/blas.h, OPS_SGEMM_F64; ops/gemm-f64.c,
 * ops/conv-f64.c, and Conv's OPS_SGEMM_F64 branch in ops/nn-conv.c):
 *   - ops_sgemm under it, row-major and column-major, every transposition, alpha 1 and 0.5,
 *     beta 0 (over a C full of NaN), 1 and -2, leading dimensions wider than the operands
 *     and shapes on both sides of the 64-row and 32-column tiles and of the 256-column bands
 *     of B, is within 2^-22 of a product summed in double (the one rounding to float32 of a
 *     sum that is exact to far better than float32), and writes nothing outside C's m x n;
 *     k = 0 gives beta C;
 *   - where the exact result cancels to about 1e-6 (K = 4096), float32 accumulation is off by
 *     more than 1e-6 and the variant is within 1e-9 of it;
 *   - on float64 packed weights (ops_packed_b_new_f64), the whole product, accumulating into
 *     C, a row part and column blocks (transposed B or not, blocks starting inside a 32-column
 *     block) are computed on the packed copy (ops_packed_b_runs) and bit-identical to the
 *     unpacked variant; calls it does not match (alpha 0.5, another B) take the plain path,
 *     and the other packed variants ignore such a packed B;
 *   - ops_conv2d_f64 against a convolution summed in double: pads (asymmetric too), strides,
 *     dilations, groups (depthwise too), 1x1 and 5x3 kernels, lines that lie in the padding
 *     only, with and without bias, two images; bands of output lines write only their lines
 *     and together give exactly the whole call's result;
 *   - Conv through the registry under the variant (ops_run_variant): 2-D (ops_conv2d_f64),
 *     1-D and 3-D (conv_acc64's float64 im2col, in several bands of lines for the 3-D one)
 *     within the same bound; ops_conv_rows_acc gives the 2-D call's lines exactly and refuses
 *     the others without writing;
 *   - Conv under OPS_SGEMM_MIXED (nn-conv.c's conv_mixed) on every geometry above: within the
 *     mixed bound of the exact sums, on the AVX-512 kernel the sums of its runs (im2col order,
 *     float32 runs, quads in float32, the rest and the bias in float64) bit for bit, on
 *     libxsmm's kernels within the bound; ops_conv_rows_acc(mixed) as for float64 (its lines
 *     within the bound only on libxsmm's kernels). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/blas.h"
#include "ops/ops.h"
#include "ops/runctx.h"
#include "proto/dtype.h"

#include "tests/check-run.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
/* ck_assert_msg marks a point (a write to the runner) on every success: for the per-element
 * checks, only a failure calls into Check. */
#define CHECK(cond, ...)                                   \
        do {                                               \
                if (!(cond))                               \
                        ck_abort_msg(__VA_ARGS__);         \
        } while (0)
#define SENTINEL 12345.0f

static void fill(float *p, size_t n, uint32_t seed)
{
        for (size_t i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                p[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
        }
}

static void set_all(float *p, size_t n, float v)
{
        for (size_t i = 0; i < n; i++)
                p[i] = v;
}

/* got is ref rounded once to float32 (with room for the double sum's own error). */
static int close_f64(float got, double ref)
{
        return fabs((double)got - ref) <= ldexp(fabs(ref), -22) + 1e-30;
}

/* ---- ops_sgemm under OPS_SGEMM_F64 ---- */

/* Element (i, j) of an operand stored with leading dimension ld: row-major when !swap. */
static size_t at(int swap, long ld, long i, long j)
{
        return swap ? (size_t)(j * ld + i) : (size_t)(i * ld + j);
}

struct gshape {
        int m, n, k;
        int all; /* every (alpha, beta) for each transposition, else one of them in turn */
};

static const struct gshape gshapes[] = {
        { 1, 1, 1, 1 },      { 33, 31, 7, 1 },   { 65, 33, 64, 1 },  { 130, 300, 64, 1 },
        { 130, 31, 300, 1 }, { 1, 300, 300, 1 }, { 33, 1, 300, 1 },  { 65, 300, 1, 1 },
        { 64, 256, 16, 1 },  { 3, 257, 9, 1 },   { 130, 300, 300, 0 },
};

static const float alphas[2] = { 1.0f, 0.5f }, betas[3] = { 0.0f, 1.0f, -2.0f };

/* The logical operands of a shape (A m x k, B k x n, row-major) and their product summed
 * in double. */
struct goperands {
        int m, n, k;
        float *a, *b;
        double *s;
};

/* An operand stored (transposed w.r.t. row-major when swap) with leading dimension ld; the
 * padding past each stored row is NaN, so that a read of it shows. */
static float *store(const float *v, long rows, long cols, int swap, long ld)
{
        long sr = swap ? cols : rows;
        float *p = malloc((size_t)(sr * ld) * 4);

        set_all(p, (size_t)(sr * ld), NAN);
        for (long i = 0; i < rows; i++)
                for (long j = 0; j < cols; j++)
                        p[at(swap, ld, i, j)] = v[i * cols + j];
        return p;
}

/* One product under the variant against the double reference. */
static void gemm_case(const struct goperands *g, int col, int ta, int tb, float alpha, float beta)
{
        int m = g->m, n = g->n, k = g->k;
        int sa = ta ^ col, sb = tb ^ col, sc = col; /* stored transposed w.r.t. row-major */
        long lda = (sa ? m : k) + 3, ldb = (sb ? k : n) + 5;
        long cr = sc ? n : m, cc = sc ? m : n, ldc = cc + 2;
        size_t nc = (size_t)(cr * ldc);
        float *a = store(g->a, m, k, sa, lda), *b = store(g->b, k, n, sb, ldb);
        float *c = malloc(nc * 4), *c0 = malloc(nc * 4);

        fill(c0, nc, (uint32_t)(m + n + k));
        for (long r = 0; r < cr; r++) /* padding between the rows of C: must stay */
                for (long q = cc; q < ldc; q++)
                        c0[r * ldc + q] = SENTINEL;
        memcpy(c, c0, nc * 4);
        if (beta == 0.0f) /* beta 0: C is not read */
                for (long r = 0; r < cr; r++)
                        for (long q = 0; q < cc; q++)
                                c[r * ldc + q] = NAN;

        ops_sgemm_force(OPS_SGEMM_F64);
        ops_sgemm(col ? CblasColMajor : CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  m, n, k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
        ops_sgemm_force(OPS_SGEMM_AUTO);

        for (long i = 0; i < m; i++)
                for (long j = 0; j < n; j++) {
                        size_t ci = at(sc, ldc, i, j);
                        double ref = (double)alpha * g->s[i * n + j] + (double)beta * (double)c0[ci];
                        CHECK(close_f64(c[ci], ref),
                              "%s ta %d tb %d %dx%dx%d alpha %g beta %g: C[%ld,%ld] %.9g, double %.12g",
                              col ? "col" : "row", ta, tb, m, n, k, alpha, beta, i, j, c[ci], ref);
                }
        for (long r = 0; r < cr; r++)
                for (long q = cc; q < ldc; q++)
                        CHECK(c[r * ldc + q] == SENTINEL, "%s ta %d tb %d %dx%dx%d: wrote past C's row %ld",
                              col ? "col" : "row", ta, tb, m, n, k, r);
        free(a);
        free(b);
        free(c);
        free(c0);
}

START_TEST(test_sgemm_f64_shapes)
{
        const struct gshape *sh = &gshapes[_i];
        struct goperands g = { .m = sh->m, .n = sh->n, .k = sh->k };
        int turn = _i;

        g.a = malloc(sizeof(float) * (size_t)(g.m * g.k));
        g.b = malloc(sizeof(float) * (size_t)(g.k * g.n));
        g.s = malloc(sizeof(double) * (size_t)(g.m * g.n));
        fill(g.a, (size_t)(g.m * g.k), (uint32_t)(g.m * 7 + g.k));
        fill(g.b, (size_t)(g.k * g.n), (uint32_t)(g.n * 11 + g.k));
        for (int i = 0; i < g.m; i++)
                for (int j = 0; j < g.n; j++) {
                        double s = 0.0;
                        for (int p = 0; p < g.k; p++)
                                s += (double)g.a[i * g.k + p] * (double)g.b[p * g.n + j];
                        g.s[i * g.n + j] = s;
                }
        for (int col = 0; col < 2; col++)
                for (int t = 0; t < 4; t++)
                        for (int ab = 0; ab < 6; ab++) {
                                if (!sh->all && ab != turn++ % 6)
                                        continue;
                                gemm_case(&g, col, t & 1, t >> 1, alphas[ab / 3], betas[ab % 3]);
                        }
        free(g.a);
        free(g.b);
        free(g.s);
}
END_TEST

/* k = 0: no products, C = beta C (0 for beta 0, whatever C held); m or n 0: nothing. */
START_TEST(test_sgemm_f64_empty)
{
        enum { M = 5, N = 7, LDC = 9 };
        const float bs[4] = { 0.0f, 1.0f, -2.0f, 0.5f };
        float a[64], b[64], c0[N * LDC], c[N * LDC];

        fill(a, NELEM(a), 1);
        fill(b, NELEM(b), 2);
        fill(c0, NELEM(c0), 3);
        for (int col = 0; col < 2; col++)
                for (int bi = 0; bi < 4; bi++) {
                        long rows = col ? N : M, cols = col ? M : N;
                        memcpy(c, c0, sizeof(c));
                        if (bs[bi] == 0.0f)
                                for (long r = 0; r < rows; r++)
                                        for (long q = 0; q < cols; q++)
                                                c[r * LDC + q] = NAN;
                        ops_sgemm_force(OPS_SGEMM_F64);
                        ops_sgemm(col ? CblasColMajor : CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, 0, 1.0f, a,
                                  8, b, 8, bs[bi], c, LDC);
                        ops_sgemm_force(OPS_SGEMM_AUTO);
                        for (long r = 0; r < rows; r++)
                                for (long q = 0; q < LDC; q++) {
                                        float want = q < cols ? bs[bi] * c0[r * LDC + q] : c0[r * LDC + q];
                                        CHECK(c[r * LDC + q] == want, "k 0 %s beta %g: [%ld,%ld] %g, want %g",
                                              col ? "col" : "row", bs[bi], r, q, c[r * LDC + q], want);
                                }
                }
        /* m 0, n 0: C untouched */
        memcpy(c, c0, sizeof(c));
        ops_sgemm_force(OPS_SGEMM_F64);
        ops_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 0, N, 4, 1.0f, a, 4, b, N, 0.0f, c, LDC);
        ops_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, 0, 4, 1.0f, a, 4, b, 1, 0.0f, c, LDC);
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ck_assert_int_eq(memcmp(c, c0, sizeof(c)), 0);
}
END_TEST

/* ---- cancellation ---- */

/* A sum of products with a compensated (Neumaier) sum: exact to about 2^-106 of the terms. */
static double exact_dot(const float *a, const float *b, long k, long stride_b)
{
        double s = 0.0, e = 0.0;

        for (long p = 0; p < k; p++) {
                double t = (double)a[p] * (double)b[p * stride_b], u = s + t;
                e += fabs(s) >= fabs(t) ? (s - u) + t : (t - u) + s;
                s = u;
        }
        return s + e;
}

START_TEST(test_sgemm_f64_cancellation)
{
        enum { M = 3, K = 4096, N = 96 };
        const float scale[M] = { 1.0f, 0.5f, 4.0f }; /* rows: exact multiples of one row */
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *bt = malloc(sizeof(float) * N * K), *c = malloc(sizeof(float) * M * N);
        double ref[M * N];

        fill(a, K, 21);
        a[K - 1] = 1.0f;
        for (int i = 1; i < M; i++)
                for (int p = 0; p < K; p++)
                        a[i * K + p] = a[p] * scale[i];
        fill(b, (size_t)K * N, 22);
        /* B's last row: column j sums to S_j - float(S_j), at most 2^-24 |S_j| */
        for (int j = 0; j < N; j++) {
                b[(K - 1) * N + j] = 0.0f;
                b[(K - 1) * N + j] = -(float)exact_dot(a, b + j, K, N);
        }
        for (int p = 0; p < K; p++)
                for (int j = 0; j < N; j++)
                        bt[j * K + p] = b[p * N + j];
        double big = 0.0;
        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        ref[i * N + j] = exact_dot(a + i * K, b + j, K, N);
                        big = fmax(big, fabs(ref[i * N + j]));
                }
        ck_assert_msg(big < 1e-4, "the sums do not cancel: %g", big);

        for (int tb = 0; tb < 2; tb++) {
                const float *bp = tb ? bt : b;
                int ldb = tb ? K : N;
                double err32 = 0.0, err64 = 0.0;

                ops_sgemm_force(OPS_SGEMM_OPENBLAS);
                ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, K, bp, ldb,
                          0.0f, c, N);
                for (int i = 0; i < M * N; i++)
                        err32 = fmax(err32, fabs((double)c[i] - ref[i]));
                ops_sgemm_force(OPS_SGEMM_F64);
                ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, K, bp, ldb,
                          0.0f, c, N);
                ops_sgemm_force(OPS_SGEMM_AUTO);
                for (int i = 0; i < M * N; i++) {
                        double e = fabs((double)c[i] - ref[i]);
                        err64 = fmax(err64, e);
                        CHECK(e < 1e-9, "tb %d: C[%d,%d] %.9g, exact %.12g", tb, i / N, i % N, c[i], ref[i]);
                }
                ck_assert_msg(err32 > 1e-6, "tb %d: float32 accumulation is off by only %g (the test proves nothing)",
                              tb, err32);
                ck_assert(err64 < err32 * 1e-3);
        }
        free(a);
        free(b);
        free(bt);
        free(c);
}
END_TEST

/* ---- float64 packed weights ---- */

/* C = alpha A B + beta C under OPS_SGEMM_F64 (on p when not NULL), A m x k row-major. */
static void f64_gemm(const struct ops_packed_b *p, int tb, int m, int n, int k, float alpha, const float *a,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
        ops_sgemm_force(OPS_SGEMM_F64);
        ops_sgemm_packed(p);
        ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, k, b, ldb, beta, c,
                  ldc);
        ops_sgemm_packed(NULL);
        ops_sgemm_force(OPS_SGEMM_AUTO);
}

/* The same call packed and unpacked: bit-identical; runs counts the packed ones. */
static void same_packed(const struct ops_packed_b *p, int tb, int m, int n, int k, float alpha, const float *a,
                        const float *b, int ldb, float beta, const float *cinit, uint64_t runs_after, const char *what)
{
        size_t nc = (size_t)m * (size_t)n;
        float *c0 = malloc(nc * 4), *c1 = malloc(nc * 4);

        memcpy(c0, cinit, nc * 4);
        memcpy(c1, cinit, nc * 4);
        f64_gemm(NULL, tb, m, n, k, alpha, a, b, ldb, beta, c0, n);
        f64_gemm(p, tb, m, n, k, alpha, a, b, ldb, beta, c1, n);
        ck_assert_msg(ops_packed_b_runs(p) == runs_after, "tb %d %s: %llu packed runs, want %llu", tb, what,
                      (unsigned long long)ops_packed_b_runs(p), (unsigned long long)runs_after);
        for (size_t i = 0; i < nc; i++)
                CHECK(memcmp(&c0[i], &c1[i], 4) == 0, "tb %d %s: [%zu,%zu] packed %.9g, plain %.9g", tb,
                      what, i / (size_t)n, i % (size_t)n, c1[i], c0[i]);
        /* and both right */
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0.0;
                        for (int q = 0; q < k; q++)
                                s += (double)a[i * k + q] * (double)(tb ? b[j * ldb + q] : b[q * ldb + j]);
                        double ref = (double)alpha * s + (double)beta * (double)cinit[i * n + j];
                        CHECK(close_f64(c1[i * n + j], ref), "tb %d %s: [%d,%d] %.9g, double %.12g", tb, what,
                              i, j, c1[i * n + j], ref);
                }
        free(c0);
        free(c1);
}

START_TEST(test_sgemm_f64_packed)
{
        enum { M = 70, K = 150, N = 300 };
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *b2 = malloc(sizeof(float) * K * N), *cz = calloc((size_t)M * N, 4), *cf = malloc(sizeof(float) * M * N);
        char err[128] = "";

        fill(a, (size_t)M * K, 31);
        fill(b, (size_t)K * N, 32);
        fill(b2, (size_t)K * N, 33);
        fill(cf, (size_t)M * N, 34);
        for (int tb = 0; tb < 2; tb++) {
                int ldb = tb ? K : N;
                struct ops_packed_b *p = ops_packed_b_new_f64(b, K, N, tb, err, sizeof(err));
                ck_assert_msg(p != NULL, "pack: %s", err);
                ck_assert_uint_ge(ops_packed_b_bytes(p), (uint64_t)K * N * sizeof(double));
                ck_assert_uint_eq(ops_packed_b_runs(p), 0);

                same_packed(p, tb, M, N, K, 1.0f, a, b, ldb, 0.0f, cz, 1, "whole");
                same_packed(p, tb, M, N, K, 1.0f, a, b, ldb, 1.0f, cf, 2, "beta 1");
                /* rows 17..62, as a row part of a split node */
                same_packed(p, tb, 46, N, K, 1.0f, a + 17 * K, b, ldb, 0.0f, cz, 3, "row part");
                /* column blocks, as column parts: inside a block, across blocks, B's last */
                static const int cols[3][2] = { { 40, 70 }, { 0, 33 }, { 256, 44 } };
                for (int q = 0; q < 3; q++) {
                        int lo = cols[q][0], w = cols[q][1];
                        char what[32];
                        snprintf(what, sizeof(what), "columns %d..%d", lo, lo + w);
                        same_packed(p, tb, M, w, K, 1.0f, a, tb ? b + lo * K : b + lo, ldb, q == 1 ? 1.0f : 0.0f,
                                    q == 1 ? cf : cz, 4 + (uint64_t)q, what);
                }
                /* calls the packed B does not take: the plain path, still right */
                same_packed(p, tb, M, N, K, 0.5f, a, b, ldb, 0.0f, cz, 6, "alpha 0.5");
                same_packed(p, tb, M, N, K, 1.0f, a, b2, ldb, 0.0f, cz, 6, "another B");
                same_packed(p, tb, M, N, K, 1.0f, a, b, ldb, -2.0f, cf, 6, "beta -2");

                /* the float32 packed variants find nothing of theirs in it: their plain path */
                static const int others[2] = { OPS_SGEMM_ONEDNN_PACKED, OPS_SGEMM_XSMM_PACKED };
                for (int v = 0; v < 2; v++) {
                        float *c = malloc(sizeof(float) * M * N);
                        ops_sgemm_force(others[v]);
                        ops_sgemm_packed(p);
                        ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, K, b,
                                  ldb, 0.0f, c, N);
                        ops_sgemm_packed(NULL);
                        ops_sgemm_force(OPS_SGEMM_AUTO);
                        ck_assert_uint_eq(ops_packed_b_runs(p), 6);
                        for (int i = 0; i < M; i += 7)
                                for (int j = 0; j < N; j++) {
                                        double s = 0.0;
                                        for (int q = 0; q < K; q++)
                                                s += (double)a[i * K + q] *
                                                     (double)(tb ? b[j * K + q] : b[q * N + j]);
                                        CHECK(fabs(c[i * N + j] - s) < 1e-4, "variant %d tb %d: [%d,%d] %g, %g",
                                              others[v], tb, i, j, c[i * N + j], s);
                                }
                        free(c);
                }
                ops_packed_b_free(p);
        }
        /* nothing to pack */
        ck_assert_ptr_null(ops_packed_b_new_f64(b, 0, N, 0, err, sizeof(err)));
        ck_assert_str_ne(err, "");
        free(a);
        free(b);
        free(b2);
        free(cz);
        free(cf);
}
END_TEST

/* ---- convolutions ---- */

/* A convolution of up to 3 spatial dims; a 2-D one has extent 1 (and no pads) in slot 0, a
 * 1-D one in slots 0 and 1. */
struct cgeo {
        int nsp;
        int64_t n, c, m, group;
        int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
        int bias;
};

/* A 2-D geometry: images, channels, input extents, filters, kernel extents, groups, strides,
 * dilations, pads (top, left, bottom, right), bias. */
#define G2(n_, c_, ih, iw, m_, kh, kw, g_, sh, sw, dh, dw, pt, pl, pbot, pr, b_)                                     \
        {                                                                                                          \
                .nsp = 2, .n = n_, .c = c_, .m = m_, .group = g_, .in = { 1, ih, iw }, .k = { 1, kh, kw },         \
                .s = { 1, sh, sw }, .d = { 1, dh, dw }, .pb = { 0, pt, pl }, .pe = { 0, pbot, pr }, .bias = b_     \
        }

static const struct cgeo conv2d[] = {
        G2(2, 3, 8, 10, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),     /* 3x3, pads 1 */
        G2(2, 4, 11, 9, 6, 3, 3, 1, 2, 2, 1, 1, 0, 1, 1, 0, 0),     /* stride 2, pads 0,1,1,0 */
        G2(2, 3, 10, 14, 4, 3, 2, 1, 2, 3, 1, 1, 1, 0, 0, 2, 1),    /* strides 2,3, pads 1,0,0,2 */
        G2(2, 3, 12, 12, 4, 3, 3, 1, 1, 1, 2, 2, 2, 2, 2, 2, 1),    /* dilation 2 */
        G2(1, 2, 13, 15, 3, 3, 3, 1, 2, 2, 2, 3, 1, 3, 2, 0, 0),    /* strides 2 with dilations 2,3 */
        G2(2, 4, 7, 9, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1),      /* two groups */
        G2(2, 6, 8, 8, 6, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1, 0),      /* depthwise */
        G2(2, 5, 6, 7, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0),      /* 1x1 */
        G2(2, 5, 9, 10, 3, 1, 1, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1),     /* 1x1, stride 3 */
        G2(2, 3, 9, 13, 4, 5, 3, 1, 1, 1, 1, 1, 2, 1, 2, 1, 1),     /* 5x3 on 9x13 */
        G2(2, 3, 9, 13, 4, 5, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0),     /* 5x3, no pads */
        G2(1, 2, 4, 5, 3, 3, 3, 1, 1, 1, 1, 1, 4, 3, 4, 3, 1),      /* lines in the padding only */
        G2(1, 16, 20, 40, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),  /* wider */
        /* enough filters for mixed accumulation's transposed kernel (ops_mixed_conv_lines) */
        G2(1, 8, 9, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),    /* 64 filters, k 72 */
        G2(1, 20, 7, 9, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0),    /* 70: blocks of 64 and 6, k 180 */
        G2(2, 6, 6, 7, 80, 3, 3, 2, 1, 1, 1, 2, 1, 2, 1, 2, 1),     /* two groups of 40, dilations 1,2 */
        G2(1, 4, 5, 37, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),    /* lines of 37: 16 + 16 + 5 positions */
};

static int64_t out_ext(const struct cgeo *g, int i)
{
        return (g->in[i] + g->pb[i] + g->pe[i] - ((g->k[i] - 1) * g->d[i] + 1)) / g->s[i] + 1;
}

static size_t nx_of(const struct cgeo *g)
{
        return (size_t)(g->n * g->c * g->in[0] * g->in[1] * g->in[2]);
}

static size_t nw_of(const struct cgeo *g)
{
        return (size_t)(g->m * (g->c / g->group) * g->k[0] * g->k[1] * g->k[2]);
}

static size_t ny_of(const struct cgeo *g)
{
        return (size_t)(g->n * g->m * out_ext(g, 0) * out_ext(g, 1) * out_ext(g, 2));
}

/* Output element (n, m, o[0], o[1], o[2]) of the convolution, without bias, summed in
 * double. */
static double ref_point(const struct cgeo *g, const float *x, const float *w, int64_t n, int64_t m, const int64_t o[3])
{
        int64_t cg = g->c / g->group, mg = g->m / g->group;
        double s = 0.0;

        for (int64_t c = 0; c < cg; c++) {
                const float *xc = x + (n * g->c + (m / mg) * cg + c) * g->in[0] * g->in[1] * g->in[2];
                const float *wc = w + (m * cg + c) * g->k[0] * g->k[1] * g->k[2];
                for (int64_t kz = 0; kz < g->k[0]; kz++)
                        for (int64_t kr = 0; kr < g->k[1]; kr++)
                                for (int64_t kq = 0; kq < g->k[2]; kq++) {
                                        int64_t iz = o[0] * g->s[0] - g->pb[0] + kz * g->d[0];
                                        int64_t ir = o[1] * g->s[1] - g->pb[1] + kr * g->d[1];
                                        int64_t iq = o[2] * g->s[2] - g->pb[2] + kq * g->d[2];
                                        if (iz < 0 || iz >= g->in[0] || ir < 0 || ir >= g->in[1] || iq < 0 ||
                                            iq >= g->in[2])
                                                continue;
                                        s += (double)xc[(iz * g->in[1] + ir) * g->in[2] + iq] *
                                             (double)wc[(kz * g->k[1] + kr) * g->k[2] + kq];
                                }
        }
        return s;
}

/* The convolution (+ bias) summed in double. */
static void ref_conv(const struct cgeo *g, const float *x, const float *w, const float *b, double *y)
{
        int64_t o[3];
        size_t yi = 0;

        for (int64_t n = 0; n < g->n; n++)
                for (int64_t m = 0; m < g->m; m++)
                        for (o[0] = 0; o[0] < out_ext(g, 0); o[0]++)
                                for (o[1] = 0; o[1] < out_ext(g, 1); o[1]++)
                                        for (o[2] = 0; o[2] < out_ext(g, 2); o[2]++)
                                                y[yi++] = (b ? (double)b[m] : 0.0) + ref_point(g, x, w, n, m, o);
}

static void check_conv(const struct cgeo *g, const float *y, const double *ref, const char *what, int idx)
{
        size_t ny = ny_of(g);

        for (size_t i = 0; i < ny; i++)
                CHECK(close_f64(y[i], ref[i]), "%s %d: y[%zu] %.9g, double %.12g", what, idx, i, y[i], ref[i]);
}

static struct ops_conv2d_f64_args f64_args(const struct cgeo *g, const float *x, const float *w, const float *b,
                                           float *y, int64_t lo, int64_t hi)
{
        return (struct ops_conv2d_f64_args){
                .x = x, .w = w, .bias = b, .y = y, .n = g->n, .c = g->c, .ih = g->in[1], .iw = g->in[2], .m = g->m,
                .oh = out_ext(g, 1), .ow = out_ext(g, 2), .kh = g->k[1], .kw = g->k[2], .group = g->group,
                .strides = { g->s[1], g->s[2] }, .dilations = { g->d[1], g->d[2] },
                .pads = { g->pb[1], g->pb[2], g->pe[1], g->pe[2] }, .lo = lo, .hi = hi,
        };
}

static void conv_band(const struct cgeo *g, const float *x, const float *w, const float *b, float *y, int64_t lo,
                      int64_t hi)
{
        struct ops_conv2d_f64_args a = f64_args(g, x, w, b, y, lo, hi);
        char err[200] = "";
        int rc = ops_conv2d_f64(&a, err, sizeof(err));

        ck_assert_msg(rc == 0, "ops_conv2d_f64 [%lld, %lld): %d %s", (long long)lo, (long long)hi, rc, err);
}

/* Lines [lo, hi) of every (image, channel) of y equal full's bit for bit, the others hold
 * the sentinel. */
static void check_lines(const struct cgeo *g, const float *y, const float *full, int64_t lo, int64_t hi, int idx)
{
        int64_t oh = out_ext(g, 1), ow = out_ext(g, 2);

        for (int64_t p = 0; p < g->n * g->m; p++)
                for (int64_t r = 0; r < oh; r++)
                        for (int64_t q = 0; q < ow; q++) {
                                size_t i = (size_t)((p * oh + r) * ow + q);
                                if (r >= lo && r < hi)
                                        CHECK(memcmp(&y[i], &full[i], 4) == 0,
                                              "case %d band [%lld,%lld): line %lld col %lld %.9g, whole %.9g",
                                              idx, (long long)lo, (long long)hi, (long long)r, (long long)q, y[i],
                                              full[i]);
                                else
                                        CHECK(y[i] == SENTINEL, "case %d band [%lld,%lld) wrote line %lld", idx,
                                              (long long)lo, (long long)hi, (long long)r);
                        }
}

START_TEST(test_conv2d_f64)
{
        const struct cgeo *g = &conv2d[_i];
        size_t nx = nx_of(g), nw = nw_of(g), ny = ny_of(g);
        int64_t oh = out_ext(g, 1);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)g->m * 4);
        float *y = malloc(ny * 4), *yb = malloc(ny * 4);
        double *ref = malloc(ny * sizeof(double));
        const float *bias = g->bias ? b : NULL;

        fill(x, nx, 41 + (uint32_t)_i);
        fill(w, nw, 42);
        fill(b, (size_t)g->m, 43);
        ref_conv(g, x, w, bias, ref);
        set_all(y, ny, SENTINEL);
        conv_band(g, x, w, bias, y, 0, 0);
        check_conv(g, y, ref, "conv2d", _i);

        /* bands of lines: only their own lines, together the whole result exactly */
        int64_t cut1 = oh > 1 ? 1 : 0, cut2 = oh > 3 ? 3 : oh;
        set_all(yb, ny, SENTINEL);
        conv_band(g, x, w, bias, yb, cut1, cut2);
        check_lines(g, yb, y, cut1, cut2, _i);
        conv_band(g, x, w, bias, yb, cut2, cut2); /* empty: nothing */
        check_lines(g, yb, y, cut1, cut2, _i);
        conv_band(g, x, w, bias, yb, cut2, 0); /* hi 0: to the last line */
        check_lines(g, yb, y, cut1, oh, _i);
        conv_band(g, x, w, bias, yb, 0, cut1);
        check_lines(g, yb, y, 0, oh, _i);
        free(x);
        free(w);
        free(b);
        free(y);
        free(yb);
        free(ref);
}
END_TEST

/* ---- Conv through the registry ---- */

static const struct cgeo conv_reg[] = {
        /* 1-D: two groups, stride 2, dilation 2, pads 3,1 */
        { .nsp = 1, .n = 2, .c = 4, .m = 6, .group = 2, .in = { 1, 1, 37 }, .k = { 1, 1, 5 }, .s = { 1, 1, 2 },
          .d = { 1, 1, 2 }, .pb = { 0, 0, 3 }, .pe = { 0, 0, 1 }, .bias = 1 },
        /* 1-D: one group, pads 1 */
        { .nsp = 1, .n = 1, .c = 3, .m = 5, .group = 1, .in = { 1, 1, 50 }, .k = { 1, 1, 3 }, .s = { 1, 1, 1 },
          .d = { 1, 1, 1 }, .pb = { 0, 0, 1 }, .pe = { 0, 0, 1 }, .bias = 0 },
        /* 2-D: two groups, strides 2,1, dilations 1,2, pads 1,2,0,1 */
        G2(2, 4, 11, 9, 6, 3, 3, 2, 2, 1, 1, 2, 1, 2, 0, 1, 1),
        /* 3-D: 264 output lines of 216 x 22 im2col columns, 13 lines a band */
        { .nsp = 3, .n = 1, .c = 8, .m = 4, .group = 1, .in = { 12, 22, 22 }, .k = { 3, 3, 3 }, .s = { 1, 1, 1 },
          .d = { 1, 1, 1 }, .pb = { 1, 1, 1 }, .pe = { 1, 1, 1 }, .bias = 1 },
};

struct conv_call {
        struct ops_call call;
        int64_t pads[6], strides[3], dil[3];
};

static void conv_call_init(struct conv_call *cc, const struct cgeo *g, float *x, float *w, float *b, float *y)
{
        struct ops_call *c = &cc->call;
        int o = 3 - g->nsp;

        memset(cc, 0, sizeof(*cc));
        c->nin = g->bias ? 3 : 2;
        c->nout = 1;
        c->opset = 17;
        c->in[0] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = g->nsp + 2,
                                        .dims = { g->n, g->c }, .data = x };
        c->in[1] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = g->nsp + 2,
                                        .dims = { g->m, g->c / g->group }, .data = w };
        c->out[0] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = g->nsp + 2,
                                         .dims = { g->n, g->m }, .data = y };
        for (int i = 0; i < g->nsp; i++) {
                c->in[0].dims[2 + i] = g->in[o + i];
                c->in[1].dims[2 + i] = g->k[o + i];
                c->out[0].dims[2 + i] = out_ext(g, o + i);
                cc->pads[i] = g->pb[o + i];
                cc->pads[g->nsp + i] = g->pe[o + i];
                cc->strides[i] = g->s[o + i];
                cc->dil[i] = g->d[o + i];
        }
        if (g->bias)
                c->in[2] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = 1, .dims = { g->m }, .data = b };
        const char *names[3] = { "pads", "strides", "dilations" };
        const int64_t *vals[3] = { cc->pads, cc->strides, cc->dil };
        for (int a = 0; a < 3; a++) {
                snprintf(c->attr[a].name, sizeof(c->attr[a].name), "%s", names[a]);
                c->attr[a].type = OPS_ATTR_INTS;
                c->attr[a].n = a ? g->nsp : 2 * g->nsp;
                c->attr[a].ints = vals[a];
        }
        snprintf(c->attr[3].name, sizeof(c->attr[3].name), "group");
        c->attr[3].type = OPS_ATTR_INT;
        c->attr[3].i = g->group;
        c->nattr = 4;
}

/* Lines [2, OH) then [0, 2) of a 2-D call into yr through ops_conv_rows_acc (mixed or
 * float64): 1; for another call, that it is refused and nothing written: 0. */
static int rows_in_two(struct conv_call *cc, const struct cgeo *g, int mixed, float *yr, size_t ny)
{
        char err[256] = "";

        cc->call.out[0].data = yr;
        set_all(yr, ny, SENTINEL);
        if (g->nsp != 2) {
                ck_assert_int_eq(ops_conv_rows_acc(&cc->call, mixed, 0, 1, err, sizeof(err)), 1);
                for (size_t i = 0; i < ny; i++)
                        CHECK(yr[i] == SENTINEL, "%d-D: ops_conv_rows_acc refused but wrote y[%zu]", g->nsp, i);
                return 0;
        }
        int64_t oh = out_ext(g, 1);
        ck_assert_msg(ops_conv_rows_acc(&cc->call, mixed, 2, oh, err, sizeof(err)) == 0, "lines 2..: %s", err);
        ck_assert_msg(ops_conv_rows_acc(&cc->call, mixed, 0, 2, err, sizeof(err)) == 0, "lines 0, 1: %s", err);
        return 1;
}

/* Output channel m of element i of a convolution's output (NCHW-like, any extents) */
static int64_t chan_of(const struct cgeo *g, size_t i)
{
        int64_t plane = out_ext(g, 0) * out_ext(g, 1) * out_ext(g, 2);
        return (int64_t)(i / (size_t)plane) % g->m;
}

/* What a mixed convolution's outputs are made of, for the outputs that cancel against their
 * bias, shift or residual (ops_mixed_cancels): the runs' sums with the bias rounded once
 * (runs, mixed_point's), the exact sums without bias (exact0), their terms' magnitudes
 * (abs), the bias (NULL: none). NULL under float64 accumulation. */
struct mixed_ref {
        const float *runs;
        const double *exact0, *abs;
        const float *b;
};

/* got is the exact output s (a convolution's sum with its affine) rounded once, plus the
 * residual r (NULL: none) in float32, then Relu (relu): within a unit in the last place of
 * the result, float64's error over the terms (magnitudes summing to abs) and, with a
 * residual, a unit of s (its rounding may go either way where float64's error straddles a
 * rounding boundary) */
static int refined_ok(float got, double s, double abs, const float *r, int relu)
{
        double v = r ? (double)((float)s + *r) : s, want = relu && v < 0 ? 0.0 : v;
        double slack = ldexp(abs, -46) + (r ? ldexp(fabs(s), -23) : 0.0);

        return fabs((double)got - want) <= ldexp(fabs(want), -23) + slack + 1e-30;
}

/* whether the kernels may sum output i again (the paths through conv_mixed_padded do, the
 * im2col's do not): its stored value v (the runs' with the affine, rounded) cancels against
 * against or the residual r (NULL: none) */
static int may_refine(const struct mixed_ref *mr, float v, double against, const float *r)
{
        return mr && ops_mixed_cancels(v, (float)against, r);
}

/* The channels' float64 affine (struct ops_conv_post's scale and shift) in place of the
 * bias, on the lines rows_in_two takes, alone and with a residual and Relu:
 *   - scale 4 and shift 4 b (b: the call's bias, 0 without): exactly 4 times yr (the same
 *     lines with the bias), so the sums are the kernels' own, scaled;
 *   - scale 1 + m / 7 and shift b / 3 - 1 / 16 on channel m: fma(sum, scale, shift) rounded
 *     once, sum the convolution's float64 sum without bias: bit for bit where exact (the
 *     AVX-512 kernel's runs' sums), else within one rounding and bound[i] of it. */
static void affine_matches(struct conv_call *cc, const struct cgeo *g, int mixed, const float *yr, size_t ny,
                           const double *sum, int exact, const double *bound, const struct mixed_ref *mr)
{
        float *yp = malloc(ny * 4), *r = malloc(ny * 4);
        double *sc = malloc((size_t)g->m * sizeof(double)), *sh = malloc((size_t)g->m * sizeof(double));
        const float *b = g->bias ? cc->call.in[2].data : NULL;
        int64_t oh = out_ext(g, 1);
        char err[256] = "";

        ck_assert_ptr_nonnull(yp);
        ck_assert_ptr_nonnull(r);
        ck_assert_ptr_nonnull(sc);
        ck_assert_ptr_nonnull(sh);
        fill(r, ny, 73);
        for (int kind = 0; kind < 2; kind++) {
                for (int64_t m = 0; m < g->m; m++) {
                        double bm = b ? (double)b[m] : 0.0;
                        sc[m] = kind ? 1.0 + (double)m / 7.0 : 4.0;
                        sh[m] = kind ? bm / 3.0 - 0.0625 : 4.0 * bm;
                }
                for (int with_post = 0; with_post < 2; with_post++) {
                        struct ops_conv_post post = { with_post ? r : NULL, with_post, sc, sh };
                        cc->call.out[0].data = yp;
                        set_all(yp, ny, SENTINEL);
                        ck_assert_msg(ops_conv_rows_acc_post(&cc->call, mixed, 2, oh, &post, err, sizeof(err)) == 0,
                                      "affine, lines 2..: %s", err);
                        ck_assert_msg(ops_conv_rows_acc_post(&cc->call, mixed, 0, 2, &post, err, sizeof(err)) == 0,
                                      "affine, lines 0, 1: %s", err);
                        for (size_t i = 0; i < ny; i++) {
                                int64_t m = chan_of(g, i);
                                float v = kind ? (float)fma(sum[i], sc[m], sh[m]) : 4.0f * yr[i];
                                float got = yp[i];
                                /* an output that cancels may be the exact one instead */
                                float runs = mr ? (float)fma(sum[i], sc[m], sh[m]) : 0.0f;
                                if (may_refine(mr, runs, fabs(sh[m]), with_post ? &r[i] : NULL) &&
                                    refined_ok(got, fma(mr->exact0[i], sc[m], sh[m]), mr->abs[i] * sc[m] + fabs(sh[m]),
                                               with_post ? &r[i] : NULL, with_post))
                                        continue;
                                if (with_post) { /* undo nothing: apply the same post to the want */
                                        v = v + r[i];
                                        v = v < 0 ? 0.0f : v;
                                }
                                if (kind && !exact) {
                                        double d = fabs((double)got - (double)v);
                                        CHECK(d <= ldexp(fabs((double)v), -22) + 2 * bound[i] * sc[m] + 1e-30,
                                              "%s Conv, affine %d: y[%zu] %.9g, want %.9g", mixed ? "mixed" : "float64",
                                              with_post, i, got, v);
                                        continue;
                                }
                                CHECK(memcmp(&got, &v, 4) == 0, "%s Conv, affine %d/%d: y[%zu] %.9g, want %.9g",
                                      mixed ? "mixed" : "float64", kind, with_post, i, got, v);
                        }
                }
        }
        free(yp);
        free(r);
        free(sc);
        free(sh);
}

/* ops_conv_rows_acc_post on the lines rows_in_two took ([2, OH), then [0, 2)), with a
 * residual and Relu, then Relu alone: each element yr's (the same lines without the
 * post-op) plus the residual's, in float32, then negatives +0, bit for bit. */
static void post_matches(struct conv_call *cc, const struct cgeo *g, int mixed, const float *yr, size_t ny,
                         const struct mixed_ref *mr)
{
        float *yp = malloc(ny * 4), *r = malloc(ny * 4);
        int64_t oh = out_ext(g, 1);
        char err[256] = "";

        ck_assert_ptr_nonnull(yp);
        ck_assert_ptr_nonnull(r);
        fill(r, ny, 71);
        for (int with_resid = 1; with_resid >= 0; with_resid--) {
                struct ops_conv_post post = { with_resid ? r : NULL, 1, NULL, NULL };
                cc->call.out[0].data = yp;
                set_all(yp, ny, SENTINEL);
                ck_assert_msg(ops_conv_rows_acc_post(&cc->call, mixed, 2, oh, &post, err, sizeof(err)) == 0,
                              "post, lines 2..: %s", err);
                ck_assert_msg(ops_conv_rows_acc_post(&cc->call, mixed, 0, 2, &post, err, sizeof(err)) == 0,
                              "post, lines 0, 1: %s", err);
                for (size_t i = 0; i < ny; i++) {
                        float v = with_resid ? yr[i] + r[i] : yr[i];
                        v = v < 0 ? 0.0f : v;
                        if (mr) { /* an output that cancels may be the exact one instead */
                                double bm = mr->b ? (double)mr->b[chan_of(g, i)] : 0.0;
                                if (may_refine(mr, mr->runs[i], fabs(bm), with_resid ? &r[i] : NULL) &&
                                    refined_ok(yp[i], mr->exact0[i] + bm, mr->abs[i] + fabs(bm),
                                               with_resid ? &r[i] : NULL, 1))
                                        continue;
                        }
                        CHECK(memcmp(&yp[i], &v, 4) == 0, "%s Conv, %s: y[%zu] %.9g, want %.9g",
                              mixed ? "mixed" : "float64", with_resid ? "residual and Relu" : "Relu", i, yp[i], v);
                }
        }
        free(yp);
        free(r);
}

START_TEST(test_conv_registry_f64)
{
        const struct cgeo *g = &conv_reg[_i];
        const struct ops_def *def = ops_lookup_onnx(NULL, "Conv", 17);
        size_t nx = nx_of(g), nw = nw_of(g), ny = ny_of(g);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)g->m * 4);
        float *y = malloc(ny * 4), *yr = malloc(ny * 4);
        double *ref = malloc(ny * sizeof(double));
        struct conv_call *cc = malloc(sizeof(*cc));
        char err[256] = "";

        ck_assert_ptr_nonnull(def);
        fill(x, nx, 51 + (uint32_t)_i);
        fill(w, nw, 52);
        fill(b, (size_t)g->m, 53);
        ref_conv(g, x, w, g->bias ? b : NULL, ref);
        conv_call_init(cc, g, x, w, b, y);
        ck_assert_msg(ops_check(def, &cc->call, err, sizeof(err)) == 0, "check: %s", err);
        set_all(y, ny, SENTINEL);
        int rc = ops_run_variant(def, &cc->call, OPS_SGEMM_F64, NULL, NULL, err, sizeof(err));
        ck_assert_msg(rc == 0, "Conv: %s", err);
        ck_assert_int_eq(ops_sgemm_forced(), OPS_SGEMM_AUTO);
        check_conv(g, y, ref, "registry Conv", _i);

        /* ops_conv_rows_acc: the lines of a 2-D call exactly; others refused, unwritten */
        if (rows_in_two(cc, g, 0, yr, ny)) {
                ck_assert_int_eq(memcmp(yr, y, ny * 4), 0);
                post_matches(cc, g, 0, yr, ny, NULL);
                /* the affine against the exact sums without bias, within float64's error */
                double *sum = malloc(ny * sizeof(double)), *bound = malloc(ny * sizeof(double));
                ck_assert_ptr_nonnull(sum);
                ck_assert_ptr_nonnull(bound);
                ref_conv(g, x, w, NULL, sum);
                for (size_t i = 0; i < ny; i++)
                        bound[i] = ldexp(fabs(sum[i]) + 1.0, -36); /* the two float64 sums apart */
                affine_matches(cc, g, 0, yr, ny, sum, 0, bound, NULL);
                free(sum);
                free(bound);
        }
        free(cc);
        free(x);
        free(w);
        free(b);
        free(y);
        free(yr);
        free(ref);
}
END_TEST

/* ---- Conv under OPS_SGEMM_MIXED ---- */

/* Output element (n, m, o) of the convolution as the mixed Conv sums it: the terms in the
 * im2col's order (channel, then the kernel's extents; a tap in the padding is a zero term),
 * float32 runs of OPS_MIXED_KB by fused multiply-adds, four runs added as (r0 + r1) +
 * (r2 + r3) in float32, those sums and the bias in float64, rounded once; *ret_abs: the sum
 * of the terms' magnitudes. */
static float mixed_point(const struct cgeo *g, const float *x, const float *w, const float *b, int64_t n, int64_t m,
                         const int64_t o[3], double *ret_abs, double *ret_sum)
{
        int64_t cg = g->c / g->group, mg = g->m / g->group, ks = g->k[0] * g->k[1] * g->k[2], terms = cg * ks;
        double s = 0.0, abs = 0.0;

        for (int64_t q0 = 0; q0 < terms; q0 += 4 * OPS_MIXED_KB) {
                float r[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
                for (int64_t t = q0; t < terms && t < q0 + 4 * OPS_MIXED_KB; t++) {
                        int64_t c = t / ks, kz = t % ks / (g->k[1] * g->k[2]), kr = t % (g->k[1] * g->k[2]) / g->k[2];
                        int64_t kq = t % g->k[2];
                        int64_t iz = o[0] * g->s[0] - g->pb[0] + kz * g->d[0];
                        int64_t ir = o[1] * g->s[1] - g->pb[1] + kr * g->d[1];
                        int64_t iq = o[2] * g->s[2] - g->pb[2] + kq * g->d[2];
                        const float *xc = x + (n * g->c + (m / mg) * cg + c) * g->in[0] * g->in[1] * g->in[2];
                        float xv = iz < 0 || iz >= g->in[0] || ir < 0 || ir >= g->in[1] || iq < 0 || iq >= g->in[2]
                                           ? 0.0f
                                           : xc[(iz * g->in[1] + ir) * g->in[2] + iq];
                        float wv = w[(m * cg + c) * ks + (kz * g->k[1] + kr) * g->k[2] + kq];
                        r[(t - q0) / OPS_MIXED_KB] = fmaf(xv, wv, r[(t - q0) / OPS_MIXED_KB]);
                        abs += fabs((double)xv * (double)wv);
                }
                s += (double)((r[0] + r[1]) + (r[2] + r[3]));
        }
        *ret_abs = abs;
        *ret_sum = s;
        return (float)(s + (b ? (double)b[m] : 0.0));
}

/* y within the mixed bound of the exact ref whose terms' magnitudes sum to abs: one rounding
 * and (OPS_MIXED_KB + 2) 2^-24 of abs. */
static int mixed_ok(float y, double ref, double abs)
{
        return fabs((double)y - ref) <= ldexp(fabs(ref), -23) + (OPS_MIXED_KB + 2) * ldexp(abs, -24) + 1e-30;
}

/* Every geometry of both tables, 2-D ones first. */
static const struct cgeo *mixed_geo(int i)
{
        return i < (int)NELEM(conv2d) ? &conv2d[i] : &conv_reg[i - (int)NELEM(conv2d)];
}

/* Conv through the registry under OPS_SGEMM_MIXED (nn-conv.c's conv_mixed: the im2col in the
 * mixed product's column blocks, bands of lines), on the AVX-512 kernel where the CPU has
 * it (with the filters transposed where conv_mixed_padded takes them, and without) and on
 * libxsmm's kernels: within the mixed bound of the exact sums (one rounding, and
 * (OPS_MIXED_KB + 2) 2^-24 of the terms' magnitudes), on the AVX-512 kernel the runs' sums
 * above bit for bit; ops_conv_rows_acc(mixed) gives a 2-D call's lines (exactly on the
 * AVX-512 kernel, within the bound on libxsmm's) and refuses the others without writing. */
START_TEST(test_conv_registry_mixed)
{
        const struct cgeo *g = mixed_geo(_i);
        const struct ops_def *def = ops_lookup_onnx(NULL, "Conv", 17);
        size_t nx = nx_of(g), nw = nw_of(g), ny = ny_of(g);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)g->m * 4);
        float *y = malloc(ny * 4), *yr = malloc(ny * 4), *want = malloc(ny * 4);
        double *ref = malloc(ny * sizeof(double)), *abs = malloc(ny * sizeof(double));
        double *sum = malloc(ny * sizeof(double)), *bound = malloc(ny * sizeof(double));
        double *exact0 = malloc(ny * sizeof(double));
        struct conv_call *cc = malloc(sizeof(*cc));
        char err[256] = "";
        int64_t o[3];
        size_t yi = 0;

        ck_assert_ptr_nonnull(def);
        ck_assert_ptr_nonnull(exact0);
        fill(x, nx, 61 + (uint32_t)_i);
        fill(w, nw, 62);
        fill(b, (size_t)g->m, 63);
        ref_conv(g, x, w, g->bias ? b : NULL, ref);
        ref_conv(g, x, w, NULL, exact0);
        for (int64_t n = 0; n < g->n; n++)
                for (int64_t m = 0; m < g->m; m++)
                        for (o[0] = 0; o[0] < out_ext(g, 0); o[0]++)
                                for (o[1] = 0; o[1] < out_ext(g, 1); o[1]++)
                                        for (o[2] = 0; o[2] < out_ext(g, 2); o[2]++, yi++)
                                                want[yi] = mixed_point(g, x, w, g->bias ? b : NULL, n, m, o, &abs[yi],
                                                                       &sum[yi]);
        /* libxsmm's kernels: within the mixed bound of the runs' sums' (as mixed_ok) */
        for (size_t i = 0; i < ny; i++)
                bound[i] = (OPS_MIXED_KB + 2) * ldexp(abs[i], -24) + ldexp(fabs(sum[i]), -23);
        conv_call_init(cc, g, x, w, b, y);
        ck_assert_msg(ops_check(def, &cc->call, err, sizeof(err)) == 0, "check: %s", err);
        /* the AVX-512 kernel with and without the transposed one, then libxsmm's */
        for (int pass = 2; pass >= 0; pass--) {
                int exact = ops_mixed_kernel(pass > 0);
                ops_mixed_conv_transposed(pass == 2);
                cc->call.out[0].data = y;
                set_all(y, ny, SENTINEL);
                int rc = ops_run_variant(def, &cc->call, OPS_SGEMM_MIXED, NULL, NULL, err, sizeof(err));
                ck_assert_msg(rc == 0, "Conv: %s", err);
                for (size_t i = 0; i < ny; i++) {
                        CHECK(mixed_ok(y[i], ref[i], abs[i]), "mixed Conv %d: y[%zu] %.9g, double %.12g", _i, i, y[i],
                              ref[i]);
                        /* an output that cancels against its bias may be the exact one instead */
                        float bm = g->bias ? b[chan_of(g, i)] : 0.0f;
                        CHECK(!exact || y[i] == want[i] ||
                                      (ops_mixed_cancels(want[i], fabsf(bm), NULL) &&
                                       refined_ok(y[i], ref[i], abs[i] + fabsf(bm), NULL, 0)),
                              "mixed Conv %d (AVX-512): y[%zu] %.9g, the runs' sums %.9g", _i, i, y[i], want[i]);
                }
                /* libxsmm's kernels may split a run's sum by the band's tiles: the bound only */
                if (rows_in_two(cc, g, 1, yr, ny)) {
                        for (size_t i = 0; i < ny; i++)
                                CHECK(exact ? yr[i] == y[i] : mixed_ok(yr[i], ref[i], abs[i]),
                                      "mixed Conv %d, lines: y[%zu] %.9g, the whole call's %.9g", _i, i, yr[i], y[i]);
                        struct mixed_ref mr = { want, exact0, abs, g->bias ? b : NULL };
                        post_matches(cc, g, 1, yr, ny, &mr);
                        affine_matches(cc, g, 1, yr, ny, sum, exact, bound, &mr);
                }
        }
        ops_mixed_kernel(1);
        ops_mixed_conv_transposed(1);
        free(cc);
        free(x);
        free(w);
        free(b);
        free(y);
        free(yr);
        free(want);
        free(ref);
        free(abs);
        free(sum);
        free(bound);
        free(exact0);
}
END_TEST

/* The transposed kernel's copy of the filters is taken only where the run's budget can
 * spare it: with a budget of exactly what the convolution needs without it, the call still
 * succeeds (the other kernel), records no stop reason, and gives the same sums. */
START_TEST(test_conv_mixed_budget)
{
        const struct cgeo *g = NULL;
        for (size_t i = 0; i < NELEM(conv2d) && !g; i++)
                if (conv2d[i].m == 64)
                        g = &conv2d[i];
        ck_assert_ptr_nonnull(g);
        if (!ops_mixed_conv_transposed(-1)) {
                printf("test_conv_mixed_budget: the AVX-512 kernel is not in use, skipped\n");
                return;
        }
        const struct ops_def *def = ops_lookup_onnx(NULL, "Conv", 17);
        size_t nx = nx_of(g), nw = nw_of(g), ny = ny_of(g);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)g->m * 4);
        float *y[3] = { malloc(ny * 4), malloc(ny * 4), malloc(ny * 4) };
        struct conv_call *cc = malloc(sizeof(*cc));
        uint64_t peak[2] = { 0, 0 };
        char err[256] = "";

        fill(x, nx, 81);
        fill(w, nw, 82);
        fill(b, (size_t)g->m, 83);
        conv_call_init(cc, g, x, w, b, y[0]);
        /* peak[0]: without the copy, peak[1]: with it (no limit) */
        for (int t = 0; t < 2; t++) {
                struct ops_mem_budget budget = { .name = "test" };
                struct ops_runctx ctx = { .mem = &budget };
                ops_mixed_conv_transposed(t);
                cc->call.out[0].data = y[t];
                ops_runctx_set(&ctx);
                int rc = ops_run_variant(def, &cc->call, OPS_SGEMM_MIXED, NULL, NULL, err, sizeof(err));
                ops_runctx_set(NULL);
                ck_assert_msg(rc == 0, "Conv: %s", err);
                peak[t] = atomic_load(&budget.peak);
        }
        ck_assert_msg(peak[1] > peak[0], "the copy of the filters took no memory: %llu, %llu",
                      (unsigned long long)peak[0], (unsigned long long)peak[1]);
        ck_assert_int_eq(memcmp(y[0], y[1], ny * 4), 0);
        struct ops_mem_budget budget = { .name = "test", .limit = peak[0] };
        struct ops_runctx ctx = { .mem = &budget };
        ops_mixed_conv_transposed(1);
        cc->call.out[0].data = y[2];
        set_all(y[2], ny, SENTINEL);
        ops_runctx_set(&ctx);
        int rc = ops_run_variant(def, &cc->call, OPS_SGEMM_MIXED, NULL, NULL, err, sizeof(err));
        ops_runctx_set(NULL);
        ck_assert_msg(rc == 0, "Conv within %llu bytes: %s", (unsigned long long)peak[0], err);
        ck_assert_int_eq(ctx.code, 0);
        ck_assert_uint_le(atomic_load(&budget.peak), peak[0]);
        ck_assert_int_eq(memcmp(y[2], y[0], ny * 4), 0);
        free(cc);
        free(x);
        free(w);
        free(b);
        for (int t = 0; t < 3; t++)
                free(y[t]);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("gemm_f64");
        TCase *tc = tcase_create("gemm_f64");

        tcase_set_timeout(tc, 30);
        tcase_add_loop_test(tc, test_sgemm_f64_shapes, 0, (int)NELEM(gshapes));
        tcase_add_test(tc, test_sgemm_f64_empty);
        tcase_add_test(tc, test_sgemm_f64_cancellation);
        tcase_add_test(tc, test_sgemm_f64_packed);
        tcase_add_loop_test(tc, test_conv2d_f64, 0, (int)NELEM(conv2d));
        tcase_add_loop_test(tc, test_conv_registry_f64, 0, (int)NELEM(conv_reg));
        tcase_add_loop_test(tc, test_conv_registry_mixed, 0, (int)(NELEM(conv2d) + NELEM(conv_reg)));
        tcase_add_test(tc, test_conv_mixed_budget);
        suite_add_tcase(s, tc);
        return check_run(s);
}

/* The mixed-accumulation GEMM variant (ops/blas.h, OPS_SGEMM_MIXED; ops/gemm-mixed.c, and
 * its branch in ops_sgemm): products summed in float32 over runs of OPS_MIXED_KB terms,
 * quads of four runs summed in float32 and the quads in float64, rounded to float32 once.
 * Every test runs twice: under the AVX-512 kernel (where the CPU has AVX-512F; it takes the
 * calls reading at most 8 MiB of B, which is every call here) and
 * under libxsmm's kernels a run at a time.
 *   - ops_sgemm under it and ops_sgemm_mixed called directly, row-major, every
 *     transposition, alpha 1 / beta 0 (over a C full of NaN) and alpha 0.5 / beta 2 (over a
 *     filled C), leading dimensions wider than the operands, m on both sides of the 64-row
 *     tiles, n of the 32-column blocks and of the 256-column bands of B, k of the 32-term
 *     runs (k <= 32: ops_sgemm's float32 path, the kernel's short run alone when called
 *     directly), are within 2^-23 |exact| + (OPS_MIXED_KB + 2) 2^-24 sum |a_i b_i| of the
 *     product summed in double, and write nothing outside C's m x n; ops_sgemm and the
 *     direct call give the same floats for k > 32; a few shapes column-major;
 *   - where the exact result cancels (K = 4096: a product +H and its -H about 4000 terms
 *     later, the other terms in shuffled pairs x b, -x b, and a small remainder), the error
 *     stays within that bound and under 1/3 of float32 accumulation's (OpenBLAS and the
 *     default path; 1/8 to 1/4.6 on the CPUs seen, as their float32 kernels sum), through
 *     ops_sgemm, ops_sgemm_mixed and on a packed B;
 *   - on packed weights (ops_packed_b_new_mixed, transposed B or not), the whole product,
 *     accumulating into C, a row part and column ranges (starting inside a 32-column block,
 *     across blocks, B's last) are computed on the packed copy (ops_packed_b_runs) and equal
 *     the unpacked variant bit for bit, and a column range equals those columns of the whole
 *     product bit for bit (so does ops_mixed_product on a range of ops_mixed_pack_b's
 *     blocks); calls the packed B does not match, and k <= 32, take the plain path;
 *     ops_packed_b_keep keeps the copy for the variant and drops it for another;
 *   - k = 0 gives beta C (0 for beta 0 over a C full of NaN, through ops_sgemm too); m or n
 *     0 writes nothing;
 *   - ops_mixed_pack_b's layout: element (kk, j) at (j / 32) k 32 + kk 32 + j % 32, the last
 *     block's padding zero;
 *   - with no scratch to be had (a run's memory budget of one byte), the plain loop is
 *     within the bound, allocates nothing and records no stop reason;
 *   - the post-op (bias row, Relu) applied per tile gives the floats of the product followed
 *     by the bias and the Relu, packed or not, without scratch, for k = 0, k <= 32 and
 *     k > 32;
 *   - under the AVX-512 kernel, every element is the plain loop's bit for bit (row counts
 *     around its register tiles, the 16-column kernel, k around the runs and quads, every
 *     transposition, alpha and beta), and a column range of a packed B from anywhere gives
 *     those columns of the whole (test_mixed_kernel_plain).
 * Under libxsmm's kernels the bit-for-bit checks of ranges hold only where a part's tiles are
 * the whole's (block_aligned); they sit in tests of their own (test_mixed_packed_bits,
 * test_mixed_product_range), after the accuracy checks of the same calls. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/blas.h"
#include "ops/runctx.h"

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

static int same_bits(float x, float y)
{
        return memcmp(&x, &y, sizeof(x)) == 0;
}

/* A call computes its elements with the same kernels (so the same bits) as the whole
 * product only where its tiles are the whole's: libxsmm may split a run's sum in its own
 * way for a narrower tile or fewer rows, and the results then differ within the bound.
 * Column ranges from a block edge to a block edge (or B's end) keep the whole's tiles. The
 * AVX-512 kernel sums every element the same way whatever the tile: any range (it takes
 * the calls that read at most 8 MiB of B, as every call here does). */
static int block_aligned(int lo, int w, int n)
{
        if (ops_mixed_kernel(-1)) /* the AVX-512 kernel's sums do not depend on the tile */
                return 1;
        return lo % OPS_XSMM_NB == 0 && ((lo + w) % OPS_XSMM_NB == 0 || lo + w == n);
}

/* got is within the bound of a mixed sum of the exact result: its one rounding to float32
 * (with room), and a float32 run's roundings and its quad's two, at most OPS_MIXED_KB + 2
 * units of 2^-24 of the terms' magnitudes (terms: sum |a_i b_i|, plus |beta C| for the
 * float32 path of k <= OPS_MIXED_KB, which rounds beta C too). */
static double mixed_bound(double exact, double terms)
{
        return ldexp(fabs(exact), -23) + (OPS_MIXED_KB + 2) * ldexp(terms, -24) + 1e-30;
}

static int within(float got, double exact, double terms)
{
        return fabs((double)got - exact) <= mixed_bound(exact, terms);
}

/* C = alpha A B + beta C under OPS_SGEMM_MIXED through ops_sgemm (direct 0) or
 * ops_sgemm_mixed without a packed B (direct 1). */
static void mixed_gemm(int direct, enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                       blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b,
                       blasint ldb, float beta, float *c, blasint ldc)
{
        if (direct) {
                ops_sgemm_mixed(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL, 0, NULL);
                return;
        }
        ops_sgemm_force(OPS_SGEMM_MIXED);
        ops_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        ops_sgemm_force(OPS_SGEMM_AUTO);
}

/* ---- shapes ---- */

/* Element (i, j) of an operand stored with leading dimension ld: row-major when !swap. */
static size_t at(int swap, long ld, long i, long j)
{
        return swap ? (size_t)(j * ld + i) : (size_t)(i * ld + j);
}

/* The logical operands of a shape (A m x k, B k x n, row-major), their product summed in
 * double and the sums of |a_i b_i|. */
struct goperands {
        int m, n, k;
        float *a, *b;
        double *s, *t;
};

static void operands_init(struct goperands *g, int m, int n, int k)
{
        g->m = m;
        g->n = n;
        g->k = k;
        g->a = malloc(sizeof(float) * (size_t)m * (size_t)k);
        g->b = malloc(sizeof(float) * (size_t)k * (size_t)n);
        g->s = malloc(sizeof(double) * (size_t)m * (size_t)n);
        g->t = malloc(sizeof(double) * (size_t)m * (size_t)n);
        fill(g->a, (size_t)m * (size_t)k, (uint32_t)(m * 7 + k));
        fill(g->b, (size_t)k * (size_t)n, (uint32_t)(n * 11 + k));
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0.0, t = 0.0;
                        for (int p = 0; p < k; p++) {
                                double v = (double)g->a[i * k + p] * (double)g->b[p * n + j];
                                s += v;
                                t += fabs(v);
                        }
                        g->s[i * n + j] = s;
                        g->t[i * n + j] = t;
                }
}

static void operands_free(struct goperands *g)
{
        free(g->a);
        free(g->b);
        free(g->s);
        free(g->t);
}

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

/* One product under the variant, through ops_sgemm and through ops_sgemm_mixed, against the
 * double reference. */
static void gemm_case(const struct goperands *g, int col, int ta, int tb, float alpha, float beta)
{
        int m = g->m, n = g->n, k = g->k;
        int sa = ta ^ col, sb = tb ^ col, sc = col; /* stored transposed w.r.t. row-major */
        long lda = (sa ? m : k) + 3, ldb = (sb ? k : n) + 5;
        long cr = sc ? n : m, cc = sc ? m : n, ldc = cc + 2;
        size_t nc = (size_t)(cr * ldc);
        float *a = store(g->a, m, k, sa, lda), *b = store(g->b, k, n, sb, ldb);
        float *c0 = malloc(nc * 4), *cv[2] = { malloc(nc * 4), malloc(nc * 4) };
        const char *how[2] = { "ops_sgemm", "ops_sgemm_mixed" };

        fill(c0, nc, (uint32_t)(m + n + k));
        for (long r = 0; r < cr; r++) /* padding between the rows of C: must stay */
                for (long q = cc; q < ldc; q++)
                        c0[r * ldc + q] = SENTINEL;
        for (int d = 0; d < 2; d++) {
                float *c = cv[d];
                memcpy(c, c0, nc * 4);
                if (beta == 0.0f) /* beta 0: C is not read */
                        for (long r = 0; r < cr; r++)
                                for (long q = 0; q < cc; q++)
                                        c[r * ldc + q] = NAN;
                mixed_gemm(d, col ? CblasColMajor : CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                           tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
                           (blasint)ldc);
                for (long i = 0; i < m; i++)
                        for (long j = 0; j < n; j++) {
                                size_t ci = at(sc, ldc, i, j);
                                double bc = (double)beta * (double)c0[ci];
                                double ref = (double)alpha * g->s[i * n + j] + bc;
                                CHECK(within(c[ci], ref, g->t[i * n + j] + fabs(bc)),
                                      "%s %s ta %d tb %d %dx%dx%d alpha %g beta %g: C[%ld,%ld] %.9g, exact %.12g "
                                      "(bound %.3g)",
                                      how[d], col ? "col" : "row", ta, tb, m, n, k, alpha, beta, i, j, c[ci], ref,
                                      mixed_bound(ref, g->t[i * n + j] + fabs(bc)));
                        }
                for (long r = 0; r < cr; r++)
                        for (long q = cc; q < ldc; q++)
                                CHECK(c[r * ldc + q] == SENTINEL, "%s %s ta %d tb %d %dx%dx%d: wrote past C's row %ld",
                                      how[d], col ? "col" : "row", ta, tb, m, n, k, r);
        }
        /* past one run, ops_sgemm is the direct call */
        if (k > OPS_MIXED_KB)
                for (size_t i = 0; i < nc; i++)
                        CHECK(same_bits(cv[0][i], cv[1][i]), "%s ta %d tb %d %dx%dx%d: [%zu] ops_sgemm %.9g, direct %.9g",
                              col ? "col" : "row", ta, tb, m, n, k, i, cv[0][i], cv[1][i]);
        free(a);
        free(b);
        free(c0);
        free(cv[0]);
        free(cv[1]);
}

static const int shape_m[] = { 1, 31, 64, 65, 130 };
static const int shape_n[] = { 1, 31, 32, 33, 100, 257 };
static const int shape_k[] = { 1, 31, 32, 33, 64, 100, 1000 };

/* Row-major, every m x n for one k of shape_k, every transposition, both (alpha, beta). */
START_TEST(test_mixed_shapes)
{
        int k = shape_k[_i];

        for (size_t mi = 0; mi < NELEM(shape_m); mi++)
                for (size_t ni = 0; ni < NELEM(shape_n); ni++) {
                        struct goperands g;
                        operands_init(&g, shape_m[mi], shape_n[ni], k);
                        for (int t = 0; t < 4; t++) {
                                gemm_case(&g, 0, t & 1, t >> 1, 1.0f, 0.0f);
                                gemm_case(&g, 0, t & 1, t >> 1, 0.5f, 2.0f);
                        }
                        operands_free(&g);
                }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
}
END_TEST

/* Column-major on a few shapes. */
START_TEST(test_mixed_colmajor)
{
        static const int shapes[][3] = { { 65, 33, 100 }, { 31, 257, 64 }, { 130, 31, 33 }, { 1, 100, 1000 },
                                         { 64, 1, 31 } };

        for (size_t s = 0; s < NELEM(shapes); s++) {
                struct goperands g;
                operands_init(&g, shapes[s][0], shapes[s][1], shapes[s][2]);
                for (int t = 0; t < 4; t++) {
                        gemm_case(&g, 1, t & 1, t >> 1, 1.0f, 0.0f);
                        gemm_case(&g, 1, t & 1, t >> 1, 0.5f, 2.0f);
                }
                operands_free(&g);
        }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
}
END_TEST

/* ---- k = 0, m = 0, n = 0 ---- */

enum { EM = 5, EN = 7, ELDC = 9, EK = 40 };

/* k = 0 through ops_sgemm (d 0) or ops_sgemm_mixed (d 1): C = beta C, 0 for beta 0 whatever C
 * held (a C full of NaN then), nothing written past each row's n. */
static void k0_case(int d, int col, float beta)
{
        float a[64], b[64], c0[EN * ELDC], c[EN * ELDC];
        long rows = col ? EN : EM, cols = col ? EM : EN;

        fill(a, NELEM(a), 1);
        fill(b, NELEM(b), 2);
        fill(c0, NELEM(c0), 3);
        memcpy(c, c0, sizeof(c));
        if (beta == 0.0f)
                for (long r = 0; r < rows; r++)
                        for (long q = 0; q < cols; q++)
                                c[r * ELDC + q] = NAN;
        mixed_gemm(d, col ? CblasColMajor : CblasRowMajor, CblasNoTrans, CblasNoTrans, EM, EN, 0, 1.0f, a, 8, b, 8,
                   beta, c, ELDC);
        for (long r = 0; r < rows; r++)
                for (long q = 0; q < ELDC; q++) {
                        float want = q < cols ? beta * c0[r * ELDC + q] : c0[r * ELDC + q];
                        CHECK(c[r * ELDC + q] == want, "k 0 %s %s beta %g: [%ld,%ld] %g, want %g",
                              d ? "ops_sgemm_mixed" : "ops_sgemm", col ? "col" : "row", beta, r, q, c[r * ELDC + q],
                              want);
                }
}

/* k = 0 (C = beta C), m or n 0 (nothing written). */
START_TEST(test_mixed_empty)
{
        const float bs[4] = { 0.0f, 1.0f, -2.0f, 0.5f };
        float a[EM * EK], b[EK * EN], c0[EN * ELDC], c[EN * ELDC];

        for (int col = 0; col < 2; col++)
                for (int bi = 0; bi < 4; bi++) {
                        k0_case(1, col, bs[bi]);
                        if (bs[bi] != 0.0f) /* beta 0 through ops_sgemm: test_mixed_k0_beta0 */
                                k0_case(0, col, bs[bi]);
                }
        /* m 0, n 0: C untouched, past one run (the mixed path) and within one */
        fill(a, NELEM(a), 1);
        fill(b, NELEM(b), 2);
        fill(c0, NELEM(c0), 3);
        for (int d = 0; d < 2; d++)
                for (int k = 4; k <= EK; k += EK - 4) {
                        memcpy(c, c0, sizeof(c));
                        mixed_gemm(d, CblasRowMajor, CblasNoTrans, CblasNoTrans, 0, EN, k, 1.0f, a, k, b, EN, 0.0f, c,
                                   ELDC);
                        mixed_gemm(d, CblasRowMajor, CblasNoTrans, CblasNoTrans, EM, 0, k, 1.0f, a, k, b, 1, 0.0f, c,
                                   ELDC);
                        mixed_gemm(d, CblasColMajor, CblasNoTrans, CblasNoTrans, 0, EN, k, 1.0f, a, 1, b, k, 1.0f, c,
                                   ELDC);
                        ck_assert_msg(memcmp(c, c0, sizeof(c)) == 0, "%s k %d: an empty product wrote C",
                                      d ? "ops_sgemm_mixed" : "ops_sgemm", k);
                }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
}
END_TEST

/* k = 0 and beta 0 through ops_sgemm under the variant: C = 0 over a C full of NaN, as for
 * ops_sgemm_mixed and the other variants (BLAS does not read C when beta is 0). */
START_TEST(test_mixed_k0_beta0)
{
        for (int col = 0; col < 2; col++)
                k0_case(0, col, 0.0f);
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
}
END_TEST

/* ---- cancellation ---- */

/* A sum of products with a compensated (Neumaier) sum: exact to about 2^-106 of the terms. */
static double exact_dot(const float *a, const float *b, long k, long stride_b, double *terms)
{
        double s = 0.0, e = 0.0, t = 0.0;

        for (long p = 0; p < k; p++) {
                double v = (double)a[p] * (double)b[p * stride_b], u = s + v;
                e += fabs(s) >= fabs(v) ? (s - u) + v : (v - u) + s;
                s = u;
                t += fabs(v);
        }
        if (terms)
                *terms = t;
        return s + e;
}

START_TEST(test_mixed_cancellation)
{
        enum { M = 3, K = 4096, N = 96 };
        const float scale[M] = { 1.0f, 0.5f, 4.0f }; /* rows: exact multiples of one row */
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *bt = malloc(sizeof(float) * N * K), *c = malloc(sizeof(float) * M * N);
        double *ref = malloc(sizeof(double) * M * N), *terms = malloc(sizeof(double) * M * N);
        int *perm = malloc(sizeof(int) * (K - 2));
        char err[128] = "";

        /* Products that cancel exactly: a large pair, +H at the start of run 1 (the rest of
         * the run zero) and -H at the start of a late run (likewise), which a float32 running
         * sum carries in between, its later additions rounded to the units of H; the other
         * positions in shuffled pairs (p, q) with a_q = -a_p and b_q = b_p in every column;
         * the last two positions a small remainder. */
        enum { R1 = OPS_MIXED_KB, R2 = K - 2 * OPS_MIXED_KB };
        int nfree = 0;
        fill(a, K, 21);
        fill(b, (size_t)K * N, 22);
        for (int i = 0; i < K - 2; i++) {
                if ((i >= R1 && i < R1 + OPS_MIXED_KB) || (i >= R2 && i < R2 + OPS_MIXED_KB)) {
                        a[i] = 0.0f;
                        continue;
                }
                perm[nfree++] = i;
        }
        ck_assert_int_eq(nfree % 2, 0);
        a[R1] = 64.0f;
        a[R2] = -64.0f;
        for (int j = 0; j < N; j++)
                b[(size_t)R1 * N + j] = b[(size_t)R2 * N + j] = 64.0f;
        uint32_t seed = 77;
        for (int i = nfree - 1; i > 0; i--) {
                seed = seed * 1664525u + 1013904223u;
                int j = (int)((seed >> 8) % (uint32_t)(i + 1)), x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
        }
        for (int i = 0; i < nfree; i += 2) {
                int p = perm[i], q = perm[i + 1];
                a[q] = -a[p];
                memcpy(b + (size_t)q * N, b + (size_t)p * N, sizeof(float) * N);
        }
        for (int j = 0; j < N; j++) {
                b[(size_t)(K - 2) * N + j] *= 1e-3f;
                b[(size_t)(K - 1) * N + j] *= 1e-3f;
        }
        for (int i = 1; i < M; i++)
                for (int p = 0; p < K; p++)
                        a[i * K + p] = a[p] * scale[i];
        for (int p = 0; p < K; p++)
                for (int j = 0; j < N; j++)
                        bt[j * K + p] = b[p * N + j];
        double big = 0.0, small_terms = INFINITY;
        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        ref[i * N + j] = exact_dot(a + i * K, b + j, K, N, &terms[i * N + j]);
                        big = fmax(big, fabs(ref[i * N + j]));
                        small_terms = fmin(small_terms, terms[i * N + j]);
                }
        ck_assert_msg(big < 1e-2 && small_terms > 100.0, "the sums do not cancel: %g of terms %g", big, small_terms);

        for (int tb = 0; tb < 2; tb++) {
                const float *bp = tb ? bt : b;
                int ldb = tb ? K : N;
                double err32[2] = { 0.0, 0.0 }, errmix[3] = { 0.0, 0.0, 0.0 };
                static const int f32[2] = { OPS_SGEMM_OPENBLAS, OPS_SGEMM_AUTO };
                static const char *const f32name[2] = { "openblas", "auto" };
                static const char *const mixname[3] = { "ops_sgemm", "ops_sgemm_mixed", "packed" };

                for (int v = 0; v < 2; v++) {
                        ops_sgemm_force(f32[v]);
                        ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, K,
                                  bp, ldb, 0.0f, c, N);
                        ops_sgemm_force(OPS_SGEMM_AUTO);
                        for (int i = 0; i < M * N; i++)
                                err32[v] = fmax(err32[v], fabs((double)c[i] - ref[i]));
                }
                struct ops_packed_b *p = ops_packed_b_new_mixed(bp, K, N, tb, err, sizeof(err));
                ck_assert_msg(p != NULL, "pack: %s", err);
                for (int d = 0; d < 3; d++) {
                        set_all(c, (size_t)M * N, NAN);
                        if (d < 2) {
                                mixed_gemm(d, CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                                           1.0f, a, K, bp, ldb, 0.0f, c, N);
                        } else {
                                ops_sgemm_force(OPS_SGEMM_MIXED);
                                ops_sgemm_packed(p);
                                ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                                          a, K, bp, ldb, 0.0f, c, N);
                                ops_sgemm_packed(NULL);
                                ops_sgemm_force(OPS_SGEMM_AUTO);
                                ck_assert_uint_eq(ops_packed_b_runs(p), 1);
                        }
                        for (int i = 0; i < M * N; i++) {
                                double e = fabs((double)c[i] - ref[i]);
                                errmix[d] = fmax(errmix[d], e);
                                CHECK(within(c[i], ref[i], terms[i]),
                                      "%s tb %d: C[%d,%d] %.9g, exact %.12g (bound %.3g)", mixname[d], tb, i / N,
                                      i % N, c[i], ref[i], mixed_bound(ref[i], terms[i]));
                        }
                        /* Well under float32's error, whose size depends on the order in
                         * which the CPU's float32 kernels sum: below 1/8 of it where OpenBLAS
                         * runs its Haswell kernels (OPENBLAS_CORETYPE=Haswell) on AMD Zen 5,
                         * 1/4.6 (0.00227 against 0.0104, the mixed sums being the same) with
                         * its own AVX-512 kernels on an Intel Xeon (model 207). The bound
                         * checked above is the guarantee; this asks that the data tell the two
                         * accumulations apart. */
                        for (int v = 0; v < 2; v++)
                                ck_assert_msg(errmix[d] < err32[v] / 3,
                                              "%s tb %d: mixed accumulation is off by %g, float32 (%s) by %g",
                                              mixname[d], tb, errmix[d], f32name[v], err32[v]);
                }
                ops_packed_b_free(p);
        }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
        free(a);
        free(b);
        free(bt);
        free(c);
        free(ref);
        free(terms);
        free(perm);
}
END_TEST

/* ---- packed weights ---- */

/* C = alpha A B + beta C under OPS_SGEMM_MIXED (on p when not NULL), A m x k row-major. */
static void mixed_packed_gemm(const struct ops_packed_b *p, int tb, int m, int n, int k, float alpha, const float *a,
                              const float *b, int ldb, float beta, float *c, int ldc)
{
        ops_sgemm_force(OPS_SGEMM_MIXED);
        ops_sgemm_packed(p);
        ops_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, k, b, ldb, beta, c,
                  ldc);
        ops_sgemm_packed(NULL);
        ops_sgemm_force(OPS_SGEMM_AUTO);
}

/* C (m x n, from cinit) is alpha A B + beta cinit within the bound. */
static void check_product(const float *c, int tb, int m, int n, int k, float alpha, const float *a, const float *b,
                          int ldb, float beta, const float *cinit, const char *what)
{
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0.0, t = 0.0;
                        for (int q = 0; q < k; q++) {
                                double v = (double)a[i * k + q] * (double)(tb ? b[j * ldb + q] : b[q * ldb + j]);
                                s += v;
                                t += fabs(v);
                        }
                        double bc = (double)beta * (double)cinit[i * n + j];
                        double ref = (double)alpha * s + bc;
                        CHECK(within(c[i * n + j], ref, t + fabs(bc)), "tb %d k %d %s: [%d,%d] %.9g, exact %.12g",
                              tb, k, what, i, j, c[i * n + j], ref);
                }
}

/* The same call unpacked (into plain) and on p (into packed), both m x n from cinit, both
 * right; runs counts the packed ones. same: the two must be bit-identical. */
static void packed_and_plain(const struct ops_packed_b *p, int tb, int m, int n, int k, float alpha, const float *a,
                             const float *b, int ldb, float beta, const float *cinit, uint64_t runs_after,
                             const char *what, float *plain, float *packed, int same)
{
        size_t nc = (size_t)m * (size_t)n;

        memcpy(plain, cinit, nc * 4);
        memcpy(packed, cinit, nc * 4);
        mixed_packed_gemm(NULL, tb, m, n, k, alpha, a, b, ldb, beta, plain, n);
        mixed_packed_gemm(p, tb, m, n, k, alpha, a, b, ldb, beta, packed, n);
        ck_assert_msg(ops_packed_b_runs(p) == runs_after, "tb %d k %d %s: %llu packed runs, want %llu", tb, k, what,
                      (unsigned long long)ops_packed_b_runs(p), (unsigned long long)runs_after);
        check_product(plain, tb, m, n, k, alpha, a, b, ldb, beta, cinit, what);
        check_product(packed, tb, m, n, k, alpha, a, b, ldb, beta, cinit, what);
        if (same)
                for (size_t i = 0; i < nc; i++)
                        CHECK(same_bits(plain[i], packed[i]), "tb %d k %d %s: [%zu,%zu] packed %.9g, plain %.9g", tb,
                              k, what, i / (size_t)n, i % (size_t)n, packed[i], plain[i]);
}

enum { PM = 70, PN = 300 };
static const int packed_k[] = { 150, 64, 33 };
/* column ranges, as column parts of a split node: inside a block, across blocks, from a
 * block edge, B's last columns, one column, a narrow one inside a block */
static const int packed_cols[][2] = { { 40, 70 }, { 0, 33 }, { 256, 44 }, { 35, 1 },
                                      { 64, 200 }, { 100, 10 }, { 32, 224 }, { 0, 64 } };

/* The operands of a packed test: A PM x K, B and another B K x PN (stored transposed when
 * tb), C zero and C filled. */
struct pops {
        int k;
        float *a, *b[2], *b2[2], *cz, *cf, *c0, *c1, *whole;
};

static void pops_init(struct pops *o, int k)
{
        o->k = k;
        o->a = malloc(sizeof(float) * PM * (size_t)k);
        for (int tb = 0; tb < 2; tb++) {
                o->b[tb] = malloc(sizeof(float) * (size_t)k * PN);
                o->b2[tb] = malloc(sizeof(float) * (size_t)k * PN);
        }
        o->cz = calloc((size_t)PM * PN, 4);
        o->cf = malloc(sizeof(float) * PM * PN);
        o->c0 = malloc(sizeof(float) * PM * PN);
        o->c1 = malloc(sizeof(float) * PM * PN);
        o->whole = malloc(sizeof(float) * PM * PN);
        fill(o->a, (size_t)PM * (size_t)k, 31);
        fill(o->b[0], (size_t)k * PN, 32);
        fill(o->b2[0], (size_t)k * PN, 33);
        fill(o->cf, (size_t)PM * PN, 34);
        for (int q = 0; q < k; q++) /* the same B transposed */
                for (int j = 0; j < PN; j++) {
                        o->b[1][j * k + q] = o->b[0][q * PN + j];
                        o->b2[1][j * k + q] = o->b2[0][q * PN + j];
                }
}

static void pops_free(struct pops *o)
{
        free(o->a);
        for (int tb = 0; tb < 2; tb++) {
                free(o->b[tb]);
                free(o->b2[tb]);
        }
        free(o->cz);
        free(o->cf);
        free(o->c0);
        free(o->c1);
        free(o->whole);
}

/* On ops_packed_b_new_mixed's copy: the whole product and accumulating into C are computed on
 * it (ops_packed_b_runs) bit-identical to the unpacked variant, and right; so are column
 * ranges (right; their bits: test_mixed_packed_bits); calls it does not match, and k within
 * one run, take the plain path; ops_packed_b_keep keeps it for the variant, drops it for
 * another. */
START_TEST(test_mixed_packed)
{
        int K = packed_k[_i];
        struct pops o;
        char err[128] = "";

        pops_init(&o, K);
        for (int tb = 0; tb < 2; tb++) {
                const float *b = o.b[tb];
                int ldb = tb ? K : PN;
                struct ops_packed_b *p = ops_packed_b_new_mixed(b, K, PN, tb, err, sizeof(err));
                ck_assert_msg(p != NULL, "pack: %s", err);
                ck_assert_uint_gt(ops_packed_b_bytes(p), 0);
                ck_assert_uint_ge(ops_packed_b_bytes(p), (uint64_t)K * PN * sizeof(float));
                ck_assert_uint_eq(ops_packed_b_runs(p), 0);

                uint64_t runs = 0;
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, b, ldb, 0.0f, o.cz, ++runs, "whole", o.c0, o.c1, 1);
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, b, ldb, 1.0f, o.cf, ++runs, "beta 1", o.c0, o.c1, 1);
                /* rows 17..62, as a row part of a split node */
                packed_and_plain(p, tb, 46, PN, K, 1.0f, o.a + 17 * K, b, ldb, 0.0f, o.cz, ++runs, "row part", o.c0,
                                 o.c1, 1);
                for (size_t q = 0; q < NELEM(packed_cols); q++) {
                        int lo = packed_cols[q][0], w = packed_cols[q][1];
                        char what[32];
                        snprintf(what, sizeof(what), "columns %d..%d", lo, lo + w);
                        packed_and_plain(p, tb, PM, w, K, 1.0f, o.a, tb ? b + lo * K : b + lo, ldb, 0.0f, o.cz,
                                         ++runs, what, o.c0, o.c1, 0);
                }
                /* calls the packed B does not take: the plain path, still right */
                packed_and_plain(p, tb, PM, PN, K, 0.5f, o.a, b, ldb, 0.0f, o.cz, runs, "alpha 0.5", o.c0, o.c1, 1);
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, o.b2[tb], ldb, 0.0f, o.cz, runs, "another B", o.c0,
                                 o.c1, 1);
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, b, ldb, -2.0f, o.cf, runs, "beta -2", o.c0, o.c1, 1);
                /* within one run: ops_sgemm's float32 path, not the packed copy (B's first 32
                 * rows, or the first 32 terms of its rows, as another B) */
                packed_and_plain(p, tb, PM, PN, OPS_MIXED_KB, 1.0f, o.a, b, tb ? OPS_MIXED_KB : PN, 0.0f, o.cz, runs,
                                 "k 32", o.c0, o.c1, 1);

                /* keep for the variant: the copy stays; for another: the plain path */
                ops_packed_b_keep(p, OPS_SGEMM_MIXED);
                ck_assert_uint_gt(ops_packed_b_bytes(p), 0);
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, b, ldb, 0.0f, o.cz, ++runs, "kept", o.c0, o.c1, 1);
                ops_packed_b_keep(p, OPS_SGEMM_OPENBLAS);
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, b, ldb, 0.0f, o.cz, runs, "dropped", o.c0, o.c1, 1);
                ops_packed_b_free(p);
        }
        /* nothing to pack */
        err[0] = '\0';
        ck_assert_ptr_null(ops_packed_b_new_mixed(o.b[0], 0, PN, 0, err, sizeof(err)));
        ck_assert_str_ne(err, "");
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
        pops_free(&o);
}
END_TEST

/* A column range of the packed B (b offset into the stored B, as a column part of a split
 * node) from a block edge to a block edge gives the same floats packed and unpacked, and
 * the same as those columns of the whole product; so does a part of whole row tiles. Any
 * other range is within the bound (packed_and_plain checks it). */
START_TEST(test_mixed_packed_bits)
{
        int K = packed_k[_i];
        struct pops o;
        char err[128] = "";

        pops_init(&o, K);
        for (int tb = 0; tb < 2; tb++) {
                const float *b = o.b[tb];
                int ldb = tb ? K : PN;
                struct ops_packed_b *p = ops_packed_b_new_mixed(b, K, PN, tb, err, sizeof(err));
                ck_assert_msg(p != NULL, "pack: %s", err);
                uint64_t runs = 0;
                packed_and_plain(p, tb, PM, PN, K, 1.0f, o.a, b, ldb, 0.0f, o.cz, ++runs, "whole", o.c0, o.whole, 1);
                for (size_t q = 0; q < NELEM(packed_cols); q++) {
                        int lo = packed_cols[q][0], w = packed_cols[q][1];
                        char what[32];
                        snprintf(what, sizeof(what), "columns %d..%d", lo, lo + w);
                        int same = block_aligned(lo, w, PN);
                        packed_and_plain(p, tb, PM, w, K, 1.0f, o.a, tb ? b + lo * K : b + lo, ldb, 0.0f, o.cz,
                                         ++runs, what, o.c0, o.c1, same);
                        for (int i = 0; same && i < PM; i++)
                                for (int j = 0; j < w; j++)
                                        CHECK(same_bits(o.c1[i * w + j], o.whole[i * PN + lo + j]),
                                              "tb %d k %d %s: [%d,%d] %.9g, whole %.9g", tb, K, what, i, lo + j,
                                              o.c1[i * w + j], o.whole[i * PN + lo + j]);
                }
                /* rows 17..62, as a row part of a split node: within the bound */
                packed_and_plain(p, tb, 46, PN, K, 1.0f, o.a + 17 * K, b, ldb, 0.0f, o.cz, ++runs, "row part", o.c0,
                                 o.c1, 0);
                /* rows 64..69, the whole's last row tile: its bits */
                packed_and_plain(p, tb, PM - 64, PN, K, 1.0f, o.a + 64 * K, b, ldb, 0.0f, o.cz, ++runs, "row tile",
                                 o.c0, o.c1, 1);
                for (int i = 0; i < (PM - 64) * PN; i++)
                        CHECK(same_bits(o.c1[i], o.whole[64 * PN + i]), "tb %d k %d row tile: [%d,%d] %.9g, whole %.9g",
                              tb, K, 64 + i / PN, i % PN, o.c1[i], o.whole[64 * PN + i]);
                ops_packed_b_free(p);
        }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
        pops_free(&o);
}
END_TEST

/* Columns [lo, lo + w) of the m-row product c (ld ldc) are those of whole (ld n), bit for
 * bit. */
static void range_bits(const float *c, int ldc, const float *whole, int n, int m, int k, int lo, int w)
{
        for (int i = 0; i < m; i++)
                for (int j = 0; j < w; j++)
                        CHECK(same_bits(c[i * ldc + j], whole[i * n + lo + j]),
                              "k %d columns %d..%d: [%d,%d] %.9g, whole %.9g", k, lo, lo + w, i, lo + j,
                              c[i * ldc + j], whole[i * n + lo + j]);
}

/* ops_mixed_product on a column range of ops_mixed_pack_b's blocks: within the bound, and
 * nothing written past them; from a block edge to a block edge, those columns of the whole
 * product bit for bit. */
START_TEST(test_mixed_product_range)
{
        enum { M = 67, K = 97, N = 130, LDC = N + 3 };
        static const int cols[][2] = { { 0, 130 }, { 5, 20 }, { 31, 2 },  { 40, 90 },
                                      { 96, 34 }, { 129, 1 }, { 8, 12 }, { 32, 64 } };
        long nb = (N + OPS_XSMM_NB - 1) / OPS_XSMM_NB;
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *x = malloc(sizeof(float) * (size_t)nb * K * OPS_XSMM_NB);
        float *whole = malloc(sizeof(float) * M * N), *c = malloc(sizeof(float) * M * LDC);

        fill(a, (size_t)M * K, 61);
        fill(b, (size_t)K * N, 62);
        ck_assert_ptr_eq(ops_mixed_pack_b(b, K, N, 0, N, x), x);
        ops_sgemm_mixed(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, whole, N, NULL, 0,
                        NULL);
        check_product(whole, 0, M, N, K, 1.0f, a, b, N, 0.0f, whole, "whole");
        for (size_t q = 0; q < NELEM(cols); q++) {
                int lo = cols[q][0], w = cols[q][1];
                set_all(c, (size_t)M * LDC, SENTINEL);
                for (int i = 0; i < M; i++)
                        for (int j = 0; j < w; j++)
                                c[i * LDC + j] = NAN;
                ops_mixed_product(M, w, K, a, K, x, lo, 1.0f, 0.0f, c, LDC, NULL, NULL);
                for (int i = 0; i < M; i++)
                        for (int j = w; j < LDC; j++)
                                CHECK(c[i * LDC + j] == SENTINEL, "columns %d..%d: wrote [%d,%d]", lo, lo + w, i, j);
                for (int i = 0; i < M; i++)
                        for (int j = 0; j < w; j++) {
                                double sum = 0.0, t = 0.0;
                                for (int p = 0; p < K; p++) {
                                        double v = (double)a[i * K + p] * (double)b[p * N + lo + j];
                                        sum += v;
                                        t += fabs(v);
                                }
                                CHECK(within(c[i * LDC + j], sum, t), "columns %d..%d: [%d,%d] %.9g, exact %.12g", lo,
                                      lo + w, i, lo + j, c[i * LDC + j], sum);
                        }
        }
        for (size_t q = 0; q < NELEM(cols); q++) {
                int lo = cols[q][0], w = cols[q][1];
                if (!block_aligned(lo, w, N))
                        continue; /* within the bound (above) */
                ops_mixed_product(M, w, K, a, K, x, lo, 1.0f, 0.0f, c, LDC, NULL, NULL);
                range_bits(c, LDC, whole, N, M, K, lo, w);
        }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
        free(a);
        free(b);
        free(x);
        free(whole);
        free(c);
}
END_TEST

/* ---- ops_mixed_pack_b ---- */

START_TEST(test_mixed_pack_layout)
{
        static const int shapes[][2] = { { 5, 70 }, { 3, 32 }, { 7, 1 }, { 40, 65 }, { 1, 100 } };

        for (size_t s = 0; s < NELEM(shapes); s++)
                for (int tb = 0; tb < 2; tb++) {
                        long k = shapes[s][0], n = shapes[s][1], nb = (n + 31) / 32;
                        long ldb = tb ? k + 2 : n + 3, rows = tb ? n : k;
                        size_t nx = (size_t)nb * (size_t)k * 32;
                        float *b = malloc(sizeof(float) * (size_t)(rows * ldb)), *x = malloc(sizeof(float) * nx);
                        fill(b, (size_t)(rows * ldb), (uint32_t)(k * 100 + n));
                        set_all(x, nx, NAN);
                        ck_assert_ptr_eq(ops_mixed_pack_b(b, k, n, tb, ldb, x), x);
                        for (long kk = 0; kk < k; kk++)
                                for (long j = 0; j < nb * 32; j++) {
                                        float got = x[(j / 32) * k * 32 + kk * 32 + j % 32];
                                        float want = j >= n ? 0.0f : tb ? b[j * ldb + kk] : b[kk * ldb + j];
                                        CHECK(same_bits(got, want), "k %ld n %ld tb %d: (%ld,%ld) %g, want %g", k, n,
                                              tb, kk, j, got, want);
                                }
                        free(b);
                        free(x);
                }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
}
END_TEST

/* ---- no scratch ---- */

/* A run's budget of one byte: ops_sgemm_mixed cannot copy B (nor A^T) and computes in its
 * plain loop, within the bound, writing nothing else and recording no stop reason; and
 * those are the same sums as the kernels'. */
START_TEST(test_mixed_no_scratch)
{
        enum { M = 70, K = 100, N = 45 };
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *c0[4], *c1[4];
        struct ops_mem_budget budget = { .name = "test", .limit = 1 };
        struct ops_runctx ctx = { .mem = &budget };

        fill(a, (size_t)M * K, 71);
        fill(b, (size_t)K * N, 72);
        for (int t = 0; t < 4; t++) {
                int ta = t & 1, tb = t >> 1;
                int lda = ta ? M : K, ldb = tb ? K : N;
                c0[t] = malloc(sizeof(float) * M * N);
                c1[t] = malloc(sizeof(float) * M * N);
                set_all(c0[t], (size_t)M * N, NAN);
                set_all(c1[t], (size_t)M * N, NAN);
                ops_sgemm_mixed(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                                K, 1.0f, a, lda, b, ldb, 0.0f, c0[t], N, NULL, 0, NULL);
                ops_runctx_set(&ctx);
                ops_sgemm_mixed(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                                K, 1.0f, a, lda, b, ldb, 0.0f, c1[t], N, NULL, 0, NULL);
                ops_runctx_set(NULL);
                ck_assert_int_eq(ctx.code, 0);
                ck_assert_uint_eq(atomic_load(&budget.used), 0);
                ck_assert_uint_eq(atomic_load(&budget.peak), 0); /* nothing was allocated */
                for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                                double s = 0.0, tt = 0.0;
                                for (int q = 0; q < K; q++) {
                                        double v = (double)(ta ? a[q * M + i] : a[i * K + q]) *
                                                   (double)(tb ? b[j * K + q] : b[q * N + j]);
                                        s += v;
                                        tt += fabs(v);
                                }
                                CHECK(within(c1[t][i * N + j], s, tt),
                                      "ta %d tb %d no scratch: [%d,%d] %.9g, exact %.12g", ta, tb, i, j,
                                      c1[t][i * N + j], s);
                                CHECK(within(c0[t][i * N + j], s, tt), "ta %d tb %d kernels: [%d,%d] %.9g, exact %.12g",
                                      ta, tb, i, j, c0[t][i * N + j], s);
                        }
        }
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ops_sgemm_packed(NULL);
        free(a);
        free(b);
        for (int t = 0; t < 4; t++) {
                free(c0[t]);
                free(c1[t]);
        }
}
END_TEST

/* ---- the AVX-512 kernel against the plain loop ---- */

/* Under the AVX-512 kernel (ops_mixed_kernel), every element is the plain loop's (no
 * scratch) bit for bit: row counts around its register tiles (6 rows of 32 columns, 12 of
 * 16, the last tiles shared out) and the 64-row tiles, widths that take the 16-column
 * kernel (inside a block's first half) or not, k around the runs of 32 and the quads of
 * 128, every transposition, alpha 1 / beta 0 and alpha 0.5 / beta 2 over a filled C; and
 * column ranges of a packed B starting anywhere give those columns of the whole. Skipped
 * (with a message) where the CPU has no AVX-512F. */
static const int kern_k[] = { 1, 31, 32, 33, 64, 100, 127, 128, 129, 256, 300, 1000 };

/* One product under the AVX-512 kernel and in the plain loop (no scratch): the same bits. */
static void kernel_vs_plain(int m, int n, int k, int ta, int tb, float alpha, float beta)
{
        struct ops_mem_budget budget = { .name = "test", .limit = 1 };
        struct ops_runctx ctx = { .mem = &budget };
        int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
        size_t na = (size_t)(ta ? k : m) * (size_t)lda, nb = (size_t)(tb ? n : k) * (size_t)ldb;
        size_t nc = (size_t)m * (size_t)ldc;
        float *a = malloc(na * 4), *b = malloc(nb * 4);
        float *c[2] = { malloc(nc * 4), malloc(nc * 4) };

        fill(a, na, (uint32_t)(m * 131 + k));
        fill(b, nb, (uint32_t)(n * 17 + k));
        for (int side = 0; side < 2; side++) {
                fill(c[side], nc, 7);
                if (side)
                        ops_runctx_set(&ctx); /* no scratch: the plain loop */
                ops_sgemm_mixed(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                                k, alpha, a, lda, b, ldb, beta, c[side], ldc, NULL, 0, NULL);
                ops_runctx_set(NULL);
        }
        ck_assert_int_eq(ctx.code, 0);
        for (size_t i = 0; i < nc; i++)
                CHECK(same_bits(c[0][i], c[1][i]),
                      "%dx%dx%d ta %d tb %d alpha %g beta %g: [%zu,%zu] kernel %.9g, plain %.9g", m, n, k, ta, tb,
                      alpha, beta, i / (size_t)ldc, i % (size_t)ldc, c[0][i], c[1][i]);
        free(a);
        free(b);
        free(c[0]);
        free(c[1]);
}

START_TEST(test_mixed_kernel_plain)
{
        static const int ms[] = { 1, 2, 5, 6, 7, 8, 12, 13, 25, 32, 64, 65, 130 };
        static const int ns[] = { 1, 10, 16, 17, 32, 33, 70 };
        int K = kern_k[_i];

        if (!ops_mixed_kernel(-1)) {
                printf("test_mixed_kernel_plain: the AVX-512 kernel is not in use, skipped\n");
                return;
        }
        for (size_t mi = 0; mi < NELEM(ms); mi++)
                for (size_t ni = 0; ni < NELEM(ns); ni++)
                        for (int t = 0; t < 8; t++) {
                                int ta = t & 1, tb = (t >> 1) & 1, ab = t >> 2;
                                /* every transposition for the smaller shapes, row-major
                                 * operands for the larger */
                                if ((ta || tb) && (long)ms[mi] * ns[ni] * K > 200000)
                                        continue;
                                kernel_vs_plain(ms[mi], ns[ni], K, ta, tb, ab ? 0.5f : 1.0f, ab ? 2.0f : 0.0f);
                        }
        /* column ranges of a packed B from anywhere: those columns of the whole, bit for bit */
        enum { M = 29, N = 75 };
        long nblk = (N + OPS_XSMM_NB - 1) / OPS_XSMM_NB;
        float *a = malloc(sizeof(float) * M * (size_t)K), *b = malloc(sizeof(float) * (size_t)K * N);
        float *x = malloc(sizeof(float) * (size_t)nblk * (size_t)K * OPS_XSMM_NB);
        float *whole = malloc(sizeof(float) * M * N), *c = malloc(sizeof(float) * M * N);
        static const int cols[][2] = { { 3, 10 },  { 16, 16 }, { 17, 15 }, { 20, 5 },
                                       { 30, 40 }, { 64, 11 }, { 70, 5 } };
        fill(a, (size_t)M * (size_t)K, 91);
        fill(b, (size_t)K * N, 92);
        ck_assert_ptr_eq(ops_mixed_pack_b(b, K, N, 0, N, x), x);
        ops_mixed_product(M, N, K, a, K, x, 0, 1.0f, 0.0f, whole, N, NULL, NULL);
        for (size_t q = 0; q < NELEM(cols); q++) {
                int lo = cols[q][0], w = cols[q][1];
                ops_mixed_product(M, w, K, a, K, x, lo, 1.0f, 0.0f, c, w, NULL, NULL);
                range_bits(c, w, whole, N, M, K, lo, w);
        }
        free(a);
        free(b);
        free(x);
        free(whole);
        free(c);
}
END_TEST

/* ---- the post-op ---- */

/* The post-op (ops_sgemm_post: a bias row and Relu, as a Gemm with bias and a fused Relu set
 * it) under OPS_SGEMM_MIXED, applied to each tile as it is rounded: the same floats as the
 * product without it followed by the bias added in float32 and the Relu, on packed weights
 * and unpacked, through the plain loop (no scratch), for k = 0, for alpha 0.5 / beta 2 over a
 * filled C, and for k <= 32 (ops_sgemm's float32 path, which applies it after the product).
 * A NaN in the product stays NaN through the Relu. */
static const int post_k[] = { 0, 20, 32, 33, 300 };

START_TEST(test_mixed_post)
{
        enum { M = 70, N = 100 };
        int K = post_k[_i];
        size_t ka = K > 0 ? (size_t)K : 1;
        float *a = malloc(sizeof(float) * M * ka), *b = malloc(sizeof(float) * ka * N), *bias = malloc(sizeof(float) * N);
        float *want = malloc(sizeof(float) * M * N), *got = malloc(sizeof(float) * M * N);
        char err[128] = "";
        struct ops_mem_budget budget = { .name = "test", .limit = 1 };
        struct ops_runctx ctx = { .mem = &budget };

        fill(a, (size_t)M * ka, 81);
        fill(b, ka * N, 82);
        fill(bias, N, 83);
        if (K > 0)
                a[5 * K + 3] = NAN; /* row 5 of the product is NaN */
        struct ops_packed_b *p = K > 0 ? ops_packed_b_new_mixed(b, K, N, 0, err, sizeof(err)) : NULL;
        ck_assert_msg(K == 0 || p, "pack: %s", err);
        for (int how = 0; how < 3; how++) /* 0 unpacked, 1 packed, 2 no scratch */
                for (int relu = 0; relu < 2; relu++)
                        for (int ab = 0; ab < 2; ab++) {
                                float alpha = ab ? 0.5f : 1.0f, beta = ab ? 2.0f : 0.0f;
                                struct ops_sgemm_post post = { bias, relu };
                                fill(want, (size_t)M * N, 84);
                                memcpy(got, want, sizeof(float) * M * N);
                                if (how == 2)
                                        ops_runctx_set(&ctx);
                                mixed_packed_gemm(how == 1 ? p : NULL, 0, M, N, K, alpha, a, b, N, beta, want, N);
                                ops_runctx_set(NULL);
                                for (int i = 0; i < M; i++)
                                        for (int j = 0; j < N; j++) {
                                                float v = want[i * N + j] + bias[j];
                                                want[i * N + j] = relu && v < 0 ? 0.0f : v;
                                        }
                                if (how == 2)
                                        ops_runctx_set(&ctx);
                                ops_sgemm_post(&post);
                                mixed_packed_gemm(how == 1 ? p : NULL, 0, M, N, K, alpha, a, b, N, beta, got, N);
                                ops_sgemm_post(NULL);
                                ops_runctx_set(NULL);
                                for (int i = 0; i < M; i++)
                                        for (int j = 0; j < N; j++)
                                                CHECK(same_bits(got[i * N + j], want[i * N + j]),
                                                      "k %d how %d relu %d alpha %g: (%d,%d) %.9g, want %.9g", K,
                                                      how, relu, alpha, i, j, got[i * N + j], want[i * N + j]);
                                if (K > 0)
                                        ck_assert(isnan(got[5 * N + 7]));
                        }
        ck_assert_int_eq(ctx.code, 0);
        ops_packed_b_free(p);
        free(a);
        free(b);
        free(bias);
        free(want);
        free(got);
}
END_TEST

static Suite *gemm_mixed_suite(const char *name)
{
        Suite *s = suite_create(name);
        TCase *tc = tcase_create(name);

        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_mixed_shapes, 0, (int)NELEM(shape_k));
        tcase_add_test(tc, test_mixed_colmajor);
        tcase_add_test(tc, test_mixed_empty);
        tcase_add_test(tc, test_mixed_k0_beta0);
        tcase_add_test(tc, test_mixed_cancellation);
        tcase_add_loop_test(tc, test_mixed_packed, 0, (int)NELEM(packed_k));
        tcase_add_loop_test(tc, test_mixed_packed_bits, 0, (int)NELEM(packed_k));
        tcase_add_test(tc, test_mixed_product_range);
        tcase_add_test(tc, test_mixed_pack_layout);
        tcase_add_test(tc, test_mixed_no_scratch);
        tcase_add_loop_test(tc, test_mixed_post, 0, (int)NELEM(post_k));
        tcase_add_loop_test(tc, test_mixed_kernel_plain, 0, (int)NELEM(kern_k));
        suite_add_tcase(s, tc);
        return s;
}

/* Every test under both kernels: the AVX-512 one where the CPU has AVX-512F, then
 * libxsmm's a run at a time (the tests run in forked children, which inherit the choice). */
int main(void)
{
        int failed = 0;

        if (ops_mixed_kernel(1))
                failed |= check_run(gemm_mixed_suite("gemm_mixed (AVX-512 kernel)"));
        else
                printf("no AVX-512F: the AVX-512 kernel is not tested here\n");
        ops_mixed_kernel(0);
        failed |= check_run(gemm_mixed_suite("gemm_mixed (libxsmm kernels)"));
        return failed;
}

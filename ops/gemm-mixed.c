/* Products of float32 operands summed in float32 over runs of OPS_MIXED_KB terms, the runs
 * added in float64 (blas.h, OPS_SGEMM_MIXED).
 *
 * A float32 GEMM's error grows with K: each of its K partial sums is rounded, so an element
 * carries up to about K * 2^-24 of the magnitude of its terms, which after cancellation (a
 * pre-activation near zero, a residual branch, a LayerNorm's centred input) is more than the
 * ONNX suite's tolerance allows. Summing runs of 32 terms in float32 and the runs in float64
 * bounds that error by about 32 * 2^-24 whatever K is (plus K * 2^-53 for the float64 sum),
 * while the multiply-adds stay float32 ones: the kernels are libxsmm's float32 JIT kernels at
 * K = OPS_MIXED_KB, each writing a float32 tile that is added into a float64 tile kept in L1,
 * rounded to float32 once at the end. It runs at about 80-90 % of the float32 variants' speed,
 * against about 45 % for float64 accumulation.
 *
 * B is read in the column blocks of the libxsmm layout: the constant weights' copy made at
 * load (ops_packed_b_new_mixed), or a band of columns copied per call. Where libxsmm makes no
 * kernel, OpenBLAS's sgemm computes each run; where scratch cannot be had (the run's memory
 * budget), a plain loop makes the same runs.
 *
 * A call's results are the same from one call to the next. A part of a product (a column
 * range, a band of rows) gives the whole product's bits where its tiles are the whole's (from
 * a block edge of 32 columns to a block edge, whole row tiles of 64); elsewhere libxsmm may
 * split a run's sum differently for a narrower tile, within the same bound. */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <libxsmm.h>

#include "blas.h"
#include "runctx.h"

#define MX_NB OPS_XSMM_NB /* columns of a tile: the width of a packed column block */
#define MX_MB 64          /* rows of a tile */
#define MX_NC 256         /* columns of B copied at a time (not packed) */
#define MX_KB OPS_MIXED_KB

/* C' (w x rows, ld MX_NB) = A' B' in libxsmm's column-major terms: A' the w x kb block of B
 * (ld MX_NB), B' the kb x rows block of our A (ld lda). NULL without libxsmm. */
static libxsmm_smmfunction run_kernel(long w, long rows, long kb, long lda)
{
        libxsmm_blasint ia = MX_NB, ib = lda, ic = MX_NB;
        float alpha = 1.0f, beta = 0.0f;
        int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_GEMM_PREFETCH_AL2;

        if (!ops_xsmm_usable())
                return NULL;
        return libxsmm_smmdispatch(w, rows, kb, &ia, &ib, &ic, &alpha, &beta, &flags, &prefetch);
}

/* acc (rows x MX_NB) += t, or = t when first: the one pass a run adds to the product, in
 * the CPU's widest vectors (16 conversions a step with AVX-512, 2 in the baseline's SSE2). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void add_run(double *restrict acc, const float *restrict t, long rows, int first)
{
        long n = rows * MX_NB;

        if (first) {
                for (long i = 0; i < n; i++)
                        acc[i] = t[i];
        } else {
                for (long i = 0; i < n; i++)
                        acc[i] += t[i];
        }
}

/* C = alpha * acc + beta * C, rounded once, then the post-op (bias, the bias of the tile's
 * first column at bias; Relu) as ops_sgemm applies it after a product: in float32, on the
 * rounded value. */
static void store_tile(const double *restrict acc, long rows, long w, float alpha, float beta,
                       const float *restrict bias, int relu, float *restrict c, long ldc)
{
        for (long r = 0; r < rows; r++) {
                float *restrict cr = c + (size_t)r * (size_t)ldc;
                const double *restrict ar = acc + r * MX_NB;
                if (alpha == 1.0f && beta == 0.0f) {
                        for (long q = 0; q < w; q++)
                                cr[q] = (float)ar[q];
                } else {
                        for (long q = 0; q < w; q++) {
                                double v = (double)alpha * ar[q];
                                if (beta != 0.0f)
                                        v += (double)beta * (double)cr[q];
                                cr[q] = (float)v;
                        }
                }
        }
        ops_sgemm_post_rows(c, ldc, rows, w, bias, relu);
}

/* The kernels of one tile shape: runs of MX_KB and the last, shorter one. */
struct tile_fns {
        long w, rows;
        libxsmm_smmfunction full, tail;
};

/* rows x w of C from rows of A (row-major, lda) and the column panel bp (k x MX_NB, block
 * layout, the tile's first column at bp); next: what to prefetch after the panel's last
 * run. */
static void tile(const struct tile_fns *f, long k, const float *a, long lda, const float *bp, const float *next,
                 float alpha, float beta, const float *bias, int relu, float *c, long ldc)
{
        double acc[MX_MB * MX_NB] __attribute__((aligned(64)));
        float t[MX_MB * MX_NB] __attribute__((aligned(64)));

        for (long k0 = 0; k0 < k; k0 += MX_KB) {
                long kn = k - k0 < MX_KB ? k - k0 : MX_KB;
                libxsmm_smmfunction fn = kn == MX_KB ? f->full : f->tail;
                /* the kernel prefetches the next run's block of B into L2 as it computes
                 * this one: with few rows (an MLP layer's 32) the weights stream from
                 * memory, and without it the product took 1.5-1.8x float32's time instead
                 * of 1.15-1.3x */
                const float *pa = k0 + MX_KB < k ? bp + (size_t)(k0 + MX_KB) * MX_NB : next;
                if (fn)
                        fn(bp + (size_t)k0 * MX_NB, a + k0, t, pa, a + k0, t);
                else
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)f->rows, (blasint)f->w,
                                    (blasint)kn, 1.0f, a + k0, (blasint)lda, bp + (size_t)k0 * MX_NB, MX_NB, 0.0f,
                                    t, MX_NB);
                add_run(acc, t, f->rows, k0 == 0);
        }
        store_tile(acc, f->rows, f->w, alpha, beta, bias, relu, c, ldc);
}

void ops_mixed_product(long m, long n, long k, const float *a, long lda, const float *bx, long lo, float alpha,
                       float beta, float *c, long ldc, const struct ops_sgemm_post *post)
{
        const float *bias = post ? post->bias : NULL;
        int relu = post && post->relu;
        /* kernels for at most three widths (a first partial block, whole ones, a last
         * partial one) by two row counts */
        struct tile_fns fns[6];
        int nf = 0;
        long mb = m < MX_MB ? m : MX_MB;

        for (long j = 0; j < n;) {
                long abs = lo + j, blk = abs / MX_NB, off = abs % MX_NB;
                long w = n - j < MX_NB - off ? n - j : MX_NB - off;
                const float *bp = bx + (size_t)blk * (size_t)k * MX_NB + (size_t)off;
                for (long i0 = 0; i0 < m; i0 += mb) {
                        long rows = m - i0 < mb ? m - i0 : mb;
                        int q = 0;
                        while (q < nf && (fns[q].w != w || fns[q].rows != rows))
                                q++;
                        if (q == nf) /* a new shape: at most 3 widths x 2 row counts */
                                fns[nf++] = (struct tile_fns){ w, rows, run_kernel(w, rows, MX_KB, lda),
                                                               k % MX_KB ? run_kernel(w, rows, k % MX_KB, lda)
                                                                         : NULL };
                        /* what the last runs prefetch: the panel again for the next rows,
                         * else the next block's */
                        const float *next = i0 + mb < m || j + w >= n ? bp : bp - off + (size_t)k * MX_NB;
                        tile(&fns[q], k, a + (size_t)i0 * (size_t)lda, lda, bp, next, alpha, beta,
                             bias ? bias + j : NULL, relu, c + (size_t)i0 * (size_t)ldc + (size_t)j, ldc);
                }
                j += w;
        }
}

float *ops_mixed_pack_b(const float *b, long k, long n, int transb, long ldb, float *x)
{
        long nb = (n + MX_NB - 1) / MX_NB;

        for (long blk = 0; blk < nb; blk++) {
                float *d = x + (size_t)blk * (size_t)k * MX_NB;
                long j0 = blk * MX_NB, w = n - j0 < MX_NB ? n - j0 : MX_NB;
                if (w < MX_NB)
                        memset(d, 0, sizeof(float) * (size_t)k * MX_NB);
                if (transb) { /* column j of B is row j of the stored B */
                        for (long jj = 0; jj < w; jj++) {
                                const float *src = b + (size_t)(j0 + jj) * (size_t)ldb;
                                for (long kk = 0; kk < k; kk++)
                                        d[kk * MX_NB + jj] = src[kk];
                        }
                } else {
                        for (long kk = 0; kk < k; kk++)
                                memcpy(d + kk * MX_NB, b + (size_t)kk * (size_t)ldb + (size_t)j0,
                                       sizeof(float) * (size_t)w);
                }
        }
        return x;
}

/* Without scratch: the same runs in a plain loop (each summed in float32 with fused
 * multiply-adds, in k order, which a kernel may split into partial sums of its own: the
 * results may differ from the kernels' by float32 rounding within a run). It checks the run
 * context every row and stops when the run must (the recorded stop reason then fails the
 * node). */
static void product_loop(long m, long n, long k, float alpha, const float *a, long lda, int ta, const float *b,
                         long ldb, int tb, float beta, float *c, long ldc)
{
        for (long i = 0; i < m && !ops_runctx_check(NULL, 0); i++)
                for (long j = 0; j < n; j++) {
                        double s = 0.0;
                        for (long k0 = 0; k0 < k; k0 += MX_KB) {
                                float r = 0.0f;
                                for (long kk = k0; kk < k && kk < k0 + MX_KB; kk++)
                                        r = __builtin_fmaf(ops_mat_at(a, lda, ta, i, kk), ops_mat_at(b, ldb, tb, kk, j), r);
                                s += r;
                        }
                        s *= alpha;
                        if (beta != 0.0f)
                                s += (double)beta * (double)c[i * ldc + j];
                        c[i * ldc + j] = (float)s;
                }
}

void ops_sgemm_mixed(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                     blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                     float beta, float *c, blasint ldc, const float *packed, long lo,
                     const struct ops_sgemm_post *post)
{
        const float *bias = post ? post->bias : NULL;
        int relu = post && post->relu;

        if (m <= 0 || n <= 0)
                return;
        if (k <= 0) { /* no products: C = beta C (rows of ldc either way, as for any order) */
                long rows = order == CblasRowMajor ? m : n, cols = order == CblasRowMajor ? n : m;
                for (long i = 0; i < rows; i++)
                        for (long j = 0; j < cols; j++)
                                c[i * ldc + j] = beta != 0.0f ? (float)((double)beta * c[i * ldc + j]) : 0.0f;
                if (order == CblasRowMajor)
                        ops_sgemm_post_rows(c, ldc, m, n, bias, relu);
                return;
        }
        if (order != CblasRowMajor) {
                /* column-major C is the row-major C^T = B^T A^T (a post-op is for row-major
                 * calls: ops_sgemm applies it to those only) */
                ops_sgemm_mixed(CblasRowMajor, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc, NULL, 0, NULL);
                return;
        }
        int tra = ta != CblasNoTrans, trb = tb != CblasNoTrans;
        long nc = packed ? n : (n < MX_NC ? n : MX_NC), mb = m < MX_MB ? m : MX_MB;
        long ncb = (nc + MX_NB - 1) / MX_NB * MX_NB; /* whole blocks */
        /* scratch past the run's budget: the plain loop, which needs none */
        float *ad = tra ? ops_buf_try_alloc((uint64_t)mb * (uint64_t)k * sizeof(float)) : NULL;
        float *bd = packed ? NULL : ops_buf_try_alloc((uint64_t)ncb * (uint64_t)k * sizeof(float));

        if ((tra && !ad) || (!packed && !bd)) {
                ops_buf_free(ad);
                ops_buf_free(bd);
                product_loop(m, n, k, alpha, a, lda, tra, b, ldb, trb, beta, c, ldc);
                ops_sgemm_post_rows(c, ldc, m, n, bias, relu);
                return;
        }
        for (long j0 = 0; j0 < n; j0 += nc) {
                long cols = n - j0 < nc ? n - j0 : nc;
                const float *bx = packed;
                long blo = lo;
                if (!packed) {
                        bx = ops_mixed_pack_b(trb ? b + (size_t)j0 * (size_t)ldb : b + j0, k, cols, trb, ldb, bd);
                        blo = 0;
                }
                for (long i0 = 0; i0 < m; i0 += mb) {
                        long rows = m - i0 < mb ? m - i0 : mb;
                        const float *ar = a + (size_t)i0 * (size_t)lda;
                        long ld = lda;
                        if (tra) { /* rows [i0, i0 + rows) of A' = columns of the stored A */
                                for (long r = 0; r < rows; r++)
                                        for (long kk = 0; kk < k; kk++)
                                                ad[r * k + kk] = a[(size_t)kk * (size_t)lda + (size_t)(i0 + r)];
                                ar = ad;
                                ld = k;
                        }
                        ops_mixed_product(rows, cols, k, ar, ld, bx, blo, alpha, beta,
                                          c + (size_t)i0 * (size_t)ldc + (size_t)j0, ldc,
                                          post ? &(struct ops_sgemm_post){ bias ? bias + j0 : NULL, relu } : NULL);
                }
        }
        ops_buf_free(ad);
        ops_buf_free(bd);
}

/* Products of float32 operands with every multiply-add in float64 (blas.h, OPS_SGEMM_F64).
 *
 * A float32 GEMM sums K products in float32: each partial sum is rounded, so the error of an
 * element grows with K and with the size of the terms, not with the size of the result. An
 * element that comes out near zero after cancellation (a pre-activation, a residual branch)
 * carries an error of about K * 2^-24 times the terms it summed. The product of two float32
 * numbers is exact in float64, and a float64 sum of K of them is about 2^29 times more
 * precise, so under this variant the only rounding that matters is the final one to float32:
 * each element is the correctly summed product to within a few float32 ulps of itself. That
 * is what a model's float32 tensors computed exactly within each node would hold.
 *
 * The work runs through libxsmm's JIT float64 kernels (AVX-512 where the CPU has it) on
 * float64 copies of the operands: rows of A converted a band at a time, B converted a band of
 * columns at a time or, for constant weights, once at load into column blocks
 * (ops_packed_b_new_f64). Where libxsmm makes no kernel, OpenBLAS's dgemm computes the same
 * tiles; where scratch cannot be had (the run's memory budget), a plain loop in float64
 * (ops_buf_try_alloc: the run goes on). */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <libxsmm.h>

#include "blas.h"
#include "runctx.h"

#define F64_NB 32  /* columns of a tile: the width of a packed column block */
#define F64_MB 64  /* rows of a tile */
#define F64_NC 256 /* columns of B converted at a time (not packed) */

/* C' = A' B' in libxsmm's column-major terms: A' the w x k block of B (ld lda), B' the
 * k x rows block of our A (ld ldb), C' the w x rows tile (ld F64_NB). NULL without libxsmm. */
static libxsmm_dmmfunction tile_kernel(long w, long rows, long k, long lda, long ldb, int acc)
{
        libxsmm_blasint ia = lda, ib = ldb, ic = F64_NB;
        double alpha = 1.0, beta = acc ? 1.0 : 0.0;
        int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_GEMM_PREFETCH_NONE;

        if (!ops_xsmm_usable())
                return NULL;
        return libxsmm_dmmdispatch(w, rows, k, &ia, &ib, &ic, &alpha, &beta, &flags, &prefetch);
}

/* Column j of B: its address and leading dimension, and how many columns from it lie in the
 * same block. */
static const double *b_col(const struct ops_dmat *b, long k, long j, long *ld, long *run)
{
        if (b->blocked) {
                long abs = b->lo + j, blk = abs / F64_NB, off = abs % F64_NB;
                *ld = F64_NB;
                *run = F64_NB - off;
                return b->p + (size_t)blk * (size_t)k * F64_NB + (size_t)off;
        }
        *ld = b->ld;
        *run = F64_NB;
        return b->p + j;
}

/* C = alpha * tile + bias + beta * C, rounded once; the common case (alpha 1, beta 0) in a
 * loop the compiler vectorizes. */
static void store_tile(const double *restrict tile, long rows, long w, float alpha, float beta,
                       const float *row_bias, float *restrict c, long ldc)
{
        for (long r = 0; r < rows; r++) {
                float *restrict cr = c + (size_t)r * (size_t)ldc;
                const double *restrict tr = tile + r * F64_NB;
                double add = row_bias ? (double)row_bias[r] : 0.0;
                if (alpha == 1.0f && beta == 0.0f) {
                        for (long q = 0; q < w; q++)
                                cr[q] = (float)(tr[q] + add);
                } else {
                        for (long q = 0; q < w; q++) {
                                double v = (double)alpha * tr[q] + add;
                                if (beta != 0.0f)
                                        v += (double)beta * (double)cr[q];
                                cr[q] = (float)v;
                        }
                }
        }
}

void ops_f64_product(long m, long n, long k, const double *a, long lda, const struct ops_dmat *b, float alpha,
                     float beta, const float *row_bias, float *c, long ldc)
{
        double tile[F64_MB * F64_NB];
        const long kc = 1L << 40;

        for (long i0 = 0; i0 < m; i0 += F64_MB) {
                long rows = m - i0 < F64_MB ? m - i0 : F64_MB;
                for (long j = 0; j < n;) {
                        long ld, run;
                        const double *bp = b_col(b, k, j, &ld, &run);
                        long w = n - j < run ? n - j : run;
                        for (long k0 = 0; k0 < k; k0 += kc) {
                                long kn = k - k0 < kc ? k - k0 : kc;
                                const double *ap = a + (size_t)i0 * (size_t)lda + (size_t)k0;
                                const double *bq = bp + (size_t)k0 * (size_t)ld;
                                libxsmm_dmmfunction f = tile_kernel(w, rows, kn, ld, lda, k0 > 0);
                                if (f)
                                        f(bq, ap, tile);
                                else
                                        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)rows,
                                                    (blasint)w, (blasint)kn, 1.0, ap, (blasint)lda, bq, (blasint)ld,
                                                    k0 > 0 ? 1.0 : 0.0, tile, F64_NB);
                        }
                        store_tile(tile, rows, w, alpha, beta, row_bias ? row_bias + i0 : NULL,
                                   c + (size_t)i0 * (size_t)ldc + (size_t)j, ldc);
                        j += w;
                }
        }
}

double *ops_f64_pack_b(const float *b, long k, long n, int transb, long ldb, uint64_t *ret_bytes)
{
        long nb = (n + F64_NB - 1) / F64_NB;
        size_t bytes = (size_t)nb * (size_t)k * F64_NB * sizeof(double);
        double *x = k > 0 && n > 0 ? aligned_alloc(64, bytes) : NULL;

        if (!x)
                return NULL;
        for (long blk = 0; blk < nb; blk++) {
                double *d = x + (size_t)blk * (size_t)k * F64_NB;
                for (long kk = 0; kk < k; kk++)
                        for (long jj = 0; jj < F64_NB; jj++) {
                                long j = blk * F64_NB + jj;
                                d[kk * F64_NB + jj] = j >= n     ? 0.0
                                                      : transb ? (double)b[j * ldb + kk]
                                                               : (double)b[kk * ldb + j];
                        }
        }
        *ret_bytes = bytes;
        return x;
}

/* Without scratch: the same sums in a plain loop. It checks the run context every row and
 * stops when the run must (the recorded stop reason then fails the node). */
static void product_loop(long m, long n, long k, float alpha, const float *a, long lda, int ta, const float *b,
                         long ldb, int tb, float beta, float *c, long ldc)
{
        for (long i = 0; i < m && !ops_runctx_check(NULL, 0); i++)
                for (long j = 0; j < n; j++) {
                        double s = 0.0;
                        for (long kk = 0; kk < k; kk++)
                                s += (double)ops_mat_at(a, lda, ta, i, kk) * (double)ops_mat_at(b, ldb, tb, kk, j);
                        s *= alpha;
                        if (beta != 0.0f)
                                s += (double)beta * (double)c[i * ldc + j];
                        c[i * ldc + j] = (float)s;
                }
}

/* Columns [j0, j0 + cols) of B (k x n after tb) as float64 column blocks of F64_NB (the last
 * one zero-filled), as ops_f64_pack_b lays them out. */
static void convert_b(const float *b, long ldb, int tb, long k, long j0, long cols, double *d)
{
        for (long blk = 0; blk * F64_NB < cols; blk++) {
                double *db = d + (size_t)blk * (size_t)k * F64_NB;
                long w = cols - blk * F64_NB < F64_NB ? cols - blk * F64_NB : F64_NB;
                if (w < F64_NB)
                        memset(db, 0, sizeof(double) * (size_t)k * F64_NB);
                if (tb) { /* column j of B is row j of the stored B */
                        for (long jj = 0; jj < w; jj++) {
                                const float *src = b + (size_t)(j0 + blk * F64_NB + jj) * (size_t)ldb;
                                for (long kk = 0; kk < k; kk++)
                                        db[kk * F64_NB + jj] = src[kk];
                        }
                } else {
                        for (long kk = 0; kk < k; kk++) {
                                const float *src = b + (size_t)kk * (size_t)ldb + (size_t)(j0 + blk * F64_NB);
                                for (long jj = 0; jj < w; jj++)
                                        db[kk * F64_NB + jj] = src[jj];
                        }
                }
        }
}

/* Rows [i0, i0 + rows) of A (m x k after ta) as float64, row-major, ld k. */
static void convert_a(const float *a, long lda, int ta, long i0, long rows, long k, double *d)
{
        for (long r = 0; r < rows; r++) {
                double *dr = d + (size_t)r * (size_t)k;
                if (!ta) {
                        const float *ar = a + (size_t)(i0 + r) * (size_t)lda;
                        for (long kk = 0; kk < k; kk++)
                                dr[kk] = ar[kk];
                } else {
                        for (long kk = 0; kk < k; kk++)
                                dr[kk] = a[(size_t)kk * (size_t)lda + (size_t)(i0 + r)];
                }
        }
}

void ops_sgemm_f64(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
                   blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb, float beta,
                   float *c, blasint ldc, const struct ops_dmat *packed)
{
        if (m <= 0 || n <= 0)
                return;
        if (k <= 0) { /* no products: C = beta C (rows of ldc either way, as for any order) */
                long rows = order == CblasRowMajor ? m : n, cols = order == CblasRowMajor ? n : m;
                for (long i = 0; i < rows; i++)
                        for (long j = 0; j < cols; j++)
                                c[i * ldc + j] = beta != 0.0f ? (float)((double)beta * c[i * ldc + j]) : 0.0f;
                return;
        }
        if (order != CblasRowMajor) {
                /* column-major C is the row-major C^T = B^T A^T */
                ops_sgemm_f64(CblasRowMajor, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc, NULL);
                return;
        }
        int tra = ta != CblasNoTrans, trb = tb != CblasNoTrans;
        long nc = packed ? n : (n < F64_NC ? n : F64_NC), mb = m < F64_MB ? m : F64_MB;
        /* scratch past the run's budget: the plain loop, which needs none */
        double *ad = ops_buf_try_alloc((uint64_t)mb * (uint64_t)k * sizeof(double));
        long ncb = (nc + F64_NB - 1) / F64_NB * F64_NB; /* whole blocks */
        double *bd = packed ? NULL : ops_buf_try_alloc((uint64_t)ncb * (uint64_t)k * sizeof(double));

        if (!ad || (!packed && !bd)) {
                ops_buf_free(ad);
                ops_buf_free(bd);
                product_loop(m, n, k, alpha, a, lda, tra, b, ldb, trb, beta, c, ldc);
                return;
        }
        for (long j0 = 0; j0 < n; j0 += nc) {
                long cols = n - j0 < nc ? n - j0 : nc;
                /* the band of columns in the packed layout: the kernels read a block as one
                 * contiguous panel */
                struct ops_dmat bm = { .p = bd, .blocked = 1 };
                if (packed)
                        bm = *packed;
                else
                        convert_b(b, ldb, trb, k, j0, cols, bd);
                for (long i0 = 0; i0 < m; i0 += mb) {
                        long rows = m - i0 < mb ? m - i0 : mb;
                        convert_a(a, lda, tra, i0, rows, k, ad);
                        ops_f64_product(rows, cols, k, ad, k, &bm, alpha, beta, NULL,
                                        c + (size_t)i0 * (size_t)ldc + (size_t)j0, ldc);
                }
        }
        ops_buf_free(ad);
        ops_buf_free(bd);
}

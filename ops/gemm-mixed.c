/* Products of float32 operands summed in float32 over runs of OPS_MIXED_KB terms, the runs
 * added four at a time in float32 and those sums in float64 (blas.h, OPS_SGEMM_MIXED).
 *
 * A float32 GEMM's error grows with K: each of its K partial sums is rounded, so an element
 * carries up to about K * 2^-24 of the magnitude of its terms, which after cancellation (a
 * pre-activation near zero, a residual branch, a LayerNorm's centred input) is more than the
 * ONNX suite's tolerance allows. Here each run of 32 terms is summed in float32 (32
 * roundings), a quad of consecutive runs is summed as (r0 + r1) + (r2 + r3) in float32 (two
 * more roundings on any path, each of a sum no larger than the quad's magnitudes), and the
 * quads in float64: the error stays within about (OPS_MIXED_KB + 2) * 2^-24 of the terms'
 * magnitudes whatever K is (plus K / 128 * 2^-53 for the float64 sum), rounded to float32
 * once at the end, while the multiply-adds stay float32 ones. Widening and adding in float64
 * once per 128 terms instead of once per run is what brings the mixed products to about
 * 0.9 of the float32 kernels' speed (0.75-0.85 adding each run in float64).
 *
 * Two kernels make the runs:
 *   - where the CPU has AVX-512F (ops_mixed_kernel) and the call reads at most 8 MiB of B
 *     (MX_AVX512_MAX_B), our own (mx_rows), which keeps the runs in registers and sums each
 *     by fused multiply-adds in k order: the plain loop's sums (product_loop) bit for bit,
 *     whatever the tile, the rows or the columns a call covers;
 *   - otherwise libxsmm's float32 JIT kernels at K = OPS_MIXED_KB, each writing a float32
 *     tile of a run (OpenBLAS's sgemm where libxsmm makes no kernel), which may split a
 *     run's sum in its own way for a narrower tile, within the same bound: a part of a
 *     product (a column range, a band of rows) then gives the whole product's bits only
 *     where its tiles are the whole's (from a block edge of 32 columns to a block edge,
 *     whole row tiles of 64).
 *
 * B is read in the column blocks of the libxsmm layout: the constant weights' copy made at
 * load (ops_packed_b_new_mixed), or a band of columns copied per call; or, for a
 * convolution on the AVX-512 kernel, each of its rows in place at an offset of its own
 * (ops_mixed_product_off: nn-conv.c's padded input planes), or the product transposed, the
 * filters across the vectors and the padded input broadcast (ops_mixed_conv_lines). Where
 * scratch cannot be had (the run's memory budget), the plain loop makes the same sums. A
 * call's results are the same from one call to the next. */
#include <math.h>
#include <stdint.h>
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
#define MX_QUAD (4 * MX_KB) /* terms of a quad of runs */
/* The most of B a call may read to run on the AVX-512 kernel: what L3 may still hold from
 * the previous call. Its first row tile reads a quad's B (16 KiB) at the multiply-adds'
 * pace, which the hardware prefetcher keeps up with from L3 but not from DRAM: an MLP layer's
 * 4 MB of weights read cold take it 1.35-1.45x float32's time, where libxsmm's kernels, each
 * prefetching the next run's block, take 1.0-1.1x. Run after run, as a served model's
 * weights are, it is the faster (the bench MLP: mixed 1.07x float32's time at 2 threads,
 * 1.08-1.15x with libxsmm's kernels). The first two row tiles now prefetch the next quad's B
 * into L2, a line per term (mx_tile_rows): on the Intel host (2 MiB of L2 a core), a 2-thread
 * MLP layer (32x1024x512 a thread, its B from L3) went from 1.2x float32's time to 1.08x
 * (p10 233-238 us against 253-271 us; float32 212-223 us), and no slower with B in L2
 * (an earlier prefetch of the whole quad at once had cost 4-8 % there). A larger B takes
 * libxsmm's kernels. */
#define MX_AVX512_MAX_B (8u << 20)

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

/* acc (n) = or += the quad t (four run tiles of n floats, ld apart; a run past k all +0):
 * (t0 + t1) + (t2 + t3) in float32, widened, in the CPU's widest vectors */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void add_quad(double *restrict acc, const float *restrict t, long ld, long n, int first)
{
        const float *t1 = t + ld, *t2 = t1 + ld, *t3 = t2 + ld;

        if (first) {
                for (long i = 0; i < n; i++)
                        acc[i] = (double)((t[i] + t1[i]) + (t2[i] + t3[i]));
        } else {
                for (long i = 0; i < n; i++)
                        acc[i] += (double)((t[i] + t1[i]) + (t2[i] + t3[i]));
        }
}

/* rows x w of C = acc (ld MX_NB) rounded to float32, in the CPU's widest vectors (at
 * SSE2's two conversions a step it took about 5 % of a compute-bound product) */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void round_rows(const double *restrict acc, long rows, long w, float *restrict c, long ldc)
{
        for (long r = 0; r < rows; r++)
                for (long q = 0; q < w; q++)
                        c[r * ldc + q] = (float)acc[r * MX_NB + q];
}
/* the same with row r's rbias[r] added in float64 first */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void round_rows_rb(const double *restrict acc, long rows, long w, const float *restrict rbias, float *restrict c, long ldc)
{
        for (long r = 0; r < rows; r++) {
                double rb = rbias[r];
                for (long q = 0; q < w; q++)
                        c[r * ldc + q] = (float)(acc[r * MX_NB + q] + rb);
        }
}
/* the same with row r's affine instead: fma(acc, scale[r], shift[r]) (shift NULL: 0) */
__attribute__((target_clones("avx512f", "fma", "default"))) static void round_rows_af(const double *restrict acc, long rows, long w, const double *restrict scale, const double *restrict shift, float *restrict c, long ldc)
{
        for (long r = 0; r < rows; r++) {
                double sc = scale[r], sh = shift ? shift[r] : 0.0;
                for (long q = 0; q < w; q++)
                        c[r * ldc + q] = (float)fma(acc[r * MX_NB + q], sc, sh);
        }
}

/* ra's rows from row i on (into *at); NULL when ra is */
static const struct ops_row_affine *ra_from(const struct ops_row_affine *ra, long i, struct ops_row_affine *at)
{
        if (!ra)
                return NULL;
        *at = (struct ops_row_affine){ ra->bias ? ra->bias + i : NULL, ra->scale ? ra->scale + i : NULL,
                                       ra->shift ? ra->shift + i : NULL };
        return at;
}

/* what ra adds to row r's float64 sum v before the rounding */
static inline double ra_apply(const struct ops_row_affine *ra, long r, double v)
{
        if (!ra)
                return v;
        if (ra->scale)
                return fma(v, ra->scale[r], ra->shift ? ra->shift[r] : 0.0);
        return ra->bias ? v + (double)ra->bias[r] : v;
}

/* ---- cancellation: a convolution's output recomputed in float64 where it cancels ----
 *
 * The runs' sum of an output is within a few units in the last place of float32 of the
 * magnitude of its terms (OPS_MIXED_KB + 2 roundings at most). Where what the store adds to
 * it (the affine's shift or the bias, then the residual) cancels it, that error is left
 * beside a much smaller result: the ResNet block's second convolution, about 0.96, meets a
 * residual of -0.96 at one output in 200704, and two units in the last place of 0.96 are
 * 1.7 % of the 6.7e-06 left. So an output whose stored value is less than MX_CANCEL^-1
 * (2^-10) of the value it cancelled against (|shift| or |bias|, then |residual|) is summed
 * again, its products exact in float64 and added in float64 (mx_dot_exact), its affine
 * applied in float64, rounded once, then the residual added in float32 as everywhere else
 * (the model's own tensor between the two: exact where they cancel, as two floats within a
 * factor of two of each other subtract exactly): the error left is that one rounding, as
 * under float64 accumulation, whatever the cancellation. Few outputs cancel that far (a
 * handful a thousand on the ResNet block), and the kernels' vectors only test for them; a
 * store sums again at most its budget of them (below). */
#define MX_CANCEL 1024.0
/* The most outputs of a store (a chunk of a line by a block of channels; a channel's band of
 * lines) summed again: one in MX_RESUM_SHARE, at least MX_RESUM_MIN. A sum again costs
 * about 70 times an output's share of the kernel (0.6 us against 8.5 ns on the ResNet
 * block's convolution, one thread), and a model can make every output cancel (constant input
 * and filters and a shift of minus their sum, or a residual of minus the output): past the
 * budget the runs' values stand, so such a model makes its convolutions about 1.5 times as
 * long (that convolution with every output cancelled: 1.75 times oneDNN's float32 time
 * against 1.13-1.15), not 70 times, and a worker it holds comes back on time. The ResNet
 * block needs about one a line of 3584 outputs. */
#define MX_RESUM_SHARE 128
#define MX_RESUM_MIN 16

/* the k products x[off[kk]] * w[kk] (exact in float64) summed in float64, four partial sums
 * over kk mod 4, then (s0 + s1) + (s2 + s3): the same bits on every CPU */
__attribute__((target_clones("avx512f", "fma", "default"))) static double mx_dot_exact(const float *x, const long *off,
                                                                                      const float *w, long k)
{
        double s[4] = { 0.0, 0.0, 0.0, 0.0 };
        long kk = 0;

        for (; kk + 4 <= k; kk += 4)
                for (int q = 0; q < 4; q++)
                        s[q] = __builtin_fma((double)x[off[kk + q]], (double)w[kk + q], s[q]);
        for (int q = 0; kk < k; kk++, q++)
                s[q] = __builtin_fma((double)x[off[kk]], (double)w[kk], s[q]);
        return (s[0] + s[1]) + (s[2] + s[3]);
}

float ops_mixed_against(const struct ops_row_affine *ra, long ch)
{
        if (!ra)
                return 0.0f;
        if (ra->scale)
                return ra->shift ? (float)fabs(ra->shift[ch]) : 0.0f;
        return ra->bias ? fabsf(ra->bias[ch]) : 0.0f;
}

long ops_mixed_resum_budget(long outputs)
{
        return outputs / MX_RESUM_SHARE > MX_RESUM_MIN ? outputs / MX_RESUM_SHARE : MX_RESUM_MIN;
}

int ops_mixed_cancels(float v, float against, const float *resid)
{
        if (fabsf(v) * (float)MX_CANCEL < against)
                return 1;
        return resid && fabsf(v + *resid) * (float)MX_CANCEL < fabsf(*resid);
}

/* (not target_clones: clang's fuzz builds would not link an exported clone; the sum is) */
float ops_mixed_conv_exact(const float *x, const long *off, const float *w, long k, const struct ops_row_affine *ra,
                           long ch, const float *resid, int relu)
{
        float y = (float)ra_apply(ra, ch, mx_dot_exact(x, off, w, k));

        if (resid) /* added as the graph adds it: to the rounded output, in float32 */
                y += *resid;
        return relu && y < 0 ? 0.0f : y;
}

/* C = alpha * acc + beta * C (then row r's affine ra, struct ops_row_affine, in float64),
 * rounded once, then the post-op (bias, the bias of the tile's first column at bias; Relu)
 * as ops_sgemm applies it after a product: in float32, on the rounded value. (alpha and beta
 * other than 1 and 0 take a plain loop, without the fused multiply-adds a vector clone could
 * contract them into: the plain product's roundings.) */
static void store_tile(const double *restrict acc, long rows, long w, float alpha, float beta,
                       const struct ops_row_affine *ra, const float *restrict bias, int relu, float *restrict c,
                       long ldc)
{
        if (alpha == 1.0f && beta == 0.0f && ra && ra->scale) {
                round_rows_af(acc, rows, w, ra->scale, ra->shift, c, ldc);
        } else if (alpha == 1.0f && beta == 0.0f && ra && ra->bias) {
                round_rows_rb(acc, rows, w, ra->bias, c, ldc);
        } else if (alpha == 1.0f && beta == 0.0f) {
                round_rows(acc, rows, w, c, ldc);
        } else {
                for (long r = 0; r < rows; r++) {
                        float *restrict cr = c + (size_t)r * (size_t)ldc;
                        const double *restrict ar = acc + r * MX_NB;
                        for (long q = 0; q < w; q++) {
                                double v = (double)alpha * ar[q];
                                if (beta != 0.0f)
                                        v += (double)beta * (double)cr[q];
                                cr[q] = (float)ra_apply(ra, r, v);
                        }
                }
        }
        ops_sgemm_post_rows(c, ldc, rows, w, bias, relu);
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The AVX-512 kernel. A register tile is up to MX_MR rows of a column block (32 columns:
 * two vectors of float32 a row), or MX_MR1 rows of its first 16 columns when the call needs
 * no more of the block (a product 10 columns wide). A run is up to 32 fused multiply-adds
 * into float32 vectors that start at zero, in k order; the quad's first two runs go into two
 * sets of vectors and their sum to L1, the last two into the same sets, and the quad's sum
 * is widened and added to the float64 sums in acc (L1). Six rows keep twelve independent
 * sums in flight (the multiply-add's latency times its two pipes needs at least eight) in 27
 * of the 32 registers. B's block is read a quad's terms (16 KiB) at a time, which stay in L1
 * while every row tile uses them; the first two row tiles prefetch the next quad's into L2,
 * a line per term (mx_tile_rows; a prefetch of the whole quad at once had made the MLP layer
 * slower).
 *
 * Figures (bench_kernels f64, this host): the kernel alone runs at about 94 % of a float32
 * kernel of the same shape (89 % widening each pair of runs, 85-90 % each run); in a 2-thread
 * MLP layer it takes 1.05-1.15x libxsmm's float32 time, where libxsmm's kernels a run at a
 * time take 1.2-1.25x. */
#define MX_MR 6   /* rows of a register tile of 32 columns */
#define MX_MR1 12 /* of 16 columns */

static int mx_avx512_off; /* set by ops_mixed_kernel(0), before any product runs */

/* one run, terms [k0, k1), of mr rows by nv vectors of columns into s (set to it); B's row
 * kk at bp + kk * MX_NB, or at bp + off[kk] when off is not NULL */
#define MX_RUN(s, k0, k1)                                                                                  \
        do {                                                                                               \
                _Pragma("GCC unroll 12") for (int r = 0; r < mr; r++) for (int v = 0; v < nv; v++) s[r][v] = \
                        _mm512_setzero_ps();                                                               \
                for (long kk = (k0); kk < (k1); kk++) {                                                    \
                        const float *br = off ? bp + off[kk] : bp + kk * MX_NB;                            \
                        if (!off && pf) {                                                                  \
                                _mm_prefetch((const char *)(pf + (kk - kq) * 16), _MM_HINT_T1);            \
                                if (pf2)                                                                   \
                                        _mm_prefetch((const char *)(pf2 + (kk - kq) * 16), _MM_HINT_T1);   \
                        }                                                                                  \
                        __m512 b0 = _mm512_loadu_ps(br);                                                   \
                        __m512 b1 = nv > 1 ? _mm512_loadu_ps(br + 16) : b0;                                \
                        _Pragma("GCC unroll 12") for (int r = 0; r < mr; r++)                              \
                        {                                                                                  \
                                __m512 x = _mm512_set1_ps(a[r * lda + kk]);                                \
                                s[r][0] = _mm512_fmadd_ps(x, b0, s[r][0]);                                 \
                                if (nv > 1)                                                                \
                                        s[r][1] = _mm512_fmadd_ps(x, b1, s[r][1]);                         \
                        }                                                                                  \
                }                                                                                          \
        } while (0)

/* p[0 .. 16) = (first) or += a quad's 16 float32 sums u, widened to float64 */
static inline __attribute__((always_inline, target("avx512f"))) void mx_widen_add(double *p, __m512 u, int first)
{
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(u));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1)));

        if (!first) {
                lo = _mm512_add_pd(_mm512_load_pd(p), lo);
                hi = _mm512_add_pd(_mm512_load_pd(p + 8), hi);
        }
        _mm512_store_pd(p, lo);
        _mm512_store_pd(p + 8, hi);
}

/* acc[r][0..16 nv) (+)= the quad of runs of terms [k0, k1) (k0 a multiple of MX_QUAD, k1 at
 * most MX_QUAD on; an empty run sums to +0) of rows r < mr: set by the quad at term 0, added
 * to after */
static inline __attribute__((always_inline, target("avx512f"))) void
mx_rows(const int mr, const int nv, long k0, long k1, const float *a, long lda, const float *bp,
        const long *off, const float *pf, const float *pf2, double *acc)
{
        const long kq = k0;
        __m512 s[MX_MR1][2], t[MX_MR1][2];
        float pair[MX_MR1 * 2 * 16] __attribute__((aligned(64)));
        long m1 = k0 + MX_KB < k1 ? k0 + MX_KB : k1, m2 = m1 + MX_KB < k1 ? m1 + MX_KB : k1;
        long m3 = m2 + MX_KB < k1 ? m2 + MX_KB : k1;

        MX_RUN(s, k0, m1);
        MX_RUN(t, m1, m2);
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
                for (int v = 0; v < nv; v++)
                        _mm512_store_ps(pair + (r * 2 + v) * 16, _mm512_add_ps(s[r][v], t[r][v]));
        MX_RUN(s, m2, m3);
        MX_RUN(t, m3, k1);
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
                for (int v = 0; v < nv; v++)
                        mx_widen_add(acc + r * MX_NB + 16 * v,
                                     _mm512_add_ps(_mm512_load_ps(pair + (r * 2 + v) * 16),
                                                   _mm512_add_ps(s[r][v], t[r][v])),
                                     !k0);
}
#undef MX_RUN

/* One row tile (mr rows) of a chunk, the kernel specialised for its shape. */
#define MX_CASE(mr, nv)                                                    \
        case mr:                                                           \
                mx_rows(mr, nv, k0, k1, ar, lda, bp, off, pf, pf2, accr);  \
                break

/* acc (rows x MX_NB, aligned, ld MX_NB) = the sums of quads of runs of rows of A (lda) by the
 * block bp (k x MX_NB, the block's first column at bp; or row kk at bp + off[kk]), its
 * first 16 columns only when narrow: row tiles of MX_MR (MX_MR1 when narrow), the last two
 * shared out evenly rather than leaving a tile of a row or two (32 rows: 6, 6, 6, 6, 4, 4).
 * Inlined into the two callers below with off and narrow constant where they can be. */
static inline __attribute__((always_inline, target("avx512f"))) void
mx_tile_rows(long rows, long k, const float *a, long lda, const float *bp, const long *off, double *acc, int narrow)
{
        long most = narrow ? MX_MR1 : MX_MR;

        for (long k0 = 0; k0 < k; k0 += MX_QUAD) {
                long k1 = k0 + MX_QUAD < k ? k0 + MX_QUAD : k;
                for (long r = 0; r < rows;) {
                        long left = rows - r, mr = left <= most ? left : left < 2 * most ? (left + 1) / 2 : most;
                        const float *ar = a + r * lda;
                        double *accr = acc + r * MX_NB;
                        /* The first two row tiles prefetch the next quad's rows of the block
                         * into L2 (after the last quad, the next block's first: the blocks
                         * follow each other), a line per term: tile 0 the first half, tile 1
                         * the second, a lone tile both. */
                        const float *half = bp + (size_t)k1 * MX_NB + MX_QUAD * MX_NB / 2;
                        const float *pf = off || r ? NULL : bp + (size_t)k1 * MX_NB;
                        const float *pf2 = off || r >= 2 * most ? NULL : !r && mr < rows ? NULL : half;
                        if (!pf && pf2) /* tile 1 */
                                pf = pf2, pf2 = NULL;
                        if (narrow) {
                                switch (mr) {
                                        MX_CASE(12, 1);
                                        MX_CASE(11, 1);
                                        MX_CASE(10, 1);
                                        MX_CASE(9, 1);
                                        MX_CASE(8, 1);
                                        MX_CASE(7, 1);
                                        MX_CASE(6, 1);
                                        MX_CASE(5, 1);
                                        MX_CASE(4, 1);
                                        MX_CASE(3, 1);
                                        MX_CASE(2, 1);
                                        MX_CASE(1, 1);
                                default:
                                        break;
                                }
                        } else {
                                switch (mr) {
                                        MX_CASE(6, 2);
                                        MX_CASE(5, 2);
                                        MX_CASE(4, 2);
                                        MX_CASE(3, 2);
                                        MX_CASE(2, 2);
                                        MX_CASE(1, 2);
                                default:
                                        break;
                                }
                        }
                        r += mr;
                }
        }
}
#undef MX_CASE

/* on a packed block */
__attribute__((target("avx512f"))) static void mx_tile_avx512(long rows, long k, const float *a, long lda,
                                                              const float *bp, double *acc, int narrow)
{
        mx_tile_rows(rows, k, a, lda, bp, NULL, acc, narrow);
}

/* on B's rows at offsets: 32 columns */
__attribute__((target("avx512f"))) static void mx_tile_off(long rows, long k, const float *a, long lda,
                                                           const float *bp, const long *off, double *acc)
{
        mx_tile_rows(rows, k, a, lda, bp, off, acc, 0);
}

/* ---- convolutions with the product transposed: output channels across the vectors ----
 *
 * ops_mixed_conv_lines: a register tile is up to MC_MR output positions of one line (each
 * term of a position a scalar of the padded input, broadcast) by up to four vectors of 16
 * output channels (the filters, transposed into rows of MC_NB channels per term by
 * ops_mixed_pack_wt). Every element's sum is the same as the other kernels' (runs of
 * OPS_MIXED_KB terms by fused multiply-adds in k order, a quad's runs as (r0 + r1) +
 * (r2 + r3) in float32, the quads in float64); only the tiling differs. A run's 24 sums are
 * all the registers it keeps (the pair and the third run wait in L1), the filters' quad
 * (32 KiB for 64 channels) stays in L1 while every tile of the line uses it, and no position
 * past a line's last output is computed: a 3x3 convolution over 56-wide lines, whose padded
 * lines are 64 floats apart, does an eighth fewer multiply-adds than ops_mixed_product_off. */
#define MC_NB 64  /* channels of a block of the transposed filters: four vectors */
#define MC_MR 6   /* positions of a register tile */
#define MC_PC 64  /* the most positions of a line summed at a time (their float64 sums: 32 KiB) */

/* one run, terms [k0, k1), of positions x[off[kk] + r] (r < mr) by nv vectors of w's rows
 * (kk * MC_NB) into s (set to it) */
#define MC_RUN(s, k0, k1)                                                                                  \
        do {                                                                                               \
                _Pragma("GCC unroll 6") for (int r = 0; r < mr; r++) _Pragma("GCC unroll 4") for (int v = 0; \
                                                                                               v < nv; v++) \
                        s[r][v] = _mm512_setzero_ps();                                                     \
                for (long kk = (k0); kk < (k1); kk++) {                                                    \
                        const float *wr = w + kk * MC_NB, *xr = x + off[kk];                               \
                        __m512 b[4];                                                                       \
                        _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) b[v] = _mm512_loadu_ps(wr + 16 * v); \
                        _Pragma("GCC unroll 6") for (int r = 0; r < mr; r++)                               \
                        {                                                                                  \
                                __m512 xb = _mm512_set1_ps(xr[r]);                                         \
                                _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) s[r][v] =             \
                                        _mm512_fmadd_ps(xb, b[v], s[r][v]);                                \
                        }                                                                                  \
                }                                                                                          \
        } while (0)

/* acc[r][0 .. 16 nv) (ld MC_NB) (+)= the quad of runs of terms [k0, k1) of position r < mr:
 * set at term 0, added to after */
static inline __attribute__((always_inline, target("avx512f"))) void
mc_rows(const int mr, const int nv, long k0, long k1, const float *x, const long *off, const float *w,
        double *acc)
{
        __m512 s[MC_MR][4];
        float pair[MC_MR * 4 * 16] __attribute__((aligned(64))), r2[MC_MR * 4 * 16] __attribute__((aligned(64)));
        long m1 = k0 + MX_KB < k1 ? k0 + MX_KB : k1, m2 = m1 + MX_KB < k1 ? m1 + MX_KB : k1;
        long m3 = m2 + MX_KB < k1 ? m2 + MX_KB : k1;

/* stmt for each register of the tile: position r, vector v */
#define MC_EACH(stmt)                                                                          \
        _Pragma("GCC unroll 6") for (int r = 0; r < mr; r++) _Pragma("GCC unroll 4") for (int v = 0; \
                                                                                           v < nv; v++) stmt
        MC_RUN(s, k0, m1);
        MC_EACH(_mm512_store_ps(pair + (r * 4 + v) * 16, s[r][v]));
        MC_RUN(s, m1, m2); /* r0 + r1 */
        MC_EACH(_mm512_store_ps(pair + (r * 4 + v) * 16, _mm512_add_ps(_mm512_load_ps(pair + (r * 4 + v) * 16), s[r][v])));
        MC_RUN(s, m2, m3);
        MC_EACH(_mm512_store_ps(r2 + (r * 4 + v) * 16, s[r][v]));
        MC_RUN(s, m3, k1); /* (r0 + r1) + (r2 + r3) */
        MC_EACH(mx_widen_add(acc + r * MC_NB + 16 * v,
                             _mm512_add_ps(_mm512_load_ps(pair + (r * 4 + v) * 16),
                                           _mm512_add_ps(_mm512_load_ps(r2 + (r * 4 + v) * 16), s[r][v])),
                             !k0));
#undef MC_EACH
}
#undef MC_RUN

#define MC_CASE(mr, nv)                                                            \
        case mr:                                                                   \
                mc_rows(mr, nv, k0, k1, x + p, off, w, acc + p * MC_NB);           \
                break
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MC_LEAN 1
#endif
#endif
#ifdef MC_LEAN
/* clang's sanitizer builds (the fuzz targets): the full tile of four vectors and one for
 * any other shape, the same sums, in a fraction of the compile time (clang -O1 with ASan
 * and UBSan took 11 minutes over this file with the 18 shapes, 3 without any) */
#define MC_CASES(nv)                                                               \
        {                                                                          \
                if (mr == MC_MR && nv == 4)                                        \
                        mc_rows(MC_MR, 4, k0, k1, x + p, off, w, acc + p * MC_NB); \
                else                                                               \
                        mc_rows((int)mr, nv, k0, k1, x + p, off, w, acc + p * MC_NB); \
        }
#else
#define MC_CASES(nv)                                                               \
        switch (mr) {                                                              \
                MC_CASE(6, nv);                                                    \
                MC_CASE(5, nv);                                                    \
                MC_CASE(4, nv);                                                    \
                MC_CASE(3, nv);                                                    \
                MC_CASE(2, nv);                                                    \
                MC_CASE(1, nv);                                                    \
        default:                                                                   \
                break;                                                             \
        }
#endif

/* acc (n x MC_NB, aligned) = the sums of positions x + p (p < n) by nv vectors of the
 * block w: quad by quad, every tile of the positions (MC_MR, the last two shared out
 * evenly) on the quad's filters while they are in L1 */
__attribute__((target("avx512f"))) static void mc_positions(long n, long k, const float *x, const long *off,
                                                            const float *w, int nv, double *acc)
{
        for (long k0 = 0; k0 < k; k0 += MX_QUAD) {
                long k1 = k0 + MX_QUAD < k ? k0 + MX_QUAD : k;
                for (long p = 0; p < n;) {
                        long left = n - p, mr = left <= MC_MR ? left : left < 2 * MC_MR ? (left + 1) / 2 : MC_MR;
#ifdef MC_LEAN
                        const int nv_ = nv;
                        MC_CASES(nv_)
#else
                        if (nv == 4)
                                MC_CASES(4)
                        else if (nv == 2)
                                MC_CASES(2)
                        else
                                MC_CASES(1)
#endif
                        p += mr;
                }
        }
}
#undef MC_CASES
#undef MC_CASE

/* 16 x 16 floats transposed in registers (rows in, columns out) */
static inline __attribute__((always_inline, target("avx512f"))) void mc_transpose16(__m512 r[16])
{
        __m512 t[16];

        for (int i = 0; i < 8; i++) { /* pairs of rows interleaved by elements */
                t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 4; i++) { /* quads of rows, by pairs of elements */
                __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
                __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
                r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
                r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
                r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
                r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
        }
        /* now r[4q + j] holds, in 128-bit lane L, element 4L + j of rows 4q .. 4q + 3 */
        for (int j = 0; j < 4; j++) { /* lanes 0, 2 and 1, 3 of quads 0 and 1, 2 and 3 */
                t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
                t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
                t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
                t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
        }
        for (int j = 0; j < 4; j++) {
                r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
                r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
                r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
                r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd);
        }
}

/* where a tile's sums came from, to sum an output again (ops_mixed_conv_exact): its
 * positions' terms at x + p + off[kk], channel ch's k filters as stored at w + ch * k */
struct mc_src {
        const float *x;
        const long *off;
        const float *w;
        long k;
};

/* c[ch * ldc + p] = acc[p][ch] (then channel ch's affine ra, in float64) rounded to float32, p < n,
 * ch < nc, then + resid[ch * ldc + p] (resid not NULL) and Relu (relu): 16 positions by 16
 * channels at a time, rounded in vectors and transposed in registers (a scalar loop over
 * the strided sums took a tenth of the convolution) */
__attribute__((target("avx512f"))) static void mc_store(const double *acc, long n, long nc,
                                                        const struct ops_row_affine *ra, const float *resid, int relu,
                                                        float *c, long ldc, const struct mc_src *src)
{
        const float *rbias = ra && !ra->scale ? ra->bias : NULL;
        const double *scale = ra ? ra->scale : NULL;
        long budget = ops_mixed_resum_budget(n * nc);
        for (long c0 = 0; c0 < nc; c0 += 16) {
                long cw = nc - c0 < 16 ? nc - c0 : 16;
                __mmask16 cm = (__mmask16)((1u << cw) - 1);
                __m512d b0 = _mm512_setzero_pd(), b1 = b0, s0 = b0, s1 = b0;
                if (rbias) {
                        __m512 bv = _mm512_maskz_loadu_ps(cm, rbias + c0);
                        b0 = _mm512_cvtps_pd(_mm512_castps512_ps256(bv));
                        b1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(bv), 1)));
                }
                float against[16];
                for (long q = 0; q < 16; q++)
                        against[q] = q < cw ? ops_mixed_against(ra, c0 + q) : 0.0f;
                if (scale) {
                        s0 = _mm512_maskz_loadu_pd((__mmask8)cm, scale + c0);
                        s1 = _mm512_maskz_loadu_pd((__mmask8)(cm >> 8), scale + c0 + 8);
                        if (ra->shift) {
                                b0 = _mm512_maskz_loadu_pd((__mmask8)cm, ra->shift + c0);
                                b1 = _mm512_maskz_loadu_pd((__mmask8)(cm >> 8), ra->shift + c0 + 8);
                        }
                }
                for (long p0 = 0; p0 < n; p0 += 16) {
                        long pw = n - p0 < 16 ? n - p0 : 16;
                        __mmask16 pm = (__mmask16)((1u << pw) - 1);
                        __m512 r[16];
                        for (int p = 0; p < 16; p++) {
                                if (p >= pw) {
                                        r[p] = _mm512_setzero_ps();
                                        continue;
                                }
                                const double *a = acc + (p0 + p) * MC_NB + c0;
                                __m512d lo = _mm512_load_pd(a), hi = _mm512_load_pd(a + 8);
                                if (scale) {
                                        lo = _mm512_fmadd_pd(lo, s0, b0);
                                        hi = _mm512_fmadd_pd(hi, s1, b1);
                                } else if (rbias) {
                                        lo = _mm512_add_pd(lo, b0);
                                        hi = _mm512_add_pd(hi, b1);
                                }
                                r[p] = _mm512_castpd_ps(_mm512_insertf64x4(
                                        _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))),
                                        _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
                        }
                        mc_transpose16(r);
                        for (long q = 0; q < cw; q++) {
                                __m512 v = r[q], big = _mm512_set1_ps((float)MX_CANCEL);
                                /* the outputs that cancel (ops_mixed_cancels): |v| 2^10 < |shift|,
                                 * then |v + resid| 2^10 < |resid| */
                                __mmask16 redo = against[q] > 0.0f ? _mm512_mask_cmp_ps_mask(
                                                                             pm, _mm512_mul_ps(_mm512_abs_ps(v), big),
                                                                             _mm512_set1_ps(against[q]), _CMP_LT_OQ)
                                                                   : 0;
                                if (resid) {
                                        __m512 rv = _mm512_maskz_loadu_ps(pm, resid + (c0 + q) * ldc + p0);
                                        v = _mm512_add_ps(v, rv);
                                        redo |= _mm512_mask_cmp_ps_mask(pm, _mm512_mul_ps(_mm512_abs_ps(v), big),
                                                                        _mm512_abs_ps(rv), _CMP_LT_OQ);
                                }
                                if (relu)
                                        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ),
                                                                 v, _mm512_setzero_ps());
                                _mm512_mask_storeu_ps(c + (c0 + q) * ldc + p0, pm, v);
                                for (; redo && budget > 0; redo &= (__mmask16)(redo - 1), budget--) {
                                        long p = p0 + __builtin_ctz(redo), at = (c0 + q) * ldc + p;
                                        c[at] = ops_mixed_conv_exact(src->x + p, src->off, src->w + (c0 + q) * src->k,
                                                                     src->k, ra, c0 + q, resid ? resid + at : NULL,
                                                                     relu);
                                }
                        }
                }
        }
}

/* ops_mixed_pack_wt 16 channels by 16 terms at a time, transposed in registers (the scalar
 * loop took 2 % of a convolution's part) */
__attribute__((target("avx512f"))) static void mc_pack(const float *w, long m, long k, long ldw, float *wp)
{
        for (long cb = 0; cb < m; cb += MC_NB)
                for (long c0 = cb; c0 < cb + MC_NB; c0 += 16) {
                        long cw = m - c0 < 16 ? (m > c0 ? m - c0 : 0) : 16;
                        for (long k0 = 0; k0 < k; k0 += 16) {
                                long kw = k - k0 < 16 ? k - k0 : 16;
                                __mmask16 km = (__mmask16)((1u << kw) - 1);
                                __m512 r[16];
                                for (long q = 0; q < 16; q++)
                                        r[q] = q < cw ? _mm512_maskz_loadu_ps(km, w + (c0 + q) * ldw + k0)
                                                      : _mm512_setzero_ps();
                                mc_transpose16(r);
                                for (long q = 0; q < kw; q++)
                                        _mm512_storeu_ps(wp + cb * k + (k0 + q) * MC_NB + (c0 - cb), r[q]);
                        }
                }
}

int ops_mixed_kernel(int avx512)
{
        if (avx512 >= 0)
                mx_avx512_off = !avx512;
        return !mx_avx512_off && __builtin_cpu_supports("avx512f");
}
#else
static void mx_tile_avx512(long rows, long k, const float *a, long lda, const float *bp, double *acc, int narrow)
{
        (void)rows, (void)k, (void)a, (void)lda, (void)bp, (void)acc, (void)narrow;
        abort();
}
static void mx_tile_off(long rows, long k, const float *a, long lda, const float *bp, const long *off, double *acc)
{
        (void)rows, (void)k, (void)a, (void)lda, (void)bp, (void)off, (void)acc;
        abort();
}
static void mc_positions(long n, long k, const float *x, const long *off, const float *w, int nv, double *acc)
{
        (void)n, (void)k, (void)x, (void)off, (void)w, (void)nv, (void)acc;
        abort();
}
struct mc_src;
static void mc_store(const double *acc, long n, long nc, const struct ops_row_affine *ra, const float *resid,
                     int relu, float *c, long ldc, const struct mc_src *src)
{
        (void)acc, (void)n, (void)nc, (void)ra, (void)resid, (void)relu, (void)c, (void)ldc, (void)src;
        abort();
}
static void mc_pack(const float *w, long m, long k, long ldw, float *wp)
{
        (void)w, (void)m, (void)k, (void)ldw, (void)wp;
        abort();
}

int ops_mixed_kernel(int avx512)
{
        (void)avx512;
        return 0;
}
#endif

/* The kernels of one tile shape: runs of MX_KB and the last, shorter one. */
struct tile_fns {
        long w, rows;
        libxsmm_smmfunction full, tail;
};

/* rows x w of C from rows of A (row-major, lda) and the column panel bp (k x MX_NB, block
 * layout, the tile's first column at bp); next: what to prefetch after the panel's last
 * run. */
static void tile(const struct tile_fns *f, long k, const float *a, long lda, const float *bp, const float *next,
                 float alpha, float beta, const struct ops_row_affine *ra, const float *bias, int relu, float *c,
                 long ldc)
{
        double acc[MX_MB * MX_NB] __attribute__((aligned(64)));
        float t[4][MX_MB * MX_NB] __attribute__((aligned(64)));
        long n = f->rows * MX_NB;

        for (long q0 = 0; q0 < k; q0 += MX_QUAD) {
                for (int q = 0; q < 4; q++) {
                        long k0 = q0 + q * MX_KB, kn = k - k0 < MX_KB ? k - k0 : MX_KB;
                        if (kn <= 0) { /* past k: a run of no terms */
                                memset(t[q], 0, sizeof(float) * (size_t)n);
                                continue;
                        }
                        libxsmm_smmfunction fn = kn == MX_KB ? f->full : f->tail;
                        /* the kernel prefetches the next run's block of B into L2 as it
                         * computes this one: with few rows (an MLP layer's 32) the weights
                         * stream from memory, and without it the product took 1.5-1.8x
                         * float32's time instead of 1.15-1.3x */
                        const float *pa = k0 + MX_KB < k ? bp + (size_t)(k0 + MX_KB) * MX_NB : next;
                        if (fn)
                                fn(bp + (size_t)k0 * MX_NB, a + k0, t[q], pa, a + k0, t[q]);
                        else
                                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)f->rows,
                                            (blasint)f->w, (blasint)kn, 1.0f, a + k0, (blasint)lda,
                                            bp + (size_t)k0 * MX_NB, MX_NB, 0.0f, t[q], MX_NB);
                }
                add_quad(acc, t[0], MX_MB * MX_NB, n, q0 == 0);
        }
        store_tile(acc, f->rows, f->w, alpha, beta, ra, bias, relu, c, ldc);
}

void ops_mixed_product(long m, long n, long k, const float *a, long lda, const float *bx, long lo, float alpha,
                       float beta, float *c, long ldc, const struct ops_row_affine *ra,
                       const struct ops_sgemm_post *post)
{
        const float *bias = post ? post->bias : NULL;
        int relu = post && post->relu;
        /* libxsmm's kernels for at most three widths (a first partial block, whole ones, a
         * last partial one) by two row counts */
        struct tile_fns fns[6];
        int nf = 0;
        long mb = m < MX_MB ? m : MX_MB;
        /* the blocks of B the call reads (from lo's block to its last column's) */
        uint64_t b_bytes = (uint64_t)((lo + n - 1) / MX_NB - lo / MX_NB + 1) * (uint64_t)k * MX_NB * sizeof(float);
        int avx512 = ops_mixed_kernel(-1) && b_bytes <= MX_AVX512_MAX_B;
        double acc[MX_MB * MX_NB] __attribute__((aligned(64))); /* the AVX-512 kernel's tile */

        for (long j = 0; j < n;) {
                long abs = lo + j, blk = abs / MX_NB, off = abs % MX_NB;
                long w = n - j < MX_NB - off ? n - j : MX_NB - off;
                const float *block = bx + (size_t)blk * (size_t)k * MX_NB;
                for (long i0 = 0; i0 < m; i0 += mb) {
                        long rows = m - i0 < mb ? m - i0 : mb;
                        const float *ar = a + (size_t)i0 * (size_t)lda, *bj = bias ? bias + j : NULL;
                        struct ops_row_affine rat;
                        const struct ops_row_affine *rb = ra_from(ra, i0, &rat);
                        float *cr = c + (size_t)i0 * (size_t)ldc + (size_t)j;
                        if (avx512) {
                                mx_tile_avx512(rows, k, ar, lda, block, acc, off + w <= 16);
                                store_tile(acc + off, rows, w, alpha, beta, rb, bj, relu, cr, ldc);
                                continue;
                        }
                        int q = 0;
                        while (q < nf && (fns[q].w != w || fns[q].rows != rows))
                                q++;
                        if (q == nf) /* a new shape: at most 3 widths x 2 row counts */
                                fns[nf++] = (struct tile_fns){ w, rows, run_kernel(w, rows, MX_KB, lda),
                                                               k % MX_KB ? run_kernel(w, rows, k % MX_KB, lda)
                                                                         : NULL };
                        /* what the last runs prefetch: the panel again for the next rows,
                         * else the next block's */
                        const float *next = i0 + mb < m || j + w >= n ? block + off : block + (size_t)k * MX_NB;
                        tile(&fns[q], k, ar, lda, block + off, next, alpha, beta, rb, bj, relu, cr, ldc);
                }
                j += w;
        }
}

int ops_mixed_product_off(long m, long npos, long k, const float *a, long lda, const float *xp, const long *off,
                          long pitch, long width, float *c, long lpitch, long ldc, const struct ops_row_affine *ra)
{
        double acc[MX_MB * MX_NB] __attribute__((aligned(64)));

        if (!ops_mixed_kernel(-1))
                return 1;
        for (long p0 = 0; p0 < npos; p0 += MX_NB) {
                long w = npos - p0 < MX_NB ? npos - p0 : MX_NB;
                for (long i0 = 0; i0 < m; i0 += MX_MB) {
                        long rows = m - i0 < MX_MB ? m - i0 : MX_MB;
                        struct ops_row_affine rat;
                        const struct ops_row_affine *rb = ra_from(ra, i0, &rat);
                        mx_tile_off(rows, k, a + (size_t)i0 * (size_t)lda, lda, xp + p0, off, acc);
                        /* the block's positions, a piece per line, those past width dropped */
                        for (long q = 0; q < w;) {
                                long p = p0 + q, line = p / pitch, col = p % pitch;
                                long len = w - q < pitch - col ? w - q : pitch - col;
                                if (col < width)
                                        store_tile(acc + q, rows, len < width - col ? len : width - col, 1.0f, 0.0f,
                                                   rb, NULL, 0,
                                                   c + (size_t)i0 * (size_t)ldc + (size_t)(line * lpitch + col), ldc);
                                q += len;
                        }
                }
        }
        return 0;
}

long ops_mixed_wt_floats(long m, long k)
{
        return (m + MC_NB - 1) / MC_NB * MC_NB * k;
}

float *ops_mixed_pack_wt(const float *w, long m, long k, long ldw, float *wp)
{
        if (ops_mixed_kernel(-1)) {
                mc_pack(w, m, k, ldw, wp);
                return wp;
        }
        for (long cb = 0; cb < m; cb += MC_NB) {
                float *blk = wp + cb * k;
                long nc = m - cb < MC_NB ? m - cb : MC_NB;
                for (long kk = 0; kk < k; kk++) {
                        float *row = blk + kk * MC_NB;
                        for (long c = 0; c < nc; c++)
                                row[c] = w[(cb + c) * ldw + kk];
                        for (long c = nc; c < MC_NB; c++)
                                row[c] = 0.0f;
                }
        }
        return wp;
}

static int mc_off; /* set by ops_mixed_conv_transposed(0) */

int ops_mixed_conv_transposed(int on)
{
        if (on >= 0)
                mc_off = !on;
        return !mc_off && ops_mixed_kernel(-1);
}

int ops_mixed_conv_lines(long m, long k, const float *wp, const float *w, const float *xp, const long *off,
                         long pitch, long lines, long width, float *c, long lpitch, long ldc,
                         const struct ops_row_affine *ra, const struct ops_conv_post *post)
{
        const float *resid = post ? post->resid : NULL;
        int relu = post && post->relu;
        double acc[MC_PC * MC_NB] __attribute__((aligned(64)));

        if (!ops_mixed_kernel(-1))
                return 1;
        for (long l = 0; l < lines; l++)
                for (long cb = 0; cb < m; cb += MC_NB) {
                        long nc = m - cb < MC_NB ? m - cb : MC_NB;
                        int nv = nc > 32 ? 4 : nc > 16 ? 2 : 1;
                        /* the line in even chunks of at most MC_PC: each chunk reads all
                         * the filters again from L2, quad by quad (on the ResNet block's lines
                         * of 56, one thread: a chunk of 56 took 0.94-0.99 of the time of two of
                         * 28 in five runs of 30 alternated rounds, medians against oneDNN's
                         * float32 convolution in the same rounds; chunks of 14 took 1.02-1.07) */
                        long chunk = (width + (width + MC_PC - 1) / MC_PC - 1) / ((width + MC_PC - 1) / MC_PC);
                        for (long p0 = 0; p0 < width; p0 += chunk) {
                                long n = width - p0 < chunk ? width - p0 : chunk;
                                mc_positions(n, k, xp + l * pitch + p0, off, wp + cb * k, nv, acc);
                                long at = cb * ldc + l * lpitch + p0;
                                struct ops_row_affine rat;
                                struct mc_src src = { xp + l * pitch + p0, off, w + cb * k, k };
                                mc_store(acc, n, nc, ra_from(ra, cb, &rat), resid ? resid + at : NULL, relu, c + at,
                                         ldc, &src);
                        }
                }
        return 0;
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

/* Without scratch: the same sums in a plain loop (each run by fused multiply-adds in k
 * order, as the AVX-512 kernel sums it; libxsmm's kernels may split a run's sum into partial
 * sums of their own, within the same bound). It checks the run context every row and stops
 * when the run must (the recorded stop reason then fails the node). */
static void product_loop(long m, long n, long k, float alpha, const float *a, long lda, int ta, const float *b,
                         long ldb, int tb, float beta, float *c, long ldc)
{
        for (long i = 0; i < m && !ops_runctx_check(NULL, 0); i++)
                for (long j = 0; j < n; j++) {
                        double s = 0.0;
                        for (long q0 = 0; q0 < k; q0 += MX_QUAD) {
                                float r[4];
                                for (int q = 0; q < 4; q++) {
                                        long k0 = q0 + q * MX_KB;
                                        r[q] = 0.0f;
                                        for (long kk = k0; kk < k && kk < k0 + MX_KB; kk++)
                                                r[q] = __builtin_fmaf(ops_mat_at(a, lda, ta, i, kk),
                                                                      ops_mat_at(b, ldb, tb, kk, j), r[q]);
                                }
                                float quad = (r[0] + r[1]) + (r[2] + r[3]);
                                s = q0 ? s + (double)quad : (double)quad;
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
                                          c + (size_t)i0 * (size_t)ldc + (size_t)j0, ldc, NULL,
                                          post ? &(struct ops_sgemm_post){ bias ? bias + j0 : NULL, relu } : NULL);
                }
        }
        ops_buf_free(ad);
        ops_buf_free(bd);
}

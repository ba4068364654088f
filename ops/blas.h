/* Single-precision GEMM for the operators (MatMul, Gemm, Conv's im2col product, ...):
 * oneDNN's dnnl_sgemm where it is faster than OpenBLAS, OpenBLAS elsewhere.
 *
 * Measured on one core of the build host (tests/bench/bench_kernels prints the comparison):
 * oneDNN runs AVX-512 kernels where OpenBLAS, as these machines configure it, runs AVX2
 * ones, and wins from about 4096 multiply-adds up (1.1x at 8x16x32, 2-6x from 64^3); below
 * that its call overhead (about 0.3 us) loses to OpenBLAS. Both run on the calling thread
 * only: OpenBLAS is pinned to one thread by ops_set_threads, and oneDNN's OpenMP team is
 * set to one thread in every thread that calls it, so the parallelism of a big product is
 * the scheduler's tiles, never a library pool. NPUD_SGEMM=openblas forces OpenBLAS (for
 * before/after measurements). */
#ifndef NPUD_OPS_BLAS_H
#define NPUD_OPS_BLAS_H

#include <stdint.h>

#include <cblas.h>

/* cblas_sgemm's contract, row-major or column-major. */
void ops_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
               blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
               const float *b, blasint ldb, float beta, float *c, blasint ldc);

/* Kernel variants of ops_sgemm, for tuning (ops/tune.h): OPS_SGEMM_AUTO picks by size. */
enum {
        OPS_SGEMM_AUTO = -1,
        OPS_SGEMM_OPENBLAS = 0,
        OPS_SGEMM_ONEDNN = 1,
        /* oneDNN's matmul primitive on weights reordered once into its blocked layout
         * (struct ops_packed_b); oneDNN's dnnl_sgemm for a call that does not match them */
        OPS_SGEMM_ONEDNN_PACKED = 2,
        /* Conv: oneDNN's direct convolution on channel-blocked copies of the input and
         * output, with the filters reordered once (struct ops_packed_conv); any other call
         * runs as under OPS_SGEMM_ONEDNN */
        OPS_SGEMM_ONEDNN_DIRECT = 3,
        /* libxsmm's JIT kernels on the same constant weights copied once into column blocks
         * of 32 (struct ops_packed_b, ops_packed_b_keep), prefetching the next block; the
         * plain path (as under OPS_SGEMM_ONEDNN) for a call that does not match them */
        OPS_SGEMM_XSMM_PACKED = 4,
        /* Every multiply-add in float64, the result rounded to float32 once (gemm-f64.c):
         * about half the speed of the float32 variants, and each element within a few ulps
         * of the exact product of its float32 operands (a float32 sum of K products drifts
         * by about K ulps of its terms). On constant weights, a float64 copy made once
         * (ops_packed_b_new_f64); Conv lowers to it by im2col in bands. Chosen for a graph
         * loaded with float64 accumulation, never by tuning a float32 one. */
        OPS_SGEMM_F64 = 5,
        /* Products summed in float32 over runs of OPS_MIXED_KB terms, four runs added in
         * float32 and those sums in float64 (gemm-mixed.c): the error no longer grows with
         * K, at about 90 % of the float32 variants' speed. On constant weights, the libxsmm column-block copy made
         * once (ops_packed_b_new_mixed); Conv as the product of its filters by its im2col,
         * read in place from a padded copy of the input or a band of lines at a time in the
         * column-block layout (nn-conv.c). Chosen
         * for a graph loaded with mixed accumulation, never by tuning. */
        OPS_SGEMM_MIXED = 6,
        OPS_SGEMM_VARIANTS = 7
};
extern const char *const ops_sgemm_variant_names[OPS_SGEMM_VARIANTS];
/* A variant that computes on a packed B (struct ops_packed_b). */
static inline int ops_sgemm_on_packed_b(int variant)
{
        return variant == OPS_SGEMM_ONEDNN_PACKED || variant == OPS_SGEMM_XSMM_PACKED;
}
/* The variant this thread's ops_sgemm calls use until changed (a tuned graph node sets it
 * around its kernel); NPUD_SGEMM=openblas still forces OpenBLAS. */
void ops_sgemm_force(int variant);

/* Constant weights (a graph initializer used as a GEMM's B) reordered once into the layout
 * oneDNN's matmul primitive prefers: at 32..128 rows and 1024 columns the product then takes
 * 0.4x the time of dnnl_sgemm on the plain layout, which repacks B on every call.
 *
 * A packed B is made for one B: the k x n operand of a row-major product, b pointing at its
 * rows (k rows of n when !transb, n rows of k when transb). ops_sgemm uses it only for a call
 * that matches it (row-major, A not transposed, alpha 1, beta 0 or 1, this b pointer with the
 * same k, n, transposition and ldb, plain lda and ldc); any other call takes the plain path.
 * The one exception: with transb, a call on a column block of B (b = rows lo..lo+n of the
 * stored B, as a column part of a split Gemm runs) uses a packed copy of that block made on
 * its first use, at most OPS_PACKED_MAX_BLOCKS of them holding no more bytes in all than the
 * whole copy (ops_packed_b_bytes counts them). The reordered copies are made from b's
 * contents: b must not change while the packed B lives.
 *
 * Thread-safe: parts of one node may run on several threads at once with different row
 * counts; the matmul primitive of each row count is made once (under a mutex) and kept, at
 * most OPS_PACKED_MAX_SHAPES of them (past that a new row count takes the plain path). */
#define OPS_PACKED_MAX_SHAPES 16
#define OPS_PACKED_MAX_BLOCKS 16
struct ops_packed_b;

/* NULL (with a message) when oneDNN is not wanted (NPUD_SGEMM=openblas), packing is off
 * (NPUD_SGEMM_PACKED=0: the tuning pass then measures packable nodes without the packed
 * variant, for before/after comparisons) or oneDNN refuses the shape; m_hint: a typical row count, for the layout choice. */
struct ops_packed_b *ops_packed_b_new(const float *b, long k, long n, int transb, long m_hint,
                                      char *err, size_t errlen);
void ops_packed_b_free(struct ops_packed_b *p);
/* Bytes of the reordered copy and of its column blocks made so far. */
uint64_t ops_packed_b_bytes(const struct ops_packed_b *p);
/* Products computed on the packed weights so far (tests: the packed path was taken). */
uint64_t ops_packed_b_runs(const struct ops_packed_b *p);
/* The packed B this thread's ops_sgemm calls may use (under OPS_SGEMM_ONEDNN_PACKED or
 * OPS_SGEMM_XSMM_PACKED) until changed; NULL for none. */
void ops_sgemm_packed(const struct ops_packed_b *p);
/* The libxsmm layout is made on the first call under OPS_SGEMM_XSMM_PACKED (unless
 * NPUD_SGEMM_XSMM=0); once tuning has chosen, this keeps only the layout the variant uses
 * (the oneDNN copy for any other variant) and frees the other. */
void ops_packed_b_keep(struct ops_packed_b *p, int variant);
/* libxsmm makes kernels on this CPU and NPUD_SGEMM_XSMM=0 is not set: the xsmm-packed
 * variant computes on its layout (otherwise it takes the plain path). */
int ops_xsmm_usable(void);

/* A post-op of this thread's row-major ops_sgemm calls until cleared (NULL): C = relu?(alpha A B
 * + beta C + bias[j]) with bias (NULL: none) one value per column of the call's C. The
 * libxsmm path applies it to each tile right after computing it, while the tile is in L1
 * (Gemm's bias row and a fused Relu then cost no pass of their own over C); the others in
 * one pass after the product. */
struct ops_sgemm_post {
        const float *bias;
        int relu;
};
void ops_sgemm_post(const struct ops_sgemm_post *post);
/* The post-op on rows x w of C (ld ldc): bias[q] added to column q (bias NULL: none), in
 * float32, then the Relu (a NaN stays NaN). */
void ops_sgemm_post_rows(float *c, long ldc, long rows, long w, const float *bias, int relu);
/* A fused Relu for the node's product (graph epilogues): ops_sgemm_relu_offer(1) before
 * running the operator; the operator takes it with ops_sgemm_relu_claim (1: it applies the
 * Relu itself, as its GEMM's post-op); ops_sgemm_relu_offer(0) withdraws the offer and
 * answers whether it was claimed (0: the caller applies the Relu). */
int ops_sgemm_relu_offer(int on);
int ops_sgemm_relu_claim(void);

/* The variant set by ops_sgemm_force on this thread (OPS_SGEMM_AUTO when none). */
int ops_sgemm_forced(void);

/* Filters of a 2-D float32 Conv (a graph initializer [M, C, KH, KW], one group) reordered
 * once into the layout oneDNN's direct convolution prefers. A call that matches them (this
 * w pointer, the same filter shape, strides and dilations) then runs as that convolution:
 * the input is reordered into oneDNN's channel-blocked layout, convolved, and the result
 * reordered back into the NCHW output, a band of output rows at a time (at most about
 * OPS_POLL_MACS multiply-adds each, with a check of the run context between bands). The
 * 3x3 convolutions of a ResNet block run there at about 170 GFLOP/s a core against 100-150
 * for im2col + sgemm (tests/bench/bench_kernels prints both), and lay out no im2col matrix.
 *
 * The primitives of each input geometry (extents and pads of a band) are made on first use
 * and kept, at most OPS_PACKED_MAX_SHAPES of them; past that a call takes the im2col path.
 * Thread-safe like struct ops_packed_b. w must not change while the packed filters live.
 * NULL (with a message) when oneDNN is not wanted, NPUD_CONV_DIRECT=0, or oneDNN refuses
 * the shape; (n, ih, iw, pads) is a typical input, for the layout choice. */
struct ops_packed_conv;
struct ops_call;
struct ops_packed_conv *ops_packed_conv_new(const float *w, const int64_t wdims[4], const int64_t strides[2],
                                            const int64_t dilations[2], const int64_t in_hw[2],
                                            const int64_t pads[4], char *err, size_t errlen);
/* The packed filters of a Conv call (its attributes and the shapes of its inputs; the
 * filters' data, float32) when it is 2-D, of one group and the filters 4-D: NULL (with a
 * message) otherwise or when ops_packed_conv_new refuses. */
struct ops_packed_conv *ops_conv_pack(const struct ops_call *call, char *err, size_t errlen);
void ops_packed_conv_free(struct ops_packed_conv *p);
uint64_t ops_packed_conv_bytes(const struct ops_packed_conv *p);
/* Bands convolved on the packed filters so far, one or more an image (tests: the direct
 * path was taken). */
uint64_t ops_packed_conv_runs(const struct ops_packed_conv *p);
/* The packed filters this thread's Conv calls may use (under OPS_SGEMM_ONEDNN_DIRECT) until
 * changed; NULL for none. */
void ops_conv_packed(const struct ops_packed_conv *p);
/* Run def on call with the GEMM kernels of this thread set to variant (OPS_SGEMM_AUTO: the
 * default) on packed weights or filters (NULL: none) for that run only: ops_run's result. */
struct ops_def;
int ops_run_variant(const struct ops_def *def, const struct ops_call *call, int variant,
                    const struct ops_packed_b *packed, const struct ops_packed_conv *pconv, char *err,
                    size_t errlen);

/* The activation a direct convolution applies to its output (oneDNN post-ops); others stay
 * with the caller. */
enum ops_conv_act {
        OPS_CONV_ACT_NONE = 0,
        OPS_CONV_ACT_RELU = 1, /* alpha: the slope below zero (LeakyRelu), 0 for Relu */
};
struct ops_conv_direct_args {
        const struct ops_packed_conv *packed; /* NULL: this thread's (ops_conv_packed), under
                                               * OPS_SGEMM_ONEDNN_DIRECT only */
        const float *x, *w, *bias;            /* bias [m] or NULL */
        float *y;
        int64_t n, c, ih, iw, oh, ow;
        int64_t wdims[4], strides[2], dilations[2], pads[4]; /* pads: top, left, bottom, right */
        int act;                              /* enum ops_conv_act */
        float alpha;
        int64_t lo, hi;                       /* output rows [lo, hi) of each image; hi 0: all */
};
/* y[n, m, lo..hi, ow] = act(the convolution of x[n, c, ih, iw] + bias) on the packed filters
 * when the call matches them: 0, 1 when it does not (y may be partly written: the caller
 * computes all of it another way), or -ECANCELED when the run stopped between bands (err
 * says so). */
int ops_conv_direct(const struct ops_conv_direct_args *a, char *err, size_t errlen);
/* Output rows [lo, hi) of every image of a Conv call (its inputs, attributes and output, the
 * whole node's) through ops_conv_direct on p, with its bias input and act: the same results
 * as the kernel's on those rows. 0, 1 when p does not apply, -ECANCELED. */
int ops_conv_rows(const struct ops_packed_conv *p, const struct ops_call *call, int act, float alpha,
                  int64_t lo, int64_t hi, char *err, size_t errlen);

/* Element (i, j) of a row-major operand, transposed or not (the plain loops of the float64
 * and mixed variants). */
static inline float ops_mat_at(const float *p, long ld, int trans, long i, long j)
{
        return trans ? p[j * ld + i] : p[i * ld + j];
}

/* A float64 operand of ops_f64_product: row-major with leading dimension ld, or (blocked)
 * the column blocks of ops_f64_pack_b, from column lo of the packed matrix. */
struct ops_dmat {
        const double *p;
        long ld;
        int blocked;
        long lo;
};
/* C[m x n] (float32, ldc) = alpha * A B + row_bias[i] + beta * C, summed in float64 and
 * rounded once: A m x k (k >= 1) float64 row-major (lda), B k x n. row_bias: NULL or m values
 * added to each row. */
void ops_f64_product(long m, long n, long k, const double *a, long lda, const struct ops_dmat *b, float alpha,
                     float beta, const float *row_bias, float *c, long ldc);
/* The k x n operand b of a row-major product (n rows of k when transb), ld ldb, as float64
 * column blocks for ops_dmat.blocked; NULL when memory is short. *ret_bytes: its size. */
double *ops_f64_pack_b(const float *b, long k, long n, int transb, long ldb, uint64_t *ret_bytes);
/* ops_sgemm under OPS_SGEMM_F64 (packed: B's float64 blocks when the call matches a packed
 * B, else NULL: B converted a band of columns at a time). */
void ops_sgemm_f64(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
                   blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb, float beta,
                   float *c, blasint ldc, const struct ops_dmat *packed);
/* A packed B (the same contract as ops_packed_b_new's) holding only the float64 column
 * blocks of OPS_SGEMM_F64; NULL with a message when memory is short. */
struct ops_packed_b *ops_packed_b_new_f64(const float *b, long k, long n, int transb, char *err, size_t errlen);

/* The width of a column block of the libxsmm layout of a packed B, and the terms a run of
 * OPS_SGEMM_MIXED sums in float32 (a quad of four runs is then summed in float32 as
 * (r0 + r1) + (r2 + r3), the quads in float64). */
#define OPS_XSMM_NB 32
#define OPS_MIXED_KB 32
/* What a product adds to row i's float64 sum (a convolution's output channel i) before its
 * one rounding to float32: bias[i], widened; or, where scale is not NULL, the sum times
 * scale[i] plus shift[i] (shift NULL: 0) in one fused multiply-add. The second is a
 * BatchNormalization folded into the convolution with its factors kept in float64
 * (graph/compile.c, under float64 and mixed accumulation): rounding them into the filters
 * would add an error of its own. */
struct ops_row_affine {
        const float *bias;
        const double *scale, *shift;
};

/* C[m x n] (float32, ldc) = alpha * A B + beta * C (then row i's affine ra, when ra is not
 * NULL) under OPS_SGEMM_MIXED, summed in float64 and rounded once: A m x k (k >= 1) float32
 * row-major (lda); B the column blocks of OPS_XSMM_NB (k rows each, a block after the other,
 * as ops_mixed_pack_b lays them out) from column lo; then the post-op when post is not NULL
 * (its bias the product's first column's), on each tile as it is rounded. */
void ops_mixed_product(long m, long n, long k, const float *a, long lda, const float *bx, long lo, float alpha,
                       float beta, float *c, long ldc, const struct ops_row_affine *ra,
                       const struct ops_sgemm_post *post);
/* C = A B (then row i's affine ra, when ra is not NULL) under OPS_SGEMM_MIXED on its
 * AVX-512 kernel, B's row kk read at xp + off[kk] (k offsets): C's positions p in [0, npos),
 * 32 at a time (reading up to 31 positions past npos), position p of row i stored at
 * c[i * ldc + (p / pitch) * lpitch + p % pitch] where p % pitch < width and dropped
 * otherwise (a convolution over a padded input whose lines are pitch apart: conv_mixed).
 * 0 done, 1 when the AVX-512 kernel is not in use (nothing written). */
int ops_mixed_product_off(long m, long npos, long k, const float *a, long lda, const float *xp, const long *off,
                          long pitch, long width, float *c, long lpitch, long ldc, const struct ops_row_affine *ra);
/* What a convolution's caller applies to each output element after its one rounding, in
 * float32: the residual's element at the same index (resid: a tensor laid out as the
 * output, at the same element as the output pointer it goes with; NULL: none), then Relu
 * (relu: a negative element becomes +0; NaN and -0 stay). */
struct ops_conv_post {
        const float *resid;
        int relu;
        /* when scale is not NULL (ops_conv_rows_acc_post): the output channels' affine in
         * float64 (struct ops_row_affine; [m] each, the whole convolution's), in place of the
         * call's bias, applied before the rounding */
        const double *scale, *shift;
};
/* The same sums as ops_mixed_product_off's, tiled the other way (output channels across
 * the vectors, no position past width computed): C's m rows (channels, ldc apart) by the
 * positions [0, width) of each of lines lines (line l's at c + l * lpitch, its terms at
 * xp + l * pitch + p + off[kk]), the filters wp as ops_mixed_pack_wt lays them out (and w,
 * the same filters as stored, m x k, which the outputs summed again read), then post (NULL:
 * none; its resid at c's element) as each tile is stored. 0 done, 1 when the AVX-512 kernel
 * is not in use (nothing written). */
int ops_mixed_conv_lines(long m, long k, const float *wp, const float *w, const float *xp, const long *off,
                         long pitch, long lines, long width, float *c, long lpitch, long ldc,
                         const struct ops_row_affine *ra, const struct ops_conv_post *post);
/* Cancellation (gemm-mixed.c): whether an output channel's stored value v (its sum with
 * the affine or bias applied, rounded) is to be summed again in float64: |v| 2^10 below
 * against (ops_mixed_against: |shift| or |bias| of channel ch, 0 without), or, with a
 * residual, |v + *resid| 2^10 below |*resid|. ops_mixed_conv_exact is that output again:
 * the k products x[off[kk]] * w[kk] summed in float64, channel ch's affine ra, rounded
 * once, the residual (NULL: none) added in float32, then Relu. */
float ops_mixed_against(const struct ops_row_affine *ra, long ch);
int ops_mixed_cancels(float v, float against, const float *resid);
float ops_mixed_conv_exact(const float *x, const long *off, const float *w, long k, const struct ops_row_affine *ra,
                           long ch, const float *resid, int relu);
/* How many of a store's outputs (a chunk of a line by a block of channels; a channel's band
 * of lines) may be summed again: one in 128, at least 16; past it the runs' values stand (a
 * bound on what a model that makes every output cancel can make a run cost). */
long ops_mixed_resum_budget(long outputs);
/* The m x k filters w (ld ldw) transposed for ops_mixed_conv_lines into wp: blocks of 64
 * channels, k rows of 64 each, the last block's missing channels zero
 * (ops_mixed_wt_floats(m, k) floats); returns wp. */
float *ops_mixed_pack_wt(const float *w, long m, long k, long ldw, float *wp);
long ops_mixed_wt_floats(long m, long k);
/* Whether convolutions may take ops_mixed_conv_lines (1, the default where the AVX-512
 * kernel is in use) or always ops_mixed_product_off (0): on 1 or 0 chooses, -1 only asks
 * (tests and benches: both give the same sums). */
int ops_mixed_conv_transposed(int on);
/* Whether OPS_SGEMM_MIXED's products that read at most 8 MiB of B run on its AVX-512
 * kernel (1; the default where the CPU has AVX-512F) or on libxsmm's float32 kernels, a run
 * at a time (0; a larger B always does): avx512 1 or 0 chooses (1 only where the CPU has it),
 * -1 only asks. Both give sums within the same bound; the AVX-512 kernel's are the plain
 * loop's bit for bit. */
int ops_mixed_kernel(int avx512);
/* The k x n operand b (n rows of k when transb), ld ldb, into x (the column blocks of
 * OPS_XSMM_NB, the last one zero-filled: ceil(n / 32) * 32 * k floats); returns x. */
float *ops_mixed_pack_b(const float *b, long k, long n, int transb, long ldb, float *x);
/* ops_sgemm under OPS_SGEMM_MIXED (packed: B's column blocks from column lo when the call
 * matches a packed B, else NULL: B copied a band of columns at a time); post: the post-op
 * (ops_sgemm_post) of a row-major call, applied to each tile as it is rounded, or NULL. */
void ops_sgemm_mixed(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                     blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                     float beta, float *c, blasint ldc, const float *packed, long lo,
                     const struct ops_sgemm_post *post);
/* A packed B (the same contract as ops_packed_b_new's) holding only the libxsmm column
 * blocks, for OPS_SGEMM_MIXED; NULL with a message when memory is short. */
struct ops_packed_b *ops_packed_b_new_mixed(const float *b, long k, long n, int transb, char *err, size_t errlen);

/* A 2-D float32 Conv (NCHW, filters [m, c / group, kh, kw]) under OPS_SGEMM_F64 by shifted
 * float64 products (conv-f64.c): y = the convolution + bias, every multiply-add in float64.
 * 0, -ECANCELED (err says why), or 1 when it does not take the call (a padded copy of the
 * input would be too large, or scratch is short): nothing was written, the caller lowers
 * the call by im2col instead. */
struct ops_conv2d_f64_args {
        const float *x, *w, *bias; /* bias [m] or NULL */
        const double *scale, *shift; /* scale not NULL: the channels' affine in place of bias
                                      * (struct ops_row_affine) */
        float *y;
        int64_t n, c, ih, iw, m, oh, ow, kh, kw, group;
        int64_t strides[2], dilations[2], pads[4]; /* pads: top, left, bottom, right */
        int64_t lo, hi;                            /* output lines [lo, hi) of each image; hi 0: all */
};
int ops_conv2d_f64(const struct ops_conv2d_f64_args *a, char *err, size_t errlen);
/* The same convolution under OPS_SGEMM_MIXED (conv_mixed in nn-conv.c, as a mixed graph's
 * Conv runs): 0, < 0 with err set, 1 when the arguments are not a convolution it takes. */
int ops_conv2d_mixed(const struct ops_conv2d_f64_args *a, char *err, size_t errlen);
/* Output rows [lo, hi) of every image of a float32 2-D Conv call (its inputs, attributes and
 * output, the whole node's, bias input included; hi 0: all) under float64 accumulation
 * (mixed 0: through ops_conv2d_f64) or mixed accumulation (mixed 1: ops_conv2d_mixed's
 * product): 0, 1 when the call is not one it takes (nothing written), < 0 with err set
 * (-ECANCELED, -ENOMEM). */
int ops_conv_rows_acc(const struct ops_call *call, int mixed, int64_t lo, int64_t hi, char *err, size_t errlen);
/* The same, then post (NULL: none; its resid at the output's first element) on those rows:
 * in the store of ops_mixed_conv_lines' tiles where the call takes it, else over each band
 * of lines as it is done, or over the rows at the end (the graph's Relu and residual
 * epilogues). */
int ops_conv_rows_acc_post(const struct ops_call *call, int mixed, int64_t lo, int64_t hi,
                           const struct ops_conv_post *post, char *err, size_t errlen);

/* "onednn" or "openblas": what ops_sgemm uses for an m x n x k product. */
const char *ops_sgemm_backend(long m, long n, long k);

#endif

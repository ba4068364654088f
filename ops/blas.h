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

#include <cblas.h>

/* cblas_sgemm's contract, row-major or column-major. */
void ops_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
               blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
               const float *b, blasint ldb, float beta, float *c, blasint ldc);

/* Kernel variants of ops_sgemm, for tuning (ops/tune.h): OPS_SGEMM_AUTO picks by size. */
enum { OPS_SGEMM_AUTO = -1, OPS_SGEMM_OPENBLAS = 0, OPS_SGEMM_ONEDNN = 1, OPS_SGEMM_VARIANTS = 2 };
extern const char *const ops_sgemm_variant_names[OPS_SGEMM_VARIANTS];
/* The variant this thread's ops_sgemm calls use until changed (a tuned graph node sets it
 * around its kernel); NPUD_SGEMM=openblas still forces OpenBLAS. */
void ops_sgemm_force(int variant);

/* "onednn" or "openblas": what ops_sgemm uses for an m x n x k product. */
const char *ops_sgemm_backend(long m, long n, long k);

#endif

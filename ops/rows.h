/* Reductions and updates over one contiguous row of float32, for the row-wise kernels
 * (Softmax and its fused form, LayerNormalization). Sums are taken in double precision as
 * those kernels always did, but in eight independent lanes added at the end instead of one
 * chain, so that they vectorize (the result may differ from the serial sum in the last
 * bits of a double, which the float result does not see but for ties). Built for AVX-512
 * and AVX2 where the CPU has them (wide.h). */
#ifndef NPUD_OPS_ROWS_H
#define NPUD_OPS_ROWS_H

#include <stdint.h>

/* sum of x[0..n) */
double ops_row_sum(const float *x, int64_t n);
/* sum of (x[j] - mean)^2 */
double ops_row_sqdev(const float *x, int64_t n, double mean);
/* the largest of x[0..n) as `v > m ? v : m` from -inf finds it (a NaN never wins) */
float ops_row_max(const float *x, int64_t n);
/* y[j] = x[j] - c */
void ops_row_sub(float *y, const float *x, int64_t n, float c);
/* y[j] = x[j] * c */
void ops_row_mul(float *y, const float *x, int64_t n, float c);
/* y[j] = x[j] / c */
void ops_row_div(float *y, const float *x, int64_t n, float c);
/* y[j] += m[j] */
void ops_row_add(float *y, const float *m, int64_t n);
/* y[j] = (float)((x[j] - mean) * inv * scale[j] (+ bias[j])), computed in double; bias may
 * be NULL */
void ops_row_norm(float *y, const float *x, int64_t n, double mean, double inv,
                  const float *scale, const float *bias);

/* y[j] = GELU(x[j]) = 0.5 x (1 + erf(x / sqrt 2)), y may be x. erf by polynomials: x P(x^2)
 * for |u| = |x / sqrt 2| up to 0.921875 (1.3e-7 relative), and 1 + erf(u) = 2 - erfc(|u|)
 * or erfc(|u|) beyond, erfc as exp of a polynomial in |u| up to 4 and in 1/|u| (less u^2)
 * up to 10.5 (3.5e-6 relative in erfc up to 4, 1.1e-5 beyond, where GELU is under 1e-8):
 * about 1 ns an element instead of SLEEF's erf (2.4 ns at AVX-512), and for u < 0 more
 * accurate than 1 + erf(u), whose sum cancels. */
void ops_gelu_erf(float *y, const float *x, int64_t n);

#endif

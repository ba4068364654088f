/* Row kernels (rows.h). */
#include <math.h>

#include "rows.h"
#include "vmath.h"
#include "wide.h"

#define LANES 8

OPS_WIDE double ops_row_sum(const float *x, int64_t n)
{
        double acc[LANES] = { 0 }, s = 0;
        int64_t j = 0;

        for (; j + LANES <= n; j += LANES)
                for (int k = 0; k < LANES; k++)
                        acc[k] += (double)x[j + k];
        for (int k = 0; k < LANES; k++)
                s += acc[k];
        for (; j < n; j++)
                s += (double)x[j];
        return s;
}

OPS_WIDE double ops_row_sqdev(const float *x, int64_t n, double mean)
{
        double acc[LANES] = { 0 }, s = 0;
        int64_t j = 0;

        for (; j + LANES <= n; j += LANES)
                for (int k = 0; k < LANES; k++) {
                        double d = (double)x[j + k] - mean;
                        acc[k] += d * d;
                }
        for (int k = 0; k < LANES; k++)
                s += acc[k];
        for (; j < n; j++)
                s += ((double)x[j] - mean) * ((double)x[j] - mean);
        return s;
}

OPS_WIDE float ops_row_max(const float *x, int64_t n)
{
        float acc[2 * LANES], m = -__builtin_inff();
        int64_t j = 0;

        for (int k = 0; k < 2 * LANES; k++)
                acc[k] = -__builtin_inff();
        for (; j + 2 * LANES <= n; j += 2 * LANES)
                for (int k = 0; k < 2 * LANES; k++)
                        acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k];
        for (int k = 0; k < 2 * LANES; k++)
                m = acc[k] > m ? acc[k] : m;
        for (; j < n; j++)
                m = x[j] > m ? x[j] : m;
        return m;
}

OPS_WIDE void ops_row_sub(float *y, const float *x, int64_t n, float c)
{
        for (int64_t j = 0; j < n; j++)
                y[j] = x[j] - c;
}

OPS_WIDE void ops_row_mul(float *y, const float *x, int64_t n, float c)
{
        for (int64_t j = 0; j < n; j++)
                y[j] = x[j] * c;
}

OPS_WIDE void ops_row_div(float *y, const float *x, int64_t n, float c)
{
        for (int64_t j = 0; j < n; j++)
                y[j] = x[j] / c;
}

OPS_WIDE void ops_row_add(float *y, const float *m, int64_t n)
{
        for (int64_t j = 0; j < n; j++)
                y[j] += m[j];
}

OPS_WIDE void ops_row_norm(float *y, const float *x, int64_t n, double mean, double inv,
                           const float *scale, const float *bias)
{
        if (bias)
                for (int64_t j = 0; j < n; j++)
                        y[j] = (float)(((double)x[j] - mean) * inv * (double)scale[j] + (double)bias[j]);
        else
                for (int64_t j = 0; j < n; j++)
                        y[j] = (float)(((double)x[j] - mean) * inv * (double)scale[j]);
}

/* ---- GELU, erf form (rows.h) ---- */

#include "gelu-coef.h"

/* log erfc(a) for a > GELU_T (a NaN stays NaN) */
static inline float gelu_logerfc(float a)
{
        float b = a < 4.0f ? a : 4.0f, c = a > 4.0f ? (a < 10.5f ? a : 10.5f) : 4.0f;
        float pb = gelu_b[10], pc = gelu_c[6], r = 1.0f / c;

        for (int i = 9; i >= 0; i--)
                pb = pb * b + gelu_b[i];
        for (int i = 5; i >= 0; i--)
                pc = pc * r + gelu_c[i];
        return a <= 4.0f ? pb : pc - c * c;
}

OPS_WIDE void ops_gelu_erf(float *y, const float *x, int64_t n)
{
        ops_vm_fn vgelu = ops_vmath_get(OPS_VM_GELU), vexp = ops_vmath_get(OPS_VM_EXP);
        float q[256];

        if (vgelu) { /* the same formula, a vector at a time */
                vgelu(y, x, (size_t)n);
                return;
        }

        for (int64_t off = 0; off < n; off += 256) {
                int64_t m = n - off < 256 ? n - off : 256;
                const float *xs = x + off;
                float *ys = y + off;
                for (int64_t k = 0; k < m; k++)
                        q[k] = gelu_logerfc(fabsf(xs[k] * 0.70710678118654752f));
                if (vexp)
                        vexp(q, q, (size_t)m);
                else
                        for (int64_t k = 0; k < m; k++)
                                q[k] = expf(q[k]);
                for (int64_t k = 0; k < m; k++) {
                        float v = xs[k], u = v * 0.70710678118654752f, a = fabsf(u), t = u * u;
                        float p = gelu_a[6];
                        for (int i = 5; i >= 0; i--)
                                p = p * t + gelu_a[i];
                        float g = a <= GELU_T ? 1.0f + u * p : u > 0 ? 2.0f - q[k] : q[k];
                        ys[k] = 0.5f * v * g;
                }
        }
}

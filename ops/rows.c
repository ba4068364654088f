/* Row kernels (rows.h). */
#include "rows.h"
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

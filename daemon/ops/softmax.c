/* Softmax for the AI CPU with opset-13 semantics: normalised exponentials along the single
 * axis named by the "axis" attribute (default -1, negative counting from the end), with the
 * maximum subtracted first so that exp cannot overflow. The tensor is seen as
 * [outer, n, inner] around that axis and processed a row of inner elements at a time, which
 * keeps memory access sequential whatever the axis. float16 is widened to float per slice.
 * The output may be the input buffer. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops-internal.h"

static const char *const sm_attrs[] = { "axis", NULL };

static int sm_check(const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        const struct ops_attr *a;
        char buf[OPS_DTYPE_STR_MAX];
        int rc;

        rc = ops_check_common(&ops_softmax_def, call, sm_attrs, err, errlen);
        if (rc)
                return rc;
        if (x->dtype != PROTO_DTYPE_FLOAT32 && x->dtype != PROTO_DTYPE_FLOAT16)
                return ops_fail(err, errlen, -EINVAL,
                                "Softmax: input 0 has unsupported dtype %s",
                                ops_dtype_str(x->dtype, buf, sizeof(buf)));
        a = ops_attr_find(call, "axis");
        if (a && a->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "Softmax: attribute 'axis' must be an int");
        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "Softmax: input 0 is a scalar, rank 1 or "
                                                      "more needed");
        if (a && (a->i < -x->ndim || a->i >= x->ndim))
                return ops_fail(err, errlen, -EINVAL,
                                "Softmax: axis %lld out of range for rank %d",
                                (long long)a->i, x->ndim);
        return ops_check_output(&ops_softmax_def, call, x->dtype, x, err, errlen);
}

/* Splits the shape around the axis into [outer, n, inner]. */
static void sm_split(const struct ops_call *call, int64_t *outer, int64_t *n, int64_t *inner)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis = ops_attr_int(call, "axis", -1);
        int d;

        if (axis < 0)
                axis += x->ndim;
        *outer = *inner = 1;
        for (d = 0; d < axis; d++)
                *outer *= x->dims[d];
        *n = x->dims[axis];
        for (d = (int)axis + 1; d < x->ndim; d++)
                *inner *= x->dims[d];
}

/* One [n, inner] slice; x and y may be the same buffer, scratch holds 2 * inner floats.
 * Every element of x is read before the element of y at the same place is written. */
static void sm_slice_f32(float *y, const float *x, int64_t n, int64_t inner, float *scratch)
{
        float *max = scratch, *sum = scratch + inner;
        int64_t r, j;

        if (inner == 1) {
                float m = x[0], s = 0.0f, inv;

                for (r = 1; r < n; r++)
                        m = fmaxf(m, x[r]);
                for (r = 0; r < n; r++) {
                        y[r] = expf(x[r] - m);
                        s += y[r];
                }
                inv = 1.0f / s;
                for (r = 0; r < n; r++)
                        y[r] *= inv;
                return;
        }
        memcpy(max, x, (size_t)inner * sizeof(*max));
        for (r = 1; r < n; r++)
                for (j = 0; j < inner; j++)
                        max[j] = fmaxf(max[j], x[r * inner + j]);
        memset(sum, 0, (size_t)inner * sizeof(*sum));
        for (r = 0; r < n; r++) {
                for (j = 0; j < inner; j++) {
                        y[r * inner + j] = expf(x[r * inner + j] - max[j]);
                        sum[j] += y[r * inner + j];
                }
        }
        for (j = 0; j < inner; j++)
                sum[j] = 1.0f / sum[j];
        for (r = 0; r < n; r++)
                for (j = 0; j < inner; j++)
                        y[r * inner + j] *= sum[j];
}

static int sm_run(const struct ops_call *call, char *err, size_t errlen)
{
        int is_half = call->in[0].dtype == PROTO_DTYPE_FLOAT16;
        int64_t outer, n, inner, slice, o;
        float *scratch, *tmp = NULL;

        /* An empty tensor may have other dims whose product overflows. */
        if (!ops_tensor_numel(&call->in[0]))
                return 0;
        sm_split(call, &outer, &n, &inner);
        slice = n * inner;
        scratch = malloc((size_t)(2 * inner) * sizeof(float));
        if (is_half)
                tmp = malloc((size_t)slice * sizeof(float));
        if (!scratch || (is_half && !tmp)) {
                free(scratch);
                free(tmp);
                return ops_fail(err, errlen, -ENOMEM, "Softmax: out of memory");
        }
        for (o = 0; o < outer; o++) {
                if (is_half) {
                        const uint16_t *x = (const uint16_t *)call->in[0].data + o * slice;
                        uint16_t *y = (uint16_t *)call->out[0].data + o * slice;

                        ops_half_to_float_n(tmp, x, (size_t)slice);
                        sm_slice_f32(tmp, tmp, n, inner, scratch);
                        ops_float_to_half_n(y, tmp, (size_t)slice);
                } else {
                        sm_slice_f32((float *)call->out[0].data + o * slice,
                                     (const float *)call->in[0].data + o * slice, n, inner,
                                     scratch);
                }
        }
        free(scratch);
        free(tmp);
        return 0;
}

static void sm_cost(const struct ops_call *call, uint64_t *ret_flops, uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->in[0]);

        /* max, subtract, exp (counted as several), sum, scale */
        *ret_flops = ops_mul_sat(n, 12);
        *ret_bytes = ops_mul_sat(2 * n, proto_dtype_size(call->in[0].dtype));
}

const struct ops_def ops_softmax_def = {
        "Softmax", 1, 1, 1, OPS_ENGINE_AICPU, sm_check, sm_run, sm_cost, 0, NULL, 0, NULL,
};

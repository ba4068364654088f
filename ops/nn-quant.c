/* Linear quantization for the vector engine: QuantizeLinear and DequantizeLinear (per
 * tensor, or per slice along 'axis' when the scale is a vector, opset 13) and
 * DynamicQuantizeLinear (uint8 with scale and zero point from the data's range).
 *
 * The tensor is walked as [outer, n, inner] around the axis so that the scale and zero
 * point change once per inner row. Rounding is to nearest even and results saturate to the
 * integer type, as ONNX specifies; x / scale is formed in float32 like the reference. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn-common.h"

static const int q_out_types[] = { PROTO_DTYPE_UINT8, PROTO_DTYPE_INT8, 0 };
static const int dq_in_types[] = { PROTO_DTYPE_UINT8, PROTO_DTYPE_INT8, PROTO_DTYPE_INT32, 0 };
static const int q_in_types[] = { PROTO_DTYPE_FLOAT32, PROTO_DTYPE_FLOAT16, PROTO_DTYPE_BFLOAT16,
                                  PROTO_DTYPE_FLOAT64, PROTO_DTYPE_INT32, 0 };

/* [outer, n, inner] of x around the quantization axis; n = 1 for per-tensor parameters. */
struct q_split {
        int64_t outer, n, inner;
};

static int q_split_of(const struct ops_def *def, const struct ops_call *call,
                      struct q_split *q, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *sc = &call->in[1];
        int64_t axis = ops_attr_int(call, "axis", 1), total = ops_tensor_numel(x);
        int d;

        if (!nn_is_float(sc->dtype))
                return ops_fail(err, errlen, -EINVAL, "%s: scale must be floating", def->name);
        if (nn_has_in(call, 2) && !ops_shape_equal(&call->in[2], sc))
                return ops_fail(err, errlen, -EINVAL, "%s: zero point and scale differ in shape",
                                def->name);
        q->outer = 1;
        q->n = 1;
        q->inner = total;
        if (sc->ndim == 0 || (sc->ndim == 1 && sc->dims[0] == 1))
                return 0;
        if (sc->ndim != 1)
                return ops_fail(err, errlen, -EINVAL, "%s: scale must be a scalar or 1-D",
                                def->name);
        if (axis < -x->ndim || axis >= x->ndim)
                return ops_fail(err, errlen, -EINVAL, "%s: axis %lld for rank %d", def->name,
                                (long long)axis, x->ndim);
        if (axis < 0)
                axis += x->ndim;
        if (sc->dims[0] != x->dims[axis])
                return ops_fail(err, errlen, -EINVAL, "%s: %lld scales for axis of %lld",
                                def->name, (long long)sc->dims[0], (long long)x->dims[axis]);
        q->n = x->dims[axis];
        q->inner = 1;
        for (d = 0; d < x->ndim; d++) {
                if (d < axis)
                        q->outer *= x->dims[d];
                else if (d > axis)
                        q->inner *= x->dims[d];
        }
        return 0;
}

static void q_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                   uint64_t *ret_bytes)
{
        nn_cost_simple(call, 3, ret_flops, ret_bytes);
}

/* ---------------------------------------------------------------- QuantizeLinear */

static int ql_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct q_split q;
        int rc, ot = nn_has_in(call, 2) ? call->in[2].dtype : PROTO_DTYPE_UINT8;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, q_in_types, err, errlen);
        if (!rc && nn_has_in(call, 2))
                rc = nn_want_dtype(def, call, 2, q_out_types, err, errlen);
        if (!rc)
                rc = q_split_of(def, call, &q, err, errlen);
        if (rc)
                return rc;
        nn_set_out(call, 0, ot, call->in[0].ndim, call->in[0].dims);
        return 0;
}

static int ql_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t o, c, i, base = 0;
        double lo = y->dtype == PROTO_DTYPE_INT8 ? -128 : 0, hi = y->dtype == PROTO_DTYPE_INT8 ? 127 : 255;
        struct q_split q;
        struct nn_f32 xv;
        int rc;

        rc = q_split_of(def, call, &q, err, errlen);
        if (rc)
                return rc;
        /* int32 inputs are converted exactly enough: |x| of 2^24 and more saturate anyway
         * for any scale that is not tiny; float64 is narrowed like the reference does */
        if (nn_f32_in(x, &xv))
                return ops_fail(err, errlen, -ENOMEM, "QuantizeLinear: out of memory");
        for (o = 0; o < q.outer; o++)
                for (c = 0; c < q.n; c++, base += q.inner) {
                        float s = (float)nn_get(&call->in[1], c);
                        double z = nn_has_in(call, 2) ? nn_get(&call->in[2], c) : 0;
                        uint8_t *u = y->data;
                        int8_t *sg = y->data;

                        for (i = 0; i < q.inner; i++) {
                                double v = nearbyintf(xv.p[base + i] / s) + z;

                                v = isnan(v) ? 0 : v < lo ? lo : v > hi ? hi : v;
                                if (y->dtype == PROTO_DTYPE_INT8)
                                        sg[base + i] = (int8_t)v;
                                else
                                        u[base + i] = (uint8_t)v;
                        }
                }
        nn_f32_done(&xv);
        return 0;
}

const struct ops_def ops_quantize_linear_def = {
        .name = "QuantizeLinear", .min_inputs = 2, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = ql_run, .cost = q_cost, .infer = ql_infer,
        .since_version = 10,
};

/* ---------------------------------------------------------------- DequantizeLinear */

static int dql_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct q_split q;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, dq_in_types, err, errlen);
        if (!rc)
                rc = q_split_of(def, call, &q, err, errlen);
        if (rc)
                return rc;
        if (nn_has_in(call, 2) && call->in[2].dtype != call->in[0].dtype)
                return ops_fail(err, errlen, -EINVAL,
                                "DequantizeLinear: zero point dtype differs from x");
        nn_set_out(call, 0, call->in[1].dtype, call->in[0].ndim, call->in[0].dims);
        return 0;
}

static int dql_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t o, c, i, base = 0;
        struct q_split q;
        struct nn_f32 y;
        int rc;

        rc = q_split_of(def, call, &q, err, errlen);
        if (rc)
                return rc;
        if (nn_f32_out(&call->out[0], &y))
                return ops_fail(err, errlen, -ENOMEM, "DequantizeLinear: out of memory");
        for (o = 0; o < q.outer; o++)
                for (c = 0; c < q.n; c++, base += q.inner) {
                        float s = (float)nn_get(&call->in[1], c);
                        double z = nn_has_in(call, 2) ? nn_get(&call->in[2], c) : 0;

                        for (i = 0; i < q.inner; i++)
                                y.p[base + i] = (float)(nn_get(x, base + i) - z) * s;
                }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&y);
        return 0;
}

const struct ops_def ops_dequantize_linear_def = {
        .name = "DequantizeLinear", .min_inputs = 2, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = dql_run, .cost = q_cost, .infer = dql_infer,
        .since_version = 10,
};

/* ---------------------------------------------------------------- DynamicQuantizeLinear */

static int dyq_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        if (call->in[0].dtype != PROTO_DTYPE_FLOAT32)
                return ops_fail(err, errlen, -EINVAL, "DynamicQuantizeLinear: x must be float32");
        nn_set_out(call, 0, PROTO_DTYPE_UINT8, call->in[0].ndim, call->in[0].dims);
        nn_set_out(call, 1, PROTO_DTYPE_FLOAT32, 0, NULL);
        nn_set_out(call, 2, PROTO_DTYPE_UINT8, 0, NULL);
        return 0;
}

static int dyq_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const float *x = call->in[0].data;
        int64_t n = ops_tensor_numel(&call->in[0]), i;
        float lo = 0, hi = 0, scale, zf;
        uint8_t *y = call->out[0].data, zp;

        /* the range always includes 0, so that 0 is exactly representable */
        for (i = 0; i < n; i++) {
                lo = x[i] < lo ? x[i] : lo;
                hi = x[i] > hi ? x[i] : hi;
        }
        scale = (hi - lo) / 255.0f;
        zf = scale != 0 ? nearbyintf(0 - lo / scale) : 0;
        zp = (uint8_t)(zf < 0 ? 0 : zf > 255 ? 255 : zf);
        for (i = 0; i < n; i++) {
                float v = scale != 0 ? nearbyintf(x[i] / scale) + zp : zp;

                y[i] = (uint8_t)(isnan(v) ? 0 : v < 0 ? 0 : v > 255 ? 255 : v);
        }
        if (nn_want_out(call, 1))
                *(float *)call->out[1].data = scale;
        if (nn_want_out(call, 2))
                *(uint8_t *)call->out[2].data = zp;
        (void)err;
        (void)errlen;
        return 0;
}

const struct ops_def ops_dynamic_quantize_linear_def = {
        .name = "DynamicQuantizeLinear", .min_inputs = 1, .max_inputs = 1, .outputs = 3,
        .engine = OPS_ENGINE_VECTOR, .run = dyq_run, .cost = q_cost, .infer = dyq_infer,
        .since_version = 11,
};

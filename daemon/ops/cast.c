/* Cast for the AI CPU: converts a tensor to the dtype of the output descriptor (the ONNX
 * "to" attribute is optional and, when given, must agree with it). Elements travel through
 * a small buffer as double, int64 or uint64 according to the source type, so every pair of
 * types needs only one load and one store routine. Float to integer truncates toward zero
 * and saturates, NaN giving 0; integer to narrower integer wraps; anything to bool is
 * "not zero". The output may start at the input's address even when the sizes differ. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ops-internal.h"

enum cast_class { CAST_FLOAT, CAST_SIGNED, CAST_UNSIGNED };

union cast_buf {
        double f[OPS_CHUNK];
        int64_t i[OPS_CHUNK];
        uint64_t u[OPS_CHUNK];
};

static const char *const cast_attrs[] = { "to", "saturate", NULL };

static int cast_dtype_ok(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_BOOL:
        case PROTO_DTYPE_UINT8:
        case PROTO_DTYPE_INT8:
        case PROTO_DTYPE_UINT16:
        case PROTO_DTYPE_INT16:
        case PROTO_DTYPE_INT32:
        case PROTO_DTYPE_UINT32:
        case PROTO_DTYPE_INT64:
        case PROTO_DTYPE_UINT64:
        case PROTO_DTYPE_FLOAT16:
        case PROTO_DTYPE_FLOAT32:
        case PROTO_DTYPE_FLOAT64: return 1;
        default: return 0;
        }
}

static int cast_check(const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *in = &call->in[0], *out = &call->out[0];
        const struct ops_attr *to;
        char b1[OPS_DTYPE_STR_MAX], b2[OPS_DTYPE_STR_MAX];
        int rc;

        rc = ops_check_common(&ops_cast_def, call, cast_attrs, err, errlen);
        if (rc)
                return rc;
        if (!cast_dtype_ok(in->dtype))
                return ops_fail(err, errlen, -EINVAL, "Cast: input 0 has unsupported dtype %s",
                                ops_dtype_str(in->dtype, b1, sizeof(b1)));
        if (!cast_dtype_ok(out->dtype))
                return ops_fail(err, errlen, -EINVAL,
                                "Cast: output 0 has unsupported dtype %s",
                                ops_dtype_str(out->dtype, b1, sizeof(b1)));
        to = ops_attr_find(call, "to");
        if (to && to->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "Cast: attribute 'to' must be an int");
        if (to && to->i != out->dtype)
                return ops_fail(err, errlen, -EINVAL,
                                "Cast: attribute 'to' is %s but output dtype is %s",
                                to->i >= INT32_MIN && to->i <= INT32_MAX ?
                                        ops_dtype_str((int)to->i, b1, sizeof(b1)) : "invalid",
                                ops_dtype_str(out->dtype, b2, sizeof(b2)));
        return ops_check_output(&ops_cast_def, call, out->dtype, in, err, errlen);
}

#define CAST_LOAD(T, field, EXPR)                                                              \
        do {                                                                                   \
                const T *p = src;                                                              \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        buf->field[i] = (EXPR);                                                \
        } while (0)

/* Reads n elements of src into buf; returns how they are held. */
static int cast_load(int dtype, const void *src, size_t n, union cast_buf *buf)
{
        size_t i;

        switch (dtype) {
        case PROTO_DTYPE_BOOL: CAST_LOAD(uint8_t, u, p[i] != 0); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT8: CAST_LOAD(uint8_t, u, p[i]); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT16: CAST_LOAD(uint16_t, u, p[i]); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT32: CAST_LOAD(uint32_t, u, p[i]); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT64: CAST_LOAD(uint64_t, u, p[i]); return CAST_UNSIGNED;
        case PROTO_DTYPE_INT8: CAST_LOAD(int8_t, i, p[i]); return CAST_SIGNED;
        case PROTO_DTYPE_INT16: CAST_LOAD(int16_t, i, p[i]); return CAST_SIGNED;
        case PROTO_DTYPE_INT32: CAST_LOAD(int32_t, i, p[i]); return CAST_SIGNED;
        case PROTO_DTYPE_INT64: CAST_LOAD(int64_t, i, p[i]); return CAST_SIGNED;
        case PROTO_DTYPE_FLOAT16: CAST_LOAD(uint16_t, f, ops_half_to_float(p[i])); break;
        case PROTO_DTYPE_FLOAT32: CAST_LOAD(float, f, p[i]); break;
        case PROTO_DTYPE_FLOAT64: CAST_LOAD(double, f, p[i]); break;
        }
        return CAST_FLOAT;
}

/* Truncation toward zero clamped to [lo, hi]; lo is -2^k so it and -lo are exact doubles. */
static int64_t cast_sat_signed(double d, int64_t lo, int64_t hi)
{
        double t;

        if (isnan(d))
                return 0;
        t = trunc(d);
        if (t < (double)lo)
                return lo;
        if (t >= -(double)lo)
                return hi;
        return (int64_t)t;
}

/* hi + 1 is a power of two, exact as a double even for 2^64. */
static uint64_t cast_sat_unsigned(double d, uint64_t hi)
{
        double t;

        if (isnan(d))
                return 0;
        t = trunc(d);
        if (t <= 0)
                return 0;
        if (t >= (double)hi + 1.0)
                return hi;
        return (uint64_t)t;
}

#define CAST_STORE(T, EF, EI, EU)                                                              \
        do {                                                                                   \
                T *o = dst;                                                                    \
                                                                                               \
                if (cls == CAST_FLOAT) {                                                       \
                        for (i = 0; i < n; i++) {                                              \
                                double v = buf->f[i];                                          \
                                o[i] = (EF);                                                   \
                        }                                                                      \
                } else if (cls == CAST_SIGNED) {                                               \
                        for (i = 0; i < n; i++) {                                              \
                                int64_t v = buf->i[i];                                         \
                                o[i] = (EI);                                                   \
                        }                                                                      \
                } else {                                                                       \
                        for (i = 0; i < n; i++) {                                              \
                                uint64_t v = buf->u[i];                                        \
                                o[i] = (EU);                                                   \
                        }                                                                      \
                }                                                                              \
        } while (0)

/* Integer targets: floats saturate, integers keep their low bits (modular in gcc). */
#define CAST_STORE_SIGNED(T, LO, HI)                                                           \
        CAST_STORE(T, (T)cast_sat_signed(v, LO, HI), (T)(uint64_t)v, (T)v)
#define CAST_STORE_UNSIGNED(T, HI)                                                             \
        CAST_STORE(T, (T)cast_sat_unsigned(v, HI), (T)(uint64_t)v, (T)v)

static void cast_store(int dtype, void *dst, size_t n, int cls, const union cast_buf *buf)
{
        size_t i;

        switch (dtype) {
        case PROTO_DTYPE_BOOL: CAST_STORE(uint8_t, v != 0, v != 0, v != 0); break;
        case PROTO_DTYPE_UINT8: CAST_STORE_UNSIGNED(uint8_t, UINT8_MAX); break;
        case PROTO_DTYPE_UINT16: CAST_STORE_UNSIGNED(uint16_t, UINT16_MAX); break;
        case PROTO_DTYPE_UINT32: CAST_STORE_UNSIGNED(uint32_t, UINT32_MAX); break;
        case PROTO_DTYPE_UINT64: CAST_STORE_UNSIGNED(uint64_t, UINT64_MAX); break;
        case PROTO_DTYPE_INT8: CAST_STORE_SIGNED(int8_t, INT8_MIN, INT8_MAX); break;
        case PROTO_DTYPE_INT16: CAST_STORE_SIGNED(int16_t, INT16_MIN, INT16_MAX); break;
        case PROTO_DTYPE_INT32: CAST_STORE_SIGNED(int32_t, INT32_MIN, INT32_MAX); break;
        case PROTO_DTYPE_INT64: CAST_STORE_SIGNED(int64_t, INT64_MIN, INT64_MAX); break;
        case PROTO_DTYPE_FLOAT16:
                CAST_STORE(uint16_t, ops_double_to_half(v), ops_double_to_half((double)v),
                           ops_double_to_half((double)v));
                break;
        case PROTO_DTYPE_FLOAT32: CAST_STORE(float, (float)v, (float)v, (float)v); break;
        case PROTO_DTYPE_FLOAT64: CAST_STORE(double, v, (double)v, (double)v); break;
        }
}

static int cast_run(const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *in = &call->in[0], *out = &call->out[0];
        size_t ssize = proto_dtype_size(in->dtype), dsize = proto_dtype_size(out->dtype);
        size_t n = (size_t)ops_tensor_numel(in), nchunks, c, len;
        union cast_buf buf;
        int cls;

        if (in->dtype == out->dtype) {
                memmove(out->data, in->data, n * ssize);
                return 0;
        }
        /* Growing in place must go from the end so no chunk overwrites unread input. */
        nchunks = (n + OPS_CHUNK - 1) / OPS_CHUNK;
        for (c = 0; c < nchunks; c++) {
                size_t k = dsize > ssize ? nchunks - 1 - c : c;

                len = n - k * OPS_CHUNK < OPS_CHUNK ? n - k * OPS_CHUNK : OPS_CHUNK;
                cls = cast_load(in->dtype, (const char *)in->data + k * OPS_CHUNK * ssize, len,
                                &buf);
                cast_store(out->dtype, (char *)out->data + k * OPS_CHUNK * dsize, len, cls,
                           &buf);
        }
        return 0;
}

static void cast_cost(const struct ops_call *call, uint64_t *ret_flops, uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->in[0]);

        *ret_flops = n;
        *ret_bytes = ops_mul_sat(n, proto_dtype_size(call->in[0].dtype) +
                                            proto_dtype_size(call->out[0].dtype));
}

const struct ops_def ops_cast_def = {
        "Cast", 1, 1, 1, OPS_ENGINE_AICPU, cast_check, cast_run, cast_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

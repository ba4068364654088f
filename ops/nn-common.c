/* Helpers of the nn kernel family (see nn-common.h): attribute readers, dtype-generic
 * element access, float32 working copies, convolution / pool window geometry with ONNX's
 * auto_pad rules, im2col and col2im, and the infer-based check. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn-common.h"

const int nn_float_types[] = { PROTO_DTYPE_FLOAT32, PROTO_DTYPE_FLOAT16, PROTO_DTYPE_BFLOAT16,
                               PROTO_DTYPE_FLOAT64, 0 };
const int nn_int_index_types[] = { PROTO_DTYPE_INT32, PROTO_DTYPE_INT64, 0 };

/* ---------------------------------------------------------------- attributes */

int nn_attr_ints(const struct ops_call *call, const char *name, int64_t *out, int max)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        if (!a)
                return -1;
        if (a->type == OPS_ATTR_INT && max >= 1) {
                out[0] = a->i;
                return 1;
        }
        if (a->type != OPS_ATTR_INTS || a->n < 0 || a->n > max || (a->n && !a->ints))
                return -2;
        if (a->n)
                memcpy(out, a->ints, (size_t)a->n * sizeof(*out));
        return a->n;
}

int nn_attr_floats(const struct ops_call *call, const char *name, float *out, int max)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        if (!a)
                return -1;
        if (a->type == OPS_ATTR_FLOAT && max >= 1) {
                out[0] = (float)a->f;
                return 1;
        }
        if (a->type != OPS_ATTR_FLOATS || a->n < 0 || a->n > max || (a->n && !a->floats))
                return -2;
        if (a->n)
                memcpy(out, a->floats, (size_t)a->n * sizeof(*out));
        return a->n;
}

const char *nn_attr_str(const struct ops_call *call, const char *name, const char *def)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        return a && a->type == OPS_ATTR_STRING && a->s ? a->s : def;
}

/* ---------------------------------------------------------------- dtypes and elements */

int nn_is_float(int dtype)
{
        return dtype == PROTO_DTYPE_FLOAT32 || dtype == PROTO_DTYPE_FLOAT16 ||
               dtype == PROTO_DTYPE_BFLOAT16 || dtype == PROTO_DTYPE_FLOAT64;
}

int nn_is_int(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_UINT8:
        case PROTO_DTYPE_INT8:
        case PROTO_DTYPE_UINT16:
        case PROTO_DTYPE_INT16:
        case PROTO_DTYPE_INT32:
        case PROTO_DTYPE_INT64:
        case PROTO_DTYPE_UINT32:
        case PROTO_DTYPE_UINT64:
                return 1;
        default:
                return 0;
        }
}

static float bf16_to_float(uint16_t h)
{
        uint32_t x = (uint32_t)h << 16;
        float f;

        memcpy(&f, &x, sizeof(f));
        return f;
}

static uint16_t float_to_bf16(float f)
{
        uint32_t x;

        memcpy(&x, &f, sizeof(x));
        if ((x & 0x7fffffff) > 0x7f800000)
                return (uint16_t)((x >> 16) | 0x40); /* quiet NaN stays NaN */
        /* Round to nearest even on the dropped half. */
        x += 0x7fff + ((x >> 16) & 1);
        return (uint16_t)(x >> 16);
}

double nn_get(const struct ops_tensor *t, int64_t i)
{
        const void *p = t->data;

        switch (t->dtype) {
        case PROTO_DTYPE_FLOAT32:
                return ((const float *)p)[i];
        case PROTO_DTYPE_FLOAT64:
                return ((const double *)p)[i];
        case PROTO_DTYPE_FLOAT16:
                return ops_half_to_float(((const uint16_t *)p)[i]);
        case PROTO_DTYPE_BFLOAT16:
                return bf16_to_float(((const uint16_t *)p)[i]);
        case PROTO_DTYPE_UINT8:
        case PROTO_DTYPE_BOOL:
                return ((const uint8_t *)p)[i];
        case PROTO_DTYPE_INT8:
                return ((const int8_t *)p)[i];
        case PROTO_DTYPE_UINT16:
                return ((const uint16_t *)p)[i];
        case PROTO_DTYPE_INT16:
                return ((const int16_t *)p)[i];
        case PROTO_DTYPE_INT32:
                return ((const int32_t *)p)[i];
        case PROTO_DTYPE_INT64:
                return (double)((const int64_t *)p)[i];
        case PROTO_DTYPE_UINT32:
                return ((const uint32_t *)p)[i];
        case PROTO_DTYPE_UINT64:
                return (double)((const uint64_t *)p)[i];
        default:
                return 0.0;
        }
}

int64_t nn_get_int(const struct ops_tensor *t, int64_t i)
{
        switch (t->dtype) {
        case PROTO_DTYPE_INT64:
                return ((const int64_t *)t->data)[i];
        case PROTO_DTYPE_UINT64:
                return (int64_t)((const uint64_t *)t->data)[i];
        default:
                if (nn_is_float(t->dtype)) {
                        double v = nn_get(t, i);

                        if (!(v > -9.2e18 && v < 9.2e18))
                                return v > 0 ? INT64_MAX : INT64_MIN;
                        return (int64_t)v;
                }
                return (int64_t)nn_get(t, i);
        }
}

/* Round half to even, then clamp into [lo, hi]; NaN becomes 0. */
static double nn_sat(double v, double lo, double hi)
{
        if (isnan(v))
                return 0.0;
        v = nearbyint(v);
        return v < lo ? lo : v > hi ? hi : v;
}

void nn_put(const struct ops_tensor *t, int64_t i, double v)
{
        void *p = t->data;

        switch (t->dtype) {
        case PROTO_DTYPE_FLOAT32:
                ((float *)p)[i] = (float)v;
                break;
        case PROTO_DTYPE_FLOAT64:
                ((double *)p)[i] = v;
                break;
        case PROTO_DTYPE_FLOAT16:
                ((uint16_t *)p)[i] = ops_double_to_half(v);
                break;
        case PROTO_DTYPE_BFLOAT16:
                ((uint16_t *)p)[i] = float_to_bf16((float)v);
                break;
        case PROTO_DTYPE_UINT8:
                ((uint8_t *)p)[i] = (uint8_t)nn_sat(v, 0, 255);
                break;
        case PROTO_DTYPE_BOOL:
                ((uint8_t *)p)[i] = v != 0;
                break;
        case PROTO_DTYPE_INT8:
                ((int8_t *)p)[i] = (int8_t)nn_sat(v, -128, 127);
                break;
        case PROTO_DTYPE_UINT16:
                ((uint16_t *)p)[i] = (uint16_t)nn_sat(v, 0, 65535);
                break;
        case PROTO_DTYPE_INT16:
                ((int16_t *)p)[i] = (int16_t)nn_sat(v, -32768, 32767);
                break;
        case PROTO_DTYPE_INT32:
                ((int32_t *)p)[i] = (int32_t)nn_sat(v, INT32_MIN, INT32_MAX);
                break;
        case PROTO_DTYPE_INT64:
                /* 2^63 is not an int64; the largest double below it is. */
                ((int64_t *)p)[i] = (int64_t)nn_sat(v, -9223372036854775808.0,
                                                    9223372036854774784.0);
                break;
        case PROTO_DTYPE_UINT32:
                ((uint32_t *)p)[i] = (uint32_t)nn_sat(v, 0, UINT32_MAX);
                break;
        case PROTO_DTYPE_UINT64:
                ((uint64_t *)p)[i] = (uint64_t)nn_sat(v, 0, 18446744073709549568.0);
                break;
        default:
                break;
        }
}

void nn_to_f32(float *dst, int dtype, const void *src, int64_t n)
{
        struct ops_tensor t;
        int64_t i;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32:
                memcpy(dst, src, (size_t)n * sizeof(float));
                return;
        case PROTO_DTYPE_FLOAT16:
                ops_half_to_float_n(dst, src, (size_t)n);
                return;
        case PROTO_DTYPE_UINT8:
                for (i = 0; i < n; i++)
                        dst[i] = ((const uint8_t *)src)[i];
                return;
        case PROTO_DTYPE_INT8:
                for (i = 0; i < n; i++)
                        dst[i] = ((const int8_t *)src)[i];
                return;
        case PROTO_DTYPE_FLOAT64:
                for (i = 0; i < n; i++)
                        dst[i] = (float)((const double *)src)[i];
                return;
        default:
                memset(&t, 0, sizeof(t));
                t.dtype = dtype;
                t.data = (void *)src;
                for (i = 0; i < n; i++)
                        dst[i] = (float)nn_get(&t, i);
                return;
        }
}

void nn_from_f32(void *dst, int dtype, const float *src, int64_t n)
{
        struct ops_tensor t;
        int64_t i;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32:
                memcpy(dst, src, (size_t)n * sizeof(float));
                return;
        case PROTO_DTYPE_FLOAT16:
                ops_float_to_half_n(dst, src, (size_t)n);
                return;
        case PROTO_DTYPE_FLOAT64:
                for (i = 0; i < n; i++)
                        ((double *)dst)[i] = src[i];
                return;
        default:
                memset(&t, 0, sizeof(t));
                t.dtype = dtype;
                t.data = dst;
                for (i = 0; i < n; i++)
                        nn_put(&t, i, src[i]);
                return;
        }
}

int nn_f32_in(const struct ops_tensor *t, struct nn_f32 *ret)
{
        int64_t n = ops_tensor_numel(t);

        ret->owned = NULL;
        if (t->dtype == PROTO_DTYPE_FLOAT32) {
                ret->p = t->data;
                return 0;
        }
        ret->owned = ops_buf_alloc(ops_bytes((uint64_t)(n > 0 ? n : 0), sizeof(float)), NULL, 0);
        ret->p = ret->owned;
        if (!ret->p)
                return -ENOMEM;
        nn_to_f32(ret->p, t->dtype, t->data, n);
        return 0;
}

int nn_f32_out(const struct ops_tensor *t, struct nn_f32 *ret)
{
        int64_t n = ops_tensor_numel(t);

        ret->owned = NULL;
        if (t->dtype == PROTO_DTYPE_FLOAT32) {
                ret->p = t->data;
                return 0;
        }
        ret->owned = ops_buf_alloc(ops_bytes((uint64_t)(n > 0 ? n : 0), sizeof(float)), NULL, 0);
        ret->p = ret->owned;
        return ret->p ? 0 : -ENOMEM;
}

void nn_f32_commit(const struct ops_tensor *t, struct nn_f32 *v)
{
        if (v->owned)
                nn_from_f32(t->data, t->dtype, v->owned, ops_tensor_numel(t));
}

void nn_f32_done(struct nn_f32 *v)
{
        ops_buf_free(v->owned); /* float32 copies are workspaces charged to the run */
        v->owned = NULL;
        v->p = NULL;
}

/* ---------------------------------------------------------------- calls */

int nn_has_in(const struct ops_call *call, int i)
{
        return i < call->nin && call->in[i].dtype != 0;
}

int nn_want_out(const struct ops_call *call, int i)
{
        return i < call->nout && call->out[i].dtype != 0 && call->out[i].data;
}

void nn_set_out(struct ops_call *call, int i, int dtype, int ndim, const int64_t *dims)
{
        struct ops_tensor *t;

        if (i >= call->nout)
                return;
        t = &call->out[i];
        t->dtype = dtype;
        t->ndim = ndim;
        if (ndim > 0)
                memmove(t->dims, dims, (size_t)ndim * sizeof(*dims));
}

int nn_infer_begin(const struct ops_def *def, const struct ops_call *call, char *err,
                   size_t errlen)
{
        const struct ops_tensor *t;
        int i, d;

        if (call->nin < def->min_inputs || call->nin > def->max_inputs)
                return ops_fail(err, errlen, -EINVAL, "%s: %d inputs, expected %d to %d",
                                def->name, call->nin, def->min_inputs, def->max_inputs);
        if (call->nout < 1 || call->nout > def->outputs)
                return ops_fail(err, errlen, -EINVAL, "%s: %d outputs, expected 1 to %d",
                                def->name, call->nout, def->outputs);
        if (call->nattr < 0 || call->nattr > OPS_MAX_ATTRS)
                return ops_fail(err, errlen, -EINVAL, "%s: invalid attribute count %d",
                                def->name, call->nattr);
        for (i = 0; i < call->nin; i++) {
                t = &call->in[i];
                if (!t->dtype) {
                        if (i < def->min_inputs)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: input %d is required", def->name, i);
                        continue;
                }
                if (!proto_dtype_size(t->dtype))
                        return ops_fail(err, errlen, -EINVAL, "%s: input %d has unknown dtype %d",
                                        def->name, i, t->dtype);
                if (t->ndim < 0 || t->ndim > OPS_MAX_DIMS)
                        return ops_fail(err, errlen, -EINVAL, "%s: input %d has invalid rank %d",
                                        def->name, i, t->ndim);
                for (d = 0; d < t->ndim; d++)
                        if (t->dims[d] < 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: input %d has a negative dimension",
                                                def->name, i);
                if (ops_tensor_numel(t) < 0 ||
                    ops_tensor_numel(t) > INT64_MAX / 16)
                        return ops_fail(err, errlen, -EINVAL, "%s: input %d is too large",
                                        def->name, i);
        }
        return 0;
}

int nn_want_dtype(const struct ops_def *def, const struct ops_call *call, int i,
                  const int *dtypes, char *err, size_t errlen)
{
        char b[OPS_DTYPE_STR_MAX];
        int j;

        for (j = 0; dtypes[j]; j++)
                if (call->in[i].dtype == dtypes[j])
                        return 0;
        return ops_fail(err, errlen, -EINVAL, "%s: input %d has unsupported dtype %s", def->name,
                        i, ops_dtype_str(call->in[i].dtype, b, sizeof(b)));
}

void nn_cost_simple(const struct ops_call *call, uint64_t flops_per_elem, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        uint64_t most = 0, bytes = 0, n;
        int i;

        for (i = 0; i < call->nin; i++) {
                if (!call->in[i].dtype)
                        continue;
                n = (uint64_t)ops_tensor_numel(&call->in[i]);
                most = n > most ? n : most;
                bytes = ops_add_sat(bytes, ops_mul_sat(n, proto_dtype_size(call->in[i].dtype)));
        }
        for (i = 0; i < call->nout; i++) {
                if (!call->out[i].dtype)
                        continue;
                n = (uint64_t)ops_tensor_numel(&call->out[i]);
                most = n > most ? n : most;
                bytes = ops_add_sat(bytes, ops_mul_sat(n, proto_dtype_size(call->out[i].dtype)));
        }
        *ret_flops = ops_mul_sat(most, flops_per_elem);
        *ret_bytes = bytes;
}

/* ---------------------------------------------------------------- window geometry */

static int64_t ceil_div(int64_t a, int64_t b)
{
        /* b > 0; rounds toward +infinity for either sign of a. */
        return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static int64_t floor_div(int64_t a, int64_t b)
{
        return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int nn_geom_attrs(const struct ops_call *call, const char *op, int nsp, unsigned flags,
                  struct nn_geom *g, char *err, size_t errlen)
{
        int64_t v[2 * NN_SP];
        int i, n, o = NN_SP - nsp;

        if (nsp < 1 || nsp > NN_SP)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: %d spatial dimensions, 1 to %d supported", op, nsp, NN_SP);
        for (i = 0; i < NN_SP; i++) {
                g->in[i] = g->k[i] = g->out[i] = g->stride[i] = g->dil[i] = 1;
                g->pb[i] = g->pe[i] = 0;
        }
        g->nsp = nsp;
        n = nn_attr_ints(call, "strides", v, nsp);
        if (n == -2 || (n >= 0 && n != nsp))
                return ops_fail(err, errlen, -EINVAL, "%s: 'strides' needs %d values", op, nsp);
        for (i = 0; i < n; i++) {
                if (v[i] < 1 || v[i] > INT32_MAX)
                        return ops_fail(err, errlen, -EINVAL, "%s: stride %lld", op,
                                        (long long)v[i]);
                g->stride[o + i] = v[i];
        }
        n = nn_attr_ints(call, "dilations", v, nsp);
        if (n == -2 || (n >= 0 && n != nsp))
                return ops_fail(err, errlen, -EINVAL, "%s: 'dilations' needs %d values", op,
                                nsp);
        for (i = 0; i < n; i++) {
                if (v[i] < 1 || v[i] > INT32_MAX)
                        return ops_fail(err, errlen, -EINVAL, "%s: dilation %lld", op,
                                        (long long)v[i]);
                if ((flags & NN_GEOM_NODIL) && v[i] != 1)
                        return ops_fail(err, errlen, -EINVAL, "%s: dilations not supported",
                                        op);
                g->dil[o + i] = v[i];
        }
        n = nn_attr_ints(call, "pads", v, 2 * nsp);
        if (n == -2 || (n >= 0 && n != 2 * nsp))
                return ops_fail(err, errlen, -EINVAL, "%s: 'pads' needs %d values", op,
                                2 * nsp);
        for (i = 0; i < n; i++)
                if (v[i] < 0 || v[i] > INT32_MAX)
                        return ops_fail(err, errlen, -EINVAL, "%s: pad %lld", op,
                                        (long long)v[i]);
        for (i = 0; n > 0 && i < nsp; i++) {
                g->pb[o + i] = v[i];
                g->pe[o + i] = v[nsp + i];
        }
        return 0;
}

int nn_geom_init(const struct ops_call *call, const char *op, int nsp, const int64_t *in,
                 const int64_t *k, unsigned flags, struct nn_geom *g, char *err,
                 size_t errlen)
{
        const char *ap = nn_attr_str(call, "auto_pad", "NOTSET");
        int ceil_mode = (flags & NN_GEOM_CEIL) && ops_attr_int(call, "ceil_mode", 0);
        int i, rc, o = NN_SP - nsp;

        rc = nn_geom_attrs(call, op, nsp, flags, g, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < nsp; i++) {
                if (k[i] < 1 || k[i] > INT32_MAX)
                        return ops_fail(err, errlen, -EINVAL, "%s: kernel extent %lld",
                                        op, (long long)k[i]);
                g->in[o + i] = in[i];
                g->k[o + i] = k[i];
        }
        for (i = o; i < NN_SP; i++) {
                int64_t ek = (g->k[i] - 1) * g->dil[i] + 1, s = g->stride[i], span, total;

                if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
                        g->out[i] = ceil_div(g->in[i], s);
                        total = (g->out[i] - 1) * s + ek - g->in[i];
                        if (total < 0)
                                total = 0;
                        g->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
                        g->pe[i] = total - g->pb[i];
                        continue;
                }
                if (strcmp(ap, "VALID") == 0) {
                        g->pb[i] = g->pe[i] = 0;
                } else if (strcmp(ap, "NOTSET") != 0) {
                        return ops_fail(err, errlen, -EINVAL, "%s: auto_pad '%s' unknown", op, ap);
                }
                span = g->in[i] + g->pb[i] + g->pe[i] - ek;
                if (span < 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: window of %lld exceeds padded input of %lld", op,
                                        (long long)ek,
                                        (long long)(g->in[i] + g->pb[i] + g->pe[i]));
                g->out[i] = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
        }
        return 0;
}

int64_t nn_geom_in_size(const struct nn_geom *g)
{
        return g->in[0] * g->in[1] * g->in[2];
}

int64_t nn_geom_k_size(const struct nn_geom *g)
{
        return g->k[0] * g->k[1] * g->k[2];
}

int64_t nn_geom_out_size(const struct nn_geom *g)
{
        return g->out[0] * g->out[1] * g->out[2];
}

/* The output positions o in [0, n) whose input position o * s - p + off lies in [0, in):
 * [*lo, *hi). */
static void valid_range(int64_t n, int64_t s, int64_t p, int64_t off, int64_t in, int64_t *lo,
                        int64_t *hi)
{
        int64_t a = ceil_div(p - off, s), b = floor_div(in - 1 + p - off, s) + 1;

        *lo = a < 0 ? 0 : a > n ? n : a;
        *hi = b < *lo ? *lo : b > n ? n : b;
}

/* One generator per element type (TI in, TO out); rows are (channel, kd, kh, kw), columns
 * the output positions of output lines [r0, r1) (a line: one (od, oh) pair, od * OH + oh),
 * each row filled a line of output width at a time. */
#define NN_IM2COL(name, TI, TO)                                                                \
        void name(const TI *x, int64_t channels, const struct nn_geom *g, int64_t r0, int64_t r1, \
                  TO *col)                                                                     \
        {                                                                                      \
                const int64_t D = g->in[0], H = g->in[1], W = g->in[2];                        \
                const int64_t OH = g->out[1], OW = g->out[2];                                  \
                int64_t c, kd, kh, kw, r, ow, lo, hi;                                          \
                                                                                               \
                for (c = 0; c < channels; c++)                                                 \
                for (kd = 0; kd < g->k[0]; kd++)                                               \
                for (kh = 0; kh < g->k[1]; kh++)                                               \
                for (kw = 0; kw < g->k[2]; kw++) {                                             \
                        int64_t offw = kw * g->dil[2];                                         \
                                                                                               \
                        valid_range(OW, g->stride[2], g->pb[2], offw, W, &lo, &hi);            \
                        for (r = r0; r < r1; r++, col += OW) {                                 \
                                int64_t od = r / OH, oh = r % OH;                              \
                                int64_t id = od * g->stride[0] - g->pb[0] + kd * g->dil[0];    \
                                int64_t ih = oh * g->stride[1] - g->pb[1] + kh * g->dil[1];    \
                                int64_t base;                                                  \
                                                                                               \
                                if (id < 0 || id >= D || ih < 0 || ih >= H) {                  \
                                        memset(col, 0, (size_t)OW * sizeof(TO));               \
                                        continue;                                              \
                                }                                                              \
                                base = ((c * D + id) * H + ih) * W - g->pb[2] + offw;          \
                                for (ow = 0; ow < lo; ow++)                                    \
                                        col[ow] = 0;                                           \
                                if (g->stride[2] == 1 && sizeof(TI) == sizeof(TO)) {           \
                                        memcpy(col + lo, x + base + lo,                        \
                                               (size_t)(hi - lo) * sizeof(TO));                \
                                } else {                                                       \
                                        for (ow = lo; ow < hi; ow++)                           \
                                                col[ow] = (TO)x[base + ow * g->stride[2]];     \
                                }                                                              \
                                for (ow = hi; ow < OW; ow++)                                   \
                                        col[ow] = 0;                                           \
                        }                                                                      \
                }                                                                              \
        }

NN_IM2COL(nn_im2col_f32, float, float)
NN_IM2COL(nn_im2col_f64, double, double)
NN_IM2COL(nn_im2col_f32_f64, float, double)

void nn_col2im_f32(const float *col, int64_t channels, const struct nn_geom *g, float *x)
{
        const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
        const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
        int64_t c, kd, kh, kw, od, oh, ow, lo, hi;

        for (c = 0; c < channels; c++)
        for (kd = 0; kd < g->k[0]; kd++)
        for (kh = 0; kh < g->k[1]; kh++)
        for (kw = 0; kw < g->k[2]; kw++) {
                int64_t offw = kw * g->dil[2];

                valid_range(OW, g->stride[2], g->pb[2], offw, W, &lo, &hi);
                for (od = 0; od < OD; od++) {
                        int64_t id = od * g->stride[0] - g->pb[0] + kd * g->dil[0];

                        for (oh = 0; oh < OH; oh++, col += OW) {
                                int64_t ih = oh * g->stride[1] - g->pb[1] + kh * g->dil[1];
                                int64_t base;

                                if (id < 0 || id >= D || ih < 0 || ih >= H)
                                        continue;
                                base = ((c * D + id) * H + ih) * W - g->pb[2] + offw;
                                for (ow = lo; ow < hi; ow++)
                                        x[base + ow * g->stride[2]] += col[ow];
                        }
                }
        }
}

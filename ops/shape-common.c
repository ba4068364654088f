/* Helpers of the reduce and shape kernel families (see shape-common.h): element runs of any
 * numeric dtype as double or int64, readers for infer, axes, N-D copies, the check through
 * infer and the cost. Conversions switch on the dtype once per run, not per element, so
 * the loops stay tight. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "shape-common.h"

/* ---------------------------------------------------------------- element conversions */

int shp_num_class(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_FLOAT32:
        case PROTO_DTYPE_FLOAT16:
        case PROTO_DTYPE_FLOAT64:
        case PROTO_DTYPE_BFLOAT16: return SHP_NUM_FLOAT;
        case PROTO_DTYPE_INT8:
        case PROTO_DTYPE_INT16:
        case PROTO_DTYPE_INT32:
        case PROTO_DTYPE_INT64: return SHP_NUM_SIGNED;
        case PROTO_DTYPE_UINT8:
        case PROTO_DTYPE_UINT16:
        case PROTO_DTYPE_UINT32:
        case PROTO_DTYPE_UINT64:
        case PROTO_DTYPE_BOOL: return SHP_NUM_UNSIGNED;
        default: return SHP_NUM_NONE;
        }
}

#define SHP_LOOP(T, EXPR)                                                                      \
        do {                                                                                   \
                const T *p = (const T *)src + off;                                             \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        dst[i] = (EXPR);                                                       \
        } while (0)

void shp_load_f64(int dtype, const void *src, int64_t off, int64_t n, double *dst)
{
        int64_t i;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: SHP_LOOP(float, p[i]); break;
        case PROTO_DTYPE_FLOAT64: SHP_LOOP(double, p[i]); break;
        case PROTO_DTYPE_FLOAT16: SHP_LOOP(uint16_t, ops_half_to_float(p[i])); break;
        case PROTO_DTYPE_BFLOAT16: SHP_LOOP(uint16_t, ops_bf16_to_float(p[i])); break;
        case PROTO_DTYPE_INT8: SHP_LOOP(int8_t, p[i]); break;
        case PROTO_DTYPE_INT16: SHP_LOOP(int16_t, p[i]); break;
        case PROTO_DTYPE_INT32: SHP_LOOP(int32_t, p[i]); break;
        case PROTO_DTYPE_INT64: SHP_LOOP(int64_t, (double)p[i]); break;
        case PROTO_DTYPE_UINT8: SHP_LOOP(uint8_t, p[i]); break;
        case PROTO_DTYPE_UINT16: SHP_LOOP(uint16_t, p[i]); break;
        case PROTO_DTYPE_UINT32: SHP_LOOP(uint32_t, p[i]); break;
        case PROTO_DTYPE_UINT64: SHP_LOOP(uint64_t, (double)p[i]); break;
        case PROTO_DTYPE_BOOL: SHP_LOOP(uint8_t, p[i] != 0); break;
        default: memset(dst, 0, (size_t)n * sizeof(*dst)); break;
        }
}

/* Truncation toward zero saturated to int64; NaN gives 0. */
static int64_t shp_f64_to_i64(double d)
{
        if (isnan(d))
                return 0;
        if (d <= -9223372036854775808.0)
                return INT64_MIN;
        if (d >= 9223372036854775808.0)
                return INT64_MAX;
        return (int64_t)d;
}

static uint64_t shp_f64_to_u64(double d)
{
        if (isnan(d) || d <= 0)
                return 0;
        if (d >= 18446744073709551616.0)
                return UINT64_MAX;
        return (uint64_t)d;
}

void shp_load_i64(int dtype, const void *src, int64_t off, int64_t n, int64_t *dst)
{
        int64_t i;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: SHP_LOOP(float, shp_f64_to_i64(p[i])); break;
        case PROTO_DTYPE_FLOAT64: SHP_LOOP(double, shp_f64_to_i64(p[i])); break;
        case PROTO_DTYPE_FLOAT16: SHP_LOOP(uint16_t, shp_f64_to_i64(ops_half_to_float(p[i]))); break;
        case PROTO_DTYPE_BFLOAT16: SHP_LOOP(uint16_t, shp_f64_to_i64(ops_bf16_to_float(p[i]))); break;
        case PROTO_DTYPE_INT8: SHP_LOOP(int8_t, p[i]); break;
        case PROTO_DTYPE_INT16: SHP_LOOP(int16_t, p[i]); break;
        case PROTO_DTYPE_INT32: SHP_LOOP(int32_t, p[i]); break;
        case PROTO_DTYPE_INT64: SHP_LOOP(int64_t, p[i]); break;
        case PROTO_DTYPE_UINT8: SHP_LOOP(uint8_t, p[i]); break;
        case PROTO_DTYPE_UINT16: SHP_LOOP(uint16_t, p[i]); break;
        case PROTO_DTYPE_UINT32: SHP_LOOP(uint32_t, p[i]); break;
        case PROTO_DTYPE_UINT64: SHP_LOOP(uint64_t, (int64_t)p[i]); break;
        case PROTO_DTYPE_BOOL: SHP_LOOP(uint8_t, p[i] != 0); break;
        default: memset(dst, 0, (size_t)n * sizeof(*dst)); break;
        }
}

#undef SHP_LOOP

#define SHP_LOOP(T, EXPR)                                                                      \
        do {                                                                                   \
                T *p = (T *)dst + off;                                                         \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        p[i] = (EXPR);                                                         \
        } while (0)

/* Saturating conversion of a double to a signed type of the given bounds. */
#define SHP_SAT(T, LO, HI, v)                                                                  \
        ((T)(isnan(v) ? 0 : (v) <= (double)(LO) ? (LO) : (v) >= (double)(HI) ? (HI) : (T)(v)))

void shp_store_f64(int dtype, void *dst, int64_t off, int64_t n, const double *src)
{
        int64_t i;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: SHP_LOOP(float, (float)src[i]); break;
        case PROTO_DTYPE_FLOAT64: SHP_LOOP(double, src[i]); break;
        case PROTO_DTYPE_FLOAT16: SHP_LOOP(uint16_t, ops_double_to_half(src[i])); break;
        case PROTO_DTYPE_BFLOAT16: SHP_LOOP(uint16_t, ops_double_to_bf16(src[i])); break;
        case PROTO_DTYPE_INT8: SHP_LOOP(int8_t, SHP_SAT(int8_t, INT8_MIN, INT8_MAX, src[i])); break;
        case PROTO_DTYPE_INT16: SHP_LOOP(int16_t, SHP_SAT(int16_t, INT16_MIN, INT16_MAX, src[i])); break;
        case PROTO_DTYPE_INT32: SHP_LOOP(int32_t, SHP_SAT(int32_t, INT32_MIN, INT32_MAX, src[i])); break;
        case PROTO_DTYPE_INT64: SHP_LOOP(int64_t, shp_f64_to_i64(src[i])); break;
        case PROTO_DTYPE_UINT8: SHP_LOOP(uint8_t, SHP_SAT(uint8_t, 0, UINT8_MAX, src[i])); break;
        case PROTO_DTYPE_UINT16: SHP_LOOP(uint16_t, SHP_SAT(uint16_t, 0, UINT16_MAX, src[i])); break;
        case PROTO_DTYPE_UINT32: SHP_LOOP(uint32_t, SHP_SAT(uint32_t, 0, UINT32_MAX, src[i])); break;
        case PROTO_DTYPE_UINT64: SHP_LOOP(uint64_t, shp_f64_to_u64(src[i])); break;
        case PROTO_DTYPE_BOOL: SHP_LOOP(uint8_t, src[i] != 0); break;
        default: break;
        }
}

void shp_store_i64(int dtype, void *dst, int64_t off, int64_t n, const int64_t *src)
{
        int64_t i;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: SHP_LOOP(float, (float)src[i]); break;
        case PROTO_DTYPE_FLOAT64: SHP_LOOP(double, (double)src[i]); break;
        case PROTO_DTYPE_FLOAT16: SHP_LOOP(uint16_t, ops_double_to_half((double)src[i])); break;
        case PROTO_DTYPE_BFLOAT16: SHP_LOOP(uint16_t, ops_double_to_bf16((double)src[i])); break;
        /* Narrowing wraps (two's complement, as gcc defines it). */
        case PROTO_DTYPE_INT8: SHP_LOOP(int8_t, (int8_t)src[i]); break;
        case PROTO_DTYPE_INT16: SHP_LOOP(int16_t, (int16_t)src[i]); break;
        case PROTO_DTYPE_INT32: SHP_LOOP(int32_t, (int32_t)src[i]); break;
        case PROTO_DTYPE_INT64: SHP_LOOP(int64_t, src[i]); break;
        case PROTO_DTYPE_UINT8: SHP_LOOP(uint8_t, (uint8_t)src[i]); break;
        case PROTO_DTYPE_UINT16: SHP_LOOP(uint16_t, (uint16_t)src[i]); break;
        case PROTO_DTYPE_UINT32: SHP_LOOP(uint32_t, (uint32_t)src[i]); break;
        case PROTO_DTYPE_UINT64: SHP_LOOP(uint64_t, (uint64_t)src[i]); break;
        case PROTO_DTYPE_BOOL: SHP_LOOP(uint8_t, src[i] != 0); break;
        default: break;
        }
}

#undef SHP_LOOP
#undef SHP_SAT

double shp_get_f64(const struct ops_tensor *t, int64_t i)
{
        double v;

        shp_load_f64(t->dtype, t->data, i, 1, &v);
        return v;
}

int64_t shp_get_i64(const struct ops_tensor *t, int64_t i)
{
        int64_t v;

        shp_load_i64(t->dtype, t->data, i, 1, &v);
        return v;
}

int shp_nonzero(int dtype, const void *data, int64_t i)
{
        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: return ((const float *)data)[i] != 0;
        case PROTO_DTYPE_FLOAT64: return ((const double *)data)[i] != 0;
        /* Only the sign bit set is -0.0. */
        case PROTO_DTYPE_FLOAT16:
        case PROTO_DTYPE_BFLOAT16: return (((const uint16_t *)data)[i] & 0x7fff) != 0;
        default: break;
        }
        switch (proto_dtype_size(dtype)) {
        case 1: return ((const uint8_t *)data)[i] != 0;
        case 2: return ((const uint16_t *)data)[i] != 0;
        case 4: return ((const uint32_t *)data)[i] != 0;
        case 8: return ((const uint64_t *)data)[i] != 0;
        default: return 0;
        }
}

/* ---------------------------------------------------------------- infer helpers */

int shp_has_in(const struct ops_call *call, int i)
{
        return i >= 0 && i < call->nin && i < OPS_MAX_INPUTS && call->in[i].dtype != 0;
}

void shp_set_out(struct ops_call *call, int i, int dtype, int ndim, const int64_t *dims)
{
        struct ops_tensor *o;

        if (i < 0 || i >= call->nout || i >= OPS_MAX_OUTPUTS)
                return;
        o = &call->out[i];
        o->dtype = dtype;
        o->ndim = ndim;
        if (ndim > 0)
                memmove(o->dims, dims, (size_t)ndim * sizeof(*dims));
}

static int shp_counts(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        if (call->nin < def->min_inputs || call->nin > def->max_inputs ||
            call->nin > OPS_MAX_INPUTS) {
                if (def->min_inputs == def->max_inputs)
                        return ops_fail(err, errlen, -EINVAL, "%s: expected %d input%s, got %d",
                                        def->name, def->min_inputs,
                                        def->min_inputs == 1 ? "" : "s", call->nin);
                return ops_fail(err, errlen, -EINVAL, "%s: expected %d to %d inputs, got %d",
                                def->name, def->min_inputs, def->max_inputs, call->nin);
        }
        if (call->nout < 1 || call->nout > def->outputs || call->nout > OPS_MAX_OUTPUTS) {
                if (def->outputs == 1)
                        return ops_fail(err, errlen, -EINVAL, "%s: expected 1 output, got %d",
                                        def->name, call->nout);
                return ops_fail(err, errlen, -EINVAL, "%s: expected 1 to %d outputs, got %d",
                                def->name, def->outputs, call->nout);
        }
        return 0;
}

int shp_infer_begin(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        int i, rc;

        rc = shp_counts(def, call, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < call->nin; i++) {
                if (!call->in[i].dtype)
                        continue;
                if (!proto_dtype_size(call->in[i].dtype))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: input %d has unsupported dtype %d", def->name, i,
                                        call->in[i].dtype);
                rc = ops_check_tensor(def, "input", i, &call->in[i], err, errlen);
                if (rc)
                        return rc;
        }
        return 0;
}

int shp_want_dtype(const struct ops_def *def, const struct ops_call *call, int i,
                   uint32_t mask, char *err, size_t errlen)
{
        char b[OPS_DTYPE_STR_MAX];
        int dt = call->in[i].dtype;

        if (dt <= 0 || dt >= 32 || !(mask & SHP_T(dt)))
                return ops_fail(err, errlen, -EINVAL, "%s: input %d has unsupported dtype %s",
                                def->name, i, ops_dtype_str(dt, b, sizeof(b)));
        return 0;
}

int shp_need_data(const struct ops_def *def, const struct ops_call *call, int i,
                  const char *what, char *err, size_t errlen)
{
        if (!call->in[i].data && ops_tensor_numel(&call->in[i]) > 0)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: the output shape depends on the values of input %d (%s), "
                                "which are not known here (run it in a graph)",
                                def->name, i, what);
        return 0;
}

int shp_input_ints(const struct ops_def *def, const struct ops_call *call, int i,
                   const char *what, int64_t *ret, int max, int *ret_n, char *err,
                   size_t errlen)
{
        const struct ops_tensor *t = &call->in[i];
        int64_t n = ops_tensor_numel(t);
        int rc;

        if (shp_num_class(t->dtype) != SHP_NUM_SIGNED &&
            shp_num_class(t->dtype) != SHP_NUM_UNSIGNED)
                return ops_fail(err, errlen, -EINVAL, "%s: input %d (%s) must be integer",
                                def->name, i, what);
        if (t->dtype == PROTO_DTYPE_BOOL)
                return ops_fail(err, errlen, -EINVAL, "%s: input %d (%s) must be integer",
                                def->name, i, what);
        if (t->ndim > 1)
                return ops_fail(err, errlen, -EINVAL, "%s: input %d (%s) must be 1-D, not rank %d",
                                def->name, i, what, t->ndim);
        if (n < 0 || n > max)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: input %d (%s) has %lld values, at most %d allowed",
                                def->name, i, what, (long long)n, max);
        rc = shp_need_data(def, call, i, what, err, errlen);
        if (rc)
                return rc;
        if (n)
                shp_load_i64(t->dtype, t->data, 0, n, ret);
        *ret_n = (int)n;
        return 0;
}

int shp_attr_ints(const struct ops_def *def, const struct ops_call *call, const char *name,
                  int64_t *ret, int max, int *ret_n, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        *ret_n = -1;
        if (!a)
                return 0;
        if (a->type == OPS_ATTR_INT && max >= 1) {
                ret[0] = a->i;
                *ret_n = 1;
                return 0;
        }
        if (a->type != OPS_ATTR_INTS || a->n < 0 || (a->n && !a->ints))
                return ops_fail(err, errlen, -EINVAL, "%s: attribute '%s' must be a list of ints",
                                def->name, name);
        if (a->n > max)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: attribute '%s' has %d values, at most %d allowed",
                                def->name, name, a->n, max);
        if (a->n)
                memcpy(ret, a->ints, (size_t)a->n * sizeof(*ret));
        *ret_n = a->n;
        return 0;
}

int shp_attr_int(const struct ops_def *def, const struct ops_call *call, const char *name,
                 int64_t dflt, int64_t *ret, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        if (!a) {
                *ret = dflt;
                return 0;
        }
        if (a->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "%s: attribute '%s' must be an int",
                                def->name, name);
        *ret = a->i;
        return 0;
}

int shp_attr_float(const struct ops_def *def, const struct ops_call *call, const char *name,
                   double dflt, double *ret, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        if (!a) {
                *ret = dflt;
                return 0;
        }
        if (a->type == OPS_ATTR_FLOAT)
                *ret = a->f;
        else if (a->type == OPS_ATTR_INT)
                *ret = (double)a->i;
        else
                return ops_fail(err, errlen, -EINVAL, "%s: attribute '%s' must be a float",
                                def->name, name);
        return 0;
}

int shp_attr_str(const struct ops_def *def, const struct ops_call *call, const char *name,
                 const char *dflt, const char **ret, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        if (!a) {
                *ret = dflt;
                return 0;
        }
        if (a->type != OPS_ATTR_STRING || !a->s)
                return ops_fail(err, errlen, -EINVAL, "%s: attribute '%s' must be a string",
                                def->name, name);
        *ret = a->s;
        return 0;
}

int shp_axis(const struct ops_def *def, int64_t axis, int rank, int *ret, char *err,
             size_t errlen)
{
        if (axis < -rank || axis >= rank)
                return ops_fail(err, errlen, -EINVAL, "%s: axis %lld out of range for rank %d",
                                def->name, (long long)axis, rank);
        *ret = (int)(axis < 0 ? axis + rank : axis);
        return 0;
}

int shp_axes_mask(const struct ops_def *def, const int64_t *axes, int n, int rank,
                  uint32_t *ret_mask, char *err, size_t errlen)
{
        uint32_t mask = 0;
        int i, a, rc;

        for (i = 0; i < n; i++) {
                rc = shp_axis(def, axes[i], rank, &a, err, errlen);
                if (rc)
                        return rc;
                if (mask & (1u << a))
                        return ops_fail(err, errlen, -EINVAL, "%s: axis %lld given twice",
                                        def->name, (long long)axes[i]);
                mask |= 1u << a;
        }
        *ret_mask = mask;
        return 0;
}

void shp_split3(const struct ops_tensor *t, int axis, int64_t *outer, int64_t *n,
                int64_t *inner)
{
        int d;

        *outer = *inner = 1;
        for (d = 0; d < axis; d++)
                *outer *= t->dims[d];
        *n = axis < t->ndim ? t->dims[axis] : 1;
        for (d = axis + 1; d < t->ndim; d++)
                *inner *= t->dims[d];
}

/* ---------------------------------------------------------------- copies */

void shp_strides(int ndim, const int64_t *dims, int64_t *strides)
{
        int64_t s = 1;
        int d;

        for (d = ndim - 1; d >= 0; d--) {
                strides[d] = s;
                s *= dims[d] ? dims[d] : 1;
        }
}

/* Copies n elements of size esize with element strides ds and ss. */
static void shp_copy_run(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                         size_t esize)
{
        int64_t i;

        if (ds == 1 && ss == 1) {
                memcpy(dst, src, (size_t)n * esize);
                return;
        }
        switch (esize) {
        case 1:
                for (i = 0; i < n; i++)
                        ((uint8_t *)dst)[i * ds] = ((const uint8_t *)src)[i * ss];
                break;
        case 2:
                for (i = 0; i < n; i++)
                        ((uint16_t *)dst)[i * ds] = ((const uint16_t *)src)[i * ss];
                break;
        case 4:
                for (i = 0; i < n; i++)
                        ((uint32_t *)dst)[i * ds] = ((const uint32_t *)src)[i * ss];
                break;
        case 8:
                for (i = 0; i < n; i++)
                        ((uint64_t *)dst)[i * ds] = ((const uint64_t *)src)[i * ss];
                break;
        default:
                for (i = 0; i < n; i++)
                        memcpy(dst + i * ds * (int64_t)esize, src + i * ss * (int64_t)esize,
                               esize);
                break;
        }
}

/* dst[i * dsi + j] = src[i + j * ssj] for i < ni, j < nj: a transpose-like block, done in
 * tiles so that both the reads and the writes of a tile stay within a few cache lines. */
#define SHP_TILE 32
#define SHP_BLOCK(T)                                                                           \
        do {                                                                                   \
                T *d = (T *)dst;                                                               \
                const T *s = (const T *)src;                                                   \
                                                                                               \
                for (i0 = 0; i0 < ni; i0 += SHP_TILE)                                          \
                        for (j0 = 0; j0 < nj; j0 += SHP_TILE) {                                \
                                int64_t ie = i0 + SHP_TILE < ni ? i0 + SHP_TILE : ni;          \
                                int64_t je = j0 + SHP_TILE < nj ? j0 + SHP_TILE : nj;          \
                                                                                               \
                                for (i = i0; i < ie; i++)                                      \
                                        for (j = j0; j < je; j++)                              \
                                                d[i * dsi + j] = s[i + j * ssj];               \
                        }                                                                      \
        } while (0)

static void shp_copy_block(char *dst, int64_t dsi, const char *src, int64_t ssj, int64_t ni,
                           int64_t nj, size_t esize)
{
        int64_t i0, j0, i, j;

        switch (esize) {
        case 1: SHP_BLOCK(uint8_t); break;
        case 2: SHP_BLOCK(uint16_t); break;
        case 4: SHP_BLOCK(uint32_t); break;
        case 8: SHP_BLOCK(uint64_t); break;
        default:
                for (i = 0; i < ni; i++)
                        for (j = 0; j < nj; j++)
                                memcpy(dst + (i * dsi + j) * (int64_t)esize,
                                       src + (i + j * ssj) * (int64_t)esize, esize);
                break;
        }
}

#undef SHP_BLOCK

void shp_copy_strided(size_t esize, int ndim, const int64_t *dims, void *dst,
                      const int64_t *dst_strides, const void *src, const int64_t *src_strides)
{
        int64_t ext[SHP_COPY_MAX_DIMS], ds[SHP_COPY_MAX_DIMS], ss[SHP_COPY_MAX_DIMS];
        int64_t idx[SHP_COPY_MAX_DIMS] = { 0 }, doff = 0, soff = 0, e = (int64_t)esize;
        int64_t bi_ext = 0, bi_ds = 0, bj_ss = 0, since = 0;
        int d, k, n = 0, outer;

        for (d = 0; d < ndim; d++)
                if (dims[d] == 0)
                        return;
        /* Drop unit dims and merge a dim into the previous one when both sides step over
         * it exactly as one longer dim would: fewer, longer runs. */
        for (d = 0; d < ndim; d++) {
                if (dims[d] == 1)
                        continue;
                if (n > 0 && ds[n - 1] == dst_strides[d] * dims[d] &&
                    ss[n - 1] == src_strides[d] * dims[d]) {
                        ext[n - 1] *= dims[d];
                        ds[n - 1] = dst_strides[d];
                        ss[n - 1] = src_strides[d];
                        continue;
                }
                ext[n] = dims[d];
                ds[n] = dst_strides[d];
                ss[n] = src_strides[d];
                n++;
        }
        if (n == 0) {
                memcpy(dst, src, esize);
                return;
        }
        /* Writes contiguous but reads strided, while some other dim reads contiguously: a
         * transpose. Copy 2-D blocks of those two dims, walking the rest. */
        k = -1;
        if (n >= 2 && ds[n - 1] == 1 && ss[n - 1] != 1 && ext[n - 1] >= 8)
                for (d = n - 2; d >= 0; d--)
                        if (ss[d] == 1 && ext[d] >= 8) {
                                k = d;
                                break;
                        }
        if (k >= 0) {
                bi_ext = ext[k];
                bi_ds = ds[k];
                bj_ss = ss[n - 1];
                for (d = k; d < n - 2; d++) {
                        ext[d] = ext[d + 1];
                        ds[d] = ds[d + 1];
                        ss[d] = ss[d + 1];
                }
                outer = n - 2;
        } else {
                outer = n - 1;
        }
        for (;;) {
                if (k >= 0)
                        shp_copy_block((char *)dst + doff * e, bi_ds,
                                       (const char *)src + soff * e, bj_ss, bi_ext, ext[n - 1],
                                       esize);
                else
                        shp_copy_run((char *)dst + doff * e, ds[n - 1],
                                     (const char *)src + soff * e, ss[n - 1], ext[n - 1], esize);
                /* Sizes come from the model: a check of the run context every
                 * OPS_POLL_ELEMS elements. A stop leaves the copy unfinished and the stop code
                 * recorded, which fails the node (the executor looks after every kernel). */
                since += ext[n - 1] * (k >= 0 ? bi_ext : 1);
                if (since >= OPS_POLL_ELEMS) {
                        since = 0;
                        if (ops_runctx_check(NULL, 0))
                                return;
                }
                for (d = outer - 1; d >= 0; d--) {
                        doff += ds[d];
                        soff += ss[d];
                        if (++idx[d] < ext[d])
                                break;
                        doff -= ds[d] * ext[d];
                        soff -= ss[d] * ext[d];
                        idx[d] = 0;
                }
                if (d < 0)
                        return;
        }
}

void shp_copy_mapped(size_t esize, int ndim, const int64_t *dims, void *dst, const void *src,
                     const int64_t *const *maps)
{
        int64_t idx[OPS_MAX_DIMS] = { 0 }, base = 0, n, i, since = 0;
        const int64_t *last;
        char *out = dst;
        int d;

        for (d = 0; d < ndim; d++)
                if (dims[d] == 0)
                        return;
        if (ndim == 0) {
                memcpy(dst, src, esize);
                return;
        }
        for (d = 0; d < ndim - 1; d++)
                base += maps[d][0];
        n = dims[ndim - 1];
        last = maps[ndim - 1];
        for (;;) {
                switch (esize) {
                case 1:
                        for (i = 0; i < n; i++)
                                ((uint8_t *)out)[i] = ((const uint8_t *)src)[base + last[i]];
                        break;
                case 2:
                        for (i = 0; i < n; i++)
                                ((uint16_t *)out)[i] = ((const uint16_t *)src)[base + last[i]];
                        break;
                case 4:
                        for (i = 0; i < n; i++)
                                ((uint32_t *)out)[i] = ((const uint32_t *)src)[base + last[i]];
                        break;
                case 8:
                        for (i = 0; i < n; i++)
                                ((uint64_t *)out)[i] = ((const uint64_t *)src)[base + last[i]];
                        break;
                default:
                        for (i = 0; i < n; i++)
                                memcpy(out + i * (int64_t)esize,
                                       (const char *)src + (base + last[i]) * (int64_t)esize,
                                       esize);
                        break;
                }
                out += n * (int64_t)esize;
                since += n;
                if (since >= OPS_POLL_ELEMS) { /* as in shp_copy_strided */
                        since = 0;
                        if (ops_runctx_check(NULL, 0))
                                return;
                }
                for (d = ndim - 2; d >= 0; d--) {
                        base -= maps[d][idx[d]];
                        if (++idx[d] < dims[d]) {
                                base += maps[d][idx[d]];
                                break;
                        }
                        idx[d] = 0;
                        base += maps[d][0];
                }
                if (d < 0)
                        return;
        }
}

void shp_fill(void *dst, int64_t n, const void *value, size_t esize)
{
        int64_t i, done;
        char *p = dst;

        if (n <= 0)
                return;
        memcpy(p, value, esize);
        /* Doubling copies: log(n) memcpy calls whatever the element size, up to pieces of
         * OPS_POLL_ELEMS elements with a check of the run context between them (a stop
         * leaves the fill unfinished and the stop code recorded, as in shp_copy_strided). */
        for (done = 1; done < n; done += i) {
                i = done < n - done ? done : n - done;
                if (i > OPS_POLL_ELEMS) {
                        i = OPS_POLL_ELEMS;
                        if (ops_runctx_check(NULL, 0))
                                return;
                }
                memcpy(p + done * (int64_t)esize, p, (size_t)(i * (int64_t)esize));
        }
}

/* ---------------------------------------------------------------- check and cost */

void shp_cost(const struct ops_call *call, uint64_t flops_per_elem, uint64_t *ret_flops,
              uint64_t *ret_bytes)
{
        uint64_t most = 0, bytes = 0, n;
        int i;

        for (i = 0; i < call->nin + call->nout; i++) {
                const struct ops_tensor *t = i < call->nin ? &call->in[i] : &call->out[i - call->nin];
                int64_t k;

                if (!t->dtype || (k = ops_tensor_numel(t)) < 0)
                        continue;
                n = (uint64_t)k;
                most = n > most ? n : most;
                bytes = ops_add_sat(bytes, ops_mul_sat(n, proto_dtype_size(t->dtype)));
        }
        *ret_flops = ops_mul_sat(most, flops_per_elem);
        *ret_bytes = bytes;
}

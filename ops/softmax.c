/* Softmax, LogSoftmax and Hardmax for the AI CPU, in their two ONNX semantics: from opset 13
 * along the single axis named by "axis" (default -1, negative counting from the end);
 * before it, with the input coerced to 2-D at "axis" (default 1) and the operation taken
 * over everything from that axis on. Both are [outer, n, inner] around the axis (the
 * coerced form has inner 1), processed a slice at a time a row of inner elements at a
 * time, which keeps memory access sequential whatever the axis. The maximum is subtracted
 * first so that exp cannot overflow. float32 computes in float, float64 in double, float16
 * and bfloat16 are widened to float per slice. The output may be the input buffer.
 * Hardmax is 1 at the first maximum of each line, 0 elsewhere.
 *
 * The core Softmax definition (the one wire launches use) keeps its own check with
 * attribute and dtype messages; the others check through infer. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape-common.h"

enum sm_kind { SM_SOFTMAX, SM_LOG, SM_HARD };

static const char *const sm_attrs[] = { "axis", NULL };

#define SM_TYPES SHP_FLOATS

static int sm_check(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        const struct ops_attr *a;
        char buf[OPS_DTYPE_STR_MAX];
        int rc;

        rc = ops_check_common(def, call, sm_attrs, err, errlen);
        if (rc)
                return rc;
        if (x->dtype <= 0 || x->dtype >= 32 || !(SM_TYPES & SHP_T(x->dtype)))
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
        return ops_check_output(def, call, x->dtype, x, err, errlen);
}

/* The [outer, n, inner] split of the input for either semantics. */
static int sm_split(const struct ops_def *def, const struct ops_call *call, int64_t *outer,
                    int64_t *n, int64_t *inner, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int legacy = def->since_version < 13, ax, d, rc;
        int64_t axis;

        rc = shp_attr_int(def, call, "axis", legacy ? 1 : -1, &axis, err, errlen);
        if (rc)
                return rc;
        if (legacy) {
                /* Coercion to 2-D accepts axis == rank (an empty second factor). */
                if (axis < -x->ndim || axis > x->ndim)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: axis %lld out of range for rank %d", def->name,
                                        (long long)axis, x->ndim);
                ax = (int)(axis < 0 ? axis + x->ndim : axis);
                *outer = *n = 1;
                for (d = 0; d < ax; d++)
                        *outer *= x->dims[d];
                for (d = ax; d < x->ndim; d++)
                        *n *= x->dims[d];
                *inner = 1;
                return 0;
        }
        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: input 0 is a scalar, rank 1 or more needed", def->name);
        rc = shp_axis(def, axis, x->ndim, &ax, err, errlen);
        if (rc)
                return rc;
        shp_split3(x, ax, outer, n, inner);
        return 0;
}

/* One [n, inner] slice; x and y may be the same buffer. scratch holds 2 * inner values and
 * arg inner indices. Every element of x is read before the element of y at its place is
 * written. */
#define SM_SLICE(NAME, T, EXP, LOG, MAX)                                                       \
        /* One contiguous line (inner 1), the common case: scalars instead of rows. */        \
        static void NAME##_line(T *y, const T *x, int64_t n, enum sm_kind kind)                \
        {                                                                                      \
                T m = x[0], s = 0, v;                                                          \
                int64_t r, arg = 0;                                                            \
                                                                                               \
                if (kind == SM_HARD) {                                                         \
                        for (r = 1; r < n; r++)                                                \
                                if (x[r] > m) {                                                \
                                        m = x[r];                                              \
                                        arg = r;                                               \
                                }                                                              \
                        for (r = 0; r < n; r++)                                                \
                                y[r] = r == arg ? 1 : 0;                                       \
                        return;                                                                \
                }                                                                              \
                for (r = 1; r < n; r++)                                                        \
                        m = MAX(m, x[r]);                                                      \
                if (kind == SM_LOG) {                                                          \
                        for (r = 0; r < n; r++)                                                \
                                s += EXP(x[r] - m);                                            \
                        s = LOG(s);                                                            \
                        for (r = 0; r < n; r++)                                                \
                                y[r] = x[r] - m - s;                                           \
                        return;                                                                \
                }                                                                              \
                for (r = 0; r < n; r++) {                                                      \
                        v = EXP(x[r] - m);                                                     \
                        y[r] = v;                                                              \
                        s += v;                                                                \
                }                                                                              \
                s = 1 / s;                                                                     \
                for (r = 0; r < n; r++)                                                        \
                        y[r] *= s;                                                             \
        }                                                                                      \
        static void NAME(T *y, const T *x, int64_t n, int64_t inner, enum sm_kind kind,        \
                         T *scratch, int64_t *arg)                                             \
        {                                                                                      \
                T *mx = scratch, *sum = scratch + inner;                                       \
                int64_t r, j;                                                                  \
                                                                                               \
                if (inner == 1) {                                                              \
                        NAME##_line(y, x, n, kind);                                            \
                        return;                                                                \
                }                                                                              \
                memcpy(mx, x, (size_t)inner * sizeof(*mx));                                    \
                if (kind == SM_HARD) {                                                         \
                        memset(arg, 0, (size_t)inner * sizeof(*arg));                          \
                        for (r = 1; r < n; r++)                                                \
                                for (j = 0; j < inner; j++)                                    \
                                        if (x[r * inner + j] > mx[j]) {                        \
                                                mx[j] = x[r * inner + j];                      \
                                                arg[j] = r;                                    \
                                        }                                                      \
                        for (r = 0; r < n; r++)                                                \
                                for (j = 0; j < inner; j++)                                    \
                                        y[r * inner + j] = arg[j] == r ? 1 : 0;                \
                        return;                                                                \
                }                                                                              \
                for (r = 1; r < n; r++)                                                        \
                        for (j = 0; j < inner; j++)                                            \
                                mx[j] = MAX(mx[j], x[r * inner + j]);                          \
                memset(sum, 0, (size_t)inner * sizeof(*sum));                                  \
                if (kind == SM_LOG) {                                                          \
                        for (r = 0; r < n; r++)                                                \
                                for (j = 0; j < inner; j++)                                    \
                                        sum[j] += EXP(x[r * inner + j] - mx[j]);               \
                        for (j = 0; j < inner; j++)                                            \
                                sum[j] = LOG(sum[j]);                                          \
                        /* (x - max) first: max + log(sum) would round at max's scale. */     \
                        for (r = 0; r < n; r++)                                                \
                                for (j = 0; j < inner; j++)                                    \
                                        y[r * inner + j] = x[r * inner + j] - mx[j] - sum[j];  \
                        return;                                                                \
                }                                                                              \
                for (r = 0; r < n; r++) {                                                      \
                        for (j = 0; j < inner; j++) {                                          \
                                y[r * inner + j] = EXP(x[r * inner + j] - mx[j]);              \
                                sum[j] += y[r * inner + j];                                    \
                        }                                                                      \
                }                                                                              \
                for (j = 0; j < inner; j++)                                                    \
                        sum[j] = 1 / sum[j];                                                   \
                for (r = 0; r < n; r++)                                                        \
                        for (j = 0; j < inner; j++)                                            \
                                y[r * inner + j] *= sum[j];                                    \
        }

SM_SLICE(sm_slice_f32, float, expf, logf, fmaxf)
SM_SLICE(sm_slice_f64, double, exp, log, fmax)

static int sm_compute(const struct ops_def *def, const struct ops_call *call, enum sm_kind kind,
                      char *err, size_t errlen)
{
        int dtype = call->in[0].dtype;
        int is_f64 = dtype == PROTO_DTYPE_FLOAT64, wide = dtype != PROTO_DTYPE_FLOAT32 && !is_f64;
        int64_t outer, n, inner, slice, o;
        void *scratch, *tmp = NULL;
        int64_t *arg;
        int rc;

        /* An empty tensor may have other dims whose product overflows. */
        if (!ops_tensor_numel(&call->in[0]))
                return 0;
        rc = sm_split(def, call, &outer, &n, &inner, err, errlen);
        if (rc)
                return rc;
        slice = n * inner;
        scratch = ops_buf_alloc((size_t)(2 * inner) * sizeof(double), NULL, 0);
        arg = ops_buf_alloc((size_t)inner * sizeof(*arg), NULL, 0);
        if (wide)
                tmp = ops_buf_alloc((size_t)slice * sizeof(float), NULL, 0);
        if (!scratch || !arg || (wide && !tmp)) {
                ops_buf_free(scratch);
                ops_buf_free(arg);
                ops_buf_free(tmp);
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        }
        for (o = 0; o < outer; o++) {
                if (is_f64) {
                        sm_slice_f64((double *)call->out[0].data + o * slice,
                                     (const double *)call->in[0].data + o * slice, n, inner,
                                     kind, scratch, arg);
                } else if (wide) {
                        const uint16_t *x = (const uint16_t *)call->in[0].data + o * slice;
                        uint16_t *y = (uint16_t *)call->out[0].data + o * slice;
                        int64_t i;

                        if (dtype == PROTO_DTYPE_FLOAT16)
                                ops_half_to_float_n(tmp, x, (size_t)slice);
                        else
                                for (i = 0; i < slice; i++)
                                        ((float *)tmp)[i] = ops_bf16_to_float(x[i]);
                        sm_slice_f32(tmp, tmp, n, inner, kind, scratch, arg);
                        if (dtype == PROTO_DTYPE_FLOAT16)
                                ops_float_to_half_n(y, tmp, (size_t)slice);
                        else
                                for (i = 0; i < slice; i++)
                                        y[i] = ops_float_to_bf16(((float *)tmp)[i]);
                } else {
                        sm_slice_f32((float *)call->out[0].data + o * slice,
                                     (const float *)call->in[0].data + o * slice, n, inner, kind,
                                     scratch, arg);
                }
        }
        ops_buf_free(scratch);
        ops_buf_free(arg);
        ops_buf_free(tmp);
        return 0;
}

static int sm_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t outer, n, inner;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SM_TYPES, err, errlen);
        if (!rc)
                rc = sm_split(def, call, &outer, &n, &inner, err, errlen);
        if (rc)
                return rc;
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static void sm_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->in[0]);

        /* max, subtract, exp (counted as several), sum, scale */
        *ret_flops = ops_mul_sat(n, 12);
        *ret_bytes = ops_mul_sat(2 * n, proto_dtype_size(call->in[0].dtype));
}

/* run of one definition (infer is sm_infer_def for every one). */
#define SM_FNS(var, kind)                                                                      \
        static int var##_run(const struct ops_def *def, const struct ops_call *call, char *err,\
                             size_t errlen)                                                    \
        {                                                                                      \
                return sm_compute(def, call, kind, err, errlen);                               \
        }

SM_FNS(ops_softmax, SM_SOFTMAX)
SM_FNS(ops_softmax1, SM_SOFTMAX)
SM_FNS(ops_log_softmax, SM_LOG)
SM_FNS(ops_log_softmax1, SM_LOG)
SM_FNS(ops_hardmax, SM_HARD)
SM_FNS(ops_hardmax1, SM_HARD)

const struct ops_def ops_softmax_def = {
        .name = "Softmax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .check = sm_check, .run = ops_softmax_run, .cost = sm_cost,
        .infer = sm_infer_def, .since_version = 13,
};

const struct ops_def ops_softmax1_def = {
        .name = "Softmax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = ops_softmax1_run, .cost = sm_cost,
        .infer = sm_infer_def, .since_version = 1, .attrs = sm_attrs,
};

const struct ops_def ops_log_softmax_def = {
        .name = "LogSoftmax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = ops_log_softmax_run, .cost = sm_cost,
        .infer = sm_infer_def, .since_version = 13, .attrs = sm_attrs,
};

const struct ops_def ops_log_softmax1_def = {
        .name = "LogSoftmax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = ops_log_softmax1_run, .cost = sm_cost,
        .infer = sm_infer_def, .since_version = 1, .attrs = sm_attrs,
};

const struct ops_def ops_hardmax_def = {
        .name = "Hardmax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = ops_hardmax_run, .cost = sm_cost,
        .infer = sm_infer_def, .since_version = 13, .attrs = sm_attrs,
};

const struct ops_def ops_hardmax1_def = {
        .name = "Hardmax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = ops_hardmax1_run, .cost = sm_cost,
        .infer = sm_infer_def, .since_version = 1, .attrs = sm_attrs,
};

/* Elementwise operators for the vector engine: the binary Add, Sub, Mul and Div with ONNX
 * multidirectional broadcasting, and the unary Relu, Sigmoid and Tanh. Each (operator, dtype)
 * pair gets contiguous kernels written so that gcc vectorizes them at -O2 (restrict pointers,
 * a main loop whose trip count is a multiple of the vector width), used when the output
 * does not overlap an input, and a strided kernel that also serves the general broadcast
 * walk and outputs that alias an input. float16 is computed in float and rounded back;
 * integer arithmetic wraps around instead of overflowing. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ops-internal.h"

enum ew_kind { EW_F32, EW_F16, EW_I32, EW_I64, EW_KINDS };

struct ew_binary_kernels {
        /* o = a op b over n elements, no overlap between o and a or b; NULL when absent */
        void (*vv)(void *o, const void *a, const void *b, size_t n);
        /* o = a op s, s one element */
        void (*vs)(void *o, const void *a, const void *s, size_t n);
        /* o = s op b */
        void (*sv)(void *o, const void *s, const void *b, size_t n);
        /* o[i] = a[i * sa] op b[i * sb], o may equal a or b */
        void (*strided)(void *o, const void *a, int64_t sa, const void *b, int64_t sb,
                        int64_t n);
};

struct ew_unary_kernels {
        void (*contig)(void *o, const void *a, size_t n); /* no overlap; NULL when absent */
        void (*any)(void *o, const void *a, size_t n);    /* o may equal a */
};

static int ew_kind_of(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: return EW_F32;
        case PROTO_DTYPE_FLOAT16: return EW_F16;
        case PROTO_DTYPE_INT32: return EW_I32;
        case PROTO_DTYPE_INT64: return EW_I64;
        default: return -1;
        }
}

static inline float f32_add(float a, float b) { return a + b; }
static inline float f32_sub(float a, float b) { return a - b; }
static inline float f32_mul(float a, float b) { return a * b; }
static inline float f32_div(float a, float b) { return a / b; }

static inline float f32_relu(float a) { return a < 0 ? 0.0f : a; }
static inline float f32_tanh(float a) { return tanhf(a); }

static inline float f32_sigmoid(float a)
{
        float e;

        /* exp of a non-positive argument only, so large |a| cannot overflow to inf/inf. */
        if (a >= 0)
                return 1.0f / (1.0f + expf(-a));
        e = expf(a);
        return e / (1.0f + e);
}

/* Integer arithmetic in the unsigned type wraps where the signed one would be undefined;
 * the conversion back is modular in gcc. */
#define EW_INT_OPS(pfx, T, U)                                                                  \
        static inline T pfx##_add(T a, T b) { return (T)((U)a + (U)b); }                       \
        static inline T pfx##_sub(T a, T b) { return (T)((U)a - (U)b); }                       \
        static inline T pfx##_mul(T a, T b) { return (T)((U)a * (U)b); }                       \
        static inline T pfx##_div(T a, T b) { return b == -1 ? (T)((U)0 - (U)a) : a / b; }     \
        static inline T pfx##_relu(T a) { return a < 0 ? 0 : a; }

EW_INT_OPS(i32, int32_t, uint32_t)
EW_INT_OPS(i64, int64_t, uint64_t)

/* The split into a multiple-of-8 main loop and a tail lets gcc's -O2 (very cheap) cost
 * model vectorize the main loop. gcc honours restrict on parameters, not on locals, hence
 * the typed inner functions behind the void * entry points. */
#define EW_BINARY_KERNELS(name, T, FN)                                                         \
        static void name##_vv_t(T *restrict o, const T *restrict a, const T *restrict b,       \
                                size_t n)                                                      \
        {                                                                                      \
                size_t i, n8 = n & ~(size_t)7;                                                 \
                                                                                               \
                for (i = 0; i < n8; i++)                                                       \
                        o[i] = FN(a[i], b[i]);                                                 \
                for (; i < n; i++)                                                             \
                        o[i] = FN(a[i], b[i]);                                                 \
        }                                                                                      \
        static void name##_vs_t(T *restrict o, const T *restrict a, T s, size_t n)             \
        {                                                                                      \
                size_t i, n8 = n & ~(size_t)7;                                                 \
                                                                                               \
                for (i = 0; i < n8; i++)                                                       \
                        o[i] = FN(a[i], s);                                                    \
                for (; i < n; i++)                                                             \
                        o[i] = FN(a[i], s);                                                    \
        }                                                                                      \
        static void name##_sv_t(T *restrict o, T s, const T *restrict b, size_t n)             \
        {                                                                                      \
                size_t i, n8 = n & ~(size_t)7;                                                 \
                                                                                               \
                for (i = 0; i < n8; i++)                                                       \
                        o[i] = FN(s, b[i]);                                                    \
                for (; i < n; i++)                                                             \
                        o[i] = FN(s, b[i]);                                                    \
        }                                                                                      \
        static void name##_vv(void *o, const void *a, const void *b, size_t n)                 \
        {                                                                                      \
                name##_vv_t(o, a, b, n);                                                       \
        }                                                                                      \
        static void name##_vs(void *o, const void *a, const void *s, size_t n)                 \
        {                                                                                      \
                name##_vs_t(o, a, *(const T *)s, n);                                           \
        }                                                                                      \
        static void name##_sv(void *o, const void *s, const void *b, size_t n)                 \
        {                                                                                      \
                name##_sv_t(o, *(const T *)s, b, n);                                           \
        }                                                                                      \
        static void name##_strided(void *o_, const void *a_, int64_t sa, const void *b_,       \
                                   int64_t sb, int64_t n)                                      \
        {                                                                                      \
                T *o = o_;                                                                     \
                const T *a = a_, *b = b_;                                                      \
                int64_t i;                                                                     \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        o[i] = FN(a[i * sa], b[i * sb]);                                       \
        }

#define EW_BINARY_F16_KERNEL(name, FN)                                                         \
        static void name##_strided(void *o_, const void *a_, int64_t sa, const void *b_,       \
                                   int64_t sb, int64_t n)                                      \
        {                                                                                      \
                uint16_t *o = o_;                                                              \
                const uint16_t *a = a_, *b = b_;                                               \
                int64_t i;                                                                     \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        o[i] = ops_float_to_half(FN(ops_half_to_float(a[i * sa]),              \
                                                    ops_half_to_float(b[i * sb])));            \
        }

#define EW_BINARY_TABLE(op)                                                                    \
        EW_BINARY_KERNELS(op##_f32, float, f32_##op)                                           \
        EW_BINARY_F16_KERNEL(op##_f16, f32_##op)                                               \
        EW_BINARY_KERNELS(op##_i32, int32_t, i32_##op)                                         \
        EW_BINARY_KERNELS(op##_i64, int64_t, i64_##op)                                         \
        static const struct ew_binary_kernels op##_kernels[EW_KINDS] = {                       \
                [EW_F32] = { op##_f32_vv, op##_f32_vs, op##_f32_sv, op##_f32_strided },        \
                [EW_F16] = { NULL, NULL, NULL, op##_f16_strided },                             \
                [EW_I32] = { op##_i32_vv, op##_i32_vs, op##_i32_sv, op##_i32_strided },        \
                [EW_I64] = { op##_i64_vv, op##_i64_vs, op##_i64_sv, op##_i64_strided },        \
        };

EW_BINARY_TABLE(add)
EW_BINARY_TABLE(sub)
EW_BINARY_TABLE(mul)
EW_BINARY_TABLE(div)

#define EW_UNARY_KERNELS(name, T, FN)                                                          \
        static void name##_contig_t(T *restrict o, const T *restrict a, size_t n)              \
        {                                                                                      \
                size_t i, n8 = n & ~(size_t)7;                                                 \
                                                                                               \
                for (i = 0; i < n8; i++)                                                       \
                        o[i] = FN(a[i]);                                                       \
                for (; i < n; i++)                                                             \
                        o[i] = FN(a[i]);                                                       \
        }                                                                                      \
        static void name##_contig(void *o, const void *a, size_t n)                            \
        {                                                                                      \
                name##_contig_t(o, a, n);                                                      \
        }                                                                                      \
        static void name##_any(void *o_, const void *a_, size_t n)                             \
        {                                                                                      \
                T *o = o_;                                                                     \
                const T *a = a_;                                                               \
                size_t i;                                                                      \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        o[i] = FN(a[i]);                                                       \
        }

#define EW_UNARY_F16_KERNEL(name, FN)                                                          \
        static void name##_any(void *o_, const void *a_, size_t n)                             \
        {                                                                                      \
                uint16_t *o = o_;                                                              \
                const uint16_t *a = a_;                                                        \
                size_t i;                                                                      \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        o[i] = ops_float_to_half(FN(ops_half_to_float(a[i])));                 \
        }

EW_UNARY_KERNELS(relu_f32, float, f32_relu)
EW_UNARY_F16_KERNEL(relu_f16, f32_relu)
EW_UNARY_KERNELS(relu_i32, int32_t, i32_relu)
EW_UNARY_KERNELS(relu_i64, int64_t, i64_relu)
EW_UNARY_KERNELS(sigmoid_f32, float, f32_sigmoid)
EW_UNARY_F16_KERNEL(sigmoid_f16, f32_sigmoid)
EW_UNARY_KERNELS(tanh_f32, float, f32_tanh)
EW_UNARY_F16_KERNEL(tanh_f16, f32_tanh)

static const struct ew_unary_kernels relu_kernels[EW_KINDS] = {
        [EW_F32] = { relu_f32_contig, relu_f32_any },
        [EW_F16] = { NULL, relu_f16_any },
        [EW_I32] = { relu_i32_contig, relu_i32_any },
        [EW_I64] = { relu_i64_contig, relu_i64_any },
};

static const struct ew_unary_kernels sigmoid_kernels[EW_KINDS] = {
        [EW_F32] = { sigmoid_f32_contig, sigmoid_f32_any },
        [EW_F16] = { NULL, sigmoid_f16_any },
};

static const struct ew_unary_kernels tanh_kernels[EW_KINDS] = {
        [EW_F32] = { tanh_f32_contig, tanh_f32_any },
        [EW_F16] = { NULL, tanh_f16_any },
};

static int ew_overlap(const void *p, int64_t pn, const void *q, int64_t qn, size_t esize)
{
        uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;

        if (!pn || !qn)
                return 0;
        return a < b + (uintptr_t)qn * esize && b < a + (uintptr_t)pn * esize;
}

static int ew_check_dtype(const struct ops_def *def, const struct ew_unary_kernels *unary,
                          const struct ops_tensor *t, int idx, char *err, size_t errlen)
{
        char buf[OPS_DTYPE_STR_MAX];
        int kind = ew_kind_of(t->dtype);

        if (kind < 0 || (unary && !unary[kind].any))
                return ops_fail(err, errlen, -EINVAL, "%s: input %d has unsupported dtype %s",
                                def->name, idx, ops_dtype_str(t->dtype, buf, sizeof(buf)));
        return 0;
}

static int ew_binary_check(const struct ops_def *def, const struct ops_call *call, char *err,
                           size_t errlen)
{
        char b1[OPS_DTYPE_STR_MAX], b2[OPS_DTYPE_STR_MAX], msg[2 * OPS_SHAPE_STR_MAX + 64];
        struct ops_tensor shape;
        int rc;

        rc = ops_check_common(def, call, NULL, err, errlen);
        if (rc)
                return rc;
        rc = ew_check_dtype(def, NULL, &call->in[0], 0, err, errlen);
        if (rc)
                return rc;
        if (call->in[1].dtype != call->in[0].dtype)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: input 1 dtype %s does not match input 0 dtype %s",
                                def->name, ops_dtype_str(call->in[1].dtype, b1, sizeof(b1)),
                                ops_dtype_str(call->in[0].dtype, b2, sizeof(b2)));
        memset(&shape, 0, sizeof(shape));
        if (ops_broadcast_shape(&call->in[0], &call->in[1], &shape, msg, sizeof(msg)))
                return ops_fail(err, errlen, -EINVAL, "%s: %s", def->name, msg);
        return ops_check_output(def, call, call->in[0].dtype, &shape, err, errlen);
}

/* Walks the output in row-major order, calling the strided kernel on its innermost run.
 * Dims of extent 1 are dropped and neighbouring dims that are contiguous for both inputs
 * are merged, so the inner run is as long as the layout allows. */
static void ew_binary_walk(const struct ew_binary_kernels *k, const struct ops_call *call,
                           size_t esize)
{
        const struct ops_tensor *a = &call->in[0], *b = &call->in[1], *out = &call->out[0];
        int64_t sa[OPS_MAX_DIMS], sb[OPS_MAX_DIMS];
        int64_t dim[OPS_MAX_DIMS], csa[OPS_MAX_DIMS], csb[OPS_MAX_DIMS], idx[OPS_MAX_DIMS];
        int64_t n = ops_tensor_numel(out), done, oa = 0, ob = 0;
        char *o = out->data;
        const char *pa = a->data, *pb = b->data;
        int d, j, nd = 0;

        ops_broadcast_strides(a, out, sa);
        ops_broadcast_strides(b, out, sb);
        /* dim[0] is the innermost after this loop. */
        for (d = out->ndim - 1; d >= 0; d--) {
                if (out->dims[d] == 1)
                        continue;
                if (nd && sa[d] == csa[nd - 1] * dim[nd - 1] &&
                    sb[d] == csb[nd - 1] * dim[nd - 1]) {
                        dim[nd - 1] *= out->dims[d];
                        continue;
                }
                dim[nd] = out->dims[d];
                csa[nd] = sa[d];
                csb[nd] = sb[d];
                idx[nd] = 0;
                nd++;
        }
        if (!nd) {
                dim[0] = 1;
                csa[0] = csb[0] = 0;
                nd = 1;
        }
        for (done = 0; done < n; done += dim[0]) {
                k->strided(o + (size_t)done * esize, pa + (size_t)oa * esize, csa[0],
                           pb + (size_t)ob * esize, csb[0], dim[0]);
                for (j = 1; j < nd; j++) {
                        oa += csa[j];
                        ob += csb[j];
                        if (++idx[j] < dim[j])
                                break;
                        oa -= csa[j] * dim[j];
                        ob -= csb[j] * dim[j];
                        idx[j] = 0;
                }
        }
}

static void ew_binary_compute(const struct ew_binary_kernels *table, const struct ops_call *call)
{
        const struct ops_tensor *a = &call->in[0], *b = &call->in[1], *out = &call->out[0];
        const struct ew_binary_kernels *k = &table[ew_kind_of(a->dtype)];
        size_t esize = proto_dtype_size(a->dtype);
        int64_t n = ops_tensor_numel(out), na = ops_tensor_numel(a), nb = ops_tensor_numel(b);

        if (!n)
                return;
        /* Equal element counts mean no dim was expanded, so the layouts coincide. */
        if (k->vv && !ew_overlap(out->data, n, a->data, na, esize) &&
            !ew_overlap(out->data, n, b->data, nb, esize)) {
                if (na == n && nb == n) {
                        k->vv(out->data, a->data, b->data, (size_t)n);
                        return;
                }
                if (na == n && nb == 1) {
                        k->vs(out->data, a->data, b->data, (size_t)n);
                        return;
                }
                if (na == 1 && nb == n) {
                        k->sv(out->data, a->data, b->data, (size_t)n);
                        return;
                }
        }
        ew_binary_walk(k, call, esize);
}

static int ew_has_zero(const struct ops_tensor *t)
{
        int64_t i, n = ops_tensor_numel(t);

        if (t->dtype == PROTO_DTYPE_INT32) {
                const int32_t *p = t->data;

                for (i = 0; i < n; i++)
                        if (!p[i])
                                return 1;
        } else if (t->dtype == PROTO_DTYPE_INT64) {
                const int64_t *p = t->data;

                for (i = 0; i < n; i++)
                        if (!p[i])
                                return 1;
        }
        return 0;
}

static void ew_binary_cost(const struct ops_call *call, uint64_t *ret_flops,
                           uint64_t *ret_bytes)
{
        uint64_t esize = proto_dtype_size(call->in[0].dtype);
        uint64_t n = (uint64_t)ops_tensor_numel(&call->out[0]);
        uint64_t na = (uint64_t)ops_tensor_numel(&call->in[0]);
        uint64_t nb = (uint64_t)ops_tensor_numel(&call->in[1]);

        *ret_flops = n;
        *ret_bytes = ops_mul_sat(ops_add_sat(ops_add_sat(na, nb), n), esize);
}

static int ew_unary_check(const struct ops_def *def, const struct ew_unary_kernels *table,
                          const struct ops_call *call, char *err, size_t errlen)
{
        int rc;

        rc = ops_check_common(def, call, NULL, err, errlen);
        if (rc)
                return rc;
        rc = ew_check_dtype(def, table, &call->in[0], 0, err, errlen);
        if (rc)
                return rc;
        return ops_check_output(def, call, call->in[0].dtype, &call->in[0], err, errlen);
}

static int ew_unary_run(const struct ew_unary_kernels *table, const struct ops_call *call)
{
        const struct ops_tensor *a = &call->in[0], *out = &call->out[0];
        const struct ew_unary_kernels *k = &table[ew_kind_of(a->dtype)];
        int64_t n = ops_tensor_numel(a);

        if (!n)
                return 0;
        if (k->contig && !ew_overlap(out->data, n, a->data, n, proto_dtype_size(a->dtype)))
                k->contig(out->data, a->data, (size_t)n);
        else
                k->any(out->data, a->data, (size_t)n);
        return 0;
}

/* Transcendental kernels cost several operations per element in the cost model. */
static void ew_unary_cost_n(const struct ops_call *call, uint64_t per_elem,
                            uint64_t *ret_flops, uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->in[0]);

        *ret_flops = ops_mul_sat(n, per_elem);
        *ret_bytes = ops_mul_sat(2 * n, proto_dtype_size(call->in[0].dtype));
}

static int add_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_binary_check(&ops_add_def, call, err, errlen);
}

static int sub_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_binary_check(&ops_sub_def, call, err, errlen);
}

static int mul_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_binary_check(&ops_mul_def, call, err, errlen);
}

static int div_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_binary_check(&ops_div_def, call, err, errlen);
}

static int add_run(const struct ops_call *call, char *err, size_t errlen)
{
        ew_binary_compute(add_kernels, call);
        return 0;
}

static int sub_run(const struct ops_call *call, char *err, size_t errlen)
{
        ew_binary_compute(sub_kernels, call);
        return 0;
}

static int mul_run(const struct ops_call *call, char *err, size_t errlen)
{
        ew_binary_compute(mul_kernels, call);
        return 0;
}

static int div_run(const struct ops_call *call, char *err, size_t errlen)
{
        /* Checked up front so that nothing is written when the call fails. */
        if (ew_has_zero(&call->in[1]))
                return ops_fail(err, errlen, -EDOM, "Div: integer division by zero");
        ew_binary_compute(div_kernels, call);
        return 0;
}

static int relu_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_unary_check(&ops_relu_def, relu_kernels, call, err, errlen);
}

static int sigmoid_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_unary_check(&ops_sigmoid_def, sigmoid_kernels, call, err, errlen);
}

static int tanh_check(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_unary_check(&ops_tanh_def, tanh_kernels, call, err, errlen);
}

static int relu_run(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_unary_run(relu_kernels, call);
}

static int sigmoid_run(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_unary_run(sigmoid_kernels, call);
}

static int tanh_run(const struct ops_call *call, char *err, size_t errlen)
{
        return ew_unary_run(tanh_kernels, call);
}

static void relu_cost(const struct ops_call *call, uint64_t *ret_flops, uint64_t *ret_bytes)
{
        ew_unary_cost_n(call, 1, ret_flops, ret_bytes);
}

static void transcendental_cost(const struct ops_call *call, uint64_t *ret_flops,
                                uint64_t *ret_bytes)
{
        ew_unary_cost_n(call, 8, ret_flops, ret_bytes);
}

const struct ops_def ops_add_def = {
        "Add", 2, 2, 1, OPS_ENGINE_VECTOR, add_check, add_run, ew_binary_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

const struct ops_def ops_sub_def = {
        "Sub", 2, 2, 1, OPS_ENGINE_VECTOR, sub_check, sub_run, ew_binary_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

const struct ops_def ops_mul_def = {
        "Mul", 2, 2, 1, OPS_ENGINE_VECTOR, mul_check, mul_run, ew_binary_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

const struct ops_def ops_div_def = {
        "Div", 2, 2, 1, OPS_ENGINE_VECTOR, div_check, div_run, ew_binary_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

const struct ops_def ops_relu_def = {
        "Relu", 1, 1, 1, OPS_ENGINE_VECTOR, relu_check, relu_run, relu_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

const struct ops_def ops_sigmoid_def = {
        "Sigmoid", 1, 1, 1, OPS_ENGINE_VECTOR, sigmoid_check, sigmoid_run, transcendental_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

const struct ops_def ops_tanh_def = {
        "Tanh", 1, 1, 1, OPS_ENGINE_VECTOR, tanh_check, tanh_run, transcendental_cost, OPS_FLAG_ELEMENTWISE, NULL, 0, NULL,
};

/* Activation functions: Relu, LeakyRelu, PRelu, Elu, Selu, Celu, Sigmoid, HardSigmoid,
 * HardSwish, Softplus, Softsign, Mish, ThresholdedRelu, Shrink, Gelu (opset 20: exact
 * through erf, or approximate="tanh") and Clip (opset 6 with min/max attributes, opset 11 on
 * with optional min/max inputs).
 *
 * Float attributes are converted to the element type once per kernel call. Sigmoid and
 * Softplus only exponentiate -|x|, so large |x| cannot overflow into inf/inf. Integer
 * PRelu multiplies with wraparound; integer Shrink computes in double and converts back
 * like Cast. Clip is min(max(x, lo), hi), so lo > hi gives hi everywhere (as
 * ONNX specifies) and NaN stays NaN; an omitted bound is the dtype's lowest or highest
 * value. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include "rows.h"
#include "ew.h"

/* ------------------------------------------------------------------ parameterless */

#define F_RELU(T, x) ((x) < 0 ? (T)0 : (x))
/* One exp of -|x| serves both branches (libm calls are not merged: they may set errno). */
#define F_SIGMOID_G(T, x)                                                                      \
        ({                                                                                     \
                T e_ = exp(-fabs(x));                                                          \
                (x) >= 0 ? (T)1 / ((T)1 + e_) : e_ / ((T)1 + e_);                              \
        })
/* float32 (and float16 / bfloat16, computed in float) through the vectorizable ew_sigmoidf */
#define F_SIGMOID(T, x)                                                                        \
        __builtin_choose_expr(__builtin_types_compatible_p(T, float), ew_sigmoidf((float)(x)), \
                              F_SIGMOID_G(T, x))
/* alpha 1/6, beta 1/2 */
#define F_HARDSWISH(T, x)                                                                      \
        ((x) * ((x) / (T)6 + (T)0.5 < 0 ? (T)0 : (x) / (T)6 + (T)0.5 > 1 ? (T)1                \
                                                                         : (x) / (T)6 + (T)0.5))
/* log(1 + e^x) = max(x, 0) + log(1 + e^-|x|) */
#define F_SOFTPLUS(T, x) (((x) > 0 ? (x) : (T)0) + log1p(exp(-fabs(x))))
#define F_SOFTSIGN(T, x) ((x) / ((T)1 + fabs(x)))
#define F_MISH(T, x) ((x) * tanh(F_SOFTPLUS(T, x)))

EW_FOR_FLOATS(EW_UNARY_SAME, relu, F_RELU)
EW_FOR_SINTS(EW_UNARY_SAME, relu, F_RELU)
EW_FOR_FLOATS(EW_UNARY_SAME, sigmoid, F_SIGMOID)
EW_FOR_FLOATS(EW_UNARY_SAME, hardswish, F_HARDSWISH)
EW_FOR_FLOATS(EW_UNARY_SAME, softplus, F_SOFTPLUS)
EW_FOR_FLOATS(EW_UNARY_SAME, softsign, F_SOFTSIGN)
EW_FOR_FLOATS(EW_UNARY_SAME, mish, F_MISH)

static const ew_kernel relu_k[EW_NTYPES] = { EW_TAB_FLOATS(relu), EW_TAB_SINTS(relu) };
EW_VMATH_F32(sigmoid_vf32, OPS_VM_SIGMOID, sigmoid_f32)
static const ew_kernel sigmoid_k[EW_NTYPES] = { [EW_F32] = sigmoid_vf32,
                                                [EW_F64] = sigmoid_f64 };
static const ew_kernel hardswish_k[EW_NTYPES] = { EW_TAB_FLOATS(hardswish) };
EW_VMATH_F32(softplus_vf32, OPS_VM_SOFTPLUS, softplus_f32)
static const ew_kernel softplus_k[EW_NTYPES] = { [EW_F32] = softplus_vf32,
                                                 [EW_F64] = softplus_f64 };
static const ew_kernel softsign_k[EW_NTYPES] = { EW_TAB_FLOATS(softsign) };
EW_VMATH_F32(mish_vf32, OPS_VM_MISH, mish_f32)
static const ew_kernel mish_k[EW_NTYPES] = { [EW_F32] = mish_vf32,
                                             [EW_F64] = mish_f64 };

#define EW_ACT_OP(sym, opname, mask, tab, cost)                                                \
        static const struct ew_op sym = {                                                      \
                .name = opname, .min_in = 1, .max_in = 1, .types = mask, .k = tab,             \
                .flops = cost,                                                                 \
        };

EW_ACT_OP(relu_op, "Relu", EW_FLOATS | EW_SINTS, relu_k, 1)
EW_ACT_OP(sigmoid_op, "Sigmoid", EW_FLOATS, sigmoid_k, 8)
EW_ACT_OP(hardswish_op, "HardSwish", EW_FLOAT3, hardswish_k, 4)
EW_ACT_OP(softplus_op, "Softplus", EW_FLOAT3, softplus_k, 16)
EW_ACT_OP(softsign_op, "Softsign", EW_FLOAT3, softsign_k, 4)
EW_ACT_OP(mish_op, "Mish", EW_FLOAT3, mish_k, 24)

/* Relu and Sigmoid are core (wire) operators. Version 6 dropped consumed_inputs; 13 and 14
 * added dtypes. */
EW_DEFINE(ops_relu_def, "Relu", relu_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_sigmoid_def, "Sigmoid", sigmoid_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_hardswish_def, "HardSwish", hardswish_op, 1, 1, OPS_ENGINE_VECTOR, 14)
EW_DEFINE(ops_softplus_def, "Softplus", softplus_op, 1, 1, OPS_ENGINE_VECTOR, 1)
EW_DEFINE(ops_softsign_def, "Softsign", softsign_op, 1, 1, OPS_ENGINE_VECTOR, 1)
EW_DEFINE(ops_mish_def, "Mish", mish_op, 1, 1, OPS_ENGINE_VECTOR, 18)

/* --------------------------------------------------------- with float attributes */

/* P.a, P.b, P.c are the attributes named in the description, in order. */
#define F_LEAKY(T, x) ((x) < 0 ? (T)P.a * (x) : (x))
#define F_ELU(T, x) ((x) < 0 ? (T)P.a * expm1(x) : (x))
/* alpha, gamma */
#define F_SELU(T, x) ((x) > 0 ? (T)P.b * (x) : (T)P.b * ((T)P.a * exp(x) - (T)P.a))
#define F_CELU(T, x) ((x) > 0 ? (x) : (T)P.a * expm1((x) / (T)P.a))
/* alpha, beta */
#define F_HARDSIGMOID(T, x)                                                                    \
        ((T)P.a * (x) + (T)P.b < 0 ? (T)0                                                     \
                                   : (T)P.a * (x) + (T)P.b > 1 ? (T)1 : (T)P.a * (x) + (T)P.b)
#define F_THRESHOLDED(T, x) ((x) > (T)P.a ? (x) : (T)0)
/* lambd, bias */
#define F_SHRINK(T, x)                                                                         \
        ((x) < -(T)P.a ? (x) + (T)P.b : (x) > (T)P.a ? (x) - (T)P.b : (T)0)

EW_FOR_FLOATS(EW_UNARY_SAME, leaky, F_LEAKY)
EW_FOR_FLOATS(EW_UNARY_SAME, elu, F_ELU)
EW_FOR_FLOATS(EW_UNARY_SAME, selu, F_SELU)
EW_FOR_FLOATS(EW_UNARY_SAME, celu, F_CELU)
EW_FOR_FLOATS(EW_UNARY_SAME, hardsigmoid, F_HARDSIGMOID)
EW_FOR_FLOATS(EW_UNARY_SAME, thresholded, F_THRESHOLDED)
EW_FOR_FLOATS(EW_UNARY_SAME, shrink, F_SHRINK)

static const ew_kernel leaky_k[EW_NTYPES] = { EW_TAB_FLOATS(leaky) };
static const ew_kernel elu_k[EW_NTYPES] = { EW_TAB_FLOATS(elu) };
static const ew_kernel selu_k[EW_NTYPES] = { EW_TAB_FLOATS(selu) };
static const ew_kernel celu_k[EW_NTYPES] = { EW_TAB_FLOATS(celu) };
static const ew_kernel hardsigmoid_k[EW_NTYPES] = { EW_TAB_FLOATS(hardsigmoid) };
static const ew_kernel thresholded_k[EW_NTYPES] = { EW_TAB_FLOATS(thresholded) };
static const ew_kernel shrink_k[EW_NTYPES] = { EW_TAB_FLOATS(shrink) };

static int celu_attr(const struct ew_op *op, const struct ops_call *call, struct ew_params *p,
                     char *err, size_t errlen)
{
        if (p->a == 0)
                return ops_fail(err, errlen, -EINVAL, "Celu: attribute 'alpha' must not be 0");
        return 0;
}

/* Integer Shrink computes in double. */
static int shrink_prepare(const struct ew_op *op, const struct ops_call *call,
                          struct ew_plan *pl, char *err, size_t errlen)
{
        int t = ew_type_of(call->in[0].dtype);

        if (EW_M(t) & EW_INTS) {
                pl->k = shrink_f64;
                pl->ct[0] = pl->cto = PROTO_DTYPE_FLOAT64;
        }
        return 0;
}

static const struct ew_op leaky_op = {
        .name = "LeakyRelu", .min_in = 1, .max_in = 1, .types = EW_FLOATS, .k = leaky_k,
        .fnames = { "alpha" }, .fdefs = { 0.01 }, .flops = 2,
};

static const struct ew_op elu_op = {
        .name = "Elu", .min_in = 1, .max_in = 1, .types = EW_FLOAT3, .k = elu_k,
        .fnames = { "alpha" }, .fdefs = { 1.0 }, .flops = 8,
};

static const struct ew_op selu_op = {
        .name = "Selu", .min_in = 1, .max_in = 1, .types = EW_FLOAT3, .k = selu_k,
        .fnames = { "alpha", "gamma" },
        .fdefs = { 1.67326319217681884765625, 1.05070102214813232421875 }, .flops = 8,
};

static const struct ew_op celu_op = {
        .name = "Celu", .min_in = 1, .max_in = 1, .types = EW_FLOAT3, .k = celu_k,
        .fnames = { "alpha" }, .fdefs = { 1.0 }, .attr = celu_attr, .flops = 8,
};

static const struct ew_op hardsigmoid_op = {
        .name = "HardSigmoid", .min_in = 1, .max_in = 1, .types = EW_FLOAT3, .k = hardsigmoid_k,
        .fnames = { "alpha", "beta" }, .fdefs = { 0.2, 0.5 }, .flops = 3,
};

static const struct ew_op thresholded_op = {
        .name = "ThresholdedRelu", .min_in = 1, .max_in = 1, .types = EW_FLOAT3,
        .k = thresholded_k, .fnames = { "alpha" }, .fdefs = { 1.0 }, .flops = 1,
};

static const struct ew_op shrink_op = {
        .name = "Shrink", .min_in = 1, .max_in = 1, .types = EW_FLOAT3 | EW_INTS, .k = shrink_k,
        .fnames = { "lambd", "bias" }, .fdefs = { 0.5, 0.0 }, .prepare = shrink_prepare,
        .flops = 2,
};

/* LeakyRelu-16 only added bfloat16. */
EW_DEFINE(ops_leakyrelu_def, "LeakyRelu", leaky_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_elu_def, "Elu", elu_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_selu_def, "Selu", selu_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_celu_def, "Celu", celu_op, 1, 1, OPS_ENGINE_VECTOR, 12)
EW_DEFINE(ops_hardsigmoid_def, "HardSigmoid", hardsigmoid_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_thresholdedrelu_def, "ThresholdedRelu", thresholded_op, 1, 1,
          OPS_ENGINE_VECTOR, 10)
EW_DEFINE(ops_shrink_def, "Shrink", shrink_op, 1, 1, OPS_ENGINE_VECTOR, 9)

/* ----------------------------------------------------------------------------- Gelu */

/* P.i: approximate="tanh" (1) or "none" (0). */
#define F_GELU(T, x)                                                                           \
        (P.i ? (T)0.5 * (x) *                                                                  \
                       ((T)1 + tanh((T)0.7978845608028654 * ((x) + (T)0.044715 * (x) * (x) * (x)))) \
             : (T)0.5 * (x) * ((T)1 + erf((x) * (T)0.7071067811865476)))

EW_FOR_FLOATS(EW_UNARY_SAME, gelu, F_GELU)

/* float32: the erf form by the polynomial kernel (ops/rows.h), the tanh form through
 * vmath's tanh a chunk at a time through a stack buffer (its argument is not x itself).
 * Without vmath (NPUD_VMATH=0) both take the scalar path. */
static void gelu_vf32(void *o, const void *const *in, const int64_t *st, int64_t n,
                      const struct ew_params *p)
{
        ops_vm_fn f = ops_vmath_get(p->i ? OPS_VM_TANH : OPS_VM_ERF);
        const float *x = in[0];
        float *y = o, t[256];

        if (st[0] != 1 || !(p->fast || o == in[0]) || !f) {
                gelu_f32(o, in, st, n, p);
                return;
        }
        if (!p->i) {
                ops_gelu_erf(y, x, n);
                return;
        }
        for (int64_t off = 0; off < n; off += 256) {
                int64_t m = n - off < 256 ? n - off : 256;
                for (int64_t k = 0; k < m; k++) {
                        float v = x[off + k];
                        t[k] = 0.7978845608028654f * (v + 0.044715f * v * v * v);
                }
                f(t, t, (size_t)m);
                for (int64_t k = 0; k < m; k++)
                        y[off + k] = 0.5f * x[off + k] * (1.0f + t[k]);
        }
}

static const ew_kernel gelu_k[EW_NTYPES] = { [EW_F32] = gelu_vf32, [EW_F64] = gelu_f64 };
static const char *const gelu_attrs[] = { "approximate", NULL };

static int gelu_attr(const struct ew_op *op, const struct ops_call *call, struct ew_params *p,
                     char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, "approximate");

        p->i = 0;
        if (!a)
                return 0;
        if (a->type == OPS_ATTR_STRING && a->s && strcmp(a->s, "tanh") == 0)
                p->i = 1;
        else if (a->type != OPS_ATTR_STRING || !a->s || strcmp(a->s, "none") != 0)
                return ops_fail(err, errlen, -EINVAL,
                                "Gelu: attribute 'approximate' must be 'none' or 'tanh'");
        return 0;
}

static const struct ew_op gelu_op = {
        .name = "Gelu", .min_in = 1, .max_in = 1, .types = EW_FLOAT3, .k = gelu_k,
        .attrs = gelu_attrs, .attr = gelu_attr, .flops = 12,
};

EW_DEFINE(ops_gelu_def, "Gelu", gelu_op, 1, 1, OPS_ENGINE_VECTOR, 20)

/* ---------------------------------------------------------------------------- PRelu */

#define F_PRELU(T, x, y) ((x) < 0 ? (y) * (x) : (x))
#define S_PRELU(T, x, y) ((x) < 0 ? EW_WMUL(T, y, x) : (x))
#define U_PRELU(T, x, y) ((void)(y), (x))

EW_FOR_FLOATS(EW_BINARY_SAME, prelu, F_PRELU)
EW_BINARY(prelu_i32, int32_t, int32_t, S_PRELU)
EW_BINARY(prelu_i64, int64_t, int64_t, S_PRELU)
EW_BINARY(prelu_u32, uint32_t, uint32_t, U_PRELU)
EW_BINARY(prelu_u64, uint64_t, uint64_t, U_PRELU)

static const ew_kernel prelu_k[EW_NTYPES] = {
        EW_TAB_FLOATS(prelu), [EW_I32] = prelu_i32, [EW_I64] = prelu_i64,
        [EW_U32] = prelu_u32, [EW_U64] = prelu_u64,
};

/* The slope broadcasts to X (unidirectionally): the output has X's shape. */
static const struct ew_op prelu_op = {
        .name = "PRelu", .min_in = 2, .max_in = 2,
        .types = EW_FLOATS | EW_M(EW_I32) | EW_M(EW_I64) | EW_M(EW_U32) | EW_M(EW_U64),
        .same = 3, .shape = EW_FIRST, .k = prelu_k, .flops = 2,
};

/* PRelu-7 defined the unidirectional broadcast; 9 and 16 added dtypes. */
EW_DEFINE(ops_prelu_def, "PRelu", prelu_op, 2, 2, OPS_ENGINE_VECTOR, 7)

/* ----------------------------------------------------------------------------- Clip */

#define EW_MAXOF(x, y) ((x) < (y) ? (y) : (x))
#define F_CLIP(x, lo, hi) (EW_MAXOF(x, lo) > (hi) ? (hi) : EW_MAXOF(x, lo))
#define EW_CLIP_INST(sfx, T, op) EW_TERNARY(op##_##sfx, T, T, F_CLIP)

EW_FOR_NUMERIC(EW_CLIP_INST, clip)

static const ew_kernel clip_k[EW_NTYPES] = { EW_TAB_NUMERIC(clip) };

/* Omitted bounds become the compute type's lowest and highest values. */
static int clip11_prepare(const struct ew_op *op, const struct ops_call *call,
                          struct ew_plan *pl, char *err, size_t errlen)
{
        if (call->nin < 2 || !call->in[1].dtype)
                ew_plan_scalar(pl, 1, 0, pl->ct[0], -INFINITY);
        if (call->nin < 3 || !call->in[2].dtype)
                ew_plan_scalar(pl, 2, 1, pl->ct[0], INFINITY);
        return 0;
}

/* Clip-6: the bounds are attributes (P.a, P.b). */
static int clip6_prepare(const struct ew_op *op, const struct ops_call *call,
                         struct ew_plan *pl, char *err, size_t errlen)
{
        ew_plan_scalar(pl, 1, 0, pl->ct[0], pl->p.a);
        ew_plan_scalar(pl, 2, 1, pl->ct[0], pl->p.b);
        return 0;
}

static const struct ew_op clip11_op = {
        .name = "Clip", .min_in = 1, .max_in = 3, .types = EW_NUMERIC, .same = 7,
        .shape = EW_FIRST, .k = clip_k, .prepare = clip11_prepare, .flops = 2,
};

static const struct ew_op clip6_op = {
        .name = "Clip", .min_in = 1, .max_in = 1, .types = EW_FLOAT3, .shape = EW_FIRST,
        .k = clip_k, .fnames = { "min", "max" }, .fdefs = { -FLT_MAX, FLT_MAX },
        .prepare = clip6_prepare, .flops = 2,
};

/* Clip-11 made the bounds optional inputs; 12 and 13 added dtypes. The newer definition is
 * registered first: it is the one a lookup by name (the wire) finds. */
EW_DEFINE(ops_clip_def, "Clip", clip11_op, 1, 3, OPS_ENGINE_VECTOR, 11)
EW_DEFINE(ops_clip6_def, "Clip", clip6_op, 1, 1, OPS_ENGINE_VECTOR, 6)

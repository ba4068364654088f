/* Unary math elementwise operators: Abs, Neg, Sign, Exp, Log, Sqrt, Reciprocal, Floor,
 * Ceil, Round, the trigonometric and hyperbolic functions and their inverses, Erf, Tanh,
 * the float predicates IsNaN and IsInf, and CastLike.
 *
 * Floats run in their own precision through <tgmath.h> (float32 calls expf, float64 exp);
 * float16 and bfloat16 through float32. Abs and Neg of the most negative integer wrap to
 * itself. Round rounds halves to even (the default rounding mode). Sign keeps NaN and the
 * sign of zero. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include "convert.h"
#include "ew.h"

#define F_ABS(T, x) fabs(x)
#define S_ABS(T, x) ((x) < 0 ? EW_WNEG(T, x) : (x))
#define U_ID(T, x) (x)
#define F_NEG(T, x) (-(x))
#define S_NEG(T, x) EW_WNEG(T, x)
#define F_SIGN(T, x) ((x) > 0 ? (T)1 : (x) < 0 ? (T)-1 : (x))
#define S_SIGN(T, x) ((T)(((x) > 0) - ((x) < 0)))
#define U_SIGN(T, x) ((T)((x) > 0))

EW_FOR_FLOATS(EW_UNARY_SAME, abs, F_ABS)
EW_FOR_SINTS(EW_UNARY_SAME, abs, S_ABS)
EW_FOR_UINTS(EW_UNARY_SAME, abs, U_ID)
EW_FOR_FLOATS(EW_UNARY_SAME, neg, F_NEG)
EW_FOR_SINTS(EW_UNARY_SAME, neg, S_NEG)
EW_FOR_FLOATS(EW_UNARY_SAME, sign, F_SIGN)
EW_FOR_SINTS(EW_UNARY_SAME, sign, S_SIGN)
EW_FOR_UINTS(EW_UNARY_SAME, sign, U_SIGN)

static const ew_kernel abs_k[EW_NTYPES] = { EW_TAB_NUMERIC(abs) };
static const ew_kernel neg_k[EW_NTYPES] = { EW_TAB_FLOATS(neg), EW_TAB_SINTS(neg) };
static const ew_kernel sign_k[EW_NTYPES] = { EW_TAB_NUMERIC(sign) };

#define EW_UNARY_OP(sym, opname, mask, tab, cost)                                              \
        static const struct ew_op sym = {                                                      \
                .name = opname, .min_in = 1, .max_in = 1, .types = mask, .k = tab,             \
                .flops = cost,                                                                 \
        };

EW_UNARY_OP(abs_op, "Abs", EW_NUMERIC, abs_k, 1)
EW_UNARY_OP(neg_op, "Neg", EW_FLOATS | EW_SINTS, neg_k, 1)
EW_UNARY_OP(sign_op, "Sign", EW_NUMERIC, sign_k, 1)

/* Version 6 dropped the legacy consumed_inputs attribute; 13 added bfloat16. */
EW_DEFINE(ops_abs_def, "Abs", abs_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_neg_def, "Neg", neg_op, 1, 1, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_sign_def, "Sign", sign_op, 1, 1, OPS_ENGINE_VECTOR, 9)

/* A float-only function: kernels for float32 and float64, the definition `sym`. */
#define EW_MATH(kname, sym, opname, mask, F, cost, since)                                      \
        EW_FOR_FLOATS(EW_UNARY_SAME, kname, F)                                                 \
        static const ew_kernel kname##_k[EW_NTYPES] = { EW_TAB_FLOATS(kname) };                \
        EW_UNARY_OP(kname##_op, opname, mask, kname##_k, cost)                                 \
        EW_DEFINE(sym, opname, kname##_op, 1, 1, OPS_ENGINE_VECTOR, since)

/* The same with float32 through vmath's function vm. */
#define EW_MATH_V(kname, sym, opname, mask, F, cost, since, vm)                                \
        EW_FOR_FLOATS(EW_UNARY_SAME, kname, F)                                                 \
        EW_VMATH_F32(kname##_vf32, vm, kname##_f32)                                            \
        static const ew_kernel kname##_k[EW_NTYPES] = { [EW_F32] = kname##_vf32,               \
                                                        [EW_F64] = kname##_f64 };              \
        EW_UNARY_OP(kname##_op, opname, mask, kname##_k, cost)                                 \
        EW_DEFINE(sym, opname, kname##_op, 1, 1, OPS_ENGINE_VECTOR, since)

#define F_EXP(T, x) exp(x)
#define F_LOG(T, x) log(x)
#define F_SQRT(T, x) sqrt(x)
#define F_RECIP(T, x) ((T)1 / (x))
#define F_FLOOR(T, x) floor(x)
#define F_CEIL(T, x) ceil(x)
#define F_ROUND(T, x) rint(x)
#define F_SIN(T, x) sin(x)
#define F_COS(T, x) cos(x)
#define F_TAN(T, x) tan(x)
#define F_ASIN(T, x) asin(x)
#define F_ACOS(T, x) acos(x)
#define F_ATAN(T, x) atan(x)
#define F_SINH(T, x) sinh(x)
#define F_COSH(T, x) cosh(x)
#define F_ASINH(T, x) asinh(x)
#define F_ACOSH(T, x) acosh(x)
#define F_ATANH(T, x) atanh(x)
#define F_ERF(T, x) erf(x)
/* float32 through the vectorizable ew_tanhf (ew.h) */
#define F_TANH(T, x)                                                                           \
        __builtin_choose_expr(__builtin_types_compatible_p(T, float), ew_tanhf((float)(x)), tanh(x))

EW_MATH_V(uexp, ops_exp_def, "Exp", EW_FLOATS, F_EXP, 8, 6, OPS_VM_EXP)
EW_MATH_V(ulog, ops_log_def, "Log", EW_FLOATS, F_LOG, 8, 6, OPS_VM_LOG)
EW_MATH(usqrt, ops_sqrt_def, "Sqrt", EW_FLOATS, F_SQRT, 4, 6)
EW_MATH(urecip, ops_reciprocal_def, "Reciprocal", EW_FLOATS, F_RECIP, 4, 6)
EW_MATH(ufloor, ops_floor_def, "Floor", EW_FLOATS, F_FLOOR, 1, 6)
EW_MATH(uceil, ops_ceil_def, "Ceil", EW_FLOATS, F_CEIL, 1, 6)
EW_MATH(uround, ops_round_def, "Round", EW_FLOAT3, F_ROUND, 1, 11)
EW_MATH_V(usin, ops_sin_def, "Sin", EW_FLOAT3, F_SIN, 8, 7, OPS_VM_SIN)
EW_MATH_V(ucos, ops_cos_def, "Cos", EW_FLOAT3, F_COS, 8, 7, OPS_VM_COS)
EW_MATH_V(utan, ops_tan_def, "Tan", EW_FLOAT3, F_TAN, 8, 7, OPS_VM_TAN)
EW_MATH_V(uasin, ops_asin_def, "Asin", EW_FLOAT3, F_ASIN, 8, 7, OPS_VM_ASIN)
EW_MATH_V(uacos, ops_acos_def, "Acos", EW_FLOAT3, F_ACOS, 8, 7, OPS_VM_ACOS)
EW_MATH_V(uatan, ops_atan_def, "Atan", EW_FLOAT3, F_ATAN, 8, 7, OPS_VM_ATAN)
EW_MATH(usinh, ops_sinh_def, "Sinh", EW_FLOAT3, F_SINH, 8, 9)
EW_MATH(ucosh, ops_cosh_def, "Cosh", EW_FLOAT3, F_COSH, 8, 9)
EW_MATH_V(uasinh, ops_asinh_def, "Asinh", EW_FLOAT3, F_ASINH, 8, 9, OPS_VM_ASINH)
EW_MATH_V(uacosh, ops_acosh_def, "Acosh", EW_FLOAT3, F_ACOSH, 8, 9, OPS_VM_ACOSH)
EW_MATH_V(uatanh, ops_atanh_def, "Atanh", EW_FLOAT3, F_ATANH, 8, 9, OPS_VM_ATANH)
EW_MATH_V(uerf, ops_erf_def, "Erf", EW_FLOATS, F_ERF, 8, 9, OPS_VM_ERF)
/* One of the wire's core operators. */
EW_MATH_V(utanh, ops_tanh_def, "Tanh", EW_FLOATS, F_TANH, 8, 6, OPS_VM_TANH)

/* ------------------------------------------------------------------- IsNaN, IsInf */

#define F_ISNAN(T, x) (isnan(x) != 0)
/* P.i: detect_positive, P.j: detect_negative */
#define F_ISINF(T, x) (isinf(x) && ((x) > 0 ? P.i != 0 : P.j != 0))

EW_FOR_FLOATS(EW_UNARY_BOOL, unan, F_ISNAN)
EW_FOR_FLOATS(EW_UNARY_BOOL, uinf, F_ISINF)

static const ew_kernel unan_k[EW_NTYPES] = { EW_TAB_FLOATS(unan) };
static const ew_kernel uinf_k[EW_NTYPES] = { EW_TAB_FLOATS(uinf) };

static const char *const isinf_attrs[] = { "detect_negative", "detect_positive", NULL };

static int isinf_attr(const struct ew_op *op, const struct ops_call *call, struct ew_params *p,
                      char *err, size_t errlen)
{
        int rc = ew_attr_int(op, call, "detect_positive", 1, &p->i, err, errlen);

        return rc ? rc : ew_attr_int(op, call, "detect_negative", 1, &p->j, err, errlen);
}

static const struct ew_op isnan_op = {
        .name = "IsNaN", .min_in = 1, .max_in = 1, .types = EW_FLOATS,
        .out = PROTO_DTYPE_BOOL, .k = unan_k, .flops = 1,
};

static const struct ew_op isinf_op = {
        .name = "IsInf", .min_in = 1, .max_in = 1, .types = EW_FLOATS,
        .out = PROTO_DTYPE_BOOL, .k = uinf_k, .attrs = isinf_attrs, .attr = isinf_attr,
        .flops = 1,
};

EW_DEFINE(ops_isnan_def, "IsNaN", isnan_op, 1, 1, OPS_ENGINE_VECTOR, 9)
EW_DEFINE(ops_isinf_def, "IsInf", isinf_op, 1, 1, OPS_ENGINE_VECTOR, 10)

/* ---------------------------------------------------------------- CastLike */

/* CastLike: Cast to the dtype of input 1 (whose shape is free); the conversion is
 * convert.c's. */
static int castlike_infer_like(const struct ew_op *op, struct ops_call *call, char *err,
                               size_t errlen)
{
        char buf[OPS_DTYPE_STR_MAX];

        if (!ops_convert_dtype_ok(call->in[1].dtype) && call->in[1].dtype != PROTO_DTYPE_STRING)
                return ops_fail(err, errlen, -EINVAL, "CastLike: input 1 has unsupported dtype %s",
                                ops_dtype_str(call->in[1].dtype, buf, sizeof(buf)));
        call->out[0].dtype = call->in[1].dtype;
        return 0;
}

static const char *const castlike_attrs[] = { "saturate", NULL };

/* Shapes only: the dtype rule is castlike_infer_like. */

static const struct ew_op castlike_op = {
        .name = "CastLike", .min_in = 2, .max_in = 2, .types = EW_ALL, .shape = EW_FIRST,
        .attrs = castlike_attrs, .infer = castlike_infer_like,
};

static int castlike_infer(const struct ops_def *def, struct ops_call *call, char *err,
                          size_t errlen)
{
        struct ops_call probe = *call;
        int rc;

        probe.in[1].ndim = 0;
        /* The element-wise rules know numbers only: a STRING source stands as float32 for
         * them (castlike_infer_like takes the target from input 1 itself). */
        if (probe.in[0].dtype == PROTO_DTYPE_STRING)
                probe.in[0].dtype = PROTO_DTYPE_FLOAT32;
        rc = ew_infer(&castlike_op, &probe, err, errlen);
        if (rc)
                return rc;
        call->out[0].dtype = probe.out[0].dtype;
        call->out[0].ndim = probe.out[0].ndim;
        memcpy(call->out[0].dims, probe.out[0].dims, sizeof(call->out[0].dims));
        return 0;
}

static int castlike_check(const struct ops_def *def, const struct ops_call *call, char *err,
                          size_t errlen)
{
        struct ops_call probe = *call;

        probe.in[1].ndim = 0;
        if (probe.in[0].dtype == PROTO_DTYPE_STRING)
                probe.in[0].dtype = PROTO_DTYPE_FLOAT32;
        return ew_check(&castlike_op, def, &probe, err, errlen);
}

static int castlike_run(const struct ops_def *def, const struct ops_call *call, char *err,
                        size_t errlen)
{
        int rc = ops_cast_strings(&call->in[0], &call->out[0], err, errlen);

        if (rc <= 0)
                return rc;
        ops_convert_tensor_opset(&call->in[0], &call->out[0], call->opset);
        return 0;
}

static void castlike_cost(const struct ops_def *def, const struct ops_call *call,
                          uint64_t *ret_flops, uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->in[0]);

        *ret_flops = n;
        *ret_bytes = ops_mul_sat(n, proto_dtype_size(call->in[0].dtype) +
                                            proto_dtype_size(call->out[0].dtype));
}

const struct ops_def ops_castlike_def = {
        .name = "CastLike", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .check = castlike_check, .run = castlike_run,
        .cost = castlike_cost,
        .flags = OPS_FLAG_ELEMENTWISE, .infer = castlike_infer, .since_version = 15,
};

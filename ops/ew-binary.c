/* Arithmetic elementwise operators with ONNX multidirectional broadcasting: Add, Sub, Mul,
 * Div, Pow, Mod, and the variadic Max, Min, Sum and Mean.
 *
 * Integer arithmetic wraps around (computed in an unsigned type) instead of overflowing.
 * ONNX leaves integer division by zero undefined: Div and Mod fail the call with -EDOM and
 * "integer division by zero" before writing anything. INT_MIN / -1 wraps to INT_MIN and
 * INT_MIN % -1 is 0, where C division would trap. Integer Pow with a negative exponent is
 * the truncated real result (1 for base 1, +-1 for base -1, 0 otherwise); integer Pow
 * multiplies modulo 2^64, then wraps to the base's width. A float exponent with an integer
 * base computes in double and converts back like Cast (truncation, saturation). Max and Min
 * propagate NaN. */
#include <errno.h>
#include <math.h>
#include <tgmath.h>

#include "ew.h"

/* --------------------------------------------------------------- Add, Sub, Mul, Div */

#define F_ADD(T, x, y) ((x) + (y))
#define F_SUB(T, x, y) ((x) - (y))
#define F_MUL(T, x, y) ((x) * (y))
#define F_DIV(T, x, y) ((x) / (y))
#define I_ADD(T, x, y) EW_WADD(T, x, y)
#define I_SUB(T, x, y) EW_WSUB(T, x, y)
#define I_MUL(T, x, y) EW_WMUL(T, x, y)
/* Divisors are nonzero (checked before); -1 negates with wraparound. */
#define S_DIV(T, x, y) ((y) == -1 ? EW_WNEG(T, x) : (T)((x) / (y)))
#define U_DIV(T, x, y) ((T)((x) / (y)))

EW_FOR_FLOATS(EW_BINARY_SAME, add, F_ADD)
EW_FOR_INTS(EW_BINARY_SAME, add, I_ADD)
EW_FOR_FLOATS(EW_BINARY_SAME, sub, F_SUB)
EW_FOR_INTS(EW_BINARY_SAME, sub, I_SUB)
EW_FOR_FLOATS(EW_BINARY_SAME, mul, F_MUL)
EW_FOR_INTS(EW_BINARY_SAME, mul, I_MUL)
EW_BINARY(div_f32_any, float, float, F_DIV)
EW_BINARY(div_f64_any, double, double, F_DIV)
EW_FOR_SINTS(EW_BINARY_SAME, div, S_DIV)
EW_FOR_UINTS(EW_BINARY_SAME, div, U_DIV)

/* x / y for a power of two y whose reciprocal is a float too is x * (1 / y) exactly: both
 * round the same real number x * 2^-k (a NaN, an infinity or zero alike), and a multiply
 * costs a fraction of a divide. A scalar divisor (an elementwise chain's "Div by 2") takes
 * that path; any other divisor divides. */
#define EW_DIV_FLOAT(sfx, T, MANT)                                                             \
        static void div_##sfx(void *o, const void *const *in, const int64_t *st, int64_t n,   \
                              const struct ew_params *p)                                        \
        {                                                                                      \
                if (p->fast && st[0] == 1 && st[1] == 0) {                                     \
                        T y = *(const T *)in[1];                                               \
                        int e;                                                                 \
                        if (isfinite(y) && y != 0 && frexp(y, &e) == (y > 0 ? 0.5 : -0.5) &&   \
                            e > -(MANT) && e < (MANT)) {                                       \
                                mul_##sfx##_vs(o, in[0], 1 / y, (size_t)n, p);                 \
                                return;                                                        \
                        }                                                                      \
                }                                                                              \
                div_##sfx##_any(o, in, st, n, p);                                              \
        }
EW_DIV_FLOAT(f32, float, 120)
EW_DIV_FLOAT(f64, double, 1000)

static const ew_kernel add_k[EW_NTYPES] = { EW_TAB_NUMERIC(add) };
static const ew_kernel sub_k[EW_NTYPES] = { EW_TAB_NUMERIC(sub) };
static const ew_kernel mul_k[EW_NTYPES] = { EW_TAB_NUMERIC(mul) };
static const ew_kernel div_k[EW_NTYPES] = { EW_TAB_NUMERIC(div) };

static int ew_is_int(int dtype)
{
        int t = ew_type_of(dtype);

        return t >= 0 && (EW_M(t) & EW_INTS);
}

/* Integer Div and Mod: refuse zero divisors up front, so that nothing is written. */
static int div_prepare(const struct ew_op *op, const struct ops_call *call, struct ew_plan *pl,
                       char *err, size_t errlen)
{
        if (ew_is_int(call->in[1].dtype) && ew_has_zero(&call->in[1]))
                return ops_fail(err, errlen, -EDOM, "%s: integer division by zero", op->name);
        return 0;
}

#define EW_ARITH_OP(sym, opname, tab, prep)                                                    \
        static const struct ew_op sym = {                                                      \
                .name = opname, .min_in = 2, .max_in = 2, .types = EW_NUMERIC, .same = 3,      \
                .k = tab, .prepare = prep, .flops = 1,                                         \
        };

EW_ARITH_OP(add_op, "Add", add_k, NULL)
EW_ARITH_OP(sub_op, "Sub", sub_k, NULL)
EW_ARITH_OP(mul_op, "Mul", mul_k, NULL)
EW_ARITH_OP(div_op, "Div", div_k, div_prepare)

/* Opset 7 brought numpy broadcasting; 13 and 14 only added dtypes. */
EW_DEFINE(ops_add_def, "Add", add_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_sub_def, "Sub", sub_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_mul_def, "Mul", mul_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_div_def, "Div", div_op, 2, 2, OPS_ENGINE_VECTOR, 7)

/* ------------------------------------------------------------------------------ Pow */

static int64_t ew_ipow(int64_t base, int64_t e)
{
        uint64_t r = 1, b = (uint64_t)base;

        if (e < 0)
                return base == 1 ? 1 : base == -1 ? (e & 1 ? -1 : 1) : 0;
        while (e) {
                if (e & 1)
                        r *= b;
                b *= b;
                e >>= 1;
        }
        return (int64_t)r;
}

#define F_POW(T, x, y) pow(x, y)
#define I_POW(T, x, y) ew_ipow(x, y)

EW_BINARY(pow_f32, float, float, F_POW)
EW_BINARY(pow_f64, double, double, F_POW)
EW_BINARY(pow_i64, int64_t, int64_t, I_POW)

static const ew_kernel pow_k[EW_NTYPES] = { [EW_F32] = pow_f32, [EW_F64] = pow_f64 };

static int pow_infer(const struct ew_op *op, struct ops_call *call, char *err, size_t errlen)
{
        char buf[OPS_DTYPE_STR_MAX];
        int t = ew_type_of(call->in[1].dtype);

        if (t < 0 || !(EW_M(t) & EW_NUMERIC))
                return ops_fail(err, errlen, -EINVAL, "Pow: input 1 has unsupported dtype %s",
                                ops_dtype_str(call->in[1].dtype, buf, sizeof(buf)));
        return 0;
}

/* Same-dtype float32/float64 run natively; 16-bit floats with a 16- or 32-bit float
 * exponent in float; integer bases with integer exponents in int64; everything else in
 * double. The engine converts inputs and output around the kernel. */
static int pow_prepare(const struct ew_op *op, const struct ops_call *call, struct ew_plan *pl,
                       char *err, size_t errlen)
{
        int b = call->in[0].dtype, e = call->in[1].dtype, ct;

        if ((b == PROTO_DTYPE_FLOAT32 || b == PROTO_DTYPE_FLOAT64) && e == b) {
                ct = b;
                pl->k = b == PROTO_DTYPE_FLOAT32 ? pow_f32 : pow_f64;
        } else if ((b == PROTO_DTYPE_FLOAT16 || b == PROTO_DTYPE_BFLOAT16) &&
                   (e == PROTO_DTYPE_FLOAT16 || e == PROTO_DTYPE_BFLOAT16 ||
                    e == PROTO_DTYPE_FLOAT32)) {
                ct = PROTO_DTYPE_FLOAT32;
                pl->k = pow_f32;
        } else if (ew_is_int(b) && ew_is_int(e)) {
                ct = PROTO_DTYPE_INT64;
                pl->k = pow_i64;
        } else {
                ct = PROTO_DTYPE_FLOAT64;
                pl->k = pow_f64;
        }
        pl->ct[0] = pl->ct[1] = pl->cto = ct;
        return 0;
}

static const struct ew_op pow_op = {
        .name = "Pow", .min_in = 2, .max_in = 2,
        .types = EW_FLOATS | EW_M(EW_I32) | EW_M(EW_I64), .k = pow_k, .infer = pow_infer,
        .prepare = pow_prepare, .flops = 8,
};

/* Pow-7 brought broadcasting; 12 mixed base and exponent dtypes, 13 and 15 added dtypes. */
EW_DEFINE(ops_pow_def, "Pow", pow_op, 2, 2, OPS_ENGINE_VECTOR, 7)

/* ------------------------------------------------------------------------------ Mod */

/* Sign of the divisor (Python's %), for fmod = 0. */
static int64_t ew_floor_mod(int64_t x, int64_t y)
{
        int64_t r;

        if (y == -1)
                return 0;
        r = x % y;
        if (r != 0 && ((r < 0) != (y < 0)))
                r += y;
        return r;
}

#define S_MOD(T, x, y) ((T)ew_floor_mod(x, y))
#define S_FMOD(T, x, y) ((y) == -1 ? (T)0 : (T)((x) % (y)))
#define U_MOD(T, x, y) ((T)((x) % (y)))
#define F_FMOD(T, x, y) fmod(x, y)

EW_FOR_SINTS(EW_BINARY_SAME, mod, S_MOD)
EW_FOR_UINTS(EW_BINARY_SAME, mod, U_MOD)
EW_FOR_FLOATS(EW_BINARY_SAME, fmod, F_FMOD)
EW_FOR_SINTS(EW_BINARY_SAME, fmod, S_FMOD)

static const ew_kernel mod_k[EW_NTYPES] = { EW_TAB_INTS(mod) };
static const ew_kernel fmod_k[EW_NTYPES] = {
        EW_TAB_FLOATS(fmod), EW_TAB_SINTS(fmod), EW_TAB_UINTS(mod),
};

static const char *const mod_attrs[] = { "fmod", NULL };

static int mod_attr(const struct ew_op *op, const struct ops_call *call, struct ew_params *p,
                    char *err, size_t errlen)
{
        int rc = ew_attr_int(op, call, "fmod", 0, &p->i, err, errlen);

        if (rc)
                return rc;
        if (p->i != 0 && p->i != 1)
                return ops_fail(err, errlen, -EINVAL,
                                "Mod: attribute 'fmod' must be 0 or 1, not %lld",
                                (long long)p->i);
        if (!p->i && !ew_is_int(call->in[0].dtype))
                return ops_fail(err, errlen, -EINVAL,
                                "Mod: attribute 'fmod' must be 1 for floating-point inputs");
        return 0;
}

static int mod_prepare(const struct ew_op *op, const struct ops_call *call, struct ew_plan *pl,
                       char *err, size_t errlen)
{
        int t = ew_type_of(pl->ct[0]);

        pl->k = pl->p.i ? fmod_k[t] : mod_k[t];
        return div_prepare(op, call, pl, err, errlen);
}

static const struct ew_op mod_op = {
        .name = "Mod", .min_in = 2, .max_in = 2, .types = EW_NUMERIC, .same = 3, .k = fmod_k,
        .attrs = mod_attrs, .attr = mod_attr, .prepare = mod_prepare, .flops = 4,
};

EW_DEFINE(ops_mod_def, "Mod", mod_op, 2, 2, OPS_ENGINE_VECTOR, 10)

/* ------------------------------------------------------------ Max, Min, Sum, Mean */

#define EW_FOLD_CHUNK 256

/* Variadic fold o[i] = F(...F(F(in0, in1), in2)..., in{n-1}) then FIN, accumulated in a
 * local array per chunk: it cannot alias the inputs or the output (so the loops vectorize
 * and outputs aliasing inputs are fine). */
#define EW_FOLD(name, T, F, FIN)                                                               \
        static void name(void *o_, const void *const *in, const int64_t *st, int64_t n,        \
                         const struct ew_params *p)                                            \
        {                                                                                      \
                T acc[EW_FOLD_CHUNK];                                                          \
                T *o = o_;                                                                     \
                int64_t off, m, i, m32, s;                                                     \
                int k;                                                                         \
                                                                                               \
                for (off = 0; off < n; off += m) {                                             \
                        const T *a = (const T *)in[0] + off * st[0];                           \
                                                                                               \
                        m = n - off < EW_FOLD_CHUNK ? n - off : EW_FOLD_CHUNK;                 \
                        m32 = m & ~(int64_t)EW_VBLOCK;                                         \
                        for (i = 0, s = st[0]; i < m; i++)                                     \
                                acc[i] = a[i * s];                                             \
                        for (k = 1; k < p->nin; k++) {                                         \
                                const T *b = (const T *)in[k] + off * st[k];                   \
                                                                                               \
                                s = st[k];                                                     \
                                if (s == 1) {                                                  \
                                        for (i = 0; i < m32; i++)                              \
                                                acc[i] = F(T, acc[i], b[i]);                   \
                                        for (; i < m; i++)                                     \
                                                acc[i] = F(T, acc[i], b[i]);                   \
                                } else if (s == 0) {                                           \
                                        T y = *b;                                              \
                                                                                               \
                                        for (i = 0; i < m32; i++)                              \
                                                acc[i] = F(T, acc[i], y);                      \
                                        for (; i < m; i++)                                     \
                                                acc[i] = F(T, acc[i], y);                      \
                                } else {                                                       \
                                        for (i = 0; i < m; i++)                                \
                                                acc[i] = F(T, acc[i], b[i * s]);               \
                                }                                                              \
                        }                                                                      \
                        for (i = 0; i < m; i++)                                                \
                                o[off + i] = FIN(T, acc[i], p->nin);                           \
                }                                                                              \
        }

#define F_MAX(T, x, y) ((x) > (y) || isnan(x) ? (x) : (y))
#define F_MIN(T, x, y) ((x) < (y) || isnan(x) ? (x) : (y))
#define I_MAX(T, x, y) ((x) > (y) ? (x) : (y))
#define I_MIN(T, x, y) ((x) < (y) ? (x) : (y))
#define FIN_ID(T, x, n) (x)
#define FIN_MEAN(T, x, n) ((x) / (T)(n))

#define EW_FOLD_INST(sfx, T, op, F, FIN) EW_FOLD(op##_##sfx, T, F, FIN)

EW_FOR_FLOATS(EW_FOLD_INST, max, F_MAX, FIN_ID)
EW_FOR_INTS(EW_FOLD_INST, max, I_MAX, FIN_ID)
EW_FOR_FLOATS(EW_FOLD_INST, min, F_MIN, FIN_ID)
EW_FOR_INTS(EW_FOLD_INST, min, I_MIN, FIN_ID)
EW_FOR_FLOATS(EW_FOLD_INST, sum, F_ADD, FIN_ID)
EW_FOR_FLOATS(EW_FOLD_INST, mean, F_ADD, FIN_MEAN)

static const ew_kernel max_k[EW_NTYPES] = { EW_TAB_NUMERIC(max) };
static const ew_kernel min_k[EW_NTYPES] = { EW_TAB_NUMERIC(min) };
static const ew_kernel sum_k[EW_NTYPES] = { EW_TAB_FLOATS(sum) };
static const ew_kernel mean_k[EW_NTYPES] = { EW_TAB_FLOATS(mean) };

#define EW_FOLD_OP(sym, opname, mask, tab)                                                     \
        static const struct ew_op sym = {                                                      \
                .name = opname, .min_in = 1, .max_in = OPS_MAX_INPUTS, .types = mask,          \
                .same = (1u << OPS_MAX_INPUTS) - 1, .k = tab, .flops = 1,                      \
        };

EW_FOLD_OP(max_op, "Max", EW_NUMERIC, max_k)
EW_FOLD_OP(min_op, "Min", EW_NUMERIC, min_k)
EW_FOLD_OP(sum_op, "Sum", EW_FLOATS, sum_k)
EW_FOLD_OP(mean_op, "Mean", EW_FLOATS, mean_k)

/* Version 6 required equal shapes, 8 broadcasts (a superset), 12 and 13 added dtypes. */
EW_DEFINE(ops_max_def, "Max", max_op, 1, OPS_MAX_INPUTS, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_min_def, "Min", min_op, 1, OPS_MAX_INPUTS, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_sum_def, "Sum", sum_op, 1, OPS_MAX_INPUTS, OPS_ENGINE_VECTOR, 6)
EW_DEFINE(ops_mean_def, "Mean", mean_op, 1, OPS_MAX_INPUTS, OPS_ENGINE_VECTOR, 6)

/* The elementwise engine shared by elementwise.c and ew-*.c, and nothing else.
 *
 * An elementwise operator is described by a struct ew_op (which input's dtype selects the
 * kernel, which dtypes it accepts, which inputs must share that dtype, the output dtype and
 * shape rule, its attributes and a kernel per dtype). Generic infer, check, run and cost
 * functions interpret that description; EW_DEFINE turns one into a struct ops_def.
 *
 * Running a call builds a plan: the inputs, the dtype the kernel reads from each (its
 * compute type), the dtype it writes, the kernel and the attribute values. ew_apply walks
 * the output in row-major order, broadcasting every input by strides and merging dims that
 * are contiguous for all of them, and hands the kernel runs of n elements with one element
 * stride per input (0 for a broadcast input, 1 for a contiguous one). Where an input's
 * dtype differs from its compute type (float16 and bfloat16 computed in float, the mixed
 * dtypes of Pow) the run is converted in chunks of OPS_CHUNK elements through buffers on the
 * stack; so is the output.
 *
 * Kernels come from the EW_UNARY / EW_BINARY / EW_TERNARY macros: a contiguous version
 * with restrict pointers and a main loop whose trip count is a multiple of 32, which gcc
 * vectorizes at -O2, used when the strides allow it and no input overlaps the output (the
 * plan's fast flag), and a strided version that also serves outputs aliasing an input. */
#ifndef NPUD_OPS_EW_H
#define NPUD_OPS_EW_H

#include <stddef.h>
#include <stdint.h>

#include "ops-internal.h"
#include "vmath.h"
#include "wide.h"

/* gcc 12's -O2 vectorizer cost model ("very cheap") leaves loops over 64-bit elements and
 * most predicate and conversion loops scalar; the "cheap" model (the -O3 default minus
 * unrolling) vectorizes them. Only the elementwise files include this header.
 * no-trapping-math: kernels never read the floating-point exception flags, and with them
 * counted as side effects gcc keeps the selects of ew_expf & co. as branches, which stops
 * vectorization; values are the same either way (no reassociation, unlike fast-math). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=cheap", "no-trapping-math")
#endif

/* Kernel element types, the index of every kernel table. */
enum ew_type {
        EW_F32, EW_F64, EW_F16, EW_BF16,
        EW_I8, EW_I16, EW_I32, EW_I64,
        EW_U8, EW_U16, EW_U32, EW_U64,
        EW_BOOL,
        EW_NTYPES
};

#define EW_M(t) (1u << (t))
#define EW_FLOAT3 (EW_M(EW_F32) | EW_M(EW_F64) | EW_M(EW_F16))
#define EW_FLOATS (EW_FLOAT3 | EW_M(EW_BF16))
#define EW_SINTS (EW_M(EW_I8) | EW_M(EW_I16) | EW_M(EW_I32) | EW_M(EW_I64))
#define EW_UINTS (EW_M(EW_U8) | EW_M(EW_U16) | EW_M(EW_U32) | EW_M(EW_U64))
#define EW_INTS (EW_SINTS | EW_UINTS)
#define EW_NUMERIC (EW_FLOATS | EW_INTS)
#define EW_ALL (EW_NUMERIC | EW_M(EW_BOOL))

/* Attribute values and per-call flags a kernel reads. */
struct ew_params {
        double a, b, c; /* float attributes (alpha, beta, gamma, lambd, bias, ...) */
        int64_t i, j;   /* int attributes (fmod, detect_negative, detect_positive, ...) */
        int nin;        /* inputs of a variadic kernel */
        int fast;       /* no input overlaps the output: contiguous kernels may run */
};

/* n outputs at o; input k read at in[k][i * st[k]]. */
typedef void (*ew_kernel)(void *o, const void *const *in, const int64_t *st, int64_t n,
                          const struct ew_params *p);

struct ew_plan {
        int nin;
        const struct ops_tensor *in[OPS_MAX_INPUTS];
        int ct[OPS_MAX_INPUTS]; /* dtype the kernel reads from each input */
        int cto;                /* dtype the kernel writes */
        ew_kernel k;
        struct ew_params p;
        /* Scalars a prepare hook substitutes for omitted inputs (see ew_plan_scalar). */
        struct ops_tensor tmp[2];
        double tmpv[2];
};

struct ew_op;

/* Parses and validates the attributes into p (defaults where absent). */
typedef int (*ew_attr_fn)(const struct ew_op *op, const struct ops_call *call,
                          struct ew_params *p, char *err, size_t errlen);
/* Extra validation after the generic infer; may change the output dtype. */
typedef int (*ew_infer_fn)(const struct ew_op *op, struct ops_call *call, char *err,
                           size_t errlen);
/* Adjusts the generic plan before it runs (defaults, data checks, other kernels). */
typedef int (*ew_prepare_fn)(const struct ew_op *op, const struct ops_call *call,
                             struct ew_plan *pl, char *err, size_t errlen);

enum ew_shape {
        EW_BCAST = 0, /* multidirectional broadcast of every present input */
        EW_FIRST = 1, /* input 0's shape; the others broadcast to it or have one element */
};

struct ew_op {
        const char *name;
        int min_in, max_in;
        int key;          /* the input whose dtype selects the kernel */
        unsigned types;   /* EW_M() mask of the dtypes accepted there */
        unsigned same;    /* bit i: input i, when present, must have the key's dtype */
        int out;          /* output dtype; 0 = the key input's */
        int shape;        /* enum ew_shape */
        const ew_kernel *k; /* by enum ew_type; float16/bfloat16 absent: computed via float32 */
        const char *const *attrs; /* allowed attribute names, NULL-terminated; NULL = none */
        /* Float attributes read into params a, b, c with these defaults when named here
         * (before attr runs); they are allowed attributes besides attrs. */
        const char *fnames[3];
        double fdefs[3];
        ew_attr_fn attr;
        ew_infer_fn infer;
        ew_prepare_fn prepare;
        unsigned flops;   /* cost model operations per output element */
};

int ew_type_of(int dtype);      /* enum ew_type, -1 for a dtype no kernel handles */
int ew_dtype_of(int type);      /* inverse */

int ew_infer(const struct ew_op *op, struct ops_call *call, char *err, size_t errlen);
/* Attribute names against the description (its attrs and fnames, which the wire's common
 * check does not know), then ops_check_by_infer. */
int ew_check(const struct ew_op *op, const struct ops_def *def, const struct ops_call *call,
             char *err, size_t errlen);
int ew_run(const struct ew_op *op, const struct ops_call *call, char *err, size_t errlen);
void ew_cost(const struct ew_op *op, const struct ops_call *call, uint64_t *ret_flops,
             uint64_t *ret_bytes);

/* Fills the plan for the call as ew_run would (without running it). */
int ew_plan_init(const struct ew_op *op, const struct ops_call *call, struct ew_plan *pl,
                 char *err, size_t errlen);
/* 0, or -ECANCELED with a message naming op when the run context says stop (checked every
 * OPS_POLL_ELEMS elements). */
int ew_apply(const struct ew_plan *pl, const struct ops_tensor *out, const char *op, char *err,
             size_t errlen);
/* Makes plan input k a scalar of the given dtype holding v converted like Cast (so that
 * -INFINITY and INFINITY give the dtype's lowest and highest values), stored in the plan's
 * slot (0 or 1). */
void ew_plan_scalar(struct ew_plan *pl, int k, int slot, int dtype, double v);

/* Attribute readers: the default when absent, -EINVAL with a message naming the op when
 * the attribute has another type. Floats accept INT attributes too. */
int ew_attr_float(const struct ew_op *op, const struct ops_call *call, const char *name,
                  double def, double *ret, char *err, size_t errlen);
int ew_attr_int(const struct ew_op *op, const struct ops_call *call, const char *name,
                int64_t def, int64_t *ret, char *err, size_t errlen);

/* Any element of an integer tensor equal to zero (for the division checks). */
int ew_has_zero(const struct ops_tensor *t);

/* One ops_def per operator: check, infer, run and cost interpret the description `op`. */
#define EW_DEFINE(sym, opname, op, nmin, nmax, eng, since)                                  \
        static int sym##_check(const struct ops_def *d, const struct ops_call *c, char *e,     \
                               size_t l)                                                       \
        {                                                                                      \
                return ew_check(&op, d, c, e, l);                                              \
        }                                                                                      \
        static int sym##_infer(const struct ops_def *d, struct ops_call *c, char *e, size_t l) \
        {                                                                                      \
                return ew_infer(&op, c, e, l);                                                 \
        }                                                                                      \
        static int sym##_run(const struct ops_def *d, const struct ops_call *c, char *e,       \
                             size_t l)                                                         \
        {                                                                                      \
                return ew_run(&op, c, e, l);                                                   \
        }                                                                                      \
        static void sym##_cost(const struct ops_def *d, const struct ops_call *c, uint64_t *f, \
                               uint64_t *b)                                                    \
        {                                                                                      \
                ew_cost(&op, c, f, b);                                                         \
        }                                                                                      \
        const struct ops_def sym = {                                                           \
                .name = opname, .min_inputs = nmin, .max_inputs = nmax, .outputs = 1,          \
                .engine = eng,   .check = sym##_check, .run = sym##_run, .cost = sym##_cost,  \
                .flags = OPS_FLAG_ELEMENTWISE, .infer = sym##_infer, .since_version = since,   \
                .ew = &op,                                                                     \
        };

/* The family's definitions (besides the core Add, Sub, Mul, Div, Relu, Sigmoid, Tanh and
 * Cast of ops.c), in registry order: X(sym) for ops_<sym>_def. */
#define EW_FAMILY_DEFS(X)                                                                      \
        X(pow) X(mod) X(max) X(min) X(sum) X(mean)                                             \
        X(abs) X(neg) X(sign) X(exp) X(log) X(sqrt) X(reciprocal) X(floor) X(ceil) X(round)    \
        X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh) X(acosh)         \
        X(atanh) X(erf) X(isnan) X(isinf)                                                      \
        X(leakyrelu) X(prelu) X(elu) X(selu) X(celu) X(hardsigmoid) X(hardswish) X(softplus)   \
        X(softsign) X(mish) X(thresholdedrelu) X(shrink) X(clip) X(clip6) X(gelu)             \
        X(equal) X(less) X(lessorequal) X(greater) X(greaterorequal) X(and) X(or) X(xor)       \
        X(not) X(where) X(bitshift) X(castlike)

#define EW_DECLARE_DEF(sym) extern const struct ops_def ops_##sym##_def;
EW_FAMILY_DEFS(EW_DECLARE_DEF)

/* ------------------------------------------------------------------ kernel generators */

/* Main loops run a multiple of 32 iterations, which gcc's -O2 cost model needs to know
 * before it vectorizes (32 covers every vector width for every element size). */
#define EW_VBLOCK ((size_t)31)

/* The contiguous loops are built for AVX-512 and AVX2 too (wide.h). */
#define EW_WIDE OPS_WIDE

/* Unary: o[i] = F(T, x) with x = a[i]; R is the output element type. F may read P (a
 * local copy of the params, so that stores through o cannot change them). */
#define EW_UNARY(name, T, R, F)                                                                \
        EW_WIDE static void name##_c(R *restrict o, const T *restrict a, size_t n,             \
                             const struct ew_params *restrict p)                               \
        {                                                                                      \
                const struct ew_params P = *p;                                                 \
                size_t i, m = n & ~EW_VBLOCK;                                                  \
                                                                                               \
                (void)P;                                                                       \
                for (i = 0; i < m; i++) {                                                      \
                        T x = a[i];                                                            \
                        o[i] = (R)(F(T, x));                                                   \
                }                                                                              \
                for (; i < n; i++) {                                                           \
                        T x = a[i];                                                            \
                        o[i] = (R)(F(T, x));                                                   \
                }                                                                              \
        }                                                                                      \
        static void name(void *o_, const void *const *in, const int64_t *st, int64_t n,        \
                         const struct ew_params *p)                                            \
        {                                                                                      \
                const struct ew_params P = *p;                                                 \
                const T *a = in[0];                                                            \
                R *o = o_;                                                                     \
                int64_t i, s = st[0];                                                          \
                                                                                               \
                (void)P;                                                                       \
                if (p->fast && s == 1) {                                                       \
                        name##_c(o, a, (size_t)n, p);                                          \
                        return;                                                                \
                }                                                                              \
                for (i = 0; i < n; i++) {                                                      \
                        T x = a[i * s];                                                        \
                        o[i] = (R)(F(T, x));                                                   \
                }                                                                              \
        }

/* Binary: o[i] = F(T, x, y), x from input 0 and y from input 1, with fast paths for both
 * contiguous and for either one a broadcast scalar. */
#define EW_BINARY(name, T, R, F)                                                               \
        EW_WIDE static void name##_vv(R *restrict o, const T *restrict a, const T *restrict b, \
                              size_t n, const struct ew_params *restrict p)                    \
        {                                                                                      \
                const struct ew_params P = *p;                                                 \
                size_t i, m = n & ~EW_VBLOCK;                                                  \
                                                                                               \
                (void)P;                                                                       \
                for (i = 0; i < m; i++) {                                                      \
                        T x = a[i], y = b[i];                                                  \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
                for (; i < n; i++) {                                                           \
                        T x = a[i], y = b[i];                                                  \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
        }                                                                                      \
        EW_WIDE static void name##_vs(R *restrict o, const T *restrict a, T y, size_t n,       \
                              const struct ew_params *restrict p)                              \
        {                                                                                      \
                const struct ew_params P = *p;                                                 \
                size_t i, m = n & ~EW_VBLOCK;                                                  \
                                                                                               \
                (void)P;                                                                       \
                for (i = 0; i < m; i++) {                                                      \
                        T x = a[i];                                                            \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
                for (; i < n; i++) {                                                           \
                        T x = a[i];                                                            \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
        }                                                                                      \
        EW_WIDE static void name##_sv(R *restrict o, T x, const T *restrict b, size_t n,       \
                              const struct ew_params *restrict p)                              \
        {                                                                                      \
                const struct ew_params P = *p;                                                 \
                size_t i, m = n & ~EW_VBLOCK;                                                  \
                                                                                               \
                (void)P;                                                                       \
                for (i = 0; i < m; i++) {                                                      \
                        T y = b[i];                                                            \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
                for (; i < n; i++) {                                                           \
                        T y = b[i];                                                            \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
        }                                                                                      \
        static void name(void *o_, const void *const *in, const int64_t *st, int64_t n,        \
                         const struct ew_params *p)                                            \
        {                                                                                      \
                const struct ew_params P = *p;                                                 \
                const T *a = in[0], *b = in[1];                                                \
                R *o = o_;                                                                     \
                int64_t i, sa = st[0], sb = st[1];                                             \
                                                                                               \
                (void)P;                                                                       \
                if (p->fast) {                                                                 \
                        if (sa == 1 && sb == 1) {                                              \
                                name##_vv(o, a, b, (size_t)n, p);                              \
                                return;                                                        \
                        }                                                                      \
                        if (sa == 1 && sb == 0) {                                              \
                                name##_vs(o, a, *b, (size_t)n, p);                             \
                                return;                                                        \
                        }                                                                      \
                        if (sa == 0 && sb == 1) {                                              \
                                name##_sv(o, *a, b, (size_t)n, p);                             \
                                return;                                                        \
                        }                                                                      \
                }                                                                              \
                for (i = 0; i < n; i++) {                                                      \
                        T x = a[i * sa], y = b[i * sb];                                        \
                        o[i] = (R)(F(T, x, y));                                                \
                }                                                                              \
        }

/* Ternary: o[i] = F(x, y, z) with element types T0 (input 0) and T (inputs 1, 2 and the
 * output); fast paths for all contiguous and for input 0 contiguous with 1 and 2 scalars
 * (Clip's bounds). */
#define EW_TERNARY(name, T0, T, F)                                                             \
        static void name##_vvv(T *restrict o, const T0 *restrict a, const T *restrict b,       \
                               const T *restrict c, size_t n)                                  \
        {                                                                                      \
                size_t i, m = n & ~EW_VBLOCK;                                                  \
                                                                                               \
                for (i = 0; i < m; i++) {                                                      \
                        T0 x = a[i];                                                           \
                        T y = b[i], z = c[i];                                                  \
                        o[i] = F(x, y, z);                                                     \
                }                                                                              \
                for (; i < n; i++) {                                                           \
                        T0 x = a[i];                                                           \
                        T y = b[i], z = c[i];                                                  \
                        o[i] = F(x, y, z);                                                     \
                }                                                                              \
        }                                                                                      \
        static void name##_vss(T *restrict o, const T0 *restrict a, T y, T z, size_t n)        \
        {                                                                                      \
                size_t i, m = n & ~EW_VBLOCK;                                                  \
                                                                                               \
                for (i = 0; i < m; i++) {                                                      \
                        T0 x = a[i];                                                           \
                        o[i] = F(x, y, z);                                                     \
                }                                                                              \
                for (; i < n; i++) {                                                           \
                        T0 x = a[i];                                                           \
                        o[i] = F(x, y, z);                                                     \
                }                                                                              \
        }                                                                                      \
        static void name(void *o_, const void *const *in, const int64_t *st, int64_t n,        \
                         const struct ew_params *p)                                            \
        {                                                                                      \
                const T0 *a = in[0];                                                           \
                const T *b = in[1], *c = in[2];                                                \
                T *o = o_;                                                                     \
                int64_t i, sa = st[0], sb = st[1], sc = st[2];                                 \
                                                                                               \
                if (p->fast && sa == 1 && sb == 1 && sc == 1) {                                \
                        name##_vvv(o, a, b, c, (size_t)n);                                     \
                        return;                                                                \
                }                                                                              \
                if (p->fast && sa == 1 && sb == 0 && sc == 0) {                                \
                        name##_vss(o, a, *b, *c, (size_t)n);                                   \
                        return;                                                                \
                }                                                                              \
                for (i = 0; i < n; i++) {                                                      \
                        T0 x = a[i * sa];                                                      \
                        T y = b[i * sb], z = c[i * sc];                                        \
                        o[i] = F(x, y, z);                                                     \
                }                                                                              \
        }

/* Instantiation over dtype groups: M(suffix, T, ...). */
#define EW_FOR_FLOATS(M, ...) M(f32, float, __VA_ARGS__) M(f64, double, __VA_ARGS__)
#define EW_FOR_SINTS(M, ...)                                                                   \
        M(i8, int8_t, __VA_ARGS__) M(i16, int16_t, __VA_ARGS__)                                \
        M(i32, int32_t, __VA_ARGS__) M(i64, int64_t, __VA_ARGS__)
#define EW_FOR_UINTS(M, ...)                                                                   \
        M(u8, uint8_t, __VA_ARGS__) M(u16, uint16_t, __VA_ARGS__)                              \
        M(u32, uint32_t, __VA_ARGS__) M(u64, uint64_t, __VA_ARGS__)
#define EW_FOR_INTS(M, ...) EW_FOR_SINTS(M, __VA_ARGS__) EW_FOR_UINTS(M, __VA_ARGS__)
#define EW_FOR_NUMERIC(M, ...) EW_FOR_FLOATS(M, __VA_ARGS__) EW_FOR_INTS(M, __VA_ARGS__)

/* float32 exp, sigmoid and tanh that gcc can vectorize (no libm call in the loop): exp by
 * Cephes' method, x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n put into
 * the exponent bits (about 1 ulp; results that would be subnormal flush to 0). Inputs past
 * the range saturate to +inf and 0, NaN stays NaN; the clamping comes first so that no NaN or
 * infinity is ever converted to int. Sigmoid and tanh over 4 M elements were dominated by
 * the scalar libm calls (tanhf through expm1f), not by memory. */
static inline float ew_expf(float x)
{
        float xc = x < 88.0f ? x : 88.0f; /* NaN compares false: 88, put back at the end */
        xc = xc > -87.33654f ? xc : -87.33654f; /* ln FLT_MIN */
        float z = xc * 1.44269504088896341f;
        int n = (int)(z + (z >= 0 ? 0.5f : -0.5f));
        float fn = (float)n;
        float r = xc - fn * 0.693359375f;
        r = r - fn * -2.12194440e-4f;
        float r2 = r * r;
        float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                    4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
        union { uint32_t u; float f; } e = { .u = (uint32_t)(n + 127) << 23 };
        float y = (p * r2 + r + 1.0f) * e.f;
        y = x > 88.72283905206835f ? __builtin_inff() : y;
        y = x < -87.33654f ? 0.0f : y; /* results below FLT_MIN flush to 0 */
        return x != x ? x : y;
}

static inline float ew_sigmoidf(float x)
{
        float e = ew_expf(-__builtin_fabsf(x));
        return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

/* Cephes tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above. */
static inline float ew_tanhf(float x)
{
        float z = __builtin_fabsf(x), w = x * x;
        float big = 1.0f - 2.0f / (ew_expf(2.0f * z) + 1.0f);
        float small = ((((-5.70498872745e-3f * w + 2.06390887954e-2f) * w - 5.37397155531e-2f) * w +
                        1.33314422036e-1f) * w - 3.33332819422e-1f) * w * x + x;
        big = x < 0 ? -big : big;
        return z > 0.625f ? big : small;
}

/* The unsigned type integer arithmetic on T wraps in: at least as wide as int, so that
 * the promotions of narrow types cannot overflow either. */
#define EW_U(T)                                                                                \
        __typeof__(_Generic((T)0, int64_t: (uint64_t)0, uint64_t: (uint64_t)0, default: 0u))
/* Wrapping x + y, x - y, x * y, -x for integer T. */
#define EW_WADD(T, x, y) ((T)((EW_U(T))(x) + (EW_U(T))(y)))
#define EW_WSUB(T, x, y) ((T)((EW_U(T))(x) - (EW_U(T))(y)))
#define EW_WMUL(T, x, y) ((T)((EW_U(T))(x) * (EW_U(T))(y)))
#define EW_WNEG(T, x) ((T)((EW_U(T))0 - (EW_U(T))(x)))

/* Table entries for the kernels an instantiation produced (op##_f32, ...). */
#define EW_TAB_FLOATS(op) [EW_F32] = op##_f32, [EW_F64] = op##_f64
#define EW_TAB_SINTS(op)                                                                       \
        [EW_I8] = op##_i8, [EW_I16] = op##_i16, [EW_I32] = op##_i32, [EW_I64] = op##_i64
#define EW_TAB_UINTS(op)                                                                       \
        [EW_U8] = op##_u8, [EW_U16] = op##_u16, [EW_U32] = op##_u32, [EW_U64] = op##_u64
#define EW_TAB_INTS(op) EW_TAB_SINTS(op), EW_TAB_UINTS(op)
#define EW_TAB_NUMERIC(op) EW_TAB_FLOATS(op), EW_TAB_INTS(op)

/* A float32 unary kernel that hands contiguous runs to vmath (SLEEF at the CPU's widest
 * vector width) and everything else, or everything when vmath is off, to the generic kernel
 * `generic`. An output that is exactly the input is fine for vmath (each vector is loaded
 * before it is stored); a partial overlap is not. */
#define EW_VMATH_F32(name, vm, generic)                                                        \
        static void name(void *o, const void *const *in, const int64_t *st, int64_t n,         \
                         const struct ew_params *p)                                            \
        {                                                                                      \
                ops_vm_fn f_;                                                                  \
                                                                                               \
                if (st[0] == 1 && (p->fast || o == in[0]) && (f_ = ops_vmath_get(vm))) {       \
                        f_(o, in[0], (size_t)n);                                               \
                        return;                                                                \
                }                                                                              \
                generic(o, in, st, n, p);                                                      \
        }

/* Same-type unary and binary instantiations: op##_suffix from the element macro F. */
#define EW_UNARY_SAME(sfx, T, op, F) EW_UNARY(op##_##sfx, T, T, F)
#define EW_BINARY_SAME(sfx, T, op, F) EW_BINARY(op##_##sfx, T, T, F)
/* Predicates (bool output). */
#define EW_UNARY_BOOL(sfx, T, op, F) EW_UNARY(op##_##sfx, T, uint8_t, F)
#define EW_BINARY_BOOL(sfx, T, op, F) EW_BINARY(op##_##sfx, T, uint8_t, F)

#endif

/* Unit tests of the elementwise operator family (ops/elementwise.c, ew-*.c, cast.c):
 * the registry entries and their ONNX opset versions; every operator group against
 * references computed here in double, for every dtype it accepts (float16 and bfloat16
 * through float), with multidirectional broadcasting, scalars, empty tensors, outputs
 * aliasing inputs and the split into element ranges the scheduler makes; attribute
 * defaults and values, older opset variants (Clip-6), integer edge cases (wraparound,
 * division by zero, INT_MIN / -1, shifts past the width); values from the ONNX node tests;
 * and the messages of rejected calls. */
#include <check.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops-internal.h"

#define F32 PROTO_DTYPE_FLOAT32
#define F64 PROTO_DTYPE_FLOAT64
#define F16 PROTO_DTYPE_FLOAT16
#define BF16 PROTO_DTYPE_BFLOAT16
#define I8 PROTO_DTYPE_INT8
#define I16 PROTO_DTYPE_INT16
#define I32 PROTO_DTYPE_INT32
#define I64 PROTO_DTYPE_INT64
#define U8 PROTO_DTYPE_UINT8
#define U16 PROTO_DTYPE_UINT16
#define U32 PROTO_DTYPE_UINT32
#define U64 PROTO_DTYPE_UINT64
#define BOOL PROTO_DTYPE_BOOL

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const int all_numeric[] = { F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64 };
static const int all_floats[] = { F32, F64, F16, BF16 };

/* SHP(2, 3): a rank and a dims array. */
#define SHP(...)                                                                               \
        (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)),                           \
                (const int64_t[]){ __VA_ARGS__ }
#define SCALAR 0, NULL

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint32_t rng(void)
{
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t)(rng_state >> 33);
}

/* Uniform in [lo, hi). */
static double rng_range(double lo, double hi)
{
        return lo + (hi - lo) * ((double)rng() / 2147483648.0);
}

static int is_float(int dtype)
{
        return dtype == F32 || dtype == F64 || dtype == F16 || dtype == BF16;
}

static int is_signed(int dtype)
{
        return dtype == I8 || dtype == I16 || dtype == I32 || dtype == I64;
}

/* ------------------------------------------------------------ values of any dtype */

static void put(int dtype, void *buf, int64_t i, double v)
{
        switch (dtype) {
        case F32: ((float *)buf)[i] = (float)v; break;
        case F64: ((double *)buf)[i] = v; break;
        case F16: ((uint16_t *)buf)[i] = ops_double_to_half(v); break;
        case BF16: ((uint16_t *)buf)[i] = ops_double_to_bf16(v); break;
        /* through int64, so that out-of-range values wrap (as the kernels' do) */
        case I8: ((int8_t *)buf)[i] = (int8_t)(int64_t)v; break;
        case I16: ((int16_t *)buf)[i] = (int16_t)(int64_t)v; break;
        case I32: ((int32_t *)buf)[i] = (int32_t)(int64_t)v; break;
        case I64: ((int64_t *)buf)[i] = (int64_t)v; break;
        case U8: ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v; break;
        case U16: ((uint16_t *)buf)[i] = (uint16_t)(int64_t)v; break;
        case U32: ((uint32_t *)buf)[i] = (uint32_t)(int64_t)v; break;
        case U64: ((uint64_t *)buf)[i] = (uint64_t)(int64_t)v; break;
        case BOOL: ((uint8_t *)buf)[i] = v != 0; break;
        default: ck_abort_msg("put: dtype %d", dtype);
        }
}

static double get(int dtype, const void *buf, int64_t i)
{
        switch (dtype) {
        case F32: return ((const float *)buf)[i];
        case F64: return ((const double *)buf)[i];
        case F16: return ops_half_to_float(((const uint16_t *)buf)[i]);
        case BF16: return ops_bf16_to_float(((const uint16_t *)buf)[i]);
        case I8: return ((const int8_t *)buf)[i];
        case I16: return ((const int16_t *)buf)[i];
        case I32: return ((const int32_t *)buf)[i];
        case I64: return (double)((const int64_t *)buf)[i];
        case U8: return ((const uint8_t *)buf)[i];
        case U16: return ((const uint16_t *)buf)[i];
        case U32: return ((const uint32_t *)buf)[i];
        case U64: return (double)((const uint64_t *)buf)[i];
        case BOOL: return ((const uint8_t *)buf)[i];
        }
        ck_abort_msg("get: dtype %d", dtype);
        return 0;
}

/* The value v becomes when stored in dtype. */
static double rounded(int dtype, double v)
{
        uint64_t b = 0;

        put(dtype, &b, 0, v);
        return get(dtype, &b, 0);
}

/* Close enough for the dtype: exact for integers, a few units in the last place for
 * floats (relative to the larger magnitude, absolute near zero). */
static int close_to(int dtype, double got, double want, double extra)
{
        double eps;

        if (isnan(want))
                return isnan(got);
        if (isinf(want))
                return got == want;
        switch (dtype) {
        case F32: eps = 4e-6; break;
        case F64: eps = 1e-13; break;
        case F16: eps = 2e-3; break;
        case BF16: eps = 1.6e-2; break;
        default: return got == want;
        }
        eps += extra;
        return fabs(got - want) <= eps * fmax(1.0, fmax(fabs(want), fabs(got)));
}

/* ------------------------------------------------------------------ calls */

static struct ops_tensor tensor(int dtype, void *data, int ndim, const int64_t *dims)
{
        struct ops_tensor t;

        memset(&t, 0, sizeof(t));
        t.dtype = dtype;
        t.ndim = ndim;
        if (ndim)
                memcpy(t.dims, dims, (size_t)ndim * sizeof(*dims));
        t.data = data;
        return t;
}

static int64_t numel(const struct ops_tensor *t)
{
        int64_t n = 1;
        int i;

        for (i = 0; i < t->ndim; i++)
                n *= t->dims[i];
        return n;
}

static struct ops_call call_n(int nin)
{
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        c.nin = nin;
        c.nout = 1;
        return c;
}

static void attr_int(struct ops_call *c, const char *name, int64_t v)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = OPS_ATTR_INT;
        a->i = v;
}

static void attr_float(struct ops_call *c, const char *name, double v)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = OPS_ATTR_FLOAT;
        a->f = v;
}

static void attr_string(struct ops_call *c, const char *name, const char *s)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = OPS_ATTR_STRING;
        a->s = s;
}

static const struct ops_def *def_of(const char *op, int opset)
{
        const struct ops_def *d = ops_lookup_onnx(NULL, op, opset);

        ck_assert_msg(d != NULL, "%s: no definition for opset %d", op, opset);
        return d;
}

/* As a graph runs a node: infer (the output's dtype and shape, data kept), then check on a
 * copy without data pointers (as the daemon checks wire launches), then run. Returns run's
 * result; infer and check must pass. */
static int invoke_v(const char *op, int opset, struct ops_call *c, char *err, size_t errlen)
{
        const struct ops_def *d = def_of(op, opset);
        struct ops_call probe = *c;
        void *data = c->out[0].data;
        int i, rc;

        err[0] = 0;
        rc = ops_infer(d, &probe, err, errlen);
        ck_assert_msg(rc == 0, "%s: infer failed (%d): %s", op, rc, err);
        c->out[0] = probe.out[0];
        c->out[0].data = data;
        probe = *c;
        for (i = 0; i < OPS_MAX_INPUTS; i++)
                probe.in[i].data = NULL;
        probe.out[0].data = NULL;
        rc = ops_check(d, &probe, err, errlen);
        ck_assert_msg(rc == 0, "%s: check failed (%d): %s", op, rc, err);
        return ops_run(d, c, err, errlen);
}

static void invoke(const char *op, int opset, struct ops_call *c)
{
        char err[256];
        int rc = invoke_v(op, opset, c, err, sizeof(err));

        ck_assert_msg(rc == 0, "%s: run failed (%d): %s", op, rc, err);
}

/* infer (with data) must fail with -EINVAL and a message "<op>: ...want...". */
static void expect_infer_fail(const char *op, int opset, const struct ops_call *c,
                              const char *want)
{
        struct ops_call probe = *c;
        char err[256] = "";
        size_t n = strlen(op);
        int rc = ops_infer(def_of(op, opset), &probe, err, sizeof(err));

        ck_assert_msg(rc == -EINVAL, "%s: infer returned %d (want \"%s\")", op, rc, want);
        ck_assert_msg(strncmp(err, op, n) == 0 && err[n] == ':', "\"%s\" does not name %s", err,
                      op);
        ck_assert_msg(strstr(err, want), "\"%s\" lacks \"%s\"", err, want);
}

/* check (the wire's validation, output given) must fail likewise. */
static void expect_check_fail(const char *op, int opset, const struct ops_call *c,
                              const char *want)
{
        char err[256] = "";
        size_t n = strlen(op);
        int rc = ops_check(def_of(op, opset), c, err, sizeof(err));

        ck_assert_msg(rc == -EINVAL, "%s: check returned %d (want \"%s\")", op, rc, want);
        ck_assert_msg(strncmp(err, op, n) == 0 && err[n] == ':', "\"%s\" does not name %s", err,
                      op);
        ck_assert_msg(strstr(err, want), "\"%s\" lacks \"%s\"", err, want);
}

/* Flat index into t of output element `flat` under broadcasting. */
static int64_t bcast_index(const struct ops_tensor *t, const struct ops_tensor *out,
                           int64_t flat)
{
        int64_t idx = 0, stride = 1, c;
        int d, td;

        for (d = out->ndim - 1; d >= 0; d--) {
                c = flat % out->dims[d];
                flat /= out->dims[d];
                td = d - (out->ndim - t->ndim);
                if (td < 0)
                        continue;
                if (t->dims[td] != 1)
                        idx += c * stride;
                stride *= t->dims[td];
        }
        return idx;
}

/* Buffers of random values for a tensor, as stored (so references see what kernels see). */
static void *fill(int dtype, int64_t n, double lo, double hi)
{
        void *buf = calloc((size_t)(n ? n : 1), 8);
        int64_t i;

        if (!is_float(dtype) && !is_signed(dtype) && lo < 0)
                lo = 0;

        for (i = 0; i < n; i++) {
                double v = rng_range(lo, hi);

                put(dtype, buf, i, is_float(dtype) ? v : floor(v));
        }
        return buf;
}

/* ------------------------------------------------------------------ registry */

START_TEST(test_registry)
{
        static const char *const names[] = {
                "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Abs",
                "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
                "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
                "Atanh", "Erf", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid",
                "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Tanh", "Mish", "Clip",
                "Where", "Not", "And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater",
                "GreaterOrEqual", "IsNaN", "IsInf", "BitShift", "ThresholdedRelu", "Shrink",
                "Cast", "CastLike",
        };
        const struct ops_def *d;
        size_t i;

        for (i = 0; i < NELEM(names); i++) {
                d = ops_lookup_onnx(NULL, names[i], 18);
                ck_assert_msg(d != NULL, "%s missing", names[i]);
                ck_assert_str_eq(d->name, names[i]);
                ck_assert(d->check || d->infer); /* NULL: the default check through infer */
                ck_assert_ptr_nonnull(d->run);
                ck_assert_ptr_nonnull(d->cost);
                ck_assert_ptr_nonnull(d->infer);
                ck_assert_ptr_null(d->domain);
                ck_assert_int_eq(d->outputs, 1);
                ck_assert_msg(d->flags & OPS_FLAG_ELEMENTWISE, "%s not elementwise", names[i]);
                ck_assert_ptr_nonnull(ops_lookup(names[i]));
                ck_assert_ptr_eq(ops_lookup_onnx("ai.onnx", names[i], 18), d);
        }
        /* since_version: where the implemented semantics begin */
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "Add", 6));
        ck_assert_ptr_eq(ops_lookup_onnx(NULL, "Add", 7), ops_lookup("Add"));
        ck_assert_ptr_eq(ops_lookup_onnx("", "Add", 14), ops_lookup("Add"));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "Mish", 17));
        ck_assert_ptr_nonnull(ops_lookup_onnx(NULL, "Not", 1));
        ck_assert_ptr_nonnull(ops_lookup_onnx(NULL, "Softplus", 1));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "CastLike", 14));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "BitShift", 10));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "Relu", 18)->domain);
        ck_assert_ptr_null(ops_lookup_onnx("com.example", "Relu", 18));
        /* two Clips: attributes up to opset 10, inputs from 11; the wire gets the newer */
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Clip", 6)->since_version, 6);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Clip", 10)->max_inputs, 1);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Clip", 11)->since_version, 11);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Clip", 13)->max_inputs, 3);
        ck_assert_ptr_eq(ops_lookup("Clip"), ops_lookup_onnx(NULL, "Clip", 13));
        ck_assert_int_eq(ops_lookup("Cast")->engine, OPS_ENGINE_AICPU);
        ck_assert_int_eq(ops_lookup("Where")->engine, OPS_ENGINE_VECTOR);
        ck_assert_int_eq(ops_lookup("Sum")->max_inputs, OPS_MAX_INPUTS);
}
END_TEST

/* ------------------------------------------------------------------ binary arithmetic */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_SUM, B_MEAN, B_MOD, B_FMOD };

static const char *const bin_names[] = { "Add", "Sub", "Mul", "Div", "Pow", "Max",
                                         "Min", "Sum", "Mean", "Mod", "Mod" };

static double bin_ref(int op, int dtype, double a, double b)
{
        switch (op) {
        case B_ADD: return a + b;
        case B_SUB: return a - b;
        case B_MUL: return a * b;
        case B_DIV: return is_float(dtype) ? a / b : trunc(a / b);
        case B_POW: return pow(a, b);
        case B_MAX: return fmax(a, b);
        case B_MIN: return fmin(a, b);
        case B_SUM: return a + b;
        case B_MEAN: return (a + b) / 2;
        case B_MOD: return a - b * floor(a / b);
        case B_FMOD: return fmod(a, b);
        }
        return 0;
}

/* Runs op on random a (shape sa) and b (shape sb) of dtype and compares with bin_ref under
 * broadcasting. Values stay small so that integer results are exact and in range. */
static void binary_case(int op, int dtype, int na, const int64_t *da, int nb,
                        const int64_t *db)
{
        struct ops_tensor ta = tensor(dtype, NULL, na, da), tb = tensor(dtype, NULL, nb, db);
        struct ops_call c = call_n(2);
        int64_t i, n;
        double lo = is_signed(dtype) || is_float(dtype) ? -9 : 0, hi = 10;
        void *out;

        if (dtype == I8 && op == B_MUL)
                lo = -8, hi = 8;
        if (op == B_POW)
                lo = 0.5, hi = 3;
        ta.data = fill(dtype, numel(&ta), lo, hi);
        tb.data = fill(dtype, numel(&tb), lo, hi);
        if (op == B_DIV || op == B_MOD || op == B_FMOD) /* no zero divisors */
                for (i = 0; i < numel(&tb); i++)
                        if (get(dtype, tb.data, i) == 0)
                                put(dtype, tb.data, i, 3);
        c.in[0] = ta;
        c.in[1] = tb;
        if (op == B_FMOD)
                attr_int(&c, "fmod", 1);
        /* infer sizes the output first */
        {
                struct ops_call probe = c;
                char err[256];

                ck_assert_int_eq(ops_infer(def_of(bin_names[op], 18), &probe, err, sizeof(err)), 0);
                n = numel(&probe.out[0]);
        }
        out = calloc((size_t)(n ? n : 1), 8);
        c.out[0].data = out;
        invoke(bin_names[op], 18, &c);
        ck_assert_int_eq(c.out[0].dtype, dtype);
        for (i = 0; i < n; i++) {
                double a = get(dtype, ta.data, bcast_index(&ta, &c.out[0], i));
                double b = get(dtype, tb.data, bcast_index(&tb, &c.out[0], i));
                double want = rounded(dtype, bin_ref(op, dtype, a, b));
                double got = get(dtype, out, i);

                ck_assert_msg(close_to(dtype, got, want, 0),
                              "%s %s [%lld]: %g op %g = %.17g, want %.17g", bin_names[op],
                              proto_dtype_name(dtype), (long long)i, a, b, got, want);
        }
        free(ta.data);
        free(tb.data);
        free(out);
}

static void binary_all_shapes(int op, int dtype)
{
        binary_case(op, dtype, SHP(3, 4, 5), SHP(3, 4, 5));
        binary_case(op, dtype, SHP(3, 4, 5), SHP(5));
        binary_case(op, dtype, SHP(5), SHP(3, 4, 5));
        binary_case(op, dtype, SHP(3, 4, 5), SCALAR);
        binary_case(op, dtype, SCALAR, SHP(70));
        binary_case(op, dtype, SHP(1, 4, 1, 6), SHP(3, 1, 5, 6));
        binary_case(op, dtype, SHP(2, 1, 3), SHP(4, 1));
        binary_case(op, dtype, SHP(300), SHP(300)); /* past the chunk size */
        binary_case(op, dtype, SHP(17, 33), SHP(17, 1));
        binary_case(op, dtype, SCALAR, SCALAR);
        binary_case(op, dtype, SHP(0, 3), SHP(3));
        binary_case(op, dtype, SHP(2, 0), SHP(1));
}

START_TEST(test_add_sub_mul_div)
{
        size_t t;
        int op;

        for (op = B_ADD; op <= B_DIV; op++)
                for (t = 0; t < NELEM(all_numeric); t++)
                        binary_all_shapes(op, all_numeric[t]);
}
END_TEST

START_TEST(test_max_min_mod)
{
        size_t t;

        for (t = 0; t < NELEM(all_numeric); t++) {
                binary_all_shapes(B_MAX, all_numeric[t]);
                binary_all_shapes(B_MIN, all_numeric[t]);
                binary_all_shapes(B_FMOD, all_numeric[t]);
                if (!is_float(all_numeric[t]))
                        binary_all_shapes(B_MOD, all_numeric[t]);
        }
        for (t = 0; t < NELEM(all_floats); t++) {
                binary_all_shapes(B_SUM, all_floats[t]);
                binary_all_shapes(B_MEAN, all_floats[t]);
                binary_all_shapes(B_POW, all_floats[t]);
        }
        binary_all_shapes(B_POW, I32);
        binary_all_shapes(B_POW, I64);
}
END_TEST

START_TEST(test_int_edges)
{
        int32_t a32[5] = { INT32_MAX, INT32_MIN, INT32_MIN, -7, 7 };
        int32_t b32[5] = { 1, -1, 2, 2, -2 }, o32[5];
        int64_t a64[3] = { INT64_MIN, INT64_MIN, -9 }, b64[3] = { -1, 7, 4 }, o64[3];
        int8_t a8[3] = { -128, 100, -128 }, b8[3] = { -1, 100, 1 }, o8[3];
        uint16_t au[2] = { 65535, 2 }, bu[2] = { 65535, 65535 }, ou[2];
        struct ops_call c = call_n(2);

        c.in[0] = tensor(I32, a32, SHP(5));
        c.in[1] = tensor(I32, b32, SHP(5));
        c.out[0].data = o32;
        invoke("Add", 14, &c);
        ck_assert_int_eq(o32[0], INT32_MIN); /* wraps */
        invoke("Sub", 14, &c);
        ck_assert_int_eq(o32[1], INT32_MIN + 1);
        ck_assert_int_eq(o32[2], INT32_MAX - 1);
        invoke("Mul", 14, &c);
        ck_assert_int_eq(o32[1], INT32_MIN);
        invoke("Div", 14, &c);
        ck_assert_int_eq(o32[1], INT32_MIN); /* INT_MIN / -1 wraps, no trap */
        ck_assert_int_eq(o32[3], -3);
        ck_assert_int_eq(o32[4], -3);
        invoke("Mod", 13, &c);
        ck_assert_int_eq(o32[1], 0); /* INT_MIN % -1 */
        ck_assert_int_eq(o32[3], 1); /* -7 mod 2 takes the divisor's sign */
        ck_assert_int_eq(o32[4], -1);
        attr_int(&c, "fmod", 1);
        invoke("Mod", 13, &c);
        ck_assert_int_eq(o32[1], 0);
        ck_assert_int_eq(o32[3], -1); /* C remainder */
        ck_assert_int_eq(o32[4], 1);
        c.nattr = 0;
        invoke("Abs", 13, &(struct ops_call){ .nin = 1, .nout = 1,
                                              .in = { tensor(I32, a32, SHP(5)) },
                                              .out = { tensor(I32, o32, SHP(5)) } });
        ck_assert_int_eq(o32[1], INT32_MIN); /* |INT_MIN| wraps to itself */
        ck_assert_int_eq(o32[3], 7);

        c.in[0] = tensor(I64, a64, SHP(3));
        c.in[1] = tensor(I64, b64, SHP(3));
        c.out[0].data = o64;
        invoke("Div", 14, &c);
        ck_assert(o64[0] == INT64_MIN);
        ck_assert(o64[2] == -2);
        invoke("Mod", 13, &c);
        ck_assert(o64[0] == 0);
        ck_assert(o64[1] == 6); /* floor mod of INT64_MIN by 7 */
        ck_assert(o64[2] == 3);
        invoke("Neg", 13, &(struct ops_call){ .nin = 1, .nout = 1,
                                              .in = { tensor(I64, a64, SHP(3)) },
                                              .out = { tensor(I64, o64, SHP(3)) } });
        ck_assert(o64[0] == INT64_MIN);
        ck_assert(o64[2] == 9);

        c.in[0] = tensor(I8, a8, SHP(3));
        c.in[1] = tensor(I8, b8, SHP(3));
        c.out[0].data = o8;
        invoke("Div", 14, &c);
        ck_assert_int_eq(o8[0], -128);
        invoke("Mul", 14, &c);
        ck_assert_int_eq(o8[1], (int8_t)(uint8_t)(100 * 100));
        invoke("Add", 14, &c);
        ck_assert_int_eq(o8[1], (int8_t)(uint8_t)200);

        /* 65535 * 65535 must not overflow int after promotion */
        c.in[0] = tensor(U16, au, SHP(2));
        c.in[1] = tensor(U16, bu, SHP(2));
        c.out[0].data = ou;
        invoke("Mul", 14, &c);
        ck_assert_uint_eq(ou[0], 1);
        ck_assert_uint_eq(ou[1], 65534);
        invoke("Sub", 14, &c);
        ck_assert_uint_eq(ou[1], 3);
}
END_TEST

START_TEST(test_division_by_zero)
{
        int32_t a[6] = { 1, 2, 3, 4, 5, 6 }, b[3] = { 1, 0, 2 }, o[6] = { 0 };
        uint8_t ua[2] = { 5, 6 }, uz = 0, uo[2] = { 42, 42 };
        double fa[2] = { 1, -1 }, fz = 0, fo[2];
        struct ops_call c = call_n(2);
        char err[256];

        c.in[0] = tensor(I32, a, SHP(2, 3));
        c.in[1] = tensor(I32, b, SHP(3));
        c.out[0].data = o;
        ck_assert_int_eq(invoke_v("Div", 14, &c, err, sizeof(err)), -EDOM);
        ck_assert_str_eq(err, "Div: integer division by zero");
        ck_assert_int_eq(invoke_v("Mod", 13, &c, err, sizeof(err)), -EDOM);
        ck_assert_str_eq(err, "Mod: integer division by zero");
        c.in[0] = tensor(U8, ua, SHP(2));
        c.in[1] = tensor(U8, &uz, SCALAR);
        c.out[0].data = uo;
        ck_assert_int_eq(invoke_v("Div", 14, &c, err, sizeof(err)), -EDOM);
        ck_assert_uint_eq(uo[0], 42); /* nothing written */
        /* floats follow IEEE */
        c.in[0] = tensor(F64, fa, SHP(2));
        c.in[1] = tensor(F64, &fz, SCALAR);
        c.out[0].data = fo;
        invoke("Div", 14, &c);
        ck_assert(isinf(fo[0]) && fo[0] > 0);
        ck_assert(isinf(fo[1]) && fo[1] < 0);
        attr_int(&c, "fmod", 1);
        invoke("Mod", 13, &c);
        ck_assert(isnan(fo[0]));
}
END_TEST

/* Float Div by a scalar power of two multiplies by its reciprocal (ops/ew-binary.c): the
 * result is bit for bit the quotient, for every kind of dividend (signed zeros, infinities,
 * NaN, subnormal results), and other divisors still divide. */
START_TEST(test_div_pow2_exact)
{
        static const float divisors[] = { 2.0f, 0.5f, -4.0f, 1.0f, 0x1p-100f, 0x1p100f, 3.0f, -0.1f,
                                          0x1p-126f, 0x1p-149f };
        enum { N = 64 };
        float a[N], o[N];
        struct ops_call c = call_n(2);

        for (int i = 0; i < N; i++)
                a[i] = (float)(i - 20) * 1.37f * (i % 3 ? 1.0f : 1e-30f);
        a[0] = -0.0f;
        a[1] = INFINITY;
        a[2] = -INFINITY;
        a[3] = NAN;
        a[4] = 0x1p-140f; /* subnormal, and smaller once halved */
        a[5] = 0x1p-127f;
        a[6] = 3.4e38f;
        for (size_t d = 0; d < NELEM(divisors); d++) {
                float y = divisors[d];
                c.in[0] = tensor(F32, a, SHP(N));
                c.in[1] = tensor(F32, &y, SCALAR);
                c.out[0].data = o;
                invoke("Div", 14, &c);
                for (int i = 0; i < N; i++) {
                        volatile float want = a[i] / y;
                        ck_assert_msg(memcmp(&o[i], (const void *)&want, sizeof(float)) == 0 ||
                                              (isnan(o[i]) && isnan(want)),
                                      "%a / %a = %a, want %a", (double)a[i], (double)y, (double)o[i],
                                      (double)want);
                }
        }
        double da[3] = { 1e-310, -3.0, 1e308 }, dy = 0.25, dout[3];
        c.in[0] = tensor(F64, da, SHP(3));
        c.in[1] = tensor(F64, &dy, SCALAR);
        c.out[0].data = dout;
        invoke("Div", 14, &c);
        for (int i = 0; i < 3; i++)
                ck_assert(dout[i] == da[i] / dy);
}
END_TEST

START_TEST(test_pow_types)
{
        /* the node tests' pairs of base and exponent dtypes */
        static const int pairs[][2] = {
                { F32, I32 }, { F32, I64 }, { F32, U32 }, { F32, U64 }, { I32, F32 },
                { I32, I32 }, { I64, F32 }, { I64, I64 }, { F64, F32 }, { F16, F32 },
                { BF16, F16 }, { F16, I8 }, { I32, U8 }, { I64, F64 },
        };
        uint64_t a[3], b[3], o[3];
        struct ops_call c = call_n(2);
        size_t p;
        int i;

        for (p = 0; p < NELEM(pairs); p++) {
                for (i = 0; i < 3; i++) {
                        put(pairs[p][0], a, i, i + 1);
                        put(pairs[p][1], b, i, i + 4);
                }
                c.in[0] = tensor(pairs[p][0], a, SHP(3));
                c.in[1] = tensor(pairs[p][1], b, SHP(3));
                c.out[0].data = o;
                invoke("Pow", 15, &c);
                ck_assert_int_eq(c.out[0].dtype, pairs[p][0]);
                ck_assert_double_eq(get(pairs[p][0], o, 0), 1);
                ck_assert_double_eq(get(pairs[p][0], o, 1), 32);
                ck_assert_double_eq(get(pairs[p][0], o, 2), rounded(pairs[p][0], 729));
        }
        /* integer special cases: negative exponents, wraparound, fractional exponents */
        {
                int64_t base[6] = { 2, 1, -1, -1, 0, 3 }, e[6] = { -1, -5, -3, -4, 0, 41 }, r[6];
                int32_t ib[3] = { 2, 10, -3 }, ir[3];
                float fe[3] = { 0.5f, 1e30f, 3.0f };

                c.in[0] = tensor(I64, base, SHP(6));
                c.in[1] = tensor(I64, e, SHP(6));
                c.out[0].data = r;
                invoke("Pow", 15, &c);
                ck_assert(r[0] == 0 && r[1] == 1 && r[2] == -1 && r[3] == 1 && r[4] == 1);
                {
                        uint64_t w = 1;

                        for (i = 0; i < 41; i++)
                                w *= 3; /* wraps modulo 2^64 */
                        ck_assert(r[5] == (int64_t)w);
                }
                c.in[0] = tensor(I32, ib, SHP(3));
                c.in[1] = tensor(F32, fe, SHP(3));
                c.out[0].data = ir;
                invoke("Pow", 15, &c);
                ck_assert_int_eq(ir[0], 1);           /* sqrt(2) truncated */
                ck_assert_int_eq(ir[1], INT32_MAX);   /* saturates */
                ck_assert_int_eq(ir[2], -27);
        }
        /* a bool exponent is refused */
        {
                float x = 2;
                uint8_t t = 1;

                c.in[0] = tensor(F32, &x, SCALAR);
                c.in[1] = tensor(BOOL, &t, SCALAR);
                expect_infer_fail("Pow", 15, &c, "input 1 has unsupported dtype bool");
                c.in[0] = tensor(U8, &t, SCALAR);
                c.in[1] = tensor(F32, &x, SCALAR);
                expect_infer_fail("Pow", 15, &c, "input 0 has unsupported dtype uint8");
        }
}
END_TEST

START_TEST(test_mod_node_values)
{
        int8_t x8[6] = { -4, 7, 5, 4, -7, 8 }, y8[6] = { 2, -3, 8, -2, 3, 5 }, z8[6];
        static const int8_t want8[6] = { 0, -2, 5, 0, 2, 3 };
        float xf[6] = { -4.3f, 7.2f, 5.0f, 4.3f, -7.2f, 8.0f };
        float yf[6] = { 2.1f, -3.4f, 8.0f, -2.1f, 3.4f, 5.0f }, zf[6];
        static const float wantf[6] = { -0.10000038f, 0.39999962f, 5.0f, 0.10000038f,
                                        -0.39999962f, 3.0f };
        int64_t x64[6] = { -4, 7, 5, 4, -7, 8 }, y64[6] = { 2, -3, 8, -2, 3, 5 }, z64[6];
        static const int64_t want_fmod[6] = { 0, 1, 5, 0, -1, 3 };
        struct ops_call c = call_n(2);
        int i;

        c.in[0] = tensor(I8, x8, SHP(6));
        c.in[1] = tensor(I8, y8, SHP(6));
        c.out[0].data = z8;
        invoke("Mod", 13, &c);
        for (i = 0; i < 6; i++)
                ck_assert_int_eq(z8[i], want8[i]);
        c.in[0] = tensor(F32, xf, SHP(6));
        c.in[1] = tensor(F32, yf, SHP(6));
        c.out[0].data = zf;
        attr_int(&c, "fmod", 1);
        invoke("Mod", 13, &c);
        for (i = 0; i < 6; i++)
                ck_assert_float_eq_tol(zf[i], wantf[i], 1e-6);
        c.in[0] = tensor(I64, x64, SHP(6));
        c.in[1] = tensor(I64, y64, SHP(6));
        c.out[0].data = z64;
        invoke("Mod", 13, &c);
        for (i = 0; i < 6; i++)
                ck_assert(z64[i] == want_fmod[i]);
        /* floats need fmod = 1 */
        c.nattr = 0;
        c.in[0] = tensor(F32, xf, SHP(6));
        c.in[1] = tensor(F32, yf, SHP(6));
        expect_infer_fail("Mod", 13, &c, "attribute 'fmod' must be 1 for floating-point inputs");
        attr_int(&c, "fmod", 2);
        expect_infer_fail("Mod", 13, &c, "'fmod' must be 0 or 1");
        c.nattr = 0;
        attr_float(&c, "fmod", 1.0);
        expect_infer_fail("Mod", 13, &c, "attribute 'fmod' must be an int");
}
END_TEST

/* ------------------------------------------------------------------ variadic */

START_TEST(test_variadic)
{
        float a[6] = { 1, 8, 3, -4, 5, NAN }, b[3] = { 7, 2, 6 }, s = 4, o[6];
        uint16_t h[2][3], ho[3];
        int32_t i0[4] = { 1, -5, 3, 9 }, i1 = 2, i2[4] = { 0, 0, 7, -1 }, io[4];
        struct ops_call c = call_n(3);
        int i, k;

        /* three inputs broadcast together: [2,3], [3], [] */
        c.in[0] = tensor(F32, a, SHP(2, 3));
        c.in[1] = tensor(F32, b, SHP(3));
        c.in[2] = tensor(F32, &s, SCALAR);
        c.out[0].data = o;
        invoke("Max", 13, &c);
        ck_assert_int_eq(c.out[0].ndim, 2);
        ck_assert_float_eq(o[0], 7);
        ck_assert_float_eq(o[1], 8);
        ck_assert_float_eq(o[3], 7);
        ck_assert(isnan(o[5])); /* NaN propagates */
        invoke("Min", 13, &c);
        ck_assert_float_eq(o[0], 1);
        ck_assert_float_eq(o[3], -4);
        ck_assert(isnan(o[5]));
        invoke("Sum", 13, &c);
        ck_assert_float_eq(o[0], 12);
        ck_assert_float_eq(o[4], 11);
        invoke("Mean", 13, &c);
        ck_assert_float_eq(o[0], 4);
        ck_assert_float_eq_tol(o[4], 11.0f / 3, 1e-6);
        /* one input copies */
        c.nin = 1;
        invoke("Sum", 13, &c);
        ck_assert_float_eq(o[2], 3);
        ck_assert(isnan(o[5]));
        /* sixteen inputs, the output aliasing the first */
        {
                float x[5] = { 1, 2, 3, 4, 5 };

                c = call_n(OPS_MAX_INPUTS);
                for (k = 0; k < OPS_MAX_INPUTS; k++)
                        c.in[k] = tensor(F32, x, SHP(5));
                c.out[0].data = x;
                invoke("Sum", 13, &c);
                for (i = 0; i < 5; i++)
                        ck_assert_float_eq(x[i], 16.0f * (float)(i + 1));
        }
        /* float16: accumulated in float, rounded once */
        for (i = 0; i < 3; i++) {
                h[0][i] = ops_float_to_half(1000.0f);
                h[1][i] = ops_float_to_half(0.125f);
        }
        c = call_n(4);
        c.in[0] = tensor(F16, h[0], SHP(3));
        c.in[1] = c.in[2] = c.in[3] = tensor(F16, h[1], SHP(3));
        c.out[0].data = ho;
        invoke("Sum", 13, &c);
        /* 1000.375 rounds to 1000.5; rounding after each addition would stay at 1000 */
        ck_assert_float_eq(ops_half_to_float(ho[0]), 1000.5f);
        /* integers */
        c = call_n(3);
        c.in[0] = tensor(I32, i0, SHP(4));
        c.in[1] = tensor(I32, &i1, SHP(1));
        c.in[2] = tensor(I32, i2, SHP(1, 4));
        c.out[0].data = io;
        invoke("Max", 13, &c);
        ck_assert_int_eq(c.out[0].ndim, 2);
        ck_assert_int_eq(io[0], 2);
        ck_assert_int_eq(io[2], 7);
        ck_assert_int_eq(io[3], 9);
        invoke("Min", 13, &c);
        ck_assert_int_eq(io[1], -5);
        ck_assert_int_eq(io[3], -1);
        expect_infer_fail("Sum", 13, &c, "input 0 has unsupported dtype int32");
        c.in[2].dtype = I64;
        expect_infer_fail("Max", 13, &c, "input 2 dtype int64 does not match input 0 dtype int32");
        c.in[2] = tensor(I32, i2, SHP(3));
        expect_infer_fail("Max", 13, &c, "cannot broadcast shapes [4] and [3]");
        /* an input left out (named "" in a model): every input of Max is required (the
         * fuzzer found the kernel reading through its null data) */
        c.in[2] = tensor(I32, i2, SHP(1, 4));
        memset(&c.in[1], 0, sizeof(c.in[1]));
        expect_infer_fail("Max", 13, &c, "Max: input 1 is missing");
        expect_infer_fail("Mean", 13, &c, "Mean: input 1 is missing");
}
END_TEST

/* ------------------------------------------------------------------ unary math */

struct unary_case {
        const char *op;
        double (*ref)(double);
        double lo, hi;
        const int *types;
        size_t ntypes;
        double tol; /* extra relative tolerance */
};

static double r_neg(double x) { return -x; }
static double r_recip(double x) { return 1 / x; }
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_softplus(double x) { return log(1 + exp(x)); }
static double r_softsign(double x) { return x / (1 + fabs(x)); }
static double r_hardswish(double x) { return x * fmax(0, fmin(1, x / 6 + 0.5)); }
static double r_mish(double x) { return x * tanh(log(1 + exp(x))); }

static const int f3[] = { F32, F64, F16 };
static const int f4[] = { F32, F64, F16, BF16 };
static const int f4s[] = { F32, F64, F16, BF16, I8, I16, I32, I64 };

static const struct unary_case unary_cases[] = {
        { "Abs", fabs, -9, 9, all_numeric, NELEM(all_numeric), 0 },
        { "Neg", r_neg, -9, 9, f4s, NELEM(f4s), 0 },
        { "Sign", r_sign, -3, 3, all_numeric, NELEM(all_numeric), 0 },
        { "Exp", exp, -5, 5, f4, NELEM(f4), 0 },
        { "Log", log, 0.01, 50, f4, NELEM(f4), 0 },
        { "Sqrt", sqrt, 0, 50, f4, NELEM(f4), 0 },
        { "Reciprocal", r_recip, 0.5, 9, f4, NELEM(f4), 0 },
        { "Floor", floor, -9, 9, f4, NELEM(f4), 0 },
        { "Ceil", ceil, -9, 9, f4, NELEM(f4), 0 },
        { "Round", nearbyint, -9, 9, f3, NELEM(f3), 0 },
        { "Sin", sin, -6, 6, f3, NELEM(f3), 1e-6 },
        { "Cos", cos, -6, 6, f3, NELEM(f3), 1e-6 },
        { "Tan", tan, -1.5, 1.5, f3, NELEM(f3), 0 },
        { "Asin", asin, -1, 1, f3, NELEM(f3), 0 },
        { "Acos", acos, -1, 1, f3, NELEM(f3), 0 },
        { "Atan", atan, -9, 9, f3, NELEM(f3), 0 },
        { "Sinh", sinh, -5, 5, f3, NELEM(f3), 0 },
        { "Cosh", cosh, -5, 5, f3, NELEM(f3), 0 },
        { "Asinh", asinh, -9, 9, f3, NELEM(f3), 0 },
        { "Acosh", acosh, 1, 9, f3, NELEM(f3), 0 },
        { "Atanh", atanh, -0.99, 0.99, f3, NELEM(f3), 0 },
        { "Erf", erf, -3, 3, f4, NELEM(f4), 0 },
        { "Tanh", tanh, -5, 5, f4, NELEM(f4), 0 },
        { "Relu", r_relu, -9, 9, f4s, NELEM(f4s), 0 },
        { "Sigmoid", r_sigmoid, -9, 9, f4, NELEM(f4), 0 },
        { "Softplus", r_softplus, -9, 9, f3, NELEM(f3), 0 },
        { "Softsign", r_softsign, -9, 9, f3, NELEM(f3), 0 },
        { "HardSwish", r_hardswish, -9, 9, f3, NELEM(f3), 0 },
        { "Mish", r_mish, -9, 9, f3, NELEM(f3), 1e-6 },
};

static void unary_run(const struct unary_case *u, int dtype, int ndim, const int64_t *dims,
                      int in_place)
{
        struct ops_call c = call_n(1);
        struct ops_tensor t = tensor(dtype, NULL, ndim, dims);
        int64_t i, n = numel(&t);
        void *in = fill(dtype, n, u->lo, u->hi), *keep = calloc((size_t)(n ? n : 1), 8);
        void *out = in_place ? in : calloc((size_t)(n ? n : 1), 8);

        memcpy(keep, in, (size_t)n * proto_dtype_size(dtype));
        t.data = in;
        c.in[0] = t;
        c.out[0].data = out;
        invoke(u->op, 18, &c);
        ck_assert_int_eq(c.out[0].dtype, dtype);
        ck_assert_int_eq(c.out[0].ndim, ndim);
        for (i = 0; i < n; i++) {
                double x = get(dtype, keep, i), want = rounded(dtype, u->ref(x));
                double got = get(dtype, out, i);

                ck_assert_msg(close_to(dtype, got, want, u->tol), "%s %s: f(%.9g) = %.9g, want %.9g",
                              u->op, proto_dtype_name(dtype), x, got, want);
        }
        free(in);
        free(keep);
        if (!in_place)
                free(out);
}

START_TEST(test_unary)
{
        size_t u, t;

        for (u = 0; u < NELEM(unary_cases); u++)
                for (t = 0; t < unary_cases[u].ntypes; t++) {
                        int dtype = unary_cases[u].types[t];

                        unary_run(&unary_cases[u], dtype, SHP(3, 4, 5), 0);
                        unary_run(&unary_cases[u], dtype, SHP(333), 0);
                        unary_run(&unary_cases[u], dtype, SHP(41), 1);
                        unary_run(&unary_cases[u], dtype, SCALAR, 0);
                        unary_run(&unary_cases[u], dtype, SHP(4, 0), 0);
                }
}
END_TEST

START_TEST(test_unary_special)
{
        float r[15] = { 0.1f, 0.5f, 0.9f, 1.2f, 1.5f, 1.8f, 2.3f, 2.5f, 2.7f, -1.1f, -1.5f, -1.9f,
                        -2.2f, -2.5f, -2.8f };
        static const float rw[15] = { 0, 0, 1, 1, 2, 2, 2, 2, 3, -1, -2, -2, -2, -2, -3 };
        float sx[4] = { -0.0f, NAN, INFINITY, -INFINITY }, so[4];
        float inf[6] = { -1.2f, NAN, INFINITY, 2.8f, -INFINITY, INFINITY };
        uint8_t b[6];
        uint16_t h[3] = { 0x7c00, 0x7e00, 0x3c00 }, bf[3] = { 0xff80, 0x7fc0, 0x3f80 };
        struct ops_call c = call_n(1);
        int i;

        c.in[0] = tensor(F32, r, SHP(15));
        c.out[0].data = r;
        invoke("Round", 11, &c); /* halves to even, in place */
        for (i = 0; i < 15; i++)
                ck_assert_float_eq(r[i], rw[i]);
        c.in[0] = tensor(F32, sx, SHP(4));
        c.out[0].data = so;
        invoke("Sign", 13, &c);
        ck_assert(so[0] == 0 && signbit(so[0]));
        ck_assert(isnan(so[1]));
        ck_assert(so[2] == 1 && so[3] == -1);
        invoke("Relu", 14, &c);
        ck_assert(isnan(so[1]) && so[2] == INFINITY && so[3] == 0);
        invoke("Sigmoid", 13, &c);
        ck_assert(so[2] == 1 && so[3] == 0); /* no inf/inf */
        invoke("Softplus", 1, &c);
        ck_assert(so[2] == INFINITY && so[3] == 0);

        c.in[0] = tensor(F32, inf, SHP(6));
        c.out[0].data = b;
        invoke("IsInf", 10, &c);
        ck_assert_int_eq(c.out[0].dtype, BOOL);
        ck_assert(!b[0] && !b[1] && b[2] && !b[3] && b[4] && b[5]);
        attr_int(&c, "detect_positive", 0);
        invoke("IsInf", 10, &c);
        ck_assert(!b[2] && b[4] && !b[5]);
        c.nattr = 0;
        attr_int(&c, "detect_negative", 0);
        invoke("IsInf", 10, &c);
        ck_assert(b[2] && !b[4] && b[5]);
        c.nattr = 0;
        invoke("IsNaN", 13, &c);
        ck_assert(!b[0] && b[1] && !b[2] && !b[4]);
        c.in[0] = tensor(F16, h, SHP(3));
        invoke("IsNaN", 13, &c);
        ck_assert(!b[0] && b[1] && !b[2]);
        invoke("IsInf", 10, &c);
        ck_assert(b[0] && !b[1] && !b[2]);
        c.in[0] = tensor(BF16, bf, SHP(3));
        invoke("IsInf", 10, &c);
        ck_assert(b[0] && !b[1] && !b[2]);
        invoke("IsNaN", 13, &c);
        ck_assert(!b[0] && b[1] && !b[2]);
        attr_string(&c, "detect_negative", "yes");
        expect_infer_fail("IsInf", 10, &c, "attribute 'detect_negative' must be an int");
        c.nattr = 0;
        c.in[0] = tensor(I32, b, SHP(1));
        expect_infer_fail("IsNaN", 13, &c, "input 0 has unsupported dtype int32");
        expect_infer_fail("Exp", 13, &c, "input 0 has unsupported dtype int32");
        c.in[0] = tensor(U8, b, SHP(1));
        expect_infer_fail("Neg", 13, &c, "unsupported dtype uint8");
        expect_infer_fail("Relu", 14, &c, "unsupported dtype uint8");
        c.in[0] = tensor(BOOL, b, SHP(1));
        expect_infer_fail("Abs", 13, &c, "unsupported dtype bool");
}
END_TEST

/* ------------------------------------------------------------------ activations */

struct act_case {
        const char *op;
        const char *attr[2];
        double val[2]; /* NAN: leave the attribute out */
        double def[2];
};

static double act_ref(const char *op, const double *a, double x)
{
        if (!strcmp(op, "LeakyRelu"))
                return x < 0 ? a[0] * x : x;
        if (!strcmp(op, "Elu"))
                return x < 0 ? a[0] * (exp(x) - 1) : x;
        if (!strcmp(op, "Selu"))
                return x > 0 ? a[1] * x : a[1] * (a[0] * exp(x) - a[0]);
        if (!strcmp(op, "Celu"))
                return fmax(0, x) + fmin(0, a[0] * (exp(x / a[0]) - 1));
        if (!strcmp(op, "HardSigmoid"))
                return fmax(0, fmin(1, a[0] * x + a[1]));
        if (!strcmp(op, "ThresholdedRelu"))
                return x > a[0] ? x : 0;
        if (!strcmp(op, "Shrink"))
                return x < -a[0] ? x + a[1] : x > a[0] ? x - a[1] : 0;
        ck_abort_msg("no reference for %s", op);
        return 0;
}

static const struct act_case act_cases[] = {
        { "LeakyRelu", { "alpha" }, { NAN }, { 0.01 } },
        { "LeakyRelu", { "alpha" }, { 0.1 }, { 0.01 } },
        { "Elu", { "alpha" }, { NAN }, { 1.0 } },
        { "Elu", { "alpha" }, { 2.0 }, { 1.0 } },
        { "Selu", { "alpha", "gamma" }, { NAN, NAN },
          { 1.67326319217681884765625, 1.05070102214813232421875 } },
        { "Selu", { "alpha", "gamma" }, { 2.0, 3.0 }, { 0, 0 } },
        { "Celu", { "alpha" }, { NAN }, { 1.0 } },
        { "Celu", { "alpha" }, { 2.0 }, { 1.0 } },
        { "HardSigmoid", { "alpha", "beta" }, { NAN, NAN }, { 0.2, 0.5 } },
        { "HardSigmoid", { "alpha", "beta" }, { 0.5, 0.6 }, { 0, 0 } },
        { "ThresholdedRelu", { "alpha" }, { NAN }, { 1.0 } },
        { "ThresholdedRelu", { "alpha" }, { 2.0 }, { 1.0 } },
        { "Shrink", { "lambd", "bias" }, { NAN, NAN }, { 0.5, 0 } },
        { "Shrink", { "lambd", "bias" }, { 1.5, 1.5 }, { 0, 0 } },
        { "Shrink", { "lambd" }, { 1.5 }, { 0, 0 } },
};

START_TEST(test_activations)
{
        size_t k, t;
        int i, j;

        for (k = 0; k < NELEM(act_cases); k++)
                for (t = 0; t < NELEM(f3); t++) {
                        const struct act_case *a = &act_cases[k];
                        int dtype = f3[t];
                        double p[2];
                        struct ops_call c = call_n(1);
                        void *in = fill(dtype, 200, -5, 5), *out = calloc(200, 8);

                        for (j = 0; j < 2; j++) {
                                p[j] = a->def[j];
                                if (a->attr[j] && !isnan(a->val[j])) {
                                        attr_float(&c, a->attr[j], a->val[j]);
                                        p[j] = dtype == F64 ? a->val[j] : (float)a->val[j];
                                }
                        }
                        if (dtype != F64)
                                p[0] = (float)p[0], p[1] = (float)p[1];
                        c.in[0] = tensor(dtype, in, SHP(10, 20));
                        c.out[0].data = out;
                        invoke(a->op, 18, &c);
                        for (i = 0; i < 200; i++) {
                                double x = get(dtype, in, i);
                                double want = rounded(dtype, act_ref(a->op, p, x));

                                ck_assert_msg(close_to(dtype, get(dtype, out, i), want, 1e-6),
                                              "%s %s (case %zu): f(%g) = %g, want %g", a->op,
                                              proto_dtype_name(dtype), k, x,
                                              get(dtype, out, i), want);
                        }
                        free(in);
                        free(out);
                }
}
END_TEST

START_TEST(test_activation_attrs)
{
        float x[5] = { -2, -1, 0, 1, 2 }, y[5];
        int32_t ix[5] = { -2, -1, 0, 1, 2 }, iy[5];
        struct ops_call c = call_n(1);

        /* node test shrink_soft, then integer Shrink through double */
        c.in[0] = tensor(F32, x, SHP(5));
        c.out[0].data = y;
        attr_float(&c, "bias", 1.5);
        attr_float(&c, "lambd", 1.5);
        invoke("Shrink", 9, &c);
        ck_assert(y[0] == -0.5f && y[1] == 0 && y[2] == 0 && y[4] == 0.5f);
        c.in[0] = tensor(I32, ix, SHP(5));
        c.out[0].data = iy;
        c.nattr = 0;
        attr_float(&c, "lambd", 0.5);
        attr_int(&c, "bias", 1);
        invoke("Shrink", 9, &c);
        ck_assert(iy[0] == -1 && iy[1] == 0 && iy[2] == 0 && iy[3] == 0 && iy[4] == 1);
        /* attributes of the wrong type or unknown, Celu's alpha 0 */
        c.in[0] = tensor(F32, x, SHP(5));
        c.nattr = 0;
        attr_string(&c, "alpha", "big");
        expect_infer_fail("LeakyRelu", 16, &c, "attribute 'alpha' must be a float");
        c.nattr = 0;
        attr_float(&c, "alpha", 0);
        expect_infer_fail("Celu", 12, &c, "attribute 'alpha' must not be 0");
        c.nattr = 0;
        attr_float(&c, "beta", 0);
        c.out[0] = tensor(F32, NULL, SHP(5));
        expect_check_fail("LeakyRelu", 16, &c, "unknown attribute 'beta'");
        c.nattr = 0;
        attr_float(&c, "alpha", 0.5);
        attr_float(&c, "alpha", 0.5);
        expect_check_fail("Elu", 6, &c, "attribute 'alpha' given twice");
        c.nattr = 0;
        c.in[0] = tensor(I32, NULL, SHP(5));
        expect_infer_fail("HardSigmoid", 6, &c, "unsupported dtype int32");
}
END_TEST

START_TEST(test_prelu)
{
        float x[2][3] = { { -1, 2, -3 }, { 4, -5, 6 } }, s[3] = { 0.5f, 2, -1 }, y[6];
        float s1 = 0.25f;
        int64_t ix[4] = { -3, 3, INT64_MIN, -1 }, is = 2, iy[4];
        uint32_t ux[2] = { 5, 6 }, us[2] = { 9, 9 }, uy[2];
        struct ops_call c = call_n(2);

        c.in[0] = tensor(F32, x, SHP(2, 3));
        c.in[1] = tensor(F32, s, SHP(3));
        c.out[0].data = y;
        invoke("PRelu", 16, &c);
        ck_assert(y[0] == -0.5f && y[1] == 2 && y[2] == 3 && y[3] == 4 && y[4] == -10);
        c.in[1] = tensor(F32, &s1, SHP(1, 1, 1)); /* one element of any rank */
        invoke("PRelu", 9, &c);
        ck_assert_int_eq(c.out[0].ndim, 2);
        ck_assert(y[0] == -0.25f && y[4] == -1.25f);
        c.in[0] = tensor(I64, ix, SHP(4));
        c.in[1] = tensor(I64, &is, SCALAR);
        c.out[0].data = iy;
        invoke("PRelu", 16, &c);
        ck_assert(iy[0] == -6 && iy[1] == 3 && iy[2] == 0 && iy[3] == -2); /* wraps */
        c.in[0] = tensor(U32, ux, SHP(2));
        c.in[1] = tensor(U32, us, SHP(2));
        c.out[0].data = uy;
        invoke("PRelu", 16, &c);
        ck_assert(uy[0] == 5 && uy[1] == 6);
        /* the slope broadcasts to X, not the other way */
        c.in[0] = tensor(F32, x, SHP(3));
        c.in[1] = tensor(F32, x, SHP(2, 3));
        expect_infer_fail("PRelu", 16, &c, "input 1 shape [2,3] does not broadcast to input 0 shape [3]");
        c.in[0] = tensor(I8, x, SHP(3));
        c.in[1] = tensor(I8, x, SHP(3));
        expect_infer_fail("PRelu", 16, &c, "unsupported dtype int8");
}
END_TEST

START_TEST(test_clip)
{
        float x[5] = { -3, -1, 0.5f, 2, NAN }, lo = -1.5f, hi = 1.0f, y[5];
        int8_t ix[4] = { -128, -1, 5, 127 }, ilo = -2, iy[4];
        uint64_t ux[3] = { 0, 5, UINT64_MAX }, uhi = 7, uy[3];
        uint16_t hx[3], hy[3];
        struct ops_call c = call_n(3);
        int i;

        c.in[0] = tensor(F32, x, SHP(5));
        c.in[1] = tensor(F32, &lo, SCALAR);
        c.in[2] = tensor(F32, &hi, SCALAR);
        c.out[0].data = y;
        invoke("Clip", 13, &c);
        ck_assert(y[0] == -1.5f && y[1] == -1 && y[2] == 0.5f && y[3] == 1 && isnan(y[4]));
        /* min only, max omitted (dtype 0), and the reverse */
        c.in[2] = tensor(0, NULL, SCALAR);
        invoke("Clip", 13, &c);
        ck_assert(y[0] == -1.5f && y[3] == 2);
        c.in[1] = tensor(0, NULL, SCALAR);
        c.in[2] = tensor(F32, &hi, SCALAR);
        invoke("Clip", 11, &c);
        ck_assert(y[0] == -3 && y[3] == 1);
        c.nin = 1;
        invoke("Clip", 13, &c);
        ck_assert(y[0] == -3 && y[3] == 2);
        /* min above max: max everywhere */
        c.nin = 3;
        c.in[1] = tensor(F32, &hi, SCALAR);
        c.in[2] = tensor(F32, &lo, SCALAR);
        invoke("Clip", 13, &c);
        for (i = 0; i < 4; i++)
                ck_assert_float_eq(y[i], lo);
        /* integers: omitted bounds are the dtype's limits */
        c = call_n(2);
        c.in[0] = tensor(I8, ix, SHP(4));
        c.in[1] = tensor(I8, &ilo, SCALAR);
        c.out[0].data = iy;
        invoke("Clip", 13, &c);
        ck_assert(iy[0] == -2 && iy[1] == -1 && iy[2] == 5 && iy[3] == 127);
        c = call_n(3);
        c.in[0] = tensor(U64, ux, SHP(3));
        c.in[2] = tensor(U64, &uhi, SCALAR);
        c.out[0].data = uy;
        invoke("Clip", 12, &c);
        ck_assert(uy[0] == 0 && uy[1] == 5 && uy[2] == 7);
        /* Clip-6: attributes, defaults +-FLT_MAX */
        c = call_n(1);
        c.in[0] = tensor(F32, x, SHP(5));
        c.out[0].data = y;
        attr_float(&c, "min", -0.5);
        invoke("Clip", 6, &c);
        ck_assert(y[0] == -0.5f && y[3] == 2 && isnan(y[4]));
        attr_float(&c, "max", 1.5);
        invoke("Clip", 10, &c);
        ck_assert(y[0] == -0.5f && y[3] == 1.5f);
        for (i = 0; i < 3; i++)
                hx[i] = ops_float_to_half((float)i * 2 - 2);
        c.in[0] = tensor(F16, hx, SHP(3));
        c.out[0].data = hy;
        invoke("Clip", 6, &c);
        ck_assert_float_eq(ops_half_to_float(hy[0]), -0.5f);
        ck_assert_float_eq(ops_half_to_float(hy[2]), 1.5f);
        /* Clip-6 has no inputs for bounds, Clip-11 no attributes for them */
        c = call_n(2);
        c.in[0] = tensor(F32, x, SHP(5));
        c.in[1] = tensor(F32, &lo, SCALAR);
        expect_infer_fail("Clip", 6, &c, "expected 1 input");
        c.out[0] = tensor(F32, NULL, SHP(5));
        attr_float(&c, "min", 0);
        expect_check_fail("Clip", 11, &c, "unknown attribute 'min'");
        c.nattr = 0;
        c.in[1] = tensor(F64, &lo, SCALAR);
        expect_infer_fail("Clip", 13, &c, "input 1 dtype float64 does not match input 0 dtype float32");
        c.in[0] = tensor(I32, x, SHP(5));
        c.nin = 1;
        expect_infer_fail("Clip", 10, &c, "unsupported dtype int32");
}
END_TEST

/* ------------------------------------------------------------------ logic, comparisons */

static double cmp_ref(const char *op, double a, double b)
{
        if (!strcmp(op, "Equal"))
                return a == b;
        if (!strcmp(op, "Less"))
                return a < b;
        if (!strcmp(op, "LessOrEqual"))
                return a <= b;
        if (!strcmp(op, "Greater"))
                return a > b;
        return a >= b;
}

START_TEST(test_comparisons)
{
        static const char *const ops[] = { "Equal", "Less", "LessOrEqual", "Greater",
                                           "GreaterOrEqual" };
        size_t o, t;
        int64_t i;

        for (o = 0; o < NELEM(ops); o++)
                for (t = 0; t < NELEM(all_numeric); t++) {
                        int dtype = all_numeric[t];
                        struct ops_tensor ta = tensor(dtype, NULL, SHP(4, 1, 5));
                        struct ops_tensor tb = tensor(dtype, NULL, SHP(3, 5));
                        struct ops_call c = call_n(2);
                        uint8_t out[60];

                        ta.data = fill(dtype, 20, 0, 4); /* few values, so ties occur */
                        tb.data = fill(dtype, 15, 0, 4);
                        c.in[0] = ta;
                        c.in[1] = tb;
                        c.out[0].data = out;
                        invoke(ops[o], 16, &c);
                        ck_assert_int_eq(c.out[0].dtype, BOOL);
                        ck_assert_int_eq(numel(&c.out[0]), 60);
                        for (i = 0; i < 60; i++) {
                                double a = get(dtype, ta.data, bcast_index(&ta, &c.out[0], i));
                                double b = get(dtype, tb.data, bcast_index(&tb, &c.out[0], i));

                                ck_assert_msg(out[i] == cmp_ref(ops[o], a, b), "%s %s: %g, %g",
                                              ops[o], proto_dtype_name(dtype), a, b);
                        }
                        free(ta.data);
                        free(tb.data);
                }
        /* NaN compares false, except Equal is false too */
        {
                float a[2] = { NAN, 1 }, b[2] = { NAN, NAN };
                uint8_t r[2];
                struct ops_call c = call_n(2);

                c.in[0] = tensor(F32, a, SHP(2));
                c.in[1] = tensor(F32, b, SHP(2));
                c.out[0].data = r;
                for (o = 0; o < NELEM(ops); o++) {
                        invoke(ops[o], 13, &c);
                        ck_assert(!r[0] && !r[1]);
                }
        }
}
END_TEST

START_TEST(test_logic)
{
        uint8_t a[3][4] = { { 1, 0, 1, 0 }, { 0, 0, 1, 1 }, { 1, 1, 0, 0 } };
        uint8_t b[4] = { 1, 0, 7, 0 }, o[12];
        struct ops_call c = call_n(2);
        int i;

        c.in[0] = tensor(BOOL, a, SHP(3, 4));
        c.in[1] = tensor(BOOL, b, SHP(4));
        c.out[0].data = o;
        invoke("And", 7, &c);
        for (i = 0; i < 12; i++)
                ck_assert_uint_eq(o[i], (a[i / 4][i % 4] && b[i % 4]));
        invoke("Or", 7, &c);
        for (i = 0; i < 12; i++)
                ck_assert_uint_eq(o[i], (a[i / 4][i % 4] || b[i % 4]));
        invoke("Xor", 7, &c);
        for (i = 0; i < 12; i++)
                ck_assert_uint_eq(o[i], (!a[i / 4][i % 4] != !b[i % 4]));
        invoke("Equal", 11, &c);
        for (i = 0; i < 12; i++)
                ck_assert_uint_eq(o[i], (!a[i / 4][i % 4] == !b[i % 4])); /* 7 is true */
        c.nin = 1;
        c.in[0] = tensor(BOOL, b, SHP(4));
        invoke("Not", 1, &c);
        ck_assert(!o[0] && o[1] && !o[2] && o[3]);
        c.in[0] = tensor(I32, b, SHP(1));
        expect_infer_fail("Not", 1, &c, "unsupported dtype int32");
        c.nin = 2;
        c.in[1] = tensor(I32, b, SHP(1));
        expect_infer_fail("And", 7, &c, "unsupported dtype int32");
        c.in[0] = tensor(BOOL, b, SHP(1));
        c.in[1] = tensor(BOOL, b, SHP(1));
        expect_infer_fail("Less", 13, &c, "unsupported dtype bool");
}
END_TEST

START_TEST(test_where)
{
        uint8_t cond[2][2] = { { 1, 0 }, { 1, 1 } }, crow[3] = { 1, 0, 1 };
        int64_t x[4] = { 1, 2, 3, 4 }, y[4] = { 9, 8, 7, 6 }, o64[4];
        size_t t;
        int64_t i;

        {
                struct ops_call c = call_n(3);

                c.in[0] = tensor(BOOL, cond, SHP(2, 2));
                c.in[1] = tensor(I64, x, SHP(2, 2));
                c.in[2] = tensor(I64, y, SHP(2, 2));
                c.out[0].data = o64;
                invoke("Where", 16, &c);
                ck_assert(o64[0] == 1 && o64[1] == 8 && o64[2] == 3 && o64[3] == 4);
        }
        /* every dtype, all three inputs broadcast: [3], [2,1], [] */
        for (t = 0; t < NELEM(all_numeric) + 1; t++) {
                int dtype = t < NELEM(all_numeric) ? all_numeric[t] : BOOL;
                struct ops_call c = call_n(3);
                void *xs = fill(dtype, 2, 0, 9), *ys = fill(dtype, 1, 0, 9), *o = calloc(6, 8);

                c.in[0] = tensor(BOOL, crow, SHP(3));
                c.in[1] = tensor(dtype, xs, SHP(2, 1));
                c.in[2] = tensor(dtype, ys, SCALAR);
                c.out[0].data = o;
                invoke("Where", 9, &c);
                ck_assert_int_eq(c.out[0].dtype, dtype);
                ck_assert_int_eq(c.out[0].ndim, 2);
                for (i = 0; i < 6; i++)
                        ck_assert(get(dtype, o, i) ==
                                  (crow[i % 3] ? get(dtype, xs, i / 3) : get(dtype, ys, 0)));
                free(xs);
                free(ys);
                free(o);
        }
        {
                struct ops_call c = call_n(3);

                c.in[0] = tensor(I32, cond, SHP(2, 2));
                c.in[1] = tensor(I64, x, SHP(2, 2));
                c.in[2] = tensor(I64, y, SHP(2, 2));
                expect_infer_fail("Where", 16, &c, "input 0 (condition) is int32, not bool");
                c.in[0].dtype = BOOL;
                c.in[2].dtype = I32;
                expect_infer_fail("Where", 16, &c, "input 2 dtype int32 does not match input 1 dtype int64");
                c.in[2] = tensor(I64, y, SHP(3));
                expect_infer_fail("Where", 16, &c, "cannot broadcast shapes [2,2] and [3]");
        }
}
END_TEST

START_TEST(test_bitshift)
{
        uint8_t x8[4] = { 16, 4, 1, 255 }, y8[4] = { 1, 2, 3, 8 }, z8[4];
        uint16_t x16[2] = { 0xffff, 0x8000 }, y16 = 15, z16[2];
        uint64_t x64[4] = { 16, 4, 1, 1 }, y64[4] = { 1, 2, 3, 64 }, z64[4];
        struct ops_call c = call_n(2);

        c.in[0] = tensor(U8, x8, SHP(4));
        c.in[1] = tensor(U8, y8, SHP(4));
        c.out[0].data = z8;
        attr_string(&c, "direction", "LEFT");
        invoke("BitShift", 11, &c);
        ck_assert(z8[0] == 32 && z8[1] == 16 && z8[2] == 8 && z8[3] == 0);
        c.attr[0].s = "RIGHT";
        invoke("BitShift", 11, &c);
        ck_assert(z8[0] == 8 && z8[1] == 1 && z8[2] == 0 && z8[3] == 0);
        c.in[0] = tensor(U16, x16, SHP(2));
        c.in[1] = tensor(U16, &y16, SCALAR);
        c.out[0].data = z16;
        c.attr[0].s = "LEFT";
        invoke("BitShift", 11, &c);
        ck_assert(z16[0] == 0x8000 && z16[1] == 0);
        c.in[0] = tensor(U64, x64, SHP(4));
        c.in[1] = tensor(U64, y64, SHP(4));
        c.out[0].data = z64;
        c.nattr = 0;
        attr_int(&c, "direction", 1); /* the wire's spelling of RIGHT */
        invoke("BitShift", 11, &c);
        ck_assert(z64[0] == 8 && z64[1] == 1 && z64[2] == 0 && z64[3] == 0);
        c.attr[0].i = 0;
        invoke("BitShift", 11, &c);
        ck_assert(z64[0] == 32 && z64[3] == 0);
        c.attr[0].i = 2;
        expect_infer_fail("BitShift", 11, &c, "'direction' must be LEFT or RIGHT");
        c.nattr = 0;
        attr_string(&c, "direction", "UP");
        expect_infer_fail("BitShift", 11, &c, "'direction' must be LEFT or RIGHT");
        c.nattr = 0;
        expect_infer_fail("BitShift", 11, &c, "attribute 'direction' is required");
        attr_string(&c, "direction", "LEFT");
        c.in[0] = tensor(I32, x64, SHP(4));
        c.in[1] = tensor(I32, y64, SHP(4));
        expect_infer_fail("BitShift", 11, &c, "unsupported dtype int32");
}
END_TEST

/* ------------------------------------------------------------------ Cast, CastLike */

START_TEST(test_cast)
{
        float f[6] = { 0.4789254665374756f, 0.48033666610717773f, NAN, INFINITY, -INFINITY,
                       1.00390625f };
        uint16_t bf[6], back16[6];
        float back[6];
        double d[3] = { 1.0 + 0x1p-8 + 0x1p-30, -1e300, 3.5 };
        int32_t i32[3];
        struct ops_call c = call_n(1);
        int i;

        c.in[0] = tensor(F32, f, SHP(2, 3));
        c.out[0].data = bf;
        attr_int(&c, "to", BF16);
        invoke("Cast", 13, &c);
        ck_assert_int_eq(c.out[0].dtype, BF16);
        ck_assert_uint_eq(bf[0], 0x3ef5);
        ck_assert_uint_eq(bf[1], 0x3ef6); /* rounds to nearest (ONNX 1.12 data truncate) */
        ck_assert_uint_eq(bf[2], 0x7fc0);
        ck_assert_uint_eq(bf[3], 0x7f80);
        ck_assert_uint_eq(bf[4], 0xff80);
        ck_assert_uint_eq(bf[5], 0x3f80); /* a tie: to even */
        c.in[0] = tensor(BF16, bf, SHP(6));
        c.out[0].data = back;
        c.attr[0].i = F32;
        invoke("Cast", 13, &c);
        ck_assert_float_eq(back[0], 0.478515625f);
        ck_assert(isnan(back[2]) && back[3] == INFINITY);
        /* double to bfloat16 rounds once: just above a tie goes up */
        c.in[0] = tensor(F64, d, SHP(3));
        c.out[0].data = back16;
        c.attr[0].i = BF16;
        invoke("Cast", 13, &c);
        ck_assert_uint_eq(back16[0], 0x3f81);
        ck_assert_uint_eq(back16[1], 0xff80);
        c.attr[0].i = I32;
        c.out[0].data = i32;
        invoke("Cast", 6, &c);
        ck_assert_int_eq(i32[0], 1);
        ck_assert_int_eq(i32[1], INT32_MIN);
        ck_assert_int_eq(i32[2], 3);
        /* infer needs 'to' */
        c.nattr = 0;
        expect_infer_fail("Cast", 13, &c, "attribute 'to' (an int) is required");
        attr_int(&c, "to", 14); /* complex64 */
        expect_infer_fail("Cast", 13, &c, "unsupported target dtype dtype 14");
        /* CastLike: the second input's dtype, any shape */
        c = call_n(2);
        c.in[0] = tensor(F32, f, SHP(2, 3));
        c.in[1] = tensor(F16, bf, SHP(5, 7));
        c.out[0].data = back16;
        invoke("CastLike", 15, &c);
        ck_assert_int_eq(c.out[0].dtype, F16);
        ck_assert_int_eq(c.out[0].ndim, 2);
        ck_assert_uint_eq(back16[3], 0x7c00);
        for (i = 0; i < 2; i++)
                ck_assert_float_eq_tol(ops_half_to_float(back16[i]), f[i], 1e-3);
        c.in[1].dtype = 99;
        expect_infer_fail("CastLike", 15, &c, "input 1 has unsupported dtype dtype 99");
}
END_TEST

/* The vectorized 16-bit float conversions (Cast and every float16/bfloat16 kernel) give
 * the bits of ops_half_to_float, ops_float_to_half and the bfloat16 helpers: all 65536
 * halves and bfloat16s, every half's value, the midpoints between neighbouring halves
 * (ties) and the floats next to them, and random float bit patterns. */
START_TEST(test_convert_16bit)
{
        enum { NH = 65536, NF = 6 * NH };
        uint16_t *h = malloc(NH * sizeof(*h)), *h2 = malloc(NF * sizeof(*h2));
        float *f = malloc(NF * sizeof(*f)), *f2 = malloc(NH * sizeof(*f2));
        struct ops_call c = call_n(1);
        uint32_t bits;
        int64_t i, bad = 0;

        for (i = 0; i < NH; i++)
                h[i] = (uint16_t)i;
        c.in[0] = tensor(F16, h, SHP(NH));
        c.out[0].data = f2;
        attr_int(&c, "to", F32);
        invoke("Cast", 13, &c);
        for (i = 0; i < NH; i++) {
                float want = ops_half_to_float(h[i]);

                bad += memcmp(&f2[i], &want, 4) != 0;
        }
        ck_assert_int_eq(bad, 0);
        c.in[0] = tensor(BF16, h, SHP(NH));
        invoke("Cast", 13, &c);
        for (i = 0; i < NH; i++) {
                float want = ops_bf16_to_float(h[i]);

                bad += memcmp(&f2[i], &want, 4) != 0;
        }
        ck_assert_int_eq(bad, 0);
        for (i = 0; i < NH; i++) {
                float lo = ops_half_to_float((uint16_t)i), hi;

                f[6 * i] = lo;
                if ((i & 0x7fff) >= 0x7c00) {
                        bits = rng() | (rng() << 16);
                        memcpy(&f[6 * i + 1], &bits, 4);
                        f[6 * i + 2] = f[6 * i + 3] = f[6 * i + 4] = f[6 * i + 1];
                } else {
                        hi = (i & 0x7fff) == 0x7bff ? 65536.0f * (i & 0x8000 ? -1 : 1)
                                                    : ops_half_to_float((uint16_t)(i + 1));
                        f[6 * i + 1] = (lo + hi) / 2; /* exact: a tie */
                        f[6 * i + 2] = nextafterf(f[6 * i + 1], INFINITY);
                        f[6 * i + 3] = nextafterf(f[6 * i + 1], -INFINITY);
                        f[6 * i + 4] = nextafterf(lo, hi);
                }
                bits = rng() ^ (rng() << 15);
                memcpy(&f[6 * i + 5], &bits, 4);
        }
        c.in[0] = tensor(F32, f, SHP(NF));
        c.out[0].data = h2;
        c.attr[0].i = F16;
        invoke("Cast", 13, &c);
        for (i = 0; i < NF; i++)
                if (h2[i] != ops_float_to_half(f[i]) && bad++ < 5)
                        ck_assert_msg(0, "float16 of %a: %04x, want %04x", f[i], h2[i],
                                      ops_float_to_half(f[i]));
        c.attr[0].i = BF16;
        invoke("Cast", 13, &c);
        for (i = 0; i < NF; i++)
                if (h2[i] != ops_float_to_bf16(f[i]) && bad++ < 5)
                        ck_assert_msg(0, "bfloat16 of %a: %04x, want %04x", f[i], h2[i],
                                      ops_float_to_bf16(f[i]));
        free(h);
        free(h2);
        free(f);
        free(f2);
}
END_TEST

/* ------------------------------------------------------------------ engine */

/* Random shapes of rank 0-4 with extents 1-3 broadcast against each other, for a binary
 * and a ternary operator, with float16 (converted in chunks) and int16. */
START_TEST(test_broadcast_walk)
{
        int iter;

        for (iter = 0; iter < 300; iter++) {
                int64_t out_dims[4], da[4], db[4];
                int r = (int)(rng() % 5), ra = r - (int)(rng() % (r + 1)), rb = r, d;
                int dtype = iter % 3 == 0 ? F16 : iter % 3 == 1 ? I16 : F32;

                for (d = 0; d < r; d++)
                        out_dims[d] = 1 + rng() % 3;
                for (d = 0; d < ra; d++)
                        da[d] = rng() % 2 ? out_dims[d + r - ra] : 1;
                for (d = 0; d < rb; d++)
                        db[d] = rng() % 2 ? out_dims[d] : 1;
                binary_case(B_SUB, dtype, ra, da, rb, db);
                binary_case(B_MAX, dtype, rb, db, ra, da);
        }
}
END_TEST

/* The scheduler splits elementwise calls into element ranges: inputs with the output's
 * element count become 1-D slices, one-element inputs stay whole (tile.c). */
START_TEST(test_tile_split)
{
        float x[10], lo = 2, y[10];
        uint8_t cond[10];
        int64_t i, k;

        for (i = 0; i < 10; i++) {
                x[i] = (float)i;
                cond[i] = (uint8_t)(i & 1);
        }
        for (k = 0; k < 10; k += 3) {
                int64_t m = k + 3 <= 10 ? 3 : 10 - k;
                struct ops_call c = call_n(3);

                /* Clip with max omitted: the omitted input arrives as a 1-D, dtype 0 */
                c.in[0] = tensor(F32, x + k, SHP(m));
                c.in[1] = tensor(F32, &lo, SHP(1));
                c.in[2] = tensor(0, NULL, SHP(1));
                c.out[0] = tensor(F32, y + k, SHP(m));
                invoke("Clip", 13, &c);
                /* Where on slices */
                c.in[0] = tensor(BOOL, cond + k, SHP(m));
                c.in[1] = tensor(F32, y + k, SHP(m));
                c.in[2] = tensor(F32, &lo, SHP(1));
                invoke("Where", 16, &c);
        }
        for (i = 0; i < 10; i++)
                ck_assert_float_eq(y[i], (i & 1) ? fmaxf((float)i, 2) : 2);
}
END_TEST

/* Outputs that alias an input exactly, for the contiguous, scalar and strided paths. */
START_TEST(test_in_place)
{
        double a[40], a0[40], row[8];
        uint16_t h[300], h0[300];
        struct ops_call c = call_n(2);
        int i;

        for (i = 0; i < 40; i++)
                a[i] = a0[i] = rng_range(-5, 5);
        for (i = 0; i < 8; i++)
                row[i] = rng_range(1, 2);
        c.in[0] = tensor(F64, a, SHP(5, 8));
        c.in[1] = tensor(F64, row, SHP(8));
        c.out[0].data = a;
        invoke("Div", 14, &c);
        for (i = 0; i < 40; i++)
                ck_assert(a[i] == a0[i] / row[i % 8]);
        /* out == b, non-commutative, through the float16 conversion */
        for (i = 0; i < 300; i++)
                h[i] = h0[i] = ops_float_to_half((float)rng_range(-4, 4));
        c.in[0] = tensor(F16, h, SHP(300));
        c.in[1] = tensor(F16, h, SHP(300));
        c.out[0].data = h;
        invoke("Sub", 14, &c);
        for (i = 0; i < 300; i++)
                ck_assert_uint_eq(h[i] & 0x7fff, 0);
        for (i = 0; i < 300; i++)
                h[i] = h0[i];
        c = call_n(1);
        c.in[0] = tensor(F16, h, SHP(300));
        c.out[0].data = h;
        invoke("Neg", 13, &c);
        for (i = 0; i < 300; i++)
                ck_assert_uint_eq(h[i], h0[i] ^ 0x8000);
}
END_TEST

/* ------------------------------------------------------------------ check, cost */

START_TEST(test_check_messages)
{
        struct ops_call c = call_n(2), bad;
        char err[256];

        c.in[0] = tensor(F64, NULL, SHP(2, 3));
        c.in[1] = tensor(F64, NULL, SHP(3));
        c.out[0] = tensor(F64, NULL, SHP(2, 3));
        ck_assert_int_eq(ops_check(ops_lookup("Pow"), &c, err, sizeof(err)), 0);
        bad = c;
        bad.out[0].dtype = F32;
        expect_check_fail("Pow", 15, &bad, "output dtype float32 but expected float64");
        bad = c;
        bad.out[0].dims[1] = 4;
        expect_check_fail("Greater", 13, &bad, "output dtype float64 but expected bool");
        expect_check_fail("Mod", 13, &bad, "attribute 'fmod' must be 1");
        bad.out[0].dtype = BOOL;
        bad.out[0].dims[1] = 4;
        expect_check_fail("Less", 13, &bad, "output shape [2,4] but expected [2,3]");
        bad = c;
        bad.nin = 3;
        expect_check_fail("Mul", 14, &bad, "expected 2 inputs, got 3");
        bad = c;
        bad.in[1].dims[0] = -1;
        expect_check_fail("Max", 13, &bad, "negative dimension");
        bad = c;
        bad.nout = 2;
        expect_check_fail("Equal", 13, &bad, "expected 1 output, got 2");
        bad = c;
        bad.nattr = OPS_MAX_ATTRS + 1;
        expect_check_fail("Xor", 7, &bad, "invalid attribute count");
        bad = c;
        memset(bad.attr[0].name, 'a', OPS_NAME_MAX);
        bad.nattr = 1;
        expect_check_fail("Sum", 13, &bad, "unterminated name");
        bad = c;
        bad.in[1].dtype = 99;
        expect_check_fail("Min", 13, &bad, "input 1 dtype dtype 99 does not match input 0 dtype float64");
        /* infer refuses counts too (graphs call it directly) */
        bad = c;
        bad.nin = 1;
        expect_infer_fail("Add", 14, &bad, "expected 2 inputs and 1 output, got 1 and 1");
        bad.nin = 0;
        expect_infer_fail("Max", 13, &bad, "expected 1 to 16 inputs and 1 output, got 0 and 1");
}
END_TEST

START_TEST(test_cost)
{
        struct ops_call c = call_n(2);
        uint64_t flops, bytes;

        c.in[0] = tensor(F64, NULL, SHP(2, 3));
        c.in[1] = tensor(F64, NULL, SHP(3));
        c.out[0] = tensor(F64, NULL, SHP(2, 3));
        ops_cost(ops_lookup("Pow"), &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 6 * 8);
        ck_assert_uint_eq(bytes, (6 + 3 + 6) * 8);
        c.out[0].dtype = BOOL;
        ops_cost(ops_lookup("Less"), &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 6);
        ck_assert_uint_eq(bytes, (6 + 3) * 8 + 6);
        c.nin = 3;
        c.in[2] = tensor(0, NULL, SCALAR); /* omitted: no bytes */
        c.out[0].dtype = F64;
        ops_cost(ops_lookup("Clip"), &c, &flops, &bytes);
        ck_assert_uint_eq(bytes, (6 + 3 + 6) * 8);
}
END_TEST

static Suite *ew_suite(void)
{
        Suite *s = suite_create("ops_elementwise");
        TCase *tc;

        tc = tcase_create("registry");
        tcase_add_test(tc, test_registry);
        tcase_add_test(tc, test_check_messages);
        tcase_add_test(tc, test_cost);
        suite_add_tcase(s, tc);

        tc = tcase_create("binary");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_add_sub_mul_div);
        tcase_add_test(tc, test_max_min_mod);
        tcase_add_test(tc, test_int_edges);
        tcase_add_test(tc, test_division_by_zero);
        tcase_add_test(tc, test_div_pow2_exact);
        tcase_add_test(tc, test_pow_types);
        tcase_add_test(tc, test_mod_node_values);
        tcase_add_test(tc, test_variadic);
        suite_add_tcase(s, tc);

        tc = tcase_create("unary");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_unary);
        tcase_add_test(tc, test_unary_special);
        tcase_add_test(tc, test_activations);
        tcase_add_test(tc, test_activation_attrs);
        tcase_add_test(tc, test_prelu);
        tcase_add_test(tc, test_clip);
        suite_add_tcase(s, tc);

        tc = tcase_create("logic");
        tcase_add_test(tc, test_comparisons);
        tcase_add_test(tc, test_logic);
        tcase_add_test(tc, test_where);
        tcase_add_test(tc, test_bitshift);
        tcase_add_test(tc, test_cast);
        tcase_add_test(tc, test_convert_16bit);
        suite_add_tcase(s, tc);

        tc = tcase_create("engine");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_broadcast_walk);
        tcase_add_test(tc, test_tile_split);
        tcase_add_test(tc, test_in_place);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(ew_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

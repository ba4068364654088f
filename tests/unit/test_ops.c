/* Unit tests of the operator library in daemon/ops: the registry, attribute helpers, half
 * conversions against an independent double-precision reference, every operator's results
 * against references computed here (broadcasting, batching, 1-D MatMul, Softmax axes, Cast
 * edge cases, outputs aliasing inputs), each check rejecting bad calls with a message that
 * names the operator, and the cost estimates. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define F32 PROTO_DTYPE_FLOAT32
#define F16 PROTO_DTYPE_FLOAT16
#define F64 PROTO_DTYPE_FLOAT64
#define I32 PROTO_DTYPE_INT32
#define I64 PROTO_DTYPE_INT64
#define U8 PROTO_DTYPE_UINT8
#define I8 PROTO_DTYPE_INT8
#define BOOL PROTO_DTYPE_BOOL

/* SHP(2, 3) expands to a rank and a dims array. */
#define SHP(...)                                                                               \
        (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)),                           \
                (const int64_t[]){ __VA_ARGS__ }
#define SCALAR 0, NULL

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rng(void)
{
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t)(rng_state >> 33);
}

/* Uniform in [-1, 1). */
static float rng_unit(void)
{
        return (float)((double)rng() / 2147483648.0 - 1.0);
}

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

static struct ops_call call1(struct ops_tensor a, struct ops_tensor out)
{
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        c.nin = 1;
        c.nout = 1;
        c.in[0] = a;
        c.out[0] = out;
        return c;
}

static struct ops_call call2(struct ops_tensor a, struct ops_tensor b, struct ops_tensor out)
{
        struct ops_call c = call1(a, out);

        c.nin = 2;
        c.in[1] = b;
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

/* Runs check on a copy without data pointers, as the daemon does, then run. */
static int invoke(const char *op, const struct ops_call *c, char *err, size_t errlen)
{
        const struct ops_def *def = ops_lookup(op);
        struct ops_call nodata = *c;
        int i, rc;

        ck_assert_ptr_nonnull(def);
        for (i = 0; i < OPS_MAX_INPUTS; i++)
                nodata.in[i].data = NULL;
        for (i = 0; i < OPS_MAX_OUTPUTS; i++)
                nodata.out[i].data = NULL;
        err[0] = '\0';
        rc = ops_check(def, &nodata, err, errlen);
        if (rc)
                return rc;
        return ops_run(def, c, err, errlen);
}

static void invoke_ok(const char *op, const struct ops_call *c)
{
        char err[256];
        int rc = invoke(op, c, err, sizeof(err));

        ck_assert_msg(rc == 0, "%s failed (%d): %s", op, rc, err);
}

/* check must fail with -EINVAL and a message "<op>: ..." containing want. */
static void expect_reject(const char *op, const struct ops_call *c, const char *want)
{
        const struct ops_def *def = ops_lookup(op);
        char err[256] = "";
        size_t n = strlen(op);
        int rc;

        ck_assert_ptr_nonnull(def);
        rc = ops_check(def, c, err, sizeof(err));
        ck_assert_msg(rc == -EINVAL, "%s: check returned %d, wanted -EINVAL (want \"%s\")", op,
                      rc, want);
        ck_assert_msg(strncmp(err, op, n) == 0 && err[n] == ':', "message \"%s\" does not name %s",
                      err, op);
        if (want)
                ck_assert_msg(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

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

/* ---------------------------------------------------------------- registry, attributes */

START_TEST(test_registry)
{
        static const char *const names[] = { "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid",
                                             "Tanh", "MatMul", "Softmax", "Cast" };
        const struct ops_def *d;
        size_t i, j, count = 0;

        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                d = ops_lookup(names[i]);
                ck_assert_ptr_nonnull(d);
                ck_assert_str_eq(d->name, names[i]);
                ck_assert(d->check || d->infer); /* NULL: the default check through infer */
                ck_assert_ptr_nonnull(d->run);
                ck_assert_ptr_nonnull(d->cost);
                ck_assert_int_eq(d->outputs, 1);
                ck_assert_int_le(d->min_inputs, d->max_inputs);
        }
        /* Families register more operators; a name may have several definitions (one per
         * ONNX opset where its semantics changed), never two with the same domain, name and
         * since_version, and lookup by name finds the first registered. */
        for (i = 0; (d = ops_get(i)); i++) {
                const struct ops_def *e, *first = ops_lookup(d->name);

                count++;
                if (!d->domain)
                        ck_assert_ptr_nonnull(first);
                for (j = 0; j < i; j++) {
                        e = ops_get(j);
                        if (strcmp(e->name, d->name) != 0)
                                continue;
                        ck_assert_msg(!!e->domain != !!d->domain ||
                                              (e->domain && strcmp(e->domain, d->domain) != 0) ||
                                              e->since_version != d->since_version,
                                      "%s registered twice with since_version %d", d->name,
                                      d->since_version);
                        if (!d->domain && !e->domain)
                                ck_assert_ptr_ne(first, d);
                }
                if (d->infer)
                        ck_assert_ptr_eq(ops_lookup_onnx(d->domain, d->name, d->since_version), d);
        }
        ck_assert_uint_ge(count, sizeof(names) / sizeof(names[0]));
        ck_assert_ptr_null(ops_get(count));
        ck_assert_ptr_null(ops_get((size_t)-1));
        ck_assert_ptr_null(ops_lookup("add"));
        ck_assert_ptr_null(ops_lookup("NoSuchOp"));
        ck_assert_ptr_null(ops_lookup(""));
        ck_assert_ptr_null(ops_lookup(NULL));
        ck_assert_int_eq(ops_lookup("MatMul")->engine, OPS_ENGINE_CUBE);
        ck_assert_int_eq(ops_lookup("Add")->engine, OPS_ENGINE_VECTOR);
        ck_assert_int_eq(ops_lookup("Relu")->engine, OPS_ENGINE_VECTOR);
        ck_assert_int_eq(ops_lookup("Tanh")->engine, OPS_ENGINE_VECTOR);
        ck_assert_int_eq(ops_lookup("Softmax")->engine, OPS_ENGINE_AICPU);
        ck_assert_int_eq(ops_lookup("Cast")->engine, OPS_ENGINE_AICPU);
        ck_assert_int_eq(ops_lookup("Add")->min_inputs, 2);
        ck_assert_int_eq(ops_lookup("Cast")->max_inputs, 1);
}
END_TEST

START_TEST(test_attrs)
{
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        ck_assert_int_eq(ops_attr_int(&c, "axis", -1), -1);
        ck_assert_double_eq(ops_attr_float(&c, "alpha", 0.5), 0.5);
        attr_int(&c, "axis", 2);
        attr_float(&c, "alpha", 0.25);
        ck_assert_int_eq(ops_attr_int(&c, "axis", -1), 2);
        ck_assert_double_eq(ops_attr_float(&c, "alpha", 0.5), 0.25);
        ck_assert_double_eq(ops_attr_float(&c, "axis", 0.5), 2.0);
        ck_assert_int_eq(ops_attr_int(&c, "alpha", 7), 7);
        ck_assert_int_eq(ops_attr_int(&c, "axi", 7), 7);
        ck_assert_int_eq(ops_attr_int(&c, "axiss", 7), 7);
        /* A name filling the whole array, without terminator, is still matched safely. */
        memset(c.attr[0].name, 'x', OPS_NAME_MAX);
        ck_assert_int_eq(ops_attr_int(&c, "axis", 9), 9);
        ops_set_threads(1);
        ops_set_threads(0);
}
END_TEST

/* ---------------------------------------------------------------- half conversions */

static double ref_half_to_double(uint16_t h)
{
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double v;

        if (e == 0)
                v = ldexp(m, -24);
        else if (e == 31)
                v = m ? NAN : INFINITY;
        else
                v = ldexp(1024 + m, e - 25);
        return (h & 0x8000) ? -v : v;
}

/* Nearest half, ties to even, by scaling to an integer count of the local quantum. */
static uint16_t ref_double_to_half(double d)
{
        uint16_t sign = signbit(d) ? 0x8000 : 0;
        double a = fabs(d), n;
        int e;

        if (a >= 65520.0)
                return sign | 0x7c00;
        if (a < ldexp(1, -14)) {
                n = nearbyint(a / ldexp(1, -24));
                return (uint16_t)(sign | (uint16_t)n);
        }
        frexp(a, &e);
        e -= 1;
        n = nearbyint(a / ldexp(1, e - 10));
        return (uint16_t)(sign | (((e + 15) << 10) + (int)n - 1024));
}

/* Hot loops count mismatches and assert once: every Check assertion costs a write to the
 * runner's pipe. */
START_TEST(test_half_to_float_exhaustive)
{
        uint32_t h, bad = 0, first = 0;
        double want;
        float got;

        for (h = 0; h < 0x10000; h++) {
                got = ops_half_to_float((uint16_t)h);
                want = ref_half_to_double((uint16_t)h);
                if (isnan(want)) {
                        if (!isnan(got) && !bad++)
                                first = h;
                        continue;
                }
                /* Every non-NaN half survives the round trip bit for bit. */
                if (((double)got != want || !!signbit(got) != !!signbit(want) ||
                     ops_float_to_half(got) != h) && !bad++)
                        first = h;
        }
        ck_assert_msg(!bad, "%u mismatches, first at half 0x%04x", bad, first);
}
END_TEST

START_TEST(test_float_to_half_sweep)
{
        uint64_t x;
        uint32_t bits, bad = 0, first = 0;
        float f;
        uint16_t got;

        for (x = 0; x <= 0xffffffffULL; x += 4099) {
                bits = (uint32_t)x;
                memcpy(&f, &bits, sizeof(f));
                got = ops_float_to_half(f);
                if (isnan(f)) {
                        if (((got & 0x7c00) != 0x7c00 || !(got & 0x3ff)) && !bad++)
                                first = bits;
                        continue;
                }
                if (got != ref_double_to_half(f) && !bad++)
                        first = bits;
        }
        /* Near the half-way points of the smallest subnormal and the largest normal. */
        for (bits = 0x33000000 - 64; bits < 0x33000000 + 64; bits++) {
                memcpy(&f, &bits, sizeof(f));
                if (ops_float_to_half(f) != ref_double_to_half(f) && !bad++)
                        first = bits;
        }
        for (bits = 0x477ff000 - 64; bits < 0x477ff000 + 64; bits++) {
                memcpy(&f, &bits, sizeof(f));
                if (ops_float_to_half(f) != ref_double_to_half(f) && !bad++)
                        first = bits;
        }
        ck_assert_msg(!bad, "%u mismatches, first at float 0x%08x", bad, first);
}
END_TEST

START_TEST(test_half_special_values)
{
        ck_assert_uint_eq(ops_float_to_half(0.0f), 0x0000);
        ck_assert_uint_eq(ops_float_to_half(-0.0f), 0x8000);
        ck_assert_uint_eq(ops_float_to_half(1.0f), 0x3c00);
        ck_assert_uint_eq(ops_float_to_half(-2.0f), 0xc000);
        ck_assert_uint_eq(ops_float_to_half(65504.0f), 0x7bff);
        ck_assert_uint_eq(ops_float_to_half(65519.0f), 0x7bff);
        ck_assert_uint_eq(ops_float_to_half(65520.0f), 0x7c00);
        ck_assert_uint_eq(ops_float_to_half(1e10f), 0x7c00);
        ck_assert_uint_eq(ops_float_to_half(-1e10f), 0xfc00);
        ck_assert_uint_eq(ops_float_to_half(INFINITY), 0x7c00);
        ck_assert_uint_eq(ops_float_to_half(-INFINITY), 0xfc00);
        ck_assert_uint_eq(ops_float_to_half(ldexpf(1, -24)), 0x0001);
        ck_assert_uint_eq(ops_float_to_half(ldexpf(1, -25)), 0x0000);       /* tie to even */
        ck_assert_uint_eq(ops_float_to_half(ldexpf(3, -25)), 0x0002);       /* tie to even */
        ck_assert_uint_eq(ops_float_to_half(ldexpf(3, -26)), 0x0001);
        ck_assert_uint_eq(ops_float_to_half(ldexpf(1, -14)), 0x0400);
        ck_assert_uint_eq(ops_float_to_half(ldexpf(1023, -24)), 0x03ff);
        ck_assert_uint_eq(ops_float_to_half(1.0f + ldexpf(1, -11)), 0x3c00); /* tie to even */
        ck_assert_uint_eq(ops_float_to_half(1.0f + ldexpf(3, -11)), 0x3c02); /* tie to even */
        ck_assert_uint_eq(ops_float_to_half(ldexpf(1, -140)), 0x0000);      /* float subnormal */
        ck_assert(isnan(ops_half_to_float(ops_float_to_half(NAN))));
        ck_assert(isnan(ops_half_to_float(0x7e00)));
        ck_assert(isinf(ops_half_to_float(0xfc00)) && ops_half_to_float(0xfc00) < 0);
        ck_assert_float_eq(ops_half_to_float(0x0001), ldexpf(1, -24));
        ck_assert_float_eq(ops_half_to_float(0x7bff), 65504.0f);
        ck_assert_float_eq(ops_half_to_float(0x3555), 0.333251953125f);
}
END_TEST

/* ---------------------------------------------------------------- binary elementwise */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };
static const char *const binary_names[] = { "Add", "Sub", "Mul", "Div" };

static float ref_f32(int op, float a, float b)
{
        switch (op) {
        case OP_ADD: return a + b;
        case OP_SUB: return a - b;
        case OP_MUL: return a * b;
        default: return a / b;
        }
}

static int64_t ref_i64(int op, int64_t a, int64_t b)
{
        switch (op) {
        case OP_ADD: return a + b;
        case OP_SUB: return a - b;
        case OP_MUL: return a * b;
        default: return a / b;
        }
}

static void fill(int dtype, void *p, int64_t n, int nonzero)
{
        int64_t i, v;

        for (i = 0; i < n; i++) {
                switch (dtype) {
                case F32:
                        ((float *)p)[i] = rng_unit() * 8.0f + (nonzero ? 9.0f : 0.0f);
                        break;
                case F16:
                        ((uint16_t *)p)[i] =
                                ops_float_to_half(rng_unit() * 8.0f + (nonzero ? 9.0f : 0.0f));
                        break;
                default:
                        v = (int64_t)(rng() % 201) - 100;
                        if (nonzero && v == 0)
                                v = 3;
                        if (dtype == I32)
                                ((int32_t *)p)[i] = (int32_t)v;
                        else
                                ((int64_t *)p)[i] = v;
                }
        }
}

static void binary_case(int op, int dtype, int ra, const int64_t *da, int rb, const int64_t *db)
{
        struct ops_tensor a = tensor(dtype, NULL, ra, da), b = tensor(dtype, NULL, rb, db);
        struct ops_tensor out;
        struct ops_call c;
        size_t es = proto_dtype_size(dtype);
        int64_t n, na = numel(&a), nb = numel(&b), i, ia, ib;
        char err[256];

        memset(&out, 0, sizeof(out));
        out.dtype = dtype;
        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &out, err, sizeof(err)), 0);
        n = numel(&out);
        a.data = malloc((size_t)(na ? na : 1) * es);
        b.data = malloc((size_t)(nb ? nb : 1) * es);
        out.data = malloc((size_t)(n ? n : 1) * es);
        fill(dtype, a.data, na, 0);
        fill(dtype, b.data, nb, op == OP_DIV);
        c = call2(a, b, out);
        invoke_ok(binary_names[op], &c);
        for (i = 0; i < n; i++) {
                ia = bcast_index(&a, &out, i);
                ib = bcast_index(&b, &out, i);
                switch (dtype) {
                case F32: {
                        float want = ref_f32(op, ((float *)a.data)[ia], ((float *)b.data)[ib]);

                        ck_assert_msg(((float *)out.data)[i] == want, "%s f32 [%lld]: %g vs %g",
                                      binary_names[op], (long long)i,
                                      (double)((float *)out.data)[i], (double)want);
                        break;
                }
                case F16: {
                        float x = ops_half_to_float(((uint16_t *)a.data)[ia]);
                        float y = ops_half_to_float(((uint16_t *)b.data)[ib]);
                        double exact = op == OP_ADD ? (double)x + y :
                                       op == OP_SUB ? (double)x - y :
                                       op == OP_MUL ? (double)x * y : (double)x / y;

                        /* Computing in float and rounding once more is exact enough that the
                         * result is the correctly rounded half. */
                        ck_assert_uint_eq(((uint16_t *)out.data)[i], ref_double_to_half(exact));
                        break;
                }
                case I32:
                        ck_assert_int_eq(((int32_t *)out.data)[i],
                                         ref_i64(op, ((int32_t *)a.data)[ia],
                                                 ((int32_t *)b.data)[ib]));
                        break;
                default:
                        ck_assert_int_eq(((int64_t *)out.data)[i],
                                         ref_i64(op, ((int64_t *)a.data)[ia],
                                                 ((int64_t *)b.data)[ib]));
                }
        }
        free(a.data);
        free(b.data);
        free(out.data);
}

static void binary_all_shapes(int op, int dtype)
{
        binary_case(op, dtype, SHP(2, 3), SHP(2, 3));
        binary_case(op, dtype, SHP(37), SHP(37));
        binary_case(op, dtype, SHP(64, 65), SHP(64, 65));
        binary_case(op, dtype, SHP(2, 3), SHP(3));
        binary_case(op, dtype, SHP(3), SHP(2, 3));
        binary_case(op, dtype, SCALAR, SHP(45));
        binary_case(op, dtype, SHP(45), SCALAR);
        binary_case(op, dtype, SCALAR, SCALAR);
        binary_case(op, dtype, SHP(1, 1), SHP(5, 19));
        binary_case(op, dtype, SHP(5, 19), SHP(1));
        binary_case(op, dtype, SHP(2, 1), SHP(1, 4));
        binary_case(op, dtype, SHP(4, 1, 3), SHP(2, 1));
        binary_case(op, dtype, SHP(3, 1, 2, 1), SHP(1, 4, 1, 5));
        binary_case(op, dtype, SHP(2, 3, 4), SHP(2, 1, 4));
        binary_case(op, dtype, SHP(8, 1), SHP(8, 16));
        binary_case(op, dtype, SHP(2, 1, 3, 1, 2, 1, 2, 1), SHP(1, 2, 1, 3, 1, 2, 1, 2));
        binary_case(op, dtype, SHP(0, 3), SHP(1, 3));
        binary_case(op, dtype, SHP(2, 0), SCALAR);
}

START_TEST(test_binary_f32)
{
        int op;

        for (op = OP_ADD; op <= OP_DIV; op++)
                binary_all_shapes(op, F32);
}
END_TEST

START_TEST(test_binary_f16)
{
        int op;

        for (op = OP_ADD; op <= OP_DIV; op++)
                binary_all_shapes(op, F16);
}
END_TEST

START_TEST(test_binary_int)
{
        int op;

        for (op = OP_ADD; op <= OP_DIV; op++) {
                binary_all_shapes(op, I32);
                binary_all_shapes(op, I64);
        }
}
END_TEST

START_TEST(test_int_wraparound)
{
        int32_t a32[4] = { INT32_MAX, INT32_MIN, INT32_MAX, -7 };
        int32_t b32[4] = { 1, -1, 2, 2 }, o32[4];
        int64_t a64[4] = { INT64_MAX, INT64_MIN, INT64_MAX, 7 };
        int64_t b64[4] = { 1, -1, 2, -2 }, o64[4];
        struct ops_call c;

        c = call2(tensor(I32, a32, SHP(4)), tensor(I32, b32, SHP(4)), tensor(I32, o32, SHP(4)));
        invoke_ok("Add", &c);
        ck_assert_int_eq(o32[0], INT32_MIN);
        ck_assert_int_eq(o32[1], INT32_MAX);
        invoke_ok("Sub", &c);
        ck_assert_int_eq(o32[1], INT32_MIN + 1);
        invoke_ok("Mul", &c);
        ck_assert_int_eq(o32[0], INT32_MAX);
        ck_assert_int_eq(o32[1], INT32_MIN); /* -INT32_MIN wraps */
        ck_assert_int_eq(o32[2], -2);
        invoke_ok("Div", &c);
        ck_assert_int_eq(o32[0], INT32_MAX);
        ck_assert_int_eq(o32[1], INT32_MIN); /* would trap as C division */
        ck_assert_int_eq(o32[2], INT32_MAX / 2);
        ck_assert_int_eq(o32[3], -3); /* truncation toward zero */

        c = call2(tensor(I64, a64, SHP(4)), tensor(I64, b64, SHP(4)), tensor(I64, o64, SHP(4)));
        invoke_ok("Add", &c);
        ck_assert_int_eq(o64[0], INT64_MIN);
        ck_assert_int_eq(o64[1], INT64_MAX);
        invoke_ok("Mul", &c);
        ck_assert_int_eq(o64[1], INT64_MIN);
        ck_assert_int_eq(o64[2], -2);
        invoke_ok("Div", &c);
        ck_assert_int_eq(o64[1], INT64_MIN);
        ck_assert_int_eq(o64[3], -3);

        /* INT64_MIN / -1 through the scalar-broadcast and strided paths too. */
        {
                int64_t m[3] = { INT64_MIN, 6, INT64_MIN }, d = -1, r[3];

                c = call2(tensor(I64, m, SHP(3)), tensor(I64, &d, SCALAR),
                          tensor(I64, r, SHP(3)));
                invoke_ok("Div", &c);
                ck_assert_int_eq(r[0], INT64_MIN);
                ck_assert_int_eq(r[1], -6);
                c = call2(tensor(I64, m, SHP(3)), tensor(I64, &d, SCALAR),
                          tensor(I64, m, SHP(3)));
                invoke_ok("Div", &c);
                ck_assert_int_eq(m[0], INT64_MIN);
                ck_assert_int_eq(m[1], -6);
        }
}
END_TEST

START_TEST(test_div_by_zero)
{
        int32_t a[6] = { 1, 2, 3, 4, 5, 6 }, b[3] = { 1, 0, 2 }, o[6] = { 0 };
        int64_t a64[2] = { 5, 6 }, z = 0, o64[2] = { 42, 42 };
        float fa[2] = { 1, -1 }, fz = 0, fo[2];
        struct ops_call c;
        char err[256];

        c = call2(tensor(I32, a, SHP(2, 3)), tensor(I32, b, SHP(3)), tensor(I32, o, SHP(2, 3)));
        ck_assert_int_eq(invoke("Div", &c, err, sizeof(err)), -EDOM);
        ck_assert_str_eq(err, "Div: integer division by zero");
        c = call2(tensor(I64, a64, SHP(2)), tensor(I64, &z, SCALAR), tensor(I64, o64, SHP(2)));
        ck_assert_int_eq(invoke("Div", &c, err, sizeof(err)), -EDOM);
        ck_assert_str_eq(err, "Div: integer division by zero");
        ck_assert_int_eq(o64[0], 42); /* nothing written */
        /* Floats follow IEEE. */
        c = call2(tensor(F32, fa, SHP(2)), tensor(F32, &fz, SCALAR), tensor(F32, fo, SHP(2)));
        invoke_ok("Div", &c);
        ck_assert(isinf(fo[0]) && fo[0] > 0);
        ck_assert(isinf(fo[1]) && fo[1] < 0);
}
END_TEST

START_TEST(test_binary_in_place)
{
        float a[40], b[40], a0[40], b0[40], s = 2.0f;
        uint16_t h[8], h0[8], hs = 0x4000; /* 2.0 */
        struct ops_call c;
        int i;

        for (i = 0; i < 40; i++) {
                a0[i] = rng_unit();
                b0[i] = rng_unit() + 3.0f;
        }
        memcpy(a, a0, sizeof(a));
        memcpy(b, b0, sizeof(b));
        /* out == a */
        c = call2(tensor(F32, a, SHP(40)), tensor(F32, b, SHP(40)), tensor(F32, a, SHP(40)));
        invoke_ok("Sub", &c);
        for (i = 0; i < 40; i++)
                ck_assert(a[i] == a0[i] - b0[i]);
        /* out == b, non-commutative */
        memcpy(a, a0, sizeof(a));
        c = call2(tensor(F32, a, SHP(40)), tensor(F32, b, SHP(40)), tensor(F32, b, SHP(40)));
        invoke_ok("Div", &c);
        for (i = 0; i < 40; i++)
                ck_assert(b[i] == a0[i] / b0[i]);
        /* out == a == b */
        memcpy(a, a0, sizeof(a));
        c = call2(tensor(F32, a, SHP(5, 8)), tensor(F32, a, SHP(5, 8)), tensor(F32, a, SHP(5, 8)));
        invoke_ok("Mul", &c);
        for (i = 0; i < 40; i++)
                ck_assert(a[i] == a0[i] * a0[i]);
        /* out == a with a broadcast scalar, and with a broadcast row */
        memcpy(a, a0, sizeof(a));
        c = call2(tensor(F32, &s, SCALAR), tensor(F32, a, SHP(40)), tensor(F32, a, SHP(40)));
        invoke_ok("Sub", &c);
        for (i = 0; i < 40; i++)
                ck_assert(a[i] == 2.0f - a0[i]);
        memcpy(a, a0, sizeof(a));
        memcpy(b, b0, sizeof(b));
        c = call2(tensor(F32, a, SHP(5, 8)), tensor(F32, b, SHP(8)), tensor(F32, a, SHP(5, 8)));
        invoke_ok("Add", &c);
        for (i = 0; i < 40; i++)
                ck_assert(a[i] == a0[i] + b0[i % 8]);
        /* float16 in place */
        for (i = 0; i < 8; i++)
                h[i] = h0[i] = ops_float_to_half((float)i - 3.5f);
        c = call2(tensor(F16, h, SHP(8)), tensor(F16, &hs, SCALAR), tensor(F16, h, SHP(8)));
        invoke_ok("Mul", &c);
        for (i = 0; i < 8; i++)
                ck_assert_float_eq(ops_half_to_float(h[i]), 2.0f * ops_half_to_float(h0[i]));
        /* int32 in place (restrict-free path) */
        {
                int32_t x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };

                c = call2(tensor(I32, x, SHP(9)), tensor(I32, x, SHP(9)), tensor(I32, x, SHP(9)));
                invoke_ok("Add", &c);
                for (i = 0; i < 9; i++)
                        ck_assert_int_eq(x[i], 2 * (i + 1));
        }
}
END_TEST

/* ---------------------------------------------------------------- unary elementwise */

START_TEST(test_relu)
{
        float f[11] = { -3, -0.5f, 0, 0.5f, 3, -INFINITY, INFINITY, 1e-30f, -1e-30f, 7, -7 };
        float fo[11];
        int32_t i32[5] = { INT32_MIN, -1, 0, 1, INT32_MAX }, o32[5];
        int64_t i64[5] = { INT64_MIN, -1, 0, 1, INT64_MAX }, o64[5];
        uint16_t h[4], ho[4];
        struct ops_call c;
        int i;

        c = call1(tensor(F32, f, SHP(11)), tensor(F32, fo, SHP(11)));
        invoke_ok("Relu", &c);
        for (i = 0; i < 11; i++)
                ck_assert(fo[i] == (f[i] > 0 ? f[i] : 0.0f));
        /* in place */
        c = call1(tensor(F32, f, SHP(11)), tensor(F32, f, SHP(11)));
        invoke_ok("Relu", &c);
        ck_assert_mem_eq(f, fo, sizeof(f));
        c = call1(tensor(I32, i32, SHP(5)), tensor(I32, o32, SHP(5)));
        invoke_ok("Relu", &c);
        ck_assert_int_eq(o32[0], 0);
        ck_assert_int_eq(o32[1], 0);
        ck_assert_int_eq(o32[4], INT32_MAX);
        c = call1(tensor(I64, i64, SHP(5)), tensor(I64, o64, SHP(5)));
        invoke_ok("Relu", &c);
        ck_assert_int_eq(o64[0], 0);
        ck_assert_int_eq(o64[3], 1);
        ck_assert_int_eq(o64[4], INT64_MAX);
        h[0] = ops_float_to_half(-2);
        h[1] = ops_float_to_half(2);
        h[2] = 0x0001;
        h[3] = 0xfc00;
        c = call1(tensor(F16, h, SHP(2, 2)), tensor(F16, ho, SHP(2, 2)));
        invoke_ok("Relu", &c);
        ck_assert_uint_eq(ho[0], 0);
        ck_assert_uint_eq(ho[1], h[1]);
        ck_assert_uint_eq(ho[2], 0x0001);
        ck_assert_uint_eq(ho[3], 0);
        /* a scalar and an empty tensor */
        c = call1(tensor(F32, f, SCALAR), tensor(F32, fo, SCALAR));
        invoke_ok("Relu", &c);
        c = call1(tensor(F32, f, SHP(0, 4)), tensor(F32, fo, SHP(0, 4)));
        invoke_ok("Relu", &c);
}
END_TEST

START_TEST(test_sigmoid_tanh)
{
        float x[100], o[100];
        uint16_t h[100], ho[100];
        struct ops_call c;
        double want;
        int i;

        for (i = 0; i < 100; i++) {
                x[i] = (float)(i - 50) * 0.37f;
                h[i] = ops_float_to_half(x[i]);
        }
        x[0] = -200.0f;
        x[1] = 200.0f;
        x[2] = -INFINITY;
        x[3] = INFINITY;
        c = call1(tensor(F32, x, SHP(10, 10)), tensor(F32, o, SHP(10, 10)));
        invoke_ok("Sigmoid", &c);
        for (i = 0; i < 100; i++) {
                want = 1.0 / (1.0 + exp(-(double)x[i]));
                ck_assert_msg(fabs(o[i] - want) <= 1e-6 * want + 1e-30, "sigmoid(%g) = %g",
                              (double)x[i], (double)o[i]);
        }
        ck_assert_float_eq(o[2], 0.0f);
        ck_assert_float_eq(o[3], 1.0f);
        invoke_ok("Tanh", &c);
        for (i = 0; i < 100; i++)
                ck_assert_double_eq_tol(o[i], tanh((double)x[i]), 1e-6);
        c = call1(tensor(F16, h, SHP(100)), tensor(F16, ho, SHP(100)));
        invoke_ok("Sigmoid", &c);
        for (i = 0; i < 100; i++) {
                want = 1.0 / (1.0 + exp(-(double)ops_half_to_float(h[i])));
                ck_assert_double_eq_tol(ops_half_to_float(ho[i]), want, 1e-3);
        }
        /* in place, float32 and float16 */
        c = call1(tensor(F32, x, SHP(100)), tensor(F32, x, SHP(100)));
        memcpy(o, x, sizeof(o));
        invoke_ok("Tanh", &c);
        for (i = 0; i < 100; i++)
                ck_assert_double_eq_tol(x[i], tanh((double)o[i]), 1e-6);
        c = call1(tensor(F16, h, SHP(100)), tensor(F16, h, SHP(100)));
        memcpy(ho, h, sizeof(ho));
        invoke_ok("Tanh", &c);
        for (i = 0; i < 100; i++)
                ck_assert_uint_eq(h[i], ops_float_to_half(tanhf(ops_half_to_float(ho[i]))));
}
END_TEST

/* ---------------------------------------------------------------- MatMul */

/* numpy matmul in double: 1-D operands promoted and the added dims dropped. */
static void ref_matmul(int dtype, const void *a, int ra, const int64_t *da, const void *b, int rb,
                       const int64_t *db, double *c, double *cabs, int64_t *cn)
{
        int64_t adims[OPS_MAX_DIMS + 1], bdims[OPS_MAX_DIMS + 1], bat[OPS_MAX_DIMS];
        int64_t m, n, k, count = 1, bi, ia, ib, sa, sb, i, j, p, rem, x, ya, yb;
        int na, nb, nbat, d;
        double s, sabs, va, vb;

        na = ra == 1 ? 2 : ra;
        nb = rb == 1 ? 2 : rb;
        if (ra == 1) {
                adims[0] = 1;
                adims[1] = da[0];
        } else {
                memcpy(adims, da, (size_t)ra * sizeof(*da));
        }
        if (rb == 1) {
                bdims[0] = db[0];
                bdims[1] = 1;
        } else {
                memcpy(bdims, db, (size_t)rb * sizeof(*db));
        }
        m = adims[na - 2];
        k = adims[na - 1];
        n = bdims[nb - 1];
        nbat = (na > nb ? na : nb) - 2;
        for (d = 0; d < nbat; d++) {
                int ta = d - (nbat - (na - 2)), tb = d - (nbat - (nb - 2));
                int64_t xa = ta >= 0 ? adims[ta] : 1, xb = tb >= 0 ? bdims[tb] : 1;

                bat[d] = xa == 1 ? xb : xa;
                count *= bat[d];
        }
        for (bi = 0; bi < count; bi++) {
                /* matrix index of A and B for this batch element */
                ia = ib = 0;
                sa = sb = 1;
                rem = bi;
                for (d = nbat - 1; d >= 0; d--) {
                        int ta = d - (nbat - (na - 2)), tb = d - (nbat - (nb - 2));

                        x = rem % bat[d];
                        rem /= bat[d];
                        if (ta >= 0) {
                                ya = adims[ta] == 1 ? 0 : x;
                                ia += ya * sa;
                                sa *= adims[ta];
                        }
                        if (tb >= 0) {
                                yb = bdims[tb] == 1 ? 0 : x;
                                ib += yb * sb;
                                sb *= bdims[tb];
                        }
                }
                for (i = 0; i < m; i++)
                        for (j = 0; j < n; j++) {
                                s = sabs = 0;
                                for (p = 0; p < k; p++) {
                                        int64_t oa = ia * m * k + i * k + p;
                                        int64_t ob = ib * k * n + p * n + j;

                                        if (dtype == F32) {
                                                va = ((const float *)a)[oa];
                                                vb = ((const float *)b)[ob];
                                        } else {
                                                va = ops_half_to_float(((const uint16_t *)a)[oa]);
                                                vb = ops_half_to_float(((const uint16_t *)b)[ob]);
                                        }
                                        s += va * vb;
                                        sabs += fabs(va * vb);
                                }
                                c[(bi * m + i) * n + j] = s;
                                cabs[(bi * m + i) * n + j] = sabs;
                        }
        }
        *cn = count * m * n;
}

static void matmul_case(int dtype, int ra, const int64_t *da, int rb, const int64_t *db, int ro,
                        const int64_t *dout)
{
        struct ops_tensor a = tensor(dtype, NULL, ra, da), b = tensor(dtype, NULL, rb, db);
        struct ops_tensor out = tensor(dtype, NULL, ro, dout);
        size_t es = proto_dtype_size(dtype);
        int64_t na = numel(&a), nb = numel(&b), n = numel(&out), cn, i;
        struct ops_call c;
        double *want, *wabs;

        a.data = malloc((size_t)(na + 1) * es);
        b.data = malloc((size_t)(nb + 1) * es);
        out.data = malloc((size_t)(n + 1) * es);
        want = malloc((size_t)(n + 1) * sizeof(double));
        wabs = malloc((size_t)(n + 1) * sizeof(double));
        fill(dtype, a.data, na, 0);
        fill(dtype, b.data, nb, 0);
        memset(out.data, 0x7f, (size_t)(n + 1) * es);
        c = call2(a, b, out);
        invoke_ok("MatMul", &c);
        ref_matmul(dtype, a.data, ra, da, b.data, rb, db, want, wabs, &cn);
        ck_assert_int_eq(cn, n);
        for (i = 0; i < n; i++) {
                double got = dtype == F32 ? ((float *)out.data)[i] :
                                            ops_half_to_float(((uint16_t *)out.data)[i]);
                /* float accumulation error stays below K * eps * sum |a b|; float16
                 * adds its final rounding */
                double tol = 1e-5 * wabs[i] + 1e-6 +
                             (dtype == F32 ? 0 : ldexp(fabs(want[i]), -11));

                ck_assert_msg(fabs(got - want[i]) <= tol, "MatMul [%lld]: %g vs %g",
                              (long long)i, got, want[i]);
        }
        free(a.data);
        free(b.data);
        free(out.data);
        free(want);
        free(wabs);
}

static void matmul_shapes(int dtype)
{
        matmul_case(dtype, SHP(3, 4), SHP(4, 5), SHP(3, 5));
        matmul_case(dtype, SHP(1, 1), SHP(1, 1), SHP(1, 1));
        matmul_case(dtype, SHP(2, 1, 3, 4), SHP(3, 4, 2), SHP(2, 3, 3, 2));
        matmul_case(dtype, SHP(4), SHP(4, 5), SHP(5));
        matmul_case(dtype, SHP(3, 4), SHP(4), SHP(3));
        matmul_case(dtype, SHP(4), SHP(4), SCALAR);
        matmul_case(dtype, SHP(2, 3, 4), SHP(4), SHP(2, 3));
        matmul_case(dtype, SHP(4), SHP(2, 4, 5), SHP(2, 5));
        matmul_case(dtype, SHP(2, 3, 4), SHP(4, 5), SHP(2, 3, 5));
        matmul_case(dtype, SHP(2, 3, 4), SHP(1, 4, 5), SHP(2, 3, 5));
        matmul_case(dtype, SHP(1, 3, 4), SHP(2, 4, 5), SHP(2, 3, 5));
        matmul_case(dtype, SHP(2, 1, 2, 3, 4), SHP(3, 1, 4, 2), SHP(2, 3, 2, 3, 2));
        matmul_case(dtype, SHP(65, 67), SHP(67, 63), SHP(65, 63));
        matmul_case(dtype, SHP(0, 4), SHP(4, 5), SHP(0, 5));
        matmul_case(dtype, SHP(2, 0, 3), SHP(3, 0), SHP(2, 0, 0));
}

START_TEST(test_matmul_f32)
{
        matmul_shapes(F32);
}
END_TEST

START_TEST(test_matmul_f16)
{
        matmul_shapes(F16);
}
END_TEST

START_TEST(test_matmul_empty_inner)
{
        float a[1], b[1], o[15];
        uint16_t ho[6];
        int64_t io[4];
        struct ops_call c;
        int i;

        memset(o, 0x7f, sizeof(o));
        c = call2(tensor(F32, a, SHP(3, 0)), tensor(F32, b, SHP(0, 5)), tensor(F32, o, SHP(3, 5)));
        invoke_ok("MatMul", &c);
        for (i = 0; i < 15; i++)
                ck_assert_float_eq(o[i], 0.0f);
        memset(ho, 0x7f, sizeof(ho));
        c = call2(tensor(F16, a, SHP(2, 3, 0)), tensor(F16, b, SHP(0)), tensor(F16, ho, SHP(2, 3)));
        invoke_ok("MatMul", &c);
        for (i = 0; i < 6; i++)
                ck_assert_uint_eq(ho[i], 0);
        memset(io, 0x7f, sizeof(io));
        c = call2(tensor(I64, a, SHP(2, 0)), tensor(I64, b, SHP(0, 2)), tensor(I64, io, SHP(2, 2)));
        invoke_ok("MatMul", &c);
        for (i = 0; i < 4; i++)
                ck_assert_int_eq(io[i], 0);
}
END_TEST

START_TEST(test_matmul_int)
{
        /* [2,2,3] x [3,2] in int32 with products that wrap */
        int32_t a[12] = { 1, 2, 3, 4, 5, 6, INT32_MAX, 2, 0, -1, 0, INT32_MIN };
        int32_t b[6] = { 1, 2, 3, 4, 5, 6 }, o[8];
        int64_t a64[6] = { INT64_MAX, 1, -3, 4, 5, 6 }, b64[6] = { 2, 1, 1, 1, 1, 1 }, o64[4];
        struct ops_call c;
        int bi, i, j, p;

        c = call2(tensor(I32, a, SHP(2, 2, 3)), tensor(I32, b, SHP(3, 2)),
                  tensor(I32, o, SHP(2, 2, 2)));
        invoke_ok("MatMul", &c);
        for (bi = 0; bi < 2; bi++)
                for (i = 0; i < 2; i++)
                        for (j = 0; j < 2; j++) {
                                uint32_t s = 0;

                                for (p = 0; p < 3; p++)
                                        s += (uint32_t)a[bi * 6 + i * 3 + p] *
                                             (uint32_t)b[p * 2 + j];
                                ck_assert_int_eq(o[bi * 4 + i * 2 + j], (int32_t)s);
                        }
        ck_assert_int_eq(o[0], 22);
        ck_assert_int_eq(o[1], 28);
        /* [2,3] x [3,2] in int64, first row overflowing: INT64_MAX*2 + 1 + -3 */
        c = call2(tensor(I64, a64, SHP(2, 3)), tensor(I64, b64, SHP(3, 2)),
                  tensor(I64, o64, SHP(2, 2)));
        invoke_ok("MatMul", &c);
        ck_assert_int_eq(o64[0], (int64_t)((uint64_t)INT64_MAX * 2 + 1 - 3));
        ck_assert_int_eq(o64[1], (int64_t)((uint64_t)INT64_MAX + 1 - 3));
        ck_assert_int_eq(o64[2], 8 + 5 + 6);
        ck_assert_int_eq(o64[3], 4 + 5 + 6);
        /* 1-D by 1-D: a dot product giving a scalar */
        c = call2(tensor(I64, b64, SHP(3)), tensor(I64, a64 + 3, SHP(3)), tensor(I64, o64, SCALAR));
        invoke_ok("MatMul", &c);
        ck_assert_int_eq(o64[0], 2 * 4 + 5 + 6);
}
END_TEST

START_TEST(test_matmul_threads)
{
        /* Larger than OpenBLAS's single-thread cutoff; also with a thread limit set. */
        ops_set_threads(2);
        matmul_case(F32, SHP(2, 128, 96), SHP(96, 112), SHP(2, 128, 112));
        ops_set_threads(1);
        matmul_case(F32, SHP(128, 96), SHP(2, 96, 112), SHP(2, 128, 112));
}
END_TEST

/* ---------------------------------------------------------------- Softmax */

static void softmax_case(int dtype, int ndim, const int64_t *dims, int has_axis, int64_t axis,
                         int in_place)
{
        struct ops_tensor x = tensor(dtype, NULL, ndim, dims);
        int64_t n = numel(&x), outer = 1, len, inner = 1, o, r, j, ax;
        double *ref = malloc((size_t)(n + 1) * sizeof(double)), mx, sum, v;
        void *xd = malloc((size_t)(n + 1) * 4), *od = in_place ? xd : malloc((size_t)(n + 1) * 4);
        struct ops_call c;
        int d;

        fill(dtype, xd, n, 0);
        if (!has_axis)
                axis = -1;
        ax = axis < 0 ? axis + ndim : axis;
        for (d = 0; d < ax; d++)
                outer *= dims[d];
        len = dims[ax];
        for (d = (int)ax + 1; d < ndim; d++)
                inner *= dims[d];
        for (o = 0; o < outer; o++)
                for (j = 0; j < inner; j++) {
                        mx = -INFINITY;
                        for (r = 0; r < len; r++) {
                                int64_t at = (o * len + r) * inner + j;

                                v = dtype == F32 ? ((float *)xd)[at] :
                                                   ops_half_to_float(((uint16_t *)xd)[at]);
                                ref[at] = v;
                                mx = v > mx ? v : mx;
                        }
                        sum = 0;
                        for (r = 0; r < len; r++)
                                sum += exp(ref[(o * len + r) * inner + j] - mx);
                        for (r = 0; r < len; r++) {
                                int64_t at = (o * len + r) * inner + j;

                                ref[at] = exp(ref[at] - mx) / sum;
                        }
                }
        x.data = xd;
        c = call1(x, tensor(dtype, od, ndim, dims));
        if (has_axis)
                attr_int(&c, "axis", axis);
        invoke_ok("Softmax", &c);
        for (o = 0; o < n; o++) {
                double got = dtype == F32 ? ((float *)od)[o] :
                                            ops_half_to_float(((uint16_t *)od)[o]);

                ck_assert_msg(fabs(got - ref[o]) <= (dtype == F32 ? 1e-6 : 1e-3),
                              "Softmax axis %lld [%lld]: %g vs %g", (long long)axis,
                              (long long)o, got, ref[o]);
        }
        free(ref);
        free(xd);
        if (!in_place)
                free(od);
}

START_TEST(test_softmax)
{
        int dt, dtypes[2] = { F32, F16 };

        for (dt = 0; dt < 2; dt++) {
                softmax_case(dtypes[dt], SHP(2, 3, 4), 0, 0, 0);
                softmax_case(dtypes[dt], SHP(2, 3, 4), 1, -1, 0);
                softmax_case(dtypes[dt], SHP(2, 3, 4), 1, 2, 0);
                softmax_case(dtypes[dt], SHP(2, 3, 4), 1, 0, 0);
                softmax_case(dtypes[dt], SHP(2, 3, 4), 1, -3, 0);
                softmax_case(dtypes[dt], SHP(2, 3, 4), 1, 1, 0);
                softmax_case(dtypes[dt], SHP(2, 3, 4), 1, 1, 1);
                softmax_case(dtypes[dt], SHP(5, 7), 1, 0, 1);
                softmax_case(dtypes[dt], SHP(5, 7), 1, -1, 1);
                softmax_case(dtypes[dt], SHP(9), 0, 0, 0);
                softmax_case(dtypes[dt], SHP(1, 1), 1, 0, 0);
                softmax_case(dtypes[dt], SHP(3, 0, 2), 1, 0, 0);
                softmax_case(dtypes[dt], SHP(3, 0, 2), 1, 1, 0);
        }
}
END_TEST

START_TEST(test_softmax_stable)
{
        float x[6] = { 1000, 1001, 1002, -1000, -1001, -1002 }, o[6];
        struct ops_call c = call1(tensor(F32, x, SHP(2, 3)), tensor(F32, o, SHP(2, 3)));
        double e = exp(1.0), s = 1 + e + e * e;
        int i;

        invoke_ok("Softmax", &c);
        for (i = 0; i < 6; i++)
                ck_assert(isfinite(o[i]));
        ck_assert_double_eq_tol(o[0], 1 / s, 1e-6);
        ck_assert_double_eq_tol(o[2], e * e / s, 1e-6);
        ck_assert_double_eq_tol(o[3], e * e / s, 1e-6);
        ck_assert_double_eq_tol(o[0] + o[1] + o[2], 1.0, 1e-6);
}
END_TEST

/* ---------------------------------------------------------------- Cast */

static void cast_one(int from, const void *src, int to, void *dst, int64_t n)
{
        struct ops_call c = call1(tensor(from, (void *)src, SHP(n)), tensor(to, dst, SHP(n)));

        invoke_ok("Cast", &c);
}

START_TEST(test_cast_float_to_int)
{
        float f[10] = { -1.7f, 2.9f, -0.5f, NAN, 1e10f, -1e10f, INFINITY, -INFINITY,
                        2147483520.0f, -2147483648.0f };
        double d[6] = { 9.3e18, -9.3e18, 9223372036854775807.0, -9223372036854775808.0, -NAN,
                        12345.99 };
        float u[5] = { -5, 300, 255.9f, 0.99f, NAN };
        int32_t i32[10];
        int64_t i64[6];
        uint8_t u8[5];
        int8_t s8[3];
        float s8src[3] = { -200, 127.5f, -128.9f };

        cast_one(F32, f, I32, i32, 10);
        ck_assert_int_eq(i32[0], -1);
        ck_assert_int_eq(i32[1], 2);
        ck_assert_int_eq(i32[2], 0);
        ck_assert_int_eq(i32[3], 0);
        ck_assert_int_eq(i32[4], INT32_MAX);
        ck_assert_int_eq(i32[5], INT32_MIN);
        ck_assert_int_eq(i32[6], INT32_MAX);
        ck_assert_int_eq(i32[7], INT32_MIN);
        ck_assert_int_eq(i32[8], 2147483520);
        ck_assert_int_eq(i32[9], INT32_MIN);
        cast_one(F64, d, I64, i64, 6);
        ck_assert_int_eq(i64[0], INT64_MAX);
        ck_assert_int_eq(i64[1], INT64_MIN);
        ck_assert_int_eq(i64[2], INT64_MAX); /* 2^63 as a double */
        ck_assert_int_eq(i64[3], INT64_MIN);
        ck_assert_int_eq(i64[4], 0);
        ck_assert_int_eq(i64[5], 12345);
        cast_one(F32, u, U8, u8, 5);
        ck_assert_uint_eq(u8[0], 0);
        ck_assert_uint_eq(u8[1], 255);
        ck_assert_uint_eq(u8[2], 255);
        ck_assert_uint_eq(u8[3], 0);
        ck_assert_uint_eq(u8[4], 0);
        cast_one(F32, s8src, I8, s8, 3);
        ck_assert_int_eq(s8[0], -128);
        ck_assert_int_eq(s8[1], 127);
        ck_assert_int_eq(s8[2], -128);
}
END_TEST

START_TEST(test_cast_half)
{
        float f[6] = { 1.0f, -0.333333f, 65504.0f, 70000.0f, 1e-8f, NAN }, back[6];
        uint16_t h[6], h2[6];
        /* 1 + 2^-11 + 2^-40: a float rounds it to the tie 1 + 2^-11 (then even, 1.0); one
         * correct rounding from double gives 1 + 2^-10. */
        double d[1] = { 1.0 + ldexp(1, -11) + ldexp(1, -40) };
        int32_t i[4] = { 2049, -65504, 65520, 100000 };
        int i2;

        cast_one(F32, f, F16, h, 6);
        for (i2 = 0; i2 < 6; i2++)
                if (!isnan(f[i2]))
                        ck_assert_uint_eq(h[i2], ops_float_to_half(f[i2]));
        ck_assert_uint_eq(h[3], 0x7c00);
        cast_one(F16, h, F32, back, 6);
        ck_assert_float_eq(back[0], 1.0f);
        ck_assert_float_eq_tol(back[1], -0.333333f, 1e-3f);
        ck_assert_float_eq(back[2], 65504.0f);
        ck_assert(isinf(back[3]));
        ck_assert(isnan(back[5]));
        /* f16 -> f16 is a copy */
        cast_one(F16, h, F16, h2, 6);
        ck_assert_mem_eq(h, h2, sizeof(h));
        cast_one(F64, d, F16, h2, 1);
        ck_assert_uint_eq(h2[0], 0x3c01);
        cast_one(I32, i, F16, h2, 4);
        ck_assert_float_eq(ops_half_to_float(h2[0]), 2048.0f);
        ck_assert_float_eq(ops_half_to_float(h2[1]), -65504.0f);
        ck_assert(isinf(ops_half_to_float(h2[2])));
        ck_assert(isinf(ops_half_to_float(h2[3])));
        cast_one(F16, h, I32, i, 4);
        ck_assert_int_eq(i[0], 1);
        ck_assert_int_eq(i[1], 0);
        ck_assert_int_eq(i[2], 65504);
        ck_assert_int_eq(i[3], INT32_MAX);
}
END_TEST

START_TEST(test_cast_int_and_bool)
{
        int64_t i64[5] = { (int64_t)1 << 40 | 5, -1, INT64_MIN, 1 << 24 | 1, 0 };
        int32_t i32[5];
        float f[5];
        uint8_t b[5], bsrc[3] = { 0, 1, 7 };
        double d[3];
        float fb[4] = { 0.0f, -0.0f, 0.5f, NAN };

        cast_one(I64, i64, I32, i32, 5);
        ck_assert_int_eq(i32[0], 5);
        ck_assert_int_eq(i32[1], -1);
        ck_assert_int_eq(i32[2], 0);
        cast_one(I64, i64, F32, f, 5);
        ck_assert_float_eq(f[1], -1.0f);
        ck_assert_float_eq(f[3], 16777216.0f); /* round to nearest even */
        cast_one(I32, i32, I64, i64, 5);
        ck_assert_int_eq(i64[0], 5);
        ck_assert_int_eq(i64[1], -1);
        cast_one(I32, i32, BOOL, b, 5);
        ck_assert_uint_eq(b[0], 1);
        ck_assert_uint_eq(b[1], 1);
        ck_assert_uint_eq(b[2], 0);
        cast_one(BOOL, bsrc, F64, d, 3);
        ck_assert_double_eq(d[0], 0.0);
        ck_assert_double_eq(d[1], 1.0);
        ck_assert_double_eq(d[2], 1.0);
        cast_one(F32, fb, BOOL, b, 4);
        ck_assert_uint_eq(b[0], 0);
        ck_assert_uint_eq(b[1], 0);
        ck_assert_uint_eq(b[2], 1);
        ck_assert_uint_eq(b[3], 1);
        cast_one(I32, i32, U8, b, 2);
        ck_assert_uint_eq(b[0], 5);
        ck_assert_uint_eq(b[1], 255);
}
END_TEST

START_TEST(test_cast_in_place)
{
        enum { N = 600 };
        int64_t buf[N];
        int32_t *narrow = (int32_t *)buf;
        struct ops_call c;
        int i;

        for (i = 0; i < N; i++)
                narrow[i] = i - 300;
        /* growing: int32 -> int64 over the same buffer */
        c = call1(tensor(I32, buf, SHP(N)), tensor(I64, buf, SHP(N)));
        invoke_ok("Cast", &c);
        for (i = 0; i < N; i++)
                ck_assert_int_eq(buf[i], i - 300);
        /* shrinking back */
        c = call1(tensor(I64, buf, SHP(N)), tensor(I32, buf, SHP(N)));
        invoke_ok("Cast", &c);
        for (i = 0; i < N; i++)
                ck_assert_int_eq(narrow[i], i - 300);
        /* same size: int32 -> float32 */
        c = call1(tensor(I32, buf, SHP(N)), tensor(F32, buf, SHP(N)));
        invoke_ok("Cast", &c);
        for (i = 0; i < N; i++)
                ck_assert_float_eq(((float *)buf)[i], (float)(i - 300));
}
END_TEST

START_TEST(test_cast_to_attribute)
{
        float f[2] = { 1.5f, -2.5f };
        int32_t o[2];
        struct ops_call c = call1(tensor(F32, f, SHP(2)), tensor(I32, o, SHP(2)));

        attr_int(&c, "to", I32);
        invoke_ok("Cast", &c);
        ck_assert_int_eq(o[0], 1);
        ck_assert_int_eq(o[1], -2);
        c.attr[0].i = I64;
        expect_reject("Cast", &c, "attribute 'to' is int64 but output dtype is int32");
        c.attr[0].i = 12345;
        expect_reject("Cast", &c, "'to'");
        c.attr[0].type = OPS_ATTR_FLOAT;
        expect_reject("Cast", &c, "'to'");
        c.nattr = 0;
        attr_int(&c, "saturate", 1);
        invoke_ok("Cast", &c);
}
END_TEST

/* ---------------------------------------------------------------- check rejections */

static void reject_common(const char *op, struct ops_call good)
{
        struct ops_call c;

        /* the unmodified call passes */
        {
                char err[256] = "";

                ck_assert_msg(ops_check(ops_lookup(op), &good, err, sizeof(err)) == 0, "%s: %s", op,
                              err);
        }
        c = good;
        c.nin = good.nin + 1;
        c.in[c.nin - 1] = good.in[0];
        expect_reject(op, &c, "input");
        c = good;
        c.nin = good.nin - 1;
        expect_reject(op, &c, "input");
        c = good;
        c.nin = 0;
        expect_reject(op, &c, "input");
        c = good;
        c.nout = 2;
        c.out[1] = good.out[0];
        expect_reject(op, &c, "output");
        c = good;
        c.nout = 0;
        expect_reject(op, &c, "output");
        c = good;
        c.out[0].dims[0] += 1;
        expect_reject(op, &c, "output shape");
        c = good;
        c.out[0].ndim += 1;
        c.out[0].dims[c.out[0].ndim - 1] = 1;
        expect_reject(op, &c, "output shape");
        c = good;
        c.in[0].dims[0] = -2;
        expect_reject(op, &c, "negative");
        c = good;
        c.in[0].ndim = OPS_MAX_DIMS + 1;
        expect_reject(op, &c, "rank");
        c = good;
        c.out[0].dims[0] = INT64_MAX / 2;
        expect_reject(op, &c, NULL);
        c = good;
        attr_int(&c, "bogus", 1);
        expect_reject(op, &c, "unknown attribute 'bogus'");
        c = good;
        c.nattr = OPS_MAX_ATTRS + 1;
        expect_reject(op, &c, "attribute");
}

START_TEST(test_check_binary)
{
        const char *ops[] = { "Add", "Sub", "Mul", "Div" };
        struct ops_call good, c;
        size_t i;

        for (i = 0; i < 4; i++) {
                good = call2(tensor(F32, NULL, SHP(2, 3)), tensor(F32, NULL, SHP(3)),
                             tensor(F32, NULL, SHP(2, 3)));
                reject_common(ops[i], good);
                c = good;
                c.in[1].dtype = I32;
                expect_reject(ops[i], &c, "input 1 dtype int32 does not match input 0 dtype float32");
                c = good;
                c.out[0].dtype = F16;
                expect_reject(ops[i], &c, "output dtype float16 but expected float32");
                c = good;
                c.in[0].dtype = c.in[1].dtype = c.out[0].dtype = BOOL;
                expect_reject(ops[i], &c, "unsupported dtype bool");
                c = good;
                c.in[0].dtype = c.in[1].dtype = c.out[0].dtype = 99;
                expect_reject(ops[i], &c, "unsupported dtype");
                c = good;
                c.in[1].dims[0] = 4;
                expect_reject(ops[i], &c, "cannot broadcast shapes [2,3] and [4]");
        }
        /* exact messages */
        {
                char err[256];

                c = call2(tensor(F32, NULL, SHP(2, 3)), tensor(I32, NULL, SHP(2, 3)),
                          tensor(F32, NULL, SHP(2, 3)));
                ck_assert_int_eq(ops_check(ops_lookup("Add"), &c, err, sizeof(err)), -EINVAL);
                ck_assert_str_eq(err, "Add: input 1 dtype int32 does not match input 0 dtype float32");
                c = call2(tensor(F32, NULL, SHP(2, 1)), tensor(F32, NULL, SHP(4)),
                          tensor(F32, NULL, SHP(2, 3)));
                ck_assert_int_eq(ops_check(ops_lookup("Add"), &c, err, sizeof(err)), -EINVAL);
                ck_assert_str_eq(err, "Add: output shape [2,3] but expected [2,4]");
                c = call2(tensor(F32, NULL, SHP(2, 3)), tensor(F32, NULL, SHP(4)),
                          tensor(F32, NULL, SHP(2, 3)));
                ck_assert_int_eq(ops_check(ops_lookup("Mul"), &c, err, sizeof(err)), -EINVAL);
                ck_assert_str_eq(err, "Mul: cannot broadcast shapes [2,3] and [4]");
                /* scalar output from scalars passes */
                c = call2(tensor(I64, NULL, SCALAR), tensor(I64, NULL, SCALAR),
                          tensor(I64, NULL, SCALAR));
                ck_assert_int_eq(ops_check(ops_lookup("Div"), &c, err, sizeof(err)), 0);
        }
}
END_TEST

START_TEST(test_check_unary)
{
        const char *ops[] = { "Relu", "Sigmoid", "Tanh" };
        struct ops_call good, c;
        size_t i;

        for (i = 0; i < 3; i++) {
                good = call1(tensor(F16, NULL, SHP(4, 5)), tensor(F16, NULL, SHP(4, 5)));
                reject_common(ops[i], good);
                c = good;
                c.out[0].dtype = F32;
                expect_reject(ops[i], &c, "output dtype float32 but expected float16");
                c = good;
                c.in[0].dtype = c.out[0].dtype = BOOL;
                expect_reject(ops[i], &c, "unsupported dtype bool");
                c = good;
                c.out[0].dims[1] = 4;
                expect_reject(ops[i], &c, "output shape [4,4] but expected [4,5]");
        }
        c = call1(tensor(I32, NULL, SHP(3)), tensor(I32, NULL, SHP(3)));
        ck_assert_int_eq(ops_check(ops_lookup("Relu"), &c, (char[64]){ 0 }, 64), 0);
        expect_reject("Sigmoid", &c, "unsupported dtype int32");
        expect_reject("Tanh", &c, "unsupported dtype int32");
}
END_TEST

START_TEST(test_check_matmul)
{
        struct ops_call good, c;
        char err[256];

        good = call2(tensor(F32, NULL, SHP(2, 3, 4)), tensor(F32, NULL, SHP(4, 5)),
                     tensor(F32, NULL, SHP(2, 3, 5)));
        reject_common("MatMul", good);
        c = good;
        c.in[1].dtype = F16;
        expect_reject("MatMul", &c, "input 1 dtype float16 does not match input 0 dtype float32");
        c = good;
        c.out[0].dtype = I32;
        expect_reject("MatMul", &c, "output dtype int32 but expected float32");
        c = good;
        c.in[0].dtype = c.in[1].dtype = c.out[0].dtype = U8;
        expect_reject("MatMul", &c, "unsupported dtype uint8");
        c = good;
        c.in[0].ndim = 0;
        expect_reject("MatMul", &c, "scalar");
        c = call2(tensor(F32, NULL, SHP(2, 3)), tensor(F32, NULL, SHP(4, 5)),
                  tensor(F32, NULL, SHP(2, 5)));
        ck_assert_int_eq(ops_check(ops_lookup("MatMul"), &c, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "MatMul: inner dimensions differ (3 vs 4)");
        c = call2(tensor(F32, NULL, SHP(3)), tensor(F32, NULL, SHP(4)), tensor(F32, NULL, SCALAR));
        expect_reject("MatMul", &c, "inner dimensions differ (3 vs 4)");
        c = call2(tensor(F32, NULL, SHP(2, 3, 4)), tensor(F32, NULL, SHP(3, 4, 5)),
                  tensor(F32, NULL, SHP(2, 3, 5)));
        expect_reject("MatMul", &c, "cannot broadcast shapes [2] and [3]");
        /* 1-D dims are dropped from the result */
        c = call2(tensor(F32, NULL, SHP(4)), tensor(F32, NULL, SHP(4, 5)),
                  tensor(F32, NULL, SHP(1, 5)));
        expect_reject("MatMul", &c, "output shape [1,5] but expected [5]");
        c = call2(tensor(F32, NULL, SHP(4)), tensor(F32, NULL, SHP(4)), tensor(F32, NULL, SHP(1)));
        expect_reject("MatMul", &c, "output shape [1] but expected []");
        c = call2(tensor(F32, NULL, SHP(3, (int64_t)1 << 32)), tensor(F32, NULL, SHP(1, 1)),
                  tensor(F32, NULL, SHP(3, 1)));
        expect_reject("MatMul", &c, NULL);
}
END_TEST

START_TEST(test_check_softmax)
{
        struct ops_call good, c;

        good = call1(tensor(F32, NULL, SHP(2, 3, 4)), tensor(F32, NULL, SHP(2, 3, 4)));
        reject_common("Softmax", good);
        c = good;
        attr_int(&c, "axis", 3);
        expect_reject("Softmax", &c, "axis 3 out of range for rank 3");
        c = good;
        attr_int(&c, "axis", -4);
        expect_reject("Softmax", &c, "axis -4 out of range");
        c = good;
        attr_int(&c, "axis", -3);
        ck_assert_int_eq(ops_check(ops_lookup("Softmax"), &c, (char[64]){ 0 }, 64), 0);
        c = good;
        attr_float(&c, "axis", 1.0);
        expect_reject("Softmax", &c, "axis");
        c = good;
        attr_int(&c, "axis", 1);
        attr_int(&c, "axis", 1);
        expect_reject("Softmax", &c, "twice");
        c = good;
        c.out[0].dtype = F16;
        expect_reject("Softmax", &c, "output dtype float16 but expected float32");
        c = good;
        c.in[0].dtype = c.out[0].dtype = I32;
        expect_reject("Softmax", &c, "unsupported dtype int32");
        c = call1(tensor(F32, NULL, SCALAR), tensor(F32, NULL, SCALAR));
        expect_reject("Softmax", &c, "scalar");
}
END_TEST

START_TEST(test_check_cast)
{
        struct ops_call good, c;

        good = call1(tensor(F32, NULL, SHP(2, 3)), tensor(F16, NULL, SHP(2, 3)));
        reject_common("Cast", good);
        c = good;
        c.out[0].dtype = 14; /* ONNX complex64 (strings are Cast's, in graphs: nn-string.c) */
        expect_reject("Cast", &c, "output 0 has unsupported dtype dtype 14");
        c = good;
        c.in[0].dtype = 0;
        expect_reject("Cast", &c, "input 0 has unsupported dtype dtype 0");
        c = good;
        attr_int(&c, "to", F32);
        expect_reject("Cast", &c, "attribute 'to' is float32 but output dtype is float16");
}
END_TEST

START_TEST(test_cost)
{
        struct ops_call c;
        uint64_t flops, bytes;

        c = call2(tensor(F32, NULL, SHP(2, 3, 4)), tensor(F32, NULL, SHP(4, 5)),
                  tensor(F32, NULL, SHP(2, 3, 5)));
        ops_cost(ops_lookup("MatMul"), &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 2 * 3 * 5 * 4 * 2);
        ck_assert_uint_eq(bytes, (24 + 20 + 30) * 4);
        c = call2(tensor(F16, NULL, SHP(4)), tensor(F16, NULL, SHP(4)), tensor(F16, NULL, SCALAR));
        ops_cost(ops_lookup("MatMul"), &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 8);
        c = call2(tensor(F32, NULL, SHP(2, 3)), tensor(F32, NULL, SHP(3)),
                  tensor(F32, NULL, SHP(2, 3)));
        ops_cost(ops_lookup("Add"), &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 6);
        ck_assert_uint_eq(bytes, (6 + 3 + 6) * 4);
        c = call1(tensor(F16, NULL, SHP(10)), tensor(F16, NULL, SHP(10)));
        ops_cost(ops_lookup("Relu"), &c, &flops, &bytes);
        ck_assert_uint_eq(flops, 10);
        ck_assert_uint_eq(bytes, 40);
        ops_cost(ops_lookup("Softmax"), &c, &flops, &bytes);
        ck_assert_uint_gt(flops, 10);
        c = call1(tensor(F16, NULL, SHP(10)), tensor(F64, NULL, SHP(10)));
        ops_cost(ops_lookup("Cast"), &c, &flops, &bytes);
        ck_assert_uint_eq(bytes, 100);
}
END_TEST


/* The reference for the index: the linear search the registry did before, over ops_get. */
static const struct ops_def *linear_lookup_onnx(const char *domain, const char *name, int opset)
{
        const struct ops_def *d, *best = NULL;
        size_t i;

        for (i = 0; (d = ops_get(i)); i++) {
                int dflt = !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
                int same = dflt ? !d->domain || !*d->domain || strcmp(d->domain, "ai.onnx") == 0
                                : d->domain && strcmp(d->domain, domain) == 0;

                if (!same || strcmp(d->name, name) != 0 || !d->infer || d->since_version > opset)
                        continue;
                if (!best || d->since_version > best->since_version)
                        best = d;
        }
        return best;
}

START_TEST(test_registry_ids_and_index)
{
        static const struct ops_def unregistered = { .name = "Add", .since_version = 1 };
        const struct ops_def *d;
        size_t id, n = ops_count();
        int opset;

        ck_assert_uint_gt(n, 0);
        /* Ids travel in wire launches as uint16_t. */
        ck_assert_uint_le(n, UINT16_MAX);
        for (id = 0; id < n; id++) {
                d = ops_by_id(id);
                ck_assert_ptr_nonnull(d);
                ck_assert_ptr_eq(ops_get(id), d);
                ck_assert_uint_eq(ops_id(d), id);
                ck_assert_uint_eq(ops_index(d), id);
                if (!d->infer)
                        continue;
                /* Found by (domain, name, opset) from its since_version on, in every spelling
                 * of the default domain, and the choice is the linear search's. */
                ck_assert_ptr_eq(ops_lookup_onnx(d->domain, d->name, d->since_version), d);
                if (!d->domain) {
                        ck_assert_ptr_eq(ops_lookup_onnx("", d->name, d->since_version), d);
                        ck_assert_ptr_eq(ops_lookup_onnx("ai.onnx", d->name, d->since_version),
                                         d);
                        ck_assert_ptr_nonnull(ops_lookup(d->name));
                }
                for (opset = 0; opset <= 22; opset++)
                        ck_assert_ptr_eq(ops_lookup_onnx(d->domain, d->name, opset),
                                         linear_lookup_onnx(d->domain, d->name, opset));
        }
        ck_assert_ptr_null(ops_by_id(n));
        ck_assert_ptr_null(ops_by_id((size_t)-1));
        ck_assert_uint_eq(ops_id(&unregistered), n);
        ck_assert_uint_eq(ops_id(NULL), n);

        /* Unknown names, another domain, an opset before the first definition. */
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "NoSuchOp", 17));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "conv", 17));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "", 17));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, NULL, 17));
        ck_assert_ptr_null(ops_lookup_onnx("com.example", "Conv", 17));
        ck_assert_ptr_null(ops_lookup_onnx("ai.onnx.ml", "Add", 17));
        d = ops_lookup_onnx(NULL, "LayerNormalization", 17);
        ck_assert_ptr_nonnull(d);
        ck_assert_int_eq(d->since_version, 17);
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "LayerNormalization", 16));
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "Mish", 17));
        /* Several definitions: the newest at or below the opset. */
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Softmax", 12)->since_version, 1);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Softmax", 13)->since_version, 13);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Softmax", 21)->since_version, 13);
}
END_TEST

static void *lookup_thread(void *arg)
{
        const struct ops_def *d = ops_lookup_onnx(NULL, "Conv", 17);

        *(size_t *)arg = d ? ops_id(d) : (size_t)-1;
        return NULL;
}

/* The first lookups race to build the index; pthread_once lets one build it. Only a fresh
 * process shows that, hence the fork of check's default mode (other tests may run first in
 * CK_FORK=no, where this is a plain concurrent lookup). */
START_TEST(test_registry_concurrent_init)
{
        pthread_t t[4];
        size_t ids[4];
        int i;

        for (i = 0; i < 4; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, lookup_thread, &ids[i]), 0);
        for (i = 0; i < 4; i++) {
                ck_assert_int_eq(pthread_join(t[i], NULL), 0);
                ck_assert_ptr_eq(ops_by_id(ids[i]), ops_lookup_onnx(NULL, "Conv", 17));
        }
}
END_TEST

/* A definition without a check gets the registry's check through infer. */
START_TEST(test_default_check)
{
        const struct ops_def *d = ops_lookup_onnx(NULL, "Transpose", 13);
        struct ops_call c;
        char err[256];

        ck_assert_ptr_nonnull(d);
        ck_assert_ptr_null(d->check);
        memset(&c, 0, sizeof(c));
        c.nin = c.nout = 1;
        c.in[0].dtype = c.out[0].dtype = PROTO_DTYPE_FLOAT32;
        c.in[0].ndim = c.out[0].ndim = 2;
        c.in[0].dims[0] = 2;
        c.in[0].dims[1] = 3;
        c.out[0].dims[0] = 3;
        c.out[0].dims[1] = 2;
        ck_assert_msg(ops_check(d, &c, err, sizeof(err)) == 0, "%s", err);
        c.out[0].dims[0] = 2;
        c.out[0].dims[1] = 3;
        ck_assert_int_eq(ops_check(d, &c, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "Transpose: output shape [2,3] but expected [3,2]");
        ck_assert_int_eq(ops_check_by_infer(d, &c, err, sizeof(err)), -EINVAL);
        /* Counts and attribute names come first, named the same way. */
        c.nout = 2;
        ck_assert_int_eq(ops_check(d, &c, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "Transpose: expected 1 output, got 2");
        c.nout = 1;
        c.nattr = 1;
        strcpy(c.attr[0].name, "axis");
        c.attr[0].type = OPS_ATTR_INT;
        ck_assert_int_eq(ops_check(d, &c, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "Transpose: unknown attribute 'axis'");
}
END_TEST

static Suite *ops_suite(void)
{
        Suite *s = suite_create("ops");
        TCase *tc;

        tc = tcase_create("registry");
        tcase_add_test(tc, test_registry);
        tcase_add_test(tc, test_registry_ids_and_index);
        tcase_add_test(tc, test_registry_concurrent_init);
        tcase_add_test(tc, test_default_check);
        tcase_add_test(tc, test_attrs);
        tcase_add_test(tc, test_cost);
        suite_add_tcase(s, tc);

        tc = tcase_create("half");
        tcase_add_test(tc, test_half_to_float_exhaustive);
        tcase_add_test(tc, test_float_to_half_sweep);
        tcase_add_test(tc, test_half_special_values);
        suite_add_tcase(s, tc);

        tc = tcase_create("elementwise");
        tcase_add_test(tc, test_binary_f32);
        tcase_add_test(tc, test_binary_f16);
        tcase_add_test(tc, test_binary_int);
        tcase_add_test(tc, test_int_wraparound);
        tcase_add_test(tc, test_div_by_zero);
        tcase_add_test(tc, test_binary_in_place);
        tcase_add_test(tc, test_relu);
        tcase_add_test(tc, test_sigmoid_tanh);
        suite_add_tcase(s, tc);

        tc = tcase_create("matmul");
        tcase_add_test(tc, test_matmul_f32);
        tcase_add_test(tc, test_matmul_f16);
        tcase_add_test(tc, test_matmul_empty_inner);
        tcase_add_test(tc, test_matmul_int);
        tcase_add_test(tc, test_matmul_threads);
        suite_add_tcase(s, tc);

        tc = tcase_create("softmax");
        tcase_add_test(tc, test_softmax);
        tcase_add_test(tc, test_softmax_stable);
        suite_add_tcase(s, tc);

        tc = tcase_create("cast");
        tcase_add_test(tc, test_cast_float_to_int);
        tcase_add_test(tc, test_cast_half);
        tcase_add_test(tc, test_cast_int_and_bool);
        tcase_add_test(tc, test_cast_in_place);
        tcase_add_test(tc, test_cast_to_attribute);
        suite_add_tcase(s, tc);

        tc = tcase_create("check");
        tcase_add_test(tc, test_check_binary);
        tcase_add_test(tc, test_check_unary);
        tcase_add_test(tc, test_check_matmul);
        tcase_add_test(tc, test_check_softmax);
        tcase_add_test(tc, test_check_cast);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(ops_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Helpers shared by the operator-family unit tests (test_ops_reduce.c, test_ops_shape.c):
 * dtype shorthands, tensors and calls built by hand, values read and written in any dtype,
 * a deterministic generator, and run/expect wrappers around the registry. Header-only; each
 * test program includes it once. */
#ifndef NPUD_TEST_OPS_UTIL_H
#define NPUD_TEST_OPS_UTIL_H

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define F32 PROTO_DTYPE_FLOAT32
#define F16 PROTO_DTYPE_FLOAT16
#define BF16 PROTO_DTYPE_BFLOAT16
#define F64 PROTO_DTYPE_FLOAT64
#define I8 PROTO_DTYPE_INT8
#define I16 PROTO_DTYPE_INT16
#define I32 PROTO_DTYPE_INT32
#define I64 PROTO_DTYPE_INT64
#define U8 PROTO_DTYPE_UINT8
#define U64 PROTO_DTYPE_UINT64
#define BOOL PROTO_DTYPE_BOOL

#define SHP(...)                                                                               \
        (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)),                           \
                (const int64_t[]){ __VA_ARGS__ }
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---------------------------------------------------------------- helpers */

static __attribute__((unused)) uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static __attribute__((unused)) uint32_t rng(void)
{
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t)(rng_state >> 33);
}

static __attribute__((unused)) struct ops_tensor tensor(int dtype, void *data, int ndim, const int64_t *dims)
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

static __attribute__((unused)) int64_t numel(const struct ops_tensor *t)
{
        int64_t n = 1;
        int i;

        for (i = 0; i < t->ndim; i++)
                n *= t->dims[i];
        return n;
}

static __attribute__((unused)) struct ops_call call_in(int nin, const struct ops_tensor *in)
{
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        c.nin = nin;
        memcpy(c.in, in, (size_t)nin * sizeof(*in));
        c.nout = 1;
        return c;
}

static __attribute__((unused)) struct ops_attr *attr_new(struct ops_call *c, const char *name, int type)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = type;
        return a;
}

static __attribute__((unused)) void attr_int(struct ops_call *c, const char *name, int64_t v)
{
        attr_new(c, name, OPS_ATTR_INT)->i = v;
}

static __attribute__((unused)) void attr_float(struct ops_call *c, const char *name, double v)
{
        attr_new(c, name, OPS_ATTR_FLOAT)->f = v;
}

static __attribute__((unused)) void attr_str(struct ops_call *c, const char *name, const char *v)
{
        attr_new(c, name, OPS_ATTR_STRING)->s = v;
}

static __attribute__((unused)) void attr_tensor(struct ops_call *c, const char *name, const struct ops_tensor *t)
{
        attr_new(c, name, OPS_ATTR_TENSOR)->t = t;
}

static __attribute__((unused)) void attr_ints(struct ops_call *c, const char *name, int n, const int64_t *v)
{
        struct ops_attr *a = attr_new(c, name, OPS_ATTR_INTS);

        a->n = n;
        a->ints = v;
}

static __attribute__((unused)) double bf16_get(uint16_t h)
{
        uint32_t x = (uint32_t)h << 16;
        float f;

        memcpy(&f, &x, sizeof(f));
        return f;
}

/* Element i as double. */
static __attribute__((unused)) double get(int dtype, const void *p, int64_t i)
{
        switch (dtype) {
        case F32: return ((const float *)p)[i];
        case F64: return ((const double *)p)[i];
        case F16: return ops_half_to_float(((const uint16_t *)p)[i]);
        case BF16: return bf16_get(((const uint16_t *)p)[i]);
        case I8: return ((const int8_t *)p)[i];
        case I16: return ((const int16_t *)p)[i];
        case I32: return ((const int32_t *)p)[i];
        case I64: return (double)((const int64_t *)p)[i];
        case U8:
        case BOOL: return ((const uint8_t *)p)[i];
        case U64: return (double)((const uint64_t *)p)[i];
        default: ck_abort_msg("dtype %d", dtype); return 0;
        }
}

/* Writes v (exactly representable in every dtype used) to element i. */
static __attribute__((unused)) void put(int dtype, void *p, int64_t i, double v)
{
        float f = (float)v;
        uint32_t x;

        switch (dtype) {
        case F32: ((float *)p)[i] = f; break;
        case F64: ((double *)p)[i] = v; break;
        case F16: ((uint16_t *)p)[i] = ops_float_to_half(f); break;
        case BF16:
                memcpy(&x, &f, sizeof(x));
                ((uint16_t *)p)[i] = (uint16_t)(x >> 16);
                break;
        case I8: ((int8_t *)p)[i] = (int8_t)v; break;
        case I16: ((int16_t *)p)[i] = (int16_t)v; break;
        case I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case I64: ((int64_t *)p)[i] = (int64_t)v; break;
        case U8:
        case BOOL: ((uint8_t *)p)[i] = (uint8_t)v; break;
        case U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
        default: ck_abort_msg("dtype %d", dtype);
        }
}

/* A tensor of dtype filled with small values (eighths in [lo, hi] for floats, integers for
 * integer dtypes), all exact in every dtype. */
static __attribute__((unused)) struct ops_tensor make(int dtype, int ndim, const int64_t *dims, double lo, double hi)
{
        struct ops_tensor t = tensor(dtype, NULL, ndim, dims);
        int64_t n = numel(&t), i;
        int is_float = dtype == F32 || dtype == F64 || dtype == F16 || dtype == BF16;

        t.data = calloc((size_t)(n ? n : 1), 8);
        for (i = 0; i < n; i++) {
                double v = lo + (hi - lo) * (rng() % 1000) / 999.0;

                put(dtype, t.data, i, is_float ? round(v * 8) / 8 : round(v));
        }
        return t;
}

static __attribute__((unused)) const struct ops_def *def_at(const char *op, int opset)
{
        const struct ops_def *d = ops_lookup_onnx(NULL, op, opset);

        ck_assert_msg(d != NULL, "%s at opset %d not registered", op, opset);
        return d;
}

/* As a graph runs a node of definition d (op names it): infer (input data readable),
 * allocate, run. The inferred call must also pass check. Returns 0 or the first failure,
 * with its message in err. */
static __attribute__((unused)) int run_def(const struct ops_def *d, const char *op, struct ops_call *c, char *err,
                                           size_t errlen)
{
        int i, rc;

        err[0] = '\0';
        for (i = 0; i < c->nout; i++)
                memset(&c->out[i], 0, sizeof(c->out[i]));
        rc = ops_infer(d, c, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < c->nout; i++) {
                int64_t n = numel(&c->out[i]);

                ck_assert_int_ne(c->out[i].dtype, 0);
                c->out[i].data = calloc((size_t)(n ? n : 1), 8);
        }
        rc = ops_check(d, c, err, errlen);
        ck_assert_msg(rc == 0, "%s: check of an inferred call failed: %s", op, err);
        return ops_run(d, c, err, errlen);
}

/* run_def of op's definition at opset in the default domain, the call at that opset. */
static __attribute__((unused)) int run_at(const char *op, int opset, struct ops_call *c, char *err, size_t errlen)
{
        const struct ops_def *d = def_at(op, opset);

        c->opset = opset;
        return run_def(d, op, c, err, errlen);
}

static __attribute__((unused)) void run_ok(const char *op, int opset, struct ops_call *c)
{
        char err[256];
        int rc = run_at(op, opset, c, err, sizeof(err));

        ck_assert_msg(rc == 0, "%s failed (%d): %s", op, rc, err);
}

static __attribute__((unused)) void free_outs(struct ops_call *c)
{
        int i;

        for (i = 0; i < c->nout; i++) {
                free(c->out[i].data);
                c->out[i].data = NULL;
        }
}

/* infer (or run) must fail with -EINVAL and a message "<op>: ..." containing want. */
static __attribute__((unused)) void expect_fail(const char *op, int opset, struct ops_call *c, const char *want)
{
        char err[256];
        size_t n = strlen(op);
        int rc = run_at(op, opset, c, err, sizeof(err));

        free_outs(c);
        ck_assert_msg(rc == -EINVAL, "%s: returned %d, wanted -EINVAL (\"%s\")", op, rc, want);
        ck_assert_msg(strncmp(err, op, n) == 0 && err[n] == ':', "message \"%s\" does not name %s",
                      err, op);
        ck_assert_msg(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

/* check of a wire launch (data pointers NULL) must fail with want. */
static __attribute__((unused)) void expect_check_fail(const char *op, int opset, const struct ops_call *c,
                              const char *want)
{
        char err[256] = "";
        int rc = ops_check(def_at(op, opset), c, err, sizeof(err));

        ck_assert_msg(rc == -EINVAL, "%s: check returned %d (\"%s\")", op, rc, want);
        ck_assert_msg(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

static __attribute__((unused)) void assert_shape(const struct ops_tensor *t, int ndim, const int64_t *dims)
{
        int i;

        ck_assert_int_eq(t->ndim, ndim);
        for (i = 0; i < ndim; i++)
                ck_assert_int_eq(t->dims[i], dims[i]);
}

static __attribute__((unused)) void assert_vals(const struct ops_tensor *t, const double *want, int n, double tol)
{
        int i;

        ck_assert_int_eq(numel(t), n);
        for (i = 0; i < n; i++) {
                double g = get(t->dtype, t->data, i);

                ck_assert_msg(fabs(g - want[i]) <= tol * (1 + fabs(want[i])) ||
                                      (isnan(g) && isnan(want[i])) ||
                                      (isinf(want[i]) && g == want[i]),
                              "[%d]: %.9g vs %.9g", i, g, want[i]);
        }
}

#endif

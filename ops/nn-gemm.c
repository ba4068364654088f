/* Gemm for the cube engine: Y = alpha * A' * B' + beta * C, A' and B' optionally transposed
 * (transA, transB), C optional and unidirectionally broadcast to Y's [M, N]. One
 * definition from opset 1: the legacy 'broadcast' attribute of opsets 1-6 is accepted and
 * broadcasting always applies, which covers what it allowed. Y is first filled with
 * beta * C and then accumulated into by a single OpenBLAS sgemm / dgemm (beta 1), so the
 * bias costs one pass. float16 and bfloat16 go through float32 copies. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "blas.h"
#include "nn-common.h"

struct gemm_shape {
        int64_t m, n, k;
        int64_t c_rs, c_cs; /* element strides of C along Y's rows and columns (0 = broadcast) */
};

static int gemm_shape_of(const struct ops_call *call, struct gemm_shape *s, char *err,
                         size_t errlen)
{
        const struct ops_tensor *a = &call->in[0], *b = &call->in[1];
        int ta = ops_attr_int(call, "transA", 0) != 0, tb = ops_attr_int(call, "transB", 0) != 0;
        int64_t kb, c0, c1;

        if (a->ndim != 2 || b->ndim != 2)
                return ops_fail(err, errlen, -EINVAL, "Gemm: A and B must be 2-D (ranks %d, %d)",
                                a->ndim, b->ndim);
        s->m = ta ? a->dims[1] : a->dims[0];
        s->k = ta ? a->dims[0] : a->dims[1];
        kb = tb ? b->dims[1] : b->dims[0];
        s->n = tb ? b->dims[0] : b->dims[1];
        if (s->k != kb)
                return ops_fail(err, errlen, -EINVAL, "Gemm: inner dimensions differ (%lld vs %lld)",
                                (long long)s->k, (long long)kb);
        if (s->m > INT_MAX || s->n > INT_MAX || s->k > INT_MAX)
                return ops_fail(err, errlen, -EINVAL, "Gemm: matrix dimension above %d", INT_MAX);
        s->c_rs = s->c_cs = 0;
        if (nn_has_in(call, 2)) {
                const struct ops_tensor *c = &call->in[2];

                if (c->ndim > 2)
                        return ops_fail(err, errlen, -EINVAL, "Gemm: C has rank %d", c->ndim);
                c0 = c->ndim == 2 ? c->dims[0] : 1;
                c1 = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
                if ((c0 != 1 && c0 != s->m) || (c1 != 1 && c1 != s->n))
                        return ops_fail(err, errlen, -EINVAL,
                                        "Gemm: C of [%lld,%lld] does not broadcast to [%lld,%lld]",
                                        (long long)c0, (long long)c1, (long long)s->m,
                                        (long long)s->n);
                s->c_rs = c0 == 1 ? 0 : c1;
                s->c_cs = c1 == 1 ? 0 : 1;
        }
        return 0;
}

static int gemm_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct gemm_shape s;
        int64_t dims[2];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (call->in[1].dtype != call->in[0].dtype ||
            (nn_has_in(call, 2) && call->in[2].dtype != call->in[0].dtype))
                return ops_fail(err, errlen, -EINVAL, "Gemm: inputs of different dtypes");
        rc = gemm_shape_of(call, &s, err, errlen);
        if (rc)
                return rc;
        dims[0] = s.m;
        dims[1] = s.n;
        nn_set_out(call, 0, call->in[0].dtype, 2, dims);
        return 0;
}

/* One body per element type: bias fill, then the BLAS call accumulating into it, in row
 * blocks of about OPS_POLL_MACS multiply-adds with a check of the run context between them
 * (one call for a small product). Row r of A is at a + r * k, or column r (a + r) when A is
 * transposed. */
#define GEMM_RUN(name, T, blas)                                                                \
        static int name(const struct ops_call *call, const struct gemm_shape *s, T *y,        \
                        const T *a, const T *b, const T *c, char *err, size_t errlen)         \
        {                                                                                      \
                int64_t work = (s->n ? s->n : 1) * (s->k ? s->k : 1), r, h;                    \
                int64_t rows = work >= OPS_POLL_MACS ? 1 : OPS_POLL_MACS / work;               \
                int ta = ops_attr_int(call, "transA", 0) != 0;                                 \
                int tb = ops_attr_int(call, "transB", 0) != 0;                                 \
                T alpha = (T)ops_attr_float(call, "alpha", 1.0);                               \
                T beta = (T)ops_attr_float(call, "beta", 1.0), acc = 0;                        \
                int64_t i, j;                                                                  \
                                                                                               \
                if (c && beta != 0) {                                                          \
                        for (i = 0; i < s->m; i++)                                             \
                                for (j = 0; j < s->n; j++)                                     \
                                        y[i * s->n + j] = beta * c[i * s->c_rs + j * s->c_cs]; \
                        acc = 1;                                                               \
                } else if (!s->k || alpha == 0) { /* else the product (beta 0) writes y */     \
                        memset(y, 0, (size_t)(s->m * s->n) * sizeof(T));                       \
                }                                                                              \
                if (!s->k || alpha == 0)                                                       \
                        return 0;                                                              \
                for (r = 0; r < s->m; r += h) {                                                \
                        h = s->m - r < rows ? s->m - r : rows;                                 \
                        if (r && ops_poll("Gemm", err, errlen))                                \
                                return -ECANCELED;                                             \
                        blas(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,                    \
                             tb ? CblasTrans : CblasNoTrans, (blasint)h, (blasint)s->n,        \
                             (blasint)s->k, alpha, ta ? a + r : a + r * s->k,                  \
                             (blasint)(ta ? s->m : s->k), b, (blasint)(tb ? s->k : s->n), acc, \
                             y + r * s->n, (blasint)s->n);                                     \
                }                                                                              \
                return 0;                                                                      \
        }

GEMM_RUN(gemm_f32, float, ops_sgemm)
GEMM_RUN(gemm_f64, double, cblas_dgemm)

static int gemm_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        struct nn_f32 a, b, c = { NULL, NULL }, y;
        struct gemm_shape s;
        int rc, has_c = nn_has_in(call, 2);

        rc = gemm_shape_of(call, &s, err, errlen);
        if (rc)
                return rc;
        if (!s.m || !s.n)
                return 0;
        if (call->in[0].dtype == PROTO_DTYPE_FLOAT64)
                return gemm_f64(call, &s, call->out[0].data, call->in[0].data, call->in[1].data,
                                has_c ? call->in[2].data : NULL, err, errlen);
        rc = nn_f32_in(&call->in[0], &a);
        rc |= nn_f32_in(&call->in[1], &b);
        if (has_c)
                rc |= nn_f32_in(&call->in[2], &c);
        rc |= nn_f32_out(&call->out[0], &y);
        if (rc) {
                rc = ops_fail(err, errlen, -ENOMEM, "Gemm: out of memory");
        } else {
                /* A bias row (C of [N] or [1, N], beta 1) and a Relu the graph's epilogue
                 * offers: the product's post-op, applied to each tile as it is made, rather
                 * than a fill of Y before the product and a pass over it after. */
                float alpha = (float)ops_attr_float(call, "alpha", 1.0), beta = (float)ops_attr_float(call, "beta", 1.0);
                int row_bias = has_c && beta == 1.0f && s.c_rs == 0 && s.c_cs == 1;
                struct ops_sgemm_post post = { row_bias ? c.p : NULL, 0 };
                if (s.k && alpha != 0 && (row_bias || !has_c))
                        post.relu = ops_sgemm_relu_claim();
                if (s.k && alpha != 0 && (post.bias || post.relu)) {
                        ops_sgemm_post(&post);
                        rc = gemm_f32(call, &s, y.p, a.p, b.p, NULL, err, errlen);
                        ops_sgemm_post(NULL);
                } else {
                        rc = gemm_f32(call, &s, y.p, a.p, b.p, c.p, err, errlen);
                }
                if (!rc)
                        nn_f32_commit(&call->out[0], &y);
        }
        nn_f32_done(&a);
        nn_f32_done(&b);
        nn_f32_done(&c);
        nn_f32_done(&y);
        return rc;
}

static void gemm_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        struct gemm_shape s;

        nn_cost_simple(call, 0, ret_flops, ret_bytes);
        if (!gemm_shape_of(call, &s, NULL, 0))
                *ret_flops = ops_mul_sat(ops_mul_sat(2 * (uint64_t)s.m, (uint64_t)s.n),
                                         (uint64_t)s.k + 1);
}

const struct ops_def ops_gemm_def = {
        .name = "Gemm", .min_inputs = 2, .max_inputs = 3, .outputs = 1, .engine = OPS_ENGINE_CUBE,
        .run = gemm_run, .cost = gemm_cost, .infer = gemm_infer, .since_version = 1,
};

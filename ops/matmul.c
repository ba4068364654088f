/* MatMul for the cube engine, with ONNX (numpy matmul) semantics: a 1-D first operand is
 * a row vector and a 1-D second operand a column vector, the added dim being dropped from
 * the result; leading batch dims broadcast. float32 goes to OpenBLAS sgemm one matrix at a
 * time, or in a single call when the second operand is shared by every batch; float64 takes
 * the same path through dgemm; float16 and bfloat16 are widened to float32 temporaries
 * around the sgemm path; 32- and 64-bit integers use plain loops in unsigned arithmetic so
 * that overflow wraps. Wire launches use the check below; graphs use infer (opset 1 on:
 * later opsets only added dtypes). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "blas.h"
#include "nn-common.h"

struct mm_shape {
        int64_t m, n, k;
        int64_t count;               /* number of matrices in the result */
        struct ops_tensor batch;     /* broadcast batch dims */
        int64_t sa[OPS_MAX_DIMS];    /* per batch dim: stride of A in matrices, 0 = broadcast */
        int64_t sb[OPS_MAX_DIMS];
        int a_full;                  /* A has every batch, laid out like the result */
        int b_shared;                /* one B matrix for every batch */
        struct ops_tensor out;       /* result shape */
};

static int mm_dtype_ok(int dtype)
{
        return dtype == PROTO_DTYPE_FLOAT32 || dtype == PROTO_DTYPE_FLOAT16 ||
               dtype == PROTO_DTYPE_FLOAT64 || dtype == PROTO_DTYPE_BFLOAT16 ||
               dtype == PROTO_DTYPE_INT32 || dtype == PROTO_DTYPE_INT64 ||
               dtype == PROTO_DTYPE_UINT32 || dtype == PROTO_DTYPE_UINT64;
}

/* Shapes of the product a b, whose ranks (1 or more) were validated; messages start with
 * op. */
static int mm_shape_ab(const char *op, const struct ops_tensor *a, const struct ops_tensor *b,
                       struct mm_shape *s, char *err, size_t errlen)
{
        struct ops_tensor ba, bb;
        char msg[2 * OPS_SHAPE_STR_MAX + 64];
        int64_t kb;
        int i;

        memset(s, 0, sizeof(*s));
        memset(&ba, 0, sizeof(ba));
        memset(&bb, 0, sizeof(bb));
        s->k = a->dims[a->ndim - 1];
        s->m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
        kb = b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0];
        s->n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
        if (s->k != kb)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: inner dimensions differ (%lld vs %lld)", op,
                                (long long)s->k, (long long)kb);
        ba.ndim = a->ndim > 2 ? a->ndim - 2 : 0;
        bb.ndim = b->ndim > 2 ? b->ndim - 2 : 0;
        memcpy(ba.dims, a->dims, (size_t)ba.ndim * sizeof(a->dims[0]));
        memcpy(bb.dims, b->dims, (size_t)bb.ndim * sizeof(b->dims[0]));
        if (ops_broadcast_shape(&ba, &bb, &s->batch, msg, sizeof(msg)))
                return ops_fail(err, errlen, -EINVAL, "%s: batch dimensions: %s", op, msg);
        ops_broadcast_strides(&ba, &s->batch, s->sa);
        ops_broadcast_strides(&bb, &s->batch, s->sb);
        s->count = ops_tensor_numel(&s->batch);
        s->a_full = ops_tensor_numel(&ba) == s->count;
        s->b_shared = ops_tensor_numel(&bb) == 1;

        s->out.dtype = a->dtype;
        s->out.ndim = s->batch.ndim;
        memcpy(s->out.dims, s->batch.dims, (size_t)s->batch.ndim * sizeof(s->batch.dims[0]));
        if (a->ndim >= 2)
                s->out.dims[s->out.ndim++] = s->m;
        if (b->ndim >= 2)
                s->out.dims[s->out.ndim++] = s->n;
        for (i = 0; i < s->out.ndim; i++)
                if (s->out.dims[i] < 0)
                        return ops_fail(err, errlen, -EINVAL, "%s: invalid dimension", op);
        return 0;
}

static int mm_shape_of(const struct ops_call *call, struct mm_shape *s, char *err,
                       size_t errlen)
{
        return mm_shape_ab("MatMul", &call->in[0], &call->in[1], s, err, errlen);
}

/* Dtypes, ranks and shapes of a call (after the common validation or infer's own). */
static int mm_validate(const struct ops_call *call, struct mm_shape *s, char *err,
                       size_t errlen)
{
        char b1[OPS_DTYPE_STR_MAX], b2[OPS_DTYPE_STR_MAX];
        int rc, i;

        if (!mm_dtype_ok(call->in[0].dtype))
                return ops_fail(err, errlen, -EINVAL, "MatMul: input 0 has unsupported dtype %s",
                                ops_dtype_str(call->in[0].dtype, b1, sizeof(b1)));
        if (call->in[1].dtype != call->in[0].dtype)
                return ops_fail(err, errlen, -EINVAL,
                                "MatMul: input 1 dtype %s does not match input 0 dtype %s",
                                ops_dtype_str(call->in[1].dtype, b1, sizeof(b1)),
                                ops_dtype_str(call->in[0].dtype, b2, sizeof(b2)));
        for (i = 0; i < 2; i++)
                if (call->in[i].ndim < 1)
                        return ops_fail(err, errlen, -EINVAL,
                                        "MatMul: input %d is a scalar, rank 1 or more needed", i);
        rc = mm_shape_of(call, s, err, errlen);
        if (rc)
                return rc;
        if (s->m > INT_MAX || s->n > INT_MAX || s->k > INT_MAX)
                return ops_fail(err, errlen, -EINVAL,
                                "MatMul: matrix dimension above %d not supported", INT_MAX);
        return 0;
}

static int mm_check(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        struct mm_shape s;
        int rc;

        rc = ops_check_common(def, call, NULL, err, errlen);
        if (rc)
                return rc;
        rc = mm_validate(call, &s, err, errlen);
        if (rc)
                return rc;
        return ops_check_output(def, call, call->in[0].dtype, &s.out, err, errlen);
}

static int mm_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct mm_shape s;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        rc = mm_validate(call, &s, err, errlen);
        if (rc)
                return rc;
        nn_set_out(call, 0, call->in[0].dtype, s.out.ndim, s.out.dims);
        return 0;
}

/* Rows of an m x n x k product between two checks of the run context (at least one). */
static int64_t mm_block_rows(int64_t n, int64_t k)
{
        int64_t work = (n ? n : 1) * (k ? k : 1), rows;

        rows = work >= OPS_POLL_MACS ? 1 : OPS_POLL_MACS / work;
        return rows;
}

/* Calls fn(ctx, index, a offset, b offset) for each result matrix, offsets in matrices; the
 * run context is checked between matrices every OPS_POLL_MACS multiply-adds (fn checks
 * inside one big product). 0, or fn's or the check's failure. */
static int mm_for_each(const struct mm_shape *s,
                       int (*fn)(void *ctx, int64_t i, int64_t oa, int64_t ob, char *err,
                                 size_t errlen),
                       void *ctx, char *err, size_t errlen)
{
        int64_t idx[OPS_MAX_DIMS] = { 0 };
        int64_t i, oa = 0, ob = 0, work = 0;
        int d, rc;

        for (i = 0; i < s->count; i++) {
                work += s->m * (s->n ? s->n : 1) * (s->k ? s->k : 1);
                if (work >= OPS_POLL_MACS) {
                        work = 0;
                        rc = ops_poll("MatMul", err, errlen);
                        if (rc)
                                return rc;
                }
                rc = fn(ctx, i, oa, ob, err, errlen);
                if (rc)
                        return rc;
                for (d = s->batch.ndim - 1; d >= 0; d--) {
                        oa += s->sa[d];
                        ob += s->sb[d];
                        if (++idx[d] < s->batch.dims[d])
                                break;
                        oa -= s->sa[d] * s->batch.dims[d];
                        ob -= s->sb[d] * s->batch.dims[d];
                        idx[d] = 0;
                }
        }
        return 0;
}

struct mm_f32_ctx {
        const struct mm_shape *s;
        float *c;
        const float *a, *b;
};

/* A big product runs as row blocks of about OPS_POLL_MACS multiply-adds with a check of
 * the run context between them; a small one is a single call, as before. */
static int mm_sgemm(float *c, const float *a, const float *b, int64_t m, int64_t n, int64_t k,
                    char *err, size_t errlen)
{
        int64_t rows = mm_block_rows(n, k), r, h;
        int rc;

        if (!m || !n)
                return 0;
        /* BLAS rejects lda = 0; an empty inner product is a zero matrix. */
        if (!k) {
                memset(c, 0, (size_t)(m * n) * sizeof(*c));
                return 0;
        }
        for (r = 0; r < m; r += h) {
                h = m - r < rows ? m - r : rows;
                if (r && (rc = ops_poll("MatMul", err, errlen)))
                        return rc;
                ops_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)h, (blasint)n,
                          (blasint)k, 1.0f, a + r * k, (blasint)k, b, (blasint)n, 0.0f,
                          c + r * n, (blasint)n);
        }
        return 0;
}

static int mm_f32_one(void *ctx_, int64_t i, int64_t oa, int64_t ob, char *err, size_t errlen)
{
        const struct mm_f32_ctx *ctx = ctx_;
        const struct mm_shape *s = ctx->s;

        return mm_sgemm(ctx->c + i * s->m * s->n, ctx->a + oa * s->m * s->k,
                        ctx->b + ob * s->k * s->n, s->m, s->n, s->k, err, errlen);
}

static int mm_f32(const struct mm_shape *s, float *c, const float *a, const float *b,
                  char *err, size_t errlen)
{
        struct mm_f32_ctx ctx = { s, c, a, b };

        /* Stacked A matrices times one B are a single tall product. */
        if (s->a_full && s->b_shared && s->count * s->m <= INT_MAX)
                return mm_sgemm(c, a, b, s->count * s->m, s->n, s->k, err, errlen);
        return mm_for_each(s, mm_f32_one, &ctx, err, errlen);
}

struct mm_f64_ctx {
        const struct mm_shape *s;
        double *c;
        const double *a, *b;
};

static int mm_dgemm(double *c, const double *a, const double *b, int64_t m, int64_t n,
                    int64_t k, char *err, size_t errlen)
{
        int64_t rows = mm_block_rows(n, k), r, h;
        int rc;

        if (!m || !n)
                return 0;
        if (!k) {
                memset(c, 0, (size_t)(m * n) * sizeof(*c));
                return 0;
        }
        for (r = 0; r < m; r += h) {
                h = m - r < rows ? m - r : rows;
                if (r && (rc = ops_poll("MatMul", err, errlen)))
                        return rc;
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)h, (blasint)n,
                            (blasint)k, 1.0, a + r * k, (blasint)k, b, (blasint)n, 0.0,
                            c + r * n, (blasint)n);
        }
        return 0;
}

static int mm_f64_one(void *ctx_, int64_t i, int64_t oa, int64_t ob, char *err, size_t errlen)
{
        const struct mm_f64_ctx *ctx = ctx_;
        const struct mm_shape *s = ctx->s;

        return mm_dgemm(ctx->c + i * s->m * s->n, ctx->a + oa * s->m * s->k,
                        ctx->b + ob * s->k * s->n, s->m, s->n, s->k, err, errlen);
}

static int mm_f64(const struct mm_shape *s, double *c, const double *a, const double *b,
                  char *err, size_t errlen)
{
        struct mm_f64_ctx ctx = { s, c, a, b };

        if (s->a_full && s->b_shared && s->count * s->m <= INT_MAX)
                return mm_dgemm(c, a, b, s->count * s->m, s->n, s->k, err, errlen);
        return mm_for_each(s, mm_f64_one, &ctx, err, errlen);
}

/* float16 and bfloat16: widened to float32 copies, the product narrowed back. */
static int mm_f16(const struct mm_shape *s, const struct ops_call *call, char *err,
                  size_t errlen)
{
        int64_t na = ops_tensor_numel(&call->in[0]), nb = ops_tensor_numel(&call->in[1]);
        int64_t nc = ops_tensor_numel(&call->out[0]);
        float *a, *b, *c;
        char msg[200] = "";
        int rc;

        /* float32 copies of everything: a workspace charged to the run's budget */
        a = ops_buf_alloc(ops_bytes((uint64_t)na, sizeof(float)), msg, sizeof(msg));
        b = a ? ops_buf_alloc(ops_bytes((uint64_t)nb, sizeof(float)), msg, sizeof(msg)) : NULL;
        c = b ? ops_buf_alloc(ops_bytes((uint64_t)nc, sizeof(float)), msg, sizeof(msg)) : NULL;
        if (!a || !b || !c) {
                ops_buf_free(a);
                ops_buf_free(b);
                return ops_fail(err, errlen, -ENOMEM, "MatMul: float16 workspace: %s", msg);
        }
        nn_to_f32(a, call->in[0].dtype, call->in[0].data, na);
        nn_to_f32(b, call->in[1].dtype, call->in[1].data, nb);
        rc = mm_f32(s, c, a, b, err, errlen);
        if (!rc)
                nn_from_f32(call->out[0].data, call->out[0].dtype, c, nc);
        ops_buf_free(a);
        ops_buf_free(b);
        ops_buf_free(c);
        return rc;
}

/* Integer kernels: i-k-j order so the innermost loop streams rows of B and C. */
#define MM_INT_KERNEL(name, U)                                                                 \
        struct name##_ctx {                                                                    \
                const struct mm_shape *s;                                                      \
                U *c;                                                                          \
                const U *a, *b;                                                                \
        };                                                                                     \
        static int name##_one(void *ctx_, int64_t bi, int64_t oa, int64_t ob, char *err,       \
                              size_t errlen)                                                   \
        {                                                                                      \
                const struct name##_ctx *ctx = ctx_;                                           \
                int64_t m = ctx->s->m, n = ctx->s->n, k = ctx->s->k, i, j, p;                  \
                int64_t rows = mm_block_rows(n, k) / 16 + 1;                                   \
                U *c = ctx->c + bi * m * n;                                                    \
                const U *a = ctx->a + oa * m * k, *b = ctx->b + ob * k * n;                    \
                                                                                               \
                for (i = 0; i < m; i++) {                                                      \
                        U *crow = c + i * n;                                                   \
                                                                                               \
                        /* scalar loops: a check every 1/16 of the BLAS block */              \
                        if (i && i % rows == 0 && ops_poll("MatMul", err, errlen))             \
                                return -ECANCELED;                                             \
                                                                                               \
                        for (j = 0; j < n; j++)                                                \
                                crow[j] = 0;                                                   \
                        for (p = 0; p < k; p++) {                                              \
                                U av = a[i * k + p];                                           \
                                const U *brow = b + p * n;                                     \
                                                                                               \
                                for (j = 0; j < n; j++)                                        \
                                        crow[j] += av * brow[j];                               \
                        }                                                                      \
                }                                                                              \
                return 0;                                                                      \
        }                                                                                      \
        static int name(const struct mm_shape *s, void *c, const void *a, const void *b,       \
                        char *err, size_t errlen)                                              \
        {                                                                                      \
                struct name##_ctx ctx = { s, c, a, b };                                        \
                                                                                               \
                return mm_for_each(s, name##_one, &ctx, err, errlen);                          \
        }

/* int32_t and int64_t data are read and written through their unsigned counterparts,
 * which the aliasing rules allow. */
MM_INT_KERNEL(mm_i32, uint32_t)
MM_INT_KERNEL(mm_i64, uint64_t)

static int mm_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        struct mm_shape s;
        int rc;

        rc = mm_shape_of(call, &s, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(&call->out[0]))
                return 0;
        switch (call->in[0].dtype) {
        case PROTO_DTYPE_FLOAT32:
                return mm_f32(&s, call->out[0].data, call->in[0].data, call->in[1].data, err,
                              errlen);
        case PROTO_DTYPE_FLOAT64:
                return mm_f64(&s, call->out[0].data, call->in[0].data, call->in[1].data, err,
                              errlen);
        case PROTO_DTYPE_FLOAT16:
        case PROTO_DTYPE_BFLOAT16:
                return mm_f16(&s, call, err, errlen);
        case PROTO_DTYPE_INT32:
        case PROTO_DTYPE_UINT32:
                return mm_i32(&s, call->out[0].data, call->in[0].data, call->in[1].data, err,
                              errlen);
        case PROTO_DTYPE_INT64:
        case PROTO_DTYPE_UINT64:
                return mm_i64(&s, call->out[0].data, call->in[0].data, call->in[1].data, err,
                              errlen);
        default:
                return ops_fail(err, errlen, -EINVAL, "MatMul: unsupported dtype");
        }
}

static void mm_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        uint64_t esize = proto_dtype_size(call->in[0].dtype), n = 0;
        struct mm_shape s;
        int i;

        *ret_flops = 0;
        if (call->in[0].ndim >= 1 && call->in[1].ndim >= 1 && !mm_shape_of(call, &s, NULL, 0))
                *ret_flops = ops_mul_sat(ops_mul_sat(ops_mul_sat(2 * (uint64_t)s.m,
                                                                 (uint64_t)s.n),
                                                     (uint64_t)s.k),
                                         (uint64_t)s.count);
        for (i = 0; i < 2; i++)
                n = ops_add_sat(n, (uint64_t)ops_tensor_numel(&call->in[i]));
        n = ops_add_sat(n, (uint64_t)ops_tensor_numel(&call->out[0]));
        *ret_bytes = ops_mul_sat(n, esize);
}

const struct ops_def ops_matmul_def = {
        .name = "MatMul", .min_inputs = 2, .max_inputs = 2, .outputs = 1, .engine = OPS_ENGINE_CUBE,
        .check = mm_check, .run = mm_run, .cost = mm_cost, .flags = OPS_FLAG_ROW_SPLIT,
        .infer = mm_infer, .since_version = 1,
};

/* ---------------------------------------------------------------- MatMulInteger, QLinearMatMul
 *
 * 8-bit operands minus their zero points are widened to double, where every sum of
 * products is exact (below 2^53 for any K that fits memory), and multiplied by the same
 * batched dgemm path as float64 MatMul. A zero point or scale is a scalar, or per row of A
 * ([M]) / per column of B ([N]). */

static const int mmq_types[] = { PROTO_DTYPE_UINT8, PROTO_DTYPE_INT8, 0 };

/* Input i, when present, is a scalar or a vector of n (per row / column) of dtype. */
static int mmq_param_ok(const struct ops_call *call, int i, int64_t n, int dtype)
{
        int64_t c;

        if (!nn_has_in(call, i))
                return 1;
        c = ops_tensor_numel(&call->in[i]);
        return (!dtype || call->in[i].dtype == dtype) && call->in[i].ndim <= 1 &&
               (c == 1 || c == n);
}

static double mmq_param(const struct ops_call *call, int i, int64_t idx, double def)
{
        if (!nn_has_in(call, i))
                return def;
        return nn_get(&call->in[i], ops_tensor_numel(&call->in[i]) == 1 ? 0 : idx);
}

/* The integer product of in[ai] - in[azi] and in[bi] - in[bzi] into y (count * m * n). */
static int mmq_core(const struct ops_call *call, const struct mm_shape *s, int ai, int azi,
                    int bi, int bzi, double *y, const char *op, char *err, size_t errlen)
{
        const struct ops_tensor *a = &call->in[ai], *b = &call->in[bi];
        int64_t na = ops_tensor_numel(a), nb = ops_tensor_numel(b), i;
        double *ad, *bd;
        char msg[200] = "";
        int rc;

        ad = ops_buf_alloc(ops_bytes((uint64_t)na, sizeof(double)), msg, sizeof(msg));
        bd = ad ? ops_buf_alloc(ops_bytes((uint64_t)nb, sizeof(double)), msg, sizeof(msg)) : NULL;
        if (!ad || !bd) {
                ops_buf_free(ad);
                return ops_fail(err, errlen, -ENOMEM, "%s: workspace: %s", op, msg);
        }
        /* A's row is (i / k) % m, B's column i % n. */
        for (i = 0; i < na; i++)
                ad[i] = nn_get(a, i) - mmq_param(call, azi, s->k ? i / s->k % s->m : 0, 0);
        for (i = 0; i < nb; i++)
                bd[i] = nn_get(b, i) - mmq_param(call, bzi, i % s->n, 0);
        rc = mm_f64(s, y, ad, bd, err, errlen);
        ops_buf_free(ad);
        ops_buf_free(bd);
        return rc;
}

static int mmq_shape(const char *op, const struct ops_call *call, int ai, int bi,
                     struct mm_shape *s, char *err, size_t errlen)
{
        if (call->in[ai].ndim < 1 || call->in[bi].ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "%s: scalar operand", op);
        if (mm_shape_ab(op, &call->in[ai], &call->in[bi], s, err, errlen))
                return -EINVAL;
        if (s->m > INT_MAX || s->n > INT_MAX || s->k > INT_MAX)
                return ops_fail(err, errlen, -EINVAL, "%s: matrix dimension above %d", op,
                                INT_MAX);
        return 0;
}

static int mmi_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct mm_shape s;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, mmq_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 1, mmq_types, err, errlen);
        if (!rc)
                rc = mmq_shape("MatMulInteger", call, 0, 1, &s, err, errlen);
        if (rc)
                return rc;
        if (!mmq_param_ok(call, 2, s.m, call->in[0].dtype) ||
            !mmq_param_ok(call, 3, s.n, call->in[1].dtype))
                return ops_fail(err, errlen, -EINVAL, "MatMulInteger: bad zero points");
        nn_set_out(call, 0, PROTO_DTYPE_INT32, s.out.ndim, s.out.dims);
        return 0;
}

static int mmi_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        int64_t n = ops_tensor_numel(&call->out[0]), i;
        int32_t *out = call->out[0].data;
        struct mm_shape s;
        double *y;
        int rc;

        if (mmq_shape("MatMulInteger", call, 0, 1, &s, err, errlen))
                return -EINVAL;
        if (!n)
                return 0;
        y = ops_buf_alloc(ops_bytes((uint64_t)n, sizeof(double)), err, errlen);
        if (!y)
                return -ENOMEM;
        rc = mmq_core(call, &s, 0, 2, 1, 3, y, "MatMulInteger", err, errlen);
        if (rc) {
                ops_buf_free(y);
                return rc;
        }
        /* wraps like the int32 accumulator the result stands for */
        for (i = 0; i < n; i++)
                out[i] = (int32_t)(uint32_t)(int64_t)y[i];
        ops_buf_free(y);
        return 0;
}

static void mmq_cost(const struct ops_call *call, int ai, int bi, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        struct mm_shape s;

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        if (!mmq_shape("", call, ai, bi, &s, NULL, 0))
                *ret_flops = ops_mul_sat(ops_mul_sat(ops_mul_sat(2 * (uint64_t)s.m,
                                                                 (uint64_t)s.n),
                                                     (uint64_t)s.k),
                                         (uint64_t)s.count);
}

static void mmi_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        mmq_cost(call, 0, 1, ret_flops, ret_bytes);
}

const struct ops_def ops_matmul_integer_def = {
        .name = "MatMulInteger", .min_inputs = 2, .max_inputs = 4, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = mmi_run, .cost = mmi_cost, .infer = mmi_infer,
        .since_version = 10,
};

/* QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
 * y_zero_point; y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zero_point). */
static int qlmm_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct mm_shape s;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, mmq_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 3, mmq_types, err, errlen);
        if (!rc)
                rc = mmq_shape("QLinearMatMul", call, 0, 3, &s, err, errlen);
        if (rc)
                return rc;
        if (!nn_is_float(call->in[1].dtype) || !nn_is_float(call->in[4].dtype) ||
            !nn_is_float(call->in[6].dtype) || !nn_is_int(call->in[7].dtype) ||
            !mmq_param_ok(call, 1, s.m, 0) || !mmq_param_ok(call, 2, s.m, call->in[0].dtype) ||
            !mmq_param_ok(call, 4, s.n, 0) || !mmq_param_ok(call, 5, s.n, call->in[3].dtype) ||
            !mmq_param_ok(call, 6, 1, 0) || !mmq_param_ok(call, 7, 1, 0))
                return ops_fail(err, errlen, -EINVAL, "QLinearMatMul: bad scales or zero points");
        nn_set_out(call, 0, call->in[7].dtype, s.out.ndim, s.out.dims);
        return 0;
}

static int qlmm_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        int64_t n = ops_tensor_numel(&call->out[0]), i;
        double *y, ys, yz;
        struct mm_shape s;
        int rc;

        if (mmq_shape("QLinearMatMul", call, 0, 3, &s, err, errlen))
                return -EINVAL;
        if (!n)
                return 0;
        y = ops_buf_alloc(ops_bytes((uint64_t)n, sizeof(double)), err, errlen);
        if (!y)
                return -ENOMEM;
        rc = mmq_core(call, &s, 0, 2, 3, 5, y, "QLinearMatMul", err, errlen);
        if (rc) {
                ops_buf_free(y);
                return rc;
        }
        ys = mmq_param(call, 6, 0, 1);
        yz = mmq_param(call, 7, 0, 0);
        for (i = 0; i < n; i++) {
                int64_t row = i / s.n % s.m, col = i % s.n;
                /* the scale product in float, as the reference and ONNX Runtime form it */
                float mul = (float)(mmq_param(call, 1, row, 1) * mmq_param(call, 4, col, 1) / ys);

                nn_put(&call->out[0], i, nearbyintf((float)y[i] * mul) + yz);
        }
        ops_buf_free(y);
        return 0;
}

static void qlmm_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        mmq_cost(call, 0, 3, ret_flops, ret_bytes);
}

const struct ops_def ops_qlinear_matmul_def = {
        .name = "QLinearMatMul", .min_inputs = 8, .max_inputs = 8, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = qlmm_run, .cost = qlmm_cost, .infer = qlmm_infer,
        .since_version = 10,
};

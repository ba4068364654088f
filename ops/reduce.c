/* The ONNX Reduce* operators (Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp,
 * SumSquare) and ArgMax / ArgMin, on the vector unit.
 *
 * Reductions: axes come from an attribute before the opset that moved them to an optional
 * input (13 for ReduceSum, 18 for the others); negative axes count from the end; no axes
 * reduce everything unless noop_with_empty_axes asks for none. The input is walked once in
 * memory order, in runs along its innermost dim after unit dims are dropped and neighbouring
 * dims of the same kind (reduced or kept) merged, so each run either folds into one
 * accumulator or into a row of them. Floating types accumulate in double; integer Sum,
 * Prod, SumSquare, L1, Mean, Max and Min accumulate exactly in 64 bits (wrapping like the
 * narrow type would, then narrowed); L2, LogSum and LogSumExp compute in double for any
 * dtype. LogSumExp subtracts the maximum first so large inputs do not overflow.
 *
 * ArgMax / ArgMin: one axis (default 0), keepdims, select_last_index; NaN wins, as in
 * numpy. int64 output. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape-common.h"

enum red_kind {
        RED_SUM,
        RED_MEAN,
        RED_MAX,
        RED_MIN,
        RED_PROD,
        RED_L1,
        RED_L2,
        RED_LOG_SUM,
        RED_LOG_SUM_EXP,
        RED_SUM_SQUARE,
};

static const char *const red_attrs[] = { "axes", "keepdims", "noop_with_empty_axes", NULL };

/* The input walked as merged dims: ext[d] elements, reduced or kept, and for kept dims the
 * accumulator stride. */
struct red_plan {
        int n;
        int64_t ext[OPS_MAX_DIMS];
        int red[OPS_MAX_DIMS];
        int64_t ostride[OPS_MAX_DIMS];
        int64_t count; /* input elements folded into each output */
        int64_t nout;
};

/* The reduced axes as a mask; keepdims and the output dims into call->out[0]. */
static int red_shape(const struct ops_def *def, int axes_input, struct ops_call *call,
                     uint32_t *ret_mask, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axes[OPS_MAX_DIMS], keep, noop = 0, dims[OPS_MAX_DIMS];
        uint32_t mask;
        int n = 0, d, k = 0, rc;

        rc = shp_attr_int(def, call, "keepdims", 1, &keep, err, errlen);
        if (!rc && axes_input)
                rc = shp_attr_int(def, call, "noop_with_empty_axes", 0, &noop, err, errlen);
        if (rc)
                return rc;
        if (axes_input) {
                if (ops_attr_find(call, "axes"))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: axes are an input from opset %d, not an attribute",
                                        def->name, def->since_version);
                if (shp_has_in(call, 1)) {
                        rc = shp_input_ints(def, call, 1, "axes", axes, OPS_MAX_DIMS, &n, err,
                                            errlen);
                        if (rc)
                                return rc;
                }
        } else {
                rc = shp_attr_ints(def, call, "axes", axes, OPS_MAX_DIMS, &n, err, errlen);
                if (rc)
                        return rc;
                if (n < 0)
                        n = 0;
        }
        rc = shp_axes_mask(def, axes, n, x->ndim, &mask, err, errlen);
        if (rc)
                return rc;
        if (n == 0)
                mask = noop ? 0 : (uint32_t)((1u << x->ndim) - 1);
        for (d = 0; d < x->ndim; d++) {
                if (!(mask & (1u << d)))
                        dims[k++] = x->dims[d];
                else if (keep)
                        dims[k++] = 1;
        }
        shp_set_out(call, 0, x->dtype, k, dims);
        *ret_mask = mask;
        return 0;
}

static int red_infer(const struct ops_def *def, enum red_kind kind, int axes_input,
                     struct ops_call *call, char *err, size_t errlen)
{
        uint32_t types = SHP_NUMERIC, mask;
        int rc;

        if (kind == RED_MAX || kind == RED_MIN)
                types |= SHP_T(PROTO_DTYPE_BOOL);
        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, types, err, errlen);
        if (rc)
                return rc;
        return red_shape(def, axes_input, call, &mask, err, errlen);
}

static void red_plan_init(const struct ops_tensor *x, uint32_t mask, struct red_plan *p)
{
        int64_t s = 1;
        int d, r;

        p->n = 0;
        p->count = 1;
        p->nout = 1;
        for (d = 0; d < x->ndim; d++) {
                r = (mask >> d) & 1;
                if (r)
                        p->count *= x->dims[d];
                else
                        p->nout *= x->dims[d];
                if (x->dims[d] == 1)
                        continue;
                if (p->n && p->red[p->n - 1] == r) {
                        p->ext[p->n - 1] *= x->dims[d];
                        continue;
                }
                p->ext[p->n] = x->dims[d];
                p->red[p->n] = r;
                p->n++;
        }
        for (d = p->n - 1; d >= 0; d--) {
                p->ostride[d] = p->red[d] ? 0 : s;
                if (!p->red[d])
                        s *= p->ext[d];
        }
}

/* Calls fold(ctx, input offset, run length, accumulator base, run reduced?) for every run of
 * the input in memory order. */
typedef void (*red_fold_fn)(void *ctx, int64_t off, int64_t len, int64_t obase, int reduced);

static void red_walk(const struct red_plan *p, red_fold_fn fold, void *ctx)
{
        int64_t idx[OPS_MAX_DIMS] = { 0 }, obase = 0, off = 0, len, since = 0;
        int d, last;

        if (p->n == 0) {
                fold(ctx, 0, 1, 0, 1);
                return;
        }
        last = p->n - 1;
        len = p->ext[last];
        for (;;) {
                fold(ctx, off, len, obase, p->red[last]);
                off += len;
                /* A check of the run context every OPS_POLL_ELEMS elements; a stop leaves the
                 * stop code recorded, which fails the node once the kernel returns. */
                since += len;
                if (since >= OPS_POLL_ELEMS) {
                        since = 0;
                        if (ops_runctx_check(NULL, 0))
                                return;
                }
                for (d = last - 1; d >= 0; d--) {
                        obase += p->ostride[d];
                        if (++idx[d] < p->ext[d])
                                break;
                        obase -= p->ostride[d] * p->ext[d];
                        idx[d] = 0;
                }
                if (d < 0)
                        return;
        }
}

/* ---------------------------------------------------------------- double accumulation */

struct red_fctx {
        int dtype;
        const void *x;
        enum red_kind kind;
        double *acc;
        const double *shift; /* LogSumExp: the per-output maximum */
        double buf[OPS_CHUNK];
};

/* Applies UPDATE(accumulator, value, shift) over the chunk: into one local accumulator for
 * a reduced run (no store per element), or element by element for a kept run. */
#define RED_FOLD(UPDATE)                                                                       \
        do {                                                                                   \
                if (reduced) {                                                                 \
                        __typeof__(acc[0]) a = acc[0];                                         \
                                                                                               \
                        for (i = 0; i < m; i++)                                                \
                                UPDATE(a, b[i], sh[0]);                                        \
                        acc[0] = a;                                                            \
                } else {                                                                       \
                        for (i = 0; i < m; i++)                                                \
                                UPDATE(acc[i], b[i], sh[i]);                                   \
                }                                                                              \
        } while (0)

#define RED_ADD(a, v, s) ((a) += (v))
#define RED_SQ(a, v, s) ((a) += (v) * (v))
#define RED_ABS(a, v, s) ((a) += fabs(v))
#define RED_MUL(a, v, s) ((a) *= (v))
#define RED_GT(a, v, s) ((a) = (v) > (a) || isnan(v) ? (v) : (a))
#define RED_LT(a, v, s) ((a) = (v) < (a) || isnan(v) ? (v) : (a))
#define RED_EXP(a, v, s) ((a) += exp((v) - (s)))

static void red_fold_f64(void *vctx, int64_t off, int64_t len, int64_t obase, int reduced)
{
        struct red_fctx *c = vctx;
        int64_t done, m, i;

        for (done = 0; done < len; done += m) {
                double *restrict acc = c->acc + obase + (reduced ? 0 : done);
                const double *restrict b = c->buf;
                const double *sh = c->shift ? c->shift + obase + (reduced ? 0 : done) : NULL;

                m = len - done < OPS_CHUNK ? len - done : OPS_CHUNK;
                shp_load_f64(c->dtype, c->x, off + done, m, c->buf);
                switch (c->kind) {
                case RED_SUM:
                case RED_MEAN:
                case RED_LOG_SUM: RED_FOLD(RED_ADD); break;
                case RED_SUM_SQUARE:
                case RED_L2: RED_FOLD(RED_SQ); break;
                case RED_L1: RED_FOLD(RED_ABS); break;
                case RED_PROD: RED_FOLD(RED_MUL); break;
                case RED_MAX: RED_FOLD(RED_GT); break;
                case RED_MIN: RED_FOLD(RED_LT); break;
                case RED_LOG_SUM_EXP: RED_FOLD(RED_EXP); break;
                }
        }
}

static int red_run_f64(const char *name, const struct red_plan *p, enum red_kind kind,
                       const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct red_fctx *c = malloc(sizeof(*c));
        double *acc = ops_buf_alloc(ops_bytes((uint64_t)p->nout, sizeof(double)), NULL, 0);
        double *mx = NULL, init;
        int64_t i;

        if (kind == RED_LOG_SUM_EXP)
                mx = ops_buf_alloc(ops_bytes((uint64_t)p->nout, sizeof(double)), NULL, 0);
        if (!c || !acc || (kind == RED_LOG_SUM_EXP && !mx)) {
                free(c);
                ops_buf_free(acc);
                ops_buf_free(mx);
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", name);
        }
        c->dtype = x->dtype;
        c->x = x->data;
        c->shift = NULL;
        /* An empty input folds nothing: every output is the operation's identity. */
        if (kind == RED_LOG_SUM_EXP) {
                for (i = 0; i < p->nout; i++)
                        mx[i] = -INFINITY;
                c->kind = RED_MAX;
                c->acc = mx;
                if (p->count)
                        red_walk(p, red_fold_f64, c);
                /* An infinite maximum (or NaN) cannot be subtracted: no shift then. */
                for (i = 0; i < p->nout; i++)
                        if (!isfinite(mx[i]))
                                mx[i] = 0;
                c->shift = mx;
        }
        init = kind == RED_PROD ? 1 : kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0;
        for (i = 0; i < p->nout; i++)
                acc[i] = init;
        c->kind = kind;
        c->acc = acc;
        if (p->count)
                red_walk(p, red_fold_f64, c);
        for (i = 0; i < p->nout; i++) {
                switch (kind) {
                case RED_MEAN: acc[i] /= (double)p->count; break;
                case RED_L2: acc[i] = sqrt(acc[i]); break;
                case RED_LOG_SUM: acc[i] = log(acc[i]); break;
                case RED_LOG_SUM_EXP: acc[i] = log(acc[i]) + mx[i]; break;
                default: break;
                }
        }
        shp_store_f64(call->out[0].dtype, call->out[0].data, 0, p->nout, acc);
        free(c);
        ops_buf_free(acc);
        ops_buf_free(mx);
        return 0;
}

/* ---------------------------------------------------------------- 64-bit integer accumulation */

struct red_ictx {
        int dtype, is_signed;
        const void *x;
        enum red_kind kind;
        uint64_t *acc; /* signed values as their two's complement bits */
        int64_t buf[OPS_CHUNK];
};

#define RED_IADD(a, v, s) ((a) += (uint64_t)(v))
#define RED_ISQ(a, v, s) ((a) += (uint64_t)(v) * (uint64_t)(v))
/* The integer updates read sg: whether the dtype is signed. */
#define RED_IABS(a, v, s) ((a) += sg && (v) < 0 ? 0 - (uint64_t)(v) : (uint64_t)(v))
#define RED_IMUL(a, v, s) ((a) *= (uint64_t)(v))
#define RED_IGT(a, v, s)                                                                       \
        ((a) = (sg ? (v) > (int64_t)(a) : (uint64_t)(v) > (a)) ? (uint64_t)(v) : (a))
#define RED_ILT(a, v, s)                                                                       \
        ((a) = (sg ? (v) < (int64_t)(a) : (uint64_t)(v) < (a)) ? (uint64_t)(v) : (a))

static void red_fold_i64(void *vctx, int64_t off, int64_t len, int64_t obase, int reduced)
{
        struct red_ictx *c = vctx;
        int64_t done, m, i;
        const int sg = c->is_signed;

        for (done = 0; done < len; done += m) {
                uint64_t *restrict acc = c->acc + obase + (reduced ? 0 : done);
                const int64_t *restrict b = c->buf;

                m = len - done < OPS_CHUNK ? len - done : OPS_CHUNK;
                shp_load_i64(c->dtype, c->x, off + done, m, c->buf);
                switch (c->kind) {
                case RED_SUM:
                case RED_MEAN: RED_FOLD(RED_IADD); break;
                case RED_SUM_SQUARE: RED_FOLD(RED_ISQ); break;
                case RED_L1: RED_FOLD(RED_IABS); break;
                case RED_PROD: RED_FOLD(RED_IMUL); break;
                case RED_MAX: RED_FOLD(RED_IGT); break;
                case RED_MIN: RED_FOLD(RED_ILT); break;
                default: break;
                }
        }
}

static int red_run_i64(const char *name, const struct red_plan *p, enum red_kind kind,
                       const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct red_ictx *c = malloc(sizeof(*c));
        uint64_t *acc = ops_buf_alloc(ops_bytes((uint64_t)p->nout, sizeof(uint64_t)), NULL, 0), init;
        int64_t i;

        if (!c || !acc) {
                free(c);
                ops_buf_free(acc);
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", name);
        }
        c->dtype = x->dtype;
        c->is_signed = shp_num_class(x->dtype) == SHP_NUM_SIGNED;
        c->x = x->data;
        c->kind = kind;
        c->acc = acc;
        switch (kind) {
        case RED_PROD: init = 1; break;
        case RED_MAX: init = c->is_signed ? (uint64_t)INT64_MIN : 0; break;
        case RED_MIN: init = c->is_signed ? (uint64_t)INT64_MAX : UINT64_MAX; break;
        default: init = 0; break;
        }
        for (i = 0; i < p->nout; i++)
                acc[i] = init;
        if (p->count)
                red_walk(p, red_fold_i64, c);
        if (kind == RED_MEAN) {
                /* Truncating division, like numpy's mean cast back to the integer type. */
                for (i = 0; i < p->nout; i++) {
                        if (!p->count)
                                acc[i] = 0;
                        else if (c->is_signed)
                                acc[i] = (uint64_t)((int64_t)acc[i] / p->count);
                        else
                                acc[i] /= (uint64_t)p->count;
                }
        }
        shp_store_i64(call->out[0].dtype, call->out[0].data, 0, p->nout, (const int64_t *)acc);
        free(c);
        ops_buf_free(acc);
        return 0;
}

static int red_run(const struct ops_def *def, enum red_kind kind, int axes_input,
                   const struct ops_call *call, char *err, size_t errlen)
{
        struct ops_call probe = *call;
        struct red_plan p;
        uint32_t mask;
        int rc, cls = shp_num_class(call->in[0].dtype);

        rc = red_shape(def, axes_input, &probe, &mask, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(&call->out[0]))
                return 0;
        red_plan_init(&call->in[0], mask, &p);
        if (cls == SHP_NUM_FLOAT || kind == RED_L2 || kind == RED_LOG_SUM ||
            kind == RED_LOG_SUM_EXP)
                return red_run_f64(def->name, &p, kind, call, err, errlen);
        return red_run_i64(def->name, &p, kind, call, err, errlen);
}

static void red_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        shp_cost(call, 2, ret_flops, ret_bytes);
}

/* One definition per (operator, axes as input or attribute). */
#define RED_DEFS(var, opname, kind, since)                                                       \
        static int var##_infer(const struct ops_def *def, struct ops_call *call, char *err,    \
                               size_t errlen)                                                  \
        {                                                                                      \
                return red_infer(def, kind, 1, call, err, errlen);                             \
        }                                                                                      \
        static int var##_run(const struct ops_def *def, const struct ops_call *call, char *err,\
                             size_t errlen)                                                    \
        {                                                                                      \
                return red_run(def, kind, 1, call, err, errlen);                               \
        }                                                                                      \
        static int var##1_infer(const struct ops_def *def, struct ops_call *call, char *err,   \
                                size_t errlen)                                                 \
        {                                                                                      \
                return red_infer(def, kind, 0, call, err, errlen);                             \
        }                                                                                      \
        static int var##1_run(const struct ops_def *def, const struct ops_call *call, char *err,\
                              size_t errlen)                                                   \
        {                                                                                      \
                return red_run(def, kind, 0, call, err, errlen);                               \
        }                                                                                      \
        const struct ops_def var##_def = {                                                     \
                .name = opname, .min_inputs = 1, .max_inputs = 2, .outputs = 1,                  \
                .engine = OPS_ENGINE_VECTOR, .run = var##_run, .cost = red_cost,               \
                .infer = var##_infer, .since_version = since, .attrs = red_attrs,              \
        };                                                                                     \
        const struct ops_def var##1_def = {                                                    \
                .name = opname, .min_inputs = 1, .max_inputs = 1, .outputs = 1,                  \
                .engine = OPS_ENGINE_VECTOR, .run = var##1_run, .cost = red_cost,              \
                .infer = var##1_infer, .since_version = 1, .attrs = red_attrs,                 \
        };

RED_DEFS(ops_reduce_sum, "ReduceSum", RED_SUM, 13)
RED_DEFS(ops_reduce_mean, "ReduceMean", RED_MEAN, 18)
RED_DEFS(ops_reduce_max, "ReduceMax", RED_MAX, 18)
RED_DEFS(ops_reduce_min, "ReduceMin", RED_MIN, 18)
RED_DEFS(ops_reduce_prod, "ReduceProd", RED_PROD, 18)
RED_DEFS(ops_reduce_l1, "ReduceL1", RED_L1, 18)
RED_DEFS(ops_reduce_l2, "ReduceL2", RED_L2, 18)
RED_DEFS(ops_reduce_log_sum, "ReduceLogSum", RED_LOG_SUM, 18)
RED_DEFS(ops_reduce_log_sum_exp, "ReduceLogSumExp", RED_LOG_SUM_EXP, 18)
RED_DEFS(ops_reduce_sum_square, "ReduceSumSquare", RED_SUM_SQUARE, 18)

/* ---------------------------------------------------------------- ArgMax, ArgMin */

static const char *const arg_attrs[] = { "axis", "keepdims", "select_last_index", NULL };

static int arg_infer(const struct ops_def *def, struct ops_call *call, char *err,
                     size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis, keep, last, dims[OPS_MAX_DIMS];
        int ax, d, k = 0, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_NUMERIC | SHP_T(PROTO_DTYPE_BOOL), err,
                                    errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "axis", 0, &axis, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "keepdims", 1, &keep, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "select_last_index", 0, &last, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, x->ndim, &ax, err, errlen);
        if (rc)
                return rc;
        if (x->dims[ax] == 0)
                return ops_fail(err, errlen, -EINVAL, "%s: axis %d is empty", def->name, ax);
        for (d = 0; d < x->ndim; d++) {
                if (d != ax)
                        dims[k++] = x->dims[d];
                else if (keep)
                        dims[k++] = 1;
        }
        shp_set_out(call, 0, PROTO_DTYPE_INT64, k, dims);
        return 0;
}

/* Does candidate v beat the best so far? NaN beats everything and, once best, stays. */
static int arg_better_f(double v, double best, int is_max, int last)
{
        if (isnan(best))
                return last && isnan(v);
        if (isnan(v))
                return 1;
        if (v == best)
                return last;
        return is_max ? v > best : v < best;
}

static int arg_better_i(int64_t v, int64_t best, int is_signed, int is_max, int last)
{
        if (v == best)
                return last;
        if (is_signed)
                return is_max ? v > best : v < best;
        return is_max ? (uint64_t)v > (uint64_t)best : (uint64_t)v < (uint64_t)best;
}

/* Contiguous lines (inner 1): each scanned a chunk at a time. buf holds OPS_CHUNK values. */
static void arg_lines(const struct ops_tensor *x, int64_t *out, int64_t outer, int64_t n,
                      int is_max, int last, void *buf)
{
        int is_float = shp_num_class(x->dtype) == SHP_NUM_FLOAT;
        int is_signed = shp_num_class(x->dtype) == SHP_NUM_SIGNED;
        double *f = buf, fb = 0;
        int64_t *v = buf, ib = 0, o, r0, m, j, at;

        for (o = 0; o < outer; o++) {
                at = 0;
                for (r0 = 0; r0 < n; r0 += m) {
                        m = n - r0 < OPS_CHUNK ? n - r0 : OPS_CHUNK;
                        if (is_float) {
                                shp_load_f64(x->dtype, x->data, o * n + r0, m, f);
                                if (!r0)
                                        fb = f[0];
                                for (j = !r0; j < m; j++)
                                        if (arg_better_f(f[j], fb, is_max, last)) {
                                                fb = f[j];
                                                at = r0 + j;
                                        }
                        } else {
                                shp_load_i64(x->dtype, x->data, o * n + r0, m, v);
                                if (!r0)
                                        ib = v[0];
                                for (j = !r0; j < m; j++)
                                        if (arg_better_i(v[j], ib, is_signed, is_max, last)) {
                                                ib = v[j];
                                                at = r0 + j;
                                        }
                        }
                }
                out[o] = at;
        }
}

static int arg_run(const struct ops_def *def, const struct ops_call *call, int is_max, char *err,
                   size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t outer, n, inner, o, r, j0, j, m, *idx;
        int is_float = shp_num_class(x->dtype) == SHP_NUM_FLOAT;
        int is_signed = shp_num_class(x->dtype) == SHP_NUM_SIGNED;
        int last = ops_attr_int(call, "select_last_index", 0) != 0, ax;
        int64_t axis = ops_attr_int(call, "axis", 0);
        union {
                double f[OPS_CHUNK];
                int64_t i[OPS_CHUNK];
        } *best, *row;

        ax = (int)(axis < 0 ? axis + x->ndim : axis);
        shp_split3(x, ax, &outer, &n, &inner);
        if (!outer || !inner)
                return 0;
        best = malloc(2 * sizeof(*best));
        idx = malloc(OPS_CHUNK * sizeof(*idx));
        if (!best || !idx) {
                free(best);
                free(idx);
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        }
        row = best + 1;
        if (inner == 1) {
                arg_lines(x, call->out[0].data, outer, n, is_max, last, row);
                free(best);
                free(idx);
                return 0;
        }
        /* Rows of up to OPS_CHUNK inner elements at a time: every row read is sequential. */
        for (o = 0; o < outer; o++) {
                for (j0 = 0; j0 < inner; j0 += m) {
                        int64_t base = o * n * inner + j0;

                        m = inner - j0 < OPS_CHUNK ? inner - j0 : OPS_CHUNK;
                        for (j = 0; j < m; j++)
                                idx[j] = 0;
                        if (is_float)
                                shp_load_f64(x->dtype, x->data, base, m, best->f);
                        else
                                shp_load_i64(x->dtype, x->data, base, m, best->i);
                        for (r = 1; r < n; r++) {
                                if (is_float) {
                                        shp_load_f64(x->dtype, x->data, base + r * inner, m,
                                                     row->f);
                                        for (j = 0; j < m; j++)
                                                if (arg_better_f(row->f[j], best->f[j], is_max,
                                                                 last)) {
                                                        best->f[j] = row->f[j];
                                                        idx[j] = r;
                                                }
                                } else {
                                        shp_load_i64(x->dtype, x->data, base + r * inner, m,
                                                     row->i);
                                        for (j = 0; j < m; j++)
                                                if (arg_better_i(row->i[j], best->i[j],
                                                                 is_signed, is_max, last)) {
                                                        best->i[j] = row->i[j];
                                                        idx[j] = r;
                                                }
                                }
                        }
                        memcpy((int64_t *)call->out[0].data + o * inner + j0, idx,
                               (size_t)m * sizeof(*idx));
                }
        }
        free(best);
        free(idx);
        return 0;
}

static int argmax_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        return arg_run(def, call, 1, err, errlen);
}

static int argmin_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        return arg_run(def, call, 0, err, errlen);
}

static void arg_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        shp_cost(call, 1, ret_flops, ret_bytes);
}

const struct ops_def ops_argmax_def = {
        .name = "ArgMax", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = argmax_run, .cost = arg_cost, .infer = arg_infer,
        .since_version = 1, .attrs = arg_attrs,
};

const struct ops_def ops_argmin_def = {
        .name = "ArgMin", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = argmin_run, .cost = arg_cost, .infer = arg_infer,
        .since_version = 1, .attrs = arg_attrs,
};

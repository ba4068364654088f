/* Indexing operators on the AI CPU: Gather, GatherElements, GatherND (batch_dims),
 * ScatterElements (and the older Scatter) and ScatterND with their reductions (none, add,
 * mul, max, min), OneHot, NonZero, Compress and Unique.
 *
 * Gathers and plain scatters move element bytes, so every dtype works; index values are
 * checked against their axis when the kernel runs (negative ones count from the end) and an
 * out-of-range index fails the call with its value. Scatter reductions load both sides as
 * double or 64-bit integers. NonZero, Compress and Unique have output shapes that depend on
 * the data, inferred where the data is readable. Unique sorts slice indices by slice
 * contents (ties by index, so the first occurrence leads every group) and reports the
 * unique slices sorted or in order of first occurrence, with first indices, inverse
 * indices and counts. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape-common.h"

static size_t esize(const struct ops_tensor *t)
{
        return proto_dtype_size(t->dtype);
}

static void index_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                       uint64_t *ret_bytes)
{
        shp_cost(call, 1, ret_flops, ret_bytes);
}

/* Index value v on an axis of extent n, made non-negative; -1 when out of range. */
static int64_t idx_norm(int64_t v, int64_t n)
{
        if (v < -n || v >= n)
                return -1;
        return v < 0 ? v + n : v;
}

static int idx_fail(const char *op, int64_t v, int64_t n, char *err, size_t errlen)
{
        return ops_fail(err, errlen, -EINVAL, "%s: index %lld out of range [%lld, %lld]", op,
                        (long long)v, (long long)-n, (long long)(n - 1));
}

/* ---------------------------------------------------------------- Gather */

static const char *const gather_attrs[] = { "axis", NULL };

static int gather_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1];
        int64_t axis, dims[OPS_MAX_DIMS];
        int ax, d, k = 0, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "axis", 0, &axis, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, x->ndim, &ax, err, errlen);
        if (rc)
                return rc;
        if (x->ndim - 1 + ix->ndim > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "Gather: result of rank %d, at most %d",
                                x->ndim - 1 + ix->ndim, OPS_MAX_DIMS);
        for (d = 0; d < ax; d++)
                dims[k++] = x->dims[d];
        for (d = 0; d < ix->ndim; d++)
                dims[k++] = ix->dims[d];
        for (d = ax + 1; d < x->ndim; d++)
                dims[k++] = x->dims[d];
        shp_set_out(call, 0, x->dtype, k, dims);
        return 0;
}

/* The indices of input i as int64, each checked against extent n and made non-negative. */
static int64_t *idx_load(const char *op, const struct ops_tensor *t, int64_t n, char *err,
                         size_t errlen, int *rc)
{
        int64_t m = ops_tensor_numel(t), i, *v;

        v = ops_buf_alloc((size_t)(m ? m : 1) * sizeof(*v), NULL, 0);
        if (!v) {
                *rc = ops_fail(err, errlen, -ENOMEM, "%s: out of memory", op);
                return NULL;
        }
        shp_load_i64(t->dtype, t->data, 0, m, v);
        for (i = 0; i < m; i++) {
                int64_t j = idx_norm(v[i], n);

                if (j < 0) {
                        *rc = idx_fail(op, v[i], n, err, errlen);
                        ops_buf_free(v);
                        return NULL;
                }
                v[i] = j;
        }
        *rc = 0;
        return v;
}

static int gather_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1], *y = &call->out[0];
        int64_t axis = ops_attr_int(call, "axis", 0), outer, n, inner, m, o, k, *idx;
        size_t es = esize(x);
        int rc;

        shp_split3(x, (int)(axis < 0 ? axis + x->ndim : axis), &outer, &n, &inner);
        m = ops_tensor_numel(ix);
        idx = idx_load("Gather", ix, n, err, errlen, &rc);
        if (!idx)
                return rc;
        if (ops_tensor_numel(y) && inner == 1 && (es == 4 || es == 8)) {
                /* Single elements (a gather from the last axis): no memcpy per element. */
                for (o = 0; o < outer; o++)
                        for (k = 0; k < m; k++) {
                                if (es == 4)
                                        ((uint32_t *)y->data)[o * m + k] =
                                                ((const uint32_t *)x->data)[o * n + idx[k]];
                                else
                                        ((uint64_t *)y->data)[o * m + k] =
                                                ((const uint64_t *)x->data)[o * n + idx[k]];
                        }
        } else if (ops_tensor_numel(y)) {
                size_t row = (size_t)inner * es;

                for (o = 0; o < outer; o++)
                        for (k = 0; k < m; k++)
                                memcpy((char *)y->data + (o * m + k) * (int64_t)row,
                                       (const char *)x->data + (o * n + idx[k]) * (int64_t)row,
                                       row);
        }
        ops_buf_free(idx);
        return 0;
}

const struct ops_def ops_gather_def = {
        .name = "Gather", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gather_run, .cost = index_cost, .infer = gather_infer,
        .since_version = 1, .attrs = gather_attrs,
};

/* ---------------------------------------------------------------- GatherElements */

static int ge_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1];
        int64_t axis;
        int ax, d, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "axis", 0, &axis, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, x->ndim, &ax, err, errlen);
        if (rc)
                return rc;
        if (ix->ndim != x->ndim)
                return ops_fail(err, errlen, -EINVAL,
                                "GatherElements: indices of rank %d for data of rank %d",
                                ix->ndim, x->ndim);
        for (d = 0; d < x->ndim; d++)
                if (d != ax && ix->dims[d] > x->dims[d])
                        return ops_fail(err, errlen, -EINVAL,
                                        "GatherElements: indices extent %lld exceeds the data's "
                                        "%lld on axis %d",
                                        (long long)ix->dims[d], (long long)x->dims[d], d);
        shp_set_out(call, 0, x->dtype, ix->ndim, ix->dims);
        return 0;
}

/* Walks the index tensor t (same rank as data x) in order; for element k calls
 * visit(ctx, k, base) with base the data offset of its position with the axis coordinate
 * left out. */
typedef int (*elem_visit_fn)(void *ctx, int64_t k, int64_t base);

static int elem_walk(const struct ops_tensor *x, const struct ops_tensor *t, int ax,
                     elem_visit_fn visit, void *ctx)
{
        int64_t xs[OPS_MAX_DIMS], idx[OPS_MAX_DIMS] = { 0 }, base = 0, k, n = ops_tensor_numel(t);
        int d, rc;

        shp_strides(x->ndim, x->dims, xs);
        xs[ax] = 0;
        for (k = 0; k < n; k++) {
                rc = visit(ctx, k, base);
                if (rc)
                        return rc;
                for (d = t->ndim - 1; d >= 0; d--) {
                        base += xs[d];
                        if (++idx[d] < t->dims[d])
                                break;
                        base -= xs[d] * t->dims[d];
                        idx[d] = 0;
                }
        }
        return 0;
}

struct ge_ctx {
        const struct ops_call *call;
        const char *op;
        int64_t n, stride; /* the axis: extent, data stride */
        size_t es;
        int red;
        char *err;
        size_t errlen;
};

static int ge_visit(void *vctx, int64_t k, int64_t base)
{
        struct ge_ctx *c = vctx;
        const struct ops_tensor *ix = &c->call->in[1];
        int64_t v = shp_get_i64(ix, k), j = idx_norm(v, c->n);

        if (j < 0)
                return idx_fail(c->op, v, c->n, c->err, c->errlen);
        memcpy((char *)c->call->out[0].data + k * (int64_t)c->es,
               (const char *)c->call->in[0].data + (base + j * c->stride) * (int64_t)c->es, c->es);
        return 0;
}

static int ge_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis = ops_attr_int(call, "axis", 0), xs[OPS_MAX_DIMS];
        int ax = (int)(axis < 0 ? axis + x->ndim : axis);
        struct ge_ctx c = { call, "GatherElements", x->dims[ax], 0, esize(x), 0, err, errlen };

        shp_strides(x->ndim, x->dims, xs);
        c.stride = xs[ax];
        return elem_walk(x, &call->in[1], ax, ge_visit, &c);
}

const struct ops_def ops_gather_elements_def = {
        .name = "GatherElements", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = ge_run, .cost = index_cost, .infer = ge_infer,
        .since_version = 11, .attrs = gather_attrs,
};

/* ---------------------------------------------------------------- GatherND */

static const char *const gnd_attrs[] = { "batch_dims", NULL };

static int gnd_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1];
        int64_t b, last, dims[OPS_MAX_DIMS];
        int r = x->ndim, q = ix->ndim, d, k = 0, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "batch_dims", 0, &b, err, errlen);
        if (rc)
                return rc;
        if (r < 1 || q < 1)
                return ops_fail(err, errlen, -EINVAL, "GatherND: data and indices need rank 1 "
                                                      "or more");
        if (b < 0 || b >= (r < q ? r : q))
                return ops_fail(err, errlen, -EINVAL, "GatherND: batch_dims %lld out of range",
                                (long long)b);
        for (d = 0; d < b; d++)
                if (x->dims[d] != ix->dims[d])
                        return ops_fail(err, errlen, -EINVAL,
                                        "GatherND: batch dim %d differs (%lld vs %lld)", d,
                                        (long long)x->dims[d], (long long)ix->dims[d]);
        last = ix->dims[q - 1];
        if (last < 1 || last > r - b)
                return ops_fail(err, errlen, -EINVAL,
                                "GatherND: index tuples of %lld entries for %lld dims",
                                (long long)last, (long long)(r - b));
        if (q - 1 + r - b - last > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "GatherND: result rank too large");
        for (d = 0; d < q - 1; d++)
                dims[k++] = ix->dims[d];
        for (d = (int)(b + last); d < r; d++)
                dims[k++] = x->dims[d];
        shp_set_out(call, 0, x->dtype, k, dims);
        return 0;
}

static int gnd_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1], *y = &call->out[0];
        int64_t b = ops_attr_int(call, "batch_dims", 0), last = ix->dims[ix->ndim - 1];
        int64_t xs[OPS_MAX_DIMS], nb = 1, g = 1, slice = 1, bi, gi, j, off, v, w, tup[OPS_MAX_DIMS];
        size_t es = esize(x);
        int d;

        shp_strides(x->ndim, x->dims, xs);
        for (d = 0; d < b; d++)
                nb *= x->dims[d];
        for (d = (int)b; d < ix->ndim - 1; d++)
                g *= ix->dims[d];
        for (d = (int)(b + last); d < x->ndim; d++)
                slice *= x->dims[d];
        if (!ops_tensor_numel(y))
                return 0;
        /* Batch bi covers data [bi * xs[b - 1]...] (the whole tensor without batch dims). */
        for (bi = 0; bi < nb; bi++) {
                int64_t xbase = b ? bi * xs[b - 1] : 0;

                for (gi = 0; gi < g; gi++) {
                        shp_load_i64(ix->dtype, ix->data, (bi * g + gi) * last, last, tup);
                        off = xbase;
                        for (j = 0; j < last; j++) {
                                w = x->dims[b + j];
                                v = idx_norm(tup[j], w);
                                if (v < 0)
                                        return idx_fail("GatherND", tup[j], w, err, errlen);
                                off += v * xs[b + j];
                        }
                        memcpy((char *)y->data + (bi * g + gi) * slice * (int64_t)es,
                               (const char *)x->data + off * (int64_t)es, (size_t)slice * es);
                }
        }
        return 0;
}

const struct ops_def ops_gather_nd_def = {
        .name = "GatherND", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gnd_run, .cost = index_cost, .infer = gnd_infer,
        .since_version = 11, .attrs = gnd_attrs,
};

/* ---------------------------------------------------------------- scatter reductions */

enum sc_red { SC_NONE, SC_ADD, SC_MUL, SC_MAX, SC_MIN };

static int sc_reduction(const struct ops_def *def, const struct ops_call *call, int *ret,
                        char *err, size_t errlen)
{
        const char *s;
        int rc = shp_attr_str(def, call, "reduction", "none", &s, err, errlen);

        if (rc)
                return rc;
        if (strcmp(s, "none") == 0)
                *ret = SC_NONE;
        else if (strcmp(s, "add") == 0)
                *ret = SC_ADD;
        else if (strcmp(s, "mul") == 0)
                *ret = SC_MUL;
        else if (strcmp(s, "max") == 0)
                *ret = SC_MAX;
        else if (strcmp(s, "min") == 0)
                *ret = SC_MIN;
        else
                return ops_fail(err, errlen, -EINVAL, "%s: unknown reduction '%s'", def->name, s);
        if (*ret != SC_NONE && call->in[0].dtype == PROTO_DTYPE_BOOL)
                return ops_fail(err, errlen, -EINVAL, "%s: reduction '%s' on bool", def->name,
                                s);
        return 0;
}

/* out[oi + i] = out[oi + i] (red) upd[ui + i] for n elements of dtype. */
static void sc_combine(int dtype, void *out, int64_t oi, const void *upd, int64_t ui,
                       int64_t n, int red)
{
        size_t es = proto_dtype_size(dtype);
        int64_t done, m, i;
        int cls = shp_num_class(dtype);

        if (red == SC_NONE) {
                memcpy((char *)out + oi * (int64_t)es, (const char *)upd + ui * (int64_t)es,
                       (size_t)n * es);
                return;
        }
        for (done = 0; done < n; done += m) {
                m = n - done < OPS_CHUNK ? n - done : OPS_CHUNK;
                if (cls == SHP_NUM_FLOAT) {
                        double a[OPS_CHUNK], b[OPS_CHUNK];

                        shp_load_f64(dtype, out, oi + done, m, a);
                        shp_load_f64(dtype, upd, ui + done, m, b);
                        for (i = 0; i < m; i++) {
                                switch (red) {
                                case SC_ADD: a[i] += b[i]; break;
                                case SC_MUL: a[i] *= b[i]; break;
                                case SC_MAX: a[i] = a[i] >= b[i] || isnan(a[i]) ? a[i] : b[i]; break;
                                default: a[i] = a[i] <= b[i] || isnan(a[i]) ? a[i] : b[i]; break;
                                }
                        }
                        shp_store_f64(dtype, out, oi + done, m, a);
                } else {
                        int64_t a[OPS_CHUNK], b[OPS_CHUNK];
                        int sgn = cls == SHP_NUM_SIGNED;

                        shp_load_i64(dtype, out, oi + done, m, a);
                        shp_load_i64(dtype, upd, ui + done, m, b);
                        for (i = 0; i < m; i++) {
                                int gt = sgn ? b[i] > a[i] : (uint64_t)b[i] > (uint64_t)a[i];
                                int lt = sgn ? b[i] < a[i] : (uint64_t)b[i] < (uint64_t)a[i];

                                switch (red) {
                                case SC_ADD: a[i] = (int64_t)((uint64_t)a[i] + (uint64_t)b[i]); break;
                                case SC_MUL: a[i] = (int64_t)((uint64_t)a[i] * (uint64_t)b[i]); break;
                                case SC_MAX: a[i] = gt ? b[i] : a[i]; break;
                                default: a[i] = lt ? b[i] : a[i]; break;
                                }
                        }
                        shp_store_i64(dtype, out, oi + done, m, a);
                }
        }
}

/* Output 0 starts as a copy of input 0. */
static void sc_copy_data(const struct ops_call *call)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t n = ops_tensor_numel(x);

        if (n && call->out[0].data != x->data)
                memcpy(call->out[0].data, x->data, (size_t)n * esize(x));
}

/* ---------------------------------------------------------------- ScatterElements, Scatter */

static const char *const se_attrs[] = { "axis", "reduction", NULL };
static const char *const scatter_attrs[] = { "axis", NULL };

static int se_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1], *u = &call->in[2];
        int64_t axis;
        int ax, red, d, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "axis", 0, &axis, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, x->ndim, &ax, err, errlen);
        if (!rc)
                rc = sc_reduction(def, call, &red, err, errlen);
        if (rc)
                return rc;
        if (u->dtype != x->dtype)
                return ops_fail(err, errlen, -EINVAL, "%s: updates dtype differs from data's",
                                def->name);
        if (ix->ndim != x->ndim || !ops_shape_equal(ix, u))
                return ops_fail(err, errlen, -EINVAL,
                                "%s: indices and updates must have one shape of the data's rank",
                                def->name);
        for (d = 0; d < x->ndim; d++)
                if (d != ax && ix->dims[d] > x->dims[d])
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: indices extent %lld exceeds the data's %lld on axis %d",
                                        def->name, (long long)ix->dims[d], (long long)x->dims[d],
                                        d);
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static int se_visit(void *vctx, int64_t k, int64_t base)
{
        struct ge_ctx *c = vctx;
        const struct ops_tensor *ix = &c->call->in[1];
        int64_t v = shp_get_i64(ix, k), j = idx_norm(v, c->n);

        if (j < 0)
                return idx_fail(c->op, v, c->n, c->err, c->errlen);
        sc_combine(c->call->in[0].dtype, c->call->out[0].data, base + j * c->stride,
                   c->call->in[2].data, k, 1, c->red);
        return 0;
}

static int se_run_def(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis = ops_attr_int(call, "axis", 0), xs[OPS_MAX_DIMS];
        int ax = (int)(axis < 0 ? axis + x->ndim : axis), rc;
        struct ge_ctx c = { call, def->name, x->dims[ax], 0, esize(x), 0, err, errlen };

        rc = sc_reduction(def, call, &c.red, err, errlen);
        if (rc)
                return rc;
        shp_strides(x->ndim, x->dims, xs);
        c.stride = xs[ax];
        sc_copy_data(call);
        return elem_walk(x, &call->in[1], ax, se_visit, &c);
}

const struct ops_def ops_scatter_elements_def = {
        .name = "ScatterElements", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = se_run_def, .cost = index_cost, .infer = se_infer_def,
        .since_version = 11, .attrs = se_attrs,
};

const struct ops_def ops_scatter_def = {
        .name = "Scatter", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = se_run_def, .cost = index_cost, .infer = se_infer_def,
        .since_version = 9, .attrs = scatter_attrs,
};

/* ---------------------------------------------------------------- ScatterND */

static const char *const snd_attrs[] = { "reduction", NULL };

static int snd_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1], *u = &call->in[2];
        struct ops_tensor want;
        int64_t k;
        int q = ix->ndim, d, red, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = sc_reduction(def, call, &red, err, errlen);
        if (rc)
                return rc;
        if (u->dtype != x->dtype)
                return ops_fail(err, errlen, -EINVAL, "ScatterND: updates dtype differs from data's");
        if (x->ndim < 1 || q < 1)
                return ops_fail(err, errlen, -EINVAL, "ScatterND: data and indices need rank 1 "
                                                      "or more");
        k = ix->dims[q - 1];
        if (k < 1 || k > x->ndim)
                return ops_fail(err, errlen, -EINVAL,
                                "ScatterND: index tuples of %lld entries for rank %d",
                                (long long)k, x->ndim);
        memset(&want, 0, sizeof(want));
        want.ndim = q - 1 + x->ndim - (int)k;
        if (want.ndim > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "ScatterND: updates rank too large");
        for (d = 0; d < q - 1; d++)
                want.dims[d] = ix->dims[d];
        for (d = (int)k; d < x->ndim; d++)
                want.dims[q - 1 + d - k] = x->dims[d];
        if (!ops_shape_equal(u, &want)) {
                char a[OPS_SHAPE_STR_MAX], b[OPS_SHAPE_STR_MAX];

                return ops_fail(err, errlen, -EINVAL, "ScatterND: updates shape %s, expected %s",
                                ops_shape_str(u, a, sizeof(a)), ops_shape_str(&want, b, sizeof(b)));
        }
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static int snd_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *ix = &call->in[1];
        int64_t k = ix->dims[ix->ndim - 1], xs[OPS_MAX_DIMS], g, slice = 1, gi, j, off, v,
                tup[OPS_MAX_DIMS];
        int d, red, rc;

        rc = sc_reduction(def, call, &red, err, errlen);
        if (rc)
                return rc;
        sc_copy_data(call);
        shp_strides(x->ndim, x->dims, xs);
        for (d = (int)k; d < x->ndim; d++)
                slice *= x->dims[d];
        g = k ? ops_tensor_numel(ix) / k : 0;
        for (gi = 0; gi < g; gi++) {
                shp_load_i64(ix->dtype, ix->data, gi * k, k, tup);
                off = 0;
                for (j = 0; j < k; j++) {
                        v = idx_norm(tup[j], x->dims[j]);
                        if (v < 0)
                                return idx_fail("ScatterND", tup[j], x->dims[j], err, errlen);
                        off += v * xs[j];
                }
                if (slice)
                        sc_combine(x->dtype, call->out[0].data, off, call->in[2].data,
                                   gi * slice, slice, red);
        }
        return 0;
}

const struct ops_def ops_scatter_nd_def = {
        .name = "ScatterND", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = snd_run, .cost = index_cost, .infer = snd_infer,
        .since_version = 11, .attrs = snd_attrs,
};

/* ---------------------------------------------------------------- OneHot */

static const char *const onehot_attrs[] = { "axis", NULL };

static int onehot_depth(const struct ops_call *call, int64_t *ret, char *err, size_t errlen)
{
        const struct ops_tensor *dt = &call->in[1];
        double d;
        int rc;

        if (ops_tensor_numel(dt) != 1)
                return ops_fail(err, errlen, -EINVAL, "OneHot: input 1 (depth) must hold one value");
        rc = shp_need_data(&ops_one_hot_def, call, 1, "depth", err, errlen);
        if (rc)
                return rc;
        d = shp_get_f64(dt, 0);
        if (shp_num_class(dt->dtype) != SHP_NUM_FLOAT)
                d = (double)shp_get_i64(dt, 0);
        if (!(d >= 1) || d > (double)((int64_t)1 << 40))
                return ops_fail(err, errlen, -EINVAL, "OneHot: depth %g out of range", d);
        *ret = (int64_t)d;
        return 0;
}

static int onehot_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *ix = &call->in[0], *v = &call->in[2];
        int64_t axis, depth, dims[OPS_MAX_DIMS];
        int r = ix->ndim, ax, d, k = 0, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_NUMERIC, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_NUMERIC, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "axis", -1, &axis, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, r + 1, &ax, err, errlen);
        if (!rc)
                rc = onehot_depth(call, &depth, err, errlen);
        if (rc)
                return rc;
        if (ops_tensor_numel(v) != 2)
                return ops_fail(err, errlen, -EINVAL,
                                "OneHot: input 2 (values) must hold [off, on]");
        if (r + 1 > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "OneHot: result rank too large");
        for (d = 0; d <= r; d++)
                dims[d] = d == ax ? depth : ix->dims[k++];
        shp_set_out(call, 0, v->dtype, r + 1, dims);
        return 0;
}

static int onehot_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *ix = &call->in[0], *y = &call->out[0];
        int64_t axis = ops_attr_int(call, "axis", -1), depth, outer, inner, o, j, v;
        int ax = (int)(axis < 0 ? axis + ix->ndim + 1 : axis), d, rc;
        size_t es = esize(y);
        const char *vals = call->in[2].data;
        double f;

        rc = onehot_depth(call, &depth, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(y))
                return 0;
        outer = inner = 1;
        for (d = 0; d < ax; d++)
                outer *= ix->dims[d];
        for (d = ax; d < ix->ndim; d++)
                inner *= ix->dims[d];
        shp_fill(y->data, ops_tensor_numel(y), vals, es);
        for (o = 0; o < outer; o++) {
                for (j = 0; j < inner; j++) {
                        if (shp_num_class(ix->dtype) == SHP_NUM_FLOAT) {
                                f = trunc(shp_get_f64(ix, o * inner + j));
                                v = f >= -(double)depth && f < (double)depth ? (int64_t)f : depth;
                        } else {
                                v = shp_get_i64(ix, o * inner + j);
                        }
                        v = idx_norm(v, depth);
                        if (v >= 0)
                                memcpy((char *)y->data + ((o * depth + v) * inner + j) * (int64_t)es,
                                       vals + es, es);
                }
        }
        return 0;
}

const struct ops_def ops_one_hot_def = {
        .name = "OneHot", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = onehot_run, .cost = index_cost, .infer = onehot_infer,
        .since_version = 9, .attrs = onehot_attrs,
};

/* ---------------------------------------------------------------- NonZero */

static int nz_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t dims[2], n = ops_tensor_numel(x), i, cnt = 0;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_ALL, err, errlen);
        if (!rc)
                rc = shp_need_data(def, call, 0, "input", err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < n; i++)
                cnt += shp_nonzero(x->dtype, x->data, i);
        /* A scalar counts as one dim, as numpy's nonzero treats it. */
        dims[0] = x->ndim ? x->ndim : 1;
        dims[1] = cnt;
        shp_set_out(call, 0, PROTO_DTYPE_INT64, 2, dims);
        return 0;
}

static int nz_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t n = ops_tensor_numel(x), cnt = call->out[0].dims[1], idx[OPS_MAX_DIMS] = { 0 };
        int64_t *y = call->out[0].data, i, k = 0;
        int d;

        for (i = 0; i < n; i++) {
                if (shp_nonzero(x->dtype, x->data, i)) {
                        if (k >= cnt)
                                return ops_fail(err, errlen, -EINVAL,
                                                "NonZero: the input changed since inference");
                        for (d = 0; d < x->ndim; d++)
                                y[d * cnt + k] = idx[d];
                        if (!x->ndim)
                                y[k] = 0;
                        k++;
                }
                for (d = x->ndim - 1; d >= 0; d--) {
                        if (++idx[d] < x->dims[d])
                                break;
                        idx[d] = 0;
                }
        }
        return 0;
}

const struct ops_def ops_non_zero_def = {
        .name = "NonZero", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = nz_run, .cost = index_cost, .infer = nz_infer,
        .since_version = 9, .attrs = NULL,
};

/* ---------------------------------------------------------------- Compress */

static const char *const compress_attrs[] = { "axis", NULL };

/* Axis (-1 when flattening), and the selected count. Condition entries beyond the axis are
 * ignored. */
static int compress_params(const struct ops_call *call, int *ret_axis, int64_t *ret_count,
                           char *err, size_t errlen)
{
        const struct ops_def *def = &ops_compress_def;
        const struct ops_tensor *x = &call->in[0], *c = &call->in[1];
        int64_t n, i, cnt = 0;
        int rc;

        *ret_axis = -1;
        if (ops_attr_find(call, "axis")) {
                int64_t axis;

                rc = shp_attr_int(def, call, "axis", 0, &axis, err, errlen);
                if (!rc)
                        rc = shp_axis(def, axis, x->ndim, ret_axis, err, errlen);
                if (rc)
                        return rc;
        }
        n = *ret_axis >= 0 ? x->dims[*ret_axis] : ops_tensor_numel(x);
        if (ops_tensor_numel(c) < n)
                n = ops_tensor_numel(c);
        for (i = 0; i < n; i++)
                cnt += shp_nonzero(c->dtype, c->data, i);
        *ret_count = cnt;
        return 0;
}

static int compress_infer(const struct ops_def *def, struct ops_call *call, char *err,
                          size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t cnt, dims[OPS_MAX_DIMS];
        int ax, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_T(PROTO_DTYPE_BOOL), err, errlen);
        if (!rc && call->in[1].ndim != 1)
                rc = ops_fail(err, errlen, -EINVAL, "Compress: condition must be 1-D");
        if (!rc)
                rc = shp_need_data(def, call, 1, "condition", err, errlen);
        if (!rc)
                rc = compress_params(call, &ax, &cnt, err, errlen);
        if (rc)
                return rc;
        if (ax < 0) {
                shp_set_out(call, 0, x->dtype, 1, &cnt);
                return 0;
        }
        memcpy(dims, x->dims, sizeof(dims));
        dims[ax] = cnt;
        shp_set_out(call, 0, x->dtype, x->ndim, dims);
        return 0;
}

static int compress_run(const struct ops_def *def, const struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *c = &call->in[1];
        int64_t cnt, outer = 1, n, inner = 1, nc, o, r, k = 0;
        size_t es = esize(x);
        char *y = call->out[0].data;
        int ax, rc;

        rc = compress_params(call, &ax, &cnt, err, errlen);
        if (rc)
                return rc;
        if (ax < 0)
                n = ops_tensor_numel(x);
        else
                shp_split3(x, ax, &outer, &n, &inner);
        nc = ops_tensor_numel(c) < n ? ops_tensor_numel(c) : n;
        if (!cnt || !outer || !inner)
                return 0;
        for (o = 0; o < outer; o++)
                for (r = 0; r < nc; r++)
                        if (shp_nonzero(c->dtype, c->data, r)) {
                                memcpy(y + k * inner * (int64_t)es,
                                       (const char *)x->data + (o * n + r) * inner * (int64_t)es,
                                       (size_t)inner * es);
                                k++;
                        }
        return 0;
}

const struct ops_def ops_compress_def = {
        .name = "Compress", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = compress_run, .cost = index_cost,
        .infer = compress_infer, .since_version = 9, .attrs = compress_attrs,
};

/* ---------------------------------------------------------------- Unique */

static const char *const unique_attrs[] = { "axis", "sorted", NULL };

/* The slices compared: m of them, slice s holding elements (o * m + s) * inner + j for all
 * o < outer, j < inner, loaded as double or int64 by class. */
struct uq_ctx {
        int cls;
        int64_t outer, m, inner;
        const double *f;
        const int64_t *i;
};

static int uq_cmp_slices(const struct uq_ctx *c, int64_t a, int64_t b)
{
        int64_t o, j;

        for (o = 0; o < c->outer; o++) {
                for (j = 0; j < c->inner; j++) {
                        int64_t pa = (o * c->m + a) * c->inner + j, pb = (o * c->m + b) * c->inner + j;
                        int r;

                        if (c->cls == SHP_NUM_FLOAT) {
                                double x = c->f[pa], y = c->f[pb];
                                int nx = isnan(x), ny = isnan(y);

                                /* NaN after every number and equal to NaN. */
                                r = nx || ny ? nx - ny : (x > y) - (x < y);
                        } else if (c->cls == SHP_NUM_SIGNED) {
                                r = (c->i[pa] > c->i[pb]) - (c->i[pa] < c->i[pb]);
                        } else {
                                r = ((uint64_t)c->i[pa] > (uint64_t)c->i[pb]) -
                                    ((uint64_t)c->i[pa] < (uint64_t)c->i[pb]);
                        }
                        if (r)
                                return r;
                }
        }
        return 0;
}

static int uq_cmp(const void *pa, const void *pb, void *vctx)
{
        int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
        int r = uq_cmp_slices(vctx, a, b);

        return r ? r : (a > b) - (a < b);
}

static int uq_first_cmp(const void *pa, const void *pb, void *vctx)
{
        const int64_t *first = vctx;
        int64_t a = first[*(const int64_t *)pa], b = first[*(const int64_t *)pb];

        return (a > b) - (a < b);
}

/* What Unique computes: for every unique slice (in output order) its first index and count,
 * and for every slice the position of its unique slice. */
struct uq_result {
        int64_t m, nu;
        int64_t *first, *count, *inverse;
};

static void uq_free(struct uq_result *r)
{
        free(r->first);
        free(r->count);
        free(r->inverse);
}

static int uq_compute(const struct ops_call *call, int ax, int sorted, struct uq_result *res,
                      char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t n = ops_tensor_numel(x), *perm = NULL, *order = NULL, *group = NULL, *pos = NULL;
        int64_t g, k;
        struct uq_ctx c;
        void *vals = NULL;
        int rc = -ENOMEM;

        memset(res, 0, sizeof(*res));
        memset(&c, 0, sizeof(c));
        c.cls = shp_num_class(x->dtype);
        c.outer = c.inner = 1;
        if (ax < 0)
                c.m = n;
        else
                shp_split3(x, ax, &c.outer, &c.m, &c.inner);
        if (!c.outer || !c.inner)
                c.m = ax < 0 ? 0 : c.m;
        res->m = c.m;
        vals = malloc((size_t)(n ? n : 1) * 8);
        perm = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        res->first = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        res->count = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        res->inverse = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        group = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        order = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        pos = malloc((size_t)(c.m ? c.m : 1) * sizeof(int64_t));
        if (!vals || !perm || !res->first || !res->count || !res->inverse || !group || !order ||
            !pos)
                goto out;
        if (c.cls == SHP_NUM_FLOAT) {
                shp_load_f64(x->dtype, x->data, 0, n, vals);
                c.f = vals;
        } else {
                shp_load_i64(x->dtype, x->data, 0, n, vals);
                c.i = vals;
        }
        for (k = 0; k < c.m; k++)
                perm[k] = k;
        qsort_r(perm, (size_t)c.m, sizeof(*perm), uq_cmp, &c);
        /* Groups of equal slices in sorted order; the lowest index leads each. */
        for (k = 0, g = -1; k < c.m; k++) {
                if (k == 0 || uq_cmp_slices(&c, perm[k - 1], perm[k])) {
                        g++;
                        res->first[g] = perm[k];
                        res->count[g] = 0;
                }
                res->count[g]++;
                group[perm[k]] = g;
        }
        res->nu = g + 1;
        for (k = 0; k < res->nu; k++)
                order[k] = k;
        if (!sorted)
                qsort_r(order, (size_t)res->nu, sizeof(*order), uq_first_cmp, res->first);
        /* order[p] is the sorted group shown at position p, pos[] its inverse; perm and
         * group are free again and serve as scratch for the reordering. */
        for (k = 0; k < res->nu; k++)
                pos[order[k]] = k;
        for (k = 0; k < c.m; k++)
                res->inverse[k] = pos[group[k]];
        for (k = 0; k < res->nu; k++)
                perm[k] = res->first[order[k]];
        memcpy(res->first, perm, (size_t)res->nu * sizeof(int64_t));
        for (k = 0; k < res->nu; k++)
                group[k] = res->count[order[k]];
        memcpy(res->count, group, (size_t)res->nu * sizeof(int64_t));
        rc = 0;
out:
        free(vals);
        free(perm);
        free(group);
        free(order);
        free(pos);
        if (rc) {
                uq_free(res);
                return ops_fail(err, errlen, rc, "Unique: out of memory");
        }
        return 0;
}

static int uq_params(const struct ops_call *call, int *ret_axis, int *ret_sorted, char *err,
                     size_t errlen)
{
        const struct ops_def *def = &ops_unique_def;
        int64_t v;
        int rc;

        *ret_axis = -1;
        rc = shp_attr_int(def, call, "sorted", 1, &v, err, errlen);
        if (rc)
                return rc;
        *ret_sorted = v != 0;
        if (!ops_attr_find(call, "axis"))
                return 0;
        rc = shp_attr_int(def, call, "axis", 0, &v, err, errlen);
        if (!rc)
                rc = shp_axis(def, v, call->in[0].ndim, ret_axis, err, errlen);
        return rc;
}

static int uq_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct uq_result r;
        int64_t dims[OPS_MAX_DIMS];
        int ax, sorted, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_ALL, err, errlen);
        if (!rc)
                rc = uq_params(call, &ax, &sorted, err, errlen);
        if (!rc)
                rc = shp_need_data(def, call, 0, "X", err, errlen);
        if (!rc)
                rc = uq_compute(call, ax, sorted, &r, err, errlen);
        if (rc)
                return rc;
        if (ax < 0) {
                shp_set_out(call, 0, x->dtype, 1, &r.nu);
        } else {
                memcpy(dims, x->dims, sizeof(dims));
                dims[ax] = r.nu;
                shp_set_out(call, 0, x->dtype, x->ndim, dims);
        }
        shp_set_out(call, 1, PROTO_DTYPE_INT64, 1, &r.nu);
        shp_set_out(call, 2, PROTO_DTYPE_INT64, 1, &r.m);
        shp_set_out(call, 3, PROTO_DTYPE_INT64, 1, &r.nu);
        uq_free(&r);
        return 0;
}

static int uq_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t outer = 1, m, inner = 1, o, u;
        size_t es = esize(x);
        struct uq_result r;
        int ax, sorted, rc;

        rc = uq_params(call, &ax, &sorted, err, errlen);
        if (!rc)
                rc = uq_compute(call, ax, sorted, &r, err, errlen);
        if (rc)
                return rc;
        if (r.nu != (ax < 0 ? call->out[0].dims[0] : call->out[0].dims[ax])) {
                uq_free(&r);
                return ops_fail(err, errlen, -EINVAL, "Unique: the input changed since inference");
        }
        if (ax < 0)
                m = r.m;
        else
                shp_split3(x, ax, &outer, &m, &inner);
        if (call->out[0].data)
                for (o = 0; o < outer; o++)
                        for (u = 0; u < r.nu; u++)
                                memcpy((char *)call->out[0].data + (o * r.nu + u) * inner * (int64_t)es,
                                       (const char *)x->data + (o * m + r.first[u]) * inner * (int64_t)es,
                                       (size_t)inner * es);
        if (call->nout > 1 && call->out[1].data && r.nu)
                memcpy(call->out[1].data, r.first, (size_t)r.nu * sizeof(int64_t));
        if (call->nout > 2 && call->out[2].data && r.m)
                memcpy(call->out[2].data, r.inverse, (size_t)r.m * sizeof(int64_t));
        if (call->nout > 3 && call->out[3].data && r.nu)
                memcpy(call->out[3].data, r.count, (size_t)r.nu * sizeof(int64_t));
        uq_free(&r);
        return 0;
}

static void uq_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        shp_cost(call, 16, ret_flops, ret_bytes);
}

const struct ops_def ops_unique_def = {
        .name = "Unique", .min_inputs = 1, .max_inputs = 1, .outputs = 4,
        .engine = OPS_ENGINE_AICPU, .run = uq_run, .cost = uq_cost, .infer = uq_infer,
        .since_version = 11, .attrs = unique_attrs,
};

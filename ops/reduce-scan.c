/* CumSum (exclusive, reverse; the axis is a scalar input read when the kernel runs, so the
 * output shape never depends on it) and TopK (k an attribute before opset 10, an input
 * after; largest or smallest, along any axis, ties keeping the lower index first as ONNX
 * requires; results always sorted, which sorted=0 permits).
 *
 * CumSum walks the tensor as [outer, n, inner] a row of up to OPS_CHUNK inner elements at a
 * time with one running sum per element, so reads and writes stay sequential whatever the
 * axis; floating types sum in double, integers in wrapping 64-bit arithmetic. TopK gathers
 * each line along the axis, sorts (value, index) pairs and copies the winning elements'
 * bytes, so values come out exactly as they went in. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape-common.h"

/* ---------------------------------------------------------------- CumSum */

static const char *const cs_attrs[] = { "exclusive", "reverse", NULL };

/* The axis input as a normalised axis. */
static int cs_axis(const struct ops_call *call, int *ret, char *err, size_t errlen)
{
        const struct ops_tensor *a = &call->in[1];
        int64_t v;

        if (ops_tensor_numel(a) != 1 || a->ndim > 1)
                return ops_fail(err, errlen, -EINVAL,
                                "CumSum: input 1 (axis) must hold one value, not %s",
                                ops_shape_str(a, (char[OPS_SHAPE_STR_MAX]){ 0 }, OPS_SHAPE_STR_MAX));
        v = shp_get_i64(a, 0);
        return shp_axis(&ops_cumsum_def, v, call->in[0].ndim, ret, err, errlen);
}

static int cs_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t v;
        int ax, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_NUMERIC, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "exclusive", 0, &v, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "reverse", 0, &v, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "CumSum: input 0 is a scalar, rank 1 or "
                                                      "more needed");
        /* Known only when the data is: checked here when it can be, else when running. */
        if (call->in[1].data) {
                rc = cs_axis(call, &ax, err, errlen);
                if (rc)
                        return rc;
        }
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

/* Sums along contiguous lines (the axis is the last non-unit dim), a chunk at a time,
 * chunks taken from the end when reversed. buf holds OPS_CHUNK doubles or int64s. */
static void cs_lines(const struct ops_tensor *x, const struct ops_tensor *y, int64_t outer,
                     int64_t n, int excl, int rev, void *buf)
{
        int is_float = shp_num_class(x->dtype) == SHP_NUM_FLOAT;
        double *f = buf, fa, fv;
        int64_t *v = buf, ia, iv, o, t0, m, j, k, off;

        for (o = 0; o < outer; o++) {
                fa = 0;
                ia = 0;
                for (t0 = 0; t0 < n; t0 += m) {
                        m = n - t0 < OPS_CHUNK ? n - t0 : OPS_CHUNK;
                        off = o * n + (rev ? n - t0 - m : t0);
                        if (is_float) {
                                shp_load_f64(x->dtype, x->data, off, m, f);
                                for (k = 0; k < m; k++) {
                                        j = rev ? m - 1 - k : k;
                                        fv = f[j];
                                        f[j] = excl ? fa : fa + fv;
                                        fa += fv;
                                }
                                shp_store_f64(y->dtype, y->data, off, m, f);
                        } else {
                                shp_load_i64(x->dtype, x->data, off, m, v);
                                for (k = 0; k < m; k++) {
                                        j = rev ? m - 1 - k : k;
                                        iv = v[j];
                                        ia = (int64_t)((uint64_t)ia + (uint64_t)iv);
                                        v[j] = excl ? (int64_t)((uint64_t)ia - (uint64_t)iv) : ia;
                                }
                                shp_store_i64(y->dtype, y->data, off, m, v);
                        }
                }
        }
}

static int cs_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int excl = ops_attr_int(call, "exclusive", 0) != 0;
        int rev = ops_attr_int(call, "reverse", 0) != 0;
        int is_float = shp_num_class(x->dtype) == SHP_NUM_FLOAT;
        int64_t outer, n, inner, o, t, r, j0, j, m;
        union {
                double f[OPS_CHUNK];
                int64_t i[OPS_CHUNK];
        } *acc, *row;
        int ax, rc;

        rc = cs_axis(call, &ax, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(x))
                return 0;
        shp_split3(x, ax, &outer, &n, &inner);
        acc = malloc(2 * sizeof(*acc));
        if (!acc)
                return ops_fail(err, errlen, -ENOMEM, "CumSum: out of memory");
        row = acc + 1;
        if (inner == 1) {
                cs_lines(x, y, outer, n, excl, rev, row);
                free(acc);
                return 0;
        }
        for (o = 0; o < outer; o++) {
                for (j0 = 0; j0 < inner; j0 += m) {
                        m = inner - j0 < OPS_CHUNK ? inner - j0 : OPS_CHUNK;
                        memset(acc, 0, sizeof(*acc));
                        for (t = 0; t < n; t++) {
                                int64_t off;

                                r = rev ? n - 1 - t : t;
                                off = (o * n + r) * inner + j0;
                                /* Loaded before the store: the output may be the input. */
                                if (is_float) {
                                        shp_load_f64(x->dtype, x->data, off, m, row->f);
                                        if (excl)
                                                shp_store_f64(y->dtype, y->data, off, m, acc->f);
                                        for (j = 0; j < m; j++)
                                                acc->f[j] += row->f[j];
                                        if (!excl)
                                                shp_store_f64(y->dtype, y->data, off, m, acc->f);
                                } else {
                                        shp_load_i64(x->dtype, x->data, off, m, row->i);
                                        if (excl)
                                                shp_store_i64(y->dtype, y->data, off, m, acc->i);
                                        for (j = 0; j < m; j++)
                                                acc->i[j] = (int64_t)((uint64_t)acc->i[j] +
                                                                      (uint64_t)row->i[j]);
                                        if (!excl)
                                                shp_store_i64(y->dtype, y->data, off, m, acc->i);
                                }
                        }
                }
        }
        free(acc);
        return 0;
}

static void cs_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        shp_cost(call, 1, ret_flops, ret_bytes);
}

const struct ops_def ops_cumsum_def = {
        .name = "CumSum", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = cs_run, .cost = cs_cost, .infer = cs_infer,
        .since_version = 11, .attrs = cs_attrs,
};

/* ---------------------------------------------------------------- TopK */

static const char *const topk_attrs[] = { "axis", "largest", "sorted", NULL };
static const char *const topk1_attrs[] = { "axis", "k", NULL };

struct topk_item {
        union {
                double f;
                int64_t i;
        } v;
        int64_t idx;
};

struct topk_order {
        int cls, largest;
};

/* Best first: larger (or smaller) values, NaN counted largest, then the lower index. */
static int topk_cmp(const void *pa, const void *pb, void *vctx)
{
        const struct topk_item *a = pa, *b = pb;
        const struct topk_order *ord = vctx;
        int c;

        if (ord->cls == SHP_NUM_FLOAT) {
                int na = isnan(a->v.f), nb = isnan(b->v.f);

                c = na || nb ? na - nb : (a->v.f > b->v.f) - (a->v.f < b->v.f);
        } else if (ord->cls == SHP_NUM_SIGNED) {
                c = (a->v.i > b->v.i) - (a->v.i < b->v.i);
        } else {
                c = ((uint64_t)a->v.i > (uint64_t)b->v.i) - ((uint64_t)a->v.i < (uint64_t)b->v.i);
        }
        if (ord->largest)
                c = -c;
        if (c)
                return c;
        return (a->idx > b->idx) - (a->idx < b->idx);
}

/* k from the attribute (opset 1) or from input 1; axis normalised. */
static int topk_params(const struct ops_def *def, const struct ops_call *call, int64_t *ret_k,
                       int *ret_axis, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis, k;
        int rc, n;

        rc = shp_attr_int(def, call, "axis", -1, &axis, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, x->ndim, ret_axis, err, errlen);
        if (rc)
                return rc;
        if (def->max_inputs == 1) {
                if (!ops_attr_find(call, "k"))
                        return ops_fail(err, errlen, -EINVAL, "TopK: attribute 'k' is required");
                rc = shp_attr_int(def, call, "k", 0, &k, err, errlen);
        } else {
                if (ops_tensor_numel(&call->in[1]) != 1)
                        return ops_fail(err, errlen, -EINVAL,
                                        "TopK: input 1 (k) must hold one value");
                rc = shp_input_ints(def, call, 1, "k", &k, 1, &n, err, errlen);
        }
        if (rc)
                return rc;
        if (k < 0 || k > x->dims[*ret_axis])
                return ops_fail(err, errlen, -EINVAL, "TopK: k %lld out of range [0, %lld]",
                                (long long)k, (long long)x->dims[*ret_axis]);
        *ret_k = k;
        return 0;
}

static int topk_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                          size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t dims[OPS_MAX_DIMS], k, v;
        int ax, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_NUMERIC, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "largest", 1, &v, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "sorted", 1, &v, err, errlen);
        if (!rc)
                rc = topk_params(def, call, &k, &ax, err, errlen);
        if (rc)
                return rc;
        memcpy(dims, x->dims, sizeof(dims));
        dims[ax] = k;
        shp_set_out(call, 0, x->dtype, x->ndim, dims);
        shp_set_out(call, 1, PROTO_DTYPE_INT64, x->ndim, dims);
        return 0;
}

static int topk_run_def(const struct ops_def *def, const struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        size_t es = proto_dtype_size(x->dtype);
        struct topk_order ord;
        struct topk_item *it;
        int64_t k, outer, n, inner, o, j, r;
        int ax, rc;

        rc = topk_params(def, call, &k, &ax, err, errlen);
        if (rc)
                return rc;
        shp_split3(x, ax, &outer, &n, &inner);
        if (!k || !outer || !inner)
                return 0;
        it = ops_buf_alloc((size_t)n * sizeof(*it), NULL, 0);
        if (!it)
                return ops_fail(err, errlen, -ENOMEM, "TopK: out of memory");
        ord.cls = shp_num_class(x->dtype);
        ord.largest = ops_attr_int(call, "largest", 1) != 0;
        for (o = 0; o < outer; o++) {
                for (j = 0; j < inner; j++) {
                        int64_t base = o * n * inner + j, obase = o * k * inner + j;

                        for (r = 0; r < n; r++) {
                                if (ord.cls == SHP_NUM_FLOAT)
                                        shp_load_f64(x->dtype, x->data, base + r * inner, 1,
                                                     &it[r].v.f);
                                else
                                        shp_load_i64(x->dtype, x->data, base + r * inner, 1,
                                                     &it[r].v.i);
                                it[r].idx = r;
                        }
                        qsort_r(it, (size_t)n, sizeof(*it), topk_cmp, &ord);
                        for (r = 0; r < k; r++) {
                                int64_t at = obase + r * inner;

                                if (call->out[0].data)
                                        memcpy((char *)call->out[0].data + at * (int64_t)es,
                                               (const char *)x->data +
                                                       (base + it[r].idx * inner) * (int64_t)es,
                                               es);
                                if (call->nout > 1 && call->out[1].data)
                                        ((int64_t *)call->out[1].data)[at] = it[r].idx;
                        }
                }
        }
        ops_buf_free(it);
        return 0;
}

static void topk_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        /* A sort per line: about log2(n) comparisons per element, counted as 8. */
        shp_cost(call, 8, ret_flops, ret_bytes);
}

const struct ops_def ops_topk_def = {
        .name = "TopK", .min_inputs = 2, .max_inputs = 2, .outputs = 2, .engine = OPS_ENGINE_AICPU,
        .run = topk_run_def, .cost = topk_cost, .infer = topk_infer_def, .since_version = 10,
        .attrs = topk_attrs,
};

const struct ops_def ops_topk1_def = {
        .name = "TopK", .min_inputs = 1, .max_inputs = 1, .outputs = 2, .engine = OPS_ENGINE_AICPU,
        .run = topk_run_def, .cost = topk_cost, .infer = topk_infer_def, .since_version = 1,
        .attrs = topk1_attrs,
};

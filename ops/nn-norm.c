/* Normalizations for the vector engine: BatchNormalization (inference, and training mode
 * with running statistics), LayerNormalization (with the Mean and InvStdDev outputs),
 * InstanceNormalization, LRN, LpNormalization and MeanVarianceNormalization.
 *
 * Data is processed in float32 working copies (other floating dtypes converted around the
 * kernels) while statistics accumulate in double, so that a mean over many elements keeps
 * its precision. Per-channel parameters are folded into one multiply-add per element
 * (BatchNormalization: y = x * a[c] + b[c]). Layouts are walked as contiguous rows:
 * channels of [N, C, spatial] planes, LayerNormalization's [outer, inner] split at axis. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"
#include "nn-common.h"

/* Loads several inputs as float32 views; on failure every view is released. */
static int load_views(const struct ops_call *call, const int *which, int n, struct nn_f32 *v)
{
        int i, rc = 0;

        for (i = 0; i < n; i++) {
                v[i].p = v[i].owned = NULL;
                if (nn_has_in(call, which[i]) && !rc)
                        rc = nn_f32_in(&call->in[which[i]], &v[i]);
        }
        if (rc)
                for (i = 0; i < n; i++)
                        nn_f32_done(&v[i]);
        return rc;
}

static void done_views(struct nn_f32 *v, int n)
{
        int i;

        for (i = 0; i < n; i++)
                nn_f32_done(&v[i]);
}

/* Every present input from index 1 has n elements. */
static int per_channel_ok(const struct ops_call *call, int from, int64_t n)
{
        int i;

        for (i = from; i < call->nin; i++)
                if (nn_has_in(call, i) && (!nn_is_float(call->in[i].dtype) ||
                                           ops_tensor_numel(&call->in[i]) != n))
                        return 0;
        return 1;
}

/* ---------------------------------------------------------------- BatchNormalization */

static int bn_training(const struct ops_call *call)
{
        /* training_mode from opset 14; before it, asking for the statistics outputs meant
         * training (is_test = 0) */
        if (ops_attr_find(call, "training_mode"))
                return ops_attr_int(call, "training_mode", 0) != 0;
        return call->opset > 0 && call->opset < 14 && call->nout > 1 &&
               !ops_attr_int(call, "is_test", 0);
}

static int bn_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t c;
        int rc, i;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "BatchNormalization: X is a scalar");
        c = x->ndim >= 2 ? x->dims[1] : 1;
        if (!per_channel_ok(call, 1, c))
                return ops_fail(err, errlen, -EINVAL,
                                "BatchNormalization: scale, B, mean and var must be floating [%lld]",
                                (long long)c);
        nn_set_out(call, 0, x->dtype, x->ndim, x->dims);
        for (i = 1; i < call->nout; i++)
                nn_set_out(call, i, call->in[i & 1 ? 3 : 4].dtype, 1, &c);
        return 0;
}

static int bn_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        static const int which[] = { 0, 1, 2, 3, 4 };
        const struct ops_tensor *x = &call->in[0];
        double eps = ops_attr_float(call, "epsilon", 1e-5);
        double mom = ops_attr_float(call, "momentum", 0.9);
        int64_t n = x->dims[0], c = x->ndim >= 2 ? x->dims[1] : 1, plane = 1, i, j, p;
        struct nn_f32 v[5], y;
        double *stat;
        int d, train = bn_training(call);

        for (d = 2; d < x->ndim; d++)
                plane *= x->dims[d];
        if (x->ndim == 1) {
                n = x->dims[0];
                c = 1;
        }
        stat = ops_buf_alloc((size_t)(4 * (c ? c : 1)) * sizeof(double), NULL, 0);
        if (!stat || load_views(call, which, 5, v)) {
                ops_buf_free(stat);
                return ops_fail(err, errlen, -ENOMEM, "BatchNormalization: out of memory");
        }
        if (nn_f32_out(&call->out[0], &y)) {
                ops_buf_free(stat);
                done_views(v, 5);
                return ops_fail(err, errlen, -ENOMEM, "BatchNormalization: out of memory");
        }
        /* stat: mean, var, then the folded a and b */
        for (j = 0; j < c; j++) {
                double mean = v[3].p[j], var = v[4].p[j];

                if (train) {
                        double s = 0, s2 = 0, cnt = (double)(n * plane);

                        for (i = 0; i < n; i++) {
                                const float *row = v[0].p + (i * c + j) * plane;

                                for (p = 0; p < plane; p++)
                                        s += row[p];
                        }
                        mean = cnt > 0 ? s / cnt : 0;
                        for (i = 0; i < n; i++) {
                                const float *row = v[0].p + (i * c + j) * plane;

                                for (p = 0; p < plane; p++)
                                        s2 += (row[p] - mean) * (row[p] - mean);
                        }
                        var = cnt > 0 ? s2 / cnt : 0;
                }
                stat[j] = mean;
                stat[c + j] = var;
                stat[2 * c + j] = v[1].p[j] / sqrt(var + eps);
                stat[3 * c + j] = v[2].p[j] - mean * stat[2 * c + j];
        }
        for (i = 0; i < n; i++)
                for (j = 0; j < c; j++) {
                        const float *xr = v[0].p + (i * c + j) * plane;
                        float *yr = y.p + (i * c + j) * plane, a = (float)stat[2 * c + j],
                              b = (float)stat[3 * c + j];

                        for (p = 0; p < plane; p++)
                                yr[p] = xr[p] * a + b;
                }
        nn_f32_commit(&call->out[0], &y);
        /* Training outputs: running mean and var (opset 14+), then saved mean and var
         * (opsets before 14). */
        for (d = 1; d < call->nout && d < 5; d++) {
                if (!nn_want_out(call, d))
                        continue;
                for (j = 0; j < c; j++) {
                        double cur = d & 1 ? stat[j] : stat[c + j];
                        double run = d & 1 ? v[3].p[j] : v[4].p[j];

                        nn_put(&call->out[d], j, d <= 2 ? run * mom + cur * (1 - mom) : cur);
                }
        }
        nn_f32_done(&y);
        done_views(v, 5);
        ops_buf_free(stat);
        return 0;
}

static void bn_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        nn_cost_simple(call, bn_training(call) ? 6 : 2, ret_flops, ret_bytes);
}

const struct ops_def ops_batch_norm_def = {
        .name = "BatchNormalization", .min_inputs = 5, .max_inputs = 5, .outputs = 5,
        .engine = OPS_ENGINE_VECTOR, .run = bn_run, .cost = bn_cost, .infer = bn_infer,
        .since_version = 1,
};

/* ---------------------------------------------------------------- LayerNormalization */

static int ln_axis(const struct ops_call *call, int rank, int *ret)
{
        int64_t axis = ops_attr_int(call, "axis", -1);

        if (axis < -rank || axis >= rank)
                return -EINVAL;
        *ret = (int)(axis < 0 ? axis + rank : axis);
        return 0;
}

/* A parameter broadcasts to the normalized shape (the dims from axis on). */
static int ln_param_ok(const struct ops_tensor *x, int axis, const struct ops_tensor *p)
{
        struct ops_tensor norm, res;
        int d;

        memset(&norm, 0, sizeof(norm));
        norm.ndim = x->ndim - axis;
        memcpy(norm.dims, x->dims + axis, (size_t)norm.ndim * sizeof(norm.dims[0]));
        if (!nn_is_float(p->dtype) || p->ndim > norm.ndim ||
            ops_broadcast_shape(&norm, p, &res, NULL, 0))
                return 0;
        for (d = 0; d < norm.ndim; d++)
                if (res.dims[d] != norm.dims[d])
                        return 0;
        return 1;
}

static int ln_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t sdims[OPS_MAX_DIMS];
        int rc, axis, d, stash = (int)ops_attr_int(call, "stash_type", 1);

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (ln_axis(call, x->ndim, &axis))
                return ops_fail(err, errlen, -EINVAL, "LayerNormalization: axis out of range for rank %d",
                                x->ndim);
        if (!ln_param_ok(x, axis, &call->in[1]) ||
            (nn_has_in(call, 2) && !ln_param_ok(x, axis, &call->in[2])))
                return ops_fail(err, errlen, -EINVAL,
                                "LayerNormalization: Scale and B must broadcast to the normalized shape");
        if (!nn_is_float(stash))
                return ops_fail(err, errlen, -EINVAL, "LayerNormalization: stash_type %d", stash);
        for (d = 0; d < x->ndim; d++)
                sdims[d] = d < axis ? x->dims[d] : 1;
        nn_set_out(call, 0, x->dtype, x->ndim, x->dims);
        nn_set_out(call, 1, stash, x->ndim, sdims);
        nn_set_out(call, 2, stash, x->ndim, sdims);
        return 0;
}

/* Element offsets of a parameter broadcast over the normalized shape, one per inner
 * element. */
static void ln_param_map(const struct ops_tensor *x, int axis, const struct ops_tensor *p,
                         int64_t *map, int64_t inner)
{
        struct ops_tensor norm;
        int64_t st[OPS_MAX_DIMS], idx[OPS_MAX_DIMS] = { 0 }, off = 0, i;
        int d;

        memset(&norm, 0, sizeof(norm));
        norm.ndim = x->ndim - axis;
        memcpy(norm.dims, x->dims + axis, (size_t)norm.ndim * sizeof(norm.dims[0]));
        ops_broadcast_strides(p, &norm, st);
        for (i = 0; i < inner; i++) {
                map[i] = off;
                for (d = norm.ndim - 1; d >= 0; d--) {
                        off += st[d];
                        if (++idx[d] < norm.dims[d])
                                break;
                        off -= st[d] * norm.dims[d];
                        idx[d] = 0;
                }
        }
}

static int ln_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        static const int which[] = { 0, 1, 2 };
        const struct ops_tensor *x = &call->in[0];
        double eps = ops_attr_float(call, "epsilon", 1e-5);
        int64_t outer = 1, inner = 1, i, j, *map;
        struct nn_f32 v[3], y;
        int axis = 0, d;

        ln_axis(call, x->ndim, &axis);
        for (d = 0; d < x->ndim; d++) {
                if (d < axis)
                        outer *= x->dims[d];
                else
                        inner *= x->dims[d];
        }
        if (!outer)
                return 0;
        map = ops_buf_alloc((size_t)(2 * (inner ? inner : 1)) * sizeof(int64_t), NULL, 0);
        if (!map || load_views(call, which, 3, v)) {
                ops_buf_free(map);
                return ops_fail(err, errlen, -ENOMEM, "LayerNormalization: out of memory");
        }
        if (nn_f32_out(&call->out[0], &y)) {
                ops_buf_free(map);
                done_views(v, 3);
                return ops_fail(err, errlen, -ENOMEM, "LayerNormalization: out of memory");
        }
        ln_param_map(x, axis, &call->in[1], map, inner);
        if (v[2].p)
                ln_param_map(x, axis, &call->in[2], map + inner, inner);
        /* scale and bias of one value per element of a row (the usual [inner] parameters):
         * the row kernels (ops/rows.h) read them directly */
        int direct = 1;
        for (j = 0; j < inner && direct; j++)
                direct = map[j] == j && (!v[2].p || map[inner + j] == j);
        for (i = 0; i < outer; i++) {
                const float *xr = v[0].p + i * inner;
                float *yr = y.p + i * inner;
                double mean, inv;

                mean = inner ? ops_row_sum(xr, inner) / (double)inner : 0;
                inv = 1.0 / sqrt((inner ? ops_row_sqdev(xr, inner, mean) / (double)inner : 0) + eps);
                if (direct) {
                        ops_row_norm(yr, xr, inner, mean, inv, v[1].p, v[2].p);
                } else {
                        for (j = 0; j < inner; j++) {
                                double t = (xr[j] - mean) * inv * v[1].p[map[j]];

                                yr[j] = (float)(v[2].p ? t + v[2].p[map[inner + j]] : t);
                        }
                }
                if (nn_want_out(call, 1))
                        nn_put(&call->out[1], i, mean);
                if (nn_want_out(call, 2))
                        nn_put(&call->out[2], i, inv);
        }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&y);
        done_views(v, 3);
        ops_buf_free(map);
        return 0;
}

static void ln_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        nn_cost_simple(call, 8, ret_flops, ret_bytes);
}

const struct ops_def ops_layer_norm_def = {
        .name = "LayerNormalization", .min_inputs = 2, .max_inputs = 3, .outputs = 3,
        .engine = OPS_ENGINE_VECTOR, .run = ln_run, .cost = ln_cost, .infer = ln_infer,
        .since_version = 17,
};

/* ---------------------------------------------------------------- InstanceNormalization */

static int in_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 3)
                return ops_fail(err, errlen, -EINVAL, "InstanceNormalization: input of rank %d",
                                x->ndim);
        if (!per_channel_ok(call, 1, x->dims[1]))
                return ops_fail(err, errlen, -EINVAL,
                                "InstanceNormalization: scale and B must be floating [%lld]",
                                (long long)x->dims[1]);
        nn_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static int in_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        static const int which[] = { 0, 1, 2 };
        const struct ops_tensor *x = &call->in[0];
        double eps = ops_attr_float(call, "epsilon", 1e-5);
        int64_t n = x->dims[0], c = x->dims[1], plane = 1, i, j, p;
        struct nn_f32 v[3], y;
        int d;

        for (d = 2; d < x->ndim; d++)
                plane *= x->dims[d];
        if (load_views(call, which, 3, v))
                return ops_fail(err, errlen, -ENOMEM, "InstanceNormalization: out of memory");
        if (nn_f32_out(&call->out[0], &y)) {
                done_views(v, 3);
                return ops_fail(err, errlen, -ENOMEM, "InstanceNormalization: out of memory");
        }
        for (i = 0; i < n; i++)
                for (j = 0; j < c; j++) {
                        const float *xr = v[0].p + (i * c + j) * plane;
                        float *yr = y.p + (i * c + j) * plane;
                        double s = 0, s2 = 0, mean, a, b;

                        for (p = 0; p < plane; p++)
                                s += xr[p];
                        mean = plane ? s / (double)plane : 0;
                        for (p = 0; p < plane; p++)
                                s2 += (xr[p] - mean) * (xr[p] - mean);
                        a = v[1].p[j] / sqrt((plane ? s2 / (double)plane : 0) + eps);
                        b = v[2].p[j] - mean * a;
                        for (p = 0; p < plane; p++)
                                yr[p] = (float)(xr[p] * a + b);
                }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&y);
        done_views(v, 3);
        return 0;
}

static void in_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        nn_cost_simple(call, 6, ret_flops, ret_bytes);
}

const struct ops_def ops_instance_norm_def = {
        .name = "InstanceNormalization", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = in_run, .cost = in_cost, .infer = in_infer,
        .since_version = 1,
};

/* ---------------------------------------------------------------- LRN */

static int lrn_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 2)
                return ops_fail(err, errlen, -EINVAL, "LRN: input of rank %d", x->ndim);
        if (ops_attr_int(call, "size", 0) < 1)
                return ops_fail(err, errlen, -EINVAL, "LRN: attribute 'size' (>= 1) is required");
        nn_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

/* Channel c sums squares over [c - (size-1)/2, c + ceil((size-1)/2)]: a sliding window over
 * the channels of each image, per spatial position, kept as running row sums. */
static int lrn_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        double alpha = ops_attr_float(call, "alpha", 1e-4), beta = ops_attr_float(call, "beta", 0.75);
        double bias = ops_attr_float(call, "bias", 1.0);
        int64_t size = ops_attr_int(call, "size", 1), n = x->dims[0], c = x->dims[1], plane = 1;
        int64_t before = (size - 1) / 2, after = size - 1 - before, i, j, k, p;
        struct nn_f32 xv, y;
        double *sum;
        int d;

        for (d = 2; d < x->ndim; d++)
                plane *= x->dims[d];
        sum = ops_buf_alloc((size_t)(plane ? plane : 1) * sizeof(double), NULL, 0);
        if (!sum || nn_f32_in(x, &xv)) {
                ops_buf_free(sum);
                return ops_fail(err, errlen, -ENOMEM, "LRN: out of memory");
        }
        if (nn_f32_out(&call->out[0], &y)) {
                ops_buf_free(sum);
                nn_f32_done(&xv);
                return ops_fail(err, errlen, -ENOMEM, "LRN: out of memory");
        }
        for (i = 0; i < n; i++) {
                const float *xi = xv.p + i * c * plane;
                float *yi = y.p + i * c * plane;

                for (j = 0; j < c; j++) {
                        int64_t lo = j - before < 0 ? 0 : j - before;
                        int64_t hi = j + after >= c ? c - 1 : j + after;

                        memset(sum, 0, (size_t)plane * sizeof(double));
                        for (k = lo; k <= hi; k++)
                                for (p = 0; p < plane; p++)
                                        sum[p] += (double)xi[k * plane + p] * xi[k * plane + p];
                        for (p = 0; p < plane; p++)
                                yi[j * plane + p] = (float)(xi[j * plane + p] /
                                                            pow(bias + alpha / (double)size * sum[p],
                                                                beta));
                }
        }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&y);
        nn_f32_done(&xv);
        ops_buf_free(sum);
        return 0;
}

static void lrn_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        nn_cost_simple(call, 2 * (uint64_t)ops_attr_int(call, "size", 1) + 10, ret_flops,
                       ret_bytes);
}

const struct ops_def ops_lrn_def = {
        .name = "LRN", .min_inputs = 1, .max_inputs = 1, .outputs = 1, .engine = OPS_ENGINE_VECTOR,
        .run = lrn_run, .cost = lrn_cost, .infer = lrn_infer, .since_version = 1,
};

/* ---------------------------------------------------------------- LpNormalization */

static int lpn_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis = ops_attr_int(call, "axis", -1), p = ops_attr_int(call, "p", 2);
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 1 || axis < -x->ndim || axis >= x->ndim)
                return ops_fail(err, errlen, -EINVAL, "LpNormalization: axis %lld for rank %d",
                                (long long)axis, x->ndim);
        if (p != 1 && p != 2)
                return ops_fail(err, errlen, -EINVAL, "LpNormalization: p must be 1 or 2");
        nn_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static int lpn_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis = ops_attr_int(call, "axis", -1), p = ops_attr_int(call, "p", 2);
        int64_t outer = 1, n, inner = 1, i, j, k;
        struct nn_f32 xv, y;
        double *norm;
        int d;

        if (axis < 0)
                axis += x->ndim;
        n = x->dims[axis];
        for (d = 0; d < x->ndim; d++) {
                if (d < axis)
                        outer *= x->dims[d];
                else if (d > axis)
                        inner *= x->dims[d];
        }
        norm = ops_buf_alloc((size_t)(inner ? inner : 1) * sizeof(double), NULL, 0);
        if (!norm || nn_f32_in(x, &xv)) {
                ops_buf_free(norm);
                return ops_fail(err, errlen, -ENOMEM, "LpNormalization: out of memory");
        }
        if (nn_f32_out(&call->out[0], &y)) {
                ops_buf_free(norm);
                nn_f32_done(&xv);
                return ops_fail(err, errlen, -ENOMEM, "LpNormalization: out of memory");
        }
        for (i = 0; i < outer; i++) {
                const float *xs = xv.p + i * n * inner;
                float *ys = y.p + i * n * inner;

                memset(norm, 0, (size_t)inner * sizeof(double));
                for (k = 0; k < n; k++)
                        for (j = 0; j < inner; j++)
                                norm[j] += p == 1 ? fabs(xs[k * inner + j])
                                                  : (double)xs[k * inner + j] * xs[k * inner + j];
                if (p == 2)
                        for (j = 0; j < inner; j++)
                                norm[j] = sqrt(norm[j]);
                for (k = 0; k < n; k++)
                        for (j = 0; j < inner; j++)
                                ys[k * inner + j] = (float)(xs[k * inner + j] / norm[j]);
        }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&y);
        nn_f32_done(&xv);
        ops_buf_free(norm);
        return 0;
}

static void lpn_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        nn_cost_simple(call, 4, ret_flops, ret_bytes);
}

const struct ops_def ops_lp_norm_def = {
        .name = "LpNormalization", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = lpn_run, .cost = lpn_cost, .infer = lpn_infer,
        .since_version = 1,
};

/* ---------------------------------------------------------------- MeanVarianceNormalization */

/* The reduced-axes mask from 'axes' (default [0, 2, 3]). */
static int mvn_axes(const struct ops_call *call, int rank, int *mask)
{
        int64_t axes[OPS_MAX_DIMS] = { 0, 2, 3 };
        int n = nn_attr_ints(call, "axes", axes, OPS_MAX_DIMS), i;

        if (n == -2)
                return -EINVAL;
        if (n == -1)
                n = 3;
        memset(mask, 0, (size_t)rank * sizeof(*mask));
        for (i = 0; i < n; i++) {
                int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];

                if (a < 0 || a >= rank || mask[a])
                        return -EINVAL;
                mask[a] = 1;
        }
        return 0;
}

static int mvn_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int mask[OPS_MAX_DIMS], rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (mvn_axes(call, x->ndim, mask))
                return ops_fail(err, errlen, -EINVAL,
                                "MeanVarianceNormalization: axes do not fit rank %d", x->ndim);
        nn_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

/* Statistics per kept index: each element's kept index is walked with an odometer over the
 * dims, the reduced dims contributing nothing to it. */
static int mvn_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t total = ops_tensor_numel(x), kst[OPS_MAX_DIMS], idx[OPS_MAX_DIMS] = { 0 };
        int64_t kept = 1, count = 1, i, k;
        int mask[OPS_MAX_DIMS], d, pass;
        struct nn_f32 xv, y;
        double *st;

        mvn_axes(call, x->ndim, mask);
        for (d = x->ndim - 1; d >= 0; d--) {
                kst[d] = mask[d] ? 0 : kept;
                if (mask[d])
                        count *= x->dims[d];
                else
                        kept *= x->dims[d];
        }
        if (!total)
                return 0;
        st = ops_buf_alloc0(ops_bytes((size_t)(2 * kept), sizeof(double)), NULL, 0);
        if (!st || nn_f32_in(x, &xv)) {
                ops_buf_free(st);
                return ops_fail(err, errlen, -ENOMEM, "MeanVarianceNormalization: out of memory");
        }
        if (nn_f32_out(&call->out[0], &y)) {
                ops_buf_free(st);
                nn_f32_done(&xv);
                return ops_fail(err, errlen, -ENOMEM, "MeanVarianceNormalization: out of memory");
        }
        /* pass 0: sums and sums of squares; pass 1: normalise */
        for (pass = 0; pass < 2; pass++) {
                k = 0;
                memset(idx, 0, sizeof(idx));
                if (pass == 1)
                        for (i = 0; i < kept; i++) {
                                double mean = st[2 * i] / (double)count;
                                double var = st[2 * i + 1] / (double)count - mean * mean;

                                st[2 * i] = mean;
                                st[2 * i + 1] = 1.0 / (sqrt(var > 0 ? var : 0) + 1e-9);
                        }
                for (i = 0; i < total; i++) {
                        if (pass == 0) {
                                st[2 * k] += xv.p[i];
                                st[2 * k + 1] += (double)xv.p[i] * xv.p[i];
                        } else {
                                y.p[i] = (float)((xv.p[i] - st[2 * k]) * st[2 * k + 1]);
                        }
                        for (d = x->ndim - 1; d >= 0; d--) {
                                k += kst[d];
                                if (++idx[d] < x->dims[d])
                                        break;
                                k -= kst[d] * x->dims[d];
                                idx[d] = 0;
                        }
                }
        }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&y);
        nn_f32_done(&xv);
        ops_buf_free(st);
        return 0;
}

static void mvn_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        nn_cost_simple(call, 6, ret_flops, ret_bytes);
}

const struct ops_def ops_mvn_def = {
        .name = "MeanVarianceNormalization", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = mvn_run, .cost = mvn_cost, .infer = mvn_infer,
        .since_version = 9,
};

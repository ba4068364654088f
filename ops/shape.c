/* Shape operators whose result is the input's bytes unchanged or a tensor made from
 * nothing but shapes and attributes: Reshape (allowzero), Flatten, Squeeze, Unsqueeze,
 * Identity, Dropout (inference is the identity with an all-true mask; training mode drops
 * with a seeded generator), Shape (start/end), Size, Constant, ConstantOfShape, Range and
 * EyeLike.
 *
 * Reshape, Squeeze and Unsqueeze take their axes or shape from an attribute before opset 13
 * (Reshape: 5) and from an input after; an output shape that depends on input values can
 * only be inferred where those values are readable (in a graph), so a wire launch of such
 * a call fails its check with a message saying so. The copies are one memmove, skipped
 * when the output is the input. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "shape-common.h"

/* Output 0 gets input 0's bytes. */
static void shp_copy_in0(const struct ops_call *call)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t n = ops_tensor_numel(x);

        if (n > 0 && call->out[0].data && call->out[0].data != x->data)
                memmove(call->out[0].data, x->data, (size_t)n * proto_dtype_size(x->dtype));
}

static int copy_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        shp_copy_in0(call);
        return 0;
}

static void copy_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        shp_cost(call, 0, ret_flops, ret_bytes);
}

static void small_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                       uint64_t *ret_bytes)
{
        shp_cost(call, 1, ret_flops, ret_bytes);
}

/* ---------------------------------------------------------------- Reshape */

static const char *const reshape_attrs[] = { "allowzero", NULL };
static const char *const reshape1_attrs[] = { "shape", "consumed_inputs", NULL };

static int reshape_dims(const struct ops_def *def, const struct ops_tensor *x,
                        const int64_t *shape, int n, int allowzero, int64_t *dims, char *err,
                        size_t errlen)
{
        char b[OPS_SHAPE_STR_MAX];
        int64_t known = 1, total = ops_tensor_numel(x);
        int i, neg = -1;

        for (i = 0; i < n; i++) {
                int64_t v = shape[i];

                if (v == -1) {
                        if (neg >= 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: more than one -1 in the shape", def->name);
                        neg = i;
                        dims[i] = 1;
                        continue;
                }
                if (v < -1)
                        return ops_fail(err, errlen, -EINVAL, "%s: invalid dimension %lld",
                                        def->name, (long long)v);
                if (v == 0 && !allowzero) {
                        if (i >= x->ndim)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: dimension %d is 0 (copy the input's) but "
                                                "the input has rank %d",
                                                def->name, i, x->ndim);
                        v = x->dims[i];
                }
                dims[i] = v;
                if (__builtin_mul_overflow(known, v, &known))
                        return ops_fail(err, errlen, -EINVAL, "%s: shape too large", def->name);
        }
        if (neg >= 0) {
                if (known == 0 || total % known)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: cannot reshape %s to the requested shape with -1",
                                        def->name, ops_shape_str(x, b, sizeof(b)));
                dims[neg] = total / known;
        } else if (known != total) {
                return ops_fail(err, errlen, -EINVAL,
                                "%s: cannot reshape %s (%lld elements) to %lld elements",
                                def->name, ops_shape_str(x, b, sizeof(b)), (long long)total,
                                (long long)known);
        }
        return 0;
}

static int reshape_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                             size_t errlen)
{
        int64_t shape[OPS_MAX_DIMS + 1], dims[OPS_MAX_DIMS], allowzero = 0;
        int n, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        if (def->max_inputs == 1)
                rc = shp_attr_ints(def, call, "shape", shape, OPS_MAX_DIMS + 1, &n, err, errlen);
        else
                rc = shp_input_ints(def, call, 1, "shape", shape, OPS_MAX_DIMS + 1, &n, err,
                                    errlen);
        if (!rc && def->max_inputs > 1)
                rc = shp_attr_int(def, call, "allowzero", 0, &allowzero, err, errlen);
        if (rc)
                return rc;
        if (n < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: attribute 'shape' is required",
                                def->name);
        if (n > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "%s: shape of rank %d, at most %d",
                                def->name, n, OPS_MAX_DIMS);
        rc = reshape_dims(def, &call->in[0], shape, n, allowzero != 0, dims, err, errlen);
        if (rc)
                return rc;
        shp_set_out(call, 0, call->in[0].dtype, n, dims);
        return 0;
}

const struct ops_def ops_reshape_def = {
        .name = "Reshape", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost, .infer = reshape_infer_def,
        .since_version = 5, .attrs = reshape_attrs,
};

const struct ops_def ops_reshape1_def = {
        .name = "Reshape", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost, .infer = reshape_infer_def,
        .since_version = 1, .attrs = reshape1_attrs,
};

/* ---------------------------------------------------------------- Flatten */

static const char *const flatten_attrs[] = { "axis", NULL };

static int flatten_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis, dims[2] = { 1, 1 };
        int d, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "axis", 1, &axis, err, errlen);
        if (rc)
                return rc;
        if (axis < -x->ndim || axis > x->ndim)
                return ops_fail(err, errlen, -EINVAL, "Flatten: axis %lld out of range for rank %d",
                                (long long)axis, x->ndim);
        if (axis < 0)
                axis += x->ndim;
        for (d = 0; d < x->ndim; d++)
                dims[d >= axis] *= x->dims[d];
        shp_set_out(call, 0, x->dtype, 2, dims);
        return 0;
}

const struct ops_def ops_flatten_def = {
        .name = "Flatten", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost, .infer = flatten_infer,
        .since_version = 1, .attrs = flatten_attrs,
};

/* ---------------------------------------------------------------- Squeeze, Unsqueeze */

static const char *const axes_attrs[] = { "axes", NULL };

/* The axes from input 1 (opset 13) or the attribute; *ret_n -1 when none given. */
static int squeeze_axes(const struct ops_def *def, const struct ops_call *call, int64_t *axes,
                        int *ret_n, char *err, size_t errlen)
{
        *ret_n = -1;
        if (def->since_version >= 13) {
                if (ops_attr_find(call, "axes"))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: axes are an input from opset 13, not an attribute",
                                        def->name);
                if (!shp_has_in(call, 1))
                        return 0;
                return shp_input_ints(def, call, 1, "axes", axes, OPS_MAX_DIMS, ret_n, err,
                                      errlen);
        }
        return shp_attr_ints(def, call, "axes", axes, OPS_MAX_DIMS, ret_n, err, errlen);
}

static int squeeze_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                             size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axes[OPS_MAX_DIMS], dims[OPS_MAX_DIMS];
        uint32_t mask = 0;
        int n, d, k = 0, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = squeeze_axes(def, call, axes, &n, err, errlen);
        if (rc)
                return rc;
        if (n > 0) {
                rc = shp_axes_mask(def, axes, n, x->ndim, &mask, err, errlen);
                if (rc)
                        return rc;
        }
        for (d = 0; d < x->ndim; d++) {
                if (n <= 0 ? x->dims[d] == 1 : (mask >> d) & 1) {
                        if (x->dims[d] != 1)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: axis %d has extent %lld, not 1", def->name,
                                                d, (long long)x->dims[d]);
                        continue;
                }
                dims[k++] = x->dims[d];
        }
        shp_set_out(call, 0, x->dtype, k, dims);
        return 0;
}

static int unsqueeze_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                               size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axes[OPS_MAX_DIMS], dims[OPS_MAX_DIMS];
        uint32_t mask;
        int n, d, k = 0, rank, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = squeeze_axes(def, call, axes, &n, err, errlen);
        if (rc)
                return rc;
        if (n < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: axes are required", def->name);
        rank = x->ndim + n;
        if (rank > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "%s: result of rank %d, at most %d",
                                def->name, rank, OPS_MAX_DIMS);
        rc = shp_axes_mask(def, axes, n, rank, &mask, err, errlen);
        if (rc)
                return rc;
        for (d = 0; d < rank; d++)
                dims[d] = (mask >> d) & 1 ? 1 : x->dims[k++];
        shp_set_out(call, 0, x->dtype, rank, dims);
        return 0;
}

const struct ops_def ops_squeeze_def = {
        .name = "Squeeze", .min_inputs = 1, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost, .infer = squeeze_infer_def,
        .since_version = 13, .attrs = NULL,
};

const struct ops_def ops_squeeze1_def = {
        .name = "Squeeze", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost, .infer = squeeze_infer_def,
        .since_version = 1, .attrs = axes_attrs,
};

const struct ops_def ops_unsqueeze_def = {
        .name = "Unsqueeze", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost,
        .infer = unsqueeze_infer_def, .since_version = 13, .attrs = NULL,
};

const struct ops_def ops_unsqueeze1_def = {
        .name = "Unsqueeze", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost,
        .infer = unsqueeze_infer_def, .since_version = 1, .attrs = axes_attrs,
};

/* ---------------------------------------------------------------- Identity */

static int identity_infer(const struct ops_def *def, struct ops_call *call, char *err,
                          size_t errlen)
{
        int rc = shp_infer_begin(def, call, err, errlen);

        if (rc)
                return rc;
        shp_set_out(call, 0, call->in[0].dtype, call->in[0].ndim, call->in[0].dims);
        return 0;
}

const struct ops_def ops_identity_def = {
        .name = "Identity", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = copy_run, .cost = copy_cost, .infer = identity_infer,
        .since_version = 1, .attrs = NULL, .flags = OPS_FLAG_VALUES,
};

/* ---------------------------------------------------------------- Dropout */

static const char *const dropout_attrs[] = { "seed", "ratio", "is_test", "consumed_inputs",
                                             NULL };

/* The mask is bool from opset 10 (and on the wire), the data's dtype before. */
static int dropout_mask_dtype(const struct ops_call *call)
{
        return call->opset > 0 && call->opset < 10 ? call->in[0].dtype : PROTO_DTYPE_BOOL;
}

static int dropout_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        double ratio;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_FLOATS, err, errlen);
        if (!rc && shp_has_in(call, 1))
                rc = shp_want_dtype(def, call, 1, SHP_FLOATS, err, errlen);
        if (!rc && shp_has_in(call, 2))
                rc = shp_want_dtype(def, call, 2, SHP_T(PROTO_DTYPE_BOOL), err, errlen);
        if (!rc)
                rc = shp_attr_float(def, call, "ratio", 0.5, &ratio, err, errlen);
        if (rc)
                return rc;
        if (shp_has_in(call, 1) && ops_tensor_numel(&call->in[1]) != 1)
                return ops_fail(err, errlen, -EINVAL, "Dropout: input 1 (ratio) must hold one value");
        if (shp_has_in(call, 2) && ops_tensor_numel(&call->in[2]) != 1)
                return ops_fail(err, errlen, -EINVAL,
                                "Dropout: input 2 (training_mode) must hold one value");
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        shp_set_out(call, 1, dropout_mask_dtype(call), x->ndim, x->dims);
        return 0;
}

static int dropout_run(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t n = ops_tensor_numel(x), i, done, m;
        const struct ops_tensor *mask = call->nout > 1 ? &call->out[1] : NULL;
        double ratio = ops_attr_float(call, "ratio", 0.5), buf[OPS_CHUNK], one = 1, scale;
        uint8_t keep[OPS_CHUNK];
        uint64_t s;
        int train = 0;

        if (shp_has_in(call, 1))
                ratio = shp_get_f64(&call->in[1], 0);
        if (shp_has_in(call, 2))
                train = shp_nonzero(call->in[2].dtype, call->in[2].data, 0);
        if (train && (ratio < 0 || ratio >= 1))
                return ops_fail(err, errlen, -EINVAL, "Dropout: ratio %g out of [0, 1)", ratio);
        if (!train || ratio == 0) {
                shp_copy_in0(call);
                if (mask && mask->data) {
                        char v[8];

                        shp_store_f64(mask->dtype, v, 0, 1, &one);
                        shp_fill(mask->data, n, v, proto_dtype_size(mask->dtype));
                }
                return 0;
        }
        /* Training: keep each element with probability 1 - ratio and scale it up, from a
         * generator seeded by the attribute so that runs are reproducible. */
        s = (uint64_t)ops_attr_int(call, "seed", 0) * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL;
        scale = 1 / (1 - ratio);
        for (done = 0; done < n; done += m) {
                m = n - done < OPS_CHUNK ? n - done : OPS_CHUNK;
                shp_load_f64(x->dtype, x->data, done, m, buf);
                for (i = 0; i < m; i++) {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        keep[i] = (double)(s >> 11) * 0x1p-53 >= ratio;
                        buf[i] = keep[i] ? buf[i] * scale : 0;
                }
                shp_store_f64(x->dtype, call->out[0].data, done, m, buf);
                if (mask && mask->data) {
                        for (i = 0; i < m; i++)
                                buf[i] = keep[i];
                        shp_store_f64(mask->dtype, mask->data, done, m, buf);
                }
        }
        return 0;
}

const struct ops_def ops_dropout_def = {
        .name = "Dropout", .min_inputs = 1, .max_inputs = 3, .outputs = 2,
        .engine = OPS_ENGINE_VECTOR, .run = dropout_run, .cost = copy_cost, .infer = dropout_infer,
        .since_version = 1, .attrs = dropout_attrs,
};

/* ---------------------------------------------------------------- Shape, Size */

static const char *const shape_attrs[] = { "start", "end", NULL };

/* [start, end) of the dims Shape reports, clamped to the rank. */
static int shape_range(const struct ops_call *call, int64_t *ret_start, int64_t *ret_end,
                       char *err, size_t errlen)
{
        int64_t r = call->in[0].ndim, s, e;
        int rc;

        rc = shp_attr_int(&ops_shape_def, call, "start", 0, &s, err, errlen);
        if (!rc)
                rc = shp_attr_int(&ops_shape_def, call, "end", r, &e, err, errlen);
        if (rc)
                return rc;
        if (s < 0)
                s += r;
        if (e < 0)
                e += r;
        *ret_start = s < 0 ? 0 : s > r ? r : s;
        *ret_end = e < 0 ? 0 : e > r ? r : e;
        if (*ret_end < *ret_start)
                *ret_end = *ret_start;
        return 0;
}

static int shape_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t s, e, n;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shape_range(call, &s, &e, err, errlen);
        if (rc)
                return rc;
        n = e - s;
        shp_set_out(call, 0, PROTO_DTYPE_INT64, 1, &n);
        return 0;
}

static int shape_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        int64_t s, e;
        int rc;

        rc = shape_range(call, &s, &e, err, errlen);
        if (rc)
                return rc;
        if (e > s)
                memcpy(call->out[0].data, call->in[0].dims + s, (size_t)(e - s) * sizeof(int64_t));
        return 0;
}

static int size_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int rc = shp_infer_begin(def, call, err, errlen);

        if (rc)
                return rc;
        shp_set_out(call, 0, PROTO_DTYPE_INT64, 0, NULL);
        return 0;
}

static int size_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        *(int64_t *)call->out[0].data = ops_tensor_numel(&call->in[0]);
        return 0;
}

/* Neither reads the input's data: only the output is moved. */
static void meta_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        int64_t n = ops_tensor_numel(&call->out[0]);

        *ret_flops = 0;
        *ret_bytes = n > 0 ? (uint64_t)n * 8 : 0;
}

const struct ops_def ops_shape_def = {
        .name = "Shape", .min_inputs = 1, .max_inputs = 1, .outputs = 1, .engine = OPS_ENGINE_AICPU,
        .run = shape_run, .cost = meta_cost, .infer = shape_infer, .since_version = 1,
        .attrs = shape_attrs,
};

const struct ops_def ops_size_def = {
        .name = "Size", .min_inputs = 1, .max_inputs = 1, .outputs = 1, .engine = OPS_ENGINE_AICPU,
        .run = size_run, .cost = meta_cost, .infer = size_infer, .since_version = 1, .attrs = NULL,
};

/* ---------------------------------------------------------------- Constant */

static const char *const constant_attrs[] = { "value", "value_float", "value_floats",
                                              "value_int", "value_ints", "sparse_value",
                                              "value_string", "value_strings", NULL };

/* The one value attribute a Constant must have. */
static int constant_attr(const struct ops_call *call, const struct ops_attr **ret, char *err,
                         size_t errlen)
{
        const struct ops_attr *a = NULL;
        int i;

        for (i = 0; constant_attrs[i]; i++) {
                const struct ops_attr *f = ops_attr_find(call, constant_attrs[i]);

                if (!f)
                        continue;
                if (a)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Constant: exactly one value attribute needed, got '%s' "
                                        "and '%s'",
                                        a->name, f->name);
                a = f;
        }
        if (!a)
                return ops_fail(err, errlen, -EINVAL, "Constant: no value attribute");
        if (strcmp(a->name, "value") == 0 && a->type == OPS_ATTR_TENSOR && a->t &&
            proto_dtype_size(a->t->dtype) && a->t->ndim >= 0 && a->t->ndim <= OPS_MAX_DIMS &&
            ops_tensor_numel(a->t) >= 0 && (a->t->data || !ops_tensor_numel(a->t))) {
                *ret = a;
                return 0;
        }
        if ((strcmp(a->name, "value_float") == 0 && a->type == OPS_ATTR_FLOAT) ||
            (strcmp(a->name, "value_int") == 0 && a->type == OPS_ATTR_INT) ||
            (strcmp(a->name, "value_floats") == 0 && a->type == OPS_ATTR_FLOATS) ||
            (strcmp(a->name, "value_ints") == 0 && a->type == OPS_ATTR_INTS)) {
                if ((a->type == OPS_ATTR_FLOATS || a->type == OPS_ATTR_INTS) &&
                    (a->n < 0 || (a->n && !a->floats && !a->ints)))
                        return ops_fail(err, errlen, -EINVAL, "Constant: invalid '%s'", a->name);
                *ret = a;
                return 0;
        }
        return ops_fail(err, errlen, -EINVAL, "Constant: attribute '%s' of this kind is not "
                                              "supported", a->name);
}

static int constant_infer(const struct ops_def *def, struct ops_call *call, char *err,
                          size_t errlen)
{
        const struct ops_attr *a;
        int64_t n;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = constant_attr(call, &a, err, errlen);
        if (rc)
                return rc;
        n = a->n;
        switch (a->type) {
        case OPS_ATTR_TENSOR: shp_set_out(call, 0, a->t->dtype, a->t->ndim, a->t->dims); break;
        case OPS_ATTR_FLOAT: shp_set_out(call, 0, PROTO_DTYPE_FLOAT32, 0, NULL); break;
        case OPS_ATTR_INT: shp_set_out(call, 0, PROTO_DTYPE_INT64, 0, NULL); break;
        case OPS_ATTR_FLOATS: shp_set_out(call, 0, PROTO_DTYPE_FLOAT32, 1, &n); break;
        default: shp_set_out(call, 0, PROTO_DTYPE_INT64, 1, &n); break;
        }
        return 0;
}

static int constant_run(const struct ops_def *def, const struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_attr *a;
        void *y = call->out[0].data;
        float f;
        int rc;

        rc = constant_attr(call, &a, err, errlen);
        if (rc)
                return rc;
        switch (a->type) {
        case OPS_ATTR_TENSOR:
                if (ops_tensor_numel(a->t))
                        memcpy(y, a->t->data, (size_t)ops_tensor_numel(a->t) *
                                                      proto_dtype_size(a->t->dtype));
                break;
        case OPS_ATTR_FLOAT:
                f = (float)a->f;
                memcpy(y, &f, sizeof(f));
                break;
        case OPS_ATTR_INT: memcpy(y, &a->i, sizeof(a->i)); break;
        case OPS_ATTR_FLOATS:
                if (a->n)
                        memcpy(y, a->floats, (size_t)a->n * sizeof(float));
                break;
        default:
                if (a->n)
                        memcpy(y, a->ints, (size_t)a->n * sizeof(int64_t));
                break;
        }
        return 0;
}

const struct ops_def ops_constant_def = {
        .name = "Constant", .min_inputs = 0, .max_inputs = 0, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = constant_run, .cost = copy_cost, .infer = constant_infer,
        .since_version = 1, .attrs = constant_attrs,
};

/* ---------------------------------------------------------------- ConstantOfShape */

static const char *const cos_attrs[] = { "value", NULL };

/* The fill value as dtype and bytes: the one-element "value" tensor (a float or int
 * attribute gives float32 or int64, as wire launches can send), float32 0 by default. */
static int cos_value(const struct ops_call *call, int *ret_dtype, unsigned char *ret_bytes,
                     char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, "value");
        float f = 0;

        memset(ret_bytes, 0, 8);
        *ret_dtype = PROTO_DTYPE_FLOAT32;
        if (!a)
                return 0;
        switch (a->type) {
        case OPS_ATTR_TENSOR:
                if (!a->t || ops_tensor_numel(a->t) != 1 || !a->t->data ||
                    !proto_dtype_size(a->t->dtype) || proto_dtype_size(a->t->dtype) > 8)
                        return ops_fail(err, errlen, -EINVAL,
                                        "ConstantOfShape: 'value' must be a one-element tensor");
                *ret_dtype = a->t->dtype;
                memcpy(ret_bytes, a->t->data, proto_dtype_size(a->t->dtype));
                return 0;
        case OPS_ATTR_FLOAT:
                f = (float)a->f;
                memcpy(ret_bytes, &f, sizeof(f));
                return 0;
        case OPS_ATTR_INT:
                *ret_dtype = PROTO_DTYPE_INT64;
                memcpy(ret_bytes, &a->i, sizeof(a->i));
                return 0;
        default:
                return ops_fail(err, errlen, -EINVAL,
                                "ConstantOfShape: 'value' must be a one-element tensor");
        }
}

static int cos_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t dims[OPS_MAX_DIMS + 1], total = 1;
        unsigned char v[8];
        int n, d, dtype, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = cos_value(call, &dtype, v, err, errlen);
        if (!rc)
                rc = shp_input_ints(def, call, 0, "shape", dims, OPS_MAX_DIMS + 1, &n, err,
                                    errlen);
        if (rc)
                return rc;
        if (n > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "ConstantOfShape: rank %d, at most %d", n,
                                OPS_MAX_DIMS);
        for (d = 0; d < n; d++)
                if (dims[d] < 0 || __builtin_mul_overflow(total, dims[d], &total))
                        return ops_fail(err, errlen, -EINVAL,
                                        "ConstantOfShape: invalid dimension %lld",
                                        (long long)dims[d]);
        shp_set_out(call, 0, dtype, n, dims);
        return 0;
}

static int cos_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        unsigned char v[8];
        int dtype, rc;

        rc = cos_value(call, &dtype, v, err, errlen);
        if (rc)
                return rc;
        shp_fill(call->out[0].data, ops_tensor_numel(&call->out[0]), v, proto_dtype_size(dtype));
        return 0;
}

const struct ops_def ops_constant_of_shape_def = {
        .name = "ConstantOfShape", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = cos_run, .cost = copy_cost, .infer = cos_infer,
        .since_version = 9, .attrs = cos_attrs,
};

/* ---------------------------------------------------------------- Range */

/* Largest Range output accepted (elements). */
#define RANGE_MAX ((int64_t)1 << 40)

static int range_count(const struct ops_call *call, int64_t *ret_n, char *err, size_t errlen)
{
        int dtype = call->in[0].dtype;
        int64_t n;

        if (shp_num_class(dtype) == SHP_NUM_FLOAT) {
                double s = shp_get_f64(&call->in[0], 0), l = shp_get_f64(&call->in[1], 0);
                double d = shp_get_f64(&call->in[2], 0), c;

                if (d == 0 || !isfinite(s) || !isfinite(l) || !isfinite(d))
                        return ops_fail(err, errlen, -EINVAL,
                                        "Range: start %g, limit %g, delta %g give no count", s, l,
                                        d);
                c = ceil((l - s) / d);
                if (c > (double)RANGE_MAX)
                        return ops_fail(err, errlen, -EINVAL, "Range: %g elements is too many",
                                        c);
                n = c > 0 ? (int64_t)c : 0;
        } else {
                __int128 s = shp_get_i64(&call->in[0], 0), l = shp_get_i64(&call->in[1], 0);
                __int128 d = shp_get_i64(&call->in[2], 0), q, diff;

                if (shp_num_class(dtype) == SHP_NUM_UNSIGNED) {
                        s = (uint64_t)s;
                        l = (uint64_t)l;
                        d = (uint64_t)d;
                }
                if (d == 0)
                        return ops_fail(err, errlen, -EINVAL, "Range: delta is 0");
                diff = l - s;
                q = diff / d;
                if (diff % d != 0 && (diff > 0) == (d > 0))
                        q++;
                if (q > RANGE_MAX)
                        return ops_fail(err, errlen, -EINVAL, "Range: too many elements");
                n = q > 0 ? (int64_t)q : 0;
        }
        *ret_n = n;
        return 0;
}

static int range_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t n;
        int i, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        for (i = 0; !rc && i < 3; i++) {
                rc = shp_want_dtype(def, call, i, SHP_NUMERIC, err, errlen);
                if (!rc && call->in[i].dtype != call->in[0].dtype)
                        rc = ops_fail(err, errlen, -EINVAL,
                                      "Range: input %d dtype differs from input 0's", i);
                if (!rc && ops_tensor_numel(&call->in[i]) != 1)
                        rc = ops_fail(err, errlen, -EINVAL, "Range: input %d must be a scalar",
                                      i);
                if (!rc)
                        rc = shp_need_data(def, call, i, i == 0 ? "start" : i == 1 ? "limit" :
                                                                                    "delta",
                                           err, errlen);
        }
        if (!rc)
                rc = range_count(call, &n, err, errlen);
        if (rc)
                return rc;
        shp_set_out(call, 0, call->in[0].dtype, 1, &n);
        return 0;
}

static int range_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        int dtype = call->in[0].dtype;
        int64_t n, i, done, m;
        int rc;

        rc = range_count(call, &n, err, errlen);
        if (rc)
                return rc;
        if (shp_num_class(dtype) == SHP_NUM_FLOAT) {
                double s = shp_get_f64(&call->in[0], 0), d = shp_get_f64(&call->in[2], 0);
                double buf[OPS_CHUNK];

                for (done = 0; done < n; done += m) {
                        m = n - done < OPS_CHUNK ? n - done : OPS_CHUNK;
                        if (done % OPS_POLL_ELEMS == 0 && done && ops_poll("Range", err, errlen))
                                return -ECANCELED;
                        for (i = 0; i < m; i++)
                                buf[i] = s + (double)(done + i) * d;
                        shp_store_f64(dtype, call->out[0].data, done, m, buf);
                }
        } else {
                uint64_t s = (uint64_t)shp_get_i64(&call->in[0], 0);
                uint64_t d = (uint64_t)shp_get_i64(&call->in[2], 0);
                int64_t buf[OPS_CHUNK];

                for (done = 0; done < n; done += m) {
                        m = n - done < OPS_CHUNK ? n - done : OPS_CHUNK;
                        if (done % OPS_POLL_ELEMS == 0 && done && ops_poll("Range", err, errlen))
                                return -ECANCELED;
                        for (i = 0; i < m; i++)
                                buf[i] = (int64_t)(s + (uint64_t)(done + i) * d);
                        shp_store_i64(dtype, call->out[0].data, done, m, buf);
                }
        }
        return 0;
}

const struct ops_def ops_range_def = {
        .name = "Range", .min_inputs = 3, .max_inputs = 3, .outputs = 1, .engine = OPS_ENGINE_AICPU,
        .run = range_run, .cost = small_cost, .infer = range_infer, .since_version = 11,
        .attrs = NULL,
};

/* ---------------------------------------------------------------- EyeLike */

static const char *const eye_attrs[] = { "dtype", "k", NULL };

static int eye_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t dtype, k;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_ALL, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "dtype", x->dtype, &dtype, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "k", 0, &k, err, errlen);
        if (rc)
                return rc;
        if (dtype <= 0 || dtype >= 32 || !(SHP_ALL & SHP_T(dtype)))
                return ops_fail(err, errlen, -EINVAL, "EyeLike: unsupported dtype %lld",
                                (long long)dtype);
        if (x->ndim != 2)
                return ops_fail(err, errlen, -EINVAL, "EyeLike: input 0 has rank %d, 2 needed",
                                x->ndim);
        shp_set_out(call, 0, (int)dtype, 2, x->dims);
        return 0;
}

static int eye_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *y = &call->out[0];
        int64_t rows = y->dims[0], cols = y->dims[1], k = ops_attr_int(call, "k", 0), i, j;
        size_t es = proto_dtype_size(y->dtype);
        char one[8];
        double v = 1;

        if (!rows || !cols)
                return 0;
        memset(y->data, 0, (size_t)(rows * cols) * es);
        if (k >= cols || k <= -rows)
                return 0;
        shp_store_f64(y->dtype, one, 0, 1, &v);
        /* Rows that the diagonal crosses: 0 <= i + k < cols. */
        for (i = k < 0 ? -k : 0; i < rows; i++) {
                j = i + k;
                if (j >= cols)
                        break;
                memcpy((char *)y->data + (i * cols + j) * (int64_t)es, one, es);
        }
        return 0;
}

const struct ops_def ops_eye_like_def = {
        .name = "EyeLike", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = eye_run, .cost = copy_cost, .infer = eye_infer,
        .since_version = 9, .attrs = eye_attrs,
};

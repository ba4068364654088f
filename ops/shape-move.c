/* Data movement on the vector unit, for elements of any dtype (bytes moved, never
 * converted): Transpose, Concat, Split, Slice, Expand, Tile, Pad (constant / edge / reflect
 * / wrap), DepthToSpace (DCR / CRD), SpaceToDepth, Trilu and ReverseSequence.
 *
 * Nearly all of them are one strided N-D copy (shp_copy_strided): a transpose permutes the
 * source strides, a slice offsets and scales them, Expand gives broadcast dims stride 0,
 * Tile views every axis as (repeat, extent) with the repeat's source stride 0, the space /
 * depth rearrangements are 6-D transposes of reshaped views, and Concat / Split copy blocks
 * between row ranges. Edge, reflect and wrap padding map each output index to an input
 * index per axis (shp_copy_mapped). Shapes that depend on input values (Slice, Split,
 * Expand, Tile, Pad) are inferred where those values are readable. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shape-common.h"

static void move_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        shp_cost(call, 0, ret_flops, ret_bytes);
}

static size_t esize(const struct ops_tensor *t)
{
        return proto_dtype_size(t->dtype);
}

/* ---------------------------------------------------------------- Transpose */

static const char *const transpose_attrs[] = { "perm", NULL };

static int transpose_perm(const struct ops_call *call, int *perm, char *err, size_t errlen)
{
        const struct ops_def *def = &ops_transpose_def;
        int64_t p[OPS_MAX_DIMS];
        int r = call->in[0].ndim, n, d, rc;
        uint32_t seen = 0;

        rc = shp_attr_ints(def, call, "perm", p, OPS_MAX_DIMS, &n, err, errlen);
        if (rc)
                return rc;
        if (n < 0) {
                for (d = 0; d < r; d++)
                        perm[d] = r - 1 - d;
                return 0;
        }
        if (n != r)
                return ops_fail(err, errlen, -EINVAL,
                                "Transpose: 'perm' has %d entries for rank %d", n, r);
        for (d = 0; d < r; d++) {
                if (p[d] < 0 || p[d] >= r || (seen & (1u << p[d])))
                        return ops_fail(err, errlen, -EINVAL,
                                        "Transpose: 'perm' is not a permutation of 0..%d", r - 1);
                seen |= 1u << p[d];
                perm[d] = (int)p[d];
        }
        return 0;
}

static int transpose_infer(const struct ops_def *def, struct ops_call *call, char *err,
                           size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t dims[OPS_MAX_DIMS];
        int perm[OPS_MAX_DIMS], d, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = transpose_perm(call, perm, err, errlen);
        if (rc)
                return rc;
        for (d = 0; d < x->ndim; d++)
                dims[d] = x->dims[perm[d]];
        shp_set_out(call, 0, x->dtype, x->ndim, dims);
        return 0;
}

static int transpose_run(const struct ops_def *def, const struct ops_call *call, char *err,
                         size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t xs[OPS_MAX_DIMS], ss[OPS_MAX_DIMS], ys[OPS_MAX_DIMS];
        int perm[OPS_MAX_DIMS], d, rc;

        rc = transpose_perm(call, perm, err, errlen);
        if (rc)
                return rc;
        shp_strides(x->ndim, x->dims, xs);
        shp_strides(y->ndim, y->dims, ys);
        for (d = 0; d < x->ndim; d++)
                ss[d] = xs[perm[d]];
        shp_copy_strided(esize(x), y->ndim, y->dims, y->data, ys, x->data, ss);
        return 0;
}

const struct ops_def ops_transpose_def = {
        .name = "Transpose", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = transpose_run, .cost = move_cost,
        .infer = transpose_infer, .since_version = 1, .attrs = transpose_attrs,
};

/* ---------------------------------------------------------------- Concat */

static const char *const concat_attrs[] = { "axis", NULL };

static int concat_axis(const struct ops_call *call, int *ret, char *err, size_t errlen)
{
        int64_t axis;

        /* Opsets before 4 default the axis to 1; it is required from then on. */
        if (!ops_attr_find(call, "axis") && !(call->opset > 0 && call->opset < 4))
                return ops_fail(err, errlen, -EINVAL, "Concat: attribute 'axis' is required");
        if (shp_attr_int(&ops_concat_def, call, "axis", 1, &axis, err, errlen))
                return -EINVAL;
        return shp_axis(&ops_concat_def, axis, call->in[0].ndim, ret, err, errlen);
}

static int concat_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        char a[OPS_SHAPE_STR_MAX], b[OPS_SHAPE_STR_MAX];
        int64_t dims[OPS_MAX_DIMS];
        int i, d, ax, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "Concat: input 0 is a scalar");
        rc = concat_axis(call, &ax, err, errlen);
        if (rc)
                return rc;
        memcpy(dims, x->dims, sizeof(dims));
        for (i = 1; i < call->nin; i++) {
                const struct ops_tensor *t = &call->in[i];

                if (t->dtype != x->dtype)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Concat: input %d dtype %s differs from input 0's %s", i,
                                        ops_dtype_str(t->dtype, a, sizeof(a)),
                                        ops_dtype_str(x->dtype, b, sizeof(b)));
                for (d = 0; d < x->ndim && t->ndim == x->ndim; d++)
                        if (d != ax && t->dims[d] != x->dims[d])
                                break;
                if (t->ndim != x->ndim || d < x->ndim)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Concat: input %d shape %s does not fit input 0's %s on "
                                        "axis %d",
                                        i, ops_shape_str(t, a, sizeof(a)),
                                        ops_shape_str(x, b, sizeof(b)), ax);
                if (__builtin_add_overflow(dims[ax], t->dims[ax], &dims[ax]))
                        return ops_fail(err, errlen, -EINVAL, "Concat: result too large");
        }
        shp_set_out(call, 0, x->dtype, x->ndim, dims);
        return 0;
}

static int concat_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *y = &call->out[0];
        int64_t outer, n, inner, at = 0, dims[2], ds[2], ss[2];
        int i, ax, rc;

        rc = concat_axis(call, &ax, err, errlen);
        if (rc)
                return rc;
        shp_split3(y, ax, &outer, &n, &inner);
        /* Each input is a block of rows [outer, its extent * inner] of the output. */
        for (i = 0; i < call->nin; i++) {
                const struct ops_tensor *t = &call->in[i];
                int64_t w = t->dims[ax] * inner;

                dims[0] = outer;
                dims[1] = w;
                ds[0] = n * inner;
                ds[1] = 1;
                ss[0] = w;
                ss[1] = 1;
                if (w)
                        shp_copy_strided(esize(y), 2, dims,
                                         (char *)y->data + at * (int64_t)esize(y), ds, t->data, ss);
                at += w;
        }
        return 0;
}

const struct ops_def ops_concat_def = {
        .name = "Concat", .min_inputs = 1, .max_inputs = OPS_MAX_INPUTS, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = concat_run, .cost = move_cost, .infer = concat_infer,
        .since_version = 1, .attrs = concat_attrs,
};

/* ---------------------------------------------------------------- Split */

static const char *const split_attrs[] = { "axis", "num_outputs", NULL };
static const char *const split13_attrs[] = { "axis", NULL };
static const char *const split2_attrs[] = { "axis", "split", NULL };

/* The extent of every output along the axis. */
static int split_sizes(const struct ops_def *def, const struct ops_call *call, int *ret_axis,
                       int64_t *sizes, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis, num = -1, total = 0, dim, chunk;
        int n = -1, i, rc;

        rc = shp_attr_int(def, call, "axis", 0, &axis, err, errlen);
        if (!rc)
                rc = shp_axis(def, axis, x->ndim, ret_axis, err, errlen);
        if (!rc && def->since_version >= 18)
                rc = shp_attr_int(def, call, "num_outputs", -1, &num, err, errlen);
        if (rc)
                return rc;
        if (shp_has_in(call, 1))
                rc = shp_input_ints(def, call, 1, "split", sizes, OPS_MAX_OUTPUTS, &n, err, errlen);
        else if (def->since_version < 13)
                rc = shp_attr_ints(def, call, "split", sizes, OPS_MAX_OUTPUTS, &n, err, errlen);
        if (rc)
                return rc;
        dim = x->dims[*ret_axis];
        if (n >= 0) {
                if (num >= 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Split: both 'split' and 'num_outputs' given");
                if (n != call->nout)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Split: %d split sizes for %d outputs", n, call->nout);
                for (i = 0; i < n; i++) {
                        if (sizes[i] < 0 || __builtin_add_overflow(total, sizes[i], &total))
                                return ops_fail(err, errlen, -EINVAL, "Split: invalid size %lld",
                                                (long long)sizes[i]);
                }
                if (total != dim)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Split: sizes add up to %lld, the axis has %lld",
                                        (long long)total, (long long)dim);
                return 0;
        }
        if (num >= 0) {
                /* num_outputs: equal chunks rounded up, the last one smaller. */
                if (num != call->nout)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Split: 'num_outputs' %lld but %d outputs", (long long)num,
                                        call->nout);
                chunk = (dim + num - 1) / num;
                for (i = 0; i < call->nout; i++) {
                        sizes[i] = dim - total < chunk ? dim - total : chunk;
                        total += sizes[i];
                }
                return 0;
        }
        if (dim % call->nout)
                return ops_fail(err, errlen, -EINVAL,
                                "Split: axis extent %lld does not divide into %d outputs",
                                (long long)dim, call->nout);
        for (i = 0; i < call->nout; i++)
                sizes[i] = dim / call->nout;
        return 0;
}

static int split_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                           size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t sizes[OPS_MAX_OUTPUTS], dims[OPS_MAX_DIMS];
        int ax, i, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "Split: input 0 is a scalar");
        rc = split_sizes(def, call, &ax, sizes, err, errlen);
        if (rc)
                return rc;
        memcpy(dims, x->dims, sizeof(dims));
        for (i = 0; i < call->nout; i++) {
                dims[ax] = sizes[i];
                shp_set_out(call, i, x->dtype, x->ndim, dims);
        }
        return 0;
}

static int split_run_def(const struct ops_def *def, const struct ops_call *call, char *err,
                         size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t sizes[OPS_MAX_OUTPUTS], outer, n, inner, at = 0, dims[2], ds[2], ss[2];
        int ax, i, rc;

        rc = split_sizes(def, call, &ax, sizes, err, errlen);
        if (rc)
                return rc;
        shp_split3(x, ax, &outer, &n, &inner);
        for (i = 0; i < call->nout; i++) {
                int64_t w = sizes[i] * inner;

                dims[0] = outer;
                dims[1] = w;
                ds[0] = w;
                ds[1] = 1;
                ss[0] = n * inner;
                ss[1] = 1;
                if (w && call->out[i].data)
                        shp_copy_strided(esize(x), 2, dims, call->out[i].data, ds,
                                         (const char *)x->data + at * (int64_t)esize(x), ss);
                at += w;
        }
        return 0;
}

const struct ops_def ops_split_def = {
        .name = "Split", .min_inputs = 1, .max_inputs = 2, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_VECTOR, .run = split_run_def, .cost = move_cost,
        .infer = split_infer_def, .since_version = 18, .attrs = split_attrs,
};

const struct ops_def ops_split13_def = {
        .name = "Split", .min_inputs = 1, .max_inputs = 2, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_VECTOR, .run = split_run_def, .cost = move_cost,
        .infer = split_infer_def, .since_version = 13, .attrs = split13_attrs,
};

const struct ops_def ops_split2_def = {
        .name = "Split", .min_inputs = 1, .max_inputs = 2, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_VECTOR, .run = split_run_def, .cost = move_cost,
        .infer = split_infer_def, .since_version = 1, .attrs = split2_attrs,
};

/* ---------------------------------------------------------------- Slice */

static const char *const slice_attrs[] = { NULL };
static const char *const slice1_attrs[] = { "starts", "ends", "axes", NULL };

/* Per axis: first index, step and extent of the result. */
static int slice_params(const struct ops_def *def, const struct ops_call *call, int64_t *start,
                        int64_t *step, int64_t *dims, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t starts[OPS_MAX_DIMS], ends[OPS_MAX_DIMS], axes[OPS_MAX_DIMS],
                steps[OPS_MAX_DIMS];
        int ns, ne, na = -1, nst = -1, i, rc, a;
        uint32_t seen = 0;

        if (def->max_inputs == 1) {
                rc = shp_attr_ints(def, call, "starts", starts, OPS_MAX_DIMS, &ns, err, errlen);
                if (!rc)
                        rc = shp_attr_ints(def, call, "ends", ends, OPS_MAX_DIMS, &ne, err, errlen);
                if (!rc)
                        rc = shp_attr_ints(def, call, "axes", axes, OPS_MAX_DIMS, &na, err,
                                           errlen);
                if (!rc && (ns < 0 || ne < 0))
                        rc = ops_fail(err, errlen, -EINVAL,
                                      "Slice: attributes 'starts' and 'ends' are required");
        } else {
                rc = shp_input_ints(def, call, 1, "starts", starts, OPS_MAX_DIMS, &ns, err,
                                    errlen);
                if (!rc)
                        rc = shp_input_ints(def, call, 2, "ends", ends, OPS_MAX_DIMS, &ne, err,
                                            errlen);
                if (!rc && shp_has_in(call, 3))
                        rc = shp_input_ints(def, call, 3, "axes", axes, OPS_MAX_DIMS, &na, err,
                                            errlen);
                if (!rc && shp_has_in(call, 4))
                        rc = shp_input_ints(def, call, 4, "steps", steps, OPS_MAX_DIMS, &nst, err,
                                            errlen);
        }
        if (rc)
                return rc;
        if (ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
                return ops_fail(err, errlen, -EINVAL,
                                "Slice: starts, ends, axes and steps differ in length");
        for (i = 0; i < x->ndim; i++) {
                start[i] = 0;
                step[i] = 1;
                dims[i] = x->dims[i];
        }
        for (i = 0; i < ns; i++) {
                int64_t s = starts[i], e = ends[i], st = nst >= 0 ? steps[i] : 1, dim, len;

                rc = shp_axis(def, na >= 0 ? axes[i] : i, x->ndim, &a, err, errlen);
                if (rc)
                        return rc;
                if (seen & (1u << a))
                        return ops_fail(err, errlen, -EINVAL, "Slice: axis %d given twice", a);
                seen |= 1u << a;
                if (st == 0)
                        return ops_fail(err, errlen, -EINVAL, "Slice: step 0 on axis %d", a);
                dim = x->dims[a];
                if (s < 0)
                        s += dim;
                if (e < 0)
                        e += dim;
                if (st > 0) {
                        s = s < 0 ? 0 : s > dim ? dim : s;
                        e = e < 0 ? 0 : e > dim ? dim : e;
                        len = e > s ? (e - s - 1) / st + 1 : 0;
                } else {
                        s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
                        e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
                        len = s > e ? (st == INT64_MIN ? 1 : (s - e - 1) / -st + 1) : 0;
                }
                start[a] = len ? s : 0;
                step[a] = st;
                dims[a] = len;
        }
        return 0;
}

static int slice_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                           size_t errlen)
{
        int64_t start[OPS_MAX_DIMS], step[OPS_MAX_DIMS], dims[OPS_MAX_DIMS];
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = slice_params(def, call, start, step, dims, err, errlen);
        if (rc)
                return rc;
        shp_set_out(call, 0, call->in[0].dtype, call->in[0].ndim, dims);
        return 0;
}

static int slice_run_def(const struct ops_def *def, const struct ops_call *call, char *err,
                         size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t start[OPS_MAX_DIMS], step[OPS_MAX_DIMS], dims[OPS_MAX_DIMS];
        int64_t xs[OPS_MAX_DIMS], ys[OPS_MAX_DIMS], off = 0;
        int d, rc;

        rc = slice_params(def, call, start, step, dims, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(y))
                return 0;
        shp_strides(x->ndim, x->dims, xs);
        shp_strides(y->ndim, y->dims, ys);
        for (d = 0; d < x->ndim; d++) {
                off += start[d] * xs[d];
                xs[d] *= step[d];
        }
        shp_copy_strided(esize(x), y->ndim, y->dims, y->data, ys,
                         (const char *)x->data + off * (int64_t)esize(x), xs);
        return 0;
}

const struct ops_def ops_slice_def = {
        .name = "Slice", .min_inputs = 3, .max_inputs = 5, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = slice_run_def, .cost = move_cost,
        .infer = slice_infer_def, .since_version = 10, .attrs = slice_attrs,
};

const struct ops_def ops_slice1_def = {
        .name = "Slice", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = slice_run_def, .cost = move_cost,
        .infer = slice_infer_def, .since_version = 1, .attrs = slice1_attrs,
};

/* ---------------------------------------------------------------- Expand */

static int expand_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct ops_tensor s, o;
        char msg[160];
        int n, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        memset(&s, 0, sizeof(s));
        rc = shp_input_ints(def, call, 1, "shape", s.dims, OPS_MAX_DIMS, &n, err, errlen);
        if (rc)
                return rc;
        s.ndim = n;
        o = call->in[0];
        rc = ops_broadcast_shape(&call->in[0], &s, &o, msg, sizeof(msg));
        if (rc)
                return ops_fail(err, errlen, rc, "Expand: %s", msg);
        shp_set_out(call, 0, call->in[0].dtype, o.ndim, o.dims);
        return 0;
}

static int expand_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t ss[OPS_MAX_DIMS], ys[OPS_MAX_DIMS];

        if (!ops_tensor_numel(y))
                return 0;
        ops_broadcast_strides(x, y, ss);
        shp_strides(y->ndim, y->dims, ys);
        shp_copy_strided(esize(x), y->ndim, y->dims, y->data, ys, x->data, ss);
        return 0;
}

const struct ops_def ops_expand_def = {
        .name = "Expand", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = expand_run, .cost = move_cost, .infer = expand_infer,
        .since_version = 8, .attrs = NULL,
};

/* ---------------------------------------------------------------- Tile */

static int tile_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t rep[OPS_MAX_DIMS], dims[OPS_MAX_DIMS];
        int n, d, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_input_ints(def, call, 1, "repeats", rep, OPS_MAX_DIMS, &n, err, errlen);
        if (rc)
                return rc;
        if (n != x->ndim)
                return ops_fail(err, errlen, -EINVAL, "Tile: %d repeats for rank %d", n,
                                x->ndim);
        for (d = 0; d < n; d++)
                if (rep[d] < 0 || __builtin_mul_overflow(x->dims[d], rep[d], &dims[d]))
                        return ops_fail(err, errlen, -EINVAL, "Tile: invalid repeat %lld",
                                        (long long)rep[d]);
        shp_set_out(call, 0, x->dtype, n, dims);
        return 0;
}

static int tile_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t dims[SHP_COPY_MAX_DIMS], ds[SHP_COPY_MAX_DIMS], ss[SHP_COPY_MAX_DIMS];
        int64_t xs[OPS_MAX_DIMS], ys[OPS_MAX_DIMS];
        int d;

        if (!ops_tensor_numel(y))
                return 0;
        shp_strides(x->ndim, x->dims, xs);
        shp_strides(y->ndim, y->dims, ys);
        /* Output axis d viewed as (repeat, extent): index r * extent + i. */
        for (d = 0; d < x->ndim; d++) {
                dims[2 * d] = y->dims[d] / x->dims[d];
                dims[2 * d + 1] = x->dims[d];
                ds[2 * d] = ys[d] * x->dims[d];
                ds[2 * d + 1] = ys[d];
                ss[2 * d] = 0;
                ss[2 * d + 1] = xs[d];
        }
        shp_copy_strided(esize(x), 2 * x->ndim, dims, y->data, ds, x->data, ss);
        return 0;
}

const struct ops_def ops_tile_def = {
        .name = "Tile", .min_inputs = 2, .max_inputs = 2, .outputs = 1, .engine = OPS_ENGINE_VECTOR,
        .run = tile_run, .cost = move_cost, .infer = tile_infer, .since_version = 6, .attrs = NULL,
};

/* ---------------------------------------------------------------- Pad */

static const char *const pad_attrs[] = { "mode", NULL };
static const char *const pad2_attrs[] = { "mode", "pads", "paddings", "value", NULL };

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Begin and end padding per axis and the mode. */
static int pad_params(const struct ops_def *def, const struct ops_call *call, int64_t *begin,
                      int64_t *end, int *ret_mode, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t pads[2 * OPS_MAX_DIMS], axes[OPS_MAX_DIMS];
        const char *mode;
        int n, na = -1, i, a, rc;
        uint32_t mask;

        rc = shp_attr_str(def, call, "mode", "constant", &mode, err, errlen);
        if (rc)
                return rc;
        if (strcmp(mode, "constant") == 0)
                *ret_mode = PAD_CONSTANT;
        else if (strcmp(mode, "reflect") == 0)
                *ret_mode = PAD_REFLECT;
        else if (strcmp(mode, "edge") == 0)
                *ret_mode = PAD_EDGE;
        else if (strcmp(mode, "wrap") == 0)
                *ret_mode = PAD_WRAP;
        else
                return ops_fail(err, errlen, -EINVAL, "Pad: unknown mode '%s'", mode);
        if (def->max_inputs == 1) {
                rc = shp_attr_ints(def, call, "pads", pads, 2 * OPS_MAX_DIMS, &n, err, errlen);
                if (!rc && n < 0)
                        rc = shp_attr_ints(def, call, "paddings", pads, 2 * OPS_MAX_DIMS, &n, err,
                                           errlen);
                if (!rc && n < 0)
                        rc = ops_fail(err, errlen, -EINVAL, "Pad: attribute 'pads' is required");
        } else {
                rc = shp_input_ints(def, call, 1, "pads", pads, 2 * OPS_MAX_DIMS, &n, err,
                                    errlen);
                if (!rc && shp_has_in(call, 3))
                        rc = shp_input_ints(def, call, 3, "axes", axes, OPS_MAX_DIMS, &na, err,
                                            errlen);
        }
        if (rc)
                return rc;
        if (na < 0) {
                na = x->ndim;
                for (i = 0; i < na; i++)
                        axes[i] = i;
        }
        if (n != 2 * na)
                return ops_fail(err, errlen, -EINVAL, "Pad: %d pads for %d axes", n, na);
        rc = shp_axes_mask(def, axes, na, x->ndim, &mask, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < x->ndim; i++)
                begin[i] = end[i] = 0;
        for (i = 0; i < na; i++) {
                a = (int)(axes[i] < 0 ? axes[i] + x->ndim : axes[i]);
                begin[a] = pads[i];
                end[a] = pads[na + i];
        }
        return 0;
}

static int pad_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                         size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t begin[OPS_MAX_DIMS], end[OPS_MAX_DIMS], dims[OPS_MAX_DIMS];
        int mode, d, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = pad_params(def, call, begin, end, &mode, err, errlen);
        if (rc)
                return rc;
        if (shp_has_in(call, 2) && (call->in[2].dtype != x->dtype ||
                                    ops_tensor_numel(&call->in[2]) > 1))
                return ops_fail(err, errlen, -EINVAL,
                                "Pad: input 2 (constant_value) must be one value of input 0's "
                                "dtype");
        for (d = 0; d < x->ndim; d++) {
                if (__builtin_add_overflow(x->dims[d], begin[d], &dims[d]) ||
                    __builtin_add_overflow(dims[d], end[d], &dims[d]) || dims[d] < 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Pad: pads %lld, %lld on axis %d of extent %lld",
                                        (long long)begin[d], (long long)end[d], d,
                                        (long long)x->dims[d]);
                if (mode != PAD_CONSTANT && x->dims[d] == 0 && dims[d] > 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Pad: cannot pad the empty axis %d in this mode", d);
        }
        shp_set_out(call, 0, x->dtype, x->ndim, dims);
        return 0;
}

/* The padding value as one element of the data's dtype. */
static void pad_value(const struct ops_call *call, unsigned char *v)
{
        const struct ops_tensor *x = &call->in[0];
        double f = ops_attr_float(call, "value", 0);

        memset(v, 0, 8);
        if (shp_has_in(call, 2) && ops_tensor_numel(&call->in[2]) == 1)
                memcpy(v, call->in[2].data, esize(x));
        else if (f != 0)
                shp_store_f64(x->dtype, v, 0, 1, &f);
}

/* Input index of output index i on an axis of extent n padded by b in front. */
static int64_t pad_map(int mode, int64_t i, int64_t b, int64_t n)
{
        int64_t j = i - b, p;

        switch (mode) {
        case PAD_EDGE: return j < 0 ? 0 : j >= n ? n - 1 : j;
        case PAD_WRAP: j %= n; return j < 0 ? j + n : j;
        default:
                if (n == 1)
                        return 0;
                p = 2 * (n - 1);
                j %= p;
                if (j < 0)
                        j += p;
                return j >= n ? p - j : j;
        }
}

static int pad_run_def(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t begin[OPS_MAX_DIMS], end[OPS_MAX_DIMS], xs[OPS_MAX_DIMS], ys[OPS_MAX_DIMS];
        int64_t dims[OPS_MAX_DIMS], soff = 0, doff = 0, *maps[OPS_MAX_DIMS] = { 0 }, total = 0;
        unsigned char v[8];
        int mode, d, rc;

        rc = pad_params(def, call, begin, end, &mode, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(y))
                return 0;
        shp_strides(x->ndim, x->dims, xs);
        shp_strides(y->ndim, y->dims, ys);
        if (mode == PAD_CONSTANT) {
                pad_value(call, v);
                shp_fill(y->data, ops_tensor_numel(y), v, esize(x));
                /* The part of the input that survives cropping, into its place. */
                for (d = 0; d < x->ndim; d++) {
                        int64_t s = begin[d] < 0 ? -begin[d] : 0, t = begin[d] > 0 ? begin[d] : 0;

                        dims[d] = x->dims[d] - s < y->dims[d] - t ? x->dims[d] - s : y->dims[d] - t;
                        if (dims[d] <= 0)
                                return 0;
                        soff += s * xs[d];
                        doff += t * ys[d];
                }
                shp_copy_strided(esize(x), x->ndim, dims,
                                 (char *)y->data + doff * (int64_t)esize(x), ys,
                                 (const char *)x->data + soff * (int64_t)esize(x), xs);
                return 0;
        }
        for (d = 0; d < y->ndim; d++)
                total += y->dims[d];
        maps[0] = ops_buf_alloc((size_t)(total ? total : 1) * sizeof(int64_t), NULL, 0);
        if (!maps[0])
                return ops_fail(err, errlen, -ENOMEM, "Pad: out of memory");
        for (d = 0; d < y->ndim; d++) {
                int64_t i;

                if (d)
                        maps[d] = maps[d - 1] + y->dims[d - 1];
                for (i = 0; i < y->dims[d]; i++)
                        maps[d][i] = pad_map(mode, i, begin[d], x->dims[d]) * xs[d];
        }
        shp_copy_mapped(esize(x), y->ndim, y->dims, y->data, x->data,
                        (const int64_t *const *)maps);
        ops_buf_free(maps[0]);
        return 0;
}

const struct ops_def ops_pad_def = {
        .name = "Pad", .min_inputs = 2, .max_inputs = 4, .outputs = 1, .engine = OPS_ENGINE_VECTOR,
        .run = pad_run_def, .cost = move_cost, .infer = pad_infer_def,
        .since_version = 18, .attrs = pad_attrs,
};

const struct ops_def ops_pad11_def = {
        .name = "Pad", .min_inputs = 2, .max_inputs = 3, .outputs = 1, .engine = OPS_ENGINE_VECTOR,
        .run = pad_run_def, .cost = move_cost, .infer = pad_infer_def,
        .since_version = 11, .attrs = pad_attrs,
};

const struct ops_def ops_pad2_def = {
        .name = "Pad", .min_inputs = 1, .max_inputs = 1, .outputs = 1, .engine = OPS_ENGINE_VECTOR,
        .run = pad_run_def, .cost = move_cost, .infer = pad_infer_def,
        .since_version = 1, .attrs = pad2_attrs,
};

/* ---------------------------------------------------------------- DepthToSpace, SpaceToDepth */

static const char *const d2s_attrs[] = { "blocksize", "mode", NULL };
static const char *const s2d_attrs[] = { "blocksize", NULL };

static int d2s_params(const struct ops_def *def, const struct ops_call *call, int64_t *ret_b,
                      int *ret_crd, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        const char *mode = "DCR";
        int64_t b;
        int rc;

        if (!ops_attr_find(call, "blocksize"))
                return ops_fail(err, errlen, -EINVAL, "%s: attribute 'blocksize' is required",
                                def->name);
        rc = shp_attr_int(def, call, "blocksize", 0, &b, err, errlen);
        if (!rc && def == &ops_depth_to_space_def)
                rc = shp_attr_str(def, call, "mode", "DCR", &mode, err, errlen);
        if (rc)
                return rc;
        if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
                return ops_fail(err, errlen, -EINVAL, "%s: unknown mode '%s'", def->name, mode);
        if (x->ndim != 4)
                return ops_fail(err, errlen, -EINVAL, "%s: input 0 has rank %d, 4 needed",
                                def->name, x->ndim);
        if (b < 1 || b > (1 << 20))
                return ops_fail(err, errlen, -EINVAL, "%s: blocksize %lld", def->name,
                                (long long)b);
        *ret_b = b;
        *ret_crd = strcmp(mode, "CRD") == 0;
        return 0;
}

static int d2s_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t b, dims[4];
        int crd, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = d2s_params(def, call, &b, &crd, err, errlen);
        if (rc)
                return rc;
        if (x->dims[1] % (b * b))
                return ops_fail(err, errlen, -EINVAL,
                                "DepthToSpace: %lld channels do not divide by blocksize^2 %lld",
                                (long long)x->dims[1], (long long)(b * b));
        dims[0] = x->dims[0];
        dims[1] = x->dims[1] / (b * b);
        if (__builtin_mul_overflow(x->dims[2], b, &dims[2]) ||
            __builtin_mul_overflow(x->dims[3], b, &dims[3]))
                return ops_fail(err, errlen, -EINVAL, "DepthToSpace: result too large");
        shp_set_out(call, 0, x->dtype, 4, dims);
        return 0;
}

static int d2s_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t b, c, h, w, dims[6], ds[6], ss[6];
        int crd, rc;

        rc = d2s_params(def, call, &b, &crd, err, errlen);
        if (rc)
                return rc;
        c = y->dims[1];
        h = x->dims[2];
        w = x->dims[3];
        /* The output walked as [N, C', H, b1, W, b2]; the input is [N, b1, b2, C', H, W]
         * (DCR) or [N, C', b1, b2, H, W] (CRD). */
        dims[0] = x->dims[0];
        dims[1] = c;
        dims[2] = h;
        dims[3] = b;
        dims[4] = w;
        dims[5] = b;
        shp_strides(6, dims, ds);
        ss[0] = c * b * b * h * w;
        ss[2] = w;
        ss[4] = 1;
        if (crd) {
                ss[1] = b * b * h * w;
                ss[3] = b * h * w;
                ss[5] = h * w;
        } else {
                ss[1] = h * w;
                ss[3] = b * c * h * w;
                ss[5] = c * h * w;
        }
        shp_copy_strided(esize(x), 6, dims, y->data, ds, x->data, ss);
        return 0;
}

static int s2d_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t b, dims[4];
        int crd, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = d2s_params(def, call, &b, &crd, err, errlen);
        if (rc)
                return rc;
        if (x->dims[2] % b || x->dims[3] % b)
                return ops_fail(err, errlen, -EINVAL,
                                "SpaceToDepth: spatial dims %lldx%lld do not divide by "
                                "blocksize %lld",
                                (long long)x->dims[2], (long long)x->dims[3], (long long)b);
        dims[0] = x->dims[0];
        if (__builtin_mul_overflow(x->dims[1], b * b, &dims[1]))
                return ops_fail(err, errlen, -EINVAL, "SpaceToDepth: result too large");
        dims[2] = x->dims[2] / b;
        dims[3] = x->dims[3] / b;
        shp_set_out(call, 0, x->dtype, 4, dims);
        return 0;
}

static int s2d_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t b, c, h, w, dims[6], ds[6], ss[6];
        int crd, rc;

        rc = d2s_params(def, call, &b, &crd, err, errlen);
        if (rc)
                return rc;
        c = x->dims[1];
        h = x->dims[2];
        w = x->dims[3];
        /* The output walked as [N, b1, b2, C, H', W'] from the input [N, C, H', b1, W', b2]. */
        dims[0] = x->dims[0];
        dims[1] = b;
        dims[2] = b;
        dims[3] = c;
        dims[4] = h / b;
        dims[5] = w / b;
        shp_strides(6, dims, ds);
        ss[0] = c * h * w;
        ss[1] = w;
        ss[2] = 1;
        ss[3] = h * w;
        ss[4] = b * w;
        ss[5] = b;
        shp_copy_strided(esize(x), 6, dims, y->data, ds, x->data, ss);
        return 0;
}

const struct ops_def ops_depth_to_space_def = {
        .name = "DepthToSpace", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = d2s_run, .cost = move_cost, .infer = d2s_infer,
        .since_version = 1, .attrs = d2s_attrs,
};

const struct ops_def ops_space_to_depth_def = {
        .name = "SpaceToDepth", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = s2d_run, .cost = move_cost, .infer = s2d_infer,
        .since_version = 1, .attrs = s2d_attrs,
};

/* ---------------------------------------------------------------- Trilu */

static const char *const trilu_attrs[] = { "upper", NULL };

static int trilu_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t upper;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "upper", 1, &upper, err, errlen);
        if (!rc && shp_has_in(call, 1))
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 2)
                return ops_fail(err, errlen, -EINVAL, "Trilu: input 0 has rank %d, 2 or more "
                                                      "needed", x->ndim);
        if (shp_has_in(call, 1) && ops_tensor_numel(&call->in[1]) != 1)
                return ops_fail(err, errlen, -EINVAL, "Trilu: input 1 (k) must hold one value");
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static int trilu_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t rows = x->dims[x->ndim - 2], cols = x->dims[x->ndim - 1], n, m, i, lo, hi, k = 0;
        int upper = ops_attr_int(call, "upper", 1) != 0;
        size_t es = esize(x);

        n = ops_tensor_numel(x);
        if (!n)
                return 0;
        if (shp_has_in(call, 1))
                k = shp_get_i64(&call->in[1], 0);
        /* Beyond these bounds k changes nothing; clamping keeps i + k from overflowing. */
        k = k < -rows - 1 ? -rows - 1 : k > cols + 1 ? cols + 1 : k;
        if (y->data != x->data)
                memcpy(y->data, x->data, (size_t)n * es);
        for (m = 0; m < n / (rows * cols); m++) {
                char *base = (char *)y->data + m * rows * cols * (int64_t)es;

                for (i = 0; i < rows; i++) {
                        /* Columns [lo, hi) become zero. */
                        if (upper) {
                                lo = 0;
                                hi = i + k;
                        } else {
                                lo = i + k + 1;
                                hi = cols;
                        }
                        lo = lo < 0 ? 0 : lo;
                        hi = hi > cols ? cols : hi;
                        if (hi > lo)
                                memset(base + (i * cols + lo) * (int64_t)es, 0,
                                       (size_t)(hi - lo) * es);
                }
        }
        return 0;
}

const struct ops_def ops_trilu_def = {
        .name = "Trilu", .min_inputs = 1, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = trilu_run, .cost = move_cost, .infer = trilu_infer,
        .since_version = 14, .attrs = trilu_attrs,
};

/* ---------------------------------------------------------------- ReverseSequence */

static const char *const rs_attrs[] = { "batch_axis", "time_axis", NULL };

static int rs_axes(const struct ops_call *call, int *ret_b, int *ret_t, char *err,
                   size_t errlen)
{
        int64_t b, t;
        int rc;

        rc = shp_attr_int(&ops_reverse_sequence_def, call, "batch_axis", 1, &b, err, errlen);
        if (!rc)
                rc = shp_attr_int(&ops_reverse_sequence_def, call, "time_axis", 0, &t, err,
                                  errlen);
        if (rc)
                return rc;
        if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
                return ops_fail(err, errlen, -EINVAL,
                                "ReverseSequence: batch_axis %lld and time_axis %lld must be 0 "
                                "and 1 in some order",
                                (long long)b, (long long)t);
        *ret_b = (int)b;
        *ret_t = (int)t;
        return 0;
}

static int rs_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *l = &call->in[1];
        int b, t, rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = rs_axes(call, &b, &t, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 2)
                return ops_fail(err, errlen, -EINVAL,
                                "ReverseSequence: input 0 has rank %d, 2 or more needed",
                                x->ndim);
        if (l->ndim != 1 || l->dims[0] != x->dims[b])
                return ops_fail(err, errlen, -EINVAL,
                                "ReverseSequence: sequence_lens must have one entry per batch "
                                "(%lld)",
                                (long long)x->dims[b]);
        shp_set_out(call, 0, x->dtype, x->ndim, x->dims);
        return 0;
}

static int rs_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t xs[OPS_MAX_DIMS], dims[OPS_MAX_DIMS], ss[OPS_MAX_DIMS], len, i, j, src;
        int64_t nb, nt;
        size_t es = esize(x);
        int b, t, d, k = 0, rc;
        char *tmp = NULL;
        const char *in = x->data;

        rc = rs_axes(call, &b, &t, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(x))
                return 0;
        nb = x->dims[b];
        nt = x->dims[t];
        for (i = 0; i < nb; i++) {
                len = shp_get_i64(&call->in[1], i);
                if (len < 0 || len > nt)
                        return ops_fail(err, errlen, -EINVAL,
                                        "ReverseSequence: sequence length %lld out of [0, %lld]",
                                        (long long)len, (long long)nt);
        }
        /* In place, reversal would read what it has overwritten: work from a copy. */
        if (y->data == x->data) {
                tmp = ops_buf_alloc((size_t)ops_tensor_numel(x) * es, NULL, 0);
                if (!tmp)
                        return ops_fail(err, errlen, -ENOMEM, "ReverseSequence: out of memory");
                memcpy(tmp, x->data, (size_t)ops_tensor_numel(x) * es);
                in = tmp;
        }
        shp_strides(x->ndim, x->dims, xs);
        for (d = 0; d < x->ndim; d++) {
                if (d == b || d == t)
                        continue;
                dims[k] = x->dims[d];
                ss[k++] = xs[d];
        }
        for (i = 0; i < nb; i++) {
                len = shp_get_i64(&call->in[1], i);
                for (j = 0; j < nt; j++) {
                        src = j < len ? len - 1 - j : j;
                        shp_copy_strided(es, k, dims,
                                         (char *)y->data + (i * xs[b] + j * xs[t]) * (int64_t)es,
                                         ss, in + (i * xs[b] + src * xs[t]) * (int64_t)es, ss);
                }
        }
        ops_buf_free(tmp);
        return 0;
}

const struct ops_def ops_reverse_sequence_def = {
        .name = "ReverseSequence", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = rs_run, .cost = move_cost, .infer = rs_infer,
        .since_version = 10, .attrs = rs_attrs,
};

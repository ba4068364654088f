/* Resize (opsets 10, 11 and 13 semantics) and the older Upsample on the vector unit:
 * nearest (round_prefer_floor / round_prefer_ceil / floor / ceil), linear and cubic
 * (cubic_coeff_a, exclude_outside) interpolation over any number of axes, with the
 * coordinate transformations half_pixel, half_pixel_symmetric, pytorch_half_pixel,
 * align_corners, asymmetric, tf_half_pixel_for_nn and tf_crop_and_resize (roi,
 * extrapolation_value). The output size comes from sizes, or from floor(input * scale).
 *
 * Every axis is a 1-D resampling: each output coordinate maps to an input coordinate and
 * to 1, 2 or 4 taps (input index clamped to the edge, as the reference pads with edge
 * values, and a weight). Nearest resizes without extrapolation copy element bytes through
 * per-axis index maps, so every dtype works; linear and cubic run one separable pass per
 * axis that changes, in double, over contiguous rows. Points whose coordinate falls outside
 * the input under tf_crop_and_resize take the extrapolation value. Opset 10 Resize and
 * Upsample use asymmetric coordinates and the old nearest rule (truncate when enlarging,
 * round up when shrinking). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape-common.h"

enum rs_mode { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum rs_ctm {
        RS_HALF_PIXEL,
        RS_HALF_PIXEL_SYMMETRIC,
        RS_PYTORCH_HALF_PIXEL,
        RS_ALIGN_CORNERS,
        RS_ASYMMETRIC,
        RS_TF_HALF_PIXEL_FOR_NN,
        RS_TF_CROP_AND_RESIZE,
};
enum rs_round { RS_PREFER_FLOOR, RS_PREFER_CEIL, RS_FLOOR, RS_CEIL, RS_LEGACY };

struct rs_params {
        int mode, ctm, round, exclude;
        double a, extrap;
        double scale[OPS_MAX_DIMS], roi_start[OPS_MAX_DIMS], roi_end[OPS_MAX_DIMS];
        int64_t out[OPS_MAX_DIMS];
};

static const char *const resize_attrs[] = { "mode", "coordinate_transformation_mode",
                                            "cubic_coeff_a", "exclude_outside",
                                            "extrapolation_value", "nearest_mode", "antialias",
                                            "axes", "keep_aspect_ratio_policy", NULL };
static const char *const resize10_attrs[] = { "mode", NULL };
static const char *const upsample_attrs[] = { "mode", "scales", "height_scale", "width_scale",
                                              NULL };

static int rs_lookup(const char *s, const char *const *names, int *ret)
{
        int i;

        for (i = 0; names[i]; i++)
                if (strcmp(s, names[i]) == 0) {
                        *ret = i;
                        return 0;
                }
        return -1;
}

static int rs_attrs(const struct ops_def *def, const struct ops_call *call,
                    struct rs_params *p, char *err, size_t errlen)
{
        static const char *const modes[] = { "nearest", "linear", "cubic", NULL };
        static const char *const ctms[] = { "half_pixel", "half_pixel_symmetric",
                                            "pytorch_half_pixel", "align_corners", "asymmetric",
                                            "tf_half_pixel_for_nn", "tf_crop_and_resize", NULL };
        static const char *const rounds[] = { "round_prefer_floor", "round_prefer_ceil", "floor",
                                              "ceil", NULL };
        const char *s;
        int64_t v;
        int rc, modern = def == &ops_resize_def || def == &ops_resize11_def;

        memset(p, 0, sizeof(*p));
        rc = shp_attr_str(def, call, "mode", "nearest", &s, err, errlen);
        if (rc)
                return rc;
        /* Opset 10 and Upsample call linear "bilinear" in some exporters. */
        if (!modern && strcmp(s, "bilinear") == 0)
                s = "linear";
        if (rs_lookup(s, modes, &p->mode) || (!modern && p->mode == RS_CUBIC))
                return ops_fail(err, errlen, -EINVAL, "%s: unknown mode '%s'", def->name, s);
        if (!modern) {
                p->ctm = RS_ASYMMETRIC;
                p->round = RS_LEGACY;
                return 0;
        }
        rc = shp_attr_str(def, call, "coordinate_transformation_mode", "half_pixel", &s, err,
                          errlen);
        if (rc)
                return rc;
        if (rs_lookup(s, ctms, &p->ctm))
                return ops_fail(err, errlen, -EINVAL,
                                "%s: unknown coordinate_transformation_mode '%s'", def->name, s);
        rc = shp_attr_str(def, call, "nearest_mode", "round_prefer_floor", &s, err, errlen);
        if (rc)
                return rc;
        if (rs_lookup(s, rounds, &p->round))
                return ops_fail(err, errlen, -EINVAL, "%s: unknown nearest_mode '%s'", def->name,
                                s);
        rc = shp_attr_float(def, call, "cubic_coeff_a", -0.75, &p->a, err, errlen);
        if (!rc)
                rc = shp_attr_float(def, call, "extrapolation_value", 0, &p->extrap, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "exclude_outside", 0, &v, err, errlen);
        if (!rc)
                rc = shp_attr_str(def, call, "keep_aspect_ratio_policy", "stretch", &s, err,
                                  errlen);
        if (rc)
                return rc;
        p->exclude = v != 0;
        /* Opset 18 additions, accepted only at their defaults. */
        if (ops_attr_int(call, "antialias", 0) || ops_attr_find(call, "axes") ||
            strcmp(s, "stretch") != 0)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: antialias, axes and keep_aspect_ratio_policy are not "
                                "supported",
                                def->name);
        return 0;
}

/* A float input (roi, scales) into ret: *ret_n values, -1 when omitted or empty. */
static int rs_floats(const struct ops_def *def, const struct ops_call *call, int i,
                     const char *what, double *ret, int max, int *ret_n, char *err,
                     size_t errlen)
{
        const struct ops_tensor *t = &call->in[i];
        int64_t n;
        int rc;

        *ret_n = -1;
        if (!shp_has_in(call, i) || !(n = ops_tensor_numel(t)))
                return 0;
        if (shp_num_class(t->dtype) != SHP_NUM_FLOAT || t->ndim != 1 || n > max)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: input %d (%s) must be 1-D float, at most %d values",
                                def->name, i, what, max);
        rc = shp_need_data(def, call, i, what, err, errlen);
        if (rc)
                return rc;
        shp_load_f64(t->dtype, t->data, 0, n, ret);
        *ret_n = (int)n;
        return 0;
}

/* Attributes, scales, sizes and roi: everything but the data. */
static int rs_params(const struct ops_def *def, const struct ops_call *call,
                     struct rs_params *p, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        double sc[OPS_MAX_DIMS], roi[2 * OPS_MAX_DIMS];
        int64_t sizes[OPS_MAX_DIMS];
        int r = x->ndim, ns = -1, nz = -1, nr, d, rc;
        int si = def == &ops_resize_def || def == &ops_resize11_def ? 2 : 1;

        rc = rs_attrs(def, call, p, err, errlen);
        if (rc)
                return rc;
        if (def == &ops_upsample_def && !shp_has_in(call, 1)) {
                /* Opset 7: scales is an attribute. */
                const struct ops_attr *a = ops_attr_find(call, "scales");

                if (!a || a->type != OPS_ATTR_FLOATS || a->n != r || !a->floats)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Upsample: attribute 'scales' needs %d floats", r);
                for (d = 0; d < r; d++)
                        sc[d] = a->floats[d];
                ns = r;
        } else {
                rc = rs_floats(def, call, si, "scales", sc, OPS_MAX_DIMS, &ns, err, errlen);
                if (rc)
                        return rc;
        }
        if (si == 2) {
                if (shp_has_in(call, 3) && ops_tensor_numel(&call->in[3])) {
                        rc = shp_input_ints(def, call, 3, "sizes", sizes, OPS_MAX_DIMS, &nz, err,
                                            errlen);
                        if (rc)
                                return rc;
                }
                if (p->ctm == RS_TF_CROP_AND_RESIZE) {
                        rc = rs_floats(def, call, 1, "roi", roi, 2 * OPS_MAX_DIMS, &nr, err,
                                       errlen);
                        if (rc)
                                return rc;
                        if (nr != 2 * r)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: tf_crop_and_resize needs a roi of %d values",
                                                def->name, 2 * r);
                        for (d = 0; d < r; d++) {
                                p->roi_start[d] = roi[d];
                                p->roi_end[d] = roi[r + d];
                        }
                }
        }
        if ((ns >= 0) == (nz >= 0))
                return ops_fail(err, errlen, -EINVAL, "%s: exactly one of scales and sizes needed",
                                def->name);
        if ((ns >= 0 ? ns : nz) != r)
                return ops_fail(err, errlen, -EINVAL, "%s: %d %s for rank %d", def->name,
                                ns >= 0 ? ns : nz, ns >= 0 ? "scales" : "sizes", r);
        for (d = 0; d < r; d++) {
                if (nz >= 0) {
                        if (sizes[d] < 0 || sizes[d] > ((int64_t)1 << 40))
                                return ops_fail(err, errlen, -EINVAL, "%s: invalid size %lld",
                                                def->name, (long long)sizes[d]);
                        p->out[d] = sizes[d];
                        p->scale[d] = x->dims[d] ? (double)sizes[d] / (double)x->dims[d] : 1;
                } else {
                        double o = floor((double)x->dims[d] * sc[d]);

                        if (!(sc[d] > 0) || !(o <= (double)((int64_t)1 << 40)))
                                return ops_fail(err, errlen, -EINVAL, "%s: invalid scale %g",
                                                def->name, sc[d]);
                        p->out[d] = (int64_t)o;
                        p->scale[d] = sc[d];
                }
        }
        return 0;
}

static int rs_infer_def(const struct ops_def *def, struct ops_call *call, char *err,
                        size_t errlen)
{
        struct rs_params p;
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_NUMERIC, err, errlen);
        if (!rc)
                rc = rs_params(def, call, &p, err, errlen);
        if (rc)
                return rc;
        shp_set_out(call, 0, call->in[0].dtype, call->in[0].ndim, p.out);
        return 0;
}

/* Input coordinate of output index i on axis d (extent in -> out). Like the reference,
 * the transformations that use the output length take it as scale * in, which differs
 * from the integer length when the scale does not divide. */
static double rs_coord(const struct rs_params *p, int d, int64_t i, int64_t in, int64_t out)
{
        double s = p->scale[d], x = (double)i, of = s * (double)in, st, en;

        switch (p->ctm) {
        case RS_HALF_PIXEL_SYMMETRIC: {
                double adj = (double)out / of, center = (double)in / 2;

                return center * (1 - adj) + (x + 0.5) / s - 0.5;
        }
        case RS_PYTORCH_HALF_PIXEL: return of > 1 ? (x + 0.5) / s - 0.5 : 0;
        case RS_ALIGN_CORNERS: return of == 1 ? 0 : x * (double)(in - 1) / (of - 1);
        case RS_ASYMMETRIC: return x / s;
        case RS_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
        case RS_TF_CROP_AND_RESIZE:
                st = p->roi_start[d];
                en = p->roi_end[d];
                if (of > 1)
                        return st * (double)(in - 1) + x * (en - st) * (double)(in - 1) / (of - 1);
                return 0.5 * (st + en) * (double)(in - 1);
        default: return (x + 0.5) / s - 0.5;
        }
}

static int64_t rs_nearest(const struct rs_params *p, int d, double x)
{
        double f = floor(x);

        switch (p->round) {
        case RS_PREFER_CEIL: return (int64_t)(x - f == 0.5 ? f + 1 : round(x));
        case RS_FLOOR: return (int64_t)f;
        case RS_CEIL: return (int64_t)ceil(x);
        case RS_LEGACY: return (int64_t)(p->scale[d] < 1 ? ceil(x) : trunc(x));
        default: return (int64_t)(x - f == 0.5 ? f : round(x));
        }
}

static int64_t rs_clamp(int64_t v, int64_t n)
{
        return v < 0 ? 0 : v >= n ? n - 1 : v;
}

/* Taps of one axis: for output i, idx[i * 4 + t] and w[i * 4 + t] (unused taps weigh 0),
 * oob[i] when the coordinate lies outside the input under tf_crop_and_resize. Returns
 * whether the axis is the identity. */
static int rs_taps(const struct rs_params *p, int d, int64_t in, int64_t out, int64_t *idx,
                   double *w, uint8_t *oob)
{
        int64_t i, x0;
        int t, ident = in == out;

        for (i = 0; i < out; i++) {
                double x = rs_coord(p, d, i, in, out), r, c[4] = { 0 }, sum;

                if (x > 1e15)
                        x = 1e15;
                if (x < -1e15)
                        x = -1e15;
                oob[i] = p->ctm == RS_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1));
                x0 = (int64_t)floor(x);
                r = x - (double)x0;
                for (t = 0; t < 4; t++)
                        idx[i * 4 + t] = 0;
                switch (p->mode) {
                case RS_NEAREST:
                        idx[i * 4] = rs_clamp(rs_nearest(p, d, x), in);
                        c[0] = 1;
                        break;
                case RS_LINEAR:
                        idx[i * 4] = rs_clamp(x0, in);
                        idx[i * 4 + 1] = rs_clamp(x0 + 1, in);
                        c[0] = 1 - r;
                        c[1] = r;
                        break;
                default: {
                        double a = p->a, s1 = r + 1, s2 = 1 - r, s3 = 2 - r;

                        c[0] = ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a;
                        c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
                        c[2] = ((a + 2) * s2 - (a + 3)) * s2 * s2 + 1;
                        c[3] = ((a * s3 - 5 * a) * s3 + 8 * a) * s3 - 4 * a;
                        sum = 0;
                        for (t = 0; t < 4; t++) {
                                int64_t j = x0 - 1 + t;

                                if (p->exclude && (j < 0 || j >= in))
                                        c[t] = 0;
                                sum += c[t];
                                idx[i * 4 + t] = rs_clamp(j, in);
                        }
                        if (p->exclude && sum != 0)
                                for (t = 0; t < 4; t++)
                                        c[t] /= sum;
                        break;
                }
                }
                for (t = 0; t < 4; t++) {
                        w[i * 4 + t] = c[t];
                        if (c[t] != 0 && (idx[i * 4 + t] != i || c[t] != 1))
                                ident = 0;
                }
                if (oob[i])
                        ident = 0;
        }
        return ident;
}

/* One separable pass along an axis: dst[o, i, :] = sum_t w * src[o, idx, :]. Checks the run
 * context every OPS_POLL_ELEMS outputs: 0, or -ECANCELED. */
static int rs_pass(double *dst, const double *src, int64_t outer, int64_t in, int64_t out,
                   int64_t inner, const int64_t *idx, const double *w)
{
        int64_t o, i, j, since = 0;
        int t;

        for (o = 0; o < outer; o++) {
                for (i = 0; i < out; i++) {
                        double *dr = dst + (o * out + i) * inner;

                        since += inner;
                        if (since >= OPS_POLL_ELEMS) {
                                since = 0;
                                if (ops_runctx_check(NULL, 0))
                                        return -ECANCELED;
                        }

                        memset(dr, 0, (size_t)inner * sizeof(*dr));
                        for (t = 0; t < 4; t++) {
                                const double *sr = src + (o * in + idx[i * 4 + t]) * inner;
                                double wt = w[i * 4 + t];

                                if (wt == 0)
                                        continue;
                                for (j = 0; j < inner; j++)
                                        dr[j] += wt * sr[j];
                        }
                }
        }
        return 0;
}

static int rs_run_def(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t *idx[OPS_MAX_DIMS] = { 0 }, cur[OPS_MAX_DIMS], biggest, n, total = 0;
        double *w[OPS_MAX_DIMS] = { 0 }, *buf[2] = { NULL, NULL };
        uint8_t *oob[OPS_MAX_DIMS] = { 0 }, any_oob = 0;
        int ident[OPS_MAX_DIMS], r = x->ndim, d, rc = 0, b = 0;
        struct rs_params p;
        char msg[200] = "";

        rc = rs_params(def, call, &p, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(y))
                return 0;
        if (!ops_tensor_numel(x))
                return ops_fail(err, errlen, -EINVAL, "%s: cannot resize an empty input",
                                def->name);
        for (d = 0; d < r; d++)
                total += p.out[d];
        idx[0] = ops_buf_alloc((size_t)total * 4 * sizeof(int64_t), NULL, 0);
        w[0] = ops_buf_alloc((size_t)total * 4 * sizeof(double), NULL, 0);
        oob[0] = ops_buf_alloc((size_t)total, NULL, 0);
        if (!idx[0] || !w[0] || !oob[0]) {
                rc = ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
                goto out;
        }
        for (d = 0; d < r; d++) {
                int64_t k;

                if (d) {
                        idx[d] = idx[d - 1] + 4 * p.out[d - 1];
                        w[d] = w[d - 1] + 4 * p.out[d - 1];
                        oob[d] = oob[d - 1] + p.out[d - 1];
                }
                ident[d] = rs_taps(&p, d, x->dims[d], p.out[d], idx[d], w[d], oob[d]);
                for (k = 0; k < p.out[d]; k++)
                        any_oob |= oob[d][k];
        }
        if (p.mode == RS_NEAREST && !any_oob) {
                /* Element offsets per axis: a byte copy through index maps. */
                int64_t xs[OPS_MAX_DIMS], k;

                shp_strides(r, x->dims, xs);
                for (d = 0; d < r; d++)
                        for (k = 0; k < p.out[d]; k++)
                                idx[d][k] = idx[d][4 * k] * xs[d];
                shp_copy_mapped(proto_dtype_size(x->dtype), r, p.out, y->data, x->data,
                                (const int64_t *const *)idx);
                goto out;
        }
        /* Separable passes in double: the buffers hold the largest intermediate. */
        memcpy(cur, x->dims, sizeof(cur));
        biggest = n = ops_tensor_numel(x);
        for (d = 0; d < r; d++) {
                if (ident[d])
                        continue;
                /* an intermediate mixes upscaled and original axes: it can be larger
                 * than input and output, so the product saturates (and then fails to
                 * allocate) rather than wrap */
                if (__builtin_mul_overflow(n / cur[d], p.out[d], &n))
                        n = INT64_MAX / (int64_t)sizeof(double);
                cur[d] = p.out[d];
                biggest = n > biggest ? n : biggest;
        }
        /* two intermediates in double, up to several times the output: charged to the
         * run's budget */
        buf[0] = ops_buf_alloc(ops_bytes((uint64_t)biggest, sizeof(double)), msg, sizeof(msg));
        buf[1] = buf[0] ? ops_buf_alloc(ops_bytes((uint64_t)biggest, sizeof(double)), msg,
                                        sizeof(msg))
                        : NULL;
        if (!buf[0] || !buf[1]) {
                rc = ops_fail(err, errlen, -ENOMEM, "%s: %s", def->name, msg);
                goto out;
        }
        shp_load_f64(x->dtype, x->data, 0, ops_tensor_numel(x), buf[0]);
        memcpy(cur, x->dims, sizeof(cur));
        for (d = 0; d < r; d++) {
                int64_t outer = 1, inner = 1, k;

                if (ident[d])
                        continue;
                for (k = 0; k < d; k++)
                        outer *= cur[k];
                for (k = d + 1; k < r; k++)
                        inner *= cur[k];
                if (rs_pass(buf[!b], buf[b], outer, cur[d], p.out[d], inner, idx[d], w[d])) {
                        ops_poll(def->name, err, errlen); /* the recorded stop's message */
                        rc = -ECANCELED;
                        goto out;
                }
                cur[d] = p.out[d];
                b = !b;
        }
        if (any_oob) {
                int64_t pos[OPS_MAX_DIMS] = { 0 }, k, m = ops_tensor_numel(y);

                for (k = 0; k < m; k++) {
                        for (d = 0; d < r; d++)
                                if (oob[d][pos[d]])
                                        break;
                        if (d < r)
                                buf[b][k] = p.extrap;
                        for (d = r - 1; d >= 0; d--) {
                                if (++pos[d] < p.out[d])
                                        break;
                                pos[d] = 0;
                        }
                }
        }
        shp_store_f64(y->dtype, y->data, 0, ops_tensor_numel(y), buf[b]);
out:
        ops_buf_free(idx[0]);
        ops_buf_free(w[0]);
        ops_buf_free(oob[0]);
        ops_buf_free(buf[0]);
        ops_buf_free(buf[1]);
        return rc;
}

static void rs_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        /* Up to 4 taps per axis of the separable passes. */
        shp_cost(call, 8, ret_flops, ret_bytes);
}

const struct ops_def ops_resize_def = {
        .name = "Resize", .min_inputs = 1, .max_inputs = 4, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = rs_run_def, .cost = rs_cost,
        .infer = rs_infer_def, .since_version = 13, .attrs = resize_attrs,
};

const struct ops_def ops_resize11_def = {
        .name = "Resize", .min_inputs = 3, .max_inputs = 4, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = rs_run_def, .cost = rs_cost,
        .infer = rs_infer_def, .since_version = 11, .attrs = resize_attrs,
};

const struct ops_def ops_resize10_def = {
        .name = "Resize", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = rs_run_def, .cost = rs_cost,
        .infer = rs_infer_def, .since_version = 10, .attrs = resize10_attrs,
};

const struct ops_def ops_upsample_def = {
        .name = "Upsample", .min_inputs = 1, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = rs_run_def, .cost = rs_cost,
        .infer = rs_infer_def, .since_version = 7, .attrs = upsample_attrs,
};

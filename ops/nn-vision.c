/* Detection and sampling operators for the AI CPU: NonMaxSuppression, RoiAlign (opset 10
 * and 16, which differ in the default coordinate_transformation_mode) and GridSample
 * (opset 16: 4-D input; bilinear, nearest and bicubic; zeros, border and reflection
 * padding).
 *
 * NonMaxSuppression's output length depends on the data, so infer runs the selection
 * (counting only) and run repeats it. Per (batch, class) the candidates above the score
 * threshold are sorted by score, ties by box index, and greedily kept while their IoU with
 * every kept box stays at or below the threshold. RoiAlign averages (or takes the maximum
 * of, weighting as ONNX Runtime does) bilinear samples on a regular grid in each bin.
 * GridSample maps normalized grid coordinates to pixels as the ONNX reference does. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn-common.h"

/* ---------------------------------------------------------------- NonMaxSuppression */

struct nms_cand {
        float score;
        int64_t box;
};

static int nms_cmp(const void *pa, const void *pb)
{
        const struct nms_cand *a = pa, *b = pb;

        if (a->score != b->score)
                return a->score > b->score ? -1 : 1;
        return a->box < b->box ? -1 : a->box > b->box;
}

/* Corners (y1, x1, y2, x2) with y1 <= y2, x1 <= x2 of box i. */
static void nms_box(const float *b, int center, float *c)
{
        if (center) {
                c[0] = b[1] - b[3] / 2;
                c[1] = b[0] - b[2] / 2;
                c[2] = b[1] + b[3] / 2;
                c[3] = b[0] + b[2] / 2;
                return;
        }
        c[0] = fminf(b[0], b[2]);
        c[1] = fminf(b[1], b[3]);
        c[2] = fmaxf(b[0], b[2]);
        c[3] = fmaxf(b[1], b[3]);
}

static float nms_iou(const float *a, const float *b)
{
        float ih = fminf(a[2], b[2]) - fmaxf(a[0], b[0]), iw = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
        float aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]), inter;

        if (ih <= 0 || iw <= 0 || aa <= 0 || ab <= 0)
                return 0;
        inter = ih * iw;
        return inter / (aa + ab - inter);
}

static int nms_shapes(const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *b = &call->in[0], *s = &call->in[1];
        int i;

        if (b->ndim != 3 || b->dims[2] != 4 || s->ndim != 3 || s->dims[0] != b->dims[0] ||
            s->dims[2] != b->dims[1])
                return ops_fail(err, errlen, -EINVAL,
                                "NonMaxSuppression: boxes [B,S,4] and scores [B,C,S] needed");
        if (b->dtype != PROTO_DTYPE_FLOAT32 || s->dtype != PROTO_DTYPE_FLOAT32)
                return ops_fail(err, errlen, -EINVAL, "NonMaxSuppression: float32 boxes and scores");
        for (i = 2; i < call->nin; i++)
                if (nn_has_in(call, i) &&
                    (ops_tensor_numel(&call->in[i]) != 1 ||
                     call->in[i].dtype != (i == 2 ? PROTO_DTYPE_INT64 : PROTO_DTYPE_FLOAT32)))
                        return ops_fail(err, errlen, -EINVAL,
                                        "NonMaxSuppression: input %d must be a single %s", i,
                                        i == 2 ? "int64" : "float32");
        return 0;
}

/* The selection; out (3 per entry) may be NULL to count. Returns the count or -ENOMEM. */
static int64_t nms_select(const struct ops_call *call, int64_t *out)
{
        const struct ops_tensor *bt = &call->in[0], *st = &call->in[1];
        int64_t nb = bt->dims[0], ns = bt->dims[1], nc = st->dims[1], b, c, i, j, count = 0;
        int64_t maxout = nn_has_in(call, 2) ? ((const int64_t *)call->in[2].data)[0] : 0;
        float iou = nn_has_in(call, 3) ? ((const float *)call->in[3].data)[0] : 0;
        int has_thr = nn_has_in(call, 4);
        float thr = has_thr ? ((const float *)call->in[4].data)[0] : 0;
        int center = ops_attr_int(call, "center_point_box", 0) != 0;
        struct nms_cand *cand;
        float *kept;
        int64_t nkept;

        if (maxout <= 0 || !ns)
                return 0;
        cand = ops_buf_alloc((size_t)ns * sizeof(*cand), NULL, 0);
        kept = ops_buf_alloc((size_t)ns * 4 * sizeof(float), NULL, 0);
        if (!cand || !kept) {
                ops_buf_free(cand);
                ops_buf_free(kept);
                return -ENOMEM;
        }
        for (b = 0; b < nb; b++) {
                const float *boxes = (const float *)bt->data + b * ns * 4;

                for (c = 0; c < nc; c++) {
                        const float *sc = (const float *)st->data + (b * nc + c) * ns;
                        int64_t n = 0;

                        for (i = 0; i < ns; i++)
                                if (!has_thr || sc[i] > thr) {
                                        cand[n].score = sc[i];
                                        cand[n++].box = i;
                                }
                        qsort(cand, (size_t)n, sizeof(*cand), nms_cmp);
                        nkept = 0;
                        for (i = 0; i < n && nkept < maxout; i++) {
                                float box[4];

                                nms_box(boxes + cand[i].box * 4, center, box);
                                for (j = 0; j < nkept; j++)
                                        if (nms_iou(box, kept + j * 4) > iou)
                                                break;
                                if (j < nkept)
                                        continue;
                                memcpy(kept + nkept * 4, box, sizeof(box));
                                nkept++;
                                if (out) {
                                        out[count * 3] = b;
                                        out[count * 3 + 1] = c;
                                        out[count * 3 + 2] = cand[i].box;
                                }
                                count++;
                        }
                }
        }
        ops_buf_free(cand);
        ops_buf_free(kept);
        return count;
}

static int nms_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t dims[2];
        int rc, i;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nms_shapes(call, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < call->nin; i++)
                if (nn_has_in(call, i) && !call->in[i].data)
                        return ops_fail(err, errlen, -EINVAL,
                                        "NonMaxSuppression: the output size is only known when running");
        dims[0] = nms_select(call, NULL);
        dims[1] = 3;
        if (dims[0] < 0)
                return ops_fail(err, errlen, -ENOMEM, "NonMaxSuppression: out of memory");
        nn_set_out(call, 0, PROTO_DTYPE_INT64, 2, dims);
        return 0;
}

static int nms_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        int64_t n = nms_select(call, NULL), *tmp;

        if (n < 0)
                return ops_fail(err, errlen, -ENOMEM, "NonMaxSuppression: out of memory");
        if (n != call->out[0].dims[0] || call->out[0].ndim != 2)
                return ops_fail(err, errlen, -EINVAL, "NonMaxSuppression: output of wrong size");
        tmp = ops_buf_alloc((size_t)(3 * n) * sizeof(int64_t) + 1, NULL, 0);
        if (!tmp || nms_select(call, tmp) < 0) {
                ops_buf_free(tmp);
                return ops_fail(err, errlen, -ENOMEM, "NonMaxSuppression: out of memory");
        }
        memcpy(call->out[0].data, tmp, (size_t)(3 * n) * sizeof(int64_t));
        ops_buf_free(tmp);
        return 0;
}

static void nms_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        uint64_t s = call->in[0].ndim == 3 ? (uint64_t)call->in[0].dims[1] : 1;

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        /* sorting and pairwise overlaps of each class's candidates */
        *ret_flops = ops_mul_sat(*ret_flops, s < 64 ? 64 : s);
}

const struct ops_def ops_nms_def = {
        .name = "NonMaxSuppression", .min_inputs = 2, .max_inputs = 5, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = nms_run, .cost = nms_cost, .infer = nms_infer,
        .since_version = 10,
};

/* ---------------------------------------------------------------- RoiAlign */

static int roi_infer_of(const struct ops_def *def, struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *r = &call->in[1], *bi = &call->in[2];
        int64_t oh = ops_attr_int(call, "output_height", 1), ow = ops_attr_int(call, "output_width", 1);
        const char *mode = nn_attr_str(call, "mode", "avg");
        int64_t dims[4];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 2, nn_int_index_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim != 4 || r->ndim != 2 || r->dims[1] != 4 || bi->ndim != 1 ||
            bi->dims[0] != r->dims[0] || r->dtype != x->dtype)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: X [N,C,H,W], rois [R,4] and batch_indices [R] needed",
                                def->name);
        if (oh < 1 || ow < 1 || (strcmp(mode, "avg") && strcmp(mode, "max")))
                return ops_fail(err, errlen, -EINVAL, "%s: bad output size or mode", def->name);
        dims[0] = r->dims[0];
        dims[1] = x->dims[1];
        dims[2] = oh;
        dims[3] = ow;
        nn_set_out(call, 0, x->dtype, 4, dims);
        return 0;
}

/* Bilinear weights and positions of sample (y, x) as ONNX Runtime forms them; 0 weights
 * outside [-1, H] x [-1, W]. */
static void roi_bilinear(float y, float x, int64_t H, int64_t W, float *w, int64_t *pos)
{
        int64_t yl, xl, yh, xh;
        float ly, lx, hy, hx;

        if (y < -1.0f || y > (float)H || x < -1.0f || x > (float)W) {
                memset(w, 0, 4 * sizeof(*w));
                memset(pos, 0, 4 * sizeof(*pos));
                return;
        }
        y = y <= 0 ? 0 : y;
        x = x <= 0 ? 0 : x;
        yl = (int64_t)y;
        xl = (int64_t)x;
        if (yl >= H - 1) {
                yh = yl = H - 1;
                y = (float)yl;
        } else {
                yh = yl + 1;
        }
        if (xl >= W - 1) {
                xh = xl = W - 1;
                x = (float)xl;
        } else {
                xh = xl + 1;
        }
        ly = y - (float)yl;
        lx = x - (float)xl;
        hy = 1.0f - ly;
        hx = 1.0f - lx;
        w[0] = hy * hx;
        w[1] = hy * lx;
        w[2] = ly * hx;
        w[3] = ly * lx;
        pos[0] = yl * W + xl;
        pos[1] = yl * W + xh;
        pos[2] = yh * W + xl;
        pos[3] = yh * W + xh;
}

static int roi_run_of(const struct ops_def *def, const char *default_ctm,
                      const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t oh = ops_attr_int(call, "output_height", 1), ow = ops_attr_int(call, "output_width", 1);
        int64_t sr = ops_attr_int(call, "sampling_ratio", 0), R = call->in[1].dims[0];
        int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3], r, c, ph, pw, iy, ix;
        float scale = (float)ops_attr_float(call, "spatial_scale", 1.0);
        int is_max = strcmp(nn_attr_str(call, "mode", "avg"), "max") == 0;
        int half = strcmp(nn_attr_str(call, "coordinate_transformation_mode", default_ctm),
                          "half_pixel") == 0;
        struct nn_f32 xv, rv, y;

        if (nn_f32_in(x, &xv))
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        if (nn_f32_in(&call->in[1], &rv)) {
                nn_f32_done(&xv);
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        }
        if (nn_f32_out(&call->out[0], &y)) {
                nn_f32_done(&xv);
                nn_f32_done(&rv);
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        }
        for (r = 0; r < R; r++) {
                const float *roi = rv.p + r * 4;
                int64_t b = nn_get_int(&call->in[2], r);
                float off = half ? 0.5f : 0.0f;
                float sw = roi[0] * scale - off, sh = roi[1] * scale - off;
                float rw = roi[2] * scale - off - sw, rh = roi[3] * scale - off - sh;
                float bw, bh;
                int64_t gh, gw;

                if (b < 0 || b >= x->dims[0]) {
                        nn_f32_done(&xv);
                        nn_f32_done(&rv);
                        nn_f32_done(&y);
                        return ops_fail(err, errlen, -EINVAL, "%s: batch index %lld", def->name,
                                        (long long)b);
                }
                if (!half) {
                        /* the legacy mode forces at least a 1x1 region */
                        rw = fmaxf(rw, 1.0f);
                        rh = fmaxf(rh, 1.0f);
                }
                bh = rh / (float)oh;
                bw = rw / (float)ow;
                gh = sr > 0 ? sr : (int64_t)ceilf(rh / (float)oh);
                gw = sr > 0 ? sr : (int64_t)ceilf(rw / (float)ow);
                for (c = 0; c < C; c++) {
                        const float *plane = xv.p + (b * C + c) * H * W;
                        float *out = y.p + ((r * C + c) * oh) * ow;

                        for (ph = 0; ph < oh; ph++)
                                for (pw = 0; pw < ow; pw++) {
                                        double acc = 0;
                                        float best = 0;
                                        int first = 1;

                                        for (iy = 0; iy < gh; iy++) {
                                                float yy = sh + (float)ph * bh +
                                                           ((float)iy + 0.5f) * bh / (float)gh;

                                                for (ix = 0; ix < gw; ix++) {
                                                        float xx = sw + (float)pw * bw +
                                                                   ((float)ix + 0.5f) * bw / (float)gw;
                                                        float wt[4], v;
                                                        int64_t pos[4];

                                                        roi_bilinear(yy, xx, H, W, wt, pos);
                                                        if (!is_max) {
                                                                acc += wt[0] * plane[pos[0]] +
                                                                       wt[1] * plane[pos[1]] +
                                                                       wt[2] * plane[pos[2]] +
                                                                       wt[3] * plane[pos[3]];
                                                                continue;
                                                        }
                                                        v = fmaxf(fmaxf(wt[0] * plane[pos[0]],
                                                                        wt[1] * plane[pos[1]]),
                                                                  fmaxf(wt[2] * plane[pos[2]],
                                                                        wt[3] * plane[pos[3]]));
                                                        best = first || v > best ? v : best;
                                                        first = 0;
                                                }
                                        }
                                        out[ph * ow + pw] =
                                                is_max ? best
                                                       : (float)(acc / (double)(gh * gw > 0 ? gh * gw : 1));
                                }
                }
        }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&xv);
        nn_f32_done(&rv);
        nn_f32_done(&y);
        return 0;
}

static void roi_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        int64_t sr = ops_attr_int(call, "sampling_ratio", 0);

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        *ret_flops = ops_mul_sat((uint64_t)ops_tensor_numel(&call->out[0]),
                                 (uint64_t)(sr > 0 ? sr * sr * 10 : 40));
}

static int roi_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        return roi_run_of(def, "half_pixel", call, err, errlen);
}

const struct ops_def ops_roi_align_def = {
        .name = "RoiAlign", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = roi_run, .cost = roi_cost, .infer = roi_infer_of,
        .since_version = 16,
};

static int roi10_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        return roi_run_of(def, "output_half_pixel", call, err, errlen);
}

const struct ops_def ops_roi_align10_def = {
        .name = "RoiAlign", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = roi10_run, .cost = roi_cost, .infer = roi_infer_of,
        .since_version = 10,
};

/* ---------------------------------------------------------------- GridSample */

enum gs_mode { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static int gs_modes(const struct ops_call *call, enum gs_mode *mode, enum gs_pad *pad)
{
        const char *m = nn_attr_str(call, "mode", "bilinear");
        const char *p = nn_attr_str(call, "padding_mode", "zeros");

        if (strcmp(m, "bilinear") == 0)
                *mode = GS_BILINEAR;
        else if (strcmp(m, "nearest") == 0)
                *mode = GS_NEAREST;
        else if (strcmp(m, "bicubic") == 0)
                *mode = GS_BICUBIC;
        else
                return -EINVAL;
        if (strcmp(p, "zeros") == 0)
                *pad = GS_ZEROS;
        else if (strcmp(p, "border") == 0)
                *pad = GS_BORDER;
        else if (strcmp(p, "reflection") == 0)
                *pad = GS_REFLECTION;
        else
                return -EINVAL;
        return 0;
}

static int gs_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *g = &call->in[1];
        enum gs_mode mode;
        enum gs_pad pad;
        int64_t dims[4];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 1, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim != 4 || g->ndim != 4 || g->dims[0] != x->dims[0] || g->dims[3] != 2)
                return ops_fail(err, errlen, -EINVAL,
                                "GridSample: X [N,C,H,W] and grid [N,Ho,Wo,2] needed");
        if (gs_modes(call, &mode, &pad))
                return ops_fail(err, errlen, -EINVAL, "GridSample: unknown mode or padding_mode");
        dims[0] = x->dims[0];
        dims[1] = x->dims[1];
        dims[2] = g->dims[1];
        dims[3] = g->dims[2];
        nn_set_out(call, 0, x->dtype, 4, dims);
        return 0;
}

/* Reflects x into [lo, hi] by the nearer border until it is inside. */
static float gs_reflect(float x, float lo, float hi)
{
        float range = hi - lo, d, r;
        int64_t n;

        if (range <= 0)
                return lo;
        if (x < lo) {
                d = lo - x;
                n = (int64_t)(d / range);
                r = d - (float)n * range;
                return n % 2 == 0 ? lo + r : hi - r;
        }
        if (x > hi) {
                d = x - hi;
                n = (int64_t)(d / range);
                r = d - (float)n * range;
                return n % 2 == 0 ? hi - r : lo + r;
        }
        return x;
}

struct gs_plane {
        const float *p;
        int64_t H, W;
        enum gs_pad pad;
        float border[4]; /* x_min, y_min, x_max, y_max */
};

static float gs_pixel(const struct gs_plane *pl, int64_t r, int64_t c)
{
        switch (pl->pad) {
        case GS_ZEROS:
                return r >= 0 && r < pl->H && c >= 0 && c < pl->W ? pl->p[r * pl->W + c] : 0;
        case GS_BORDER:
                r = r < 0 ? 0 : r >= pl->H ? pl->H - 1 : r;
                c = c < 0 ? 0 : c >= pl->W ? pl->W - 1 : c;
                return pl->p[r * pl->W + c];
        case GS_REFLECTION:
                c = (int64_t)gs_reflect((float)c, pl->border[0], pl->border[2]);
                r = (int64_t)gs_reflect((float)r, pl->border[1], pl->border[3]);
                r = r < 0 ? 0 : r >= pl->H ? pl->H - 1 : r;
                c = c < 0 ? 0 : c >= pl->W ? pl->W - 1 : c;
                return pl->p[r * pl->W + c];
        }
        return 0;
}

static void gs_cubic(float x, float *k)
{
        const float a = -0.75f;

        x = fabsf(x);
        k[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
        k[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
        k[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
        k[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

static float gs_sample(const struct gs_plane *pl, enum gs_mode mode, int align, float nx,
                       float ny)
{
        float x = align ? (nx + 1) / 2 * (float)(pl->W - 1) : ((nx + 1) * (float)pl->W - 1) / 2;
        float y = align ? (ny + 1) / 2 * (float)(pl->H - 1) : ((ny + 1) * (float)pl->H - 1) / 2;

        if (mode == GS_NEAREST) {
                x = nearbyintf(x);
                y = nearbyintf(y);
        }
        if (x < pl->border[0] || x > pl->border[2] || y < pl->border[1] || y > pl->border[3]) {
                if (pl->pad == GS_BORDER) {
                        x = fminf(fmaxf(x, 0), (float)(pl->W - 1));
                        y = fminf(fmaxf(y, 0), (float)(pl->H - 1));
                } else if (pl->pad == GS_REFLECTION) {
                        x = gs_reflect(x, pl->border[0], pl->border[2]);
                        y = gs_reflect(y, pl->border[1], pl->border[3]);
                }
        }
        if (mode == GS_NEAREST)
                return gs_pixel(pl, (int64_t)y, (int64_t)x);
        if (mode == GS_BILINEAR) {
                int64_t x1 = (int64_t)floorf(x), y1 = (int64_t)floorf(y);
                float dx1 = x - (float)x1, dx2 = (float)(x1 + 1) - x;
                float dy1 = y - (float)y1, dy2 = (float)(y1 + 1) - y;

                return dy2 * (dx2 * gs_pixel(pl, y1, x1) + dx1 * gs_pixel(pl, y1, x1 + 1)) +
                       dy1 * (dx2 * gs_pixel(pl, y1 + 1, x1) + dx1 * gs_pixel(pl, y1 + 1, x1 + 1));
        } else {
                int64_t x0 = (int64_t)floorf(x) - 1, y0 = (int64_t)floorf(y) - 1, h, w;
                float kx[4], ky[4], acc = 0;

                gs_cubic(x - (float)x0 - 1, kx);
                gs_cubic(y - (float)y0 - 1, ky);
                for (h = 0; h < 4; h++) {
                        float row = 0;

                        for (w = 0; w < 4; w++)
                                row += kx[w] * gs_pixel(pl, y0 + h, x0 + w);
                        acc += ky[h] * row;
                }
                return acc;
        }
}

static int gs_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *g = &call->in[1];
        int64_t N = x->dims[0], C = x->dims[1], Ho = g->dims[1], Wo = g->dims[2], n, c, i;
        int align = ops_attr_int(call, "align_corners", 0) != 0;
        struct nn_f32 xv, gv, y;
        struct gs_plane pl;
        enum gs_mode mode;

        if (gs_modes(call, &mode, &pl.pad))
                return ops_fail(err, errlen, -EINVAL, "GridSample: unknown mode");
        pl.H = x->dims[2];
        pl.W = x->dims[3];
        pl.border[0] = align ? 0 : -0.5f;
        pl.border[1] = align ? 0 : -0.5f;
        pl.border[2] = align ? (float)pl.W - 1 : (float)pl.W - 0.5f;
        pl.border[3] = align ? (float)pl.H - 1 : (float)pl.H - 0.5f;
        if (!ops_tensor_numel(&call->out[0]))
                return 0;
        if (!pl.H || !pl.W) {
                memset(call->out[0].data, 0,
                       (size_t)ops_tensor_numel(&call->out[0]) * proto_dtype_size(x->dtype));
                return 0;
        }
        if (nn_f32_in(x, &xv))
                return ops_fail(err, errlen, -ENOMEM, "GridSample: out of memory");
        if (nn_f32_in(g, &gv)) {
                nn_f32_done(&xv);
                return ops_fail(err, errlen, -ENOMEM, "GridSample: out of memory");
        }
        if (nn_f32_out(&call->out[0], &y)) {
                nn_f32_done(&xv);
                nn_f32_done(&gv);
                return ops_fail(err, errlen, -ENOMEM, "GridSample: out of memory");
        }
        for (n = 0; n < N; n++)
                for (c = 0; c < C; c++) {
                        const float *grid = gv.p + n * Ho * Wo * 2;
                        float *out = y.p + (n * C + c) * Ho * Wo;

                        pl.p = xv.p + (n * C + c) * pl.H * pl.W;
                        for (i = 0; i < Ho * Wo; i++)
                                out[i] = gs_sample(&pl, mode, align, grid[2 * i], grid[2 * i + 1]);
                }
        nn_f32_commit(&call->out[0], &y);
        nn_f32_done(&xv);
        nn_f32_done(&gv);
        nn_f32_done(&y);
        return 0;
}

static void gs_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        nn_cost_simple(call, 20, ret_flops, ret_bytes);
}

const struct ops_def ops_grid_sample_def = {
        .name = "GridSample", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gs_run, .cost = gs_cost, .infer = gs_infer,
        .since_version = 16,
};

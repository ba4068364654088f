/* Pools for the vector engine: MaxPool (with the optional Indices output, dilations,
 * ceil_mode and storage_order), AveragePool (count_include_pad, ceil_mode), LpPool, their
 * Global forms and MaxUnpool, 1-D to 3-D.
 *
 * Every (image, channel) plane is pooled on its own. The taps of a window that fall inside
 * the input are a box in tap space, computed once per output coordinate of each spatial
 * dim (so the innermost loops carry no bounds tests), and the divisor of count_include_pad
 * counts the taps inside the padded extent, as ONNX Runtime and PyTorch do. Values are
 * pooled in float32: integer inputs of MaxPool (int8, uint8) are exact there, float16,
 * bfloat16 and float64 are converted around the kernel. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn-common.h"

enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP };

static const int pool_max_types[] = { PROTO_DTYPE_FLOAT32, PROTO_DTYPE_FLOAT16,
                                      PROTO_DTYPE_BFLOAT16, PROTO_DTYPE_FLOAT64,
                                      PROTO_DTYPE_INT8, PROTO_DTYPE_UINT8, 0 };

struct pool {
        const struct ops_def *def;
        enum pool_kind kind;
        int global;
        struct nn_geom g;
        int64_t planes;        /* N * C */
        int ndim;
        int64_t ydims[OPS_MAX_DIMS];
        int count_pad;         /* AveragePool count_include_pad */
        int col_major;         /* MaxPool storage_order 1 */
        double p;              /* LpPool exponent */
};

static int pool_setup(const struct ops_def *def, enum pool_kind kind, int global,
                      const struct ops_call *call, struct pool *pl, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t ks[NN_SP];
        int nsp = x->ndim - 2, i, n;

        memset(pl, 0, sizeof(*pl));
        pl->def = def;
        pl->kind = kind;
        pl->global = global;
        if (x->ndim < 3 || x->ndim > NN_SP + 2)
                return ops_fail(err, errlen, -EINVAL, "%s: input of rank %d, 3 to %d supported",
                                def->name, x->ndim, NN_SP + 2);
        pl->planes = x->dims[0] * x->dims[1];
        pl->ndim = x->ndim;
        pl->ydims[0] = x->dims[0];
        pl->ydims[1] = x->dims[1];
        if (kind == POOL_LP) {
                const struct ops_attr *a = ops_attr_find(call, "p");

                pl->p = !a ? 2.0 : a->type == OPS_ATTR_FLOAT ? a->f : (double)a->i;
                if (!(pl->p > 0))
                        return ops_fail(err, errlen, -EINVAL, "%s: p must be positive", def->name);
        }
        if (global) {
                struct nn_geom *g = &pl->g;
                int o = NN_SP - nsp;

                for (i = 0; i < NN_SP; i++) {
                        g->in[i] = g->k[i] = g->out[i] = g->stride[i] = g->dil[i] = 1;
                        g->pb[i] = g->pe[i] = 0;
                }
                g->nsp = nsp;
                for (i = 0; i < nsp; i++) {
                        g->in[o + i] = g->k[o + i] = x->dims[2 + i];
                        pl->ydims[2 + i] = 1;
                }
                return 0;
        }
        n = nn_attr_ints(call, "kernel_shape", ks, NN_SP);
        if (n != nsp)
                return ops_fail(err, errlen, -EINVAL, "%s: 'kernel_shape' needs %d values",
                                def->name, nsp);
        i = nn_geom_init(call, def->name, nsp, x->dims + 2, ks,
                         kind == POOL_LP ? 0 : NN_GEOM_CEIL, &pl->g, err, errlen);
        if (i)
                return i;
        for (i = 0; i < nsp; i++)
                pl->ydims[2 + i] = pl->g.out[NN_SP - nsp + i];
        pl->count_pad = kind == POOL_AVG && ops_attr_int(call, "count_include_pad", 0);
        pl->col_major = ops_attr_int(call, "storage_order", 0) != 0;
        return 0;
}

/* Per spatial dim and output coordinate: the tap range inside the input [lo, hi) and the
 * number of taps inside the padded input. */
struct pool_taps {
        int64_t *lo[NN_SP], *hi[NN_SP], *padded[NN_SP];
        int64_t *mem;
};

/* Kernel extents and pads come from attributes, so the loops here and in pool_plane can
 * be long whatever the tensors' sizes: both check the run context every OPS_POLL_ELEMS
 * steps and return -ECANCELED when the run must stop. */
static int pool_taps_init(const struct nn_geom *g, struct pool_taps *t)
{
        int64_t total = g->out[0] + g->out[1] + g->out[2], o, j, *p, since = 0;
        int i;

        t->mem = ops_buf_alloc(ops_bytes(3 * (uint64_t)total, sizeof(int64_t)), NULL, 0);
        if (!t->mem)
                return -ENOMEM;
        p = t->mem;
        for (i = 0; i < NN_SP; i++) {
                t->lo[i] = p;
                t->hi[i] = p + g->out[i];
                t->padded[i] = p + 2 * g->out[i];
                p += 3 * g->out[i];
                for (o = 0; o < g->out[i]; o++) {
                        int64_t start = o * g->stride[i] - g->pb[i], lo = g->k[i], hi = 0, pc = 0;

                        since += g->k[i];
                        if (since >= OPS_POLL_ELEMS) {
                                since = 0;
                                if (ops_runctx_check(NULL, 0))
                                        return -ECANCELED;
                        }
                        for (j = 0; j < g->k[i]; j++) {
                                int64_t pos = start + j * g->dil[i];

                                if (pos >= 0 && pos < g->in[i]) {
                                        lo = j < lo ? j : lo;
                                        hi = j + 1;
                                }
                                if (pos >= -g->pb[i] && pos < g->in[i] + g->pe[i])
                                        pc++;
                        }
                        t->lo[i][o] = lo < hi ? lo : 0;
                        t->hi[i][o] = lo < hi ? hi : 0;
                        t->padded[i][o] = pc;
                }
        }
        return 0;
}

/* One plane. idx (MaxPool Indices) may be NULL; base is the plane's flat offset. */
static int pool_plane(const struct pool *pl, const struct pool_taps *t, const float *x,
                      float *y, int64_t *idx, int64_t base, int64_t *since)
{
        const struct nn_geom *g = &pl->g;
        const int64_t H = g->in[1], W = g->in[2];
        int64_t od, oh, ow, kd, kh, kw;
        /* taps of one output at most (a bound on a row's work, for the checks) */
        int64_t taps = (g->k[0] < g->in[0] ? g->k[0] : g->in[0]) *
                       (g->k[1] < g->in[1] ? g->k[1] : g->in[1]) *
                       (g->k[2] < g->in[2] ? g->k[2] : g->in[2]);

        for (od = 0; od < g->out[0]; od++)
        for (oh = 0; oh < g->out[1]; oh++) {
        *since += g->out[2] * (taps ? taps : 1);
        if (*since >= OPS_POLL_ELEMS) {
                *since = 0;
                if (ops_runctx_check(NULL, 0))
                        return -ECANCELED;
        }
        for (ow = 0; ow < g->out[2]; ow++) {
                int64_t sd = od * g->stride[0] - g->pb[0], sh = oh * g->stride[1] - g->pb[1];
                int64_t sw = ow * g->stride[2] - g->pb[2], best = -1, count;
                float m = -INFINITY;
                double acc = 0;

                for (kd = t->lo[0][od]; kd < t->hi[0][od]; kd++) {
                        int64_t d = sd + kd * g->dil[0];

                        for (kh = t->lo[1][oh]; kh < t->hi[1][oh]; kh++) {
                                int64_t h = sh + kh * g->dil[1];
                                const float *row = x + (d * H + h) * W;

                                for (kw = t->lo[2][ow]; kw < t->hi[2][ow]; kw++) {
                                        int64_t w = sw + kw * g->dil[2];
                                        float v = row[w];

                                        if (pl->kind == POOL_MAX) {
                                                /* first maximum wins, as in ONNX Runtime */
                                                if (v > m || best < 0) {
                                                        m = v;
                                                        best = (d * H + h) * W + w;
                                                }
                                        } else if (pl->kind == POOL_AVG) {
                                                acc += v;
                                        } else {
                                                acc += pow(fabs(v), pl->p);
                                        }
                                }
                        }
                }
                if (pl->kind == POOL_MAX) {
                        *y++ = m;
                        if (idx) {
                                if (best >= 0 && pl->col_major) {
                                        /* column-major position within the plane */
                                        int64_t w = best % W, h = best / W % H, d = best / W / H;

                                        best = (w * H + h) * g->in[0] + d;
                                }
                                *idx++ = base + (best < 0 ? 0 : best);
                        }
                } else if (pl->kind == POOL_AVG) {
                        if (pl->count_pad)
                                count = t->padded[0][od] * t->padded[1][oh] * t->padded[2][ow];
                        else
                                count = (t->hi[0][od] - t->lo[0][od]) *
                                        (t->hi[1][oh] - t->lo[1][oh]) *
                                        (t->hi[2][ow] - t->lo[2][ow]);
                        *y++ = count ? (float)(acc / (double)count) : 0.0f;
                } else {
                        *y++ = (float)pow(acc, 1.0 / pl->p);
                }
        }
        }
        return 0;
}

static int pool_infer(const struct ops_def *def, enum pool_kind kind, int global,
                      struct ops_call *call, char *err, size_t errlen)
{
        struct pool pl;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, kind == POOL_MAX ? pool_max_types : nn_float_types,
                                   err, errlen);
        if (!rc)
                rc = pool_setup(def, kind, global, call, &pl, err, errlen);
        if (rc)
                return rc;
        nn_set_out(call, 0, call->in[0].dtype, pl.ndim, pl.ydims);
        nn_set_out(call, 1, PROTO_DTYPE_INT64, pl.ndim, pl.ydims);
        return 0;
}

static int pool_run(const struct ops_def *def, enum pool_kind kind, int global,
                    const struct ops_call *call, char *err, size_t errlen)
{
        struct pool pl;
        struct pool_taps taps;
        struct nn_f32 x, y;
        int64_t *idx = nn_want_out(call, 1) ? call->out[1].data : NULL, p, isz, osz, since = 0;
        int rc, stop = 0;

        rc = pool_setup(def, kind, global, call, &pl, err, errlen);
        if (rc || !ops_tensor_numel(&call->out[0]))
                return rc;
        rc = pool_taps_init(&pl.g, &taps);
        if (rc == -ECANCELED) {
                ops_buf_free(taps.mem);
                ops_poll(def->name, err, errlen); /* the message of the recorded stop */
                return -ECANCELED;
        }
        if (rc)
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        rc = nn_f32_in(&call->in[0], &x);
        rc |= nn_f32_out(&call->out[0], &y);
        if (!rc) {
                isz = nn_geom_in_size(&pl.g);
                osz = nn_geom_out_size(&pl.g);
                for (p = 0; p < pl.planes && !stop; p++)
                        stop = pool_plane(&pl, &taps, x.p + p * isz, y.p + p * osz,
                                          idx ? idx + p * osz : NULL, p * isz, &since);
                if (!stop)
                        nn_f32_commit(&call->out[0], &y);
        }
        ops_buf_free(taps.mem);
        nn_f32_done(&x);
        nn_f32_done(&y);
        if (rc)
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        if (stop) {
                ops_poll(def->name, err, errlen);
                return -ECANCELED;
        }
        return 0;
}

static void pool_cost(const struct ops_def *def, enum pool_kind kind, int global,
                      const struct ops_call *call, uint64_t *ret_flops, uint64_t *ret_bytes)
{
        struct pool pl;

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        if (!pool_setup(def, kind, global, call, &pl, NULL, 0))
                *ret_flops = ops_mul_sat(ops_mul_sat((uint64_t)pl.planes,
                                                     (uint64_t)nn_geom_out_size(&pl.g)),
                                         (uint64_t)nn_geom_k_size(&pl.g) *
                                                 (kind == POOL_LP ? 8 : 1));
}

/* The entry points of each pool operator. */
#define POOL_DEF(var, sym, opname, kind, global, maxin, nout, eng, since)                   \
        static int sym##_infer(const struct ops_def *def, struct ops_call *call, char *err,    \
                               size_t errlen)                                                  \
        {                                                                                      \
                return pool_infer(def, kind, global, call, err, errlen);                       \
        }                                                                                      \
        static int sym##_run(const struct ops_def *def, const struct ops_call *call, char *err,\
                             size_t errlen)                                                    \
        {                                                                                      \
                return pool_run(def, kind, global, call, err, errlen);                         \
        }                                                                                      \
        static void sym##_cost(const struct ops_def *def, const struct ops_call *call,         \
                               uint64_t *f, uint64_t *b)                                       \
        {                                                                                      \
                pool_cost(def, kind, global, call, f, b);                                      \
        }                                                                                      \
        const struct ops_def var = {                                                           \
                .name = opname, .min_inputs = 1, .max_inputs = maxin, .outputs = nout,         \
                .engine = eng,   .run = sym##_run, .cost = sym##_cost, .infer = sym##_infer,  \
                .since_version = since,                                                        \
        };

POOL_DEF(ops_max_pool_def, maxpool, "MaxPool", POOL_MAX, 0, 1, 2, OPS_ENGINE_VECTOR, 1)
POOL_DEF(ops_average_pool_def, avgpool, "AveragePool", POOL_AVG, 0, 1, 1, OPS_ENGINE_VECTOR, 1)
POOL_DEF(ops_lp_pool_def, lppool, "LpPool", POOL_LP, 0, 1, 1, OPS_ENGINE_VECTOR, 1)
POOL_DEF(ops_global_max_pool_def, gmaxpool, "GlobalMaxPool", POOL_MAX, 1, 1, 1,
         OPS_ENGINE_VECTOR, 1)
POOL_DEF(ops_global_average_pool_def, gavgpool, "GlobalAveragePool", POOL_AVG, 1, 1, 1,
         OPS_ENGINE_VECTOR, 1)
POOL_DEF(ops_global_lp_pool_def, glppool, "GlobalLpPool", POOL_LP, 1, 1, 1, OPS_ENGINE_VECTOR,
         1)

/* ---------------------------------------------------------------- MaxUnpool */

/* Output shape: the output_shape input when given (its data is needed), else the inverse of
 * the pool's geometry: (in - 1) * stride + kernel - pads. The indices always address the
 * latter (defdims), as the pool that made them saw it; a larger output_shape holds it in
 * its leading corner. */
static int unpool_shape(const struct ops_call *call, int64_t *ydims, int64_t *defdims,
                        int *ndim, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *idx = &call->in[1];
        int64_t ks[NN_SP];
        struct nn_geom g;
        int nsp = x->ndim - 2, i, rc;

        if (x->ndim < 3 || x->ndim > NN_SP + 2)
                return ops_fail(err, errlen, -EINVAL, "MaxUnpool: input of rank %d", x->ndim);
        if (idx->dtype != PROTO_DTYPE_INT64 || !ops_shape_equal(x, idx))
                return ops_fail(err, errlen, -EINVAL, "MaxUnpool: I must be int64 shaped like X");
        if (nn_attr_ints(call, "kernel_shape", ks, NN_SP) != nsp)
                return ops_fail(err, errlen, -EINVAL, "MaxUnpool: 'kernel_shape' needs %d values",
                                nsp);
        rc = nn_geom_attrs(call, "MaxUnpool", nsp, NN_GEOM_NODIL, &g, err, errlen);
        if (rc)
                return rc;
        *ndim = x->ndim;
        defdims[0] = x->dims[0];
        defdims[1] = x->dims[1];
        for (i = 0; i < nsp; i++) {
                int o = NN_SP - nsp + i;

                defdims[2 + i] = (x->dims[2 + i] - 1) * g.stride[o] + ks[i] - g.pb[o] - g.pe[o];
                if (defdims[2 + i] < 0)
                        return ops_fail(err, errlen, -EINVAL, "MaxUnpool: pads exceed the output");
        }
        memcpy(ydims, defdims, (size_t)x->ndim * sizeof(*ydims));
        if (nn_has_in(call, 2)) {
                const struct ops_tensor *s = &call->in[2];

                if (s->dtype != PROTO_DTYPE_INT64 || s->ndim != 1 || s->dims[0] != x->ndim)
                        return ops_fail(err, errlen, -EINVAL,
                                        "MaxUnpool: output_shape must be int64 [%d]", x->ndim);
                if (!s->data)
                        return ops_fail(err, errlen, -EINVAL,
                                        "MaxUnpool: output_shape is only known when running");
                for (i = 0; i < x->ndim; i++) {
                        ydims[i] = ((const int64_t *)s->data)[i];
                        if (ydims[i] < 0 || (i < 2 && ydims[i] != x->dims[i]))
                                return ops_fail(err, errlen, -EINVAL,
                                                "MaxUnpool: output_shape does not fit X");
                }
        }
        return 0;
}

static int unpool_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t ydims[OPS_MAX_DIMS], defdims[OPS_MAX_DIMS];
        int rc, ndim = 0;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, pool_max_types, err, errlen);
        if (!rc)
                rc = unpool_shape(call, ydims, defdims, &ndim, err, errlen);
        if (rc)
                return rc;
        nn_set_out(call, 0, call->in[0].dtype, ndim, ydims);
        return 0;
}

static int unpool_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        const int64_t *idx = call->in[1].data;
        int64_t n = ops_tensor_numel(x), ny = ops_tensor_numel(y), i, j, defn = 1, flat, rem;
        int64_t ydims[OPS_MAX_DIMS], defdims[OPS_MAX_DIMS];
        size_t es = proto_dtype_size(x->dtype);
        int rc, ndim = 0, same, d;

        rc = unpool_shape(call, ydims, defdims, &ndim, err, errlen);
        if (rc)
                return rc;
        same = !memcmp(ydims, defdims, (size_t)ndim * sizeof(*ydims));
        for (d = 0; d < ndim; d++)
                defn *= defdims[d];
        memset(y->data, 0, (size_t)ny * es);
        for (i = 0; i < n; i++) {
                if (idx[i] < 0 || idx[i] >= (same ? ny : defn))
                        return ops_fail(err, errlen, -EINVAL, "MaxUnpool: index %lld out of range",
                                        (long long)idx[i]);
                flat = idx[i];
                if (!same) {
                        /* re-address from the default shape into the output's corner */
                        int64_t mul = 1;

                        rem = idx[i];
                        flat = 0;
                        for (d = ndim - 1; d >= 0; d--) {
                                j = rem % defdims[d];
                                rem /= defdims[d];
                                if (j >= ydims[d])
                                        break;
                                flat += j * mul;
                                mul *= ydims[d];
                        }
                        if (d >= 0)
                                continue; /* outside a smaller output */
                }
                memcpy((char *)y->data + (size_t)flat * es, (const char *)x->data + (size_t)i * es,
                       es);
        }
        return 0;
}

static void unpool_cost(const struct ops_def *def, const struct ops_call *call,
                        uint64_t *ret_flops, uint64_t *ret_bytes)
{
        nn_cost_simple(call, 1, ret_flops, ret_bytes);
}

const struct ops_def ops_max_unpool_def = {
        .name = "MaxUnpool", .min_inputs = 2, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = unpool_run, .cost = unpool_cost, .infer = unpool_infer,
        .since_version = 9,
};

/* Conv by oneDNN's direct convolution on filters reordered once (blas.h, struct
 * ops_packed_conv).
 *
 * oneDNN's fast convolutions (jit:avx512_core, brgconv) read and write channel-blocked
 * layouts (nChw16c, nhwc) that it picks itself when the source and destination formats are
 * left "any"; on NCHW data it only has its own im2col + GEMM, no faster than ours. So every
 * band of output rows is three primitives: a reorder of the input rows it reads (a strided
 * view of the NCHW input, no copy) into the blocked layout, the convolution with the band's
 * own top and bottom pads, and a reorder of its output rows into their place in the NCHW
 * output. Both reorders cost about 2 % of the convolution at the ResNet block's 64x56x56.
 * The bias and a Relu / LeakyRelu are the convolution's own (its bias argument and an eltwise
 * post-op), applied while each output block is in registers. A graph node with packed
 * filters runs its row parts this way straight from the node's input into its output
 * (graph_conv_direct_rows), with no copy of the part's rows.
 *
 * The filters' blocked layout is fixed when they are packed (from the layout oneDNN wants for
 * the typical input given then); a band geometry whose convolution would want another
 * layout, or that oneDNN refuses, takes the caller's im2col path. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "dnnl-common.h"
#include "util/spin.h"
#include "ops-internal.h"
#include "runctx.h"

/* A band's geometry: the input rows it reads of an image of ih rows, its pads, and the
 * output rows it writes of an image of oh rows. */
struct band_key {
        int64_t ih, iw, rows_in, pt, pb, pl, pr, oh, rows_out;
        int bias, act; /* the epilogue: a bias input, an activation (enum ops_conv_act) */
        float alpha;   /* of the activation */
};

struct band_shape {
        struct band_key key;
        int ok;
        dnnl_primitive_t conv, rin, rout;           /* rin / rout NULL: the layout is NCHW */
        dnnl_memory_desc_t x_md, xb_md, y_md, yb_md; /* plain views and the blocked copies */
        dnnl_memory_desc_t sp_md[3];                 /* scratchpads of conv, rin, rout */
        size_t xb_bytes, yb_bytes, sp_bytes[3];
};

struct ops_packed_conv {
        const float *src;
        int64_t m, c, kh, kw, sh, sw, dh, dw; /* dh, dw: ONNX dilations (1: none) */
        dnnl_memory_desc_t w_md;
        dnnl_memory_t w;
        uint64_t bytes;
        uint64_t runs; /* atomic */
        spin_lock_t mu;            /* held for lookups: parts of one node use it at once */
        int nshapes;
        struct band_shape shapes[OPS_PACKED_MAX_SHAPES];
};

static __thread const struct ops_packed_conv *cur;

void ops_conv_packed(const struct ops_packed_conv *p)
{
        cur = p;
}

/* The plain NCHW view of rows rows of an image of `full` rows: [1, ch, rows, width]. */
static void plain_view(dnnl_memory_desc_t *md, int64_t ch, int64_t full, int64_t rows, int64_t width)
{
        dnnl_dims_t d = { 1, ch, rows, width }, s = { ch * full * width, full * width, width, 1 };

        dnnl_memory_desc_init_by_strides(md, 4, d, dnnl_f32, s);
}

/* The convolution of band k's geometry on filters of layout w_md (format any: oneDNN's
 * choice), its source and destination layouts left to oneDNN. */
static dnnl_status_t conv_pd(dnnl_primitive_desc_t *pd, const struct ops_packed_conv *p, const struct band_key *k,
                             const dnnl_memory_desc_t *w_md)
{
        dnnl_dims_t xd = { 1, p->c, k->rows_in, k->iw }, yd = { 1, p->m, k->rows_out, 0 };
        dnnl_dims_t strides = { p->sh, p->sw }, dil = { p->dh - 1, p->dw - 1 };
        dnnl_dims_t pl = { k->pt, k->pl }, pr = { k->pb, k->pr };
        dnnl_dims_t bd = { p->m };
        dnnl_memory_desc_t x_md, y_md, b_md;
        dnnl_convolution_desc_t cd;
        dnnl_primitive_attr_t attr = NULL;
        dnnl_post_ops_t po = NULL;
        dnnl_status_t st;

        yd[3] = (k->iw + k->pl + k->pr - ((p->kw - 1) * p->dw + 1)) / p->sw + 1;
        dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x);
        st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                        &x_md, w_md, k->bias ? &b_md : NULL, &y_md, strides, dil,
                                                        pl, pr);
        if (st == dnnl_success)
                st = dnnl_primitive_attr_create(&attr);
        if (st == dnnl_success)
                st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
        if (st == dnnl_success && k->act == OPS_CONV_ACT_RELU) {
                st = dnnl_post_ops_create(&po);
                if (st == dnnl_success)
                        st = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, k->alpha, 0.0f);
                if (st == dnnl_success)
                        st = dnnl_primitive_attr_set_post_ops(attr, po);
        }
        if (st == dnnl_success)
                st = dnnl_primitive_desc_create(pd, &cd, attr, ops_dnnl_engine(), NULL);
        if (po)
                dnnl_post_ops_destroy(po);
        if (attr)
                dnnl_primitive_attr_destroy(attr);
        return st;
}

/* A reorder primitive from one layout to another and its scratchpad; *prim stays NULL when
 * the layouts are the same. */
static dnnl_status_t reorder_of(dnnl_primitive_t *prim, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                dnnl_memory_desc_t *sp_md, size_t *sp_bytes)
{
        dnnl_primitive_desc_t pd = NULL;
        dnnl_primitive_attr_t attr = NULL;
        dnnl_status_t st;

        *prim = NULL;
        if (dnnl_memory_desc_equal(from, to))
                return dnnl_success;
        st = dnnl_primitive_attr_create(&attr);
        if (st == dnnl_success)
                st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
        if (st == dnnl_success)
                st = dnnl_reorder_primitive_desc_create(&pd, from, ops_dnnl_engine(), to, ops_dnnl_engine(), attr);
        if (st == dnnl_success) {
                const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
                if (sp) {
                        *sp_md = *sp;
                        *sp_bytes = dnnl_memory_desc_get_size(sp);
                }
                st = dnnl_primitive_create(prim, pd);
        }
        if (pd)
                dnnl_primitive_desc_destroy(pd);
        if (attr)
                dnnl_primitive_attr_destroy(attr);
        return st;
}

static void shape_clear(struct band_shape *sh)
{
        if (sh->conv)
                dnnl_primitive_destroy(sh->conv);
        if (sh->rin)
                dnnl_primitive_destroy(sh->rin);
        if (sh->rout)
                dnnl_primitive_destroy(sh->rout);
        sh->conv = sh->rin = sh->rout = NULL;
}

/* The primitives of a band geometry (made on first use; NULL when oneDNN refused it, would
 * want the filters in another layout, or the table is full). Entries are never removed
 * before the packed filters are freed. */
static const struct band_shape *band_shape(struct ops_packed_conv *p, const struct band_key *k)
{
        struct band_shape *sh = NULL;
        dnnl_primitive_desc_t pd = NULL;
        dnnl_status_t st;

        spin_lock(&p->mu);
        for (int i = 0; i < p->nshapes; i++)
                if (!memcmp(&p->shapes[i].key, k, sizeof(*k))) {
                        sh = &p->shapes[i];
                        goto out;
                }
        if (p->nshapes == OPS_PACKED_MAX_SHAPES)
                goto out;
        sh = &p->shapes[p->nshapes++];
        sh->key = *k;
        st = conv_pd(&pd, p, k, &p->w_md);
        if (st != dnnl_success)
                goto out;
        const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (!w || !dnnl_memory_desc_equal(w, &p->w_md))
                goto out;
        sh->xb_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        sh->yb_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        sh->xb_bytes = dnnl_memory_desc_get_size(&sh->xb_md);
        sh->yb_bytes = dnnl_memory_desc_get_size(&sh->yb_md);
        if (sp) {
                sh->sp_md[0] = *sp;
                sh->sp_bytes[0] = dnnl_memory_desc_get_size(sp);
        }
        plain_view(&sh->x_md, p->c, k->ih, k->rows_in, k->iw);
        plain_view(&sh->y_md, p->m, k->oh, k->rows_out, sh->yb_md.dims[3]);
        st = dnnl_primitive_create(&sh->conv, pd);
        if (st == dnnl_success)
                st = reorder_of(&sh->rin, &sh->x_md, &sh->xb_md, &sh->sp_md[1], &sh->sp_bytes[1]);
        if (st == dnnl_success)
                st = reorder_of(&sh->rout, &sh->yb_md, &sh->y_md, &sh->sp_md[2], &sh->sp_bytes[2]);
        sh->ok = st == dnnl_success;
        if (!sh->ok)
                shape_clear(sh);
out:
        if (pd)
                dnnl_primitive_desc_destroy(pd);
        spin_unlock(&p->mu);
        return sh && sh->ok ? sh : NULL;
}

struct ops_packed_conv *ops_packed_conv_new(const float *w, const int64_t wdims[4], const int64_t strides[2],
                                            const int64_t dilations[2], const int64_t in_hw[2],
                                            const int64_t pads[4], char *err, size_t errlen)
{
        const char *env = getenv("NPUD_CONV_DIRECT");
        dnnl_primitive_desc_t pd = NULL;
        dnnl_memory_desc_t any_md, plain_md;
        dnnl_status_t st;
        struct ops_packed_conv *p;

        if (!ops_dnnl_wanted()) {
                snprintf(err, errlen, "oneDNN not in use");
                return NULL;
        }
        if (env && strcmp(env, "0") == 0) {
                snprintf(err, errlen, "direct convolution off (NPUD_CONV_DIRECT=0)");
                return NULL;
        }
        for (int i = 0; i < 4; i++)
                if (wdims[i] < 1 || wdims[i] > (1 << 20) || pads[i] < 0 || pads[i] > (1 << 20)) {
                        snprintf(err, errlen, "filter or pad extent out of range");
                        return NULL;
                }
        for (int i = 0; i < 2; i++)
                if (strides[i] < 1 || dilations[i] < 1 || in_hw[i] < 1 || strides[i] > (1 << 20) ||
                    dilations[i] > (1 << 20) || in_hw[i] > (1 << 24)) {
                        snprintf(err, errlen, "stride, dilation or input extent out of range");
                        return NULL;
                }
        if (!ops_dnnl_engine() || !ops_dnnl_stream()) {
                snprintf(err, errlen, "no oneDNN engine");
                return NULL;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                snprintf(err, errlen, "out of memory");
                return NULL;
        }
        p->src = w;
        p->m = wdims[0];
        p->c = wdims[1];
        p->kh = wdims[2];
        p->kw = wdims[3];
        p->sh = strides[0];
        p->sw = strides[1];
        p->dh = dilations[0];
        p->dw = dilations[1];
        ops_dnnl_one_thread();
        dnnl_dims_t wd = { p->m, p->c, p->kh, p->kw };
        struct band_key k = { .ih = in_hw[0], .iw = in_hw[1], .rows_in = in_hw[0], .pt = pads[0],
                              .pl = pads[1], .pb = pads[2], .pr = pads[3] };
        k.oh = k.rows_out = (k.ih + k.pt + k.pb - ((p->kh - 1) * p->dh + 1)) / p->sh + 1;
        if (k.oh < 1 || (k.iw + k.pl + k.pr - ((p->kw - 1) * p->dw + 1)) / p->sw + 1 < 1) {
                snprintf(err, errlen, "empty output");
                ops_packed_conv_free(p);
                return NULL;
        }
        /* the layout oneDNN picks for filters of any format on the typical input */
        dnnl_memory_desc_init_by_tag(&any_md, 4, wd, dnnl_f32, dnnl_format_tag_any);
        st = conv_pd(&pd, p, &k, &any_md);
        if (st == dnnl_success)
                p->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        dnnl_memory_desc_init_by_tag(&plain_md, 4, wd, dnnl_f32, dnnl_oihw);
        if (st == dnnl_success)
                st = ops_dnnl_pack(&plain_md, w, &p->w_md, &p->w);
        if (st == dnnl_success)
                p->bytes = dnnl_memory_desc_get_size(&p->w_md);
        if (pd)
                dnnl_primitive_desc_destroy(pd);
        if (st != dnnl_success) {
                snprintf(err, errlen, "oneDNN refused the convolution (status %d)", (int)st);
                ops_packed_conv_free(p);
                return NULL;
        }
        return p;
}

void ops_packed_conv_free(struct ops_packed_conv *p)
{
        if (!p)
                return;
        for (int i = 0; i < p->nshapes; i++)
                shape_clear(&p->shapes[i]);
        if (p->w)
                dnnl_memory_destroy(p->w);
        free(p);
}

uint64_t ops_packed_conv_bytes(const struct ops_packed_conv *p)
{
        return p ? p->bytes : 0;
}

uint64_t ops_packed_conv_runs(const struct ops_packed_conv *p)
{
        return p ? __atomic_load_n(&p->runs, __ATOMIC_RELAXED) : 0;
}

static size_t up64(size_t n)
{
        return (n + 63) & ~(size_t)63;
}

/* One band through its three primitives; dnnl_success or the failing status. */
static dnnl_status_t run_band(const struct ops_packed_conv *p, const struct band_shape *sh, const float *x,
                              const float *bias, float *y, char *buf, dnnl_stream_t s)
{
        dnnl_memory_t m[8] = { 0 };
        enum { X, XB, Y, YB, SP0, SP1, SP2, B };
        dnnl_engine_t e = ops_dnnl_engine();
        char *at = buf;
        dnnl_status_t st;

        st = dnnl_memory_create(&m[X], &sh->x_md, e, (void *)x);
        if (st == dnnl_success)
                st = dnnl_memory_create(&m[Y], &sh->y_md, e, y);
        if (st == dnnl_success && sh->key.bias) {
                dnnl_dims_t bd = { p->m };
                dnnl_memory_desc_t b_md;
                dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x);
                st = dnnl_memory_create(&m[B], &b_md, e, (void *)bias);
        }
        if (st == dnnl_success && sh->rin) {
                st = dnnl_memory_create(&m[XB], &sh->xb_md, e, at);
                at += up64(sh->xb_bytes);
        }
        if (st == dnnl_success && sh->rout) {
                st = dnnl_memory_create(&m[YB], &sh->yb_md, e, at);
                at += up64(sh->yb_bytes);
        }
        for (int i = 0; i < 3 && st == dnnl_success; i++)
                if (sh->sp_bytes[i]) {
                        st = dnnl_memory_create(&m[SP0 + i], &sh->sp_md[i], e, at);
                        at += up64(sh->sp_bytes[i]);
                }
        dnnl_memory_t xin = sh->rin ? m[XB] : m[X], yout = sh->rout ? m[YB] : m[Y];
        if (st == dnnl_success && sh->rin) {
                dnnl_exec_arg_t a[3] = { { DNNL_ARG_FROM, m[X] }, { DNNL_ARG_TO, m[XB] }, { DNNL_ARG_SCRATCHPAD, m[SP1] } };
                st = dnnl_primitive_execute(sh->rin, s, m[SP1] ? 3 : 2, a);
        }
        if (st == dnnl_success) {
                dnnl_exec_arg_t a[5] = { { DNNL_ARG_SRC, xin }, { DNNL_ARG_WEIGHTS, p->w }, { DNNL_ARG_DST, yout } };
                int na = 3;
                if (m[B])
                        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, m[B] };
                if (m[SP0])
                        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, m[SP0] };
                st = dnnl_primitive_execute(sh->conv, s, na, a);
        }
        if (st == dnnl_success && sh->rout) {
                dnnl_exec_arg_t a[3] = { { DNNL_ARG_FROM, m[YB] }, { DNNL_ARG_TO, m[Y] }, { DNNL_ARG_SCRATCHPAD, m[SP2] } };
                st = dnnl_primitive_execute(sh->rout, s, m[SP2] ? 3 : 2, a);
        }
        if (st == dnnl_success)
                st = dnnl_stream_wait(s);
        for (int i = 0; i < 8; i++)
                if (m[i])
                        dnnl_memory_destroy(m[i]);
        return st;
}

int ops_conv_direct(const struct ops_conv_direct_args *a, char *err, size_t errlen)
{
        struct ops_packed_conv *p = (struct ops_packed_conv *)cur;
        const struct band_shape *sh;
        int64_t oh = a->oh, ow = a->ow, ih = a->ih, iw = a->iw, c = a->c;
        int64_t lo0 = a->lo, hi0 = a->hi > 0 ? a->hi : oh;
        dnnl_stream_t s;

        if (a->packed)
                p = (struct ops_packed_conv *)a->packed;
        else if (ops_sgemm_forced() != OPS_SGEMM_ONEDNN_DIRECT)
                return 1;
        if (!p || a->w != p->src || c != p->c || a->wdims[0] != p->m || a->wdims[1] != p->c ||
            a->wdims[2] != p->kh || a->wdims[3] != p->kw || a->strides[0] != p->sh || a->strides[1] != p->sw ||
            a->dilations[0] != p->dh || a->dilations[1] != p->dw || a->n < 1 || ih < 1 || iw < 1 || oh < 1 ||
            ow < 1 || lo0 < 0 || hi0 > oh || lo0 >= hi0 || (a->act != OPS_CONV_ACT_NONE && a->act != OPS_CONV_ACT_RELU) ||
            !ops_dnnl_engine() || !(s = ops_dnnl_stream()))
                return 1;
        ops_dnnl_one_thread();
        /* output rows per band: about OPS_POLL_MACS multiply-adds */
        double row_macs = (double)p->m * (double)p->c * (double)(p->kh * p->kw) * (double)ow;
        int64_t band = row_macs >= OPS_POLL_MACS ? 1 : (int64_t)(OPS_POLL_MACS / row_macs);
        if (band > hi0 - lo0)
                band = hi0 - lo0;
        for (int64_t img = 0; img < a->n; img++) {
                for (int64_t lo = lo0; lo < hi0; lo += band) {
                        int64_t hi = lo + band < hi0 ? lo + band : hi0;
                        /* the input rows [r0, r1) the band reads, the part of them outside
                         * the image its pads */
                        int64_t r0 = lo * p->sh - a->pads[0], r1 = (hi - 1) * p->sh - a->pads[0] + (p->kh - 1) * p->dh + 1;
                        int64_t ra = r0 > 0 ? r0 : 0, rb = r1 < ih ? r1 : ih;
                        if (ra >= rb)
                                return 1; /* a band of padding only */
                        struct band_key k = { .ih = ih, .iw = iw, .rows_in = rb - ra, .pt = ra - r0, .pb = r1 - rb,
                                              .pl = a->pads[1], .pr = a->pads[3], .oh = oh, .rows_out = hi - lo,
                                              .bias = a->bias != NULL, .act = a->act,
                                              .alpha = a->act == OPS_CONV_ACT_RELU ? a->alpha : 0.0f };
                        if ((img || lo > lo0) && ops_poll("Conv", err, errlen))
                                return -ECANCELED;
                        if (!(sh = band_shape(p, &k)) || sh->yb_md.dims[3] != ow)
                                return 1;
                        char msg[128] = "";
                        size_t need = up64(sh->rin ? sh->xb_bytes : 0) + up64(sh->rout ? sh->yb_bytes : 0) +
                                      up64(sh->sp_bytes[0]) + up64(sh->sp_bytes[1]) + up64(sh->sp_bytes[2]);
                        char *raw = ops_buf_alloc(need + 64, msg, sizeof(msg));
                        if (!raw)
                                return 1; /* the im2col path reports the budget */
                        char *buf = (char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
                        dnnl_status_t st = run_band(p, sh, a->x + ((img * c) * ih + ra) * iw, a->bias,
                                                    a->y + ((img * p->m) * oh + lo) * ow, buf, s);
                        ops_buf_free(raw);
                        if (st != dnnl_success)
                                return 1;
                        __atomic_add_fetch(&p->runs, 1, __ATOMIC_RELAXED);
                }
        }
        return 0;
}

/* Splitting a long node into exact parts (see split.h). */
#include <string.h>

#include "proto/dtype.h"
#include "compile.h"
#include "split.h"

static int named(const struct ops_def *def, const char *name)
{
        return def && def->name && !strcmp(def->name, name) && (!def->domain || !def->domain[0] ||
                                                                !strcmp(def->domain, "ai.onnx"));
}

static const struct ops_attr *find_attr(const struct ops_call *c, const char *name)
{
        for (int j = 0; j < c->nattr; j++)
                if (!strcmp(c->attr[j].name, name))
                        return &c->attr[j];
        return NULL;
}

static int has_in(const struct ops_call *c, int i)
{
        return i < c->nin && c->in[i].dtype;
}

static int64_t numel(const struct ops_tensor *t)
{
        return ops_tensor_numel(t);
}

/* Can a Gemm's C follow a column split: a scalar, or a row vector broadcast over the rows
 * (its slice is contiguous)? A full [M,N] matrix is not, nor a column vector (it is whole
 * in every part, which is fine too). */
static int gemm_c_cols_ok(const struct ops_call *c, int64_t m)
{
        const struct ops_tensor *t = &c->in[2];

        if (!has_in(c, 2) || t->ndim <= 1)
                return 1;
        return t->ndim == 2 && (t->dims[0] == 1 || m == 1);
}

/* Does the epilogue of a FusedGemm call follow a split of its operator? Its bias is one
 * value or one per column (MatMul, Gemm) or channel (Conv), which a part slices with
 * slice_vec; the activation is elementwise, but for extra inputs that are not scalars (a
 * PRelu slope per channel), which stay with the whole node. */
static int epilogue_splits(const struct graph_epilogue *ep, const struct ops_call *call)
{
        for (int i = 1; i < ep->act_nin; i++) {
                int k = ep->nin_op + ep->bias + ep->resid + i - 1;
                if (k < call->nin && call->in[k].dtype && numel(&call->in[k]) != 1)
                        return 0;
        }
        return 1;
}

/* GRAPH_SPLIT_LEADING: the first output dim larger than 1, if it comes before `below`;
 * every tensor of the call has it (aligned from the right) as the extent, as 1, or not at
 * all, and only dims of 1 before it, so that a range of it is contiguous. Parts keep about
 * GRAPH_SPLIT_MIN_ELEMS / 4 elements of the output at least. */
static void plan_leading(const struct ops_call *c, int below, struct graph_split *s)
{
        const struct ops_tensor *y = &c->out[0];
        int d = 0;

        while (d < y->ndim && y->dims[d] == 1)
                d++;
        if (d >= below || d >= y->ndim)
                return;
        int64_t ext = y->dims[d];
        for (int i = 0; i < c->nin + c->nout; i++) {
                const struct ops_tensor *t = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
                int k = d - (y->ndim - t->ndim);
                if (!t->dtype || k < 0)
                        continue;
                for (int j = 0; j < k; j++)
                        if (t->dims[j] != 1)
                                return;
                if (t->dims[k] != ext && (t->dims[k] != 1 || i >= c->nin))
                        return;
        }
        int64_t inner = ext ? numel(y) / ext : 0, min = inner ? (GRAPH_SPLIT_MIN_ELEMS / 4 + inner - 1) / inner : 1;
        *s = (struct graph_split){ GRAPH_SPLIT_LEADING, ext, min > 0 ? min : 1, d };
}

/* The axis attribute of a Softmax-like call, normalized against rank r. */
static int axis_of(const struct ops_call *call, int r, int64_t def)
{
        int64_t a = ops_attr_int(call, "axis", def);

        return (int)(a < 0 ? a + r : a);
}

void graph_split_plan(const struct ops_def *def, const struct ops_call *call, struct graph_split *s)
{
        const struct graph_epilogue *ep = graph_fused_gemm_epilogue(call);

        memset(s, 0, sizeof(*s));
        if (call->nout < 1 || !call->out[0].dtype)
                return;
        if (def && (def->flags & OPS_FLAG_ELEMENTWISE) && call->nout == 1) {
                int64_t n = numel(&call->out[0]);
                for (int i = 0; i < call->nin; i++)
                        if (has_in(call, i) && numel(&call->in[i]) != n && numel(&call->in[i]) != 1)
                                return; /* it broadcasts for real */
                if (n > 1)
                        *s = (struct graph_split){ GRAPH_SPLIT_FLAT, n, GRAPH_SPLIT_MIN_ELEMS, 0 };
                return;
        }
        const struct ops_tensor *y0 = &call->out[0];
        if (def == &graph_fused_softmax_def) {
                plan_leading(call, y0->ndim - 1, s);
                return;
        }
        if (named(def, "Softmax") || named(def, "LogSoftmax")) {
                plan_leading(call, axis_of(call, y0->ndim, call->opset && call->opset < 13 ? 1 : -1), s);
                return;
        }
        if (named(def, "LayerNormalization")) {
                plan_leading(call, axis_of(call, y0->ndim, -1), s);
                return;
        }
        if (call->nin < 2)
                return;
        if (ep) { /* a FusedGemm splits as its operator does */
                if (!epilogue_splits(ep, call))
                        return;
                def = ep->op;
        }
        const struct ops_tensor *a = &call->in[0], *b = &call->in[1], *y = &call->out[0];
        if (named(def, "MatMul")) {
                if (a->ndim >= 3 && b->ndim >= 3) { /* batched: over the batch dims */
                        plan_leading(call, y->ndim - 2, s);
                        return;
                }
                if (a->ndim < 2 || b->ndim != 2 || y->ndim != a->ndim || !a->dims[a->ndim - 1])
                        return;
                *s = (struct graph_split){ GRAPH_SPLIT_ROWS, numel(a) / a->dims[a->ndim - 1],
                                           GRAPH_SPLIT_MIN_GEMM_ROWS, 0 };
        } else if (named(def, "Gemm")) {
                if (a->ndim != 2 || b->ndim != 2 || y->ndim != 2)
                        return;
                int64_t m = y->dims[0], n = y->dims[1];
                if (!ops_attr_int(call, "transA", 0) && m / GRAPH_SPLIT_MIN_ROWS >= 2)
                        *s = (struct graph_split){ GRAPH_SPLIT_ROWS, m, GRAPH_SPLIT_MIN_GEMM_ROWS, 0 };
                else if (ops_attr_int(call, "transB", 0) && gemm_c_cols_ok(call, m) && !(ep && ep->resid))
                        /* (a residual's column block is not contiguous) */
                        *s = (struct graph_split){ GRAPH_SPLIT_COLS, n, GRAPH_SPLIT_MIN_ROWS, 0 };
        } else if (named(def, "Conv")) {
                if (a->ndim < 3 || b->ndim != a->ndim || y->ndim != a->ndim)
                        return;
                const struct ops_attr *ap = find_attr(call, "auto_pad"), *pads = find_attr(call, "pads");
                if (a->dims[0] >= 2)
                        *s = (struct graph_split){ GRAPH_SPLIT_BATCH, a->dims[0], 1, 0 };
                else if (a->ndim == 4 && y->dims[2] >= 2 * GRAPH_SPLIT_MIN_SPATIAL &&
                         (!ap || (ap->type == OPS_ATTR_STRING && ap->s && !strcmp(ap->s, "NOTSET"))) &&
                         (!pads || (pads->ints && pads->n == 4)))
                        *s = (struct graph_split){ GRAPH_SPLIT_SPATIAL, y->dims[2], GRAPH_SPLIT_MIN_SPATIAL, 0 };
                else if (ops_attr_int(call, "group", 1) == 1)
                        *s = (struct graph_split){ GRAPH_SPLIT_CHANNELS, b->dims[0],
                                                   GRAPH_SPLIT_MIN_CHANNELS, 0 };
        }
}

uint32_t graph_split_max_parts(const struct ops_def *def, const struct ops_call *call)
{
        return graph_split_max_parts_packed(def, call, 0);
}

uint32_t graph_split_max_parts_packed(const struct ops_def *def, const struct ops_call *call,
                                      int b_packed)
{
        struct graph_split s;

        graph_split_plan(def, call, &s);
        if (b_packed && s.how == GRAPH_SPLIT_ROWS)
                s.min = GRAPH_SPLIT_MIN_ROWS_PACKED;
        if (s.how == GRAPH_SPLIT_NONE || s.min <= 0 || s.extent < 2 * s.min)
                return 1;
        int64_t n = s.extent / s.min;
        return n > GRAPH_SPLIT_MAX_PARTS ? GRAPH_SPLIT_MAX_PARTS : (uint32_t)n;
}

/* Move t's data pointer on by count elements. */
static void advance(struct ops_tensor *t, int64_t count)
{
        if (t->data)
                t->data = (char *)t->data + count * (int64_t)proto_dtype_size(t->dtype);
}

/* Tensor t seen flat, elements [lo, lo + len) of it, or its one element whole. */
static void flat(struct ops_tensor *t, int64_t lo, int64_t len)
{
        if (!t->dtype)
                return;
        if (numel(t) == 1) {
                t->ndim = 1;
                t->dims[0] = 1;
                return;
        }
        advance(t, lo);
        t->ndim = 1;
        t->dims[0] = len;
}

/* A FusedGemm's bias in a part covering [lo, lo + len) of extent columns or channels: one
 * value stays whole; one per column or channel (its one dim that is not 1) is narrowed. */
static void slice_vec(struct ops_tensor *t, int64_t extent, int64_t lo, int64_t len)
{
        if (!t->dtype || numel(t) != extent || extent <= 1)
                return;
        for (int d = t->ndim - 1; d >= 0; d--)
                if (t->dims[d] == extent) {
                        t->dims[d] = len;
                        advance(t, lo);
                        return;
                }
}

/* Element i of an ints attribute, or def when it is absent or shorter. */
static int64_t attr_at(const struct ops_call *c, const char *name, int i, int64_t def)
{
        const struct ops_attr *a = find_attr(c, name);

        return a && a->ints && i < a->n ? a->ints[i] : def;
}

void graph_split_conv_rows(const struct ops_call *whole, int64_t lo, int64_t hi,
                           struct graph_split_rows *r)
{
        int64_t h = whole->in[0].dims[2], k = whole->in[1].dims[2];
        int64_t st = attr_at(whole, "strides", 0, 1), dil = attr_at(whole, "dilations", 0, 1);
        int64_t pt = attr_at(whole, "pads", 0, 0);
        int64_t r0 = lo * st - pt, r1 = (hi - 1) * st - pt + (k - 1) * dil + 1;

        r->a = r0 > 0 ? r0 : 0;
        r->b = r1 < h ? r1 : h;
        r->top = r->a - r0;
        r->bottom = r1 - r->b;
}

void graph_split_part(const struct ops_call *whole, const struct graph_split *s, int k, int n,
                      struct ops_call *c, int64_t *lo, int64_t *hi)
{
        *lo = s->extent * k / n;
        *hi = s->extent * (k + 1) / n;
        int64_t len = *hi - *lo;
        struct ops_tensor *a = &c->in[0], *b = &c->in[1], *y = &c->out[0];
        const struct ops_tensor *wa = &whole->in[0], *wb = &whole->in[1], *wy = &whole->out[0];

        switch (s->how) {
        case GRAPH_SPLIT_SPATIAL: /* the caller makes the part's input, pads and output */
                return;
        case GRAPH_SPLIT_LEADING:
                for (int i = 0; i < c->nin + c->nout; i++) {
                        struct ops_tensor *t = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
                        int at = s->dim - (wy->ndim - t->ndim);
                        if (!t->dtype || at < 0 || t->dims[at] != s->extent || s->extent <= 1)
                                continue;
                        advance(t, *lo * (numel(t) / s->extent));
                        t->dims[at] = len;
                }
                return;
        case GRAPH_SPLIT_FLAT:
                for (int i = 0; i < c->nin; i++)
                        flat(&c->in[i], *lo, len);
                flat(y, *lo, len);
                return;
        case GRAPH_SPLIT_ROWS: {
                int64_t kdim = wa->dims[wa->ndim - 1], ndim = wy->dims[wy->ndim - 1];
                a->ndim = 2;
                a->dims[0] = len;
                a->dims[1] = kdim;
                advance(a, *lo * kdim);
                y->ndim = 2;
                y->dims[0] = len;
                y->dims[1] = ndim;
                advance(y, *lo * ndim);
                /* a Gemm's C with a row per output row goes with its rows */
                if (has_in(c, 2) && c->in[2].ndim == 2 && c->in[2].dims[0] == s->extent &&
                    s->extent > 1) {
                        c->in[2].dims[0] = len;
                        advance(&c->in[2], *lo * c->in[2].dims[1]);
                }
                break;
        }
        case GRAPH_SPLIT_COLS: /* Gemm with transB: B is [N,K] */
                b->dims[0] = len;
                advance(b, *lo * wb->dims[1]);
                y->dims[1] = len;
                if (has_in(c, 2) && c->in[2].ndim >= 1 && c->in[2].dims[c->in[2].ndim - 1] == s->extent &&
                    s->extent > 1) {
                        c->in[2].dims[c->in[2].ndim - 1] = len;
                        advance(&c->in[2], *lo);
                }
                break;
        case GRAPH_SPLIT_BATCH:
                a->dims[0] = len;
                advance(a, *lo * (numel(wa) / s->extent));
                y->dims[0] = len;
                advance(y, *lo * (numel(wy) / s->extent));
                break;
        case GRAPH_SPLIT_CHANNELS:
                b->dims[0] = len;
                advance(b, *lo * (numel(wb) / s->extent));
                if (has_in(c, 2)) /* the bias, [M] (or a FusedGemm's [1, M, 1, ...]) */
                        slice_vec(&c->in[2], s->extent, *lo, len);
                y->dims[1] = len;
                advance(y, *lo * (numel(wy) / s->extent));
                break;
        }
        /* a FusedGemm's residual has the output's shape: it goes with the output's slice */
        const struct graph_epilogue *ep = graph_fused_gemm_epilogue(whole);
        if (ep && ep->resid && ep->nin_op + ep->bias < c->nin) {
                struct ops_tensor *r = &c->in[ep->nin_op + ep->bias];
                const struct ops_tensor *wr = &whole->in[ep->nin_op + ep->bias];
                switch (s->how) {
                case GRAPH_SPLIT_ROWS:
                        r->ndim = 2;
                        r->dims[0] = len;
                        r->dims[1] = wy->dims[wy->ndim - 1];
                        advance(r, *lo * r->dims[1]);
                        break;
                case GRAPH_SPLIT_BATCH:
                        r->dims[0] = len;
                        advance(r, *lo * (numel(wr) / s->extent));
                        break;
                case GRAPH_SPLIT_CHANNELS:
                        r->dims[1] = len;
                        advance(r, *lo * (numel(wr) / s->extent));
                        break;
                default: /* LEADING sliced it above with the others; no COLS split */
                        break;
                }
        }
        /* a FusedGemm's bias after the operator's own (Gemm's C, Conv's B): per column or
         * channel, it follows a split of those */
        if (ep && ep->bias && ep->nin_op > 2 && ep->nin_op < c->nin &&
            (s->how == GRAPH_SPLIT_COLS || s->how == GRAPH_SPLIT_CHANNELS))
                slice_vec(&c->in[ep->nin_op], s->extent, *lo, len);
}

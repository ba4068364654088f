/* FusedGemm: MatMul / Gemm / Conv with its bias Add and activation as an epilogue (see
 * compile.h and compile-patterns.c).
 *
 * The operator runs through its registry kernel (so the GEMM variant tuning chose for the
 * node, which the executor forces around the node's run, applies unchanged); the epilogue
 * then adds the bias and applies the activation to the block just computed, while it is
 * still in cache, instead of two more passes over the whole output in memory.
 *
 * Row blocks: when the output's rows are independent (MatMul with a 2-D B, the leading dims
 * of A flattened to rows; Gemm without transA and with a C of at most one row), the product
 * is computed GRAPH_EPILOGUE_BLOCK bytes of output at a time: rows [r0, r1) of A give rows
 * [r0, r1) of the output, and the epilogue is elementwise per row (the bias runs along the
 * last dim), so a row tile of the node is graph_fused_gemm_rows(call, r0, r1) and tiles may
 * run on different workers. Otherwise (Conv, batched B, transA) the operator runs whole and
 * the epilogue follows per channel plane / per row. Other dtypes than float32 take the
 * registry's Add and the activation over the whole output, with the same results as the
 * unfused nodes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/blas.h"
#include "proto/dtype.h"
#include "compile.h"

/* Output bytes per row block: a block is still in L2 when its epilogue runs. */
#define GRAPH_EPILOGUE_BLOCK (256 << 10)
#define GRAPH_EPILOGUE_MIN_ROWS 64

static const struct graph_epilogue *ep_of(const struct ops_call *call)
{
        for (int a = 0; a < call->nattr; a++)
                if (call->attr[a].type == OPS_ATTR_OPAQUE && strcmp(call->attr[a].name, "epilogue") == 0)
                        return call->attr[a].graph;
        return NULL;
}

const struct graph_bn_affine *graph_bn_affine_of(const struct ops_call *call)
{
        for (int a = 0; a < call->nattr; a++)
                if (call->attr[a].type == OPS_ATTR_OPAQUE && strcmp(call->attr[a].name, "bn_affine") == 0)
                        return call->attr[a].graph;
        return NULL;
}

const struct graph_epilogue *graph_fused_gemm_epilogue(const struct ops_call *call)
{
        return ep_of(call);
}

static int no_ep(char *err, size_t errlen)
{
        snprintf(err, errlen, "FusedGemm without its epilogue");
        return -EINVAL;
}

/* The operator's own call: its inputs and attributes. */
static void op_call(const struct graph_epilogue *ep, const struct ops_call *call, struct ops_call *c)
{
        memset(c, 0, offsetof(struct ops_call, attr));
        c->nin = ep->nin_op;
        for (int i = 0; i < ep->nin_op; i++)
                c->in[i] = call->in[i];
        c->nout = 1;
        for (int a = 0; a < call->nattr; a++)
                if (call->attr[a].type != OPS_ATTR_OPAQUE)
                        c->attr[c->nattr++] = call->attr[a];
        c->opset = ep->opset;
        c->graph_run = call->graph_run;
        c->graph_ctx = call->graph_ctx;
}

static int fg_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct graph_epilogue *ep = ep_of(call);
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        const struct ops_tensor *b, *o;
        int rc;

        if (!ep || ep->nin_op > call->nin)
                return no_ep(err, errlen);
        op_call(ep, call, c);
        rc = ops_infer(ep->op, c, err, errlen);
        if (rc < 0)
                return rc;
        o = &c->out[0];
        if (ep->bias) {
                /* the Add must not broadcast the product to a larger shape */
                b = &call->in[ep->nin_op];
                if (b->ndim > o->ndim)
                        goto bad;
                for (int d = 1; d <= b->ndim; d++)
                        if (b->dims[b->ndim - d] != 1 && b->dims[b->ndim - d] != o->dims[o->ndim - d])
                                goto bad;
        }
        if (ep->resid) {
                /* the residual Add was fused for equal shapes only (no broadcast) */
                const struct ops_tensor *r = &call->in[ep->nin_op + ep->bias];
                if (r->dtype != o->dtype || r->ndim != o->ndim ||
                    memcmp(r->dims, o->dims, sizeof(r->dims[0]) * (size_t)o->ndim) != 0) {
                        snprintf(err, errlen, "FusedGemm: the residual is not of the %s output's shape and dtype",
                                 ep->op->name);
                        return -EINVAL;
                }
        }
        call->nout = 1;
        call->out[0] = *o;
        return 0;
bad:
        snprintf(err, errlen, "FusedGemm: the bias does not broadcast over the %s output",
                 ep->op->name);
        return -EINVAL;
}

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* Relu in place, four lanes at a time without branches (a branch per element mispredicts
 * on signs that vary, and gcc -O2 leaves the scalar select unvectorized); NaN stays NaN
 * like the operator's x < 0 ? 0 : x. */
static void relu_f32(float *p, int64_t n)
{
        int64_t i = 0;

        for (; i + 4 <= n; i += 4) {
                v4f x;
                v4i m;
                memcpy(&x, p + i, sizeof(x));
                m = x < (v4f){ 0, 0, 0, 0 };
                x = (v4f)((v4i)x & ~m);
                memcpy(p + i, &x, sizeof(x));
        }
        for (; i < n; i++)
                p[i] = p[i] < 0 ? 0.0f : p[i];
}

/* y[j] += b[one ? 0 : j] for j < n, four lanes at a time (gcc -O2 vectorizes no loop that
 * needs a scalar tail). */
static void add_f32(float *y, const float *b, int one, int64_t n)
{
        v4f s = { b[0], b[0], b[0], b[0] };
        int64_t j = 0;

        for (; j + 4 <= n; j += 4) {
                v4f x, v = s;
                memcpy(&x, y + j, sizeof(x));
                if (!one)
                        memcpy(&v, b + j, sizeof(v));
                x += v;
                memcpy(y + j, &x, sizeof(x));
        }
        for (; j < n; j++)
                y[j] += b[one ? 0 : j];
}

/* The activation in place on t, with the node's further activation inputs (Clip's bounds)
 * and attributes. */
static int run_act(const struct graph_epilogue *ep, const struct ops_call *call,
                   const struct ops_tensor *t, char *err, size_t errlen)
{
        struct ops_call *c = __builtin_alloca(sizeof(*c));

        memset(c, 0, offsetof(struct ops_call, attr));
        c->nin = ep->act_nin;
        c->in[0] = *t;
        for (int i = 1; i < ep->act_nin; i++)
                c->in[i] = call->in[ep->nin_op + ep->bias + ep->resid + i - 1];
        c->nout = 1;
        c->out[0] = *t;
        c->nattr = ep->act_nattr;
        memcpy(c->attr, ep->act_attr, sizeof(c->attr[0]) * (size_t)ep->act_nattr);
        c->opset = ep->opset;
        return ops_run(ep->act, c, err, errlen);
}

/* Apply the activation in place to n float32 elements at p. */
static int act_f32(const struct graph_epilogue *ep, const struct ops_call *call, float *p,
                   int64_t n, char *err, size_t errlen)
{
        if (!ep->act || !n)
                return 0;
        if (strcmp(ep->act->name, "Relu") == 0) {
                relu_f32(p, n);
                return 0;
        }
        struct ops_tensor t = { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 1, .dims = { n }, .data = p };
        return run_act(ep, call, &t, err, errlen);
}

/* The residual's elements from element `at` of the output on (NULL without a residual). */
static const float *resid_at(const struct graph_epilogue *ep, const struct ops_call *call, int64_t at)
{
        return ep->resid ? (const float *)call->in[ep->nin_op + ep->bias].data + at : NULL;
}

/* Bias along the last dim (n elements per row, the bias holding n or 1), the residual (rows
 * x n elements at r, NULL: none) and activation (unless act_done) over rows x n float32
 * elements at y. */
static int epilogue_rows(const struct graph_epilogue *ep, const struct ops_call *call, float *y,
                         const float *r, int64_t rows, int64_t n, int act_done, char *err, size_t errlen)
{
        if (ep->bias) {
                const struct ops_tensor *bt = &call->in[ep->nin_op];
                const float *b = bt->data;
                int one = ops_tensor_numel(bt) == 1;
                for (int64_t k = 0; k < rows; k++)
                        add_f32(y + k * n, b, one, n);
        }
        if (r)
                add_f32(y, r, 0, rows * n);
        return act_done ? 0 : act_f32(ep, call, y, rows * n, err, errlen);
}

static int is_op(const struct graph_epilogue *ep, const char *name)
{
        return strcmp(ep->op->name, name) == 0;
}

int64_t graph_fused_gemm_nrows(const struct ops_call *call)
{
        const struct graph_epilogue *ep = ep_of(call);
        const struct ops_tensor *a = &call->in[0], *o = &call->out[0];

        if (!ep || o->dtype != PROTO_DTYPE_FLOAT32 || a->dtype != PROTO_DTYPE_FLOAT32 || o->ndim < 1 ||
            (ep->bias && call->in[ep->nin_op].dtype != PROTO_DTYPE_FLOAT32) ||
            (ep->resid && call->in[ep->nin_op + ep->bias].dtype != PROTO_DTYPE_FLOAT32))
                return 0;
        if (is_op(ep, "MatMul")) {
                if (a->ndim < 2 || call->in[1].ndim != 2)
                        return 0;
        } else if (is_op(ep, "Gemm")) {
                const struct ops_tensor *ct = ep->nin_op > 2 ? &call->in[2] : NULL;
                if (a->ndim != 2 || ops_attr_int(call, "transA", 0))
                        return 0;
                if (ct && ct->dtype && !(ct->ndim <= 1 || (ct->ndim == 2 && ct->dims[0] == 1)))
                        return 0;
        } else {
                return 0;
        }
        return o->dims[o->ndim - 1] ? ops_tensor_numel(o) / o->dims[o->ndim - 1] : 0;
}

int graph_fused_gemm_rows(const struct ops_call *call, int64_t r0, int64_t r1, char *err,
                          size_t errlen)
{
        const struct graph_epilogue *ep = ep_of(call);
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        const struct ops_tensor *a = &call->in[0], *o = &call->out[0];
        int64_t k = a->dims[a->ndim - 1], n = o->dims[o->ndim - 1];
        int rc;

        if (!ep)
                return no_ep(err, errlen);
        if (r1 <= r0)
                return 0;
        op_call(ep, call, c);
        c->in[0].ndim = 2;
        c->in[0].dims[0] = r1 - r0;
        c->in[0].dims[1] = k;
        c->in[0].data = (float *)a->data + r0 * k;
        c->out[0] = *o;
        c->out[0].ndim = 2;
        c->out[0].dims[0] = r1 - r0;
        c->out[0].dims[1] = n;
        c->out[0].data = (float *)o->data + r0 * n;
        /* a Relu straight after the product: offered to the operator, whose GEMM may apply
         * it to each tile as it is made (ops_sgemm_relu_offer) */
        int offer = ep->act && !ep->bias && !ep->resid && strcmp(ep->act->name, "Relu") == 0;
        if (offer)
                ops_sgemm_relu_offer(1);
        rc = ops_run(ep->op, c, err, errlen);
        int act_done = offer && ops_sgemm_relu_offer(0);
        if (rc < 0)
                return rc;
        return epilogue_rows(ep, call, c->out[0].data, resid_at(ep, call, r0 * n), r1 - r0, n, act_done, err,
                             errlen);
}

/* Any dtype: the operator, then the registry's Add and activation over the whole output. */
static int run_generic(const struct graph_epilogue *ep, const struct ops_call *call, char *err,
                       size_t errlen)
{
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        const struct ops_def *add = ops_lookup_onnx(NULL, "Add", 14);
        int rc;

        op_call(ep, call, c);
        c->out[0] = call->out[0];
        rc = ops_run(ep->op, c, err, errlen);
        if (rc < 0 || !ep->bias)
                goto act;
        memset(c, 0, offsetof(struct ops_call, attr));
        c->nin = 2;
        c->in[0] = call->out[0];
        c->in[1] = call->in[ep->nin_op];
        c->nout = 1;
        c->out[0] = call->out[0];
        c->opset = ep->opset;
        rc = add ? ops_run(add, c, err, errlen) : -ENOSYS;
        if (rc < 0)
                return rc;
act:
        if (rc >= 0 && ep->resid) {
                memset(c, 0, offsetof(struct ops_call, attr));
                c->nin = 2;
                c->in[0] = call->out[0];
                c->in[1] = call->in[ep->nin_op + ep->bias];
                c->nout = 1;
                c->out[0] = call->out[0];
                c->opset = ep->opset;
                rc = add ? ops_run(add, c, err, errlen) : -ENOSYS;
        }
        if (rc < 0 || !ep->act)
                return rc;
        return run_act(ep, call, &call->out[0], err, errlen);
}

static int fg_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct graph_epilogue *ep = ep_of(call);
        const struct ops_tensor *o = &call->out[0];
        int64_t rows, n, blk;
        int rc;

        if (!ep)
                return no_ep(err, errlen);
        rows = graph_fused_gemm_nrows(call);
        if (rows > 0) {
                n = o->dims[o->ndim - 1];
                blk = GRAPH_EPILOGUE_BLOCK / (int64_t)sizeof(float) / (n ? n : 1);
                if (blk < GRAPH_EPILOGUE_MIN_ROWS)
                        blk = GRAPH_EPILOGUE_MIN_ROWS;
                for (int64_t r = 0; r < rows; r += blk) {
                        rc = graph_fused_gemm_rows(call, r, r + blk < rows ? r + blk : rows, err, errlen);
                        if (rc < 0)
                                return rc;
                }
                return 0;
        }
        if (o->dtype != PROTO_DTYPE_FLOAT32 ||
            (ep->bias && call->in[ep->nin_op].dtype != PROTO_DTYPE_FLOAT32) ||
            (ep->resid && call->in[ep->nin_op + ep->bias].dtype != PROTO_DTYPE_FLOAT32) || o->ndim < 1)
                return run_generic(ep, call, err, errlen);
        /* whole product, then the epilogue per row (MatMul, Gemm) or per channel plane */
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        op_call(ep, call, c);
        c->out[0] = *o;
        rc = ops_run(ep->op, c, err, errlen);
        if (rc < 0)
                return rc;
        if (!is_op(ep, "Conv") || !ep->bias) {
                n = o->dims[o->ndim - 1];
                if (!n)
                        return 0;
                if (!is_op(ep, "Conv"))
                        return epilogue_rows(ep, call, o->data, resid_at(ep, call, 0), ops_tensor_numel(o) / n, n,
                                             0, err, errlen);
                if (ep->resid)
                        add_f32(o->data, resid_at(ep, call, 0), 0, ops_tensor_numel(o));
                return act_f32(ep, call, o->data, ops_tensor_numel(o), err, errlen);
        }
        /* Conv: the bias per channel (dim 1), over planes of the spatial dims */
        const struct ops_tensor *bt = &call->in[ep->nin_op];
        int64_t ch = o->ndim >= 2 ? o->dims[1] : 1, plane = 1, total = ops_tensor_numel(o);
        int one = ops_tensor_numel(bt) == 1;
        const float *b = bt->data;
        float *y = o->data;
        for (int d = 2; d < o->ndim; d++)
                plane *= o->dims[d];
        for (int64_t p = 0; plane && p < total / plane; p++) {
                float *yp = y + p * plane;
                add_f32(yp, b + (one ? 0 : p % ch), 1, plane);
                if (ep->resid)
                        add_f32(yp, resid_at(ep, call, p * plane), 0, plane);
                rc = act_f32(ep, call, yp, plane, err, errlen);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

static void fg_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        const struct graph_epilogue *ep = ep_of(call);
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        uint64_t n = (uint64_t)ops_tensor_numel(&call->out[0]);

        *ret_flops = *ret_bytes = 0;
        if (!ep)
                return;
        op_call(ep, call, c);
        c->out[0] = call->out[0];
        if (ep->op->cost)
                ops_cost(ep->op, c, ret_flops, ret_bytes);
        *ret_flops += n * (uint64_t)(ep->bias + ep->resid + (ep->act ? 8 : 0));
}

const struct ops_def graph_fused_gemm_def = {
        .name = "FusedGemm", .min_inputs = 2, .max_inputs = OPS_MAX_INPUTS, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = fg_run, .cost = fg_cost, .infer = fg_infer,
        .domain = "npud",
};

/* The residual, then the activation, on output rows [lo, hi) (hi 0: all) of every channel
 * plane of a Conv's FusedGemm, just computed and still in cache. */
static int band_epilogue(const struct graph_epilogue *ep, const struct ops_call *call, int64_t lo, int64_t hi,
                         char *err, size_t errlen)
{
        const struct ops_tensor *o = &call->out[0];

        if (o->ndim != 4 || o->dtype != PROTO_DTYPE_FLOAT32)
                return 0;
        int64_t oh = o->dims[2], ow = o->dims[3], planes = o->dims[0] * o->dims[1];
        if (hi <= 0 || hi > oh)
                hi = oh;
        for (int64_t k = 0; k < planes; k++) {
                int64_t at = (k * oh + lo) * ow;
                float *y = (float *)o->data + at;
                if (ep->resid)
                        add_f32(y, resid_at(ep, call, at), 0, (hi - lo) * ow);
                int rc = act_f32(ep, call, y, (hi - lo) * ow, err, errlen);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

int graph_conv_direct_rows(const struct ops_packed_conv *p, const struct ops_call *call, int64_t lo, int64_t hi,
                           char *err, size_t errlen)
{
        const struct graph_epilogue *ep = ep_of(call);
        int act = OPS_CONV_ACT_NONE;
        float alpha = 0.0f;

        if (!ep)
                return ops_conv_rows(p, call, act, alpha, lo, hi, err, errlen);
        if (ep->bias || ep->nin_op > call->nin || call->nout < 1 || strcmp(ep->op->name, "Conv") != 0)
                return 1;
        if (ep->act) {
                if (strcmp(ep->act->name, "Relu") == 0) {
                        act = OPS_CONV_ACT_RELU;
                } else if (strcmp(ep->act->name, "LeakyRelu") == 0 && ep->act_nin == 1) {
                        act = OPS_CONV_ACT_RELU;
                        alpha = 0.01f;
                        for (int a = 0; a < ep->act_nattr; a++)
                                if (strcmp(ep->act_attr[a].name, "alpha") == 0 && ep->act_attr[a].type == OPS_ATTR_FLOAT)
                                        alpha = (float)ep->act_attr[a].f;
                } else {
                        return 1;
                }
        }
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        op_call(ep, call, c);
        c->out[0] = call->out[0];
        if (!ep->resid)
                return ops_conv_rows(p, c, act, alpha, lo, hi, err, errlen);
        /* the residual comes before the activation: the band's rows of every channel plane
         * get it, then the activation, while they are still in cache */
        int rc = ops_conv_rows(p, c, OPS_CONV_ACT_NONE, 0.0f, lo, hi, err, errlen);
        return rc ? rc : band_epilogue(ep, call, lo, hi, err, errlen);
}

int graph_conv_acc_epilogue_ok(const struct ops_call *call)
{
        const struct graph_epilogue *ep = ep_of(call);

        return !ep || !(ep->bias || ep->nin_op > call->nin || call->nout < 1 || strcmp(ep->op->name, "Conv") != 0);
}

int graph_conv_acc_rows(const struct ops_call *call, int mixed, int64_t lo, int64_t hi, char *err, size_t errlen)
{
        const struct graph_epilogue *ep = ep_of(call);
        const struct graph_bn_affine *bn = graph_bn_affine_of(call);

        if (!ep && !bn)
                return ops_conv_rows_acc(call, mixed, lo, hi, err, errlen);
        if (!graph_conv_acc_epilogue_ok(call))
                return 1;
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        if (ep) {
                op_call(ep, call, c);
                c->out[0] = call->out[0];
        } else {
                *c = *call;
        }
        /* a folded BatchNormalization: the model's filters and the factors in float64, of
         * the call's output channels (a part of the node may hold a range of them) */
        int64_t m0 = 0;
        if (bn) {
                /* where the call's filters start in the folded ones, in floats (compared as
                 * addresses: they need not point into them) */
                uintptr_t wc = c->nin >= 2 ? (uintptr_t)c->in[1].data : 0, wf = (uintptr_t)bn->wf;
                uint64_t all = (uint64_t)(bn->m * bn->per), at = (uint64_t)(wc - wf) / sizeof(float);
                int64_t n = c->nin >= 2 ? ops_tensor_numel(&c->in[1]) : -1;
                if (!wc || c->in[1].dtype != PROTO_DTYPE_FLOAT32 || bn->per <= 0 || wc < wf ||
                    (wc - wf) % sizeof(float) || at >= all || at % (uint64_t)bn->per || n <= 0 || n % bn->per ||
                    (uint64_t)n > all - at)
                        return 1; /* not the folded filters: the call runs on what it holds */
                m0 = (int64_t)at / bn->per;
                c->in[1].data = (void *)(bn->w + at);
        }
        /* a residual and Relu go into the kernel's store (ops_conv_post); another
         * activation takes the band's pass */
        int fuse = ep && (!ep->act || strcmp(ep->act->name, "Relu") == 0);
        struct ops_conv_post post = { fuse ? resid_at(ep, call, 0) : NULL, fuse && ep->act != NULL,
                                      bn ? bn->scale + m0 : NULL, bn ? bn->shift + m0 : NULL };
        int rc = ops_conv_rows_acc_post(c, mixed, lo, hi, &post, err, errlen);
        return rc || !ep || fuse ? rc : band_epilogue(ep, call, lo, hi, err, errlen);
}

/* FusedSoftmax: attention's scale-mask-softmax, Softmax(x * c + mask) (or x / c; either part
 * may be absent) over the last axis, in one pass per row: the scaled and masked row is
 * written straight into the output, its maximum subtracted, exponentiated in place with
 * vmath's exp (SLEEF) and normalised, instead of three nodes each reading and writing the
 * whole score tensor (the registry's Softmax also runs libm's expf per element).
 *
 * Inputs: x, then the mask when there is one; the scale is the opaque attribute's. x and
 * the mask broadcast against each other as Add does. Dtypes other than float32 (or a
 * softmax over an empty row) take the registry's operators one after the other, with the
 * results of the unfused nodes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/rows.h"
#include "ops/runctx.h"
#include "ops/vmath.h"
#include "proto/dtype.h"
#include "compile.h"

static const struct graph_softmax *sm_of(const struct ops_call *call)
{
        for (int a = 0; a < call->nattr; a++)
                if (call->attr[a].type == OPS_ATTR_OPAQUE && strcmp(call->attr[a].name, "softmax") == 0)
                        return call->attr[a].graph;
        return NULL;
}

static int no_sm(char *err, size_t errlen)
{
        snprintf(err, errlen, "FusedSoftmax without its parameters");
        return -EINVAL;
}

static int fs_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct graph_softmax *sm = sm_of(call);
        const struct ops_tensor *x = &call->in[0];
        struct ops_tensor o = *x;

        if (!sm || call->nin != 1 + sm->mask)
                return no_sm(err, errlen);
        if (!x->dtype || x->ndim < 1) {
                snprintf(err, errlen, "FusedSoftmax: the scores must have a dimension");
                return -EINVAL;
        }
        if (sm->mask) {
                int rc = ops_broadcast_shape(x, &call->in[1], &o, err, errlen);
                if (rc < 0)
                        return rc;
                if (call->in[1].dtype != x->dtype) {
                        snprintf(err, errlen, "FusedSoftmax: the mask's dtype is not the scores'");
                        return -EINVAL;
                }
        }
        o.data = NULL;
        o.dtype = x->dtype;
        call->nout = 1;
        call->out[0] = o;
        return 0;
}

/* Element strides of t broadcast to out's dims (0 along broadcast dims). */
static void bstrides(const struct ops_tensor *t, const struct ops_tensor *out, int64_t *st)
{
        int64_t s = 1;

        for (int d = out->ndim - 1; d >= 0; d--) {
                int td = d - (out->ndim - t->ndim);
                if (td < 0 || t->dims[td] == 1) {
                        st[d] = 0;
                } else {
                        st[d] = s;
                }
                if (td >= 0)
                        s *= t->dims[td];
        }
}

/* The registry's operators in turn (any dtype). */
static int run_generic(const struct graph_softmax *sm, const struct ops_call *call, char *err,
                       size_t errlen)
{
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        struct ops_tensor scaled = call->in[0];
        void *tmp = NULL;
        char msg[256];
        int rc = 0;

        if (sm->scale) {
                const struct ops_def *d = ops_lookup_onnx(NULL, sm->div ? "Div" : "Mul", 14);
                uint64_t bytes = (uint64_t)ops_tensor_numel(&scaled) * proto_dtype_size(scaled.dtype);
                msg[0] = 0;
                if (sm->mask && !(tmp = ops_buf_alloc(bytes, msg, sizeof(msg)))) {
                        snprintf(err, errlen, "FusedSoftmax: %s", msg);
                        return -ENOMEM;
                }
                memset(c, 0, offsetof(struct ops_call, attr));
                c->nin = 2;
                c->in[0] = call->in[0];
                c->in[1] = *sm->c;
                c->nout = 1;
                c->out[0] = call->in[0];
                c->out[0].data = sm->mask ? tmp : call->out[0].data;
                c->opset = sm->opset;
                rc = d ? ops_run(d, c, err, errlen) : -ENOSYS;
                scaled = c->out[0];
        }
        if (!rc && sm->mask) {
                const struct ops_def *d = ops_lookup_onnx(NULL, "Add", 14);
                memset(c, 0, offsetof(struct ops_call, attr));
                c->nin = 2;
                c->in[0] = scaled;
                c->in[1] = call->in[1];
                c->nout = 1;
                c->out[0] = call->out[0];
                c->opset = sm->opset;
                rc = d ? ops_run(d, c, err, errlen) : -ENOSYS;
        }
        ops_buf_free(tmp);
        if (rc)
                return rc < 0 ? rc : -EINVAL;
        memset(c, 0, offsetof(struct ops_call, attr));
        c->nin = 1;
        c->in[0] = call->out[0];
        c->nout = 1;
        c->out[0] = call->out[0];
        c->nattr = 1;
        snprintf(c->attr[0].name, sizeof(c->attr[0].name), "axis");
        c->attr[0].type = OPS_ATTR_INT;
        c->attr[0].i = -1;
        c->opset = 13;
        return ops_run(ops_lookup_onnx(NULL, "Softmax", 13), c, err, errlen);
}

static int fs_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct graph_softmax *sm = sm_of(call);
        const struct ops_tensor *x = &call->in[0], *m = sm && sm->mask ? &call->in[1] : NULL;
        const struct ops_tensor *o = &call->out[0];
        int64_t sx[OPS_MAX_DIMS], smk[OPS_MAX_DIMS] = { 0 }, idx[OPS_MAX_DIMS] = { 0 };
        int64_t n, rows, ox = 0, om = 0;
        ops_vm_fn vexp = ops_vmath_get(OPS_VM_EXP);
        float scale;
        char msg[128];

        if (!sm)
                return no_sm(err, errlen);
        n = o->ndim ? o->dims[o->ndim - 1] : 1;
        if (o->dtype != PROTO_DTYPE_FLOAT32 || x->dtype != PROTO_DTYPE_FLOAT32 || n <= 0 ||
            (sm->scale && sm->c->dtype != PROTO_DTYPE_FLOAT32))
                return run_generic(sm, call, err, errlen);
        rows = ops_tensor_numel(o) / n;
        scale = sm->scale ? *(const float *)sm->c->data : 1.0f;
        bstrides(x, o, sx);
        if (m)
                bstrides(m, o, smk);
        const float *xp = x->data, *mp = m ? m->data : NULL;
        float *yp = o->data;
        for (int64_t r = 0; r < rows; r++) {
                const float *xr = xp + ox;
                float *y = yp + r * n, mx = -INFINITY;
                int64_t sxl = sx[o->ndim - 1], sml = smk[o->ndim - 1];
                double sum = 0;
                /* the row's scores, as the unfused Mul / Div and Add compute them */
                if (sxl == 1 && (!mp || sml == 1)) { /* contiguous: the row kernels */
                        if (!sm->scale)
                                memmove(y, xr, (size_t)n * sizeof(float));
                        else if (sm->div)
                                ops_row_div(y, xr, n, scale);
                        else
                                ops_row_mul(y, xr, n, scale);
                        if (mp)
                                ops_row_add(y, mp + om, n);
                        mx = ops_row_max(y, n);
                } else {
                        for (int64_t j = 0; j < n; j++) {
                                float v = xr[j * sxl];
                                if (sm->scale)
                                        v = sm->div ? v / scale : v * scale;
                                if (mp)
                                        v += mp[om + j * sml];
                                y[j] = v;
                                mx = v > mx ? v : mx;
                        }
                }
                /* a row masked everywhere with -inf gives NaN, as the registry's Softmax */
                ops_row_sub(y, y, n, mx);
                if (vexp)
                        vexp(y, y, (size_t)n);
                else
                        for (int64_t j = 0; j < n; j++)
                                y[j] = expf(y[j]);
                sum = ops_row_sum(y, n);
                float inv = (float)(1.0 / sum);
                ops_row_mul(y, y, n, inv);
                /* next row: the leading index, and both inputs' offsets */
                for (int d = o->ndim - 2; d >= 0; d--) {
                        ox += sx[d];
                        om += smk[d];
                        if (++idx[d] < o->dims[d])
                                break;
                        ox -= sx[d] * o->dims[d];
                        om -= smk[d] * o->dims[d];
                        idx[d] = 0;
                }
                if ((r & 255) == 255 && ops_runctx_check(msg, sizeof(msg))) {
                        snprintf(err, errlen, "FusedSoftmax stopped: %s", msg);
                        return -ECANCELED;
                }
        }
        return 0;
}

static void fs_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                    uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->out[0]);

        *ret_flops = n * 14;
        *ret_bytes = n * 4 * 3;
}

const struct ops_def graph_fused_softmax_def = {
        .name = "FusedSoftmax", .min_inputs = 1, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = fs_run, .cost = fs_cost, .infer = fs_infer,
        .domain = "npud",
};

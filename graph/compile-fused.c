/* FusedElementwise: a chain of elementwise operators applied block by block (see compile.h).
 *
 * The chain's steps are registry operators; each block (GRAPH_FUSE_BLOCK_BYTES of the
 * chain's widest element type) goes through every step with the intermediate results in two
 * buffers on the stack, so that the intermediates stay in the core's cache and each input
 * and the output are touched once.
 * That needs every tensor of the chain to be element-aligned with the output: every input
 * and every step's result has the output's element count (then broadcasting only adds
 * leading or unit dims and the row-major orders agree) or is a single element. When a run's
 * shapes do not allow it (a step broadcasts for real), the chain runs step by step over
 * whole tensors instead, with the same kernels, so results never depend on the choice. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ops/runctx.h"
#include "proto/dtype.h"
#include "compile.h"

_Atomic unsigned long graph_fuse_direct_runs;

static const struct graph_fused *fused_of(const struct ops_call *call)
{
        for (int a = 0; a < call->nattr; a++)
                if (call->attr[a].type == OPS_ATTR_OPAQUE)
                        return call->attr[a].graph;
        return NULL;
}

static int no_chain(char *err, size_t errlen)
{
        snprintf(err, errlen, "FusedElementwise without its chain");
        return -EINVAL;
}

/* The call of step s with the fused call's inputs and acc as the previous result. */
static void step_call(const struct graph_fused *fz, int s, const struct ops_call *call,
                      const struct ops_tensor *acc, struct ops_call *c)
{
        const struct graph_fused_step *st = &fz->steps[s];

        memset(c, 0, offsetof(struct ops_call, attr));
        c->nin = st->nin;
        for (int i = 0; i < st->nin; i++) {
                if (st->src[i] == -1 && acc)
                        c->in[i] = *acc;
                else if (st->src[i] >= 0)
                        c->in[i] = call->in[st->src[i]];
        }
        c->nout = 1;
        c->nattr = st->nattr;
        if (st->nattr)
                memcpy(c->attr, st->attr, sizeof(c->attr[0]) * (size_t)st->nattr);
        c->opset = fz->opset;
}

static int step_err(const struct graph_fused *fz, int s, int rc, const char *msg, char *err,
                    size_t errlen)
{
        snprintf(err, errlen, "fused step '%s' (%s): %s", fz->steps[s].name, fz->steps[s].def->name,
                 msg[0] ? msg : "failed");
        return rc < 0 ? rc : -EINVAL;
}

/* Shapes of every step's result (res[s]); 0 or an error naming the step. */
static int chain_infer(const struct graph_fused *fz, const struct ops_call *call,
                       struct ops_tensor *res, char *err, size_t errlen)
{
        struct ops_call *cp = __builtin_alloca(sizeof(*cp));
        struct ops_tensor acc = { 0 };
        char msg[256];

        for (int s = 0; s < fz->nsteps; s++) {
                int rc;
                step_call(fz, s, call, &acc, cp);
                msg[0] = 0;
                rc = ops_infer(fz->steps[s].def, cp, msg, sizeof(msg));
                if (rc < 0)
                        return step_err(fz, s, rc, msg, err, errlen);
                res[s] = cp->out[0];
                res[s].data = NULL;
                acc = res[s];
        }
        return 0;
}

static int fused_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct graph_fused *fz = fused_of(call);
        struct ops_tensor res[GRAPH_FUSE_MAX_STEPS];

        if (!fz || fz->nsteps < 1 || fz->nsteps > GRAPH_FUSE_MAX_STEPS)
                return no_chain(err, errlen);
        int rc = chain_infer(fz, call, res, err, errlen);
        if (rc)
                return rc;
        call->nout = 1;
        call->out[0] = res[fz->nsteps - 1];
        return 0;
}

static int overlaps(const struct ops_tensor *a, const struct ops_tensor *b)
{
        uintptr_t pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
        uint64_t na = (uint64_t)ops_tensor_numel(a) * proto_dtype_size(a->dtype);
        uint64_t nb = (uint64_t)ops_tensor_numel(b) * proto_dtype_size(b->dtype);

        return na && nb && pa < pb + nb && pb < pa + na;
}

/* Can the chain run block by block? Its elements a block when it can (those of its widest
 * type that fill a buffer), else 0. */
static int64_t blockable(const struct graph_fused *fz, const struct ops_call *call,
                         const struct ops_tensor *res, int64_t n)
{
        size_t widest = 1;

        for (int s = 0; s < fz->nsteps; s++) {
                size_t es = proto_dtype_size(res[s].dtype);
                if (ops_tensor_numel(&res[s]) != n || es > 8 || es == 0 || res[s].dtype == PROTO_DTYPE_STRING)
                        return 0;
                widest = es > widest ? es : widest;
        }
        for (int i = 0; i < call->nin; i++) {
                int64_t m;
                if (!call->in[i].dtype)
                        continue;
                m = ops_tensor_numel(&call->in[i]);
                size_t es = proto_dtype_size(call->in[i].dtype);
                if ((m != n && m != 1) || es > 8 || call->in[i].dtype == PROTO_DTYPE_STRING)
                        return 0;
                widest = es > widest ? es : widest;
        }
        return (int64_t)(GRAPH_FUSE_BLOCK_BYTES / widest);
}

/* Step by step over whole tensors (shapes that broadcast for real). */
static int run_unblocked(const struct graph_fused *fz, const struct ops_call *call,
                         const struct ops_tensor *res, char *err, size_t errlen)
{
        struct ops_call *c = __builtin_alloca(sizeof(*c));
        struct ops_tensor acc = { 0 };
        void *prev = NULL;
        char msg[256];
        int rc = 0;

        for (int s = 0; s < fz->nsteps && !rc; s++) {
                struct ops_tensor o = res[s];
                void *mem = NULL;
                step_call(fz, s, call, &acc, c);
                if (s == fz->nsteps - 1) {
                        o.data = call->out[0].data;
                } else {
                        uint64_t bytes = (uint64_t)ops_tensor_numel(&o) * proto_dtype_size(o.dtype);
                        msg[0] = 0;
                        mem = ops_buf_alloc(bytes, msg, sizeof(msg));
                        if (!mem) {
                                rc = step_err(fz, s, -ENOMEM, msg, err, errlen);
                                break;
                        }
                        o.data = mem;
                }
                c->out[0] = o;
                msg[0] = 0;
                rc = ops_run(fz->steps[s].def, c, msg, sizeof(msg));
                if (rc < 0)
                        rc = step_err(fz, s, rc, msg, err, errlen);
                ops_buf_free(prev);
                prev = mem;
                acc = o;
        }
        ops_buf_free(prev);
        return rc;
}

static int fused_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        const struct graph_fused *fz = fused_of(call);
        struct ops_tensor res[GRAPH_FUSE_MAX_STEPS];
        /* per step: its call, prepared once; only data pointers and extents change */
        struct ops_call *calls;
        uint64_t buf[2][GRAPH_FUSE_BLOCK_BYTES / sizeof(uint64_t)];
        int64_t n = ops_tensor_numel(&call->out[0]), block;
        char msg[256];
        int rc, alias = 0;

        if (!fz || fz->nsteps < 1 || fz->nsteps > GRAPH_FUSE_MAX_STEPS)
                return no_chain(err, errlen);
        rc = chain_infer(fz, call, res, err, errlen);
        if (rc)
                return rc;
        block = blockable(fz, call, res, n);
        if (!block)
                return run_unblocked(fz, call, res, err, errlen);
        /* the steps' calls, then what ops_ew_direct_init prepares of each */
        size_t dsz = (ops_ew_direct_size() + 7) & ~(size_t)7;
        calls = ops_buf_alloc((sizeof(*calls) + dsz) * (uint64_t)fz->nsteps, msg, sizeof(msg));
        if (!calls) {
                snprintf(err, errlen, "fused chain: %s", msg);
                return -ENOMEM;
        }
        char *dbase = (char *)(calls + fz->nsteps);
#define STEP_DIRECT(s) ((struct ops_ew_direct *)(dbase + (size_t)(s) * dsz))
        int direct = 1;
        for (int s = 0; s < fz->nsteps; s++) {
                struct ops_call *c = &calls[s];
                step_call(fz, s, call, s ? &res[s - 1] : NULL, c);
                for (int i = 0; i < c->nin; i++) {
                        if (!c->in[i].dtype)
                                continue;
                        if (ops_tensor_numel(&c->in[i]) == 1 && fz->steps[s].src[i] != -1)
                                c->in[i].ndim = 0; /* a scalar stays a scalar */
                        else
                                c->in[i].ndim = 1;
                }
                c->out[0] = res[s];
                c->out[0].ndim = 1;
                direct = direct && !ops_ew_direct_init(fz->steps[s].def, c, STEP_DIRECT(s));
        }
        /* the chain polls every 8 blocks of GRAPH_FUSE_BLOCK_BYTES */
        int64_t poll_every = 8 * block;
        /* Steps that all run their kernels directly have no set-up per call to spread over a
         * block: their blocks stay in L1. */
        if (direct) {
                block = block * GRAPH_FUSE_TILE_BYTES / GRAPH_FUSE_BLOCK_BYTES;
                atomic_fetch_add_explicit(&graph_fuse_direct_runs, 1, memory_order_relaxed);
        }
        /* The memory plan may put the output over an input that dies here. Block by block
         * that is safe (a block's inputs are read before its output is written), but the
         * kernels take their slow path for an output that overlaps an input; the last step
         * then writes to the stack too and the block is copied out. */
        for (int i = 0; i < call->nin && !alias; i++)
                alias = call->in[i].data && overlaps(&call->in[i], &call->out[0]);
        for (int64_t off = 0, polled = 0; off < n && !rc; off += block) {
                int64_t blk = n - off < block ? n - off : block;
                int cur = 0;
                /* The kernels poll the run context per call, and a block is far below
                 * their polling interval: the chain polls for them (cancel, deadline). */
                if (off - polled >= poll_every) {
                        polled = off;
                        if (ops_runctx_check(msg, sizeof(msg))) {
                                snprintf(err, errlen, "fused chain stopped: %s", msg);
                                rc = -ECANCELED;
                                break;
                        }
                }
                for (int s = 0; s < fz->nsteps; s++) {
                        struct ops_call *c = &calls[s];
                        const void *in[OPS_MAX_INPUTS];
                        int64_t st[OPS_MAX_INPUTS];
                        for (int i = 0; i < c->nin; i++) {
                                int src = fz->steps[s].src[i];
                                if (src == -1) {
                                        c->in[i].data = buf[cur];
                                        c->in[i].dims[0] = blk;
                                } else if (src >= 0 && c->in[i].ndim == 1) {
                                        size_t es = proto_dtype_size(c->in[i].dtype);
                                        c->in[i].data = (char *)call->in[src].data + (size_t)off * es;
                                        c->in[i].dims[0] = blk;
                                }
                                in[i] = c->in[i].data;
                                st[i] = c->in[i].ndim == 1;
                        }
                        c->out[0].dims[0] = blk;
                        if (s == fz->nsteps - 1 && !alias)
                                c->out[0].data = (char *)call->out[0].data +
                                                 (size_t)off * proto_dtype_size(c->out[0].dtype);
                        else
                                c->out[0].data = buf[cur ^ 1];
                        cur ^= 1;
                        if (direct) {
                                ops_ew_direct_run(STEP_DIRECT(s), c->out[0].data, in, st, blk);
                                continue;
                        }
                        msg[0] = 0;
                        rc = ops_run(fz->steps[s].def, c, msg, sizeof(msg));
                        if (rc < 0) {
                                rc = step_err(fz, s, rc, msg, err, errlen);
                                break;
                        }
                }
                if (!rc && alias) {
                        size_t es = proto_dtype_size(call->out[0].dtype);
                        memcpy((char *)call->out[0].data + (size_t)off * es, buf[cur], (size_t)blk * es);
                }
        }
#undef STEP_DIRECT
        ops_buf_free(calls);
        return rc;
}

static void fused_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                       uint64_t *ret_bytes)
{
        const struct graph_fused *fz = fused_of(call);
        uint64_t n = (uint64_t)ops_tensor_numel(&call->out[0]);
        uint64_t bytes = n * proto_dtype_size(call->out[0].dtype);

        for (int i = 0; i < call->nin; i++)
                if (call->in[i].dtype)
                        bytes += (uint64_t)ops_tensor_numel(&call->in[i]) * proto_dtype_size(call->in[i].dtype);
        *ret_flops = n * (uint64_t)(fz ? fz->nsteps : 1);
        *ret_bytes = bytes;
}

const struct ops_def graph_fused_def = {
        .name = "FusedElementwise", .min_inputs = 0, .max_inputs = OPS_MAX_INPUTS, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = fused_run, .cost = fused_cost,
        .flags = OPS_FLAG_ELEMENTWISE, .infer = fused_infer, .domain = "npud",
};

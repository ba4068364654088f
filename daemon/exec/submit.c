/* Submission: one SUBMIT record of a client becomes a prepared task on its stream. Handles
 * are resolved in the owner's table, every tensor is bound to a buffer of the stream's
 * device and bounds-checked by one binder (launches and graph runs alike), operator calls are
 * validated through the registry, and the model's cost estimate per capable engine is set.
 * Nothing here replies or counts: the caller (the API layer) reports a failure in stream
 * order and accounts the task. Loop thread only. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "graph/steps.h"
#include "policy/cost.h"
#include "proto/dtype.h"
#include "proto/errors.h"
#include "proto/submit.h"
#include "graph-obj.h"
#include "handle.h"
#include "submit.h"

#define PCIE_BANDWIDTH 32e9 /* host <-> device copies in model mode */
#define GRAPH_RUN_DEADLINE_MAX_US (3600ull * 1000000) /* as stream_set_deadline */
#define EST_WORDS (2 + OPS_MAX_DIMS) /* dtype, ndim, dims per input in the estimate cache */

struct prep_error {
        int code;
        char *msg;
        size_t msglen;
};

#define PREP_FAIL(pe, c, ...) \
        do { \
                (pe)->code = (c); \
                snprintf((pe)->msg, (pe)->msglen, __VA_ARGS__); \
                return NULL; \
        } while (0)

int task_hold_buffer(struct task *t, struct buffer *b)
{
        for (int i = 0; i < t->nbufs; i++)
                if (task_buffer(t, i) == b)
                        return 0;
        if (task_add_buffer(t, buffer_ref(b)) < 0) {
                buffer_unref(b);
                return -1;
        }
        return 0;
}

/* Bind one tensor of a record to a buffer of the stream's device: the handle, write
 * permission for outputs, the device, dtype, rank, element count, alignment and range, then
 * hold the buffer for the task. Returns ot, or NULL with pe filled by a message the caller
 * prefixes with the tensor's name (prep_name: built only on failure, launches are hot). */
static struct ops_tensor *bind_tensor(struct handle_table *h, struct stream *st, struct task *t,
                                      const struct proto_rec_tensor *rt, int output,
                                      struct ops_tensor *ot, uint64_t *ret_cap,
                                      struct prep_error *pe)
{
        size_t esize = proto_dtype_size(rt->dtype);
        struct buffer *b = handle_lookup(h, HANDLE_BUFFER, rt->buf);
        int64_t numel;

        if (!b)
                PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "unknown buffer handle %u", rt->buf);
        if (b->readonly && output)
                PREP_FAIL(pe, PROTO_E_PERMISSION, "buffer %u is a read-only import", rt->buf);
        if (b->dev != st->dev)
                PREP_FAIL(pe, PROTO_E_INVALID, "buffer is on device %d but the stream on device %d",
                          b->dev->id, st->dev->id);
        if (!esize)
                PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "unknown dtype %u", rt->dtype);
        /* Elements of a STRING tensor are pointers inside a run: a launch would hand the
         * kernel addresses the client chose. Graph runs take strings encoded, from the
         * offset to the end of the buffer, and decode them (graph/exec.c). */
        if (rt->dtype == PROTO_DTYPE_STRING && !ret_cap)
                PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "string tensors are only accepted by graph runs");
        if (rt->ndim > OPS_MAX_DIMS)
                PREP_FAIL(pe, PROTO_E_INVALID, "%u dimensions (at most %d)", rt->ndim, OPS_MAX_DIMS);
        ot->dtype = rt->dtype;
        ot->ndim = rt->ndim;
        memcpy(ot->dims, rt->dims, sizeof(ot->dims[0]) * rt->ndim);
        numel = ops_tensor_numel(ot);
        if (rt->dtype == PROTO_DTYPE_STRING) {
                if (numel < 0)
                        PREP_FAIL(pe, PROTO_E_SHAPE, "negative or overflowing dimensions");
                if (rt->offset > b->size)
                        PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE, "offset %" PRIu64 " is past the buffer of %" PRIu64
                                  " bytes", rt->offset, b->size);
                if (task_hold_buffer(t, b) < 0)
                        PREP_FAIL(pe, PROTO_E_INVALID, "too many buffers");
                *ret_cap = b->size - rt->offset;
                exec_tensor_set_addr(ot, buffer_addr(b) + rt->offset);
                return ot;
        }
        uint64_t nbytes;
        if (numel < 0 || __builtin_mul_overflow((uint64_t)numel, (uint64_t)esize, &nbytes))
                PREP_FAIL(pe, PROTO_E_SHAPE, "negative or overflowing dimensions");
        if (rt->offset % esize)
                PREP_FAIL(pe, PROTO_E_INVALID, "offset %" PRIu64 " is not a multiple of the element size",
                          rt->offset);
        if (!range_ok(rt->offset, nbytes, b->size))
                PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE,
                          "%" PRIu64 " bytes at offset %" PRIu64 " exceed buffer of %" PRIu64 " bytes",
                          nbytes, rt->offset, b->size);
        if (task_hold_buffer(t, b) < 0)
                PREP_FAIL(pe, PROTO_E_INVALID, "too many buffers");
        exec_tensor_set_addr(ot, buffer_addr(b) + rt->offset); /* a device address */
        return ot;
}

/* Prefix the message of a failed bind_tensor with the tensor's name. */
static void prep_name(struct prep_error *pe, const char *what)
{
        char tail[256];

        snprintf(tail, sizeof(tail), "%s", pe->msg);
        snprintf(pe->msg, pe->msglen, "%s: %s", what, tail);
}

/* Resolve one copy endpoint, bounds-checked, to a device address, or to a host address
 * (*ret_host set) for a host region. t, or NULL with pe filled. */
static struct task *copy_endpoint(struct handle_table *h, struct task *t, uint8_t kind,
                                  uint32_t handle, uint64_t off, uint64_t len, const char *which,
                                  uint64_t *ret_addr, int *ret_host, struct prep_error *pe)
{
        if (kind == PROTO_MEM_BUFFER) {
                struct buffer *b = handle_lookup(h, HANDLE_BUFFER, handle);
                if (!b)
                        PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "copy %s: unknown buffer handle %u", which, handle);
                if (b->readonly && which[0] == 'd')
                        PREP_FAIL(pe, PROTO_E_PERMISSION, "copy destination: buffer %u is a read-only import", handle);
                if (!range_ok(off, len, b->size))
                        PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE,
                                  "copy %s: range %" PRIu64 "+%" PRIu64 " outside buffer of %" PRIu64 " bytes",
                                  which, off, len, b->size);
                task_hold_buffer(t, b);
                *ret_addr = buffer_addr(b) + off;
                *ret_host = 0;
                return t;
        }
        if (kind == PROTO_MEM_REGION) {
                struct region *r = handle_lookup(h, HANDLE_REGION, handle);
                if (!r)
                        PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "copy %s: unknown host region handle %u", which, handle);
                if (!range_ok(off, len, r->size))
                        PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE,
                                  "copy %s: range %" PRIu64 "+%" PRIu64 " outside host region of %" PRIu64 " bytes",
                                  which, off, len, r->size);
                if (t->region && t->region != r)
                        PREP_FAIL(pe, PROTO_E_INVALID, "copy between two host regions");
                if (!t->region)
                        t->region = region_ref(r);
                *ret_addr = (uint64_t)(uintptr_t)((uint8_t *)r->map + off);
                *ret_host = 1;
                return t;
        }
        PREP_FAIL(pe, PROTO_E_INVALID, "copy %s: unknown memory kind %u", which, kind);
}

static struct task *prepare_copy(struct handle_table *h, struct stream *st, const struct proto_rec *r,
                                 struct task *t, struct prep_error *pe)
{
        if (r->copy.dst_kind == PROTO_MEM_REGION && r->copy.src_kind == PROTO_MEM_REGION)
                PREP_FAIL(pe, PROTO_E_INVALID, "copy between two host regions");
        uint64_t dst, src;
        int dst_host, src_host;
        if (!copy_endpoint(h, t, r->copy.dst_kind, r->copy.dst, r->copy.dst_off, r->copy.len,
                           "destination", &dst, &dst_host, pe) ||
            !copy_endpoint(h, t, r->copy.src_kind, r->copy.src, r->copy.src_off, r->copy.len,
                           "source", &src, &src_host, pe))
                return NULL;
        t->item.kind = EXEC_COPY;
        t->item.dst = dst;
        t->item.src = src;
        t->item.host_end = dst_host ? EXEC_HOST_DST : src_host ? EXEC_HOST_SRC : EXEC_HOST_NONE;
        t->item.len = r->copy.len;
        t->cost[OPS_ENGINE_DMA] = cost_copy_ns(r->copy.len, t->region ? PCIE_BANDWIDTH
                                                                      : st->dev->desc.mem_bandwidth / 2);
        t->calib_slot = device_calib_slot_copy(st->dev);
        return t;
}

static struct task *prepare_memset(struct handle_table *h, struct stream *st,
                                   const struct proto_rec *r, struct task *t,
                                   struct prep_error *pe)
{
        struct buffer *b = handle_lookup(h, HANDLE_BUFFER, r->memset.buf);

        if (!b)
                PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "memset: unknown buffer handle %u", r->memset.buf);
        if (b->readonly)
                PREP_FAIL(pe, PROTO_E_PERMISSION, "memset: buffer %u is a read-only import", r->memset.buf);
        if (!range_ok(r->memset.off, r->memset.len, b->size))
                PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE,
                          "memset: range %" PRIu64 "+%" PRIu64 " outside buffer of %" PRIu64 " bytes",
                          r->memset.off, r->memset.len, b->size);
        task_hold_buffer(t, b);
        t->item.kind = EXEC_MEMSET;
        t->item.dst = buffer_addr(b) + r->memset.off;
        t->item.len = r->memset.len;
        t->item.value = r->memset.value;
        t->cost[OPS_ENGINE_DMA] = cost_copy_ns(r->memset.len, st->dev->desc.mem_bandwidth);
        t->calib_slot = device_calib_slot_memset(st->dev);
        return t;
}

/* Launch verdicts by signature. Check, infer and cost are pure functions of the operator, the
 * device, the tensors' dtypes and shapes and the attributes (never of the data), and a
 * pipelined client repeats the same call: the engine costs of the last calls that passed are
 * kept, direct-mapped by a hash of that signature and confirmed by comparing it whole, so
 * a repeat skips the operator's validation and cost model (a third of an Add's preparation).
 * Failures are not kept: their message is built each time. Calls whose signature exceeds
 * MEMO_WORDS are validated every time. Loop thread only. */
#define MEMO_SLOTS 64
#define MEMO_WORDS 48

struct launch_memo {
        uint32_t nwords; /* 0: empty */
        uint64_t cost[OPS_ENGINE_COUNT];
        uint64_t sig[MEMO_WORDS];
};

static struct launch_memo memo[MEMO_SLOTS];

/* The signature of a bound call (data pointers aside) into sig; its length in words, or 0
 * when it does not fit. */
static uint32_t launch_sig(const struct ops_call *c, uint16_t op_id, int device, uint64_t *sig)
{
        uint32_t n = 0;

        sig[n++] = (uint64_t)op_id | (uint64_t)c->nin << 16 | (uint64_t)c->nout << 24 |
                   (uint64_t)c->nattr << 32 | (uint64_t)(uint32_t)device << 40;
        for (int i = 0; i < c->nin + c->nout; i++) {
                const struct ops_tensor *t = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
                if (n + 1 + (uint32_t)t->ndim > MEMO_WORDS)
                        return 0;
                sig[n++] = (uint64_t)(uint32_t)t->dtype | (uint64_t)(uint32_t)t->ndim << 32;
                for (int d = 0; d < t->ndim; d++)
                        sig[n++] = (uint64_t)t->dims[d];
        }
        for (int i = 0; i < c->nattr; i++) {
                const struct ops_attr *a = &c->attr[i];
                uint64_t name[OPS_NAME_MAX / 8] = { 0 };
                if (n + OPS_NAME_MAX / 8 + 2 > MEMO_WORDS)
                        return 0;
                memcpy(name, a->name, strnlen(a->name, OPS_NAME_MAX));
                for (size_t k = 0; k < OPS_NAME_MAX / 8; k++)
                        sig[n++] = name[k];
                sig[n++] = (uint64_t)(uint32_t)a->type;
                uint64_t v;
                if (a->type == OPS_ATTR_FLOAT)
                        memcpy(&v, &a->f, sizeof(v));
                else
                        v = (uint64_t)a->i;
                sig[n++] = v;
        }
        return n;
}

static unsigned sig_slot(const uint64_t *sig, uint32_t n)
{
        uint64_t h = 0x9e3779b97f4a7c15ull;

        for (uint32_t i = 0; i < n; i++) {
                h ^= sig[i];
                h *= 0xff51afd7ed558ccdull;
                h ^= h >> 32;
        }
        return (unsigned)(h % MEMO_SLOTS);
}

static struct task *prepare_launch(struct handle_table *h, struct stream *st,
                                   const struct proto_rec *r, struct task *t,
                                   struct prep_error *pe)
{
        const struct ops_def *op = r->type == PROTO_REC_LAUNCH_ID ? ops_by_id(r->launch.op_id)
                                                                 : ops_lookup(r->launch.op);
        /* The call is assembled whole here (the loop thread's scratch: check, infer and cost
         * take a struct ops_call), then packed into a block sized to it for the queue. */
        static struct ops_call scratch;
        struct ops_call *call = &scratch;
        void *data[OPS_MAX_INPUTS + OPS_MAX_OUTPUTS];
        char err[192], what[64];
        uint64_t flops = 0, bytes = 0;

        /* only ids op_resolve gives: default-domain operators, as launches by name reach */
        if (r->type == PROTO_REC_LAUNCH_ID && (!op || op->domain))
                PREP_FAIL(pe, PROTO_E_INVALID, "launch by id: operator id %u is not an id op_resolve gives",
                          r->launch.op_id);
        if (!op)
                PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "unknown operator '%s'", r->launch.op);
        if (r->launch.nin > OPS_MAX_INPUTS || r->launch.nout > OPS_MAX_OUTPUTS ||
            r->launch.nattr > OPS_MAX_ATTRS)
                PREP_FAIL(pe, PROTO_E_INVALID, "%s: too many inputs, outputs or attributes", op->name);
        call->nin = r->launch.nin;
        call->nout = r->launch.nout;
        call->nattr = r->launch.nattr;
        for (int i = 0; i < call->nin + call->nout; i++) {
                int out = i >= call->nin;
                if (!bind_tensor(h, st, t, &r->launch.t[i], out,
                                 out ? &call->out[i - call->nin] : &call->in[i], NULL, pe)) {
                        snprintf(what, sizeof(what), "%s: %s %d", op->name, out ? "output" : "input",
                                 out ? i - call->nin : i);
                        prep_name(pe, what);
                        return NULL;
                }
        }
        for (int i = 0; i < call->nattr; i++) {
                const struct proto_rec_attr *ra = &r->launch.attr[i];
                if (ra->type != OPS_ATTR_INT && ra->type != OPS_ATTR_FLOAT)
                        PREP_FAIL(pe, PROTO_E_INVALID, "%s: attribute '%s' has unknown type %u",
                                  op->name, ra->name, ra->type);
                snprintf(call->attr[i].name, sizeof(call->attr[i].name), "%s", ra->name);
                call->attr[i].type = ra->type;
                call->attr[i].i = ra->i;
                call->attr[i].f = ra->f;
        }
        uint16_t op_id = (uint16_t)ops_id(op);
        uint64_t sig[MEMO_WORDS];
        uint32_t nsig = launch_sig(call, op_id, st->dev->id, sig);
        struct launch_memo *m = nsig ? &memo[sig_slot(sig, nsig)] : NULL;
        if (m && m->nwords == nsig && memcmp(m->sig, sig, nsig * sizeof(sig[0])) == 0) {
                memcpy(t->cost, m->cost, sizeof(t->cost)); /* validated before, same costs */
                goto pack;
        }
        /* check and cost see the call without data (they must not read tensors the device
         * has not computed yet): the pointers step aside rather than the call being copied */
        for (int i = 0; i < call->nin + call->nout; i++) {
                struct ops_tensor *ot = i < call->nin ? &call->in[i] : &call->out[i - call->nin];
                data[i] = ot->data;
                ot->data = NULL;
        }
        err[0] = 0;
        int bad = ops_check(op, call, err, sizeof(err)) < 0;
        if (!bad && op->cost)
                ops_cost(op, call, &flops, &bytes);
        for (int i = 0; i < call->nin + call->nout; i++)
                (i < call->nin ? &call->in[i] : &call->out[i - call->nin])->data = data[i];
        if (bad)
                PREP_FAIL(pe, PROTO_E_SHAPE, "%s", err[0] ? err : "invalid operator call");
        /* Capable engines: the kernel's own kind, and the AI CPU, which runs every operator. */
        int n = 0;
        for (int e = 0; e < OPS_ENGINE_COUNT; e++) {
                if ((e != (int)op->engine && e != OPS_ENGINE_AICPU) || st->dev->desc.cores[e] <= 0)
                        continue;
                t->cost[e] = cost_kernel_ns(flops, bytes, st->dev->desc.flops_per_core[e], 1,
                                            st->dev->desc.mem_bandwidth);
                n++;
        }
        if (!n)
                PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "%s: no engine of device %d can run it",
                          op->name, st->dev->id);
        if (m) {
                m->nwords = nsig;
                memcpy(m->cost, t->cost, sizeof(m->cost));
                memcpy(m->sig, sig, nsig * sizeof(sig[0]));
        }
pack:
        /* returned to its pool with the task */
        if (!(t->item.call = exec_call_get(call->nin, call->nout, call->nattr)))
                PREP_FAIL(pe, PROTO_E_LIMIT, "%s: out of memory", op->name);
        exec_call_pack(t->item.call, call);
        t->item.op_id = op_id;
        t->calib_slot = t->item.op_id; /* calibration rows are per operator id */
        t->item.kind = EXEC_OP;
        return t;
}

static struct task *prepare_event(struct handle_table *h, const struct proto_rec *r, struct task *t,
                                  struct prep_error *pe)
{
        struct npu_evt *e = handle_lookup(h, HANDLE_EVENT, r->event.event);

        if (!e)
                PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "%s: unknown event handle %u",
                          r->type == PROTO_REC_EVENT_RECORD ? "event record" : "stream wait",
                          r->event.event);
        t->evt = evt_ref(e);
        if (r->type == PROTO_REC_EVENT_RECORD)
                t->gen = ++e->recorded_gen;
        else
                t->gen = e->recorded_gen;
        return t;
}

/* Estimated duration on one AI CPU core, and of each step on each engine (o->est_steps, when
 * the graph has steps); the last estimate is reused while the input shapes stay the same
 * (serving runs the same shapes again and again). */
static uint64_t run_estimate(struct graph_obj *o, const struct graph_bind *b)
{
        const struct backend_device_desc *d = &o->dev->desc;
        size_t words = (size_t)b->nin * EST_WORDS;
        int64_t *key = calloc(words ? words : 1, sizeof(*key));

        if (!key)
                return (uint64_t)o->g->nnodes * COST_LAUNCH_NS;
        for (int i = 0; i < b->nin; i++) {
                key[i * EST_WORDS] = b->t[i].dtype;
                key[i * EST_WORDS + 1] = b->t[i].ndim;
                for (int k = 0; k < b->t[i].ndim && k < OPS_MAX_DIMS; k++)
                        key[i * EST_WORDS + 2 + k] = b->t[i].dims[k];
        }
        if (o->est_valid && o->est_nin == b->nin && memcmp(key, o->est_shapes, words * sizeof(*key)) == 0) {
                free(key);
                return o->est_ns;
        }
        o->est_ns = graph_estimate_ns(o->g, b->nin, b->t, d->flops_per_core[OPS_ENGINE_AICPU],
                                      d->mem_bandwidth, NULL);
        free(o->est_steps);
        free(o->est_parts);
        free(o->est_balance);
        free(o->est_host);
        o->est_steps = NULL;
        o->est_parts = NULL;
        o->est_balance = NULL;
        o->est_host = NULL;
        if (o->g->steps) {
                size_t n = (size_t)o->g->steps->nsteps * OPS_ENGINE_COUNT;
                o->est_steps = malloc(n * sizeof(*o->est_steps));
                o->est_parts = malloc((size_t)o->g->steps->nsteps * sizeof(*o->est_parts));
                o->est_balance = malloc((size_t)o->g->steps->nsteps);
                o->est_host = malloc((size_t)o->g->steps->nsteps * sizeof(*o->est_host));
                if (!o->est_steps || !o->est_parts || !o->est_balance || !o->est_host ||
                    graph_estimate_steps_parts(o->g, b->nin, b->t, d->flops_per_core, d->cores, d->mem_bandwidth,
                                               o->est_steps, o->est_parts, o->est_balance, o->est_host) < 0) {
                        free(o->est_steps);
                        free(o->est_parts);
                        free(o->est_balance);
                        free(o->est_host);
                        o->est_steps = NULL;
                        o->est_parts = NULL;
                        o->est_balance = NULL;
                        o->est_host = NULL;
                }
        }
        free(o->est_shapes);
        o->est_shapes = key;
        o->est_nin = b->nin;
        o->est_valid = 1;
        return o->est_ns;
}

/* The step state of a run of o (graph/steps.h), from the estimate just made; NULL when the
 * graph has no steps or memory is short (the run is then one task). Step 0 is ready. */
static struct run_steps *run_steps_new(const struct graph_obj *o)
{
        const struct graph_steps *gs = o->g->steps;
        struct run_steps *rs;
        size_t n, costs;
        char *p;

        if (!gs || !o->est_steps || !o->est_parts || !o->est_balance || !o->est_host)
                return NULL;
        n = (size_t)gs->nsteps;
        costs = n * OPS_ENGINE_COUNT * sizeof(uint64_t);
        rs = malloc(sizeof(*rs) + n * sizeof(struct exec_item) + costs + n * sizeof(uint64_t) +
                    4 * n * sizeof(uint32_t) + 3 * n * sizeof(int) + 2 * n);
        if (!rs)
                return NULL;
        p = (char *)(rs + 1);
        rs->gs = gs;
        rs->nsteps = gs->nsteps;
        rs->items = (struct exec_item *)p; /* written when each step is sent */
        p += n * sizeof(struct exec_item);
        rs->cost = (uint64_t *)p;
        memcpy(rs->cost, o->est_steps, costs);
        p += costs;
        rs->host_ns = (uint64_t *)p;
        memcpy(rs->host_ns, o->est_host, n * sizeof(uint64_t));
        p += n * sizeof(uint64_t);
        rs->max_parts = (uint32_t *)p;
        memcpy(rs->max_parts, o->est_parts, n * sizeof(uint32_t));
        p += n * sizeof(uint32_t);
        rs->parts = (uint32_t *)p; /* decided when the step is first sent */
        memset(rs->parts, 0, 3 * n * sizeof(uint32_t));
        p += n * sizeof(uint32_t);
        rs->parts_sent = (uint32_t *)p;
        p += n * sizeof(uint32_t);
        rs->parts_done = (uint32_t *)p;
        p += n * sizeof(uint32_t);
        rs->pending = (int *)p;
        memcpy(rs->pending, gs->npred, n * sizeof(int));
        p += n * sizeof(int);
        rs->ready = (int *)p;
        p += n * sizeof(int);
        rs->in_unit = (int *)p;
        memset(rs->in_unit, 0, n * sizeof(int));
        p += n * sizeof(int);
        rs->state = (uint8_t *)p;
        memset(rs->state, STEP_WAITING, n);
        p += n;
        rs->balance = (uint8_t *)p;
        memcpy(rs->balance, o->est_balance, n);
        rs->ready_head = 0;
        rs->ready_tail = 1;
        rs->ready[0] = 0;
        rs->state[0] = STEP_READY;
        return rs;
}

static struct task *prepare_graph_run(struct handle_table *h, struct stream *st,
                                      const struct proto_rec *r, struct task *t,
                                      struct prep_error *pe)
{
        struct graph_obj *o = handle_lookup(h, HANDLE_GRAPH, r->graph.graph);
        const struct graph *g;
        struct graph_bind *b;
        int nin = r->graph.nin, nout = r->graph.nout, rc;
        char err[512], what[160];

        if (!o)
                PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "graph run: unknown graph handle %u", r->graph.graph);
        g = o->g;
        if (o->dev != st->dev)
                PREP_FAIL(pe, PROTO_E_INVALID,
                          "graph run: the graph is loaded on device %d but the stream is on device %d",
                          o->dev->id, st->dev->id);
        if (nin != g->ninputs || nout != g->noutputs)
                PREP_FAIL(pe, PROTO_E_INVALID, "graph run: the graph has %d inputs and %d outputs, %d and %d bound",
                          g->ninputs, g->noutputs, nin, nout);
        b = calloc(1, sizeof(*b));
        if (!b)
                PREP_FAIL(pe, PROTO_E_LIMIT, "graph run: out of memory");
        b->g = g;
        b->owner = graph_obj_ref(o);
        b->nin = nin;
        b->nout = nout;
        t->item.graph = b; /* released with the task, whatever happens next */
        if (r->type == PROTO_REC_GRAPH_RUN_OPT) {
                if (r->graph.flags & ~PROTO_RUN_FLAGS_KNOWN)
                        PREP_FAIL(pe, PROTO_E_INVALID, "graph run: unknown option flags 0x%x",
                                  r->graph.flags & ~PROTO_RUN_FLAGS_KNOWN);
                if (r->graph.deadline_us > GRAPH_RUN_DEADLINE_MAX_US)
                        PREP_FAIL(pe, PROTO_E_INVALID, "graph run: deadline of %" PRIu64
                                  " us is over the limit of one hour", r->graph.deadline_us);
                t->deadline_ns = r->graph.deadline_us * 1000;
                memcpy(t->tag, r->graph.tag, sizeof(t->tag));
                if (r->graph.flags & PROTO_RUN_FLEX_OUTPUTS) {
                        b->got = calloc((size_t)(nout ? nout : 1), sizeof(*b->got));
                        if (!b->got)
                                PREP_FAIL(pe, PROTO_E_LIMIT, "graph run: out of memory");
                        b->flex = 1;
                }
        }
        for (int i = 0; i < nin + nout; i++) {
                int out = i >= nin;
                if (!bind_tensor(h, st, t, &r->graph.t[i], out, &b->t[i], &b->cap[i], pe)) {
                        /* names come from the model and may be cut: sanitized (graph_sanitize) */
                        snprintf(what, sizeof(what), "graph run: %s '%s'", out ? "output" : "input",
                                 g->values[out ? g->outputs[i - nin] : g->inputs[i]].name);
                        graph_sanitize(what);
                        prep_name(pe, what);
                        return NULL;
                }
        }
        rc = graph_check_inputs(g, nin, b->t, err, sizeof(err));
        if (rc) {
                pe->code = rc;
                snprintf(pe->msg, pe->msglen, "graph run: %s", err);
                graph_sanitize(pe->msg);
                return NULL;
        }
        if (st->dev->desc.cores[OPS_ENGINE_AICPU] <= 0)
                PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "graph run: device %d has no AI CPU to run graphs",
                          st->dev->id);
        /* Without steps the executor runs every node on one host worker: the AI CPU is its
         * engine. With steps (the usual case) each step is dispatched on its own, on the
         * engines its node can run on (sched.c); this estimate is then the whole run's on
         * one AI CPU core, for reference. */
        t->cost[OPS_ENGINE_AICPU] = run_estimate(o, b);
        if (!t->cost[OPS_ENGINE_AICPU])
                t->cost[OPS_ENGINE_AICPU] = 1;
        t->steps = run_steps_new(o);
        if (t->steps)
                t->tiles = (uint64_t)t->steps->nsteps;
        t->calib_slot = device_calib_slot_graph(st->dev);
        t->item.kind = EXEC_GRAPH;
        return t;
}

int submit_prepare(struct handle_table *h, struct stream *st, const struct proto_rec *r,
                   struct task *t, char *msg, size_t msglen)
{
        struct prep_error pe = { .code = 0, .msg = msg, .msglen = msglen };
        struct task *ok;

        msg[0] = 0;
        switch (r->type) {
        case PROTO_REC_COPY: ok = prepare_copy(h, st, r, t, &pe); break;
        case PROTO_REC_MEMSET: ok = prepare_memset(h, st, r, t, &pe); break;
        case PROTO_REC_LAUNCH:
        case PROTO_REC_LAUNCH_ID: ok = prepare_launch(h, st, r, t, &pe); break;
        case PROTO_REC_EVENT_RECORD:
        case PROTO_REC_STREAM_WAIT: ok = prepare_event(h, r, t, &pe); break;
        case PROTO_REC_GRAPH_RUN:
        case PROTO_REC_GRAPH_RUN_OPT: ok = prepare_graph_run(h, st, r, t, &pe); break;
        case PROTO_REC_NOTIFY: /* nothing to resolve: the stream is the task's only object */
                t->notify_tag = r->notify.tag;
                t->hold = (r->notify.flags & PROTO_NOTIFY_HOLD) != 0;
                ok = t;
                break;
        default:
                ok = NULL;
                pe.code = PROTO_E_INVALID;
                snprintf(msg, msglen, "unknown record type %u", r->type);
        }
        return ok ? 0 : pe.code ? pe.code : PROTO_E_INVALID;
}

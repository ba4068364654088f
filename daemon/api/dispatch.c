/* Request dispatch from the method tables, parameter validation helpers, and decoding of
 * SUBMIT task records into prepared tasks. */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "policy/cost.h"
#include "proto/errors.h"
#include "proto/submit.h"
#include "dispatch.h"
#include "daemon/exec/graph-obj.h"
#include "util/log.h"
#include "npud.h"
#include "daemon/exec/sched.h"
#include "session.h"
#include "daemon/exec/tenant.h"

#define PCIE_BANDWIDTH 32e9 /* host <-> device copies in model mode */

static const struct method *const method_groups[] = {
        methods_session, methods_memory, methods_stream, methods_admin, methods_sched, methods_share,
        methods_manage, methods_graph,
};

static const struct method *method_find(const char *name)
{
        for (size_t g = 0; g < sizeof(method_groups) / sizeof(method_groups[0]); g++)
                for (const struct method *m = method_groups[g]; m->name; m++)
                        if (strcmp(m->name, name) == 0)
                                return m;
        return NULL;
}

void dispatch_request(struct request *req)
{
        struct session *s = req->session;
        const struct method *m = method_find(req->method);

        if (!m) {
                session_reply_error(s, req->id, PROTO_E_PROTOCOL, "unknown method '%.64s'",
                                    req->method);
                return;
        }
        if (!s->version && !(m->flags & METHOD_BEFORE_HELLO)) {
                session_reply_error(s, req->id, PROTO_E_PROTOCOL,
                                    "method '%s' before hello", m->name);
                return;
        }
        if ((m->flags & METHOD_ADMIN) && !s->admin) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                    "method '%s' requires root or the admin group", m->name);
                return;
        }
        m->handler(req);
}

/* A JSON string of a name the client chose. peer_identity keeps comm valid UTF-8; should some
 * other source not, bytes beyond ASCII become '?' rather than the whole entry vanishing
 * from the listing (json_pack fails on invalid UTF-8). NULL only without memory. */
json_t *json_client_text(const char *s)
{
        json_t *j = json_string(s);
        char buf[256];
        size_t i;

        if (j)
                return j;
        for (i = 0; s[i] && i < sizeof(buf) - 1; i++)
                buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
        buf[i] = 0;
        return json_string(buf);
}

int params_only(struct request *req, const char *const *allowed)
{
        const char *key;
        json_t *v;

        json_object_foreach(req->params, key, v) {
                int ok = 0;
                for (const char *const *a = allowed; *a; a++)
                        if (strcmp(*a, key) == 0)
                                ok = 1;
                if (!ok) {
                        session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                            "%s: unknown parameter '%.64s'", req->method, key);
                        return -EINVAL;
                }
        }
        return 0;
}

int param_u64_opt(struct request *req, const char *key, uint64_t max, uint64_t def, uint64_t *ret)
{
        json_t *v = json_object_get(req->params, key);

        if (!v) {
                *ret = def;
                return 0;
        }
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > max) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "%s: parameter '%s' must be an integer from 0 to %" PRIu64,
                                    req->method, key, max);
                return -EINVAL;
        }
        *ret = (uint64_t)json_integer_value(v);
        return 0;
}

int param_u64(struct request *req, const char *key, uint64_t max, uint64_t *ret)
{
        if (!json_object_get(req->params, key)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "%s: missing parameter '%s'", req->method, key);
                return -EINVAL;
        }
        return param_u64_opt(req, key, max, 0, ret);
}

/* ---- SUBMIT records ---- */

struct prep_error {
        int code;
        char msg[256];
};

#define PREP_FAIL(pe, c, ...) \
        do { \
                (pe)->code = (c); \
                snprintf((pe)->msg, sizeof((pe)->msg), __VA_ARGS__); \
                return NULL; \
        } while (0)

static int task_hold_buffer(struct task *t, struct buffer *b)
{
        for (int i = 0; i < t->nbufs; i++)
                if (t->bufs[i] == b)
                        return 0;
        if (t->nbufs >= TASK_MAX_REFS)
                return -1;
        t->bufs[t->nbufs++] = buffer_ref(b);
        return 0;
}

/* Resolve one copy endpoint to a pointer, bounds-checked. */
static void *copy_endpoint(struct session *s, struct task *t, uint8_t kind, uint32_t handle,
                           uint64_t off, uint64_t len, const char *which, struct prep_error *pe)
{
        if (kind == PROTO_MEM_BUFFER) {
                struct buffer *b = handle_lookup(&s->handles, HANDLE_BUFFER, handle);
                if (!b)
                        PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "copy %s: unknown buffer handle %u", which, handle);
                if (b->readonly && which[0] == 'd')
                        PREP_FAIL(pe, PROTO_E_PERMISSION, "copy destination: buffer %u is a read-only import", handle);
                if (!range_ok(off, len, b->size))
                        PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE,
                                  "copy %s: range %" PRIu64 "+%" PRIu64 " outside buffer of %" PRIu64 " bytes",
                                  which, off, len, b->size);
                task_hold_buffer(t, b);
                return buffer_ptr(b) + off;
        }
        if (kind == PROTO_MEM_REGION) {
                struct region *r = handle_lookup(&s->handles, HANDLE_REGION, handle);
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
                return (uint8_t *)r->map + off;
        }
        PREP_FAIL(pe, PROTO_E_INVALID, "copy %s: unknown memory kind %u", which, kind);
}

static struct task *prepare_copy(struct session *s, struct stream *st, const struct proto_rec *r,
                                 struct task *t, struct prep_error *pe)
{
        if (r->copy.dst_kind == PROTO_MEM_REGION && r->copy.src_kind == PROTO_MEM_REGION)
                PREP_FAIL(pe, PROTO_E_INVALID, "copy between two host regions");
        void *dst = copy_endpoint(s, t, r->copy.dst_kind, r->copy.dst, r->copy.dst_off,
                                  r->copy.len, "destination", pe);
        if (!dst)
                return NULL;
        void *src = copy_endpoint(s, t, r->copy.src_kind, r->copy.src, r->copy.src_off,
                                  r->copy.len, "source", pe);
        if (!src)
                return NULL;
        t->item.kind = EXEC_COPY;
        t->item.dst = dst;
        t->item.src = src;
        t->item.len = r->copy.len;
        t->cost[OPS_ENGINE_DMA] = cost_copy_ns(r->copy.len, t->region ? PCIE_BANDWIDTH
                                                                      : st->dev->desc.mem_bandwidth / 2);
        t->calib_slot = device_calib_slot_copy(st->dev);
        return t;
}

static struct task *prepare_memset(struct session *s, struct stream *st,
                                   const struct proto_rec *r, struct task *t,
                                   struct prep_error *pe)
{
        struct buffer *b = handle_lookup(&s->handles, HANDLE_BUFFER, r->memset.buf);

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
        t->item.dst = buffer_ptr(b) + r->memset.off;
        t->item.len = r->memset.len;
        t->item.value = r->memset.value;
        t->cost[OPS_ENGINE_DMA] = cost_copy_ns(r->memset.len, st->dev->desc.mem_bandwidth);
        t->calib_slot = device_calib_slot_memset(st->dev);
        return t;
}

static struct task *prepare_launch(struct session *s, struct stream *st,
                                   const struct proto_rec *r, struct task *t,
                                   struct prep_error *pe)
{
        const struct ops_def *op = ops_lookup(r->launch.op);
        struct ops_call *call = &t->item.call;
        struct ops_call probe;
        char err[192];
        uint64_t flops = 0, bytes = 0;

        if (!op)
                PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "unknown operator '%s'", r->launch.op);
        if (r->launch.nin > OPS_MAX_INPUTS || r->launch.nout > OPS_MAX_OUTPUTS ||
            r->launch.nattr > OPS_MAX_ATTRS)
                PREP_FAIL(pe, PROTO_E_INVALID, "%s: too many inputs, outputs or attributes", op->name);
        call->nin = r->launch.nin;
        call->nout = r->launch.nout;
        call->nattr = r->launch.nattr;
        for (int i = 0; i < call->nin + call->nout; i++) {
                const struct proto_rec_tensor *rt = &r->launch.t[i];
                struct ops_tensor *ot = i < call->nin ? &call->in[i] : &call->out[i - call->nin];
                const char *role = i < call->nin ? "input" : "output";
                int idx = i < call->nin ? i : i - call->nin;
                size_t esize = proto_dtype_size(rt->dtype);
                struct buffer *b = handle_lookup(&s->handles, HANDLE_BUFFER, rt->buf);

                if (!b)
                        PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "%s: %s %d: unknown buffer handle %u",
                                  op->name, role, idx, rt->buf);
                if (b->readonly && i >= call->nin)
                        PREP_FAIL(pe, PROTO_E_PERMISSION, "%s: output %d: buffer %u is a read-only import",
                                  op->name, idx, rt->buf);
                if (b->dev != st->dev)
                        PREP_FAIL(pe, PROTO_E_INVALID,
                                  "%s: %s %d: buffer is on device %d but the stream on device %d",
                                  op->name, role, idx, b->dev->id, st->dev->id);
                if (!esize)
                        PREP_FAIL(pe, PROTO_E_UNSUPPORTED, "%s: %s %d: unknown dtype %u",
                                  op->name, role, idx, rt->dtype);
                if (rt->ndim > OPS_MAX_DIMS)
                        PREP_FAIL(pe, PROTO_E_INVALID, "%s: %s %d: %u dimensions (at most %d)",
                                  op->name, role, idx, rt->ndim, OPS_MAX_DIMS);
                ot->dtype = rt->dtype;
                ot->ndim = rt->ndim;
                memcpy(ot->dims, rt->dims, sizeof(ot->dims));
                int64_t numel = ops_tensor_numel(ot);
                if (numel < 0 || (uint64_t)numel > UINT64_MAX / esize)
                        PREP_FAIL(pe, PROTO_E_SHAPE, "%s: %s %d: negative or overflowing dimensions",
                                  op->name, role, idx);
                uint64_t nbytes = (uint64_t)numel * esize;
                if (rt->offset % esize)
                        PREP_FAIL(pe, PROTO_E_INVALID,
                                  "%s: %s %d: offset %" PRIu64 " is not a multiple of the element size",
                                  op->name, role, idx, rt->offset);
                if (!range_ok(rt->offset, nbytes, b->size))
                        PREP_FAIL(pe, PROTO_E_OUT_OF_RANGE,
                                  "%s: %s %d: %" PRIu64 " bytes at offset %" PRIu64 " exceed buffer of %" PRIu64 " bytes",
                                  op->name, role, idx, nbytes, rt->offset, b->size);
                if (task_hold_buffer(t, b) < 0)
                        PREP_FAIL(pe, PROTO_E_INVALID, "%s: too many buffers", op->name);
                ot->data = buffer_ptr(b) + rt->offset;
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
        probe = *call;
        for (int i = 0; i < probe.nin; i++)
                probe.in[i].data = NULL;
        for (int i = 0; i < probe.nout; i++)
                probe.out[i].data = NULL;
        err[0] = 0;
        if (op->check(&probe, err, sizeof(err)) < 0)
                PREP_FAIL(pe, PROTO_E_SHAPE, "%s", err[0] ? err : "invalid operator call");
        if (op->cost)
                op->cost(&probe, &flops, &bytes);
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
        t->calib_slot = (int)ops_index(op);
        t->item.kind = EXEC_OP;
        t->item.op = op;
        return t;
}

static struct task *prepare_free(struct session *s, const struct proto_rec *r, struct task *t,
                                 struct prep_error *pe)
{
        struct buffer *b = handle_remove(&s->handles, HANDLE_BUFFER, r->free.buf);

        if (!b)
                PREP_FAIL(pe, PROTO_E_BAD_HANDLE, "free: buffer handle %u is unknown or already freed",
                          r->free.buf);
        session_buffer_released(s, b);
        t->bufs[t->nbufs++] = b; /* the handle's reference, dropped when the stream gets here */
        return t;
}

static struct task *prepare_event(struct session *s, const struct proto_rec *r, struct task *t,
                                  struct prep_error *pe)
{
        struct npu_evt *e = handle_lookup(&s->handles, HANDLE_EVENT, r->event.event);

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

int dispatch_over_queue_limit(const struct session *s)
{
        const struct tenant *t = s->tenant;
        return s->queued_tasks >= s->npud->config.limits.max_queued_tasks ||
               (t->pol.max_queued_tasks && t->queued >= t->pol.max_queued_tasks);
}

void dispatch_submit_record(struct session *s, const struct proto_rec *r)
{
        struct stream *st = handle_lookup(&s->handles, HANDLE_STREAM, r->stream);
        struct prep_error pe = { 0 };
        struct task *t, *ok = NULL;
        enum task_kind kind = r->type == PROTO_REC_EVENT_RECORD ? TASK_EVENT_RECORD
                            : r->type == PROTO_REC_STREAM_WAIT  ? TASK_STREAM_WAIT
                            : r->type == PROTO_REC_FREE         ? TASK_FREE
                                                                : TASK_EXEC;

        if (!st) {
                char msg[96];
                snprintf(msg, sizeof(msg), "unknown or destroyed stream handle %u", r->stream);
                session_task_failed(s, NULL, r->seq, PROTO_E_BAD_HANDLE, msg);
                return;
        }
        t = task_new(kind, st, r->seq);
        if (!t) {
                session_task_failed(s, st, r->seq, PROTO_E_LIMIT, "out of memory for tasks");
                return;
        }
        if (s->backpressure_error && dispatch_over_queue_limit(s)) {
                /* Rejected records must not become queued tasks themselves: consecutive
                 * rejections on one stream share one failure marker, and only the first
                 * failure since the stream's last synchronization is reported anyway, so
                 * later ones are counted without a notification each. */
                task_free(t);
                if ((st->busy_marker && !stream_idle(st)) || st->error.code) {
                        s->tasks_failed++;
                        return;
                }
                pe.code = PROTO_E_BUSY;
                snprintf(pe.msg, sizeof(pe.msg),
                         "queued-task limit reached (limits.max_queued_tasks: session %u/%u, "
                         "tenant '%s' %u/%u); retry later",
                         s->queued_tasks, s->npud->config.limits.max_queued_tasks, s->tenant->pol.name,
                         s->tenant->queued, s->tenant->pol.max_queued_tasks);
                t = NULL;
                goto failed;
        }
        switch (r->type) {
        case PROTO_REC_COPY: ok = prepare_copy(s, st, r, t, &pe); break;
        case PROTO_REC_MEMSET: ok = prepare_memset(s, st, r, t, &pe); break;
        case PROTO_REC_LAUNCH: ok = prepare_launch(s, st, r, t, &pe); break;
        case PROTO_REC_EVENT_RECORD:
        case PROTO_REC_STREAM_WAIT: ok = prepare_event(s, r, t, &pe); break;
        case PROTO_REC_FREE: ok = prepare_free(s, r, t, &pe); break;
        case PROTO_REC_GRAPH_RUN:
                pe.code = graph_prepare_run(s, st, r, t, pe.msg, sizeof(pe.msg));
                ok = pe.code ? NULL : t;
                break;
        default:
                pe.code = PROTO_E_INVALID;
                snprintf(pe.msg, sizeof(pe.msg), "unknown record type %u", r->type);
        }
        if (!ok) {
failed:
                task_free(t); /* NULL-safe */
                /* The failure takes effect in stream order: work queued before it still runs. */
                t = stream_idle(st) ? NULL : task_new(TASK_FAIL, st, r->seq);
                if (!t) {
                        session_task_failed(s, st, r->seq, pe.code, pe.msg);
                        return;
                }
                t->item.status = pe.code;
                snprintf(t->item.err, sizeof(t->item.err), "%s", pe.msg);
                st->busy_marker = pe.code == PROTO_E_BUSY;
        } else {
                st->busy_marker = 0;
        }
        s->queued_tasks++;
        s->tasks_submitted++;
        sched_enqueue(s->npud, t);
}

/* Stream and event methods, including the synchronize family whose replies are deferred
 * until the work they wait for completed. */
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto/errors.h"
#include "dispatch.h"
#include "npud.h"
#include "daemon/exec/sched.h"
#include "daemon/exec/reclaim.h"
#include "daemon/exec/loopcpu.h"
#include "util/clock.h"
#include "session.h"
#include "daemon/exec/tenant.h"
#include "daemon/exec/alloc.h"
#include "policy/placement.h"

static struct stream *stream_param(struct request *req)
{
        uint64_t h;
        struct stream *st;

        if (param_u64(req, "stream", UINT32_MAX, &h) < 0)
                return NULL;
        st = handle_lookup(&req->session->handles, HANDLE_STREAM, (uint32_t)h);
        if (!st)
                session_reply_error(req->session, req->id, PROTO_E_BAD_HANDLE,
                                    "%s: stream handle %" PRIu64 " is unknown or destroyed",
                                    req->method, h);
        return st;
}

static struct npu_evt *event_param(struct request *req, const char *key)
{
        uint64_t h;
        struct npu_evt *e;

        if (param_u64(req, key, UINT32_MAX, &h) < 0)
                return NULL;
        e = handle_lookup(&req->session->handles, HANDLE_EVENT, (uint32_t)h);
        if (!e)
                session_reply_error(req->session, req->id, PROTO_E_BAD_HANDLE,
                                    "%s: event handle %" PRIu64 " is unknown or destroyed",
                                    req->method, h);
        return e;
}

/* A wait's optional "cpu" (session version 5): the CPU the waiting client thread runs on,
 * where the session's replies are written from (session.c). 0, or -1 after an error reply. */
static int wait_cpu_param(struct request *req)
{
        json_t *v = json_object_get(req->params, "cpu");

        if (!v)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= CPU_SETSIZE) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "%s: parameter 'cpu' must be a CPU number (0 to %d)", req->method,
                                    CPU_SETSIZE - 1);
                return -1;
        }
        req->session->client_cpu = (int)json_integer_value(v);
        if (req->session->tenant && req->session->tenant->pol.klass == POLICY_CLASS_LATENCY_CRITICAL)
                loopcpu_client(req->session->client_cpu, now_ns());
        return 0;
}

static int waiter_add(struct request *req, enum waiter_kind kind, void *target,
                      struct waiter_list *list)
{
        uint32_t max = req->session->npud->config.limits.max_waiters;
        struct waiter *w;

        if (session_waiter_count(req->session, max) >= max) {
                session_reply_error(req->session, req->id, PROTO_E_LIMIT,
                                    "%s: the session already waits on limits.max_waiters (%u) "
                                    "synchronizations", req->method, max);
                return -1;
        }
        w = calloc(1, sizeof(*w));
        if (!w) {
                session_reply_error(req->session, req->id, PROTO_E_LIMIT, "out of memory");
                return -1;
        }
        w->session = req->session;
        w->request_id = req->id;
        w->kind = kind;
        w->target = target;
        if (kind == WAIT_STREAM)
                stream_ref(target);
        else if (kind == WAIT_EVENT)
                evt_ref(target);
        if (list)
                TAILQ_INSERT_TAIL(list, w, obj_link);
        TAILQ_INSERT_TAIL(&req->session->waiters, w, session_link);
        return 0;
}

/* Streams one uid may hold: limits.max_streams_per_uid, and never more than a quarter of the
 * smallest device's stream table, so that no single user can exhaust a device's streams. */
static uint32_t uid_stream_cap(const struct npud *d)
{
        uint32_t cap = d->config.limits.max_streams_per_uid;

        for (int i = 0; i < d->ex.devices.count; i++) {
                uint32_t q = d->ex.devices.devices[i].desc.max_streams / 4;
                if (q < cap)
                        cap = q ? q : 1;
        }
        return cap;
}

/* Placement of a stream created for "any device" (policy/placement.c). */
static struct device *place_stream(struct session *s)
{
        struct npud *d = s->npud;
        struct place_device pd[64];
        int n = d->ex.devices.count < 64 ? d->ex.devices.count : 64;

        for (int i = 0; i < n; i++) {
                struct device *dev = &d->ex.devices.devices[i];
                struct alloc_stats st;
                uint64_t backlog = 0;
                int cores = 0;
                device_mem_stats(dev, &st);
                for (int e = 0; e < OPS_ENGINE_COUNT; e++) {
                        backlog += dev->pd.backlog_ns[e];
                        cores += dev->desc.cores[e];
                }
                for (int q = 0; q < dev->pd.nready; q++)
                        for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                                if (dev->pd.ready[q]->cost[e]) {
                                        backlog += dev->pd.ready[q]->cost[e];
                                        break;
                                }
                pd[i].usable = dev->health == DEVICE_OK && !dev->draining &&
                               (s->tenant->pol.devices >> i & 1) && !(s->hidden_devices >> i & 1) &&
                               dev->streams < dev->desc.max_streams;
                pd[i].mem_free = st.free_bytes;
                pd[i].streams = dev->streams;
                pd[i].load = cores ? (double)backlog / cores : 0;
        }
        int i = policy_place(d->tenants.policy->placement, pd, n, 0);
        return i < 0 ? NULL : &d->ex.devices.devices[i];
}

static void method_stream_create(struct request *req)
{
        static const char *const keys[] = { "device", "priority", NULL };
        struct session *s = req->session;
        const struct policy_tenant *pol = &s->tenant->pol;
        json_t *jdev = json_object_get(req->params, "device");
        uint64_t prio;
        struct device *dev;
        struct stream *st;

        if (params_only(req, keys) < 0 ||
            param_u64_opt(req, "priority", STREAM_PRIORITIES - 1, 4, &prio) < 0)
                return;
        if (jdev && (!json_is_integer(jdev) || json_integer_value(jdev) < -1 ||
                     json_integer_value(jdev) > INT32_MAX)) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "stream_create: parameter 'device' must be a device id or -1 (any)");
                return;
        }
        if (s->handles.count[HANDLE_STREAM] >= s->npud->config.limits.max_streams ||
            (pol->max_streams && s->tenant->streams >= pol->max_streams)) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "stream_create: stream limit reached (%u per session, %u for tenant '%s')",
                                    s->npud->config.limits.max_streams, pol->max_streams, pol->name);
                return;
        }
        uint32_t uid_max = uid_stream_cap(s->npud);
        if (!s->admin && s->uu->streams >= uid_max) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "stream_create: uid %d holds %u streams (limits.max_streams_per_uid, "
                                    "at most a quarter of a device's streams)",
                                    (int)s->uid, uid_max);
                return;
        }
        if (!jdev || json_integer_value(jdev) == -1) {
                dev = place_stream(s);
                if (!dev) {
                        session_reply_error(s, req->id, PROTO_E_DEVICE,
                                            "stream_create: no usable device (all failed, drained, full, not allowed for tenant '%s' or not among the session's devices)",
                                            pol->name);
                        return;
                }
        } else {
                int id = (int)json_integer_value(jdev);
                dev = device_get(&s->npud->ex.devices, id);
                if (!dev) {
                        session_reply_error(s, req->id, PROTO_E_INVALID, "stream_create: no device %d", id);
                        return;
                }
                if (id >= 64 || !(pol->devices >> id & 1)) {
                        session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                            "stream_create: tenant '%s' may not use device %d", pol->name, id);
                        return;
                }
                if (session_device_hidden(s, req->id, "stream_create", id))
                        return;
                if (dev->health != DEVICE_OK || dev->draining) {
                        session_reply_error(s, req->id, PROTO_E_DEVICE, "stream_create: device %d is %s",
                                            dev->id, dev->health != DEVICE_OK ? "failed" : "drained");
                        return;
                }
                if (dev->streams >= dev->desc.max_streams) {
                        session_reply_error(s, req->id, PROTO_E_LIMIT,
                                            "stream_create: device %d has its maximum of %u streams",
                                            dev->id, dev->desc.max_streams);
                        return;
                }
        }
        st = session_stream_new(s, dev, (int)prio);
        if (!st || handle_insert(&s->handles, HANDLE_STREAM, st, &st->handle) < 0) {
                stream_unref(st);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "stream_create: out of memory");
                return;
        }
        s->tenant->streams++;
        session_reply_result(s, req->id, json_pack("{s:I, s:i}", "stream", (json_int_t)st->handle,
                                                   "device", dev->id));
}

static void method_stream_set_deadline(struct request *req)
{
        static const char *const keys[] = { "stream", "deadline_us", NULL };
        struct stream *st;
        uint64_t us;

        if (params_only(req, keys) < 0 || !(st = stream_param(req)) ||
            param_u64(req, "deadline_us", 3600ull * 1000000, &us) < 0)
                return;
        st->deadline_ns = us * 1000;
        session_reply_result(req->session, req->id, NULL);
}

static void method_stream_destroy(struct request *req)
{
        static const char *const keys[] = { "stream", NULL };
        struct stream *st;

        if (params_only(req, keys) < 0 || !(st = stream_param(req)))
                return;
        handle_remove(&req->session->handles, HANDLE_STREAM, st->handle);
        req->session->tenant->streams--;
        st->destroyed = 1;
        stream_unref(st); /* queued work still drains; it holds its own references */
        session_reply_result(req->session, req->id, NULL);
}

/* The client's host callback for notify task 'task' of 'stream' returned: the stream goes on.
 * The stream may have been destroyed since (its queued work drains; its handle is gone), so
 * it is found among the session's own streams, never another session's. */
static void method_host_func_done(struct request *req)
{
        static const char *const keys[] = { "stream", "task", NULL };
        struct session *s = req->session;
        uint64_t h, task;
        struct stream *st;

        if (params_only(req, keys) < 0 || param_u64(req, "stream", UINT32_MAX, &h) < 0 ||
            param_u64(req, "task", UINT64_MAX >> 1, &task) < 0)
                return;
        TAILQ_FOREACH(st, &s->streams, session_link)
                if (st->handle == h)
                        break;
        if (!st || sched_notify_ack(&s->npud->ex, st, task) < 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "host_func_done: stream %" PRIu64 " of this session does not wait "
                                    "for host callback task %" PRIu64, h, task);
                return;
        }
        session_reply_result(s, req->id, NULL);
}

static void method_stream_synchronize(struct request *req)
{
        static const char *const keys[] = { "stream", "cpu", NULL };
        struct stream *st;

        if (params_only(req, keys) < 0 || wait_cpu_param(req) < 0 || !(st = stream_param(req)))
                return;
        if (waiter_add(req, WAIT_STREAM, st, &st->waiters) == 0)
                sched_check_stream_waiters(&req->session->npud->ex, st);
}

static void method_synchronize(struct request *req)
{
        static const char *const keys[] = { "cpu", NULL };

        if (params_only(req, keys) < 0 || wait_cpu_param(req) < 0)
                return;
        if (waiter_add(req, WAIT_SESSION, req->session, NULL) == 0)
                session_check_sync_waiters(req->session);
}

static void method_event_create(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct session *s = req->session;
        struct npu_evt *e;
        uint32_t h;

        if (params_only(req, keys) < 0)
                return;
        if (s->handles.count[HANDLE_EVENT] >= s->npud->config.limits.max_events) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "event_create: session holds the maximum of %u events",
                                    s->npud->config.limits.max_events);
                return;
        }
        e = evt_new();
        if (!e || handle_insert(&s->handles, HANDLE_EVENT, e, &h) < 0) {
                evt_unref(e);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "event_create: out of memory");
                return;
        }
        session_reply_result(s, req->id, json_pack("{s:I}", "event", (json_int_t)h));
}

static void method_event_destroy(struct request *req)
{
        static const char *const keys[] = { "event", NULL };
        uint64_t h;
        struct npu_evt *e;

        if (params_only(req, keys) < 0 || param_u64(req, "event", UINT32_MAX, &h) < 0)
                return;
        e = handle_remove(&req->session->handles, HANDLE_EVENT, (uint32_t)h);
        if (!e) {
                session_reply_error(req->session, req->id, PROTO_E_BAD_HANDLE,
                                    "event_destroy: event handle %" PRIu64 " is unknown or destroyed", h);
                return;
        }
        evt_unref(e);
        session_reply_result(req->session, req->id, NULL);
}

static void method_event_query(struct request *req)
{
        static const char *const keys[] = { "event", NULL };
        struct npu_evt *e;

        if (params_only(req, keys) < 0 || !(e = event_param(req, "event")))
                return;
        session_reply_result(req->session, req->id,
                             json_pack("{s:b}", "complete", evt_complete(e)));
}

static void method_event_synchronize(struct request *req)
{
        static const char *const keys[] = { "event", "cpu", NULL };
        struct npu_evt *e;

        if (params_only(req, keys) < 0 || wait_cpu_param(req) < 0 || !(e = event_param(req, "event")))
                return;
        if (waiter_add(req, WAIT_EVENT, e, &e->waiters) == 0)
                sched_check_event_waiters(&req->session->npud->ex, e);
}

/* A "completion" notification (with "event" and "tag") once the event's last record, as of
 * now, has completed: at once when it has or was never recorded. The request is answered
 * first; the waiter counts against limits.max_waiters until it fires. */
static void method_event_notify(struct request *req)
{
        static const char *const keys[] = { "event", "tag", NULL };
        struct npu_evt *e;
        struct waiter *w;
        json_t *tagv = json_object_get(req->params, "tag");
        uint64_t h;

        if (params_only(req, keys) < 0 || !(e = event_param(req, "event")))
                return;
        /* the tag is the client's 64 bits, echoed as they came (a negative integer is a tag
         * of 2^63 and up, as in the completions of NOTIFY records) */
        if (tagv && !json_is_integer(tagv)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "event_notify: parameter 'tag' must be an integer");
                return;
        }
        uint64_t tag = tagv ? (uint64_t)json_integer_value(tagv) : 0;
        h = json_integer_value(json_object_get(req->params, "event"));
        if (waiter_add(req, WAIT_EVENT, e, &e->waiters) < 0)
                return;
        w = TAILQ_LAST(&e->waiters, waiter_list);
        w->notify = 1;
        w->notify_event = (uint32_t)h;
        w->notify_tag = tag;
        session_reply_result(req->session, req->id, NULL);
        if (!req->session->closing)
                sched_check_event_waiters(&req->session->npud->ex, e);
}

static void method_event_elapsed(struct request *req)
{
        static const char *const keys[] = { "start", "end", NULL };
        struct npu_evt *a, *b;

        if (params_only(req, keys) < 0 || !(a = event_param(req, "start")) ||
            !(b = event_param(req, "end")))
                return;
        if (!a->completed_gen || !b->completed_gen) {
                session_reply_error(req->session, req->id,
                                    a->recorded_gen && b->recorded_gen ? PROTO_E_NOT_READY : PROTO_E_INVALID,
                                    a->recorded_gen && b->recorded_gen
                                            ? "event_elapsed: an event has not completed"
                                            : "event_elapsed: an event was never recorded");
                return;
        }
        if (!evt_complete(a) || !evt_complete(b)) {
                session_reply_error(req->session, req->id, PROTO_E_NOT_READY,
                                    "event_elapsed: an event has not completed");
                return;
        }
        double ms = ((double)b->ts_ns - (double)a->ts_ns) / 1e6;
        session_reply_result(req->session, req->id, json_pack("{s:f}", "ms", ms));
}

const struct method methods_stream[] = {
        { "host_func_done", method_host_func_done, 0 },
        { "stream_create", method_stream_create, 0 },
        { "stream_destroy", method_stream_destroy, 0 },
        { "stream_set_deadline", method_stream_set_deadline, 0 },
        { "stream_synchronize", method_stream_synchronize, 0 },
        { "synchronize", method_synchronize, 0 },
        { "event_create", method_event_create, 0 },
        { "event_destroy", method_event_destroy, 0 },
        { "event_query", method_event_query, 0 },
        { "event_synchronize", method_event_synchronize, 0 },
        { "event_elapsed", method_event_elapsed, 0 },
        { "event_notify", method_event_notify, 0 },
        { NULL, NULL, 0 },
};

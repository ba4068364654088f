/* Request dispatch from the method tables, parameter validation helpers, and SUBMIT records
 * turned into tasks on their streams (prepared by daemon/exec/submit.c; what is the
 * session's own — its handle table, queue limits, frees and failure reports — stays here). */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cost.h"
#include "proto/errors.h"
#include "proto/frame.h"
#include "proto/submit.h"
#include "dispatch.h"
#include "daemon/exec/submit.h"
#include "util/log.h"
#include "npud.h"
#include "daemon/exec/sched.h"
#include "session.h"
#include "daemon/exec/tenant.h"

static const struct method *const method_groups[] = {
        methods_session, methods_memory, methods_stream, methods_admin, methods_sched, methods_share,
        methods_manage, methods_graph, methods_run, methods_telemetry, methods_tenant,
        methods_tune,
};

/* Method names indexed once, at the first request: an open-addressed table by FNV-1a of the
 * name (a string compare per probe; the table is at most half full). The linear search over
 * every group cost a strcmp per method ahead of the one asked for on each request. The keys
 * are fixed names of ours, so a client's choice of name cannot lengthen a probe chain beyond
 * what those names already collide on; an unknown name stops at the first empty slot. */
#define METHOD_SLOTS 512
static const struct method *method_index[METHOD_SLOTS];
static int method_indexed;

static uint32_t method_hash(const char *name)
{
        uint32_t h = 2166136261u;

        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                h = (h ^ *p) * 16777619u;
        return h;
}

static void method_index_build(void)
{
        size_t n = 0;

        for (size_t g = 0; g < sizeof(method_groups) / sizeof(method_groups[0]); g++)
                for (const struct method *m = method_groups[g]; m->name; m++) {
                        uint32_t i = method_hash(m->name) & (METHOD_SLOTS - 1);
                        while (method_index[i])
                                i = (i + 1) & (METHOD_SLOTS - 1);
                        method_index[i] = m;
                        if (++n >= METHOD_SLOTS / 2) { /* a build error, not a run-time one */
                                log_msg(LOG_LVL_ERROR, "dispatch: more than %d methods; grow METHOD_SLOTS",
                                        METHOD_SLOTS / 2);
                                abort();
                        }
                }
        method_indexed = 1;
}

static const struct method *method_find(const char *name)
{
        if (!method_indexed)
                method_index_build();
        for (uint32_t i = method_hash(name) & (METHOD_SLOTS - 1); method_index[i];
             i = (i + 1) & (METHOD_SLOTS - 1))
                if (strcmp(method_index[i]->name, name) == 0)
                        return method_index[i];
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
        if (m->flags & METHOD_ADMIN)
                s->npud->actor = (struct npud_actor){ s->uid, s->pid, "socket" };
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

/* ---- SUBMIT records (prepared by daemon/exec/submit.c) ---- */

/* A stream-ordered free: the handle goes now, the buffer when the stream gets here. */
static int prepare_free(struct session *s, const struct proto_rec *r, struct task *t,
                        char *msg, size_t msglen)
{
        struct buffer *b = handle_remove(&s->handles, HANDLE_BUFFER, r->free.buf);

        if (!b) {
                snprintf(msg, msglen, "free: buffer handle %u is unknown or already freed",
                         r->free.buf);
                return PROTO_E_BAD_HANDLE;
        }
        session_buffer_released(s, b);
        /* the handle's reference, dropped when the stream gets here; a fresh task holds
         * nothing yet, so adding the first buffer (inline) cannot fail */
        task_add_buffer(t, b);
        return 0;
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
        struct { int code; char msg[256]; } pe = { 0 };
        struct task *t;
        enum task_kind kind = r->type == PROTO_REC_EVENT_RECORD ? TASK_EVENT_RECORD
                            : r->type == PROTO_REC_STREAM_WAIT  ? TASK_STREAM_WAIT
                            : r->type == PROTO_REC_FREE         ? TASK_FREE
                            : r->type == PROTO_REC_NOTIFY       ? TASK_NOTIFY
                                                                : TASK_EXEC;

        if (!st) {
                char msg[96];
                snprintf(msg, sizeof(msg), "unknown or destroyed stream handle %u", r->stream);
                session_task_failed(s, NULL, r->seq, PROTO_E_BAD_HANDLE, msg);
                /* the client waits for this notice, not for a synchronize: it gets the error */
                if (r->type == PROTO_REC_NOTIFY && s->version >= PROTO_VERSION_NOTIFY)
                        session_send_completion(s, r->stream, r->seq, r->notify.tag,
                                                (r->notify.flags & PROTO_NOTIFY_HOLD) != 0, 0,
                                                PROTO_E_BAD_HANDLE, r->seq, msg);
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
        if (r->type == PROTO_REC_LAUNCH_ID && s->version < PROTO_VERSION_OP_ID) {
                pe.code = PROTO_E_INVALID;
                snprintf(pe.msg, sizeof(pe.msg), "launch by id: operator id %u needs protocol version %d",
                         r->launch.op_id, PROTO_VERSION_OP_ID);
        } else if (r->type == PROTO_REC_NOTIFY && s->version < PROTO_VERSION_NOTIFY) {
                pe.code = PROTO_E_INVALID;
                snprintf(pe.msg, sizeof(pe.msg), "notify: needs protocol version %d, the session negotiated %d",
                         PROTO_VERSION_NOTIFY, s->version);
        } else if (r->type == PROTO_REC_GRAPH_RUN_OPT && s->version < PROTO_VERSION_RUN_OPT) {
                pe.code = PROTO_E_INVALID;
                snprintf(pe.msg, sizeof(pe.msg), "graph run with options needs protocol version %d",
                         PROTO_VERSION_RUN_OPT);
        } else {
                pe.code = r->type == PROTO_REC_FREE ? prepare_free(s, r, t, pe.msg, sizeof(pe.msg))
                                                    : submit_prepare(&s->handles, st, r, t, pe.msg, sizeof(pe.msg));
        }
        if (pe.code) {
failed:
                task_free(t); /* NULL-safe */
                if (r->type == PROTO_REC_GRAPH_RUN_OPT && r->graph.tag[0]) { /* name the run */
                        char tail[sizeof(pe.msg)];
                        snprintf(tail, sizeof(tail), "%s", pe.msg);
                        snprintf(pe.msg, sizeof(pe.msg), "run '%s': %.200s", r->graph.tag, tail);
                }
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
        sched_enqueue(&s->npud->ex, t);
}

/* Client sessions: connection I/O with fd passing, frame handling with a per-wakeup budget,
 * flow control when a client queues more work than its limit, and complete teardown. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../proto/message.h"
#include "dispatch.h"
#include "graph/graph-obj.h"
#include "log.h"
#include "notify.h"
#include "npud.h"
#include "sched.h"
#include "alloc.h"
#include "export.h"
#include "session.h"
#include "tenant.h"

#define FRAMES_PER_WAKEUP 64
#define MAX_PENDING_OUTPUT (64u << 20)

static void session_free_deferred(evutil_socket_t fd, short what, void *arg)
{
        struct session *s = arg;
        handle_table_deinit(&s->handles);
        free(s->dev_bytes);
        free(s);
}

static void session_flush(struct session *s)
{
        ssize_t left = proto_writer_flush(&s->writer, s->fd);

        if (left < 0) {
                session_close(s, "write failed");
                return;
        }
        if (left > (ssize_t)MAX_PENDING_OUTPUT) {
                session_close(s, "client does not read its replies");
                return;
        }
        if (left > 0)
                event_add(s->write_event, NULL);
        else
                event_del(s->write_event);
}

void session_send_json(struct session *s, int kind, uint64_t request_id, json_t *body)
{
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = (uint8_t)kind, .request_id = request_id };
        size_t len;
        char *text;

        if (s->closing || !body) {
                json_decref(body);
                return;
        }
        text = proto_json_dump(body, &len);
        json_decref(body);
        if (text && len > PROTO_MAX_JSON_BODY) {
                free(text);
                text = NULL;
                if (kind == PROTO_KIND_REPLY) {
                        json_t *e = proto_reply_error(PROTO_E_LIMIT, "reply exceeds the frame size limit");
                        text = proto_json_dump(e, &len);
                        json_decref(e);
                }
        }
        if (!text) {
                log_error("session %llu: message could not be encoded", (unsigned long long)s->id);
                return;
        }
        h.body_len = (uint32_t)len;
        if (proto_writer_append(&s->writer, &h, text) < 0) {
                free(text);
                session_close(s, "out of memory for replies");
                return;
        }
        free(text);
        session_flush(s);
}

void session_reply_result(struct session *s, uint64_t request_id, json_t *result)
{
        session_send_json(s, PROTO_KIND_REPLY, request_id, proto_reply_result(result));
}

void session_reply_error(struct session *s, uint64_t request_id, int code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        log_debug("session %llu (pid %d): %s: %s", (unsigned long long)s->id, (int)s->pid,
                  proto_error_name(code), msg);
        session_send_json(s, PROTO_KIND_REPLY, request_id, proto_reply_error(code, msg));
}

void session_task_failed(struct session *s, struct stream *st, uint64_t seq, int code,
                         const char *message)
{
        struct stream_error *e = st ? &st->error : &s->deferred;

        if (!e->code) {
                e->code = code;
                e->seq = seq;
                snprintf(e->message, sizeof(e->message), "task %llu: %s",
                         (unsigned long long)seq, message);
        }
        session_send_json(s, PROTO_KIND_NOTIFY, 0,
                          proto_notify_new("task-failed",
                                           json_pack("{s:I, s:I, s:i, s:s, s:s}", "stream",
                                                     (json_int_t)(st ? st->handle : 0), "task",
                                                     (json_int_t)seq, "code", code, "name",
                                                     proto_error_name(code), "message",
                                                     message)));
}

static void session_handle_frame(struct session *s, struct proto_frame *f)
{
        char err[256];

        switch (f->hdr.kind) {
        case PROTO_KIND_REQUEST: {
                struct request req = { .session = s, .id = f->hdr.request_id,
                                       .fds = f->fds, .nfds = f->hdr.nfds };
                json_t *body = proto_json_parse(f->body, f->hdr.body_len, err, sizeof(err));
                if (!body) {
                        session_reply_error(s, req.id, PROTO_E_PROTOCOL, "%s", err);
                        break;
                }
                if (proto_request_parse(body, &req.method, &req.params, err, sizeof(err)) < 0) {
                        session_reply_error(s, req.id, PROTO_E_PROTOCOL, "%s", err);
                        json_decref(body);
                        break;
                }
                json_t *empty = NULL;
                if (!req.params)
                        req.params = empty = json_object();
                dispatch_request(&req);
                json_decref(empty);
                json_decref(body);
                break;
        }
        case PROTO_KIND_SUBMIT:
                if (f->hdr.nfds) {
                        session_close(s, "file descriptors sent with a SUBMIT frame");
                        break;
                }
                if (!s->version) {
                        session_close(s, "SUBMIT before hello");
                        break;
                }
                dispatch_submit(s, f->body, f->hdr.body_len);
                break;
        default:
                session_close(s, "client sent a reply or notification frame");
                break;
        }
        for (int i = 0; i < PROTO_MAX_FDS; i++)
                if (f->fds[i] >= 0)
                        close(f->fds[i]);
}

static void session_process(struct session *s)
{
        struct proto_frame f;
        int budget = FRAMES_PER_WAKEUP;

        while (!s->closing && !s->read_paused && budget-- > 0) {
                int r = proto_reader_next(&s->reader, &f);
                if (r == 0)
                        return;
                if (r < 0) {
                        char why[96];
                        snprintf(why, sizeof(why), "framing error: %s", strerror(-r));
                        session_close(s, why);
                        return;
                }
                session_handle_frame(s, &f);
        }
        /* budget spent or paused with input left: continue on a later loop pass */
        if (!s->closing && !s->read_paused && s->reader.len >= PROTO_HEADER_SIZE)
                event_active(s->read_event, EV_READ, 0);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
        struct session *s = arg;
        ssize_t n;

        /* Read more only once buffered frames are handled, so a client that sends faster than
         * its per-wakeup budget cannot grow the input buffer without bound. */
        if (proto_reader_has_frame(&s->reader)) {
                session_process(s);
                return;
        }
        n = proto_reader_fill(&s->reader, s->fd);
        if (n == 0) {
                session_close(s, "client disconnected");
                return;
        }
        if (n < 0 && n != -EAGAIN) {
                session_close(s, n == -EBADMSG ? "bad file descriptor transfer" : "read failed");
                return;
        }
        session_process(s);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
        session_flush(arg);
}

void session_maybe_resume(struct session *s)
{
        if (!s->read_paused || s->closing)
                return;
        if (s->queued_tasks > s->npud->config.limits.max_queued_tasks / 2)
                return;
        if (s->tenant && s->tenant->pol.max_queued_tasks &&
            s->tenant->queued > s->tenant->pol.max_queued_tasks / 2)
                return;
        s->read_paused = 0;
        event_add(s->read_event, NULL);
        event_active(s->read_event, EV_READ, 0);
}

static void peer_identity(struct session *s)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        char path[64];
        int fd;

        s->pid = -1;
        s->uid = (uid_t)-1;
        s->gid = (gid_t)-1;
        if (getsockopt(s->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                s->pid = cred.pid;
                s->uid = cred.uid;
                s->gid = cred.gid;
        }
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)s->pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, s->comm, sizeof(s->comm) - 1);
                if (n > 0) {
                        s->comm[n] = 0;
                        s->comm[strcspn(s->comm, "\n")] = 0;
                }
                close(fd);
        }
        const struct npud_config *c = &s->npud->config;
        gid_t groups[256];
        socklen_t glen = sizeof(groups);
        if (getsockopt(s->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
                size_t n = glen / sizeof(gid_t);
                s->ngroups = n > 64 ? 64 : (int)n;
                memcpy(s->groups, groups, sizeof(gid_t) * (size_t)s->ngroups);
        }
        s->admin = s->uid == 0;
        if (!s->admin && c->have_admin_gid) {
                if (s->gid == c->admin_gid)
                        s->admin = 1;
                for (int i = 0; i < s->ngroups; i++)
                        if (s->groups[i] == c->admin_gid)
                                s->admin = 1;
        }
}

void session_buffer_released(struct session *s, const struct buffer *b)
{
        if (b->parent)
                return;
        uint64_t rounded = (b->size + ALLOC_GRANULE - 1) / ALLOC_GRANULE * ALLOC_GRANULE;
        s->buffer_bytes -= b->size;
        s->dev_bytes[b->dev->id] -= rounded;
        s->tenant->mem_used -= rounded;
        s->tenant->dev[b->dev->id].mem_used -= rounded;
}

int session_assign_tenant(struct session *s, const char *request)
{
        struct tenant_registry *reg = &s->npud->tenants;
        int idx = policy_tenant_match(reg->policy, request, s->uid, s->gid, s->groups, s->ngroups);
        struct tenant *t, *old = s->tenant;

        if (idx < 0)
                return idx;
        t = reg->tenants[idx];
        if (t == old)
                return 0;
        tenant_ref(t);
        if (old) { /* move what the session holds to its new tenant */
                old->sessions--;
                old->streams -= s->handles.count[HANDLE_STREAM];
                t->streams += s->handles.count[HANDLE_STREAM];
                old->region_bytes -= s->region_bytes;
                t->region_bytes += s->region_bytes;
                for (int i = 0; i < reg->ndevices; i++) {
                        old->dev[i].mem_used -= s->dev_bytes[i];
                        t->dev[i].mem_used += s->dev_bytes[i];
                        old->mem_used -= s->dev_bytes[i];
                        t->mem_used += s->dev_bytes[i];
                }
                tenant_unref(old);
        }
        t->sessions++;
        s->tenant = t;
        snprintf(s->tenant_request, sizeof(s->tenant_request), "%s", request ? request : "");
        return 0;
}

int session_new(struct npud *d, int fd, struct session **ret)
{
        struct session *s = calloc(1, sizeof(*s));

        if (!s) {
                close(fd);
                return -ENOMEM;
        }
        s->npud = d;
        s->fd = fd;
        s->id = ++d->next_session_id;
        proto_reader_init(&s->reader);
        proto_writer_init(&s->writer);
        handle_table_init(&s->handles);
        TAILQ_INIT(&s->streams);
        TAILQ_INIT(&s->waiters);
        peer_identity(s);
        s->dev_bytes = calloc((size_t)d->devices.count + 1, sizeof(uint64_t));
        if (!s->dev_bytes || session_assign_tenant(s, NULL) < 0) {
                free(s->dev_bytes);
                close(fd);
                free(s);
                return -ENOMEM;
        }
        s->read_event = event_new(d->base, fd, EV_READ | EV_PERSIST, on_read, s);
        s->write_event = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_write, s);
        if (!s->read_event || !s->write_event || event_add(s->read_event, NULL) < 0) {
                if (s->read_event)
                        event_free(s->read_event);
                if (s->write_event)
                        event_free(s->write_event);
                close(fd);
                free(s);
                return -ENOMEM;
        }
        TAILQ_INSERT_TAIL(&d->sessions, s, link);
        d->nsessions++;
        if (d->hooks.session_opened)
                d->hooks.session_opened(d, s);
        log_session_msg(LOG_LVL_INFO, s->id, s->pid,
                        s->tenant ? s->tenant->pol.name : NULL, -1,
                        "session %llu opened: pid %d uid %d (%s)", (unsigned long long)s->id,
                        (int)s->pid, (int)s->uid, s->comm);
        notify_sessions_changed(d);
        *ret = s;
        return 0;
}

static void release_handle(enum handle_type type, void *obj, void *userdata)
{
        switch (type) {
        case HANDLE_BUFFER: buffer_unref(obj); break;
        case HANDLE_REGION: region_unref(obj); break;
        case HANDLE_STREAM:
                ((struct stream *)obj)->destroyed = 1;
                stream_unref(obj);
                break;
        case HANDLE_EVENT: evt_unref(obj); break;
        case HANDLE_GRAPH: graph_obj_unref(obj); break;
        default: break;
        }
}

void session_close(struct session *s, const char *reason)
{
        struct npud *d = s->npud;
        struct waiter *w;
        struct stream *st;

        if (s->closing)
                return;
        s->closing = 1;
        log_session_msg(LOG_LVL_INFO, s->id, s->pid,
                        s->tenant ? s->tenant->pol.name : NULL, -1,
                        "session %llu closed (pid %d): %s; %u tasks queued",
                        (unsigned long long)s->id, (int)s->pid, reason, s->queued_tasks);
        event_free(s->read_event);
        event_free(s->write_event);
        close(s->fd);
        proto_reader_deinit(&s->reader);
        proto_writer_deinit(&s->writer);

        while ((w = TAILQ_FIRST(&s->waiters))) {
                TAILQ_REMOVE(&s->waiters, w, session_link);
                if (w->kind == WAIT_STREAM) {
                        TAILQ_REMOVE(&((struct stream *)w->target)->waiters, w, obj_link);
                        stream_unref(w->target);
                } else if (w->kind == WAIT_EVENT) {
                        TAILQ_REMOVE(&((struct npu_evt *)w->target)->waiters, w, obj_link);
                        evt_unref(w->target);
                }
                free(w);
        }
        /* Queued work is cancelled; running units keep their references and drain. */
        TAILQ_FOREACH(st, &s->streams, session_link)
                sched_stream_cancel(d, st);
        while ((st = TAILQ_FIRST(&s->streams))) {
                TAILQ_REMOVE(&s->streams, st, session_link);
                st->session = NULL;
        }
        export_revoke_session(&d->exports, s->id);
        handle_foreach(&s->handles, release_handle, s);
        if (s->tenant) {
                s->tenant->sessions--;
                s->tenant->streams -= s->handles.count[HANDLE_STREAM];
                s->tenant->region_bytes -= s->region_bytes;
                for (int i = 0; i < d->devices.count; i++) {
                        s->tenant->dev[i].mem_used -= s->dev_bytes[i];
                        s->tenant->mem_used -= s->dev_bytes[i];
                }
                tenant_unref(s->tenant);
                s->tenant = NULL;
        }
        TAILQ_REMOVE(&d->sessions, s, link);
        d->nsessions--;
        if (d->hooks.session_closed)
                d->hooks.session_closed(d, s);
        notify_sessions_changed(d);
        /* The caller may still be inside one of this session's callbacks. */
        struct timeval zero = { 0, 0 };
        if (event_base_once(d->base, -1, EV_TIMEOUT, session_free_deferred, s, &zero) < 0)
                log_error("session %llu: cannot schedule release", (unsigned long long)s->id);
        sched_kick(d);
}

/* Client sessions: connection I/O with fd passing, frame handling with a per-wakeup budget,
 * flow control when a client queues more work than its limit, and complete teardown. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <endian.h>
#include <unistd.h>

#include "proto/completion.h"
#include "proto/message.h"
#include "proto/submit.h"
#include "dispatch.h"
#include "daemon/exec/graph-obj.h"
#include "util/log.h"
#include "notify.h"
#include "npud.h"
#include "daemon/exec/sched.h"
#include "daemon/exec/alloc.h"
#include "export.h"
#include "session.h"
#include "manage.h"
#include "metrics.h"
#include "daemon/exec/tenant.h"

/* Work done for one connection per event-loop pass before others are served: whole frames,
 * and task records of SUBMIT bodies (a 16 MiB body holds up to 699,050 records). */
#define FRAMES_PER_WAKEUP 64
#define RECORDS_PER_WAKEUP 4096

/* ---- per-uid usage: a small hash table, one entry per uid with something counted ---- */

#define UID_BUCKETS 64
static struct uid_usage *uid_table[UID_BUCKETS];
static uint64_t output_total; /* pending output of every session */

struct uid_usage *uid_usage_get(uid_t uid)
{
        struct uid_usage **b = &uid_table[uid % UID_BUCKETS], *u;

        for (u = *b; u; u = u->next)
                if (u->uid == uid)
                        return u;
        u = calloc(1, sizeof(*u));
        if (!u)
                return NULL;
        u->uid = uid;
        u->next = *b;
        *b = u;
        return u;
}

void uid_usage_put(struct uid_usage *u)
{
        if (!u || u->conns || u->streams || u->output)
                return;
        for (struct uid_usage **p = &uid_table[u->uid % UID_BUCKETS]; *p; p = &(*p)->next)
                if (*p == u) {
                        *p = u->next;
                        free(u);
                        return;
                }
}

static void session_free_deferred(evutil_socket_t fd, short what, void *arg)
{
        struct session *s = arg;
        handle_table_deinit(&s->handles);
        free(s->dev_bytes);
        free(s);
}

/* Count the session's pending output in its uid's and the daemon's totals. */
static void output_account(struct session *s)
{
        uint64_t now = s->writer.len;

        output_total += now - s->out_charged;
        if (s->uu)
                s->uu->output += now - s->out_charged;
        s->out_charged = now;
}

/* Over the daemon-wide output budget: the session holding the most unread output goes
 * (admins are exempt). Another session than s is closed from its own timer callback, since
 * the caller may be walking the session list. */
static void output_over_total(struct session *s)
{
        struct session *o, *worst = NULL;

        TAILQ_FOREACH(o, &s->npud->sessions, link)
                if (!o->closing && !o->admin && (!worst || o->writer.len > worst->writer.len))
                        worst = o;
        if (!worst)
                return;
        if (worst == s) {
                session_close(s, "unread output over limits.max_output_bytes_total");
                return;
        }
        if (!worst->kill_reason) {
                worst->kill_reason = "unread output over limits.max_output_bytes_total";
                event_active(worst->timer_event, EV_TIMEOUT, 0);
        }
}

static void flush_on_client_cpu(void *arg)
{
        struct session *s = arg;

        s->cpu_flush_left = proto_writer_flush(&s->writer, s->fd);
}

/* A reply was written from the loop thread's CPU to a client that waits on that CPU, or
 * did not say where it waits (session_woke_here). */
static int woke_here;

int session_woke_here(void)
{
        int w = woke_here;

        woke_here = 0;
        return w;
}

/* Write what the socket takes: from the client's CPU when it named one and a worker idles
 * there (its wake-up is then local, no interrupt across CPUs: util/prio.h has the figures),
 * else from here. */
static ssize_t session_write(struct session *s)
{
        struct backend *b = s->npud->ex.backend;

        if (s->writer.len > 0 && s->lcpoll.listed)
                lcpoll_wrote(&s->lcpoll, now_ns());
        if (s->client_cpu >= 0 && s->writer.len > 0 && b && b->ops->run_on_cpu &&
            b->ops->run_on_cpu(b, s->client_cpu, flush_on_client_cpu, s)) {
                s->writes_on_client_cpu++;
                return s->cpu_flush_left;
        }
        /* a client that did not say where it waits may wait here */
        if (s->writer.len > 0 && (s->client_cpu < 0 || s->client_cpu == sched_getcpu()))
                woke_here = 1;
        return proto_writer_flush(&s->writer, s->fd);
}

static void session_flush(struct session *s)
{
        const struct npud_limits *l = &s->npud->config.limits;
        ssize_t left = session_write(s);

        if (left < 0) {
                session_close(s, "write failed");
                return;
        }
        output_account(s);
        if ((uint64_t)left > l->max_output_bytes) {
                session_close(s, "client does not read its replies (limits.max_output_bytes)");
                return;
        }
        if (!s->admin && s->uu->output > l->max_output_bytes_per_uid) {
                session_close(s, "unread output of the uid over limits.max_output_bytes_per_uid");
                return;
        }
        if (output_total > l->max_output_bytes_total) {
                output_over_total(s);
                if (s->closing)
                        return;
        }
        /* only a change of state reaches libevent: most replies leave in one write */
        if ((left > 0) != s->write_armed) {
                s->write_armed = left > 0;
                if (left > 0)
                        event_add(s->write_event, NULL);
                else
                        event_del(s->write_event);
        }
}

/* Queue one encoded frame body and write what the socket takes. */
static void session_send_text(struct session *s, int kind, uint64_t request_id, const char *text,
                              size_t len)
{
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = (uint8_t)kind, .request_id = request_id,
                                  .body_len = (uint32_t)len };

        if (proto_writer_append(&s->writer, &h, text) < 0) {
                session_close(s, "out of memory for replies");
                return;
        }
        session_flush(s);
}

/* A completion as a COMPLETION frame: a session of version 4 on gets no JSON to parse. */
static void send_completion_frame(struct session *s, const struct proto_completion *c)
{
        uint8_t body[PROTO_COMPLETION_MAX];

        if (s->closing)
                return;
        session_send_text(s, PROTO_KIND_COMPLETION, 0, (const char *)body,
                          proto_completion_encode(c, body));
}

void session_send_json(struct session *s, int kind, uint64_t request_id, json_t *body)
{
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
        session_send_text(s, kind, request_id, text, len);
        free(text);
}

void session_reply_result(struct session *s, uint64_t request_id, json_t *result)
{
        static const char empty[] = "{\"result\":{}}"; /* what an empty result encodes to */

        if (!result) {
                if (!s->closing)
                        session_send_text(s, PROTO_KIND_REPLY, request_id, empty, sizeof(empty) - 1);
                return;
        }
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

/* A task-failed notification to the stream's owner (the error is already recorded). */
static void notify_task_failed(struct session *s, struct stream *st, uint64_t seq, int code,
                               const char *message)
{
        session_send_json(s, PROTO_KIND_NOTIFY, 0,
                          proto_notify_new("task-failed",
                                           json_pack("{s:I, s:I, s:i, s:s, s:s}", "stream",
                                                     (json_int_t)(st ? st->handle : 0), "task",
                                                     (json_int_t)seq, "code", code, "name",
                                                     proto_error_name(code), "message",
                                                     message)));
}

void session_task_failed(struct session *s, struct stream *st, uint64_t seq, int code,
                         const char *message)
{
        if (st) { /* recorded on the stream; the observer below notifies */
                sched_task_failed(&s->npud->ex, st, seq, code, message);
                return;
        }
        if (!s->deferred.code) {
                s->deferred.code = code;
                s->deferred.seq = seq;
                snprintf(s->deferred.message, sizeof(s->deferred.message), "task %llu: %.200s",
                         (unsigned long long)seq, message);
        }
        notify_task_failed(s, NULL, seq, code, message);
}

static void session_handle_frame(struct session *s, struct proto_frame *f)
{
        char err[256];

        switch (f->hdr.kind) {
        case PROTO_KIND_REQUEST: {
                struct request req = { .session = s, .id = f->hdr.request_id,
                                       .fds = f->fds, .nfds = f->hdr.nfds };
                char method[PROTO_METHOD_MAX];
                /* A request without parameters (ping, synchronize, ...) is recognised as
                 * text; the method gets a shared empty object that handlers only read. */
                if (proto_request_bare(f->body, f->hdr.body_len, method, sizeof(method))) {
                        static json_t *no_params;
                        if (!no_params)
                                no_params = json_object();
                        if (no_params) {
                                req.method = method;
                                req.params = no_params;
                                dispatch_request(&req);
                                break;
                        }
                }
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
        default:
                session_close(s, "client sent a reply or notification frame");
                break;
        }
        for (int i = 0; i < PROTO_MAX_FDS; i++)
                if (f->fds[i] >= 0)
                        close(f->fds[i]);
}

static void session_pause(struct session *s)
{
        if (s->read_paused)
                return;
        s->read_paused = 1;
        event_del(s->read_event);
        /* A paused session still notices its client hanging up (killed, crashed), so its
         * queued work is cancelled now rather than after the queue drained. */
        event_add(s->hup_event, NULL);
}

/* Queue the task records of the SUBMIT body in progress, one at a time as they arrive (the
 * body is never buffered whole). The queued-task limit is checked before each record: in
 * block mode the session pauses in the middle of the body and resumes at the same record.
 * 1 when the body is done, 0 to wait (for input, for the queue to drain, for the next loop
 * pass), -1 when the session closed. */
static int submit_body(struct session *s, int *records)
{
        struct proto_reader *r = &s->reader;
        char err[160], why[200];

        while (r->body_left) {
                const uint8_t *p;
                size_t avail = proto_reader_body(r, &p), need, pos = 0;
                struct proto_rec rec;
                uint32_t len;

                if (avail < PROTO_REC_HEADER_SIZE && avail < r->body_left)
                        return 0;
                need = avail; /* a record that cannot fit: let the decoder name the error */
                if (avail >= PROTO_REC_HEADER_SIZE) {
                        memcpy(&len, p + 4, 4);
                        len = le32toh(len);
                        if (len >= PROTO_REC_HEADER_SIZE && len <= r->body_left)
                                need = len;
                        if (need > avail)
                                return 0;
                }
                if (*records <= 0)
                        return 0;
                if (!s->backpressure_error && dispatch_over_queue_limit(s)) {
                        session_pause(s);
                        return 0;
                }
                if (proto_rec_decode(p, need, &pos, &rec, err, sizeof(err)) != 1) {
                        snprintf(why, sizeof(why), "malformed SUBMIT: %s", err);
                        session_close(s, why);
                        return -1;
                }
                dispatch_submit_record(s, &rec);
                if (s->closing)
                        return -1;
                if (proto_reader_body_consume(r, pos) < 0) {
                        session_close(s, "bad file descriptor transfer");
                        return -1;
                }
                (*records)--;
        }
        return 1;
}

/* Handle buffered input within the per-wakeup budget. Returns 1 when more input is needed to
 * go on, 0 when it stopped for another reason (budget, pause, close). */
static int session_process(struct session *s)
{
        struct proto_frame f;
        struct proto_header h;
        int frames = FRAMES_PER_WAKEUP, records = RECORDS_PER_WAKEUP, r;
        char why[96];

        while (!s->closing && !s->read_paused) {
                if (frames <= 0 || records <= 0) {
                        /* budget spent: continue on a later loop pass */
                        event_active(s->read_event, EV_READ, 0);
                        return 0;
                }
                if (s->reader.body_left) {
                        r = submit_body(s, &records);
                        if (r < 0)
                                return 0;
                        if (r == 0) {
                                if (s->read_paused || records <= 0)
                                        continue;
                                return 1;
                        }
                        frames--;
                        continue;
                }
                r = proto_reader_peek_header(&s->reader, &h);
                if (r > 0 && h.kind == PROTO_KIND_SUBMIT) {
                        if (h.nfds) {
                                session_close(s, "file descriptors sent with a SUBMIT frame");
                                return 0;
                        }
                        if (!s->version) {
                                session_close(s, "SUBMIT before hello");
                                return 0;
                        }
                        if (proto_reader_begin_body(&s->reader, &h) < 0) {
                                session_close(s, "bad file descriptor transfer");
                                return 0;
                        }
                        if (!h.body_len)
                                frames--;
                        continue;
                }
                if (r >= 0)
                        r = proto_reader_next(&s->reader, &f);
                if (r == 0)
                        return 1;
                if (r < 0) {
                        if (r == -EMSGSIZE && !s->version)
                                snprintf(why, sizeof(why), "framing error: frame over "
                                         "limits.max_frame_before_hello (%u bytes) before hello",
                                         s->npud->config.limits.max_frame_before_hello);
                        else
                                snprintf(why, sizeof(why), "framing error: %s", strerror(-r));
                        session_close(s, why);
                        return 0;
                }
                session_handle_frame(s, &f);
                frames--;
        }
        return 0;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
        struct session *s = arg;
        ssize_t n;

        /* Read more only once buffered input is handled, so a client that sends faster than
         * its per-wakeup budget cannot grow the input buffer: what a connection buffers is at
         * most one frame (JSON) or one record (SUBMIT) plus one read. */
        if (!session_process(s))
                return;
        n = proto_reader_fill(&s->reader, s->fd);
        if (n == 0) {
                session_close(s, "client disconnected");
                return;
        }
        if (n < 0 && n != -EAGAIN) {
                session_close(s, n == -EBADMSG ? "bad file descriptor transfer" : "read failed");
                return;
        }
        if (n > 0) { /* read only by the idle timeout */
                s->last_active_ns = now_coarse_ns();
                if (s->tenant && s->tenant->pol.klass == POLICY_CLASS_LATENCY_CRITICAL)
                        lcpoll_read(&s->lcpoll, now_ns(), s->client_cpu);
        }
        session_process(s);
}

static void on_hup(evutil_socket_t fd, short what, void *arg)
{
        session_close(arg, "client hung up while its reading was paused");
}

/* Something the client waits for or the daemon still owes it. */
static int session_busy(const struct session *s)
{
        return s->queued_tasks || !TAILQ_EMPTY(&s->waiters) || s->writer.len || s->read_paused ||
               s->reader.body_left || s->graph_loads;
}

static void arm_timer(struct session *s, uint32_t ms)
{
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

        if (ms)
                event_add(s->timer_event, &tv);
        else
                event_del(s->timer_event);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct session *s = arg;
        const struct npud_limits *l = &s->npud->config.limits;
        char why[128];

        if (s->kill_reason) {
                session_close(s, s->kill_reason);
                return;
        }
        if (!s->version) {
                snprintf(why, sizeof(why), "no hello within limits.hello_timeout_ms (%u ms)",
                         l->hello_timeout_ms);
                session_close(s, why);
                return;
        }
        if (!l->idle_timeout_ms)
                return;
        uint64_t idle_ms = (now_ns() - s->last_active_ns) / 1000000;
        if (session_busy(s) || idle_ms < l->idle_timeout_ms) {
                arm_timer(s, session_busy(s) ? l->idle_timeout_ms
                                             : l->idle_timeout_ms - (uint32_t)idle_ms);
                return;
        }
        snprintf(why, sizeof(why), "idle for limits.idle_timeout_ms (%u ms)", l->idle_timeout_ms);
        session_close(s, why);
}

void session_hello_done(struct session *s)
{
        s->reader.max_body = 0;
        arm_timer(s, s->npud->config.limits.idle_timeout_ms);
}

uint32_t session_waiter_count(const struct session *s, uint32_t stop_at)
{
        const struct waiter *w;
        uint32_t n = 0;

        TAILQ_FOREACH(w, &s->waiters, session_link)
                if (++n >= stop_at)
                        break;
        return n;
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
        session_flush(arg);
}

void session_maybe_resume(struct session *s)
{
        if (!s->read_paused || s->closing)
                return;
        /* Read again once a sixteenth of the queue is free. The loop thread can only
         * prepare new work while reading, and with one unit of a stream at the backend at a
         * time a paused session's completions come one unit apart: waiting for half the
         * queue to drain left the loop idle for a third of a pipelined client's time. */
        uint32_t lim = s->npud->config.limits.max_queued_tasks;
        if (s->queued_tasks > lim - lim / 16)
                return;
        if (s->tenant && s->tenant->pol.max_queued_tasks &&
            s->tenant->queued > s->tenant->pol.max_queued_tasks - s->tenant->pol.max_queued_tasks / 16)
                return;
        s->read_paused = 0;
        event_del(s->hup_event);
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
        /* The process chose its name (prctl PR_SET_NAME takes any bytes), but the JSON and
         * D-Bus listings of the session need valid UTF-8: every byte that does not belong to
         * a well-formed sequence (overlong, surrogate, beyond U+10FFFF, cut) becomes '?'. */
        for (size_t i = 0; s->comm[i];) {
                unsigned char c = (unsigned char)s->comm[i];
                size_t need = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                            : c >= 0xf0 && c <= 0xf4 ? 3 : 4, k = 1;
                for (; need < 4 && k <= need; k++) {
                        unsigned char x = (unsigned char)s->comm[i + k]; /* the NUL stops it */
                        unsigned char lo = k > 1 ? 0x80 : c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
                        unsigned char hi = k > 1 ? 0xbf : c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
                        if (x < lo || x > hi)
                                break;
                }
                if (need == 4 || k <= need)
                        s->comm[i++] = '?';
                else
                        i += need + 1;
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

void session_buffer_released(struct session *s, struct buffer *b)
{
        /* No new importer may reach memory its owner let go of. */
        export_revoke_buffer(&s->npud->exports, b);
        if (b->parent)
                return;
        uint64_t rounded = alloc_round_up(b->size);
        s->buffer_bytes -= b->size;
        s->dev_bytes[b->dev->id] -= rounded;
        /* The tenant stays charged until the memory really returns: views, imports and
         * tasks may hold it long after this handle, even after this session. */
        buffer_keep_charge(b, s->tenant, rounded);
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

/* Admission at accept: the uid and groups are known from SO_PEERCRED. 0, or -EUSERS with
 * why naming the limit. */
static int admit(const struct session *s, char *why, size_t len)
{
        const struct npud_limits *l = &s->npud->config.limits;
        uint32_t n = s->npud->nsessions;

        if (n >= l->max_connections) {
                snprintf(why, len, "limits.max_connections (%u) reached", l->max_connections);
                return -EUSERS;
        }
        if (s->admin)
                return 0;
        if (n >= limits_unreserved_connections(l)) {
                snprintf(why, len, "the last %u of limits.max_connections (%u) are reserved for "
                         "root and the admin group (limits.reserved_connections)",
                         l->max_connections - limits_unreserved_connections(l), l->max_connections);
                return -EUSERS;
        }
        if (s->uu->conns >= l->max_connections_per_uid) {
                snprintf(why, len, "uid %d has limits.max_connections_per_uid (%u) connections",
                         (int)s->uid, l->max_connections_per_uid);
                return -EUSERS;
        }
        return 0;
}

/* Tell a refused client why (a notification it may ignore) and log it, at most once a
 * second: a client retrying in a loop must not flood the log. */
static void refuse(const struct session *s, const char *why)
{
        static uint64_t last_ns;
        static unsigned suppressed;
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = PROTO_KIND_NOTIFY };
        json_t *body = proto_notify_new("connection-refused",
                                        json_pack("{s:i, s:s, s:s}", "code", PROTO_E_LIMIT,
                                                  "name", proto_error_name(PROTO_E_LIMIT),
                                                  "message", why));
        uint8_t hdr[PROTO_HEADER_SIZE];
        size_t len = 0;
        char *text = body ? proto_json_dump(body, &len) : NULL;
        uint64_t now = now_ns();

        json_decref(body);
        if (text && len < 4096) {
                struct iovec iov[2] = { { hdr, sizeof(hdr) }, { text, len } };
                struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
                h.body_len = (uint32_t)len;
                proto_header_encode(&h, hdr);
                /* a fresh socket's buffer takes it; if not, the client just sees the close */
                if (sendmsg(s->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                        log_debug("connection-refused notification: %s", strerror(errno));
        }
        free(text);
        if (now - last_ns < 1000000000ull && last_ns) {
                suppressed++;
                return;
        }
        log_warn("connection of pid %d uid %d refused: %s%s", (int)s->pid, (int)s->uid, why,
                 suppressed ? " (and earlier refusals not logged)" : "");
        last_ns = now;
        suppressed = 0;
}

int session_new(struct npud *d, int fd, struct session **ret)
{
        struct session *s = calloc(1, sizeof(*s));
        char why[200];
        int e;

        if (!s) {
                close(fd);
                return -ENOMEM;
        }
        s->npud = d;
        s->fd = fd;
        s->client_cpu = -1;
        peer_identity(s);
        s->uu = uid_usage_get(s->uid);
        if (!s->uu) {
                close(fd);
                free(s);
                return -ENOMEM;
        }
        if ((e = admit(s, why, sizeof(why))) < 0) {
                refuse(s, why);
                uid_usage_put(s->uu);
                close(fd);
                free(s);
                return e;
        }
        s->id = ++d->next_session_id;
        proto_reader_init(&s->reader);
        proto_writer_init(&s->writer);
        s->reader.max_body = d->config.limits.max_frame_before_hello;
        handle_table_init(&s->handles);
        TAILQ_INIT(&s->streams);
        TAILQ_INIT(&s->waiters);
        s->last_active_ns = now_ns();
        s->started = (int64_t)time(NULL);
        s->dev_bytes = calloc((size_t)d->ex.devices.count + 1, sizeof(uint64_t));
        if (!s->dev_bytes || session_assign_tenant(s, NULL) < 0) {
                free(s->dev_bytes);
                uid_usage_put(s->uu);
                close(fd);
                free(s);
                return -ENOMEM;
        }
        s->read_event = event_new(d->base, fd, EV_READ | EV_PERSIST, on_read, s);
        s->write_event = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_write, s);
        s->hup_event = event_new(d->base, fd, EV_CLOSED | EV_PERSIST, on_hup, s);
        s->timer_event = evtimer_new(d->base, on_timer, s);
        if (!s->read_event || !s->write_event || !s->hup_event || !s->timer_event ||
            event_add(s->read_event, NULL) < 0) {
                if (s->read_event)
                        event_free(s->read_event);
                if (s->write_event)
                        event_free(s->write_event);
                if (s->hup_event)
                        event_free(s->hup_event);
                if (s->timer_event)
                        event_free(s->timer_event);
                if (s->tenant) {
                        s->tenant->sessions--;
                        tenant_unref(s->tenant);
                }
                free(s->dev_bytes);
                uid_usage_put(s->uu);
                close(fd);
                free(s);
                return -ENOMEM;
        }
        arm_timer(s, d->config.limits.hello_timeout_ms);
        s->uu->conns++;
        TAILQ_INSERT_TAIL(&d->sessions, s, link);
        d->nsessions++;
        if (d->hooks.session_opened)
                d->hooks.session_opened(d, s);
        log_session_msg(LOG_LVL_DEBUG, s->id, s->pid,
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
        case HANDLE_BUFFER:
                session_buffer_released(userdata, obj); /* the charge may outlive the session */
                buffer_unref(obj);
                break;
        case HANDLE_REGION: region_unref(obj); break;
        case HANDLE_STREAM:
                ((struct stream *)obj)->destroyed = 1;
                stream_unref(obj);
                break;
        case HANDLE_EVENT: evt_unref(obj); break;
        case HANDLE_GRAPH: graph_obj_release(userdata, obj); break;
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
        log_session_msg(LOG_LVL_DEBUG, s->id, s->pid,
                        s->tenant ? s->tenant->pol.name : NULL, -1,
                        "session %llu closed (pid %d): %s; %u tasks queued",
                        (unsigned long long)s->id, (int)s->pid, reason, s->queued_tasks);
        event_free(s->read_event);
        event_free(s->write_event);
        event_free(s->hup_event);
        event_free(s->timer_event);
        lcpoll_forget(&s->lcpoll);
        close(s->fd);
        proto_reader_deinit(&s->reader);
        proto_writer_deinit(&s->writer);
        output_account(s);

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
                sched_stream_cancel(&d->ex, st);
        while ((st = TAILQ_FIRST(&s->streams))) {
                TAILQ_REMOVE(&s->streams, st, session_link);
                st->session = NULL;
        }
        export_revoke_session(&d->exports, s->id);
        graph_exports_end_session(s->id);
        graph_loads_session_closed(s); /* before the tenant's figures below: weights in flight */
        handle_foreach(&s->handles, release_handle, s);
        if (s->tenant) {
                s->tenant->sessions--;
                s->tenant->streams -= s->handles.count[HANDLE_STREAM];
                s->tenant->region_bytes -= s->region_bytes;
                for (int i = 0; i < d->ex.devices.count; i++) {
                        s->tenant->dev[i].mem_used -= s->dev_bytes[i];
                        s->tenant->mem_used -= s->dev_bytes[i];
                }
                tenant_unref(s->tenant);
                s->tenant = NULL;
        }
        /* Only now: releasing the streams above may drop other counts of the entry. */
        s->uu->conns--;
        uid_usage_put(s->uu); /* streams still draining keep the entry */
        s->uu = NULL;
        TAILQ_REMOVE(&d->sessions, s, link);
        d->nsessions--;
        if (d->hooks.session_closed)
                d->hooks.session_closed(d, s);
        notify_sessions_changed(d);
        /* The caller may still be inside one of this session's callbacks. */
        struct timeval zero = { 0, 0 };
        if (event_base_once(d->base, -1, EV_TIMEOUT, session_free_deferred, s, &zero) < 0)
                log_error("session %llu: cannot schedule release", (unsigned long long)s->id);
        sched_kick(&d->ex);
}

int session_device_hidden(struct session *s, uint64_t request_id, const char *method, int id)
{
        char list[64 * 3 + 1] = "";
        size_t len = 0;

        if (id < 0 || id >= 64 || !(s->hidden_devices >> id & 1))
                return 0;
        for (int i = 0; i < s->npud->ex.devices.count && i < 64; i++)
                if (!(s->hidden_devices >> i & 1))
                        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", len ? "," : "", i);
        session_reply_error(s, request_id, PROTO_E_PERMISSION,
                            "%s: this session asked for device%s %s only (hello 'devices', "
                            "$NPU_VISIBLE_DEVICES), not device %d", method,
                            strchr(list, ',') ? "s" : "", list, id);
        return 1;
}

const char *session_tenant_name(const struct session *s)
{
        return s->tenant ? s->tenant->pol.name : "default";
}

const char *session_tenant_class(const struct session *s)
{
        return policy_class_name(s->tenant ? s->tenant->pol.klass : POLICY_CLASS_NORMAL);
}

struct stream *session_stream_new(struct session *s, struct device *dev, int priority)
{
        struct stream *st = stream_new(&s->npud->ex, s, dev, priority, s->tenant);

        if (!st)
                return NULL;
        TAILQ_INSERT_TAIL(&s->streams, st, session_link);
        st->uu = s->uu;
        st->uu->streams++;
        return st;
}

static void reply_with_error(struct session *s, uint64_t id, const struct stream_error *e)
{
        json_t *body = proto_reply_error(e->code, e->message);
        if (!body) { /* not valid UTF-8: a dropped reply would leave the client waiting forever */
                char ascii[sizeof(e->message)];
                size_t i;
                for (i = 0; e->message[i] && i < sizeof(ascii) - 1; i++)
                        ascii[i] = (unsigned char)e->message[i] < 0x80 ? e->message[i] : '?';
                ascii[i] = 0;
                body = proto_reply_error(e->code, ascii);
        }
        json_object_set_new(json_object_get(body, "error"), "task", json_integer((json_int_t)e->seq));
        session_send_json(s, PROTO_KIND_REPLY, id, body);
}

/* A deferred synchronize is answered: with the error it reports, or with success. */
static void waiter_reply(struct waiter *w, const struct stream_error *e)
{
        struct session *s = w->session;

        TAILQ_REMOVE(&s->waiters, w, session_link);
        if (w->notify && s->version >= PROTO_VERSION_COMPLETION) {
                int code = e ? e->code : 0;
                struct proto_completion c = {
                        .event = w->notify_event, .tag = w->notify_tag, .code = code,
                        .error_task = code ? e->seq : 0, .message = code ? e->message : "",
                        .flags = PROTO_COMPLETION_EVENT,
                };
                send_completion_frame(s, &c);
        } else if (w->notify) {
                int code = e ? e->code : 0;
                session_send_json(s, PROTO_KIND_NOTIFY, 0,
                                  proto_notify_new("completion",
                                                   json_pack("{s:I, s:I, s:i, s:s, s:I, s:s}", "event",
                                                             (json_int_t)w->notify_event, "tag",
                                                             (json_int_t)w->notify_tag, "code", code,
                                                             "name", proto_error_name(code),
                                                             "error_task", (json_int_t)(code ? e->seq : 0),
                                                             "message", code ? e->message : "")));
        } else if (e && e->code)
                reply_with_error(s, w->request_id, e);
        else
                session_reply_result(s, w->request_id, NULL);
        free(w);
}

void session_check_sync_waiters(struct session *s)
{
        struct stream *st;
        struct stream_error first = { 0 };
        struct waiter *w, *next;

        TAILQ_FOREACH(w, &s->waiters, session_link)
                if (w->kind == WAIT_SESSION)
                        break;
        if (!w)
                return;
        TAILQ_FOREACH(st, &s->streams, session_link)
                if (!stream_idle(st))
                        return;
        /* What only this synchronize can report comes first and is consumed: the failure of a
         * record whose stream was unknown, then that of a destroyed stream. A live stream's
         * failure (the earliest task) is reported but stays recorded for the stream's own
         * synchronize, which alone clears it (section 8 of docs/protocol.md). */
        if (s->deferred.code) {
                first = s->deferred;
                s->deferred.code = 0;
        } else {
                struct stream *from = NULL;
                TAILQ_FOREACH(st, &s->streams, session_link)
                        if (st->error.code && (!from || (st->destroyed && !from->destroyed) ||
                                               (st->destroyed == from->destroyed &&
                                                st->error.seq < from->error.seq)))
                                from = st;
                if (from) {
                        first = from->error;
                        if (from->destroyed)
                                from->error.code = 0;
                }
        }
        for (w = TAILQ_FIRST(&s->waiters); w; w = next) {
                next = TAILQ_NEXT(w, session_link);
                if (w->kind == WAIT_SESSION) {
                        waiter_reply(w, &first);
                        if (s->closing) /* the reply could not be sent: waiters are gone */
                                return;
                }
        }
}

/* ---- observer of the execution layer (daemon/exec/exec.h) ---- */

static void obs_task_failed(void *data, struct stream *st, uint64_t seq, int code, const char *msg)
{
        if (st->dev)
                st->dev->task_errors[code > 0 && code < PROTO_E_COUNT ? code : PROTO_E_COUNT]++;
        notify_task_failed(st->session, st, seq, code, msg);
}

static void obs_task_done(void *data, struct stream *st, int outcome, uint64_t latency_ns)
{
        if (!st->tenant)
                return;
        metrics_task_done(data, st->tenant->pol.name, policy_class_name(st->tenant->pol.klass),
                          st->dev->id, outcome, latency_ns);
        if (outcome == EXEC_TASK_FAILED)
                failure_summary_note(data, st->tenant);
}

/* A task left the system: the owner's counts, and reading resumes for sessions paused on
 * the queued-task limits once the queue half drained. */
static void obs_task_retired(void *data, struct stream *st, int failed)
{
        struct npud *d = data;
        struct session *s = st->session;
        struct tenant *tn = st->tenant;

        if (tn && tn->pol.max_queued_tasks && tn->queued == tn->pol.max_queued_tasks / 2 && s) {
                struct session *o;
                TAILQ_FOREACH(o, &d->sessions, link)
                        if (o->tenant == tn)
                                session_maybe_resume(o);
        }
        if (s) {
                s->queued_tasks--;
                s->tasks_completed++;
                s->tasks_failed += failed != 0;
                session_maybe_resume(s);
        }
}

static void obs_stream_idle(void *data, struct stream *st)
{
        session_check_sync_waiters(st->session);
}

static void obs_waiter_done(void *data, struct waiter *w, const struct stream_error *e)
{
        waiter_reply(w, e);
}

static void obs_stream_released(void *data, struct stream *st)
{
        if (st->session)
                TAILQ_REMOVE(&st->session->streams, st, session_link);
        if (st->uu) {
                st->uu->streams--;
                uid_usage_put(st->uu);
        }
}

void session_send_completion(struct session *s, uint32_t stream, uint64_t seq, uint64_t tag,
                             int host_func, int held, int code, uint64_t error_task,
                             const char *message)
{
        if (s->version >= PROTO_VERSION_COMPLETION) {
                struct proto_completion c = {
                        .stream = stream, .task = seq, .tag = tag, .error_task = error_task,
                        .code = code, .message = message,
                        .flags = (host_func ? PROTO_COMPLETION_HOST_FUNC : 0) |
                                 (held ? PROTO_COMPLETION_HELD : 0),
                };
                send_completion_frame(s, &c);
                return;
        }
        session_send_json(s, PROTO_KIND_NOTIFY, 0,
                          proto_notify_new("completion",
                                           json_pack("{s:I, s:I, s:I, s:b, s:b, s:i, s:s, s:I, s:s}",
                                                     "stream", (json_int_t)stream, "task",
                                                     (json_int_t)seq, "tag", (json_int_t)tag,
                                                     "host_func", host_func, "held", held, "code",
                                                     code, "name", proto_error_name(code),
                                                     "error_task", (json_int_t)error_task,
                                                     "message", message)));
}

/* A notify task reached: its completion, with the stream's first failure since its last
 * synchronize (never another stream's), goes to the owner; a held one waits for its ack. */
static void obs_notify_reached(void *data, struct stream *st, uint64_t seq, uint64_t tag, int hold,
                               const struct stream_error *e)
{
        session_send_completion(st->session, st->handle, seq, tag, hold, hold, e->code,
                                e->code ? e->seq : 0, e->code ? e->message : "");
}

static void obs_unit_done(void *data, struct device *dev)
{
        manage_device_poll(data, dev); /* a pending reset ends once the device is idle */
}

void session_observe(struct npud *d)
{
        d->ex.obs = (struct exec_observer){
                .data = d,
                .task_failed = obs_task_failed,
                .task_done = obs_task_done,
                .task_retired = obs_task_retired,
                .stream_idle = obs_stream_idle,
                .waiter_done = obs_waiter_done,
                .stream_released = obs_stream_released,
                .unit_done = obs_unit_done,
                .notify_reached = obs_notify_reached,
        };
}

/* libnpu: connection to npud, request/reply with leader-follower reading so several threads
 * can wait on one connection, batched binary submission of asynchronous work, host regions
 * and a staging region for synchronous copies from ordinary memory. The library never logs:
 * every failure is a status plus a per-thread message. */
#include "client/libnpu-internal.h"

#include <linux/futex.h>
#include <sys/syscall.h>

__thread char npu_tls_message[4096]; /* graph_load lists every unsupported node */
__thread uint64_t npu_tls_task;

npu_status_t npu_fail(npu_status_t st, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(npu_tls_message, sizeof(npu_tls_message), fmt, ap);
        va_end(ap);
        npu_tls_task = 0;
        return st;
}

npu_status_t npu_fail_lost(npu_context_t *ctx, const char *method)
{
        char reason[sizeof(ctx->closed_reason)];

        pthread_mutex_lock(&ctx->mu);
        /* A request written after npud closed fails before its reply is awaited: the notice
         * saying why may still wait unread in the socket. Read what is there, without
         * waiting, unless another thread is the reader (it hands the notice over itself). */
        if (!ctx->closed_reason[0] && !ctx->reader_active && ctx->fd >= 0)
                npu_read_once_locked(ctx, 0);
        memcpy(reason, ctx->closed_reason, sizeof(reason));
        npu_ctx_unlock(ctx);
        return fail(NPU_ERR_CONNECTION, "%s%sconnection to npud lost%s%s", method ? method : "",
                    method ? ": " : "", reason[0] ? ": " : "", reason);
}

/* npud tells a session why it closes it (an administrator's session kill) just before; keep
 * the reason for the error of whichever call finds the connection gone. */
static void note_closed_locked(npu_context_t *ctx, const uint8_t *body, size_t len)
{
        static const char ev[] = "\"session-killed\"";
        char err[64];
        json_t *msg;

        if (!memmem(body, len, ev, sizeof(ev) - 1) ||
            !(msg = proto_json_parse(body, len, err, sizeof(err))))
                return;
        const char *name = json_string_value(json_object_get(msg, "event"));
        const char *reason = json_string_value(json_object_get(json_object_get(msg, "data"), "reason"));
        if (name && strcmp(name, "session-killed") == 0)
                snprintf(ctx->closed_reason, sizeof(ctx->closed_reason), "%s",
                         reason ? reason : "closed by npud");
        json_decref(msg);
}

NPU_EXPORT const char *npu_strerror(npu_status_t status)
{
        switch (status) {
        case NPU_OK: return "success";
        case NPU_ERR_INVALID: return "invalid argument";
        case NPU_ERR_BAD_HANDLE: return "unknown, freed or foreign handle";
        case NPU_ERR_NO_MEMORY: return "device out of memory";
        case NPU_ERR_QUOTA: return "quota exceeded";
        case NPU_ERR_LIMIT: return "limit exceeded";
        case NPU_ERR_PERMISSION: return "permission denied";
        case NPU_ERR_UNSUPPORTED: return "unsupported operator or type";
        case NPU_ERR_SHAPE: return "shape or type mismatch";
        case NPU_ERR_OUT_OF_RANGE: return "offset or length out of range";
        case NPU_ERR_PROTOCOL: return "protocol error";
        case NPU_ERR_VERSION: return "no common protocol version";
        case NPU_ERR_DEVICE: return "device failure";
        case NPU_ERR_EXEC: return "kernel execution failed";
        case NPU_ERR_BUSY: return "busy, retry later";
        case NPU_ERR_NOT_READY: return "not ready";
        case NPU_ERR_CANCELLED: return "cancelled";
        case NPU_ERR_CONNECTION: return "connection to npud lost";
        case NPU_ERR_SYSTEM: return "system call failed";
        }
        return "unknown error";
}

NPU_EXPORT const char *npu_error_message(void)
{
        return npu_tls_message;
}

NPU_EXPORT uint64_t npu_error_task(void)
{
        return npu_tls_task;
}

NPU_EXPORT const char *npu_version(void)
{
#ifdef NPUD_VERSION
        return NPUD_VERSION;
#else
        return "0";
#endif
}

/* ---- framing (ctx->mu held unless noted) ---- */

int npu_send_frame_locked(npu_context_t *ctx, int kind, uint64_t id, const void *body,
                             size_t len, const int *fds, int nfds)
{
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = (uint8_t)kind, .nfds = (uint8_t)nfds,
                                  .body_len = (uint32_t)len, .request_id = id };
        int e = proto_send_frame(ctx->fd, &h, body, fds);
        if (e < 0)
                ctx->broken = 1;
        return e;
}

/* The batch and the request a call sends right after it, in one send when both are small:
 * npud reads them in one wake-up (a graph run and the synchronize after it took two sends,
 * and on a virtual machine each may wake npud's loop thread on another CPU). 1 when sent
 * so, 0 when the caller sends them apart, -errno. */
#define CALL_WITH_BATCH_MAX 4096

static int send_batch_and_request_locked(npu_context_t *ctx, uint64_t id, const void *body,
                                         size_t len)
{
        uint8_t buf[CALL_WITH_BATCH_MAX];
        size_t total = 2 * PROTO_HEADER_SIZE + ctx->batch_len + len, done = 0;

        if (!ctx->batch_len || total > sizeof(buf))
                return 0;
        struct proto_header b = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = PROTO_KIND_SUBMIT, .body_len = (uint32_t)ctx->batch_len },
                            r = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = PROTO_KIND_REQUEST, .body_len = (uint32_t)len, .request_id = id };
        proto_header_encode(&b, buf);
        memcpy(buf + PROTO_HEADER_SIZE, ctx->batch, ctx->batch_len);
        proto_header_encode(&r, buf + PROTO_HEADER_SIZE + ctx->batch_len);
        if (len)
                memcpy(buf + 2 * PROTO_HEADER_SIZE + ctx->batch_len, body, len);
        ctx->batch_len = 0;
        while (done < total) {
                ssize_t n = send(ctx->fd, buf + done, total - done, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        ctx->broken = 1;
                        return -errno;
                }
                done += (size_t)n;
        }
        return 1;
}

int npu_flush_locked(npu_context_t *ctx)
{
        if (ctx->batch_len == 0)
                return 0;
        int e = npu_send_frame_locked(ctx, PROTO_KIND_SUBMIT, 0, ctx->batch, ctx->batch_len, NULL, 0);
        ctx->batch_len = 0;
        return e;
}

static void handle_frame_locked(npu_context_t *ctx, const struct proto_frame *f)
{
        char err[128];

        for (int i = 0; i < f->hdr.nfds; i++)
                close(f->fds[i]);
        if (f->hdr.kind == PROTO_KIND_NOTIFY) {
                /* completions and device notices for the completion queue (libnpu-completion.c);
                 * task failures are also reported at the next synchronize */
                note_closed_locked(ctx, f->body, f->hdr.body_len);
                npu_notify_frame_locked(ctx, f->body, f->hdr.body_len);
                return;
        }
        if (f->hdr.kind == PROTO_KIND_COMPLETION) {
                npu_completion_frame_locked(ctx, f->body, f->hdr.body_len);
                return;
        }
        if (f->hdr.kind != PROTO_KIND_REPLY)
                return;
        for (struct pending *p = ctx->pending; p; p = p->next) {
                if (p->id == f->hdr.request_id && !p->done) {
                        static const char empty[] = "{\"result\":{}}";
                        if (f->hdr.body_len == sizeof(empty) - 1 &&
                            memcmp(f->body, empty, sizeof(empty) - 1) == 0)
                                p->empty_result = 1;
                        else
                                p->reply = proto_json_parse(f->body, f->hdr.body_len, err, sizeof(err));
                        p->done = 1;
                        npu_wake_locked(ctx, p);
                        return;
                }
        }
}

/* Wake the waiter of one pending call still without its reply, to become the reader. */
static void reader_handoff_locked(npu_context_t *ctx)
{
        for (struct pending *q = ctx->pending; q; q = q->next)
                if (!q->done) {
                        npu_wake_locked(ctx, q);
                        return;
                }
}

/* Read the socket (waiting for data when wait) and handle every whole frame, as the reader:
 * the caller found no reader active. ctx->mu is released while it reads; waiting threads are
 * woken after. */
/* Still within the context's spin before sleeping for a reply (t0: 0 at the first call)? */
static int wait_spinning(const npu_context_t *ctx, uint64_t *t0)
{
        struct timespec ts;

        if (!ctx->wait_spin_ns)
                return 0;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        if (!*t0)
                *t0 = now;
        return now - *t0 < ctx->wait_spin_ns;
}

void npu_read_once_locked(npu_context_t *ctx, int wait)
{
        uint64_t spin_t0 = 0;
        ctx->reader_active = 1;
        npu_ctx_unlock(ctx);
        ssize_t n;
        if (!wait) { /* what the socket has now, maybe nothing */
                n = proto_reader_fill(&ctx->reader, ctx->fd);
                if (n == -EAGAIN || n == -EINTR) {
                        pthread_mutex_lock(&ctx->mu);
                        ctx->reader_active = 0;
                        reader_handoff_locked(ctx);
                        if (ctx->cv_sleepers)
                                pthread_cond_broadcast(&ctx->cv);
                        return;
                }
        } else do {
                /* Wait in poll for POLLIN, not in a blocking recvmsg: a reader asleep in
                 * recvmsg is also woken each time the daemon reads what this side sent (the
                 * socket's write space), a wake-up for nothing that costs the daemon's loop
                 * thread an interrupt to this CPU and preempts whatever runs here. A poll
                 * waiter is woken only for the events it asked for. */
                n = proto_reader_fill(&ctx->reader, ctx->fd);
                if (n == -EAGAIN && wait == NPU_READ_REPLY && wait_spinning(ctx, &spin_t0)) {
                        /* look again, awake. Not sched_yield(): the fair scheduler handed
                         * the CPU to a best-effort worker of npud (SCHED_IDLE) for the rest of
                         * its slice, 1.6 ms, and the reply waited for it */
                        n = -EINTR;
                        continue;
                }
                if (n == -EAGAIN) {
                        struct pollfd pfd = { .fd = ctx->fd, .events = POLLIN };
                        if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                                n = -errno;
                }
        } while (n == -EAGAIN || n == -EINTR);
        pthread_mutex_lock(&ctx->mu);
        if (n <= 0)
                ctx->broken = 1;
        else {
                struct proto_frame f;
                int r;
                while ((r = proto_reader_next(&ctx->reader, &f)) == 1)
                        handle_frame_locked(ctx, &f);
                if (r < 0)
                        ctx->broken = 1;
        }
        ctx->reader_active = 0;
        /* a reply wakes only its own waiter (handle_frame_locked); one waiter still without
         * its reply takes over the reading, and threads waiting for the socket itself (the
         * completion reader) look again */
        if (ctx->broken)
                for (struct pending *q = ctx->pending; q; q = q->next)
                        npu_wake_locked(ctx, q);
        else
                reader_handoff_locked(ctx);
        if (ctx->cv_sleepers)
                pthread_cond_broadcast(&ctx->cv);
}

static void wake_now(atomic_int *w)
{
        atomic_store_explicit(w, 1, memory_order_release);
        /* the waiter may be gone once it sees the word set (its pending is on its stack): a
         * wake on the address touches no memory, and the waiter's loop takes a stray one */
        syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void npu_wake_locked(npu_context_t *ctx, struct pending *p)
{
        if (!p->sleeping)
                return;
        p->sleeping = 0;
        if (ctx->nwake < NPU_WAKE_QUEUE)
                ctx->wake_q[ctx->nwake++] = &p->wake;
        else
                wake_now(&p->wake);
}

void npu_wakes_flush_locked(npu_context_t *ctx)
{
        for (int i = 0; i < ctx->nwake; i++)
                wake_now(ctx->wake_q[i]);
        ctx->nwake = 0;
}

void npu_ctx_unlock(npu_context_t *ctx)
{
        atomic_int *q[NPU_WAKE_QUEUE];
        int n = ctx->nwake;

        memcpy(q, ctx->wake_q, sizeof(q[0]) * (size_t)n);
        ctx->nwake = 0;
        pthread_mutex_unlock(&ctx->mu);
        for (int i = 0; i < n; i++)
                wake_now(q[i]);
}

/* Wait for p's reply. Whoever finds no reader active becomes the reader; others sleep, each
 * on its own condition: a reply wakes only its caller, and a reader leaving with its own reply
 * wakes one other waiter to read on (one broadcast per frame woke every waiter, and a shared
 * context cost 2-3x the client CPU per request of one context per thread: npubench serve). */
static void wait_reply_locked(npu_context_t *ctx, struct pending *p)
{
        while (!p->done && !ctx->broken) {
                if (ctx->reader_active) {
                        atomic_store_explicit(&p->wake, 0, memory_order_relaxed);
                        p->sleeping = 1;
                        npu_ctx_unlock(ctx);
                        while (!atomic_load_explicit(&p->wake, memory_order_acquire))
                                syscall(SYS_futex, &p->wake, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
                        pthread_mutex_lock(&ctx->mu);
                        continue;
                }
                npu_read_once_locked(ctx, NPU_READ_REPLY); /* hands the reading on, once p is done */
        }
}

/* One request/reply. Steals params. On success *ret_result (if given) is a new reference. */
npu_status_t npu_call_fds(npu_context_t *ctx, const char *method, json_t *params,
                             const int *fds, int nfds, json_t **ret_result)
{
        json_t *result;
        struct pending p = { 0 };
        char err[512], bare[PROTO_METHOD_MAX + 32];
        size_t len = params ? 0 : proto_request_bare_encode(method, bare, sizeof(bare));
        char *text = bare;
        int code;

        /* a fork handler's counter, not getpid(): no system call per request */
        if (npu_forked(ctx, method)) {
                json_decref(params);
                return NPU_ERR_CONNECTION;
        }
        /* a request without parameters is written as text: no JSON objects to build */
        if (!len) {
                json_t *req = proto_request_new(method, params);
                if (!req)
                        return fail(NPU_ERR_SYSTEM, "%s: out of memory", method);
                text = proto_json_dump(req, &len);
                json_decref(req);
                if (!text)
                        return fail(NPU_ERR_SYSTEM, "%s: out of memory", method);
        }
        pthread_mutex_lock(&ctx->mu);
        p.id = ctx->next_id + 1;
        int sent = ctx->broken ? -EPIPE : nfds ? 0 : send_batch_and_request_locked(ctx, p.id, text, len);
        if (sent < 0 || (!sent && npu_flush_locked(ctx) < 0)) {
                npu_ctx_unlock(ctx);
                if (text != bare)
                        free(text);
                return npu_fail_lost(ctx, method);
        }
        ctx->next_id++;
        p.next = ctx->pending;
        ctx->pending = &p;
        if (sent || npu_send_frame_locked(ctx, PROTO_KIND_REQUEST, p.id, text, len, fds, nfds) == 0)
                wait_reply_locked(ctx, &p);
        for (struct pending **pp = &ctx->pending; *pp; pp = &(*pp)->next)
                if (*pp == &p) {
                        *pp = p.next;
                        break;
                }
        npu_ctx_unlock(ctx);
        if (text != bare)
                free(text);
        if (!p.done)
                return npu_fail_lost(ctx, method);
        if (p.empty_result) {
                if (ret_result && !(*ret_result = json_object()))
                        return fail(NPU_ERR_SYSTEM, "%s: out of memory", method);
                return NPU_OK;
        }
        if (!p.reply)
                return fail(NPU_ERR_PROTOCOL, "%s: unreadable reply", method);
        code = proto_reply_parse(p.reply, &result, err, sizeof(err));
        if (code != 0) {
                npu_status_t st = code < 0 ? NPU_ERR_PROTOCOL : (npu_status_t)code;
                json_t *task = json_object_get(json_object_get(p.reply, "error"), "task");
                fail(st, "%s", code < 0 ? "malformed reply" : err);
                if (json_is_integer(task))
                        npu_tls_task = (uint64_t)json_integer_value(task);
                json_decref(p.reply);
                return st;
        }
        if (ret_result)
                *ret_result = json_incref(result);
        json_decref(p.reply);
        /* The error detail stays that of the last failed call (npu.h): a caller commonly
         * cleans up (npu_free, ...) before it reports a failure, and clearing it here
         * handed it an empty message and task 0 for a failure the daemon had explained. */
        return NPU_OK;
}

npu_status_t npu_call(npu_context_t *ctx, const char *method, json_t *params, json_t **ret)
{
        return npu_call_fds(ctx, method, params, NULL, 0, ret);
}

npu_status_t npu_get_u32(json_t *result, const char *key, uint32_t *ret)
{
        json_t *v = json_object_get(result, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
                return fail(NPU_ERR_PROTOCOL, "reply lacks '%s'", key);
        *ret = (uint32_t)json_integer_value(v);
        return NPU_OK;
}

/* ---- connection ---- */


NPU_EXPORT npu_status_t npu_connect(const char *path, npu_context_t **ret_ctx)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = path };
        return npu_connect_with(&o, ret_ctx);
}

NPU_EXPORT const char *npu_tenant(npu_context_t *ctx)
{
        return ctx ? ctx->tenant : "";
}

/* The spin of a context's reply waits: $NPU_WAIT_SPIN_US when set (a number), else asked_us
 * (npu_connect_options_t.wait_spin_us), where 0 means NPU_WAIT_SPIN_LC_US for a
 * latency-critical tenant and none otherwise. At most a second. */
static uint64_t wait_spin_ns(int asked_us, int latency_critical)
{
        const char *env = getenv("NPU_WAIT_SPIN_US");
        long us = asked_us;
        char *end;

        if (env && *env) {
                long v = strtol(env, &end, 10);
                if (!*end)
                        us = v;
        }
        if (!us)
                us = latency_critical ? NPU_WAIT_SPIN_LC_US : 0;
        if (us < 0)
                return 0;
        return (uint64_t)(us < 1000000 ? us : 1000000) * 1000;
}

NPU_EXPORT npu_status_t npu_connect_with(const npu_connect_options_t *options, npu_context_t **ret_ctx)
{
        const char *path = options ? options->socket : NULL;
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        char def[108];
        npu_context_t *ctx;
        json_t *res = NULL;
        npu_status_t st;

        if (!ret_ctx || !options)
                return fail(NPU_ERR_INVALID, "npu_connect: invalid argument");
        /* No tenant asked for: $NPU_TENANT, as a CDI spec sets it in a container (an empty
         * value counts as unset). npud still checks that the credentials may join it. */
        const char *tenant = options->tenant;
        if (!tenant && (tenant = getenv("NPU_TENANT")) && !*tenant)
                tenant = NULL;
        /* The first released layout ends with backpressure; larger sizes (a newer header) are
         * accepted and the fields this libnpu does not know are ignored. */
        if (options->size < NPU_SIZE_V1(npu_connect_options_t, backpressure))
                return fail(NPU_ERR_INVALID, "npu_connect_with: options->size is %zu, set it to "
                            "sizeof(npu_connect_options_t)", options->size);
        if (options->backpressure != NPU_BACKPRESSURE_BLOCK && options->backpressure != NPU_BACKPRESSURE_ERROR)
                return fail(NPU_ERR_INVALID, "npu_connect: invalid argument");
        if (!path) {
                proto_client_socket_path(def, sizeof(def));
                path = def;
        }
        if (strlen(path) >= sizeof(addr.sun_path))
                return fail(NPU_ERR_INVALID, "npu_connect: socket path too long");
        memcpy(addr.sun_path, path, strlen(path) + 1);
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return fail(NPU_ERR_SYSTEM, "npu_connect: out of memory");
        pthread_mutex_init(&ctx->mu, NULL);
        pthread_cond_init(&ctx->cv, NULL);
        pthread_mutex_init(&ctx->stage_mu, NULL);
        proto_reader_init(&ctx->reader);
        npu_fork_init(ctx);
        ctx->conn_backpressure = options->backpressure;
        if (options->size >= NPU_SIZE_V1(npu_connect_options_t, wait_spin_us))
                ctx->conn_wait_spin_us = options->wait_spin_us;
        if ((options->socket && !(ctx->conn_socket = strdup(options->socket))) ||
            (tenant && !(ctx->conn_tenant = strdup(tenant)))) {
                ctx->fd = -1;
                npu_disconnect(ctx);
                return fail(NPU_ERR_SYSTEM, "npu_connect: out of memory");
        }
        ctx->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (ctx->fd < 0 || connect(ctx->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                if (ctx->fd >= 0 && (errno == EACCES || errno == EPERM))
                        st = fail(NPU_ERR_PERMISSION,
                                  "cannot connect to npud at %s: permission denied (the socket's "
                                  "mode and group decide who may connect)", path);
                else
                        st = fail(NPU_ERR_CONNECTION, "cannot connect to npud at %s: %s", path,
                                  strerror(errno));
                npu_disconnect(ctx);
                return st;
        }
        json_t *hello = json_pack("{s:i, s:i, s:s, s:s}", "min_version", PROTO_SESSION_VERSION_MIN,
                                  "max_version", PROTO_SESSION_VERSION, "client", "libnpu 0.1.0",
                                  "backpressure",
                                  options->backpressure == NPU_BACKPRESSURE_ERROR ? "error" : "block");
        if (hello && tenant)
                json_object_set_new(hello, "tenant", json_string(tenant));
        uint64_t visible;
        char verr[160];
        int nv = npu_visible_devices(&visible, verr, sizeof(verr));
        if (nv < 0) {
                json_decref(hello);
                npu_disconnect(ctx);
                return fail(NPU_ERR_INVALID, "npu_connect: %s", verr);
        }
        if (hello && nv > 0) {
                json_t *ids = json_array();
                for (int i = 0; i < 64; i++)
                        if (visible >> i & 1)
                                json_array_append_new(ids, json_integer(i));
                json_object_set_new(hello, "devices", ids);
        }
        st = npu_call(ctx, "hello", hello, &res);
        if (st == NPU_OK) {
                json_t *n = json_object_get(res, "devices"), *tn = json_object_get(res, "tenant");
                json_t *v = json_object_get(res, "version");
                /* An npud from before version 2 answers 1: launches then carry names. */
                ctx->version = json_is_integer(v) ? (int)json_integer_value(v) : PROTO_SESSION_VERSION_MIN;
                snprintf(ctx->tenant, sizeof(ctx->tenant), "%s", json_is_string(tn) ? json_string_value(tn) : "");
                json_t *cl = json_object_get(res, "class");
                ctx->wait_spin_ns = wait_spin_ns(ctx->conn_wait_spin_us,
                                                 json_is_string(cl) && !strcmp(json_string_value(cl), "latency-critical"));
                ctx->ndevices = json_is_integer(n) ? (int)json_integer_value(n) : 0;
                json_decref(res);
                ctx->internal_streams = calloc((size_t)ctx->ndevices + 1, sizeof(uint32_t));
                if (!ctx->internal_streams)
                        st = fail(NPU_ERR_SYSTEM, "npu_connect: out of memory");
        }
        if (st != NPU_OK) {
                npu_disconnect(ctx);
                return st;
        }
        *ret_ctx = ctx;
        return NPU_OK;
}

NPU_EXPORT void npu_disconnect(npu_context_t *ctx)
{
        if (!ctx)
                return;
        npu_context_release(ctx);
        free(ctx);
}

/* Never takes ctx's locks: in a forked child another thread of the parent may have held them
 * at the fork, and the child only drops its copies (its close() leaves the parent's session
 * open; the munmaps are the child's). The completion reader thread is stopped first, in the
 * process that started it only. */
void npu_context_release(npu_context_t *ctx)
{
        npu_completion_shutdown(ctx); /* the reader thread, before the socket goes */
        npu_hostrun_free(ctx);
        if (ctx->fd >= 0)
                close(ctx->fd);
        for (size_t i = 0; i < ctx->nregions; i++)
                munmap(ctx->regions[i].ptr, ctx->regions[i].size);
        proto_reader_deinit(&ctx->reader);
        free(ctx->regions);
        free(ctx->batch);
        free(ctx->internal_streams);
        free(ctx->buf_device);
        free(ctx->stream_device);
        npu_graph_descs_free(ctx);
        free(ctx->ops);
        pthread_mutex_destroy(&ctx->mu);
        pthread_cond_destroy(&ctx->cv);
        pthread_mutex_destroy(&ctx->stage_mu);
        free(ctx->conn_socket);
        free(ctx->conn_tenant);
}

NPU_EXPORT npu_status_t npu_ping(npu_context_t *ctx)
{
        return npu_call(ctx, "ping", NULL, NULL);
}

NPU_EXPORT npu_status_t npu_admin_call(npu_context_t *ctx, const char *method,
                                       const char *params_json, char **ret_json)
{
        json_t *params = NULL, *res = NULL;
        npu_status_t st;

        if (!ctx || !method || !ret_json)
                return fail(NPU_ERR_INVALID, "npu_admin_call: NULL argument");
        if (params_json) {
                json_error_t jerr;
                params = json_loads(params_json, 0, &jerr);
                if (!json_is_object(params)) {
                        json_decref(params);
                        return fail(NPU_ERR_INVALID, "npu_admin_call: params must be a JSON object");
                }
        }
        st = npu_call(ctx, method, params, &res);
        if (st != NPU_OK)
                return st;
        *ret_json = json_dumps(res, JSON_COMPACT);
        json_decref(res);
        return *ret_json ? NPU_OK : fail(NPU_ERR_SYSTEM, "out of memory");
}

NPU_EXPORT npu_status_t npu_device_count(npu_context_t *ctx, int *ret_count)
{
        if (!ctx || !ret_count)
                return fail(NPU_ERR_INVALID, "npu_device_count: NULL argument");
        *ret_count = ctx->ndevices;
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_device_get_info(npu_context_t *ctx, int device,
                                            npu_device_info_t *ret_info)
{
        json_t *res = NULL, *dev;
        npu_status_t st;
        const char *name = "", *profile = "", *health = "";
        json_int_t total = 0, used = 0, cube = 0, vector = 0, aicpu = 0;
        size_t size;

        if (!ctx || !ret_info)
                return fail(NPU_ERR_INVALID, "npu_device_get_info: NULL argument");
        /* The first released layout ends with aicpu_cores; a larger size (a newer header) gets
         * the fields this libnpu knows, and size tells the caller how far that is. */
        size = ret_info->size;
        if (size < NPU_SIZE_V1(npu_device_info_t, aicpu_cores))
                return fail(NPU_ERR_INVALID, "npu_device_get_info: ret_info->size is %zu, set it to "
                            "sizeof(npu_device_info_t)", size);
        st = npu_call(ctx, "devices", NULL, &res);
        if (st != NPU_OK)
                return st;
        dev = json_array_get(json_object_get(res, "devices"), (size_t)device);
        if (device < 0 || !dev ||
            json_unpack(dev, "{s:s, s:s, s:s, s:I, s:I, s:{s:I, s:I, s:I}}", "name", &name,
                        "profile", &profile, "health", &health, "memory_total", &total,
                        "memory_used", &used, "cores", "cube", &cube, "vector", &vector,
                        "aicpu", &aicpu) < 0) {
                json_decref(res);
                return fail(NPU_ERR_INVALID, "npu_device_get_info: no device %d", device);
        }
        /* Never past what this libnpu knows: a caller's size is not trusted for writing. */
        size = size < sizeof(*ret_info) ? size : sizeof(*ret_info);
        memset(ret_info, 0, size);
        ret_info->size = size;
        ret_info->id = device;
        snprintf(ret_info->name, sizeof(ret_info->name), "%s", name);
        snprintf(ret_info->profile, sizeof(ret_info->profile), "%s", profile);
        snprintf(ret_info->health, sizeof(ret_info->health), "%s", health);
        ret_info->memory_total = (uint64_t)total;
        ret_info->memory_used = (uint64_t)used;
        ret_info->cube_cores = (int)cube;
        ret_info->vector_cores = (int)vector;
        ret_info->aicpu_cores = (int)aicpu;
        json_decref(res);
        return NPU_OK;
}

/* ---- memory ---- */

/* Handle index -> device maps (buffers, streams); the daemon's handles are dense. */
static void map_set(npu_context_t *ctx, int32_t **map, size_t *cap, uint32_t id, int device)
{
        size_t idx = HANDLE_INDEX(id);

        pthread_mutex_lock(&ctx->mu);
        if (idx >= *cap) {
                size_t n = *cap ? *cap : 256;
                while (n <= idx)
                        n *= 2;
                int32_t *nb = realloc(*map, n * sizeof(*nb));
                if (nb) {
                        for (size_t i = *cap; i < n; i++)
                                nb[i] = -1;
                        *map = nb;
                        *cap = n;
                }
        }
        if (idx < *cap)
                (*map)[idx] = device;
        npu_ctx_unlock(ctx);
}

static int map_get(npu_context_t *ctx, int32_t *const *map, const size_t *cap, uint32_t id)
{
        size_t idx = HANDLE_INDEX(id);
        int dev = -1;

        pthread_mutex_lock(&ctx->mu);
        if (idx < *cap)
                dev = (*map)[idx];
        npu_ctx_unlock(ctx);
        return dev;
}

static void remember_buffer(npu_context_t *ctx, uint32_t id, int device)
{
        map_set(ctx, &ctx->buf_device, &ctx->buf_device_cap, id, device);
}

int npu_buffer_device(npu_context_t *ctx, npu_buffer_t b)
{
        return map_get(ctx, &ctx->buf_device, &ctx->buf_device_cap, b.id);
}

NPU_EXPORT npu_status_t npu_malloc(npu_context_t *ctx, int device, uint64_t size, npu_buffer_t *ret_buf)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret_buf || device < 0 || size > INT64_MAX)
                return fail(NPU_ERR_INVALID, "npu_malloc: invalid argument");
        st = npu_call(ctx, "mem_alloc", json_pack("{s:i, s:I}", "device", device, "size", (json_int_t)size), &res);
        if (st == NPU_OK) {
                st = npu_get_u32(res, "buffer", &ret_buf->id);
                json_decref(res);
                if (st == NPU_OK)
                        remember_buffer(ctx, ret_buf->id, device);
        }
        return st;
}

NPU_EXPORT npu_status_t npu_free(npu_context_t *ctx, npu_buffer_t buf)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_free: NULL context");
        return npu_call(ctx, "mem_free", json_pack("{s:I}", "buffer", (json_int_t)buf.id), NULL);
}

NPU_EXPORT npu_status_t npu_buffer_view(npu_context_t *ctx, npu_buffer_t buf, uint64_t offset,
                                        uint64_t size, npu_buffer_t *ret_view)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret_view || offset > INT64_MAX || size > INT64_MAX)
                return fail(NPU_ERR_INVALID, "npu_buffer_view: invalid argument");
        st = npu_call(ctx, "mem_view", json_pack("{s:I, s:I, s:I}", "buffer", (json_int_t)buf.id, "offset",
                                             (json_int_t)offset, "size", (json_int_t)size), &res);
        if (st == NPU_OK)
                st = npu_get_u32(res, "buffer", &ret_view->id);
        if (st == NPU_OK)
                remember_buffer(ctx, ret_view->id, (int)json_integer_value(json_object_get(res, "device")));
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_buffer_export(npu_context_t *ctx, npu_buffer_t buf, const char *const *tenants,
                                          int ntenants, int readonly, char ret_token[NPU_TOKEN_LEN])
{
        json_t *res = NULL, *params, *list;
        npu_status_t st;

        if (!ctx || !ret_token || ntenants < 0 || ntenants > 8 || (ntenants && !tenants))
                return fail(NPU_ERR_INVALID, "npu_buffer_export: invalid argument (at most 8 tenants)");
        list = json_array();
        for (int i = 0; i < ntenants; i++)
                json_array_append_new(list, json_string(tenants[i] ? tenants[i] : ""));
        params = json_pack("{s:I, s:o, s:b}", "buffer", (json_int_t)buf.id, "tenants", list, "readonly", readonly);
        st = npu_call(ctx, "mem_export", params, &res);
        if (st == NPU_OK) {
                json_t *tok = json_object_get(res, "token");
                if (!json_is_string(tok) || json_string_length(tok) != NPU_TOKEN_LEN - 1)
                        st = fail(NPU_ERR_PROTOCOL, "mem_export: reply lacks a token");
                else
                        memcpy(ret_token, json_string_value(tok), NPU_TOKEN_LEN);
        }
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_buffer_import(npu_context_t *ctx, const char *token, int readonly,
                                          npu_buffer_t *ret_buf)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !token || !ret_buf)
                return fail(NPU_ERR_INVALID, "npu_buffer_import: NULL argument");
        st = npu_call(ctx, "mem_import", json_pack("{s:s, s:b}", "token", token, "readonly", readonly), &res);
        if (st == NPU_OK)
                st = npu_get_u32(res, "buffer", &ret_buf->id);
        if (st == NPU_OK)
                remember_buffer(ctx, ret_buf->id, (int)json_integer_value(json_object_get(res, "device")));
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_buffer_revoke(npu_context_t *ctx, const char *token)
{
        if (!ctx || !token)
                return fail(NPU_ERR_INVALID, "npu_buffer_revoke: NULL argument");
        return npu_call(ctx, "mem_revoke", json_pack("{s:s}", "token", token), NULL);
}

NPU_EXPORT npu_status_t npu_host_alloc(npu_context_t *ctx, uint64_t size, void **ret_ptr,
                                       npu_region_t *ret_region)
{
        json_t *res = NULL;
        npu_status_t st;
        void *ptr;
        int fd;

        if (!ctx || !ret_ptr || !ret_region || size == 0 || size > INT64_MAX)
                return fail(NPU_ERR_INVALID, "npu_host_alloc: invalid argument");
        fd = memfd_create("npu-host-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return fail(NPU_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
        if (ftruncate(fd, (off_t)size) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
                st = fail(NPU_ERR_SYSTEM, "host region of %llu bytes: %s",
                          (unsigned long long)size, strerror(errno));
                close(fd);
                return st;
        }
        ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (ptr == MAP_FAILED) {
                st = fail(NPU_ERR_SYSTEM, "mmap: %s", strerror(errno));
                close(fd);
                return st;
        }
        st = npu_call_fds(ctx, "region_register", json_pack("{s:i}", "fd", 0), &fd, 1, &res);
        close(fd);
        if (st == NPU_OK)
                st = npu_get_u32(res, "region", &ret_region->id);
        json_decref(res);
        if (st != NPU_OK) {
                munmap(ptr, size);
                return st;
        }
        pthread_mutex_lock(&ctx->mu);
        if (ctx->nregions == ctx->regions_cap) {
                size_t cap = ctx->regions_cap ? ctx->regions_cap * 2 : 8;
                struct region_ent *nr = realloc(ctx->regions, cap * sizeof(*nr));
                if (nr) {
                        ctx->regions = nr;
                        ctx->regions_cap = cap;
                }
        }
        if (ctx->nregions < ctx->regions_cap)
                ctx->regions[ctx->nregions++] = (struct region_ent){ ret_region->id, ptr, size };
        npu_ctx_unlock(ctx);
        *ret_ptr = ptr;
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_host_free(npu_context_t *ctx, npu_region_t region)
{
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_host_free: NULL context");
        st = npu_call(ctx, "region_unregister", json_pack("{s:I}", "region", (json_int_t)region.id), NULL);
        if (st != NPU_OK)
                return st;
        pthread_mutex_lock(&ctx->mu);
        for (size_t i = 0; i < ctx->nregions; i++)
                if (ctx->regions[i].id == region.id) {
                        munmap(ctx->regions[i].ptr, ctx->regions[i].size);
                        ctx->regions[i] = ctx->regions[--ctx->nregions];
                        break;
                }
        npu_ctx_unlock(ctx);
        return NPU_OK;
}

/* ---- asynchronous submission ---- */

/* Room for size more bytes in the batch; 0 or -ENOMEM. */
static int batch_reserve_locked(npu_context_t *ctx, size_t size)
{
        if (ctx->batch_len + size > ctx->batch_cap) {
                size_t cap = ctx->batch_cap ? ctx->batch_cap : 64 << 10;
                while (cap < ctx->batch_len + size)
                        cap *= 2;
                uint8_t *nb = realloc(ctx->batch, cap);
                if (!nb)
                        return -ENOMEM;
                ctx->batch = nb;
                ctx->batch_cap = cap;
        }
        return 0;
}

npu_status_t npu_submit(npu_context_t *ctx, struct proto_rec *rec, uint64_t *ret_task)
{
        size_t size = proto_rec_size(rec);

        if (!size)
                return fail(NPU_ERR_INVALID, "task cannot be encoded");
        if (npu_forked(ctx, "submit"))
                return NPU_ERR_CONNECTION;
        pthread_mutex_lock(&ctx->mu);
        if (ctx->broken) {
                npu_ctx_unlock(ctx);
                return npu_fail_lost(ctx, NULL);
        }
        if (batch_reserve_locked(ctx, size) < 0) {
                npu_ctx_unlock(ctx);
                return fail(NPU_ERR_SYSTEM, "out of memory");
        }
        rec->seq = ++ctx->next_seq;
        proto_rec_encode(rec, ctx->batch + ctx->batch_len);
        ctx->batch_len += size;
        if (ret_task)
                *ret_task = rec->seq;
        int e = ctx->batch_len >= BATCH_FLUSH_BYTES ? npu_flush_locked(ctx) : 0;
        npu_ctx_unlock(ctx);
        return e < 0 ? npu_fail_lost(ctx, NULL) : NPU_OK;
}

NPU_EXPORT npu_status_t npu_flush(npu_context_t *ctx)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_flush: NULL context");
        if (npu_forked(ctx, "npu_flush"))
                return NPU_ERR_CONNECTION;
        pthread_mutex_lock(&ctx->mu);
        int e = ctx->broken ? -EPIPE : npu_flush_locked(ctx);
        npu_ctx_unlock(ctx);
        return e < 0 ? npu_fail_lost(ctx, NULL) : NPU_OK;
}

static npu_status_t copy_async(npu_context_t *ctx, npu_stream_t stream, uint8_t dkind, uint32_t dst,
                               uint64_t doff, uint8_t skind, uint32_t src, uint64_t soff,
                               uint64_t size, uint64_t *ret_task)
{
        struct proto_rec rec; /* only the members of the type are read: no 5 KB clear */

        rec.type = PROTO_REC_COPY;
        rec.stream = stream.id;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "copy: NULL context");
        rec.copy.dst_kind = dkind;
        rec.copy.src_kind = skind;
        rec.copy.dst = dst;
        rec.copy.src = src;
        rec.copy.dst_off = doff;
        rec.copy.src_off = soff;
        rec.copy.len = size;
        return npu_submit(ctx, &rec, ret_task);
}

NPU_EXPORT npu_status_t npu_memcpy_h2d_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t dst,
                                             uint64_t dst_offset, npu_region_t src, uint64_t src_offset,
                                             uint64_t size, uint64_t *ret_task)
{
        return copy_async(ctx, stream, PROTO_MEM_BUFFER, dst.id, dst_offset, PROTO_MEM_REGION,
                          src.id, src_offset, size, ret_task);
}

NPU_EXPORT npu_status_t npu_memcpy_d2h_async(npu_context_t *ctx, npu_stream_t stream, npu_region_t dst,
                                             uint64_t dst_offset, npu_buffer_t src, uint64_t src_offset,
                                             uint64_t size, uint64_t *ret_task)
{
        return copy_async(ctx, stream, PROTO_MEM_REGION, dst.id, dst_offset, PROTO_MEM_BUFFER,
                          src.id, src_offset, size, ret_task);
}

NPU_EXPORT npu_status_t npu_memcpy_d2d_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t dst,
                                             uint64_t dst_offset, npu_buffer_t src, uint64_t src_offset,
                                             uint64_t size, uint64_t *ret_task)
{
        return copy_async(ctx, stream, PROTO_MEM_BUFFER, dst.id, dst_offset, PROTO_MEM_BUFFER,
                          src.id, src_offset, size, ret_task);
}

NPU_EXPORT npu_status_t npu_memset_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t buf,
                                         uint64_t offset, int value, uint64_t size, uint64_t *ret_task)
{
        struct proto_rec rec; /* only the members of the type are read: no 5 KB clear */

        rec.type = PROTO_REC_MEMSET;
        rec.stream = stream.id;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_memset_async: NULL context");
        rec.memset.buf = buf.id;
        rec.memset.value = (uint8_t)value;
        rec.memset.off = offset;
        rec.memset.len = size;
        return npu_submit(ctx, &rec, ret_task);
}

NPU_EXPORT npu_status_t npu_free_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t buf,
                                       uint64_t *ret_task)
{
        struct proto_rec rec; /* only the members of the type are read: no 5 KB clear */

        rec.type = PROTO_REC_FREE;
        rec.stream = stream.id;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_free_async: NULL context");
        rec.free.buf = buf.id;
        return npu_submit(ctx, &rec, ret_task);
}

#define OP_CACHE_MAX 4096 /* names beyond it (a client inventing names) go by name */
#define OP_ABSENT (-2)

/* FNV-1a, never 0 (0 marks an empty slot). The names are the caller's own: no need for a
 * keyed hash. */
static uint32_t op_hash(const char *name, size_t len)
{
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (uint8_t)name[i]) * 16777619u;
        return h ? h : 1;
}

static struct op_ent *op_slot_locked(npu_context_t *ctx, const char *name, size_t len, uint32_t hash)
{
        size_t mask = ctx->ops_cap - 1;
        for (size_t i = hash & mask;; i = (i + 1) & mask) {
                struct op_ent *e = &ctx->ops[i];
                if (!e->hash || (e->hash == hash && e->len == len && memcmp(e->name, name, len) == 0))
                        return e;
        }
}

/* The cached id, -1 for a name npud does not know, OP_ABSENT when not resolved yet. */
static int op_find_locked(npu_context_t *ctx, const char *name, size_t len, uint32_t hash)
{
        if (!ctx->ops_cap)
                return OP_ABSENT;
        struct op_ent *e = op_slot_locked(ctx, name, len, hash);
        return e->hash ? e->id : OP_ABSENT;
}

/* Best effort: when the table cannot grow the name is simply resolved again next time. */
static void op_store_locked(npu_context_t *ctx, const char *name, size_t len, uint32_t hash, int id)
{
        if (ctx->ops_count >= OP_CACHE_MAX)
                return;
        if (2 * (ctx->ops_count + 1) > ctx->ops_cap) {
                size_t cap = ctx->ops_cap ? 2 * ctx->ops_cap : 64;
                struct op_ent *old = ctx->ops, *nt = calloc(cap, sizeof(*nt));
                size_t oldcap = ctx->ops_cap;
                if (!nt)
                        return;
                ctx->ops = nt;
                ctx->ops_cap = cap;
                for (size_t i = 0; i < oldcap; i++)
                        if (old[i].hash)
                                *op_slot_locked(ctx, old[i].name, old[i].len, old[i].hash) = old[i];
                free(old);
        }
        struct op_ent *e = op_slot_locked(ctx, name, len, hash);
        if (e->hash)
                return; /* another thread resolved it meanwhile */
        e->hash = hash;
        e->id = id;
        e->len = (uint8_t)len;
        memcpy(e->name, name, len);
        ctx->ops_count++;
}

/* Ask npud for the id of an operator (once per name and context). Returns the id, -1 when
 * npud does not know the name (launches keep naming it, so they fail as they always have),
 * or OP_ABSENT when the answer could not be had (the launch then goes by name and the
 * next one asks again). The caller does not hold mu. */
static int op_resolve(npu_context_t *ctx, const char *name, size_t len, uint32_t hash)
{
        json_t *res = NULL, *ent, *id;
        int ret = OP_ABSENT;

        if (npu_call(ctx, "op_resolve", json_pack("{s:[s]}", "names", name), &res) != NPU_OK)
                return OP_ABSENT;
        ent = json_array_get(json_object_get(res, "ops"), 0);
        id = json_object_get(ent, "id");
        if (json_is_null(id))
                ret = -1;
        else if (json_is_integer(id) && json_integer_value(id) >= 0 &&
                 json_integer_value(id) <= UINT16_MAX)
                ret = (int)json_integer_value(id);
        json_decref(res);
        if (ret != OP_ABSENT) {
                pthread_mutex_lock(&ctx->mu);
                op_store_locked(ctx, name, len, hash, ret);
                npu_ctx_unlock(ctx);
        }
        return ret;
}

/* The record is written straight into the batch (no struct proto_rec, which is sized for a
 * graph run's 64 tensors), and carries the operator's registry id once the name has been
 * resolved: npud then indexes its registry instead of searching it by name. */
NPU_EXPORT npu_status_t npu_launch(npu_context_t *ctx, npu_stream_t stream, const char *op,
                                   const npu_tensor_t *inputs, int ninputs,
                                   const npu_tensor_t *outputs, int noutputs,
                                   const npu_attr_t *attrs, int nattrs, uint64_t *ret_task)
{
        size_t oplen, size;
        uint32_t hash = 0;
        int id = -1;
        uint8_t *p;

        if (!ctx || !op)
                return fail(NPU_ERR_INVALID, "npu_launch: NULL argument");
        oplen = strnlen(op, PROTO_REC_OP_NAME);
        if (oplen == 0 || oplen >= PROTO_REC_OP_NAME)
                return fail(NPU_ERR_INVALID, "npu_launch: operator name must be 1 to %d characters",
                            PROTO_REC_OP_NAME - 1);
        if (ninputs < 0 || noutputs < 0 || nattrs < 0 || ninputs + noutputs > PROTO_REC_MAX_TENSORS ||
            nattrs > PROTO_REC_MAX_ATTRS || (ninputs && !inputs) || (noutputs && !outputs) ||
            (nattrs && !attrs))
                return fail(NPU_ERR_INVALID, "npu_launch: %s: bad number of inputs, outputs or attributes", op);
        /* Everything is checked before the record is started: nothing fails half-written. */
        for (int i = 0; i < ninputs + noutputs; i++) {
                const npu_tensor_t *t = i < ninputs ? &inputs[i] : &outputs[i - ninputs];
                if (t->ndim < 0 || t->ndim > NPU_MAX_DIMS)
                        return fail(NPU_ERR_INVALID, "npu_launch: %s: tensor %d has %d dimensions", op, i, t->ndim);
        }
        for (int i = 0; i < nattrs; i++)
                if (!attrs[i].name || !*attrs[i].name || strnlen(attrs[i].name, PROTO_REC_OP_NAME) >= PROTO_REC_OP_NAME)
                        return fail(NPU_ERR_INVALID, "npu_launch: %s: attribute %d has a bad name", op, i);
        if (npu_forked(ctx, "npu_launch"))
                return NPU_ERR_CONNECTION;
        if (ctx->version >= PROTO_VERSION_OP_ID)
                hash = op_hash(op, oplen);
        pthread_mutex_lock(&ctx->mu);
        if (hash) {
                id = op_find_locked(ctx, op, oplen, hash);
                if (id == OP_ABSENT) {
                        npu_ctx_unlock(ctx);
                        id = op_resolve(ctx, op, oplen, hash);
                        pthread_mutex_lock(&ctx->mu);
                }
        }
        size = proto_launch_size(id >= 0, (unsigned)(ninputs + noutputs), (unsigned)nattrs);
        if (ctx->broken) {
                npu_ctx_unlock(ctx);
                return npu_fail_lost(ctx, NULL);
        }
        if (batch_reserve_locked(ctx, size) < 0) {
                npu_ctx_unlock(ctx);
                return fail(NPU_ERR_SYSTEM, "out of memory");
        }
        uint64_t seq = ++ctx->next_seq;
        p = proto_launch_begin(ctx->batch + ctx->batch_len, size, seq, stream.id, id >= 0 ? NULL : op,
                               id >= 0 ? (uint16_t)id : 0, (uint8_t)ninputs, (uint8_t)noutputs,
                               (uint8_t)nattrs);
        for (int i = 0; i < ninputs + noutputs; i++) {
                const npu_tensor_t *t = i < ninputs ? &inputs[i] : &outputs[i - ninputs];
                p = proto_launch_put_tensor(p, t->buf.id, (uint8_t)t->dtype, (uint8_t)t->ndim,
                                            t->offset, t->dims);
        }
        for (int i = 0; i < nattrs; i++)
                p = proto_launch_put_attr(p, attrs[i].name, attrs[i].is_float ? 2 : 1, attrs[i].i,
                                          attrs[i].f);
        ctx->batch_len += size;
        if (ret_task)
                *ret_task = seq;
        int e = ctx->batch_len >= BATCH_FLUSH_BYTES ? npu_flush_locked(ctx) : 0;
        npu_ctx_unlock(ctx);
        return e < 0 ? npu_fail_lost(ctx, NULL) : NPU_OK;
}

/* ---- streams and events ---- */

NPU_EXPORT npu_status_t npu_stream_create(npu_context_t *ctx, int device, int priority,
                                          npu_stream_t *ret_stream)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret_stream || device < NPU_DEVICE_ANY || priority < 0 || priority > 7)
                return fail(NPU_ERR_INVALID, "npu_stream_create: invalid argument (priority 0-7)");
        st = npu_call(ctx, "stream_create", json_pack("{s:i, s:i}", "device", device, "priority", priority), &res);
        if (st == NPU_OK)
                st = npu_get_u32(res, "stream", &ret_stream->id);
        if (st == NPU_OK) {
                json_t *dv = json_object_get(res, "device");
                map_set(ctx, &ctx->stream_device, &ctx->stream_device_cap, ret_stream->id,
                        json_is_integer(dv) ? (int)json_integer_value(dv) : device);
        }
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_stream_device(npu_context_t *ctx, npu_stream_t stream, int *ret_device)
{
        if (!ctx || !ret_device)
                return fail(NPU_ERR_INVALID, "npu_stream_device: NULL argument");
        int dev = map_get(ctx, &ctx->stream_device, &ctx->stream_device_cap, stream.id);
        if (dev < 0)
                return fail(NPU_ERR_BAD_HANDLE, "npu_stream_device: stream %u was not created by this context",
                            stream.id);
        *ret_device = dev;
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_stream_set_deadline(npu_context_t *ctx, npu_stream_t stream,
                                                uint64_t deadline_us)
{
        if (!ctx || deadline_us > 3600ull * 1000000)
                return fail(NPU_ERR_INVALID, "npu_stream_set_deadline: invalid argument (at most 1 hour)");
        return npu_call(ctx, "stream_set_deadline",
                    json_pack("{s:I, s:I}", "stream", (json_int_t)stream.id, "deadline_us",
                              (json_int_t)deadline_us), NULL);
}

NPU_EXPORT npu_status_t npu_stream_destroy(npu_context_t *ctx, npu_stream_t stream)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_stream_destroy: NULL context");
        npu_status_t st = npu_call(ctx, "stream_destroy", json_pack("{s:I}", "stream", (json_int_t)stream.id), NULL);
        if (st == NPU_OK) /* later calls naming it are refused here (npu_stream_notify) */
                map_set(ctx, &ctx->stream_device, &ctx->stream_device_cap, stream.id, -1);
        return st;
}

/* The params of a wait (object: an empty one may be created), with the CPU this thread runs
 * on where npud takes it (session version 5): npud then writes the reply from that CPU, and
 * waking this thread costs no interrupt across CPUs. */
static json_t *wait_params(npu_context_t *ctx, json_t *params, int object)
{
        int cpu = ctx->version >= PROTO_VERSION_WAIT_CPU ? sched_getcpu() : -1;

        if (cpu < 0)
                return params;
        if (!params && object)
                params = json_object();
        if (params)
                json_object_set_new(params, "cpu", json_integer(cpu));
        return params;
}

NPU_EXPORT npu_status_t npu_stream_synchronize(npu_context_t *ctx, npu_stream_t stream)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_stream_synchronize: NULL context");
        return npu_call(ctx, "stream_synchronize",
                        wait_params(ctx, json_pack("{s:I}", "stream", (json_int_t)stream.id), 0), NULL);
}

NPU_EXPORT npu_status_t npu_synchronize(npu_context_t *ctx)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_synchronize: NULL context");
        return npu_call(ctx, "synchronize", wait_params(ctx, NULL, 1), NULL);
}

NPU_EXPORT npu_status_t npu_event_create(npu_context_t *ctx, npu_event_t *ret_event)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret_event)
                return fail(NPU_ERR_INVALID, "npu_event_create: NULL argument");
        st = npu_call(ctx, "event_create", NULL, &res);
        if (st == NPU_OK)
                st = npu_get_u32(res, "event", &ret_event->id);
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_event_destroy(npu_context_t *ctx, npu_event_t event)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_event_destroy: NULL context");
        return npu_call(ctx, "event_destroy", json_pack("{s:I}", "event", (json_int_t)event.id), NULL);
}

static npu_status_t event_task(npu_context_t *ctx, int type, npu_event_t event, npu_stream_t stream)
{
        struct proto_rec rec; /* only the members of the type are read: no 5 KB clear */

        rec.type = (uint16_t)type;
        rec.stream = stream.id;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "event: NULL context");
        rec.event.event = event.id;
        return npu_submit(ctx, &rec, NULL);
}

NPU_EXPORT npu_status_t npu_event_record(npu_context_t *ctx, npu_event_t event, npu_stream_t stream)
{
        return event_task(ctx, PROTO_REC_EVENT_RECORD, event, stream);
}

NPU_EXPORT npu_status_t npu_stream_wait_event(npu_context_t *ctx, npu_stream_t stream, npu_event_t event)
{
        return event_task(ctx, PROTO_REC_STREAM_WAIT, event, stream);
}

NPU_EXPORT npu_status_t npu_event_query(npu_context_t *ctx, npu_event_t event)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_event_query: NULL context");
        st = npu_call(ctx, "event_query", json_pack("{s:I}", "event", (json_int_t)event.id), &res);
        if (st == NPU_OK && !json_is_true(json_object_get(res, "complete")))
                st = fail(NPU_ERR_NOT_READY, "event not complete");
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_event_synchronize(npu_context_t *ctx, npu_event_t event)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_event_synchronize: NULL context");
        return npu_call(ctx, "event_synchronize",
                        wait_params(ctx, json_pack("{s:I}", "event", (json_int_t)event.id), 0), NULL);
}

NPU_EXPORT npu_status_t npu_event_elapsed_ms(npu_context_t *ctx, npu_event_t start, npu_event_t end,
                                             float *ret_ms)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret_ms)
                return fail(NPU_ERR_INVALID, "npu_event_elapsed_ms: NULL argument");
        st = npu_call(ctx, "event_elapsed", json_pack("{s:I, s:I}", "start", (json_int_t)start.id,
                                                  "end", (json_int_t)end.id), &res);
        if (st == NPU_OK) {
                json_t *ms = json_object_get(res, "ms");
                if (!json_is_number(ms))
                        st = fail(NPU_ERR_PROTOCOL, "event_elapsed: reply lacks 'ms'");
                else
                        *ret_ms = (float)json_number_value(ms);
        }
        json_decref(res);
        return st;
}

/* ---- synchronous operations on a library-internal stream per device ---- */

/* The stream's synchronize reports the first failure on it since the last one, whoever queued
 * the failing task: so every synchronous operation (submit + synchronize) holds stage_mu from
 * its submission to its synchronize, and another thread's failed memset never fails this
 * thread's copy (nor is its error consumed by it). Caller holds stage_mu. */
static npu_status_t internal_stream_locked(npu_context_t *ctx, int device, npu_stream_t *ret)
{
        npu_status_t st = NPU_OK;

        if (device < 0 || device >= ctx->ndevices)
                return fail(NPU_ERR_BAD_HANDLE, "buffer was not allocated through this context");
        if (!ctx->internal_streams[device]) {
                npu_stream_t s;
                st = npu_stream_create(ctx, device, 0, &s);
                if (st == NPU_OK)
                        ctx->internal_streams[device] = s.id;
        }
        ret->id = ctx->internal_streams[device];
        return st;
}

/* Caller holds stage_mu. */
static npu_status_t stage_get(npu_context_t *ctx)
{
        npu_region_t r;

        if (ctx->stage_ptr)
                return NPU_OK;
        npu_status_t st = npu_host_alloc(ctx, STAGE_SIZE, &ctx->stage_ptr, &r);
        if (st == NPU_OK)
                ctx->stage_region = r.id;
        return st;
}

NPU_EXPORT npu_status_t npu_memset(npu_context_t *ctx, npu_buffer_t buf, uint64_t offset, int value,
                                   uint64_t size)
{
        npu_stream_t s;
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_memset: NULL context");
        if (npu_forked(ctx, "npu_memset"))
                return NPU_ERR_CONNECTION;
        pthread_mutex_lock(&ctx->stage_mu);
        st = internal_stream_locked(ctx, npu_buffer_device(ctx, buf), &s);
        if (st == NPU_OK)
                st = npu_memset_async(ctx, s, buf, offset, value, size, NULL);
        if (st == NPU_OK)
                st = npu_stream_synchronize(ctx, s);
        pthread_mutex_unlock(&ctx->stage_mu);
        return st;
}

NPU_EXPORT npu_status_t npu_memcpy_device(npu_context_t *ctx, npu_buffer_t dst, uint64_t dst_offset,
                                          npu_buffer_t src, uint64_t src_offset, uint64_t size)
{
        npu_stream_t s;
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_memcpy_device: NULL context");
        if (npu_forked(ctx, "npu_memcpy_device"))
                return NPU_ERR_CONNECTION;
        pthread_mutex_lock(&ctx->stage_mu);
        st = internal_stream_locked(ctx, npu_buffer_device(ctx, dst), &s);
        if (st == NPU_OK)
                st = npu_memcpy_d2d_async(ctx, s, dst, dst_offset, src, src_offset, size, NULL);
        if (st == NPU_OK)
                st = npu_stream_synchronize(ctx, s);
        pthread_mutex_unlock(&ctx->stage_mu);
        return st;
}

static npu_status_t staged_copy(npu_context_t *ctx, int to_device, npu_buffer_t buf, uint64_t off,
                                void *host, uint64_t size)
{
        npu_stream_t s;
        npu_status_t st;

        if (!ctx || (!host && size))
                return fail(NPU_ERR_INVALID, "memcpy: NULL argument");
        if (off > UINT64_MAX - size)
                return fail(NPU_ERR_OUT_OF_RANGE, "memcpy: offset + size overflows");
        if (npu_forked(ctx, "memcpy"))
                return NPU_ERR_CONNECTION;
        pthread_mutex_lock(&ctx->stage_mu);
        st = internal_stream_locked(ctx, npu_buffer_device(ctx, buf), &s);
        if (st == NPU_OK)
                st = stage_get(ctx);
        for (uint64_t done = 0; st == NPU_OK && done < size;) {
                uint64_t n = size - done < STAGE_SIZE ? size - done : STAGE_SIZE;
                npu_region_t r = { ctx->stage_region };
                if (to_device) {
                        memcpy(ctx->stage_ptr, (uint8_t *)host + done, n);
                        st = npu_memcpy_h2d_async(ctx, s, buf, off + done, r, 0, n, NULL);
                } else
                        st = npu_memcpy_d2h_async(ctx, s, r, 0, buf, off + done, n, NULL);
                if (st == NPU_OK)
                        st = npu_stream_synchronize(ctx, s);
                if (st == NPU_OK && !to_device)
                        memcpy((uint8_t *)host + done, ctx->stage_ptr, n);
                done += n;
        }
        pthread_mutex_unlock(&ctx->stage_mu);
        return st;
}

NPU_EXPORT npu_status_t npu_memcpy_to_device(npu_context_t *ctx, npu_buffer_t dst, uint64_t dst_offset,
                                             const void *src, uint64_t size)
{
        return staged_copy(ctx, 1, dst, dst_offset, (void *)src, size);
}

NPU_EXPORT npu_status_t npu_memcpy_from_device(npu_context_t *ctx, void *dst, npu_buffer_t src,
                                               uint64_t src_offset, uint64_t size)
{
        return staged_copy(ctx, 0, src, src_offset, dst, size);
}


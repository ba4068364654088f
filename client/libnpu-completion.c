/* libnpu completions without polling: notify points and host callbacks on streams, and
 * npud's device notices, delivered through a queue the program polls.
 *
 * The fd the program polls is an epoll instance watching two things: an eventfd, signalled
 * while the queue holds completions, and the connection's socket. The connection has one
 * reader at a time (leader-follower, libnpu.c); a program sitting in its epoll loop makes no
 * call that would read, so a notification waiting in the socket wakes it, and
 * npu_completion_next reads the socket without blocking when no other call is reading (one
 * thread wakeup per completion, as for a reply). A completion read by a call of another
 * thread goes to the queue and signals the eventfd.
 *
 * Host callbacks must run while the program makes no call at all, so the first one starts a
 * reader thread that takes the reader role whenever nobody else holds it. It gives the role up
 * after each read (a waiting call may then read its own reply next) and while it runs a host
 * callback, so that the callback's own libnpu calls can read their replies. From then on the
 * socket leaves the epoll set: the thread reads it, and the eventfd alone wakes the program.
 * Everything below is under ctx->mu unless it says otherwise. */
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/types.h>

#include "client/libnpu-internal.h"
#include "proto/completion.h"

/* Unread device notices kept; past it the oldest one is dropped and counted. They are kept
 * from the connection on, before the program first asks for completions: a server that
 * creates its completion fd after loading its models still learns that a device failed
 * meanwhile (the queue then exists without its fds, which the first call of the completion
 * API creates). */
#define UNSOLICITED_MAX 256

struct compl_node {
        struct compl_node *next;
        int unsolicited;
        npu_completion_t c;
};

/* A host callback: registered before its record is sent, found again by the tag npud echoes
 * (its address, compared with the registered ones, never dereferenced unchecked). */
struct host_func {
        struct host_func *next;
        npu_host_func_t fn;
        void *user;
        uint32_t stream;
        uint64_t task;
        npu_status_t status;
        int ack; /* npud holds the stream until host_func_done */
};

struct npu_compl {
        int epfd;      /* the program's fd: watches efd, and the socket until the thread runs;
                        * -1 until the program first asks (only notices are queued then) */
        int efd;       /* readable while the queue is not empty or the connection is lost */
        int signalled; /* efd's counter is not 0 */
        struct compl_node *head, *tail;
        unsigned unsolicited;
        uint64_t dropped; /* device notices dropped, the oldest first, past UNSOLICITED_MAX */
        struct host_func *funcs;              /* registered, their point not reached yet */
        struct host_func *ready, *ready_tail; /* reached: for the reader thread to run */
        pthread_t thread;
        int thread_started, stop;
        int in_next; /* npu_completion_next is reading: no eventfd write for what it takes */
        int skip_read; /* npu_completion_next's last read emptied the socket (see there) */
        pid_t pid; /* the process that created it: a forked child has no reader thread */
};

static struct npu_compl *compl_alloc(void);

static void efd_signal_locked(struct npu_compl *c)
{
        uint64_t one = 1;

        if (c->efd >= 0 && !c->signalled && write(c->efd, &one, sizeof(one)) == sizeof(one))
                c->signalled = 1;
}

static void efd_clear_locked(npu_context_t *ctx, struct npu_compl *c)
{
        uint64_t v;

        if (c->signalled && !c->head && !ctx->broken && read(c->efd, &v, sizeof(v)) == sizeof(v))
                c->signalled = 0;
}

static void push_locked(struct npu_compl *c, const npu_completion_t *in, int unsolicited)
{
        struct compl_node *n;

        if (unsolicited && c->unsolicited >= UNSOLICITED_MAX) {
                /* the newest says how the device is now: the oldest unread one goes */
                struct compl_node **pp = &c->head, *prev = NULL;
                while (*pp && !(*pp)->unsolicited) {
                        prev = *pp;
                        pp = &(*pp)->next;
                }
                if (*pp) {
                        struct compl_node *old = *pp;
                        *pp = old->next;
                        if (c->tail == old)
                                c->tail = prev;
                        free(old);
                        c->unsolicited--;
                }
                c->dropped++;
        }
        if (!(n = malloc(sizeof(*n))))
                return; /* a notify the program waits for is then lost: memory is gone anyway */
        n->next = NULL;
        n->unsolicited = unsolicited;
        n->c = *in;
        if (c->tail)
                c->tail->next = n;
        else
                c->head = n;
        c->tail = n;
        c->unsolicited += unsolicited != 0;
        if (!c->in_next) /* npu_completion_next reading signals only what it leaves queued */
                efd_signal_locked(c);
}

static uint64_t json_u64(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static void copy_string(char *dst, size_t size, json_t *v)
{
        snprintf(dst, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* A completion of a notify point: a host callback to run, or a queue entry. */
static void on_completion_locked(npu_context_t *ctx, struct npu_compl *c,
                                 const struct proto_completion *pc)
{
        npu_completion_t e = { .size = sizeof(e), .kind = NPU_COMPLETION_NOTIFY };
        size_t n = pc->message_len < sizeof(e.message) - 1 ? pc->message_len : sizeof(e.message) - 1;

        e.status = (npu_status_t)pc->code;
        e.stream.id = pc->stream;
        e.task = pc->task;
        e.tag = pc->tag;
        e.error_task = pc->error_task;
        memcpy(e.message, pc->message, n);
        e.message[n] = 0;
        if (pc->flags & PROTO_COMPLETION_EVENT) { /* npu_event_notify */
                e.kind = NPU_COMPLETION_EVENT;
                e.event.id = pc->event;
                push_locked(c, &e, 0);
                return;
        }
        if (pc->flags & PROTO_COMPLETION_HOST_FUNC) {
                for (struct host_func **pp = &c->funcs; *pp; pp = &(*pp)->next) {
                        struct host_func *h = *pp;
                        if ((uint64_t)(uintptr_t)h != e.tag)
                                continue;
                        *pp = h->next;
                        h->next = NULL;
                        h->status = e.status;
                        h->task = e.task;
                        h->ack = (pc->flags & PROTO_COMPLETION_HELD) != 0;
                        if (c->ready_tail)
                                c->ready_tail->next = h;
                        else
                                c->ready = h;
                        c->ready_tail = h;
                        pthread_cond_broadcast(&ctx->cv); /* the reader thread may sleep */
                        return;
                }
                return;
        }
        push_locked(c, &e, 0);
}

/* A "completion" notification of a session before version 4, as the frame would carry it. */
static void completion_from_json(json_t *d, struct proto_completion *pc)
{
        json_t *code = json_object_get(d, "code"), *msg = json_object_get(d, "message");

        pc->code = json_is_integer(code) ? (int32_t)json_integer_value(code) : NPU_ERR_PROTOCOL;
        pc->stream = (uint32_t)json_u64(d, "stream");
        pc->task = json_u64(d, "task");
        pc->tag = json_u64(d, "tag");
        pc->error_task = json_u64(d, "error_task");
        pc->message = json_is_string(msg) ? json_string_value(msg) : "";
        pc->message_len = strlen(pc->message);
        pc->flags = 0;
        if (json_is_integer(json_object_get(d, "event"))) {
                pc->flags |= PROTO_COMPLETION_EVENT;
                pc->event = (uint32_t)json_u64(d, "event");
        }
        if (json_is_true(json_object_get(d, "host_func")))
                pc->flags |= PROTO_COMPLETION_HOST_FUNC;
        if (json_is_true(json_object_get(d, "held")))
                pc->flags |= PROTO_COMPLETION_HELD;
}

/* A COMPLETION frame (session version 4): no JSON to parse on the request loop's path. */
void npu_completion_frame_locked(npu_context_t *ctx, const uint8_t *body, size_t len)
{
        struct proto_completion pc;

        if (ctx->compl && proto_completion_decode(body, len, &pc) == 0)
                on_completion_locked(ctx, ctx->compl, &pc);
}

void npu_notify_frame_locked(npu_context_t *ctx, const uint8_t *body, size_t len)
{
        struct npu_compl *c = ctx->compl;
        char err[64];
        json_t *msg, *d;
        const char *ev;

        if (!(msg = proto_json_parse(body, len, err, sizeof(err))))
                return;
        ev = json_string_value(json_object_get(msg, "event"));
        d = json_object_get(msg, "data");
        if (!ev || !json_is_object(d)) {
                json_decref(msg);
                return;
        }
        /* the first notice makes the queue, fds aside (the program did not ask for them) */
        if (!c && strcmp(ev, "completion") != 0 && (c = compl_alloc()))
                ctx->compl = c;
        if (!c) {
                json_decref(msg);
                return; /* a completion nobody asked for, or no memory for the queue */
        }
        if (strcmp(ev, "completion") == 0) {
                struct proto_completion pc = { 0 };
                completion_from_json(d, &pc);
                on_completion_locked(ctx, c, &pc);
        } else if (strcmp(ev, "device-health") == 0) {
                npu_completion_t e = { .size = sizeof(e), .kind = NPU_COMPLETION_DEVICE_HEALTH };
                e.device = (int)json_u64(d, "device");
                e.draining = json_is_true(json_object_get(d, "draining"));
                copy_string(e.health, sizeof(e.health), json_object_get(d, "health"));
                push_locked(c, &e, 1);
        } else if (strcmp(ev, "memory-low") == 0) {
                npu_completion_t e = { .size = sizeof(e), .kind = NPU_COMPLETION_MEMORY_LOW };
                e.device = (int)json_u64(d, "device");
                e.free_bytes = json_u64(d, "free");
                e.total_bytes = json_u64(d, "total");
                push_locked(c, &e, 1);
        }
        json_decref(msg);
}

/* Runs host callbacks and reads while nobody else does, until the connection is lost or the
 * context is disconnected. */
static void *reader_main(void *arg)
{
        npu_context_t *ctx = arg;
        struct npu_compl *c = ctx->compl;

        pthread_mutex_lock(&ctx->mu);
        for (;;) {
                struct host_func *h = c->ready;
                if (h) {
                        c->ready = h->next;
                        if (!c->ready)
                                c->ready_tail = NULL;
                        npu_ctx_unlock(ctx);
                        h->fn(h->user, h->status);
                        if (h->ack) /* a failure here means the connection went: nothing held */
                                npu_call(ctx, "host_func_done",
                                         json_pack("{s:I, s:I}", "stream", (json_int_t)h->stream,
                                                   "task", (json_int_t)h->task), NULL);
                        free(h);
                        pthread_mutex_lock(&ctx->mu);
                        continue;
                }
                if (ctx->broken || c->stop) {
                        if (c->funcs) { /* their notices can no longer come: run them, failed */
                                c->ready = c->funcs;
                                c->funcs = NULL;
                                for (h = c->ready; h; h = h->next) {
                                        h->status = NPU_ERR_CONNECTION;
                                        h->ack = 0;
                                        c->ready_tail = h;
                                }
                                continue;
                        }
                        if (ctx->broken)
                                efd_signal_locked(c);
                        break;
                }
                if (ctx->reader_active) {
                        ctx->cv_sleepers++;
                        npu_wakes_flush_locked(ctx); /* (the wait releases the lock) */
                        pthread_cond_wait(&ctx->cv, &ctx->mu);
                        ctx->cv_sleepers--;
                        continue;
                }
                npu_read_once_locked(ctx, NPU_READ_SLEEP); /* no reply is awaited: no spin */
                if (ctx->broken)
                        efd_signal_locked(c);
        }
        npu_ctx_unlock(ctx);
        return NULL;
}

/* The queue alone, without fds: what a device notice makes before the program asks. */
static struct npu_compl *compl_alloc(void)
{
        struct npu_compl *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->efd = c->epfd = -1;
        c->pid = getpid();
        return c;
}

/* The program's fds for a queue that may already hold notices; -1 with errno. */
static int compl_open(npu_context_t *ctx, struct npu_compl *c)
{
        struct epoll_event ev = { .events = EPOLLIN };

        c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (c->efd >= 0 && c->epfd >= 0 && epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &ev) == 0 &&
            epoll_ctl(c->epfd, EPOLL_CTL_ADD, ctx->fd, &ev) == 0) {
                if (c->head || ctx->broken)
                        efd_signal_locked(c); /* notices queued before: readable at once */
                return 0;
        }
        int e = errno;
        if (c->efd >= 0)
                close(c->efd);
        if (c->epfd >= 0)
                close(c->epfd);
        c->efd = c->epfd = -1;
        errno = e;
        return -1;
}

/* The completion queue, and the reader thread when thread; NULL with the message set. */
static struct npu_compl *compl_get(npu_context_t *ctx, const char *fn, int thread, npu_status_t *st)
{
        struct npu_compl *c;

        if (ctx->version < PROTO_VERSION_NOTIFY) {
                *st = fail(NPU_ERR_UNSUPPORTED, "%s: npud speaks session protocol version %d, "
                           "completions need version %d", fn, ctx->version, PROTO_VERSION_NOTIFY);
                return NULL;
        }
        pthread_mutex_lock(&ctx->mu);
        c = ctx->compl;
        if (c && c->pid != getpid()) {
                npu_ctx_unlock(ctx);
                *st = fail(NPU_ERR_INVALID, "%s: the context was created before fork(); a child "
                           "process connects anew", fn);
                return NULL;
        }
        if (!c)
                c = ctx->compl = compl_alloc();
        if (!c || (c->epfd < 0 && compl_open(ctx, c) < 0)) {
                npu_ctx_unlock(ctx);
                *st = fail(NPU_ERR_SYSTEM, "%s: cannot create the completion queue: %s", fn,
                           strerror(errno));
                return NULL;
        }
        if (thread && !c->thread_started) {
                sigset_t all, old;
                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits: no signals */
                int e = pthread_create(&c->thread, NULL, reader_main, ctx);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (e) {
                        npu_ctx_unlock(ctx);
                        *st = fail(NPU_ERR_SYSTEM, "%s: cannot start the reader thread: %s", fn,
                                   strerror(e));
                        return NULL;
                }
                c->thread_started = 1;
                /* the thread reads the socket from now on: it would only wake the program */
                epoll_ctl(c->epfd, EPOLL_CTL_DEL, ctx->fd, NULL);
        }
        npu_ctx_unlock(ctx);
        return c;
}

void npu_completion_shutdown(npu_context_t *ctx)
{
        struct npu_compl *c = ctx->compl;

        if (!c)
                return;
        if (c->thread_started && c->pid == getpid()) {
                pthread_mutex_lock(&ctx->mu);
                c->stop = 1;
                pthread_cond_broadcast(&ctx->cv);
                npu_ctx_unlock(ctx);
                shutdown(ctx->fd, SHUT_RDWR); /* ends a read in progress */
                if (pthread_equal(c->thread, pthread_self()))
                        pthread_detach(c->thread); /* npu.h forbids it; do not hang at least */
                else
                        pthread_join(c->thread, NULL);
        }
        while (c->head) {
                struct compl_node *n = c->head;
                c->head = n->next;
                free(n);
        }
        for (struct host_func *h = c->funcs, *next; h; h = next) { /* only in a child */
                next = h->next;
                free(h);
        }
        for (struct host_func *h = c->ready, *next; h; h = next) {
                next = h->next;
                free(h);
        }
        if (c->efd >= 0)
                close(c->efd);
        if (c->epfd >= 0)
                close(c->epfd);
        free(c);
        ctx->compl = NULL;
}

NPU_EXPORT npu_status_t npu_completion_fd(npu_context_t *ctx, int *ret_fd)
{
        npu_status_t st = NPU_OK;
        struct npu_compl *c;

        if (!ctx || !ret_fd)
                return fail(NPU_ERR_INVALID, "npu_completion_fd: NULL argument");
        if (!(c = compl_get(ctx, "npu_completion_fd", 0, &st)))
                return st;
        *ret_fd = c->epfd;
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_completion_next(npu_context_t *ctx, npu_completion_t *ret)
{
        struct compl_node *n;
        struct npu_compl *c;

        if (!ctx || !ret)
                return fail(NPU_ERR_INVALID, "npu_completion_next: NULL argument");
        if (ret->size < NPU_SIZE_V1(npu_completion_t, message))
                return fail(NPU_ERR_INVALID, "npu_completion_next: ret->size is %zu, set it to "
                            "sizeof(npu_completion_t)", ret->size);
        pthread_mutex_lock(&ctx->mu);
        c = ctx->compl;
        /* Nothing queued, and this call's previous read emptied the socket: a program that
         * polls the completion fd (c->epfd) drains the queue until NPU_ERR_NOT_READY and then
         * waits on the fd, so the read that would find the socket empty again is skipped once.
         * Whatever arrived since that read keeps the fd readable (the socket is in its epoll
         * set, level-triggered, until the reader thread runs), and the call after the wait
         * reads. That read is otherwise a system call returning EAGAIN on every request. */
        if (c && c->skip_read && !c->head && c->epfd >= 0 && !ctx->broken) {
                c->skip_read = 0;
                npu_ctx_unlock(ctx);
                return fail(NPU_ERR_NOT_READY, "npu_completion_next: no completion queued");
        }
        if (c)
                c->skip_read = 0;
        /* nothing queued: what the socket holds, unless another call or the thread reads it
         * (and so queues what it finds) */
        /* (a forked child reads nothing: the fork generation, not a getpid() call each time) */
        if ((c ? !c->head && !c->thread_started : 1) &&
            ctx->fork_gen == __atomic_load_n(&npu_fork_gen, __ATOMIC_RELAXED) &&
            !ctx->reader_active && !ctx->broken) {
                uint64_t before = ctx->reader.received;
                if (c)
                        c->in_next = 1;
                npu_read_once_locked(ctx, 0);
                if (c)
                        c->in_next = 0;
                c = ctx->compl; /* a notice read now may have made it */
                if (c && ctx->reader.received != before && ctx->reader.drained &&
                    !proto_reader_has_frame(&ctx->reader))
                        c->skip_read = 1;
                /* the caller takes the head now; the program's fd wakes for the rest only */
                if (c && c->head && c->head->next)
                        efd_signal_locked(c);
        }
        if (ctx->broken && c)
                efd_signal_locked(c);
        if (!c || !c->head) {
                int broken = ctx->broken;
                npu_ctx_unlock(ctx);
                if (broken)
                        return npu_fail_lost(ctx, "npu_completion_next");
                return fail(NPU_ERR_NOT_READY, "npu_completion_next: no completion queued");
        }
        n = c->head;
        c->head = n->next;
        if (!c->head)
                c->tail = NULL;
        c->unsolicited -= n->unsolicited != 0;
        efd_clear_locked(ctx, c);
        npu_ctx_unlock(ctx);
        size_t size = ret->size < sizeof(*ret) ? ret->size : sizeof(*ret);
        memcpy(ret, &n->c, size); /* a caller's older, smaller struct gets its own part */
        ret->size = size;
        free(n);
        return NPU_OK;
}

/* Checks shared by the two ways of asking for a notice on a stream. */
static npu_status_t stream_check(npu_context_t *ctx, npu_stream_t stream, const char *fn)
{
        int dev;

        if (npu_stream_device(ctx, stream, &dev) != NPU_OK)
                return fail(NPU_ERR_BAD_HANDLE, "%s: stream %u was not created by this context or "
                            "was destroyed", fn, stream.id);
        return NPU_OK;
}

static npu_status_t submit_notify(npu_context_t *ctx, npu_stream_t stream, uint64_t tag,
                                  uint32_t flags, uint64_t *ret_task)
{
        struct proto_rec rec; /* only the members of the type are read */
        npu_status_t st;

        rec.type = PROTO_REC_NOTIFY;
        rec.stream = stream.id;
        rec.notify.tag = tag;
        rec.notify.flags = flags;
        st = npu_submit(ctx, &rec, ret_task);
        if (st == NPU_OK)
                st = npu_flush(ctx); /* the program waits for it: it must not stay batched */
        return st;
}

NPU_EXPORT npu_status_t npu_stream_notify(npu_context_t *ctx, npu_stream_t stream, uint64_t tag,
                                          uint64_t *ret_task)
{
        npu_status_t st = NPU_OK;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_stream_notify: NULL context");
        if ((st = stream_check(ctx, stream, "npu_stream_notify")) != NPU_OK ||
            !compl_get(ctx, "npu_stream_notify", 0, &st))
                return st;
        return submit_notify(ctx, stream, tag, 0, ret_task);
}

NPU_EXPORT npu_status_t npu_launch_host_func(npu_context_t *ctx, npu_stream_t stream,
                                             npu_host_func_t fn, void *user, uint64_t *ret_task)
{
        npu_status_t st = NPU_OK;
        struct npu_compl *c;
        struct host_func *h;

        if (!ctx || !fn)
                return fail(NPU_ERR_INVALID, "npu_launch_host_func: NULL %s", ctx ? "function" : "context");
        if ((st = stream_check(ctx, stream, "npu_launch_host_func")) != NPU_OK ||
            !(c = compl_get(ctx, "npu_launch_host_func", 1, &st)))
                return st;
        if (!(h = calloc(1, sizeof(*h))))
                return fail(NPU_ERR_SYSTEM, "npu_launch_host_func: out of memory");
        h->fn = fn;
        h->user = user;
        h->stream = stream.id;
        /* registered before the record can be sent: its notice may come at once */
        pthread_mutex_lock(&ctx->mu);
        h->next = c->funcs;
        c->funcs = h;
        npu_ctx_unlock(ctx);
        st = submit_notify(ctx, stream, (uint64_t)(uintptr_t)h, PROTO_NOTIFY_HOLD, ret_task);
        if (st != NPU_OK) {
                /* not submitted, or the connection went (the reader thread then runs it) */
                pthread_mutex_lock(&ctx->mu);
                for (struct host_func **pp = &c->funcs; *pp; pp = &(*pp)->next)
                        if (*pp == h) {
                                *pp = h->next;
                                free(h);
                                break;
                        }
                npu_ctx_unlock(ctx);
        }
        return st;
}

NPU_EXPORT npu_status_t npu_completion_dropped(npu_context_t *ctx, uint64_t *ret_count)
{
        if (!ctx || !ret_count)
                return fail(NPU_ERR_INVALID, "npu_completion_dropped: NULL argument");
        pthread_mutex_lock(&ctx->mu);
        *ret_count = ctx->compl ? ctx->compl->dropped : 0;
        npu_ctx_unlock(ctx);
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_event_notify(npu_context_t *ctx, npu_event_t event, uint64_t tag)
{
        npu_status_t st = NPU_OK;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_event_notify: NULL context");
        if (!compl_get(ctx, "npu_event_notify", 0, &st))
                return st;
        /* the records before it must reach npud first, or the event's last record would be
         * an older one */
        if ((st = npu_flush(ctx)) != NPU_OK)
                return st;
        return npu_call(ctx, "event_notify",
                        json_pack("{s:I, s:I}", "event", (json_int_t)event.id, "tag", (json_int_t)tag),
                        NULL);
}

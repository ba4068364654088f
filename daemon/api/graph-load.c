/* graph_load's helper threads (see graph-load.h).
 *
 * The loop thread and the helpers meet in one mutex-protected place: the work queue (loads
 * handed to a helper) and the message list (allocation requests and finished loads going
 * back), plus a condition variable for each direction. A helper wakes the loop by writing
 * an eventfd that the loop watches as an ordinary libevent event, so no libevent call is
 * ever made off the loop thread (libevent here is built without its locking).
 *
 * A load is work no scheduler grants: its import, constant folding, tuning and step timing
 * run the kernels for up to tens of milliseconds. A best-effort tenant's loads therefore run
 * on helpers of their own at idle priority (SCHED_IDLE, which any other thread of the host
 * preempts), so that its loads, like its kernels, give way to a latency-critical client's
 * requests (npubench's isolation section loads the best-effort graphs every round). A thread
 * at idle priority may not rise again without privilege, so the two kinds never swap. */
#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "graph/compile.h"
#include "graph/steps.h"
#include "graph/exec.h"
#include "graph/onnx-import.h"
#include "ops/runctx.h"
#include "proto/errors.h"
#include "util/log.h"
#include "util/prio.h"
#include "daemon/exec/loopcpu.h"
#include "daemon/exec/mem.h"
#include "graph-load.h"
#include "npud.h"
#include "session.h"

#define GRAPH_LOAD_THREADS_MAX 64 /* of each kind */

static struct {
        /* Loop thread only. */
        struct graph_load *jobs, **jobs_tail; /* arrival order */
        uint32_t running;                     /* loads on helper threads */
        uint64_t bytes;                       /* their model bytes */
        struct event *wake_event;
        int efd;
        pthread_t threads[2][GRAPH_LOAD_THREADS_MAX]; /* [background] */
        int nthreads[2];
        int idle[2];                          /* helpers waiting for work (under mu) */
        /* Shared, under mu. */
        pthread_mutex_t mu;
        pthread_cond_t work_cv[2], alloc_cv;
        struct graph_load *work[2], **work_tail[2];
        struct graph_load *msgs;              /* newest first */
        int stopping;
} pool = {
        .efd = -1,
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .work_cv = { PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER },
        .alloc_cv = PTHREAD_COND_INITIALIZER,
};

static void wake_loop(void)
{
        uint64_t one = 1;

        /* Only EAGAIN can fail here (the counter is full), and then the loop is woken anyway. */
        if (write(pool.efd, &one, sizeof(one)) < 0) {
        }
}

/* Under mu: hand a message to the loop thread. */
static void post_locked(struct graph_load *j)
{
        j->qnext = pool.msgs;
        pool.msgs = j;
}

/* ---- helper threads ---- */

/* onnx_import_env.alloc: ask the loop thread and wait for its answer. */
static int helper_alloc(void *ctx, uint64_t size, void **ret, char *err, size_t errlen)
{
        struct graph_load *j = ctx;
        int rc;

        pthread_mutex_lock(&pool.mu);
        j->alloc_wanted = 1;
        j->alloc_size = size;
        post_locked(j);
        pthread_mutex_unlock(&pool.mu);
        wake_loop();
        pthread_mutex_lock(&pool.mu);
        while (!j->alloc_answered)
                pthread_cond_wait(&pool.alloc_cv, &pool.mu);
        rc = j->alloc_rc;
        if (rc)
                snprintf(err, errlen, "%s", j->alloc_err);
        else
                *ret = j->alloc_ptr;
        pthread_mutex_unlock(&pool.mu);
        return rc;
}

static void helper_run(struct graph_load *j)
{
        /* The compile passes fold constants with the operator kernels, which poll the run
         * context: a closed session or a stopping npud stops them early. */
        struct ops_runctx rctx = { .cancel = &j->cancel };
        struct onnx_import_env env = { .alloc = helper_alloc, .ctx = j };
        struct graph *g = NULL;
        unsigned flags = graph_compile_flags();
        int rc;

        ops_runctx_set(&rctx);
        rc = onnx_import(j->model, j->size, &env, &g, j->err, sizeof(j->err));
        munmap(j->model, j->size);
        j->model = NULL;
        if (!rc)
                rc = graph_check_static(g, j->err, sizeof(j->err));
        if (!rc) { /* after the weights' charge (helper_alloc's round trip) */
                g->pack_limit = j->pack_limit;
                graph_set_accumulate(g, j->accumulate);
        }
        /* Compile at load (graph/compile.h); NPUD_GRAPH_COMPILE=0 keeps the graph as
         * imported, for comparisons. */
        if (!rc && flags && graph_compile(g, flags, j->err, sizeof(j->err)) < 0)
                rc = atomic_load(&j->cancel) ? PROTO_E_CANCELLED : PROTO_E_NO_MEMORY;
        /* The steps a run is scheduled as (graph/steps.h); without them (memory short) a run
         * is one task, as before. */
        if (!rc && graph_steps_build(g, j->err, sizeof(j->err)) < 0) {
                g->steps = NULL;
                j->err[0] = 0;
        }
        ops_runctx_set(NULL);
        if (rc) {
                graph_free(g);
                g = NULL;
        }
        j->g = g;
        j->rc = rc;
}

static void *helper_main(void *arg)
{
        const int bg = (int)(intptr_t)arg;

        prio_normal(); /* started by the loop thread, whose priority is raised */
        loopcpu_thread_free(); /* and which may be kept on one CPU */
        pthread_setname_np(pthread_self(), bg ? "npud-load-bg" : "npud-load"); /* ps -L, top -H */
        if (bg && prio_idle() != 0)
                log_warn("graph_load: background helper: cannot lower its priority: %s", strerror(errno));
        pthread_mutex_lock(&pool.mu);
        for (;;) {
                struct graph_load *j;
                while (!pool.work[bg] && !pool.stopping) {
                        pool.idle[bg]++;
                        pthread_cond_wait(&pool.work_cv[bg], &pool.mu);
                        pool.idle[bg]--;
                }
                if (!(j = pool.work[bg]))
                        break;
                pool.work[bg] = j->qnext;
                if (!pool.work[bg])
                        pool.work_tail[bg] = &pool.work[bg];
                pthread_mutex_unlock(&pool.mu);
                helper_run(j);
                pthread_mutex_lock(&pool.mu);
                j->done = 1;
                post_locked(j);
                wake_loop();
        }
        pthread_mutex_unlock(&pool.mu);
        return NULL;
}

/* ---- loop thread ---- */

static void job_free(struct graph_load *j)
{
        if (j->model)
                munmap(j->model, j->size);
        graph_free(j->g);
        buffer_unref(j->weights); /* a closed session's charge ends with it */
        free(j);
}

static void jobs_remove(struct graph_load *j)
{
        for (struct graph_load **pp = &pool.jobs; *pp; pp = &(*pp)->next)
                if (*pp == j) {
                        *pp = j->next;
                        if (!*pp)
                                pool.jobs_tail = pp;
                        return;
                }
}

static int session_running(const struct session *s)
{
        for (const struct graph_load *j = pool.jobs; j; j = j->next)
                if (j->s == s && j->running)
                        return 1;
        return 0;
}

/* Start queued loads while threads and the byte limit allow, in arrival order; a session's
 * second load waits for its first. A load over the byte limit waits for the loads ahead of
 * it rather than letting smaller ones pass forever. */
static void admit(struct npud *d)
{
        const struct npud_limits *lim = &d->config.limits;
        uint32_t threads = lim->graph_load_threads < GRAPH_LOAD_THREADS_MAX ? lim->graph_load_threads
                                                                            : GRAPH_LOAD_THREADS_MAX;

        for (struct graph_load *j = pool.jobs; j && pool.running < threads; j = j->next) {
                if (j->running || session_running(j->s))
                        continue;
                if (pool.running && pool.bytes + j->size > lim->max_graph_load_bytes)
                        break;
                const int bg = j->background;
                pthread_mutex_lock(&pool.mu);
                if (!pool.idle[bg] && pool.nthreads[bg] < (int)threads) {
                        if (pthread_create(&pool.threads[bg][pool.nthreads[bg]], NULL, helper_main,
                                           (void *)(intptr_t)bg) == 0) {
                                pool.nthreads[bg]++;
                        } else if (!pool.nthreads[bg]) {
                                pthread_mutex_unlock(&pool.mu);
                                log_error("graph_load: cannot start a helper thread");
                                return; /* retried at the next load */
                        }
                }
                j->running = 1;
                pool.running++;
                pool.bytes += j->size;
                j->qnext = NULL;
                *pool.work_tail[bg] = j;
                pool.work_tail[bg] = &j->qnext;
                pthread_cond_signal(&pool.work_cv[bg]);
                pthread_mutex_unlock(&pool.mu);
        }
}

/* Answer allocation requests and take finished loads back. */
static void drain(struct npud *d)
{
        struct graph_load *list, *rev = NULL, *j;
        uint64_t n;

        if (read(pool.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
                log_error("graph_load: eventfd read: %s", strerror(errno));
        pthread_mutex_lock(&pool.mu);
        list = pool.msgs;
        pool.msgs = NULL;
        pthread_mutex_unlock(&pool.mu);
        while ((j = list)) { /* oldest first */
                list = j->qnext;
                j->qnext = rev;
                rev = j;
        }
        while ((j = rev)) {
                rev = j->qnext;
                if (!j->done) {
                        void *ptr = NULL;
                        char msg[sizeof(j->alloc_err)];
                        int rc = PROTO_E_CANCELLED;
                        snprintf(msg, sizeof(msg), "the session closed during the load");
                        if (j->s && !pool.stopping)
                                rc = graph_load_alloc(j, j->alloc_size, &ptr, msg, sizeof(msg));
                        pthread_mutex_lock(&pool.mu);
                        j->alloc_rc = rc;
                        j->alloc_ptr = ptr;
                        memcpy(j->alloc_err, msg, sizeof(msg));
                        j->alloc_answered = 1;
                        pthread_cond_broadcast(&pool.alloc_cv);
                        pthread_mutex_unlock(&pool.mu);
                        continue;
                }
                jobs_remove(j);
                pool.running--;
                pool.bytes -= j->size;
                if (j->s) {
                        j->s->graph_loads--;
                        graph_load_finish(j); /* may close the session: j is off the list */
                        free(j);
                } else {
                        job_free(j);
                }
        }
        if (!pool.stopping)
                admit(d);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        drain(arg);
}

int graph_load_start(struct npud *d, struct graph_load *j, char *err, size_t errlen)
{
        struct session *s = j->s;
        int rc = PROTO_E_LIMIT;

        if (j->size > d->config.limits.max_graph_load_bytes) {
                snprintf(err, errlen, "the model has %zu bytes, more than limits.max_graph_load_bytes (%llu)",
                         j->size, (unsigned long long)d->config.limits.max_graph_load_bytes);
                goto fail;
        }
        if (s->graph_loads >= GRAPH_LOADS_PER_SESSION) {
                snprintf(err, errlen, "the session has %d loads in progress already, the most it may have",
                         GRAPH_LOADS_PER_SESSION);
                goto fail;
        }
        if (pool.efd < 0) {
                pool.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
                if (pool.efd < 0 ||
                    !(pool.wake_event = event_new(d->base, pool.efd, EV_READ | EV_PERSIST, on_wake, d)) ||
                    event_add(pool.wake_event, NULL) < 0) {
                        if (pool.wake_event)
                                event_free(pool.wake_event);
                        pool.wake_event = NULL;
                        if (pool.efd >= 0)
                                close(pool.efd);
                        pool.efd = -1;
                        snprintf(err, errlen, "cannot set up the helper threads");
                        rc = PROTO_E_NO_MEMORY;
                        goto fail;
                }
                pool.jobs_tail = &pool.jobs;
                for (int bg = 0; bg < 2; bg++)
                        pool.work_tail[bg] = &pool.work[bg];
        }
        j->d = d;
        j->next = NULL;
        *pool.jobs_tail = j;
        pool.jobs_tail = &j->next;
        s->graph_loads++;
        admit(d);
        return 0;
fail:
        job_free(j);
        return rc;
}

void graph_loads_session_closed(struct session *s)
{
        struct graph_load **pp = &pool.jobs, *j;

        while ((j = *pp)) {
                if (j->s != s) {
                        pp = &j->next;
                        continue;
                }
                if (!j->running) {
                        *pp = j->next;
                        if (!*pp)
                                pool.jobs_tail = pp;
                        job_free(j);
                        continue;
                }
                /* On a helper: the result is dropped when it comes back. Weights already
                 * allocated leave the session's figures; the tenant stays charged until the
                 * buffer goes, as for a freed buffer still in use. */
                log_debug("session %llu closed during a graph_load: dropped when its helper is done "
                          "(%llu bytes of weights allocated)", (unsigned long long)s->id,
                          (unsigned long long)(j->weights ? j->rounded : 0));
                j->s = NULL;
                atomic_store(&j->cancel, 1);
                if (j->weights) {
                        s->dev_bytes[j->dev->id] -= j->rounded;
                        buffer_keep_charge(j->weights, s->tenant, j->rounded);
                }
                pp = &j->next;
        }
        s->graph_loads = 0;
}

void graph_loads_shutdown(struct npud *d)
{
        struct graph_load *j;

        if (pool.efd < 0)
                return;
        pthread_mutex_lock(&pool.mu);
        pool.stopping = 1;
        pthread_cond_broadcast(&pool.work_cv[0]);
        pthread_cond_broadcast(&pool.work_cv[1]);
        pthread_mutex_unlock(&pool.mu);
        /* Sessions are closed: every load left is on a helper and cancelled, and allocation
         * requests are refused, so each comes back within one cancellation check. */
        for (j = pool.jobs; j; j = j->next)
                atomic_store(&j->cancel, 1);
        while (pool.running) {
                struct pollfd p = { .fd = pool.efd, .events = POLLIN };
                poll(&p, 1, 100);
                drain(d);
        }
        for (int bg = 0; bg < 2; bg++) {
                for (int i = 0; i < pool.nthreads[bg]; i++)
                        pthread_join(pool.threads[bg][i], NULL);
                pool.nthreads[bg] = 0;
        }
        while ((j = pool.jobs)) { /* none should be left */
                pool.jobs = j->next;
                job_free(j);
        }
        event_free(pool.wake_event);
        pool.wake_event = NULL;
        close(pool.efd);
        pool.efd = -1;
}

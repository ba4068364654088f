/* Applying the scheduling policy (see sched.h). */
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/errors.h"
#include "../proto/message.h"
#include "npud.h"
#include "sched.h"
#include "session.h"

#define CHAIN_MAX_ITEMS 256
#define CHAIN_MAX_NS 1000000ull /* a chain holds an engine core about 1 ms at most */

#define task_of_item(it) ((struct task *)((char *)(it) - offsetof(struct task, item)))

void sched_kick(struct npud *d)
{
        event_active(d->sched_event, EV_TIMEOUT, 0);
}

static void stream_make_ready(struct stream *st)
{
        if (st->in_ready || st->running || st->blocked_on || st->ntasks == 0)
                return;
        TAILQ_INSERT_TAIL(&st->dev->ready[st->priority], st, ready_link);
        st->in_ready = 1;
}

static void stream_unready(struct stream *st)
{
        if (!st->in_ready)
                return;
        TAILQ_REMOVE(&st->dev->ready[st->priority], st, ready_link);
        st->in_ready = 0;
}

void sched_enqueue(struct npud *d, struct task *t)
{
        struct stream *st = t->stream;

        t->enqueue_ns = now_ns();
        TAILQ_INSERT_TAIL(&st->tasks, t, link);
        st->ntasks++;
        stream_make_ready(st);
        sched_kick(d);
}

/* A task leaves the system: account it to its session and free it. */
static void task_retire(struct task *t, int failed)
{
        struct session *s = t->stream->session;

        if (s) {
                s->queued_tasks--;
                s->tasks_completed++;
                s->tasks_failed += failed != 0;
                session_maybe_resume(s);
        }
        task_free(t);
}

static void reply_with_error(struct session *s, uint64_t id, const struct stream_error *e)
{
        json_t *body = proto_reply_error(e->code, e->message);
        json_object_set_new(json_object_get(body, "error"), "task", json_integer((json_int_t)e->seq));
        session_send_json(s, PROTO_KIND_REPLY, id, body);
}

static void waiter_finish(struct waiter *w, const struct stream_error *e)
{
        struct session *s = w->session;

        TAILQ_REMOVE(&s->waiters, w, session_link);
        if (w->kind == WAIT_STREAM)
                stream_unref(w->target);
        else if (w->kind == WAIT_EVENT)
                evt_unref(w->target);
        if (e && e->code)
                reply_with_error(s, w->request_id, e);
        else if (s->deferred.code) {
                reply_with_error(s, w->request_id, &s->deferred);
                s->deferred.code = 0;
        } else
                session_reply_result(s, w->request_id, NULL);
        free(w);
}

void sched_check_stream_waiters(struct npud *d, struct stream *st)
{
        struct waiter *w;

        if (!stream_idle(st) || TAILQ_EMPTY(&st->waiters))
                return;
        stream_ref(st);
        while ((w = TAILQ_FIRST(&st->waiters))) {
                TAILQ_REMOVE(&st->waiters, w, obj_link);
                waiter_finish(w, &st->error);
        }
        st->error.code = 0;
        stream_unref(st);
}

void sched_check_event_waiters(struct npud *d, struct npu_evt *e)
{
        struct waiter *w;

        if (!evt_complete(e) || TAILQ_EMPTY(&e->waiters))
                return;
        evt_ref(e);
        while ((w = TAILQ_FIRST(&e->waiters))) {
                TAILQ_REMOVE(&e->waiters, w, obj_link);
                waiter_finish(w, &e->error);
        }
        evt_unref(e);
}

void sched_check_session_waiters(struct npud *d, struct session *s)
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
        TAILQ_FOREACH(st, &s->streams, session_link)
                if (st->error.code && !first.code)
                        first = st->error;
        TAILQ_FOREACH(st, &s->streams, session_link)
                st->error.code = 0;
        for (w = TAILQ_FIRST(&s->waiters); w; w = next) {
                next = TAILQ_NEXT(w, session_link);
                if (w->kind == WAIT_SESSION) {
                        waiter_finish(w, &first);
                        if (s->closing) /* the reply could not be sent: waiters are gone */
                                return;
                }
        }
}

static void stream_became_idle(struct npud *d, struct stream *st)
{
        sched_check_stream_waiters(d, st);
        if (st->session)
                sched_check_session_waiters(d, st->session);
}

static void event_fire(struct npud *d, struct npu_evt *e, struct task *t)
{
        struct stream *st = t->stream, *b, *next;
        uint64_t ts = st->last_end_ns > t->enqueue_ns ? st->last_end_ns : t->enqueue_ns;

        if (t->gen > e->completed_gen) {
                e->completed_gen = t->gen;
                e->ts_ns = ts;
                e->error = st->error;
        }
        st->last_end_ns = ts;
        for (b = TAILQ_FIRST(&e->blocked); b; b = next) {
                next = TAILQ_NEXT(b, blocked_link);
                struct task *head = TAILQ_FIRST(&b->tasks);
                if (head && head->kind == TASK_STREAM_WAIT && head->gen <= e->completed_gen) {
                        TAILQ_REMOVE(&e->blocked, b, blocked_link);
                        b->blocked_on = NULL;
                        stream_make_ready(b);
                        sched_kick(d);
                }
        }
        sched_check_event_waiters(d, e);
}

static struct task *stream_pop(struct stream *st)
{
        struct task *t = TAILQ_FIRST(&st->tasks);
        if (t) {
                TAILQ_REMOVE(&st->tasks, t, link);
                st->ntasks--;
        }
        return t;
}

void sched_stream_cancel(struct npud *d, struct stream *st)
{
        struct task *t;

        stream_unready(st);
        if (st->blocked_on) {
                TAILQ_REMOVE(&st->blocked_on->blocked, st, blocked_link);
                st->blocked_on = NULL;
        }
        while ((t = stream_pop(st))) {
                if (t->kind == TASK_EVENT_RECORD)
                        event_fire(d, t->evt, t);
                task_retire(t, t->kind == TASK_EXEC);
        }
        if (stream_idle(st))
                stream_became_idle(d, st);
}

/* Dispatch a chain of the stream's leading tasks that all run on `engine`. */
static int stream_dispatch(struct npud *d, struct stream *st, int engine)
{
        struct device *dev = st->dev;
        struct exec_unit *u;
        struct task *t;
        uint64_t ns = 0;
        int n = 0;

        u = malloc(sizeof(*u) + sizeof(struct exec_item *) * CHAIN_MAX_ITEMS);
        if (!u)
                return -1;
        memset(u, 0, sizeof(*u));
        u->items = (struct exec_item **)(u + 1);
        while ((t = TAILQ_FIRST(&st->tasks)) && t->kind == TASK_EXEC && t->engine == engine &&
               n < CHAIN_MAX_ITEMS && (n == 0 || ns + t->item.model_ns <= CHAIN_MAX_NS)) {
                stream_pop(st);
                u->items[n++] = &t->item;
                ns += t->item.model_ns;
        }
        u->nitems = n;
        u->device = dev->id;
        u->engine = engine;
        u->cores = 1;
        u->owner = stream_ref(st);
        dev->free_cores[engine] -= u->cores;
        st->running = u;
        if (d->backend->ops->submit(d->backend, u) < 0) {
                /* cannot happen short of memory exhaustion: fail the chain */
                for (int i = 0; i < n; i++) {
                        u->items[i]->status = PROTO_E_DEVICE;
                        snprintf(u->items[i]->err, sizeof(u->items[i]->err),
                                 "device %d rejected the task", dev->id);
                }
                u->start_ns = u->end_ns = now_ns();
                sched_unit_complete(u, d);
        }
        return 0;
}

/* Advance one ready stream: run control tasks inline, cancel work after a failure, and
 * dispatch the next chain if its engine has a free core. Returns 1 when the stream must stay
 * in the ready list (no core free). */
static int stream_advance(struct npud *d, struct stream *st)
{
        struct task *t;

        while ((t = TAILQ_FIRST(&st->tasks))) {
                switch (t->kind) {
                case TASK_EVENT_RECORD:
                        stream_pop(st);
                        event_fire(d, t->evt, t);
                        task_retire(t, 0);
                        continue;
                case TASK_STREAM_WAIT:
                        if (t->evt->completed_gen < t->gen) {
                                st->blocked_on = t->evt;
                                TAILQ_INSERT_TAIL(&t->evt->blocked, st, blocked_link);
                                return 0;
                        }
                        stream_pop(st);
                        uint64_t now = now_ns();
                        if (now > st->last_end_ns)
                                st->last_end_ns = now;
                        task_retire(t, 0);
                        continue;
                case TASK_FAIL:
                        stream_pop(st);
                        if (!st->error.code && st->session)
                                session_task_failed(st->session, st, t->seq, t->item.status, t->item.err);
                        task_retire(t, 1);
                        continue;
                case TASK_EXEC:
                        if (st->error.code) { /* work after a failure is cancelled */
                                stream_pop(st);
                                task_retire(t, 1);
                                continue;
                        }
                        if (st->dev->free_cores[t->engine] <= 0)
                                return 1;
                        stream_dispatch(d, st, t->engine);
                        return 0;
                }
        }
        stream_became_idle(d, st);
        return 0;
}

static void device_run(struct npud *d, struct device *dev)
{
        for (int p = 0; p < STREAM_PRIORITIES; p++) {
                TAILQ_HEAD(, stream) pass;
                struct stream *st;

                if (TAILQ_EMPTY(&dev->ready[p]))
                        continue;
                TAILQ_INIT(&pass);
                TAILQ_CONCAT(&pass, &dev->ready[p], ready_link);
                while ((st = TAILQ_FIRST(&pass))) {
                        TAILQ_REMOVE(&pass, st, ready_link);
                        st->in_ready = 0;
                        if (stream_advance(d, st)) {
                                TAILQ_INSERT_TAIL(&dev->ready[p], st, ready_link);
                                st->in_ready = 1;
                        }
                }
        }
}

void sched_run(struct npud *d)
{
        for (int i = 0; i < d->devices.count; i++)
                device_run(d, &d->devices.devices[i]);
}

void sched_unit_complete(struct exec_unit *u, void *userdata)
{
        struct npud *d = userdata;
        struct stream *st = u->owner;
        struct device *dev = st->dev;

        dev->free_cores[u->engine] += u->cores;
        dev->busy_ns[u->engine] += (u->end_ns - u->start_ns) * (uint64_t)u->cores;
        st->running = NULL;
        if (u->end_ns > st->last_end_ns)
                st->last_end_ns = u->end_ns;
        for (int i = 0; i < u->nitems; i++) {
                struct task *t = task_of_item(u->items[i]);
                int status = t->item.status;

                if (status == 0)
                        dev->tasks_completed++;
                else
                        dev->tasks_failed++;
                if (status && status != PROTO_E_CANCELLED && !st->error.code) {
                        char msg[256];
                        snprintf(msg, sizeof(msg), "%s", t->item.err[0] ? t->item.err : "task failed");
                        if (st->session)
                                session_task_failed(st->session, st, t->seq, status, msg);
                        else {
                                st->error.code = status;
                                st->error.seq = t->seq;
                        }
                }
                task_retire(t, status);
        }
        free(u);
        stream_make_ready(st);
        if (stream_idle(st))
                stream_became_idle(d, st);
        stream_unref(st);
        sched_kick(d);
}

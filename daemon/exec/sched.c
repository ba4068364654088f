/* Applying the scheduling policy (see sched.h): streams settle (control tasks at their head
 * run at once), streams whose head is work become ready queues of the device's dispatch
 * policy (policy/dispatch.c), and each dispatch sends a tile or a chain of about the tile
 * duration to the backend. Completions charge engine time to tenants and advance streams. */
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cost.h"
#include "proto/errors.h"
#include "proto/message.h"
#include "daemon/api/manage.h"
#include "daemon/api/metrics.h"
#include "daemon/api/npud.h"
#include "sched.h"
#include "daemon/api/session.h"
#include "tenant.h"
#include "tile.h"

#define CHAIN_MAX_ITEMS 256
#define MAX_TILES 4096
#define CALIB_ALPHA 0.2

#define task_of_item(it) ((struct task *)((char *)(it) - offsetof(struct task, item)))

/* The daemon's side of a unit sent to the backend. */
struct sched_unit {
        struct exec_unit u;
        TAILQ_ENTRY(sched_unit) inflight_link;
        struct stream *st;        /* reference */
        uint64_t est_ns;          /* calibrated estimate charged at dispatch */
        uint64_t raw_ns;          /* uncalibrated model estimate (for calibration) */
        uint64_t dispatch_ns;
        struct task *tile_task;   /* when the unit is one tile of a task */
        struct exec_item *items[CHAIN_MAX_ITEMS];
        struct exec_item tile;    /* last: written whole by tile_make, never cleared */
};

/* Units at the backend, so that reset, session end and shutdown can cancel running work.
 * Loop thread only. */
static TAILQ_HEAD(, sched_unit) inflight = TAILQ_HEAD_INITIALIZER(inflight);

void sched_cancel_running(struct npud *d, const struct device *dev)
{
        struct sched_unit *su;

        if (!d->backend->ops->cancel)
                return;
        TAILQ_FOREACH(su, &inflight, inflight_link)
                if (!dev || su->st->dev == dev)
                        d->backend->ops->cancel(d->backend, &su->u);
}

/* Streams whose head is a graph run held back because their tenant holds its share of host
 * workers with graph runs (npud.graph_worker_cap); each holds a stream reference and goes
 * back to settling when a graph run of that tenant completes. Loop thread only. */
static struct stream **parked;
static size_t nparked, parked_cap;

static int park_stream(struct stream *st)
{
        if (nparked == parked_cap) {
                size_t ncap = parked_cap ? parked_cap * 2 : 16;
                struct stream **n = realloc(parked, ncap * sizeof(*n));
                if (!n)
                        return -1;
                parked = n;
                parked_cap = ncap;
        }
        parked[nparked++] = stream_ref(st);
        return 0;
}

static void stream_touch(struct npud *d, struct stream *st);

static void unpark_tenant(struct npud *d, const struct tenant *tn)
{
        size_t j = 0;

        for (size_t i = 0; i < nparked; i++) {
                if (parked[i]->tenant == tn) {
                        stream_touch(d, parked[i]);
                        stream_unref(parked[i]);
                } else {
                        parked[j++] = parked[i];
                }
        }
        nparked = j;
        if (!nparked) {
                free(parked);
                parked = NULL;
                parked_cap = 0;
        }
}

void sched_kick(struct npud *d)
{
        event_active(d->sched_event, EV_TIMEOUT, 0);
}

/* The stream's head may have changed: look at it on the next pass. */
static void stream_touch(struct npud *d, struct stream *st)
{
        if (st->settle_pending)
                return;
        st->settle_pending = 1;
        stream_ref(st);
        TAILQ_INSERT_TAIL(&d->settle, st, settle_link);
        sched_kick(d);
}

void sched_enqueue(struct npud *d, struct task *t)
{
        struct stream *st = t->stream;

        t->enqueue_ns = now_ns();
        TAILQ_INSERT_TAIL(&st->tasks, t, link);
        st->ntasks++;
        if (st->tenant)
                st->tenant->queued++;
        if (st->ntasks == 1)
                stream_touch(d, st);
}

/* A task leaves the system: account it to its session and tenant and free it. */
static void task_retire(struct task *t, int failed)
{
        struct session *s = t->stream->session;

        struct tenant *tn = t->stream->tenant;
        if (tn) {
                tn->queued--;
                /* sessions paused for the tenant's limit resume once it half drained */
                if (tn->pol.max_queued_tasks && tn->queued == tn->pol.max_queued_tasks / 2 && s) {
                        struct session *o;
                        TAILQ_FOREACH(o, &s->npud->sessions, link)
                                if (o->tenant == tn)
                                        session_maybe_resume(o);
                }
        }
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
        else
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
                        waiter_finish(w, &first);
                        if (s->closing) /* the reply could not be sent: waiters are gone */
                                return;
                }
        }
}

static void stream_became_idle(struct npud *d, struct stream *st)
{
        /* The session's synchronize first: it reports the stream's failure, which the
         * stream's own synchronize then clears. */
        stream_ref(st);
        if (st->session)
                sched_check_session_waiters(d, st->session);
        sched_check_stream_waiters(d, st);
        stream_unref(st);
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
                        stream_touch(d, b);
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

        pd_queue_unready(&st->dev->pd, &st->q);
        /* stop running work too: a kernel may otherwise run for hours */
        if (st->running && d->backend->ops->cancel)
                d->backend->ops->cancel(d->backend, st->running);
        if (st->blocked_on) {
                TAILQ_REMOVE(&st->blocked_on->blocked, st, blocked_link);
                st->blocked_on = NULL;
        }
        /* a task being tiled stays until its running tile returns */
        struct task *keep = st->running && TAILQ_FIRST(&st->tasks) &&
                                            TAILQ_FIRST(&st->tasks)->tiles
                                    ? stream_pop(st)
                                    : NULL;
        while ((t = stream_pop(st))) {
                if (t->kind == TASK_EVENT_RECORD)
                        event_fire(d, t->evt, t);
                task_retire(t, t->kind == TASK_EXEC);
        }
        if (keep) {
                keep->tile_failed = 1; /* no further tiles */
                TAILQ_INSERT_HEAD(&st->tasks, keep, link);
                st->ntasks++;
        }
        if (stream_idle(st))
                stream_became_idle(d, st);
}

/* Estimated duration of task t on engine e of its device, calibrated by measurements. */
static uint64_t task_cost(struct stream *st, const struct task *t, int e)
{
        if (!t->cost[e])
                return 0;
        double c = (double)t->cost[e] * *device_calib(st->dev, t->calib_slot, e);
        return c < 1 ? 1 : (uint64_t)c;
}

/* Remaining cost of the head (for a tiled task: what is left). */
static uint64_t head_cost(struct stream *st, const struct task *t, int e)
{
        uint64_t c = task_cost(st, t, e);
        if (t->tiles)
                c = c / t->tiles * (t->tiles - t->tiles_done);
        return c ? c : (t->cost[e] ? 1 : 0);
}

/* Run control tasks at the stream's head; make the stream a ready queue when its head is
 * work the device can start. */
static void stream_settle(struct npud *d, struct stream *st)
{
        struct task *t;

        if (st->running || st->blocked_on || st->q.ready)
                return;
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
                                return;
                        }
                        stream_pop(st);
                        uint64_t now = now_ns();
                        if (now > st->last_end_ns)
                                st->last_end_ns = now;
                        task_retire(t, 0);
                        continue;
                case TASK_FREE:
                        stream_pop(st);
                        task_retire(t, 0); /* drops the last reference the stream held */
                        continue;
                case TASK_FAIL:
                        stream_pop(st);
                        if (!st->error.code && st->session)
                                session_task_failed(st->session, st, t->seq, t->item.status, t->item.err);
                        task_retire(t, 1);
                        continue;
                case TASK_EXEC:
                        if (st->error.code || t->tile_failed) { /* work after a failure is cancelled */
                                stream_pop(st);
                                task_retire(t, 1);
                                continue;
                        }
                        for (int e = 0; e < OPS_ENGINE_COUNT; e++) /* a tiled task stays on its engine */
                                st->q.cost[e] = t->tiles && e != t->tile_engine ? 0 : head_cost(st, t, e);
                        st->q.deadline = st->deadline_ns ? t->enqueue_ns + st->deadline_ns : 0;
                        pd_queue_ready(&st->dev->pd, &st->q, now_ns());
                        return;
                }
        }
        stream_became_idle(d, st);
}

static void unit_fail_all(struct sched_unit *su, int code, const char *msg)
{
        for (int i = 0; i < su->u.nitems; i++) {
                su->u.items[i]->status = code;
                snprintf(su->u.items[i]->err, sizeof(su->u.items[i]->err), "%s", msg);
        }
}

/* Start the head of q's stream on engine e: one tile of a long task, or a chain of the
 * stream's next tasks that can run on e, of about one tile duration together. */
static void stream_dispatch(struct npud *d, struct stream *st, int e)
{
        struct device *dev = st->dev;
        struct task *t = TAILQ_FIRST(&st->tasks);
        struct sched_unit *su = malloc(sizeof(*su));
        uint64_t est = 0, raw = 0, tile_ns = d->tile_ns;

        if (!su) {
                pd_queue_unready(&dev->pd, &st->q);
                stream_touch(d, st); /* try again on a later pass */
                return;
        }
        memset(su, 0, offsetof(struct sched_unit, items)); /* items are set as they are added */
        su->u.items = su->items;
        uint64_t c = task_cost(st, t, e);
        uint64_t maxt = t->tiles ? t->tiles : tile_max(&t->item);
        if (t->tiles || (c > tile_ns * 2 && maxt > 1)) {
                if (!t->tiles) {
                        uint64_t n = (c + tile_ns - 1) / tile_ns;
                        t->tiles = n > maxt ? maxt : n > MAX_TILES ? MAX_TILES : n;
                        t->tile_engine = e;
                }
                e = t->tile_engine; /* all tiles of a task on one engine kind */
                tile_make(&t->item, t->tiles, t->tiles_done, &su->tile);
                su->tile.model_ns = t->cost[e] / t->tiles;
                su->tile_task = t;
                su->items[0] = &su->tile;
                su->u.nitems = 1;
                est = task_cost(st, t, e) / t->tiles;
                raw = t->cost[e] / t->tiles;
        } else {
                /* a graph run goes alone: it may be long, and it counts against its tenant's
                 * share of host workers (see device_run) */
                while (t && t->kind == TASK_EXEC && t->cost[e] && !t->tiles &&
                       su->u.nitems < CHAIN_MAX_ITEMS &&
                       (su->u.nitems == 0 || (t->item.kind != EXEC_GRAPH &&
                                              su->items[0]->kind != EXEC_GRAPH)) &&
                       (su->u.nitems == 0 || est + task_cost(st, t, e) <= tile_ns)) {
                        stream_pop(st);
                        t->item.model_ns = t->cost[e];
                        su->items[su->u.nitems++] = &t->item;
                        est += task_cost(st, t, e);
                        raw += t->cost[e];
                        t = TAILQ_FIRST(&st->tasks);
                }
        }
        su->u.device = dev->id;
        su->u.engine = e;
        su->u.cores = 1;
        su->u.owner = su;
        su->st = stream_ref(st);
        su->est_ns = est ? est : 1;
        su->raw_ns = raw ? raw : 1;
        su->dispatch_ns = now_ns();
        if (st->tenant) {
                struct tenant *tn = st->tenant;
                su->u.max_run_ns = tn->pol.max_run_ms * 1000000ull;
                su->u.max_loop_trips = tn->pol.max_loop_trips;
                tenant_ws_sync(tn, dev->id);
                su->u.mem = &tn->dev[dev->id].ws;
        }
        pd_start(&dev->pd, &st->q, e, su->u.cores, su->est_ns);
        st->running = &su->u;
        TAILQ_INSERT_TAIL(&inflight, su, inflight_link);
        if (st->tenant && su->u.nitems && su->items[0]->kind == EXEC_GRAPH)
                st->tenant->graph_units++;
        for (int i = 0; i < su->u.nitems; i++) {
                struct task *it = su->tile_task ? su->tile_task : task_of_item(su->items[i]);
                if (!it->tiles_done && st->tenant) /* first dispatch: the task waited this long */
                        tenant_note_wait(st->tenant, dev->id, su->dispatch_ns - it->enqueue_ns);
        }
        if (d->backend->ops->submit(d->backend, &su->u) < 0) {
                unit_fail_all(su, PROTO_E_DEVICE, "the device rejected the task");
                su->u.start_ns = su->u.end_ns = now_ns();
                sched_unit_complete(&su->u, d);
        }
}

static void device_run(struct npud *d, struct device *dev)
{
        struct pd_queue *q;
        int e;

        while ((q = pd_pick(&dev->pd, now_ns(), &e))) {
                struct stream *st = (struct stream *)((char *)q - offsetof(struct stream, q));
                struct task *head = TAILQ_FIRST(&st->tasks);
                if (d->graph_worker_cap && st->tenant && head && head->item.kind == EXEC_GRAPH &&
                    st->tenant->graph_units >= (uint32_t)d->graph_worker_cap &&
                    park_stream(st) == 0) {
                        pd_queue_unready(&dev->pd, q);
                        continue;
                }
                stream_dispatch(d, st, e);
        }
}

void sched_run(struct npud *d)
{
        struct stream *st;

        while ((st = TAILQ_FIRST(&d->settle))) {
                TAILQ_REMOVE(&d->settle, st, settle_link);
                st->settle_pending = 0;
                stream_settle(d, st);
                stream_unref(st);
        }
        for (int i = 0; i < d->devices.count; i++)
                device_run(d, &d->devices.devices[i]);
}

static void calibrate(struct npud *d, struct device *dev, struct sched_unit *su, struct task *t)
{
        if (!d->calibrate || su->u.nitems != 1 || su->u.items[0]->status || su->raw_ns < 20000)
                return; /* chains of tiny tasks measure dispatch overhead, not the kernel */
        double *f = device_calib(dev, t->calib_slot, su->u.engine);
        double ratio = (double)(su->u.end_ns - su->u.start_ns) / (double)su->raw_ns;
        if (ratio < 0.01)
                ratio = 0.01;
        if (ratio > 100)
                ratio = 100;
        *f = *f * (1 - CALIB_ALPHA) + ratio * CALIB_ALPHA;
}

static void task_account(struct npud *d, struct stream *st, struct task *t, int status,
                         uint64_t engine_ns, uint64_t end_ns)
{
        struct device *dev = st->dev;

        if (status == 0)
                dev->tasks_completed++;
        else
                dev->tasks_failed++;
        if (st->tenant) {
                struct tenant_device *td = &st->tenant->dev[dev->id];
                td->tasks++;
                td->failed += status != 0;
                td->engine_ns += engine_ns;
                metrics_task_done(d, st->tenant->pol.name, policy_class_name(st->tenant->pol.klass),
                                  dev->id, status != 0, end_ns - t->enqueue_ns);
        }
        if (status && status != PROTO_E_CANCELLED && !st->error.code) {
                /* every recorded error names what failed: event records copy it on */
                char msg[128];
                if (!t->item.err[0])
                        snprintf(msg, sizeof(msg), "failed with '%s' (no detail from device %d)",
                                 proto_error_name(status), dev->id);
                const char *why = t->item.err[0] ? t->item.err : msg;
                if (st->session) {
                        session_task_failed(st->session, st, t->seq, status, why);
                } else { /* session gone: no notification, but the record is complete */
                        st->error.code = status;
                        st->error.seq = t->seq;
                        snprintf(st->error.message, sizeof(st->error.message), "task %llu: %.200s",
                                 (unsigned long long)t->seq, why);
                }
        }
}

void sched_unit_complete(struct exec_unit *u, void *userdata)
{
        struct npud *d = userdata;
        struct sched_unit *su = u->owner;
        struct stream *st = su->st;
        struct device *dev = st->dev;
        uint64_t dur = u->end_ns - u->start_ns;

        TAILQ_REMOVE(&inflight, su, inflight_link);
        if (st->tenant && u->nitems && u->items[0]->kind == EXEC_GRAPH) {
                st->tenant->graph_units--;
                unpark_tenant(d, st->tenant);
        }
        pd_finish(&dev->pd, st->q.tenant, u->engine, u->cores, su->est_ns, dur, u->end_ns);
        dev->busy_ns[u->engine] += dur * (uint64_t)u->cores;
        st->running = NULL;
        if (u->end_ns > st->last_end_ns)
                st->last_end_ns = u->end_ns;
        if (su->tile_task) {
                struct task *t = su->tile_task;
                int status = su->tile.status;
                calibrate(d, dev, su, t);
                t->tiles_done++;
                if (status) {
                        snprintf(t->item.err, sizeof(t->item.err), "%s", su->tile.err);
                        t->tile_failed = 1;
                }
                if (status || t->tile_failed || t->tiles_done == t->tiles) {
                        task_account(d, st, t, status ? status : t->tile_failed ? PROTO_E_CANCELLED : 0,
                                     dur, u->end_ns);
                        if (TAILQ_FIRST(&st->tasks) == t)
                                stream_pop(st);
                        task_retire(t, status || t->tile_failed);
                } else if (st->tenant) {
                        st->tenant->dev[dev->id].engine_ns += dur;
                }
        } else {
                for (int i = 0; i < u->nitems; i++) {
                        struct task *t = task_of_item(u->items[i]);
                        if (i == 0)
                                calibrate(d, dev, su, t);
                        task_account(d, st, t, t->item.status, dur / (uint64_t)u->nitems, u->end_ns);
                        task_retire(t, t->item.status);
                }
        }
        free(su);
        stream_touch(d, st);
        stream_unref(st);
        manage_device_poll(d, dev); /* a pending reset ends once the device is idle */
}

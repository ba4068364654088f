/* Applying the scheduling policy (see sched.h): streams settle (control tasks at their head
 * run at once), streams whose head is work become ready queues of the device's dispatch
 * policy (policy/dispatch.c), and each dispatch sends a tile or a chain of about the tile
 * duration to the backend. Completions charge engine time to tenants and advance streams. */
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "graph/steps.h"
#include "cpulat.h"
#include "graph-obj.h"
#include "policy/cost.h"
#include "proto/errors.h"
#include "lcpoll.h"
#include "sched.h"
#include "tenant.h"
#include "tile.h"
#include "util/log.h"

/* Items of one chain at most. Each unit costs a worker wake-up and a completion on the loop
 * thread: 1024 tiny launches per unit (0.3-0.5 ms of kernels) cut those to a quarter of 256's
 * (npubench tiny: 0.86 -> 1.0 M tasks/s median); the tile duration still bounds a chain of
 * longer tasks. */
#define CHAIN_MAX_ITEMS 1024
#define MAX_TILES 4096
#define CALIB_ALPHA 0.2

#define task_of_item(it) ((struct task *)((char *)(it) - offsetof(struct task, item)))

/* The daemon's side of a unit sent to the backend. Units come from a pool (see unit_get):
 * only the part up to pool_next is cleared for each dispatch; items are set as they are
 * added, the tile is written whole by tile_make. */
struct sched_unit {
        struct exec_unit u;
        TAILQ_ENTRY(sched_unit) inflight_link;
        struct stream *st;        /* reference */
        uint64_t est_ns;          /* calibrated estimate charged at dispatch */
        uint64_t raw_ns;          /* uncalibrated model estimate (for calibration) */
        uint64_t dispatch_ns;
        struct task *tile_task;   /* when the unit is one tile of a task */
        /* A graph run whose steps are all in this unit, among launches and copies chained
         * before and after it (a request: its input copies, the whole run, the output
         * copies, as one unit of about a tile duration); its step items are contiguous. */
        struct task *run_task;
        int inline_cut; /* on the loop thread it runs under INLINE_CUT_NS, not the tenant's limit */
        struct sched_unit *pool_next; /* first field kept across reuse */
        /* The call of a tile of an operator task (its tensors narrowed to the tile): taken
         * from the call pools the first time the unit runs such a tile, room for the largest
         * call, then kept with the unit while it is pooled. */
        struct exec_call *tile_call;
        struct exec_item tile;
        struct exec_item *items[CHAIN_MAX_ITEMS];
};

/* Freed units for reuse: units in flight are bounded by the devices' engines, so the pool
 * stays small. Loop thread only. */
#define UNIT_POOL_MAX 256
static struct sched_unit *unit_pool;
static unsigned unit_pool_len;

const size_t sched_unit_size = sizeof(struct sched_unit);

static struct sched_unit *unit_get(void)
{
        struct sched_unit *su = unit_pool;

        if (su) {
                unit_pool = su->pool_next;
                unit_pool_len--;
        } else if ((su = malloc(sizeof(*su)))) {
                su->tile_call = NULL;
        } else {
                return NULL;
        }
        memset(su, 0, offsetof(struct sched_unit, pool_next));
        return su;
}

static void unit_put(struct sched_unit *su)
{
        if (unit_pool_len >= UNIT_POOL_MAX) {
                exec_call_put(su->tile_call);
                free(su);
                return;
        }
        su->pool_next = unit_pool;
        unit_pool = su;
        unit_pool_len++;
}

void sched_pool_drain(void)
{
        while (unit_pool) {
                struct sched_unit *su = unit_pool;
                unit_pool = su->pool_next;
                exec_call_put(su->tile_call);
                free(su);
        }
        unit_pool_len = 0;
}

/* Units at the backend, so that reset, session end and shutdown can cancel running work.
 * Loop thread only. */
static TAILQ_HEAD(, sched_unit) inflight = TAILQ_HEAD_INITIALIZER(inflight);

/* Cancel every unit of st at the backend (the tiles of its head task may be several). */
static void stream_cancel_units(struct exec *x, struct stream *st)
{
        struct sched_unit *su;

        if (!x->backend->ops->cancel)
                return;
        TAILQ_FOREACH(su, &inflight, inflight_link)
                if (su->st == st)
                        x->backend->ops->cancel(x->backend, &su->u);
}

void sched_cancel_running(struct exec *x, const struct device *dev)
{
        struct sched_unit *su;

        if (!x->backend->ops->cancel)
                return;
        TAILQ_FOREACH(su, &inflight, inflight_link)
                if (!dev || su->st->dev == dev)
                        x->backend->ops->cancel(x->backend, &su->u);
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

static void stream_touch(struct exec *x, struct stream *st);
static const char *tagged(const struct task *t, const char *msg, char *buf, size_t len);

static void unpark_tenant(struct exec *x, const struct tenant *tn)
{
        size_t j = 0;

        for (size_t i = 0; i < nparked; i++) {
                if (parked[i]->tenant == tn) {
                        stream_touch(x, parked[i]);
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

void sched_kick(struct exec *x)
{
        event_active(x->sched_event, EV_TIMEOUT, 0);
}

/* The stream's head may have changed: look at it on the next pass. */
static void stream_touch(struct exec *x, struct stream *st)
{
        if (st->settle_pending)
                return;
        st->settle_pending = 1;
        stream_ref(st);
        TAILQ_INSERT_TAIL(&x->settle, st, settle_link);
        sched_kick(x);
}

void sched_enqueue(struct exec *x, struct task *t)
{
        struct stream *st = t->stream;

        t->enqueue_ns = now_ns();
        if (st->tenant && st->tenant->pol.klass == POLICY_CLASS_LATENCY_CRITICAL)
                cpulat_active(t->enqueue_ns); /* the CPUs stay quick to wake while it is about */
        TAILQ_INSERT_TAIL(&st->tasks, t, link);
        st->ntasks++;
        if (st->tenant)
                st->tenant->queued++;
        if (st->ntasks == 1)
                stream_touch(x, st);
}

/* A task leaves the system: account it to its tenant, tell the owner, free it. The stream
 * stays alive through the observer call (which may end the owner's session). */
static void task_retire(struct exec *x, struct task *t, int failed)
{
        struct stream *st = stream_ref(t->stream);

        if (st->tenant)
                st->tenant->queued--;
        task_free(t);
        if (x->obs.task_retired)
                x->obs.task_retired(x->obs.data, st, failed);
        stream_unref(st);
}

void sched_task_failed(struct exec *x, struct stream *st, uint64_t seq, int code,
                       const char *message)
{
        struct stream_error *e = &st->error;

        if (!e->code) {
                e->code = code;
                e->seq = seq;
                snprintf(e->message, sizeof(e->message), "task %llu: %.200s",
                         (unsigned long long)seq, message);
        }
        if (st->session && x->obs.task_failed)
                x->obs.task_failed(x->obs.data, st, seq, code, message);
}

static void waiter_finish(struct exec *x, struct waiter *w, const struct stream_error *e)
{
        if (w->kind == WAIT_STREAM)
                stream_unref(w->target);
        else if (w->kind == WAIT_EVENT)
                evt_unref(w->target);
        w->target = NULL;
        x->obs.waiter_done(x->obs.data, w, e);
}

void sched_check_stream_waiters(struct exec *x, struct stream *st)
{
        struct waiter *w;

        if (!stream_idle(st) || TAILQ_EMPTY(&st->waiters))
                return;
        stream_ref(st);
        while ((w = TAILQ_FIRST(&st->waiters))) {
                TAILQ_REMOVE(&st->waiters, w, obj_link);
                waiter_finish(x, w, &st->error);
        }
        st->error.code = 0;
        stream_unref(st);
}

void sched_check_event_waiters(struct exec *x, struct npu_evt *e)
{
        struct waiter *w;

        if (!evt_complete(e) || TAILQ_EMPTY(&e->waiters))
                return;
        evt_ref(e);
        while ((w = TAILQ_FIRST(&e->waiters))) {
                TAILQ_REMOVE(&e->waiters, w, obj_link);
                waiter_finish(x, w, &e->error);
        }
        evt_unref(e);
}

static void stream_became_idle(struct exec *x, struct stream *st)
{
        /* The owner's synchronize of everything first: it reports the stream's failure,
         * which the stream's own synchronize then clears. */
        stream_ref(st);
        if (st->session && x->obs.stream_idle)
                x->obs.stream_idle(x->obs.data, st);
        sched_check_stream_waiters(x, st);
        stream_unref(st);
}

static void event_fire(struct exec *x, struct npu_evt *e, struct task *t)
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
                        stream_touch(x, b);
                }
        }
        sched_check_event_waiters(x, e);
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

void sched_stream_cancel(struct exec *x, struct stream *st)
{
        struct task *t;

        pd_queue_unready(&st->dev->pd, &st->q);
        st->held = 0; /* an unacked host callback goes with the rest */
        /* stop running work too: a kernel may otherwise run for hours */
        if (st->running)
                stream_cancel_units(x, st);
        if (st->blocked_on) {
                TAILQ_REMOVE(&st->blocked_on->blocked, st, blocked_link);
                st->blocked_on = NULL;
        }
        /* a task being tiled stays until its running tiles return */
        struct task *keep = st->running && TAILQ_FIRST(&st->tasks) &&
                                            TAILQ_FIRST(&st->tasks)->tiles
                                    ? stream_pop(st)
                                    : NULL;
        while ((t = stream_pop(st))) {
                if (t->kind == TASK_EVENT_RECORD)
                        event_fire(x, t->evt, t);
                task_retire(x, t, t->kind == TASK_EXEC);
        }
        if (keep) {
                keep->tile_failed = 1; /* no further tiles */
                TAILQ_INSERT_HEAD(&st->tasks, keep, link);
                st->ntasks++;
        }
        if (stream_idle(st))
                stream_became_idle(x, st);
}

/* The task an item of a unit that is not a tile belongs to: a step of the unit's graph
 * run, or a task of its own. */
static struct task *unit_item_task(const struct sched_unit *su, const struct exec_item *it)
{
        return su->run_task && it->kind == EXEC_GRAPH_STEP ? su->run_task : task_of_item(it);
}

struct task *sched_find_task(struct stream *st, uint64_t seq, int *ret_running)
{
        struct exec_unit *u = st->running;
        struct task *t;

        *ret_running = 0;
        TAILQ_FOREACH(t, &st->tasks, link)
                if (t->seq == seq) {
                        *ret_running = t->tiles_sent != 0;
                        return t;
                }
        if (!u || ((struct sched_unit *)u->owner)->tile_task)
                return NULL;
        for (int i = 0; i < u->nitems; i++) {
                t = unit_item_task(u->owner, u->items[i]);
                if (t->seq == seq) {
                        *ret_running = 1;
                        return t;
                }
        }
        return NULL;
}

int sched_task_cancel(struct exec *x, struct stream *st, uint64_t seq, char *msg, size_t msglen)
{
        struct task *t, *f;
        struct exec_unit *u = st->running;

        TAILQ_FOREACH(t, &st->tasks, link)
                if (t->seq == seq && t->kind == TASK_EXEC)
                        break;
        /* a tiled task at the head has started once a tile ran or runs */
        if (t && t->tiles_sent) {
                t->cancel_requested = 1;
                pd_queue_unready(&st->dev->pd, &st->q); /* it was ready for more tiles */
                if (u)
                        stream_cancel_units(x, st); /* its tiles: the stream runs nothing else */
                stream_touch(x, st); /* no further tiles */
                snprintf(msg, msglen, "running: cut at its next %s", t->steps ? "step" : "tile");
                return 0;
        }
        if (t) {
                /* Not started: it becomes a failure marker in its place, so the stream reports
                 * it in order, as any failed task (the work behind it is cancelled until the
                 * stream's synchronize). The marker takes over the task's count. */
                f = task_new(TASK_FAIL, st, seq);
                if (!f) {
                        snprintf(msg, msglen, "out of memory");
                        return PROTO_E_LIMIT;
                }
                f->item.status = PROTO_E_CANCELLED;
                snprintf(f->item.err, sizeof(f->item.err), "cancelled by its owner before it started");
                memcpy(f->tag, t->tag, sizeof(f->tag));
                f->enqueue_ns = t->enqueue_ns;
                if (t == TAILQ_FIRST(&st->tasks) && st->q.ready)
                        pd_queue_unready(&st->dev->pd, &st->q);
                TAILQ_INSERT_BEFORE(t, f, link);
                TAILQ_REMOVE(&st->tasks, t, link);
                task_free(t);
                stream_touch(x, st);
                snprintf(msg, msglen, "queued: cancelled");
                return 0;
        }
        for (int i = 0; u && i < u->nitems; i++) {
                struct sched_unit *su = u->owner;
                struct task *rt = su->tile_task ? su->tile_task : unit_item_task(su, u->items[i]);
                if (rt->seq != seq)
                        continue;
                if (u->nitems > 1 || u->items[0]->kind != EXEC_GRAPH) {
                        snprintf(msg, msglen, "task %llu already runs on the device",
                                 (unsigned long long)seq);
                        return PROTO_E_BUSY;
                }
                /* a graph run stops at its next node (the executor's run context) */
                rt->cancel_requested = 1;
                if (x->backend->ops->cancel)
                        x->backend->ops->cancel(x->backend, u);
                snprintf(msg, msglen, "running: cut at its next node");
                return 0;
        }
        snprintf(msg, msglen, "task %llu is neither queued nor running on stream %u (completed, "
                 "failed, or never submitted to it)", (unsigned long long)seq, st->handle);
        return PROTO_E_INVALID;
}

/* The calibration factor of task t on engine e: a graph run's own (graph-obj.h), else its
 * device's for the task's operator or kind. */
static double *task_calib(struct device *dev, const struct task *t, int e)
{
        if (t->item.kind == EXEC_GRAPH && t->item.graph && t->item.graph->owner)
                return &((struct graph_obj *)t->item.graph->owner)->calib[e];
        return device_calib(dev, t->calib_slot, e);
}

/* Estimated duration of task t on engine e of its device, calibrated by measurements. */
static uint64_t task_cost(struct stream *st, const struct task *t, int e)
{
        if (!t->cost[e])
                return 0;
        double c = (double)t->cost[e] * *task_calib(st->dev, t, e);
        return c < 1 ? 1 : (uint64_t)c;
}

/* Remaining cost of the head (for a tiled task: what is left). */
static uint64_t head_cost(struct stream *st, const struct task *t, int e)
{
        uint64_t c = task_cost(st, t, e);
        if (t->tiles)
                c = c / t->tiles * (t->tiles - t->tiles_sent);
        return c ? c : (t->cost[e] ? 1 : 0);
}

static void task_account(struct exec *x, struct stream *st, struct task *t, int status,
                         uint64_t engine_ns, uint64_t end_ns);

/* A graph run's steps (graph/steps.h; struct run_steps): step k's estimate on engine e,
 * calibrated like the run's. */
static uint64_t step_cost(struct stream *st, const struct task *t, int k, int e)
{
        uint64_t raw = t->steps->cost[(size_t)k * OPS_ENGINE_COUNT + (size_t)e];

        if (!raw)
                return 0;
        double c = (double)raw * *task_calib(st->dev, t, e);
        return c < 1 ? 1 : (uint64_t)c;
}

/* Make the stream a ready queue for the oldest ready step of its head graph run, with that
 * step's costs: each step is picked by the policy against every other ready queue, at every
 * step boundary, like a launch. Nothing when no step is ready (the ones that run will make
 * the next ready when they come back). */
static int run_fits_unit(struct stream *st, struct task *t, int e, uint64_t budget, int room);

/* Gangs (compute mode). A run at a clean point (every step before j done, none of the
 * others sent) goes as one unit of its remaining steps in order (exec_unit.gang), run by
 * as many host workers as its widest split step has parts, at most the device's host
 * slots: the workers hand the steps and their parts to each other without a round trip
 * through the loop thread per step (about 50 us on an idle virtual machine, against a
 * 130 us part of an MLP layer). The unit is yieldable: when other work of its pool waits
 * for a worker of the device, it stops at its next step or part boundary (device_run) and
 * the policy picks again; the run goes on from where it stopped. NPUD_GRAPH_GANG=0 sends
 * steps and parts one unit each instead (before/after figures). */
static int gang_enabled(void)
{
        static int enabled = -1;

        if (enabled < 0) {
                const char *env = getenv("NPUD_GRAPH_GANG");
                enabled = !env || strcmp(env, "0") != 0;
        }
        return enabled;
}

/* The first step of run t a gang would start from, or -1 when the run is not at a clean
 * point (a unit of it runs, a step is sent or split, it failed or is being cancelled). */
static int run_gang_from(struct stream *st, const struct task *t)
{
        const struct run_steps *rs = t->steps;
        int j = 0;

        if (!rs || !st->dev->pd.host_slots || !gang_enabled() || st->nrunning ||
            t->cancel_requested || t->tile_failed)
                return -1;
        while (j < rs->nsteps && rs->state[j] == STEP_DONE)
                j++;
        for (int k = j; k < rs->nsteps; k++)
                if (rs->state[k] == STEP_SENT || rs->state[k] == STEP_DONE || rs->parts_sent[k])
                        return -1;
        return j < rs->nsteps ? j : -1;
}

/* Step k's estimate on e for a gang, which runs every step on its workers whatever the
 * engine: where e has no estimate for the step, the AI CPU's. */
static uint64_t gang_step_cost(struct stream *st, const struct task *t, int k, int e)
{
        uint64_t c = step_cost(st, t, k, e);

        return c ? c : step_cost(st, t, k, OPS_ENGINE_AICPU);
}

static void steps_queue(struct stream *st, struct task *t)
{
        struct run_steps *rs = t->steps;
        int whole = 0;

        if (rs->ready_head == rs->ready_tail)
                return;
        int k = rs->ready[rs->ready_head];
        /* A run not started that fits one unit on some engines goes whole on one of them
         * (its steps one after the other on one worker cost less than a dispatch each): an
         * MLP of a MatMul on the cube and elementwise steps on the vector unit runs on the
         * AI CPU when it is that short. */
        for (int e = 0; !t->tiles_sent && e < OPS_ENGINE_COUNT; e++) {
                uint64_t c = 0;
                if (run_fits_unit(st, t, e, st->x->tile_ns, CHAIN_MAX_ITEMS))
                        for (int j = 0; j < rs->nsteps; j++)
                                c += step_cost(st, t, j, e);
                st->q.cost[e] = c;
                whole |= c != 0;
        }
        int j = whole ? -1 : run_gang_from(st, t);
        for (int e = 0; j >= 0 && e < OPS_ENGINE_COUNT; e++) { /* a gang: the rest of the run */
                uint64_t c = 0;
                for (int i = j; e != OPS_ENGINE_DMA && i < rs->nsteps; i++)
                        c += gang_step_cost(st, t, i, e);
                st->q.cost[e] = c;
        }
        for (int e = 0; !whole && j < 0 && e < OPS_ENGINE_COUNT; e++) {
                uint64_t c = step_cost(st, t, k, e);
                st->q.cost[e] = c && rs->parts[k] > 1 ? c / rs->parts[k] + 1 : c; /* one part */
        }
        st->q.deadline = sched_task_deadline(t);
        pd_queue_ready(&st->dev->pd, &st->q, now_ns());
}

/* What a step counts against the tile duration when chained: the larger of its estimate on
 * e and on one AI CPU core. A cube or vector estimate says what the chip would take; a host
 * worker computing it takes far longer until calibration has learnt the ratio (capped), and
 * a chain that turns out long holds a worker that latency-critical work waits for. */
static uint64_t chain_cost(struct stream *st, const struct task *t, int k, int e)
{
        uint64_t c = step_cost(st, t, k, e), a = step_cost(st, t, k, OPS_ENGINE_AICPU);

        return a > c ? a : c;
}

/* A step estimated at least this long is split into parts for as many workers as the
 * device has host slots, where its node splits (graph/split.h): a graph run then uses the
 * workers a big launch would, instead of one per node. Shorter steps split only to stay
 * within the tile duration. */
#define STEP_SPLIT_MIN_NS 200000

/* How many parts step k takes when sent on e: enough for parts of about one tile duration,
 * and, for a step long enough, one per host slot; never more than its node allows (a small
 * GEMM stays whole, see graph/split.h). */
/* NPUD_GRAPH_SPLIT=0 keeps steps whole (before/after figures), in gangs too. */
static int split_enabled(void)
{
        static int enabled = -1;

        if (enabled < 0) {
                const char *env = getenv("NPUD_GRAPH_SPLIT");
                enabled = !env || strcmp(env, "0") != 0;
        }
        return enabled;
}

static uint32_t step_nparts(struct stream *st, const struct task *t, int k, int e)
{
        const struct run_steps *rs = t->steps;
        uint64_t c = chain_cost(st, t, k, e), tile_ns = st->x->tile_ns ? st->x->tile_ns : 1;

        int slots = st->dev->pd.host_slots;

        /* Model mode (no host slots) holds a step for its modelled time on one core of its
         * engine, as the chip's kernel: parts are for the host workers of compute mode. */
        if (rs->max_parts[k] <= 1 || !slots || !split_enabled())
                return 1;
        /* the step's time on one host thread as tuning measured it at load, where it did:
         * the parts are tiles of the host's work, which the chip's cost model (or one AI CPU
         * core's) says little about */
        if (rs->host_ns[k])
                c = rs->host_ns[k];
        uint64_t n = (c + tile_ns - 1) / tile_ns;
        if (slots > 1 && c >= STEP_SPLIT_MIN_NS && n < (uint64_t)slots)
                n = (uint64_t)slots;
        return n > rs->max_parts[k] ? rs->max_parts[k] : (uint32_t)n;
}

static void step_send(struct sched_unit *su, struct task *t, int k, int e)
{
        struct exec_item *it = &t->steps->items[k];

        *it = (struct exec_item){ .kind = EXEC_GRAPH_STEP, .graph = t->item.graph, .step = k,
                                  .model_ns = t->steps->cost[(size_t)k * OPS_ENGINE_COUNT + (size_t)e] };
        t->steps->parts[k] = 1;
        t->steps->state[k] = STEP_SENT;
        su->items[su->u.nitems++] = it;
}

/* A copy or memset this short on its DMA engine rides in a unit of the compute work next to
 * it on the stream, on that work's engine, instead of being a unit of its own: a request's
 * input and output copies, its graph run (or launches) then cost one worker wake-up and one
 * completion instead of three of each. In model mode the unit's modelled time includes the
 * copies' (a few microseconds at most).
 *
 * Judged on the cost model's own estimate, not the calibrated one: the copies' calibration
 * is learnt from the copies long enough to measure (20 µs of model time and up), which on a
 * host are the large ones, slowed by first touches of fresh pages. After a best-effort
 * client's 4 MiB uploads (model 133 µs, measured 1-2 ms) it made a latency-critical
 * request's 10 KiB input copy (model 2.3 µs) a 30-58 µs estimate; its copies stopped riding
 * and every request on that device took three units (wake-ups, completions) instead of one
 * (test_request_one_unit). */
#define RIDE_MAX_NS 10000

static int small_copy(struct stream *st, const struct task *t)
{
        if (t->kind != TASK_EXEC || t->tiles || (t->item.kind != EXEC_COPY && t->item.kind != EXEC_MEMSET) ||
            !t->cost[OPS_ENGINE_DMA])
                return 0;
        for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                if (e != OPS_ENGINE_DMA && t->cost[e])
                        return 0;
        return t->cost[OPS_ENGINE_DMA] <= RIDE_MAX_NS;
}

/* The compute task right behind small copies at the head of st (t, the head, is one): a
 * launch or a graph run the copies may ride with; NULL when none follows closely. */
static struct task *ride_target(struct stream *st, struct task *t)
{
        for (int n = 0; t && n < 8; t = TAILQ_NEXT(t, link), n++) {
                if (small_copy(st, t))
                        continue;
                if (t->kind != TASK_EXEC || t->item.kind == EXEC_COPY || t->item.kind == EXEC_MEMSET ||
                    (t->item.kind == EXEC_GRAPH ? !t->steps : t->tiles != 0))
                        return NULL;
                return t;
        }
        return NULL;
}

/* Can graph run t, not started, go whole into a unit on e that has room for `room` more
 * items and `budget` ns of the tile duration left: every step runs on e, none is split,
 * and their chained costs fit. Its steps then run in their numbered (topological) order, as
 * the executor would run the graph serially. */
static int run_fits_unit(struct stream *st, struct task *t, int e, uint64_t budget, int room)
{
        const struct run_steps *rs = t->steps;
        uint64_t c = 0;

        if (!rs || t->tiles_sent || t->cancel_requested || t->tile_failed || rs->nsteps > room ||
            rs->ready_tail - rs->ready_head != 1 || rs->ready[rs->ready_head] != 0)
                return 0;
        for (int k = 0; k < rs->nsteps; k++) {
                if (!step_cost(st, t, k, e) || step_nparts(st, t, k, e) != 1)
                        return 0;
                c += chain_cost(st, t, k, e);
                if (c > budget)
                        return 0;
        }
        return 1;
}

/* Send every step of run t in su (run_fits_unit said yes); returns their estimate and adds
 * their model time to *raw. */
static uint64_t run_send_whole(struct stream *st, struct task *t, struct sched_unit *su, int e,
                               uint64_t *raw)
{
        struct run_steps *rs = t->steps;
        uint64_t est = 0;

        rs->ready_head = rs->ready_tail; /* step 0, the one ready, goes now */
        for (int k = 0; k < rs->nsteps; k++) {
                step_send(su, t, k, e);
                est += step_cost(st, t, k, e);
                *raw += rs->cost[(size_t)k * OPS_ENGINE_COUNT + (size_t)e];
        }
        su->run_task = t;
        return est;
}

/* Fill su with the oldest ready step that can run on e and, while the unit stays within one
 * tile duration, steps that wait for nothing else than steps already in it (a chain of
 * small nodes goes as one unit, run in order, as a chain of small launches does). Steps
 * made ready at the same time stay ready for other workers. Returns the calibrated
 * estimate, 0 when no ready step can run on e. */
static uint64_t steps_fill(struct stream *st, struct task *t, struct sched_unit *su, int e,
                           uint64_t tile_ns, uint64_t *ret_raw)
{
        struct run_steps *rs = t->steps;
        const struct graph_steps *gs = rs->gs;
        uint64_t est = 0, raw = 0, budget = 0;
        int k = -1;

        for (int i = rs->ready_head; i < rs->ready_tail; i++) {
                if (!step_cost(st, t, rs->ready[i], e))
                        continue;
                k = rs->ready[i];
                if (!rs->parts[k]) {
                        rs->parts[k] = step_nparts(st, t, k, e);
                        t->tiles += rs->parts[k] - 1; /* each part is a tile of the run */
                }
                if (rs->parts[k] > 1) {
                        /* one part per unit; the step stays ready while parts are left */
                        uint32_t n = rs->parts[k];
                        su->tile = (struct exec_item){ .kind = EXEC_GRAPH_STEP, .graph = t->item.graph,
                                                       .step = k, .part = (int)rs->parts_sent[k]++,
                                                       .nparts = (int)n,
                                                       .model_ns = rs->cost[(size_t)k * OPS_ENGINE_COUNT + (size_t)e] / n };
                        su->items[su->u.nitems++] = &su->tile;
                        rs->state[k] = STEP_SENT;
                        if (rs->parts_sent[k] == n) {
                                memmove(&rs->ready[rs->ready_head + 1], &rs->ready[rs->ready_head],
                                        (size_t)(i - rs->ready_head) * sizeof(int));
                                rs->ready_head++;
                        }
                        *ret_raw = su->tile.model_ns ? su->tile.model_ns : 1;
                        est = step_cost(st, t, k, e) / n;
                        return est ? est : 1;
                }
                /* take it out, keeping the order of the others */
                memmove(&rs->ready[rs->ready_head + 1], &rs->ready[rs->ready_head],
                        (size_t)(i - rs->ready_head) * sizeof(int));
                rs->ready_head++;
                break;
        }
        while (k >= 0) {
                step_send(su, t, k, e);
                est += step_cost(st, t, k, e);
                raw += rs->cost[(size_t)k * OPS_ENGINE_COUNT + (size_t)e];
                budget += chain_cost(st, t, k, e);
                int next = -1;
                for (int j = gs->succ_start[k]; j < gs->succ_start[k + 1]; j++) {
                        int sk = gs->succ[j];
                        if (rs->state[sk] != STEP_WAITING)
                                continue;
                        rs->in_unit[sk]++;
                        if (next < 0 && rs->in_unit[sk] == rs->pending[sk] && step_cost(st, t, sk, e) &&
                            budget + chain_cost(st, t, sk, e) <= tile_ns &&
                            su->u.nitems < CHAIN_MAX_ITEMS && step_nparts(st, t, sk, e) == 1)
                                next = sk; /* everything it waits for runs before it here */
                }
                k = next;
        }
        /* the counts were for this unit only; chained steps are sent, the others still
         * wait for these steps to come back */
        for (int i = 0; i < su->u.nitems; i++) {
                int sk = su->u.items[i]->step;
                for (int j = gs->succ_start[sk]; j < gs->succ_start[sk + 1]; j++)
                        rs->in_unit[gs->succ[j]] = 0;
        }
        *ret_raw = raw;
        return est;
}

/* The steps of unit su came back: each done one lets the steps waiting for it go (and the
 * values it read for the last time be freed); the first failure is the run's. */
static void steps_complete(struct task *t, struct sched_unit *su, int first, int n)
{
        struct run_steps *rs = t->steps;

        for (int i = first; i < first + n; i++) {
                struct exec_item *it = su->u.items[i];
                if (it->status) {
                        if (!t->item.status) {
                                snprintf(t->item.err, sizeof(t->item.err), "%s", it->err);
                                t->item.status = it->status;
                        }
                        t->tile_failed = 1;
                        continue; /* later items of the unit were cancelled */
                }
                if (t->tile_failed)
                        continue;
                if (!it->step_done_here && it->nparts > 1 &&
                    ++rs->parts_done[it->step] < (uint32_t)it->nparts)
                        continue; /* other parts of the step still run or wait */
                rs->state[it->step] = STEP_DONE;
                if (!it->step_done_here) /* a gang's worker did it */
                        graph_run_step_done(t->item.graph, it->step);
                for (int j = rs->gs->succ_start[it->step]; j < rs->gs->succ_start[it->step + 1]; j++) {
                        int sk = rs->gs->succ[j];
                        if (rs->state[sk] == STEP_WAITING && --rs->pending[sk] == 0) {
                                rs->state[sk] = STEP_READY;
                                rs->ready[rs->ready_tail++] = sk;
                        }
                }
        }
}

/* Fill su with the steps of run t from j on (run_gang_from), in order, as a gang of e's
 * estimates: each split step keeps its parts (step_nparts), the unit takes as many
 * workers as the widest has parts, at most the device's host slots free now. The ready steps are
 * taken (the ring is emptied; gang_back rebuilds it). Returns the estimate: each step's
 * over the workers its parts can use. */
static uint64_t gang_fill(struct stream *st, struct task *t, struct sched_unit *su, int e, int j,
                          uint64_t *ret_raw)
{
        struct run_steps *rs = t->steps;
        const struct pd_device *pd = &st->dev->pd;
        /* Parts follow the device's host slots, whatever is free now, so that a run's
         * results do not depend on the load (a Conv in row blocks may round a last bit
         * differently from the whole, graph/split.h); the workers it takes are the ones free
         * now (another run's gang or a launch keeps those it holds). */
        int slots = pd->host_slots, free = slots - pd->host_busy[pd_host_pool(st->q.tenant)], gang = 1;
        uint64_t est = 0, raw = 0;

        rs->ready_head = rs->ready_tail = 0;
        for (int k = j; k < rs->nsteps && su->u.nitems < CHAIN_MAX_ITEMS; k++) {
                /* a step that splits at all takes a part per slot at least: in a gang a part
                 * costs a claim, not a dispatch (the residual Add of a ResNet block) */
                int np = (int)step_nparts(st, t, k, e), max = split_enabled() ? (int)rs->max_parts[k] : 1;
                if (np < max && np < slots)
                        np = max < slots ? max : slots;
                /* parts that cost no more than their share: several a worker, so that a
                 * worker on a slower CPU claims fewer (graph/split.h, GRAPH_SPLIT_BALANCE) */
                if (np > 1 && np < max && np < slots * rs->balance[k])
                        np = max < slots * rs->balance[k] ? max : slots * rs->balance[k];
                /* a multiple of the slots, so that no worker waits for a last part: up, or
                 * down where the node allows fewer */
                if (np > 1 && slots > 1) {
                        np = (np + slots - 1) / slots * slots;
                        if (np > max)
                                np = max >= slots ? max / slots * slots : max;
                }
                struct exec_item *it = &rs->items[k];
                *it = (struct exec_item){ .kind = EXEC_GRAPH_STEP, .graph = t->item.graph, .step = k,
                                          .nparts = np > 1 ? np : 0, .step_done_here = 1,
                                          .model_ns = rs->cost[(size_t)k * OPS_ENGINE_COUNT + (size_t)e] };
                if (np > gang)
                        gang = np < free ? np : free;
                rs->state[k] = STEP_SENT;
                rs->parts[k] = 1; /* one tile of the run, whatever its parts */
                su->items[su->u.nitems++] = it;
                raw += it->model_ns;
        }
        for (int i = 0; i < su->u.nitems; i++) {
                const struct exec_item *it = su->items[i];
                uint64_t c = gang_step_cost(st, t, it->step, e);
                if (it->nparts > 1)
                        c = c * (uint64_t)((it->nparts + gang - 1) / gang) / (uint64_t)it->nparts;
                est += c;
        }
        su->u.gang = gang;
        su->u.yieldable = 1;
        *ret_raw = raw ? raw : 1;
        return est ? est : 1;
}

/* A gang unit of run t came back. Its steps before nrun are done (or failed, or were
 * cancelled). The others did not start and go back to waiting for their predecessors, so
 * the run goes on in later units; a split step the gang left within its parts (partial)
 * keeps the parts that ran and sends its others one unit each, as parts are sent. */
static void gang_back(struct task *t, struct sched_unit *su)
{
        struct run_steps *rs = t->steps;
        const struct exec_unit *u = &su->u;
        int nrun = u->nrun < u->nitems ? u->nrun : u->nitems;

        for (int i = nrun; i < u->nitems; i++) {
                int k = u->items[i]->step;
                rs->state[k] = STEP_WAITING;
                rs->parts[k] = 0;
        }
        t->tiles_sent -= (uint64_t)(u->nitems - nrun);
        /* the ready ring was emptied when the unit was filled: steps ready then (beyond a
         * full unit) wait again until the scan below */
        rs->ready_head = rs->ready_tail = 0;
        for (int k = 0; k < rs->nsteps; k++)
                if (rs->state[k] == STEP_READY)
                        rs->state[k] = STEP_WAITING;
        steps_complete(t, su, 0, nrun);
        t->tiles_done += (uint64_t)nrun;
        if (nrun < u->nitems && u->partial > 0 && !t->tile_failed) {
                int k = u->items[nrun]->step;
                uint32_t np = (uint32_t)u->items[nrun]->nparts;
                rs->parts[k] = np;
                rs->parts_sent[k] = rs->parts_done[k] = (uint32_t)u->partial;
                t->tiles += np - 1;
                t->tiles_sent += (uint64_t)u->partial;
                t->tiles_done += (uint64_t)u->partial;
        }
        for (int k = 0; k < rs->nsteps; k++)
                if (rs->state[k] == STEP_WAITING && !rs->pending[k]) {
                        rs->state[k] = STEP_READY;
                        rs->ready[rs->ready_tail++] = k;
                }
}

/* Tiles of one task are independent: while some run, the stream stays a ready queue for
 * the rest, so the policy spreads them over free workers one dispatch at a time (each tile
 * picked against every other ready queue, and charged to the tenant on its own). */
static void tile_more(struct stream *st)
{
        struct task *t = TAILQ_FIRST(&st->tasks);

        if (!t || t->kind != TASK_EXEC || !t->tiles || t->tiles_sent >= t->tiles ||
            t->tile_failed || t->cancel_requested || st->error.code || st->q.ready)
                return;
        /* Where host workers are counted, one task's tiles may take every worker of its
         * device that is free (work-conserving: a lone 1024^3 MatMul runs on all of them);
         * other work gets the next worker that frees, within one tile, and best-effort tiles
         * run at idle priority besides. */
        int slots = st->dev->pd.host_slots;
        if (t->steps) { /* independent steps may run at the same time */
                /* what runs may still be the work before it on the stream */
                if (t->tiles_sent && (!slots || st->nrunning < slots))
                        steps_queue(st, t);
                return;
        }
        if (slots && t->tiles_sent - t->tiles_done >= (uint64_t)slots)
                return;
        for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                st->q.cost[e] = e != t->tile_engine ? 0 : head_cost(st, t, e);
        st->q.deadline = sched_task_deadline(t);
        pd_queue_ready(&st->dev->pd, &st->q, now_ns());
}

/* Run control tasks at the stream's head; make the stream a ready queue when its head is
 * work the device can start. */
static void stream_settle(struct exec *x, struct stream *st)
{
        struct task *t;

        if (st->blocked_on || st->held || st->q.ready)
                return;
        if (st->running) {
                tile_more(st);
                return;
        }
        while ((t = TAILQ_FIRST(&st->tasks))) {
                switch (t->kind) {
                case TASK_NOTIFY:
                        /* Reached in stream order with everything before it finished: the
                         * observer tells the owner with the stream's own error. A host
                         * callback stays at the head (nothing after it starts) until acked;
                         * t is not touched after the observer, which may end the session
                         * and so cancel the stream. */
                        if (t->hold) {
                                st->held = 1;
                                if (st->session && x->obs.notify_reached)
                                        x->obs.notify_reached(x->obs.data, st, t->seq, t->notify_tag, 1, &st->error);
                                return;
                        }
                        stream_pop(st);
                        if (st->session && x->obs.notify_reached)
                                x->obs.notify_reached(x->obs.data, st, t->seq, t->notify_tag, 0, &st->error);
                        task_retire(x, t, 0);
                        continue;
                case TASK_EVENT_RECORD:
                        stream_pop(st);
                        event_fire(x, t->evt, t);
                        task_retire(x, t, 0);
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
                        task_retire(x, t, 0);
                        continue;
                case TASK_FREE:
                        stream_pop(st);
                        task_retire(x, t, 0); /* drops the last reference the stream held */
                        continue;
                case TASK_FAIL:
                        stream_pop(st);
                        if (!st->error.code) {
                                char tbuf[sizeof(t->item.err) + 48];
                                sched_task_failed(x, st, t->seq, t->item.status,
                                                  tagged(t, t->item.err, tbuf, sizeof(tbuf)));
                        }
                        task_retire(x, t, 1);
                        continue;
                case TASK_EXEC:
                        if (t->tiles_sent && t->cancel_requested && !t->tile_failed) {
                                /* its owner cancelled it between two tiles */
                                stream_pop(st);
                                snprintf(t->item.err, sizeof(t->item.err),
                                         "cancelled by its owner after %llu of %llu %s",
                                         (unsigned long long)t->tiles_done,
                                         (unsigned long long)t->tiles, t->steps ? "steps" : "tiles");
                                task_account(x, st, t, PROTO_E_CANCELLED, 0, now_ns());
                                task_retire(x, t, 1);
                                continue;
                        }
                        if (st->error.code || t->tile_failed) { /* work after a failure is cancelled */
                                stream_pop(st);
                                task_retire(x, t, 1);
                                continue;
                        }
                        if (t->steps) {
                                steps_queue(st, t);
                                return;
                        }
                        /* small copies ahead of compute work go on that work's engines */
                        struct task *rt = small_copy(st, t) ? ride_target(st, t) : NULL;
                        if (rt && rt->steps) {
                                steps_queue(st, rt);
                                return;
                        }
                        if (rt) /* its costs and deadline make the queue ready */
                                t = rt;
                        for (int e = 0; e < OPS_ENGINE_COUNT; e++) /* a tiled task stays on its engine */
                                st->q.cost[e] = t->tiles && e != t->tile_engine ? 0 : head_cost(st, t, e);
                        st->q.deadline = sched_task_deadline(t);
                        pd_queue_ready(&st->dev->pd, &st->q, now_ns());
                        return;
                }
        }
        stream_became_idle(x, st);
}

int sched_notify_ack(struct exec *x, struct stream *st, uint64_t seq)
{
        struct task *t = TAILQ_FIRST(&st->tasks);

        if (!st->held || !t || t->kind != TASK_NOTIFY || !t->hold || t->seq != seq)
                return -1;
        stream_pop(st);
        st->held = 0;
        stream_touch(x, st); /* before the retire, which may end the owner's session */
        task_retire(x, t, 0);
        return 0;
}

/* A unit of a graph run (the whole run, or steps of it): counted against its tenant's share
 * of host workers (npud.graph_worker_cap). */
static int unit_is_graph(const struct sched_unit *su)
{
        return su->run_task || (su->u.nitems &&
               (su->items[0]->kind == EXEC_GRAPH || su->items[0]->kind == EXEC_GRAPH_STEP));
}

static void unit_fail_all(struct sched_unit *su, int code, const char *msg)
{
        for (int i = 0; i < su->u.nitems; i++) {
                su->u.items[i]->status = code;
                snprintf(su->u.items[i]->err, sizeof(su->u.items[i]->err), "%s", msg);
        }
}

/* A latency-critical unit estimated this short runs on the loop thread itself, in the host
 * slot of its device that the dispatch took for it (sim.c, sim_submit). Handing it to a
 * worker and its completion back each cross CPUs, and while a best-effort load keeps the
 * CPUs busy each crossing is an interrupt that preempts the load and a wait for the woken
 * thread to be scheduled: on the 2-vCPU virtual machines here, beside a best-effort MatMul
 * queue on the other device, a small MLP request's wait for its reply went from 119 to
 * 82 us at the median (perf sched trace, docs/benchmarks.md). Only what cannot hold the loop
 * thread long goes there: the estimate (inline_est) is the cost model's for its copies and
 * fills, and for its graph steps calibrated against what that graph's steps really took;
 * an inline unit's kernels are told to stop at INLINE_CUT_NS (it fails with
 * PROTO_E_LIMIT and a message saying why), and a tenant whose unit ran over
 * INLINE_OVERRUN_NS there (a wrong estimate, or a model built to fool it) never runs a unit
 * there again. NPUD_INLINE=0 hands every unit to a worker (before/after figures);
 * NPUD_INLINE_MAX_US and NPUD_INLINE_CUT_US change the two bounds (tests). */
#define INLINE_MAX_NS 50000
#define INLINE_OVERRUN_NS (1000ull * 1000)
#define INLINE_CUT_NS (20ull * 1000 * 1000)

/* NPUD_INLINE=0, NPUD_INLINE_MAX_US, NPUD_INLINE_CUT_US: tests and before/after figures */
static struct {
        int init, off;
        uint64_t max_ns, cut_ns;
} inl;

static uint64_t env_us(const char *name, uint64_t dflt_ns)
{
        const char *v = getenv(name);
        char *end;
        unsigned long long us = v && *v ? strtoull(v, &end, 10) : 0;

        return v && *v && !*end && us > 0 && us < 60ull * 1000 * 1000 ? us * 1000 : dflt_ns;
}

/* Items whose time on the host the estimate can be trusted for: copies and fills of at most
 * INLINE_COPY_MAX bytes (a larger one into fresh device memory takes the host its page
 * faults, 1-2 ms for 4 MiB against 133 us modelled), and graph steps, whose heavy nodes the
 * load timed on this host, except those with subgraphs (If, Loop, Scan: their trip counts
 * and branches come from the data). Not an operator launch: its estimate is the simulated
 * device's, which the calibration corrects on average, not per operator (a [32,128,128] x
 * [128,128] MatMul launch was estimated at 11 us and took a millisecond). */
#define INLINE_COPY_MAX (64u << 10)

static int inline_items_ok(const struct sched_unit *su)
{
        for (int i = 0; i < su->u.nitems; i++) {
                const struct exec_item *it = su->items[i];
                if (it->kind == EXEC_COPY || it->kind == EXEC_MEMSET) {
                        if (it->len > INLINE_COPY_MAX)
                                return 0;
                } else if (it->kind == EXEC_GRAPH_STEP) {
                        const struct graph *g = it->graph->g;
                        if (it->step >= 1 && it->step <= g->nnodes) {
                                const struct graph_node *n = &g->nodes[graph_step_node(g, it->step)];
                                if (!n->domain[0] && (!strcmp(n->op_type, "If") || !strcmp(n->op_type, "Loop") ||
                                                      !strcmp(n->op_type, "Scan")))
                                        return 0;
                        }
                } else {
                        return 0;
                }
        }
        return su->u.nitems > 0;
}

/* A unit's estimate for the loop thread's bound, from what is the tenant's own: its copies
 * and fills (at most INLINE_COPY_MAX bytes each) by the cost model, not the device's copy
 * calibration, which another tenant's uploads into fresh memory (page faults: 1-2 ms for
 * 4 MiB against 133 us modelled) set; its graph steps by their graph's own calibration.
 * Through the device's factors a best-effort tenant beside it had put a latency-critical
 * MLP request at 50 us, over INLINE_MAX_NS, for whole seconds. */
static uint64_t inline_est(const struct sched_unit *su)
{
        uint64_t est = 0;

        for (int i = 0; i < su->u.nitems; i++) {
                const struct exec_item *it = su->items[i];
                const struct graph_obj *o = it->kind == EXEC_GRAPH_STEP && it->graph ? it->graph->owner : NULL;
                est += o ? (uint64_t)((double)it->model_ns * o->calib[su->u.engine]) : it->model_ns;
        }
        return est;
}

static int inline_unit(const struct stream *st, const struct sched_unit *su)
{
        if (!inl.init) {
                const char *env = getenv("NPUD_INLINE");
                inl.off = env && strcmp(env, "0") == 0;
                inl.max_ns = env_us("NPUD_INLINE_MAX_US", INLINE_MAX_NS);
                inl.cut_ns = env_us("NPUD_INLINE_CUT_US", INLINE_CUT_NS);
                inl.init = 1;
        }
        return !inl.off && st->tenant && st->tenant->pol.klass == POLICY_CLASS_LATENCY_CRITICAL &&
               !st->tenant->inline_off && !su->u.background && su->u.gang <= 1 && inline_items_ok(su) &&
               inline_est(su) <= inl.max_ns;
}

/* An inline unit came back (loop thread): one that ran over INLINE_OVERRUN_NS ends inline
 * runs for its tenant; one stopped at INLINE_CUT_NS says so in its items' errors. The
 * overrun is the CPU time the unit took where it was measured (unit_run_timed), not its
 * wall time: a loop thread preempted for a millisecond by the host (a vCPU the hypervisor
 * took away) says nothing about the tenant's work, and would end its inline runs for the
 * rest of the daemon's life: its units would then go to a worker, which with the devices'
 * workers on CPUs of their own may share its CPU with the client that polls for the reply
 * (up to NPU_WAIT_SPIN_LC_US more a request). */
static void inline_done(struct stream *st, struct sched_unit *su)
{
        struct exec_unit *u = &su->u;
        uint64_t dur = u->cpu_ns ? u->cpu_ns : u->end_ns > u->start_ns ? u->end_ns - u->start_ns : 0;
        int cut = 0;

        for (int i = 0; su->inline_cut && i < u->nitems; i++)
                if (su->items[i]->status == PROTO_E_LIMIT) {
                        cut = 1;
                        snprintf(su->items[i]->err, sizeof(su->items[i]->err),
                                 "stopped after %llu us on npud's loop thread, where only units estimated "
                                 "under %llu us run (this one: %llu us); the tenant's work runs on "
                                 "workers from now on",
                                 (unsigned long long)(inl.cut_ns / 1000), (unsigned long long)(inl.max_ns / 1000),
                                 (unsigned long long)(su->est_ns / 1000));
                }
        if ((cut || dur > INLINE_OVERRUN_NS) && st->tenant && !st->tenant->inline_off) {
                st->tenant->inline_off = 1;
                log_warn("tenant %s: a unit estimated at %llu us ran %llu us on the loop thread%s; its "
                         "work runs on workers from now on", st->tenant->pol.name,
                         (unsigned long long)(su->est_ns / 1000), (unsigned long long)(dur / 1000),
                         cut ? " and was stopped" : "");
        }
}

/* Start the head of q's stream on engine e: one tile of a long task, or a chain of the
 * stream's next tasks that can run on e, of about one tile duration together. */
static void stream_dispatch(struct exec *x, struct stream *st, int e)
{
        struct device *dev = st->dev;
        struct task *t = TAILQ_FIRST(&st->tasks);
        struct sched_unit *su = unit_get();
        uint64_t est = 0, raw = 0, tile_ns = x->tile_ns;
        uint64_t c = 0, maxt = 1;
        int tiled = 0;
        /* a graph run that fits one unit whole is chained like a launch */
        int stepped = t->steps && !run_fits_unit(st, t, e, tile_ns, CHAIN_MAX_ITEMS);

        int gang_from = su && stepped ? run_gang_from(st, t) : -1;

        if (su && stepped) {
                su->u.items = su->items;
                est = gang_from >= 0 ? gang_fill(st, t, su, e, gang_from, &raw)
                                     : steps_fill(st, t, su, e, tile_ns, &raw);
                if (!est) { /* the ready steps changed since the queue was made ready */
                        unit_put(su);
                        su = NULL;
                }
        } else if (su) {
                su->u.items = su->items;
                c = task_cost(st, t, e);
                maxt = t->tiles ? t->tiles : tile_max(&t->item);
                tiled = !t->steps && (t->tiles || (c > tile_ns * 2 && maxt > 1));
                if (tiled && t->item.kind == EXEC_OP && !su->tile_call &&
                    !(su->tile_call = exec_call_get(OPS_MAX_INPUTS, OPS_MAX_OUTPUTS, OPS_MAX_ATTRS))) {
                        unit_put(su);
                        su = NULL;
                }
        }
        if (!su) {
                pd_queue_unready(&dev->pd, &st->q);
                stream_touch(x, st); /* try again on a later pass */
                return;
        }
        if (stepped) {
                su->tile_task = t;
        } else if (tiled) {
                if (!t->tiles) {
                        uint64_t n = (c + tile_ns - 1) / tile_ns;
                        t->tiles = n > maxt ? maxt : n > MAX_TILES ? MAX_TILES : n;
                        t->tile_engine = e;
                }
                e = t->tile_engine; /* all tiles of a task on one engine kind */
                tile_make(&t->item, t->tiles, t->tiles_sent, &su->tile, su->tile_call);
                su->tile.model_ns = t->cost[e] / t->tiles;
                su->tile_task = t;
                su->items[0] = &su->tile;
                su->u.nitems = 1;
                est = task_cost(st, t, e) / t->tiles;
                raw = t->cost[e] / t->tiles;
        } else {
                /* A chain of the stream's tasks on e within about a tile duration: launches,
                 * small copies riding with them, and at most one graph run whose steps all
                 * fit. A graph run without steps goes alone: it may be long, and it counts
                 * against its tenant's share of host workers (see device_run). */
                while (t && t->kind == TASK_EXEC && su->u.nitems < CHAIN_MAX_ITEMS &&
                       (su->u.nitems == 0 || su->items[0]->kind != EXEC_GRAPH)) {
                        uint64_t left = est < tile_ns ? tile_ns - est : 0;
                        if (t->steps) {
                                /* at the head, `stepped` said it fits */
                                if (su->run_task ||
                                    (su->u.nitems &&
                                     !run_fits_unit(st, t, e, left, CHAIN_MAX_ITEMS - su->u.nitems)))
                                        break;
                                stream_pop(st);
                                t->started_ns = now_ns();
                                est += run_send_whole(st, t, su, e, &raw);
                                t = TAILQ_FIRST(&st->tasks);
                                continue;
                        }
                        int ride = small_copy(st, t) && !t->cost[e];
                        uint64_t ce = ride ? task_cost(st, t, OPS_ENGINE_DMA) : task_cost(st, t, e);
                        if ((!ride && !t->cost[e]) || t->tiles ||
                            (su->u.nitems && (t->item.kind == EXEC_GRAPH || est + ce > tile_ns)))
                                break;
                        stream_pop(st);
                        t->item.model_ns = ride ? t->cost[OPS_ENGINE_DMA] : t->cost[e];
                        su->items[su->u.nitems++] = &t->item;
                        est += ce;
                        raw += t->item.model_ns;
                        t = TAILQ_FIRST(&st->tasks);
                }
        }
        su->u.device = dev->id;
        su->u.engine = e;
        su->u.cores = su->u.gang > 1 ? su->u.gang : 1; /* host workers it takes */
        su->u.owner = su;
        su->st = stream_ref(st);
        su->est_ns = est ? est : 1;
        su->raw_ns = raw ? raw : 1;
        su->dispatch_ns = now_ns();
        if (st->tenant) {
                struct tenant *tn = st->tenant;
                su->u.max_run_ns = tn->pol.max_run_ms * 1000000ull;
                struct task *rt = su->tile_task;
                if (rt && rt->steps && su->u.max_run_ns) { /* the limit is the run's, not each step's */
                        if (!rt->tiles_sent)
                                rt->started_ns = su->dispatch_ns;
                        uint64_t used = su->dispatch_ns - rt->started_ns;
                        su->u.max_run_ns = used < su->u.max_run_ns ? su->u.max_run_ns - used : 1;
                }
                su->u.max_loop_trips = tn->pol.max_loop_trips;
                tenant_ws_sync(tn, dev->id);
                su->u.mem = &tn->dev[dev->id].ws;
        }
        su->u.background = pd_host_pool(st->q.tenant);
        su->u.inline_ok = inline_unit(st, su);
        if (su->u.inline_ok) { /* the backend applies the bound if it runs it there */
                su->u.inline_max_run_ns = inl.cut_ns;
                su->inline_cut = !su->u.max_run_ns || su->u.max_run_ns > inl.cut_ns;
        }
        pd_start(&dev->pd, &st->q, e, su->u.cores, su->est_ns);
        for (int i = 0; i < su->u.cores; i++)
                pd_host_take(&dev->pd, su->u.background);
        st->running = &su->u;
        st->nrunning++;
        if (su->tile_task && su->tile_task->steps && su->items[0] == &su->tile) { /* a part of a step */
                struct graph_obj *o = su->tile_task->item.graph->owner;
                o->parts_sent++;
                if ((uint32_t)st->nrunning > o->parts_parallel)
                        o->parts_parallel = (uint32_t)st->nrunning;
        } else if (su->u.gang >= 1) { /* split steps of a gang: up to gang parts at once */
                struct graph_obj *o = su->tile_task->item.graph->owner;
                for (int i = 0; i < su->u.nitems; i++)
                        o->parts_sent += su->items[i]->nparts > 1 ? (uint32_t)su->items[i]->nparts : 0;
                if ((uint32_t)su->u.gang > o->parts_parallel)
                        o->parts_parallel = (uint32_t)su->u.gang;
        }
        TAILQ_INSERT_TAIL(&inflight, su, inflight_link);
        dev->units++;
        if (st->tenant && unit_is_graph(su))
                st->tenant->graph_units++;
        for (int i = 0; i < su->u.nitems; i++) {
                struct task *it = su->tile_task ? su->tile_task : unit_item_task(su, su->items[i]);
                if (it == su->run_task && i > 0 && su->items[i - 1]->kind == EXEC_GRAPH_STEP)
                        continue; /* noted at its first step */
                if (!it->tiles_sent && st->tenant) /* first dispatch: the task waited this long */
                        tenant_note_wait(st->tenant, dev->id, su->dispatch_ns - it->enqueue_ns);
                if (su->tile_task)
                        break;
        }
        if (su->tile_task)
                su->tile_task->tiles_sent += su->tile_task->steps ? (uint64_t)su->u.nitems : 1;
        if (su->run_task)
                su->run_task->tiles_sent = su->run_task->tiles;
        su->u.nrun = su->u.nitems; /* what a backend that refuses it leaves */
        if (x->backend->ops->submit(x->backend, &su->u) < 0) {
                unit_fail_all(su, PROTO_E_DEVICE, "the device rejected the task");
                su->u.start_ns = su->u.end_ns = now_ns();
                sched_unit_complete(&su->u, x);
                return;
        }
        if (su->u.ran_inline)
                dev->units_inline++;
        if (su->tile_task)
                tile_more(st);
}

/* Is the next unit of graph run t a part of a split step? Parts are tiles of one node (about
 * a tile duration each, picked one at a time like a launch's), so the cap on a tenant's
 * graph units does not hold them back: a lone big GEMM in a graph uses the free workers as
 * the same GEMM launched would. */
static int steps_next_is_part(struct stream *st, const struct task *t, int e)
{
        const struct run_steps *rs = t->steps;

        if (!rs || rs->ready_head == rs->ready_tail)
                return 0;
        int k = rs->ready[rs->ready_head];
        return rs->parts[k] ? rs->parts[k] > 1 : step_nparts(st, t, k, e) > 1;
}

static void device_run(struct exec *x, struct device *dev)
{
        struct pd_queue *q;
        int e;

        while ((q = pd_pick(&dev->pd, now_ns(), &e))) {
                struct stream *st = (struct stream *)((char *)q - offsetof(struct stream, q));
                struct task *head = TAILQ_FIRST(&st->tasks);
                if (x->graph_worker_cap && st->tenant && head && head->item.kind == EXEC_GRAPH &&
                    !steps_next_is_part(st, head, e) &&
                    st->tenant->graph_units >= (uint32_t)x->graph_worker_cap &&
                    park_stream(st) == 0) {
                        pd_queue_unready(&dev->pd, q);
                        continue;
                }
                stream_dispatch(x, st, e);
        }
        /* Work of a pool waits for a worker: the gangs holding its workers yield at their
         * next step or part boundary and the policy picks again; at once for work of a more
         * urgent class, after a tile duration from their dispatch for work of the same or a
         * lower class (then each gets its share a tile at a time, as tiled launches do,
         * instead of a round trip through the policy per step). */
        for (int pool = 0; pool < 2; pool++) {
                struct sched_unit *su;
                int waiting = pd_host_waiting(&dev->pd, pool);
                if (waiting < 0)
                        continue;
                TAILQ_FOREACH(su, &inflight, inflight_link) {
                        if (!su->u.yieldable || su->st->dev != dev || (su->u.background != 0) != pool)
                                continue;
                        uint64_t at = waiting < (int)su->st->q.tenant->klass ? 1 : su->dispatch_ns + x->tile_ns;
                        uint64_t cur = atomic_load(&su->u.yield_ns);
                        if (!cur || at < cur)
                                atomic_store(&su->u.yield_ns, at);
                }
        }
}

void sched_run(struct exec *x)
{
        struct stream *st;

        while ((st = TAILQ_FIRST(&x->settle))) {
                TAILQ_REMOVE(&x->settle, st, settle_link);
                st->settle_pending = 0;
                stream_settle(x, st);
                stream_unref(st);
        }
        for (int i = 0; i < x->devices.count; i++)
                device_run(x, &x->devices.devices[i]);
}

static void calibrate(struct exec *x, struct device *dev, struct sched_unit *su, struct task *t)
{
        if (!x->calibrate || su->u.nitems != 1 || su->u.items[0]->status || su->raw_ns < 20000)
                return; /* chains of tiny tasks measure dispatch overhead, not the kernel */
        double *f = task_calib(dev, t, su->u.engine);
        /* the kernel's own time where the backend measured it: a best-effort unit's wall
         * time includes every preemption by other threads, which inflated the device's
         * factor for everyone (a latency-critical MLP request beside a best-effort MatMul
         * queue on its device was estimated over its loop-thread bound, INLINE_MAX_NS) */
        uint64_t took = su->u.cpu_ns ? su->u.cpu_ns : su->u.end_ns - su->u.start_ns;
        double ratio = (double)took / (double)su->raw_ns;
        if (ratio < 0.01)
                ratio = 0.01;
        if (ratio > 100)
                ratio = 100;
        *f = *f * (1 - CALIB_ALPHA) + ratio * CALIB_ALPHA;
}

uint64_t sched_task_deadline(const struct task *t)
{
        uint64_t rel = t->deadline_ns ? t->deadline_ns : t->stream->deadline_ns;

        return rel ? t->enqueue_ns + rel : 0;
}

/* A failure of a tagged run names the tag, so a server can tell which request failed. */
static const char *tagged(const struct task *t, const char *msg, char *buf, size_t len)
{
        if (!t->tag[0])
                return msg;
        snprintf(buf, len, "run '%s': %s", t->tag, msg);
        return buf;
}

static void task_account(struct exec *x, struct stream *st, struct task *t, int status,
                         uint64_t engine_ns, uint64_t end_ns)
{
        struct device *dev = st->dev;
        char tbuf[sizeof(t->item.err) + 48];

        if (status == 0)
                dev->tasks_completed++;
        else
                dev->tasks_failed++;
        /* Work behind a failure in the same unit never ran: it is counted apart, so one
         * failed task is one failure in `npuctl sched` and metrics, as at the client. A task
         * its owner cancelled is that owner's failure. */
        int outcome = status == 0 ? EXEC_TASK_COMPLETED
                      : status == PROTO_E_CANCELLED && !t->cancel_requested ? EXEC_TASK_CANCELLED
                                                                             : EXEC_TASK_FAILED;
        if (st->tenant) {
                struct tenant_device *td = &st->tenant->dev[dev->id];
                td->tasks++;
                td->failed += outcome == EXEC_TASK_FAILED;
                td->cancelled += outcome == EXEC_TASK_CANCELLED;
                td->engine_ns += engine_ns;
        }
        if (x->obs.task_done)
                x->obs.task_done(x->obs.data, st, outcome, end_ns - t->enqueue_ns);
        if (status == 0 && t->item.kind == EXEC_GRAPH && t->item.graph && t->item.graph->flex)
                stream_keep_result(st, t->seq, t->item.graph->nout, t->item.graph->got);
        /* a cancellation the owner asked for is its task's failure; others (a reset, the
         * session's end) are reported by whoever caused them */
        if (status && (status != PROTO_E_CANCELLED || t->cancel_requested) && !st->error.code) {
                /* every recorded error names what failed: event records copy it on */
                char msg[128];
                if (!t->item.err[0])
                        snprintf(msg, sizeof(msg), "failed with '%s' (no detail from device %d)",
                                 proto_error_name(status), dev->id);
                sched_task_failed(x, st, t->seq, status,
                                  tagged(t, t->item.err[0] ? t->item.err : msg, tbuf, sizeof(tbuf)));
        }
}

int sched_units_in_flight(void)
{
        return !TAILQ_EMPTY(&inflight);
}

/* Best-effort units that came back while the loop thread polled for a latency-critical
 * request (sched_hold_background), in the order they came. */
static struct {
        int on;
        struct exec_unit *first, **tail;
        uint64_t held;
} bg_hold = { .tail = &bg_hold.first };

static void unit_complete(struct exec_unit *u, struct exec *x);

void sched_hold_background(struct exec *x, int on)
{
        bg_hold.on = on;
        while (!on && bg_hold.first) {
                struct exec_unit *u = bg_hold.first;
                bg_hold.first = u->next;
                if (!bg_hold.first)
                        bg_hold.tail = &bg_hold.first;
                u->next = NULL;
                unit_complete(u, x);
        }
}

uint64_t sched_held_background(void)
{
        return bg_hold.held;
}

void sched_unit_complete(struct exec_unit *u, void *userdata)
{
        /* on as well when a window opened meanwhile: the loop thread polls once back */
        if (u->background && (bg_hold.on || lcpoll_until(now_ns(), sched_getcpu()))) {
                u->next = NULL;
                *bg_hold.tail = u;
                bg_hold.tail = &u->next;
                bg_hold.held++;
                return;
        }
        unit_complete(u, userdata);
}

static void unit_complete(struct exec_unit *u, struct exec *x)
{
        struct sched_unit *su = u->owner;
        struct stream *st = su->st;
        struct device *dev = st->dev;
        uint64_t dur = u->end_ns - u->start_ns;

        TAILQ_REMOVE(&inflight, su, inflight_link);
        if (u->ran_inline)
                inline_done(st, su);
        if (st->tenant && unit_is_graph(su)) {
                st->tenant->graph_units--;
                unpark_tenant(x, st->tenant);
        }
        pd_finish(&dev->pd, st->q.tenant, u->engine, u->cores, su->est_ns, dur, u->end_ns);
        for (int i = 0; i < u->cores; i++)
                pd_host_give(&dev->pd, u->background);
        dev->busy_ns[u->engine] += dur * (uint64_t)u->cores;
        st->running = NULL;
        if (--st->nrunning > 0) { /* other tiles of its head task still run */
                struct sched_unit *o;
                TAILQ_FOREACH(o, &inflight, inflight_link)
                        if (o->st == st) {
                                st->running = &o->u;
                                break;
                        }
        }
        if (u->end_ns > st->last_end_ns)
                st->last_end_ns = u->end_ns;
        if (su->tile_task) {
                struct task *t = su->tile_task;
                calibrate(x, dev, su, t);
                if (t->steps && u->yieldable) {
                        gang_back(t, su);
                } else if (t->steps) {
                        steps_complete(t, su, 0, u->nitems);
                        t->tiles_done += (uint64_t)u->nitems;
                } else {
                        int status = su->tile.status;
                        t->tiles_done++;
                        if (status && !t->item.status) { /* the first failure names the task's */
                                snprintf(t->item.err, sizeof(t->item.err), "%s", su->tile.err);
                                t->item.status = status;
                        }
                        if (status)
                                t->tile_failed = 1;
                }
                if (t->tile_failed) /* it was ready for more tiles: no more */
                        pd_queue_unready(&dev->pd, &st->q);
                /* done when every tile returned, or, after a failure, every tile sent */
                if (t->tiles_done == (t->tile_failed ? t->tiles_sent : t->tiles)) {
                        task_account(x, st, t,
                                     t->item.status ? t->item.status : t->tile_failed ? PROTO_E_CANCELLED : 0,
                                     dur, u->end_ns);
                        if (TAILQ_FIRST(&st->tasks) == t)
                                stream_pop(st);
                        task_retire(x, t, t->item.status || t->tile_failed);
                } else if (st->tenant) {
                        st->tenant->dev[dev->id].engine_ns += dur;
                }
        } else {
                for (int i = 0; i < u->nitems; i++) {
                        struct task *t = unit_item_task(su, u->items[i]);
                        if (i == 0)
                                calibrate(x, dev, su, t);
                        if (t == su->run_task) { /* its steps, all in this unit from i on */
                                int n = t->steps->nsteps;
                                steps_complete(t, su, i, n);
                                t->tiles_done += (uint64_t)n;
                                task_account(x, st, t,
                                             t->item.status ? t->item.status
                                             : t->tile_failed ? PROTO_E_CANCELLED : 0,
                                             dur / (uint64_t)u->nitems * (uint64_t)n, u->end_ns);
                                task_retire(x, t, t->item.status || t->tile_failed);
                                i += n - 1;
                                continue;
                        }
                        task_account(x, st, t, t->item.status, dur / (uint64_t)u->nitems, u->end_ns);
                        task_retire(x, t, t->item.status != 0);
                }
        }
        unit_put(su);
        stream_touch(x, st);
        stream_unref(st);
        if (x->obs.unit_done) /* a pending reset ends once the device is idle */
                x->obs.unit_done(x->obs.data, dev);
}

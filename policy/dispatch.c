/* Dispatch policy (see dispatch.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"

void pd_device_init(struct pd_device *dev, const int *cores, double min_share)
{
        memset(dev, 0, sizeof(*dev));
        for (int e = 0; e < PD_ENGINES; e++)
                dev->cores[e] = dev->free[e] = cores[e];
        dev->min_share = min_share;
        dev->decay_ns = 100e6; /* shares are judged over the last ~100 ms */
}

void pd_device_deinit(struct pd_device *dev)
{
        free(dev->ready);
        dev->ready = NULL;
        dev->nready = dev->cap = 0;
}

void pd_set_host_slots(struct pd_device *dev, int slots)
{
        dev->host_slots = slots > 0 ? slots : 0;
}

int pd_host_pool(const struct pd_tenant *t)
{
        return t->klass == POLICY_CLASS_BEST_EFFORT;
}

void pd_host_take(struct pd_device *dev, int pool)
{
        dev->host_busy[pool != 0]++;
}

void pd_host_give(struct pd_device *dev, int pool)
{
        if (dev->host_busy[pool != 0] > 0)
                dev->host_busy[pool != 0]--;
}

int pd_host_waiting(const struct pd_device *dev, int pool)
{
        int best = -1;

        if (!dev->host_slots || dev->host_busy[pool != 0] < dev->host_slots)
                return -1;
        for (int i = 0; i < dev->nready; i++)
                if (pd_host_pool(dev->ready[i]->tenant) == (pool != 0) &&
                    (best < 0 || (int)dev->ready[i]->tenant->klass < best))
                        best = (int)dev->ready[i]->tenant->klass;
        return best;
}

static double min_active_vtime(struct pd_device *dev, enum policy_class k, const struct pd_tenant *skip)
{
        double m = INFINITY;
        for (int i = 0; i < dev->nready; i++) {
                struct pd_tenant *t = dev->ready[i]->tenant;
                if (t != skip && t->klass == k && t->vtime < m)
                        m = t->vtime;
        }
        return m;
}

int pd_queue_ready(struct pd_device *dev, struct pd_queue *q, uint64_t now)
{
        if (q->ready)
                return 0;
        if (dev->nready == dev->cap) {
                int cap = dev->cap ? dev->cap * 2 : 16;
                struct pd_queue **n = realloc(dev->ready, sizeof(*n) * (size_t)cap);
                if (!n)
                        return -ENOMEM;
                dev->ready = n;
                dev->cap = cap;
        }
        struct pd_tenant *t = q->tenant;
        if (t->active == 0) { /* waking up: no credit for the idle time */
                /* Not just the ready tenants' minimum: the others' work may all be running
                 * (a stream is not ready while it runs), and a tenant whose only stream just
                 * finished is "waking" too; lifting it to a ready tenant that is ahead would
                 * undo its weight. The class's start floor is where the others are now. */
                double m = min_active_vtime(dev, t->klass, t);
                double floor = dev->vfloor[t->klass];
                if (isfinite(m) && m < floor)
                        floor = m;
                if (t->vtime < floor)
                        t->vtime = floor;
        }
        t->active++;
        q->ready = 1;
        q->ready_since = now;
        q->index = dev->nready;
        dev->ready[dev->nready++] = q;
        return 0;
}

void pd_queue_unready(struct pd_device *dev, struct pd_queue *q)
{
        if (!q->ready)
                return;
        int i = q->index;
        dev->ready[i] = dev->ready[--dev->nready];
        dev->ready[i]->index = i;
        q->ready = 0;
        q->tenant->active--;
}

static void decay(struct pd_device *dev, uint64_t now)
{
        if (now <= dev->recent_at)
                return;
        double f = exp(-(double)(now - dev->recent_at) / dev->decay_ns);
        for (int k = 0; k < POLICY_CLASS_COUNT; k++)
                dev->class_recent[k] *= f;
        dev->recent_at = now;
}

/* Effective class rank: best-effort under its minimum share jumps the queue. */
static int class_rank(const struct pd_device *dev, enum policy_class k, int be_starved)
{
        if (k == POLICY_CLASS_BEST_EFFORT && be_starved)
                return -1;
        return (int)k;
}

/* Is a better than b? */
static int queue_before(const struct pd_device *dev, const struct pd_queue *a,
                        const struct pd_queue *b, int be_starved)
{
        int ra = class_rank(dev, a->tenant->klass, be_starved);
        int rb = class_rank(dev, b->tenant->klass, be_starved);
        if (ra != rb)
                return ra < rb;
        /* latency-critical work: heads with deadlines first, earliest first, across tenants;
         * the fair order below decides among the rest (a total order, so picks do not
         * depend on the order queues became ready) */
        if (a->tenant->klass == POLICY_CLASS_LATENCY_CRITICAL && (a->deadline || b->deadline)) {
                if (!a->deadline || !b->deadline)
                        return a->deadline != 0;
                if (a->deadline != b->deadline)
                        return a->deadline < b->deadline;
        }
        if (a->tenant != b->tenant && a->tenant->vtime != b->tenant->vtime)
                return a->tenant->vtime < b->tenant->vtime;
        if (a->priority != b->priority)
                return a->priority < b->priority;
        if (a->deadline != b->deadline) {
                if (!a->deadline || !b->deadline)
                        return a->deadline != 0;
                return a->deadline < b->deadline;
        }
        return a->ready_since < b->ready_since;
}

/* Engine with the earliest estimated finish for q; -1 if none can run it. */
static int best_engine(const struct pd_device *dev, const struct pd_queue *q)
{
        int best = -1;
        double best_finish = INFINITY;

        for (int e = 0; e < PD_ENGINES; e++) {
                if (!q->cost[e] || dev->cores[e] <= 0)
                        continue;
                double wait = dev->free[e] > 0 ? 0 : (double)dev->backlog_ns[e] / dev->cores[e];
                double finish = wait + (double)q->cost[e];
                if (finish < best_finish) {
                        best_finish = finish;
                        best = e;
                }
        }
        return best;
}

struct pd_queue *pd_pick(struct pd_device *dev, uint64_t now, int *ret_engine)
{
        int be_starved = 0;
        double total = 0;

        if (dev->nready == 0)
                return NULL;
        decay(dev, now);
        for (int k = 0; k < POLICY_CLASS_COUNT; k++)
                total += dev->class_recent[k];
        if (dev->min_share > 0) {
                int be_waiting = 0;
                for (int i = 0; i < dev->nready && !be_waiting; i++)
                        be_waiting = dev->ready[i]->tenant->klass == POLICY_CLASS_BEST_EFFORT;
                be_starved = be_waiting &&
                             dev->class_recent[POLICY_CLASS_BEST_EFFORT] < dev->min_share * total;
        }
        /* Repeatedly take the best remaining queue; the first whose best engine has a free
         * core wins. Ready sets are small (streams with runnable heads on one device). */
        uint64_t tried_mask_small[8] = { 0 };
        uint64_t *tried = dev->nready <= 512 ? tried_mask_small : calloc((size_t)(dev->nready + 63) / 64, 8);
        struct pd_queue *found = NULL;
        if (!tried)
                return NULL;
        for (int round = 0; round < dev->nready && !found; round++) {
                int bi = -1;
                for (int i = 0; i < dev->nready; i++) {
                        if (tried[i / 64] & (1ull << (i % 64)))
                                continue;
                        if (bi < 0 || queue_before(dev, dev->ready[i], dev->ready[bi], be_starved))
                                bi = i;
                }
                if (bi < 0)
                        break;
                tried[bi / 64] |= 1ull << (bi % 64);
                if (dev->host_slots &&
                    dev->host_busy[pd_host_pool(dev->ready[bi]->tenant)] >= dev->host_slots)
                        continue; /* its workers are all taken; the other pool's may not be */
                int e = best_engine(dev, dev->ready[bi]);
                if (e >= 0 && dev->free[e] > 0) {
                        found = dev->ready[bi];
                        *ret_engine = e;
                }
        }
        if (tried != tried_mask_small)
                free(tried);
        return found;
}

void pd_start(struct pd_device *dev, struct pd_queue *q, int engine, int cores, uint64_t est_ns)
{
        struct pd_tenant *t = q->tenant;

        pd_queue_unready(dev, q);
        if (t->vtime > dev->vfloor[t->klass])
                dev->vfloor[t->klass] = t->vtime;
        t->active++; /* running work keeps the tenant active */
        t->dispatches++;
        dev->free[engine] -= cores;
        dev->backlog_ns[engine] += est_ns;
        t->vtime += (double)est_ns * cores / t->weight;
}

void pd_finish(struct pd_device *dev, struct pd_tenant *t, int engine, int cores,
               uint64_t est_ns, uint64_t actual_ns, uint64_t now)
{
        dev->free[engine] += cores;
        dev->backlog_ns[engine] -= est_ns < dev->backlog_ns[engine] ? est_ns : dev->backlog_ns[engine];
        t->vtime += ((double)actual_ns - (double)est_ns) * cores / t->weight;
        t->used_ns += actual_ns * (uint64_t)cores;
        t->active--;
        decay(dev, now);
        dev->class_recent[t->klass] += (double)actual_ns * cores;
}

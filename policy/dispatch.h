/* Dispatch policy for one device: which ready queue (stream) runs next and on which engine.
 *
 *  - strict priority between classes (latency-critical > normal > best-effort), except that
 *    best-effort work that waits while its recent share of engine time is below min_share
 *    goes first, so it is never starved;
 *  - within a class, weighted fair sharing of engine time between tenants: each tenant has
 *    a virtual time (engine ns / weight) and the smallest goes first; a tenant that was idle
 *    restarts no earlier than the class's current virtual time (the largest at which a
 *    dispatch of the class started, or the smallest of the ready tenants if that is lower),
 *    so idling banks no credit;
 *  - latency-critical queues whose heads have deadlines go earliest deadline first, across
 *    tenants;
 *  - within a tenant, stream priority 0 (highest) to 7, then earliest deadline, then the
 *    longest-waiting queue;
 *  - engine choice: of the engines able to run the head task, the earliest estimated finish
 *    (estimated wait for a core + the task's cost on that engine); a queue whose best engine
 *    has no free core waits for it while other queues use the free cores (work conserving);
 *  - host slots: where the device's work runs on host threads (compute mode), at most
 *    host_slots dispatches of best-effort work and host_slots of other work are out at once,
 *    whatever the engines' core counts: the device never queues more work on the host than
 *    the workers it was given can run, so the next dispatch is always decided by this policy
 *    and not by a queue behind it. Best-effort work runs on background workers that yield
 *    their cores to the others (see daemon/backend/sim.c), hence a count of its own.
 * Pure: no I/O, no clock of its own; the caller passes the time. Used by npud and npusim. */
#ifndef NPU_POLICY_DISPATCH_H
#define NPU_POLICY_DISPATCH_H

#include <stdint.h>

#include "policy.h"

#define PD_ENGINES 4

struct pd_tenant {
        enum policy_class klass;
        double weight;
        double vtime;        /* ns of engine time / weight */
        int active;          /* ready queues + running dispatches */
        uint64_t used_ns;    /* engine ns used on this device */
        uint64_t dispatches;
};

struct pd_queue {
        struct pd_tenant *tenant;
        int priority;                  /* 0..7 */
        uint64_t cost[PD_ENGINES];     /* head's estimated ns per engine; 0 = cannot run there */
        uint64_t deadline;             /* absolute ns, 0 = none */
        uint64_t ready_since;
        int ready;
        int index;                     /* position in the device's ready array */
};

struct pd_device {
        int cores[PD_ENGINES];
        int free[PD_ENGINES];
        uint64_t backlog_ns[PD_ENGINES]; /* estimated ns of dispatched, unfinished work */
        double class_recent[POLICY_CLASS_COUNT]; /* decayed engine ns per class */
        double vfloor[POLICY_CLASS_COUNT]; /* largest virtual time a dispatch started at */
        uint64_t recent_at;
        double min_share;
        struct pd_queue **ready;
        int nready, cap;
        double decay_ns; /* time constant of class_recent */
        int host_slots;  /* dispatches out at once at most; 0 = no limit (model mode) */
        int host_busy[2]; /* dispatches out now: [1] best-effort, [0] the others */
};

void pd_device_init(struct pd_device *dev, const int *cores, double min_share);
void pd_device_deinit(struct pd_device *dev);
/* Limit the dispatches out at once to slots host workers per pool (0: no limit). The pool
 * of a dispatch (pd_host_pool of its tenant: 1 best-effort, 0 the others) is taken when it
 * starts and given back when it ends, by the caller, who keeps it with the dispatch: a
 * reload may change the tenant's class meanwhile. */
void pd_set_host_slots(struct pd_device *dev, int slots);
int pd_host_pool(const struct pd_tenant *t);
void pd_host_take(struct pd_device *dev, int pool);
void pd_host_give(struct pd_device *dev, int pool);
/* The most urgent class (enum policy_class) of the ready queues of pool that wait because
 * the pool's host slots are all taken; -1 when none waits. */
int pd_host_waiting(const struct pd_device *dev, int pool);

/* A queue's head can run (costs filled in) or no longer can. 0 or -ENOMEM. */
int pd_queue_ready(struct pd_device *dev, struct pd_queue *q, uint64_t now);
void pd_queue_unready(struct pd_device *dev, struct pd_queue *q);

/* Choose the next queue and engine; NULL when nothing can start now. The queue stays
 * ready; the caller calls pd_start (which unreadies it) or gives up. */
struct pd_queue *pd_pick(struct pd_device *dev, uint64_t now, int *ret_engine);
/* Account the start of est_ns of work of q's tenant on engine with `cores` cores. */
void pd_start(struct pd_device *dev, struct pd_queue *q, int engine, int cores, uint64_t est_ns);
/* Account its completion: actual engine time (per core), and the estimate given at start. */
void pd_finish(struct pd_device *dev, struct pd_tenant *t, int engine, int cores,
               uint64_t est_ns, uint64_t actual_ns, uint64_t now);

#endif

/* The simulated NPU backend. Each device owns a MAP_NORESERVE reservation as its "HBM" and
 * the engine counts and rates of a published chip profile. In compute mode a pool of host
 * worker threads, shared by all devices and sized to the host, runs the kernels for real; in
 * model mode nothing runs and a unit completes after the duration the cost model gave its
 * items, on a libevent timer. Either way completed units return to the loop thread through
 * a locked list and an eventfd.
 *
 * Faults can be injected per device (enum fault_kind): fail the next N items, fail every item until
 * cleared, or stretch every item's duration by a factor. Worker threads read the fault state
 * while the loop thread changes it, so it is kept in atomics: a fault applies to the items
 * that start after it was set. A slowed unit does not keep a worker asleep (the workers are
 * shared by every device): it computes at full speed and its completion is held back on a
 * timer of the loop thread for the extra time, which clearing the fault or cancelling the
 * unit cuts short.
 *
 * The workers come in two pools of the same size: the foreground pool runs latency-critical
 * and normal work, the background pool best-effort work (exec_unit.background) on threads of
 * the SCHED_IDLE policy (nice 19 where that is refused). The daemon's dispatch policy decides
 * what runs and bounds what each pool is given (host slots, see policy/dispatch.h); the host
 * kernel then makes a background worker give its core up at once to a foreground one, so a
 * best-effort GEMM uses only the cycles nothing else wants, and no dispatched latency-critical
 * task waits for a best-effort tile to finish. Kernels are single-threaded (ops_set_threads(1)):
 * a unit takes exactly the one worker that runs it.
 *
 * Every item runs under a run context (ops/runctx.h): the unit's cancel flag, its deadline
 * (the tenant's longest run) and its memory budget, which long kernels poll. */
#include <errno.h>
#include <math.h>
#include <event2/event.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "util/cpus.h"
#include "util/log.h"
#include "util/prio.h"
#include "util/spin.h"

#include "proto/errors.h"
#include "graph/exec.h"
#include "ops/runctx.h"
#include "backend.h"

struct sim_profile {
        const char *name;
        int cube, vector, aicpu, dma;
        uint64_t mem;
        double clock_mhz;
        double bandwidth;
        uint32_t max_streams;
        /* Board power: idle and limit (W); die temperature at idle and at the limit (C). */
        double idle_w, tdp_w, idle_c, hot_c;
        int hccs; /* parts linked by HCCS (910B: a ring of 8 per server); 0: PCIe only */
};

/* Core counts, memory and clocks of the real parts; rates per core derive from the clock. */
static const struct sim_profile profiles[] = {
        { "910B1", 24, 48, 6, 8, 64ull << 30, 1850, 1.6e12, 1984, 95, 400, 38, 78, 1 },
        { "910B3", 20, 40, 6, 8, 64ull << 30, 1800, 1.6e12, 1984, 90, 350, 37, 76, 1 },
        { "910B4", 20, 40, 6, 8, 32ull << 30, 1500, 0.8e12, 1984, 75, 300, 36, 74, 1 },
        { "310P3", 8, 7, 7, 4, 24000000000ull, 1060, 0.2048e12, 1024, 15, 72, 34, 68, 0 },
};

/* Device addresses of simulated memory start here (a device's memory is [SIM_ADDR_BASE,
 * SIM_ADDR_BASE + mem_size)), far from 0 so that no address reads as a null pointer. */
#define SIM_ADDR_BASE (1ull << 44)

struct sim_device {
        struct backend_device_desc desc;
        uint8_t *mem; /* the host-visible reservation standing in for HBM */
        atomic_int fail_next;   /* items still to fail (FAULT_FAIL_NEXT) */
        atomic_int failed;      /* every item fails (FAULT_FAIL_DEVICE) */
        atomic_uint_fast64_t slow_milli; /* duration factor × 1000 (FAULT_SLOW); 0 = none */
        atomic_uint_fast64_t ecc_corrected, ecc_uncorrected; /* injected ECC events */
        /* Telemetry (loop thread): core-ns of completed units per engine, and the thermal
         * state brought forward at each health call. */
        uint64_t busy_ns[OPS_ENGINE_COUNT], therm_busy[OPS_ENGINE_COUNT], therm_ns;
        double temp_c, power_w;
};

/* Thermal time constant of the board and heat sink: the die temperature moves towards the
 * power's steady-state temperature by 1 - e^(-dt/tau) in dt. */
#define SIM_THERMAL_TAU_S 15.0

/* A unit held back on the loop thread: a slowed device's extra time (compute mode), or the
 * whole modelled duration (model mode). */
struct sim_hold {
        struct sim *sim;
        struct exec_unit *unit;
        struct event *ev;
        int model;     /* model mode: items take effect when the time is up */
        int over_limit; /* model mode: the modelled time exceeds the run limit */
        struct sim_hold *prev, *next;
};

/* Partitions of the host workers at most (thread_plan_make), and so queues */
#define SIM_MAX_PARTS 32
#define SIM_QUEUES (2 * SIM_MAX_PARTS)

/* CPUs (numbered below this) whose idle workers may relay a completion (done_push) */
#define SIM_RELAY_CPUS 64

struct sim {
        struct backend base;
        struct event_base *evbase;
        int mode;
        int ndevices;
        struct sim_device *devices;
        backend_complete_fn complete;
        void *userdata;
        const struct sim_profile *profile;
        /* the daemon's completion callback; complete above counts the busy time first */
        backend_complete_fn up_complete;
        void *up_userdata;

        /* worker pool (compute mode) */
        pthread_t *threads;
        int nthreads;
        pthread_mutex_t lock;
        /* One queue per pool: pool 2p is partition p's foreground workers, 2p + 1 its
         * background ones (thread_plan_make, dev_queue) */
        pthread_cond_t cond[SIM_QUEUES];
        struct exec_unit *queue_head[SIM_QUEUES], *queue_tail[SIM_QUEUES];
        atomic_int queued[SIM_QUEUES]; /* units in each queue, for workers looking without the lock */
        int nparts;      /* partitions of the host workers: 1, or one per device (dev_queue) */
        /* per partition: its CPUs, its background workers running a unit, and when one last
         * started or ended one (sim_busy_cpus) */
        cpu_set_t part_cpus[SIM_MAX_PARTS];
        atomic_int part_bg_running[SIM_MAX_PARTS];
        _Atomic uint64_t part_bg_last[SIM_MAX_PARTS];
        atomic_int bg_running; /* background workers running a unit (idle_spin_ns) */
        struct sim_pool {
                struct sim *s;
                int q; /* its queue; odd: background */
        } pools[SIM_QUEUES];
        int stopping;

        /* completions back to the loop */
        pthread_mutex_t done_lock;
        struct exec_unit *done;
        int efd;
        struct event *efd_event;
        /* completion relay (done_push): the CPU the loop thread last ran on, the workers
         * spinning idle on each CPU, and the slot a unit waits in for one of them */
        atomic_int loop_cpu;
        atomic_int idle_on[SIM_RELAY_CPUS];
        _Atomic(struct exec_unit *) relay;
        /* run_on_cpu's one request (the loop thread posts one at a time): its state (enum
         * oncpu_state), the CPU it is for, and what to run */
        struct {
                atomic_int state, cpu;
                void (*fn)(void *arg);
                void *arg;
        } oncpu;

        struct sim_hold *holds; /* loop thread only */
};

int sim_profile_valid(const char *profile)
{
        for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
                if (strcmp(profiles[i].name, profile) == 0)
                        return 1;
        return 0;
}

/* The host view of a device address of device d (bounds were checked when the task was
 * prepared). */
static inline void *sim_ptr(const struct sim_device *d, uint64_t addr)
{
        return d->mem + (addr - SIM_ADDR_BASE);
}

static void item_run(const struct sim_device *d, struct exec_item *it)
{
        switch (it->kind) {
        case EXEC_COPY: {
                void *dst = it->host_end == EXEC_HOST_DST ? (void *)(uintptr_t)it->dst : sim_ptr(d, it->dst);
                const void *src = it->host_end == EXEC_HOST_SRC ? (const void *)(uintptr_t)it->src
                                                                : sim_ptr(d, it->src);
                memmove(dst, src, it->len);
                break;
        }
        case EXEC_MEMSET:
                memset(sim_ptr(d, it->dst), it->value, it->len);
                break;
        case EXEC_OP: {
                struct ops_call call; /* only the part up to the counts is written */
                exec_call_unpack(it->call, &call, d->mem, SIM_ADDR_BASE);
                if (ops_run(ops_by_id(it->op_id), &call, it->err, sizeof(it->err)) < 0)
                        it->status = PROTO_E_EXEC;
                break;
        }
        case EXEC_GRAPH: {
                /* the binding names device addresses; the executor gets host views */
                const struct graph_bind *b = it->graph;
                struct graph_bind local;
                memcpy(&local, b, offsetof(struct graph_bind, t)); /* every field but t */
                for (int i = 0; i < b->nin + b->nout; i++) {
                        local.t[i] = b->t[i];
                        if (b->t[i].data)
                                local.t[i].data = sim_ptr(d, exec_tensor_addr(&b->t[i]));
                }
                it->status = graph_exec_bound(&local, it->err, sizeof(it->err));
                break;
        }
        case EXEC_GRAPH_STEP: {
                /* only the binding step reads the tensors, as host views */
                struct graph_bind *b = it->graph;
                struct ops_tensor host[GRAPH_MAX_IO];
                if (it->step == 0)
                        for (int i = 0; i < b->nin + b->nout; i++) {
                                host[i] = b->t[i];
                                if (b->t[i].data)
                                        host[i].data = sim_ptr(d, exec_tensor_addr(&b->t[i]));
                        }
                it->status = graph_run_step_part(b, it->step, it->part, it->nparts > 1 ? it->nparts : 1,
                                                 host, it->err, sizeof(it->err));
                break;
        }
        }
}

/* Does an injected fault make this item fail? Then its status says so. A fail-next count is
 * taken with a compare-and-swap so that concurrent workers fail exactly N items. */
static int item_fault(struct sim *s, int device, struct exec_item *it)
{
        struct sim_device *sd = &s->devices[device];
        int n;

        if (atomic_load(&sd->failed)) {
                it->status = PROTO_E_DEVICE;
                snprintf(it->err, sizeof(it->err), "injected fault: device %d has failed", device);
                return 1;
        }
        n = atomic_load(&sd->fail_next);
        while (n > 0 && !atomic_compare_exchange_weak(&sd->fail_next, &n, n - 1))
                ;
        if (n > 0) {
                it->status = PROTO_E_DEVICE;
                snprintf(it->err, sizeof(it->err), "injected fault");
                return 1;
        }
        return 0;
}

static double slow_factor(struct sim *s, int device)
{
        uint64_t m = atomic_load(&s->devices[device].slow_milli);
        return m ? (double)m / 1000.0 : 1.0;
}

/* CPU time of the calling thread (ns). */
static uint64_t thread_cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Run item it (or a part of it: it is then the part's own item) of u under rc. A graph
 * run's steps share the run's time limit, which the daemon gives the unit (what is left of
 * the tenant's max_run_ms): they stop at the unit's start plus that limit; any other item
 * gets the whole limit from its own start. Returns the time a slowed device would have
 * added. */
static uint64_t item_exec(struct sim *s, struct exec_unit *u, struct exec_item *it,
                          struct ops_runctx *rc)
{
        uint64_t t0 = now_ns();
        /* A slowed device stretches the item's device time: what the cost model gives it (as
         * in model mode), else the worker's CPU time on it. Host time would carry the host's
         * noise into the stretch: a worker preempted for 100 us, or a first touch of device
         * memory faulting in a 2 MB page, became seconds at a factor of 30000 (CI,
         * test_hostile_run/test_slow_fault_isolated_compute). */
        uint64_t c0 = slow_factor(s, u->device) > 1.0 && !it->model_ns ? thread_cpu_ns() : 0;

        rc->deadline_ns = !u->max_run_ns ? 0
                          : it->kind == EXEC_GRAPH_STEP ? u->start_ns + u->max_run_ns
                                                        : t0 + u->max_run_ns;
        rc->code = 0;
        ops_runctx_set(rc);
        item_run(&s->devices[u->device], it);
        /* a kernel that stopped because it was told to fails with the reason's code; copy
         * loops, fills and reductions stop quietly, and their partial output must never
         * count as a success */
        if (rc->code && (it->status == 0 || it->status == PROTO_E_EXEC)) {
                if (!it->status || !it->err[0])
                        snprintf(it->err, sizeof(it->err), "%s", ops_runctx_reason(rc->code));
                it->status = rc->code;
        }
        ops_runctx_set(NULL);
        /* A slowed device: the unit ends as late as the slow device would finish it. */
        double f = slow_factor(s, u->device);
        if (f <= 1.0)
                return 0;
        uint64_t ran = it->model_ns;
        if (!ran) {
                uint64_t c1 = thread_cpu_ns();
                ran = c0 && c1 > c0 ? c1 - c0 : now_ns() - t0;
        }
        return (uint64_t)((double)ran * (f - 1.0));
}

/* Run the items of u with its limits in force. A slowed device's extra time goes into
 * u->end_ns, in the future. */
static void unit_run(struct sim *s, struct exec_unit *u)
{
        struct ops_runctx rc = { .cancel = &u->cancel, .max_loop_trips = u->max_loop_trips,
                                 .mem = u->mem };
        uint64_t delay_ns = 0;
        int failed = 0;

        u->start_ns = now_ns();
        for (int i = 0; i < u->nitems; i++) {
                struct exec_item *it = u->items[i];
                if (failed || atomic_load(&u->cancel)) {
                        it->status = PROTO_E_CANCELLED;
                        if (!failed)
                                snprintf(it->err, sizeof(it->err), "cancelled before it ran");
                        failed = 1;
                        continue;
                }
                if (item_fault(s, u->device, it)) {
                        failed = 1;
                        continue;
                }
                delay_ns += item_exec(s, u, it, &rc);
                failed = it->status != 0;
        }
        u->nrun = u->nitems;
        u->end_ns = now_ns() + delay_ns; /* later than now: on_done holds the unit back */
}

/* unit_run, noting the CPU time it took (u->cpu_ns), with what a slowed device adds */
static void unit_run_timed(struct sim *s, struct exec_unit *u)
{
        uint64_t c0 = thread_cpu_ns();

        unit_run(s, u);
        uint64_t c1 = thread_cpu_ns(), now = now_ns();
        u->cpu_ns = (c1 > c0 ? c1 - c0 : 1) + (u->end_ns > now ? u->end_ns - now : 0);
}

/* ---- gang units: one unit run by several workers at once ----
 *
 * The workers of a gang go through its items in order together: each claims parts of the
 * current item (an atomic counter) until none is left, and the one that finishes its last
 * part moves the gang on to the next item. A worker with nothing left to claim spins for
 * GANG_SPIN_NS, then sleeps on a futex until the item is done: a graph run's steps follow
 * each other within microseconds instead of a round trip through the loop thread per step,
 * and no vCPU of a virtual machine halts between them (waking one costs tens of
 * microseconds). A worker that waits leaves the gang when other work is queued in its
 * pool, unless it is the last one in it. A gang unit is queued once; the workers that take
 * it while it has tickets left (exec_unit.gang in all) join it. */
#define GANG_SPIN_NS 300000
#define GANG_NAP_NS 200000 /* a sleeping worker looks again for work of its pool this often */

static long futex_op(atomic_int *addr, int op, int val, const struct timespec *ts)
{
        return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* The first failure of an item whose parts run on several workers is the item's. */
static void item_fail_once(struct exec_item *it, int code, const char *msg)
{
        int zero = 0;

        if (atomic_compare_exchange_strong(&it->g_failed, &zero, 1)) {
                snprintf(it->err, sizeof(it->err), "%s", msg);
                it->status = code;
        }
}

/* Run part p of np of item it of gang unit u (np 1: the item itself, claimed by one
 * worker only). */
static void gang_part(struct sim *s, struct exec_unit *u, struct exec_item *it, int p, int np,
                      struct ops_runctx *rc)
{
        struct exec_item part;

        if (atomic_load(&u->cancel)) {
                item_fail_once(it, PROTO_E_CANCELLED, "cancelled before it ran");
                return;
        }
        if (np == 1) {
                if (!item_fault(s, u->device, it))
                        atomic_fetch_add(&u->g_delay, item_exec(s, u, it, rc));
                return;
        }
        memset(&part, 0, offsetof(struct exec_item, err) + 1);
        if (p == 0 && item_fault(s, u->device, &part)) {
                item_fail_once(it, part.status, part.err);
                return;
        }
        part.kind = it->kind;
        part.graph = it->graph;
        part.step = it->step;
        part.part = p;
        part.nparts = np;
        part.model_ns = it->model_ns / (uint64_t)np;
        atomic_fetch_add(&u->g_delay, item_exec(s, u, &part, rc));
        if (part.status)
                item_fail_once(it, part.status, part.err);
}

/* Has the daemon asked u to yield, and is it time? */
static int gang_yield_now(struct exec_unit *u)
{
        uint64_t y = u->yieldable ? atomic_load(&u->yield_ns) : 0;

        return y && now_ns() >= y;
}

/* Item i of u is done (every part it takes back; fewer than its parts when the gang
 * yields within it): free what a graph step read for the last time, and move the gang to
 * the next item, or end it after a failure, a cancel, or when the daemon asked it to yield.
 * Exactly one worker gets here per item (g_end). */
static void gang_next(struct exec_unit *u, int i)
{
        struct exec_item *it = u->items[i];
        int np = it->nparts > 1 ? it->nparts : 1, done = atomic_load(&it->g_limit), next = i + 1;

        if (done < np && !it->status) { /* yielded within the item: parts 0 .. done-1 ran */
                u->nrun = i;
                u->partial = done;
                next = u->nitems;
        } else {
                if (!it->status && it->step_done_here)
                        graph_run_step_done(it->graph, it->step);
                u->nrun = i + 1;
        }
        if (next < u->nitems && (it->status || atomic_load(&u->cancel))) {
                for (int j = next; j < u->nitems; j++) { /* as unit_run: the rest is cancelled */
                        u->items[j]->status = PROTO_E_CANCELLED;
                        if (!it->status && j == next)
                                snprintf(u->items[j]->err, sizeof(u->items[j]->err),
                                         "cancelled before it ran");
                }
                u->nrun = u->nitems;
                next = u->nitems;
        } else if (next < u->nitems && gang_yield_now(u)) {
                next = u->nitems; /* the items from nrun on did not start */
        }
        atomic_store(&u->g_cur, next);
        if (atomic_load(&u->g_waiters))
                futex_op(&u->g_cur, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

/* The item is done once g_done reaches g_limit; whoever sees that first moves the gang on. */
static void gang_try_next(struct exec_unit *u, int i)
{
        struct exec_item *it = u->items[i];

        if (atomic_load(&it->g_done) == atomic_load(&it->g_limit) && !atomic_exchange(&it->g_end, 1))
                gang_next(u, i);
}

/* Other work waits in queue q while this worker waits in gang u: leave it, unless the
 * worker is the last one in it. */
static int gang_leave(struct sim *s, struct exec_unit *u, int q)
{
        int left = 0;

        if (atomic_load_explicit(&s->queued[q], memory_order_relaxed) <= (u->g_tickets > 0))
                return 0; /* a hint; the lock decides */
        pthread_mutex_lock(&s->lock);
        struct exec_unit *h = s->queue_head[q];
        if (h && (h != u || h->next) && u->g_members > 1) {
                u->g_members--;
                left = 1;
        }
        pthread_mutex_unlock(&s->lock);
        return left;
}

/* Wait until item i of u is done (or leave the gang for other work: 1). */
static int gang_wait(struct sim *s, struct exec_unit *u, int i, int q)
{
        uint64_t t0 = now_ns();
        const struct timespec nap = { 0, GANG_NAP_NS };

        while (atomic_load(&u->g_cur) == i) {
                if (gang_leave(s, u, q))
                        return 1;
                uint64_t waited = now_ns() - t0;
                if (waited < GANG_SPIN_NS) {
                        spin_turn(waited);
                        continue;
                }
                atomic_fetch_add(&u->g_waiters, 1);
                futex_op(&u->g_cur, FUTEX_WAIT_PRIVATE, i, &nap);
                atomic_fetch_sub(&u->g_waiters, 1);
        }
        return 0;
}

/* Claims at or past this close a split item: no part is claimed any more. */
#define GANG_CLOSED (1 << 24)

/* A worker in gang unit u until the unit is over (0) or it left for other work (1). */
static int gang_work(struct sim *s, struct exec_unit *u, int q)
{
        struct ops_runctx rc = { .cancel = &u->cancel, .max_loop_trips = u->max_loop_trips,
                                 .mem = u->mem };

        for (;;) {
                int i = atomic_load(&u->g_cur);
                if (i >= u->nitems)
                        return 0;
                struct exec_item *it = u->items[i];
                int np = it->nparts > 1 ? it->nparts : 1, p;
                if (np > 1 && gang_yield_now(u)) {
                        /* asked to yield within a split step: the parts claimed so far finish,
                         * the others are left to the daemon */
                        p = atomic_fetch_add(&it->g_claim, GANG_CLOSED);
                        if (p < np) {
                                atomic_store(&it->g_limit, p);
                                gang_try_next(u, i);
                        }
                } else if ((p = atomic_fetch_add(&it->g_claim, 1)) < np) {
                        gang_part(s, u, it, p, np, &rc);
                        atomic_fetch_add(&it->g_done, 1);
                        gang_try_next(u, i);
                        continue;
                }
                if (gang_wait(s, u, i, q))
                        return 1;
        }
}

/* u goes to the done list; the loop thread's on_done takes it. From the loop thread itself
 * (a unit run inline) the event is made active instead of the eventfd written: on_done runs
 * later in the same pass, without a system call and a look at epoll. It is made active with
 * EV_TIMEOUT, not EV_READ, so that on_done reads the eventfd only when epoll found it
 * readable (a worker wrote it), not after every inline unit as well. */
static void done_list_push(struct sim *s, struct exec_unit *u)
{
        int wake;

        pthread_mutex_lock(&s->done_lock);
        wake = s->done == NULL;
        u->next = s->done;
        s->done = u;
        pthread_mutex_unlock(&s->done_lock);
        if (wake && u->ran_inline) {
                event_active(s->efd_event, EV_TIMEOUT, 1);
        } else if (wake) {
                uint64_t one = 1;
                while (write(s->efd, &one, sizeof(one)) < 0 && errno == EINTR)
                        ;
        }
}

/* ---- completion relay ----
 *
 * Waking a thread that sleeps on another CPU costs an inter-processor interrupt, and on a
 * virtual machine that takes 30-60 microseconds (measured here: 1.5 us p50 for a wake-up on
 * the waker's own CPU, 30-45 us across CPUs), as much as the rest of a small request's
 * round trip. So a worker that finishes a unit on another CPU than the loop thread's hands
 * it, when a foreground worker spins idle on the loop thread's CPU, to that worker, which
 * wakes the loop thread from there (and yields to it). A unit in the slot belongs to
 * whoever takes it out: the idle worker, or the finishing worker itself after RELAY_WAIT_NS
 * (it then pushes whatever it took, its unit or another worker's), so every unit is pushed
 * exactly once. */
#define RELAY_WAIT_NS 8000

static int relay_cpu(int cpu)
{
        return cpu >= 0 && cpu < SIM_RELAY_CPUS;
}

static void done_push(struct sim *s, struct exec_unit *u)
{
        int lc = atomic_load_explicit(&s->loop_cpu, memory_order_relaxed), me = sched_getcpu();
        struct exec_unit *none = NULL;

        if (relay_cpu(lc) && me != lc && atomic_load_explicit(&s->idle_on[lc], memory_order_relaxed) > 0 &&
            atomic_compare_exchange_strong(&s->relay, &none, u)) {
                uint64_t t0 = now_ns();
                while (atomic_load_explicit(&s->relay, memory_order_acquire) == u && now_ns() - t0 < RELAY_WAIT_NS)
                        __builtin_ia32_pause();
                u = atomic_exchange(&s->relay, NULL);
                if (!u)
                        return; /* taken: pushed from the loop thread's CPU */
        }
        done_list_push(s, u);
        if (me == lc)
                sched_yield(); /* the loop thread was woken here: let it run now */
}

/* ---- running a call on another CPU (run_on_cpu) ----
 *
 * The loop thread posts the call; a foreground worker spinning idle on that CPU takes it
 * (posted -> taken), runs it and marks it done; the loop thread waits for that, or takes the
 * call back (posted -> free) when no worker took it within RELAY_WAIT_NS. */
enum oncpu_state { ONCPU_FREE = 0, ONCPU_POSTED, ONCPU_TAKEN, ONCPU_DONE };

static void oncpu_take(struct sim *s, int cpu)
{
        int posted = ONCPU_POSTED;

        if (atomic_load_explicit(&s->oncpu.state, memory_order_acquire) != ONCPU_POSTED ||
            atomic_load_explicit(&s->oncpu.cpu, memory_order_relaxed) != cpu || sched_getcpu() != cpu ||
            !atomic_compare_exchange_strong(&s->oncpu.state, &posted, ONCPU_TAKEN))
                return;
        s->oncpu.fn(s->oncpu.arg);
        atomic_store_explicit(&s->oncpu.state, ONCPU_DONE, memory_order_release);
        sched_yield(); /* whoever fn woke here runs now */
}

static int sim_run_on_cpu(struct backend *b, int cpu, void (*fn)(void *arg), void *arg)
{
        struct sim *s = (struct sim *)b;
        int posted = ONCPU_POSTED;

        if (s->mode != 0 || !relay_cpu(cpu) || cpu == sched_getcpu() ||
            atomic_load_explicit(&s->idle_on[cpu], memory_order_relaxed) <= 0)
                return 0;
        s->oncpu.fn = fn;
        s->oncpu.arg = arg;
        atomic_store_explicit(&s->oncpu.cpu, cpu, memory_order_relaxed);
        atomic_store_explicit(&s->oncpu.state, ONCPU_POSTED, memory_order_release);
        uint64_t t0 = now_ns();
        while (atomic_load_explicit(&s->oncpu.state, memory_order_acquire) == ONCPU_POSTED &&
               now_ns() - t0 < RELAY_WAIT_NS)
                __builtin_ia32_pause();
        if (atomic_compare_exchange_strong(&s->oncpu.state, &posted, ONCPU_FREE))
                return 0; /* nobody took it */
        while (atomic_load_explicit(&s->oncpu.state, memory_order_acquire) != ONCPU_DONE)
                __builtin_ia32_pause();
        atomic_store_explicit(&s->oncpu.state, ONCPU_FREE, memory_order_relaxed);
        return 1;
}

/* An idle worker on CPU cpu: push the unit in the relay slot if the loop thread is here. */
static void relay_take(struct sim *s, int cpu)
{
        if (!atomic_load_explicit(&s->relay, memory_order_relaxed) ||
            atomic_load_explicit(&s->loop_cpu, memory_order_relaxed) != cpu || sched_getcpu() != cpu)
                return;
        struct exec_unit *u = atomic_exchange(&s->relay, NULL);
        if (u) {
                done_list_push(s, u);
                sched_yield();
        }
}

/* Note the loop thread's CPU (the loop thread calls this before it may sleep). */
static void note_loop_cpu(struct sim *s)
{
        atomic_store_explicit(&s->loop_cpu, sched_getcpu(), memory_order_relaxed);
}

/* A background worker yields its core to any other runnable thread of the host (prio_idle).
 * One way: a thread may not rise again without privilege, so the pools never swap threads. */
static void background_thread(void)
{
        if (prio_idle() != 0)
                log_warn("background worker: cannot lower its priority: %s", strerror(errno));
}

/* A worker whose queue is empty looks again for this long before it sleeps: the next unit
 * of a run or a request usually comes within it, and waking a sleeping worker (a halted
 * vCPU) costs tens of microseconds. */
#define IDLE_SPIN_NS 300000
#define IDLE_SPIN_BG_NS 150000 /* idle_spin_ns */

/* How long an idle foreground worker spins: IDLE_SPIN_NS, or IDLE_SPIN_BG_NS while
 * background workers run a unit. Each spinning turn past the first 20 µs yields, and under
 * the fair scheduler the yield hands the CPU back to the spinner almost at once, taking it
 * from the background unit: spinning 300 µs after every latency-critical request 2 ms apart
 * cost a best-effort load up to a fifth of its throughput. A shorter spin still covers the
 * gap between the units of one request (its copies and run, a client round trip apart);
 * spinning only 20 µs did not, and the wake-ups added to the requests' tail (isolation, BE
 * on the other device: LC p99 1.3 times its figure alone, against 0.6-0.9 times). */
static uint64_t idle_spin_ns(struct sim *s, int bg)
{
        return !bg && atomic_load_explicit(&s->bg_running, memory_order_relaxed) > 0 ? IDLE_SPIN_BG_NS : IDLE_SPIN_NS;
}

/* The queue of device dev's units, background or not: its partition's pool. */
static int dev_queue(const struct sim *s, int dev, int bg)
{
        return 2 * (s->nparts > 1 && dev >= 0 && dev < s->ndevices ? dev : 0) + bg;
}

static void queue_remove_head(struct sim *s, int q)
{
        struct exec_unit *u = s->queue_head[q];

        s->queue_head[q] = u->next;
        if (!s->queue_head[q])
                s->queue_tail[q] = NULL;
        atomic_fetch_sub(&s->queued[q], 1);
}

/* A background worker of queue q starts or ends a unit. */
static void bg_begin(struct sim *s, int q)
{
        atomic_fetch_add(&s->bg_running, 1);
        atomic_fetch_add(&s->part_bg_running[q / 2], 1);
        atomic_store_explicit(&s->part_bg_last[q / 2], now_ns(), memory_order_relaxed);
}

static void bg_end(struct sim *s, int q)
{
        atomic_fetch_sub(&s->bg_running, 1);
        atomic_store_explicit(&s->part_bg_last[q / 2], now_ns(), memory_order_relaxed);
        atomic_fetch_sub(&s->part_bg_running[q / 2], 1);
}

/* A partition whose background workers ran a unit this recently counts as busy: between
 * two units of a best-effort load its workers are idle for microseconds. */
#define SIM_BG_RECENT_NS (20ull * 1000 * 1000)

static int sim_busy_cpus(struct backend *b, cpu_set_t *ret, uint64_t now)
{
        struct sim *s = (struct sim *)b;

        CPU_ZERO(ret);
        if (!s->nthreads)
                return 0;
        for (int p = 0; p < s->nparts; p++)
                if (atomic_load_explicit(&s->part_bg_running[p], memory_order_relaxed) > 0 ||
                    now - atomic_load_explicit(&s->part_bg_last[p], memory_order_relaxed) < SIM_BG_RECENT_NS)
                        CPU_OR(ret, ret, &s->part_cpus[p]);
        return 1;
}

static void *worker_main(void *arg)
{
        struct sim_pool *pool = arg;
        struct sim *s = pool->s;
        const int q = pool->q, bg = q & 1;

        prio_normal(); /* whoever started the worker */
        if (bg)
                background_thread();
        pthread_mutex_lock(&s->lock);
        for (;;) {
                if (!s->queue_head[q] && !s->stopping) {
                        uint64_t t0 = now_ns();
                        pthread_mutex_unlock(&s->lock);
                        uint64_t waited;
                        /* a foreground worker relays completions (a background one, at
                         * idle priority, may not get its CPU in time) */
                        int cpu = bg ? -1 : sched_getcpu();
                        if (relay_cpu(cpu))
                                atomic_fetch_add(&s->idle_on[cpu], 1);
                        while (!atomic_load_explicit(&s->queued[q], memory_order_relaxed) &&
                               (waited = now_ns() - t0) < idle_spin_ns(s, bg)) {
                                if (relay_cpu(cpu)) {
                                        relay_take(s, cpu);
                                        oncpu_take(s, cpu);
                                }
                                spin_turn(waited);
                        }
                        if (relay_cpu(cpu))
                                atomic_fetch_sub(&s->idle_on[cpu], 1);
                        pthread_mutex_lock(&s->lock);
                }
                while (!s->queue_head[q] && !s->stopping)
                        pthread_cond_wait(&s->cond[q], &s->lock);
                if (!s->queue_head[q])
                        break;
                struct exec_unit *u = s->queue_head[q];
                if (u->gang < 1) {
                        queue_remove_head(s, q);
                        pthread_mutex_unlock(&s->lock);
                        if (bg)
                                bg_begin(s, q);
                        unit_run_timed(s, u);
                        if (bg)
                                bg_end(s, q);
                        done_push(s, u);
                        pthread_mutex_lock(&s->lock);
                        continue;
                }
                /* a gang: the unit stays at the head while other workers may join it */
                if (--u->g_tickets > 0)
                        pthread_cond_signal(&s->cond[q]);
                else
                        queue_remove_head(s, q);
                if (u->g_members++ == 0)
                        u->start_ns = now_ns();
                pthread_mutex_unlock(&s->lock);
                if (bg)
                        bg_begin(s, q);
                int left = gang_work(s, u, q);
                if (bg)
                        bg_end(s, q);
                pthread_mutex_lock(&s->lock);
                if (left)
                        continue;
                if (u->g_tickets > 0) { /* over before every worker came: no more joins */
                        u->g_tickets = 0;
                        queue_remove_head(s, q); /* it is still the head */
                }
                if (--u->g_members == 0) {
                        pthread_mutex_unlock(&s->lock);
                        u->end_ns = now_ns() + atomic_load(&u->g_delay);
                        done_push(s, u);
                        pthread_mutex_lock(&s->lock);
                }
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

/* ---- worker placement ----
 *
 * Worker i of each pool runs on the i-th CPU the daemon may use (its affinity at start,
 * which a cpuset or systemd's CPUAffinity= sets), round robin when there are more workers
 * than CPUs. Left to the kernel, two workers spinning idle on one CPU stay there (each is
 * cache hot, so neither the idle balance nor the periodic one moves it) while another CPU
 * idles: the parts of a split step then take turns instead of running at once, and every
 * wake-up between the loop thread, the workers and a client crosses CPUs. The loop thread
 * and clients are left free. NPUD_WORKER_PIN=0 leaves the workers free too (before/after
 * figures). */
struct worker_cpus {
        int n;
        int cpu[CPU_SETSIZE];
};

static void worker_cpus_init(struct worker_cpus *wc)
{
        const char *env = getenv("NPUD_WORKER_PIN");
        cpu_set_t set;

        wc->n = 0;
        if ((env && strcmp(env, "0") == 0) || sched_getaffinity(0, sizeof(set), &set) != 0)
                return;
        for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &set))
                        wc->cpu[wc->n++] = c;
}

static void worker_pin(const struct worker_cpus *wc, pthread_t th, int i)
{
        cpu_set_t one;
        int e;

        if (wc->n < 2) /* one CPU (or none known): nothing to place */
                return;
        CPU_ZERO(&one);
        CPU_SET(wc->cpu[i % wc->n], &one);
        if ((e = pthread_setaffinity_np(th, sizeof(one), &one)) != 0)
                log_warn("worker %d: cannot keep it on CPU %d: %s", i, wc->cpu[i % wc->n], strerror(e));
}

/* The worker threads of a pool: n of them; thread t serves partition part[t] and is kept on
 * the CPU of worker slot slot[t] (worker_pin). Shared (one partition): a thread per slot.
 * Partitioned: partition p owns workers / parts slots (the remainder to the first ones) and
 * has a thread per slot, but two at least, so that one endless unit never holds the only
 * worker of a device (the second shares the CPU with it). */
struct thread_plan {
        int n;
        int *part, *slot;
};

static int part_threads(int size, int parts)
{
        return parts > 1 && size < 2 ? 2 : size;
}

static int thread_plan_make(struct thread_plan *tp, int workers, int parts)
{
        int per = workers / parts, extra = workers % parts, n = 0;

        for (int p = 0; p < parts; p++)
                n += part_threads(per + (p < extra), parts);
        tp->part = calloc((size_t)n, sizeof(int));
        tp->slot = calloc((size_t)n, sizeof(int));
        if (!tp->part || !tp->slot)
                return -ENOMEM;
        tp->n = 0;
        for (int p = 0, first = 0; p < parts; p++) {
                int size = per + (p < extra), threads = part_threads(size, parts);
                for (int k = 0; k < threads; k++) {
                        tp->part[tp->n] = p;
                        tp->slot[tp->n++] = first + k % size;
                }
                first += size;
        }
        return 0;
}

static void thread_plan_free(struct thread_plan *tp)
{
        free(tp->part);
        free(tp->slot);
}

/* Each device's host workers and their CPUs, in its description (npuctl devices --json). */
static void describe_parts(struct sim *s, const struct thread_plan *tp, const struct worker_cpus *wc)
{
        for (int d = 0; d < s->ndevices; d++) {
                struct backend_device_desc *desc = &s->devices[d].desc;
                cpu_set_t set;
                size_t len = 0;

                CPU_ZERO(&set);
                desc->host_workers = 0;
                for (int t = 0; t < tp->n; t++)
                        if (2 * tp->part[t] == dev_queue(s, d, 0)) {
                                desc->host_workers++;
                                if (wc->n >= 2)
                                        CPU_SET(wc->cpu[tp->slot[t] % wc->n], &set);
                        }
                s->part_cpus[dev_queue(s, d, 0) / 2] = set;
                desc->host_cpus[0] = 0;
                /* as ranges, the way /proc and taskset write them */
                for (int c = 0; c < CPU_SETSIZE && len < sizeof(desc->host_cpus); c++) {
                        if (!CPU_ISSET(c, &set) || (c > 0 && CPU_ISSET(c - 1, &set)))
                                continue;
                        int e = c;
                        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
                                e++;
                        int n = e > c ? snprintf(desc->host_cpus + len, sizeof(desc->host_cpus) - len, "%s%d-%d",
                                                 len ? "," : "", c, e)
                                      : snprintf(desc->host_cpus + len, sizeof(desc->host_cpus) - len, "%s%d",
                                                 len ? "," : "", c);
                        if (n < 0 || (size_t)n >= sizeof(desc->host_cpus) - len) {
                                desc->host_cpus[len] = 0; /* too many ranges: what fits */
                                break;
                        }
                        len += (size_t)n;
                }
        }
}

static void hold_release(struct sim *s, struct sim_hold *h)
{
        if (h->prev)
                h->prev->next = h->next;
        else
                s->holds = h->next;
        if (h->next)
                h->next->prev = h->prev;
        h->unit->backend_priv = NULL;
        event_free(h->ev);
        free(h);
}

/* A held unit's time is up, or it was cut short (cancel, fault cleared). Model mode: the
 * items take effect now; copies and memsets are done here so clients can stage inputs and
 * read results back, kernels do not run. */
static void on_hold_done(evutil_socket_t fd, short what, void *arg)
{
        struct sim_hold *h = arg;
        struct sim *s = h->sim;
        struct exec_unit *u = h->unit;
        int model = h->model, over = h->over_limit, failed = 0;

        hold_release(s, h);
        if (model) {
                for (int i = 0; i < u->nitems; i++) {
                        struct exec_item *it = u->items[i];
                        if (failed || atomic_load(&u->cancel)) {
                                it->status = PROTO_E_CANCELLED;
                                failed = 1;
                        } else if (item_fault(s, u->device, it)) {
                                failed = 1;
                        } else if (over && (it->kind == EXEC_OP || it->kind == EXEC_GRAPH ||
                                            it->kind == EXEC_GRAPH_STEP)) {
                                it->status = PROTO_E_LIMIT;
                                snprintf(it->err, sizeof(it->err),
                                         "run exceeded its time limit of %llu ms (tenant max_run_ms)",
                                         (unsigned long long)(u->max_run_ns / 1000000));
                                failed = 1;
                        } else if (it->kind != EXEC_OP && it->kind != EXEC_GRAPH &&
                                   it->kind != EXEC_GRAPH_STEP) {
                                item_run(&s->devices[u->device], it);
                        }
                }
        }
        u->end_ns = now_ns();
        s->complete(u, s->userdata);
}

/* Hold u back on the loop thread for ns. 0 or -ENOMEM. */
static int hold_unit(struct sim *s, struct exec_unit *u, uint64_t ns, int model, int over)
{
        struct sim_hold *h = calloc(1, sizeof(*h));
        struct timeval tv = { .tv_sec = (time_t)(ns / 1000000000ull),
                              .tv_usec = (suseconds_t)(ns % 1000000000ull / 1000) };

        if (!h)
                return -ENOMEM;
        h->sim = s;
        h->unit = u;
        h->model = model;
        h->over_limit = over;
        h->ev = event_new(s->evbase, -1, 0, on_hold_done, h);
        event_base_update_cache_time(s->evbase); /* the timer runs from now, not loop start */
        if (!h->ev || event_add(h->ev, &tv) < 0) {
                if (h->ev)
                        event_free(h->ev);
                free(h);
                return -ENOMEM;
        }
        h->next = s->holds;
        if (s->holds)
                s->holds->prev = h;
        s->holds = h;
        u->backend_priv = h;
        return 0;
}

/* End a hold on the next loop pass (never from inside the caller's own call). */
static void hold_cut_short(struct sim_hold *h)
{
        event_del(h->ev);
        event_active(h->ev, EV_TIMEOUT, 0);
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
        struct sim *s = arg;
        struct exec_unit *list, *rev = NULL;
        uint64_t v;

        if (what & EV_READ) /* EV_TIMEOUT alone: done_list_push, nothing written */
                while (read(s->efd, &v, sizeof(v)) < 0 && errno == EINTR)
                        ;
        note_loop_cpu(s);
        pthread_mutex_lock(&s->done_lock);
        list = s->done;
        s->done = NULL;
        pthread_mutex_unlock(&s->done_lock);
        while (list) { /* the list is LIFO; restore completion order */
                struct exec_unit *n = list->next;
                list->next = rev;
                rev = list;
                list = n;
        }
        while (rev) {
                struct exec_unit *n = rev->next;
                uint64_t now = now_ns();
                /* a slowed device finishes later; unless cancelled or the fault is gone */
                if (rev->end_ns <= now || atomic_load(&rev->cancel) ||
                    slow_factor(s, rev->device) <= 1.0 ||
                    hold_unit(s, rev, rev->end_ns - now, 0, 0) < 0) {
                        if (rev->end_ns > now)
                                rev->end_ns = now;
                        s->complete(rev, s->userdata);
                }
                rev = n;
        }
}

static int sim_submit(struct backend *b, struct exec_unit *u)
{
        struct sim *s = (struct sim *)b;

        note_loop_cpu(s);
        u->next = NULL;
        u->backend_priv = NULL;
        u->nrun = u->nitems;
        u->partial = 0;
        u->cpu_ns = 0;
        u->ran_inline = 0; /* (done_list_push tells the loop thread's units by it) */
        if (s->mode == 1) {
                uint64_t ns = 0;
                int over = 0;
                for (int i = 0; i < u->nitems; i++)
                        ns += u->items[i]->model_ns;
                ns = (uint64_t)((double)ns * slow_factor(s, u->device));
                if (u->max_run_ns && ns > u->max_run_ns) {
                        ns = u->max_run_ns;
                        over = 1;
                }
                u->start_ns = now_ns();
                return hold_unit(s, u, ns, 1, over);
        }
        int bg = u->background != 0;
        int q = dev_queue(s, u->device, bg);
        if (u->gang >= 1) {
                atomic_store(&u->g_cur, 0);
                atomic_store(&u->g_waiters, 0);
                atomic_store(&u->g_delay, 0);
                u->g_members = 0;
                u->g_tickets = u->gang;
                for (int i = 0; i < u->nitems; i++) {
                        struct exec_item *it = u->items[i];
                        atomic_store(&it->g_claim, 0);
                        atomic_store(&it->g_done, 0);
                        atomic_store(&it->g_failed, 0);
                        atomic_store(&it->g_limit, it->nparts > 1 ? it->nparts : 1);
                        atomic_store(&it->g_end, 0);
                }
        }
        if (u->inline_ok && !bg) {
                /* here, on the submitting thread (the loop thread), as a worker would; the
                 * completion goes through the done list like any other */
                u->ran_inline = 1;
                if (u->inline_max_run_ns && (!u->max_run_ns || u->max_run_ns > u->inline_max_run_ns))
                        u->max_run_ns = u->inline_max_run_ns;
                if (u->gang >= 1) {
                        u->g_members = 1;
                        u->g_tickets = 0;
                        u->start_ns = now_ns();
                        gang_work(s, u, q);
                        u->end_ns = now_ns() + atomic_load(&u->g_delay);
                } else {
                        /* its wall time stands for its CPU time (cpu_ns 0): the SCHED_FIFO
                         * loop thread is not preempted, and CLOCK_THREAD_CPUTIME_ID is a
                         * system call (two a unit were 1.2 us of a 9 us request, perf) */
                        unit_run(s, u);
                }
                done_list_push(s, u);
                return 0;
        }
        pthread_mutex_lock(&s->lock);
        atomic_fetch_add(&s->queued[q], 1);
        if (s->queue_tail[q])
                s->queue_tail[q]->next = u;
        else
                s->queue_head[q] = u;
        s->queue_tail[q] = u;
        pthread_cond_signal(&s->cond[q]);
        pthread_mutex_unlock(&s->lock);
        return 0;
}

static void sim_cancel(struct backend *b, struct exec_unit *u)
{
        atomic_store(&u->cancel, 1); /* workers and kernels poll it */
        /* backend_priv is set and read on the loop thread only: a held unit ends now */
        if (u->backend_priv)
                hold_cut_short(u->backend_priv);
}

static int sim_device_count(struct backend *b)
{
        return ((struct sim *)b)->ndevices;
}

static int sim_device_describe(struct backend *b, int index, struct backend_device_desc *ret)
{
        struct sim *s = (struct sim *)b;
        if (index < 0 || index >= s->ndevices)
                return -ENODEV;
        *ret = s->devices[index].desc;
        return 0;
}

static int sim_inject_fault(struct backend *b, int device, int kind, double value)
{
        struct sim *s = (struct sim *)b;
        struct sim_device *sd;

        if (device < 0 || device >= s->ndevices)
                return -ENODEV;
        sd = &s->devices[device];
        switch (kind) {
        case FAULT_FAIL_NEXT:
                if (!(value >= 1 && value <= INT32_MAX))
                        return -EINVAL;
                atomic_store(&sd->fail_next, (int)value);
                return 0;
        case FAULT_FAIL_DEVICE:
                atomic_store(&sd->failed, 1);
                return 0;
        case FAULT_SLOW:
                if (!(value > 0 && value <= 1e6))
                        return -EINVAL;
                uint64_t m = (uint64_t)(value * 1000.0 + 0.5);
                atomic_store(&sd->slow_milli, m ? m : 1);
                return 0;
        case FAULT_ECC_CORRECTED:
        case FAULT_ECC_UNCORRECTED:
                if (!(value >= 1 && value <= 1e9))
                        return -EINVAL;
                atomic_fetch_add(kind == FAULT_ECC_CORRECTED ? &sd->ecc_corrected : &sd->ecc_uncorrected,
                                 (uint64_t)value);
                return 0;
        }
        return -EINVAL;
}

static int sim_clear_fault(struct backend *b, int device)
{
        struct sim *s = (struct sim *)b;

        if (device < 0 || device >= s->ndevices)
                return -ENODEV;
        atomic_store(&s->devices[device].fail_next, 0);
        atomic_store(&s->devices[device].failed, 0);
        atomic_store(&s->devices[device].slow_milli, 0);
        /* units held back for a slow device's extra time complete now */
        for (struct sim_hold *h = s->holds; h; h = h->next)
                if (!h->model && h->unit->device == device)
                        hold_cut_short(h);
        return 0;
}

/* Count a unit's busy time, then hand it to the daemon. Loop thread. */
static void sim_complete(struct exec_unit *u, void *arg)
{
        struct sim *s = arg;

        if (u->device >= 0 && u->device < s->ndevices && u->engine >= 0 &&
            u->engine < OPS_ENGINE_COUNT && u->end_ns > u->start_ns)
                s->devices[u->device].busy_ns[u->engine] +=
                        (u->end_ns - u->start_ns) * (uint64_t)(u->cores > 0 ? u->cores : 1);
        s->up_complete(u, s->up_userdata);
}

/* Bring power and temperature forward to now. Power follows the load of the period since
 * the last step (cube cores draw most, DMA least); temperature follows power with the
 * board's thermal time constant. Steps shorter than half a second keep the last figures,
 * so frequent health calls do not turn into noisy utilization. */
static void sim_thermal(struct sim *s, struct sim_device *d)
{
        static const double weight[OPS_ENGINE_COUNT] = { 0.6, 0.25, 0.05, 0.1 };
        const struct sim_profile *p = s->profile;
        uint64_t now = now_ns(), dt = now - d->therm_ns;
        double load = 0;

        if (dt < 500000000ull)
                return;
        for (int k = 0; k < OPS_ENGINE_COUNT; k++) {
                uint64_t busy = d->busy_ns[k] - d->therm_busy[k];
                double u = d->desc.cores[k] ? (double)busy / ((double)dt * d->desc.cores[k]) : 0;
                load += weight[k] * (u > 1 ? 1 : u);
                d->therm_busy[k] = d->busy_ns[k];
        }
        d->therm_ns = now;
        d->power_w = p->idle_w + (p->tdp_w - p->idle_w) * load;
        double target = p->idle_c + (p->hot_c - p->idle_c) * (d->power_w - p->idle_w) /
                                            (p->tdp_w - p->idle_w);
        d->temp_c += (target - d->temp_c) * (1.0 - exp(-(double)dt / 1e9 / SIM_THERMAL_TAU_S));
}

static int sim_health(struct backend *b, int device, struct backend_health *ret)
{
        struct sim *s = (struct sim *)b;
        uint64_t m;

        if (device < 0 || device >= s->ndevices)
                return -ENODEV;
        ret->fail_next = atomic_load(&s->devices[device].fail_next);
        ret->failed = atomic_load(&s->devices[device].failed);
        m = atomic_load(&s->devices[device].slow_milli);
        ret->slow = m ? (double)m / 1000.0 : 1.0;
        sim_thermal(s, &s->devices[device]);
        ret->temperature_c = s->devices[device].temp_c;
        ret->power_w = s->devices[device].power_w;
        ret->clock_mhz = s->devices[device].desc.clock_mhz;
        ret->ecc_corrected = atomic_load(&s->devices[device].ecc_corrected);
        ret->ecc_uncorrected = atomic_load(&s->devices[device].ecc_uncorrected);
        return 0;
}

/* The whole of simulated memory is host-visible already: a mapping is a view into it. */
static int sim_mem_map(struct backend *b, int device, uint64_t addr, uint64_t size, void **ret)
{
        struct sim *s = (struct sim *)b;

        if (device < 0 || device >= s->ndevices)
                return -ENODEV;
        const struct sim_device *d = &s->devices[device];
        if (addr < SIM_ADDR_BASE || addr - SIM_ADDR_BASE > d->desc.mem_size ||
            size > d->desc.mem_size - (addr - SIM_ADDR_BASE))
                return -ERANGE;
        *ret = sim_ptr(d, addr);
        return 0;
}

static void sim_mem_unmap(struct backend *b, int device, void *host, uint64_t size)
{
}

static void sim_destroy(struct backend *b)
{
        struct sim *s = (struct sim *)b;

        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        for (int q = 0; q < SIM_QUEUES; q++)
                pthread_cond_broadcast(&s->cond[q]);
        pthread_mutex_unlock(&s->lock);
        for (int i = 0; i < s->nthreads; i++)
                pthread_join(s->threads[i], NULL);
        free(s->threads);
        while (s->holds) /* only after every unit came back; nothing should be held */
                hold_release(s, s->holds);
        if (s->efd_event)
                event_free(s->efd_event);
        if (s->efd >= 0)
                close(s->efd);
        for (int i = 0; i < s->ndevices; i++)
                if (s->devices[i].mem)
                        munmap(s->devices[i].mem, s->devices[i].desc.mem_size);
        free(s->devices);
        pthread_mutex_destroy(&s->lock);
        for (int q = 0; q < SIM_QUEUES; q++)
                pthread_cond_destroy(&s->cond[q]);
        pthread_mutex_destroy(&s->done_lock);
        free(s);
}

static const struct backend_ops sim_ops = {
        .name = "sim",
        .device_count = sim_device_count,
        .device_describe = sim_device_describe,
        .mem_map = sim_mem_map,
        .mem_unmap = sim_mem_unmap,
        .submit = sim_submit,
        .cancel = sim_cancel,
        .health = sim_health,
        .run_on_cpu = sim_run_on_cpu,
        .busy_cpus = sim_busy_cpus,
        .destroy = sim_destroy,
};

static const struct backend_fault_hooks sim_faults = {
        .inject = sim_inject_fault,
        .clear = sim_clear_fault,
};

/* A simulated device's identity and place, the same for a profile and index on every start:
 * UUID and serial from a hash of both, bus numbers as Atlas 800 servers enumerate their
 * eight NPUs, two NPUs under each PCIe switch, half the devices on each of two NUMA nodes,
 * and the HCCS parts in rings of eight. */
static void sim_identity(const struct sim_profile *p, int i, struct backend_device_desc *d)
{
        static const uint8_t bus[8] = { 0xc1, 0x81, 0x41, 0x01, 0xc2, 0x82, 0x42, 0x02 };
        uint64_t h = 1469598103934665603ull; /* FNV-1a of "profile/index" */
        char key[48];

        snprintf(key, sizeof(key), "%s/%d", p->name, i);
        for (const char *c = key; *c; c++)
                h = (h ^ (uint8_t)*c) * 1099511628211ull;
        /* splitmix64's finalizer: FNV leaves keys that differ in the last character alike in
         * their high bits */
        h ^= h >> 30;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 27;
        h *= 0x94d049bb133111ebull;
        h ^= h >> 31;
        uint64_t h2 = (h ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
        h2 ^= h2 >> 29;
        snprintf(d->uuid, sizeof(d->uuid), "%08x-%04x-4%03x-8%03x-%012llx", (unsigned)(h >> 32),
                 (unsigned)(h >> 16) & 0xffff, (unsigned)h & 0xfff, (unsigned)(h2 >> 52),
                 (unsigned long long)(h2 & 0xffffffffffffull));
        snprintf(d->serial, sizeof(d->serial), "SIM%s%08llu", p->name,
                 (unsigned long long)(h2 % 100000000ull));
        snprintf(d->bus_id, sizeof(d->bus_id), "0000:%02x:00.0",
                 (unsigned)(bus[i % 8] + (unsigned)(i / 8) * 4) & 0xff);
        snprintf(d->firmware, sizeof(d->firmware), "%s", p->hccs ? "7.1.0.5.220" : "7.1.0.3.220");
        snprintf(d->driver, sizeof(d->driver), "24.1.rc2-sim");
        d->numa_node = (i % 8) / 4;
        d->pcie_switch = i / 2;
        d->hccs_group = p->hccs ? i / 8 : -1;
        d->power_limit_w = p->tdp_w;
}

int sim_backend_new(struct event_base *base, int ndevices, const char *profile, int mode,
                    int workers, int share, backend_complete_fn complete, void *userdata,
                    struct backend **ret, char *err, size_t errlen)
{
        const struct sim_profile *p = NULL;
        struct sim *s;

        for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
                if (strcmp(profiles[i].name, profile) == 0)
                        p = &profiles[i];
        if (!p) {
                snprintf(err, errlen, "unknown simulated device profile '%s'", profile);
                return -EINVAL;
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base.ops = &sim_ops;
        s->base.faults = &sim_faults;
        s->evbase = base;
        s->mode = mode;
        s->complete = sim_complete;
        s->userdata = s;
        s->up_complete = complete;
        s->up_userdata = userdata;
        s->profile = p;
        s->efd = -1;
        atomic_init(&s->loop_cpu, -1);
        pthread_mutex_init(&s->lock, NULL);
        for (int q = 0; q < SIM_QUEUES; q++)
                pthread_cond_init(&s->cond[q], NULL);
        pthread_mutex_init(&s->done_lock, NULL);
        s->devices = calloc((size_t)ndevices, sizeof(*s->devices));
        s->nparts = 1;
        if (!s->devices && ndevices > 0)
                goto fail_nomem;
        s->ndevices = ndevices;
        for (int i = 0; i < ndevices; i++) {
                struct backend_device_desc *d = &s->devices[i].desc;
                snprintf(d->profile, sizeof(d->profile), "%s", p->name);
                d->mem_size = p->mem;
                d->mem_addr = SIM_ADDR_BASE;
                uint8_t *mem = mmap(NULL, p->mem, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                s->devices[i].mem = mem == MAP_FAILED ? NULL : mem;
                if (!s->devices[i].mem) {
                        snprintf(err, errlen, "cannot reserve %llu bytes of device memory: %s",
                                 (unsigned long long)p->mem, strerror(errno));
                        goto fail;
                }
                d->cores[OPS_ENGINE_CUBE] = p->cube;
                d->cores[OPS_ENGINE_VECTOR] = p->vector;
                d->cores[OPS_ENGINE_AICPU] = p->aicpu;
                d->cores[OPS_ENGINE_DMA] = p->dma;
                /* cube: 16x16x16 fp16 MACs per cycle; vector: 128 lanes; AI CPU: ~8 per cycle */
                d->flops_per_core[OPS_ENGINE_CUBE] = p->clock_mhz * 1e6 * 8192;
                d->flops_per_core[OPS_ENGINE_VECTOR] = p->clock_mhz * 1e6 * 256;
                d->flops_per_core[OPS_ENGINE_AICPU] = 1.9e9 * 8;
                d->flops_per_core[OPS_ENGINE_DMA] = 0;
                d->mem_bandwidth = p->bandwidth;
                d->clock_mhz = p->clock_mhz;
                d->max_streams = p->max_streams;
                sim_identity(p, i, d);
                s->devices[i].power_w = p->idle_w;
                s->devices[i].temp_c = p->idle_c;
                s->devices[i].therm_ns = now_ns();
        }
        s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->efd < 0)
                goto fail_errno;
        s->efd_event = event_new(base, s->efd, EV_READ | EV_PERSIST, on_done, s);
        if (!s->efd_event || event_add(s->efd_event, NULL) < 0)
                goto fail_nomem;
        if (mode == 0) {
                if (workers <= 0)
                        workers = cpus_usable();
                if (!share && ndevices > 1 && ndevices <= SIM_MAX_PARTS && workers >= ndevices)
                        s->nparts = ndevices;
                struct thread_plan tp;
                if (thread_plan_make(&tp, workers, s->nparts) < 0) {
                        thread_plan_free(&tp);
                        goto fail_nomem;
                }
                const int n = tp.n;
                s->threads = calloc((size_t)n * 2, sizeof(pthread_t));
                if (!s->threads) {
                        thread_plan_free(&tp);
                        goto fail_nomem;
                }
                struct worker_cpus wc;
                worker_cpus_init(&wc);
                describe_parts(s, &tp, &wc);
                for (int i = 0; i < n * 2; i++) {
                        int t = i % n, q = 2 * tp.part[t] + (i >= n);
                        struct sim_pool *pool = &s->pools[q];
                        pool->s = s;
                        pool->q = q;
                        int e = pthread_create(&s->threads[i], NULL, worker_main, pool);
                        if (e) {
                                snprintf(err, errlen, "cannot start worker thread: %s",
                                         strerror(e));
                                thread_plan_free(&tp);
                                goto fail;
                        }
                        s->nthreads++;
                        char name[32]; /* a thread name holds 15 bytes */
                        snprintf(name, sizeof(name), "npud-%s%d", i >= n ? "bg" : "w", t);
                        name[15] = 0;
                        pthread_setname_np(s->threads[i], name); /* ps -L, top -H, perf */
                        worker_pin(&wc, s->threads[i], tp.slot[t]);
                }
                thread_plan_free(&tp);
        }
        *ret = &s->base;
        return 0;
fail_errno:
        snprintf(err, errlen, "%s", strerror(errno));
        goto fail;
fail_nomem:
        snprintf(err, errlen, "out of memory");
fail:
        sim_destroy(&s->base);
        return -EINVAL;
}

/* The backend interface: the boundary between npud's execution layer and a device, and what
 * a real driver implements. npud asks a backend for its devices (engine counts, rates, a
 * range of device addresses), maps device memory into its own address space where it reads
 * or writes it itself (graph weights, clearing freed memory), submits prepared execution
 * units, cancels them, asks for each device's health, and receives each unit back, completed,
 * on the loop thread.
 *
 * A unit names device memory by device address (the range device_describe gives; npud's
 * allocator carves buffers out of it) and kernels by operator registry id (ops_by_id), so a
 * driver maps ids to its own binaries and addresses need no translation; only the host end
 * of a copy from or to a registered host region is a host address. The simulated device
 * (sim.c) implements exactly these calls: it translates device addresses into its
 * host-visible reservation and reaches kernels through the registry.
 *
 * A graph run reaches the backend as steps (graph/steps.h), each an item of its own that the
 * scheduler dispatches like a launch: EXEC_GRAPH_STEP names the run (struct graph_bind, its
 * tensors at device addresses) and the step. Step 0 binds the run (the backend gives it host
 * views of the bound tensors and it makes the run's value table and arena, kept in the
 * binding between steps), each node step runs one node of the compiled graph (a fused group,
 * or a control-flow node with its subgraphs) with the per-node code of graph/exec.c, and the
 * last step hands the outputs over; the daemon sends a step only once the steps it depends
 * on are back, and frees the run's state. A driver would run each step's node as one of its
 * kernels. A long node step may be split into parts (graph/split.h; part and nparts of the
 * item), each a slice of the node's output computed by the same kernel, sent like the tiles
 * of a launch; the step is done when every part is back. EXEC_GRAPH (the whole run as one
 * item) remains for graphs loaded without steps.
 * Fault injection is not part of the driver interface: the simulator alone offers it,
 * as a separate hook table (struct backend_fault_hooks, NULL on other backends). */
#ifndef NPUD_BACKEND_H
#define NPUD_BACKEND_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ops/ops.h"
#include "util/clock.h"

struct ops_mem_budget;

struct event_base;

struct backend_device_desc {
        char profile[16];
        uint64_t mem_size;
        uint64_t mem_addr; /* device address of the first byte of device memory (not 0) */
        int cores[OPS_ENGINE_COUNT];
        double flops_per_core[OPS_ENGINE_COUNT]; /* ops/s of one core of each engine kind */
        double mem_bandwidth;                    /* bytes/s */
        double clock_mhz;
        uint32_t max_streams;
        /* Identity, as npu-smi and nvidia-smi report it: a UUID stable across restarts, the
         * board serial, the PCI address, the firmware and the driver's versions. */
        char uuid[40];
        char serial[24];
        char bus_id[16]; /* "0000:c1:00.0" */
        char firmware[24];
        char driver[24];
        /* Where the device sits: its NUMA node, the PCIe switch above it (devices under one
         * switch copy peer to peer without the host bridge) and its HCCS group (devices of
         * one group are linked by HCCS, Huawei's chip-to-chip fabric; -1: none). */
        int numa_node;
        int pcie_switch;
        int hccs_group;
        double power_limit_w; /* board power limit (TDP) */
        /* Compute mode: the host workers (per pool) that run the device's units, and the
         * CPUs they are kept on ("0-3", "" when left to the kernel); 0 and "" in model
         * mode. */
        int host_workers;
        char host_cpus[64];
};

/* EXEC_GRAPH: a whole graph (ONNX model) run by the graph executor on one engine;
 * EXEC_GRAPH_STEP: one step of a graph run (see above). */
enum exec_kind { EXEC_COPY = 1, EXEC_MEMSET, EXEC_OP, EXEC_GRAPH, EXEC_GRAPH_STEP };

struct graph_bind;

/* An operator call as the daemon queues it, sized to what it carries: nin input and nout
 * output tensors, then nattr attributes, in one block from a pool of its size class (an Add
 * takes 248 bytes where a whole struct ops_call takes 4.6 KB). Each tensor's data holds a
 * device address (exec_tensor_addr), not a pointer. The backend unpacks it into a struct
 * ops_call on the worker's stack just before the kernel runs (exec_call_unpack), giving the
 * kernel whatever its addresses translate to. */
struct exec_call {
        uint8_t nin, nout, nattr;
        uint8_t size_class; /* the pool it goes back to (the daemon's) */
        int32_t opset;
        struct ops_tensor t[]; /* inputs, then outputs; struct ops_attr[nattr] follow */
};

/* Bytes of a call with these counts. */
static inline size_t exec_call_bytes(int nin, int nout, int nattr)
{
        return sizeof(struct exec_call) + (size_t)(nin + nout) * sizeof(struct ops_tensor) +
               (size_t)nattr * sizeof(struct ops_attr);
}

static inline struct ops_tensor *exec_call_in(const struct exec_call *c)
{
        return (struct ops_tensor *)c->t;
}

static inline struct ops_tensor *exec_call_out(const struct exec_call *c)
{
        return (struct ops_tensor *)c->t + c->nin;
}

static inline struct ops_attr *exec_call_attr(const struct exec_call *c)
{
        return (struct ops_attr *)((struct ops_tensor *)c->t + c->nin + c->nout);
}

/* Pack src into dst, which has room for exec_call_bytes(src's counts); dst->size_class is
 * left alone. Copies the used part only. */
void exec_call_pack(struct exec_call *dst, const struct ops_call *src);

/* A tensor's device address in a queued call (or a graph binding), and setting it. */
static inline uint64_t exec_tensor_addr(const struct ops_tensor *t)
{
        return (uint64_t)(uintptr_t)t->data;
}

static inline void exec_tensor_set_addr(struct ops_tensor *t, uint64_t addr)
{
        t->data = (void *)(uintptr_t)addr;
}

/* Unpack into a call for the kernel: counts, tensors and attributes up to the counts (the
 * kernels read nothing beyond them), no graph; each tensor's device address becomes
 * base + (address - mem_addr), the host view of the device's memory at base. */
void exec_call_unpack(const struct exec_call *src, struct ops_call *dst, uint8_t *base,
                      uint64_t mem_addr);

/* Which end of a copy is host memory (a registered host region) rather than device memory. */
enum exec_host_end { EXEC_HOST_NONE = 0, EXEC_HOST_DST = 1, EXEC_HOST_SRC = 2 };

/* One prepared task: handles resolved and bounds-checked on the loop thread. */
struct exec_item {
        enum exec_kind kind;
        /* COPY, MEMSET: device addresses, except the end host_end names, which holds a host
         * address (uintptr_t) */
        uint64_t dst, src;
        uint8_t host_end; /* enum exec_host_end */
        uint64_t len;
        int value;
        uint16_t op_id; /* EXEC_OP: the kernel, by operator registry id (ops_by_id) */
        /* EXEC_OP only (NULL otherwise): the operator call, packed, owned by the daemon,
         * which keeps it unchanged until the unit has come back. */
        struct exec_call *call;
        struct graph_bind *graph; /* EXEC_GRAPH(_STEP): the graph and its bound tensors */
        int step;                 /* EXEC_GRAPH_STEP: which step (graph/steps.h) */
        /* EXEC_GRAPH_STEP of a node split into parts (graph/split.h): part `part` of nparts
         * (nparts 0 or 1: the whole step) */
        int part, nparts;
        /* EXEC_GRAPH_STEP of a unit that runs its run's steps in order (exec_unit.gang): the
         * backend frees what the step read for the last time (graph_run_step_done) once it
         * is done, instead of the daemon when the unit is back. */
        uint8_t step_done_here;
        uint64_t model_ns; /* duration in model mode; in compute mode what a slowed device stretches */
        /* filled by the backend */
        int status; /* 0, or a PROTO_E_* code */
        char err[256];
        /* backend scratch of a gang unit: parts claimed, parts finished, failure recorded,
         * parts that make the item done (fewer when the gang yields within it), done */
        atomic_int g_claim, g_done, g_failed, g_limit, g_end;
};

/* A chain of items of one stream run back to back on one engine; the first failure stops the
 * chain (later items get PROTO_E_CANCELLED). */
struct exec_unit {
        int device;
        int engine;
        int cores;
        /* Best-effort work: runs on the backend's background workers, which give their core
         * up to any other work of the host (see sim.c). */
        int background;
        /* 0: an ordinary unit, its items run one after the other by one worker (each item
         * as it is: one part of a split step). 1 or more: a gang, run by up to that many
         * workers at the same time: its items still run one after the other, every part of
         * a split graph step (nparts) each, spread over the workers present, which wait for
         * each other at item boundaries. */
        int gang;
        /* The daemon may ask a running unit that it marked yieldable to stop at its next
         * item boundary, or between two parts of a split graph step, from a time on
         * (yield_ns, CLOCK_MONOTONIC; 0: not asked); nrun then says how many items ran (or
         * failed, or were cancelled): the items from nrun on did not finish and keep status
         * 0, except that parts 0 .. partial-1 of item nrun ran (a split step the unit left
         * within; partial 0: it did not start). */
        int yieldable;
        _Atomic uint64_t yield_ns;
        /* The daemon allows the backend to run the unit on the submitting thread (the loop
         * thread), before submit returns: a short latency-critical unit (sched.c,
         * INLINE_MAX_NS). The completion still comes through the completion callback. A
         * backend that did so sets ran_inline; one may always decline. */
        int inline_ok, ran_inline;
        uint64_t inline_max_run_ns; /* max_run_ns while it runs there, when lower (0: none) */
        int nrun, partial;
        int nitems;
        struct exec_item **items;
        void *owner; /* the daemon's bookkeeping */
        /* Limits the daemon sets before submit (see ops/runctx.h): an item that runs longer
         * than max_run_ns fails with PROTO_E_LIMIT; Loop/Scan trip counts are capped; graph
         * intermediates and kernel workspaces are charged to mem (NULL: not charged). */
        uint64_t max_run_ns, max_loop_trips;
        struct ops_mem_budget *mem;
        /* Set through backend_ops.cancel: items not finished fail with PROTO_E_CANCELLED. */
        atomic_int cancel;
        uint64_t start_ns, end_ns;
        /* CPU time the thread that ran it spent on it (compute mode, a unit one thread ran:
         * not a gang); 0 when not measured. Unlike end_ns - start_ns it leaves out the time
         * the thread was preempted: a best-effort worker's units are stretched by every
         * other thread of the host. */
        uint64_t cpu_ns;
        void *backend_priv; /* the backend's own state while the unit is in flight */
        /* backend scratch of a gang unit: the item being run, workers in it, workers that
         * may still join, workers asleep waiting for the next item, slow-fault delay */
        atomic_int g_cur, g_waiters;
        int g_members, g_tickets, g_over;
        _Atomic uint64_t g_delay;
        struct exec_unit *next; /* completion queue link */
};

enum fault_kind {
        FAULT_FAIL_NEXT = 1, /* the next `value` tasks on the device fail with a device error */
        FAULT_FAIL_DEVICE,   /* the device fails: health "failed", all its work errors out */
        FAULT_SLOW,          /* tasks take `value` times longer */
        /* HBM ECC events: `value` more corrected (single-bit) or uncorrected (multi-bit)
         * errors counted. Counters, not faults in force: clearing the faults keeps them. */
        FAULT_ECC_CORRECTED,
        FAULT_ECC_UNCORRECTED,
};

typedef void (*backend_complete_fn)(struct exec_unit *unit, void *userdata);

struct backend;

/* What a device reports about its health. */
struct backend_health {
        int failed;    /* the device cannot run work: every item fails with a device error */
        /* Faults injected into the simulator and still in force (0 and 1.0 elsewhere):
         * items still to fail, and the factor stretching every item's duration. */
        int fail_next;
        double slow;
        /* Telemetry, as the device's management firmware reports it: die temperature,
         * board power draw, the AI core clock, and the HBM ECC error counters since the
         * driver loaded. A backend that cannot read one leaves it 0. */
        double temperature_c;
        double power_w;
        double clock_mhz;
        uint64_t ecc_corrected, ecc_uncorrected;
};

struct backend_ops {
        const char *name;
        int (*device_count)(struct backend *b);
        int (*device_describe)(struct backend *b, int index, struct backend_device_desc *ret);
        /* Map size bytes of device memory at device address addr into npud's address space
         * for npud's own reads and writes; *ret is the host view until mem_unmap. Loop
         * thread; 0 or -errno (-ERANGE outside the device's memory). */
        int (*mem_map)(struct backend *b, int device, uint64_t addr, uint64_t size, void **ret);
        void (*mem_unmap)(struct backend *b, int device, void *host, uint64_t size);
        /* Queue a unit; it comes back through the completion callback on the loop thread. */
        int (*submit)(struct backend *b, struct exec_unit *unit);
        /* Stop a submitted unit as soon as possible: items not yet finished fail with
         * PROTO_E_CANCELLED (running kernels notice within milliseconds). The unit still
         * comes back through the completion callback, never from inside this call. Loop
         * thread. */
        void (*cancel)(struct backend *b, struct exec_unit *unit);
        /* The device's health. Loop thread; 0 or -errno. */
        int (*health)(struct backend *b, int device, struct backend_health *ret);
        /* Optional (NULL: never): have fn(arg) run on CPU cpu, by a host worker idle there,
         * and return 1 once it ran; 0, at once or within microseconds, when no worker takes
         * it (the caller then runs fn itself). fn runs while the caller waits, so it may use
         * the caller's data. Loop thread. npud writes a reply this way on the CPU its client
         * waits on: the client's wake-up is then local instead of an interrupt to its CPU. */
        int (*run_on_cpu)(struct backend *b, int cpu, void (*fn)(void *arg), void *arg);
        /* Optional (NULL: never): the CPUs where low-priority (best-effort) work runs now
         * or ran lately, in ret, when the backend keeps such work on some CPUs only: 1; 0
         * when it may run anywhere. now: CLOCK_MONOTONIC ns. Loop thread. */
        int (*busy_cpus)(struct backend *b, cpu_set_t *ret, uint64_t now);
        void (*destroy)(struct backend *b);
};

/* Fault injection, a test hook of the simulated device (not a driver call): inject a fault
 * on a device (kind: enum fault_kind) or clear every fault there; items that start
 * afterwards see the change. Loop thread; 0 or -errno. */
struct backend_fault_hooks {
        int (*inject)(struct backend *b, int device, int kind, double value);
        int (*clear)(struct backend *b, int device);
};

struct backend {
        const struct backend_ops *ops;
        const struct backend_fault_hooks *faults; /* NULL: no fault injection */
};

/* The simulated backend. mode: 0 compute, 1 model. workers: host threads per pool (0 =
 * CPUs). share: every device's units may run on every worker; else, where there are at
 * least as many workers as devices, each device gets workers of its own (the remainder to
 * the first devices), kept on CPUs of their own (docs/architecture.md). */
int sim_backend_new(struct event_base *base, int ndevices, const char *profile, int mode,
                    int workers, int share, backend_complete_fn complete, void *userdata,
                    struct backend **ret, char *err, size_t errlen);
/* Is this a known simulated profile name? */
int sim_profile_valid(const char *profile);


#endif

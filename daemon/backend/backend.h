/* The backend interface: the boundary between npud's execution layer and a device. npud asks
 * a backend for its devices (engine counts, rates, a memory range), submits prepared
 * execution units, cancels them, and receives each unit back, completed, on the loop thread.
 * Kernels are named by operator registry id (ops_by_id), so a driver maps ids to its own
 * binaries.
 *
 * What a real driver would still need and this interface does not yet give it (issue 10,
 * open): items carry host pointers into a host-visible device memory range computed by the
 * daemon (buffer_ptr) rather than device addresses from a map/unmap call; graph runs hand
 * over the whole graph (struct graph_bind) for the backend to interpret; health is read
 * through query_fault, and fault injection (inject_fault/clear_fault) is a simulator test
 * hook rather than a driver call. The simulated device (sim.c) implements every call. */
#ifndef NPUD_BACKEND_H
#define NPUD_BACKEND_H

#include <stdatomic.h>
#include <stdint.h>

#include "ops/ops.h"
#include "util/clock.h"

struct ops_mem_budget;

struct event_base;

struct backend_device_desc {
        char profile[16];
        uint64_t mem_size;
        void *mem_base; /* host-visible device memory (simulated HBM) */
        int cores[OPS_ENGINE_COUNT];
        double flops_per_core[OPS_ENGINE_COUNT]; /* ops/s of one core of each engine kind */
        double mem_bandwidth;                    /* bytes/s */
        double clock_mhz;
        uint32_t max_streams;
};

/* EXEC_GRAPH: a whole graph (ONNX model) run by the graph executor on one engine. */
enum exec_kind { EXEC_COPY = 1, EXEC_MEMSET, EXEC_OP, EXEC_GRAPH };

struct graph_bind;

/* An operator call as the daemon queues it, sized to what it carries: nin input and nout
 * output tensors, then nattr attributes, in one block from a pool of its size class (an Add
 * takes 248 bytes where a whole struct ops_call takes 4.6 KB). The backend unpacks it into a
 * struct ops_call on the worker's stack just before the kernel runs (exec_call_unpack). */
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

/* Unpack into a call for the kernel: counts, tensors and attributes up to the counts (the
 * kernels read nothing beyond them), no graph. */
void exec_call_unpack(const struct exec_call *src, struct ops_call *dst);

/* One prepared task: pointers resolved and bounds-checked on the loop thread. */
struct exec_item {
        enum exec_kind kind;
        void *dst;
        const void *src;
        uint64_t len;
        int value;
        uint16_t op_id; /* EXEC_OP: the kernel, by operator registry id (ops_by_id) */
        /* EXEC_OP only (NULL otherwise): the operator call, packed, owned by the daemon,
         * which keeps it unchanged until the unit has come back. */
        struct exec_call *call;
        struct graph_bind *graph; /* EXEC_GRAPH: the graph and its bound tensors */
        uint64_t model_ns; /* duration in model mode */
        /* filled by the backend */
        int status; /* 0, or a PROTO_E_* code */
        char err[256];
};

/* A chain of items of one stream run back to back on one engine; the first failure stops the
 * chain (later items get PROTO_E_CANCELLED). */
struct exec_unit {
        int device;
        int engine;
        int cores;
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
        void *backend_priv; /* the backend's own state while the unit is in flight */
        struct exec_unit *next; /* completion queue link */
};

enum fault_kind {
        FAULT_FAIL_NEXT = 1, /* the next `value` tasks on the device fail with a device error */
        FAULT_FAIL_DEVICE,   /* the device fails: health "failed", all its work errors out */
        FAULT_SLOW,          /* tasks take `value` times longer */
};

typedef void (*backend_complete_fn)(struct exec_unit *unit, void *userdata);

struct backend;

struct backend_ops {
        const char *name;
        int (*device_count)(struct backend *b);
        int (*device_describe)(struct backend *b, int index, struct backend_device_desc *ret);
        /* Queue a unit; it comes back through the completion callback on the loop thread. */
        int (*submit)(struct backend *b, struct exec_unit *unit);
        void (*destroy)(struct backend *b);
        /* Stop a submitted unit as soon as possible: items not yet finished fail with
         * PROTO_E_CANCELLED (running kernels notice within milliseconds). The unit still
         * comes back through the completion callback, never from inside this call. Loop
         * thread. */
        void (*cancel)(struct backend *b, struct exec_unit *unit);
        /* Optional (NULL where unsupported): inject a fault on a device (kind: enum
         * fault_kind) or clear every fault there; items that start afterwards see
         * the change. Loop thread; 0 or -errno. */
        int (*inject_fault)(struct backend *b, int device, int kind, double value);
        int (*clear_fault)(struct backend *b, int device);
        /* Optional: the faults in force on a device, for npuctl health: items still to fail
         * (fail-next), whether every item fails (fail-device), the duration factor (slow; 1 =
         * none). Loop thread; 0 or -errno. */
        int (*query_fault)(struct backend *b, int device, int *fail_next, int *failed,
                           double *slow);
};

struct backend {
        const struct backend_ops *ops;
};

/* The simulated backend. mode: 0 compute, 1 model. workers: host threads (0 = CPUs). */
int sim_backend_new(struct event_base *base, int ndevices, const char *profile, int mode,
                    int workers, backend_complete_fn complete, void *userdata,
                    struct backend **ret, char *err, size_t errlen);
/* Is this a known simulated profile name? */
int sim_profile_valid(const char *profile);


#endif

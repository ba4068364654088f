/* The backend interface: the narrow boundary between npud and a device driver. npud asks a
 * backend for its devices (described by engine counts, rates and a memory range), submits
 * prepared execution units, and receives each unit back, completed, on the loop thread.
 * The simulated device (sim.c) is the first backend; a real driver implements the same
 * calls. */
#ifndef NPUD_BACKEND_H
#define NPUD_BACKEND_H

#include <stdint.h>

#include "../ops/ops.h"

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

enum exec_kind { EXEC_COPY = 1, EXEC_MEMSET, EXEC_OP };

/* One prepared task: pointers resolved and bounds-checked on the loop thread. */
struct exec_item {
        enum exec_kind kind;
        void *dst;
        const void *src;
        uint64_t len;
        int value;
        const struct ops_def *op;
        struct ops_call call;
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
        uint64_t start_ns, end_ns;
        struct exec_unit *next; /* completion queue link */
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

uint64_t now_ns(void);

#endif

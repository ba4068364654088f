/* libnpu administration: typed calls for what npuctl shows and does (sessions, devices,
 * tenants, scheduler statistics, memory and who holds it, health, version; session kill,
 * tenant quota, configuration reload, device drain/reset and fault injection), part of
 * libnpu.so.1 beside npu.h.
 *
 * Rights are npud's: the listings answer any client (sessions, and the sessions among the memory
 * holders, are all that is filtered: a client that is not root or in npud's admin group sees
 * only its own user's sessions, *ret_all = 0); session kill, quota, reload, drain, reset and
 * faults need root or the admin group
 * and fail with NPU_ERR_PERMISSION otherwise.
 *
 * Listings come back as one library-allocated array of count elements, freed with
 * npu_admin_free. The elements grow by version like npu.h's caller-allocated structs: the
 * caller passes elem_size = sizeof(the element type) as its header defines it; a smaller
 * size than the first released layout is refused (NPU_ERR_INVALID); the array is laid out
 * with that stride, so list[i] indexes it, and each element's size says how many bytes of it
 * this libnpu filled (later members, from a newer header, are zero). Strings are
 * NUL-terminated and cut to the member's length. */
#ifndef NPU_ADMIN_H
#define NPU_ADMIN_H

#include "npu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPU_ADMIN_NAME_LEN 64

/* One session (a connection to npud). */
typedef struct npu_admin_session {
        size_t size;              /* bytes filled */
        uint64_t id;              /* the id npu_admin_session_kill takes */
        int pid, uid, gid;        /* the client's credentials at connect */
        char comm[32];            /* the client's command name */
        uint64_t buffers, buffer_bytes;  /* device memory it holds */
        uint64_t regions, region_bytes;  /* host regions */
        uint64_t streams, events;
        uint64_t queued_tasks, tasks_submitted, tasks_completed;
} npu_admin_session_t;

/* One device, with its memory and the utilization of its engines. */
typedef struct npu_admin_device {
        size_t size;
        int id;
        char name[32];
        char profile[16];
        char health[16];          /* "ok", "degraded", "failed", ... */
        int draining;             /* takes no new streams */
        uint64_t memory_total, memory_used, largest_free;
        int cube_cores, vector_cores, aicpu_cores;
        /* busy share of each engine over npud's last utilization window, in percent */
        double util_cube, util_vector, util_aicpu, util_dma;
        int sessions;             /* sessions with a stream on the device */
        int streams;
        uint64_t tasks_completed, tasks_failed;
        /* since 0.1.0's units: present when size covers it */
        uint64_t units;           /* units of work sent to its workers (chained tasks share one) */
        /* since 0.1.0's units_inline: present when size covers it */
        uint64_t units_inline;    /* of them, short latency-critical units npud's loop thread ran */
        /* since 0.1.0's host_workers: present when size covers them */
        int host_workers;         /* compute mode: host workers (per pool) running its units */
        char host_cpus[64];       /* the CPUs they are kept on ("0-3"; "" when not kept) */
} npu_admin_device_t;

/* One tenant: its policy and what it uses now. */
typedef struct npu_admin_tenant {
        size_t size;
        char name[NPU_ADMIN_NAME_LEN];
        char sched_class[32];     /* "latency-critical", "normal", "best-effort" */
        double weight;
        int sessions, streams, queued_tasks;
        uint64_t memory_used;
        uint64_t memory_quota_total;      /* 0: none */
        uint64_t memory_quota_per_device; /* 0: none */
        int max_streams, max_queued_tasks;
        uint64_t devices;         /* bit i set: the tenant may use device i (0 to 63) */
        uint64_t workspace_bytes, workspace_peak_bytes;
        uint64_t max_run_ms, max_loop_trips;
} npu_admin_tenant_t;

/* Scheduler statistics of one tenant on one device (one element per device and tenant). */
typedef struct npu_admin_sched {
        size_t size;
        int device;
        char tenant[NPU_ADMIN_NAME_LEN];
        char sched_class[32];
        double weight;
        uint64_t tasks, failed;
        double engine_seconds;
        double share;             /* of the device's engine time, 0 to 1 */
        double target_share;      /* what the policy gives it among the tenants that used it */
        double wait_p50_us, wait_p99_us;  /* queue wait */
        /* since 0.1.0's sched statistics: present when size covers them */
        uint64_t cancelled;       /* never ran: behind a failure of the same unit; not in failed */
        int removed;              /* the tenant was removed by a reload; its statistics stay */
} npu_admin_sched_t;

npu_status_t npu_admin_sessions(npu_context_t *ctx, size_t elem_size, npu_admin_session_t **ret_list,
                                size_t *ret_count, int *ret_all);
npu_status_t npu_admin_devices(npu_context_t *ctx, size_t elem_size, npu_admin_device_t **ret_list,
                               size_t *ret_count);
npu_status_t npu_admin_tenants(npu_context_t *ctx, size_t elem_size, npu_admin_tenant_t **ret_list,
                               size_t *ret_count);
npu_status_t npu_admin_sched(npu_context_t *ctx, size_t elem_size, npu_admin_sched_t **ret_list,
                             size_t *ret_count);
/* Device memory of one device (npuctl mem): how much is used and how it is cut up. */
typedef struct npu_admin_mem {
        size_t size;
        int device;
        uint64_t memory_total, memory_used, free_bytes;
        uint64_t largest_free;    /* the largest allocation that can succeed now */
        uint64_t free_segments, live_blocks;
        double fragmentation;     /* 1 - largest_free / free_bytes, 0 to 1 */
} npu_admin_mem_t;

/* Who holds device memory: one element per device and session, then per device and tenant.
 * Sessions are filtered like npu_admin_sessions (a client that is not root or in the admin
 * group sees only its own user's, *ret_all = 0); tenants are all listed. */
typedef enum npu_admin_holder_kind {
        NPU_ADMIN_HOLDER_SESSION = 1,
        NPU_ADMIN_HOLDER_TENANT = 2,
} npu_admin_holder_kind_t;

typedef struct npu_admin_mem_holder {
        size_t size;
        int device;
        npu_admin_holder_kind_t kind;
        uint64_t session;         /* SESSION: its id (npu_admin_session_kill); TENANT: 0 */
        int pid, uid;             /* SESSION */
        char comm[32];            /* SESSION */
        char tenant[NPU_ADMIN_NAME_LEN]; /* the session's tenant, or the tenant */
        uint64_t bytes;           /* held on this device */
} npu_admin_mem_holder_t;

/* One device's health and the (simulated) faults in force on it. */
typedef struct npu_admin_health {
        size_t size;
        int device;
        char health[16];          /* "ok", "degraded", "failed", "resetting", ... */
        int draining, resetting;
        int failed;               /* NPU_FAULT_FAIL_DEVICE in force */
        uint64_t fail_next;       /* tasks NPU_FAULT_FAIL_NEXT still fails, 0: none */
        double slow;              /* NPU_FAULT_SLOW factor; 1.0: none */
} npu_admin_health_t;

/* npud's version, its session protocol range and its backend. ret->size is set by the
 * caller (sizeof(npu_admin_version_t)), as for npu_completion_t. */
typedef struct npu_admin_version {
        size_t size;
        char version[32];
        int protocol, protocol_min;
        char backend[32];
} npu_admin_version_t;

/* device -1: every device; else that device only (NPU_ERR_INVALID naming it when it does
 * not exist). Any client may list. */
npu_status_t npu_admin_mem(npu_context_t *ctx, int device, size_t elem_size, npu_admin_mem_t **ret_list,
                           size_t *ret_count);
npu_status_t npu_admin_mem_holders(npu_context_t *ctx, int device, size_t elem_size,
                                   npu_admin_mem_holder_t **ret_list, size_t *ret_count, int *ret_all);
npu_status_t npu_admin_health(npu_context_t *ctx, size_t elem_size, npu_admin_health_t **ret_list,
                              size_t *ret_count);
npu_status_t npu_admin_version(npu_context_t *ctx, npu_admin_version_t *ret);
/* Frees a list of any npu_admin_* listing; NULL is ignored. */
void npu_admin_free(void *list);

/* Close another session: npud releases everything it holds; its client sees
 * NPU_ERR_CONNECTION. A session cannot kill itself (NPU_ERR_INVALID). */
npu_status_t npu_admin_session_kill(npu_context_t *ctx, uint64_t session);
/* Set a tenant's device-memory quota (bytes 0: no quota): device -1 sets the total over all
 * devices; a device id sets the per-device quota, one value that applies to every device (the
 * id must name a device). Quotas limit new allocations; memory already held stays. */
npu_status_t npu_admin_quota_set(npu_context_t *ctx, const char *tenant, int device, uint64_t bytes);
/* Re-read npud's configuration file (tenants, limits); on an error the old configuration
 * stays and the message says what was wrong (NPU_ERR_INVALID). Needs root or the admin
 * group. */
npu_status_t npu_admin_reload(npu_context_t *ctx);
/* drain 1: the device takes no new streams (existing ones run on); 0: takes them again. */
npu_status_t npu_admin_device_drain(npu_context_t *ctx, int device, int drain);
/* Cancel the device's queued work and clear its faults. */
npu_status_t npu_admin_device_reset(npu_context_t *ctx, int device);

/* Fault injection (the simulated backend), for testing clients' error handling. */
typedef enum npu_fault {
        NPU_FAULT_FAIL_NEXT = 1,   /* the next value tasks on the device fail (value >= 1) */
        NPU_FAULT_FAIL_DEVICE = 2, /* the device fails: its work fails until reset */
        NPU_FAULT_SLOW = 3,        /* the device runs value times slower */
        NPU_FAULT_ECC_CORRECTED = 4,   /* value more corrected HBM ECC errors counted */
        NPU_FAULT_ECC_UNCORRECTED = 5, /* value more uncorrected HBM ECC errors counted */
} npu_fault_t;
npu_status_t npu_admin_fault_inject(npu_context_t *ctx, int device, npu_fault_t kind, double value);
npu_status_t npu_admin_fault_clear(npu_context_t *ctx, int device);

#ifdef __cplusplus
}
#endif

#endif

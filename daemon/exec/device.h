/* Device registry: every NPU npud owns, its memory allocator, engine slots, health and
 * utilization. Owned by the loop thread. */
#ifndef NPUD_DEVICE_H
#define NPUD_DEVICE_H

#include <stdint.h>
#include <sys/queue.h>

#include "policy/dispatch.h"
#include "daemon/backend/backend.h"
#include "proto/errors.h"

#define STREAM_PRIORITIES 8

struct alloc;
struct stream;

enum device_health { DEVICE_OK = 0, DEVICE_FAILED = 1 };

/* Utilization history: one sample a utilization period (a second), the last five minutes. */
#define DEVICE_HISTORY 300

struct device_sample {
        uint64_t wall_ms; /* CLOCK_REALTIME, ms */
        float util[OPS_ENGINE_COUNT]; /* fractions 0..1 */
        float temperature_c, power_w;
};

struct device {
        int id;
        char name[16];
        struct backend_device_desc desc;
        struct backend *backend;
        uint8_t *mem_host;  /* the device's memory mapped for npud's own use (mem_map) */
        struct alloc *alloc;
        uint64_t mem_used; /* bytes reserved by live buffers, rounded to the granule */
        /* Freed blocks the reclaimer is clearing (reclaim.h): still allocated, already
         * counted free (mem_used, device_mem_stats); loop thread only. */
        uint64_t reclaiming, reclaiming_largest;
        enum device_health health;
        int draining;        /* takes no new streams */
        int low_memory;      /* free memory below the low watermark (clients were told) */
        int resetting;       /* a reset waits for running work to drain (manage.c) */
        uint64_t busy_ns[OPS_ENGINE_COUNT]; /* core-ns spent in completed units */
        uint64_t util_last_busy[OPS_ENGINE_COUNT], util_last_ns;
        double util[OPS_ENGINE_COUNT]; /* fraction of cores busy over the last period */
        /* The backend's health and telemetry at the last utilization period (temperature,
         * power, clock, ECC counters), and the samples of the last DEVICE_HISTORY periods,
         * oldest first from hist_head - hist_count (a ring). */
        struct backend_health telemetry;
        struct device_sample hist[DEVICE_HISTORY];
        int hist_head, hist_count;
        uint64_t tasks_completed, tasks_failed;
        /* units sent to the backend: each a worker wake-up and a completion (chains of
         * tasks, a request's copies riding with its run, make fewer of them than tasks) */
        uint64_t units;
        uint64_t units_inline; /* of them, run on the loop thread (sched.c, INLINE_MAX_NS) */
        /* for the metrics: faults injected by kind (enum fault_kind), resets begun, and
         * failed tasks by error code (PROTO_E_*; PROTO_E_COUNT holds codes out of range) */
        uint64_t faults[FAULT_ECC_UNCORRECTED + 1];
        uint64_t resets;
        uint64_t task_errors[PROTO_E_COUNT + 1];
        uint32_t streams; /* live streams placed on this device */
        struct pd_device pd;  /* dispatch policy state */
        double *calib;        /* measured / estimated duration, [op slot][engine] */
        int calib_slots;
};

/* Calibration rows: one per operator, then graph runs, copies and memsets. */
int device_calib_slot_graph(const struct device *d);
int device_calib_slot_copy(const struct device *d);
int device_calib_slot_memset(const struct device *d);
double *device_calib(struct device *d, int slot, int engine);

struct device_registry {
        struct device *devices;
        int count;
};

/* Build one device per backend device. 0 or -errno with err filled. */
int device_registry_init(struct device_registry *r, struct backend *b, double min_share,
                         char *err, size_t errlen);
void device_registry_deinit(struct device_registry *r);
struct device *device_get(struct device_registry *r, int id); /* NULL if out of range */
/* Update the utilization figures (called periodically). */
void device_update_util(struct device *d, uint64_t now);
/* The i-th sample of the history, oldest first (i < hist_count). */
const struct device_sample *device_sample_at(const struct device *d, int i);
/* Link between two devices, as nvidia-smi topo names them: "X" (itself), "HCCS" (one HCCS
 * group), "PIX" (one PCIe switch), "NODE" (one NUMA node, through its host bridge) or
 * "SYS" (across the NUMA interconnect). */
const char *device_link(const struct device *a, const struct device *b);
const char *device_health_name(enum device_health h);

#endif

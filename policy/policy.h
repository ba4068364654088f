/* Scheduling policy configuration: tenants (who they are, their class, weight and limits)
 * and the scheduler's global settings, parsed from the "tenants" and "scheduler" sections
 * of npud.conf. Pure: no I/O, no clock. */
#ifndef NPU_POLICY_POLICY_H
#define NPU_POLICY_POLICY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define POLICY_NAME_MAX 64
#define POLICY_MAX_TENANTS 256
#define POLICY_MAX_IDS 32

enum policy_class {
        POLICY_CLASS_LATENCY_CRITICAL = 0,
        POLICY_CLASS_NORMAL = 1,
        POLICY_CLASS_BEST_EFFORT = 2,
        POLICY_CLASS_COUNT
};

enum policy_placement {
        POLICY_PLACE_LEAST_LOADED = 0,
        POLICY_PLACE_SPREAD,
        POLICY_PLACE_BINPACK,
};

/* A task (a graph run included) that runs longer fails with "limit"; Loop/Scan nodes may
 * iterate at most this often. Per tenant; 0 in the config means no limit. */
#define POLICY_DEFAULT_MAX_RUN_MS 60000ull
#define POLICY_DEFAULT_MAX_LOOP_TRIPS 10000000ull

struct policy_tenant {
        char name[POLICY_NAME_MAX];
        enum policy_class klass;
        double weight;
        uid_t uids[POLICY_MAX_IDS];
        int nuids;
        gid_t gids[POLICY_MAX_IDS];
        int ngids;
        uint64_t quota_total;      /* device-memory bytes over all devices; 0 = unlimited */
        uint64_t quota_per_device; /* bytes on any one device; 0 = unlimited */
        uint32_t max_streams;      /* 0 = unlimited */
        uint32_t max_queued_tasks; /* 0 = unlimited */
        uint64_t devices;          /* bitmask of allowed devices (bit i = device i) */
        uint64_t max_region_bytes; /* host-region bytes over all its sessions; 0 = unlimited */
        uint64_t max_run_ms;       /* longest a task may run (graph runs included); 0 = none */
        uint64_t max_loop_trips;   /* trip count cap of any Loop/Scan node; 0 = none */
};

struct policy_config {
        struct policy_tenant tenants[POLICY_MAX_TENANTS]; /* [0] is always "default" */
        int ntenants;
        enum policy_placement placement;
        double min_share;   /* engine-time share best-effort work always gets when it waits */
        uint64_t tile_ns;   /* target duration of one dispatch (tile or chain) */
        uint64_t lc_reserved;   /* device bytes only latency-critical tenants may take */
        double low_watermark;   /* notify clients when a device's free memory falls below */
};

/* Defaults: just the "default" tenant (normal, weight 1, unlimited), least-loaded placement,
 * min share 0.05, 1 ms tiles. */
void policy_config_init(struct policy_config *c);
/* Parse the "memory" object: {"reserved_for_latency_critical": bytes, "low_watermark": 0..1}. */
int policy_memory_parse(struct policy_config *c, json_t *memory, char *err, size_t errlen);
/* Parse the "tenants" array and "scheduler" object (either may be NULL) over defaults.
 * 0, or -EINVAL with a message naming the key (e.g. "tenants[2].class"). */
int policy_config_parse(struct policy_config *c, json_t *tenants, json_t *scheduler, char *err,
                        size_t errlen);

/* Which tenant a client belongs to. requested: a tenant name the client asked for, or NULL.
 * Returns the tenant index; -EPERM when the requested tenant exists but the credentials do
 * not match it, -ENOENT when no tenant has that name. Without a request: the first tenant
 * whose uids or gids match, else 0 (default). */
int policy_tenant_match(const struct policy_config *c, const char *requested, uid_t uid,
                        gid_t gid, const gid_t *groups, int ngroups);
int policy_tenant_find(const struct policy_config *c, const char *name);

const char *policy_class_name(enum policy_class k);
const char *policy_placement_name(enum policy_placement p);

#endif

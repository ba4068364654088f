/* Tenants at run time: the policy each one has (from the config), what its sessions use
 * (device memory, streams, queued tasks) and what it got from the scheduler (tasks, engine
 * time, queue wait) per device. Sessions hold a reference to their tenant; a reload replaces
 * the policy and moves every session to the tenant it matches now. */
#ifndef NPUD_TENANT_H
#define NPUD_TENANT_H

#include <stdint.h>

#include "policy/dispatch.h"
#include "policy/policy.h"
#include "ops/runctx.h"

struct npud;
struct session;

#define WAIT_BUCKETS 48 /* log2 buckets of queue wait in ns */

struct tenant_device {
        struct pd_tenant pd;
        uint64_t mem_used;
        uint64_t tasks, failed;
        uint64_t cancelled; /* behind a failure in its stream, never run (not in failed) */
        /* run-time per-device quota (npuctl quota set --device): wins over the policy's
         * quota_per_device on this device while has_quota */
        int has_quota;
        uint64_t quota;
        uint64_t engine_ns;
        uint64_t wait_hist[WAIT_BUCKETS];
        /* graph intermediates and kernel workspaces of the tenant's running work on this
         * device; parent: the tenant's ws */
        struct ops_mem_budget ws;
};

struct tenant {
        int refs;
        int index; /* in the current policy; -1 once removed by a reload */
        struct policy_tenant pol;  /* in force: the file's, with the run-time quotas below */
        struct policy_tenant file; /* as the configuration file says */
        /* Quotas set at run time (npuctl quota set, D-Bus SetTenantQuota). A reload keeps
         * them unless the file's value of that quota changed: the operator edited it since. */
        int has_quota_total;
        uint64_t quota_total;
        uint64_t mem_used;
        uint64_t mem_peak;
        uint64_t region_bytes;
        uint32_t streams;
        uint32_t queued;
        uint32_t sessions;
        uint32_t graph_units;   /* graph runs at the backend now, all devices */
        /* a unit of the tenant's ran over INLINE_OVERRUN_NS on the loop thread (sched.c):
         * none runs there any more */
        int inline_off;
        /* the log's failure summary (daemon/api/failsum.c): failures not logged yet, and
         * when the current window began (0: none yet) */
        uint64_t fail_unlogged;
        uint64_t fail_window_ns;
        int ndevices;
        struct tenant_device *dev;
        char ws_name[POLICY_NAME_MAX + 16];
        struct ops_mem_budget ws; /* all devices; parent: tenant_ws_host */
};

/* What all running work may hold in intermediates at once: the host's memory, less a
 * margin, so no model can drive npud into the OOM killer. */
extern struct ops_mem_budget tenant_ws_host;
/* Bring the budgets' limits and held bytes up to date with the policy and the allocations
 * (loop thread; before work of the tenant starts). */
void tenant_ws_sync(struct tenant *t, int device);

/* Tenants a reload removed keep their statistics, shown beside the current ones (sched,
 * device show) as metrics keep their series: counts under a name never go back. A later
 * reload that names the tenant again takes it back with its statistics. */
#define TENANT_RETIRED_MAX 256

struct tenant_registry {
        struct policy_config *policy; /* owned */
        struct tenant **tenants;      /* current tenants, by policy index */
        int ntenants;
        int ndevices;
        struct tenant **retired;      /* removed by a reload, oldest first; referenced */
        int nretired;
};

/* The device-memory quota of t on one device (0: unlimited): a run-time per-device quota, else
 * the policy's quota_per_device. */
uint64_t tenant_quota_device(const struct tenant *t, int device);
/* Set a run-time quota: device -1 = total. Recomputes t->pol. */
void tenant_quota_set(struct tenant *t, int device, uint64_t bytes);

int tenant_registry_init(struct tenant_registry *r, const struct policy_config *policy,
                         int ndevices);
void tenant_registry_deinit(struct tenant_registry *r);
/* Apply a new policy: tenants keep their run-time state when their name stays. */
int tenant_registry_apply(struct tenant_registry *r, const struct policy_config *policy);

struct tenant *tenant_ref(struct tenant *t);
void tenant_unref(struct tenant *t);

/* Record a completed task's queue wait (ns). */
void tenant_note_wait(struct tenant *t, int device, uint64_t wait_ns);
/* Quantile (0..1) of the queue wait histogram of one device (-1 = all), in ns. */
uint64_t tenant_wait_quantile(const struct tenant *t, int device, double q);

#endif

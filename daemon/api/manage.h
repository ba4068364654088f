/* Management operations, shared by the admin protocol (npuctl) and the D-Bus API: each
 * validates its arguments, changes daemon state on the loop thread, and returns 0 or a
 * PROTO_E_* code with a message for the caller. Observers (D-Bus signals, client
 * notifications) are told about changes through the hooks in struct npud. */
#ifndef NPUD_MANAGE_H
#define NPUD_MANAGE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "daemon/backend/backend.h" /* enum fault_kind */

struct npud;

/* Parse "fail-next" / "fail-device" / "slow"; -1 when unknown. */
int manage_fault_parse(const char *name);
const char *manage_fault_name(int kind);

int manage_device_drain(struct npud *d, int device, int drain, char *err, size_t errlen);
/* Drain, cancel the device's queued work with a device error, wait for running work, clear
 * faults and return the device to health "ok" (completes asynchronously; returns at once). */
int manage_device_reset(struct npud *d, int device, char *err, size_t errlen);
/* Called when a unit of dev completed: finishes a reset once nothing runs there. */
struct device;
void manage_device_poll(struct npud *d, struct device *dev);
int manage_session_kill(struct npud *d, uint64_t session_id, char *err, size_t errlen);
int manage_fault_inject(struct npud *d, int device, int kind, double value, char *err,
                        size_t errlen);
int manage_fault_clear(struct npud *d, int device, char *err, size_t errlen);
/* Append the tenants added at run time (methods-tenant.c) to a policy parsed from the file,
 * less those the file now names itself (dropped from the run-time list). */
struct policy_config;
void tenant_runtime_append(struct npud *d, struct policy_config *policy);
/* Log an admin action (level: enum log_level, mid: a LOG_MID_*) naming who asked for it. */
void manage_audit(struct npud *d, int level, const char *mid, int device, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* The rate-limited log summary of failed tasks (failsum.c): note one failure of t; flush
 * what windows have ended (the one-second timer). */
struct tenant;
void failure_summary_note(struct npud *d, struct tenant *t);
void failure_summary_flush(struct npud *d);
void failure_summary_flush_all(struct npud *d); /* at shutdown, windows or not */
/* Who asked for the admin operation in progress (d->actor), e.g. "uid 0 via socket". */
const char *manage_actor_text(struct npud *d, char *buf, size_t len);
/* Re-read the configuration file; on error the old configuration stays in force. */
int manage_reload(struct npud *d, char *err, size_t errlen);
/* The same, and *ret_info (if given) tells what became of run-time quotas:
 * {"tenants", "runtime_quotas_kept": [{"tenant", "quota": "total" or "device N"}],
 * "runtime_quotas_dropped": [the same]}: a run-time quota gives way to the file's when the
 * file changed that quota or removed the tenant. */
int manage_reload_info(struct npud *d, json_t **ret_info, char *err, size_t errlen);
/* Set a tenant's device-memory quota (bytes; 0 = unlimited); device -1 = total. */
int manage_tenant_quota(struct npud *d, const char *tenant, int device, uint64_t bytes,
                        char *err, size_t errlen);
/* The same; *ret_info (if given): {"tenant", "device", "bytes", "memory_used",
 * "below_usage", and "warning" when the tenant already uses more than the new quota}. A
 * run-time quota survives reloads that leave the file's value of that quota unchanged. */
int manage_tenant_quota_info(struct npud *d, const char *tenant, int device, uint64_t bytes,
                             json_t **ret_info, char *err, size_t errlen);

#endif

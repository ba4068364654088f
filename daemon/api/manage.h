/* Management operations, shared by the admin protocol (npuctl) and the D-Bus API: each
 * validates its arguments, changes daemon state on the loop thread, and returns 0 or a
 * PROTO_E_* code with a message for the caller. Observers (D-Bus signals, client
 * notifications) are told about changes through the hooks in struct npud. */
#ifndef NPUD_MANAGE_H
#define NPUD_MANAGE_H

#include <stddef.h>
#include <stdint.h>

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
/* Re-read the configuration file; on error the old configuration stays in force. */
int manage_reload(struct npud *d, char *err, size_t errlen);
/* Set a tenant's device-memory quota (bytes; 0 = unlimited); device -1 = total. */
int manage_tenant_quota(struct npud *d, const char *tenant, int device, uint64_t bytes,
                        char *err, size_t errlen);

#endif

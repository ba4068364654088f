/* The D-Bus API (see bus.h) with sd-bus, run inside the daemon's libevent loop: the bus fd is
 * watched for what sd_bus_get_events() asks, a timer follows sd_bus_get_timeout() (absolute
 * CLOCK_MONOTONIC µs), and sd_bus_process() runs until it has nothing left. Anything sent
 * from outside a bus callback (signals from the observer hooks) may leave output queued, so
 * every send re-arms the watches.
 *
 * Methods are marked SD_BUS_VTABLE_UNPRIVILEGED, or sd-bus itself would refuse every caller
 * without CAP_SYS_ADMIN; the handler then checks the caller (euid 0 or the admin group among
 * its groups) from the credentials the bus reports. */
#include <errno.h>
#include <math.h>
#include <event2/event.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

#include "proto/errors.h"
#include "bus.h"
#include "util/log.h"
#include "manage.h"
#include "notify.h"
#include "npud.h"
#include "session.h"

#ifndef NPUD_VERSION
#define NPUD_VERSION "0.1.0"
#endif

#define BUS_NAME "org.npud.Manager1"
#define BUS_PATH "/org/npud/Manager1"
#define BUS_IFACE "org.npud.Manager1"
#define DEVICE_PATH_PREFIX "/org/npud/Manager1/device/"
#define DEVICE_IFACE "org.npud.Device1"
#define TENANT_PATH "/org/npud/Manager1/tenant"
#define TENANT_IFACE "org.npud.Tenant1"
#define SESSION_PATH "/org/npud/Manager1/session"
#define SESSION_IFACE "org.npud.Session1"
#define OM_IFACE "org.freedesktop.DBus.ObjectManager"

/* Error names (docs/dbus.md): what went wrong, so that callers need not parse messages. */
#define ERROR_FAILED "org.npud.Error.Failed"
#define ERROR_NO_DEVICE "org.npud.Error.NoSuchDevice"
#define ERROR_NO_TENANT "org.npud.Error.NoSuchTenant"
#define ERROR_NO_SESSION "org.npud.Error.NoSuchSession"
#define ERROR_PERMISSION "org.npud.Error.PermissionDenied"
#define ERROR_QUOTA "org.npud.Error.QuotaExceeded"
#define ERROR_LIMIT "org.npud.Error.LimitExceeded"
#define ERROR_INVALID "org.npud.Error.InvalidArgument"
#define ERROR_UNSUPPORTED "org.npud.Error.NotSupported"
#define ERROR_DEVICE "org.npud.Error.DeviceFailed"
#define ERROR_BUSY "org.npud.Error.Busy"

/* Reconnection after the bus went away: first retry after 1 s, doubling up to 16 s. */
#define RETRY_FIRST_S 1
#define RETRY_MAX_S 16

static const char *const engine_names[OPS_ENGINE_COUNT] = { "cube", "vector", "aicpu", "dma" };

/* What observers were last told about a device, so that only changes are emitted. */
struct bus_device_seen {
        int health;
        int draining;
        uint64_t mem_used;
};

/* What observers were last told about a tenant: its name and the properties that emit
 * changes (the per-device quotas as a hash: only whether they changed matters). */
struct bus_tenant_seen {
        char name[POLICY_NAME_MAX];
        int klass;
        double weight;
        uint64_t quota_total;
        uint64_t quota_hash;
};

struct bus {
        struct npud *npud;
        struct bus_tenant_seen *tenants_seen; /* POLICY_MAX_TENANTS entries */
        int ntenants_seen;
        sd_bus *bus;
        struct event *io_read, *io_write, *timer;
        struct event *mem_timer; /* MemoryUsed changes, at most once a second */
        struct bus_device_seen *seen;
        int write_armed;
        struct event *retry;  /* reconnection timer while the bus is away */
        int retry_s;          /* its next interval */
        int ever_connected;   /* warn once; later failures to reconnect are debug */
};

/* The daemon, for property getters whose userdata is a device. One bus per process. */
static struct npud *bus_npud;

static uint64_t monotonic_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

static void device_path(int id, char *buf, size_t len)
{
        snprintf(buf, len, DEVICE_PATH_PREFIX "%d", id);
}

static void bus_teardown(struct bus *b);
static void bus_retry_later(struct bus *b);

/* Make the loop wait for what sd-bus wants next: readable (always), writable while output
 * is queued, and its next timeout. */
static void bus_rearm(struct bus *b)
{
        uint64_t usec;
        int events;

        if (!b->bus)
                return;
        events = sd_bus_get_events(b->bus);
        if (events < 0)
                events = 0; /* closed: the next dispatch notices */
        if ((events & POLLOUT) && !b->write_armed) {
                event_add(b->io_write, NULL);
                b->write_armed = 1;
        } else if (!(events & POLLOUT) && b->write_armed) {
                event_del(b->io_write);
                b->write_armed = 0;
        }
        if (sd_bus_get_timeout(b->bus, &usec) >= 0 && usec != UINT64_MAX) {
                uint64_t now = monotonic_usec(), rel = usec > now ? usec - now : 0;
                struct timeval tv = { .tv_sec = (time_t)(rel / 1000000),
                                      .tv_usec = (suseconds_t)(rel % 1000000) };
                evtimer_add(b->timer, &tv);
        } else {
                evtimer_del(b->timer);
        }
}

static void on_bus_event(evutil_socket_t fd, short what, void *arg)
{
        struct bus *b = arg;
        int r;

        do
                r = sd_bus_process(b->bus, NULL);
        while (r > 0);
        if (r < 0) {
                log_warn("D-Bus: connection lost (%s); reconnecting in the background",
                         strerror(-r));
                bus_teardown(b);
                b->retry_s = RETRY_FIRST_S;
                bus_retry_later(b);
                return;
        }
        bus_rearm(b);
}

/* ---- credentials -------------------------------------------------------------------- */

static int require_admin(sd_bus_message *m, struct bus *b, sd_bus_error *error)
{
        const struct npud_config *c = &b->npud->config;
        sd_bus_creds *creds = NULL;
        const gid_t *gids;
        uid_t euid = (uid_t)-1;
        pid_t pid = 0;
        gid_t egid;
        int r, n, ok = 0;

        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_EGID | SD_BUS_CREDS_PID |
                                                 SD_BUS_CREDS_SUPPLEMENTARY_GIDS |
                                                 SD_BUS_CREDS_AUGMENT,
                                      &creds);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "cannot identify the caller: %s", strerror(-r));
        if (sd_bus_creds_get_pid(creds, &pid) < 0)
                pid = 0;
        if (sd_bus_creds_get_euid(creds, &euid) < 0)
                euid = (uid_t)-1;
        else if (euid == 0)
                ok = 1;
        else if (c->have_admin_gid) {
                if (sd_bus_creds_get_egid(creds, &egid) >= 0 && egid == c->admin_gid)
                        ok = 1;
                n = sd_bus_creds_get_supplementary_gids(creds, &gids);
                for (int i = 0; i < n && !ok; i++)
                        ok = gids[i] == c->admin_gid;
        }
        sd_bus_creds_unref(creds);
        if (!ok) {
                log_info("D-Bus: %s refused to %s (not root, not in group %s)",
                         sd_bus_message_get_member(m), sd_bus_message_get_sender(m),
                         c->admin_group);
                return sd_bus_error_setf(error, ERROR_PERMISSION,
                                         "%s requires root or group %s",
                                         sd_bus_message_get_member(m), c->admin_group);
        }
        b->npud->actor = (struct npud_actor){ euid, pid, "dbus" };
        return 0;
}

/* ---- Manager1 properties and methods --------------------------------------------------- */

static int prop_version(sd_bus *bus, const char *path, const char *iface, const char *prop,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", NPUD_VERSION);
}

static int prop_devices(sd_bus *bus, const char *path, const char *iface, const char *prop,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char p[64];
        int r = sd_bus_message_open_container(reply, 'a', "o");

        for (int i = 0; r >= 0 && i < b->npud->ex.devices.count; i++) {
                device_path(i, p, sizeof(p));
                r = sd_bus_message_append(reply, "o", p);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int prop_session_count(sd_bus *bus, const char *path, const char *iface,
                              const char *prop, sd_bus_message *reply, void *userdata,
                              sd_bus_error *error)
{
        struct bus *b = userdata;
        return sd_bus_message_append(reply, "u", b->npud->nsessions);
}

/* The reply to a management call: manage.h's code and message as a D-Bus error. */
static int reply_manage(sd_bus_message *m, sd_bus_error *error, int code, const char *err)
{
        const char *name;

        if (code == 0)
                return sd_bus_reply_method_return(m, NULL);
        switch (code) {
        case PROTO_E_INVALID:
                /* manage.c reports unknown objects as invalid arguments, with these words */
                if (strncmp(err, "no device", 9) == 0)
                        name = ERROR_NO_DEVICE;
                else if (strncmp(err, "no tenant", 9) == 0)
                        name = ERROR_NO_TENANT;
                else if (strncmp(err, "no session", 10) == 0)
                        name = ERROR_NO_SESSION;
                else
                        name = ERROR_INVALID;
                break;
        case PROTO_E_BAD_HANDLE: name = ERROR_INVALID; break;
        case PROTO_E_PERMISSION: name = ERROR_PERMISSION; break;
        case PROTO_E_UNSUPPORTED: name = ERROR_UNSUPPORTED; break;
        case PROTO_E_QUOTA: name = ERROR_QUOTA; break;
        case PROTO_E_NO_MEMORY: name = ERROR_QUOTA; break;
        case PROTO_E_LIMIT: name = ERROR_LIMIT; break;
        case PROTO_E_DEVICE: name = ERROR_DEVICE; break;
        case PROTO_E_BUSY: name = ERROR_BUSY; break;
        default: name = ERROR_FAILED; break;
        }
        return sd_bus_error_setf(error, name, "%s", err[0] ? err : proto_error_name(code));
}

/* Read the device argument ("u") and check the caller. 0, or what the handler returns. */
static int device_call(sd_bus_message *m, struct bus *b, sd_bus_error *error, int *device)
{
        uint32_t dev;
        int r = sd_bus_message_read(m, "u", &dev);

        if (r < 0)
                return r;
        if ((r = require_admin(m, b, error)) < 0)
                return r;
        if (dev >= (uint32_t)b->npud->ex.devices.count)
                return sd_bus_error_setf(error, ERROR_NO_DEVICE, "no device %u", dev);
        *device = (int)dev;
        return 0;
}

static int method_drain_common(sd_bus_message *m, void *userdata, sd_bus_error *error, int drain)
{
        struct bus *b = userdata;
        char err[256] = "";
        int dev, r = device_call(m, b, error, &dev);

        if (r < 0)
                return r;
        return reply_manage(m, error, manage_device_drain(b->npud, dev, drain, err, sizeof(err)),
                            err);
}

static int method_drain(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        return method_drain_common(m, userdata, error, 1);
}

static int method_undrain(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        return method_drain_common(m, userdata, error, 0);
}

static int method_reset(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char err[256] = "";
        int dev, r = device_call(m, b, error, &dev);

        if (r < 0)
                return r;
        return reply_manage(m, error, manage_device_reset(b->npud, dev, err, sizeof(err)), err);
}

static int method_clear_fault(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char err[256] = "";
        int dev, r = device_call(m, b, error, &dev);

        if (r < 0)
                return r;
        return reply_manage(m, error, manage_fault_clear(b->npud, dev, err, sizeof(err)), err);
}

static int method_inject_fault(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char err[256] = "";
        const char *kind;
        double value;
        int dev, k, r = device_call(m, b, error, &dev);

        if (r < 0)
                return r;
        if ((r = sd_bus_message_read(m, "sd", &kind, &value)) < 0)
                return r;
        k = manage_fault_parse(kind);
        if (k < 0)
                return sd_bus_error_setf(error, ERROR_INVALID,
                                         "unknown fault '%s' (fail-next, fail-device or slow)",
                                         kind);
        return reply_manage(m, error,
                            manage_fault_inject(b->npud, dev, k, value, err, sizeof(err)), err);
}

static int method_set_tenant_quota(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char err[256] = "";
        const char *tenant;
        int32_t dev;
        uint64_t bytes;
        int r = sd_bus_message_read(m, "sit", &tenant, &dev, &bytes);

        if (r < 0)
                return r;
        if ((r = require_admin(m, b, error)) < 0)
                return r;
        return reply_manage(m, error,
                            manage_tenant_quota(b->npud, tenant, dev, bytes, err, sizeof(err)),
                            err);
}

static int method_kill_session(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char err[256] = "";
        uint64_t id;
        int r = sd_bus_message_read(m, "t", &id);

        if (r < 0)
                return r;
        if ((r = require_admin(m, b, error)) < 0)
                return r;
        return reply_manage(m, error, manage_session_kill(b->npud, id, err, sizeof(err)), err);
}

static int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        struct bus *b = userdata;
        char err[512] = "";
        int r = require_admin(m, b, error);

        if (r < 0)
                return r;
        notify_reloading(); /* the service manager sees every reload, whoever asked */
        r = manage_reload(b->npud, err, sizeof(err));
        notify_ready(b->npud);
        return reply_manage(m, error, r, err);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", prop_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Devices", "ao", prop_devices, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("SessionCount", "u", prop_session_count, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("Drain", SD_BUS_ARGS("u", device), SD_BUS_NO_RESULT,
                                method_drain, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Undrain", SD_BUS_ARGS("u", device), SD_BUS_NO_RESULT,
                                method_undrain, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reset", SD_BUS_ARGS("u", device), SD_BUS_NO_RESULT,
                                method_reset, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetTenantQuota",
                                SD_BUS_ARGS("s", tenant, "i", device, "t", bytes),
                                SD_BUS_NO_RESULT, method_set_tenant_quota,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("KillSession", SD_BUS_ARGS("t", id), SD_BUS_NO_RESULT,
                                method_kill_session, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reload", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_reload,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("InjectFault", SD_BUS_ARGS("u", device, "s", kind, "d", value),
                                SD_BUS_NO_RESULT, method_inject_fault,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ClearFault", SD_BUS_ARGS("u", device), SD_BUS_NO_RESULT,
                                method_clear_fault, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("DeviceHealthChanged", SD_BUS_ARGS("u", device, "s", health), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SessionOpened", SD_BUS_ARGS("t", id, "u", pid, "u", uid), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SessionClosed", SD_BUS_ARGS("t", id), 0),
        SD_BUS_VTABLE_END,
};

/* ---- Device1 properties (userdata: the struct device) ------------------------------------ */

static int prop_dev_name(sd_bus *bus, const char *path, const char *iface, const char *prop,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", ((struct device *)userdata)->name);
}

static int prop_dev_profile(sd_bus *bus, const char *path, const char *iface, const char *prop,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", ((struct device *)userdata)->desc.profile);
}

static int prop_dev_health(sd_bus *bus, const char *path, const char *iface, const char *prop,
                           sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s",
                                     device_health_name(((struct device *)userdata)->health));
}

static int prop_dev_memory_total(sd_bus *bus, const char *path, const char *iface,
                                 const char *prop, sd_bus_message *reply, void *userdata,
                                 sd_bus_error *error)
{
        return sd_bus_message_append(reply, "t", ((struct device *)userdata)->desc.mem_size);
}

static int prop_dev_memory_used(sd_bus *bus, const char *path, const char *iface,
                                const char *prop, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error)
{
        return sd_bus_message_append(reply, "t", ((struct device *)userdata)->mem_used);
}

static int prop_dev_utilization(sd_bus *bus, const char *path, const char *iface,
                                const char *prop, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error)
{
        struct device *dev = userdata;
        int r = sd_bus_message_open_container(reply, 'a', "{sd}");

        for (int k = 0; r >= 0 && k < OPS_ENGINE_COUNT; k++)
                r = sd_bus_message_append(reply, "{sd}", engine_names[k], dev->util[k] * 100.0);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int prop_dev_draining(sd_bus *bus, const char *path, const char *iface, const char *prop,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        int v = ((struct device *)userdata)->draining != 0;
        return sd_bus_message_append(reply, "b", v);
}

/* Identity (constant) and telemetry (as of the last utilization period), by property name. */
static int prop_dev_telemetry(sd_bus *bus, const char *path, const char *iface, const char *prop,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const struct device *dev = userdata;
        const struct backend_health *h = &dev->telemetry;

        if (strcmp(prop, "Uuid") == 0)
                return sd_bus_message_append(reply, "s", dev->desc.uuid);
        if (strcmp(prop, "Serial") == 0)
                return sd_bus_message_append(reply, "s", dev->desc.serial);
        if (strcmp(prop, "BusId") == 0)
                return sd_bus_message_append(reply, "s", dev->desc.bus_id);
        if (strcmp(prop, "Firmware") == 0)
                return sd_bus_message_append(reply, "s", dev->desc.firmware);
        if (strcmp(prop, "Driver") == 0)
                return sd_bus_message_append(reply, "s", dev->desc.driver);
        /* "telemetry": false: the sensor figures are not read; NaN says "not available"
         * where 0 would read as a real value (the ECC counters stay 0: nothing counted) */
        int off = bus_npud && bus_npud->config.no_telemetry;
        if (strcmp(prop, "Temperature") == 0)
                return sd_bus_message_append(reply, "d", off ? NAN : h->temperature_c);
        if (strcmp(prop, "Power") == 0)
                return sd_bus_message_append(reply, "d", off ? NAN : h->power_w);
        if (strcmp(prop, "PowerLimit") == 0)
                return sd_bus_message_append(reply, "d", dev->desc.power_limit_w);
        if (strcmp(prop, "ClockMHz") == 0)
                return sd_bus_message_append(reply, "d", off ? NAN : h->clock_mhz);
        if (strcmp(prop, "EccErrors") == 0)
                return sd_bus_message_append(reply, "(tt)", h->ecc_corrected, h->ecc_uncorrected);
        return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
}

/* The faults injected and still in force, as npuctl health shows them: kind -> value. */
static int prop_dev_faults(sd_bus *bus, const char *path, const char *iface, const char *prop,
                           sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const struct device *dev = userdata;
        struct backend_health h = { .slow = 1.0 };
        int r = sd_bus_message_open_container(reply, 'a', "{sd}");

        if (r >= 0 && bus_npud &&
            bus_npud->ex.backend->ops->health(bus_npud->ex.backend, dev->id, &h) >= 0) {
                if (h.failed)
                        r = sd_bus_message_append(reply, "{sd}",
                                                  manage_fault_name(FAULT_FAIL_DEVICE), 1.0);
                if (r >= 0 && h.fail_next > 0)
                        r = sd_bus_message_append(reply, "{sd}", manage_fault_name(FAULT_FAIL_NEXT),
                                                  (double)h.fail_next);
                if (r >= 0 && h.slow != 1.0)
                        r = sd_bus_message_append(reply, "{sd}", manage_fault_name(FAULT_SLOW),
                                                  h.slow);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static const sd_bus_vtable device_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Name", "s", prop_dev_name, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Profile", "s", prop_dev_profile, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Health", "s", prop_dev_health, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryTotal", "t", prop_dev_memory_total, 0,
                        SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("MemoryUsed", "t", prop_dev_memory_used, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* changes all the time: read it when needed */
        SD_BUS_PROPERTY("Utilization", "a{sd}", prop_dev_utilization, 0, 0),
        SD_BUS_PROPERTY("Draining", "b", prop_dev_draining, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Uuid", "s", prop_dev_telemetry, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Serial", "s", prop_dev_telemetry, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("BusId", "s", prop_dev_telemetry, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Firmware", "s", prop_dev_telemetry, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Driver", "s", prop_dev_telemetry, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("PowerLimit", "d", prop_dev_telemetry, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        /* telemetry changes all the time, like Utilization: read it when needed */
        SD_BUS_PROPERTY("Temperature", "d", prop_dev_telemetry, 0, 0),
        SD_BUS_PROPERTY("Power", "d", prop_dev_telemetry, 0, 0),
        SD_BUS_PROPERTY("ClockMHz", "d", prop_dev_telemetry, 0, 0),
        SD_BUS_PROPERTY("EccErrors", "(tt)", prop_dev_telemetry, 0, 0),
        /* read it when needed: a fail-next count goes down as tasks fail */
        SD_BUS_PROPERTY("Faults", "a{sd}", prop_dev_faults, 0, 0),
        SD_BUS_VTABLE_END,
};

/* ---- tenant and session objects (found by path; listed by the ObjectManager) ------------ */

/* /org/npud/Manager1/tenant/NAME (NAME escaped as sd_bus_path_encode does): the current
 * tenants, found by name so that a reload's changes show at once. */
static int find_tenant(sd_bus *bus, const char *path, const char *iface, void *userdata,
                       void **found, sd_bus_error *error)
{
        struct bus *b = userdata;
        const struct tenant_registry *reg = &b->npud->tenants;
        char *name = NULL;
        int r = sd_bus_path_decode(path, TENANT_PATH, &name);

        if (r <= 0)
                return r;
        for (int i = 0; i < reg->ntenants; i++)
                if (strcmp(reg->tenants[i]->pol.name, name) == 0) {
                        *found = reg->tenants[i];
                        free(name);
                        return 1;
                }
        free(name);
        return 0;
}

static int enum_tenants(sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                        sd_bus_error *error)
{
        struct bus *b = userdata;
        const struct tenant_registry *reg = &b->npud->tenants;
        char **v = calloc((size_t)reg->ntenants + 1, sizeof(*v));

        if (!v)
                return -ENOMEM;
        for (int i = 0; i < reg->ntenants; i++) {
                int r = sd_bus_path_encode(TENANT_PATH, reg->tenants[i]->pol.name, &v[i]);
                if (r < 0) {
                        for (int j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return r;
                }
        }
        *nodes = v;
        return 1;
}

static int prop_tenant(sd_bus *bus, const char *path, const char *iface, const char *prop,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const struct tenant *t = userdata;
        int r;

        if (strcmp(prop, "Name") == 0)
                return sd_bus_message_append(reply, "s", t->pol.name);
        if (strcmp(prop, "Class") == 0)
                return sd_bus_message_append(reply, "s", policy_class_name(t->pol.klass));
        if (strcmp(prop, "Weight") == 0)
                return sd_bus_message_append(reply, "d", t->pol.weight);
        if (strcmp(prop, "Sessions") == 0)
                return sd_bus_message_append(reply, "u", t->sessions);
        if (strcmp(prop, "MemoryUsed") == 0)
                return sd_bus_message_append(reply, "t", t->mem_used);
        if (strcmp(prop, "MemoryQuotaTotal") == 0)
                return sd_bus_message_append(reply, "t", t->pol.quota_total);
        if (strcmp(prop, "MemoryQuotaByDevice") == 0) {
                r = sd_bus_message_open_container(reply, 'a', "t");
                for (int i = 0; r >= 0 && i < t->ndevices; i++)
                        r = sd_bus_message_append(reply, "t", tenant_quota_device(t, i));
                return r < 0 ? r : sd_bus_message_close_container(reply);
        }
        return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
}

static const sd_bus_vtable tenant_vtable[] = {
        SD_BUS_VTABLE_START(0),
        /* Class, Weight and the quotas change with SetTenantQuota, quota_set, tenant_add and
         * reloads, and are announced (hook_tenants_changed); Sessions and MemoryUsed change
         * all the time and are read when needed */
        SD_BUS_PROPERTY("Name", "s", prop_tenant, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Class", "s", prop_tenant, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Weight", "d", prop_tenant, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Sessions", "u", prop_tenant, 0, 0),
        SD_BUS_PROPERTY("MemoryUsed", "t", prop_tenant, 0, 0),
        SD_BUS_PROPERTY("MemoryQuotaTotal", "t", prop_tenant, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryQuotaByDevice", "at", prop_tenant, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
};

/* /org/npud/Manager1/session/ID */
static int find_session(sd_bus *bus, const char *path, const char *iface, void *userdata,
                        void **found, sd_bus_error *error)
{
        struct bus *b = userdata;
        const char *tail;
        struct session *s;
        char *end;
        unsigned long long id;

        if (strncmp(path, SESSION_PATH "/", sizeof(SESSION_PATH)) != 0)
                return 0;
        tail = path + sizeof(SESSION_PATH);
        if (*tail < '0' || *tail > '9')
                return 0;
        errno = 0;
        id = strtoull(tail, &end, 10);
        if (errno || *end)
                return 0;
        TAILQ_FOREACH(s, &b->npud->sessions, link)
                if (s->id == id) {
                        *found = s;
                        return 1;
                }
        return 0;
}

static int enum_sessions(sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                         sd_bus_error *error)
{
        struct bus *b = userdata;
        struct session *s;
        char **v = calloc((size_t)b->npud->nsessions + 1, sizeof(*v));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        TAILQ_FOREACH(s, &b->npud->sessions, link) {
                if (n == b->npud->nsessions ||
                    asprintf(&v[n], SESSION_PATH "/%llu", (unsigned long long)s->id) < 0) {
                        for (size_t j = 0; j < n; j++)
                                free(v[j]);
                        free(v);
                        return -ENOMEM;
                }
                n++;
        }
        *nodes = v;
        return 1;
}

static int prop_session(sd_bus *bus, const char *path, const char *iface, const char *prop,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const struct session *s = userdata;

        if (strcmp(prop, "Id") == 0)
                return sd_bus_message_append(reply, "t", s->id);
        if (strcmp(prop, "Pid") == 0)
                return sd_bus_message_append(reply, "u", (uint32_t)s->pid);
        if (strcmp(prop, "Uid") == 0)
                return sd_bus_message_append(reply, "u", (uint32_t)s->uid);
        if (strcmp(prop, "Client") == 0)
                return sd_bus_message_append(reply, "s", s->comm);
        if (strcmp(prop, "Tenant") == 0)
                return sd_bus_message_append(reply, "s", s->tenant ? s->tenant->pol.name : "");
        return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
}

static const sd_bus_vtable session_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "t", prop_session, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Pid", "u", prop_session, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Uid", "u", prop_session, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Client", "s", prop_session, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        /* set at hello, moved by a reload: read it when needed */
        SD_BUS_PROPERTY("Tenant", "s", prop_session, 0, 0),
        SD_BUS_VTABLE_END,
};

/* ---- observers ------------------------------------------------------------------------- */

static void emit_result(const char *what, int r)
{
        if (r < 0)
                log_debug("D-Bus: cannot emit %s: %s", what, strerror(-r));
}

static void hook_session_opened(struct npud *d, struct session *s)
{
        struct bus *b = d->hooks.userdata;

        char path[64];

        emit_result("SessionOpened",
                    sd_bus_emit_signal(b->bus, BUS_PATH, BUS_IFACE, "SessionOpened", "tuu",
                                       s->id, (uint32_t)s->pid, (uint32_t)s->uid));
        snprintf(path, sizeof(path), SESSION_PATH "/%llu", (unsigned long long)s->id);
        emit_result("InterfacesAdded", sd_bus_emit_object_added(b->bus, path));
        emit_result("SessionCount", sd_bus_emit_properties_changed(b->bus, BUS_PATH, BUS_IFACE,
                                                                   "SessionCount", NULL));
        bus_rearm(b);
}

static void hook_session_closed(struct npud *d, struct session *s)
{
        struct bus *b = d->hooks.userdata;

        char path[64];

        emit_result("SessionClosed", sd_bus_emit_signal(b->bus, BUS_PATH, BUS_IFACE,
                                                        "SessionClosed", "t", s->id));
        /* By hand: the session has left the list, so sd-bus could no longer find its
         * interface to name it. */
        snprintf(path, sizeof(path), SESSION_PATH "/%llu", (unsigned long long)s->id);
        emit_result("InterfacesRemoved",
                    sd_bus_emit_signal(b->bus, BUS_PATH, OM_IFACE, "InterfacesRemoved", "oas",
                                       path, 1, SESSION_IFACE));
        emit_result("SessionCount", sd_bus_emit_properties_changed(b->bus, BUS_PATH, BUS_IFACE,
                                                                   "SessionCount", NULL));
        bus_rearm(b);
}

static void hook_device_changed(struct npud *d, struct device *dev)
{
        struct bus *b = d->hooks.userdata;
        struct bus_device_seen *seen = &b->seen[dev->id];
        char path[64];
        char *changed[3];
        int n = 0;

        device_path(dev->id, path, sizeof(path));
        if (seen->health != (int)dev->health) {
                seen->health = (int)dev->health;
                changed[n++] = "Health";
                emit_result("DeviceHealthChanged",
                            sd_bus_emit_signal(b->bus, BUS_PATH, BUS_IFACE, "DeviceHealthChanged",
                                               "us", (uint32_t)dev->id,
                                               device_health_name(dev->health)));
        }
        if (seen->draining != (dev->draining != 0)) {
                seen->draining = dev->draining != 0;
                changed[n++] = "Draining";
        }
        changed[n] = NULL;
        if (n)
                emit_result("PropertiesChanged",
                            sd_bus_emit_properties_changed_strv(b->bus, path, DEVICE_IFACE,
                                                                changed));
        bus_rearm(b);
}

static void tenant_seen_fill(struct bus_tenant_seen *seen, const struct tenant *t)
{
        uint64_t h = 1469598103934665603ull; /* FNV-1a over the per-device quotas */

        snprintf(seen->name, sizeof(seen->name), "%s", t->pol.name);
        seen->klass = (int)t->pol.klass;
        seen->weight = t->pol.weight;
        seen->quota_total = t->pol.quota_total;
        for (int i = 0; i < t->ndevices; i++) {
                uint64_t q = tenant_quota_device(t, i);
                for (int k = 0; k < 8; k++)
                        h = (h ^ ((q >> (8 * k)) & 0xff)) * 1099511628211ull;
        }
        seen->quota_hash = h;
}

/* Remember the tenants as they are now, telling nobody (at connection). */
static void tenants_snapshot(struct bus *b)
{
        const struct tenant_registry *reg = &b->npud->tenants;

        b->ntenants_seen = 0;
        for (int i = 0; i < reg->ntenants && i < POLICY_MAX_TENANTS; i++)
                tenant_seen_fill(&b->tenants_seen[b->ntenants_seen++], reg->tenants[i]);
}

static void tenant_path(const char *name, char *buf, size_t len)
{
        char *p = NULL;

        if (sd_bus_path_encode(TENANT_PATH, name, &p) >= 0)
                snprintf(buf, len, "%s", p);
        else
                buf[0] = 0;
        free(p);
}

/* Tenants added (InterfacesAdded), removed (InterfacesRemoved, by hand: the tenant is gone,
 * so sd-bus could no longer find its interface) and changed (PropertiesChanged naming what
 * changed), against what was last told. */
static void hook_tenants_changed(struct npud *d)
{
        struct bus *b = d->hooks.userdata;
        const struct tenant_registry *reg = &d->tenants;
        struct bus_tenant_seen now;
        char path[256];

        for (int i = 0; i < b->ntenants_seen; i++) {
                int found = 0;
                for (int k = 0; k < reg->ntenants && !found; k++)
                        found = strcmp(reg->tenants[k]->pol.name, b->tenants_seen[i].name) == 0;
                tenant_path(b->tenants_seen[i].name, path, sizeof(path));
                if (!found && path[0])
                        emit_result("InterfacesRemoved",
                                    sd_bus_emit_signal(b->bus, BUS_PATH, OM_IFACE, "InterfacesRemoved",
                                                       "oas", path, 1, TENANT_IFACE));
        }
        for (int k = 0; k < reg->ntenants; k++) {
                const struct bus_tenant_seen *old = NULL;
                char *changed[5];
                int n = 0;

                tenant_seen_fill(&now, reg->tenants[k]);
                for (int i = 0; i < b->ntenants_seen && !old; i++)
                        if (strcmp(b->tenants_seen[i].name, now.name) == 0)
                                old = &b->tenants_seen[i];
                tenant_path(now.name, path, sizeof(path));
                if (!path[0])
                        continue;
                if (!old) {
                        emit_result("InterfacesAdded", sd_bus_emit_object_added(b->bus, path));
                        continue;
                }
                if (old->klass != now.klass)
                        changed[n++] = "Class";
                if (old->weight != now.weight)
                        changed[n++] = "Weight";
                if (old->quota_total != now.quota_total)
                        changed[n++] = "MemoryQuotaTotal";
                if (old->quota_hash != now.quota_hash)
                        changed[n++] = "MemoryQuotaByDevice";
                changed[n] = NULL;
                if (n)
                        emit_result("PropertiesChanged",
                                    sd_bus_emit_properties_changed_strv(b->bus, path, TENANT_IFACE,
                                                                        changed));
        }
        tenants_snapshot(b);
        bus_rearm(b);
}

static void on_mem_timer(evutil_socket_t fd, short what, void *arg)
{
        struct bus *b = arg;
        struct npud *d = b->npud;
        char path[64];

        for (int i = 0; i < d->ex.devices.count; i++) {
                struct device *dev = &d->ex.devices.devices[i];
                if (b->seen[i].mem_used == dev->mem_used)
                        continue;
                b->seen[i].mem_used = dev->mem_used;
                device_path(i, path, sizeof(path));
                emit_result("MemoryUsed", sd_bus_emit_properties_changed(
                                                  b->bus, path, DEVICE_IFACE, "MemoryUsed", NULL));
        }
        bus_rearm(b);
}

/* ---- start and stop ---------------------------------------------------------------------- */

/* Drop the connection (error or shutdown); npud carries on without the API until a
 * reconnection succeeds. */
static void bus_teardown(struct bus *b)
{
        struct npud *d = b->npud;

        d->hooks.session_opened = NULL;
        d->hooks.session_closed = NULL;
        d->hooks.device_changed = NULL;
        d->hooks.tenants_changed = NULL;
        if (b->io_read)
                event_free(b->io_read);
        if (b->io_write)
                event_free(b->io_write);
        if (b->timer)
                event_free(b->timer);
        if (b->mem_timer)
                event_free(b->mem_timer);
        b->io_read = b->io_write = b->timer = b->mem_timer = NULL;
        b->write_armed = 0;
        /* Queued signals still go out; a dead connection just closes. */
        b->bus = sd_bus_flush_close_unref(b->bus);
}

/* Connect, register every object, own the name and watch the connection. 0, or -1 after
 * a message at level `lvl` saying why (the caller retries later). */
static int bus_connect(struct bus *b, enum log_level lvl)
{
        struct npud *d = b->npud;
        char path[64];
        int r, fd;

        for (int i = 0; i < d->ex.devices.count; i++) {
                b->seen[i].health = (int)d->ex.devices.devices[i].health;
                b->seen[i].draining = d->ex.devices.devices[i].draining != 0;
                b->seen[i].mem_used = d->ex.devices.devices[i].mem_used;
        }
        r = sd_bus_open_system(&b->bus);
        if (r < 0) {
                log_msg(lvl, "D-Bus: cannot connect to the system bus: %s; retrying in %d s",
                        strerror(-r), b->retry_s);
                goto fail;
        }
        r = sd_bus_add_object_vtable(b->bus, NULL, BUS_PATH, BUS_IFACE, manager_vtable, b);
        for (int i = 0; r >= 0 && i < d->ex.devices.count; i++) {
                device_path(i, path, sizeof(path));
                r = sd_bus_add_object_vtable(b->bus, NULL, path, DEVICE_IFACE, device_vtable,
                                             &d->ex.devices.devices[i]);
        }
        if (r >= 0)
                r = sd_bus_add_object_manager(b->bus, NULL, BUS_PATH);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(b->bus, NULL, TENANT_PATH, TENANT_IFACE,
                                               tenant_vtable, find_tenant, b);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(b->bus, NULL, TENANT_PATH, enum_tenants, b);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(b->bus, NULL, SESSION_PATH, SESSION_IFACE,
                                               session_vtable, find_session, b);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(b->bus, NULL, SESSION_PATH, enum_sessions, b);
        if (r < 0) {
                log_msg(lvl, "D-Bus: cannot register the objects: %s; retrying in %d s",
                        strerror(-r), b->retry_s);
                goto fail;
        }
        /* Synchronous, once per connection: afterwards everything goes through the loop. */
        r = sd_bus_request_name(b->bus, BUS_NAME, 0);
        if (r < 0) {
                log_msg(lvl, "D-Bus: cannot own %s: %s; retrying in %d s", BUS_NAME,
                        strerror(-r), b->retry_s);
                goto fail;
        }
        fd = sd_bus_get_fd(b->bus);
        b->io_read = event_new(d->base, fd, EV_READ | EV_PERSIST, on_bus_event, b);
        b->io_write = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_bus_event, b);
        b->timer = evtimer_new(d->base, on_bus_event, b);
        b->mem_timer = event_new(d->base, -1, EV_PERSIST, on_mem_timer, b);
        struct timeval second = { 1, 0 };
        if (fd < 0 || !b->io_read || !b->io_write || !b->timer || !b->mem_timer ||
            event_add(b->io_read, NULL) < 0 || event_add(b->mem_timer, &second) < 0) {
                log_msg(lvl, "D-Bus: cannot watch the connection; retrying in %d s", b->retry_s);
                goto fail;
        }
        d->hooks.session_opened = hook_session_opened;
        d->hooks.session_closed = hook_session_closed;
        d->hooks.device_changed = hook_device_changed;
        d->hooks.tenants_changed = hook_tenants_changed;
        tenants_snapshot(b);
        bus_rearm(b);
        log_info("D-Bus: %s on the system bus%s", BUS_NAME,
                 b->ever_connected ? " again (reconnected)" : "");
        b->ever_connected = 1;
        b->retry_s = RETRY_FIRST_S;
        return 0;
fail:
        bus_teardown(b);
        return -1;
}

/* The bus went away (or was never there): try again later, less often each time. */
static void on_retry(evutil_socket_t fd, short what, void *arg)
{
        struct bus *b = arg;
        /* Each failure was worth a warning once (the loss or the first attempt). */
        if (bus_connect(b, LOG_LVL_DEBUG) < 0) {
                b->retry_s = b->retry_s * 2 > RETRY_MAX_S ? RETRY_MAX_S : b->retry_s * 2;
                bus_retry_later(b);
        }
}

static void bus_retry_later(struct bus *b)
{
        struct timeval tv = { b->retry_s, 0 };

        if (b->retry)
                evtimer_add(b->retry, &tv);
}

int bus_start(struct npud *d)
{
        struct bus *b;

        if (!d->config.dbus)
                return 0;
        b = calloc(1, sizeof(*b));
        if (!b || !(b->seen = calloc((size_t)d->ex.devices.count + 1, sizeof(*b->seen))) ||
            !(b->tenants_seen = calloc(POLICY_MAX_TENANTS, sizeof(*b->tenants_seen)))) {
                if (b)
                        free(b->seen);
                free(b);
                log_warn("D-Bus: out of memory; continuing without the bus API");
                return 0;
        }
        b->npud = d;
        bus_npud = d;
        b->retry_s = RETRY_FIRST_S;
        b->retry = evtimer_new(d->base, on_retry, b);
        d->hooks.userdata = b;
        /* A bus that is not there yet (npud started before dbus.service) or goes away later
         * is retried on a timer: npud serves its clients meanwhile. */
        if (bus_connect(b, LOG_LVL_WARN) < 0) {
                bus_retry_later(b);
                return 0;
        }
        return 1;
}

void bus_stop(struct npud *d)
{
        struct bus *b = d->hooks.userdata;

        if (!b)
                return;
        bus_teardown(b);
        if (b->retry)
                event_free(b->retry);
        d->hooks.userdata = NULL;
        bus_npud = NULL;
        free(b->seen);
        free(b->tenants_seen);
        free(b);
}

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
#define ERROR_FAILED "org.npud.Manager1.Error.Failed"

static const char *const engine_names[OPS_ENGINE_COUNT] = { "cube", "vector", "aicpu", "dma" };

/* What observers were last told about a device, so that only changes are emitted. */
struct bus_device_seen {
        int health;
        int draining;
        uint64_t mem_used;
};

struct bus {
        struct npud *npud;
        sd_bus *bus;
        struct event *io_read, *io_write, *timer;
        struct event *mem_timer; /* MemoryUsed changes, at most once a second */
        struct bus_device_seen *seen;
        int write_armed;
};

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
                log_warn("D-Bus: connection lost (%s); continuing without the bus API",
                         strerror(-r));
                bus_teardown(b);
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
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
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
        case PROTO_E_INVALID: name = SD_BUS_ERROR_INVALID_ARGS; break;
        case PROTO_E_PERMISSION: name = SD_BUS_ERROR_ACCESS_DENIED; break;
        case PROTO_E_UNSUPPORTED: name = SD_BUS_ERROR_NOT_SUPPORTED; break;
        case PROTO_E_LIMIT: name = SD_BUS_ERROR_LIMITS_EXCEEDED; break;
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
        if (dev > INT_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "no device %u", dev);
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
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
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
        if (strcmp(prop, "Temperature") == 0)
                return sd_bus_message_append(reply, "d", h->temperature_c);
        if (strcmp(prop, "Power") == 0)
                return sd_bus_message_append(reply, "d", h->power_w);
        if (strcmp(prop, "PowerLimit") == 0)
                return sd_bus_message_append(reply, "d", dev->desc.power_limit_w);
        if (strcmp(prop, "ClockMHz") == 0)
                return sd_bus_message_append(reply, "d", h->clock_mhz);
        if (strcmp(prop, "EccErrors") == 0)
                return sd_bus_message_append(reply, "(tt)", h->ecc_corrected, h->ecc_uncorrected);
        return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
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

        emit_result("SessionOpened",
                    sd_bus_emit_signal(b->bus, BUS_PATH, BUS_IFACE, "SessionOpened", "tuu",
                                       s->id, (uint32_t)s->pid, (uint32_t)s->uid));
        emit_result("SessionCount", sd_bus_emit_properties_changed(b->bus, BUS_PATH, BUS_IFACE,
                                                                   "SessionCount", NULL));
        bus_rearm(b);
}

static void hook_session_closed(struct npud *d, struct session *s)
{
        struct bus *b = d->hooks.userdata;

        emit_result("SessionClosed", sd_bus_emit_signal(b->bus, BUS_PATH, BUS_IFACE,
                                                        "SessionClosed", "t", s->id));
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

/* Drop the connection (error or shutdown); npud carries on without the API. */
static void bus_teardown(struct bus *b)
{
        struct npud *d = b->npud;

        if (d->hooks.userdata == b) {
                d->hooks.session_opened = NULL;
                d->hooks.session_closed = NULL;
                d->hooks.device_changed = NULL;
        }
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

int bus_start(struct npud *d)
{
        struct bus *b;
        char path[64];
        int r, fd;

        if (!d->config.dbus)
                return 0;
        b = calloc(1, sizeof(*b));
        if (!b || !(b->seen = calloc((size_t)d->ex.devices.count + 1, sizeof(*b->seen)))) {
                free(b);
                log_warn("D-Bus: out of memory; continuing without the bus API");
                return 0;
        }
        b->npud = d;
        for (int i = 0; i < d->ex.devices.count; i++) {
                b->seen[i].health = (int)d->ex.devices.devices[i].health;
                b->seen[i].draining = d->ex.devices.devices[i].draining != 0;
                b->seen[i].mem_used = d->ex.devices.devices[i].mem_used;
        }
        r = sd_bus_open_system(&b->bus);
        if (r < 0) {
                log_warn("D-Bus: cannot connect to the system bus: %s; continuing without it",
                         strerror(-r));
                goto fail;
        }
        r = sd_bus_add_object_vtable(b->bus, NULL, BUS_PATH, BUS_IFACE, manager_vtable, b);
        for (int i = 0; r >= 0 && i < d->ex.devices.count; i++) {
                device_path(i, path, sizeof(path));
                r = sd_bus_add_object_vtable(b->bus, NULL, path, DEVICE_IFACE, device_vtable,
                                             &d->ex.devices.devices[i]);
        }
        if (r < 0) {
                log_warn("D-Bus: cannot register the objects: %s; continuing without the bus",
                         strerror(-r));
                goto fail;
        }
        /* Synchronous, once at startup: afterwards everything goes through the loop. */
        r = sd_bus_request_name(b->bus, BUS_NAME, 0);
        if (r < 0) {
                log_warn("D-Bus: cannot own %s: %s; continuing without the bus API", BUS_NAME,
                         strerror(-r));
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
                log_warn("D-Bus: cannot watch the connection; continuing without the bus API");
                goto fail;
        }
        d->hooks.userdata = b;
        d->hooks.session_opened = hook_session_opened;
        d->hooks.session_closed = hook_session_closed;
        d->hooks.device_changed = hook_device_changed;
        bus_rearm(b);
        log_info("D-Bus: %s on the system bus", BUS_NAME);
        return 1;
fail:
        bus_teardown(b);
        free(b->seen);
        free(b);
        return 0;
}

void bus_stop(struct npud *d)
{
        struct bus *b = d->hooks.userdata;

        /* The hooks may have been dropped with a lost connection; the bus object stays ours. */
        if (!b)
                return;
        bus_teardown(b);
        d->hooks.userdata = NULL;
        free(b->seen);
        free(b);
}

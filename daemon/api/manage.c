/* Management operations (see manage.h): draining, reset, fault injection and killing
 * sessions. They run on the loop thread, like everything that touches daemon state.
 *
 * A reset is asynchronous: it drains the device, cancels the queued work of every stream
 * there with a device error, and cancels the running units (kernels poll their cancel flag
 * every few milliseconds); sched_unit_complete calls manage_device_poll, and the first time
 * no core of the device is busy the reset finishes
 * (faults cleared, health ok, draining off). Every change of health or draining is told to the
 * observers (hooks.device_changed: D-Bus) and to every client as a "device-health"
 * notification. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/errors.h"
#include "proto/frame.h"
#include "proto/message.h"
#include "util/log.h"
#include "manage.h"
#include "npud.h"
#include "daemon/exec/sched.h"
#include "session.h"

static const char *const fault_names[] = {
        [FAULT_FAIL_NEXT] = "fail-next",
        [FAULT_FAIL_DEVICE] = "fail-device",
        [FAULT_SLOW] = "slow",
        [FAULT_ECC_CORRECTED] = "ecc-corrected",
        [FAULT_ECC_UNCORRECTED] = "ecc-uncorrected",
};

int manage_fault_parse(const char *name)
{
        for (int k = FAULT_FAIL_NEXT; k <= FAULT_ECC_UNCORRECTED; k++)
                if (name && strcmp(name, fault_names[k]) == 0)
                        return k;
        return -1;
}

const char *manage_fault_name(int kind)
{
        return kind >= FAULT_FAIL_NEXT && kind <= FAULT_ECC_UNCORRECTED ? fault_names[kind] : "unknown";
}

/* Device events carry NPUD_DEVICE in the journal. */
#define dev_log(level, dev, ...) log_session_msg(level, 0, 0, NULL, (dev)->id, __VA_ARGS__)

/* An admin action, for the audit trail: the message names who asked (as the journal fields
 * NPUD_UID, NPUD_PID, NPUD_VIA do), and MESSAGE_ID the kind of action. */
void manage_audit(struct npud *d, int level, const char *mid, int device, const char *fmt, ...)
{
        const struct npud_actor *a = &d->actor;
        char what[512], who[96];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        if (!a->via)
                snprintf(who, sizeof(who), "npud");
        else if (a->uid == (uid_t)-1)
                snprintf(who, sizeof(who), "%s", a->via);
        else
                snprintf(who, sizeof(who), "uid %u pid %d via %s", (unsigned)a->uid, (int)a->pid,
                         a->via);
        log_event((enum log_level)level, mid, device, a->uid, a->pid, a->via, "%s (by %s)", what, who);
}

const char *manage_actor_text(struct npud *d, char *buf, size_t len)
{
        const struct npud_actor *a = &d->actor;

        if (a->via && a->uid != (uid_t)-1)
                snprintf(buf, len, "uid %u via %s", (unsigned)a->uid, a->via);
        else
                snprintf(buf, len, "%s", a->via ? a->via : "npud");
        return buf;
}

static struct device *find_device(struct npud *d, int device, char *err, size_t errlen)
{
        struct device *dev = device_get(&d->ex.devices, device);

        if (!dev)
                snprintf(err, errlen, "no device %d", device);
        return dev;
}

/* Health or draining changed: tell the observers and every client that said hello. */
static void device_announce(struct npud *d, struct device *dev)
{
        struct session *s, *next;

        if (d->hooks.device_changed)
                d->hooks.device_changed(d, dev);
        /* A failed write closes that session (and unlinks only it), so keep the next one. */
        for (s = TAILQ_FIRST(&d->sessions); s; s = next) {
                next = TAILQ_NEXT(s, link);
                if (!s->version)
                        continue;
                session_send_json(s, PROTO_KIND_NOTIFY, 0,
                                  proto_notify_new("device-health",
                                                   json_pack("{s:i, s:s, s:b}", "device", dev->id,
                                                             "health", device_health_name(dev->health),
                                                             "draining", dev->draining != 0)));
        }
}

int manage_device_drain(struct npud *d, int device, int drain, char *err, size_t errlen)
{
        struct device *dev = find_device(d, device, err, errlen);

        if (!dev)
                return PROTO_E_INVALID;
        if (!drain && dev->resetting) {
                snprintf(err, errlen, "device %d is being reset; it is undrained when the reset ends",
                         device);
                return PROTO_E_BUSY;
        }
        if (!dev->draining == !drain)
                return 0;
        dev->draining = drain != 0;
        manage_audit(d, LOG_LVL_INFO, LOG_MID_DEVICE_DRAIN, device, "device %d %s", device,
              drain ? "draining: no new streams" : "undrained");
        device_announce(d, dev);
        return 0;
}

/* The reset is over once nothing of the device is running any more. */
void manage_device_poll(struct npud *d, struct device *dev)
{
        if (!dev->resetting)
                return;
        for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                if (dev->pd.free[e] != dev->desc.cores[e])
                        return;
        if (d->ex.backend->faults)
                d->ex.backend->faults->clear(d->ex.backend, dev->id);
        dev->resetting = 0;
        dev->draining = 0;
        dev->health = DEVICE_OK;
        dev_log(LOG_LVL_INFO, dev, "device %d reset: health ok", dev->id);
        device_announce(d, dev);
}

int manage_device_reset(struct npud *d, int device, char *err, size_t errlen)
{
        struct device *dev = find_device(d, device, err, errlen);
        struct stream **list = NULL;
        struct session *s;
        struct stream *st;
        size_t n = 0, cap = 0;
        char msg[64];

        if (!dev)
                return PROTO_E_INVALID;
        if (dev->resetting)
                return 0; /* already on its way */
        /* Collect (and hold) the streams first: failing them sends replies and notifications,
         * and a failed write closes a session, which would unlink streams under our feet. */
        TAILQ_FOREACH(s, &d->sessions, link)
                TAILQ_FOREACH(st, &s->streams, session_link) {
                        if (st->dev != dev || st->ntasks == 0)
                                continue;
                        if (n == cap) {
                                size_t ncap = cap ? cap * 2 : 16;
                                struct stream **nl = realloc(list, ncap * sizeof(*nl));
                                if (!nl) {
                                        for (size_t i = 0; i < n; i++)
                                                stream_unref(list[i]);
                                        free(list);
                                        snprintf(err, errlen, "out of memory");
                                        return PROTO_E_LIMIT;
                                }
                                list = nl;
                                cap = ncap;
                        }
                        list[n++] = stream_ref(st);
                }
        dev->resetting = 1;
        dev->draining = 1;
        dev->resets++;
        manage_audit(d, LOG_LVL_WARN, LOG_MID_DEVICE_RESET, device,
              "device %d: reset: cancelling the queued work of %zu stream(s)", device, n);
        device_announce(d, dev);
        snprintf(msg, sizeof(msg), "device %d was reset", device);
        for (size_t i = 0; i < n; i++) {
                st = list[i];
                if (st->session && !st->session->closing && st->ntasks) {
                        session_task_failed(st->session, st, TAILQ_FIRST(&st->tasks)->seq,
                                            PROTO_E_DEVICE, msg);
                        if (st->session && !st->session->closing)
                                sched_stream_cancel(&d->ex, st);
                }
                stream_unref(st);
        }
        free(list);
        /* running work too, whoever it belongs to (a dead client's included): a reset must
         * end in bounded time */
        sched_cancel_running(&d->ex, dev);
        sched_kick(&d->ex);
        manage_device_poll(d, dev);
        return 0;
}

int manage_session_kill(struct npud *d, uint64_t session_id, char *err, size_t errlen)
{
        struct session *s;

        TAILQ_FOREACH(s, &d->sessions, link)
                if (s->id == session_id)
                        break;
        if (!s || s->closing) {
                snprintf(err, errlen, "no session %llu", (unsigned long long)session_id);
                return PROTO_E_INVALID;
        }
        char who[64], reason[128];
        manage_actor_text(d, who, sizeof(who));
        snprintf(reason, sizeof(reason), "killed by administrator (%s)", who);
        manage_audit(d, LOG_LVL_WARN, LOG_MID_SESSION_KILL, -1,
              "session %llu (pid %d uid %d, %s) killed", (unsigned long long)s->id, (int)s->pid,
              (int)s->uid, s->comm);
        /* Tell the client why before the connection goes: libnpu keeps the reason for the
         * error of the call that finds the connection closed. The notice is written out now,
         * as far as the socket takes it; what is still buffered at the close is lost. */
        if (s->version) {
                session_send_json(s, PROTO_KIND_NOTIFY, 0,
                                  proto_notify_new("session-killed",
                                                   json_pack("{s:s}", "reason", reason)));
                if (!s->closing)
                        proto_writer_flush(&s->writer, s->fd);
        }
        if (!s->closing)
                session_close(s, reason);
        return 0;
}

int manage_fault_inject(struct npud *d, int device, int kind, double value, char *err,
                        size_t errlen)
{
        struct device *dev = find_device(d, device, err, errlen);
        int e;

        if (!dev)
                return PROTO_E_INVALID;
        if (!d->ex.backend->faults) {
                snprintf(err, errlen, "the %s backend has no fault injection",
                         d->ex.backend->ops->name);
                return PROTO_E_UNSUPPORTED;
        }
        switch (kind) {
        case FAULT_FAIL_NEXT:
                if (!(value >= 1 && value <= INT32_MAX) || value != floor(value)) {
                        snprintf(err, errlen, "fail-next: the value must be a whole number of "
                                              "tasks from 1 to %d", INT32_MAX);
                        return PROTO_E_INVALID;
                }
                break;
        case FAULT_FAIL_DEVICE:
                break;
        case FAULT_SLOW:
                if (!(value > 0 && value <= 1e6)) {
                        snprintf(err, errlen, "slow: the value must be a factor above 0, "
                                              "at most 1000000");
                        return PROTO_E_INVALID;
                }
                break;
        case FAULT_ECC_CORRECTED:
        case FAULT_ECC_UNCORRECTED:
                if (!(value >= 1 && value <= 1e9) || value != floor(value)) {
                        snprintf(err, errlen, "%s: the value must be a whole number of errors "
                                              "from 1 to 1000000000", manage_fault_name(kind));
                        return PROTO_E_INVALID;
                }
                break;
        default:
                snprintf(err, errlen, "unknown fault kind (fail-next, fail-device, slow, "
                                      "ecc-corrected or ecc-uncorrected)");
                return PROTO_E_INVALID;
        }
        e = d->ex.backend->faults->inject(d->ex.backend, device, kind, value);
        if (e < 0) {
                snprintf(err, errlen, "fault injection failed: %s", strerror(-e));
                return PROTO_E_INVALID;
        }
        if (kind >= FAULT_FAIL_NEXT && kind <= FAULT_ECC_UNCORRECTED)
                dev->faults[kind]++;
        manage_audit(d, LOG_LVL_WARN, LOG_MID_FAULT_INJECT, device, "device %d: injected fault %s (%g)",
              device, manage_fault_name(kind), value);
        /* ECC counters show at once, not at the next utilization period */
        struct backend_health h = { .slow = 1.0 };
        if (d->ex.backend->ops->health(d->ex.backend, device, &h) == 0)
                dev->telemetry = h;
        if (kind == FAULT_FAIL_DEVICE && dev->health != DEVICE_FAILED) {
                dev->health = DEVICE_FAILED;
                log_event(LOG_LVL_ERROR, LOG_MID_DEVICE_FAILED, device, 0, 0, NULL,
                          "device %d failed: health 'failed', its work fails until a reset",
                          device);
                device_announce(d, dev);
        }
        return 0;
}

int manage_fault_clear(struct npud *d, int device, char *err, size_t errlen)
{
        struct device *dev = find_device(d, device, err, errlen);

        if (!dev)
                return PROTO_E_INVALID;
        if (d->ex.backend->faults)
                d->ex.backend->faults->clear(d->ex.backend, device);
        manage_audit(d, LOG_LVL_INFO, LOG_MID_FAULT_CLEAR, device, "device %d: faults cleared", device);
        if (dev->health != DEVICE_OK) {
                dev->health = DEVICE_OK;
                device_announce(d, dev);
        }
        return 0;
}

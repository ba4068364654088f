/* Service-manager notifications (see notify.h). One daemon per process, so the few pieces of
 * state (timers, last STATUS= time) are file-static rather than members of struct npud. */
#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "util/log.h"
#include "notify.h"
#include "npud.h"

#define STATUS_INTERVAL_NS 1000000000ull /* STATUS= at most once a second */

static int enabled;                  /* $NOTIFY_SOCKET was set when notify_init ran */
static struct event *watchdog_timer; /* WATCHDOG=1 at half the manager's interval */
static struct event *status_timer;   /* a deferred STATUS= update */
static uint64_t last_status_ns;

static uint64_t monotonic_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void format_status(struct npud *d, char *buf, size_t len)
{
        int failed = 0;

        for (int i = 0; i < d->ex.devices.count; i++)
                failed += d->ex.devices.devices[i].health != DEVICE_OK;
        snprintf(buf, len, "%d device%s (%d failed), %u session%s", d->ex.devices.count,
                 d->ex.devices.count == 1 ? "" : "s", failed, d->nsessions,
                 d->nsessions == 1 ? "" : "s");
}

/* Send prefix (may be empty) followed by STATUS=. */
static void send_with_status(struct npud *d, const char *prefix)
{
        char status[128];
        int r;

        format_status(d, status, sizeof(status));
        r = sd_notifyf(0, "%sSTATUS=%s", prefix, status);
        if (r < 0)
                log_debug("sd_notify: %s", strerror(-r));
        last_status_ns = monotonic_ns();
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
        sd_notify(0, "WATCHDOG=1");
}

static void on_status_timer(evutil_socket_t fd, short what, void *arg)
{
        send_with_status(arg, "");
}

int notify_init(struct npud *d)
{
        uint64_t usec = 0;
        int r;

        const char *sock = getenv("NOTIFY_SOCKET");
        enabled = sock && *sock;
        if (!enabled)
                return 0;
        status_timer = event_new(d->base, -1, 0, on_status_timer, d);
        if (!status_timer)
                return -ENOMEM;
        /* Unset WATCHDOG_USEC/WATCHDOG_PID: nothing npud starts should think it is watched. */
        r = sd_watchdog_enabled(1, &usec);
        if (r < 0)
                log_warn("ignoring the watchdog settings: %s", strerror(-r));
        if (r <= 0 || usec == 0)
                return 0;
        /* Ping at half the interval, from the loop itself: a stuck loop stops the pings. */
        struct timeval half = { .tv_sec = (time_t)(usec / 2 / 1000000),
                                .tv_usec = (suseconds_t)(usec / 2 % 1000000) };
        watchdog_timer = event_new(d->base, -1, EV_PERSIST, on_watchdog, NULL);
        if (!watchdog_timer || event_add(watchdog_timer, &half) < 0)
                return -ENOMEM;
        log_debug("watchdog enabled: pinging every %llu us", (unsigned long long)(usec / 2));
        return 0;
}

void notify_ready(struct npud *d)
{
        if (enabled)
                send_with_status(d, "READY=1\n");
}

void notify_reloading(void)
{
        if (!enabled)
                return;
        uint64_t usec = monotonic_ns() / 1000;
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)usec);
}

void notify_sessions_changed(struct npud *d)
{
        uint64_t now, since;

        if (!enabled || !status_timer || evtimer_pending(status_timer, NULL))
                return;
        now = monotonic_ns();
        since = now - last_status_ns;
        if (since >= STATUS_INTERVAL_NS) {
                send_with_status(d, "");
                return;
        }
        /* Changed again within the second: one update when the second is over. */
        uint64_t wait = STATUS_INTERVAL_NS - since;
        struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000ull),
                              .tv_usec = (suseconds_t)(wait % 1000000000ull / 1000) };
        evtimer_add(status_timer, &tv);
}

void notify_stopping(struct npud *d)
{
        if (!enabled)
                return;
        if (status_timer)
                evtimer_del(status_timer);
        send_with_status(d, "STOPPING=1\n");
}

void notify_fini(void)
{
        if (watchdog_timer)
                event_free(watchdog_timer);
        if (status_timer)
                event_free(status_timer);
        watchdog_timer = NULL;
        status_timer = NULL;
        enabled = 0;
}

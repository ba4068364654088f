/* Service-manager notifications (sd_notify): READY=1 once devices are up and the socket
 * listens, STATUS= with device and session counts, WATCHDOG=1 from the event loop,
 * RELOADING=1/READY=1 around a reload and STOPPING=1 on shutdown. Every function is a no-op
 * when npud was not started by a service manager ($NOTIFY_SOCKET unset), so unit tests and
 * foreground runs need nothing. Loop thread only. */
#ifndef NPUD_NOTIFY_H
#define NPUD_NOTIFY_H

struct npud;

/* Start the watchdog timer on d->base when the manager asked for one (WATCHDOG_USEC for this
 * pid). 0, or -errno when the timer cannot be set up. */
int notify_init(struct npud *d);
/* READY=1 with the current STATUS=; also ends a reload started by notify_reloading(). */
void notify_ready(struct npud *d);
/* RELOADING=1 with MONOTONIC_USEC= (what systemd checks the reload against). */
void notify_reloading(void);
/* Sessions opened or closed: refresh STATUS=, at most once a second. */
void notify_sessions_changed(struct npud *d);
/* STOPPING=1 and a final STATUS=. The watchdog keeps running while work drains. */
void notify_stopping(struct npud *d);
/* Free the timers (before the event base goes). */
void notify_fini(void);

#endif

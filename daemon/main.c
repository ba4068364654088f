/* npud: parse the configuration, bring up the backend's devices, listen, and run the loop
 * until SIGINT/SIGTERM (SIGHUP reloads the configuration); then close every session, drain
 * running work and release it all. The service manager hears of each step (notify.h). */
#include <errno.h>
#include <event2/event.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/timerfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/api/bus.h"
#include "daemon/api/graph-load.h"
#include "util/cpus.h"
#include "util/log.h"
#include "util/prio.h"
#include "daemon/api/manage.h"
#include "daemon/api/metrics.h"
#include "daemon/api/notify.h"
#include "daemon/api/npud.h"
#include "ops/ops.h"
#include "ops/tune.h"
#include "daemon/exec/cpulat.h"
#include "daemon/exec/loopcpu.h"
#include "daemon/exec/lcpoll.h"
#include "daemon/exec/sched.h"
#include "daemon/exec/reclaim.h"
#include "daemon/api/server.h"
#include "daemon/api/session.h"

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        struct npud *d = arg;
        log_info("signal %d: shutting down", (int)sig);
        event_base_loopbreak(d->base);
}

/* SIGHUP: re-read the configuration, telling the service manager while it happens. */
static void on_sighup(evutil_socket_t sig, short what, void *arg)
{
        struct npud *d = arg;
        char err[512] = "";

        log_info("SIGHUP: reloading the configuration");
        d->actor = (struct npud_actor){ (uid_t)-1, 0, "signal" }; /* libevent hides the sender */
        notify_reloading();
        manage_reload(d, err, sizeof(err)); /* logs its own outcome */
        notify_ready(d);
}

static void on_sched(evutil_socket_t fd, short what, void *arg)
{
        sched_run(arg); /* the execution layer */
}

static void on_util_timer(evutil_socket_t fd, short what, void *arg)
{
        struct npud *d = arg;
        uint64_t now = now_ns();
        for (int i = 0; i < d->ex.devices.count; i++)
                device_update_util(&d->ex.devices.devices[i], now);
        failure_summary_flush(d);
        cpulat_tick(now);
        loopcpu_tick(now);
}

/* The event loop. After the last unit at the backend came back it polls for LOOP_POLL_NS
 * (non-blocking passes of the event loop, back to back) instead of waiting in epoll: the
 * client that got the result usually sends its next request within tens of microseconds, and
 * a request that finds the loop thread not waiting in epoll wakes nobody. A wake-up from
 * another CPU costs an interrupt to the loop thread's CPU (a SCHED_FIFO thread must preempt
 * at once), which on a virtual machine costs the client 33 us and delays the loop thread by
 * 60 us (measured here).
 *
 * The poll keeps its CPU: a client that waits on the loop thread's own CPU, woken there by
 * its reply, would get that CPU only when the poll ends: 200 us more per request (a one-Relu
 * run took 0.25 ms instead of 0.08 in bench_models whenever the client sat on the loop
 * thread's CPU). Such a client's next request wakes the loop thread from the same CPU, no
 * interrupt across CPUs, so then the loop thread waits in epoll at once (session_woke_here).
 * Until 2026-12-04 each pass was followed by a 1 us nanosleep, meant to leave the CPU between
 * looks; it never did (arming the timer takes longer than the timer: 14.5 us of CPU a nap on
 * the Zen 5 host, no context switch), and a request waited for the nap to end: the one-Relu
 * run took 0.037 ms with the naps, 0.019-0.020 without (docs/benchmarks.md). */
#define LOOP_POLL_NS 200000

/* The loop thread stays off CPUs where best-effort work runs, while there are others
 * (loopcpu_avoid); looked at once a millisecond at most. */
static void loop_avoid(struct npud *d)
{
        static uint64_t last;
        struct backend *b = d->ex.backend;
        uint64_t now = now_ns();
        cpu_set_t busy;

        if (!b || !b->ops->busy_cpus || now - last < 1000000)
                return;
        last = now;
        if (b->ops->busy_cpus(b, &busy, now))
                loopcpu_avoid(&busy, now);
}

/* Poll while a latency-critical client's next request is due or its burst goes on
 * (lcpoll.h); then arm the timer that opens the next window. Its own timerfd: the loop's
 * timers are milliseconds in compute mode (EVENT_BASE_FLAG_PRECISE_TIMER only in model
 * mode), and a window is tens of microseconds. -1 when the loop ends. */
static struct event *lcpoll_timer;
static int lcpoll_tfd = -1;
static uint64_t lcpoll_armed;

static void lcpoll_timer_cb(evutil_socket_t fd, short what, void *arg)
{
        uint64_t n;
        ssize_t r = read(fd, &n, sizeof(n)); /* EAGAIN: re-armed meanwhile */

        (void)r;
        lcpoll_armed = 0; /* the next loop_lc_poll polls */
}

static void lcpoll_timer_open(struct npud *d)
{
        lcpoll_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (lcpoll_tfd < 0) {
                log_msg(LOG_LVL_INFO, "latency-critical polling off: timerfd_create: %m");
                return;
        }
        lcpoll_timer = event_new(d->base, lcpoll_tfd, EV_READ | EV_PERSIST, lcpoll_timer_cb, NULL);
        if (!lcpoll_timer || event_add(lcpoll_timer, NULL) < 0) {
                log_msg(LOG_LVL_INFO, "latency-critical polling off: cannot watch its timer");
                if (lcpoll_timer)
                        event_free(lcpoll_timer);
                lcpoll_timer = NULL;
                close(lcpoll_tfd);
                lcpoll_tfd = -1;
        }
}

static void lcpoll_timer_close(void)
{
        if (lcpoll_timer)
                event_free(lcpoll_timer);
        lcpoll_timer = NULL;
        if (lcpoll_tfd >= 0)
                close(lcpoll_tfd);
        lcpoll_tfd = -1;
}

static int loop_lc_poll(struct npud *d)
{
        uint64_t now = now_ns(), t0 = now;
        int here = sched_getcpu(), ended = 0;
        uint64_t until = lcpoll_until(now, here);

        if (until) {
                uint64_t held = now;
                lcpoll_polling(1, 0);
                sched_hold_background(&d->ex, 1);
                while (now < until && !ended) {
                        event_base_loop(d->base, EVLOOP_NONBLOCK);
                        ended = event_base_got_break(d->base) || event_base_got_exit(d->base);
                        now = now_ns();
                        until = lcpoll_until(now, here);
                        /* a client that never pauses keeps the polling going: what came back
                         * waits LCPOLL_MAX_HOLD_NS at most */
                        if (now - held >= LCPOLL_MAX_HOLD_NS) {
                                sched_hold_background(&d->ex, 0);
                                sched_hold_background(&d->ex, 1);
                                held = now;
                        }
                }
                lcpoll_polling(0, now - t0);
        }
        sched_hold_background(&d->ex, 0); /* also what came back while a window was open */
        if (ended)
                return -1;
        uint64_t next = lcpoll_next(now);
        if (next && next != lcpoll_armed && lcpoll_timer) {
                struct itimerspec its = { .it_value = { .tv_sec = (time_t)(next / 1000000000ull),
                                                        .tv_nsec = (long)(next % 1000000000ull) } };
                if (timerfd_settime(lcpoll_tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
                        lcpoll_armed = next;
        }
        return 0;
}

static void loop_run(struct npud *d)
{
        int busy = 0;

        lcpoll_timer_open(d);
        for (;;) {
                loop_avoid(d);
                if (loop_lc_poll(d) < 0)
                        return;
                if (busy && !sched_units_in_flight() && !session_woke_here()) { /* the last unit came back */
                        uint64_t t0 = now_ns();
                        do {
                                event_base_loop(d->base, EVLOOP_NONBLOCK);
                                if (event_base_got_break(d->base) || event_base_got_exit(d->base))
                                        return;
                                if (sched_units_in_flight() || session_woke_here())
                                        break;
                        } while (now_ns() - t0 < LOOP_POLL_NS);
                }
                busy = sched_units_in_flight();
                session_woke_here(); /* what the next iteration's events do decides */
                if (event_base_loop(d->base, EVLOOP_ONCE) != 0 || event_base_got_break(d->base) ||
                    event_base_got_exit(d->base))
                        return;
        }
}

/* Simulated device memory is host memory reserved without backing: say so at start-up when
 * the devices declare more than the host's RAM and swap can hold, rather than let the OOM
 * killer say it later. */
static void warn_device_memory(struct npud *d)
{
        struct sysinfo si;
        uint64_t declared = 0;

        for (int i = 0; i < d->ex.devices.count; i++)
                declared += d->ex.devices.devices[i].desc.mem_size;
        if (sysinfo(&si) < 0)
                return;
        uint64_t host = ((uint64_t)si.totalram + (uint64_t)si.totalswap) * si.mem_unit;
        if (declared > host)
                log_warn("the %d simulated device(s) declare %.1f GiB of device memory but this "
                         "host can back only %.1f GiB (RAM and swap): allocations succeed, but "
                         "filling them all would exhaust the host",
                         d->ex.devices.count, (double)declared / (1 << 30), (double)host / (1 << 30));
}

/* The kernel tuning cache (ops/tune.h): its directory is made when missing (the state
 * directory systemd gives, or the per-user one); a cache that cannot be read starts empty and
 * is rewritten at the next measurement, so it never stops npud. */
static void tuning_open(const char *path)
{
        char err[512], dir[4096];
        int skipped = 0;

        if (*path) {
                snprintf(dir, sizeof(dir), "%s", path);
                for (char *p = dir + 1; *p; p++) {
                        if (*p != '/')
                                continue;
                        *p = 0;
                        if (!strchr(p + 1, '/')) {
                                /* the cache's own directory: private to npud (or the user) */
                                if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                                        log_warn("tuning cache: cannot create %s: %s", dir, strerror(errno));
                        } else if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                                *p = '/';
                                break;
                        }
                        *p = '/';
                }
        }
        if (tune_open(path, &skipped, err, sizeof(err)) < 0)
                log_warn("tuning cache: %s; starting empty", err);
        else if (*path)
                log_info("tuning cache %s: %d entries (this host: %s)%s", path, tune_count(),
                         tune_profile(), skipped ? ", malformed lines skipped" : "");
}

int main(int argc, char **argv)
{
        struct npud d;
        struct event *sig_hup;
        char err[512] = "";
        int r;

        memset(&d, 0, sizeof(d));
        d.listen_fd = -1;
        TAILQ_INIT(&d.sessions);
        TAILQ_INIT(&d.ex.settle);
        TAILQ_INIT(&d.exports);
        config_defaults(&d.config);
        d.argc = argc;
        d.argv = argv;
        r = config_parse_args(&d.config, argc, argv, err, sizeof(err));
        if (r == 1)
                return 0;
        if (r < 0) {
                fprintf(stderr, "npud: %s\n", err);
                return 2;
        }
        log_set_level((enum log_level)d.config.log_level);
        signal(SIGPIPE, SIG_IGN);
        /* Every kernel runs on the one worker thread the scheduler dispatched it to: a GEMM
         * that spread over OpenBLAS's own thread pool would take host cores the policy gave
         * other work (another tenant's, another device's). Large operators get their
         * parallelism from tiles the scheduler spreads over granted workers instead. */
        ops_set_threads(1);
        tuning_open(d.config.tuning_cache);

        /* Precise timers where they matter: model-mode devices complete work on
         * sub-millisecond timers. In compute mode timers are coarse (timeouts, the slow
         * fault) and a precise timer costs a timerfd_settime on every loop pass. */
        struct event_config *ecfg = event_config_new();
        if (ecfg && d.config.sim_mode == SIM_MODE_MODEL)
                event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER);
        d.base = ecfg ? event_base_new_with_config(ecfg) : NULL;
        if (ecfg)
                event_config_free(ecfg);
        if (!d.base) {
                log_error("cannot create the event loop");
                return 1;
        }
        d.started_ns = now_ns();
        d.ex.base = d.base;
        d.ex.sched_event = event_new(d.base, -1, 0, on_sched, &d.ex);
        session_observe(&d);
        d.sig_int = evsignal_new(d.base, SIGINT, on_signal, &d);
        d.sig_term = evsignal_new(d.base, SIGTERM, on_signal, &d);
        d.util_timer = event_new(d.base, -1, EV_PERSIST, on_util_timer, &d);
        sig_hup = evsignal_new(d.base, SIGHUP, on_sighup, &d);
        struct timeval second = { 1, 0 };
        if (!d.ex.sched_event || !d.sig_int || !d.sig_term || !d.util_timer ||
            event_add(d.sig_int, NULL) < 0 || event_add(d.sig_term, NULL) < 0 ||
            event_add(d.util_timer, &second) < 0 || !sig_hup || event_add(sig_hup, NULL) < 0 ||
            notify_init(&d) < 0) {
                log_error("cannot set up loop events");
                return 1;
        }
        r = sim_backend_new(d.base, d.config.sim_devices, d.config.sim_profile, d.config.sim_mode,
                            d.config.workers, d.config.sim_share_workers, sched_unit_complete, &d.ex,
                            &d.ex.backend, err, sizeof(err));
        if (r == 0)
                r = device_registry_init(&d.ex.devices, d.ex.backend, d.config.policy.min_share, err,
                                         sizeof(err));
        if (r == 0 && reclaim_start(d.base) < 0) /* else frees clear on the loop thread */
                log_warn("cannot start the reclaimer thread: large frees run on the loop thread");
        if (r == 0 && tenant_registry_init(&d.tenants, &d.config.policy, d.ex.devices.count) < 0) {
                snprintf(err, sizeof(err), "out of memory");
                r = -1;
        }
        d.ex.tile_ns = d.config.policy.tile_ns;
        d.ex.calibrate = d.config.sim_mode == SIM_MODE_COMPUTE;
        if (d.config.sim_mode == SIM_MODE_COMPUTE) {
                int workers = d.config.workers > 0 ? d.config.workers : cpus_usable();
                d.ex.graph_worker_cap = workers > 1 ? workers - 1 : 1;
                /* Each device owns a share of the host workers (the remainder to the first
                 * devices): the backend runs its units on those workers only, unless
                 * sim.share_workers (sim_backend_new). Slots: at least two, so that the
                 * policy may have a second unit out behind one long task (a graph run, a
                 * slowed unit), which then waits in the backend's FIFO of its device. */
                int ndev = d.ex.devices.count;
                for (int i = 0; i < ndev; i++) {
                        int slots = workers / ndev + (i < workers % ndev);
                        pd_set_host_slots(&d.ex.devices.devices[i].pd, slots > 2 ? slots : 2);
                }
        }
        if (r == 0)
                r = server_listen(&d, err, sizeof(err));
        if (r == 0)
                r = metrics_start(&d, err, sizeof(err));
        if (r < 0) {
                log_error("%s", err);
                r = 1;
                goto out;
        }
        warn_device_memory(&d);
        bus_start(&d); /* optional: a bus that cannot be used is only a warning */
        log_info("npud ready on %s: %d simulated %s device(s), %s mode", d.config.socket_path,
                 d.ex.devices.count, d.config.sim_profile,
                 d.config.sim_mode == SIM_MODE_MODEL ? "model" : "compute");
        notify_ready(&d);
        if (!d.config.no_realtime_loop) { /* after the workers started: they must not inherit it */
                static const char *const got[] = { "unchanged (no privilege to raise it)", "nice -10",
                                                   "SCHED_FIFO 1" };
                log_info("loop thread priority: %s", got[prio_loop()]);
        }
        cpulat_configure(d.config.cpu_wake_latency_us);
        loopcpu_init();
        loop_run(&d);
        lcpoll_shutdown();
        sched_hold_background(&d.ex, 0);
        lcpoll_timer_close();
        cpulat_release();
        r = 0;
out:
        notify_stopping(&d);
        server_close(&d);
        metrics_stop(&d);
        bus_stop(&d); /* before the sessions go: no signals from a closing daemon */
        while (!TAILQ_EMPTY(&d.sessions))
                session_close(TAILQ_FIRST(&d.sessions), "daemon shutting down");
        graph_loads_shutdown(&d); /* loads on helper threads: their weights go before devices */
        if (d.ex.backend) /* running kernels stop within milliseconds */
                sched_cancel_running(&d.ex, NULL);
        while (d.ex.backend && sched_units_in_flight())
                event_base_loop(d.base, EVLOOP_ONCE);
        event_base_loop(d.base, EVLOOP_NONBLOCK); /* deferred session releases */
        sched_run(&d.ex);                            /* settle what cancellation touched */
        export_free_all(&d.exports);
        sched_pool_drain();
        task_pool_drain();
        reclaim_stop(); /* blocks being cleared go back to their devices */
        device_registry_deinit(&d.ex.devices); /* unmaps device memory: the backend goes after */
        if (d.ex.backend)
                d.ex.backend->ops->destroy(d.ex.backend);
        failure_summary_flush_all(&d);
        tenant_registry_deinit(&d.tenants);
        free(d.runtime_tenants);
        event_free(d.ex.sched_event);
        event_free(d.sig_int);
        event_free(d.sig_term);
        event_free(d.util_timer);
        event_free(sig_hup);
        notify_fini();
        event_base_free(d.base);
        return r;
}

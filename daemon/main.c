/* npud: parse the configuration, bring up the backend's devices, listen, and run the loop
 * until SIGINT/SIGTERM; then close every session, drain running work and release it all. */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "npud.h"
#include "ops/ops.h"
#include "sched.h"
#include "server.h"
#include "session.h"

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        struct npud *d = arg;
        log_info("signal %d: shutting down", (int)sig);
        event_base_loopbreak(d->base);
}

static void on_sched(evutil_socket_t fd, short what, void *arg)
{
        sched_run(arg);
}

static void on_util_timer(evutil_socket_t fd, short what, void *arg)
{
        struct npud *d = arg;
        uint64_t now = now_ns();
        for (int i = 0; i < d->devices.count; i++)
                device_update_util(&d->devices.devices[i], now);
}

static int units_in_flight(struct npud *d)
{
        for (int i = 0; i < d->devices.count; i++)
                for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                        if (d->devices.devices[i].free_cores[k] != d->devices.devices[i].desc.cores[k])
                                return 1;
        return 0;
}

int main(int argc, char **argv)
{
        struct npud d;
        char err[512] = "";
        int r;

        memset(&d, 0, sizeof(d));
        d.listen_fd = -1;
        TAILQ_INIT(&d.sessions);
        config_defaults(&d.config);
        r = config_parse_args(&d.config, argc, argv, err, sizeof(err));
        if (r == 1)
                return 0;
        if (r < 0) {
                fprintf(stderr, "npud: %s\n", err);
                return 2;
        }
        log_set_level((enum log_level)d.config.log_level);
        signal(SIGPIPE, SIG_IGN);
        ops_set_threads((int)sysconf(_SC_NPROCESSORS_ONLN));

        d.base = event_base_new();
        if (!d.base) {
                log_error("cannot create the event loop");
                return 1;
        }
        d.started_ns = now_ns();
        d.sched_event = event_new(d.base, -1, 0, on_sched, &d);
        d.sig_int = evsignal_new(d.base, SIGINT, on_signal, &d);
        d.sig_term = evsignal_new(d.base, SIGTERM, on_signal, &d);
        d.util_timer = event_new(d.base, -1, EV_PERSIST, on_util_timer, &d);
        struct timeval second = { 1, 0 };
        if (!d.sched_event || !d.sig_int || !d.sig_term || !d.util_timer ||
            event_add(d.sig_int, NULL) < 0 || event_add(d.sig_term, NULL) < 0 ||
            event_add(d.util_timer, &second) < 0) {
                log_error("cannot set up loop events");
                return 1;
        }
        r = sim_backend_new(d.base, d.config.sim_devices, d.config.sim_profile, d.config.sim_mode,
                            d.config.workers, sched_unit_complete, &d, &d.backend, err, sizeof(err));
        if (r == 0)
                r = device_registry_init(&d.devices, d.backend, err, sizeof(err));
        if (r == 0)
                r = server_listen(&d, err, sizeof(err));
        if (r < 0) {
                log_error("%s", err);
                r = 1;
                goto out;
        }
        log_info("npud ready on %s: %d simulated %s device(s), %s mode", d.config.socket_path,
                 d.devices.count, d.config.sim_profile,
                 d.config.sim_mode == SIM_MODE_MODEL ? "model" : "compute");
        event_base_dispatch(d.base);
        r = 0;
out:
        server_close(&d);
        while (!TAILQ_EMPTY(&d.sessions))
                session_close(TAILQ_FIRST(&d.sessions), "daemon shutting down");
        while (d.backend && units_in_flight(&d))
                event_base_loop(d.base, EVLOOP_ONCE);
        event_base_loop(d.base, EVLOOP_NONBLOCK); /* deferred session releases */
        if (d.backend)
                d.backend->ops->destroy(d.backend);
        device_registry_deinit(&d.devices);
        event_free(d.sched_event);
        event_free(d.sig_int);
        event_free(d.sig_term);
        event_free(d.util_timer);
        event_base_free(d.base);
        return r;
}

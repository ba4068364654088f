/* A rate-limited summary of failed tasks: a failure storm (a failed device, a bad model
 * submitted in a loop) must show in the log without one line per task. The first failure of
 * a tenant is logged at once; those that follow within FAILSUM_WINDOW_NS are counted and
 * logged as one line when the window ends (the daemon's one-second timer calls
 * failure_summary_flush), so a tenant gets at most one line per window. */
#include <stdint.h>

#include "util/clock.h"
#include "util/log.h"
#include "manage.h"
#include "npud.h"
#include "daemon/exec/tenant.h"

#define FAILSUM_WINDOW_NS (10ull * 1000000000ull)

static void summary_line(struct tenant *t, uint64_t now)
{
        log_event(LOG_LVL_WARN, LOG_MID_TASKS_FAILED, -1, 0, 0, NULL,
                  "tenant '%s': %llu task(s) failed in the last %llu s%s", t->pol.name,
                  (unsigned long long)t->fail_unlogged,
                  (unsigned long long)((now - t->fail_window_ns + 999999999ull) / 1000000000ull),
                  t->index < 0 ? " (tenant removed by a reload)" : "");
        t->fail_unlogged = 0;
}

void failure_summary_note(struct npud *d, struct tenant *t)
{
        uint64_t now = now_ns();

        (void)d;
        if (t->fail_window_ns && now - t->fail_window_ns < FAILSUM_WINDOW_NS) {
                t->fail_unlogged++; /* logged when the window ends */
                return;
        }
        t->fail_window_ns = now;
        log_event(LOG_LVL_WARN, LOG_MID_TASKS_FAILED, -1, 0, 0, NULL,
                  "tenant '%s': a task failed (further failures within %llu s are summed up)",
                  t->pol.name, FAILSUM_WINDOW_NS / 1000000000ull);
}

static void flush_one(struct tenant *t, uint64_t now, int force)
{
        if (t->fail_unlogged && (force || now - t->fail_window_ns >= FAILSUM_WINDOW_NS)) {
                summary_line(t, now);
                t->fail_window_ns = now; /* the next window starts with this line */
        }
}

static void flush(struct npud *d, int force)
{
        uint64_t now = now_ns();
        struct tenant_registry *r = &d->tenants;

        for (int i = 0; i < r->ntenants; i++)
                flush_one(r->tenants[i], now, force);
        for (int i = 0; i < r->nretired; i++)
                flush_one(r->retired[i], now, force);
}

void failure_summary_flush(struct npud *d)
{
        flush(d, 0);
}

/* At shutdown: what the windows still hold, so no failure goes unlogged. */
void failure_summary_flush_all(struct npud *d)
{
        flush(d, 1);
}

/* The loop thread polls where a latency-critical client's cadence says its next request
 * comes (lcpoll.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lcpoll.h"

static struct {
        LIST_HEAD(, lcpoll) all;
        int init, off;
        uint64_t windows, in_window, poll_ns;
        int polling;
        uint64_t caught;
} lp;

static void lp_init(void)
{
        if (lp.init) /* called on every request: getenv only the first time */
                return;
        const char *e = getenv("NPUD_LC_POLL");
        lp.init = 1;
        LIST_INIT(&lp.all);
        lp.off = (e && strcmp(e, "0") == 0) || sysconf(_SC_NPROCESSORS_ONLN) < 2;
}

/* At most LCPOLL_GAPS values, on every request's path: an insertion sort, not qsort's
 * merge sort through a comparison function (cold code each time beside a load) */
static void sort_u64(uint64_t *v, int n)
{
        for (int i = 1; i < n; i++) {
                uint64_t x = v[i];
                int j = i;
                for (; j > 0 && v[j - 1] > x; j--)
                        v[j] = v[j - 1];
                v[j] = x;
        }
}

/* The window of the burst after the one that started at p->last_start. */
static void predict(struct lcpoll *p)
{
        uint64_t g[LCPOLL_GAPS];
        int n = p->ngaps;

        p->until = 0;
        if (n < LCPOLL_GAPS / 2)
                return;
        memcpy(g, p->gaps, sizeof(g[0]) * (size_t)n);
        sort_u64(g, n);
        /* the middle half of the intervals: a late or early burst or two do not widen the
         * window (nor close it) */
        int lo = n / 4, hi = n - 1 - n / 4;
        uint64_t med = g[n / 2], len = g[hi] - g[lo] + LCPOLL_LEAD_NS + LCPOLL_LATE_NS;

        if (med < LCPOLL_MIN_GAP_NS || med > LCPOLL_MAX_GAP_NS || g[hi] - g[lo] > med / LCPOLL_MAX_SPREAD ||
            len > med / LCPOLL_MAX_SHARE)
                return;
        p->from = p->last_start + g[lo] - LCPOLL_LEAD_NS;
        p->until = p->from + len;
        lp.windows++;
}

void lcpoll_read(struct lcpoll *p, uint64_t now, int cpu)
{
        lp_init();
        if (lp.off)
                return;
        p->cpu = cpu;
        if (!p->last_io || now - p->last_io > LCPOLL_BURST_NS) { /* a burst starts */
                if (p->until && now >= p->from && now < p->until)
                        lp.in_window++;
                if (lp.polling)
                        lp.caught++;
                if (p->last_start) {
                        p->gaps[p->next_gap] = now - p->last_start;
                        p->next_gap = (p->next_gap + 1) % LCPOLL_GAPS;
                        if (p->ngaps < LCPOLL_GAPS)
                                p->ngaps++;
                }
                p->last_start = now;
                predict(p);
        }
        if (!p->listed) {
                LIST_INSERT_HEAD(&lp.all, p, link);
                p->listed = 1;
        }
        p->last_io = now;
}

void lcpoll_wrote(struct lcpoll *p, uint64_t now)
{
        p->last_io = now;
}

void lcpoll_shutdown(void)
{
        lp.init = 1;
        lp.off = 1;
}

void lcpoll_forget(struct lcpoll *p)
{
        if (p->listed)
                LIST_REMOVE(p, link);
        p->listed = 0;
}

uint64_t lcpoll_until(uint64_t now, int here)
{
        struct lcpoll *p;
        uint64_t u = 0;

        if (!lp.init || lp.off)
                return 0;
        LIST_FOREACH(p, &lp.all, link) {
                if (p->cpu >= 0 && p->cpu == here)
                        continue;
                if (now - p->last_io < LCPOLL_TAIL_NS && p->last_io + LCPOLL_TAIL_NS > u)
                        u = p->last_io + LCPOLL_TAIL_NS;
                if (p->until && now >= p->from && now < p->until && p->until > u)
                        u = p->until;
        }
        return u;
}

uint64_t lcpoll_next(uint64_t now)
{
        struct lcpoll *p, *nx;
        uint64_t next = 0;

        if (!lp.init || lp.off)
                return 0;
        for (p = LIST_FIRST(&lp.all); p; p = nx) {
                nx = LIST_NEXT(p, link);
                /* idle longer than any cadence: off the list the loop walks (each pass, each
                 * best-effort completion) until its next read */
                if (now > p->last_io + LCPOLL_IDLE_NS) {
                        LIST_REMOVE(p, link);
                        p->listed = 0;
                        continue;
                }
                if (p->until && p->from > now && (!next || p->from < next))
                        next = p->from;
        }
        return next;
}

void lcpoll_polling(int on, uint64_t ns)
{
        lp.polling = on;
        lp.poll_ns += ns;
}

void lcpoll_stats(struct lcpoll_stats *st)
{
        st->windows = lp.windows;
        st->in_window = lp.in_window;
        st->caught = lp.caught;
        st->poll_ns = lp.poll_ns;
}

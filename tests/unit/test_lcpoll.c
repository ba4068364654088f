/* Unit tests of the latency-critical polling windows (daemon/exec/lcpoll.c): a client's
 * cadence opens a window just before its next request, an irregular one opens none, the loop
 * thread never polls on the CPU the client waits on, each read and reply leaves a short tail,
 * and a forgotten session no longer counts. Check runs each test in a process of its own, so
 * the module's state starts fresh each time. On a host with one CPU the module never polls,
 * which the tests check instead. */
#include <check.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "daemon/exec/lcpoll.h"
#include "tests/check-run.h"

#define US 1000ull
#define MS (1000ull * US)
#define T0 (1000ull * MS) /* far from 0, which the module reads as "never" */
#define CLIENT_CPU 1
#define OTHER_CPU 0

static int polls_at_all(void)
{
        return sysconf(_SC_NPROCESSORS_ONLN) >= 2;
}

/* A burst of one read at each of T0 and T0 + the gaps' running sums; the last start. */
static uint64_t bursts(struct lcpoll *p, const uint64_t *gap, int ngaps)
{
        uint64_t t = T0;

        lcpoll_read(p, t, CLIENT_CPU);
        for (int i = 0; i < ngaps; i++) {
                t += gap[i];
                lcpoll_read(p, t, CLIENT_CPU);
                lcpoll_wrote(p, t + 15 * US); /* its reply */
        }
        return t;
}

/* Five intervals of 1.99-2.04 ms, in no order: the window opens LCPOLL_LEAD_NS before the
 * shortest of the middle three (2.01 ms) and closes LCPOLL_LATE_NS after the longest (2.03
 * ms). Read in the order given, the middle three would be others and the window elsewhere. */
START_TEST(test_cadence_opens_window)
{
        static const uint64_t gap[] = { 2030 * US, 1990 * US, 2040 * US, 2010 * US, 2020 * US };
        struct lcpoll p;

        memset(&p, 0, sizeof(p));
        uint64_t last = bursts(&p, gap, 5);
        if (!polls_at_all()) {
                ck_assert_uint_eq(lcpoll_next(last + US), 0);
                return;
        }
        uint64_t from = last + 2010 * US - LCPOLL_LEAD_NS, until = last + 2030 * US + LCPOLL_LATE_NS;

        ck_assert_uint_eq(lcpoll_next(last + 100 * US), from);
        ck_assert_uint_eq(lcpoll_until(from - US, OTHER_CPU), 0);
        ck_assert_uint_eq(lcpoll_until(from + 10 * US, OTHER_CPU), until);
        ck_assert_uint_eq(lcpoll_until(until - US, OTHER_CPU), until);
        ck_assert_uint_eq(lcpoll_until(until + US, OTHER_CPU), 0);
        /* never on the client's own CPU: the real-time loop thread would keep it off */
        ck_assert_uint_eq(lcpoll_until(from + 10 * US, CLIENT_CPU), 0);

        /* the request comes in the window, and finds the loop thread polling */
        struct lcpoll_stats before, after;
        lcpoll_stats(&before);
        ck_assert_uint_eq(before.caught, 0);
        lcpoll_polling(1, 0);
        lcpoll_read(&p, from + 50 * US, CLIENT_CPU);
        lcpoll_polling(0, 50 * US);
        lcpoll_stats(&after);
        ck_assert_uint_eq(after.in_window, before.in_window + 1);
        ck_assert_uint_eq(after.caught, 1);
        ck_assert_uint_eq(after.poll_ns, 50 * US);
        ck_assert_uint_eq(after.windows, before.windows + 1);
}
END_TEST

/* Intervals between 1 and 5 ms: no window, whatever their order. */
START_TEST(test_irregular_opens_none)
{
        static const uint64_t gap[] = { 1000 * US, 3000 * US, 2000 * US, 5000 * US, 1500 * US, 4000 * US };
        struct lcpoll p;
        struct lcpoll_stats st;

        memset(&p, 0, sizeof(p));
        uint64_t last = bursts(&p, gap, 6);
        ck_assert_uint_eq(lcpoll_next(last + 100 * US), 0);
        for (uint64_t t = last + 500 * US; t < last + 6 * MS; t += 100 * US)
                ck_assert_uint_eq(lcpoll_until(t, OTHER_CPU), 0);
        lcpoll_stats(&st);
        ck_assert_uint_eq(st.windows, 0);
}
END_TEST

/* Three intervals are too few to predict from (LCPOLL_GAPS / 2 needed). */
START_TEST(test_too_few_intervals)
{
        static const uint64_t gap[] = { 2000 * US, 2000 * US, 2000 * US };
        struct lcpoll p;

        memset(&p, 0, sizeof(p));
        uint64_t last = bursts(&p, gap, 3);
        ck_assert_uint_eq(lcpoll_next(last + 100 * US), 0);
}
END_TEST

/* A read and a reply each keep the loop thread polling LCPOLL_TAIL_NS after them (the rest
 * of a burst), off the client's CPU only. */
START_TEST(test_tail_after_io)
{
        struct lcpoll p;

        memset(&p, 0, sizeof(p));
        lcpoll_read(&p, T0, CLIENT_CPU);
        if (!polls_at_all()) {
                ck_assert_uint_eq(lcpoll_until(T0 + US, OTHER_CPU), 0);
                return;
        }
        ck_assert_uint_eq(lcpoll_until(T0 + US, OTHER_CPU), T0 + LCPOLL_TAIL_NS);
        ck_assert_uint_eq(lcpoll_until(T0 + US, CLIENT_CPU), 0);
        lcpoll_wrote(&p, T0 + 20 * US);
        ck_assert_uint_eq(lcpoll_until(T0 + 25 * US, OTHER_CPU), T0 + 20 * US + LCPOLL_TAIL_NS);
        ck_assert_uint_eq(lcpoll_until(T0 + 20 * US + LCPOLL_TAIL_NS + US, OTHER_CPU), 0);
}
END_TEST

/* A session that ends (lcpoll_forget) or idles past LCPOLL_IDLE_NS opens no more windows. */
START_TEST(test_forgotten_and_idle_sessions)
{
        static const uint64_t gap[] = { 2000 * US, 2010 * US, 1990 * US, 2000 * US, 2005 * US };
        struct lcpoll a, b;

        memset(&a, 0, sizeof(a));
        memset(&b, 0, sizeof(b));
        uint64_t last = bursts(&a, gap, 5);
        if (!polls_at_all())
                return;
        ck_assert_uint_ne(lcpoll_next(last + 100 * US), 0);
        lcpoll_forget(&a);
        ck_assert_uint_eq(lcpoll_next(last + 100 * US), 0);
        ck_assert_uint_eq(lcpoll_until(last + 2000 * US, OTHER_CPU), 0);

        last = bursts(&b, gap, 5);
        ck_assert_uint_ne(lcpoll_next(last + 100 * US), 0);
        /* long idle: let go of by the pass that looks, back on its next read */
        ck_assert_uint_eq(lcpoll_next(last + LCPOLL_IDLE_NS + MS), 0);
        ck_assert_int_eq(b.listed, 0);
        lcpoll_read(&b, last + LCPOLL_IDLE_NS + 2 * MS, CLIENT_CPU);
        ck_assert_int_eq(b.listed, 1);
        lcpoll_forget(&b);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("lcpoll");
        TCase *tc = tcase_create("windows");

        tcase_add_test(tc, test_cadence_opens_window);
        tcase_add_test(tc, test_irregular_opens_none);
        tcase_add_test(tc, test_too_few_intervals);
        tcase_add_test(tc, test_tail_after_io);
        tcase_add_test(tc, test_forgotten_and_idle_sessions);
        suite_add_tcase(s, tc);
        return check_run(s);
}

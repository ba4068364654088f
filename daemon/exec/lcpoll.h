/* The loop thread waits for a latency-critical client's next request by polling, where the
 * client's cadence says when it will come (hybrid polling).
 *
 * A request that finds the loop thread asleep in epoll wakes it; from another CPU that is
 * an interrupt to the loop thread's CPU. Where that CPU idles it polls (cpulat.h) and the
 * wake-up is cheap; where a best-effort worker runs there the interrupt goes through the
 * hypervisor and preempts the worker: on the 2-vCPU Zen 5 virtual machines here that hand-off
 * took 21.8 us at the median against 7.1 us into an idle CPU (bench_wakeup), and it was most
 * of what a latency-critical MLP request (18 us alone) lost beside a best-effort load on its
 * device (docs/benchmarks.md). A request that finds the loop thread polling (epoll with no
 * timeout, not waiting in it) wakes nobody.
 *
 * Polling all the time would take a CPU from the best-effort work, but latency-critical
 * clients often come at a cadence (a frame, an audio chunk, a control tick): for each
 * latency-critical session this keeps the intervals between the starts of its last
 * LCPOLL_GAPS bursts of requests (reads more than LCPOLL_BURST_NS apart start a new one).
 * When they agree (the middle half of them within 1/LCPOLL_MAX_SPREAD of their median, and
 * the window with the timer's own lateness within 1/LCPOLL_MAX_SHARE of it), the loop thread
 * polls from a little before the next start they predict until the request comes or the
 * window passes, and for LCPOLL_TAIL_NS after each of the session's reads and replies (the
 * rest of a burst: a stream's tasks, then its synchronize). A client without a cadence opens
 * no window and costs nothing; a missed window costs its length once. Never on the CPU the
 * client last waited on (the loop thread, real-time, would keep the client from running) and
 * only with two CPUs or more. While it polls, or a window is open, best-effort units that
 * come back wait (sched_hold_background): their completion is loop-thread work the request
 * would otherwise find in front of it.
 *
 * NPUD_LC_POLL=0 turns it off. Every function runs on the loop thread. */
#ifndef NPUD_EXEC_LCPOLL_H
#define NPUD_EXEC_LCPOLL_H

#include <stdint.h>
#include <sys/queue.h>

#define LCPOLL_GAPS 8
#define LCPOLL_BURST_NS (200ull * 1000)
#define LCPOLL_TAIL_NS (30ull * 1000)
/* The window opens LCPOLL_LEAD_NS before the shortest of the middle intervals would end (the
 * loop thread's timer, on a CPU busy with best-effort work, ran it 13-20 us late: p10 and
 * p90, npubench isolation) and closes LCPOLL_LATE_NS after the longest. The request ends the
 * polling, so the late side costs only when the request comes later still. */
#define LCPOLL_LEAD_NS (60ull * 1000)
#define LCPOLL_LATE_NS (200ull * 1000)
/* no cadence shorter than this (the loop thread is busy with such a client anyway) */
#define LCPOLL_MIN_GAP_NS (300ull * 1000)
#define LCPOLL_MAX_GAP_NS (1000ull * 1000 * 1000)
/* a session idle this long leaves the list of those looked at (lcpoll_next) */
#define LCPOLL_IDLE_NS (2 * LCPOLL_MAX_GAP_NS)
#define LCPOLL_MAX_SHARE 4 /* a window is at most 1/4 of the interval */
/* and the middle half of the intervals spreads over 1/10 of their median at most (200 us at
 * 2 ms): of 500 simulated clients drawing each interval between 1 and 9 ms, the median one
 * opened no window in 40 requests, the 99th percentile 5, the worst 7 (without this rule 3,
 * 11 and 14) */
#define LCPOLL_MAX_SPREAD 10
/* Best-effort completions wait this long at most while the loop thread polls: a
 * latency-critical client whose requests never pause keeps it polling (their tails), and
 * 20 best-effort requests beside such a client took 3.0 s against 0.6 without polling
 * (test_lc_flood_keeps_best_effort_going). */
#define LCPOLL_MAX_HOLD_NS (250ull * 1000)

struct lcpoll {
        LIST_ENTRY(lcpoll) link;
        int listed;
        int cpu;              /* the CPU the client last waited on, -1: unknown */
        uint64_t last_io;     /* the session's last read or reply */
        uint64_t last_start;  /* the first read of its last burst */
        uint64_t gaps[LCPOLL_GAPS];
        int ngaps, next_gap;
        uint64_t from, until; /* the next window, until 0: none */
};

/* A latency-critical session's read at now_ns; cpu is where its client last waited (-1:
 * unknown). */
void lcpoll_read(struct lcpoll *p, uint64_t now_ns, int cpu);
/* A reply or notification went out at now_ns to a session on the list (listed: one that
 * read lately); a burst goes on after it. */
void lcpoll_wrote(struct lcpoll *p, uint64_t now_ns);
/* No more polling (the daemon stops). */
void lcpoll_shutdown(void);
/* The session ends. */
void lcpoll_forget(struct lcpoll *p);
/* Until when the loop thread polls from now_ns on (0: it need not), for the CPU it runs on. */
uint64_t lcpoll_until(uint64_t now_ns, int here);
/* When the next window opens, 0 when none is predicted (once a loop pass: it also lets go of
 * sessions idle for LCPOLL_IDLE_NS). */
uint64_t lcpoll_next(uint64_t now_ns);
/* The loop thread polls (on 1, from lcpoll_until's answer) or stops (on 0, after ns of it). */
void lcpoll_polling(int on, uint64_t ns);
struct lcpoll_stats {
        uint64_t windows;   /* windows predicted */
        uint64_t in_window; /* bursts that started in their window */
        uint64_t caught;    /* bursts that found the loop thread polling */
        uint64_t poll_ns;   /* time polled */
};
void lcpoll_stats(struct lcpoll_stats *st);

#endif

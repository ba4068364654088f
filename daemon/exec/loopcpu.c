/* The loop thread follows its latency-critical clients onto their CPU (loopcpu.h). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/exec/cpulat.h"
#include "util/log.h"
#include "loopcpu.h"

static struct {
        cpu_set_t all;  /* the daemon's affinity at start */
        int have_all;   /* all is known (set once, at init: other threads read it) */
        int ok;         /* all is known, has two CPUs or more, and it is not turned off */
        int pinned;     /* the CPU the loop thread is kept on, -1: free */
        int cand, seen; /* the CPU named last, and how many times in a row */
        uint64_t moved; /* when it last moved */
        uint64_t last;  /* the last latency-critical wait */
        uint64_t moves;
        /* loopcpu_avoid: the CPUs it is kept on (when not following), set or not, and when
         * that last changed */
        cpu_set_t avoid_set;
        int avoiding;
        int avoid_off; /* NPUD_LOOP_AVOID=0 */
        int anti_off;      /* NPUD_LOOP_APART=0 */
        int lc_cpu;        /* the CPU a latency-critical client last waited on */
        uint64_t lc_seen;  /* when, 0: never */
        uint64_t avoid_moved;
        uint64_t avoid_moves;
} lf = { .pinned = -1, .cand = -1 };

void loopcpu_init(void)
{
        const char *env = getenv("NPUD_LOOP_FOLLOW");

        lf.have_all = sched_getaffinity(0, sizeof(lf.all), &lf.all) == 0;
        lf.ok = env && strcmp(env, "1") == 0 && lf.have_all && CPU_COUNT(&lf.all) > 1;
        const char *av = getenv("NPUD_LOOP_AVOID");
        lf.avoid_off = av && strcmp(av, "0") == 0;
        const char *an = getenv("NPUD_LOOP_APART");
        lf.anti_off = an && strcmp(an, "0") == 0;
}

static int keep_on(const cpu_set_t *set)
{
        if (sched_setaffinity(0, sizeof(*set), set) == 0)
                return 0;
        log_msg(LOG_LVL_INFO, "loop thread: cannot change its CPU affinity: %m; it stays where the "
                "kernel puts it");
        lf.ok = 0; /* not tried again */
        return -1;
}

void loopcpu_client(int cpu, uint64_t now_ns)
{
        if (cpu >= 0 && cpu < CPU_SETSIZE) { /* for loopcpu_avoid */
                lf.lc_cpu = cpu;
                lf.lc_seen = now_ns;
        }
        if (!lf.ok || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &lf.all))
                return;
        lf.last = now_ns;
        if (lf.avoiding) { /* following takes over */
                sched_setaffinity(0, sizeof(lf.all), &lf.all);
                lf.avoiding = 0;
        }
        if (cpu == lf.pinned) {
                lf.seen = 0;
                return;
        }
        lf.seen = cpu == lf.cand ? lf.seen + 1 : 1;
        lf.cand = cpu;
        if (lf.seen < LOOPCPU_CONFIRM || (lf.moves && now_ns - lf.moved < LOOPCPU_MOVE_NS))
                return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (keep_on(&one) == 0) {
                lf.pinned = cpu;
                lf.moved = now_ns;
                lf.moves++;
                lf.seen = 0;
        }
}

void loopcpu_avoid(const cpu_set_t *busy, uint64_t now_ns)
{
        cpu_set_t want;

        if (lf.avoid_off || !lf.have_all || lf.pinned >= 0 || CPU_COUNT(&lf.all) < 2)
                return;
        CPU_XOR(&want, &lf.all, busy);
        CPU_AND(&want, &want, &lf.all); /* the daemon's CPUs without best-effort work */
        if (!CPU_COUNT(&want) && lf.lc_seen && now_ns - lf.lc_seen < CPULAT_IDLE_NS &&
            CPU_ISSET(lf.lc_cpu, &lf.all) && !lf.anti_off) {
                /* best-effort work everywhere: at least not on the CPU a latency-critical
                 * client waits on, where the loop thread would preempt it (loopcpu.h) */
                want = lf.all;
                CPU_CLR(lf.lc_cpu, &want);
        }
        int avoid = CPU_COUNT(&want) > 0 && !CPU_EQUAL(&want, &lf.all);
        if (avoid == lf.avoiding && (!avoid || CPU_EQUAL(&want, &lf.avoid_set)))
                return;
        if (lf.avoid_moves && now_ns - lf.avoid_moved < LOOPCPU_AVOID_MOVE_NS)
                return;
        if (sched_setaffinity(0, sizeof(cpu_set_t), avoid ? &want : &lf.all) != 0) {
                lf.avoid_off = 1; /* not tried again */
                return;
        }
        lf.avoiding = avoid;
        lf.avoid_set = want;
        lf.avoid_moved = now_ns;
        lf.avoid_moves++;
}

uint64_t loopcpu_avoid_moves(void)
{
        return lf.avoid_moves;
}

void loopcpu_tick(uint64_t now_ns)
{
        if (lf.pinned >= 0 && now_ns - lf.last >= CPULAT_IDLE_NS && keep_on(&lf.all) == 0)
                lf.pinned = -1;
}

void loopcpu_thread_free(void)
{
        if (lf.have_all)
                sched_setaffinity(0, sizeof(lf.all), &lf.all);
}

int loopcpu_pinned(void)
{
        return lf.pinned;
}

uint64_t loopcpu_moves(void)
{
        return lf.moves;
}

/* Thread priorities of the daemon. The loop thread runs every dispatch and completion, so a
 * latency-critical request waits for it twice per run: when it is woken while ordinary
 * threads hold every CPU (host workers computing, other processes), the kernel's fair class
 * lets them finish their slice first (up to milliseconds). prio_loop raises the calling
 * thread above them: SCHED_FIFO priority 1 (reset on fork) where permitted, else nice -10,
 * else nothing. The loop does little work per wake-up, so it cannot starve the host; the
 * kernel's RT throttling bounds it anyway. Threads created by a raised thread inherit its
 * policy and nice value: prio_normal, at the start of every thread the daemon creates,
 * drops them back to SCHED_OTHER, nice 0. */
#ifndef NPUD_UTIL_PRIO_H
#define NPUD_UTIL_PRIO_H

enum prio_loop_result { PRIO_LOOP_NONE = 0, PRIO_LOOP_NICE, PRIO_LOOP_FIFO };

/* Raise the calling thread as above; what it got. */
enum prio_loop_result prio_loop(void);
/* The calling thread runs at SCHED_OTHER, nice 0 (a thread may always lower itself). */
void prio_normal(void);
/* The calling thread yields its core to any other runnable thread of the host: SCHED_IDLE,
 * which any thread may take; nice 19 where a kernel refuses it. 0, or -1 (errno set) when
 * neither took. One way: without privilege a thread may not rise again. */
int prio_idle(void);

#endif

/* Time for the daemon's bookkeeping: one monotonic clock everywhere (scheduling, waits,
 * utilization, metrics), never the wall clock, which jumps. */
#ifndef NPUD_UTIL_CLOCK_H
#define NPUD_UTIL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* CLOCK_MONOTONIC_COARSE in nanoseconds: the last tick (a few ms behind now_ns at most,
 * never ahead), for stamps on hot paths that only idle timeouts read. */
uint64_t now_coarse_ns(void);

#endif

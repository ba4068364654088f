/* Time for the daemon's bookkeeping: one monotonic clock everywhere (scheduling, waits,
 * utilization, metrics), never the wall clock, which jumps. */
#ifndef NPUD_UTIL_CLOCK_H
#define NPUD_UTIL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

#endif

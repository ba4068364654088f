#include <time.h>

#include "clock.h"

uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_coarse_ns(void)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0)
                return now_ns();
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

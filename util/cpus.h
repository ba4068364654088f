/* The number of CPUs this process may run on: its affinity mask (a cpuset, systemd's
 * CPUAffinity=, taskset), else the online CPUs. npud's default host worker count. */
#ifndef NPUD_UTIL_CPUS_H
#define NPUD_UTIL_CPUS_H

#include <sched.h>
#include <unistd.h>

static inline int cpus_usable(void)
{
        cpu_set_t set;

        if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
                return CPU_COUNT(&set);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
}

#endif

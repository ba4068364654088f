#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "prio.h"

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

enum prio_loop_result prio_loop(void)
{
        struct sched_param sp = { .sched_priority = 1 };

        if (sched_setscheduler(gettid(), SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0)
                return PRIO_LOOP_FIFO;
        if (setpriority(PRIO_PROCESS, (id_t)gettid(), -10) == 0)
                return PRIO_LOOP_NICE;
        return PRIO_LOOP_NONE;
}

int prio_idle(void)
{
        struct sched_param sp = { .sched_priority = 0 };

        if (sched_setscheduler(gettid(), SCHED_IDLE, &sp) == 0)
                return 0;
        return setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
}

void prio_normal(void)
{
        struct sched_param sp = { .sched_priority = 0 };
        int policy = sched_getscheduler(gettid());

        if (policy == SCHED_FIFO || policy == SCHED_RR)
                sched_setscheduler(gettid(), SCHED_OTHER, &sp);
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
        if (errno == 0 && nice < 0)
                setpriority(PRIO_PROCESS, (id_t)gettid(), 0);
}

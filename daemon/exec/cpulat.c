/* The CPUs' wake-up latency while latency-critical work is about (cpulat.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "cpulat.h"

#define CPULAT_DEVICE "/dev/cpu_dma_latency"

static struct {
        int want;        /* microseconds to ask for; -1: never ask */
        int fd;          /* open while the request is held; -1 otherwise */
        int unavailable; /* the device could not be opened or written: not tried again */
        uint64_t last;   /* the last latency-critical task */
        uint64_t requests;
} cl = { .want = 0, .fd = -1 };

void cpulat_release(void)
{
        if (cl.fd >= 0) {
                close(cl.fd); /* the kernel withdraws the request with the last reference */
                cl.fd = -1;
        }
}

void cpulat_configure(int us)
{
        if (us != cl.want)
                cpulat_release();
        cl.want = us;
        cl.unavailable = 0;
}

void cpulat_active(uint64_t now_ns)
{
        cl.last = now_ns;
        if (cl.fd >= 0 || cl.want < 0 || cl.unavailable)
                return;
        int fd = open(CPULAT_DEVICE, O_WRONLY | O_CLOEXEC);
        int32_t v = cl.want;
        if (fd >= 0 && write(fd, &v, sizeof(v)) == (ssize_t)sizeof(v)) {
                cl.fd = fd;
                cl.requests++;
                return;
        }
        int e = errno;
        if (fd >= 0)
                close(fd);
        cl.unavailable = 1;
        log_msg(LOG_LVL_INFO, "cannot hold the CPUs' wake-up latency at %d us for latency-critical "
                "work (%s: %s): its requests pay the CPUs' idle exit (cpu_wake_latency_us in "
                "npud.conf; -1 turns this off)", cl.want, CPULAT_DEVICE, strerror(e));
}

void cpulat_tick(uint64_t now_ns)
{
        if (cl.fd >= 0 && now_ns - cl.last >= CPULAT_IDLE_NS) {
                cpulat_release();
                log_msg(LOG_LVL_DEBUG, "CPU wake-up latency request withdrawn (no latency-critical "
                        "work for %llu ms)", (unsigned long long)(CPULAT_IDLE_NS / 1000000));
        }
}

int cpulat_held(void)
{
        return cl.fd >= 0 ? cl.want : -1;
}

uint64_t cpulat_requests(void)
{
        return cl.requests;
}

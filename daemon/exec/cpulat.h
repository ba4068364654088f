/* The CPUs' wake-up latency while latency-critical work is about (PM QoS).
 *
 * A request crosses CPUs several times (client, loop thread, worker, loop thread, client),
 * and each time the target CPU may be idle. An idle CPU in a deep C-state, or an idle vCPU
 * that halted and left its host CPU to the hypervisor, takes far longer to wake than the
 * work takes: on the 2-vCPU virtual machines here a wake-up across CPUs after 2 ms idle
 * took 190 us at the median and 2.2 ms at p99 (two threads handing a byte back and forth,
 * 2 ms apart), against 21 us and 87 us while a PM QoS request of 0 us was held; a tiny
 * latency-critical MLP request took 0.2-0.9 ms at the median alone and 0.12 ms under load,
 * because load kept the CPUs awake.
 *
 * The kernel's interface is /dev/cpu_dma_latency: a process writes the largest wake-up
 * latency it tolerates (microseconds, a 32-bit integer) and the kernel keeps every CPU out
 * of idle states slower than that for as long as the file stays open; closing it (or the
 * process dying) withdraws the request. With 0 an idle CPU polls instead of halting: it
 * costs power (and, on a virtual machine, the host's CPU), so npud holds the request only
 * while latency-critical work arrives, and withdraws it CPULAT_IDLE_NS after the last.
 *
 * Every function runs on the loop thread. */
#ifndef NPUD_EXEC_CPULAT_H
#define NPUD_EXEC_CPULAT_H

#include <stdint.h>

/* How long after the last latency-critical task the request is withdrawn. */
#define CPULAT_IDLE_NS (1000ull * 1000 * 1000)

/* What to ask for: us >= 0 microseconds, or -1 never to ask. Changing it withdraws a
 * request held under the old value (the next latency-critical task asks again) and lets a
 * device that could not be opened be tried again. */
void cpulat_configure(int us);
/* Latency-critical work arrived at now_ns: hold the request (opening the device the first
 * time after a withdrawal; when that fails, say so once and carry on without). */
void cpulat_active(uint64_t now_ns);
/* From a periodic timer: withdraw the request when no latency-critical work came for
 * CPULAT_IDLE_NS. */
void cpulat_tick(uint64_t now_ns);
/* The latency held now in microseconds, -1 when no request is held. */
int cpulat_held(void);
/* Requests made since start (each a first latency-critical task after a withdrawal). */
uint64_t cpulat_requests(void);
/* Withdraw the request (shutdown). */
void cpulat_release(void);

#endif

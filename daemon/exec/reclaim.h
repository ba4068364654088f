/* Giving large memory back off the loop thread.
 *
 * Freeing a device buffer clears its memory before it can be allocated again (madvise
 * MADV_DONTNEED on its pages, zeros on the pages it shares), and dropping a host region
 * unmaps it (its memfd's pages go when the last mapping does). For a buffer or region of
 * megabytes that is milliseconds of kernel work, and on the loop thread, which runs at
 * SCHED_FIFO where permitted, it held a CPU and every client's dispatch: a best-effort
 * client freeing its 16 MiB buffers delayed a latency-critical client's requests by 3-8 ms
 * (npubench isolation, perf sched). From RECLAIM_MIN_BYTES up, a reclaimer thread at nice 19
 * does that work instead. A block stays allocated (so nobody can be handed memory
 * that is not yet clear) until the thread has cleared it; the loop thread then releases it
 * (an eventfd wakes it). Accounting does not wait: the tenant's charge and the device's
 * mem_used drop when the buffer is freed, and an allocation that finds no room first waits
 * for the blocks being cleared (reclaim_drain). */
#ifndef NPUD_EXEC_RECLAIM_H
#define NPUD_EXEC_RECLAIM_H

#include <stddef.h>
#include <stdint.h>

#define RECLAIM_MIN_BYTES (256u << 10)

struct event_base;
struct device;

/* Start the reclaimer on base's loop: 0, or a negative errno (everything then stays on the
 * loop thread). */
int reclaim_start(struct event_base *base);
/* Drain and stop it (before the devices go). */
void reclaim_stop(void);
/* Clear dev's block at off (block bytes, still allocated) on the reclaimer and release it
 * after: 0, or -1 when the caller clears and releases it itself (small, or no reclaimer). */
int reclaim_block(struct device *dev, uint64_t off, uint64_t block);
/* Unmap a mapping on the reclaimer: 0, or -1 when the caller unmaps it. */
int reclaim_unmap(void *map, size_t size);
/* Loop thread: wait for every queued job, then release the cleared blocks; how many. */
int reclaim_drain(void);
/* dev's allocator statistics with the blocks being cleared counted free (an allocation that
 * needs them waits for them: buffer_new): what every decision and report on a device's free
 * memory reads. */
struct alloc_stats;
void device_mem_stats(struct device *dev, struct alloc_stats *st);

#endif

/* Device-memory allocator: hands out ranges of one device's memory as offsets. Metadata
 * lives on the host heap; the device range itself is never touched. Not thread-safe: only
 * the loop thread calls it. */
#ifndef NPUD_ALLOC_H
#define NPUD_ALLOC_H

#include <stdint.h>

#define ALLOC_GRANULE 512u

/* size rounded up to the granule, as the allocator and the quotas count it (UINT64_MAX when
 * that would not fit). */
static inline uint64_t alloc_round_up(uint64_t size)
{
        return size > UINT64_MAX - ALLOC_GRANULE ? UINT64_MAX
                                                 : (size + ALLOC_GRANULE - 1) / ALLOC_GRANULE * ALLOC_GRANULE;
}

struct alloc;

struct alloc_stats {
        uint64_t capacity;       /* bytes managed */
        uint64_t allocated;      /* bytes in live blocks (rounded sizes) */
        uint64_t peak_allocated; /* high-water mark of allocated */
        uint64_t free_bytes;     /* capacity - allocated */
        uint64_t largest_free;   /* size of the largest free block */
        uint64_t live_blocks;    /* number of live allocations */
        uint64_t free_segments;  /* number of free blocks */
        uint64_t alloc_count;    /* successful reservations since creation */
        uint64_t fail_count;     /* failed reservations since creation */
};

/* capacity is rounded down to ALLOC_GRANULE; 0 or -ENOMEM/-EINVAL. */
int alloc_new(uint64_t capacity, struct alloc **ret);
void alloc_free(struct alloc *a); /* accepts NULL */

/* Reserve size bytes (rounded up to ALLOC_GRANULE, aligned to ALLOC_GRANULE).
 * 0 and *ret_offset set; -EINVAL for size 0 or > capacity; -ENOMEM when no free block fits.
 * ret_offset untouched on failure. */
int alloc_reserve(struct alloc *a, uint64_t size, uint64_t *ret_offset);
/* Release the block starting at offset. 0, or -EINVAL when offset is not the start of a
 * live block (double free, foreign offset). */
int alloc_release(struct alloc *a, uint64_t offset);
/* The same, also telling where the free block that now holds the released range starts and
 * how large it is (the released block merged with its free neighbours), so that the caller
 * can clear the memory knowing which surrounding bytes are free too. */
int alloc_release_span(struct alloc *a, uint64_t offset, uint64_t *ret_free_offset,
                       uint64_t *ret_free_size);
/* Size (rounded) of the live block starting at offset, 0 if none. */
uint64_t alloc_block_size(const struct alloc *a, uint64_t offset);

void alloc_get_stats(const struct alloc *a, struct alloc_stats *ret);

/* Check every internal invariant (no overlap, adjacent free blocks coalesced, free lists
 * consistent, statistics match). 0, or -EUCLEAN on corruption. For tests. */
int alloc_verify(const struct alloc *a);

#endif

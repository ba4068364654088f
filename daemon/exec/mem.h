/* Memory objects: device buffers (a range of one device's memory) and host regions (a
 * client memfd mapped into npud). Both are reference counted: the client's handle holds one
 * reference and every task in flight that touches the object holds another, so memory is
 * reused only after the last task using it completed.
 *
 * An allocation (a buffer without parent) is the unit of memory and of charging: views and
 * imports reference it, and the tenant that allocated it stays charged until the last
 * reference of any kind goes (buffer_keep_charge). Free device memory always reads as
 * zeros: an allocation's memory is cleared when it returns to the allocator, before anyone
 * can reserve it again (mem_clear_released). */
#ifndef NPUD_MEM_H
#define NPUD_MEM_H

#include <stdint.h>

struct device;
struct tenant;

struct buffer {
        int refs;
        struct device *dev;
        uint64_t offset;       /* into the device's memory */
        uint64_t size;         /* as requested */
        struct buffer *parent; /* views and imports: the allocation they share (a reference;
                                * never itself a view, so chains stay one level deep) */
        int readonly;          /* tasks may not write through this object */
        int imported;          /* an import, or a view of one: its session does not own it */
        /* Allocations only: */
        uint64_t owner;        /* id of the session that allocated it (0: npud itself) */
        uint32_t exports;      /* live exports naming it or one of its views */
        struct tenant *charge; /* charged once the owner's handle is gone (a reference) */
        uint64_t charged;      /* bytes charged to it */
};

struct region {
        int refs;
        void *map;
        uint64_t size;
};

/* 0, -EINVAL (size), -ENOMEM (device memory exhausted; *ret untouched). */
int buffer_new(struct device *dev, uint64_t size, struct buffer **ret);
/* A view of [offset, offset+size) of parent (an allocation or a view), holding a reference
 * to the allocation underneath. Views of read-only objects are read-only, views of imports
 * are imports. 0, -EINVAL (range), -ENOMEM. */
int buffer_view_new(struct buffer *parent, uint64_t offset, uint64_t size, int readonly,
                    struct buffer **ret);
struct buffer *buffer_ref(struct buffer *b);
/* The last reference of an allocation clears its memory, returns it to the allocator and
 * ends the charge taken over with buffer_keep_charge. */
void buffer_unref(struct buffer *b);
/* The allocation b shares (b itself when it is one). */
static inline struct buffer *buffer_root(struct buffer *b)
{
        return b->parent ? b->parent : b;
}
/* The owner gave up its handle to allocation b while `bytes` of t's usage are still charged
 * for it: b keeps that charge (and a reference to t) and removes it with its last
 * reference, so views, imports and tasks that outlive the handle stay charged. */
void buffer_keep_charge(struct buffer *b, struct tenant *t, uint64_t bytes);
/* Where npud itself reads or writes b (its device's memory as the backend mapped it), and
 * the device address that units carry. */
static inline uint8_t *buffer_ptr(const struct buffer *b);
static inline uint64_t buffer_addr(const struct buffer *b);

/* Clear the memory of a released block [off, off+size) of a device mapped at base, knowing
 * that [free_off, free_off+free_size) (which contains it) is free and that every other free
 * byte is already zero: whole pages of the free range are handed back to the host with
 * MADV_DONTNEED (private anonymous memory reads back as zeros), the rest of the block is
 * written with zeros. */
void mem_clear_released(uint8_t *base, uint64_t off, uint64_t size, uint64_t free_off,
                        uint64_t free_size);

/* Take a client memfd: it must be a memfd sealed against shrinking, of 1 byte to max_size.
 * Consumes fd on every path. 0 or -EINVAL with a message naming the problem. */
int region_new(int fd, uint64_t max_size, struct region **ret, char *err, size_t errlen);
struct region *region_ref(struct region *r);
void region_unref(struct region *r);

/* Is [offset, offset+len) inside an object of `size` bytes (overflow-safe)? */
static inline int range_ok(uint64_t offset, uint64_t len, uint64_t size)
{
        return offset <= size && len <= size - offset;
}

#include "device.h"

static inline uint8_t *buffer_ptr(const struct buffer *b)
{
        return b->dev->mem_host + b->offset;
}

static inline uint64_t buffer_addr(const struct buffer *b)
{
        return b->dev->desc.mem_addr + b->offset;
}

#endif

/* Memory objects: device buffers (a range of one device's memory) and host regions (a
 * client memfd mapped into npud). Both are reference counted: the client's handle holds one
 * reference and every task in flight that touches the object holds another, so memory is
 * reused only after the last task using it completed. */
#ifndef NPUD_MEM_H
#define NPUD_MEM_H

#include <stdint.h>

struct device;

struct buffer {
        int refs;
        struct device *dev;
        uint64_t offset;       /* into the device's memory */
        uint64_t size;         /* as requested */
        struct buffer *parent; /* views and imports: the buffer they share (a reference) */
        int readonly;          /* tasks may not write through this object */
};

struct region {
        int refs;
        void *map;
        uint64_t size;
};

/* 0, -EINVAL (size), -ENOMEM (device memory exhausted; *ret untouched). */
int buffer_new(struct device *dev, uint64_t size, struct buffer **ret);
/* A view of [offset, offset+size) of parent, sharing its lifetime (the view holds a
 * reference). readonly views refuse writes. 0, -EINVAL (range), -ENOMEM. */
int buffer_view_new(struct buffer *parent, uint64_t offset, uint64_t size, int readonly,
                    struct buffer **ret);
struct buffer *buffer_ref(struct buffer *b);
void buffer_unref(struct buffer *b);
static inline uint8_t *buffer_ptr(const struct buffer *b);

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
        return (uint8_t *)b->dev->desc.mem_base + b->offset;
}

#endif

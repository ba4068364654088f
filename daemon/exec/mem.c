/* Reference-counted device buffers and host regions. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "mem.h"
#include "reclaim.h"
#include "tenant.h"

int buffer_new(struct device *dev, uint64_t size, struct buffer **ret)
{
        struct buffer *b;
        uint64_t off;
        int e;

        if (size == 0 || size > dev->desc.mem_size)
                return -EINVAL;
        b = malloc(sizeof(*b));
        if (!b)
                return -ENOMEM;
        e = alloc_reserve(dev->alloc, size, &off);
        if (e < 0 && reclaim_drain() > 0) /* blocks being cleared: room once they are */
                e = alloc_reserve(dev->alloc, size, &off);
        if (e < 0) {
                free(b);
                return e;
        }
        b->refs = 1;
        b->dev = dev;
        b->offset = off;
        b->size = size;
        b->parent = NULL;
        b->readonly = 0;
        b->imported = 0;
        b->owner = 0;
        b->exports = 0;
        b->charge = NULL;
        b->charged = 0;
        dev->mem_used += alloc_block_size(dev->alloc, off);
        *ret = b;
        return 0;
}

struct buffer *buffer_ref(struct buffer *b)
{
        b->refs++;
        return b;
}

int buffer_view_new(struct buffer *parent, uint64_t offset, uint64_t size, int readonly,
                    struct buffer **ret)
{
        struct buffer *v;

        if (size == 0 || !range_ok(offset, size, parent->size))
                return -EINVAL;
        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->refs = 1;
        v->dev = parent->dev;
        v->offset = parent->offset + offset;
        v->size = size;
        /* A view of a view references the allocation directly: releases never recurse
         * deeper than one level, however long a chain of views a client builds. */
        v->parent = buffer_ref(buffer_root(parent));
        v->readonly = readonly || parent->readonly;
        v->imported = parent->imported;
        *ret = v;
        return 0;
}

void buffer_keep_charge(struct buffer *b, struct tenant *t, uint64_t bytes)
{
        if (b->parent || b->charge || !t)
                return;
        b->charge = tenant_ref(t);
        b->charged = bytes;
}

static size_t mem_page_size(void)
{
        static size_t page;

        if (!page) {
                long p = sysconf(_SC_PAGESIZE);
                page = p > 0 ? (size_t)p : 4096;
        }
        return page;
}

void mem_clear_released(uint8_t *base, uint64_t off, uint64_t size, uint64_t free_off,
                        uint64_t free_size)
{
        uint64_t page = mem_page_size(), end = off + size;
        /* Pages that hold bytes of the block and lie wholly in free memory. Free pages
         * beyond the block were handed back when they became free, so the range to give back
         * is bounded by the block's own pages, not by the (maybe huge) merged free range. */
        uint64_t lo = (free_off + page - 1) & ~(page - 1), hi = (free_off + free_size) & ~(page - 1);
        uint64_t blo = off & ~(page - 1), bhi = (end + page - 1) & ~(page - 1);

        if (lo < blo)
                lo = blo;
        if (hi > bhi)
                hi = bhi;
        if (lo >= hi || madvise(base + lo, hi - lo, MADV_DONTNEED) < 0) {
                memset(base + off, 0, size);
                return;
        }
        /* Bytes of the block on pages shared with live blocks */
        if (off < lo)
                memset(base + off, 0, (end < lo ? end : lo) - off);
        if (end > hi) {
                uint64_t from = off > hi ? off : hi;
                memset(base + from, 0, end - from);
        }
}

void buffer_unref(struct buffer *b)
{
        struct device *dev;
        uint64_t block, free_off, free_size;

        if (!b || --b->refs > 0)
                return;
        if (b->parent) {
                struct buffer *root = b->parent;
                free(b);
                buffer_unref(root);
                return;
        }
        dev = b->dev;
        block = alloc_block_size(dev->alloc, b->offset);
        if (reclaim_block(dev, b->offset, block) == 0) { /* released once clear */
                dev->mem_used -= block;
        } else if (alloc_release_span(dev->alloc, b->offset, &free_off, &free_size) == 0) {
                dev->mem_used -= block;
                mem_clear_released(dev->mem_host, b->offset, block, free_off, free_size);
        }
        if (b->charge) {
                struct tenant *t = b->charge;
                t->mem_used -= b->charged;
                if (dev->id < t->ndevices)
                        t->dev[dev->id].mem_used -= b->charged;
                tenant_unref(t);
        }
        free(b);
}

int region_new(int fd, uint64_t max_size, struct region **ret, char *err, size_t errlen)
{
        struct stat st;
        struct region *r;
        int seals;
        void *map;

        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0) {
                snprintf(err, errlen, "host region fd is not a memfd");
                goto fail;
        }
        if (!(seals & F_SEAL_SHRINK)) {
                snprintf(err, errlen, "host region memfd must be sealed with F_SEAL_SHRINK");
                goto fail;
        }
        if (fstat(fd, &st) < 0 || st.st_size <= 0) {
                snprintf(err, errlen, "host region memfd is empty");
                goto fail;
        }
        if ((uint64_t)st.st_size > max_size) {
                snprintf(err, errlen, "host region of %lld bytes exceeds the limit of %llu",
                         (long long)st.st_size, (unsigned long long)max_size);
                goto fail;
        }
        map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
                snprintf(err, errlen, "cannot map host region: %s", strerror(errno));
                goto fail;
        }
        close(fd);
        r = malloc(sizeof(*r));
        if (!r) {
                munmap(map, (size_t)st.st_size);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        r->refs = 1;
        r->map = map;
        r->size = (uint64_t)st.st_size;
        *ret = r;
        return 0;
fail:
        close(fd);
        return -EINVAL;
}

struct region *region_ref(struct region *r)
{
        r->refs++;
        return r;
}

void region_unref(struct region *r)
{
        if (!r || --r->refs > 0)
                return;
        if (reclaim_unmap(r->map, r->size) != 0)
                munmap(r->map, r->size);
        free(r);
}

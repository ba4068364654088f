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
        v = malloc(sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->refs = 1;
        v->dev = parent->dev;
        v->offset = parent->offset + offset;
        v->size = size;
        v->parent = buffer_ref(parent);
        v->readonly = readonly || parent->readonly;
        *ret = v;
        return 0;
}

void buffer_unref(struct buffer *b)
{
        if (!b || --b->refs > 0)
                return;
        if (b->parent) {
                buffer_unref(b->parent);
                free(b);
                return;
        }
        b->dev->mem_used -= alloc_block_size(b->dev->alloc, b->offset);
        alloc_release(b->dev->alloc, b->offset);
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
        munmap(r->map, r->size);
        free(r);
}

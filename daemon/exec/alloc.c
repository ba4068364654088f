/* Device-memory allocator: a TLSF-style (two-level segregated fit) allocator over offsets.
 *
 * Every block (free or live) is a host-heap node linked to its physical neighbours, so a
 * release merges with free neighbours at once and no two free blocks ever touch. Free blocks
 * sit in segregated lists: the first level is the power of two of the size in granules, the
 * second splits each power of two into 32 linear steps (sizes below 32 granules get one
 * list per exact size). A bitmap per level says which lists are non-empty, so finding a
 * list whose blocks all fit is two bit scans. Allocation first looks at up to
 * ALLOC_SCAN_MAX blocks of the request's own list for the tightest fit, else takes the
 * head of the next non-empty larger list: O(1), and within 1/32 of the best fit among the
 * larger lists. Only when no larger list is non-empty (near exhaustion) is the rest of the
 * request's own list searched, so that -ENOMEM really means that no free block fits.
 *
 * Requests of ALLOC_LARGE_MIN and more are cut from the high end of the chosen free block,
 * smaller ones from the low end: large long-lived blocks (weights) gather at the top of the
 * range and small short-lived ones at the bottom, so small blocks do not pin holes between
 * large ones. On the inference trace of tests/bench/bench_alloc.c every policy tried
 * (this one, low end only, naive first fit) needs within 1-4 % of the peak live bytes.
 *
 * Nodes come from slabs recycled through a pool, so steady-state operation does not call
 * malloc. Live blocks are found by offset in an open-addressing hash table (linear probing,
 * backward-shift deletion, load kept at or below 1/2). fail_count counts every failed
 * alloc_reserve, -EINVAL included. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define ALLOC_GRANULE_SHIFT 9
#define ALLOC_SL_LOG2 5
#define ALLOC_SL_COUNT (1u << ALLOC_SL_LOG2)
/* Granule counts stay below 2^55 (capacity < 2^64): highest bit 54, first level 50. */
#define ALLOC_FL_COUNT 51
#ifndef ALLOC_LARGE_MIN /* overridable to compare placement policies in the benchmark */
#define ALLOC_LARGE_MIN (1ull << 20)
#endif
#define ALLOC_SCAN_MAX 8
#define ALLOC_SLAB_NODES 256
#define ALLOC_TABLE_MIN 64

struct alloc_block {
        uint64_t offset;
        uint64_t size;
        struct alloc_block *phys_prev;
        struct alloc_block *phys_next;
        struct alloc_block *free_prev;
        struct alloc_block *free_next; /* also links the node pool */
        bool free;
};

struct alloc_slab {
        struct alloc_slab *next;
        struct alloc_block nodes[ALLOC_SLAB_NODES];
};

struct alloc_slot {
        uint64_t offset;
        struct alloc_block *block; /* NULL: empty slot */
};

struct alloc {
        uint64_t capacity;
        uint64_t fl_bitmap;
        uint32_t sl_bitmap[ALLOC_FL_COUNT];
        struct alloc_block *bins[ALLOC_FL_COUNT][ALLOC_SL_COUNT];
        struct alloc_block *first; /* block at offset 0; merges keep the lower node */
        struct alloc_block *pool;
        struct alloc_slab *slabs;
        uint64_t nodes_used;

        struct alloc_slot *table;
        uint64_t table_size; /* power of two */
        unsigned table_shift;
        uint64_t table_count;

        uint64_t allocated;
        uint64_t peak_allocated;
        uint64_t live_blocks;
        uint64_t free_segments;
        uint64_t alloc_count;
        uint64_t fail_count;
};

static void alloc_map(uint64_t size, unsigned *fl, unsigned *sl)
{
        uint64_t g = size >> ALLOC_GRANULE_SHIFT;
        unsigned msb;

        if (g < ALLOC_SL_COUNT) {
                *fl = 0;
                *sl = (unsigned)g;
                return;
        }
        msb = 63u - (unsigned)__builtin_clzll(g);
        *fl = msb - ALLOC_SL_LOG2 + 1;
        *sl = (unsigned)(g >> (msb - ALLOC_SL_LOG2)) & (ALLOC_SL_COUNT - 1);
}

static void alloc_insert_free(struct alloc *a, struct alloc_block *b)
{
        unsigned fl, sl;

        alloc_map(b->size, &fl, &sl);
        b->free = true;
        b->free_prev = NULL;
        b->free_next = a->bins[fl][sl];
        if (b->free_next)
                b->free_next->free_prev = b;
        a->bins[fl][sl] = b;
        a->sl_bitmap[fl] |= 1u << sl;
        a->fl_bitmap |= 1ull << fl;
        a->free_segments++;
}

static void alloc_remove_free(struct alloc *a, struct alloc_block *b)
{
        unsigned fl, sl;

        alloc_map(b->size, &fl, &sl);
        if (b->free_prev)
                b->free_prev->free_next = b->free_next;
        else
                a->bins[fl][sl] = b->free_next;
        if (b->free_next)
                b->free_next->free_prev = b->free_prev;
        if (!a->bins[fl][sl]) {
                a->sl_bitmap[fl] &= ~(1u << sl);
                if (!a->sl_bitmap[fl])
                        a->fl_bitmap &= ~(1ull << fl);
        }
        b->free = false;
        b->free_prev = b->free_next = NULL;
        a->free_segments--;
}

/* size is a granule multiple; returns a free block of at least size bytes, or NULL. */
static struct alloc_block *alloc_find(const struct alloc *a, uint64_t size)
{
        struct alloc_block *b, *best = NULL;
        unsigned fl, sl, n;
        uint32_t sl_map;
        uint64_t fl_map;

        alloc_map(size, &fl, &sl);
        for (b = a->bins[fl][sl], n = 0; b && n < ALLOC_SCAN_MAX; b = b->free_next, n++) {
                if (b->size == size)
                        return b;
                if (b->size > size && (!best || b->size < best->size))
                        best = b;
        }
        if (best)
                return best;

        sl_map = sl + 1 < ALLOC_SL_COUNT ? a->sl_bitmap[fl] & (~0u << (sl + 1)) : 0;
        if (!sl_map) {
                fl_map = a->fl_bitmap & (~0ull << (fl + 1));
                if (!fl_map)
                        goto rest;
                fl = (unsigned)__builtin_ctzll(fl_map);
                sl_map = a->sl_bitmap[fl];
        }
        sl = (unsigned)__builtin_ctz(sl_map);
        return a->bins[fl][sl];

rest:
        /* Nothing larger exists: only near exhaustion. A fitting block may still hide past
         * the bounded scan of the request's own list, and -ENOMEM must mean none fits. */
        for (; b; b = b->free_next)
                if (b->size >= size && (!best || b->size < best->size))
                        best = b;
        return best;
}

static int alloc_pool_fill(struct alloc *a)
{
        struct alloc_slab *s;
        unsigned i;

        if (a->pool)
                return 0;
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->next = a->slabs;
        a->slabs = s;
        for (i = 0; i < ALLOC_SLAB_NODES; i++) {
                s->nodes[i].free_next = a->pool;
                a->pool = &s->nodes[i];
        }
        return 0;
}

/* Caller ensured the pool is not empty with alloc_pool_fill(). */
static struct alloc_block *alloc_node_get(struct alloc *a)
{
        struct alloc_block *b = a->pool;

        a->pool = b->free_next;
        memset(b, 0, sizeof(*b));
        a->nodes_used++;
        return b;
}

static void alloc_node_put(struct alloc *a, struct alloc_block *b)
{
        b->free_next = a->pool;
        a->pool = b;
        a->nodes_used--;
}

static uint64_t alloc_hash(const struct alloc *a, uint64_t offset)
{
        return ((offset >> ALLOC_GRANULE_SHIFT) * 0x9e3779b97f4a7c15ull) >> a->table_shift;
}

static void alloc_table_place(struct alloc *a, uint64_t offset, struct alloc_block *b)
{
        uint64_t mask = a->table_size - 1, i;

        for (i = alloc_hash(a, offset); a->table[i].block; i = (i + 1) & mask)
                ;
        a->table[i].offset = offset;
        a->table[i].block = b;
}

static int alloc_table_resize(struct alloc *a, uint64_t size)
{
        struct alloc_slot *old = a->table;
        uint64_t old_size = a->table_size, i;
        struct alloc_slot *t;

        t = calloc(size, sizeof(*t));
        if (!t)
                return -ENOMEM;
        a->table = t;
        a->table_size = size;
        a->table_shift = 64u - (unsigned)__builtin_ctzll(size);
        for (i = 0; i < old_size; i++)
                if (old[i].block)
                        alloc_table_place(a, old[i].offset, old[i].block);
        free(old);
        return 0;
}

static int alloc_table_reserve(struct alloc *a)
{
        if ((a->table_count + 1) * 2 <= a->table_size)
                return 0;
        if (a->table_size > UINT64_MAX / 2 / sizeof(struct alloc_slot))
                return -ENOMEM;
        return alloc_table_resize(a, a->table_size * 2);
}

static int64_t alloc_table_find(const struct alloc *a, uint64_t offset)
{
        uint64_t mask = a->table_size - 1, i;

        for (i = alloc_hash(a, offset); a->table[i].block; i = (i + 1) & mask)
                if (a->table[i].offset == offset)
                        return (int64_t)i;
        return -1;
}

static void alloc_table_delete(struct alloc *a, uint64_t i)
{
        uint64_t mask = a->table_size - 1, j = i, home;

        for (;;) {
                a->table[i].block = NULL;
                for (;;) {
                        j = (j + 1) & mask;
                        if (!a->table[j].block)
                                goto shrink;
                        home = alloc_hash(a, a->table[j].offset);
                        /* The entry at j may fill hole i unless its home lies in (i, j]. */
                        if (((j - home) & mask) >= ((j - i) & mask))
                                break;
                }
                a->table[i] = a->table[j];
                i = j;
        }
shrink:
        a->table_count--;
        /* Hysteresis between growth at 1/2 and shrink at 1/8 keeps resizes amortized. */
        if (a->table_size > ALLOC_TABLE_MIN && a->table_count * 8 < a->table_size)
                alloc_table_resize(a, a->table_size / 2); /* failure leaves it larger */
}

int alloc_new(uint64_t capacity, struct alloc **ret)
{
        struct alloc *a;
        struct alloc_block *b;

        capacity &= ~(uint64_t)(ALLOC_GRANULE - 1);
        if (!capacity)
                return -EINVAL;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->capacity = capacity;
        if (alloc_table_resize(a, ALLOC_TABLE_MIN) < 0 || alloc_pool_fill(a) < 0) {
                alloc_free(a);
                return -ENOMEM;
        }
        b = alloc_node_get(a);
        b->offset = 0;
        b->size = capacity;
        a->first = b;
        alloc_insert_free(a, b);
        *ret = a;
        return 0;
}

void alloc_free(struct alloc *a)
{
        struct alloc_slab *s, *next;

        if (!a)
                return;
        for (s = a->slabs; s; s = next) {
                next = s->next;
                free(s);
        }
        free(a->table);
        free(a);
}

int alloc_reserve(struct alloc *a, uint64_t size, uint64_t *ret_offset)
{
        struct alloc_block *b, *n, *used;

        /* Checked before rounding: capacity is a granule multiple, so a size that passes
         * cannot wrap when rounded up and still fits the capacity. */
        if (size == 0 || size > a->capacity) {
                a->fail_count++;
                return -EINVAL;
        }
        size = (size + ALLOC_GRANULE - 1) & ~(uint64_t)(ALLOC_GRANULE - 1);

        if (alloc_table_reserve(a) < 0 || alloc_pool_fill(a) < 0) {
                a->fail_count++;
                return -ENOMEM;
        }
        b = alloc_find(a, size);
        if (!b) {
                a->fail_count++;
                return -ENOMEM;
        }
        alloc_remove_free(a, b);
        used = b;
        if (b->size > size) {
                n = alloc_node_get(a);
                n->phys_prev = b;
                n->phys_next = b->phys_next;
                if (n->phys_next)
                        n->phys_next->phys_prev = n;
                b->phys_next = n;
                if (size >= ALLOC_LARGE_MIN) {
                        n->offset = b->offset + b->size - size;
                        n->size = size;
                        b->size -= size;
                        alloc_insert_free(a, b);
                        used = n;
                } else {
                        n->offset = b->offset + size;
                        n->size = b->size - size;
                        b->size = size;
                        alloc_insert_free(a, n);
                }
        }

        alloc_table_place(a, used->offset, used);
        a->table_count++;
        a->allocated += size;
        if (a->allocated > a->peak_allocated)
                a->peak_allocated = a->allocated;
        a->live_blocks++;
        a->alloc_count++;
        *ret_offset = used->offset;
        return 0;
}

int alloc_release(struct alloc *a, uint64_t offset)
{
        uint64_t free_offset, free_size;

        return alloc_release_span(a, offset, &free_offset, &free_size);
}

int alloc_release_span(struct alloc *a, uint64_t offset, uint64_t *ret_free_offset,
                       uint64_t *ret_free_size)
{
        struct alloc_block *b, *p, *n;
        int64_t i;

        i = alloc_table_find(a, offset);
        if (i < 0)
                return -EINVAL;
        b = a->table[i].block;
        alloc_table_delete(a, (uint64_t)i);
        a->allocated -= b->size;
        a->live_blocks--;

        p = b->phys_prev;
        if (p && p->free) {
                alloc_remove_free(a, p);
                p->size += b->size;
                p->phys_next = b->phys_next;
                if (p->phys_next)
                        p->phys_next->phys_prev = p;
                alloc_node_put(a, b);
                b = p;
        }
        n = b->phys_next;
        if (n && n->free) {
                alloc_remove_free(a, n);
                b->size += n->size;
                b->phys_next = n->phys_next;
                if (b->phys_next)
                        b->phys_next->phys_prev = b;
                alloc_node_put(a, n);
        }
        alloc_insert_free(a, b);
        *ret_free_offset = b->offset;
        *ret_free_size = b->size;
        return 0;
}

uint64_t alloc_block_size(const struct alloc *a, uint64_t offset)
{
        int64_t i = alloc_table_find(a, offset);

        return i < 0 ? 0 : a->table[i].block->size;
}

void alloc_get_stats(const struct alloc *a, struct alloc_stats *ret)
{
        const struct alloc_block *b;
        uint64_t largest = 0;
        unsigned fl, sl;

        if (a->fl_bitmap) {
                fl = 63u - (unsigned)__builtin_clzll(a->fl_bitmap);
                sl = 31u - (unsigned)__builtin_clz(a->sl_bitmap[fl]);
                for (b = a->bins[fl][sl]; b; b = b->free_next)
                        if (b->size > largest)
                                largest = b->size;
        }
        ret->capacity = a->capacity;
        ret->allocated = a->allocated;
        ret->peak_allocated = a->peak_allocated;
        ret->free_bytes = a->capacity - a->allocated;
        ret->largest_free = largest;
        ret->live_blocks = a->live_blocks;
        ret->free_segments = a->free_segments;
        ret->alloc_count = a->alloc_count;
        ret->fail_count = a->fail_count;
}

static int alloc_verify_bins(const struct alloc *a)
{
        const struct alloc_block *b, *prev;
        uint64_t listed = 0, limit = a->free_segments;
        unsigned fl, sl, bfl, bsl;

        for (fl = 0; fl < ALLOC_FL_COUNT; fl++) {
                if (!!(a->fl_bitmap & (1ull << fl)) != !!a->sl_bitmap[fl])
                        return -EUCLEAN;
                for (sl = 0; sl < ALLOC_SL_COUNT; sl++) {
                        if (!!(a->sl_bitmap[fl] & (1u << sl)) != !!a->bins[fl][sl])
                                return -EUCLEAN;
                        prev = NULL;
                        for (b = a->bins[fl][sl]; b; prev = b, b = b->free_next) {
                                if (++listed > limit || !b->free || b->free_prev != prev)
                                        return -EUCLEAN;
                                alloc_map(b->size, &bfl, &bsl);
                                if (bfl != fl || bsl != sl)
                                        return -EUCLEAN;
                        }
                }
        }
        if (a->fl_bitmap >> ALLOC_FL_COUNT)
                return -EUCLEAN;
        return listed == a->free_segments ? 0 : -EUCLEAN;
}

static int alloc_verify_table(const struct alloc *a)
{
        const struct alloc_block *b;
        uint64_t i, count = 0;

        if (a->table_size < ALLOC_TABLE_MIN || (a->table_size & (a->table_size - 1)) ||
            a->table_count * 2 > a->table_size)
                return -EUCLEAN;
        for (i = 0; i < a->table_size; i++) {
                b = a->table[i].block;
                if (!b)
                        continue;
                count++;
                if (b->free || b->offset != a->table[i].offset ||
                    alloc_table_find(a, b->offset) != (int64_t)i)
                        return -EUCLEAN;
        }
        return count == a->table_count && count == a->live_blocks ? 0 : -EUCLEAN;
}

int alloc_verify(const struct alloc *a)
{
        const struct alloc_block *b, *prev = NULL;
        uint64_t end = 0, nodes = 0, used = 0, used_bytes = 0, free_blocks = 0;
        bool prev_free = false;

        if (!a->first || a->first->offset != 0)
                return -EUCLEAN;
        for (b = a->first; b; prev = b, b = b->phys_next) {
                if (++nodes > a->nodes_used || b->phys_prev != prev || b->offset != end ||
                    b->size == 0 || (b->size & (ALLOC_GRANULE - 1)) ||
                    b->size > a->capacity - end)
                        return -EUCLEAN;
                end += b->size;
                if (b->free) {
                        if (prev_free)
                                return -EUCLEAN;
                        free_blocks++;
                } else {
                        used++;
                        used_bytes += b->size;
                }
                prev_free = b->free;
        }
        if (end != a->capacity || nodes != a->nodes_used || free_blocks != a->free_segments ||
            used != a->live_blocks || used_bytes != a->allocated ||
            a->allocated > a->peak_allocated || a->live_blocks > a->alloc_count)
                return -EUCLEAN;
        if (alloc_verify_bins(a) < 0)
                return -EUCLEAN;
        return alloc_verify_table(a);
}

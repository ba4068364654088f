/* Unit tests of the device-memory allocator (daemon/exec/alloc.c): API contract, error paths,
 * coalescing, statistics, huge capacities and randomized runs against a shadow model; and
 * the clearing of released memory (mem_clear_released in daemon/exec/mem.c). */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/exec/alloc.h"
#include "daemon/exec/mem.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define SENTINEL 0xdeadbeefcafef00dull

/* For hot loops: Check's ck_assert_* writes a checkpoint to a file on every call, even a
 * passing one, which would dominate the randomized runs. These only act on failure. */
#define TEST_REQUIRE(cond)                                                                 \
        do {                                                                               \
                if (!(cond))                                                               \
                        ck_abort_msg("failed: %s", #cond);                                 \
        } while (0)
#define TEST_REQUIRE_CMP(x, op, y)                                                         \
        do {                                                                               \
                uint64_t x_ = (uint64_t)(x), y_ = (uint64_t)(y);                           \
                if (!(x_ op y_))                                                           \
                        ck_abort_msg("failed: %s %s %s (%llu vs %llu)", #x, #op, #y,       \
                                     (unsigned long long)x_, (unsigned long long)y_);      \
        } while (0)

static uint64_t test_rng_next(uint64_t *s)
{
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static uint64_t test_rng_below(uint64_t *s, uint64_t n)
{
        return test_rng_next(s) % n;
}

static uint64_t test_round(uint64_t size)
{
        return (size + ALLOC_GRANULE - 1) & ~(uint64_t)(ALLOC_GRANULE - 1);
}

static struct alloc *test_new(uint64_t capacity)
{
        struct alloc *a = NULL;

        ck_assert_int_eq(alloc_new(capacity, &a), 0);
        ck_assert_ptr_nonnull(a);
        ck_assert_int_eq(alloc_verify(a), 0);
        return a;
}

static uint64_t test_reserve(struct alloc *a, uint64_t size)
{
        uint64_t off = SENTINEL;

        ck_assert_int_eq(alloc_reserve(a, size, &off), 0);
        ck_assert_uint_ne(off, SENTINEL);
        return off;
}

static struct alloc_stats test_stats(const struct alloc *a)
{
        struct alloc_stats st;

        memset(&st, 0xa5, sizeof(st));
        alloc_get_stats(a, &st);
        TEST_REQUIRE_CMP(st.free_bytes, ==, st.capacity - st.allocated);
        return st;
}

static void test_assert_empty(const struct alloc *a)
{
        struct alloc_stats st = test_stats(a);

        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_uint_eq(st.allocated, 0);
        ck_assert_uint_eq(st.live_blocks, 0);
        ck_assert_uint_eq(st.free_segments, 1);
        ck_assert_uint_eq(st.largest_free, st.capacity);
        ck_assert_uint_eq(st.free_bytes, st.capacity);
}

START_TEST(test_new_capacity)
{
        struct alloc *a = NULL;
        struct alloc_stats st;

        ck_assert_int_eq(alloc_new(0, &a), -EINVAL);
        ck_assert_int_eq(alloc_new(ALLOC_GRANULE - 1, &a), -EINVAL);
        ck_assert_ptr_null(a);

        a = test_new(1000);
        st = test_stats(a);
        ck_assert_uint_eq(st.capacity, 512);
        ck_assert_uint_eq(st.largest_free, 512);
        ck_assert_uint_eq(st.free_segments, 1);
        ck_assert_uint_eq(st.alloc_count, 0);
        ck_assert_uint_eq(st.fail_count, 0);
        ck_assert_uint_eq(test_reserve(a, 512), 0);
        alloc_free(a);

        a = test_new(ALLOC_GRANULE);
        ck_assert_uint_eq(test_reserve(a, 1), 0);
        alloc_free(a);

        alloc_free(NULL);
}
END_TEST

START_TEST(test_basic)
{
        struct alloc *a = test_new(1 * MIB);
        uint64_t x, y;
        struct alloc_stats st;

        x = test_reserve(a, 1000);
        y = test_reserve(a, 4096);
        ck_assert_uint_ne(x, y);
        ck_assert_uint_eq(alloc_block_size(a, x), 1024);
        ck_assert_uint_eq(alloc_block_size(a, y), 4096);
        ck_assert_int_eq(alloc_verify(a), 0);
        st = test_stats(a);
        ck_assert_uint_eq(st.allocated, 5120);
        ck_assert_uint_eq(st.live_blocks, 2);
        ck_assert_uint_eq(st.alloc_count, 2);

        ck_assert_int_eq(alloc_release(a, x), 0);
        ck_assert_uint_eq(alloc_block_size(a, x), 0);
        ck_assert_uint_eq(alloc_block_size(a, y), 4096);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_int_eq(alloc_release(a, y), 0);
        test_assert_empty(a);
        st = test_stats(a);
        ck_assert_uint_eq(st.peak_allocated, 5120);
        ck_assert_uint_eq(st.alloc_count, 2);
        alloc_free(a);
}
END_TEST

START_TEST(test_alignment_rounding)
{
        static const uint64_t sizes[] = { 1, 2, 511, 512, 513, 1023, 1024, 1025, 4095, 65537,
                                          1 * MIB - 1, 1 * MIB, 1 * MIB + 1, 3 * MIB + 7 };
        struct alloc *a = test_new(64 * MIB);
        uint64_t offs[sizeof(sizes) / sizeof(sizes[0])];
        uint64_t total = 0;
        size_t i;

        for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                offs[i] = test_reserve(a, sizes[i]);
                ck_assert_uint_eq(offs[i] % ALLOC_GRANULE, 0);
                ck_assert_uint_eq(alloc_block_size(a, offs[i]), test_round(sizes[i]));
                ck_assert_uint_le(offs[i] + test_round(sizes[i]), 64 * MIB);
                total += test_round(sizes[i]);
                ck_assert_uint_eq(test_stats(a).allocated, total);
        }
        ck_assert_uint_eq(alloc_block_size(a, offs[0]), 512);
        ck_assert_uint_eq(alloc_block_size(a, offs[4]), 1024);
        ck_assert_int_eq(alloc_verify(a), 0);
        for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                ck_assert_int_eq(alloc_release(a, offs[i]), 0);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

START_TEST(test_invalid_sizes)
{
        struct alloc *a = test_new(1 * MIB + 100);
        uint64_t off = SENTINEL;
        struct alloc_stats st;

        ck_assert_int_eq(alloc_reserve(a, 0, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, 1 * MIB + 1, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, 1 * MIB + 100, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, UINT64_MAX, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, UINT64_MAX - ALLOC_GRANULE + 2, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, UINT64_MAX - ALLOC_GRANULE + 1, &off), -EINVAL);
        ck_assert_uint_eq(off, SENTINEL);
        st = test_stats(a);
        ck_assert_uint_eq(st.alloc_count, 0);
        ck_assert_uint_eq(st.fail_count, 6);
        test_assert_empty(a);

        ck_assert_uint_eq(test_reserve(a, 1 * MIB), 0);
        ck_assert_int_eq(alloc_verify(a), 0);
        alloc_free(a);
}
END_TEST

START_TEST(test_huge_capacity_no_wrap)
{
        uint64_t cap = UINT64_MAX & ~(uint64_t)(ALLOC_GRANULE - 1);
        struct alloc *a = test_new(UINT64_MAX);
        uint64_t off = SENTINEL, x, y;

        ck_assert_uint_eq(test_stats(a).capacity, cap);
        test_assert_empty(a);
        ck_assert_int_eq(alloc_reserve(a, UINT64_MAX, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, cap + 1, &off), -EINVAL);
        ck_assert_uint_eq(off, SENTINEL);

        x = test_reserve(a, cap - 1);
        ck_assert_uint_eq(x, 0);
        ck_assert_uint_eq(alloc_block_size(a, x), cap);
        ck_assert_int_eq(alloc_reserve(a, 1, &off), -ENOMEM);
        ck_assert_uint_eq(test_stats(a).largest_free, 0);
        ck_assert_uint_eq(test_stats(a).free_segments, 0);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_int_eq(alloc_release(a, x), 0);

        x = test_reserve(a, 1ull << 62);
        y = test_reserve(a, 4096);
        ck_assert_uint_eq(x, cap - (1ull << 62));
        ck_assert_uint_eq(y, 0);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_uint_eq(test_stats(a).largest_free, cap - (1ull << 62) - 4096);
        ck_assert_int_eq(alloc_release(a, y), 0);
        ck_assert_int_eq(alloc_release(a, x), 0);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

START_TEST(test_exhaustion_recovery)
{
        struct alloc *a = test_new(64 * KIB);
        uint64_t offs[128], off = SENTINEL;
        bool seen[128] = { false };
        struct alloc_stats st;
        int i;

        for (i = 0; i < 128; i++) {
                offs[i] = test_reserve(a, ALLOC_GRANULE);
                ck_assert_uint_lt(offs[i], 64 * KIB);
                ck_assert(!seen[offs[i] / ALLOC_GRANULE]);
                seen[offs[i] / ALLOC_GRANULE] = true;
        }
        ck_assert_int_eq(alloc_reserve(a, 1, &off), -ENOMEM);
        ck_assert_uint_eq(off, SENTINEL);
        st = test_stats(a);
        ck_assert_uint_eq(st.fail_count, 1);
        ck_assert_uint_eq(st.free_bytes, 0);
        ck_assert_uint_eq(st.largest_free, 0);
        ck_assert_uint_eq(st.free_segments, 0);
        ck_assert_uint_eq(st.live_blocks, 128);
        ck_assert_int_eq(alloc_verify(a), 0);

        ck_assert_int_eq(alloc_release(a, 4096), 0);
        ck_assert_int_eq(alloc_reserve(a, 1024, &off), -ENOMEM);
        ck_assert_uint_eq(off, SENTINEL);
        ck_assert_uint_eq(test_reserve(a, 100), 4096);
        ck_assert_int_eq(alloc_reserve(a, 1, &off), -ENOMEM);

        /* Two neighbouring holes merge and serve a request neither could alone. */
        ck_assert_int_eq(alloc_release(a, 8192), 0);
        ck_assert_int_eq(alloc_release(a, 8192 + 512), 0);
        st = test_stats(a);
        ck_assert_uint_eq(st.free_segments, 1);
        ck_assert_uint_eq(st.largest_free, 1024);
        ck_assert_uint_eq(test_reserve(a, 1024), 8192);
        st = test_stats(a);
        ck_assert_uint_eq(st.fail_count, 3);
        ck_assert_uint_eq(st.live_blocks, 127);
        ck_assert_int_eq(alloc_verify(a), 0);

        for (i = 0; i < 128; i++)
                if (offs[i] != 8192 + 512)
                        ck_assert_int_eq(alloc_release(a, offs[i]), 0);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

START_TEST(test_bad_release)
{
        struct alloc *a = test_new(1 * MIB);
        uint64_t x, y;
        struct alloc_stats before, after;

        x = test_reserve(a, 4096);
        y = test_reserve(a, 2048);
        before = test_stats(a);

        ck_assert_int_eq(alloc_release(a, x + 1), -EINVAL);
        ck_assert_int_eq(alloc_release(a, x + ALLOC_GRANULE), -EINVAL);
        ck_assert_int_eq(alloc_release(a, y + 2048), -EINVAL); /* start of the free rest */
        ck_assert_int_eq(alloc_release(a, 1 * MIB), -EINVAL);
        ck_assert_int_eq(alloc_release(a, 1 * MIB + 4096), -EINVAL);
        ck_assert_int_eq(alloc_release(a, UINT64_MAX), -EINVAL);
        ck_assert_uint_eq(alloc_block_size(a, x + ALLOC_GRANULE), 0);
        ck_assert_uint_eq(alloc_block_size(a, UINT64_MAX), 0);
        after = test_stats(a);
        ck_assert_mem_eq(&before, &after, sizeof(before));
        ck_assert_int_eq(alloc_verify(a), 0);

        ck_assert_int_eq(alloc_release(a, x), 0);
        ck_assert_int_eq(alloc_release(a, x), -EINVAL);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_uint_eq(alloc_block_size(a, y), 2048);

        /* A new block at the same offset is live again; only one release succeeds. */
        ck_assert_uint_eq(test_reserve(a, 4096), x);
        ck_assert_int_eq(alloc_release(a, x), 0);
        ck_assert_int_eq(alloc_release(a, x), -EINVAL);
        ck_assert_int_eq(alloc_release(a, y), 0);
        ck_assert_int_eq(alloc_release(a, y), -EINVAL);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

START_TEST(test_release_span)
{
        struct alloc *a = test_new(1 * MIB);
        uint64_t x, y, z, fo = SENTINEL, fs = SENTINEL;

        x = test_reserve(a, 1000);
        y = test_reserve(a, 4096);
        z = test_reserve(a, 512);
        ck_assert_uint_eq(x, 0);
        ck_assert_uint_eq(y, 1024);
        ck_assert_uint_eq(z, 5120);
        /* live neighbours on both sides: the span is the block itself */
        ck_assert_int_eq(alloc_release_span(a, y, &fo, &fs), 0);
        ck_assert_uint_eq(fo, 1024);
        ck_assert_uint_eq(fs, 4096);
        /* merged with the free block above */
        ck_assert_int_eq(alloc_release_span(a, x, &fo, &fs), 0);
        ck_assert_uint_eq(fo, 0);
        ck_assert_uint_eq(fs, 5120);
        /* merged on both sides: everything */
        ck_assert_int_eq(alloc_release_span(a, z, &fo, &fs), 0);
        ck_assert_uint_eq(fo, 0);
        ck_assert_uint_eq(fs, 1 * MIB);
        /* a bad release leaves the outputs alone */
        fo = fs = SENTINEL;
        ck_assert_int_eq(alloc_release_span(a, z, &fo, &fs), -EINVAL);
        ck_assert_uint_eq(fo, SENTINEL);
        ck_assert_uint_eq(fs, SENTINEL);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

static int test_resident(const uint8_t *base, uint64_t off)
{
        long page = sysconf(_SC_PAGESIZE);
        unsigned char v = 0;

        ck_assert_int_eq(mincore((void *)(base + (off & ~(uint64_t)(page - 1))), (size_t)page, &v), 0);
        return v & 1;
}

/* Released memory reads zeros; bytes of live neighbours on shared pages are kept; whole
 * free pages leave the process (mincore), including pages that only become wholly free
 * when a neighbour is released. */
START_TEST(test_clear_released)
{
        const uint64_t cap = 4 * MIB, page = (uint64_t)sysconf(_SC_PAGESIZE);
        struct alloc *a = test_new(cap);
        uint8_t *base = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        uint64_t x, y, z, big, fo, fs, i;

        ck_assert_ptr_ne(base, MAP_FAILED);
        x = test_reserve(a, 1000);         /* [0, 1024) */
        y = test_reserve(a, 3 * page + 1); /* [1024, 1024 + 3 pages + 512) */
        z = test_reserve(a, 700);
        big = test_reserve(a, 2 * MIB);    /* large: from the top */
        memset(base + x, 0xff, 1024);
        memset(base + y, 0xff, 3 * page + 512);
        memset(base + z, 0xff, 1024);
        memset(base + big, 0xff, 2 * MIB);
        ck_assert(test_resident(base, y + page));

        ck_assert_int_eq(alloc_release_span(a, y, &fo, &fs), 0);
        mem_clear_released(base, y, 3 * page + 512, fo, fs);
        /* The pages wholly inside y are gone; the first and last are shared with x and z.
         * (Checked before reading: a read maps the zero page, which mincore counts.) */
        ck_assert(test_resident(base, x));
        ck_assert(!test_resident(base, page));
        ck_assert(!test_resident(base, 2 * page));
        ck_assert(test_resident(base, z));
        for (i = 0; i < cap; i++) {
                int live = i < y || (i >= z && i < z + 1024) || i >= big;
                if (base[i] != (live ? 0xff : 0))
                        ck_abort_msg("byte %llu is %u", (unsigned long long)i, base[i]);
        }

        /* releasing x merges with y: page 0 is now wholly free and goes too */
        ck_assert_int_eq(alloc_release_span(a, x, &fo, &fs), 0);
        ck_assert_uint_eq(fo, 0);
        mem_clear_released(base, x, 1024, fo, fs);
        ck_assert(!test_resident(base, 0));
        for (i = 0; i < z; i++)
                ck_assert_uint_eq(base[i], 0);
        ck_assert_uint_eq(base[z], 0xff);

        /* a large block: everything zero and gone */
        ck_assert_int_eq(alloc_release_span(a, big, &fo, &fs), 0);
        mem_clear_released(base, big, 2 * MIB, fo, fs);
        ck_assert(!test_resident(base, big + MIB));
        ck_assert(test_resident(base, z));
        for (i = big; i < big + 2 * MIB; i += 997)
                ck_assert_uint_eq(base[i], 0);
        ck_assert_int_eq(alloc_release_span(a, z, &fo, &fs), 0);
        mem_clear_released(base, z, 1024, fo, fs);
        for (i = 0; i < cap; i += 61)
                ck_assert_uint_eq(base[i], 0);
        test_assert_empty(a);
        munmap(base, cap);
        alloc_free(a);
}
END_TEST

static void test_coalesce_order(int order)
{
        enum { N = 300 };
        struct alloc *a = test_new(256 * MIB);
        uint64_t offs[N], seed = 42 + (uint64_t)order, t;
        int idx[N], i, j;

        for (i = 0; i < N; i++) {
                offs[i] = test_reserve(a, 1 + test_rng_below(&seed, i % 10 ? 64 * KIB : 2 * MIB));
                idx[i] = i;
        }
        ck_assert_int_eq(alloc_verify(a), 0);
        if (order == 1) {
                for (i = 0; i < N / 2; i++) {
                        j = idx[i];
                        idx[i] = idx[N - 1 - i];
                        idx[N - 1 - i] = j;
                }
        } else if (order == 2) {
                for (i = 0; i < N; i++)
                        idx[i] = i < N / 2 ? 2 * i : 2 * (i - N / 2) + 1;
        } else if (order == 3) {
                for (i = N - 1; i > 0; i--) {
                        t = test_rng_below(&seed, (uint64_t)i + 1);
                        j = idx[i];
                        idx[i] = idx[t];
                        idx[t] = j;
                }
        }
        for (i = 0; i < N; i++) {
                ck_assert_int_eq(alloc_release(a, offs[idx[i]]), 0);
                if (i % 37 == 0)
                        ck_assert_int_eq(alloc_verify(a), 0);
        }
        test_assert_empty(a);
        alloc_free(a);
}

START_TEST(test_coalesce)
{
        test_coalesce_order(_i);
}
END_TEST

START_TEST(test_placement_and_best_fit)
{
        struct alloc *a = test_new(16 * MIB);
        uint64_t big, big2, small, h[7];
        int i;

        /* Large requests come from the top, small ones from the bottom. */
        big = test_reserve(a, 1 * MIB);
        small = test_reserve(a, 4 * KIB);
        big2 = test_reserve(a, 2 * MIB);
        ck_assert_uint_eq(big, 15 * MIB);
        ck_assert_uint_eq(small, 0);
        ck_assert_uint_eq(big2, 13 * MIB);

        /* Holes of 40, 33 and 36 KiB separated by live blocks. */
        h[0] = test_reserve(a, 40 * KIB);
        h[1] = test_reserve(a, 512);
        h[2] = test_reserve(a, 33 * KIB);
        h[3] = test_reserve(a, 512);
        h[4] = test_reserve(a, 36 * KIB);
        h[5] = test_reserve(a, 512);
        h[6] = test_reserve(a, 512);
        ck_assert_int_eq(alloc_release(a, h[0]), 0);
        ck_assert_int_eq(alloc_release(a, h[2]), 0);
        ck_assert_int_eq(alloc_release(a, h[4]), 0);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_uint_eq(test_reserve(a, 33 * KIB), h[2]);
        ck_assert_uint_eq(test_reserve(a, 34 * KIB), h[4]);
        ck_assert_uint_eq(test_reserve(a, 40 * KIB), h[0]);
        ck_assert_int_eq(alloc_verify(a), 0);

        for (i = 0; i < 7; i++)
                ck_assert_int_eq(alloc_release(a, h[i]), 0);
        ck_assert_int_eq(alloc_release(a, big), 0);
        ck_assert_int_eq(alloc_release(a, small), 0);
        ck_assert_int_eq(alloc_release(a, big2), 0);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

/* Sizes 128..131 granules share one second-level list; the tightest one must win. */
START_TEST(test_best_fit_in_list)
{
        struct alloc *a = test_new(16 * MIB);
        uint64_t h130, h131, h128, sep[3];

        h130 = test_reserve(a, 130 * ALLOC_GRANULE);
        sep[0] = test_reserve(a, 512);
        h131 = test_reserve(a, 131 * ALLOC_GRANULE);
        sep[1] = test_reserve(a, 512);
        h128 = test_reserve(a, 128 * ALLOC_GRANULE);
        sep[2] = test_reserve(a, 512);
        ck_assert_int_eq(alloc_release(a, h130), 0);
        ck_assert_int_eq(alloc_release(a, h131), 0);
        ck_assert_int_eq(alloc_release(a, h128), 0);
        ck_assert_uint_eq(test_reserve(a, 129 * ALLOC_GRANULE), h130);
        ck_assert_uint_eq(test_reserve(a, 129 * ALLOC_GRANULE), h131);
        ck_assert_uint_eq(test_reserve(a, 128 * ALLOC_GRANULE), h128);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_int_eq(alloc_release(a, h130), 0);
        ck_assert_int_eq(alloc_release(a, h131), 0);
        ck_assert_int_eq(alloc_release(a, h128), 0);
        ck_assert_int_eq(alloc_release(a, sep[0]), 0);
        ck_assert_int_eq(alloc_release(a, sep[1]), 0);
        ck_assert_int_eq(alloc_release(a, sep[2]), 0);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

/* A fitting block behind many too-small ones in the same list, and nothing larger
 * anywhere: the request must still succeed rather than report -ENOMEM. */
START_TEST(test_fit_deep_in_list)
{
        enum { SMALL = 20 };
        uint64_t cap = 65 * ALLOC_GRANULE + SMALL * 64 * ALLOC_GRANULE + (SMALL + 1) * 512;
        struct alloc *a = test_new(cap);
        uint64_t big, holes[SMALL], off = SENTINEL;
        int i;

        big = test_reserve(a, 65 * ALLOC_GRANULE);
        test_reserve(a, 512);
        for (i = 0; i < SMALL; i++) {
                holes[i] = test_reserve(a, 64 * ALLOC_GRANULE);
                test_reserve(a, 512);
        }
        ck_assert_uint_eq(test_stats(a).free_bytes, 0);
        ck_assert_int_eq(alloc_release(a, big), 0);
        for (i = 0; i < SMALL; i++)
                ck_assert_int_eq(alloc_release(a, holes[i]), 0);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_uint_eq(test_stats(a).largest_free, 65 * ALLOC_GRANULE);
        ck_assert_int_eq(alloc_reserve(a, 65 * ALLOC_GRANULE, &off), 0);
        ck_assert_uint_eq(off, big);
        ck_assert_int_eq(alloc_verify(a), 0);
        alloc_free(a);
}
END_TEST

START_TEST(test_64gib)
{
        struct alloc *a = test_new(64 * GIB);
        uint64_t offs[64], off = SENTINEL;
        struct alloc_stats st;
        int i, j;

        for (i = 0; i < 64; i++) {
                offs[i] = test_reserve(a, 1 * GIB);
                ck_assert_uint_eq(offs[i] % GIB, 0);
                for (j = 0; j < i; j++)
                        ck_assert_uint_ne(offs[i], offs[j]);
        }
        ck_assert_int_eq(alloc_reserve(a, 1, &off), -ENOMEM);
        st = test_stats(a);
        ck_assert_uint_eq(st.allocated, 64 * GIB);
        ck_assert_uint_eq(st.peak_allocated, 64 * GIB);
        ck_assert_int_eq(alloc_verify(a), 0);

        for (i = 0; i < 64; i += 2)
                ck_assert_int_eq(alloc_release(a, offs[i]), 0);
        st = test_stats(a);
        ck_assert_uint_eq(st.free_segments, 32);
        ck_assert_uint_eq(st.largest_free, 1 * GIB);
        ck_assert_uint_eq(st.free_bytes, 32 * GIB);
        ck_assert_int_eq(alloc_reserve(a, 1 * GIB + 1, &off), -ENOMEM);
        ck_assert_uint_eq(off, SENTINEL);
        ck_assert_int_eq(alloc_verify(a), 0);
        for (i = 1; i < 64; i += 2)
                ck_assert_int_eq(alloc_release(a, offs[i]), 0);
        test_assert_empty(a);

        offs[0] = test_reserve(a, 63 * GIB + 12345);
        offs[1] = test_reserve(a, 1 * GIB - 12800);
        ck_assert_int_eq(alloc_reserve(a, 1, &off), -ENOMEM);
        ck_assert_uint_eq(alloc_block_size(a, offs[0]), 63 * GIB + 12800);
        ck_assert_int_eq(alloc_verify(a), 0);
        ck_assert_int_eq(alloc_release(a, offs[0]), 0);
        ck_assert_int_eq(alloc_release(a, offs[1]), 0);
        test_assert_empty(a);
        alloc_free(a);
}
END_TEST

START_TEST(test_stats_consistency)
{
        struct alloc *a = test_new(8 * MIB);
        uint64_t x, y, z, off;
        struct alloc_stats st;

        x = test_reserve(a, 3 * MIB);      /* top: [5, 8) MiB */
        y = test_reserve(a, 100 * KIB);    /* bottom */
        z = test_reserve(a, 1);
        ck_assert_int_eq(alloc_reserve(a, 0, &off), -EINVAL);
        ck_assert_int_eq(alloc_reserve(a, 6 * MIB, &off), -ENOMEM);
        st = test_stats(a);
        ck_assert_uint_eq(st.capacity, 8 * MIB);
        ck_assert_uint_eq(st.allocated, 3 * MIB + 100 * KIB + 512);
        ck_assert_uint_eq(st.peak_allocated, st.allocated);
        ck_assert_uint_eq(st.live_blocks, 3);
        ck_assert_uint_eq(st.free_segments, 1);
        ck_assert_uint_eq(st.largest_free, 5 * MIB - 100 * KIB - 512);
        ck_assert_uint_eq(st.alloc_count, 3);
        ck_assert_uint_eq(st.fail_count, 2);

        ck_assert_int_eq(alloc_release(a, y), 0);
        st = test_stats(a);
        ck_assert_uint_eq(st.allocated, 3 * MIB + 512);
        ck_assert_uint_eq(st.peak_allocated, 3 * MIB + 100 * KIB + 512);
        ck_assert_uint_eq(st.free_segments, 2);
        ck_assert_uint_eq(st.largest_free, 5 * MIB - 100 * KIB - 512);
        ck_assert_uint_eq(st.live_blocks, 2);

        ck_assert_int_eq(alloc_release(a, x), 0);
        st = test_stats(a);
        ck_assert_uint_eq(st.largest_free, 8 * MIB - 100 * KIB - 512);
        ck_assert_uint_eq(st.free_segments, 2);
        ck_assert_int_eq(alloc_release(a, z), 0);
        test_assert_empty(a);
        st = test_stats(a);
        ck_assert_uint_eq(st.alloc_count, 3);
        ck_assert_uint_eq(st.fail_count, 2);
        alloc_free(a);
}
END_TEST

/* Randomized runs: a granule bitmap shadows the device range, so an overlapping block,
 * a wrong largest_free or a missed coalescing shows up at once. */
struct test_live {
        uint64_t off;
        uint64_t size;
};

struct test_shadow {
        uint64_t *bits;
        uint64_t words;
        uint64_t granules;
};

static void test_shadow_mark(struct test_shadow *s, uint64_t off, uint64_t size, bool set)
{
        uint64_t g = off / ALLOC_GRANULE, n = size / ALLOC_GRANULE, i, w, m;

        TEST_REQUIRE_CMP(g + n, <=, s->granules);
        for (i = g; i < g + n;) {
                w = i / 64;
                m = (n - (i - g) >= 64 - i % 64) ? ~0ull << (i % 64) :
                        ((1ull << (n - (i - g))) - 1) << (i % 64);
                if (set && (s->bits[w] & m))
                        ck_abort_msg("overlap at granule %llu", (unsigned long long)i);
                if (!set)
                        TEST_REQUIRE((s->bits[w] & m) == m);
                s->bits[w] ^= m;
                i += (uint64_t)__builtin_popcountll(m);
        }
}

static void test_shadow_runs(const struct test_shadow *s, uint64_t *longest, uint64_t *runs)
{
        uint64_t i, run = 0, w;

        *longest = *runs = 0;
        for (i = 0; i < s->granules;) {
                w = s->bits[i / 64];
                if (i % 64 == 0 && i + 64 <= s->granules && (w == 0 || w == ~0ull)) {
                        if (w == 0) {
                                if (run == 0)
                                        (*runs)++;
                                run += 64;
                        } else {
                                run = 0;
                        }
                        i += 64;
                } else {
                        if (!(w & (1ull << (i % 64)))) {
                                if (run == 0)
                                        (*runs)++;
                                run++;
                        } else {
                                run = 0;
                        }
                        i++;
                }
                if (run > *longest)
                        *longest = run;
        }
        *longest *= ALLOC_GRANULE;
}

static uint64_t test_random_size(uint64_t *seed, uint64_t cap)
{
        uint64_t r = test_rng_below(seed, 100);

        if (r < 55)
                return 1 + test_rng_below(seed, 8 * KIB);
        if (r < 80)
                return 1 + test_rng_below(seed, 256 * KIB);
        if (r < 90)
                return test_round(1 + test_rng_below(seed, 64 * KIB));
        if (r < 98)
                return 1 * MIB + test_rng_below(seed, cap / 8);
        return 1 + test_rng_below(seed, cap / 2);
}

static void test_random_check(const struct alloc *a, const struct test_shadow *s,
                              const struct test_live *live, uint64_t n, uint64_t bytes)
{
        struct alloc_stats st = test_stats(a);
        uint64_t longest, runs, i;

        TEST_REQUIRE_CMP(alloc_verify(a), ==, 0);
        TEST_REQUIRE_CMP(st.allocated, ==, bytes);
        TEST_REQUIRE_CMP(st.live_blocks, ==, n);
        test_shadow_runs(s, &longest, &runs);
        TEST_REQUIRE_CMP(st.largest_free, ==, longest);
        TEST_REQUIRE_CMP(st.free_segments, ==, runs);
        for (i = 0; i < n; i++)
                TEST_REQUIRE_CMP(alloc_block_size(a, live[i].off), ==, live[i].size);
}

START_TEST(test_random)
{
        enum { OPS = 20000, CHECK_EVERY = 500 };
        uint64_t seed = 0x5eed0000ull + (uint64_t)_i;
        uint64_t cap = (64 + test_rng_below(&seed, 128 * 1024 - 64)) * ALLOC_GRANULE;
        uint64_t req = cap + test_rng_below(&seed, ALLOC_GRANULE);
        struct alloc *a = test_new(req);
        struct test_shadow s;
        struct test_live *live;
        struct alloc_stats st;
        uint64_t n = 0, bytes = 0, op, size, off, i, peak = 0, okays = 0, fails = 0;
        unsigned p_alloc = 65;
        int rc;

        TEST_REQUIRE_CMP(test_stats(a).capacity, ==, cap);
        s.granules = cap / ALLOC_GRANULE;
        s.words = (s.granules + 63) / 64;
        s.bits = calloc(s.words, sizeof(*s.bits));
        live = calloc(s.granules, sizeof(*live));
        ck_assert_ptr_nonnull(s.bits);
        ck_assert_ptr_nonnull(live);

        for (op = 0; op < OPS; op++) {
                if (op % 2500 == 0)
                        p_alloc = 30 + (unsigned)test_rng_below(&seed, 50);
                if (n > 0 && test_rng_below(&seed, 100) >= p_alloc) {
                        i = test_rng_below(&seed, n);
                        TEST_REQUIRE_CMP(alloc_release(a, live[i].off), ==, 0);
                        test_shadow_mark(&s, live[i].off, live[i].size, false);
                        bytes -= live[i].size;
                        live[i] = live[--n];
                } else if (test_rng_below(&seed, 50) == 0) {
                        /* A granule-aligned offset that is not a live block's start. */
                        off = test_rng_below(&seed, s.granules + 16) * ALLOC_GRANULE;
                        for (i = 0; i < n && live[i].off != off; i++)
                                ;
                        if (i == n) {
                                TEST_REQUIRE_CMP(alloc_release(a, off), ==, -EINVAL);
                                TEST_REQUIRE_CMP(alloc_block_size(a, off), ==, 0);
                        }
                        if (n)
                                TEST_REQUIRE_CMP(alloc_release(a, live[0].off + 1), ==, -EINVAL);
                } else {
                        size = test_random_size(&seed, cap);
                        st = test_stats(a);
                        off = SENTINEL;
                        rc = alloc_reserve(a, size, &off);
                        if (size > cap) {
                                TEST_REQUIRE_CMP(rc, ==, -EINVAL);
                                TEST_REQUIRE_CMP(off, ==, SENTINEL);
                                continue;
                        }
                        if (rc == -ENOMEM) {
                                TEST_REQUIRE_CMP(st.largest_free, <, test_round(size));
                                TEST_REQUIRE_CMP(off, ==, SENTINEL);
                                fails++;
                                continue;
                        }
                        TEST_REQUIRE_CMP(rc, ==, 0);
                        TEST_REQUIRE_CMP(st.largest_free, >=, test_round(size));
                        TEST_REQUIRE_CMP(off % ALLOC_GRANULE, ==, 0);
                        size = test_round(size);
                        TEST_REQUIRE_CMP(size, <=, cap - off);
                        TEST_REQUIRE_CMP(alloc_block_size(a, off), ==, size);
                        test_shadow_mark(&s, off, size, true);
                        live[n].off = off;
                        live[n].size = size;
                        n++;
                        bytes += size;
                        if (bytes > peak)
                                peak = bytes;
                        okays++;
                }
                if (op % CHECK_EVERY == 0)
                        test_random_check(a, &s, live, n, bytes);
        }
        test_random_check(a, &s, live, n, bytes);
        st = test_stats(a);
        TEST_REQUIRE_CMP(st.peak_allocated, ==, peak);
        TEST_REQUIRE_CMP(st.alloc_count, ==, okays);
        TEST_REQUIRE_CMP(st.fail_count, >=, fails);

        while (n > 0) {
                i = test_rng_below(&seed, n);
                TEST_REQUIRE_CMP(alloc_release(a, live[i].off), ==, 0);
                test_shadow_mark(&s, live[i].off, live[i].size, false);
                live[i] = live[--n];
                if (n % 64 == 0)
                        TEST_REQUIRE_CMP(alloc_verify(a), ==, 0);
        }
        test_assert_empty(a);
        free(live);
        free(s.bits);
        alloc_free(a);
}
END_TEST

static int test_live_cmp(const void *x, const void *y)
{
        const struct test_live *p = x, *q = y;

        return p->off < q->off ? -1 : p->off > q->off;
}

/* Same idea at 64 GiB where a bitmap would be too big: overlap is checked by sorting. */
START_TEST(test_random_64gib)
{
        enum { OPS = 20000, MAX_LIVE = 4096 };
        uint64_t seed = 0xb16b00b5ull + (uint64_t)_i, cap = 64 * GIB;
        struct alloc *a = test_new(cap);
        struct test_live *live, *sorted;
        uint64_t n = 0, bytes = 0, op, size, off, i;
        int rc;

        live = calloc(MAX_LIVE, sizeof(*live));
        sorted = calloc(MAX_LIVE, sizeof(*sorted));
        ck_assert_ptr_nonnull(live);
        ck_assert_ptr_nonnull(sorted);
        for (op = 0; op < OPS; op++) {
                if (n > 0 && (n == MAX_LIVE || test_rng_below(&seed, 100) < 45)) {
                        i = test_rng_below(&seed, n);
                        TEST_REQUIRE_CMP(alloc_release(a, live[i].off), ==, 0);
                        TEST_REQUIRE_CMP(alloc_release(a, live[i].off), ==, -EINVAL);
                        bytes -= live[i].size;
                        live[i] = live[--n];
                } else {
                        size = test_rng_below(&seed, 4) ? 1 + test_rng_below(&seed, 16 * MIB) :
                                                          1 + test_rng_below(&seed, 2 * GIB);
                        rc = alloc_reserve(a, size, &off);
                        if (rc == -ENOMEM) {
                                TEST_REQUIRE_CMP(test_stats(a).largest_free, <, test_round(size));
                                continue;
                        }
                        TEST_REQUIRE_CMP(rc, ==, 0);
                        TEST_REQUIRE_CMP(off % ALLOC_GRANULE, ==, 0);
                        live[n].off = off;
                        live[n].size = test_round(size);
                        TEST_REQUIRE_CMP(live[n].size, <=, cap - off);
                        bytes += live[n++].size;
                }
                if (op % 1000 == 999) {
                        TEST_REQUIRE_CMP(alloc_verify(a), ==, 0);
                        TEST_REQUIRE_CMP(test_stats(a).allocated, ==, bytes);
                        memcpy(sorted, live, n * sizeof(*live));
                        qsort(sorted, n, sizeof(*sorted), test_live_cmp);
                        for (i = 1; i < n; i++)
                                TEST_REQUIRE_CMP(sorted[i - 1].off + sorted[i - 1].size, <=,
                                                 sorted[i].off);
                }
        }
        while (n > 0)
                TEST_REQUIRE_CMP(alloc_release(a, live[--n].off), ==, 0);
        test_assert_empty(a);
        free(sorted);
        free(live);
        alloc_free(a);
}
END_TEST

static Suite *test_alloc_suite(void)
{
        Suite *s = suite_create("alloc");
        TCase *tc;

        tc = tcase_create("api");
        tcase_add_test(tc, test_new_capacity);
        tcase_add_test(tc, test_basic);
        tcase_add_test(tc, test_alignment_rounding);
        tcase_add_test(tc, test_invalid_sizes);
        tcase_add_test(tc, test_huge_capacity_no_wrap);
        tcase_add_test(tc, test_exhaustion_recovery);
        tcase_add_test(tc, test_bad_release);
        tcase_add_test(tc, test_release_span);
        tcase_add_test(tc, test_clear_released);
        tcase_add_loop_test(tc, test_coalesce, 0, 4);
        tcase_add_test(tc, test_placement_and_best_fit);
        tcase_add_test(tc, test_best_fit_in_list);
        tcase_add_test(tc, test_fit_deep_in_list);
        tcase_add_test(tc, test_64gib);
        tcase_add_test(tc, test_stats_consistency);
        suite_add_tcase(s, tc);

        tc = tcase_create("random");
        tcase_set_timeout(tc, 30);
        tcase_add_loop_test(tc, test_random, 0, 50);
        tcase_add_loop_test(tc, test_random_64gib, 0, 4);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(test_alloc_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

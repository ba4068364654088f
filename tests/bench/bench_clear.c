/* Benchmark of clearing released device memory (mem_clear_released in daemon/exec/mem.c) over
 * the device-memory allocator, on a MAP_NORESERVE mapping like the simulator's HBM.
 *
 * For each size (4 KiB, 1 MiB, 64 MiB, 1 GiB) one cycle is: reserve a block, write every
 * byte of it (as a client filling its buffer would), release it. Three modes:
 *   none   — no clearing (npud before issue 9: the next tenant reads the old bytes);
 *   clear  — what npud does now: MADV_DONTNEED of the whole pages, zeros on shared pages;
 *   memset — zeros written over the whole block (the memory stays resident).
 * Per mode the median over the cycles of: reserve+release (allocator only), the clearing
 * itself, and the write of the next cycle (which pays the page faults that MADV_DONTNEED
 * brings), and their sum. A last set of figures clears blocks that were never written
 * (cost of MADV_DONTNEED over unpopulated memory), and the RSS after each mode's cycles.
 *
 * Output: one `name: value` line per figure; timings are printed, never checked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "daemon/exec/alloc.h"
#include "daemon/exec/mem.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define CAPACITY (4 * GIB)

enum mode { MODE_NONE, MODE_CLEAR, MODE_MEMSET, MODE_COUNT };
static const char *const mode_names[MODE_COUNT] = { "none", "clear", "memset" };

static double bench_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
        qsort(v, (size_t)n, sizeof(*v), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rss_kib(void)
{
        char line[256];
        uint64_t kib = 0;
        FILE *f = fopen("/proc/self/status", "r");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %lu", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

static void size_name(uint64_t size, char *buf, size_t len)
{
        if (size >= GIB)
                snprintf(buf, len, "%lluGiB", (unsigned long long)(size / GIB));
        else if (size >= MIB)
                snprintf(buf, len, "%lluMiB", (unsigned long long)(size / MIB));
        else
                snprintf(buf, len, "%lluKiB", (unsigned long long)(size / KIB));
}

/* A live 512-byte block on each side of the measured one, as in a used device: the block's
 * first and last pages are shared, so the clear takes both of its paths. */
static void run(uint8_t *base, uint64_t size, enum mode mode, int cycles, int touch)
{
        struct alloc *a;
        uint64_t lo, hi, off, fo, fs;
        double *t_alloc = calloc((size_t)cycles, sizeof(double));
        double *t_clear = calloc((size_t)cycles, sizeof(double));
        double *t_touch = calloc((size_t)cycles, sizeof(double));
        double *t_sum = calloc((size_t)cycles, sizeof(double));
        char name[32], sz[16];

        if (!t_alloc || !t_clear || !t_touch || !t_sum || alloc_new(CAPACITY, &a) < 0) {
                fprintf(stderr, "bench_clear: out of memory\n");
                exit(1);
        }
        /* lo puts the block 512 bytes into a page; hi, reserved right after the block when
         * it is small, shares its last page. Large blocks are cut from the top of the range,
         * page aligned. */
        if (alloc_reserve(a, 512, &lo) < 0 || alloc_reserve(a, size, &off) < 0 ||
            alloc_reserve(a, 512, &hi) < 0 || alloc_release(a, off) < 0) {
                fprintf(stderr, "bench_clear: reserve failed\n");
                exit(1);
        }
        for (int i = 0; i < cycles; i++) {
                double t0 = bench_now_ns(), t1, t2, t3, t4;
                if (alloc_reserve(a, size, &off) < 0) {
                        fprintf(stderr, "bench_clear: reserve of %llu failed\n", (unsigned long long)size);
                        exit(1);
                }
                t1 = bench_now_ns();
                if (touch)
                        memset(base + off, 0x5a ^ i, size);
                t2 = bench_now_ns();
                uint64_t block = alloc_block_size(a, off);
                alloc_release_span(a, off, &fo, &fs);
                t3 = bench_now_ns();
                if (mode == MODE_CLEAR)
                        mem_clear_released(base, off, block, fo, fs);
                else if (mode == MODE_MEMSET)
                        memset(base + off, 0, block);
                t4 = bench_now_ns();
                t_alloc[i] = (t1 - t0) + (t3 - t2);
                t_touch[i] = t2 - t1;
                t_clear[i] = t4 - t3;
                t_sum[i] = t4 - t0;
        }
        size_name(size, sz, sizeof(sz));
        snprintf(name, sizeof(name), "%s_%s%s", sz, mode_names[mode], touch ? "" : "_untouched");
        /* The first cycle writes pages never touched before in every mode: leave it out. */
        int n = cycles > 1 ? cycles - 1 : 1, s = cycles > 1;
        printf("%s_cycles: %d\n", name, n);
        printf("%s_alloc_free_ns: %.0f\n", name, median(t_alloc + s, n));
        printf("%s_clear_ns: %.0f\n", name, median(t_clear + s, n));
        if (touch) {
                printf("%s_write_ns: %.0f\n", name, median(t_touch + s, n));
                printf("%s_write_gb_per_s: %.2f\n", name, (double)size / median(t_touch + s, n));
        }
        printf("%s_cycle_ns: %.0f\n", name, median(t_sum + s, n));
        printf("%s_rss_after_kib: %lu\n", name, (unsigned long)rss_kib());
        /* leave the mapping clean for the next run */
        madvise(base, CAPACITY, MADV_DONTNEED);
        alloc_free(a);
        free(t_alloc);
        free(t_clear);
        free(t_touch);
        free(t_sum);
}

int main(void)
{
        static const uint64_t sizes[] = { 4 * KIB, 1 * MIB, 64 * MIB, 1 * GIB };
        static const int cycles[] = { 20001, 2001, 41, 9 };
        uint8_t *base = mmap(NULL, CAPACITY, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (base == MAP_FAILED) {
                perror("bench_clear: mmap");
                return 1;
        }
        printf("capacity_bytes: %llu\n", (unsigned long long)CAPACITY);
        printf("rss_start_kib: %lu\n", (unsigned long)rss_kib());
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                for (int m = 0; m < MODE_COUNT; m++)
                        run(base, sizes[i], (enum mode)m, cycles[i], 1);
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                run(base, sizes[i], MODE_CLEAR, cycles[i] > 2001 ? 2001 : cycles[i], 0);
        munmap(base, CAPACITY);
        return 0;
}

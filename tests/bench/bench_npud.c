/* npubench: end-to-end figures of npud through libnpu, each beside an in-process or raw
 * baseline measured in the same run, with the ratio and the target:
 *   1. null request round trip vs. a raw Unix-socket ping-pong (target ratio <= 1.3)
 *   2. tiny pipelined tasks with one synchronize at the end (target >= 1,000,000 tasks/s),
 *      and over the same 1 M launches npud's loop-thread CPU per launch (target <= 1.5 us)
 *      and its RSS before and after (flat: growth <= 2 MiB)
 *   3. 1024x1024 float32 MatMul on device-resident data vs. in-process OpenBLAS (>= 0.9)
 *   4. 256 MiB host->device->host through a host region vs. two memcpy (>= 0.5)
 * Starts its own npud (NPUD_BIN) unless --socket PATH names a running one; then --pid N names
 * that npud for the CPU and RSS figures (unavailable without it).
 * NPUBENCH_ONLY=ping|tiny|matmul|copy runs one section (for profiling), and NPUBENCH_ITERS=N
 * overrides the iteration count of the ping and tiny sections (a longer loop to attach to);
 * NPUBENCH_NOPIN=1 leaves the ping section unpinned (see pin_together). */
#include <cblas.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "npu.h"
#include "tests/integration/harness.h"

#define CHECK(call) \
        do { \
                npu_status_t st_ = (call); \
                if (st_ != NPU_OK) { \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_), npu_error_message()); \
                        exit(1); \
                } \
        } while (0)

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Raw ping-pong of a frame-sized message with a child process over a socketpair. */
static double raw_pingpong_us(int iters)
{
        int sv[2];
        char buf[64] = { 0 };
        pid_t child;

        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
                exit(1);
        child = fork();
        if (child == 0) {
                close(sv[0]);
                for (;;) {
                        if (read(sv[1], buf, 48) != 48 || write(sv[1], buf, 48) != 48)
                                _exit(0);
                }
        }
        close(sv[1]);
        double t0 = now_s();
        for (int i = 0; i < iters; i++)
                if (write(sv[0], buf, 48) != 48 || read(sv[0], buf, 48) != 48)
                        exit(1);
        double t = now_s() - t0;
        close(sv[0]);
        waitpid(child, NULL, 0);
        return t / iters * 1e6;
}

static double best_of(double a, double b)
{
        return a < b ? a : b;
}

static double thread_cpu_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time (utime + stime) of thread tid of process pid in seconds, -1 when unreadable. Another
 * process's thread CPU clock is not reachable through clock_getcpuclockid, so this reads
 * /proc, whose resolution is one clock tick (10 ms at 100 Hz): enough over 1 M launches. */
static double proc_thread_cpu_s(pid_t pid, pid_t tid)
{
        char path[96], buf[1024];
        unsigned long long ut, st;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
        if (!(f = fopen(path, "r")))
                return -1;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        /* The command name may hold spaces and parentheses: fields resume after the last ')'.
         * After it: state(3) ... utime(14) stime(15), i.e. the 12th and 13th fields. */
        char *p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                return -1;
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Pin this process (and so the raw ping-pong's child) and npud's loop thread to the CPU this
 * one runs on, saving both masks. A wakeup across CPUs costs tens of microseconds on a VM
 * (an IPI to a halted vCPU) and dominates both round trips whenever the scheduler happens to
 * place the peers apart: on one CPU both measure the software path alone. 0 or -1. */
static int pin_together(pid_t tid, cpu_set_t *self_old, cpu_set_t *tid_old)
{
        cpu_set_t one;
        int cpu = sched_getcpu();

        if (cpu < 0 || !tid || sched_getaffinity(0, sizeof(*self_old), self_old) < 0 ||
            sched_getaffinity(tid, sizeof(*tid_old), tid_old) < 0)
                return -1;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(tid, sizeof(one), &one) < 0)
                return -1;
        if (sched_setaffinity(0, sizeof(one), &one) < 0) {
                sched_setaffinity(tid, sizeof(*tid_old), tid_old);
                return -1;
        }
        return cpu;
}

static int section_on(const char *name)
{
        const char *only = getenv("NPUBENCH_ONLY");
        return !only || !*only || strcmp(only, name) == 0;
}

static int iters_or(int dflt)
{
        const char *v = getenv("NPUBENCH_ITERS");
        long n = v && *v ? strtol(v, NULL, 10) : 0;
        return n > 0 && n < 1000000000 ? (int)n : dflt;
}

int main(int argc, char **argv)
{
        struct npud_proc proc = { 0 };
        const char *sock = NULL;
        double ping_us = 0;
        npu_context_t *ctx;
        pid_t pid = 0;
        int own = 0;

        for (int i = 1; i < argc; i++) {
                if (i + 1 < argc && strcmp(argv[i], "--socket") == 0)
                        sock = argv[++i];
                else if (i + 1 < argc && strcmp(argv[i], "--pid") == 0)
                        pid = (pid_t)strtol(argv[++i], NULL, 10);
                else {
                        fprintf(stderr, "usage: npubench [--socket PATH [--pid N]]\n");
                        return 2;
                }
        }
        if (pid && !sock) {
                fprintf(stderr, "npubench: --pid goes with --socket\n");
                return 2;
        }
        if (!sock) {
                const char *extra[] = { "--sim-devices", "1", NULL };
                if (harness_start(&proc, extra) < 0) {
                        fprintf(stderr, "npubench: cannot start npud\n");
                        return 1;
                }
                sock = proc.sock;
                pid = proc.pid;
                own = 1;
        }
        CHECK(npu_connect(sock, &ctx));

        /* 1. null request round trip, on one CPU with npud's loop thread when allowed */
        if (section_on("ping")) {
                const int iters = iters_or(20000);
                cpu_set_t self_old, npud_old;
                int cpu = getenv("NPUBENCH_NOPIN") ? -1 : pin_together(pid, &self_old, &npud_old);
                char where[48];
                if (cpu >= 0)
                        snprintf(where, sizeof(where), "both on CPU %d", cpu);
                else
                        snprintf(where, sizeof(where), "unpinned");
                for (int i = 0; i < 1000; i++)
                        CHECK(npu_ping(ctx));
                double raw = 1e9, npud = 1e9;
                for (int rep = 0; rep < 3; rep++) {
                        raw = best_of(raw, raw_pingpong_us(iters));
                        double t0 = now_s();
                        for (int i = 0; i < iters; i++)
                                CHECK(npu_ping(ctx));
                        npud = best_of(npud, (now_s() - t0) / iters * 1e6);
                }
                if (cpu >= 0) {
                        sched_setaffinity(pid, sizeof(npud_old), &npud_old);
                        sched_setaffinity(0, sizeof(self_old), &self_old);
                }
                printf("null round trip (%s): npud %.2f us, raw socket ping-pong %.2f us, ratio %.2f "
                       "(target <= 1.3)%s\n", where, npud, raw, npud / raw, npud / raw <= 1.3 ? "" : " MISSED");
                ping_us = npud;
        }

        /* 2. tiny pipelined tasks; npud's loop-thread CPU and RSS over the same launches. The
         * loop is npud's main thread (tid == pid). A warm-up first, long enough for the session's
         * queue to reach its limit (limits.max_queued_tasks, 16384 tasks of several KiB each):
         * memory that takes is first-touch, printed apart, and not growth over the 1 M. */
        if (section_on("tiny")) {
                const int warm = 100000, tasks = iters_or(1000000);
                npu_buffer_t a, b;
                npu_stream_t s;
                float zero = 0, one = 1, acc = 0;
                CHECK(npu_malloc(ctx, 0, 4, &a));
                CHECK(npu_malloc(ctx, 0, 4, &b));
                CHECK(npu_memcpy_to_device(ctx, a, 0, &zero, 4));
                CHECK(npu_memcpy_to_device(ctx, b, 0, &one, 4));
                CHECK(npu_stream_create(ctx, 0, 4, &s));
                npu_tensor_t ta = { .buf = a, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
                npu_tensor_t tb = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
                npu_tensor_t in[2] = { ta, tb };
                long rss_start = pid ? harness_proc_kib(pid, "VmRSS") : -1;
                for (int i = 0; i < warm; i++)
                        CHECK(npu_launch(ctx, s, "Add", in, 2, &ta, 1, NULL, 0, NULL));
                CHECK(npu_stream_synchronize(ctx, s));
                long rss0 = pid ? harness_proc_kib(pid, "VmRSS") : -1;
                double cpu0 = pid ? proc_thread_cpu_s(pid, pid) : -1;
                double ccpu0 = thread_cpu_s();
                double t0 = now_s();
                for (int i = 0; i < tasks; i++)
                        CHECK(npu_launch(ctx, s, "Add", in, 2, &ta, 1, NULL, 0, NULL));
                CHECK(npu_stream_synchronize(ctx, s));
                double t = now_s() - t0;
                double ccpu = thread_cpu_s() - ccpu0;
                double cpu1 = pid ? proc_thread_cpu_s(pid, pid) : -1;
                long rss1 = pid ? harness_proc_kib(pid, "VmRSS") : -1;
                CHECK(npu_memcpy_from_device(ctx, &acc, a, 0, 4));
                int right = acc == (float)(warm + tasks);
                double rate = tasks / t;
                if (ping_us > 0)
                        printf("pipelined tiny tasks: %d Add launches + 1 synchronize in %.3f s = %.0f tasks/s, "
                               "baseline unpipelined round trips %.0f/s, ratio %.2f of target (target >= 1000000)%s%s\n",
                               tasks, t, rate, 1e6 / ping_us, rate / 1e6, rate >= 1e6 ? "" : " MISSED",
                               right ? "" : " WRONG RESULT");
                else
                        printf("pipelined tiny tasks: %d Add launches + 1 synchronize in %.3f s = %.0f tasks/s, "
                               "ratio %.2f of target (target >= 1000000)%s%s\n", tasks, t, rate, rate / 1e6,
                               rate >= 1e6 ? "" : " MISSED", right ? "" : " WRONG RESULT");
                if (cpu0 >= 0 && cpu1 >= 0) {
                        double us = (cpu1 - cpu0) / tasks * 1e6;
                        printf("npud loop CPU per Add launch: %.3f us over %d launches (%.2f s of %.2f s wall, "
                               "tick %ld Hz), baseline client thread %.3f us per launch, ratio %.2f of target "
                               "(target <= 1.5 us)%s\n", us, tasks, cpu1 - cpu0, t, sysconf(_SC_CLK_TCK),
                               ccpu / tasks * 1e6, us / 1.5, us <= 1.5 ? "" : " MISSED");
                } else
                        printf("npud loop CPU per Add launch: unavailable (no npud pid: give --pid N), "
                               "baseline client thread %.3f us per launch (target <= 1.5 us)\n",
                               ccpu / tasks * 1e6);
                if (rss0 >= 0 && rss1 >= 0)
                        printf("npud RSS over %d launches: before %ld KiB, after %ld KiB, growth %+ld KiB "
                               "(warm-up of %d from %ld KiB: %+ld KiB), ratio %.2f of limit (target growth "
                               "<= 2048 KiB)%s\n", tasks, rss0, rss1, rss1 - rss0, warm, rss_start,
                               rss0 - rss_start, (double)(rss1 - rss0) / 2048, rss1 - rss0 <= 2048 ? "" : " GREW");
                else
                        printf("npud RSS over %d launches: unavailable (no npud pid: give --pid N) "
                               "(target growth <= 2048 KiB)\n", tasks);
                CHECK(npu_stream_destroy(ctx, s));
                CHECK(npu_free(ctx, a));
                CHECK(npu_free(ctx, b));
        }

        /* 3. 1024^2 MatMul, device-resident */
        if (section_on("matmul")) {
                const int n = 1024, reps = 10;
                size_t bytes = (size_t)n * n * sizeof(float);
                float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
                npu_buffer_t a, b, c;
                npu_stream_t s;
                for (int i = 0; i < n * n; i++) {
                        ha[i] = (float)(i % 13) * 0.01f;
                        hb[i] = (float)(i % 7) * 0.02f;
                }
                CHECK(npu_malloc(ctx, 0, bytes, &a));
                CHECK(npu_malloc(ctx, 0, bytes, &b));
                CHECK(npu_malloc(ctx, 0, bytes, &c));
                CHECK(npu_memcpy_to_device(ctx, a, 0, ha, bytes));
                CHECK(npu_memcpy_to_device(ctx, b, 0, hb, bytes));
                CHECK(npu_stream_create(ctx, 0, 0, &s));
                npu_tensor_t in[2] = { { .buf = a, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } },
                                       { .buf = b, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } } };
                npu_tensor_t out = { .buf = c, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } };
                double dev = 1e9, host = 1e9;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ha, n, hb, n, 0.0f, hc, n);
                CHECK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
                CHECK(npu_stream_synchronize(ctx, s));
                for (int rep = 0; rep < 3; rep++) {
                        double t0 = now_s();
                        for (int i = 0; i < reps; i++)
                                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ha, n,
                                            hb, n, 0.0f, hc, n);
                        host = best_of(host, (now_s() - t0) / reps);
                        t0 = now_s();
                        for (int i = 0; i < reps; i++)
                                CHECK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
                        CHECK(npu_stream_synchronize(ctx, s));
                        dev = best_of(dev, (now_s() - t0) / reps);
                }
                printf("MatMul 1024x1024 f32: npud %.2f ms, in-process OpenBLAS %.2f ms, ratio %.2f (target >= 0.9)\n",
                       dev * 1e3, host * 1e3, host / dev);
                CHECK(npu_free(ctx, a));
                CHECK(npu_free(ctx, b));
                CHECK(npu_free(ctx, c));
                free(ha);
                free(hb);
                free(hc);
        }

        /* 4. 256 MiB host -> device -> host through a host region */
        if (section_on("copy")) {
                const uint64_t size = 256ull << 20;
                char *src, *dst = malloc(size), *mid = malloc(size);
                npu_region_t r;
                npu_buffer_t d;
                npu_stream_t s;
                CHECK(npu_host_alloc(ctx, 2 * size, (void **)&src, &r));
                CHECK(npu_malloc(ctx, 0, size, &d));
                CHECK(npu_stream_create(ctx, 0, 0, &s));
                memset(src, 7, size);
                memset(dst, 1, size);
                memset(mid, 1, size);
                double dev = 1e9, host = 1e9;
                for (int rep = 0; rep < 3; rep++) {
                        double t0 = now_s();
                        memcpy(mid, src, size);
                        memcpy(dst, mid, size);
                        host = best_of(host, now_s() - t0);
                        t0 = now_s();
                        CHECK(npu_memcpy_h2d_async(ctx, s, d, 0, r, 0, size, NULL));
                        CHECK(npu_memcpy_d2h_async(ctx, s, r, size, d, 0, size, NULL));
                        CHECK(npu_stream_synchronize(ctx, s));
                        dev = best_of(dev, now_s() - t0);
                }
                int ok = memcmp(src, src + size, size) == 0;
                printf("256 MiB H2D+D2H via host region: npud %.1f ms (%.2f GB/s), two memcpy %.1f ms, "
                       "ratio %.2f (target >= 0.5)%s\n", dev * 1e3, 2.0 * size / dev / 1e9, host * 1e3,
                       host / dev, ok ? "" : " WRONG RESULT");
                CHECK(npu_host_free(ctx, r));
                CHECK(npu_free(ctx, d));
                free(dst);
                free(mid);
        }
        npu_disconnect(ctx);
        if (own && harness_stop(&proc) != 0) {
                fprintf(stderr, "npubench: npud did not exit cleanly\n");
                return 1;
        }
        return 0;
}

/* What handing a request to another thread costs on this host, the floor under npubench's
 * isolation figures.
 *
 * A latency-critical request to npud is one hand-off each way: the client's message wakes
 * the loop thread (SCHED_FIFO), which answers a client that spins for the reply (libnpu's
 * latency-critical wait). Where the two threads sit, and whether the loop thread's CPU is
 * idle or busy with best-effort work (npud's background workers run at SCHED_IDLE), decides
 * what the wake-up costs: on a CPU that idles in its polling loop (npud holds a PM QoS
 * request of 0 us while latency-critical work is about, cpulat.c) the wake-up needs no
 * interrupt; on a busy one it is an inter-processor interrupt, which on a virtual machine
 * without posted interrupts goes through the hypervisor; on the client's own CPU it is a
 * context switch. This bench measures the four cases with a one-byte ping-pong over a Unix
 * socket pair, one request every 2 ms (the isolation section's cadence), the replying thread
 * at SCHED_FIFO 1 and the PM QoS request held where this user may, and prints each case's
 * p50 and p99 and the ratios that matter: a busy CPU's wake-up against an idle one's (what
 * a best-effort load adds to a request sent across CPUs), and across CPUs against on the
 * same CPU, both busy.
 *
 * NPUD_BENCH_WAKEUP_N: requests per case (default 1500). Needs two CPUs; prints why it skips
 * otherwise. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static atomic_int spin_stop;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int pin(int cpu)
{
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

struct server {
        int fd, cpu, fifo;
};

static void *server_main(void *arg)
{
        struct server *sv = arg;
        struct sched_param p = { .sched_priority = 1 };
        char b;

        pin(sv->cpu);
        sv->fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
        while (read(sv->fd, &b, 1) == 1)
                if (write(sv->fd, &b, 1) != 1)
                        break;
        return NULL;
}

/* A best-effort stand-in: SCHED_IDLE, busy on its CPU until told to stop. */
static void *spinner_main(void *arg)
{
        struct sched_param p = { 0 };
        volatile uint64_t x = 0;

        pin((int)(intptr_t)arg);
        sched_setscheduler(0, SCHED_IDLE, &p);
        while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
                x++;
        return NULL;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

struct result {
        double p50, p99;
        int fifo;
};

/* n requests 2 ms apart from a client on CPU 0 to a server on CPU srv_cpu; spinners on
 * CPUs 0 and 1 when busy. -1 when a thread cannot be started or the socket fails. */
static int run_case(int srv_cpu, int busy, int n, struct result *r)
{
        int sv[2];
        pthread_t srv, spin[2];
        struct server s;
        double *lat = malloc(sizeof(double) * (size_t)n);
        char b = 'x', rb;

        if (!lat || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
                free(lat);
                return -1;
        }
        s.fd = sv[1];
        s.cpu = srv_cpu;
        s.fifo = 0;
        atomic_store(&spin_stop, 0);
        if (pthread_create(&srv, NULL, server_main, &s) != 0) {
                free(lat);
                return -1;
        }
        int spinners = 0, done = 0;
        while (busy && spinners < 2 &&
               pthread_create(&spin[spinners], NULL, spinner_main, (void *)(intptr_t)spinners) == 0)
                spinners++;
        pin(0);
        fcntl(sv[0], F_SETFL, O_NONBLOCK);
        for (int i = 0; i < n + 50 && (!busy || spinners == 2); i++) {
                usleep(2000);
                double t0 = now_s();
                if (write(sv[0], &b, 1) != 1)
                        break;
                while (read(sv[0], &rb, 1) != 1) /* spin for the reply, as libnpu's LC wait */
                        ;
                if (i >= 50) /* the first ones warm up */
                        lat[done++] = now_s() - t0;
        }
        shutdown(sv[0], SHUT_RDWR);
        pthread_join(srv, NULL);
        atomic_store(&spin_stop, 1);
        for (int i = 0; i < spinners; i++)
                pthread_join(spin[i], NULL);
        close(sv[0]);
        close(sv[1]);
        if (done < n) { /* a spinner did not start, or the socket failed */
                free(lat);
                return -1;
        }
        qsort(lat, (size_t)n, sizeof(double), cmp_double);
        r->p50 = lat[n / 2] * 1e6;
        r->p99 = lat[n * 99 / 100] * 1e6;
        r->fifo = s.fifo;
        free(lat);
        return 0;
}

int main(void)
{
        const char *v = getenv("NPUD_BENCH_WAKEUP_N");
        int n = v && atoi(v) >= 100 ? atoi(v) : 1500;
        struct result r[4];
        static const char *const name[4] = { "idle CPUs, reply thread on the client's CPU",
                                             "idle CPUs, reply thread on the other CPU",
                                             "busy CPUs (SCHED_IDLE spinners), same CPU",
                                             "busy CPUs (SCHED_IDLE spinners), other CPU" };
        cpu_set_t set;

        if (sched_getaffinity(0, sizeof(set), &set) < 0 || !CPU_ISSET(0, &set) || !CPU_ISSET(1, &set)) {
                printf("wakeup: skipped: needs CPUs 0 and 1 in this process's affinity\n");
                return 0;
        }
        /* as npud while latency-critical work is about: idle CPUs poll (cpulat.c) */
        int qos = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
        int32_t zero = 0;
        int qos_held = qos >= 0 && write(qos, &zero, sizeof(zero)) == (ssize_t)sizeof(zero);

        for (int c = 0; c < 4; c++)
                if (run_case(c & 1, c >= 2, n, &r[c]) < 0) {
                        fprintf(stderr, "wakeup: cannot start the bench's threads or use its socket pair\n");
                        return 1;
                }
        printf("wakeup: one-byte request and reply over a Unix socket pair, %d requests 2 ms apart a "
               "case, client on CPU 0 spinning for the reply, reply thread %s, PM QoS 0 us %s\n",
               n, r[0].fifo ? "at SCHED_FIFO 1" : "at normal priority (SCHED_FIFO refused)",
               qos_held ? "held" : "not held (no permission)");
        for (int c = 0; c < 4; c++)
                printf("wakeup: %-44s p50 %6.1f us  p99 %6.1f us\n", name[c], r[c].p50, r[c].p99);
        printf("wakeup: other CPU, busy against idle: p50 %.2fx, p99 %.2fx (what a best-effort load adds "
               "to a hand-off across CPUs)\n",
               r[3].p50 / r[1].p50, r[3].p99 / r[1].p99);
        printf("wakeup: busy CPUs, other CPU against the client's own: p50 %.2fx, p99 %.2fx\n",
               r[3].p50 / r[2].p50, r[3].p99 / r[2].p99);
        if (qos >= 0)
                close(qos);
        return 0;
}

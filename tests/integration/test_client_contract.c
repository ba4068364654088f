/* The client contract of libnpu (issue 12): an error is reported to the stream (and the task)
 * that caused it and to no other, and a stream's error is never consumed by a synchronize of
 * something else; a socket the caller may not open is reported as permission denied, by
 * libnpu (NPU_ERR_PERMISSION naming the path) and by npuctl (exit 4); the devices a container
 * is given through CDI (NPU_VISIBLE_DEVICE_<N>) bound its streams, placement included. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "npu.h"
#include "harness.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx;

static void setup(void)
{
        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0);
        ck_assert_int_eq(npu_connect(daemon_proc.sock, &ctx), NPU_OK);
}

static void teardown(void)
{
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

static npu_tensor_t tensor1(npu_buffer_t b, int64_t n)
{
        npu_tensor_t t = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 1 };
        t.dims[0] = n;
        return t;
}

/* A launch on a destroyed stream fails only the session-wide synchronize, never the
 * synchronize of another (healthy) stream or of an event recorded on it. */
START_TEST(test_destroyed_stream_error_stays_out_of_other_streams)
{
        npu_buffer_t a, b;
        npu_stream_t dead, s;
        npu_event_t ev;
        uint64_t task = 0;

        OK(npu_malloc(ctx, 0, 64, &a));
        OK(npu_malloc(ctx, 0, 64, &b));
        OK(npu_memset(ctx, a, 0, 0, 64));
        OK(npu_stream_create(ctx, 0, 2, &dead));
        OK(npu_stream_create(ctx, 0, 2, &s));
        OK(npu_event_create(ctx, &ev));
        OK(npu_stream_destroy(ctx, dead));
        npu_tensor_t ta = tensor1(a, 4), tb = tensor1(b, 4);
        OK(npu_launch(ctx, dead, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tb, 1, NULL, 0, &task));
        OK(npu_launch(ctx, s, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tb, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_event_record(ctx, ev, s));
        OK(npu_event_synchronize(ctx, ev));
        OK(npu_memcpy_device(ctx, b, 0, a, 0, 64)); /* the library's own stream */
        ck_assert_int_eq(npu_synchronize(ctx), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_msg(strstr(npu_error_message(), "destroyed"), "message: %s", npu_error_message());
        OK(npu_synchronize(ctx)); /* reported once */
        OK(npu_stream_synchronize(ctx, s));
}
END_TEST

/* npu_synchronize reports a stream's error but does not consume it: the stream's own
 * synchronize still fails with it (and clears it); other streams never see it. */
START_TEST(test_stream_error_not_consumed_by_synchronize)
{
        npu_buffer_t a;
        npu_stream_t bad, good;
        uint64_t task = 0, later = 0;

        OK(npu_malloc(ctx, 0, 64, &a));
        OK(npu_stream_create(ctx, 0, 2, &bad));
        OK(npu_stream_create(ctx, 0, 2, &good));
        OK(npu_memset_async(ctx, bad, a, 32, 1, 64, &task)); /* out of range */
        OK(npu_memset_async(ctx, good, a, 0, 2, 64, NULL));
        OK(npu_stream_synchronize(ctx, good));
        ck_assert_int_eq(npu_synchronize(ctx), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* still held by its stream: the work queued behind it is cancelled, and reported */
        OK(npu_memset_async(ctx, bad, a, 0, 3, 64, &later));
        ck_assert_int_eq(npu_synchronize(ctx), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_stream_synchronize(ctx, good));
        ck_assert_int_eq(npu_stream_synchronize(ctx, bad), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* acknowledged: the stream runs again */
        uint8_t back[64];
        OK(npu_memcpy_from_device(ctx, back, a, 0, sizeof(back)));
        for (size_t i = 0; i < sizeof(back); i++)
                ck_assert_uint_eq(back[i], 2); /* the memset queued behind the error did not run */
        OK(npu_memset_async(ctx, bad, a, 0, 4, 64, NULL));
        OK(npu_stream_synchronize(ctx, bad));
        OK(npu_synchronize(ctx));
        OK(npu_memcpy_from_device(ctx, back, a, 0, sizeof(back)));
        ck_assert_uint_eq(back[63], 4);
}
END_TEST

/* Threads sharing a context: each owns a stream and alternates failing and healthy rounds
 * while another thread keeps calling npu_synchronize. Every failing round must fail with the
 * thread's own task; every healthy round must succeed. */
enum { ROUNDS = 150 };

struct owner {
        int index;
        npu_buffer_t buf;
        int failures;
        char why[256];
};

static volatile int stop_sync;

static void *owner_main(void *arg)
{
        struct owner *o = arg;
        npu_stream_t s;

        if (npu_stream_create(ctx, 0, 2, &s) != NPU_OK) {
                o->failures++;
                snprintf(o->why, sizeof(o->why), "stream_create: %s", npu_error_message());
                return NULL;
        }
        for (int r = 0; r < ROUNDS && !o->failures; r++) {
                uint64_t task = 0;
                int bad = r % 2 == 0;
                npu_status_t st;

                npu_memset_async(ctx, s, o->buf, 0, r, 64, NULL);
                npu_memset_async(ctx, s, o->buf, bad ? 60 : 0, r, 64, &task);
                npu_memset_async(ctx, s, o->buf, 0, r, 64, NULL);
                npu_flush(ctx);
                usleep(300); /* other work of the server thread: the syncer runs meanwhile */
                st = npu_stream_synchronize(ctx, s);
                if (bad && (st != NPU_ERR_OUT_OF_RANGE || npu_error_task() != task)) {
                        o->failures++;
                        snprintf(o->why, sizeof(o->why),
                                 "round %d: own error lost: status %d task %llu (expected task %llu): %s",
                                 r, st, (unsigned long long)npu_error_task(),
                                 (unsigned long long)task, npu_error_message());
                } else if (!bad && st != NPU_OK) {
                        o->failures++;
                        snprintf(o->why, sizeof(o->why), "round %d: healthy stream failed: %s", r,
                                 npu_error_message());
                }
        }
        npu_stream_destroy(ctx, s);
        return NULL;
}

static void *sync_main(void *arg)
{
        (void)arg;
        while (!stop_sync)
                npu_synchronize(ctx);
        return NULL;
}

START_TEST(test_threads_own_their_errors)
{
        struct owner o[3];
        pthread_t th[3], syncer;

        stop_sync = 0;
        for (int i = 0; i < 3; i++) {
                o[i] = (struct owner){ .index = i };
                OK(npu_malloc(ctx, 0, 64, &o[i].buf));
        }
        ck_assert_int_eq(pthread_create(&syncer, NULL, sync_main, NULL), 0);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, owner_main, &o[i]), 0);
        for (int i = 0; i < 3; i++)
                pthread_join(th[i], NULL);
        stop_sync = 1;
        pthread_join(syncer, NULL);
        for (int i = 0; i < 3; i++)
                ck_assert_msg(o[i].failures == 0, "thread %d: %s", i, o[i].why);
}
END_TEST

/* ---- many waiters on one context ----
 *
 * More threads wait on one context at once than libnpu queues wakes for while it holds the
 * context's lock (NPU_WAKE_QUEUE, 16: the rest are woken at once): each thread fills its own
 * buffer with its own byte on its own stream, synchronizes and reads the buffer back, many
 * times. A wake left behind hangs the test (its timeout fails it); a reply given to the
 * wrong waiter shows as another thread's byte. */
#define MANY_WAITERS 24
#define MANY_ROUNDS 60

struct waiter {
        int index, failures;
        char why[256];
};

static void *waiter_main(void *arg)
{
        struct waiter *w = arg;
        npu_buffer_t b;
        npu_stream_t s;
        unsigned char got[256];

        if (npu_malloc(ctx, 0, sizeof(got), &b) != NPU_OK || npu_stream_create(ctx, 0, 0, &s) != NPU_OK) {
                w->failures++;
                snprintf(w->why, sizeof(w->why), "setup: %s", npu_error_message());
                return NULL;
        }
        for (int r = 0; r < MANY_ROUNDS && !w->failures; r++) {
                int v = (w->index * 7 + r) & 0xff;
                if (npu_memset_async(ctx, s, b, 0, v, sizeof(got), NULL) != NPU_OK ||
                    npu_stream_synchronize(ctx, s) != NPU_OK ||
                    npu_memcpy_from_device(ctx, got, b, 0, sizeof(got)) != NPU_OK) {
                        w->failures++;
                        snprintf(w->why, sizeof(w->why), "round %d: %s", r, npu_error_message());
                        break;
                }
                for (size_t i = 0; i < sizeof(got); i++)
                        if (got[i] != v) {
                                w->failures++;
                                snprintf(w->why, sizeof(w->why), "round %d: byte %zu is %d, not %d", r, i,
                                         got[i], v);
                                break;
                        }
        }
        npu_stream_destroy(ctx, s);
        npu_free(ctx, b);
        return NULL;
}

START_TEST(test_many_waiters_on_one_context)
{
        struct waiter w[MANY_WAITERS];
        pthread_t th[MANY_WAITERS];

        for (int i = 0; i < MANY_WAITERS; i++) {
                w[i] = (struct waiter){ .index = i };
                ck_assert_int_eq(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
        }
        for (int i = 0; i < MANY_WAITERS; i++)
                pthread_join(th[i], NULL);
        for (int i = 0; i < MANY_WAITERS; i++)
                ck_assert_msg(w[i].failures == 0, "thread %d: %s", i, w[i].why);
        OK(npu_ping(ctx)); /* the context still answers */
}
END_TEST

/* ---- a socket the caller may not open ---- */

static uid_t attacker_uid;
static gid_t attacker_gid;

static int connect_denied(void *arg)
{
        npu_context_t *c = NULL;
        npu_status_t st = npu_connect(arg, &c);

        if (st != NPU_ERR_PERMISSION) {
                fprintf(stderr, "npu_connect as the unprivileged user: status %d, %s\n", st,
                        npu_error_message());
                npu_disconnect(c);
                return 1;
        }
        if (!strstr(npu_error_message(), arg)) {
                fprintf(stderr, "message does not name the socket: %s\n", npu_error_message());
                return 1;
        }
        return 0;
}

static int npuctl_denied(void *arg)
{
        const char *bin = getenv("NPUD_BIN") ? getenv("NPUD_BIN") : "build/bin/npud";
        char npuctl[512], err[512] = "";
        size_t n = strlen(bin);
        int fds[2], status = 0;
        pid_t pid;

        if (n < 4 || strcmp(bin + n - 4, "npud") != 0 || pipe(fds) < 0)
                return 1;
        snprintf(npuctl, sizeof(npuctl), "%.*snpuctl", (int)(n - 4), bin);
        pid = fork();
        if (pid == 0) {
                dup2(fds[1], 2);
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                execl(npuctl, "npuctl", "--socket", (const char *)arg, "devices", (char *)NULL);
                _exit(127);
        }
        close(fds[1]);
        ssize_t got = read(fds[0], err, sizeof(err) - 1);
        err[got > 0 ? got : 0] = 0;
        close(fds[0]);
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 4 || !strstr(err, "ermission denied") || !strstr(err, arg)) {
                fprintf(stderr, "npuctl as the unprivileged user: status %d, stderr: %s\n",
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
                return 1;
        }
        return 0;
}

START_TEST(test_socket_permission_denied)
{
        if (harness_attacker(&attacker_uid, &attacker_gid) < 0) {
                fprintf(stderr, "test_socket_permission_denied: no unprivileged user, skipped\n");
                return;
        }
        /* the directory may be searched, the socket is root's alone */
        ck_assert_int_eq(chmod(daemon_proc.dir, 0711), 0);
        ck_assert_int_eq(chmod(daemon_proc.sock, 0600), 0);
        ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, connect_denied, daemon_proc.sock), 0);
        ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, npuctl_denied, daemon_proc.sock), 0);
        /* the owner still gets in */
        OK(npu_ping(ctx));
}
END_TEST

/* NPU_VISIBLE_DEVICE_1 as a CDI spec sets it: placement picks device 1 whatever the load,
 * device 0 is refused naming the session's devices, and NPU_VISIBLE_DEVICE_ALL lifts it. */
START_TEST(test_visible_devices)
{
        npu_context_t *c1;
        npu_stream_t s;
        int dev = -1;

        setenv("NPU_VISIBLE_DEVICE_1", "1", 1);
        OK(npu_connect(daemon_proc.sock, &c1));
        for (int i = 0; i < 4; i++) {
                OK(npu_stream_create(c1, NPU_DEVICE_ANY, 2, &s));
                OK(npu_stream_device(c1, s, &dev));
                ck_assert_int_eq(dev, 1);
        }
        ck_assert_int_eq(npu_stream_create(c1, 0, 2, &s), NPU_ERR_PERMISSION);
        ck_assert_msg(strstr(npu_error_message(), "asked for device 1 only") &&
                      strstr(npu_error_message(), "not device 0"), "%s", npu_error_message());
        npu_disconnect(c1);
        setenv("NPU_VISIBLE_DEVICE_ALL", "1", 1);
        OK(npu_connect(daemon_proc.sock, &c1));
        OK(npu_stream_create(c1, 0, 2, &s));
        npu_disconnect(c1);
        unsetenv("NPU_VISIBLE_DEVICE_ALL");
        setenv("NPU_VISIBLE_DEVICE_X", "1", 1);
        ck_assert_int_eq(npu_connect(daemon_proc.sock, &c1), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "NPU_VISIBLE_DEVICE_X"), "%s", npu_error_message());
        unsetenv("NPU_VISIBLE_DEVICE_X");
        unsetenv("NPU_VISIBLE_DEVICE_1");
}
END_TEST

/* ---- a client waiting for its reply sleeps once ----
 *
 * A scripted peer stands in for npud: it reads each request only once the client has gone
 * to sleep waiting for the reply, and answers a few milliseconds later. A client that waited
 * in a blocking recvmsg was woken by that read too (the socket's write space), went back to
 * sleep, and cost npud's loop thread an interrupt to its CPU on every request; waiting in poll
 * for POLLIN, it wakes for the reply only. */
#define SLEEP_ONCE_CALLS 20

struct scripted_peer {
        int listen_fd;
        int ok;
        const char *klass; /* the tenant class its hello reply names; NULL: none */
};

static void nap_ms(int ms)
{
        struct timespec ts = { 0, (long)ms * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int peer_reply(int fd, uint64_t id, const char *json)
{
        return harness_raw_send(fd, 2 /* PROTO_KIND_REPLY */, id, json, strlen(json), NULL, 0);
}

static void *scripted_peer_main(void *arg)
{
        struct scripted_peer *p = arg;
        int fd = accept(p->listen_fd, NULL, NULL), kind = 0;
        uint64_t id = 0;
        json_t *req;

        if (fd < 0)
                return NULL;
        char hello[160];
        snprintf(hello, sizeof(hello), "{\"result\":{\"version\":2,\"devices\":1,\"tenant\":\"t\"%s%s%s}}",
                 p->klass ? ",\"class\":\"" : "", p->klass ? p->klass : "", p->klass ? "\"" : "");
        req = harness_raw_recv(fd, &kind, &id); /* hello */
        if (!req || peer_reply(fd, id, hello) < 0)
                goto out;
        json_decref(req);
        for (int i = 0; i < SLEEP_ONCE_CALLS; i++) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, 5000) != 1)
                        goto out_no_req;
                nap_ms(3); /* the client is asleep by now */
                req = harness_raw_recv(fd, &kind, &id);
                if (!req)
                        goto out_no_req;
                json_decref(req);
                nap_ms(3);
                if (peer_reply(fd, id, "{\"result\":{}}") < 0)
                        goto out_no_req;
        }
        p->ok = 1;
        goto out_no_req;
out:
        json_decref(req);
out_no_req:
        close(fd);
        return NULL;
}

static long voluntary_switches(void)
{
        char line[256];
        long v = -1;
        FILE *f = fopen("/proc/thread-self/status", "r");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
                        break;
        fclose(f);
        return v;
}

/* SLEEP_ONCE_CALLS calls on a context connected with wait_spin_us (the peer's hello naming
 * klass), each answered about 6 ms later: the voluntary context switches and the CPU time
 * of the calling thread. */
static void scripted_calls(const char *klass, int wait_spin_us, long *ret_switches, double *ret_cpu_us)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        struct scripted_peer peer = { .listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0),
                                      .klass = klass };
        npu_context_t *c = NULL;
        pthread_t th;
        struct timespec c0, c1;

        snprintf(a.sun_path, sizeof(a.sun_path), "/tmp/npud-spin-%d.sock", (int)getpid());
        unlink(a.sun_path);
        ck_assert_int_ge(peer.listen_fd, 0);
        ck_assert_int_eq(bind(peer.listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(peer.listen_fd, 1), 0);
        ck_assert_int_eq(pthread_create(&th, NULL, scripted_peer_main, &peer), 0);
        npu_connect_options_t o = { .size = sizeof(o), .socket = a.sun_path, .wait_spin_us = wait_spin_us };
        OK(npu_connect_with(&o, &c));
        long before = voluntary_switches();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        for (int i = 0; i < SLEEP_ONCE_CALLS; i++)
                OK(npu_synchronize(c));
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        *ret_switches = voluntary_switches() - before;
        *ret_cpu_us = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / 1e3;
        npu_disconnect(c);
        pthread_join(th, NULL);
        close(peer.listen_fd);
        unlink(a.sun_path);
        ck_assert_msg(peer.ok, "the scripted peer did not see every request");
        ck_assert_int_ge(before, 0);
}

/* A latency-critical tenant's context polls for its reply NPU_WAIT_SPIN_LC_US before it
 * sleeps (a reply within it needs no wake-up); then it sleeps, once, as any other. A normal
 * tenant's does not spin, nor one that asks for no spin, and one may ask for a spin. */
START_TEST(test_latency_critical_waits_spin_first)
{
        long sw, sw_lc;
        double base, lc, off, asked;
        const double n = SLEEP_ONCE_CALLS;

        unsetenv("NPU_WAIT_SPIN_US");
        scripted_calls("normal", 0, &sw, &base); /* no spin: the calls' own CPU time */
        scripted_calls("latency-critical", 0, &sw_lc, &lc);
        scripted_calls("latency-critical", -1, &sw, &off);
        scripted_calls("normal", 1000, &sw, &asked);
        printf("client wait: %d calls of 6 ms, CPU a call: normal %.0f us, latency-critical %.0f us (slept %ld "
               "times), latency-critical with wait_spin_us -1 %.0f us, normal with 1000 %.0f us\n",
               SLEEP_ONCE_CALLS, base / n, lc / n, sw_lc, off / n, asked / n);
        ck_assert_msg(sw_lc <= SLEEP_ONCE_CALLS + 2, "%d calls slept %ld times", SLEEP_ONCE_CALLS, sw_lc);
        ck_assert_msg(sw <= SLEEP_ONCE_CALLS + 2, "%d calls slept %ld times", SLEEP_ONCE_CALLS, sw);
        /* a spin adds its length of CPU time to each call (half of it at least, on a busy host) */
        ck_assert_msg(lc - base >= n * NPU_WAIT_SPIN_LC_US * 0.5, "latency-critical: it did not spin");
        ck_assert_msg(off - base < n * NPU_WAIT_SPIN_LC_US * 0.5, "wait_spin_us -1: it spun");
        ck_assert_msg(asked - base >= n * 1000 * 0.5, "wait_spin_us 1000: it did not spin");
}
END_TEST

START_TEST(test_waiting_client_sleeps_once)
{
        long sw;
        double cpu;

        unsetenv("NPU_WAIT_SPIN_US");
        scripted_calls(NULL, 0, &sw, &cpu); /* a hello that names no class: no spin */
        /* one sleep per call; a blocking recvmsg slept twice (woken when the peer read) */
        ck_assert_msg(sw <= SLEEP_ONCE_CALLS + 2, "%d calls slept %ld times", SLEEP_ONCE_CALLS, sw);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-client-contract");
        TCase *tc = tcase_create("client-contract");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_destroyed_stream_error_stays_out_of_other_streams);
        tcase_add_test(tc, test_stream_error_not_consumed_by_synchronize);
        tcase_add_test(tc, test_threads_own_their_errors);
        tcase_add_test(tc, test_many_waiters_on_one_context);
        tcase_add_test(tc, test_socket_permission_denied);
        tcase_add_test(tc, test_visible_devices);
        suite_add_tcase(s, tc);
        TCase *tp = tcase_create("client-wait"); /* a scripted peer, no npud */
        tcase_set_timeout(tp, 30);
        tcase_add_test(tp, test_waiting_client_sleeps_once);
        tcase_add_test(tp, test_latency_critical_waits_spin_first);
        suite_add_tcase(s, tp);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* Hostile clients against admission and per-session / per-uid budgets, through the real npud
 * (issue 9, items 4, 5, 7, 10, 12 and 14). The attacker runs as the unprivileged user
 * "npud-attacker"; root plays the operator. Every test checks that npud is alive and that a
 * well-behaved root client still works afterwards. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/frame.h"
#include "proto/submit.h"
#include "harness.h"
#include "npu.h"

static struct npud_proc proc;
static char conf_path[128];
static uid_t auid;
static gid_t agid;

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())
/* Checks inside attacker children: exit status names the failed line. */
#define REQUIRE(cond) do { if (!(cond)) { fprintf(stderr, "attacker: %s:%d: %s\n", __FILE__, __LINE__, #cond); return __LINE__ % 250 + 1; } } while (0)

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Start npud with a "limits" object (and optionally more top-level members). */
static void start(const char *config_json, const char *mode)
{
        FILE *f;

        ck_assert_msg(harness_attacker(&auid, &agid) == 0, "no unprivileged attacker user");
        snprintf(conf_path, sizeof(conf_path), "/tmp/npud-hostile-%d.conf", (int)getpid());
        f = fopen(conf_path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(config_json, f);
        fclose(f);
        const char *extra[] = { "--config", conf_path, "--sim-mode", mode ? mode : "compute", NULL };
        ck_assert_int_eq(harness_start(&proc, extra), 0);
        ck_assert_int_eq(harness_share_socket(&proc), 0);
}

static void stop(void)
{
        unlink(conf_path);
        ck_assert_int_eq(harness_stop(&proc), 0);
}

/* A child running fn as uid/gid (no supplementary groups), left running. */
static pid_t spawn_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg)
{
        pid_t pid = fork();

        if (pid == 0) {
                signal(SIGPIPE, SIG_IGN);
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
                    setresuid(uid, uid, uid) < 0 || geteuid() != uid)
                        _exit(126);
                _exit(fn(arg));
        }
        return pid;
}

static int wait_child(pid_t pid)
{
        int status = -1;

        if (waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* npud is alive and a well-behaved root client can round-trip data. */
static void root_client_works(void)
{
        npu_context_t *c;
        npu_buffer_t b;
        uint8_t out[4096], in[4096];

        ck_assert_msg(harness_alive(&proc), "npud is not running");
        OK(npu_connect(proc.sock, &c));
        OK(npu_ping(c));
        for (size_t i = 0; i < sizeof(out); i++)
                out[i] = (uint8_t)(i * 31 + 7);
        OK(npu_malloc(c, 0, sizeof(out), &b));
        OK(npu_memcpy_to_device(c, b, 0, out, sizeof(out)));
        OK(npu_memcpy_from_device(c, in, b, 0, sizeof(in)));
        ck_assert_mem_eq(in, out, sizeof(out));
        OK(npu_free(c, b));
        npu_disconnect(c);
        ck_assert(harness_alive(&proc));
}

/* Read frames until the reply to `id` (skipping notifications), waiting up to ms. */
static json_t *recv_reply(int fd, uint64_t id, int ms)
{
        uint64_t end = now_ms() + (uint64_t)ms;

        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int left = (int)(end - now_ms());
                if (left <= 0 || poll(&p, 1, left) <= 0)
                        return NULL;
                int kind = 0;
                uint64_t rid = 0;
                json_t *v = harness_raw_recv(fd, &kind, &rid);
                if (!v || (kind == PROTO_KIND_REPLY && rid == id))
                        return v;
                json_decref(v);
        }
}

static const char *err_message(json_t *r)
{
        const char *m = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
        return m ? m : "";
}

/* Integer member of a reply's result, -1 when absent. */
static long long result_int(json_t *r, const char *key)
{
        json_t *v = json_object_get(json_object_get(r, "result"), key);
        return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* EOF within ms? */
static int closed_within(int fd, int ms)
{
        char buf[65536];
        uint64_t end = now_ms() + (uint64_t)ms;

        for (;;) {
                int left = (int)(end - now_ms());
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, left) <= 0)
                        return 0;
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n == 0 || (n < 0 && errno == ECONNRESET))
                        return 1;
                if (n < 0 && errno != EINTR && errno != EAGAIN)
                        return 0;
        }
}

/* Sessions of uid from the admin listing (root connection fd). */
static json_t *sessions_of(int fd, uid_t uid)
{
        static uint64_t id = 1000;
        json_t *r = harness_raw_call(fd, ++id, "{\"method\":\"sessions\"}");
        json_t *out = json_array(), *s;
        size_t i;

        ck_assert_ptr_nonnull(r);
        json_array_foreach(json_object_get(json_object_get(r, "result"), "sessions"), i, s)
                if (json_integer_value(json_object_get(s, "uid")) == (json_int_t)uid)
                        json_array_append(out, s);
        json_decref(r);
        return out;
}

static int root_session(void)
{
        int fd = harness_raw_connect(proc.sock);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        return fd;
}

/* ---- item 4: idle connections, per-uid cap, admin reserve ---- */

struct hold_args {
        const char *sock;
        int report[2]; /* child -> parent: connections held */
        int release[2]; /* parent -> child: let go */
        const char *refusal; /* expected in the refusal notification */
};

/* Open connections that never send hello until one is refused; report how many were kept. */
static int attacker_hold(void *arg)
{
        struct hold_args *a = arg;
        int fds[128], n = 0;
        char c;

        close(a->report[0]);
        close(a->release[1]);
        while (n < 128) {
                int fd = harness_raw_connect(a->sock);
                REQUIRE(fd >= 0);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 300) > 0) { /* refused: a notification naming the limit, then EOF */
                        int kind = 0;
                        json_t *v = harness_raw_recv(fd, &kind, NULL);
                        REQUIRE(v != NULL && kind == PROTO_KIND_NOTIFY);
                        REQUIRE(strcmp(json_string_value(json_object_get(v, "event")), "connection-refused") == 0);
                        const char *m = json_string_value(json_object_get(json_object_get(v, "data"), "message"));
                        REQUIRE(m && strstr(m, a->refusal));
                        json_decref(v);
                        REQUIRE(closed_within(fd, 2000));
                        close(fd);
                        break;
                }
                fds[n++] = fd;
        }
        REQUIRE(write(a->report[1], &n, sizeof(n)) == sizeof(n));
        REQUIRE(read(a->release[0], &c, 1) == 1);
        for (int i = 0; i < n; i++)
                close(fds[i]);
        return 0;
}

static int hold_start(struct hold_args *a, pid_t *pid)
{
        int n = -1;

        a->sock = proc.sock;
        ck_assert_int_eq(pipe(a->report), 0);
        ck_assert_int_eq(pipe(a->release), 0);
        *pid = spawn_as(auid, agid, attacker_hold, a);
        ck_assert_int_gt(*pid, 0);
        close(a->report[1]);
        close(a->release[0]);
        ck_assert_int_eq(read(a->report[0], &n, sizeof(n)), sizeof(n));
        return n;
}

static void hold_end(struct hold_args *a, pid_t pid)
{
        ck_assert_int_eq(write(a->release[1], "x", 1), 1);
        close(a->release[1]);
        close(a->report[0]);
        ck_assert_int_eq(wait_child(pid), 0);
}

static void npuctl_devices_ok(void)
{
        const char *bin = getenv("NPUD_BIN") ? getenv("NPUD_BIN") : "build/bin/npud";
        char cmd[512];
        size_t n = strlen(bin);

        ck_assert(n >= 4 && strcmp(bin + n - 4, "npud") == 0);
        snprintf(cmd, sizeof(cmd), "%.*snpuctl --socket %s devices >/dev/null", (int)(n - 4), bin,
                 proc.sock);
        ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_idle_connections_admin_reserve)
{
        struct hold_args a = { .refusal = "reserved_connections" };
        pid_t pid;

        start("{\"limits\": {\"max_connections\": 16, \"reserved_connections\": 4,"
              " \"max_connections_per_uid\": 64, \"hello_timeout_ms\": 60000}}", NULL);
        int held = hold_start(&a, &pid);
        ck_assert_msg(held == 12, "the attacker holds %d of 16 connections (12 expected)", held);
        /* the operator still gets in: raw hello, npuctl, libnpu */
        int fd = root_session();
        json_t *r = harness_raw_call(fd, 2, "{\"method\":\"ping\"}");
        ck_assert(r && harness_reply_code(r) == 0);
        json_decref(r);
        npuctl_devices_ok();
        root_client_works();
        close(fd);
        hold_end(&a, pid);
        root_client_works();
        stop();
}
END_TEST

static int other_user_connects(void *arg)
{
        int fd = harness_raw_connect(arg);
        REQUIRE(fd >= 0);
        REQUIRE(harness_raw_hello(fd) == 0);
        json_t *r = harness_raw_call(fd, 2, "{\"method\":\"ping\"}");
        REQUIRE(r && harness_reply_code(r) == 0);
        json_decref(r);
        close(fd);
        return 0;
}

START_TEST(test_per_uid_connection_cap)
{
        struct hold_args a = { .refusal = "max_connections_per_uid" };
        struct passwd *nobody = getpwnam("nobody");
        pid_t pid;

        start("{\"limits\": {\"max_connections\": 32, \"reserved_connections\": 4,"
              " \"max_connections_per_uid\": 6, \"hello_timeout_ms\": 60000}}", NULL);
        int held = hold_start(&a, &pid);
        ck_assert_msg(held == 6, "the attacker holds %d connections (6 expected)", held);
        /* another unprivileged user is not locked out */
        if (nobody && nobody->pw_uid != auid)
                ck_assert_int_eq(harness_run_as(nobody->pw_uid, nobody->pw_gid, other_user_connects,
                                                proc.sock), 0);
        root_client_works();
        hold_end(&a, pid);
        root_client_works();
        stop();
}
END_TEST

static int attacker_silent(void *arg)
{
        const char *sock = arg;
        static const uint8_t part[10] = { 'N', 'P', 'U', '1', 1, 0, 1, 0, 0, 0 };
        int silent = harness_raw_connect(sock), partial = harness_raw_connect(sock);
        int good = harness_raw_connect(sock);
        uint64_t t0 = now_ms();

        REQUIRE(silent >= 0 && partial >= 0 && good >= 0);
        REQUIRE(write(partial, part, sizeof(part)) == (ssize_t)sizeof(part));
        REQUIRE(harness_raw_hello(good) == 0);
        REQUIRE(closed_within(silent, 5000));
        REQUIRE(closed_within(partial, 5000));
        uint64_t dt = now_ms() - t0;
        REQUIRE(dt >= 400 && dt < 5000);
        /* a session past hello is not subject to the hello timeout */
        usleep(800 * 1000);
        json_t *r = harness_raw_call(good, 2, "{\"method\":\"ping\"}");
        REQUIRE(r && harness_reply_code(r) == 0);
        json_decref(r);
        close(silent);
        close(partial);
        close(good);
        return 0;
}

START_TEST(test_hello_timeout)
{
        start("{\"limits\": {\"hello_timeout_ms\": 700}}", NULL);
        ck_assert_int_eq(harness_run_as(auid, agid, attacker_silent, proc.sock), 0);
        root_client_works();
        stop();
}
END_TEST

/* ---- item 5: memory before hello ---- */

static int attacker_big_before_hello(void *arg)
{
        const char *sock = arg;
        enum { CONNS = 16, SEND = 4 << 20 };
        uint8_t *junk = calloc(1, 1 << 20);
        int fds[CONNS];

        REQUIRE(junk);
        for (int i = 0; i < CONNS; i++) {
                struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                          .kind = PROTO_KIND_SUBMIT, .body_len = PROTO_MAX_BODY };
                uint8_t hdr[PROTO_HEADER_SIZE];
                fds[i] = harness_raw_connect(sock);
                REQUIRE(fds[i] >= 0);
                proto_header_encode(&h, hdr);
                REQUIRE(write(fds[i], hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
                /* push body bytes as long as the daemon takes them */
                size_t sent = 0;
                while (sent < SEND) {
                        struct pollfd p = { .fd = fds[i], .events = POLLOUT };
                        if (poll(&p, 1, 200) <= 0)
                                break;
                        ssize_t n = send(fds[i], junk, 1 << 20, MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (n <= 0)
                                break;
                        sent += (size_t)n;
                }
        }
        for (int i = 0; i < CONNS; i++) {
                REQUIRE(closed_within(fds[i], 3000));
                close(fds[i]);
        }
        /* a JSON request over the before-hello limit is refused as well */
        int fd = harness_raw_connect(sock);
        REQUIRE(fd >= 0);
        memset(junk, ' ', 65536);
        memcpy(junk, "{\"method\":\"ping\"}", 17);
        REQUIRE(harness_raw_send(fd, PROTO_KIND_REQUEST, 1, junk, 65536, NULL, 0) == 0 ||
                closed_within(fd, 100));
        REQUIRE(closed_within(fd, 3000));
        close(fd);
        /* a normal hello with a long client name still works */
        fd = harness_raw_connect(sock);
        char body[2048];
        snprintf(body, sizeof(body), "{\"method\":\"hello\",\"params\":{\"min_version\":1,"
                 "\"max_version\":1,\"client\":\"%01000d\"}}", 7);
        json_t *r = harness_raw_call(fd, 1, body);
        REQUIRE(r && harness_reply_code(r) == 0);
        json_decref(r);
        close(fd);
        free(junk);
        return 0;
}

START_TEST(test_big_frame_before_hello)
{
        start("{\"limits\": {}}", NULL);
        long before = harness_proc_kib(proc.pid, "VmRSS");
        ck_assert_int_eq(harness_run_as(auid, agid, attacker_big_before_hello, proc.sock), 0);
        long peak = harness_proc_kib(proc.pid, "VmHWM");
        ck_assert_msg(peak - before < 48 * 1024, "npud RSS grew from %ld to %ld kB", before, peak);
        root_client_works();
        stop();
}
END_TEST

/* ---- item 5: one 16 MiB SUBMIT frame of tiny records ---- */

enum { HUGE_RECORDS = PROTO_MAX_BODY / 48 }; /* 349,525 memsets of 48 bytes */

struct huge_args {
        const char *sock;
        int error_mode;
        int done[2];    /* child -> parent: synchronized */
        int release[2]; /* parent -> child */
};

static int attacker_huge_frame(void *arg)
{
        struct huge_args *a = arg;
        uint8_t *body = malloc(PROTO_MAX_BODY);
        int fd = harness_raw_connect(a->sock);
        char c;

        close(a->done[0]);
        close(a->release[1]);
        REQUIRE(body && fd >= 0);
        json_t *r = harness_raw_call(fd, 1, a->error_mode
                ? "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":1,\"backpressure\":\"error\"}}"
                : "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":1}}");
        REQUIRE(r && harness_reply_code(r) == 0);
        json_decref(r);
        r = harness_raw_call(fd, 2, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":32768}}");
        long long buf = result_int(r, "buffer");
        json_decref(r);
        r = harness_raw_call(fd, 3, "{\"method\":\"stream_create\",\"params\":{\"device\":0}}");
        long long stream = result_int(r, "stream");
        json_decref(r);
        REQUIRE(buf > 0 && stream > 0);
        size_t len = 0;
        for (uint32_t i = 0; i < HUGE_RECORDS; i++) {
                struct proto_rec rec = { .type = PROTO_REC_MEMSET, .seq = i + 1,
                                         .stream = (uint32_t)stream };
                rec.memset.buf = (uint32_t)buf;
                rec.memset.value = (uint8_t)(i / 4096);
                rec.memset.off = (uint64_t)(i % 4096) * 8;
                rec.memset.len = 8;
                len += proto_rec_encode(&rec, body + len);
        }
        REQUIRE(harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, body, len, NULL, 0) == 0);
        free(body);
        char req[128];
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%lld}}", stream);
        REQUIRE(harness_raw_send(fd, PROTO_KIND_REQUEST, 4, req, strlen(req), NULL, 0) == 0);
        r = recv_reply(fd, 4, 100000);
        REQUIRE(r);
        if (a->error_mode) { /* records over the limit were refused with busy */
                REQUIRE(harness_reply_code(r) == NPU_ERR_BUSY);
                REQUIRE(strstr(err_message(r), "max_queued_tasks"));
        } else {
                REQUIRE(harness_reply_code(r) == 0);
        }
        json_decref(r);
        r = harness_raw_call(fd, 5, "{\"method\":\"ping\"}");
        REQUIRE(r && harness_reply_code(r) == 0);
        json_decref(r);
        REQUIRE(write(a->done[1], "x", 1) == 1);
        REQUIRE(read(a->release[0], &c, 1) == 1);
        close(fd);
        return 0;
}

static void huge_frame(int error_mode)
{
        struct huge_args a = { .error_mode = error_mode };
        int fd, status = -1;
        uint64_t worst_ping = 0, pings = 0;
        long long max_queued = 0;
        pid_t pid;

        start("{\"limits\": {\"max_queued_tasks\": 1024}}", NULL);
        long before = harness_proc_kib(proc.pid, "VmRSS");
        fd = root_session();
        a.sock = proc.sock;
        ck_assert_int_eq(pipe(a.done), 0);
        ck_assert_int_eq(pipe(a.release), 0);
        pid = spawn_as(auid, agid, attacker_huge_frame, &a);
        ck_assert_int_gt(pid, 0);
        close(a.done[1]);
        close(a.release[0]);
        /* while the frame is processed: another client's ping answers quickly, and the
         * attacker never has more than the limit queued */
        for (uint64_t id = 10, t0 = now_ms(); now_ms() - t0 < 110000; id++) {
                struct pollfd p = { .fd = a.done[0], .events = POLLIN };
                if (poll(&p, 1, 20) > 0)
                        break;
                uint64_t s = now_ms();
                json_t *r = harness_raw_call(fd, id, "{\"method\":\"ping\"}");
                ck_assert_msg(r && harness_reply_code(r) == 0, "ping failed");
                json_decref(r);
                if (now_ms() - s > worst_ping)
                        worst_ping = now_ms() - s;
                pings++;
                json_t *list = sessions_of(fd, auid), *o;
                size_t i;
                json_array_foreach(list, i, o)
                        if (json_integer_value(json_object_get(o, "queued_tasks")) > max_queued)
                                max_queued = json_integer_value(json_object_get(o, "queued_tasks"));
                json_decref(list);
        }
        char c;
        ck_assert_msg(read(a.done[0], &c, 1) == 1, "the attacker did not finish (status %d)",
                      waitpid(pid, &status, WNOHANG) == pid ? status : -1);
        json_t *list = sessions_of(fd, auid);
        ck_assert_int_eq(json_array_size(list), 1);
        json_t *o = json_array_get(list, 0);
        if (!error_mode) { /* every record of the frame ran, exactly once */
                ck_assert_int_eq(json_integer_value(json_object_get(o, "tasks_submitted")), HUGE_RECORDS);
                ck_assert_int_eq(json_integer_value(json_object_get(o, "tasks_completed")), HUGE_RECORDS);
        }
        json_decref(list);
        ck_assert_int_eq(write(a.release[1], "x", 1), 1);
        ck_assert_int_eq(wait_child(pid), 0);
        long peak = harness_proc_kib(proc.pid, "VmHWM");
        fprintf(stderr, "huge frame (%s mode): %llu pings, worst %llu ms; max queued %lld; "
                "npud RSS %ld kB before, peak %ld kB\n", error_mode ? "error" : "block",
                (unsigned long long)pings, (unsigned long long)worst_ping, max_queued, before, peak);
        /* the limit, plus in error mode at most one failure marker per stream */
        ck_assert_msg(max_queued <= 1024 + error_mode, "%lld tasks queued (limit 1024)", max_queued);
        ck_assert_msg(worst_ping < 1000, "a ping took %llu ms", (unsigned long long)worst_ping);
        ck_assert_msg(peak - before < 128 * 1024, "npud RSS grew from %ld to %ld kB", before, peak);
        close(a.done[0]);
        close(a.release[1]);
        close(fd);
        root_client_works();
        stop();
}

START_TEST(test_huge_submit_frame_block)
{
        huge_frame(0);
}
END_TEST

START_TEST(test_huge_submit_frame_error)
{
        huge_frame(1);
}
END_TEST

/* ---- item 5: synchronize waiters ---- */

static int MAT = 512;

static size_t matmul_record(uint8_t *out, uint32_t stream, const uint32_t bufs[3], uint64_t seq)
{
        struct proto_rec rec = { .type = PROTO_REC_LAUNCH, .seq = seq, .stream = stream };

        snprintf(rec.launch.op, sizeof(rec.launch.op), "MatMul");
        rec.launch.nin = 2;
        rec.launch.nout = 1;
        for (int i = 0; i < 3; i++) {
                rec.launch.t[i].buf = bufs[i];
                rec.launch.t[i].dtype = NPU_FLOAT32;
                rec.launch.t[i].ndim = 2;
                rec.launch.t[i].dims[0] = MAT;
                rec.launch.t[i].dims[1] = MAT;
        }
        return proto_rec_encode(&rec, out);
}

/* hello, three MAT x MAT float buffers and a stream on device 0 */
static int matmul_session(const char *sock, uint32_t bufs[3], uint32_t *stream)
{
        int fd = harness_raw_connect(sock);

        if (fd < 0 || harness_raw_hello(fd) < 0)
                return -1;
        for (int i = 0; i < 3; i++) {
                char req[128];
                snprintf(req, sizeof(req), "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":%d}}",
                         MAT * MAT * 4);
                json_t *r = harness_raw_call(fd, 10 + (uint64_t)i, req);
                long long b = result_int(r, "buffer");
                json_decref(r);
                if (b <= 0)
                        return -1;
                bufs[i] = (uint32_t)b;
        }
        json_t *r = harness_raw_call(fd, 20, "{\"method\":\"stream_create\",\"params\":{\"device\":0}}");
        long long st = result_int(r, "stream");
        json_decref(r);
        if (st <= 0)
                return -1;
        *stream = (uint32_t)st;
        return fd;
}

static int submit_matmuls(int fd, uint32_t stream, const uint32_t bufs[3], int n)
{
        uint8_t *body = malloc((size_t)n * 512);
        size_t len = 0;

        if (!body)
                return -1;
        for (int i = 0; i < n; i++)
                len += matmul_record(body + len, stream, bufs, (uint64_t)i + 1);
        int e = harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, body, len, NULL, 0);
        free(body);
        return e;
}

static int attacker_waiters(void *arg)
{
        uint32_t bufs[3], stream;
        int fd = matmul_session(arg, bufs, &stream), ok = 0, limit = 0;
        char req[128];

        REQUIRE(fd >= 0);
        /* enough modelled work (tens of ms) that the stream is still busy when npud has read
         * all 100 synchronizes, even under ASan on a loaded host: 200 MatMuls (about 4 ms)
         * once drained first, and the late synchronizes were answered at once */
        REQUIRE(submit_matmuls(fd, stream, bufs, 2000) == 0);
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%u}}", stream);
        for (int i = 0; i < 100; i++)
                REQUIRE(harness_raw_send(fd, PROTO_KIND_REQUEST, 100 + (uint64_t)i, req, strlen(req), NULL, 0) == 0);
        for (int i = 0; i < 100; i++) {
                int kind = 0;
                uint64_t id = 0;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                REQUIRE(poll(&p, 1, 60000) > 0);
                json_t *r = harness_raw_recv(fd, &kind, &id);
                REQUIRE(r);
                if (kind != PROTO_KIND_REPLY) {
                        json_decref(r);
                        i--;
                        continue;
                }
                if (harness_reply_code(r) == 0) {
                        ok++;
                } else {
                        REQUIRE(harness_reply_code(r) == NPU_ERR_LIMIT);
                        REQUIRE(strstr(err_message(r), "max_waiters"));
                        REQUIRE(ok == 0); /* refused at once, before any deferred reply */
                        limit++;
                }
                json_decref(r);
        }
        fprintf(stderr, "waiters: %d deferred replies, %d refused\n", ok, limit);
        REQUIRE(ok == 16 && limit == 84);
        close(fd);
        return 0;
}

START_TEST(test_waiter_cap)
{
        start("{\"limits\": {\"max_waiters\": 16}}", "model");
        ck_assert_int_eq(harness_run_as(auid, agid, attacker_waiters, proc.sock), 0);
        root_client_works();
        stop();
}
END_TEST

/* ---- a wait's "cpu" hint (session version 5) ---- */

/* An unprivileged client names CPUs npud does not have, and every CPU number in turn, on
 * thousands of waits: the bad ones are refused naming 'cpu', the others answered; npud
 * writes at most some replies from another idle worker. */
static int attacker_cpu_hints(void *arg)
{
        static const char *const bad[] = { "-1", "\"0\"", "1024", "1e9", "null", "[1]" };
        int fd = harness_raw_connect(arg);
        char req[96];

        REQUIRE(fd >= 0 && harness_raw_hello(fd) == 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(req, sizeof(req), "{\"method\":\"synchronize\",\"params\":{\"cpu\":%s}}", bad[i]);
                json_t *r = harness_raw_call(fd, 10 + (uint64_t)i, req);
                REQUIRE(r && harness_reply_code(r) == NPU_ERR_INVALID && strstr(err_message(r), "'cpu'"));
                json_decref(r);
        }
        for (int i = 0; i < 2048; i++) {
                snprintf(req, sizeof(req), "{\"method\":\"synchronize\",\"params\":{\"cpu\":%d}}", i % 1024);
                json_t *r = harness_raw_call(fd, 100 + (uint64_t)i, req);
                REQUIRE(r && harness_reply_code(r) == 0);
                json_decref(r);
        }
        close(fd);
        return 0;
}

START_TEST(test_wait_cpu_hints)
{
        start("{}", "compute");
        ck_assert_int_eq(harness_run_as(auid, agid, attacker_cpu_hints, proc.sock), 0);
        root_client_works();
        stop();
}
END_TEST

/* ---- item 10: streams per uid ---- */

static int other_user_streams(void *arg)
{
        int fd = harness_raw_connect(arg);

        REQUIRE(fd >= 0 && harness_raw_hello(fd) == 0);
        for (int i = 0; i < 8; i++) {
                json_t *r = harness_raw_call(fd, 10 + (uint64_t)i,
                                             "{\"method\":\"stream_create\",\"params\":{\"device\":0}}");
                REQUIRE(r && harness_reply_code(r) == 0);
                json_decref(r);
        }
        close(fd);
        return 0;
}

struct streams_args {
        const char *sock;
        int ready[2];   /* child -> parent: streams held */
        int release[2]; /* parent -> child */
};

static int attacker_streams(void *arg)
{
        struct streams_args *a = arg;
        int fds[3], got = 0;
        char c;

        close(a->ready[0]);
        close(a->release[1]);
        for (int s = 0; s < 3; s++) {
                fds[s] = harness_raw_connect(a->sock);
                REQUIRE(fds[s] >= 0 && harness_raw_hello(fds[s]) == 0);
        }
        for (int i = 0; i < 60; i++) {
                json_t *r = harness_raw_call(fds[i % 3], 10 + (uint64_t)i,
                                             "{\"method\":\"stream_create\",\"params\":{\"device\":0}}");
                REQUIRE(r);
                if (harness_reply_code(r) == 0)
                        got++;
                else {
                        REQUIRE(harness_reply_code(r) == NPU_ERR_LIMIT);
                        REQUIRE(strstr(err_message(r), "max_streams_per_uid"));
                }
                json_decref(r);
        }
        fprintf(stderr, "streams: the attacker got %d\n", got);
        REQUIRE(got == 8);
        /* held while another user creates its own */
        REQUIRE(write(a->ready[1], "x", 1) == 1);
        REQUIRE(read(a->release[0], &c, 1) == 1);
        for (int s = 0; s < 3; s++)
                close(fds[s]);
        return 0;
}

static void streams_round(int other_user)
{
        struct passwd *nobody = getpwnam("nobody");
        struct streams_args a = { .sock = proc.sock };
        char c;

        ck_assert_int_eq(pipe(a.ready), 0);
        ck_assert_int_eq(pipe(a.release), 0);
        pid_t pid = spawn_as(auid, agid, attacker_streams, &a);
        ck_assert_int_gt(pid, 0);
        close(a.ready[1]);
        close(a.release[0]);
        ck_assert_msg(read(a.ready[0], &c, 1) == 1, "the attacker failed (see its message)");
        if (other_user && nobody && nobody->pw_uid != auid)
                ck_assert_int_eq(harness_run_as(nobody->pw_uid, nobody->pw_gid, other_user_streams,
                                                proc.sock), 0);
        root_client_works();
        ck_assert_int_eq(write(a.release[1], "x", 1), 1);
        ck_assert_int_eq(wait_child(pid), 0);
        close(a.ready[0]);
        close(a.release[1]);
}

START_TEST(test_streams_per_uid)
{
        start("{\"limits\": {\"max_streams_per_uid\": 8}}", NULL);
        streams_round(1);
        /* the attacker's streams went with its sessions: it gets 8 again */
        streams_round(0);
        root_client_works();
        stop();
}
END_TEST

/* ---- item 12: a SIGKILLed client while its reading is paused ---- */

static int attacker_paused(void *arg)
{
        uint32_t bufs[3], stream;
        int fd = matmul_session(arg, bufs, &stream);

        REQUIRE(fd >= 0);
        /* far more than max_queued_tasks: npud pauses reading in the middle of the frame;
         * before the fix the whole frame was queued and took minutes (modelled) to drain */
        REQUIRE(submit_matmuls(fd, stream, bufs, 8000) == 0);
        for (;;)
                pause();
}

START_TEST(test_sigkill_while_paused)
{
        start("{\"limits\": {\"max_queued_tasks\": 64}}", "model");
        MAT = 2048; /* a few ms each, modelled */
        int fd = root_session();
        pid_t pid = spawn_as(auid, agid, attacker_paused, proc.sock);
        long long queued = 0;

        ck_assert_int_gt(pid, 0);
        for (int i = 0; i < 500 && queued < 32; i++) {
                json_t *list = sessions_of(fd, auid);
                if (json_array_size(list))
                        queued = json_integer_value(json_object_get(json_array_get(list, 0), "queued_tasks"));
                json_decref(list);
                usleep(10000);
        }
        ck_assert_msg(queued >= 32, "the attacker's session queued %lld tasks", queued);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        uint64_t t0 = now_ms();
        size_t left = 1;
        while (left && now_ms() - t0 < 3000) {
                json_t *list = sessions_of(fd, auid);
                left = json_array_size(list);
                json_decref(list);
                usleep(20000);
        }
        ck_assert_msg(left == 0, "the killed client's session is still there after 3 s");
        MAT = 512;
        close(fd);
        root_client_works();
        stop();
}
END_TEST

/* ---- item 14: protocol mismatches ---- */

START_TEST(test_fds_on_frame_declaring_none)
{
        start("{\"limits\": {}}", NULL);
        int fd = root_session(), m = memfd_create("x", MFD_CLOEXEC);
        const char *ping = "{\"method\":\"ping\"}";
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = PROTO_KIND_REQUEST, .nfds = 0,
                                  .body_len = (uint32_t)strlen(ping), .request_id = 2 };
        uint8_t buf[PROTO_HEADER_SIZE + 64];
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } ctl;
        struct iovec iov = { .iov_base = buf, .iov_len = PROTO_HEADER_SIZE + strlen(ping) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                              .msg_controllen = sizeof(ctl.b) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

        ck_assert_int_ge(m, 0);
        proto_header_encode(&h, buf);
        memcpy(buf + PROTO_HEADER_SIZE, ping, strlen(ping));
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &m, sizeof(int));
        ck_assert_int_eq(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)iov.iov_len);
        /* documented: fds that no frame claims close the connection (no reply) */
        ck_assert(closed_within(fd, 3000));
        close(fd);
        close(m);
        root_client_works();
        stop();
}
END_TEST

START_TEST(test_ping_ignores_params)
{
        start("{\"limits\": {}}", NULL);
        int fd = harness_raw_connect(proc.sock);
        json_t *r;

        ck_assert_int_ge(fd, 0);
        /* before and after hello */
        r = harness_raw_call(fd, 1, "{\"method\":\"ping\",\"params\":{\"anything\":[1,2,3]}}");
        ck_assert_msg(r && harness_reply_code(r) == 0, "ping with params: %s", r ? err_message(r) : "no reply");
        json_decref(r);
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        r = harness_raw_call(fd, 2, "{\"method\":\"ping\",\"params\":{\"x\":1}}");
        ck_assert(r && harness_reply_code(r) == 0);
        json_decref(r);
        close(fd);
        root_client_works();
        stop();
}
END_TEST

/* ---- item 7: tenant choice ---- */

static int attacker_tenant(void *arg)
{
        int fd = harness_raw_connect(arg);
        json_t *r;

        REQUIRE(fd >= 0);
        r = harness_raw_call(fd, 1, "{\"method\":\"hello\",\"params\":{\"min_version\":1,"
                                    "\"max_version\":1,\"tenant\":\"default\"}}");
        REQUIRE(r && harness_reply_code(r) == NPU_ERR_PERMISSION);
        json_decref(r);
        r = harness_raw_call(fd, 2, "{\"method\":\"hello\",\"params\":{\"min_version\":1,"
                                    "\"max_version\":1,\"tenant\":\"batch\"}}");
        REQUIRE(r && harness_reply_code(r) == 0);
        REQUIRE(strcmp(json_string_value(json_object_get(json_object_get(r, "result"), "tenant")), "batch") == 0);
        json_decref(r);
        close(fd);
        /* and without asking: the tenant it matches */
        fd = harness_raw_connect(arg);
        r = harness_raw_call(fd, 1, "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":1}}");
        REQUIRE(r && harness_reply_code(r) == 0);
        REQUIRE(strcmp(json_string_value(json_object_get(json_object_get(r, "result"), "tenant")), "batch") == 0);
        json_decref(r);
        close(fd);
        return 0;
}

/* Unread output is budgeted per uid: four sessions of one user that never read their
 * replies, each under the per-session limit, together pass the user's limit; npud closes
 * sessions of that user (and only theirs) instead of holding the output. */
static int attacker_unread_output(void *arg)
{
        const char *sock = arg;
        enum { NCONN = 4, PINGS = 60000 };
        static const char body[] = "{\"method\":\"ping\"}";
        const size_t flen = PROTO_HEADER_SIZE + sizeof(body) - 1;
        uint8_t *buf = malloc(flen * PINGS);
        int fd[NCONN], closed = 0;

        REQUIRE(buf != NULL);
        for (int i = 0; i < PINGS; i++) {
                struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                          .kind = PROTO_KIND_REQUEST,
                                          .body_len = (uint32_t)(sizeof(body) - 1),
                                          .request_id = (uint64_t)i + 10 };
                proto_header_encode(&h, buf + (size_t)i * flen);
                memcpy(buf + (size_t)i * flen + PROTO_HEADER_SIZE, body, sizeof(body) - 1);
        }
        for (int c = 0; c < NCONN; c++) {
                fd[c] = harness_raw_connect(sock);
                REQUIRE(fd[c] >= 0 && harness_raw_hello(fd[c]) == 0);
        }
        for (int c = 0; c < NCONN; c++) { /* a closed connection fails the write: fine */
                size_t off = 0;
                while (off < flen * PINGS) {
                        ssize_t n = write(fd[c], buf + off, flen * PINGS - off);
                        if (n <= 0)
                                break;
                        off += (size_t)n;
                }
        }
        for (int c = 0; c < NCONN; c++)
                closed += closed_within(fd[c], 3000);
        fprintf(stderr, "attacker: %d of %d sessions closed for unread output\n", closed, NCONN);
        REQUIRE(closed >= 1 && closed < NCONN);
        for (int c = 0; c < NCONN; c++)
                close(fd[c]);
        free(buf);
        return 0;
}

START_TEST(test_unread_output_per_uid)
{
        start("{\"limits\": {\"max_output_bytes\": 4194304, \"max_output_bytes_per_uid\": 6291456,"
              " \"max_output_bytes_total\": 67108864}}", NULL);
        pid_t pid = spawn_as(auid, agid, attacker_unread_output, proc.sock);
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(wait_child(pid), 0);
        root_client_works();
        stop();
}
END_TEST

START_TEST(test_tenant_choice)
{
        char cfg[256];

        ck_assert_int_eq(harness_attacker(&auid, &agid), 0);
        snprintf(cfg, sizeof(cfg), "{\"tenants\": [{\"name\": \"batch\", \"uids\": [%d],"
                 " \"class\": \"best-effort\"}]}", (int)auid);
        start(cfg, NULL);
        ck_assert_int_eq(harness_run_as(auid, agid, attacker_tenant, proc.sock), 0);
        root_client_works();
        stop();
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-hostile-admission");
        TCase *tc = tcase_create("admission");
        SRunner *sr;
        int failed;

        signal(SIGPIPE, SIG_IGN);
        tcase_set_timeout(tc, 240);
        /* HOSTILE_ONLY=name runs one test (development) */
#define ADD(t) if (!getenv("HOSTILE_ONLY") || strcmp(getenv("HOSTILE_ONLY"), #t) == 0) tcase_add_test(tc, t)
        ADD(test_idle_connections_admin_reserve);
        ADD(test_per_uid_connection_cap);
        ADD(test_hello_timeout);
        ADD(test_big_frame_before_hello);
        ADD(test_huge_submit_frame_block);
        ADD(test_huge_submit_frame_error);
        ADD(test_waiter_cap);
        ADD(test_wait_cpu_hints);
        ADD(test_streams_per_uid);
        ADD(test_sigkill_while_paused);
        ADD(test_fds_on_frame_declaring_none);
        ADD(test_ping_ignores_params);
        ADD(test_tenant_choice);
        ADD(test_unread_output_per_uid);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* Work that never ends, run by an unprivileged tenant against the real npud: a Loop of
 * INT64_MAX trips with a constant-true condition (a 200-byte model built here) must be
 * refused by the trip cap, stopped by the tenant's
 * run-time limit, and, with neither configured, cancelled when its client dies, when the
 * admin resets the device and when npud stops. A slowed device (fault "slow") must not slow
 * the others down and must speed up again when the fault is cleared. Each test checks that
 * the daemon is alive and that root's work on every device still completes. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "npu.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx; /* root: the operator and a well-behaved tenant */
static uid_t attacker_uid;
static gid_t attacker_gid;

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Start npud with a tenant "attack" for the attacker's uid and the given run limits (-1:
 * the tenant keeps its defaults). */
static void start_daemon(long long max_run_ms, long long max_loop_trips, const char *mode)
{
        char conf[256], json[1024], lim[128] = "";
        int fd;

        if (harness_attacker(&attacker_uid, &attacker_gid) < 0) {
                fprintf(stderr, "skipped: no unprivileged user for the attacker\n");
                attacker_uid = 0;
        }
        if (max_run_ms >= 0)
                snprintf(lim, sizeof(lim), ", \"max_run_ms\": %lld, \"max_loop_trips\": %lld",
                         max_run_ms, max_loop_trips);
        snprintf(json, sizeof(json),
                 "{\"tenants\": [{\"name\": \"attack\", \"uids\": [%u],"
                 " \"memory_quota\": {\"total\": 67108864}%s}]}",
                 (unsigned)attacker_uid, lim);
        snprintf(conf, sizeof(conf), "/tmp/npud-hostile-run-%d.json", (int)getpid());
        fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
        close(fd);
        const char *extra[] = { "--config", conf, "--sim-mode", mode, "--workers", "2", NULL };
        ck_assert_int_eq(harness_start(&daemon_proc, extra), 0);
        unlink(conf);
        ck_assert_int_eq(harness_share_socket(&daemon_proc), 0);
        OK(npu_connect(daemon_proc.sock, &ctx));
}

static void stop_daemon(void)
{
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

/* Root's work completes on every device within a few seconds: a 4 KiB memset and a
 * round trip of data. */
static void root_work_completes(void)
{
        ck_assert_msg(harness_alive(&daemon_proc), "npud is not running");
        for (int dev = 0; dev < 2; dev++) {
                uint8_t out[4096], in[4096];
                npu_buffer_t b;
                npu_stream_t s;
                double t0 = now_s();
                for (size_t i = 0; i < sizeof(out); i++)
                        out[i] = (uint8_t)(i * 13 + (size_t)dev);
                OK(npu_malloc(ctx, dev, sizeof(out), &b));
                OK(npu_stream_create(ctx, dev, 0, &s));
                OK(npu_memset_async(ctx, s, b, 0, 0, sizeof(out), NULL));
                OK(npu_stream_synchronize(ctx, s));
                OK(npu_memcpy_to_device(ctx, b, 0, out, sizeof(out)));
                OK(npu_memcpy_from_device(ctx, in, b, 0, sizeof(in)));
                ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
                OK(npu_stream_destroy(ctx, s));
                OK(npu_free(ctx, b));
                ck_assert_msg(now_s() - t0 < 5.0, "device %d: root's work took %.1f s", dev,
                              now_s() - t0);
        }
}

/* ---- the endless model, encoded by hand (protobuf wire format of onnx.proto) ---- */

struct pb {
        uint8_t b[1024];
        size_t n;
};

static void pb_raw_varint(struct pb *m, uint64_t v)
{
        do {
                ck_assert_uint_lt(m->n, sizeof(m->b));
                m->b[m->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
}

static void pb_varint(struct pb *m, int field, uint64_t v)
{
        pb_raw_varint(m, (uint64_t)field << 3);
        pb_raw_varint(m, v);
}

static void pb_bytes(struct pb *m, int field, const void *data, size_t len)
{
        pb_raw_varint(m, (uint64_t)field << 3 | 2);
        pb_raw_varint(m, len);
        ck_assert_uint_le(m->n + len, sizeof(m->b));
        memcpy(m->b + m->n, data, len);
        m->n += len;
}

static void pb_str(struct pb *m, int field, const char *s)
{
        pb_bytes(m, field, s, strlen(s));
}

static void pb_msg(struct pb *m, int field, const struct pb *sub)
{
        pb_bytes(m, field, sub->b, sub->n);
}

/* ValueInfoProto of a tensor: dtype, rank 0 or a 1-D shape of extent dim. */
static void pb_value(struct pb *g, int field, const char *name, int dtype, int64_t dim)
{
        struct pb vi = { .n = 0 }, tp = { .n = 0 }, tt = { .n = 0 }, sh = { .n = 0 }, d = { .n = 0 };

        if (dim >= 0) {
                pb_varint(&d, 1, (uint64_t)dim);
                pb_msg(&sh, 1, &d);
        }
        pb_varint(&tt, 1, (uint64_t)dtype);
        pb_msg(&tt, 2, &sh);
        pb_msg(&tp, 1, &tt);
        pb_str(&vi, 1, name);
        pb_msg(&vi, 2, &tp);
        pb_msg(g, field, &vi);
}

static void pb_node(struct pb *g, const char *op, const char *const *in, int nin,
                    const char *out, const struct pb *body, const char *int_attr, int64_t ival)
{
        struct pb n = { .n = 0 };

        for (int i = 0; i < nin; i++)
                pb_str(&n, 1, in[i]);
        pb_str(&n, 2, out);
        pb_str(&n, 3, out);
        pb_str(&n, 4, op);
        if (body) {
                struct pb a = { .n = 0 };
                pb_str(&a, 1, "body");
                pb_msg(&a, 6, body);
                pb_varint(&a, 20, 5); /* AttributeProto.GRAPH */
                pb_msg(&n, 5, &a);
        }
        if (int_attr) {
                struct pb a = { .n = 0 };
                pb_str(&a, 1, int_attr);
                pb_varint(&a, 3, (uint64_t)ival);
                pb_varint(&a, 20, 2); /* AttributeProto.INT */
                pb_msg(&n, 5, &a);
        }
        pb_msg(g, 1, &n);
}

/* The Loop body of the models below: cond and v pass through unchanged. */
static void pb_loop_body(struct pb *body)
{
        const char *cin[] = { "cond_in" }, *vin[] = { "v_in" };

        pb_node(body, "Identity", cin, 1, "cond_out", NULL, NULL, 0);
        pb_node(body, "Identity", vin, 1, "v_out", NULL, NULL, 0);
        pb_str(body, 2, "body");
        pb_value(body, 11, "iter", 7, -1);
        pb_value(body, 11, "cond_in", 9, -1);
        pb_value(body, 11, "v_in", 1, 1);
        pb_value(body, 12, "cond_out", 9, -1);
        pb_value(body, 12, "v_out", 1, 1);
}

/* A scalar (rank 0, or 1-D of one element when dims1) initializer of dtype with raw data. */
static void pb_initializer(struct pb *g, const char *name, int dtype, int dims1,
                           const void *data, size_t len)
{
        struct pb t = { .n = 0 };

        if (dims1)
                pb_varint(&t, 1, 1);
        pb_varint(&t, 2, (uint64_t)dtype);
        pb_str(&t, 8, name);
        pb_bytes(&t, 9, data, len);
        pb_msg(g, 5, &t);
}

/* ModelProto (IR 8, default opset 16) around graph g. */
static void pb_model(struct pb *m, const struct pb *g)
{
        struct pb opset = { .n = 0 };

        memset(m, 0, sizeof(*m));
        pb_varint(m, 1, 8); /* ir_version */
        pb_str(&opset, 1, "");
        pb_varint(&opset, 2, 16);
        pb_msg(m, 8, &opset);
        pb_msg(m, 7, g);
}

/* Loop(M, cond, v) whose body passes cond and v through: with M = INT64_MAX and cond true
 * it never ends by itself. weighted: v goes through Add(v, w) with an initializer w first, so
 * the graph has weights in device memory. */
static void endless_model(struct pb *m, int weighted)
{
        struct pb body = { .n = 0 }, g = { .n = 0 };
        const char *lin[] = { "M", "cond", "v" };
        const char *ain[] = { "v", "w" }, *lwin[] = { "M", "cond", "vw" };

        pb_loop_body(&body);
        if (weighted) {
                float one = 1.0f;
                pb_initializer(&g, "w", 1, 1, &one, sizeof(one));
                pb_node(&g, "Add", ain, 2, "vw", NULL, NULL, 0);
                pb_node(&g, "Loop", lwin, 3, "v_final", &body, NULL, 0);
        } else {
                pb_node(&g, "Loop", lin, 3, "v_final", &body, NULL, 0);
        }
        pb_str(&g, 2, "endless");
        pb_value(&g, 11, "M", 7, -1);
        pb_value(&g, 11, "cond", 9, -1);
        pb_value(&g, 11, "v", 1, 1);
        pb_value(&g, 12, "v_final", 1, 1);
        pb_model(m, &g);
}

/* One run of the endless Loop, submitted on a new stream of dev. */
struct loop_run {
        npu_graph_t g;
        npu_stream_t s;
        npu_buffer_t in, out;
};

/* Loop(M, cond, v) with M = 0 and cond = true initializers: the run-cost estimate sees a loop
 * that never iterates, while v has no data yet (issue 9, item 1). */
static void zero_loop_model(struct pb *m)
{
        struct pb body = { .n = 0 }, g = { .n = 0 };
        const char *lin[] = { "M", "cond", "v" };
        int64_t zero = 0;
        uint8_t yes = 1;

        pb_loop_body(&body);
        pb_initializer(&g, "M", 7, 0, &zero, sizeof(zero));
        pb_initializer(&g, "cond", 9, 0, &yes, sizeof(yes));
        pb_node(&g, "Loop", lin, 3, "v_final", &body, NULL, 0);
        pb_str(&g, 2, "zero");
        pb_value(&g, 11, "v", 1, 1);
        pb_value(&g, 12, "v_final", 1, 1);
        pb_model(m, &g);
}

/* ReduceSum(ConstantOfShape(shape)): the intermediate is as large as the client says, the
 * output one float. */
static void big_intermediate_model(struct pb *m)
{
        struct pb g = { .n = 0 };
        const char *sin[] = { "shape" }, *bin[] = { "big" };

        pb_node(&g, "ConstantOfShape", sin, 1, "big", NULL, NULL, 0);
        pb_node(&g, "ReduceSum", bin, 1, "sum", NULL, "keepdims", 0);
        pb_str(&g, 2, "big");
        pb_value(&g, 11, "shape", 7, 1);
        pb_value(&g, 12, "sum", 1, -1);
        pb_model(m, &g);
}

static char run_message[512]; /* the last run's error message */

/* Run the model with an intermediate of `elems` floats; the run's status. */
static int run_big_intermediate(npu_context_t *c, int64_t elems, float *ret_sum)
{
        struct pb model;
        npu_graph_t g;
        npu_buffer_t b;
        npu_stream_t s;
        npu_status_t st;

        big_intermediate_model(&model);
        if ((st = npu_graph_load(c, 0, model.b, model.n, &g)) || (st = npu_malloc(c, 0, 64, &b)) ||
            (st = npu_stream_create(c, 0, 0, &s)) ||
            (st = npu_memcpy_to_device(c, b, 0, &elems, sizeof(elems))))
                return st;
        npu_tensor_t in = { .buf = b, .dtype = NPU_INT64, .ndim = 1, .dims = { 1 } };
        npu_tensor_t out = { .buf = b, .offset = 8, .dtype = NPU_FLOAT32, .ndim = 0 };
        if ((st = npu_graph_run(c, s, g, &in, 1, &out, 1, NULL)))
                return st;
        st = npu_stream_synchronize(c, s);
        snprintf(run_message, sizeof(run_message), "%s", st ? npu_error_message() : "");
        fprintf(stderr, "intermediate of %lld floats: %d %s\n", (long long)elems, st, run_message);
        if (st == NPU_OK && ret_sum)
                st = npu_memcpy_from_device(c, ret_sum, b, 8, sizeof(*ret_sum));
        npu_stream_destroy(c, s);
        npu_free(c, b);
        npu_graph_unload(c, g);
        return st;
}

/* The attacker (64 MiB quota in start_daemon's config: see attack_big) asks for a 4 GiB
 * intermediate: refused as over its quota, npud's RSS stays small. */
static int attack_big(void *arg)
{
        npu_context_t *c;
        float sum = -1;

        if (npu_connect(daemon_proc.sock, &c) != NPU_OK)
                return 2;
        if (run_big_intermediate(c, 1ll << 30, NULL) != NPU_ERR_QUOTA ||
            !strstr(run_message, "tenant 'attack'"))
                return 3;
        int st = run_big_intermediate(c, 1000, &sum);
        if (st != NPU_OK || sum != 0.0f) { /* small ones still run */
                fprintf(stderr, "attacker: small run: %d %s, sum %g\n", st, npu_error_message(), sum);
                return 4;
        }
        npu_disconnect(c);
        return 0;
}

/* ReduceSum(Relu(x)) with x fixed at 20 M float32: the memory plan gives one run an 80 MiB
 * arena, more than the attacker's 64 MiB quota, so the model is refused at load (QUOTA,
 * naming the tenant) instead of failing at every run. Root (no quota) loads it. */
static void big_plan_model(struct pb *m)
{
        struct pb g = { .n = 0 };
        const char *xin[] = { "x" }, *rin[] = { "r" };

        pb_node(&g, "Relu", xin, 1, "r", NULL, NULL, 0);
        pb_node(&g, "ReduceSum", rin, 1, "sum", NULL, "keepdims", 0);
        pb_str(&g, 2, "bigplan");
        pb_value(&g, 11, "x", 1, 20 << 20);
        pb_value(&g, 12, "sum", 1, -1);
        pb_model(m, &g);
}

static int attack_big_plan(void *arg)
{
        struct pb model;
        npu_context_t *c;
        npu_graph_t g;
        npu_status_t st;

        big_plan_model(&model);
        if (npu_connect(daemon_proc.sock, &c) != NPU_OK)
                return 2;
        st = npu_graph_load(c, 0, model.b, model.n, &g);
        if (st != NPU_ERR_QUOTA || !strstr(npu_error_message(), "arena") ||
            !strstr(npu_error_message(), "tenant 'attack'")) {
                fprintf(stderr, "attacker: big plan: %d %s\n", st, npu_error_message());
                return 3;
        }
        npu_disconnect(c);
        return 0;
}

/* Load the endless model (with weights when weighted) and stage the inputs (trip count
 * INT64_MAX, cond true) on dev. */
static int loop_prepare_w(npu_context_t *c, int dev, struct loop_run *r, int weighted)
{
        struct pb model;
        uint8_t host[64] = { 0 };
        int64_t trips = INT64_MAX;
        npu_status_t st;

        endless_model(&model, weighted);
        if ((st = npu_graph_load(c, dev, model.b, model.n, &r->g)) ||
            (st = npu_malloc(c, dev, 64, &r->in)) || (st = npu_malloc(c, dev, 64, &r->out)) ||
            (st = npu_stream_create(c, dev, 0, &r->s)))
                return st;
        memcpy(host, &trips, sizeof(trips));
        host[8] = 1;
        return npu_memcpy_to_device(c, r->in, 0, host, sizeof(host));
}

static int loop_prepare(npu_context_t *c, int dev, struct loop_run *r)
{
        return loop_prepare_w(c, dev, r, 0);
}

static int loop_start(npu_context_t *c, struct loop_run *r)
{
        npu_tensor_t in[3] = {
                { .buf = r->in, .offset = 0, .dtype = NPU_INT64, .ndim = 0 },
                { .buf = r->in, .offset = 8, .dtype = NPU_BOOL, .ndim = 0 },
                { .buf = r->in, .offset = 16, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } },
        };
        npu_tensor_t out = { .buf = r->out, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
        return npu_graph_run(c, r->s, r->g, in, 3, &out, 1, NULL);
}

static int loop_submit(npu_context_t *c, int dev, struct loop_run *r)
{
        int st = loop_prepare(c, dev, r);
        return st ? st : loop_start(c, r);
}

/* The attacker: run the endless Loop and expect it to fail with the code in *arg within
 * 10 s. */
static int attack_expect(void *arg)
{
        int want = *(int *)arg;
        npu_context_t *c;
        struct loop_run r;
        double t0;
        npu_status_t st;

        if (npu_connect(daemon_proc.sock, &c) != NPU_OK)
                return 2;
        if (loop_submit(c, 0, &r) != NPU_OK) {
                fprintf(stderr, "attacker: submit: %s\n", npu_error_message());
                return 3;
        }
        t0 = now_s();
        st = npu_stream_synchronize(c, r.s);
        fprintf(stderr, "attacker: run ended after %.2f s: %d %s\n", now_s() - t0, st,
                npu_error_message());
        if ((int)st != want || now_s() - t0 > 10.0)
                return 4;
        npu_disconnect(c);
        return 0;
}

/* The attacker: start endless runs on both devices (two each: every host worker), tell
 * the parent through the pipe, then wait to be killed. */
static int attack_and_hold(void *arg)
{
        int fd = *(int *)arg;
        npu_context_t *c;
        struct loop_run r[4];

        if (npu_connect(daemon_proc.sock, &c) != NPU_OK)
                return 2;
        /* everything staged first: once the runs hold every host worker, even a copy of
         * this client would wait */
        for (int i = 0; i < 4; i++)
                if (loop_prepare(c, i % 2, &r[i]) != NPU_OK) {
                        fprintf(stderr, "attacker: prepare: %s\n", npu_error_message());
                        return 3;
                }
        for (int i = 0; i < 4; i++)
                if (loop_start(c, &r[i]) != NPU_OK) {
                        fprintf(stderr, "attacker: submit: %s\n", npu_error_message());
                        return 3;
                }
        if (npu_ping(c) != NPU_OK || write(fd, "x", 1) != 1)
                return 4;
        for (;;)
                pause();
}

/* The attacker: an endless run of a graph with weights, then unload the graph while the run
 * goes on; tell the parent, wait to be killed. */
static int attack_unload_and_hold(void *arg)
{
        int fd = *(int *)arg;
        npu_context_t *c;
        struct loop_run r;

        if (npu_connect(daemon_proc.sock, &c) != NPU_OK || loop_prepare_w(c, 0, &r, 1) != NPU_OK)
                return 2;
        if (loop_start(c, &r) != NPU_OK || npu_graph_unload(c, r.g) != NPU_OK ||
            npu_ping(c) != NPU_OK || write(fd, "x", 1) != 1)
                return 3;
        for (;;)
                pause();
}

/* memory_used of tenant name ("tenants" admin method). */
static long long tenant_memory_used(const char *name)
{
        return harness_tenant_memory_used(ctx, name);
}

/* Start fn as the attacker and wait until it says its runs are submitted. */
static pid_t spawn_attacker(int (*fn)(void *))
{
        int p[2];
        char c;

        ck_assert_int_eq(pipe(p), 0);
        pid_t pid = harness_spawn_as(attacker_uid, attacker_gid, fn, &p[1]);
        ck_assert_int_gt(pid, 0);
        close(p[1]);
        ck_assert_msg(read(p[0], &c, 1) == 1, "the attacker could not start its runs");
        close(p[0]);
        return pid;
}

static pid_t spawn_holder(void)
{
        pid_t pid = spawn_attacker(attack_and_hold);
        usleep(300 * 1000); /* let the runs reach the workers */
        return pid;
}

START_TEST(test_trip_cap_refuses_endless_loop)
{
        int want = NPU_ERR_LIMIT;

        start_daemon(-1, -1, "compute"); /* the defaults: a trip cap of 10^7 */
        if (attacker_uid) {
                ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, attack_expect, &want), 0);
                root_work_completes();
        }
        stop_daemon();
}
END_TEST

START_TEST(test_run_time_limit)
{
        int want = NPU_ERR_LIMIT;

        start_daemon(700, 0, "compute"); /* no trip cap: only the time limit stops it */
        if (attacker_uid) {
                ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, attack_expect, &want), 0);
                root_work_completes();
        }
        stop_daemon();
}
END_TEST

START_TEST(test_killed_client_runs_cancelled)
{
        start_daemon(0, 0, "compute"); /* no limits at all */
        if (attacker_uid) {
                pid_t pid = spawn_holder();
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                root_work_completes();
                /* the admin sees no leftover session of the attacker */
                char *json = NULL;
                OK(npu_admin_call(ctx, "sessions", NULL, &json));
                ck_assert_ptr_nonnull(json);
                free(json);
        }
        stop_daemon();
}
END_TEST

/* While the attacker stays connected with endless runs on both devices (no limits), its
 * graph runs hold at most all host workers but one: root's work still completes. */
START_TEST(test_endless_runs_leave_a_worker)
{
        start_daemon(0, 0, "compute");
        if (attacker_uid) {
                pid_t pid = spawn_holder();
                root_work_completes();
                root_work_completes();
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
        }
        stop_daemon();
}
END_TEST

/* Unloading a graph while a run still uses it keeps its weights charged to the tenant until
 * the run ends (here: cancelled when the client dies). */
START_TEST(test_unloaded_weights_stay_charged)
{
        start_daemon(0, 0, "compute");
        if (attacker_uid) {
                pid_t pid = spawn_attacker(attack_unload_and_hold);
                /* two 64-byte buffers and the weights, each a 512-byte granule */
                ck_assert_int_eq(tenant_memory_used("attack"), 3 * 512);
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                for (int i = 0; i < 100 && tenant_memory_used("attack") != 0; i++)
                        usleep(20 * 1000);
                ck_assert_int_eq(tenant_memory_used("attack"), 0);
                root_work_completes();
        }
        stop_daemon();
}
END_TEST

START_TEST(test_reset_cancels_running)
{
        start_daemon(0, 0, "compute");
        if (attacker_uid) {
                pid_t pid = spawn_holder();
                for (int dev = 0; dev < 2; dev++) {
                        char params[64], *json = NULL;
                        snprintf(params, sizeof(params), "{\"device\": %d}", dev);
                        OK(npu_admin_call(ctx, "reset", params, &json));
                        free(json);
                }
                /* the reset ends (health ok, undrained) once the runs stopped */
                double t0 = now_s();
                for (;;) {
                        char *json = NULL;
                        OK(npu_admin_call(ctx, "health", NULL, &json));
                        int draining = strstr(json, "\"draining\": true") ||
                                       strstr(json, "\"draining\":true");
                        free(json);
                        if (!draining)
                                break;
                        ck_assert_msg(now_s() - t0 < 5.0, "the reset did not end within 5 s");
                        usleep(50 * 1000);
                }
                root_work_completes();
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
        }
        stop_daemon();
}
END_TEST

START_TEST(test_shutdown_with_endless_runs)
{
        start_daemon(0, 0, "compute");
        if (attacker_uid) {
                pid_t pid = spawn_holder();
                double t0 = now_s();
                npu_disconnect(ctx);
                ctx = NULL;
                /* harness_stop waits 10 s for a clean exit, then SIGKILLs (status != 0) */
                ck_assert_int_eq(harness_stop(&daemon_proc), 0);
                ck_assert_msg(now_s() - t0 < 5.0, "npud took %.1f s to stop", now_s() - t0);
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                return;
        }
        stop_daemon();
}
END_TEST

/* A slow fault holds a unit back on the loop thread, never a shared worker: device 1 stays
 * fast while device 0 is slowed 30000 times, and clearing the fault ends the wait. */
static void slow_device_isolated(const char *mode)
{
        npu_buffer_t big;
        npu_stream_t s0;
        npu_event_t ev;
        char *json = NULL;

        start_daemon(-1, -1, mode);
        OK(npu_admin_call(ctx, "fault_inject",
                          "{\"device\": 0, \"kind\": \"slow\", \"value\": 30000}", &json));
        free(json);
        OK(npu_malloc(ctx, 0, 64u << 20, &big));
        OK(npu_stream_create(ctx, 0, 0, &s0));
        for (int i = 0; i < 4; i++) /* modelled at ~50 us each, 1.5 s once slowed */
                OK(npu_memset_async(ctx, s0, big, 0, i, 64u << 20, NULL));
        OK(npu_event_create(ctx, &ev));
        OK(npu_event_record(ctx, ev, s0));
        usleep(200 * 1000);
        ck_assert_int_eq(npu_event_query(ctx, ev), NPU_ERR_NOT_READY);
        root_work_completes();
        double t0 = now_s();
        OK(npu_admin_call(ctx, "fault_clear", "{\"device\": 0}", &json));
        free(json);
        OK(npu_stream_synchronize(ctx, s0));
        ck_assert_msg(now_s() - t0 < 5.0, "slowed work took %.1f s after fault clear", now_s() - t0);
        OK(npu_event_destroy(ctx, ev));
        OK(npu_stream_destroy(ctx, s0));
        OK(npu_free(ctx, big));
        stop_daemon();
}

START_TEST(test_slow_fault_isolated_compute)
{
        slow_device_isolated("compute");
}
END_TEST

START_TEST(test_intermediates_charged)
{
        start_daemon(-1, -1, "compute");
        if (attacker_uid) {
                long before = harness_proc_kib(daemon_proc.pid, "VmRSS");
                ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, attack_big, NULL), 0);
                ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, attack_big_plan, NULL), 0);
                struct pb plan_model;
                npu_graph_t pg;
                big_plan_model(&plan_model);
                OK(npu_graph_load(ctx, 0, plan_model.b, plan_model.n, &pg));
                OK(npu_graph_unload(ctx, pg));
                /* root has no quota: half of the host's memory bounds all running work */
                ck_assert_int_eq(run_big_intermediate(ctx, 1ll << 40, NULL), NPU_ERR_QUOTA);
                ck_assert_ptr_nonnull(strstr(run_message, "host memory"));
                long after = harness_proc_kib(daemon_proc.pid, "VmRSS");
                fprintf(stderr, "npud RSS %ld KiB before, %ld KiB after\n", before, after);
                ck_assert_int_lt(after, before + 256 * 1024);
                root_work_completes();
        }
        stop_daemon();
}
END_TEST

/* Max(x, "") with x fixed at [4]: an input of a variadic operator left out. Its kernel once
 * read through the missing input's null data (found by fuzz_graph); the model is refused,
 * the input named, and the daemon and root's work go on. */
static int attack_missing_input(void *arg)
{
        struct pb g = { .n = 0 }, model;
        const char *in[] = { "x", "" };
        npu_context_t *c;
        npu_graph_t gr;

        pb_node(&g, "Max", in, 2, "y", NULL, NULL, 0);
        pb_str(&g, 2, "missing");
        pb_value(&g, 11, "x", 1, 4);
        pb_value(&g, 12, "y", 1, 4);
        pb_model(&model, &g);
        if (npu_connect(daemon_proc.sock, &c) != NPU_OK)
                return 2;
        npu_status_t st = npu_graph_load(c, 0, model.b, model.n, &gr);
        if (st == NPU_OK || !strstr(npu_error_message(), "input 1 is missing")) {
                fprintf(stderr, "attacker: Max with an input left out: %d %s\n", st, npu_error_message());
                return 3;
        }
        npu_disconnect(c);
        return 0;
}

START_TEST(test_missing_input_refused)
{
        start_daemon(-1, -1, "compute");
        if (attacker_uid) {
                ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, attack_missing_input, NULL), 0);
                root_work_completes();
        }
        stop_daemon();
}
END_TEST

/* A single-operator launch that runs past the tenant's time limit fails with limit, never
 * succeeds with partial output (reductions stop without an error of their own). */
START_TEST(test_launch_time_limit)
{
        npu_buffer_t in, out;
        npu_stream_t s;
        const int64_t n = 64ll << 20; /* 256 MiB of floats: far more than 1 ms of ReduceSum */

        { /* root's own tenant with a 1 ms limit */
                char conf[128], json[] = "{\"tenants\": [{\"name\": \"quick\", \"uids\": [0],"
                                         " \"max_run_ms\": 1}]}";
                snprintf(conf, sizeof(conf), "/tmp/npud-hostile-run-quick-%d.json", (int)getpid());
                FILE *f = fopen(conf, "w");
                ck_assert_ptr_nonnull(f);
                fputs(json, f);
                fclose(f);
                const char *extra[] = { "--config", conf, "--workers", "2", NULL };
                ck_assert_int_eq(harness_start(&daemon_proc, extra), 0);
                unlink(conf);
                OK(npu_connect(daemon_proc.sock, &ctx));
        }
        OK(npu_malloc(ctx, 0, (uint64_t)n * 4, &in));
        OK(npu_malloc(ctx, 0, 64, &out));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_memset_async(ctx, s, in, 0, 0, (uint64_t)n * 4, NULL));
        OK(npu_stream_synchronize(ctx, s));
        npu_tensor_t ti = { .buf = in, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { n } };
        npu_tensor_t to = { .buf = out, .dtype = NPU_FLOAT32, .ndim = 0 };
        npu_attr_t keep = { .name = "keepdims", .i = 0 };
        OK(npu_launch(ctx, s, "ReduceSum", &ti, 1, &to, 1, &keep, 1, NULL));
        npu_status_t st = npu_stream_synchronize(ctx, s);
        fprintf(stderr, "ReduceSum over 256 MiB with max_run_ms 1: %d %s\n", st, npu_error_message());
        ck_assert_int_eq(st, NPU_ERR_LIMIT);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "time limit"));
        OK(npu_stream_destroy(ctx, s));
        OK(npu_free(ctx, in));
        OK(npu_free(ctx, out));
        stop_daemon();
}
END_TEST

/* Issue 9, item 1: a Loop with M = 0 crashed npud's loop thread (the run-cost estimate
 * copied a carried value that has no data yet). It now runs, and v passes through. */
START_TEST(test_loop_zero_trips)
{
        struct pb model;
        npu_graph_t g;
        npu_buffer_t b;
        npu_stream_t st;
        float v = 42.0f, got = 0;

        start_daemon(-1, -1, "compute");
        zero_loop_model(&model);
        OK(npu_graph_load(ctx, 0, model.b, model.n, &g));
        OK(npu_malloc(ctx, 0, 64, &b));
        OK(npu_stream_create(ctx, 0, 0, &st));
        OK(npu_memcpy_to_device(ctx, b, 0, &v, sizeof(v)));
        npu_tensor_t in = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
        npu_tensor_t out = { .buf = b, .offset = 32, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
        OK(npu_graph_run(ctx, st, g, &in, 1, &out, 1, NULL));
        OK(npu_stream_synchronize(ctx, st));
        OK(npu_memcpy_from_device(ctx, &got, b, 32, sizeof(got)));
        ck_assert(got == 42.0f);
        root_work_completes();
        stop_daemon();
}
END_TEST

/* Simulated device memory beyond what the host can back is said at start-up (issue 9, item 5:
 * two 910B3 declare 128 GiB). */
START_TEST(test_device_memory_warning)
{
        struct sysinfo si;
        char line[512];
        int found = 0;

        start_daemon(-1, -1, "compute");
        ck_assert_int_eq(sysinfo(&si), 0);
        FILE *f = fopen(daemon_proc.log, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f))
                found |= strstr(line, "declare 128.0 GiB of device memory") != NULL;
        fclose(f);
        uint64_t host = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
        ck_assert_int_eq(found, host < (128ull << 30));
        stop_daemon();
}
END_TEST

/* HOSTILE_ONLY=test_name runs one test (to check a fix against an older npud quickly). */
#define ADD(t) \
        do { \
                const char *only = getenv("HOSTILE_ONLY"); \
                if (!only || strcmp(only, #t) == 0) \
                        tcase_add_test(tc, t); \
        } while (0)

static Suite *suite(void)
{
        Suite *s = suite_create("integration-hostile-run");
        TCase *tc = tcase_create("endless");

        tcase_set_timeout(tc, 60);
        ADD(test_loop_zero_trips);
        ADD(test_trip_cap_refuses_endless_loop);
        ADD(test_run_time_limit);
        ADD(test_killed_client_runs_cancelled);
        ADD(test_endless_runs_leave_a_worker);
        ADD(test_unloaded_weights_stay_charged);
        ADD(test_reset_cancels_running);
        ADD(test_shutdown_with_endless_runs);
        ADD(test_slow_fault_isolated_compute);
        ADD(test_intermediates_charged);
        ADD(test_missing_input_refused);
        ADD(test_launch_time_limit);
        ADD(test_device_memory_warning);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

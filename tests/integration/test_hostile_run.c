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

/* ---- float64 accumulation under attack (npu_graph_load_with, NPU_ACCUMULATE_FLOAT64) ----
 *
 * A graph loaded to accumulate in float64 makes float64 copies of constant MatMul / Gemm
 * weights at load (graph/compile-tune.c, within the quota's room), converts operands to
 * float64 scratch at run time (charged to the run's budget) and runs a 2-D Conv over a padded
 * float64 copy of its input (ops/conv-f64.c, up to 256 MiB, extents up to 2^30). The models
 * here carry weights of up to 32 MiB: a protobuf buffer that grows. */

struct dpb {
        uint8_t *b;
        size_t n, cap;
};

static void dpb_put(struct dpb *m, const void *p, size_t len)
{
        if (!len)
                return;
        if (m->n + len > m->cap) {
                size_t cap = m->cap ? m->cap : 4096;
                while (cap < m->n + len)
                        cap *= 2;
                uint8_t *nb = realloc(m->b, cap);
                if (!nb)
                        abort(); /* the attacker's process: no Check runner to report to */
                m->b = nb;
                m->cap = cap;
        }
        memcpy(m->b + m->n, p, len);
        m->n += len;
}

static void dpb_raw_varint(struct dpb *m, uint64_t v)
{
        uint8_t t[10];
        size_t k = 0;

        do {
                t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
        dpb_put(m, t, k);
}

static void dpb_varint(struct dpb *m, int field, uint64_t v)
{
        dpb_raw_varint(m, (uint64_t)field << 3);
        dpb_raw_varint(m, v);
}

static void dpb_bytes(struct dpb *m, int field, const void *data, size_t len)
{
        dpb_raw_varint(m, (uint64_t)field << 3 | 2);
        dpb_raw_varint(m, len);
        dpb_put(m, data, len);
}

static void dpb_free(struct dpb *m)
{
        free(m->b);
        memset(m, 0, sizeof(*m));
}

static int64_t numel_of(int ndim, const int64_t *dims)
{
        int64_t n = 1;

        for (int i = 0; i < ndim; i++)
                n *= dims[i];
        return n;
}

/* ValueInfoProto of a float32 tensor of rank ndim (an extent < 0: open), as a graph's input
 * (field 11) or output (12). */
static void dpb_value(struct dpb *g, int field, const char *name, int ndim, const int64_t *dims)
{
        struct pb vi = { .n = 0 }, tp = { .n = 0 }, tt = { .n = 0 }, sh = { .n = 0 };

        for (int i = 0; i < ndim; i++) {
                struct pb d = { .n = 0 };
                if (dims[i] >= 0)
                        pb_varint(&d, 1, (uint64_t)dims[i]);
                else
                        pb_str(&d, 2, "n");
                pb_msg(&sh, 1, &d);
        }
        pb_varint(&tt, 1, 1); /* FLOAT */
        pb_msg(&tt, 2, &sh);
        pb_msg(&tp, 1, &tt);
        pb_str(&vi, 1, name);
        pb_msg(&vi, 2, &tp);
        dpb_bytes(g, field, vi.b, vi.n);
}

/* A float32 initializer with raw little-endian data (x86). */
static void dpb_initializer(struct dpb *g, const char *name, int ndim, const int64_t *dims, const float *v)
{
        struct dpb t = { 0 };

        for (int i = 0; i < ndim; i++)
                dpb_varint(&t, 1, (uint64_t)dims[i]);
        dpb_varint(&t, 2, 1); /* FLOAT */
        dpb_bytes(&t, 8, name, strlen(name));
        dpb_bytes(&t, 9, v, (size_t)numel_of(ndim, dims) * sizeof(float));
        dpb_bytes(g, 5, t.b, t.n);
        dpb_free(&t);
}

struct ints_attr {
        const char *name;
        int n;
        const int64_t *v;
};

/* NodeProto op(in...) -> out with INTS attributes. */
static void dpb_node(struct dpb *g, const char *op, const char *const *in, int nin, const char *out,
                     const struct ints_attr *attrs, int nattrs)
{
        struct pb n = { .n = 0 };

        for (int i = 0; i < nin; i++)
                pb_str(&n, 1, in[i]);
        pb_str(&n, 2, out);
        pb_str(&n, 3, out);
        pb_str(&n, 4, op);
        for (int a = 0; a < nattrs; a++) {
                struct pb at = { .n = 0 };
                pb_str(&at, 1, attrs[a].name);
                for (int k = 0; k < attrs[a].n; k++)
                        pb_varint(&at, 8, (uint64_t)attrs[a].v[k]);
                pb_varint(&at, 20, 7); /* AttributeProto.INTS */
                pb_msg(&n, 5, &at);
        }
        dpb_bytes(g, 1, n.b, n.n);
}

/* ModelProto (IR 8, opset 16) around graph g, which it frees. */
static void dpb_model(struct dpb *m, struct dpb *g)
{
        struct pb opset = { .n = 0 };

        memset(m, 0, sizeof(*m));
        dpb_varint(m, 1, 8);
        pb_str(&opset, 1, "");
        pb_varint(&opset, 2, 16);
        dpb_bytes(m, 8, opset.b, opset.n);
        dpb_bytes(m, 7, g->b, g->n);
        dpb_free(g);
}

/* A 2-D Conv: input x [1, C, H, W], filters w [M, C, K, K] (an initializer), square pads,
 * strides and dilations. */
struct conv_geom {
        int64_t x[4], w[4];
        int64_t pad, stride, dil;
};

/* An output extent as the ONNX formula gives it, or -1 when the geometry has none or npud
 * refuses it (attributes past INT32_MAX: nn_geom_attrs). */
static int64_t conv_extent(int64_t in, int64_t k, const struct conv_geom *cg)
{
        if (cg->pad > INT32_MAX || cg->stride > INT32_MAX || cg->dil > INT32_MAX)
                return -1;
        int64_t span = in + 2 * cg->pad - ((k - 1) * cg->dil + 1);
        return span < 0 ? -1 : span / cg->stride + 1;
}

static void conv_out_dims(const struct conv_geom *cg, int64_t y[4])
{
        y[0] = cg->x[0];
        y[1] = cg->w[0];
        y[2] = conv_extent(cg->x[2], cg->w[2], cg);
        y[3] = conv_extent(cg->x[3], cg->w[3], cg);
}

static void conv_model(struct dpb *m, const struct conv_geom *cg, const float *w)
{
        struct dpb g = { 0 };
        const char *in[] = { "x", "w" };
        int64_t y[4], pads[4] = { cg->pad, cg->pad, cg->pad, cg->pad }, st[2] = { cg->stride, cg->stride };
        int64_t dil[2] = { cg->dil, cg->dil };
        const struct ints_attr attrs[] = { { "pads", 4, pads }, { "strides", 2, st }, { "dilations", 2, dil } };

        conv_out_dims(cg, y);
        dpb_node(&g, "Conv", in, 2, "y", attrs, 3);
        dpb_bytes(&g, 2, "f64conv", 7);
        dpb_initializer(&g, "w", 4, cg->w, w);
        dpb_value(&g, 11, "x", 4, cg->x);
        dpb_value(&g, 12, "y", 4, y); /* open extents where npud should refuse the geometry */
        dpb_model(m, &g);
}

/* Output (m, oh, ow) of image 0 in double: every product of two float32 values is exact. */
static double conv_ref(const struct conv_geom *cg, const float *x, const float *w, int64_t m, int64_t oh, int64_t ow)
{
        double s = 0.0;

        for (int64_t c = 0; c < cg->x[1]; c++)
                for (int64_t i = 0; i < cg->w[2]; i++)
                        for (int64_t j = 0; j < cg->w[3]; j++) {
                                int64_t ih = oh * cg->stride - cg->pad + i * cg->dil;
                                int64_t iw = ow * cg->stride - cg->pad + j * cg->dil;
                                if (ih < 0 || ih >= cg->x[2] || iw < 0 || iw >= cg->x[3])
                                        continue;
                                s += (double)x[(c * cg->x[2] + ih) * cg->x[3] + iw] *
                                     (double)w[((m * cg->w[1] + c) * cg->w[2] + i) * cg->w[3] + j];
                        }
        return s;
}

/* Data of small dyadic values: every sum the tests make is exact in float32 already, so a
 * result must equal the reference bit for bit. */
static void dyadic_fill(float *v, int64_t n, int64_t mul, int64_t mod, float scale)
{
        for (int64_t i = 0; i < n; i++)
                v[i] = (float)((i * mul) % mod - mod / 2) * scale;
}

/* What one load-and-run of the attacker (or root) got. */
struct f64_outcome {
        npu_status_t st;
        const char *stage; /* where it stopped: "load", "buffers", "run", "copy back" */
        char msg[512];
        double secs;
        json_t *info;      /* graph_info of the loaded graph (NULL if none); caller decrefs */
};

/* The accumulation the attacks load with: float64, then mixed (whose GEMMs keep a float32
 * copy of constant weights and float32 scratch, and whose convolutions an im2col of a band
 * of lines in float32 column blocks). */
static int attack_acc = NPU_ACCUMULATE_FLOAT64;

static const char *attack_acc_name(void)
{
        return attack_acc == NPU_ACCUMULATE_MIXED ? "mixed" : "float64";
}

/* The bytes of the packed copy of W [k, n] under attack_acc: column blocks of 32. */
static long long attack_copy_bytes(int64_t k, int64_t n)
{
        return (long long)k * ((n + 31) / 32 * 32) * (attack_acc == NPU_ACCUMULATE_MIXED ? 4 : 8);
}

/* Load model with attack_acc's accumulation on device 0 and run it once on x (xnd, xd) into y
 * (ynd, yd), each in a buffer of its own; the graph stays loaded in *keep when keep is not
 * NULL and the load succeeded. The first failure's status. */
static npu_status_t f64_load_run(npu_context_t *c, const struct dpb *model, const float *x, int xnd,
                                 const int64_t *xd, float *y, int ynd, const int64_t *yd, struct f64_outcome *o,
                                 npu_graph_t *keep)
{
        size_t xn = (size_t)numel_of(xnd, xd) * sizeof(float), yn = (size_t)numel_of(ynd, yd) * sizeof(float);
        npu_buffer_t bx, by;
        npu_stream_t s;
        npu_graph_t g;
        int have = 0; /* 1 graph, 2 x, 4 y, 8 stream */
        double t0 = now_s();
        npu_status_t st;

        memset(o, 0, sizeof(*o));
        o->stage = "load";
        npu_load_options_t opts = { .size = sizeof(opts), .accumulate = attack_acc };
        st = npu_graph_load_with(c, 0, model->b, model->n, &opts, &g);
        if (st == NPU_OK) {
                char *js = NULL;
                have |= 1;
                if (npu_graph_info(c, g, &js) == NPU_OK && js)
                        o->info = json_loads(js, 0, NULL);
                free(js);
                o->stage = "buffers";
                if (!(st = npu_malloc(c, 0, xn, &bx)))
                        have |= 2;
                if (!st && !(st = npu_malloc(c, 0, yn, &by)))
                        have |= 4;
                if (!st && !(st = npu_stream_create(c, 0, 0, &s)))
                        have |= 8;
                if (!st)
                        st = npu_memcpy_to_device(c, bx, 0, x, xn);
                if (!st) {
                        npu_tensor_t ti = { .buf = bx, .dtype = NPU_FLOAT32, .ndim = xnd };
                        npu_tensor_t to = { .buf = by, .dtype = NPU_FLOAT32, .ndim = ynd };
                        memcpy(ti.dims, xd, sizeof(int64_t) * (size_t)xnd);
                        memcpy(to.dims, yd, sizeof(int64_t) * (size_t)ynd);
                        o->stage = "run";
                        st = npu_graph_run(c, s, g, &ti, 1, &to, 1, NULL);
                        if (!st)
                                st = npu_stream_synchronize(c, s);
                }
                if (!st) {
                        o->stage = "copy back";
                        st = npu_memcpy_from_device(c, y, by, 0, yn);
                }
        }
        o->st = st;
        snprintf(o->msg, sizeof(o->msg), "%s", st ? npu_error_message() : "");
        o->secs = now_s() - t0;
        if (have & 8)
                npu_stream_destroy(c, s);
        if (have & 4)
                npu_free(c, by);
        if (have & 2)
                npu_free(c, bx);
        if ((have & 1) && keep)
                *keep = g;
        else if (have & 1)
                npu_graph_unload(c, g);
        return st;
}

static void f64_report(const char *what, const struct f64_outcome *o)
{
        /* npud's peak RSS so far: /proc/PID/status is readable by every user */
        fprintf(stderr, "attacker (%s): %s: %s%s (%d %s) %s, %.2f s; npud peak RSS %ld KiB\n", attack_acc_name(), what,
                o->st ? "failed at " : "ok", o->st ? o->stage : "", (int)o->st, npu_strerror(o->st), o->msg, o->secs,
                harness_proc_kib(daemon_proc.pid, "VmHWM"));
}

/* compile.packed_bytes of a graph_info, -1 when missing. */
static long long info_packed_bytes(const json_t *info)
{
        json_t *cmp = info ? json_object_get(info, "compile") : NULL;
        json_t *pb = cmp ? json_object_get(cmp, "packed_bytes") : NULL;

        return json_is_integer(pb) ? (long long)json_integer_value(pb) : -1;
}

static int info_is_f64(const json_t *info)
{
        const char *acc = info ? json_string_value(json_object_get(info, "accumulate")) : NULL;

        return acc && strcmp(acc, attack_acc_name()) == 0;
}

#define ACHECK(cond, code, ...) \
        do { \
                if (!(cond)) { \
                        fprintf(stderr, "attacker: " __VA_ARGS__); \
                        fputc('\n', stderr); \
                        return code; \
                } \
        } while (0)

/* Attack 1: Conv geometries far outside any image on a [1, 1, 4, 4] input, float64 mode. */
static int f64_absurd_convs(npu_context_t *c)
{
        static const struct {
                const char *name;
                int64_t k, pad, stride, dil;
        } cases[] = {
                /* past INT32_MAX: refused by the attribute checks */
                { "1x1, pads and strides 2^40", 1, 1ll << 40, 1ll << 40, 1 },
                { "1x1, pads 2^40, stride 1", 1, 1ll << 40, 1, 1 },
                /* within them, but past conv-f64's 2^30 extents: the im2col path */
                { "1x1, pads and strides 2^31-1", 1, INT32_MAX, INT32_MAX, 1 },
                { "3x3 dilated 2^31-1 over pads 2^31-1", 3, INT32_MAX, 1, INT32_MAX },
                /* extents within 2^30, padded copy past its 256 MiB: the im2col path */
                { "1x1, pads and strides 2^28", 1, 1 << 28, 1 << 28, 1 },
                { "3x3, pads and strides 2^29 - 1", 3, (1 << 29) - 1, (1 << 29) - 1, 1 },
        };
        float x[16], w[9], y[64];

        dyadic_fill(x, 16, 5, 13, 0.125f);
        dyadic_fill(w, 9, 7, 11, 0.25f);
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                struct conv_geom cg = { .x = { 1, 1, 4, 4 }, .w = { 1, 1, cases[k].k, cases[k].k },
                                        .pad = cases[k].pad, .stride = cases[k].stride, .dil = cases[k].dil };
                int64_t yd[4];
                struct dpb model;
                struct f64_outcome o;

                conv_out_dims(&cg, yd);
                int refused = yd[2] < 0 || yd[3] < 0;
                int64_t ydb[4] = { 1, 1, refused ? 1 : yd[2], refused ? 1 : yd[3] };
                ACHECK(numel_of(4, ydb) <= 64, 10, "%s: output of %lld", cases[k].name, (long long)numel_of(4, ydb));
                conv_model(&model, &cg, w);
                memset(y, 0xff, sizeof(y));
                f64_load_run(c, &model, x, 4, cg.x, y, 4, ydb, &o, NULL);
                dpb_free(&model);
                f64_report(cases[k].name, &o);
                json_decref(o.info);
                ACHECK(o.secs < 10.0, 11, "%s: took %.1f s", cases[k].name, o.secs);
                if (refused) { /* at load or at the run, naming the attribute */
                        ACHECK((o.st == NPU_ERR_SHAPE || o.st == NPU_ERR_INVALID) &&
                                       (strcmp(o.stage, "load") == 0 || strcmp(o.stage, "run") == 0) &&
                                       strstr(o.msg, "Conv") &&
                                       strstr(o.msg, cases[k].stride > INT32_MAX ? "stride" : "pad"),
                               12, "%s: not refused naming the attribute", cases[k].name);
                        continue;
                }
                ACHECK(o.st == NPU_OK, 13, "%s: failed", cases[k].name);
                for (int64_t oh = 0; oh < yd[2]; oh++)
                        for (int64_t ow = 0; ow < yd[3]; ow++) {
                                double ref = conv_ref(&cg, x, w, 0, oh, ow);
                                float got = y[oh * yd[3] + ow];
                                ACHECK(got == (float)ref, 14, "%s: y[%lld][%lld] = %.9g, want %.9g", cases[k].name,
                                       (long long)oh, (long long)ow, got, ref);
                        }
        }
        return 0;
}

/* Attack 1, the padded copy: a 1x1 Conv with pads and strides of 2300 on [1, 1, 4, 4]: output
 * 3x3, but the padded float64 copy conv-f64 makes is 242 MiB (within its 256 MiB), far more
 * than the tenant's 64 MiB: conv-f64 cannot have it (ops_buf_try_alloc) and the im2col path
 * computes the right values, at load (tuning, under its own budget) and at the run. */
static int f64_padded_copy_conv(npu_context_t *c)
{
        struct conv_geom cg = { .x = { 1, 1, 4, 4 }, .w = { 1, 1, 1, 1 }, .pad = 2300, .stride = 2300, .dil = 1 };
        float x[16], w[1] = { 0.75f }, y[9];
        int64_t yd[4];
        struct dpb model;
        struct f64_outcome o;

        dyadic_fill(x, 16, 5, 13, 0.125f);
        conv_out_dims(&cg, yd);
        ACHECK(yd[2] == 3 && yd[3] == 3, 20, "padded copy: output %lldx%lld", (long long)yd[2], (long long)yd[3]);
        conv_model(&model, &cg, w);
        f64_load_run(c, &model, x, 4, cg.x, y, 4, yd, &o, NULL);
        dpb_free(&model);
        f64_report("1x1, pads and strides 2300 (padded copy 242 MiB)", &o);
        json_decref(o.info);
        ACHECK(o.secs < 10.0, 21, "padded copy: took %.1f s", o.secs);
        /* the padded copy does not fit the budget: the im2col path, which needs little */
        ACHECK(o.st == NPU_OK, 22, "padded copy: not computed (%d at %s)", (int)o.st, o.stage);
        for (int i = 0; i < 9; i++)
                ACHECK(y[i] == (float)conv_ref(&cg, x, w, 0, i / 3, i % 3), 23, "padded copy: y[%d] = %g", i, y[i]);
        return 0;
}

/* Attack 1, a large image: x [1, 16, 512, 512] and y of the same shape (16 MiB each, held in
 * device buffers charged to the tenant), 3x3 filters, pads 1: the padded float64 copy (16 x
 * 514 x 514 doubles, 32.2 MiB) is more than the ~32 MiB the quota leaves. The run computes
 * (spot-checked against double), or fails over quota; nothing else. */
static int f64_big_conv(npu_context_t *c)
{
        struct conv_geom cg = { .x = { 1, 16, 512, 512 }, .w = { 16, 16, 3, 3 }, .pad = 1, .stride = 1, .dil = 1 };
        int64_t nx = numel_of(4, cg.x), yd[4];
        float *x = malloc((size_t)nx * sizeof(float)), *y = malloc((size_t)nx * sizeof(float));
        float w[16 * 16 * 9];
        struct dpb model;
        struct f64_outcome o;
        int rc = 0;

        ACHECK(x && y, 30, "big conv: out of memory");
        dyadic_fill(x, nx, 131, 23, 0.0625f);
        dyadic_fill(w, 16 * 16 * 9, 7, 9, 0.125f);
        conv_out_dims(&cg, yd);
        conv_model(&model, &cg, w);
        f64_load_run(c, &model, x, 4, cg.x, y, 4, yd, &o, NULL);
        dpb_free(&model);
        f64_report("Conv [1,16,512,512] 3x3 pads 1 (padded float64 copy 32.2 MiB)", &o);
        if (o.secs > 15.0) {
                fprintf(stderr, "attacker: big conv: took %.1f s\n", o.secs);
                rc = 31;
        } else if (o.st != NPU_OK) {
                if (o.st != NPU_ERR_QUOTA || strcmp(o.stage, "run") != 0) {
                        fprintf(stderr, "attacker: big conv: not a quota failure of the run\n");
                        rc = 32;
                }
        } else if (!info_is_f64(o.info)) {
                fprintf(stderr, "attacker: big conv: graph_info does not say %s\n", attack_acc_name());
                rc = 33;
        } else {
                static const int64_t at[][3] = { { 0, 0, 0 },     { 0, 0, 511 },   { 15, 511, 0 }, { 15, 511, 511 },
                                                 { 7, 0, 300 },   { 3, 256, 511 }, { 9, 123, 45 }, { 12, 510, 1 },
                                                 { 1, 255, 256 }, { 14, 1, 1 } };
                for (size_t k = 0; !rc && k < sizeof(at) / sizeof(at[0]); k++) {
                        double ref = conv_ref(&cg, x, w, at[k][0], at[k][1], at[k][2]);
                        float got = y[(at[k][0] * 512 + at[k][1]) * 512 + at[k][2]];
                        if (got != (float)ref) {
                                fprintf(stderr, "attacker: big conv: y[%lld][%lld][%lld] = %.9g, want %.9g\n",
                                        (long long)at[k][0], (long long)at[k][1], (long long)at[k][2], got, ref);
                                rc = 34;
                        }
                }
        }
        json_decref(o.info);
        free(x);
        free(y);
        return rc;
}

/* Y = X W, X [8, k] a graph input, W [k, n] an initializer of dyadic values. */
static void matmul_model(struct dpb *m, int64_t k, int64_t n, const float *w)
{
        struct dpb g = { 0 };
        const char *in[] = { "X", "W" };
        int64_t wd[2] = { k, n }, xd[2] = { 8, k }, yd[2] = { 8, n };

        dpb_node(&g, "MatMul", in, 2, "Y", NULL, 0);
        dpb_bytes(&g, 2, "f64mm", 5);
        dpb_initializer(&g, "W", 2, wd, w);
        dpb_value(&g, 11, "X", 2, xd);
        dpb_value(&g, 12, "Y", 2, yd);
        dpb_model(m, &g);
}

/* Load and run Y = X W (W [k, n]) in float64 mode; every output checked against the exact
 * sum; the graph kept in *keep when keep is not NULL. */
static int f64_matmul(npu_context_t *c, int64_t k, int64_t n, struct f64_outcome *o, npu_graph_t *keep)
{
        float *w = malloc((size_t)(k * n) * sizeof(float)), *x = malloc((size_t)(8 * k) * sizeof(float));
        float *y = malloc((size_t)(8 * n) * sizeof(float));
        int64_t xd[2] = { 8, k }, yd[2] = { 8, n };
        struct dpb model;
        char what[96];
        int rc = 0;

        ACHECK(w && x && y, 40, "matmul: out of memory");
        dyadic_fill(w, k * n, 11, 17, 0.0625f);
        dyadic_fill(x, 8 * k, 3, 15, 0.125f);
        matmul_model(&model, k, n, w);
        f64_load_run(c, &model, x, 2, xd, y, 2, yd, o, keep);
        dpb_free(&model);
        /* the packed copy: column blocks of 32 (ops_f64_pack_b, ops_mixed_pack_b) */
        snprintf(what, sizeof(what), "MatMul with W [%lld, %lld] (%lld MiB; packed copy %lld MiB)", (long long)k,
                 (long long)n, (long long)(k * n * 4 >> 20), attack_copy_bytes(k, n) >> 20);
        f64_report(what, o);
        fprintf(stderr, "attacker: %s: packed_bytes %lld\n", what, info_packed_bytes(o->info));
        for (int64_t i = 0; !o->st && !rc && i < 8; i++)
                for (int64_t j = 0; !rc && j < n; j++) {
                        double s = 0.0;
                        for (int64_t kk = 0; kk < k; kk++)
                                s += (double)x[i * k + kk] * (double)w[kk * n + j];
                        if (y[i * n + j] != (float)s) {
                                fprintf(stderr, "attacker: %s: Y[%lld][%lld] = %.9g, want %.9g\n", what, (long long)i,
                                        (long long)j, y[i * n + j], s);
                                rc = 41;
                        }
                }
        free(w);
        free(x);
        free(y);
        return rc;
}

/* Attack 2, scratch: Y = X W with X [8, 2^19] (16 MiB, a device buffer) and W [2^19, 1] (2 MiB):
 * no float64 copy of W at load (one column block of 2^19 doubles: 128 MiB, past the room),
 * and at run time B's float64 scratch (the same 128 MiB) exceeds what the quota leaves;
 * gemm-f64.c then sums in a plain float64 loop, and the run computes the exact result. Under
 * mixed accumulation the same with float32 copies of half the size (64 MiB: past the room too,
 * at load and at run time), gemm-mixed.c's plain loop, and runs of dyadic products that
 * float32 sums exactly. */
static int f64_matmul_scratch(npu_context_t *c)
{
        const int64_t k = 1 << 19;
        struct f64_outcome o;
        int rc = f64_matmul(c, k, 1, &o, NULL);

        json_decref(o.info);
        if (rc)
                return rc;
        ACHECK(o.secs < 10.0, 55, "long K: took %.1f s", o.secs);
        /* the float64 scratch does not fit the budget: the plain loop, which needs none */
        ACHECK(o.st == NPU_OK, 56, "long K: not computed (%d at %s)", (int)o.st, o.stage);
        return 0;
}

/* Attack 2: constant weights whose float64 copy does not fit the quota's room, then weights
 * whose copy does (and is charged: the room it takes is gone for buffers until unload). */
static int f64_matmul_attacks(npu_context_t *c)
{
        const uint64_t quota = 64ull << 20, mib = 1ull << 20;
        struct f64_outcome o;
        npu_graph_t g;
        npu_buffer_t b;
        int rc;

        /* W [2048, 4096]: 32 MiB charged; its float64 copy (64 MiB) exceeds the 32 MiB left
         * (its float32 copy, 32 MiB, takes it all but what the load itself holds) */
        rc = f64_matmul(c, 2048, 4096, &o, NULL);
        long long packed = info_packed_bytes(o.info);
        int f64 = info_is_f64(o.info);
        json_decref(o.info);
        if (rc)
                return rc;
        if (o.st != NPU_OK) { /* a clean refusal over quota is all that may happen instead */
                ACHECK(o.st == NPU_ERR_QUOTA && strstr(o.msg, "tenant 'attack'"), 42, "big W: not a quota refusal");
        } else {
                ACHECK(f64, 43, "big W: graph_info does not say %s", attack_acc_name());
                ACHECK(packed == 0 || (attack_acc == NPU_ACCUMULATE_MIXED && packed <= (long long)(32 * mib)), 44,
                       "big W: %lld bytes packed past the quota's room", packed);
        }
        ACHECK(o.secs < 10.0, 45, "big W: took %.1f s", o.secs);

        /* W [1024, 2048]: 8 MiB; the float64 copy (16 MiB) fits, and counts against the quota */
        rc = f64_matmul(c, 1024, 2048, &o, &g);
        packed = info_packed_bytes(o.info);
        f64 = info_is_f64(o.info);
        json_decref(o.info);
        if (rc)
                return rc;
        ACHECK(o.st == NPU_OK && f64, 46, "small W: failed or not %s", attack_acc_name());
        long long copy = attack_copy_bytes(1024, 2048);
        ACHECK(packed >= copy && packed <= copy + copy / 4, 47, "small W: %lld bytes packed, want the %lld MiB copy",
               packed, copy >> 20);
        uint64_t left = quota - 8 * mib - (uint64_t)packed;
        npu_status_t st = npu_malloc(c, 0, left + mib, &b);
        fprintf(stderr, "attacker: %llu bytes with 8 MiB of weights and %lld packed held: %d %s\n",
                (unsigned long long)(left + mib), packed, (int)st, st ? npu_error_message() : "");
        ACHECK(st == NPU_ERR_QUOTA, 48, "small W: the packed copy is not charged to the tenant");
        ACHECK(npu_malloc(c, 0, left - mib, &b) == NPU_OK, 49, "small W: %s", npu_error_message());
        npu_free(c, b);
        ACHECK(npu_graph_unload(c, g) == NPU_OK, 50, "small W: unload: %s", npu_error_message());
        /* unloaded: weights and copy given back */
        st = npu_malloc(c, 0, quota - mib, &b);
        ACHECK(st == NPU_OK, 51, "after unload, %llu bytes: %s", (unsigned long long)(quota - mib),
               npu_error_message());
        npu_free(c, b);
        return 0;
}

static int attack_float64(void *arg)
{
        npu_context_t *c;
        int rc;

        (void)arg;
        if (npu_connect(daemon_proc.sock, &c) != NPU_OK)
                return 2;
        for (int acc = 0; acc < 2; acc++) {
                attack_acc = acc ? NPU_ACCUMULATE_MIXED : NPU_ACCUMULATE_FLOAT64;
                if ((rc = f64_absurd_convs(c)) || (rc = f64_padded_copy_conv(c)) || (rc = f64_big_conv(c)) ||
                    (rc = f64_matmul_attacks(c)) || (rc = f64_matmul_scratch(c)))
                        return rc + 100 * acc;
        }
        ACHECK(npu_ping(c) == NPU_OK, 3, "the session is gone: %s", npu_error_message());
        npu_disconnect(c);
        return 0;
}

START_TEST(test_float64_accumulation_attacks)
{
        double t0 = now_s();

        start_daemon(-1, -1, "compute");
        if (attacker_uid) {
                long rss0 = harness_proc_kib(daemon_proc.pid, "VmRSS");
                long hwm0 = harness_proc_kib(daemon_proc.pid, "VmHWM");
                ck_assert_int_eq(harness_run_as(attacker_uid, attacker_gid, attack_float64, NULL), 0);
                /* what the attacks freed goes back within a moment (the reclaimer clears large
                 * blocks just after their free); AddressSanitizer's quarantine keeps up to
                 * 256 MiB more of freed memory resident (the attacks run twice: float64, mixed) */
                long bound = rss0 + 256 * 1024;
#ifdef __SANITIZE_ADDRESS__
                bound += 256 * 1024;
#endif
                long rss1 = harness_proc_kib(daemon_proc.pid, "VmRSS");
                for (int i = 0; i < 100 && rss1 >= bound; i++) {
                        usleep(20 * 1000);
                        rss1 = harness_proc_kib(daemon_proc.pid, "VmRSS");
                }
                long hwm1 = harness_proc_kib(daemon_proc.pid, "VmHWM");
                fprintf(stderr, "npud RSS %ld KiB before, %ld KiB after; peak %ld KiB before, %ld KiB after\n", rss0,
                        rss1, hwm0, hwm1);
                ck_assert_int_lt(rss1, bound);
                /* at its peak npud held the attacker's charged bytes (64 MiB of quota, the
                 * run's scratch within it) and its load-time tuning (GRAPH_TUNE_BYTES of
                 * workspace, at most that much of data): nothing a model asks for beyond.
                 * Not under AddressSanitizer, whose quarantine keeps up to 256 MiB of freed
                 * memory resident. */
#ifndef __SANITIZE_ADDRESS__
                ck_assert_int_lt(hwm1, hwm0 + 224 * 1024);
#endif
                /* every charge of the attacker (weights, float64 copies) given back */
                for (int i = 0; i < 100 && tenant_memory_used("attack") != 0; i++)
                        usleep(20 * 1000);
                ck_assert_int_eq(tenant_memory_used("attack"), 0);
                root_work_completes();
        }
        /* root's own float64 graph: a strided, padded Conv of two channels, exact */
        struct conv_geom cg = { .x = { 1, 2, 7, 6 }, .w = { 3, 2, 3, 3 }, .pad = 1, .stride = 2, .dil = 1 };
        float x[84], w[54], y[3 * 4 * 3];
        int64_t yd[4];
        struct dpb model;
        struct f64_outcome o;
        dyadic_fill(x, 84, 5, 13, 0.125f);
        dyadic_fill(w, 54, 7, 11, 0.25f);
        conv_out_dims(&cg, yd);
        ck_assert(yd[1] == 3 && yd[2] == 4 && yd[3] == 3);
        conv_model(&model, &cg, w);
        f64_load_run(ctx, &model, x, 4, cg.x, y, 4, yd, &o, NULL);
        dpb_free(&model);
        ck_assert_msg(o.st == NPU_OK, "root's float64 Conv: %s: %s", o.stage, o.msg);
        ck_assert(info_is_f64(o.info));
        json_decref(o.info);
        for (int m = 0; m < 3; m++)
                for (int oh = 0; oh < 4; oh++)
                        for (int ow = 0; ow < 3; ow++)
                                ck_assert_msg(y[(m * 4 + oh) * 3 + ow] == (float)conv_ref(&cg, x, w, m, oh, ow),
                                              "root's float64 Conv: y[%d][%d][%d] = %g", m, oh, ow,
                                              y[(m * 4 + oh) * 3 + ow]);
        stop_daemon();
        fprintf(stderr, "test_float64_accumulation_attacks: %.1f s\n", now_s() - t0);
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
        ADD(test_float64_accumulation_attacks);
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

/* Launch records that carry an operator's registry id (protocol version 2): libnpu resolves
 * a name once per context with op_resolve and then sends LAUNCH_ID records; a client that
 * negotiated version 1 keeps launching by name; a bogus id from a raw client fails that
 * task with an error naming the id, and the daemon and other clients carry on. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/frame.h"
#include "proto/submit.h"
#include "harness.h"
#include "npu.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx; /* the well-behaved client */

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

static npu_tensor_t vec(npu_buffer_t b, int64_t n)
{
        npu_tensor_t t = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { n } };
        return t;
}

/* out = a + b and relu(a - b) through libnpu, checked against values computed here. */
static void launches_compute(npu_context_t *c, int rounds)
{
        enum { N = 64 };
        float a[N], b[N], out[N];
        npu_buffer_t ba, bb, bo;
        npu_stream_t s;

        for (int i = 0; i < N; i++) {
                a[i] = (float)i - 20;
                b[i] = (float)(i % 7);
        }
        OK(npu_malloc(c, 0, sizeof(a), &ba));
        OK(npu_malloc(c, 0, sizeof(b), &bb));
        OK(npu_malloc(c, 0, sizeof(out), &bo));
        OK(npu_memcpy_to_device(c, ba, 0, a, sizeof(a)));
        OK(npu_memcpy_to_device(c, bb, 0, b, sizeof(b)));
        OK(npu_stream_create(c, 0, 0, &s));
        npu_tensor_t ta = vec(ba, N), tb = vec(bb, N), to = vec(bo, N);
        for (int r = 0; r < rounds; r++) {
                /* a += b, rounds times: the first launch resolves, the others go by id */
                OK(npu_launch(c, s, "Add", (npu_tensor_t[]){ ta, tb }, 2, &ta, 1, NULL, 0, NULL));
        }
        OK(npu_launch(c, s, "Sub", (npu_tensor_t[]){ ta, tb }, 2, &to, 1, NULL, 0, NULL));
        OK(npu_launch(c, s, "Relu", &to, 1, &to, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(c, s));
        OK(npu_memcpy_from_device(c, out, bo, 0, sizeof(out)));
        for (int i = 0; i < N; i++) {
                float want = a[i] + (float)(rounds - 1) * b[i];
                want = want > 0 ? want : 0;
                ck_assert_msg(out[i] == want, "element %d: %g, expected %g", i, out[i], want);
        }
        OK(npu_stream_destroy(c, s));
        OK(npu_free(c, ba));
        OK(npu_free(c, bb));
        OK(npu_free(c, bo));
}

/* ---- raw protocol helpers ---- */

static int raw_hello(int max_version, int *ret_version)
{
        char req[128];
        int fd = harness_raw_connect(daemon_proc.sock);

        ck_assert_int_ge(fd, 0);
        snprintf(req, sizeof(req),
                 "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":%d}}", max_version);
        json_t *r = harness_raw_call(fd, 1, req);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0);
        *ret_version = (int)json_integer_value(json_object_get(json_object_get(r, "result"), "version"));
        json_decref(r);
        return fd;
}

static const char *reply_message(json_t *r)
{
        const char *m = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
        return m ? m : "";
}

/* A request that must succeed; returns the integer member key of its result. */
static int64_t raw_ok(int fd, uint64_t id, const char *req, const char *key)
{
        json_t *r = harness_raw_call(fd, id, req);
        int64_t v = -1;

        ck_assert_ptr_nonnull(r);
        ck_assert_msg(harness_reply_code(r) == 0, "%s: %s", req, reply_message(r));
        if (key)
                v = json_integer_value(json_object_get(json_object_get(r, "result"), key));
        json_decref(r);
        return v;
}

/* A request that must fail with code, its message containing needle (and needle2). */
static void raw_fails(int fd, uint64_t id, const char *req, int code, const char *needle,
                      const char *needle2)
{
        json_t *r = harness_raw_call(fd, id, req);

        ck_assert_ptr_nonnull(r);
        ck_assert_msg(harness_reply_code(r) == code, "%s: code %d (%s), expected %d", req,
                      harness_reply_code(r), reply_message(r), code);
        ck_assert_msg(strstr(reply_message(r), needle), "%s: '%s' lacks '%s'", req, reply_message(r), needle);
        ck_assert_msg(!needle2 || strstr(reply_message(r), needle2), "%s: '%s' lacks '%s'", req,
                      reply_message(r), needle2);
        json_decref(r);
}

/* Send one Add launch (a + b -> out, nelem floats) by name (op_id < 0) or by id. */
static void raw_launch_add(int fd, uint64_t seq, uint32_t stream, const uint32_t bufs[3],
                           int64_t nelem, int op_id)
{
        struct proto_rec *rec = calloc(1, sizeof(*rec));
        uint8_t body[1024];
        size_t n;

        ck_assert_ptr_nonnull(rec);
        rec->type = op_id < 0 ? PROTO_REC_LAUNCH : PROTO_REC_LAUNCH_ID;
        rec->seq = seq;
        rec->stream = stream;
        if (op_id < 0)
                snprintf(rec->launch.op, sizeof(rec->launch.op), "Add");
        else
                rec->launch.op_id = (uint16_t)op_id;
        rec->launch.nin = 2;
        rec->launch.nout = 1;
        for (int i = 0; i < 3; i++) {
                rec->launch.t[i].buf = bufs[i];
                rec->launch.t[i].dtype = NPU_FLOAT32;
                rec->launch.t[i].ndim = 1;
                rec->launch.t[i].dims[0] = nelem;
        }
        n = proto_rec_size(rec);
        ck_assert_uint_gt(n, 0);
        ck_assert_uint_le(n, sizeof(body));
        ck_assert_uint_eq(proto_rec_encode(rec, body), n);
        free(rec);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, body, n, NULL, 0), 0);
}

/* Three 64-byte buffers and a stream on device 0. */
static uint32_t raw_setup(int fd, uint32_t bufs[3])
{
        for (int i = 0; i < 3; i++)
                bufs[i] = (uint32_t)raw_ok(fd, 10 + i, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":64}}",
                                           "buffer");
        return (uint32_t)raw_ok(fd, 13, "{\"method\":\"stream_create\",\"params\":{\"device\":0}}", "stream");
}

static void raw_sync_ok(int fd, uint64_t id, uint32_t stream)
{
        char req[128];
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%u}}", stream);
        raw_ok(fd, id, req, NULL);
}

/* ---- tests ---- */

START_TEST(test_launch_by_id)
{
        json_t *r;
        int fd, v;

        launches_compute(ctx, 50);
        /* a second context resolves for itself and computes the same */
        npu_context_t *c2;
        OK(npu_connect(daemon_proc.sock, &c2));
        launches_compute(c2, 3);
        npu_disconnect(c2);

        /* what op_resolve answers: ids for known names, null for unknown ones */
        fd = raw_hello(2, &v);
        ck_assert_int_eq(v, 2);
        r = harness_raw_call(fd, 2, "{\"method\":\"op_resolve\",\"params\":{\"names\":[\"Add\",\"Frobnicate\",\"MatMul\"]}}");
        ck_assert_ptr_nonnull(r);
        ck_assert_msg(harness_reply_code(r) == 0, "%s", reply_message(r));
        json_t *ops = json_object_get(json_object_get(r, "result"), "ops");
        ck_assert_uint_eq(json_array_size(ops), 3);
        json_t *add = json_array_get(ops, 0), *frob = json_array_get(ops, 1), *mm = json_array_get(ops, 2);
        ck_assert_str_eq(json_string_value(json_object_get(add, "name")), "Add");
        ck_assert(json_is_integer(json_object_get(add, "id")));
        ck_assert_int_eq(json_integer_value(json_object_get(add, "min_inputs")), 2);
        ck_assert_int_eq(json_integer_value(json_object_get(add, "outputs")), 1);
        ck_assert(json_is_null(json_object_get(frob, "id")));
        ck_assert(json_is_integer(json_object_get(mm, "id")));
        ck_assert_int_ne(json_integer_value(json_object_get(add, "id")), json_integer_value(json_object_get(mm, "id")));
        json_decref(r);
        raw_fails(fd, 3, "{\"method\":\"op_resolve\",\"params\":{\"names\":\"Add\"}}", NPU_ERR_INVALID, "'names'", NULL);
        raw_fails(fd, 4, "{\"method\":\"op_resolve\",\"params\":{\"names\":[]}}", NPU_ERR_INVALID, "'names'", NULL);
        raw_fails(fd, 5, "{\"method\":\"op_resolve\",\"params\":{\"names\":[\"Add\",\"\"]}}", NPU_ERR_INVALID, "name 1", NULL);
        raw_fails(fd, 6, "{\"method\":\"op_resolve\",\"params\":{\"names\":[\"AnOperatorNameOfThirtyTwoChars__\"]}}",
                  NPU_ERR_INVALID, "name 0", NULL);
        raw_fails(fd, 7, "{\"method\":\"op_resolve\",\"params\":{\"names\":[\"Add\"],\"x\":1}}", NPU_ERR_INVALID, "'x'", NULL);
        /* version reports the range */
        r = harness_raw_call(fd, 8, "{\"method\":\"version\"}");
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r, "result"), "protocol")), 7); /* "accumulate": "mixed" came with 7 */
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r, "result"), "protocol_min")), 1);
        json_decref(r);
        close(fd);
}
END_TEST

/* Unknown operators fail as they always have: asynchronously, unsupported, naming them,
 * the first time and when the name comes again (cached as unknown). */
START_TEST(test_unknown_operator_unchanged)
{
        npu_buffer_t b;
        npu_stream_t s;
        uint64_t task;

        OK(npu_malloc(ctx, 0, 64, &b));
        OK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t t = vec(b, 16);
        for (int i = 0; i < 2; i++) {
                OK(npu_launch(ctx, s, "Frobnicate", &t, 1, &t, 1, NULL, 0, &task));
                ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_UNSUPPORTED);
                ck_assert_uint_eq(npu_error_task(), task);
                ck_assert_msg(strstr(npu_error_message(), "Frobnicate"), "%s", npu_error_message());
        }
        OK(npu_launch(ctx, s, "Relu", &t, 1, &t, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_free(ctx, b));
}
END_TEST

struct thread_arg {
        npu_context_t *c;
        int rounds;
};

static void *thread_main(void *p)
{
        struct thread_arg *a = p;
        launches_compute(a->c, a->rounds);
        return NULL;
}

/* Several threads resolving and launching on one context at once. */
START_TEST(test_shared_context_threads)
{
        pthread_t th[4];
        struct thread_arg a = { ctx, 40 };

        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &a), 0);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(pthread_join(th[i], NULL), 0);
}
END_TEST

/* A client that speaks only version 1 keeps launching by name; op_resolve and LAUNCH_ID
 * records are refused to it with errors that say why. */
START_TEST(test_version1_client)
{
        uint32_t bufs[3], stream;
        int v, fd = raw_hello(1, &v);

        ck_assert_int_eq(v, 1);
        stream = raw_setup(fd, bufs);
        raw_launch_add(fd, 1, stream, bufs, 16, -1);
        raw_sync_ok(fd, 20, stream);
        /* the name record is really checked: a shape beyond the buffers fails */
        raw_launch_add(fd, 2, stream, bufs, 17, -1);
        char req[128];
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%u}}", stream);
        raw_fails(fd, 22, req, NPU_ERR_OUT_OF_RANGE, "Add", NULL);
        raw_fails(fd, 23, "{\"method\":\"op_resolve\",\"params\":{\"names\":[\"Add\"]}}", NPU_ERR_PROTOCOL,
                  "version 2", NULL);
        raw_launch_add(fd, 3, stream, bufs, 16, 0);
        raw_fails(fd, 24, req, NPU_ERR_INVALID, "needs protocol version 2", "task 3");
        raw_launch_add(fd, 4, stream, bufs, 16, -1);
        raw_sync_ok(fd, 25, stream);
        close(fd);
        launches_compute(ctx, 2);
}
END_TEST

/* A bogus id fails its task with an error naming the id and the attacker's session goes on
 * (run as the unprivileged attacker: 0, or a check's failure ends it non-zero). */
static int bogus_id_attack(void *arg)
{
        uint32_t bufs[3], stream;
        char req[128];
        int v, fd = raw_hello(2, &v);

        ck_assert_int_eq(v, 2);
        stream = raw_setup(fd, bufs);
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%u}}", stream);
        json_t *r = harness_raw_call(fd, 30, "{\"method\":\"op_resolve\",\"params\":{\"names\":[\"Add\"]}}");
        int add = (int)json_integer_value(json_object_get(json_array_get(json_object_get(json_object_get(r, "result"), "ops"), 0), "id"));
        json_decref(r);
        raw_launch_add(fd, 7, stream, bufs, 16, add);
        raw_sync_ok(fd, 31, stream);
        static const int bogus[] = { 60000, UINT16_MAX };
        for (size_t i = 0; i < sizeof(bogus) / sizeof(bogus[0]); i++) {
                char id[16];
                snprintf(id, sizeof(id), "id %d", bogus[i]);
                raw_launch_add(fd, 8 + i, stream, bufs, 16, bogus[i]);
                json_t *rr = harness_raw_call(fd, 32 + i, req);
                ck_assert_ptr_nonnull(rr);
                ck_assert_int_eq(harness_reply_code(rr), NPU_ERR_INVALID);
                ck_assert_msg(strstr(reply_message(rr), id), "%s", reply_message(rr));
                ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(rr, "error"), "task")),
                                 (json_int_t)(8 + i));
                json_decref(rr);
        }
        /* the same session goes on by id */
        raw_launch_add(fd, 20, stream, bufs, 16, add);
        raw_sync_ok(fd, 40, stream);
        close(fd);
        return 0;
}

/* The attack runs as an unprivileged user; the daemon and root's client (the admin, another
 * tenant) carry on, before and after. */
START_TEST(test_bogus_id)
{
        uid_t uid = 0;
        gid_t gid = 0;

        if (harness_attacker(&uid, &gid) < 0)
                fprintf(stderr, "skipped: no unprivileged user for the attacker; running as this user\n");
        ck_assert_int_eq(harness_share_socket(&daemon_proc), 0);
        launches_compute(ctx, 2);
        ck_assert_int_eq(harness_run_as(uid, gid, bogus_id_attack, NULL), 0);
        ck_assert(harness_alive(&daemon_proc));
        launches_compute(ctx, 3);
        char *sessions = NULL;
        OK(npu_admin_call(ctx, "sessions", NULL, &sessions)); /* the admin's view still answers */
        free(sessions);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-wire-id");
        TCase *tc = tcase_create("wire-id");
        SRunner *sr;
        int failed;

        signal(SIGPIPE, SIG_IGN);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_launch_by_id);
        tcase_add_test(tc, test_unknown_operator_unchanged);
        tcase_add_test(tc, test_shared_context_threads);
        tcase_add_test(tc, test_version1_client);
        tcase_add_test(tc, test_bogus_id);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

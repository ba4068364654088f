/* graph_load runs off npud's loop thread: while one client's large model is imported and
 * compiled, other clients are answered; a client that goes away mid-load, or npud stopping
 * with loads in flight, leaves nothing behind. */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <jansson.h>
#include <onnx.pb-c.h>
#include "proto/frame.h"
#include "harness.h"
#include "npu.h"

#define OK(x) ck_assert_int_eq((x), NPU_OK)

#include "tests/onnx-build.h"

/* A chain of Adds over one input of NELEM floats, each adding an initializer of its own:
 * NINIT * NELEM * 4 bytes of weights (192 MiB) that the import copies twice. */
#define NELEM (1 << 20)
#define NINIT 48

static struct npud_proc daemon_proc;

static void setup(void)
{
        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0);
}

static void teardown(void)
{
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

/* A sealed memfd holding the model with ninit initializers (at most NINIT). */
static int model_fd(int ninit)
{
        size_t len;
        uint8_t *model = add_chain_model(NELEM, ninit, 7, &len), *bytes;
        int fd = memfd_create("model", MFD_ALLOW_SEALING);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
        bytes = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ck_assert_ptr_ne(bytes, MAP_FAILED);
        memcpy(bytes, model, len);
        munmap(bytes, len);
        free(model);
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
        return fd;
}

/* A raw session that has sent graph_load for the big model; its reply is still to come. */
static const char load_req[] = "{\"method\":\"graph_load\",\"params\":{\"device\":0,\"fd\":0}}";

static int send_load(uint64_t id)
{
        int fd = harness_raw_connect(daemon_proc.sock), m = model_fd(NINIT);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, id, load_req, strlen(load_req), &m, 1), 0);
        close(m);
        return fd;
}

static json_t *recv_reply(int fd)
{
        json_t *r;
        int kind;
        uint64_t id;

        while ((r = harness_raw_recv(fd, &kind, &id)) && kind != PROTO_KIND_REPLY)
                json_decref(r); /* notifications */
        return r;
}

static int readable(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLIN };

        return poll(&p, 1, 0) == 1;
}

static uint64_t mem_used(npu_context_t *ctx)
{
        npu_device_info_t info = { .size = sizeof(info) };

        OK(npu_device_get_info(ctx, 0, &info));
        return info.memory_used;
}

/* B's pings are all answered while A's load is still in progress: before, the loop thread
 * imported A's model and B waited for all of it. */
START_TEST(test_others_answered_during_load)
{
        int b = harness_raw_connect(daemon_proc.sock), a;
        json_t *r;

        ck_assert_int_ge(b, 0);
        ck_assert_int_eq(harness_raw_hello(b), 0);
        a = send_load(1);
        /* The load is under way once npud has read A's request: a ping of A's own comes
         * after it on the same connection, so its reply proves the request was taken. */
        r = harness_raw_call(a, 2, "{\"method\":\"ping\"}");
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0); /* the ping's, not the load's */
        json_decref(r);
        for (int i = 0; i < 20; i++) {
                r = harness_raw_call(b, 10 + (uint64_t)i, "{\"method\":\"ping\"}");
                ck_assert_ptr_nonnull(r);
                ck_assert_int_eq(harness_reply_code(r), 0);
                json_decref(r);
        }
        ck_assert_msg(!readable(a), "the load finished before 20 pings of another client: "
                                    "make the model bigger or the pings waited for it");
        r = recv_reply(a);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r, "result"), "weight_bytes")),
                         (json_int_t)NINIT * NELEM * 4);
        json_decref(r);
        close(a);
        close(b);
}
END_TEST

/* Clients killed while their loads run: one right after sending, one once the weights
 * are in device memory. npud stays healthy and every byte returns. */
START_TEST(test_client_gone_mid_load)
{
        npu_context_t *ctx;
        uint64_t base;
        int a1, a2, waited;

        OK(npu_connect(daemon_proc.sock, &ctx));
        base = mem_used(ctx);
        a1 = send_load(1);
        close(a1);
        a2 = send_load(1);
        for (waited = 0; mem_used(ctx) == base && waited < 20000; waited++)
                usleep(500);
        close(a2); /* most likely mid-copy of the weights, or later */
        for (waited = 0; mem_used(ctx) != base && waited < 3000; waited++)
                usleep(10000);
        ck_assert_uint_eq(mem_used(ctx), base);
        ck_assert_int_eq(harness_alive(&daemon_proc), 1);
        /* And loading still works. */
        a1 = send_load(7);
        json_t *r = recv_reply(a1);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0);
        json_decref(r);
        ck_assert_uint_gt(mem_used(ctx), base);
        close(a1);
        for (waited = 0; mem_used(ctx) != base && waited < 3000; waited++)
                usleep(10000);
        ck_assert_uint_eq(mem_used(ctx), base);
        npu_disconnect(ctx);
}
END_TEST

/* A session may have GRAPH_LOADS_PER_SESSION (4) loads waiting or running; its loads run one
 * at a time, and all are answered. The first, big, is still running when the small ones
 * arrive. */
START_TEST(test_per_session_cap)
{
        int a = send_load(1), got[6] = { 0 }, refused = 0;

        for (uint64_t id = 2; id <= 5; id++) {
                int m = model_fd(1);
                ck_assert_int_eq(harness_raw_send(a, PROTO_KIND_REQUEST, id, load_req, strlen(load_req), &m, 1), 0);
                close(m);
        }
        for (int n = 0; n < 5; n++) {
                int kind;
                uint64_t id;
                json_t *r;
                while ((r = harness_raw_recv(a, &kind, &id)) && kind != PROTO_KIND_REPLY)
                        json_decref(r);
                ck_assert_ptr_nonnull(r);
                ck_assert_uint_le(id, 5);
                got[id] = 1;
                if (harness_reply_code(r) == NPU_ERR_LIMIT) {
                        ck_assert_uint_eq(id, 5); /* the fifth while four were in progress */
                        refused++;
                } else {
                        ck_assert_int_eq(harness_reply_code(r), 0);
                }
                json_decref(r);
        }
        ck_assert_int_eq(refused, 1);
        for (int id = 1; id <= 5; id++)
                ck_assert_int_eq(got[id], 1);
        close(a);
}
END_TEST

/* npud stops with a load in flight: it exits promptly and cleanly (ASan builds check the
 * leaks at that exit). */
START_TEST(test_shutdown_mid_load)
{
        int a = send_load(1);

        usleep(20000);
        /* teardown's harness_stop checks the exit status */
        close(a);
        a = send_load(2);
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
        close(a);
        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0); /* for teardown */
}
END_TEST

/* limits.max_graph_load_bytes: a model larger than the whole limit is refused, naming the
 * key; one within it loads. */
START_TEST(test_byte_limit)
{
        char conf[64];
        FILE *f;
        json_t *r;
        int a, m;

        snprintf(conf, sizeof(conf), "/tmp/npud-gload-%d.conf", (int)getpid());
        f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fputs("{\"limits\": {\"max_graph_load_bytes\": 8388608, \"graph_load_threads\": 1}}", f);
        fclose(f);
        const char *extra[] = { "--config", conf, NULL };
        ck_assert_int_eq(harness_start(&daemon_proc, extra), 0);
        a = harness_raw_connect(daemon_proc.sock);
        ck_assert_int_ge(a, 0);
        ck_assert_int_eq(harness_raw_hello(a), 0);
        m = model_fd(4); /* 16 MiB */
        ck_assert_int_eq(harness_raw_send(a, PROTO_KIND_REQUEST, 2, load_req, strlen(load_req), &m, 1), 0);
        close(m);
        r = recv_reply(a);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), NPU_ERR_LIMIT);
        ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
                                     "max_graph_load_bytes"));
        json_decref(r);
        m = model_fd(1); /* 4 MiB */
        ck_assert_int_eq(harness_raw_send(a, PROTO_KIND_REQUEST, 3, load_req, strlen(load_req), &m, 1), 0);
        close(m);
        r = recv_reply(a);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0);
        json_decref(r);
        close(a);
        unlink(conf);
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("graph_load_async");
        TCase *tc = tcase_create("load");

        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_others_answered_during_load);
        tcase_add_test(tc, test_client_gone_mid_load);
        tcase_add_test(tc, test_per_session_cap);
        tcase_add_test(tc, test_shutdown_mid_load);
        suite_add_tcase(s, tc);
        tc = tcase_create("limits");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_byte_limit);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : 0;
}

/* Limits through the real npud, from a config file: per-session buffer and stream limits
 * answer with a limit error, the connection limit turns extra clients away, and a session
 * that queues far more tasks than max_queued_tasks is throttled (not failed) and completes. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "npu.h"
#include "harness.h"

static struct npud_proc daemon_proc;
static char config_path[128];

static void setup(void)
{
        FILE *f;

        snprintf(config_path, sizeof(config_path), "/tmp/npud-limits-%d.conf", (int)getpid());
        f = fopen(config_path, "w");
        ck_assert_ptr_nonnull(f);
        fputs("{\"limits\": {\"max_connections\": 3, \"max_buffers\": 4, \"max_streams\": 2,"
              " \"max_queued_tasks\": 64}}\n", f);
        fclose(f);
        const char *extra[] = { "--config", config_path, NULL };
        ck_assert_int_eq(harness_start(&daemon_proc, extra), 0);
}

static void teardown(void)
{
        unlink(config_path);
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

START_TEST(test_object_limits)
{
        npu_context_t *ctx;
        npu_buffer_t b[5];
        npu_stream_t s[3];

        OK(npu_connect(daemon_proc.sock, &ctx));
        for (int i = 0; i < 4; i++)
                OK(npu_malloc(ctx, 0, 1024, &b[i]));
        ck_assert_int_eq(npu_malloc(ctx, 0, 1024, &b[4]), NPU_ERR_LIMIT);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "4 buffers"));
        OK(npu_free(ctx, b[0]));
        OK(npu_malloc(ctx, 0, 1024, &b[0]));
        OK(npu_stream_create(ctx, 0, 0, &s[0]));
        OK(npu_stream_create(ctx, 1, 0, &s[1]));
        ck_assert_int_eq(npu_stream_create(ctx, 0, 0, &s[2]), NPU_ERR_LIMIT);
        /* device memory: more than the device has */
        ck_assert_int_eq(npu_free(ctx, b[1]), NPU_OK);
        ck_assert_int_eq(npu_malloc(ctx, 0, 1ull << 40, &b[1]), NPU_ERR_NO_MEMORY);
        npu_disconnect(ctx);
}
END_TEST

START_TEST(test_connection_limit)
{
        npu_context_t *c[4];

        for (int i = 0; i < 3; i++)
                OK(npu_connect(daemon_proc.sock, &c[i]));
        ck_assert_int_eq(npu_connect(daemon_proc.sock, &c[3]), NPU_ERR_CONNECTION);
        npu_disconnect(c[0]);
        /* the slot frees once npud sees the disconnect */
        npu_status_t st = NPU_ERR_CONNECTION;
        for (int i = 0; i < 100 && st != NPU_OK; i++) {
                st = npu_connect(daemon_proc.sock, &c[0]);
                if (st != NPU_OK)
                        usleep(10000);
        }
        ck_assert_int_eq(st, NPU_OK);
        for (int i = 0; i < 3; i++)
                npu_disconnect(c[i]);
}
END_TEST

START_TEST(test_flow_control)
{
        npu_context_t *ctx;
        npu_buffer_t a, b;
        npu_stream_t s;
        float zero = 0, one = 1, acc = 0;
        const int tasks = 5000;

        OK(npu_connect(daemon_proc.sock, &ctx));
        OK(npu_malloc(ctx, 0, 4, &a));
        OK(npu_malloc(ctx, 0, 4, &b));
        OK(npu_memcpy_to_device(ctx, a, 0, &zero, 4));
        OK(npu_memcpy_to_device(ctx, b, 0, &one, 4));
        OK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t ta = { .buf = a, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
        npu_tensor_t tb = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 } };
        for (int i = 0; i < tasks; i++) {
                OK(npu_launch(ctx, s, "Add", (npu_tensor_t[]){ ta, tb }, 2, &ta, 1, NULL, 0, NULL));
                if (i % 500 == 0)
                        OK(npu_flush(ctx));
        }
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, &acc, a, 0, 4));
        ck_assert_float_eq(acc, (float)tasks);
        npu_disconnect(ctx);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-limits");
        TCase *tc = tcase_create("limits");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_object_limits);
        tcase_add_test(tc, test_connection_limit);
        tcase_add_test(tc, test_flow_control);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* Model mode through the real npud: kernels do not run, each task takes the duration the cost
 * model gives on real timers, so event timings follow the device profile. */
#include <check.h>
#include <string.h>

#include "npu.h"
#include "harness.h"

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

START_TEST(test_model_mode_timing)
{
        struct npud_proc p;
        const char *extra[] = { "--sim-mode", "model", "--sim-profile", "310P3", NULL };
        npu_context_t *ctx;
        npu_buffer_t a, c;
        npu_stream_t s;
        npu_event_t e0, e1;
        float ms = 0, first = 1.0f;
        const int n = 2048, reps = 20;

        ck_assert_int_eq(harness_start(&p, extra), 0);
        OK(npu_connect(p.sock, &ctx));
        OK(npu_malloc(ctx, 0, (uint64_t)n * n * 4, &a));
        OK(npu_malloc(ctx, 0, (uint64_t)n * n * 4, &c));
        OK(npu_memset(ctx, a, 0, 0x3f, (uint64_t)n * n * 4));
        OK(npu_memset(ctx, c, 0, 0, 4));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_event_create(ctx, &e0));
        OK(npu_event_create(ctx, &e1));
        npu_tensor_t ta = { .buf = a, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } };
        npu_tensor_t tc = { .buf = c, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } };
        OK(npu_event_record(ctx, e0, s));
        for (int i = 0; i < reps; i++)
                OK(npu_launch(ctx, s, "MatMul", (npu_tensor_t[]){ ta, ta }, 2, &tc, 1, NULL, 0, NULL));
        OK(npu_event_record(ctx, e1, s));
        OK(npu_event_synchronize(ctx, e1));
        OK(npu_event_elapsed_ms(ctx, e0, e1, &ms));
        /* 310P3 cube core: 1060 MHz x 8192 ops/cycle; one core per task */
        double per_task_ms = 2.0 * n * n * n / (1060e6 * 8192) * 1e3;
        ck_assert_msg(ms >= reps * per_task_ms * 0.95, "elapsed %.3f ms, model %.3f ms", ms, reps * per_task_ms);
        ck_assert_msg(ms < reps * per_task_ms * 3 + 50, "elapsed %.3f ms, model %.3f ms", ms, reps * per_task_ms);
        /* nothing was computed: the output keeps its memset value */
        OK(npu_memcpy_from_device(ctx, &first, c, 0, 4));
        ck_assert_float_eq(first, 0.0f);
        /* copies and memsets do move data */
        uint8_t bytes[16];
        OK(npu_memcpy_from_device(ctx, bytes, a, 4096, sizeof(bytes)));
        for (int i = 0; i < 16; i++)
                ck_assert_int_eq(bytes[i], 0x3f);
        npu_disconnect(ctx);
        ck_assert_int_eq(harness_stop(&p), 0);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-model");
        TCase *tc = tcase_create("model");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_model_mode_timing);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

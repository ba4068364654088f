/* Error reporting end to end: a failure's detail (status, message, task) reaches the call that
 * caused it and stays readable after later successful calls; an injected device fault or a
 * failed task of another stream, session or thread never fails a synchronous copy; a client
 * whose process name is not valid UTF-8 still shows in the sessions and mem listings. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

static void admin(const char *method, const char *params)
{
        char *json = NULL;
        OK(npu_admin_call(ctx, method, params, &json));
        free(json);
}

/* The soak test's finding: a synchronous copy failed by an injected fault, then the caller
 * freed the buffer before reporting, and found an empty message and task 0 — libnpu cleared
 * the detail of the failure on every successful call. */
START_TEST(test_detail_survives_later_success)
{
        static uint8_t data[4096];
        npu_buffer_t b;
        uint64_t task;

        OK(npu_malloc(ctx, 0, sizeof(data), &b));
        admin("fault_inject", "{\"device\": 0, \"kind\": \"fail-next\", \"value\": 1}");
        ck_assert_int_eq(npu_memcpy_to_device(ctx, b, 0, data, sizeof(data)), NPU_ERR_DEVICE);
        ck_assert_msg(strstr(npu_error_message(), "injected fault"), "message: '%s'", npu_error_message());
        task = npu_error_task();
        ck_assert_uint_ne(task, 0);
        OK(npu_free(ctx, b)); /* cleanup before reporting, as callers do */
        ck_assert_msg(strstr(npu_error_message(), "injected fault"),
                      "after a successful npu_free the message is '%s'", npu_error_message());
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_ping(ctx));
        ck_assert_uint_eq(npu_error_task(), task);
        /* a later failure replaces it */
        ck_assert_int_eq(npu_free(ctx, b), NPU_ERR_BAD_HANDLE);
        ck_assert_ptr_null(strstr(npu_error_message(), "injected fault"));
        ck_assert_uint_eq(npu_error_task(), 0);
}
END_TEST

/* A fault on a task of one stream is that stream's (and that task's) failure only: the
 * synchronous copies of this session (libnpu's internal stream) and of another session go
 * on working, and the failing stream's synchronize names its task, with a message. */
START_TEST(test_fault_stays_on_its_stream)
{
        static uint8_t data[8192], back[8192];
        npu_context_t *other;
        npu_buffer_t mine, theirs, tgt;
        npu_stream_t s;
        uint64_t t1, t2;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 7 + 1);
        OK(npu_connect(daemon_proc.sock, &other));
        OK(npu_malloc(ctx, 0, sizeof(data), &mine));
        OK(npu_malloc(ctx, 0, sizeof(data), &tgt));
        OK(npu_malloc(other, 0, sizeof(data), &theirs));
        OK(npu_memcpy_to_device(ctx, mine, 0, data, sizeof(data))); /* internal streams exist */
        OK(npu_memcpy_to_device(other, theirs, 0, data, sizeof(data)));
        OK(npu_stream_create(ctx, 0, 0, &s));
        admin("fault_inject", "{\"device\": 0, \"kind\": \"fail-next\", \"value\": 1}");
        OK(npu_memset_async(ctx, s, tgt, 0, 0x5a, sizeof(data), &t1));
        OK(npu_memcpy_d2d_async(ctx, s, tgt, 0, mine, 0, sizeof(data), &t2));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_DEVICE);
        ck_assert_uint_eq(npu_error_task(), t1);
        ck_assert_msg(strstr(npu_error_message(), "injected fault"), "message: '%s'", npu_error_message());
        /* the fault is spent on t1: every synchronous copy of either session works */
        OK(npu_memcpy_from_device(ctx, back, mine, 0, sizeof(back)));
        ck_assert_mem_eq(back, data, sizeof(data));
        OK(npu_memcpy_from_device(other, back, theirs, 0, sizeof(back)));
        ck_assert_mem_eq(back, data, sizeof(data));
        OK(npu_synchronize(other));
        /* the stream's error was reported and cleared: its next work runs */
        OK(npu_memcpy_d2d_async(ctx, s, tgt, 0, mine, 0, sizeof(data), NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, back, tgt, 0, sizeof(back)));
        ck_assert_mem_eq(back, data, sizeof(data));
        OK(npu_synchronize(ctx));
        npu_disconnect(other);
}
END_TEST

/* The failed and cancelled counts of `sched` for the default tenant on device 0. */
static void sched_counts(json_int_t *failed, json_int_t *cancelled, json_int_t *tasks)
{
        char *text = NULL;
        json_t *j, *t;
        size_t i;

        OK(npu_admin_call(ctx, "sched", NULL, &text));
        j = json_loads(text, 0, NULL);
        ck_assert_ptr_nonnull(j);
        *failed = *cancelled = *tasks = -1;
        json_array_foreach(json_object_get(json_array_get(json_object_get(j, "devices"), 0), "tenants"), i, t)
                if (strcmp(json_string_value(json_object_get(t, "name")), "default") == 0) {
                        *failed = json_integer_value(json_object_get(t, "failed"));
                        *cancelled = json_integer_value(json_object_get(t, "cancelled"));
                        *tasks = json_integer_value(json_object_get(t, "tasks"));
                }
        json_decref(j);
        free(text);
}

/* fail-next 3 used to show 3 failures at the client and 9 in `sched`: the work queued behind
 * each failure, cancelled unrun, was counted as failed too. Now one failed task is one
 * failure; what was cancelled behind it is counted apart. */
START_TEST(test_failed_counted_apart_from_cancelled)
{
        enum { ROUNDS = 3, BEHIND = 16 };
        npu_buffer_t b;
        npu_stream_t s;
        json_int_t f0, c0, t0, f1, c1, t1;

        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_memset(ctx, b, 0, 0, 4096));
        sched_counts(&f0, &c0, &t0);
        admin("fault_inject", "{\"device\": 0, \"kind\": \"fail-next\", \"value\": 3}");
        for (int r = 0; r < ROUNDS; r++) {
                /* one batch: the scheduler chains small tasks into one unit */
                for (int i = 0; i <= BEHIND; i++)
                        OK(npu_memset_async(ctx, s, b, 0, (uint8_t)i, 4096, NULL));
                ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_DEVICE);
        }
        sched_counts(&f1, &c1, &t1);
        ck_assert_msg(f1 - f0 == ROUNDS, "failed went from %lld to %lld (cancelled %lld -> %lld)",
                      (long long)f0, (long long)f1, (long long)c0, (long long)c1);
        ck_assert_msg(t1 - t0 == (f1 - f0) + (c1 - c0), "tasks %lld -> %lld, failed +%lld, cancelled +%lld",
                      (long long)t0, (long long)t1, (long long)(f1 - f0), (long long)(c1 - c0));
        printf("errors: fail-next 3 with %d tasks behind each: failed +%lld, cancelled +%lld\n",
               BEHIND, (long long)(f1 - f0), (long long)(c1 - c0));
        OK(npu_memset_async(ctx, s, b, 0, 1, 4096, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_free(ctx, b));
}
END_TEST

/* libnpu's synchronous calls of several threads share one internal stream per device. Each
 * one's failure must stay its own: a thread's bad memset queued while a long memset runs must
 * not fail (nor be reported by) another thread's copy that queued behind it. */
struct sync_call {
        npu_buffer_t buf;
        uint64_t offset, size;
        npu_status_t st;
        char msg[256];
};

static void *memset_thread(void *arg)
{
        struct sync_call *c = arg;
        c->st = npu_memset(ctx, c->buf, c->offset, 1, c->size);
        snprintf(c->msg, sizeof(c->msg), "%s", npu_error_message());
        return NULL;
}

START_TEST(test_threads_keep_their_errors)
{
        static uint8_t data[4096], back[4096];
        npu_buffer_t big, small;
        pthread_t t1, t2;
        struct sync_call c1 = { .size = 64u << 20 }, c2 = { .offset = 8192, .size = 16 };

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 13 + 5);
        OK(npu_malloc(ctx, 0, 64u << 20, &big));
        OK(npu_malloc(ctx, 0, sizeof(data), &small));
        OK(npu_memcpy_to_device(ctx, small, 0, data, sizeof(data))); /* the internal stream */
        c1.buf = big;
        c2.buf = small; /* offset 8192 of a 4096-byte buffer: out of range */
        /* the 64 MiB memset is modelled at about 50 us; slowed, it runs for about 2 s */
        admin("fault_inject", "{\"device\": 0, \"kind\": \"slow\", \"value\": 40000}");
        ck_assert_int_eq(pthread_create(&t1, NULL, memset_thread, &c1), 0);
        usleep(200 * 1000);
        ck_assert_int_eq(pthread_create(&t2, NULL, memset_thread, &c2), 0);
        usleep(200 * 1000);
        /* queued behind both memsets (before the fix, in the same stream: cancelled by the
         * second one's failure, which its synchronize then reported) */
        OK(npu_memcpy_to_device(ctx, small, 0, data, sizeof(data)));
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        ck_assert_msg(c1.st == NPU_OK, "the long memset: %s (%s)", npu_strerror(c1.st), c1.msg);
        ck_assert_msg(c2.st == NPU_ERR_OUT_OF_RANGE, "the bad memset: %s (%s)", npu_strerror(c2.st), c2.msg);
        ck_assert_msg(c2.msg[0], "the bad memset failed without a message");
        admin("fault_clear", "{\"device\": 0}");
        OK(npu_memcpy_from_device(ctx, back, small, 0, sizeof(back)));
        ck_assert_mem_eq(back, data, sizeof(data));
}
END_TEST

/* Does the listing (a JSON array of sessions) hold one with this comm? */
static int has_comm(json_t *sessions, const char *comm)
{
        size_t i;
        json_t *s;

        json_array_foreach(sessions, i, s)
                if (json_is_string(json_object_get(s, "comm")) &&
                    strcmp(json_string_value(json_object_get(s, "comm")), comm) == 0)
                        return 1;
        return 0;
}

/* prctl(PR_SET_NAME) takes any bytes: npud must still list the session (its comm made valid
 * UTF-8) in sessions and mem, rather than drop it when the JSON cannot be built. */
START_TEST(test_comm_not_utf8_listed)
{
        npu_context_t *named;
        npu_buffer_t b;
        char *text = NULL;
        json_t *j, *devs, *d;
        size_t i;
        int in_mem = 0;

        ck_assert_int_eq(prctl(PR_SET_NAME, (unsigned long)"bad\377n\300me\355\240\200", 0, 0, 0), 0);
        OK(npu_connect(daemon_proc.sock, &named));
        OK(npu_malloc(named, 0, 4096, &b));
        OK(npu_admin_call(ctx, "sessions", NULL, &text));
        j = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(json_array_size(json_object_get(j, "sessions")), 2);
        ck_assert_msg(has_comm(json_object_get(j, "sessions"), "bad?n?me???"), "sessions lacks the client");
        json_decref(j);
        OK(npu_admin_call(ctx, "mem", NULL, &text));
        j = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(j);
        devs = json_object_get(j, "devices");
        json_array_foreach(devs, i, d)
                in_mem |= has_comm(json_object_get(d, "sessions"), "bad?n?me???");
        ck_assert_msg(in_mem, "mem lacks the client holding 4096 bytes");
        json_decref(j);
        /* valid UTF-8 stays as it is */
        ck_assert_int_eq(prctl(PR_SET_NAME, (unsigned long)"caf\303\251 \360\237\231\202", 0, 0, 0), 0);
        npu_context_t *named2;
        OK(npu_connect(daemon_proc.sock, &named2));
        OK(npu_admin_call(ctx, "sessions", NULL, &text));
        j = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(j);
        ck_assert_msg(has_comm(json_object_get(j, "sessions"), "caf\303\251 \360\237\231\202"),
                      "a valid UTF-8 name was changed");
        json_decref(j);
        npu_disconnect(named2);
        npu_disconnect(named);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("errors");
        TCase *tc = tcase_create("errors");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_detail_survives_later_success);
        tcase_add_test(tc, test_failed_counted_apart_from_cancelled);
        tcase_add_test(tc, test_fault_stays_on_its_stream);
        tcase_add_test(tc, test_threads_keep_their_errors);
        tcase_add_test(tc, test_comm_not_utf8_listed);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* Device-memory lifetimes through the real npud: free while work is in flight, stream-ordered
 * npu_free_async, views, export / import / read-only / revoke between sessions and tenants,
 * the latency-critical reserve, the low-memory notification, and reclaim of everything a
 * SIGKILLed client held (1000 buffers, exports, queued work). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "npu.h"
#include "proto/frame.h"
#include "harness.h"

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

static struct npud_proc proc;
static char conf[128];

static void start(const char *config_text, const char *const *more)
{
        const char *extra[12] = { "--config", conf };
        int n = 2;
        FILE *f;

        snprintf(conf, sizeof(conf), "/tmp/npud-mem-%d.conf", (int)getpid());
        f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fputs(config_text, f);
        fclose(f);
        for (int i = 0; more && more[i] && n < 11; i++)
                extra[n++] = more[i];
        extra[n] = NULL;
        ck_assert_int_eq(harness_start(&proc, extra), 0);
}

static void stop(void)
{
        unlink(conf);
        ck_assert_int_eq(harness_stop(&proc), 0);
}

static npu_context_t *join(const char *tenant)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = proc.sock, .tenant = tenant };
        npu_context_t *c;
        OK(npu_connect_with(&o, &c));
        return c;
}

static uint64_t used(npu_context_t *c, int dev)
{
        npu_device_info_t info = { .size = sizeof(info) };
        OK(npu_device_get_info(c, dev, &info));
        return info.memory_used;
}

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

START_TEST(test_free_in_flight_and_async)
{
        enum { N = 256 };
        static float a[N * N], c[N * N];
        npu_context_t *ctx;
        npu_buffer_t da, dc, tmp;
        npu_stream_t s;
        uint64_t task;

        start("{}", NULL);
        ctx = join(NULL);
        uint64_t base = used(ctx, 0);
        for (int i = 0; i < N * N; i++)
                a[i] = (float)(i % 5);
        OK(npu_malloc(ctx, 0, sizeof(a), &da));
        OK(npu_malloc(ctx, 0, sizeof(c), &dc));
        OK(npu_memcpy_to_device(ctx, da, 0, a, sizeof(a)));
        OK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t ta = { .buf = da, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { N, N } };
        npu_tensor_t tc = { .buf = dc, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { N, N } };
        for (int i = 0; i < 20; i++)
                OK(npu_launch(ctx, s, "MatMul", (npu_tensor_t[]){ ta, ta }, 2, &tc, 1, NULL, 0, NULL));
        OK(npu_flush(ctx));
        OK(npu_free(ctx, da)); /* while the MatMuls still read it */
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, c, dc, 0, sizeof(c)));
        for (int j = 0; j < N; j += 37) {
                double ref = 0;
                for (int k = 0; k < N; k++)
                        ref += (double)a[k] * a[k * N + j];
                ck_assert_float_eq_tol(c[j], ref, 1e-2);
        }
        ck_assert_uint_eq(used(ctx, 0), base + sizeof(c)); /* da returned after the work */

        /* stream-ordered free: later work naming the handle is rejected at submission */
        OK(npu_malloc(ctx, 0, 1 << 20, &tmp));
        npu_tensor_t tt = { .buf = tmp, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 1 << 18 } };
        OK(npu_launch(ctx, s, "Relu", &tt, 1, &tt, 1, NULL, 0, NULL));
        OK(npu_free_async(ctx, s, tmp, NULL));
        OK(npu_launch(ctx, s, "Relu", &tt, 1, &tt, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_int_eq(npu_free(ctx, tmp), NPU_ERR_BAD_HANDLE); /* double free */
        ck_assert_uint_eq(used(ctx, 0), base + sizeof(c));
        npu_disconnect(ctx);
        stop();
}
END_TEST

START_TEST(test_views)
{
        npu_context_t *ctx;
        npu_buffer_t b, v, bad;
        uint8_t out[4096];

        start("{}", NULL);
        ctx = join(NULL);
        uint64_t base = used(ctx, 0);
        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_memset(ctx, b, 0, 1, 4096));
        OK(npu_buffer_view(ctx, b, 1024, 512, &v));
        OK(npu_memset(ctx, v, 0, 7, 512));
        ck_assert_int_eq(npu_memset(ctx, v, 256, 7, 512), NPU_ERR_OUT_OF_RANGE); /* bounds are the view's */
        ck_assert_int_eq(npu_buffer_view(ctx, b, 4000, 200, &bad), NPU_ERR_OUT_OF_RANGE);
        ck_assert_int_eq(npu_buffer_view(ctx, b, UINT64_MAX / 4, 8, &bad), NPU_ERR_OUT_OF_RANGE);
        ck_assert_int_eq(npu_buffer_view(ctx, b, 0, 0, &bad), NPU_ERR_OUT_OF_RANGE);
        OK(npu_memcpy_from_device(ctx, out, b, 0, sizeof(out)));
        for (int i = 0; i < 4096; i++)
                ck_assert_int_eq(out[i], i >= 1024 && i < 1536 ? 7 : 1);
        /* the view keeps the memory after the parent's handle is freed */
        OK(npu_free(ctx, b));
        ck_assert_uint_gt(used(ctx, 0), base);
        OK(npu_memcpy_from_device(ctx, out, v, 0, 512));
        ck_assert_int_eq(out[0], 7);
        OK(npu_free(ctx, v));
        ck_assert_uint_eq(used(ctx, 0), base);
        npu_disconnect(ctx);
        stop();
}
END_TEST

START_TEST(test_export_import)
{
        npu_context_t *a, *b, *c;
        npu_buffer_t src, imp, ro, x;
        char token[NPU_TOKEN_LEN], token2[NPU_TOKEN_LEN];
        uint8_t out[256];
        const char *named[] = { "t2" };

        start("{\"tenants\": [{\"name\": \"t1\", \"gids\": [0]}, {\"name\": \"t2\", \"gids\": [0]}]}", NULL);
        a = join("t1");
        b = join("t1");
        c = join("t2");
        uint64_t base = used(a, 0);
        OK(npu_malloc(a, 0, 1 << 20, &src));
        OK(npu_memset(a, src, 0, 0x42, 1 << 20));
        OK(npu_buffer_export(a, src, NULL, 0, 0, token));
        ck_assert_uint_eq(strlen(token), 32);
        /* another tenant may not import; the same tenant may */
        ck_assert_int_eq(npu_buffer_import(c, token, 0, &x), NPU_ERR_PERMISSION);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "t2"));
        OK(npu_buffer_import(b, token, 0, &imp));
        OK(npu_buffer_import(b, token, 1, &ro));
        OK(npu_memcpy_from_device(b, out, imp, 0, sizeof(out)));
        ck_assert_int_eq(out[0], 0x42);
        /* a read-only import refuses writes */
        ck_assert_int_eq(npu_memset(b, ro, 0, 0, 16), NPU_ERR_PERMISSION);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "read-only"));
        /* unknown and malformed tokens */
        ck_assert_int_eq(npu_buffer_import(b, "00000000000000000000000000000000", 0, &x), NPU_ERR_BAD_HANDLE);
        ck_assert_int_eq(npu_buffer_import(b, "short", 0, &x), NPU_ERR_BAD_HANDLE);
        /* named tenants */
        OK(npu_buffer_export(a, src, named, 1, 1, token2));
        OK(npu_buffer_import(c, token2, 0, &x));
        ck_assert_int_eq(npu_memset(c, x, 0, 0, 16), NPU_ERR_PERMISSION); /* exported read-only */
        /* revoke: only the exporter, then no new imports */
        ck_assert_int_eq(npu_buffer_revoke(b, token), NPU_ERR_PERMISSION);
        OK(npu_buffer_revoke(a, token));
        ck_assert_int_eq(npu_buffer_import(b, token, 0, &x), NPU_ERR_BAD_HANDLE);
        /* importers keep the memory after the exporter frees it and leaves */
        OK(npu_free(a, src));
        npu_disconnect(a);
        a = join("t1");
        OK(npu_memcpy_from_device(b, out, imp, 100, sizeof(out)));
        ck_assert_int_eq(out[10], 0x42);
        ck_assert_int_eq(npu_buffer_import(c, token2, 0, &x), NPU_ERR_BAD_HANDLE); /* revoked with its session */
        npu_disconnect(c);
        OK(npu_free(b, imp));
        ck_assert_uint_gt(used(a, 0), base);
        OK(npu_free(b, ro));
        ck_assert_uint_eq(used(a, 0), base);
        npu_disconnect(a);
        npu_disconnect(b);
        stop();
}
END_TEST

START_TEST(test_reserve_and_watermark)
{
        const char *more[] = { "--sim-profile", "310P3", NULL };
        npu_context_t *lc, *be;
        npu_buffer_t b;

        start("{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"gids\": [0]},"
              "             {\"name\": \"be\", \"class\": \"best-effort\", \"gids\": [0]}],"
              " \"memory\": {\"reserved_for_latency_critical\": 20000000000, \"low_watermark\": 0.5}}", more);
        lc = join("lc");
        be = join("be");
        ck_assert_int_eq(npu_malloc(be, 0, 5000000000ull, &b), NPU_ERR_NO_MEMORY);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "reserved for latency-critical"));
        OK(npu_malloc(be, 0, 3000000000ull, &b));
        OK(npu_malloc(lc, 0, 15000000000ull, &b));

        /* crossing the watermark is announced to every session */
        int fd = harness_raw_connect(proc.sock);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        json_t *r = harness_raw_call(fd, 2, "{\"method\":\"mem_free\",\"params\":{\"buffer\":1}}");
        json_decref(r);
        OK(npu_free(lc, b));
        OK(npu_malloc(lc, 0, 15000000000ull, &b)); /* falls below 50 % free again */
        int kind = 0, seen = 0;
        uint64_t id;
        for (int i = 0; i < 5 && !seen; i++) {
                json_t *m = harness_raw_recv(fd, &kind, &id);
                if (!m)
                        break;
                seen = kind == PROTO_KIND_NOTIFY &&
                       strcmp(json_string_value(json_object_get(m, "event")), "memory-low") == 0;
                json_decref(m);
        }
        ck_assert(seen);
        close(fd);
        npu_disconnect(lc);
        npu_disconnect(be);
        stop();
}
END_TEST

START_TEST(test_sigkill_reclaim_1000_buffers)
{
        npu_context_t *ctx;
        npu_buffer_t keep;
        int pfd[2];
        char token[NPU_TOKEN_LEN] = "";
        pid_t child;

        start("{}", NULL);
        ctx = join(NULL);
        uint64_t base = used(ctx, 0);
        ck_assert_int_eq(pipe(pfd), 0);
        child = fork();
        if (child == 0) {
                npu_context_t *cc;
                npu_buffer_t b[1000];
                npu_stream_t s;
                char tok[NPU_TOKEN_LEN];
                if (npu_connect(proc.sock, &cc) != NPU_OK)
                        _exit(1);
                for (int i = 0; i < 1000; i++)
                        if (npu_malloc(cc, 0, 64 << 10, &b[i]) != NPU_OK)
                                _exit(2);
                for (int i = 0; i < 10; i++)
                        if (npu_buffer_export(cc, b[i], NULL, 0, 0, tok) != NPU_OK)
                                _exit(3);
                npu_stream_create(cc, 0, 7, &s);
                npu_tensor_t t = { .buf = b[100], .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 128, 128 } };
                npu_tensor_t o = { .buf = b[101], .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 128, 128 } };
                for (int i = 0; i < 5000; i++)
                        npu_launch(cc, s, "MatMul", (npu_tensor_t[]){ t, t }, 2, &o, 1, NULL, 0, NULL);
                npu_flush(cc);
                if (write(pfd[1], tok, NPU_TOKEN_LEN) != NPU_TOKEN_LEN) /* the last export's token */
                        _exit(4);
                pause();
                _exit(0);
        }
        close(pfd[1]);
        ck_assert_int_eq(read(pfd[0], token, NPU_TOKEN_LEN), NPU_TOKEN_LEN);
        OK(npu_buffer_import(ctx, token, 0, &keep)); /* survives the exporter's death */
        ck_assert_uint_ge(used(ctx, 0), base + 1000u * (64u << 10));
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        double t0 = now_ms(), t = 0;
        uint64_t u = 0;
        while ((t = now_ms() - t0) < 3000) {
                u = used(ctx, 0);
                if (u == base + (64u << 10))
                        break;
                usleep(2000);
        }
        printf("reclaim after SIGKILL (1000 buffers, 10 exports, 5000 queued tasks): %.1f ms\n", t);
        ck_assert_uint_eq(u, base + (64u << 10));
        ck_assert_msg(t < 1000, "reclaim took %.1f ms", t);
        OK(npu_free(ctx, keep));
        ck_assert_uint_eq(used(ctx, 0), base);
        npu_disconnect(ctx);
        stop();
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-memory");
        TCase *tc = tcase_create("memory");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_free_in_flight_and_async);
        tcase_add_test(tc, test_views);
        tcase_add_test(tc, test_export_import);
        tcase_add_test(tc, test_reserve_and_watermark);
        tcase_add_test(tc, test_sigkill_reclaim_1000_buffers);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* Multi-tenant scheduling benchmark through a real npud in model mode (device timing from
 * the cost model, so a 2-core host can keep 20 cube cores busy): the tail latency of a
 * latency-critical tenant's small MatMuls alone, then while a best-effort tenant floods every
 * cube core with long MatMuls (split into 1 ms tiles), and the ratio; then the engine-time
 * shares of two normal tenants with weights 3:1 flooding the AI CPUs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "npu.h"
#include "tests/integration/harness.h"

#define CHECK(call) \
        do { \
                npu_status_t st_ = (call); \
                if (st_ != NPU_OK) { \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_), npu_error_message()); \
                        exit(1); \
                } \
        } while (0)

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static npu_context_t *join(const char *sock, const char *tenant)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = sock, .tenant = tenant };
        npu_context_t *c;
        CHECK(npu_connect_with(&o, &c));
        return c;
}

static void lc_latency(npu_context_t *c, int n, double *ret_p50, double *ret_p99)
{
        double *lat = malloc(sizeof(double) * (size_t)n);
        npu_buffer_t x, y;
        npu_stream_t s;
        CHECK(npu_malloc(c, 0, 256 * 256 * 4, &x));
        CHECK(npu_malloc(c, 0, 256 * 256 * 4, &y));
        CHECK(npu_stream_create(c, 0, 0, &s));
        npu_tensor_t tx = { .buf = x, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 256, 256 } };
        npu_tensor_t ty = { .buf = y, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 256, 256 } };
        for (int i = 0; i < n; i++) {
                double t0 = now_ms();
                CHECK(npu_launch(c, s, "MatMul", (npu_tensor_t[]){ tx, tx }, 2, &ty, 1, NULL, 0, NULL));
                CHECK(npu_stream_synchronize(c, s));
                lat[i] = now_ms() - t0;
                usleep(1000);
        }
        qsort(lat, (size_t)n, sizeof(double), cmp);
        *ret_p50 = lat[n / 2];
        *ret_p99 = lat[(int)(0.99 * (n - 1))];
        free(lat);
}

static double share_of(npu_context_t *c, const char *tenant)
{
        char *text;
        json_t *t;
        size_t i;
        double share = -1;
        CHECK(npu_admin_call(c, "sched", NULL, &text));
        json_t *v = json_loads(text, 0, NULL);
        free(text);
        json_array_foreach(json_object_get(json_array_get(json_object_get(v, "devices"), 0), "tenants"), i, t)
                if (strcmp(json_string_value(json_object_get(t, "name")), tenant) == 0)
                        share = json_number_value(json_object_get(t, "share"));
        json_decref(v);
        return share;
}

int main(void)
{
        struct npud_proc p;
        char conf[] = "/tmp/npubench-sched-XXXXXX";
        int fd = mkstemp(conf);
        const char *text = "{\"tenants\": ["
                           "{\"name\": \"lc\", \"class\": \"latency-critical\", \"gids\": [0]},"
                           "{\"name\": \"be\", \"class\": \"best-effort\", \"gids\": [0]},"
                           "{\"name\": \"heavy\", \"weight\": 3, \"gids\": [0]},"
                           "{\"name\": \"light\", \"weight\": 1, \"gids\": [0]}]}";
        if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
                return 1;
        close(fd);
        const char *extra[] = { "--config", conf, "--sim-mode", "model", "--sim-devices", "1", NULL };
        if (harness_start(&p, extra) < 0) {
                fprintf(stderr, "bench_sched: cannot start npud\n");
                return 1;
        }

        npu_context_t *lc = join(p.sock, "lc"), *be = join(p.sock, "be");
        double a50, a99, l50, l99;
        lc_latency(lc, 300, &a50, &a99);
        npu_buffer_t big, out;
        npu_stream_t s;
        CHECK(npu_malloc(be, 0, 2048ull * 2048 * 4, &big));
        CHECK(npu_malloc(be, 0, 2048ull * 2048 * 4, &out));
        npu_tensor_t tb = { .buf = big, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 2048, 2048 } };
        npu_tensor_t to = { .buf = out, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 2048, 2048 } };
        for (int i = 0; i < 40; i++) {
                CHECK(npu_stream_create(be, 0, 0, &s));
                for (int k = 0; k < 400; k++)
                        CHECK(npu_launch(be, s, "MatMul", (npu_tensor_t[]){ tb, tb }, 2, &to, 1, NULL, 0, NULL));
        }
        CHECK(npu_flush(be));
        usleep(50000);
        lc_latency(lc, 300, &l50, &l99);
        printf("latency-critical 256^2 MatMul latency: alone p50 %.3f p99 %.3f ms; with best-effort flood on all 20 cube cores p50 %.3f p99 %.3f ms; p99 ratio %.2f\n",
               a50, a99, l50, l99, l99 / a99);
        printf("best-effort engine-time share during the flood: %.2f\n", share_of(lc, "be"));
        npu_disconnect(be);
        npu_disconnect(lc);

        npu_context_t *h = join(p.sock, "heavy"), *l = join(p.sock, "light");
        npu_context_t *ctxs[2] = { h, l };
        for (int c = 0; c < 2; c++) {
                npu_buffer_t b;
                CHECK(npu_malloc(ctxs[c], 0, 4096 * 1024 * 4, &b));
                npu_tensor_t t = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { 4096, 1024 } };
                for (int i = 0; i < 12; i++) {
                        CHECK(npu_stream_create(ctxs[c], 0, 4, &s));
                        for (int k = 0; k < 400; k++)
                                CHECK(npu_launch(ctxs[c], s, "Softmax", &t, 1, &t, 1, NULL, 0, NULL));
                }
                CHECK(npu_flush(ctxs[c]));
        }
        usleep(600000);
        double sh = share_of(h, "heavy"), sl = share_of(h, "light");
        double total = sh + sl > 0 ? sh + sl : 1;
        printf("weighted fair share (weights 3:1, AI CPU saturated): heavy %.3f light %.3f (target 0.75 / 0.25)\n",
               sh / total, sl / total);
        npu_disconnect(h);
        npu_disconnect(l);
        unlink(conf);
        return harness_stop(&p) == 0 ? 0 : 1;
}

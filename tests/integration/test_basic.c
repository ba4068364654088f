/* End-to-end tests through the real npud and libnpu: numeric results against references
 * computed here, kernels that start no threads of their own inside npud, streams and events, asynchronous errors, pipelining, admin listings and
 * reclaim after a client is SIGKILLed. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

static npu_tensor_t tensor(npu_buffer_t b, npu_dtype_t dt, int ndim, const int64_t *dims)
{
        npu_tensor_t t = { .buf = b, .dtype = dt, .ndim = ndim };
        memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
        return t;
}

static float frand(unsigned *seed)
{
        return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

START_TEST(test_matmul)
{
        enum { M = 64, K = 48, N = 32 };
        static float a[M * K], b[K * N], c[M * N], ref[M * N];
        unsigned seed = 1;
        npu_buffer_t da, db, dc;
        npu_stream_t s;

        for (int i = 0; i < M * K; i++)
                a[i] = frand(&seed);
        for (int i = 0; i < K * N; i++)
                b[i] = frand(&seed);
        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        double acc = 0;
                        for (int k = 0; k < K; k++)
                                acc += (double)a[i * K + k] * b[k * N + j];
                        ref[i * N + j] = (float)acc;
                }
        OK(npu_malloc(ctx, 0, sizeof(a), &da));
        OK(npu_malloc(ctx, 0, sizeof(b), &db));
        OK(npu_malloc(ctx, 0, sizeof(c), &dc));
        OK(npu_memcpy_to_device(ctx, da, 0, a, sizeof(a)));
        OK(npu_memcpy_to_device(ctx, db, 0, b, sizeof(b)));
        OK(npu_stream_create(ctx, 0, 2, &s));
        npu_tensor_t in[2] = { tensor(da, NPU_FLOAT32, 2, (int64_t[]){ M, K }),
                               tensor(db, NPU_FLOAT32, 2, (int64_t[]){ K, N }) };
        npu_tensor_t out = tensor(dc, NPU_FLOAT32, 2, (int64_t[]){ M, N });
        OK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, c, dc, 0, sizeof(c)));
        for (int i = 0; i < M * N; i++)
                ck_assert_msg(fabsf(c[i] - ref[i]) < 1e-4f, "c[%d] = %f, expected %f", i, c[i], ref[i]);
}
END_TEST

static int npud_threads(void)
{
        char path[64];
        DIR *d;
        struct dirent *e;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)daemon_proc.pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

/* Products big enough for oneDNN (and for a thread pool, were one allowed) on both devices'
 * workers at once: npud's thread count stays what it was, the workers compute on their own
 * threads only (oneDNN's OpenMP team is one thread in each, OpenBLAS is pinned to one). */
START_TEST(test_kernel_threads)
{
        enum { D = 256, NS = 4 };
        static float a[D * D], c[D * D];
        npu_buffer_t da[2], dc[NS];
        npu_stream_t s[NS];
        int before;

        for (int i = 0; i < D * D; i++)
                a[i] = (float)(i % 13) / 13;
        for (int dev = 0; dev < 2; dev++) {
                OK(npu_malloc(ctx, dev, sizeof(a), &da[dev]));
                OK(npu_memcpy_to_device(ctx, da[dev], 0, a, sizeof(a)));
        }
        for (int i = 0; i < NS; i++) {
                OK(npu_malloc(ctx, i & 1, sizeof(c), &dc[i]));
                OK(npu_stream_create(ctx, i & 1, 0, &s[i]));
        }
        before = npud_threads();
        for (int r = 0; r < 3; r++)
                for (int i = 0; i < NS; i++) {
                        npu_tensor_t in[2] = {
                                tensor(da[i & 1], NPU_FLOAT32, 2, (int64_t[]){ D, D }),
                                tensor(da[i & 1], NPU_FLOAT32, 2, (int64_t[]){ D, D }),
                        };
                        npu_tensor_t out = tensor(dc[i], NPU_FLOAT32, 2, (int64_t[]){ D, D });
                        OK(npu_launch(ctx, s[i], "MatMul", in, 2, &out, 1, NULL, 0, NULL));
                }
        for (int i = 0; i < NS; i++)
                OK(npu_stream_synchronize(ctx, s[i]));
        ck_assert_int_eq(npud_threads(), before);
        OK(npu_memcpy_from_device(ctx, c, dc[NS - 1], 0, sizeof(c)));
        for (int j = 0; j < D; j += 37) { /* row 0 of A times A */
                double acc = 0;
                for (int k = 0; k < D; k++)
                        acc += (double)a[k] * a[k * D + j];
                ck_assert_msg(fabs(c[j] - acc) < 1e-3 * (1 + fabs(acc)), "c[%d] = %f, want %f", j,
                              c[j], acc);
        }
}
END_TEST

START_TEST(test_broadcast_add_and_ops)
{
        float x[2 * 3 * 4], y[4], z[2 * 3 * 4];
        int32_t ia[6] = { 1, -2, 3, -4, 5, -6 }, ib[6] = { 7, 8, 9, 10, 11, 12 }, ic[6];
        npu_buffer_t bx, by, bz, b1, b2, b3;
        npu_stream_t s;

        for (int i = 0; i < 24; i++)
                x[i] = (float)i * 0.5f - 3.0f;
        for (int i = 0; i < 4; i++)
                y[i] = (float)(i + 1);
        OK(npu_malloc(ctx, 1, sizeof(x), &bx));
        OK(npu_malloc(ctx, 1, sizeof(y), &by));
        OK(npu_malloc(ctx, 1, sizeof(z), &bz));
        OK(npu_memcpy_to_device(ctx, bx, 0, x, sizeof(x)));
        OK(npu_memcpy_to_device(ctx, by, 0, y, sizeof(y)));
        OK(npu_stream_create(ctx, 1, 0, &s));
        npu_tensor_t in[2] = { tensor(bx, NPU_FLOAT32, 3, (int64_t[]){ 2, 3, 4 }),
                               tensor(by, NPU_FLOAT32, 1, (int64_t[]){ 4 }) };
        npu_tensor_t out = tensor(bz, NPU_FLOAT32, 3, (int64_t[]){ 2, 3, 4 });
        OK(npu_launch(ctx, s, "Add", in, 2, &out, 1, NULL, 0, NULL));
        /* Relu in place on the result */
        OK(npu_launch(ctx, s, "Relu", &out, 1, &out, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, z, bz, 0, sizeof(z)));
        for (int i = 0; i < 24; i++) {
                float e = x[i] + y[i % 4];
                ck_assert_float_eq_tol(z[i], e > 0 ? e : 0, 1e-6);
        }
        /* int32 Mul */
        OK(npu_malloc(ctx, 1, sizeof(ia), &b1));
        OK(npu_malloc(ctx, 1, sizeof(ib), &b2));
        OK(npu_malloc(ctx, 1, sizeof(ic), &b3));
        OK(npu_memcpy_to_device(ctx, b1, 0, ia, sizeof(ia)));
        OK(npu_memcpy_to_device(ctx, b2, 0, ib, sizeof(ib)));
        npu_tensor_t iin[2] = { tensor(b1, NPU_INT32, 2, (int64_t[]){ 2, 3 }),
                                tensor(b2, NPU_INT32, 2, (int64_t[]){ 2, 3 }) };
        npu_tensor_t iout = tensor(b3, NPU_INT32, 2, (int64_t[]){ 2, 3 });
        OK(npu_launch(ctx, s, "Mul", iin, 2, &iout, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, ic, b3, 0, sizeof(ic)));
        for (int i = 0; i < 6; i++)
                ck_assert_int_eq(ic[i], ia[i] * ib[i]);
}
END_TEST

START_TEST(test_softmax_cast)
{
        float x[2 * 5], y[2 * 5];
        int64_t l[2 * 5];
        npu_buffer_t bx, by, bl;
        npu_stream_t s;

        for (int i = 0; i < 10; i++)
                x[i] = (float)(i % 5) - 1.5f;
        OK(npu_malloc(ctx, 0, sizeof(x), &bx));
        OK(npu_malloc(ctx, 0, sizeof(y), &by));
        OK(npu_malloc(ctx, 0, sizeof(l), &bl));
        OK(npu_memcpy_to_device(ctx, bx, 0, x, sizeof(x)));
        OK(npu_stream_create(ctx, 0, 4, &s));
        npu_tensor_t tx = tensor(bx, NPU_FLOAT32, 2, (int64_t[]){ 2, 5 });
        npu_tensor_t ty = tensor(by, NPU_FLOAT32, 2, (int64_t[]){ 2, 5 });
        npu_tensor_t tl = tensor(bl, NPU_INT64, 2, (int64_t[]){ 2, 5 });
        npu_attr_t axis = { .name = "axis", .i = -1 };
        OK(npu_launch(ctx, s, "Softmax", &tx, 1, &ty, 1, &axis, 1, NULL));
        OK(npu_launch(ctx, s, "Cast", &tx, 1, &tl, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, y, by, 0, sizeof(y)));
        OK(npu_memcpy_from_device(ctx, l, bl, 0, sizeof(l)));
        for (int r = 0; r < 2; r++) {
                double sum = 0;
                for (int j = 0; j < 5; j++)
                        sum += exp(x[r * 5 + j]);
                for (int j = 0; j < 5; j++)
                        ck_assert_float_eq_tol(y[r * 5 + j], exp(x[r * 5 + j]) / sum, 1e-6);
        }
        for (int i = 0; i < 10; i++)
                ck_assert_int_eq(l[i], (int64_t)x[i]);
}
END_TEST

START_TEST(test_two_streams_event)
{
        enum { N = 1 << 16 };
        float *host;
        npu_region_t region;
        npu_buffer_t a, b, c;
        npu_stream_t s1, s2;
        npu_event_t done, start, end;
        float ms = -1;

        OK(npu_host_alloc(ctx, 3 * N * sizeof(float), (void **)&host, &region));
        for (int i = 0; i < N; i++) {
                host[i] = (float)i;
                host[N + i] = 2.0f;
        }
        OK(npu_malloc(ctx, 0, N * sizeof(float), &a));
        OK(npu_malloc(ctx, 0, N * sizeof(float), &b));
        OK(npu_malloc(ctx, 0, N * sizeof(float), &c));
        OK(npu_stream_create(ctx, 0, 1, &s1));
        OK(npu_stream_create(ctx, 0, 1, &s2));
        OK(npu_event_create(ctx, &done));
        OK(npu_event_create(ctx, &start));
        OK(npu_event_create(ctx, &end));
        /* s1: a = host[0..N) * 2 ; record done. s2: wait done; c = a + a; copy to host. */
        OK(npu_event_record(ctx, start, s1));
        OK(npu_memcpy_h2d_async(ctx, s1, a, 0, region, 0, N * sizeof(float), NULL));
        OK(npu_memcpy_h2d_async(ctx, s1, b, 0, region, N * sizeof(float), N * sizeof(float), NULL));
        npu_tensor_t ta = tensor(a, NPU_FLOAT32, 1, (int64_t[]){ N });
        npu_tensor_t tb = tensor(b, NPU_FLOAT32, 1, (int64_t[]){ N });
        npu_tensor_t tc = tensor(c, NPU_FLOAT32, 1, (int64_t[]){ N });
        OK(npu_launch(ctx, s1, "Mul", (npu_tensor_t[]){ ta, tb }, 2, &ta, 1, NULL, 0, NULL));
        OK(npu_event_record(ctx, done, s1));
        OK(npu_stream_wait_event(ctx, s2, done));
        OK(npu_launch(ctx, s2, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tc, 1, NULL, 0, NULL));
        OK(npu_memcpy_d2h_async(ctx, s2, region, 2 * N * sizeof(float), c, 0, N * sizeof(float), NULL));
        OK(npu_event_record(ctx, end, s2));
        OK(npu_event_synchronize(ctx, end));
        OK(npu_event_query(ctx, done));
        for (int i = 0; i < N; i++)
                ck_assert_float_eq(host[2 * N + i], (float)i * 4.0f);
        OK(npu_event_elapsed_ms(ctx, start, end, &ms));
        ck_assert(ms >= 0 && ms < 10000);
        OK(npu_host_free(ctx, region));
}
END_TEST

START_TEST(test_memset_and_device_copy)
{
        uint8_t buf[4096];
        npu_buffer_t a, b;

        OK(npu_malloc(ctx, 0, sizeof(buf), &a));
        OK(npu_malloc(ctx, 0, sizeof(buf), &b));
        OK(npu_memset(ctx, a, 0, 0x5a, sizeof(buf)));
        OK(npu_memset(ctx, a, 100, 0x11, 50));
        OK(npu_memcpy_device(ctx, b, 0, a, 0, sizeof(buf)));
        OK(npu_memcpy_from_device(ctx, buf, b, 0, sizeof(buf)));
        for (int i = 0; i < (int)sizeof(buf); i++)
                ck_assert_int_eq(buf[i], i >= 100 && i < 150 ? 0x11 : 0x5a);
        /* out of bounds fails at the synchronize, naming the range */
        ck_assert_int_eq(npu_memset(ctx, a, 4000, 0, 200), NPU_ERR_OUT_OF_RANGE);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "outside buffer"));
        ck_assert_uint_ne(npu_error_task(), 0);
        OK(npu_free(ctx, a));
        ck_assert_int_eq(npu_free(ctx, a), NPU_ERR_BAD_HANDLE);
        OK(npu_free(ctx, b));
}
END_TEST

START_TEST(test_async_error_reported_and_cleared)
{
        int32_t x[4] = { 1, 2, 3, 4 }, zero[4] = { 1, 0, 1, 1 }, y[4];
        npu_buffer_t bx, bz, by;
        npu_stream_t s;
        uint64_t bad_task = 0;

        OK(npu_malloc(ctx, 0, sizeof(x), &bx));
        OK(npu_malloc(ctx, 0, sizeof(x), &bz));
        OK(npu_malloc(ctx, 0, sizeof(x), &by));
        OK(npu_memcpy_to_device(ctx, bx, 0, x, sizeof(x)));
        OK(npu_memcpy_to_device(ctx, bz, 0, zero, sizeof(zero)));
        OK(npu_memset(ctx, by, 0, 0, sizeof(y)));
        OK(npu_stream_create(ctx, 0, 3, &s));
        npu_tensor_t tx = tensor(bx, NPU_INT32, 1, (int64_t[]){ 4 });
        npu_tensor_t tz = tensor(bz, NPU_INT32, 1, (int64_t[]){ 4 });
        npu_tensor_t ty = tensor(by, NPU_INT32, 1, (int64_t[]){ 4 });
        OK(npu_launch(ctx, s, "Div", (npu_tensor_t[]){ tx, tz }, 2, &ty, 1, NULL, 0, &bad_task));
        /* queued behind the failure: cancelled */
        OK(npu_launch(ctx, s, "Add", (npu_tensor_t[]){ tx, tx }, 2, &ty, 1, NULL, 0, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_EXEC);
        ck_assert_uint_eq(npu_error_task(), bad_task);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "division by zero"));
        OK(npu_memcpy_from_device(ctx, y, by, 0, sizeof(y)));
        for (int i = 0; i < 4; i++)
                ck_assert_int_ne(y[i], 2 * x[i]);
        /* the error was reported once; the stream works again */
        OK(npu_launch(ctx, s, "Add", (npu_tensor_t[]){ tx, tx }, 2, &ty, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, y, by, 0, sizeof(y)));
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(y[i], 2 * x[i]);
        /* a shape mismatch is reported at submission time, at the next synchronize */
        npu_tensor_t bad = tensor(by, NPU_INT32, 1, (int64_t[]){ 3 });
        OK(npu_launch(ctx, s, "Add", (npu_tensor_t[]){ tx, tx }, 2, &bad, 1, NULL, 0, &bad_task));
        ck_assert_int_eq(npu_synchronize(ctx), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), bad_task);
        /* npu_synchronize reports the stream's error without consuming it: the stream's own
         * synchronize reports it too, and clears it */
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), bad_task);
        OK(npu_synchronize(ctx));
}
END_TEST

START_TEST(test_pipelined_many_tasks)
{
        enum { TASKS = 20000 };
        float one = 1.0f, acc = 0;
        npu_buffer_t a, b;
        npu_stream_t s;

        OK(npu_malloc(ctx, 0, sizeof(float), &a));
        OK(npu_malloc(ctx, 0, sizeof(float), &b));
        OK(npu_memcpy_to_device(ctx, a, 0, &acc, sizeof(acc)));
        OK(npu_memcpy_to_device(ctx, b, 0, &one, sizeof(one)));
        OK(npu_stream_create(ctx, 0, 4, &s));
        npu_tensor_t ta = tensor(a, NPU_FLOAT32, 1, (int64_t[]){ 1 });
        npu_tensor_t tb = tensor(b, NPU_FLOAT32, 1, (int64_t[]){ 1 });
        for (int i = 0; i < TASKS; i++)
                OK(npu_launch(ctx, s, "Add", (npu_tensor_t[]){ ta, tb }, 2, &ta, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, &acc, a, 0, sizeof(acc)));
        ck_assert_float_eq(acc, (float)TASKS);
}
END_TEST

static uint64_t device_memory_used(npu_context_t *c, int dev)
{
        npu_device_info_t info = { .size = sizeof(info) };
        ck_assert_int_eq(npu_device_get_info(c, dev, &info), NPU_OK);
        return info.memory_used;
}

/* Caller-allocated structs carry their size: below the first released layout is refused, a
 * larger one (a newer header) gets what libnpu knows, size says how far, the rest untouched. */
START_TEST(test_struct_size)
{
        npu_device_info_t info = { 0 };
        struct { npu_device_info_t info; uint64_t newer[4]; } big;
        npu_connect_options_t o = { .socket = daemon_proc.sock };
        struct { npu_connect_options_t o; uint64_t newer; } bigo = {
                { .size = sizeof(bigo), .socket = daemon_proc.sock }, 7 };
        npu_context_t *c = NULL;

        ck_assert_int_eq(npu_device_get_info(ctx, 0, &info), NPU_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "sizeof(npu_device_info_t)"));
        info.size = offsetof(npu_device_info_t, aicpu_cores);
        ck_assert_int_eq(npu_device_get_info(ctx, 0, &info), NPU_ERR_INVALID);
        memset(&big, 0xff, sizeof(big));
        big.info.size = sizeof(big);
        ck_assert_int_eq(npu_device_get_info(ctx, 0, &big.info), NPU_OK);
        ck_assert_uint_eq(big.info.size, sizeof(npu_device_info_t));
        ck_assert_uint_gt(big.info.memory_total, 0);
        ck_assert_uint_eq(big.newer[0] & big.newer[3], UINT64_MAX);

        ck_assert_int_eq(npu_connect_with(&o, &c), NPU_ERR_INVALID);
        ck_assert_ptr_null(c);
        o.size = offsetof(npu_connect_options_t, backpressure);
        ck_assert_int_eq(npu_connect_with(&o, &c), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_connect_with(&bigo.o, &c), NPU_OK);
        npu_disconnect(c);
}
END_TEST

START_TEST(test_sigkill_reclaim)
{
        uint64_t before = device_memory_used(ctx, 0);
        int pipefd[2];
        pid_t child;
        char c;

        ck_assert_int_eq(pipe(pipefd), 0);
        child = fork();
        if (child == 0) {
                npu_context_t *cc;
                npu_stream_t s;
                npu_buffer_t b[200];
                if (npu_connect(daemon_proc.sock, &cc) != NPU_OK)
                        _exit(1);
                for (int i = 0; i < 200; i++)
                        if (npu_malloc(cc, 0, 1 << 20, &b[i]) != NPU_OK)
                                _exit(2);
                npu_stream_create(cc, 0, 7, &s);
                npu_tensor_t t = tensor(b[0], NPU_FLOAT32, 2, (int64_t[]){ 256, 256 });
                npu_tensor_t o = tensor(b[1], NPU_FLOAT32, 2, (int64_t[]){ 256, 256 });
                for (int i = 0; i < 2000; i++)
                        npu_launch(cc, s, "MatMul", (npu_tensor_t[]){ t, t }, 2, &o, 1, NULL, 0, NULL);
                npu_flush(cc);
                if (write(pipefd[1], "x", 1) != 1)
                        _exit(3);
                pause();
                _exit(0);
        }
        close(pipefd[1]);
        ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
        ck_assert_uint_ge(device_memory_used(ctx, 0), before + 200u * (1u << 20));
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        uint64_t now = 0;
        for (int i = 0; i < 300; i++) {
                now = device_memory_used(ctx, 0);
                if (now == before)
                        break;
                usleep(10000);
        }
        ck_assert_uint_eq(now, before);
        ck_assert(harness_alive(&daemon_proc));
}
END_TEST

START_TEST(test_sessions_listing)
{
        npu_buffer_t b;
        char *json = NULL;

        OK(npu_malloc(ctx, 0, 12345, &b));
        OK(npu_admin_call(ctx, "sessions", NULL, &json));
        ck_assert_ptr_nonnull(strstr(json, "\"buffer_bytes\":12345"));
        free(json);
        OK(npu_admin_call(ctx, "devices", NULL, &json));
        ck_assert_ptr_nonnull(strstr(json, "\"profile\":\"910B3\""));
        free(json);
}
END_TEST

struct thread_arg {
        int index;
        int failures;
        char why[256];
};

static int thread_check(struct thread_arg *arg, npu_status_t st, const char *what)
{
        if (st != NPU_OK && !arg->failures)
                snprintf(arg->why, sizeof(arg->why), "%s: %s (%s)", what, npu_strerror(st), npu_error_message());
        arg->failures += st != NPU_OK;
        return st != NPU_OK;
}

/* Each thread works on its own stream and buffers of one shared context. */
static void *thread_main(void *p)
{
        struct thread_arg *arg = p;
        npu_buffer_t a, b;
        npu_stream_t s;
        float zero = 0, one = 1, acc = 0;
        const int rounds = 20, per_round = 50;

        if (thread_check(arg, npu_malloc(ctx, arg->index % 2, 4, &a), "malloc") ||
            thread_check(arg, npu_malloc(ctx, arg->index % 2, 4, &b), "malloc") ||
            thread_check(arg, npu_memcpy_to_device(ctx, a, 0, &zero, 4), "copy a") ||
            thread_check(arg, npu_memcpy_to_device(ctx, b, 0, &one, 4), "copy b") ||
            thread_check(arg, npu_stream_create(ctx, arg->index % 2, arg->index % 8, &s), "stream"))
                return NULL;
        npu_tensor_t ta = tensor(a, NPU_FLOAT32, 1, (int64_t[]){ 1 });
        npu_tensor_t tb = tensor(b, NPU_FLOAT32, 1, (int64_t[]){ 1 });
        for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < per_round; i++)
                        thread_check(arg, npu_launch(ctx, s, "Add", (npu_tensor_t[]){ ta, tb }, 2, &ta, 1,
                                                     NULL, 0, NULL), "launch");
                thread_check(arg, npu_stream_synchronize(ctx, s), "sync");
                thread_check(arg, npu_ping(ctx), "ping");
        }
        thread_check(arg, npu_memcpy_from_device(ctx, &acc, a, 0, 4), "copy back");
        if (acc != (float)(rounds * per_round) && !arg->failures++)
                snprintf(arg->why, sizeof(arg->why), "sum %f", acc);
        return NULL;
}

START_TEST(test_threads_share_context)
{
        pthread_t th[6];
        struct thread_arg args[6];

        for (int i = 0; i < 6; i++) {
                args[i] = (struct thread_arg){ .index = i };
                ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
        }
        for (int i = 0; i < 6; i++) {
                pthread_join(th[i], NULL);
                ck_assert_msg(args[i].failures == 0, "thread %d: %s", i, args[i].why);
        }
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-basic");
        TCase *tc = tcase_create("basic");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_matmul);
        tcase_add_test(tc, test_kernel_threads);
        tcase_add_test(tc, test_broadcast_add_and_ops);
        tcase_add_test(tc, test_softmax_cast);
        tcase_add_test(tc, test_two_streams_event);
        tcase_add_test(tc, test_memset_and_device_copy);
        tcase_add_test(tc, test_async_error_reported_and_cleared);
        tcase_add_test(tc, test_pipelined_many_tasks);
        tcase_add_test(tc, test_struct_size);
        tcase_add_test(tc, test_sigkill_reclaim);
        tcase_add_test(tc, test_sessions_listing);
        tcase_add_test(tc, test_threads_share_context);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

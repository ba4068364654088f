/* npu_graph_run_host through the real npud: an MLP (MatMul, Add, Relu) run on host tensors
 * against a reference computed here, four threads on one context and one graph at once,
 * the errors that name the offending tensor (size, dtype, shape, NULL data, counts, an
 * output the model leaves open), the slots reused between calls (no device memory per call)
 * and released by npu_graph_unload (the device's used memory back to where it was). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model-mlp.h"
#include "npu.h"

enum { B = 4, K = 16, M = 8 };

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
#define FAILS_WITH(expr, st, text) \
        do { \
                npu_status_t st_ = (expr); \
                ck_assert_msg(st_ == (st), "%s: expected %s, got %s: %s", #expr, npu_strerror(st), \
                              npu_strerror(st_), npu_error_message()); \
                ck_assert_msg(strstr(npu_error_message(), text), "%s: message '%s' lacks '%s'", #expr, \
                              npu_error_message(), text); \
        } while (0)

static npu_graph_t load_mlp(void)
{
        size_t len;
        uint8_t *bytes = mlp_model(B, K, M, &len);
        npu_graph_t g;

        ck_assert_ptr_nonnull(bytes);
        OK(npu_graph_load(ctx, 0, bytes, len, &g));
        free(bytes);
        return g;
}

struct case_data {
        float x[B * K], w[K * M], c[M];
        float y[B * M], z[B * M];         /* results */
        float ry[B * M], rz[B * M];       /* reference */
        npu_host_tensor_t in[3], out[2];
};

static void case_init(struct case_data *d, int seed)
{
        memset(d, 0, sizeof(*d));
        for (int i = 0; i < B * K; i++)
                d->x[i] = (float)((i * 7 + seed * 13) % 17) / 8.0f - 1.0f;
        for (int i = 0; i < K * M; i++)
                d->w[i] = (float)((i * 5 + seed * 3) % 11) / 10.0f - 0.5f;
        for (int i = 0; i < M; i++)
                d->c[i] = (float)(i + seed) / 4.0f - 1.0f;
        mlp_reference(d->x, d->w, d->c, B, K, M, d->ry, d->rz);
        d->in[0] = (npu_host_tensor_t){ .data = d->x, .bytes = sizeof(d->x), .dtype = NPU_FLOAT32,
                                        .ndim = 2, .dims = { B, K } };
        d->in[1] = (npu_host_tensor_t){ .data = d->w, .bytes = sizeof(d->w), .dtype = NPU_FLOAT32,
                                        .ndim = 2, .dims = { K, M } };
        d->in[2] = (npu_host_tensor_t){ .data = d->c, .bytes = sizeof(d->c), .dtype = NPU_FLOAT32,
                                        .ndim = 1, .dims = { M } };
        d->out[0] = (npu_host_tensor_t){ .data = d->y, .bytes = sizeof(d->y) };
        /* Z's batch is open in the model: the caller says what the run computes. */
        d->out[1] = (npu_host_tensor_t){ .data = d->z, .bytes = sizeof(d->z), .ndim = 2, .dims = { B, M } };
}

/* Number of elements off the reference (0: right). */
static int case_wrong(const struct case_data *d)
{
        int bad = 0;

        for (int i = 0; i < B * M; i++)
                bad += fabsf(d->y[i] - d->ry[i]) > 1e-4f || fabsf(d->z[i] - d->rz[i]) > 1e-4f;
        return bad;
}

static uint64_t used_memory(void)
{
        npu_device_info_t info = { .size = sizeof(info) };

        OK(npu_device_get_info(ctx, 0, &info));
        return info.memory_used;
}

START_TEST(test_results)
{
        npu_graph_t g = load_mlp();
        struct case_data *d = malloc(sizeof(*d));

        ck_assert_ptr_nonnull(d);
        for (int seed = 0; seed < 3; seed++) {
                case_init(d, seed);
                memset(d->y, 0xff, sizeof(d->y));
                OK(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2));
                ck_assert_int_eq(case_wrong(d), 0);
                /* The outputs' dtype and shape come back from the graph's description. */
                ck_assert_int_eq(d->out[0].dtype, NPU_FLOAT32);
                ck_assert_int_eq(d->out[0].ndim, 2);
                ck_assert_int_eq(d->out[0].dims[0], B);
                ck_assert_int_eq(d->out[0].dims[1], M);
                ck_assert_int_eq(d->out[1].dtype, NPU_FLOAT32);
                ck_assert_int_eq(d->out[1].dims[0], B);
        }
        /* The outputs of one call serve the next as they are. */
        memset(d->z, 0, sizeof(d->z));
        OK(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2));
        ck_assert_int_eq(case_wrong(d), 0);
        OK(npu_graph_unload(ctx, g));
        free(d);
}
END_TEST

struct worker {
        npu_graph_t g;
        int seed, iters, wrong;
        npu_status_t st;
        char msg[256];
};

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        struct case_data *d = malloc(sizeof(*d));

        if (!d) {
                w->st = NPU_ERR_SYSTEM;
                return NULL;
        }
        case_init(d, w->seed);
        for (int i = 0; i < w->iters && w->st == NPU_OK && !w->wrong; i++) {
                memset(d->y, 0, sizeof(d->y));
                memset(d->z, 0, sizeof(d->z));
                w->st = npu_graph_run_host(ctx, w->g, d->in, 3, d->out, 2);
                if (w->st != NPU_OK)
                        snprintf(w->msg, sizeof(w->msg), "%s", npu_error_message());
                else
                        w->wrong = case_wrong(d);
        }
        free(d);
        return NULL;
}

START_TEST(test_threads_one_context)
{
        npu_graph_t g = load_mlp();
        struct worker w[4];
        pthread_t t[4];

        for (int i = 0; i < 4; i++) {
                w[i] = (struct worker){ .g = g, .seed = 10 + i, .iters = 200 };
                ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                pthread_join(t[i], NULL);
                ck_assert_msg(w[i].st == NPU_OK, "thread %d: %s: %s", i, npu_strerror(w[i].st), w[i].msg);
                ck_assert_msg(w[i].wrong == 0, "thread %d: %d wrong elements", i, w[i].wrong);
        }
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_bad_inputs)
{
        npu_graph_t g = load_mlp();
        struct case_data *d = malloc(sizeof(*d));
        npu_host_tensor_t in[3], out[2];
        float big[B * K + 1];

        ck_assert_ptr_nonnull(d);
        case_init(d, 1);
        /* Counts. */
        FAILS_WITH(npu_graph_run_host(ctx, g, d->in, 2, d->out, 2), NPU_ERR_INVALID, "has 3 inputs and 2 outputs, 2 and 2 given");
        FAILS_WITH(npu_graph_run_host(ctx, g, d->in, 3, d->out, 1), NPU_ERR_INVALID, "has 3 inputs and 2 outputs, 3 and 1 given");
        FAILS_WITH(npu_graph_run_host(ctx, g, NULL, 3, d->out, 2), NPU_ERR_INVALID, "inputs is NULL");
        FAILS_WITH(npu_graph_run_host(ctx, g, d->in, 3, NULL, 2), NPU_ERR_INVALID, "outputs is NULL");
        FAILS_WITH(npu_graph_run_host(NULL, g, d->in, 3, d->out, 2), NPU_ERR_INVALID, "NULL context");
        FAILS_WITH(npu_graph_run_host(ctx, g, d->in, -1, d->out, 2), NPU_ERR_INVALID, "negative");
        /* Size: one byte short, then one element too many. */
        memcpy(in, d->in, sizeof(in));
        memcpy(out, d->out, sizeof(out));
        in[1].bytes -= 1;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "input 1 'W' (float32 [16,8]) needs 512 bytes");
        memcpy(in, d->in, sizeof(in));
        in[0].data = big;
        in[0].bytes = sizeof(big);
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "input 0 'X'");
        /* dtype. */
        memcpy(in, d->in, sizeof(in));
        in[2].dtype = NPU_INT32;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_SHAPE, "input 2 'C' is float32 but given as int32");
        /* Shape. */
        memcpy(in, d->in, sizeof(in));
        in[0].dims[0] = 2;
        in[0].dims[1] = 2 * K;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_SHAPE, "input 0 'X' has shape [4,16] but is given as [2,32]");
        memcpy(in, d->in, sizeof(in));
        in[0].ndim = 9;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "input 0 'X' has 9 dimensions");
        /* NULL data. */
        memcpy(in, d->in, sizeof(in));
        in[1].data = NULL;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "input 1 'W': data is NULL");
        /* Reserved members. */
        memcpy(in, d->in, sizeof(in));
        in[2].reserved[3] = 1;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "input 2 'C': reserved");
        /* Outputs: too little room, NULL data, an open extent the caller did not set. */
        memcpy(in, d->in, sizeof(in));
        out[0].bytes = 4;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "output 0 'Y' (float32 [4,8]) needs 128 bytes");
        memcpy(out, d->out, sizeof(out));
        out[1].data = NULL;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_INVALID, "output 1 'Z': data is NULL");
        memcpy(out, d->out, sizeof(out));
        out[1].ndim = 0;
        memset(out[1].dims, 0, sizeof(out[1].dims));
        out[1].dims[0] = -1;
        FAILS_WITH(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_ERR_SHAPE, "output 1 'Z' is float32 [?,8] in the graph");
        /* An open extent set wrong: the run itself fails (the computed shape differs). */
        memcpy(out, d->out, sizeof(out));
        out[1].dims[0] = 2;
        ck_assert_int_ne(npu_graph_run_host(ctx, g, in, 3, out, 2), NPU_OK);
        /* Unknown graph. */
        ck_assert_int_eq(npu_graph_run_host(ctx, (npu_graph_t){ 12345 }, d->in, 3, d->out, 2), NPU_ERR_BAD_HANDLE);
        /* Nothing above spoiled the graph or its slots. */
        OK(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2));
        ck_assert_int_eq(case_wrong(d), 0);
        OK(npu_graph_unload(ctx, g));
        /* An unloaded graph. */
        ck_assert_int_eq(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2), NPU_ERR_BAD_HANDLE);
        free(d);
}
END_TEST

static void *worker_loop(void *arg)
{
        return worker_main(arg);
}

START_TEST(test_no_device_memory_leak)
{
        uint64_t before = used_memory(), loaded, running, after;
        npu_graph_t g = load_mlp();
        struct case_data *d = malloc(sizeof(*d));

        ck_assert_ptr_nonnull(d);
        loaded = used_memory();
        case_init(d, 2);
        OK(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2));
        running = used_memory();
        ck_assert_uint_gt(running, loaded);
        /* Reused, not allocated per call. */
        for (int i = 0; i < 50; i++)
                OK(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2));
        ck_assert_uint_eq(used_memory(), running);
        /* Four threads at once: at most four slots; all released by the unload. */
        struct worker w[4];
        pthread_t t[4];
        for (int i = 0; i < 4; i++) {
                w[i] = (struct worker){ .g = g, .seed = i, .iters = 50 };
                ck_assert_int_eq(pthread_create(&t[i], NULL, worker_loop, &w[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                pthread_join(t[i], NULL);
                ck_assert_msg(w[i].st == NPU_OK && !w[i].wrong, "thread %d: %s", i, w[i].msg);
        }
        ck_assert_uint_le(used_memory(), loaded + 5 * (running - loaded));
        OK(npu_graph_unload(ctx, g));
        after = used_memory();
        ck_assert_msg(after == before, "device memory used: %llu before the load, %llu after the unload",
                      (unsigned long long)before, (unsigned long long)after);
        /* The graph loaded again (a new handle) works from scratch. */
        g = load_mlp();
        OK(npu_graph_run_host(ctx, g, d->in, 3, d->out, 2));
        ck_assert_int_eq(case_wrong(d), 0);
        free(d);
        /* Left loaded: npu_disconnect in the teardown releases it and its slots. */
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-host-run");
        TCase *tc = tcase_create("host-run");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_results);
        tcase_add_test(tc, test_threads_one_context);
        tcase_add_test(tc, test_bad_inputs);
        tcase_add_test(tc, test_no_device_memory_leak);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

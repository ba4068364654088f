/* Graph runs as plans of steps (issue 11) through the real npud: a best-effort-style bulk
 * graph (a chain of 20 big MatMuls) yields its worker to a latency-critical launch at a step
 * boundary instead of holding it for the whole model; independent steps give the right
 * results and graph_info counts the steps; a failing step fails the run naming the node and
 * the stream goes on; cancelling a run and closing a session mid-run free everything (run
 * under ASan by make check-asan); and model mode times a run from its steps on their engines
 * (MatMuls on the cube cores, independent branches at the same time) instead of one AI CPU
 * core for the whole graph. A request (copy in, small run, copy out) is one unit of work.
 * A tenant's max_run_ms bounds a whole run, not each of its steps or parts: a run of many
 * steps each far shorter than the limit fails when the run passes it. */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <onnx.pb-c.h>

#include "harness.h"
#include "npu-admin.h"
#include "npu.h"

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

#include "tests/check-run.h"
#include "tests/onnx-build.h"

#include "graph-clients.h"

static struct npud_proc proc;

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Two bulk clients (tenants of class normal, each at its share of host workers: one graph
 * unit out at a time) keep both of device 0's foreground workers busy with 20-step graphs.
 * A latency-critical client's small launch must get the next worker that frees, at a step
 * boundary: when it completes, neither graph has finished (their event records, right
 * behind the runs, have not fired). Before steps, it waited for a whole graph. Orders, not
 * absolute times, so a loaded host does not matter. */
START_TEST(test_lc_launch_between_steps)
{
        enum { D = 640 };
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        struct mm_client b[2];
        struct lc_client lc;
        float *x = mm_x(D);
        char s1[32] = "", s2[32] = "";

        lc_beside_two_bulk(&proc, args, &lc, b, D, 20, x);
        /* until both graphs compute (their first steps went out) */
        int both = 0;
        for (int i = 0; i < 2000 && !both; i++) {
                both = mm_running(&b[0], s1, sizeof(s1)) && mm_running(&b[1], s2, sizeof(s2));
                if (!both)
                        usleep(1000);
        }
        ck_assert_msg(both, "the bulk graphs never ran together: %s, %s", s1, s2);
        double t0 = now_ms();
        lc_launch(&lc);
        double lc_ms = now_ms() - t0;
        npu_status_t q0 = npu_event_query(b[0].c, b[0].done), q1 = npu_event_query(b[1].c, b[1].done);
        t0 = now_ms();
        OK(npu_event_synchronize(b[0].c, b[0].done));
        OK(npu_event_synchronize(b[1].c, b[1].done));
        printf("graph steps: LC launch %.2f ms beside two 20-step MatMul graphs, which took %.1f ms more\n",
               lc_ms, now_ms() - t0);
        ck_assert_msg(q0 == NPU_ERR_NOT_READY && q1 == NPU_ERR_NOT_READY,
                      "the LC launch completed after a bulk graph finished (%d, %d): it waited for a "
                      "whole graph instead of a step", q0, q1);
        mm_check(&b[0], x);
        mm_check(&b[1], x);
        npu_disconnect(b[0].c);
        npu_disconnect(b[1].c);
        lc_check(&lc);
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* A diamond (branches that may run at the same time, values the arena plan lets share
 * bytes) computes what the host computes; graph_info counts the steps. */
START_TEST(test_parallel_steps_results_and_info)
{
        enum { N = 100000 };
        static const char *args[] = { "--sim-mode", "compute", NULL };
        const int64_t dims[1] = { N };
        ck_assert_int_eq(harness_start_config(&proc, NULL, args), 0);
        npu_context_t *c = connect_as(&proc, NULL);
        /* a = x*x, b = x+x (both read x), p = a*b and q = a-b (both read a and b), y = p/q' */
        Onnx__NodeProto *nodes[6] = {
                node("Mul", 2, (const char *[]){ "x", "x" }, 1, (const char *[]){ "a" }),
                node("Add", 2, (const char *[]){ "x", "x" }, 1, (const char *[]){ "b" }),
                node("Mul", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "p" }),
                node("Sub", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "q" }),
                node("Add", 2, (const char *[]){ "p", "q" }, 1, (const char *[]){ "s" }),
                node("Mul", 2, (const char *[]){ "s", "a" }, 1, (const char *[]){ "y" }),
        };
        npu_graph_t g;
        OK(load(c, nodes, 6, (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_FLOAT32, 1, dims)), 1,
                (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 1, dims)), 1, &g));
        char *info = NULL;
        OK(npu_graph_info(c, g, &info));
        json_t *j = json_loads(info, 0, NULL);
        ck_assert_ptr_nonnull(j);
        int steps = (int)json_integer_value(json_object_get(j, "steps"));
        int nodes_after = (int)json_integer_value(json_object_get(json_object_get(j, "compile"), "nodes_after"));
        /* a step per node after fusion, one binding the run, one handing its outputs over */
        ck_assert_msg(steps >= 3 && steps == nodes_after + 2, "steps %d, nodes after compile %d: %s",
                      steps, nodes_after, info);
        json_decref(j);
        free(info);

        static float x[N], y[N];
        for (int i = 0; i < N; i++)
                x[i] = (float)(i % 13) * 0.25f - 1.0f;
        npu_buffer_t bx, by;
        npu_stream_t s;
        OK(npu_malloc(c, 0, sizeof(x), &bx));
        OK(npu_malloc(c, 0, sizeof(y), &by));
        OK(npu_memcpy_to_device(c, bx, 0, x, sizeof(x)));
        OK(npu_stream_create(c, 0, 0, &s));
        npu_tensor_t tx = { .buf = bx, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { N } };
        npu_tensor_t ty = { .buf = by, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { N } };
        for (int r = 0; r < 8; r++) /* several runs in flight on one stream */
                OK(npu_graph_run(c, s, g, &tx, 1, &ty, 1, NULL));
        OK(npu_stream_synchronize(c, s));
        OK(npu_memcpy_from_device(c, y, by, 0, sizeof(y)));
        for (int i = 0; i < N; i++) {
                float a = x[i] * x[i], b = x[i] + x[i], e = (a * b + (a - b)) * a;
                ck_assert_msg(y[i] == e, "y[%d] = %g, expected %g", i, y[i], e);
        }
        OK(npu_graph_unload(c, g));
        npu_disconnect(c);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* Device 0's units sent to its workers, or (inl) of them those the loop thread ran. */
static uint64_t device_units_of(npu_context_t *c, int inl)
{
        npu_admin_device_t *d = NULL;
        size_t n = 0;
        OK(npu_admin_devices(c, sizeof(*d), &d, &n));
        ck_assert_uint_ge(n, 1);
        uint64_t u = inl ? d[0].units_inline : d[0].units;
        free(d);
        return u;
}

static uint64_t device_units(npu_context_t *c)
{
        return device_units_of(c, 0);
}

static uint64_t device_units_inline(npu_context_t *c)
{
        return device_units_of(c, 1);
}

/* A small request of c's (H2D, a 2-node graph run, D2H, synchronize) with input q; its
 * answer is checked. */
struct small_req {
        npu_context_t *c;
        npu_graph_t g;
        npu_buffer_t bx, by;
        npu_stream_t s;
        npu_region_t r;
        float *host;
};

#define SR_N 256

static void small_req_open(struct small_req *q, npu_context_t *c)
{
        const int64_t dims[1] = { SR_N };
        Onnx__NodeProto *nodes[2] = {
                node("Add", 2, (const char *[]){ "x", "x" }, 1, (const char *[]){ "a" }),
                node("Relu", 1, (const char *[]){ "a" }, 1, (const char *[]){ "y" }),
        };
        q->c = c;
        OK(load(c, nodes, 2, (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_FLOAT32, 1, dims)), 1,
                (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 1, dims)), 1, &q->g));
        OK(npu_malloc(c, 0, SR_N * sizeof(float), &q->bx));
        OK(npu_malloc(c, 0, SR_N * sizeof(float), &q->by));
        OK(npu_host_alloc(c, 2 * SR_N * sizeof(float), (void **)&q->host, &q->r));
        OK(npu_stream_create(c, 0, 0, &q->s));
}

static void small_req_run(struct small_req *q, int k)
{
        const size_t bytes = SR_N * sizeof(float);
        npu_tensor_t tx = { .buf = q->bx, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { SR_N } };
        npu_tensor_t ty = { .buf = q->by, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { SR_N } };

        for (int i = 0; i < SR_N; i++)
                q->host[i] = (float)((i + k) % 9) - 4.0f;
        OK(npu_memcpy_h2d_async(q->c, q->s, q->bx, 0, q->r, 0, bytes, NULL));
        OK(npu_graph_run(q->c, q->s, q->g, &tx, 1, &ty, 1, NULL));
        OK(npu_memcpy_d2h_async(q->c, q->s, q->r, bytes, q->by, 0, bytes, NULL));
        OK(npu_stream_synchronize(q->c, q->s));
        for (int i = 0; i < SR_N; i++) {
                float v = (float)((i + k) % 9) - 4.0f;
                ck_assert_msg(q->host[SR_N + i] == (v > 0 ? 2 * v : 0), "request %d: y[%d] = %g", k, i,
                              q->host[SR_N + i]);
        }
}

static void small_req_close(struct small_req *q)
{
        OK(npu_stream_destroy(q->c, q->s));
        OK(npu_host_free(q->c, q->r));
        OK(npu_free(q->c, q->bx));
        OK(npu_free(q->c, q->by));
        OK(npu_graph_unload(q->c, q->g));
}

/* A latency-critical tenant's short units run on the loop thread (no worker wake-up, no
 * completion crossing back), with the same answers; a normal tenant's never do. A unit
 * there that runs past its bound is stopped with an error saying why, the tenant's work
 * goes to workers from then on, and another client is unaffected. */
START_TEST(test_lc_units_inline)
{
        enum { REQS = 40 };
        static const char *args[] = { "--sim-mode", "compute", NULL };
        char conf[256];

        snprintf(conf, sizeof(conf),
                 "{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"uids\": [%u]},"
                 " {\"name\": \"fg\", \"uids\": [%u]}]}", (unsigned)getuid(), (unsigned)getuid());
        ck_assert_int_eq(harness_start_config(&proc, conf, args), 0);
        npu_context_t *lc = connect_as(&proc, "lc"), *fg = connect_as(&proc, "fg");
        struct small_req ql, qf;
        small_req_open(&ql, lc);
        small_req_open(&qf, fg);
        small_req_run(&ql, 0); /* estimates calibrated, run state made */
        small_req_run(&qf, 0);
        uint64_t u0 = device_units(lc), i0 = device_units_inline(lc);
        for (int k = 1; k <= REQS; k++)
                small_req_run(&ql, k);
        uint64_t units = device_units(lc) - u0, inl = device_units_inline(lc) - i0;
        printf("inline: %d latency-critical requests took %" PRIu64 " units, %" PRIu64 " on the loop thread\n",
               REQS, units, inl);
        ck_assert_msg(units == REQS && inl == REQS, "%d requests: %" PRIu64 " units, %" PRIu64 " inline", REQS,
                      units, inl);
        i0 = device_units_inline(lc);
        for (int k = 1; k <= REQS; k++)
                small_req_run(&qf, k);
        inl = device_units_inline(lc) - i0;
        ck_assert_msg(inl == 0, "a normal tenant's %d requests: %" PRIu64 " ran on the loop thread", REQS, inl);
        small_req_close(&ql);
        small_req_close(&qf);
        npu_disconnect(lc);
        npu_disconnect(fg);
        ck_assert_int_eq(harness_stop(&proc), 0);

        /* Units estimated up to 1 s may run there, stopped after 100 us: a run of 24
         * Transposes of a 512x512 matrix (some milliseconds; the run checks its limit before
         * each node) is stopped. */
        setenv("NPUD_INLINE_MAX_US", "1000000", 1);
        setenv("NPUD_INLINE_CUT_US", "100", 1);
        int started = harness_start_config(&proc, conf, args);
        unsetenv("NPUD_INLINE_MAX_US");
        unsetenv("NPUD_INLINE_CUT_US");
        ck_assert_int_eq(started, 0);
        lc = connect_as(&proc, "lc");
        fg = connect_as(&proc, "fg");
        small_req_open(&qf, fg);
        enum { D = 512, CHAIN = 24 };
        const int64_t tdims[2] = { D, D };
        Onnx__NodeProto *chain[CHAIN];
        char names[CHAIN + 1][8];
        for (int k = 0; k <= CHAIN; k++)
                snprintf(names[k], sizeof(names[k]), k == 0 ? "x" : k == CHAIN ? "y" : "t%d", k);
        for (int k = 0; k < CHAIN; k++)
                chain[k] = node("Transpose", 1, (const char *[]){ names[k] }, 1, (const char *[]){ names[k + 1] });
        npu_graph_t gt;
        OK(load(lc, chain, CHAIN, (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_FLOAT32, 2, tdims)), 1,
                (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 2, tdims)), 1, &gt));
        float *xv = malloc(D * D * sizeof(float)), *yv = malloc(D * D * sizeof(float));
        ck_assert_ptr_nonnull(xv);
        ck_assert_ptr_nonnull(yv);
        for (int i = 0; i < D * D; i++)
                xv[i] = (float)(i % 1000);
        npu_buffer_t ba, bb;
        npu_stream_t sl;
        OK(npu_stream_create(lc, 0, 0, &sl));
        OK(npu_malloc(lc, 0, D * D * sizeof(float), &ba));
        OK(npu_malloc(lc, 0, D * D * sizeof(float), &bb));
        OK(npu_memcpy_to_device(lc, ba, 0, xv, D * D * sizeof(float)));
        npu_tensor_t ta = { .buf = ba, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { D, D } };
        npu_tensor_t tb = { .buf = bb, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { D, D } };
        i0 = device_units_inline(lc);
        OK(npu_graph_run(lc, sl, gt, &ta, 1, &tb, 1, NULL));
        ck_assert_int_eq(npu_stream_synchronize(lc, sl), NPU_ERR_LIMIT);
        const char *msg = npu_error_message();
        ck_assert_msg(strstr(msg, "loop thread") && strstr(msg, "stopped after 100 us"), "message: %s", msg);
        ck_assert_uint_ge(device_units_inline(lc) - i0, 1);
        small_req_run(&qf, 0); /* the other client is served */
        /* from now on the tenant's units go to workers: the run completes, right */
        OK(npu_graph_run(lc, sl, gt, &ta, 1, &tb, 1, NULL));
        OK(npu_stream_synchronize(lc, sl));
        OK(npu_memcpy_from_device(lc, yv, bb, 0, D * D * sizeof(float)));
        ck_assert_msg(memcmp(xv, yv, D * D * sizeof(float)) == 0, "24 Transposes of x are not x");
        free(xv);
        free(yv);
        OK(npu_free(lc, ba));
        OK(npu_free(lc, bb));
        OK(npu_stream_destroy(lc, sl));
        OK(npu_graph_unload(lc, gt));
        small_req_open(&ql, lc);
        i0 = device_units_inline(lc);
        for (int k = 0; k < REQS; k++) {
                small_req_run(&ql, k);
                small_req_run(&qf, k);
        }
        inl = device_units_inline(lc) - i0;
        ck_assert_msg(inl == 0, "after a unit was stopped on the loop thread, %" PRIu64 " more ran there", inl);
        small_req_close(&ql);
        small_req_close(&qf);
        npu_disconnect(lc);
        npu_disconnect(fg);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* A request (its input copied in from a host region, a small graph run, its output copied
 * back) is one unit of work: the copies ride with the run, whose steps all go in one unit,
 * so the request costs one worker wake-up. The answers are right, a request whose run fails
 * fails alone, and a run too long for one unit still goes step by step. */
START_TEST(test_request_one_unit)
{
        enum { N = 256, REQS = 40 };
        static const char *args[] = { "--sim-mode", "compute", NULL };
        const int64_t dims[1] = { N };
        ck_assert_int_eq(harness_start_config(&proc, NULL, args), 0);
        npu_context_t *c = connect_as(&proc, NULL);
        Onnx__NodeProto *nodes[2] = {
                node("Add", 2, (const char *[]){ "x", "x" }, 1, (const char *[]){ "a" }),
                node("Relu", 1, (const char *[]){ "a" }, 1, (const char *[]){ "y" }),
        };
        npu_graph_t g;
        OK(load(c, nodes, 2, (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_FLOAT32, 1, dims)), 1,
                (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 1, dims)), 1, &g));
        npu_buffer_t bx, by;
        npu_stream_t s;
        npu_region_t r;
        float *host;
        const size_t bytes = N * sizeof(float);
        OK(npu_malloc(c, 0, bytes, &bx));
        OK(npu_malloc(c, 0, bytes, &by));
        OK(npu_host_alloc(c, 2 * bytes, (void **)&host, &r));
        OK(npu_stream_create(c, 0, 0, &s));
        npu_tensor_t tx = { .buf = bx, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { N } };
        npu_tensor_t ty = { .buf = by, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { N } };

        uint64_t u0 = device_units(c);
        for (int q = 0; q < REQS; q++) {
                for (int i = 0; i < N; i++)
                        host[i] = (float)((i + q) % 9) - 4.0f;
                OK(npu_memcpy_h2d_async(c, s, bx, 0, r, 0, bytes, NULL));
                OK(npu_graph_run(c, s, g, &tx, 1, &ty, 1, NULL));
                OK(npu_memcpy_d2h_async(c, s, r, bytes, by, 0, bytes, NULL));
                OK(npu_stream_synchronize(c, s));
                for (int i = 0; i < N; i++) {
                        float v = (float)((i + q) % 9) - 4.0f;
                        ck_assert_msg(host[N + i] == (v > 0 ? 2 * v : 0), "request %d: y[%d] = %g", q, i,
                                      host[N + i]);
                }
        }
        uint64_t units = device_units(c) - u0;
        printf("graph steps: %d requests (H2D + 2-node graph run + D2H) took %" PRIu64 " units\n", REQS, units);
        ck_assert_msg(units == REQS, "%d requests took %" PRIu64 " units, not one each", REQS, units);

        /* Large uploads into fresh device memory (first touches of its pages) take the host
         * several times their modelled time, which the copies' calibration learns; the
         * request's small copies still ride (the decision is on the model's estimate). */
        enum { BIG = 16 << 20, NBIG = 8 };
        npu_buffer_t big[NBIG];
        void *src = calloc(1, BIG);
        ck_assert_ptr_nonnull(src);
        for (int k = 0; k < NBIG; k++) {
                OK(npu_malloc(c, 0, BIG, &big[k]));
                OK(npu_memcpy_to_device(c, big[k], 0, src, BIG));
        }
        u0 = device_units(c);
        for (int q = 0; q < REQS; q++) {
                OK(npu_memcpy_h2d_async(c, s, bx, 0, r, 0, bytes, NULL));
                OK(npu_graph_run(c, s, g, &tx, 1, &ty, 1, NULL));
                OK(npu_memcpy_d2h_async(c, s, r, bytes, by, 0, bytes, NULL));
                OK(npu_stream_synchronize(c, s));
        }
        units = device_units(c) - u0;
        printf("graph steps: after %d uploads of %d MiB, %d requests took %" PRIu64 " units\n", NBIG, BIG >> 20,
               REQS, units);
        ck_assert_msg(units == REQS, "after large uploads %d requests took %" PRIu64 " units, not one each", REQS,
                      units);
        for (int k = 0; k < NBIG; k++)
                OK(npu_free(c, big[k]));
        free(src);

        /* A failing request: its copy in fails (an injected fault), so the run and the copy
         * out behind it in the unit never run; the stream reports the copy's failure, and
         * the next request is right. */
        OK(npu_admin_fault_inject(c, 0, NPU_FAULT_FAIL_NEXT, 1));
        uint64_t copy_in;
        memset(host + N, 0, bytes);
        OK(npu_memcpy_h2d_async(c, s, bx, 0, r, 0, bytes, &copy_in));
        OK(npu_graph_run(c, s, g, &tx, 1, &ty, 1, NULL));
        OK(npu_memcpy_d2h_async(c, s, r, bytes, by, 0, bytes, NULL));
        ck_assert_int_eq(npu_stream_synchronize(c, s), NPU_ERR_DEVICE);
        ck_assert_uint_eq(npu_error_task(), copy_in);
        for (int i = 0; i < N; i++)
                ck_assert_msg(host[N + i] == 0, "the failed request's copy out ran: y[%d] = %g", i, host[N + i]);
        for (int i = 0; i < N; i++)
                host[i] = (float)i;
        OK(npu_memcpy_h2d_async(c, s, bx, 0, r, 0, bytes, NULL));
        OK(npu_graph_run(c, s, g, &tx, 1, &ty, 1, NULL));
        OK(npu_memcpy_d2h_async(c, s, r, bytes, by, 0, bytes, NULL));
        OK(npu_stream_synchronize(c, s));
        for (int i = 0; i < N; i++)
                ck_assert_msg(host[N + i] == 2.0f * (float)i, "after the failure: y[%d] = %g", i, host[N + i]);
        OK(npu_graph_unload(c, g));
        npu_disconnect(c);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* A step that fails (MatMul extents that only meet at run time) fails the run with the node
 * named; the steps after it are skipped and the stream runs the next work. */
START_TEST(test_failing_step_names_node)
{
        static const char *args[] = { "--sim-mode", "compute", NULL };
        const int64_t open2[2] = { -1, -1 };
        ck_assert_int_eq(harness_start_config(&proc, NULL, args), 0);
        npu_context_t *c = connect_as(&proc, NULL);
        Onnx__NodeProto *nodes[3] = {
                node("Relu", 1, (const char *[]){ "x" }, 1, (const char *[]){ "r" }),
                node("MatMul", 2, (const char *[]){ "r", "w" }, 1, (const char *[]){ "m" }),
                node("Relu", 1, (const char *[]){ "m" }, 1, (const char *[]){ "y" }),
        };
        nodes[1]->name = (char *)"the_matmul";
        npu_graph_t g;
        OK(load(c, nodes, 3,
                (Onnx__ValueInfoProto **)list(2, tvalue("x", NPU_FLOAT32, 2, open2),
                                              tvalue("w", NPU_FLOAT32, 2, open2)), 2,
                (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 2, open2)), 1, &g));
        npu_buffer_t bx, bw, by;
        npu_stream_t s;
        OK(npu_malloc(c, 0, 4096, &bx));
        OK(npu_malloc(c, 0, 4096, &bw));
        OK(npu_malloc(c, 0, 4096, &by));
        OK(npu_stream_create(c, 0, 0, &s));
        npu_tensor_t tx = mat(bx, 4, 8), tw_bad = mat(bw, 5, 4), tw = mat(bw, 8, 4), ty = mat(by, 4, 4);
        uint64_t run;
        OK(npu_graph_run(c, s, g, (npu_tensor_t[]){ tx, tw_bad }, 2, &ty, 1, &run));
        npu_status_t st = npu_stream_synchronize(c, s);
        ck_assert_int_ne(st, NPU_OK);
        ck_assert_uint_eq(npu_error_task(), run);
        ck_assert_msg(strstr(npu_error_message(), "the_matmul"), "message: %s", npu_error_message());
        OK(npu_graph_run(c, s, g, (npu_tensor_t[]){ tx, tw }, 2, &ty, 1, NULL));
        OK(npu_stream_synchronize(c, s));
        OK(npu_graph_unload(c, g));
        npu_disconnect(c);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* Cancelling a run between its steps, and closing the session while runs compute, free
 * everything (the daemon's exit status checks it under ASan); the daemon keeps serving. */
START_TEST(test_cancel_and_close_mid_run)
{
        enum { D = 384 };
        static const char *args[] = { "--sim-mode", "compute", NULL };
        float *x = calloc((size_t)D * D, sizeof(float));
        char st[32];

        ck_assert_ptr_nonnull(x);
        for (int i = 0; i < D * D; i++)
                x[i] = (float)(i % 5);
        ck_assert_int_eq(harness_start_config(&proc, NULL, args), 0);
        struct mm_client b;
        mm_setup(&b, &proc, NULL, D, 20, x);
        mm_start(&b);
        for (int i = 0; i < 2000 && !mm_running(&b, st, sizeof(st)); i++)
                usleep(500);
        OK(npu_task_cancel(b.c, b.s, b.run));
        ck_assert_int_eq(npu_stream_synchronize(b.c, b.s), NPU_ERR_CANCELLED);
        ck_assert_uint_eq(npu_error_task(), b.run);
        /* the stream works again; then runs in flight when the session closes */
        mm_start(&b);
        mm_check(&b, x);
        npu_disconnect(b.c);
        mm_setup(&b, &proc, NULL, D, 20, x);
        for (int i = 0; i < 3; i++)
                mm_start(&b);
        usleep(20000);
        npu_disconnect(b.c);
        npu_context_t *c = connect_as(&proc, NULL);
        npu_buffer_t m;
        OK(npu_malloc(c, 0, 4096, &m)); /* still serving */
        npu_disconnect(c);
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* Model mode: a graph run's modelled time is its steps on their engines. Twenty 4096^3
 * MatMuls would take minutes on one AI CPU core; on the cube cores they take a fraction of
 * a second, and two independent chains of ten take about half of one chain of twenty. The
 * memory plan is off here: it lets the second chain reuse the first one's bytes, which
 * orders the chains (see graph/steps.h). */
START_TEST(test_model_mode_from_steps)
{
        enum { D = 4096 };
        static const char *args[] = { "--sim-mode", "model", NULL };
        setenv("NPUD_GRAPH_COMPILE", "15", 1); /* every pass but the plan */
        ck_assert_int_eq(harness_start_config(&proc, NULL, args), 0);
        npu_context_t *c = connect_as(&proc, NULL);
        npu_graph_t chain, branches;
        OK(load_chains(c, D, 1, 20, &chain));
        OK(load_chains(c, D, 2, 10, &branches));
        size_t bytes = (size_t)D * D * sizeof(float);
        npu_buffer_t bx, bw, by[2];
        npu_stream_t s;
        OK(npu_malloc(c, 0, bytes, &bx));
        OK(npu_malloc(c, 0, bytes, &bw));
        OK(npu_malloc(c, 0, bytes, &by[0]));
        OK(npu_malloc(c, 0, bytes, &by[1]));
        OK(npu_stream_create(c, 0, 0, &s));
        npu_tensor_t in[2] = { mat(bx, D, D), mat(bw, D, D) }, out[2] = { mat(by[0], D, D), mat(by[1], D, D) };
        double t_chain = 1e9, t_branches = 1e9;
        for (int r = 0; r < 3; r++) { /* the best of three: a loaded host only adds time */
                double t0 = now_ms();
                OK(npu_graph_run(c, s, chain, in, 2, out, 1, NULL));
                OK(npu_stream_synchronize(c, s));
                double t1 = now_ms();
                OK(npu_graph_run(c, s, branches, in, 2, out, 2, NULL));
                OK(npu_stream_synchronize(c, s));
                double t2 = now_ms();
                if (t1 - t0 < t_chain)
                        t_chain = t1 - t0;
                if (t2 - t1 < t_branches)
                        t_branches = t2 - t1;
        }
        printf("model mode: 20 MatMuls of 4096^3 in a chain %.1f ms, as two chains of 10 %.1f ms\n",
               t_chain, t_branches);
        ck_assert_msg(t_chain < 2000, "chain of 20 modelled at %.1f ms (one AI CPU core: minutes)", t_chain);
        ck_assert_msg(t_branches < 0.8 * t_chain, "two chains of 10 %.1f ms, one of 20 %.1f ms",
                      t_branches, t_chain);
        npu_disconnect(c);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* 24 MatMul steps of 768^3 (a few ms each, in parts of well under a millisecond on two
 * workers) against a 40 ms limit: the whole run takes far longer, so it fails with the limit
 * named, though no step or part comes near it (a gang runs them all in one unit, where each
 * item once got the whole limit from its own start). The stream goes on. The tenant is an
 * unprivileged user (the attacker this limit is for); the admin's runs are unaffected. */
enum { RL_D = 768, RL_LEN = 24 };

struct rl_arg {
        const struct npud_proc *p;
        const float *x;
};

static int run_limit_attack(void *arg)
{
        const struct rl_arg *a = arg;
        struct mm_client m;

        mm_setup(&m, a->p, "quick", RL_D, RL_LEN, a->x);
        double t0 = now_ms();
        mm_start(&m);
        npu_status_t st = npu_stream_synchronize(m.c, m.s);
        double t1 = now_ms();
        printf("run limit (uid %u): %d MatMul steps of %d^3 with max_run_ms 40: %s after %.1f ms (%s)\n",
               (unsigned)getuid(), RL_LEN, RL_D, npu_strerror(st), t1 - t0, npu_error_message());
        fflush(stdout);
        if (st != NPU_ERR_LIMIT || !strstr(npu_error_message(), "time limit"))
                return 1;
        /* the stream runs on: a one-step run within the limit */
        struct mm_client one;
        mm_setup(&one, a->p, "quick", 64, 1, a->x);
        mm_start(&one);
        mm_check(&one, a->x);
        npu_disconnect(one.c);
        npu_disconnect(m.c);
        return 0;
}

START_TEST(test_run_limit_covers_whole_run)
{
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        char conf[160];
        float *x = mm_x(RL_D);
        uid_t uid = getuid();
        gid_t gid = getgid();

        if (harness_attacker(&uid, &gid) < 0) { /* no unprivileged user to be: as ourselves */
                uid = getuid();
                gid = getgid();
        }
        snprintf(conf, sizeof(conf), "{\"tenants\": [{\"name\": \"quick\", \"uids\": [%u],"
                 " \"max_run_ms\": 40}]}", (unsigned)uid);
        ck_assert_int_eq(harness_start_config(&proc, conf, args), 0);
        ck_assert_int_eq(harness_share_socket(&proc), 0);
        struct rl_arg a = { &proc, x };
        if (uid == getuid())
                ck_assert_int_eq(run_limit_attack(&a), 0);
        else
                ck_assert_int_eq(harness_run_as(uid, gid, run_limit_attack, &a), 0);
        /* the admin (another tenant, no limit) is unaffected */
        if (uid != getuid()) {
                struct mm_client adm;
                mm_setup(&adm, &proc, NULL, 64, 3, x);
                mm_start(&adm);
                mm_check(&adm, x);
                npu_disconnect(adm.c);
        }
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* The threads of npud named comm: how many, and how many run at SCHED_IDLE. */
/* npud's threads named comm: how many, their ids in tids (up to max). */
static int npud_threads_named(const char *comm, pid_t *tids, int max)
{
        char path[64];
        struct dirent *e;
        DIR *d;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)proc.pid);
        ck_assert_ptr_nonnull(d = opendir(path));
        while ((e = readdir(d))) {
                char p[400], c[32] = "";
                FILE *f;
                if (e->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "%s/%s/comm", path, e->d_name);
                if (!(f = fopen(p, "r")))
                        continue;
                if (!fgets(c, sizeof(c), f))
                        c[0] = 0;
                fclose(f);
                c[strcspn(c, "\n")] = 0;
                if (strcmp(c, comm) != 0)
                        continue;
                if (n < max)
                        tids[n] = (pid_t)atoi(e->d_name);
                n++;
        }
        closedir(d);
        return n;
}

static void threads_named(const char *comm, int *ret_n, int *ret_idle)
{
        pid_t tids[64];

        *ret_n = npud_threads_named(comm, tids, 64);
        *ret_idle = 0;
        for (int i = 0; i < *ret_n && i < 64; i++)
                *ret_idle += sched_getscheduler(tids[i]) == SCHED_IDLE;
}

/* A load is work no scheduler grants (import, folding, tuning and step timing run kernels
 * for up to tens of milliseconds): a best-effort tenant's loads run on helper threads at
 * idle priority (npud-load-bg, SCHED_IDLE), which any other thread of the host preempts, and
 * other tenants' on helpers at normal priority (npud-load). */
START_TEST(test_best_effort_loads_at_idle_priority)
{
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        char conf[200];
        float *x = mm_x(64);
        struct mm_client be, fg;
        int n, idle;

        snprintf(conf, sizeof(conf), "{\"tenants\": [{\"name\": \"be\", \"class\": \"best-effort\", \"uids\": [%u]},"
                 " {\"name\": \"fg\", \"uids\": [%u]}]}", (unsigned)getuid(), (unsigned)getuid());
        ck_assert_int_eq(harness_start_config(&proc, conf, args), 0);
        mm_setup(&be, &proc, "be", 64, 3, x);
        threads_named("npud-load-bg", &n, &idle);
        ck_assert_msg(n >= 1 && idle == n, "best-effort load: %d npud-load-bg threads, %d at SCHED_IDLE", n, idle);
        threads_named("npud-load", &n, &idle);
        ck_assert_msg(n == 0, "best-effort load: %d normal helpers started", n);
        mm_setup(&fg, &proc, "fg", 64, 3, x);
        threads_named("npud-load", &n, &idle);
        ck_assert_msg(n >= 1 && idle == 0, "normal load: %d npud-load threads, %d at SCHED_IDLE", n, idle);
        /* both graphs compute */
        mm_start(&be);
        mm_start(&fg);
        mm_check(&be, x);
        mm_check(&fg, x);
        npu_disconnect(be.c);
        npu_disconnect(fg.c);
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* The CPUs thread tid of npud may run on ("0-1", "1"). */
static void npud_affinity(pid_t tid, char *buf, size_t len)
{
        char path[96], line[256];
        FILE *f;

        buf[0] = 0;
        snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)proc.pid, (int)tid);
        ck_assert_ptr_nonnull(f = fopen(path, "r"));
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Cpus_allowed_list: %63s", buf) == 1)
                        break;
        fclose(f);
}

/* The first thread of npud named comm, 0 for none. */
static pid_t npud_thread(const char *comm)
{
        pid_t tid = 0;

        return npud_threads_named(comm, &tid, 1) ? tid : 0;
}

static void pin_self(int cpu)
{
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
}

/* With NPUD_LOOP_FOLLOW=1, the event loop thread moves onto the CPU a latency-critical client waits on (its waits
 * name it), follows it to another, ignores a normal tenant's, and gets the whole affinity
 * back a second after the last latency-critical wait; a helper thread it starts meanwhile
 * is not kept on its CPU. */
START_TEST(test_loop_thread_follows_lc_client)
{
        static const char *args[] = { "--sim-mode", "compute", NULL };
        char conf[320], all[64], aff[64], want[16];
        cpu_set_t mine;
        int cpus[2], n = 0;

        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
                if (CPU_ISSET(c, &mine))
                        cpus[n++] = c;
        if (n < 2) {
                printf("loop thread: one CPU here, nothing to follow (skipped)\n");
                return;
        }
        snprintf(conf, sizeof(conf),
                 "{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"uids\": [%u]},"
                 " {\"name\": \"fg\", \"uids\": [%u]}, {\"name\": \"be\", \"class\": \"best-effort\", \"uids\": [%u]}]}",
                 (unsigned)getuid(), (unsigned)getuid(), (unsigned)getuid());
        setenv("NPUD_LOOP_FOLLOW", "1", 1); /* off by default (loopcpu.h) */
        /* the best-effort request below would move it off its device's CPUs
         * (test_loop_thread_keeps_off_be_cpus) */
        setenv("NPUD_LOOP_AVOID", "0", 1);
        int started = harness_start_config(&proc, conf, args);
        unsetenv("NPUD_LOOP_FOLLOW");
        unsetenv("NPUD_LOOP_AVOID");
        ck_assert_int_eq(started, 0);
        npud_affinity(proc.pid, all, sizeof(all));
        npu_context_t *lc = connect_as(&proc, "lc"), *fg = connect_as(&proc, "fg");
        struct small_req ql, qf;
        small_req_open(&ql, lc);
        small_req_open(&qf, fg);
        for (int step = 0; step < 2; step++) {
                pin_self(cpus[step]);
                for (int k = 0; k < 20; k++)
                        small_req_run(&ql, k);
                npud_affinity(proc.pid, aff, sizeof(aff));
                snprintf(want, sizeof(want), "%d", cpus[step]);
                ck_assert_msg(strcmp(aff, want) == 0, "latency-critical client on CPU %d: the loop thread may run on %s",
                              cpus[step], aff);
                usleep(150 * 1000); /* a move at most every 100 ms */
        }
        /* a normal tenant's client on the first CPU does not move it */
        pin_self(cpus[0]);
        for (int k = 0; k < 20; k++)
                small_req_run(&qf, k);
        npud_affinity(proc.pid, aff, sizeof(aff));
        ck_assert_msg(strcmp(aff, want) == 0, "a normal client moved the loop thread to %s", aff);
        /* a helper the loop thread starts now runs anywhere */
        npu_context_t *be = connect_as(&proc, "be");
        struct small_req qb;
        small_req_open(&qb, be);
        pid_t helper = npud_thread("npud-load-bg");
        ck_assert_int_ne(helper, 0);
        npud_affinity(helper, aff, sizeof(aff));
        ck_assert_msg(strcmp(aff, all) == 0, "a load helper started meanwhile may run on %s, not %s", aff, all);
        /* a second after the last latency-critical wait, the whole affinity again */
        usleep(2500 * 1000);
        small_req_run(&qb, 0);
        npud_affinity(proc.pid, aff, sizeof(aff));
        ck_assert_msg(strcmp(aff, all) == 0, "no latency-critical client for 2.5 s: the loop thread may run on %s, "
                      "not %s", aff, all);
        sched_setaffinity(0, sizeof(mine), &mine);
        small_req_close(&ql);
        small_req_close(&qf);
        small_req_close(&qb);
        npu_disconnect(lc);
        npu_disconnect(fg);
        npu_disconnect(be);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* A best-effort MatMul load of one device, kept queued (be_load_keep) */
struct be_load {
        npu_context_t *c;
        npu_stream_t s;
        npu_buffer_t a, y;
        npu_event_t ev[2];
        int batches;
};

#define BE_N 384
#define BE_BATCH 8

static void be_load_batch(struct be_load *b)
{
        npu_tensor_t in[2] = { mat(b->a, BE_N, BE_N), mat(b->a, BE_N, BE_N) }, out = mat(b->y, BE_N, BE_N);

        for (int i = 0; i < BE_BATCH; i++)
                OK(npu_launch(b->c, b->s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
        OK(npu_event_record(b->c, b->ev[b->batches++ % 2], b->s));
}

static void be_load_open(struct be_load *b, npu_context_t *c, int dev)
{
        size_t bytes = sizeof(float) * BE_N * BE_N;

        memset(b, 0, sizeof(*b));
        b->c = c;
        OK(npu_malloc(c, dev, bytes, &b->a));
        OK(npu_malloc(c, dev, bytes, &b->y));
        OK(npu_stream_create(c, dev, 0, &b->s));
        OK(npu_event_create(c, &b->ev[0]));
        OK(npu_event_create(c, &b->ev[1]));
        be_load_batch(b);
        be_load_batch(b);
}

/* Two batches queued at most, one at least: a new one when the older is done. */
static void be_load_keep(struct be_load *b)
{
        if (npu_event_query(b->c, b->ev[b->batches % 2]) == NPU_OK)
                be_load_batch(b);
}

static void be_load_close(struct be_load *b)
{
        OK(npu_stream_synchronize(b->c, b->s));
        OK(npu_event_destroy(b->c, b->ev[0]));
        OK(npu_event_destroy(b->c, b->ev[1]));
        OK(npu_stream_destroy(b->c, b->s));
        OK(npu_free(b->c, b->a));
        OK(npu_free(b->c, b->y));
}

/* "0-1,3" (a Cpus_allowed_list or a device's host_cpus) as a set. */
static void cpulist_parse(const char *s, cpu_set_t *set)
{
        CPU_ZERO(set);
        while (*s) {
                char *end;
                long a = strtol(s, &end, 10), e = a;
                ck_assert_msg(end != s, "bad CPU list '%s'", s);
                if (*end == '-')
                        e = strtol(end + 1, &end, 10);
                for (long c = a; c <= e && c < CPU_SETSIZE; c++)
                        CPU_SET((int)c, set);
                ck_assert_msg(*end == ',' || *end == 0, "bad CPU list '%s'", s);
                s = *end == ',' ? end + 1 : end;
        }
}

/* Poll (up to ms, keeping the loads queued) until the loop thread's affinity is want. */
static int loop_affinity_becomes(const cpu_set_t *want, struct be_load *l, int nl, int ms, cpu_set_t *got)
{
        for (int t = 0; t < ms; t++) {
                for (int i = 0; i < nl; i++)
                        be_load_keep(&l[i]);
                ck_assert_int_eq(sched_getaffinity(proc.pid, sizeof(*got), got), 0);
                if (CPU_EQUAL(got, want))
                        return 1;
                usleep(1000);
        }
        return 0;
}

/* The loop thread keeps off CPUs where best-effort work runs (loopcpu_avoid): while a
 * best-effort tenant loads device 1 it runs on device 0's CPUs only; with both devices
 * loaded, on every CPU again; then, while a latency-critical client waits on one CPU, off
 * that CPU (its wake-ups would preempt the client there), and back on every CPU a second
 * after that client's last wait. Latency-critical requests are answered meanwhile. */
START_TEST(test_loop_thread_keeps_off_be_cpus)
{
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        char conf[320];
        cpu_set_t mine, all, dev0, want, got;
        npu_admin_device_t *d = NULL;
        size_t n = 0;

        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        if (CPU_COUNT(&mine) < 2) {
                printf("loop thread: one CPU here, nothing to keep off (skipped)\n");
                return;
        }
        snprintf(conf, sizeof(conf),
                 "{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"uids\": [%u]},"
                 " {\"name\": \"be\", \"class\": \"best-effort\", \"uids\": [%u]}]}",
                 (unsigned)getuid(), (unsigned)getuid());
        ck_assert_int_eq(harness_start_config(&proc, conf, args), 0);
        ck_assert_int_eq(sched_getaffinity(proc.pid, sizeof(all), &all), 0);
        npu_context_t *lc = connect_as(&proc, "lc"), *be = connect_as(&proc, "be");
        OK(npu_admin_devices(lc, sizeof(*d), &d, &n));
        ck_assert_uint_eq(n, 2);
        cpulist_parse(d[0].host_cpus, &dev0);
        ck_assert_msg(CPU_COUNT(&dev0) > 0 && !CPU_EQUAL(&dev0, &all), "device 0 on CPUs '%s'", d[0].host_cpus);
        free(d);
        struct be_load l[2];
        be_load_open(&l[1], be, 1);
        ck_assert_msg(loop_affinity_becomes(&dev0, l + 1, 1, 3000, &got),
                      "device 1 loaded for 3 s: the loop thread may run on %d CPUs, not device 0's %d",
                      CPU_COUNT(&got), CPU_COUNT(&dev0));
        be_load_open(&l[0], be, 0);
        ck_assert_msg(loop_affinity_becomes(&all, l, 2, 3000, &got),
                      "both devices loaded for 3 s: the loop thread may run on %d CPUs, not all %d", CPU_COUNT(&got),
                      CPU_COUNT(&all));
        /* a latency-critical client waits on the first CPU of device 0 */
        int cpu = 0;
        while (!CPU_ISSET(cpu, &dev0))
                cpu++;
        pin_self(cpu);
        want = all;
        CPU_CLR(cpu, &want);
        struct small_req q;
        small_req_open(&q, lc);
        int k, apart = 0;
        for (k = 0; k < 3000 && !apart; k++) {
                small_req_run(&q, k);
                apart = loop_affinity_becomes(&want, l, 2, 1, &got);
        }
        ck_assert_msg(apart, "a latency-critical client on CPU %d for %d requests: the loop thread may run on %d CPUs, "
                      "CPU %d %s", cpu, k, CPU_COUNT(&got), cpu, CPU_ISSET(cpu, &got) ? "among them" : "not");
        for (int i = 0; i < 20; i++) /* it stays off while the client waits there */
                small_req_run(&q, i);
        ck_assert_int_eq(sched_getaffinity(proc.pid, sizeof(got), &got), 0);
        ck_assert_msg(CPU_EQUAL(&got, &want), "the loop thread went back to CPU %d under its client", cpu);
        sched_setaffinity(0, sizeof(mine), &mine);
        ck_assert_msg(loop_affinity_becomes(&all, l, 2, 4000, &got),
                      "no latency-critical wait for 4 s: the loop thread may run on %d CPUs, not all %d",
                      CPU_COUNT(&got), CPU_COUNT(&all));
        small_req_close(&q);
        be_load_close(&l[0]);
        be_load_close(&l[1]);
        npu_disconnect(lc);
        npu_disconnect(be);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* A metric of npud's endpoint msock; the test fails when it is missing. */
static double metric_of(const char *msock, const char *name)
{
        double v;

        ck_assert_msg(harness_metric(msock, name, &v) == 0, "metric %s: not read from %s", name, msock);
        return v;
}

/* n small requests of q's, one every gap_us (gap_us2 > gap_us: a gap drawn between the two
 * instead), on absolute times. */
static void cadence_run(struct small_req *q, int n, long gap_us, long gap_us2)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        for (int k = 0; k < n; k++) {
                small_req_run(q, k);
                long g = gap_us2 > gap_us ? gap_us + (long)((unsigned)rand() % (unsigned)(gap_us2 - gap_us)) : gap_us;
                t.tv_nsec += g * 1000;
                while (t.tv_nsec >= 1000000000) {
                        t.tv_nsec -= 1000000000;
                        t.tv_sec++;
                }
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        }
}

/* The first two CPUs of set (which has two at least). */
static void first_two_cpus(const cpu_set_t *set, int *cpu, int *other)
{
        for (*cpu = 0; !CPU_ISSET(*cpu, set); (*cpu)++)
                ;
        for (*other = *cpu + 1; !CPU_ISSET(*other, set); (*other)++)
                ;
}

/* A latency-critical client that comes at a cadence finds the loop thread polling for its
 * requests (lcpoll.h): its windows are predicted, its requests come in them and find the loop
 * thread polling, which costs a bounded share of the time; a client without a cadence, a
 * normal tenant's at the same cadence, and NPUD_LC_POLL=0 open no window. The loop thread is
 * kept on a CPU other than the client's (it never polls on the client's own). */
START_TEST(test_lc_poll_cadence)
{
        static const char *args[] = { "--sim-mode", "compute", "--metrics-listen", NULL, NULL };
        enum { N = 80 };
        char conf[320], msock[160];
        cpu_set_t mine;

        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        if (CPU_COUNT(&mine) < 2) {
                printf("lc poll: one CPU here, the loop thread never polls there (skipped)\n");
                return;
        }
        int cpu, other;
        first_two_cpus(&mine, &cpu, &other);
        snprintf(conf, sizeof(conf),
                 "{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"uids\": [%u]},"
                 " {\"name\": \"fg\", \"class\": \"normal\", \"uids\": [%u]}]}",
                 (unsigned)getuid(), (unsigned)getuid());
        for (int off = 0; off < 2; off++) {
                snprintf(msock, sizeof(msock), "/tmp/npud-lcpoll-%d-%d.sock", (int)getpid(), off);
                args[3] = msock;
                if (off)
                        setenv("NPUD_LC_POLL", "0", 1);
                ck_assert_int_eq(harness_start_config(&proc, conf, args), 0);
                unsetenv("NPUD_LC_POLL");
                cpu_set_t one;
                CPU_ZERO(&one);
                CPU_SET(other, &one); /* the loop thread: npud's main thread */
                ck_assert_int_eq(sched_setaffinity(proc.pid, sizeof(one), &one), 0);
                pin_self(cpu);
                npu_context_t *lc = connect_as(&proc, "lc"), *fg = connect_as(&proc, "fg");
                struct small_req ql, qf;
                small_req_open(&ql, lc);
                small_req_open(&qf, fg);
                double w0 = metric_of(msock, "npud_lc_poll_windows_total");
                ck_assert(w0 == 0);
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                cadence_run(&ql, N, 5000, 0);
                clock_gettime(CLOCK_MONOTONIC, &b);
                double took = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
                double w = metric_of(msock, "npud_lc_poll_windows_total"),
                       in = metric_of(msock, "npud_lc_poll_in_window_total"),
                       caught = metric_of(msock, "npud_lc_poll_caught_total"),
                       polled = metric_of(msock, "npud_lc_poll_seconds_total");
                printf("lc poll%s: %d requests 5 ms apart: %.0f windows, %.0f requests in theirs, %.0f found the loop "
                       "thread polling; it polled %.1f ms of %.0f ms\n", off ? " (NPUD_LC_POLL=0)" : "", N, w, in,
                       caught, polled * 1e3, took * 1e3);
                if (off) {
                        ck_assert_msg(w == 0 && caught == 0 && polled == 0, "turned off, yet %.0f windows", w);
                } else {
                        ck_assert_msg(w >= N / 2, "%.0f windows for %d requests at a 5 ms cadence", w, N);
                        ck_assert_msg(in >= w / 2, "%.0f of %.0f requests came in their window", in, w);
                        ck_assert_msg(caught >= in / 2, "%.0f of %.0f requests in their window found the loop thread polling",
                                      caught, in);
                        /* a window is at most 1/8 of the interval, a burst's tails 30 us a read or reply */
                        ck_assert_msg(polled < took * 0.3, "polled %.1f ms of %.0f", polled * 1e3, took * 1e3);
                }
                /* a latency-critical client without a cadence (a session of its own, gaps from 1 to 9
                 * ms), then a normal tenant's cadence: (almost) no window */
                npu_context_t *lc2 = connect_as(&proc, "lc");
                struct small_req q2;
                small_req_open(&q2, lc2);
                srand(7);
                cadence_run(&q2, N / 2, 1000, 9000);
                double w1 = metric_of(msock, "npud_lc_poll_windows_total");
                cadence_run(&qf, N, 5000, 0);
                double w2 = metric_of(msock, "npud_lc_poll_windows_total");
                printf("lc poll: gaps of 1-9 ms: %.0f windows more; a normal tenant's 5 ms cadence: %.0f more\n", w1 - w,
                       w2 - w1);
                ck_assert_msg(w1 - w <= 8, "%.0f windows for %d requests without a cadence", w1 - w, N / 2);
                ck_assert_msg(w2 == w1, "a normal tenant's requests opened %.0f windows", w2 - w1);
                small_req_close(&q2);
                npu_disconnect(lc2);
                sched_setaffinity(0, sizeof(mine), &mine);
                small_req_close(&ql);
                small_req_close(&qf);
                npu_disconnect(lc);
                npu_disconnect(fg);
                ck_assert_int_eq(harness_stop(&proc), 0);
                unlink(msock);
        }
}
END_TEST

struct lc_flood {
        npu_context_t *c;
        npu_stream_t s;
        double secs;
        long calls, errors;
};

/* Synchronize an empty stream back to back for f->secs: a latency-critical client whose
 * input never pauses longer than the polling tail. */
static void *lc_flood_main(void *arg)
{
        struct lc_flood *f = arg;
        struct timespec a, b;

        clock_gettime(CLOCK_MONOTONIC, &a);
        do {
                if (npu_stream_synchronize(f->c, f->s) != NPU_OK)
                        f->errors++;
                f->calls++;
                clock_gettime(CLOCK_MONOTONIC, &b);
        } while ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9 < f->secs);
        return NULL;
}

/* A latency-critical client that never pauses keeps the loop thread polling after each of
 * its requests; best-effort completions wait while it polls, but only for a bounded time:
 * a best-effort client's requests still finish while the flood goes on. */
START_TEST(test_lc_flood_keeps_best_effort_going)
{
        static const char *args[] = { "--sim-mode", "compute", NULL };
        enum { BE_REQS = 20 };
        char conf[320];
        cpu_set_t mine, one;

        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        if (CPU_COUNT(&mine) < 2) {
                printf("lc flood: one CPU here, the loop thread never polls there (skipped)\n");
                return;
        }
        int cpu, other;
        first_two_cpus(&mine, &cpu, &other);
        snprintf(conf, sizeof(conf),
                 "{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"uids\": [%u]},"
                 " {\"name\": \"be\", \"class\": \"best-effort\", \"uids\": [%u]}]}",
                 (unsigned)getuid(), (unsigned)getuid());
        ck_assert_int_eq(harness_start_config(&proc, conf, args), 0);
        CPU_ZERO(&one);
        CPU_SET(other, &one); /* the loop thread, off the flooding client's CPU: it polls */
        ck_assert_int_eq(sched_setaffinity(proc.pid, sizeof(one), &one), 0);
        npu_context_t *lc = connect_as(&proc, "lc"), *be = connect_as(&proc, "be");
        struct small_req qb;
        small_req_open(&qb, be);
        small_req_run(&qb, 0);
        struct lc_flood f = { .c = lc, .secs = 6 };
        OK(npu_stream_create(lc, 0, 0, &f.s));
        pin_self(cpu); /* the flooding thread inherits it */
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, lc_flood_main, &f), 0);
        sched_setaffinity(0, sizeof(mine), &mine);
        usleep(200 * 1000);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int k = 1; k <= BE_REQS; k++)
                small_req_run(&qb, k);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double took = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
        pthread_join(th, NULL);
        printf("lc flood: %ld synchronizations in %.0f s; %d best-effort requests meanwhile took %.3f s\n", f.calls,
               f.secs, BE_REQS, took);
        ck_assert_msg(f.errors == 0, "%ld of the flood's synchronizations failed", f.errors);
        /* they finish while the flood goes on (it began 0.2 s before them and lasts 6 s) */
        ck_assert_msg(took < f.secs - 1, "%d best-effort requests took %.3f s beside the flood", BE_REQS, took);
        OK(npu_stream_destroy(lc, f.s));
        small_req_close(&qb);
        npu_disconnect(lc);
        npu_disconnect(be);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* graph_info's "calibration" of graph g: how many engines' factors differ from 1, and the
 * largest difference (|factor - 1|). */
static int graph_calibrated(npu_context_t *c, npu_graph_t g, double *ret_max)
{
        char *text = NULL;
        const char *k;
        json_t *v;
        int moved = 0;

        *ret_max = 0;
        OK(npu_graph_info(c, g, &text));
        json_t *j = json_loads(text, 0, NULL), *cal = j ? json_object_get(j, "calibration") : NULL;
        ck_assert_msg(json_is_object(cal) && json_object_size(cal) == 4, "graph_info without calibration: %s", text);
        json_object_foreach(cal, k, v) {
                ck_assert_msg(json_is_number(v), "calibration.%s: %s", k, text);
                double d = fabs(json_number_value(v) - 1.0);
                moved += d > 1e-9;
                if (d > *ret_max)
                        *ret_max = d;
        }
        json_decref(j);
        free(text);
        return moved;
}

/* Each loaded graph is calibrated on its own runs: a best-effort tenant's MatMul graph,
 * run over and over on the device, moves its own factors, never those of a
 * latency-critical tenant's graph on the same device (through a factor the device's
 * graphs shared, a graph slower than modelled raised the latency-critical graph's
 * estimates over the loop thread's bound: its units went to workers). The
 * latency-critical requests still run on the loop thread beside it, and after the
 * best-effort tenant's uploads into fresh memory. */
START_TEST(test_graph_calibration_own)
{
        static const char *args[] = { "--sim-mode", "compute", NULL };
        char conf[320];
        float *x = mm_x(2048);
        double dlc, dbe;

        snprintf(conf, sizeof(conf),
                 "{\"tenants\": [{\"name\": \"lc\", \"class\": \"latency-critical\", \"uids\": [%u]},"
                 " {\"name\": \"be\", \"class\": \"best-effort\", \"uids\": [%u]}]}",
                 (unsigned)getuid(), (unsigned)getuid());
        setenv("NPUD_GRAPH_GANG", "0", 1); /* steps and parts one unit each: each is measured */
        int started = harness_start_config(&proc, conf, args);
        unsetenv("NPUD_GRAPH_GANG");
        ck_assert_int_eq(started, 0);
        npu_context_t *lc = connect_as(&proc, "lc");
        struct small_req q;
        small_req_open(&q, lc);
        /* a chain of two 2048^3 MatMuls, each split into parts on the workers */
        struct mm_client b;
        mm_setup(&b, &proc, "be", 2048, 2, x);
        for (int r = 0; r < 2; r++) {
                mm_start(&b);
                mm_check(&b, x);
        }
        /* and uploads into fresh device memory, slower than modelled (page faults): they
         * raise the device's copy factor, which the latency-critical copies' bound ignores */
        float *big = calloc(4u << 20, sizeof(float));
        ck_assert_ptr_nonnull(big);
        for (int i = 0; i < 8; i++) {
                npu_buffer_t f;
                OK(npu_malloc(b.c, 0, 16u << 20, &f));
                OK(npu_memcpy_to_device(b.c, f, 0, big, 16u << 20));
                OK(npu_free(b.c, f));
        }
        free(big);
        int nbe = graph_calibrated(b.c, b.g, &dbe);
        ck_assert_msg(nbe >= 1, "2 runs of two 2048^3 MatMuls left their graph's calibration at 1");
        uint64_t inl0 = device_units_inline(lc);
        for (int k = 0; k < 20; k++)
                small_req_run(&q, k);
        uint64_t inl = device_units_inline(lc) - inl0;
        int nlc = graph_calibrated(lc, q.g, &dlc);
        printf("graph calibration: the best-effort graph's factors moved on %d engines (by up to %.3f), the "
               "latency-critical graph's on %d; %" PRIu64 " of its 20 requests on the loop thread\n", nbe, dbe, nlc,
               inl);
        ck_assert_msg(nlc == 0, "another tenant's runs moved the latency-critical graph's calibration by %g", dlc);
        ck_assert_msg(inl == 20, "%" PRIu64 " of 20 latency-critical requests ran on the loop thread", inl);
        small_req_close(&q);
        npu_disconnect(lc);
        npu_disconnect(b.c);
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
}
END_TEST

/* CPU time (clock ticks) thread tid of npud has used so far. */
static long npud_thread_ticks(pid_t tid)
{
        char path[96], buf[1024];
        long ut = 0, st = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)proc.pid, (int)tid);
        ck_assert_ptr_nonnull(f = fopen(path, "r"));
        ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
        fclose(f);
        /* fields 14 and 15, after the ")" that ends the name */
        const char *p = strrchr(buf, ')');
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st), 2);
        return ut + st;
}

/* npud with two devices and two workers (share_workers as given): each device's description
 * names its host workers and CPUs; then a MatMul load of device 1, checked, and the CPU time
 * it took of each foreground worker (threads npud-w<i>, in ticks[i], up to 8; how many in
 * *ret_n). Partitioned, device 0's workers are the first host_workers of them. */
static void device_load_ticks(int share, long *ticks, int *ret_n, int *ret_dev0)
{
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        enum { N = 1024, LAUNCHES = 16 };
        size_t bytes = sizeof(float) * N * N;
        npu_admin_device_t *d = NULL;
        size_t n = 0;
        cpu_set_t mine;
        pid_t w[8];

        ck_assert_int_eq(harness_start_config(&proc, share ? "{\"sim\": {\"share_workers\": true}}" : NULL, args), 0);
        npu_context_t *c = connect_as(&proc, NULL);
        OK(npu_admin_devices(c, sizeof(*d), &d, &n));
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        /* two at least each: one endless unit never holds a device's only worker */
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(d[i].host_workers, 2);
                if (CPU_COUNT(&mine) >= 2)
                        ck_assert_msg(d[i].host_cpus[0] != 0, "device %d: no host CPUs named", i);
        }
        if (CPU_COUNT(&mine) >= 2)
                ck_assert_msg(share == !strcmp(d[0].host_cpus, d[1].host_cpus), "devices on CPUs %s and %s (shared: %d)",
                              d[0].host_cpus, d[1].host_cpus, share);
        *ret_dev0 = d[0].host_workers;
        free(d);
        *ret_n = share ? 2 : 4;
        for (int i = 0; i < *ret_n; i++) {
                char name[32];
                snprintf(name, sizeof(name), "npud-w%d", i);
                ck_assert_msg((w[i] = npud_thread(name)) > 0, "no thread %s", name);
                ticks[i] = npud_thread_ticks(w[i]);
        }
        ck_assert_msg(npud_thread(share ? "npud-w2" : "npud-w4") == 0, "more foreground workers than %d", *ret_n);
        float *h = malloc(bytes);
        ck_assert_ptr_nonnull(h);
        for (int i = 0; i < N * N; i++)
                h[i] = (float)(i % 7) * 0.125f;
        npu_buffer_t a, y, y2;
        npu_stream_t st[2];
        OK(npu_malloc(c, 1, bytes, &a));
        OK(npu_malloc(c, 1, bytes, &y));
        OK(npu_malloc(c, 1, bytes, &y2));
        OK(npu_memcpy_to_device(c, a, 0, h, bytes));
        /* two streams: work for two workers at once */
        OK(npu_stream_create(c, 1, 0, &st[0]));
        OK(npu_stream_create(c, 1, 0, &st[1]));
        npu_tensor_t in[2] = { mat(a, N, N), mat(a, N, N) }, out[2] = { mat(y, N, N), mat(y2, N, N) };
        for (int i = 0; i < LAUNCHES; i++)
                OK(npu_launch(c, st[i % 2], "MatMul", in, 2, &out[i % 2], 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(c, st[0]));
        OK(npu_stream_synchronize(c, st[1]));
        /* one element of the product, against the host */
        float got;
        OK(npu_memcpy_from_device(c, &got, y, sizeof(float) * (N + 3), sizeof(float)));
        double want = 0;
        for (int k = 0; k < N; k++)
                want += (double)h[N + k] * h[k * N + 3];
        ck_assert_msg(fabs(got - want) <= 1e-3 * (1 + fabs(want)), "y[1][3] = %g, expected %g", got, want);
        for (int i = 0; i < *ret_n; i++)
                ticks[i] = npud_thread_ticks(w[i]) - ticks[i];
        OK(npu_stream_destroy(c, st[0]));
        OK(npu_stream_destroy(c, st[1]));
        OK(npu_free(c, a));
        OK(npu_free(c, y));
        OK(npu_free(c, y2));
        npu_disconnect(c);
        free(h);
        ck_assert_int_eq(harness_stop(&proc), 0);
}

/* Each device computes on workers of its own (sim_backend_new): a load of device 1 takes
 * no CPU time of device 0's workers; with "sim": {"share_workers": true} both workers take
 * it, side by side where there are two CPUs. */
START_TEST(test_devices_own_workers)
{
        long own[8], sh[8], own0 = 0, own1 = 0;
        int n, dev0;
        cpu_set_t mine;

        device_load_ticks(0, own, &n, &dev0);
        for (int i = 0; i < n; i++)
                *(i < dev0 ? &own0 : &own1) += own[i];
        device_load_ticks(1, sh, &n, &dev0);
        printf("devices own workers: device 1's MatMuls took %ld ticks of device 0's workers and %ld of its own; "
               "shared: %ld and %ld of workers 0 and 1\n", own0, own1, sh[0], sh[1]);
        ck_assert_msg(own1 >= 10, "device 1's workers ran %ld ticks of MatMuls", own1);
        ck_assert_msg(own0 * 10 <= own1, "device 0's workers ran %ld ticks of device 1's load (its own: %ld)",
                      own0, own1);
        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        if (CPU_COUNT(&mine) >= 2) /* two CPUs: shared, both workers compute side by side */
                ck_assert_msg(sh[0] * 4 >= sh[1] && sh[1] * 4 >= sh[0], "shared workers: %ld and %ld ticks", sh[0],
                              sh[1]);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-graph-steps");
        TCase *tc = tcase_create("graph-steps");
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_lc_launch_between_steps);
        tcase_add_test(tc, test_parallel_steps_results_and_info);
        tcase_add_test(tc, test_failing_step_names_node);
        tcase_add_test(tc, test_cancel_and_close_mid_run);
        tcase_add_test(tc, test_model_mode_from_steps);
        tcase_add_test(tc, test_request_one_unit);
        tcase_add_test(tc, test_lc_units_inline);
        tcase_add_test(tc, test_loop_thread_follows_lc_client);
        tcase_add_test(tc, test_loop_thread_keeps_off_be_cpus);
        tcase_add_test(tc, test_lc_poll_cadence);
        tcase_add_test(tc, test_lc_flood_keeps_best_effort_going);
        tcase_add_test(tc, test_graph_calibration_own);
        tcase_add_test(tc, test_run_limit_covers_whole_run);
        tcase_add_test(tc, test_best_effort_loads_at_idle_priority);
        tcase_add_test(tc, test_devices_own_workers);
        suite_add_tcase(s, tc);
        return check_run(s);
}

/* Long graph steps split into parts (issue 11, graph/split.h) through the real npud: a graph
 * of one big MatMul runs its step on both host workers (graph_info counts the parts sent and
 * how many of the run's units were out at once) with exact results, and graph_info shows
 * each step's node, engine and estimate; a latency-critical launch issued while two graphs
 * of one huge MatMul step each hold both workers completes before either step finishes,
 * because it waits for a part, not a whole step. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <onnx.pb-c.h>

#include "harness.h"
#include "npu.h"

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

#include "tests/onnx-build.h"

static struct npud_proc proc;
static char conf[128];

static void start(const char *config_text, const char *const *args)
{
        const char *extra[16];
        int n = 0;

        if (config_text) {
                snprintf(conf, sizeof(conf), "/tmp/npud-parts-%d.conf", (int)getpid());
                FILE *f = fopen(conf, "w");
                ck_assert_ptr_nonnull(f);
                fputs(config_text, f);
                fclose(f);
                extra[n++] = "--config";
                extra[n++] = conf;
        }
        for (int i = 0; args && args[i]; i++)
                extra[n++] = args[i];
        extra[n] = NULL;
        ck_assert_int_eq(harness_start(&proc, extra), 0);
}

static void stop(void)
{
        if (conf[0])
                unlink(conf);
        conf[0] = 0;
        ck_assert_int_eq(harness_stop(&proc), 0);
}

static npu_context_t *connect_as(const char *tenant)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = proc.sock, .tenant = tenant };
        npu_context_t *c = NULL;
        OK(npu_connect_with(&o, &c));
        return c;
}

/* y = x * w, all d x d, as a one-node graph on device 0. */
static void load_matmul(npu_context_t *c, int d, npu_graph_t *ret)
{
        const int64_t dims[2] = { d, d };
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *n = node("MatMul", 2, (const char *[]){ "x", "w" }, 1, (const char *[]){ "y" });
        size_t len;

        n->name = (char *)"big_mm";
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, n);
        g->n_input = 2;
        g->input = (Onnx__ValueInfoProto **)list(2, tvalue("x", NPU_FLOAT32, 2, dims),
                                                 tvalue("w", NPU_FLOAT32, 2, dims));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 2, dims));
        uint8_t *buf = model_pack(g, 17, &len);
        keep_free();
        OK(npu_graph_load(c, 0, buf, len, ret));
        free(buf);
}

static json_t *info(npu_context_t *c, npu_graph_t g)
{
        char *text = NULL;
        OK(npu_graph_info(c, g, &text));
        json_t *j = json_loads(text, 0, NULL);
        ck_assert_msg(j != NULL, "graph_info: %s", text);
        free(text);
        return j;
}

static npu_tensor_t mat(npu_buffer_t b, int d)
{
        return (npu_tensor_t){ .buf = b, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { d, d } };
}

static int running(npu_context_t *c, npu_stream_t s, uint64_t task)
{
        char p[96], *text = NULL;
        snprintf(p, sizeof(p), "{\"stream\": %u, \"task\": %" PRIu64 "}", s.id, task);
        if (npu_admin_call(c, "task_info", p, &text) != NPU_OK)
                return 0;
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        int r = j && strcmp(json_string_value(json_object_get(j, "state")), "running") == 0;
        json_decref(j);
        return r;
}

/* Engine time device 0 has charged to tenant name: a graph run's first charge is its
 * binding step's return, right after which its MatMul step goes out. */
static double engine_seconds(npu_context_t *c, const char *name)
{
        char *text = NULL;
        double v = 0;

        OK(npu_admin_call(c, "sched", "{}", &text));
        json_t *j = json_loads(text, 0, NULL), *tl, *t;
        free(text);
        ck_assert_ptr_nonnull(j);
        tl = json_object_get(json_array_get(json_object_get(j, "devices"), 0), "tenants");
        size_t i;
        json_array_foreach(tl, i, t)
                if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
                        v = json_real_value(json_object_get(t, "engine_seconds"));
        json_decref(j);
        return v;
}

struct mm {
        npu_context_t *c;
        npu_graph_t g;
        npu_buffer_t x, w, y;
        npu_stream_t s;
        npu_event_t done;
        uint64_t run;
};

/* x small integers, w = 2I: y = 2x exactly whatever the order of the sums. */
static void mm_setup(struct mm *m, const char *tenant, int d)
{
        size_t n = (size_t)d * d, bytes = n * sizeof(float);
        float *x = malloc(bytes), *w = calloc(n, sizeof(float));

        ck_assert(x && w);
        for (size_t i = 0; i < n; i++)
                x[i] = (float)(i % 7) - 3.0f;
        for (int i = 0; i < d; i++)
                w[(size_t)i * d + i] = 2.0f;
        m->c = connect_as(tenant);
        load_matmul(m->c, d, &m->g);
        OK(npu_malloc(m->c, 0, bytes, &m->x));
        OK(npu_malloc(m->c, 0, bytes, &m->w));
        OK(npu_malloc(m->c, 0, bytes, &m->y));
        OK(npu_memcpy_to_device(m->c, m->x, 0, x, bytes));
        OK(npu_memcpy_to_device(m->c, m->w, 0, w, bytes));
        OK(npu_stream_create(m->c, 0, 0, &m->s));
        OK(npu_event_create(m->c, &m->done));
        free(x);
        free(w);
}

static void mm_start(struct mm *m, int d)
{
        npu_tensor_t in[2] = { mat(m->x, d), mat(m->w, d) }, out = mat(m->y, d);
        OK(npu_graph_run(m->c, m->s, m->g, in, 2, &out, 1, &m->run));
        OK(npu_event_record(m->c, m->done, m->s));
        OK(npu_flush(m->c));
}

static void mm_check(struct mm *m, int d)
{
        size_t n = (size_t)d * d;
        float *y = malloc(n * sizeof(float));

        ck_assert_ptr_nonnull(y);
        OK(npu_stream_synchronize(m->c, m->s));
        OK(npu_memcpy_from_device(m->c, y, m->y, 0, n * sizeof(float)));
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(y[i] == 2.0f * ((float)(i % 7) - 3.0f), "y[%zu] = %g", i, y[i]);
        free(y);
}

START_TEST(test_big_matmul_step_on_two_workers)
{
        enum { D = 1024 };
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        struct mm m;

        start(NULL, args);
        mm_setup(&m, NULL, D);
        json_t *j = info(m.c, m.g);
        json_t *plan = json_object_get(j, "plan");
        ck_assert_int_eq((int)json_array_size(plan), 3);
        json_t *st = json_array_get(plan, 1);
        ck_assert_str_eq(json_string_value(json_object_get(st, "op")), "MatMul");
        ck_assert_str_eq(json_string_value(json_array_get(json_object_get(st, "nodes"), 0)), "big_mm");
        ck_assert_str_eq(json_string_value(json_object_get(st, "engine")), "cube");
        ck_assert_msg(json_real_value(json_object_get(st, "est_us")) > 0, "no estimate");
        ck_assert_int_eq((int)json_integer_value(json_object_get(st, "parts_max")), D / 256);
        ck_assert_int_eq((int)json_integer_value(json_object_get(json_array_get(plan, 0), "parts_max")), 1);
        json_decref(j);

        for (int r = 0; r < 3; r++) {
                mm_start(&m, D);
                mm_check(&m, D);
        }
        j = info(m.c, m.g);
        int sent = (int)json_integer_value(json_object_get(j, "parts_sent"));
        int par = (int)json_integer_value(json_object_get(j, "parts_parallel"));
        printf("graph parts: 3 runs of a %d^3 MatMul graph sent %d parts, up to %d at once\n", D, sent, par);
        ck_assert_msg(sent >= 6, "the MatMul step went whole: %d parts in 3 runs", sent);
        ck_assert_msg(par >= 2, "the parts never ran on two workers at once (%d)", par);
        json_decref(j);
        npu_disconnect(m.c);
        stop();
}
END_TEST

/* Two clients (class normal) each run a graph of one 2048^3 MatMul step, taking both
 * foreground workers. A latency-critical launch issued meanwhile gets the next worker a
 * part frees: it completes while both graphs still run (their event records, right behind
 * the runs, have not fired). Whole steps would have held it until one graph finished.
 * Orders, not times, so a loaded host does not matter. */
START_TEST(test_lc_launch_within_a_part)
{
        enum { D = 2048 };
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        struct mm b[2];

        start("{\"tenants\": ["
              " {\"name\": \"lc\", \"class\": \"latency-critical\", \"gids\": [0]},"
              " {\"name\": \"bulk1\", \"class\": \"normal\", \"gids\": [0]},"
              " {\"name\": \"bulk2\", \"class\": \"normal\", \"gids\": [0]}]}", args);
        npu_context_t *lc = connect_as("lc");
        npu_buffer_t a, r;
        npu_stream_t ls;
        float ones[64], res[64];
        for (int i = 0; i < 64; i++)
                ones[i] = 1.0f;
        OK(npu_malloc(lc, 0, sizeof(ones), &a));
        OK(npu_malloc(lc, 0, sizeof(res), &r));
        OK(npu_memcpy_to_device(lc, a, 0, ones, sizeof(ones)));
        OK(npu_stream_create(lc, 0, 0, &ls));
        npu_tensor_t ta = { .buf = a, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 64 } };
        npu_tensor_t tr = { .buf = r, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 64 } };
        OK(npu_launch(lc, ls, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tr, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(lc, ls)); /* warm: the operator id is resolved */

        mm_setup(&b[0], "bulk1", D);
        mm_setup(&b[1], "bulk2", D);
        mm_start(&b[0], D);
        mm_start(&b[1], D);
        /* until both graphs are past their binding steps: their MatMul steps are out */
        int both = 0;
        for (int i = 0; i < 5000 && !both; i++) {
                both = running(b[0].c, b[0].s, b[0].run) && running(b[1].c, b[1].s, b[1].run) &&
                       engine_seconds(lc, "bulk1") > 0 && engine_seconds(lc, "bulk2") > 0;
                if (!both)
                        usleep(1000);
        }
        ck_assert_msg(both, "the MatMul graphs never ran together");
        double e0[2] = { engine_seconds(lc, "bulk1"), engine_seconds(lc, "bulk2") };
        OK(npu_launch(lc, ls, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tr, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(lc, ls));
        double e1[2] = { engine_seconds(lc, "bulk1"), engine_seconds(lc, "bulk2") };
        OK(npu_stream_synchronize(b[0].c, b[0].s));
        OK(npu_stream_synchronize(b[1].c, b[1].s));
        double ef[2] = { engine_seconds(lc, "bulk1"), engine_seconds(lc, "bulk2") };
        /* Engine time is charged as units come back: by the LC launch's completion, each
         * graph had a part or two of its MatMul back, not the whole step (which, run whole,
         * is charged at once when it ends). */
        for (int k = 0; k < 2; k++) {
                printf("graph parts: bulk%d had %.1f of its %.1f ms of MatMul step back when the "
                       "LC launch completed\n", k + 1, (e1[k] - e0[k]) * 1e3, (ef[k] - e0[k]) * 1e3);
                ck_assert_msg(e1[k] - e0[k] < 0.5 * (ef[k] - e0[k]),
                              "the LC launch completed after bulk%d's MatMul step (%.1f of %.1f ms "
                              "back): it waited for a whole step instead of a part", k + 1,
                              (e1[k] - e0[k]) * 1e3, (ef[k] - e0[k]) * 1e3);
        }
        OK(npu_memcpy_from_device(lc, res, r, 0, sizeof(res)));
        for (int i = 0; i < 64; i++)
                ck_assert_float_eq(res[i], 2.0f);
        mm_check(&b[0], D);
        mm_check(&b[1], D);
        for (int k = 0; k < 2; k++) {
                json_t *j = info(b[k].c, b[k].g);
                ck_assert_msg(json_integer_value(json_object_get(j, "parts_sent")) >= 2,
                              "graph %d's MatMul step went whole", k);
                json_decref(j);
        }
        npu_disconnect(b[0].c);
        npu_disconnect(b[1].c);
        npu_disconnect(lc);
        stop();
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-graph-parts");
        TCase *tc = tcase_create("graph-parts");
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_big_matmul_step_on_two_workers);
        tcase_add_test(tc, test_lc_launch_within_a_part);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

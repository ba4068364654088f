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

#include "tests/check-run.h"
#include "tests/onnx-build.h"

#include "graph-clients.h"

static struct npud_proc proc;

static json_t *info(npu_context_t *c, npu_graph_t g)
{
        char *text = NULL;
        OK(npu_graph_info(c, g, &text));
        json_t *j = json_loads(text, 0, NULL);
        ck_assert_msg(j != NULL, "graph_info: %s", text);
        free(text);
        return j;
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

START_TEST(test_big_matmul_step_on_two_workers)
{
        enum { D = 1024 };
        static const char *args[] = { "--sim-mode", "compute", "--workers", "2", NULL };
        struct mm_client m;
        float *x = mm_x(D);

        ck_assert_int_eq(harness_start_config(&proc, NULL, args), 0);
        mm_setup(&m, &proc, NULL, D, 1, x);
        json_t *j = info(m.c, m.g);
        json_t *plan = json_object_get(j, "plan");
        ck_assert_int_eq((int)json_array_size(plan), 3);
        json_t *st = json_array_get(plan, 1);
        ck_assert_str_eq(json_string_value(json_object_get(st, "op")), "MatMul");
        ck_assert_str_eq(json_string_value(json_array_get(json_object_get(st, "nodes"), 0)), "mm0_0");
        ck_assert_str_eq(json_string_value(json_object_get(st, "engine")), "cube");
        ck_assert_msg(json_real_value(json_object_get(st, "est_us")) > 0, "no estimate");
        /* row parts of 64 rows at least, 32 where tuning packed B (graph/split.h) */
        int pmax = (int)json_integer_value(json_object_get(st, "parts_max"));
        ck_assert_msg(pmax == D / 64 || pmax == D / 32, "parts_max %d", pmax);
        ck_assert_int_eq((int)json_integer_value(json_object_get(json_array_get(plan, 0), "parts_max")), 1);
        json_decref(j);

        for (int r = 0; r < 3; r++) {
                mm_start(&m);
                mm_check(&m, x);
        }
        j = info(m.c, m.g);
        int sent = (int)json_integer_value(json_object_get(j, "parts_sent"));
        int par = (int)json_integer_value(json_object_get(j, "parts_parallel"));
        printf("graph parts: 3 runs of a %d^3 MatMul graph sent %d parts, up to %d at once\n", D, sent, par);
        ck_assert_msg(sent >= 6, "the MatMul step went whole: %d parts in 3 runs", sent);
        ck_assert_msg(par >= 2, "the parts never ran on two workers at once (%d)", par);
        json_decref(j);
        npu_disconnect(m.c);
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
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
        struct mm_client b[2];
        struct lc_client lc;
        float *x = mm_x(D);
        char s1[32] = "", s2[32] = "";

        lc_beside_two_bulk(&proc, args, &lc, b, D, 1, x);
        /* until both graphs are past their binding steps: their MatMul steps are out */
        int both = 0;
        for (int i = 0; i < 5000 && !both; i++) {
                both = mm_running(&b[0], s1, sizeof(s1)) && mm_running(&b[1], s2, sizeof(s2)) &&
                       engine_seconds(lc.c, "bulk1") > 0 && engine_seconds(lc.c, "bulk2") > 0;
                if (!both)
                        usleep(1000);
        }
        ck_assert_msg(both, "the MatMul graphs never ran together: %s, %s", s1, s2);
        double e0[2] = { engine_seconds(lc.c, "bulk1"), engine_seconds(lc.c, "bulk2") };
        lc_launch(&lc);
        double e1[2] = { engine_seconds(lc.c, "bulk1"), engine_seconds(lc.c, "bulk2") };
        OK(npu_stream_synchronize(b[0].c, b[0].s));
        OK(npu_stream_synchronize(b[1].c, b[1].s));
        double ef[2] = { engine_seconds(lc.c, "bulk1"), engine_seconds(lc.c, "bulk2") };
        /* Engine time is charged as units come back: by the LC launch's completion, each
         * graph had a part or two of its MatMul back, not the whole step (which, run whole,
         * is charged at once when it ends). With four parts a step, both workers may finish
         * parts of the same graph before the LC launch gets one: half of it back is a
         * legitimate wait of one part, so the bound is 80 %, which a whole step exceeds. */
        for (int k = 0; k < 2; k++) {
                printf("graph parts: bulk%d had %.1f of its %.1f ms of MatMul step back when the "
                       "LC launch completed\n", k + 1, (e1[k] - e0[k]) * 1e3, (ef[k] - e0[k]) * 1e3);
                ck_assert_msg(e1[k] - e0[k] < 0.8 * (ef[k] - e0[k]),
                              "the LC launch completed after bulk%d's MatMul step (%.1f of %.1f ms "
                              "back): it waited for a whole step instead of a part", k + 1,
                              (e1[k] - e0[k]) * 1e3, (ef[k] - e0[k]) * 1e3);
        }
        mm_check(&b[0], x);
        mm_check(&b[1], x);
        for (int k = 0; k < 2; k++) {
                json_t *j = info(b[k].c, b[k].g);
                ck_assert_msg(json_integer_value(json_object_get(j, "parts_sent")) >= 2,
                              "graph %d's MatMul step went whole", k);
                json_decref(j);
        }
        npu_disconnect(b[0].c);
        npu_disconnect(b[1].c);
        lc_check(&lc);
        free(x);
        ck_assert_int_eq(harness_stop(&proc), 0);
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
        return check_run(s);
}

/* Kernel tuning through the real npud (issue 11 part 5): loading a graph measures its MatMul
 * once, graph_info names the variant chosen, the graph computes the right answer with it,
 * the cache file keeps the result so that a restarted npud takes it without measuring, an
 * unprivileged user may list but not clear the cache, and clearing makes the next load
 * measure again. */
#include <check.h>
#include <stdarg.h>
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

enum { M = 16, KD = 96, N = 80 };

/* y = x · w, x [M, KD] an input, w [KD, N] an initializer. */
static void load_matmul(npu_context_t *ctx, const float *w, npu_graph_t *ret)
{
        static const int64_t dx[] = { M, KD }, dw[] = { KD, N }, dy[] = { M, N };
        Onnx__GraphProto *g = graph_proto();
        Onnx__TensorProto *t = K(sizeof(*t));
        uint8_t *buf;
        size_t len;

        onnx__tensor_proto__init(t);
        t->name = (char *)"w";
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->n_dims = 2;
        t->dims = K(sizeof(int64_t) * 2);
        memcpy(t->dims, dw, sizeof(dw));
        t->has_raw_data = 1;
        t->raw_data.len = sizeof(float) * KD * N;
        t->raw_data.data = (uint8_t *)w;
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, node("MatMul", 2, (const char *[]){ "x", "w" }, 1,
                                                      (const char *[]){ "y" }));
        g->n_initializer = 1;
        g->initializer = (Onnx__TensorProto **)list(1, t);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_FLOAT32, 2, dx));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("y", NPU_FLOAT32, 2, dy));
        buf = model_pack(g, 17, &len);
        OK(npu_graph_load(ctx, 0, buf, len, ret));
        free(buf);
}

/* graph_info's compile section: the tuned node list and the two counts; a node on packed
 * weights (onednn-packed or xsmm-packed: w is an initializer, so those variants are measured
 * too) is counted with the bytes of its reordered copy of w. */
static void tuned_info(npu_context_t *ctx, npu_graph_t g, int *measured, int *cached,
                       char *variant, size_t vlen)
{
        char *text = NULL;
        json_t *info, *c, *tuned;

        OK(npu_graph_info(ctx, g, &text));
        info = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(info);
        c = json_object_get(info, "compile");
        ck_assert_ptr_nonnull(c);
        tuned = json_object_get(c, "tuned");
        ck_assert_int_eq(json_array_size(tuned), 1);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tuned, 0), "op")), "MatMul");
        snprintf(variant, vlen, "%s",
                 json_string_value(json_object_get(json_array_get(tuned, 0), "variant")));
        *measured = (int)json_integer_value(json_object_get(c, "tune_measured"));
        *cached = (int)json_integer_value(json_object_get(c, "tune_cached"));
        int packed = strcmp(variant, "onednn-packed") == 0 || strcmp(variant, "xsmm-packed") == 0;
        ck_assert_int_eq(json_integer_value(json_object_get(c, "packed")), packed);
        if (packed)
                ck_assert_int_ge(json_integer_value(json_object_get(c, "packed_bytes")), KD * N * 4);
        else
                ck_assert_int_eq(json_integer_value(json_object_get(c, "packed_bytes")), 0);
        json_decref(info);
}

static void run_check(npu_context_t *ctx, npu_graph_t g, const float *w)
{
        static float x[M * KD], y[M * N];
        npu_host_tensor_t in = { .data = x, .bytes = sizeof(x), .dtype = NPU_FLOAT32, .ndim = 2,
                                 .dims = { M, KD } },
                          out = { .data = y, .bytes = sizeof(y) };

        for (int i = 0; i < M * KD; i++)
                x[i] = (float)(i % 11 - 5) * 0.125f;
        OK(npu_graph_run_host(ctx, g, &in, 1, &out, 1));
        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        double ref = 0;
                        for (int k = 0; k < KD; k++)
                                ref += (double)x[i * KD + k] * w[k * N + j];
                        ck_assert_double_eq_tol(y[i * N + j], ref, 1e-3);
                }
}

static int count_lines(const char *path)
{
        FILE *f = fopen(path, "r");
        int n = 0, c;

        if (!f)
                return -1;
        while ((c = fgetc(f)) != EOF)
                n += c == '\n';
        fclose(f);
        return n;
}

static int unprivileged_tune(void *arg)
{
        const char *sock = arg;
        npu_context_t *c;
        char *res = NULL;

        if (npu_connect(sock, &c) != NPU_OK)
                return 10;
        if (npu_admin_call(c, "tune_list", NULL, &res) != NPU_OK || !strstr(res, "MatMul"))
                return 11;
        free(res);
        res = NULL;
        if (npu_admin_call(c, "tune_clear", NULL, &res) != NPU_ERR_PERMISSION)
                return 12;
        npu_disconnect(c);
        return 0;
}

START_TEST(test_tune_load_cache_restart_clear)
{
        static float w[KD * N];
        struct npud_proc p;
        npu_context_t *ctx;
        npu_graph_t g;
        int measured, cached;
        char variant[32], cache[256], *res = NULL;
        uid_t uid = 0;
        gid_t gid = 0;

        for (int i = 0; i < KD * N; i++)
                w[i] = (float)(i % 9 - 4) * 0.25f;
        ck_assert_int_eq(harness_start(&p, NULL), 0);
        snprintf(cache, sizeof(cache), "%s", p.tune);
        OK(npu_connect(p.sock, &ctx));
        /* first load: measured */
        load_matmul(ctx, w, &g);
        tuned_info(ctx, g, &measured, &cached, variant, sizeof(variant));
        ck_assert_int_eq(measured, 1);
        ck_assert_int_eq(cached, 0);
        ck_assert(strcmp(variant, "openblas") == 0 || strcmp(variant, "onednn") == 0 ||
                  strcmp(variant, "onednn-packed") == 0 || strcmp(variant, "xsmm-packed") == 0);
        run_check(ctx, g, w);
        OK(npu_graph_unload(ctx, g));
        ck_assert_int_eq(count_lines(cache), 2); /* the magic line and the entry */
        OK(npu_admin_call(ctx, "tune_list", "{\"op\":\"MatMul\"}", &res));
        /* the four variants were measured for this MatMul on a constant w */
        ck_assert_ptr_nonnull(strstr(res, "onednn-packed"));
        ck_assert_ptr_nonnull(strstr(res, "xsmm-packed"));
        ck_assert_ptr_nonnull(strstr(res, "packed-bx"));
        ck_assert_ptr_nonnull(strstr(res, "\"this_host\": true") ? res : strstr(res, "\"this_host\":true"));
        free(res);
        /* the second load in the same npud takes it from memory */
        load_matmul(ctx, w, &g);
        tuned_info(ctx, g, &measured, &cached, variant, sizeof(variant));
        ck_assert_int_eq(measured, 0);
        ck_assert_int_eq(cached, 1);
        OK(npu_graph_unload(ctx, g));
        /* an unprivileged user lists but may not clear */
        if (harness_attacker(&uid, &gid) == 0) {
                ck_assert_int_eq(harness_share_socket(&p), 0);
                ck_assert_int_eq(harness_run_as(uid, gid, unprivileged_tune, p.sock), 0);
                ck_assert_int_eq(count_lines(cache), 2);
        }
        npu_disconnect(ctx);
        /* a restart with the same cache file: no measuring */
        {
                struct npud_proc q;
                const char *extra[] = { "--tuning-cache", cache, NULL };
                char saved[256];
                /* the first npud's directory (and so its cache) goes with it: copy the file */
                snprintf(saved, sizeof(saved), "/tmp/npud-tune-keep-%d", (int)getpid());
                char cmd[600];
                snprintf(cmd, sizeof(cmd), "cp %s %s", cache, saved);
                ck_assert_int_eq(system(cmd), 0);
                ck_assert_int_eq(harness_stop(&p), 0);
                extra[1] = saved;
                ck_assert_int_eq(harness_start(&q, extra), 0);
                OK(npu_connect(q.sock, &ctx));
                load_matmul(ctx, w, &g);
                tuned_info(ctx, g, &measured, &cached, variant, sizeof(variant));
                ck_assert_int_eq(measured, 0);
                ck_assert_int_eq(cached, 1);
                run_check(ctx, g, w);
                OK(npu_graph_unload(ctx, g));
                /* clearing (the admin): the file keeps only its first line, the next load
                 * measures */
                OK(npu_admin_call(ctx, "tune_clear", NULL, &res));
                ck_assert_ptr_nonnull(strstr(res, "\"dropped\""));
                free(res);
                ck_assert_int_eq(count_lines(saved), 1);
                load_matmul(ctx, w, &g);
                tuned_info(ctx, g, &measured, &cached, variant, sizeof(variant));
                ck_assert_int_eq(measured, 1);
                OK(npu_graph_unload(ctx, g));
                /* bad parameters are refused by name */
                ck_assert_int_eq(npu_admin_call(ctx, "tune_clear", "{\"op\":7}", &res), NPU_ERR_INVALID);
                ck_assert_ptr_nonnull(strstr(npu_error_message(), "'op'"));
                ck_assert_int_eq(npu_admin_call(ctx, "tune_list", "{\"bogus\":1}", &res), NPU_ERR_INVALID);
                npu_disconnect(ctx);
                ck_assert_int_eq(harness_stop(&q), 0);
                unlink(saved);
        }
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-tune");
        TCase *tc = tcase_create("tune");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_tune_load_cache_restart_clear);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

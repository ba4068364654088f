/* Kernel tuning through the real npud (issue 11 part 5): loading a graph measures its MatMul
 * once, graph_info names the variant chosen, the graph computes the right answer with it,
 * the cache file keeps the result so that a restarted npud takes it without measuring, an
 * unprivileged user may list but not clear the cache, and clearing makes the next load
 * measure again. Packed weights (the copies tuned kernels reorder at load) are charged to the
 * loading tenant with the weights: an unprivileged tenant whose quota has no room for them
 * gets none (and a graph that still computes), root's tenant is charged for those it gets. */
#include <check.h>
#include <math.h>
#include <fcntl.h>
#include <sys/wait.h>
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

/* The ONNX model y = x · w, x [m, k] an input, w [k, n] an initializer of the floats at w;
 * its bytes (free them) and *len. */
static uint8_t *matmul_model(int64_t m, int64_t k, int64_t n, const float *w, size_t *len)
{
        const int64_t dx[] = { m, k }, dw[] = { k, n }, dy[] = { m, n };
        Onnx__GraphProto *g = graph_proto();
        Onnx__TensorProto *t = K(sizeof(*t));

        onnx__tensor_proto__init(t);
        t->name = (char *)"w";
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->n_dims = 2;
        t->dims = K(sizeof(int64_t) * 2);
        memcpy(t->dims, dw, sizeof(dw));
        t->has_raw_data = 1;
        t->raw_data.len = sizeof(float) * (size_t)(k * n);
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
        return model_pack(g, 17, len);
}

/* y = x · w, x [M, KD] an input, w [KD, N] an initializer. */
static void load_matmul(npu_context_t *ctx, const float *w, npu_graph_t *ret)
{
        size_t len;
        uint8_t *buf = matmul_model(M, KD, N, w, &len);

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

/* ---- packed weights and the tenant's quota ---- */

enum { PM = 64, PK = 3200, PN = 3200 }; /* w: 40 960 000 bytes */
#define PQUOTA (64ll << 20)

static float *pw; /* w [PK, PN] */
static uint8_t *pmodel;
static size_t pmodel_len;

/* y = x · w, x [PM, PK] an input, w [PK, PN] an initializer: a product whose packed copy of
 * w (as large as w) does not fit beside w in a 64 MiB quota. */
static void packed_model(void)
{
        pw = malloc(sizeof(float) * PK * PN);
        ck_assert_ptr_nonnull(pw);
        for (size_t i = 0; i < (size_t)PK * PN; i++)
                pw[i] = (float)((int)(i % 13) - 6) / 64.0f;
        pmodel = matmul_model(PM, PK, PN, pw, &pmodel_len);
}

/* compile.packed_bytes of graph g */
static long long packed_bytes(npu_context_t *c, npu_graph_t g)
{
        char *text = NULL;
        long long n = -1;

        if (npu_graph_info(c, g, &text) != NPU_OK)
                return -1;
        json_t *info = json_loads(text, 0, NULL);
        free(text);
        json_t *v = json_object_get(json_object_get(info, "compile"), "packed_bytes");
        if (json_is_integer(v))
                n = json_integer_value(v);
        json_decref(info);
        return n;
}

/* Run g once and check a few outputs against the product computed here: 0, or an error. */
static int packed_run(npu_context_t *c, npu_graph_t g)
{
        float *x = malloc(sizeof(float) * PM * PK), *y = malloc(sizeof(float) * PM * PN);
        int rc = 0;

        if (!x || !y)
                return 20;
        for (int i = 0; i < PM * PK; i++)
                x[i] = (float)(i % 7 - 3) * 0.125f;
        npu_host_tensor_t in = { .data = x, .bytes = sizeof(float) * PM * PK, .dtype = NPU_FLOAT32,
                                 .ndim = 2, .dims = { PM, PK } },
                          out = { .data = y, .bytes = sizeof(float) * PM * PN };
        if (npu_graph_run_host(c, g, &in, 1, &out, 1) != NPU_OK)
                rc = 21;
        for (int s = 0; !rc && s < 5; s++) {
                int i = (s * 37) % PM, j = (s * 1031) % PN;
                double ref = 0;
                for (int k = 0; k < PK; k++)
                        ref += (double)x[i * PK + k] * pw[(size_t)k * PN + j];
                if (fabs(y[i * PN + j] - ref) > 1e-3 * (1 + fabs(ref)))
                        rc = 22;
        }
        free(x);
        free(y);
        return rc;
}

static const char *psock;

/* The tenant with 64 MiB: the weights take 39 MiB of it, so no packed copy is made; the
 * load succeeds and the graph computes. Holds the graph until the parent has looked at the
 * tenant's figures (a byte on fd 0 of the pipe pair in arg). */
static int packed_attacker(void *arg)
{
        int *fds = arg; /* [0]: read the parent's go, [1]: write "loaded" */
        npu_context_t *c;
        npu_graph_t g;
        char b = 1;

        if (npu_connect(psock, &c) != NPU_OK)
                return 10;
        if (npu_graph_load(c, 0, pmodel, pmodel_len, &g) != NPU_OK) {
                fprintf(stderr, "attacker: load: %s\n", npu_error_message());
                return 11;
        }
        if (packed_bytes(c, g) != 0)
                return 12;
        int rc = packed_run(c, g);
        if (rc)
                return rc;
        if (write(fds[1], &b, 1) != 1 || read(fds[0], &b, 1) != 1)
                return 13;
        npu_disconnect(c);
        return 0;
}

START_TEST(test_packed_weights_charged)
{
        const long long wbytes = (long long)sizeof(float) * PK * PN;
        struct npud_proc p;
        npu_context_t *ctx;
        npu_graph_t g;
        uid_t uid = 0;
        gid_t gid = 0;
        char conf[128], json[256];

        packed_model();
        int attacker = harness_attacker(&uid, &gid) == 0;
        snprintf(json, sizeof(json), "{\"tenants\": [{\"name\": \"tight\", \"uids\": [%u],"
                 " \"memory_quota\": {\"total\": %lld}}]}", (unsigned)uid, PQUOTA);
        snprintf(conf, sizeof(conf), "/tmp/npud-tune-quota-%d.json", (int)getpid());
        int fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
        close(fd);
        const char *extra[] = { "--config", conf, NULL };
        ck_assert_int_eq(harness_start(&p, attacker ? extra : NULL), 0);
        unlink(conf);
        OK(npu_connect(p.sock, &ctx));
        psock = p.sock;
        if (attacker) {
                int go[2], loaded[2], status = -1;
                char b = 0;
                ck_assert_int_eq(harness_share_socket(&p), 0);
                ck_assert_int_eq(pipe(go), 0);
                ck_assert_int_eq(pipe(loaded), 0);
                int fds[2] = { go[0], loaded[1] };
                pid_t pid = harness_spawn_as(uid, gid, packed_attacker, fds);
                ck_assert_int_gt(pid, 0);
                close(loaded[1]);
                if (read(loaded[0], &b, 1) == 1) {
                        /* the weights, and the run's input and output staged by the host
                         * path (1.6 MB): no packed copy */
                        long long used = harness_tenant_memory_used(ctx, "tight");
                        ck_assert_msg(used >= wbytes && used < wbytes + (4 << 20), "tenant 'tight' holds %lld bytes", used);
                        ck_assert_int_eq(write(go[1], &b, 1), 1);
                }
                ck_assert_int_eq(waitpid(pid, &status, 0), pid);
                ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker status %d", status);
                close(go[0]);
                close(go[1]);
                close(loaded[0]);
                for (int i = 0; i < 100 && harness_tenant_memory_used(ctx, "tight") != 0; i++)
                        usleep(20 * 1000);
                ck_assert_int_eq(harness_tenant_memory_used(ctx, "tight"), 0);
        }
        /* root, without a quota: the product on a packed copy of w wins tuning (plain
         * oneDNN reorders all of w at every call); the tenant holds the weights and the copy */
        OK(npu_graph_load(ctx, 0, pmodel, pmodel_len, &g));
        long long pb = packed_bytes(ctx, g);
        ck_assert_msg(pb >= wbytes, "packed_bytes %lld", pb);
        char *text = NULL;
        OK(npu_admin_call(ctx, "tenants", NULL, &text));
        json_t *root = json_loads(text, 0, NULL), *t;
        free(text);
        size_t i;
        long long used = -1;
        json_array_foreach(json_object_get(root, "tenants"), i, t)
                if (json_integer_value(json_object_get(t, "memory_used")) > 0)
                        used = json_integer_value(json_object_get(t, "memory_used"));
        json_decref(root);
        ck_assert_msg(used >= wbytes + pb && used < wbytes + pb + 4096, "root's tenant holds %lld bytes for "
                      "%lld of weights and %lld packed", used, wbytes, pb);
        ck_assert_int_eq(packed_run(ctx, g), 0);
        OK(npu_graph_unload(ctx, g));
        npu_disconnect(ctx);
        ck_assert_int_eq(harness_stop(&p), 0);
        free(pmodel);
        free(pw);
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
        tcase_add_test(tc, test_packed_weights_charged);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* STRING tensors through the real npud (issue 15): a graph run takes strings encoded in its
 * input buffer (per element a uint32 little-endian length and the bytes) and gives them
 * back encoded; Cast parses and prints numbers. As an unprivileged user, launches with
 * string tensors (whose elements would be pointers the client chose) are refused, a graph
 * run whose string buffer holds pointer-like bytes instead of an encoding fails naming the
 * input, and a short output buffer fails naming the output; npud and another client carry
 * on. Strings go through Gather, Concat, Equal and TfIdfVectorizer inside a graph; invalid
 * UTF-8 in an input or an initializer, and strings bound where Gather reads indices, are
 * errors naming them. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnx.pb-c.h>

#include "harness.h"
#include "npu.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx; /* the well-behaved client */

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

#include "tests/onnx-build.h"

/* x (string [n]) -> Cast(to=float) -> f; x -> Identity -> s. */
static void *model(size_t *ret_len)
{
        static const int64_t dn[] = { -1 };
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *cast = node("Cast", 1, (const char *const[]){ "x" }, 1, (const char *const[]){ "f" });
        Onnx__NodeProto *id = node("Identity", 1, (const char *const[]){ "x" }, 1, (const char *const[]){ "s" });

        attr_i(cast, "to", NPU_FLOAT32);
        g->n_node = 2;
        g->node = (Onnx__NodeProto **)list(2, cast, id);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_STRING, 1, dn));
        g->n_output = 2;
        g->output = (Onnx__ValueInfoProto **)list(2, tvalue("f", NPU_FLOAT32, 1, dn),
                                                  tvalue("s", NPU_STRING, 1, dn));
        return model_pack(g, 17, ret_len);
}

/* g = Gather(x, idx = [3, 0]); y = Concat(g, x) (string [n + 2]); eq = Equal(y, k = ["1e3"])
 * (bool). bad_init: k holds invalid UTF-8; swap: Gather(k, x), strings as its indices. */
static void *model_ops(int bad_init, int swap, size_t *ret_len)
{
        static const int64_t dn[] = { -1 };
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *ga = node("Gather", 2, swap ? (const char *const[]){ "k", "x" } : (const char *const[]){ "x", "idx" },
                                   1, (const char *const[]){ "g" });
        Onnx__NodeProto *cc = node("Concat", 2, (const char *const[]){ "g", "x" }, 1, (const char *const[]){ "y" });
        Onnx__NodeProto *eq = node("Equal", 2, (const char *const[]){ "y", "k" }, 1, (const char *const[]){ "eq" });
        Onnx__TensorProto *idx = K(sizeof(*idx));

        onnx__tensor_proto__init(idx);
        idx->name = (char *)"idx";
        idx->has_data_type = 1;
        idx->data_type = NPU_INT64;
        idx->n_dims = 1;
        idx->dims = K(sizeof(int64_t));
        idx->dims[0] = 2;
        idx->n_int64_data = 2;
        idx->int64_data = K(2 * sizeof(int64_t));
        idx->int64_data[0] = 3;
        attr_i(cc, "axis", 0);
        g->n_node = 3;
        g->node = (Onnx__NodeProto **)list(3, ga, cc, eq);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_STRING, 1, dn));
        g->n_initializer = 2;
        g->initializer = (Onnx__TensorProto **)list(
                2, idx, str_tensor("k", 1, (const char *const[]){ bad_init ? "1e\xc3" : "1e3" }));
        g->n_output = 2;
        g->output = (Onnx__ValueInfoProto **)list(2, tvalue("y", NPU_STRING, 1, dn),
                                                  tvalue("eq", NPU_BOOL, 1, dn));
        return model_pack(g, 17, ret_len);
}

/* "2.5" "-inf" "" "1e3" */
static const uint8_t enc[] = { 3, 0, 0, 0, '2', '.', '5', 4, 0, 0, 0, '-', 'i', 'n', 'f',
                               0, 0, 0, 0, 3, 0, 0, 0, '1', 'e', '3' };

static npu_tensor_t t1(npu_buffer_t b, int dtype, int64_t n)
{
        npu_tensor_t t = { .buf = b, .dtype = (npu_dtype_t)dtype, .ndim = 1, .dims = { n } };
        return t;
}

/* An output of run2: dtype [n] in a buffer of cap bytes, copied to got after a good run. */
struct run_out {
        int dtype;
        int64_t n;
        size_t cap;
        void *got;
};

/* One run of g: x (string [4]) from bytes (len), two outputs. The run's status after a
 * synchronize; the outputs' got receive them when it succeeded. */
static npu_status_t run2(npu_context_t *c, npu_graph_t g, const void *x, size_t len, const struct run_out *o)
{
        npu_buffer_t bx, bo[2];
        npu_stream_t s;
        npu_tensor_t in, out[2];
        npu_status_t st;

        OK(npu_stream_create(c, 0, 0, &s));
        OK(npu_malloc(c, 0, len, &bx));
        for (int i = 0; i < 2; i++) {
                OK(npu_malloc(c, 0, o[i].cap, &bo[i]));
                out[i] = t1(bo[i], o[i].dtype, o[i].n);
        }
        OK(npu_memcpy_to_device(c, bx, 0, x, len));
        in = t1(bx, NPU_STRING, 4);
        st = npu_graph_run(c, s, g, &in, 1, out, 2, NULL);
        if (st == NPU_OK)
                st = npu_stream_synchronize(c, s);
        for (int i = 0; i < 2; i++) {
                if (st == NPU_OK)
                        OK(npu_memcpy_from_device(c, o[i].got, bo[i], 0, o[i].cap));
                npu_free(c, bo[i]);
        }
        npu_free(c, bx);
        npu_stream_destroy(c, s);
        return st;
}

/* One run of model: outputs f (float [4]) and s (outcap bytes). */
static npu_status_t run(npu_context_t *c, npu_graph_t g, const void *x, size_t len, size_t outcap,
                        float *got_f, uint8_t *got_s)
{
        return run2(c, g, x, len,
                    (const struct run_out[]){ { NPU_FLOAT32, 4, 16, got_f }, { NPU_STRING, 4, outcap, got_s } });
}

static void good_run(npu_context_t *c, npu_graph_t g)
{
        float f[4];
        uint8_t s[sizeof(enc)];

        OK(run(c, g, enc, sizeof(enc), sizeof(enc), f, s));
        ck_assert(f[0] == 2.5f && f[1] < -1e38f && f[2] == 0 && f[3] == 1000);
        ck_assert_int_eq(memcmp(s, enc, sizeof(enc)), 0);
}

START_TEST(test_string_graph)
{
        size_t len;
        void *m = model(&len);
        npu_graph_t g;

        OK(npu_graph_load(ctx, 0, m, len, &g));
        free(m);
        good_run(ctx, g);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* One run of model_ops: y (encoded, ycap bytes) and eq [6]. */
static npu_status_t run_ops(npu_context_t *c, npu_graph_t g, const void *x, size_t len, uint8_t *got_y,
                            size_t ycap, uint8_t *got_eq)
{
        return run2(c, g, x, len,
                    (const struct run_out[]){ { NPU_STRING, 6, ycap, got_y }, { NPU_BOOL, 6, 6, got_eq } });
}

START_TEST(test_string_ops)
{
        /* y: "1e3" "2.5", then x */
        static const uint8_t head[] = { 3, 0, 0, 0, '1', 'e', '3', 3, 0, 0, 0, '2', '.', '5' };
        uint8_t y[sizeof(head) + sizeof(enc)], eq[6];
        size_t len;
        void *m = model_ops(0, 0, &len);
        npu_graph_t g;

        OK(npu_graph_load(ctx, 0, m, len, &g));
        free(m);
        OK(run_ops(ctx, g, enc, sizeof(enc), y, sizeof(y), eq));
        ck_assert_int_eq(memcmp(y, head, sizeof(head)), 0);
        ck_assert_int_eq(memcmp(y + sizeof(head), enc, sizeof(enc)), 0);
        ck_assert_int_eq(memcmp(eq, "\1\0\0\0\0\1", 6), 0);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* x (string [4]) -> TfIdfVectorizer(pool_strings ["1e3", "2.5", "-inf"], unigrams, TF) -> t
 * (float [3]). */
static void *model_tfidf(size_t *ret_len)
{
        static const int64_t dn[] = { -1 }, counts[] = { 0 }, idx[] = { 2, 0, 1 };
        static const char *const pool[] = { "1e3", "2.5", "-inf" };
        Onnx__GraphProto *g = graph_proto();
        Onnx__NodeProto *n = node("TfIdfVectorizer", 1, (const char *const[]){ "x" }, 1,
                                  (const char *const[]){ "t" });

        attr_i(n, "min_gram_length", 1);
        attr_i(n, "max_gram_length", 1);
        attr_i(n, "max_skip_count", 0);
        attr_ints(n, "ngram_counts", 1, counts);
        attr_ints(n, "ngram_indexes", 3, idx);
        attr_s(n, "mode", "TF");
        attr_strings(n, "pool_strings", 3, pool);
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, n);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", NPU_STRING, 1, dn));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("t", NPU_FLOAT32, 1, dn));
        return model_pack(g, 17, ret_len);
}

START_TEST(test_string_tfidf)
{
        size_t len;
        void *m = model_tfidf(&len);
        npu_buffer_t bx, bt;
        npu_stream_t s;
        npu_tensor_t in, out;
        npu_graph_t g;
        float t[3];

        OK(npu_graph_load(ctx, 0, m, len, &g));
        free(m);
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_malloc(ctx, 0, sizeof(enc), &bx));
        OK(npu_malloc(ctx, 0, sizeof(t), &bt));
        OK(npu_memcpy_to_device(ctx, bx, 0, enc, sizeof(enc)));
        in = t1(bx, NPU_STRING, 4);
        out = t1(bt, NPU_FLOAT32, 3);
        OK(npu_graph_run(ctx, s, g, &in, 1, &out, 1, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, t, bt, 0, sizeof(t)));
        /* x = "2.5" "-inf" "" "1e3": index 0 is "2.5", 1 "-inf", 2 "1e3" */
        ck_assert_msg(t[0] == 1 && t[1] == 1 && t[2] == 1, "%g %g %g", t[0], t[1], t[2]);
        npu_free(ctx, bx);
        npu_free(ctx, bt);
        npu_stream_destroy(ctx, s);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* Run as the unprivileged attacker: 0, or a check's failure ends it non-zero. */
static int string_attack(void *arg)
{
        npu_context_t *c;
        npu_buffer_t b[2];
        npu_stream_t s;
        npu_graph_t g, g2;
        npu_tensor_t t[2];
        uint8_t ptrs[64], out[64];
        float f[4];
        size_t len;
        void *m;
        npu_status_t st;

        OK(npu_connect(daemon_proc.sock, &c));
        /* pointer-like bytes bound as strings to launches: refused */
        memset(ptrs, 0x41, sizeof(ptrs));
        OK(npu_stream_create(c, 0, 0, &s));
        OK(npu_malloc(c, 0, sizeof(ptrs), &b[0]));
        OK(npu_malloc(c, 0, sizeof(ptrs), &b[1]));
        OK(npu_memcpy_to_device(c, b[0], 0, ptrs, sizeof(ptrs)));
        static const char *const ops[] = { "Identity", "Cast", "StringNormalizer" };
        for (int i = 0; i < 3; i++) {
                t[0] = t1(b[0], NPU_STRING, 4);
                t[1] = t1(b[1], i == 1 ? NPU_FLOAT32 : NPU_STRING, 4);
                st = npu_launch(c, s, ops[i], t, 1, t + 1, 1, NULL, 0, NULL);
                if (st == NPU_OK)
                        st = npu_stream_synchronize(c, s);
                ck_assert_msg(st == NPU_ERR_UNSUPPORTED, "%s: %d %s", ops[i], st, npu_error_message());
                ck_assert_msg(strstr(npu_error_message(), "string tensors are only accepted by graph runs"),
                              "%s", npu_error_message());
        }
        /* the same bytes bound to a graph's string input: not an encoding */
        m = model(&len);
        OK(npu_graph_load(c, 0, m, len, &g));
        free(m);
        st = run(c, g, ptrs, sizeof(ptrs), sizeof(out), f, out);
        ck_assert_int_eq(st, NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "input 'x'") &&
                      strstr(npu_error_message(), "runs past"), "%s", npu_error_message());
        /* a truncated encoding */
        st = run(c, g, enc, sizeof(enc) - 2, sizeof(out), f, out);
        ck_assert_int_eq(st, NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "string 3"), "%s", npu_error_message());
        /* an output buffer too small for the strings */
        st = run(c, g, enc, sizeof(enc), sizeof(enc) - 1, f, out);
        ck_assert_int_eq(st, NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "output 's'"), "%s", npu_error_message());
        /* invalid UTF-8: string 2 is a lone continuation byte */
        {
                static const uint8_t bad[] = { 3, 0, 0, 0, '2', '.', '5', 4, 0, 0, 0, '-', 'i', 'n', 'f',
                                               1, 0, 0, 0, 0x80, 3, 0, 0, 0, '1', 'e', '3' };
                st = run(c, g, bad, sizeof(bad), sizeof(out), f, out);
                ck_assert_int_eq(st, NPU_ERR_INVALID);
                ck_assert_msg(strstr(npu_error_message(), "input 'x'") &&
                              strstr(npu_error_message(), "string 2 is not valid UTF-8"),
                              "%s", npu_error_message());
        }
        /* invalid UTF-8 in an initializer: the load fails naming it */
        m = model_ops(1, 0, &len);
        st = npu_graph_load(c, 0, m, len, &g2);
        free(m);
        ck_assert_int_ne(st, NPU_OK);
        ck_assert_msg(strstr(npu_error_message(), "initializer 'k'") &&
                      strstr(npu_error_message(), "UTF-8"), "%s", npu_error_message());
        /* strings where Gather reads indices: refused, naming the node's input */
        m = model_ops(0, 1, &len);
        OK(npu_graph_load(c, 0, m, len, &g2));
        free(m);
        {
                uint8_t y[64], eq[6];
                st = run_ops(c, g2, enc, sizeof(enc), y, sizeof(y), eq);
                ck_assert_int_eq(st, NPU_ERR_UNSUPPORTED);
                ck_assert_msg(strstr(npu_error_message(), "not supported by Gather at input 1"), "%s",
                              npu_error_message());
        }
        OK(npu_graph_unload(c, g2));
        /* and the session goes on */
        good_run(c, g);
        npu_disconnect(c);
        return 0;
}

START_TEST(test_string_attack)
{
        uid_t uid = 0;
        gid_t gid = 0;
        size_t len;
        void *m = model(&len);
        npu_graph_t g;

        if (harness_attacker(&uid, &gid) < 0)
                fprintf(stderr, "skipped: no unprivileged user for the attacker; running as this user\n");
        ck_assert_int_eq(harness_share_socket(&daemon_proc), 0);
        OK(npu_graph_load(ctx, 0, m, len, &g));
        free(m);
        good_run(ctx, g);
        ck_assert_int_eq(harness_run_as(uid, gid, string_attack, NULL), 0);
        ck_assert(harness_alive(&daemon_proc));
        good_run(ctx, g);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-strings");
        TCase *tc = tcase_create("strings");
        SRunner *sr;
        int failed;

        signal(SIGPIPE, SIG_IGN);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_string_graph);
        tcase_add_test(tc, test_string_ops);
        tcase_add_test(tc, test_string_tfidf);
        tcase_add_test(tc, test_string_attack);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

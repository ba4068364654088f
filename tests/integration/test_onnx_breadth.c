/* The ONNX breadth of issue 15 through the real npud and libnpu (npu_graph_run_host):
 * a model of opset 6 whose Add broadcasts along an axis (converted on import), RandomNormal
 * with a seed giving the same numbers on every run with the right statistics, CastLike
 * accepting a "like" input bound with another shape and truncating to bfloat16 at opset
 * 17, DFT of an impulse, and STFT refusing a zero frame_step with a message naming the
 * node; sequence values bound as blocks (proto/seq.h) in and out of a graph, with bad
 * positions, corrupt blocks and a tensor bound for a sequence refused with messages. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "harness.h"
#include "npu.h"
#include "proto/seq.h"

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

#include "tests/onnx-build.h"

struct model {
        int opset;
        int nnode, nin, nout;
        Onnx__NodeProto *nodes[8];
        Onnx__ValueInfoProto *in[8], *out[8];
        
};

/* Packs m and loads it into npud. */
static npu_status_t load(const struct model *mm, npu_graph_t *ret)
{
        Onnx__GraphProto *g = graph_proto();
        npu_status_t st;
        uint8_t *buf;
        size_t len;

        g->n_node = (size_t)mm->nnode;
        g->node = (Onnx__NodeProto **)mm->nodes;
        g->n_input = (size_t)mm->nin;
        g->input = (Onnx__ValueInfoProto **)mm->in;
        g->n_output = (size_t)mm->nout;
        g->output = (Onnx__ValueInfoProto **)mm->out;
        buf = model_pack(g, mm->opset, &len);
        st = npu_graph_load(ctx, 0, buf, len, ret);
        free(buf);
        return st;
}


static npu_host_tensor_t hin(void *data, uint64_t bytes, npu_dtype_t dtype, int ndim, ...)
{
        npu_host_tensor_t t = { .data = data, .bytes = bytes, .dtype = dtype, .ndim = ndim };
        va_list ap;

        va_start(ap, ndim);
        for (int i = 0; i < ndim; i++)
                t.dims[i] = va_arg(ap, int64_t);
        va_end(ap);
        return t;
}

START_TEST(test_opset6_add_axis)
{
        static const int64_t da[] = { 2, 3, 2 }, db[] = { 3 };
        float a[12], b[3] = { 10, 20, 30 }, y[12];
        struct model m = { .opset = 6 };
        npu_host_tensor_t in[2], out[1] = { { .data = y, .bytes = sizeof(y) } };
        npu_graph_t g;

        m.nodes[0] = node("Add", 2, (const char *[]){ "a", "b" }, 1, (const char *[]){ "y" });
        attr_i(m.nodes[0], "broadcast", 1);
        attr_i(m.nodes[0], "axis", 1);
        m.nnode = 1;
        m.in[m.nin++] = tvalue("a", NPU_FLOAT32, 3, da);
        m.in[m.nin++] = tvalue("b", NPU_FLOAT32, 1, db);
        m.out[m.nout++] = tvalue("y", NPU_FLOAT32, 3, da);
        OK(load(&m, &g));
        for (int i = 0; i < 12; i++)
                a[i] = (float)i;
        in[0] = hin(a, sizeof(a), NPU_FLOAT32, 3, (int64_t)2, (int64_t)3, (int64_t)2);
        in[1] = hin(b, sizeof(b), NPU_FLOAT32, 1, (int64_t)3);
        OK(npu_graph_run_host(ctx, g, in, 2, out, 1));
        for (int i = 0; i < 12; i++)
                ck_assert_float_eq(y[i], a[i] + b[(i / 2) % 3]);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_random_normal_seeded)
{
        enum { N = 20000 };
        static const int64_t shape[] = { N };
        static float y1[N], y2[N];
        struct model m = { .opset = 17 };
        npu_host_tensor_t out[1];
        double s = 0, s2 = 0;
        npu_graph_t g;

        m.nodes[0] = node("RandomNormal", 0, NULL, 1, (const char *[]){ "y" });
        attr_ints(m.nodes[0], "shape", 1, shape);
        attr_f(m.nodes[0], "seed", 42);
        attr_f(m.nodes[0], "mean", 1);
        attr_f(m.nodes[0], "scale", 2);
        m.nnode = 1;
        m.out[m.nout++] = tvalue("y", NPU_FLOAT32, 1, shape);
        OK(load(&m, &g));
        out[0] = (npu_host_tensor_t){ .data = y1, .bytes = sizeof(y1) };
        OK(npu_graph_run_host(ctx, g, NULL, 0, out, 1));
        out[0] = (npu_host_tensor_t){ .data = y2, .bytes = sizeof(y2) };
        OK(npu_graph_run_host(ctx, g, NULL, 0, out, 1));
        ck_assert_int_eq(memcmp(y1, y2, sizeof(y1)), 0);
        for (int i = 0; i < N; i++) {
                s += y1[i];
                s2 += (double)y1[i] * y1[i];
        }
        s /= N;
        s2 = s2 / N - s * s;
        /* standard errors: mean 0.014, variance 0.04 */
        ck_assert_msg(fabs(s - 1) < 0.08 && fabs(s2 - 4) < 0.25, "mean %g variance %g", s, s2);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_castlike_bf16_like_any_shape)
{
        static const int64_t d4[] = { 4 }, d23[] = { 2, 3 };
        uint32_t bits[4] = { 0x3ef5e000, 0x3f800000, 0xbf7fffff, 0x40490fdb };
        float x[4];
        uint16_t like = 0, y[4];
        struct model m = { .opset = 17 };
        npu_host_tensor_t in[2], out[1] = { { .data = y, .bytes = sizeof(y) } };
        npu_graph_t g;

        memcpy(x, bits, sizeof(x));
        m.nodes[0] = node("CastLike", 2, (const char *[]){ "x", "like" }, 1,
                          (const char *[]){ "y" });
        m.nnode = 1;
        m.in[m.nin++] = tvalue("x", NPU_FLOAT32, 1, d4);
        m.in[m.nin++] = tvalue("like", NPU_BFLOAT16, 2, d23);
        m.out[m.nout++] = tvalue("y", NPU_BFLOAT16, 1, d4);
        OK(load(&m, &g));
        in[0] = hin(x, sizeof(x), NPU_FLOAT32, 1, (int64_t)4);
        in[1] = hin(&like, sizeof(like), NPU_BFLOAT16, 1, (int64_t)1);
        OK(npu_graph_run_host(ctx, g, in, 2, out, 1));
        for (int i = 0; i < 4; i++)
                ck_assert_uint_eq(y[i], bits[i] >> 16); /* truncated, opset 17 */
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_dft_and_bad_stft)
{
        static const int64_t dx[] = { 1, 8, 1 }, dy[] = { 1, 8, 2 }, dsig[] = { 1, 16, 1 };
        static const int64_t dout[] = { 1, -1, 5, 2 }, d0[] = { 0 };
        float x[8] = { 1 }, y[16], sig[16] = { 0 }, spec[200];
        int64_t step = 0, flen = 8;
        struct model m = { .opset = 17 };
        npu_host_tensor_t in[3], out[1] = { { .data = y, .bytes = sizeof(y) } };
        npu_graph_t g;

        m.nodes[0] = node("DFT", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        m.nnode = 1;
        m.in[m.nin++] = tvalue("x", NPU_FLOAT32, 3, dx);
        m.out[m.nout++] = tvalue("y", NPU_FLOAT32, 3, dy);
        OK(load(&m, &g));
        in[0] = hin(x, sizeof(x), NPU_FLOAT32, 3, (int64_t)1, (int64_t)8, (int64_t)1);
        OK(npu_graph_run_host(ctx, g, in, 1, out, 1));
        for (int k = 0; k < 8; k++) {
                ck_assert_float_eq_tol(y[2 * k], 1, 1e-6);
                ck_assert_float_eq_tol(y[2 * k + 1], 0, 1e-6);
        }
        OK(npu_graph_unload(ctx, g));

        m = (struct model){ .opset = 17 };
        m.nodes[0] = node("STFT", 4, (const char *[]){ "sig", "step", "", "len" }, 1,
                          (const char *[]){ "spec" });
        m.nodes[0]->name = (char *)"spectrum";
        m.nnode = 1;
        m.in[m.nin++] = tvalue("sig", NPU_FLOAT32, 3, dsig);
        m.in[m.nin++] = tvalue("step", NPU_INT64, 0, d0);
        m.in[m.nin++] = tvalue("len", NPU_INT64, 0, d0);
        m.out[m.nout++] = tvalue("spec", NPU_FLOAT32, 4, dout);
        OK(load(&m, &g));
        in[0] = hin(sig, sizeof(sig), NPU_FLOAT32, 3, (int64_t)1, (int64_t)16, (int64_t)1);
        in[1] = hin(&step, sizeof(step), NPU_INT64, 0);
        in[2] = hin(&flen, sizeof(flen), NPU_INT64, 0);
        out[0] = (npu_host_tensor_t){ .data = spec, .bytes = sizeof(spec), .dtype = NPU_FLOAT32,
                                      .ndim = 4, .dims = { 1, 3, 5, 2 } };
        ck_assert_int_ne(npu_graph_run_host(ctx, g, in, 3, out, 1), NPU_OK);
        ck_assert_msg(strstr(npu_error_message(), "spectrum") &&
                              strstr(npu_error_message(), "frame_step 0 < 1"),
                      "%s", npu_error_message());
        /* a good step: (16 - 8) / 4 + 1 = 3 frames of 5 bins */
        step = 4;
        out[0] = (npu_host_tensor_t){ .data = spec, .bytes = sizeof(spec), .dtype = NPU_FLOAT32,
                                      .ndim = 4, .dims = { 1, 3, 5, 2 } };
        OK(npu_graph_run_host(ctx, g, in, 3, out, 1));
        ck_assert_int_eq(out[0].dims[1], 3);
        OK(npu_graph_unload(ctx, g));
}
END_TEST


/* A graph input or output of type sequence of elem_dtype tensors. */
static Onnx__ValueInfoProto *svalue(const char *name, int elem_dtype)
{
        Onnx__ValueInfoProto *vi = tvalue(name, elem_dtype, -1, NULL);
        Onnx__TypeProto *tp = K(sizeof(*tp));
        Onnx__TypeProto__Sequence *sq = K(sizeof(*sq));

        onnx__type_proto__init(tp);
        onnx__type_proto__sequence__init(sq);
        sq->elem_type = vi->type;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        tp->sequence_type = sq;
        vi->type = tp;
        return vi;
}

/* A canonical block of n float tensors of 1-D extents len[i] with values data[i]. */
static uint64_t seq_block(uint8_t *buf, uint64_t room, int n, const int64_t *len,
                          const float *const *data)
{
        struct proto_seq_entry e[4];
        uint64_t size;

        memset(e, 0, sizeof(e));
        for (int i = 0; i < n; i++) {
                e[i].dtype = NPU_FLOAT32;
                e[i].ndim = 1;
                e[i].dims[0] = len[i];
                e[i].bytes = (uint64_t)len[i] * sizeof(float);
        }
        size = proto_seq_layout(e, (uint32_t)n);
        ck_assert_uint_le(size, room);
        proto_seq_write(buf, size, (uint32_t)n, NPU_FLOAT32, e);
        for (int i = 0; i < n; i++)
                memcpy(buf + e[i].offset, data[i], e[i].bytes);
        return size;
}

START_TEST(test_sequence_in_and_out)
{
        static const int64_t d1[] = { -1 }, d0[] = { 0 };
        static const float a[3] = { 1, 2, 3 }, x[2] = { 7, 8 };
        uint8_t sin[512], sout[512];
        float y[8];
        int64_t pos = 0, n = 0;
        struct model m = { .opset = 18 };
        npu_host_tensor_t in[3], out[3];
        struct proto_seq_header h;
        struct proto_seq_entry e;
        const char *why = "";
        uint64_t size, size2;
        npu_graph_t g;

        m.nodes[0] = node("SequenceInsert", 3, (const char *[]){ "s", "x", "pos" }, 1,
                          (const char *[]){ "s2" });
        m.nodes[1] = node("SequenceAt", 2, (const char *[]){ "s2", "pos" }, 1, (const char *[]){ "y" });
        m.nodes[1]->name = (char *)"pick";
        m.nodes[2] = node("SequenceLength", 1, (const char *[]){ "s2" }, 1, (const char *[]){ "n" });
        m.nnode = 3;
        m.in[m.nin++] = svalue("s", NPU_FLOAT32);
        m.in[m.nin++] = tvalue("x", NPU_FLOAT32, 1, d1);
        m.in[m.nin++] = tvalue("pos", NPU_INT64, 0, d0);
        m.out[m.nout++] = svalue("s2", NPU_FLOAT32);
        m.out[m.nout++] = tvalue("y", NPU_FLOAT32, 1, d1);
        m.out[m.nout++] = tvalue("n", NPU_INT64, 0, d0);
        OK(load(&m, &g));

        size = seq_block(sin, sizeof(sin), 1, (const int64_t[]){ 3 }, (const float *const[]){ a });
        in[0] = hin(sin, size, NPU_SEQUENCE, 1, (int64_t)size);
        in[1] = hin((void *)x, sizeof(x), NPU_FLOAT32, 1, (int64_t)2);
        in[2] = hin(&pos, sizeof(pos), NPU_INT64, 0);
        /* npu_graph_run_host binds outputs exactly: a client that knows the tensors the
         * sequence will hold knows its canonical size (x then a) */
        {
                struct proto_seq_entry pe[2] = { { .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 2 }, .bytes = 8 },
                                                 { .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 3 }, .bytes = 12 } };
                size2 = proto_seq_layout(pe, 2);
        }
        memset(out, 0, sizeof(out));
        out[0] = (npu_host_tensor_t){ .data = sout, .bytes = sizeof(sout), .dtype = NPU_SEQUENCE,
                                      .ndim = 1, .dims = { (int64_t)size2 } };
        out[1] = (npu_host_tensor_t){ .data = y, .bytes = sizeof(y), .dtype = NPU_FLOAT32,
                                      .ndim = 1, .dims = { 2 } };
        out[2] = (npu_host_tensor_t){ .data = &n, .bytes = sizeof(n) };
        OK(npu_graph_run_host(ctx, g, in, 3, out, 3));
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(out[1].dims[0], 2);
        ck_assert_float_eq(y[1], 8);
        /* the sequence comes back as a canonical block: x then a */
        ck_assert_int_eq(out[0].dtype, NPU_SEQUENCE);
        ck_assert_int_eq(proto_seq_check(sout, (uint64_t)out[0].dims[0], &h, &why), 0);
        ck_assert_uint_eq(h.count, 2);
        proto_seq_get(sout, 1, &e);
        ck_assert_int_eq(e.dims[0], 3);
        ck_assert_float_eq(((float *)(sout + e.offset))[2], 3);

        /* a position past the end names the node */
        pos = 5;
        out[0].dims[0] = (int64_t)size2;
        out[1].dims[0] = 2;
        ck_assert_int_ne(npu_graph_run_host(ctx, g, in, 3, out, 3), NPU_OK);
        ck_assert_msg(strstr(npu_error_message(), "SequenceInsert") &&
                              strstr(npu_error_message(), "outside"),
                      "%s", npu_error_message());

        /* a block claiming more tensors than it holds */
        pos = 0;
        memcpy(&h, sin, sizeof(h));
        h.count = 1u << 30;
        memcpy(sin, &h, sizeof(h));
        ck_assert_int_ne(npu_graph_run_host(ctx, g, in, 3, out, 3), NPU_OK);
        ck_assert_msg(strstr(npu_error_message(), "not a valid sequence"), "%s", npu_error_message());

        /* a tensor bound for the sequence */
        in[0] = hin((void *)a, sizeof(a), NPU_FLOAT32, 1, (int64_t)3);
        ck_assert_int_ne(npu_graph_run_host(ctx, g, in, 3, out, 3), NPU_OK);
        ck_assert_msg(strstr(npu_error_message(), "'s'"), "%s", npu_error_message());

        /* the daemon is fine: a good run again */
        size = seq_block(sin, sizeof(sin), 1, (const int64_t[]){ 3 }, (const float *const[]){ a });
        in[0] = hin(sin, size, NPU_SEQUENCE, 1, (int64_t)size);
        out[0].dims[0] = (int64_t)size2;
        out[1].dims[0] = 2;
        OK(npu_graph_run_host(ctx, g, in, 3, out, 3));
        ck_assert_int_eq(n, 2);

        /* A client that does not know the size binds a capacity (NPU_RUN_FLEX_OUTPUTS) and
         * reads the sequence's computed size back. */
        {
                npu_run_options_t opts = { .size = sizeof(opts), .flags = NPU_RUN_FLEX_OUTPUTS };
                npu_tensor_t ti[3], to[3];
                npu_buffer_t b;
                npu_stream_t st;
                uint64_t task;

                OK(npu_malloc(ctx, 0, 4096, &b));
                OK(npu_stream_create(ctx, 0, 0, &st));
                OK(npu_memcpy_to_device(ctx, b, 0, sin, size));
                OK(npu_memcpy_to_device(ctx, b, 1024, x, sizeof(x)));
                OK(npu_memcpy_to_device(ctx, b, 1104, &pos, sizeof(pos)));
                memset(ti, 0, sizeof(ti));
                memset(to, 0, sizeof(to));
                ti[0] = (npu_tensor_t){ .buf = b, .offset = 0, .dtype = NPU_SEQUENCE, .ndim = 1, .dims = { (int64_t)size } };
                ti[1] = (npu_tensor_t){ .buf = b, .offset = 1024, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 2 } };
                ti[2] = (npu_tensor_t){ .buf = b, .offset = 1104, .dtype = NPU_INT64, .ndim = 0 };
                to[0] = (npu_tensor_t){ .buf = b, .offset = 2048, .dtype = NPU_SEQUENCE, .ndim = 1, .dims = { 1024 } };
                to[1] = (npu_tensor_t){ .buf = b, .offset = 3072, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 8 } };
                to[2] = (npu_tensor_t){ .buf = b, .offset = 3200, .dtype = NPU_INT64, .ndim = 0 };
                OK(npu_graph_run_with(ctx, st, g, ti, 3, to, 3, &opts, &task));
                OK(npu_stream_synchronize(ctx, st));
                OK(npu_graph_run_output_shape(ctx, st, task, 0, &to[0]));
                ck_assert_int_eq(to[0].dtype, NPU_SEQUENCE);
                ck_assert_int_eq(to[0].dims[0], (int64_t)size2);
                memset(sout, 0, sizeof(sout));
                OK(npu_memcpy_from_device(ctx, sout, b, 2048, size2));
                ck_assert_int_eq(proto_seq_check(sout, size2, &h, &why), 0);
                ck_assert_uint_eq(h.count, 2);
                OK(npu_stream_destroy(ctx, st));
                OK(npu_free(ctx, b));
        }
        OK(npu_graph_unload(ctx, g));
}
END_TEST

int main(void)
{
        Suite *s = suite_create("onnx_breadth");
        TCase *tc = tcase_create("onnx_breadth");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_opset6_add_axis);
        tcase_add_test(tc, test_random_normal_seeded);
        tcase_add_test(tc, test_castlike_bf16_like_any_shape);
        tcase_add_test(tc, test_dft_and_bad_stft);
        tcase_add_test(tc, test_sequence_in_and_out);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

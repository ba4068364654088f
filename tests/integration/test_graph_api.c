/* Typed graph introspection through the real npud and libnpu: npu_graph_io_count,
 * npu_graph_input/_output and npu_graph_find_input/_output on a model built here with
 * protobuf-c (fixed and open extents, an open rank, a name longer than the name buffer),
 * their errors (index, name, handle, a struct whose size field is too small), their answers
 * without a round trip, and the checks npu_graph_run makes of bound inputs before it queues
 * a run (NPU_ERR_SHAPE / NPU_ERR_INVALID from the call itself, naming the input), and
 * npud's own check of the same at submission for a client that bypasses libnpu. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>
#include <onnx.pb-c.h>

#include "proto/frame.h"
#include "proto/submit.h"
#include "harness.h"
#include "npu.h"

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
#define FAILS(expr, st) \
        ck_assert_msg((expr) == (st), "%s: expected %s, got: %s", #expr, npu_strerror(st), npu_error_message())

/* ---- the model ----
 * Inputs:  A float32 [N,4], B float32 [4], LONG float32 (rank open)
 * Outputs: Y = A + B float32 [N,4], Z = Relu(LONG) float32 (rank open) */

/* 126 ASCII bytes, a two-byte character across the 127-byte cut, then more: 132 bytes. */
static char long_name[160];

static void make_long_name(void)
{
        memset(long_name, 'x', 126);
        strcpy(long_name + 126, "\xc3\xa9tail");
}

struct arena {
        void *p[256];
        int n;
};

static void *A(struct arena *a, size_t size)
{
        void *p = calloc(1, size ? size : 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_lt(a->n, 256);
        a->p[a->n++] = p;
        return p;
}

static void arena_free(struct arena *a)
{
        while (a->n > 0)
                free(a->p[--a->n]);
}

/* A float32 tensor value; ndim -1 leaves the rank open, dims -1 an extent. */
static Onnx__ValueInfoProto *value(struct arena *a, const char *name, int ndim, const int64_t *dims)
{
        Onnx__ValueInfoProto *vi = A(a, sizeof(*vi));
        Onnx__TypeProto *tp = A(a, sizeof(*tp));
        Onnx__TypeProto__Tensor *tt = A(a, sizeof(*tt));

        onnx__value_info_proto__init(vi);
        onnx__type_proto__init(tp);
        onnx__type_proto__tensor__init(tt);
        vi->name = (char *)name;
        vi->type = tp;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        tt->has_elem_type = 1;
        tt->elem_type = NPU_FLOAT32;
        if (ndim >= 0) {
                Onnx__TensorShapeProto *sh = A(a, sizeof(*sh));
                onnx__tensor_shape_proto__init(sh);
                sh->dim = A(a, sizeof(*sh->dim) * (size_t)(ndim ? ndim : 1));
                for (int i = 0; i < ndim; i++) {
                        Onnx__TensorShapeProto__Dimension *d = A(a, sizeof(*d));
                        onnx__tensor_shape_proto__dimension__init(d);
                        if (dims[i] >= 0) {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                                d->dim_value = dims[i];
                        } else {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                                d->dim_param = (char *)"N";
                        }
                        sh->dim[sh->n_dim++] = d;
                }
                tt->shape = sh;
        }
        return vi;
}

static Onnx__NodeProto *node(struct arena *a, const char *op, int nin, const char *in0, const char *in1,
                             const char *out)
{
        Onnx__NodeProto *n = A(a, sizeof(*n));

        onnx__node_proto__init(n);
        n->op_type = (char *)op;
        n->n_input = (size_t)nin;
        n->input = A(a, 2 * sizeof(char *));
        n->input[0] = (char *)in0;
        n->input[1] = (char *)in1;
        n->n_output = 1;
        n->output = A(a, sizeof(char *));
        n->output[0] = (char *)out;
        return n;
}

/* The model's bytes (malloc'd). */
static uint8_t *model_bytes(size_t *ret_len)
{
        struct arena a = { .n = 0 };
        Onnx__ModelProto m;
        Onnx__GraphProto g;
        Onnx__OperatorSetIdProto o;
        Onnx__OperatorSetIdProto *ops[1] = { &o };
        Onnx__ValueInfoProto *in[3], *out[2];
        Onnx__NodeProto *nodes[2];
        uint8_t *bytes;
        size_t len;

        make_long_name();
        onnx__model_proto__init(&m);
        onnx__graph_proto__init(&g);
        onnx__operator_set_id_proto__init(&o);
        o.domain = (char *)"";
        o.has_version = 1;
        o.version = 13;
        m.has_ir_version = 1;
        m.ir_version = 8;
        m.n_opset_import = 1;
        m.opset_import = ops;
        m.graph = &g;
        g.name = (char *)"api";
        in[0] = value(&a, "A", 2, (int64_t[]){ -1, 4 });
        in[1] = value(&a, "B", 1, (int64_t[]){ 4 });
        in[2] = value(&a, long_name, -1, NULL);
        out[0] = value(&a, "Y", 2, (int64_t[]){ -1, 4 });
        out[1] = value(&a, "Z", -1, NULL);
        nodes[0] = node(&a, "Add", 2, "A", "B", "Y");
        nodes[1] = node(&a, "Relu", 1, long_name, NULL, "Z");
        g.n_input = 3;
        g.input = in;
        g.n_output = 2;
        g.output = out;
        g.n_node = 2;
        g.node = nodes;
        len = onnx__model_proto__get_packed_size(&m);
        bytes = malloc(len);
        ck_assert_ptr_nonnull(bytes);
        ck_assert_uint_eq(onnx__model_proto__pack(&m, bytes), len);
        arena_free(&a);
        *ret_len = len;
        return bytes;
}

static npu_graph_t load_model(void)
{
        size_t len;
        uint8_t *bytes = model_bytes(&len);
        npu_graph_t h;

        OK(npu_graph_load(ctx, 0, bytes, len, &h));
        free(bytes);
        return h;
}

static npu_graph_io_t io_new(void)
{
        npu_graph_io_t io;

        memset(&io, 0x5a, sizeof(io));
        io.size = sizeof(io);
        return io;
}

/* ---- tests ---- */

START_TEST(test_counts_names_shapes)
{
        npu_graph_t g = load_model();
        npu_graph_io_t io;
        int nin = -1, nout = -1;

        OK(npu_graph_io_count(ctx, g, &nin, &nout));
        ck_assert_int_eq(nin, 3);
        ck_assert_int_eq(nout, 2);
        nin = -1;
        OK(npu_graph_io_count(ctx, g, &nin, NULL));
        ck_assert_int_eq(nin, 3);
        OK(npu_graph_io_count(ctx, g, NULL, &nout));

        io = io_new();
        OK(npu_graph_input(ctx, g, 0, &io));
        ck_assert_uint_eq(io.size, sizeof(io));
        ck_assert_str_eq(io.name, "A");
        ck_assert_uint_eq(io.name_len, 1);
        ck_assert_int_eq(io.dtype, NPU_FLOAT32);
        ck_assert_int_eq(io.ndim, 2);
        ck_assert_int_eq(io.dims[0], -1); /* open */
        ck_assert_int_eq(io.dims[1], 4);
        ck_assert_int_eq(io.dims[2], 0); /* the rest cleared */

        io = io_new();
        OK(npu_graph_input(ctx, g, 1, &io));
        ck_assert_str_eq(io.name, "B");
        ck_assert_int_eq(io.ndim, 1);
        ck_assert_int_eq(io.dims[0], 4);

        /* A name longer than the buffer: cut before the character that does not fit. */
        io = io_new();
        OK(npu_graph_input(ctx, g, 2, &io));
        ck_assert_uint_eq(io.name_len, strlen(long_name));
        ck_assert_uint_ge(io.name_len, NPU_GRAPH_NAME_LEN);
        ck_assert_uint_eq(strlen(io.name), 126);
        ck_assert_int_eq(memcmp(io.name, long_name, 126), 0);
        ck_assert_int_eq(io.dtype, NPU_FLOAT32);
        ck_assert_int_eq(io.ndim, -1); /* rank open */

        io = io_new();
        OK(npu_graph_output(ctx, g, 0, &io));
        ck_assert_str_eq(io.name, "Y");
        ck_assert_int_eq(io.dtype, NPU_FLOAT32);
        ck_assert_int_eq(io.ndim, 2);
        ck_assert_int_eq(io.dims[0], -1);
        ck_assert_int_eq(io.dims[1], 4);
        io = io_new();
        OK(npu_graph_output(ctx, g, 1, &io));
        ck_assert_str_eq(io.name, "Z");
        ck_assert_int_eq(io.ndim, -1);

        /* The same as the JSON of npu_graph_info, whose names are whole. */
        char *text;
        OK(npu_graph_info(ctx, g, &text));
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "inputs"), 2), "name")),
                         long_name);
        ck_assert_uint_eq(json_array_size(json_object_get(j, "outputs")), 2);
        json_decref(j);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_find_by_name)
{
        npu_graph_t g = load_model();
        int idx = -1;

        OK(npu_graph_find_input(ctx, g, "B", &idx));
        ck_assert_int_eq(idx, 1);
        OK(npu_graph_find_input(ctx, g, "A", &idx));
        ck_assert_int_eq(idx, 0);
        OK(npu_graph_find_input(ctx, g, long_name, &idx)); /* the whole name */
        ck_assert_int_eq(idx, 2);
        OK(npu_graph_find_output(ctx, g, "Z", &idx));
        ck_assert_int_eq(idx, 1);
        OK(npu_graph_find_output(ctx, g, "Y", &idx));
        ck_assert_int_eq(idx, 0);

        /* An output is not an input, and a cut name is not the name. */
        idx = -7;
        FAILS(npu_graph_find_input(ctx, g, "Y", &idx), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "no input named 'Y'"), "%s", npu_error_message());
        ck_assert_int_eq(idx, -7);
        FAILS(npu_graph_find_output(ctx, g, "nope", &idx), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "no output named 'nope'"), "%s", npu_error_message());
        npu_graph_io_t io = io_new();
        OK(npu_graph_input(ctx, g, 2, &io));
        FAILS(npu_graph_find_input(ctx, g, io.name, &idx), NPU_ERR_INVALID);
        FAILS(npu_graph_find_input(ctx, g, "", &idx), NPU_ERR_INVALID);
        FAILS(npu_graph_find_input(ctx, g, NULL, &idx), NPU_ERR_INVALID);
        FAILS(npu_graph_find_output(ctx, g, "Y", NULL), NPU_ERR_INVALID);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_errors)
{
        npu_graph_t g = load_model(), bogus = { g.id + 12345 };
        npu_graph_io_t io;
        int n;

        io = io_new();
        FAILS(npu_graph_input(ctx, g, 3, &io), NPU_ERR_OUT_OF_RANGE);
        ck_assert_msg(strstr(npu_error_message(), "3 inputs"), "%s", npu_error_message());
        FAILS(npu_graph_input(ctx, g, -1, &io), NPU_ERR_OUT_OF_RANGE);
        FAILS(npu_graph_output(ctx, g, 2, &io), NPU_ERR_OUT_OF_RANGE);
        FAILS(npu_graph_output(ctx, g, -5, &io), NPU_ERR_OUT_OF_RANGE);
        FAILS(npu_graph_input(ctx, g, 0, NULL), NPU_ERR_INVALID);
        FAILS(npu_graph_io_count(NULL, g, &n, &n), NPU_ERR_INVALID);
        FAILS(npu_graph_input(NULL, g, 0, &io), NPU_ERR_INVALID);

        /* A size field too small (an older or uninitialized struct) is refused, the struct
         * left alone. */
        io = io_new();
        io.size = sizeof(io) - 1;
        FAILS(npu_graph_input(ctx, g, 0, &io), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "size"), "%s", npu_error_message());
        ck_assert_int_eq((unsigned char)io.name[0], 0x5a);
        io.size = 0;
        FAILS(npu_graph_output(ctx, g, 0, &io), NPU_ERR_INVALID);
        ck_assert_int_eq((unsigned char)io.name[0], 0x5a);

        /* A larger one (a newer header): the known members filled, the rest zeroed. */
        struct {
                npu_graph_io_t io;
                unsigned char more[40];
        } big;
        memset(&big, 0x5a, sizeof(big));
        big.io.size = sizeof(big);
        OK(npu_graph_output(ctx, g, 0, &big.io));
        ck_assert_uint_eq(big.io.size, sizeof(big));
        ck_assert_str_eq(big.io.name, "Y");
        for (size_t i = 0; i < sizeof(big.more); i++)
                ck_assert_int_eq(big.more[i], 0);

        /* Unknown and unloaded graphs. */
        io = io_new();
        FAILS(npu_graph_input(ctx, bogus, 0, &io), NPU_ERR_BAD_HANDLE);
        FAILS(npu_graph_io_count(ctx, bogus, &n, &n), NPU_ERR_BAD_HANDLE);
        FAILS(npu_graph_find_input(ctx, bogus, "A", &n), NPU_ERR_BAD_HANDLE);
        OK(npu_graph_unload(ctx, g));
        FAILS(npu_graph_io_count(ctx, g, &n, &n), NPU_ERR_BAD_HANDLE);
        FAILS(npu_graph_output(ctx, g, 0, &io), NPU_ERR_BAD_HANDLE);
        FAILS(npu_graph_find_output(ctx, g, "Y", &n), NPU_ERR_BAD_HANDLE);
}
END_TEST

/* The description comes from npu_graph_load's reply: with npud stopped (SIGSTOP), a call
 * that needed a round trip would hang past the test's timeout. */
START_TEST(test_no_round_trip)
{
        npu_graph_t g = load_model();
        npu_graph_io_t io = io_new();
        int nin, nout, idx;

        ck_assert_int_eq(kill(daemon_proc.pid, SIGSTOP), 0);
        OK(npu_graph_io_count(ctx, g, &nin, &nout));
        for (int i = 0; i < nin; i++)
                OK(npu_graph_input(ctx, g, i, &io));
        for (int i = 0; i < nout; i++)
                OK(npu_graph_output(ctx, g, i, &io));
        OK(npu_graph_find_input(ctx, g, "B", &idx));
        OK(npu_graph_find_output(ctx, g, "Z", &idx));
        ck_assert_int_eq(kill(daemon_proc.pid, SIGCONT), 0);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

static npu_tensor_t ftensor(npu_buffer_t b, uint64_t offset, int ndim, const int64_t *dims)
{
        npu_tensor_t t = { .buf = b, .offset = offset, .dtype = NPU_FLOAT32, .ndim = ndim };
        memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
        return t;
}

START_TEST(test_run_checked_at_submit)
{
        npu_graph_t g = load_model();
        enum { R = 3 };
        float host[R * 4 + 4 + 6], y[R * 4], z[6];
        npu_buffer_t buf, out;
        npu_stream_t s;
        uint64_t task = 99;

        for (int i = 0; i < R * 4 + 4 + 6; i++)
                host[i] = (float)(i % 7) - 3.0f;
        OK(npu_malloc(ctx, 0, sizeof(host), &buf));
        OK(npu_malloc(ctx, 0, sizeof(y) + sizeof(z), &out));
        OK(npu_memcpy_to_device(ctx, buf, 0, host, sizeof(host)));
        OK(npu_stream_create(ctx, 0, 0, &s));
        /* Bound by name. */
        int ia, ib, il, oy, oz;
        OK(npu_graph_find_input(ctx, g, "A", &ia));
        OK(npu_graph_find_input(ctx, g, "B", &ib));
        OK(npu_graph_find_input(ctx, g, long_name, &il));
        OK(npu_graph_find_output(ctx, g, "Y", &oy));
        OK(npu_graph_find_output(ctx, g, "Z", &oz));
        npu_tensor_t in[3], outs[2];
        in[ia] = ftensor(buf, 0, 2, (int64_t[]){ R, 4 }); /* the open extent takes R */
        in[ib] = ftensor(buf, R * 4 * sizeof(float), 1, (int64_t[]){ 4 });
        in[il] = ftensor(buf, (R * 4 + 4) * sizeof(float), 2, (int64_t[]){ 2, 3 }); /* any rank */
        outs[oy] = ftensor(out, 0, 2, (int64_t[]){ R, 4 });
        outs[oz] = ftensor(out, sizeof(y), 2, (int64_t[]){ 2, 3 });

        /* Wrong rank: refused by the call itself, nothing queued. */
        npu_tensor_t bad[3] = { in[0], in[1], in[2] };
        bad[ia] = ftensor(buf, 0, 1, (int64_t[]){ R * 4 });
        FAILS(npu_graph_run(ctx, s, g, bad, 3, outs, 2, &task), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "input 'A' has shape [?,4] but is bound as [12]"), "%s",
                      npu_error_message());
        ck_assert_uint_eq(npu_error_task(), 0);
        ck_assert_uint_eq(task, 99); /* no task number taken */
        /* A fixed extent. */
        bad[ia] = in[ia];
        bad[ib] = ftensor(buf, R * 4 * sizeof(float), 1, (int64_t[]){ 3 });
        FAILS(npu_graph_run(ctx, s, g, bad, 3, outs, 2, NULL), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "input 'B'"), "%s", npu_error_message());
        /* The dtype. */
        bad[ib] = in[ib];
        bad[ib].dtype = NPU_INT32;
        FAILS(npu_graph_run(ctx, s, g, bad, 3, outs, 2, NULL), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "input 'B' is float32 but bound as int32"), "%s",
                      npu_error_message());
        /* Counts. */
        FAILS(npu_graph_run(ctx, s, g, in, 2, outs, 2, NULL), NPU_ERR_INVALID);
        FAILS(npu_graph_run(ctx, s, g, in, 3, outs, 1, NULL), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "3 inputs and 2 outputs"), "%s", npu_error_message());
        /* Nothing of that reached the stream. */
        OK(npu_stream_synchronize(ctx, s));

        /* What the description cannot tell is still npud's to check, at the synchronize. */
        npu_tensor_t small[2] = { outs[0], outs[1] };
        small[oy].offset = sizeof(y) + sizeof(z) - sizeof(float);
        OK(npu_graph_run(ctx, s, g, in, 3, small, 2, NULL));
        FAILS(npu_stream_synchronize(ctx, s), NPU_ERR_OUT_OF_RANGE);

        /* The right bindings run. */
        OK(npu_graph_run(ctx, s, g, in, 3, outs, 2, &task));
        ck_assert_uint_ne(task, 99);
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_memcpy_from_device(ctx, y, out, 0, sizeof(y)));
        OK(npu_memcpy_from_device(ctx, z, out, sizeof(y), sizeof(z)));
        for (int r = 0; r < R; r++)
                for (int c = 0; c < 4; c++)
                        ck_assert_float_eq(y[r * 4 + c], host[r * 4 + c] + host[R * 4 + c]);
        for (int i = 0; i < 6; i++) {
                float x = host[R * 4 + 4 + i];
                ck_assert_float_eq(z[i], x > 0 ? x : 0.0f);
        }
        OK(npu_graph_unload(ctx, g));
        OK(npu_free(ctx, buf));
        OK(npu_free(ctx, out));
}
END_TEST

/* npud stays the authority: a GRAPH_RUN record sent without libnpu (a raw session) with
 * an input of the wrong rank fails its task, reported at the stream's synchronize. */
static json_int_t raw_result_int(json_t *reply, const char *key)
{
        json_t *v = json_object_get(json_object_get(reply, "result"), key);

        ck_assert_msg(json_is_integer(v), "no '%s' in the reply", key);
        return json_integer_value(v);
}

START_TEST(test_daemon_still_checks)
{
        int fd = harness_raw_connect(daemon_proc.sock), m = memfd_create("model", MFD_ALLOW_SEALING), kind;
        size_t len;
        uint8_t *bytes = model_bytes(&len);
        json_t *r;
        uint64_t id;
        char req[256];

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        ck_assert_int_ge(m, 0);
        ck_assert_int_eq(write(m, bytes, len), (ssize_t)len);
        free(bytes);
        ck_assert_int_eq(fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
        snprintf(req, sizeof(req), "{\"method\":\"graph_load\",\"params\":{\"device\":0,\"fd\":0}}");
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 1, req, strlen(req), &m, 1), 0);
        close(m);
        while ((r = harness_raw_recv(fd, &kind, &id)) && kind != PROTO_KIND_REPLY)
                json_decref(r); /* notifications */
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(harness_reply_code(r), 0);
        json_int_t graph = raw_result_int(r, "graph");
        json_decref(r);
        r = harness_raw_call(fd, 2, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":4096}}");
        json_int_t buf = raw_result_int(r, "buffer");
        json_decref(r);
        r = harness_raw_call(fd, 3, "{\"method\":\"stream_create\",\"params\":{\"device\":0,\"priority\":0}}");
        json_int_t stream = raw_result_int(r, "stream");
        json_decref(r);

        struct proto_rec *rec = calloc(1, sizeof(*rec));
        ck_assert_ptr_nonnull(rec);
        rec->type = PROTO_REC_GRAPH_RUN;
        rec->seq = 1;
        rec->stream = (uint32_t)stream;
        rec->graph.graph = (uint32_t)graph;
        rec->graph.nin = 3;
        rec->graph.nout = 2;
        for (int i = 0; i < 5; i++) {
                rec->graph.t[i].buf = (uint32_t)buf;
                rec->graph.t[i].dtype = NPU_FLOAT32;
                rec->graph.t[i].ndim = 1;
                rec->graph.t[i].dims[0] = 4;
        }
        rec->graph.t[0].dims[0] = 12; /* A is [N,4]: rank 1 is wrong */
        uint8_t body[4096];
        size_t n = proto_rec_size(rec);
        ck_assert_uint_gt(n, 0);
        ck_assert_uint_le(n, sizeof(body));
        ck_assert_uint_eq(proto_rec_encode(rec, body), n);
        free(rec);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, body, n, NULL, 0), 0);
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%lld}}",
                 (long long)stream);
        r = harness_raw_call(fd, 4, req);
        ck_assert_int_eq(harness_reply_code(r), NPU_ERR_SHAPE);
        const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
        ck_assert_msg(msg && strstr(msg, "input 'A'"), "%s", msg ? msg : "(no message)");
        json_decref(r);
        close(fd);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-graph-api");
        TCase *tc = tcase_create("graph-api");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_counts_names_shapes);
        tcase_add_test(tc, test_find_by_name);
        tcase_add_test(tc, test_errors);
        tcase_add_test(tc, test_no_round_trip);
        tcase_add_test(tc, test_run_checked_at_submit);
        tcase_add_test(tc, test_daemon_still_checks);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

/* ONNX graphs through the real npud and libnpu: models are built here with the protobuf-c
 * API generated from the system's onnx.proto, loaded with npu_graph_load and run with
 * npu_graph_run; results are compared with references computed here. Also: rejection of
 * bad models (unknown operators, truncated bytes, cycles, wrong input counts, overflowing
 * dimensions) with messages naming the node, several runs in flight, unload while a run is
 * in flight, reclaim of a killed client's graph, and one ONNX backend node test from the
 * system's test data. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <onnx.pb-c.h>

#include "harness.h"
#include "npu.h"

#define ONNX_NODE_DATA "/usr/share/libonnx-testdata/data/node"

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

/* ---- building models ---- */

/* Everything a model is made of comes from this arena, freed in one go. */
static void *arena[8192];
static int narena;

static void *A(size_t size)
{
        void *p = calloc(1, size ? size : 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_lt(narena, (int)(sizeof(arena) / sizeof(arena[0])));
        arena[narena++] = p;
        return p;
}

static char *S(const char *s)
{
        char *p = A(strlen(s) + 1);
        memcpy(p, s, strlen(s) + 1);
        return p;
}

static void arena_free(void)
{
        while (narena > 0)
                free(arena[--narena]);
}

/* Append p to a repeated field (n, array) of at most 64 entries. */
#define PUSH(n, arr, p) \
        do { \
                if (!(arr)) \
                        (arr) = A(64 * sizeof(*(arr))); \
                ck_assert_uint_lt((n), 64); \
                (arr)[(n)++] = (p); \
        } while (0)

static Onnx__ModelProto *model_new(int opset)
{
        Onnx__ModelProto *m = A(sizeof(*m));
        Onnx__GraphProto *g = A(sizeof(*g));
        Onnx__OperatorSetIdProto *o = A(sizeof(*o));

        onnx__model_proto__init(m);
        onnx__graph_proto__init(g);
        onnx__operator_set_id_proto__init(o);
        m->has_ir_version = 1;
        m->ir_version = 8;
        o->domain = S("");
        o->has_version = 1;
        o->version = opset;
        PUSH(m->n_opset_import, m->opset_import, o);
        g->name = S("test");
        m->graph = g;
        return m;
}

static Onnx__ValueInfoProto *value_info(const char *name, int dtype, int ndim, const int64_t *dims)
{
        Onnx__ValueInfoProto *vi = A(sizeof(*vi));
        Onnx__TypeProto *tp = A(sizeof(*tp));
        Onnx__TypeProto__Tensor *tt = A(sizeof(*tt));
        Onnx__TensorShapeProto *sh = A(sizeof(*sh));

        onnx__value_info_proto__init(vi);
        onnx__type_proto__init(tp);
        onnx__type_proto__tensor__init(tt);
        onnx__tensor_shape_proto__init(sh);
        vi->name = S(name);
        vi->type = tp;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        tt->has_elem_type = 1;
        tt->elem_type = dtype;
        if (ndim >= 0) {
                tt->shape = sh;
                for (int i = 0; i < ndim; i++) {
                        Onnx__TensorShapeProto__Dimension *d = A(sizeof(*d));
                        onnx__tensor_shape_proto__dimension__init(d);
                        if (dims[i] >= 0) {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                                d->dim_value = dims[i];
                        } else {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                                d->dim_param = S("N");
                        }
                        PUSH(sh->n_dim, sh->dim, d);
                }
        }
        return vi;
}

static void graph_input(Onnx__GraphProto *g, const char *name, int dtype, int ndim, const int64_t *dims)
{
        PUSH(g->n_input, g->input, value_info(name, dtype, ndim, dims));
}

static void graph_output(Onnx__GraphProto *g, const char *name, int dtype, int ndim, const int64_t *dims)
{
        PUSH(g->n_output, g->output, value_info(name, dtype, ndim, dims));
}

/* A node; ins and outs are comma-separated value names ("" entries allowed: "a,,b"). */
static Onnx__NodeProto *node(Onnx__GraphProto *g, const char *op, const char *name, const char *ins,
                             const char *outs)
{
        Onnx__NodeProto *n = A(sizeof(*n));
        const char *lists[2] = { ins, outs };

        onnx__node_proto__init(n);
        n->op_type = S(op);
        if (name)
                n->name = S(name);
        for (int l = 0; l < 2; l++) {
                const char *p = lists[l];
                while (p && *p) {
                        const char *e = strchr(p, ',');
                        size_t len = e ? (size_t)(e - p) : strlen(p);
                        char *v = A(len + 1);
                        memcpy(v, p, len);
                        if (l == 0)
                                PUSH(n->n_input, n->input, v);
                        else
                                PUSH(n->n_output, n->output, v);
                        p = e ? e + 1 : NULL;
                        if (p && !*p) { /* trailing empty name */
                                v = A(1);
                                if (l == 0)
                                        PUSH(n->n_input, n->input, v);
                                else
                                        PUSH(n->n_output, n->output, v);
                        }
                }
        }
        PUSH(g->n_node, g->node, n);
        return n;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
        Onnx__AttributeProto *a = A(sizeof(*a));

        onnx__attribute_proto__init(a);
        a->name = S(name);
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = v;
        PUSH(n->n_attribute, n->attribute, a);
}

static Onnx__TensorProto *tensor_proto(const char *name, int dtype, int ndim, const int64_t *dims)
{
        Onnx__TensorProto *t = A(sizeof(*t));

        onnx__tensor_proto__init(t);
        t->name = S(name);
        t->has_data_type = 1;
        t->data_type = dtype;
        t->n_dims = (size_t)ndim;
        t->dims = A(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
        memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
        return t;
}

/* A float32 initializer stored as raw_data. */
static void init_raw(Onnx__GraphProto *g, const char *name, int ndim, const int64_t *dims,
                     const float *data, size_t n)
{
        Onnx__TensorProto *t = tensor_proto(name, NPU_FLOAT32, ndim, dims);

        t->has_raw_data = 1;
        t->raw_data.len = n * sizeof(float);
        t->raw_data.data = A(t->raw_data.len);
        memcpy(t->raw_data.data, data, t->raw_data.len);
        PUSH(g->n_initializer, g->initializer, t);
}

/* A float32 initializer stored in float_data. */
static void init_typed(Onnx__GraphProto *g, const char *name, int ndim, const int64_t *dims,
                       const float *data, size_t n)
{
        Onnx__TensorProto *t = tensor_proto(name, NPU_FLOAT32, ndim, dims);

        t->n_float_data = n;
        t->float_data = A(n * sizeof(float));
        memcpy(t->float_data, data, n * sizeof(float));
        PUSH(g->n_initializer, g->initializer, t);
}

static uint8_t *model_pack(const Onnx__ModelProto *m, size_t *ret_len)
{
        size_t n = onnx__model_proto__get_packed_size(m);
        uint8_t *buf = malloc(n);

        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(onnx__model_proto__pack(m, buf), n);
        *ret_len = n;
        return buf;
}

/* Load m on device 0; the status, with *ret set on success. */
static npu_status_t load(const Onnx__ModelProto *m, npu_graph_t *ret)
{
        size_t len;
        uint8_t *bytes = model_pack(m, &len);
        npu_status_t st = npu_graph_load(ctx, 0, bytes, len, ret);

        free(bytes);
        return st;
}

/* ---- data ---- */

static float frand(unsigned *seed)
{
        return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

static npu_tensor_t tensor(npu_buffer_t b, int ndim, const int64_t *dims)
{
        npu_tensor_t t = { .buf = b, .dtype = NPU_FLOAT32, .ndim = ndim };
        memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
        return t;
}

static npu_buffer_t upload(const float *data, size_t n)
{
        npu_buffer_t b;

        OK(npu_malloc(ctx, 0, n * sizeof(float), &b));
        OK(npu_memcpy_to_device(ctx, b, 0, data, n * sizeof(float)));
        return b;
}

static void download_check(npu_buffer_t b, const float *ref, size_t n, float tol)
{
        float *got = malloc(n * sizeof(float));

        ck_assert_ptr_nonnull(got);
        OK(npu_memcpy_from_device(ctx, got, b, 0, n * sizeof(float)));
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(fabsf(got[i] - ref[i]) <= tol * (1 + fabsf(ref[i])),
                              "element %zu: got %f, expected %f", i, got[i], ref[i]);
        free(got);
}

/* Y = Relu(X @ W + B), X [M,K], W [K,N] and B [N] initializers. */
enum { M = 8, K = 32, N = 16 };
static float mlp_w[K * N], mlp_b[N];

static Onnx__ModelProto *mlp_model(int typed)
{
        Onnx__ModelProto *m = model_new(13);
        Onnx__GraphProto *g = m->graph;
        unsigned seed = 7;

        for (int i = 0; i < K * N; i++)
                mlp_w[i] = frand(&seed);
        for (int i = 0; i < N; i++)
                mlp_b[i] = frand(&seed);
        graph_input(g, "X", NPU_FLOAT32, 2, (int64_t[]){ -1, K });
        graph_output(g, "Y", NPU_FLOAT32, 2, (int64_t[]){ -1, N });
        if (typed)
                init_typed(g, "W", 2, (int64_t[]){ K, N }, mlp_w, K * N);
        else
                init_raw(g, "W", 2, (int64_t[]){ K, N }, mlp_w, K * N);
        init_raw(g, "B", 1, (int64_t[]){ N }, mlp_b, N);
        /* Listed out of order: the importer sorts them. */
        node(g, "Relu", "relu", "H", "Y");
        node(g, "MatMul", "matmul", "X,W", "XW");
        node(g, "Add", "bias", "XW,B", "H");
        return m;
}

static void mlp_reference(const float *x, int rows, float *y)
{
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < N; j++) {
                        double acc = mlp_b[j];
                        for (int k = 0; k < K; k++)
                                acc += (double)x[i * K + k] * mlp_w[k * N + j];
                        y[i * N + j] = acc > 0 ? (float)acc : 0.0f;
                }
}

static uint64_t device_memory_used(npu_context_t *c, int dev)
{
        npu_device_info_t info = { .size = sizeof(info) };
        ck_assert_int_eq(npu_device_get_info(c, dev, &info), NPU_OK);
        return info.memory_used;
}

/* ---- tests ---- */

START_TEST(test_mlp_runs)
{
        float x[M * K], y[M * N];
        unsigned seed = 3;
        npu_graph_t g;
        npu_stream_t s;
        char *info;
        json_t *j;
        uint64_t before = device_memory_used(ctx, 0);

        for (int i = 0; i < M * K; i++)
                x[i] = frand(&seed);
        OK(load(mlp_model(_i), &g)); /* sets the weights the reference uses */
        arena_free();
        mlp_reference(x, M, y);
        /* The weights are in device memory, charged like any allocation. */
        ck_assert_uint_ge(device_memory_used(ctx, 0), before + sizeof(mlp_w) + sizeof(mlp_b));
        OK(npu_graph_info(ctx, g, &info));
        j = json_loads(info, 0, NULL);
        free(info);
        ck_assert_ptr_nonnull(j);
        json_t *in = json_array_get(json_object_get(j, "inputs"), 0);
        json_t *out = json_array_get(json_object_get(j, "outputs"), 0);
        ck_assert_uint_eq(json_array_size(json_object_get(j, "inputs")), 1);
        ck_assert_str_eq(json_string_value(json_object_get(in, "name")), "X");
        ck_assert_int_eq(json_integer_value(json_object_get(in, "dtype")), NPU_FLOAT32);
        ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(in, "shape"), 0)), -1);
        ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(in, "shape"), 1)), K);
        ck_assert_str_eq(json_string_value(json_object_get(out, "name")), "Y");
        ck_assert_int_eq(json_integer_value(json_object_get(j, "nodes")), 3);
        /* Compiled at load: the Add (bias) and Relu become the MatMul's epilogue, one node.
         * The batch is left open, so no intermediate has a size to plan. */
        json_t *cj = json_object_get(j, "compile");
        ck_assert_ptr_nonnull(cj);
        ck_assert_int_eq(json_integer_value(json_object_get(cj, "nodes_before")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(cj, "nodes_after")), 1);
        ck_assert_int_eq(json_array_size(json_object_get(cj, "fused_groups")), 0);
        ck_assert_int_eq(json_array_size(json_object_get(cj, "epilogues")), 1);
        json_t *ep = json_array_get(json_object_get(cj, "epilogues"), 0);
        ck_assert_str_eq(json_string_value(json_object_get(ep, "op")), "MatMul");
        ck_assert(json_is_true(json_object_get(ep, "bias")));
        ck_assert_str_eq(json_string_value(json_object_get(ep, "act")), "Relu");
        ck_assert_int_eq(json_integer_value(json_object_get(cj, "gelu_fused")), 0);
        ck_assert(json_is_integer(json_object_get(cj, "layernorm_fused")));
        ck_assert(json_is_integer(json_object_get(cj, "softmax_fused")));
        ck_assert_int_eq(json_integer_value(json_object_get(cj, "planned")), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(cj, "model_intermediate_bytes")), 0);
        json_decref(j);

        npu_buffer_t dx = upload(x, M * K), dy;
        OK(npu_malloc(ctx, 0, sizeof(y), &dy));
        OK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t ti = tensor(dx, 2, (int64_t[]){ M, K });
        npu_tensor_t to = tensor(dy, 2, (int64_t[]){ M, N });
        OK(npu_graph_run(ctx, s, g, &ti, 1, &to, 1, NULL));
        OK(npu_stream_synchronize(ctx, s));
        download_check(dy, y, M * N, 1e-4f);
        /* The open first dimension takes any extent. */
        ti.dims[0] = 3;
        to.dims[0] = 3;
        OK(npu_memset(ctx, dy, 0, 0, sizeof(y)));
        OK(npu_graph_run(ctx, s, g, &ti, 1, &to, 1, NULL));
        OK(npu_stream_synchronize(ctx, s));
        download_check(dy, y, 3 * N, 1e-4f);
        OK(npu_graph_unload(ctx, g));
        OK(npu_free(ctx, dx));
        OK(npu_free(ctx, dy));
        ck_assert_uint_eq(device_memory_used(ctx, 0), before);
        ck_assert_int_eq(npu_graph_info(ctx, g, &info), NPU_ERR_BAD_HANDLE);
}
END_TEST

START_TEST(test_bindings_checked)
{
        float x[M * K] = { 0 };
        npu_graph_t g;
        npu_stream_t s;

        OK(load(mlp_model(0), &g));
        arena_free();
        npu_buffer_t dx = upload(x, M * K), dy;
        OK(npu_malloc(ctx, 0, M * N * sizeof(float), &dy));
        OK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t ti = tensor(dx, 2, (int64_t[]){ M, K });
        npu_tensor_t to = tensor(dy, 2, (int64_t[]){ M, N });

        /* An output bound with another shape than the computed one. */
        npu_tensor_t bad = tensor(dy, 2, (int64_t[]){ N, M });
        OK(npu_graph_run(ctx, s, g, &ti, 1, &bad, 1, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "output 'Y'"), "%s", npu_error_message());
        /* An input against its declared shape: K is fixed. libnpu refuses it (and the
         * dtype and counts below) in npu_graph_run itself, from the graph's description;
         * npud's own check of them is covered by tests/unit/test_graph.c. */
        npu_tensor_t badin = tensor(dx, 2, (int64_t[]){ K, M });
        ck_assert_int_eq(npu_graph_run(ctx, s, g, &badin, 1, &to, 1, NULL), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "input 'X'"), "%s", npu_error_message());
        /* Wrong dtype. */
        badin = ti;
        badin.dtype = NPU_INT32;
        ck_assert_int_eq(npu_graph_run(ctx, s, g, &badin, 1, &to, 1, NULL), NPU_ERR_SHAPE);
        /* Wrong counts. */
        ck_assert_int_eq(npu_graph_run(ctx, s, g, &ti, 1, NULL, 0, NULL), NPU_ERR_INVALID);
        OK(npu_stream_synchronize(ctx, s)); /* nothing was queued */
        /* A buffer too small for the binding. */
        npu_buffer_t small;
        OK(npu_malloc(ctx, 0, 16, &small));
        npu_tensor_t tsmall = tensor(small, 2, (int64_t[]){ M, N });
        OK(npu_graph_run(ctx, s, g, &ti, 1, &tsmall, 1, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_OUT_OF_RANGE);
        /* Unknown graph handle. */
        npu_graph_t bogus = { g.id + 12345 };
        OK(npu_graph_run(ctx, s, bogus, &ti, 1, &to, 1, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_BAD_HANDLE);
        /* And a good run still works afterwards. */
        OK(npu_graph_run(ctx, s, g, &ti, 1, &to, 1, NULL));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_graph_unload(ctx, g));
        ck_assert_int_eq(npu_graph_unload(ctx, g), NPU_ERR_BAD_HANDLE);
}
END_TEST

START_TEST(test_unsupported_ops_listed)
{
        Onnx__ModelProto *m = model_new(13);
        Onnx__GraphProto *g = m->graph;
        npu_graph_t h;

        graph_input(g, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(g, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        node(g, "FancyOp", "first", "x", "a");
        node(g, "Relu", "ok", "a", "b");
        node(g, "OtherOp", NULL, "b", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_UNSUPPORTED);
        arena_free();
        const char *msg = npu_error_message();
        ck_assert_msg(strstr(msg, "node 'first' (FancyOp): unsupported operator"), "%s", msg);
        ck_assert_msg(strstr(msg, "node '#2' (OtherOp): unsupported operator"), "%s", msg);
        ck_assert_msg(!strstr(msg, "Relu"), "%s", msg);
}
END_TEST

START_TEST(test_malformed_models)
{
        size_t len;
        npu_graph_t h;
        uint8_t *bytes = model_pack(mlp_model(0), &len);
        uint8_t junk[64];

        arena_free();
        /* Truncated anywhere in the middle. */
        for (size_t cut = 1; cut < len; cut += len / 13 + 1)
                ck_assert_int_eq(npu_graph_load(ctx, 0, bytes, cut, &h), NPU_ERR_INVALID);
        /* Not protobuf at all. */
        memset(junk, 0xff, sizeof(junk));
        ck_assert_int_eq(npu_graph_load(ctx, 0, junk, sizeof(junk), &h), NPU_ERR_INVALID);
        /* The whole model still loads; on a device that does not exist it does not. */
        OK(npu_graph_load(ctx, 0, bytes, len, &h));
        OK(npu_graph_unload(ctx, h));
        ck_assert_int_eq(npu_graph_load(ctx, 9, bytes, len, &h), NPU_ERR_INVALID);
        free(bytes);
        ck_assert(harness_alive(&daemon_proc));
}
END_TEST

START_TEST(test_cycle_rejected)
{
        Onnx__ModelProto *m = model_new(13);
        Onnx__GraphProto *g = m->graph;
        npu_graph_t h;

        graph_input(g, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(g, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        node(g, "Add", "head", "x,c", "a");
        node(g, "Relu", "loop1", "a", "b");
        node(g, "Relu", "loop2", "b", "c");
        node(g, "Relu", "tail", "b", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_INVALID);
        arena_free();
        const char *msg = npu_error_message();
        ck_assert_msg(strstr(msg, "cycle") && strstr(msg, "node '"), "%s", msg);
}
END_TEST

START_TEST(test_structure_errors)
{
        Onnx__ModelProto *m;
        npu_graph_t h;

        /* Wrong input count: Add with one input. */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(m->graph, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        node(m->graph, "Add", "lonely", "x", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "node 'lonely' (Add)"), "%s", npu_error_message());
        arena_free();

        /* An input nobody defines. */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(m->graph, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        node(m->graph, "Add", "adder", "x,ghost", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "node 'adder' (Add): input 'ghost'"), "%s",
                      npu_error_message());
        arena_free();

        /* Two nodes define one value. */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(m->graph, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        node(m->graph, "Relu", "r1", "x", "y");
        node(m->graph, "Relu", "r2", "x", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "node 'r2' (Relu)"), "%s", npu_error_message());
        arena_free();

        /* Declared dimensions whose product overflows. */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 3, (int64_t[]){ 1ll << 40, 1ll << 20, 1ll << 10 });
        graph_output(m->graph, "y", NPU_FLOAT32, -1, NULL);
        node(m->graph, "Relu", "r", "x", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "input 'x'"), "%s", npu_error_message());
        arena_free();

        /* An initializer whose dimensions overflow (and that has no data to match). */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(m->graph, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        PUSH(m->graph->n_initializer, m->graph->initializer,
             tensor_proto("huge", NPU_FLOAT32, 2, (int64_t[]){ 1ll << 62, 1ll << 62 }));
        node(m->graph, "Add", "a", "x,huge", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "initializer 'huge'"), "%s", npu_error_message());
        arena_free();

        /* Initializer data that does not match its dimensions. */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        graph_output(m->graph, "y", NPU_FLOAT32, 1, (int64_t[]){ 4 });
        init_raw(m->graph, "w", 1, (int64_t[]){ 4 }, (float[]){ 1, 2, 3 }, 3);
        node(m->graph, "Add", "a", "x,w", "y");
        ck_assert_int_eq(load(m, &h), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "initializer 'w'"), "%s", npu_error_message());
        arena_free();

        /* Attributes are converted and handed to the operator. */
        m = model_new(13);
        graph_input(m->graph, "x", NPU_FLOAT32, 2, (int64_t[]){ 2, 3 });
        graph_output(m->graph, "y", NPU_FLOAT32, 2, (int64_t[]){ 2, 3 });
        attr_int(node(m->graph, "Softmax", "sm", "x", "y"), "axis", 1);
        npu_status_t st = load(m, &h);
        arena_free();
        if (st == NPU_OK) /* Softmax graphs need its infer; not every build has it yet */
                OK(npu_graph_unload(ctx, h));
        ck_assert(harness_alive(&daemon_proc));
}
END_TEST

START_TEST(test_two_runs_in_flight)
{
        enum { R = 64 };
        static float x1[R * K], x2[R * K], y1[R * N], y2[R * N];
        unsigned seed = 11;
        npu_graph_t g;
        npu_stream_t s1, s2;

        for (int i = 0; i < R * K; i++) {
                x1[i] = frand(&seed);
                x2[i] = frand(&seed);
        }
        OK(load(mlp_model(0), &g));
        arena_free();
        mlp_reference(x1, R, y1);
        mlp_reference(x2, R, y2);
        npu_buffer_t d1 = upload(x1, R * K), d2 = upload(x2, R * K), o1, o2;
        OK(npu_malloc(ctx, 0, sizeof(y1), &o1));
        OK(npu_malloc(ctx, 0, sizeof(y2), &o2));
        OK(npu_stream_create(ctx, 0, 0, &s1));
        OK(npu_stream_create(ctx, 0, 0, &s2));
        for (int rep = 0; rep < 20; rep++) {
                npu_tensor_t i1 = tensor(d1, 2, (int64_t[]){ R, K }), i2 = tensor(d2, 2, (int64_t[]){ R, K });
                npu_tensor_t t1 = tensor(o1, 2, (int64_t[]){ R, N }), t2 = tensor(o2, 2, (int64_t[]){ R, N });
                OK(npu_graph_run(ctx, s1, g, &i1, 1, &t1, 1, NULL));
                OK(npu_graph_run(ctx, s2, g, &i2, 1, &t2, 1, NULL));
        }
        OK(npu_stream_synchronize(ctx, s1));
        OK(npu_stream_synchronize(ctx, s2));
        download_check(o1, y1, R * N, 1e-4f);
        download_check(o2, y2, R * N, 1e-4f);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* A chain of square MatMuls with their weights: long enough to be running when it is
 * unloaded. Y = X @ W1 @ W2 ... */
enum { SQ = 192, CHAIN = 12 };

START_TEST(test_unload_while_running)
{
        static float x[SQ * SQ], w[SQ * SQ], ref[SQ * SQ], tmp[SQ * SQ];
        Onnx__ModelProto *m = model_new(13);
        Onnx__GraphProto *gp = m->graph;
        unsigned seed = 5;
        char in[32], out[32], wn[32];
        npu_graph_t g;
        npu_stream_t s;

        /* An orthogonal-ish scaled matrix keeps values bounded through the chain. */
        for (int i = 0; i < SQ * SQ; i++) {
                x[i] = frand(&seed);
                w[i] = frand(&seed) / sqrtf((float)SQ);
        }
        graph_input(gp, "X", NPU_FLOAT32, 2, (int64_t[]){ SQ, SQ });
        graph_output(gp, "Y", NPU_FLOAT32, 2, (int64_t[]){ SQ, SQ });
        init_raw(gp, "W", 2, (int64_t[]){ SQ, SQ }, w, SQ * SQ);
        for (int c = 0; c < CHAIN; c++) {
                if (c)
                        snprintf(in, sizeof(in), "h%d,W", c);
                else
                        snprintf(in, sizeof(in), "X,W");
                if (c == CHAIN - 1)
                        snprintf(out, sizeof(out), "Y");
                else
                        snprintf(out, sizeof(out), "h%d", c + 1);
                snprintf(wn, sizeof(wn), "mm%d", c);
                node(gp, "MatMul", wn, in, out);
        }
        OK(load(m, &g));
        arena_free();
        memcpy(ref, x, sizeof(x));
        for (int c = 0; c < CHAIN; c++) {
                for (int i = 0; i < SQ; i++)
                        for (int j = 0; j < SQ; j++) {
                                double acc = 0;
                                for (int k = 0; k < SQ; k++)
                                        acc += (double)ref[i * SQ + k] * w[k * SQ + j];
                                tmp[i * SQ + j] = (float)acc;
                        }
                memcpy(ref, tmp, sizeof(tmp));
        }
        npu_buffer_t dx = upload(x, SQ * SQ), dy;
        OK(npu_malloc(ctx, 0, sizeof(x), &dy));
        OK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t ti = tensor(dx, 2, (int64_t[]){ SQ, SQ }), to = tensor(dy, 2, (int64_t[]){ SQ, SQ });
        for (int i = 0; i < 4; i++)
                OK(npu_graph_run(ctx, s, g, &ti, 1, &to, 1, NULL));
        OK(npu_flush(ctx));
        OK(npu_graph_unload(ctx, g)); /* runs queued and running keep the graph */
        OK(npu_stream_synchronize(ctx, s));
        download_check(dy, ref, SQ * SQ, 1e-3f);
        /* The handle is gone for new runs. */
        OK(npu_graph_run(ctx, s, g, &ti, 1, &to, 1, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_BAD_HANDLE);
        OK(npu_free(ctx, dx));
        OK(npu_free(ctx, dy));
}
END_TEST

START_TEST(test_sigkill_reclaims_graph)
{
        uint64_t before = device_memory_used(ctx, 0);
        int pipefd[2];
        pid_t child;
        char c;

        ck_assert_int_eq(pipe(pipefd), 0);
        child = fork();
        if (child == 0) {
                enum { BIG = 1 << 20 };
                static float w[BIG];
                npu_context_t *cc;
                npu_graph_t g;
                size_t len;
                Onnx__ModelProto *m = model_new(13);
                graph_input(m->graph, "x", NPU_FLOAT32, 1, (int64_t[]){ BIG });
                graph_output(m->graph, "y", NPU_FLOAT32, 1, (int64_t[]){ BIG });
                init_raw(m->graph, "w", 1, (int64_t[]){ BIG }, w, BIG);
                node(m->graph, "Add", "add", "x,w", "y");
                uint8_t *bytes = model_pack(m, &len);
                if (npu_connect(daemon_proc.sock, &cc) != NPU_OK ||
                    npu_graph_load(cc, 0, bytes, len, &g) != NPU_OK)
                        _exit(1);
                if (write(pipefd[1], "x", 1) != 1)
                        _exit(3);
                pause();
                _exit(0);
        }
        close(pipefd[1]);
        ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
        close(pipefd[0]);
        ck_assert_uint_ge(device_memory_used(ctx, 0), before + (4u << 20));
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

/* Model mode: a graph run takes the time of its nodes' costs and computes nothing. */
START_TEST(test_model_mode)
{
        const char *extra[] = { "--sim-mode", "model", NULL };
        struct npud_proc p;
        npu_context_t *c;
        npu_graph_t g;
        npu_stream_t s;
        npu_event_t e0, e1;
        npu_buffer_t dx, dy;
        size_t len;
        float ms = 0;

        ck_assert_int_eq(harness_start(&p, extra), 0);
        OK(npu_connect(p.sock, &c));
        uint8_t *bytes = model_pack(mlp_model(0), &len);
        arena_free();
        OK(npu_graph_load(c, 0, bytes, len, &g));
        free(bytes);
        OK(npu_malloc(c, 0, 1024 * K * sizeof(float), &dx));
        OK(npu_malloc(c, 0, 1024 * N * sizeof(float), &dy));
        OK(npu_stream_create(c, 0, 0, &s));
        OK(npu_event_create(c, &e0));
        OK(npu_event_create(c, &e1));
        npu_tensor_t ti = tensor(dx, 2, (int64_t[]){ 1024, K }), to = tensor(dy, 2, (int64_t[]){ 1024, N });
        OK(npu_event_record(c, e0, s));
        OK(npu_graph_run(c, s, g, &ti, 1, &to, 1, NULL));
        OK(npu_event_record(c, e1, s));
        OK(npu_stream_synchronize(c, s));
        OK(npu_event_elapsed_ms(c, e0, e1, &ms));
        ck_assert_msg(ms > 0, "elapsed %f ms", ms);
        OK(npu_graph_unload(c, g));
        npu_disconnect(c);
        ck_assert_int_eq(harness_stop(&p), 0);
}
END_TEST

static uint8_t *read_file(const char *path, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        uint8_t *buf = NULL;
        long n;

        if (!f)
                return NULL;
        if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
                buf = malloc((size_t)n);
                if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                        free(buf);
                        buf = NULL;
                }
                *ret_len = (size_t)n;
        }
        fclose(f);
        return buf;
}

/* A float32 TensorProto of the test data as a device buffer and tensor. */
static Onnx__TensorProto *read_tensor(const char *path)
{
        size_t len = 0;
        uint8_t *b = read_file(path, &len);
        Onnx__TensorProto *t;

        ck_assert_msg(b != NULL, "cannot read %s", path);
        t = onnx__tensor_proto__unpack(NULL, len, b);
        free(b);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->data_type, NPU_FLOAT32);
        return t;
}

static const float *tensor_floats(const Onnx__TensorProto *t, size_t *ret_n)
{
        size_t n = 1;

        for (size_t d = 0; d < t->n_dims; d++)
                n *= (size_t)t->dims[d];
        *ret_n = n;
        if (t->has_raw_data) {
                ck_assert_uint_eq(t->raw_data.len, n * sizeof(float));
                return (const float *)t->raw_data.data;
        }
        ck_assert_uint_eq(t->n_float_data, n);
        return t->float_data;
}

/* One ONNX backend node test: model.onnx with test_data_set_0 (one input, one output). */
static void run_node_test(const char *name)
{
        char path[512];
        size_t len = 0, nin, nout;
        uint8_t *model;
        npu_graph_t g;
        npu_stream_t s;
        npu_tensor_t ti = { .dtype = NPU_FLOAT32 }, to = { .dtype = NPU_FLOAT32 };

        snprintf(path, sizeof(path), "%s/%s/model.onnx", ONNX_NODE_DATA, name);
        model = read_file(path, &len);
        ck_assert_msg(model != NULL, "cannot read %s (Debian package libonnx-testdata)", path);
        OK(npu_graph_load(ctx, 0, model, len, &g));
        free(model);
        snprintf(path, sizeof(path), "%s/%s/test_data_set_0/input_0.pb", ONNX_NODE_DATA, name);
        Onnx__TensorProto *in = read_tensor(path);
        snprintf(path, sizeof(path), "%s/%s/test_data_set_0/output_0.pb", ONNX_NODE_DATA, name);
        Onnx__TensorProto *out = read_tensor(path);
        const float *xi = tensor_floats(in, &nin), *yo = tensor_floats(out, &nout);
        npu_buffer_t dx = upload(xi, nin), dy;
        OK(npu_malloc(ctx, 0, nout * sizeof(float), &dy));
        ti.buf = dx;
        ti.ndim = (int)in->n_dims;
        to.buf = dy;
        to.ndim = (int)out->n_dims;
        for (size_t d = 0; d < in->n_dims; d++)
                ti.dims[d] = in->dims[d];
        for (size_t d = 0; d < out->n_dims; d++)
                to.dims[d] = out->dims[d];
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_graph_run(ctx, s, g, &ti, 1, &to, 1, NULL));
        OK(npu_stream_synchronize(ctx, s));
        download_check(dy, yo, nout, 1e-5f);
        onnx__tensor_proto__free_unpacked(in, NULL);
        onnx__tensor_proto__free_unpacked(out, NULL);
        OK(npu_graph_unload(ctx, g));
}

START_TEST(test_onnx_node_relu)
{
        run_node_test("test_relu");
}
END_TEST

START_TEST(test_onnx_node_sigmoid)
{
        run_node_test("test_sigmoid");
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-graph");
        TCase *tc = tcase_create("graph");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, test_mlp_runs, 0, 2); /* raw_data, then typed float_data */
        tcase_add_test(tc, test_bindings_checked);
        tcase_add_test(tc, test_unsupported_ops_listed);
        tcase_add_test(tc, test_malformed_models);
        tcase_add_test(tc, test_cycle_rejected);
        tcase_add_test(tc, test_structure_errors);
        tcase_add_test(tc, test_two_runs_in_flight);
        tcase_add_test(tc, test_unload_while_running);
        tcase_add_test(tc, test_sigkill_reclaims_graph);
        tcase_add_test(tc, test_model_mode);
        tcase_add_test(tc, test_onnx_node_relu);
        tcase_add_test(tc, test_onnx_node_sigmoid);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

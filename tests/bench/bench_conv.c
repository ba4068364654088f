/* bench_conv: the nn kernels through npud against the same computation in-process, measured
 * in the same run, with the ratio (in-process time / npud time) and the target:
 *   1. Conv 3x3, N=1, C=64, H=W=56, 64 filters, pads 1, float32: a one-node ONNX graph
 *      (the weights an initializer, built here with the protobuf-c code generated from
 *      onnx.proto) run with npu_graph_run, since wire launches cannot carry the INTS
 *      attribute 'pads'; in-process: im2col + cblas_sgemm (target >= 0.8)
 *   2. 1024x1024 float32 MatMul, npu_launch "MatMul" on device-resident data; in-process:
 *      cblas_sgemm (target >= 0.9)
 * npud's products go through ops_sgemm (oneDNN from 4096 multiply-adds up, ops/blas.c), the
 * in-process side stays OpenBLAS: a ratio above 1 is oneDNN's lead (bench_kernels compares
 * the two per shape on one thread).
 * Each side is timed best of 3 rounds of several back-to-back runs; the npud results are
 * copied back and compared with the in-process ones. Starts its own npud (NPUD_BIN) unless
 * --socket PATH names a running one. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npu.h"
#include "onnx.pb-c.h"
#include "tests/integration/harness.h"

#define CHECK(call)                                                                            \
        do {                                                                                   \
                npu_status_t st_ = (call);                                                     \
                if (st_ != NPU_OK) {                                                           \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_),             \
                                npu_error_message());                                          \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

enum { N = 1, C = 64, H = 56, W = 56, M = 64, K = 3 };

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double best_of(double a, double b)
{
        return a < b ? a : b;
}

static float *rand_buf(size_t n, unsigned seed)
{
        float *p = malloc(n * sizeof(float));
        size_t i;

        if (!p)
                exit(1);
        for (i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
        }
        return p;
}

/* The in-process baseline: 3x3, stride 1, pad 1 im2col into col [C*9, H*W], then one
 * sgemm of the filters [M, C*9] by it. */
static void conv_host(const float *x, const float *w, float *col, float *y)
{
        int c, kh, kw, oh, ow;

        for (c = 0; c < C; c++)
                for (kh = 0; kh < K; kh++)
                        for (kw = 0; kw < K; kw++) {
                                float *row = col + (size_t)((c * K + kh) * K + kw) * H * W;

                                for (oh = 0; oh < H; oh++) {
                                        int ih = oh - 1 + kh;

                                        for (ow = 0; ow < W; ow++) {
                                                int iw = ow - 1 + kw;

                                                row[oh * W + ow] = ih >= 0 && ih < H && iw >= 0 && iw < W
                                                                           ? x[(c * H + ih) * W + iw]
                                                                           : 0.0f;
                                        }
                                }
                        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, H * W, C * K * K, 1.0f, w,
                    C * K * K, col, H * W, 0.0f, y, H * W);
}

/* A tensor-typed graph input or output of the given shape. */
static Onnx__ValueInfoProto *value_info(const char *name, int ndim, const int64_t *dims)
{
        Onnx__ValueInfoProto *v = calloc(1, sizeof(*v));
        Onnx__TypeProto *t = calloc(1, sizeof(*t));
        Onnx__TypeProto__Tensor *tt = calloc(1, sizeof(*tt));
        Onnx__TensorShapeProto *s = calloc(1, sizeof(*s));
        int i;

        if (!v || !t || !tt || !s)
                exit(1);
        onnx__value_info_proto__init(v);
        onnx__type_proto__init(t);
        onnx__type_proto__tensor__init(tt);
        onnx__tensor_shape_proto__init(s);
        s->n_dim = (size_t)ndim;
        s->dim = calloc((size_t)ndim, sizeof(*s->dim));
        for (i = 0; i < ndim; i++) {
                s->dim[i] = calloc(1, sizeof(**s->dim));
                onnx__tensor_shape_proto__dimension__init(s->dim[i]);
                s->dim[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                s->dim[i]->dim_value = dims[i];
        }
        tt->has_elem_type = 1;
        tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        tt->shape = s;
        t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        t->tensor_type = tt;
        v->name = (char *)name;
        v->type = t;
        return v;
}

static void value_info_free(Onnx__ValueInfoProto *v)
{
        Onnx__TensorShapeProto *s = v->type->tensor_type->shape;
        size_t i;

        for (i = 0; i < s->n_dim; i++)
                free(s->dim[i]);
        free(s->dim);
        free(s);
        free(v->type->tensor_type);
        free(v->type);
        free(v);
}

/* Y = Conv(X, W) with kernel_shape [3,3] and pads [1,1,1,1], W an initializer. Returns the
 * serialized model (malloc'd) and its size. */
static uint8_t *conv_model(const float *w, size_t *ret_size)
{
        static int64_t xdims[] = { N, C, H, W }, wdims[] = { M, C, K, K }, ydims[] = { N, M, H, W };
        static int64_t ks[] = { K, K }, pads[] = { 1, 1, 1, 1 };
        static char *node_in[] = { "X", "W" }, *node_out[] = { "Y" };
        Onnx__ModelProto model;
        Onnx__OperatorSetIdProto opset;
        Onnx__GraphProto graph;
        Onnx__NodeProto node;
        Onnx__AttributeProto a_ks, a_pads, *attrs[2] = { &a_ks, &a_pads };
        Onnx__TensorProto init, *inits[1] = { &init };
        Onnx__OperatorSetIdProto *opsets[1] = { &opset };
        Onnx__NodeProto *nodes[1] = { &node };
        Onnx__ValueInfoProto *in[1], *out[1];
        uint8_t *buf;

        onnx__model_proto__init(&model);
        onnx__operator_set_id_proto__init(&opset);
        onnx__graph_proto__init(&graph);
        onnx__node_proto__init(&node);
        onnx__attribute_proto__init(&a_ks);
        onnx__attribute_proto__init(&a_pads);
        onnx__tensor_proto__init(&init);
        a_ks.name = "kernel_shape";
        a_ks.has_type = 1;
        a_ks.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a_ks.n_ints = 2;
        a_ks.ints = ks;
        a_pads.name = "pads";
        a_pads.has_type = 1;
        a_pads.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a_pads.n_ints = 4;
        a_pads.ints = pads;
        node.op_type = "Conv";
        node.n_input = 2;
        node.input = node_in;
        node.n_output = 1;
        node.output = node_out;
        node.n_attribute = 2;
        node.attribute = attrs;
        init.name = "W";
        init.n_dims = 4;
        init.dims = wdims;
        init.has_data_type = 1;
        init.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        init.has_raw_data = 1;
        init.raw_data.len = (size_t)M * C * K * K * sizeof(float);
        init.raw_data.data = (uint8_t *)w;
        in[0] = value_info("X", 4, xdims);
        out[0] = value_info("Y", 4, ydims);
        graph.name = "bench_conv";
        graph.n_node = 1;
        graph.node = nodes;
        graph.n_initializer = 1;
        graph.initializer = inits;
        graph.n_input = 1;
        graph.input = in;
        graph.n_output = 1;
        graph.output = out;
        opset.domain = "";
        opset.has_version = 1;
        opset.version = 13;
        model.has_ir_version = 1;
        model.ir_version = 8;
        model.n_opset_import = 1;
        model.opset_import = opsets;
        model.producer_name = "bench_conv";
        model.graph = &graph;
        *ret_size = onnx__model_proto__get_packed_size(&model);
        buf = malloc(*ret_size);
        if (!buf)
                exit(1);
        onnx__model_proto__pack(&model, buf);
        value_info_free(in[0]);
        value_info_free(out[0]);
        return buf;
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
        double worst = 0;
        size_t i;

        for (i = 0; i < n; i++) {
                double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));

                worst = d > worst ? d : worst;
        }
        return worst;
}

static void bench_conv(npu_context_t *ctx)
{
        const size_t nx = (size_t)N * C * H * W, nw = (size_t)M * C * K * K, ny = (size_t)N * M * H * W;
        const int reps = 20;
        float *x = rand_buf(nx, 1), *w = rand_buf(nw, 2), *y_host = malloc(ny * sizeof(float));
        float *y_dev = malloc(ny * sizeof(float)), *col = malloc((size_t)C * K * K * H * W * sizeof(float));
        double host = 1e9, dev = 1e9, diff;
        npu_buffer_t bx, by;
        npu_stream_t s;
        npu_graph_t g;
        uint8_t *model;
        size_t msize;
        int rep, i;

        if (!y_host || !y_dev || !col)
                exit(1);
        model = conv_model(w, &msize);
        CHECK(npu_graph_load(ctx, 0, model, msize, &g));
        free(model);
        CHECK(npu_malloc(ctx, 0, nx * sizeof(float), &bx));
        CHECK(npu_malloc(ctx, 0, ny * sizeof(float), &by));
        CHECK(npu_memcpy_to_device(ctx, bx, 0, x, nx * sizeof(float)));
        CHECK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t tx = { .buf = bx, .dtype = NPU_FLOAT32, .ndim = 4, .dims = { N, C, H, W } };
        npu_tensor_t ty = { .buf = by, .dtype = NPU_FLOAT32, .ndim = 4, .dims = { N, M, H, W } };

        /* warm both sides (thread pools, first-touch of buffers) */
        conv_host(x, w, col, y_host);
        CHECK(npu_graph_run(ctx, s, g, &tx, 1, &ty, 1, NULL));
        CHECK(npu_stream_synchronize(ctx, s));
        for (rep = 0; rep < 3; rep++) {
                double t0 = now_s();

                for (i = 0; i < reps; i++)
                        conv_host(x, w, col, y_host);
                host = best_of(host, (now_s() - t0) / reps);
                t0 = now_s();
                for (i = 0; i < reps; i++)
                        CHECK(npu_graph_run(ctx, s, g, &tx, 1, &ty, 1, NULL));
                CHECK(npu_stream_synchronize(ctx, s));
                dev = best_of(dev, (now_s() - t0) / reps);
        }
        CHECK(npu_memcpy_from_device(ctx, y_dev, by, 0, ny * sizeof(float)));
        diff = max_rel_diff(y_dev, y_host, ny);
        printf("Conv 3x3 N=1 C=64 56x56 64 filters pads 1 f32: npud graph %.2f ms, in-process "
               "im2col+sgemm %.2f ms, ratio %.2f (target >= 0.8)%s\n",
               dev * 1e3, host * 1e3, host / dev, diff < 1e-4 ? "" : " WRONG RESULT");
        CHECK(npu_graph_unload(ctx, g));
        CHECK(npu_free(ctx, bx));
        CHECK(npu_free(ctx, by));
        free(x);
        free(w);
        free(y_host);
        free(y_dev);
        free(col);
}

static void bench_matmul(npu_context_t *ctx)
{
        const int n = 1024, reps = 10;
        size_t bytes = (size_t)n * n * sizeof(float);
        float *ha = rand_buf((size_t)n * n, 3), *hb = rand_buf((size_t)n * n, 4);
        float *hc = malloc(bytes), *dc = malloc(bytes);
        double dev = 1e9, host = 1e9, diff;
        npu_buffer_t a, b, c;
        npu_stream_t s;
        int rep, i;

        if (!hc || !dc)
                exit(1);
        CHECK(npu_malloc(ctx, 0, bytes, &a));
        CHECK(npu_malloc(ctx, 0, bytes, &b));
        CHECK(npu_malloc(ctx, 0, bytes, &c));
        CHECK(npu_memcpy_to_device(ctx, a, 0, ha, bytes));
        CHECK(npu_memcpy_to_device(ctx, b, 0, hb, bytes));
        CHECK(npu_stream_create(ctx, 0, 0, &s));
        npu_tensor_t in[2] = { { .buf = a, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } },
                               { .buf = b, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } } };
        npu_tensor_t out = { .buf = c, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { n, n } };

        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ha, n, hb, n, 0.0f,
                    hc, n);
        CHECK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
        CHECK(npu_stream_synchronize(ctx, s));
        for (rep = 0; rep < 3; rep++) {
                double t0 = now_s();

                for (i = 0; i < reps; i++)
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ha,
                                    n, hb, n, 0.0f, hc, n);
                host = best_of(host, (now_s() - t0) / reps);
                t0 = now_s();
                for (i = 0; i < reps; i++)
                        CHECK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
                CHECK(npu_stream_synchronize(ctx, s));
                dev = best_of(dev, (now_s() - t0) / reps);
        }
        CHECK(npu_memcpy_from_device(ctx, dc, c, 0, bytes));
        diff = max_rel_diff(dc, hc, (size_t)n * n);
        printf("MatMul 1024x1024 f32: npud launch %.2f ms, in-process sgemm %.2f ms, ratio %.2f "
               "(target >= 0.9)%s\n",
               dev * 1e3, host * 1e3, host / dev, diff < 1e-4 ? "" : " WRONG RESULT");
        CHECK(npu_free(ctx, a));
        CHECK(npu_free(ctx, b));
        CHECK(npu_free(ctx, c));
        free(ha);
        free(hb);
        free(hc);
        free(dc);
}

int main(int argc, char **argv)
{
        struct npud_proc proc = { 0 };
        const char *sock = NULL;
        npu_context_t *ctx;
        int own = 0;

        if (argc == 3 && strcmp(argv[1], "--socket") == 0) {
                sock = argv[2];
        } else {
                const char *extra[] = { "--sim-devices", "1", NULL };

                if (harness_start(&proc, extra) < 0) {
                        fprintf(stderr, "bench_conv: cannot start npud\n");
                        return 1;
                }
                sock = proc.sock;
                own = 1;
        }
        CHECK(npu_connect(sock, &ctx));
        bench_conv(ctx);
        bench_matmul(ctx);
        npu_disconnect(ctx);
        if (own && harness_stop(&proc) != 0) {
                fprintf(stderr, "bench_conv: npud did not exit cleanly\n");
                return 1;
        }
        return 0;
}

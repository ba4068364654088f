/* Unit tests of the control-flow operators (ops/control.c): If, Loop and Scan called
 * the way the graph executor calls them (infer, then run with the same call), with
 * subgraphs stood in for by C functions behind a fake graph_run; results kept between
 * infer and run, run without infer, early loop exit, reversed and non-zero scan axes, and
 * the calls that must fail. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/runctx.h"
#include "proto/errors.h"

#define F32 PROTO_DTYPE_FLOAT32
#define I64 PROTO_DTYPE_INT64
#define BOOL PROTO_DTYPE_BOOL

/* A subgraph: a function from inputs to outputs whose data it takes from ops_buf_alloc (what
 * the executor hands the control-flow kernels). */
struct fake_graph {
        int (*body)(int nin, const struct ops_tensor *in, struct ops_tensor *out);
        int runs;
};

static int fake_run(void *graph_ctx, const void *graph, int nin, const struct ops_tensor *in,
                    int *ret_nout, struct ops_tensor *out, int max_out, char *err, size_t errlen)
{
        struct fake_graph *g = (struct fake_graph *)graph;

        ck_assert_ptr_eq(graph_ctx, (void *)0x1234);
        g->runs++;
        *ret_nout = g->body(nin, in, out);
        ck_assert_int_le(*ret_nout, max_out);
        return 0;
}

static struct ops_tensor f32(int ndim, const int64_t *dims, const float *v)
{
        struct ops_tensor t = { .dtype = F32, .ndim = ndim };
        int64_t n = 1;

        for (int d = 0; d < ndim; d++) {
                t.dims[d] = dims[d];
                n *= dims[d];
        }
        t.data = ops_buf_alloc((uint64_t)n * sizeof(float), NULL, 0);
        if (v)
                memcpy(t.data, v, (size_t)n * sizeof(float));
        return t;
}

static struct ops_tensor scalar(int dtype, int64_t v)
{
        struct ops_tensor t = { .dtype = dtype, .ndim = 0 };

        t.data = ops_buf_alloc(8, NULL, 0);
        if (dtype == BOOL)
                *(uint8_t *)t.data = (uint8_t)v;
        else
                *(int64_t *)t.data = v;
        return t;
}

static void graph_attr(struct ops_call *c, const char *name, struct fake_graph *g)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = OPS_ATTR_GRAPH;
        a->graph = g;
}

static void ints_attr(struct ops_call *c, const char *name, int n, const int64_t *v)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = n ? OPS_ATTR_INTS : OPS_ATTR_INT;
        a->n = n;
        a->ints = v;
        a->i = n ? 0 : v[0];
}

static void call_init(struct ops_call *c, int opset)
{
        memset(c, 0, sizeof(*c));
        c->opset = opset;
        c->graph_run = fake_run;
        c->graph_ctx = (void *)0x1234;
}

/* infer, allocate the outputs, run: what the executor does. Returns run's result. */
static int exec_call(const struct ops_def *def, struct ops_call *c, char *err, size_t errlen)
{
        int rc = ops_infer(def, c, err, errlen);

        if (rc)
                return rc;
        for (int j = 0; j < c->nout; j++) {
                int64_t n = ops_tensor_numel(&c->out[j]);
                ck_assert_int_ge(n, 0);
                c->out[j].data = ops_buf_alloc0((uint64_t)n * 8, NULL, 0);
        }
        return ops_run(def, c, err, errlen);
}

static void call_free(struct ops_call *c)
{
        for (int i = 0; i < c->nin; i++)
                ops_buf_free(c->in[i].data);
        for (int j = 0; j < c->nout; j++)
                ops_buf_free(c->out[j].data);
}

/* ---------------------------------------------------------------- If */

static int then_body(int nin, const struct ops_tensor *in, struct ops_tensor *out)
{
        out[0] = f32(1, (int64_t[]){ 3 }, (float[]){ 1, 2, 3 });
        return 1;
}

static int else_body(int nin, const struct ops_tensor *in, struct ops_tensor *out)
{
        out[0] = f32(2, (int64_t[]){ 1, 2 }, (float[]){ 5, 4 });
        out[1] = scalar(I64, 7); /* an extra output the node does not take */
        return 2;
}

START_TEST(test_if_branches)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "If", 13);
        struct fake_graph tg = { then_body, 0 }, eg = { else_body, 0 };
        char err[256] = "";
        struct ops_call c;
        float *o;

        ck_assert_ptr_nonnull(def);
        for (int cond = 0; cond < 2; cond++) {
                call_init(&c, 13);
                c.nin = 1;
                c.in[0] = scalar(BOOL, cond);
                c.nout = 1;
                graph_attr(&c, "then_branch", &tg);
                graph_attr(&c, "else_branch", &eg);
                ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
                o = c.out[0].data;
                if (cond) {
                        ck_assert_int_eq(c.out[0].ndim, 1);
                        ck_assert_int_eq(c.out[0].dims[0], 3);
                        ck_assert(o[0] == 1 && o[1] == 2 && o[2] == 3);
                } else {
                        ck_assert_int_eq(c.out[0].ndim, 2);
                        ck_assert(o[0] == 5 && o[1] == 4);
                }
                call_free(&c);
        }
        /* each branch ran once: run used what infer computed */
        ck_assert_int_eq(tg.runs, 1);
        ck_assert_int_eq(eg.runs, 1);
}
END_TEST

START_TEST(test_if_run_without_infer)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "If", 1);
        struct fake_graph tg = { then_body, 0 }, eg = { else_body, 0 };
        char err[256] = "";
        struct ops_call c;

        call_init(&c, 1);
        c.nin = 1;
        c.in[0] = scalar(BOOL, 1);
        c.nout = 1;
        graph_attr(&c, "then_branch", &tg);
        graph_attr(&c, "else_branch", &eg);
        c.out[0] = f32(1, (int64_t[]){ 3 }, NULL);
        ck_assert_msg(ops_run(def, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert(((float *)c.out[0].data)[2] == 3);
        /* a wrong output shape is named */
        c.out[0].dims[0] = 4;
        ck_assert_int_eq(ops_run(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "If: output 0"));
        call_free(&c);
}
END_TEST

START_TEST(test_if_errors)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "If", 16);
        struct fake_graph tg = { then_body, 0 };
        char err[256] = "";
        struct ops_call c;

        call_init(&c, 16);
        c.nin = 1;
        c.in[0] = scalar(BOOL, 0);
        c.nout = 1;
        graph_attr(&c, "then_branch", &tg);
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "else_branch"));
        /* outside graphs (wire launches, estimates without data) */
        c.graph_run = NULL;
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_lt(ops_check(def, &c, err, sizeof(err)), 0);
        ops_buf_free(c.in[0].data);
        c.in[0].data = NULL;
        c.graph_run = fake_run;
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "condition"));
}
END_TEST

/* ---------------------------------------------------------------- Loop */

/* (i, cond, x) -> (i < 2, x + i, x * 2): stops after the iteration where i == 2 */
static int loop_body(int nin, const struct ops_tensor *in, struct ops_tensor *out)
{
        int64_t i = *(const int64_t *)in[0].data;
        const float *x = in[2].data;
        int64_t n = ops_tensor_numel(&in[2]);

        ck_assert_int_eq(nin, 3);
        ck_assert_int_eq(in[1].dtype, BOOL);
        out[0] = scalar(BOOL, i < 2);
        out[1] = f32(in[2].ndim, in[2].dims, NULL);
        out[2] = f32(in[2].ndim, in[2].dims, NULL);
        for (int64_t k = 0; k < n; k++) {
                ((float *)out[1].data)[k] = x[k] + (float)i;
                ((float *)out[2].data)[k] = x[k] * 2;
        }
        return 3;
}

START_TEST(test_loop_trip_and_cond)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "Loop", 16);
        struct fake_graph body = { loop_body, 0 };
        char err[256] = "";
        struct ops_call c;
        const float *fin, *scan;

        /* M = 10 but the condition ends it after 3 iterations (i = 0, 1, 2) */
        call_init(&c, 16);
        c.nin = 3;
        c.in[0] = scalar(I64, 10);
        c.in[1] = scalar(BOOL, 1);
        c.in[2] = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 10 });
        c.nout = 2;
        graph_attr(&c, "body", &body);
        ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(body.runs, 3);
        fin = c.out[0].data;
        ck_assert(fin[0] == 4 && fin[1] == 13);
        ck_assert_int_eq(c.out[1].ndim, 2);
        ck_assert_int_eq(c.out[1].dims[0], 3);
        ck_assert_int_eq(c.out[1].dims[1], 2);
        scan = c.out[1].data;
        ck_assert(scan[0] == 2 && scan[1] == 20 && scan[2] == 2 && scan[3] == 20 && scan[4] == 4 &&
                  scan[5] == 22);
        call_free(&c);

        /* M = 1, no condition input */
        body.runs = 0;
        call_init(&c, 11);
        c.nin = 3;
        c.in[0] = scalar(I64, 1);
        c.in[2] = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 10 });
        c.nout = 1; /* the scan output unused */
        graph_attr(&c, "body", &body);
        ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(body.runs, 1);
        fin = c.out[0].data;
        ck_assert(fin[0] == 1 && fin[1] == 10);
        call_free(&c);
}
END_TEST

START_TEST(test_loop_zero_iterations)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "Loop", 13);
        struct fake_graph body = { loop_body, 0 };
        char err[256] = "";
        struct ops_call c;

        /* the carried value passes through */
        call_init(&c, 13);
        c.nin = 3;
        c.in[0] = scalar(I64, 0);
        c.in[2] = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 10 });
        c.nout = 1;
        graph_attr(&c, "body", &body);
        ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(body.runs, 0);
        ck_assert(((float *)c.out[0].data)[1] == 10);
        ck_assert_ptr_ne(c.out[0].data, c.in[2].data);
        call_free(&c);

        /* a scan output without iterations has no shape */
        call_init(&c, 13);
        c.nin = 3;
        c.in[1] = scalar(BOOL, 0);
        c.in[2] = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 10 });
        c.nout = 2;
        graph_attr(&c, "body", &body);
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -ENOTSUP);
        ck_assert_ptr_nonnull(strstr(err, "scan output 0"));
        call_free(&c);
}
END_TEST

/* ---------------------------------------------------------------- Scan */

/* (sum[2], x[2]) -> (sum + x, sum + x): the scan9_sum body */
static int sum_body(int nin, const struct ops_tensor *in, struct ops_tensor *out)
{
        const float *s = in[0].data, *x = in[1].data;

        ck_assert_int_eq(nin, 2);
        ck_assert_int_eq(in[1].ndim, 1);
        ck_assert_int_eq(in[1].dims[0], 2);
        out[0] = f32(1, (int64_t[]){ 2 }, (float[]){ s[0] + x[0], s[1] + x[1] });
        out[1] = f32(1, (int64_t[]){ 2 }, (float[]){ s[0] + x[0], s[1] + x[1] });
        return 2;
}

START_TEST(test_scan_sum)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "Scan", 11);
        struct fake_graph body = { sum_body, 0 };
        const int64_t one[] = { 1 };
        char err[256] = "";
        struct ops_call c;
        const float *o;

        /* scan along axis 0 of x[3,2] */
        call_init(&c, 11);
        c.nin = 2;
        c.in[0] = f32(1, (int64_t[]){ 2 }, (float[]){ 0, 0 });
        c.in[1] = f32(2, (int64_t[]){ 3, 2 }, (float[]){ 1, 2, 3, 4, 5, 6 });
        c.nout = 2;
        graph_attr(&c, "body", &body);
        ints_attr(&c, "num_scan_inputs", 0, one);
        ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
        o = c.out[0].data;
        ck_assert(o[0] == 9 && o[1] == 12);
        ck_assert_int_eq(c.out[1].dims[0], 3);
        o = c.out[1].data;
        ck_assert(o[0] == 1 && o[1] == 2 && o[2] == 4 && o[3] == 6 && o[4] == 9 && o[5] == 12);
        call_free(&c);

        /* x[2,3] scanned along axis -1, reversed; the output stacked along axis 1, reversed */
        call_init(&c, 11);
        c.nin = 2;
        c.in[0] = f32(1, (int64_t[]){ 2 }, (float[]){ 0, 0 });
        c.in[1] = f32(2, (int64_t[]){ 2, 3 }, (float[]){ 1, 3, 5, 2, 4, 6 });
        c.nout = 2;
        graph_attr(&c, "body", &body);
        ints_attr(&c, "num_scan_inputs", 0, one);
        ints_attr(&c, "scan_input_axes", 1, (const int64_t[]){ -1 });
        ints_attr(&c, "scan_input_directions", 1, one);
        ints_attr(&c, "scan_output_axes", 1, one);
        ints_attr(&c, "scan_output_directions", 1, one);
        ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
        o = c.out[0].data;
        ck_assert(o[0] == 9 && o[1] == 12);
        ck_assert_int_eq(c.out[1].ndim, 2);
        ck_assert_int_eq(c.out[1].dims[0], 2);
        ck_assert_int_eq(c.out[1].dims[1], 3);
        /* steps: (5,6) (8,10) (9,12), written from the end */
        o = c.out[1].data;
        ck_assert(o[0] == 9 && o[1] == 8 && o[2] == 5 && o[3] == 12 && o[4] == 10 && o[5] == 6);
        call_free(&c);
}
END_TEST

START_TEST(test_scan_errors)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "Scan", 9);
        struct fake_graph body = { sum_body, 0 };
        char err[256] = "";
        struct ops_call c;

        /* opset 8's batched Scan is a definition of its own */
        ck_assert_ptr_ne(ops_lookup_onnx(NULL, "Scan", 8), def);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Scan", 8)->since_version, 8);
        call_init(&c, 9);
        c.nin = 3;
        c.in[0] = f32(1, (int64_t[]){ 2 }, (float[]){ 0, 0 });
        c.in[1] = f32(2, (int64_t[]){ 3, 2 }, NULL);
        c.in[2] = f32(2, (int64_t[]){ 4, 2 }, NULL);
        c.nout = 1;
        graph_attr(&c, "body", &body);
        ints_attr(&c, "num_scan_inputs", 0, (const int64_t[]){ 2 });
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "steps"));
        c.attr[1].i = 5;
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "num_scan_inputs"));
        ck_assert_int_eq(body.runs, 0);
        call_free(&c);
}
END_TEST

/* The cost estimate infers with only initializers readable: a loop that never iterates must
 * not copy a carried value it has no data for (it used to memcpy from NULL). */
START_TEST(test_zero_iterations_without_data)
{
        const struct ops_def *loop = ops_lookup_onnx(NULL, "Loop", 13);
        const struct ops_def *scan = ops_lookup_onnx(NULL, "Scan", 11);
        struct fake_graph body = { loop_body, 0 }, sbody = { sum_body, 0 };
        char err[256] = "";
        struct ops_call c;

        call_init(&c, 13);
        c.nin = 3;
        c.in[0] = scalar(I64, 0);
        c.in[2] = (struct ops_tensor){ .dtype = F32, .ndim = 1, .dims = { 2 } }; /* no data */
        c.nout = 1;
        graph_attr(&c, "body", &body);
        ck_assert_int_eq(ops_infer(loop, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "needs the value"));
        ck_assert_int_eq(body.runs, 0);
        ops_buf_free(c.in[0].data);

        /* Scan over an axis of extent 0, the state without data */
        call_init(&c, 11);
        c.nin = 2;
        c.in[0] = (struct ops_tensor){ .dtype = F32, .ndim = 1, .dims = { 2 } };
        c.in[1] = (struct ops_tensor){ .dtype = F32, .ndim = 2, .dims = { 0, 2 } };
        c.nout = 1;
        graph_attr(&c, "body", &sbody);
        ints_attr(&c, "num_scan_inputs", 0, (const int64_t[]){ 1 });
        ck_assert_int_eq(ops_infer(scan, &c, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "needs the value"));
        ck_assert_int_eq(sbody.runs, 0);

        /* with data, zero steps pass the state through */
        c.in[0] = f32(1, (int64_t[]){ 2 }, (float[]){ 3, 4 });
        ck_assert_msg(exec_call(scan, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert(((float *)c.out[0].data)[1] == 4);
        ops_buf_free(c.in[0].data);
        ops_buf_free(c.out[0].data);
}
END_TEST

/* The trip cap of the run context: a larger M is refused before the first iteration, a loop
 * driven by its condition stops at the cap, a Scan with more steps is refused; each records
 * PROTO_E_LIMIT as the run's stop reason. */
START_TEST(test_trip_cap)
{
        const struct ops_def *loop = ops_lookup_onnx(NULL, "Loop", 13);
        const struct ops_def *scan = ops_lookup_onnx(NULL, "Scan", 11);
        struct fake_graph body = { loop_body, 0 }, sbody = { sum_body, 0 };
        struct ops_runctx ctx = { .max_loop_trips = 2 };
        char err[256] = "";
        struct ops_call c;

        ops_runctx_set(&ctx);
        call_init(&c, 13);
        c.nin = 3;
        c.in[0] = scalar(I64, INT64_MAX);
        c.in[1] = scalar(BOOL, 1);
        c.in[2] = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 10 });
        c.nout = 1;
        graph_attr(&c, "body", &body);
        ck_assert_int_lt(ops_infer(loop, &c, err, sizeof(err)), 0);
        ck_assert_ptr_nonnull(strstr(err, "cap"));
        ck_assert_int_eq(body.runs, 0);
        ck_assert_int_eq(ctx.code, PROTO_E_LIMIT);

        /* no M: loop_body keeps the condition true for 3 iterations, one past the cap */
        ctx.code = 0;
        ops_buf_free(c.in[0].data);
        c.in[0] = (struct ops_tensor){ 0 };
        ck_assert_int_lt(ops_infer(loop, &c, err, sizeof(err)), 0);
        ck_assert_ptr_nonnull(strstr(err, "after 2 iterations"));
        ck_assert_int_eq(body.runs, 2);
        ck_assert_int_eq(ctx.code, PROTO_E_LIMIT);

        /* within the cap: runs */
        ctx.code = 0;
        ctx.max_loop_trips = 3;
        body.runs = 0;
        ck_assert_msg(exec_call(loop, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(body.runs, 3);
        call_free(&c);

        ctx.code = 0;
        ctx.max_loop_trips = 3;
        call_init(&c, 11);
        c.nin = 2;
        c.in[0] = f32(1, (int64_t[]){ 2 }, (float[]){ 0, 0 });
        c.in[1] = f32(2, (int64_t[]){ 4, 2 }, (float[]){ 1, 2, 3, 4, 5, 6, 7, 8 });
        c.nout = 1;
        graph_attr(&c, "body", &sbody);
        ints_attr(&c, "num_scan_inputs", 0, (const int64_t[]){ 1 });
        ck_assert_int_lt(ops_infer(scan, &c, err, sizeof(err)), 0);
        ck_assert_ptr_nonnull(strstr(err, "4 iterations exceed"));
        ck_assert_int_eq(sbody.runs, 0);
        ck_assert_int_eq(ctx.code, PROTO_E_LIMIT);
        call_free(&c);
        ops_runctx_set(NULL);
}
END_TEST


/* Opset 8: a batch axis in front; each batch entry scans on its own. sequence_lens empty. */
START_TEST(test_scan8_batch)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, "Scan", 8);
        struct fake_graph body = { sum_body, 0 };
        const int64_t one[] = { 1 };
        char err[256] = "";
        struct ops_call c;
        const float *o;

        call_init(&c, 8);
        c.nin = 3; /* sequence_lens omitted (dtype 0), state [2,2], x [2,3,2] */
        c.in[1] = f32(2, (int64_t[]){ 2, 2 }, (float[]){ 0, 0, 100, 100 });
        c.in[2] = f32(3, (int64_t[]){ 2, 3, 2 }, (float[]){ 1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1 });
        c.nout = 2;
        graph_attr(&c, "body", &body);
        ints_attr(&c, "num_scan_inputs", 0, one);
        ck_assert_msg(exec_call(def, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].ndim, 2);
        o = c.out[0].data;
        ck_assert(o[0] == 9 && o[1] == 12 && o[2] == 103 && o[3] == 103);
        ck_assert_int_eq(c.out[1].ndim, 3);
        ck_assert_int_eq(c.out[1].dims[0], 2);
        ck_assert_int_eq(c.out[1].dims[1], 3);
        o = c.out[1].data;
        ck_assert(o[4] == 9 && o[6] == 101 && o[11] == 103);
        call_free(&c);

        /* inputs whose batch extents differ */
        call_init(&c, 8);
        c.nin = 3;
        c.in[1] = f32(2, (int64_t[]){ 1, 2 }, (float[]){ 0, 0 });
        c.in[2] = f32(3, (int64_t[]){ 2, 3, 2 }, NULL);
        c.nout = 2;
        graph_attr(&c, "body", &body);
        ints_attr(&c, "num_scan_inputs", 0, one);
        ck_assert_int_eq(exec_call(def, &c, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "batch") != NULL, "%s", err);
        call_free(&c);
}
END_TEST

static Suite *control_suite(void)
{
        Suite *s = suite_create("ops-control");
        TCase *tc = tcase_create("control");

        tcase_add_test(tc, test_if_branches);
        tcase_add_test(tc, test_if_run_without_infer);
        tcase_add_test(tc, test_if_errors);
        tcase_add_test(tc, test_loop_trip_and_cond);
        tcase_add_test(tc, test_loop_zero_iterations);
        tcase_add_test(tc, test_scan_sum);
        tcase_add_test(tc, test_scan_errors);
        tcase_add_test(tc, test_scan8_batch);
        tcase_add_test(tc, test_zero_iterations_without_data);
        tcase_add_test(tc, test_trip_cap);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(control_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Graph runs as a server uses them, through the real npud and libnpu (issue 12): per-run
 * options (npu_graph_run_with: a deadline the scheduler holds for the run, a tag named in
 * its failure, flexible outputs), cancellation of a queued run (npu_task_cancel) that fails
 * that run alone with NPU_ERR_CANCELLED and leaves other streams alone, outputs whose shape
 * depends on the data (NonZero, read back with npu_graph_run_output_shape), static shape
 * conflicts refused at load naming the node, graphs shared between sessions of one tenant
 * (npu_graph_export / npu_graph_import: the importer runs the exporter's weights and keeps
 * them after the exporter unloads; the tenant stays charged until the last user), a
 * different tenant's import refused as an unprivileged user, and bad input. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
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

static struct npud_proc proc;
static npu_context_t *ctx;
static char conf[128];
static uid_t att_uid;
static gid_t att_gid;
static char *shared_token; /* mmap'd: the attacker's child reads it */

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())
#define FAILS(expr, st) \
        do { \
                npu_status_t got_ = (expr); \
                ck_assert_msg(got_ == (st), "%s: expected %s, got %s (last message: %s)", #expr, \
                              npu_strerror(st), npu_strerror(got_), npu_error_message()); \
        } while (0)

static npu_context_t *join(const char *tenant)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = proc.sock, .tenant = tenant };
        npu_context_t *c;
        OK(npu_connect_with(&o, &c));
        return c;
}

static void setup(void)
{
        char text[512];
        FILE *f;

        ck_assert_msg(harness_attacker(&att_uid, &att_gid) == 0, "no unprivileged user (run as root)");
        snprintf(text, sizeof(text),
                 "{\"tenants\": [{\"name\": \"owner\", \"gids\": [0]},"
                 " {\"name\": \"att\", \"uids\": [%d]}]}", (int)att_uid);
        snprintf(conf, sizeof(conf), "/tmp/npud-graph-run-%d.conf", (int)getpid());
        f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        const char *extra[] = { "--config", conf, NULL };
        ck_assert_int_eq(harness_start(&proc, extra), 0);
        ck_assert_int_eq(harness_share_socket(&proc), 0);
        ctx = join(NULL);
        shared_token = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(shared_token, MAP_FAILED);
}

static void teardown(void)
{
        npu_disconnect(ctx);
        ctx = NULL;
        munmap(shared_token, 4096);
        unlink(conf);
        ck_assert_int_eq(harness_stop(&proc), 0);
}

static json_t *admin(npu_context_t *c, const char *method, const char *params)
{
        char *text = NULL;
        json_t *j;

        OK(npu_admin_call(c, method, params, &text));
        j = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(j);
        return j;
}

/* task_info of one task: the scheduler's view of it (state, deadline, tag). */
static json_t *task_info(npu_stream_t s, uint64_t task)
{
        char p[96];
        snprintf(p, sizeof(p), "{\"stream\": %u, \"task\": %" PRIu64 "}", s.id, task);
        return admin(ctx, "task_info", p);
}

/* ---- models (protobuf-c) ---- */

static void *arena[8192];
static int narena;

static void *A(size_t size)
{
        void *p = calloc(1, size ? size : 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_lt(narena, 8192);
        arena[narena++] = p;
        return p;
}

static char *S(const char *s)
{
        char *p = A(strlen(s) + 1);
        strcpy(p, s);
        return p;
}

static void arena_free(void)
{
        while (narena > 0)
                free(arena[--narena]);
}

#define PUSH(n, arr, p) \
        do { \
                void **na_ = A(sizeof(void *) * ((n) + 1)); \
                if (n) \
                        memcpy(na_, (arr), sizeof(void *) * (n)); \
                (arr) = (void *)na_; \
                (arr)[(n)++] = (p); \
        } while (0)

static Onnx__ModelProto *model_new(void)
{
        Onnx__ModelProto *m = A(sizeof(*m));
        Onnx__GraphProto *g = A(sizeof(*g));
        Onnx__OperatorSetIdProto *os = A(sizeof(*os));

        onnx__model_proto__init(m);
        onnx__graph_proto__init(g);
        onnx__operator_set_id_proto__init(os);
        m->has_ir_version = 1;
        m->ir_version = 8;
        os->domain = S("");
        os->has_version = 1;
        os->version = 13;
        PUSH(m->n_opset_import, m->opset_import, os);
        g->name = S("g");
        m->graph = g;
        return m;
}

/* ndim -1: rank open; dims -1: extent open. */
static Onnx__ValueInfoProto *value_info(const char *name, int dtype, int ndim, const int64_t *dims)
{
        Onnx__ValueInfoProto *vi = A(sizeof(*vi));
        Onnx__TypeProto *tp = A(sizeof(*tp));
        Onnx__TypeProto__Tensor *tt = A(sizeof(*tt));

        onnx__value_info_proto__init(vi);
        onnx__type_proto__init(tp);
        onnx__type_proto__tensor__init(tt);
        vi->name = S(name);
        vi->type = tp;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        tt->has_elem_type = 1;
        tt->elem_type = dtype;
        if (ndim >= 0) {
                Onnx__TensorShapeProto *sh = A(sizeof(*sh));
                onnx__tensor_shape_proto__init(sh);
                for (int i = 0; i < ndim; i++) {
                        Onnx__TensorShapeProto__Dimension *d = A(sizeof(*d));
                        onnx__tensor_shape_proto__dimension__init(d);
                        if (dims[i] >= 0) {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                                d->dim_value = dims[i];
                        } else {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                                d->dim_param = S("n");
                        }
                        PUSH(sh->n_dim, sh->dim, d);
                }
                tt->shape = sh;
        }
        return vi;
}

static void node(Onnx__GraphProto *g, const char *op, const char *name, const char *in0, const char *in1,
                 const char *out)
{
        Onnx__NodeProto *n = A(sizeof(*n));

        onnx__node_proto__init(n);
        n->op_type = S(op);
        n->name = S(name);
        PUSH(n->n_input, n->input, S(in0));
        if (in1)
                PUSH(n->n_input, n->input, S(in1));
        PUSH(n->n_output, n->output, S(out));
        PUSH(g->n_node, g->node, n);
}

static void init_f32(Onnx__GraphProto *g, const char *name, int ndim, const int64_t *dims, const float *v)
{
        Onnx__TensorProto *t = A(sizeof(*t));
        size_t n = 1;

        onnx__tensor_proto__init(t);
        t->name = S(name);
        t->has_data_type = 1;
        t->data_type = NPU_FLOAT32;
        t->n_dims = (size_t)ndim;
        t->dims = A(sizeof(int64_t) * (size_t)ndim);
        for (int i = 0; i < ndim; i++)
                n *= (size_t)(t->dims[i] = dims[i]);
        t->has_raw_data = 1;
        t->raw_data.len = n * sizeof(float);
        t->raw_data.data = A(t->raw_data.len);
        memcpy(t->raw_data.data, v, t->raw_data.len);
        PUSH(g->n_initializer, g->initializer, t);
}

static npu_status_t load_on(npu_context_t *c, Onnx__ModelProto *m, npu_graph_t *ret)
{
        size_t n = onnx__model_proto__get_packed_size(m);
        uint8_t *buf = malloc(n);
        npu_status_t st;

        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(onnx__model_proto__pack(m, buf), n);
        st = npu_graph_load(c, 0, buf, n, ret);
        free(buf);
        arena_free();
        return st;
}

enum { NW = 4096 };
static float weights[NW];

/* Y = X + W, X and Y float32 [NW], W an initializer of NW floats (16 KiB of weights). */
static npu_status_t load_add(npu_context_t *c, npu_graph_t *ret)
{
        Onnx__ModelProto *m = model_new();

        for (int i = 0; i < NW; i++)
                weights[i] = (float)(i % 97) * 0.5f;
        PUSH(m->graph->n_input, m->graph->input, value_info("X", NPU_FLOAT32, 1, (int64_t[]){ NW }));
        PUSH(m->graph->n_output, m->graph->output, value_info("Y", NPU_FLOAT32, 1, (int64_t[]){ NW }));
        init_f32(m->graph, "W", 1, (int64_t[]){ NW }, weights);
        node(m->graph, "Add", "add", "X", "W", "Y");
        return load_on(c, m, ret);
}

static npu_tensor_t vec(npu_buffer_t b, npu_dtype_t dt, int ndim, const int64_t *dims)
{
        npu_tensor_t t = { .buf = b, .dtype = dt, .ndim = ndim };
        memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
        return t;
}

/* Run the Add graph on c with X = i and check Y = i + W. */
static void add_run_check(npu_context_t *c, npu_stream_t s, npu_graph_t g)
{
        static float x[NW], y[NW];
        npu_buffer_t bx, by;

        for (int i = 0; i < NW; i++)
                x[i] = (float)i;
        OK(npu_malloc(c, 0, sizeof(x), &bx));
        OK(npu_malloc(c, 0, sizeof(y), &by));
        OK(npu_memcpy_to_device(c, bx, 0, x, sizeof(x)));
        npu_tensor_t tx = vec(bx, NPU_FLOAT32, 1, (int64_t[]){ NW }), ty = vec(by, NPU_FLOAT32, 1, (int64_t[]){ NW });
        OK(npu_graph_run(c, s, g, &tx, 1, &ty, 1, NULL));
        OK(npu_stream_synchronize(c, s));
        OK(npu_memcpy_from_device(c, y, by, 0, sizeof(y)));
        for (int i = 0; i < NW; i++)
                ck_assert_msg(y[i] == x[i] + weights[i], "Y[%d] = %f, expected %f", i, y[i], x[i] + weights[i]);
        OK(npu_free(c, bx));
        OK(npu_free(c, by));
}

/* ---- per-run options and cancellation ---- */

/* A MatMul launch held on the device by a slow fault: what later work queues behind. */
static uint64_t queue_blocker(npu_stream_t s, npu_buffer_t *ret_buf)
{
        enum { D = 128 };
        uint64_t task;
        npu_tensor_t t;

        OK(npu_malloc(ctx, 0, 2 * D * D * sizeof(float), ret_buf));
        OK(npu_memset(ctx, *ret_buf, 0, 0, 2 * D * D * sizeof(float)));
        t = vec(*ret_buf, NPU_FLOAT32, 2, (int64_t[]){ D, D });
        npu_tensor_t o = t;
        o.offset = D * D * sizeof(float);
        json_decref(admin(ctx, "fault_inject", "{\"device\": 0, \"kind\": \"slow\", \"value\": 1000000}"));
        OK(npu_launch(ctx, s, "MatMul", (npu_tensor_t[]){ t, t }, 2, &o, 1, NULL, 0, &task));
        OK(npu_flush(ctx));
        for (int i = 0; i < 400; i++) { /* until it runs */
                json_t *j = task_info(s, task);
                int running = strcmp(json_string_value(json_object_get(j, "state")), "running") == 0;
                json_decref(j);
                if (running)
                        return task;
                usleep(5000);
        }
        ck_abort_msg("the blocker never started");
        return 0;
}

START_TEST(test_options_reach_scheduler_and_cancel)
{
        npu_stream_t s1, s2;
        npu_graph_t g;
        npu_buffer_t blk, bx, by;
        uint64_t r1, r2, r3;
        json_t *j;

        OK(load_add(ctx, &g));
        OK(npu_stream_create(ctx, 0, 0, &s1));
        OK(npu_stream_create(ctx, 0, 0, &s2));
        OK(npu_malloc(ctx, 0, NW * sizeof(float), &bx));
        OK(npu_malloc(ctx, 0, NW * sizeof(float), &by));
        npu_tensor_t tx = vec(bx, NPU_FLOAT32, 1, (int64_t[]){ NW }), ty = vec(by, NPU_FLOAT32, 1, (int64_t[]){ NW });
        queue_blocker(s1, &blk);

        npu_run_options_t o = { .size = sizeof(o), .deadline_us = 7000, .tag = "req-42" };
        OK(npu_graph_run_with(ctx, s1, g, &tx, 1, &ty, 1, &o, &r1));
        OK(npu_stream_set_deadline(ctx, s1, 9000));
        npu_run_options_t o2 = { .size = sizeof(o2), .tag = "req-43" };
        OK(npu_graph_run_with(ctx, s1, g, &tx, 1, &ty, 1, &o2, &r2));
        OK(npu_graph_run(ctx, s1, g, &tx, 1, &ty, 1, &r3));
        OK(npu_flush(ctx));

        /* the scheduler holds each run's own deadline, else the stream's, and the tag */
        j = task_info(s1, r1);
        ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "queued");
        ck_assert_int_eq(json_integer_value(json_object_get(j, "deadline_us")), 7000);
        ck_assert_int_le(json_integer_value(json_object_get(j, "deadline_in_us")), 7000);
        ck_assert_str_eq(json_string_value(json_object_get(j, "tag")), "req-42");
        json_decref(j);
        j = task_info(s1, r2);
        ck_assert_int_eq(json_integer_value(json_object_get(j, "deadline_us")), 9000);
        ck_assert_str_eq(json_string_value(json_object_get(j, "tag")), "req-43");
        json_decref(j);

        /* cancel the queued run: it fails in place, the blocker is untouched */
        OK(npu_task_cancel(ctx, s1, r1));
        j = task_info(s1, r1);
        ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "failing");
        json_decref(j);
        FAILS(npu_task_cancel(ctx, s1, r1), NPU_ERR_INVALID); /* once only */
        ck_assert_msg(strstr(npu_error_message(), "neither queued nor running"), "%s", npu_error_message());
        FAILS(npu_task_cancel(ctx, s1, 999999), NPU_ERR_INVALID);

        json_decref(admin(ctx, "fault_clear", "{\"device\": 0}"));
        /* another stream is not affected */
        add_run_check(ctx, s2, g);
        OK(npu_stream_synchronize(ctx, s2));
        /* the cancelled run is that stream's failure, named with its task and tag */
        FAILS(npu_stream_synchronize(ctx, s1), NPU_ERR_CANCELLED);
        ck_assert_uint_eq(npu_error_task(), r1);
        ck_assert_msg(strstr(npu_error_message(), "req-42") && strstr(npu_error_message(), "cancelled"),
                      "message: %s", npu_error_message());
        /* then the stream works again */
        add_run_check(ctx, s1, g);
        OK(npu_free(ctx, blk));
        OK(npu_free(ctx, bx));
        OK(npu_free(ctx, by));
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* A graph run already computing (a chain of MatMuls) is cut at its next node: its stream
 * reports it as cancelled, and the next run on the stream works. */
enum { SQ = 256, CHAIN = 120 };

START_TEST(test_cancel_running_run)
{
        static float w[SQ * SQ];
        Onnx__ModelProto *m = model_new();
        char in[32], out[32], nm[32];
        npu_stream_t s;
        npu_graph_t g, ga;
        npu_buffer_t bx, by;
        uint64_t r;
        json_t *j;
        int running = 0;

        for (int i = 0; i < SQ * SQ; i++)
                w[i] = (i % SQ == i / SQ) ? 1.0f : 0.0f; /* identity: values stay bounded */
        PUSH(m->graph->n_input, m->graph->input, value_info("X", NPU_FLOAT32, 2, (int64_t[]){ SQ, SQ }));
        PUSH(m->graph->n_output, m->graph->output, value_info("Y", NPU_FLOAT32, 2, (int64_t[]){ SQ, SQ }));
        init_f32(m->graph, "W", 2, (int64_t[]){ SQ, SQ }, w);
        for (int c = 0; c < CHAIN; c++) {
                snprintf(in, sizeof(in), c ? "h%d" : "X", c);
                snprintf(out, sizeof(out), c == CHAIN - 1 ? "Y" : "h%d", c + 1);
                snprintf(nm, sizeof(nm), "mm%d", c);
                node(m->graph, "MatMul", nm, in, "W", out);
        }
        OK(load_on(ctx, m, &g));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_malloc(ctx, 0, SQ * SQ * sizeof(float), &bx));
        OK(npu_malloc(ctx, 0, SQ * SQ * sizeof(float), &by));
        npu_tensor_t tx = vec(bx, NPU_FLOAT32, 2, (int64_t[]){ SQ, SQ }), ty = vec(by, NPU_FLOAT32, 2, (int64_t[]){ SQ, SQ });
        npu_run_options_t o = { .size = sizeof(o), .tag = "long-one" };
        OK(npu_graph_run_with(ctx, s, g, &tx, 1, &ty, 1, &o, &r));
        OK(npu_flush(ctx));
        for (int i = 0; i < 1000 && !running; i++) {
                j = task_info(s, r);
                running = strcmp(json_string_value(json_object_get(j, "state")), "running") == 0;
                json_decref(j);
                if (!running)
                        usleep(1000);
        }
        ck_assert_msg(running, "the run never started");
        npu_tensor_t q = ty;
        FAILS(npu_graph_run_output_shape(ctx, s, r, 0, &q), NPU_ERR_NOT_READY); /* still running */
        OK(npu_task_cancel(ctx, s, r));
        FAILS(npu_stream_synchronize(ctx, s), NPU_ERR_CANCELLED);
        ck_assert_uint_eq(npu_error_task(), r);
        ck_assert_msg(strstr(npu_error_message(), "long-one") && strstr(npu_error_message(), "cancelled"),
                      "message: %s", npu_error_message());
        OK(npu_graph_unload(ctx, g));
        OK(load_add(ctx, &ga));
        add_run_check(ctx, s, ga);
        OK(npu_free(ctx, bx));
        OK(npu_free(ctx, by));
        OK(npu_graph_unload(ctx, ga));
}
END_TEST

/* A run that fails names its tag; a foreign session cannot cancel our task. */
START_TEST(test_tag_in_error_and_foreign_cancel)
{
        npu_stream_t s;
        npu_graph_t g;
        npu_buffer_t bx, by, blk;
        uint64_t r, q;

        OK(load_add(ctx, &g));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_malloc(ctx, 0, NW * sizeof(float), &bx));
        OK(npu_malloc(ctx, 0, NW * sizeof(float), &by));
        npu_tensor_t tx = vec(bx, NPU_FLOAT32, 1, (int64_t[]){ NW });
        npu_tensor_t bad = vec(by, NPU_FLOAT32, 2, (int64_t[]){ 2, NW / 2 }); /* Y is [NW] */
        npu_run_options_t o = { .size = sizeof(o), .tag = "trace-7f3a" };
        OK(npu_graph_run_with(ctx, s, g, &tx, 1, &bad, 1, &o, &r));
        FAILS(npu_stream_synchronize(ctx, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), r);
        ck_assert_msg(strstr(npu_error_message(), "run 'trace-7f3a'"), "message: %s", npu_error_message());

        /* a queued task of ours; another session (same tenant) names it */
        queue_blocker(s, &blk);
        npu_tensor_t ty = vec(by, NPU_FLOAT32, 1, (int64_t[]){ NW });
        OK(npu_graph_run(ctx, s, g, &tx, 1, &ty, 1, &q));
        OK(npu_flush(ctx));
        npu_context_t *other = join(NULL);
        FAILS(npu_task_cancel(other, s, q), NPU_ERR_BAD_HANDLE); /* no stream of its own */
        npu_stream_t os;
        OK(npu_stream_create(other, 0, 0, &os));
        for (uint32_t id = 0; id < 4; id++) /* whatever handle it names, only its own streams */
                ck_assert_int_ne(npu_task_cancel(other, (npu_stream_t){ id == 0 ? os.id : s.id + id - 1 }, q), NPU_OK);
        npu_disconnect(other);
        json_decref(admin(ctx, "fault_clear", "{\"device\": 0}"));
        OK(npu_stream_synchronize(ctx, s)); /* q ran */
        OK(npu_free(ctx, blk));
        OK(npu_free(ctx, bx));
        OK(npu_free(ctx, by));
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_bad_options)
{
        npu_stream_t s;
        npu_graph_t g;
        npu_buffer_t b;

        OK(load_add(ctx, &g));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_malloc(ctx, 0, NW * sizeof(float), &b));
        npu_tensor_t t = vec(b, NPU_FLOAT32, 1, (int64_t[]){ NW });
        npu_run_options_t o = { .size = 0 };
        FAILS(npu_graph_run_with(ctx, s, g, &t, 1, &t, 1, &o, NULL), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "size"), "%s", npu_error_message());
        o.size = (size_t)-1; /* uninitialized */
        FAILS(npu_graph_run_with(ctx, s, g, &t, 1, &t, 1, &o, NULL), NPU_ERR_INVALID);
        o.size = sizeof(o);
        o.flags = 0x80;
        FAILS(npu_graph_run_with(ctx, s, g, &t, 1, &t, 1, &o, NULL), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "flags"), "%s", npu_error_message());
        o.flags = 0;
        o.tag = "line\nbreak";
        FAILS(npu_graph_run_with(ctx, s, g, &t, 1, &t, 1, &o, NULL), NPU_ERR_INVALID);
        o.tag = "0123456789abcdef0123456789abcdefX"; /* 33 bytes */
        FAILS(npu_graph_run_with(ctx, s, g, &t, 1, &t, 1, &o, NULL), NPU_ERR_INVALID);
        o.tag = NULL;
        o.deadline_us = 4000ull * 1000000;
        FAILS(npu_graph_run_with(ctx, s, g, &t, 1, &t, 1, &o, NULL), NPU_ERR_INVALID);
        /* bogus tokens */
        npu_graph_t gi;
        FAILS(npu_graph_import(ctx, "0123456789abcdef0123456789abcdef", &gi), NPU_ERR_INVALID);
        FAILS(npu_graph_import(ctx, "short", &gi), NPU_ERR_INVALID);
        FAILS(npu_graph_revoke(ctx, "0123456789abcdef0123456789abcdef"), NPU_ERR_INVALID);
        FAILS(npu_graph_export(ctx, (npu_graph_t){ 12345 }, (char[NPU_TOKEN_LEN]){ 0 }), NPU_ERR_BAD_HANDLE);
        /* shapes of a run that was not flexible, of a task that does not exist */
        uint64_t r;
        OK(npu_graph_run(ctx, s, g, &t, 1, &t, 1, &r));
        OK(npu_stream_synchronize(ctx, s));
        npu_tensor_t q = t;
        FAILS(npu_graph_run_output_shape(ctx, s, r, 0, &q), NPU_ERR_INVALID);
        FAILS(npu_graph_run_output_shape(ctx, (npu_stream_t){ 777 }, r, 0, &q), NPU_ERR_BAD_HANDLE);
        OK(npu_free(ctx, b));
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* A session that negotiated version 2 cannot send GRAPH_RUN_OPT: its task fails, naming the
 * version, and the session goes on. A version-3 session gets to the graph handle check. */
static void raw_opt_run(int max_version, int want_version, const char *want_msg)
{
        static struct proto_rec rec;
        uint8_t body[128];
        char req[128];
        int fd = harness_raw_connect(proc.sock);
        json_t *r;

        ck_assert_int_ge(fd, 0);
        snprintf(req, sizeof(req), "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":%d}}",
                 max_version);
        r = harness_raw_call(fd, 1, req);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r, "result"), "version")), want_version);
        json_decref(r);
        r = harness_raw_call(fd, 2, "{\"method\":\"stream_create\",\"params\":{\"device\":0,\"priority\":0}}");
        uint32_t stream = (uint32_t)json_integer_value(json_object_get(json_object_get(r, "result"), "stream"));
        json_decref(r);
        memset(&rec, 0, sizeof(rec));
        rec.type = PROTO_REC_GRAPH_RUN_OPT;
        rec.seq = 5;
        rec.stream = stream;
        rec.graph.graph = 4242;
        snprintf(rec.graph.tag, sizeof(rec.graph.tag), "raw");
        size_t n = proto_rec_encode(&rec, body);
        ck_assert_uint_eq(n, 24 + 64);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, body, n, NULL, 0), 0);
        snprintf(req, sizeof(req), "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":%u}}", stream);
        r = harness_raw_call(fd, 3, req);
        ck_assert_ptr_nonnull(r);
        const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
        ck_assert_msg(msg && strstr(msg, want_msg) && strstr(msg, "run 'raw'"), "message: %s", msg ? msg : "(none)");
        json_decref(r);
        r = harness_raw_call(fd, 4, "{\"method\":\"ping\"}"); /* the session goes on */
        ck_assert_int_eq(harness_reply_code(r), 0);
        json_decref(r);
        close(fd);
}

START_TEST(test_opt_record_needs_version_3)
{
        raw_opt_run(2, 2, "needs protocol version 3");
        raw_opt_run(3, 3, "unknown graph handle 4242");
}
END_TEST

/* ---- outputs whose shape depends on the data ---- */

START_TEST(test_nonzero_flexible_output)
{
        static const float x[6] = { 0, 3, 0, 5, 7, 0 };
        Onnx__ModelProto *m = model_new();
        npu_graph_t g;
        npu_stream_t s;
        npu_buffer_t bx, by;
        npu_graph_io_t io = { .size = sizeof(io) };
        uint64_t r, r2;
        int64_t y[6];

        PUSH(m->graph->n_input, m->graph->input, value_info("X", NPU_FLOAT32, 1, (int64_t[]){ 6 }));
        PUSH(m->graph->n_output, m->graph->output, value_info("Y", NPU_INT64, 2, (int64_t[]){ 1, -1 }));
        node(m->graph, "NonZero", "nz", "X", NULL, "Y");
        OK(load_on(ctx, m, &g));
        OK(npu_graph_output(ctx, g, 0, &io));
        ck_assert_int_eq(io.ndim, 2);
        ck_assert_int_eq(io.dims[1], -1); /* open: known only after the run */
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_malloc(ctx, 0, sizeof(x), &bx));
        OK(npu_malloc(ctx, 0, sizeof(y), &by));
        OK(npu_memcpy_to_device(ctx, bx, 0, x, sizeof(x)));
        OK(npu_memset(ctx, by, 0, 0xff, sizeof(y)));
        npu_tensor_t tx = vec(bx, NPU_FLOAT32, 1, (int64_t[]){ 6 });
        npu_tensor_t cap = vec(by, NPU_INT64, 2, (int64_t[]){ 1, 6 }); /* room for 6 */

        /* bound as a fixed shape, the run fails as before */
        OK(npu_graph_run(ctx, s, g, &tx, 1, &cap, 1, NULL));
        FAILS(npu_stream_synchronize(ctx, s), NPU_ERR_SHAPE);

        npu_run_options_t o = { .size = sizeof(o), .flags = NPU_RUN_FLEX_OUTPUTS };
        OK(npu_graph_run_with(ctx, s, g, &tx, 1, &cap, 1, &o, &r));
        OK(npu_stream_synchronize(ctx, s));
        npu_tensor_t got = cap;
        OK(npu_graph_run_output_shape(ctx, s, r, 0, &got));
        ck_assert_int_eq(got.dtype, NPU_INT64);
        ck_assert_int_eq(got.ndim, 2);
        ck_assert_int_eq(got.dims[0], 1);
        ck_assert_int_eq(got.dims[1], 3);
        ck_assert_int_eq(got.buf.id, by.id); /* buffer and offset left as bound */
        OK(npu_memcpy_from_device(ctx, y, by, 0, sizeof(y)));
        ck_assert_int_eq(y[0], 1);
        ck_assert_int_eq(y[1], 3);
        ck_assert_int_eq(y[2], 4);
        FAILS(npu_graph_run_output_shape(ctx, s, r, 1, &got), NPU_ERR_OUT_OF_RANGE);

        /* a capacity too small fails the run, naming the output and the sizes */
        npu_tensor_t small = vec(by, NPU_INT64, 2, (int64_t[]){ 1, 2 });
        OK(npu_graph_run_with(ctx, s, g, &tx, 1, &small, 1, &o, &r2));
        FAILS(npu_stream_synchronize(ctx, s), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "'Y'") && strstr(npu_error_message(), "16 bytes"),
                      "message: %s", npu_error_message());
        FAILS(npu_graph_run_output_shape(ctx, s, r2, 0, &got), NPU_ERR_INVALID);
        /* no non-zero element: an empty output */
        OK(npu_memset(ctx, bx, 0, 0, sizeof(x)));
        OK(npu_graph_run_with(ctx, s, g, &tx, 1, &cap, 1, &o, &r));
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_graph_run_output_shape(ctx, s, r, 0, &got));
        ck_assert_int_eq(got.dims[1], 0);
        OK(npu_free(ctx, bx));
        OK(npu_free(ctx, by));
        OK(npu_graph_unload(ctx, g));
}
END_TEST

START_TEST(test_static_conflict_refused_at_load)
{
        static const float a[6] = { 0 }, b[20] = { 0 };
        Onnx__ModelProto *m = model_new();
        npu_graph_t g;

        PUSH(m->graph->n_input, m->graph->input, value_info("X", NPU_FLOAT32, 2, (int64_t[]){ 2, 3 }));
        PUSH(m->graph->n_output, m->graph->output, value_info("Y", NPU_FLOAT32, -1, NULL));
        init_f32(m->graph, "A", 2, (int64_t[]){ 2, 3 }, a);
        init_f32(m->graph, "B", 2, (int64_t[]){ 4, 5 }, b);
        node(m->graph, "Add", "constant_sum", "A", "B", "C");
        node(m->graph, "Add", "out", "X", "C", "Y");
        FAILS(load_on(ctx, m, &g), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "constant_sum"), "message: %s", npu_error_message());

        /* declared input shapes: [2,3] + [4,5] */
        m = model_new();
        PUSH(m->graph->n_input, m->graph->input, value_info("P", NPU_FLOAT32, 2, (int64_t[]){ 2, 3 }));
        PUSH(m->graph->n_input, m->graph->input, value_info("Q", NPU_FLOAT32, 2, (int64_t[]){ 4, 5 }));
        PUSH(m->graph->n_output, m->graph->output, value_info("Y", NPU_FLOAT32, -1, NULL));
        node(m->graph, "Add", "declared_sum", "P", "Q", "Y");
        FAILS(load_on(ctx, m, &g), NPU_ERR_SHAPE);
        ck_assert_msg(strstr(npu_error_message(), "declared_sum"), "message: %s", npu_error_message());

        /* an open extent is left to the run */
        m = model_new();
        PUSH(m->graph->n_input, m->graph->input, value_info("P", NPU_FLOAT32, 2, (int64_t[]){ 2, -1 }));
        PUSH(m->graph->n_input, m->graph->input, value_info("Q", NPU_FLOAT32, 2, (int64_t[]){ 4, 5 }));
        PUSH(m->graph->n_output, m->graph->output, value_info("Y", NPU_FLOAT32, -1, NULL));
        node(m->graph, "Add", "open_sum", "P", "Q", "Y");
        OK(load_on(ctx, m, &g));
        OK(npu_graph_unload(ctx, g));
}
END_TEST

/* ---- graphs shared within a tenant ---- */

static uint64_t tenant_used(const char *name)
{
        json_t *j = admin(ctx, "tenants", "{}"), *t;
        uint64_t v = UINT64_MAX;
        size_t i;

        json_array_foreach(json_object_get(j, "tenants"), i, t)
                if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
                        v = (uint64_t)json_integer_value(json_object_get(t, "memory_used"));
        json_decref(j);
        return v;
}

START_TEST(test_share_same_tenant)
{
        npu_context_t *a = join(NULL), *b = join(NULL);
        char tok[NPU_TOKEN_LEN];
        npu_graph_t ga, gb, gx;
        npu_stream_t sb;
        npu_graph_io_t io = { .size = sizeof(io) };
        uint64_t base = tenant_used("owner"), loaded;

        ck_assert_str_eq(npu_tenant(a), "owner");
        OK(load_add(a, &ga));
        loaded = tenant_used("owner");
        ck_assert_uint_ge(loaded - base, NW * sizeof(float));
        OK(npu_graph_export(a, ga, tok));
        ck_assert_uint_eq(strlen(tok), NPU_TOKEN_LEN - 1);
        OK(npu_graph_import(b, tok, &gb));
        ck_assert_uint_eq(tenant_used("owner"), loaded); /* weights not copied nor charged twice */
        OK(npu_graph_input(b, gb, 0, &io)); /* the importer's description */
        ck_assert_str_eq(io.name, "X");
        OK(npu_stream_create(b, 0, 0, &sb));
        add_run_check(b, sb, gb);
        /* the importer may not re-export; the exporter may not import its own token */
        FAILS(npu_graph_export(b, gb, (char[NPU_TOKEN_LEN]){ 0 }), NPU_ERR_PERMISSION);
        FAILS(npu_graph_import(a, tok, &gx), NPU_ERR_INVALID);
        /* the exporter unloads: its token ends, the importer's graph stays and runs */
        OK(npu_graph_unload(a, ga));
        FAILS(npu_graph_import(b, tok, &gx), NPU_ERR_INVALID);
        ck_assert_uint_eq(tenant_used("owner"), loaded); /* still the tenant's, until the last user */
        add_run_check(b, sb, gb);
        OK(npu_graph_unload(b, gb));
        for (int i = 0; i < 200 && tenant_used("owner") != base; i++)
                usleep(5000);
        ck_assert_uint_eq(tenant_used("owner"), base);

        /* an exporter that disconnects ends its tokens too; imports made keep working */
        OK(load_add(a, &ga));
        OK(npu_graph_export(a, ga, tok));
        OK(npu_graph_import(b, tok, &gb));
        npu_disconnect(a);
        /* the daemon ends the tokens once it has seen the connection close, which may be
         * after b's next request arrives: an import that still succeeds is undone and
         * retried until the tokens are gone */
        npu_status_t ist = NPU_OK;
        for (int i = 0; i < 400 && (ist = npu_graph_import(b, tok, &gx)) == NPU_OK; i++) {
                OK(npu_graph_unload(b, gx));
                usleep(5000);
        }
        ck_assert_msg(ist == NPU_ERR_INVALID, "import after the exporter disconnected: %s (%s)",
                      npu_strerror(ist), npu_error_message());
        add_run_check(b, sb, gb);
        /* revoke by the exporter */
        a = join(NULL);
        OK(load_add(a, &ga));
        OK(npu_graph_export(a, ga, tok));
        FAILS(npu_graph_revoke(b, tok), NPU_ERR_PERMISSION);
        OK(npu_graph_revoke(a, tok));
        FAILS(npu_graph_import(b, tok, &gx), NPU_ERR_INVALID);
        npu_disconnect(a);
        npu_disconnect(b); /* the importer's end releases the last reference */
        for (int i = 0; i < 200 && tenant_used("owner") != base; i++)
                usleep(5000);
        ck_assert_uint_eq(tenant_used("owner"), base);
}
END_TEST

/* The unprivileged attacker (tenant "att") tries root's token. */
static int attacker_import(void *arg)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = proc.sock };
        npu_context_t *c = NULL;
        npu_graph_t g;
        npu_status_t st;

        if (npu_connect_with(&o, &c) != NPU_OK) {
                fprintf(stderr, "attacker: cannot connect: %s\n", npu_error_message());
                return 2;
        }
        if (strcmp(npu_tenant(c), "att") != 0) {
                fprintf(stderr, "attacker: tenant '%s'\n", npu_tenant(c));
                return 3;
        }
        st = npu_graph_import(c, shared_token, &g);
        if (st != NPU_ERR_PERMISSION || !strstr(npu_error_message(), "tenant")) {
                fprintf(stderr, "attacker: import gave %s: %s\n", npu_strerror(st), npu_error_message());
                return 4;
        }
        /* nor can it revoke the owner's token */
        st = npu_graph_revoke(c, shared_token);
        if (st != NPU_ERR_PERMISSION) {
                fprintf(stderr, "attacker: revoke gave %s: %s\n", npu_strerror(st), npu_error_message());
                return 5;
        }
        npu_disconnect(c);
        return 0;
}

START_TEST(test_share_other_tenant_refused)
{
        npu_graph_t g, gb;
        npu_context_t *b;
        npu_stream_t s;

        OK(load_add(ctx, &g));
        OK(npu_graph_export(ctx, g, shared_token));
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, attacker_import, NULL), 0);
        /* the token still works for the owner's tenant */
        b = join(NULL);
        OK(npu_graph_import(b, shared_token, &gb));
        OK(npu_stream_create(b, 0, 0, &s));
        add_run_check(b, s, gb);
        npu_disconnect(b);
        OK(npu_graph_unload(ctx, g));
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-graph-run");
        TCase *tc = tcase_create("graph-run");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_options_reach_scheduler_and_cancel);
        tcase_add_test(tc, test_cancel_running_run);
        tcase_add_test(tc, test_tag_in_error_and_foreign_cancel);
        tcase_add_test(tc, test_bad_options);
        tcase_add_test(tc, test_opt_record_needs_version_3);
        tcase_add_test(tc, test_nonzero_flexible_output);
        tcase_add_test(tc, test_static_conflict_refused_at_load);
        tcase_add_test(tc, test_share_same_tenant);
        tcase_add_test(tc, test_share_other_tenant_refused);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

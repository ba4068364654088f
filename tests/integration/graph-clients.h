/* Clients shared by the integration tests of graph steps and parts (test_graph_steps.c,
 * test_graph_parts.c): a tenant's connection, chains of big MatMuls whose results are exact,
 * and a latency-critical client with a small warm Add launch. Header-only, Check asserts;
 * include it after harness.h, npu.h and tests/onnx-build.h. */
#ifndef NPUD_TESTS_GRAPH_CLIENTS_H
#define NPUD_TESTS_GRAPH_CLIENTS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define GC_OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

static __attribute__((unused)) npu_context_t *connect_as(const struct npud_proc *p, const char *tenant)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = p->sock, .tenant = tenant };
        npu_context_t *c = NULL;
        GC_OK(npu_connect_with(&o, &c));
        return c;
}

static __attribute__((unused)) npu_tensor_t mat(npu_buffer_t b, int rows, int cols)
{
        return (npu_tensor_t){ .buf = b, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { rows, cols } };
}

/* Pack a graph of nodes (inputs, outputs given) and load it on device 0. */
static npu_status_t load(npu_context_t *c, Onnx__NodeProto **nodes, int nnode,
                         Onnx__ValueInfoProto **in, int nin, Onnx__ValueInfoProto **out, int nout,
                         npu_graph_t *ret)
{
        Onnx__GraphProto *g = graph_proto();
        npu_status_t st;
        uint8_t *buf;
        size_t len;

        g->n_node = (size_t)nnode;
        g->node = nodes;
        g->n_input = (size_t)nin;
        g->input = in;
        g->n_output = (size_t)nout;
        g->output = out;
        buf = model_pack(g, 17, &len);
        st = npu_graph_load(c, 0, buf, len, ret);
        free(buf);
        return st;
}

/* Chains of MatMuls by w from x, all d x d: nchains chains of len nodes each, the node i of
 * chain k named mm<k>_<i>, outputs y0, y1, ... */
static __attribute__((unused)) npu_status_t load_chains(npu_context_t *c, int d, int nchains, int len,
                                                        npu_graph_t *ret)
{
        Onnx__NodeProto **nodes = K(sizeof(*nodes) * (size_t)(nchains * len));
        Onnx__ValueInfoProto **out = K(sizeof(*out) * (size_t)nchains);
        const int64_t dims[2] = { d, d };
        int n = 0;

        for (int k = 0; k < nchains; k++)
                for (int i = 0; i < len; i++) {
                        char *in = K(32), *o = K(32), *name = K(32);
                        snprintf(in, 32, i ? "c%d_%d" : "x", k, i - 1);
                        if (i == len - 1)
                                snprintf(o, 32, "y%d", k);
                        else
                                snprintf(o, 32, "c%d_%d", k, i);
                        snprintf(name, 32, "mm%d_%d", k, i);
                        nodes[n] = node("MatMul", 2, (const char *[]){ in, "w" }, 1, (const char *[]){ o });
                        nodes[n++]->name = name;
                        if (i == len - 1)
                                out[k] = tvalue(o, NPU_FLOAT32, 2, dims);
                }
        return load(c, nodes, n, (Onnx__ValueInfoProto **)list(2, tvalue("x", NPU_FLOAT32, 2, dims),
                                                               tvalue("w", NPU_FLOAT32, 2, dims)),
                    2, out, nchains, ret);
}

/* A client running a chain of len MatMuls by w = 2I over d x d: y = x * 2^len exactly,
 * whatever the order of the sums, for small integers in x. */
struct mm_client {
        npu_context_t *c;
        npu_graph_t g;
        npu_buffer_t x, w, y;
        npu_stream_t s;
        npu_event_t done;
        uint64_t run;
        int d, len;
};

static __attribute__((unused)) void mm_setup(struct mm_client *m, const struct npud_proc *p, const char *tenant,
                                             int d, int len, const float *x)
{
        size_t bytes = (size_t)d * d * sizeof(float);
        float *w = calloc((size_t)d * d, sizeof(float));

        ck_assert_ptr_nonnull(w);
        for (int i = 0; i < d; i++)
                w[(size_t)i * d + i] = 2.0f;
        m->d = d;
        m->len = len;
        m->c = connect_as(p, tenant);
        GC_OK(load_chains(m->c, d, 1, len, &m->g));
        GC_OK(npu_malloc(m->c, 0, bytes, &m->x));
        GC_OK(npu_malloc(m->c, 0, bytes, &m->w));
        GC_OK(npu_malloc(m->c, 0, bytes, &m->y));
        GC_OK(npu_memcpy_to_device(m->c, m->x, 0, x, bytes));
        GC_OK(npu_memcpy_to_device(m->c, m->w, 0, w, bytes));
        GC_OK(npu_stream_create(m->c, 0, 0, &m->s));
        GC_OK(npu_event_create(m->c, &m->done));
        free(w);
}

/* A run, then an event record right behind it (done fires when the run has finished). */
static __attribute__((unused)) void mm_start(struct mm_client *m)
{
        npu_tensor_t in[2] = { mat(m->x, m->d, m->d), mat(m->w, m->d, m->d) }, out = mat(m->y, m->d, m->d);
        GC_OK(npu_graph_run(m->c, m->s, m->g, in, 2, &out, 1, &m->run));
        GC_OK(npu_event_record(m->c, m->done, m->s));
        GC_OK(npu_flush(m->c));
}

/* Wait for the stream and compare y with x * 2^len. */
static __attribute__((unused)) void mm_check(struct mm_client *m, const float *x)
{
        size_t n = (size_t)m->d * m->d;
        float *y = malloc(n * sizeof(float)), f = (float)(1L << m->len);

        ck_assert_ptr_nonnull(y);
        GC_OK(npu_stream_synchronize(m->c, m->s));
        GC_OK(npu_memcpy_from_device(m->c, y, m->y, 0, n * sizeof(float)));
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(y[i] == x[i] * f, "y[%zu] = %g, expected %g", i, y[i], x[i] * f);
        free(y);
}

/* A task's state per task_info ("gone" when it is not known), in buf. */
static __attribute__((unused)) const char *task_state(npu_context_t *c, npu_stream_t s, uint64_t task,
                                                      char *buf, size_t len)
{
        char p[96], *text = NULL;
        snprintf(p, sizeof(p), "{\"stream\": %u, \"task\": %" PRIu64 "}", s.id, task);
        if (npu_admin_call(c, "task_info", p, &text) != NPU_OK) {
                snprintf(buf, len, "gone");
                return buf;
        }
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        snprintf(buf, len, "%s", j ? json_string_value(json_object_get(j, "state")) : "?");
        json_decref(j);
        return buf;
}

/* Is m's last run running (per task_info, its state left in buf)? */
static __attribute__((unused)) int mm_running(struct mm_client *m, char *buf, size_t len)
{
        return strcmp(task_state(m->c, m->s, m->run, buf, len), "running") == 0;
}

/* x for mm clients: small integers, so that every product and sum is exact. */
static __attribute__((unused)) float *mm_x(int d)
{
        float *x = malloc(sizeof(float) * (size_t)d * d);

        ck_assert_ptr_nonnull(x);
        for (size_t i = 0; i < (size_t)d * d; i++)
                x[i] = (float)(i % 7) - 3.0f;
        return x;
}

/* A latency-critical client's small launch: r = a + a over 64 ones on its own stream. */
struct lc_client {
        npu_context_t *c;
        npu_buffer_t a, r;
        npu_stream_t s;
};

static __attribute__((unused)) void lc_launch(struct lc_client *l)
{
        npu_tensor_t ta = { .buf = l->a, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 64 } };
        npu_tensor_t tr = { .buf = l->r, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 64 } };
        GC_OK(npu_launch(l->c, l->s, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tr, 1, NULL, 0, NULL));
        GC_OK(npu_stream_synchronize(l->c, l->s));
}

/* Connect as tenant and launch once, so that the operator id is resolved. */
static __attribute__((unused)) void lc_setup(struct lc_client *l, const struct npud_proc *p, const char *tenant)
{
        float ones[64];

        for (int i = 0; i < 64; i++)
                ones[i] = 1.0f;
        l->c = connect_as(p, tenant);
        GC_OK(npu_malloc(l->c, 0, sizeof(ones), &l->a));
        GC_OK(npu_malloc(l->c, 0, sizeof(ones), &l->r));
        GC_OK(npu_memcpy_to_device(l->c, l->a, 0, ones, sizeof(ones)));
        GC_OK(npu_stream_create(l->c, 0, 0, &l->s));
        lc_launch(l);
}

/* The last launch's result is 64 twos; disconnects. */
static __attribute__((unused)) void lc_check(struct lc_client *l)
{
        float res[64];

        GC_OK(npu_memcpy_from_device(l->c, res, l->r, 0, sizeof(res)));
        for (int i = 0; i < 64; i++)
                ck_assert_float_eq(res[i], 2.0f);
        npu_disconnect(l->c);
}

/* npud (started with args) serving the tenants lc (latency-critical), bulk1 and bulk2
 * (normal), all on device 0; lc connected and warm; bulk1 and bulk2 each running a chain of
 * len MatMuls over d x d from x (their event records right behind the runs). */
static __attribute__((unused)) void lc_beside_two_bulk(struct npud_proc *p, const char *const *args,
                                                       struct lc_client *lc, struct mm_client b[2], int d,
                                                       int len, const float *x)
{
        ck_assert_int_eq(harness_start_config(p, "{\"tenants\": ["
                                                 " {\"name\": \"lc\", \"class\": \"latency-critical\", \"gids\": [0]},"
                                                 " {\"name\": \"bulk1\", \"class\": \"normal\", \"gids\": [0]},"
                                                 " {\"name\": \"bulk2\", \"class\": \"normal\", \"gids\": [0]}]}",
                                              args),
                         0);
        lc_setup(lc, p, "lc");
        mm_setup(&b[0], p, "bulk1", d, len, x);
        mm_setup(&b[1], p, "bulk2", d, len, x);
        mm_start(&b[0]);
        mm_start(&b[1]);
}

#endif

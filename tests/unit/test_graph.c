/* Graph IR and executor on hand-built graphs with test operators (no registry, no model
 * files): topological order and cycles, freeing of intermediates, graph outputs written in
 * place or copied (inputs and initializers passed through, values listed twice), binding
 * checks, subgraphs reading values of the enclosing graph through the graph_run callback,
 * cost estimates; the importer's subgraphs and operator lookup (through its lookup hook, with
 * the test operators); and the GRAPH_RUN and GRAPH_RUN_OPT records of the SUBMIT format. */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "graph/steps.h"
#include "ops/runctx.h"
#include "proto/dtype.h"
#include "proto/errors.h"
#include "proto/submit.h"

/* ---- test operators ---- */

static int same_infer(const struct ops_def *def, struct ops_call *c, char *err, size_t errlen)
{
        c->out[0] = c->in[0];
        c->out[0].data = NULL;
        return 0;
}

/* Inc: y = x + 1 (float32). */
static int inc_run(const struct ops_def *def, const struct ops_call *c, char *err, size_t errlen)
{
        int64_t n = ops_tensor_numel(&c->in[0]);
        const float *x = c->in[0].data;
        float *y = c->out[0].data;

        for (int64_t i = 0; i < n; i++)
                y[i] = x[i] + 1.0f;
        return 0;
}

/* Mul2: y = a * b elementwise, same shapes. */
static int mul_run(const struct ops_def *def, const struct ops_call *c, char *err, size_t errlen)
{
        int64_t n = ops_tensor_numel(&c->in[0]);
        const float *a = c->in[0].data, *b = c->in[1].data;
        float *y = c->out[0].data;

        for (int64_t i = 0; i < n; i++)
                y[i] = a[i] * b[i];
        return 0;
}

static void cost_fn(const struct ops_def *def, const struct ops_call *c, uint64_t *flops,
                    uint64_t *bytes)
{
        *flops = (uint64_t)ops_tensor_numel(&c->out[0]);
        *bytes = *flops * 8;
}

/* Fails while running. */
static int fail_run(const struct ops_def *def, const struct ops_call *c, char *err, size_t errlen)
{
        snprintf(err, errlen, "deliberate failure");
        return -EIO;
}

/* Pick: an If. Input 0 a bool scalar; attributes then_branch / else_branch; the chosen
 * subgraph's single output is the node's output. infer runs the branch for its shape. */
static const void *pick_branch(const struct ops_call *c)
{
        const char *want = *(const uint8_t *)c->in[0].data ? "then_branch" : "else_branch";

        for (int i = 0; i < c->nattr; i++)
                if (strcmp(c->attr[i].name, want) == 0 && c->attr[i].type == OPS_ATTR_GRAPH)
                        return c->attr[i].graph;
        return NULL;
}

static int pick_infer(const struct ops_def *def, struct ops_call *c, char *err, size_t errlen)
{
        struct ops_tensor out[2];
        int n = 0, rc;

        if (!c->in[0].data || !c->graph_run) {
                snprintf(err, errlen, "Pick: needs its condition");
                return -EINVAL;
        }
        rc = c->graph_run(c->graph_ctx, pick_branch(c), 0, NULL, &n, out, 2, err, errlen);
        if (rc < 0)
                return rc;
        c->out[0] = out[0];
        c->out[0].data = NULL;
        for (int i = 0; i < n; i++)
                ops_buf_free(out[i].data);
        return 0;
}

static int pick_run(const struct ops_def *def, const struct ops_call *c, char *err, size_t errlen)
{
        struct ops_tensor out[2];
        int n = 0, rc;

        rc = c->graph_run(c->graph_ctx, pick_branch(c), 0, NULL, &n, out, 2, err, errlen);
        if (rc < 0)
                return rc;
        memcpy(c->out[0].data, out[0].data, (size_t)ops_tensor_numel(&out[0]) * sizeof(float));
        for (int i = 0; i < n; i++)
                ops_buf_free(out[i].data);
        return 0;
}

static const struct ops_def inc_def = { .name = "Inc", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
                                        .run = inc_run, .cost = cost_fn, .infer = same_infer };
static const struct ops_def mul_def = { .name = "Mul2", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
                                        .run = mul_run, .infer = same_infer };
static const struct ops_def fail_def = { .name = "Fail", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
                                         .run = fail_run, .infer = same_infer };
static const struct ops_def pick_def = { .name = "Pick", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
                                         .run = pick_run, .infer = pick_infer };

/* ---- building ---- */

static int val(struct graph *g, const char *name, int kind)
{
        int v = graph_add_value(g, name, kind, kind == GRAPH_VALUE_NODE ? 0 : PROTO_DTYPE_FLOAT32,
                                kind == GRAPH_VALUE_NODE ? -1 : 1, (int64_t[]){ 4 });
        ck_assert_int_ge(v, 0);
        return v;
}

/* A node of def reading ins (value names) and producing a new value out. */
static int add_node(struct graph *g, const struct ops_def *def, const char *name,
                    const char *in0, const char *in1, const char *out)
{
        int n = graph_add_node(g, name, def->name, "", def);
        struct graph_node *gn;
        int v;

        ck_assert_int_ge(n, 0);
        v = graph_find_value(g, out) >= 0 ? graph_find_value(g, out) : val(g, out, GRAPH_VALUE_NODE);
        gn = &g->nodes[n];
        gn->nin = in1 ? 2 : 1;
        gn->in = graph_alloc(g, sizeof(int) * 2);
        gn->out = graph_alloc(g, sizeof(int));
        gn->in[0] = graph_resolve(g, in0);
        gn->in[1] = in1 ? graph_resolve(g, in1) : -1;
        ck_assert_int_ge(gn->in[0], 0);
        gn->nout = 1;
        gn->out[0] = v;
        g->values[v].producer = n;
        return n;
}

static void set_io(struct graph *g, const char *const *ins, int nin, const char *const *outs,
                   int nout)
{
        g->inputs = graph_alloc(g, sizeof(int) * (size_t)(nin + 1));
        g->outputs = graph_alloc(g, sizeof(int) * (size_t)(nout + 1));
        g->output_decl = graph_alloc(g, sizeof(*g->output_decl) * (size_t)(nout + 1));
        for (int i = 0; i < nin; i++)
                g->inputs[g->ninputs++] = graph_find_value(g, ins[i]);
        for (int k = 0; k < nout; k++) {
                int v = graph_resolve(g, outs[k]);
                ck_assert_int_ge(v, 0);
                if (g->values[v].output < 0)
                        g->values[v].output = k;
                g->outputs[g->noutputs++] = v;
        }
}

static struct ops_tensor f32(float *data)
{
        struct ops_tensor t = { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 1, .dims = { 4 }, .data = data };
        return t;
}

static void finalize(struct graph *g)
{
        char err[256];
        ck_assert_msg(graph_finalize(g, err, sizeof(err)) == 0, "%s", err);
}

/* ---- tests ---- */

START_TEST(test_chain_out_of_order)
{
        struct graph *g = graph_new(NULL);
        float x[4] = { 1, 2, 3, 4 }, y[4] = { 0 }, z[4] = { 0 };
        struct ops_tensor in = f32(x), out[2] = { f32(y), f32(z) };
        char err[256];

        val(g, "x", GRAPH_VALUE_INPUT);
        val(g, "a", GRAPH_VALUE_NODE);
        val(g, "b", GRAPH_VALUE_NODE);
        /* Listed backwards: c = Inc(b), b = Inc(a), a = Inc(x); z = a * c */
        add_node(g, &inc_def, "third", "b", NULL, "c");
        add_node(g, &inc_def, "second", "a", NULL, "b");
        add_node(g, &inc_def, "first", "x", NULL, "a");
        add_node(g, &mul_def, "mul", "a", "c", "z");
        set_io(g, (const char *[]){ "x" }, 1, (const char *[]){ "c", "z" }, 2);
        finalize(g);
        ck_assert_int_eq(g->nodes[g->order[0]].name[0], 'f');
        ck_assert_int_eq(graph_exec(g, 1, &in, 2, out, err, sizeof(err)), 0);
        for (int i = 0; i < 4; i++) {
                ck_assert_float_eq(y[i], x[i] + 3);
                ck_assert_float_eq(z[i], (x[i] + 1) * (x[i] + 3));
        }
        int counted = -1;
        ck_assert_uint_gt(graph_estimate_ns(g, 1, &in, 1e9, 1e9, &counted), 0);
        ck_assert_int_eq(counted, 4);
        graph_free(g);
}
END_TEST

/* Steps (graph/steps.h): each node step waits for the producers of what it reads (subgraph
 * reads included), the last for every node; run step by step in any order the waits allow
 * (here: ready steps last-made first), a run gives graph_exec's results and frees what it
 * made; a failing step names its node. */
static struct graph *branchy(void);

static int step_of(const struct graph *g, const char *name)
{
        for (int k = 1; k <= g->nnodes; k++)
                if (strcmp(g->nodes[graph_step_node(g, k)].name, name) == 0)
                        return k;
        ck_abort_msg("no step runs %s", name);
        return -1;
}

static int waits_for(const struct graph_steps *gs, int from, int to)
{
        for (int j = gs->succ_start[from]; j < gs->succ_start[from + 1]; j++)
                if (gs->succ[j] == to)
                        return 1;
        return 0;
}

/* Run b's steps one at a time, newest ready first; the first failure's code. */
static int run_steps(struct graph_bind *b, const struct ops_tensor *host, char *err, size_t errlen)
{
        const struct graph_steps *gs = b->g->steps;
        int pending[64], ready[64], nready = 0, rc = 0;

        ck_assert_int_le(gs->nsteps, 64);
        memcpy(pending, gs->npred, sizeof(int) * (size_t)gs->nsteps);
        ready[nready++] = 0;
        while (nready && !rc) {
                int k = ready[--nready];
                rc = graph_run_step(b, k, host, err, errlen);
                if (rc)
                        break;
                graph_run_step_done(b, k);
                for (int j = gs->succ_start[k]; j < gs->succ_start[k + 1]; j++)
                        if (--pending[gs->succ[j]] == 0)
                                ready[nready++] = gs->succ[j];
        }
        return rc;
}

START_TEST(test_steps)
{
        struct graph *g = graph_new(NULL);
        float x[4] = { 1, 2, 3, 4 }, y[4] = { 0 }, z[4] = { 0 };
        struct ops_tensor t[3] = { f32(x), f32(y), f32(z) };
        char err[256];

        val(g, "x", GRAPH_VALUE_INPUT);
        add_node(g, &inc_def, "first", "x", NULL, "a");
        add_node(g, &inc_def, "second", "a", NULL, "b");
        add_node(g, &inc_def, "side", "a", NULL, "s");
        add_node(g, &inc_def, "third", "b", NULL, "c");
        add_node(g, &mul_def, "mul", "s", "c", "z");
        set_io(g, (const char *[]){ "x" }, 1, (const char *[]){ "c", "z" }, 2);
        finalize(g);
        ck_assert_int_eq(graph_steps_build(g, err, sizeof(err)), 0);
        const struct graph_steps *gs = g->steps;
        ck_assert_int_eq(gs->nsteps, 7);
        ck_assert(waits_for(gs, 0, step_of(g, "first")));
        ck_assert(waits_for(gs, step_of(g, "first"), step_of(g, "side")));
        ck_assert(waits_for(gs, step_of(g, "first"), step_of(g, "second")));
        ck_assert(!waits_for(gs, step_of(g, "side"), step_of(g, "second")));
        ck_assert(waits_for(gs, step_of(g, "side"), step_of(g, "mul")));
        ck_assert(waits_for(gs, step_of(g, "third"), step_of(g, "mul")));
        ck_assert_int_eq(gs->npred[6], 5);

        struct graph_bind b = { .g = g, .nin = 1, .nout = 2 };
        ck_assert_msg(run_steps(&b, t, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 4; i++) {
                ck_assert_float_eq(y[i], x[i] + 3);
                ck_assert_float_eq(z[i], (x[i] + 2) * (x[i] + 3));
        }
        graph_run_free(b.run);

        /* estimates per step: nodes on their engine or the AI CPU, the binding and last
         * steps on those of the first and last node */
        uint64_t cost[7 * OPS_ENGINE_COUNT];
        double rate[OPS_ENGINE_COUNT] = { 1e9, 1e9, 1e9, 1e9 };
        int cores[OPS_ENGINE_COUNT] = { 1, 1, 1, 1 };
        ck_assert_int_eq(graph_estimate_steps(g, 1, t, rate, cores, 1e9, cost), 0);
        ck_assert_uint_gt(cost[0 * OPS_ENGINE_COUNT + OPS_ENGINE_CUBE], 0);
        ck_assert_uint_eq(cost[0 * OPS_ENGINE_COUNT + OPS_ENGINE_DMA], 0);
        ck_assert_uint_gt(cost[6 * OPS_ENGINE_COUNT + OPS_ENGINE_AICPU], 0);
        ck_assert_uint_gt(cost[step_of(g, "first") * OPS_ENGINE_COUNT + OPS_ENGINE_AICPU], 0);
        graph_free(g);

        /* a subgraph's read of an outer value is a wait too */
        g = branchy();
        ck_assert_int_eq(graph_steps_build(g, err, sizeof(err)), 0);
        ck_assert(waits_for(g->steps, step_of(g, "a_node"), step_of(g, "pick")));
        graph_free(g);

        /* a failing step names its node; what the run made is freed with it */
        g = graph_new(NULL);
        val(g, "x", GRAPH_VALUE_INPUT);
        add_node(g, &inc_def, "ok", "x", NULL, "a");
        add_node(g, &fail_def, "broken", "a", NULL, "y");
        set_io(g, (const char *[]){ "x" }, 1, (const char *[]){ "y" }, 1);
        finalize(g);
        ck_assert_int_eq(graph_steps_build(g, err, sizeof(err)), 0);
        struct graph_bind fb = { .g = g, .nin = 1, .nout = 1 };
        ck_assert_int_ne(run_steps(&fb, t, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "broken"), "%s", err);
        graph_run_free(fb.run);
        graph_free(g);
}
END_TEST

START_TEST(test_cycle_named)
{
        struct graph *g = graph_new(NULL);
        char err[256];

        val(g, "x", GRAPH_VALUE_INPUT);
        val(g, "b", GRAPH_VALUE_NODE);
        add_node(g, &mul_def, "entry", "x", "b", "a");
        add_node(g, &inc_def, "back", "a", NULL, "b");
        add_node(g, &inc_def, "leaf", "b", NULL, "y");
        set_io(g, (const char *[]){ "x" }, 1, (const char *[]){ "y" }, 1);
        ck_assert_int_eq(graph_finalize(g, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "cycle") && (strstr(err, "'entry'") || strstr(err, "'back'")), "%s", err);
        graph_free(g);
}
END_TEST

START_TEST(test_passthrough_outputs)
{
        struct graph *g = graph_new(NULL);
        static const float wdata[4] = { 10, 20, 30, 40 };
        struct ops_tensor *w = graph_alloc(g, sizeof(*w));
        float x[4] = { 1, 2, 3, 4 }, o[4][4];
        struct ops_tensor in = f32(x), out[4] = { f32(o[0]), f32(o[1]), f32(o[2]), f32(o[3]) };
        char err[256];
        int v;

        *w = f32((float *)wdata);
        val(g, "x", GRAPH_VALUE_INPUT);
        v = val(g, "w", GRAPH_VALUE_INIT);
        g->values[v].tensor = w;
        add_node(g, &inc_def, "inc", "w", NULL, "y");
        /* the input itself, the initializer, a node output listed twice */
        set_io(g, (const char *[]){ "x" }, 1, (const char *[]){ "x", "w", "y", "y" }, 4);
        finalize(g);
        memset(o, 0, sizeof(o));
        ck_assert_int_eq(graph_exec(g, 1, &in, 4, out, err, sizeof(err)), 0);
        for (int i = 0; i < 4; i++) {
                ck_assert_float_eq(o[0][i], x[i]);
                ck_assert_float_eq(o[1][i], wdata[i]);
                ck_assert_float_eq(o[2][i], wdata[i] + 1);
                ck_assert_float_eq(o[3][i], wdata[i] + 1);
        }
        graph_free(g);
}
END_TEST

START_TEST(test_bindings_and_failures)
{
        struct graph *g = graph_new(NULL);
        float x[4] = { 0 }, y[8];
        struct ops_tensor in = f32(x), out = f32(y);
        char err[256];

        val(g, "x", GRAPH_VALUE_INPUT);
        add_node(g, &inc_def, "inc", "x", NULL, "mid");
        add_node(g, &inc_def, "inc2", "mid", NULL, "y");
        set_io(g, (const char *[]){ "x" }, 1, (const char *[]){ "y" }, 1);
        finalize(g);
        /* output bound with another shape */
        out.dims[0] = 8;
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &out, err, sizeof(err)), PROTO_E_SHAPE);
        ck_assert_msg(strstr(err, "output 'y'"), "%s", err);
        /* input of another shape than declared */
        out.dims[0] = 4;
        in.dims[0] = 3;
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &out, err, sizeof(err)), PROTO_E_SHAPE);
        ck_assert_msg(strstr(err, "input 'x'"), "%s", err);
        in.dims[0] = 4;
        in.dtype = PROTO_DTYPE_INT32;
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &out, err, sizeof(err)), PROTO_E_SHAPE);
        in.dtype = PROTO_DTYPE_FLOAT32;
        ck_assert_int_eq(graph_exec(g, 0, NULL, 1, &out, err, sizeof(err)), PROTO_E_INVALID);
        ck_assert_int_eq(graph_exec(g, 1, &in, 0, NULL, err, sizeof(err)), PROTO_E_INVALID);
        /* a kernel failing is an execution error naming the node */
        g->nodes[1].def = &fail_def;
        ck_assert_int_eq(graph_exec(g, 1, &in, 1, &out, err, sizeof(err)), PROTO_E_EXEC);
        ck_assert_msg(strstr(err, "node 'inc2'") && strstr(err, "deliberate"), "%s", err);
        graph_free(g);
}
END_TEST

/* main: a = Inc(x); r = Pick(c) { then: Inc(a)  else: Inc(Inc(a)) * a }; outputs r, a */
static struct graph *branchy(void)
{
        struct graph *g = graph_new(NULL), *t, *e;
        struct graph_node *pick;
        int n, v;

        val(g, "x", GRAPH_VALUE_INPUT);
        v = graph_add_value(g, "c", GRAPH_VALUE_INPUT, PROTO_DTYPE_BOOL, 0, NULL);
        ck_assert_int_ge(v, 0);
        add_node(g, &inc_def, "a_node", "x", NULL, "a");
        n = graph_add_node(g, "pick", "Pick", "", &pick_def);
        v = val(g, "r", GRAPH_VALUE_NODE);
        g->values[v].producer = n;

        t = graph_new(g);
        add_node(t, &inc_def, "then_inc", "a", NULL, "t_out"); /* "a" from the outer graph */
        set_io(t, NULL, 0, (const char *[]){ "t_out" }, 1);
        finalize(t);
        e = graph_new(g);
        add_node(e, &inc_def, "else_inc1", "a", NULL, "e1");
        add_node(e, &inc_def, "else_inc2", "e1", NULL, "e2");
        add_node(e, &mul_def, "else_mul", "e2", "a", "e_out");
        set_io(e, NULL, 0, (const char *[]){ "e_out" }, 1);
        finalize(e);

        pick = &g->nodes[n];
        pick->nin = 1;
        pick->in = graph_alloc(g, sizeof(int));
        pick->in[0] = graph_find_value(g, "c");
        pick->nout = 1;
        pick->out = graph_alloc(g, sizeof(int));
        pick->out[0] = v;
        pick->nattr = 2;
        pick->attr = graph_alloc(g, 2 * sizeof(*pick->attr));
        strcpy(pick->attr[0].name, "then_branch");
        pick->attr[0].type = OPS_ATTR_GRAPH;
        pick->attr[0].graph = t;
        strcpy(pick->attr[1].name, "else_branch");
        pick->attr[1].type = OPS_ATTR_GRAPH;
        pick->attr[1].graph = e;
        /* what the branches read of the main graph, the node reads */
        pick->nimplicit = 1;
        pick->implicit = graph_alloc(g, sizeof(int));
        pick->implicit[0] = graph_find_value(g, "a");
        set_io(g, (const char *[]){ "x", "c" }, 2, (const char *[]){ "r" }, 1);
        finalize(g);
        return g;
}

START_TEST(test_subgraphs_read_outer_values)
{
        struct graph *g = branchy();
        float x[4] = { 1, 2, 3, 4 }, r[4];
        uint8_t cond;
        struct ops_tensor in[2] = { f32(x), { .dtype = PROTO_DTYPE_BOOL, .ndim = 0, .data = &cond } };
        struct ops_tensor out = f32(r);
        char err[256];

        /* "a" is read by no node of the main graph but the Pick: its use is implicit. */
        ck_assert_int_eq(g->values[graph_find_value(g, "a")].uses, 1);
        cond = 1;
        ck_assert_msg(graph_exec(g, 2, in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 4; i++)
                ck_assert_float_eq(r[i], x[i] + 2);
        cond = 0;
        ck_assert_msg(graph_exec(g, 2, in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 4; i++)
                ck_assert_float_eq(r[i], (x[i] + 3) * (x[i] + 1));
        /* The estimate does not run subgraphs; Pick counts a launch. */
        int counted = -1;
        ck_assert_uint_gt(graph_estimate_ns(g, 2, in, 1e9, 1e9, &counted), 0);
        ck_assert_int_eq(counted, 1);
        graph_free(g);
}
END_TEST

START_TEST(test_value_table)
{
        struct graph *g = graph_new(NULL), *sub;
        char name[32];

        for (int i = 0; i < 1000; i++) {
                snprintf(name, sizeof(name), "v%d", i);
                ck_assert_int_eq(val(g, name, GRAPH_VALUE_INPUT), i);
        }
        ck_assert_int_eq(graph_add_value(g, "v17", GRAPH_VALUE_NODE, 0, -1, NULL), -EEXIST);
        ck_assert_int_eq(graph_find_value(g, "v999"), 999);
        ck_assert_int_eq(graph_find_value(g, "nope"), -1);
        sub = graph_new(g);
        int v = graph_resolve(sub, "v5");
        ck_assert_int_ge(v, 0);
        ck_assert_int_eq(sub->values[v].kind, GRAPH_VALUE_OUTER);
        ck_assert_int_eq(sub->values[v].outer, 5);
        ck_assert_int_eq(graph_resolve(sub, "v5"), v);
        ck_assert_int_eq(graph_resolve(sub, "missing"), -1);
        graph_free(sub);
        graph_free(g);
}
END_TEST

/* ---- importing with the test operators ---- */

static int seen_version; /* version asked for the node of domain com.test */

static const struct ops_def *test_lookup(void *ctx, const char *domain, const char *op, int version)
{
        if (domain && strcmp(domain, "com.test") == 0)
                seen_version = version;
        if (strcmp(op, "Inc") == 0)
                return &inc_def;
        if (strcmp(op, "Mul2") == 0)
                return &mul_def;
        if (strcmp(op, "If") == 0)
                return &pick_def;
        return NULL;
}

static void *keep[512];
static int nkeep;

static void *K(size_t n)
{
        void *p = calloc(1, n ? n : 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_lt(nkeep, 512);
        keep[nkeep++] = p;
        return p;
}

static void keep_free(void)
{
        while (nkeep)
                free(keep[--nkeep]);
}

static char **names(int n, ...)
{
        char **v = K(sizeof(char *) * (size_t)(n ? n : 1));
        va_list ap;

        va_start(ap, n);
        for (int i = 0; i < n; i++)
                v[i] = va_arg(ap, char *);
        va_end(ap);
        return v;
}

static Onnx__NodeProto *pnode(const char *op, const char *name, int nin, char **in, char *out)
{
        Onnx__NodeProto *n = K(sizeof(*n));

        onnx__node_proto__init(n);
        n->op_type = (char *)op;
        n->name = (char *)name;
        n->n_input = (size_t)nin;
        n->input = in;
        n->n_output = 1;
        n->output = names(1, out);
        return n;
}

static Onnx__ValueInfoProto *pvalue(const char *name, int dtype, int ndim)
{
        Onnx__ValueInfoProto *vi = K(sizeof(*vi));
        Onnx__TypeProto *tp = K(sizeof(*tp));
        Onnx__TypeProto__Tensor *tt = K(sizeof(*tt));
        Onnx__TensorShapeProto *sh = K(sizeof(*sh));

        onnx__value_info_proto__init(vi);
        onnx__type_proto__init(tp);
        onnx__type_proto__tensor__init(tt);
        onnx__tensor_shape_proto__init(sh);
        vi->name = (char *)name;
        vi->type = tp;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        tt->has_elem_type = 1;
        tt->elem_type = dtype;
        tt->shape = sh;
        sh->n_dim = (size_t)ndim;
        sh->dim = K(sizeof(*sh->dim) * 4);
        for (int i = 0; i < ndim; i++) {
                Onnx__TensorShapeProto__Dimension *d = K(sizeof(*d));
                onnx__tensor_shape_proto__dimension__init(d);
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = 4;
                sh->dim[i] = d;
        }
        return vi;
}

static Onnx__GraphProto *pgraph(int nnode, Onnx__NodeProto **nodes, int nout,
                                Onnx__ValueInfoProto **outs)
{
        Onnx__GraphProto *g = K(sizeof(*g));

        onnx__graph_proto__init(g);
        g->n_node = (size_t)nnode;
        g->node = nodes;
        g->n_output = (size_t)nout;
        g->output = outs;
        return g;
}

static Onnx__AttributeProto *pgraph_attr(const char *name, Onnx__GraphProto *g)
{
        Onnx__AttributeProto *a = K(sizeof(*a));

        onnx__attribute_proto__init(a);
        a->name = (char *)name;
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        a->g = g;
        return a;
}

/* main: a = Inc(x); r = If(c) { then: Mul2(a, w)  else: else_op(a) }, w an initializer. */
static uint8_t *if_model(const char *else_op, size_t *ret_len)
{
        static const float w[4] = { 10, 20, 30, 40 };
        Onnx__ModelProto *m = K(sizeof(*m));
        Onnx__OperatorSetIdProto *o = K(sizeof(*o)), *o2 = K(sizeof(*o2));
        Onnx__TensorProto *init = K(sizeof(*init));
        Onnx__NodeProto *ifn, *inc;
        Onnx__GraphProto *thn, *els, *g;
        uint8_t *buf;

        onnx__model_proto__init(m);
        onnx__operator_set_id_proto__init(o);
        onnx__operator_set_id_proto__init(o2);
        o->domain = (char *)"";
        o->has_version = 1;
        o->version = 13;
        o2->domain = (char *)"com.test";
        o2->has_version = 1;
        o2->version = 3;
        m->n_opset_import = 2;
        m->opset_import = (Onnx__OperatorSetIdProto **)names(2, (char *)o, (char *)o2);
        thn = pgraph(1, (Onnx__NodeProto **)names(1, pnode("Mul2", "then_mul", 2, names(2, "a", "w"), "t")),
                     1, (Onnx__ValueInfoProto **)names(1, pvalue("t", 1, 1)));
        els = pgraph(1, (Onnx__NodeProto **)names(1, pnode(else_op, "else_node", 1, names(1, "a"), "e")),
                     1, (Onnx__ValueInfoProto **)names(1, pvalue("e", 1, 1)));
        ifn = pnode("If", "branch", 1, names(1, "c"), "r");
        ifn->n_attribute = 2;
        ifn->attribute = (Onnx__AttributeProto **)names(2, (char *)pgraph_attr("then_branch", thn),
                                                        (char *)pgraph_attr("else_branch", els));
        inc = pnode("Inc", "inc", 1, names(1, "x"), "a");
        inc->domain = (char *)"com.test";
        /* the If first: its subgraphs read "a", which a later node defines */
        g = pgraph(2, (Onnx__NodeProto **)names(2, (char *)ifn, (char *)inc), 1,
                   (Onnx__ValueInfoProto **)names(1, pvalue("r", 1, 1)));
        g->n_input = 2;
        g->input = (Onnx__ValueInfoProto **)names(2, (char *)pvalue("x", 1, 1), (char *)pvalue("c", 9, 0));
        onnx__tensor_proto__init(init);
        init->name = (char *)"w";
        init->has_data_type = 1;
        init->data_type = 1;
        init->n_dims = 1;
        init->dims = K(sizeof(int64_t));
        init->dims[0] = 4;
        init->n_float_data = 4;
        init->float_data = (float *)w;
        g->n_initializer = 1;
        g->initializer = (Onnx__TensorProto **)names(1, (char *)init);
        m->graph = g;
        *ret_len = onnx__model_proto__get_packed_size(m);
        buf = malloc(*ret_len);
        ck_assert_ptr_nonnull(buf);
        onnx__model_proto__pack(m, buf);
        keep_free();
        return buf;
}

START_TEST(test_import_subgraphs)
{
        struct onnx_import_env env = { .lookup = test_lookup };
        struct graph *g;
        size_t len;
        uint8_t *bytes = if_model("Inc", &len);
        float x[4] = { 1, 2, 3, 4 }, r[4];
        uint8_t cond;
        struct ops_tensor in[2] = { f32(x), { .dtype = PROTO_DTYPE_BOOL, .ndim = 0, .data = &cond } };
        struct ops_tensor out = f32(r);
        char err[512];

        ck_assert_msg(onnx_import(bytes, len, &env, &g, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(seen_version, 3); /* the version imported for com.test */
        ck_assert_int_eq(g->ninputs, 2);
        ck_assert_int_eq(g->nnodes, 2);
        ck_assert_str_eq(g->nodes[g->order[0]].name, "inc");
        cond = 1;
        ck_assert_msg(graph_exec(g, 2, in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 4; i++)
                ck_assert_float_eq(r[i], (x[i] + 1) * 10 * (float)(i + 1));
        cond = 0;
        ck_assert_msg(graph_exec(g, 2, in, 1, &out, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 4; i++)
                ck_assert_float_eq(r[i], x[i] + 2);
        graph_free(g);
        free(bytes);

        /* An unknown operator inside a subgraph is found before anything else. */
        bytes = if_model("Bogus", &len);
        ck_assert_int_eq(onnx_import(bytes, len, &env, &g, err, sizeof(err)), PROTO_E_UNSUPPORTED);
        ck_assert_msg(strstr(err, "node 'else_node' (Bogus): unsupported operator"), "%s", err);
        free(bytes);
        /* Without the hook the registry decides (it has no Inc). */
        bytes = if_model("Inc", &len);
        ck_assert_int_eq(onnx_import(bytes, len, NULL, &g, err, sizeof(err)), PROTO_E_UNSUPPORTED);
        ck_assert_msg(strstr(err, "node 'inc' (com.test.Inc): unsupported operator"), "%s", err);
        free(bytes);
}
END_TEST

/* Initializers of every element type in the typed fields of TensorProto (and one in
 * raw_data), passed straight through as the outputs of a graph without nodes. */
START_TEST(test_import_typed_tensors)
{
        static const int dtypes[] = { PROTO_DTYPE_FLOAT32, PROTO_DTYPE_FLOAT64, PROTO_DTYPE_INT64,
                                      PROTO_DTYPE_UINT64, PROTO_DTYPE_UINT32, PROTO_DTYPE_INT32,
                                      PROTO_DTYPE_INT16, PROTO_DTYPE_UINT16, PROTO_DTYPE_FLOAT16,
                                      PROTO_DTYPE_BFLOAT16, PROTO_DTYPE_INT8, PROTO_DTYPE_UINT8,
                                      PROTO_DTYPE_BOOL, PROTO_DTYPE_INT32 /* raw */ };
        enum { NT = sizeof(dtypes) / sizeof(dtypes[0]) };
        static float fv[3] = { 1.5f, -2, 3 };
        static double dv[3] = { 1.25, -2, 1e300 };
        static int64_t lv[3] = { -1, 1ll << 40, 7 };
        static uint64_t uv[3] = { 1, 1ull << 63, 0xffffffffull };
        static int32_t iv[3] = { -3, 0x3c00, 1 }; /* 0x3c00: 1.0 in float16 */
        static int32_t raw[3] = { 5, -6, 7 };
        Onnx__ModelProto *m = K(sizeof(*m));
        Onnx__OperatorSetIdProto *o = K(sizeof(*o));
        Onnx__GraphProto *g = pgraph(0, NULL, 0, K(sizeof(void *) * NT));
        struct ops_tensor out[NT];
        uint8_t got[NT][32], want[NT][32];
        struct graph *gr;
        char err[256], name[NT][16];
        size_t len;

        onnx__model_proto__init(m);
        onnx__operator_set_id_proto__init(o);
        o->has_version = 1;
        o->version = 13;
        m->n_opset_import = 1;
        m->opset_import = (Onnx__OperatorSetIdProto **)names(1, (char *)o);
        m->graph = g;
        g->initializer = K(sizeof(void *) * NT);
        memset(want, 0, sizeof(want));
        for (int k = 0; k < NT; k++) {
                Onnx__TensorProto *t = K(sizeof(*t));
                int dt = dtypes[k];
                size_t es = proto_dtype_size(dt);
                onnx__tensor_proto__init(t);
                snprintf(name[k], sizeof(name[k]), "t%d", k);
                t->name = name[k];
                t->has_data_type = 1;
                t->data_type = dt;
                t->n_dims = 1;
                t->dims = K(sizeof(int64_t));
                t->dims[0] = 3;
                for (int i = 0; i < 3; i++) {
                        uint8_t *w = want[k] + i * es;
                        switch (dt) {
                        case PROTO_DTYPE_FLOAT32: memcpy(w, &fv[i], 4); break;
                        case PROTO_DTYPE_FLOAT64: memcpy(w, &dv[i], 8); break;
                        case PROTO_DTYPE_INT64: memcpy(w, &lv[i], 8); break;
                        case PROTO_DTYPE_UINT64: memcpy(w, &uv[i], 8); break;
                        case PROTO_DTYPE_UINT32: { uint32_t u = (uint32_t)uv[i]; memcpy(w, &u, 4); break; }
                        case PROTO_DTYPE_INT32: memcpy(w, k == NT - 1 ? &raw[i] : &iv[i], 4); break;
                        case PROTO_DTYPE_INT16: case PROTO_DTYPE_UINT16:
                        case PROTO_DTYPE_FLOAT16: case PROTO_DTYPE_BFLOAT16: {
                                uint16_t h = (uint16_t)iv[i];
                                memcpy(w, &h, 2);
                                break;
                        }
                        case PROTO_DTYPE_BOOL: *w = iv[i] != 0; break;
                        default: *w = (uint8_t)iv[i]; break;
                        }
                }
                if (k == NT - 1) {
                        t->has_raw_data = 1;
                        t->raw_data.len = sizeof(raw);
                        t->raw_data.data = (uint8_t *)raw;
                } else if (dt == PROTO_DTYPE_FLOAT32) {
                        t->n_float_data = 3;
                        t->float_data = fv;
                } else if (dt == PROTO_DTYPE_FLOAT64) {
                        t->n_double_data = 3;
                        t->double_data = dv;
                } else if (dt == PROTO_DTYPE_INT64) {
                        t->n_int64_data = 3;
                        t->int64_data = lv;
                } else if (dt == PROTO_DTYPE_UINT64 || dt == PROTO_DTYPE_UINT32) {
                        t->n_uint64_data = 3;
                        t->uint64_data = uv;
                } else {
                        t->n_int32_data = 3;
                        t->int32_data = iv;
                }
                g->initializer[g->n_initializer++] = t;
                g->output[g->n_output++] = pvalue(name[k], dt, 1);
                g->output[k]->type->tensor_type->shape->dim[0]->dim_value = 3;
                out[k] = (struct ops_tensor){ .dtype = dt, .ndim = 1, .dims = { 3 }, .data = got[k] };
        }
        len = onnx__model_proto__get_packed_size(m);
        uint8_t *bytes = malloc(len);
        ck_assert_ptr_nonnull(bytes);
        onnx__model_proto__pack(m, bytes);
        keep_free();
        ck_assert_msg(onnx_import(bytes, len, NULL, &gr, err, sizeof(err)) == 0, "%s", err);
        free(bytes);
        ck_assert_int_eq(gr->ninputs, 0);
        memset(got, 0xee, sizeof(got));
        ck_assert_msg(graph_exec(gr, 0, NULL, NT, out, err, sizeof(err)) == 0, "%s", err);
        for (int k = 0; k < NT; k++)
                ck_assert_msg(memcmp(got[k], want[k], 3 * proto_dtype_size(dtypes[k])) == 0,
                              "initializer %d (dtype %d) decoded wrongly", k, dtypes[k]);
        graph_free(gr);
}
END_TEST

START_TEST(test_graph_run_record)
{
        static struct proto_rec r, d;
        uint8_t buf[16 + 24 + 80 * PROTO_REC_MAX_GRAPH_TENSORS + 8];
        size_t pos = 0, size;
        char err[128];

        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_GRAPH_RUN;
        r.seq = 9;
        r.stream = 3;
        r.graph.graph = 0x100005;
        r.graph.nin = 40;
        r.graph.nout = 24;
        for (int i = 0; i < 64; i++) {
                r.graph.t[i].buf = (uint32_t)i + 1;
                r.graph.t[i].dtype = PROTO_DTYPE_FLOAT16;
                r.graph.t[i].ndim = 2;
                r.graph.t[i].offset = (uint64_t)i * 64;
                r.graph.t[i].dims[0] = i;
                r.graph.t[i].dims[1] = -i;
        }
        size = proto_rec_size(&r);
        ck_assert_uint_eq(size, 24 + 16 + 80 * 64);
        ck_assert_uint_eq(proto_rec_encode(&r, buf), size);
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), 1);
        ck_assert_uint_eq(pos, size);
        ck_assert_uint_eq(d.graph.graph, r.graph.graph);
        ck_assert_uint_eq(d.graph.nin, 40);
        ck_assert_uint_eq(d.graph.nout, 24);
        for (int i = 0; i < 64; i++) {
                ck_assert_uint_eq(d.graph.t[i].buf, r.graph.t[i].buf);
                ck_assert_uint_eq(d.graph.t[i].offset, r.graph.t[i].offset);
                ck_assert_int_eq(d.graph.t[i].dims[1], -i);
        }
        /* reserved bytes */
        buf[24 + 9] = 1;
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        buf[24 + 9] = 0;
        /* counts that do not match the length, and more than 64 tensors */
        buf[24 + 4] = 41;
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        r.graph.nin = 41;
        ck_assert_uint_eq(proto_rec_size(&r), 0);
}
END_TEST

/* GRAPH_RUN_OPT: options round-trip; a tag that is not printable ASCII padded with NULs, and
 * reserved bytes, make the record malformed. */
START_TEST(test_graph_run_opt_record)
{
        static struct proto_rec r, d;
        uint8_t buf[24 + 64 + 80 * 3];
        size_t pos = 0, size;
        char err[128];

        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_GRAPH_RUN_OPT;
        r.seq = 77;
        r.stream = 2;
        r.graph.graph = 5;
        r.graph.nin = 2;
        r.graph.nout = 1;
        r.graph.flags = PROTO_RUN_FLEX_OUTPUTS;
        r.graph.deadline_us = 123456;
        snprintf(r.graph.tag, sizeof(r.graph.tag), "%s", "0123456789abcdef0123456789abcdef");
        for (int i = 0; i < 3; i++) {
                r.graph.t[i].buf = (uint32_t)i + 7;
                r.graph.t[i].dtype = PROTO_DTYPE_FLOAT32;
                r.graph.t[i].ndim = 1;
                r.graph.t[i].dims[0] = 10 + i;
        }
        size = proto_rec_size(&r);
        ck_assert_uint_eq(size, sizeof(buf));
        ck_assert_uint_eq(proto_rec_encode(&r, buf), size);
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), 1);
        ck_assert_uint_eq(d.graph.flags, PROTO_RUN_FLEX_OUTPUTS);
        ck_assert_uint_eq(d.graph.deadline_us, 123456);
        ck_assert_str_eq(d.graph.tag, r.graph.tag); /* all 32 bytes, terminated */
        ck_assert_int_eq(d.graph.t[2].dims[0], 12);
        ck_assert_uint_eq(d.graph.t[1].buf, 8);
        /* a control character, and a byte after the padding starts */
        buf[24 + 24 + 3] = '\n';
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "tag"), "%s", err);
        buf[24 + 24 + 3] = 0;
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        buf[24 + 24 + 3] = '3';
        buf[24 + 60] = 1; /* reserved */
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        buf[24 + 60] = 0;
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(buf, size, &pos, &d, err, sizeof(err)), 1);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("graph");
        TCase *tc = tcase_create("graph");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_chain_out_of_order);
        tcase_add_test(tc, test_steps);
        tcase_add_test(tc, test_cycle_named);
        tcase_add_test(tc, test_passthrough_outputs);
        tcase_add_test(tc, test_bindings_and_failures);
        tcase_add_test(tc, test_subgraphs_read_outer_values);
        tcase_add_test(tc, test_value_table);
        tcase_add_test(tc, test_import_subgraphs);
        tcase_add_test(tc, test_import_typed_tensors);
        tcase_add_test(tc, test_graph_run_record);
        tcase_add_test(tc, test_graph_run_opt_record);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

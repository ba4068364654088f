/* Graph executor (see exec.h). A run is a frame: one slot per value of the graph holding
 * the tensor once it is available and, for tensors the run allocated, the memory to free.
 * Nodes run in the graph's topological order; each node's inputs lose a use when it has run
 * and the run frees an intermediate at its last use, so peak memory follows the live values
 * rather than the whole graph. Subgraph frames point at their parent frame, where values of
 * the enclosing graph are read.
 *
 * Runs obey the run context the worker installed (ops/runctx.h): the context is checked
 * before every node, every intermediate is an ops_buf charged to the run's byte budget, and
 * a node that fails because the run was cancelled, ran past its deadline or its trip cap, or
 * went over budget fails the run with that code (CANCELLED, LIMIT, QUOTA) instead of EXEC. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cost.h"
#include "proto/dtype.h"
#include "proto/errors.h"
#include "ops/blas.h"
#include "ops/control.h"
#include "ops/runctx.h"
#include "ops/strings.h"
#include "compile.h"
#include "exec.h"
#include "split.h"
#include "steps.h"
#include "util/err.h"
#include "util/spin.h"

struct slot {
        struct ops_tensor t; /* dtype 0 while the value is not available */
        void *owned;         /* memory of t that this run allocated */
        int uses_left;
};

struct frame {
        const struct graph *g;
        const struct frame *parent;
        struct slot *slots;
        const struct ops_tensor *bound; /* the caller's outputs (the model's graph only) */
        int nbound;
        int flex; /* bound outputs are capacities (GRAPH_RUN_FLEX) */
        /* The run's arena when the graph has a memory plan (compile.h): planned
         * intermediates live at their offsets in it instead of buffers of their own. */
        char *arena;
        /* A run scheduled as steps (steps.h): its steps may run at the same time on several
         * workers, so the uses of a node's inputs are counted down by graph_run_step_done on
         * the loop thread once the step is back, not by the step itself. */
        int deferred;
};

/* A node step split into parts (split.h) that run at the same time: the first part to
 * start sets the node up (inputs, output shapes and memory, the value table) once, under the
 * run's lock; every part then runs the kernel on its slice of that call. */
struct node_prep {
        int rc;
        char err[256];
        struct ops_call call;
        struct graph_split split;
};

struct graph_run {
        struct frame f;
        int nin, nout;
        struct ops_tensor t[GRAPH_MAX_IO]; /* the caller's tensors, host views; STRING
                                            * inputs decoded (dmem) */
        /* The run's strings, shared by its steps on whichever workers run them, and the
         * element arrays of its decoded STRING inputs. */
        struct ops_strpool pool;
        void *dmem[GRAPH_MAX_IO];
        spin_lock_t mu;                    /* guards prep[]: the parts of a step arrive together,
                                            * and a sleeping one would wake up late */
        struct node_prep **prep;           /* per step, while its parts run */
};

/* "[2,?,3]" ('?' for an undeclared extent), "[]" for a scalar, "[...]" for an unknown rank. */
static const char *shape_str(int ndim, const int64_t *dims, char *buf, size_t len)
{
        size_t off;

        if (ndim < 0 || ndim > OPS_MAX_DIMS) {
                snprintf(buf, len, "[...]");
                return buf;
        }
        off = (size_t)snprintf(buf, len, "[");
        for (int i = 0; i < ndim && off < len; i++) {
                if (dims[i] < 0)
                        off += (size_t)snprintf(buf + off, len - off, "%s?", i ? "," : "");
                else
                        off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? "," : "",
                                                (long long)dims[i]);
        }
        if (off < len)
                snprintf(buf + off, len - off, "]");
        return buf;
}

static const char *dtype_str(int dtype, char *buf, size_t len)
{
        const char *n = proto_dtype_name(dtype);

        if (n)
                snprintf(buf, len, "%s", n);
        else
                snprintf(buf, len, "dtype %d", dtype);
        return buf;
}

/* Bytes of t, or -1 when its rank, extents or element type make no valid tensor. */
static int64_t tensor_bytes(const struct ops_tensor *t)
{
        size_t esize = proto_dtype_size(t->dtype);
        int64_t n = ops_tensor_numel(t), bytes;

        if (!esize || n < 0 || __builtin_mul_overflow(n, (int64_t)esize, &bytes))
                return -1;
        return bytes;
}

static int same_shape(const struct ops_tensor *a, const struct ops_tensor *b)
{
        if (a->dtype != b->dtype || a->ndim != b->ndim)
                return 0;
        for (int d = 0; d < a->ndim; d++)
                if (a->dims[d] != b->dims[d])
                        return 0;
        return 1;
}

/* A computed output against the tensor the caller bound for it. */
static int check_bound(const char *name, const struct ops_tensor *got,
                       const struct ops_tensor *bound, char *err, size_t errlen)
{
        char d1[24], d2[24], s1[192], s2[192];

        if (same_shape(got, bound))
                return 0;
        return err_set(err, errlen, PROTO_E_SHAPE, "output '%s' is %s %s but bound as %s %s", name,
                    dtype_str(got->dtype, d1, sizeof(d1)), shape_str(got->ndim, got->dims, s1, sizeof(s1)),
                    dtype_str(bound->dtype, d2, sizeof(d2)),
                    shape_str(bound->ndim, bound->dims, s2, sizeof(s2)));
}

/* A flexible output: any shape of the bound dtype whose bytes fit in the bound tensor's. */
static int check_fits(const char *name, const struct ops_tensor *got,
                      const struct ops_tensor *bound, char *err, size_t errlen)
{
        char d1[24], d2[24], s1[192];
        int64_t need = tensor_bytes(got), have = tensor_bytes(bound);

        if (got->dtype != bound->dtype)
                return err_set(err, errlen, PROTO_E_SHAPE, "output '%s' is %s %s but bound as %s", name,
                               dtype_str(got->dtype, d1, sizeof(d1)),
                               shape_str(got->ndim, got->dims, s1, sizeof(s1)),
                               dtype_str(bound->dtype, d2, sizeof(d2)));
        if (need < 0 || need > have)
                return err_set(err, errlen, PROTO_E_SHAPE,
                               "output '%s' is %s %s (%lld bytes) but only %lld bytes are bound for it",
                               name, dtype_str(got->dtype, d1, sizeof(d1)),
                               shape_str(got->ndim, got->dims, s1, sizeof(s1)), (long long)need,
                               (long long)have);
        return 0;
}

int graph_check_inputs(const struct graph *g, int nin, const struct ops_tensor *in,
                       char *err, size_t errlen)
{
        char d1[24], d2[24], s1[192], s2[192];

        if (nin != g->ninputs)
                return err_set(err, errlen, PROTO_E_INVALID, "the graph has %d input%s, %d bound",
                            g->ninputs, g->ninputs == 1 ? "" : "s", nin);
        for (int i = 0; i < nin; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                const struct ops_tensor *t = &in[i];
                int ok = t->ndim >= 0 && t->ndim <= OPS_MAX_DIMS;

                if (v->dtype && t->dtype != v->dtype)
                        return err_set(err, errlen, PROTO_E_SHAPE, "input '%s' is %s but bound as %s",
                                    v->name, dtype_str(v->dtype, d1, sizeof(d1)),
                                    dtype_str(t->dtype, d2, sizeof(d2)));
                if (ok && v->ndim >= 0)
                        ok = t->ndim == v->ndim;
                for (int d = 0; ok && v->ndim >= 0 && d < v->ndim; d++)
                        ok = v->dims[d] < 0 || v->dims[d] == t->dims[d];
                if (!ok)
                        return err_set(err, errlen, PROTO_E_SHAPE, "input '%s' has shape %s but is bound as %s",
                                    v->name, shape_str(v->ndim, v->dims, s1, sizeof(s1)),
                                    shape_str(t->ndim, t->dims, s2, sizeof(s2)));
        }
        return 0;
}

static void frame_release(struct frame *f)
{
        if (!f->slots)
                return;
        for (int v = 0; v < f->g->nvalues; v++)
                ops_buf_free(f->slots[v].owned);
        free(f->slots);
        f->slots = NULL;
        ops_buf_free(f->arena);
        f->arena = NULL;
}

/* Slots for g: inputs, initializers and outer values available, the rest pending. */
static int frame_init(struct frame *f, const struct graph *g, const struct frame *parent,
                      int nin, const struct ops_tensor *in, char *err, size_t errlen)
{
        memset(f, 0, sizeof(*f));
        f->g = g;
        f->parent = parent;
        f->slots = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof(*f->slots));
        if (!f->slots)
                return err_set(err, errlen, PROTO_E_EXEC, "out of memory for a graph run");
        for (int v = 0; v < g->nvalues; v++) {
                const struct graph_value *gv = &g->values[v];
                struct slot *s = &f->slots[v];
                s->uses_left = gv->uses;
                if (gv->kind == GRAPH_VALUE_INIT)
                        s->t = *gv->tensor;
                else if (gv->kind == GRAPH_VALUE_OUTER) {
                        if (!parent || !parent->slots[gv->outer].t.dtype) {
                                frame_release(f);
                                return err_set(err, errlen, PROTO_E_EXEC,
                                            "value '%s' of the enclosing graph is not available", gv->name);
                        }
                        s->t = parent->slots[gv->outer].t;
                }
        }
        for (int i = 0; i < nin && i < g->ninputs; i++) {
                struct slot *s = &f->slots[g->inputs[i]];
                /* An input that is also an initializer's name keeps the initializer. */
                if (g->values[g->inputs[i]].kind == GRAPH_VALUE_INPUT)
                        s->t = in[i];
        }
        return 0;
}

/* The value's last reader has run: free what the run allocated for it, unless it is an
 * output of this graph (those stay until the end). */
static void slot_use_done(struct frame *f, int v)
{
        struct slot *s = &f->slots[v];

        if (--s->uses_left > 0 || f->g->values[v].output >= 0 || !s->owned)
                return;
        ops_buf_free(s->owned);
        s->owned = NULL;
        s->t.data = NULL;
}

static int subgraph_run(void *graph_ctx, const void *graph, int nin,
                        const struct ops_tensor *in, int *ret_nout, struct ops_tensor *out,
                        int max_out, char *err, size_t errlen);

/* The code a node fails with: the run's stop reason when one was recorded (cancelled, past
 * the deadline or a cap, over budget), else what the failing step calls for. */
static int node_code(int otherwise)
{
        int code = ops_runctx_code();

        return code ? code : otherwise;
}

/* Operators that may see STRING tensors, and at which inputs: they copy the element
 * pointers (8 bytes, by element size, never read as numbers), or read and make strings
 * through ops/strings.h. Every other kernel would take the pointers for numbers (and one
 * that reads them as data could be led anywhere), so a STRING value reaching it, or reaching
 * a listed operator at an input it reads as numbers (indices, shapes, a condition), fails
 * the node instead. in: bit i, input i may be a string (bit 31: every input). Outputs are
 * free for listed operators: their infers derive them from the inputs or attributes. */
struct string_op {
        const char *name;
        uint32_t in;
};

#define STR_IN_ALL (1u << 31)

static const struct string_op string_ops[] = {
        { "Cast", 1 },           { "CastLike", 3 },      { "StringNormalizer", 1 },
        { "Identity", 1 },       { "Constant", 0 },      { "Reshape", 1 },
        { "Squeeze", 1 },        { "Unsqueeze", 1 },     { "Flatten", 1 },
        { "Shape", 1 },          { "Size", 1 },          { "Gather", 1 },
        { "GatherElements", 1 }, { "Concat", STR_IN_ALL }, { "Slice", 1 },
        { "Split", 1 },          { "Transpose", 1 },     { "Expand", 1 },
        { "Tile", 1 },           { "Where", 6 },         { "Equal", 3 },
        { "TfIdfVectorizer", 1 }, { NULL, 0 },
};

/* 0 when the call's strings may reach op, else an error naming the node (label). */
static int strings_check(const char *label, const char *op, const struct ops_call *call,
                         char *err, size_t errlen)
{
        for (int k = 0; string_ops[k].name; k++) {
                uint32_t m = string_ops[k].in;
                if (strcmp(op, string_ops[k].name) != 0)
                        continue;
                for (int i = 0; i < call->nin; i++)
                        if (call->in[i].dtype == PROTO_DTYPE_STRING && !(m & STR_IN_ALL) &&
                            (i >= 31 || !(m & (1u << i))))
                                return err_set(err, errlen, PROTO_E_UNSUPPORTED,
                                               "%s: string tensors are not supported by %s at input %d",
                                               label, op, i);
                return 0;
        }
        return err_set(err, errlen, PROTO_E_UNSUPPORTED, "%s: string tensors are not supported by %s",
                       label, op);
}

static int has_strings(const struct ops_call *call)
{
        for (int i = 0; i < call->nin; i++)
                if (call->in[i].dtype == PROTO_DTYPE_STRING)
                        return 1;
        for (int j = 0; j < call->nout; j++)
                if (call->out[j].dtype == PROTO_DTYPE_STRING)
                        return 1;
        return 0;
}

/* The first half of a node: its inputs from the value table, its outputs' shapes, and
 * where they go (a graph output, the arena, or memory of their own, returned in mem[]). */
static int node_begin(struct frame *f, int n, struct ops_call *call, void **mem,
                      const char *label, char *err, size_t errlen)
{
        const struct graph *g = f->g;
        const struct graph_node *gn = &g->nodes[n];
        const struct ops_def *def = gn->def;
        char msg[512];
        int rc = 0;

        memset(call, 0, sizeof(*call));
        msg[0] = 0;
        rc = ops_runctx_check(msg, sizeof(msg));
        if (rc)
                return err_set(err, errlen, rc, "%s: %s", label, msg);
        call->nin = gn->nin;
        for (int i = 0; i < gn->nin; i++) {
                int v = gn->in[i];
                if (v < 0)
                        continue; /* omitted optional input: dtype 0 */
                if (!f->slots[v].t.dtype || (!f->slots[v].t.data && tensor_bytes(&f->slots[v].t) > 0))
                        return err_set(err, errlen, PROTO_E_EXEC, "%s: input '%s' is not available",
                                    label, g->values[v].name);
                call->in[i] = f->slots[v].t;
                /* Sequences and empty optionals are bytes only their operators can read. */
                if ((call->in[i].dtype == PROTO_DTYPE_SEQUENCE ||
                     call->in[i].dtype == PROTO_DTYPE_OPTIONAL_NONE) &&
                    !(def->flags & OPS_FLAG_VALUES))
                        return err_set(err, errlen, PROTO_E_SHAPE, "%s: input '%s' is %s, not a tensor",
                                       label, g->values[v].name,
                                       call->in[i].dtype == PROTO_DTYPE_SEQUENCE ? "a sequence"
                                                                                 : "an empty optional");
        }
        /* before infer too: some infers read their inputs' data */
        if (has_strings(call) && (rc = strings_check(label, def->name, call, err, errlen)))
                return rc;
        call->nout = gn->nout;
        call->nattr = gn->nattr;
        if (gn->nattr)
                memcpy(call->attr, gn->attr, sizeof(call->attr[0]) * (size_t)gn->nattr);
        call->opset = g->opset;
        call->graph_run = subgraph_run;
        call->graph_ctx = f;
        msg[0] = 0;
        if (ops_infer(def, call, msg, sizeof(msg)) < 0) {
                /* control-flow operators run their subgraphs here */
                return err_set(err, errlen, node_code(PROTO_E_SHAPE), "%s: %s", label,
                               msg[0] ? msg : "shape inference failed");
        }
        if (has_strings(call) && (rc = strings_check(label, def->name, call, err, errlen)))
                return rc;
        for (int j = 0; j < gn->nout; j++) {
                struct ops_tensor *o = &call->out[j];
                int v = gn->out[j];
                int64_t bytes;

                if (!o->dtype) {
                        if (v < 0)
                                continue;
                        return err_set(err, errlen, PROTO_E_EXEC, "%s: output '%s' was not inferred",
                                       label, g->values[v].name);
                }
                bytes = tensor_bytes(o);
                if (bytes < 0) {
                        char d[24], sh[192];
                        return err_set(err, errlen, PROTO_E_SHAPE, "%s: output %d is %s %s, not a valid tensor",
                                       label, j, dtype_str(o->dtype, d, sizeof(d)),
                                       shape_str(o->ndim, o->dims, sh, sizeof(sh)));
                }
                /* A graph output goes straight into the caller's tensor, but for strings,
                 * which are encoded there once the run is over. Strings never take a
                 * planned place in the arena either: their buffer starts zeroed (empty
                 * strings), never with stale bytes a kernel could take for pointers. */
                if (o->dtype == PROTO_DTYPE_STRING) {
                        msg[0] = 0;
                        mem[j] = ops_buf_alloc0((uint64_t)bytes, msg, sizeof(msg));
                        if (!mem[j])
                                return err_set(err, errlen, node_code(PROTO_E_EXEC), "%s: output '%s': %s",
                                               label, v >= 0 ? g->values[v].name : "(unused)", msg);
                        o->data = mem[j];
                        continue;
                }
                if (v >= 0 && f->bound && g->values[v].output >= 0 && g->values[v].output < f->nbound) {
                        const struct ops_tensor *b = &f->bound[g->values[v].output];
                        rc = f->flex ? check_fits(g->values[v].name, o, b, err, errlen)
                                     : check_bound(g->values[v].name, o, b, err, errlen);
                        if (rc)
                                return rc;
                        o->data = b->data;
                        continue;
                }
                /* A planned intermediate: its bytes in the arena, when the run's shape
                 * fits what the plan gave it. */
                if (v >= 0 && f->arena && v < g->plan->nvalues && g->plan->offset[v] >= 0 &&
                    bytes <= g->plan->size[v]) {
                        o->data = f->arena + g->plan->offset[v];
                        continue;
                }
                msg[0] = 0;
                mem[j] = ops_buf_alloc((uint64_t)bytes, msg, sizeof(msg));
                if (!mem[j])
                        return err_set(err, errlen, node_code(PROTO_E_EXEC), "%s: output '%s': %s", label,
                                       v >= 0 ? g->values[v].name : "(unused)", msg);
                o->data = mem[j];
        }
        return 0;
}

/* The node's kernel on call (the whole node, or a part of it). */
static int node_kernel(const struct graph *g, const struct graph_node *gn, const struct ops_call *call,
                       const char *label, char *err, size_t errlen)
{
        int forced = graph_accumulate_variant(g->accumulate), acc = forced >= 0;
        char msg[512];
        int rc;

        msg[0] = 0;
        /* a BatchNormalization folded under float64 or mixed accumulation: on the model's
         * filters and the factors in float64, where that path takes the convolution */
        rc = acc && graph_bn_affine_of(call)
                     ? graph_conv_acc_rows(call, forced == OPS_SGEMM_MIXED, 0, 0, msg, sizeof(msg))
                     : 1;
        /* a convolution on filters packed at load: straight from input to output, its
         * epilogue included, where the direct path takes it */
        if (rc > 0 &&
            (acc || !gn->pconv || (rc = graph_conv_direct_rows(gn->pconv, call, 0, 0, msg, sizeof(msg))) > 0)) {
                /* the kernel variant tuning chose for this node (compile-tune.c); every node
                 * of a graph loaded to accumulate in float64 or mixed runs that variant */
                rc = ops_run_variant(gn->def, call,
                                     acc ? forced : gn->variant ? gn->variant - 1 : OPS_SGEMM_AUTO,
                                     gn->packed, acc ? NULL : gn->pconv, msg, sizeof(msg));
        }
        if (rc < 0)
                return err_set(err, errlen, node_code(PROTO_E_EXEC), "%s: %s", label,
                               msg[0] ? msg : "kernel failed");
        /* Shared copy loops stop early without an error of their own when the run is
         * cancelled or past its deadline; the stop code they recorded fails the node. */
        rc = ops_runctx_code();
        if (rc)
                return err_set(err, errlen, rc, "%s: %s", label,
                               rc == PROTO_E_CANCELLED ? "cancelled while running"
                               : rc == PROTO_E_QUOTA   ? "intermediates over the memory budget"
                                                       : "run exceeded its time limit (tenant max_run_ms)");
        return 0;
}

/* The node's outputs into the value table (they own mem[]); free_unused: outputs nobody
 * reads are freed at once (not while parts of the node may still write them). */
static void node_commit(struct frame *f, int n, const struct ops_call *call, void **mem, int free_unused)
{
        const struct graph *g = f->g;
        const struct graph_node *gn = &g->nodes[n];

        for (int j = 0; j < gn->nout; j++) {
                int v = gn->out[j];
                if (v < 0)
                        continue; /* an output the model does not use: freed by the caller */
                f->slots[v].t = call->out[j];
                f->slots[v].owned = mem[j];
                mem[j] = NULL;
                if (free_unused && f->slots[v].uses_left == 0 && g->values[v].output < 0) {
                        ops_buf_free(f->slots[v].owned);
                        f->slots[v].owned = NULL;
                        f->slots[v].t.data = NULL;
                }
        }
}

static int run_node(struct frame *f, int n, char *err, size_t errlen)
{
        const struct graph *g = f->g;
        const struct graph_node *gn = &g->nodes[n];
        void *mem[OPS_MAX_OUTPUTS] = { 0 };
        struct ops_call call;
        char label[192];
        int rc;

        graph_node_label(gn, label, sizeof(label));
        rc = node_begin(f, n, &call, mem, label, err, errlen);
        if (!rc)
                rc = node_kernel(g, gn, &call, label, err, errlen);
        if (!rc) {
                node_commit(f, n, &call, mem, 1);
                for (int i = 0; i < gn->nin && !f->deferred; i++)
                        if (gn->in[i] >= 0)
                                slot_use_done(f, gn->in[i]);
                for (int i = 0; i < gn->nimplicit && !f->deferred; i++)
                        slot_use_done(f, gn->implicit[i]);
        }
        for (int j = 0; j < OPS_MAX_OUTPUTS; j++)
                ops_buf_free(mem[j]);
        ops_control_forget();
        return rc;
}

static int frame_run(struct frame *f, char *err, size_t errlen)
{
        for (int k = 0; k < f->g->nnodes; k++) {
                int rc = run_node(f, f->g->order[k], err, errlen);
                if (rc)
                        return rc;
        }
        return 0;
}

/* A STRING input arrives encoded (docs/protocol.md): per element in row-major order a
 * little-endian uint32 length and the bytes, within the cap bytes at t->data. Decoded into
 * *ret, a pointer array in ops_buf memory (*ret_mem) whose strings are in the run's pool. */
static int decode_strings(const char *name, const struct ops_tensor *t, uint64_t cap,
                          struct ops_tensor *ret, void **ret_mem, char *err, size_t errlen)
{
        int64_t n = ops_tensor_numel(t);
        const uint8_t *p = t->data;
        uint64_t off = 0;
        struct ops_str **el;
        char msg[256] = "";
        int64_t bad;

        *ret = *t;
        *ret_mem = NULL;
        if (n < 0 || (uint64_t)n > UINT64_MAX / 8)
                return err_set(err, errlen, PROTO_E_SHAPE, "input '%s': invalid string tensor shape", name);
        el = ops_buf_alloc0((uint64_t)n * 8, msg, sizeof(msg));
        if (!el && n)
                return err_set(err, errlen, node_code(PROTO_E_EXEC), "input '%s': %s", name, msg);
        *ret_mem = el;
        ret->data = el;
        for (int64_t i = 0; i < n; i++) {
                uint32_t len;
                if (!p || cap - off < 4)
                        return err_set(err, errlen, PROTO_E_INVALID,
                                       "input '%s': string %lld: its length runs past the %llu bytes bound",
                                       name, (long long)i, (unsigned long long)cap);
                len = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
                      (uint32_t)p[off + 3] << 24;
                off += 4;
                if (len > cap - off)
                        return err_set(err, errlen, PROTO_E_INVALID,
                                       "input '%s': string %lld of %u bytes runs past the %llu bytes bound",
                                       name, (long long)i, len, (unsigned long long)cap);
                /* ONNX strings are UTF-8; kernels (StringNormalizer's case changes) may
                 * rely on it. */
                bad = ops_utf8_check(p + off, len);
                if (bad >= 0)
                        return err_set(err, errlen, PROTO_E_INVALID,
                                       "input '%s': string %lld is not valid UTF-8 (byte %lld)",
                                       name, (long long)i, (long long)bad);
                msg[0] = 0;
                el[i] = ops_str_new(p + off, len, msg, sizeof(msg));
                if (!el[i])
                        return err_set(err, errlen, node_code(PROTO_E_EXEC), "input '%s': %s", name, msg);
                off += len;
        }
        return 0;
}

/* Decode the STRING inputs among in[0..nin) into din (a copy of in, made at the first one;
 * *ret_use: din, else in), their arrays in dmem. cap NULL: each tensor's own size. */
static int decode_inputs(const struct graph *g, int nin, const struct ops_tensor *in,
                         const uint64_t *cap, struct ops_tensor *din, void **dmem,
                         const struct ops_tensor **ret_use, char *err, size_t errlen)
{
        *ret_use = in;
        for (int i = 0; i < nin && i < g->ninputs; i++) {
                int rc;
                if (in[i].dtype != PROTO_DTYPE_STRING)
                        continue;
                if (*ret_use == in) {
                        if (nin > GRAPH_MAX_IO)
                                return err_set(err, errlen, PROTO_E_INVALID,
                                               "%d inputs bound with strings among them (at most %d)",
                                               nin, GRAPH_MAX_IO);
                        if (din != in)
                                memcpy(din, in, (size_t)nin * sizeof(*din));
                        *ret_use = din;
                }
                rc = decode_strings(g->values[g->inputs[i]].name, &in[i],
                                    cap ? cap[i] : (uint64_t)tensor_bytes(&in[i]), &din[i], &dmem[i],
                                    err, errlen);
                if (rc)
                        return rc;
        }
        return 0;
}

/* Encode the STRING tensor got into the cap bytes at dst (the form decode_strings reads). */
static int encode_strings(const char *name, const struct ops_tensor *got, void *dst, uint64_t cap,
                          char *err, size_t errlen)
{
        int64_t n = ops_tensor_numel(got);
        struct ops_str *const *el = got->data;
        uint64_t need = 0, off = 0;
        uint8_t *p = dst;

        for (int64_t i = 0; i < n; i++)
                need += 4 + (el[i] ? el[i]->len : 0);
        if (need > cap)
                return err_set(err, errlen, PROTO_E_SHAPE,
                               "output '%s': its %lld strings take %llu bytes encoded but %llu are bound",
                               name, (long long)n, (unsigned long long)need, (unsigned long long)cap);
        for (int64_t i = 0; i < n; i++) {
                uint32_t len;
                const char *b = ops_str_bytes(el[i], &len);
                p[off] = (uint8_t)len;
                p[off + 1] = (uint8_t)(len >> 8);
                p[off + 2] = (uint8_t)(len >> 16);
                p[off + 3] = (uint8_t)(len >> 24);
                memcpy(p + off + 4, b, len);
                off += 4 + len;
        }
        return 0;
}

/* Outputs not written in place: graph inputs or initializers passed through, or a value
 * listed as several outputs, and strings, encoded here (cap: bytes bound for each, NULL:
 * the tensors' own sizes); got receives the computed shapes of a flexible run. */
static int frame_outputs(struct frame *f, int nout, const struct ops_tensor *out, int flex,
                         struct ops_tensor *got, const uint64_t *cap, char *err, size_t errlen)
{
        const struct graph *g = f->g;
        int rc = 0;

        for (int k = 0; !rc && k < nout; k++) {
                const struct slot *s = &f->slots[g->outputs[k]];
                int64_t bytes = tensor_bytes(&s->t);
                if (!s->t.dtype) {
                        rc = err_set(err, errlen, PROTO_E_EXEC, "output '%s' was not computed",
                                  g->values[g->outputs[k]].name);
                        break;
                }
                if (got) {
                        got[k] = s->t;
                        got[k].data = NULL;
                }
                if (s->t.dtype == PROTO_DTYPE_STRING || out[k].dtype == PROTO_DTYPE_STRING) {
                        const char *name = g->values[g->outputs[k]].name;
                        uint64_t room = cap ? cap[k] : (uint64_t)tensor_bytes(&out[k]);
                        char d1[24], d2[24];
                        if (s->t.dtype != out[k].dtype)
                                rc = err_set(err, errlen, PROTO_E_SHAPE, "output '%s' is %s but bound as %s",
                                             name, dtype_str(s->t.dtype, d1, sizeof(d1)),
                                             dtype_str(out[k].dtype, d2, sizeof(d2)));
                        else if (!flex)
                                rc = check_bound(name, &s->t, &out[k], err, errlen);
                        if (!rc)
                                rc = encode_strings(name, &s->t, out[k].data, room, err, errlen);
                        continue;
                }
                if (s->t.data == out[k].data)
                        continue;
                rc = flex ? check_fits(g->values[g->outputs[k]].name, &s->t, &out[k], err, errlen)
                          : check_bound(g->values[g->outputs[k]].name, &s->t, &out[k], err, errlen);
                if (!rc && bytes > 0)
                        memmove(out[k].data, s->t.data, (size_t)bytes);
        }
        return rc;
}

/* A root frame for g with its arena, bound to the caller's tensors. */
static int frame_begin(struct frame *f, const struct graph *g, int nin, const struct ops_tensor *in,
                       int nout, const struct ops_tensor *out, int flex, char *err, size_t errlen)
{
        int rc = graph_check_inputs(g, nin, in, err, errlen);

        if (rc)
                return rc;
        if (nout != g->noutputs)
                return err_set(err, errlen, PROTO_E_INVALID, "the graph has %d output%s, %d bound",
                            g->noutputs, g->noutputs == 1 ? "" : "s", nout);
        rc = frame_init(f, g, NULL, nin, in, err, errlen);
        if (rc)
                return rc;
        f->bound = out;
        f->nbound = nout;
        f->flex = flex;
        if (g->plan && g->plan->arena_bytes) {
                char msg[256] = "";
                f->arena = ops_buf_alloc(g->plan->arena_bytes, msg, sizeof(msg));
                if (!f->arena) {
                        frame_release(f);
                        return err_set(err, errlen, node_code(PROTO_E_EXEC),
                                       "arena of %llu bytes for the intermediates: %s",
                                       (unsigned long long)g->plan->arena_bytes, msg);
                }
        }
        return 0;
}

/* cap: bytes available at each tensor (inputs, then outputs) for STRING ones, which are
 * encoded; NULL: the tensor's own size. */
static int exec_run(const struct graph *g, int nin, const struct ops_tensor *in, int nout,
                    const struct ops_tensor *out, int flex, struct ops_tensor *got,
                    const uint64_t *cap, char *err, size_t errlen)
{
        struct ops_tensor din[GRAPH_MAX_IO];
        const struct ops_tensor *use;
        void *dmem[GRAPH_MAX_IO] = { 0 };
        struct ops_strpool pool;
        struct frame f;
        int rc = graph_check_inputs(g, nin, in, err, errlen);

        if (rc)
                return rc;
        ops_strpool_begin(&pool);
        rc = decode_inputs(g, nin, in, cap, din, dmem, &use, err, errlen);
        if (!rc)
                rc = frame_begin(&f, g, nin, use, nout, out, flex, err, errlen);
        if (!rc) {
                rc = frame_run(&f, err, errlen);
                if (!rc)
                        rc = frame_outputs(&f, nout, out, flex, got, cap ? cap + nin : NULL, err, errlen);
                frame_release(&f);
        }
        for (int i = 0; i < nin && i < GRAPH_MAX_IO; i++)
                ops_buf_free(dmem[i]);
        ops_strpool_end(&pool);
        return rc;
}

int graph_exec(const struct graph *g, int nin, const struct ops_tensor *in, int nout,
               const struct ops_tensor *out, char *err, size_t errlen)
{
        return exec_run(g, nin, in, nout, out, 0, NULL, NULL, err, errlen);
}

int graph_exec_bound(struct graph_bind *b, char *err, size_t errlen)
{
        int rc = exec_run(b->g, b->nin, b->t, b->nout, b->t + b->nin, b->flex, b->got, b->cap, err,
                          errlen);

        if (rc && errlen)
                graph_sanitize(err);
        return rc;
}

/* Part k of nparts of node step `step` (see struct node_prep). */
/* Output rows [lo, hi) of a 2-D Conv node (GRAPH_SPLIT_SPATIAL): the input rows they read,
 * copied out of every channel, convolved with the pads of the part (graph_split_conv_rows)
 * into a buffer of the part's rows of every output channel, then scattered into the
 * output. Each part lays out only its share of the input (im2col). */
static int run_conv_rows(const struct graph *g, const struct graph_node *gn, const struct node_prep *p,
                         struct ops_call *c, int64_t lo, int64_t hi, const char *label, char *err, size_t errlen)
{
        const struct ops_tensor *x = &p->call.in[0], *y = &p->call.out[0];
        struct graph_split_rows r;
        int64_t pads[OPS_MAX_DIMS * 2];
        char msg[256] = "";
        size_t es = proto_dtype_size(x->dtype);
        int64_t ch = x->dims[1], w = x->dims[3], m = y->dims[1], oh = y->dims[2], ow = y->dims[3];
        int rc;

        /* packed filters: the direct convolution reads the part's input rows where they are
         * and writes its output rows in place; so do float64 and mixed accumulation's */
        int acc = graph_accumulate_variant(g->accumulate);
        if (gn->pconv || acc >= 0) {
                msg[0] = 0;
                rc = acc >= 0 ? graph_conv_acc_rows(&p->call, acc == OPS_SGEMM_MIXED, lo, hi, msg, sizeof(msg))
                           : graph_conv_direct_rows(gn->pconv, &p->call, lo, hi, msg, sizeof(msg));
                if (rc < 0) {
                        int code = ops_runctx_code();
                        return err_set(err, errlen, code ? code : node_code(PROTO_E_EXEC), "%s: %s", label,
                                       msg[0] ? msg : "kernel failed");
                }
                if (rc == 0)
                        return 0;
        }
        graph_split_conv_rows(&p->call, lo, hi, &r);
        /* a FusedGemm's residual: the part's rows of it, like the output's */
        const struct graph_epilogue *ep = graph_fused_gemm_epilogue(&p->call);
        int ri = ep && ep->resid ? ep->nin_op + ep->bias : -1;
        char *in = ops_buf_alloc((uint64_t)(ch * (r.b - r.a) * w) * es, msg, sizeof(msg));
        char *out = in ? ops_buf_alloc((uint64_t)(m * (hi - lo) * ow) * es, msg, sizeof(msg)) : NULL;
        char *res = out && ri >= 0 ? ops_buf_alloc((uint64_t)(m * (hi - lo) * ow) * es, msg, sizeof(msg)) : NULL;
        if (!out || (ri >= 0 && !res)) {
                ops_buf_free(in);
                ops_buf_free(out);
                return err_set(err, errlen, node_code(PROTO_E_EXEC), "%s: %s", label, msg);
        }
        if (ri >= 0) {
                for (int64_t k = 0; k < m; k++)
                        memcpy(res + (size_t)(k * (hi - lo) * ow) * es,
                               (const char *)p->call.in[ri].data + (size_t)((k * oh + lo) * ow) * es,
                               (size_t)((hi - lo) * ow) * es);
                c->in[ri].data = res;
                c->in[ri].dims[2] = hi - lo;
        }
        for (int64_t k = 0; k < ch; k++)
                memcpy(in + (size_t)(k * (r.b - r.a) * w) * es,
                       (const char *)x->data + (size_t)((k * x->dims[2] + r.a) * w) * es,
                       (size_t)((r.b - r.a) * w) * es);
        c->in[0].data = in;
        c->in[0].dims[2] = r.b - r.a;
        c->out[0].data = out;
        c->out[0].dims[2] = hi - lo;
        for (int j = 0; j < c->nattr; j++) /* the part's own pads at the top and the bottom */
                if (!strcmp(c->attr[j].name, "pads") && c->attr[j].ints && c->attr[j].n == 4) {
                        memcpy(pads, c->attr[j].ints, sizeof(int64_t) * 4);
                        pads[0] = r.top;
                        pads[2] = r.bottom;
                        c->attr[j].ints = pads;
                }
        rc = node_kernel(g, gn, c, label, err, errlen);
        for (int64_t k = 0; !rc && k < m; k++)
                memcpy((char *)y->data + (size_t)((k * oh + lo) * ow) * es,
                       out + (size_t)(k * (hi - lo) * ow) * es, (size_t)((hi - lo) * ow) * es);
        ops_buf_free(in);
        ops_buf_free(out);
        ops_buf_free(res);
        return rc;
}

static int run_node_part(struct graph_run *r, int step, int k, int nparts, char *err, size_t errlen)
{
        struct frame *f = &r->f;
        int n = graph_step_node(f->g, step);
        const struct graph_node *gn = &f->g->nodes[n];
        struct node_prep *p;
        char label[192];
        int rc = 0;

        graph_node_label(gn, label, sizeof(label));
        spin_lock(&r->mu);
        p = r->prep[step];
        if (!p && (p = calloc(1, sizeof(*p)))) {
                void *mem[OPS_MAX_OUTPUTS] = { 0 };
                p->rc = node_begin(f, n, &p->call, mem, label, p->err, sizeof(p->err));
                if (!p->rc) {
                        /* the outputs are in the value table before their parts are
                         * written: nothing reads them until every part is back */
                        node_commit(f, n, &p->call, mem, 0);
                        graph_split_plan(gn->def, &p->call, &p->split);
                }
                for (int j = 0; j < OPS_MAX_OUTPUTS; j++)
                        ops_buf_free(mem[j]);
                ops_control_forget();
                r->prep[step] = p;
        }
        spin_unlock(&r->mu);
        if (!p)
                return err_set(err, errlen, PROTO_E_EXEC, "%s: out of memory", label);
        if (p->rc)
                return err_set(err, errlen, p->rc, "%s", p->err);
        if (p->split.how == GRAPH_SPLIT_NONE || nparts <= 1) /* shapes unlike the estimate's */
                return k == 0 ? node_kernel(f->g, gn, &p->call, label, err, errlen) : 0;

        struct ops_call c = p->call;
        int64_t lo, hi;
        void *tmp = NULL;
        graph_split_part(&p->call, &p->split, k, nparts, &c, &lo, &hi);
        if (lo >= hi)
                return 0;
        if (p->split.how == GRAPH_SPLIT_SPATIAL) {
                rc = run_conv_rows(f->g, gn, p, &c, lo, hi, label, err, errlen);
        } else if (p->split.how == GRAPH_SPLIT_COLS) { /* its columns are not contiguous in the output */
                char msg[256] = "";
                size_t es = proto_dtype_size(c.out[0].dtype);
                int64_t rows = c.out[0].dims[0], cols = p->call.out[0].dims[1];
                tmp = ops_buf_alloc((uint64_t)(rows * (hi - lo)) * es, msg, sizeof(msg));
                if (!tmp)
                        return err_set(err, errlen, node_code(PROTO_E_EXEC), "%s: %s", label, msg);
                c.out[0].data = tmp;
                rc = node_kernel(f->g, gn, &c, label, err, errlen);
                for (int64_t i = 0; !rc && i < rows; i++)
                        memcpy((char *)p->call.out[0].data + (size_t)(i * cols + lo) * es,
                               (char *)tmp + (size_t)(i * (hi - lo)) * es, (size_t)(hi - lo) * es);
                ops_buf_free(tmp);
        } else {
                rc = node_kernel(f->g, gn, &c, label, err, errlen);
        }
        ops_control_forget();
        return rc;
}

int graph_run_step(struct graph_bind *b, int step, const struct ops_tensor *host_t, char *err,
                   size_t errlen)
{
        return graph_run_step_part(b, step, 0, 1, host_t, err, errlen);
}

int graph_run_step_part(struct graph_bind *b, int step, int part, int nparts,
                        const struct ops_tensor *host_t, char *err, size_t errlen)
{
        const struct graph *g = b->g;
        int rc;

        if (step == 0) {
                const struct ops_tensor *use;
                struct graph_run *r = calloc(1, sizeof(*r));
                if (!r || !(r->prep = calloc((size_t)g->nnodes + 2, sizeof(*r->prep)))) {
                        if (r)
                                free(r);
                        return err_set(err, errlen, PROTO_E_EXEC, "out of memory for a graph run");
                }
                r->nin = b->nin;
                r->nout = b->nout;
                memcpy(r->t, host_t, sizeof(r->t[0]) * (size_t)(b->nin + b->nout));
                ops_strpool_init(&r->pool);
                ops_strpool_enter(&r->pool);
                rc = graph_check_inputs(g, r->nin, r->t, err, errlen);
                if (!rc) /* decoded in place: r->t holds the run's view of the inputs */
                        rc = decode_inputs(g, r->nin, r->t, b->cap, r->t, r->dmem, &use, err, errlen);
                if (!rc)
                        rc = frame_begin(&r->f, g, r->nin, r->t, r->nout, r->t + r->nin, b->flex, err,
                                         errlen);
                ops_strpool_leave(&r->pool);
                if (rc) {
                        for (int i = 0; i < GRAPH_MAX_IO; i++)
                                ops_buf_free(r->dmem[i]);
                        ops_strpool_end(&r->pool);
                        free(r->prep);
                        free(r);
                } else {
                        r->f.deferred = 1;
                        b->run = r;
                }
        } else if (!b->run || step < 0 || step > g->nnodes + 1) {
                rc = err_set(err, errlen, PROTO_E_EXEC, "step %d of a graph run that is not bound", step);
        } else if (step <= g->nnodes && nparts > 1) {
                if (part < 0 || part >= nparts) {
                        rc = err_set(err, errlen, PROTO_E_EXEC, "part %d of %d of step %d", part, nparts, step);
                } else {
                        ops_strpool_enter(&b->run->pool);
                        rc = run_node_part(b->run, step, part, nparts, err, errlen);
                        ops_strpool_leave(&b->run->pool);
                }
        } else if (step <= g->nnodes) {
                ops_strpool_enter(&b->run->pool);
                rc = run_node(&b->run->f, graph_step_node(g, step), err, errlen);
                ops_strpool_leave(&b->run->pool);
        } else {
                ops_strpool_enter(&b->run->pool);
                rc = frame_outputs(&b->run->f, b->run->nout, b->run->t + b->run->nin, b->flex,
                                   b->got, b->cap + b->run->nin, err, errlen);
                ops_strpool_leave(&b->run->pool);
        }
        if (rc && errlen)
                graph_sanitize(err);
        return rc;
}

void graph_run_step_done(struct graph_bind *b, int step)
{
        const struct graph_node *gn;

        if (!b->run || step < 1 || step > b->g->nnodes)
                return;
        /* every part is back: the node's set-up goes */
        free(b->run->prep[step]);
        b->run->prep[step] = NULL;
        gn = &b->g->nodes[graph_step_node(b->g, step)];
        for (int i = 0; i < gn->nin; i++)
                if (gn->in[i] >= 0)
                        slot_use_done(&b->run->f, gn->in[i]);
        for (int i = 0; i < gn->nimplicit; i++)
                slot_use_done(&b->run->f, gn->implicit[i]);
}

void graph_run_free(struct graph_run *r)
{
        if (!r)
                return;
        frame_release(&r->f);
        for (int i = 0; i < GRAPH_MAX_IO; i++)
                ops_buf_free(r->dmem[i]);
        ops_strpool_end(&r->pool);
        for (int k = 0; k < r->f.g->nnodes + 2; k++)
                free(r->prep[k]);
        free(r->prep);
        free(r);
}

/* ops_graph_run_fn for If, Loop and Scan kernels: run a subgraph of the node's graph with
 * the given inputs; its outputs come back in ops_buf memory the caller frees with
 * ops_buf_free(). */
static int subgraph_run(void *graph_ctx, const void *graph, int nin,
                        const struct ops_tensor *in, int *ret_nout, struct ops_tensor *out,
                        int max_out, char *err, size_t errlen)
{
        const struct frame *parent = graph_ctx;
        const struct graph *g = graph;
        struct frame f;
        char d1[24], d2[24];
        int rc, k;

        *ret_nout = 0;
        if (!parent || !g)
                return err_set(err, errlen, -EINVAL, "no subgraph to run");
        if (nin != g->ninputs)
                return err_set(err, errlen, -EINVAL, "subgraph has %d input%s, %d given", g->ninputs,
                            g->ninputs == 1 ? "" : "s", nin);
        if (g->noutputs > max_out)
                return err_set(err, errlen, -EINVAL, "subgraph has %d outputs, room for %d",
                            g->noutputs, max_out);
        /* Subgraph inputs often leave shapes open (loop-carried values change shape), so only
         * declared element types are held to. */
        for (int i = 0; i < nin; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                if (v->dtype && in[i].dtype != v->dtype)
                        return err_set(err, errlen, -EINVAL, "subgraph input '%s' is %s but given %s",
                                    v->name, dtype_str(v->dtype, d1, sizeof(d1)),
                                    dtype_str(in[i].dtype, d2, sizeof(d2)));
        }
        if (frame_init(&f, g, parent, nin, in, err, errlen))
                return -EINVAL;
        if (frame_run(&f, err, errlen)) {
                frame_release(&f);
                return -EINVAL;
        }
        rc = 0;
        for (k = 0; k < g->noutputs; k++) {
                struct slot *s = &f.slots[g->outputs[k]];
                int64_t bytes = tensor_bytes(&s->t);
                if (!s->t.dtype || bytes < 0) {
                        rc = err_set(err, errlen, -EINVAL, "subgraph output '%s' was not computed",
                                  g->values[g->outputs[k]].name);
                        break;
                }
                out[k] = s->t;
                if (s->owned) { /* hand over what this run allocated */
                        out[k].data = s->owned;
                        s->owned = NULL;
                        continue;
                }
                out[k].data = ops_buf_alloc((uint64_t)bytes, d1, sizeof(d1));
                if (!out[k].data) {
                        rc = err_set(err, errlen, -ENOMEM, "subgraph output '%s': no memory or over budget",
                                  g->values[g->outputs[k]].name);
                        break;
                }
                if (bytes)
                        memcpy(out[k].data, s->t.data, (size_t)bytes);
        }
        if (rc) {
                for (int j = 0; j < k; j++) {
                        ops_buf_free(out[j].data);
                        out[j].data = NULL;
                }
        } else {
                *ret_nout = g->noutputs;
        }
        frame_release(&f);
        return rc;
}

/* Estimation never runs subgraphs: operators whose shapes need one count a launch. */
static int no_subgraph_run(void *graph_ctx, const void *graph, int nin,
                           const struct ops_tensor *in, int *ret_nout, struct ops_tensor *out,
                           int max_out, char *err, size_t errlen)
{
        *ret_nout = 0;
        return err_set(err, errlen, -ENOTSUP, "subgraphs are not run while estimating");
}

/* The most parts of node gn on call (shapes known), and how many a worker should take of
 * it in a gang (*ret_balance): a Conv in row blocks computed in place under float64 or mixed
 * accumulation takes smaller parts (split.h, GRAPH_SPLIT_MIN_SPATIAL_IN_PLACE). */
static uint32_t node_max_parts(const struct graph *g, const struct graph_node *gn, const struct ops_call *call,
                               uint8_t *ret_balance)
{
        uint32_t n = graph_split_max_parts_packed(gn->def, call, gn->packed != NULL);
        struct graph_split s;

        *ret_balance = 1;
        if (n <= 1 || graph_accumulate_variant(g->accumulate) < 0)
                return n;
        graph_split_plan(gn->def, call, &s);
        if (s.how != GRAPH_SPLIT_SPATIAL || !graph_conv_acc_epilogue_ok(call))
                return n; /* (an epilogue with a bias: its rows are copied, as float32's) */
        int64_t m = s.extent / GRAPH_SPLIT_MIN_SPATIAL_IN_PLACE;
        *ret_balance = GRAPH_SPLIT_BALANCE;
        return m > GRAPH_SPLIT_MAX_PARTS ? GRAPH_SPLIT_MAX_PARTS : m > (int64_t)n ? (uint32_t)m : n;
}

/* Work of each node in order (flops[k], bytes[k] of order[k]; ok[k] 0 where its shapes
 * depend on data the estimate does not have), and where wanted its most parts and balance
 * (node_max_parts). -1 when memory is short. */
static int estimate_walk(const struct graph *g, int nin, const struct ops_tensor *in,
                         uint64_t *flops_out, uint64_t *bytes_out, uint8_t *ok_out,
                         uint32_t *parts_out, uint8_t *balance_out)
{
        struct ops_tensor *known = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof(*known));
        char msg[256];

        if (!known)
                return -1;
        for (int v = 0; v < g->nvalues; v++)
                if (g->values[v].kind == GRAPH_VALUE_INIT)
                        known[v] = *g->values[v].tensor;
        for (int i = 0; i < nin && i < g->ninputs; i++)
                if (g->values[g->inputs[i]].kind == GRAPH_VALUE_INPUT) {
                        known[g->inputs[i]] = in[i];
                        known[g->inputs[i]].data = NULL;
                }
        for (int k = 0; k < g->nnodes; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                struct ops_call call;
                uint64_t flops = 0, bytes = 0;
                int ok = 1;

                memset(&call, 0, sizeof(call));
                call.nin = gn->nin;
                for (int i = 0; i < gn->nin && ok; i++) {
                        if (gn->in[i] < 0)
                                continue;
                        call.in[i] = known[gn->in[i]];
                        ok = call.in[i].dtype != 0;
                }
                call.nout = gn->nout;
                call.nattr = gn->nattr;
                if (gn->nattr)
                        memcpy(call.attr, gn->attr, sizeof(call.attr[0]) * (size_t)gn->nattr);
                call.opset = g->opset;
                call.graph_run = no_subgraph_run;
                if (ok)
                        ok = ops_infer(gn->def, &call, msg, sizeof(msg)) == 0;
                ops_control_forget(); /* only shapes are wanted here */
                for (int j = 0; ok && j < gn->nout; j++)
                        if (call.out[j].dtype && tensor_bytes(&call.out[j]) < 0)
                                ok = 0;
                ok_out[k] = (uint8_t)ok;
                flops_out[k] = bytes_out[k] = 0;
                if (parts_out || balance_out) {
                        uint8_t bal = 1;
                        uint32_t np = ok ? node_max_parts(g, gn, &call, &bal) : 1;
                        if (parts_out)
                                parts_out[k] = np;
                        if (balance_out)
                                balance_out[k] = bal;
                }
                if (!ok)
                        continue;
                for (int j = 0; j < gn->nout; j++)
                        if (gn->out[j] >= 0) {
                                known[gn->out[j]] = call.out[j];
                                known[gn->out[j]].data = NULL;
                        }
                if (gn->def->cost) {
                        ops_cost(gn->def, &call, &flops, &bytes);
                } else {
                        for (int i = 0; i < call.nin; i++)
                                if (call.in[i].dtype)
                                        bytes += (uint64_t)tensor_bytes(&call.in[i]);
                        for (int j = 0; j < call.nout; j++)
                                if (call.out[j].dtype) {
                                        bytes += (uint64_t)tensor_bytes(&call.out[j]);
                                        flops += (uint64_t)ops_tensor_numel(&call.out[j]);
                                }
                }
                /* a float64 multiply-add takes two float32 ones of the product engine's
                 * throughput (half the lanes), as on the host (docs/benchmarks.md); mixed
                 * accumulation's products, GEMMs and convolutions alike, take about 1.2
                 * (bench_kernels f64: 0.95-1.3) */
                if (g->accumulate != GRAPH_ACCUMULATE_FLOAT32 && gn->def->engine == OPS_ENGINE_CUBE) {
                        if (g->accumulate == GRAPH_ACCUMULATE_FLOAT64)
                                flops = flops > UINT64_MAX / 2 ? UINT64_MAX : 2 * flops;
                        else
                                flops = flops > UINT64_MAX / 6 * 5 ? UINT64_MAX : flops / 5 * 6;
                }
                flops_out[k] = flops;
                bytes_out[k] = bytes;
        }
        free(known);
        return 0;
}

uint64_t graph_estimate_ns(const struct graph *g, int nin, const struct ops_tensor *in,
                           double ops_per_s, double mem_bw, int *ret_nodes)
{
        size_t n = (size_t)(g->nnodes ? g->nnodes : 1);
        uint64_t *flops = malloc(n * sizeof(*flops)), *bytes = malloc(n * sizeof(*bytes));
        uint8_t *ok = malloc(n);
        uint64_t total = 0;
        int estimated = 0;

        if (ret_nodes)
                *ret_nodes = 0;
        if (!flops || !bytes || !ok || estimate_walk(g, nin, in, flops, bytes, ok, NULL, NULL) < 0) {
                total = (uint64_t)g->nnodes * COST_LAUNCH_NS;
                goto out;
        }
        for (int k = 0; k < g->nnodes; k++) {
                uint64_t ns = ok[k] ? cost_kernel_ns(flops[k], bytes[k], ops_per_s, 1, mem_bw)
                                    : COST_LAUNCH_NS;
                total = total + ns < total ? UINT64_MAX : total + ns;
                estimated += ok[k];
        }
        if (ret_nodes)
                *ret_nodes = estimated;
out:
        free(flops);
        free(bytes);
        free(ok);
        return total;
}

int graph_estimate_steps(const struct graph *g, int nin, const struct ops_tensor *in,
                         const double *ops_per_s, const int *cores, double mem_bw, uint64_t *cost)
{
        return graph_estimate_steps_parts(g, nin, in, ops_per_s, cores, mem_bw, cost, NULL, NULL, NULL);
}

int graph_estimate_steps_parts(const struct graph *g, int nin, const struct ops_tensor *in,
                               const double *ops_per_s, const int *cores, double mem_bw,
                               uint64_t *cost, uint32_t *parts, uint8_t *balance, uint64_t *host)
{
        const struct graph_steps *gs = g->steps;
        size_t n = (size_t)(g->nnodes ? g->nnodes : 1);
        uint64_t *flops = malloc(n * sizeof(*flops)), *bytes = malloc(n * sizeof(*bytes));
        uint8_t *ok = malloc(n);
        int rc = -1;

        if (!gs || !flops || !bytes || !ok ||
            estimate_walk(g, nin, in, flops, bytes, ok, parts ? parts + 1 : NULL, balance ? balance + 1 : NULL) < 0)
                goto out;
        if (parts) /* binding and handing over stay whole */
                parts[0] = parts[gs->nsteps - 1] = 1;
        if (balance)
                balance[0] = balance[gs->nsteps - 1] = 1;
        memset(cost, 0, sizeof(*cost) * (size_t)gs->nsteps * OPS_ENGINE_COUNT);
        if (host)
                memset(host, 0, sizeof(*host) * (size_t)gs->nsteps);
        for (int s = 0; s < gs->nsteps; s++) {
                uint64_t *c = &cost[(size_t)s * OPS_ENGINE_COUNT];
                if (s == 0 || s == gs->nsteps - 1)
                        continue; /* below */
                const struct graph_node *gn = &g->nodes[graph_step_node(g, s)];
                if (host && ok[s - 1] && gn->tuned_ns && gn->tuned_flops) {
                        double h = (double)gn->tuned_ns * ((double)flops[s - 1] / (double)gn->tuned_flops);
                        host[s] = h < 1 ? 1 : h > 1e15 ? (uint64_t)1e15 : (uint64_t)h;
                }
                for (int e = 0; e < OPS_ENGINE_COUNT; e++) {
                        if ((e != (int)gn->def->engine && e != OPS_ENGINE_AICPU) || cores[e] <= 0)
                                continue;
                        c[e] = ok[s - 1] ? cost_kernel_ns(flops[s - 1], bytes[s - 1], ops_per_s[e], 1, mem_bw)
                                         : COST_LAUNCH_NS;
                        if (!c[e])
                                c[e] = 1;
                }
        }
        /* Binding and handing over run anywhere, but go on the engines of the first and
         * the last node, so that they can share a unit with them. */
        for (int end = 0; end < 2; end++) {
                int s = end ? gs->nsteps - 1 : 0, nb = end ? gs->nsteps - 2 : 1;
                uint64_t *c = &cost[(size_t)s * OPS_ENGINE_COUNT];
                const uint64_t *cn = &cost[(size_t)nb * OPS_ENGINE_COUNT];
                for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                        c[e] = cores[e] > 0 && (!g->nnodes || cn[e] || e == OPS_ENGINE_AICPU)
                                       ? COST_LAUNCH_NS : 0;
        }
        rc = 0;
out:
        free(flops);
        free(bytes);
        free(ok);
        return rc;
}

int graph_check_static(const struct graph *g, char *err, size_t errlen)
{
        struct ops_tensor *known = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof(*known));
        char msg[256], label[192];
        int rc = 0;

        if (!known)
                return 0; /* the check is a convenience: the run checks everything again */
        graph_known_static(g, known);
        for (int k = 0; k < g->nnodes && !rc; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                struct ops_call call;
                int ok = 1;

                memset(&call, 0, sizeof(call));
                call.nin = gn->nin;
                for (int i = 0; i < gn->nin && ok; i++) {
                        if (gn->in[i] < 0)
                                continue;
                        call.in[i] = known[gn->in[i]];
                        call.in[i].data = NULL; /* check sees shapes only */
                        ok = call.in[i].dtype != 0;
                }
                if (!ok)
                        continue;
                call.nout = gn->nout;
                call.nattr = gn->nattr;
                if (gn->nattr)
                        memcpy(call.attr, gn->attr, sizeof(call.attr[0]) * (size_t)gn->nattr);
                call.opset = g->opset;
                call.graph_run = no_subgraph_run;
                /* Only operators whose validity is a matter of shapes alone are judged here
                 * (element-wise with broadcasting, MatMul-like): others may need data the
                 * run computes, and their outputs stay unknown when it is missing. */
                int judged = (gn->def->flags & (OPS_FLAG_ELEMENTWISE | OPS_FLAG_ROW_SPLIT)) != 0;
                for (int i = 0; i < gn->nin && !judged; i++)
                        if (gn->in[i] >= 0)
                                call.in[i].data = known[gn->in[i]].data; /* initializers */
                msg[0] = 0;
                ok = ops_infer(gn->def, &call, msg, sizeof(msg)) == 0;
                ops_control_forget();
                if (!ok && judged) {
                        graph_node_label(gn, label, sizeof(label));
                        rc = err_set(err, errlen, PROTO_E_SHAPE, "%s: the shapes the model fixes conflict: %s",
                                     label, msg[0] ? msg : "shape inference failed");
                        break;
                }
                for (int j = 0; ok && j < gn->nout; j++)
                        if (call.out[j].dtype && tensor_bytes(&call.out[j]) < 0)
                                ok = 0;
                for (int j = 0; ok && j < gn->nout; j++)
                        if (gn->out[j] >= 0) {
                                known[gn->out[j]] = call.out[j];
                                known[gn->out[j]].data = NULL;
                        }
        }
        free(known);
        if (rc && errlen)
                graph_sanitize(err);
        return rc;
}

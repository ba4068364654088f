/* Graph compiler passes (see compile.h): folding, BatchNormalization into Conv, dead nodes
 * and elementwise fusion. Each pass marks nodes removed; compact() drops them, renumbers
 * producers and graph_finalize recounts uses and the order. The memory plan is
 * compile-plan.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/blas.h"
#include "ops/control.h"
#include "ops/runctx.h"
#include "proto/dtype.h"
#include "compile.h"

int graph_compile_plan(struct graph *g, struct graph_compile_stats *st, char *err, size_t errlen);

unsigned graph_compile_flags(void)
{
        const char *e = getenv("NPUD_GRAPH_COMPILE");
        char *end;
        unsigned long f;

        if (!e || !*e)
                return GRAPH_COMPILE_ALL;
        f = strtoul(e, &end, 0);
        return *end ? GRAPH_COMPILE_ALL : (unsigned)f & GRAPH_COMPILE_ALL;
}

static int oom(char *err, size_t errlen)
{
        snprintf(err, errlen, "out of memory while compiling the graph");
        return -ENOMEM;
}

static int has_graph_attr(const struct graph_node *n)
{
        for (int a = 0; a < n->nattr; a++)
                if (n->attr[a].type == OPS_ATTR_GRAPH)
                        return 1;
        return 0;
}

static int is_op(const struct graph_node *n, const char *op)
{
        return (!n->domain[0] || strcmp(n->domain, "ai.onnx") == 0) && strcmp(n->op_type, op) == 0;
}

/* Drop removed nodes, renumber producers, recount uses and the order. */
static int compact(struct graph *g, const char *removed, char *err, size_t errlen)
{
        int k = 0;

        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                if (removed[n]) {
                        for (int j = 0; j < gn->nout; j++)
                                if (gn->out[j] >= 0 && g->values[gn->out[j]].kind == GRAPH_VALUE_NODE &&
                                    g->values[gn->out[j]].producer == n)
                                        g->values[gn->out[j]].producer = -1;
                        continue;
                }
                if (k != n)
                        g->nodes[k] = *gn;
                for (int j = 0; j < g->nodes[k].nout; j++) {
                        int v = g->nodes[k].out[j];
                        if (v >= 0 && g->values[v].kind == GRAPH_VALUE_NODE)
                                g->values[v].producer = k;
                }
                k++;
        }
        g->nnodes = k;
        return graph_finalize(g, err, errlen) ? -EINVAL : 0;
}

/* 64-byte aligned zeroed memory owned by the graph. */
static void *aligned_graph_alloc(struct graph *g, uint64_t bytes)
{
        char *p = graph_alloc(g, (size_t)bytes + GRAPH_ALIGN);

        if (!p)
                return NULL;
        return p + (GRAPH_ALIGN - ((uintptr_t)p % GRAPH_ALIGN)) % GRAPH_ALIGN;
}

static int no_subgraphs(void *graph_ctx, const void *graph, int nin, const struct ops_tensor *in,
                        int *ret_nout, struct ops_tensor *out, int max_out, char *err,
                        size_t errlen)
{
        *ret_nout = 0;
        snprintf(err, errlen, "no subgraphs at load");
        return -ENOTSUP;
}

/* Operators whose result is not a function of their inputs. */
static int nondeterministic(const struct graph_node *n)
{
        return strncmp(n->op_type, "Random", 6) == 0 || strcmp(n->op_type, "Bernoulli") == 0 ||
               strcmp(n->op_type, "Multinomial") == 0;
}

/* Compute node n now when its inputs are all initializers; 1 when folded. */
static int fold_node(struct graph *g, int n, struct graph_compile_stats *st)
{
        struct graph_node *gn = &g->nodes[n];
        struct ops_call *call;
        void *mem[OPS_MAX_OUTPUTS] = { 0 };
        uint64_t total = 0;
        char msg[256];
        int ok = 0, present = 0;

        if (!gn->def || !gn->def->run || !gn->def->infer || gn->nimplicit || has_graph_attr(gn) ||
            nondeterministic(gn) || gn->nout > OPS_MAX_OUTPUTS || gn->nin > OPS_MAX_INPUTS ||
            gn->def == &graph_fused_def || gn->def == &graph_fused_gemm_def ||
            gn->def == &graph_fused_softmax_def)
                return 0;
        for (int i = 0; i < gn->nin; i++) {
                if (gn->in[i] < 0)
                        continue;
                if (g->values[gn->in[i]].kind != GRAPH_VALUE_INIT)
                        return 0;
                /* Strings stay to the run: folded ones would need owners in the graph. */
                if (g->values[gn->in[i]].tensor->dtype == PROTO_DTYPE_STRING)
                        return 0;
                present++;
        }
        if (!present && !is_op(gn, "Constant"))
                return 0;
        call = calloc(1, sizeof(*call));
        if (!call)
                return 0;
        call->nin = gn->nin;
        for (int i = 0; i < gn->nin; i++)
                if (gn->in[i] >= 0)
                        call->in[i] = *g->values[gn->in[i]].tensor;
        call->nout = gn->nout;
        call->nattr = gn->nattr;
        if (gn->nattr > OPS_MAX_ATTRS)
                goto out;
        if (gn->nattr)
                memcpy(call->attr, gn->attr, sizeof(call->attr[0]) * (size_t)gn->nattr);
        call->opset = g->opset;
        call->graph_run = no_subgraphs;
        msg[0] = 0;
        if (ops_infer(gn->def, call, msg, sizeof(msg)) < 0)
                goto out;
        /* Folding runs on the loop thread, outside any run's time limit: a model must not
         * make npud compute something large there (it stays a node, run on a worker). */
        if (gn->def->cost) {
                uint64_t flops = 0, bytes = 0;
                ops_cost(gn->def, call, &flops, &bytes);
                if (flops > GRAPH_FOLD_FLOPS || bytes > GRAPH_FOLD_TOTAL)
                        goto out;
        }
        for (int j = 0; j < gn->nout; j++) {
                struct ops_tensor *o = &call->out[j];
                int64_t numel = ops_tensor_numel(o);
                size_t es = proto_dtype_size(o->dtype);
                uint64_t bytes;
                if (!o->dtype) {
                        if (gn->out[j] >= 0)
                                goto out;
                        continue;
                }
                if (numel < 0 || !es || o->dtype == PROTO_DTYPE_STRING)
                        goto out;
                bytes = (uint64_t)numel * es;
                total += bytes;
                if (bytes > GRAPH_FOLD_MAX || st->folded_bytes + total > GRAPH_FOLD_TOTAL)
                        goto out;
                mem[j] = aligned_graph_alloc(g, bytes);
                if (!mem[j])
                        goto out;
                o->data = mem[j];
        }
        msg[0] = 0;
        if (ops_run(gn->def, call, msg, sizeof(msg)) < 0 || ops_runctx_code())
                goto out;
        for (int j = 0; j < gn->nout; j++) {
                int v = gn->out[j];
                struct ops_tensor *t;
                if (v < 0)
                        continue;
                t = graph_alloc(g, sizeof(*t));
                if (!t)
                        goto out;
                *t = call->out[j];
                g->values[v].kind = GRAPH_VALUE_INIT;
                g->values[v].tensor = t;
                g->values[v].producer = -1;
                g->values[v].dtype = t->dtype;
                g->values[v].ndim = t->ndim;
                for (int d = 0; d < OPS_MAX_DIMS; d++)
                        g->values[v].dims[d] = d < t->ndim ? t->dims[d] : -1;
        }
        st->folded_bytes += total;
        ok = 1;
out:
        ops_control_forget();
        free(call);
        return ok;
}

static int pass_fold(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        int folded = 0;

        for (int k = 0; k < g->nnodes; k++) {
                int n = g->order[k];
                if (fold_node(g, n, st)) {
                        removed[n] = 1;
                        folded++;
                }
        }
        st->folded += folded;
        return folded;
}

/* A float32 initializer of numel elements, or NULL. */
static const float *init_f32(const struct graph *g, int v, int64_t numel)
{
        const struct graph_value *gv;

        if (v < 0)
                return NULL;
        gv = &g->values[v];
        if (gv->kind != GRAPH_VALUE_INIT || gv->tensor->dtype != PROTO_DTYPE_FLOAT32 ||
            ops_tensor_numel(gv->tensor) != numel || (numel && !gv->tensor->data))
                return NULL;
        return gv->tensor->data;
}

static double attr_f(const struct graph_node *n, const char *name, double def)
{
        for (int a = 0; a < n->nattr; a++)
                if (strcmp(n->attr[a].name, name) == 0)
                        return n->attr[a].type == OPS_ATTR_FLOAT ? n->attr[a].f : (double)n->attr[a].i;
        return def;
}

/* A new float32 initializer named after base; its index or a negative errno. */
static int new_init(struct graph *g, const char *base, const char *suffix, int ndim,
                    const int64_t *dims, float **ret)
{
        char name[256];
        struct ops_tensor *t;
        int64_t numel = 1;
        int v;

        for (int d = 0; d < ndim; d++)
                numel *= dims[d];
        for (int i = 0;; i++) {
                snprintf(name, sizeof(name), "%.200s/%s%d", base, suffix, i);
                if (graph_find_value(g, name) < 0)
                        break;
        }
        v = graph_add_value(g, name, GRAPH_VALUE_INIT, PROTO_DTYPE_FLOAT32, ndim, dims);
        if (v < 0)
                return v;
        t = graph_alloc(g, sizeof(*t));
        *ret = aligned_graph_alloc(g, (uint64_t)numel * sizeof(float));
        if (!t || !*ret)
                return -ENOMEM;
        t->dtype = PROTO_DTYPE_FLOAT32;
        t->ndim = ndim;
        memcpy(t->dims, dims, sizeof(dims[0]) * (size_t)ndim);
        t->data = *ret;
        g->values[v].tensor = t;
        return v;
}

/* Conv(X, W[, B]) -> y, y read only by BatchNormalization(y, scale, beta, mean, var) in
 * inference form: W' = W * s per output channel, B' = (B - mean) * s + beta, with
 * s = scale / sqrt(var + epsilon); the Conv takes the BatchNormalization's output. Under
 * float64 or mixed accumulation the Conv also gets a "bn_affine" (struct graph_bn_affine):
 * W itself, s and B' in float64. */
static int fold_bn(struct graph *g, int bn, char *removed, struct graph_compile_stats *st)
{
        struct graph_node *b = &g->nodes[bn];
        int y, c, M, wv, bv, nw, nb;
        const float *scale, *beta, *mean, *var, *w, *bias = NULL;
        float *nwd, *nbd;
        int64_t per, wdims[OPS_MAX_DIMS], wndim;
        double eps;

        if (b->nin != 5 || b->nout < 1 || b->out[0] < 0 || attr_f(b, "training_mode", 0) != 0)
                return 0;
        for (int j = 1; j < b->nout; j++)
                if (b->out[j] >= 0 && (g->values[b->out[j]].uses || g->values[b->out[j]].output >= 0))
                        return 0;
        y = b->in[0];
        if (y < 0 || g->values[y].kind != GRAPH_VALUE_NODE || g->values[y].uses != 1 ||
            g->values[y].output >= 0)
                return 0;
        c = g->values[y].producer;
        if (c < 0 || removed[c] || !is_op(&g->nodes[c], "Conv") || g->nodes[c].nout != 1 ||
            g->nodes[c].nin < 2)
                return 0;
        wv = g->nodes[c].in[1];
        if (wv < 0 || g->values[wv].kind != GRAPH_VALUE_INIT)
                return 0;
        wndim = g->values[wv].tensor->ndim;
        if (wndim < 3 || g->values[wv].tensor->dtype != PROTO_DTYPE_FLOAT32)
                return 0;
        memcpy(wdims, g->values[wv].tensor->dims, sizeof(wdims[0]) * (size_t)wndim);
        M = (int)wdims[0];
        if (M <= 0 || wdims[0] != M)
                return 0;
        per = ops_tensor_numel(g->values[wv].tensor) / M;
        w = init_f32(g, wv, (int64_t)M * per);
        scale = init_f32(g, b->in[1], M);
        beta = init_f32(g, b->in[2], M);
        mean = init_f32(g, b->in[3], M);
        var = init_f32(g, b->in[4], M);
        bv = g->nodes[c].nin > 2 ? g->nodes[c].in[2] : -1;
        if (bv >= 0 && !(bias = init_f32(g, bv, M)))
                return 0;
        if (!w || !scale || !beta || !mean || !var)
                return 0;
        eps = attr_f(b, "epsilon", 1e-5);
        if (graph_accumulate_variant(g->accumulate) >= 0 && g->nodes[c].nattr >= OPS_MAX_ATTRS)
                return 0; /* no room for its "bn_affine" */
        nw = new_init(g, g->nodes[c].name, "bn_w", (int)wndim, wdims, &nwd);
        if (nw < 0)
                return nw;
        nb = new_init(g, g->nodes[c].name, "bn_b", 1, (int64_t[]){ M }, &nbd);
        if (nb < 0)
                return nb;
        struct graph_bn_affine *aff = NULL;
        struct ops_attr *attr = NULL;
        if (graph_accumulate_variant(g->accumulate) >= 0) {
                aff = graph_alloc(g, sizeof(*aff));
                double *d = aligned_graph_alloc(g, sizeof(double) * 2 * (uint64_t)M);
                attr = graph_alloc(g, sizeof(*attr) * (size_t)(g->nodes[c].nattr + 1));
                if (!aff || !d || !attr)
                        return -ENOMEM;
                *aff = (struct graph_bn_affine){ w, nwd, M, per, d, d + M };
        }
        /* graph_add_value may have moved the value table: nothing above points into it */
        for (int m = 0; m < M; m++) {
                double s = scale[m] / sqrt((double)var[m] + eps);
                double sh = ((bias ? bias[m] : 0.0) - mean[m]) * s + beta[m];
                for (int64_t k = 0; k < per; k++)
                        nwd[m * per + k] = (float)(w[m * per + k] * s);
                nbd[m] = (float)sh;
                if (aff) {
                        aff->scale[m] = s;
                        aff->shift[m] = sh;
                }
        }
        struct graph_node *cn = &g->nodes[c];
        if (aff) {
                if (cn->nattr)
                        memcpy(attr, cn->attr, sizeof(attr[0]) * (size_t)cn->nattr);
                memset(&attr[cn->nattr], 0, sizeof(attr[0]));
                snprintf(attr[cn->nattr].name, sizeof(attr[0].name), "bn_affine");
                attr[cn->nattr].type = OPS_ATTR_OPAQUE;
                attr[cn->nattr].graph = aff;
                cn->attr = attr;
                cn->nattr++;
                st->bn_exact++;
        }
        if (cn->nin < 3) {
                int *in = graph_alloc(g, sizeof(int) * 3);
                if (!in)
                        return -ENOMEM;
                in[0] = cn->in[0];
                in[1] = cn->in[1];
                cn->in = in;
                cn->nin = 3;
        }
        cn->in[1] = nw;
        cn->in[2] = nb;
        cn->out[0] = b->out[0];
        g->values[b->out[0]].producer = c;
        g->values[y].producer = -1;
        removed[bn] = 1;
        st->bn_folded++;
        return 1;
}

static int pass_bn(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        int done = 0;

        for (int n = 0; n < g->nnodes; n++) {
                int rc;
                if (removed[n] || !is_op(&g->nodes[n], "BatchNormalization"))
                        continue;
                rc = fold_bn(g, n, removed, st);
                if (rc < 0)
                        return rc;
                done += rc;
        }
        return done;
}

/* Nodes none of whose outputs reaches a graph output (walked backwards from them). */
static int pass_dead(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        char *need = calloc((size_t)g->nvalues + 1, 1);
        int dead = 0;

        if (!need)
                return -ENOMEM;
        for (int k = 0; k < g->noutputs; k++)
                need[g->outputs[k]] = 1;
        for (int k = g->nnodes - 1; k >= 0; k--) {
                int n = g->order[k], live = 0;
                const struct graph_node *gn = &g->nodes[n];
                if (removed[n])
                        continue;
                for (int j = 0; j < gn->nout && !live; j++)
                        live = gn->out[j] >= 0 && need[gn->out[j]];
                if (!live) {
                        removed[n] = 1;
                        dead++;
                        continue;
                }
                for (int i = 0; i < gn->nin; i++)
                        if (gn->in[i] >= 0)
                                need[gn->in[i]] = 1;
                for (int i = 0; i < gn->nimplicit; i++)
                        need[gn->implicit[i]] = 1;
        }
        free(need);
        st->dead += dead;
        return dead;
}

/* Might a STRING value flow anywhere in g? A value declared STRING, a STRING constant, a
 * node that makes strings, or a value of the enclosing graph whose dtype is not known. */
static int may_hold_strings(const struct graph *g)
{
        for (int v = 0; v < g->nvalues; v++) {
                const struct graph_value *gv = &g->values[v];
                if (gv->dtype == PROTO_DTYPE_STRING ||
                    (gv->kind == GRAPH_VALUE_INIT && gv->tensor && gv->tensor->dtype == PROTO_DTYPE_STRING) ||
                    (gv->kind == GRAPH_VALUE_OUTER && !gv->dtype))
                        return 1;
        }
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                if (is_op(gn, "CastLike") || is_op(gn, "StringNormalizer"))
                        return 1;
                for (int a = 0; a < gn->nattr; a++) {
                        const struct ops_attr *at = &gn->attr[a];
                        if ((at->type == OPS_ATTR_TENSOR && at->t && at->t->dtype == PROTO_DTYPE_STRING) ||
                            (is_op(gn, "Cast") && strncmp(at->name, "to", OPS_NAME_MAX) == 0 &&
                             at->type == OPS_ATTR_INT && at->i == PROTO_DTYPE_STRING))
                                return 1;
                }
        }
        return 0;
}

/* May node n be a step of a fused chain? strings: g may hold strings (may_hold_strings). */
static int fusible(const struct graph *g, int n, int strings)
{
        const struct graph_node *gn = &g->nodes[n];

        /* Equal and Where take strings, a fused chain does not: where strings may flow,
         * they run alone. */
        if (strings && (is_op(gn, "Equal") || is_op(gn, "Where")))
                return 0;

        /* Strings stay out of chains: the executor lets them reach a few operators only,
         * and a CastLike's target is only known in the run. */
        if (is_op(gn, "CastLike"))
                return 0;
        for (int a = 0; a < gn->nattr; a++)
                if (is_op(gn, "Cast") && strncmp(gn->attr[a].name, "to", OPS_NAME_MAX) == 0 &&
                    gn->attr[a].type == OPS_ATTR_INT && gn->attr[a].i == PROTO_DTYPE_STRING)
                        return 0;

        return gn->def && (gn->def->flags & OPS_FLAG_ELEMENTWISE) && gn->def != &graph_fused_def &&
               gn->def->run && gn->def->infer && gn->nout == 1 && gn->out[0] >= 0 &&
               gn->nin >= 1 && gn->nin <= OPS_MAX_INPUTS && !gn->nimplicit && !has_graph_attr(gn) &&
               gn->nattr < OPS_MAX_ATTRS;
}

/* Make the chain chain[0..len) one node, in place of its last node. */
static int fuse_chain(struct graph *g, const int *chain, int len, char *removed,
                      struct graph_compile_stats *st)
{
        struct graph_fused *fz = graph_alloc(g, sizeof(*fz));
        int ext[OPS_MAX_INPUTS], next = 0;
        struct graph_node *last = &g->nodes[chain[len - 1]];
        struct ops_attr *attr;
        int *in;

        if (!fz || !(fz->steps = graph_alloc(g, sizeof(*fz->steps) * (size_t)len)))
                return -ENOMEM;
        fz->nsteps = len;
        fz->opset = g->opset;
        for (int s = 0; s < len; s++) {
                const struct graph_node *gn = &g->nodes[chain[s]];
                struct graph_fused_step *stp = &fz->steps[s];
                int prev = s ? g->nodes[chain[s - 1]].out[0] : -1;
                stp->def = gn->def;
                stp->name = gn->name;
                stp->nin = gn->nin;
                stp->nattr = gn->nattr;
                stp->attr = gn->attr;
                for (int i = 0; i < gn->nin; i++) {
                        int v = gn->in[i], e;
                        if (v < 0) {
                                stp->src[i] = -2;
                                continue;
                        }
                        if (s && v == prev) {
                                stp->src[i] = -1;
                                continue;
                        }
                        for (e = 0; e < next && ext[e] != v; e++)
                                ;
                        if (e == next) {
                                if (next == OPS_MAX_INPUTS)
                                        return 0; /* the caller keeps chains small enough */
                                ext[next++] = v;
                        }
                        stp->src[i] = e;
                }
        }
        in = graph_alloc(g, sizeof(int) * (size_t)(next ? next : 1));
        attr = graph_alloc(g, sizeof(*attr));
        if (!in || !attr)
                return -ENOMEM;
        memcpy(in, ext, sizeof(int) * (size_t)next);
        snprintf(attr->name, sizeof(attr->name), "chain");
        attr->type = OPS_ATTR_OPAQUE;
        attr->graph = fz;
        last->def = &graph_fused_def;
        last->op_type = "FusedElementwise";
        last->domain = "npud";
        last->in = in;
        last->nin = next;
        last->attr = attr;
        last->nattr = 1;
        for (int s = 0; s < len - 1; s++)
                removed[chain[s]] = 1;
        st->fused_groups++;
        st->fused_nodes += len;
        return 1;
}

/* Distinct external inputs chain[0..len) would take. */
static int chain_inputs(const struct graph *g, const int *chain, int len)
{
        int ext[OPS_MAX_INPUTS * 2], n = 0;

        for (int s = 0; s < len; s++) {
                const struct graph_node *gn = &g->nodes[chain[s]];
                for (int i = 0; i < gn->nin; i++) {
                        int v = gn->in[i], e;
                        if (v < 0 || (s && v == g->nodes[chain[s - 1]].out[0]))
                                continue;
                        for (e = 0; e < n && ext[e] != v; e++)
                                ;
                        if (e == n) {
                                if (n == OPS_MAX_INPUTS)
                                        return n + 1;
                                ext[n++] = v;
                        }
                }
        }
        return n;
}

static int pass_fuse(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        int *next = malloc(sizeof(int) * (size_t)(g->nnodes + 1));
        int *hasprev = calloc((size_t)g->nnodes + 1, sizeof(int));
        int *reader = malloc(sizeof(int) * (size_t)(g->nvalues + 1));
        int chain[GRAPH_FUSE_MAX_STEPS], made = 0, rc = 0, strings = may_hold_strings(g);

        if (!next || !hasprev || !reader) {
                free(next);
                free(hasprev);
                free(reader);
                return -ENOMEM;
        }
        for (int v = 0; v < g->nvalues; v++)
                reader[v] = -1;
        for (int k = 0; k < g->nnodes; k++)
                for (int i = 0; i < g->nodes[k].nin; i++)
                        if (g->nodes[k].in[i] >= 0)
                                reader[g->nodes[k].in[i]] = k;
        /* next[n]: the only reader of n's output, when both may fuse */
        for (int n = 0; n < g->nnodes; n++) {
                int v, r;
                next[n] = -1;
                if (removed[n] || !fusible(g, n, strings))
                        continue;
                v = g->nodes[n].out[0];
                if (g->values[v].uses != 1 || g->values[v].output >= 0)
                        continue;
                r = reader[v];
                if (r < 0 || removed[r] || !fusible(g, r, strings) || hasprev[r])
                        continue;
                next[n] = r;
                hasprev[r] = 1;
        }
        for (int k = 0; k < g->nnodes && rc >= 0; k++) {
                int n = g->order[k], len = 0;
                if (removed[n] || hasprev[n] || next[n] < 0)
                        continue;
                for (int m = n; m >= 0; m = next[m]) {
                        chain[len++] = m;
                        if (len > 1 && chain_inputs(g, chain, len) > OPS_MAX_INPUTS) {
                                len--;
                                break;
                        }
                        if (len == GRAPH_FUSE_MAX_STEPS)
                                break;
                }
                if (len < 2)
                        continue;
                rc = fuse_chain(g, chain, len, removed, st);
                made += rc > 0;
        }
        free(next);
        free(hasprev);
        free(reader);
        return rc < 0 ? rc : made;
}

int graph_compile(struct graph *g, unsigned flags, char *err, size_t errlen)
{
        struct graph_compile_stats *st = graph_alloc(g, sizeof(*st));
        char *removed = NULL;
        int rc = 0;

        if (!st)
                return oom(err, errlen);
        st->flags = flags;
        st->nodes_before = g->nnodes;
        if (flags & GRAPH_COMPILE_PLAN)
                st->model_intermediate_bytes = graph_intermediate_bytes(g);
        g->stats = st;
        removed = calloc((size_t)g->nnodes + 1, 1);
        if (!removed)
                return oom(err, errlen);
        /* Constants folded at load are computed as the graph's runs compute: under its
         * accumulation's variant (the tuning pass resets the variant). */
        if (graph_accumulate_variant(g->accumulate) >= 0)
                ops_sgemm_force(graph_accumulate_variant(g->accumulate));
        /* One pass at a time, each followed by a compaction, so that every pass sees a
         * graph with current uses and order. */
        /* The pattern passes (GELU, LayerNormalization, then epilogues, which may take a
         * Gelu just made) go before the elementwise chains, which would split them. */
        for (int pass = 0; pass < 8 && rc >= 0; pass++) {
                static const unsigned bit[8] = { GRAPH_COMPILE_FOLD, GRAPH_COMPILE_BN,
                                                 GRAPH_COMPILE_DEAD, GRAPH_COMPILE_PATTERNS,
                                                 GRAPH_COMPILE_PATTERNS, GRAPH_COMPILE_PATTERNS,
                                                 GRAPH_COMPILE_PATTERNS, GRAPH_COMPILE_FUSE };
                if (!(flags & bit[pass]))
                        continue;
                memset(removed, 0, (size_t)g->nnodes + 1);
                switch (pass) {
                case 0: rc = pass_fold(g, st, removed); break;
                case 1: rc = pass_bn(g, st, removed); break;
                case 2: rc = pass_dead(g, st, removed); break;
                case 3: rc = graph_pass_gelu(g, st, removed); break;
                case 4: rc = graph_pass_layernorm(g, st, removed); break;
                case 5: rc = graph_pass_epilogue(g, st, removed); break;
                case 6: rc = graph_pass_softmax(g, st, removed); break;
                default: rc = pass_fuse(g, st, removed); break;
                }
                if (rc > 0 && compact(g, removed, err, errlen) < 0) {
                        free(removed);
                        ops_sgemm_force(OPS_SGEMM_AUTO);
                        return -EINVAL;
                }
        }
        free(removed);
        ops_sgemm_force(OPS_SGEMM_AUTO);
        if (rc < 0)
                return oom(err, errlen);
        st->nodes_after = g->nnodes;
        if ((flags & GRAPH_COMPILE_PLAN) && graph_compile_plan(g, st, err, errlen) < 0)
                return -ENOMEM;
        if (flags & GRAPH_COMPILE_TUNE)
                graph_compile_tune(g, st);
        return 0;
}

/* Pattern fusions (compile.h, GRAPH_COMPILE_PATTERNS): each pass finds one subgraph
 * shape that exporters emit for a common operation and rewrites it as one node, in place of
 * the subgraph's last node (whose output keeps its value, so readers see no change); the
 * other nodes of the match are marked removed. A match needs every intermediate to be read
 * only inside the match and to be no graph output, and its constants to be initializers.
 *  - GELU in its erf form, x * 0.5 * (1 + Erf(x / sqrt 2)) in any of the orders exporters
 *    write it (Div by 1.4142 or Mul by 0.7071; the 0.5 on x, on the sum or last) -> Gelu;
 *  - LayerNormalization decomposed over the last axis: ReduceMean, Sub, Pow 2 (or Mul by
 *    itself), ReduceMean, Add eps, Sqrt, Div, then optionally Mul gamma and Add beta;
 *  - bias and activation epilogues: MatMul / Gemm / Conv whose only reader is an Add of a
 *    constant bias over the last dim (Conv: per channel), optionally followed by Relu,
 *    Sigmoid, Tanh, Gelu, LeakyRelu or Clip (or the activation alone) -> FusedGemm
 *    (compile-epilogue.c). A Conv without a bias takes the Add as its bias input instead;
 *  - attention's scale-mask-softmax: Softmax over the last axis of Add(Mul / Div(x, c), mask)
 *    (either part may be absent) -> FusedSoftmax (compile-softmax.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/dtype.h"
#include "compile.h"

static int is(const struct graph *g, int n, const char *op)
{
        const struct graph_node *gn;

        if (n < 0)
                return 0;
        gn = &g->nodes[n];
        return gn->def && (!gn->domain[0] || strcmp(gn->domain, "ai.onnx") == 0) &&
               strcmp(gn->op_type, op) == 0 && !gn->nimplicit;
}

/* The only reader of v, when v is read once, by a live node, and is no graph output. */
static int reader(const struct graph *g, const char *removed, int v)
{
        if (v < 0 || g->values[v].uses != 1 || g->values[v].output >= 0)
                return -1;
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                for (int i = 0; i < gn->nimplicit; i++)
                        if (gn->implicit[i] == v)
                                return -1;
                for (int i = 0; i < gn->nin; i++)
                        if (gn->in[i] == v)
                                return removed[n] ? -1 : n;
        }
        return -1;
}

/* The producer of intermediate v (which must be read nowhere else), or -1. */
static int only_producer(const struct graph *g, const char *removed, int v)
{
        int p;

        if (v < 0 || g->values[v].kind != GRAPH_VALUE_NODE || g->values[v].uses != 1 ||
            g->values[v].output >= 0)
                return -1;
        p = g->values[v].producer;
        return p >= 0 && !removed[p] ? p : -1;
}

/* A one-element float initializer: 1 and its value in *x. */
static int const_f(const struct graph *g, int v, double *x)
{
        const struct ops_tensor *t;

        if (v < 0 || g->values[v].kind != GRAPH_VALUE_INIT)
                return 0;
        t = g->values[v].tensor;
        if (ops_tensor_numel(t) != 1 || !t->data)
                return 0;
        if (t->dtype == PROTO_DTYPE_FLOAT32)
                *x = *(const float *)t->data;
        else if (t->dtype == PROTO_DTYPE_FLOAT64)
                *x = *(const double *)t->data;
        else
                return 0;
        return 1;
}

static int const_is(const struct graph *g, int v, double want, double tol)
{
        double x;

        return const_f(g, v, &x) && fabs(x - want) <= tol;
}

/* The other input of binary node n, given that one of them is v; -1 when neither is. */
static int other(const struct graph *g, int n, int v)
{
        const struct graph_node *gn = &g->nodes[n];

        if (gn->nin != 2 || gn->nout != 1)
                return -1;
        if (gn->in[0] == v)
                return gn->in[1];
        if (gn->in[1] == v)
                return gn->in[0];
        return -1;
}

static int out0(const struct graph *g, int n)
{
        return g->nodes[n].nout >= 1 ? g->nodes[n].out[0] : -1;
}

/* Node n becomes op (def) over the given inputs and attributes. */
static int rewrite(struct graph *g, int n, const struct ops_def *def, const char *op,
                   const char *domain, int nin, const int *in, int nattr,
                   const struct ops_attr *attr)
{
        struct graph_node *gn = &g->nodes[n];
        int *nin_p = graph_alloc(g, sizeof(int) * (size_t)(nin ? nin : 1));
        struct ops_attr *na = nattr ? graph_alloc(g, sizeof(*na) * (size_t)nattr) : NULL;

        if (!nin_p || (nattr && !na))
                return -ENOMEM;
        memcpy(nin_p, in, sizeof(int) * (size_t)nin);
        if (nattr)
                memcpy(na, attr, sizeof(*na) * (size_t)nattr);
        gn->def = def;
        gn->op_type = (char *)op;
        gn->domain = (char *)domain;
        gn->in = nin_p;
        gn->nin = nin;
        gn->attr = na;
        gn->nattr = nattr;
        gn->nout = 1;
        gn->variant = 0;
        return 0;
}

/* ------------------------------------------------------------------------------ GELU */

/* Erf node e inside x * 0.5 * (1 + Erf(x / sqrt 2)): 1 when rewritten. */
static int match_gelu(struct graph *g, char *removed, int e, const struct ops_def *gelu)
{
        int kill[4], nk = 0, dn, x = -1, a, m1, o, last;
        const struct graph_node *en = &g->nodes[e];

        if (en->nin != 1 || en->nout != 1)
                return 0;
        dn = only_producer(g, removed, en->in[0]);
        if (dn < 0)
                return 0;
        if (is(g, dn, "Div") && g->nodes[dn].nin == 2 &&
            const_is(g, g->nodes[dn].in[1], M_SQRT2, 1e-3))
                x = g->nodes[dn].in[0];
        else if (is(g, dn, "Mul") && g->nodes[dn].nin == 2) {
                if (const_is(g, g->nodes[dn].in[1], M_SQRT1_2, 1e-3))
                        x = g->nodes[dn].in[0];
                else if (const_is(g, g->nodes[dn].in[0], M_SQRT1_2, 1e-3))
                        x = g->nodes[dn].in[1];
        }
        if (x < 0 || g->values[x].kind == GRAPH_VALUE_INIT)
                return 0;
        kill[nk++] = dn;
        kill[nk++] = e;
        a = reader(g, removed, out0(g, e));
        if (a < 0 || !is(g, a, "Add") || !const_is(g, other(g, a, out0(g, e)), 1.0, 1e-6))
                return 0;
        kill[nk++] = a;
        m1 = reader(g, removed, out0(g, a));
        if (m1 < 0 || !is(g, m1, "Mul") || (o = other(g, m1, out0(g, a))) < 0)
                return 0;
        if (o == x || const_is(g, o, 0.5, 1e-6)) {
                /* (x * (1 + erf)) * 0.5 or (0.5 * (1 + erf)) * x */
                int m2 = reader(g, removed, out0(g, m1)), p;
                if (m2 < 0 || !is(g, m2, "Mul") || (p = other(g, m2, out0(g, m1))) < 0)
                        return 0;
                if (!(o == x ? const_is(g, p, 0.5, 1e-6) : p == x))
                        return 0;
                kill[nk++] = m1;
                last = m2;
        } else {
                /* (x * 0.5) * (1 + erf) */
                int h = only_producer(g, removed, o), q;
                if (h < 0 || !is(g, h, "Mul") || (q = other(g, h, x)) < 0 || !const_is(g, q, 0.5, 1e-6))
                        return 0;
                kill[nk++] = h;
                last = m1;
        }
        if (rewrite(g, last, gelu, "Gelu", "", 1, &x, 0, NULL) < 0)
                return -ENOMEM;
        for (int k = 0; k < nk; k++)
                removed[kill[k]] = 1;
        return 1;
}

int graph_pass_gelu(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        const struct ops_def *gelu = ops_lookup_onnx(NULL, "Gelu", 20);
        int made = 0;

        if (!gelu)
                return 0;
        for (int k = 0; k < g->nnodes; k++) {
                int n = g->order[k], rc;
                if (removed[n] || !is(g, n, "Erf"))
                        continue;
                rc = match_gelu(g, removed, n, gelu);
                if (rc < 0)
                        return rc;
                made += rc;
        }
        st->gelu_fused += made;
        return made;
}

/* ------------------------------------------------------------------ LayerNormalization */

/* ReduceMean node n over the last axis only, keeping dims (axes attribute before opset 18,
 * an initializer input from 18). */
static int mean_last(const struct graph *g, int n, int x)
{
        const struct graph_node *gn = &g->nodes[n];
        const int64_t *axes = NULL;
        int64_t nax = 0, keep = 1, rank = g->values[x].ndim;

        for (int a = 0; a < gn->nattr; a++) {
                if (strcmp(gn->attr[a].name, "keepdims") == 0 && gn->attr[a].type == OPS_ATTR_INT)
                        keep = gn->attr[a].i;
                else if (strcmp(gn->attr[a].name, "axes") == 0 && gn->attr[a].type == OPS_ATTR_INTS) {
                        axes = gn->attr[a].ints;
                        nax = gn->attr[a].n;
                }
        }
        if (gn->nin >= 2 && gn->in[1] >= 0) {
                const struct graph_value *v = &g->values[gn->in[1]];
                if (axes || v->kind != GRAPH_VALUE_INIT || v->tensor->dtype != PROTO_DTYPE_INT64)
                        return 0;
                axes = v->tensor->data;
                nax = ops_tensor_numel(v->tensor);
        }
        if (!keep || nax != 1 || !axes || gn->in[0] != x)
                return 0;
        return axes[0] == -1 || (rank >= 1 && axes[0] == rank - 1);
}

/* A float32 initializer that broadcasts over the last axis only: [C] or [1, ..., C]. */
static int last_axis_param(const struct graph *g, int v)
{
        const struct ops_tensor *t;

        if (v < 0 || g->values[v].kind != GRAPH_VALUE_INIT)
                return 0;
        t = g->values[v].tensor;
        if (t->dtype != PROTO_DTYPE_FLOAT32 || t->ndim < 1 || !t->data)
                return 0;
        for (int d = 0; d + 1 < t->ndim; d++)
                if (t->dims[d] != 1)
                        return 0;
        return 1;
}

/* ReduceMean node r1 starting a decomposed LayerNormalization: 1 when rewritten. */
static int match_ln(struct graph *g, char *removed, int r1, const struct ops_def *ln)
{
        int kill[10], nk = 0, x = g->nodes[r1].nin >= 1 ? g->nodes[r1].in[0] : -1;
        int sub, dv, sq = -1, dn = -1, r2, ad, sr, last, gamma = -1, beta = -1, readers = 0;
        double eps;

        if (x < 0 || !mean_last(g, r1, x) || g->values[x].dtype != PROTO_DTYPE_FLOAT32)
                return 0;
        kill[nk++] = r1;
        sub = reader(g, removed, out0(g, r1));
        if (sub < 0 || !is(g, sub, "Sub") || g->nodes[sub].in[0] != x ||
            g->nodes[sub].in[1] != out0(g, r1))
                return 0;
        kill[nk++] = sub;
        dv = out0(g, sub);
        if (g->values[dv].output >= 0)
                return 0;
        /* x - mean: read by the square and by the final Div, nothing else */
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                int hits = 0;
                for (int i = 0; i < gn->nin; i++)
                        hits += gn->in[i] == dv;
                for (int i = 0; i < gn->nimplicit; i++)
                        if (gn->implicit[i] == dv)
                                return 0;
                if (!hits)
                        continue;
                if (removed[n])
                        return 0;
                readers += hits;
                if (is(g, n, "Pow") && gn->nin == 2 && gn->in[0] == dv && hits == 1 &&
                    const_is(g, gn->in[1], 2.0, 0))
                        sq = n;
                else if (is(g, n, "Mul") && gn->nin == 2 && hits == 2)
                        sq = n;
                else if (is(g, n, "Div") && gn->nin == 2 && gn->in[0] == dv && hits == 1)
                        dn = n;
                else
                        return 0;
        }
        if (sq < 0 || dn < 0 || readers != g->values[dv].uses)
                return 0;
        kill[nk++] = sq;
        r2 = reader(g, removed, out0(g, sq));
        if (r2 < 0 || !is(g, r2, "ReduceMean") || !mean_last(g, r2, out0(g, sq)))
                return 0;
        kill[nk++] = r2;
        ad = reader(g, removed, out0(g, r2));
        if (ad < 0 || !is(g, ad, "Add") || !const_f(g, other(g, ad, out0(g, r2)), &eps) || eps < 0)
                return 0;
        kill[nk++] = ad;
        sr = reader(g, removed, out0(g, ad));
        if (sr < 0 || !is(g, sr, "Sqrt") || reader(g, removed, out0(g, sr)) != dn ||
            g->nodes[dn].in[1] != out0(g, sr))
                return 0;
        kill[nk++] = sr;
        last = dn;
        int m = reader(g, removed, out0(g, dn));
        if (m >= 0 && is(g, m, "Mul") && last_axis_param(g, other(g, m, out0(g, dn)))) {
                gamma = other(g, m, out0(g, dn));
                kill[nk++] = last;
                last = m;
                int b = reader(g, removed, out0(g, m));
                if (b >= 0 && is(g, b, "Add") && last_axis_param(g, other(g, b, out0(g, m)))) {
                        beta = other(g, b, out0(g, m));
                        kill[nk++] = last;
                        last = b;
                }
        }
        if (gamma < 0) {
                /* Scale is required: ones over the last axis, when the model fixes it */
                int64_t c = g->values[x].ndim >= 1 ? g->values[x].dims[g->values[x].ndim - 1] : -1;
                char name[256];
                struct ops_tensor *t;
                float *one;
                if (c < 1 || c > (1 << 24))
                        return 0;
                for (int i = 0;; i++) {
                        snprintf(name, sizeof(name), "%.200s/ln_ones%d", g->nodes[last].name, i);
                        if (graph_find_value(g, name) < 0)
                                break;
                }
                gamma = graph_add_value(g, name, GRAPH_VALUE_INIT, PROTO_DTYPE_FLOAT32, 1, &c);
                t = graph_alloc(g, sizeof(*t));
                one = graph_alloc(g, sizeof(float) * (size_t)c);
                if (gamma < 0 || !t || !one)
                        return -ENOMEM;
                for (int64_t i = 0; i < c; i++)
                        one[i] = 1.0f;
                t->dtype = PROTO_DTYPE_FLOAT32;
                t->ndim = 1;
                t->dims[0] = c;
                t->data = one;
                g->values[gamma].tensor = t;
        }
        struct ops_attr at[2] = { { .name = "axis", .type = OPS_ATTR_INT, .i = -1 },
                                  { .name = "epsilon", .type = OPS_ATTR_FLOAT, .f = eps } };
        int in[3] = { x, gamma, beta };
        if (rewrite(g, last, ln, "LayerNormalization", "", beta >= 0 ? 3 : 2, in, 2, at) < 0)
                return -ENOMEM;
        for (int k = 0; k < nk; k++)
                removed[kill[k]] = 1;
        return 1;
}

int graph_pass_layernorm(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        const struct ops_def *ln = ops_lookup_onnx(NULL, "LayerNormalization", 17);
        int made = 0;

        if (!ln)
                return 0;
        for (int k = 0; k < g->nnodes; k++) {
                int n = g->order[k], rc;
                if (removed[n] || !is(g, n, "ReduceMean"))
                        continue;
                rc = match_ln(g, removed, n, ln);
                if (rc < 0)
                        return rc;
                made += rc;
        }
        st->layernorm_fused += made;
        return made;
}

/* -------------------------------------------------------------- bias and activation */

static const char *const epilogue_acts[] = { "Relu", "Sigmoid", "Tanh", "Gelu", "LeakyRelu", "Clip" };

static int is_act(const struct graph *g, int n)
{
        if (n < 0 || g->nodes[n].nout != 1)
                return 0;
        for (size_t i = 0; i < sizeof(epilogue_acts) / sizeof(epilogue_acts[0]); i++)
                if (is(g, n, epilogue_acts[i])) {
                        /* Clip's bounds must be constants (the epilogue takes them as inputs) */
                        for (int k = 1; k < g->nodes[n].nin; k++)
                                if (g->nodes[n].in[k] >= 0 &&
                                    g->values[g->nodes[n].in[k]].kind != GRAPH_VALUE_INIT)
                                        return 0;
                        return 1;
                }
        return 0;
}

/* A bias the epilogue takes: float32 [N] for MatMul / Gemm; for Conv with weights of rank r
 * and M output channels, [M, 1, ...] of rank r - 1 or [1, M, 1, ...] of rank r. */
static int bias_ok(const struct graph *g, int c, int b)
{
        const struct ops_tensor *t, *w;

        if (b < 0 || g->values[b].kind != GRAPH_VALUE_INIT)
                return 0;
        t = g->values[b].tensor;
        if (t->dtype != PROTO_DTYPE_FLOAT32 || !t->data)
                return 0;
        if (!is(g, c, "Conv"))
                return t->ndim == 1;
        if (g->nodes[c].in[1] < 0 || g->values[g->nodes[c].in[1]].kind != GRAPH_VALUE_INIT)
                return 0;
        w = g->values[g->nodes[c].in[1]].tensor;
        int lead = t->ndim == w->ndim ? 1 : t->ndim == w->ndim - 1 ? 0 : -1;
        if (lead < 0 || (lead && t->dims[0] != 1) || t->dims[lead] != w->dims[0])
                return 0;
        for (int d = lead + 1; d < t->ndim; d++)
                if (t->dims[d] != 1)
                        return 0;
        return 1;
}

/* A Conv without bias takes bias b as its third input, as [M]. */
static int conv_take_bias(struct graph *g, int c, int b)
{
        const struct ops_tensor *t = g->values[b].tensor;
        struct graph_node *cn = &g->nodes[c];
        struct ops_tensor *nt = graph_alloc(g, sizeof(*nt));
        int *in = graph_alloc(g, sizeof(int) * 3);
        char name[256];
        int v;

        if (!nt || !in)
                return -ENOMEM;
        for (int i = 0;; i++) {
                snprintf(name, sizeof(name), "%.200s/bias%d", cn->name, i);
                if (graph_find_value(g, name) < 0)
                        break;
        }
        *nt = *t;
        nt->ndim = 1;
        nt->dims[0] = ops_tensor_numel(t);
        v = graph_add_value(g, name, GRAPH_VALUE_INIT, PROTO_DTYPE_FLOAT32, 1, nt->dims);
        if (v < 0)
                return v;
        g->values[v].tensor = nt;
        in[0] = cn->in[0];
        in[1] = cn->in[1];
        in[2] = v;
        cn->in = in;
        cn->nin = 3;
        return 0;
}

/* The shapes the model fixes, per value (graph_known_propagate over the nodes not removed);
 * dtype 0 where unknown. NULL when memory is short. */
static struct ops_tensor *static_shapes(const struct graph *g, const char *removed)
{
        struct ops_tensor *known = calloc((size_t)g->nvalues + 1, sizeof(*known));
        struct ops_call *call = malloc(sizeof(*call));

        if (known && call)
                graph_known_propagate(g, removed, known, call);
        free(call);
        return known;
}

/* Value r is a float32 residual for output v: both of the same shape, fixed by the model. */
static int resid_ok(const struct ops_tensor *known, int r, int v)
{
        if (!known || r < 0 || v < 0 || r == v)
                return 0;
        const struct ops_tensor *a = &known[r], *b = &known[v];

        return a->dtype == PROTO_DTYPE_FLOAT32 &&
               b->dtype == PROTO_DTYPE_FLOAT32 && a->ndim == b->ndim && a->ndim >= 1 &&
               memcmp(a->dims, b->dims, sizeof(a->dims[0]) * (size_t)a->ndim) == 0;
}

static int match_epilogue(struct graph *g, char *removed, int c, const struct ops_tensor *known,
                          struct graph_compile_stats *st)
{
        struct graph_node *cn = &g->nodes[c];
        int ad, act = -1, bias = -1, resid = -1, last = c, nk = 0, kill[3];
        int in[OPS_MAX_INPUTS];
        struct graph_epilogue *ep;
        struct ops_attr attr[OPS_MAX_ATTRS];

        if (cn->nout != 1 || cn->nin > OPS_MAX_INPUTS - 3 || cn->nattr >= OPS_MAX_ATTRS)
                return 0;
        /* (a folded BatchNormalization's "bn_affine" goes with the Conv into the FusedGemm) */
        for (int a = 0; a < cn->nattr; a++)
                if (cn->attr[a].type == OPS_ATTR_GRAPH ||
                    (cn->attr[a].type == OPS_ATTR_OPAQUE && strcmp(cn->attr[a].name, "bn_affine") != 0))
                        return 0;
        ad = reader(g, removed, out0(g, c));
        if (ad >= 0 && is(g, ad, "Add") && bias_ok(g, c, other(g, ad, out0(g, c)))) {
                bias = other(g, ad, out0(g, c));
                kill[nk++] = last;
                last = ad;
        }
        /* a residual Add: a tensor of the output's shape (no broadcast) */
        int ra = reader(g, removed, out0(g, last));
        if (known && ra >= 0 && is(g, ra, "Add") && resid_ok(known, other(g, ra, out0(g, last)), out0(g, c))) {
                resid = other(g, ra, out0(g, last));
                kill[nk++] = last;
                last = ra;
        }
        act = reader(g, removed, out0(g, last));
        if (act >= 0 && is_act(g, act) && g->nodes[act].nin <= 3 &&
            g->nodes[act].nattr <= GRAPH_EPILOGUE_ATTRS) {
                kill[nk++] = last;
                last = act;
        } else {
                act = -1;
        }
        if (last == c)
                return 0;
        if (bias >= 0 && is(g, c, "Conv") && (cn->nin < 3 || cn->in[2] < 0)) {
                /* Conv adds a per-channel bias itself */
                if (conv_take_bias(g, c, bias) < 0)
                        return -ENOMEM;
                cn = &g->nodes[c];
                bias = -1;
                if (act < 0 && resid < 0) {
                        cn->out[0] = out0(g, ad);
                        g->values[cn->out[0]].producer = c;
                        removed[ad] = 1;
                        st->epilogue_fused++;
                        return 1;
                }
        }
        ep = graph_alloc(g, sizeof(*ep));
        if (!ep)
                return -ENOMEM;
        ep->op = cn->def;
        ep->nin_op = cn->nin;
        ep->bias = bias >= 0;
        ep->resid = resid >= 0;
        ep->act = act >= 0 ? g->nodes[act].def : NULL;
        ep->act_nin = act >= 0 ? g->nodes[act].nin : 0;
        ep->act_nattr = act >= 0 ? g->nodes[act].nattr : 0;
        if (ep->act_nattr)
                memcpy(ep->act_attr, g->nodes[act].attr, sizeof(ep->act_attr[0]) * (size_t)ep->act_nattr);
        ep->opset = g->opset;
        int nin = 0;
        for (int i = 0; i < cn->nin; i++)
                in[nin++] = cn->in[i];
        if (bias >= 0)
                in[nin++] = bias;
        if (resid >= 0)
                in[nin++] = resid;
        for (int i = 1; i < ep->act_nin; i++)
                in[nin++] = g->nodes[act].in[i];
        if (cn->nattr)
                memcpy(attr, cn->attr, sizeof(attr[0]) * (size_t)cn->nattr);
        memset(&attr[cn->nattr], 0, sizeof(attr[0]));
        snprintf(attr[cn->nattr].name, sizeof(attr[0].name), "epilogue");
        attr[cn->nattr].type = OPS_ATTR_OPAQUE;
        attr[cn->nattr].graph = ep;
        if (rewrite(g, last, &graph_fused_gemm_def, "FusedGemm", "npud", nin, in, cn->nattr + 1,
                    attr) < 0)
                return -ENOMEM;
        /* named after the operator: its failures (shapes that meet only at run time) are
         * the likely ones, and the model knows it by that name */
        g->nodes[last].name = g->nodes[c].name;
        for (int k = 0; k < nk; k++)
                removed[kill[k]] = 1;
        st->epilogue_fused++;
        return 1;
}

int graph_pass_epilogue(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        /* a residual is fused only where the model fixes both shapes: NULL fuses none */
        struct ops_tensor *known = static_shapes(g, removed);
        int made = 0;

        for (int k = 0; k < g->nnodes; k++) {
                int n = g->order[k], rc;
                if (removed[n] || !(is(g, n, "MatMul") || is(g, n, "Gemm") || is(g, n, "Conv")))
                        continue;
                rc = match_epilogue(g, removed, n, known, st);
                if (rc < 0) {
                        free(known);
                        return rc;
                }
                made += rc;
        }
        free(known);
        return made;
}

/* ------------------------------------------------------------ scale-mask-softmax */

/* Node p = Mul(x, c) / Mul(c, x) / Div(x, c) with c a one-element float32 initializer: 1 and
 * x, c, div. */
static int scaled(const struct graph *g, int p, int *x, int *c, int *div)
{
        const struct graph_node *pn;
        double v;

        if (p < 0 || g->nodes[p].nin != 2)
                return 0;
        pn = &g->nodes[p];
        for (int k = 0; k < 2; k++) {
                int cv = pn->in[k], xv = pn->in[1 - k];
                if (!const_f(g, cv, &v) || g->values[cv].tensor->dtype != PROTO_DTYPE_FLOAT32 ||
                    g->values[xv].kind == GRAPH_VALUE_INIT)
                        continue;
                if (is(g, p, "Div") && k == 1) {
                        *div = 1;
                } else if (is(g, p, "Mul")) {
                        *div = 0;
                } else {
                        continue;
                }
                *x = xv;
                *c = cv;
                return 1;
        }
        return 0;
}

/* Softmax node s over the last axis: 1 when rewritten. */
static int match_softmax(struct graph *g, char *removed, int s)
{
        struct graph_node *sn = &g->nodes[s];
        int in = sn->nin == 1 ? sn->in[0] : -1, a, x = -1, c = -1, div = 0, mask = -1, kill[2], nk = 0;
        int64_t axis = sn->def->since_version >= 13 ? -1 : 1, rank;
        struct graph_softmax *sm;

        if (in < 0 || sn->nout != 1)
                return 0;
        for (int k = 0; k < sn->nattr; k++)
                if (strcmp(sn->attr[k].name, "axis") == 0 && sn->attr[k].type == OPS_ATTR_INT)
                        axis = sn->attr[k].i;
        rank = g->values[in].ndim;
        if (axis != -1 && !(rank >= 1 && axis == rank - 1))
                return 0;
        a = only_producer(g, removed, in);
        if (a < 0)
                return 0;
        if (is(g, a, "Add") && g->nodes[a].nin == 2) {
                int u = g->nodes[a].in[0], w = g->nodes[a].in[1], p;
                kill[nk++] = a;
                if ((p = only_producer(g, removed, u)) >= 0 && scaled(g, p, &x, &c, &div)) {
                        mask = w;
                        kill[nk++] = p;
                } else if ((p = only_producer(g, removed, w)) >= 0 && scaled(g, p, &x, &c, &div)) {
                        mask = u;
                        kill[nk++] = p;
                } else {
                        x = u;
                        mask = w;
                }
        } else if (scaled(g, a, &x, &c, &div)) {
                kill[nk++] = a;
        } else {
                return 0;
        }
        sm = graph_alloc(g, sizeof(*sm));
        if (!sm)
                return -ENOMEM;
        sm->scale = c >= 0;
        sm->div = div;
        sm->c = c >= 0 ? g->values[c].tensor : NULL;
        sm->mask = mask >= 0;
        sm->opset = g->opset;
        struct ops_attr at = { .name = "softmax", .type = OPS_ATTR_OPAQUE, .graph = sm };
        int ins[2] = { x, mask };
        if (rewrite(g, s, &graph_fused_softmax_def, "FusedSoftmax", "npud", mask >= 0 ? 2 : 1, ins,
                    1, &at) < 0)
                return -ENOMEM;
        for (int k = 0; k < nk; k++)
                removed[kill[k]] = 1;
        return 1;
}

int graph_pass_softmax(struct graph *g, struct graph_compile_stats *st, char *removed)
{
        int made = 0;

        for (int k = 0; k < g->nnodes; k++) {
                int n = g->order[k], rc;
                if (removed[n] || !is(g, n, "Softmax"))
                        continue;
                rc = match_softmax(g, removed, n);
                if (rc < 0)
                        return rc;
                made += rc;
        }
        st->softmax_fused += made;
        return made;
}

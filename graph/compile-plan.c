/* Static memory plan (see compile.h). Shapes are propagated from the initializers and from
 * the inputs whose dtype and shape the model fixes; every node output of known size that is
 * not a graph output is an intermediate to place. Its lifetime runs from the step of its
 * producer to the step of its last reader (subgraph readers included). A fused elementwise
 * node whose input of the same size dies at that node writes over it: the two share one
 * block (a group) whose lifetime is the union; so does a Reshape (Flatten, Squeeze,
 * Unsqueeze, Identity) with its input, whose copy then has nothing to do. Groups are placed largest first at the lowest
 * offset that no group alive at the same time covers (first fit over the placed groups
 * sorted by offset). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/control.h"
#include "proto/dtype.h"
#include "compile.h"

int graph_compile_plan(struct graph *g, struct graph_compile_stats *st, char *err, size_t errlen);

#define PLAN_MAX_GROUPS 20000 /* beyond that the quadratic placement is not worth its time */

struct group {
        int64_t size, off;
        int start, end;
};

/* Operators whose output is their first input's bytes unchanged (a new shape at most). */
static int same_bytes_op(const struct graph_node *gn)
{
        static const char *const ops[] = { "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity" };

        if (*gn->domain || !gn->def)
                return 0;
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
                if (strcmp(gn->def->name, ops[i]) == 0)
                        return 1;
        return 0;
}

static int no_subgraphs(void *graph_ctx, const void *graph, int nin, const struct ops_tensor *in,
                        int *ret_nout, struct ops_tensor *out, int max_out, char *err,
                        size_t errlen)
{
        *ret_nout = 0;
        snprintf(err, errlen, "no subgraphs while planning");
        return -ENOTSUP;
}

void graph_known_static(const struct graph *g, struct ops_tensor *known)
{
        for (int v = 0; v < g->nvalues; v++) {
                const struct graph_value *gv = &g->values[v];
                int fixed = gv->kind == GRAPH_VALUE_INPUT && gv->dtype && gv->ndim >= 0;
                for (int d = 0; fixed && d < gv->ndim; d++)
                        fixed = gv->dims[d] >= 0;
                if (gv->kind == GRAPH_VALUE_INIT) {
                        known[v] = *gv->tensor;
                } else if (fixed) {
                        known[v].dtype = (uint8_t)gv->dtype;
                        known[v].ndim = gv->ndim;
                        memcpy(known[v].dims, gv->dims, sizeof(gv->dims[0]) * (size_t)gv->ndim);
                }
        }
}

int graph_infer_static(const struct graph *g, const struct graph_node *gn, const struct ops_tensor *known,
                       struct ops_call *call)
{
        char msg[256];
        int ok;

        if (!gn->def || gn->nin > OPS_MAX_INPUTS || gn->nout > OPS_MAX_OUTPUTS || gn->nattr > OPS_MAX_ATTRS)
                return 0;
        memset(call, 0, sizeof(*call));
        call->nin = gn->nin;
        for (int i = 0; i < gn->nin; i++) {
                if (gn->in[i] < 0)
                        continue;
                if (!known[gn->in[i]].dtype)
                        return 0;
                call->in[i] = known[gn->in[i]];
        }
        call->nout = gn->nout;
        call->nattr = gn->nattr;
        if (gn->nattr)
                memcpy(call->attr, gn->attr, sizeof(call->attr[0]) * (size_t)gn->nattr);
        call->opset = g->opset;
        call->graph_run = no_subgraphs;
        ok = ops_infer(gn->def, call, msg, sizeof(msg)) == 0;
        ops_control_forget();
        return ok;
}

void graph_known_propagate(const struct graph *g, const char *removed, struct ops_tensor *known,
                           struct ops_call *call)
{
        graph_known_static(g, known);
        for (int k = 0; k < g->nnodes; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                if ((removed && removed[g->order[k]]) || !graph_infer_static(g, gn, known, call))
                        continue;
                for (int j = 0; j < gn->nout; j++) {
                        int v = gn->out[j];
                        if (v < 0 || !call->out[j].dtype || ops_tensor_numel(&call->out[j]) < 0)
                                continue;
                        known[v] = call->out[j];
                        known[v].data = NULL;
                }
        }
}

static int64_t align_up(int64_t x)
{
        return (x + GRAPH_ALIGN - 1) / GRAPH_ALIGN * GRAPH_ALIGN;
}

/* Bytes of every value the model fixes (-1 where unknown). */
static void static_sizes(const struct graph *g, struct ops_tensor *known, int64_t *bytes)
{
        struct ops_call *call = malloc(sizeof(*call));

        graph_known_static(g, known);
        for (int v = 0; v < g->nvalues; v++)
                bytes[v] = -1;
        for (int k = 0; call && k < g->nnodes; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                int ok = graph_infer_static(g, gn, known, call);
                for (int j = 0; ok && j < gn->nout; j++) {
                        int v = gn->out[j];
                        int64_t n = ops_tensor_numel(&call->out[j]);
                        size_t es = proto_dtype_size(call->out[j].dtype);
                        if (v < 0 || !call->out[j].dtype || n < 0 || !es || n > INT64_MAX / 64 / (int64_t)es)
                                continue;
                        known[v] = call->out[j];
                        known[v].data = NULL;
                        bytes[v] = n * (int64_t)es;
                }
        }
        free(call);
}

uint64_t graph_intermediate_bytes(const struct graph *g)
{
        struct ops_tensor *known = calloc((size_t)g->nvalues + 1, sizeof(*known));
        int64_t *bytes = malloc(sizeof(int64_t) * ((size_t)g->nvalues + 1));
        uint64_t sum = 0;

        if (known && bytes) {
                static_sizes(g, known, bytes);
                for (int v = 0; v < g->nvalues; v++) {
                        const struct graph_value *gv = &g->values[v];
                        if (gv->kind == GRAPH_VALUE_NODE && gv->output < 0 && gv->producer >= 0 &&
                            bytes[v] >= 0)
                                sum += (uint64_t)bytes[v];
                }
        }
        free(known);
        free(bytes);
        return sum;
}

static int by_size_desc(const void *a, const void *b, void *arg)
{
        const struct group *gr = arg;
        int x = *(const int *)a, y = *(const int *)b;

        if (gr[x].size != gr[y].size)
                return gr[x].size < gr[y].size ? 1 : -1;
        return x - y;
}

static int by_off(const void *a, const void *b, void *arg)
{
        const struct group *gr = arg;
        int x = *(const int *)a, y = *(const int *)b;

        return gr[x].off < gr[y].off ? -1 : gr[x].off > gr[y].off;
}

int graph_compile_plan(struct graph *g, struct graph_compile_stats *st, char *err, size_t errlen)
{
        struct graph_plan *plan = graph_alloc(g, sizeof(*plan));
        struct ops_tensor *known = calloc((size_t)g->nvalues + 1, sizeof(*known));
        int64_t *bytes = malloc(sizeof(int64_t) * ((size_t)g->nvalues + 1));
        int *start = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
        int *end = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
        int *grp = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
        struct group *gr = malloc(sizeof(*gr) * ((size_t)g->nvalues + 1));
        int *idx = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
        int *live = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
        int ngr = 0, rc = 0;

        if (!plan || !known || !bytes || !start || !end || !grp || !gr || !idx || !live ||
            !(plan->offset = graph_alloc(g, sizeof(int64_t) * ((size_t)g->nvalues + 1))) ||
            !(plan->size = graph_alloc(g, sizeof(int64_t) * ((size_t)g->nvalues + 1)))) {
                snprintf(err, errlen, "out of memory while planning the graph's memory");
                rc = -ENOMEM;
                goto out;
        }
        plan->nvalues = g->nvalues;
        static_sizes(g, known, bytes);
        for (int v = 0; v < g->nvalues; v++) {
                const struct graph_value *gv = &g->values[v];
                plan->offset[v] = -1;
                plan->size[v] = 0;
                grp[v] = -1;
                start[v] = end[v] = -1;
                if (gv->kind != GRAPH_VALUE_NODE || gv->output >= 0 || gv->producer < 0)
                        bytes[v] = -1;
        }
        /* lifetimes in steps of the order */
        for (int k = 0; k < g->nnodes; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                for (int j = 0; j < gn->nout; j++)
                        if (gn->out[j] >= 0 && bytes[gn->out[j]] >= 0)
                                start[gn->out[j]] = end[gn->out[j]] = k;
                for (int i = 0; i < gn->nin + gn->nimplicit; i++) {
                        int v = i < gn->nin ? gn->in[i] : gn->implicit[i - gn->nin];
                        if (v >= 0 && bytes[v] >= 0 && start[v] >= 0)
                                end[v] = k;
                }
        }
        /* groups: one per value, or shared with an elementwise node's dying input */
        for (int k = 0; k < g->nnodes; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                for (int j = 0; j < gn->nout; j++) {
                        int v = gn->out[j], share = -1;
                        if (v < 0 || bytes[v] < 0 || start[v] < 0)
                                continue;
                        /* Only fused chains: a registry kernel whose output overlaps an
                         * input takes its scalar strided path (several times slower), while
                         * the fused kernel writes such a block through its stack buffers. */
                        /* Reshape and its kin copy their input unchanged: over itself, that
                         * copy is skipped (ops/shape.c) */
                        int ni = gn->def == &graph_fused_def ? gn->nin : same_bytes_op(gn) ? 1 : 0;
                        if (gn->nout == 1)
                                for (int i = 0; i < ni && share < 0; i++) {
                                        int u = gn->in[i];
                                        if (u >= 0 && grp[u] >= 0 && end[u] == k &&
                                            bytes[u] == bytes[v] && gr[grp[u]].end == k &&
                                            known[u].dtype == known[v].dtype)
                                                share = grp[u];
                                }
                        if (share >= 0) {
                                grp[v] = share;
                                gr[share].end = end[v];
                                st->inplace++;
                        } else {
                                grp[v] = ngr;
                                gr[ngr].size = align_up(bytes[v] ? bytes[v] : 1);
                                gr[ngr].start = start[v];
                                gr[ngr].end = end[v];
                                gr[ngr].off = -1;
                                ngr++;
                        }
                        st->planned++;
                        st->intermediate_bytes += (uint64_t)bytes[v];
                }
        }
        if (ngr > PLAN_MAX_GROUPS) {
                st->planned = st->inplace = 0;
                st->intermediate_bytes = 0;
                goto out; /* no plan: the run allocates as before */
        }
        for (int i = 0; i < ngr; i++)
                idx[i] = i;
        qsort_r(idx, (size_t)ngr, sizeof(int), by_size_desc, gr);
        for (int a = 0; a < ngr; a++) {
                struct group *x = &gr[idx[a]];
                int nlive = 0;
                int64_t off = 0;
                for (int b = 0; b < a; b++) {
                        const struct group *y = &gr[idx[b]];
                        if (y->start <= x->end && x->start <= y->end)
                                live[nlive++] = idx[b];
                }
                qsort_r(live, (size_t)nlive, sizeof(int), by_off, gr);
                for (int b = 0; b < nlive; b++) {
                        const struct group *y = &gr[live[b]];
                        if (y->off >= off + x->size)
                                break;
                        if (y->off + y->size > off)
                                off = y->off + y->size;
                }
                x->off = off;
                if ((uint64_t)(off + x->size) > plan->arena_bytes)
                        plan->arena_bytes = (uint64_t)(off + x->size);
        }
        for (int v = 0; v < g->nvalues; v++)
                if (grp[v] >= 0) {
                        plan->offset[v] = gr[grp[v]].off;
                        plan->size[v] = bytes[v];
                }
        st->arena_bytes = plan->arena_bytes;
        if (ngr)
                g->plan = plan;
out:
        free(known);
        free(bytes);
        free(start);
        free(end);
        free(grp);
        free(gr);
        free(idx);
        free(live);
        return rc;
}

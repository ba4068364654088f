/* The steps of a graph run and what each waits for (see steps.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "steps.h"
#include "util/err.h"

struct edge {
        int from, to;
};

struct edges {
        struct edge *e;
        size_t n, cap;
};

static int edge_add(struct edges *es, int from, int to)
{
        if (from == to)
                return 0;
        if (es->n == es->cap) {
                size_t cap = es->cap ? es->cap * 2 : 64;
                struct edge *n = realloc(es->e, cap * sizeof(*n));
                if (!n)
                        return -1;
                es->e = n;
                es->cap = cap;
        }
        es->e[es->n++] = (struct edge){ from, to };
        return 0;
}

static int edge_cmp(const void *a, const void *b)
{
        const struct edge *x = a, *y = b;

        if (x->from != y->from)
                return x->from < y->from ? -1 : 1;
        return x->to < y->to ? -1 : x->to > y->to;
}

/* Does node gn read value v (as an input or inside a subgraph)? */
static int node_reads(const struct graph_node *gn, int v)
{
        for (int i = 0; i < gn->nin; i++)
                if (gn->in[i] == v)
                        return 1;
        for (int i = 0; i < gn->nimplicit; i++)
                if (gn->implicit[i] == v)
                        return 1;
        return 0;
}

int graph_steps_build(struct graph *g, char *err, size_t errlen)
{
        int nn = g->nnodes, ns = nn + 2, last = nn + 1;
        int *pstep = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof(*pstep));
        struct edges es = { 0 };
        struct graph_steps *s;
        int rc = -ENOMEM;

        if (!pstep)
                goto out;
        /* producers: step k + 1 runs order[k]; inputs and initializers are step 0's */
        for (int k = 0; k < nn; k++) {
                const struct graph_node *gn = &g->nodes[g->order[k]];
                for (int j = 0; j < gn->nout; j++)
                        if (gn->out[j] >= 0)
                                pstep[gn->out[j]] = k + 1;
        }
        for (int k = 1; k <= nn; k++) {
                const struct graph_node *gn = &g->nodes[graph_step_node(g, k)];
                int any = 0;
                for (int i = 0; i < gn->nin + gn->nimplicit; i++) {
                        int v = i < gn->nin ? gn->in[i] : gn->implicit[i - gn->nin];
                        if (v < 0 || pstep[v] == 0)
                                continue;
                        if (edge_add(&es, pstep[v], k) < 0)
                                goto out;
                        any = 1;
                }
                if ((!any && edge_add(&es, 0, k) < 0) || edge_add(&es, k, last) < 0)
                        goto out;
        }
        if (!nn && edge_add(&es, 0, last) < 0)
                goto out;
        /* memory: values the plan lets share bytes */
        const struct graph_plan *p = g->plan;
        for (int a = 0; p && a < p->nvalues && a < g->nvalues; a++) {
                if (p->offset[a] < 0 || !pstep[a])
                        continue;
                for (int b = 0; b < p->nvalues && b < g->nvalues; b++) {
                        if (b == a || p->offset[b] < 0 || pstep[b] <= pstep[a] ||
                            p->offset[b] >= p->offset[a] + p->size[a] ||
                            p->offset[a] >= p->offset[b] + p->size[b])
                                continue;
                        /* b's bytes were a's: b's producer waits for a's producer and readers */
                        if (edge_add(&es, pstep[a], pstep[b]) < 0)
                                goto out;
                        for (int k = 1; k <= nn; k++)
                                if (k != pstep[b] && k < pstep[b] && node_reads(&g->nodes[graph_step_node(g, k)], a) &&
                                    edge_add(&es, k, pstep[b]) < 0)
                                        goto out;
                }
        }
        if (es.n)
                qsort(es.e, es.n, sizeof(es.e[0]), edge_cmp);
        size_t m = 0;
        for (size_t i = 0; i < es.n; i++)
                if (!m || es.e[i].from != es.e[m - 1].from || es.e[i].to != es.e[m - 1].to)
                        es.e[m++] = es.e[i];
        s = graph_alloc(g, sizeof(*s));
        if (!s || !(s->npred = graph_alloc(g, sizeof(int) * (size_t)ns)) ||
            !(s->succ_start = graph_alloc(g, sizeof(int) * (size_t)(ns + 1))) ||
            !(s->succ = graph_alloc(g, sizeof(int) * (m ? m : 1))))
                goto out;
        s->nsteps = ns;
        for (size_t i = 0; i < m; i++) {
                s->npred[es.e[i].to]++;
                s->succ_start[es.e[i].from + 1]++;
                s->succ[i] = es.e[i].to;
        }
        for (int k = 0; k < ns; k++)
                s->succ_start[k + 1] += s->succ_start[k];
        g->steps = s;
        rc = 0;
out:
        if (rc)
                err_set(err, errlen, rc, "out of memory for the steps of the graph");
        free(es.e);
        free(pstep);
        return rc;
}

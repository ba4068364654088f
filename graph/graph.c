/* Graph IR (see graph.h): value table with a name index, nodes, and the topological order
 * with cycle detection. Nothing here knows about ONNX files or runs anything. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/blas.h"
#include "util/siphash.h"
#include "graph.h"

struct graph *graph_new(struct graph *parent)
{
        struct graph *g = calloc(1, sizeof(*g));

        if (!g)
                return NULL;
        g->parent = parent;
        g->opset = parent ? parent->opset : 0;
        g->pack_limit = -1;
        return g;
}

void graph_set_accumulate(struct graph *g, int accumulate)
{
        g->accumulate = accumulate;
        for (int n = 0; n < g->nnodes; n++)
                for (int a = 0; a < g->nodes[n].nattr; a++)
                        if (g->nodes[n].attr[a].type == OPS_ATTR_GRAPH)
                                graph_set_accumulate((struct graph *)g->nodes[n].attr[a].graph, accumulate);
}

const char *graph_accumulate_name(int accumulate)
{
        return accumulate == GRAPH_ACCUMULATE_FLOAT64 ? "float64"
               : accumulate == GRAPH_ACCUMULATE_MIXED ? "mixed"
                                                      : "float32";
}

int graph_accumulate_variant(int accumulate)
{
        return accumulate == GRAPH_ACCUMULATE_FLOAT64 ? OPS_SGEMM_F64
               : accumulate == GRAPH_ACCUMULATE_MIXED ? OPS_SGEMM_MIXED
                                                      : -1;
}

int graph_accumulate_parse(const char *name)
{
        return !name                       ? -1
               : !strcmp(name, "float32") ? GRAPH_ACCUMULATE_FLOAT32
               : !strcmp(name, "float64") ? GRAPH_ACCUMULATE_FLOAT64
               : !strcmp(name, "mixed")   ? GRAPH_ACCUMULATE_MIXED
                                          : -1;
}

void graph_free(struct graph *g)
{
        if (!g)
                return;
        /* Subgraphs hang off GRAPH attributes; they are graphs of their own. */
        for (int n = 0; n < g->nnodes; n++)
                for (int a = 0; a < g->nodes[n].nattr; a++)
                        if (g->nodes[n].attr[a].type == OPS_ATTR_GRAPH)
                                graph_free((struct graph *)g->nodes[n].attr[a].graph);
        for (int n = 0; n < g->nnodes; n++)
        {
                ops_packed_b_free(g->nodes[n].packed);
                ops_packed_conv_free(g->nodes[n].pconv);
        }
        for (int i = 0; i < g->nallocs; i++)
                free(g->allocs[i]);
        if (g->storage_owned)
                free(g->storage);
        free(g->allocs);
        free(g->values);
        free(g->nodes);
        free(g->order);
        free(g->hash);
        free(g);
}

void *graph_alloc(struct graph *g, size_t size)
{
        void *p;

        if (g->nallocs == g->allocs_cap) {
                int cap = g->allocs_cap ? g->allocs_cap * 2 : 64;
                void **na = realloc(g->allocs, (size_t)cap * sizeof(*na));
                if (!na)
                        return NULL;
                g->allocs = na;
                g->allocs_cap = cap;
        }
        p = calloc(1, size ? size : 1);
        if (p)
                g->allocs[g->nallocs++] = p;
        return p;
}

char *graph_strndup(struct graph *g, const char *s, size_t n)
{
        char *p = graph_alloc(g, n + 1);

        if (p && n)
                memcpy(p, s, n);
        return p;
}

/* Value names come from the model, which a client wrote: a keyed hash (SipHash under a
 * per-process key) so that nobody can choose names that all probe the same slots and turn
 * the import quadratic. */
static uint32_t name_hash(const char *s)
{
        return (uint32_t)util_hash_str(s);
}

static void hash_put(int *tab, int cap, const char *name, int idx)
{
        uint32_t i = name_hash(name) & (uint32_t)(cap - 1);

        while (tab[i])
                i = (i + 1) & (uint32_t)(cap - 1);
        tab[i] = idx + 1;
}

/* Keep the table at most half full so probes stay short. */
static int hash_grow(struct graph *g)
{
        int cap = g->hash_cap ? g->hash_cap * 2 : 64;
        int *tab;

        if (g->nvalues + 1 <= g->hash_cap / 2)
                return 0;
        tab = calloc((size_t)cap, sizeof(*tab));
        if (!tab)
                return -ENOMEM;
        for (int v = 0; v < g->nvalues; v++)
                hash_put(tab, cap, g->values[v].name, v);
        free(g->hash);
        g->hash = tab;
        g->hash_cap = cap;
        return 0;
}

int graph_find_value(const struct graph *g, const char *name)
{
        uint32_t i;

        if (!g->hash_cap)
                return -1;
        i = name_hash(name) & (uint32_t)(g->hash_cap - 1);
        while (g->hash[i]) {
                int v = g->hash[i] - 1;
                if (strcmp(g->values[v].name, name) == 0)
                        return v;
                i = (i + 1) & (uint32_t)(g->hash_cap - 1);
        }
        return -1;
}

int graph_add_value(struct graph *g, const char *name, int kind, int dtype, int ndim,
                    const int64_t *dims)
{
        struct graph_value *v;
        size_t len = strlen(name);

        if (graph_find_value(g, name) >= 0)
                return -EEXIST;
        if (g->nvalues == g->values_cap) {
                int cap = g->values_cap ? g->values_cap * 2 : 32;
                struct graph_value *nv = realloc(g->values, (size_t)cap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                g->values = nv;
                g->values_cap = cap;
        }
        if (hash_grow(g) < 0)
                return -ENOMEM;
        v = &g->values[g->nvalues];
        memset(v, 0, sizeof(*v));
        v->name = graph_strndup(g, name, len);
        if (!v->name)
                return -ENOMEM;
        v->kind = kind;
        v->dtype = dtype;
        v->ndim = ndim;
        for (int d = 0; d < OPS_MAX_DIMS; d++)
                v->dims[d] = dims && d < ndim ? dims[d] : -1;
        v->producer = -1;
        v->outer = -1;
        v->output = -1;
        hash_put(g->hash, g->hash_cap, v->name, g->nvalues);
        return g->nvalues++;
}

int graph_resolve(struct graph *g, const char *name)
{
        int v = graph_find_value(g, name), p;

        if (v >= 0 || !g->parent)
                return v;
        p = graph_resolve(g->parent, name);
        if (p < 0)
                return p;
        const struct graph_value *pv = &g->parent->values[p];
        v = graph_add_value(g, name, GRAPH_VALUE_OUTER, pv->dtype, pv->ndim, pv->dims);
        if (v >= 0)
                g->values[v].outer = p;
        return v;
}

int graph_add_node(struct graph *g, const char *name, const char *op_type, const char *domain,
                   const struct ops_def *def)
{
        struct graph_node *n;
        char num[24];

        if (g->nnodes == g->nodes_cap) {
                int cap = g->nodes_cap ? g->nodes_cap * 2 : 32;
                struct graph_node *nn = realloc(g->nodes, (size_t)cap * sizeof(*nn));
                if (!nn)
                        return -ENOMEM;
                g->nodes = nn;
                g->nodes_cap = cap;
        }
        n = &g->nodes[g->nnodes];
        memset(n, 0, sizeof(*n));
        if (!name || !*name) {
                snprintf(num, sizeof(num), "#%d", g->nnodes);
                name = num;
        }
        n->name = graph_strndup(g, name, strlen(name));
        n->op_type = graph_strndup(g, op_type ? op_type : "", op_type ? strlen(op_type) : 0);
        n->domain = graph_strndup(g, domain ? domain : "", domain ? strlen(domain) : 0);
        if (!n->name || !n->op_type || !n->domain)
                return -ENOMEM;
        n->def = def;
        return g->nnodes++;
}

/* s appended at buf + *pos, cut where len runs out (as snprintf would); a node's strings are
 * never NULL (graph_add_node) */
static void label_cat(char *buf, size_t len, size_t *pos, const char *s)
{
        while (*s && *pos + 1 < len)
                buf[(*pos)++] = *s++;
}

/* Every node a run executes is labelled (for the messages of its errors): without snprintf,
 * which was 2.5 % of the loop thread's time for a small latency-critical run. */
const char *graph_node_label(const struct graph_node *n, char *buf, size_t len)
{
        size_t pos = 0;

        if (!len)
                return buf;
        label_cat(buf, len, &pos, "node '");
        label_cat(buf, len, &pos, n->name);
        label_cat(buf, len, &pos, "' (");
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) {
                label_cat(buf, len, &pos, n->domain);
                label_cat(buf, len, &pos, ".");
        }
        label_cat(buf, len, &pos, n->op_type);
        label_cat(buf, len, &pos, ")");
        buf[pos] = 0;
        return buf;
}

void graph_sanitize(char *s)
{
        for (; s && *s; s++)
                if ((uint8_t)*s < 0x20 || (uint8_t)*s > 0x7e)
                        *s = '?';
}

/* Producer of value v when another node of g computes it, else -1. */
static int producer_of(const struct graph *g, int v)
{
        return v >= 0 && g->values[v].kind == GRAPH_VALUE_NODE ? g->values[v].producer : -1;
}

/* After Kahn's algorithm left nodes unordered, some of them lie on a cycle; walk producers
 * through unordered nodes from any of them until a node repeats: that node is on one. */
static int cycle_node(const struct graph *g, const char *placed)
{
        char *seen = calloc((size_t)g->nnodes, 1);
        int n = 0, found = -1;

        if (!seen)
                return -1;
        while (n < g->nnodes && placed[n])
                n++;
        while (n >= 0 && n < g->nnodes && !seen[n]) {
                const struct graph_node *gn = &g->nodes[n];
                int next = -1;
                seen[n] = 1;
                for (int i = 0; i < gn->nin + gn->nimplicit && next < 0; i++) {
                        int p = producer_of(g, i < gn->nin ? gn->in[i] : gn->implicit[i - gn->nin]);
                        if (p >= 0 && !placed[p])
                                next = p;
                }
                n = next;
        }
        if (n >= 0 && n < g->nnodes)
                found = n;
        free(seen);
        return found;
}

int graph_finalize(struct graph *g, char *err, size_t errlen)
{
        int *indeg = NULL, *first = NULL, *succ = NULL, *queue = NULL;
        char *placed = NULL;
        int nedges = 0, head = 0, tail = 0, rc = -ENOMEM;
        char label[160];

        for (int v = 0; v < g->nvalues; v++)
                g->values[v].uses = 0;
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                for (int i = 0; i < gn->nin + gn->nimplicit; i++) {
                        int v = i < gn->nin ? gn->in[i] : gn->implicit[i - gn->nin];
                        if (v < 0)
                                continue;
                        g->values[v].uses++;
                        if (producer_of(g, v) >= 0)
                                nedges++;
                }
        }
        free(g->order);
        g->order = malloc(sizeof(int) * (size_t)(g->nnodes ? g->nnodes : 1));
        indeg = calloc((size_t)g->nnodes + 1, sizeof(int));
        first = calloc((size_t)g->nnodes + 2, sizeof(int));
        succ = malloc(sizeof(int) * (size_t)(nedges ? nedges : 1));
        queue = malloc(sizeof(int) * (size_t)(g->nnodes ? g->nnodes : 1));
        placed = calloc((size_t)g->nnodes + 1, 1);
        if (!g->order || !indeg || !first || !succ || !queue || !placed) {
                snprintf(err, errlen, "out of memory");
                goto out;
        }
        /* Successor lists in compressed form: count per producer, prefix sums, fill. */
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                for (int i = 0; i < gn->nin + gn->nimplicit; i++) {
                        int p = producer_of(g, i < gn->nin ? gn->in[i] : gn->implicit[i - gn->nin]);
                        if (p >= 0) {
                                first[p + 2]++;
                                indeg[n]++;
                        }
                }
        }
        for (int n = 0; n < g->nnodes; n++)
                first[n + 2] += first[n + 1];
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                for (int i = 0; i < gn->nin + gn->nimplicit; i++) {
                        int p = producer_of(g, i < gn->nin ? gn->in[i] : gn->implicit[i - gn->nin]);
                        if (p >= 0)
                                succ[first[p + 1]++] = n;
                }
        }
        /* first[p] .. first[p + 1] now delimit p's successors. Kahn's algorithm, seeded in
         * model order so that an already sorted model keeps its order. */
        for (int n = 0; n < g->nnodes; n++)
                if (!indeg[n])
                        queue[tail++] = n;
        while (head < tail) {
                int n = queue[head++];
                placed[n] = 1;
                g->order[head - 1] = n;
                for (int e = first[n]; e < first[n + 1]; e++)
                        if (--indeg[succ[e]] == 0)
                                queue[tail++] = succ[e];
        }
        if (head < g->nnodes) {
                int c = cycle_node(g, placed);
                if (c < 0)
                        snprintf(err, errlen, "the graph has a cycle");
                else
                        snprintf(err, errlen, "%s: is part of a cycle",
                                 graph_node_label(&g->nodes[c], label, sizeof(label)));
                rc = -EINVAL;
                goto out;
        }
        rc = 0;
out:
        free(indeg);
        free(first);
        free(succ);
        free(queue);
        free(placed);
        return rc;
}

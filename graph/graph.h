/* Graph IR: what an imported model becomes before it runs. A graph has values (named tensors:
 * graph inputs, initializers, node outputs and, in subgraphs, values of the enclosing graph),
 * nodes (an operator definition from the registry, input and output value indices and
 * converted attributes) and a topological order. Subgraphs (the GRAPH attributes of If, Loop,
 * Scan) are graphs of their own whose parent is the enclosing graph.
 *
 * A graph is built once (by onnx-import.c, or by hand in unit tests) and is read-only
 * afterwards: several runs of one graph may execute concurrently on different worker threads,
 * each with its own value table (exec.c). Everything a graph points to is owned by it; tensor
 * data of initializers and tensor attributes lives in one storage block that the importer
 * places through a callback (device memory in npud) or mallocs itself. */
#ifndef NPUD_GRAPH_H
#define NPUD_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

#define GRAPH_MAX_IO 64     /* inputs + outputs one run can bind (SUBMIT record limit) */
#define GRAPH_MAX_DEPTH 16  /* nesting of subgraphs */
#define GRAPH_ALIGN 64      /* alignment of each tensor in the storage block */

enum graph_value_kind {
        GRAPH_VALUE_NODE = 0, /* produced by a node */
        GRAPH_VALUE_INPUT,    /* a graph input, bound by the caller */
        GRAPH_VALUE_INIT,     /* an initializer (constant tensor owned by the graph) */
        GRAPH_VALUE_OUTER,    /* a value of the enclosing graph, read by name (subgraphs) */
};

struct graph_value {
        char *name;
        int kind;                   /* enum graph_value_kind */
        int dtype;                  /* 0: not declared */
        int ndim;                   /* -1: rank not declared */
        int64_t dims[OPS_MAX_DIMS]; /* -1: extent not declared */
        int producer;               /* NODE: index of the producing node */
        int outer;                  /* OUTER: the value's index in the parent graph */
        const struct ops_tensor *tensor; /* INIT: the constant */
        int uses;                   /* reads by nodes of this graph, subgraph reads included */
        int output;                 /* index of its first listing among the outputs, -1 */
};

struct graph_plan;
struct graph_compile_stats;
struct graph_steps;
struct ops_packed_b;
struct ops_packed_conv;

struct graph_node {
        char *name;    /* the model's node name, "#N" (index in its graph) when it has none */
        char *op_type;
        char *domain;  /* "" for the default ONNX domain */
        const struct ops_def *def;
        int nin, nout;
        int *in, *out; /* value indices; -1 = an omitted optional input or output */
        int nattr;
        struct ops_attr *attr;
        int nimplicit;
        int *implicit; /* values of this graph that the node's subgraphs read */
        int variant;   /* kernel variant tuning chose (compile-tune.c) + 1; 0: the default */
        /* its constant B reordered for oneDNN's matmul when variant is
         * OPS_SGEMM_ONEDNN_PACKED + 1 (ops/blas.h), in column blocks for libxsmm when
         * OPS_SGEMM_XSMM_PACKED + 1, in float64 column blocks when OPS_SGEMM_F64 + 1; freed
         * with the graph; NULL otherwise */
        struct ops_packed_b *packed;
        /* its constant filters reordered for oneDNN's direct convolution when variant is
         * OPS_SGEMM_ONEDNN_DIRECT + 1, freed with the graph; NULL otherwise */
        struct ops_packed_conv *pconv;
        /* the tuned variant's time on one thread of this host (tuning measured it now or
         * before, ops/tune.h) for tuned_flops of work: the scheduler sizes the node's
         * parts from it (graph_estimate_steps_parts); 0 when not tuned */
        uint64_t tuned_ns, tuned_flops;
};

/* How a graph's products (MatMul, Gemm, Conv and every other kernel built on ops_sgemm)
 * sum their terms: in float32, at the float32 kernels' speed; in float64 (ops/blas.h,
 * OPS_SGEMM_F64), each element then within a few ulps of the exact sum of its float32
 * products; or mixed (OPS_SGEMM_MIXED): GEMMs sum runs of 32 products in float32, four
 * runs at a time in float32 and those sums in float64, convolutions as the GEMM of their
 * im2col in the same runs. Chosen at load (graph_load's
 * "accumulate"), for the whole graph. */
enum graph_accumulate {
        GRAPH_ACCUMULATE_FLOAT32 = 0,
        GRAPH_ACCUMULATE_FLOAT64 = 1,
        GRAPH_ACCUMULATE_MIXED = 2,
};

struct graph {
        struct graph *parent; /* enclosing graph of a subgraph, NULL for the model's graph */
        int opset;            /* the model's default-domain opset version */
        int accumulate;       /* enum graph_accumulate: a subgraph's is its parent's */
        int nvalues, values_cap;
        struct graph_value *values;
        int nnodes, nodes_cap;
        struct graph_node *nodes;
        int *order;           /* node indices in execution order (graph_finalize) */
        int ninputs, noutputs;
        int *inputs, *outputs; /* value indices */
        /* declared type of each output (graph_info), -1 / 0 where the model says nothing */
        struct ops_tensor *output_decl;
        /* tensor data of the whole graph tree (only the root holds it) */
        void *storage;
        uint64_t storage_bytes;
        int storage_owned;    /* malloc'd by the importer: freed with the graph */
        /* name -> value index (open addressing, index + 1, 0 = empty) */
        int *hash;
        int hash_cap;
        /* What the compiler (compile.h) made of the graph at load; NULL when it did not run.
         * Both are graph_alloc'd. plan: arena offsets of the intermediates (root graph). */
        struct graph_plan *plan;
        struct graph_compile_stats *stats;
        /* Bytes of packed weights (reordered copies for the tuned kernels, compile-tune.c)
         * the compiler may make for this graph: the loader sets what the tenant's memory
         * quota leaves, since they are charged to it; -1 (graph_new): GRAPH_PACK_TOTAL. */
        int64_t pack_limit;
        /* The steps a run is scheduled as (steps.h), graph_alloc'd; NULL when not built
         * (the run is then one task). Root graph only. */
        struct graph_steps *steps;
        /* every other allocation of the graph, freed with it */
        void **allocs;
        int nallocs, allocs_cap;
};

struct graph *graph_new(struct graph *parent);
/* Free a graph, its subgraphs and (when owned) its storage. NULL is fine. */
void graph_free(struct graph *g);
/* Set g's accumulation (enum graph_accumulate) and its subgraphs'; before graph_compile,
 * which tunes for it. */
void graph_set_accumulate(struct graph *g, int accumulate);
/* "float32" / "float64" and back (-1: neither), as graph_load and the configuration spell
 * them. */
const char *graph_accumulate_name(int accumulate);
int graph_accumulate_parse(const char *name);
/* The ops_sgemm variant every product node of a graph of this accumulation runs
 * (OPS_SGEMM_F64, OPS_SGEMM_MIXED), or -1 for float32, whose nodes run what tuning chose. */
int graph_accumulate_variant(int accumulate);

/* Zeroed memory owned by the graph (freed by graph_free); NULL when out of memory. */
void *graph_alloc(struct graph *g, size_t size);
/* A copy of n bytes of s, NUL terminated, owned by the graph. */
char *graph_strndup(struct graph *g, const char *s, size_t n);

/* Add a value called name (unique in g); returns its index or -ENOMEM / -EEXIST. ndim -1 for
 * an undeclared rank; dims may be NULL then. */
int graph_add_value(struct graph *g, const char *name, int kind, int dtype, int ndim,
                    const int64_t *dims);
/* Index of the value called name in g itself, -1 when none. */
int graph_find_value(const struct graph *g, const char *name);
/* Index of name in g, else a new OUTER value of g for the same name found in an enclosing
 * graph (created there too when needed); -1 when no scope has it, -ENOMEM. */
int graph_resolve(struct graph *g, const char *name);

/* Add a node (inputs, outputs, attributes are filled in by the caller with graph_alloc'd
 * arrays); returns its index or -ENOMEM. name NULL or "" becomes "#index". */
int graph_add_node(struct graph *g, const char *name, const char *op_type, const char *domain,
                   const struct ops_def *def);

/* Count value uses, order the nodes topologically and check that every node input is
 * available. 0, or -EINVAL with a message naming a node on a cycle. */
int graph_finalize(struct graph *g, char *err, size_t errlen);

/* "node 'NAME' (OpType)" for messages ("(domain.OpType)" outside the default domain). */
const char *graph_node_label(const struct graph_node *n, char *buf, size_t len);

/* Make a message quoting model names printable ASCII ('?' for other bytes): messages end up
 * in JSON, which must be valid UTF-8, and a cut at the buffer's end may split a character. */
void graph_sanitize(char *s);

#endif

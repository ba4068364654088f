/* Graph compiler: what npud does to an imported graph at load, before any run.
 *
 * Passes over the IR of the model's graph (subgraphs are left as they are):
 *  - constant folding: a node whose inputs are all initializers is computed once through the
 *    operator registry and its outputs become initializers (host memory owned by the graph);
 *  - BatchNormalization (inference form) after a Conv whose output nothing else reads is
 *    folded into the Conv's weights and bias;
 *  - dead-node removal: nodes none of whose outputs reaches a graph output;
 *  - elementwise fusion: chains of elementwise nodes, each the only reader of the previous
 *    one's output, become one FusedElementwise node that applies the whole chain block by
 *    block (compile-fused.c), so the data is read once and written once;
 *  - pattern fusions (compile-patterns.c): erf-form GELU into Gelu, decomposed
 *    LayerNormalization into one node, bias and activation epilogues into MatMul, Gemm and
 *    Conv (FusedGemm, compile-epilogue.c), attention's scale-mask-softmax into one
 *    FusedSoftmax (compile-softmax.c).
 * Then a static memory plan: the intermediates whose size the model fixes get offsets in one
 * arena by liveness, sharing bytes when their lifetimes do not overlap and, for elementwise
 * nodes, taking their input's bytes in place when that input dies there. The executor
 * allocates one arena per run instead of one buffer per intermediate.
 *
 * Everything here is an optimisation: a run gives the same results with NPUD_GRAPH_COMPILE=0
 * in npud's environment (passes and plan off; a mask of the flags below picks passes), which benches use for comparison. */
#ifndef NPUD_GRAPH_COMPILE_H
#define NPUD_GRAPH_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"

enum graph_compile_flags {
        GRAPH_COMPILE_FOLD = 1 << 0,
        GRAPH_COMPILE_BN = 1 << 1,
        GRAPH_COMPILE_DEAD = 1 << 2,
        GRAPH_COMPILE_FUSE = 1 << 3,
        GRAPH_COMPILE_PLAN = 1 << 4,
        GRAPH_COMPILE_TUNE = 1 << 5,
        GRAPH_COMPILE_PATTERNS = 1 << 6, /* GELU, LayerNormalization, epilogues, softmax */
        GRAPH_COMPILE_ALL = 0x7f,
};

struct graph_compile_stats {
        unsigned flags;           /* passes that ran */
        int nodes_before, nodes_after;
        int folded;               /* nodes computed at load */
        int bn_folded;            /* BatchNormalization nodes folded into a Conv */
        int bn_exact;             /* of those, folded with the factors kept in float64
                                   * (struct graph_bn_affine) */
        int dead;                 /* nodes removed as dead */
        int fused_groups;         /* FusedElementwise nodes made */
        int fused_nodes;          /* nodes they replace */
        int gelu_fused;           /* erf-form GELU subgraphs made one Gelu node */
        int layernorm_fused;      /* decomposed LayerNormalizations made one node */
        int epilogue_fused;       /* bias / activation epilogues taken into MatMul, Gemm, Conv */
        int softmax_fused;        /* scale-mask-softmax groups made one FusedSoftmax */
        int planned;              /* intermediates placed in the arena */
        int tuned;                /* nodes running a tuned kernel variant (compile-tune.c) */
        int tune_measured;        /* of which measured at this load */
        int tune_cached;          /* of which taken from the tuning cache */
        int inplace;              /* of which sharing their input's bytes in place */
        uint64_t arena_bytes;     /* arena one run allocates */
        uint64_t intermediate_bytes; /* sum of the planned intermediates' sizes */
        uint64_t model_intermediate_bytes; /* sum of the model's own intermediates' sizes, as
                                            * loaded, before any pass (those whose size the
                                            * model fixes): what a run without fusion or plan
                                            * would allocate */
        uint64_t folded_bytes;    /* initializers made by folding */
        int packed;               /* tuned nodes on prepacked weights (onednn-packed) */
        uint64_t packed_bytes;    /* their reordered copies of the weights */
};

/* Arena offsets by value index (the root graph's values), -1 for a value not planned; a
 * run whose computed value is larger than size[v] allocates it the usual way. */
struct graph_plan {
        int nvalues;
        int64_t *offset;
        int64_t *size;
        uint64_t arena_bytes;
};

/* Folded outputs larger than this stay nodes (a constant Expand must not blow up a model);
 * so do folds past GRAPH_FOLD_TOTAL bytes in all. */
#define GRAPH_FOLD_MAX (16ull << 20)
#define GRAPH_FOLD_TOTAL (64ull << 20)
/* Nor is a node folded whose cost model says more work than this (about 10 ms of a core). */
#define GRAPH_FOLD_FLOPS (64ull << 20)
/* Bytes of each of a fused chain's two block buffers (on the worker's stack): 16384 float32
 * elements a block. Each step of a block is a kernel call whose setup (the call's plan,
 * strides, attributes) costs about as much as a few thousand elements of an elementwise
 * kernel, so blocks of 2048 elements spent a third of the chain's time there; blocks of
 * 64 KiB stay in the core's L2 (bench_models' chain: 10-20 % faster). */
#define GRAPH_FUSE_BLOCK_BYTES (64 * 1024)
/* The part of each buffer a chain uses when every step runs its kernel directly
 * (ops_ew_direct_init: the call's set-up done once a run, not once a block), so that both
 * stay in L1. bench_models' chain with Sigmoid and Tanh replaced by Abs and Neg (bound by
 * memory and the caches), 2 workers, AMD EPYC, medians of alternated runs: 64 KiB blocks
 * through ops_run 2.69-3.14 ms in six, tiles of 8 KiB 2.39-3.07 ms in six, of 4 KiB
 * 2.18-3.09 ms in five, of 16 KiB 2.79-2.98 ms in two: 4-20 % faster than the blocks in
 * most pairs, as fast in the others (the host's own swings are as large). The same chain
 * in a single-thread C loop: 5.3 ms in blocks of 16384 floats, 3.3 ms in 2048. The bench's
 * own chain (SLEEF's Sigmoid and Tanh bound by arithmetic): 3.92 and 4.40 ms against 4.68
 * and 4.49. */
#define GRAPH_FUSE_TILE_BYTES (4 * 1024)
/* Runs of FusedElementwise whose steps all ran their kernels directly, in tiles of
 * GRAPH_FUSE_TILE_BYTES (the tests read it). */
extern _Atomic unsigned long graph_fuse_direct_runs;
/* Longest chain one fused node takes. */
#define GRAPH_FUSE_MAX_STEPS 32

/* Tuning (compile-tune.c) measures no node whose cost model says more work than this, nor
 * one whose scratch data would exceed GRAPH_TUNE_BYTES. */
#define GRAPH_TUNE_FLOPS (4ull << 30)
#define GRAPH_TUNE_BYTES (128ull << 20)
/* Reordered weights for the tuned kernels (ops/blas.h, struct ops_packed_b and
 * ops_packed_conv): a graph makes at most this many bytes of them, and no more than its
 * pack_limit (what the loading tenant's memory quota leaves: npud charges them to it);
 * nodes past it keep the plain variants. */
#define GRAPH_PACK_TOTAL (64ull << 20)
/* The bytes a packed copy of a k x n B (or of n filters of k values) may take, for that
 * check: the layouts pad n, libxsmm's to 32 columns, oneDNN's blocked ones to 16 or 64. */
#define GRAPH_PACK_BYTES(k, n) ((uint64_t)(k) * (((uint64_t)(n) + 63) / 64 * 64) * sizeof(float))
/* ... and a node keeps them unless they make it more than 5 % slower (its time x 0.95
 * against the plain variants'): measured whole, the node may run as row parts, and a row
 * part of a packed B repacks nothing while a plain one repacks all of B (the transformer's
 * FFN: 2 x 64 rows of 1024x256 took 230-260 us each plain, 110-180 us in 4 packed parts). */
#define GRAPH_PACK_GAIN 0.95
/* ... 15 % for a node that splits into row parts (a row part of a plain B repacks all of it) */
#define GRAPH_PACK_GAIN_PARTS 0.85

/* Run the passes in flags on a finalized graph g (the model's graph). 0, or -ENOMEM with a
 * message (the graph is then unusable and must be freed). Nodes that cannot be folded
 * (their kernel fails) are left to the run, which reports the failure as usual. */
int graph_compile(struct graph *g, unsigned flags, char *err, size_t errlen);

/* The tuning pass alone (graph_compile runs it last when flags hold GRAPH_COMPILE_TUNE). */
int graph_compile_tune(struct graph *g, struct graph_compile_stats *st);

/* The passes this process runs: NPUD_GRAPH_COMPILE in the environment, a mask of
 * enum graph_compile_flags ("0": none, the graph runs as imported); all when unset. */
unsigned graph_compile_flags(void);

/* The fused node's definition (compile-fused.c); its node carries the chain as an
 * OPS_ATTR_OPAQUE attribute. */
extern const struct ops_def graph_fused_def;

struct graph_fused_step {
        const struct ops_def *def;
        const char *name;          /* the original node's name (messages) */
        int nin;
        int src[OPS_MAX_INPUTS];   /* -1: the previous step's result, -2: omitted, k: node input k */
        int nattr;
        const struct ops_attr *attr;
};

struct graph_fused {
        int nsteps;
        int opset;
        struct graph_fused_step *steps;
};

/* Pattern passes (compile-patterns.c), run with GRAPH_COMPILE_PATTERNS before the elementwise
 * chains: each marks the nodes it replaces in removed and answers how many groups it made,
 * or a negative errno. */
int graph_pass_gelu(struct graph *g, struct graph_compile_stats *st, char *removed);
int graph_pass_layernorm(struct graph *g, struct graph_compile_stats *st, char *removed);
int graph_pass_epilogue(struct graph *g, struct graph_compile_stats *st, char *removed);
int graph_pass_softmax(struct graph *g, struct graph_compile_stats *st, char *removed);

/* FusedSoftmax (compile-softmax.c): Softmax over the last axis of x * c (or x / c) + mask;
 * inputs x and, when mask is set, the mask; the node's OPS_ATTR_OPAQUE "softmax" points to
 * this. */
struct graph_softmax {
        int scale;                  /* 1: x is scaled by c */
        int div;                    /* 1: divided by c rather than multiplied */
        const struct ops_tensor *c; /* the one-element initializer */
        int mask;                   /* 1: input 1 is added */
        int opset;
};

extern const struct ops_def graph_fused_softmax_def;

/* FusedGemm (compile-epilogue.c): a MatMul, Gemm or Conv followed by a bias Add, a residual
 * Add (of a tensor of the output's shape: a ResNet block's shortcut, a transformer's skip
 * connection) and / or an activation, applied to the product block by block right after it
 * is computed: y = act(op + bias + residual). The node's inputs are the operator's (nin_op
 * of them), then the bias when there is one, then the residual when there is one, then the
 * activation's inputs past its first (Clip's bounds); its attributes the operator's plus an
 * OPS_ATTR_OPAQUE "epilogue" pointing to this. */
#define GRAPH_EPILOGUE_ATTRS 4
struct graph_epilogue {
        const struct ops_def *op;   /* MatMul, Gemm or Conv */
        int nin_op;
        int bias;                   /* 1: input nin_op is the bias ([N]; Conv: per channel) */
        int resid;                  /* 1: input nin_op + bias is the residual (the output's shape) */
        const struct ops_def *act;  /* NULL: bias only */
        int act_nin;
        int act_nattr;
        struct ops_attr act_attr[GRAPH_EPILOGUE_ATTRS];
        int opset;
};

/* A BatchNormalization folded into the Conv before it under float64 or mixed accumulation
 * (compile.c): the node still holds the filters and bias folded in float32, on which every
 * other path runs, and its OPS_ATTR_OPAQUE "bn_affine" points to this, which
 * graph_conv_acc_rows runs on instead: the model's own filters and each output channel's
 * factor and shift in float64 (struct ops_row_affine), so that the fold adds no rounding
 * of its own (the ResNet bench block's largest error under mixed, 1.70e-7, had 5.3e-8 of
 * it; float64's rms error went from 2.40e-8 to 1.97e-8). */
struct graph_bn_affine {
        const float *w;        /* the Conv's filters, as the model holds them */
        const float *wf;       /* the folded ones the node holds (a part of the node, a range
                                * of output channels, holds a range of them) */
        int64_t m, per;        /* output channels; filter elements per channel */
        double *scale, *shift; /* per output channel */
};
/* The "bn_affine" of a Conv's or FusedGemm's call; NULL without one. */
const struct graph_bn_affine *graph_bn_affine_of(const struct ops_call *call);

/* known[v] (zeroed by the caller) for what the model fixes before any run: initializers
 * with their data, graph inputs whose dtype and every extent are declared (no data). */
void graph_known_static(const struct graph *g, struct ops_tensor *known);

/* Shape inference of node gn from the values known before it (known[v].dtype 0: unknown;
 * data only for initializers), with no subgraph run: 1 and call->out[] inferred, 0 when an
 * input is unknown or inference fails. call is scratch. */
/* known[] (zeroed by the caller) for every value whose shape the model fixes:
 * graph_known_static, then each node in order through graph_infer_static (nodes with
 * removed[n] set skipped; removed may be NULL). call is scratch. */
/* The sum of the sizes of g's intermediates whose size the model fixes (values a node
 * makes that are not graph outputs). */
uint64_t graph_intermediate_bytes(const struct graph *g);
void graph_known_propagate(const struct graph *g, const char *removed, struct ops_tensor *known,
                           struct ops_call *call);

int graph_infer_static(const struct graph *g, const struct graph_node *gn, const struct ops_tensor *known,
                       struct ops_call *call);

extern const struct ops_def graph_fused_gemm_def;

/* The epilogue of a FusedGemm call (its operator, bias and activation), NULL for a call of
 * any other operator. */
const struct graph_epilogue *graph_fused_gemm_epilogue(const struct ops_call *call);

/* Output rows [r0, r1) of a FusedGemm call whose rows are independent (graph_fused_gemm_rows
 * answers how many there are, 0 when they are not): the operator on rows [r0, r1) of its
 * first input, then the bias and activation on those output rows. A scheduler row tile of
 * the node is exactly one such call; the whole node is the rows in blocks. */
int64_t graph_fused_gemm_nrows(const struct ops_call *call);
int graph_fused_gemm_rows(const struct ops_call *call, int64_t r0, int64_t r1, char *err,
                          size_t errlen);

/* Output rows [lo, hi) of every image of a Conv node, or of a FusedGemm on a Conv whose
 * epilogue the direct convolution applies itself (no extra bias; Relu, LeakyRelu or no
 * activation), computed by oneDNN's direct convolution on the node's packed filters p
 * (ops/blas.h) straight from the node's input into its output: 0, 1 when that does not
 * apply (the caller runs the kernel), -ECANCELED. */
struct ops_packed_conv;
int graph_conv_direct_rows(const struct ops_packed_conv *p, const struct ops_call *call, int64_t lo, int64_t hi,
                           char *err, size_t errlen);
/* The same under float64 accumulation (mixed 0) or mixed accumulation (mixed 1)
 * (ops_conv_rows_acc): output rows [lo, hi) of a float32 2-D Conv node, or a FusedGemm of one
 * without an epilogue bias (its residual and activation then applied to the band's rows): 0,
 * 1 when it does not apply (nothing written), < 0. */
int graph_conv_acc_rows(const struct ops_call *call, int mixed, int64_t lo, int64_t hi, char *err, size_t errlen);
/* Does call's fused epilogue (if any) let graph_conv_acc_rows compute its rows (1), or does
 * it leave them to the caller (0: an epilogue with a bias of its own, or not a Conv's)? The
 * estimate asks before it gives a Conv the small parts of in-place rows. */
int graph_conv_acc_epilogue_ok(const struct ops_call *call);

#endif

/* Graph executor: runs a whole graph on the calling (worker) thread. Each run keeps its own
 * value table; the graph itself is only read, so one graph may run on several threads at
 * once. Intermediates are malloc'd by the run and freed after their last reader; graph
 * inputs are read from, and graph outputs written into, the caller's tensors. Subgraphs
 * (If, Loop, Scan) run through the ops_graph_run_fn given to their node's kernel. */
#ifndef NPUD_GRAPH_EXEC_H
#define NPUD_GRAPH_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/* A run prepared on the loop thread for a backend worker: the graph and the caller's
 * tensors, inputs first (data pointers resolved). */
struct graph_bind {
        const struct graph *g;
        void *owner; /* the daemon's reference to the loaded graph, released with the task */
        int nin, nout;
        /* flex: each output's bound tensor is a capacity: the computed output may take any
         * shape of the bound dtype that fits its bytes, written from the start; got (nout
         * entries, allocated by whoever sets flex) receives the computed shapes. */
        int flex;
        struct ops_tensor *got;
        /* A run scheduled as steps (steps.h): its value table and arena, made by step 0 on a
         * worker and kept between steps; freed with graph_run_free by whoever frees the
         * binding, once no step of it runs. */
        struct graph_run *run;
        /* Bytes at each tensor's address (inputs first) for STRING ones, which are encoded
         * there (docs/protocol.md); unused for the others. */
        uint64_t cap[GRAPH_MAX_IO];
        struct ops_tensor t[GRAPH_MAX_IO];
};

struct graph_run;

/* Run g: in[0..nin) bound to its inputs, out[0..nout) to its outputs (shapes and dtypes as
 * the caller expects them). 0, or a PROTO_E_* code with a message naming the node, input or
 * output: SHAPE when a binding or an inferred shape does not fit, EXEC when a kernel fails
 * or memory runs out. */
int graph_exec(const struct graph *g, int nin, const struct ops_tensor *in, int nout,
               const struct ops_tensor *out, char *err, size_t errlen);
int graph_exec_bound(struct graph_bind *b, char *err, size_t errlen);

/* Run step `step` of b's graph (steps.h) on the calling worker: step 0 binds the run to
 * host_t (the inputs then outputs, as host views: b's own tensors hold device addresses) and
 * makes b->run; node steps run their node; the last step hands the outputs over. The run
 * context is the calling worker's, as for graph_exec. 0, or a PROTO_E_* code with a message
 * naming the node. host_t is read by step 0 only. */
int graph_run_step(struct graph_bind *b, int step, const struct ops_tensor *host_t, char *err,
                   size_t errlen);
/* Part `part` of nparts of step `step` (nparts 1: the whole step, as graph_run_step). A node
 * step split into parts (split.h) runs them at the same time on several workers; the first
 * to start sets the node up for all of them, each computes its slice of the outputs, and
 * the step is done when every part is back (then graph_run_step_done, once). */
int graph_run_step_part(struct graph_bind *b, int step, int part, int nparts,
                        const struct ops_tensor *host_t, char *err, size_t errlen);
/* Node step `step` of b came back done (loop thread): each value it read loses a use, and
 * one whose last reader this was is freed (its other readers are back too). No-op without
 * a run (model mode). */
void graph_run_step_done(struct graph_bind *b, int step);
void graph_run_free(struct graph_run *r);

/* Do the bound inputs fit the declared ones (count, dtype, rank, declared extents)?
 * 0 or PROTO_E_INVALID / PROTO_E_SHAPE with a message naming the input. */
int graph_check_inputs(const struct graph *g, int nin, const struct ops_tensor *in,
                       char *err, size_t errlen);

/* Estimated duration in ns of a run with inputs shaped like in (data unused), on one core
 * of ops_per_s with mem_bw bytes/s: the sum of each node's cost. Shapes are propagated with
 * the operators' infer; initializers are readable, other data is not, so nodes whose shape
 * depends on computed data (and everything after them) count a fixed launch cost.
 * *ret_nodes (may be NULL) receives the number of nodes estimated from their shapes. */
uint64_t graph_estimate_ns(const struct graph *g, int nin, const struct ops_tensor *in,
                           double ops_per_s, double mem_bw, int *ret_nodes);

/* The estimate per step (steps.h) and engine kind: cost[s * OPS_ENGINE_COUNT + e], in ns on
 * one core of engine e (ops_per_s[e], cores[e] of them; 0 where e has no cores or cannot run
 * the node: a node runs on its operator's engine kind or the AI CPU). g->steps must exist.
 * 0, or -1 when memory is short. */
int graph_estimate_steps(const struct graph *g, int nin, const struct ops_tensor *in,
                         const double *ops_per_s, const int *cores, double mem_bw, uint64_t *cost);
/* The same, and per step the most parts it may be split into (split.h; 1: it stays whole)
 * in parts[s] (NULL: not wanted), how many parts a worker should take of it when it runs in
 * a gang in balance[s] (NULL: not wanted; 1, or GRAPH_SPLIT_BALANCE for parts that cost no
 * more than their share), and in host[s] (NULL: not wanted) its time on one host thread as
 * tuning measured it on this host (graph_node.tuned_ns, scaled by the work of these shapes
 * against the tuned ones; 0 for a step not tuned). */
int graph_estimate_steps_parts(const struct graph *g, int nin, const struct ops_tensor *in,
                               const double *ops_per_s, const int *cores, double mem_bw,
                               uint64_t *cost, uint32_t *parts, uint8_t *balance, uint64_t *host);

/* Refuse a model whose fixed shapes conflict: shapes are propagated from initializers and
 * from inputs whose declared dtype and shape are fully fixed, and every element-wise or
 * MatMul-like node reached with known shapes is checked. 0, or PROTO_E_SHAPE with a message
 * naming the node. Nodes whose shapes depend on data are left to the run. */
int graph_check_static(const struct graph *g, char *err, size_t errlen);

#endif

/* A graph run as a plan of steps (issue 11): what the daemon schedules one at a time instead
 * of a whole model as one opaque task.
 *
 * Step 0 binds the run (checks the inputs, sets up its value table and arena), steps 1 to
 * nnodes each run one node of the compiled root graph (a fused group is one node; If, Loop
 * and Scan run their subgraphs inside their step), in the graph's topological order, and the
 * last step hands the outputs over (outputs that are inputs or initializers passed through,
 * the computed shapes of a flexible run). Each step waits for the steps it depends on:
 *  - data: the producers of the values its node reads, subgraph reads included;
 *  - memory: where the arena plan (compile-plan.c) gives a value bytes that an earlier value
 *    used (its lifetime ended before, in the serial order the plan assumed), the producer of
 *    the later value waits for the earlier one's producer and every reader, so that steps
 *    running at the same time never write bytes another still reads;
 *  - the first node steps wait for step 0, and the last step for every node step.
 * Steps whose waits are over may run at the same time on different workers. */
#ifndef NPUD_GRAPH_STEPS_H
#define NPUD_GRAPH_STEPS_H

#include <stddef.h>

struct graph;

struct graph_steps {
        int nsteps;      /* nnodes + 2 */
        int *npred;      /* per step: how many steps it waits for */
        int *succ_start; /* successors of step s: succ[succ_start[s] .. succ_start[s + 1]) */
        int *succ;
};

/* The node step k (1 <= k <= nnodes) runs. */
static inline int graph_step_node(const struct graph *g, int k);

/* Build g->steps for a finalized (and possibly compiled) root graph; graph_alloc'd. 0, or
 * -ENOMEM with a message. */
int graph_steps_build(struct graph *g, char *err, size_t errlen);

#include "graph.h"

static inline int graph_step_node(const struct graph *g, int k)
{
        return g->order[k - 1];
}

#endif

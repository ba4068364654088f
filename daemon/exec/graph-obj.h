/* Loaded graphs as daemon objects (loop thread only): the imported graph, the device buffer
 * holding its weights, and a reference count. A session's handle holds one reference and
 * every graph run in flight holds another, so a graph unloaded (or whose session ended)
 * while runs are queued or running stays intact until the last of them completes. The
 * methods graph_load / graph_unload / graph_info live in daemon/api/methods-graph.c, the
 * preparation of GRAPH_RUN records in submit.c. */
#ifndef NPUD_GRAPH_OBJ_H
#define NPUD_GRAPH_OBJ_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

struct graph;
struct graph_bind;
struct buffer;
struct device;

struct graph_obj {
        int refs;
        struct graph *g;
        struct buffer *weights; /* initializers and tensor attributes; NULL when none */
        struct device *dev;
        uint64_t charged;       /* bytes charged to the loading tenant while the handle lives */
        /* The loading session: its handle carries the charge. Handles other sessions got by
         * importing an export token (graph_import) only hold a reference. */
        uint64_t owner_session;
        int owner_released;
        /* The last run's input shapes and the estimate made for them (shapes repeat). */
        int est_valid;
        int est_nin;
        int64_t *est_shapes;    /* per input: dtype, ndim, dims[8] */
        uint64_t est_ns;
        uint64_t *est_steps;    /* and per step and engine (graph_estimate_steps), or NULL */
        uint32_t *est_parts;    /* and per step the most parts it splits into (graph/split.h) */
        uint8_t *est_balance;   /* and how many of them a worker takes in a gang, at least */
        uint64_t *est_host;     /* and per step its measured time on one host thread, 0 unknown */
        /* Parts of split steps sent for this graph's runs, and the most units of one run
         * that were out at once when one was sent (graph_info shows both). */
        uint64_t parts_sent;
        uint32_t parts_parallel;
        /* Per engine kind, what this graph's steps took against their estimates (sched.c,
         * calibrate; 1 until measured). The graph's own: another tenant's graphs, slower
         * than modelled, used to raise a latency-critical graph's estimates through the
         * device's shared factor, over the loop thread's bound (INLINE_MAX_NS). */
        double calib[OPS_ENGINE_COUNT];
};

struct graph_obj *graph_obj_ref(struct graph_obj *o);
void graph_obj_unref(struct graph_obj *o);
/* Release a prepared run (the task's reference to its graph). NULL is fine. */
void graph_bind_free(struct graph_bind *b);

#endif

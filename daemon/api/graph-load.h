/* graph_load off the loop thread. The method (methods-graph.c) checks its parameters, the
 * device and the session's limits on the loop thread and maps the model; the import and the
 * compile passes then run on a helper thread on that private mapping and a graph of the
 * thread's own, and the reply is sent from the loop thread when they are done. Everything
 * that touches daemon state stays on the loop thread: the one device allocation the import
 * asks for (the weights) is a round trip to it (graph_load_alloc, with mem_alloc's quota
 * checks and accounting), and so are the graph object, the handle and the reply
 * (graph_load_finish).
 *
 * Admission: at most limits.graph_load_threads helper threads, one running load per session
 * (a session's further loads queue behind it, so one client cannot take every thread),
 * GRAPH_LOADS_PER_SESSION loads per session waiting or running (more are refused), and models
 * of at most limits.max_graph_load_bytes in all being imported at once (a load that would go
 * past it waits; a model larger than the whole limit is refused). Queued loads start in
 * arrival order. */
#ifndef NPUD_GRAPH_LOAD_H
#define NPUD_GRAPH_LOAD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define GRAPH_LOADS_PER_SESSION 4
#define GRAPH_LOAD_ERR_MAX 4096 /* every unsupported node of a model fits in one message */

struct npud;
struct session;
struct device;
struct buffer;
struct graph;

struct graph_load {
        struct graph_load *next;  /* every load not yet answered (loop thread) */
        struct graph_load *qnext; /* the work queue or the messages to the loop (pool lock) */
        struct npud *d;
        struct session *s;        /* NULL once the session has closed: the result is dropped */
        uint64_t req_id;
        struct device *dev;
        void *model;              /* private read-only mapping; the helper unmaps it */
        size_t size;
        int running;              /* handed to a helper thread (loop thread) */
        atomic_int cancel;        /* the session closed or npud stops: give up early */
        /* The weights, allocated on the loop thread and charged to the session's tenant. */
        struct buffer *weights;
        uint64_t rounded;
        /* What the tenant's quota leaves for packed weights (graph.pack_limit; -1: no
         * quota), set on the loop thread before the import and after the weights' charge. */
        int64_t pack_limit;
        int accumulate;           /* enum graph_accumulate, from the request */
        int background;           /* a best-effort tenant's: on the background helpers */
        /* Round trip of the import's allocation (pool lock). */
        int alloc_wanted, alloc_answered, alloc_rc;
        uint64_t alloc_size;
        void *alloc_ptr;
        char alloc_err[512];
        /* The result: a graph, or a PROTO_E_* code and message. */
        int done;
        struct graph *g;
        int rc;
        char err[GRAPH_LOAD_ERR_MAX];
};

/* Queue a load (loop thread): takes j (and its mapping) whether it succeeds or not. 0, or
 * a PROTO_E_* code with a message when a limit refuses it. */
int graph_load_start(struct npud *d, struct graph_load *j, char *err, size_t errlen);
/* npud stops (every session closed): wait for the loads still on helper threads (their
 * imports are cancelled at the next check), free them, and end the threads. */
void graph_loads_shutdown(struct npud *d);

/* In methods-graph.c, called on the loop thread: the weights' allocation for a load whose
 * session is open (sets j->weights), and the end of a load whose session is open (the
 * reply; frees j->g and the weights when it fails). */
int graph_load_alloc(struct graph_load *j, uint64_t size, void **ret, char *err, size_t errlen);
void graph_load_finish(struct graph_load *j);

#endif

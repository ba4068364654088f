/* Streams, events and tasks. A stream is an ordered queue of tasks on one device; tasks of
 * one stream run in order, different streams run concurrently. An event marks a point in a
 * stream (record) that other streams can wait for and clients can query or wait on. Waiters
 * are deferred replies to synchronize requests. */
#ifndef NPUD_STREAM_H
#define NPUD_STREAM_H

#include <stdint.h>
#include <sys/queue.h>

#include "policy/dispatch.h"
#include "daemon/backend/backend.h"
#include "mem.h"

struct session; /* the owner: opaque to the execution layer (see exec.h) */
struct exec;
struct tenant;
struct uid_usage;

enum task_kind {
        TASK_EXEC = 1,
        TASK_EVENT_RECORD,
        TASK_STREAM_WAIT,
        TASK_FAIL, /* a submission that failed, reported when the stream reaches it */
        TASK_FREE, /* stream-ordered free: holds the buffer until the stream reaches it */
        TASK_NOTIFY, /* tell the owner the stream got here; a host callback holds the stream */
};

#define TASK_MAX_REFS 64 /* a graph run binds up to 64 tensors (GRAPH_MAX_IO) */
/* Buffers held inside the task: a launch of two inputs and one output, a copy or a free
 * needs at most three; only graph runs spill into a separately allocated array. */
#define TASK_INLINE_BUFS 4

/* A graph run scheduled as steps (graph/steps.h): which steps wait, are ready, sent or done,
 * their estimates, and the item each step's unit carries. Loop thread only; one block. */
enum step_state { STEP_WAITING = 0, STEP_READY, STEP_SENT, STEP_DONE };

struct run_steps {
        const struct graph_steps *gs;
        int nsteps;
        struct exec_item *items; /* per step */
        uint64_t *cost;          /* [step * OPS_ENGINE_COUNT + engine], ns (model estimate) */
        uint64_t *host_ns;       /* per step: measured on one host thread at load, 0 unknown */
        /* A long node step split into parts (graph/split.h) that run at the same time on
         * free workers, like the tiles of a launch: the most it may take (from the
         * estimate), how many it takes (0 until first sent), and of those sent and back. */
        uint32_t *max_parts, *parts, *parts_sent, *parts_done;
        int *pending;            /* per step: steps it still waits for */
        int *in_unit;            /* per step, while a unit is filled: of those, put in it */
        int *ready;              /* steps made ready, in that order: [ready_head, ready_tail) */
        int ready_head, ready_tail;
        uint8_t *state;          /* enum step_state per step */
        uint8_t *balance;        /* per step: parts a worker takes in a gang, at least (graph/exec.h) */
};

struct task {
        TAILQ_ENTRY(task) link;
        enum task_kind kind;
        uint64_t seq; /* client's task number */
        struct stream *stream; /* reference */
        struct exec_item item; /* item.call: EXEC_OP only, from the call pools */
        /* Buffers held (one reference each): the first TASK_INLINE_BUFS inline, the rest in
         * spill (TASK_MAX_REFS - TASK_INLINE_BUFS entries, allocated on first need). Added
         * through task_add_buffer only. */
        struct buffer *bufs[TASK_INLINE_BUFS];
        struct buffer **spill;
        int nbufs;
        struct region *region;
        struct npu_evt *evt; /* record / wait target (reference) */
        uint64_t gen;        /* generation recorded or waited for */
        uint64_t enqueue_ns;
        uint64_t cost[OPS_ENGINE_COUNT]; /* model estimate per engine able to run it, ns */
        int calib_slot;                  /* row of the device's calibration table */
        /* Progress when split into tiles: tiles_sent dispatched (they may run at once on
         * several workers), tiles_done of them returned. */
        uint64_t tiles, tiles_sent, tiles_done;
        int tile_engine;
        int tile_failed;
        /* A graph run scheduled as steps: its tiles are its steps (tiles = their number),
         * dispatched as their dependencies allow; NULL for other tasks. */
        struct run_steps *steps;
        uint64_t started_ns; /* its first step's dispatch: max_run_ms counts the whole run */
        uint64_t notify_tag; /* TASK_NOTIFY: the client's tag, echoed */
        int hold;     /* TASK_NOTIFY: a host callback; the stream waits for the owner's ack */
        /* Per-run options of a GRAPH_RUN_OPT record: a relative deadline replacing the
         * stream's (0: the stream's), a tag named in the task's error, and whether the owner
         * asked to cancel it while it ran (task_cancel). */
        uint64_t deadline_ns;
        int cancel_requested;
        char tag[33];
};

enum waiter_kind { WAIT_STREAM = 1, WAIT_EVENT, WAIT_SESSION };

struct waiter {
        TAILQ_ENTRY(waiter) obj_link;
        TAILQ_ENTRY(waiter) session_link;
        struct session *session;
        uint64_t request_id;
        enum waiter_kind kind;
        void *target;
        /* event_notify: answered by a "completion" notification naming the event (its
         * handle) and the tag, not by a reply (the request was answered at once) */
        int notify;
        uint32_t notify_event;
        uint64_t notify_tag;
};

TAILQ_HEAD(waiter_list, waiter);

/* The computed output shapes of a completed flexible graph run (PROTO_RUN_FLEX_OUTPUTS),
 * kept per stream for the owner to read (graph_run_shapes); the oldest of
 * STREAM_RUN_RESULTS goes first. shapes[] have no data. */
#define STREAM_RUN_RESULTS 16
struct run_result {
        uint64_t seq;
        int nout;
        struct ops_tensor shapes[];
};

struct stream_error {
        int code; /* 0 none */
        uint64_t seq;
        char message[256];
};

struct stream {
        int refs;
        struct exec *x;
        uint32_t handle;
        struct session *session; /* owner; NULL once it is gone */
        TAILQ_ENTRY(stream) session_link; /* the owner's list */
        struct device *dev;
        int priority;
        TAILQ_HEAD(, task) tasks; /* queued, not yet running */
        uint32_t ntasks;
        struct exec_unit *running; /* a unit of the stream at the backend, NULL if none */
        int nrunning;              /* units at the backend: several tiles of its head task */
        struct npu_evt *blocked_on; /* head is a wait not yet satisfied */
        TAILQ_ENTRY(stream) blocked_link;
        struct tenant *tenant;      /* reference; scheduling and accounting */
        struct uid_usage *uu;       /* the owner's: the creating uid's usage, counted until freed */
        struct pd_queue q;          /* the dispatch policy's view of this stream */
        uint64_t deadline_ns;       /* relative deadline of each task, 0 = none */
        int settle_pending;
        TAILQ_ENTRY(stream) settle_link;
        int destroyed;
        int busy_marker;      /* the last task queued is a "busy" failure marker */
        int held;             /* its head is a host callback the owner has not acked yet */
        uint64_t last_end_ns; /* when the stream's previous task finished */
        struct stream_error error; /* first failure since the last synchronize */
        struct waiter_list waiters;
        struct run_result *results[STREAM_RUN_RESULTS]; /* ring; NULL slots unused */
        unsigned results_next;
};

struct npu_evt {
        int refs;
        uint64_t recorded_gen, completed_gen;
        uint64_t ts_ns; /* time the last completed record ran */
        struct stream_error error; /* failure before the last completed record */
        TAILQ_HEAD(, stream) blocked;
        struct waiter_list waiters;
};

/* A stream of owner on dev (the owner links it into its own bookkeeping; the observer's
 * stream_released tells it when the last reference is gone). */
struct stream *stream_new(struct exec *x, struct session *owner, struct device *dev,
                          int priority, struct tenant *tenant);
struct stream *stream_ref(struct stream *st);
void stream_unref(struct stream *st);
static inline int stream_idle(const struct stream *st)
{
        return st->ntasks == 0 && !st->running;
}

struct npu_evt *evt_new(void);
struct npu_evt *evt_ref(struct npu_evt *e);
void evt_unref(struct npu_evt *e);
static inline int evt_complete(const struct npu_evt *e)
{
        return e->completed_gen >= e->recorded_gen;
}

/* Keep the output shapes of graph run seq (copied from got[0..nout)); dropped silently when
 * memory is short (the owner then reads "not kept"). The result of seq, or NULL. */
void stream_keep_result(struct stream *st, uint64_t seq, int nout, const struct ops_tensor *got);
const struct run_result *stream_find_result(const struct stream *st, uint64_t seq);

struct task *task_new(enum task_kind kind, struct stream *st, uint64_t seq);
/* The i-th buffer t holds (i < t->nbufs). */
static inline struct buffer *task_buffer(const struct task *t, int i)
{
        return i < TASK_INLINE_BUFS ? t->bufs[i] : t->spill[i - TASK_INLINE_BUFS];
}
/* Give t one reference to b, released with the task (no check for duplicates: see
 * task_hold_buffer). 0, or -1 when t holds TASK_MAX_REFS already or memory is short. */
int task_add_buffer(struct task *t, struct buffer *b);
/* A packed operator call with room for these counts (backend.h), from the pool of its size
 * class (loop thread only); the caller writes it with exec_call_pack. NULL when memory is
 * short. The call goes back with exec_call_put, on the loop thread, once no worker reads it. */
struct exec_call *exec_call_get(int nin, int nout, int nattr);
void exec_call_put(struct exec_call *c);
/* Copy src into dst (a call of at least src's size class); -1 when dst is too small. */
int exec_call_copy(struct exec_call *dst, const struct exec_call *src);
/* Release everything the task references and free it (into a reuse pool). */
void task_free(struct task *t);

/* Free the pooled tasks and calls (at shutdown). */
void task_pool_drain(void);

#endif

/* The execution layer: devices, streams, tasks, the scheduler and the backend under them.
 * It knows nothing of sockets, sessions or replies. Its owners (the client sessions of the
 * API layer) appear only as opaque pointers on streams and waiters, and everything the layer
 * has to tell them goes up through one observer table, called on the loop thread:
 *
 *   task_failed      a task of a stream failed (the stream's error is already recorded)
 *   task_done        a task ran on its device (completed or failed there; for metrics)
 *   task_retired     a task left the system (completed, failed or cancelled)
 *   stream_idle      a stream has nothing queued or running any more
 *   waiter_done      a waiter (a deferred synchronize) is satisfied; the observer replies
 *                    and frees it
 *   stream_released  a stream's last reference is gone (the owner drops its bookkeeping)
 *   unit_done        a unit of a device came back from the backend (a pending reset may end)
 *   notify_reached   a stream reached a notify task (e: the stream's error so far); with
 *                    hold, the stream waits at it until sched_notify_ack
 *
 * Observers may call back into the layer (a reply that fails can end a session, which
 * cancels its streams): every caller of an observer holds the references it still needs. */
#ifndef NPUD_EXEC_EXEC_H
#define NPUD_EXEC_EXEC_H

#include <stdint.h>
#include <sys/queue.h>

#include "daemon/exec/device.h"

struct event_base;
struct event;
struct backend;
struct stream;
struct waiter;
struct stream_error;

/* How a task ended, for task_done. */
enum { EXEC_TASK_COMPLETED = 0, EXEC_TASK_FAILED = 1, EXEC_TASK_CANCELLED = 2 };

struct exec_observer {
        void *data;
        void (*task_failed)(void *data, struct stream *st, uint64_t seq, int code, const char *msg);
        void (*task_done)(void *data, struct stream *st, int outcome, uint64_t latency_ns);
        void (*task_retired)(void *data, struct stream *st, int failed); /* failed: 0 or 1 */
        void (*stream_idle)(void *data, struct stream *st);
        void (*waiter_done)(void *data, struct waiter *w, const struct stream_error *e);
        void (*stream_released)(void *data, struct stream *st);
        void (*unit_done)(void *data, struct device *dev);
        void (*notify_reached)(void *data, struct stream *st, uint64_t seq, uint64_t tag, int hold,
                               const struct stream_error *e);
};

struct exec {
        struct event_base *base;
        struct backend *backend;
        struct device_registry devices;
        struct event *sched_event;   /* one scheduling pass per loop iteration */
        TAILQ_HEAD(, stream) settle; /* streams whose head may have changed */
        uint64_t tile_ns;            /* target duration of a dispatched unit */
        int calibrate; /* learn real kernel speed (compute mode); model mode is the model */
        /* Host workers one tenant's graph runs may hold at once (compute mode; 0 = no cap):
         * a graph run can last up to the tenant's max_run_ms, so one tenant never holds
         * every worker with them and other tenants' work always finds one. */
        int graph_worker_cap;
        struct exec_observer obs;
};

#endif

/* Applying scheduling decisions: queued tasks become ready when their stream reaches them,
 * ready streams become queues of their device's dispatch policy (policy/dispatch.h: classes
 * first — latency-critical before normal before best-effort — then weighted fair shares of
 * engine time between tenants, earliest deadline first within a tenant), each dispatch sends
 * one tile of a long task or a chain of a stream's short tasks of about the tile duration to
 * the backend as a unit, and completions advance streams, events and waiters. */
#ifndef NPUD_SCHED_H
#define NPUD_SCHED_H

#include <stddef.h>

#include "daemon/backend/backend.h"
#include "exec.h"
#include "stream.h"

/* Append a prepared task to its stream (takes ownership). */
void sched_enqueue(struct exec *x, struct task *t);
/* Ask for a scheduling pass at the end of this loop iteration. */
void sched_kick(struct exec *x);
/* Run a scheduling pass now. */
void sched_run(struct exec *x);
/* Backend completion callback. */
void sched_unit_complete(struct exec_unit *unit, void *userdata);
/* While on, best-effort units that come back wait (still in flight) until it is turned off:
 * the loop thread polls for a latency-critical request then and must be free when it comes
 * (lcpoll.h); turning it off completes them. Units held so far in sched_held_background. */
void sched_hold_background(struct exec *x, int on);
uint64_t sched_held_background(void);
/* Are units at the backend (on the host workers, or held by the device model)? */
int sched_units_in_flight(void);
/* Cancel the units running at the backend on one device (NULL: every device); they come
 * back, failed as cancelled, through sched_unit_complete. */
void sched_cancel_running(struct exec *x, const struct device *dev);
/* Drop the queued tasks of a stream, as cancelled, and cancel its running unit. */
void sched_stream_cancel(struct exec *x, struct stream *st);
/* Task seq of st, queued or running (*ret_running); NULL when neither. */
struct task *sched_find_task(struct stream *st, uint64_t seq, int *ret_running);
/* Cancel task seq of st for its owner: a queued task fails as cancelled in its place
 * (reported by the stream's synchronize like any failure); a running graph run, or a tiled
 * task, is cut at its next node or tile. 0 with what was done in msg, or PROTO_E_BUSY (a
 * chain of short tasks already at the device), PROTO_E_INVALID (not queued nor running). */
int sched_task_cancel(struct exec *x, struct stream *st, uint64_t seq, char *msg, size_t msglen);
/* The absolute deadline the dispatch policy sees for t (the run's own, else its stream's;
 * 0 = none). */
uint64_t sched_task_deadline(const struct task *t);
/* Reply now to waiters whose condition holds. */
void sched_check_stream_waiters(struct exec *x, struct stream *st);
void sched_check_event_waiters(struct exec *x, struct npu_evt *e);
/* Record a failure on a stream (the first since its last synchronize wins) and tell the
 * observer; seq is the client's task number. */
void sched_task_failed(struct exec *x, struct stream *st, uint64_t seq, int code,
                       const char *message);
/* The owner acknowledges the host callback (a held notify task, seq) at st's head: the
 * stream goes on. 0, or -1 when st does not wait for that task. */
int sched_notify_ack(struct exec *x, struct stream *st, uint64_t seq);
/* Free the pooled units (at shutdown, before task_pool_drain: they hold pooled calls). */
void sched_pool_drain(void);
/* sizeof(struct sched_unit), which is private to sched.c (for benchmarks). */
extern const size_t sched_unit_size;

#endif

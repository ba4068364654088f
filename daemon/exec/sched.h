/* Applying scheduling decisions: queued tasks become ready when their stream reaches them,
 * ready streams get engine cores on their device, chains of a stream's tasks go to the
 * backend as units, and completions advance streams, events and waiters. The foundation's
 * policy is strict stream priority, round robin within a priority, one core per unit. */
#ifndef NPUD_SCHED_H
#define NPUD_SCHED_H

#include "daemon/backend/backend.h"
#include "stream.h"

struct npud;

/* Append a prepared task to its stream (takes ownership). */
void sched_enqueue(struct npud *d, struct task *t);
/* Ask for a scheduling pass at the end of this loop iteration. */
void sched_kick(struct npud *d);
/* Run a scheduling pass now. */
void sched_run(struct npud *d);
/* Backend completion callback. */
void sched_unit_complete(struct exec_unit *unit, void *userdata);
/* Cancel the units running at the backend on one device (NULL: every device); they come
 * back, failed as cancelled, through sched_unit_complete. */
void sched_cancel_running(struct npud *d, const struct device *dev);
/* Drop the queued tasks of a stream, as cancelled, and cancel its running unit. */
void sched_stream_cancel(struct npud *d, struct stream *st);
/* Reply now to waiters whose condition holds. */
void sched_check_stream_waiters(struct npud *d, struct stream *st);
void sched_check_event_waiters(struct npud *d, struct npu_evt *e);
void sched_check_session_waiters(struct npud *d, struct session *s);

#endif

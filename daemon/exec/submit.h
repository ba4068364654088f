/* Submission of SUBMIT records into tasks (see submit.c). */
#ifndef NPUD_EXEC_SUBMIT_H
#define NPUD_EXEC_SUBMIT_H

#include <stddef.h>

#include "stream.h"

struct handle_table;
struct proto_rec;

/* Prepare task t (of kind TASK_EXEC, TASK_EVENT_RECORD, TASK_STREAM_WAIT or TASK_NOTIFY, on
 * stream st)
 * from record r, resolving handles in h: 0, or a PROTO_E_* code with msg naming what is
 * wrong. The task holds what it references (buffers, region, event, graph) whatever the
 * outcome; the caller frees it on failure. */
int submit_prepare(struct handle_table *h, struct stream *st, const struct proto_rec *r,
                   struct task *t, char *msg, size_t msglen);
/* Hold buffer b for task t (once). 0, or -1 when the task holds TASK_MAX_REFS already or
 * its spill array cannot be allocated. */
int task_hold_buffer(struct task *t, struct buffer *b);

#endif

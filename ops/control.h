/* The control-flow operators of control.c (If, Loop, Scan) for the family list. */
#ifndef NPUD_OPS_CONTROL_H
#define NPUD_OPS_CONTROL_H

#include "ops-internal.h"

extern const struct ops_def ops_if_def;
extern const struct ops_def ops_loop_def;
extern const struct ops_def ops_scan_def;
extern const struct ops_def ops_scan8_def; /* opset 8: batch axis, sequence_lens */

/* Drop what an infer of If, Loop or Scan kept for a run that did not come (the node failed
 * between infer and run, or only its shapes were wanted): the executor calls it after every
 * node, so results never outlive the run and the budget they are charged to. */
void ops_control_forget(void);

#endif

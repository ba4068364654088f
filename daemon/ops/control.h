/* The control-flow operators of control.c (If, Loop, Scan) for the family list. */
#ifndef NPUD_OPS_CONTROL_H
#define NPUD_OPS_CONTROL_H

#include "ops-internal.h"

extern const struct ops_def ops_if_def;
extern const struct ops_def ops_loop_def;
extern const struct ops_def ops_scan_def;

#endif

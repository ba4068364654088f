/* The control kernel family's registry list (kernels in control.c): operators that run
 * subgraphs through the executor and so work only inside graphs. */
#include "control.h"

const struct ops_def *const ops_family_control[] = {
        &ops_if_def,
        &ops_loop_def,
        &ops_scan_def,
        NULL,
};

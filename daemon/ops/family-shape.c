/* The shape kernel family's registry list (kernels live in their own files, shape*.c). */
#include "shape-common.h"

const struct ops_def *const ops_family_shape[] = {
        NULL,
};

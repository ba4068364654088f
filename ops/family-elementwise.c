/* The elementwise kernel family's registry list: the operators of ew-binary.c, ew-unary.c
 * (with CastLike), ew-activation.c and ew-logic.c. Add, Sub, Mul, Div, Relu, Sigmoid, Tanh
 * and Cast (cast.c) are in the core list of ops.c. Where an operator has several definitions
 * (Clip), the newest comes first, so that lookups by name (wire launches) find it. */
#include "ew.h"

#define EW_LIST_DEF(sym) &ops_##sym##_def,

const struct ops_def *const ops_family_elementwise[] = {
        EW_FAMILY_DEFS(EW_LIST_DEF)
        NULL,
};

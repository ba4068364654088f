/* Tiles: a long task is split into pieces of about the scheduler's tile duration, so a
 * latency-critical task waits at most one tile behind it. Copies and memsets split into byte
 * ranges, elementwise operators into element ranges, 2-D MatMul into row blocks. */
#ifndef NPUD_TILE_H
#define NPUD_TILE_H

#include <stdint.h>

#include "daemon/backend/backend.h"

/* How many tiles an item can be split into at most (1 = not splittable). */
uint64_t tile_max(const struct exec_item *it);
/* Fill *ret with tile k of n of item it (n <= tile_max(it)). A tile of an operator item
 * runs on modified tensors: call (room for the largest call) is where its call is written
 * (ret->call points to it; it must stay untouched while the tile runs); NULL is allowed for
 * other kinds. */
void tile_make(const struct exec_item *it, uint64_t n, uint64_t k, struct exec_item *ret,
               struct exec_call *call);

#endif

/* Splitting one long node of a graph run into parts that run at the same time on several
 * workers, each the same kernel on a slice of the work (issue 11: "long steps are tiled").
 * A part is exact: it computes its slice of the output with the same arithmetic per
 * element as the whole node does; but for a Conv's row blocks, whose GEMM over fewer
 * columns may sum in another order (within 1e-5 relative). The scheduler takes the same
 * parts for a step whatever the load (gang_fill), so a run's results stay the same from
 * one run to the next on a given daemon.
 *  - MatMul with a 2-D right-hand side, Gemm without transA: row blocks of the left-hand
 *    side and the output (a MatMul's leading dimensions are flattened into rows);
 *  - Gemm with transB and few rows (an MLP layer on a small batch): column blocks, that is
 *    row blocks of B and slices of a row-vector bias; the part writes its columns into a
 *    buffer of its own that the caller scatters into the output's rows;
 *  - Conv: images of the batch; with one 2-D image of at least 2 x GRAPH_SPLIT_MIN_SPATIAL
 *    output rows (and explicit pads), blocks of output rows (28 at least: a GEMM over
 *    fewer columns loses speed, 28 of 56 beat 9 of 56 in the ResNet block): a part convolves the input
 *    rows they read (copied out, its own pads at the top and bottom: graph_split_conv_rows)
 *    into a buffer of its own that the caller scatters into the output's rows, so no part
 *    lays out more than its share of the input (a ResNet block's 3x3 convolutions); with
 *    fewer rows and one group, blocks of output channels (rows of the weights, the bias,
 *    and a contiguous slice of the output);
 *  - Softmax, LogSoftmax, LayerNormalization and the fused softmax over the dims before
 *    their axis, a MatMul over its batch dims (both operands 3-D or more): ranges of the
 *    first output dim larger than 1 (the dims before it all 1), sliced in every tensor that
 *    has it, whole in those that broadcast over it (a mask over the heads, a scale);
 *  - elementwise operators (OPS_FLAG_ELEMENTWISE, a fused chain among them) whose every
 *    input has the output's element count or one element: ranges of elements, at least
 *    GRAPH_SPLIT_MIN_ELEMS each, every tensor seen flat.
 * Parts stay at least a minimum size (64 rows, since each part repacks the other operand,
 * 32 with a B packed at load; columns 256, since each column block is packed apart and
 * scattered; 32 output channels of a Conv, since each part lays the whole input out
 * again), so a small GEMM stays one part. */
#ifndef NPUD_GRAPH_SPLIT_H
#define NPUD_GRAPH_SPLIT_H

#include <stdint.h>

#include "ops/ops.h"

enum graph_split_how { GRAPH_SPLIT_NONE, GRAPH_SPLIT_ROWS, GRAPH_SPLIT_COLS, GRAPH_SPLIT_BATCH,
                       GRAPH_SPLIT_CHANNELS, GRAPH_SPLIT_FLAT, GRAPH_SPLIT_SPATIAL,
                       GRAPH_SPLIT_LEADING };

#define GRAPH_SPLIT_MIN_ROWS 256
/* Row parts of a MatMul or Gemm in a graph run repack B each (when it is not packed at
 * load): 64 rows at least keep that a few percent of the part's products. */
#define GRAPH_SPLIT_MIN_GEMM_ROWS 64
#define GRAPH_SPLIT_MIN_ELEMS (64 << 10)
#define GRAPH_SPLIT_MIN_CHANNELS 32
#define GRAPH_SPLIT_MIN_SPATIAL 28
#define GRAPH_SPLIT_MAX_PARTS 64
/* A 2-D Conv in row blocks under float64 or mixed accumulation computes its rows in place
 * (graph_conv_acc_rows: no copy of its input or output rows, the same sums whatever the
 * blocks; not with a fused epilogue that has a bias of its own,
 * graph_conv_acc_epilogue_ok), so its parts may be as small as this many output rows, and a gang takes
 * GRAPH_SPLIT_BALANCE parts a worker of it where the rows allow: the workers claim parts as
 * they finish, and the two vCPUs of these hosts run at different speeds for minutes at a
 * time, so with a part a worker the faster one waits for the slower at the end of each
 * convolution. On the ResNet block under mixed accumulation (2 workers), eight parts of 7
 * rows instead of two of 28 halved the workers' waits (0.64-1.03 ms a run of both workers'
 * time down to 0.37-0.49) at the same part time, and the run's median fell 1-14 % in four
 * alternated pairs. oneDNN's float32 convolution reorders each part's rows and lost 12-20 %
 * of its part time that way: it keeps GRAPH_SPLIT_MIN_SPATIAL. */
#define GRAPH_SPLIT_MIN_SPATIAL_IN_PLACE 7
#define GRAPH_SPLIT_BALANCE 4

struct graph_split {
        int how;        /* enum graph_split_how */
        int64_t extent; /* rows, columns, images or channels to share out */
        int64_t min;    /* the least a part takes */
        int dim;        /* GRAPH_SPLIT_LEADING: the output dim shared out */
};

/* How a call of def (shapes inferred, data pointers may be NULL) splits; how =
 * GRAPH_SPLIT_NONE when it does not. */
void graph_split_plan(const struct ops_def *def, const struct ops_call *call, struct graph_split *s);

/* GRAPH_SPLIT_SPATIAL: output rows [lo, hi) of a 2-D Conv read input rows [a, b), which a
 * sub-convolution with these pads at the top and the bottom (the whole one's elsewhere)
 * turns into exactly those output rows. */
struct graph_split_rows {
        int64_t a, b, top, bottom;
};
void graph_split_conv_rows(const struct ops_call *whole, int64_t lo, int64_t hi,
                           struct graph_split_rows *r);

/* At most how many parts it may take (1: it stays whole). */
uint32_t graph_split_max_parts(const struct ops_def *def, const struct ops_call *call);
/* The same for a node whose B is packed at load (graph_node.packed, ops/blas.h): a row part
 * multiplies its rows by the packed copy and repacks nothing, so row parts may be as small
 * as GRAPH_SPLIT_MIN_ROWS_PACKED. */
#define GRAPH_SPLIT_MIN_ROWS_PACKED 32
uint32_t graph_split_max_parts_packed(const struct ops_def *def, const struct ops_call *call,
                                      int b_packed);

/* Narrow *c (a copy of the whole call, data pointers set) to part k of n of plan s; for
 * GRAPH_SPLIT_COLS the output keeps the whole one's pointer and the caller writes the part
 * into a buffer of its own ([rows, hi - lo]) first. *lo, *hi: the part's range of the
 * extent (empty when lo == hi). */
void graph_split_part(const struct ops_call *whole, const struct graph_split *s, int k, int n,
                      struct ops_call *c, int64_t *lo, int64_t *hi);

#endif

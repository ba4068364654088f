/* The reduce kernel family's registry list (kernels in reduce.c, reduce-scan.c and
 * softmax.c; the opset-13 Softmax, which wire launches use, is in the core list of ops.c).
 * Where an operator has several definitions (one per ONNX semantics change) the newest
 * comes first, so that ops_lookup, which wire launches use, finds it. */
#include "shape-common.h"

const struct ops_def *const ops_family_reduce[] = {
        &ops_reduce_sum_def,
        &ops_reduce_sum1_def,
        &ops_reduce_mean_def,
        &ops_reduce_mean1_def,
        &ops_reduce_max_def,
        &ops_reduce_max1_def,
        &ops_reduce_min_def,
        &ops_reduce_min1_def,
        &ops_reduce_prod_def,
        &ops_reduce_prod1_def,
        &ops_reduce_l1_def,
        &ops_reduce_l11_def,
        &ops_reduce_l2_def,
        &ops_reduce_l21_def,
        &ops_reduce_log_sum_def,
        &ops_reduce_log_sum1_def,
        &ops_reduce_log_sum_exp_def,
        &ops_reduce_log_sum_exp1_def,
        &ops_reduce_sum_square_def,
        &ops_reduce_sum_square1_def,
        &ops_argmax_def,
        &ops_argmin_def,
        &ops_cumsum_def,
        &ops_topk_def,
        &ops_topk1_def,
        &ops_softmax1_def,
        &ops_log_softmax_def,
        &ops_log_softmax1_def,
        &ops_hardmax_def,
        &ops_hardmax1_def,
        NULL,
};

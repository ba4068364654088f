/* What the reduce and shape kernel families (ops/reduce*.c, shape*.c, softmax.c)
 * share and nothing else: the definitions they export to family-reduce.c and
 * family-shape.c, runs of elements of any numeric dtype converted to and from double or
 * int64, readers of attributes and of the small integer inputs (axes, shapes, pads) that
 * infer needs, axis normalisation, N-D strided and index-mapped copies of elements of any
 * size, the infer-based check with attribute names, and a cost from tensor sizes. */
#ifndef NPUD_OPS_SHAPE_COMMON_H
#define NPUD_OPS_SHAPE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ops-internal.h"

/* reduce family (reduce.c, reduce-scan.c, softmax.c) */
extern const struct ops_def ops_reduce_sum_def, ops_reduce_sum1_def;
extern const struct ops_def ops_reduce_mean_def, ops_reduce_mean1_def;
extern const struct ops_def ops_reduce_max_def, ops_reduce_max1_def;
extern const struct ops_def ops_reduce_min_def, ops_reduce_min1_def;
extern const struct ops_def ops_reduce_prod_def, ops_reduce_prod1_def;
extern const struct ops_def ops_reduce_l1_def, ops_reduce_l11_def;
extern const struct ops_def ops_reduce_l2_def, ops_reduce_l21_def;
extern const struct ops_def ops_reduce_log_sum_def, ops_reduce_log_sum1_def;
extern const struct ops_def ops_reduce_log_sum_exp_def, ops_reduce_log_sum_exp1_def;
extern const struct ops_def ops_reduce_sum_square_def, ops_reduce_sum_square1_def;
extern const struct ops_def ops_argmax_def, ops_argmin_def;
extern const struct ops_def ops_cumsum_def, ops_topk_def, ops_topk1_def;
extern const struct ops_def ops_softmax1_def, ops_log_softmax_def, ops_log_softmax1_def;
extern const struct ops_def ops_hardmax_def, ops_hardmax1_def;

/* shape family (shape.c, shape-move.c, shape-index.c, shape-resize.c) */
extern const struct ops_def ops_reshape_def, ops_reshape1_def, ops_flatten_def;
extern const struct ops_def ops_squeeze_def, ops_squeeze1_def;
extern const struct ops_def ops_unsqueeze_def, ops_unsqueeze1_def;
extern const struct ops_def ops_identity_def, ops_dropout_def, ops_shape_def, ops_size_def;
extern const struct ops_def ops_constant_def, ops_constant_of_shape_def, ops_range_def;
extern const struct ops_def ops_eye_like_def;
extern const struct ops_def ops_transpose_def, ops_concat_def;
extern const struct ops_def ops_split_def, ops_split13_def, ops_split2_def;
extern const struct ops_def ops_slice_def, ops_slice1_def, ops_expand_def, ops_tile_def;
extern const struct ops_def ops_pad_def, ops_pad11_def, ops_pad2_def;
extern const struct ops_def ops_depth_to_space_def, ops_space_to_depth_def, ops_trilu_def;
extern const struct ops_def ops_reverse_sequence_def;
extern const struct ops_def ops_gather_def, ops_gather_elements_def, ops_gather_nd_def;
extern const struct ops_def ops_scatter_elements_def, ops_scatter_def, ops_scatter_nd_def;
extern const struct ops_def ops_one_hot_def, ops_non_zero_def, ops_compress_def,
        ops_unique_def;
extern const struct ops_def ops_resize_def, ops_resize11_def, ops_resize10_def,
        ops_upsample_def;
/* random.c */
extern const struct ops_def ops_random_normal_def, ops_random_uniform_def;
extern const struct ops_def ops_random_normal_like_def, ops_random_uniform_like_def;
extern const struct ops_def ops_bernoulli_def, ops_multinomial_def;

/* Dtype sets as bit masks of proto dtype codes. */
#define SHP_T(d) (1u << (d))
#define SHP_FLOATS                                                                             \
        (SHP_T(PROTO_DTYPE_FLOAT32) | SHP_T(PROTO_DTYPE_FLOAT16) | SHP_T(PROTO_DTYPE_FLOAT64) | \
         SHP_T(PROTO_DTYPE_BFLOAT16))
#define SHP_SIGNED                                                                             \
        (SHP_T(PROTO_DTYPE_INT8) | SHP_T(PROTO_DTYPE_INT16) | SHP_T(PROTO_DTYPE_INT32) |       \
         SHP_T(PROTO_DTYPE_INT64))
#define SHP_UNSIGNED                                                                           \
        (SHP_T(PROTO_DTYPE_UINT8) | SHP_T(PROTO_DTYPE_UINT16) | SHP_T(PROTO_DTYPE_UINT32) |    \
         SHP_T(PROTO_DTYPE_UINT64))
#define SHP_INTS (SHP_SIGNED | SHP_UNSIGNED)
#define SHP_NUMERIC (SHP_FLOATS | SHP_INTS)
#define SHP_ALL (SHP_NUMERIC | SHP_T(PROTO_DTYPE_BOOL))
#define SHP_INDEX (SHP_T(PROTO_DTYPE_INT32) | SHP_T(PROTO_DTYPE_INT64))

/* Most dims a copy takes: Tile views every axis as two. */
#define SHP_COPY_MAX_DIMS (2 * OPS_MAX_DIMS)

/* How typed kernels hold elements: as double, or as the bits of an int64 (sign-extended for
 * signed dtypes, zero-extended for unsigned ones and bool, so uint64 keeps its value). */
enum shp_num { SHP_NUM_NONE = 0, SHP_NUM_FLOAT, SHP_NUM_SIGNED, SHP_NUM_UNSIGNED };
int shp_num_class(int dtype);

/* n elements of src from element off on, converted. Floats stored into integer dtypes are
 * truncated toward zero and saturated (NaN gives 0); integers stored into narrower integer
 * dtypes wrap; anything stored into bool is "not zero". */
void shp_load_f64(int dtype, const void *src, int64_t off, int64_t n, double *dst);
void shp_load_i64(int dtype, const void *src, int64_t off, int64_t n, int64_t *dst);
void shp_store_f64(int dtype, void *dst, int64_t off, int64_t n, const double *src);
void shp_store_i64(int dtype, void *dst, int64_t off, int64_t n, const int64_t *src);
/* Element i of t. */
double shp_get_f64(const struct ops_tensor *t, int64_t i);
int64_t shp_get_i64(const struct ops_tensor *t, int64_t i);
/* Element i of a tensor of dtype is not zero (NaN is not zero, -0.0 is). */
int shp_nonzero(int dtype, const void *data, int64_t i);

/* Input i given (not omitted)? */
int shp_has_in(const struct ops_call *call, int i);
/* Sets output i's dtype and shape (dims NULL when ndim is 0). */
void shp_set_out(struct ops_call *call, int i, int dtype, int ndim, const int64_t *dims);

/* What every infer starts with: input and output counts against def, every given input's
 * rank, dims and size sane. Messages start with def->name. */
int shp_infer_begin(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen);
/* Input i's dtype must be in the mask. */
int shp_want_dtype(const struct ops_def *def, const struct ops_call *call, int i,
                   uint32_t mask, char *err, size_t errlen);
/* The values of integer input i, at most max of them, into ret (*ret_n of them). Fails
 * with a message naming the input (what) when its data is not available, as when a wire
 * launch is checked: such outputs depend on the data. */
int shp_input_ints(const struct ops_def *def, const struct ops_call *call, int i,
                   const char *what, int64_t *ret, int max, int *ret_n, char *err,
                   size_t errlen);
/* Input i's data must be readable for infer (message as above). */
int shp_need_data(const struct ops_def *def, const struct ops_call *call, int i,
                  const char *what, char *err, size_t errlen);

/* Attribute readers that reject a wrong kind with a message. An INT counts as a
 * one-element INTS; *ret_n is -1 when the attribute is absent. */
int shp_attr_ints(const struct ops_def *def, const struct ops_call *call, const char *name,
                  int64_t *ret, int max, int *ret_n, char *err, size_t errlen);
int shp_attr_int(const struct ops_def *def, const struct ops_call *call, const char *name,
                 int64_t dflt, int64_t *ret, char *err, size_t errlen);
int shp_attr_float(const struct ops_def *def, const struct ops_call *call, const char *name,
                   double dflt, double *ret, char *err, size_t errlen);
int shp_attr_str(const struct ops_def *def, const struct ops_call *call, const char *name,
                 const char *dflt, const char **ret, char *err, size_t errlen);

/* axis in [-rank, rank - 1] into [0, rank - 1]. */
int shp_axis(const struct ops_def *def, int64_t axis, int rank, int *ret, char *err,
             size_t errlen);
/* A list of axes (negative counting from the end, none repeated) as a bit mask. */
int shp_axes_mask(const struct ops_def *def, const int64_t *axes, int n, int rank,
                  uint32_t *ret_mask, char *err, size_t errlen);
/* Splits t's shape around axis into the element counts before it, at it and after it. */
void shp_split3(const struct ops_tensor *t, int axis, int64_t *outer, int64_t *n,
                int64_t *inner);

/* Row-major element strides of dims. */
void shp_strides(int ndim, const int64_t *dims, int64_t *strides);
/* Copies the box dims (at most SHP_COPY_MAX_DIMS): the element at index i goes from
 * src + sum(i[d] * src_strides[d]) to dst + sum(i[d] * dst_strides[d]) (element strides,
 * any sign, 0 for broadcasting). Runs contiguous in both go through memcpy. */
void shp_copy_strided(size_t esize, int ndim, const int64_t *dims, void *dst,
                      const int64_t *dst_strides, const void *src, const int64_t *src_strides);
/* Fills a contiguous dst with the box dims (at most OPS_MAX_DIMS) whose element at index i
 * is src[sum(maps[d][i[d]])]: maps hold element offsets per axis. */
void shp_copy_mapped(size_t esize, int ndim, const int64_t *dims, void *dst, const void *src,
                     const int64_t *const *maps);
/* n copies of the element at value into dst. */
void shp_fill(void *dst, int64_t n, const void *value, size_t esize);

/* Cost: flops_per_elem per element of the largest tensor, bytes of every tensor. */
void shp_cost(const struct ops_call *call, uint64_t flops_per_elem, uint64_t *ret_flops,
              uint64_t *ret_bytes);

#endif

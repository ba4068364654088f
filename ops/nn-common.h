/* What the nn kernel family (ops/nn-*.c) shares and nothing else: the definitions
 * each file exports to family-nn.c, attribute readers for the array and string kinds,
 * element loads of any numeric dtype, float32 working copies of tensors of other dtypes,
 * the window geometry of convolutions and pools (strides, dilations, pads, auto_pad,
 * ceil_mode), im2col / col2im, and the infer-based check that tolerates omitted optional
 * outputs. */
#ifndef NPUD_OPS_NN_COMMON_H
#define NPUD_OPS_NN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ops-internal.h"

extern const struct ops_def ops_gemm_def;
/* spectral.c */
extern const struct ops_def ops_hann_window_def, ops_hamming_window_def, ops_blackman_window_def;
extern const struct ops_def ops_mel_weight_matrix_def, ops_dft_def, ops_stft_def;
extern const struct ops_def ops_conv_def;
extern const struct ops_def ops_conv_transpose_def;
extern const struct ops_def ops_conv_integer_def;
extern const struct ops_def ops_qlinear_conv_def;
extern const struct ops_def ops_max_pool_def;
extern const struct ops_def ops_average_pool_def;
extern const struct ops_def ops_lp_pool_def;
extern const struct ops_def ops_global_average_pool_def;
extern const struct ops_def ops_global_max_pool_def;
extern const struct ops_def ops_global_lp_pool_def;
extern const struct ops_def ops_max_unpool_def;
extern const struct ops_def ops_batch_norm_def;
extern const struct ops_def ops_layer_norm_def;
extern const struct ops_def ops_instance_norm_def;
extern const struct ops_def ops_lrn_def;
extern const struct ops_def ops_lp_norm_def;
extern const struct ops_def ops_mvn_def;
extern const struct ops_def ops_nll_loss_def;
extern const struct ops_def ops_sce_loss_def;
extern const struct ops_def ops_quantize_linear_def;
extern const struct ops_def ops_dequantize_linear_def;
extern const struct ops_def ops_dynamic_quantize_linear_def;
extern const struct ops_def ops_matmul_integer_def;
extern const struct ops_def ops_qlinear_matmul_def;
extern const struct ops_def ops_rnn_def;
extern const struct ops_def ops_gru_def;
extern const struct ops_def ops_lstm_def;
extern const struct ops_def ops_einsum_def;
extern const struct ops_def ops_nms_def;
extern const struct ops_def ops_roi_align_def;
extern const struct ops_def ops_roi_align10_def;
extern const struct ops_def ops_grid_sample_def;
extern const struct ops_def ops_det_def;
/* nn-train.c (domain ai.onnx.preview.training) and nn-tfidf.c */
extern const struct ops_def ops_adagrad_def, ops_adam_def, ops_momentum_def;
extern const struct ops_def ops_tfidf_def;
/* nn-string.c */
extern const struct ops_def ops_strnorm_def;

/* Spatial dims of convolutions and pools: 1-D to 3-D, stored right-aligned in 3-D arrays
 * whose unused leading entries describe a unit extent (so kernels loop over 3 dims). */
#define NN_SP 3

struct nn_geom {
        int nsp;                                 /* spatial dims really present */
        int64_t in[NN_SP], k[NN_SP], out[NN_SP];
        int64_t stride[NN_SP], dil[NN_SP], pb[NN_SP], pe[NN_SP];
};

enum nn_geom_flags {
        NN_GEOM_CEIL = 1 << 0,   /* read ceil_mode */
        NN_GEOM_NODIL = 1 << 1,  /* dilations not allowed (they stay 1) */
};

/* The attributes strides, dilations and pads alone (extents 1, auto_pad not applied). */
int nn_geom_attrs(const struct ops_call *call, const char *op, int nsp, unsigned flags,
                  struct nn_geom *g, char *err, size_t errlen);
/* Geometry from the attributes strides, dilations, pads and auto_pad (and ceil_mode with
 * NN_GEOM_CEIL) for nsp spatial dims of extents in[] under a kernel of extents k[].
 * 0 or -EINVAL with a message that starts with op. */
int nn_geom_init(const struct ops_call *call, const char *op, int nsp, const int64_t *in,
                 const int64_t *k, unsigned flags, struct nn_geom *g, char *err,
                 size_t errlen);
/* Product of the in / k / out extents. */
int64_t nn_geom_in_size(const struct nn_geom *g);
int64_t nn_geom_k_size(const struct nn_geom *g);
int64_t nn_geom_out_size(const struct nn_geom *g);

/* col[(c * ksize + kidx) * osize + o] = x[c][window position of o and kidx], pad for
 * positions in the padding; x holds channels images of g->in. The output positions are
 * those of output lines [r0, r1) (a line: od * out[1] + oh, out[2] positions each; osize:
 * (r1 - r0) * out[2]); all of them for r0 = 0, r1 = out[0] * out[1]. */
void nn_im2col_f32(const float *x, int64_t channels, const struct nn_geom *g, int64_t r0, int64_t r1, float *col);
void nn_im2col_f64(const double *x, int64_t channels, const struct nn_geom *g, int64_t r0, int64_t r1,
                   double *col);
/* float32 in, float64 out (the float64 accumulation of OPS_SGEMM_F64). */
void nn_im2col_f32_f64(const float *x, int64_t channels, const struct nn_geom *g, int64_t r0, int64_t r1,
                       double *col);
/* The adjoint of im2col: adds every col entry into its x position (padding dropped). */
void nn_col2im_f32(const float *col, int64_t channels, const struct nn_geom *g, float *x);

/* Attribute readers. nn_attr_ints: number of values copied (an INT counts as one), -1 when
 * absent, -2 when of another kind or longer than max. */
int nn_attr_ints(const struct ops_call *call, const char *name, int64_t *out, int max);
int nn_attr_floats(const struct ops_call *call, const char *name, float *out, int max);
/* The STRING attribute, def when absent or of another kind. */
const char *nn_attr_str(const struct ops_call *call, const char *name, const char *def);

/* Floating dtypes the family computes in float32 (float16, bfloat16, float64 converted). */
int nn_is_float(int dtype);
int nn_is_int(int dtype);
/* Element i of t as double / int64, whatever t's numeric dtype. */
double nn_get(const struct ops_tensor *t, int64_t i);
int64_t nn_get_int(const struct ops_tensor *t, int64_t i);
/* Writes v to element i of t, rounded to nearest even and saturated for integer dtypes. */
void nn_put(const struct ops_tensor *t, int64_t i, double v);

/* A float32 view of a tensor: its own data for float32, else a converted malloc'd copy
 * (owned, freed by nn_f32_done). NULL on allocation failure. For outputs, nn_f32_out gives
 * uninitialised storage and nn_f32_commit converts it back into the tensor. */
struct nn_f32 {
        float *p;
        float *owned;
};
int nn_f32_in(const struct ops_tensor *t, struct nn_f32 *ret);
int nn_f32_out(const struct ops_tensor *t, struct nn_f32 *ret);
void nn_f32_commit(const struct ops_tensor *t, struct nn_f32 *v);
void nn_f32_done(struct nn_f32 *v);

/* Converts n elements of a numeric dtype to / from float. */
void nn_to_f32(float *dst, int dtype, const void *src, int64_t n);
void nn_from_f32(void *dst, int dtype, const float *src, int64_t n);

/* Is input i present (given and not an omitted optional input)? Output i wanted? */
int nn_has_in(const struct ops_call *call, int i);
int nn_want_out(const struct ops_call *call, int i);

/* Sets output i's dtype and shape when the call has such an output. */
void nn_set_out(struct ops_call *call, int i, int dtype, int ndim, const int64_t *dims);

/* What every infer starts with: input count against def, and every present input's rank,
 * dims and element count sane. Messages start with def->name. */
int nn_infer_begin(const struct ops_def *def, const struct ops_call *call, char *err,
                   size_t errlen);
/* Input i must have one of the dtypes of the 0-terminated list. */
int nn_want_dtype(const struct ops_def *def, const struct ops_call *call, int i,
                  const int *dtypes, char *err, size_t errlen);
/* Cost from element counts: flops_per_elem times the largest tensor, bytes of every
 * tensor. */
void nn_cost_simple(const struct ops_call *call, uint64_t flops_per_elem,
                    uint64_t *ret_flops, uint64_t *ret_bytes);

/* Common dtype lists. */
extern const int nn_float_types[];   /* float32, float16, bfloat16, float64 */
extern const int nn_int_index_types[]; /* int32, int64 */

#endif

/* Dtype conversion with Cast semantics (convert.c): what Cast computes and what the
 * elementwise engine uses to run float16, bfloat16 and mixed-dtype calls through its
 * float32 kernels. */
#ifndef NPUD_OPS_CONVERT_H
#define NPUD_OPS_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

/* Whether the conversion handles dtype (bool, the integers, float16, bfloat16, float32,
 * float64). */
int ops_convert_dtype_ok(int dtype);
/* n elements of src, read with an element stride, written contiguously to dst; chunked
 * through a small buffer, so dst may start at src. */
void ops_convert(int ddtype, void *dst, int sdtype, const void *src, int64_t sstride,
                 size_t n);
/* in to out's dtype, element for element (same element count); out may start at in's
 * address even when the sizes differ. */
void ops_convert_tensor(const struct ops_tensor *in, const struct ops_tensor *out);
/* Whether Cast and CastLike of a model declaring opset (0: a wire launch, no model) truncate
 * floats to bfloat16 instead of rounding to nearest even; see convert.c. */
int ops_convert_bf16_truncates(int opset);
/* ops_convert_tensor as Cast/CastLike of a model declaring opset compute it. */
void ops_convert_tensor_opset(const struct ops_tensor *in, const struct ops_tensor *out,
                              int opset);

/* Cast between STRING and the other types (nn-string.c): 1 when neither side is STRING
 * (nothing done), else 0 or -errno with a message. */
int ops_cast_strings(const struct ops_tensor *in, const struct ops_tensor *out, char *err,
                     size_t errlen);

#endif

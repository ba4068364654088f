/* Helpers shared by the operator implementations and nothing else: the definitions each
 * kernel file exports to the registry in ops.c, argument validation common to every
 * operator, message formatting, broadcast strides and a few conversions. Not part of the
 * interface the daemon sees; that is ops.h. */
#ifndef NPUD_OPS_INTERNAL_H
#define NPUD_OPS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "runctx.h"

/* Buffers big enough for ops_shape_str and ops_dtype_str. */
#define OPS_SHAPE_STR_MAX 192
#define OPS_DTYPE_STR_MAX 24

/* Elements processed between reloads by chunked kernels (Cast, float16 helpers). */
#define OPS_CHUNK 256

/* Work between two checks of the run context in kernels whose run time scales with sizes a
 * client picks: OPS_POLL_ELEMS elements of a streaming loop, OPS_POLL_MACS multiply-adds of
 * a GEMM-like one (a few milliseconds of single-core BLAS; fewer would split 1024-row
 * products into blocks too thin to keep BLAS at speed). The check's cost (a clock read) is
 * noise at that spacing, and a cancelled or timed-out run stops within milliseconds. */
#define OPS_POLL_ELEMS (1 << 16)
#define OPS_POLL_MACS (1 << 28)

/* The run context's check for kernels: 0, or -ECANCELED with "<op>: <why>" in err (the
 * executor reports the run's stop code, PROTO_E_CANCELLED or PROTO_E_LIMIT). */
int ops_poll(const char *op, char *err, size_t errlen);

extern const struct ops_def ops_add_def;
extern const struct ops_def ops_sub_def;
extern const struct ops_def ops_mul_def;
extern const struct ops_def ops_div_def;
extern const struct ops_def ops_relu_def;
extern const struct ops_def ops_sigmoid_def;
extern const struct ops_def ops_tanh_def;
extern const struct ops_def ops_matmul_def;
extern const struct ops_def ops_softmax_def;
extern const struct ops_def ops_cast_def;

/* Kernel families (NULL-terminated), one list per family file. */
extern const struct ops_def *const ops_family_elementwise[];
extern const struct ops_def *const ops_family_reduce[];
extern const struct ops_def *const ops_family_shape[];
extern const struct ops_def *const ops_family_nn[];
extern const struct ops_def *const ops_family_control[];

/* Writes a message to err (when there is room) and returns rc. */
int ops_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* "[2,3]", "[]" for a scalar. Returns buf. */
const char *ops_shape_str(const struct ops_tensor *t, char *buf, size_t len);
/* "float32", or "dtype 99" for a code without a name. Returns buf. */
const char *ops_dtype_str(int dtype, char *buf, size_t len);

/* Same rank and dims (dtype and data ignored). */
int ops_shape_equal(const struct ops_tensor *a, const struct ops_tensor *b);

/* One tensor's rank, dims and byte size are sane; messages name def, what ("input",
 * "output") and idx. */
int ops_check_tensor(const struct ops_def *def, const char *what, int idx,
                     const struct ops_tensor *t, char *err, size_t errlen);

/* Validation every check starts with: input and output counts against def, the attribute
 * count, every attribute name in allowed (a NULL-terminated list, NULL for none) and not
 * repeated, every tensor's rank, dims and byte size. Messages start with def->name. */
int ops_check_common(const struct ops_def *def, const struct ops_call *call,
                     const char *const *allowed, char *err, size_t errlen);
/* Output 0 must have exactly the given dtype and the shape of want. */
int ops_check_output(const struct ops_def *def, const struct ops_call *call, int dtype,
                     const struct ops_tensor *want, char *err, size_t errlen);

/* The attribute called name, NULL when absent. */
const struct ops_attr *ops_attr_find(const struct ops_call *call, const char *name);

/* Element strides of t when broadcast to out's shape, one per dim of out: 0 where t has no
 * such dim or has extent 1, the row-major stride otherwise. */
void ops_broadcast_strides(const struct ops_tensor *t, const struct ops_tensor *out,
                           int64_t *strides);

/* a * b, saturating at UINT64_MAX. */
uint64_t ops_mul_sat(uint64_t a, uint64_t b);
/* a + b, saturating at UINT64_MAX. */
uint64_t ops_add_sat(uint64_t a, uint64_t b);

/* Double to IEEE half with a single rounding (to nearest even). */
uint16_t ops_double_to_half(double d);

/* Bulk conversions between float16 and float32 buffers. */
void ops_half_to_float_n(float *dst, const uint16_t *src, size_t n);
void ops_float_to_half_n(uint16_t *dst, const float *src, size_t n);

/* bfloat16 (the upper half of a float32) <-> float32 and float64, rounding to nearest even;
 * NaN stays a (quiet) NaN. */
float ops_bf16_to_float(uint16_t h);
uint16_t ops_float_to_bf16(float f);
uint16_t ops_double_to_bf16(double d);

#endif

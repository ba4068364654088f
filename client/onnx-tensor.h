/* ONNX test tensors for the conformance runner (npu-onnx-test): decoding a serialized
 * onnx.TensorProto (input_K.pb / output_K.pb of the ONNX backend test data) into a dense
 * little-endian array in the npu_dtype_t layout, and comparing a computed result with the
 * expected tensor under the ONNX backend suite's tolerances. Kept apart from the runner so the
 * unit test (tests/unit/test_onnx_tensor.c) can exercise it without a daemon. */
#ifndef NPU_ONNX_TENSOR_H
#define NPU_ONNX_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "npu.h"

/* The ONNX backend suite's defaults (numpy.testing.assert_allclose in onnx/backend/test). */
#define ONNX_TEST_RTOL 1e-3
#define ONNX_TEST_ATOL 1e-7

struct onnx_tensor {
        int dtype;                    /* npu_dtype_t (= ONNX TensorProto data type code) */
        int ndim;                     /* 0: scalar */
        int64_t dims[NPU_MAX_DIMS];
        uint64_t count;               /* elements (1 for a scalar, may be 0) */
        size_t elem_size;             /* bytes per element */
        void *data;                   /* count * elem_size bytes; NULL when count is 0. STRING:
                                       * the wire encoding (per element a uint32 LE length and
                                       * the bytes), nbytes long, elem_size 0 */
        uint64_t nbytes;              /* STRING: bytes of the encoding at data */
        char *name;                   /* the proto's name, "" when it has none */
};

/* Decode a serialized TensorProto. Returns 0, or with a message in err (ret untouched):
 * -EINVAL  not a well-formed tensor (bad protobuf, data size not matching the dims, ...)
 * -ENOTSUP a dtype the runner cannot feed (complex, undefined) or external data; strings
 *          come encoded as graph runs take them (see data)
 * -E2BIG   rank above NPU_MAX_DIMS or a tensor too large to hold
 * -ENOMEM  out of memory */
int onnx_tensor_parse(const void *buf, size_t len, struct onnx_tensor *ret, char *err,
                      size_t errlen);
/* Release what onnx_tensor_parse allocated; accepts a zeroed tensor. */
void onnx_tensor_free(struct onnx_tensor *t);

/* Bytes per element of a numeric dtype, 0 for any other. */
size_t onnx_dtype_size(int dtype);
/* ONNX name of a dtype ("float", "int64", "string", ...; "dtype N" for unknown codes, in a
 * static buffer). */
const char *onnx_dtype_name(int dtype);

float onnx_half_to_float(uint16_t h);
float onnx_bfloat16_to_float(uint16_t b);

/* |actual - expected| <= atol + rtol * |expected|; NaN matches NaN, an infinity only itself. */
int onnx_value_close(double actual, double expected, double rtol, double atol);

struct onnx_mismatch {
        uint64_t count;               /* elements that differ */
        uint64_t first;               /* flat index of the first of them */
        char actual[40], expected[40]; /* their values, printed */
};

/* Compare actual (expected->count elements of expected->dtype) with expected: floating
 * types with the tolerances (float16 and bfloat16 after conversion to float), integers and
 * bool exactly. Returns the number of differing elements (0: equal); ret (may be NULL)
 * describes them. */
uint64_t onnx_tensor_compare(const struct onnx_tensor *expected, const void *actual,
                             double rtol, double atol, struct onnx_mismatch *ret);

/* What a data file holds, from the graph's declared type of the value. */
enum onnx_value_kind {
        ONNX_VALUE_TENSOR = 0,   /* TensorProto */
        ONNX_VALUE_SEQUENCE = 1, /* SequenceProto of tensors */
        ONNX_VALUE_OPTIONAL = 2, /* OptionalProto of a tensor or a sequence of tensors */
};

/* Decode a serialized value of kind into what npud binds for it: a tensor as
 * onnx_tensor_parse does; a sequence as an NPU_SEQUENCE tensor whose bytes are the block of
 * proto/seq.h (elem_dtype: the element type of an empty one); an empty optional as an
 * NPU_OPTIONAL_NONE tensor of 0 bytes; a full optional as what it holds. Errors as
 * onnx_tensor_parse. */
int onnx_value_parse(const void *buf, size_t len, int kind, int elem_dtype,
                     struct onnx_tensor *ret, char *err, size_t errlen);

/* onnx_tensor_compare for any value onnx_value_parse gives: sequences tensor by tensor
 * (actual: expected->count bytes of a block), an empty optional always equal. what receives
 * where a difference is ("sequence tensor 1"), "" for a plain tensor. */
uint64_t onnx_value_compare(const struct onnx_tensor *expected, const void *actual,
                            double rtol, double atol, struct onnx_mismatch *ret, char *what,
                            size_t whatlen);

/* STRING tensors: compare the encoded actual (len bytes) with expected element by element,
 * byte for byte. Returns the number of differing elements. */
uint64_t onnx_tensor_compare_strings(const struct onnx_tensor *expected, const void *actual,
                                     uint64_t len, struct onnx_mismatch *ret);

/* Multi-index of a flat element position, as "[1,2]" ("[]" for a scalar). */
void onnx_tensor_format_index(const struct onnx_tensor *t, uint64_t flat, char *buf,
                              size_t len);

#endif

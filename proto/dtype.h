/* Tensor element types on the wire. The numeric values are ONNX TensorProto.DataType
 * codes so that model import and the wire agree; they never change. */
#ifndef NPU_PROTO_DTYPE_H
#define NPU_PROTO_DTYPE_H

#include <stddef.h>

enum proto_dtype {
        PROTO_DTYPE_FLOAT32 = 1,
        PROTO_DTYPE_UINT8 = 2,
        PROTO_DTYPE_INT8 = 3,
        PROTO_DTYPE_UINT16 = 4,
        PROTO_DTYPE_INT16 = 5,
        PROTO_DTYPE_INT32 = 6,
        PROTO_DTYPE_INT64 = 7,
        /* Inside a run only: each 8-byte element points to a length-prefixed byte string
         * (ops/strings.h). Never taken raw from a client: on the wire a STRING graph
         * input or output is encoded (docs/protocol.md) and launches refuse it. */
        PROTO_DTYPE_STRING = 8,
        PROTO_DTYPE_BOOL = 9,
        PROTO_DTYPE_FLOAT16 = 10,
        PROTO_DTYPE_FLOAT64 = 11,
        PROTO_DTYPE_UINT32 = 12,
        PROTO_DTYPE_UINT64 = 13,
        PROTO_DTYPE_BFLOAT16 = 16,
        /* Not ONNX tensor types: values of graphs that are not tensors (proto/seq.h). A
         * sequence is one block of bytes (1-D, dims[0] = its size) holding its tensors; an
         * empty optional ("none") is a 1-D value of 0 bytes. Both have an element size of 1
         * so that they move through the executor and the wire like byte tensors; only the
         * sequence and optional operators (and Identity, If, Loop) accept them. */
        PROTO_DTYPE_SEQUENCE = 64,
        PROTO_DTYPE_OPTIONAL_NONE = 65,
};

/* Size of one element in bytes, 0 for an unknown code. */
size_t proto_dtype_size(int dtype);
/* Lower-case name ("float32"), NULL for an unknown code. */
const char *proto_dtype_name(int dtype);

#endif

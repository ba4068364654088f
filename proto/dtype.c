/* Element sizes and names of the wire dtypes. */
#include "dtype.h"

size_t proto_dtype_size(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_SEQUENCE:
        case PROTO_DTYPE_OPTIONAL_NONE:
        case PROTO_DTYPE_BOOL:
        case PROTO_DTYPE_UINT8:
        case PROTO_DTYPE_INT8: return 1;
        case PROTO_DTYPE_UINT16:
        case PROTO_DTYPE_INT16:
        case PROTO_DTYPE_FLOAT16:
        case PROTO_DTYPE_BFLOAT16: return 2;
        case PROTO_DTYPE_FLOAT32:
        case PROTO_DTYPE_INT32:
        case PROTO_DTYPE_UINT32: return 4;
        case PROTO_DTYPE_FLOAT64:
        case PROTO_DTYPE_INT64:
        case PROTO_DTYPE_UINT64:
        case PROTO_DTYPE_STRING: return 8;
        default: return 0;
        }
}

const char *proto_dtype_name(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: return "float32";
        case PROTO_DTYPE_UINT8: return "uint8";
        case PROTO_DTYPE_INT8: return "int8";
        case PROTO_DTYPE_UINT16: return "uint16";
        case PROTO_DTYPE_INT16: return "int16";
        case PROTO_DTYPE_INT32: return "int32";
        case PROTO_DTYPE_INT64: return "int64";
        case PROTO_DTYPE_STRING: return "string";
        case PROTO_DTYPE_BOOL: return "bool";
        case PROTO_DTYPE_FLOAT16: return "float16";
        case PROTO_DTYPE_FLOAT64: return "float64";
        case PROTO_DTYPE_UINT32: return "uint32";
        case PROTO_DTYPE_UINT64: return "uint64";
        case PROTO_DTYPE_BFLOAT16: return "bfloat16";
        case PROTO_DTYPE_SEQUENCE: return "sequence";
        case PROTO_DTYPE_OPTIONAL_NONE: return "none";
        default: return NULL;
        }
}

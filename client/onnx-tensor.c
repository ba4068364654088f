/* ONNX test tensors: TensorProto decoding and tolerance comparison for npu-onnx-test (see
 * onnx-tensor.h). The protobuf code is generated from the system's onnx/onnx.proto. Data is
 * kept in host byte order, which is the little-endian order of raw_data on every machine the
 * project builds for. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "onnx-tensor.h"
#include "proto/seq.h"

/* Far above any tensor of the backend test data; keeps a corrupt dims list from asking for
 * absurd allocations. */
#define ONNX_TENSOR_MAX_BYTES (UINT64_C(4) << 30)

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; byte swapping is not implemented"
#endif

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
        va_list ap;

        if (err && errlen) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return code;
}

size_t onnx_dtype_size(int dtype)
{
        switch (dtype) {
        case NPU_UINT8:
        case NPU_INT8:
        case NPU_BOOL:
                return 1;
        case NPU_UINT16:
        case NPU_INT16:
        case NPU_FLOAT16:
        case NPU_BFLOAT16:
                return 2;
        case NPU_FLOAT32:
        case NPU_INT32:
        case NPU_UINT32:
                return 4;
        case NPU_INT64:
        case NPU_FLOAT64:
        case NPU_UINT64:
                return 8;
        default:
                return 0;
        }
}

const char *onnx_dtype_name(int dtype)
{
        static __thread char unknown[24];

        switch (dtype) {
        case 0: return "undefined";
        case 1: return "float";
        case 2: return "uint8";
        case 3: return "int8";
        case 4: return "uint16";
        case 5: return "int16";
        case 6: return "int32";
        case 7: return "int64";
        case 8: return "string";
        case 9: return "bool";
        case 10: return "float16";
        case 11: return "double";
        case 12: return "uint32";
        case 13: return "uint64";
        case 14: return "complex64";
        case 15: return "complex128";
        case 16: return "bfloat16";
        default:
                snprintf(unknown, sizeof(unknown), "dtype %d", dtype);
                return unknown;
        }
}

float onnx_half_to_float(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000) << 16;
        uint32_t exp = (h >> 10) & 0x1f;
        uint32_t mant = h & 0x3ff;
        uint32_t bits;
        float f;

        if (exp == 0x1f) {                      /* infinity, NaN (payload kept) */
                bits = sign | 0x7f800000u | (mant << 13);
        } else if (exp != 0) {                  /* normal */
                bits = sign | ((exp + 112) << 23) | (mant << 13);
        } else if (mant == 0) {                 /* signed zero */
                bits = sign;
        } else {                                /* subnormal: mant * 2^-24, exact in float */
                f = ldexpf((float)mant, -24);
                return sign ? -f : f;
        }
        memcpy(&f, &bits, sizeof(f));
        return f;
}

float onnx_bfloat16_to_float(uint16_t b)
{
        uint32_t bits = (uint32_t)b << 16;
        float f;

        memcpy(&f, &bits, sizeof(f));
        return f;
}

/* The typed-field array a dtype is stored in when raw_data is absent (onnx.proto's rules). */
static int copy_typed(const Onnx__TensorProto *p, struct onnx_tensor *t, char *err,
                      size_t errlen)
{
        size_t n;
        uint8_t *d = t->data;

        switch (t->dtype) {
        case NPU_FLOAT32:
                n = p->n_float_data;
                break;
        case NPU_FLOAT64:
                n = p->n_double_data;
                break;
        case NPU_INT64:
                n = p->n_int64_data;
                break;
        case NPU_UINT32:
        case NPU_UINT64:
                n = p->n_uint64_data;
                break;
        default: /* the narrow integer types, bool, float16 and bfloat16 bit patterns */
                n = p->n_int32_data;
                break;
        }
        if (n != t->count)
                return fail(err, errlen, -EINVAL, "%zu %s values for %" PRIu64 " elements", n,
                            onnx_dtype_name(t->dtype), t->count);
        for (size_t i = 0; i < n; i++) {
                switch (t->dtype) {
                case NPU_FLOAT32:
                        memcpy(d + 4 * i, &p->float_data[i], 4);
                        break;
                case NPU_FLOAT64:
                        memcpy(d + 8 * i, &p->double_data[i], 8);
                        break;
                case NPU_INT64:
                        memcpy(d + 8 * i, &p->int64_data[i], 8);
                        break;
                case NPU_UINT64:
                        memcpy(d + 8 * i, &p->uint64_data[i], 8);
                        break;
                case NPU_UINT32: {
                        uint32_t v = (uint32_t)p->uint64_data[i];
                        memcpy(d + 4 * i, &v, 4);
                        break;
                }
                case NPU_INT32:
                        memcpy(d + 4 * i, &p->int32_data[i], 4);
                        break;
                case NPU_INT16:
                case NPU_UINT16:
                case NPU_FLOAT16:
                case NPU_BFLOAT16: {
                        uint16_t v = (uint16_t)p->int32_data[i];
                        memcpy(d + 2 * i, &v, 2);
                        break;
                }
                case NPU_BOOL:
                        d[i] = p->int32_data[i] != 0;
                        break;
                default: /* INT8, UINT8 */
                        d[i] = (uint8_t)p->int32_data[i];
                        break;
                }
        }
        return 0;
}

/* string_data into the wire encoding of STRING tensors (docs/protocol.md). */
static int strings_from_proto(const Onnx__TensorProto *p, struct onnx_tensor *t, char *err,
                              size_t errlen)
{
        uint64_t bytes = 0, off = 0;
        uint8_t *d;

        if (p->n_dims > NPU_MAX_DIMS)
                return fail(err, errlen, -E2BIG, "rank %zu (at most %d)", p->n_dims, NPU_MAX_DIMS);
        t->ndim = (int)p->n_dims;
        t->count = 1;
        for (int i = 0; i < t->ndim; i++) {
                if (p->dims[i] < 0 || (t->count && (uint64_t)p->dims[i] > ONNX_TENSOR_MAX_BYTES / t->count))
                        return fail(err, errlen, -EINVAL, "bad dimension %" PRId64, p->dims[i]);
                t->dims[i] = p->dims[i];
                t->count *= (uint64_t)p->dims[i];
        }
        if (p->has_raw_data || p->n_string_data != t->count)
                return fail(err, errlen, -EINVAL, "%zu strings in string_data, %" PRIu64 " elements",
                            p->n_string_data, t->count);
        for (size_t i = 0; i < p->n_string_data; i++) {
                if (p->string_data[i].len > UINT32_MAX)
                        return fail(err, errlen, -E2BIG, "string too long");
                bytes += 4 + p->string_data[i].len;
        }
        if (bytes > ONNX_TENSOR_MAX_BYTES)
                return fail(err, errlen, -E2BIG, "%" PRIu64 " bytes is too large", bytes);
        t->elem_size = 0;
        t->nbytes = bytes;
        if (!bytes)
                return 0;
        d = t->data = malloc(bytes);
        if (!d)
                return fail(err, errlen, -ENOMEM, "out of memory");
        for (size_t i = 0; i < p->n_string_data; i++) {
                uint32_t len = (uint32_t)p->string_data[i].len;
                for (int b = 0; b < 4; b++)
                        d[off + b] = (uint8_t)(len >> (8 * b));
                if (len)
                        memcpy(d + off + 4, p->string_data[i].data, len);
                off += 4 + len;
        }
        return 0;
}

static int from_proto(const Onnx__TensorProto *p, struct onnx_tensor *t, char *err,
                      size_t errlen)
{
        uint64_t bytes;

        t->dtype = p->has_data_type ? p->data_type : 0;
        if (t->dtype == 0)
                return fail(err, errlen, -EINVAL, "no data type");
        t->elem_size = onnx_dtype_size(t->dtype);
        if (t->dtype == 8 /* STRING */)
                return strings_from_proto(p, t, err, errlen);
        if (t->elem_size == 0)
                return fail(err, errlen, -ENOTSUP, "dtype %s", onnx_dtype_name(t->dtype));
        if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
                return fail(err, errlen, -ENOTSUP, "external data");
        if (p->segment)
                return fail(err, errlen, -ENOTSUP, "segmented tensor");
        if (p->n_dims > NPU_MAX_DIMS)
                return fail(err, errlen, -E2BIG, "rank %zu (at most %d)", p->n_dims, NPU_MAX_DIMS);
        t->ndim = (int)p->n_dims;
        t->count = 1;
        for (int i = 0; i < t->ndim; i++) {
                if (p->dims[i] < 0)
                        return fail(err, errlen, -EINVAL, "negative dimension %" PRId64, p->dims[i]);
                t->dims[i] = p->dims[i];
                if (t->count && (uint64_t)p->dims[i] > ONNX_TENSOR_MAX_BYTES / t->count)
                        return fail(err, errlen, -E2BIG, "too many elements");
                t->count *= (uint64_t)p->dims[i];
        }
        bytes = t->count * t->elem_size;
        t->nbytes = bytes;
        if (bytes > ONNX_TENSOR_MAX_BYTES)
                return fail(err, errlen, -E2BIG, "%" PRIu64 " bytes is too large", bytes);
        if (bytes) {
                t->data = malloc(bytes);
                if (!t->data)
                        return fail(err, errlen, -ENOMEM, "out of memory");
        }
        if (p->has_raw_data) {
                if (p->raw_data.len != bytes)
                        return fail(err, errlen, -EINVAL,
                                    "raw_data has %zu bytes, %" PRIu64 " %s elements need %" PRIu64,
                                    p->raw_data.len, t->count, onnx_dtype_name(t->dtype), bytes);
                if (bytes)
                        memcpy(t->data, p->raw_data.data, bytes);
                if (t->dtype == NPU_BOOL) /* any non-zero byte is true; keep 0/1 on the wire */
                        for (uint64_t i = 0; i < t->count; i++)
                                ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
                return 0;
        }
        return copy_typed(p, t, err, errlen);
}

int onnx_tensor_parse(const void *buf, size_t len, struct onnx_tensor *ret, char *err,
                      size_t errlen)
{
        struct onnx_tensor t = { 0 };
        Onnx__TensorProto *p;
        int r;

        p = onnx__tensor_proto__unpack(NULL, len, buf);
        if (!p)
                return fail(err, errlen, -EINVAL, "not a TensorProto");
        r = from_proto(p, &t, err, errlen);
        if (r == 0) {
                t.name = strdup(p->name ? p->name : "");
                if (!t.name)
                        r = fail(err, errlen, -ENOMEM, "out of memory");
        }
        onnx__tensor_proto__free_unpacked(p, NULL);
        if (r < 0) {
                onnx_tensor_free(&t);
                return r;
        }
        *ret = t;
        return 0;
}

void onnx_tensor_free(struct onnx_tensor *t)
{
        if (!t)
                return;
        free(t->data);
        free(t->name);
        t->data = NULL;
        t->name = NULL;
}

int onnx_value_close(double actual, double expected, double rtol, double atol)
{
        if (isnan(actual) || isnan(expected))
                return isnan(actual) && isnan(expected);
        if (actual == expected) /* also the only way an infinity matches */
                return 1;
        if (isinf(actual) || isinf(expected))
                return 0;
        return fabs(actual - expected) <= atol + rtol * fabs(expected);
}

enum value_kind { KIND_FLOAT, KIND_SIGNED, KIND_UNSIGNED, KIND_BOOL };

static enum value_kind kind_of(int dtype)
{
        switch (dtype) {
        case NPU_FLOAT32:
        case NPU_FLOAT64:
        case NPU_FLOAT16:
        case NPU_BFLOAT16:
                return KIND_FLOAT;
        case NPU_UINT8:
        case NPU_UINT16:
        case NPU_UINT32:
        case NPU_UINT64:
                return KIND_UNSIGNED;
        case NPU_BOOL:
                return KIND_BOOL;
        default:
                return KIND_SIGNED;
        }
}

/* Element i of a dense array, widened to the comparison type of its kind. */
static double get_float(int dtype, const void *data, uint64_t i)
{
        const uint8_t *p = (const uint8_t *)data + i * onnx_dtype_size(dtype);
        uint16_t h;
        float f;
        double d;

        switch (dtype) {
        case NPU_FLOAT32:
                memcpy(&f, p, 4);
                return f;
        case NPU_FLOAT64:
                memcpy(&d, p, 8);
                return d;
        case NPU_FLOAT16:
                memcpy(&h, p, 2);
                return onnx_half_to_float(h);
        default: /* BFLOAT16 */
                memcpy(&h, p, 2);
                return onnx_bfloat16_to_float(h);
        }
}

static int64_t get_signed(int dtype, const void *data, uint64_t i)
{
        const uint8_t *p = (const uint8_t *)data + i * onnx_dtype_size(dtype);
        int16_t v16;
        int32_t v32;
        int64_t v64;

        switch (dtype) {
        case NPU_INT8:
                return (int8_t)p[0];
        case NPU_INT16:
                memcpy(&v16, p, 2);
                return v16;
        case NPU_INT32:
                memcpy(&v32, p, 4);
                return v32;
        default: /* INT64 */
                memcpy(&v64, p, 8);
                return v64;
        }
}

static uint64_t get_unsigned(int dtype, const void *data, uint64_t i)
{
        const uint8_t *p = (const uint8_t *)data + i * onnx_dtype_size(dtype);
        uint16_t v16;
        uint32_t v32;
        uint64_t v64;

        switch (dtype) {
        case NPU_UINT8:
        case NPU_BOOL:
                return p[0];
        case NPU_UINT16:
                memcpy(&v16, p, 2);
                return v16;
        case NPU_UINT32:
                memcpy(&v32, p, 4);
                return v32;
        default: /* UINT64 */
                memcpy(&v64, p, 8);
                return v64;
        }
}

static void format_value(int dtype, const void *data, uint64_t i, char *buf, size_t len)
{
        switch (kind_of(dtype)) {
        case KIND_FLOAT:
                snprintf(buf, len, dtype == NPU_FLOAT64 ? "%.17g" : "%.9g",
                         get_float(dtype, data, i));
                break;
        case KIND_SIGNED:
                snprintf(buf, len, "%" PRId64, get_signed(dtype, data, i));
                break;
        case KIND_UNSIGNED:
                snprintf(buf, len, "%" PRIu64, get_unsigned(dtype, data, i));
                break;
        case KIND_BOOL:
                snprintf(buf, len, "%s", get_unsigned(dtype, data, i) ? "true" : "false");
                break;
        }
}

static int element_equal(int dtype, const void *actual, const void *expected, uint64_t i,
                         double rtol, double atol)
{
        switch (kind_of(dtype)) {
        case KIND_FLOAT:
                return onnx_value_close(get_float(dtype, actual, i),
                                        get_float(dtype, expected, i), rtol, atol);
        case KIND_SIGNED:
                return get_signed(dtype, actual, i) == get_signed(dtype, expected, i);
        case KIND_UNSIGNED:
                return get_unsigned(dtype, actual, i) == get_unsigned(dtype, expected, i);
        default: /* BOOL: a kernel may write any non-zero byte for true */
                return !get_unsigned(dtype, actual, i) == !get_unsigned(dtype, expected, i);
        }
}

uint64_t onnx_tensor_compare(const struct onnx_tensor *expected, const void *actual,
                             double rtol, double atol, struct onnx_mismatch *ret)
{
        struct onnx_mismatch m = { 0 };

        if (onnx_dtype_size(expected->dtype) == 0) {
                /* nothing comparable: report every element as different */
                m.count = expected->count ? expected->count : 1;
                snprintf(m.actual, sizeof(m.actual), "?");
                snprintf(m.expected, sizeof(m.expected), "%s", onnx_dtype_name(expected->dtype));
        } else {
                for (uint64_t i = 0; i < expected->count; i++) {
                        if (element_equal(expected->dtype, actual, expected->data, i, rtol, atol))
                                continue;
                        if (m.count++ == 0) {
                                m.first = i;
                                format_value(expected->dtype, actual, i, m.actual, sizeof(m.actual));
                                format_value(expected->dtype, expected->data, i, m.expected,
                                             sizeof(m.expected));
                        }
                }
        }
        if (ret)
                *ret = m;
        return m.count;
}

/* The next encoded string at *off of len bytes, or NULL when it runs past the end. */
static const uint8_t *next_string(const uint8_t *p, uint64_t len, uint64_t *off, uint32_t *ret_n)
{
        uint32_t n;

        if (len - *off < 4)
                return NULL;
        n = (uint32_t)p[*off] | (uint32_t)p[*off + 1] << 8 | (uint32_t)p[*off + 2] << 16 |
            (uint32_t)p[*off + 3] << 24;
        if (n > len - *off - 4)
                return NULL;
        *off += 4 + n;
        *ret_n = n;
        return p + *off - n;
}

static void quote(const uint8_t *s, uint32_t n, char *buf, size_t len)
{
        if (!s)
                snprintf(buf, len, "(truncated)");
        else
                snprintf(buf, len, "'%.*s'", (int)(n > 30 ? 30 : n), (const char *)s);
}

uint64_t onnx_tensor_compare_strings(const struct onnx_tensor *expected, const void *actual,
                                     uint64_t len, struct onnx_mismatch *ret)
{
        struct onnx_mismatch m = { 0 };
        uint64_t ea = 0, aa = 0;

        for (uint64_t i = 0; i < expected->count; i++) {
                uint32_t en = 0, an = 0;
                const uint8_t *e = next_string(expected->data, expected->nbytes, &ea, &en);
                const uint8_t *a = actual ? next_string(actual, len, &aa, &an) : NULL;
                if (e && a && en == an && memcmp(e, a, en) == 0)
                        continue;
                if (m.count++ == 0) {
                        m.first = i;
                        quote(a, an, m.actual, sizeof(m.actual));
                        quote(e, en, m.expected, sizeof(m.expected));
                }
                if (!a)
                        actual = NULL; /* the rest cannot be found either */
        }
        if (ret)
                *ret = m;
        return m.count;
}

void onnx_tensor_format_index(const struct onnx_tensor *t, uint64_t flat, char *buf,
                              size_t len)
{
        uint64_t idx[NPU_MAX_DIMS] = { 0 };
        size_t used;

        if (len == 0)
                return;
        for (int i = t->ndim - 1; i >= 0; i--) {
                uint64_t d = t->dims[i] > 0 ? (uint64_t)t->dims[i] : 1;
                idx[i] = flat % d;
                flat /= d;
        }
        used = (size_t)snprintf(buf, len, "[");
        for (int i = 0; i < t->ndim && used < len; i++)
                used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, i ? "," : "", idx[i]);
        if (used < len)
                snprintf(buf + used, len - used, "]");
}

/* ---------------------------------------------------------------- sequences and optionals */

/* onnx-data.proto's SequenceProto and OptionalProto are not in the onnx.proto the generated
 * code comes from; what the runner needs of them is a few fields, read off the wire here:
 *   SequenceProto { string name = 1; int32 elem_type = 2; repeated TensorProto tensor_values = 3;
 *                   ... other element kinds 4-7 }
 *   OptionalProto { string name = 1; int32 elem_type = 2; TensorProto tensor_value = 3;
 *                   SparseTensorProto = 4; SequenceProto sequence_value = 5; ... } */
static int pb_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *ret)
{
        uint64_t v = 0;

        for (int shift = 0; shift < 64; shift += 7) {
                if (*pos >= len)
                        return -1;
                uint8_t b = p[(*pos)++];
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -1;
}

/* The next field: its number, and for length-delimited ones the bytes (*data, *n). */
static int pb_field(const uint8_t *p, size_t len, size_t *pos, int *ret_field,
                    const uint8_t **data, size_t *n)
{
        uint64_t key, v;

        *data = NULL;
        *n = 0;
        if (pb_varint(p, len, pos, &key) < 0)
                return -1;
        *ret_field = (int)(key >> 3);
        switch (key & 7) {
        case 0: return pb_varint(p, len, pos, &v);
        case 1: if (len - *pos < 8) return -1; *pos += 8; return 0;
        case 5: if (len - *pos < 4) return -1; *pos += 4; return 0;
        case 2:
                if (pb_varint(p, len, pos, &v) < 0 || v > len - *pos)
                        return -1;
                *data = p + *pos;
                *n = (size_t)v;
                *pos += (size_t)v;
                return 0;
        default: return -1;
        }
}

static void value_init(struct onnx_tensor *t, int dtype, uint64_t bytes, void *data)
{
        memset(t, 0, sizeof(*t));
        t->dtype = dtype;
        t->ndim = 1;
        t->dims[0] = (int64_t)bytes;
        t->count = bytes;
        t->elem_size = 1;
        t->data = data;
}

static int sequence_parse(const uint8_t *p, size_t len, int elem_dtype, struct onnx_tensor *ret,
                          char *err, size_t errlen)
{
        struct onnx_tensor *el = NULL;
        struct proto_seq_entry *e = NULL;
        uint32_t n = 0;
        size_t pos = 0, dn;
        const uint8_t *d;
        uint64_t size;
        void *block;
        int f, r = 0;

        while (pos < len) {
                if (pb_field(p, len, &pos, &f, &d, &dn) < 0) {
                        r = fail(err, errlen, -EINVAL, "not a SequenceProto");
                        goto out;
                }
                if (f >= 4 && f <= 7) {
                        r = fail(err, errlen, -ENOTSUP, "a sequence of non-tensors");
                        goto out;
                }
                if (f != 3 || !d)
                        continue;
                struct onnx_tensor *ne = realloc(el, sizeof(*el) * (n + 1));
                struct proto_seq_entry *nen = realloc(e, sizeof(*e) * (n + 1));
                if (ne)
                        el = ne;
                if (nen)
                        e = nen;
                if (!ne || !nen) {
                        r = fail(err, errlen, -ENOMEM, "out of memory");
                        goto out;
                }
                r = onnx_tensor_parse(d, dn, &el[n], err, errlen);
                if (r < 0)
                        goto out;
                memset(&e[n], 0, sizeof(e[n]));
                e[n].dtype = el[n].dtype;
                e[n].ndim = el[n].ndim;
                memcpy(e[n].dims, el[n].dims, sizeof(e[n].dims[0]) * (size_t)el[n].ndim);
                e[n].bytes = el[n].count * el[n].elem_size;
                n++;
                if (el[n - 1].dtype != el[0].dtype) {
                        r = fail(err, errlen, -EINVAL, "a sequence of tensors of different types");
                        goto out;
                }
        }
        size = proto_seq_layout(e, n);
        block = size == UINT64_MAX ? NULL : malloc((size_t)size);
        if (!block) {
                r = fail(err, errlen, -ENOMEM, "out of memory");
                goto out;
        }
        proto_seq_write(block, size, n, n ? el[0].dtype : elem_dtype, e);
        for (uint32_t i = 0; i < n; i++)
                if (e[i].bytes)
                        memcpy((uint8_t *)block + e[i].offset, el[i].data, (size_t)e[i].bytes);
        value_init(ret, NPU_SEQUENCE, size, block);
out:
        for (uint32_t i = 0; i < n; i++)
                onnx_tensor_free(&el[i]);
        free(el);
        free(e);
        return r;
}

int onnx_value_parse(const void *buf, size_t len, int kind, int elem_dtype,
                     struct onnx_tensor *ret, char *err, size_t errlen)
{
        const uint8_t *p = buf, *d, *tensor = NULL, *seq = NULL;
        size_t pos = 0, dn, tn = 0, sn = 0;
        int f, r;

        if (kind == ONNX_VALUE_TENSOR)
                return onnx_tensor_parse(buf, len, ret, err, errlen);
        if (kind == ONNX_VALUE_SEQUENCE)
                r = sequence_parse(p, len, elem_dtype, ret, err, errlen);
        else {
                while (pos < len) {
                        if (pb_field(p, len, &pos, &f, &d, &dn) < 0)
                                return fail(err, errlen, -EINVAL, "not an OptionalProto");
                        if (f == 3 && d) {
                                tensor = d;
                                tn = dn;
                        } else if (f == 5 && d) {
                                seq = d;
                                sn = dn;
                        } else if (f == 4 || f == 6 || f == 7) {
                                return fail(err, errlen, -ENOTSUP, "an optional of neither a tensor nor a sequence");
                        }
                }
                if (tensor)
                        r = onnx_tensor_parse(tensor, tn, ret, err, errlen);
                else if (seq)
                        r = sequence_parse(seq, sn, elem_dtype, ret, err, errlen);
                else {
                        value_init(ret, NPU_OPTIONAL_NONE, 0, NULL);
                        r = 0;
                }
        }
        if (r == 0 && !ret->name) {
                ret->name = strdup("");
                if (!ret->name) {
                        onnx_tensor_free(ret);
                        return fail(err, errlen, -ENOMEM, "out of memory");
                }
        }
        return r;
}

uint64_t onnx_value_compare(const struct onnx_tensor *expected, const void *actual,
                            double rtol, double atol, struct onnx_mismatch *ret, char *what,
                            size_t whatlen)
{
        struct proto_seq_header he, ha;
        struct proto_seq_entry ee, ea;
        const char *why = "";

        if (whatlen)
                what[0] = '\0';
        if (expected->dtype == NPU_OPTIONAL_NONE)
                return 0; /* the daemon checked the output is empty (dtype none) */
        if (expected->dtype != NPU_SEQUENCE)
                return onnx_tensor_compare(expected, actual, rtol, atol, ret);
        memset(ret, 0, sizeof(*ret));
        ret->count = 1;
        if (proto_seq_check(expected->data, expected->count, &he, &why) < 0 ||
            proto_seq_check(actual, expected->count, &ha, &why) < 0) {
                snprintf(what, whatlen, "the computed sequence: %s", why);
                return 1;
        }
        if (he.count != ha.count) {
                snprintf(what, whatlen, "the sequence holds %u tensors, expected %u", ha.count, he.count);
                return 1;
        }
        for (uint32_t i = 0; i < he.count; i++) {
                struct onnx_tensor t = { 0 };
                uint64_t m;
                proto_seq_get(expected->data, i, &ee);
                proto_seq_get(actual, i, &ea);
                if (ee.dtype != ea.dtype || ee.ndim != ea.ndim ||
                    memcmp(ee.dims, ea.dims, sizeof(ee.dims[0]) * (size_t)ee.ndim) != 0) {
                        snprintf(what, whatlen, "sequence tensor %u differs in type or shape", i);
                        return 1;
                }
                t.dtype = ee.dtype;
                t.ndim = ee.ndim;
                memcpy(t.dims, ee.dims, sizeof(t.dims[0]) * (size_t)ee.ndim);
                t.elem_size = onnx_dtype_size(ee.dtype);
                t.count = t.elem_size ? ee.bytes / t.elem_size : 0;
                t.data = (uint8_t *)expected->data + ee.offset;
                m = onnx_tensor_compare(&t, (const uint8_t *)actual + ea.offset, rtol, atol, ret);
                if (m) {
                        snprintf(what, whatlen, "sequence tensor %u", i);
                        return m;
                }
        }
        return 0;
}

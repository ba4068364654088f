/* Unit tests of client/onnx-tensor.c, the conformance runner's TensorProto decoder and result
 * comparison: every numeric dtype through raw_data and through its typed field, the
 * rejections (strings, complex, external data, sizes that do not add up, corrupt bytes),
 * float16/bfloat16 conversion, and the suite's tolerance rule. Protos are built with the
 * generated protobuf-c code, so what is tested is what protoc would write. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx.pb-c.h"
#include "client/onnx-tensor.h"

#define ABS_INPUT "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0/input_0.pb"

/* ---- helpers ---- */

static void proto_init(Onnx__TensorProto *p, int dtype, const int64_t *dims, size_t ndims)
{
        onnx__tensor_proto__init(p);
        if (dtype) {
                p->has_data_type = 1;
                p->data_type = dtype;
        }
        p->n_dims = ndims;
        p->dims = (int64_t *)dims;
}

/* Serialize p and parse it back; returns onnx_tensor_parse's result. */
static int roundtrip(const Onnx__TensorProto *p, struct onnx_tensor *t, char *err, size_t errlen)
{
        size_t len = onnx__tensor_proto__get_packed_size(p);
        uint8_t *buf = malloc(len + 1);
        int r;

        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(onnx__tensor_proto__pack(p, buf), len);
        r = onnx_tensor_parse(buf, len, t, err, errlen);
        free(buf);
        return r;
}

static void set_raw(Onnx__TensorProto *p, const void *data, size_t len)
{
        p->has_raw_data = 1;
        p->raw_data.data = (uint8_t *)data;
        p->raw_data.len = len;
}

/* A parse that must fail with code, leaving the output untouched and saying why. */
static void expect_reject(const Onnx__TensorProto *p, int code, const char *needle)
{
        struct onnx_tensor t;
        char err[256] = "";

        memset(&t, 0x5a, sizeof(t));
        ck_assert_int_eq(roundtrip(p, &t, err, sizeof(err)), code);
        ck_assert_int_eq(t.ndim, 0x5a5a5a5a);
        ck_assert_msg(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
}

/* ---- decoding ---- */

START_TEST(test_float_raw)
{
        static const int64_t dims[] = { 2, 3 };
        float v[6] = { 1, -2, 3.5f, 0, 1e-8f, -1e30f };
        Onnx__TensorProto p;
        struct onnx_tensor t;
        char err[128];

        proto_init(&p, NPU_FLOAT32, dims, 2);
        set_raw(&p, v, sizeof(v));
        p.name = "x";
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_int_eq(t.dtype, NPU_FLOAT32);
        ck_assert_int_eq(t.ndim, 2);
        ck_assert_int_eq(t.dims[0], 2);
        ck_assert_int_eq(t.dims[1], 3);
        ck_assert_uint_eq(t.count, 6);
        ck_assert_uint_eq(t.elem_size, 4);
        ck_assert_str_eq(t.name, "x");
        ck_assert_mem_eq(t.data, v, sizeof(v));
        onnx_tensor_free(&t);
        ck_assert_ptr_null(t.data);
        onnx_tensor_free(&t); /* idempotent */
        onnx_tensor_free(NULL);
}
END_TEST

START_TEST(test_typed_fields)
{
        static const int64_t dims[] = { 3 };
        float f[3] = { 1.5f, -2, 0 };
        double d[3] = { 1e-300, -0.5, 3 };
        int64_t i64[3] = { INT64_MIN, -1, INT64_MAX };
        uint64_t u64[3] = { 0, 1, UINT64_MAX };
        uint64_t u32src[3] = { 0, 7, 0xffffffffu };
        int32_t i32[3] = { INT32_MIN, -1, INT32_MAX };
        int32_t small[3] = { -5, 0, 100 };
        Onnx__TensorProto p;
        struct onnx_tensor t;
        char err[128];

        proto_init(&p, NPU_FLOAT32, dims, 1);
        p.n_float_data = 3;
        p.float_data = f;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, f, sizeof(f));
        ck_assert_str_eq(t.name, "");
        onnx_tensor_free(&t);

        proto_init(&p, NPU_FLOAT64, dims, 1);
        p.n_double_data = 3;
        p.double_data = d;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, d, sizeof(d));
        onnx_tensor_free(&t);

        proto_init(&p, NPU_INT64, dims, 1);
        p.n_int64_data = 3;
        p.int64_data = i64;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, i64, sizeof(i64));
        onnx_tensor_free(&t);

        proto_init(&p, NPU_UINT64, dims, 1);
        p.n_uint64_data = 3;
        p.uint64_data = u64;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, u64, sizeof(u64));
        onnx_tensor_free(&t);

        proto_init(&p, NPU_UINT32, dims, 1); /* uint32 travels in uint64_data */
        p.n_uint64_data = 3;
        p.uint64_data = u32src;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(t.elem_size, 4);
        ck_assert_uint_eq(((uint32_t *)t.data)[2], 0xffffffffu);
        ck_assert_uint_eq(((uint32_t *)t.data)[1], 7);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_INT32, dims, 1);
        p.n_int32_data = 3;
        p.int32_data = i32;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, i32, sizeof(i32));
        onnx_tensor_free(&t);

        /* the narrow types are packed down from int32_data */
        proto_init(&p, NPU_INT8, dims, 1);
        p.n_int32_data = 3;
        p.int32_data = small;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(t.elem_size, 1);
        ck_assert_int_eq(((int8_t *)t.data)[0], -5);
        ck_assert_int_eq(((int8_t *)t.data)[2], 100);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_UINT8, dims, 1);
        p.n_int32_data = 3;
        p.int32_data = small;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(((uint8_t *)t.data)[2], 100);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_INT16, dims, 1);
        p.n_int32_data = 3;
        p.int32_data = small;
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(t.elem_size, 2);
        ck_assert_int_eq(((int16_t *)t.data)[0], -5);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_UINT16, dims, 1);
        p.n_int32_data = 3;
        p.int32_data = (int32_t[]){ 0, 1, 65535 };
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(((uint16_t *)t.data)[2], 65535);
        onnx_tensor_free(&t);
}
END_TEST

START_TEST(test_bool)
{
        static const int64_t dims[] = { 4 };
        uint8_t raw[4] = { 0, 1, 2, 255 };
        Onnx__TensorProto p;
        struct onnx_tensor t;
        char err[128];

        proto_init(&p, NPU_BOOL, dims, 1);
        set_raw(&p, raw, sizeof(raw));
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(t.elem_size, 1);
        /* any non-zero byte is true, sent to the device as 1 */
        ck_assert_mem_eq(t.data, ((uint8_t[]){ 0, 1, 1, 1 }), 4);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_BOOL, dims, 1);
        p.n_int32_data = 4;
        p.int32_data = (int32_t[]){ 1, 0, 7, -1 };
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, ((uint8_t[]){ 1, 0, 1, 1 }), 4);
        onnx_tensor_free(&t);
}
END_TEST

START_TEST(test_half_types)
{
        static const int64_t dims[] = { 2 };
        uint16_t raw[2] = { 0x3c00, 0xc000 }; /* 1.0, -2.0 */
        Onnx__TensorProto p;
        struct onnx_tensor t;
        char err[128];

        proto_init(&p, NPU_FLOAT16, dims, 1);
        set_raw(&p, raw, sizeof(raw));
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(t.elem_size, 2);
        ck_assert_mem_eq(t.data, raw, sizeof(raw));
        onnx_tensor_free(&t);

        /* float16 and bfloat16 keep their bit patterns in int32_data */
        proto_init(&p, NPU_FLOAT16, dims, 1);
        p.n_int32_data = 2;
        p.int32_data = (int32_t[]){ 0x3c00, 0xc000 };
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_mem_eq(t.data, raw, sizeof(raw));
        onnx_tensor_free(&t);

        proto_init(&p, NPU_BFLOAT16, dims, 1);
        p.n_int32_data = 2;
        p.int32_data = (int32_t[]){ 0x3f80, 0xc000 };
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert(onnx_bfloat16_to_float(((uint16_t *)t.data)[0]) == 1.0f);
        ck_assert(onnx_bfloat16_to_float(((uint16_t *)t.data)[1]) == -2.0f);
        onnx_tensor_free(&t);
}
END_TEST

START_TEST(test_scalar_and_empty)
{
        static const int64_t empty_dims[] = { 0, 3 };
        float one = 42;
        Onnx__TensorProto p;
        struct onnx_tensor t;
        char err[128];

        proto_init(&p, NPU_FLOAT32, NULL, 0);
        set_raw(&p, &one, sizeof(one));
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_int_eq(t.ndim, 0);
        ck_assert_uint_eq(t.count, 1);
        ck_assert(*(float *)t.data == 42);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_INT64, empty_dims, 2);
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_int_eq(t.ndim, 2);
        ck_assert_uint_eq(t.count, 0);
        ck_assert_ptr_null(t.data);
        onnx_tensor_free(&t);

        proto_init(&p, NPU_INT64, empty_dims, 2); /* an empty raw_data is the same tensor */
        set_raw(&p, "", 0);
        ck_assert_int_eq(roundtrip(&p, &t, err, sizeof(err)), 0);
        ck_assert_uint_eq(t.count, 0);
        onnx_tensor_free(&t);
}
END_TEST

START_TEST(test_rejections)
{
        static const int64_t dims[] = { 2 };
        static const int64_t neg[] = { 2, -1 };
        static const int64_t nine[] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
        static const int64_t huge[] = { INT64_MAX / 2, 4 };
        float f[2] = { 1, 2 };
        ProtobufCBinaryData strs[2] = { { 1, (uint8_t *)"a" }, { 1, (uint8_t *)"b" } };
        Onnx__TensorProto p;
        Onnx__TensorProto__Segment seg;

        /* strings: the wire encoding (uint32 LE length and bytes per element) */
        proto_init(&p, 8 /* STRING */, dims, 1);
        p.n_string_data = 2;
        p.string_data = strs;
        {
                struct onnx_tensor t = { 0 };
                struct onnx_mismatch m;
                char err[128];
                size_t len = onnx__tensor_proto__get_packed_size(&p);
                uint8_t *buf = malloc(len);
                static const uint8_t enc[] = { 1, 0, 0, 0, 'a', 1, 0, 0, 0, 'b' };
                static const uint8_t other[] = { 1, 0, 0, 0, 'a', 2, 0, 0, 0, 'b', 'c' };
                ck_assert_ptr_nonnull(buf);
                onnx__tensor_proto__pack(&p, buf);
                ck_assert_msg(onnx_tensor_parse(buf, len, &t, err, sizeof(err)) == 0, "%s", err);
                ck_assert_uint_eq(t.count, 2);
                ck_assert_uint_eq(t.nbytes, sizeof(enc));
                ck_assert_int_eq(memcmp(t.data, enc, sizeof(enc)), 0);
                ck_assert_uint_eq(onnx_tensor_compare_strings(&t, enc, sizeof(enc), &m), 0);
                ck_assert_uint_eq(onnx_tensor_compare_strings(&t, other, sizeof(other), &m), 1);
                ck_assert_uint_eq(m.first, 1);
                ck_assert_str_eq(m.actual, "'bc'");
                ck_assert_str_eq(m.expected, "'b'");
                /* a truncated actual: both elements past the cut differ */
                ck_assert_uint_eq(onnx_tensor_compare_strings(&t, enc, 3, &m), 2);
                onnx_tensor_free(&t);
                free(buf);
        }
        p.n_string_data = 1;
        expect_reject(&p, -EINVAL, "strings");

        proto_init(&p, 14 /* COMPLEX64 */, dims, 1);
        expect_reject(&p, -ENOTSUP, "complex64");

        proto_init(&p, 99, dims, 1);
        expect_reject(&p, -ENOTSUP, "dtype 99");

        proto_init(&p, 0, dims, 1);
        set_raw(&p, f, sizeof(f));
        expect_reject(&p, -EINVAL, "no data type");

        proto_init(&p, NPU_FLOAT32, dims, 1);
        set_raw(&p, f, sizeof(f) - 1);
        expect_reject(&p, -EINVAL, "raw_data has 7 bytes");

        proto_init(&p, NPU_FLOAT32, dims, 1);
        p.n_float_data = 1;
        p.float_data = f;
        expect_reject(&p, -EINVAL, "1 float values for 2 elements");

        proto_init(&p, NPU_FLOAT32, dims, 1); /* no data at all */
        expect_reject(&p, -EINVAL, "0 float values");

        proto_init(&p, NPU_FLOAT32, neg, 2);
        expect_reject(&p, -EINVAL, "negative dimension");

        proto_init(&p, NPU_FLOAT32, nine, 9);
        set_raw(&p, f, 4);
        expect_reject(&p, -E2BIG, "rank 9");

        proto_init(&p, NPU_FLOAT32, huge, 2);
        expect_reject(&p, -E2BIG, "");

        proto_init(&p, NPU_FLOAT32, dims, 1);
        set_raw(&p, f, sizeof(f));
        p.has_data_location = 1;
        p.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        expect_reject(&p, -ENOTSUP, "external");

        onnx__tensor_proto__segment__init(&seg);
        proto_init(&p, NPU_FLOAT32, dims, 1);
        set_raw(&p, f, sizeof(f));
        p.segment = &seg;
        expect_reject(&p, -ENOTSUP, "segment");
}
END_TEST

START_TEST(test_corrupt_bytes)
{
        static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
        static const uint8_t truncated[] = { 0x4a, 0x10, 0x01 }; /* raw_data of 16 bytes, 1 there */
        struct onnx_tensor t;
        char err[128] = "";

        memset(&t, 0x5a, sizeof(t));
        ck_assert_int_eq(onnx_tensor_parse(garbage, sizeof(garbage), &t, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "not a TensorProto");
        ck_assert_int_eq(onnx_tensor_parse(truncated, sizeof(truncated), &t, err, sizeof(err)), -EINVAL);
        /* an empty message parses but has no dtype */
        ck_assert_int_eq(onnx_tensor_parse("", 0, &t, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(t.ndim, 0x5a5a5a5a);
        /* no room for a message is fine */
        ck_assert_int_eq(onnx_tensor_parse(garbage, sizeof(garbage), &t, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(test_suite_file)
{
        struct stat st;
        struct onnx_tensor t;
        char err[128];
        uint8_t *buf;
        FILE *f;

        if (stat(ABS_INPUT, &st) != 0)
                return; /* libonnx-testdata not installed: covered by the synthetic tests */
        buf = malloc((size_t)st.st_size);
        ck_assert_ptr_nonnull(buf);
        f = fopen(ABS_INPUT, "rb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
        fclose(f);
        ck_assert_int_eq(onnx_tensor_parse(buf, (size_t)st.st_size, &t, err, sizeof(err)), 0);
        ck_assert_int_eq(t.dtype, NPU_FLOAT32);
        ck_assert_int_eq(t.ndim, 3);
        ck_assert_int_eq(t.dims[0], 3);
        ck_assert_int_eq(t.dims[1], 4);
        ck_assert_int_eq(t.dims[2], 5);
        ck_assert_uint_eq(t.count, 60);
        ck_assert_str_eq(t.name, "x");
        onnx_tensor_free(&t);
        free(buf);
}
END_TEST

/* ---- conversions ---- */

START_TEST(test_half_to_float)
{
        ck_assert(onnx_half_to_float(0x3c00) == 1.0f);
        ck_assert(onnx_half_to_float(0xc000) == -2.0f);
        ck_assert(onnx_half_to_float(0x3555) == 0x1.554p-2f);
        ck_assert(onnx_half_to_float(0x7bff) == 65504.0f);
        ck_assert(onnx_half_to_float(0x0001) == 0x1p-24f);   /* smallest subnormal */
        ck_assert(onnx_half_to_float(0x03ff) == 0x1.ff8p-15f); /* largest subnormal */
        ck_assert(onnx_half_to_float(0x8001) == -0x1p-24f);
        ck_assert(onnx_half_to_float(0x0400) == 0x1p-14f);   /* smallest normal */
        ck_assert(onnx_half_to_float(0x0000) == 0.0f && !signbit(onnx_half_to_float(0x0000)));
        ck_assert(signbit(onnx_half_to_float(0x8000)) && onnx_half_to_float(0x8000) == 0.0f);
        ck_assert(isinf(onnx_half_to_float(0x7c00)) && onnx_half_to_float(0x7c00) > 0);
        ck_assert(isinf(onnx_half_to_float(0xfc00)) && onnx_half_to_float(0xfc00) < 0);
        ck_assert(isnan(onnx_half_to_float(0x7e00)));
        ck_assert(isnan(onnx_half_to_float(0xfc01)));
}
END_TEST

START_TEST(test_bfloat16_to_float)
{
        ck_assert(onnx_bfloat16_to_float(0x3f80) == 1.0f);
        ck_assert(onnx_bfloat16_to_float(0x4049) == 0x1.92p1f);
        ck_assert(onnx_bfloat16_to_float(0xbf80) == -1.0f);
        ck_assert(isinf(onnx_bfloat16_to_float(0x7f80)));
        ck_assert(isnan(onnx_bfloat16_to_float(0x7fc0)));
}
END_TEST

START_TEST(test_dtype_names)
{
        ck_assert_str_eq(onnx_dtype_name(NPU_FLOAT32), "float");
        ck_assert_str_eq(onnx_dtype_name(NPU_BFLOAT16), "bfloat16");
        ck_assert_str_eq(onnx_dtype_name(8), "string");
        ck_assert_str_eq(onnx_dtype_name(-3), "dtype -3");
        ck_assert_uint_eq(onnx_dtype_size(NPU_BOOL), 1);
        ck_assert_uint_eq(onnx_dtype_size(NPU_FLOAT16), 2);
        ck_assert_uint_eq(onnx_dtype_size(NPU_UINT32), 4);
        ck_assert_uint_eq(onnx_dtype_size(NPU_FLOAT64), 8);
        ck_assert_uint_eq(onnx_dtype_size(8), 0);
        ck_assert_uint_eq(onnx_dtype_size(15), 0);
}
END_TEST

/* ---- comparison ---- */

START_TEST(test_value_close)
{
        const double rt = ONNX_TEST_RTOL, at = ONNX_TEST_ATOL;

        ck_assert(onnx_value_close(1.0, 1.0, rt, at));
        ck_assert(onnx_value_close(1.0009, 1.0, rt, at));
        ck_assert(!onnx_value_close(1.0011, 1.0, rt, at));
        ck_assert(onnx_value_close(-1000.9, -1000.0, rt, at));  /* relative to the expected */
        ck_assert(!onnx_value_close(-1001.1, -1000.0, rt, at));
        ck_assert(onnx_value_close(5e-8, 0.0, rt, at));         /* atol near zero */
        ck_assert(!onnx_value_close(2e-7, 0.0, rt, at));
        ck_assert(onnx_value_close(0.75, 0.5, 0.5, 0.0));       /* boundary is inclusive */
        ck_assert(onnx_value_close(NAN, NAN, rt, at));
        ck_assert(onnx_value_close(-NAN, NAN, rt, at));
        ck_assert(!onnx_value_close(NAN, 1.0, rt, at));
        ck_assert(!onnx_value_close(1.0, NAN, rt, at));
        ck_assert(onnx_value_close(INFINITY, INFINITY, rt, at));
        ck_assert(onnx_value_close(-INFINITY, -INFINITY, rt, at));
        ck_assert(!onnx_value_close(INFINITY, -INFINITY, rt, at));
        ck_assert(!onnx_value_close(1e308, INFINITY, rt, at));
        ck_assert(!onnx_value_close(INFINITY, 1e308, rt, at));
}
END_TEST

static struct onnx_tensor mk(int dtype, int ndim, const int64_t *dims, void *data)
{
        struct onnx_tensor t = { .dtype = dtype, .ndim = ndim, .count = 1,
                                 .elem_size = onnx_dtype_size(dtype), .data = data };

        for (int i = 0; i < ndim; i++) {
                t.dims[i] = dims[i];
                t.count *= (uint64_t)dims[i];
        }
        return t;
}

START_TEST(test_compare_float)
{
        static const int64_t dims[] = { 2, 3 };
        float e[6] = { 0, 1, 2, NAN, INFINITY, 0.75f };
        float a[6] = { 0, 1.0005f, 2, NAN, INFINITY, 0.75f };
        struct onnx_tensor t = mk(NPU_FLOAT32, 2, dims, e);
        struct onnx_mismatch m;
        char idx[32];

        ck_assert_uint_eq(onnx_tensor_compare(&t, a, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 0);
        ck_assert_uint_eq(m.count, 0);
        a[5] = 0.5f;
        a[2] = 2.1f;
        ck_assert_uint_eq(onnx_tensor_compare(&t, a, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 2);
        ck_assert_uint_eq(m.first, 2);
        ck_assert_str_eq(m.actual, "2.0999999");
        ck_assert_str_eq(m.expected, "2");
        onnx_tensor_format_index(&t, m.first, idx, sizeof(idx));
        ck_assert_str_eq(idx, "[0,2]");
        a[2] = 2;
        ck_assert_uint_eq(onnx_tensor_compare(&t, a, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);
        onnx_tensor_format_index(&t, m.first, idx, sizeof(idx));
        ck_assert_str_eq(idx, "[1,2]");
        ck_assert_str_eq(m.actual, "0.5");
        ck_assert_str_eq(m.expected, "0.75");
        a[5] = 0.75f;
        a[3] = 1; /* a number where NaN is expected */
        ck_assert_uint_eq(onnx_tensor_compare(&t, a, ONNX_TEST_RTOL, ONNX_TEST_ATOL, NULL), 1);
}
END_TEST

START_TEST(test_compare_double_and_half)
{
        static const int64_t dims[] = { 2 };
        double e[2] = { 1.0, 1e-300 }, a[2] = { 1.0 + 1e-4, 0 };
        uint16_t he[2] = { 0x3c00, 0x4000 }, ha[2] = { 0x3c01, 0x4000 }; /* 1.0 vs 1.000977 */
        uint16_t be[2] = { 0x3f80, 0x4000 }, ba[2] = { 0x3f81, 0x4000 }; /* 1.0 vs 1.0078 */
        struct onnx_tensor t = mk(NPU_FLOAT64, 1, dims, e);
        struct onnx_mismatch m;

        ck_assert_uint_eq(onnx_tensor_compare(&t, a, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 0);
        /* half precision is compared as float: one ulp at 1.0 is just under rtol */
        t = mk(NPU_FLOAT16, 1, dims, he);
        ck_assert_uint_eq(onnx_tensor_compare(&t, ha, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 0);
        ha[1] = 0x4001;
        ck_assert_uint_eq(onnx_tensor_compare(&t, ha, 1e-4, 0, &m), 2);
        t = mk(NPU_BFLOAT16, 1, dims, be);
        ck_assert_uint_eq(onnx_tensor_compare(&t, ba, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);
        ck_assert_uint_eq(m.first, 0);
        ck_assert_str_eq(m.actual, "1.0078125");
        ck_assert_str_eq(m.expected, "1");
}
END_TEST

START_TEST(test_compare_exact)
{
        static const int64_t dims[] = { 3 };
        int64_t e64[3] = { -1, INT64_MAX, 5 }, a64[3] = { -1, INT64_MAX, 6 };
        uint64_t eu[3] = { 0, UINT64_MAX, 2 }, au[3] = { 0, UINT64_MAX - 1, 2 };
        int8_t e8[3] = { -128, 0, 127 }, a8[3] = { -128, 0, 127 };
        uint8_t eb[3] = { 1, 0, 1 }, ab[3] = { 2, 0, 1 };
        struct onnx_tensor t = mk(NPU_INT64, 1, dims, e64);
        struct onnx_mismatch m;

        ck_assert_uint_eq(onnx_tensor_compare(&t, a64, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);
        ck_assert_uint_eq(m.first, 2);
        ck_assert_str_eq(m.actual, "6");
        ck_assert_str_eq(m.expected, "5");
        /* integers never get the float tolerance: 1 off in 2^63 is still wrong */
        a64[2] = 5;
        a64[1] = INT64_MAX - 1;
        ck_assert_uint_eq(onnx_tensor_compare(&t, a64, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);

        t = mk(NPU_UINT64, 1, dims, eu);
        ck_assert_uint_eq(onnx_tensor_compare(&t, au, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);
        ck_assert_str_eq(m.expected, "18446744073709551615");

        t = mk(NPU_INT8, 1, dims, e8);
        ck_assert_uint_eq(onnx_tensor_compare(&t, a8, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 0);
        a8[0] = 127;
        ck_assert_uint_eq(onnx_tensor_compare(&t, a8, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);
        ck_assert_str_eq(m.actual, "127");
        ck_assert_str_eq(m.expected, "-128");

        t = mk(NPU_BOOL, 1, dims, eb);
        ck_assert_uint_eq(onnx_tensor_compare(&t, ab, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 0);
        ab[1] = 1;
        ck_assert_uint_eq(onnx_tensor_compare(&t, ab, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m), 1);
        ck_assert_str_eq(m.actual, "true");
        ck_assert_str_eq(m.expected, "false");
}
END_TEST

START_TEST(test_compare_empty_and_scalar)
{
        static const int64_t zero[] = { 0, 4 };
        float e = 3, a = 3;
        struct onnx_tensor t = mk(NPU_FLOAT32, 2, zero, NULL);
        char idx[16];

        ck_assert_uint_eq(onnx_tensor_compare(&t, NULL, ONNX_TEST_RTOL, ONNX_TEST_ATOL, NULL), 0);
        t = mk(NPU_FLOAT32, 0, NULL, &e);
        ck_assert_uint_eq(onnx_tensor_compare(&t, &a, ONNX_TEST_RTOL, ONNX_TEST_ATOL, NULL), 0);
        onnx_tensor_format_index(&t, 0, idx, sizeof(idx));
        ck_assert_str_eq(idx, "[]");
}
END_TEST

START_TEST(test_format_index)
{
        static const int64_t dims[] = { 2, 3, 4 };
        struct onnx_tensor t = mk(NPU_FLOAT32, 3, dims, NULL);
        char idx[32], tiny[4];

        onnx_tensor_format_index(&t, 23, idx, sizeof(idx));
        ck_assert_str_eq(idx, "[1,2,3]");
        onnx_tensor_format_index(&t, 5, idx, sizeof(idx));
        ck_assert_str_eq(idx, "[0,1,1]");
        onnx_tensor_format_index(&t, 23, tiny, sizeof(tiny)); /* truncated, terminated */
        ck_assert_uint_eq(strlen(tiny), 3);
        onnx_tensor_format_index(&t, 23, tiny, 0);
}
END_TEST

static Suite *onnx_tensor_suite(void)
{
        Suite *s = suite_create("onnx_tensor");
        TCase *parse = tcase_create("parse"), *conv = tcase_create("convert"),
              *cmp = tcase_create("compare");

        tcase_add_test(parse, test_float_raw);
        tcase_add_test(parse, test_typed_fields);
        tcase_add_test(parse, test_bool);
        tcase_add_test(parse, test_half_types);
        tcase_add_test(parse, test_scalar_and_empty);
        tcase_add_test(parse, test_rejections);
        tcase_add_test(parse, test_corrupt_bytes);
        tcase_add_test(parse, test_suite_file);
        tcase_add_test(conv, test_half_to_float);
        tcase_add_test(conv, test_bfloat16_to_float);
        tcase_add_test(conv, test_dtype_names);
        tcase_add_test(cmp, test_value_close);
        tcase_add_test(cmp, test_compare_float);
        tcase_add_test(cmp, test_compare_double_and_half);
        tcase_add_test(cmp, test_compare_exact);
        tcase_add_test(cmp, test_compare_empty_and_scalar);
        tcase_add_test(cmp, test_format_index);
        suite_add_tcase(s, parse);
        suite_add_tcase(s, conv);
        suite_add_tcase(s, cmp);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(onnx_tensor_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Dtype conversion with Cast semantics, shared by Cast (cast.c) and the elementwise engine
 * (float16, bfloat16 and mixed dtypes, elementwise.c), which neither include nor call each
 * other. Elements travel through a small buffer as double, int64 or uint64 according to the
 * source type, so every pair of types needs only one load and one store routine (float16,
 * bfloat16 and float32 pairs, the hot ones, also have direct loops). Float to integer
 * truncates toward zero and saturates, NaN giving 0; integer to narrower integer wraps;
 * anything to bool is "not zero"; to float16 and bfloat16 rounds to nearest even, except
 * Cast/CastLike from a float type to bfloat16 in models that declare opset 17 or older
 * (ops_convert_tensor_opset). */
#include <math.h>
#include <string.h>

#include "convert.h"
#include "ops-internal.h"

enum cast_class { CAST_FLOAT, CAST_SIGNED, CAST_UNSIGNED };

union cast_buf {
        double f[OPS_CHUNK];
        int64_t i[OPS_CHUNK];
        uint64_t u[OPS_CHUNK];
};

int ops_convert_dtype_ok(int dtype)
{
        switch (dtype) {
        case PROTO_DTYPE_BOOL:
        case PROTO_DTYPE_UINT8:
        case PROTO_DTYPE_UINT16:
        case PROTO_DTYPE_UINT32:
        case PROTO_DTYPE_UINT64:
        case PROTO_DTYPE_INT8:
        case PROTO_DTYPE_INT16:
        case PROTO_DTYPE_INT32:
        case PROTO_DTYPE_INT64:
        case PROTO_DTYPE_FLOAT16:
        case PROTO_DTYPE_BFLOAT16:
        case PROTO_DTYPE_FLOAT32:
        case PROTO_DTYPE_FLOAT64:
                return 1;
        }
        return 0;
}

#define CAST_LOAD(T, field, EXPR)                                                              \
        do {                                                                                   \
                const T *p = src;                                                              \
                                                                                               \
                for (i = 0; i < n; i++)                                                        \
                        buf->field[i] = (EXPR);                                                \
        } while (0)

/* Reads n elements of src, s apart, into buf; returns how they are held. */
static int cast_load(int dtype, const void *src, int64_t s, size_t n, union cast_buf *buf)
{
        size_t i;

        switch (dtype) {
        case PROTO_DTYPE_BOOL: CAST_LOAD(uint8_t, u, p[i * s] != 0); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT8: CAST_LOAD(uint8_t, u, p[i * s]); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT16: CAST_LOAD(uint16_t, u, p[i * s]); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT32: CAST_LOAD(uint32_t, u, p[i * s]); return CAST_UNSIGNED;
        case PROTO_DTYPE_UINT64: CAST_LOAD(uint64_t, u, p[i * s]); return CAST_UNSIGNED;
        case PROTO_DTYPE_INT8: CAST_LOAD(int8_t, i, p[i * s]); return CAST_SIGNED;
        case PROTO_DTYPE_INT16: CAST_LOAD(int16_t, i, p[i * s]); return CAST_SIGNED;
        case PROTO_DTYPE_INT32: CAST_LOAD(int32_t, i, p[i * s]); return CAST_SIGNED;
        case PROTO_DTYPE_INT64: CAST_LOAD(int64_t, i, p[i * s]); return CAST_SIGNED;
        case PROTO_DTYPE_FLOAT16: CAST_LOAD(uint16_t, f, ops_half_to_float(p[i * s])); break;
        case PROTO_DTYPE_BFLOAT16: CAST_LOAD(uint16_t, f, ops_bf16_to_float(p[i * s])); break;
        case PROTO_DTYPE_FLOAT32: CAST_LOAD(float, f, p[i * s]); break;
        case PROTO_DTYPE_FLOAT64: CAST_LOAD(double, f, p[i * s]); break;
        }
        return CAST_FLOAT;
}

/* Truncation toward zero clamped to [lo, hi]; lo is -2^k so it and -lo are exact doubles. */
static int64_t cast_sat_signed(double d, int64_t lo, int64_t hi)
{
        double t;

        if (isnan(d))
                return 0;
        t = trunc(d);
        if (t < (double)lo)
                return lo;
        if (t >= -(double)lo)
                return hi;
        return (int64_t)t;
}

/* hi + 1 is a power of two, exact as a double even for 2^64. */
static uint64_t cast_sat_unsigned(double d, uint64_t hi)
{
        double t;

        if (isnan(d))
                return 0;
        t = trunc(d);
        if (t <= 0)
                return 0;
        if (t >= (double)hi + 1.0)
                return hi;
        return (uint64_t)t;
}

#define CAST_STORE(T, EF, EI, EU)                                                              \
        do {                                                                                   \
                T *o = dst;                                                                    \
                                                                                               \
                if (cls == CAST_FLOAT) {                                                       \
                        for (i = 0; i < n; i++) {                                              \
                                double v = buf->f[i];                                          \
                                o[i] = (EF);                                                   \
                        }                                                                      \
                } else if (cls == CAST_SIGNED) {                                               \
                        for (i = 0; i < n; i++) {                                              \
                                int64_t v = buf->i[i];                                         \
                                o[i] = (EI);                                                   \
                        }                                                                      \
                } else {                                                                       \
                        for (i = 0; i < n; i++) {                                              \
                                uint64_t v = buf->u[i];                                        \
                                o[i] = (EU);                                                   \
                        }                                                                      \
                }                                                                              \
        } while (0)

/* Integer targets: floats saturate, integers keep their low bits (modular in gcc). */
#define CAST_STORE_SIGNED(T, LO, HI)                                                           \
        CAST_STORE(T, (T)cast_sat_signed(v, LO, HI), (T)(uint64_t)v, (T)v)
#define CAST_STORE_UNSIGNED(T, HI)                                                             \
        CAST_STORE(T, (T)cast_sat_unsigned(v, HI), (T)(uint64_t)v, (T)v)

static void cast_store(int dtype, void *dst, size_t n, int cls, const union cast_buf *buf)
{
        size_t i;

        switch (dtype) {
        case PROTO_DTYPE_BOOL: CAST_STORE(uint8_t, v != 0, v != 0, v != 0); break;
        case PROTO_DTYPE_UINT8: CAST_STORE_UNSIGNED(uint8_t, UINT8_MAX); break;
        case PROTO_DTYPE_UINT16: CAST_STORE_UNSIGNED(uint16_t, UINT16_MAX); break;
        case PROTO_DTYPE_UINT32: CAST_STORE_UNSIGNED(uint32_t, UINT32_MAX); break;
        case PROTO_DTYPE_UINT64: CAST_STORE_UNSIGNED(uint64_t, UINT64_MAX); break;
        case PROTO_DTYPE_INT8: CAST_STORE_SIGNED(int8_t, INT8_MIN, INT8_MAX); break;
        case PROTO_DTYPE_INT16: CAST_STORE_SIGNED(int16_t, INT16_MIN, INT16_MAX); break;
        case PROTO_DTYPE_INT32: CAST_STORE_SIGNED(int32_t, INT32_MIN, INT32_MAX); break;
        case PROTO_DTYPE_INT64: CAST_STORE_SIGNED(int64_t, INT64_MIN, INT64_MAX); break;
        case PROTO_DTYPE_FLOAT16:
                CAST_STORE(uint16_t, ops_double_to_half(v), ops_double_to_half((double)v),
                           ops_double_to_half((double)v));
                break;
        case PROTO_DTYPE_BFLOAT16:
                CAST_STORE(uint16_t, ops_double_to_bf16(v), ops_double_to_bf16((double)v),
                           ops_double_to_bf16((double)v));
                break;
        case PROTO_DTYPE_FLOAT32: CAST_STORE(float, (float)v, (float)v, (float)v); break;
        case PROTO_DTYPE_FLOAT64: CAST_STORE(double, v, (double)v, (double)v); break;
        }
}

/* float16 -> float32 bits without branches, so that loops vectorize: a half's exponent and
 * mantissa bits moved into a float's make the value times 2^-112, for normal and subnormal
 * halves alike, and a multiplication by 2^112 (exact) corrects it; infinities and NaNs get
 * an all-ones exponent instead (selected by mask). Same results as ops_half_to_float. */
static inline uint32_t cast_h2f1(uint32_t h)
{
        uint32_t em = h & 0x7fff, bits = em << 13, m;
        float f;

        memcpy(&f, &bits, sizeof(f));
        f *= 0x1p112f;
        memcpy(&bits, &f, sizeof(bits));
        m = 0u - (uint32_t)(em >= 0x7c00);
        bits = (bits & ~m) | (((em << 13) | 0x7f800000) & m);
        return bits | (h & 0x8000) << 16;
}

/* float32 bits -> float16 rounding to nearest even, with ops_float_to_half's results (NaN
 * payloads kept, quieted), without branches: all three cases are computed and the right
 * one selected by masks. Halves' subnormals come from an addition of 0.5, whose rounding
 * to float is the rounding wanted; normals from rebiasing the exponent and adding the
 * rounding bias, a carry out of the mantissa bumping the exponent (up to infinity). */
static inline uint16_t cast_f2h1(uint32_t x)
{
        uint32_t a = x & 0x7fffffff, sub, r, special, nan, m;
        float f;

        memcpy(&f, &a, sizeof(f));
        f += 0.5f;
        memcpy(&sub, &f, sizeof(sub));
        sub -= 0x3f000000;
        r = (a + 0xc8000fff + ((a >> 13) & 1)) >> 13;
        nan = 0u - (uint32_t)(a > 0x7f800000);
        special = 0x7c00 | (nan & (0x200 | ((a >> 13) & 0x3ff)));
        m = 0u - (uint32_t)(a < 0x38800000);
        r = (r & ~m) | (sub & m);
        m = 0u - (uint32_t)(a >= 0x47800000);
        r = (r & ~m) | (special & m);
        return (uint16_t)(r | ((x >> 16) & 0x8000));
}

/* As ops_float_to_bf16. */
static inline uint16_t cast_f2b1(uint32_t x)
{
        uint32_t m = 0u - (uint32_t)((x & 0x7fffffff) > 0x7f800000);
        uint32_t r = (x + 0x7fff + ((x >> 16) & 1)) >> 16;

        return (uint16_t)((r & ~m) | (((x >> 16) | 0x40) & m));
}

static inline float cast_u2f(uint32_t bits)
{
        float f;

        memcpy(&f, &bits, sizeof(f));
        return f;
}

static inline uint32_t cast_f2u(float f)
{
        uint32_t bits;

        memcpy(&bits, &f, sizeof(bits));
        return bits;
}

/* Conversion loops between 16-bit floats and float32, o[i] = EXPR(v) for source elements
 * v: a contiguous version gcc vectorizes, and a strided one. */
#define CAST_LOOP(name, TS, TD, EXPR)                                                          \
        static void name(TD *restrict o, const TS *restrict p, int64_t s, size_t n)            \
        {                                                                                      \
                size_t i;                                                                      \
                                                                                               \
                if (s == 1) {                                                                  \
                        for (i = 0; i < n; i++) {                                              \
                                TS v = p[i];                                                   \
                                o[i] = EXPR;                                                   \
                        }                                                                      \
                        return;                                                                \
                }                                                                              \
                for (i = 0; i < n; i++) {                                                      \
                        TS v = p[i * s];                                                       \
                        o[i] = EXPR;                                                           \
                }                                                                              \
        }

CAST_LOOP(cast_h2f, uint16_t, float, cast_u2f(cast_h2f1(v)))
CAST_LOOP(cast_f2h, float, uint16_t, cast_f2h1(cast_f2u(v)))
CAST_LOOP(cast_b2f, uint16_t, float, cast_u2f((uint32_t)v << 16))
CAST_LOOP(cast_f2b, float, uint16_t, cast_f2b1(cast_f2u(v)))

/* The conversions float16/bfloat16 kernels spend their time in, without the detour
 * through double. Returns 0 when the pair has no direct loop. */
static int cast_direct(int ddtype, void *dst, int sdtype, const void *src, int64_t s, size_t n)
{
        size_t i;

        if (sdtype == PROTO_DTYPE_FLOAT16 && ddtype == PROTO_DTYPE_FLOAT32) {
                cast_h2f(dst, src, s, n);
        } else if (sdtype == PROTO_DTYPE_FLOAT32 && ddtype == PROTO_DTYPE_FLOAT16) {
                cast_f2h(dst, src, s, n);
        } else if (sdtype == PROTO_DTYPE_BFLOAT16 && ddtype == PROTO_DTYPE_FLOAT32) {
                cast_b2f(dst, src, s, n);
        } else if (sdtype == PROTO_DTYPE_FLOAT32 && ddtype == PROTO_DTYPE_BFLOAT16) {
                cast_f2b(dst, src, s, n);
        } else if (sdtype == ddtype) {
                size_t es = proto_dtype_size(sdtype);

                if (s == 1) {
                        memmove(dst, src, n * es);
                } else {
                        for (i = 0; i < n; i++)
                                memcpy((char *)dst + i * es, (const char *)src + i * (size_t)s * es,
                                       es);
                }
        } else {
                return 0;
        }
        return 1;
}

void ops_convert(int ddtype, void *dst, int sdtype, const void *src, int64_t sstride, size_t n)
{
        size_t ssize = proto_dtype_size(sdtype), dsize = proto_dtype_size(ddtype), off, len;
        union cast_buf buf;
        int cls;

        if (cast_direct(ddtype, dst, sdtype, src, sstride, n))
                return;
        for (off = 0; off < n; off += len) {
                len = n - off < OPS_CHUNK ? n - off : OPS_CHUNK;
                cls = cast_load(sdtype, (const char *)src + off * (size_t)sstride * ssize, sstride,
                                len, &buf);
                cast_store(ddtype, (char *)dst + off * dsize, len, cls, &buf);
        }
}

void ops_convert_tensor(const struct ops_tensor *in, const struct ops_tensor *out)
{
        size_t ssize = proto_dtype_size(in->dtype), dsize = proto_dtype_size(out->dtype);
        size_t n = (size_t)ops_tensor_numel(in), nchunks, c, len;

        if (in->dtype == out->dtype) {
                memmove(out->data, in->data, n * ssize);
                return;
        }
        /* Growing in place must go from the end so no chunk overwrites unread input. */
        nchunks = (n + OPS_CHUNK - 1) / OPS_CHUNK;
        for (c = 0; c < nchunks; c++) {
                size_t k = dsize > ssize ? nchunks - 1 - c : c;

                len = n - k * OPS_CHUNK < OPS_CHUNK ? n - k * OPS_CHUNK : OPS_CHUNK;
                ops_convert(out->dtype, (char *)out->data + k * OPS_CHUNK * dsize, in->dtype,
                            (const char *)in->data + k * OPS_CHUNK * ssize, 1, len);
        }
}

/* The Cast specification never said how floats become bfloat16 (onnx/onnx#3876); the
 * reference implementation, and so the test data, of every release up to ONNX 1.12 (opset
 * 17) dropped the low 16 bits, and ONNX 1.13 (opset 18) made it round to nearest even. A
 * model is held to the behaviour of the release its opset comes from; a launch without a
 * model (opset 0) rounds, as the elementwise engine does. */
int ops_convert_bf16_truncates(int opset)
{
        return opset >= 1 && opset <= 17;
}

/* float32 bits -> bfloat16 by dropping the low half; NaNs stay NaNs (a payload only in the
 * low half would otherwise become an infinity), quieted as cast_f2b1 does. */
static inline uint16_t cast_f2b_trunc1(uint32_t x)
{
        uint32_t m = 0u - (uint32_t)((x & 0x7fffffff) > 0x7f800000);

        return (uint16_t)(((x >> 16) & ~m) | (((x >> 16) | 0x40) & m));
}

void ops_convert_tensor_opset(const struct ops_tensor *in, const struct ops_tensor *out,
                              int opset)
{
        size_t ssize = proto_dtype_size(in->dtype), n, off, len, i;
        float fbuf[OPS_CHUNK];
        uint16_t *o = out->data;

        if (out->dtype != PROTO_DTYPE_BFLOAT16 || !ops_convert_bf16_truncates(opset) ||
            (in->dtype != PROTO_DTYPE_FLOAT32 && in->dtype != PROTO_DTYPE_FLOAT64 &&
             in->dtype != PROTO_DTYPE_FLOAT16)) {
                ops_convert_tensor(in, out);
                return;
        }
        /* Sources of 2 bytes or more: the output never runs ahead of the input, and each
         * chunk is read whole (into fbuf) before any of it is written. Wider sources reach
         * float32 first, rounding (as the reference's astype(float32) did). */
        n = (size_t)ops_tensor_numel(in);
        for (off = 0; off < n; off += len) {
                len = n - off < OPS_CHUNK ? n - off : OPS_CHUNK;
                ops_convert(PROTO_DTYPE_FLOAT32, fbuf, in->dtype,
                            (const char *)in->data + off * ssize, 1, len);
                for (i = 0; i < len; i++)
                        o[off + i] = cast_f2b_trunc1(cast_f2u(fbuf[i]));
        }
}

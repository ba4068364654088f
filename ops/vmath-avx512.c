/* vmath for AVX-512 (16 floats a vector). gcc's target pragma makes the rest of this file
 * AVX-512 code and defines __AVX512F__, so that <sleef.h> declares the 16-wide functions;
 * nothing here runs unless vmath.c found AVX-512 on the CPU. A compiler whose pragma does
 * not define the macro builds an empty table instead. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f")
#endif

#include <immintrin.h>
#include <sleef.h>

#include "vmath.h"

#ifdef __AVX512F__

#define VM_W 16
typedef __m512 vm_t;
#define VM_LOAD(p) _mm512_loadu_ps(p)
#define VM_STORE(p, v) _mm512_storeu_ps(p, v)
#define VM_SET1(c) _mm512_set1_ps(c)
#define VM_ADD(a, b) _mm512_add_ps(a, b)
#define VM_MUL(a, b) _mm512_mul_ps(a, b)
#define VM_DIV(a, b) _mm512_div_ps(a, b)
#define VM_MAX0(x) _mm512_max_ps(x, _mm512_setzero_ps())
#define VM_ABS(x) _mm512_abs_ps(x)
#define VM_SEL_GE0(x, a, b)                                                                    \
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), b, a)
#define VM_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VM_MIN(a, b) _mm512_min_ps(a, b)
#define VM_MAX(a, b) _mm512_max_ps(a, b)
#define VM_SEL_LE(x, c, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, c, _CMP_LE_OQ), b, a)
#define VM_SLEEF(f) Sleef_##f##f16_u10avx512f
#define VM_SLEEF35(f) Sleef_##f##f16_u35avx512f

#include "vmath-impl.h"

static const struct ops_vmath_impl avx512_impl = VM_TABLE("avx512f");
const struct ops_vmath_impl *const ops_vmath_avx512 = &avx512_impl;

#else
const struct ops_vmath_impl *const ops_vmath_avx512 = NULL;
#endif

/* vmath for AVX2 with FMA (8 floats a vector); see vmath-avx512.c for how the target
 * pragma is used. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma")
#endif

#include <immintrin.h>
#include <sleef.h>

#include "vmath.h"

#ifdef __AVX2__

#define VM_W 8
typedef __m256 vm_t;
#define VM_LOAD(p) _mm256_loadu_ps(p)
#define VM_STORE(p, v) _mm256_storeu_ps(p, v)
#define VM_SET1(c) _mm256_set1_ps(c)
#define VM_ADD(a, b) _mm256_add_ps(a, b)
#define VM_MUL(a, b) _mm256_mul_ps(a, b)
#define VM_DIV(a, b) _mm256_div_ps(a, b)
#define VM_MAX0(x) _mm256_max_ps(x, _mm256_setzero_ps())
#define VM_ABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define VM_SEL_GE0(x, a, b)                                                                    \
        _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ))
#define VM_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VM_MIN(a, b) _mm256_min_ps(a, b)
#define VM_MAX(a, b) _mm256_max_ps(a, b)
#define VM_SEL_LE(x, c, a, b) _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, c, _CMP_LE_OQ))
#define VM_SLEEF(f) Sleef_##f##f8_u10avx2
#define VM_SLEEF35(f) Sleef_##f##f8_u35avx2

#include "vmath-impl.h"

static const struct ops_vmath_impl avx2_impl = VM_TABLE("avx2");
const struct ops_vmath_impl *const ops_vmath_avx2 = &avx2_impl;

#else
const struct ops_vmath_impl *const ops_vmath_avx2 = NULL;
#endif

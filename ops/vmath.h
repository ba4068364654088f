/* Vectorized float32 math for the elementwise kernels: SLEEF's functions (1 ulp, the _u10
 * variants; 3.5 ulp for tanh, see vmath-impl.h) at the widest vector width the CPU offers,
 * chosen once at run time (AVX-512, then AVX2 with FMA). Where neither is available, or
 * NPUD_VMATH=0 is set in the environment (for before/after measurements), ops_vmath_get
 * answers NULL and the kernels keep their generic loops. Sinh and Cosh stay with libm:
 * SLEEF's overflow to infinity from |x| = 88.5, where the float result is finite up to
 * 89.4. */
#ifndef NPUD_OPS_VMATH_H
#define NPUD_OPS_VMATH_H

#include <stddef.h>

enum ops_vm {
        OPS_VM_NONE,
        OPS_VM_EXP, OPS_VM_LOG, OPS_VM_TANH, OPS_VM_ERF, OPS_VM_SIGMOID,
        OPS_VM_SIN, OPS_VM_COS, OPS_VM_TAN, OPS_VM_ASIN, OPS_VM_ACOS, OPS_VM_ATAN,
        OPS_VM_ASINH, OPS_VM_ACOSH, OPS_VM_ATANH,
        OPS_VM_SOFTPLUS, OPS_VM_MISH,
        OPS_VM_GELU, /* erf form: x / 2 * (1 + erf(x / sqrt 2)), ops_gelu_erf's formula */
        OPS_VM_COUNT
};

/* o[i] = f(a[i]) for i < n. o may be a itself, but must not overlap it otherwise. */
typedef void (*ops_vm_fn)(float *o, const float *a, size_t n);

struct ops_vmath_impl {
        const char *isa;
        ops_vm_fn fn[OPS_VM_COUNT];
};

/* One per ISA file; NULL where the compiler could not build that ISA. */
extern const struct ops_vmath_impl *const ops_vmath_avx512;
extern const struct ops_vmath_impl *const ops_vmath_avx2;

/* The function for f on this CPU, or NULL (use the scalar code). */
ops_vm_fn ops_vmath_get(enum ops_vm f);
/* "avx512f", "avx2" or "scalar": what ops_vmath_get hands out. */
const char *ops_vmath_isa(void);

#endif

/* The body of an ISA file of vmath (vmath-avx512.c, vmath-avx2.c), written once over a few
 * macros the file defines first: VM_W (floats per vector), vm_t, VM_LOAD, VM_STORE, VM_SET1,
 * VM_ADD, VM_MUL, VM_DIV, VM_MAX0 (max(x, 0), NaN to 0: the caller adds a NaN back), VM_ABS,
 * VM_SEL_GE0(x, a, b) (a where x >= 0, else b; NaN takes b), VM_FMA(a, b, c) (a * b + c),
 * VM_MIN, VM_MAX, VM_SEL_LE(x, c, a, b) (a where x <= c, else b), VM_SLEEF(name) (the SLEEF
 * function for float `name`, 1 ulp) and VM_SLEEF35(name) (its 3.5 ulp variant). Not a header
 * of its own: included by those files only.
 *
 * Tanh takes the 3.5-ulp variant: SLEEF's 1-ulp tanhf computes in double-float and costs
 * 7x its exp (16.6 ms against 2.4 ms over 4 M floats with AVX-512), for a measured error of
 * at most 2.3e-7 relative, far inside the ONNX tests' tolerances. */

/* A whole-array loop for the vector function vf; the tail goes through a vector-sized
 * buffer, so every element gets the same function (no scalar libm for the last few). */
#define VM_LOOP(name, vf)                                                                      \
        static void name(float *o, const float *a, size_t n)                                   \
        {                                                                                      \
                size_t i = 0;                                                                  \
                                                                                               \
                for (; i + VM_W <= n; i += VM_W)                                               \
                        VM_STORE(o + i, vf(VM_LOAD(a + i)));                                   \
                if (i < n) {                                                                   \
                        float t[VM_W] = { 0 };                                                 \
                        for (size_t j = 0; j < n - i; j++)                                     \
                                t[j] = a[i + j];                                               \
                        VM_STORE(t, vf(VM_LOAD(t)));                                           \
                        for (size_t j = 0; j < n - i; j++)                                     \
                                o[i + j] = t[j];                                               \
                }                                                                              \
        }

/* 1 / (1 + e) or e / (1 + e) with e = exp(-|x|): never exp of a large positive number.
 * One divide: e / (1 + e) as e * (1 / (1 + e)), one rounding more (within 2 ulp). */
static inline vm_t vm_sigmoid(vm_t x)
{
        vm_t e = VM_SLEEF(exp)(VM_MUL(VM_ABS(x), VM_SET1(-1.0f)));
        vm_t r = VM_DIV(VM_SET1(1.0f), VM_ADD(VM_SET1(1.0f), e));

        return VM_SEL_GE0(x, r, VM_MUL(e, r));
}

/* max(x, 0) + log1p(exp(-|x|)); the second term is NaN for a NaN x. */
static inline vm_t vm_softplus(vm_t x)
{
        vm_t e = VM_SLEEF(exp)(VM_MUL(VM_ABS(x), VM_SET1(-1.0f)));

        return VM_ADD(VM_MAX0(x), VM_SLEEF(log1p)(e));
}

static inline vm_t vm_mish(vm_t x)
{
        return VM_MUL(x, VM_SLEEF35(tanh)(vm_softplus(x)));
}

#include "gelu-coef.h"

/* GELU, erf form, as rows.c's scalar kernel computes it (gelu-coef.h), a vector at a time:
 * both branches, then a blend. NaN goes through x; -inf gives NaN as the scalar code does. */
static inline vm_t vm_gelu(vm_t x)
{
        vm_t u = VM_MUL(x, VM_SET1(0.70710678118654752f)), a = VM_ABS(u), t = VM_MUL(u, u);
        vm_t p = VM_SET1(gelu_a[6]);
        for (int i = 5; i >= 0; i--)
                p = VM_FMA(p, t, VM_SET1(gelu_a[i]));
        vm_t small = VM_FMA(u, p, VM_SET1(1.0f));
        /* log erfc(a): in a up to 4, in 1 / a (minus a^2) beyond, a clamped to 10.5 */
        vm_t four = VM_SET1(4.0f), b = VM_MIN(a, four);
        vm_t c = VM_MIN(VM_MAX(a, four), VM_SET1(10.5f)), r = VM_DIV(VM_SET1(1.0f), c);
        vm_t pb = VM_SET1(gelu_b[10]), pc = VM_SET1(gelu_c[6]);
        for (int i = 9; i >= 0; i--)
                pb = VM_FMA(pb, b, VM_SET1(gelu_b[i]));
        for (int i = 5; i >= 0; i--)
                pc = VM_FMA(pc, r, VM_SET1(gelu_c[i]));
        pc = VM_FMA(VM_MUL(c, c), VM_SET1(-1.0f), pc);
        vm_t q = VM_SLEEF(exp)(VM_SEL_LE(a, four, pb, pc));
        vm_t tail = VM_SEL_GE0(u, VM_ADD(VM_SET1(2.0f), VM_MUL(q, VM_SET1(-1.0f))), q);
        vm_t g = VM_SEL_LE(a, VM_SET1(GELU_T), small, tail);
        return VM_MUL(VM_MUL(x, VM_SET1(0.5f)), g);
}

VM_LOOP(vm_exp_loop, VM_SLEEF(exp))
VM_LOOP(vm_log_loop, VM_SLEEF(log))
VM_LOOP(vm_tanh_loop, VM_SLEEF35(tanh))
VM_LOOP(vm_erf_loop, VM_SLEEF(erf))
VM_LOOP(vm_sigmoid_loop, vm_sigmoid)
VM_LOOP(vm_sin_loop, VM_SLEEF(sin))
VM_LOOP(vm_cos_loop, VM_SLEEF(cos))
VM_LOOP(vm_tan_loop, VM_SLEEF(tan))
VM_LOOP(vm_asin_loop, VM_SLEEF(asin))
VM_LOOP(vm_acos_loop, VM_SLEEF(acos))
VM_LOOP(vm_atan_loop, VM_SLEEF(atan))
VM_LOOP(vm_asinh_loop, VM_SLEEF(asinh))
VM_LOOP(vm_acosh_loop, VM_SLEEF(acosh))
VM_LOOP(vm_atanh_loop, VM_SLEEF(atanh))
VM_LOOP(vm_softplus_loop, vm_softplus)
VM_LOOP(vm_mish_loop, vm_mish)
VM_LOOP(vm_gelu_loop, vm_gelu)

#define VM_TABLE(isa_name)                                                                     \
        {                                                                                      \
                .isa = isa_name,                                                               \
                .fn = {                                                                        \
                        [OPS_VM_EXP] = vm_exp_loop, [OPS_VM_LOG] = vm_log_loop,                \
                        [OPS_VM_TANH] = vm_tanh_loop, [OPS_VM_ERF] = vm_erf_loop,              \
                        [OPS_VM_SIGMOID] = vm_sigmoid_loop, [OPS_VM_SIN] = vm_sin_loop,        \
                        [OPS_VM_COS] = vm_cos_loop, [OPS_VM_TAN] = vm_tan_loop,                \
                        [OPS_VM_ASIN] = vm_asin_loop, [OPS_VM_ACOS] = vm_acos_loop,            \
                        [OPS_VM_ATAN] = vm_atan_loop, [OPS_VM_ASINH] = vm_asinh_loop,          \
                        [OPS_VM_ACOSH] = vm_acosh_loop, [OPS_VM_ATANH] = vm_atanh_loop,        \
                        [OPS_VM_SOFTPLUS] = vm_softplus_loop, [OPS_VM_MISH] = vm_mish_loop,    \
                        [OPS_VM_GELU] = vm_gelu_loop,                                          \
                },                                                                             \
        }

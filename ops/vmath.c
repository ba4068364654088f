/* Which vmath table this process uses: decided on first use from the CPU's features (and
 * NPUD_VMATH=0, which turns the vector paths off for before/after measurements). The
 * choice is idempotent, so racing first calls from several workers agree. */
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

static const struct ops_vmath_impl scalar_impl = { .isa = "scalar" };

static const struct ops_vmath_impl *choose(void)
{
        const char *env = getenv("NPUD_VMATH");

        if (env && strcmp(env, "0") == 0)
                return &scalar_impl;
        __builtin_cpu_init();
        if (ops_vmath_avx512 && __builtin_cpu_supports("avx512f"))
                return ops_vmath_avx512;
        if (ops_vmath_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                return ops_vmath_avx2;
        return &scalar_impl;
}

static const struct ops_vmath_impl *impl(void)
{
        static const struct ops_vmath_impl *chosen;
        const struct ops_vmath_impl *p = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);

        if (!p) {
                p = choose();
                __atomic_store_n(&chosen, p, __ATOMIC_RELEASE);
        }
        return p;
}

ops_vm_fn ops_vmath_get(enum ops_vm f)
{
        if (f <= OPS_VM_NONE || f >= OPS_VM_COUNT)
                return NULL;
        return impl()->fn[f];
}

const char *ops_vmath_isa(void)
{
        return impl()->isa;
}

/* Loops built for AVX-512 and AVX2 too, the widest this CPU has picked at load (an ifunc):
 * the baseline x86-64 build vectorizes them 4 floats wide only. Not under the sanitizers
 * or clang. */
#ifndef NPUD_OPS_WIDE_H
#define NPUD_OPS_WIDE_H

#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define OPS_WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define OPS_WIDE
#endif

#endif

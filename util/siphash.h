/* SipHash-1-3 (Aumasson and Bernstein's keyed PRF, one compression and three finalization
 * rounds) for hash tables keyed by strings a client controls: without the key, nobody can
 * pick names that land in one bucket, so lookups stay O(1) on average whatever the input.
 * The process key is drawn from getrandom() once, on first use. */
#ifndef NPUD_UTIL_SIPHASH_H
#define NPUD_UTIL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-1-3 of len bytes at data under a 16-byte key (k0 = bytes 0..7, k1 = 8..15, both
 * little-endian). */
uint64_t siphash13(const uint8_t key[16], const void *data, size_t len);
/* The original SipHash-2-4 (same conventions): the paper's test vectors check the code. */
uint64_t siphash24(const uint8_t key[16], const void *data, size_t len);

/* Hash under the per-process key: of len bytes, and of a NUL-terminated string. */
uint64_t util_hash(const void *data, size_t len);
uint64_t util_hash_str(const char *s);

#endif

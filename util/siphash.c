/* SipHash-1-3 and -2-4 (see siphash.h), written from the description in the SipHash paper: state
 * v0..v3 initialised from the key and the constant "somepseudorandomlygeneratedbytes", one
 * (c) SipRound(s) per 8-byte little-endian word m (v3 ^= m before, v0 ^= m after), a last word
 * holding the remaining bytes with the length mod 256 in its top byte, then v2 ^= 0xff and
 * (d) finalization SipRounds; the result is v0 ^ v1 ^ v2 ^ v3. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "siphash.h"

static inline uint64_t rotl(uint64_t x, int b)
{
        return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p)
{
        uint64_t v = 0;

        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

#define SIPROUND(v0, v1, v2, v3)                                                               \
        do {                                                                                   \
                v0 += v1;                                                                      \
                v1 = rotl(v1, 13);                                                             \
                v1 ^= v0;                                                                      \
                v0 = rotl(v0, 32);                                                             \
                v2 += v3;                                                                      \
                v3 = rotl(v3, 16);                                                             \
                v3 ^= v2;                                                                      \
                v0 += v3;                                                                      \
                v3 = rotl(v3, 21);                                                             \
                v3 ^= v0;                                                                      \
                v2 += v1;                                                                      \
                v1 = rotl(v1, 17);                                                             \
                v1 ^= v2;                                                                      \
                v2 = rotl(v2, 32);                                                             \
        } while (0)

/* c compression rounds per word, d finalization rounds. */
static uint64_t siphash_cd(const uint8_t key[16], const void *data, size_t len, int c, int d)
{
        const uint8_t *p = data;
        uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
        uint64_t v0 = k0 ^ 0x736f6d6570736575ull;
        uint64_t v1 = k1 ^ 0x646f72616e646f6dull;
        uint64_t v2 = k0 ^ 0x6c7967656e657261ull;
        uint64_t v3 = k1 ^ 0x7465646279746573ull;
        uint64_t m, last;
        size_t i, tail = len & 7;

        for (i = 0; i + 8 <= len; i += 8) {
                m = load_le64(p + i);
                v3 ^= m;
                for (int r = 0; r < c; r++)
                        SIPROUND(v0, v1, v2, v3);
                v0 ^= m;
        }
        last = (uint64_t)(len & 0xff) << 56;
        for (size_t j = 0; j < tail; j++)
                last |= (uint64_t)p[i + j] << (8 * j);
        v3 ^= last;
        for (int r = 0; r < c; r++)
                SIPROUND(v0, v1, v2, v3);
        v0 ^= last;
        v2 ^= 0xff;
        for (int r = 0; r < d; r++)
                SIPROUND(v0, v1, v2, v3);
        return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t siphash13(const uint8_t key[16], const void *data, size_t len)
{
        return siphash_cd(key, data, len, 1, 3);
}

uint64_t siphash24(const uint8_t key[16], const void *data, size_t len)
{
        return siphash_cd(key, data, len, 2, 4);
}

static uint8_t process_key[16];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* getrandom() first; /dev/urandom where the syscall is missing (old kernels, seccomp
 * filters); failing both, a key from clocks and addresses, which an attacker cannot read
 * either but may guess more easily, so it is the last resort only. */
static void key_init(void)
{
        size_t got = 0;
        ssize_t n;

        while (got < sizeof(process_key)) {
                n = getrandom(process_key + got, sizeof(process_key) - got, GRND_NONBLOCK);
                if (n > 0)
                        got += (size_t)n;
                else if (n < 0 && errno == EINTR)
                        continue;
                else
                        break;
        }
        if (got < sizeof(process_key)) {
                int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

                if (fd >= 0) {
                        while (got < sizeof(process_key)) {
                                n = read(fd, process_key + got, sizeof(process_key) - got);
                                if (n > 0)
                                        got += (size_t)n;
                                else if (!(n < 0 && errno == EINTR))
                                        break;
                        }
                        close(fd);
                }
        }
        if (got < sizeof(process_key)) {
                struct timespec a, b;
                uint64_t seed[4];
                uint8_t fixed[16] = { 0 };

                clock_gettime(CLOCK_REALTIME, &a);
                clock_gettime(CLOCK_MONOTONIC, &b);
                seed[0] = (uint64_t)a.tv_sec * 1000000000ull + (uint64_t)a.tv_nsec;
                seed[1] = (uint64_t)b.tv_sec * 1000000000ull + (uint64_t)b.tv_nsec;
                seed[2] = (uint64_t)getpid() ^ ((uint64_t)(uintptr_t)&a << 16);
                seed[3] = (uint64_t)(uintptr_t)&process_key ^ (uint64_t)(uintptr_t)key_init;
                memcpy(fixed, process_key, sizeof(fixed)); /* whatever getrandom gave */
                uint64_t h0 = siphash13(fixed, seed, sizeof(seed));
                fixed[0] ^= 1;
                uint64_t h1 = siphash13(fixed, seed, sizeof(seed));
                memcpy(process_key, &h0, 8);
                memcpy(process_key + 8, &h1, 8);
        }
}

uint64_t util_hash(const void *data, size_t len)
{
        pthread_once(&key_once, key_init);
        return siphash13(process_key, data, len);
}

uint64_t util_hash_str(const char *s)
{
        return util_hash(s, strlen(s));
}

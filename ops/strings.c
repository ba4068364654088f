/* The per-thread string pool of a run (see strings.h). Strings are carved from chunks of
 * ops_buf memory, so they count against the run's byte budget like any intermediate, and
 * the whole pool goes at once when the run ends: strings have no other owner to track. */
#include <errno.h>
#include <string.h>

#include "ops-internal.h"
#include "runctx.h"
#include "strings.h"

#define CHUNK_MIN (64u * 1024)

struct ops_strpool_chunk {
        struct ops_strpool_chunk *next;
        size_t used, cap;
        _Alignas(8) char data[];
};

static __thread struct ops_strpool *current;

void ops_strpool_init(struct ops_strpool *p)
{
        p->chunks = NULL;
        p->kept = 0;
        pthread_mutex_init(&p->lock, NULL);
}

void ops_strpool_begin(struct ops_strpool *p)
{
        ops_strpool_init(p);
        p->kept = current != NULL;
        if (!p->kept)
                current = p;
}

void ops_strpool_end(struct ops_strpool *p)
{
        if (p->kept)
                return;
        while (p->chunks) {
                struct ops_strpool_chunk *c = p->chunks;
                p->chunks = c->next;
                ops_buf_free(c);
        }
        if (current == p)
                current = NULL;
        pthread_mutex_destroy(&p->lock);
}

void ops_strpool_enter(struct ops_strpool *p)
{
        current = p;
}

void ops_strpool_leave(struct ops_strpool *p)
{
        if (current == p)
                current = NULL;
}

struct ops_str *ops_str_new(const void *s, size_t len, char *err, size_t errlen)
{
        struct ops_strpool *p = current;
        size_t need = (ops_str_size(len) + 7) & ~(size_t)7;
        struct ops_str *r;
        struct ops_strpool_chunk *c;

        if (!p) {
                ops_fail(err, errlen, -EINVAL, "no string pool outside a graph run");
                return NULL;
        }
        if (len > UINT32_MAX - 16) {
                ops_fail(err, errlen, -EINVAL, "a string of %zu bytes is over 4 GiB", len);
                return NULL;
        }
        pthread_mutex_lock(&p->lock);
        c = p->chunks;
        if (!c || c->cap - c->used < need) {
                size_t cap = need > CHUNK_MIN ? need : CHUNK_MIN;
                char msg[160] = "";
                c = ops_buf_alloc(sizeof(*c) + cap, msg, sizeof(msg));
                if (!c) {
                        pthread_mutex_unlock(&p->lock);
                        ops_fail(err, errlen, -ENOMEM, "string of %zu bytes: %s", len,
                                 msg[0] ? msg : "out of memory");
                        return NULL;
                }
                c->cap = cap;
                c->used = 0;
                c->next = p->chunks;
                p->chunks = c;
        }
        r = (struct ops_str *)(c->data + c->used);
        c->used += need;
        pthread_mutex_unlock(&p->lock);
        r->len = (uint32_t)len;
        if (len)
                memcpy(r->s, s, len);
        r->s[len] = 0;
        return r;
}

int64_t ops_utf8_check(const void *s, size_t len)
{
        const uint8_t *p = s;
        size_t i = 0;

        while (i < len) {
                uint8_t c = p[i];
                uint32_t cp;
                size_t n;

                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf)
                        n = 1, cp = c & 0x1f;
                else if (c >= 0xe0 && c <= 0xef)
                        n = 2, cp = c & 0x0f;
                else if (c >= 0xf0 && c <= 0xf4)
                        n = 3, cp = c & 0x07;
                else
                        return (int64_t)i; /* a continuation byte, 0xc0/0xc1 or past 0xf4 */
                if (len - i - 1 < n)
                        return (int64_t)i;
                for (size_t k = 1; k <= n; k++) {
                        if ((p[i + k] & 0xc0) != 0x80)
                                return (int64_t)i;
                        cp = cp << 6 | (p[i + k] & 0x3f);
                }
                /* overlong three- and four-byte forms, surrogates, past U+10FFFF */
                if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
                    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                        return (int64_t)i;
                i += n + 1;
        }
        return -1;
}

/* COMPLETION frame bodies (completion.h). */
#include <endian.h>
#include <string.h>

#include "completion.h"

static void put32(uint8_t *p, uint32_t v)
{
        v = htole32(v);
        memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
        v = htole64(v);
        memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
        uint32_t v;
        memcpy(&v, p, 4);
        return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
        uint64_t v;
        memcpy(&v, p, 8);
        return le64toh(v);
}

size_t proto_completion_encode(const struct proto_completion *c, uint8_t *out)
{
        size_t n = c->message ? strlen(c->message) : 0;

        if (n > PROTO_COMPLETION_MSG_MAX) {
                n = PROTO_COMPLETION_MSG_MAX;
                while (n > 0 && ((unsigned char)c->message[n] & 0xc0) == 0x80)
                        n--; /* do not split a character */
        }
        put32(out, c->stream);
        put32(out + 4, c->event);
        put64(out + 8, c->task);
        put64(out + 16, c->tag);
        put64(out + 24, c->error_task);
        put32(out + 32, (uint32_t)c->code);
        put32(out + 36, c->flags);
        put32(out + 40, (uint32_t)n);
        put32(out + 44, 0);
        if (n)
                memcpy(out + PROTO_COMPLETION_FIXED, c->message, n);
        return PROTO_COMPLETION_FIXED + n;
}

int proto_completion_decode(const uint8_t *body, size_t len, struct proto_completion *c)
{
        if (len < PROTO_COMPLETION_FIXED || len > PROTO_COMPLETION_MAX)
                return -1;
        uint32_t n = get32(body + 40);
        if (n != len - PROTO_COMPLETION_FIXED || get32(body + 44) != 0)
                return -1;
        c->stream = get32(body);
        c->event = get32(body + 4);
        c->task = get64(body + 8);
        c->tag = get64(body + 16);
        c->error_task = get64(body + 24);
        c->code = (int32_t)get32(body + 32);
        c->flags = get32(body + 36);
        if (c->flags & ~PROTO_COMPLETION_FLAGS)
                return -1;
        c->message = (const char *)body + PROTO_COMPLETION_FIXED;
        c->message_len = n;
        return 0;
}

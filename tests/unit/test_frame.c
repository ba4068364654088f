/* Unit tests of the wire framing (proto/frame.c): header encoding and every rejection of
 * proto_header_decode, incremental reassembly in proto_reader, SCM_RIGHTS fd passing over a
 * socketpair with proto_send_frame/proto_reader_fill, and the non-blocking proto_writer. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proto/completion.h"
#include "proto/frame.h"

/* ---- helpers ---- */

static struct proto_header mkhdr(int kind, int nfds, uint32_t body_len, uint64_t id)
{
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = (uint8_t)kind, .nfds = (uint8_t)nfds,
                                  .body_len = body_len, .request_id = id };
        return h;
}

/* Encode header + body into a new malloc'ed buffer of *ret_len bytes. */
static uint8_t *mkframe(int kind, int nfds, const void *body, uint32_t body_len, uint64_t id,
                        size_t *ret_len)
{
        struct proto_header h = mkhdr(kind, nfds, body_len, id);
        uint8_t *f = malloc(PROTO_HEADER_SIZE + body_len + 1);

        ck_assert_ptr_nonnull(f);
        proto_header_encode(&h, f);
        if (body_len)
                memcpy(f + PROTO_HEADER_SIZE, body, body_len);
        *ret_len = PROTO_HEADER_SIZE + body_len;
        return f;
}

/* A valid encoded header that the rejection tests then corrupt. */
static void valid_header(uint8_t out[PROTO_HEADER_SIZE])
{
        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, 0, 16, 7);
        proto_header_encode(&h, out);
}

static int decode_with(uint8_t b[PROTO_HEADER_SIZE])
{
        struct proto_header h;
        memset(&h, 0xa5, sizeof(h));
        int e = proto_header_decode(b, &h);
        if (e < 0) /* a failed decode must leave *ret untouched */
                ck_assert_uint_eq(h.magic, 0xa5a5a5a5u);
        return e;
}

static void put_u32le(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)(v >> 16);
        p[3] = (uint8_t)(v >> 24);
}

static void put_u16le(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
}

static void mk_socketpair(int sv[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static int fd_is_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

/* Fill from sock until proto_reader_next yields a frame (waits with poll). */
static int fill_until_frame(struct proto_reader *r, int sock, struct proto_frame *f)
{
        for (int rounds = 0; rounds < 100000; rounds++) {
                int e = proto_reader_next(r, f);
                if (e != 0)
                        return e;
                struct pollfd p = { .fd = sock, .events = POLLIN };
                if (poll(&p, 1, 2000) <= 0)
                        return -ETIMEDOUT;
                ssize_t n = proto_reader_fill(r, sock);
                if (n == -EAGAIN)
                        continue;
                if (n <= 0)
                        return n == 0 ? -EPIPE : (int)n;
        }
        return -ETIMEDOUT;
}

/* ---- header ---- */

START_TEST(test_header_roundtrip)
{
        struct proto_header h = mkhdr(PROTO_KIND_SUBMIT, 3, 0x00a0b0c0u, 0x1122334455667788ull);
        struct proto_header d;
        uint8_t b[PROTO_HEADER_SIZE];

        memset(b, 0xff, sizeof(b));
        proto_header_encode(&h, b);
        /* byte layout: little-endian, "NPU1" magic */
        ck_assert_int_eq(memcmp(b, "NPU1", 4), 0);
        ck_assert_uint_eq(b[4], PROTO_VERSION & 0xff);
        ck_assert_uint_eq(b[5], PROTO_VERSION >> 8);
        ck_assert_uint_eq(b[6], PROTO_KIND_SUBMIT);
        ck_assert_uint_eq(b[7], 0);
        ck_assert_uint_eq(b[8], 3);
        ck_assert_uint_eq(b[9], 0);
        ck_assert_uint_eq(b[10], 0);
        ck_assert_uint_eq(b[11], 0);
        ck_assert_uint_eq(b[12], 0xc0);
        ck_assert_uint_eq(b[13], 0xb0);
        ck_assert_uint_eq(b[14], 0xa0);
        ck_assert_uint_eq(b[15], 0x00);
        ck_assert_uint_eq(b[16], 0x88);
        ck_assert_uint_eq(b[23], 0x11);

        ck_assert_int_eq(proto_header_decode(b, &d), 0);
        ck_assert_uint_eq(d.magic, PROTO_MAGIC);
        ck_assert_uint_eq(d.version, PROTO_VERSION);
        ck_assert_uint_eq(d.kind, PROTO_KIND_SUBMIT);
        ck_assert_uint_eq(d.flags, 0);
        ck_assert_uint_eq(d.nfds, 3);
        ck_assert_uint_eq(d.body_len, 0x00a0b0c0u);
        ck_assert_uint_eq(d.request_id, 0x1122334455667788ull);

        /* every kind and the fd cap round-trip */
        for (int k = PROTO_KIND_REQUEST; k <= PROTO_KIND_SUBMIT; k++) {
                h = mkhdr(k, PROTO_MAX_FDS, 0, 0);
                proto_header_encode(&h, b);
                ck_assert_int_eq(proto_header_decode(b, &d), 0);
                ck_assert_uint_eq(d.kind, (unsigned)k);
                ck_assert_uint_eq(d.nfds, PROTO_MAX_FDS);
                ck_assert_uint_eq(d.body_len, 0);
        }
}
END_TEST

START_TEST(test_header_encode_clears_reserved)
{
        struct proto_header h = mkhdr(PROTO_KIND_REPLY, 0, 5, 9);
        uint8_t b[PROTO_HEADER_SIZE];

        memset(b, 0xee, sizeof(b));
        proto_header_encode(&h, b);
        ck_assert_uint_eq(b[9] | b[10] | b[11], 0);
        ck_assert_int_eq(decode_with(b), 0);
}
END_TEST

START_TEST(test_header_bad_magic)
{
        uint8_t b[PROTO_HEADER_SIZE];

        valid_header(b);
        b[0] ^= 0x01;
        ck_assert_int_eq(decode_with(b), -EBADMSG);
        valid_header(b);
        put_u32le(b, 0);
        ck_assert_int_eq(decode_with(b), -EBADMSG);
        valid_header(b);
        memcpy(b, "1UPN", 4); /* big-endian spelling */
        ck_assert_int_eq(decode_with(b), -EBADMSG);
}
END_TEST

START_TEST(test_header_nonzero_flags)
{
        uint8_t b[PROTO_HEADER_SIZE];

        for (int bit = 0; bit < 8; bit++) {
                valid_header(b);
                b[7] = (uint8_t)(1u << bit);
                ck_assert_int_eq(decode_with(b), -EBADMSG);
        }
}
END_TEST

START_TEST(test_header_nonzero_reserved)
{
        uint8_t b[PROTO_HEADER_SIZE];

        for (int i = 9; i <= 11; i++) {
                valid_header(b);
                b[i] = 0x80;
                ck_assert_int_eq(decode_with(b), -EBADMSG);
                valid_header(b);
                b[i] = 0x01;
                ck_assert_int_eq(decode_with(b), -EBADMSG);
        }
}
END_TEST

START_TEST(test_header_bad_version)
{
        uint8_t b[PROTO_HEADER_SIZE];
        static const uint16_t bad[] = { 0, PROTO_VERSION + 1, 0x100, 0xffff };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                valid_header(b);
                put_u16le(b + 4, bad[i]);
                ck_assert_int_eq(decode_with(b), -EPROTONOSUPPORT);
        }
        valid_header(b);
        put_u16le(b + 4, 2);
        ck_assert_int_eq(decode_with(b), -EPROTONOSUPPORT);
        valid_header(b);
        put_u16le(b + 4, 1);
        ck_assert_int_eq(decode_with(b), 0);
}
END_TEST

START_TEST(test_header_bad_kind)
{
        uint8_t b[PROTO_HEADER_SIZE];
        static const uint8_t bad[] = { 0, 6, 7, 0x80, 0xff }; /* 5 is COMPLETION */

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                valid_header(b);
                b[6] = bad[i];
                ck_assert_int_eq(decode_with(b), -EBADMSG);
        }
}
END_TEST

/* COMPLETION bodies: every field round-trips, a message is cut at a character boundary, and
 * a body whose length, flags or reserved word disagree is refused. */
START_TEST(test_completion_roundtrip)
{
        uint8_t b[PROTO_COMPLETION_MAX + 16];
        struct proto_completion in = { .stream = 7, .event = 0, .task = 1ull << 40, .tag = 0xdeadbeefcafeull,
                                       .error_task = 99, .code = -3,
                                       .flags = PROTO_COMPLETION_HOST_FUNC | PROTO_COMPLETION_HELD,
                                       .message = "task 99: \u00e9 failed" },
                                out;
        size_t n = proto_completion_encode(&in, b);

        ck_assert_uint_eq(n, PROTO_COMPLETION_FIXED + strlen(in.message));
        ck_assert_int_eq(proto_completion_decode(b, n, &out), 0);
        ck_assert_uint_eq(out.stream, 7);
        ck_assert_uint_eq(out.task, 1ull << 40);
        ck_assert_uint_eq(out.tag, 0xdeadbeefcafeull);
        ck_assert_uint_eq(out.error_task, 99);
        ck_assert_int_eq(out.code, -3);
        ck_assert_uint_eq(out.flags, PROTO_COMPLETION_HOST_FUNC | PROTO_COMPLETION_HELD);
        ck_assert_uint_eq(out.message_len, strlen(in.message));
        ck_assert(memcmp(out.message, in.message, out.message_len) == 0);
        /* a NULL message is an empty one */
        in.message = NULL;
        ck_assert_uint_eq(proto_completion_encode(&in, b), PROTO_COMPLETION_FIXED);
        /* too long: cut, never inside a two-byte character */
        char *longmsg = malloc(PROTO_COMPLETION_MSG_MAX + 8);
        memset(longmsg, 'a', PROTO_COMPLETION_MSG_MAX - 1);
        memcpy(longmsg + PROTO_COMPLETION_MSG_MAX - 1, "\xc3\xa9xyz", 6);
        in.message = longmsg;
        n = proto_completion_encode(&in, b);
        ck_assert_uint_eq(n, PROTO_COMPLETION_FIXED + PROTO_COMPLETION_MSG_MAX - 1);
        ck_assert_int_eq(proto_completion_decode(b, n, &out), 0);
        free(longmsg);
        /* malformed bodies */
        in.message = "x";
        n = proto_completion_encode(&in, b);
        ck_assert_int_eq(proto_completion_decode(b, n - 1, &out), -1);  /* length disagrees */
        ck_assert_int_eq(proto_completion_decode(b, 20, &out), -1);     /* short */
        b[36] = 0x80;                                                   /* unknown flag */
        ck_assert_int_eq(proto_completion_decode(b, n, &out), -1);
        b[36] = 0;
        b[44] = 1;                                                      /* reserved word */
        ck_assert_int_eq(proto_completion_decode(b, n, &out), -1);
        b[44] = 0;
        ck_assert_int_eq(proto_completion_decode(b, n, &out), 0);
        memset(b, 0, sizeof(b));
        b[40] = 0xff; b[41] = 0xff;                                     /* message past the limit */
        ck_assert_int_eq(proto_completion_decode(b, sizeof(b), &out), -1);
}
END_TEST

START_TEST(test_header_too_many_fds)
{
        uint8_t b[PROTO_HEADER_SIZE];

        valid_header(b);
        b[8] = PROTO_MAX_FDS;
        ck_assert_int_eq(decode_with(b), 0);
        valid_header(b);
        b[8] = PROTO_MAX_FDS + 1;
        ck_assert_int_eq(decode_with(b), -ETOOMANYREFS);
        valid_header(b);
        b[8] = 0xff;
        ck_assert_int_eq(decode_with(b), -ETOOMANYREFS);
}
END_TEST

START_TEST(test_header_body_limits)
{
        static const int json_kinds[] = { PROTO_KIND_REQUEST, PROTO_KIND_REPLY, PROTO_KIND_NOTIFY };
        uint8_t b[PROTO_HEADER_SIZE];
        struct proto_header h;

        for (size_t i = 0; i < sizeof(json_kinds) / sizeof(json_kinds[0]); i++) {
                h = mkhdr(json_kinds[i], 0, PROTO_MAX_JSON_BODY, 1);
                proto_header_encode(&h, b);
                ck_assert_int_eq(decode_with(b), 0);
                h.body_len = PROTO_MAX_JSON_BODY + 1;
                proto_header_encode(&h, b);
                ck_assert_int_eq(decode_with(b), -EMSGSIZE);
                h.body_len = PROTO_MAX_BODY;
                proto_header_encode(&h, b);
                ck_assert_int_eq(decode_with(b), -EMSGSIZE);
        }
        /* SUBMIT: the larger limit, inclusive */
        h = mkhdr(PROTO_KIND_SUBMIT, 0, PROTO_MAX_BODY, 1);
        proto_header_encode(&h, b);
        ck_assert_int_eq(decode_with(b), 0);
        h.body_len = PROTO_MAX_JSON_BODY + 1;
        proto_header_encode(&h, b);
        ck_assert_int_eq(decode_with(b), 0);
        h.body_len = PROTO_MAX_BODY + 1;
        proto_header_encode(&h, b);
        ck_assert_int_eq(decode_with(b), -EMSGSIZE);
        h.body_len = UINT32_MAX;
        proto_header_encode(&h, b);
        ck_assert_int_eq(decode_with(b), -EMSGSIZE);
}
END_TEST

/* ---- reader (fed bytes) ---- */

START_TEST(test_reader_byte_by_byte)
{
        static const char body[] = "{\"method\":\"ping\"}";
        struct proto_reader r;
        struct proto_frame f;
        size_t len;
        uint8_t *fr = mkframe(PROTO_KIND_REQUEST, 0, body, sizeof(body) - 1, 42, &len);

        proto_reader_init(&r);
        for (size_t i = 0; i < len; i++) {
                ck_assert_int_eq(proto_reader_next(&r, &f), 0);
                ck_assert_int_eq(proto_reader_feed(&r, fr + i, 1), 0);
        }
        ck_assert_int_eq(proto_reader_next(&r, &f), 1);
        ck_assert_uint_eq(f.hdr.kind, PROTO_KIND_REQUEST);
        ck_assert_uint_eq(f.hdr.request_id, 42);
        ck_assert_uint_eq(f.hdr.body_len, sizeof(body) - 1);
        ck_assert_int_eq(memcmp(f.body, body, sizeof(body) - 1), 0);
        for (int i = 0; i < PROTO_MAX_FDS; i++)
                ck_assert_int_eq(f.fds[i], -1);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert_uint_eq(r.len, 0);
        proto_reader_deinit(&r);
        free(fr);
}
END_TEST

START_TEST(test_reader_several_frames_one_feed)
{
        static const char *const bodies[] = { "{\"a\":1}", "", "{\"result\":{}}", "\x01\x02\x03" };
        static const int kinds[] = { PROTO_KIND_REQUEST, PROTO_KIND_NOTIFY, PROTO_KIND_REPLY,
                                     PROTO_KIND_SUBMIT };
        uint8_t all[256];
        size_t total = 0;
        struct proto_reader r;
        struct proto_frame f;

        for (int i = 0; i < 4; i++) {
                size_t len;
                uint8_t *fr = mkframe(kinds[i], 0, bodies[i], (uint32_t)strlen(bodies[i]),
                                      100 + (uint64_t)i, &len);
                memcpy(all + total, fr, len);
                total += len;
                free(fr);
        }
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_feed(&r, all, total), 0);
        for (int i = 0; i < 4; i++) {
                ck_assert_int_eq(proto_reader_next(&r, &f), 1);
                ck_assert_uint_eq(f.hdr.kind, (unsigned)kinds[i]);
                ck_assert_uint_eq(f.hdr.request_id, 100 + (uint64_t)i);
                ck_assert_uint_eq(f.hdr.body_len, strlen(bodies[i]));
                ck_assert_int_eq(memcmp(f.body, bodies[i], strlen(bodies[i])), 0);
        }
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        proto_reader_deinit(&r);
}
END_TEST

START_TEST(test_reader_truncated)
{
        static const char body[] = "{\"x\":true}";
        struct proto_reader r;
        struct proto_frame f;
        size_t len;
        uint8_t *fr = mkframe(PROTO_KIND_REPLY, 0, body, sizeof(body) - 1, 5, &len);

        proto_reader_init(&r);
        /* empty reader */
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        /* part of the header: need more */
        ck_assert_int_eq(proto_reader_feed(&r, fr, PROTO_HEADER_SIZE - 1), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        /* header complete, body missing: need more */
        ck_assert_int_eq(proto_reader_feed(&r, fr + PROTO_HEADER_SIZE - 1, 1), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        /* body all but one byte */
        ck_assert_int_eq(proto_reader_feed(&r, fr + PROTO_HEADER_SIZE, len - PROTO_HEADER_SIZE - 1), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert_int_eq(proto_reader_feed(&r, fr + len - 1, 1), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 1);
        ck_assert_int_eq(memcmp(f.body, body, sizeof(body) - 1), 0);
        proto_reader_deinit(&r);
        free(fr);
}
END_TEST

START_TEST(test_reader_bad_header_is_error)
{
        struct proto_reader r;
        struct proto_frame f;
        uint8_t b[PROTO_HEADER_SIZE];

        /* a framing error is reported as soon as the header is complete */
        valid_header(b);
        b[0] = 'X';
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_feed(&r, b, sizeof(b)), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), -EBADMSG);
        ck_assert_int_eq(proto_reader_next(&r, &f), -EBADMSG); /* sticky: nothing consumed */
        proto_reader_deinit(&r);

        valid_header(b);
        put_u16le(b + 4, 2);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_feed(&r, b, sizeof(b)), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), -EPROTONOSUPPORT);
        proto_reader_deinit(&r);

        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, 0, PROTO_MAX_JSON_BODY + 1, 1);
        proto_header_encode(&h, b);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_feed(&r, b, sizeof(b)), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), -EMSGSIZE);
        proto_reader_deinit(&r);
}
END_TEST

START_TEST(test_reader_missing_fds)
{
        static const char body[] = "{}";
        struct proto_reader r;
        struct proto_frame f;
        size_t len;
        uint8_t *fr = mkframe(PROTO_KIND_REQUEST, 2, body, 2, 1, &len);

        proto_reader_init(&r);
        /* incomplete frame: still "need more", the fd check comes with the whole frame */
        ck_assert_int_eq(proto_reader_feed(&r, fr, len - 1), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert_int_eq(proto_reader_feed(&r, fr + len - 1, 1), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), -EBADMSG);
        proto_reader_deinit(&r);
        free(fr);
}
END_TEST

START_TEST(test_reader_feed_limits)
{
        struct proto_reader r;
        uint8_t byte = 0;

        proto_reader_init(&r);
        /* the size is checked before the data is touched */
        ck_assert_int_eq(proto_reader_feed(&r, &byte, PROTO_MAX_BODY + PROTO_HEADER_SIZE + 1),
                         -EMSGSIZE);
        ck_assert_uint_eq(r.len, 0);
        /* empty feeds change nothing (on a reader that already has its buffer: on a fresh
         * one, frame.c passes a NULL destination to memcpy, undefined behaviour) */
        ck_assert_int_eq(proto_reader_feed(&r, &byte, 1), 0);
        ck_assert_int_eq(proto_reader_feed(&r, &byte, 0), 0);
        ck_assert_uint_eq(r.len, 1);
        proto_reader_deinit(&r);
}
END_TEST

/* Many frames fed in odd-sized pieces: exercises buffer compaction and growth. */
START_TEST(test_reader_stream_of_frames)
{
        enum { NFRAMES = 3000 };
        struct proto_reader r;
        struct proto_frame f;
        uint8_t *stream = NULL;
        size_t total = 0, cap = 0, pos = 0;
        unsigned got = 0;

        for (unsigned i = 0; i < NFRAMES; i++) {
                uint8_t body[300];
                uint32_t blen = (i * 37u) % sizeof(body);
                size_t len;
                for (uint32_t k = 0; k < blen; k++)
                        body[k] = (uint8_t)(i + k);
                uint8_t *fr = mkframe(PROTO_KIND_SUBMIT, 0, body, blen, i, &len);
                if (total + len > cap) {
                        cap = cap ? cap * 2 : 65536;
                        stream = realloc(stream, cap);
                        ck_assert_ptr_nonnull(stream);
                }
                memcpy(stream + total, fr, len);
                total += len;
                free(fr);
        }
        proto_reader_init(&r);
        while (pos < total) {
                size_t n = 1 + (pos * 7919u) % 613;
                if (n > total - pos)
                        n = total - pos;
                ck_assert_int_eq(proto_reader_feed(&r, stream + pos, n), 0);
                pos += n;
                int e;
                while ((e = proto_reader_next(&r, &f)) == 1) {
                        uint32_t blen = (got * 37u) % 300u;
                        if (f.hdr.request_id != got || f.hdr.body_len != blen)
                                ck_abort_msg("frame %u: id %llu len %u", got,
                                             (unsigned long long)f.hdr.request_id, f.hdr.body_len);
                        for (uint32_t k = 0; k < blen; k++)
                                if (f.body[k] != (uint8_t)(got + k))
                                        ck_abort_msg("frame %u: body byte %u differs", got, k);
                        got++;
                }
                ck_assert_int_eq(e, 0);
        }
        ck_assert_uint_eq(got, NFRAMES);
        ck_assert_uint_eq(r.len, 0);
        proto_reader_deinit(&r);
        free(stream);
}
END_TEST

START_TEST(test_reader_large_submit)
{
        const uint32_t blen = 3u << 20; /* larger than the reader's initial chunk */
        struct proto_reader r;
        struct proto_frame f;
        size_t len;
        uint8_t *body = malloc(blen);

        ck_assert_ptr_nonnull(body);
        for (uint32_t i = 0; i < blen; i++)
                body[i] = (uint8_t)(i * 131u);
        uint8_t *fr = mkframe(PROTO_KIND_SUBMIT, 0, body, blen, 77, &len);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_feed(&r, fr, 1000), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert_int_eq(proto_reader_feed(&r, fr + 1000, len - 1000), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 1);
        ck_assert_uint_eq(f.hdr.body_len, blen);
        ck_assert_int_eq(memcmp(f.body, body, blen), 0);
        proto_reader_deinit(&r);
        free(fr);
        free(body);
}
END_TEST

/* ---- fd passing over a socketpair ---- */

START_TEST(test_fd_pass_memfd)
{
        static const char body[] = "{\"method\":\"region_register\",\"params\":{\"fd\":0}}";
        static const char text[] = "shared bytes";
        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, 1, sizeof(body) - 1, 9);
        struct proto_reader r;
        struct proto_frame f;
        char got[sizeof(text)];
        int sv[2];
        int mfd = memfd_create("test-frame", MFD_CLOEXEC);

        ck_assert_int_ge(mfd, 0);
        ck_assert_int_eq(write(mfd, text, sizeof(text)), (ssize_t)sizeof(text));
        mk_socketpair(sv);
        ck_assert_int_eq(proto_send_frame(sv[0], &h, body, &mfd), 0);
        close(mfd); /* the receiver's copy must stay usable */

        proto_reader_init(&r);
        ck_assert_int_eq(fill_until_frame(&r, sv[1], &f), 1);
        ck_assert_uint_eq(f.hdr.nfds, 1);
        ck_assert_uint_eq(f.hdr.request_id, 9);
        ck_assert_int_eq(memcmp(f.body, body, sizeof(body) - 1), 0);
        ck_assert_int_ge(f.fds[0], 0);
        for (int i = 1; i < PROTO_MAX_FDS; i++)
                ck_assert_int_eq(f.fds[i], -1);
        ck_assert_int_eq(r.nfds, 0); /* ownership moved to the frame */
        /* received with MSG_CMSG_CLOEXEC */
        ck_assert_int_ne(fcntl(f.fds[0], F_GETFD) & FD_CLOEXEC, 0);
        ck_assert_int_eq(pread(f.fds[0], got, sizeof(got), 0), (ssize_t)sizeof(got));
        ck_assert_int_eq(memcmp(got, text, sizeof(text)), 0);
        close(f.fds[0]);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        proto_reader_deinit(&r);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_fd_pass_pipe_and_max)
{
        struct proto_reader r;
        struct proto_frame f;
        int sv[2], p[PROTO_MAX_FDS][2], fds[PROTO_MAX_FDS];
        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, PROTO_MAX_FDS, 2, 3);

        mk_socketpair(sv);
        for (int i = 0; i < PROTO_MAX_FDS; i++) {
                ck_assert_int_eq(pipe2(p[i], O_CLOEXEC), 0);
                fds[i] = p[i][1]; /* pass the write ends */
        }
        ck_assert_int_eq(proto_send_frame(sv[0], &h, "{}", fds), 0);
        proto_reader_init(&r);
        ck_assert_int_eq(fill_until_frame(&r, sv[1], &f), 1);
        ck_assert_uint_eq(f.hdr.nfds, PROTO_MAX_FDS);
        for (int i = 0; i < PROTO_MAX_FDS; i++) {
                char c = (char)('a' + i), back = 0;
                ck_assert_int_ge(f.fds[i], 0);
                /* the fds arrive in order: fds[i] writes into pipe i */
                ck_assert_int_eq(write(f.fds[i], &c, 1), 1);
                ck_assert_int_eq(read(p[i][0], &back, 1), 1);
                ck_assert_int_eq(back, c);
                close(f.fds[i]);
                close(p[i][0]);
                close(p[i][1]);
        }
        proto_reader_deinit(&r);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_fd_pass_refuses_five)
{
        int sv[2], fds[PROTO_MAX_FDS + 1];
        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, PROTO_MAX_FDS + 1, 2, 3);
        char c;

        mk_socketpair(sv);
        for (int i = 0; i <= PROTO_MAX_FDS; i++)
                fds[i] = sv[0];
        ck_assert_int_eq(proto_send_frame(sv[0], &h, "{}", fds), -ETOOMANYREFS);
        /* nothing went out */
        ck_assert_int_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), -1);
        ck_assert_int_eq(errno, EAGAIN);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* A peer that attaches more fds than the control buffer takes: the read fails with -EBADMSG
 * (MSG_CTRUNC) and no fd leaks beyond the reader, which closes what it queued. */
START_TEST(test_fd_pass_truncated_control)
{
        enum { N = PROTO_MAX_FDS + 2 };
        union {
                char buf[CMSG_SPACE(sizeof(int) * N)];
                struct cmsghdr align;
        } ctl;
        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, 0, 2, 1);
        uint8_t frame[PROTO_HEADER_SIZE + 2];
        struct iovec iov = { frame, sizeof(frame) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                              .msg_controllen = CMSG_SPACE(sizeof(int) * N) };
        struct proto_reader r;
        int sv[2], p[2], fds[N];

        proto_header_encode(&h, frame);
        memcpy(frame + PROTO_HEADER_SIZE, "{}", 2);
        mk_socketpair(sv);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        for (int i = 0; i < N; i++)
                fds[i] = p[1];
        memset(&ctl, 0, sizeof(ctl));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * N);
        memcpy(CMSG_DATA(c), fds, sizeof(fds));
        ck_assert_int_eq(sendmsg(sv[0], &msg, 0), (ssize_t)sizeof(frame));
        close(p[1]);

        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_fill(&r, sv[1]), -EBADMSG);
        ck_assert_int_le(r.nfds, PROTO_MAX_FDS);
        proto_reader_deinit(&r);
        /* every copy of the write end is closed now: the read end sees EOF */
        char b;
        ck_assert_int_eq(read(p[0], &b, 1), 0);
        close(p[0]);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* fds queued but never claimed by a frame are closed by proto_reader_deinit. */
START_TEST(test_fd_unclaimed_closed_by_deinit)
{
        struct proto_header h = mkhdr(PROTO_KIND_REQUEST, 1, 2, 1);
        struct proto_reader r;
        int sv[2], p[2];
        ssize_t n;

        mk_socketpair(sv);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        /* a whole frame with one fd arrives, but nobody takes the frame */
        ck_assert_int_eq(proto_send_frame(sv[0], &h, "{}", &p[1]), 0);
        close(p[1]);
        proto_reader_init(&r);
        do
                n = proto_reader_fill(&r, sv[1]);
        while (n == -EAGAIN);
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(r.nfds, 1);
        ck_assert(fd_is_open(r.fds[0]));
        proto_reader_deinit(&r); /* frame never taken */
        char b;
        ck_assert_int_eq(read(p[0], &b, 1), 0);
        close(p[0]);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_fill_eof_and_eagain)
{
        struct proto_reader r;
        int sv[2];

        mk_socketpair(sv);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_fill(&r, sv[1]), -EAGAIN);
        close(sv[0]);
        ck_assert_int_eq(proto_reader_fill(&r, sv[1]), 0);
        proto_reader_deinit(&r);
        close(sv[1]);
}
END_TEST

struct big_send {
        int sock;
        int fd;
        uint8_t *body;
        uint32_t len;
        int rc;
};

static void *big_sender(void *arg)
{
        struct big_send *b = arg;
        struct proto_header h = mkhdr(PROTO_KIND_SUBMIT, 1, b->len, 0);

        b->rc = proto_send_frame(b->sock, &h, b->body, &b->fd);
        return NULL;
}

/* A frame much larger than the socket buffer: several partial sendmsg/recvmsg calls, with the
 * fd attached to the first byte only. */
START_TEST(test_fd_pass_large_frame)
{
        struct big_send b = { .len = 4u << 20 };
        struct proto_reader r;
        struct proto_frame f;
        pthread_t th;
        int sv[2], p[2];

        mk_socketpair(sv);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        b.sock = sv[0];
        b.fd = p[1];
        b.body = malloc(b.len);
        ck_assert_ptr_nonnull(b.body);
        for (uint32_t i = 0; i < b.len; i++)
                b.body[i] = (uint8_t)(i ^ (i >> 9));
        ck_assert_int_eq(pthread_create(&th, NULL, big_sender, &b), 0);
        proto_reader_init(&r);
        ck_assert_int_eq(fill_until_frame(&r, sv[1], &f), 1);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_int_eq(b.rc, 0);
        ck_assert_uint_eq(f.hdr.body_len, b.len);
        ck_assert_int_eq(memcmp(f.body, b.body, b.len), 0);
        ck_assert_int_ge(f.fds[0], 0);
        ck_assert_int_eq(write(f.fds[0], "z", 1), 1);
        char c = 0;
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        ck_assert_int_eq(c, 'z');
        close(f.fds[0]);
        proto_reader_deinit(&r);
        close(p[0]);
        close(p[1]);
        close(sv[0]);
        close(sv[1]);
        free(b.body);
}
END_TEST

/* ---- writer ---- */

START_TEST(test_writer_append_flush)
{
        struct proto_writer w;
        struct proto_reader r;
        struct proto_frame f;
        int sv[2];

        mk_socketpair(sv);
        proto_writer_init(&w);
        for (int i = 0; i < 3; i++) {
                char body[32];
                int n = snprintf(body, sizeof(body), "{\"n\":%d}", i);
                struct proto_header h = mkhdr(PROTO_KIND_REPLY, 0, (uint32_t)n, 10 + (uint64_t)i);
                ck_assert_int_eq(proto_writer_append(&w, &h, body), 0);
        }
        struct proto_header h0 = mkhdr(PROTO_KIND_NOTIFY, 0, 0, 0);
        ck_assert_int_eq(proto_writer_append(&w, &h0, NULL), 0); /* empty body */
        ck_assert_int_eq(proto_writer_flush(&w, sv[0]), 0);
        ck_assert_uint_eq(w.len, 0);
        ck_assert_int_eq(proto_writer_flush(&w, sv[0]), 0); /* nothing pending */

        proto_reader_init(&r);
        for (int i = 0; i < 3; i++) {
                char body[32];
                int n = snprintf(body, sizeof(body), "{\"n\":%d}", i);
                ck_assert_int_eq(fill_until_frame(&r, sv[1], &f), 1);
                ck_assert_uint_eq(f.hdr.kind, PROTO_KIND_REPLY);
                ck_assert_uint_eq(f.hdr.request_id, 10 + (uint64_t)i);
                ck_assert_uint_eq(f.hdr.body_len, (unsigned)n);
                ck_assert_int_eq(memcmp(f.body, body, (size_t)n), 0);
        }
        ck_assert_int_eq(fill_until_frame(&r, sv[1], &f), 1);
        ck_assert_uint_eq(f.hdr.kind, PROTO_KIND_NOTIFY);
        ck_assert_uint_eq(f.hdr.body_len, 0);
        proto_reader_deinit(&r);
        proto_writer_deinit(&w);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* More output than the socket holds: flush reports what is pending and never blocks; the
 * rest goes out once the peer reads, in order, intact. */
START_TEST(test_writer_backpressure)
{
        enum { NFRAMES = 200, BODY = 9000 };
        struct proto_writer w;
        struct proto_reader r;
        struct proto_frame f;
        uint8_t *body = malloc(BODY);
        int sv[2], sz = 4096;
        unsigned got = 0;
        ssize_t left;

        ck_assert_ptr_nonnull(body);
        mk_socketpair(sv);
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        proto_writer_init(&w);
        for (unsigned i = 0; i < NFRAMES; i++) {
                memset(body, (int)(i & 0xff), BODY);
                struct proto_header h = mkhdr(PROTO_KIND_SUBMIT, 0, BODY, i);
                ck_assert_int_eq(proto_writer_append(&w, &h, body), 0);
                if (i % 17 == 0) { /* interleave flushes with appends (compaction) */
                        left = proto_writer_flush(&w, sv[0]);
                        ck_assert_int_ge(left, 0);
                }
        }
        left = proto_writer_flush(&w, sv[0]);
        ck_assert_int_gt(left, 0);
        ck_assert_uint_eq((size_t)left, w.len);

        proto_reader_init(&r);
        while (got < NFRAMES) {
                int e = proto_reader_next(&r, &f);
                ck_assert_int_ge(e, 0);
                if (e == 1) {
                        if (f.hdr.request_id != got || f.hdr.body_len != BODY)
                                ck_abort_msg("frame %u out of order", got);
                        for (unsigned k = 0; k < BODY; k++)
                                if (f.body[k] != (uint8_t)(got & 0xff))
                                        ck_abort_msg("frame %u corrupted at %u", got, k);
                        got++;
                        continue;
                }
                ssize_t n = proto_reader_fill(&r, sv[1]);
                ck_assert(n > 0 || n == -EAGAIN);
                left = proto_writer_flush(&w, sv[0]);
                ck_assert_int_ge(left, 0);
        }
        ck_assert_uint_eq(w.len, 0);
        proto_reader_deinit(&r);
        proto_writer_deinit(&w);
        close(sv[0]);
        close(sv[1]);
        free(body);
}
END_TEST

START_TEST(test_writer_peer_closed)
{
        struct proto_writer w;
        struct proto_header h = mkhdr(PROTO_KIND_REPLY, 0, 2, 1);
        int sv[2];

        mk_socketpair(sv);
        close(sv[1]);
        proto_writer_init(&w);
        ck_assert_int_eq(proto_writer_append(&w, &h, "{}"), 0);
        /* MSG_NOSIGNAL: an error, not SIGPIPE */
        ck_assert_int_eq(proto_writer_flush(&w, sv[0]), -EPIPE);
        proto_writer_deinit(&w);
        close(sv[0]);
}
END_TEST

/* ---- limits and frames read in parts (npud's admission and SUBMIT streaming) ---- */

START_TEST(test_reader_max_body)
{
        static char body[101];
        struct proto_reader r;
        struct proto_frame f;
        size_t len;
        uint8_t *fr;

        memset(body, ' ', sizeof(body));
        proto_reader_init(&r);
        r.max_body = 100;
        fr = mkframe(PROTO_KIND_REQUEST, 0, body, 100, 1, &len);
        ck_assert_int_eq(proto_reader_feed(&r, fr, len), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 1);
        free(fr);
        /* over the reader's limit: refused on the header alone, before the body arrives */
        fr = mkframe(PROTO_KIND_SUBMIT, 0, body, 101, 2, &len);
        ck_assert_int_eq(proto_reader_feed(&r, fr, PROTO_HEADER_SIZE), 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), -EMSGSIZE);
        struct proto_header h;
        ck_assert_int_eq(proto_reader_peek_header(&r, &h), -EMSGSIZE);
        proto_reader_deinit(&r);
        free(fr);
}
END_TEST

START_TEST(test_reader_body_in_parts)
{
        uint8_t body[1000];
        static const char ping[] = "{\"method\":\"ping\"}";
        struct proto_reader r;
        struct proto_frame f;
        struct proto_header h;
        size_t len1, len2, got = 0;
        const uint8_t *p;

        for (size_t i = 0; i < sizeof(body); i++)
                body[i] = (uint8_t)(i * 13);
        uint8_t *a = mkframe(PROTO_KIND_SUBMIT, 0, body, sizeof(body), 1, &len1);
        uint8_t *b = mkframe(PROTO_KIND_REQUEST, 0, ping, sizeof(ping) - 1, 2, &len2);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_peek_header(&r, &h), 0);
        ck_assert_int_eq(proto_reader_feed(&r, a, 300), 0);
        ck_assert_int_eq(proto_reader_peek_header(&r, &h), 1);
        ck_assert_uint_eq(h.body_len, sizeof(body));
        ck_assert_int_eq(proto_reader_begin_body(&r, &h), 0);
        /* nothing else is reported while the body is in progress */
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert(!proto_reader_has_frame(&r));
        ck_assert_uint_eq(proto_reader_body(&r, &p), 300 - PROTO_HEADER_SIZE);
        ck_assert_int_eq(memcmp(p, body, 100), 0);
        ck_assert_int_eq(proto_reader_body_consume(&r, 100), 0);
        got = 100;
        /* the rest of the body and the next frame in one go */
        ck_assert_int_eq(proto_reader_feed(&r, a + 300, len1 - 300), 0);
        ck_assert_int_eq(proto_reader_feed(&r, b, len2), 0);
        size_t n = proto_reader_body(&r, &p);
        ck_assert_uint_eq(n, sizeof(body) - got); /* never past the body */
        ck_assert_int_eq(memcmp(p, body + got, n), 0);
        ck_assert_int_eq(proto_reader_body_consume(&r, n + 1), -EINVAL);
        ck_assert_int_eq(proto_reader_body_consume(&r, n), 0);
        ck_assert_uint_eq(r.body_left, 0);
        ck_assert_int_eq(proto_reader_next(&r, &f), 1);
        ck_assert_uint_eq(f.hdr.request_id, 2);
        ck_assert_int_eq(memcmp(f.body, ping, sizeof(ping) - 1), 0);
        /* an empty body ends at once */
        uint8_t *e = mkframe(PROTO_KIND_SUBMIT, 0, NULL, 0, 3, &len1);
        ck_assert_int_eq(proto_reader_feed(&r, e, len1), 0);
        ck_assert_int_eq(proto_reader_peek_header(&r, &h), 1);
        ck_assert_int_eq(proto_reader_begin_body(&r, &h), 0);
        ck_assert_uint_eq(r.body_left, 0);
        proto_reader_deinit(&r);
        free(a);
        free(b);
        free(e);
}
END_TEST

START_TEST(test_fds_on_frame_declaring_none)
{
        static const char body[] = "{\"method\":\"ping\"}";
        struct proto_reader r;
        struct proto_frame f;
        int sv[2], m = memfd_create("t", MFD_CLOEXEC);
        size_t len;
        uint8_t *fr = mkframe(PROTO_KIND_REQUEST, 0, body, sizeof(body) - 1, 1, &len);
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } ctl;
        struct iovec iov = { .iov_base = fr, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                              .msg_controllen = sizeof(ctl.b) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

        mk_socketpair(sv);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &m, sizeof(int));
        ck_assert_int_eq(sendmsg(sv[0], &msg, 0), (ssize_t)len);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_fill(&r, sv[1]), (ssize_t)len);
        /* the only frame of that read declares no fds: nothing can claim them, now */
        ck_assert_int_eq(proto_reader_next(&r, &f), -EBADMSG);
        proto_reader_deinit(&r);
        close(sv[0]);
        close(sv[1]);
        close(m);
        free(fr);
}
END_TEST

START_TEST(test_reader_gives_memory_back)
{
        size_t len;
        uint8_t *body = calloc(1, PROTO_MAX_JSON_BODY);
        uint8_t *fr = mkframe(PROTO_KIND_REQUEST, 0, body, PROTO_MAX_JSON_BODY, 1, &len);
        struct proto_reader r;
        struct proto_frame f;
        int sv[2];

        mk_socketpair(sv);
        proto_reader_init(&r);
        ck_assert_int_eq(proto_reader_feed(&r, fr, len), 0);
        ck_assert_uint_ge(proto_reader_footprint(&r), len);
        ck_assert_int_eq(proto_reader_next(&r, &f), 1);
        /* the next call (here: a read that finds nothing) releases the big buffer */
        ck_assert_int_eq(proto_reader_fill(&r, sv[1]), -EAGAIN);
        ck_assert_uint_le(proto_reader_footprint(&r), 65536);
        ck_assert_int_eq(proto_reader_next(&r, &f), 0);
        ck_assert_uint_eq(proto_reader_footprint(&r), 0);
        proto_reader_deinit(&r);
        close(sv[0]);
        close(sv[1]);
        free(fr);
        free(body);
}
END_TEST

static Suite *frame_suite(void)
{
        Suite *s = suite_create("frame");
        TCase *tc = tcase_create("header");

        tcase_add_test(tc, test_header_roundtrip);
        tcase_add_test(tc, test_header_encode_clears_reserved);
        tcase_add_test(tc, test_header_bad_magic);
        tcase_add_test(tc, test_header_nonzero_flags);
        tcase_add_test(tc, test_header_nonzero_reserved);
        tcase_add_test(tc, test_header_bad_version);
        tcase_add_test(tc, test_header_bad_kind);
        tcase_add_test(tc, test_completion_roundtrip);
        tcase_add_test(tc, test_header_too_many_fds);
        tcase_add_test(tc, test_header_body_limits);
        suite_add_tcase(s, tc);

        tc = tcase_create("reader");
        tcase_add_test(tc, test_reader_byte_by_byte);
        tcase_add_test(tc, test_reader_several_frames_one_feed);
        tcase_add_test(tc, test_reader_truncated);
        tcase_add_test(tc, test_reader_bad_header_is_error);
        tcase_add_test(tc, test_reader_missing_fds);
        tcase_add_test(tc, test_reader_feed_limits);
        tcase_add_test(tc, test_reader_stream_of_frames);
        tcase_add_test(tc, test_reader_large_submit);
        suite_add_tcase(s, tc);

        tc = tcase_create("fds");
        tcase_add_test(tc, test_fd_pass_memfd);
        tcase_add_test(tc, test_fd_pass_pipe_and_max);
        tcase_add_test(tc, test_fd_pass_refuses_five);
        tcase_add_test(tc, test_fd_pass_truncated_control);
        tcase_add_test(tc, test_fd_unclaimed_closed_by_deinit);
        tcase_add_test(tc, test_fill_eof_and_eagain);
        tcase_add_test(tc, test_fd_pass_large_frame);
        suite_add_tcase(s, tc);

        tc = tcase_create("writer");
        tcase_add_test(tc, test_writer_append_flush);
        tcase_add_test(tc, test_writer_backpressure);
        tcase_add_test(tc, test_writer_peer_closed);
        tcase_add_test(tc, test_reader_max_body);
        tcase_add_test(tc, test_reader_body_in_parts);
        tcase_add_test(tc, test_fds_on_frame_declaring_none);
        tcase_add_test(tc, test_reader_gives_memory_back);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(frame_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

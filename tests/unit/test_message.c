/* Unit tests of the message layer: JSON requests, replies and notifications (proto/message.c),
 * error-code names, and the binary SUBMIT task records (proto/submit.c): round trips of every
 * record type, the documented byte layout, and every rejection of proto_rec_decode. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/dtype.h"
#include "proto/errors.h"
#include "proto/message.h"
#include "proto/submit.h"

/* ---- JSON helpers ---- */

/* Encode v compactly and parse it back, as a frame body would travel. Steals v. */
static json_t *through_wire(json_t *v)
{
        char err[256];
        size_t len = 0;
        char *text;
        json_t *back;

        ck_assert_ptr_nonnull(v);
        text = proto_json_dump(v, &len);
        json_decref(v);
        ck_assert_ptr_nonnull(text);
        ck_assert_uint_eq(len, strlen(text));
        ck_assert_ptr_null(strchr(text, '\n')); /* compact */
        back = proto_json_parse(text, len, err, sizeof(err));
        if (!back)
                ck_abort_msg("reparse failed: %s (%s)", err, text);
        free(text);
        return back;
}

static json_t *parse_text(const char *text)
{
        char err[256];
        json_t *v = proto_json_parse(text, strlen(text), err, sizeof(err));
        if (!v)
                ck_abort_msg("parse of %s failed: %s", text, err);
        return v;
}

static void expect_request_rejected(const char *text)
{
        json_t *body = parse_text(text);
        const char *method = (const char *)0x1;
        json_t *params = (json_t *)0x1;
        char err[256] = "";

        ck_assert_int_eq(proto_request_parse(body, &method, &params, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(err[0] != 0, "no message for %s", text);
        /* outputs untouched on failure */
        ck_assert_ptr_eq(method, (const char *)0x1);
        ck_assert_ptr_eq(params, (json_t *)0x1);
        json_decref(body);
}

static void expect_reply_rejected(const char *text)
{
        json_t *body = parse_text(text);
        json_t *result = NULL;
        char err[256] = "";

        ck_assert_msg(proto_reply_parse(body, &result, err, sizeof(err)) == -EBADMSG,
                      "reply accepted: %s", text);
        json_decref(body);
}

static void expect_json_rejected(const void *body, size_t len)
{
        char err[256] = "";
        json_t *v = proto_json_parse(body, len, err, sizeof(err));

        if (v) {
                json_decref(v);
                ck_abort_msg("accepted %.*s", (int)len, (const char *)body);
        }
        ck_assert_msg(strstr(err, "not valid JSON") != NULL, "message: %s", err);
}

/* ---- requests ---- */

START_TEST(test_request_roundtrip)
{
        const char *method = NULL;
        json_t *params = NULL;
        char err[256];
        json_t *body = through_wire(proto_request_new(
                "mem_alloc", json_pack("{s:i, s:I}", "device", 1, "size", (json_int_t)1 << 40)));

        ck_assert_int_eq(proto_request_parse(body, &method, &params, err, sizeof(err)), 0);
        ck_assert_str_eq(method, "mem_alloc");
        ck_assert(json_is_object(params));
        ck_assert_uint_eq(json_object_size(params), 2);
        ck_assert_int_eq(json_integer_value(json_object_get(params, "device")), 1);
        ck_assert(json_integer_value(json_object_get(params, "size")) == (json_int_t)1 << 40);
        json_decref(body);

        /* NULL params become {} */
        body = through_wire(proto_request_new("ping", NULL));
        ck_assert_int_eq(proto_request_parse(body, &method, &params, err, sizeof(err)), 0);
        ck_assert_str_eq(method, "ping");
        ck_assert(json_is_object(params));
        ck_assert_uint_eq(json_object_size(params), 0);
        json_decref(body);

        /* params may be omitted on the wire: *ret_params is then NULL */
        body = parse_text("{\"method\":\"synchronize\"}");
        params = (json_t *)0x1;
        ck_assert_int_eq(proto_request_parse(body, &method, &params, err, sizeof(err)), 0);
        ck_assert_str_eq(method, "synchronize");
        ck_assert_ptr_null(params);
        json_decref(body);

        /* key order does not matter */
        body = parse_text("{\"params\":{\"stream\":3},\"method\":\"stream_synchronize\"}");
        ck_assert_int_eq(proto_request_parse(body, &method, &params, err, sizeof(err)), 0);
        ck_assert_str_eq(method, "stream_synchronize");
        ck_assert_int_eq(json_integer_value(json_object_get(params, "stream")), 3);
        json_decref(body);
}
END_TEST

START_TEST(test_request_parse_rejects)
{
        const char *method;
        json_t *params;
        char err[256];
        json_t *v;

        /* non-object bodies (proto_json_parse only yields objects and arrays, so build
         * the scalars directly) */
        expect_request_rejected("[]");
        expect_request_rejected("[\"hello\", {}]");
        v = json_string("hello");
        ck_assert_int_eq(proto_request_parse(v, &method, &params, err, sizeof(err)), -EBADMSG);
        json_decref(v);
        v = json_integer(1);
        ck_assert_int_eq(proto_request_parse(v, &method, &params, err, sizeof(err)), -EBADMSG);
        json_decref(v);
        ck_assert_int_eq(proto_request_parse(NULL, &method, &params, err, sizeof(err)), -EBADMSG);

        /* method missing or not a string */
        expect_request_rejected("{}");
        expect_request_rejected("{\"params\":{}}");
        expect_request_rejected("{\"method\":1}");
        expect_request_rejected("{\"method\":null}");
        expect_request_rejected("{\"method\":true}");
        expect_request_rejected("{\"method\":[\"ping\"]}");
        expect_request_rejected("{\"method\":{}}");
        expect_request_rejected("{\"Method\":\"ping\"}");

        /* params not an object */
        expect_request_rejected("{\"method\":\"ping\",\"params\":null}");
        expect_request_rejected("{\"method\":\"ping\",\"params\":[]}");
        expect_request_rejected("{\"method\":\"ping\",\"params\":\"x\"}");
        expect_request_rejected("{\"method\":\"ping\",\"params\":0}");
        expect_request_rejected("{\"method\":\"ping\",\"params\":false}");

        /* extra keys */
        expect_request_rejected("{\"method\":\"ping\",\"id\":1}");
        expect_request_rejected("{\"method\":\"ping\",\"params\":{},\"extra\":1}");
        expect_request_rejected("{\"method\":\"ping\",\"param\":{}}");
}
END_TEST

/* ---- replies ---- */

START_TEST(test_reply_result_roundtrip)
{
        json_t *result = NULL;
        char err[64] = "untouched";
        json_t *body = through_wire(proto_reply_result(json_pack("{s:I}", "buffer", (json_int_t)0x100001)));

        ck_assert_int_eq(proto_reply_parse(body, &result, err, sizeof(err)), 0);
        ck_assert(json_is_object(result));
        ck_assert_int_eq(json_integer_value(json_object_get(result, "buffer")), 0x100001);
        ck_assert_ptr_eq(result, json_object_get(body, "result")); /* borrowed */
        json_decref(body);

        body = through_wire(proto_reply_result(NULL));
        ck_assert_int_eq(proto_reply_parse(body, &result, err, sizeof(err)), 0);
        ck_assert(json_is_object(result));
        ck_assert_uint_eq(json_object_size(result), 0);
        json_decref(body);

        /* a non-object result is passed through */
        body = parse_text("{\"result\":[1,2]}");
        ck_assert_int_eq(proto_reply_parse(body, &result, err, sizeof(err)), 0);
        ck_assert(json_is_array(result));
        json_decref(body);
}
END_TEST

START_TEST(test_reply_error_roundtrip)
{
        for (int code = PROTO_E_INVALID; code < PROTO_E_COUNT; code++) {
                char msg[64], err[256] = "";
                json_t *result = (json_t *)0x1, *e;
                snprintf(msg, sizeof(msg), "failure number %d: \"quoted\" \xc3\xa9", code);
                json_t *body = through_wire(proto_reply_error(code, msg));

                e = json_object_get(body, "error");
                ck_assert(json_is_object(e));
                ck_assert_uint_eq(json_object_size(body), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(e, "code")), code);
                ck_assert_str_eq(json_string_value(json_object_get(e, "name")), proto_error_name(code));
                ck_assert_str_eq(json_string_value(json_object_get(e, "message")), msg);
                ck_assert_int_eq(proto_reply_parse(body, &result, err, sizeof(err)), code);
                ck_assert_str_eq(err, msg);
                ck_assert_ptr_eq(result, (json_t *)0x1);
                json_decref(body);
        }
}
END_TEST

START_TEST(test_reply_error_details)
{
        json_t *result;
        char err[8];
        char big[256];
        json_t *body;

        /* NULL message is sent as "" */
        body = through_wire(proto_reply_error(PROTO_E_BUSY, NULL));
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(body, "error"), "message")), "");
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(body, "error"), "name")), "busy");
        ck_assert_int_eq(proto_reply_parse(body, &result, big, sizeof(big)), PROTO_E_BUSY);
        ck_assert_str_eq(big, "");
        json_decref(body);

        /* long message truncated to the caller's buffer, NUL terminated */
        body = through_wire(proto_reply_error(PROTO_E_SHAPE, "a rather long message"));
        memset(err, 'x', sizeof(err));
        ck_assert_int_eq(proto_reply_parse(body, &result, err, sizeof(err)), PROTO_E_SHAPE);
        ck_assert_str_eq(err, "a rathe");
        json_decref(body);

        /* the "task" member added to synchronize errors does not disturb parsing */
        body = parse_text("{\"error\":{\"code\":13,\"name\":\"exec\",\"message\":\"task 7: boom\","
                          "\"task\":7}}");
        ck_assert_int_eq(proto_reply_parse(body, &result, big, sizeof(big)), PROTO_E_EXEC);
        ck_assert_str_eq(big, "task 7: boom");
        json_decref(body);

        /* name is optional for the parser; the code is what counts */
        body = parse_text("{\"error\":{\"code\":1000,\"message\":\"m\"}}");
        ck_assert_int_eq(proto_reply_parse(body, &result, big, sizeof(big)), 1000);
        json_decref(body);

        /* an unknown code still gets a name */
        body = proto_reply_error(999, "m");
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(body, "error"), "name")),
                         "unknown");
        json_decref(body);
}
END_TEST

START_TEST(test_reply_parse_rejects)
{
        json_t *result;
        char err[64];
        json_t *v;

        expect_reply_rejected("[]");
        expect_reply_rejected("{}");
        expect_reply_rejected("{\"results\":{}}");
        expect_reply_rejected("{\"error\":null}");
        expect_reply_rejected("{\"error\":\"bad\"}");
        expect_reply_rejected("{\"error\":[1,\"m\"]}");
        expect_reply_rejected("{\"error\":{}}");
        expect_reply_rejected("{\"error\":{\"code\":1}}");
        expect_reply_rejected("{\"error\":{\"message\":\"m\"}}");
        expect_reply_rejected("{\"error\":{\"code\":\"1\",\"message\":\"m\"}}");
        expect_reply_rejected("{\"error\":{\"code\":1.5,\"message\":\"m\"}}");
        expect_reply_rejected("{\"error\":{\"code\":1,\"message\":2}}");
        expect_reply_rejected("{\"error\":{\"code\":1,\"message\":null}}");
        expect_reply_rejected("{\"error\":{\"code\":0,\"message\":\"ok?\"}}");
        expect_reply_rejected("{\"error\":{\"code\":-1,\"message\":\"m\"}}");
        expect_reply_rejected("{\"error\":{\"code\":1001,\"message\":\"m\"}}");
        expect_reply_rejected("{\"error\":{\"code\":4294967297,\"message\":\"m\"}}");

        v = json_string("x");
        ck_assert_int_eq(proto_reply_parse(v, &result, err, sizeof(err)), -EBADMSG);
        json_decref(v);
        ck_assert_int_eq(proto_reply_parse(NULL, &result, err, sizeof(err)), -EBADMSG);
}
END_TEST

START_TEST(test_notify)
{
        json_t *body = through_wire(proto_notify_new(
                "task-failed", json_pack("{s:i, s:i}", "stream", 3, "task", 12)));

        ck_assert_uint_eq(json_object_size(body), 2);
        ck_assert_str_eq(json_string_value(json_object_get(body, "event")), "task-failed");
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(body, "data"), "task")), 12);
        json_decref(body);
        body = proto_notify_new("x", NULL);
        ck_assert(json_is_object(json_object_get(body, "data")));
        json_decref(body);
}
END_TEST

/* ---- JSON bodies ---- */

START_TEST(test_json_parse)
{
        static const char *const bad[] = {
                "", " ", "not json", "{", "}", "{\"a\":}", "{'a':1}", "{\"a\":1,}",
                "{} x", "{}{}", "{} {}", "[] 1", "{}\x01",
                "42", "\"str\"", "true", "null",       /* scalars at the top level */
                "{\"a\":1,\"a\":2}",                 /* duplicate keys */
                "{\"a\":\"\\u0000\"}",               /* NUL inside a string */
                "{\"a\":\"\xff\xfe\"}",              /* invalid UTF-8 */
                "{\"a\":NaN}",
        };
        char err[256];
        json_t *v;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                expect_json_rejected(bad[i], strlen(bad[i]));
        /* an embedded NUL byte, inside and after the value */
        expect_json_rejected("{\"a\":1}\0", 8);
        expect_json_rejected("{\"a\0\":1}", 8);

        /* accepted: whitespace around, and the length bounds the text (no terminator) */
        v = proto_json_parse(" {\"a\":[1,2,{}]} \n\t", 18, err, sizeof(err));
        ck_assert_ptr_nonnull(v);
        json_decref(v);
        v = proto_json_parse("{}garbage", 2, err, sizeof(err));
        ck_assert_ptr_nonnull(v);
        ck_assert(json_is_object(v));
        json_decref(v);
        v = proto_json_parse("[1]", 3, err, sizeof(err));
        ck_assert_ptr_nonnull(v);
        ck_assert(json_is_array(v));
        json_decref(v);

        /* deeply nested input fails cleanly (no stack exhaustion) */
        enum { DEPTH = 100000 };
        char *deep = malloc(2 * DEPTH);
        ck_assert_ptr_nonnull(deep);
        memset(deep, '[', DEPTH);
        memset(deep + DEPTH, ']', DEPTH);
        v = proto_json_parse(deep, 2 * DEPTH, err, sizeof(err));
        ck_assert_ptr_null(v);
        free(deep);
}
END_TEST

START_TEST(test_json_dump)
{
        size_t len = 0;
        json_t *v = json_pack("{s:[i,i], s:s}", "a", 1, 2, "b", "c");
        char *s = proto_json_dump(v, &len);

        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(len, strlen(s));
        ck_assert_ptr_null(strchr(s, ' '));
        free(s);
        s = proto_json_dump(v, NULL);
        ck_assert_ptr_nonnull(s);
        free(s);
        json_decref(v);
}
END_TEST

/* proto_json_dump and proto_json_parse have fast paths for the common shapes and hand
 * everything else to jansson: on random values (escapes, bytes beyond ASCII, reals, the
 * extreme integers, nesting) and on randomly damaged texts, the results must be jansson's
 * byte for byte (dump) or value for value (parse), acceptance and rejection alike. */
static uint64_t json_rng = 88172645463325252ull;

static uint64_t json_rand(void)
{
        json_rng ^= json_rng << 13;
        json_rng ^= json_rng >> 7;
        json_rng ^= json_rng << 17;
        return json_rng;
}

static json_t *random_string(void)
{
        char buf[32];
        int n = (int)(json_rand() % 12);

        for (int i = 0; i < n; i++) {
                int k = (int)(json_rand() % 10);
                buf[i] = k < 6 ? (char)('a' + json_rand() % 26)
                       : k < 8 ? (char)(json_rand() % 0x21)
                       : k < 9 ? "\"\\/\x7f"[json_rand() % 4]
                               : (char)(0x80 + json_rand() % 0x40); /* often not UTF-8 */
        }
        if (json_rand() % 3 == 0) {
                memcpy(buf + n, "\xc3\xa9", 2);
                n += 2;
        }
        return json_stringn_nocheck(buf, (size_t)n);
}

static json_t *random_value(int depth)
{
        switch (json_rand() % (depth > 4 ? 6 : 8)) {
        case 0: return json_null();
        case 1: return json_true();
        case 2: return json_false();
        case 3: {
                int64_t v = (int64_t)json_rand();
                int m = (int)(json_rand() % 4);
                return json_integer(m == 0 ? v % 1000 : m == 1 ? INT64_MIN : v);
        }
        case 4: return json_rand() % 4 ? random_string() : json_real((double)(int64_t)json_rand() / 1e9);
        case 5: return random_string();
        case 6: {
                json_t *a = json_array();
                for (int i = (int)(json_rand() % 5); i > 0; i--)
                        json_array_append_new(a, random_value(depth + 1));
                return a;
        }
        default: {
                json_t *o = json_object();
                for (int i = (int)(json_rand() % 5); i > 0; i--) {
                        char key[8];
                        int kl = (int)(json_rand() % 6);
                        for (int j = 0; j < kl; j++)
                                key[j] = json_rand() % 5 ? (char)('a' + json_rand() % 26)
                                                         : (char)(1 + json_rand() % 0x7e);
                        key[kl] = 0;
                        json_object_set_new_nocheck(o, key, random_value(depth + 1));
                }
                return o;
        }
        }
}

START_TEST(test_json_same_as_jansson)
{
        char err[256];

        for (int it = 0; it < 20000; it++) {
                json_t *v = json_rand() % 2 ? json_array() : json_object();
                json_t *m = random_value(1);
                if (json_is_array(v))
                        json_array_append_new(v, m);
                else
                        json_object_set_new_nocheck(v, "k", m);
                size_t len = 0;
                char *ours = proto_json_dump(v, &len), *theirs = json_dumps(v, JSON_COMPACT);
                ck_assert_int_eq(!ours, !theirs);
                if (theirs) {
                        ck_assert_str_eq(ours, theirs);
                        ck_assert_uint_eq(len, strlen(theirs));
                        /* the text and a damaged copy parse as jansson parses them */
                        size_t n = strlen(theirs);
                        for (int damage = 0; damage < 2; damage++) {
                                if (damage && n)
                                        theirs[json_rand() % n] = "{}[],:\"\\0a-."[json_rand() % 12];
                                json_error_t jerr;
                                json_t *a = proto_json_parse(theirs, n, err, sizeof(err));
                                json_t *b = json_loadb(theirs, n, JSON_REJECT_DUPLICATES, &jerr);
                                ck_assert_int_eq(!a, !b);
                                ck_assert(!a || json_equal(a, b));
                                json_decref(a);
                                json_decref(b);
                        }
                }
                free(ours);
                free(theirs);
                json_decref(v);
        }
        /* integers at and past the int64 range, which jansson rejects */
        static const char *const edge[] = {
                "[9223372036854775807]", "[-9223372036854775808]", "[9223372036854775808]",
                "[-9223372036854775809]", "[99999999999999999999]", "[123456789012345678]",
                "[0123]", "[-0]", "[1e3]", "[truex]",
        };
        for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
                json_error_t jerr;
                json_t *a = proto_json_parse(edge[i], strlen(edge[i]), err, sizeof(err));
                json_t *b = json_loadb(edge[i], strlen(edge[i]), JSON_REJECT_DUPLICATES, &jerr);
                ck_assert_msg(!a == !b, "%s: accepted by one parser only", edge[i]);
                ck_assert(!a || json_equal(a, b));
                json_decref(a);
                json_decref(b);
        }
}
END_TEST

START_TEST(test_error_names)
{
        static const char *const names[PROTO_E_COUNT] = {
                "ok", "invalid", "bad-handle", "no-memory", "quota", "limit", "permission",
                "unsupported", "shape", "out-of-range", "protocol", "version", "device", "exec",
                "busy", "not-ready", "cancelled", "connection", "system",
        };

        ck_assert_int_eq(PROTO_E_COUNT, 19);
        for (int c = 0; c < PROTO_E_COUNT; c++) {
                ck_assert_ptr_nonnull(proto_error_name(c));
                ck_assert_str_eq(proto_error_name(c), names[c]);
                for (int d = 0; d < c; d++)
                        ck_assert_str_ne(proto_error_name(c), proto_error_name(d));
        }
        ck_assert_str_eq(proto_error_name(-1), "unknown");
        ck_assert_str_eq(proto_error_name(PROTO_E_COUNT), "unknown");
        ck_assert_str_eq(proto_error_name(1000), "unknown");
        ck_assert_str_eq(proto_error_name(INT32_MIN), "unknown");
        /* the numbers are part of the wire contract */
        ck_assert_int_eq(PROTO_E_INVALID, 1);
        ck_assert_int_eq(PROTO_E_PROTOCOL, 10);
        ck_assert_int_eq(PROTO_E_CANCELLED, 16);
        ck_assert_int_eq(PROTO_E_SYSTEM, 18);
}
END_TEST

/* ---- SUBMIT records ---- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void wr32(uint8_t *p, uint32_t v) { wr16(p, (uint16_t)v); wr16(p + 2, (uint16_t)(v >> 16)); }

/* Encode rec into a new buffer; checks size agreement. */
static uint8_t *rec_encode(const struct proto_rec *rec, size_t *ret_size)
{
        size_t size = proto_rec_size(rec);
        uint8_t *b;

        ck_assert_uint_gt(size, 0);
        ck_assert_uint_eq(size % 8, 0);
        b = malloc(size);
        ck_assert_ptr_nonnull(b);
        memset(b, 0xcc, size);
        ck_assert_uint_eq(proto_rec_encode(rec, b), size);
        ck_assert_uint_eq(rd32(b + 4), size);
        *ret_size = size;
        return b;
}

/* Decode exactly one record from b, which must be accepted whole. */
static void rec_decode_one(const uint8_t *b, size_t size, struct proto_rec *out)
{
        char err[256] = "";
        size_t pos = 0;
        int e = proto_rec_decode(b, size, &pos, out, err, sizeof(err));

        if (e != 1)
                ck_abort_msg("decode: %d %s", e, err);
        ck_assert_uint_eq(pos, size);
        ck_assert_int_eq(proto_rec_decode(b, size, &pos, out, err, sizeof(err)), 0);
}

/* Decode must fail with -EBADMSG, a message, and *pos untouched. */
static void rec_expect_bad(const uint8_t *b, size_t size, const char *what)
{
        struct proto_rec r;
        char err[256] = "";
        size_t pos = 0;
        int e = proto_rec_decode(b, size, &pos, &r, err, sizeof(err));

        ck_assert_msg(e == -EBADMSG, "%s: decode returned %d", what, e);
        ck_assert_msg(err[0] != 0, "%s: no message", what);
        ck_assert_msg(pos == 0, "%s: pos moved", what);
}

static struct proto_rec mk_copy(void)
{
        struct proto_rec r;

        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_COPY;
        r.seq = 0x0102030405060708ull;
        r.stream = 0x00300001u;
        r.copy.dst_kind = PROTO_MEM_BUFFER;
        r.copy.src_kind = PROTO_MEM_REGION;
        r.copy.dst = 0x00100002u;
        r.copy.src = 0x00200003u;
        r.copy.dst_off = 0x1000;
        r.copy.src_off = UINT64_MAX - 5;
        r.copy.len = 1ull << 33;
        return r;
}

static struct proto_rec mk_launch(int nin, int nout, int nattr)
{
        struct proto_rec r;

        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_LAUNCH;
        r.seq = 99;
        r.stream = 7;
        snprintf(r.launch.op, sizeof(r.launch.op), "MatMul");
        r.launch.nin = (uint8_t)nin;
        r.launch.nout = (uint8_t)nout;
        r.launch.nattr = (uint8_t)nattr;
        for (int i = 0; i < nin + nout; i++) {
                struct proto_rec_tensor *t = &r.launch.t[i];
                t->buf = 0x100000u + (uint32_t)i;
                t->dtype = i % 2 ? PROTO_DTYPE_FLOAT16 : PROTO_DTYPE_FLOAT32;
                t->ndim = (uint8_t)(i % (PROTO_REC_MAX_DIMS + 1));
                t->offset = 64u * (uint64_t)i;
                for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                        t->dims[d] = d < t->ndim ? (int64_t)(d + 2) * (i + 1) : 0;
        }
        if (nin + nout > 0)
                r.launch.t[0].dims[7] = -3; /* signed, even beyond ndim */
        for (int i = 0; i < nattr; i++) {
                struct proto_rec_attr *a = &r.launch.attr[i];
                snprintf(a->name, sizeof(a->name), "attr_%d", i);
                if (i % 2) {
                        a->type = 2;
                        a->f = i == 1 ? 0.25 : -1e300 * i;
                } else {
                        a->type = 1;
                        a->i = i == 0 ? INT64_MIN : -(int64_t)i * 1000;
                }
        }
        return r;
}

static void assert_launch_eq(const struct proto_rec *a, const struct proto_rec *b)
{
        ck_assert_uint_eq(a->type, b->type);
        ck_assert_uint_eq(a->seq, b->seq);
        ck_assert_uint_eq(a->stream, b->stream);
        ck_assert_str_eq(a->launch.op, b->launch.op);
        ck_assert_uint_eq(a->launch.nin, b->launch.nin);
        ck_assert_uint_eq(a->launch.nout, b->launch.nout);
        ck_assert_uint_eq(a->launch.nattr, b->launch.nattr);
        for (int i = 0; i < a->launch.nin + a->launch.nout; i++) {
                const struct proto_rec_tensor *x = &a->launch.t[i], *y = &b->launch.t[i];
                ck_assert_uint_eq(x->buf, y->buf);
                ck_assert_uint_eq(x->dtype, y->dtype);
                ck_assert_uint_eq(x->ndim, y->ndim);
                ck_assert_uint_eq(x->offset, y->offset);
                for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                        ck_assert_int_eq(x->dims[d], y->dims[d]);
        }
        for (int i = 0; i < a->launch.nattr; i++) {
                const struct proto_rec_attr *x = &a->launch.attr[i], *y = &b->launch.attr[i];
                ck_assert_str_eq(x->name, y->name);
                ck_assert_uint_eq(x->type, y->type);
                if (x->type == 2)
                        ck_assert(memcmp(&x->f, &y->f, sizeof(double)) == 0);
                else
                        ck_assert_int_eq(x->i, y->i);
        }
}

START_TEST(test_rec_copy)
{
        struct proto_rec r = mk_copy(), d;
        size_t size;
        uint8_t *b = rec_encode(&r, &size);
        const uint8_t *p = b + PROTO_REC_HEADER_SIZE;

        ck_assert_uint_eq(size, 64);
        /* header layout */
        ck_assert_uint_eq(rd16(b), PROTO_REC_COPY);
        ck_assert_uint_eq(rd16(b + 2), 0);
        ck_assert_uint_eq(rd64(b + 8), r.seq);
        ck_assert_uint_eq(rd32(b + 16), r.stream);
        ck_assert_uint_eq(rd32(b + 20), 0);
        /* payload layout */
        ck_assert_uint_eq(p[0], PROTO_MEM_BUFFER);
        ck_assert_uint_eq(p[1], PROTO_MEM_REGION);
        for (int i = 2; i < 8; i++)
                ck_assert_uint_eq(p[i], 0);
        ck_assert_uint_eq(rd32(p + 8), r.copy.dst);
        ck_assert_uint_eq(rd32(p + 12), r.copy.src);
        ck_assert_uint_eq(rd64(p + 16), r.copy.dst_off);
        ck_assert_uint_eq(rd64(p + 24), r.copy.src_off);
        ck_assert_uint_eq(rd64(p + 32), r.copy.len);

        rec_decode_one(b, size, &d);
        ck_assert_uint_eq(d.type, PROTO_REC_COPY);
        ck_assert_uint_eq(d.seq, r.seq);
        ck_assert_uint_eq(d.stream, r.stream);
        ck_assert_uint_eq(d.copy.dst_kind, r.copy.dst_kind);
        ck_assert_uint_eq(d.copy.src_kind, r.copy.src_kind);
        ck_assert_uint_eq(d.copy.dst, r.copy.dst);
        ck_assert_uint_eq(d.copy.src, r.copy.src);
        ck_assert_uint_eq(d.copy.dst_off, r.copy.dst_off);
        ck_assert_uint_eq(d.copy.src_off, r.copy.src_off);
        ck_assert_uint_eq(d.copy.len, r.copy.len);
        free(b);

        /* kinds are not interpreted by the decoder (the daemon rejects unknown ones) */
        r.copy.dst_kind = 7;
        b = rec_encode(&r, &size);
        rec_decode_one(b, size, &d);
        ck_assert_uint_eq(d.copy.dst_kind, 7);
        free(b);
}
END_TEST

START_TEST(test_rec_memset)
{
        struct proto_rec r, d;
        size_t size;
        uint8_t *b;

        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_MEMSET;
        r.seq = 5;
        r.stream = 0x00100001u;
        r.memset.buf = 0x00200004u;
        r.memset.value = 0xab;
        r.memset.off = 8;
        r.memset.len = 4096;
        b = rec_encode(&r, &size);
        ck_assert_uint_eq(size, 48);
        ck_assert_uint_eq(rd32(b + 24), r.memset.buf);
        ck_assert_uint_eq(b[28], 0xab);
        ck_assert_uint_eq(b[29] | b[30] | b[31], 0);
        ck_assert_uint_eq(rd64(b + 32), 8);
        ck_assert_uint_eq(rd64(b + 40), 4096);
        rec_decode_one(b, size, &d);
        ck_assert_uint_eq(d.type, PROTO_REC_MEMSET);
        ck_assert_uint_eq(d.seq, 5);
        ck_assert_uint_eq(d.stream, r.stream);
        ck_assert_uint_eq(d.memset.buf, r.memset.buf);
        ck_assert_uint_eq(d.memset.value, 0xab);
        ck_assert_uint_eq(d.memset.off, 8);
        ck_assert_uint_eq(d.memset.len, 4096);
        free(b);
}
END_TEST

START_TEST(test_rec_events)
{
        static const uint16_t types[] = { PROTO_REC_EVENT_RECORD, PROTO_REC_STREAM_WAIT };

        for (int i = 0; i < 2; i++) {
                struct proto_rec r, d;
                size_t size;
                uint8_t *b;

                memset(&r, 0, sizeof(r));
                r.type = types[i];
                r.seq = UINT64_MAX;
                r.stream = 3;
                r.event.event = 0xfff00001u;
                b = rec_encode(&r, &size);
                ck_assert_uint_eq(size, 32);
                ck_assert_uint_eq(rd32(b + 24), r.event.event);
                ck_assert_uint_eq(rd32(b + 28), 0);
                rec_decode_one(b, size, &d);
                ck_assert_uint_eq(d.type, types[i]);
                ck_assert_uint_eq(d.seq, UINT64_MAX);
                ck_assert_uint_eq(d.stream, 3);
                ck_assert_uint_eq(d.event.event, r.event.event);
                free(b);
        }
}
END_TEST

START_TEST(test_rec_launch)
{
        struct proto_rec r = mk_launch(2, 1, 3), d;
        size_t size;
        uint8_t *b = rec_encode(&r, &size);
        const uint8_t *p = b + PROTO_REC_HEADER_SIZE;

        ck_assert_uint_eq(size, 24 + 40 + 3 * 80 + 3 * 48);
        /* launch layout */
        ck_assert_str_eq((const char *)p, "MatMul");
        for (int i = 6; i < 32; i++)
                ck_assert_uint_eq(p[i], 0);
        ck_assert_uint_eq(p[32], 2);
        ck_assert_uint_eq(p[33], 1);
        ck_assert_uint_eq(p[34], 3);
        ck_assert_uint_eq(p[35], 0);
        ck_assert_uint_eq(rd32(p + 36), 0);
        const uint8_t *t1 = p + 40 + 80; /* second tensor */
        ck_assert_uint_eq(rd32(t1), r.launch.t[1].buf);
        ck_assert_uint_eq(t1[4], r.launch.t[1].dtype);
        ck_assert_uint_eq(t1[5], r.launch.t[1].ndim);
        ck_assert_uint_eq(rd16(t1 + 6), 0);
        ck_assert_uint_eq(rd64(t1 + 8), r.launch.t[1].offset);
        ck_assert_uint_eq(rd64(t1 + 16), (uint64_t)r.launch.t[1].dims[0]);
        ck_assert_uint_eq(rd64(p + 40 + 72), (uint64_t)-3); /* dims[7] of tensor 0 */
        const uint8_t *a1 = p + 40 + 3 * 80 + 48; /* second attribute: float 0.25 */
        double f;
        uint64_t bits = rd64(a1 + 40);
        memcpy(&f, &bits, 8);
        ck_assert_str_eq((const char *)a1, "attr_1");
        ck_assert_uint_eq(a1[32], 2);
        ck_assert(f == 0.25);
        ck_assert_uint_eq(rd64(p + 40 + 3 * 80 + 40), (uint64_t)INT64_MIN); /* attr_0 */

        rec_decode_one(b, size, &d);
        assert_launch_eq(&r, &d);
        ck_assert(d.launch.attr[1].f == 0.25);
        ck_assert(d.launch.attr[0].i == INT64_MIN);
        ck_assert(d.launch.attr[2].i == -2000);
        free(b);
}
END_TEST

START_TEST(test_rec_launch_extremes)
{
        /* no tensors, no attributes */
        struct proto_rec r = mk_launch(0, 0, 0), d;
        size_t size;
        uint8_t *b = rec_encode(&r, &size);

        ck_assert_uint_eq(size, 64);
        rec_decode_one(b, size, &d);
        assert_launch_eq(&r, &d);
        free(b);

        /* the maxima: 12 tensors, 8 attributes, a 31-character name */
        r = mk_launch(8, 4, PROTO_REC_MAX_ATTRS);
        memset(r.launch.op, 'A', PROTO_REC_OP_NAME - 1);
        r.launch.op[PROTO_REC_OP_NAME - 1] = 0;
        snprintf(r.launch.attr[7].name, PROTO_REC_OP_NAME, "%s", "abcdefghijklmnopqrstuvwxyz01234");
        b = rec_encode(&r, &size);
        ck_assert_uint_eq(size, 24 + 40 + 12 * 80 + 8 * 48);
        rec_decode_one(b, size, &d);
        assert_launch_eq(&r, &d);
        ck_assert_uint_eq(strlen(d.launch.op), PROTO_REC_OP_NAME - 1);
        free(b);

        r = mk_launch(0, 12, 1);
        b = rec_encode(&r, &size);
        rec_decode_one(b, size, &d);
        assert_launch_eq(&r, &d);
        free(b);

        /* float bits survive exactly (NaN payload, negative zero) */
        r = mk_launch(1, 1, 2);
        r.launch.attr[0].type = 2;
        r.launch.attr[0].f = -0.0;
        uint64_t nan_bits = 0x7ff8000000000123ull;
        r.launch.attr[1].type = 2;
        memcpy(&r.launch.attr[1].f, &nan_bits, 8);
        b = rec_encode(&r, &size);
        rec_decode_one(b, size, &d);
        ck_assert(signbit(d.launch.attr[0].f));
        ck_assert(memcmp(&d.launch.attr[1].f, &nan_bits, 8) == 0);
        free(b);
}
END_TEST

/* LAUNCH_ID: the registry id instead of the name, the rest as LAUNCH. */
START_TEST(test_rec_launch_id)
{
        struct proto_rec r = mk_launch(2, 1, 3), d;
        size_t size;
        uint8_t *b;
        const uint8_t *p;

        r.type = PROTO_REC_LAUNCH_ID;
        r.launch.op_id = 0xbeef;
        r.launch.op[0] = 0;
        b = rec_encode(&r, &size);
        p = b + PROTO_REC_HEADER_SIZE;
        ck_assert_uint_eq(size, 24 + 8 + 3 * 80 + 3 * 48);
        ck_assert_uint_eq(size, proto_launch_size(1, 3, 3));
        ck_assert_uint_eq(rd16(b), PROTO_REC_LAUNCH_ID);
        ck_assert_uint_eq(rd16(p), 0xbeef);
        ck_assert_uint_eq(p[2], 2);
        ck_assert_uint_eq(p[3], 1);
        ck_assert_uint_eq(p[4], 3);
        ck_assert_uint_eq(p[5] | p[6] | p[7], 0);
        ck_assert_uint_eq(rd32(p + 8 + 80), r.launch.t[1].buf); /* tensors follow at 8 */
        ck_assert_str_eq((const char *)(p + 8 + 3 * 80 + 48), "attr_1");

        /* whatever *ret held before, the decoded record says what the bytes say */
        memset(&d, 0x5a, sizeof(d));
        rec_decode_one(b, size, &d);
        assert_launch_eq(&r, &d);
        ck_assert_uint_eq(d.launch.op_id, 0xbeef);
        ck_assert(d.launch.attr[1].f == 0.25);
        ck_assert(d.launch.attr[1].i == 0);
        ck_assert(d.launch.attr[0].f == 0);
        free(b);

        /* the largest id, no tensors or attributes */
        r = mk_launch(0, 0, 0);
        r.type = PROTO_REC_LAUNCH_ID;
        r.launch.op_id = UINT16_MAX;
        b = rec_encode(&r, &size);
        ck_assert_uint_eq(size, 32);
        rec_decode_one(b, size, &d);
        ck_assert_uint_eq(d.launch.op_id, UINT16_MAX);
        ck_assert_str_eq(d.launch.op, "");
        free(b);
}
END_TEST

/* The direct encoder (libnpu's launch path) writes what proto_rec_encode writes. */
START_TEST(test_rec_launch_direct)
{
        for (int by_id = 0; by_id <= 1; by_id++) {
                struct proto_rec r = mk_launch(3, 2, 2);
                size_t size, dsize = proto_launch_size(by_id, 5, 2);
                uint8_t *b, *direct = malloc(dsize), *q;

                ck_assert_ptr_nonnull(direct);
                memset(direct, 0xcc, dsize);
                r.launch.t[0].dims[7] = 0; /* the direct encoder writes ndim extents only */
                if (by_id) {
                        r.type = PROTO_REC_LAUNCH_ID;
                        r.launch.op_id = 42;
                }
                b = rec_encode(&r, &size);
                ck_assert_uint_eq(size, dsize);
                q = proto_launch_begin(direct, dsize, r.seq, r.stream, by_id ? NULL : r.launch.op,
                                       r.launch.op_id, 3, 2, 2);
                for (int i = 0; i < 5; i++) {
                        const struct proto_rec_tensor *t = &r.launch.t[i];
                        q = proto_launch_put_tensor(q, t->buf, t->dtype, t->ndim, t->offset, t->dims);
                }
                for (int i = 0; i < 2; i++) {
                        const struct proto_rec_attr *a = &r.launch.attr[i];
                        q = proto_launch_put_attr(q, a->name, a->type, a->i, a->f);
                }
                ck_assert_uint_eq((size_t)(q - direct), dsize);
                ck_assert_msg(memcmp(b, direct, dsize) == 0, "by_id %d: bytes differ", by_id);
                free(b);
                free(direct);
        }
        ck_assert_uint_eq(proto_launch_size(1, PROTO_REC_MAX_TENSORS + 1, 0), 0);
        ck_assert_uint_eq(proto_launch_size(0, 0, PROTO_REC_MAX_ATTRS + 1), 0);
}
END_TEST

START_TEST(test_rec_launch_id_malformed)
{
        struct proto_rec r = mk_launch(1, 1, 1), d;
        char err[256];
        size_t size, pos;
        uint8_t *b;

        r.type = PROTO_REC_LAUNCH_ID;
        r.seq = 4242;
        r.launch.op_id = 3;
        b = rec_encode(&r, &size);
        /* reserved bytes after nattr */
        for (int i = 5; i < 8; i++) {
                b[PROTO_REC_HEADER_SIZE + i] = 1;
                pos = 0;
                ck_assert_int_eq(proto_rec_decode(b, size, &pos, &d, err, sizeof(err)), -EBADMSG);
                ck_assert_msg(strstr(err, "record 4242") && strstr(err, "reserved"), "%s", err);
                b[PROTO_REC_HEADER_SIZE + i] = 0;
        }
        /* counts that disagree with the length */
        b[PROTO_REC_HEADER_SIZE + 2] = 2;
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(b, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "record 4242") && strstr(err, "type 8"), "%s", err);
        ck_assert_uint_eq(pos, 0);
        b[PROTO_REC_HEADER_SIZE + 2] = 1;
        /* too many tensors, whatever the length */
        b[PROTO_REC_HEADER_SIZE + 2] = 7;
        b[PROTO_REC_HEADER_SIZE + 3] = 6;
        rec_expect_bad(b, size, "13 tensors by id");
        b[PROTO_REC_HEADER_SIZE + 2] = 1;
        b[PROTO_REC_HEADER_SIZE + 3] = 1;
        /* shorter than its fixed part */
        wr32(b + 4, PROTO_REC_HEADER_SIZE + 4);
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(b, size, &pos, &d, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "record 4242") && strstr(err, "too short"), "%s", err);
        wr32(b + 4, (uint32_t)size);
        /* a tensor's reserved bytes */
        b[PROTO_REC_HEADER_SIZE + 8 + 6] = 1;
        rec_expect_bad(b, size, "tensor reserved by id");
        b[PROTO_REC_HEADER_SIZE + 8 + 6] = 0;
        /* an attribute name */
        b[PROTO_REC_HEADER_SIZE + 8 + 2 * 80] = ' ';
        rec_expect_bad(b, size, "attribute name by id");
        b[PROTO_REC_HEADER_SIZE + 8 + 2 * 80] = 'a';
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(b, size, &pos, &d, err, sizeof(err)), 1);
        free(b);
}
END_TEST

/* A small record costs what it holds: decoding writes nothing past its members (the union
 * is sized for a graph run's 64 tensors). */
START_TEST(test_rec_decode_writes_only_members)
{
        static struct proto_rec d;
        struct proto_rec r = mk_copy();
        size_t size;
        uint8_t *b = rec_encode(&r, &size);
        const uint8_t *tail = (const uint8_t *)&d.launch.t[0];

        memset(&d, 0xa5, sizeof(d));
        rec_decode_one(b, size, &d);
        ck_assert_uint_eq(d.copy.len, r.copy.len);
        for (size_t i = 0; i < sizeof(d) - (size_t)(tail - (const uint8_t *)&d); i++)
                ck_assert_uint_eq(tail[i], 0xa5);
        free(b);

        /* a launch with one tensor leaves the second and the attributes alone */
        r = mk_launch(1, 0, 0);
        r.type = PROTO_REC_LAUNCH_ID;
        b = rec_encode(&r, &size);
        memset(&d, 0xa5, sizeof(d));
        rec_decode_one(b, size, &d);
        tail = (const uint8_t *)&d.launch.t[1];
        for (size_t i = 0; i < sizeof(d.launch.t[1]); i++)
                ck_assert_uint_eq(tail[i], 0xa5);
        free(b);
}
END_TEST

START_TEST(test_rec_size_rejects)
{
        struct proto_rec r;
        uint8_t out[8] = { 0x5a };

        memset(&r, 0, sizeof(r));
        r.type = 0;
        ck_assert_uint_eq(proto_rec_size(&r), 0);
        ck_assert_uint_eq(proto_rec_encode(&r, out), 0);
        ck_assert_uint_eq(out[0], 0x5a); /* nothing written */
        r.type = 11; /* first unassigned record type */
        ck_assert_uint_eq(proto_rec_size(&r), 0);
        r = mk_launch(6, 6, PROTO_REC_MAX_ATTRS);
        ck_assert_uint_gt(proto_rec_size(&r), 0);
        r.launch.nin = 7; /* 13 tensors */
        ck_assert_uint_eq(proto_rec_size(&r), 0);
        r.launch.nin = 0;
        r.launch.nout = 13;
        ck_assert_uint_eq(proto_rec_size(&r), 0);
        r.launch.nout = 1;
        r.launch.nattr = PROTO_REC_MAX_ATTRS + 1;
        ck_assert_uint_eq(proto_rec_size(&r), 0);
        ck_assert_uint_eq(proto_rec_encode(&r, out), 0);
        r.launch.nin = 255;
        r.launch.nout = 255;
        r.launch.nattr = 255;
        ck_assert_uint_eq(proto_rec_size(&r), 0);
}
END_TEST

START_TEST(test_rec_decode_truncated)
{
        struct proto_rec r = mk_copy(), d;
        size_t size;
        uint8_t *b = rec_encode(&r, &size);
        char err[128];
        size_t pos;

        /* truncated header: fewer than 24 bytes left */
        for (size_t n = 1; n < PROTO_REC_HEADER_SIZE; n++)
                rec_expect_bad(b, n, "truncated header");
        /* header complete, length beyond the buffer */
        for (size_t n = PROTO_REC_HEADER_SIZE; n < size; n += 8)
                rec_expect_bad(b, n, "length beyond buffer");
        rec_expect_bad(b, size - 1, "one byte short");
        wr32(b + 4, UINT32_MAX);
        rec_expect_bad(b, size, "huge length");
        /* length below the header size */
        wr32(b + 4, 0);
        rec_expect_bad(b, size, "length 0");
        wr32(b + 4, 16);
        rec_expect_bad(b, size, "length 16");
        free(b);

        /* empty and exhausted buffers are "end", not errors */
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(NULL, 0, &pos, &d, err, sizeof(err)), 0);
        uint8_t one[1] = { 0 };
        pos = 1;
        ck_assert_int_eq(proto_rec_decode(one, 1, &pos, &d, err, sizeof(err)), 0);
        pos = 5;
        ck_assert_int_eq(proto_rec_decode(one, 1, &pos, &d, err, sizeof(err)), 0);

        /* a good record followed by a fragment */
        b = rec_encode(&r, &size);
        uint8_t *two = calloc(1, size + 10);
        ck_assert_ptr_nonnull(two);
        memcpy(two, b, size);
        pos = 0;
        ck_assert_int_eq(proto_rec_decode(two, size + 10, &pos, &d, err, sizeof(err)), 1);
        ck_assert_uint_eq(pos, size);
        ck_assert_int_eq(proto_rec_decode(two, size + 10, &pos, &d, err, sizeof(err)), -EBADMSG);
        ck_assert_uint_eq(pos, size);
        free(two);
        free(b);
}
END_TEST

START_TEST(test_rec_decode_length_mismatch)
{
        uint8_t buf[2048];
        struct proto_rec r;
        size_t size;
        uint8_t *b;

        /* COPY/MEMSET/EVENT with the wrong length, the buffer big enough either way */
        static const uint16_t types[] = { PROTO_REC_COPY, PROTO_REC_MEMSET,
                                          PROTO_REC_EVENT_RECORD, PROTO_REC_STREAM_WAIT };
        for (int i = 0; i < 4; i++) {
                memset(&r, 0, sizeof(r));
                r.type = types[i];
                r.seq = 1;
                b = rec_encode(&r, &size);
                memset(buf, 0, sizeof(buf));
                memcpy(buf, b, size);
                wr32(buf + 4, (uint32_t)size + 8);
                rec_expect_bad(buf, sizeof(buf), "too long");
                wr32(buf + 4, (uint32_t)size - 8);
                rec_expect_bad(buf, sizeof(buf), "too short");
                wr32(buf + 4, PROTO_REC_HEADER_SIZE);
                rec_expect_bad(buf, sizeof(buf), "header only");
                wr32(buf + 4, (uint32_t)size + 1);
                rec_expect_bad(buf, sizeof(buf), "odd length");
                free(b);
        }

        /* unknown types, any length */
        memset(buf, 0, sizeof(buf));
        wr32(buf + 4, 64);
        wr16(buf, 0);
        rec_expect_bad(buf, sizeof(buf), "type 0");
        wr16(buf, 11);
        rec_expect_bad(buf, sizeof(buf), "type 11");
        wr16(buf, 0xffff);
        rec_expect_bad(buf, sizeof(buf), "type 0xffff");

        /* LAUNCH: length must match nin/nout/nattr */
        r = mk_launch(2, 1, 2);
        b = rec_encode(&r, &size);
        memset(buf, 0, sizeof(buf));
        memcpy(buf, b, size);
        wr32(buf + 4, (uint32_t)size + 48);
        rec_expect_bad(buf, sizeof(buf), "launch one attr too long");
        wr32(buf + 4, (uint32_t)size - 48);
        rec_expect_bad(buf, sizeof(buf), "launch one attr short");
        wr32(buf + 4, (uint32_t)size);
        buf[24 + 34] = 3; /* claims 3 attributes */
        rec_expect_bad(buf, sizeof(buf), "launch nattr mismatch");
        buf[24 + 34] = 2;
        buf[24 + 32] = 1; /* claims 1 input */
        rec_expect_bad(buf, sizeof(buf), "launch nin mismatch");
        buf[24 + 32] = 2;
        wr32(buf + 4, 56); /* shorter than the fixed launch part */
        rec_expect_bad(buf, sizeof(buf), "launch too short");
        wr32(buf + 4, (uint32_t)size);
        rec_decode_one(buf, size, &r); /* restored: fine again */
        free(b);
}
END_TEST

START_TEST(test_rec_decode_too_many)
{
        uint8_t *buf = calloc(1, 4096);
        size_t len;

        ck_assert_ptr_nonnull(buf);
        /* nin + nout = 13 with a length that matches 13 tensors */
        len = 24 + 40 + 13 * 80;
        wr16(buf, PROTO_REC_LAUNCH);
        wr32(buf + 4, (uint32_t)len);
        memcpy(buf + 24, "Add", 3);
        buf[24 + 32] = 7;
        buf[24 + 33] = 6;
        rec_expect_bad(buf, len, "13 tensors");
        buf[24 + 32] = 13;
        buf[24 + 33] = 0;
        rec_expect_bad(buf, len, "13 inputs");
        buf[24 + 32] = 255;
        buf[24 + 33] = 255;
        rec_expect_bad(buf, 4096, "510 tensors");
        /* 9 attributes */
        len = 24 + 40 + 9 * 48;
        wr32(buf + 4, (uint32_t)len);
        buf[24 + 32] = 0;
        buf[24 + 33] = 0;
        buf[24 + 34] = 9;
        for (int i = 0; i < 9; i++)
                buf[24 + 40 + 48 * i] = 'a';
        rec_expect_bad(buf, len, "9 attributes");
        free(buf);
}
END_TEST

/* Flip one reserved byte of an encoded record: decode must refuse it. */
static void flip_reserved(const struct proto_rec *r, size_t off, const char *what)
{
        size_t size;
        uint8_t *b = rec_encode(r, &size);

        ck_assert_uint_lt(off, size);
        ck_assert_uint_eq(b[off], 0);
        b[off] = 0x01;
        rec_expect_bad(b, size, what);
        b[off] = 0x80;
        rec_expect_bad(b, size, what);
        free(b);
}

START_TEST(test_rec_decode_reserved)
{
        struct proto_rec r = mk_copy();
        char what[64];

        /* record header: flags (2-3) and the trailing u32 (20-23) */
        for (size_t off = 2; off < 4; off++)
                flip_reserved(&r, off, "header flags");
        for (size_t off = 20; off < 24; off++)
                flip_reserved(&r, off, "header reserved");
        /* COPY: payload bytes 2-7 */
        for (size_t off = 24 + 2; off < 24 + 8; off++)
                flip_reserved(&r, off, "copy reserved");
        /* MEMSET: payload bytes 5-7 */
        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_MEMSET;
        for (size_t off = 24 + 5; off < 24 + 8; off++)
                flip_reserved(&r, off, "memset reserved");
        /* EVENT_RECORD / STREAM_WAIT: payload bytes 4-7 */
        memset(&r, 0, sizeof(r));
        r.type = PROTO_REC_EVENT_RECORD;
        for (size_t off = 24 + 4; off < 24 + 8; off++)
                flip_reserved(&r, off, "event reserved");
        r.type = PROTO_REC_STREAM_WAIT;
        for (size_t off = 24 + 4; off < 24 + 8; off++)
                flip_reserved(&r, off, "wait reserved");
        /* LAUNCH: byte 35, bytes 36-39, tensor bytes 6-7, attribute bytes 33-39 */
        r = mk_launch(2, 1, 2);
        for (size_t off = 24 + 35; off < 24 + 40; off++)
                flip_reserved(&r, off, "launch reserved");
        for (int t = 0; t < 3; t++)
                for (size_t k = 6; k < 8; k++) {
                        snprintf(what, sizeof(what), "tensor %d byte %zu", t, k);
                        flip_reserved(&r, 24 + 40 + 80 * (size_t)t + k, what);
                }
        for (int a = 0; a < 2; a++)
                for (size_t k = 33; k < 40; k++) {
                        snprintf(what, sizeof(what), "attr %d byte %zu", a, k);
                        flip_reserved(&r, 24 + 40 + 3 * 80 + 48 * (size_t)a + k, what);
                }
}
END_TEST

/* Write name bytes into the op field (off 24) or an attribute name field and expect rejection. */
static void bad_name(size_t field, const void *name, size_t n, const char *what)
{
        struct proto_rec r = mk_launch(1, 1, 1);
        size_t size;
        uint8_t *b = rec_encode(&r, &size);

        memset(b + field, 0, PROTO_REC_OP_NAME);
        memcpy(b + field, name, n);
        rec_expect_bad(b, size, what);
        free(b);
}

START_TEST(test_rec_decode_bad_names)
{
        static const size_t fields[] = { 24, 24 + 40 + 2 * 80 }; /* op, attribute 0 */
        char all[PROTO_REC_OP_NAME];

        memset(all, 'x', sizeof(all));
        for (int i = 0; i < 2; i++) {
                size_t f = fields[i];
                bad_name(f, "", 0, "empty");
                bad_name(f, all, PROTO_REC_OP_NAME, "no NUL terminator");
                bad_name(f, "Add\0x", 5, "bytes after the NUL");
                char tail[PROTO_REC_OP_NAME] = "Add";
                tail[PROTO_REC_OP_NAME - 1] = 0x01;
                bad_name(f, tail, sizeof(tail), "byte at the end after the NUL");
                bad_name(f, "A d", 3, "space");
                bad_name(f, "Add\t", 4, "tab");
                bad_name(f, "\x01" "Add", 4, "control");
                bad_name(f, "Ad\x7f", 3, "DEL");
                bad_name(f, "Add\xc3\xa9", 5, "non-ASCII");
        }
        /* the longest valid name and printable punctuation are fine */
        struct proto_rec r = mk_launch(1, 1, 1), d;
        size_t size;
        snprintf(r.launch.op, sizeof(r.launch.op), "%s", "!~.-_:/0123456789abcdefABCDEF#@");
        uint8_t *b = rec_encode(&r, &size);
        rec_decode_one(b, size, &d);
        ck_assert_str_eq(d.launch.op, r.launch.op);
        free(b);
}
END_TEST

START_TEST(test_rec_free_roundtrip)
{
        struct proto_rec r = { .type = PROTO_REC_FREE, .seq = 77, .stream = 5 }, out;
        uint8_t buf[64];
        size_t pos = 0;
        char err[128];

        r.free.buf = 0x123456;
        ck_assert_uint_eq(proto_rec_size(&r), 32);
        ck_assert_uint_eq(proto_rec_encode(&r, buf), 32);
        ck_assert_int_eq(proto_rec_decode(buf, 32, &pos, &out, err, sizeof(err)), 1);
        ck_assert_uint_eq(out.type, PROTO_REC_FREE);
        ck_assert_uint_eq(out.free.buf, 0x123456);
        ck_assert_uint_eq(out.seq, 77);
        buf[PROTO_REC_HEADER_SIZE + 4] = 1; /* reserved */
        pos = 0;
        ck_assert_int_lt(proto_rec_decode(buf, 32, &pos, &out, err, sizeof(err)), 0);
}
END_TEST

/* NOTIFY (type 9): tag and flags round trip; unknown flag bits and reserved bytes are
 * malformed. */
START_TEST(test_rec_notify_roundtrip)
{
        struct proto_rec r = { .type = PROTO_REC_NOTIFY, .seq = 9, .stream = 3 }, out;
        uint8_t buf[64];
        size_t pos = 0;
        char err[128];

        r.notify.tag = 0xfedcba9876543210ull;
        r.notify.flags = PROTO_NOTIFY_HOLD;
        ck_assert_uint_eq(proto_rec_size(&r), 40);
        ck_assert_uint_eq(proto_rec_encode(&r, buf), 40);
        ck_assert_int_eq(proto_rec_decode(buf, 40, &pos, &out, err, sizeof(err)), 1);
        ck_assert_uint_eq(out.type, PROTO_REC_NOTIFY);
        ck_assert_uint_eq(out.notify.tag, 0xfedcba9876543210ull);
        ck_assert_uint_eq(out.notify.flags, PROTO_NOTIFY_HOLD);
        ck_assert_uint_eq(out.stream, 3);
        buf[PROTO_REC_HEADER_SIZE + 8] = 2; /* unknown flag */
        pos = 0;
        ck_assert_int_lt(proto_rec_decode(buf, 40, &pos, &out, err, sizeof(err)), 0);
        buf[PROTO_REC_HEADER_SIZE + 8] = 1;
        buf[PROTO_REC_HEADER_SIZE + 12] = 1; /* reserved */
        pos = 0;
        ck_assert_int_lt(proto_rec_decode(buf, 40, &pos, &out, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_rec_sequence)
{
        struct proto_rec recs[6];
        uint8_t buf[8192];
        size_t total = 0, pos = 0;
        char err[128];
        int n = 0, e;

        recs[0] = mk_copy();
        memset(&recs[1], 0, sizeof(recs[1]));
        recs[1].type = PROTO_REC_MEMSET;
        recs[1].memset.len = 10;
        memset(&recs[2], 0, sizeof(recs[2]));
        recs[2].type = PROTO_REC_EVENT_RECORD;
        recs[2].event.event = 4;
        recs[3] = mk_launch(3, 1, 4);
        memset(&recs[4], 0, sizeof(recs[4]));
        recs[4].type = PROTO_REC_STREAM_WAIT;
        recs[4].event.event = 4;
        recs[5] = mk_launch(8, 4, 8);
        for (int i = 0; i < 6; i++) {
                recs[i].seq = 1000 + (uint64_t)i;
                recs[i].stream = 50 + (uint32_t)i;
                size_t s = proto_rec_size(&recs[i]);
                ck_assert_uint_le(total + s, sizeof(buf));
                ck_assert_uint_eq(proto_rec_encode(&recs[i], buf + total), s);
                total += s;
        }
        struct proto_rec d;
        while ((e = proto_rec_decode(buf, total, &pos, &d, err, sizeof(err))) == 1) {
                ck_assert_int_lt(n, 6);
                ck_assert_uint_eq(d.type, recs[n].type);
                ck_assert_uint_eq(d.seq, 1000 + (uint64_t)n);
                ck_assert_uint_eq(d.stream, 50 + (uint32_t)n);
                if (d.type == PROTO_REC_LAUNCH)
                        assert_launch_eq(&recs[n], &d);
                n++;
        }
        ck_assert_int_eq(e, 0);
        ck_assert_int_eq(n, 6);
        ck_assert_uint_eq(pos, total);

        /* corrupt the fourth record: the first three decode, then the error, pos stays */
        size_t off4 = proto_rec_size(&recs[0]) + proto_rec_size(&recs[1]) + proto_rec_size(&recs[2]);
        buf[off4 + 2] = 1;
        pos = 0;
        n = 0;
        while ((e = proto_rec_decode(buf, total, &pos, &d, err, sizeof(err))) == 1)
                n++;
        ck_assert_int_eq(e, -EBADMSG);
        ck_assert_int_eq(n, 3);
        ck_assert_uint_eq(pos, off4);
        ck_assert_ptr_nonnull(strstr(err, "1003")); /* names the record by its seq */
}
END_TEST


/* The text fast path of requests without parameters: the encoder writes what jansson's path
 * writes, and the recogniser accepts exactly those bodies (and the form without params). */
START_TEST(test_request_bare)
{
        static const char *const names[] = { "ping", "synchronize", "op_resolve", "a-b_9", "X" };
        char buf[PROTO_METHOD_MAX + 32], m[PROTO_METHOD_MAX];

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                json_t *req = proto_request_new(names[i], NULL);
                size_t jl, bl = proto_request_bare_encode(names[i], buf, sizeof(buf));
                char *j = proto_json_dump(req, &jl);
                ck_assert_uint_eq(bl, jl);
                ck_assert_mem_eq(buf, j, jl);
                ck_assert_int_eq(proto_request_bare(buf, bl, m, sizeof(m)), 1);
                ck_assert_str_eq(m, names[i]);
                free(j);
                json_decref(req);
        }
        /* names the text path must not write: escapes, non-ASCII, empty, too long */
        char longname[PROTO_METHOD_MAX + 8];
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = 0;
        ck_assert_uint_eq(proto_request_bare_encode("a\"b", buf, sizeof(buf)), 0);
        ck_assert_uint_eq(proto_request_bare_encode("caf\xc3\xa9", buf, sizeof(buf)), 0);
        ck_assert_uint_eq(proto_request_bare_encode("", buf, sizeof(buf)), 0);
        ck_assert_uint_eq(proto_request_bare_encode(longname, buf, sizeof(buf)), 0);
        ck_assert_uint_eq(proto_request_bare_encode("ping", buf, 8), 0);
        /* bodies the recogniser leaves to the JSON path */
        static const char *const other[] = {
                "{\"method\":\"ping\"}x", "{\"method\":\"ping\",\"params\":{\"a\":1}}",
                "{\"method\":\"\"}", "{\"method\":\"p\\u0069ng\"}", "{ \"method\":\"ping\"}",
                "{\"method\":\"ping\",\"params\":{}", "{\"method\":\"ping", "",
                "{\"method\":\"ping\",\"params\":{},\"x\":1}",
        };
        for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
                ck_assert_msg(proto_request_bare(other[i], strlen(other[i]), m, sizeof(m)) == 0,
                              "accepted %s", other[i]);
        ck_assert_int_eq(proto_request_bare("{\"method\":\"ping\"}", 17, m, sizeof(m)), 1);
        ck_assert_str_eq(m, "ping");
        ck_assert_int_eq(proto_request_bare("{\"method\":\"ping\"}", 17, m, 4), 0); /* no room */
        ck_assert_int_eq(proto_request_bare(longname, strlen(longname), m, sizeof(m)), 0);
}
END_TEST

static Suite *message_suite(void)
{
        Suite *s = suite_create("message");
        TCase *tc = tcase_create("json");

        tcase_add_test(tc, test_request_roundtrip);
        tcase_add_test(tc, test_request_parse_rejects);
        tcase_add_test(tc, test_reply_result_roundtrip);
        tcase_add_test(tc, test_reply_error_roundtrip);
        tcase_add_test(tc, test_reply_error_details);
        tcase_add_test(tc, test_reply_parse_rejects);
        tcase_add_test(tc, test_notify);
        tcase_add_test(tc, test_json_parse);
        tcase_add_test(tc, test_json_dump);
        tcase_add_test(tc, test_json_same_as_jansson);
        tcase_add_test(tc, test_error_names);
        suite_add_tcase(s, tc);

        tc = tcase_create("records");
        tcase_add_test(tc, test_rec_copy);
        tcase_add_test(tc, test_rec_memset);
        tcase_add_test(tc, test_rec_events);
        tcase_add_test(tc, test_rec_launch);
        tcase_add_test(tc, test_rec_launch_extremes);
        tcase_add_test(tc, test_rec_size_rejects);
        tcase_add_test(tc, test_rec_notify_roundtrip);
        tcase_add_test(tc, test_rec_launch_id);
        tcase_add_test(tc, test_rec_launch_direct);
        tcase_add_test(tc, test_rec_launch_id_malformed);
        tcase_add_test(tc, test_rec_decode_writes_only_members);
        tcase_add_test(tc, test_rec_decode_truncated);
        tcase_add_test(tc, test_rec_decode_length_mismatch);
        tcase_add_test(tc, test_rec_decode_too_many);
        tcase_add_test(tc, test_rec_decode_reserved);
        tcase_add_test(tc, test_rec_decode_bad_names);
        tcase_add_test(tc, test_rec_sequence);
        tcase_add_test(tc, test_rec_free_roundtrip);
        tcase_add_test(tc, test_request_bare);
        suite_add_tcase(s, tc);
        return s;
}


int main(void)
{
        SRunner *sr = srunner_create(message_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

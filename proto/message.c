/* JSON bodies of requests, replies and notifications, and the error-code names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

static const char *const error_names[PROTO_E_COUNT] = {
        [PROTO_OK] = "ok",
        [PROTO_E_INVALID] = "invalid",
        [PROTO_E_BAD_HANDLE] = "bad-handle",
        [PROTO_E_NO_MEMORY] = "no-memory",
        [PROTO_E_QUOTA] = "quota",
        [PROTO_E_LIMIT] = "limit",
        [PROTO_E_PERMISSION] = "permission",
        [PROTO_E_UNSUPPORTED] = "unsupported",
        [PROTO_E_SHAPE] = "shape",
        [PROTO_E_OUT_OF_RANGE] = "out-of-range",
        [PROTO_E_PROTOCOL] = "protocol",
        [PROTO_E_VERSION] = "version",
        [PROTO_E_DEVICE] = "device",
        [PROTO_E_EXEC] = "exec",
        [PROTO_E_BUSY] = "busy",
        [PROTO_E_NOT_READY] = "not-ready",
        [PROTO_E_CANCELLED] = "cancelled",
        [PROTO_E_CONNECTION] = "connection",
        [PROTO_E_SYSTEM] = "system",
};

const char *proto_error_name(int code)
{
        if (code < 0 || code >= PROTO_E_COUNT)
                return "unknown";
        return error_names[code];
}

/* {key: value}, or with key2 also {key: value, key2: value2}; steals the values, also on
 * failure (as json_pack's "o" does). Built directly: json_pack parses its format string on
 * every call, a fifth of a microsecond on every request and reply. */
static json_t *pack_pair(const char *key, json_t *value, const char *key2, json_t *value2)
{
        json_t *o = json_object();

        if (!o || !value || (key2 && !value2))
                goto fail;
        if (json_object_set_new_nocheck(o, key, value) < 0) {
                value = NULL;
                goto fail;
        }
        value = NULL;
        if (key2 && json_object_set_new_nocheck(o, key2, value2) < 0) {
                value2 = NULL;
                goto fail;
        }
        return o;
fail:
        json_decref(value);
        json_decref(value2);
        json_decref(o);
        return NULL;
}

json_t *proto_request_new(const char *method, json_t *params)
{
        json_t *m = method ? json_string(method) : NULL; /* NULL for invalid UTF-8, as json_pack */

        return pack_pair("method", m, "params", params ? params : json_object());
}

int proto_request_parse(json_t *body, const char **ret_method, json_t **ret_params,
                        char *err, size_t errlen)
{
        json_t *method, *params;

        if (!json_is_object(body)) {
                snprintf(err, errlen, "request body must be a JSON object");
                return -EBADMSG;
        }
        method = json_object_get(body, "method");
        if (!json_is_string(method)) {
                snprintf(err, errlen, "request field 'method' must be a string");
                return -EBADMSG;
        }
        params = json_object_get(body, "params");
        if (params && !json_is_object(params)) {
                snprintf(err, errlen, "request field 'params' must be an object");
                return -EBADMSG;
        }
        if (json_object_size(body) != 1u + (params != NULL)) {
                snprintf(err, errlen, "request has fields other than 'method' and 'params'");
                return -EBADMSG;
        }
        *ret_method = json_string_value(method);
        *ret_params = params;
        return 0;
}

static int method_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
}

int proto_request_bare(const void *body, size_t len, char *method, size_t cap)
{
        static const char head[] = "{\"method\":\"", tail1[] = "\"}", tail2[] = "\",\"params\":{}}";
        const char *b = body, *end = b + len, *p;
        size_t n;

        if (!b || len < sizeof(head) - 1 || memcmp(b, head, sizeof(head) - 1) != 0)
                return 0;
        for (p = b + sizeof(head) - 1; p < end && method_char(*p); p++)
                ;
        n = (size_t)(p - (b + sizeof(head) - 1));
        if (!n || n >= cap)
                return 0;
        if (!((size_t)(end - p) == sizeof(tail1) - 1 && memcmp(p, tail1, sizeof(tail1) - 1) == 0) &&
            !((size_t)(end - p) == sizeof(tail2) - 1 && memcmp(p, tail2, sizeof(tail2) - 1) == 0))
                return 0;
        memcpy(method, b + sizeof(head) - 1, n);
        method[n] = 0;
        return 1;
}

size_t proto_request_bare_encode(const char *method, char *buf, size_t cap)
{
        size_t n = 0;

        while (method[n] && method_char(method[n]))
                n++;
        if (!n || method[n] || n >= PROTO_METHOD_MAX)
                return 0;
        static const char head[] = "{\"method\":\"", tail[] = "\",\"params\":{}}";
        size_t total = sizeof(head) - 1 + n + sizeof(tail) - 1;
        if (total >= cap)
                return 0;
        memcpy(buf, head, sizeof(head) - 1);
        memcpy(buf + sizeof(head) - 1, method, n);
        memcpy(buf + sizeof(head) - 1 + n, tail, sizeof(tail)); /* with the NUL */
        return total;
}

json_t *proto_reply_result(json_t *result)
{
        return pack_pair("result", result ? result : json_object(), NULL, NULL);
}

json_t *proto_reply_error(int code, const char *message)
{
        return json_pack("{s:{s:i, s:s, s:s}}", "error", "code", code, "name",
                         proto_error_name(code), "message", message ? message : "");
}

int proto_reply_parse(json_t *body, json_t **ret_result, char *err, size_t errlen)
{
        json_t *result, *error;
        json_int_t code;
        const char *message;

        if (!json_is_object(body))
                return -EBADMSG;
        result = json_object_get(body, "result");
        if (result) {
                *ret_result = result;
                return 0;
        }
        error = json_object_get(body, "error");
        if (json_unpack(error, "{s:I, s:s}", "code", &code, "message", &message) < 0 ||
            code <= 0 || code > 1000)
                return -EBADMSG;
        snprintf(err, errlen, "%s", message);
        return (int)code;
}

json_t *proto_notify_new(const char *event, json_t *data)
{
        return json_pack("{s:s, s:o}", "event", event, "data", data ? data : json_object());
}

/* A parser for the common case, building the same tree json_loadb(JSON_REJECT_DUPLICATES)
 * builds: objects, arrays, integers of up to 18 digits, true, false, null, and strings of
 * printable ASCII without escapes. json_loadb costs about a microsecond even for
 * {"method":"ping","params":{}} (the lexer saves each token in a growing buffer, strings
 * are copied twice); npud parses every request with it and libnpu every reply. Anything
 * else — escapes, bytes beyond ASCII, reals, long integers, deep nesting, and every error —
 * returns NULL, and the caller parses the body with json_loadb, so results and error
 * messages do not change. */
struct jscan {
        const char *p, *end;
};

#define JPARSE_MAX_DEPTH 64

static void jskip_ws(struct jscan *c)
{
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
                c->p++;
}

/* At a '"': the string's bytes without the quotes. 0 or -1 (fallback). */
static int jscan_string(struct jscan *c, const char **ret, size_t *ret_len)
{
        const char *q = ++c->p;

        while (q < c->end && *q != '"') {
                unsigned char b = (unsigned char)*q;
                if (b < 0x20 || b >= 0x80 || b == '\\')
                        return -1;
                q++;
        }
        if (q >= c->end)
                return -1;
        *ret = c->p;
        *ret_len = (size_t)(q - c->p);
        c->p = q + 1;
        return 0;
}

static json_t *jparse_value(struct jscan *c, int depth)
{
        const char *s;
        size_t n;
        json_t *v;

        if (depth > JPARSE_MAX_DEPTH || c->p >= c->end)
                goto fallback;
        switch (*c->p) {
        case '{':
                if (!(v = json_object()))
                        goto fallback;
                c->p++;
                jskip_ws(c);
                if (c->p < c->end && *c->p == '}') {
                        c->p++;
                        return v;
                }
                for (;;) {
                        json_t *m;
                        if (c->p >= c->end || *c->p != '"' || jscan_string(c, &s, &n) < 0)
                                break;
                        jskip_ws(c);
                        if (c->p >= c->end || *c->p != ':')
                                break;
                        c->p++;
                        jskip_ws(c);
                        if (json_object_getn(v, s, n) || !(m = jparse_value(c, depth + 1)))
                                break;
                        if (json_object_setn_new_nocheck(v, s, n, m) < 0)
                                break;
                        jskip_ws(c);
                        if (c->p < c->end && *c->p == '}') {
                                c->p++;
                                return v;
                        }
                        if (c->p >= c->end || *c->p != ',')
                                break;
                        c->p++;
                        jskip_ws(c);
                }
                json_decref(v);
                goto fallback;
        case '[':
                if (!(v = json_array()))
                        goto fallback;
                c->p++;
                jskip_ws(c);
                if (c->p < c->end && *c->p == ']') {
                        c->p++;
                        return v;
                }
                for (;;) {
                        json_t *m = jparse_value(c, depth + 1);
                        if (!m || json_array_append_new(v, m) < 0)
                                break;
                        jskip_ws(c);
                        if (c->p < c->end && *c->p == ']') {
                                c->p++;
                                return v;
                        }
                        if (c->p >= c->end || *c->p != ',')
                                break;
                        c->p++;
                        jskip_ws(c);
                }
                json_decref(v);
                goto fallback;
        case '"':
                if (jscan_string(c, &s, &n) < 0 || !(v = json_stringn_nocheck(s, n)))
                        goto fallback;
                return v;
        case 't':
        case 'f':
        case 'n': {
                static const char *const words[] = { "true", "false", "null" };
                int w = *c->p == 't' ? 0 : *c->p == 'f' ? 1 : 2;
                size_t wl = strlen(words[w]);
                if ((size_t)(c->end - c->p) < wl || memcmp(c->p, words[w], wl) != 0)
                        goto fallback;
                c->p += wl;
                /* jansson lexes a run of letters as one word: "truex" is an error */
                if (c->p < c->end && ((*c->p >= 'a' && *c->p <= 'z') || (*c->p >= 'A' && *c->p <= 'Z')))
                        goto fallback;
                return w == 0 ? json_true() : w == 1 ? json_false() : json_null();
        }
        default: {
                const char *q = c->p;
                int neg = 0, digits = 0;
                unsigned long long u = 0; /* 19 digits still fit */
                if (*q == '-') {
                        neg = 1;
                        q++;
                }
                while (q < c->end && *q >= '0' && *q <= '9' && digits <= 18) {
                        u = u * 10 + (unsigned)(*q - '0');
                        q++;
                        digits++;
                }
                /* no digit, a leading zero, 19+ digits (possible overflow) or a real */
                if (!digits || digits > 18 || (digits > 1 && c->p[neg] == '0') ||
                    (q < c->end && (*q == '.' || *q == 'e' || *q == 'E')))
                        goto fallback;
                c->p = q;
                if (!(v = json_integer(neg ? -(json_int_t)u : (json_int_t)u)))
                        goto fallback;
                return v;
        }
        }
fallback:
        return NULL;
}

/* The whole body as one object or array (json_loadb without JSON_DECODE_ANY). */
static json_t *jparse(const char *body, size_t len)
{
        struct jscan c = { .p = body, .end = body + len };
        json_t *v;

        jskip_ws(&c);
        if (c.p >= c.end || (*c.p != '{' && *c.p != '['))
                return NULL;
        v = jparse_value(&c, 0);
        if (!v)
                return NULL;
        jskip_ws(&c);
        if (c.p != c.end) {
                json_decref(v);
                return NULL;
        }
        return v;
}

json_t *proto_json_parse(const void *body, size_t len, char *err, size_t errlen)
{
        json_error_t jerr;
        json_t *v = body ? jparse(body, len) : NULL;

        if (v)
                return v;
        v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);

        if (!v)
                snprintf(err, errlen, "body is not valid JSON: %s at offset %d", jerr.text,
                         jerr.position);
        return v;
}

/* A compact encoder for the common case, byte for byte what json_dumps(JSON_COMPACT) writes.
 * json_dumps costs about a microsecond even for {"result":{}}: it allocates a hash table of
 * parents per call and, per object or array, formats the node's address with snprintf for
 * its cycle check, plus a growing buffer and a final copy; every request and reply pays it on
 * both sides. Whatever this encoder does not reproduce exactly (reals, bytes beyond ASCII,
 * which jansson validates as UTF-8, nesting deep enough to be a cycle) hands the whole value
 * back to json_dumps. */
struct jbuf {
        char *p;
        size_t len, cap;
};

enum { JDUMP_OK = 0, JDUMP_FALLBACK = 1, JDUMP_NOMEM = 2 };
#define JDUMP_MAX_DEPTH 64

static int jbuf_put(struct jbuf *b, const char *s, size_t n)
{
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap * 2;
                while (cap < b->len + n + 1)
                        cap *= 2;
                char *np = realloc(b->p, cap);
                if (!np)
                        return JDUMP_NOMEM;
                b->p = np;
                b->cap = cap;
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
        return JDUMP_OK;
}

static int jdump_string(struct jbuf *b, const char *s, size_t len)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t run = 0;
        int e;

        if ((e = jbuf_put(b, "\"", 1)))
                return e;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                char esc[6] = { '\\', 0, '0', '0', 0, 0 };
                size_t n = 2;

                if (c >= 0x80)
                        return JDUMP_FALLBACK;
                if (c >= 0x20 && c != '"' && c != '\\')
                        continue;
                if ((e = jbuf_put(b, s + run, i - run)))
                        return e;
                run = i + 1;
                switch (c) {
                case '"': esc[1] = '"'; break;
                case '\\': esc[1] = '\\'; break;
                case '\b': esc[1] = 'b'; break;
                case '\f': esc[1] = 'f'; break;
                case '\n': esc[1] = 'n'; break;
                case '\r': esc[1] = 'r'; break;
                case '\t': esc[1] = 't'; break;
                default:
                        esc[1] = 'u';
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 15];
                        n = 6;
                }
                if ((e = jbuf_put(b, esc, n)))
                        return e;
        }
        if ((e = jbuf_put(b, s + run, len - run)))
                return e;
        return jbuf_put(b, "\"", 1);
}

static int jdump(struct jbuf *b, const json_t *v, int depth)
{
        char num[24], *end = num + sizeof(num), *d = end;
        int e;

        if (depth > JDUMP_MAX_DEPTH)
                return JDUMP_FALLBACK;
        switch (json_typeof(v)) {
        case JSON_NULL:
                return jbuf_put(b, "null", 4);
        case JSON_TRUE:
                return jbuf_put(b, "true", 4);
        case JSON_FALSE:
                return jbuf_put(b, "false", 5);
        case JSON_INTEGER: {
                json_int_t i = json_integer_value(v);
                /* digits of the magnitude as unsigned, so that the most negative value works */
                unsigned long long m = i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i;
                do
                        *--d = (char)('0' + m % 10);
                while (m /= 10);
                if (i < 0)
                        *--d = '-';
                return jbuf_put(b, d, (size_t)(end - d));
        }
        case JSON_STRING:
                return jdump_string(b, json_string_value(v), json_string_length(v));
        case JSON_ARRAY: {
                size_t n = json_array_size(v);
                if ((e = jbuf_put(b, "[", 1)))
                        return e;
                for (size_t i = 0; i < n; i++)
                        if ((i && (e = jbuf_put(b, ",", 1))) ||
                            (e = jdump(b, json_array_get(v, i), depth + 1)))
                                return e;
                return jbuf_put(b, "]", 1);
        }
        case JSON_OBJECT: {
                int first = 1;
                if ((e = jbuf_put(b, "{", 1)))
                        return e;
                for (void *it = json_object_iter((json_t *)v); it;
                     it = json_object_iter_next((json_t *)v, it), first = 0)
                        if ((!first && (e = jbuf_put(b, ",", 1))) ||
                            (e = jdump_string(b, json_object_iter_key(it), json_object_iter_key_len(it))) ||
                            (e = jbuf_put(b, ":", 1)) ||
                            (e = jdump(b, json_object_iter_value(it), depth + 1)))
                                return e;
                return jbuf_put(b, "}", 1);
        }
        default: /* reals: jansson's own formatting */
                return JDUMP_FALLBACK;
        }
}

char *proto_json_dump(const json_t *v, size_t *ret_len)
{
        struct jbuf b = { .cap = 256 };
        char *s = NULL;
        int e = JDUMP_FALLBACK;

        /* json_dumps encodes only an object or an array at the top */
        if (!json_is_object(v) && !json_is_array(v))
                return NULL;
        if ((b.p = malloc(b.cap)))
                e = jdump(&b, v, 0);
        if (e == JDUMP_OK) {
                b.p[b.len] = 0;
                s = b.p;
        } else {
                free(b.p);
                if (e == JDUMP_FALLBACK && (s = json_dumps(v, JSON_COMPACT)))
                        b.len = strlen(s);
        }
        if (s && ret_len)
                *ret_len = b.len;
        return s;
}

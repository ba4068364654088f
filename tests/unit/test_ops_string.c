/* STRING tensors: Cast and CastLike to and from text (numpy's shortest float text, strtod's
 * reading of "nan"/"inf"), StringNormalizer (case changes, stopwords with and without case,
 * [C] and [1,C], [""] when every string goes), the string pool, and graph runs taking and
 * giving strings encoded: malformed encodings and short outputs are errors naming the
 * value, an operator outside the string list is refused, initializers keep their strings. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "ops/ops.h"
#include "ops/strings.h"
#include "proto/dtype.h"
#include "proto/errors.h"

#include "tests/onnx-build.h"

#define STR PROTO_DTYPE_STRING

static struct ops_tensor t1(int dtype, void *data, int ndim, int64_t d0, int64_t d1)
{
        struct ops_tensor t = { .dtype = dtype, .ndim = ndim, .data = data };

        t.dims[0] = d0;
        t.dims[1] = d1;
        return t;
}

static struct ops_str *S(const char *s)
{
        char err[128];
        struct ops_str *p = ops_str_new(s, strlen(s), err, sizeof(err));

        ck_assert_msg(p != NULL, "%s", err);
        return p;
}

static void str_is(const struct ops_str *p, const char *want)
{
        uint32_t len;
        const char *b = ops_str_bytes(p, &len);

        ck_assert_msg(len == strlen(want) && memcmp(b, want, len) == 0, "'%.*s', wanted '%s'",
                      (int)len, b, want);
}

static int run_op(const char *name, struct ops_call *c, char *err, size_t errlen)
{
        const struct ops_def *def = ops_lookup_onnx("", name, 17);

        ck_assert_ptr_nonnull(def);
        if (ops_infer(def, c, err, errlen) < 0)
                return -1;
        return ops_run(def, c, err, errlen);
}

START_TEST(test_pool)
{
        struct ops_strpool p, inner;
        char err[128];

        ck_assert_ptr_null(ops_str_new("a", 1, err, sizeof(err)));
        ck_assert_msg(strstr(err, "no string pool"), "%s", err);
        ops_strpool_begin(&p);
        str_is(S("hello"), "hello");
        ops_strpool_begin(&inner); /* nested: the outer pool serves */
        ck_assert_int_eq(inner.kept, 1);
        for (int i = 0; i < 5000; i++) /* several chunks */
                ck_assert_ptr_nonnull(S("0123456789abcdef0123456789abcdef"));
        ops_strpool_end(&inner);
        str_is(S(""), "");
        str_is(NULL, "");
        ops_strpool_end(&p);
        ck_assert_ptr_null(ops_str_new("a", 1, err, sizeof(err)));
}
END_TEST

START_TEST(test_cast_to_string)
{
        float f[] = { 0.9767611f, 1.0f, 1e-5f, 100000.0f, NAN, -INFINITY, 1.5e16f, -0.25f, 0.0f,
                      0.039187793f };
        const char *want[] = { "0.9767611", "1.0", "1e-05", "100000.0", "nan", "-inf", "1.5e+16",
                               "-0.25", "0.0", "0.039187793" };
        double d[] = { 0.1, 1.0 / 3 };
        const char *dwant[] = { "0.1", "0.3333333333333333" };
        int64_t iv[] = { -7, 42 };
        struct ops_str *out[10];
        struct ops_strpool p;
        struct ops_call c;
        char err[256];

        ops_strpool_begin(&p);
        memset(&c, 0, sizeof(c));
        c.nin = c.nout = 1;
        c.in[0] = t1(PROTO_DTYPE_FLOAT32, f, 1, 10, 0);
        c.out[0].data = out;
        c.nattr = 1;
        strcpy(c.attr[0].name, "to");
        c.attr[0].type = OPS_ATTR_INT;
        c.attr[0].i = STR;
        ck_assert_msg(run_op("Cast", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dtype, STR);
        for (int i = 0; i < 10; i++)
                str_is(out[i], want[i]);
        c.in[0] = t1(PROTO_DTYPE_FLOAT64, d, 1, 2, 0);
        ck_assert_msg(run_op("Cast", &c, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < 2; i++)
                str_is(out[i], dwant[i]);
        c.in[0] = t1(PROTO_DTYPE_INT64, iv, 1, 2, 0);
        ck_assert_msg(run_op("Cast", &c, err, sizeof(err)) == 0, "%s", err);
        str_is(out[0], "-7");
        str_is(out[1], "42");
        ops_strpool_end(&p);
}
END_TEST

START_TEST(test_cast_from_string)
{
        struct ops_str *in[7];
        float out[7], like = 0;
        int32_t iout[7];
        struct ops_strpool p;
        struct ops_call c;
        char err[256];

        ops_strpool_begin(&p);
        in[0] = S("0.5");
        in[1] = S("NaN");
        in[2] = S("+INF");
        in[3] = S("-inf");
        in[4] = S("abc");
        in[5] = NULL;
        in[6] = S("  12");
        memset(&c, 0, sizeof(c));
        c.nin = 2;
        c.nout = 1;
        c.in[0] = t1(STR, in, 1, 7, 0);
        c.in[1] = t1(PROTO_DTYPE_FLOAT32, &like, 0, 0, 0);
        c.out[0].data = out;
        ck_assert_msg(run_op("CastLike", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dtype, PROTO_DTYPE_FLOAT32);
        ck_assert(out[0] == 0.5f && isnan(out[1]) && isinf(out[2]) && out[2] > 0);
        ck_assert(isinf(out[3]) && out[3] < 0 && out[4] == 0 && out[5] == 0 && out[6] == 12);
        c.nin = 1;
        c.nattr = 1;
        strcpy(c.attr[0].name, "to");
        c.attr[0].type = OPS_ATTR_INT;
        c.attr[0].i = PROTO_DTYPE_INT32;
        c.in[0].dims[0] = 1;
        c.out[0].data = iout;
        ck_assert_msg(run_op("Cast", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(iout[0], 0);
        ops_strpool_end(&p);
}
END_TEST

static int strnorm(const char *action, int sensitive, int nstop, const char *const *stop,
                   struct ops_str **in, int ndim, int64_t n, struct ops_str **out,
                   struct ops_tensor *ret, char *err, size_t errlen)
{
        struct ops_call c;
        int rc;

        memset(&c, 0, sizeof(c));
        c.nin = c.nout = 1;
        c.in[0] = ndim == 1 ? t1(STR, in, 1, n, 0) : t1(STR, in, 2, 1, n);
        c.out[0].data = out;
        strcpy(c.attr[c.nattr].name, "case_change_action");
        c.attr[c.nattr].type = OPS_ATTR_STRING;
        c.attr[c.nattr++].s = action;
        strcpy(c.attr[c.nattr].name, "is_case_sensitive");
        c.attr[c.nattr].type = OPS_ATTR_INT;
        c.attr[c.nattr++].i = sensitive;
        if (nstop) {
                strcpy(c.attr[c.nattr].name, "stopwords");
                c.attr[c.nattr].type = OPS_ATTR_STRINGS;
                c.attr[c.nattr].n = nstop;
                c.attr[c.nattr++].strings = stop;
        }
        rc = run_op("StringNormalizer", &c, err, errlen);
        *ret = c.out[0];
        return rc;
}

START_TEST(test_strnormalizer)
{
        static const char *const stop[] = { "monday" };
        struct ops_str *in[4], *out[4];
        struct ops_tensor o;
        struct ops_strpool p;
        char err[256];

        ops_strpool_begin(&p);
        in[0] = S("Monday");
        in[1] = S("tuesday");
        in[2] = S("monday");
        in[3] = S("Wed-3");
        /* case-sensitive: only the exact stopword goes */
        ck_assert_msg(strnorm("UPPER", 1, 1, stop, in, 1, 4, out, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(o.ndim, 1);
        ck_assert_int_eq(o.dims[0], 3);
        str_is(out[0], "MONDAY");
        str_is(out[1], "TUESDAY");
        str_is(out[2], "WED-3");
        str_is(in[0], "Monday"); /* the input is untouched */
        /* insensitive, [1,C], lower */
        ck_assert_msg(strnorm("LOWER", 0, 1, stop, in, 2, 4, out, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(o.ndim, 2);
        ck_assert_int_eq(o.dims[0], 1);
        ck_assert_int_eq(o.dims[1], 2);
        str_is(out[0], "tuesday");
        str_is(out[1], "wed-3");
        /* no change, no stopwords */
        ck_assert_msg(strnorm("NONE", 0, 0, NULL, in, 1, 4, out, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(o.dims[0], 4);
        str_is(out[0], "Monday");
        /* every string removed: [""] */
        in[1] = in[2];
        ck_assert_msg(strnorm("UPPER", 0, 1, stop, in, 1, 3 - 1, out, &o, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(o.dims[0], 1);
        str_is(out[0], "");
        /* bad action, bad input */
        ck_assert_int_ne(strnorm("TITLE", 0, 0, NULL, in, 1, 2, out, &o, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "case_change_action"), "%s", err);
        ops_strpool_end(&p);
}
END_TEST

/* Model: x (string [n]) -> op -> y; init: an initializer "c" = ["ab", ""] listed as a second
 * output when with_init. */
static const char *init_s0 = "ab"; /* the initializer's first string */

static int model_import(const char *op, int to, int ydtype, int with_init, struct graph **ret,
                        char *err, size_t errlen)
{
        static const int64_t dn[] = { -1 };
        Onnx__GraphProto *g = graph_proto();
        int two = !strcmp(op, "Concat") || !strcmp(op, "Gather") || !strcmp(op, "Equal");
        Onnx__NodeProto *n = node(op, two ? 2 : 1,
                                  (const char *const[]){ "x", "x" }, 1, (const char *const[]){ "y" });
        uint8_t *buf;
        size_t len;
        int rc;

        if (to)
                attr_i(n, "to", to);
        if (!strcmp(op, "Concat"))
                attr_i(n, "axis", 0);
        g->n_node = 1;
        g->node = (Onnx__NodeProto **)list(1, n);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", STR, 1, dn));
        g->n_output = with_init ? 2 : 1;
        g->output = (Onnx__ValueInfoProto **)list(2, tvalue("y", ydtype, 1, dn),
                                                  tvalue("c", STR, 1, (const int64_t[]){ 2 }));
        if (with_init || !strcmp(op, "Constant")) {
                Onnx__TensorProto *c = str_tensor("c", 2, (const char *const[]){ init_s0, "" });

                if (with_init) {
                        g->n_initializer = 1;
                        g->initializer = (Onnx__TensorProto **)list(1, c);
                } else { /* Constant: y = the tensor, x unused */
                        attr_add(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = c;
                        c->name = NULL;
                        n->n_input = 0;
                }
        }
        buf = model_pack(g, 17, &len);
        rc = onnx_import(buf, len, NULL, ret, err, errlen);
        free(buf);
        return rc;
}

static struct graph *model(const char *op, int to, int ydtype, int with_init)
{
        struct graph *gr;
        char err[256];

        ck_assert_msg(model_import(op, to, ydtype, with_init, &gr, err, sizeof(err)) == 0, "%s", err);
        return gr;
}

/* Encoded strings: "7" "x" "" "-1.5e3" */
static const uint8_t enc[] = { 1, 0, 0, 0, '7', 1, 0, 0, 0, 'x', 0, 0, 0, 0,
                               6, 0, 0, 0, '-', '1', '.', '5', 'e', '3' };

START_TEST(test_graph_encoded)
{
        struct graph *g = model("Cast", PROTO_DTYPE_FLOAT32, PROTO_DTYPE_FLOAT32, 0);
        struct graph_bind *b = calloc(1, sizeof(*b));
        uint8_t bad[sizeof(enc)], outb[64];
        float y[4];
        char err[256];

        ck_assert_ptr_nonnull(b);
        b->g = g;
        b->nin = b->nout = 1;
        b->t[0] = t1(STR, (void *)enc, 1, 4, 0);
        b->cap[0] = sizeof(enc);
        b->t[1] = t1(PROTO_DTYPE_FLOAT32, y, 1, 4, 0);
        b->cap[1] = sizeof(y);
        ck_assert_msg(graph_exec_bound(b, err, sizeof(err)) == 0, "%s", err);
        ck_assert(y[0] == 7 && y[1] == 0 && y[2] == 0 && y[3] == -1500);
        /* a length past the bound bytes */
        memcpy(bad, enc, sizeof(bad));
        bad[14] = 0xff;
        b->t[0].data = bad;
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_INVALID);
        ck_assert_msg(strstr(err, "input 'x'") && strstr(err, "string 3"), "%s", err);
        /* fewer bytes bound than the strings need */
        b->t[0].data = (void *)enc;
        b->cap[0] = sizeof(enc) - 1;
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_INVALID);
        b->cap[0] = 3;
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_INVALID);
        ck_assert_msg(strstr(err, "input 'x'") && strstr(err, "string 0"), "%s", err);
        graph_free(g);

        /* string out, and an initializer passed through */
        g = model("Identity", 0, STR, 1);
        b->g = g;
        b->nout = 2;
        b->cap[0] = sizeof(enc);
        b->t[1] = t1(STR, outb, 1, 4, 0);
        b->cap[1] = sizeof(enc);
        b->t[2] = t1(STR, outb + 32, 1, 2, 0);
        b->cap[2] = 32;
        ck_assert_msg(graph_exec_bound(b, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(memcmp(outb, enc, sizeof(enc)), 0);
        ck_assert_int_eq(memcmp(outb + 32, "\2\0\0\0ab\0\0\0\0", 10), 0);
        /* too short for the output */
        b->cap[1] = sizeof(enc) - 1;
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_SHAPE);
        ck_assert_msg(strstr(err, "output 'y'") && strstr(err, "24 bytes"), "%s", err);
        graph_free(g);

        /* a Constant holding strings */
        g = model("Constant", 0, STR, 0);
        b->g = g;
        b->nout = 1;
        b->t[1] = t1(STR, outb, 1, 2, 0);
        b->cap[1] = sizeof(outb);
        ck_assert_msg(graph_exec_bound(b, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(memcmp(outb, "\2\0\0\0ab\0\0\0\0", 10), 0);
        graph_free(g);

        /* strings reach listed operators only */
        g = model("Abs", 0, STR, 0);
        b->g = g;
        b->t[1] = t1(STR, outb, 1, 4, 0);
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_UNSUPPORTED);
        ck_assert_msg(strstr(err, "string tensors are not supported by Abs"), "%s", err);
        graph_free(g);

        /* Concat of x with itself: strings listed there now */
        g = model("Concat", 0, STR, 0);
        b->g = g;
        b->t[1] = t1(STR, outb, 1, 8, 0);
        b->cap[1] = sizeof(outb);
        ck_assert_msg(graph_exec_bound(b, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(memcmp(outb, enc, sizeof(enc)), 0);
        ck_assert_int_eq(memcmp(outb + sizeof(enc), enc, sizeof(enc)), 0);
        graph_free(g);

        /* Equal(x, x) */
        g = model("Equal", 0, PROTO_DTYPE_BOOL, 0);
        b->g = g;
        b->t[1] = t1(PROTO_DTYPE_BOOL, outb, 1, 4, 0);
        b->cap[1] = 4;
        ck_assert_msg(graph_exec_bound(b, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(memcmp(outb, "\1\1\1\1", 4), 0);
        graph_free(g);

        /* Gather(x, x): strings are data there, never indices */
        g = model("Gather", 0, STR, 0);
        b->g = g;
        b->t[1] = t1(STR, outb, 1, 4, 0);
        b->cap[1] = sizeof(outb);
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_UNSUPPORTED);
        ck_assert_msg(strstr(err, "string tensors are not supported by Gather at input 1"), "%s", err);
        graph_free(g);

        /* invalid UTF-8 in an input: an error naming it, the string and the byte */
        g = model("Identity", 0, STR, 0);
        b->g = g;
        memcpy(bad, enc, sizeof(bad));
        bad[9] = 0xc0; /* "x" -> an overlong lead byte */
        b->t[0].data = bad;
        b->t[1] = t1(STR, outb, 1, 4, 0);
        ck_assert_int_eq(graph_exec_bound(b, err, sizeof(err)), PROTO_E_INVALID);
        ck_assert_msg(strstr(err, "input 'x'") && strstr(err, "string 1") && strstr(err, "UTF-8"),
                      "%s", err);
        b->t[0].data = (void *)enc;
        ck_assert_msg(graph_exec_bound(b, err, sizeof(err)) == 0, "%s", err);
        graph_free(g);
        free(b);
}
END_TEST

START_TEST(test_utf8)
{
        static const struct {
                const char *s;
                int64_t bad;
        } cases[] = {
                { "", -1 },                  { "plain", -1 },
                { "caf\xc3\xa9", -1 },       { "\xe2\x82\xac", -1 },         /* euro sign */
                { "\xf0\x9f\x98\x80", -1 },  { "\xf4\x8f\xbf\xbf", -1 },     /* U+10FFFF */
                { "a\x80", 1 },              { "\xc0\xaf", 0 },              /* overlong '/' */
                { "\xe0\x80\xaf", 0 },       { "\xf0\x80\x80\xaf", 0 },      /* overlong */
                { "ab\xed\xa0\x80", 2 },     { "\xf4\x90\x80\x80", 0 },      /* surrogate, past */
                { "\xe2\x82", 0 },           { "x\xf0\x9f\x98", 1 },         /* cut short */
                { "\xff", 0 },               { "\xc3\x28", 0 },
        };
        struct graph *g;
        char err[256];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                ck_assert_msg(ops_utf8_check(cases[i].s, strlen(cases[i].s)) == cases[i].bad,
                              "case %zu", i);
        ck_assert_int_eq(ops_utf8_check("a\0b", 3), -1);
        /* an initializer's string_data */
        init_s0 = "ok\xfe";
        ck_assert_int_eq(model_import("Identity", 0, STR, 1, &g, err, sizeof(err)), PROTO_E_INVALID);
        ck_assert_msg(strstr(err, "initializer 'c'") && strstr(err, "string 0 is not valid UTF-8 (byte 2)"),
                      "%s", err);
        /* and a Constant's */
        ck_assert_int_ne(model_import("Constant", 0, STR, 0, &g, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "UTF-8"), "%s", err);
        init_s0 = "ab";
}
END_TEST

static void call_int(struct ops_call *c, const char *name, int64_t v)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = OPS_ATTR_INT;
        a->i = v;
}

static void call_ints(struct ops_call *c, const char *name, int n, const int64_t *v)
{
        struct ops_attr *a = &c->attr[c->nattr++];

        memset(a, 0, sizeof(*a));
        strcpy(a->name, name);
        a->type = OPS_ATTR_INTS;
        a->n = n;
        a->ints = v;
}

static void strs_are(struct ops_str *const *got, int n, const char *const *want)
{
        for (int i = 0; i < n; i++)
                str_is(got[i], want[i]);
}

static void call_init(struct ops_call *c, int nin, int nout)
{
        memset(c, 0, sizeof(*c));
        c->nin = nin;
        c->nout = nout;
        c->opset = 17;
}

/* The data-movement kernels copy string elements (pointers) by size and never read them. */
START_TEST(test_move_ops)
{
        struct ops_strpool p;
        struct ops_str *x[6], *y[12], *z[6], *w[6];
        int64_t i2[2] = { 2, 0 }, ge[4] = { 1, 0, 2, 2 }, st[1] = { 1 }, en[1] = { 3 }, ax[1] = { 1 };
        int64_t shp[2] = { 2, 3 }, rep[2] = { 1, 2 }, perm[2] = { 1, 0 }, spl[2] = { 1, 2 };
        uint8_t cond[3] = { 1, 0, 1 }, eq[6];
        struct ops_call c;
        char err[256];

        ops_strpool_begin(&p);
        /* x = [["a","b","c"],["d","e","f"]] */
        for (int i = 0; i < 6; i++) {
                char s[2] = { (char)('a' + i), 0 };
                x[i] = S(s);
        }
        /* Gather axis 1, indices [2, 0] */
        call_init(&c, 2, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.in[1] = t1(PROTO_DTYPE_INT64, i2, 1, 2, 0);
        c.out[0].data = y;
        call_int(&c, "axis", 1);
        ck_assert_msg(run_op("Gather", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dtype, STR);
        strs_are(y, 4, (const char *const[]){ "c", "a", "f", "d" });
        /* GatherElements axis 1, indices [[1,0],[2,2]] */
        call_init(&c, 2, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.in[1] = t1(PROTO_DTYPE_INT64, ge, 2, 2, 2);
        c.out[0].data = y;
        call_int(&c, "axis", 1);
        ck_assert_msg(run_op("GatherElements", &c, err, sizeof(err)) == 0, "%s", err);
        strs_are(y, 4, (const char *const[]){ "b", "a", "f", "f" });
        /* Concat axis 0 of x and x */
        call_init(&c, 2, 1);
        c.in[0] = c.in[1] = t1(STR, x, 2, 2, 3);
        c.out[0].data = y;
        call_int(&c, "axis", 0);
        ck_assert_msg(run_op("Concat", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dims[0], 4);
        strs_are(y, 12, (const char *const[]){ "a", "b", "c", "d", "e", "f", "a", "b", "c", "d", "e", "f" });
        /* Slice axis 1 [1, 3) */
        call_init(&c, 4, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.in[1] = t1(PROTO_DTYPE_INT64, st, 1, 1, 0);
        c.in[2] = t1(PROTO_DTYPE_INT64, en, 1, 1, 0);
        c.in[3] = t1(PROTO_DTYPE_INT64, ax, 1, 1, 0);
        c.out[0].data = y;
        ck_assert_msg(run_op("Slice", &c, err, sizeof(err)) == 0, "%s", err);
        strs_are(y, 4, (const char *const[]){ "b", "c", "e", "f" });
        /* Split axis 1 into [1, 2] */
        call_init(&c, 2, 2);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.in[1] = t1(PROTO_DTYPE_INT64, spl, 1, 2, 0);
        c.out[0].data = y;
        c.out[1].data = z;
        call_int(&c, "axis", 1);
        ck_assert_msg(run_op("Split", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[1].dtype, STR);
        strs_are(y, 2, (const char *const[]){ "a", "d" });
        strs_are(z, 4, (const char *const[]){ "b", "c", "e", "f" });
        /* Transpose */
        call_init(&c, 1, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.out[0].data = y;
        call_ints(&c, "perm", 2, perm);
        ck_assert_msg(run_op("Transpose", &c, err, sizeof(err)) == 0, "%s", err);
        strs_are(y, 6, (const char *const[]){ "a", "d", "b", "e", "c", "f" });
        /* Expand [3] to [2, 3] */
        call_init(&c, 2, 1);
        c.in[0] = t1(STR, x, 1, 3, 0);
        c.in[1] = t1(PROTO_DTYPE_INT64, shp, 1, 2, 0);
        c.out[0].data = y;
        ck_assert_msg(run_op("Expand", &c, err, sizeof(err)) == 0, "%s", err);
        strs_are(y, 6, (const char *const[]){ "a", "b", "c", "a", "b", "c" });
        /* Tile [2, 3] by [1, 2] */
        call_init(&c, 2, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.in[1] = t1(PROTO_DTYPE_INT64, rep, 1, 2, 0);
        c.out[0].data = y;
        ck_assert_msg(run_op("Tile", &c, err, sizeof(err)) == 0, "%s", err);
        strs_are(y, 12, (const char *const[]){ "a", "b", "c", "a", "b", "c", "d", "e", "f", "d", "e", "f" });
        /* Where: cond [3] broadcast over x [2, 3] and a scalar y */
        z[0] = S("-");
        call_init(&c, 3, 1);
        c.in[0] = t1(PROTO_DTYPE_BOOL, cond, 1, 3, 0);
        c.in[1] = t1(STR, x, 2, 2, 3);
        c.in[2] = t1(STR, z, 0, 0, 0);
        c.out[0].data = y;
        ck_assert_msg(run_op("Where", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dtype, STR);
        ck_assert_int_eq(c.out[0].ndim, 2);
        strs_are(y, 6, (const char *const[]){ "a", "-", "c", "d", "-", "f" });
        /* Where with strings on one side only */
        c.in[2] = t1(PROTO_DTYPE_UINT64, z, 0, 0, 0);
        ck_assert_int_ne(run_op("Where", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "not a string"), "%s", err);

        /* Equal: byte-wise, broadcasting [2, 3] against [3]; NULL is "" */
        w[0] = S("a");
        w[1] = S("bb");
        w[2] = S("f");
        call_init(&c, 2, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.in[1] = t1(STR, w, 1, 3, 0);
        c.out[0].data = eq;
        ck_assert_msg(run_op("Equal", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dtype, PROTO_DTYPE_BOOL);
        ck_assert_int_eq(c.out[0].ndim, 2);
        ck_assert(eq[0] == 1 && eq[1] == 0 && eq[2] == 0 && eq[3] == 0 && eq[4] == 0 && eq[5] == 1);
        z[0] = S("");
        z[1] = NULL;
        z[2] = ops_str_new("a\0b", 3, err, sizeof(err)); /* NUL inside: not "a" */
        z[3] = S("a");
        w[0] = NULL;
        w[1] = S("");
        w[2] = S("a");
        w[3] = S("a");
        call_init(&c, 2, 1);
        c.in[0] = t1(STR, z, 1, 4, 0);
        c.in[1] = t1(STR, w, 1, 4, 0);
        c.out[0].data = eq;
        ck_assert_msg(run_op("Equal", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert(eq[0] == 1 && eq[1] == 1 && eq[2] == 0 && eq[3] == 1);
        /* strings against numbers */
        c.in[1].dtype = PROTO_DTYPE_INT64;
        ck_assert_int_ne(run_op("Equal", &c, err, sizeof(err)), 0);
        /* numbers still compare as numbers */
        {
                int64_t a[3] = { 1, 2, 3 }, b[1] = { 2 };
                call_init(&c, 2, 1);
                c.in[0] = t1(PROTO_DTYPE_INT64, a, 1, 3, 0);
                c.in[1] = t1(PROTO_DTYPE_INT64, b, 1, 1, 0);
                c.out[0].data = eq;
                ck_assert_msg(run_op("Equal", &c, err, sizeof(err)) == 0, "%s", err);
                ck_assert(eq[0] == 0 && eq[1] == 1 && eq[2] == 0);
        }
        ops_strpool_end(&p);
}
END_TEST

/* TfIdfVectorizer over strings: uni- and bigrams, a string outside the pool breaking grams. */
START_TEST(test_tfidf_strings)
{
        static const char *const pool[] = { "x", "y", "x", "y" };
        static const int64_t counts[] = { 0, 2 }, idx[] = { 0, 1, 2 };
        struct ops_str *x[6];
        struct ops_strpool p;
        struct ops_call c;
        float y[6];
        char err[256];
        struct ops_attr *a;

        ops_strpool_begin(&p);
        x[0] = S("x"), x[1] = S("y"), x[2] = S("z"), x[3] = S("x"), x[4] = S("y"), x[5] = S("y");
        call_init(&c, 1, 1);
        c.in[0] = t1(STR, x, 2, 2, 3);
        c.out[0].data = y;
        call_int(&c, "min_gram_length", 1);
        call_int(&c, "max_gram_length", 2);
        call_int(&c, "max_skip_count", 0);
        call_ints(&c, "ngram_counts", 2, counts);
        call_ints(&c, "ngram_indexes", 3, idx);
        a = &c.attr[c.nattr++];
        memset(a, 0, sizeof(*a));
        strcpy(a->name, "mode");
        a->type = OPS_ATTR_STRING;
        a->s = "TF";
        a = &c.attr[c.nattr++];
        memset(a, 0, sizeof(*a));
        strcpy(a->name, "pool_strings");
        a->type = OPS_ATTR_STRINGS;
        a->n = 4;
        a->strings = pool;
        ck_assert_msg(run_op("TfIdfVectorizer", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c.out[0].dims[0], 2);
        ck_assert_int_eq(c.out[0].dims[1], 3);
        /* row "x" "y" "z": x, y, (x y); row "x" "y" "y": x, y twice, (x y) */
        ck_assert(y[0] == 1 && y[1] == 1 && y[2] == 1);
        ck_assert(y[3] == 1 && y[4] == 2 && y[5] == 1);
        /* integers against a string pool */
        {
                int64_t iv[3] = { 1, 2, 3 };
                c.in[0] = t1(PROTO_DTYPE_INT64, iv, 1, 3, 0);
                ck_assert_int_ne(run_op("TfIdfVectorizer", &c, err, sizeof(err)), 0);
        }
        ops_strpool_end(&p);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("ops_string");
        TCase *tc = tcase_create("core");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_pool);
        tcase_add_test(tc, test_cast_to_string);
        tcase_add_test(tc, test_cast_from_string);
        tcase_add_test(tc, test_strnormalizer);
        tcase_add_test(tc, test_graph_encoded);
        tcase_add_test(tc, test_utf8);
        tcase_add_test(tc, test_move_ops);
        tcase_add_test(tc, test_tfidf_strings);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* String kernels: Cast and CastLike to and from STRING (called from cast.c and
 * ew-unary.c), and StringNormalizer. Strings are ops_str elements (strings.h); new ones
 * come from the run's pool. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "nn-common.h"
#include "ops-internal.h"
#include "runctx.h"
#include "strings.h"

/* numpy's str() of a float: the shortest digits that read back as the same value (of the
 * float's own precision), positional for exponents -4..15 with at least one decimal
 * ("1.0", "0.001"), else scientific with a two-digit exponent ("1e-05", "1.5e+16"). */
static int format_float(double v, int single, char *buf, size_t len)
{
        char digits[40], tmp[48];
        int prec, exp, nd = 0, off = 0;
        const char *e;

        if (isnan(v))
                return snprintf(buf, len, "nan");
        if (isinf(v))
                return snprintf(buf, len, v < 0 ? "-inf" : "inf");
        for (prec = 1; prec <= 17; prec++) {
                snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
                if (single ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v)
                        break;
        }
        /* tmp: "-d.ddde+XX" */
        for (const char *p = tmp; *p && *p != 'e'; p++)
                if (*p >= '0' && *p <= '9')
                        digits[nd++] = *p;
        while (nd > 1 && digits[nd - 1] == '0')
                nd--;
        digits[nd] = 0;
        e = strchr(tmp, 'e');
        exp = e ? atoi(e + 1) : 0;
        if (v == 0)
                exp = 0;
        if (signbit(v))
                off += snprintf(buf + off, len - off, "-");
        if (exp >= -4 && exp < 16) {
                if (exp < 0) {
                        off += snprintf(buf + off, len - off, "0.");
                        for (int i = -1; i > exp; i--)
                                off += snprintf(buf + off, len - off, "0");
                        off += snprintf(buf + off, len - off, "%s", digits);
                } else {
                        for (int i = 0; i <= exp; i++)
                                off += snprintf(buf + off, len - off, "%c", i < nd ? digits[i] : '0');
                        off += snprintf(buf + off, len - off, ".%s", nd > exp + 1 ? digits + exp + 1 : "0");
                }
                return off;
        }
        off += snprintf(buf + off, len - off, "%c", digits[0]);
        if (nd > 1)
                off += snprintf(buf + off, len - off, ".%s", digits + 1);
        off += snprintf(buf + off, len - off, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return off;
}

/* One element of a numeric tensor as text. */
static int format_elem(const struct ops_tensor *in, int64_t i, char *buf, size_t len)
{
        const void *p = in->data;

        switch (in->dtype) {
        case PROTO_DTYPE_FLOAT32: return format_float(((const float *)p)[i], 1, buf, len);
        case PROTO_DTYPE_FLOAT64: return format_float(((const double *)p)[i], 0, buf, len);
        case PROTO_DTYPE_FLOAT16: {
                float f;
                ops_half_to_float_n(&f, (const uint16_t *)p + i, 1);
                return format_float(f, 1, buf, len);
        }
        case PROTO_DTYPE_BFLOAT16:
                return format_float(ops_bf16_to_float(((const uint16_t *)p)[i]), 1, buf, len);
        case PROTO_DTYPE_BOOL: return snprintf(buf, len, ((const uint8_t *)p)[i] ? "True" : "False");
        case PROTO_DTYPE_INT8: return snprintf(buf, len, "%d", ((const int8_t *)p)[i]);
        case PROTO_DTYPE_UINT8: return snprintf(buf, len, "%u", ((const uint8_t *)p)[i]);
        case PROTO_DTYPE_INT16: return snprintf(buf, len, "%d", ((const int16_t *)p)[i]);
        case PROTO_DTYPE_UINT16: return snprintf(buf, len, "%u", ((const uint16_t *)p)[i]);
        case PROTO_DTYPE_INT32: return snprintf(buf, len, "%d", ((const int32_t *)p)[i]);
        case PROTO_DTYPE_UINT32: return snprintf(buf, len, "%u", ((const uint32_t *)p)[i]);
        case PROTO_DTYPE_INT64: return snprintf(buf, len, "%lld", (long long)((const int64_t *)p)[i]);
        case PROTO_DTYPE_UINT64:
                return snprintf(buf, len, "%llu", (unsigned long long)((const uint64_t *)p)[i]);
        default: return snprintf(buf, len, "?");
        }
}

int ops_cast_strings(const struct ops_tensor *in, const struct ops_tensor *out, char *err,
                     size_t errlen)
{
        int64_t n = ops_tensor_numel(in);
        char buf[64];

        if (in->dtype != PROTO_DTYPE_STRING && out->dtype != PROTO_DTYPE_STRING)
                return 1;
        if (n <= 0)
                return 0;
        if (in->dtype == PROTO_DTYPE_STRING && out->dtype == PROTO_DTYPE_STRING) {
                memmove(out->data, in->data, (size_t)n * 8);
                return 0;
        }
        if (out->dtype == PROTO_DTYPE_STRING) {
                struct ops_str **o = out->data;
                for (int64_t i = 0; i < n; i++) {
                        int len = format_elem(in, i, buf, sizeof(buf));
                        if (len < 0 || (size_t)len >= sizeof(buf))
                                len = 0;
                        o[i] = ops_str_new(buf, (size_t)len, err, errlen);
                        if (!o[i])
                                return -ENOMEM;
                        if ((i & 4095) == 4095 && ops_runctx_check(err, errlen))
                                return -ECANCELED;
                }
                return 0;
        }
        /* Text to numbers: strtod's reading (decimal, hex, "nan", "inf", any case, leading
         * blanks), then the numeric conversion from float64. Unparsable text reads 0. */
        {
                struct ops_str *const *s = in->data;
                struct ops_tensor d = *in;
                double *tmp = ops_buf_alloc((uint64_t)n * sizeof(double), err, errlen);
                if (!tmp)
                        return -ENOMEM;
                for (int64_t i = 0; i < n; i++) {
                        uint32_t len;
                        const char *b = ops_str_bytes(s[i], &len);
                        tmp[i] = strtod(b, NULL); /* NUL-terminated (strings.h) */
                }
                d.dtype = PROTO_DTYPE_FLOAT64;
                d.data = tmp;
                ops_convert_tensor(&d, out);
                ops_buf_free(tmp);
        }
        return 0;
}

/* ------------------------------------------------------------ StringNormalizer */

struct strnorm {
        int action; /* 0 NONE, 1 LOWER, 2 UPPER */
        int sensitive;
        const struct ops_attr *stop;
};

static int strnorm_parse(const struct ops_call *call, struct strnorm *p, char *err, size_t errlen)
{
        const char *a = nn_attr_str(call, "case_change_action", "NONE");
        const struct ops_attr *sw = ops_attr_find(call, "stopwords");

        if (strcmp(a, "NONE") == 0)
                p->action = 0;
        else if (strcmp(a, "LOWER") == 0)
                p->action = 1;
        else if (strcmp(a, "UPPER") == 0)
                p->action = 2;
        else
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: case_change_action '%.40s' "
                                "is not NONE, LOWER or UPPER", a);
        p->sensitive = ops_attr_int(call, "is_case_sensitive", 0) != 0;
        if (sw && (sw->type != OPS_ATTR_STRINGS || (sw->n && !sw->strings)))
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: stopwords must be strings");
        p->stop = sw;
        if (ops_attr_find(call, "locale") && ops_attr_find(call, "locale")->type != OPS_ATTR_STRING)
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: locale must be a string");
        return 0;
}

static int ieq(const char *a, size_t la, const char *b, size_t lb)
{
        if (la != lb)
                return 0;
        for (size_t i = 0; i < la; i++) {
                unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
                if (x >= 'A' && x <= 'Z')
                        x = (unsigned char)(x - 'A' + 'a');
                if (y >= 'A' && y <= 'Z')
                        y = (unsigned char)(y - 'A' + 'a');
                if (x != y)
                        return 0;
        }
        return 1;
}

static int is_stopword(const struct strnorm *p, const struct ops_str *s)
{
        uint32_t len;
        const char *b = ops_str_bytes(s, &len);

        for (int64_t k = 0; p->stop && k < p->stop->n; k++) {
                const char *w = p->stop->strings[k] ? p->stop->strings[k] : "";
                size_t lw = strlen(w);
                if (p->sensitive ? lw == len && memcmp(w, b, len) == 0 : ieq(w, lw, b, len))
                        return 1;
        }
        return 0;
}

/* Input [C] or [1,C]; output the same rank with the stopwords taken out, [1] or [1,1]
 * holding "" when none is left. The count needs the data. */
static int strnorm_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct strnorm p;
        int64_t c, kept = 0;
        int rc;

        if (call->nin != 1 || call->nout != 1)
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: expected 1 input and 1 output");
        if (x->dtype != PROTO_DTYPE_STRING)
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: input must be a string tensor");
        if (!(x->ndim == 1 || (x->ndim == 2 && x->dims[0] == 1)))
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: input must be [C] or [1,C]");
        rc = strnorm_parse(call, &p, err, errlen);
        if (rc)
                return rc;
        c = x->dims[x->ndim - 1];
        if (c < 0)
                return ops_fail(err, errlen, -EINVAL, "StringNormalizer: invalid input shape");
        if (p.stop && p.stop->n) {
                if (!x->data && c)
                        return ops_fail(err, errlen, -EINVAL,
                                        "StringNormalizer: the output shape depends on the data");
                for (int64_t i = 0; i < c; i++)
                        kept += !is_stopword(&p, ((struct ops_str *const *)x->data)[i]);
        } else {
                kept = c;
        }
        call->out[0].dtype = PROTO_DTYPE_STRING;
        call->out[0].ndim = x->ndim;
        call->out[0].dims[0] = 1;
        call->out[0].dims[x->ndim - 1] = kept ? kept : 1;
        return 0;
}

static int strnorm_run(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct ops_str *const *in = x->data;
        struct ops_str **out = call->out[0].data;
        int64_t c = x->dims[x->ndim - 1], k = 0, cap = ops_tensor_numel(&call->out[0]);
        struct strnorm p;
        char msg[160];
        int rc = strnorm_parse(call, &p, err, errlen);

        if (rc)
                return rc;
        for (int64_t i = 0; i < c; i++) {
                uint32_t len;
                const char *b;
                if (is_stopword(&p, in[i]))
                        continue;
                if (k >= cap)
                        return ops_fail(err, errlen, -EINVAL, "StringNormalizer: output too small");
                b = ops_str_bytes(in[i], &len);
                if (!p.action) {
                        out[k++] = in[i];
                        continue;
                }
                msg[0] = 0;
                out[k] = ops_str_new(b, len, msg, sizeof(msg));
                if (!out[k])
                        return ops_fail(err, errlen, -ENOMEM, "StringNormalizer: %s", msg);
                for (uint32_t j = 0; j < len; j++) {
                        char ch = out[k]->s[j];
                        if (p.action == 1 && ch >= 'A' && ch <= 'Z')
                                out[k]->s[j] = (char)(ch - 'A' + 'a');
                        else if (p.action == 2 && ch >= 'a' && ch <= 'z')
                                out[k]->s[j] = (char)(ch - 'a' + 'A');
                }
                k++;
        }
        for (; k < cap; k++)
                out[k] = NULL; /* the empty string */
        return 0;
}

static void strnorm_cost(const struct ops_def *def, const struct ops_call *call,
                         uint64_t *ret_flops, uint64_t *ret_bytes)
{
        nn_cost_simple(call, 16, ret_flops, ret_bytes);
}

static const char *const strnorm_attrs[] = { "case_change_action", "is_case_sensitive", "locale",
                                             "stopwords", NULL };

const struct ops_def ops_strnorm_def = {
        .name = "StringNormalizer", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = strnorm_run, .cost = strnorm_cost,
        .infer = strnorm_infer, .since_version = 10, .attrs = strnorm_attrs,
};

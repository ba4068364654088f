/* ONNX model import (see onnx-import.h). The bytes are decoded with protobuf-c, using C code
 * generated at build time from the system's onnx.proto, in four steps:
 *
 *   1. a walk over the protobuf wire format bounds the nesting depth (protobuf-c recurses
 *      once per nested message and has no limit of its own) and rejects truncated input;
 *   2. protobuf-c unpacks the model through an allocator with a budget, so that a small
 *      file cannot make the decoder allocate without bound (a 2-byte empty message becomes
 *      a structure of a hundred bytes);
 *   3. every node, subgraphs included, is looked up in the operator registry at the version
 *      the model imports, and all unknown operators are reported together;
 *   4. the graph is converted: values, nodes, attributes, initializers (sizes checked against
 *      their dimensions), then ordered. Only then is storage for tensor data requested and
 *      filled, so a rejected model never takes device memory. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "ops/strings.h"
#include "proto/dtype.h"
#include "proto/errors.h"
#include "convert-opset.h"
#include "onnx-import.h"
#include "util/err.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian and is copied as is: port the tensor decoding first"
#endif

#define WIRE_MAX_DEPTH 64                 /* nested messages; GRAPH_MAX_DEPTH subgraphs fit */
#define DECODE_BUDGET_SLACK (64ull << 20) /* decoder memory beyond 4 bytes per input byte */

/* A tensor whose data is copied into storage once the whole model has been checked. */
struct pending {
        const Onnx__TensorProto *tp;
        struct ops_tensor *t;
        uint64_t off, bytes;
};

struct imp {
        char *err;
        size_t errlen;
        const struct onnx_import_env *env;
        const Onnx__ModelProto *m;
        int opset; /* default domain version, 0 when the model imports none */
        struct pending *pend;
        int npend, pend_cap;
        uint64_t total; /* storage bytes */
};

static int imp_fail(struct imp *im, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int imp_fail(struct imp *im, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err_vset(im->err, im->errlen, code, fmt, ap);
        va_end(ap);
        return code;
}

/* ---- step 1: wire format ---- */

static int read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *ret)
{
        uint64_t v = 0;

        for (int shift = 0; shift < 64; shift += 7) {
                if (*pos >= len)
                        return -1;
                uint8_t b = p[(*pos)++];
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -1;
}

/* 0, -1 malformed or truncated, -2 nested too deep. Fields unknown to the schema are
 * skipped; messages known to it are walked with their own descriptor. */
static int wire_check(const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *desc,
                      int depth)
{
        size_t pos = 0;
        uint64_t key, n;

        if (depth > WIRE_MAX_DEPTH)
                return -2;
        while (pos < len) {
                if (read_varint(p, len, &pos, &key) < 0 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
                        return -1;
                switch (key & 7) {
                case 0:
                        if (read_varint(p, len, &pos, &n) < 0)
                                return -1;
                        break;
                case 1:
                        if (len - pos < 8)
                                return -1;
                        pos += 8;
                        break;
                case 5:
                        if (len - pos < 4)
                                return -1;
                        pos += 4;
                        break;
                case 2: {
                        const ProtobufCFieldDescriptor *fd;
                        if (read_varint(p, len, &pos, &n) < 0 || n > len - pos)
                                return -1;
                        fd = desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3)) : NULL;
                        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                                int r = wire_check(p + pos, (size_t)n, fd->descriptor, depth + 1);
                                if (r < 0)
                                        return r;
                        }
                        pos += (size_t)n;
                        break;
                }
                default: /* groups (3, 4) are not in the schema; 6 and 7 do not exist */
                        return -1;
                }
        }
        return 0;
}

/* ---- step 2: decoding with a memory budget ---- */

struct budget {
        uint64_t used, limit;
};

/* Each block carries its size in front so that free can give it back to the budget. */
static void *budget_alloc(void *data, size_t size)
{
        struct budget *b = data;
        uint64_t *p;

        if (size > b->limit || b->used > b->limit - size || size > SIZE_MAX - 16)
                return NULL;
        p = malloc(size + 16);
        if (!p)
                return NULL;
        p[0] = size;
        b->used += size + 16;
        return (char *)p + 16;
}

static void budget_free(void *data, void *ptr)
{
        struct budget *b = data;
        uint64_t *p;

        if (!ptr)
                return;
        p = (uint64_t *)((char *)ptr - 16);
        b->used -= p[0] + 16;
        free(p);
}

/* ---- helpers ---- */

static int default_domain(const char *d)
{
        return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

/* Version of a domain the model imports, 0 when it imports none. */
static int domain_version(const struct imp *im, const char *domain)
{
        if (default_domain(domain))
                return im->opset;
        for (size_t i = 0; i < im->m->n_opset_import; i++) {
                const Onnx__OperatorSetIdProto *o = im->m->opset_import[i];
                if (o->domain && strcmp(o->domain, domain) == 0)
                        return (int)o->version;
        }
        return 0;
}

static const struct ops_def *op_lookup(const struct imp *im, const char *domain,
                                       const char *op_type, int version)
{
        if (im->env && im->env->lookup)
                return im->env->lookup(im->env->ctx, domain, op_type, version);
        return ops_lookup_onnx(domain, op_type, version);
}

/* The label graph_node_label gives the converted node, from the protobuf node. */
static const char *node_label(const Onnx__NodeProto *nd, int idx, char *buf, size_t len)
{
        char num[24];
        const char *name = nd->name && *nd->name ? nd->name : num;
        const char *op = nd->op_type ? nd->op_type : "";

        snprintf(num, sizeof(num), "#%d", idx);
        if (!default_domain(nd->domain))
                snprintf(buf, len, "node '%s' (%s.%s)", name, nd->domain, op);
        else
                snprintf(buf, len, "node '%s' (%s)", name, op);
        return buf;
}

static int utf8_valid(const char *s)
{
        const uint8_t *p = (const uint8_t *)s;

        while (*p) {
                int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
                      : (*p & 0xf8) == 0xf0 ? 3 : -1;
                if (n < 0 || (n == 1 && *p < 0xc2))
                        return 0;
                p++;
                for (int i = 0; i < n; i++, p++)
                        if ((*p & 0xc0) != 0x80)
                                return 0;
        }
        return 1;
}

static const char *dims_str(int ndim, const int64_t *dims, char *buf, size_t len)
{
        size_t off = (size_t)snprintf(buf, len, "[");

        for (int i = 0; i < ndim && off < len; i++)
                off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? "," : "", (long long)dims[i]);
        if (off < len)
                snprintf(buf + off, len - off, "]");
        return buf;
}

/* ---- step 3: unsupported operators ---- */

struct strbuf {
        char *s;
        size_t len, cap;
        int count;
};

static int sb_add(struct strbuf *b, const char *text)
{
        size_t n = strlen(text);

        if (b->len + n + 3 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 1024;
                while (cap < b->len + n + 3)
                        cap *= 2;
                char *ns = realloc(b->s, cap);
                if (!ns)
                        return -ENOMEM;
                b->s = ns;
                b->cap = cap;
        }
        if (b->len) {
                memcpy(b->s + b->len, "; ", 2);
                b->len += 2;
        }
        memcpy(b->s + b->len, text, n + 1);
        b->len += n;
        b->count++;
        return 0;
}

static int scan_graph(struct imp *im, const Onnx__GraphProto *gp, int depth, struct strbuf *unsup)
{
        char label[400], line[480];

        if (depth > GRAPH_MAX_DEPTH)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "subgraphs are nested more than %d deep",
                                GRAPH_MAX_DEPTH);
        for (size_t i = 0; i < gp->n_node; i++) {
                const Onnx__NodeProto *nd = gp->node[i];
                const char *dom = nd->domain ? nd->domain : "";
                int ver;

                node_label(nd, (int)i, label, sizeof(label));
                if (!nd->op_type || !*nd->op_type)
                        return imp_fail(im, PROTO_E_INVALID, "%s: no operator type", label);
                ver = domain_version(im, dom);
                if (!ver) {
                        if (default_domain(dom))
                                return imp_fail(im, PROTO_E_INVALID,
                                                "%s: the model imports no version of the default ONNX domain", label);
                        return imp_fail(im, PROTO_E_INVALID, "%s: the model does not import domain '%s'",
                                        label, dom);
                }
                if (!op_lookup(im, dom, nd->op_type,
                               default_domain(dom) ? convert_opset_version(nd->op_type, ver) : ver)) {
                        snprintf(line, sizeof(line), "%s: unsupported operator", label);
                        if (sb_add(unsup, line) < 0)
                                return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
                }
                for (size_t a = 0; a < nd->n_attribute; a++) {
                        const Onnx__AttributeProto *ap = nd->attribute[a];
                        if (ap->g) {
                                int rc = scan_graph(im, ap->g, depth + 1, unsup);
                                if (rc)
                                        return rc;
                        }
                }
        }
        return 0;
}

/* The list of unsupported nodes as the error message: as many entries as fit, then a count
 * of the rest. */
static int report_unsupported(struct imp *im, const struct strbuf *b)
{
        char tail[64];
        size_t cut;
        int shown = 0;

        if (b->len < im->errlen)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s", b->s);
        cut = 0;
        for (size_t i = 0; i + 2 < b->len; i++) {
                if (b->s[i] != ';' || b->s[i + 1] != ' ')
                        continue;
                if (i + 48 >= im->errlen)
                        break;
                cut = i;
                shown++;
        }
        snprintf(tail, sizeof(tail), "; ... and %d more unsupported nodes", b->count - shown);
        if (cut && im->errlen > cut + strlen(tail)) {
                memcpy(im->err, b->s, cut);
                snprintf(im->err + cut, im->errlen - cut, "%s", tail);
        } else if (im->errlen) {
                snprintf(im->err, im->errlen, "%d nodes use unsupported operators", b->count);
        }
        return PROTO_E_UNSUPPORTED;
}

/* ---- step 4: conversion ---- */

/* Element count a typed field must hold for dtype, and which field it is. */
static size_t typed_count(const Onnx__TensorProto *tp, int dtype, int *ret_other)
{
        size_t n = 0, all = tp->n_float_data + tp->n_int32_data + tp->n_int64_data +
                            tp->n_double_data + tp->n_uint64_data + tp->n_string_data;

        switch (dtype) {
        case PROTO_DTYPE_FLOAT32: n = tp->n_float_data; break;
        case PROTO_DTYPE_FLOAT64: n = tp->n_double_data; break;
        case PROTO_DTYPE_INT64: n = tp->n_int64_data; break;
        case PROTO_DTYPE_UINT32:
        case PROTO_DTYPE_UINT64: n = tp->n_uint64_data; break;
        default: n = tp->n_int32_data; break; /* the narrow integer types, bool, half types */
        }
        *ret_other = all != n;
        return n;
}

/* A STRING tensor: its string_data copied into the graph at once (no pending copy), the
 * element pointers to ops_str strings in one graph allocation. */
static int strings_from_proto(struct imp *im, struct graph *g, const Onnx__TensorProto *tp,
                              const char *what, struct ops_tensor *t, int64_t numel,
                              const struct ops_tensor **ret)
{
        struct ops_str **el;
        uint64_t total = 0, off = 0;
        char *store;
        int64_t bad;

        if (tp->has_raw_data || tp->n_float_data || tp->n_int32_data || tp->n_int64_data ||
            tp->n_double_data || tp->n_uint64_data)
                return imp_fail(im, PROTO_E_INVALID, "%s: a string tensor holds its strings in string_data only", what);
        if (tp->n_string_data != (uint64_t)numel)
                return imp_fail(im, PROTO_E_INVALID, "%s: holds %zu strings, its shape needs %lld", what,
                                tp->n_string_data, (long long)numel);
        for (size_t i = 0; i < tp->n_string_data; i++) {
                if (tp->string_data[i].len > UINT32_MAX - 16)
                        return imp_fail(im, PROTO_E_UNSUPPORTED, "%s: string %zu is over 4 GiB", what, i);
                bad = ops_utf8_check(tp->string_data[i].data, tp->string_data[i].len);
                if (bad >= 0)
                        return imp_fail(im, PROTO_E_INVALID, "%s: string %zu is not valid UTF-8 (byte %lld)",
                                        what, i, (long long)bad);
                /* bounded by the model's own bytes: no wrap */
                total += (ops_str_size(tp->string_data[i].len) + 7) & ~(uint64_t)7;
        }
        el = graph_alloc(g, (size_t)numel * sizeof(*el));
        store = graph_alloc(g, (size_t)total);
        if (!el || !store)
                return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
        for (size_t i = 0; i < tp->n_string_data; i++) {
                size_t len = tp->string_data[i].len;
                struct ops_str *str = (struct ops_str *)(void *)(store + off);
                str->len = (uint32_t)len;
                if (len)
                        memcpy(str->s, tp->string_data[i].data, len);
                str->s[len] = 0;
                el[i] = str;
                off += (ops_str_size(len) + 7) & ~(size_t)7;
        }
        t->data = el;
        *ret = t;
        return 0;
}

static int tensor_from_proto(struct imp *im, struct graph *g, const Onnx__TensorProto *tp,
                             const char *what, const struct ops_tensor **ret)
{
        int dtype = tp->has_data_type ? tp->data_type : 0;
        size_t esize = proto_dtype_size(dtype);
        struct ops_tensor *t;
        struct pending *p;
        int64_t numel, bytes;
        int other;
        char dbuf[200];

        if (!esize)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s: element type %d is not supported", what, dtype);
        if (tp->n_dims > OPS_MAX_DIMS)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s: %zu dimensions (at most %d)", what,
                                tp->n_dims, OPS_MAX_DIMS);
        for (size_t d = 0; d < tp->n_dims; d++)
                if (tp->dims[d] < 0)
                        return imp_fail(im, PROTO_E_INVALID, "%s: negative dimension %lld", what,
                                        (long long)tp->dims[d]);
        if (tp->n_external_data ||
            (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s: external data is not supported", what);
        if (tp->segment)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s: segmented tensors are not supported", what);
        t = graph_alloc(g, sizeof(*t));
        if (!t)
                return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
        t->dtype = dtype;
        t->ndim = (int)tp->n_dims;
        for (size_t d = 0; d < tp->n_dims; d++)
                t->dims[d] = tp->dims[d];
        numel = ops_tensor_numel(t);
        if (numel < 0 || __builtin_mul_overflow(numel, (int64_t)esize, &bytes))
                return imp_fail(im, PROTO_E_SHAPE, "%s: dimensions %s overflow", what,
                                dims_str(t->ndim, t->dims, dbuf, sizeof(dbuf)));
        if (dtype == PROTO_DTYPE_STRING)
                return strings_from_proto(im, g, tp, what, t, numel, ret);
        if (tp->has_raw_data) {
                if (tp->raw_data.len != (uint64_t)bytes)
                        return imp_fail(im, PROTO_E_INVALID, "%s: raw_data has %zu bytes but %s %s needs %lld",
                                        what, tp->raw_data.len, proto_dtype_name(dtype),
                                        dims_str(t->ndim, t->dims, dbuf, sizeof(dbuf)), (long long)bytes);
        } else {
                size_t n = typed_count(tp, dtype, &other);
                if (other || n != (uint64_t)numel)
                        return imp_fail(im, PROTO_E_INVALID,
                                        "%s: holds %zu values of the field for %s, %s needs %lld",
                                        what, n, proto_dtype_name(dtype),
                                        dims_str(t->ndim, t->dims, dbuf, sizeof(dbuf)), (long long)numel);
        }
        if (im->npend == im->pend_cap) {
                int cap = im->pend_cap ? im->pend_cap * 2 : 32;
                struct pending *np = realloc(im->pend, (size_t)cap * sizeof(*np));
                if (!np)
                        return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
                im->pend = np;
                im->pend_cap = cap;
        }
        p = &im->pend[im->npend++];
        p->tp = tp;
        p->t = t;
        p->bytes = (uint64_t)bytes;
        /* Sizes are bounded by the data present in the model, so the sum cannot wrap. */
        p->off = (im->total + GRAPH_ALIGN - 1) / GRAPH_ALIGN * GRAPH_ALIGN;
        im->total = p->off + p->bytes;
        *ret = t;
        return 0;
}

/* Copy a checked tensor's data into its place in storage. */
static void decode_tensor(const struct pending *p, uint8_t *storage)
{
        const Onnx__TensorProto *tp = p->tp;
        /* No storage when every tensor is empty: such a tensor has no data (and pointer
         * arithmetic on NULL is undefined even with a zero offset). */
        uint8_t *dst = storage ? storage + p->off : NULL;
        size_t n = p->bytes / proto_dtype_size(p->t->dtype);

        p->t->data = dst;
        if (tp->has_raw_data) {
                if (p->bytes)
                        memcpy(dst, tp->raw_data.data, p->bytes);
                return;
        }
        if (!p->bytes) /* empty tensor: nothing to copy, and the field arrays may be NULL */
                return;
        switch (p->t->dtype) {
        case PROTO_DTYPE_FLOAT32: memcpy(dst, tp->float_data, p->bytes); break;
        case PROTO_DTYPE_FLOAT64: memcpy(dst, tp->double_data, p->bytes); break;
        case PROTO_DTYPE_INT64: memcpy(dst, tp->int64_data, p->bytes); break;
        case PROTO_DTYPE_UINT64: memcpy(dst, tp->uint64_data, p->bytes); break;
        case PROTO_DTYPE_INT32: memcpy(dst, tp->int32_data, p->bytes); break;
        case PROTO_DTYPE_UINT32:
                for (size_t i = 0; i < n; i++)
                        ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
                break;
        case PROTO_DTYPE_INT16:
        case PROTO_DTYPE_UINT16:
        case PROTO_DTYPE_FLOAT16:  /* bit patterns, as ONNX stores them */
        case PROTO_DTYPE_BFLOAT16:
                for (size_t i = 0; i < n; i++)
                        ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i];
                break;
        case PROTO_DTYPE_INT8:
        case PROTO_DTYPE_UINT8:
                for (size_t i = 0; i < n; i++)
                        dst[i] = (uint8_t)tp->int32_data[i];
                break;
        case PROTO_DTYPE_BOOL:
                for (size_t i = 0; i < n; i++)
                        dst[i] = tp->int32_data[i] != 0;
                break;
        }
}

/* Declared type of a graph input or output: a tensor's dtype and shape; dtype sequence for
 * a sequence of tensors (rank open); nothing for an optional. */
static int parse_type(struct imp *im, const Onnx__TypeProto *tp, int required, const char *what,
                      const char *name, int *dtype, int *ndim, int64_t *dims)
{
        const Onnx__TypeProto__Tensor *tt;
        char dbuf[200];

        *dtype = 0;
        *ndim = -1;
        if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) {
                if (required)
                        return imp_fail(im, PROTO_E_INVALID, "%s '%s' has no type", what, name);
                return 0;
        }
        /* A sequence of tensors is one value of dtype sequence whose size varies; an
         * optional may be empty or hold its element, so its type is left open. */
        if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && tp->optional_type) {
                const Onnx__TypeProto *e = tp->optional_type->elem_type;
                if (e && e->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && e->sequence_type)
                        e = e->sequence_type->elem_type;
                if (!e || e->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
                        return imp_fail(im, PROTO_E_UNSUPPORTED,
                                        "%s '%s': only optional tensors and sequences of tensors are supported",
                                        what, name);
                return 0;
        }
        if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type) {
                const Onnx__TypeProto *e = tp->sequence_type->elem_type;
                if (e && e->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
                        return imp_fail(im, PROTO_E_UNSUPPORTED,
                                        "%s '%s': only sequences of tensors are supported", what, name);
                *dtype = PROTO_DTYPE_SEQUENCE;
                return 0;
        }
        if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
                return imp_fail(im, PROTO_E_UNSUPPORTED,
                                "%s '%s': only tensors, sequences of tensors and optionals are supported",
                                what, name);
        tt = tp->tensor_type;
        if (tt->has_elem_type && tt->elem_type) {
                if (!proto_dtype_size(tt->elem_type))
                        return imp_fail(im, PROTO_E_UNSUPPORTED, "%s '%s': element type %d is not supported",
                                        what, name, tt->elem_type);
                *dtype = tt->elem_type;
        } else if (required) {
                return imp_fail(im, PROTO_E_INVALID, "%s '%s' has no element type", what, name);
        }
        if (!tt->shape)
                return 0;
        if (tt->shape->n_dim > OPS_MAX_DIMS)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s '%s' has %zu dimensions (at most %d)",
                                what, name, tt->shape->n_dim, OPS_MAX_DIMS);
        int64_t prod = *dtype ? (int64_t)proto_dtype_size(*dtype) : 1;
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
                const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
                dims[k] = -1;
                if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
                        if (d->dim_value < 0)
                                return imp_fail(im, PROTO_E_INVALID, "%s '%s' has negative dimension %lld",
                                                what, name, (long long)d->dim_value);
                        dims[k] = d->dim_value;
                }
        }
        *ndim = (int)tt->shape->n_dim;
        /* Declared extents must describe a tensor that can exist (open ones aside). */
        for (int k = 0; k < *ndim; k++)
                if (dims[k] >= 0 && __builtin_mul_overflow(prod, dims[k], &prod))
                        return imp_fail(im, PROTO_E_SHAPE, "%s '%s': dimensions %s overflow", what, name,
                                        dims_str(*ndim, dims, dbuf, sizeof(dbuf)));
        return 0;
}

static int convert_graph(struct imp *im, const Onnx__GraphProto *gp, struct graph *parent,
                         int depth, struct graph **ret);

static int int_cmp(const void *a, const void *b)
{
        int x = *(const int *)a, y = *(const int *)b;

        return x < y ? -1 : x > y;
}

/* Sort a node's implicit reads and drop repeats (two branches reading one value): a search
 * per added value would be quadratic in what a subgraph reads. Returns the new count. */
static int implicit_unique(int *list, int n)
{
        int k = 0;

        qsort(list, (size_t)n, sizeof(*list), int_cmp);
        for (int i = 0; i < n; i++)
                if (!k || list[k - 1] != list[i])
                        list[k++] = list[i];
        return k;
}

static int convert_attrs(struct imp *im, struct graph *g, int node, const Onnx__NodeProto *nd,
                         int depth, const char *label)
{
        struct graph_node *gn = &g->nodes[node];
        int *implicit = NULL, nimplicit = 0, cap = 0, rc = 0;
        char what[480];

        if (nd->n_attribute > OPS_MAX_ATTRS)
                return imp_fail(im, PROTO_E_UNSUPPORTED, "%s: %zu attributes (at most %d)", label,
                                nd->n_attribute, OPS_MAX_ATTRS);
        gn->attr = graph_alloc(g, sizeof(*gn->attr) * (nd->n_attribute ? nd->n_attribute : 1));
        if (!gn->attr)
                return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
        for (size_t k = 0; k < nd->n_attribute; k++) {
                const Onnx__AttributeProto *ap = nd->attribute[k];
                struct ops_attr *a = &gn->attr[k];
                const char *name = ap->name ? ap->name : "";

                if (!*name || strlen(name) >= OPS_NAME_MAX) {
                        rc = imp_fail(im, PROTO_E_INVALID, "%s: attribute name '%s' is empty or longer than %d",
                                      label, name, OPS_NAME_MAX - 1);
                        goto out;
                }
                for (size_t j = 0; j < k; j++)
                        if (strcmp(gn->attr[j].name, name) == 0) {
                                rc = imp_fail(im, PROTO_E_INVALID, "%s: attribute '%s' given twice", label, name);
                                goto out;
                        }
                if (ap->ref_attr_name && *ap->ref_attr_name) {
                        rc = imp_fail(im, PROTO_E_UNSUPPORTED, "%s: attribute '%s' refers to a function attribute",
                                      label, name);
                        goto out;
                }
                if (!ap->has_type) {
                        rc = imp_fail(im, PROTO_E_INVALID, "%s: attribute '%s' has no type", label, name);
                        goto out;
                }
                snprintf(a->name, sizeof(a->name), "%s", name);
                snprintf(what, sizeof(what), "%s: attribute '%s'", label, name);
                switch (ap->type) {
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
                        a->type = OPS_ATTR_FLOAT;
                        a->f = ap->f;
                        break;
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
                        a->type = OPS_ATTR_INT;
                        a->i = ap->i;
                        break;
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
                        a->type = OPS_ATTR_STRING;
                        a->s = graph_strndup(g, (const char *)ap->s.data, ap->s.len);
                        if (!a->s)
                                goto nomem;
                        break;
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
                        float *f = graph_alloc(g, sizeof(float) * ap->n_floats);
                        if (!f)
                                goto nomem;
                        if (ap->n_floats)
                                memcpy(f, ap->floats, sizeof(float) * ap->n_floats);
                        a->type = OPS_ATTR_FLOATS;
                        a->floats = f;
                        a->n = (int)ap->n_floats;
                        break;
                }
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: {
                        int64_t *v = graph_alloc(g, sizeof(int64_t) * ap->n_ints);
                        if (!v)
                                goto nomem;
                        if (ap->n_ints)
                                memcpy(v, ap->ints, sizeof(int64_t) * ap->n_ints);
                        a->type = OPS_ATTR_INTS;
                        a->ints = v;
                        a->n = (int)ap->n_ints;
                        break;
                }
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
                        char **v = graph_alloc(g, sizeof(char *) * ap->n_strings);
                        if (!v)
                                goto nomem;
                        for (size_t j = 0; j < ap->n_strings; j++) {
                                v[j] = graph_strndup(g, (const char *)ap->strings[j].data, ap->strings[j].len);
                                if (!v[j])
                                        goto nomem;
                        }
                        a->type = OPS_ATTR_STRINGS;
                        a->strings = (const char *const *)v;
                        a->n = (int)ap->n_strings;
                        break;
                }
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
                        if (!ap->t) {
                                rc = imp_fail(im, PROTO_E_INVALID, "%s has no tensor", what);
                                goto out;
                        }
                        rc = tensor_from_proto(im, g, ap->t, what, &a->t);
                        if (rc)
                                goto out;
                        a->type = OPS_ATTR_TENSOR;
                        break;
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: {
                        struct graph *sub;
                        if (!ap->g) {
                                rc = imp_fail(im, PROTO_E_INVALID, "%s has no graph", what);
                                goto out;
                        }
                        rc = convert_graph(im, ap->g, g, depth + 1, &sub);
                        if (rc) {
                                /* Say where the subgraph hangs, after what went wrong in it. */
                                char inner[512];
                                snprintf(inner, sizeof(inner), "%s", im->err);
                                imp_fail(im, rc, "%s: %s", what, inner);
                                goto out;
                        }
                        a->type = OPS_ATTR_GRAPH;
                        a->graph = sub;
                        gn = &g->nodes[node];
                        /* What the subgraph reads from this graph, the node reads too. */
                        for (int v = 0; v < sub->nvalues; v++) {
                                if (sub->values[v].kind != GRAPH_VALUE_OUTER)
                                        continue;
                                if (nimplicit == cap) {
                                        cap = cap ? cap * 2 : 16;
                                        int *ni = realloc(implicit, sizeof(int) * (size_t)cap);
                                        if (!ni)
                                                goto nomem;
                                        implicit = ni;
                                }
                                implicit[nimplicit++] = sub->values[v].outer;
                        }
                        break;
                }
                case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
                        /* Optional's "type": what an empty optional would hold. Values carry
                         * their own type here, so only its presence is kept. */
                        a->type = OPS_ATTR_INT;
                        a->i = ap->tp ? (int64_t)ap->tp->value_case : 0;
                        break;
                default:
                        rc = imp_fail(im, PROTO_E_UNSUPPORTED, "%s has type %d, which is not supported",
                                      what, (int)ap->type);
                        goto out;
                }
                gn->nattr = (int)k + 1;
        }
        if (nimplicit)
                nimplicit = implicit_unique(implicit, nimplicit);
        if (nimplicit) {
                gn->implicit = graph_alloc(g, sizeof(int) * (size_t)nimplicit);
                if (!gn->implicit)
                        goto nomem;
                memcpy(gn->implicit, implicit, sizeof(int) * (size_t)nimplicit);
                gn->nimplicit = nimplicit;
        }
out:
        free(implicit);
        return rc;
nomem:
        free(implicit);
        return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
}

static int convert_node(struct imp *im, struct graph *g, int node, const Onnx__NodeProto *nd,
                        int depth)
{
        struct graph_node *gn = &g->nodes[node];
        const struct ops_def *def = gn->def;
        char label[400];
        int nin = (int)nd->n_input, nout = (int)nd->n_output;

        graph_node_label(gn, label, sizeof(label));
        /* Variadic operators (Concat, Sum, Split, ...) meet the limits of an ops_call. */
        if (nd->n_input > OPS_MAX_INPUTS || nd->n_output > OPS_MAX_OUTPUTS)
                return imp_fail(im, PROTO_E_UNSUPPORTED,
                                "%s: %zu inputs and %zu outputs (at most %d and %d are supported)",
                                label, nd->n_input, nd->n_output, OPS_MAX_INPUTS, OPS_MAX_OUTPUTS);
        if (nin < def->min_inputs || nin > def->max_inputs) {
                if (def->min_inputs == def->max_inputs)
                        return imp_fail(im, PROTO_E_INVALID, "%s: %zu inputs, the operator takes %d",
                                        label, nd->n_input, def->min_inputs);
                return imp_fail(im, PROTO_E_INVALID, "%s: %zu inputs, the operator takes %d to %d",
                                label, nd->n_input, def->min_inputs, def->max_inputs);
        }
        if (nd->n_output < 1 || nout > def->outputs)
                return imp_fail(im, PROTO_E_INVALID, "%s: %zu outputs, the operator has %s%d",
                                label, nd->n_output, def->outputs > 1 ? "1 to " : "", def->outputs);
        gn->in = graph_alloc(g, sizeof(int) * (size_t)(nin ? nin : 1));
        if (!gn->in)
                return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
        for (int i = 0; i < nin; i++) {
                const char *name = nd->input[i] ? nd->input[i] : "";
                int v = *name ? graph_resolve(g, name) : -1;
                gn = &g->nodes[node];
                if (v == -ENOMEM)
                        return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
                if (*name && v < 0)
                        return imp_fail(im, PROTO_E_INVALID, "%s: input '%s' is not defined", label, name);
                gn->in[i] = v;
        }
        gn->nin = nin;
        return convert_attrs(im, g, node, nd, depth, label);
}

/* Whether node n reads only the dtype of its input i: CastLike's "like" (input 1) tells the
 * target type and nothing else. */
static int reads_type_only(const struct graph_node *n, int i)
{
        return i == 1 && n->def && n->def->name && strcmp(n->def->name, "CastLike") == 0 &&
               (!n->domain || !*n->domain);
}

/* A graph input whose data nothing reads (only CastLike's type, or nothing at all: function
 * expansions fold CastLike into a Cast) keeps its declared dtype but not its shape, since no
 * specification gives the shape a meaning there; exporters and the ONNX test data bind such
 * inputs with whatever shape is at hand. */
static void relax_type_only_inputs(struct graph *g)
{
        for (int k = 0; k < g->ninputs; k++) {
                int v = g->inputs[k], read = g->values[v].output >= 0;

                for (int n = 0; !read && n < g->nnodes; n++) {
                        const struct graph_node *gn = &g->nodes[n];

                        for (int i = 0; !read && i < gn->nin; i++)
                                read = gn->in[i] == v && !reads_type_only(gn, i);
                        for (int i = 0; !read && i < gn->nimplicit; i++)
                                read = gn->implicit[i] == v;
                }
                if (!read)
                        g->values[v].ndim = -1;
        }
}

static int convert_graph(struct imp *im, const Onnx__GraphProto *gp, struct graph *parent,
                         int depth, struct graph **ret)
{
        struct graph *g = graph_new(parent);
        int rc = 0, dtype, ndim;
        int64_t dims[OPS_MAX_DIMS];
        char label[400], what[480], ferr[512];

        *ret = NULL;
        if (!g)
                return imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
        g->opset = im->opset;
        if (depth > GRAPH_MAX_DEPTH) {
                rc = imp_fail(im, PROTO_E_UNSUPPORTED, "subgraphs are nested more than %d deep", GRAPH_MAX_DEPTH);
                goto fail;
        }
        if (gp->n_sparse_initializer) {
                rc = imp_fail(im, PROTO_E_UNSUPPORTED, "sparse initializers are not supported");
                goto fail;
        }
        for (size_t i = 0; i < gp->n_initializer; i++) {
                const Onnx__TensorProto *tp = gp->initializer[i];
                const struct ops_tensor *t;
                int v;
                if (!tp->name || !*tp->name) {
                        rc = imp_fail(im, PROTO_E_INVALID, "initializer %zu has no name", i);
                        goto fail;
                }
                snprintf(what, sizeof(what), "initializer '%s'", tp->name);
                rc = tensor_from_proto(im, g, tp, what, &t);
                if (rc)
                        goto fail;
                v = graph_add_value(g, tp->name, GRAPH_VALUE_INIT, t->dtype, t->ndim, t->dims);
                if (v < 0) {
                        rc = v == -EEXIST
                                     ? imp_fail(im, PROTO_E_INVALID, "initializer '%s' is defined twice", tp->name)
                                     : imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
                        goto fail;
                }
                g->values[v].tensor = t;
        }
        g->inputs = graph_alloc(g, sizeof(int) * (gp->n_input ? gp->n_input : 1));
        if (!g->inputs)
                goto nomem;
        for (size_t i = 0; i < gp->n_input; i++) {
                const Onnx__ValueInfoProto *vi = gp->input[i];
                const char *name = vi->name ? vi->name : "";
                int v = graph_find_value(g, name);
                if (!*name || (depth == 0 && !utf8_valid(name))) {
                        rc = imp_fail(im, PROTO_E_INVALID, "input %zu has no valid name", i);
                        goto fail;
                }
                /* Older models list initializers among the inputs; they stay constants. */
                if (v >= 0 && g->values[v].kind == GRAPH_VALUE_INIT)
                        continue;
                if (v >= 0) {
                        rc = imp_fail(im, PROTO_E_INVALID, "input '%s' is listed twice", name);
                        goto fail;
                }
                rc = parse_type(im, vi->type, depth == 0, "input", name, &dtype, &ndim, dims);
                if (rc)
                        goto fail;
                v = graph_add_value(g, name, GRAPH_VALUE_INPUT, dtype, ndim, dims);
                if (v < 0)
                        goto nomem;
                g->inputs[g->ninputs++] = v;
        }
        /* Nodes and the values they define first, so that inputs may name any of them. */
        for (size_t i = 0; i < gp->n_node; i++) {
                const Onnx__NodeProto *nd = gp->node[i];
                int n = graph_add_node(g, nd->name, nd->op_type,
                                       default_domain(nd->domain) ? "" : nd->domain, NULL);
                if (n < 0)
                        goto nomem;
                g->nodes[n].def = op_lookup(im, nd->domain ? nd->domain : "", nd->op_type,
                                            default_domain(nd->domain)
                                                    ? convert_opset_version(nd->op_type, im->opset)
                                                    : domain_version(im, nd->domain));
                graph_node_label(&g->nodes[n], label, sizeof(label));
                if (!g->nodes[n].def) { /* step 3 found them all; be safe anyway */
                        rc = imp_fail(im, PROTO_E_UNSUPPORTED, "%s: unsupported operator", label);
                        goto fail;
                }
                g->nodes[n].out = graph_alloc(g, sizeof(int) * (nd->n_output ? nd->n_output : 1));
                if (!g->nodes[n].out)
                        goto nomem;
                for (size_t j = 0; j < nd->n_output; j++) {
                        const char *name = nd->output[j] ? nd->output[j] : "";
                        int v = -1;
                        if (*name) {
                                v = graph_add_value(g, name, GRAPH_VALUE_NODE, 0, -1, NULL);
                                if (v == -EEXIST) {
                                        rc = imp_fail(im, PROTO_E_INVALID, "%s: output '%s' is already defined",
                                                      label, name);
                                        goto fail;
                                }
                                if (v < 0)
                                        goto nomem;
                                g->values[v].producer = n;
                        }
                        g->nodes[n].out[j] = v;
                }
                g->nodes[n].nout = (int)nd->n_output;
        }
        for (size_t i = 0; i < gp->n_node; i++) {
                rc = convert_node(im, g, (int)i, gp->node[i], depth);
                if (rc)
                        goto fail;
        }
        /* Nodes of old opsets to their current form (may add nodes after these). */
        for (size_t i = 0; i < gp->n_node; i++) {
                rc = convert_opset_node(g, (int)i, im->opset, ferr, sizeof(ferr));
                if (rc) {
                        rc = imp_fail(im, rc == -ENOMEM ? PROTO_E_NO_MEMORY : PROTO_E_UNSUPPORTED,
                                      "%s", ferr);
                        goto fail;
                }
        }
        g->outputs = graph_alloc(g, sizeof(int) * (gp->n_output ? gp->n_output : 1));
        g->output_decl = graph_alloc(g, sizeof(*g->output_decl) * (gp->n_output ? gp->n_output : 1));
        if (!g->outputs || !g->output_decl)
                goto nomem;
        for (size_t k = 0; k < gp->n_output; k++) {
                const Onnx__ValueInfoProto *vi = gp->output[k];
                const char *name = vi->name ? vi->name : "";
                int v;
                if (!*name || (depth == 0 && !utf8_valid(name))) {
                        rc = imp_fail(im, PROTO_E_INVALID, "output %zu has no valid name", k);
                        goto fail;
                }
                v = graph_resolve(g, name);
                if (v == -ENOMEM)
                        goto nomem;
                if (v < 0) {
                        rc = imp_fail(im, PROTO_E_INVALID, "output '%s' is not computed by the graph", name);
                        goto fail;
                }
                rc = parse_type(im, vi->type, 0, "output", name, &dtype, &ndim, dims);
                if (rc)
                        goto fail;
                g->output_decl[k].dtype = dtype;
                g->output_decl[k].ndim = ndim;
                for (int d = 0; d < ndim; d++)
                        g->output_decl[k].dims[d] = dims[d];
                if (g->values[v].output < 0)
                        g->values[v].output = (int)k;
                g->outputs[g->noutputs++] = v;
        }
        if (depth == 0 && g->ninputs + g->noutputs > GRAPH_MAX_IO) {
                rc = imp_fail(im, PROTO_E_UNSUPPORTED,
                              "the graph has %d inputs and %d outputs; a run binds at most %d together",
                              g->ninputs, g->noutputs, GRAPH_MAX_IO);
                goto fail;
        }
        if (depth == 0 && g->noutputs == 0) {
                rc = imp_fail(im, PROTO_E_INVALID, "the graph has no outputs");
                goto fail;
        }
        if (graph_finalize(g, ferr, sizeof(ferr)) < 0) {
                rc = imp_fail(im, PROTO_E_INVALID, "%s", ferr);
                goto fail;
        }
        if (depth == 0)
                relax_type_only_inputs(g);
        *ret = g;
        return 0;
nomem:
        rc = imp_fail(im, PROTO_E_NO_MEMORY, "out of memory");
fail:
        graph_free(g);
        return rc;
}

int onnx_import(const void *data, size_t len, const struct onnx_import_env *env,
                struct graph **ret, char *err, size_t errlen)
{
        struct budget budget = { 0, 4 * (uint64_t)len + DECODE_BUDGET_SLACK };
        ProtobufCAllocator alloc = { budget_alloc, budget_free, &budget };
        struct imp im = { .err = err, .errlen = errlen, .env = env };
        struct strbuf unsup = { 0 };
        Onnx__ModelProto *m = NULL;
        struct graph *g = NULL;
        void *mem = NULL;
        int rc = 0, w;

        *ret = NULL;
        if (errlen)
                err[0] = 0;
        if (!len)
                return imp_fail(&im, PROTO_E_INVALID, "the model is empty");
        if (len > ONNX_MAX_MODEL_BYTES)
                return imp_fail(&im, PROTO_E_LIMIT, "the model has %zu bytes, more than the limit of %llu",
                                len, (unsigned long long)ONNX_MAX_MODEL_BYTES);
        w = wire_check(data, len, &onnx__model_proto__descriptor, 0);
        if (w == -2)
                return imp_fail(&im, PROTO_E_INVALID, "the model nests messages more than %d deep",
                                WIRE_MAX_DEPTH);
        if (w < 0)
                return imp_fail(&im, PROTO_E_INVALID, "the model is not valid protobuf (truncated or malformed)");
        m = onnx__model_proto__unpack(&alloc, len, data);
        if (!m)
                return imp_fail(&im, PROTO_E_INVALID,
                                "the model cannot be decoded: malformed ModelProto, "
                                "or it needs more than %llu bytes to decode",
                                (unsigned long long)budget.limit);
        im.m = m;
        if (!m->graph) {
                rc = imp_fail(&im, PROTO_E_INVALID, "the model has no graph");
                goto out;
        }
        /* Every node looks its domain up in this list: a model listing millions of them
         * would make the import quadratic. Real models import a handful. */
        if (m->n_opset_import > ONNX_MAX_OPSET_IMPORTS) {
                rc = imp_fail(&im, PROTO_E_LIMIT, "the model imports %zu operator sets, more than %d",
                              m->n_opset_import, ONNX_MAX_OPSET_IMPORTS);
                goto out;
        }
        for (size_t i = 0; i < m->n_opset_import; i++) {
                const Onnx__OperatorSetIdProto *o = m->opset_import[i];
                if (!o->has_version || o->version < 1 || o->version > INT32_MAX) {
                        rc = imp_fail(&im, PROTO_E_INVALID, "opset_import of domain '%s' has no valid version",
                                      o->domain ? o->domain : "");
                        goto out;
                }
                if (default_domain(o->domain) && o->version > im.opset)
                        im.opset = (int)o->version;
        }
        rc = scan_graph(&im, m->graph, 0, &unsup);
        if (!rc && unsup.count)
                rc = report_unsupported(&im, &unsup);
        if (rc)
                goto out;
        rc = convert_graph(&im, m->graph, NULL, 0, &g);
        if (rc)
                goto out;
        if (im.total) {
                if (env && env->alloc) {
                        rc = env->alloc(env->ctx, im.total, &mem, err, errlen);
                        if (rc)
                                goto out;
                } else {
                        mem = malloc(im.total);
                        if (!mem) {
                                rc = imp_fail(&im, PROTO_E_NO_MEMORY, "out of memory for %llu bytes of tensors",
                                              (unsigned long long)im.total);
                                goto out;
                        }
                        g->storage_owned = 1;
                }
                g->storage = mem;
                g->storage_bytes = im.total;
        }
        for (int i = 0; i < im.npend; i++)
                decode_tensor(&im.pend[i], mem);
        *ret = g;
        g = NULL;
out:
        graph_free(g);
        free(im.pend);
        free(unsup.s);
        protobuf_c_message_free_unpacked(&m->base, &alloc);
        if (rc && errlen)
                graph_sanitize(err);
        return rc;
}

/* The operator registry and what the kernels share: lookup by name, attribute access,
 * element counts, ONNX multidirectional broadcasting of shapes, IEEE half conversions done
 * with integer operations (so they do not depend on compiler or CPU half support), the
 * validation every operator's check starts with, and the thread limit handed to OpenBLAS. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "ops-internal.h"
#include "util/err.h"
#include "util/siphash.h"

static const struct ops_def *const ops_core[] = {
        &ops_add_def,  &ops_sub_def,    &ops_mul_def,     &ops_div_def,
        &ops_relu_def, &ops_sigmoid_def, &ops_tanh_def,   &ops_matmul_def,
        &ops_softmax_def, &ops_cast_def, NULL,
};

/* Each kernel family exports a NULL-terminated list; the registry is their concatenation,
 * core (the operators of wire launches) first. */
static const struct ops_def *const *const ops_families[] = {
        ops_core, ops_family_elementwise, ops_family_reduce, ops_family_shape,
        ops_family_nn, ops_family_control,
};

#define NFAMILIES (sizeof(ops_families) / sizeof(ops_families[0]))

/* The index, built once by registry_build (pthread_once) and read-only afterwards, so
 * lookups from any thread need no lock:
 * - defs: the flat registry, a definition's position being its id;
 * - by_ptr: open addressing from a definition's address to its id (definitions stay const,
 *   so the id cannot be stored in them);
 * - names: one entry per (domain, name), found through by_name, open addressing on a keyed
 *   hash of the name (names come from clients: a keyed hash keeps adversarial names from
 *   piling into one probe run), each entry holding its definitions in chain[] sorted by
 *   since_version, newest first, so an opset lookup walks a list of one to three. */
struct reg_name {
        const char *domain; /* "" for the default domain */
        const char *name;
        uint16_t first;     /* id of the first definition in registry order (ops_lookup) */
        uint16_t start, n;  /* its definitions: chain[start .. start + n) */
};

static struct {
        const struct ops_def **defs;
        size_t n;
        uint16_t *by_ptr;   /* id + 1, 0 = empty; by_ptr_mask + 1 slots */
        size_t by_ptr_mask;
        struct reg_name *names;
        size_t nnames;
        uint16_t *by_name;  /* names index + 1, 0 = empty */
        size_t by_name_mask;
        uint16_t *chain;
} reg;

static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static const char *norm_domain(const char *d)
{
        return !d || !*d || strcmp(d, "ai.onnx") == 0 ? "" : d;
}

static size_t ptr_slot(const struct ops_def *def)
{
        /* Fibonacci hashing of the address; definitions are a few dozen bytes apart. */
        return (size_t)(((uint64_t)(uintptr_t)def * 0x9e3779b97f4a7c15ULL) >> 32) &
               reg.by_ptr_mask;
}

static size_t table_size(size_t n)
{
        size_t size = 16;

        while (size < 2 * n)
                size *= 2;
        return size;
}

/* The names entry of (domain, name), domain normalised; NULL when none. */
static const struct reg_name *name_find(const char *domain, const char *name)
{
        size_t i = (size_t)util_hash_str(name) & reg.by_name_mask;

        for (; reg.by_name[i]; i = (i + 1) & reg.by_name_mask) {
                const struct reg_name *e = &reg.names[reg.by_name[i] - 1];

                if (strcmp(e->name, name) == 0 && strcmp(e->domain, domain) == 0)
                        return e;
        }
        return NULL;
}

static void oom(void)
{
        /* At start-up, before any client: nothing sensible to run without the registry. */
        fprintf(stderr, "ops: out of memory building the operator registry\n");
        abort();
}

static void registry_build(void)
{
        size_t n = 0, i, j, k;
        uint16_t *fill;

        for (size_t f = 0; f < NFAMILIES; f++)
                for (const struct ops_def *const *d = ops_families[f]; *d; d++)
                        n++;
        /* Ids travel as uint16_t; a registry this large would be a build error. */
        if (n >= UINT16_MAX) {
                fprintf(stderr, "ops: %zu operator definitions do not fit 16-bit ids\n", n);
                abort();
        }
        reg.n = n;
        reg.defs = calloc(n ? n : 1, sizeof(*reg.defs));
        reg.by_ptr_mask = table_size(n) - 1;
        reg.by_ptr = calloc(reg.by_ptr_mask + 1, sizeof(*reg.by_ptr));
        reg.names = calloc(n ? n : 1, sizeof(*reg.names));
        reg.by_name_mask = table_size(n) - 1;
        reg.by_name = calloc(reg.by_name_mask + 1, sizeof(*reg.by_name));
        reg.chain = calloc(n ? n : 1, sizeof(*reg.chain));
        fill = calloc(n ? n : 1, sizeof(*fill));
        if (!reg.defs || !reg.by_ptr || !reg.names || !reg.by_name || !reg.chain || !fill)
                oom();
        n = 0;
        for (size_t f = 0; f < NFAMILIES; f++)
                for (const struct ops_def *const *d = ops_families[f]; *d; d++)
                        reg.defs[n++] = *d;
        for (i = 0; i < n; i++) {
                const struct ops_def *def = reg.defs[i];
                const char *domain = norm_domain(def->domain);
                struct reg_name *e = (struct reg_name *)name_find(domain, def->name);

                for (j = ptr_slot(def); reg.by_ptr[j]; j = (j + 1) & reg.by_ptr_mask)
                        ;
                reg.by_ptr[j] = (uint16_t)(i + 1);
                if (!e) {
                        e = &reg.names[reg.nnames++];
                        e->domain = domain;
                        e->name = def->name;
                        e->first = (uint16_t)i;
                        for (j = (size_t)util_hash_str(def->name) & reg.by_name_mask;
                             reg.by_name[j]; j = (j + 1) & reg.by_name_mask)
                                ;
                        reg.by_name[j] = (uint16_t)reg.nnames;
                }
                e->n++;
        }
        for (i = 0, k = 0; i < reg.nnames; i++) {
                reg.names[i].start = (uint16_t)k;
                k += reg.names[i].n;
        }
        /* Registry order within each name, then a stable insertion sort by since_version,
         * newest first: ties keep registry order, as the linear search they replace did. */
        for (i = 0; i < n; i++) {
                const struct reg_name *e =
                        name_find(norm_domain(reg.defs[i]->domain), reg.defs[i]->name);
                size_t at = (size_t)(e - reg.names);

                reg.chain[e->start + fill[at]++] = (uint16_t)i;
        }
        for (i = 0; i < reg.nnames; i++) {
                uint16_t *c = reg.chain + reg.names[i].start;

                for (j = 1; j < reg.names[i].n; j++) {
                        uint16_t v = c[j];

                        for (k = j; k > 0 && reg.defs[c[k - 1]]->since_version <
                                                     reg.defs[v]->since_version; k--)
                                c[k] = c[k - 1];
                        c[k] = v;
                }
        }
        free(fill);
}

void ops_registry_init(void)
{
        pthread_once(&reg_once, registry_build);
}

size_t ops_count(void)
{
        ops_registry_init();
        return reg.n;
}

const struct ops_def *ops_by_id(size_t id)
{
        ops_registry_init();
        return id < reg.n ? reg.defs[id] : NULL;
}

const struct ops_def *ops_get(size_t i)
{
        return ops_by_id(i);
}

size_t ops_id(const struct ops_def *def)
{
        size_t i;

        ops_registry_init();
        for (i = ptr_slot(def); reg.by_ptr[i]; i = (i + 1) & reg.by_ptr_mask)
                if (reg.defs[reg.by_ptr[i] - 1] == def)
                        return reg.by_ptr[i] - 1u;
        return reg.n;
}

size_t ops_index(const struct ops_def *def)
{
        return ops_id(def);
}

const struct ops_def *ops_lookup(const char *name)
{
        const struct reg_name *e;

        if (!name)
                return NULL;
        ops_registry_init();
        e = name_find("", name);
        return e ? reg.defs[e->first] : NULL;
}

const struct ops_def *ops_lookup_onnx(const char *domain, const char *name, int opset)
{
        const struct reg_name *e;

        if (!name)
                return NULL;
        ops_registry_init();
        e = name_find(norm_domain(domain), name);
        if (!e)
                return NULL;
        for (size_t i = 0; i < e->n; i++) {
                const struct ops_def *o = reg.defs[reg.chain[e->start + i]];

                if (o->infer && o->since_version <= opset)
                        return o;
        }
        return NULL;
}

/* The input count of a call against the definition's range. */
static int check_ninputs(const struct ops_def *def, const struct ops_call *call, char *err,
                         size_t errlen)
{
        if (call->nin >= def->min_inputs && call->nin <= def->max_inputs &&
            call->nin <= OPS_MAX_INPUTS)
                return 0;
        if (def->min_inputs == def->max_inputs)
                return ops_fail(err, errlen, -EINVAL, "%s: expected %d input%s, got %d",
                                def->name, def->min_inputs, def->min_inputs == 1 ? "" : "s",
                                call->nin);
        return ops_fail(err, errlen, -EINVAL, "%s: expected %d to %d inputs, got %d", def->name,
                        def->min_inputs, def->max_inputs, call->nin);
}

/* The attributes of a call: a valid count, then (unless any_name: the caller's infer knows
 * them) terminated names, each in allowed, a type up to max_type, no name twice. */
static int check_attrs(const struct ops_def *def, const struct ops_call *call,
                       const char *const *allowed, int any_name, int max_type, char *err,
                       size_t errlen)
{
        const struct ops_attr *a;
        int i, j;

        if (call->nattr < 0 || call->nattr > OPS_MAX_ATTRS)
                return ops_fail(err, errlen, -EINVAL, "%s: invalid attribute count %d",
                                def->name, call->nattr);
        for (i = 0; !any_name && i < call->nattr; i++) {
                a = &call->attr[i];
                if (!memchr(a->name, '\0', OPS_NAME_MAX))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: attribute %d has an unterminated name", def->name,
                                        i);
                for (j = 0; allowed && allowed[j]; j++)
                        if (strcmp(allowed[j], a->name) == 0)
                                break;
                if (!allowed || !allowed[j])
                        return ops_fail(err, errlen, -EINVAL, "%s: unknown attribute '%s'",
                                        def->name, a->name);
                if (a->type < OPS_ATTR_INT || a->type > max_type)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: attribute '%s' has invalid type %d", def->name,
                                        a->name, a->type);
                for (j = 0; j < i; j++)
                        if (strcmp(call->attr[j].name, a->name) == 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: attribute '%s' given twice", def->name,
                                                a->name);
        }
        return 0;
}

int ops_check_by_infer(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen)
{
        char a[OPS_SHAPE_STR_MAX], b[OPS_SHAPE_STR_MAX];
        struct ops_call probe;
        int i, rc;

        rc = check_ninputs(def, call, err, errlen);
        if (rc)
                return rc;
        /* Trailing outputs are optional (ONNX): 1 to def->outputs of them. */
        if (call->nout < 1 || call->nout > def->outputs || call->nout > OPS_MAX_OUTPUTS) {
                if (def->outputs == 1)
                        return ops_fail(err, errlen, -EINVAL, "%s: expected 1 output, got %d",
                                        def->name, call->nout);
                return ops_fail(err, errlen, -EINVAL, "%s: expected 1 to %d outputs, got %d",
                                def->name, def->outputs, call->nout);
        }
        if (!def->infer)
                return ops_fail(err, errlen, -EINVAL, "%s: cannot be launched on its own",
                                def->name);
        /* Without a list of names, infer is the one that knows the attributes. */
        rc = check_attrs(def, call, def->attrs, !def->attrs, OPS_ATTR_STRINGS, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < call->nin; i++) {
                rc = ops_check_tensor(def, "input", i, &call->in[i], err, errlen);
                if (rc)
                        return rc;
        }
        for (i = 0; i < call->nout; i++) {
                if (!call->out[i].dtype && i > 0)
                        continue;
                rc = ops_check_tensor(def, "output", i, &call->out[i], err, errlen);
                if (rc)
                        return rc;
        }
        /* infer writes the outputs: it runs on a probe holding the used part of the call
         * (a whole call is 4.6 KB, most of it attribute slots a launch does not use) */
        probe.nin = call->nin;
        probe.nout = call->nout;
        probe.nattr = call->nattr;
        probe.opset = call->opset;
        probe.graph_run = call->graph_run;
        probe.graph_ctx = call->graph_ctx;
        /* infer reads no input past def->max_inputs and writes no output past def->outputs:
         * only that much is cleared (an Add clears one output, not 1.7 KB) */
        int in_room = def->max_inputs < OPS_MAX_INPUTS ? def->max_inputs : OPS_MAX_INPUTS;
        int out_room = def->outputs < OPS_MAX_OUTPUTS ? def->outputs : OPS_MAX_OUTPUTS;
        memcpy(probe.in, call->in, sizeof(probe.in[0]) * (size_t)call->nin);
        if (in_room > call->nin)
                memset(probe.in + call->nin, 0, sizeof(probe.in[0]) * (size_t)(in_room - call->nin));
        memset(probe.out, 0, sizeof(probe.out[0]) * (size_t)out_room);
        memcpy(probe.attr, call->attr, sizeof(probe.attr[0]) * (size_t)call->nattr);
        rc = def->infer(def, &probe, err, errlen);
        if (rc < 0)
                return rc;
        for (i = 0; i < call->nout; i++) {
                const struct ops_tensor *o = &call->out[i], *w = &probe.out[i];

                if (!o->dtype && i > 0)
                        continue;
                if (o->dtype != w->dtype) {
                        if (i == 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: output dtype %s but expected %s", def->name,
                                                ops_dtype_str(o->dtype, a, sizeof(a)),
                                                ops_dtype_str(w->dtype, b, sizeof(b)));
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: output %d dtype %s but expected %s", def->name, i,
                                        ops_dtype_str(o->dtype, a, sizeof(a)),
                                        ops_dtype_str(w->dtype, b, sizeof(b)));
                }
                if (!ops_shape_equal(o, w)) {
                        if (i == 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: output shape %s but expected %s", def->name,
                                                ops_shape_str(o, a, sizeof(a)),
                                                ops_shape_str(w, b, sizeof(b)));
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: output %d shape %s but expected %s", def->name, i,
                                        ops_shape_str(o, a, sizeof(a)),
                                        ops_shape_str(w, b, sizeof(b)));
                }
        }
        return 0;
}

const struct ops_attr *ops_attr_find(const struct ops_call *call, const char *name)
{
        int i, n = call->nattr;

        if (n > OPS_MAX_ATTRS)
                n = OPS_MAX_ATTRS;
        /* Names come off the wire and need not be terminated inside the array. */
        for (i = 0; i < n; i++)
                if (strncmp(call->attr[i].name, name, OPS_NAME_MAX) == 0)
                        return &call->attr[i];
        return NULL;
}

int64_t ops_attr_int(const struct ops_call *call, const char *name, int64_t def)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        return a && a->type == OPS_ATTR_INT ? a->i : def;
}

double ops_attr_float(const struct ops_call *call, const char *name, double def)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        if (!a)
                return def;
        if (a->type == OPS_ATTR_FLOAT)
                return a->f;
        if (a->type == OPS_ATTR_INT)
                return (double)a->i;
        return def;
}

int64_t ops_tensor_numel(const struct ops_tensor *t)
{
        int64_t n = 1;
        int i;

        if (t->ndim < 0 || t->ndim > OPS_MAX_DIMS)
                return -1;
        for (i = 0; i < t->ndim; i++)
                if (t->dims[i] < 0)
                        return -1;
        /* Any zero dim makes the tensor empty, whatever the product of the others. */
        for (i = 0; i < t->ndim; i++)
                if (t->dims[i] == 0)
                        return 0;
        for (i = 0; i < t->ndim; i++)
                if (__builtin_mul_overflow(n, t->dims[i], &n))
                        return -1;
        return n;
}

int ops_poll(const char *op, char *err, size_t errlen)
{
        char msg[160];

        if (!ops_runctx_check(msg, sizeof(msg)))
                return 0;
        return ops_fail(err, errlen, -ECANCELED, "%s: %s", op, msg);
}

int ops_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err_vset(err, errlen, rc, fmt, ap);
        va_end(ap);
        return rc;
}

const char *ops_shape_str(const struct ops_tensor *t, char *buf, size_t len)
{
        size_t off;
        int i, n = t->ndim;

        if (!len)
                return buf;
        if (n < 0 || n > OPS_MAX_DIMS) {
                snprintf(buf, len, "<rank %d>", n);
                return buf;
        }
        off = (size_t)snprintf(buf, len, "[");
        for (i = 0; i < n && off < len; i++)
                off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? "," : "",
                                        (long long)t->dims[i]);
        if (off < len)
                snprintf(buf + off, len - off, "]");
        return buf;
}

const char *ops_dtype_str(int dtype, char *buf, size_t len)
{
        const char *name = proto_dtype_name(dtype);

        if (name)
                snprintf(buf, len, "%s", name);
        else
                snprintf(buf, len, "dtype %d", dtype);
        return buf;
}

int ops_shape_equal(const struct ops_tensor *a, const struct ops_tensor *b)
{
        if (a->ndim != b->ndim)
                return 0;
        return a->ndim <= 0 || a->ndim > OPS_MAX_DIMS ||
               memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof(a->dims[0])) == 0;
}

int ops_check_tensor(const struct ops_def *def, const char *what, int idx,
                     const struct ops_tensor *t, char *err, size_t errlen)
{
        size_t size = proto_dtype_size(t->dtype);
        int64_t n, bytes;
        int i;

        if (t->ndim < 0 || t->ndim > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "%s: %s %d has invalid rank %d",
                                def->name, what, idx, t->ndim);
        for (i = 0; i < t->ndim; i++)
                if (t->dims[i] < 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: %s %d has negative dimension %lld at axis %d",
                                        def->name, what, idx, (long long)t->dims[i], i);
        n = ops_tensor_numel(t);
        if (n < 0 || (size && __builtin_mul_overflow(n, (int64_t)size, &bytes)))
                return ops_fail(err, errlen, -EINVAL, "%s: %s %d is too large", def->name,
                                what, idx);
        return 0;
}

int ops_check_common(const struct ops_def *def, const struct ops_call *call,
                     const char *const *allowed, char *err, size_t errlen)
{
        int i, rc;

        rc = check_ninputs(def, call, err, errlen);
        if (rc)
                return rc;
        if (call->nout != def->outputs || call->nout > OPS_MAX_OUTPUTS)
                return ops_fail(err, errlen, -EINVAL, "%s: expected %d output%s, got %d",
                                def->name, def->outputs, def->outputs == 1 ? "" : "s",
                                call->nout);
        /* wire launches carry INT and FLOAT attributes only */
        rc = check_attrs(def, call, allowed, 0, OPS_ATTR_FLOAT, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < call->nin; i++) {
                rc = ops_check_tensor(def, "input", i, &call->in[i], err, errlen);
                if (rc)
                        return rc;
        }
        for (i = 0; i < call->nout; i++) {
                rc = ops_check_tensor(def, "output", i, &call->out[i], err, errlen);
                if (rc)
                        return rc;
        }
        return 0;
}

int ops_check_output(const struct ops_def *def, const struct ops_call *call, int dtype,
                     const struct ops_tensor *want, char *err, size_t errlen)
{
        const struct ops_tensor *out = &call->out[0];
        char b1[OPS_SHAPE_STR_MAX], b2[OPS_SHAPE_STR_MAX];

        if (out->dtype != dtype)
                return ops_fail(err, errlen, -EINVAL, "%s: output dtype %s but expected %s",
                                def->name, ops_dtype_str(out->dtype, b1, sizeof(b1)),
                                ops_dtype_str(dtype, b2, sizeof(b2)));
        if (!ops_shape_equal(out, want))
                return ops_fail(err, errlen, -EINVAL, "%s: output shape %s but expected %s",
                                def->name, ops_shape_str(out, b1, sizeof(b1)),
                                ops_shape_str(want, b2, sizeof(b2)));
        return 0;
}

int ops_broadcast_shape(const struct ops_tensor *a, const struct ops_tensor *b,
                        struct ops_tensor *ret, char *err, size_t errlen)
{
        char b1[OPS_SHAPE_STR_MAX], b2[OPS_SHAPE_STR_MAX];
        int64_t dims[OPS_MAX_DIMS], da, db;
        int i, n, ia, ib;

        if (a->ndim < 0 || a->ndim > OPS_MAX_DIMS || b->ndim < 0 || b->ndim > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "invalid rank %d or %d", a->ndim,
                                b->ndim);
        n = a->ndim > b->ndim ? a->ndim : b->ndim;
        for (i = 0; i < n; i++) {
                /* Right-aligned: missing leading dims count as 1. */
                ia = i - (n - a->ndim);
                ib = i - (n - b->ndim);
                da = ia >= 0 ? a->dims[ia] : 1;
                db = ib >= 0 ? b->dims[ib] : 1;
                if (da < 0 || db < 0 || (da != db && da != 1 && db != 1))
                        return ops_fail(err, errlen, -EINVAL,
                                        "cannot broadcast shapes %s and %s",
                                        ops_shape_str(a, b1, sizeof(b1)),
                                        ops_shape_str(b, b2, sizeof(b2)));
                dims[i] = da == 1 ? db : da;
        }
        /* ret may be a or b, so it is written only now. */
        ret->ndim = n;
        memcpy(ret->dims, dims, (size_t)n * sizeof(dims[0]));
        return 0;
}

void ops_broadcast_strides(const struct ops_tensor *t, const struct ops_tensor *out,
                           int64_t *strides)
{
        uint64_t s = 1; /* wraps harmlessly for empty tensors, whose strides go unused */
        int d, td;

        for (d = out->ndim - 1; d >= 0; d--) {
                td = d - (out->ndim - t->ndim);
                if (td < 0 || t->dims[td] == 1) {
                        strides[d] = 0;
                } else {
                        strides[d] = (int64_t)s;
                }
                if (td >= 0)
                        s *= (uint64_t)t->dims[td];
        }
}

uint64_t ops_mul_sat(uint64_t a, uint64_t b)
{
        uint64_t r;

        return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t ops_add_sat(uint64_t a, uint64_t b)
{
        uint64_t r;

        return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Rounds the finite nonzero value m * 2^(e - p), m having its leading one at bit p (p > 10),
 * to a half with sign, to nearest even, overflowing to infinity. */
static uint16_t ops_half_round(uint16_t sign, int e, uint64_t m, int p)
{
        uint64_t h, rem, halfway;
        int shift;

        if (e > 15)
                return sign | 0x7c00;
        if (e >= -14) {
                shift = p - 10;
                h = ((uint64_t)(e + 15) << 10) + (m >> shift) - 0x400;
        } else {
                /* Subnormal: count units of 2^-24. Below 2^-25 everything rounds to 0. */
                if (e < -25)
                        return sign;
                shift = p - 24 - e;
                h = m >> shift;
        }
        rem = m & (((uint64_t)1 << shift) - 1);
        halfway = (uint64_t)1 << (shift - 1);
        /* A carry out of the mantissa bumps the exponent, up to 0x7c00 = infinity. */
        if (rem > halfway || (rem == halfway && (h & 1)))
                h++;
        return (uint16_t)(sign | h);
}

uint16_t ops_float_to_half(float f)
{
        uint32_t x, exp, mant;
        uint16_t sign;

        memcpy(&x, &f, sizeof(x));
        sign = (uint16_t)((x >> 16) & 0x8000);
        exp = (x >> 23) & 0xff;
        mant = x & 0x7fffff;
        if (exp == 0xff) {
                if (mant)
                        return (uint16_t)(sign | 0x7e00 | (mant >> 13));
                return sign | 0x7c00;
        }
        /* Single-precision subnormals are far below half's smallest subnormal. */
        if (exp == 0)
                return sign;
        return ops_half_round(sign, (int)exp - 127, mant | 0x800000, 23);
}

uint16_t ops_double_to_half(double d)
{
        uint64_t x, exp, mant;
        uint16_t sign;

        memcpy(&x, &d, sizeof(x));
        sign = (uint16_t)((x >> 48) & 0x8000);
        exp = (x >> 52) & 0x7ff;
        mant = x & 0xfffffffffffffULL;
        if (exp == 0x7ff) {
                if (mant)
                        return (uint16_t)(sign | 0x7e00 | ((mant >> 42) & 0x3ff));
                return sign | 0x7c00;
        }
        if (exp == 0)
                return sign;
        return ops_half_round(sign, (int)exp - 1023, mant | (1ULL << 52), 52);
}

float ops_half_to_float(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000) << 16;
        uint32_t exp = (h >> 10) & 0x1f;
        uint32_t mant = h & 0x3ff;
        uint32_t x;
        int e;
        float f;

        if (exp == 0x1f) {
                x = sign | 0x7f800000 | (mant << 13);
        } else if (exp) {
                x = sign | ((exp + 112) << 23) | (mant << 13);
        } else if (!mant) {
                x = sign;
        } else {
                /* Subnormal half: normalise, every one is a normal float. */
                e = 1;
                while (!(mant & 0x400)) {
                        mant <<= 1;
                        e--;
                }
                x = sign | ((uint32_t)(e + 112) << 23) | ((mant & 0x3ff) << 13);
        }
        memcpy(&f, &x, sizeof(f));
        return f;
}

void ops_half_to_float_n(float *dst, const uint16_t *src, size_t n)
{
        size_t i;

        for (i = 0; i < n; i++)
                dst[i] = ops_half_to_float(src[i]);
}

void ops_float_to_half_n(uint16_t *dst, const float *src, size_t n)
{
        size_t i;

        for (i = 0; i < n; i++)
                dst[i] = ops_float_to_half(src[i]);
}

float ops_bf16_to_float(uint16_t h)
{
        uint32_t x = (uint32_t)h << 16;
        float f;

        memcpy(&f, &x, sizeof(f));
        return f;
}

uint16_t ops_float_to_bf16(float f)
{
        uint32_t x;

        memcpy(&x, &f, sizeof(x));
        if ((x & 0x7fffffff) > 0x7f800000)
                return (uint16_t)((x >> 16) | 0x40);
        /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even; a carry
         * into the exponent is the correct rounding up, to infinity at the top. */
        return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

uint16_t ops_double_to_bf16(double d)
{
        float f = (float)d;
        uint32_t x;

        /* Round to odd on the way to float, so that the second rounding to bfloat16 cannot
         * land on a tie the first one created: an inexact float gets an odd last bit. */
        if (f == f && (double)f != d && f - f == 0) {
                memcpy(&x, &f, sizeof(x));
                if (!(x & 1))
                        f = nextafterf(f, d > (double)f ? INFINITY : -INFINITY);
        }
        return ops_float_to_bf16(f);
}

void ops_set_threads(int n)
{
        openblas_set_num_threads(n < 1 ? 1 : n);
}

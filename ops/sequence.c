/* Sequence and optional operators of ONNX graphs (see sequence.h): SequenceConstruct,
 * SequenceEmpty, SequenceInsert, SequenceAt, SequenceErase, SequenceLength, SplitToSequence,
 * ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement. SequenceMap runs a
 * subgraph and lives with the control-flow operators (control.c).
 *
 * A sequence's size in bytes depends on the tensors it holds, so infer reads the inputs'
 * data (as Reshape does) and run writes the block infer sized. Every sequence read is
 * validated (proto_seq_check) since graph inputs come from clients as plain bytes; indices
 * are checked against the sequence's length. Without readable data (wire launches, cost
 * estimates) infer fails, which the callers take as "depends on the data". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runctx.h"
#include "sequence.h"
#include "shape-common.h"

int seq_open(const struct ops_tensor *t, const char *op, const char *what, struct seq_view *ret,
             char *err, size_t errlen)
{
        struct proto_seq_header h;
        char d[OPS_DTYPE_STR_MAX];
        const char *why = "";
        int64_t n;

        if (t->dtype != PROTO_DTYPE_SEQUENCE)
                return ops_fail(err, errlen, -EINVAL, "%s: %s is %s, expected a sequence", op, what,
                                t->dtype ? ops_dtype_str(t->dtype, d, sizeof(d)) : "missing");
        n = ops_tensor_numel(t);
        if (t->ndim != 1 || n < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: %s is not a 1-D sequence block", op, what);
        if (!t->data)
                return ops_fail(err, errlen, -EINVAL, "%s: needs the value of its %s", op, what);
        if (proto_seq_check(t->data, (uint64_t)n, &h, &why) < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: %s is not a valid sequence: %s", op, what, why);
        ret->count = h.count;
        ret->elem_dtype = h.elem_dtype;
        ret->base = t->data;
        return 0;
}

void seq_at(const struct seq_view *v, uint32_t i, struct ops_tensor *ret)
{
        struct proto_seq_entry e;

        proto_seq_get(v->base, i, &e);
        memset(ret, 0, sizeof(*ret));
        ret->dtype = e.dtype;
        ret->ndim = e.ndim;
        memcpy(ret->dims, e.dims, sizeof(e.dims[0]) * (size_t)e.ndim);
        ret->data = (void *)(v->base + e.offset);
}

/* Entries of n tensors of one element type (elem_dtype 0: theirs) and the block's size;
 * *ret_entries is malloc'd (NULL for none). */
static int seq_plan(const struct ops_tensor *t, uint32_t n, int *elem_dtype, const char *op,
                    struct proto_seq_entry **ret_entries, uint64_t *ret_size, char *err,
                    size_t errlen)
{
        struct proto_seq_entry *e = NULL;
        char d1[OPS_DTYPE_STR_MAX], d2[OPS_DTYPE_STR_MAX];
        uint64_t size;

        *ret_entries = NULL;
        if (n > PROTO_SEQ_MAX_COUNT)
                return ops_fail(err, errlen, -EINVAL, "%s: %u tensors are more than a sequence holds (%u)",
                                op, n, PROTO_SEQ_MAX_COUNT);
        if (n && !*elem_dtype)
                *elem_dtype = t[0].dtype;
        if (n) {
                e = calloc(n, sizeof(*e));
                if (!e)
                        return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", op);
        }
        for (uint32_t i = 0; i < n; i++) {
                if (t[i].dtype != *elem_dtype) {
                        free(e);
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: tensor %u is %s but the sequence holds %s", op, i,
                                        t[i].dtype ? ops_dtype_str(t[i].dtype, d1, sizeof(d1)) : "missing",
                                        ops_dtype_str(*elem_dtype, d2, sizeof(d2)));
                }
                e[i].dtype = t[i].dtype;
                e[i].ndim = t[i].ndim;
                if (t[i].ndim >= 0 && t[i].ndim <= OPS_MAX_DIMS)
                        memcpy(e[i].dims, t[i].dims, sizeof(e[i].dims[0]) * (size_t)t[i].ndim);
                e[i].bytes = proto_seq_tensor_bytes(t[i].dtype, t[i].ndim, t[i].dims);
                if (e[i].bytes == UINT64_MAX) {
                        free(e);
                        return ops_fail(err, errlen, -EINVAL, "%s: a sequence cannot hold a %s value",
                                        op, ops_dtype_str(t[i].dtype, d1, sizeof(d1)));
                }
        }
        if (*elem_dtype && proto_seq_tensor_bytes(*elem_dtype, 0, NULL) == UINT64_MAX) {
                free(e);
                return ops_fail(err, errlen, -EINVAL, "%s: a sequence cannot hold %s", op,
                                ops_dtype_str(*elem_dtype, d1, sizeof(d1)));
        }
        size = proto_seq_layout(e, n);
        if (size == UINT64_MAX || size > (uint64_t)INT64_MAX) {
                free(e);
                return ops_fail(err, errlen, -EINVAL, "%s: the sequence is too large", op);
        }
        *ret_entries = e;
        *ret_size = size;
        return 0;
}

/* Write n tensors (data readable, or NULL for empty ones) as a block into dst of size bytes. */
static void seq_fill(void *dst, uint64_t size, const struct ops_tensor *t, uint32_t n,
                     int elem_dtype, const struct proto_seq_entry *e)
{
        proto_seq_write(dst, size, n, elem_dtype, e);
        for (uint32_t i = 0; i < n; i++)
                if (e[i].bytes)
                        memcpy((uint8_t *)dst + e[i].offset, t[i].data, (size_t)e[i].bytes);
}

int seq_make(const struct ops_tensor *t, uint32_t n, int elem_dtype, const char *op,
             struct ops_tensor *ret, char *err, size_t errlen)
{
        struct proto_seq_entry *e;
        uint64_t size;
        char msg[160];
        int rc = seq_plan(t, n, &elem_dtype, op, &e, &size, err, errlen);

        if (rc)
                return rc;
        memset(ret, 0, sizeof(*ret));
        ret->data = ops_buf_alloc(size, msg, sizeof(msg));
        if (!ret->data) {
                free(e);
                return ops_fail(err, errlen, -ENOMEM, "%s: %s", op, msg);
        }
        seq_fill(ret->data, size, t, n, elem_dtype, e);
        free(e);
        ret->dtype = PROTO_DTYPE_SEQUENCE;
        ret->ndim = 1;
        ret->dims[0] = (int64_t)size;
        return 0;
}

/* ---------------------------------------------------------------- building outputs */

/* The tensors an operator's output sequence holds: data points into the inputs (or is NULL
 * where run computes it, SplitToSequence). */
struct seq_list {
        uint32_t n;
        int elem_dtype;
        struct ops_tensor *t; /* malloc'd */
};

typedef int (*seq_collect_fn)(const struct ops_def *def, const struct ops_call *call,
                              struct seq_list *l, char *err, size_t errlen);

static int list_alloc(struct seq_list *l, uint64_t n, const char *op, char *err, size_t errlen)
{
        if (n > PROTO_SEQ_MAX_COUNT)
                return ops_fail(err, errlen, -EINVAL, "%s: %llu tensors are more than a sequence holds (%u)",
                                op, (unsigned long long)n, PROTO_SEQ_MAX_COUNT);
        l->t = calloc(n ? n : 1, sizeof(*l->t));
        if (!l->t)
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", op);
        return 0;
}

static int seq_out_infer(seq_collect_fn collect, const struct ops_def *def, struct ops_call *call,
                         char *err, size_t errlen)
{
        struct seq_list l = { 0 };
        struct proto_seq_entry *e = NULL;
        uint64_t size = 0;
        int rc = shp_infer_begin(def, call, err, errlen);

        if (!rc)
                rc = collect(def, call, &l, err, errlen);
        if (!rc)
                rc = seq_plan(l.t, l.n, &l.elem_dtype, def->name, &e, &size, err, errlen);
        if (!rc) {
                int64_t dims[1] = { (int64_t)size };
                shp_set_out(call, 0, PROTO_DTYPE_SEQUENCE, 1, dims);
        }
        free(e);
        free(l.t);
        return rc;
}

static int seq_out_run(seq_collect_fn collect, const struct ops_def *def, const struct ops_call *call,
                       char *err, size_t errlen)
{
        struct seq_list l = { 0 };
        struct proto_seq_entry *e = NULL;
        uint64_t size = 0;
        int rc = collect(def, call, &l, err, errlen);

        if (!rc)
                rc = seq_plan(l.t, l.n, &l.elem_dtype, def->name, &e, &size, err, errlen);
        if (!rc && (call->out[0].dtype != PROTO_DTYPE_SEQUENCE || call->out[0].ndim != 1 ||
                    (uint64_t)call->out[0].dims[0] != size || (size && !call->out[0].data)))
                rc = ops_fail(err, errlen, -EINVAL, "%s: the output is not the sequence infer sized",
                              def->name);
        if (!rc)
                seq_fill(call->out[0].data, size, l.t, l.n, l.elem_dtype, e);
        free(e);
        free(l.t);
        return rc;
}

/* A scalar (or one-element) int32/int64 input i, read into *ret. */
static int index_in(const struct ops_def *def, const struct ops_call *call, int i, const char *what,
                    int64_t *ret, char *err, size_t errlen)
{
        const struct ops_tensor *t = &call->in[i];
        char d[OPS_DTYPE_STR_MAX];

        if (t->dtype != PROTO_DTYPE_INT32 && t->dtype != PROTO_DTYPE_INT64)
                return ops_fail(err, errlen, -EINVAL, "%s: %s is %s, expected int32 or int64",
                                def->name, what, ops_dtype_str(t->dtype, d, sizeof(d)));
        if (ops_tensor_numel(t) != 1)
                return ops_fail(err, errlen, -EINVAL, "%s: %s must be a scalar", def->name, what);
        if (!t->data)
                return ops_fail(err, errlen, -EINVAL, "%s: needs the value of its %s", def->name, what);
        *ret = t->dtype == PROTO_DTYPE_INT32 ? *(const int32_t *)t->data : *(const int64_t *)t->data;
        return 0;
}

/* Position pos of a sequence of n tensors, in [-n, n) (or [-n, n] when end_ok: insertion),
 * made non-negative. */
static int position(const struct ops_def *def, int64_t pos, uint32_t n, int end_ok, int64_t *ret,
                    char *err, size_t errlen)
{
        int64_t hi = end_ok ? (int64_t)n : (int64_t)n - 1;

        if (pos < -(int64_t)n || pos > hi)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: position %lld is outside [%lld, %lld] of a sequence of %u tensor%s",
                                def->name, (long long)pos, -(long long)n, (long long)hi, n,
                                n == 1 ? "" : "s");
        *ret = pos < 0 ? pos + (int64_t)n : pos;
        return 0;
}

/* ---------------------------------------------------------------- SequenceEmpty */

static int empty_collect(const struct ops_def *def, const struct ops_call *call, struct seq_list *l,
                         char *err, size_t errlen)
{
        l->elem_dtype = (int)ops_attr_int(call, "dtype", PROTO_DTYPE_FLOAT32);
        return list_alloc(l, 0, def->name, err, errlen);
}

static int empty_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_infer(empty_collect, def, call, err, errlen);
}

static int empty_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_run(empty_collect, def, call, err, errlen);
}

/* ---------------------------------------------------------------- SequenceConstruct */

static int construct_collect(const struct ops_def *def, const struct ops_call *call,
                             struct seq_list *l, char *err, size_t errlen)
{
        int rc = list_alloc(l, (uint64_t)call->nin, def->name, err, errlen);

        for (int i = 0; !rc && i < call->nin; i++) {
                if (ops_tensor_numel(&call->in[i]) > 0 && !call->in[i].data)
                        return ops_fail(err, errlen, -EINVAL, "%s: needs the value of input %d",
                                        def->name, i);
                l->t[l->n++] = call->in[i];
        }
        return rc;
}

static int construct_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_infer(construct_collect, def, call, err, errlen);
}

static int construct_run(const struct ops_def *def, const struct ops_call *call, char *err,
                         size_t errlen)
{
        return seq_out_run(construct_collect, def, call, err, errlen);
}

/* ---------------------------------------------------------------- SequenceInsert / Erase */

static int insert_collect(const struct ops_def *def, const struct ops_call *call, struct seq_list *l,
                          char *err, size_t errlen)
{
        struct seq_view v;
        int64_t pos;
        int rc = seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);

        if (rc)
                return rc;
        if (ops_tensor_numel(&call->in[1]) > 0 && !call->in[1].data)
                return ops_fail(err, errlen, -EINVAL, "%s: needs the value of its tensor", def->name);
        pos = v.count;
        if (shp_has_in(call, 2)) {
                rc = index_in(def, call, 2, "position", &pos, err, errlen);
                if (!rc)
                        rc = position(def, pos, v.count, 1, &pos, err, errlen);
                if (rc)
                        return rc;
        }
        rc = list_alloc(l, (uint64_t)v.count + 1, def->name, err, errlen);
        if (rc)
                return rc;
        l->elem_dtype = v.elem_dtype;
        for (uint32_t i = 0; i <= v.count; i++) {
                if (i == (uint32_t)pos)
                        l->t[l->n++] = call->in[1];
                if (i < v.count)
                        seq_at(&v, i, &l->t[l->n++]);
        }
        return 0;
}

static int insert_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_infer(insert_collect, def, call, err, errlen);
}

static int insert_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_run(insert_collect, def, call, err, errlen);
}

static int erase_collect(const struct ops_def *def, const struct ops_call *call, struct seq_list *l,
                         char *err, size_t errlen)
{
        struct seq_view v;
        int64_t pos = -1;
        int rc = seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);

        if (!rc && shp_has_in(call, 1))
                rc = index_in(def, call, 1, "position", &pos, err, errlen);
        if (!rc)
                rc = position(def, pos, v.count, 0, &pos, err, errlen);
        if (!rc)
                rc = list_alloc(l, v.count, def->name, err, errlen);
        if (rc)
                return rc;
        l->elem_dtype = v.elem_dtype;
        for (uint32_t i = 0; i < v.count; i++)
                if (i != (uint32_t)pos)
                        seq_at(&v, i, &l->t[l->n++]);
        return 0;
}

static int erase_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_infer(erase_collect, def, call, err, errlen);
}

static int erase_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_run(erase_collect, def, call, err, errlen);
}

/* ---------------------------------------------------------------- SequenceAt / Length */

static int at_find(const struct ops_def *def, const struct ops_call *call, struct ops_tensor *ret,
                   char *err, size_t errlen)
{
        struct seq_view v;
        int64_t pos;
        int rc = seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);

        if (!rc)
                rc = index_in(def, call, 1, "position", &pos, err, errlen);
        if (!rc)
                rc = position(def, pos, v.count, 0, &pos, err, errlen);
        if (!rc)
                seq_at(&v, (uint32_t)pos, ret);
        return rc;
}

static int at_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct ops_tensor t;
        int rc = shp_infer_begin(def, call, err, errlen);

        if (!rc)
                rc = at_find(def, call, &t, err, errlen);
        if (!rc)
                shp_set_out(call, 0, t.dtype, t.ndim, t.dims);
        return rc;
}

static int at_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        struct ops_tensor t;
        int rc = at_find(def, call, &t, err, errlen);
        uint64_t bytes;

        if (rc)
                return rc;
        if (t.dtype != call->out[0].dtype || !ops_shape_equal(&t, &call->out[0]))
                return ops_fail(err, errlen, -EINVAL, "%s: the output is not the tensor infer found", def->name);
        bytes = proto_seq_tensor_bytes(t.dtype, t.ndim, t.dims);
        if (bytes)
                memcpy(call->out[0].data, t.data, (size_t)bytes);
        return 0;
}

static int length_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int rc = shp_infer_begin(def, call, err, errlen);

        if (!rc && call->in[0].dtype != PROTO_DTYPE_SEQUENCE) {
                struct seq_view v;
                return seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);
        }
        if (!rc)
                shp_set_out(call, 0, PROTO_DTYPE_INT64, 0, NULL);
        return rc;
}

static int length_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        struct seq_view v;
        int rc = seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);
        int64_t n = v.count;

        if (!rc)
                memcpy(call->out[0].data, &n, sizeof(n));
        return rc;
}

/* ---------------------------------------------------------------- SplitToSequence */

/* The pieces: shapes only (data NULL, run copies them). */
static int split_collect(const struct ops_def *def, const struct ops_call *call, struct seq_list *l,
                         char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis = ops_attr_int(call, "axis", 0), keep = ops_attr_int(call, "keepdims", 1);
        int64_t len, chunk = 1, *sizes = NULL, npieces;
        int rc = 0, explicit = 0;

        if (x->ndim < 1)
                return ops_fail(err, errlen, -EINVAL, "%s: cannot split a scalar", def->name);
        if (axis < -x->ndim || axis >= x->ndim)
                return ops_fail(err, errlen, -EINVAL, "%s: axis %lld is outside a rank-%d input",
                                def->name, (long long)axis, x->ndim);
        if (axis < 0)
                axis += x->ndim;
        len = x->dims[axis];
        npieces = len;
        if (shp_has_in(call, 1)) {
                const struct ops_tensor *s = &call->in[1];
                int64_t n = ops_tensor_numel(s), sum = 0;
                if ((s->dtype != PROTO_DTYPE_INT32 && s->dtype != PROTO_DTYPE_INT64) || s->ndim > 1 || n < 0)
                        return ops_fail(err, errlen, -EINVAL, "%s: split must be an int32 or int64 scalar or 1-D tensor",
                                        def->name);
                if (n && !s->data)
                        return ops_fail(err, errlen, -EINVAL, "%s: needs the value of split", def->name);
                if (s->ndim == 0) {
                        chunk = s->dtype == PROTO_DTYPE_INT32 ? *(const int32_t *)s->data
                                                               : *(const int64_t *)s->data;
                        if (chunk <= 0)
                                return ops_fail(err, errlen, -EINVAL, "%s: split %lld is not positive",
                                                def->name, (long long)chunk);
                        npieces = len / chunk + (len % chunk != 0);
                } else {
                        explicit = 1;
                        npieces = n;
                        sizes = malloc(sizeof(*sizes) * (size_t)(n ? n : 1));
                        if (!sizes)
                                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
                        for (int64_t i = 0; i < n; i++) {
                                sizes[i] = s->dtype == PROTO_DTYPE_INT32 ? ((const int32_t *)s->data)[i]
                                                                          : ((const int64_t *)s->data)[i];
                                if (sizes[i] < 0 || __builtin_add_overflow(sum, sizes[i], &sum)) {
                                        free(sizes);
                                        return ops_fail(err, errlen, -EINVAL, "%s: split has a negative size",
                                                        def->name);
                                }
                        }
                        if (sum != len) {
                                free(sizes);
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: split sizes add up to %lld, the axis has %lld",
                                                def->name, (long long)sum, (long long)len);
                        }
                }
        }
        rc = list_alloc(l, (uint64_t)npieces, def->name, err, errlen);
        if (rc) {
                free(sizes);
                return rc;
        }
        l->elem_dtype = x->dtype;
        for (int64_t i = 0, start = 0; i < npieces; i++) {
                struct ops_tensor *t = &l->t[l->n++];
                int64_t n = explicit ? sizes[i] : chunk;
                if (start + n > len)
                        n = len - start;
                *t = *x;
                t->data = NULL;
                t->dims[axis] = n;
                start += n;
                /* keepdims=0 only applies without split: pieces of one along the axis */
                if (!keep && !shp_has_in(call, 1)) {
                        memmove(&t->dims[axis], &t->dims[axis + 1],
                                sizeof(t->dims[0]) * (size_t)(t->ndim - axis - 1));
                        t->ndim--;
                }
        }
        free(sizes);
        return 0;
}

static int split_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return seq_out_infer(split_collect, def, call, err, errlen);
}

static int split_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct seq_list l = { 0 };
        struct proto_seq_entry *e = NULL;
        uint64_t size = 0;
        int64_t axis = ops_attr_int(call, "axis", 0), outer = 1, inner, start = 0;
        int rc = split_collect(def, call, &l, err, errlen);

        if (!rc)
                rc = seq_plan(l.t, l.n, &l.elem_dtype, def->name, &e, &size, err, errlen);
        if (!rc && ((uint64_t)call->out[0].dims[0] != size || !call->out[0].data))
                rc = ops_fail(err, errlen, -EINVAL, "%s: the output is not the sequence infer sized",
                              def->name);
        if (rc)
                goto out;
        if (axis < 0)
                axis += x->ndim;
        inner = (int64_t)proto_dtype_size(x->dtype);
        for (int d = 0; d < axis; d++)
                outer *= x->dims[d];
        for (int d = (int)axis + 1; d < x->ndim; d++)
                inner *= x->dims[d];
        proto_seq_write(call->out[0].data, size, l.n, l.elem_dtype, e);
        for (uint32_t i = 0; i < l.n; i++) {
                /* a piece's extent along the axis (1 where keepdims=0 dropped it) */
                int64_t n = l.t[i].ndim == x->ndim ? l.t[i].dims[axis] : 1;
                uint8_t *dst = (uint8_t *)call->out[0].data + e[i].offset;
                for (int64_t o = 0; o < outer && n && inner; o++)
                        memcpy(dst + o * n * inner,
                               (const uint8_t *)x->data + (o * x->dims[axis] + start) * inner,
                               (size_t)(n * inner));
                start += n;
        }
out:
        free(e);
        free(l.t);
        return rc;
}

/* ---------------------------------------------------------------- ConcatFromSequence */

static int concat_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct seq_view v;
        struct ops_tensor t, first;
        int64_t axis = ops_attr_int(call, "axis", 0), dims[OPS_MAX_DIMS];
        int newaxis = ops_attr_int(call, "new_axis", 0) != 0, rank;
        int rc = shp_infer_begin(def, call, err, errlen);

        if (!rc)
                rc = seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);
        if (rc)
                return rc;
        if (!v.count)
                return ops_fail(err, errlen, -EINVAL, "%s: the sequence is empty", def->name);
        seq_at(&v, 0, &first);
        rank = first.ndim + newaxis;
        if (rank < 1 || rank > OPS_MAX_DIMS || axis < -rank || axis >= rank)
                return ops_fail(err, errlen, -EINVAL, "%s: axis %lld is outside rank %d", def->name,
                                (long long)axis, rank);
        if (axis < 0)
                axis += rank;
        for (int d = 0, s = 0; d < rank; d++)
                dims[d] = newaxis && d == axis ? 1 : first.dims[s++];
        dims[axis] = 0;
        for (uint32_t i = 0; i < v.count; i++) {
                seq_at(&v, i, &t);
                if (t.ndim != first.ndim)
                        return ops_fail(err, errlen, -EINVAL, "%s: tensor %u has rank %d, tensor 0 %d",
                                        def->name, i, t.ndim, first.ndim);
                for (int d = 0; d < t.ndim; d++)
                        if ((newaxis || d != axis) && t.dims[d] != first.dims[d])
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: tensor %u differs from tensor 0 in dimension %d",
                                                def->name, i, d);
                if (__builtin_add_overflow(dims[axis], newaxis ? 1 : t.dims[axis], &dims[axis]))
                        return ops_fail(err, errlen, -EINVAL, "%s: too large", def->name);
        }
        shp_set_out(call, 0, first.dtype, rank, dims);
        return 0;
}

static int concat_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        struct seq_view v;
        struct ops_tensor t, chk = call->out[0];
        struct ops_call c = *call;
        int64_t axis = ops_attr_int(call, "axis", 0), outer = 1, inner, total, off = 0;
        int rc = concat_infer(def, &c, err, errlen);

        if (!rc && (c.out[0].dtype != chk.dtype || !ops_shape_equal(&c.out[0], &chk)))
                rc = ops_fail(err, errlen, -EINVAL, "%s: the output is not what infer gave", def->name);
        if (!rc)
                rc = seq_open(&call->in[0], def->name, "input sequence", &v, err, errlen);
        if (rc)
                return rc;
        if (axis < 0)
                axis += chk.ndim;
        inner = (int64_t)proto_dtype_size(chk.dtype);
        for (int d = 0; d < axis; d++)
                outer *= chk.dims[d];
        for (int d = (int)axis + 1; d < chk.ndim; d++)
                inner *= chk.dims[d];
        total = chk.dims[axis] * inner; /* bytes of one outer row of the output */
        for (uint32_t i = 0; i < v.count; i++) {
                int64_t n;
                seq_at(&v, i, &t);
                n = t.ndim == chk.ndim ? t.dims[axis] * inner : inner; /* new_axis: one slice */
                for (int64_t o = 0; o < outer && n; o++)
                        memcpy((uint8_t *)call->out[0].data + o * total + off,
                               (const uint8_t *)t.data + o * n, (size_t)n);
                off += n;
        }
        return 0;
}

/* ---------------------------------------------------------------- Optional */

static int is_none(const struct ops_call *call, int i)
{
        return !shp_has_in(call, i) || call->in[i].dtype == PROTO_DTYPE_OPTIONAL_NONE;
}

static int optional_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int rc = shp_infer_begin(def, call, err, errlen);
        int64_t zero[1] = { 0 };

        if (rc)
                return rc;
        if (is_none(call, 0))
                shp_set_out(call, 0, PROTO_DTYPE_OPTIONAL_NONE, 1, zero);
        else
                shp_set_out(call, 0, call->in[0].dtype, call->in[0].ndim, call->in[0].dims);
        return 0;
}

/* Optional and OptionalGetElement pass their input's bytes through (a tensor, a sequence
 * block, nothing). */
static int pass_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        int64_t n = ops_tensor_numel(&call->out[0]);
        size_t es = proto_dtype_size(call->out[0].dtype);

        if (call->out[0].dtype == PROTO_DTYPE_OPTIONAL_NONE || n <= 0)
                return 0;
        if (!call->in[0].data || !call->out[0].data || call->in[0].dtype != call->out[0].dtype ||
            !ops_shape_equal(&call->in[0], &call->out[0]))
                return ops_fail(err, errlen, -EINVAL, "%s: the output is not its input", def->name);
        memcpy(call->out[0].data, call->in[0].data, (size_t)n * es);
        return 0;
}

static int has_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int rc = shp_infer_begin(def, call, err, errlen);

        if (!rc)
                shp_set_out(call, 0, PROTO_DTYPE_BOOL, 0, NULL);
        return rc;
}

static int has_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        *(uint8_t *)call->out[0].data = !is_none(call, 0);
        return 0;
}

static int get_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int rc = shp_infer_begin(def, call, err, errlen);

        if (rc)
                return rc;
        if (is_none(call, 0))
                return ops_fail(err, errlen, -EINVAL, "%s: the optional input is empty", def->name);
        shp_set_out(call, 0, call->in[0].dtype, call->in[0].ndim, call->in[0].dims);
        return 0;
}

static void seq_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        int64_t n = call->out[0].dtype ? ops_tensor_numel(&call->out[0]) : 0;
        uint64_t es = proto_dtype_size(call->out[0].dtype);

        *ret_flops = 0;
        *ret_bytes = n > 0 ? ops_bytes((uint64_t)n, es ? es : 1) : 0;
}

/* Launches over the wire carry tensors only: these operators work inside graphs. */
static int seq_check(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        return ops_fail(err, errlen, -EINVAL, "%s: sequence and optional operators run only inside graphs",
                        def->name);
}

#define SEQ_DEF(sym, nm, lo, hi, inf, rn, since, ...)                                           \
        const struct ops_def sym = {                                                            \
                .name = nm, .min_inputs = lo, .max_inputs = hi, .outputs = 1,                    \
                .engine = OPS_ENGINE_AICPU, .check = seq_check, .run = rn, .cost = seq_cost,   \
                .infer = inf,                                                                    \
                .since_version = since, .flags = OPS_FLAG_VALUES,                                \
                .attrs = (const char *const[]){ __VA_ARGS__ },                                   \
        }

SEQ_DEF(ops_sequence_empty_def, "SequenceEmpty", 0, 0, empty_infer, empty_run, 11, "dtype", NULL);
SEQ_DEF(ops_sequence_construct_def, "SequenceConstruct", 1, OPS_MAX_INPUTS, construct_infer,
        construct_run, 11, NULL);
SEQ_DEF(ops_sequence_insert_def, "SequenceInsert", 2, 3, insert_infer, insert_run, 11, NULL);
SEQ_DEF(ops_sequence_erase_def, "SequenceErase", 1, 2, erase_infer, erase_run, 11, NULL);
SEQ_DEF(ops_sequence_at_def, "SequenceAt", 2, 2, at_infer, at_run, 11, NULL);
SEQ_DEF(ops_sequence_length_def, "SequenceLength", 1, 1, length_infer, length_run, 11, NULL);
SEQ_DEF(ops_split_to_sequence_def, "SplitToSequence", 1, 2, split_infer, split_run, 11, "axis",
        "keepdims", NULL);
SEQ_DEF(ops_concat_from_sequence_def, "ConcatFromSequence", 1, 1, concat_infer, concat_run, 11,
        "axis", "new_axis", NULL);
SEQ_DEF(ops_optional_def, "Optional", 0, 1, optional_infer, pass_run, 15, "type", NULL);
SEQ_DEF(ops_optional_has_element_def, "OptionalHasElement", 0, 1, has_infer, has_run, 15, NULL);
SEQ_DEF(ops_optional_get_element_def, "OptionalGetElement", 1, 1, get_infer, pass_run, 15, NULL);

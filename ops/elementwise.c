/* The elementwise engine (see ew.h): dtype classes, the broadcast walk that hands kernels
 * runs of elements with one stride per input, the chunked conversions (convert.c) that let
 * float16 and bfloat16 (and Pow's mixed dtypes) run on float kernels, and the generic
 * infer, check, run and cost every elementwise operator's definition calls with its
 * description. The
 * operators themselves live in ew-binary.c, ew-unary.c, ew-activation.c and ew-logic.c,
 * registered in ops.c (the wire's core operators) and family-elementwise.c.
 *
 * An output may alias an input exactly (same address, same shape): each element is read
 * before it is written and the contiguous restrict kernels are not used then. Partial
 * overlaps are not supported. */
#include <errno.h>
#include <string.h>

#include "convert.h"
#include "ew.h"

static const int ew_dtypes[EW_NTYPES] = {
        [EW_F32] = PROTO_DTYPE_FLOAT32, [EW_F64] = PROTO_DTYPE_FLOAT64,
        [EW_F16] = PROTO_DTYPE_FLOAT16, [EW_BF16] = PROTO_DTYPE_BFLOAT16,
        [EW_I8] = PROTO_DTYPE_INT8,     [EW_I16] = PROTO_DTYPE_INT16,
        [EW_I32] = PROTO_DTYPE_INT32,   [EW_I64] = PROTO_DTYPE_INT64,
        [EW_U8] = PROTO_DTYPE_UINT8,    [EW_U16] = PROTO_DTYPE_UINT16,
        [EW_U32] = PROTO_DTYPE_UINT32,  [EW_U64] = PROTO_DTYPE_UINT64,
        [EW_BOOL] = PROTO_DTYPE_BOOL,
};

int ew_type_of(int dtype)
{
        int t;

        for (t = 0; t < EW_NTYPES; t++)
                if (ew_dtypes[t] == dtype)
                        return t;
        return -1;
}

int ew_dtype_of(int type)
{
        return type >= 0 && type < EW_NTYPES ? ew_dtypes[type] : 0;
}

/* ------------------------------------------------------------------------ the walk */

/* Whether the byte ranges of two tensors intersect. */
static int ew_overlap(const struct ops_tensor *a, const struct ops_tensor *b)
{
        uintptr_t pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
        int64_t na = ops_tensor_numel(a), nb = ops_tensor_numel(b);

        if (na <= 0 || nb <= 0)
                return 0;
        return pa < pb + (uintptr_t)nb * proto_dtype_size(b->dtype) &&
               pb < pa + (uintptr_t)na * proto_dtype_size(a->dtype);
}

/* Chunk buffers: every compute type fits in 8 bytes. */
union ew_buf {
        double d[OPS_CHUNK];
        float f[OPS_CHUNK];
        int64_t i[OPS_CHUNK];
        uint64_t u[OPS_CHUNK];
};

/* One run of n outputs at o, input k at ptr[k] with element stride st[k], chunk by chunk
 * through conversion buffers where a dtype differs from the kernel's. */
static void ew_inner_conv(const struct ew_plan *pl, const struct ew_params *p, int odtype,
                          char *o, const void *const *ptr, const int64_t *st, int64_t n)
{
        union ew_buf buf[OPS_MAX_INPUTS], obuf;
        const void *q[OPS_MAX_INPUTS];
        int64_t qs[OPS_MAX_INPUTS], off, m;
        size_t eo = proto_dtype_size(odtype);
        struct ew_params pc;
        int k;

        pc = *p;
        /* The kernel's output is then a private buffer nothing else overlaps. */
        if (pl->cto != odtype)
                pc.fast = 1;
        for (off = 0; off < n; off += m) {
                m = n - off < OPS_CHUNK ? n - off : OPS_CHUNK;
                for (k = 0; k < pl->nin; k++) {
                        size_t es = proto_dtype_size(pl->in[k]->dtype);
                        const char *src = (const char *)ptr[k] + (size_t)(off * st[k]) * es;

                        if (pl->ct[k] == pl->in[k]->dtype) {
                                q[k] = src;
                                qs[k] = st[k];
                                continue;
                        }
                        /* A broadcast input converts its one element. */
                        ops_convert(pl->ct[k], &buf[k], pl->in[k]->dtype, src, st[k],
                                   st[k] ? (size_t)m : 1);
                        q[k] = &buf[k];
                        qs[k] = st[k] ? 1 : 0;
                }
                if (pl->cto != odtype) {
                        pl->k(&obuf, q, qs, m, &pc);
                        ops_convert(odtype, o + (size_t)off * eo, pl->cto, &obuf, 1, (size_t)m);
                } else {
                        pl->k(o + (size_t)off * eo, q, qs, m, &pc);
                }
        }
}

int ew_apply(const struct ew_plan *pl, const struct ops_tensor *out, const char *op, char *err,
             size_t errlen)
{
        int64_t st[OPS_MAX_INPUTS][OPS_MAX_DIMS], cs[OPS_MAX_DIMS][OPS_MAX_INPUTS];
        int64_t dim[OPS_MAX_DIMS], idx[OPS_MAX_DIMS], off[OPS_MAX_INPUTS];
        int64_t n = ops_tensor_numel(out), done, c, m, since = 0;
        size_t es[OPS_MAX_INPUTS], eo = proto_dtype_size(out->dtype);
        const void *ptr[OPS_MAX_INPUTS];
        struct ew_params p = pl->p;
        int k, d, j, nd = 0, merge, conv = pl->cto != out->dtype;

        if (n <= 0)
                return 0;
        p.fast = 1;
        for (k = 0; k < pl->nin; k++) {
                ops_broadcast_strides(pl->in[k], out, st[k]);
                es[k] = proto_dtype_size(pl->in[k]->dtype);
                off[k] = 0;
                if (pl->ct[k] != pl->in[k]->dtype)
                        conv = 1;
                if (ew_overlap(pl->in[k], out))
                        p.fast = 0;
        }
        /* Dims of extent 1 are dropped and a dim merges into the next inner one when it is
         * contiguous with it for every input; dim[0] ends up the innermost. */
        for (d = out->ndim - 1; d >= 0; d--) {
                if (out->dims[d] == 1)
                        continue;
                merge = nd > 0;
                for (k = 0; merge && k < pl->nin; k++)
                        if (st[k][d] != cs[nd - 1][k] * dim[nd - 1])
                                merge = 0;
                if (merge) {
                        dim[nd - 1] *= out->dims[d];
                        continue;
                }
                dim[nd] = out->dims[d];
                for (k = 0; k < pl->nin; k++)
                        cs[nd][k] = st[k][d];
                idx[nd] = 0;
                nd++;
        }
        if (!nd) {
                dim[0] = 1;
                for (k = 0; k < pl->nin; k++)
                        cs[0][k] = 0;
                nd = 1;
        }
        /* The innermost runs go in pieces of at most OPS_POLL_ELEMS, with a check of the run
         * context every OPS_POLL_ELEMS elements. */
        for (done = 0; done < n; done += dim[0]) {
                for (c = 0; c < dim[0]; c += m) {
                        m = dim[0] - c < OPS_POLL_ELEMS ? dim[0] - c : OPS_POLL_ELEMS;
                        for (k = 0; k < pl->nin; k++)
                                ptr[k] = (const char *)pl->in[k]->data +
                                         (size_t)(off[k] + c * cs[0][k]) * es[k];
                        if (conv)
                                ew_inner_conv(pl, &p, out->dtype,
                                              (char *)out->data + (size_t)(done + c) * eo, ptr,
                                              cs[0], m);
                        else
                                pl->k((char *)out->data + (size_t)(done + c) * eo, ptr, cs[0], m,
                                      &p);
                        since += m;
                        if (since >= OPS_POLL_ELEMS) {
                                since = 0;
                                if (ops_poll(op, err, errlen))
                                        return -ECANCELED;
                        }
                }
                for (j = 1; j < nd; j++) {
                        for (k = 0; k < pl->nin; k++)
                                off[k] += cs[j][k];
                        if (++idx[j] < dim[j])
                                break;
                        for (k = 0; k < pl->nin; k++)
                                off[k] -= cs[j][k] * dim[j];
                        idx[j] = 0;
                }
        }
        return 0;
}

/* ------------------------------------------------------------------ infer and check */

/* The float attributes named in the description, then the attribute hook. */
static int ew_params_init(const struct ew_op *op, const struct ops_call *call,
                          struct ew_params *p, char *err, size_t errlen)
{
        double *dst[3] = { &p->a, &p->b, &p->c };
        int i, rc;

        memset(p, 0, sizeof(*p));
        for (i = 0; i < 3 && op->fnames[i]; i++) {
                rc = ew_attr_float(op, call, op->fnames[i], op->fdefs[i], dst[i], err, errlen);
                if (rc)
                        return rc;
        }
        return op->attr ? op->attr(op, call, p, err, errlen) : 0;
}

static int ew_present(const struct ew_op *op, const struct ops_call *call, int i)
{
        return i < op->min_in || call->in[i].dtype != 0;
}

int ew_infer(const struct ew_op *op, struct ops_call *call, char *err, size_t errlen)
{
        char b1[OPS_SHAPE_STR_MAX], b2[OPS_SHAPE_STR_MAX], msg[2 * OPS_SHAPE_STR_MAX + 64];
        const struct ops_tensor *key;
        struct ops_tensor shape, tmp;
        struct ew_params p;
        int i, t, rc;

        if (call->nin < op->min_in || call->nin > op->max_in || call->nout != 1) {
                if (op->min_in == op->max_in)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: expected %d input%s and 1 output, got %d and %d",
                                        op->name, op->min_in, op->min_in == 1 ? "" : "s",
                                        call->nin, call->nout);
                return ops_fail(err, errlen, -EINVAL,
                                "%s: expected %d to %d inputs and 1 output, got %d and %d",
                                op->name, op->min_in, op->max_in, call->nin, call->nout);
        }
        for (i = 0; i < call->nin; i++)
                if (call->in[i].ndim < 0 || call->in[i].ndim > OPS_MAX_DIMS)
                        return ops_fail(err, errlen, -EINVAL, "%s: input %d has invalid rank %d",
                                        op->name, i, call->in[i].ndim);
        /* a variadic operator's inputs (Max, Min, Sum, Mean) are all required: none is
         * optional after the first (the model named it "") */
        for (i = 0; op->max_in == OPS_MAX_INPUTS && i < call->nin; i++)
                if (!call->in[i].dtype)
                        return ops_fail(err, errlen, -EINVAL, "%s: input %d is missing", op->name, i);
        key = &call->in[op->key];
        t = ew_type_of(key->dtype);
        if (t < 0 || !(op->types & EW_M(t)))
                return ops_fail(err, errlen, -EINVAL, "%s: input %d has unsupported dtype %s",
                                op->name, op->key, ops_dtype_str(key->dtype, b1, sizeof(b1)));
        for (i = 0; i < call->nin; i++)
                if (((op->same >> i) & 1) && ew_present(op, call, i) &&
                    call->in[i].dtype != key->dtype)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: input %d dtype %s does not match input %d dtype %s",
                                        op->name, i,
                                        ops_dtype_str(call->in[i].dtype, b1, sizeof(b1)),
                                        op->key, ops_dtype_str(key->dtype, b2, sizeof(b2)));
        rc = ew_params_init(op, call, &p, err, errlen);
        if (rc)
                return rc;
        memset(&shape, 0, sizeof(shape));
        shape.ndim = call->in[0].ndim;
        memcpy(shape.dims, call->in[0].dims, (size_t)shape.ndim * sizeof(shape.dims[0]));
        for (i = 1; i < call->nin; i++) {
                if (!ew_present(op, call, i))
                        continue;
                if (op->shape == EW_BCAST) {
                        if (ops_broadcast_shape(&shape, &call->in[i], &shape, msg, sizeof(msg)))
                                return ops_fail(err, errlen, -EINVAL, "%s: %s", op->name, msg);
                        continue;
                }
                /* EW_FIRST: one element, or unidirectionally broadcastable to input 0. */
                if (ops_tensor_numel(&call->in[i]) == 1)
                        continue;
                if (ops_broadcast_shape(&shape, &call->in[i], &tmp, msg, sizeof(msg)) ||
                    !ops_shape_equal(&tmp, &shape))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: input %d shape %s does not broadcast to input 0 shape %s",
                                        op->name, i, ops_shape_str(&call->in[i], b1, sizeof(b1)),
                                        ops_shape_str(&shape, b2, sizeof(b2)));
        }
        call->out[0].dtype = op->out ? op->out : key->dtype;
        call->out[0].ndim = shape.ndim;
        memcpy(call->out[0].dims, shape.dims, (size_t)shape.ndim * sizeof(shape.dims[0]));
        return op->infer ? op->infer(op, call, err, errlen) : 0;
}

static int ew_attr_known(const struct ew_op *op, const char *name)
{
        int i;

        for (i = 0; i < 3 && op->fnames[i]; i++)
                if (strcmp(op->fnames[i], name) == 0)
                        return 1;
        for (i = 0; op->attrs && op->attrs[i]; i++)
                if (strcmp(op->attrs[i], name) == 0)
                        return 1;
        return 0;
}

int ew_check(const struct ew_op *op, const struct ops_def *def, const struct ops_call *call,
             char *err, size_t errlen)
{
        const struct ops_attr *a;
        int i, j;

        if (call->nattr < 0 || call->nattr > OPS_MAX_ATTRS)
                return ops_fail(err, errlen, -EINVAL, "%s: invalid attribute count %d", op->name,
                                call->nattr);
        /* Attribute names here (graphs also pass strings, BitShift's direction, that the
         * wire's common check refuses); the rest is the registry's check through infer. */
        for (i = 0; i < call->nattr; i++) {
                a = &call->attr[i];
                if (!memchr(a->name, '\0', OPS_NAME_MAX))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: attribute %d has an unterminated name", op->name, i);
                if (!ew_attr_known(op, a->name))
                        return ops_fail(err, errlen, -EINVAL, "%s: unknown attribute '%s'",
                                        op->name, a->name);
                for (j = 0; j < i; j++)
                        if (strcmp(call->attr[j].name, a->name) == 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: attribute '%s' given twice", op->name,
                                                a->name);
        }
        return ops_check_by_infer(def, call, err, errlen);
}

/* ------------------------------------------------------------------------ run, cost */

int ew_plan_init(const struct ew_op *op, const struct ops_call *call, struct ew_plan *pl,
                 char *err, size_t errlen)
{
        char buf[OPS_DTYPE_STR_MAX];
        int key = call->in[op->key].dtype, t = ew_type_of(key), ct = key, i, rc;

        memset(pl, 0, sizeof(*pl));
        rc = ew_params_init(op, call, &pl->p, err, errlen);
        if (rc)
                return rc;
        pl->k = t >= 0 && op->k ? op->k[t] : NULL;
        if (!pl->k && (t == EW_F16 || t == EW_BF16) && op->k) {
                pl->k = op->k[EW_F32];
                ct = PROTO_DTYPE_FLOAT32;
        }
        pl->nin = call->nin;
        for (i = 0; i < call->nin; i++) {
                pl->in[i] = &call->in[i];
                pl->ct[i] = i == op->key || ((op->same >> i) & 1) ? ct : call->in[i].dtype;
        }
        pl->cto = op->out ? op->out : ct;
        pl->p.nin = call->nin;
        if (op->prepare) {
                rc = op->prepare(op, call, pl, err, errlen);
                if (rc)
                        return rc;
        }
        if (!pl->k)
                return ops_fail(err, errlen, -EINVAL, "%s: no kernel for dtype %s", op->name,
                                ops_dtype_str(key, buf, sizeof(buf)));
        return 0;
}

void ew_plan_scalar(struct ew_plan *pl, int k, int slot, int dtype, double v)
{
        struct ops_tensor *t = &pl->tmp[slot];

        memset(t, 0, sizeof(*t));
        t->dtype = dtype;
        t->data = &pl->tmpv[slot];
        ops_convert(dtype, t->data, PROTO_DTYPE_FLOAT64, &v, 1, 1);
        pl->in[k] = t;
        pl->ct[k] = dtype;
        if (pl->nin <= k)
                pl->nin = k + 1;
}

int ew_run(const struct ew_op *op, const struct ops_call *call, char *err, size_t errlen)
{
        struct ew_plan pl;
        int rc = ew_plan_init(op, call, &pl, err, errlen);

        if (rc)
                return rc;
        return ew_apply(&pl, &call->out[0], op->name, err, errlen);
}

struct ops_ew_direct {
        ew_kernel k;
        struct ew_params p;
};

size_t ops_ew_direct_size(void)
{
        return sizeof(struct ops_ew_direct);
}

int ops_ew_direct_init(const struct ops_def *def, const struct ops_call *call, struct ops_ew_direct *d)
{
        const struct ew_op *op = def->ew;
        int dt = call->nout == 1 ? call->out[0].dtype : 0, i;
        struct ew_plan pl;
        char err[160];

        /* Floating types only: the one preparation that reads data (Div's and Mod's check
         * for zero divisors) reads integers, and would see the first run's alone. */
        if (!op || (dt != PROTO_DTYPE_FLOAT32 && dt != PROTO_DTYPE_FLOAT64) || call->nin < 1)
                return 1;
        for (i = 0; i < call->nin; i++)
                if (call->in[i].dtype != dt)
                        return 1;
        if (ew_plan_init(op, call, &pl, err, sizeof(err)) || pl.nin != call->nin || pl.cto != dt)
                return 1;
        for (i = 0; i < pl.nin; i++)
                if (pl.in[i] != &call->in[i] || pl.ct[i] != dt)
                        return 1;
        d->k = pl.k;
        d->p = pl.p;
        d->p.fast = 1;
        return 0;
}

void ops_ew_direct_run(const struct ops_ew_direct *d, void *out, const void *const *in, const int64_t *st,
                       int64_t n)
{
        d->k(out, in, st, n, &d->p);
}

void ew_cost(const struct ew_op *op, const struct ops_call *call, uint64_t *ret_flops,
             uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->out[0]), bytes;
        int i;

        bytes = ops_mul_sat(n, proto_dtype_size(call->out[0].dtype));
        for (i = 0; i < call->nin && i < OPS_MAX_INPUTS; i++)
                bytes = ops_add_sat(bytes, ops_mul_sat((uint64_t)ops_tensor_numel(&call->in[i]),
                                                       proto_dtype_size(call->in[i].dtype)));
        *ret_flops = ops_mul_sat(n, op->flops ? op->flops : 1);
        *ret_bytes = bytes;
}

/* ------------------------------------------------------------------------- helpers */

int ew_attr_float(const struct ew_op *op, const struct ops_call *call, const char *name,
                  double def, double *ret, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        *ret = def;
        if (!a)
                return 0;
        if (a->type == OPS_ATTR_FLOAT)
                *ret = a->f;
        else if (a->type == OPS_ATTR_INT)
                *ret = (double)a->i;
        else
                return ops_fail(err, errlen, -EINVAL, "%s: attribute '%s' must be a float",
                                op->name, name);
        return 0;
}

int ew_attr_int(const struct ew_op *op, const struct ops_call *call, const char *name,
                int64_t def, int64_t *ret, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        *ret = def;
        if (!a)
                return 0;
        if (a->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "%s: attribute '%s' must be an int",
                                op->name, name);
        *ret = a->i;
        return 0;
}

int ew_has_zero(const struct ops_tensor *t)
{
        int64_t i, n = ops_tensor_numel(t);

        /* An integer is zero exactly when all its bytes are. */
        switch (proto_dtype_size(t->dtype)) {
        case 1: {
                const uint8_t *q = t->data;

                for (i = 0; i < n; i++)
                        if (!q[i])
                                return 1;
                break;
        }
        case 2: {
                const uint16_t *q = t->data;

                for (i = 0; i < n; i++)
                        if (!q[i])
                                return 1;
                break;
        }
        case 4: {
                const uint32_t *q = t->data;

                for (i = 0; i < n; i++)
                        if (!q[i])
                                return 1;
                break;
        }
        case 8: {
                const uint64_t *q = t->data;

                for (i = 0; i < n; i++)
                        if (!q[i])
                                return 1;
                break;
        }
        }
        return 0;
}

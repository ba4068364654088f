/* Control-flow operators of ONNX graphs: If (opset 1+), Loop (opset 1+) and Scan (opset 9+).
 * Their output shapes are known only once the subgraphs have run, so infer runs them fully
 * through call->graph_run and keeps the results in a per-thread slot keyed by the call;
 * run, which the executor calls next on the same thread with the same call, copies them
 * into the outputs it allocated and frees them. A run without a matching infer (a stale
 * slot, a direct call) computes the results again. Sequence and optional values
 * (sequence.h) pass through If and Loop like tensors (they are one block of bytes each);
 * SequenceMap, which runs its body once per tensor of a sequence, is here too. None of these
 * can be launched over the wire.
 *
 * Trip counts come from the model and its inputs, so every iteration checks the run context
 * (cancellation, deadline) and a trip cap in force refuses larger counts before the first
 * iteration. Every buffer here (subgraph outputs, scan slices, stacked scan outputs) is an
 * ops_buf_alloc buffer charged to the run's byte budget. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/errors.h"
#include "control.h"
#include "runctx.h"
#include "sequence.h"

/* Body outputs of a Loop or Scan: condition, carried values and scan outputs. */
#define CTL_MAX_BODY_OUT (OPS_MAX_INPUTS + OPS_MAX_OUTPUTS + 1)

/* The node outputs computed by running subgraphs; every data pointer is an ops_buf. */
struct ctl_result {
        int n;
        struct ops_tensor t[OPS_MAX_OUTPUTS];
};

/* What infer computed for the call that run is about to see. */
static _Thread_local struct {
        const struct ops_call *key;
        struct ctl_result r;
} ctl_slot;

static void result_free(struct ctl_result *r)
{
        for (int i = 0; i < r->n; i++) {
                ops_buf_free(r->t[i].data);
                r->t[i].data = NULL;
        }
        r->n = 0;
}

static void tensors_free(struct ops_tensor *t, int n)
{
        for (int i = 0; i < n; i++) {
                ops_buf_free(t[i].data);
                t[i].data = NULL;
        }
}

static int64_t tensor_bytes(const struct ops_tensor *t)
{
        int64_t n = ops_tensor_numel(t);
        size_t es = proto_dtype_size(t->dtype);

        if (n < 0 || es == 0 || n > INT64_MAX / (int64_t)es)
                return -1;
        return n * (int64_t)es;
}

/* An ops_buf copy of t (data included). The data may be missing: the cost estimate infers
 * shapes with only initializers readable, and a loop that never iterates would pass its
 * carried inputs through; without their values there is nothing to copy. */
static int tensor_dup(const struct ops_tensor *t, struct ops_tensor *ret, const char *op,
                      char *err, size_t errlen)
{
        int64_t bytes = tensor_bytes(t);
        char msg[200];

        if (bytes < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: a value is not a supported tensor", op);
        if (bytes > 0 && !t->data)
                return ops_fail(err, errlen, -EINVAL, "%s: needs the value of a carried input", op);
        *ret = *t;
        ret->data = ops_buf_alloc((uint64_t)bytes, msg, sizeof(msg));
        if (!ret->data)
                return ops_fail(err, errlen, -ENOMEM, "%s: %s", op, msg);
        if (bytes)
                memcpy(ret->data, t->data, (size_t)bytes);
        return 0;
}

/* Stop between iterations when the run is cancelled or past its deadline. */
static int ctl_poll(const char *op, int64_t it, char *err, size_t errlen)
{
        char msg[160];

        if (!ops_runctx_check(msg, sizeof(msg)))
                return 0;
        return ops_fail(err, errlen, -ECANCELED, "%s: %s (after %lld iterations)", op, msg,
                        (long long)it);
}

/* The trip cap in force refuses n iterations (n < 0: unbounded, decided by a condition). */
static int ctl_trips_refused(const char *op, int64_t n, char *err, size_t errlen)
{
        uint64_t cap = ops_runctx_max_trips();

        if (!cap || (n >= 0 && (uint64_t)n <= cap))
                return 0;
        ops_runctx_stop(PROTO_E_LIMIT);
        if (n < 0)
                return ops_fail(err, errlen, -E2BIG,
                                "%s: still running after %llu iterations, the cap on trip counts (max_loop_trips)",
                                op, (unsigned long long)cap);
        return ops_fail(err, errlen, -E2BIG,
                        "%s: %lld iterations exceed the cap on trip counts of %llu (max_loop_trips)",
                        op, (long long)n, (unsigned long long)cap);
}

static const void *graph_attr(const struct ops_call *call, const char *name)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        return a && a->type == OPS_ATTR_GRAPH ? a->graph : NULL;
}

/* The single-element bool or int64 input i, read into *ret. */
static int scalar_in(const struct ops_call *call, int i, int dtype, const char *op,
                     const char *what, int64_t *ret, char *err, size_t errlen)
{
        const struct ops_tensor *t = &call->in[i];
        char d[OPS_DTYPE_STR_MAX];

        if (t->dtype != dtype)
                return ops_fail(err, errlen, -EINVAL, "%s: %s is %s, expected %s", op, what,
                                ops_dtype_str(t->dtype, d, sizeof(d)),
                                dtype == PROTO_DTYPE_BOOL ? "bool" : "int64");
        if (ops_tensor_numel(t) != 1)
                return ops_fail(err, errlen, -EINVAL, "%s: %s must have one element", op, what);
        if (!t->data)
                return ops_fail(err, errlen, -EINVAL, "%s: needs the value of its %s", op, what);
        if (dtype == PROTO_DTYPE_BOOL)
                *ret = *(const uint8_t *)t->data != 0;
        else
                *ret = *(const int64_t *)t->data;
        return 0;
}

static int need_runner(const struct ops_call *call, const char *op, char *err, size_t errlen)
{
        if (!call->graph_run)
                return ops_fail(err, errlen, -EINVAL, "%s: runs only inside a graph", op);
        return 0;
}

/* ---------------------------------------------------------------- If */

static int if_compute(const struct ops_call *call, struct ctl_result *r, char *err, size_t errlen)
{
        struct ops_tensor out[CTL_MAX_BODY_OUT];
        const char *branch;
        const void *g;
        int64_t cond;
        int n = 0, rc;

        r->n = 0;
        rc = need_runner(call, "If", err, errlen);
        if (!rc)
                rc = scalar_in(call, 0, PROTO_DTYPE_BOOL, "If", "condition", &cond, err, errlen);
        if (rc)
                return rc;
        branch = cond ? "then_branch" : "else_branch";
        g = graph_attr(call, branch);
        if (!g)
                return ops_fail(err, errlen, -EINVAL, "If: no %s graph", branch);
        rc = call->graph_run(call->graph_ctx, g, 0, NULL, &n, out, CTL_MAX_BODY_OUT, err, errlen);
        if (rc < 0)
                return rc;
        if (n < call->nout) {
                tensors_free(out, n);
                return ops_fail(err, errlen, -EINVAL, "If: %s has %d output%s, the node %d", branch,
                                n, n == 1 ? "" : "s", call->nout);
        }
        for (int i = 0; i < call->nout; i++)
                r->t[i] = out[i];
        tensors_free(out + call->nout, n - call->nout);
        r->n = call->nout;
        return 0;
}

/* ---------------------------------------------------------------- stacking */

/* Per-iteration values of one scan output, stacked along a new axis. */
struct stack {
        struct ops_tensor first; /* dtype and shape of the first iteration's value */
        int64_t count;           /* iterations the buffer has room for (Loop grows it) */
        int64_t slice;           /* bytes of one iteration's value */
        int axis;                /* where the new axis goes (0 for Loop) */
        uint8_t *data;
};

/* Take dtype and shape from the first iteration's value v. */
static int stack_init(struct stack *s, const struct ops_tensor *v, const char *op, int k,
                      char *err, size_t errlen)
{
        s->first = *v;
        s->first.data = NULL;
        s->slice = tensor_bytes(v);
        /* scan outputs stack tensors; a sequence's bytes stacked would be no sequence */
        if (s->slice < 0 || v->dtype == PROTO_DTYPE_SEQUENCE || v->dtype == PROTO_DTYPE_OPTIONAL_NONE)
                return ops_fail(err, errlen, -EINVAL, "%s: scan output %d is not a supported tensor",
                                op, k);
        if (v->ndim + 1 > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "%s: scan output %d has too many dims", op, k);
        if (s->axis < 0)
                s->axis += v->ndim + 1;
        if (s->axis < 0 || s->axis > v->ndim)
                return ops_fail(err, errlen, -EINVAL, "%s: scan output %d axis out of range", op, k);
        return 0;
}

/* Room for cap iterations; growing keeps the layout only while the axis is 0. */
static int stack_reserve(struct stack *s, int64_t cap, const char *op, char *err, size_t errlen)
{
        uint8_t *nd;
        char msg[200];

        if (cap < 0 || (s->slice && cap > INT64_MAX / s->slice))
                return ops_fail(err, errlen, -ENOMEM, "%s: scan output too large", op);
        nd = ops_buf_realloc(s->data, (uint64_t)(s->slice * cap), msg, sizeof(msg));
        if (!nd)
                return ops_fail(err, errlen, -ENOMEM, "%s: scan output: %s", op, msg);
        s->data = nd;
        s->count = cap;
        return 0;
}

/* Store v as iteration pos of s (Loop appends: pos past count grows the buffer). */
static int stack_put(struct stack *s, const struct ops_tensor *v, int64_t pos, const char *op,
                     int k, char *err, size_t errlen)
{
        char a[OPS_SHAPE_STR_MAX], b[OPS_SHAPE_STR_MAX];
        int64_t outer = 1, inner;
        int rc;

        if (!s->first.dtype) {
                rc = stack_init(s, v, op, k, err, errlen);
                if (rc)
                        return rc;
        } else if (v->dtype != s->first.dtype || !ops_shape_equal(v, &s->first)) {
                return ops_fail(err, errlen, -EINVAL,
                                "%s: scan output %d changes from %s to %s between iterations", op, k,
                                ops_shape_str(&s->first, a, sizeof(a)), ops_shape_str(v, b, sizeof(b)));
        }
        if (pos >= s->count) {
                int64_t cap = s->count ? s->count : 4;

                while (cap <= pos && cap <= INT64_MAX / 2)
                        cap *= 2;
                if (cap <= pos)
                        cap = pos + 1;
                rc = stack_reserve(s, cap, op, err, errlen);
                if (rc)
                        return rc;
        }
        for (int d = 0; d < s->axis; d++)
                outer *= v->dims[d];
        inner = outer ? s->slice / outer : 0;
        if (inner > 0)
                for (int64_t o = 0; o < outer; o++)
                        memcpy(s->data + (o * s->count + pos) * inner,
                               (const uint8_t *)v->data + o * inner, (size_t)inner);
        return 0;
}

/* Hand the stack over as a tensor of n iterations (s->count must equal n for axis > 0). */
static int stack_take(struct stack *s, int64_t n, struct ops_tensor *ret, const char *op, int k,
                      char *err, size_t errlen)
{
        if (!s->first.dtype)
                return ops_fail(err, errlen, -ENOTSUP,
                                "%s: no iterations ran, so scan output %d has no known shape", op, k);
        /* A Loop's buffer grew by doubling: give back the room past n iterations, so that the
         * buffer's size is the tensor's (the executor frees and copies by that). */
        if (n < s->count) {
                int rc = stack_reserve(s, n, op, err, errlen);
                if (rc)
                        return rc;
        }
        *ret = s->first;
        ret->ndim = s->first.ndim + 1;
        for (int d = s->first.ndim; d > s->axis; d--)
                ret->dims[d] = s->first.dims[d - 1];
        ret->dims[s->axis] = n;
        ret->data = s->data;
        s->data = NULL;
        return 0;
}

/* ---------------------------------------------------------------- Loop */

static int loop_compute(const struct ops_call *call, struct ctl_result *r, char *err, size_t errlen)
{
        struct ops_tensor cur[OPS_MAX_INPUTS], out[CTL_MAX_BODY_OUT], bin[OPS_MAX_INPUTS];
        struct stack st[OPS_MAX_OUTPUTS];
        int owned = 0, n = 0, nscan = -1, rc = 0, ncar = call->nin - 2;
        int64_t trip = INT64_MAX, cond = 1, it = 0;
        uint8_t cond_byte;
        const void *body;

        r->n = 0;
        memset(st, 0, sizeof(st));
        if (ncar < 0)
                return ops_fail(err, errlen, -EINVAL, "Loop: needs M and cond inputs (may be empty)");
        rc = need_runner(call, "Loop", err, errlen);
        if (!rc && call->in[0].dtype)
                rc = scalar_in(call, 0, PROTO_DTYPE_INT64, "Loop", "trip count M", &trip, err, errlen);
        if (!rc && call->in[1].dtype)
                rc = scalar_in(call, 1, PROTO_DTYPE_BOOL, "Loop", "condition", &cond, err, errlen);
        if (rc)
                return rc;
        body = graph_attr(call, "body");
        if (!body)
                return ops_fail(err, errlen, -EINVAL, "Loop: no body graph");
        if (call->nout < ncar)
                return ops_fail(err, errlen, -EINVAL, "Loop: %d carried values but %d outputs", ncar,
                                call->nout);
        for (int i = 0; i < ncar; i++) {
                if (!call->in[2 + i].dtype)
                        return ops_fail(err, errlen, -ENOTSUP,
                                        "Loop: carried value %d is empty (optional values are not supported)", i);
                cur[i] = call->in[2 + i];
        }
        if (trip < 0)
                trip = 0; /* ONNX: a negative M runs no iteration */
        if (cond && call->in[0].dtype) {
                rc = ctl_trips_refused("Loop", trip, err, errlen);
                if (rc)
                        return rc;
        }
        while (it < trip && cond) {
                rc = ctl_poll("Loop", it, err, errlen);
                if (!rc && (uint64_t)it >= ops_runctx_max_trips() && ops_runctx_max_trips())
                        rc = ctl_trips_refused("Loop", -1, err, errlen);
                if (rc)
                        goto out;
                bin[0] = (struct ops_tensor){ .dtype = PROTO_DTYPE_INT64, .ndim = 0, .data = &it };
                cond_byte = 1;
                bin[1] = (struct ops_tensor){ .dtype = PROTO_DTYPE_BOOL, .ndim = 0, .data = &cond_byte };
                for (int i = 0; i < ncar; i++)
                        bin[2 + i] = cur[i];
                rc = call->graph_run(call->graph_ctx, body, 2 + ncar, bin, &n, out, CTL_MAX_BODY_OUT,
                                     err, errlen);
                if (rc < 0)
                        goto out;
                if (nscan < 0) {
                        nscan = n - 1 - ncar;
                        if (nscan < 0 || ncar + nscan < call->nout) {
                                rc = ops_fail(err, errlen, -EINVAL,
                                              "Loop: body has %d outputs, expected 1 + %d carried + the scan outputs of %d node outputs",
                                              n, ncar, call->nout);
                                tensors_free(out, n);
                                goto out;
                        }
                }
                for (int k = 0; k < nscan && k + ncar < call->nout; k++) {
                        rc = stack_put(&st[k], &out[1 + ncar + k], it, "Loop", k, err, errlen);
                        if (rc) {
                                tensors_free(out, n);
                                goto out;
                        }
                }
                if (out[0].dtype != PROTO_DTYPE_BOOL || ops_tensor_numel(&out[0]) != 1) {
                        rc = ops_fail(err, errlen, -EINVAL, "Loop: body condition is not one bool");
                        tensors_free(out, n);
                        goto out;
                }
                cond = *(const uint8_t *)out[0].data != 0;
                if (owned)
                        tensors_free(cur, ncar);
                for (int i = 0; i < ncar; i++)
                        cur[i] = out[1 + i];
                owned = 1;
                tensors_free(out, 1);
                tensors_free(out + 1 + ncar, n - 1 - ncar);
                it++;
        }
        for (int i = 0; i < ncar && i < call->nout; i++) {
                if (owned) {
                        r->t[i] = cur[i];
                        cur[i].data = NULL;
                } else {
                        rc = tensor_dup(&cur[i], &r->t[i], "Loop", err, errlen);
                        if (rc)
                                goto out;
                }
                r->n = i + 1;
        }
        for (int j = ncar; j < call->nout; j++) {
                rc = stack_take(&st[j - ncar], it, &r->t[j], "Loop", j - ncar, err, errlen);
                if (rc)
                        goto out;
                r->n = j + 1;
        }
out:
        if (owned)
                tensors_free(cur, ncar);
        for (int k = 0; k < OPS_MAX_OUTPUTS; k++)
                ops_buf_free(st[k].data);
        if (rc)
                result_free(r);
        return rc;
}

/* ---------------------------------------------------------------- Scan */

static int64_t ints_at(const struct ops_attr *a, int i, int64_t def)
{
        return a && a->type == OPS_ATTR_INTS && i < a->n ? a->ints[i] : def;
}

static int scan_compute(const struct ops_call *call, struct ctl_result *r, char *err, size_t errlen)
{
        const struct ops_attr *in_axes = ops_attr_find(call, "scan_input_axes");
        const struct ops_attr *in_dirs = ops_attr_find(call, "scan_input_directions");
        const struct ops_attr *out_axes = ops_attr_find(call, "scan_output_axes");
        const struct ops_attr *out_dirs = ops_attr_find(call, "scan_output_directions");
        struct ops_tensor cur[OPS_MAX_INPUTS], out[CTL_MAX_BODY_OUT], bin[OPS_MAX_INPUTS];
        struct stack st[OPS_MAX_OUTPUTS];
        int axis[OPS_MAX_INPUTS];
        int owned = 0, n = 0, nscan = -1, rc = 0, nsi, nst;
        int64_t steps = -1;
        const void *body;

        r->n = 0;
        memset(st, 0, sizeof(st));
        memset(bin, 0, sizeof(bin));
        rc = need_runner(call, "Scan", err, errlen);
        if (rc)
                return rc;
        nsi = (int)ops_attr_int(call, "num_scan_inputs", -1);
        nst = call->nin - nsi;
        if (nsi < 1 || nst < 0)
                return ops_fail(err, errlen, -EINVAL, "Scan: num_scan_inputs must be 1 to %d",
                                call->nin);
        body = graph_attr(call, "body");
        if (!body)
                return ops_fail(err, errlen, -EINVAL, "Scan: no body graph");
        if (call->nout < nst)
                return ops_fail(err, errlen, -EINVAL, "Scan: %d state values but %d outputs", nst,
                                call->nout);
        for (int i = 0; i < nst; i++)
                cur[i] = call->in[i];
        for (int m = 0; m < nsi; m++) {
                const struct ops_tensor *x = &call->in[nst + m];
                int64_t a = ints_at(in_axes, m, 0);

                if (!x->dtype || (!x->data && tensor_bytes(x) > 0))
                        return ops_fail(err, errlen, -EINVAL, "Scan: needs the value of scan input %d", m);
                if (a < 0)
                        a += x->ndim;
                if (a < 0 || a >= x->ndim)
                        return ops_fail(err, errlen, -EINVAL, "Scan: scan input %d axis out of range", m);
                if (tensor_bytes(x) < 0)
                        return ops_fail(err, errlen, -EINVAL, "Scan: scan input %d is not a supported tensor", m);
                axis[m] = (int)a;
                if (steps < 0)
                        steps = x->dims[a];
                else if (x->dims[a] != steps)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Scan: scan input %d has %lld steps, input 0 %lld", m,
                                        (long long)x->dims[a], (long long)steps);
        }
        rc = ctl_trips_refused("Scan", steps, err, errlen);
        if (rc)
                return rc;
        for (int m = 0; m < nsi; m++) {
                const struct ops_tensor *x = &call->in[nst + m];
                struct ops_tensor *s = &bin[nst + m];
                char msg[200];

                *s = *x;
                s->ndim = x->ndim - 1;
                for (int d = axis[m]; d < s->ndim; d++)
                        s->dims[d] = x->dims[d + 1];
                /* one step's slice: the input without its scan axis */
                s->data = ops_buf_alloc((uint64_t)tensor_bytes(s), msg, sizeof(msg));
                if (!s->data) {
                        rc = ops_fail(err, errlen, -ENOMEM, "Scan: %s", msg);
                        goto out;
                }
        }
        for (int64_t t = 0; t < steps; t++) {
                rc = ctl_poll("Scan", t, err, errlen);
                if (rc)
                        goto out;
                for (int m = 0; m < nsi; m++) {
                        const struct ops_tensor *x = &call->in[nst + m];
                        int64_t pos = ints_at(in_dirs, m, 0) ? steps - 1 - t : t;
                        int64_t outer = 1, inner = tensor_bytes(&bin[nst + m]);

                        for (int d = 0; d < axis[m]; d++)
                                outer *= x->dims[d];
                        inner = outer ? inner / outer : 0;
                        for (int64_t o = 0; o < outer && inner > 0; o++)
                                memcpy((uint8_t *)bin[nst + m].data + o * inner,
                                       (const uint8_t *)x->data + (o * steps + pos) * inner, (size_t)inner);
                }
                for (int i = 0; i < nst; i++)
                        bin[i] = cur[i];
                rc = call->graph_run(call->graph_ctx, body, call->nin, bin, &n, out, CTL_MAX_BODY_OUT,
                                     err, errlen);
                if (rc < 0)
                        goto out;
                if (nscan < 0) {
                        nscan = n - nst;
                        if (nscan < 0 || nst + nscan < call->nout) {
                                rc = ops_fail(err, errlen, -EINVAL,
                                              "Scan: body has %d outputs, expected %d states + the scan outputs of %d node outputs",
                                              n, nst, call->nout);
                                tensors_free(out, n);
                                goto out;
                        }
                        for (int k = 0; k < nscan && k < OPS_MAX_OUTPUTS; k++)
                                st[k].axis = (int)ints_at(out_axes, k, 0);
                }
                for (int k = 0; k < nscan && k + nst < call->nout; k++) {
                        int64_t pos = ints_at(out_dirs, k, 0) ? steps - 1 - t : t;

                        /* room for every step at once: the strides of axis > 0 are final */
                        if (!st[k].first.dtype) {
                                rc = stack_init(&st[k], &out[nst + k], "Scan", k, err, errlen);
                                if (!rc)
                                        rc = stack_reserve(&st[k], steps, "Scan", err, errlen);
                        }
                        if (!rc)
                                rc = stack_put(&st[k], &out[nst + k], pos, "Scan", k, err, errlen);
                        if (rc) {
                                tensors_free(out, n);
                                goto out;
                        }
                }
                if (owned)
                        tensors_free(cur, nst);
                for (int i = 0; i < nst; i++)
                        cur[i] = out[i];
                owned = 1;
                tensors_free(out + nst, n - nst);
        }
        for (int i = 0; i < nst; i++) {
                if (owned) {
                        r->t[i] = cur[i];
                        cur[i].data = NULL;
                } else {
                        rc = tensor_dup(&cur[i], &r->t[i], "Scan", err, errlen);
                        if (rc)
                                goto out;
                }
                r->n = i + 1;
        }
        for (int j = nst; j < call->nout; j++) {
                rc = stack_take(&st[j - nst], steps, &r->t[j], "Scan", j - nst, err, errlen);
                if (rc)
                        goto out;
                r->n = j + 1;
        }
out:
        if (owned)
                tensors_free(cur, nst);
        for (int m = 0; m < nsi; m++)
                ops_buf_free(bin[nst + m].data);
        for (int k = 0; k < OPS_MAX_OUTPUTS; k++)
                ops_buf_free(st[k].data);
        if (rc)
                result_free(r);
        return rc;
}


/* ---------------------------------------------------------------- SequenceMap */

/* The body runs once per tensor of the input sequence; sequence inputs after the first give
 * it their tensor at the same position (they must be as long), tensor inputs are passed
 * whole. Output k collects the body's output k of every iteration into a sequence. */
static int seqmap_compute(const struct ops_call *call, struct ctl_result *r, char *err,
                          size_t errlen)
{
        struct seq_view v[OPS_MAX_INPUTS];
        struct ops_tensor bin[OPS_MAX_INPUTS], out[CTL_MAX_BODY_OUT];
        struct ops_tensor *got = NULL; /* count x nout body outputs, ops_buf data */
        const void *body;
        uint32_t count;
        int64_t done = 0;
        int rc, n = 0, nout = call->nout;

        r->n = 0;
        rc = need_runner(call, "SequenceMap", err, errlen);
        if (!rc)
                rc = seq_open(&call->in[0], "SequenceMap", "input sequence", &v[0], err, errlen);
        if (rc)
                return rc;
        body = graph_attr(call, "body");
        if (!body)
                return ops_fail(err, errlen, -EINVAL, "SequenceMap: no body graph");
        count = v[0].count;
        for (int i = 1; i < call->nin; i++) {
                if (call->in[i].dtype != PROTO_DTYPE_SEQUENCE)
                        continue;
                rc = seq_open(&call->in[i], "SequenceMap", "an additional input", &v[i], err, errlen);
                if (rc)
                        return rc;
                if (v[i].count != count)
                        return ops_fail(err, errlen, -EINVAL,
                                        "SequenceMap: input %d holds %u tensors, the input sequence %u",
                                        i, v[i].count, count);
        }
        if (nout < 1)
                return ops_fail(err, errlen, -EINVAL, "SequenceMap: no outputs");
        if (count > PROTO_SEQ_MAX_COUNT)
                return ops_fail(err, errlen, -EINVAL, "SequenceMap: %u tensors are more than a sequence holds",
                                count);
        rc = ctl_trips_refused("SequenceMap", count, err, errlen);
        if (rc)
                return rc;
        got = calloc((size_t)count * (size_t)nout + 1, sizeof(*got));
        if (!got)
                return ops_fail(err, errlen, -ENOMEM, "SequenceMap: out of memory");
        for (uint32_t it = 0; it < count; it++) {
                rc = ctl_poll("SequenceMap", it, err, errlen);
                if (rc)
                        goto out;
                for (int i = 0; i < call->nin; i++) {
                        if (call->in[i].dtype == PROTO_DTYPE_SEQUENCE)
                                seq_at(&v[i], it, &bin[i]);
                        else
                                bin[i] = call->in[i];
                }
                rc = call->graph_run(call->graph_ctx, body, call->nin, bin, &n, out, CTL_MAX_BODY_OUT,
                                     err, errlen);
                if (rc < 0)
                        goto out;
                if (n < nout) {
                        tensors_free(out, n);
                        rc = ops_fail(err, errlen, -EINVAL, "SequenceMap: body has %d output%s, the node %d",
                                      n, n == 1 ? "" : "s", nout);
                        goto out;
                }
                memcpy(&got[(size_t)it * (size_t)nout], out, sizeof(out[0]) * (size_t)nout);
                tensors_free(out + nout, n - nout);
                done = it + 1;
        }
        for (int k = 0; k < nout; k++) {
                struct ops_tensor *col = malloc(sizeof(*col) * (count ? count : 1));
                if (!col) {
                        rc = ops_fail(err, errlen, -ENOMEM, "SequenceMap: out of memory");
                        goto out;
                }
                for (uint32_t it = 0; it < count; it++)
                        col[it] = got[(size_t)it * (size_t)nout + (size_t)k];
                /* an empty input sequence gives empty outputs of the input's element type */
                rc = seq_make(col, count, count ? 0 : v[0].elem_dtype, "SequenceMap", &r->t[k], err,
                              errlen);
                free(col);
                if (rc)
                        goto out;
                r->n = k + 1;
        }
out:
        for (int64_t i = 0; i < done * nout; i++)
                ops_buf_free(got[i].data);
        free(got);
        if (rc)
                result_free(r);
        return rc;
}


/* ---------------------------------------------------------------- Scan (opset 8) */

/* Opset 8's Scan has a batch axis in front of every state and scan input and output, and an
 * optional first input, sequence_lens. Each batch entry is an opset-9 Scan of its own (scan
 * axis 0, the directions attribute as scan_input_directions): the entries are contiguous
 * slices of the inputs, and their results are stacked along the batch axis. Sequence
 * lengths shorter than the scan axis are not supported. */
static int scan8_compute(const struct ops_call *call, struct ctl_result *r, char *err, size_t errlen)
{
        struct ops_call *c = calloc(1, sizeof(*c));
        struct ctl_result one;
        int64_t batch = -1, slice[OPS_MAX_INPUTS];
        char msg[160];
        int rc = 0;

        r->n = 0;
        one.n = 0;
        if (!c)
                return ops_fail(err, errlen, -ENOMEM, "Scan: out of memory");
        if (call->nin < 2) {
                rc = ops_fail(err, errlen, -EINVAL, "Scan: needs sequence_lens (may be empty) and inputs");
                goto out;
        }
        c->nin = call->nin - 1;
        c->nout = call->nout;
        c->opset = call->opset;
        c->graph_run = call->graph_run;
        c->graph_ctx = call->graph_ctx;
        for (int i = 0; i < call->nattr && c->nattr < OPS_MAX_ATTRS; i++) {
                c->attr[c->nattr] = call->attr[i];
                if (strcmp(call->attr[i].name, "directions") == 0)
                        snprintf(c->attr[c->nattr].name, sizeof(c->attr[0].name), "scan_input_directions");
                c->nattr++;
        }
        for (int i = 1; i < call->nin; i++) {
                const struct ops_tensor *t = &call->in[i];
                int64_t bytes = tensor_bytes(t);
                if (t->ndim < 1 || bytes < 0 || (batch >= 0 && t->dims[0] != batch)) {
                        rc = ops_fail(err, errlen, -EINVAL,
                                      "Scan: input %d has no batch axis of the same extent as the others", i);
                        goto out;
                }
                batch = t->dims[0];
                slice[i] = batch ? bytes / batch : 0;
                if (bytes && !t->data) {
                        rc = ops_fail(err, errlen, -EINVAL, "Scan: needs the value of input %d", i);
                        goto out;
                }
        }
        if (call->in[0].dtype) {
                const struct ops_tensor *l = &call->in[0];
                int nsi = (int)ops_attr_int(call, "num_scan_inputs", -1);
                int64_t len = nsi >= 1 && nsi < call->nin && call->in[call->nin - nsi].ndim >= 2
                                      ? call->in[call->nin - nsi].dims[1]
                                      : -1;
                if (l->dtype != PROTO_DTYPE_INT32 || ops_tensor_numel(l) != batch || (batch && !l->data)) {
                        rc = ops_fail(err, errlen, -EINVAL, "Scan: sequence_lens must be int32 [batch]");
                        goto out;
                }
                for (int64_t b = 0; b < batch; b++)
                        if (((const int32_t *)l->data)[b] != len) {
                                rc = ops_fail(err, errlen, -ENOTSUP,
                                              "Scan: sequence_lens shorter than the scan axis are not supported");
                                goto out;
                        }
        }
        for (int64_t b = 0; b < batch; b++) {
                for (int i = 1; i < call->nin; i++) {
                        struct ops_tensor *t = &c->in[i - 1];
                        *t = call->in[i];
                        t->ndim--;
                        memmove(t->dims, t->dims + 1, sizeof(t->dims[0]) * (size_t)t->ndim);
                        t->data = t->data ? (uint8_t *)t->data + b * slice[i] : NULL;
                }
                rc = scan_compute(c, &one, err, errlen);
                if (rc)
                        goto out;
                for (int j = 0; j < one.n; j++) {
                        int64_t bytes = tensor_bytes(&one.t[j]);
                        if (b == 0) {
                                struct ops_tensor *o = &r->t[j];
                                uint64_t total = ops_bytes((uint64_t)bytes, (uint64_t)batch);
                                if (one.t[j].ndim >= OPS_MAX_DIMS) {
                                        rc = ops_fail(err, errlen, -EINVAL, "Scan: output %d has too many dimensions", j);
                                        goto out;
                                }
                                *o = one.t[j];
                                o->ndim = one.t[j].ndim + 1;
                                o->dims[0] = batch;
                                memcpy(o->dims + 1, one.t[j].dims, sizeof(o->dims[0]) * (size_t)one.t[j].ndim);
                                o->data = ops_buf_alloc(total, msg, sizeof(msg));
                                if (!o->data) {
                                        rc = ops_fail(err, errlen, -ENOMEM, "Scan: %s", msg);
                                        goto out;
                                }
                                r->n = j + 1;
                        } else if (one.t[j].dtype != r->t[j].dtype || one.t[j].ndim + 1 != r->t[j].ndim ||
                                   memcmp(one.t[j].dims, r->t[j].dims + 1,
                                          sizeof(one.t[j].dims[0]) * (size_t)one.t[j].ndim) != 0) {
                                rc = ops_fail(err, errlen, -EINVAL,
                                              "Scan: output %d differs in shape between batch entries", j);
                                goto out;
                        }
                        if (bytes)
                                memcpy((uint8_t *)r->t[j].data + b * bytes, one.t[j].data, (size_t)bytes);
                }
                result_free(&one);
        }
        if (batch == 0) {
                rc = ops_fail(err, errlen, -ENOTSUP, "Scan: an empty batch has no output shapes");
                goto out;
        }
out:
        result_free(&one);
        free(c);
        if (rc)
                result_free(r);
        return rc;
}

/* ---------------------------------------------------------------- glue */

void ops_control_forget(void)
{
        result_free(&ctl_slot.r);
        ctl_slot.key = NULL;
}

typedef int (*ctl_compute_fn)(const struct ops_call *call, struct ctl_result *r, char *err,
                              size_t errlen);

static int ctl_infer(ctl_compute_fn compute, struct ops_call *call, char *err, size_t errlen)
{
        struct ctl_result r;
        int rc = compute(call, &r, err, errlen);

        if (rc)
                return rc;
        result_free(&ctl_slot.r); /* a stale slot: infer whose run never came */
        ctl_slot.key = call;
        ctl_slot.r = r;
        for (int j = 0; j < call->nout; j++) {
                call->out[j] = r.t[j];
                call->out[j].data = NULL;
        }
        return 0;
}

static int ctl_run(ctl_compute_fn compute, const char *op, const struct ops_call *call, char *err,
                   size_t errlen)
{
        char a[OPS_SHAPE_STR_MAX], b[OPS_SHAPE_STR_MAX];
        struct ctl_result r;
        int rc = 0;

        if (ctl_slot.key == call && ctl_slot.r.n == call->nout) {
                r = ctl_slot.r;
                ctl_slot.r.n = 0;
        } else {
                rc = compute(call, &r, err, errlen);
                if (rc)
                        return rc;
        }
        ctl_slot.key = NULL;
        for (int j = 0; j < call->nout && !rc; j++) {
                const struct ops_tensor *o = &call->out[j];
                int64_t bytes = tensor_bytes(&r.t[j]);

                if (!o->dtype)
                        continue; /* an omitted output */
                if (o->dtype != r.t[j].dtype || !ops_shape_equal(o, &r.t[j]))
                        rc = ops_fail(err, errlen, -EINVAL, "%s: output %d is %s but computed %s", op, j,
                                      ops_shape_str(o, a, sizeof(a)), ops_shape_str(&r.t[j], b, sizeof(b)));
                else if (bytes > 0 && o->data)
                        memcpy(o->data, r.t[j].data, (size_t)bytes);
        }
        result_free(&r);
        return rc;
}

static int ctl_check(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        return ops_fail(err, errlen, -EINVAL, "control-flow operators run only inside graphs");
}

static void ctl_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        uint64_t bytes = 0;

        for (int i = 0; i < call->nin && i < OPS_MAX_INPUTS; i++) {
                int64_t b = call->in[i].dtype ? tensor_bytes(&call->in[i]) : 0;
                if (b > 0)
                        bytes = ops_add_sat(bytes, (uint64_t)b);
        }
        *ret_flops = 0;
        *ret_bytes = bytes;
}

static int if_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return ctl_infer(if_compute, call, err, errlen);
}

static int if_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        return ctl_run(if_compute, "If", call, err, errlen);
}

static int loop_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return ctl_infer(loop_compute, call, err, errlen);
}

static int loop_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        return ctl_run(loop_compute, "Loop", call, err, errlen);
}

static int scan_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return ctl_infer(scan_compute, call, err, errlen);
}

static int scan_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        return ctl_run(scan_compute, "Scan", call, err, errlen);
}

const struct ops_def ops_if_def = {
        .name = "If", .min_inputs = 1, .max_inputs = 1, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_AICPU, .check = ctl_check, .run = if_run, .cost = ctl_cost,
        .infer = if_infer, .since_version = 1, .flags = OPS_FLAG_VALUES,
};

const struct ops_def ops_loop_def = {
        .name = "Loop", .min_inputs = 2, .max_inputs = OPS_MAX_INPUTS, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_AICPU, .check = ctl_check, .run = loop_run, .cost = ctl_cost,
        .infer = loop_infer, .since_version = 1, .flags = OPS_FLAG_VALUES,
};

const struct ops_def ops_scan_def = {
        .name = "Scan", .min_inputs = 1, .max_inputs = OPS_MAX_INPUTS, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_AICPU, .check = ctl_check, .run = scan_run, .cost = ctl_cost,
        .infer = scan_infer, .since_version = 9,
};

static int seqmap_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return ctl_infer(seqmap_compute, call, err, errlen);
}

static int seqmap_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        return ctl_run(seqmap_compute, "SequenceMap", call, err, errlen);
}

const struct ops_def ops_sequence_map_def = {
        .name = "SequenceMap", .min_inputs = 1, .max_inputs = OPS_MAX_INPUTS,
        .outputs = OPS_MAX_OUTPUTS, .engine = OPS_ENGINE_AICPU, .check = ctl_check,
        .run = seqmap_run, .cost = ctl_cost, .infer = seqmap_infer, .since_version = 17,
        .flags = OPS_FLAG_VALUES,
};

static int scan8_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        return ctl_infer(scan8_compute, call, err, errlen);
}

static int scan8_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        return ctl_run(scan8_compute, "Scan", call, err, errlen);
}

const struct ops_def ops_scan8_def = {
        .name = "Scan", .min_inputs = 2, .max_inputs = OPS_MAX_INPUTS, .outputs = OPS_MAX_OUTPUTS,
        .engine = OPS_ENGINE_AICPU, .check = ctl_check, .run = scan8_run, .cost = ctl_cost,
        .infer = scan8_infer, .since_version = 8,
};

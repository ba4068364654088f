/* Losses for the vector engine: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, with
 * reduction none / sum / mean, per-class weights, ignore_index, and the optional log_prob
 * output of SoftmaxCrossEntropyLoss.
 *
 * Both see their input as [N, C, D] (D the product of the extra dims d1...), the targets as
 * [N, D]. SoftmaxCrossEntropyLoss first takes a numerically stable log-softmax over C
 * (maximum subtracted, the sum accumulated in double) into log_prob or scratch, then shares
 * the NLL reduction. A mean divides by the summed weights of the targets not ignored, as
 * the ONNX definition does. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn-common.h"

struct loss_shape {
        int64_t n, c, d;
        int none;         /* reduction "none": one loss per target */
        int mean;
        int has_ii;       /* ignore_index given */
        int64_t ii;
};

static int loss_shape_of(const struct ops_def *def, const struct ops_call *call,
                         struct loss_shape *s, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *t = &call->in[1];
        const char *red = nn_attr_str(call, "reduction", "mean");
        int i;

        memset(s, 0, sizeof(*s));
        if (x->ndim < 2)
                return ops_fail(err, errlen, -EINVAL, "%s: input of rank %d, 2 or more needed",
                                def->name, x->ndim);
        if (t->ndim != x->ndim - 1 || t->dims[0] != x->dims[0])
                return ops_fail(err, errlen, -EINVAL, "%s: target shape does not fit the input",
                                def->name);
        for (i = 2; i < x->ndim; i++)
                if (t->dims[i - 1] != x->dims[i])
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: target shape does not fit the input", def->name);
        s->n = x->dims[0];
        s->c = x->dims[1];
        s->d = 1;
        for (i = 2; i < x->ndim; i++)
                s->d *= x->dims[i];
        if (strcmp(red, "none") == 0)
                s->none = 1;
        else if (strcmp(red, "mean") == 0)
                s->mean = 1;
        else if (strcmp(red, "sum") != 0)
                return ops_fail(err, errlen, -EINVAL, "%s: reduction '%s' unknown", def->name, red);
        s->has_ii = ops_attr_find(call, "ignore_index") != NULL;
        s->ii = ops_attr_int(call, "ignore_index", 0);
        if (nn_has_in(call, 2) && (call->in[2].ndim != 1 || call->in[2].dims[0] != s->c ||
                                   !nn_is_float(call->in[2].dtype)))
                return ops_fail(err, errlen, -EINVAL, "%s: weights must be floating [%lld]",
                                def->name, (long long)s->c);
        return 0;
}

static int loss_infer(const struct ops_def *def, struct ops_call *call, char *err,
                      size_t errlen)
{
        struct loss_shape s;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 1, nn_int_index_types, err, errlen);
        if (!rc)
                rc = loss_shape_of(def, call, &s, err, errlen);
        if (rc)
                return rc;
        if (s.none)
                nn_set_out(call, 0, call->in[0].dtype, call->in[1].ndim, call->in[1].dims);
        else
                nn_set_out(call, 0, call->in[0].dtype, 0, NULL);
        nn_set_out(call, 1, call->in[0].dtype, call->in[0].ndim, call->in[0].dims);
        return 0;
}

/* loss[n, d] = -lp[n, t, d] * w[t]; reduced into out. lp is [N, C, D] float. */
static int nll_core(const struct ops_def *def, const struct ops_call *call,
                    const struct loss_shape *s, const float *lp, char *err, size_t errlen)
{
        const struct ops_tensor *t = &call->in[1];
        struct nn_f32 w = { NULL, NULL };
        double sum = 0, wsum = 0;
        int64_t i, j;

        if (nn_has_in(call, 2) && nn_f32_in(&call->in[2], &w))
                return ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
        for (i = 0; i < s->n; i++) {
                for (j = 0; j < s->d; j++) {
                        int64_t k = i * s->d + j, cls = nn_get_int(t, k);
                        double l = 0, wt = 0;

                        if (!s->has_ii || cls != s->ii) {
                                if (cls < 0 || cls >= s->c) {
                                        nn_f32_done(&w);
                                        return ops_fail(err, errlen, -EINVAL,
                                                        "%s: target %lld out of range [0, %lld)",
                                                        def->name, (long long)cls,
                                                        (long long)s->c);
                                }
                                wt = w.p ? w.p[cls] : 1.0;
                                l = -(double)lp[(i * s->c + cls) * s->d + j] * wt;
                        }
                        if (s->none)
                                nn_put(&call->out[0], k, l);
                        sum += l;
                        wsum += wt;
                }
        }
        if (!s->none)
                nn_put(&call->out[0], 0, s->mean ? sum / wsum : sum);
        nn_f32_done(&w);
        return 0;
}

static void loss_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        nn_cost_simple(call, 4, ret_flops, ret_bytes);
}

/* ---------------------------------------------------------------- NegativeLogLikelihoodLoss */

static int nll_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        struct loss_shape s;
        struct nn_f32 x;
        int rc;

        rc = loss_shape_of(def, call, &s, err, errlen);
        if (rc)
                return rc;
        if (nn_f32_in(&call->in[0], &x))
                return ops_fail(err, errlen, -ENOMEM, "NegativeLogLikelihoodLoss: out of memory");
        rc = nll_core(def, call, &s, x.p, err, errlen);
        nn_f32_done(&x);
        return rc;
}

const struct ops_def ops_nll_loss_def = {
        .name = "NegativeLogLikelihoodLoss", .min_inputs = 2, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = nll_run, .cost = loss_cost, .infer = loss_infer,
        .since_version = 12,
};

/* ---------------------------------------------------------------- SoftmaxCrossEntropyLoss */

/* lp[n, :, d] = x - max - log(sum(exp(x - max))) over the C axis, a row of D at a time. */
static void log_softmax_c(const struct loss_shape *s, const float *x, float *lp, double *acc,
                          float *mx)
{
        int64_t i, c, j;

        for (i = 0; i < s->n; i++) {
                const float *xs = x + i * s->c * s->d;
                float *ls = lp + i * s->c * s->d;

                for (j = 0; j < s->d; j++) {
                        mx[j] = -INFINITY;
                        acc[j] = 0;
                }
                for (c = 0; c < s->c; c++)
                        for (j = 0; j < s->d; j++)
                                mx[j] = xs[c * s->d + j] > mx[j] ? xs[c * s->d + j] : mx[j];
                for (c = 0; c < s->c; c++)
                        for (j = 0; j < s->d; j++)
                                acc[j] += exp((double)xs[c * s->d + j] - mx[j]);
                for (j = 0; j < s->d; j++)
                        acc[j] = log(acc[j]) + mx[j];
                for (c = 0; c < s->c; c++)
                        for (j = 0; j < s->d; j++)
                                ls[c * s->d + j] = (float)(xs[c * s->d + j] - acc[j]);
        }
}

static int sce_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        struct nn_f32 x, lp = { NULL, NULL };
        struct loss_shape s;
        double *acc;
        float *mx, *scratch = NULL;
        int rc;

        rc = loss_shape_of(def, call, &s, err, errlen);
        if (rc)
                return rc;
        acc = ops_buf_alloc((size_t)(s.d ? s.d : 1) * sizeof(double), NULL, 0);
        mx = ops_buf_alloc((size_t)(s.d ? s.d : 1) * sizeof(float), NULL, 0);
        rc = !acc || !mx || nn_f32_in(&call->in[0], &x);
        if (!rc) {
                if (nn_want_out(call, 1)) {
                        rc = nn_f32_out(&call->out[1], &lp);
                } else {
                        int64_t n = ops_tensor_numel(&call->in[0]);

                        scratch = ops_buf_alloc((size_t)(n ? n : 1) * sizeof(float), NULL, 0);
                        lp.p = scratch;
                        rc = !scratch;
                }
                if (rc)
                        nn_f32_done(&x);
        }
        if (rc) {
                ops_buf_free(acc);
                ops_buf_free(mx);
                return ops_fail(err, errlen, -ENOMEM, "SoftmaxCrossEntropyLoss: out of memory");
        }
        log_softmax_c(&s, x.p, lp.p, acc, mx);
        rc = nll_core(def, call, &s, lp.p, err, errlen);
        if (!rc && nn_want_out(call, 1))
                nn_f32_commit(&call->out[1], &lp);
        if (!scratch)
                nn_f32_done(&lp);
        ops_buf_free(scratch);
        nn_f32_done(&x);
        ops_buf_free(acc);
        ops_buf_free(mx);
        return rc;
}

const struct ops_def ops_sce_loss_def = {
        .name = "SoftmaxCrossEntropyLoss", .min_inputs = 2, .max_inputs = 3, .outputs = 2,
        .engine = OPS_ENGINE_VECTOR, .run = sce_run, .cost = loss_cost, .infer = loss_infer,
        .since_version = 12,
};

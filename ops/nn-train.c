/* The optimizer steps of the ai.onnx.preview.training domain: Adagrad, Adam and Momentum
 * (with its Nesterov mode). Each takes the learning rate R (a floating scalar), the update
 * count T (an int64 scalar) and then, for n tensors being optimized, n X, n G (gradients)
 * and n of each state tensor (Adagrad: H; Adam: V, H; Momentum: V), and gives the n new X
 * followed by the n new state tensors of each kind. The formulas are the ONNX reference's,
 * computed in double per element and rounded once into X's dtype (float32 or float64).
 *
 * Known data problem: the onnx test test_adam_multiple computes its expected outputs with
 * epsilon 1e-2 but its model omits the attribute (onnx/onnx#7749, fixed upstream by
 * regenerating the model); with the schema's default it cannot match.
 *
 * The number of tensors is limited by OPS_MAX_INPUTS / OPS_MAX_OUTPUTS (Adam: 2 tensors,
 * 6 outputs); a model with more gets an error naming the operator. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "nn-common.h"

enum train_kind { TRAIN_ADAGRAD, TRAIN_ADAM, TRAIN_MOMENTUM };

/* Per kind: state tensors per optimized tensor (besides X and G). */
static int train_states(enum train_kind k)
{
        return k == TRAIN_ADAM ? 2 : 1;
}

static enum train_kind train_kind_of(const struct ops_def *def)
{
        if (strcmp(def->name, "Adagrad") == 0)
                return TRAIN_ADAGRAD;
        if (strcmp(def->name, "Adam") == 0)
                return TRAIN_ADAM;
        return TRAIN_MOMENTUM;
}

/* The number of optimized tensors, from the input and output counts. */
static int train_count(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen)
{
        int per = 2 + train_states(train_kind_of(def));
        int n;

        if (call->nin < 2 + per || (call->nin - 2) % per)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: %d inputs; expected R, T and %d tensors per optimized tensor",
                                def->name, call->nin, per);
        n = (call->nin - 2) / per;
        if (call->nout != (per - 1) * n)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: %d outputs for %d optimized tensors, expected %d (at most %d tensors fit)",
                                def->name, call->nout, n, (per - 1) * n,
                                OPS_MAX_OUTPUTS / (per - 1));
        return n;
}

static int train_is_float(int dtype)
{
        return dtype == PROTO_DTYPE_FLOAT32 || dtype == PROTO_DTYPE_FLOAT64;
}

static int train_infer(const struct ops_def *def, struct ops_call *call, char *err,
                       size_t errlen)
{
        enum train_kind kind = train_kind_of(def);
        const char *mode;
        int n, per, i, j, rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (rc)
                return rc;
        n = train_count(def, call, err, errlen);
        if (n < 0)
                return n;
        per = 2 + train_states(kind);
        if (!train_is_float(call->in[0].dtype) || call->in[0].ndim != 0)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: R must be a float32 or float64 scalar", def->name);
        if (call->in[1].dtype != PROTO_DTYPE_INT64 || call->in[1].ndim != 0)
                return ops_fail(err, errlen, -EINVAL, "%s: T must be an int64 scalar", def->name);
        if (kind == TRAIN_MOMENTUM) {
                mode = nn_attr_str(call, "mode", NULL);
                if (!mode || (strcmp(mode, "standard") != 0 && strcmp(mode, "nesterov") != 0))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: attribute mode must be 'standard' or 'nesterov'",
                                        def->name);
                if (!ops_attr_find(call, "alpha") || !ops_attr_find(call, "beta") ||
                    !ops_attr_find(call, "norm_coefficient"))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: attributes alpha, beta and norm_coefficient are required",
                                        def->name);
        }
        for (i = 0; i < n; i++) {
                const struct ops_tensor *x = &call->in[2 + i];

                if (!train_is_float(x->dtype))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: input %d (X) must be float32 or float64", def->name,
                                        2 + i);
                for (j = 1; j < per; j++) {
                        const struct ops_tensor *t = &call->in[2 + j * n + i];

                        if (t->dtype != x->dtype || !ops_shape_equal(t, x))
                                return ops_fail(err, errlen, -EINVAL,
                                                "%s: input %d must have the dtype and shape of input %d",
                                                def->name, 2 + j * n + i, 2 + i);
                }
                for (j = 0; j < per - 1; j++)
                        nn_set_out(call, j * n + i, x->dtype, x->ndim, x->dims);
        }
        return 0;
}

static double train_get(const struct ops_tensor *t, int64_t i)
{
        return t->dtype == PROTO_DTYPE_FLOAT64 ? ((const double *)t->data)[i]
                                               : (double)((const float *)t->data)[i];
}

static void train_put(const struct ops_tensor *t, int64_t i, double v)
{
        if (t->dtype == PROTO_DTYPE_FLOAT64)
                ((double *)t->data)[i] = v;
        else
                ((float *)t->data)[i] = (float)v;
}

static int train_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        enum train_kind kind = train_kind_of(def);
        double r = train_get(&call->in[0], 0);
        int64_t t = *(const int64_t *)call->in[1].data;
        double normc = ops_attr_float(call, "norm_coefficient", 0);
        /* the schema's default, a float32 1e-6 */
        double eps = ops_attr_float(call, "epsilon", (double)1e-6f);
        double alpha, beta, decay, post = 0, r_adj = r, beta_adj;
        int nesterov = 0;
        int n, i, rc;

        n = train_count(def, call, err, errlen);
        if (n < 0)
                return n;
        switch (kind) {
        case TRAIN_ADAGRAD:
                decay = ops_attr_float(call, "decay_factor", 0);
                r_adj = r / (1 + (double)t * decay);
                alpha = beta = 0;
                break;
        case TRAIN_ADAM:
                alpha = ops_attr_float(call, "alpha", 0.9);
                beta = ops_attr_float(call, "beta", 0.999);
                post = ops_attr_float(call, "norm_coefficient_post", 0);
                /* bias correction of both moments once steps have been taken */
                if (t > 0)
                        r_adj = r * sqrt(1 - pow(beta, (double)t)) / (1 - pow(alpha, (double)t));
                break;
        default:
                alpha = ops_attr_float(call, "alpha", 0);
                beta = ops_attr_float(call, "beta", 0);
                nesterov = strcmp(nn_attr_str(call, "mode", "standard"), "nesterov") == 0;
                break;
        }
        /* the first Momentum step takes the whole gradient */
        beta_adj = t > 0 ? beta : 1;
        for (i = 0; i < n; i++) {
                const struct ops_tensor *x = &call->in[2 + i], *g = &call->in[2 + n + i];
                const struct ops_tensor *s1 = &call->in[2 + 2 * n + i];
                const struct ops_tensor *xo = &call->out[i], *s1o = &call->out[n + i];
                int64_t k, numel = ops_tensor_numel(x);

                for (k = 0; k < numel; k++) {
                        double xv = train_get(x, k);
                        double gr = normc * xv + train_get(g, k);
                        double s = train_get(s1, k), xn;

                        if (k && (k & (OPS_POLL_ELEMS - 1)) == 0) {
                                rc = ops_poll(def->name, err, errlen);
                                if (rc)
                                        return rc;
                        }
                        if (kind == TRAIN_ADAGRAD) {
                                double h = s + gr * gr;

                                xn = xv - r_adj * gr / (sqrt(h) + eps);
                                train_put(s1o, k, h);
                        } else if (kind == TRAIN_ADAM) {
                                double v = alpha * s + (1 - alpha) * gr;
                                double h = beta * train_get(&call->in[2 + 3 * n + i], k) +
                                           (1 - beta) * gr * gr;

                                xn = (1 - post) * (xv - r_adj * (v / (sqrt(h) + eps)));
                                train_put(s1o, k, v);
                                train_put(&call->out[2 * n + i], k, h);
                        } else {
                                double v = alpha * s + beta_adj * gr;

                                xn = nesterov ? xv - r * (gr + alpha * v) : xv - r * v;
                                train_put(s1o, k, v);
                        }
                        train_put(xo, k, xn);
                }
        }
        return 0;
}

static void train_cost(const struct ops_def *def, const struct ops_call *call,
                       uint64_t *ret_flops, uint64_t *ret_bytes)
{
        (void)def;
        nn_cost_simple(call, 12, ret_flops, ret_bytes);
}

static const char *const adagrad_attrs[] = { "decay_factor", "epsilon", "norm_coefficient", NULL };
static const char *const adam_attrs[] = { "alpha", "beta", "epsilon", "norm_coefficient",
                                          "norm_coefficient_post", NULL };
static const char *const momentum_attrs[] = { "alpha", "beta", "mode", "norm_coefficient", NULL };

#define TRAIN_DOMAIN "ai.onnx.preview.training"

const struct ops_def ops_adagrad_def = {
        .name = "Adagrad", .min_inputs = 5, .max_inputs = OPS_MAX_INPUTS,
        .outputs = OPS_MAX_OUTPUTS, .engine = OPS_ENGINE_VECTOR, .run = train_run,
        .cost = train_cost, .infer = train_infer, .since_version = 1, .domain = TRAIN_DOMAIN,
        .attrs = adagrad_attrs,
};

const struct ops_def ops_adam_def = {
        .name = "Adam", .min_inputs = 6, .max_inputs = OPS_MAX_INPUTS,
        .outputs = OPS_MAX_OUTPUTS, .engine = OPS_ENGINE_VECTOR, .run = train_run,
        .cost = train_cost, .infer = train_infer, .since_version = 1, .domain = TRAIN_DOMAIN,
        .attrs = adam_attrs,
};

const struct ops_def ops_momentum_def = {
        .name = "Momentum", .min_inputs = 5, .max_inputs = OPS_MAX_INPUTS,
        .outputs = OPS_MAX_OUTPUTS, .engine = OPS_ENGINE_VECTOR, .run = train_run,
        .cost = train_cost, .infer = train_infer, .since_version = 1, .domain = TRAIN_DOMAIN,
        .attrs = momentum_attrs,
};

/* Random operators: RandomNormal, RandomUniform and their Like forms, Bernoulli and
 * Multinomial. A node with a "seed" attribute gives the same numbers on every run (the
 * seed's bits start a splitmix64 stream, so nearby seeds still give unrelated streams);
 * without one every run draws fresh numbers. ONNX leaves the generator to the runtime, so
 * the values match no other runtime's, only their distribution does. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "shape-common.h"

struct rnd {
        uint64_t s;
};

static uint64_t rnd_next(struct rnd *r)
{
        uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 bits. */
static double rnd_unit(struct rnd *r)
{
        return (double)(rnd_next(r) >> 11) * 0x1p-53;
}

/* The stream of a call: from its seed attribute, or a fresh one per run. */
static void rnd_init(const struct ops_call *call, struct rnd *r)
{
        static _Atomic uint64_t runs;
        const struct ops_attr *seed = ops_attr_find(call, "seed");

        if (seed) {
                double v = seed->type == OPS_ATTR_INT ? (double)seed->i : seed->f;

                memcpy(&r->s, &v, sizeof(r->s));
                r->s ^= 0x6a09e667f3bcc909ULL;
        } else {
                struct timespec ts;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                r->s = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                       (atomic_fetch_add(&runs, 1) * 0xd1b54a32d192ed03ULL);
        }
        rnd_next(r);
}

/* Standard normal by Box-Muller, both values of each pair used. */
struct gauss {
        double spare;
        int have;
};

static double rnd_normal(struct rnd *r, struct gauss *g)
{
        double u, v, m;

        if (g->have) {
                g->have = 0;
                return g->spare;
        }
        u = 1.0 - rnd_unit(r); /* (0, 1]: log(u) is finite */
        v = rnd_unit(r);
        m = sqrt(-2.0 * log(u));
        g->spare = m * sin(2 * M_PI * v);
        g->have = 1;
        return m * cos(2 * M_PI * v);
}

#define RND_FLOATS SHP_FLOATS

/* The "dtype" attribute of the generators: a float dtype, dflt when absent. */
static int rnd_dtype(const struct ops_def *def, const struct ops_call *call, int dflt, uint32_t ok,
                     int *ret, char *err, size_t errlen)
{
        int64_t d;
        int rc = shp_attr_int(def, call, "dtype", dflt, &d, err, errlen);

        if (rc)
                return rc;
        if (d <= 0 || d >= 32 || !(ok & SHP_T(d)))
                return ops_fail(err, errlen, -EINVAL, "%s: unsupported dtype %lld", def->name,
                                (long long)d);
        *ret = (int)d;
        return 0;
}

static int rnd_seed_ok(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen)
{
        const struct ops_attr *seed = ops_attr_find(call, "seed");

        if (seed && seed->type != OPS_ATTR_FLOAT && seed->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "%s: attribute 'seed' must be a float",
                                def->name);
        return 0;
}

static int is_normal(const struct ops_def *def)
{
        return strncmp(def->name, "RandomNormal", 12) == 0;
}

static int is_like(const struct ops_def *def)
{
        size_t n = strlen(def->name);

        return n > 4 && strcmp(def->name + n - 4, "Like") == 0;
}

/* RandomNormal/RandomUniform: shape from the attribute; the Like forms: input 0's shape
 * and, without a dtype attribute, its dtype. */
static int gen_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t dims[OPS_MAX_DIMS];
        double a, b;
        int rc, n, dtype;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = rnd_seed_ok(def, call, err, errlen);
        if (!rc)
                rc = shp_attr_float(def, call, is_normal(def) ? "mean" : "low", 0, &a, err, errlen);
        if (!rc)
                rc = shp_attr_float(def, call, is_normal(def) ? "scale" : "high", 1, &b, err,
                                    errlen);
        if (rc)
                return rc;
        if (!isfinite(a) || !isfinite(b) || (!is_normal(def) && b < a))
                return ops_fail(err, errlen, -EINVAL, "%s: %s %g and %s %g do not make a range",
                                def->name, is_normal(def) ? "mean" : "low", a,
                                is_normal(def) ? "scale" : "high", b);
        if (is_like(def)) {
                const struct ops_tensor *x = &call->in[0];

                char buf[OPS_DTYPE_STR_MAX];

                rc = shp_want_dtype(def, call, 0, SHP_ALL, err, errlen);
                if (!rc && !(RND_FLOATS & SHP_T(x->dtype)) && !ops_attr_find(call, "dtype"))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: input 0 is %s, so attribute 'dtype' must name a "
                                        "float dtype", def->name,
                                        ops_dtype_str(x->dtype, buf, sizeof(buf)));
                if (!rc)
                        rc = rnd_dtype(def, call, RND_FLOATS & SHP_T(x->dtype) ? x->dtype : 0,
                                       RND_FLOATS, &dtype, err, errlen);
                if (rc)
                        return rc;
                shp_set_out(call, 0, dtype, x->ndim, x->dims);
                return 0;
        }
        rc = rnd_dtype(def, call, PROTO_DTYPE_FLOAT32, RND_FLOATS, &dtype, err, errlen);
        if (!rc)
                rc = shp_attr_ints(def, call, "shape", dims, OPS_MAX_DIMS, &n, err, errlen);
        if (rc)
                return rc;
        if (n < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: attribute 'shape' is required",
                                def->name);
        for (int i = 0; i < n; i++)
                if (dims[i] < 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: attribute 'shape' has negative extent %lld",
                                        def->name, (long long)dims[i]);
        shp_set_out(call, 0, dtype, n, dims);
        return 0;
}

static int gen_run(const struct ops_def *def, const struct ops_call *call, char *err,
                   size_t errlen)
{
        const struct ops_tensor *y = &call->out[0];
        int64_t n = ops_tensor_numel(y), done, m, i;
        int normal = is_normal(def);
        double a = ops_attr_float(call, normal ? "mean" : "low", 0);
        double b = ops_attr_float(call, normal ? "scale" : "high", 1);
        double buf[OPS_CHUNK];
        struct gauss g = { 0 };
        struct rnd r;
        int rc;

        rnd_init(call, &r);
        for (done = 0; done < n; done += m) {
                m = n - done < OPS_CHUNK ? n - done : OPS_CHUNK;
                if (normal)
                        for (i = 0; i < m; i++)
                                buf[i] = a + b * rnd_normal(&r, &g);
                else
                        for (i = 0; i < m; i++)
                                buf[i] = a + (b - a) * rnd_unit(&r);
                shp_store_f64(y->dtype, y->data, done, m, buf);
                if ((done + m) % OPS_POLL_ELEMS == 0 && (rc = ops_poll(def->name, err, errlen)))
                        return rc;
        }
        return 0;
}

static void rnd_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        shp_cost(call, 20, ret_flops, ret_bytes);
}

static const char *const normal_attrs[] = { "dtype", "mean", "scale", "seed", "shape", NULL };
static const char *const uniform_attrs[] = { "dtype", "high", "low", "seed", "shape", NULL };
static const char *const normal_like_attrs[] = { "dtype", "mean", "scale", "seed", NULL };
static const char *const uniform_like_attrs[] = { "dtype", "high", "low", "seed", NULL };

const struct ops_def ops_random_normal_def = {
        .name = "RandomNormal", .min_inputs = 0, .max_inputs = 0, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gen_run, .cost = rnd_cost, .infer = gen_infer,
        .since_version = 1, .attrs = normal_attrs,
};
const struct ops_def ops_random_uniform_def = {
        .name = "RandomUniform", .min_inputs = 0, .max_inputs = 0, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gen_run, .cost = rnd_cost, .infer = gen_infer,
        .since_version = 1, .attrs = uniform_attrs,
};
const struct ops_def ops_random_normal_like_def = {
        .name = "RandomNormalLike", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gen_run, .cost = rnd_cost, .infer = gen_infer,
        .since_version = 1, .attrs = normal_like_attrs,
};
const struct ops_def ops_random_uniform_like_def = {
        .name = "RandomUniformLike", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = gen_run, .cost = rnd_cost, .infer = gen_infer,
        .since_version = 1, .attrs = uniform_like_attrs,
};

/* ---------------------------------------------------------------- Bernoulli */

static const char *const bernoulli_attrs[] = { "dtype", "seed", NULL };

static int bernoulli_infer(const struct ops_def *def, struct ops_call *call, char *err,
                           size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int rc, dtype;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = rnd_seed_ok(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_FLOATS, err, errlen);
        if (!rc)
                rc = rnd_dtype(def, call, x->dtype, SHP_ALL, &dtype, err, errlen);
        if (rc)
                return rc;
        shp_set_out(call, 0, dtype, x->ndim, x->dims);
        return 0;
}

/* y = 1 with probability x (clamped to [0, 1]; NaN gives 0). */
static int bernoulli_run(const struct ops_def *def, const struct ops_call *call, char *err,
                         size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t n = ops_tensor_numel(x), done, m, i;
        double buf[OPS_CHUNK];
        struct rnd r;
        int rc;

        rnd_init(call, &r);
        for (done = 0; done < n; done += m) {
                m = n - done < OPS_CHUNK ? n - done : OPS_CHUNK;
                shp_load_f64(x->dtype, x->data, done, m, buf);
                for (i = 0; i < m; i++)
                        buf[i] = rnd_unit(&r) < buf[i] ? 1.0 : 0.0;
                shp_store_f64(y->dtype, y->data, done, m, buf);
                if ((done + m) % OPS_POLL_ELEMS == 0 && (rc = ops_poll(def->name, err, errlen)))
                        return rc;
        }
        return 0;
}

const struct ops_def ops_bernoulli_def = {
        .name = "Bernoulli", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = bernoulli_run, .cost = rnd_cost,
        .infer = bernoulli_infer, .since_version = 15, .attrs = bernoulli_attrs,
};

/* ---------------------------------------------------------------- Multinomial */

static const char *const multinomial_attrs[] = { "dtype", "sample_size", "seed", NULL };

/* Input [batch, classes] of unnormalized log-probabilities; output [batch, sample_size] of
 * class indices. */
static int multinomial_infer(const struct ops_def *def, struct ops_call *call, char *err,
                             size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t k, dims[2];
        int rc, dtype;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = rnd_seed_ok(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_FLOATS, err, errlen);
        if (!rc)
                rc = rnd_dtype(def, call, PROTO_DTYPE_INT32, SHP_INDEX, &dtype, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "sample_size", 1, &k, err, errlen);
        if (rc)
                return rc;
        if (x->ndim != 2)
                return ops_fail(err, errlen, -EINVAL,
                                "Multinomial: input 0 has rank %d, 2 needed ([batch, classes])",
                                x->ndim);
        if (x->dims[1] < 1)
                return ops_fail(err, errlen, -EINVAL, "Multinomial: input 0 has no classes");
        if (k < 1)
                return ops_fail(err, errlen, -EINVAL, "Multinomial: sample_size %lld < 1",
                                (long long)k);
        dims[0] = x->dims[0];
        dims[1] = k;
        shp_set_out(call, 0, dtype, 2, dims);
        return 0;
}

static int multinomial_run(const struct ops_def *def, const struct ops_call *call, char *err,
                           size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t batch = x->dims[0], classes = x->dims[1], k = y->dims[1], b, j, c;
        double *cum = ops_buf_alloc(ops_bytes((uint64_t)classes, sizeof(double)), err, errlen);
        struct rnd r;
        int rc;

        if (!cum)
                return -ENOMEM;
        rnd_init(call, &r);
        for (b = 0; b < batch; b++) {
                double mx = -INFINITY, total;

                shp_load_f64(x->dtype, x->data, b * classes, classes, cum);
                for (c = 0; c < classes; c++)
                        if (cum[c] > mx)
                                mx = cum[c];
                total = 0;
                for (c = 0; c < classes; c++) {
                        /* exp(-inf) of an excluded class is 0; a NaN weighs nothing */
                        double w = isfinite(mx) ? exp(cum[c] - mx) : (cum[c] == mx ? 1 : 0);

                        total += w == w ? w : 0;
                        cum[c] = total;
                }
                for (j = 0; j < k; j++) {
                        double u = rnd_unit(&r) * total;
                        int64_t lo = 0, hi = classes - 1, idx;

                        /* the first class whose cumulative weight exceeds u */
                        while (lo < hi) {
                                int64_t mid = lo + (hi - lo) / 2;

                                if (cum[mid] > u)
                                        hi = mid;
                                else
                                        lo = mid + 1;
                        }
                        idx = lo;
                        shp_store_i64(y->dtype, y->data, b * k + j, 1, &idx);
                }
                if ((b & 1023) == 1023 && (rc = ops_poll(def->name, err, errlen))) {
                        ops_buf_free(cum);
                        return rc;
                }
        }
        ops_buf_free(cum);
        return 0;
}

const struct ops_def ops_multinomial_def = {
        .name = "Multinomial", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = multinomial_run, .cost = rnd_cost,
        .infer = multinomial_infer, .since_version = 7, .attrs = multinomial_attrs,
};

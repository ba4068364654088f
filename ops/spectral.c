/* Signal operators of opset 17: the window generators HannWindow, HammingWindow and
 * BlackmanWindow, MelWeightMatrix, DFT and STFT. Transforms compute in double: a radix-2
 * FFT for power-of-two lengths, a direct sum over a table of twiddles for the others.
 * Complex values are a trailing dimension of 2 (real, imaginary); real input has 1. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "nn-common.h"
#include "shape-common.h"

/* Input i: one integer, read now (the output's shape depends on it). */
static int scalar_int(const struct ops_def *def, const struct ops_call *call, int i,
                      const char *what, int64_t *ret, char *err, size_t errlen)
{
        int n, rc;

        rc = shp_input_ints(def, call, i, what, ret, 1, &n, err, errlen);
        if (!rc && n != 1)
                return ops_fail(err, errlen, -EINVAL, "%s: input %d (%s) must hold one value",
                                def->name, i, what);
        return rc;
}

static int out_dtype_attr(const struct ops_def *def, const struct ops_call *call, uint32_t ok,
                          int *ret, char *err, size_t errlen)
{
        int64_t d;
        int rc = shp_attr_int(def, call, "output_datatype", PROTO_DTYPE_FLOAT32, &d, err, errlen);

        if (rc)
                return rc;
        if (d <= 0 || d >= 32 || !(ok & SHP_T(d)))
                return ops_fail(err, errlen, -EINVAL, "%s: unsupported output_datatype %lld",
                                def->name, (long long)d);
        *ret = (int)d;
        return 0;
}

static void sig_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        shp_cost(call, 8, ret_flops, ret_bytes);
}

/* ---------------------------------------------------------------- windows */

static const char *const window_attrs[] = { "output_datatype", "periodic", NULL };

static int window_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t size, periodic;
        int rc, dtype;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_INDEX, err, errlen);
        if (!rc)
                rc = out_dtype_attr(def, call, SHP_NUMERIC, &dtype, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "periodic", 1, &periodic, err, errlen);
        if (!rc)
                rc = scalar_int(def, call, 0, "size", &size, err, errlen);
        if (rc)
                return rc;
        if (size < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: size %lld is negative", def->name,
                                (long long)size);
        shp_set_out(call, 0, dtype, 1, &size);
        return 0;
}

/* Generalized cosine windows a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N the size
 * (periodic) or the size - 1 (symmetric). */
static int window_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *y = &call->out[0];
        int64_t size = y->dims[0], n, done, m;
        double a0, a1, a2 = 0, den, buf[OPS_CHUNK];

        if (def->name[0] == 'H' && def->name[2] == 'n') { /* Hann */
                a0 = 0.5;
                a1 = 0.5;
        } else if (def->name[0] == 'H') { /* Hamming */
                a0 = 25.0 / 46.0;
                a1 = 1 - a0;
        } else { /* Blackman */
                a0 = 0.42;
                a1 = 0.5;
                a2 = 0.08;
        }
        den = (double)(ops_attr_int(call, "periodic", 1) ? size : size - 1);
        for (done = 0; done < size; done += m) {
                m = size - done < OPS_CHUNK ? size - done : OPS_CHUNK;
                for (n = 0; n < m; n++) {
                        double x = den > 0 ? 2 * M_PI * (double)(done + n) / den : 0;

                        buf[n] = den > 0 ? a0 - a1 * cos(x) + a2 * cos(2 * x) : 1;
                }
                shp_store_f64(y->dtype, y->data, done, m, buf);
        }
        return 0;
}

const struct ops_def ops_hann_window_def = {
        .name = "HannWindow", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = window_run, .cost = sig_cost, .infer = window_infer,
        .since_version = 17, .attrs = window_attrs,
};
const struct ops_def ops_hamming_window_def = {
        .name = "HammingWindow", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = window_run, .cost = sig_cost, .infer = window_infer,
        .since_version = 17, .attrs = window_attrs,
};
const struct ops_def ops_blackman_window_def = {
        .name = "BlackmanWindow", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = window_run, .cost = sig_cost, .infer = window_infer,
        .since_version = 17, .attrs = window_attrs,
};

/* ---------------------------------------------------------------- MelWeightMatrix */

static const char *const mel_attrs[] = { "output_datatype", NULL };

static int mel_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t bins, len, rate, dims[2];
        double lo, hi;
        int rc, dtype;

        rc = shp_infer_begin(def, call, err, errlen);
        for (int i = 0; !rc && i < 5; i++)
                rc = shp_want_dtype(def, call, i, i < 3 ? SHP_INDEX : SHP_FLOATS, err, errlen);
        if (!rc)
                rc = out_dtype_attr(def, call, SHP_NUMERIC, &dtype, err, errlen);
        if (!rc)
                rc = scalar_int(def, call, 0, "num_mel_bins", &bins, err, errlen);
        if (!rc)
                rc = scalar_int(def, call, 1, "dft_length", &len, err, errlen);
        if (!rc)
                rc = scalar_int(def, call, 2, "sample_rate", &rate, err, errlen);
        for (int i = 3; !rc && i < 5; i++) {
                rc = shp_need_data(def, call, i, i == 3 ? "lower_edge_hertz" : "upper_edge_hertz",
                                   err, errlen);
                if (!rc && ops_tensor_numel(&call->in[i]) != 1)
                        rc = ops_fail(err, errlen, -EINVAL, "%s: input %d must hold one value",
                                      def->name, i);
        }
        if (rc)
                return rc;
        lo = shp_get_f64(&call->in[3], 0);
        hi = shp_get_f64(&call->in[4], 0);
        if (bins < 1 || len < 1 || rate < 1)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: num_mel_bins %lld, dft_length %lld and sample_rate %lld "
                                "must be positive", def->name, (long long)bins, (long long)len,
                                (long long)rate);
        if (!(lo >= 0 && lo < hi && isfinite(hi)))
                return ops_fail(err, errlen, -EINVAL,
                                "%s: edges %g and %g Hz do not make a range", def->name, lo, hi);
        dims[0] = len / 2 + 1;
        dims[1] = bins;
        shp_set_out(call, 0, dtype, 2, dims);
        return 0;
}

/* Triangles between num_mel_bins + 2 points equally spaced on the mel scale, each mapped to
 * the spectrogram bin floor((dft_length + 1) f / sample_rate), as the ONNX reference does
 * (its step divides the mel range into num_mel_bins + 2 parts, which the test data
 * follow). Bins past the spectrogram are left out. */
static int mel_run(const struct ops_def *def, const struct ops_call *call, char *err,
                   size_t errlen)
{
        const struct ops_tensor *y = &call->out[0];
        int64_t nspec = y->dims[0], bins = y->dims[1], len = shp_get_i64(&call->in[1], 0);
        int64_t rate = shp_get_i64(&call->in[2], 0), i, j, *pt;
        double lo = shp_get_f64(&call->in[3], 0), hi = shp_get_f64(&call->in[4], 0);
        double lo_mel = 2595 * log10(1 + lo / 700), hi_mel = 2595 * log10(1 + hi / 700);
        double step = (hi_mel - lo_mel) / (double)(bins + 2), *w;
        uint64_t n = ops_bytes((uint64_t)nspec, (uint64_t)bins);

        w = ops_buf_alloc0(ops_bytes(n, sizeof(double)), err, errlen);
        pt = ops_buf_alloc(ops_bytes((uint64_t)bins + 2, sizeof(int64_t)), err, errlen);
        if (!w || !pt) {
                ops_buf_free(w);
                ops_buf_free(pt);
                return -ENOMEM;
        }
        for (i = 0; i < bins + 2; i++) {
                double f = 700 * (pow(10, ((double)i * step + lo_mel) / 2595) - 1);

                pt[i] = (int64_t)floor((double)(len + 1) * f / (double)rate);
        }
        for (i = 0; i < bins; i++) {
                int64_t l = pt[i], c = pt[i + 1], r = pt[i + 2];

                if (c == l) {
                        if (c >= 0 && c < nspec)
                                w[c * bins + i] = 1;
                } else {
                        for (j = l; j <= c; j++)
                                if (j >= 0 && j < nspec)
                                        w[j * bins + i] = (double)(j - l) / (double)(c - l);
                }
                for (j = c; j < r; j++)
                        if (j >= 0 && j < nspec)
                                w[j * bins + i] = (double)(r - j) / (double)(r - c);
        }
        shp_store_f64(y->dtype, y->data, 0, (int64_t)n, w);
        ops_buf_free(w);
        ops_buf_free(pt);
        return 0;
}

const struct ops_def ops_mel_weight_matrix_def = {
        .name = "MelWeightMatrix", .min_inputs = 5, .max_inputs = 5, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = mel_run, .cost = sig_cost, .infer = mel_infer,
        .since_version = 17, .attrs = mel_attrs,
};

/* ---------------------------------------------------------------- transforms */

/* One transform of length n (the input zero-padded or cut to it) over complex doubles. */
struct xform {
        int64_t n;
        int inverse;
        double *tw;  /* n twiddles exp(-+2 pi i k / n), re/im interleaved */
        double *tmp; /* 2n */
        int pow2;
};

static int xform_init(struct xform *x, int64_t n, int inverse, char *err, size_t errlen)
{
        double sign = inverse ? 1 : -1;

        memset(x, 0, sizeof(*x));
        x->n = n;
        x->inverse = inverse;
        x->pow2 = n > 0 && (n & (n - 1)) == 0;
        x->tw = ops_buf_alloc(ops_bytes((uint64_t)n, 2 * sizeof(double)), err, errlen);
        x->tmp = ops_buf_alloc(ops_bytes((uint64_t)n, 2 * sizeof(double)), err, errlen);
        if (!x->tw || !x->tmp)
                return -ENOMEM;
        for (int64_t k = 0; k < n; k++) {
                double a = sign * 2 * M_PI * (double)k / (double)n;

                x->tw[2 * k] = cos(a);
                x->tw[2 * k + 1] = sin(a);
        }
        return 0;
}

static void xform_free(struct xform *x)
{
        ops_buf_free(x->tw);
        ops_buf_free(x->tmp);
}

/* v (n complex values) transformed in place; the inverse scales by 1/n. */
static void xform_run(struct xform *x, double *v)
{
        int64_t n = x->n, i, j, k, len;

        if (x->pow2) {
                for (i = 1, j = 0; i < n; i++) { /* bit reversal */
                        int64_t bit = n >> 1;

                        for (; j & bit; bit >>= 1)
                                j ^= bit;
                        j ^= bit;
                        if (i < j) {
                                double re = v[2 * i], im = v[2 * i + 1];

                                v[2 * i] = v[2 * j];
                                v[2 * i + 1] = v[2 * j + 1];
                                v[2 * j] = re;
                                v[2 * j + 1] = im;
                        }
                }
                for (len = 2; len <= n; len <<= 1) {
                        int64_t stride = n / len;

                        for (i = 0; i < n; i += len)
                                for (k = 0; k < len / 2; k++) {
                                        const double *w = &x->tw[2 * k * stride];
                                        double *a = &v[2 * (i + k)], *b = &v[2 * (i + k + len / 2)];
                                        double re = b[0] * w[0] - b[1] * w[1];
                                        double im = b[0] * w[1] + b[1] * w[0];

                                        b[0] = a[0] - re;
                                        b[1] = a[1] - im;
                                        a[0] += re;
                                        a[1] += im;
                                }
                }
        } else {
                for (k = 0; k < n; k++) {
                        double re = 0, im = 0;
                        int64_t t = 0;

                        for (j = 0; j < n; j++) {
                                const double *w = &x->tw[2 * t];

                                re += v[2 * j] * w[0] - v[2 * j + 1] * w[1];
                                im += v[2 * j] * w[1] + v[2 * j + 1] * w[0];
                                t += k;
                                if (t >= n)
                                        t -= n;
                        }
                        x->tmp[2 * k] = re;
                        x->tmp[2 * k + 1] = im;
                }
                memcpy(v, x->tmp, (size_t)n * 2 * sizeof(double));
        }
        if (x->inverse)
                for (i = 0; i < 2 * n; i++)
                        v[i] /= (double)n;
}

/* ---------------------------------------------------------------- DFT */

static const char *const dft_attrs[] = { "axis", "inverse", "onesided", NULL };

static int dft_geometry(const struct ops_def *def, const struct ops_call *call, int *ret_axis,
                        int64_t *ret_n, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t axis, inverse, onesided, n;
        int rc, ax;

        rc = shp_attr_int(def, call, "axis", 1, &axis, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "inverse", 0, &inverse, err, errlen);
        if (!rc)
                rc = shp_attr_int(def, call, "onesided", 0, &onesided, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 2 || (x->dims[x->ndim - 1] != 1 && x->dims[x->ndim - 1] != 2))
                return ops_fail(err, errlen, -EINVAL,
                                "DFT: input 0 must be [batch, ..., 1 or 2] (real or complex)");
        rc = shp_axis(def, axis, x->ndim, &ax, err, errlen);
        if (rc)
                return rc;
        if (ax == x->ndim - 1)
                return ops_fail(err, errlen, -EINVAL,
                                "DFT: axis %lld is the real/imaginary dimension",
                                (long long)axis);
        if (onesided && inverse)
                return ops_fail(err, errlen, -EINVAL, "DFT: onesided inverse is not supported");
        if (onesided && x->dims[x->ndim - 1] == 2)
                return ops_fail(err, errlen, -EINVAL, "DFT: onesided needs a real input");
        n = x->dims[ax];
        if (shp_has_in(call, 1)) {
                rc = scalar_int(def, call, 1, "dft_length", &n, err, errlen);
                if (rc)
                        return rc;
                if (n < 1)
                        return ops_fail(err, errlen, -EINVAL, "DFT: dft_length %lld < 1",
                                        (long long)n);
        }
        *ret_axis = ax;
        *ret_n = n;
        return 0;
}

static int dft_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t dims[OPS_MAX_DIMS], n;
        int rc, ax;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_FLOATS, err, errlen);
        if (!rc && shp_has_in(call, 1))
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc)
                rc = dft_geometry(def, call, &ax, &n, err, errlen);
        if (rc)
                return rc;
        memcpy(dims, x->dims, sizeof(dims));
        dims[ax] = ops_attr_int(call, "onesided", 0) ? n / 2 + 1 : n;
        dims[x->ndim - 1] = 2;
        shp_set_out(call, 0, x->dtype, x->ndim, dims);
        return 0;
}

static int dft_run(const struct ops_def *def, const struct ops_call *call, char *err,
                   size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        int64_t n, outer, a, inner = 1, c = x->dims[x->ndim - 1], k = 0, o, i, j;
        int ax, rc;
        double *v = NULL, *buf = NULL;
        struct xform xf;

        rc = dft_geometry(def, call, &ax, &n, err, errlen);
        if (rc)
                return rc;
        shp_split3(x, ax, &outer, &a, &inner);
        inner /= c; /* the trailing 1 or 2 */
        k = y->dims[ax];
        rc = xform_init(&xf, n, (int)ops_attr_int(call, "inverse", 0), err, errlen);
        if (!rc) {
                v = ops_buf_alloc(ops_bytes((uint64_t)n, 2 * sizeof(double)), err, errlen);
                buf = ops_buf_alloc(ops_bytes((uint64_t)(a > k ? a : k), 2 * sizeof(double)),
                                    err, errlen);
                rc = v && buf ? 0 : -ENOMEM;
        }
        for (o = 0; !rc && o < outer; o++) {
                for (i = 0; i < inner; i++) {
                        int64_t m = a < n ? a : n;

                        memset(v, 0, (size_t)n * 2 * sizeof(double));
                        for (j = 0; j < m; j++) {
                                shp_load_f64(x->dtype, x->data, ((o * a + j) * inner + i) * c, c,
                                             buf);
                                v[2 * j] = buf[0];
                                v[2 * j + 1] = c == 2 ? buf[1] : 0;
                        }
                        xform_run(&xf, v);
                        for (j = 0; j < k; j++)
                                shp_store_f64(y->dtype, y->data, ((o * k + j) * inner + i) * 2, 2,
                                              &v[2 * j]);
                }
                rc = ops_poll(def->name, err, errlen);
        }
        ops_buf_free(v);
        ops_buf_free(buf);
        xform_free(&xf);
        return rc;
}

const struct ops_def ops_dft_def = {
        .name = "DFT", .min_inputs = 1, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = dft_run, .cost = sig_cost, .infer = dft_infer,
        .since_version = 17, .attrs = dft_attrs,
};

/* ---------------------------------------------------------------- STFT */

static const char *const stft_attrs[] = { "onesided", NULL };

struct stft_geo {
        int64_t batch, len, c, step, frame, frames, bins;
};

/* signal [batch, length, 1 or 2], frame_step, window [frame_length] (optional),
 * frame_length (optional; one of the two is needed, and they agree when both are given). */
static int stft_geometry(const struct ops_def *def, const struct ops_call *call,
                         struct stft_geo *g, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t onesided;
        int rc;

        rc = shp_attr_int(def, call, "onesided", 1, &onesided, err, errlen);
        if (!rc)
                rc = scalar_int(def, call, 1, "frame_step", &g->step, err, errlen);
        if (rc)
                return rc;
        if (x->ndim != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
                return ops_fail(err, errlen, -EINVAL,
                                "STFT: signal must be [batch, length, 1 or 2], not rank %d",
                                x->ndim);
        g->batch = x->dims[0];
        g->len = x->dims[1];
        g->c = x->dims[2];
        g->frame = -1;
        if (shp_has_in(call, 2)) {
                if (call->in[2].ndim != 1)
                        return ops_fail(err, errlen, -EINVAL, "STFT: window must be 1-D");
                g->frame = call->in[2].dims[0];
        }
        if (shp_has_in(call, 3)) {
                int64_t fl;

                rc = scalar_int(def, call, 3, "frame_length", &fl, err, errlen);
                if (rc)
                        return rc;
                if (g->frame >= 0 && fl != g->frame)
                        return ops_fail(err, errlen, -EINVAL,
                                        "STFT: frame_length %lld but the window has %lld values",
                                        (long long)fl, (long long)g->frame);
                g->frame = fl;
        }
        if (g->frame < 0)
                return ops_fail(err, errlen, -EINVAL, "STFT: needs a window or a frame_length");
        if (g->frame < 1 || g->frame > g->len)
                return ops_fail(err, errlen, -EINVAL,
                                "STFT: frame length %lld out of [1, %lld] (the signal's length)",
                                (long long)g->frame, (long long)g->len);
        if (g->step < 1)
                return ops_fail(err, errlen, -EINVAL, "STFT: frame_step %lld < 1",
                                (long long)g->step);
        if (onesided && g->c == 2)
                return ops_fail(err, errlen, -EINVAL, "STFT: onesided needs a real signal");
        g->frames = (g->len - g->frame) / g->step + 1;
        g->bins = onesided ? g->frame / 2 + 1 : g->frame;
        return 0;
}

static int stft_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct stft_geo g;
        int64_t dims[4];
        int rc;

        rc = shp_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 0, SHP_FLOATS, err, errlen);
        if (!rc)
                rc = shp_want_dtype(def, call, 1, SHP_INDEX, err, errlen);
        if (!rc && shp_has_in(call, 2))
                rc = shp_want_dtype(def, call, 2, SHP_FLOATS, err, errlen);
        if (!rc && shp_has_in(call, 3))
                rc = shp_want_dtype(def, call, 3, SHP_INDEX, err, errlen);
        if (!rc)
                rc = stft_geometry(def, call, &g, err, errlen);
        if (rc)
                return rc;
        dims[0] = g.batch;
        dims[1] = g.frames;
        dims[2] = g.bins;
        dims[3] = 2;
        shp_set_out(call, 0, call->in[0].dtype, 4, dims);
        return 0;
}

static int stft_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        const struct ops_tensor *x = &call->in[0], *y = &call->out[0];
        double *v = NULL, *win = NULL, *frame = NULL;
        struct stft_geo g;
        struct xform xf;
        int64_t b, f, j;
        int rc;

        rc = stft_geometry(def, call, &g, err, errlen);
        if (rc)
                return rc;
        rc = xform_init(&xf, g.frame, 0, err, errlen);
        if (!rc) {
                v = ops_buf_alloc(ops_bytes((uint64_t)g.frame, 2 * sizeof(double)), err, errlen);
                frame = ops_buf_alloc(ops_bytes((uint64_t)g.frame, 2 * sizeof(double)), err,
                                      errlen);
                win = ops_buf_alloc(ops_bytes((uint64_t)g.frame, sizeof(double)), err, errlen);
                rc = v && win && frame ? 0 : -ENOMEM;
        }
        if (!rc) {
                if (shp_has_in(call, 2))
                        shp_load_f64(call->in[2].dtype, call->in[2].data, 0, g.frame, win);
                else
                        for (j = 0; j < g.frame; j++)
                                win[j] = 1;
        }
        for (b = 0; !rc && b < g.batch; b++) {
                for (f = 0; f < g.frames; f++) {
                        shp_load_f64(x->dtype, x->data, (b * g.len + f * g.step) * g.c,
                                     g.frame * g.c, frame);
                        for (j = 0; j < g.frame; j++) {
                                v[2 * j] = frame[j * g.c] * win[j];
                                v[2 * j + 1] = g.c == 2 ? frame[j * 2 + 1] * win[j] : 0;
                        }
                        xform_run(&xf, v);
                        shp_store_f64(y->dtype, y->data, (b * g.frames + f) * g.bins * 2,
                                      g.bins * 2, v);
                }
                rc = ops_poll(def->name, err, errlen);
        }
        ops_buf_free(v);
        ops_buf_free(win);
        ops_buf_free(frame);
        xform_free(&xf);
        return rc;
}

const struct ops_def ops_stft_def = {
        .name = "STFT", .min_inputs = 2, .max_inputs = 4, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = stft_run, .cost = sig_cost, .infer = stft_infer,
        .since_version = 17, .attrs = stft_attrs,
};

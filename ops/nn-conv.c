/* Convolutions for the cube engine: Conv, ConvTranspose, ConvInteger and QLinearConv, 1-D
 * to 3-D, with groups, strides, dilations, explicit pads and auto_pad.
 *
 * Conv lowers each (image, group) pair to one GEMM: im2col lays the receptive fields out as
 * the columns of a [C/group * kernel, output positions] matrix (malloc'd once per call and
 * reused), and OpenBLAS multiplies the group's filters [M/group, C/group * kernel] by it
 * straight into the output. A 1x1 kernel with unit strides and no padding needs no im2col:
 * the input already is that matrix. ConvTranspose is the adjoint: one GEMM of the
 * transposed filters by the input gives every kernel tap's contribution, and col2im adds
 * them into the output. The integer convolutions subtract zero points while widening to
 * double, where every product sum of 8-bit values is exact, and run the same lowering
 * through dgemm; QLinearConv then requantizes. float64 Conv takes the dgemm path too;
 * float16 and bfloat16 (and float64 ConvTranspose) go through float32 copies. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "blas.h"
#include "nn-common.h"

struct conv_shape {
        int64_t n, c, m, group, cg, mg; /* batch, in / out channels, groups, per group */
        int64_t in_size, k_size, out_size;
        struct nn_geom g;               /* conv view: for ConvTranspose in = Y, out = X */
        int ndim;
        int64_t ydims[OPS_MAX_DIMS];
        int direct;                     /* Conv: the input is its own im2col matrix */
};

/* Shapes of Conv-like calls: x = input xi, w = input wi. transpose: ConvTranspose
 * geometry. */
static int conv_shape_of(const struct ops_call *call, const char *op, int xi, int wi,
                         int transpose, struct conv_shape *cs, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[xi], *w = &call->in[wi];
        int64_t ks[NN_SP], v[NN_SP + 2];
        int nsp = x->ndim - 2, i, n, o;

        memset(cs, 0, sizeof(*cs));
        if (x->ndim < 3 || x->ndim > NN_SP + 2)
                return ops_fail(err, errlen, -EINVAL, "%s: input of rank %d, 3 to %d supported",
                                op, x->ndim, NN_SP + 2);
        if (w->ndim != x->ndim)
                return ops_fail(err, errlen, -EINVAL, "%s: weights of rank %d for input of rank %d",
                                op, w->ndim, x->ndim);
        cs->group = ops_attr_int(call, "group", 1);
        if (cs->group < 1)
                return ops_fail(err, errlen, -EINVAL, "%s: group %lld", op, (long long)cs->group);
        cs->n = x->dims[0];
        cs->c = x->dims[1];
        if (cs->c % cs->group)
                return ops_fail(err, errlen, -EINVAL, "%s: %lld channels in %lld groups", op,
                                (long long)cs->c, (long long)cs->group);
        cs->cg = cs->c / cs->group;
        if (!transpose) {
                cs->m = w->dims[0];
                if (w->dims[1] != cs->cg || cs->m % cs->group)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: weights [%lld,%lld,...] do not fit %lld channels in %lld groups",
                                        op, (long long)w->dims[0], (long long)w->dims[1],
                                        (long long)cs->c, (long long)cs->group);
                cs->mg = cs->m / cs->group;
        } else {
                if (w->dims[0] != cs->c)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: weights for %lld channels, input has %lld", op,
                                        (long long)w->dims[0], (long long)cs->c);
                cs->mg = w->dims[1];
                cs->m = cs->mg * cs->group;
        }
        n = nn_attr_ints(call, "kernel_shape", v, nsp);
        if (n == -2 || (n >= 0 && n != nsp))
                return ops_fail(err, errlen, -EINVAL, "%s: 'kernel_shape' needs %d values", op, nsp);
        for (i = 0; i < nsp; i++) {
                ks[i] = w->dims[2 + i];
                if (ks[i] < 1 || ks[i] > INT32_MAX)
                        return ops_fail(err, errlen, -EINVAL, "%s: kernel extent %lld", op,
                                        (long long)ks[i]);
                if (n > 0 && v[i] != ks[i])
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: kernel_shape %lld differs from the weights' %lld", op,
                                        (long long)v[i], (long long)ks[i]);
        }
        cs->ndim = x->ndim;
        cs->ydims[0] = cs->n;
        cs->ydims[1] = cs->m;
        if (!transpose) {
                int rc = nn_geom_init(call, op, nsp, x->dims + 2, ks, 0, &cs->g, err, errlen);

                if (rc)
                        return rc;
                o = NN_SP - nsp;
                for (i = 0; i < nsp; i++)
                        cs->ydims[2 + i] = cs->g.out[o + i];
        } else {
                int64_t opad[NN_SP] = { 0 }, oshape[NN_SP + 2];
                const char *ap = nn_attr_str(call, "auto_pad", "NOTSET");
                struct nn_geom t;
                int rc, no;

                rc = nn_geom_attrs(call, op, nsp, 0, &t, err, errlen);
                if (rc)
                        return rc;
                n = nn_attr_ints(call, "output_padding", v, nsp);
                if (n == -2 || (n >= 0 && n != nsp))
                        return ops_fail(err, errlen, -EINVAL, "%s: 'output_padding' needs %d values",
                                        op, nsp);
                for (i = 0; i < n; i++)
                        opad[i] = v[i];
                no = nn_attr_ints(call, "output_shape", oshape, nsp + 2);
                if (no == -2 || (no >= 0 && no != nsp && no != nsp + 2))
                        return ops_fail(err, errlen, -EINVAL, "%s: 'output_shape' needs %d values",
                                        op, nsp);
                o = NN_SP - nsp;
                cs->g = t;
                for (i = 0; i < nsp; i++) {
                        int64_t in = x->dims[2 + i], s = t.stride[o + i];
                        int64_t ek = (ks[i] - 1) * t.dil[o + i] + 1, total, y;
                        int explicit_out = no > 0 || strncmp(ap, "SAME", 4) == 0;

                        if (opad[i] < 0 || opad[i] >= (s > t.dil[o + i] ? s : t.dil[o + i]))
                                return ops_fail(err, errlen, -EINVAL, "%s: output_padding %lld",
                                                op, (long long)opad[i]);
                        if (explicit_out) {
                                y = no > 0 ? oshape[no - nsp + i] : in * s;
                                /* A larger output than the input reaches is zero past it. */
                                total = s * (in - 1) + opad[i] + ek - y;
                                if (total < 0)
                                        total = 0;
                                if (y < 0)
                                        return ops_fail(err, errlen, -EINVAL,
                                                        "%s: output_shape %lld", op,
                                                        (long long)y);
                                if (strcmp(ap, "SAME_UPPER") == 0) {
                                        cs->g.pb[o + i] = total / 2;
                                        cs->g.pe[o + i] = total - total / 2;
                                } else {
                                        cs->g.pb[o + i] = total - total / 2;
                                        cs->g.pe[o + i] = total / 2;
                                }
                        } else {
                                if (strcmp(ap, "VALID") == 0)
                                        cs->g.pb[o + i] = cs->g.pe[o + i] = 0;
                                y = s * (in - 1) + opad[i] + ek - cs->g.pb[o + i] -
                                    cs->g.pe[o + i];
                                if (y < 0)
                                        return ops_fail(err, errlen, -EINVAL,
                                                        "%s: pads larger than the output", op);
                        }
                        cs->g.k[o + i] = ks[i];
                        cs->g.in[o + i] = y;
                        cs->g.out[o + i] = in;
                        cs->ydims[2 + i] = y;
                }
        }
        cs->in_size = nn_geom_in_size(&cs->g);
        cs->k_size = nn_geom_k_size(&cs->g);
        cs->out_size = nn_geom_out_size(&cs->g);
        if (cs->cg * cs->k_size > INT_MAX || cs->out_size > INT_MAX || cs->in_size > INT_MAX ||
            cs->mg * cs->k_size > INT_MAX)
                return ops_fail(err, errlen, -EINVAL, "%s: too large for one GEMM", op);
        cs->direct = !transpose && cs->k_size == 1;
        for (i = 0; i < NN_SP; i++)
                if (cs->g.stride[i] != 1 || cs->g.pb[i] || cs->g.pe[i])
                        cs->direct = 0;
        return 0;
}

/* The forward lowering for one element type; y gets the GEMM results (bias added by the
 * caller). col is scratch of cg * k_size * out_size elements unless direct. */
#define CONV_FWD(name, T, im2col, gemm)                                                        \
        static int name(const struct conv_shape *cs, const T *x, const T *w, T *y, T *col,    \
                        const char *op, char *err, size_t errlen)                              \
        {                                                                                      \
                int64_t n, g, kk = cs->cg * cs->k_size, r, h, rows;                            \
                                                                                               \
                if (!cs->out_size || !cs->mg)                                                  \
                        return 0;                                                              \
                /* output channels per GEMM call: about OPS_POLL_MACS multiply-adds, with a   \
                 * check of the run context before every call but the first */                \
                rows = cs->out_size * (kk ? kk : 1) >= OPS_POLL_MACS                           \
                               ? 1                                                             \
                               : OPS_POLL_MACS / (cs->out_size * (kk ? kk : 1));               \
                for (n = 0; n < cs->n; n++) {                                                  \
                        for (g = 0; g < cs->group; g++) {                                      \
                                const T *xg = x + (n * cs->c + g * cs->cg) * cs->in_size;      \
                                const T *wg = w + g * cs->mg * kk;                             \
                                T *yg = y + (n * cs->m + g * cs->mg) * cs->out_size;           \
                                const T *src = xg;                                             \
                                                                                               \
                                if (!kk) {                                                     \
                                        memset(yg, 0, (size_t)(cs->mg * cs->out_size) *        \
                                                              sizeof(T));                      \
                                        continue;                                              \
                                }                                                              \
                                if ((n || g) && ops_poll(op, err, errlen))                     \
                                        return -ECANCELED;                                     \
                                if (!cs->direct) {                                             \
                                        im2col(xg, cs->cg, &cs->g, 0,                          \
                                               cs->g.out[0] * cs->g.out[1], col);              \
                                        src = col;                                             \
                                }                                                              \
                                for (r = 0; r < cs->mg; r += h) {                              \
                                        h = cs->mg - r < rows ? cs->mg - r : rows;             \
                                        if (r && ops_poll(op, err, errlen))                    \
                                                return -ECANCELED;                             \
                                        gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,        \
                                             (blasint)h, (blasint)cs->out_size, (blasint)kk, 1, \
                                             wg + r * kk, (blasint)kk, src,                    \
                                             (blasint)cs->out_size, 0, yg + r * cs->out_size,  \
                                             (blasint)cs->out_size);                           \
                                }                                                              \
                        }                                                                      \
                }                                                                              \
                return 0;                                                                      \
        }

CONV_FWD(conv_fwd_f32, float, nn_im2col_f32, ops_sgemm)
CONV_FWD(conv_fwd_f64, double, nn_im2col_f64, cblas_dgemm)

/* The im2col scratch: a workspace charged to the run's budget (sizes saturate, so an
 * overflow is an allocation that fails). Freed with ops_buf_free. */
static void *conv_col_alloc(const struct conv_shape *cs, size_t esize, char *msg, size_t msglen)
{
        if (cs->direct)
                return ops_buf_alloc(0, msg, msglen);
        return ops_buf_alloc(ops_bytes(ops_bytes(ops_bytes((uint64_t)cs->cg, (uint64_t)cs->k_size),
                                                 (uint64_t)cs->out_size),
                                       esize),
                             msg, msglen);
}

static void conv_cost_of(const struct ops_call *call, const char *op, int xi, int wi,
                         int transpose, uint64_t *ret_flops, uint64_t *ret_bytes)
{
        struct conv_shape cs;

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        if (conv_shape_of(call, op, xi, wi, transpose, &cs, NULL, 0))
                return;
        /* the same multiply-adds either way; for ConvTranspose out_size is X's extent */
        *ret_flops = ops_mul_sat(ops_mul_sat(ops_mul_sat(2 * (uint64_t)cs.n, (uint64_t)cs.m),
                                             (uint64_t)cs.out_size),
                                 ops_mul_sat((uint64_t)cs.cg, (uint64_t)cs.k_size));
}

/* ---------------------------------------------------------------- Conv */

static int conv_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct conv_shape cs;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (call->in[1].dtype != call->in[0].dtype ||
            (nn_has_in(call, 2) && call->in[2].dtype != call->in[0].dtype))
                return ops_fail(err, errlen, -EINVAL, "Conv: inputs of different dtypes");
        rc = conv_shape_of(call, "Conv", 0, 1, 0, &cs, err, errlen);
        if (rc)
                return rc;
        if (nn_has_in(call, 2) && (call->in[2].ndim != 1 || call->in[2].dims[0] != cs.m))
                return ops_fail(err, errlen, -EINVAL, "Conv: bias must be [%lld]", (long long)cs.m);
        nn_set_out(call, 0, call->in[0].dtype, cs.ndim, cs.ydims);
        return 0;
}

/* Adds bias[m] to every position of channel m. */
static void conv_bias_f32(float *y, const float *b, int64_t n, int64_t m, int64_t size)
{
        int64_t i, j, p;

        for (i = 0; i < n; i++)
                for (j = 0; j < m; j++) {
                        float *row = y + (i * m + j) * size, v = b[j];

                        for (p = 0; p < size; p++)
                                row[p] += v;
                }
}

/* float64 keeps its precision: the same lowering through dgemm. */
static int conv_run_f64(const struct ops_call *call, const struct conv_shape *cs, char *err,
                        size_t errlen)
{
        const double *b = nn_has_in(call, 2) ? call->in[2].data : NULL;
        char msg[200] = "";
        double *col = conv_col_alloc(cs, sizeof(double), msg, sizeof(msg)), *y = call->out[0].data;
        int64_t i, j, p;
        int rc;

        if (!col)
                return ops_fail(err, errlen, -ENOMEM, "Conv: %s", msg);
        rc = conv_fwd_f64(cs, call->in[0].data, call->in[1].data, y, col, "Conv", err, errlen);
        for (i = 0; !rc && b && i < cs->n; i++)
                for (j = 0; j < cs->m; j++)
                        for (p = 0; p < cs->out_size; p++)
                                y[(i * cs->m + j) * cs->out_size + p] += b[j];
        ops_buf_free(col);
        return rc;
}

/* Bytes of the float64 im2col of one band of output lines (conv_acc64): in L2 with the
 * filters while the band's products run. */
#define CONV_F64_BAND (512 << 10)

/* A float32 Conv under OPS_SGEMM_F64 (blas.h): every multiply-add in float64, the bias added
 * before the one rounding to float32. Per group, the filters in float64 once; per image, the
 * output lines a band at a time: the band's im2col in float64, then its product. */
static int conv_acc64(const struct conv_shape *cs, const float *x, const float *w, const float *b, float *y,
                      char *err, size_t errlen)
{
        int64_t kk = cs->cg * cs->k_size, ow = cs->g.out[2], lines = cs->g.out[0] * cs->g.out[1];
        int64_t band = ow && kk ? CONV_F64_BAND / (int64_t)sizeof(double) / (kk * ow) : 1;
        char msg[200] = "";
        double *wd, *col;
        int rc = 0;

        if (!cs->out_size || !cs->mg)
                return 0;
        if (!kk) { /* no inputs: the bias */
                for (int64_t i = 0; i < cs->n * cs->m; i++)
                        for (int64_t p = 0; p < cs->out_size; p++)
                                y[i * cs->out_size + p] = b ? b[i % cs->m] : 0.0f;
                return 0;
        }
        band = band < 1 ? 1 : band > lines ? lines : band;
        wd = ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)cs->mg, (uint64_t)kk), sizeof(double)), msg, sizeof(msg));
        col = wd ? ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)kk, (uint64_t)(band * ow)), sizeof(double)), msg,
                                 sizeof(msg))
                 : NULL;
        if (!col) {
                rc = ops_fail(err, errlen, -ENOMEM, "Conv: %s", msg[0] ? msg : "out of memory");
                goto out;
        }
        for (int64_t g = 0; g < cs->group && !rc; g++) {
                const float *wg = w + g * cs->mg * kk;
                for (int64_t i = 0; i < cs->mg * kk; i++)
                        wd[i] = wg[i];
                for (int64_t n = 0; n < cs->n && !rc; n++) {
                        const float *xg = x + (n * cs->c + g * cs->cg) * cs->in_size;
                        float *yg = y + (n * cs->m + g * cs->mg) * cs->out_size;
                        for (int64_t r0 = 0; r0 < lines; r0 += band) {
                                int64_t r1 = r0 + band < lines ? r0 + band : lines, npos = (r1 - r0) * ow;
                                if ((r0 || n || g) && ops_poll("Conv", err, errlen)) {
                                        rc = -ECANCELED;
                                        break;
                                }
                                nn_im2col_f32_f64(xg, cs->cg, &cs->g, r0, r1, col);
                                struct ops_dmat bm = { .p = col, .ld = npos };
                                ops_f64_product(cs->mg, npos, kk, wd, kk, &bm, 1.0f, 0.0f, b ? b + g * cs->mg : NULL,
                                                yg + r0 * ow, cs->out_size);
                        }
                }
        }
out:
        ops_buf_free(wd);
        ops_buf_free(col);
        return rc;
}

/* Bytes of the im2col of one band of output lines under mixed accumulation (conv_mixed; as
 * much again for its copy in column blocks): in L2 with the filters while the band's
 * product runs. */
#define CONV_MIXED_BAND (512 << 10)
/* Lines of a band of the implicit product (conv_mixed_padded): a poll between bands. */
#define CONV_MIXED_LINES 16
/* The most bytes of padded planes conv_mixed_padded lays out (a part's input rows; the
 * whole image's for a Conv run in one piece): past it, the im2col in bands. */
#define CONV_MIXED_PAD_MAX (64ull << 20)

/* post (residual, Relu: struct ops_conv_post, its resid at y's element) on n elements of
 * each of planes planes of y, out_size apart */
static void conv_post_lines(const struct ops_conv_post *post, float *y, int64_t planes, int64_t out_size, int64_t n)
{
        if (!post || (!post->resid && !post->relu))
                return;
        for (int64_t k = 0; k < planes; k++) {
                float *yk = y + k * out_size;
                const float *rk = post->resid ? post->resid + k * out_size : NULL;
                for (int64_t i = 0; i < n; i++) {
                        float v = rk ? yk[i] + rk[i] : yk[i];
                        yk[i] = post->relu && v < 0 ? 0.0f : v;
                }
        }
}

/* Where a band of lines of conv_mixed_padded's outputs came from: the padded input of its
 * first line (line l's position p at x + l * pitch + p, its terms off[kk] on), the group's
 * filters (channel ch's k at w + ch * k) and their affine ra (NULL: none). */
struct conv_src {
        const float *x;
        const long *off;
        int64_t pitch;
        const float *w;
        int64_t k;
        const struct ops_row_affine *ra;
};

/* conv_post_lines over lines of width positions (their rows out_size apart), with the
 * outputs that cancel against their shift, bias or residual summed again in float64
 * (ops_mixed_cancels, ops_mixed_conv_exact), as ops_mixed_conv_lines' store does */
static void conv_post_refine(const struct ops_conv_post *post, const struct conv_src *src, float *y, int64_t planes,
                             int64_t out_size, int64_t lines, int64_t width)
{
        const float *resid = post ? post->resid : NULL;
        int relu = post && post->relu;

        for (int64_t ch = 0; ch < planes; ch++) {
                float against = ops_mixed_against(src->ra, (long)ch);
                if (!resid && against == 0.0f) {
                        conv_post_lines(post, y + ch * out_size, 1, out_size, lines * width);
                        continue;
                }
                long budget = ops_mixed_resum_budget((long)(lines * width));
                for (int64_t l = 0; l < lines; l++)
                        for (int64_t p = 0; p < width; p++) {
                                int64_t i = ch * out_size + l * width + p;
                                const float *r = resid ? resid + i : NULL;
                                if (budget > 0 && ops_mixed_cancels(y[i], against, r)) {
                                        budget--;
                                        y[i] = ops_mixed_conv_exact(src->x + l * src->pitch + p, src->off,
                                                                    src->w + ch * src->k, (long)src->k, src->ra,
                                                                    (long)ch, r, relu);
                                        continue;
                                }
                                float v = r ? y[i] + *r : y[i];
                                y[i] = relu && v < 0 ? 0.0f : v;
                        }
        }
}

/* What the kernels add to the sums of the channels from off on (*ra): post's float64 affine
 * where it has one (struct ops_conv_post), else the bias b; NULL: neither. */
static const struct ops_row_affine *conv_ra(const float *b, const struct ops_conv_post *post, int64_t off,
                                            struct ops_row_affine *ra)
{
        if (post && post->scale)
                *ra = (struct ops_row_affine){ NULL, post->scale + off, post->shift ? post->shift + off : NULL };
        else if (b)
                *ra = (struct ops_row_affine){ b + off, NULL, NULL };
        else
                return NULL;
        return ra;
}

/* conv_mixed for a 2-D convolution of strides 1 on the AVX-512 kernel, without an im2col:
 * per image and group, the input rows under lines [lo, hi) copied once into zero-padded
 * planes, one per channel (pitch: the padded width rounded up to a cache line, the planes
 * aligned to one); the im2col's row (c, i, j) is then that copy read from offset
 * c * plane + i * dh * pitch + j * dw, its positions the output lines pitch apart (the
 * columns past each line's last output computed and dropped), which the kernel reads in
 * place (ops_mixed_product_off): the same terms in the same order as conv_mixed's im2col,
 * hence the same sums. On the ResNet block's 3x3 convolution, one thread: 64 GFMA/s, as
 * oneDNN's float32 direct convolution, against 53 through the im2col and 44 with the pitch
 * not rounded (loads split across cache lines); a copy per filter column, shifted so that
 * every tap's loads are aligned, took three times the memory and ran at 58.
 *
 * Where the filters fill blocks of vectors better than the output lines fill the pitch
 * (64 filters over 56-wide lines: none empty against 8 columns of 64 computed and dropped),
 * the filters are transposed once per group and ops_mixed_conv_lines puts the channels
 * across the vectors instead, the same sums again: on the Intel host, one thread, 1.05-1.07x
 * oneDNN's time against 1.36-1.38x that (bench_kernels f64), and the ResNet block under
 * mixed went from 1.31-1.39x ONNX Runtime's time to 0.98-1.03x. Without the budget for the
 * filters' copy, the positions kernel. post (the graph's residual and Relu): in the store
 * there, per band of lines here; its affine (a folded BatchNormalization) in place of b, in
 * both kernels' stores. 1 when the call is not one it takes. */
static int conv_mixed_padded(const struct conv_shape *cs, const float *x, const float *w, const float *b, float *y,
                             int64_t lo, int64_t hi, const struct ops_conv_post *post, char *err, size_t errlen)
{
        const struct nn_geom *g = &cs->g;
        const int64_t H = g->in[1], W = g->in[2], OW = g->out[2], KH = g->k[1], KW = g->k[2];
        const int64_t dh = g->dil[1], dw = g->dil[2], pt = g->pb[1], pl = g->pb[2];
        const int64_t kk = cs->cg * cs->k_size;

        if (cs->ndim != 4 || g->stride[1] != 1 || g->stride[2] != 1 || pt < 0 || pl < 0 || g->pe[2] < 0 ||
            !ops_mixed_kernel(-1))
                return 1;
        /* Extents past 2^30 (pads or dilations far larger than the image, as a model may
         * declare) and planes past CONV_MIXED_PAD_MAX take the im2col, which needs less. */
        const int64_t big = (int64_t)1 << 30;
        if (OW > big || KW > big || dw > big || KH > big || dh > big || hi - lo > big || pl > big || W > big)
                return 1;
        /* pl + W + the right pad, rounded up to whole cache lines: with the planes aligned,
         * the kernel's loads of taps j = 0 split no cache line */
        const int64_t span = OW + (KW - 1) * dw, pitch = (span + 15) / 16 * 16;
        const int64_t hp = hi - lo + (KH - 1) * dh, planes = cs->cg;
        if (span < pl + W || pitch > big || hp > big)
                return 1;
        const int64_t plane = hp * pitch;
        if (ops_bytes(ops_bytes((uint64_t)plane, (uint64_t)planes), sizeof(float)) > CONV_MIXED_PAD_MAX)
                return 1;
        char msg[200] = "";
        /* The filters transposed (ops_mixed_conv_lines) where that computes fewer
         * multiply-adds: the channels a block of vectors leaves empty against the columns
         * past each line's last output. */
        const int64_t mg = cs->mg, mpad = mg / 64 * 64 + (mg % 64 > 32 ? 64 : mg % 64 > 16 ? 32 : mg % 64 ? 16 : 0);
        int transposed = mg * pitch > mpad * OW && ops_mixed_conv_transposed(-1);
        uint64_t nwt = transposed ? (uint64_t)ops_mixed_wt_floats(mg, kk) : 0;
        /* the planes, slack for the reads past the last line, the filters transposed, then
         * the offsets; without the filters' copy (as large as the filters) where the run's
         * budget cannot spare it */
        uint64_t nf = ops_bytes((uint64_t)plane, (uint64_t)planes) + (uint64_t)pitch + 64;
        uint64_t fixed = ops_bytes((uint64_t)kk, sizeof(long)) + 128;
        float *mem = transposed ? ops_buf_try_alloc(ops_bytes(nf + nwt + 16, sizeof(float)) + fixed) : NULL;
        if (!mem) {
                transposed = 0;
                nwt = 0;
                mem = ops_buf_alloc(ops_bytes(nf + 16, sizeof(float)) + fixed, msg, sizeof(msg));
        }
        if (!mem)
                return ops_fail(err, errlen, -ENOMEM, "Conv: %s", msg[0] ? msg : "out of memory");
        float *xp = (float *)((uintptr_t)mem + 63 - ((uintptr_t)mem + 63) % 64);
        float *wt = transposed ? xp + nf + (16 - nf % 16) % 16 : NULL;
        long *off = (long *)((uintptr_t)(xp + nf + nwt + 16) + 63 - ((uintptr_t)(xp + nf + nwt + 16) + 63) % 64);
        for (int64_t c = 0, t = 0; c < cs->cg; c++)
                for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++)
                                off[t++] = (long)(c * plane + i * dh * pitch + j * dw);
        memset(xp + planes * plane, 0, (size_t)(nf - (uint64_t)(planes * plane)) * sizeof(float));
        int rc = 0;
        for (int64_t gi = 0; gi < cs->group && !rc; gi++) {
                const float *wg = w + gi * cs->mg * kk;
                if (wt)
                        ops_mixed_pack_wt(wg, mg, kk, kk, wt);
                for (int64_t n = 0; n < cs->n && !rc; n++) {
                        const float *xg = x + (n * cs->c + gi * cs->cg) * cs->in_size;
                        float *yg = y + (n * cs->m + gi * cs->mg) * cs->out_size;
                        if ((n || gi) && ops_poll("Conv", err, errlen)) {
                                rc = -ECANCELED;
                                break;
                        }
                        /* padded row r holds input row lo + r - pt */
                        for (int64_t c = 0; c < cs->cg; c++)
                                for (int64_t r = 0; r < hp; r++) {
                                        float *d = xp + c * plane + r * pitch;
                                        int64_t ih = lo + r - pt;
                                        if (ih < 0 || ih >= H) {
                                                memset(d, 0, (size_t)pitch * sizeof(float));
                                                continue;
                                        }
                                        memset(d, 0, (size_t)pl * sizeof(float));
                                        memcpy(d + pl, xg + (c * H + ih) * W, (size_t)W * sizeof(float));
                                        memset(d + pl + W, 0, (size_t)(pitch - pl - W) * sizeof(float));
                                }
                        for (int64_t r0 = lo; r0 < hi && !rc; r0 += CONV_MIXED_LINES) {
                                int64_t r1 = r0 + CONV_MIXED_LINES < hi ? r0 + CONV_MIXED_LINES : hi;
                                if (r0 > lo && ops_poll("Conv", err, errlen)) {
                                        rc = -ECANCELED;
                                        break;
                                }
                                /* the post-op's residual at the same element as the lines' output */
                                struct ops_conv_post pg = { post && post->resid ? post->resid + (yg - y) + r0 * OW
                                                                                : NULL,
                                                            post && post->relu, NULL, NULL };
                                struct ops_row_affine rat;
                                const struct ops_row_affine *ra = conv_ra(b, post, gi * cs->mg, &rat);
                                if (wt) {
                                        ops_mixed_conv_lines(mg, kk, wt, wg, xp + (r0 - lo) * pitch, off, pitch,
                                                             r1 - r0, OW, yg + r0 * OW, OW, cs->out_size, ra,
                                                             post ? &pg : NULL);
                                } else {
                                        ops_mixed_product_off(cs->mg, (r1 - r0) * pitch, kk, wg, kk,
                                                              xp + (r0 - lo) * pitch, off, pitch, OW, yg + r0 * OW,
                                                              OW, cs->out_size, ra);
                                        struct conv_src src = { xp + (r0 - lo) * pitch, off, pitch, wg, kk, ra };
                                        conv_post_refine(post ? &pg : NULL, &src, yg + r0 * OW, cs->mg, cs->out_size,
                                                         r1 - r0, OW);
                                }
                        }
                }
        }
        ops_buf_free(mem);
        return rc;
}

/* A float32 Conv under OPS_SGEMM_MIXED (blas.h), output lines [lo, hi) of every image (a
 * line: od * OH + oh): the product of the group's filters (mg x kk, as stored) by the
 * im2col, each element's sum in float32 runs of OPS_MIXED_KB terms taken in the im2col's
 * order (channel, then kernel position), four runs in float32, the rest in float64, the bias
 * added in float64 (post's affine in its place where it has one), rounded once. Without an
 * im2col where conv_mixed_padded takes the call; else per image and group a band of lines
 * at a time: the band's im2col (nn_im2col_f32), copied into OPS_SGEMM_MIXED's column blocks
 * (ops_mixed_pack_b), then ops_mixed_product. */
static int conv_mixed(const struct conv_shape *cs, const float *x, const float *w, const float *b, float *y,
                      int64_t lo, int64_t hi, const struct ops_conv_post *post, char *err, size_t errlen)
{
        const int64_t nb = OPS_XSMM_NB;
        int64_t kk = cs->cg * cs->k_size, ow = cs->g.out[2];
        char msg[200] = "";

        if (!cs->out_size || !cs->mg || lo >= hi)
                return 0;
        /* the post-op over every plane's lines [lo, hi), where it was not applied band by band */
        struct ops_conv_post pl = { post && post->resid ? post->resid + lo * ow : NULL, post && post->relu, NULL,
                                    NULL };
        if (!kk) { /* no inputs: the bias (the affine's shift) */
                for (int64_t i = 0; i < cs->n * cs->m; i++) {
                        int64_t ch = i % cs->m;
                        float v = post && post->scale ? (float)(post->shift ? post->shift[ch] : 0.0)
                                  : b                 ? b[ch]
                                                      : 0.0f;
                        for (int64_t p = lo * ow; p < hi * ow; p++)
                                y[i * cs->out_size + p] = v;
                }
                conv_post_lines(post ? &pl : NULL, y + lo * ow, cs->n * cs->m, cs->out_size, (hi - lo) * ow);
                return 0;
        }
        int rc = conv_mixed_padded(cs, x, w, b, y, lo, hi, post, err, errlen);
        if (rc <= 0)
                return rc;
        rc = 0;
        int64_t band = ow ? CONV_MIXED_BAND / (int64_t)sizeof(float) / (kk * ow) : 1;
        band = band < 1 ? 1 : band > hi - lo ? hi - lo : band;
        int64_t blocks = (band * ow + nb - 1) / nb;
        /* the band's column blocks, then its im2col */
        float *bx = ops_buf_alloc(ops_bytes(ops_bytes((uint64_t)(blocks * nb + band * ow), (uint64_t)kk),
                                            sizeof(float)),
                                  msg, sizeof(msg));
        if (!bx)
                return ops_fail(err, errlen, -ENOMEM, "Conv: %s", msg[0] ? msg : "out of memory");
        float *col = bx + blocks * nb * kk;
        for (int64_t g = 0; g < cs->group && !rc; g++) {
                const float *wg = w + g * cs->mg * kk;
                for (int64_t n = 0; n < cs->n && !rc; n++) {
                        const float *xg = x + (n * cs->c + g * cs->cg) * cs->in_size;
                        float *yg = y + (n * cs->m + g * cs->mg) * cs->out_size;
                        for (int64_t r0 = lo; r0 < hi; r0 += band) {
                                int64_t r1 = r0 + band < hi ? r0 + band : hi, npos = (r1 - r0) * ow;
                                if ((r0 > lo || n || g) && ops_poll("Conv", err, errlen)) {
                                        rc = -ECANCELED;
                                        break;
                                }
                                struct ops_row_affine rat;
                                nn_im2col_f32(xg, cs->cg, &cs->g, r0, r1, col);
                                ops_mixed_pack_b(col, kk, npos, 0, npos, bx);
                                ops_mixed_product(cs->mg, npos, kk, wg, kk, bx, 0, 1.0f, 0.0f, yg + r0 * ow,
                                                  cs->out_size, conv_ra(b, post, g * cs->mg, &rat), NULL);
                        }
                }
        }
        ops_buf_free(bx);
        if (!rc)
                conv_post_lines(post ? &pl : NULL, y + lo * ow, cs->n * cs->m, cs->out_size, (hi - lo) * ow);
        return rc;
}

int ops_conv2d_mixed(const struct ops_conv2d_f64_args *a, char *err, size_t errlen)
{
        struct conv_shape cs = { .n = a->n, .c = a->c, .m = a->m, .group = a->group, .ndim = 4 };

        if (a->n < 0 || a->c <= 0 || a->m <= 0 || a->group <= 0 || a->c % a->group || a->m % a->group ||
            a->ih <= 0 || a->iw <= 0 || a->oh < 0 || a->ow < 0 || a->kh <= 0 || a->kw <= 0 || a->lo < 0)
                return 1;
        cs.cg = a->c / a->group;
        cs.mg = a->m / a->group;
        cs.g = (struct nn_geom){ .nsp = 2, .in = { 1, a->ih, a->iw }, .k = { 1, a->kh, a->kw },
                                 .out = { 1, a->oh, a->ow }, .stride = { 1, a->strides[0], a->strides[1] },
                                 .dil = { 1, a->dilations[0], a->dilations[1] }, .pb = { 0, a->pads[0], a->pads[1] },
                                 .pe = { 0, a->pads[2], a->pads[3] } };
        cs.in_size = a->ih * a->iw;
        cs.k_size = a->kh * a->kw;
        cs.out_size = a->oh * a->ow;
        struct ops_conv_post aff = { NULL, 0, a->scale, a->shift };
        return conv_mixed(&cs, a->x, a->w, a->bias, a->y, a->lo, a->hi > 0 && a->hi < a->oh ? a->hi : a->oh,
                          a->scale ? &aff : NULL, err, errlen);
}

/* ops_conv2d_f64's arguments for output rows [lo, hi) of a 2-D Conv of shape cs. */
static void f64_args(const struct conv_shape *cs, const float *x, const float *w, const float *b, float *y,
                     int64_t lo, int64_t hi, struct ops_conv2d_f64_args *a)
{
        const struct nn_geom *g = &cs->g;

        *a = (struct ops_conv2d_f64_args){
                .x = x, .w = w, .bias = b, .y = y, .n = cs->n, .c = cs->c, .ih = g->in[1], .iw = g->in[2], .m = cs->m,
                .oh = g->out[1], .ow = g->out[2], .kh = g->k[1], .kw = g->k[2], .group = cs->group,
                .strides = { g->stride[1], g->stride[2] }, .dilations = { g->dil[1], g->dil[2] },
                .pads = { g->pb[1], g->pb[2], g->pe[1], g->pe[2] }, .lo = lo, .hi = hi,
        };
}

int ops_conv_rows_acc(const struct ops_call *call, int mixed, int64_t lo, int64_t hi, char *err, size_t errlen)
{
        return ops_conv_rows_acc_post(call, mixed, lo, hi, NULL, err, errlen);
}

int ops_conv_rows_acc_post(const struct ops_call *call, int mixed, int64_t lo, int64_t hi,
                           const struct ops_conv_post *post, char *err, size_t errlen)
{
        struct ops_conv2d_f64_args a;
        struct conv_shape cs;

        if (call->nin < 2 || call->nout < 1 || call->in[0].dtype != PROTO_DTYPE_FLOAT32 ||
            call->in[1].dtype != PROTO_DTYPE_FLOAT32 || call->out[0].dtype != PROTO_DTYPE_FLOAT32 ||
            (nn_has_in(call, 2) && call->in[2].dtype != PROTO_DTYPE_FLOAT32) ||
            conv_shape_of(call, "Conv", 0, 1, 0, &cs, NULL, 0) || cs.ndim != 4 || call->out[0].ndim != 4 ||
            call->out[0].dims[2] != cs.g.out[1] || call->out[0].dims[3] != cs.g.out[2])
                return 1;
        int64_t end = hi > 0 && hi < cs.g.out[1] ? hi : cs.g.out[1], ow = cs.g.out[2];
        if (mixed)
                return conv_mixed(&cs, call->in[0].data, call->in[1].data, nn_has_in(call, 2) ? call->in[2].data : NULL,
                                  call->out[0].data, lo, end, post, err, errlen);
        f64_args(&cs, call->in[0].data, call->in[1].data, nn_has_in(call, 2) ? call->in[2].data : NULL,
                 call->out[0].data, lo, hi, &a);
        if (post) {
                a.scale = post->scale;
                a.shift = post->shift;
        }
        int rc = ops_conv2d_f64(&a, err, errlen);
        if (!rc && post && lo < end) {
                struct ops_conv_post pl = { post->resid ? post->resid + lo * ow : NULL, post->relu, NULL, NULL };
                conv_post_lines(&pl, (float *)call->out[0].data + lo * ow, cs.n * cs.m, cs.out_size, (end - lo) * ow);
        }
        return rc;
}

/* The direct convolution's arguments for output rows [lo, hi) of a Conv of shape cs. */
static void direct_args(const struct conv_shape *cs, const float *x, const float *w, const float *b, float *y,
                        int64_t lo, int64_t hi, struct ops_conv_direct_args *a)
{
        const struct nn_geom *g = &cs->g;

        *a = (struct ops_conv_direct_args){
                .x = x, .w = w, .bias = b, .y = y, .n = cs->n, .c = cs->c, .ih = g->in[1], .iw = g->in[2],
                .oh = g->out[1], .ow = g->out[2], .wdims = { cs->m, cs->c, g->k[1], g->k[2] },
                .strides = { g->stride[1], g->stride[2] }, .dilations = { g->dil[1], g->dil[2] },
                .pads = { g->pb[1], g->pb[2], g->pe[1], g->pe[2] }, .lo = lo, .hi = hi,
        };
}

/* A 2-D convolution of one group (bias included) on the packed filters of the tuned variant
 * OPS_SGEMM_ONEDNN_DIRECT (blas.h): 0 done, 1 when it does not apply, -ECANCELED. */
static int conv_direct(const struct conv_shape *cs, const float *x, const float *w, const float *b, float *y,
                       char *err, size_t errlen)
{
        struct ops_conv_direct_args a;

        if (cs->ndim != 4 || cs->group != 1 || ops_sgemm_forced() != OPS_SGEMM_ONEDNN_DIRECT)
                return 1;
        direct_args(cs, x, w, b, y, 0, 0, &a);
        return ops_conv_direct(&a, err, errlen);
}

int ops_conv_rows(const struct ops_packed_conv *p, const struct ops_call *call, int act, float alpha,
                  int64_t lo, int64_t hi, char *err, size_t errlen)
{
        struct ops_conv_direct_args a;
        struct conv_shape cs;

        if (!p || call->nin < 2 || call->nout < 1 || call->in[0].dtype != PROTO_DTYPE_FLOAT32 ||
            call->in[1].dtype != PROTO_DTYPE_FLOAT32 || call->out[0].dtype != PROTO_DTYPE_FLOAT32 ||
            (nn_has_in(call, 2) && call->in[2].dtype != PROTO_DTYPE_FLOAT32) ||
            conv_shape_of(call, "Conv", 0, 1, 0, &cs, NULL, 0) || cs.ndim != 4 || cs.group != 1 ||
            call->out[0].ndim != 4 || call->out[0].dims[2] != cs.g.out[1] || call->out[0].dims[3] != cs.g.out[2])
                return 1;
        direct_args(&cs, call->in[0].data, call->in[1].data, nn_has_in(call, 2) ? call->in[2].data : NULL,
                    call->out[0].data, lo, hi, &a);
        a.packed = p;
        a.act = act;
        a.alpha = alpha;
        return ops_conv_direct(&a, err, errlen);
}

struct ops_packed_conv *ops_conv_pack(const struct ops_call *call, char *err, size_t errlen)
{
        struct conv_shape cs;

        if (call->nin < 2 || call->in[0].dtype != PROTO_DTYPE_FLOAT32 ||
            call->in[1].dtype != PROTO_DTYPE_FLOAT32 || !call->in[1].data) {
                snprintf(err, errlen, "not a float32 Conv on known filters");
                return NULL;
        }
        if (conv_shape_of(call, "Conv", 0, 1, 0, &cs, err, errlen))
                return NULL;
        if (cs.ndim != 4 || cs.group != 1) {
                snprintf(err, errlen, "not a 2-D Conv of one group");
                return NULL;
        }
        const struct nn_geom *g = &cs.g;
        int64_t wd[4] = { cs.m, cs.c, g->k[1], g->k[2] }, strides[2] = { g->stride[1], g->stride[2] };
        int64_t dil[2] = { g->dil[1], g->dil[2] }, pads[4] = { g->pb[1], g->pb[2], g->pe[1], g->pe[2] };
        int64_t in_hw[2] = { g->in[1], g->in[2] };
        return ops_packed_conv_new(call->in[1].data, wd, strides, dil, in_hw, pads, err, errlen);
}

static int conv_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        struct nn_f32 x, w, b = { NULL, NULL }, y;
        struct conv_shape cs;
        float *col = NULL;
        char msg[200] = "";
        int rc;

        rc = conv_shape_of(call, "Conv", 0, 1, 0, &cs, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(&call->out[0]))
                return 0;
        if (call->in[0].dtype == PROTO_DTYPE_FLOAT64)
                return conv_run_f64(call, &cs, err, errlen);
        rc = nn_f32_in(&call->in[0], &x);
        rc |= nn_f32_in(&call->in[1], &w);
        if (nn_has_in(call, 2))
                rc |= nn_f32_in(&call->in[2], &b);
        rc |= nn_f32_out(&call->out[0], &y);
        if (!rc && ops_sgemm_forced() == OPS_SGEMM_MIXED) {
                rc = conv_mixed(&cs, x.p, w.p, b.p, y.p, 0, cs.g.out[0] * cs.g.out[1], NULL, err, errlen);
                if (!rc)
                        nn_f32_commit(&call->out[0], &y);
                goto done;
        }
        if (!rc && ops_sgemm_forced() == OPS_SGEMM_F64) {
                struct ops_conv2d_f64_args a;
                f64_args(&cs, x.p, w.p, b.p, y.p, 0, 0, &a);
                rc = cs.ndim == 4 ? ops_conv2d_f64(&a, err, errlen) : 1;
                if (rc > 0)
                        rc = conv_acc64(&cs, x.p, w.p, b.p, y.p, err, errlen);
                if (!rc)
                        nn_f32_commit(&call->out[0], &y);
                goto done;
        }
        int direct = rc ? 1 : conv_direct(&cs, x.p, w.p, b.p, y.p, err, errlen);
        if (direct <= 0) {
                rc = direct;
                if (!rc)
                        nn_f32_commit(&call->out[0], &y);
                goto done;
        }
        col = rc ? NULL : conv_col_alloc(&cs, sizeof(float), msg, sizeof(msg));
        if (rc || !col) {
                rc = ops_fail(err, errlen, -ENOMEM, "Conv: %s", msg[0] ? msg : "out of memory");
        } else {
                rc = conv_fwd_f32(&cs, x.p, w.p, y.p, col, "Conv", err, errlen);
                if (!rc && b.p)
                        conv_bias_f32(y.p, b.p, cs.n, cs.m, cs.out_size);
                if (!rc)
                        nn_f32_commit(&call->out[0], &y);
        }
        ops_buf_free(col);
done:
        nn_f32_done(&x);
        nn_f32_done(&w);
        nn_f32_done(&b);
        nn_f32_done(&y);
        return rc;
}

static void conv_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        conv_cost_of(call, "Conv", 0, 1, 0, ret_flops, ret_bytes);
}

const struct ops_def ops_conv_def = {
        .name = "Conv", .min_inputs = 2, .max_inputs = 3, .outputs = 1, .engine = OPS_ENGINE_CUBE,
        .run = conv_run, .cost = conv_cost, .infer = conv_infer, .since_version = 1,
};

/* ---------------------------------------------------------------- ConvTranspose */

static int convt_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct conv_shape cs;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (call->in[1].dtype != call->in[0].dtype ||
            (nn_has_in(call, 2) && call->in[2].dtype != call->in[0].dtype))
                return ops_fail(err, errlen, -EINVAL, "ConvTranspose: inputs of different dtypes");
        rc = conv_shape_of(call, "ConvTranspose", 0, 1, 1, &cs, err, errlen);
        if (rc)
                return rc;
        if (nn_has_in(call, 2) && (call->in[2].ndim != 1 || call->in[2].dims[0] != cs.m))
                return ops_fail(err, errlen, -EINVAL, "ConvTranspose: bias must be [%lld]",
                                (long long)cs.m);
        nn_set_out(call, 0, call->in[0].dtype, cs.ndim, cs.ydims);
        return 0;
}

/* Per (image, group): col[Mg * k, in positions] = W_g^T X_g, then col2im into Y. In the
 * conv view the output Y is g.in (in_size) and X is g.out (out_size). */
static int convt_f32(const struct conv_shape *cs, const float *x, const float *w, float *y,
                     float *col, char *err, size_t errlen)
{
        int64_t n, g, rows = cs->mg * cs->k_size;

        memset(y, 0, (size_t)(cs->n * cs->m * cs->in_size) * sizeof(float));
        if (!rows || !cs->out_size || !cs->cg)
                return 0;
        for (n = 0; n < cs->n; n++) {
                for (g = 0; g < cs->group; g++) {
                        if ((n || g) && ops_poll("ConvTranspose", err, errlen))
                                return -ECANCELED;
                        const float *xg = x + (n * cs->c + g * cs->cg) * cs->out_size;
                        const float *wg = w + g * cs->cg * rows;
                        float *yg = y + (n * cs->m + g * cs->mg) * cs->in_size;

                        ops_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)rows,
                                  (blasint)cs->out_size, (blasint)cs->cg, 1.0f, wg,
                                  (blasint)rows, xg, (blasint)cs->out_size, 0.0f, col,
                                  (blasint)cs->out_size);
                        nn_col2im_f32(col, cs->mg, &cs->g, yg);
                }
        }
        return 0;
}

static int convt_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        struct nn_f32 x, w, b = { NULL, NULL }, y;
        struct conv_shape cs;
        float *col;
        size_t ncol;
        int rc;

        rc = conv_shape_of(call, "ConvTranspose", 0, 1, 1, &cs, err, errlen);
        if (rc)
                return rc;
        if (!ops_tensor_numel(&call->out[0]))
                return 0;
        ncol = (size_t)ops_bytes(ops_bytes((uint64_t)cs.mg, (uint64_t)cs.k_size), (uint64_t)cs.out_size);
        col = ops_buf_alloc(ops_bytes(ncol, sizeof(float)), err, errlen);
        rc = nn_f32_in(&call->in[0], &x);
        rc |= nn_f32_in(&call->in[1], &w);
        if (nn_has_in(call, 2))
                rc |= nn_f32_in(&call->in[2], &b);
        rc |= nn_f32_out(&call->out[0], &y);
        if (!rc && col) {
                rc = convt_f32(&cs, x.p, w.p, y.p, col, err, errlen);
                if (!rc && b.p)
                        conv_bias_f32(y.p, b.p, cs.n, cs.m, cs.in_size);
                if (!rc)
                        nn_f32_commit(&call->out[0], &y);
        } else {
                rc = ops_fail(err, errlen, -ENOMEM, "ConvTranspose: out of memory or over budget");
        }
        ops_buf_free(col);
        nn_f32_done(&x);
        nn_f32_done(&w);
        nn_f32_done(&b);
        nn_f32_done(&y);
        return rc;
}

static void convt_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                       uint64_t *ret_bytes)
{
        conv_cost_of(call, "ConvTranspose", 0, 1, 1, ret_flops, ret_bytes);
}

const struct ops_def ops_conv_transpose_def = {
        .name = "ConvTranspose", .min_inputs = 2, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = convt_run, .cost = convt_cost, .infer = convt_infer,
        .since_version = 1,
};

/* ---------------------------------------------------------------- ConvInteger, QLinearConv */

static const int q8_types[] = { PROTO_DTYPE_UINT8, PROTO_DTYPE_INT8, 0 };

/* A zero point or scale input: absent, a scalar / one element, or one per channel (m). */
static int q_param_ok(const struct ops_call *call, int i, int64_t m)
{
        int64_t n;

        if (!nn_has_in(call, i))
                return 1;
        n = ops_tensor_numel(&call->in[i]);
        return call->in[i].ndim <= 1 && (n == 1 || n == m);
}

static double q_param(const struct ops_call *call, int i, int64_t idx, double def)
{
        if (!nn_has_in(call, i))
                return def;
        return nn_get(&call->in[i], ops_tensor_numel(&call->in[i]) == 1 ? 0 : idx);
}

/* Integer convolution in double: x and w minus their zero points (x_zp scalar, w_zp per
 * output channel), the integer result (exact) left in y. */
static int qconv_core(const struct ops_call *call, const struct conv_shape *cs, int xi, int wi,
                      int xzi, int wzi, double *y, const char *op, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[xi], *w = &call->in[wi];
        int64_t nx = ops_tensor_numel(x), nw = ops_tensor_numel(w), i, per = cs->cg * cs->k_size;
        double *xd, *wd, *col, xz = q_param(call, xzi, 0, 0);
        char msg[200] = "";
        int rc;

        xd = ops_buf_alloc(ops_bytes((uint64_t)nx, sizeof(double)), msg, sizeof(msg));
        wd = xd ? ops_buf_alloc(ops_bytes((uint64_t)nw, sizeof(double)), msg, sizeof(msg)) : NULL;
        col = wd ? conv_col_alloc(cs, sizeof(double), msg, sizeof(msg)) : NULL;
        if (!xd || !wd || !col) {
                ops_buf_free(xd);
                ops_buf_free(wd);
                return ops_fail(err, errlen, -ENOMEM, "%s: workspace: %s", op, msg);
        }
        for (i = 0; i < nx; i++)
                xd[i] = nn_get(x, i) - xz;
        for (i = 0; i < nw; i++)
                wd[i] = nn_get(w, i) - q_param(call, wzi, per ? i / per : 0, 0);
        rc = conv_fwd_f64(cs, xd, wd, y, col, op, err, errlen);
        ops_buf_free(xd);
        ops_buf_free(wd);
        ops_buf_free(col);
        return rc;
}

static int convi_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct conv_shape cs;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, q8_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 1, q8_types, err, errlen);
        if (rc)
                return rc;
        rc = conv_shape_of(call, "ConvInteger", 0, 1, 0, &cs, err, errlen);
        if (rc)
                return rc;
        if ((nn_has_in(call, 2) && call->in[2].dtype != call->in[0].dtype) ||
            (nn_has_in(call, 3) && call->in[3].dtype != call->in[1].dtype) ||
            !q_param_ok(call, 2, 1) || !q_param_ok(call, 3, cs.m))
                return ops_fail(err, errlen, -EINVAL, "ConvInteger: bad zero points");
        nn_set_out(call, 0, PROTO_DTYPE_INT32, cs.ndim, cs.ydims);
        return 0;
}

static int convi_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        int64_t n = ops_tensor_numel(&call->out[0]), i;
        struct conv_shape cs;
        int32_t *out = call->out[0].data;
        double *y;
        int rc;

        rc = conv_shape_of(call, "ConvInteger", 0, 1, 0, &cs, err, errlen);
        if (rc || !n)
                return rc;
        y = ops_buf_alloc(ops_bytes((uint64_t)n, sizeof(double)), err, errlen);
        if (!y)
                return -ENOMEM;
        rc = qconv_core(call, &cs, 0, 1, 2, 3, y, "ConvInteger", err, errlen);
        if (rc) {
                ops_buf_free(y);
                return rc;
        }
        /* Sums of 8-bit products wrap like the int32 accumulators they stand for. */
        for (i = 0; i < n; i++)
                out[i] = (int32_t)(uint32_t)(int64_t)y[i];
        ops_buf_free(y);
        return 0;
}

static void convi_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                       uint64_t *ret_bytes)
{
        conv_cost_of(call, "ConvInteger", 0, 1, 0, ret_flops, ret_bytes);
}

const struct ops_def ops_conv_integer_def = {
        .name = "ConvInteger", .min_inputs = 2, .max_inputs = 4, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = convi_run, .cost = convi_cost, .infer = convi_infer,
        .since_version = 10,
};

/* QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
 * y_zero_point, B. */
static int qlconv_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        struct conv_shape cs;
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, q8_types, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 3, q8_types, err, errlen);
        if (rc)
                return rc;
        rc = conv_shape_of(call, "QLinearConv", 0, 3, 0, &cs, err, errlen);
        if (rc)
                return rc;
        if (!nn_is_float(call->in[1].dtype) || !nn_is_float(call->in[4].dtype) ||
            !nn_is_float(call->in[6].dtype) || call->in[7].dtype != call->in[0].dtype ||
            !q_param_ok(call, 1, 1) || !q_param_ok(call, 2, 1) || !q_param_ok(call, 4, cs.m) ||
            !q_param_ok(call, 5, cs.m) || !q_param_ok(call, 6, 1) || !q_param_ok(call, 7, 1))
                return ops_fail(err, errlen, -EINVAL, "QLinearConv: bad scales or zero points");
        if (nn_has_in(call, 8) && (call->in[8].dtype != PROTO_DTYPE_INT32 ||
                                   ops_tensor_numel(&call->in[8]) != cs.m))
                return ops_fail(err, errlen, -EINVAL, "QLinearConv: bias must be int32 [%lld]",
                                (long long)cs.m);
        nn_set_out(call, 0, call->in[7].dtype, cs.ndim, cs.ydims);
        return 0;
}

static int qlconv_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        int64_t n = ops_tensor_numel(&call->out[0]), i, j, p;
        struct conv_shape cs;
        double *y, xs, ys, yz;
        int rc;

        rc = conv_shape_of(call, "QLinearConv", 0, 3, 0, &cs, err, errlen);
        if (rc || !n)
                return rc;
        y = ops_buf_alloc(ops_bytes((uint64_t)n, sizeof(double)), err, errlen);
        if (!y)
                return -ENOMEM;
        rc = qconv_core(call, &cs, 0, 3, 2, 5, y, "QLinearConv", err, errlen);
        if (rc) {
                ops_buf_free(y);
                return rc;
        }
        xs = q_param(call, 1, 0, 1);
        ys = q_param(call, 6, 0, 1);
        yz = q_param(call, 7, 0, 0);
        for (i = 0; i < cs.n; i++) {
                for (j = 0; j < cs.m; j++) {
                        double bias = nn_has_in(call, 8) ? nn_get(&call->in[8], j) : 0;
                        double mul = xs * q_param(call, 4, j, 1) / ys;
                        int64_t base = (i * cs.m + j) * cs.out_size;

                        for (p = 0; p < cs.out_size; p++)
                                nn_put(&call->out[0], base + p,
                                       nearbyint((y[base + p] + bias) * mul) + yz);
                }
        }
        ops_buf_free(y);
        return 0;
}

static void qlconv_cost(const struct ops_def *def, const struct ops_call *call,
                        uint64_t *ret_flops, uint64_t *ret_bytes)
{
        conv_cost_of(call, "QLinearConv", 0, 3, 0, ret_flops, ret_bytes);
}

const struct ops_def ops_qlinear_conv_def = {
        .name = "QLinearConv", .min_inputs = 8, .max_inputs = 9, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = qlconv_run, .cost = qlconv_cost, .infer = qlconv_infer,
        .since_version = 10,
};

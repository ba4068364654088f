/* A 2-D float32 convolution with every multiply-add in float64 (blas.h, OPS_SGEMM_F64), by
 * shifted products instead of im2col. Output lines [lo, hi) of each image only (a part of
 * the node run as bands of lines) read only the input rows under them.
 *
 * Per image and group, the input is converted once into a padded float64 copy, channel
 * planes as in NCHW, each plane's columns split by phase modulo the column stride (column x
 * of the padded plane at phase x % sw, index x / sw). Under filter tap (kh, kw), output line
 * oh then reads, for output column ow, padded column ow * sw + kw * dw of row oh * sh +
 * kh * dh: contiguous in ow within one phase, one plane apart per channel. So the line's
 * product under a tap is window (ow x cg, ld the plane size) x tap filters (cg x mg), and
 * the line is the sum of its KH * KW tap products, accumulated in a float64 tile of mg x ow
 * that stays in L1, then rounded to float32 with its bias into the output line of every
 * channel. Every product goes through libxsmm's JIT float64 kernels (OpenBLAS's dgemm
 * where libxsmm makes none); no im2col matrix is laid out, and the conversions in and out
 * run along contiguous lines. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>
#include <libxsmm.h>

#include "blas.h"
#include "ops-internal.h"
#include "runctx.h"

/* Past this many bytes of padded float64 input the caller takes the im2col path, which
 * needs no padded copy (a model with pads far larger than its image). */
#define CONV_F64_PAD_MAX (256ull << 20)

/* C'(ow x mg) (+)= A'(ow x cg) B'(cg x mg), column-major: A' the window (ld lda), B' a tap's
 * filters (ld cg), C' the line's tile (ld ow). */
static void tap_product(long ow, long mg, long cg, const double *a, long lda, const double *b, double *c, int acc)
{
        libxsmm_blasint ia = lda, ib = cg, ic = ow;
        double alpha = 1.0, beta = acc ? 1.0 : 0.0;
        int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
        libxsmm_dmmfunction f = ops_xsmm_usable()
                                        ? libxsmm_dmmdispatch(ow, mg, cg, &ia, &ib, &ic, &alpha, &beta, &flags, &prefetch)
                                        : NULL;

        if (f)
                f(a, b, c);
        else
                cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)ow, (blasint)mg, (blasint)cg, 1.0, a,
                            (blasint)lda, b, (blasint)cg, beta, c, (blasint)ow);
}

/* y[o] = fma(t[o], sc, sh) rounded to float32, o < n (a channel's affine: struct
 * ops_row_affine), in the CPU's widest vectors (a call to libm's fma an element took as
 * long as the convolution) */
__attribute__((target_clones("avx512f", "fma", "default"))) static void round_line_af(const double *restrict t, int64_t n, double sc, double sh, float *restrict y)
{
        for (int64_t o = 0; o < n; o++)
                y[o] = (float)fma(t[o], sc, sh);
}

int ops_conv2d_f64(const struct ops_conv2d_f64_args *a, char *err, size_t errlen)
{
        const int64_t cg = a->c / a->group, mg = a->m / a->group, kh = a->kh, kw = a->kw;
        const int64_t sh = a->strides[0], sw = a->strides[1], dh = a->dilations[0], dw = a->dilations[1];
        const int64_t lo = a->lo, hi = a->hi > 0 && a->hi < a->oh ? a->hi : a->oh;
        /* Extents past 2^30 (pads far larger than the image, as a model may declare) take the
         * im2col path: below that, none of the products here overflows. */
        const int64_t big = (int64_t)1 << 30;
        if (sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || sh > big || sw > big || dh > big || dw > big || kh > big ||
            kw > big || a->oh > big || a->pads[1] + a->pads[3] > big || a->iw > big)
                return 1;
        /* the padded rows the lines [lo, hi) read: [r0, r0 + hp) */
        const int64_t r0 = lo * sh, hp = hi > lo ? (hi - 1) * sh + (kh - 1) * dh + 1 - r0 : 0;
        const int64_t wp = a->iw + a->pads[1] + a->pads[3];
        const int64_t wq = (wp + sw - 1) / sw;
        if (hp > big || wp > big)
                return 1;
        const int64_t plane = sw * hp * wq; /* a channel's doubles */
        uint64_t xbytes = ops_bytes(ops_bytes((uint64_t)plane, (uint64_t)cg), sizeof(double));
        double *xp, *wt, *tile;
        int rc = 0;

        if (a->oh <= 0 || a->ow <= 0 || mg <= 0 || lo < 0 || lo >= hi)
                return 0;
        if (cg <= 0 || kh <= 0 || kw <= 0 || hp <= 0 || wp <= 0 || xbytes > CONV_F64_PAD_MAX)
                return 1;
        /* past the run's budget the caller's im2col path, which needs less, goes on */
        xp = ops_buf_try_alloc(xbytes);
        wt = xp ? ops_buf_try_alloc(
                          ops_bytes(ops_bytes(ops_bytes((uint64_t)(kh * kw), (uint64_t)cg), (uint64_t)mg), sizeof(double)))
                : NULL;
        tile = wt ? ops_buf_try_alloc(ops_bytes(ops_bytes((uint64_t)a->ow, (uint64_t)mg), sizeof(double))) : NULL;
        if (!tile) {
                ops_buf_free(xp);
                ops_buf_free(wt);
                return 1; /* the im2col path, which needs less */
        }
        /* the padding stays zero; only the image is rewritten per (image, group) */
        memset(xp, 0, (size_t)xbytes);
        for (int64_t g = 0; g < a->group && !rc; g++) {
                /* taps [kh][kw], each cg x mg column-major: wt[((i * kw + j) * mg + m) * cg + c] */
                for (int64_t m = 0; m < mg; m++)
                        for (int64_t c = 0; c < cg; c++)
                                for (int64_t i = 0; i < kh; i++)
                                        for (int64_t j = 0; j < kw; j++)
                                                wt[((i * kw + j) * mg + m) * cg + c] =
                                                        a->w[(((g * mg + m) * cg + c) * kh + i) * kw + j];
                for (int64_t n = 0; n < a->n && !rc; n++) {
                        const float *x = a->x + (n * a->c + g * cg) * a->ih * a->iw;
                        float *y = a->y + (n * a->m + g * mg) * a->oh * a->ow;
                        const float *bias = a->bias ? a->bias + g * mg : NULL;
                        if ((n || g) && ops_poll("Conv", err, errlen)) {
                                rc = -ECANCELED;
                                break;
                        }
                        /* float32 lines -> float64 lines of the padded planes, by phase: the
                         * input rows that padded rows [r0, r0 + hp) hold */
                        int64_t h0 = r0 - a->pads[0] > 0 ? r0 - a->pads[0] : 0;
                        int64_t h1 = r0 + hp - a->pads[0] < a->ih ? r0 + hp - a->pads[0] : a->ih;
                        for (int64_t c = 0; c < cg; c++)
                                for (int64_t h = h0; h < h1; h++) {
                                        const float *src = x + (c * a->ih + h) * a->iw;
                                        double *row = xp + c * plane + (h + a->pads[0] - r0) * wq;
                                        if (sw == 1) {
                                                double *d = row + a->pads[1];
                                                for (int64_t w = 0; w < a->iw; w++)
                                                        d[w] = src[w];
                                        } else {
                                                for (int64_t w = 0; w < a->iw; w++) {
                                                        int64_t px = w + a->pads[1];
                                                        row[(px % sw) * hp * wq + px / sw] = src[w];
                                                }
                                        }
                                }
                        for (int64_t oh = lo; oh < hi; oh++) {
                                if (oh > lo && !((oh - lo) & 15) && ops_poll("Conv", err, errlen)) {
                                        rc = -ECANCELED;
                                        break;
                                }
                                for (int64_t i = 0; i < kh; i++)
                                        for (int64_t j = 0; j < kw; j++) {
                                                int64_t px = j * dw, row = oh * sh + i * dh - r0;
                                                const double *win = xp + ((px % sw) * hp + row) * wq + px / sw;
                                                tap_product(a->ow, mg, cg, win, plane, wt + (i * kw + j) * mg * cg, tile,
                                                            i || j);
                                        }
                                /* the line of every channel, rounded once with its bias
                                 * (or its affine: struct ops_row_affine) */
                                for (int64_t m = 0; m < mg; m++) {
                                        float *yr = y + (m * a->oh + oh) * a->ow;
                                        const double *tr = tile + m * a->ow;
                                        if (a->scale) {
                                                round_line_af(tr, a->ow, a->scale[g * mg + m],
                                                              a->shift ? a->shift[g * mg + m] : 0.0, yr);
                                                continue;
                                        }
                                        double b = bias ? (double)bias[m] : 0.0;
                                        for (int64_t o = 0; o < a->ow; o++)
                                                yr[o] = (float)(tr[o] + b);
                                }
                        }
                }
        }
        ops_buf_free(xp);
        ops_buf_free(wt);
        ops_buf_free(tile);
        return rc;
}

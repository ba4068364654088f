/* Einsum and Det for the cube engine / AI CPU.
 *
 * Einsum parses the equation (explicit "->" form or the implicit one, with "..." for
 * broadcast dims) into labels and contracts the operands left to right, two at a time, as
 * batched matrix products: the labels of a pair split into batch (in both and still
 * needed), M (first only), N (second only) and K (both, not needed later); each operand is
 * packed into [batch, M, K] / [batch, K, N] (labels used nowhere else are summed while
 * packing, repeated labels read the diagonal through summed strides), dgemm multiplies
 * each batch, and the product is the next left operand. A single operand is a strided
 * sum. Everything runs in double, which is exact for the integer dtypes' usual ranges.
 *
 * Det factors each [M, M] matrix by LU with partial pivoting in double. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "nn-common.h"

#define EIN_LABELS 64   /* 52 letters, then ellipsis dims */
#define EIN_ELL 52
#define EIN_MAX_OPS OPS_MAX_INPUTS

static const int ein_types[] = { PROTO_DTYPE_FLOAT32, PROTO_DTYPE_FLOAT16, PROTO_DTYPE_BFLOAT16,
                                 PROTO_DTYPE_FLOAT64, PROTO_DTYPE_INT32, PROTO_DTYPE_INT64,
                                 PROTO_DTYPE_UINT32, PROTO_DTYPE_UINT64, 0 };

/* A strided view with distinct labels. */
struct ein_view {
        int n;
        int label[OPS_MAX_DIMS];
        int64_t stride[OPS_MAX_DIMS];
        const double *data;
};

struct ein {
        int nops;
        int nlab[EIN_MAX_OPS];                /* labels per operand, as written */
        int lab[EIN_MAX_OPS][OPS_MAX_DIMS];
        int nout, out[OPS_MAX_DIMS];
        int64_t ext[EIN_LABELS];              /* extent per label, -1 unused */
};

static int ein_letter(char c)
{
        if (c >= 'a' && c <= 'z')
                return c - 'a';
        if (c >= 'A' && c <= 'Z')
                return 26 + c - 'A';
        return -1;
}

/* Labels of one subscript string [p, end) for an operand of rank (-1: the output, whose
 * ellipsis has ell dims). Returns the count or -1. */
static int ein_subscript(const char *p, const char *end, int rank, int ell, int *lab)
{
        int n = 0, letters = 0, seen_ell = 0, e, i;
        const char *q;

        for (q = p; q < end; q++)
                if (ein_letter(*q) >= 0)
                        letters++;
        for (q = p; q < end; q++) {
                if (*q == ' ')
                        continue;
                if (*q == '.') {
                        if (seen_ell || end - q < 3 || q[1] != '.' || q[2] != '.')
                                return -1;
                        seen_ell = 1;
                        q += 2;
                        e = rank >= 0 ? rank - letters : ell;
                        if (e < 0 || n + e > OPS_MAX_DIMS)
                                return -1;
                        /* right-aligned among the broadcast dims */
                        for (i = 0; i < e; i++)
                                lab[n++] = EIN_ELL + (ell - e) + i;
                        continue;
                }
                if (ein_letter(*q) < 0 || n >= OPS_MAX_DIMS)
                        return -1;
                lab[n++] = ein_letter(*q);
        }
        if (rank >= 0 && n != rank)
                return -1;
        return n;
}

static int ein_parse(const struct ops_call *call, struct ein *e, char *err, size_t errlen)
{
        const char *eq = nn_attr_str(call, "equation", NULL), *arrow, *p, *q;
        int i, j, ell = 0, count[EIN_LABELS] = { 0 };

        memset(e, 0, sizeof(*e));
        for (i = 0; i < EIN_LABELS; i++)
                e->ext[i] = -1;
        if (!eq)
                return ops_fail(err, errlen, -EINVAL, "Einsum: attribute 'equation' is required");
        arrow = strstr(eq, "->");
        e->nops = call->nin;
        /* ellipsis width: the most dims any operand's "..." covers */
        p = eq;
        for (i = 0; i < call->nin; i++) {
                int letters = 0, has = 0;

                q = strchr(p, ',');
                if (!q || (arrow && q > arrow))
                        q = arrow ? arrow : p + strlen(p);
                for (const char *c = p; c < q; c++) {
                        letters += ein_letter(*c) >= 0;
                        has |= *c == '.';
                }
                if (has && call->in[i].ndim - letters > ell)
                        ell = call->in[i].ndim - letters;
                p = *q == ',' ? q + 1 : q;
        }
        if (ell > EIN_LABELS - EIN_ELL)
                return ops_fail(err, errlen, -EINVAL, "Einsum: too many broadcast dims");
        p = eq;
        for (i = 0; i < call->nin; i++) {
                q = strchr(p, ',');
                if (i == call->nin - 1) {
                        if (q && (!arrow || q < arrow))
                                return ops_fail(err, errlen, -EINVAL,
                                                "Einsum: more operands in '%s' than inputs", eq);
                        q = arrow ? arrow : p + strlen(p);
                } else if (!q || (arrow && q > arrow)) {
                        return ops_fail(err, errlen, -EINVAL,
                                        "Einsum: fewer operands in '%s' than inputs", eq);
                }
                e->nlab[i] = ein_subscript(p, q, call->in[i].ndim, ell, e->lab[i]);
                if (e->nlab[i] < 0)
                        return ops_fail(err, errlen, -EINVAL,
                                        "Einsum: operand %d does not fit rank %d in '%s'", i,
                                        call->in[i].ndim, eq);
                for (j = 0; j < e->nlab[i]; j++) {
                        int l = e->lab[i][j];
                        int64_t d = call->in[i].dims[j];

                        count[l]++;
                        /* broadcast dims may be 1 in some operands */
                        if (e->ext[l] < 0 || (l >= EIN_ELL && e->ext[l] == 1))
                                e->ext[l] = d;
                        else if (d != e->ext[l] && !(l >= EIN_ELL && d == 1))
                                return ops_fail(err, errlen, -EINVAL,
                                                "Einsum: label '%c' has extents %lld and %lld",
                                                l < 26 ? 'a' + l : l < 52 ? 'A' + l - 26 : '.',
                                                (long long)e->ext[l], (long long)d);
                }
                p = q + 1;
        }
        if (arrow) {
                e->nout = ein_subscript(arrow + 2, arrow + strlen(arrow), -1, ell, e->out);
                if (e->nout < 0)
                        return ops_fail(err, errlen, -EINVAL, "Einsum: bad output in '%s'", eq);
                for (i = 0; i < e->nout; i++) {
                        if (e->ext[e->out[i]] < 0)
                                return ops_fail(err, errlen, -EINVAL,
                                                "Einsum: output label not in any input");
                        for (j = 0; j < i; j++)
                                if (e->out[j] == e->out[i])
                                        return ops_fail(err, errlen, -EINVAL,
                                                        "Einsum: output label repeated");
                }
        } else {
                /* implicit: broadcast dims, then labels used once, alphabetically */
                for (i = 0; i < ell; i++)
                        e->out[e->nout++] = EIN_ELL + i;
                for (i = 0; i < 52; i++) {
                        int l = i < 26 ? 26 + i : i - 26; /* upper case sorts first */

                        if (count[l] == 1)
                                e->out[e->nout++] = l;
                }
                if (e->nout > OPS_MAX_DIMS)
                        return ops_fail(err, errlen, -EINVAL, "Einsum: output rank too large");
        }
        return 0;
}

static int ein_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        int64_t dims[OPS_MAX_DIMS];
        struct ein e;
        int rc, i;

        rc = nn_infer_begin(def, call, err, errlen);
        for (i = 0; !rc && i < call->nin; i++) {
                rc = nn_want_dtype(def, call, i, ein_types, err, errlen);
                if (!rc && call->in[i].dtype != call->in[0].dtype)
                        rc = ops_fail(err, errlen, -EINVAL, "Einsum: inputs of different dtypes");
        }
        if (!rc)
                rc = ein_parse(call, &e, err, errlen);
        if (rc)
                return rc;
        for (i = 0; i < e.nout; i++)
                dims[i] = e.ext[e.out[i]];
        nn_set_out(call, 0, call->in[0].dtype, e.nout, dims);
        return 0;
}

/* The view of operand i: repeated labels fold into one with summed strides (the
 * diagonal); broadcast dims of extent 1 get stride 0. */
static void ein_view_of(const struct ein *e, int i, const struct ops_tensor *t,
                        const double *data, struct ein_view *v)
{
        int64_t st = 1, s[OPS_MAX_DIMS];
        int d, j;

        for (d = t->ndim - 1; d >= 0; d--) {
                s[d] = t->dims[d] == 1 ? 0 : st;
                st *= t->dims[d];
        }
        v->n = 0;
        v->data = data;
        for (d = 0; d < e->nlab[i]; d++) {
                for (j = 0; j < v->n; j++)
                        if (v->label[j] == e->lab[i][d])
                                break;
                if (j == v->n) {
                        v->label[v->n] = e->lab[i][d];
                        v->stride[v->n++] = 0;
                }
                v->stride[j] += s[d];
        }
}

/* dst[out labels] = sum over v's other labels of v; out labels v lacks are broadcast. */
static void ein_pack(const struct ein *e, const struct ein_view *v, const int *out, int nout,
                     double *dst)
{
        int64_t ost[OPS_MAX_DIMS], oidx[OPS_MAX_DIMS] = { 0 }, sst[OPS_MAX_DIMS];
        int64_t sext[OPS_MAX_DIMS], total = 1, inner = 1, i, k, base = 0;
        int nsum = 0, d, j;

        for (d = 0; d < nout; d++) {
                ost[d] = 0;
                for (j = 0; j < v->n; j++)
                        if (v->label[j] == out[d])
                                ost[d] = v->stride[j];
                total *= e->ext[out[d]];
        }
        for (j = 0; j < v->n; j++) {
                for (d = 0; d < nout; d++)
                        if (out[d] == v->label[j])
                                break;
                if (d == nout) {
                        sst[nsum] = v->stride[j];
                        sext[nsum] = e->ext[v->label[j]];
                        inner *= sext[nsum++];
                }
        }
        for (i = 0; i < total; i++) {
                int64_t sidx[OPS_MAX_DIMS] = { 0 }, off = base;
                double acc = 0;

                for (k = 0; k < inner; k++) {
                        acc += v->data[off];
                        for (d = nsum - 1; d >= 0; d--) {
                                off += sst[d];
                                if (++sidx[d] < sext[d])
                                        break;
                                off -= sst[d] * sext[d];
                                sidx[d] = 0;
                        }
                }
                dst[i] = acc;
                for (d = nout - 1; d >= 0; d--) {
                        base += ost[d];
                        if (++oidx[d] < e->ext[out[d]])
                                break;
                        base -= ost[d] * e->ext[out[d]];
                        oidx[d] = 0;
                }
        }
}

static int ein_has(const int *lab, int n, int l)
{
        int i;

        for (i = 0; i < n; i++)
                if (lab[i] == l)
                        return 1;
        return 0;
}

/* Contracts a and b keeping the labels in need (the output and later operands) into a
 * new contiguous buffer (*ret, owned) described by r. */
static int ein_pair(const struct ein *e, const struct ein_view *a, const struct ein_view *b,
                    const int *need, int nneed, struct ein_view *r, double **ret)
{
        int bl[OPS_MAX_DIMS], ml[OPS_MAX_DIMS], nl[OPS_MAX_DIMS], kl[OPS_MAX_DIMS];
        int al[OPS_MAX_DIMS * 2], bbl[OPS_MAX_DIMS * 2];
        int nb = 0, nm = 0, nn = 0, nk = 0, i, j;
        int64_t B = 1, M = 1, N = 1, K = 1, st;
        double *pa, *pb, *c;

        for (i = 0; i < a->n; i++) {
                int l = a->label[i], inb = ein_has(b->label, b->n, l), needed = ein_has(need, nneed, l);

                if (inb && needed)
                        bl[nb++] = l;
                else if (inb)
                        kl[nk++] = l;
                else if (needed)
                        ml[nm++] = l;
        }
        for (i = 0; i < b->n; i++)
                if (!ein_has(a->label, a->n, b->label[i]) && ein_has(need, nneed, b->label[i]))
                        nl[nn++] = b->label[i];
        if (nb + nm + nn > OPS_MAX_DIMS)
                return -EINVAL;
        for (i = 0; i < nb; i++)
                B *= e->ext[bl[i]];
        for (i = 0; i < nm; i++)
                M *= e->ext[ml[i]];
        for (i = 0; i < nn; i++)
                N *= e->ext[nl[i]];
        for (i = 0; i < nk; i++)
                K *= e->ext[kl[i]];
        if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
                return -EINVAL;
        pa = ops_buf_alloc((size_t)(B * M * K) * sizeof(double) + 1, NULL, 0);
        pb = ops_buf_alloc((size_t)(B * K * N) * sizeof(double) + 1, NULL, 0);
        c = ops_buf_alloc((size_t)(B * M * N) * sizeof(double) + 1, NULL, 0);
        if (!pa || !pb || !c) {
                ops_buf_free(pa);
                ops_buf_free(pb);
                ops_buf_free(c);
                return -ENOMEM;
        }
        j = 0;
        for (i = 0; i < nb; i++)
                al[j++] = bl[i];
        for (i = 0; i < nm; i++)
                al[j++] = ml[i];
        for (i = 0; i < nk; i++)
                al[j++] = kl[i];
        ein_pack(e, a, al, j, pa);
        j = 0;
        for (i = 0; i < nb; i++)
                bbl[j++] = bl[i];
        for (i = 0; i < nk; i++)
                bbl[j++] = kl[i];
        for (i = 0; i < nn; i++)
                bbl[j++] = nl[i];
        ein_pack(e, b, bbl, j, pb);
        for (i = 0; i < B && M && N; i++) {
                if (!K) {
                        memset(c + i * M * N, 0, (size_t)(M * N) * sizeof(double));
                        continue;
                }
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N,
                            (blasint)K, 1.0, pa + i * M * K, (blasint)K, pb + i * K * N,
                            (blasint)N, 0.0, c + i * M * N, (blasint)N);
        }
        ops_buf_free(pa);
        ops_buf_free(pb);
        /* the product's labels: batch, M, N, contiguous */
        r->n = 0;
        for (i = 0; i < nb; i++)
                r->label[r->n++] = bl[i];
        for (i = 0; i < nm; i++)
                r->label[r->n++] = ml[i];
        for (i = 0; i < nn; i++)
                r->label[r->n++] = nl[i];
        st = 1;
        for (i = r->n - 1; i >= 0; i--) {
                r->stride[i] = e->ext[r->label[i]] == 1 ? 0 : st;
                st *= e->ext[r->label[i]];
        }
        r->data = c;
        *ret = c;
        return 0;
}

static int ein_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        double *in[EIN_MAX_OPS] = { NULL }, *cur = NULL, *res = NULL;
        int64_t n = ops_tensor_numel(&call->out[0]), i;
        struct ein_view acc, v;
        struct ein e;
        int rc, k, j;

        rc = ein_parse(call, &e, err, errlen);
        if (rc)
                return rc;
        for (k = 0; k < e.nops; k++) {
                int64_t m = ops_tensor_numel(&call->in[k]);

                in[k] = ops_buf_alloc((size_t)m * sizeof(double) + 1, NULL, 0);
                if (!in[k]) {
                        rc = -ENOMEM;
                        goto out;
                }
                for (i = 0; i < m; i++)
                        in[k][i] = nn_get(&call->in[k], i);
        }
        res = ops_buf_alloc((size_t)n * sizeof(double) + 1, NULL, 0);
        if (!res) {
                rc = -ENOMEM;
                goto out;
        }
        ein_view_of(&e, 0, &call->in[0], in[0], &acc);
        for (k = 1; k < e.nops; k++) {
                int need[EIN_LABELS], nneed = 0;
                double *next;

                for (j = 0; j < e.nout; j++)
                        need[nneed++] = e.out[j];
                for (j = k + 1; j < e.nops; j++)
                        for (i = 0; i < e.nlab[j]; i++)
                                if (!ein_has(need, nneed, e.lab[j][i]))
                                        need[nneed++] = e.lab[j][i];
                ein_view_of(&e, k, &call->in[k], in[k], &v);
                rc = ein_pair(&e, &acc, &v, need, nneed, &acc, &next);
                if (rc)
                        goto out;
                ops_buf_free(cur);
                cur = next;
        }
        ein_pack(&e, &acc, e.out, e.nout, res);
        for (i = 0; i < n; i++)
                nn_put(&call->out[0], i, res[i]);
out:
        for (k = 0; k < e.nops; k++)
                ops_buf_free(in[k]);
        ops_buf_free(cur);
        ops_buf_free(res);
        return rc ? ops_fail(err, errlen, rc, "Einsum: %s",
                             rc == -ENOMEM ? "out of memory" : "contraction too large")
                  : 0;
}

static void ein_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        struct ein e;
        uint64_t f = 2;
        int l;

        nn_cost_simple(call, 2, ret_flops, ret_bytes);
        if (ein_parse(call, &e, NULL, 0))
                return;
        /* every label's extent once: the work of the naive loop nest, an upper bound */
        for (l = 0; l < EIN_LABELS; l++)
                if (e.ext[l] > 0)
                        f = ops_mul_sat(f, (uint64_t)e.ext[l]);
        *ret_flops = f;
}

const struct ops_def ops_einsum_def = {
        .name = "Einsum", .min_inputs = 1, .max_inputs = EIN_MAX_OPS, .outputs = 1,
        .engine = OPS_ENGINE_CUBE, .run = ein_run, .cost = ein_cost, .infer = ein_infer,
        .since_version = 12,
};

/* ---------------------------------------------------------------- Det */

static int det_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = nn_want_dtype(def, call, 0, nn_float_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim < 2 || x->dims[x->ndim - 1] != x->dims[x->ndim - 2])
                return ops_fail(err, errlen, -EINVAL, "Det: input must be [..., M, M]");
        nn_set_out(call, 0, x->dtype, x->ndim - 2, x->dims);
        return 0;
}

static int det_run(const struct ops_def *def, const struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        int64_t m = x->dims[x->ndim - 1], count = ops_tensor_numel(&call->out[0]), b, i, j, k;
        double *a = ops_buf_alloc((size_t)(m * m) * sizeof(double) + 1, NULL, 0);

        if (!a)
                return ops_fail(err, errlen, -ENOMEM, "Det: out of memory");
        for (b = 0; b < count; b++) {
                double det = 1;

                for (i = 0; i < m * m; i++)
                        a[i] = nn_get(x, b * m * m + i);
                for (k = 0; k < m && det != 0; k++) {
                        int64_t p = k;

                        for (i = k + 1; i < m; i++)
                                if (fabs(a[i * m + k]) > fabs(a[p * m + k]))
                                        p = i;
                        if (a[p * m + k] == 0) {
                                det = 0;
                                break;
                        }
                        if (p != k) {
                                for (j = 0; j < m; j++) {
                                        double t = a[k * m + j];

                                        a[k * m + j] = a[p * m + j];
                                        a[p * m + j] = t;
                                }
                                det = -det;
                        }
                        det *= a[k * m + k];
                        for (i = k + 1; i < m; i++) {
                                double f = a[i * m + k] / a[k * m + k];

                                for (j = k + 1; j < m; j++)
                                        a[i * m + j] -= f * a[k * m + j];
                        }
                }
                nn_put(&call->out[0], b, det);
        }
        ops_buf_free(a);
        return 0;
}

static void det_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                     uint64_t *ret_bytes)
{
        const struct ops_tensor *x = &call->in[0];
        uint64_t m = x->ndim >= 2 ? (uint64_t)x->dims[x->ndim - 1] : 1;

        nn_cost_simple(call, 1, ret_flops, ret_bytes);
        *ret_flops = ops_mul_sat((uint64_t)ops_tensor_numel(&call->out[0]),
                                 ops_mul_sat(m, m * m));
}

const struct ops_def ops_det_def = {
        .name = "Det", .min_inputs = 1, .max_inputs = 1, .outputs = 1, .engine = OPS_ENGINE_AICPU,
        .run = det_run, .cost = det_cost, .infer = det_infer, .since_version = 11,
};

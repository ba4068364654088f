/* TfIdfVectorizer over integer sequences (int32 / int64 input, pool_int64s): counts, in each
 * row of X ([C] or [N, C]), the n-grams of the pool, n from min_gram_length to
 * max_gram_length, whose items lie skip_distance apart for every skip_distance from 1 to
 * max_skip_count + 1 (unigrams counted once, whatever the skip), and writes the counts (TF),
 * the weights of the n-grams present (IDF) or their product (TFIDF) at each n-gram's
 * ngram_indexes position of a float32 row of max(ngram_indexes) + 1 entries.
 *
 * The pool holds the n-grams of each length back to back: ngram_counts[i] is where the
 * (i+1)-grams start. Lookups go through a per-length index sorted lexicographically (a
 * binary search per candidate), built for each run.
 *
 * With pool_strings the input is a STRING tensor (graph runs only): each pool string becomes
 * a token (the rank of its bytes among the distinct pool strings) and each input string the
 * token of the equal pool string, or -1 when the pool has none (a gram holding it is never
 * found); then the integer algorithm counts tokens. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nn-common.h"
#include "strings.h"

/* ngram_indexes entries above this are refused: an output row that long is a mistake or
 * an attack, and it keeps max + 1 and row offsets far from overflowing. */
#define TFIDF_MAX_INDEX ((int64_t)1 << 31)

enum tfidf_mode { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF };

struct tfidf {
        int64_t minn, maxn, maxskip;
        enum tfidf_mode mode;
        const int64_t *pool, *counts, *idx;
        const char *const *spool; /* pool_strings (pool then NULL) */
        int npool, ncounts, nidx;
        const float *w;
        int nw;
        int64_t out_size;
};

/* An INTS attribute (an INT counts as a list of one); absent: n = 0, p = NULL. -1 when it
 * is of another kind. */
static int tfidf_ints(const struct ops_call *call, const char *name, const int64_t **p, int *n)
{
        const struct ops_attr *a = ops_attr_find(call, name);

        *p = NULL;
        *n = 0;
        if (!a)
                return 0;
        if (a->type == OPS_ATTR_INT) {
                *p = &a->i;
                *n = 1;
                return 0;
        }
        if (a->type != OPS_ATTR_INTS || a->n < 0 || (a->n && !a->ints))
                return -1;
        *p = a->ints;
        *n = a->n;
        return 0;
}

static int tfidf_parse(const struct ops_def *def, const struct ops_call *call, struct tfidf *p,
                       char *err, size_t errlen)
{
        const struct ops_attr *a;
        const char *mode = nn_attr_str(call, "mode", NULL);
        int64_t total = 0;
        int i;

        memset(p, 0, sizeof(*p));
        p->minn = ops_attr_int(call, "min_gram_length", 0);
        p->maxn = ops_attr_int(call, "max_gram_length", 0);
        p->maxskip = ops_attr_int(call, "max_skip_count", 0);
        if (!ops_attr_find(call, "min_gram_length") || !ops_attr_find(call, "max_gram_length") ||
            !ops_attr_find(call, "max_skip_count") || !mode)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: attributes min_gram_length, max_gram_length, max_skip_count and mode are required",
                                def->name);
        if (p->minn < 1 || p->maxn < p->minn)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: gram lengths [%lld, %lld] invalid (1 <= min <= max needed)",
                                def->name, (long long)p->minn, (long long)p->maxn);
        if (p->maxskip < 0)
                return ops_fail(err, errlen, -EINVAL, "%s: max_skip_count %lld is negative",
                                def->name, (long long)p->maxskip);
        if (strcmp(mode, "TF") == 0)
                p->mode = TFIDF_TF;
        else if (strcmp(mode, "IDF") == 0)
                p->mode = TFIDF_IDF;
        else if (strcmp(mode, "TFIDF") == 0)
                p->mode = TFIDF_TFIDF;
        else
                return ops_fail(err, errlen, -EINVAL, "%s: mode '%s' unknown (TF, IDF or TFIDF)",
                                def->name, mode);
        if (tfidf_ints(call, "pool_int64s", &p->pool, &p->npool) ||
            tfidf_ints(call, "ngram_counts", &p->counts, &p->ncounts) ||
            tfidf_ints(call, "ngram_indexes", &p->idx, &p->nidx))
                return ops_fail(err, errlen, -EINVAL,
                                "%s: pool_int64s, ngram_counts and ngram_indexes must be lists of integers",
                                def->name);
        a = ops_attr_find(call, "pool_strings");
        if (a && ops_attr_find(call, "pool_int64s"))
                return ops_fail(err, errlen, -EINVAL, "%s: both pool_int64s and pool_strings given",
                                def->name);
        if (a) {
                if (a->type != OPS_ATTR_STRINGS || a->n < 0 || (a->n && !a->strings))
                        return ops_fail(err, errlen, -EINVAL, "%s: pool_strings must be a list of strings",
                                        def->name);
                for (i = 0; i < a->n; i++)
                        if (!a->strings[i])
                                return ops_fail(err, errlen, -EINVAL, "%s: pool_strings[%d] is missing",
                                                def->name, i);
                p->spool = a->strings;
                p->npool = a->n;
        }
        if ((!ops_attr_find(call, "pool_int64s") && !p->spool) || !p->ncounts || !p->nidx)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: attributes pool_int64s or pool_strings, ngram_counts and ngram_indexes are required",
                                def->name);
        for (i = 0; i < p->ncounts; i++) {
                int64_t start = p->counts[i];
                int64_t end = i + 1 < p->ncounts ? p->counts[i + 1] : p->npool;

                if (start < 0 || start > end || end > p->npool || (end - start) % (i + 1))
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: ngram_counts[%d] = %lld does not split the pool (%d values) into %d-grams",
                                        def->name, i, (long long)start, p->npool, i + 1);
                total += (end - start) / (i + 1);
        }
        if (total != p->nidx)
                return ops_fail(err, errlen, -EINVAL,
                                "%s: the pool holds %lld n-grams but ngram_indexes has %d entries",
                                def->name, (long long)total, p->nidx);
        for (i = 0; i < p->nidx; i++) {
                if (p->idx[i] < 0 || p->idx[i] >= TFIDF_MAX_INDEX)
                        return ops_fail(err, errlen, -EINVAL, "%s: ngram_indexes[%d] = %lld out of range",
                                        def->name, i, (long long)p->idx[i]);
                if (p->idx[i] + 1 > p->out_size)
                        p->out_size = p->idx[i] + 1;
        }
        a = ops_attr_find(call, "weights");
        if (a) {
                if (a->type != OPS_ATTR_FLOATS || a->n < p->out_size || !a->floats)
                        return ops_fail(err, errlen, -EINVAL,
                                        "%s: weights must be a list of at least %lld floats",
                                        def->name, (long long)p->out_size);
                p->w = a->floats;
                p->nw = a->n;
        }
        return 0;
}

static const int tfidf_in_types[] = { PROTO_DTYPE_INT32, PROTO_DTYPE_INT64, 0 };
static const int tfidf_str_types[] = { PROTO_DTYPE_STRING, 0 };

static int tfidf_infer(const struct ops_def *def, struct ops_call *call, char *err,
                       size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct tfidf p;
        int64_t dims[2];
        int rc;

        rc = nn_infer_begin(def, call, err, errlen);
        if (!rc)
                rc = tfidf_parse(def, call, &p, err, errlen);
        /* strings for a string pool, integers for an integer one */
        if (!rc)
                rc = nn_want_dtype(def, call, 0, p.spool ? tfidf_str_types : tfidf_in_types, err, errlen);
        if (rc)
                return rc;
        if (x->ndim != 1 && x->ndim != 2)
                return ops_fail(err, errlen, -EINVAL, "%s: input of rank %d, 1 or 2 needed",
                                def->name, x->ndim);
        if (x->ndim == 1) {
                dims[0] = p.out_size;
                nn_set_out(call, 0, PROTO_DTYPE_FLOAT32, 1, dims);
        } else {
                dims[0] = x->dims[0];
                dims[1] = p.out_size;
                nn_set_out(call, 0, PROTO_DTYPE_FLOAT32, 2, dims);
        }
        return 0;
}

/* The (i+1)-grams of the pool, as ordinals sorted by their items. */
struct tfidf_seg {
        const int64_t *items; /* the pool from this length's start */
        int64_t n;            /* gram length */
        int64_t first;        /* global ordinal (index into ngram_indexes) of the first */
        int64_t count;
        int64_t *order;
};

static int tfidf_cmp(const void *a, const void *b, void *arg)
{
        const struct tfidf_seg *s = arg;
        const int64_t *x = s->items + *(const int64_t *)a * s->n;
        const int64_t *y = s->items + *(const int64_t *)b * s->n;

        for (int64_t j = 0; j < s->n; j++)
                if (x[j] != y[j])
                        return x[j] < y[j] ? -1 : 1;
        return 0;
}

/* Global ordinal of the gram g (s->n items) in the pool, -1 when absent. */
static int64_t tfidf_find(const struct tfidf_seg *s, const int64_t *g)
{
        int64_t lo = 0, hi = s->count;

        while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2, j;
                const int64_t *y = s->items + s->order[mid] * s->n;
                int c = 0;

                for (j = 0; j < s->n && !c; j++)
                        if (g[j] != y[j])
                                c = g[j] < y[j] ? -1 : 1;
                if (!c)
                        return s->first + s->order[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return -1;
}

/* Byte order of a string of la bytes and one of lb. */
static int bytes_cmp(const char *a, size_t la, const char *b, size_t lb)
{
        int c = memcmp(a, b, la < lb ? la : lb);

        return c ? c : la < lb ? -1 : la > lb;
}

static int spool_cmp(const void *a, const void *b, void *arg)
{
        const char *const *sp = arg;
        const char *x = sp[*(const int64_t *)a], *y = sp[*(const int64_t *)b];

        return bytes_cmp(x, strlen(x), y, strlen(y));
}

/* Tokens of a string pool: *ret_tok[i] for pool string i (equal strings, equal tokens), and
 * *ret_sorted, the pool's indices in byte order, to look input strings up in. */
static int spool_tokens(const struct tfidf *p, int64_t **ret_tok, int64_t **ret_sorted)
{
        int64_t *tok = ops_buf_alloc(sizeof(*tok) * (size_t)(p->npool ? p->npool : 1), NULL, 0);
        int64_t *sorted = ops_buf_alloc(sizeof(*sorted) * (size_t)(p->npool ? p->npool : 1), NULL, 0);
        int64_t rank = 0;

        *ret_tok = tok;
        *ret_sorted = sorted;
        if (!tok || !sorted)
                return -ENOMEM;
        for (int64_t i = 0; i < p->npool; i++)
                sorted[i] = i;
        qsort_r(sorted, (size_t)p->npool, sizeof(*sorted), spool_cmp, (void *)p->spool);
        for (int64_t i = 0; i < p->npool; i++) {
                if (i && spool_cmp(&sorted[i - 1], &sorted[i], (void *)p->spool))
                        rank++;
                tok[sorted[i]] = rank;
        }
        return 0;
}

/* The token of an input string: that of the equal pool string, -1 when there is none. */
static int64_t spool_find(const struct tfidf *p, const int64_t *tok, const int64_t *sorted,
                          const struct ops_str *el)
{
        uint32_t len;
        const char *s = ops_str_bytes(el, &len);
        int64_t lo = 0, hi = p->npool;

        while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                const char *y = p->spool[sorted[mid]];
                int c = bytes_cmp(s, len, y, strlen(y));
                if (!c)
                        return tok[sorted[mid]];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return -1;
}

static int tfidf_run(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen)
{
        const struct ops_tensor *x = &call->in[0];
        struct tfidf p;
        struct tfidf_seg *seg = NULL;
        int64_t *order = NULL, *g = NULL, *tok = NULL, *sorted = NULL, *xtok = NULL;
        int64_t rows, cols, emax, r, i, first = 0, work = 0;
        float *y = call->out[0].data;
        int rc;

        rc = tfidf_parse(def, call, &p, err, errlen);
        if (rc)
                return rc;
        rows = x->ndim == 2 ? x->dims[0] : 1;
        cols = x->ndim == 2 ? x->dims[1] : x->dims[0];
        if (p.spool) {
                /* strings become tokens, pool and input alike */
                int64_t nx = rows * cols;
                if (x->dtype != PROTO_DTYPE_STRING)
                        return ops_fail(err, errlen, -EINVAL, "%s: pool_strings needs string input",
                                        def->name);
                xtok = ops_buf_alloc(sizeof(*xtok) * (size_t)(nx ? nx : 1), NULL, 0);
                if (!xtok || spool_tokens(&p, &tok, &sorted)) {
                        rc = ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
                        goto out;
                }
                for (i = 0; i < nx; i++)
                        xtok[i] = spool_find(&p, tok, sorted, ((struct ops_str *const *)x->data)[i]);
                p.pool = tok;
        } else if (x->dtype == PROTO_DTYPE_STRING) {
                return ops_fail(err, errlen, -EINVAL, "%s: string input needs pool_strings", def->name);
        }
        /* grams longer than the pool's longest are never found */
        emax = p.maxn < p.ncounts ? p.maxn : p.ncounts;
        seg = ops_buf_alloc(sizeof(*seg) * (size_t)p.ncounts, NULL, 0);
        order = ops_buf_alloc(sizeof(*order) * (size_t)(p.nidx ? p.nidx : 1), NULL, 0);
        g = ops_buf_alloc(sizeof(*g) * (size_t)p.ncounts, NULL, 0);
        if (!seg || !order || !g) {
                rc = ops_fail(err, errlen, -ENOMEM, "%s: out of memory", def->name);
                goto out;
        }
        for (i = 0; i < p.ncounts; i++) {
                int64_t end = i + 1 < p.ncounts ? p.counts[i + 1] : p.npool;

                seg[i].items = p.pool + p.counts[i];
                seg[i].n = i + 1;
                seg[i].first = first;
                seg[i].count = (end - p.counts[i]) / (i + 1);
                seg[i].order = order + first;
                for (int64_t k = 0; k < seg[i].count; k++)
                        seg[i].order[k] = k;
                qsort_r(seg[i].order, (size_t)seg[i].count, sizeof(int64_t), tfidf_cmp, &seg[i]);
                first += seg[i].count;
        }
        memset(y, 0, sizeof(float) * (size_t)(rows * p.out_size));
        for (r = 0; r < rows && p.minn <= emax; r++) {
                float *yr = y + r * p.out_size;
                int64_t startn = p.minn, d;
                int64_t dmax = p.maxskip + 1 < cols ? p.maxskip + 1 : cols;

                for (d = 1; d <= dmax; d++) {
                        for (int64_t s = 0; s < cols && s + d * (startn - 1) < cols; s++) {
                                for (int64_t n = 1; n <= emax && s + (n - 1) * d < cols; n++) {
                                        int64_t k;

                                        g[n - 1] = xtok ? xtok[r * cols + s + (n - 1) * d]
                                                        : nn_get_int(x, r * cols + s + (n - 1) * d);
                                        if (n < startn)
                                                continue;
                                        k = tfidf_find(&seg[n - 1], g);
                                        if (k >= 0)
                                                yr[p.idx[k]] += 1;
                                        if (++work % (OPS_POLL_ELEMS / 16) == 0) {
                                                rc = ops_poll(def->name, err, errlen);
                                                if (rc)
                                                        goto out;
                                        }
                                }
                        }
                        /* unigrams do not depend on the skip: counted on the first pass only */
                        if (startn == 1 && ++startn > emax)
                                break;
                }
                for (i = 0; i < p.out_size && p.mode != TFIDF_TF; i++) {
                        float wt = p.w ? p.w[i] : 1.0f;

                        if (p.mode == TFIDF_IDF)
                                yr[i] = yr[i] > 0 ? wt : 0;
                        else
                                yr[i] *= wt;
                }
        }
out:
        ops_buf_free(seg);
        ops_buf_free(order);
        ops_buf_free(g);
        ops_buf_free(tok);
        ops_buf_free(sorted);
        ops_buf_free(xtok);
        return rc;
}

static void tfidf_cost(const struct ops_def *def, const struct ops_call *call,
                       uint64_t *ret_flops, uint64_t *ret_bytes)
{
        int64_t maxn = ops_attr_int(call, "max_gram_length", 1);
        int64_t skips = ops_attr_int(call, "max_skip_count", 0) + 1;

        (void)def;
        if (maxn < 1 || maxn > 64)
                maxn = 64;
        if (skips < 1 || skips > 64)
                skips = 64;
        nn_cost_simple(call, (uint64_t)(maxn * skips * 8), ret_flops, ret_bytes);
}

static const char *const tfidf_attrs[] = {
        "max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts",
        "ngram_indexes", "pool_int64s", "pool_strings", "weights", NULL,
};

const struct ops_def ops_tfidf_def = {
        .name = "TfIdfVectorizer", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
        .engine = OPS_ENGINE_AICPU, .run = tfidf_run, .cost = tfidf_cost, .infer = tfidf_infer,
        .since_version = 9, .attrs = tfidf_attrs,
};

/* ops_sgemm: oneDNN or OpenBLAS by size (see blas.h). */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "blas.h"
#include "dnnl-common.h"

/* Below this many multiply-adds OpenBLAS's lower call overhead wins. */
#define ONEDNN_MIN_MACS 4096.0

int ops_dnnl_wanted(void)
{
        static int wanted = -1;
        int w = __atomic_load_n(&wanted, __ATOMIC_RELAXED);

        if (w < 0) {
                const char *env = getenv("NPUD_SGEMM");
                w = !(env && strcmp(env, "openblas") == 0);
                __atomic_store_n(&wanted, w, __ATOMIC_RELAXED);
        }
        return w;
}

const char *const ops_sgemm_variant_names[OPS_SGEMM_VARIANTS] = { "openblas", "onednn", "onednn-packed",
                                                                      "onednn-direct" };

static __thread int forced = OPS_SGEMM_AUTO;

void ops_sgemm_force(int variant)
{
        forced = variant >= OPS_SGEMM_OPENBLAS && variant < OPS_SGEMM_VARIANTS ? variant : OPS_SGEMM_AUTO;
}

int ops_sgemm_forced(void)
{
        return forced;
}

static int use_onednn(long m, long n, long k)
{
        if (!ops_dnnl_wanted())
                return 0;
        if (forced != OPS_SGEMM_AUTO)
                return forced != OPS_SGEMM_OPENBLAS;
        return (double)m * (double)n * (double)k >= ONEDNN_MIN_MACS;
}

const char *ops_sgemm_backend(long m, long n, long k)
{
        return use_onednn(m, n, k) ? "onednn" : "openblas";
}

/* oneDNN's Debian build threads with OpenMP, whose team size is a per-thread setting
 * inherited from the initial thread: set it to one in each thread before its first call. */
void ops_dnnl_one_thread(void)
{
        static __thread int done;

        if (!done) {
                omp_set_num_threads(1);
                done = 1;
        }
}

/* ---- packed B: oneDNN matmul primitives on reordered weights ---- */

struct packed_shape {
        long m;
        int acc;                /* beta 1: a sum post-op adds the product to C */
        int ok;                 /* 0: oneDNN refused this shape (the plain path computes it) */
        dnnl_primitive_t prim;
        dnnl_memory_desc_t a_md, c_md;
        size_t scratch;         /* user scratchpad bytes per execution */
        dnnl_memory_desc_t scratch_md;
};

struct ops_packed_b {
        const float *src;
        long k, n;
        int transb;
        dnnl_memory_desc_t w_md; /* the blocked layout */
        dnnl_memory_t w;
        uint64_t bytes;
        uint64_t runs;          /* atomic */
        pthread_mutex_t mu;
        int nshapes;
        struct packed_shape shapes[OPS_PACKED_MAX_SHAPES];
        /* column blocks (packed_block), their bytes at most the whole copy's */
        int nblocks;
        uint64_t block_bytes;
        struct ops_packed_b *blocks[OPS_PACKED_MAX_BLOCKS];
};

static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static pthread_key_t stream_key;

static void stream_gone(void *s)
{
        dnnl_stream_destroy(s);
}

/* One CPU engine for the process (never destroyed: it lives as long as the library). */
static void engine_init(void)
{
        if (pthread_key_create(&stream_key, stream_gone) != 0)
                return;
        engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

dnnl_engine_t ops_dnnl_engine(void)
{
        pthread_once(&engine_once, engine_init);
        return engine_status == dnnl_success ? engine : NULL;
}

/* This thread's stream (destroyed when the thread exits). */
dnnl_stream_t ops_dnnl_stream(void)
{
        dnnl_stream_t s = pthread_getspecific(stream_key);

        if (!s) {
                if (dnnl_stream_create(&s, engine, dnnl_stream_default_flags) != dnnl_success)
                        return NULL;
                if (pthread_setspecific(stream_key, s) != 0) {
                        dnnl_stream_destroy(s);
                        return NULL;
                }
        }
        return s;
}

static void b_plain_md(dnnl_memory_desc_t *md, long k, long n, int transb)
{
        dnnl_dims_t d = { k, n };
        /* B^T stored as n rows of k is B in column-major order: tag ba */
        dnnl_memory_desc_init_by_tag(md, 2, d, dnnl_f32, transb ? dnnl_ba : dnnl_ab);
}

/* The matmul primitive descriptor of an m-row product on weights of layout w_md; the
 * scratchpad is the caller's (user mode), so one primitive may execute on several threads
 * at once whatever oneDNN's build does with its own. */
static dnnl_status_t packed_pd(dnnl_primitive_desc_t *pd, long m, long k, long n, int acc,
                               const dnnl_memory_desc_t *w_md, dnnl_memory_desc_t *a_md,
                               dnnl_memory_desc_t *c_md)
{
        dnnl_dims_t ad = { m, k }, cd = { m, n };
        dnnl_primitive_attr_t attr = NULL;
        dnnl_post_ops_t po = NULL;
        dnnl_matmul_desc_t desc;
        dnnl_status_t st;

        dnnl_memory_desc_init_by_tag(a_md, 2, ad, dnnl_f32, dnnl_ab);
        dnnl_memory_desc_init_by_tag(c_md, 2, cd, dnnl_f32, dnnl_ab);
        st = dnnl_matmul_desc_init(&desc, a_md, w_md, NULL, c_md);
        if (st == dnnl_success)
                st = dnnl_primitive_attr_create(&attr);
        if (st == dnnl_success)
                st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
        if (st == dnnl_success && acc) {
                st = dnnl_post_ops_create(&po);
                if (st == dnnl_success)
                        st = dnnl_post_ops_append_sum(po, 1.0f);
                if (st == dnnl_success)
                        st = dnnl_primitive_attr_set_post_ops(attr, po);
        }
        if (st == dnnl_success)
                st = dnnl_primitive_desc_create(pd, &desc, attr, engine, NULL);
        if (po)
                dnnl_post_ops_destroy(po);
        if (attr)
                dnnl_primitive_attr_destroy(attr);
        return st;
}

dnnl_status_t ops_dnnl_pack(const dnnl_memory_desc_t *plain_md, const void *src, const dnnl_memory_desc_t *to_md,
                            dnnl_memory_t *ret)
{
        dnnl_primitive_desc_t rpd = NULL;
        dnnl_primitive_t reorder = NULL;
        dnnl_memory_t from = NULL, to = NULL;
        dnnl_stream_t s = ops_dnnl_engine() ? ops_dnnl_stream() : NULL;
        dnnl_status_t st = s ? dnnl_success : dnnl_runtime_error;

        if (st == dnnl_success)
                st = dnnl_memory_create(&to, to_md, engine, DNNL_MEMORY_ALLOCATE);
        if (st == dnnl_success)
                st = dnnl_memory_create(&from, plain_md, engine, (void *)src);
        if (st == dnnl_success)
                st = dnnl_reorder_primitive_desc_create(&rpd, plain_md, engine, to_md, engine, NULL);
        if (st == dnnl_success)
                st = dnnl_primitive_create(&reorder, rpd);
        if (st == dnnl_success) {
                dnnl_exec_arg_t args[2] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
                st = dnnl_primitive_execute(reorder, s, 2, args);
        }
        if (st == dnnl_success)
                st = dnnl_stream_wait(s);
        if (reorder)
                dnnl_primitive_destroy(reorder);
        if (rpd)
                dnnl_primitive_desc_destroy(rpd);
        if (from)
                dnnl_memory_destroy(from);
        if (st != dnnl_success && to)
                dnnl_memory_destroy(to);
        *ret = st == dnnl_success ? to : NULL;
        return st;
}

struct ops_packed_b *ops_packed_b_new(const float *b, long k, long n, int transb, long m_hint,
                                      char *err, size_t errlen)
{
        dnnl_primitive_desc_t pd = NULL;
        dnnl_memory_desc_t any_md, plain_md, a_md, c_md;
        dnnl_status_t st;
        struct ops_packed_b *p;
        dnnl_dims_t bd = { k, n };

        const char *env = getenv("NPUD_SGEMM_PACKED");

        if (!ops_dnnl_wanted() || k < 1 || n < 1) {
                snprintf(err, errlen, "oneDNN not in use");
                return NULL;
        }
        if (env && strcmp(env, "0") == 0) {
                snprintf(err, errlen, "packing off (NPUD_SGEMM_PACKED=0)");
                return NULL;
        }
        if (!ops_dnnl_engine() || !ops_dnnl_stream()) {
                snprintf(err, errlen, "no oneDNN engine");
                return NULL;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                snprintf(err, errlen, "out of memory");
                return NULL;
        }
        p->src = b;
        p->k = k;
        p->n = n;
        p->transb = transb;
        pthread_mutex_init(&p->mu, NULL);
        ops_dnnl_one_thread();
        /* the layout oneDNN picks for weights of any format at this row count */
        dnnl_memory_desc_init_by_tag(&any_md, 2, bd, dnnl_f32, dnnl_format_tag_any);
        st = packed_pd(&pd, m_hint > 0 ? m_hint : 1, k, n, 0, &any_md, &a_md, &c_md);
        if (st == dnnl_success)
                p->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        b_plain_md(&plain_md, k, n, transb);
        if (st == dnnl_success)
                st = ops_dnnl_pack(&plain_md, b, &p->w_md, &p->w);
        p->bytes = dnnl_memory_desc_get_size(&p->w_md);
        if (pd)
                dnnl_primitive_desc_destroy(pd);
        if (st != dnnl_success) {
                snprintf(err, errlen, "oneDNN refused the weights (status %d)", (int)st);
                ops_packed_b_free(p);
                return NULL;
        }
        return p;
}

void ops_packed_b_free(struct ops_packed_b *p)
{
        if (!p)
                return;
        for (int i = 0; i < p->nblocks; i++)
                ops_packed_b_free(p->blocks[i]);
        for (int i = 0; i < p->nshapes; i++)
                if (p->shapes[i].prim)
                        dnnl_primitive_destroy(p->shapes[i].prim);
        if (p->w)
                dnnl_memory_destroy(p->w);
        pthread_mutex_destroy(&p->mu);
        free(p);
}

uint64_t ops_packed_b_bytes(const struct ops_packed_b *p)
{
        if (!p)
                return 0;
        pthread_mutex_lock((pthread_mutex_t *)&p->mu);
        uint64_t n = p->bytes + p->block_bytes;
        pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
        return n;
}

uint64_t ops_packed_b_runs(const struct ops_packed_b *p)
{
        return p ? __atomic_load_n(&p->runs, __ATOMIC_RELAXED) : 0;
}

static __thread const struct ops_packed_b *cur_packed;

void ops_sgemm_packed(const struct ops_packed_b *p)
{
        cur_packed = p;
}

/* The primitive of an m-row product (made on first use); NULL when oneDNN refused it or
 * the table is full. Entries are never removed before the packed B is freed, so the pointer
 * stays good after the mutex is released. */
static const struct packed_shape *packed_shape(struct ops_packed_b *p, long m, int acc)
{
        struct packed_shape *sh = NULL;
        dnnl_primitive_desc_t pd = NULL;

        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < p->nshapes; i++)
                if (p->shapes[i].m == m && p->shapes[i].acc == acc) {
                        sh = &p->shapes[i];
                        goto out;
                }
        if (p->nshapes == OPS_PACKED_MAX_SHAPES)
                goto out;
        sh = &p->shapes[p->nshapes++];
        sh->m = m;
        sh->acc = acc;
        /* the weights' layout is fixed: a row count whose primitive wants another is refused */
        if (packed_pd(&pd, m, p->k, p->n, acc, &p->w_md, &sh->a_md, &sh->c_md) == dnnl_success) {
                const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
                const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
                if (w && dnnl_memory_desc_equal(w, &p->w_md)) {
                        if (sp) {
                                sh->scratch_md = *sp;
                                sh->scratch = dnnl_memory_desc_get_size(sp);
                        }
                        sh->ok = dnnl_primitive_create(&sh->prim, pd) == dnnl_success;
                }
        }
        if (pd)
                dnnl_primitive_desc_destroy(pd);
out:
        pthread_mutex_unlock(&p->mu);
        return sh && sh->ok ? sh : NULL;
}

/* The product on the current packed B when the call matches it: 0, or -1 for the plain
 * path. */
/* The packed copy of a column block of p's B (transB: rows lo.. of the stored B), made on
 * first use: a Gemm with transB split into column parts (graph/split.h) runs each part on
 * its block. NULL when b is no such block or the blocks made would exceed the whole copy's
 * bytes (a second way of splitting): the plain path then. */
static struct ops_packed_b *packed_block(struct ops_packed_b *p, const float *b, long n, long m)
{
        struct ops_packed_b *blk = NULL;
        char msg[128];

        if (!p->transb || b < p->src || (b - p->src) % p->k || (b - p->src) / p->k + n > p->n)
                return NULL;
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < p->nblocks; i++)
                if (p->blocks[i]->src == b && p->blocks[i]->n == n) {
                        blk = p->blocks[i];
                        goto out;
                }
        if (p->nblocks == OPS_PACKED_MAX_BLOCKS || p->block_bytes + (uint64_t)n * (uint64_t)p->k * sizeof(float) > p->bytes)
                goto out;
        /* under the mutex: a part waits for another part's packing only on the first run */
        blk = ops_packed_b_new(b, p->k, n, 1, m, msg, sizeof(msg));
        if (blk) {
                p->blocks[p->nblocks++] = blk;
                p->block_bytes += blk->bytes;
        }
out:
        pthread_mutex_unlock(&p->mu);
        return blk;
}

/* The product on the current packed B (or a column block of it) when the call matches it:
 * 0, or -1 for the plain path. */
static int sgemm_packed(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
                        const float *b, blasint ldb, float beta, float *c, blasint ldc)
{
        struct ops_packed_b *whole = (struct ops_packed_b *)cur_packed, *p = whole;
        const struct packed_shape *sh;
        dnnl_memory_t am = NULL, cm = NULL, sm = NULL;
        void *scratch = NULL;
        dnnl_stream_t s;
        dnnl_status_t st;
        int transb = tb != CblasNoTrans;

        if (!p || order != CblasRowMajor || ta != CblasNoTrans || k != p->k || transb != p->transb ||
            ldb != (transb ? k : p->n) || lda != k || ldc != n || alpha != 1.0f ||
            (beta != 0.0f && beta != 1.0f) || m < 1 || n < 1)
                return -1;
        if ((b != p->src || n != p->n) && !(p = packed_block(p, b, n, m)))
                return -1;
        if (!(sh = packed_shape(p, m, beta != 0.0f)) || !(s = ops_dnnl_stream()))
                return -1;
        ops_dnnl_one_thread();
        if (sh->scratch && !(scratch = aligned_alloc(64, (sh->scratch + 63) & ~(size_t)63)))
                return -1;
        st = dnnl_memory_create(&am, &sh->a_md, engine, (void *)a);
        if (st == dnnl_success)
                st = dnnl_memory_create(&cm, &sh->c_md, engine, c);
        if (st == dnnl_success && scratch)
                st = dnnl_memory_create(&sm, &sh->scratch_md, engine, scratch);
        if (st == dnnl_success) {
                dnnl_exec_arg_t args[4] = { { DNNL_ARG_SRC, am }, { DNNL_ARG_WEIGHTS, p->w },
                                            { DNNL_ARG_DST, cm }, { DNNL_ARG_SCRATCHPAD, sm } };
                st = dnnl_primitive_execute(sh->prim, s, sm ? 4 : 3, args);
        }
        if (st == dnnl_success)
                st = dnnl_stream_wait(s);
        if (sm)
                dnnl_memory_destroy(sm);
        if (cm)
                dnnl_memory_destroy(cm);
        if (am)
                dnnl_memory_destroy(am);
        free(scratch);
        if (st == dnnl_success)
                __atomic_add_fetch(&whole->runs, 1, __ATOMIC_RELAXED);
        /* a failed execution has not started writing C (creation and argument checks are
         * what fail), so the plain path may still compute it */
        return st == dnnl_success ? 0 : -1;
}

void ops_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
               blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
               const float *b, blasint ldb, float beta, float *c, blasint ldc)
{
        if (forced == OPS_SGEMM_ONEDNN_PACKED && cur_packed && ops_dnnl_wanted() &&
            sgemm_packed(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0)
                return;
        if (use_onednn(m, n, k)) {
                dnnl_status_t st;
                ops_dnnl_one_thread();
                /* dnnl_sgemm is row-major; a column-major product is the transposed
                 * row-major one with A and B swapped. */
                if (order == CblasRowMajor)
                        st = dnnl_sgemm(ta == CblasNoTrans ? 'N' : 'T',
                                        tb == CblasNoTrans ? 'N' : 'T', m, n, k, alpha, a, lda,
                                        b, ldb, beta, c, ldc);
                else
                        st = dnnl_sgemm(tb == CblasNoTrans ? 'N' : 'T',
                                        ta == CblasNoTrans ? 'N' : 'T', n, m, k, alpha, b, ldb,
                                        a, lda, beta, c, ldc);
                if (st == dnnl_success)
                        return;
                /* refused (a shape it does not take): OpenBLAS computes it instead */
        }
        cblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

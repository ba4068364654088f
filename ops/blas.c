/* ops_sgemm: oneDNN or OpenBLAS by size (see blas.h). */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#include <libxsmm.h>

#include "blas.h"
#include "dnnl-common.h"
#include "ops.h"
#include "util/spin.h"

/* Below this many multiply-adds OpenBLAS's lower call overhead wins. */
#define ONEDNN_MIN_MACS 4096.0

/* 0 when environment variable name says off, 1 otherwise; read once (*cache: -1 before).
 * Racing first calls agree. */
static int env_wanted(int *cache, const char *name, const char *off)
{
        int w = __atomic_load_n(cache, __ATOMIC_RELAXED);

        if (w < 0) {
                const char *env = getenv(name);
                w = !(env && strcmp(env, off) == 0);
                __atomic_store_n(cache, w, __ATOMIC_RELAXED);
        }
        return w;
}

int ops_dnnl_wanted(void)
{
        static int wanted = -1;

        return env_wanted(&wanted, "NPUD_SGEMM", "openblas");
}

const char *const ops_sgemm_variant_names[OPS_SGEMM_VARIANTS] = { "openblas",      "onednn",
                                                                      "onednn-packed", "onednn-direct",
                                                                      "xsmm-packed",   "float64",
                                                                      "mixed" };

static __thread int forced = OPS_SGEMM_AUTO;

void ops_sgemm_force(int variant)
{
        forced = variant >= OPS_SGEMM_OPENBLAS && variant < OPS_SGEMM_VARIANTS ? variant : OPS_SGEMM_AUTO;
}

int ops_sgemm_forced(void)
{
        return forced;
}

static __thread struct ops_sgemm_post cur_post;
static __thread int post_on, relu_offered, relu_claimed;

void ops_sgemm_post(const struct ops_sgemm_post *post)
{
        post_on = post != NULL;
        cur_post = post ? *post : (struct ops_sgemm_post){ 0 };
}

int ops_sgemm_relu_offer(int on)
{
        int claimed = relu_claimed;

        relu_offered = on;
        relu_claimed = 0;
        return claimed;
}

int ops_sgemm_relu_claim(void)
{
        if (!relu_offered)
                return 0;
        relu_offered = 0;
        relu_claimed = 1;
        return 1;
}

/* ops_sgemm_post_rows in the CPU's widest vectors (static: clang makes a target_clones
 * function's dispatcher visible to its own unit only) */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void post_rows(float *c, long ldc, long rows, long w, const float *bias, int relu)
{
        for (long r = 0; r < rows; r++) {
                float *cr = c + (size_t)r * (size_t)ldc;
                if (bias)
                        for (long q = 0; q < w; q++)
                                cr[q] += bias[q];
                if (relu)
                        for (long q = 0; q < w; q++)
                                cr[q] = cr[q] < 0 ? 0.0f : cr[q]; /* NaN stays NaN, as Relu's */
        }
}

void ops_sgemm_post_rows(float *c, long ldc, long rows, long w, const float *bias, int relu)
{
        post_rows(c, ldc, rows, w, bias, relu);
}

/* The thread's post-op on rows x w of C (ld ldc) whose first column is column j0 of the
 * call's. */
static void post_apply(float *c, long ldc, long rows, long w, long j0)
{
        ops_sgemm_post_rows(c, ldc, rows, w, cur_post.bias ? cur_post.bias + j0 : NULL, cur_post.relu);
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
        spin_lock_t mu;         /* held for lookups: parts of one node use it at once, and a
                                 * thread that slept on a mutex would wake up late */
        int nshapes;
        struct packed_shape shapes[OPS_PACKED_MAX_SHAPES];
        /* column blocks (packed_block), their bytes at most the whole copy's */
        int nblocks;
        uint64_t block_bytes;
        struct ops_packed_b *blocks[OPS_PACKED_MAX_BLOCKS];
        /* the libxsmm layout (xsmm_layout), made on first use: NULL before, or when it
         * failed (x_failed) or was let go (ops_packed_b_keep) */
        float *x;
        uint64_t x_bytes;
        int x_failed;
        int dnnl_gone;          /* ops_packed_b_keep let the oneDNN copy go */
        /* the float64 column blocks of OPS_SGEMM_F64 (ops_packed_b_new_f64 only) */
        double *xd;
        uint64_t xd_bytes;
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

/* A packed B of b (k x n, n rows of k when transb) that holds only a layout of our own (no
 * oneDNN copy): the caller makes it; NULL with a message when k or n is 0 or memory is short. */
static struct ops_packed_b *packed_own_new(const float *b, long k, long n, int transb, char *err, size_t errlen)
{
        struct ops_packed_b *p = k > 0 && n > 0 ? calloc(1, sizeof(*p)) : NULL;

        if (!p) {
                snprintf(err, errlen, k > 0 && n > 0 ? "out of memory" : "empty weights");
                return NULL;
        }
        p->src = b;
        p->k = k;
        p->n = n;
        p->transb = transb;
        p->dnnl_gone = 1;
        return p;
}

struct ops_packed_b *ops_packed_b_new_f64(const float *b, long k, long n, int transb, char *err, size_t errlen)
{
        struct ops_packed_b *p = packed_own_new(b, k, n, transb, err, errlen);

        if (!p)
                return NULL;
        p->x_failed = 1;
        if (!(p->xd = ops_f64_pack_b(b, k, n, transb, transb ? k : n, &p->xd_bytes))) {
                snprintf(err, errlen, "out of memory");
                free(p);
                return NULL;
        }
        return p;
}

struct ops_packed_b *ops_packed_b_new_mixed(const float *b, long k, long n, int transb, char *err, size_t errlen)
{
        struct ops_packed_b *p = packed_own_new(b, k, n, transb, err, errlen);
        long nb = (n + OPS_XSMM_NB - 1) / OPS_XSMM_NB;

        if (!p)
                return NULL;
        p->x_bytes = (uint64_t)nb * (uint64_t)k * OPS_XSMM_NB * sizeof(float);
        if (!(p->x = aligned_alloc(64, p->x_bytes))) {
                snprintf(err, errlen, "out of memory");
                free(p);
                return NULL;
        }
        ops_mixed_pack_b(b, k, n, transb, transb ? k : n, p->x);
        return p;
}

/* The oneDNN copy, its column blocks and its primitives (under p->mu or with p private). */
static void dnnl_copy_free(struct ops_packed_b *p)
{
        for (int i = 0; i < p->nblocks; i++)
                ops_packed_b_free(p->blocks[i]);
        p->nblocks = 0;
        p->block_bytes = 0;
        for (int i = 0; i < p->nshapes; i++)
                if (p->shapes[i].prim)
                        dnnl_primitive_destroy(p->shapes[i].prim);
        p->nshapes = 0;
        if (p->w)
                dnnl_memory_destroy(p->w);
        p->w = NULL;
        p->bytes = 0;
}

void ops_packed_b_free(struct ops_packed_b *p)
{
        if (!p)
                return;
        dnnl_copy_free(p);
        free(p->x);
        free(p->xd);
        free(p);
}

uint64_t ops_packed_b_bytes(const struct ops_packed_b *p)
{
        if (!p)
                return 0;
        spin_lock((spin_lock_t *)&p->mu);
        uint64_t n = p->bytes + p->block_bytes + p->x_bytes + p->xd_bytes;
        spin_unlock((spin_lock_t *)&p->mu);
        return n;
}

void ops_packed_b_keep(struct ops_packed_b *p, int variant)
{
        if (!p)
                return;
        spin_lock(&p->mu);
        int on_x = variant == OPS_SGEMM_XSMM_PACKED || variant == OPS_SGEMM_MIXED;
        if (on_x && p->x) {
                dnnl_copy_free(p);
                p->dnnl_gone = 1;
        } else if (!on_x) {
                free(p->x);
                p->x = NULL;
                p->x_bytes = 0;
                p->x_failed = 1;
        }
        spin_unlock(&p->mu);
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

        spin_lock(&p->mu);
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
        spin_unlock(&p->mu);
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
        spin_lock(&p->mu);
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
        spin_unlock(&p->mu);
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

        if (!p || p->dnnl_gone || order != CblasRowMajor || ta != CblasNoTrans || k != p->k ||
            transb != p->transb || ldb != (transb ? k : p->n) || lda != k || ldc != n ||
            alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || m < 1 || n < 1)
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

/* ---- packed B for libxsmm: column blocks of XSMM_NB, each k rows of XSMM_NB ----
 *
 * libxsmm's JIT kernels compute column-major C (m x n) = A (m x k) B (k x n). A row-major
 * product C = A B is that with the roles swapped: column-major, the block of XSMM_NB
 * columns of our B (k rows of XSMM_NB, stored contiguously) is libxsmm's A with lda =
 * XSMM_NB, our A's rows are its B (ldb = our lda), our C its C (ldc = our ldc). A column
 * range of B that starts inside a block is a pointer into it with the same lda, so column
 * parts of a split Gemm need no copy of their own. Each call also has the kernel prefetch
 * the next block of B into L2 while it computes this one: at 32 rows the product reads
 * 4 MB of weights per 1024 x 1024 layer, which do not stay in a core's cache. */
#define XSMM_NB OPS_XSMM_NB
#define XSMM_MB 64 /* rows of our A per kernel call */

static int xsmm_wanted(void)
{
        static int wanted = -1;

        return env_wanted(&wanted, "NPUD_SGEMM_XSMM", "0");
}

static libxsmm_smmfunction xsmm_kernel(long m, long n, long k, long lda, long ldb, long ldc, float beta)
{
        libxsmm_blasint ia = lda, ib = ldb, ic = ldc;
        float alpha = 1.0f;
        int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_GEMM_PREFETCH_AL2;

        return libxsmm_smmdispatch(m, n, k, &ia, &ib, &ic, &alpha, &beta, &flags, &prefetch);
}

int ops_xsmm_usable(void)
{
        static int usable = -1;
        int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);

        if (u < 0) { /* libxsmm generates kernels for this CPU: one of the shapes used here */
                u = xsmm_wanted() && xsmm_kernel(XSMM_NB, XSMM_MB, 64, XSMM_NB, 64, XSMM_NB, 0.0f) != NULL;
                __atomic_store_n(&usable, u, __ATOMIC_RELAXED);
        }
        return u;
}

/* Make p's libxsmm layout (under p->mu); 0, or -1 when it cannot be had. It is published
 * whole (p->x, release): the calls after it read p->x without the lock. */
static int xsmm_layout(struct ops_packed_b *p)
{
        long nb = (p->n + XSMM_NB - 1) / XSMM_NB;
        size_t bytes;
        float *x;

        if (p->x)
                return 0;
        if (p->x_failed || !ops_xsmm_usable() || !p->src)
                return -1;
        bytes = (size_t)nb * (size_t)p->k * XSMM_NB * sizeof(float);
        x = aligned_alloc(64, bytes);
        if (!x) {
                p->x_failed = 1;
                return -1;
        }
        ops_mixed_pack_b(p->src, p->k, p->n, p->transb, p->transb ? p->k : p->n, x);
        p->x_bytes = bytes;
        __atomic_store_n(&p->x, x, __ATOMIC_RELEASE);
        return 0;
}

/* Columns [*c0, *c1) of block blk of the column range [lo, lo + n), which spans blocks
 * first..last. */
static void xsmm_cols(long blk, long first, long last, long lo, long n, long *c0, long *c1)
{
        *c0 = blk == first ? lo : blk * XSMM_NB;
        *c1 = blk == last ? lo + n : (blk + 1) * XSMM_NB;
}

/* The product on the current packed B's libxsmm layout when the call matches it (any
 * column range of B): 0, or -1 for the plain path, before anything is written. */
/* Whether a call computes on packed B p's columns: 0 and *ret_lo, the first of them (a call
 * on any column range of B), or -1. */
static int packed_cols(const struct ops_packed_b *p, enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta,
                       enum CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, float alpha, blasint lda,
                       const float *b, blasint ldb, float beta, blasint ldc, long *ret_lo)
{
        int transb = tb != CblasNoTrans;
        long lo;

        if (!p || order != CblasRowMajor || ta != CblasNoTrans || k != p->k || transb != p->transb ||
            alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || m < 1 || n < 1 || lda < k || ldc < n)
                return -1;
        /* b: the stored B, or a column block of it (transB: rows lo.. of the stored B) */
        if (transb) {
                if (ldb != k || b < p->src || (b - p->src) % k)
                        return -1;
                lo = (long)((b - p->src) / k);
        } else {
                if (ldb != p->n || b < p->src || b - p->src >= p->n)
                        return -1;
                lo = (long)(b - p->src);
        }
        if (lo + n > p->n)
                return -1;
        *ret_lo = lo;
        return 0;
}

/* post: apply the thread's post-op (ops_sgemm_post) to each tile as it is made. */
static int sgemm_xsmm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                      blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
                      const float *b, blasint ldb, float beta, float *c, blasint ldc, int post)
{
        struct ops_packed_b *p = (struct ops_packed_b *)cur_packed;
        long lo;

        if (packed_cols(p, order, ta, tb, m, n, k, alpha, lda, b, ldb, beta, ldc, &lo) < 0)
                return -1;
        const float *x = __atomic_load_n(&p->x, __ATOMIC_ACQUIRE);
        if (!x) { /* the first call makes it */
                spin_lock(&p->mu);
                int ok = xsmm_layout(p) == 0;
                x = p->x;
                spin_unlock(&p->mu);
                if (!ok)
                        return -1;
        }
        /* every kernel first: nothing is written unless all of them exist. A range has at
         * most three block widths: its first block's, whole ones, its last block's. */
        long first = lo / XSMM_NB, last = (lo + n - 1) / XSMM_NB;
        long mb = m < XSMM_MB ? m : XSMM_MB, mr = m % mb;
        long widths[3] = { 0 };
        libxsmm_smmfunction f[3][2] = { { 0 } }; /* [width][partial rows] */
        int nw = 0;
        for (long blk = first; blk <= last; blk++) {
                long c0, c1;
                xsmm_cols(blk, first, last, lo, n, &c0, &c1);
                int w = 0;
                while (w < nw && widths[w] != c1 - c0)
                        w++;
                if (w < nw)
                        continue;
                widths[nw] = c1 - c0;
                for (int r = 0; r < 2; r++) {
                        long rows = r ? mr : mb;
                        if (rows && !(f[nw][r] = xsmm_kernel(widths[nw], rows, k, XSMM_NB, lda, ldc, beta)))
                                return -1;
                }
                nw++;
        }
        for (long blk = first; blk <= last; blk++) {
                long c0, c1;
                xsmm_cols(blk, first, last, lo, n, &c0, &c1);
                int w = 0;
                while (widths[w] != c1 - c0)
                        w++;
                const float *xa = x + (size_t)blk * (size_t)k * XSMM_NB + (size_t)(c0 - blk * XSMM_NB);
                const float *next = blk < last ? x + (size_t)(blk + 1) * (size_t)k * XSMM_NB : xa;
                for (long r0 = 0; r0 < m; r0 += mb) {
                        long rows = m - r0 < mb ? m - r0 : mb;
                        libxsmm_smmfunction fn = f[w][rows == mb ? 0 : 1];
                        const float *ar = a + (size_t)r0 * (size_t)lda;
                        float *cr = c + (size_t)r0 * (size_t)ldc + (size_t)(c0 - lo);
                        /* prefetch: this block again for the next rows, else the next block */
                        fn(xa, ar, cr, r0 + mb < m ? xa : next, ar, cr);
                        if (post)
                                post_apply(cr, ldc, rows, c1 - c0, c0 - lo);
                }
        }
        __atomic_add_fetch(&p->runs, 1, __ATOMIC_RELAXED);
        return 0;
}

static void sgemm_run(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                      blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                      float beta, float *c, blasint ldc);

/* Whether the product runs under OPS_SGEMM_MIXED's runs: a sum of at most one run is a
 * float32 sum anyway, which the float32 paths make. */
static int mixed_runs(long k)
{
        return forced == OPS_SGEMM_MIXED && k > OPS_MIXED_KB;
}

/* The product under OPS_SGEMM_MIXED, on the thread's packed B when the call matches it. */
static void sgemm_mixed(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                        blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                        float beta, float *c, blasint ldc, const struct ops_sgemm_post *post)
{
        const struct ops_packed_b *p = cur_packed;
        const float *x = p ? __atomic_load_n(&p->x, __ATOMIC_ACQUIRE) : NULL;
        long lo = 0;
        int on = x && packed_cols(p, order, ta, tb, m, n, k, alpha, lda, b, ldb, beta, ldc, &lo) == 0;

        if (on)
                __atomic_add_fetch(&((struct ops_packed_b *)p)->runs, 1, __ATOMIC_RELAXED);
        ops_sgemm_mixed(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, on ? x : NULL, lo, post);
}

void ops_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
               blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
               const float *b, blasint ldb, float beta, float *c, blasint ldc)
{
        if (k <= 0) {
                /* no products: C = beta C, which dnnl_sgemm leaves undone (C untouched, NaN
                 * and all, at beta 0); rows of ldc either way, as for any order */
                long rows = order == CblasRowMajor ? m : n, cols = order == CblasRowMajor ? n : m;
                for (long i = 0; i < rows; i++)
                        for (long j = 0; j < cols; j++)
                                c[i * ldc + j] = beta != 0.0f ? beta * c[i * ldc + j] : 0.0f;
                if (post_on && order == CblasRowMajor && m > 0 && n > 0)
                        post_apply(c, ldc, m, n, 0);
                return;
        }
        if (post_on && order == CblasRowMajor) {
                /* the libxsmm paths apply it per tile; the others after the product */
                if (forced == OPS_SGEMM_XSMM_PACKED && cur_packed &&
                    sgemm_xsmm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1) == 0)
                        return;
                if (mixed_runs(k)) {
                        sgemm_mixed(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &cur_post);
                        return;
                }
                sgemm_run(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
                if (m > 0 && n > 0)
                        post_apply(c, ldc, m, n, 0);
                return;
        }
        sgemm_run(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void sgemm_run(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                      blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                      float beta, float *c, blasint ldc)
{
        if (forced == OPS_SGEMM_F64) {
                const struct ops_packed_b *p = cur_packed;
                struct ops_dmat pm = { .blocked = 1 };
                int on = p && p->xd && packed_cols(p, order, ta, tb, m, n, k, alpha, lda, b, ldb, beta, ldc, &pm.lo) == 0;
                if (on) {
                        pm.p = p->xd;
                        __atomic_add_fetch(&((struct ops_packed_b *)p)->runs, 1, __ATOMIC_RELAXED);
                }
                ops_sgemm_f64(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, on ? &pm : NULL);
                return;
        }
        if (mixed_runs(k)) {
                sgemm_mixed(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
                return;
        }
        if (forced == OPS_SGEMM_ONEDNN_PACKED && cur_packed && ops_dnnl_wanted() &&
            sgemm_packed(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0)
                return;
        if (forced == OPS_SGEMM_XSMM_PACKED && cur_packed &&
            sgemm_xsmm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0) == 0)
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

int ops_run_variant(const struct ops_def *def, const struct ops_call *call, int variant,
                    const struct ops_packed_b *packed, const struct ops_packed_conv *pconv, char *err,
                    size_t errlen)
{
        ops_sgemm_force(variant);
        ops_sgemm_packed(packed);
        ops_conv_packed(pconv);
        int rc = ops_run(def, call, err, errlen);
        ops_conv_packed(NULL);
        ops_sgemm_packed(NULL);
        ops_sgemm_force(OPS_SGEMM_AUTO);
        return rc;
}

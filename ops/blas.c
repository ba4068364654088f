/* ops_sgemm: oneDNN or OpenBLAS by size (see blas.h). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "blas.h"

/* Below this many multiply-adds OpenBLAS's lower call overhead wins. */
#define ONEDNN_MIN_MACS 4096.0

static int onednn_wanted(void)
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

const char *const ops_sgemm_variant_names[OPS_SGEMM_VARIANTS] = { "openblas", "onednn" };

static __thread int forced = OPS_SGEMM_AUTO;

void ops_sgemm_force(int variant)
{
        forced = variant >= OPS_SGEMM_OPENBLAS && variant < OPS_SGEMM_VARIANTS ? variant : OPS_SGEMM_AUTO;
}

static int use_onednn(long m, long n, long k)
{
        if (!onednn_wanted())
                return 0;
        if (forced != OPS_SGEMM_AUTO)
                return forced == OPS_SGEMM_ONEDNN;
        return (double)m * (double)n * (double)k >= ONEDNN_MIN_MACS;
}

const char *ops_sgemm_backend(long m, long n, long k)
{
        return use_onednn(m, n, k) ? "onednn" : "openblas";
}

/* oneDNN's Debian build threads with OpenMP, whose team size is a per-thread setting
 * inherited from the initial thread: set it to one in each thread before its first call. */
static void onednn_one_thread(void)
{
        static __thread int done;

        if (!done) {
                omp_set_num_threads(1);
                done = 1;
        }
}

void ops_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
               blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
               const float *b, blasint ldb, float beta, float *c, blasint ldc)
{
        if (use_onednn(m, n, k)) {
                dnnl_status_t st;
                onednn_one_thread();
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

/* Unit tests of the kernel back ends under the operators: vmath (SLEEF, ops/vmath*.c)
 * against libm in double for every function, with special values, every tail length and an
 * output that is the input; ops_sgemm (oneDNN or OpenBLAS, ops/blas.c) against a naive
 * product in double for both back ends' sizes, transposes, alpha and beta, beta 0 over a C
 * full of NaN, and column-major order; that oneDNN never starts threads of its own in
 * the threads that call it (the scheduler's workers); the row kernels' GELU (ops/rows.h)
 * against the erf form in double, in place too. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/blas.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "ops/vmath.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static double sigmoid_ref(double x)
{
        return 1 / (1 + exp(-x));
}

static double softplus_ref(double x)
{
        return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static double mish_ref(double x)
{
        return x * tanh(softplus_ref(x));
}

static const struct {
        enum ops_vm f;
        const char *name;
        double (*ref)(double);
        double lo, hi; /* the range of the random inputs */
} fns[] = {
        { OPS_VM_EXP, "exp", exp, -100, 100 },
        { OPS_VM_LOG, "log", log, 0, 1e6 },
        { OPS_VM_TANH, "tanh", tanh, -12, 12 },
        { OPS_VM_ERF, "erf", erf, -5, 5 },
        { OPS_VM_SIGMOID, "sigmoid", sigmoid_ref, -100, 100 },
        { OPS_VM_SIN, "sin", sin, -50, 50 },
        { OPS_VM_COS, "cos", cos, -50, 50 },
        { OPS_VM_TAN, "tan", tan, -1.5, 1.5 },
        { OPS_VM_ASIN, "asin", asin, -1, 1 },
        { OPS_VM_ACOS, "acos", acos, -1, 1 },
        { OPS_VM_ATAN, "atan", atan, -100, 100 },
        { OPS_VM_ASINH, "asinh", asinh, -1e4, 1e4 },
        { OPS_VM_ACOSH, "acosh", acosh, 1, 1e4 },
        { OPS_VM_ATANH, "atanh", atanh, -0.999, 0.999 },
        { OPS_VM_SOFTPLUS, "softplus", softplus_ref, -100, 100 },
        { OPS_VM_MISH, "mish", mish_ref, -30, 30 },
};

/* Within a few float ulps of the double reference, and the same class (NaN, infinity,
 * zero) where the reference is one. */
static int close_enough(float got, double want)
{
        if (isnan(want))
                return isnan(got);
        if (isinf(want) || fabs(want) > 3.4e38)
                return isinf(got) || fabs(got) > 3.3e38;
        if (fabs(want) < 1e-37)
                return fabs(got) < 1e-36;
        return fabs(got - want) <= 4 * 1.2e-7 * fabs(want) + 1e-30;
}

/* The ISA tables this CPU can run, besides the one ops_vmath_get chose. */
static int runnable(const struct ops_vmath_impl *impl)
{
        if (!impl)
                return 0;
        __builtin_cpu_init();
        if (strcmp(impl->isa, "avx512f") == 0)
                return __builtin_cpu_supports("avx512f");
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

START_TEST(test_vmath_values)
{
        const struct ops_vmath_impl *impls[] = { ops_vmath_avx512, ops_vmath_avx2 };
        static const float special[] = { 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 1e-20f, -1e-20f,
                                         88.5f, -88.5f, 89.0f, -104.0f, INFINITY, -INFINITY,
                                         NAN, 3.0f, 0.625f, -0.625f };
        enum { N = 2000 };
        float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));

        ck_assert_ptr_nonnull(x);
        ck_assert_ptr_nonnull(y);
        srand(7);
        for (size_t t = 0; t < NELEM(impls) * NELEM(fns); t++) {
                size_t f = t % NELEM(fns);
                const struct ops_vmath_impl *impl = impls[t / NELEM(fns)];
                ops_vm_fn fn = runnable(impl) ? impl->fn[fns[f].f] : NULL;
                if (!fn)
                        continue; /* not on this CPU: the generic kernels are tested elsewhere */
                for (int i = 0; i < N; i++)
                        x[i] = i < (int)NELEM(special)
                                       ? special[i]
                                       : (float)(fns[f].lo + (fns[f].hi - fns[f].lo) *
                                                                     (rand() / (double)RAND_MAX));
                fn(y, x, N);
                for (int i = 0; i < N; i++) {
                        double want = fns[f].ref((double)x[i]);
                        ck_assert_msg(close_enough(y[i], want), "%s %s(%.9g) = %.9g, want %.9g",
                                      impl->isa, fns[f].name, x[i], y[i], want);
                }
        }
        free(x);
        free(y);
}
END_TEST

/* Every length up to three vectors, the output after the last element untouched, and in
 * place. */
START_TEST(test_vmath_tails)
{
        ops_vm_fn fn = ops_vmath_get(OPS_VM_EXP);
        float x[50], y[50], z[50];

        if (!fn)
                return;
        for (size_t n = 0; n <= 48; n++) {
                for (int i = 0; i < 50; i++) {
                        x[i] = (float)i / 10 - 2;
                        y[i] = -7.0f;
                        z[i] = x[i];
                }
                fn(y, x, n);
                fn(z, z, n);
                for (size_t i = 0; i < 50; i++) {
                        if (i < n) {
                                ck_assert(close_enough(y[i], exp((double)x[i])));
                                ck_assert(y[i] == z[i]);
                        } else {
                                ck_assert(y[i] == -7.0f);
                                ck_assert(z[i] == x[i]);
                        }
                }
        }
        ck_assert_str_ne(ops_vmath_isa(), "");
}
END_TEST

/* GELU of the erf form over [-12, 12] and special values: within 4e-6 relative of the
 * value in double down to x = -4 sqrt 2, 2e-5 below (where it is under 1e-8; 1e-30
 * absolute where it underflows), in place the same. */
/* y = gelu(x) over -12..12 (and 0, -0, inf, NaN after it) within the kernel's accuracy:
 * 4e-6 relative, 2e-5 in the far negative tail, where erfc is taken through its log. */
static void gelu_check(const char *who, void (*fn)(float *, const float *, int64_t))
{
        enum { N = 24001 };
        static float x[N + 4], y[N + 4];

        for (int i = 0; i < N; i++)
                x[i] = -12.0f + 24.0f * (float)i / (float)(N - 1);
        x[N] = 0.0f;
        x[N + 1] = -0.0f;
        x[N + 2] = INFINITY;
        x[N + 3] = NAN;
        fn(y, x, N + 4);
        for (int i = 0; i < N + 2; i++) {
                double ref = 0.5 * (double)x[i] * erfc(-(double)x[i] / sqrt(2.0));
                double err = fabs((double)y[i] - ref);
                double rel = x[i] >= -4.0f * 1.41421356f ? 4e-6 : 2e-5;
                ck_assert_msg(err <= rel * fabs(ref) + 1e-30, "%s: gelu(%.9g) = %.9g, want %.9g (rel %.3g)",
                              who, (double)x[i], (double)y[i], ref, err / fabs(ref));
        }
        ck_assert_msg(isinf(y[N + 2]) && y[N + 2] > 0, "%s: gelu(inf) = %g", who, (double)y[N + 2]);
        ck_assert_msg(isnan(y[N + 3]), "%s: gelu(NaN) = %g", who, (double)y[N + 3]);
        memcpy(y, x, sizeof(x));
        fn(y, y, 1000);
        float z[1000];
        fn(z, x, 1000);
        ck_assert_msg(memcmp(y, z, sizeof(z)) == 0, "%s: in place differs", who);
}

START_TEST(test_gelu_erf)
{
        gelu_check("ops_gelu_erf", ops_gelu_erf);
}
END_TEST

/* The vector GELU of every ISA table this CPU runs (ops_gelu_erf takes the chosen one). */
static const struct ops_vmath_impl *gelu_impl;

static void gelu_vm(float *y, const float *x, int64_t n)
{
        gelu_impl->fn[OPS_VM_GELU](y, x, (size_t)n);
}

START_TEST(test_vmath_gelu)
{
        const struct ops_vmath_impl *impls[] = { ops_vmath_avx512, ops_vmath_avx2 };

        for (size_t i = 0; i < NELEM(impls); i++) {
                if (!runnable(impls[i]))
                        continue;
                ck_assert_ptr_nonnull(impls[i]->fn[OPS_VM_GELU]);
                gelu_impl = impls[i];
                gelu_check(impls[i]->isa, gelu_vm);
        }
}
END_TEST

START_TEST(test_vmath_bad_id)
{
        ck_assert_ptr_null(ops_vmath_get(OPS_VM_NONE));
        ck_assert_ptr_null(ops_vmath_get(OPS_VM_COUNT));
}
END_TEST

/* op(X)[i][j] of a row-major X with leading dimension ld. */
static double at(const float *x, int trans, long ld, long i, long j)
{
        return trans ? x[j * ld + i] : x[i * ld + j];
}

static void check_sgemm(long m, long n, long k, int ta, int tb, float alpha, float beta,
                        int colmajor)
{
        long lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
        long ra = ta ? k : m, rb = tb ? n : k; /* stored rows of A and B */
        float *a = malloc(sizeof(float) * (size_t)(ra * lda + 1));
        float *b = malloc(sizeof(float) * (size_t)(rb * ldb + 1));
        float *c = malloc(sizeof(float) * (size_t)(m * ldc + 1));
        float *c0 = malloc(sizeof(float) * (size_t)(m * ldc + 1));

        ck_assert(a && b && c && c0);
        for (long i = 0; i < ra * lda; i++)
                a[i] = (float)((i * 37 % 101) - 50) / 50;
        for (long i = 0; i < rb * ldb; i++)
                b[i] = (float)((i * 53 % 97) - 48) / 48;
        for (long i = 0; i < m * ldc; i++)
                c[i] = c0[i] = beta == 0 ? NAN : (float)((i % 7) - 3);
        if (colmajor) /* C^T = op(B)^T op(A)^T, column-major */
                ops_sgemm(CblasColMajor, tb ? CblasTrans : CblasNoTrans,
                          ta ? CblasTrans : CblasNoTrans, (blasint)n, (blasint)m, (blasint)k,
                          alpha, b, (blasint)ldb, a, (blasint)lda, beta, c, (blasint)ldc);
        else
                ops_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                          tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n, (blasint)k,
                          alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
        for (long i = 0; i < m; i++) {
                for (long j = 0; j < ldc; j++) {
                        double want = 0, scale = 1;
                        if (j >= n) { /* padding past the columns: untouched */
                                ck_assert(memcmp(&c[i * ldc + j], &c0[i * ldc + j],
                                                 sizeof(float)) == 0);
                                continue;
                        }
                        for (long p = 0; p < k; p++) {
                                want += at(a, ta, lda, i, p) * at(b, tb, ldb, p, j);
                                scale += fabs(at(a, ta, lda, i, p) * at(b, tb, ldb, p, j));
                        }
                        want *= alpha;
                        if (beta != 0)
                                want += beta * (double)c0[i * ldc + j];
                        ck_assert_msg(fabs(c[i * ldc + j] - want) <= 1e-5 * scale * 4,
                                      "%ldx%ldx%ld ta %d tb %d (%s): C[%ld][%ld] = %g, want %g",
                                      m, n, k, ta, tb, ops_sgemm_backend(m, n, k), i, j,
                                      c[i * ldc + j], want);
                }
        }
        free(a);
        free(b);
        free(c);
        free(c0);
}

START_TEST(test_sgemm)
{
        static const long shapes[][3] = { { 1, 1, 1 }, { 4, 4, 4 }, { 3, 5, 7 },
                                          { 8, 16, 32 }, { 33, 17, 65 }, { 64, 64, 64 },
                                          { 1, 300, 129 } };

        ops_set_threads(1);
        ck_assert_str_eq(ops_sgemm_backend(4, 4, 4), "openblas");
        for (size_t s = 0; s < NELEM(shapes); s++)
                for (int t = 0; t < 4; t++) {
                        check_sgemm(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                                    1.0f, 0.0f, 0);
                        check_sgemm(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                                    -0.5f, 2.0f, 0);
                        check_sgemm(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                                    1.5f, 1.0f, 1);
                }
}
END_TEST

static int count_threads(void)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

struct gemm_thread {
        pthread_barrier_t *done, *go;
};

/* A worker's product, big enough for oneDNN and for threads if it were allowed any; then
 * the thread stays alive until the count is taken. */
static void *gemm_worker(void *arg)
{
        struct gemm_thread *t = arg;
        enum { M = 96, N = 512, K = 512 };
        float *a = calloc(M * K, sizeof(float)), *b = calloc(K * N, sizeof(float));
        float *c = calloc(M * N, sizeof(float));

        for (int r = 0; r < 3; r++)
                ops_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N,
                          0.0f, c, N);
        free(a);
        free(b);
        free(c);
        pthread_barrier_wait(t->done);
        pthread_barrier_wait(t->go);
        return NULL;
}

START_TEST(test_sgemm_threads)
{
        enum { W = 3 };
        pthread_barrier_t done, go;
        struct gemm_thread t = { &done, &go };
        pthread_t th[W];
        int before, during;

        ops_set_threads(1);
        ck_assert_str_eq(ops_sgemm_backend(96, 512, 512), "onednn");
        before = count_threads();
        pthread_barrier_init(&done, NULL, W + 1);
        pthread_barrier_init(&go, NULL, W + 1);
        for (int i = 0; i < W; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, gemm_worker, &t), 0);
        pthread_barrier_wait(&done);
        during = count_threads();
        pthread_barrier_wait(&go);
        for (int i = 0; i < W; i++)
                pthread_join(th[i], NULL);
        pthread_barrier_destroy(&done);
        pthread_barrier_destroy(&go);
        /* the workers themselves and nothing else: no OpenMP team, no OpenBLAS pool */
        ck_assert_int_eq(during, before + W);
}
END_TEST

static Suite *kernels_suite(void)
{
        Suite *s = suite_create("kernels");
        TCase *tc = tcase_create("vmath");

        tcase_add_test(tc, test_vmath_values);
        tcase_add_test(tc, test_vmath_tails);
        tcase_add_test(tc, test_vmath_bad_id);
        tcase_add_test(tc, test_gelu_erf);
        tcase_add_test(tc, test_vmath_gelu);
        suite_add_tcase(s, tc);
        tc = tcase_create("sgemm");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_sgemm);
        tcase_add_test(tc, test_sgemm_threads);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(kernels_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

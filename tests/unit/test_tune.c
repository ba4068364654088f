/* The kernel tuning cache (ops/tune.h): the fastest variant wins and is remembered, the file
 * survives a reopen, malformed and foreign lines are handled, clearing works; and the tuning
 * pass of the graph compiler (GRAPH_COMPILE_TUNE) picks a variant for a MatMul node that the
 * executor then uses, with results equal to the default path. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops/blas.h"
#include "ops/tune.h"

static char dir[64], path[128];
static uint64_t fake_clock(void);

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/npud-tune-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/tuning.cache", dir);
        char err[256];
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
        tune_set_clock(fake_clock);
}

static void teardown(void)
{
        char cmd[128];
        tune_set_clock(NULL);
        tune_open(NULL, NULL, NULL, 0);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* Variant i takes cost[i] microseconds of a fake clock (a timed test would depend on the
 * host's load); a negative cost fails. */
struct fake {
        int cost[4];
        int calls[4];
};

static uint64_t fake_now;

static uint64_t fake_clock(void)
{
        return fake_now;
}

static int fake_run(void *arg, int v)
{
        struct fake *f = arg;
        f->calls[v]++;
        if (f->cost[v] < 0)
                return -1;
        fake_now += (uint64_t)f->cost[v] * 1000;
        return 0;
}

static const char *const names3[] = { "slow", "fast", "broken" };

START_TEST(test_fastest_wins_and_is_remembered)
{
        struct fake f = { .cost = { 3000, 200, -1 } };

        ck_assert_int_eq(tune_lookup("MatMul", "32x64 64x16 |"), -1);
        ck_assert_int_eq(tune_choose("MatMul", "32x64 64x16 |", 3, names3, fake_run, &f), 1);
        ck_assert_int_ge(f.calls[0], TUNE_MIN_REPS);
        ck_assert_int_ge(f.calls[1], TUNE_MIN_REPS);
        ck_assert_int_eq(f.calls[2], 1); /* a failing variant is tried once */
        ck_assert_int_eq(tune_lookup("MatMul", "32x64 64x16 |"), 1);
        /* known now: no measuring */
        memset(f.calls, 0, sizeof(f.calls));
        ck_assert_int_eq(tune_choose("MatMul", "32x64 64x16 |", 3, names3, fake_run, &f), 1);
        ck_assert_int_eq(f.calls[0] + f.calls[1] + f.calls[2], 0);
        /* another shape is another entry */
        ck_assert_int_eq(tune_lookup("MatMul", "32x64 64x17 |"), -1);
        /* every variant failing: no winner, nothing stored */
        struct fake bad = { .cost = { -1, -1 } };
        ck_assert_int_eq(tune_choose("Conv", "x", 2, names3, fake_run, &bad), -1);
        ck_assert_int_eq(tune_lookup("Conv", "x"), -1);
}
END_TEST

/* A burst of host noise (every run from the 20th to the 59th costs 1 ms more) does not
 * decide the choice: measured one after the other, the faster variant's runs (calls 20 to
 * 42) would all fall in it and the slower one win; taking turns, both have quiet runs. */
static int burst_calls;

static int burst_run(void *arg, int v)
{
        int burst = burst_calls >= 20 && burst_calls < 60;

        burst_calls++;
        fake_now += (uint64_t)(((const int *)arg)[v] + (burst ? 1000 : 0)) * 1000;
        return 0;
}

START_TEST(test_noise_burst_falls_on_all)
{
        static const int cost[2] = { 100, 90 };

        burst_calls = 0;
        ck_assert_int_eq(tune_choose("MatMul", "burst", 2, names3, burst_run, (void *)cost), 1);
        ck_assert_int_gt(burst_calls, 20); /* the burst began within the measurement */
}
END_TEST

/* A weighted variant (the packed one: memory of its own) wins only by its margin. */
START_TEST(test_weighted_margin)
{
        static const double w[3] = { 1.0, 1.0, 1.05 };
        struct fake close = { .cost = { 100, 90, 88 } }, clear = { .cost = { 100, 90, 80 } };

        ck_assert_int_eq(tune_choose_weighted("MatMul", "a | packed-b", 3, names3, w, fake_run, &close), 1);
        ck_assert_int_eq(tune_choose_weighted("MatMul", "b | packed-b", 3, names3, w, fake_run, &clear), 2);
        /* unweighted, the fastest */
        struct fake again = { .cost = { 100, 90, 88 } };
        ck_assert_int_eq(tune_choose("MatMul", "c | packed-b", 3, names3, fake_run, &again), 2);
        ck_assert_int_eq(tune_lookup("MatMul", "a | packed-b"), 1);
}
END_TEST

START_TEST(test_file_survives_reopen)
{
        struct fake f = { .cost = { 100, 900 } };
        char err[256];

        ck_assert_int_eq(tune_choose("Gemm", "2x10 10x3 | transB=1", 2, names3, fake_run, &f), 0);
        ck_assert_int_eq(tune_count(), 1);
        /* a restart: the entry comes back from the file, with what was measured */
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(tune_count(), 1);
        ck_assert_int_eq(tune_lookup("Gemm", "2x10 10x3 | transB=1"), 0);
        /* memory only: nothing */
        ck_assert_int_eq(tune_open(NULL, NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(tune_lookup("Gemm", "2x10 10x3 | transB=1"), -1);
}
END_TEST

START_TEST(test_malformed_and_foreign_lines)
{
        FILE *fp = fopen(path, "w");
        char err[256];
        int skipped = -1;

        ck_assert_ptr_nonnull(fp);
        fprintf(fp, "npud-tune 1\n");
        fprintf(fp, "%s\tMatMul\t1x2 2x3 |\t100\t1\topenblas=10\tonednn=5\n", tune_profile());
        fprintf(fp, "cpu=Other;isa=base;openblas=auto\tMatMul\t4x4 4x4 |\t100\t0\topenblas=1\tonednn=9\n");
        fprintf(fp, "%s\tMatMul\tbad winner\t100\t7\topenblas=10\tonednn=5\n", tune_profile());
        fprintf(fp, "%s\tMatMul\tno variants\t100\t0\n", tune_profile());
        fprintf(fp, "%s\tMatMul\tbad ns\t100\t0\topenblas=x\n", tune_profile());
        fprintf(fp, "only one field\n");
        for (int i = 0; i < 3000; i++) /* a line longer than the reader's buffer */
                fputc('z', fp);
        fprintf(fp, "\n%s\tConv\tok after long\t100\t0\ta=1\n", tune_profile());
        fclose(fp);
        ck_assert_int_eq(tune_open(path, &skipped, err, sizeof(err)), 0);
        ck_assert_int_eq(skipped, 5);
        ck_assert_int_eq(tune_count(), 3);
        ck_assert_int_eq(tune_lookup("MatMul", "1x2 2x3 |"), 1);
        ck_assert_int_eq(tune_lookup("MatMul", "4x4 4x4 |"), -1); /* another host's */
        ck_assert_int_eq(tune_lookup("Conv", "ok after long"), 0);
        /* not a cache at all: refused, starts empty */
        fp = fopen(path, "w");
        fprintf(fp, "something else\n");
        fclose(fp);
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), -1);
        ck_assert(strstr(err, "not a tuning cache") != NULL);
        ck_assert_int_eq(tune_count(), 0);
}
END_TEST

/* The profile names this build (the linker's build ID, its first 6 bytes in hex), so that
 * an upgraded npud does not take times measured with another build's kernels; a cache line
 * of another build is foreign. (Debian's toolchain links every executable with a build ID.) */
START_TEST(test_profile_names_the_build)
{
        const char *prof = tune_profile(), *b = strstr(prof, ";build="), *p = b ? b + strlen(";build=") : NULL;
        char other[TUNE_PROFILE_MAX];
        FILE *fp;
        char err[256];
        int skipped = -1;

        ck_assert_msg(p != NULL, "profile '%s' names no build", prof);
        ck_assert_uint_eq(strlen(p), 12);
        ck_assert_uint_eq(strspn(p, "0123456789abcdef"), 12);
        /* the same line from another build is not used */
        snprintf(other, sizeof(other), "%.*s;build=000000000000", (int)(b - prof), prof);
        fp = fopen(path, "w");
        ck_assert_ptr_nonnull(fp);
        fprintf(fp, "npud-tune 1\n%s\tMatMul\t7x7 7x7 |\t100\t1\topenblas=10\tonednn=5\n", other);
        fprintf(fp, "%s\tMatMul\t8x8 8x8 |\t100\t1\topenblas=10\tonednn=5\n", prof);
        fclose(fp);
        ck_assert_int_eq(tune_open(path, &skipped, err, sizeof(err)), 0);
        ck_assert_int_eq(skipped, 0);
        ck_assert_int_eq(tune_lookup("MatMul", "7x7 7x7 |"), -1); /* another build's */
        ck_assert_int_eq(tune_lookup("MatMul", "8x8 8x8 |"), 1);
}
END_TEST

START_TEST(test_clear)
{
        struct fake f = { .cost = { 10, 20 } };
        char err[256];

        tune_choose("MatMul", "a", 2, names3, fake_run, &f);
        tune_choose("MatMul", "b", 2, names3, fake_run, &f);
        tune_choose("Conv", "c", 2, names3, fake_run, &f);
        ck_assert_int_eq(tune_count(), 3);
        ck_assert_int_eq(tune_clear("MatMul"), 2);
        ck_assert_int_eq(tune_lookup("MatMul", "a"), -1);
        ck_assert_int_ge(tune_lookup("Conv", "c"), 0);
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0); /* the file agrees */
        ck_assert_int_eq(tune_count(), 1);
        ck_assert_int_eq(tune_clear(NULL), 1);
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(tune_count(), 0);
}
END_TEST

/* The sgemm variants compute the same product (tuning only picks the faster). */
START_TEST(test_sgemm_variants_agree)
{
        enum { M = 33, N = 47, K = 65 };
        static float a[M * K], b[K * N], c0[M * N], c1[M * N];

        for (int i = 0; i < M * K; i++)
                a[i] = (float)(i % 13 - 6) * 0.25f;
        for (int i = 0; i < K * N; i++)
                b[i] = (float)(i % 7 - 3) * 0.5f;
        ops_sgemm_force(OPS_SGEMM_OPENBLAS);
        ops_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c0, N);
        ops_sgemm_force(OPS_SGEMM_ONEDNN);
        ops_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c1, N);
        ops_sgemm_force(OPS_SGEMM_AUTO);
        for (int i = 0; i < M * N; i++)
                ck_assert_float_eq_tol(c0[i], c1[i], 1e-3f);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("tune");
        TCase *tc = tcase_create("cache");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_fastest_wins_and_is_remembered);
        tcase_add_test(tc, test_noise_burst_falls_on_all);
        tcase_add_test(tc, test_weighted_margin);
        tcase_add_test(tc, test_file_survives_reopen);
        tcase_add_test(tc, test_malformed_and_foreign_lines);
        tcase_add_test(tc, test_profile_names_the_build);
        tcase_add_test(tc, test_clear);
        tcase_add_test(tc, test_sgemm_variants_agree);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

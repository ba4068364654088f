/* The random operators (ops/random.c) and Dropout in training mode: dtypes and shapes,
 * the same numbers for the same seed and others for another seed or none, and the
 * statistics of a large draw (mean and variance of RandomNormal, bounds and moments of
 * RandomUniform, Bernoulli's and Dropout's rates, Multinomial's class frequencies) within
 * bounds many standard errors wide, so that they hold for any seed. */
#include "ops-test-util.h"

enum { N = 100000 };

static void moments(const struct ops_tensor *t, double *mean, double *var, double *lo,
                    double *hi)
{
        int64_t n = numel(t);
        double s = 0, s2 = 0;

        *lo = INFINITY;
        *hi = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
                double v = get(t->dtype, t->data, i);

                s += v;
                s2 += v * v;
                *lo = v < *lo ? v : *lo;
                *hi = v > *hi ? v : *hi;
        }
        *mean = s / (double)n;
        *var = s2 / (double)n - *mean * *mean;
}

static struct ops_call gen_call(double seed)
{
        struct ops_call c;

        memset(&c, 0, sizeof(c));
        c.nout = 1;
        if (seed >= 0)
                attr_float(&c, "seed", seed);
        return c;
}

START_TEST(test_random_normal)
{
        static const int64_t shape[] = { 100, 1000 };
        struct ops_call c = gen_call(3), d;
        double mean, var, lo, hi;

        attr_ints(&c, "shape", 2, shape);
        attr_float(&c, "mean", 2.0);
        attr_float(&c, "scale", 3.0);
        d = c;
        run_ok("RandomNormal", 17, &c);
        ck_assert_int_eq(c.out[0].dtype, F32);
        assert_shape(&c.out[0], 2, shape);
        moments(&c.out[0], &mean, &var, &lo, &hi);
        /* standard error of the mean 3/sqrt(1e5) ~ 0.0095, of the variance ~ 0.04 */
        ck_assert_msg(fabs(mean - 2.0) < 0.06, "mean %g", mean);
        ck_assert_msg(fabs(var - 9.0) < 0.25, "variance %g", var);
        ck_assert_msg(lo < -7 && hi > 11, "range [%g, %g]", lo, hi);
        /* the same seed, the same numbers */
        run_ok("RandomNormal", 17, &d);
        ck_assert_int_eq(memcmp(c.out[0].data, d.out[0].data, N * sizeof(float)), 0);
        free_outs(&d);
        /* another seed, other numbers; float64 on request */
        d = gen_call(4);
        attr_ints(&d, "shape", 2, shape);
        attr_int(&d, "dtype", F64);
        run_ok("RandomNormal", 17, &d);
        ck_assert_int_eq(d.out[0].dtype, F64);
        ck_assert_float_ne(((float *)c.out[0].data)[0], (float)((double *)d.out[0].data)[0]);
        moments(&d.out[0], &mean, &var, &lo, &hi);
        ck_assert_msg(fabs(mean) < 0.02 && fabs(var - 1) < 0.03, "%g %g", mean, var);
        free_outs(&c);
        free_outs(&d);
        /* no seed: two runs differ */
        c = gen_call(-1);
        attr_ints(&c, "shape", 2, shape);
        d = c;
        run_ok("RandomNormal", 17, &c);
        run_ok("RandomNormal", 17, &d);
        ck_assert_int_ne(memcmp(c.out[0].data, d.out[0].data, N * sizeof(float)), 0);
        free_outs(&c);
        free_outs(&d);
        /* bad attributes */
        c = gen_call(1);
        expect_fail("RandomNormal", 17, &c, "attribute 'shape' is required");
        c = gen_call(1);
        attr_ints(&c, "shape", 1, (const int64_t[]){ -2 });
        expect_fail("RandomNormal", 17, &c, "negative extent -2");
        c = gen_call(1);
        attr_ints(&c, "shape", 1, (const int64_t[]){ 2 });
        attr_int(&c, "dtype", I32);
        expect_fail("RandomNormal", 17, &c, "unsupported dtype 6");
}
END_TEST

START_TEST(test_random_uniform)
{
        static const int64_t shape[] = { N };
        struct ops_call c = gen_call(0.5), d;
        double mean, var, lo, hi;
        float x[6] = { 0 };

        attr_ints(&c, "shape", 1, shape);
        attr_float(&c, "low", -1.0);
        attr_float(&c, "high", 3.0);
        d = c;
        run_ok("RandomUniform", 17, &c);
        moments(&c.out[0], &mean, &var, &lo, &hi);
        ck_assert_msg(lo >= -1 && hi < 3 && lo < -0.99 && hi > 2.99, "range [%g, %g]", lo, hi);
        /* mean 1 (se 0.0037), variance 16/12 */
        ck_assert_msg(fabs(mean - 1) < 0.02, "mean %g", mean);
        ck_assert_msg(fabs(var - 16.0 / 12) < 0.03, "variance %g", var);
        run_ok("RandomUniform", 17, &d);
        ck_assert_int_eq(memcmp(c.out[0].data, d.out[0].data, N * sizeof(float)), 0);
        free_outs(&c);
        free_outs(&d);
        /* Like: the input's shape and dtype, or the dtype attribute */
        c = gen_call(7);
        c.nin = 1;
        c.in[0] = tensor(F16, x, SHP(2, 3));
        run_ok("RandomUniformLike", 17, &c);
        ck_assert_int_eq(c.out[0].dtype, F16);
        assert_shape(&c.out[0], 2, (const int64_t[]){ 2, 3 });
        for (int i = 0; i < 6; i++) {
                double v = get(F16, c.out[0].data, i);

                ck_assert(v >= 0 && v <= 1);
        }
        free_outs(&c);
        c = gen_call(7);
        c.nin = 1;
        c.in[0] = tensor(I32, x, SHP(3));
        expect_fail("RandomNormalLike", 17, &c, "input 0 is int32, so attribute 'dtype' must");
        attr_int(&c, "dtype", F64);
        run_ok("RandomNormalLike", 17, &c);
        ck_assert_int_eq(c.out[0].dtype, F64);
        free_outs(&c);
        c = gen_call(1);
        attr_ints(&c, "shape", 1, shape);
        attr_float(&c, "low", 2.0);
        attr_float(&c, "high", 1.0);
        expect_fail("RandomUniform", 17, &c, "do not make a range");
}
END_TEST

START_TEST(test_bernoulli)
{
        float *p = malloc(N * sizeof(float));
        struct ops_call c = gen_call(9), d;
        int64_t ones = 0, i;

        for (i = 0; i < N; i++)
                p[i] = i % 2 ? 0.25f : (i % 4 ? 1.0f : 0.0f);
        c.nin = 1;
        c.in[0] = tensor(F32, p, SHP(N));
        d = c;
        run_ok("Bernoulli", 15, &c);
        ck_assert_int_eq(c.out[0].dtype, F32);
        for (i = 0; i < N; i++) {
                double v = get(F32, c.out[0].data, i);

                ck_assert(v == 0 || v == 1);
                if (i % 2 == 0)
                        ck_assert_msg(v == p[i], "[%lld] p=%g gave %g", (long long)i, p[i], v);
                else
                        ones += v == 1;
        }
        /* half the elements at 0.25: 12500 expected, sd ~ 97 */
        ck_assert_msg(llabs(ones - N / 8) < 600, "%lld ones", (long long)ones);
        run_ok("Bernoulli", 15, &d);
        ck_assert_int_eq(memcmp(c.out[0].data, d.out[0].data, N * sizeof(float)), 0);
        free_outs(&c);
        free_outs(&d);
        attr_int(&c, "dtype", BOOL);
        run_ok("Bernoulli", 15, &c);
        ck_assert_int_eq(c.out[0].dtype, BOOL);
        free_outs(&c);
        c.in[0].dtype = I32;
        expect_fail("Bernoulli", 15, &c, "input 0");
        free(p);
}
END_TEST

START_TEST(test_multinomial)
{
        /* log-probabilities of 0.1, 0.2, 0.7 (unnormalized: shifted by 5), and a row with an
         * impossible class */
        float x[6] = { logf(0.1f) + 5, logf(0.2f) + 5, logf(0.7f) + 5, 0, -INFINITY, 0 };
        struct ops_call c = gen_call(11), d;
        int64_t count[2][3] = { { 0 } };

        c.nin = 1;
        c.in[0] = tensor(F32, x, SHP(2, 3));
        attr_int(&c, "sample_size", N);
        d = c;
        run_ok("Multinomial", 7, &c);
        ck_assert_int_eq(c.out[0].dtype, I32);
        assert_shape(&c.out[0], 2, (const int64_t[]){ 2, N });
        for (int b = 0; b < 2; b++)
                for (int j = 0; j < N; j++) {
                        int32_t k = ((int32_t *)c.out[0].data)[b * N + j];

                        ck_assert(k >= 0 && k < 3);
                        count[b][k]++;
                }
        /* sd of a class count at most sqrt(N / 4) ~ 158 */
        ck_assert_msg(llabs(count[0][0] - N / 10) < 800, "%lld", (long long)count[0][0]);
        ck_assert_msg(llabs(count[0][1] - N / 5) < 800, "%lld", (long long)count[0][1]);
        ck_assert_msg(llabs(count[0][2] - 7 * N / 10) < 800, "%lld", (long long)count[0][2]);
        ck_assert_int_eq(count[1][1], 0);
        ck_assert_msg(llabs(count[1][0] - N / 2) < 800, "%lld", (long long)count[1][0]);
        run_ok("Multinomial", 7, &d);
        ck_assert_int_eq(memcmp(c.out[0].data, d.out[0].data, 2 * N * sizeof(int32_t)), 0);
        free_outs(&c);
        free_outs(&d);
        attr_int(&c, "dtype", I64);
        run_ok("Multinomial", 7, &c);
        ck_assert_int_eq(c.out[0].dtype, I64);
        free_outs(&c);
        c.in[0] = tensor(F32, x, SHP(6));
        expect_fail("Multinomial", 7, &c, "rank 1, 2 needed");
        c = gen_call(1);
        c.nin = 1;
        c.in[0] = tensor(F32, x, SHP(2, 3));
        attr_int(&c, "sample_size", 0);
        expect_fail("Multinomial", 7, &c, "sample_size 0 < 1");
}
END_TEST

/* Dropout with training_mode: a fraction ratio of zeros, the rest scaled by 1/(1-ratio),
 * the mask agreeing, reproducible with the seed. */
START_TEST(test_dropout_training)
{
        float *x = malloc(N * sizeof(float)), ratio = 0.3f;
        uint8_t train = 1;
        struct ops_call c, d;
        int64_t zeros = 0, i;

        for (i = 0; i < N; i++)
                x[i] = 1.0f + (float)(i % 7);
        memset(&c, 0, sizeof(c));
        c.nin = 3;
        c.nout = 2;
        c.in[0] = tensor(F32, x, SHP(N));
        c.in[1] = tensor(F32, &ratio, 0, NULL);
        c.in[2] = tensor(BOOL, &train, 0, NULL);
        attr_int(&c, "seed", 5);
        d = c;
        run_ok("Dropout", 13, &c);
        ck_assert_int_eq(c.out[1].dtype, BOOL);
        for (i = 0; i < N; i++) {
                float y = ((float *)c.out[0].data)[i];
                uint8_t m = ((uint8_t *)c.out[1].data)[i];

                if (m)
                        ck_assert_float_eq_tol(y, x[i] / 0.7f, 1e-5);
                else
                        ck_assert_float_eq(y, 0);
                zeros += !m;
        }
        /* 30000 expected, sd ~ 145 */
        ck_assert_msg(llabs(zeros - 3 * N / 10) < 800, "%lld dropped", (long long)zeros);
        run_ok("Dropout", 13, &d);
        ck_assert_int_eq(memcmp(c.out[0].data, d.out[0].data, N * sizeof(float)), 0);
        free_outs(&c);
        free_outs(&d);
        free(x);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("ops_random");
        TCase *tc = tcase_create("ops_random");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_random_normal);
        tcase_add_test(tc, test_random_uniform);
        tcase_add_test(tc, test_bernoulli);
        tcase_add_test(tc, test_multinomial);
        tcase_add_test(tc, test_dropout_training);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

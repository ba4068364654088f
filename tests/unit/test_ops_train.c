/* Unit tests of the ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum) and of
 * TfIdfVectorizer: values against the ONNX reference formulas worked by hand, the domain
 * scoping of the registry, and the rejection of malformed calls with messages naming the op. */
#include "ops-test-util.h"

#define TRAIN "ai.onnx.preview.training"

/* infer, allocate, check, run through a definition looked up in a domain */
static int run_dom(const char *domain, const char *op, struct ops_call *c, char *err,
                   size_t errlen)
{
        const struct ops_def *d = ops_lookup_onnx(domain, op, domain ? 1 : 18);

        ck_assert_msg(d != NULL, "%s not registered in %s", op, domain ? domain : "ai.onnx");
        return run_def(d, op, c, err, errlen);
}

static void expect_err(const char *domain, const char *op, struct ops_call *c, const char *want)
{
        char err[256];
        int rc = run_dom(domain, op, c, err, sizeof(err));

        free_outs(c);
        ck_assert_msg(rc == -EINVAL, "%s: returned %d (\"%s\"), wanted -EINVAL", op, rc, err);
        ck_assert_msg(strncmp(err, op, strlen(op)) == 0, "message \"%s\" does not name %s", err, op);
        ck_assert_msg(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

static float r_val = 0.1f;
static int64_t t_val = 0;

/* R, T, then the given tensors, all float32 [2] */
static struct ops_call opt_call(int ntensors, float (*v)[2], int nout)
{
        struct ops_tensor in[OPS_MAX_INPUTS];
        int i;

        in[0] = tensor(F32, &r_val, 0, NULL);
        in[1] = tensor(I64, &t_val, 0, NULL);
        for (i = 0; i < ntensors; i++)
                in[2 + i] = tensor(F32, v[i], SHP(2));
        struct ops_call c = call_in(2 + ntensors, in);
        c.nout = nout;
        return c;
}

static void near(float got, double want)
{
        ck_assert_msg(fabs(got - want) <= 1e-6 + 1e-5 * fabs(want), "%.9g, wanted %.9g", got,
                      want);
}

START_TEST(test_domain_scoped)
{
        ck_assert_ptr_nonnull(ops_lookup_onnx(TRAIN, "Adagrad", 1));
        ck_assert_ptr_nonnull(ops_lookup_onnx(TRAIN, "Adam", 1));
        ck_assert_ptr_nonnull(ops_lookup_onnx(TRAIN, "Momentum", 1));
        /* not in the default domain, and the training domain holds nothing else */
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "Adam", 18));
        ck_assert_ptr_null(ops_lookup("Momentum"));
        ck_assert_ptr_null(ops_lookup_onnx(TRAIN, "Add", 1));
        ck_assert_ptr_nonnull(ops_lookup_onnx(NULL, "TfIdfVectorizer", 9));
}
END_TEST

START_TEST(test_adagrad)
{
        /* X, G, H */
        float v[3][2] = { { 1.0f, 2.0f }, { -1.0f, 0.5f }, { 2.0f, 0.0f } };
        struct ops_call c = opt_call(3, v, 2);
        char err[256];
        int i;

        t_val = 3;
        attr_float(&c, "decay_factor", 0.1);
        attr_float(&c, "epsilon", 1e-5);
        attr_float(&c, "norm_coefficient", 0.001);
        ck_assert_int_eq(run_dom(TRAIN, "Adagrad", &c, err, sizeof(err)), 0);
        for (i = 0; i < 2; i++) {
                double r = 0.1f / (1 + 3 * 0.1);
                double g = 0.001 * v[0][i] + v[1][i];
                double h = v[2][i] + g * g;

                near(((float *)c.out[0].data)[i], v[0][i] - r * g / (sqrt(h) + 1e-5));
                near(((float *)c.out[1].data)[i], h);
        }
        free_outs(&c);
        t_val = 0;
}
END_TEST

START_TEST(test_adam)
{
        /* X, G, V, H */
        float v[4][2] = { { 1.2f, 2.8f }, { -0.94f, -2.5f }, { 1.7f, 3.6f }, { 0.1f, 0.1f } };
        struct ops_call c = opt_call(4, v, 3);
        char err[256];
        int i;

        t_val = 2;
        attr_float(&c, "alpha", 0.95);
        attr_float(&c, "beta", 0.1);
        attr_float(&c, "epsilon", 1e-7);
        attr_float(&c, "norm_coefficient", 0.001);
        attr_float(&c, "norm_coefficient_post", 0.01);
        ck_assert_int_eq(run_dom(TRAIN, "Adam", &c, err, sizeof(err)), 0);
        for (i = 0; i < 2; i++) {
                double g = 0.001 * v[0][i] + v[1][i];
                double vn = 0.95 * v[2][i] + 0.05 * g;
                double hn = 0.1 * v[3][i] + 0.9 * g * g;
                double r = 0.1f * sqrt(1 - 0.1 * 0.1) / (1 - 0.95 * 0.95);
                double x = (1 - 0.01) * (v[0][i] - r * vn / (sqrt(hn) + 1e-7));

                near(((float *)c.out[0].data)[i], x);
                near(((float *)c.out[1].data)[i], vn);
                near(((float *)c.out[2].data)[i], hn);
        }
        free_outs(&c);
        t_val = 0;
}
END_TEST

START_TEST(test_momentum_modes)
{
        /* X1, X2, G1, G2, V1, V2: two tensors at once */
        float v[6][2] = { { 1, 2 }, { 3, 4 }, { -1, 2 }, { 0.5f, 1 }, { 0.25f, 0 }, { 1, 1 } };
        const char *modes[] = { "standard", "nesterov" };
        int m, i, k;

        for (m = 0; m < 2; m++) {
                struct ops_call c = opt_call(6, v, 4);
                char err[256];

                t_val = m; /* T = 0: beta is not applied on the first step */
                attr_float(&c, "alpha", 0.9);
                attr_float(&c, "beta", 0.5);
                attr_str(&c, "mode", modes[m]);
                attr_float(&c, "norm_coefficient", 0.01);
                ck_assert_int_eq(run_dom(TRAIN, "Momentum", &c, err, sizeof(err)), 0);
                for (k = 0; k < 2; k++) {
                        for (i = 0; i < 2; i++) {
                                double g = 0.01 * v[k][i] + v[2 + k][i];
                                double vn = 0.9 * v[4 + k][i] + (m ? 0.5 : 1.0) * g;
                                double x = m ? v[k][i] - 0.1f * (g + 0.9 * vn)
                                             : v[k][i] - 0.1f * vn;

                                near(((float *)c.out[k].data)[i], x);
                                near(((float *)c.out[2 + k].data)[i], vn);
                        }
                }
                free_outs(&c);
        }
        t_val = 0;
}
END_TEST

START_TEST(test_train_reject)
{
        float v[4][2] = { { 0 } };
        int64_t dims3[] = { 3 };
        struct ops_call c;

        /* inputs not a multiple of the per-tensor count */
        c = opt_call(4, v, 2);
        expect_err(TRAIN, "Adagrad", &c, "inputs");
        /* outputs not matching */
        c = opt_call(3, v, 1);
        expect_err(TRAIN, "Adagrad", &c, "outputs");
        /* G of another shape */
        c = opt_call(3, v, 2);
        c.in[3].dims[0] = dims3[0];
        expect_err(TRAIN, "Adagrad", &c, "shape");
        /* T of the wrong dtype */
        c = opt_call(3, v, 2);
        c.in[1].dtype = I32;
        expect_err(TRAIN, "Adagrad", &c, "T must be");
        /* integer X */
        c = opt_call(3, v, 2);
        c.in[2].dtype = c.in[3].dtype = c.in[4].dtype = I32;
        expect_err(TRAIN, "Adagrad", &c, "float32 or float64");
        /* Momentum without its required attributes or with an unknown mode */
        c = opt_call(3, v, 2);
        expect_err(TRAIN, "Momentum", &c, "mode");
        c = opt_call(3, v, 2);
        attr_str(&c, "mode", "heavy");
        attr_float(&c, "alpha", 1);
        attr_float(&c, "beta", 1);
        attr_float(&c, "norm_coefficient", 0);
        expect_err(TRAIN, "Momentum", &c, "mode");
        c = opt_call(3, v, 2);
        attr_str(&c, "mode", "standard");
        expect_err(TRAIN, "Momentum", &c, "required");
        /* Adam with more tensors than the outputs a call can hold */
        {
                float w[12][2] = { { 0 } };

                c = opt_call(12, w, 8);
                expect_err(TRAIN, "Adam", &c, "outputs");
        }
}
END_TEST

/* ---------------------------------------------------------------- TfIdfVectorizer */

static struct ops_call tfidf_call(struct ops_tensor *x, int64_t minn, int64_t maxn,
                                  int64_t skip, const char *mode)
{
        struct ops_call c = call_in(1, x);

        attr_int(&c, "min_gram_length", minn);
        attr_int(&c, "max_gram_length", maxn);
        attr_int(&c, "max_skip_count", skip);
        attr_str(&c, "mode", mode);
        return c;
}

/* pool: unigrams 2 3 5 4, bigrams (5,6) (7,8) (6,7); indexes 0..6 */
static const int64_t pool[] = { 2, 3, 5, 4, 5, 6, 7, 8, 6, 7 };
static const int64_t counts[] = { 0, 4 };
static const int64_t idx[] = { 0, 1, 2, 3, 4, 5, 6 };

static void tfidf_pool(struct ops_call *c)
{
        attr_ints(c, "pool_int64s", NELEM(pool), pool);
        attr_ints(c, "ngram_counts", NELEM(counts), counts);
        attr_ints(c, "ngram_indexes", NELEM(idx), idx);
}

START_TEST(test_tfidf_counts)
{
        /* the ONNX example row: 1 1 3 3 3 7 8 6 7 5 6 8 */
        int32_t x32[] = { 1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8 };
        int64_t x64[24];
        struct ops_tensor x;
        struct ops_call c;
        char err[256];
        int i;

        /* uni- and bigrams, skips up to 5 (onnx: uniandbigrams_skip5) */
        x = tensor(I32, x32, SHP(12));
        c = tfidf_call(&x, 1, 2, 5, "TF");
        tfidf_pool(&c);
        ck_assert_int_eq(run_dom(NULL, "TfIdfVectorizer", &c, err, sizeof(err)), 0);
        ck_assert_int_eq(c.out[0].dtype, F32);
        ck_assert_int_eq(c.out[0].ndim, 1);
        ck_assert_int_eq(c.out[0].dims[0], 7);
        {
                const float want[] = { 0, 3, 1, 0, 1, 3, 1 };

                for (i = 0; i < 7; i++)
                        near(((float *)c.out[0].data)[i], want[i]);
        }
        free_outs(&c);

        /* bigrams only, no skip, as a [2, 6] batch of int64 */
        for (i = 0; i < 12; i++)
                x64[i] = x32[i];
        x = tensor(I64, x64, SHP(2, 6));
        c = tfidf_call(&x, 2, 2, 0, "TF");
        tfidf_pool(&c);
        ck_assert_int_eq(run_dom(NULL, "TfIdfVectorizer", &c, err, sizeof(err)), 0);
        ck_assert_int_eq(c.out[0].ndim, 2);
        ck_assert_int_eq(c.out[0].dims[0], 2);
        ck_assert_int_eq(c.out[0].dims[1], 7);
        {
                /* row 0: 1 1 3 3 3 7; row 1: 8 6 7 5 6 8 -> (6,7) once, (5,6) once */
                const float want[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1 };

                for (i = 0; i < 14; i++)
                        near(((float *)c.out[0].data)[i], want[i]);
        }
        free_outs(&c);

        /* IDF and TFIDF weights */
        {
                const float wts[] = { 1, 2, 3, 4, 5, 6, 7 };
                const float want_idf[] = { 0, 2, 3, 0, 5, 6, 7 };
                const float want_tfidf[] = { 0, 6, 3, 0, 5, 18, 7 };
                const char *modes[] = { "IDF", "TFIDF" };
                int m;

                for (m = 0; m < 2; m++) {
                        struct ops_attr *a;

                        x = tensor(I32, x32, SHP(12));
                        c = tfidf_call(&x, 1, 2, 5, modes[m]);
                        tfidf_pool(&c);
                        a = attr_new(&c, "weights", OPS_ATTR_FLOATS);
                        a->n = NELEM(wts);
                        a->floats = wts;
                        ck_assert_int_eq(run_dom(NULL, "TfIdfVectorizer", &c, err, sizeof(err)), 0);
                        for (i = 0; i < 7; i++)
                                near(((float *)c.out[0].data)[i], m ? want_tfidf[i] : want_idf[i]);
                        free_outs(&c);
                }
        }
}
END_TEST

START_TEST(test_tfidf_reject)
{
        int32_t x32[4] = { 1, 2, 3, 4 };
        float xf[4] = { 0 };
        struct ops_tensor x = tensor(I32, x32, SHP(4));
        struct ops_call c;
        static const int64_t bad_counts[] = { 0, 3 }; /* 7 items left: not whole bigrams */
        static const int64_t big_idx[] = { 0, 1, 2, 3, 4, 5, (int64_t)1 << 40 };

        c = tfidf_call(&x, 0, 2, 0, "TF");
        tfidf_pool(&c);
        expect_err(NULL, "TfIdfVectorizer", &c, "gram lengths");
        c = tfidf_call(&x, 1, 2, -1, "TF");
        tfidf_pool(&c);
        expect_err(NULL, "TfIdfVectorizer", &c, "max_skip_count");
        c = tfidf_call(&x, 1, 2, 0, "BM25");
        tfidf_pool(&c);
        expect_err(NULL, "TfIdfVectorizer", &c, "mode");
        c = tfidf_call(&x, 1, 2, 0, "TF");
        attr_ints(&c, "pool_int64s", NELEM(pool), pool);
        attr_ints(&c, "ngram_counts", NELEM(bad_counts), bad_counts);
        attr_ints(&c, "ngram_indexes", NELEM(idx), idx);
        expect_err(NULL, "TfIdfVectorizer", &c, "ngram_counts[1]");
        c = tfidf_call(&x, 1, 2, 0, "TF");
        attr_ints(&c, "pool_int64s", NELEM(pool), pool);
        attr_ints(&c, "ngram_counts", NELEM(counts), counts);
        attr_ints(&c, "ngram_indexes", 3, idx);
        expect_err(NULL, "TfIdfVectorizer", &c, "ngram_indexes has 3");
        c = tfidf_call(&x, 1, 2, 0, "TF");
        attr_ints(&c, "pool_int64s", NELEM(pool), pool);
        attr_ints(&c, "ngram_counts", NELEM(counts), counts);
        attr_ints(&c, "ngram_indexes", NELEM(big_idx), big_idx);
        expect_err(NULL, "TfIdfVectorizer", &c, "out of range");
        c = tfidf_call(&x, 1, 2, 0, "TF");
        tfidf_pool(&c);
        attr_new(&c, "pool_strings", OPS_ATTR_STRINGS);
        expect_err(NULL, "TfIdfVectorizer", &c, "string");
        c = tfidf_call(&x, 1, 2, 0, "TF");
        tfidf_pool(&c);
        {
                const float w[2] = { 1, 1 };
                struct ops_attr *a = attr_new(&c, "weights", OPS_ATTR_FLOATS);

                a->n = 2;
                a->floats = w;
                expect_err(NULL, "TfIdfVectorizer", &c, "weights");
        }
        x = tensor(F32, xf, SHP(4));
        c = tfidf_call(&x, 1, 2, 0, "TF");
        tfidf_pool(&c);
        expect_err(NULL, "TfIdfVectorizer", &c, "");
        x = tensor(I32, x32, SHP(1, 2, 2));
        c = tfidf_call(&x, 1, 2, 0, "TF");
        tfidf_pool(&c);
        expect_err(NULL, "TfIdfVectorizer", &c, "rank 3");
}
END_TEST

/* a huge max_skip_count or gram length costs no more than the row allows */
START_TEST(test_tfidf_huge_attrs)
{
        int64_t xv[3] = { 5, 6, 7 };
        struct ops_tensor x = tensor(I64, xv, SHP(3));
        struct ops_call c = tfidf_call(&x, 1, INT64_MAX / 2, INT64_MAX - 1, "TF");
        char err[256];

        tfidf_pool(&c);
        ck_assert_int_eq(run_dom(NULL, "TfIdfVectorizer", &c, err, sizeof(err)), 0);
        /* 5 6 7: unigram 5 once; bigrams (5,6) and (6,7) at skip 0, (5,7) never in the pool */
        near(((float *)c.out[0].data)[2], 1);
        near(((float *)c.out[0].data)[4], 1);
        near(((float *)c.out[0].data)[6], 1);
        free_outs(&c);
}
END_TEST


static Suite *train_suite(void)
{
        Suite *s = suite_create("ops-train");
        TCase *tc = tcase_create("optimizers");

        tcase_add_test(tc, test_domain_scoped);
        tcase_add_test(tc, test_adagrad);
        tcase_add_test(tc, test_adam);
        tcase_add_test(tc, test_momentum_modes);
        tcase_add_test(tc, test_train_reject);
        suite_add_tcase(s, tc);
        tc = tcase_create("tfidf");
        tcase_add_test(tc, test_tfidf_counts);
        tcase_add_test(tc, test_tfidf_reject);
        tcase_add_test(tc, test_tfidf_huge_attrs);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(train_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The signal operators (ops/spectral.c): the three windows against their formulas
 * (periodic and symmetric), DFT against a direct complex sum for power-of-two and other
 * lengths (real and complex input, an inner axis, dft_length padding and cutting, onesided,
 * the inverse undoing the forward), STFT's frames against DFTs of windowed slices, and
 * MelWeightMatrix's triangles; bad input gets a message naming the operator. */
#include "ops-test-util.h"

static struct ops_call one_in(int dtype, void *data, int ndim, const int64_t *dims)
{
        struct ops_tensor t = tensor(dtype, data, ndim, dims);

        return call_in(1, &t);
}

START_TEST(test_windows)
{
        static const char *const ops[] = { "HannWindow", "HammingWindow", "BlackmanWindow" };
        int64_t size = 10;

        for (int w = 0; w < 3; w++)
                for (int periodic = 0; periodic <= 1; periodic++) {
                        struct ops_call c = one_in(I64, &size, 0, NULL);
                        double want[10], den = periodic ? 10 : 9;

                        attr_int(&c, "periodic", periodic);
                        if (w == 2)
                                attr_int(&c, "output_datatype", F64);
                        for (int n = 0; n < 10; n++) {
                                double x = 2 * M_PI * n / den;

                                want[n] = w == 0 ? 0.5 - 0.5 * cos(x)
                                        : w == 1 ? 25.0 / 46 - 21.0 / 46 * cos(x)
                                                 : 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
                        }
                        run_ok(ops[w], 17, &c);
                        ck_assert_int_eq(c.out[0].dtype, w == 2 ? F64 : F32);
                        assert_shape(&c.out[0], 1, (const int64_t[]){ 10 });
                        assert_vals(&c.out[0], want, 10, 1e-6);
                        free_outs(&c);
                }
        struct ops_call c = one_in(I64, &size, 0, NULL);

        size = -1;
        expect_fail("HannWindow", 17, &c, "size -1 is negative");
        c = one_in(F32, &size, 0, NULL);
        expect_fail("HannWindow", 17, &c, "input 0");
}
END_TEST

/* Direct sum: x [a][2] complex -> y [n][2], x zero-padded or cut to n. */
static void ref_dft(const double *x, int64_t a, int64_t n, int inverse, double *y)
{
        for (int64_t k = 0; k < n; k++) {
                long double re = 0, im = 0;

                for (int64_t j = 0; j < n && j < a; j++) {
                        long double ang = (inverse ? 2 : -2) * M_PI * (long double)(j * k % n) / n;

                        re += x[2 * j] * cosl(ang) - x[2 * j + 1] * sinl(ang);
                        im += x[2 * j] * sinl(ang) + x[2 * j + 1] * cosl(ang);
                }
                y[2 * k] = (double)(inverse ? re / n : re);
                y[2 * k + 1] = (double)(inverse ? im / n : im);
        }
}

START_TEST(test_dft)
{
        static const int64_t lens[] = { 1, 2, 8, 64, 5, 12, 33 };
        double x[2 * 64], want[2 * 64], got[2 * 64];

        for (int li = 0; li < NELEM(lens); li++) {
                int64_t n = lens[li];

                for (int cplx = 0; cplx <= 1; cplx++) {
                        struct ops_call c;
                        double in[2 * 64];

                        for (int64_t j = 0; j < n; j++) {
                                x[2 * j] = (double)(rng() % 2001) / 1000 - 1;
                                x[2 * j + 1] = cplx ? (double)(rng() % 2001) / 1000 - 1 : 0;
                                in[j * (cplx + 1)] = x[2 * j];
                                if (cplx)
                                        in[2 * j + 1] = x[2 * j + 1];
                        }
                        c = one_in(F64, in, SHP(1, n, cplx + 1));
                        run_ok("DFT", 17, &c);
                        assert_shape(&c.out[0], 3, (const int64_t[]){ 1, n, 2 });
                        ref_dft(x, n, n, 0, want);
                        assert_vals(&c.out[0], want, (int)(2 * n), 1e-9);
                        /* the inverse brings x back */
                        memcpy(got, c.out[0].data, (size_t)(2 * n) * sizeof(double));
                        free_outs(&c);
                        c = one_in(F64, got, SHP(1, n, 2));
                        attr_int(&c, "inverse", 1);
                        run_ok("DFT", 17, &c);
                        assert_vals(&c.out[0], x, (int)(2 * n), 1e-9);
                        free_outs(&c);
                }
        }
        /* axis 2 of [2, 3, 5, 1] float32, onesided, dft_length 8 (padded) then 4 (cut) */
        float xf[2 * 3 * 5];
        int64_t dl;
        for (int i = 0; i < 30; i++)
                xf[i] = (float)((int)(rng() % 17) - 8) / 4;
        for (int pass = 0; pass < 2; pass++) {
                struct ops_tensor in[2];
                struct ops_call c;
                int64_t k;

                dl = pass ? 4 : 8;
                k = dl / 2 + 1;
                in[0] = tensor(F32, xf, SHP(2, 3, 5, 1));
                in[1] = tensor(I64, &dl, 0, NULL);
                c = call_in(2, in);
                attr_int(&c, "axis", 2);
                attr_int(&c, "onesided", 1);
                run_ok("DFT", 17, &c);
                assert_shape(&c.out[0], 4, (const int64_t[]){ 2, 3, k, 2 });
                for (int o = 0; o < 6; o++) {
                        double line[10] = { 0 }, ref[16];

                        for (int j = 0; j < 5; j++)
                                line[2 * j] = xf[o * 5 + j];
                        ref_dft(line, 5, dl, 0, ref);
                        for (int64_t j = 0; j < k; j++) {
                                double re = get(F32, c.out[0].data, (o * k + j) * 2);
                                double im = get(F32, c.out[0].data, (o * k + j) * 2 + 1);

                                ck_assert_msg(fabs(re - ref[2 * j]) < 1e-5 &&
                                                      fabs(im - ref[2 * j + 1]) < 1e-5,
                                              "line %d bin %lld", o, (long long)j);
                        }
                }
                free_outs(&c);
        }
        struct ops_call c = one_in(F32, xf, SHP(2, 15));

        expect_fail("DFT", 17, &c, "[batch, ..., 1 or 2]");
        c = one_in(F32, xf, SHP(2, 15, 1));
        attr_int(&c, "axis", 2);
        expect_fail("DFT", 17, &c, "real/imaginary dimension");
        c = one_in(F32, xf, SHP(3, 5, 2));
        attr_int(&c, "onesided", 1);
        expect_fail("DFT", 17, &c, "onesided needs a real input");
}
END_TEST

START_TEST(test_stft)
{
        enum { L = 40, FL = 16, STEP = 8 };
        float sig[2 * L], win[FL];
        int64_t step = STEP, fl = FL;
        struct ops_tensor in[4];
        struct ops_call c;

        for (int i = 0; i < 2 * L; i++)
                sig[i] = (float)sin(0.3 * i) + (float)(i % 3) / 4;
        for (int i = 0; i < FL; i++)
                win[i] = 0.5f - 0.5f * (float)cos(2 * M_PI * i / FL);
        in[0] = tensor(F32, sig, SHP(2, L, 1));
        in[1] = tensor(I64, &step, 0, NULL);
        in[2] = tensor(F32, win, SHP(FL));
        in[3] = tensor(I64, &fl, 0, NULL);
        c = call_in(4, in);
        run_ok("STFT", 17, &c);
        /* (40 - 16) / 8 + 1 = 4 frames of 9 bins */
        assert_shape(&c.out[0], 4, (const int64_t[]){ 2, 4, FL / 2 + 1, 2 });
        for (int b = 0; b < 2; b++)
                for (int f = 0; f < 4; f++) {
                        double line[2 * FL], ref[2 * FL];

                        for (int j = 0; j < FL; j++) {
                                line[2 * j] = (double)sig[b * L + f * STEP + j] * win[j];
                                line[2 * j + 1] = 0;
                        }
                        ref_dft(line, FL, FL, 0, ref);
                        for (int k = 0; k <= FL / 2; k++)
                                for (int ri = 0; ri < 2; ri++) {
                                        double g = get(F32, c.out[0].data,
                                                       ((b * 4 + f) * (FL / 2 + 1) + k) * 2 + ri);

                                        ck_assert_msg(fabs(g - ref[2 * k + ri]) < 1e-4,
                                                      "batch %d frame %d bin %d", b, f, k);
                                }
                }
        free_outs(&c);
        /* no window, full spectrum */
        c = call_in(2, in);
        c.nin = 4;
        c.in[2] = (struct ops_tensor){ 0 };
        c.in[3] = in[3];
        attr_int(&c, "onesided", 0);
        run_ok("STFT", 17, &c);
        assert_shape(&c.out[0], 4, (const int64_t[]){ 2, 4, FL, 2 });
        free_outs(&c);
        c = call_in(2, in);
        expect_fail("STFT", 17, &c, "needs a window or a frame_length");
        fl = 15;
        c = call_in(4, in);
        expect_fail("STFT", 17, &c, "frame_length 15 but the window has 16 values");
        fl = 16;
        step = 0;
        expect_fail("STFT", 17, &c, "frame_step 0 < 1");
}
END_TEST

START_TEST(test_mel_weight_matrix)
{
        int32_t bins = 8, len = 64, rate = 8000;
        float lo = 0, hi = 4000;
        struct ops_tensor in[5] = {
                tensor(I32, &bins, 0, NULL), tensor(I32, &len, 0, NULL),
                tensor(I32, &rate, 0, NULL), tensor(F32, &lo, 0, NULL),
                tensor(F32, &hi, 0, NULL),
        };
        struct ops_call c = call_in(5, in);

        run_ok("MelWeightMatrix", 17, &c);
        assert_shape(&c.out[0], 2, (const int64_t[]){ 33, 8 });
        /* every band is a triangle that peaks at 1, every weight in [0, 1], and bands
         * start further up the spectrum one after the other */
        int64_t prev_first = -1;
        for (int m = 0; m < 8; m++) {
                double peak = 0;
                int64_t first = -1;

                for (int k = 0; k < 33; k++) {
                        double v = get(F32, c.out[0].data, k * 8 + m);

                        ck_assert(v >= 0 && v <= 1);
                        peak = v > peak ? v : peak;
                        if (v > 0 && first < 0)
                                first = k;
                }
                ck_assert_msg(peak == 1, "band %d peaks at %g", m, peak);
                ck_assert_int_gt(first, prev_first);
                prev_first = first;
        }
        free_outs(&c);
        hi = 0;
        c = call_in(5, in);
        expect_fail("MelWeightMatrix", 17, &c, "do not make a range");
        hi = 4000;
        bins = 0;
        expect_fail("MelWeightMatrix", 17, &c, "must be positive");
}
END_TEST

int main(void)
{
        Suite *s = suite_create("ops_spectral");
        TCase *tc = tcase_create("ops_spectral");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_windows);
        tcase_add_test(tc, test_dft);
        tcase_add_test(tc, test_stft);
        tcase_add_test(tc, test_mel_weight_matrix);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

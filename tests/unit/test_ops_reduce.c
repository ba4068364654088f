/* Unit tests of the reduce kernel family (ops/reduce*.c, softmax.c): every Reduce*
 * operator against a double-precision reference over dtypes, axis sets (negative ones
 * included), keepdims and empty tensors; axes as attribute (before opset 13/18) and as
 * input; ArgMax / ArgMin with select_last_index and NaN; CumSum's exclusive and reverse
 * forms; TopK's order and ties; Softmax, LogSoftmax and Hardmax in both the single-axis and
 * the coerced-2-D semantics; definition choice by opset; and the messages of calls that
 * must fail. Values of the examples come from the ONNX node tests. */
#include <check.h>
#include "ops-test-util.h"

/* ---------------------------------------------------------------- Reduce* */

enum kind { SUM, MEAN, MAX, MIN, PROD, L1, L2, LOG_SUM, LSE, SUMSQ, NKINDS };

static const char *const red_names[NKINDS] = { "ReduceSum", "ReduceMean", "ReduceMax",
                                               "ReduceMin", "ReduceProd", "ReduceL1",
                                               "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                               "ReduceSumSquare" };

/* Reference over a mask of reduced axes; out dims are the kept ones (keepdims or not gives
 * the same order of elements). */
static void red_ref(enum kind k, const struct ops_tensor *x, uint32_t mask, double *out,
                    int64_t *ret_n)
{
        int64_t n = numel(x), nout = 1, cnt = 1, i, idx[8] = { 0 }, o;
        double *acc;
        int d;

        for (d = 0; d < x->ndim; d++) {
                if ((mask >> d) & 1)
                        cnt *= x->dims[d];
                else
                        nout *= x->dims[d];
        }
        acc = calloc((size_t)(nout ? nout : 1), sizeof(double));
        for (o = 0; o < nout; o++)
                acc[o] = k == PROD ? 1 : k == MAX ? -INFINITY : k == MIN ? INFINITY : 0;
        for (i = 0; i < n; i++) {
                double v = get(x->dtype, x->data, i);

                for (d = 0, o = 0; d < x->ndim; d++)
                        if (!((mask >> d) & 1))
                                o = o * x->dims[d] + idx[d];
                switch (k) {
                case SUM:
                case MEAN:
                case LOG_SUM: acc[o] += v; break;
                case MAX: acc[o] = fmax(acc[o], v); break;
                case MIN: acc[o] = fmin(acc[o], v); break;
                case PROD: acc[o] *= v; break;
                case L1: acc[o] += fabs(v); break;
                case L2:
                case SUMSQ: acc[o] += v * v; break;
                case LSE: acc[o] += exp(v); break;
                default: break;
                }
                for (d = x->ndim - 1; d >= 0; d--) {
                        if (++idx[d] < x->dims[d])
                                break;
                        idx[d] = 0;
                }
        }
        for (o = 0; o < nout; o++) {
                switch (k) {
                case MEAN: acc[o] /= (double)cnt; break;
                case L2: acc[o] = sqrt(acc[o]); break;
                case LOG_SUM:
                case LSE: acc[o] = log(acc[o]); break;
                default: break;
                }
                out[o] = acc[o];
        }
        *ret_n = nout;
        free(acc);
}

/* One reduction with axes given as the attribute (opset 11) and as the input (opset 18; 13
 * for ReduceSum), checked against the reference. */
static void red_case(enum kind k, int dtype, int ndim, const int64_t *dims, int naxes,
                     const int64_t *axes, int keep)
{
        const char *op = red_names[k];
        int is_int = dtype != F32 && dtype != F64 && dtype != F16 && dtype != BF16;
        /* Ranges keep every result exact (or finite) in the dtype: no integer overflow. */
        struct ops_tensor x = make(dtype, ndim, dims, k == LOG_SUM ? 0.5 : is_int ? 0 : -2,
                                   k == PROD ? (is_int ? 1 : 1.5) : k == SUMSQ && is_int ? 2 : 3);
        double want[256], tol = dtype == F32 ? 1e-5 : dtype == F64 ? 1e-12 : is_int ? 0 : 1e-2;
        int64_t adims[1] = { naxes }, nout, kept[8];
        uint32_t mask = 0;
        int v, d, nk = 0;

        for (d = 0; d < naxes; d++)
                mask |= 1u << (axes[d] < 0 ? axes[d] + ndim : axes[d]);
        if (naxes == 0)
                mask = (1u << ndim) - 1;
        red_ref(k, &x, mask, want, &nout);
        if (is_int)
                for (d = 0; d < nout; d++)
                        want[d] = trunc(want[d]);
        for (d = 0; d < ndim; d++) {
                if (!((mask >> d) & 1))
                        kept[nk++] = dims[d];
                else if (keep)
                        kept[nk++] = 1;
        }
        for (v = 0; v < 2; v++) {
                struct ops_tensor in[2];
                struct ops_call c;
                int opset = v ? (k == SUM ? 13 : 18) : 11;

                in[0] = x;
                in[1] = tensor(I64, (void *)axes, 1, adims);
                c = call_in(v && naxes ? 2 : 1, in);
                if (!v && naxes)
                        attr_ints(&c, "axes", naxes, axes);
                attr_int(&c, "keepdims", keep);
                run_ok(op, opset, &c);
                assert_shape(&c.out[0], nk, kept);
                ck_assert_int_eq(c.out[0].dtype, dtype);
                assert_vals(&c.out[0], want, (int)nout, tol);
                free_outs(&c);
        }
        free(x.data);
}

START_TEST(test_reduce_all_kinds)
{
        static const int dtypes[] = { F32, F64, F16, BF16, I32, I64, U8, I8, U64 };
        static const int64_t ax0[] = { 0 }, ax1[] = { 1 }, axm1[] = { -1 }, ax02[] = { 0, 2 },
                             axm31[] = { -3, 1 }, ax12[] = { 2, 1 };
        int k, t;

        for (k = 0; k < NKINDS; k++) {
                for (t = 0; t < NELEM(dtypes); t++) {
                        int is_int = t >= 4;

                        /* Logarithms and square roots of integers are not compared. */
                        if (is_int && (k == L2 || k == LOG_SUM || k == LSE || k == MEAN))
                                continue;
                        red_case(k, dtypes[t], SHP(2, 3, 4), 1, ax1, 1);
                        red_case(k, dtypes[t], SHP(2, 3, 4), 1, axm1, 0);
                        red_case(k, dtypes[t], SHP(2, 3, 4), 2, ax02, 1);
                        red_case(k, dtypes[t], SHP(2, 3, 4), 2, axm31, 0);
                        red_case(k, dtypes[t], SHP(2, 3, 4), 2, ax12, 0);
                        red_case(k, dtypes[t], SHP(2, 3, 4), 0, NULL, 1);
                        red_case(k, dtypes[t], SHP(2, 3, 4), 0, NULL, 0);
                        red_case(k, dtypes[t], SHP(5, 1, 7), 1, ax0, 1);
                        red_case(k, dtypes[t], SHP(6), 1, ax0, 0);
                }
        }
}
END_TEST

START_TEST(test_reduce_examples)
{
        /* test_reduce_log_sum_exp_keepdims_example, test_reduce_sum_keepdims_example */
        double data[12] = { 5, 1, 20, 2, 30, 1, 40, 2, 55, 1, 60, 2 };
        double lse[6] = { 20.0000003, 2.31326169, 40.0000454, 2.31326169, 60.0067153, 2.31326169 };
        float xf[12], xs[12];
        int64_t axes[1] = { 1 }, adims[1] = { 1 };
        struct ops_tensor in[2];
        struct ops_call c;
        double sum[6] = { 4, 6, 12, 14, 20, 22 };
        int i;

        for (i = 0; i < 12; i++) {
                xf[i] = (float)data[i];
                xs[i] = (float)(i + 1);
        }
        in[0] = tensor(F32, xf, SHP(3, 2, 2));
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, axes);
        attr_int(&c, "keepdims", 1);
        run_ok("ReduceLogSumExp", 13, &c);
        assert_shape(&c.out[0], SHP(3, 1, 2));
        assert_vals(&c.out[0], lse, 6, 1e-6);
        free_outs(&c);
        in[0] = tensor(F32, xs, SHP(3, 2, 2));
        in[1] = tensor(I64, axes, 1, adims);
        c = call_in(2, in);
        run_ok("ReduceSum", 13, &c);
        assert_shape(&c.out[0], SHP(3, 1, 2));
        assert_vals(&c.out[0], sum, 6, 0);
        free_outs(&c);
        /* Large values: LogSumExp must not overflow. */
        xf[0] = 1000;
        xf[1] = 1000;
        in[0] = tensor(F32, xf, SHP(2));
        c = call_in(1, in);
        attr_int(&c, "keepdims", 0);
        run_ok("ReduceLogSumExp", 13, &c);
        ck_assert_double_eq_tol(((float *)c.out[0].data)[0], 1000 + log(2.0), 1e-3);
        free_outs(&c);
}
END_TEST

START_TEST(test_reduce_noop_and_empty)
{
        float x[6] = { 1, 2, 3, 4, 5, 6 }, e[1];
        int64_t none[1], zero[1] = { 0 };
        struct ops_tensor in[2];
        struct ops_call c;
        double same[6] = { 1, 2, 3, 4, 5, 6 }, z[3] = { 0, 0, 0 }, ninf[3] = { -INFINITY,
                                                                               -INFINITY,
                                                                               -INFINITY };

        /* An empty axes input with noop_with_empty_axes leaves the tensor alone. */
        in[0] = tensor(F32, x, SHP(2, 3));
        in[1] = tensor(I64, none, 1, zero);
        c = call_in(2, in);
        attr_int(&c, "noop_with_empty_axes", 1);
        run_ok("ReduceSum", 13, &c);
        assert_shape(&c.out[0], SHP(2, 3));
        assert_vals(&c.out[0], same, 6, 0);
        free_outs(&c);
        /* Without the flag it reduces everything. */
        c = call_in(2, in);
        run_ok("ReduceSum", 13, &c);
        assert_shape(&c.out[0], SHP(1, 1));
        ck_assert_float_eq(((float *)c.out[0].data)[0], 21);
        free_outs(&c);
        /* Reducing an empty axis gives the identity of the operation. */
        in[0] = tensor(F32, e, SHP(0, 3));
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, zero);
        attr_int(&c, "keepdims", 0);
        run_ok("ReduceSum", 11, &c);
        assert_vals(&c.out[0], z, 3, 0);
        free_outs(&c);
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, zero);
        attr_int(&c, "keepdims", 0);
        run_ok("ReduceMax", 11, &c);
        assert_vals(&c.out[0], ninf, 3, 0);
        free_outs(&c);
        /* A scalar reduces to itself. */
        in[0] = tensor(F32, x, 0, NULL);
        c = call_in(1, in);
        run_ok("ReduceL2", 11, &c);
        assert_shape(&c.out[0], 0, NULL);
        ck_assert_float_eq(((float *)c.out[0].data)[0], 1);
        free_outs(&c);
}
END_TEST

START_TEST(test_reduce_int_exact)
{
        /* int64 beyond double precision and int32 sums that wrap like the narrow type. */
        int64_t x[3] = { INT64_C(9007199254740993), 1, 2 };
        int32_t y[2] = { INT32_MAX, 1 };
        uint64_t u[2] = { UINT64_MAX, UINT64_MAX - 1 };
        struct ops_tensor in[1];
        struct ops_call c;

        in[0] = tensor(I64, x, SHP(3));
        c = call_in(1, in);
        run_ok("ReduceSum", 13, &c);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], INT64_C(9007199254740996));
        free_outs(&c);
        in[0] = tensor(I32, y, SHP(2));
        c = call_in(1, in);
        run_ok("ReduceSum", 13, &c);
        ck_assert_int_eq(((int32_t *)c.out[0].data)[0], INT32_MIN);
        free_outs(&c);
        in[0] = tensor(U64, u, SHP(2));
        c = call_in(1, in);
        run_ok("ReduceMin", 13, &c);
        ck_assert_uint_eq(((uint64_t *)c.out[0].data)[0], UINT64_MAX - 1);
        free_outs(&c);
        c = call_in(1, in);
        run_ok("ReduceMax", 13, &c);
        ck_assert_uint_eq(((uint64_t *)c.out[0].data)[0], UINT64_MAX);
        free_outs(&c);
        in[0] = tensor(I64, x, SHP(3));
        c = call_in(1, in);
        run_ok("ReduceMean", 13, &c);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], INT64_C(3002399751580332));
        free_outs(&c);
}
END_TEST

START_TEST(test_reduce_errors)
{
        float x[6] = { 0 };
        uint8_t b[6] = { 0 };
        int64_t ax3[1] = { 3 }, dup[2] = { 1, -1 }, one[1] = { 1 };
        struct ops_tensor in[2];
        struct ops_call c;

        in[0] = tensor(F32, x, SHP(2, 3));
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, ax3);
        expect_fail("ReduceMean", 13, &c, "axis 3 out of range for rank 2");
        c = call_in(1, in);
        attr_ints(&c, "axes", 2, dup);
        expect_fail("ReduceMean", 13, &c, "axis -1 given twice");
        c = call_in(1, in);
        attr_new(&c, "keepdims", OPS_ATTR_FLOAT)->f = 1;
        expect_fail("ReduceMean", 13, &c, "attribute 'keepdims' must be an int");
        in[1] = tensor(I64, one, SHP(1));
        c = call_in(2, in);
        expect_fail("ReduceMean", 13, &c, "expected 1 input, got 2");
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, one);
        expect_fail("ReduceSum", 13, &c, "axes are an input from opset 13");
        in[1] = tensor(F32, x, SHP(1));
        c = call_in(2, in);
        expect_fail("ReduceSum", 13, &c, "input 1 (axes) must be integer");
        in[0] = tensor(BOOL, b, SHP(2, 3));
        c = call_in(1, in);
        expect_fail("ReduceSum", 13, &c, "unsupported dtype bool");
        c = call_in(1, in);
        run_ok("ReduceMax", 13, &c); /* bool max is "any" */
        free_outs(&c);
        /* A wire launch (no data) cannot know axes given as an input. */
        in[0] = tensor(F32, NULL, SHP(2, 3));
        in[1] = tensor(I64, NULL, SHP(1));
        c = call_in(2, in);
        c.out[0] = tensor(F32, NULL, SHP(2, 1));
        expect_check_fail("ReduceSum", 13, &c, "not known here");
        /* ... but reduces everything without them, and checks the output shape. */
        c = call_in(1, in);
        c.out[0] = tensor(F32, NULL, SHP(1, 1));
        ck_assert_int_eq(ops_check(ops_lookup("ReduceSum"), &c, (char[128]){ 0 }, 128), 0);
        c.out[0] = tensor(F32, NULL, SHP(1));
        expect_check_fail("ReduceSum", 13, &c, "output shape [1] but expected [1,1]");
        c.out[0] = tensor(F64, NULL, SHP(1, 1));
        expect_check_fail("ReduceSum", 13, &c, "output dtype float64 but expected float32");
        attr_int(&c, "bogus", 1);
        expect_check_fail("ReduceSum", 13, &c, "unknown attribute 'bogus'");
}
END_TEST

/* ---------------------------------------------------------------- ArgMax, ArgMin */

START_TEST(test_argmax_argmin)
{
        /* test_argmax_default_axis_example[_select_last_index] */
        float x[4] = { 2, 2, 3, 10 }, y[4] = { 2, 1, 3, 10 }, n[3] = { 1, NAN, 5 };
        int32_t iv[6] = { -5, 7, 7, 0, -9, -9 };
        struct ops_tensor in[1];
        struct ops_call c;
        int64_t *o;

        in[0] = tensor(F32, x, SHP(2, 2));
        c = call_in(1, in);
        run_ok("ArgMax", 13, &c);
        assert_shape(&c.out[0], SHP(1, 2));
        ck_assert_int_eq(c.out[0].dtype, I64);
        o = c.out[0].data;
        ck_assert(o[0] == 1 && o[1] == 1);
        free_outs(&c);
        /* keepdims 0 along the last axis; ties: first unless select_last_index */
        c = call_in(1, in);
        attr_int(&c, "axis", -1);
        attr_int(&c, "keepdims", 0);
        run_ok("ArgMax", 13, &c);
        assert_shape(&c.out[0], SHP(2));
        o = c.out[0].data;
        ck_assert(o[0] == 0 && o[1] == 1);
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        attr_int(&c, "select_last_index", 1);
        run_ok("ArgMax", 13, &c);
        o = c.out[0].data;
        ck_assert(o[0] == 1 && o[1] == 1);
        free_outs(&c);
        in[0] = tensor(F32, y, SHP(2, 2));
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        run_ok("ArgMin", 13, &c);
        o = c.out[0].data;
        ck_assert(o[0] == 1 && o[1] == 0);
        free_outs(&c);
        /* integers, both tie rules */
        in[0] = tensor(I32, iv, SHP(2, 3));
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        run_ok("ArgMax", 13, &c);
        o = c.out[0].data;
        ck_assert(o[0] == 1 && o[1] == 0);
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        attr_int(&c, "select_last_index", 1);
        run_ok("ArgMin", 13, &c);
        o = c.out[0].data;
        ck_assert(o[0] == 0 && o[1] == 2);
        free_outs(&c);
        /* NaN wins, as in numpy */
        in[0] = tensor(F32, n, SHP(3));
        c = call_in(1, in);
        run_ok("ArgMax", 13, &c);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], 1);
        free_outs(&c);
        c = call_in(1, in);
        run_ok("ArgMin", 13, &c);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], 1);
        free_outs(&c);
        /* errors */
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        expect_fail("ArgMax", 13, &c, "axis 1 out of range for rank 1");
        in[0] = tensor(F32, n, SHP(2, 0));
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        expect_fail("ArgMin", 13, &c, "axis 1 is empty");
}
END_TEST

/* ---------------------------------------------------------------- CumSum */

START_TEST(test_cumsum)
{
        /* test_cumsum_1d*: [1, 2, 3, 4, 5] */
        double x[5] = { 1, 2, 3, 4, 5 };
        double plain[5] = { 1, 3, 6, 10, 15 }, excl[5] = { 0, 1, 3, 6, 10 };
        double rev[5] = { 15, 14, 12, 9, 5 }, revex[5] = { 14, 12, 9, 5, 0 };
        const double *want[4] = { plain, excl, rev, revex };
        float m[6] = { 1, 2, 3, 4, 5, 6 };
        double ax0[6] = { 1, 2, 3, 5, 7, 9 }, ax1[6] = { 1, 3, 6, 4, 9, 15 };
        int64_t axis = 0, ivals[4] = { INT64_MAX, 1, -3, 4 };
        int32_t a32 = -1;
        struct ops_tensor in[2];
        struct ops_call c;
        int v;

        for (v = 0; v < 4; v++) {
                in[0] = tensor(F64, x, SHP(5));
                in[1] = tensor(I64, &axis, 0, NULL);
                c = call_in(2, in);
                attr_int(&c, "exclusive", v & 1);
                attr_int(&c, "reverse", v >> 1);
                run_ok("CumSum", 14, &c);
                assert_vals(&c.out[0], want[v], 5, 0);
                free_outs(&c);
        }
        in[0] = tensor(F32, m, SHP(2, 3));
        in[1] = tensor(I64, &axis, 0, NULL);
        c = call_in(2, in);
        run_ok("CumSum", 14, &c);
        assert_vals(&c.out[0], ax0, 6, 0);
        free_outs(&c);
        in[1] = tensor(I32, &a32, SHP(1));
        c = call_in(2, in);
        run_ok("CumSum", 14, &c);
        assert_vals(&c.out[0], ax1, 6, 0);
        free_outs(&c);
        /* rows (inner > 1), reversed and exclusive */
        in[1] = tensor(I64, &axis, 0, NULL);
        c = call_in(2, in);
        attr_int(&c, "exclusive", 1);
        attr_int(&c, "reverse", 1);
        run_ok("CumSum", 14, &c);
        {
                double w[6] = { 4, 5, 6, 0, 0, 0 };

                assert_vals(&c.out[0], w, 6, 0);
        }
        free_outs(&c);
        /* int64 wraps rather than saturating or going through double */
        in[0] = tensor(I64, ivals, SHP(4));
        in[1] = tensor(I64, &axis, 0, NULL);
        c = call_in(2, in);
        run_ok("CumSum", 14, &c);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[1], INT64_MIN);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[3], INT64_MIN + 1);
        free_outs(&c);
        /* The shape never depends on the axis value: a wire launch checks without it... */
        in[0] = tensor(F32, NULL, SHP(2, 3));
        in[1] = tensor(I64, NULL, 0, NULL);
        c = call_in(2, in);
        c.out[0] = tensor(F32, NULL, SHP(2, 3));
        ck_assert_int_eq(ops_check(ops_lookup("CumSum"), &c, (char[128]){ 0 }, 128), 0);
        /* ... and a bad axis fails when it runs. */
        axis = 2;
        in[0] = tensor(F32, m, SHP(2, 3));
        in[1] = tensor(I64, &axis, 0, NULL);
        c = call_in(2, in);
        expect_fail("CumSum", 14, &c, "axis 2 out of range for rank 2");
}
END_TEST

/* ---------------------------------------------------------------- TopK */

START_TEST(test_topk)
{
        /* test_top_k: x = arange(12).reshape(3, 4), k = 3, axis = 1 */
        float x[12];
        int64_t k = 3, kdims[1] = { 1 };
        double v1[9] = { 3, 2, 1, 7, 6, 5, 11, 10, 9 }, i1[9] = { 3, 2, 1, 3, 2, 1, 3, 2, 1 };
        double v2[6] = { 0, 1, 4, 5, 8, 9 }, i2[6] = { 0, 1, 0, 1, 0, 1 };
        double v3[4] = { 8, 9, 10, 11 }, i3[4] = { 2, 2, 2, 2 };
        float ties[5] = { 1, 3, 3, 0, 3 };
        double tv[3] = { 3, 3, 3 }, ti[3] = { 1, 2, 4 };
        struct ops_tensor in[2];
        struct ops_call c;
        int i;

        for (i = 0; i < 12; i++)
                x[i] = (float)i;
        in[0] = tensor(F32, x, SHP(3, 4));
        in[1] = tensor(I64, &k, 1, kdims);
        c = call_in(2, in);
        c.nout = 2;
        attr_int(&c, "axis", 1);
        run_ok("TopK", 11, &c);
        assert_shape(&c.out[0], SHP(3, 3));
        assert_vals(&c.out[0], v1, 9, 0);
        assert_vals(&c.out[1], i1, 9, 0);
        free_outs(&c);
        /* smallest, negative axis */
        k = 2;
        c = call_in(2, in);
        c.nout = 2;
        attr_int(&c, "axis", -1);
        attr_int(&c, "largest", 0);
        run_ok("TopK", 11, &c);
        assert_vals(&c.out[0], v2, 6, 0);
        assert_vals(&c.out[1], i2, 6, 0);
        free_outs(&c);
        /* along axis 0, k as the opset-1 attribute */
        c = call_in(1, in);
        c.nout = 2;
        attr_int(&c, "axis", 0);
        attr_int(&c, "k", 1);
        run_ok("TopK", 9, &c);
        assert_shape(&c.out[0], SHP(1, 4));
        assert_vals(&c.out[0], v3, 4, 0);
        assert_vals(&c.out[1], i3, 4, 0);
        free_outs(&c);
        /* ties keep the lower index first */
        k = 3;
        in[0] = tensor(F32, ties, SHP(5));
        c = call_in(2, in);
        c.nout = 2;
        run_ok("TopK", 11, &c);
        assert_vals(&c.out[0], tv, 3, 0);
        assert_vals(&c.out[1], ti, 3, 0);
        free_outs(&c);
        /* errors */
        k = 6;
        c = call_in(2, in);
        c.nout = 2;
        expect_fail("TopK", 11, &c, "k 6 out of range [0, 5]");
        in[0] = tensor(F32, NULL, SHP(5));
        in[1] = tensor(I64, NULL, 1, kdims);
        c = call_in(2, in);
        c.nout = 2;
        c.out[0] = tensor(F32, NULL, SHP(2));
        c.out[1] = tensor(I64, NULL, SHP(2));
        expect_check_fail("TopK", 11, &c, "input 1 (k)");
}
END_TEST

/* ---------------------------------------------------------------- Softmax family */

enum sm { SOFTMAX, LOGSOFTMAX, HARDMAX };

/* Reference over [outer, n, inner]. */
static void sm_ref(enum sm k, const double *x, double *y, int64_t outer, int64_t n,
                   int64_t inner)
{
        int64_t o, r, j, at, arg;
        double mx, s;

        for (o = 0; o < outer; o++)
                for (j = 0; j < inner; j++) {
                        mx = -INFINITY;
                        arg = 0;
                        for (r = 0; r < n; r++) {
                                at = (o * n + r) * inner + j;
                                if (x[at] > mx) {
                                        mx = x[at];
                                        arg = r;
                                }
                        }
                        s = 0;
                        for (r = 0; r < n; r++)
                                s += exp(x[(o * n + r) * inner + j] - mx);
                        for (r = 0; r < n; r++) {
                                at = (o * n + r) * inner + j;
                                y[at] = k == SOFTMAX ? exp(x[at] - mx) / s :
                                        k == LOGSOFTMAX ? x[at] - mx - log(s) :
                                                          (double)(r == arg);
                        }
                }
}

static void sm_case(enum sm k, int dtype, int opset, int has_axis, int64_t axis)
{
        static const char *const names[] = { "Softmax", "LogSoftmax", "Hardmax" };
        struct ops_tensor x = make(dtype, SHP(2, 3, 4), -4, 4);
        double xs[24], want[24], tol = dtype == F32 ? 1e-5 : dtype == F64 ? 1e-12 : 2e-2;
        int64_t outer = 1, n = 1, inner = 1, ax;
        struct ops_call c;
        int d;

        for (d = 0; d < 24; d++)
                xs[d] = get(dtype, x.data, d);
        ax = has_axis ? (axis < 0 ? axis + 3 : axis) : opset >= 13 ? 2 : 1;
        for (d = 0; d < 3; d++) {
                if (d < ax)
                        outer *= x.dims[d];
                else if (d == ax || opset < 13)
                        n *= x.dims[d];
                else
                        inner *= x.dims[d];
        }
        sm_ref(k, xs, want, outer, n, inner);
        c = call_in(1, &x);
        if (has_axis)
                attr_int(&c, "axis", axis);
        run_ok(names[k], opset, &c);
        assert_shape(&c.out[0], SHP(2, 3, 4));
        assert_vals(&c.out[0], want, 24, tol);
        free_outs(&c);
        free(x.data);
}

START_TEST(test_softmax_family)
{
        static const int dtypes[] = { F32, F64, F16, BF16 };
        int k, t, a;

        for (k = 0; k < 3; k++)
                for (t = 0; t < NELEM(dtypes); t++) {
                        sm_case(k, dtypes[t], 13, 0, 0);
                        sm_case(k, dtypes[t], 11, 0, 0);
                        for (a = -3; a < 3; a++) {
                                sm_case(k, dtypes[t], 13, 1, a);
                                sm_case(k, dtypes[t], 11, 1, a);
                        }
                }
}
END_TEST

START_TEST(test_softmax_family_edges)
{
        /* test_hardmax_one_hot: ties go to the first maximum */
        float h[4] = { 3, 3, 3, 1 }, big[3] = { 10000, 10001, 10002 };
        double hw[4] = { 1, 0, 0, 0 };
        double lw[3] = { -2.40760596, -1.40760596, -0.40760596 };
        struct ops_tensor in[1];
        struct ops_call c;

        in[0] = tensor(F32, h, SHP(1, 4));
        c = call_in(1, in);
        run_ok("Hardmax", 13, &c);
        assert_vals(&c.out[0], hw, 4, 0);
        free_outs(&c);
        /* test_logsoftmax_large_number */
        in[0] = tensor(F32, big, SHP(1, 3));
        c = call_in(1, in);
        run_ok("LogSoftmax", 13, &c);
        assert_vals(&c.out[0], lw, 3, 1e-6);
        free_outs(&c);
        /* Opset-1 semantics accept axis == rank (coercion with an empty second factor). */
        in[0] = tensor(F32, h, SHP(1, 4));
        c = call_in(1, in);
        attr_int(&c, "axis", 2);
        run_ok("Softmax", 11, &c);
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "axis", 2);
        expect_fail("LogSoftmax", 13, &c, "axis 2 out of range for rank 2");
        in[0] = tensor(I32, h, SHP(1, 4));
        c = call_in(1, in);
        expect_fail("Hardmax", 13, &c, "unsupported dtype int32");
        /* The core Softmax keeps its wire check, now with float64 accepted. */
        in[0] = tensor(F64, NULL, SHP(2, 2));
        c = call_in(1, in);
        c.out[0] = tensor(F64, NULL, SHP(2, 2));
        ck_assert_int_eq(ops_check(ops_lookup("Softmax"), &c, (char[128]){ 0 }, 128), 0);
}
END_TEST

/* ---------------------------------------------------------------- long lines */

START_TEST(test_long_lines)
{
        /* Lines and rows longer than the kernels' chunks, both along and across. */
        enum { N = 1000 };
        float *x = malloc(3 * N * sizeof(float));
        int64_t zero = 0, one = 1, i, ax1[1] = { 1 }, ax0[1] = { 0 };
        double *w = malloc(3 * N * sizeof(double)), s;
        struct ops_tensor in[2];
        struct ops_call c;
        int r;

        for (i = 0; i < 3 * N; i++)
                x[i] = (float)((i * 7) % 13) - 6;
        x[1 * N + 700] = 50;
        x[2 * N + 999] = 50;
        in[0] = tensor(F32, x, SHP(3, N));
        c = call_in(1, in);
        attr_int(&c, "axis", 1);
        run_ok("ArgMax", 13, &c);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[1], 700);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[2], 999);
        free_outs(&c);
        for (r = 0; r < 2; r++) {
                in[1] = tensor(I64, r ? &zero : &one, 0, NULL);
                c = call_in(2, in);
                attr_int(&c, "reverse", 1);
                run_ok("CumSum", 14, &c);
                for (i = 0; i < 3 * N; i++) {
                        int64_t row = i / N, col = i % N, k;

                        s = 0;
                        if (r)
                                for (k = row; k < 3; k++)
                                        s += x[k * N + col];
                        else
                                for (k = col; k < N; k++)
                                        s += x[row * N + k];
                        w[i] = s;
                }
                assert_vals(&c.out[0], w, 3 * N, 1e-6);
                free_outs(&c);
        }
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, ax1);
        run_ok("ReduceSum", 11, &c);
        for (r = 0; r < 3; r++) {
                for (i = 0, s = 0; i < N; i++)
                        s += x[r * N + i];
                w[r] = s;
        }
        assert_vals(&c.out[0], w, 3, 1e-6);
        free_outs(&c);
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, ax0);
        run_ok("ReduceMin", 11, &c);
        for (i = 0; i < N; i++)
                w[i] = fmin(fmin(x[i], x[N + i]), x[2 * N + i]);
        assert_vals(&c.out[0], w, N, 0);
        free_outs(&c);
        c = call_in(1, in);
        run_ok("Softmax", 13, &c);
        for (r = 0; r < 3; r++) {
                for (i = 0, s = 0; i < N; i++)
                        s += ((float *)c.out[0].data)[r * N + i];
                ck_assert_double_eq_tol(s, 1, 1e-4);
        }
        free_outs(&c);
        free(x);
        free(w);
}
END_TEST

/* ---------------------------------------------------------------- registry */

START_TEST(test_reduce_registry)
{
        const struct ops_def *d13 = ops_lookup_onnx(NULL, "ReduceSum", 13);
        const struct ops_def *d12 = ops_lookup_onnx("ai.onnx", "ReduceSum", 12);
        const struct ops_def *d;
        struct ops_call c;
        float x[4] = { 0 };
        uint64_t flops, bytes;
        size_t i;

        ck_assert_ptr_nonnull(d13);
        ck_assert_ptr_nonnull(d12);
        ck_assert_ptr_ne(d13, d12);
        ck_assert_int_eq(d13->since_version, 13);
        ck_assert_int_eq(d13->max_inputs, 2);
        ck_assert_int_eq(d12->max_inputs, 1);
        /* Wire launches get the newest definition. */
        ck_assert_ptr_eq(ops_lookup("ReduceSum"), d13);
        ck_assert_ptr_eq(ops_lookup_onnx(NULL, "ReduceMean", 17),
                         ops_lookup_onnx(NULL, "ReduceMean", 1));
        ck_assert_int_eq(ops_lookup_onnx(NULL, "ReduceMean", 18)->since_version, 18);
        ck_assert_ptr_eq(ops_lookup_onnx(NULL, "Softmax", 13), ops_lookup("Softmax"));
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Softmax", 12)->since_version, 1);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "TopK", 10)->since_version, 10);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "TopK", 9)->since_version, 1);
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "CumSum", 10));
        /* Every definition of the family is complete. */
        for (i = 0; (d = ops_get(i)); i++) {
                if (strncmp(d->name, "Reduce", 6) && strncmp(d->name, "Arg", 3) &&
                    strcmp(d->name, "CumSum") && strcmp(d->name, "TopK") &&
                    !strstr(d->name, "max") && strcmp(d->name, "Softmax"))
                        continue;
                ck_assert(d->check || d->infer); /* NULL: the default check through infer */
                ck_assert_ptr_nonnull(d->run);
                ck_assert_ptr_nonnull(d->cost);
                ck_assert_ptr_nonnull(d->infer);
        }
        memset(&c, 0, sizeof(c));
        c.nin = c.nout = 1;
        c.in[0] = tensor(F32, x, SHP(4));
        c.out[0] = tensor(F32, x, 0, NULL);
        ops_cost(ops_lookup("ReduceSum"), &c, &flops, &bytes);
        ck_assert_uint_gt(flops, 0);
        ck_assert_uint_eq(bytes, 20);
}
END_TEST

static Suite *reduce_suite(void)
{
        Suite *s = suite_create("ops_reduce");
        TCase *tc;

        tc = tcase_create("reduce");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_reduce_all_kinds);
        tcase_add_test(tc, test_reduce_examples);
        tcase_add_test(tc, test_reduce_noop_and_empty);
        tcase_add_test(tc, test_reduce_int_exact);
        tcase_add_test(tc, test_reduce_errors);
        suite_add_tcase(s, tc);

        tc = tcase_create("arg");
        tcase_add_test(tc, test_argmax_argmin);
        suite_add_tcase(s, tc);

        tc = tcase_create("scan");
        tcase_add_test(tc, test_cumsum);
        tcase_add_test(tc, test_topk);
        suite_add_tcase(s, tc);

        tc = tcase_create("softmax");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_softmax_family);
        tcase_add_test(tc, test_softmax_family_edges);
        suite_add_tcase(s, tc);

        tc = tcase_create("registry");
        tcase_add_test(tc, test_long_lines);
        tcase_add_test(tc, test_reduce_registry);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(reduce_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Unit tests of the shape arithmetic in daemon/ops: ONNX multidirectional broadcasting
 * (successes, failures and their messages, scalars, rank differences, empty dims, a result
 * written over an operand) and element counts, including overflow. */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static struct ops_tensor shape(int ndim, ...)
{
        struct ops_tensor t;
        va_list ap;
        int i;

        memset(&t, 0, sizeof(t));
        t.dtype = PROTO_DTYPE_FLOAT32;
        t.ndim = ndim;
        va_start(ap, ndim);
        for (i = 0; i < ndim; i++)
                t.dims[i] = va_arg(ap, int64_t);
        va_end(ap);
        return t;
}

#define S(n, ...) shape(n, ##__VA_ARGS__)
#define D(x) ((int64_t)(x))

static void expect_ok(struct ops_tensor a, struct ops_tensor b, struct ops_tensor want)
{
        struct ops_tensor r, r2;
        char err[256] = "";
        int i;

        memset(&r, 0, sizeof(r));
        r.dtype = PROTO_DTYPE_INT64;
        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &r, err, sizeof(err)), 0);
        ck_assert_int_eq(r.ndim, want.ndim);
        for (i = 0; i < want.ndim; i++)
                ck_assert_int_eq(r.dims[i], want.dims[i]);
        ck_assert_int_eq(r.dtype, PROTO_DTYPE_INT64);
        /* Broadcasting is symmetric. */
        memset(&r2, 0, sizeof(r2));
        ck_assert_int_eq(ops_broadcast_shape(&b, &a, &r2, err, sizeof(err)), 0);
        ck_assert_int_eq(r2.ndim, want.ndim);
        for (i = 0; i < want.ndim; i++)
                ck_assert_int_eq(r2.dims[i], want.dims[i]);
}

static void expect_fail(struct ops_tensor a, struct ops_tensor b, const char *msg)
{
        struct ops_tensor r;
        char err[256] = "";

        memset(&r, 0, sizeof(r));
        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &r, err, sizeof(err)), -EINVAL);
        if (msg)
                ck_assert_str_eq(err, msg);
        else
                ck_assert_str_ne(err, "");
}

START_TEST(test_equal_shapes)
{
        expect_ok(S(2, D(2), D(3)), S(2, D(2), D(3)), S(2, D(2), D(3)));
        expect_ok(S(1, D(7)), S(1, D(7)), S(1, D(7)));
}
END_TEST

START_TEST(test_scalars)
{
        expect_ok(S(0), S(0), S(0));
        expect_ok(S(0), S(2, D(5), D(4)), S(2, D(5), D(4)));
        expect_ok(S(0), S(1, D(1)), S(1, D(1)));
        expect_ok(S(0), S(1, D(0)), S(1, D(0)));
}
END_TEST

START_TEST(test_ones_expand)
{
        expect_ok(S(2, D(2), D(1)), S(2, D(1), D(4)), S(2, D(2), D(4)));
        expect_ok(S(3, D(3), D(1), D(5)), S(3, D(1), D(4), D(1)), S(3, D(3), D(4), D(5)));
        expect_ok(S(2, D(1), D(1)), S(2, D(1), D(1)), S(2, D(1), D(1)));
}
END_TEST

START_TEST(test_rank_difference)
{
        expect_ok(S(2, D(2), D(3)), S(1, D(3)), S(2, D(2), D(3)));
        expect_ok(S(3, D(4), D(1), D(3)), S(2, D(2), D(1)), S(3, D(4), D(2), D(3)));
        expect_ok(S(4, D(2), D(3), D(4), D(5)), S(1, D(5)), S(4, D(2), D(3), D(4), D(5)));
}
END_TEST

START_TEST(test_rank_difference_expand)
{
        /* [2,1,4,1] with [3,1]: right-aligned [.,.,3,1] -> 4 vs 3 clash. */
        expect_fail(S(4, D(2), D(1), D(4), D(1)), S(2, D(3), D(1)),
                    "cannot broadcast shapes [2,1,4,1] and [3,1]");
        expect_ok(S(4, D(2), D(1), D(4), D(1)), S(2, D(1), D(6)), S(4, D(2), D(1), D(4), D(6)));
        expect_ok(S(1, D(6)), S(5, D(1), D(2), D(1), D(3), D(1)),
                  S(5, D(1), D(2), D(1), D(3), D(6)));
}
END_TEST

START_TEST(test_max_rank)
{
        expect_ok(S(8, D(1), D(2), D(1), D(2), D(1), D(2), D(1), D(2)),
                  S(8, D(3), D(1), D(3), D(1), D(3), D(1), D(3), D(1)),
                  S(8, D(3), D(2), D(3), D(2), D(3), D(2), D(3), D(2)));
        expect_ok(S(8, D(1), D(1), D(1), D(1), D(1), D(1), D(1), D(9)), S(0),
                  S(8, D(1), D(1), D(1), D(1), D(1), D(1), D(1), D(9)));
}
END_TEST

START_TEST(test_zero_size)
{
        expect_ok(S(2, D(0), D(3)), S(2, D(1), D(3)), S(2, D(0), D(3)));
        expect_ok(S(1, D(0)), S(1, D(1)), S(1, D(0)));
        expect_ok(S(2, D(2), D(0)), S(2, D(2), D(1)), S(2, D(2), D(0)));
        expect_ok(S(2, D(2), D(0)), S(1, D(0)), S(2, D(2), D(0)));
        expect_fail(S(1, D(0)), S(1, D(3)), "cannot broadcast shapes [0] and [3]");
        expect_fail(S(2, D(0), D(2)), S(2, D(2), D(2)), NULL);
}
END_TEST

START_TEST(test_failures)
{
        expect_fail(S(2, D(2), D(3)), S(1, D(4)), "cannot broadcast shapes [2,3] and [4]");
        expect_fail(S(1, D(4)), S(2, D(2), D(3)), "cannot broadcast shapes [4] and [2,3]");
        expect_fail(S(2, D(2), D(3)), S(2, D(3), D(2)), "cannot broadcast shapes [2,3] and [3,2]");
        expect_fail(S(1, D(2)), S(1, D(3)), "cannot broadcast shapes [2] and [3]");
        expect_fail(S(3, D(2), D(1), D(3)), S(3, D(4), D(1), D(3)), NULL);
}
END_TEST

START_TEST(test_invalid_operands)
{
        expect_fail(S(1, D(-1)), S(1, D(1)), NULL);
        expect_fail(S(1, D(2)), S(2, D(-2), D(2)), NULL);
        {
                struct ops_tensor a = S(1, D(2)), b = S(1, D(2));

                a.ndim = OPS_MAX_DIMS + 1;
                expect_fail(a, b, NULL);
                a.ndim = -1;
                expect_fail(a, b, NULL);
        }
}
END_TEST

START_TEST(test_failure_leaves_result)
{
        struct ops_tensor a = S(1, D(2)), b = S(1, D(3)), r = S(2, D(7), D(8));
        char err[8];

        /* A short error buffer truncates but terminates. */
        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &r, err, sizeof(err)), -EINVAL);
        ck_assert_uint_eq(strlen(err), sizeof(err) - 1);
        ck_assert_int_eq(r.ndim, 2);
        ck_assert_int_eq(r.dims[0], 7);
        /* No error buffer at all is allowed. */
        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &r, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(test_result_aliases_operand)
{
        struct ops_tensor a = S(2, D(2), D(1)), b = S(3, D(3), D(1), D(4));
        char err[256];

        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(a.ndim, 3);
        ck_assert_int_eq(a.dims[0], 3);
        ck_assert_int_eq(a.dims[1], 2);
        ck_assert_int_eq(a.dims[2], 4);
        a = S(1, D(5));
        b = S(2, D(2), D(1));
        ck_assert_int_eq(ops_broadcast_shape(&a, &b, &b, err, sizeof(err)), 0);
        ck_assert_int_eq(b.ndim, 2);
        ck_assert_int_eq(b.dims[0], 2);
        ck_assert_int_eq(b.dims[1], 5);
}
END_TEST

START_TEST(test_numel)
{
        struct ops_tensor t;

        t = S(0);
        ck_assert_int_eq(ops_tensor_numel(&t), 1);
        t = S(3, D(2), D(3), D(4));
        ck_assert_int_eq(ops_tensor_numel(&t), 24);
        t = S(2, D(5), D(0));
        ck_assert_int_eq(ops_tensor_numel(&t), 0);
        t = S(2, D(-1), D(3));
        ck_assert_int_eq(ops_tensor_numel(&t), -1);
        t = S(2, D(1) << 32, D(1) << 32);
        ck_assert_int_eq(ops_tensor_numel(&t), -1);
        t = S(2, D(1) << 31, D(1) << 31);
        ck_assert_int_eq(ops_tensor_numel(&t), D(1) << 62);
        /* Empty wins even when the other dims alone would overflow. */
        t = S(3, D(1) << 40, D(1) << 40, D(0));
        ck_assert_int_eq(ops_tensor_numel(&t), 0);
        t = S(1, D(1));
        t.ndim = OPS_MAX_DIMS + 1;
        ck_assert_int_eq(ops_tensor_numel(&t), -1);
}
END_TEST

static Suite *broadcast_suite(void)
{
        Suite *s = suite_create("broadcast");
        TCase *tc = tcase_create("shapes");

        tcase_add_test(tc, test_equal_shapes);
        tcase_add_test(tc, test_scalars);
        tcase_add_test(tc, test_ones_expand);
        tcase_add_test(tc, test_rank_difference);
        tcase_add_test(tc, test_rank_difference_expand);
        tcase_add_test(tc, test_max_rank);
        tcase_add_test(tc, test_zero_size);
        tcase_add_test(tc, test_failures);
        tcase_add_test(tc, test_invalid_operands);
        tcase_add_test(tc, test_failure_leaves_result);
        tcase_add_test(tc, test_result_aliases_operand);
        tcase_add_test(tc, test_numel);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(broadcast_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Unit tests of device placement (policy/placement.c): the least-loaded, spread and binpack
 * choices with their tie-breaks, and that unusable devices and devices without the requested
 * free memory are never chosen, whatever the policy. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/placement.h"

#define GiB (1ull << 30)

static const enum policy_placement all_policies[] = { POLICY_PLACE_LEAST_LOADED,
                                                      POLICY_PLACE_SPREAD,
                                                      POLICY_PLACE_BINPACK };

static struct place_device dev(int usable, uint64_t mem_free, uint32_t streams, double load)
{
        struct place_device d = { .usable = usable, .mem_free = mem_free, .streams = streams,
                                  .load = load };
        return d;
}

START_TEST(test_least_loaded)
{
        struct place_device d[] = { dev(1, 8 * GiB, 1, 5e6), dev(1, 8 * GiB, 9, 1e6),
                                    dev(1, 8 * GiB, 0, 3e6) };

        ck_assert_int_eq(policy_place(POLICY_PLACE_LEAST_LOADED, d, 3, 0), 1);
        /* equal load: fewer streams, then more free memory */
        d[1].load = 3e6;
        ck_assert_int_eq(policy_place(POLICY_PLACE_LEAST_LOADED, d, 3, 0), 2);
        d[2].streams = 9;
        d[2].mem_free = 16 * GiB;
        ck_assert_int_eq(policy_place(POLICY_PLACE_LEAST_LOADED, d, 3, 0), 2);
        d[2].mem_free = 4 * GiB;
        ck_assert_int_eq(policy_place(POLICY_PLACE_LEAST_LOADED, d, 3, 0), 1);
        /* complete tie: the first */
        d[2].mem_free = 8 * GiB;
        ck_assert_int_eq(policy_place(POLICY_PLACE_LEAST_LOADED, d, 3, 0), 1);
}
END_TEST

START_TEST(test_spread)
{
        /* load is ignored: fewest streams */
        struct place_device d[] = { dev(1, 8 * GiB, 4, 0), dev(1, 8 * GiB, 2, 9e9),
                                    dev(1, 8 * GiB, 3, 0) };

        ck_assert_int_eq(policy_place(POLICY_PLACE_SPREAD, d, 3, 0), 1);
        /* equal streams: more free memory */
        d[2].streams = 2;
        d[2].mem_free = 9 * GiB;
        ck_assert_int_eq(policy_place(POLICY_PLACE_SPREAD, d, 3, 0), 2);
        d[2].mem_free = 8 * GiB;
        ck_assert_int_eq(policy_place(POLICY_PLACE_SPREAD, d, 3, 0), 1);
}
END_TEST

START_TEST(test_binpack)
{
        /* most streams first, so empty devices stay empty */
        struct place_device d[] = { dev(1, 8 * GiB, 4, 0), dev(1, 8 * GiB, 0, 0),
                                    dev(1, 8 * GiB, 7, 9e9) };

        ck_assert_int_eq(policy_place(POLICY_PLACE_BINPACK, d, 3, 0), 2);
        /* equal streams: the fuller device (least free memory) that still fits */
        d[0].streams = 7;
        d[0].mem_free = 2 * GiB;
        ck_assert_int_eq(policy_place(POLICY_PLACE_BINPACK, d, 3, 0), 0);
        ck_assert_int_eq(policy_place(POLICY_PLACE_BINPACK, d, 3, 3 * GiB), 2);
}
END_TEST

START_TEST(test_unusable_never_chosen)
{
        /* the unusable device is best by every criterion */
        struct place_device d[] = { dev(1, 1 * GiB, 5, 5e6), dev(0, 64 * GiB, 0, 0),
                                    dev(1, 2 * GiB, 6, 6e6) };

        for (size_t i = 0; i < sizeof(all_policies) / sizeof(all_policies[0]); i++) {
                int got = policy_place(all_policies[i], d, 3, 0);
                ck_assert_msg(got == 0 || got == 2, "%s chose device %d",
                              policy_placement_name(all_policies[i]), got);
        }
        d[1].streams = 100; /* now best for binpack, still unusable */
        ck_assert_int_eq(policy_place(POLICY_PLACE_BINPACK, d, 3, 0), 2);
}
END_TEST

START_TEST(test_memory_insufficient_never_chosen)
{
        struct place_device d[] = { dev(1, 3 * GiB, 0, 0), dev(1, 4 * GiB, 9, 9e9),
                                    dev(1, 4 * GiB - 1, 100, 1) };

        for (size_t i = 0; i < sizeof(all_policies) / sizeof(all_policies[0]); i++) {
                /* only device 1 has 4 GiB free; exactly enough is enough */
                ck_assert_int_eq(policy_place(all_policies[i], d, 3, 4 * GiB), 1);
                ck_assert_int_eq(policy_place(all_policies[i], d, 3, 4 * GiB + 1), -1);
        }
}
END_TEST

START_TEST(test_none)
{
        struct place_device d[] = { dev(0, 8 * GiB, 0, 0), dev(0, 8 * GiB, 0, 0) };

        for (size_t i = 0; i < sizeof(all_policies) / sizeof(all_policies[0]); i++) {
                ck_assert_int_eq(policy_place(all_policies[i], d, 2, 0), -1);
                ck_assert_int_eq(policy_place(all_policies[i], d, 0, 0), -1);
                ck_assert_int_eq(policy_place(all_policies[i], NULL, 0, 0), -1);
        }
        /* one usable device with just enough */
        d[1].usable = 1;
        ck_assert_int_eq(policy_place(POLICY_PLACE_SPREAD, d, 2, 8 * GiB), 1);
}
END_TEST

static Suite *placement_suite(void)
{
        Suite *s = suite_create("placement");
        TCase *tc = tcase_create("choice");

        tcase_add_test(tc, test_least_loaded);
        tcase_add_test(tc, test_spread);
        tcase_add_test(tc, test_binpack);
        suite_add_tcase(s, tc);

        tc = tcase_create("exclusion");
        tcase_add_test(tc, test_unusable_never_chosen);
        tcase_add_test(tc, test_memory_insufficient_never_chosen);
        tcase_add_test(tc, test_none);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(placement_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The main() of a Check test program: run every test of one suite, the runner printing as
 * Check does, and exit 0 only when all of them passed. Header-only. */
#ifndef NPUD_TESTS_CHECK_RUN_H
#define NPUD_TESTS_CHECK_RUN_H

#include <check.h>

static __attribute__((unused)) int check_run(Suite *s)
{
        SRunner *sr = srunner_create(s);
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

#endif

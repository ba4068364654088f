/* Unit tests of the tenant registry's run-time quotas and removed tenants (daemon/exec/
 * tenant.c): a quota set at run time survives a reload that leaves the file's value of that
 * quota alone and gives way when the file changes it; a per-device quota covers one device; a
 * tenant a reload removes keeps its statistics and comes back with them, without its old
 * run-time quotas. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "daemon/exec/tenant.h"

static struct policy_config pol;

static void set_policy(uint64_t total, uint64_t per_device, int with_a)
{
        policy_config_init(&pol);
        if (!with_a)
                return;
        struct policy_tenant *t = &pol.tenants[pol.ntenants++];
        *t = pol.tenants[0];
        strcpy(t->name, "a");
        t->quota_total = total;
        t->quota_per_device = per_device;
}

START_TEST(test_runtime_quotas_and_reload)
{
        struct tenant_registry r;
        struct tenant *a;

        set_policy(1000, 500, 1);
        ck_assert_int_eq(tenant_registry_init(&r, &pol, 2), 0);
        a = r.tenants[1];
        tenant_quota_set(a, -1, 100);
        tenant_quota_set(a, 1, 50);
        ck_assert_uint_eq(a->pol.quota_total, 100);
        ck_assert_uint_eq(tenant_quota_device(a, 0), 500); /* the file's, untouched */
        ck_assert_uint_eq(tenant_quota_device(a, 1), 50);
        ck_assert_uint_eq(a->file.quota_total, 1000);

        /* the same file: both stay */
        ck_assert_int_eq(tenant_registry_apply(&r, &pol), 0);
        ck_assert_ptr_eq(r.tenants[1], a);
        ck_assert_uint_eq(a->pol.quota_total, 100);
        ck_assert_uint_eq(tenant_quota_device(a, 1), 50);

        /* the file changes the per-device quota: that one gives way, the total stays */
        set_policy(1000, 600, 1);
        ck_assert_int_eq(tenant_registry_apply(&r, &pol), 0);
        ck_assert_uint_eq(a->pol.quota_total, 100);
        ck_assert_uint_eq(tenant_quota_device(a, 0), 600);
        ck_assert_uint_eq(tenant_quota_device(a, 1), 600);

        /* removed: kept among the retired, with its statistics */
        a->dev[0].tasks = 7;
        set_policy(0, 0, 0);
        ck_assert_int_eq(tenant_registry_apply(&r, &pol), 0);
        ck_assert_int_eq(r.ntenants, 1);
        ck_assert_int_eq(r.nretired, 1);
        ck_assert_ptr_eq(r.retired[0], a);
        ck_assert_int_eq(a->index, -1);

        /* named again: the same tenant, its statistics, the file's quotas only */
        set_policy(1000, 600, 1);
        ck_assert_int_eq(tenant_registry_apply(&r, &pol), 0);
        ck_assert_int_eq(r.nretired, 0);
        ck_assert_ptr_eq(r.tenants[1], a);
        ck_assert_int_eq(a->index, 1);
        ck_assert_uint_eq(a->dev[0].tasks, 7);
        ck_assert_uint_eq(a->pol.quota_total, 1000);
        ck_assert_int_eq(a->has_quota_total, 0);
        tenant_registry_deinit(&r);
}
END_TEST

START_TEST(test_retired_bounded)
{
        struct tenant_registry r;

        set_policy(0, 0, 1);
        ck_assert_int_eq(tenant_registry_init(&r, &pol, 1), 0);
        for (int i = 0; i < TENANT_RETIRED_MAX + 5; i++) {
                snprintf(pol.tenants[1].name, sizeof(pol.tenants[1].name), "t%d", i);
                ck_assert_int_eq(tenant_registry_apply(&r, &pol), 0);
        }
        ck_assert_int_eq(r.nretired, TENANT_RETIRED_MAX); /* the oldest went */
        /* "a" and t0..t259 were removed, t260 is current: the newest retired is t259 */
        ck_assert_str_eq(r.retired[TENANT_RETIRED_MAX - 1]->pol.name, "t259");
        ck_assert_str_eq(r.retired[0]->pol.name, "t4");
        tenant_registry_deinit(&r);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("tenant");
        TCase *tc = tcase_create("core");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_runtime_quotas_and_reload);
        tcase_add_test(tc, test_retired_bounded);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

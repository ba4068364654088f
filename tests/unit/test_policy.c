/* Unit tests of the tenant and scheduler configuration (policy/policy.c): defaults, every key
 * of a tenant and of the scheduler section, every rejection naming the offending key, and
 * which tenant a client's credentials (uid, gid, supplementary groups, requested name) match. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

/* ---- helpers ---- */

static json_t *js(const char *text)
{
        json_error_t je;
        json_t *v = json_loads(text, 0, &je);

        ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, je.text);
        return v;
}

/* Parse tenants/scheduler texts (NULL = section absent) into a fresh config. */
static int parse(struct policy_config *c, const char *tenants, const char *sched, char *err,
                 size_t errlen)
{
        json_t *t = tenants ? js(tenants) : NULL;
        json_t *s = sched ? js(sched) : NULL;

        policy_config_init(c);
        err[0] = '\0';
        int e = policy_config_parse(c, t, s, err, errlen);
        json_decref(t);
        json_decref(s);
        return e;
}

/* The config is big (256 tenants); keep it off the test's stack. */
static struct policy_config *cfg_new(void)
{
        struct policy_config *c = malloc(sizeof(*c));
        ck_assert_ptr_nonnull(c);
        return c;
}

/* Expect -EINVAL with a message that starts with the key path `key` followed by ':'. */
static void expect_error(const char *tenants, const char *sched, const char *key)
{
        struct policy_config *c = cfg_new();
        char err[256];
        size_t n = strlen(key);

        int e = parse(c, tenants, sched, err, sizeof(err));
        ck_assert_msg(e == -EINVAL, "tenants=%s scheduler=%s: expected -EINVAL, got %d",
                      tenants ? tenants : "-", sched ? sched : "-", e);
        ck_assert_msg(strncmp(err, key, n) == 0 && err[n] == ':',
                      "error \"%s\" does not name \"%s\"", err, key);
        ck_assert_msg(strlen(err) > n + 2, "error \"%s\" says nothing after the key", err);
        free(c);
}

/* ---- parsing ---- */

START_TEST(test_defaults)
{
        struct policy_config *c = cfg_new();
        char err[128];

        ck_assert_int_eq(parse(c, NULL, NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(c->ntenants, 1);
        ck_assert_str_eq(c->tenants[0].name, "default");
        ck_assert_int_eq(c->tenants[0].klass, POLICY_CLASS_NORMAL);
        ck_assert_double_eq(c->tenants[0].weight, 1.0);
        ck_assert_int_eq(c->tenants[0].nuids, 0);
        ck_assert_int_eq(c->tenants[0].ngids, 0);
        ck_assert_uint_eq(c->tenants[0].quota_total, 0);
        ck_assert_uint_eq(c->tenants[0].quota_per_device, 0);
        ck_assert_uint_eq(c->tenants[0].max_streams, 0);
        ck_assert_uint_eq(c->tenants[0].max_queued_tasks, 0);
        ck_assert_uint_eq(c->tenants[0].devices, ~0ull);
        ck_assert_int_eq(c->placement, POLICY_PLACE_LEAST_LOADED);
        ck_assert_double_eq(c->min_share, 0.05);
        ck_assert_uint_eq(c->tile_ns, 1000000);

        /* empty sections change nothing */
        ck_assert_int_eq(parse(c, "[]", "{}", err, sizeof(err)), 0);
        ck_assert_int_eq(c->ntenants, 1);
        ck_assert_uint_eq(c->tile_ns, 1000000);
        ck_assert_double_eq(c->min_share, 0.05);

        /* a tenant with only a name gets the defaults */
        ck_assert_int_eq(parse(c, "[{\"name\": \"a\"}]", NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(c->ntenants, 2);
        ck_assert_str_eq(c->tenants[1].name, "a");
        ck_assert_int_eq(c->tenants[1].klass, POLICY_CLASS_NORMAL);
        ck_assert_double_eq(c->tenants[1].weight, 1.0);
        ck_assert_uint_eq(c->tenants[1].devices, ~0ull);
        free(c);
}
END_TEST

START_TEST(test_every_key)
{
        struct policy_config *c = cfg_new();
        char err[256];
        const char *tenants =
                "[{\"name\": \"inference\", \"class\": \"latency-critical\", \"weight\": 4,"
                "  \"uids\": [1000, 1001], \"gids\": [50],"
                "  \"memory_quota\": {\"total\": 1073741824, \"per_device\": 536870912},"
                "  \"max_streams\": 64, \"max_queued_tasks\": 4096, \"devices\": [0, 2, 63]},"
                " {\"name\": \"train.job-1_x\", \"class\": \"normal\", \"weight\": 0.5},"
                " {\"name\": \"batch\", \"class\": \"best-effort\"}]";
        const char *sched = "{\"placement\": \"binpack\", \"min_best_effort_share\": 0.2,"
                            " \"tile_us\": 250}";

        ck_assert_msg(parse(c, tenants, sched, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(c->ntenants, 4);
        const struct policy_tenant *t = &c->tenants[1];
        ck_assert_str_eq(t->name, "inference");
        ck_assert_int_eq(t->klass, POLICY_CLASS_LATENCY_CRITICAL);
        ck_assert_double_eq(t->weight, 4.0);
        ck_assert_int_eq(t->nuids, 2);
        ck_assert_uint_eq(t->uids[0], 1000);
        ck_assert_uint_eq(t->uids[1], 1001);
        ck_assert_int_eq(t->ngids, 1);
        ck_assert_uint_eq(t->gids[0], 50);
        ck_assert_uint_eq(t->quota_total, 1073741824ull);
        ck_assert_uint_eq(t->quota_per_device, 536870912ull);
        ck_assert_uint_eq(t->max_streams, 64);
        ck_assert_uint_eq(t->max_queued_tasks, 4096);
        ck_assert_uint_eq(t->devices, (1ull << 0) | (1ull << 2) | (1ull << 63));
        ck_assert_str_eq(c->tenants[2].name, "train.job-1_x");
        ck_assert_int_eq(c->tenants[2].klass, POLICY_CLASS_NORMAL);
        ck_assert_double_eq(c->tenants[2].weight, 0.5);
        ck_assert_int_eq(c->tenants[3].klass, POLICY_CLASS_BEST_EFFORT);
        ck_assert_int_eq(c->placement, POLICY_PLACE_BINPACK);
        ck_assert_double_eq(c->min_share, 0.2);
        ck_assert_uint_eq(c->tile_ns, 250000);

        ck_assert_int_eq(parse(c, NULL, "{\"placement\": \"spread\"}", err, sizeof(err)), 0);
        ck_assert_int_eq(c->placement, POLICY_PLACE_SPREAD);
        ck_assert_int_eq(parse(c, NULL, "{\"placement\": \"least-loaded\"}", err, sizeof(err)), 0);
        ck_assert_int_eq(c->placement, POLICY_PLACE_LEAST_LOADED);
        /* the bounds themselves are accepted */
        ck_assert_int_eq(parse(c, NULL, "{\"min_best_effort_share\": 0, \"tile_us\": 10}", err,
                               sizeof(err)), 0);
        ck_assert_double_eq(c->min_share, 0.0);
        ck_assert_uint_eq(c->tile_ns, 10000);
        ck_assert_int_eq(parse(c, NULL, "{\"min_best_effort_share\": 0.5, \"tile_us\": 1000000}",
                               err, sizeof(err)), 0);
        ck_assert_uint_eq(c->tile_ns, 1000000000ull);
        /* an empty devices list allows no device */
        ck_assert_int_eq(parse(c, "[{\"name\": \"none\", \"devices\": []}]", NULL, err,
                               sizeof(err)), 0);
        ck_assert_uint_eq(c->tenants[1].devices, 0);
        free(c);
}
END_TEST

START_TEST(test_names_and_strings)
{
        ck_assert_str_eq(policy_class_name(POLICY_CLASS_LATENCY_CRITICAL), "latency-critical");
        ck_assert_str_eq(policy_class_name(POLICY_CLASS_NORMAL), "normal");
        ck_assert_str_eq(policy_class_name(POLICY_CLASS_BEST_EFFORT), "best-effort");
        ck_assert_str_eq(policy_class_name(POLICY_CLASS_COUNT), "?");
        ck_assert_str_eq(policy_placement_name(POLICY_PLACE_LEAST_LOADED), "least-loaded");
        ck_assert_str_eq(policy_placement_name(POLICY_PLACE_SPREAD), "spread");
        ck_assert_str_eq(policy_placement_name(POLICY_PLACE_BINPACK), "binpack");
}
END_TEST

/* Every rejection names the key it is about. */
START_TEST(test_errors_name_the_key)
{
        static const struct {
                const char *tenants, *sched, *key;
        } cases[] = {
                { "{}", NULL, "tenants" },
                { "[1]", NULL, "tenants[0]" },
                { "[{\"name\": \"a\", \"colour\": 1}]", NULL, "tenants[0].colour" },
                { "[{\"class\": \"normal\"}]", NULL, "tenants[0].name" },
                { "[{\"name\": \"\"}]", NULL, "tenants[0].name" },
                { "[{\"name\": 7}]", NULL, "tenants[0].name" },
                { "[{\"name\": \"a b\"}]", NULL, "tenants[0].name" },
                { "[{\"name\": \"a/b\"}]", NULL, "tenants[0].name" },
                { "[{\"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}]", NULL, "tenants[0].name" }, /* 64 */
                { "[{\"name\": \"a\"}, {\"name\": \"b\", \"class\": \"urgent\"}]", NULL,
                  "tenants[1].class" },
                { "[{\"name\": \"a\", \"class\": 0}]", NULL, "tenants[0].class" },
                { "[{\"name\": \"a\", \"weight\": 0}]", NULL, "tenants[0].weight" },
                { "[{\"name\": \"a\", \"weight\": -1}]", NULL, "tenants[0].weight" },
                { "[{\"name\": \"a\", \"weight\": 2e6}]", NULL, "tenants[0].weight" },
                { "[{\"name\": \"a\", \"weight\": \"3\"}]", NULL, "tenants[0].weight" },
                { "[{\"name\": \"a\", \"uids\": 5}]", NULL, "tenants[0].uids" },
                { "[{\"name\": \"a\", \"uids\": [-1]}]", NULL, "tenants[0].uids" },
                { "[{\"name\": \"a\", \"uids\": [\"root\"]}]", NULL, "tenants[0].uids" },
                { "[{\"name\": \"a\", \"uids\": [4294967295]}]", NULL, "tenants[0].uids" },
                { "[{\"name\": \"a\", \"uids\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,"
                  "19,20,21,22,23,24,25,26,27,28,29,30,31,32,33]}]", NULL, "tenants[0].uids" },
                { "[{\"name\": \"a\", \"gids\": [1.5]}]", NULL, "tenants[0].gids" },
                { "[{\"name\": \"a\", \"memory_quota\": 5}]", NULL, "tenants[0].memory_quota" },
                { "[{\"name\": \"a\", \"memory_quota\": {\"max\": 5}}]", NULL,
                  "tenants[0].memory_quota.max" },
                { "[{\"name\": \"a\", \"memory_quota\": {\"total\": -5}}]", NULL,
                  "tenants[0].memory_quota.total" },
                { "[{\"name\": \"a\", \"memory_quota\": {\"per_device\": \"1G\"}}]", NULL,
                  "tenants[0].memory_quota.per_device" },
                { "[{\"name\": \"a\", \"max_streams\": 1048577}]", NULL, "tenants[0].max_streams" },
                { "[{\"name\": \"a\", \"max_streams\": -1}]", NULL, "tenants[0].max_streams" },
                { "[{\"name\": \"a\", \"max_queued_tasks\": 16777217}]", NULL,
                  "tenants[0].max_queued_tasks" },
                { "[{\"name\": \"a\", \"max_queued_tasks\": 1.0}]", NULL,
                  "tenants[0].max_queued_tasks" },
                { "[{\"name\": \"a\", \"devices\": 3}]", NULL, "tenants[0].devices" },
                { "[{\"name\": \"a\", \"devices\": [64]}]", NULL, "tenants[0].devices" },
                { "[{\"name\": \"a\", \"devices\": [-1]}]", NULL, "tenants[0].devices" },
                { "[{\"name\": \"a\"}, {\"name\": \"b\"}, {\"name\": \"a\"}]", NULL,
                  "tenants[2].name" },
                { NULL, "[]", "scheduler" },
                { NULL, "{\"quantum\": 5}", "scheduler.quantum" },
                { NULL, "{\"placement\": \"random\"}", "scheduler.placement" },
                { NULL, "{\"placement\": 1}", "scheduler.placement" },
                { NULL, "{\"min_best_effort_share\": 0.51}", "scheduler.min_best_effort_share" },
                { NULL, "{\"min_best_effort_share\": -0.1}", "scheduler.min_best_effort_share" },
                { NULL, "{\"min_best_effort_share\": \"5%\"}", "scheduler.min_best_effort_share" },
                { NULL, "{\"tile_us\": 9}", "scheduler.tile_us" },
                { NULL, "{\"tile_us\": 0}", "scheduler.tile_us" },
                { NULL, "{\"tile_us\": 1000001}", "scheduler.tile_us" },
                { NULL, "{\"tile_us\": 100.5}", "scheduler.tile_us" },
                { NULL, "{\"tile_us\": -100}", "scheduler.tile_us" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                expect_error(cases[i].tenants, cases[i].sched, cases[i].key);
}
END_TEST

START_TEST(test_too_many_tenants)
{
        json_t *arr = json_array();
        struct policy_config *c = cfg_new();
        char err[256];

        for (int i = 0; i < POLICY_MAX_TENANTS; i++) {
                char name[16];
                snprintf(name, sizeof(name), "t%d", i);
                json_array_append_new(arr, json_pack("{s:s}", "name", name));
        }
        policy_config_init(c);
        ck_assert_int_eq(policy_config_parse(c, arr, NULL, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strncmp(err, "tenants:", 8) == 0, "%s", err);
        /* one fewer fits next to the default tenant */
        json_array_remove(arr, 0);
        policy_config_init(c);
        ck_assert_int_eq(policy_config_parse(c, arr, NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(c->ntenants, POLICY_MAX_TENANTS);
        json_decref(arr);
        free(c);
}
END_TEST

START_TEST(test_configure_default)
{
        struct policy_config *c = cfg_new();
        char err[256];

        ck_assert_int_eq(parse(c, "[{\"name\": \"a\"}, {\"name\": \"default\", \"class\": "
                                  "\"best-effort\", \"weight\": 2, \"max_streams\": 8}]",
                               NULL, err, sizeof(err)), 0);
        /* configures slot 0 in place, adds no tenant */
        ck_assert_int_eq(c->ntenants, 2);
        ck_assert_str_eq(c->tenants[0].name, "default");
        ck_assert_int_eq(c->tenants[0].klass, POLICY_CLASS_BEST_EFFORT);
        ck_assert_double_eq(c->tenants[0].weight, 2.0);
        ck_assert_uint_eq(c->tenants[0].max_streams, 8);
        ck_assert_str_eq(c->tenants[1].name, "a");
        ck_assert_int_eq(policy_tenant_find(c, "default"), 0);
        ck_assert_int_eq(policy_tenant_find(c, "a"), 1);
        ck_assert_int_eq(policy_tenant_find(c, "b"), -1);
        free(c);
}
END_TEST

/* "default" is a name like any other: configuring it twice is a duplicate. */
START_TEST(test_duplicate_default)
{
        expect_error("[{\"name\": \"default\"},"
                     " {\"name\": \"default\", \"class\": \"best-effort\"}]",
                     NULL, "tenants[1].name");
}
END_TEST

/* ---- matching ---- */

static struct policy_config *match_config(void)
{
        struct policy_config *c = cfg_new();
        char err[256];

        ck_assert_int_eq(parse(c,
                               "[{\"name\": \"by-uid\", \"uids\": [1000, 1001]},"
                               " {\"name\": \"by-gid\", \"gids\": [200, 300]},"
                               " {\"name\": \"both\", \"uids\": [2000], \"gids\": [400]},"
                               " {\"name\": \"nobody-matches\"},"
                               " {\"name\": \"also-1000\", \"uids\": [1000]}]",
                               NULL, err, sizeof(err)), 0);
        return c;
}

START_TEST(test_match_uid)
{
        struct policy_config *c = match_config();

        ck_assert_int_eq(policy_tenant_match(c, NULL, 1000, 1000, NULL, 0), 1);
        ck_assert_int_eq(policy_tenant_match(c, NULL, 1001, 5, NULL, 0), 1);
        ck_assert_int_eq(policy_tenant_match(c, NULL, 2000, 5, NULL, 0), 3);
        free(c);
}
END_TEST

START_TEST(test_match_gid_and_groups)
{
        struct policy_config *c = match_config();
        gid_t groups[] = { 7, 300 };
        gid_t other[] = { 7, 8, 9 };

        ck_assert_int_eq(policy_tenant_match(c, NULL, 50, 200, NULL, 0), 2);
        ck_assert_int_eq(policy_tenant_match(c, NULL, 50, 50, groups, 2), 2);
        ck_assert_int_eq(policy_tenant_match(c, NULL, 50, 400, NULL, 0), 3);
        ck_assert_int_eq(policy_tenant_match(c, NULL, 50, 50, other, 3), 0);
        free(c);
}
END_TEST

START_TEST(test_match_fallback_and_order)
{
        struct policy_config *c = match_config();

        /* nothing matches: the default tenant */
        ck_assert_int_eq(policy_tenant_match(c, NULL, 4242, 4242, NULL, 0), 0);
        /* two tenants match uid 1000: the first in configuration order wins */
        ck_assert_int_eq(policy_tenant_match(c, NULL, 1000, 1, NULL, 0), 1);
        free(c);
}
END_TEST

START_TEST(test_match_requested)
{
        struct policy_config *c = match_config();
        gid_t groups[] = { 300 };

        /* allowed: the credentials match the requested tenant */
        ck_assert_int_eq(policy_tenant_match(c, "by-uid", 1001, 1, NULL, 0), 1);
        ck_assert_int_eq(policy_tenant_match(c, "also-1000", 1000, 1, NULL, 0), 5);
        ck_assert_int_eq(policy_tenant_match(c, "by-gid", 9, 9, groups, 1), 2);
        /* refused: the tenant exists, the credentials do not match it */
        ck_assert_int_eq(policy_tenant_match(c, "by-uid", 1002, 1, NULL, 0), -EPERM);
        ck_assert_int_eq(policy_tenant_match(c, "nobody-matches", 1000, 200, groups, 1), -EPERM);
        ck_assert_int_eq(policy_tenant_match(c, "by-gid", 1000, 1000, NULL, 0), -EPERM);
        /* unknown name */
        ck_assert_int_eq(policy_tenant_match(c, "no-such-tenant", 1000, 1, NULL, 0), -ENOENT);
        ck_assert_int_eq(policy_tenant_match(c, "", 1000, 1, NULL, 0), -ENOENT);
        /* the default tenant is only for users no tenant matches: uid 1000 matches by-uid,
         * gid 200 and group 300 by-gid; 4242 matches nothing */
        ck_assert_int_eq(policy_tenant_match(c, "default", 1000, 200, groups, 1), -EPERM);
        ck_assert_int_eq(policy_tenant_match(c, "default", 1000, 1, NULL, 0), -EPERM);
        ck_assert_int_eq(policy_tenant_match(c, "default", 50, 50, groups, 1), -EPERM);
        ck_assert_int_eq(policy_tenant_match(c, "default", 4242, 4242, NULL, 0), 0);
        gid_t unrelated[] = { 7, 8, 9 };
        ck_assert_int_eq(policy_tenant_match(c, "default", 50, 50, unrelated, 3), 0);
        free(c);
}
END_TEST

static Suite *policy_suite(void)
{
        Suite *s = suite_create("policy");
        TCase *tc = tcase_create("parse");

        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_every_key);
        tcase_add_test(tc, test_names_and_strings);
        tcase_add_test(tc, test_errors_name_the_key);
        tcase_add_test(tc, test_too_many_tenants);
        tcase_add_test(tc, test_configure_default);
        tcase_add_test(tc, test_duplicate_default);
        suite_add_tcase(s, tc);

        tc = tcase_create("match");
        tcase_add_test(tc, test_match_uid);
        tcase_add_test(tc, test_match_gid_and_groups);
        tcase_add_test(tc, test_match_fallback_and_order);
        tcase_add_test(tc, test_match_requested);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(policy_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

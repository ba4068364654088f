/* Unit tests of the simulated device's identity and telemetry (daemon/backend/sim.c): UUIDs,
 * bus ids and topology from the profile and index; power following the load of the period
 * and temperature following power with the thermal time constant; ECC counters injected
 * through the fault hooks, kept by a fault clear, bad counts refused; the link names of
 * device_link (daemon/exec/device.c). */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/backend/backend.h"
#include "daemon/api/manage.h"
#include "daemon/exec/device.h"

struct harness {
        struct event_base *base;
        struct backend *b;
        int done;
};

static void on_complete(struct exec_unit *u, void *userdata)
{
        ((struct harness *)userdata)->done++;
}

static void harness_init(struct harness *h, const char *profile, int ndev)
{
        char err[256];

        memset(h, 0, sizeof(*h));
        h->base = event_base_new();
        ck_assert_ptr_nonnull(h->base);
        /* model mode: a unit's modelled duration is held on the loop, no worker threads */
        ck_assert_int_eq(sim_backend_new(h->base, ndev, profile, 1, 1, 0, on_complete, h, &h->b, err,
                                         sizeof(err)), 0);
}

static void harness_fini(struct harness *h)
{
        h->b->ops->destroy(h->b);
        event_base_free(h->base);
}

static void sleep_s(double s)
{
        struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
        nanosleep(&ts, NULL);
}

static struct backend_health health(struct harness *h, int dev)
{
        struct backend_health r = { .slow = 1.0 };
        ck_assert_int_eq(h->b->ops->health(h->b, dev, &r), 0);
        return r;
}

START_TEST(test_identity)
{
        struct harness h;
        struct backend_device_desc d[9];

        harness_init(&h, "910B3", 9);
        for (int i = 0; i < 9; i++) {
                ck_assert_int_eq(h.b->ops->device_describe(h.b, i, &d[i]), 0);
                ck_assert_uint_eq(strlen(d[i].uuid), 36);
                ck_assert_int_eq(d[i].uuid[14], '4'); /* version 4 form */
                ck_assert_uint_eq(strlen(d[i].bus_id), 12);
                ck_assert_int_eq(d[i].hccs_group, i / 8); /* rings of eight */
                ck_assert_int_eq(d[i].pcie_switch, i / 2);
                ck_assert(d[i].power_limit_w == 350);
                for (int j = 0; j < i; j++) {
                        ck_assert_str_ne(d[i].uuid, d[j].uuid);
                        ck_assert_str_ne(d[i].serial, d[j].serial);
                        ck_assert_str_ne(d[i].bus_id, d[j].bus_id);
                }
        }
        ck_assert_str_eq(d[0].bus_id, "0000:c1:00.0");
        harness_fini(&h);

        /* the same on the next start */
        struct backend_device_desc again;
        harness_init(&h, "910B3", 1);
        ck_assert_int_eq(h.b->ops->device_describe(h.b, 0, &again), 0);
        ck_assert_str_eq(again.uuid, d[0].uuid);
        harness_fini(&h);

        /* a PCIe card: no HCCS */
        harness_init(&h, "310P3", 2);
        ck_assert_int_eq(h.b->ops->device_describe(h.b, 1, &again), 0);
        ck_assert_int_eq(again.hccs_group, -1);
        ck_assert(again.power_limit_w == 72);
        harness_fini(&h);
}
END_TEST

START_TEST(test_power_and_temperature_follow_load)
{
        struct harness h;
        struct exec_item item = { .kind = EXEC_MEMSET, .len = 0, .model_ns = 1000000000ull };
        struct exec_item *items[1] = { &item };
        struct exec_unit u = { .device = 0, .engine = OPS_ENGINE_CUBE, .cores = 20, .nitems = 1,
                               .items = items };
        struct backend_device_desc d;

        harness_init(&h, "910B3", 2);
        ck_assert_int_eq(h.b->ops->device_describe(h.b, 0, &d), 0);
        item.dst = d.mem_addr;
        sleep_s(0.6);
        struct backend_health idle = health(&h, 0);
        ck_assert_double_eq_tol(idle.power_w, 90, 1e-9);
        ck_assert_double_eq_tol(idle.temperature_c, 37, 1e-9);
        ck_assert_double_eq_tol(idle.clock_mhz, 1800, 1e-9);

        /* every cube core busy for a second: 60% of the way from idle to the limit */
        ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
        while (h.done < 1)
                ck_assert_int_ge(event_base_loop(h.base, EVLOOP_ONCE), 0);
        struct backend_health hot = health(&h, 0);
        ck_assert_msg(hot.power_w > 200 && hot.power_w <= 90 + 260 * 0.6 + 1e-6, "power %g", hot.power_w);
        /* one second of a 15 s time constant towards ~60 C: up by about 1.5 C, not all the way */
        ck_assert_msg(hot.temperature_c > 37.5 && hot.temperature_c < 40, "temperature %g",
                      hot.temperature_c);
        /* a call within half a second keeps the figures */
        struct backend_health same = health(&h, 0);
        ck_assert_double_eq_tol(same.power_w, hot.power_w, 1e-9);
        /* the other device stayed idle */
        sleep_s(0.6);
        ck_assert_double_eq_tol(health(&h, 1).power_w, 90, 1e-9);
        /* idle again: power drops at once, the temperature only slowly */
        struct backend_health cooling = health(&h, 0);
        ck_assert_double_eq_tol(cooling.power_w, 90, 1e-9);
        ck_assert(cooling.temperature_c < hot.temperature_c && cooling.temperature_c > 37);
        harness_fini(&h);
}
END_TEST

START_TEST(test_ecc_counters)
{
        struct harness h;

        ck_assert_int_eq(manage_fault_parse("ecc-corrected"), FAULT_ECC_CORRECTED);
        ck_assert_int_eq(manage_fault_parse("ecc-uncorrected"), FAULT_ECC_UNCORRECTED);
        ck_assert_str_eq(manage_fault_name(FAULT_ECC_UNCORRECTED), "ecc-uncorrected");
        harness_init(&h, "910B3", 2);
        ck_assert_int_eq(h.b->faults->inject(h.b, 1, FAULT_ECC_CORRECTED, 3), 0);
        ck_assert_int_eq(h.b->faults->inject(h.b, 1, FAULT_ECC_CORRECTED, 2), 0);
        ck_assert_int_eq(h.b->faults->inject(h.b, 1, FAULT_ECC_UNCORRECTED, 1), 0);
        ck_assert_int_eq(h.b->faults->inject(h.b, 1, FAULT_ECC_CORRECTED, 0), -EINVAL);
        ck_assert_int_eq(h.b->faults->inject(h.b, 1, FAULT_ECC_UNCORRECTED, NAN), -EINVAL);
        struct backend_health r = health(&h, 1);
        ck_assert_uint_eq(r.ecc_corrected, 5);
        ck_assert_uint_eq(r.ecc_uncorrected, 1);
        ck_assert_int_eq(r.failed, 0); /* a count, not a failed device */
        ck_assert_uint_eq(health(&h, 0).ecc_corrected, 0);
        ck_assert_int_eq(h.b->faults->clear(h.b, 1), 0);
        ck_assert_uint_eq(health(&h, 1).ecc_corrected, 5);
        harness_fini(&h);
}
END_TEST

START_TEST(test_links)
{
        struct device d[10];

        memset(d, 0, sizeof(d));
        for (int i = 0; i < 10; i++) {
                d[i].desc.hccs_group = i < 8 ? 0 : -1;
                d[i].desc.pcie_switch = i / 2;
                d[i].desc.numa_node = (i % 8) / 4;
        }
        ck_assert_str_eq(device_link(&d[0], &d[0]), "X");
        ck_assert_str_eq(device_link(&d[0], &d[7]), "HCCS");
        ck_assert_str_eq(device_link(&d[8], &d[9]), "PIX");
        ck_assert_str_eq(device_link(&d[9], &d[0]), "NODE");
        ck_assert_str_eq(device_link(&d[9], &d[4]), "SYS");
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("telemetry");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_identity);
        tcase_add_test(tc, test_power_and_temperature_follow_load);
        tcase_add_test(tc, test_ecc_counters);
        tcase_add_test(tc, test_links);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

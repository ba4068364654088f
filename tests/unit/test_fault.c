/* Unit tests of fault injection: the fault names (daemon/api/manage.c) and the simulated
 * backend's faults (daemon/backend/sim.c) — fail-next fails exactly N items even with
 * concurrent workers and cancels the rest of a chain, fail-device fails every item until
 * cleared, slow stretches model-mode durations, bad arguments are refused. Also the
 * backend's gang units (several workers on one unit): items still run in order, a failure
 * or a cancel ends the unit as a chain's, a yield leaves the items after the boundary
 * unstarted, and gangs beside plain units on a small pool all come back. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/backend.h"
#include "daemon/api/manage.h"
#include "proto/errors.h"

#define MAX_UNITS 64

struct harness {
        struct event_base *base;
        struct backend *b;
        struct backend_device_desc desc;
        int done;
};

static void on_complete(struct exec_unit *u, void *userdata)
{
        ((struct harness *)userdata)->done++;
}

static void harness_init(struct harness *h, int mode, int workers)
{
        char err[256];

        memset(h, 0, sizeof(*h));
        h->base = event_base_new();
        ck_assert_ptr_nonnull(h->base);
        ck_assert_int_eq(sim_backend_new(h->base, 2, "910B3", mode, workers, 0, on_complete, h,
                                         &h->b, err, sizeof(err)),
                         0);
        ck_assert_int_eq(h->b->ops->device_describe(h->b, 0, &h->desc), 0);
}

static void harness_fini(struct harness *h)
{
        h->b->ops->destroy(h->b);
        event_base_free(h->base);
}

/* Run the loop until n units in all have completed. */
static void wait_done(struct harness *h, int n)
{
        while (h->done < n)
                ck_assert_int_ge(event_base_loop(h->base, EVLOOP_ONCE), 0);
}

/* npud's view of device 0's memory at a device address (the backend's mapping). */
static unsigned char *host_of(struct harness *h, uint64_t addr)
{
        void *host = NULL;

        ck_assert_int_eq(h->b->ops->mem_map(h->b, 0, addr, 1, &host), 0);
        return host;
}

static void memset_item(struct harness *h, struct exec_item *it, int i)
{
        memset(it, 0, sizeof(*it));
        it->kind = EXEC_MEMSET;
        it->dst = h->desc.mem_addr + (uint64_t)i * 4096; /* a device address */
        it->len = 4096;
        it->value = 0x5a;
        it->model_ns = 1000;
}

/* Submit one unit of nitems memsets on device 0 and wait for it. */
static void run_unit(struct harness *h, struct exec_unit *u, struct exec_item **items,
                     int nitems)
{
        int before = h->done;

        memset(u, 0, sizeof(*u));
        u->device = 0;
        u->cores = 1;
        u->nitems = nitems;
        u->items = items;
        ck_assert_int_eq(h->b->ops->submit(h->b, u), 0);
        wait_done(h, before + 1);
}

START_TEST(test_names)
{
        ck_assert_int_eq(manage_fault_parse("fail-next"), FAULT_FAIL_NEXT);
        ck_assert_int_eq(manage_fault_parse("fail-device"), FAULT_FAIL_DEVICE);
        ck_assert_int_eq(manage_fault_parse("slow"), FAULT_SLOW);
        ck_assert_int_eq(manage_fault_parse("Slow"), -1);
        ck_assert_int_eq(manage_fault_parse(""), -1);
        ck_assert_int_eq(manage_fault_parse(NULL), -1);
        for (int k = FAULT_FAIL_NEXT; k <= FAULT_SLOW; k++)
                ck_assert_int_eq(manage_fault_parse(manage_fault_name(k)), k);
        ck_assert_str_eq(manage_fault_name(0), "unknown");
        ck_assert_str_eq(manage_fault_name(99), "unknown");
}
END_TEST

START_TEST(test_bad_arguments)
{
        struct harness h;

        harness_init(&h, 0, 1);
        ck_assert_ptr_nonnull(h.b->faults->inject);
        ck_assert_ptr_nonnull(h.b->faults->clear);
        ck_assert_int_eq(h.b->faults->inject(h.b, 2, FAULT_FAIL_DEVICE, 0), -ENODEV);
        ck_assert_int_eq(h.b->faults->inject(h.b, -1, FAULT_FAIL_DEVICE, 0), -ENODEV);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, 99, 1), -EINVAL);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_FAIL_NEXT, 0), -EINVAL);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_SLOW, 0), -EINVAL);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_SLOW, -2), -EINVAL);
        ck_assert_int_eq(h.b->faults->clear(h.b, 2), -ENODEV);
        /* mappings stay inside a device's memory */
        void *host;
        ck_assert_int_eq(h.b->ops->mem_map(h.b, 0, h.desc.mem_addr, h.desc.mem_size, &host), 0);
        ck_assert_int_eq(h.b->ops->mem_map(h.b, 0, h.desc.mem_addr - 1, 1, &host), -ERANGE);
        ck_assert_int_eq(h.b->ops->mem_map(h.b, 0, h.desc.mem_addr + h.desc.mem_size, 1, &host), -ERANGE);
        ck_assert_int_eq(h.b->ops->mem_map(h.b, 0, h.desc.mem_addr + 4096, h.desc.mem_size, &host), -ERANGE);
        ck_assert_int_eq(h.b->ops->mem_map(h.b, 2, h.desc.mem_addr, 1, &host), -ENODEV);
        ck_assert_uint_ne(h.desc.mem_addr, 0);
        harness_fini(&h);
}
END_TEST

START_TEST(test_fail_next)
{
        struct harness h;
        struct exec_item items[4], *p[4];
        struct exec_unit u;

        harness_init(&h, 0, 2);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_FAIL_NEXT, 2), 0);
        for (int i = 0; i < 4; i++) {
                memset_item(&h, &items[i], i);
                p[i] = &items[i];
                run_unit(&h, &u, &p[i], 1);
        }
        ck_assert_int_eq(items[0].status, PROTO_E_DEVICE);
        ck_assert_str_eq(items[0].err, "injected fault");
        ck_assert_int_eq(items[1].status, PROTO_E_DEVICE);
        ck_assert_int_eq(items[2].status, 0);
        ck_assert_int_eq(items[3].status, 0);
        /* a failed item did not run; a later one did */
        ck_assert_int_eq(host_of(&h, items[0].dst)[0], 0);
        ck_assert_int_eq(host_of(&h, items[2].dst)[0], 0x5a);
        harness_fini(&h);
}
END_TEST

START_TEST(test_fail_next_chain)
{
        struct harness h;
        struct exec_item items[3], *p[3];
        struct exec_unit u;

        harness_init(&h, 0, 1);
        for (int i = 0; i < 3; i++) {
                memset_item(&h, &items[i], i);
                p[i] = &items[i];
        }
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_FAIL_NEXT, 1), 0);
        run_unit(&h, &u, p, 3);
        ck_assert_int_eq(items[0].status, PROTO_E_DEVICE);
        ck_assert_int_eq(items[1].status, PROTO_E_CANCELLED);
        ck_assert_int_eq(items[2].status, PROTO_E_CANCELLED);
        harness_fini(&h);
}
END_TEST

START_TEST(test_fail_next_concurrent)
{
        struct harness h;
        static struct exec_item items[MAX_UNITS];
        static struct exec_item *p[MAX_UNITS];
        static struct exec_unit u[MAX_UNITS];
        int failed = 0;

        harness_init(&h, 0, 4);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_FAIL_NEXT, 10), 0);
        for (int i = 0; i < MAX_UNITS; i++) {
                memset_item(&h, &items[i], i);
                p[i] = &items[i];
                memset(&u[i], 0, sizeof(u[i]));
                u[i].nitems = 1;
                u[i].items = &p[i];
                ck_assert_int_eq(h.b->ops->submit(h.b, &u[i]), 0);
        }
        wait_done(&h, MAX_UNITS);
        for (int i = 0; i < MAX_UNITS; i++)
                failed += items[i].status == PROTO_E_DEVICE;
        ck_assert_int_eq(failed, 10);
        harness_fini(&h);
}
END_TEST

START_TEST(test_fail_device)
{
        struct harness h;
        struct exec_item items[4], *p[4];
        struct exec_unit u;

        for (int mode = 0; mode <= 1; mode++) {
                harness_init(&h, mode, 1);
                ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_FAIL_DEVICE, 0), 0);
                for (int i = 0; i < 3; i++) {
                        memset_item(&h, &items[i], i);
                        p[i] = &items[i];
                        run_unit(&h, &u, &p[i], 1);
                        ck_assert_int_eq(items[i].status, PROTO_E_DEVICE);
                        ck_assert_ptr_nonnull(strstr(items[i].err, "device 0 has failed"));
                        ck_assert_int_eq(host_of(&h, items[i].dst)[0], 0);
                }
                /* the other device is not affected */
                memset_item(&h, &items[3], 3);
                p[3] = &items[3];
                memset(&u, 0, sizeof(u));
                u.device = 1;
                u.nitems = 1;
                u.items = &p[3];
                int before = h.done;
                ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
                wait_done(&h, before + 1);
                ck_assert_int_eq(items[3].status, 0);
                /* cleared: it works again */
                ck_assert_int_eq(h.b->faults->clear(h.b, 0), 0);
                memset_item(&h, &items[0], 0);
                run_unit(&h, &u, &p[0], 1);
                ck_assert_int_eq(items[0].status, 0);
                ck_assert_int_eq(host_of(&h, items[0].dst)[0], 0x5a);
                harness_fini(&h);
        }
}
END_TEST

START_TEST(test_slow_model)
{
        struct harness h;
        struct exec_item it, *p = &it;
        struct exec_unit u;

        harness_init(&h, 1, 0);
        memset_item(&h, &it, 0);
        it.model_ns = 10000000; /* 10 ms */
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_SLOW, 5), 0);
        run_unit(&h, &u, &p, 1);
        ck_assert_int_eq(it.status, 0);
        ck_assert_uint_ge(u.end_ns - u.start_ns, 49000000);
        ck_assert_int_eq(h.b->faults->clear(h.b, 0), 0);
        memset_item(&h, &it, 0);
        it.model_ns = 10000000;
        run_unit(&h, &u, &p, 1);
        ck_assert_uint_ge(u.end_ns - u.start_ns, 9000000);
        ck_assert_uint_lt(u.end_ns - u.start_ns, 45000000);
        harness_fini(&h);
}
END_TEST

START_TEST(test_slow_compute)
{
        struct harness h;
        struct exec_item it, *p = &it;
        struct exec_unit u;

        /* Slowed items still produce their results; they only take longer. */
        harness_init(&h, 0, 1);
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_SLOW, 50), 0);
        memset_item(&h, &it, 0);
        run_unit(&h, &u, &p, 1);
        ck_assert_int_eq(it.status, 0);
        void *host = NULL; /* read it back through a mapping, as npud would */
        ck_assert_int_eq(h.b->ops->mem_map(h.b, 0, it.dst, 4096, &host), 0);
        ck_assert_int_eq(((unsigned char *)host)[4095], 0x5a);
        h.b->ops->mem_unmap(h.b, 0, host, 4096);
        harness_fini(&h);
}
END_TEST

/* ---- gang units ---- */

#define GANG_BYTES 65536

static void gang_item(struct exec_item *it, enum exec_kind kind, uint64_t dst, uint64_t src, int value)
{
        memset(it, 0, sizeof(*it));
        it->kind = kind;
        it->dst = dst;
        it->src = src;
        it->len = GANG_BYTES;
        it->value = value;
        it->model_ns = 1000;
}

/* Four items whose result depends on their order: A = v, B = A, A = v + 1, C = A. */
static void gang_fill(struct harness *h, struct exec_item *items, struct exec_item **p, int slot, int v)
{
        uint64_t base = h->desc.mem_addr + (uint64_t)slot * 4 * GANG_BYTES;
        uint64_t a = base, b = base + GANG_BYTES, c = base + 2 * GANG_BYTES;

        gang_item(&items[0], EXEC_MEMSET, a, 0, v);
        gang_item(&items[1], EXEC_COPY, b, a, 0);
        gang_item(&items[2], EXEC_MEMSET, a, 0, v + 1);
        gang_item(&items[3], EXEC_COPY, c, a, 0);
        for (int i = 0; i < 4; i++)
                p[i] = &items[i];
}

static void gang_unit(struct exec_unit *u, struct exec_item **p, int n, int gang)
{
        memset(u, 0, sizeof(*u));
        u->cores = gang;
        u->gang = gang;
        u->nitems = n;
        u->items = p;
}

static int all_bytes(struct harness *h, uint64_t addr, int v)
{
        const unsigned char *m = host_of(h, addr);

        for (int i = 0; i < GANG_BYTES; i++)
                if (m[i] != (unsigned char)v)
                        return 0;
        return 1;
}

START_TEST(test_gang_order)
{
        struct harness h;
        struct exec_item items[4], *p[4];
        struct exec_unit u;

        harness_init(&h, 0, 2);
        for (int r = 0; r < 50; r++) {
                int v = 1 + r % 100, before = h.done;
                gang_fill(&h, items, p, 0, v);
                gang_unit(&u, p, 4, 2);
                ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
                wait_done(&h, before + 1);
                ck_assert_int_eq(u.nrun, 4);
                for (int i = 0; i < 4; i++)
                        ck_assert_int_eq(items[i].status, 0);
                ck_assert(all_bytes(&h, items[1].dst, v));
                ck_assert(all_bytes(&h, items[3].dst, v + 1));
                ck_assert_uint_ge(u.end_ns, u.start_ns);
        }
        harness_fini(&h);
}
END_TEST

START_TEST(test_gang_fail_cancel)
{
        struct harness h;
        struct exec_item items[4], *p[4];
        struct exec_unit u;
        int before;

        harness_init(&h, 0, 2);
        /* a failure cancels the rest, as in a chain */
        ck_assert_int_eq(h.b->faults->inject(h.b, 0, FAULT_FAIL_NEXT, 1), 0);
        gang_fill(&h, items, p, 0, 7);
        gang_unit(&u, p, 4, 2);
        before = h.done;
        ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
        wait_done(&h, before + 1);
        ck_assert_int_eq(items[0].status, PROTO_E_DEVICE);
        for (int i = 1; i < 4; i++)
                ck_assert_int_eq(items[i].status, PROTO_E_CANCELLED);
        ck_assert_int_eq(u.nrun, 4);
        ck_assert(all_bytes(&h, items[1].dst, 0)); /* never ran */
        /* cancelled before it starts: nothing runs, every item says so */
        gang_fill(&h, items, p, 1, 9);
        gang_unit(&u, p, 4, 2);
        atomic_store(&u.cancel, 1);
        before = h.done;
        ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
        wait_done(&h, before + 1);
        ck_assert_int_eq(items[0].status, PROTO_E_CANCELLED);
        ck_assert_str_eq(items[0].err, "cancelled before it ran");
        for (int i = 1; i < 4; i++)
                ck_assert_int_eq(items[i].status, PROTO_E_CANCELLED);
        ck_assert_int_eq(u.nrun, 4);
        ck_assert(all_bytes(&h, items[0].dst, 0));
        harness_fini(&h);
}
END_TEST

START_TEST(test_gang_yield)
{
        struct harness h;
        struct exec_item items[4], *p[4];
        struct exec_unit u;

        harness_init(&h, 0, 2);
        /* asked to yield before it starts: the first item runs, the gang stops at the next
         * boundary, the others keep status 0 and did not run */
        gang_fill(&h, items, p, 0, 3);
        gang_unit(&u, p, 4, 2);
        u.yieldable = 1;
        atomic_store(&u.yield_ns, 1);
        ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
        wait_done(&h, 1);
        ck_assert_int_eq(u.nrun, 1);
        ck_assert_int_eq(u.partial, 0);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(items[i].status, 0);
        ck_assert(all_bytes(&h, items[0].dst, 3));
        ck_assert(all_bytes(&h, items[1].dst, 0));
        /* not yieldable: the request is ignored */
        gang_fill(&h, items, p, 1, 5);
        gang_unit(&u, p, 4, 2);
        atomic_store(&u.yield_ns, 1);
        ck_assert_int_eq(h.b->ops->submit(h.b, &u), 0);
        wait_done(&h, 2);
        ck_assert_int_eq(u.nrun, 4);
        ck_assert(all_bytes(&h, items[3].dst, 6));
        harness_fini(&h);
}
END_TEST

/* Gangs wider than the pool and plain units together: every unit comes back once, each
 * gang's items in order. */
START_TEST(test_gang_crowd)
{
        enum { N = 24 };
        struct harness h;
        static struct exec_item items[N][4];
        static struct exec_item *p[N][4];
        static struct exec_unit u[N];

        harness_init(&h, 0, 2);
        for (int i = 0; i < N; i++) {
                gang_fill(&h, items[i], p[i], i, 10 + i);
                gang_unit(&u[i], p[i], 4, i % 3 == 2 ? 1 : 2 + i % 3);
                ck_assert_int_eq(h.b->ops->submit(h.b, &u[i]), 0);
        }
        wait_done(&h, N);
        for (int i = 0; i < N; i++) {
                ck_assert_int_eq(u[i].nrun, 4);
                ck_assert(all_bytes(&h, items[i][1].dst, 10 + i));
                ck_assert(all_bytes(&h, items[i][3].dst, 11 + i));
        }
        ck_assert_int_eq(h.done, N);
        harness_fini(&h);
}
END_TEST

static Suite *fault_suite(void)
{
        Suite *s = suite_create("fault");
        TCase *tc = tcase_create("fault");

        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_bad_arguments);
        tcase_add_test(tc, test_fail_next);
        tcase_add_test(tc, test_fail_next_chain);
        tcase_add_test(tc, test_fail_next_concurrent);
        tcase_add_test(tc, test_fail_device);
        tcase_add_test(tc, test_slow_model);
        tcase_add_test(tc, test_slow_compute);
        tcase_add_test(tc, test_gang_order);
        tcase_add_test(tc, test_gang_fail_cancel);
        tcase_add_test(tc, test_gang_yield);
        tcase_add_test(tc, test_gang_crowd);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(fault_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Unit tests of the per-device dispatch policy (policy/dispatch.c), driven in virtual time:
 * strict class priority, weighted fair engine time between tenants, no credit banked by idle
 * or late tenants, the best-effort minimum share, stream priority and deadlines within a
 * tenant, engine choice by earliest estimated finish, and work conservation. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/dispatch.h"

enum { CUBE = 0, VECTOR = 1, AICPU = 2, DMA = 3 };

#define US 1000ull /* ns */

/* ---- helpers ---- */

static void dev_init(struct pd_device *dev, int cube, int vector, int aicpu, int dma,
                     double min_share)
{
        int cores[PD_ENGINES] = { cube, vector, aicpu, dma };
        pd_device_init(dev, cores, min_share);
}

static void tenant_init(struct pd_tenant *t, enum policy_class k, double weight)
{
        memset(t, 0, sizeof(*t));
        t->klass = k;
        t->weight = weight;
}

/* A queue whose head costs `cube` ns on the cube and `aicpu` ns on the AI CPU (0 = cannot). */
static void queue_init(struct pd_queue *q, struct pd_tenant *t, int priority, uint64_t cube,
                       uint64_t aicpu)
{
        memset(q, 0, sizeof(*q));
        q->tenant = t;
        q->priority = priority;
        q->cost[CUBE] = cube;
        q->cost[AICPU] = aicpu;
}

static void ready(struct pd_device *dev, struct pd_queue *q, uint64_t now)
{
        ck_assert_int_eq(pd_queue_ready(dev, q, now), 0);
}

/* Pick, expecting queue `want` (NULL: nothing) on engine `want_engine`. */
static void expect_pick(struct pd_device *dev, uint64_t now, struct pd_queue *want,
                        int want_engine)
{
        int e = -1;
        struct pd_queue *q = pd_pick(dev, now, &e);

        ck_assert_ptr_eq(q, want);
        if (want)
                ck_assert_int_eq(e, want_engine);
}

/* A one-core device running always-ready queues with unit costs: each cycle picks, runs the
 * head for `cost` ns and readies the queue again, as a stream with a deep backlog does (a
 * stream is not ready while its dispatch runs). between(i) runs while dispatch i is in
 * flight. Returns the number of cycles whose pick returned a queue. */
struct sim {
        struct pd_device *dev;
        uint64_t now;
        uint64_t cost;
        void (*between)(struct sim *s, int cycle);
        void *arg;
};

static int sim_cycles(struct sim *s, int cycles)
{
        int done = 0;

        for (int i = 0; i < cycles; i++) {
                int e = -1;
                struct pd_queue *q = pd_pick(s->dev, s->now, &e);
                if (!q)
                        break;
                pd_start(s->dev, q, e, 1, s->cost);
                if (s->between)
                        s->between(s, i);
                s->now += s->cost;
                pd_finish(s->dev, q->tenant, e, 1, s->cost, s->cost, s->now);
                ready(s->dev, q, s->now);
                done++;
        }
        return done;
}

static double share(const struct pd_tenant *a, const struct pd_tenant *b)
{
        return (double)a->used_ns / (double)(a->used_ns + b->used_ns);
}

/* ---- classes ---- */

START_TEST(test_strict_class_priority)
{
        struct pd_device dev;
        struct pd_tenant lc, normal, be;
        struct pd_queue qlc, qn, qbe;

        dev_init(&dev, 1, 0, 0, 0, 0);
        tenant_init(&lc, POLICY_CLASS_LATENCY_CRITICAL, 1);
        tenant_init(&normal, POLICY_CLASS_NORMAL, 100);
        tenant_init(&be, POLICY_CLASS_BEST_EFFORT, 100);
        /* class beats everything else: a far lower virtual time, a better stream priority,
         * an earlier deadline, a longer wait */
        lc.vtime = 1e12;
        queue_init(&qlc, &lc, 7, 100 * US, 0);
        queue_init(&qn, &normal, 0, 100 * US, 0);
        queue_init(&qbe, &be, 0, 100 * US, 0);
        qn.deadline = 1;
        qbe.deadline = 1;
        ready(&dev, &qbe, 0);
        ready(&dev, &qn, 10);
        ready(&dev, &qlc, 20);

        expect_pick(&dev, 30, &qlc, CUBE);
        pd_queue_unready(&dev, &qlc);
        expect_pick(&dev, 30, &qn, CUBE);
        pd_queue_unready(&dev, &qn);
        expect_pick(&dev, 30, &qbe, CUBE);
        pd_start(&dev, &qbe, CUBE, 1, 100 * US);
        expect_pick(&dev, 30, NULL, -1);
        pd_device_deinit(&dev);
}
END_TEST

/* Without a minimum share, best-effort runs only when nothing else is ready. */
START_TEST(test_best_effort_no_min_share)
{
        struct pd_device dev;
        struct pd_tenant normal, be;
        struct pd_queue qn, qbe;
        struct sim s = { .dev = &dev, .cost = 1000 * US };

        dev_init(&dev, 1, 0, 0, 0, 0);
        tenant_init(&normal, POLICY_CLASS_NORMAL, 1);
        tenant_init(&be, POLICY_CLASS_BEST_EFFORT, 1);
        queue_init(&qn, &normal, 0, 1000 * US, 0);
        queue_init(&qbe, &be, 0, 1000 * US, 0);
        ready(&dev, &qn, 0);
        ready(&dev, &qbe, 0);
        ck_assert_int_eq(sim_cycles(&s, 500), 500);
        ck_assert_uint_eq(be.dispatches, 0);
        ck_assert_uint_eq(normal.dispatches, 500);
        pd_device_deinit(&dev);
}
END_TEST

/* ---- weighted fair sharing ---- */

START_TEST(test_weighted_fair_3_to_1)
{
        struct pd_device dev;
        struct pd_tenant a, b;
        struct pd_queue qa, qb;
        struct sim s = { .dev = &dev, .cost = 1000 * US };

        dev_init(&dev, 1, 0, 0, 0, 0.05);
        tenant_init(&a, POLICY_CLASS_NORMAL, 3);
        tenant_init(&b, POLICY_CLASS_NORMAL, 1);
        queue_init(&qa, &a, 0, 1000 * US, 0);
        queue_init(&qb, &b, 0, 1000 * US, 0);
        ready(&dev, &qa, 0);
        ready(&dev, &qb, 0);
        ck_assert_int_eq(sim_cycles(&s, 4000), 4000);
        double sa = share(&a, &b);
        ck_assert_msg(fabs(sa - 0.75) < 0.02, "weight 3 got %.4f of engine time", sa);
        ck_assert_msg(fabs(share(&b, &a) - 0.25) < 0.02, "weight 1 got %.4f", share(&b, &a));
        /* and over any short window too: no long runs of one tenant */
        uint64_t a0 = a.used_ns, b0 = b.used_ns;
        ck_assert_int_eq(sim_cycles(&s, 40), 40);
        ck_assert_uint_eq(a.used_ns - a0, 30 * 1000 * US);
        ck_assert_uint_eq(b.used_ns - b0, 10 * 1000 * US);
        pd_device_deinit(&dev);
}
END_TEST

/* Two normal tenants with na and nb always-backlogged streams (head costs ca, cb ns) on a
 * device with `cores` cube cores, for `steps` completions; returns a's share of engine time. */
static double multi_core_share(double wa, int na, uint64_t ca, double wb, int nb, uint64_t cb,
                               int cores, int steps)
{
        struct pd_device dev;
        struct pd_tenant a, b;
        struct pd_queue qs[32];
        struct {
                struct pd_queue *q;
                int engine;
                uint64_t end;
        } run[32];
        int nrun = 0;
        uint64_t now = 0;

        ck_assert_int_le(na + nb, 32);
        dev_init(&dev, cores, 0, 0, 0, 0.05);
        tenant_init(&a, POLICY_CLASS_NORMAL, wa);
        tenant_init(&b, POLICY_CLASS_NORMAL, wb);
        for (int i = 0; i < na + nb; i++) {
                queue_init(&qs[i], i < na ? &a : &b, 0, i < na ? ca : cb, 0);
                ready(&dev, &qs[i], 0);
        }
        for (int step = 0; step < steps; step++) {
                int e;
                struct pd_queue *q;
                while ((q = pd_pick(&dev, now, &e))) {
                        ck_assert_int_lt(nrun, cores);
                        pd_start(&dev, q, e, 1, q->cost[e]);
                        run[nrun].q = q;
                        run[nrun].engine = e;
                        run[nrun].end = now + q->cost[e];
                        nrun++;
                }
                ck_assert_int_eq(nrun, cores); /* always backlogged: every core busy */
                int first = 0;
                for (int i = 1; i < nrun; i++)
                        if (run[i].end < run[first].end)
                                first = i;
                now = run[first].end;
                q = run[first].q;
                pd_finish(&dev, q->tenant, run[first].engine, 1, q->cost[CUBE], q->cost[CUBE], now);
                run[first] = run[--nrun];
                ready(&dev, q, now);
        }
        pd_device_deinit(&dev);
        return share(&a, &b);
}

/* Several streams per tenant and several cores: the share follows the weight, not the number
 * of streams or the task sizes. */
START_TEST(test_weighted_fair_streams_and_cores)
{
        /* 6 streams against 3 on 4 cores, equal weights: 2 cores each */
        double s = multi_core_share(1, 6, 700 * US, 1, 3, 1300 * US, 4, 8000);
        ck_assert_msg(fabs(s - 0.5) < 0.03, "6 streams of weight 1 got %.4f vs 3 streams", s);
        /* weights 3:1, 8 streams each on 8 cores */
        s = multi_core_share(3, 8, 1000 * US, 1, 8, 1000 * US, 8, 8000);
        ck_assert_msg(fabs(s - 0.75) < 0.03, "weight 3 got %.4f on 8 cores", s);
        /* weights 3:1, few large tasks against many small ones */
        s = multi_core_share(3, 4, 2500 * US, 1, 8, 300 * US, 4, 8000);
        ck_assert_msg(fabs(s - 0.75) < 0.03, "weight 3 with large tasks got %.4f", s);
}
END_TEST

/* A tenant that arrives while the other's work is running (so its queue is not in the ready
 * set) starts at the current virtual time instead of 0. */
static void join_b(struct sim *s, int cycle)
{
        if (cycle == 0)
                ready(s->dev, s->arg, s->now);
}

START_TEST(test_late_joiner_does_not_monopolize)
{
        struct pd_device dev;
        struct pd_tenant a, b;
        struct pd_queue qa, qb;
        struct sim s = { .dev = &dev, .cost = 1000 * US };

        dev_init(&dev, 1, 0, 0, 0, 0.05);
        tenant_init(&a, POLICY_CLASS_NORMAL, 1);
        tenant_init(&b, POLICY_CLASS_NORMAL, 1);
        queue_init(&qa, &a, 0, 1000 * US, 0);
        queue_init(&qb, &b, 0, 1000 * US, 0);
        ready(&dev, &qa, 0);
        ck_assert_int_eq(sim_cycles(&s, 1000), 1000); /* a alone for 1 s */

        s.between = join_b;
        s.arg = &qb;
        ck_assert_int_eq(sim_cycles(&s, 200), 200);
        /* equal weights: about half each from the moment b joined, not 200 in a row for b */
        ck_assert_msg(b.dispatches >= 95 && b.dispatches <= 105,
                      "late joiner got %llu of 200 dispatches",
                      (unsigned long long)b.dispatches);
        pd_device_deinit(&dev);
}
END_TEST

/* Same for a tenant that was active, idled for a long time and comes back. */
START_TEST(test_idle_tenant_banks_no_credit)
{
        struct pd_device dev;
        struct pd_tenant a, b;
        struct pd_queue qa, qb;
        struct sim s = { .dev = &dev, .cost = 1000 * US };

        dev_init(&dev, 1, 0, 0, 0, 0.05);
        tenant_init(&a, POLICY_CLASS_NORMAL, 1);
        tenant_init(&b, POLICY_CLASS_NORMAL, 1);
        queue_init(&qa, &a, 0, 1000 * US, 0);
        queue_init(&qb, &b, 0, 1000 * US, 0);
        ready(&dev, &qa, 0);
        ready(&dev, &qb, 0);
        ck_assert_int_eq(sim_cycles(&s, 100), 100);
        uint64_t b_before = b.dispatches;

        /* b goes idle: sim_cycles leaves both queues ready, b's dispatches all finished */
        ck_assert_int_eq(qb.ready, 1);
        pd_queue_unready(&dev, &qb);
        ck_assert_int_eq(b.active, 0);
        ck_assert_int_eq(sim_cycles(&s, 2000), 2000); /* a alone for 2 s */
        b_before = b.dispatches;
        uint64_t a_before = a.dispatches;

        s.between = join_b;
        s.arg = &qb;
        ck_assert_int_eq(sim_cycles(&s, 200), 200);
        uint64_t got = b.dispatches - b_before;
        ck_assert_msg(got >= 95 && got <= 105, "returning tenant got %llu of 200 (a %llu)",
                      (unsigned long long)got, (unsigned long long)(a.dispatches - a_before));
        pd_device_deinit(&dev);
}
END_TEST

/* ---- best-effort minimum share ---- */

START_TEST(test_best_effort_min_share)
{
        struct pd_device dev;
        struct pd_tenant lc, be;
        struct pd_queue qlc, qbe;
        struct sim s = { .dev = &dev, .cost = 1000 * US };

        dev_init(&dev, 1, 0, 0, 0, 0.1);
        tenant_init(&lc, POLICY_CLASS_LATENCY_CRITICAL, 1);
        tenant_init(&be, POLICY_CLASS_BEST_EFFORT, 1);
        queue_init(&qlc, &lc, 0, 1000 * US, 0);
        queue_init(&qbe, &be, 0, 1000 * US, 0);
        ready(&dev, &qlc, 0);
        ready(&dev, &qbe, 0);
        ck_assert_int_eq(sim_cycles(&s, 3000), 3000); /* 3 s, 30 decay time constants */
        double sbe = share(&be, &lc);
        ck_assert_msg(sbe >= 0.095 && sbe <= 0.15, "best-effort got %.4f with min share 0.1", sbe);

        /* and in every 500 ms window, not just on average */
        for (int w = 0; w < 4; w++) {
                uint64_t b0 = be.used_ns, l0 = lc.used_ns;
                ck_assert_int_eq(sim_cycles(&s, 500), 500);
                double ws = (double)(be.used_ns - b0) / (double)(be.used_ns - b0 + lc.used_ns - l0);
                ck_assert_msg(ws >= 0.09 && ws <= 0.15, "window %d: best-effort got %.4f", w, ws);
        }
        pd_device_deinit(&dev);
}
END_TEST

/* ---- within a tenant ---- */

START_TEST(test_stream_priority)
{
        struct pd_device dev;
        struct pd_tenant t;
        struct pd_queue low, high, mid;

        dev_init(&dev, 1, 0, 0, 0, 0.05);
        tenant_init(&t, POLICY_CLASS_NORMAL, 1);
        queue_init(&low, &t, 7, 100 * US, 0);
        queue_init(&high, &t, 0, 100 * US, 0);
        queue_init(&mid, &t, 3, 100 * US, 0);
        low.deadline = 5; /* priority comes before deadlines */
        ready(&dev, &low, 0);
        ready(&dev, &mid, 1);
        ready(&dev, &high, 2);
        expect_pick(&dev, 3, &high, CUBE);
        pd_queue_unready(&dev, &high);
        expect_pick(&dev, 3, &mid, CUBE);
        pd_queue_unready(&dev, &mid);
        expect_pick(&dev, 3, &low, CUBE);
        pd_device_deinit(&dev);
}
END_TEST

START_TEST(test_deadline_order)
{
        struct pd_device dev;
        struct pd_tenant t;
        struct pd_queue none_old, late, early, none_new;

        dev_init(&dev, 1, 0, 0, 0, 0.05);
        tenant_init(&t, POLICY_CLASS_NORMAL, 1);
        queue_init(&none_old, &t, 2, 100 * US, 0);
        queue_init(&late, &t, 2, 100 * US, 0);
        queue_init(&early, &t, 2, 100 * US, 0);
        queue_init(&none_new, &t, 2, 100 * US, 0);
        late.deadline = 9000 * US;
        early.deadline = 3000 * US;
        ready(&dev, &none_old, 0);
        ready(&dev, &late, 10);
        ready(&dev, &early, 20);
        ready(&dev, &none_new, 30);
        /* earliest deadline, then any deadline, then the longest-waiting */
        expect_pick(&dev, 40, &early, CUBE);
        pd_queue_unready(&dev, &early);
        expect_pick(&dev, 40, &late, CUBE);
        pd_queue_unready(&dev, &late);
        expect_pick(&dev, 40, &none_old, CUBE);
        pd_queue_unready(&dev, &none_old);
        expect_pick(&dev, 40, &none_new, CUBE);
        pd_device_deinit(&dev);
}
END_TEST

/* Latency-critical heads with deadlines go earliest deadline first across tenants, ahead of
 * the fair order; other classes keep the fair order between tenants. */
START_TEST(test_latency_critical_edf_across_tenants)
{
        struct pd_device dev;
        struct pd_tenant ahead, behind, na, nb;
        struct pd_queue qa, qb, qnone, qna, qnb;

        dev_init(&dev, 1, 0, 0, 0, 0.05);
        tenant_init(&ahead, POLICY_CLASS_LATENCY_CRITICAL, 1);
        tenant_init(&behind, POLICY_CLASS_LATENCY_CRITICAL, 1);
        ahead.vtime = 5e9; /* used far more than `behind` */
        queue_init(&qa, &ahead, 7, 100 * US, 0);
        queue_init(&qb, &behind, 0, 100 * US, 0);
        queue_init(&qnone, &behind, 0, 100 * US, 0);
        qa.deadline = 1000 * US;
        qb.deadline = 2000 * US;
        /* a head with a deadline goes before one without, whatever the fair order (a total
         * order: the pick must not depend on the order queues became ready) */
        ready(&dev, &qnone, 0);
        ready(&dev, &qa, 10);
        expect_pick(&dev, 20, &qa, CUBE);
        pd_queue_unready(&dev, &qnone);
        /* both with deadlines: the earlier one, whatever the virtual times and priorities */
        ready(&dev, &qb, 0);
        expect_pick(&dev, 20, &qa, CUBE);
        pd_queue_unready(&dev, &qa);
        expect_pick(&dev, 20, &qb, CUBE);
        pd_queue_unready(&dev, &qb);

        /* normal tenants: deadlines do not override the fair order between tenants */
        tenant_init(&na, POLICY_CLASS_NORMAL, 1);
        tenant_init(&nb, POLICY_CLASS_NORMAL, 1);
        na.vtime = 5e9;
        queue_init(&qna, &na, 0, 100 * US, 0);
        queue_init(&qnb, &nb, 0, 100 * US, 0);
        qna.deadline = 1000 * US;
        qnb.deadline = 2000 * US;
        ready(&dev, &qna, 0);
        ready(&dev, &qnb, 0);
        expect_pick(&dev, 20, &qnb, CUBE);
        pd_device_deinit(&dev);
}
END_TEST

/* ---- engines ---- */

START_TEST(test_engine_earliest_finish)
{
        struct pd_device dev;
        struct pd_tenant t, u;
        struct pd_queue q, busy, other;

        dev_init(&dev, 1, 0, 1, 0, 0.05);
        tenant_init(&t, POLICY_CLASS_LATENCY_CRITICAL, 1);
        tenant_init(&u, POLICY_CLASS_BEST_EFFORT, 1);
        queue_init(&q, &t, 0, 100 * US, 10000 * US);

        /* both engines free: the cube finishes first */
        ready(&dev, &q, 0);
        expect_pick(&dev, 0, &q, CUBE);

        /* cube busy with short work: finishing there (200 + 100 us) is still earlier than
         * 10 ms on the free AI CPU, so q waits */
        queue_init(&busy, &u, 0, 200 * US, 0);
        ready(&dev, &busy, 0);
        pd_queue_unready(&dev, &q);
        expect_pick(&dev, 0, &busy, CUBE);
        pd_start(&dev, &busy, CUBE, 1, 200 * US);
        ready(&dev, &q, 0);
        expect_pick(&dev, 0, NULL, -1);
        /* meanwhile another queue that fits the free AI CPU runs there */
        queue_init(&other, &u, 0, 0, 500 * US);
        ready(&dev, &other, 0);
        expect_pick(&dev, 0, &other, AICPU);
        pd_queue_unready(&dev, &other);
        /* the cube frees: q runs there */
        pd_finish(&dev, &u, CUBE, 1, 200 * US, 200 * US, 200 * US);
        expect_pick(&dev, 200 * US, &q, CUBE);

        /* cube busy with long work: 50 ms + 100 us there, 10 ms on the AI CPU */
        pd_queue_unready(&dev, &q);
        ready(&dev, &busy, 200 * US);
        busy.cost[CUBE] = 50000 * US;
        pd_start(&dev, &busy, CUBE, 1, 50000 * US);
        ready(&dev, &q, 200 * US);
        expect_pick(&dev, 200 * US, &q, AICPU);
        pd_device_deinit(&dev);
}
END_TEST

START_TEST(test_engine_only_capable)
{
        struct pd_device dev;
        struct pd_tenant t;
        struct pd_queue q;

        /* costs only on engines without cores: never picked */
        dev_init(&dev, 0, 2, 1, 0, 0.05);
        tenant_init(&t, POLICY_CLASS_NORMAL, 1);
        queue_init(&q, &t, 0, 100 * US, 0);
        ready(&dev, &q, 0);
        expect_pick(&dev, 0, NULL, -1);
        /* a cheaper engine with no cores is skipped for a capable one */
        q.cost[AICPU] = 900 * US;
        expect_pick(&dev, 0, &q, AICPU);
        q.cost[VECTOR] = 300 * US;
        expect_pick(&dev, 0, &q, VECTOR);
        pd_device_deinit(&dev);
}
END_TEST

START_TEST(test_work_conserving)
{
        struct pd_device dev;
        struct pd_tenant lc, n, filler;
        struct pd_queue first, second, fill;

        dev_init(&dev, 1, 1, 0, 0, 0.05);
        tenant_init(&lc, POLICY_CLASS_LATENCY_CRITICAL, 1);
        tenant_init(&n, POLICY_CLASS_NORMAL, 1);
        tenant_init(&filler, POLICY_CLASS_NORMAL, 1);
        queue_init(&fill, &filler, 0, 1000 * US, 0);
        ready(&dev, &fill, 0);
        expect_pick(&dev, 0, &fill, CUBE);
        pd_start(&dev, &fill, CUBE, 1, 1000 * US);

        /* the higher-class queue needs the busy cube; the other runs on the free vector */
        queue_init(&first, &lc, 0, 100 * US, 0);
        queue_init(&second, &n, 0, 0, 0);
        second.cost[VECTOR] = 400 * US;
        ready(&dev, &first, 10);
        ready(&dev, &second, 20);
        expect_pick(&dev, 30, &second, VECTOR);
        pd_start(&dev, &second, VECTOR, 1, 400 * US);
        expect_pick(&dev, 30, NULL, -1);
        /* first still waits, and gets the cube as soon as it frees */
        ck_assert_int_eq(first.ready, 1);
        pd_finish(&dev, &filler, CUBE, 1, 1000 * US, 1000 * US, 1000 * US);
        ready(&dev, &fill, 1000 * US);
        expect_pick(&dev, 1000 * US, &first, CUBE);
        pd_device_deinit(&dev);
}
END_TEST

/* Many ready queues (past the on-stack mask of pd_pick) all waiting for a busy engine. */
START_TEST(test_many_queues)
{
        struct pd_device dev;
        struct pd_tenant t;
        enum { N = 700 };
        struct pd_queue *qs = calloc(N, sizeof(*qs));

        ck_assert_ptr_nonnull(qs);
        dev_init(&dev, 1, 1, 0, 0, 0.05);
        tenant_init(&t, POLICY_CLASS_NORMAL, 1);
        for (int i = 0; i < N; i++) {
                queue_init(&qs[i], &t, i % 8, 100 * US, 0);
                ready(&dev, &qs[i], (uint64_t)i);
        }
        expect_pick(&dev, N, &qs[0], CUBE);
        pd_start(&dev, &qs[0], CUBE, 1, 100 * US);
        expect_pick(&dev, N, NULL, -1);
        /* the last of them can use the vector engine */
        qs[N - 1].cost[VECTOR] = 100 * US;
        expect_pick(&dev, N, &qs[N - 1], VECTOR);
        ck_assert_int_eq(dev.nready, N - 1);
        pd_device_deinit(&dev);
        free(qs);
}
END_TEST

static Suite *dispatch_suite(void)
{
        Suite *s = suite_create("dispatch");
        TCase *tc = tcase_create("classes");

        tcase_add_test(tc, test_strict_class_priority);
        tcase_add_test(tc, test_best_effort_no_min_share);
        tcase_add_test(tc, test_best_effort_min_share);
        suite_add_tcase(s, tc);

        tc = tcase_create("fair");
        tcase_add_test(tc, test_weighted_fair_3_to_1);
        tcase_add_test(tc, test_weighted_fair_streams_and_cores);
        tcase_add_test(tc, test_late_joiner_does_not_monopolize);
        tcase_add_test(tc, test_idle_tenant_banks_no_credit);
        suite_add_tcase(s, tc);

        tc = tcase_create("tenant");
        tcase_add_test(tc, test_stream_priority);
        tcase_add_test(tc, test_deadline_order);
        tcase_add_test(tc, test_latency_critical_edf_across_tenants);
        suite_add_tcase(s, tc);

        tc = tcase_create("engines");
        tcase_add_test(tc, test_engine_earliest_finish);
        tcase_add_test(tc, test_engine_only_capable);
        tcase_add_test(tc, test_work_conserving);
        tcase_add_test(tc, test_many_queues);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(dispatch_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

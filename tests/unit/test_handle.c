/* Unit tests of the per-session handle tables (daemon/api/handle.c): insert/lookup/remove, type
 * checking, stale-handle (double free) detection through generations, invalid handles, slot
 * reuse, per-type counts, foreach, and large tables up to the slot limit. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/exec/handle.h"

#define SLOT_MASK ((1u << 20) - 1)

/* For hot loops: ck_assert_* records a checkpoint even when it passes. */
#define TEST_REQUIRE(cond)                                                                 \
        do {                                                                               \
                if (!(cond))                                                               \
                        ck_abort_msg("failed: %s", #cond);                                 \
        } while (0)

/* Distinct non-NULL object pointers without allocating. */
static char objs[1024];
#define OBJ(i) ((void *)&objs[(i) % sizeof(objs)])

static uint32_t insert_ok(struct handle_table *t, enum handle_type type, void *obj)
{
        uint32_t h = 0;

        ck_assert_int_eq(handle_insert(t, type, obj, &h), 0);
        ck_assert_uint_ne(h, 0);
        return h;
}

START_TEST(test_insert_lookup_remove)
{
        struct handle_table t;
        uint32_t hb, hs, he, hr;

        handle_table_init(&t);
        hb = insert_ok(&t, HANDLE_BUFFER, OBJ(1));
        hs = insert_ok(&t, HANDLE_STREAM, OBJ(2));
        he = insert_ok(&t, HANDLE_EVENT, OBJ(3));
        hr = insert_ok(&t, HANDLE_REGION, OBJ(4));
        ck_assert_uint_ne(hb, hs);
        ck_assert_uint_ne(hs, he);
        ck_assert_uint_ne(he, hr);

        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_BUFFER, hb), OBJ(1));
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_STREAM, hs), OBJ(2));
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_EVENT, he), OBJ(3));
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_REGION, hr), OBJ(4));
        /* lookups do not consume */
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_BUFFER, hb), OBJ(1));

        ck_assert_ptr_eq(handle_remove(&t, HANDLE_STREAM, hs), OBJ(2));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_STREAM, hs));
        /* the others are untouched */
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_BUFFER, hb), OBJ(1));
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_EVENT, he), OBJ(3));
        ck_assert_ptr_eq(handle_remove(&t, HANDLE_BUFFER, hb), OBJ(1));
        ck_assert_ptr_eq(handle_remove(&t, HANDLE_EVENT, he), OBJ(3));
        ck_assert_ptr_eq(handle_remove(&t, HANDLE_REGION, hr), OBJ(4));
        for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
                ck_assert_uint_eq(t.count[k], 0);
        handle_table_deinit(&t);
        ck_assert_ptr_null(t.slots);
        ck_assert_uint_eq(t.nslots, 0);
}
END_TEST

START_TEST(test_handle_layout)
{
        struct handle_table t;

        handle_table_init(&t);
        /* fresh slots: generation 1, slot index + 1 in the low 20 bits */
        for (uint32_t i = 0; i < 5; i++) {
                uint32_t h = insert_ok(&t, HANDLE_BUFFER, OBJ(i));
                ck_assert_uint_eq(h & SLOT_MASK, i + 1);
                ck_assert_uint_eq(h >> 20, 1);
        }
        handle_table_deinit(&t);
}
END_TEST

START_TEST(test_type_mismatch)
{
        struct handle_table t;
        uint32_t h;

        handle_table_init(&t);
        h = insert_ok(&t, HANDLE_BUFFER, OBJ(1));
        for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
                if (k != HANDLE_BUFFER) {
                        ck_assert_ptr_null(handle_lookup(&t, (enum handle_type)k, h));
                        ck_assert_ptr_null(handle_remove(&t, (enum handle_type)k, h));
                }
        /* a failed remove of the wrong type leaves the entry and the counts alone */
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_BUFFER, h), OBJ(1));
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], 1);
        ck_assert_uint_eq(t.count[HANDLE_STREAM], 0);
        ck_assert_ptr_eq(handle_remove(&t, HANDLE_BUFFER, h), OBJ(1));
        handle_table_deinit(&t);
}
END_TEST

START_TEST(test_stale_handle)
{
        struct handle_table t;
        uint32_t h, h2;

        handle_table_init(&t);
        h = insert_ok(&t, HANDLE_EVENT, OBJ(7));
        ck_assert_ptr_eq(handle_remove(&t, HANDLE_EVENT, h), OBJ(7));
        /* double free and use after free are recognised */
        ck_assert_ptr_null(handle_remove(&t, HANDLE_EVENT, h));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_EVENT, h));
        ck_assert_uint_eq(t.count[HANDLE_EVENT], 0);
        /* the slot is reused by the next insert, but the old handle stays dead */
        h2 = insert_ok(&t, HANDLE_EVENT, OBJ(8));
        ck_assert_uint_eq(h2 & SLOT_MASK, h & SLOT_MASK);
        ck_assert_uint_ne(h2, h);
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_EVENT, h));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_EVENT, h));
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_EVENT, h2), OBJ(8));
        ck_assert_uint_eq(t.count[HANDLE_EVENT], 1);
        /* stale handle of another type on the reused slot */
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, h2));
        handle_table_deinit(&t);
}
END_TEST

START_TEST(test_invalid_handles)
{
        struct handle_table t;
        uint32_t h;

        handle_table_init(&t);
        /* empty table */
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, 0));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, 1));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, (1u << 20) | 1));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_BUFFER, (1u << 20) | 1));

        h = insert_ok(&t, HANDLE_BUFFER, OBJ(1));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, 0));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_BUFFER, 0));
        /* slot 0 with a generation */
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, h & ~SLOT_MASK));
        /* right slot, wrong generation (0, 2, max) */
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, h & SLOT_MASK));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, (2u << 20) | (h & SLOT_MASK)));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, 0xfff00000u | (h & SLOT_MASK)));
        /* slot past the end, past the capacity, the maximum */
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, h + 1));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, (1u << 20) | 1000));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, (1u << 20) | SLOT_MASK));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, UINT32_MAX));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_BUFFER, UINT32_MAX));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_BUFFER, h + 1));
        /* none of that disturbed the live entry */
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_BUFFER, h), OBJ(1));
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], 1);
        handle_table_deinit(&t);
}
END_TEST

START_TEST(test_reuse_new_generation)
{
        enum { CYCLES = 4095 }; /* generations are 12 bits, 1..4095 */
        struct handle_table t;
        uint32_t *seen = malloc(sizeof(uint32_t) * CYCLES);
        uint32_t h;

        ck_assert_ptr_nonnull(seen);
        handle_table_init(&t);
        insert_ok(&t, HANDLE_BUFFER, OBJ(0)); /* slot 1 stays live throughout */
        for (int i = 0; i < CYCLES; i++) {
                h = insert_ok(&t, HANDLE_STREAM, OBJ(i + 1));
                TEST_REQUIRE((h & SLOT_MASK) == 2);
                TEST_REQUIRE((h >> 20) >= 1);
                for (int j = 0; j < i; j++)
                        TEST_REQUIRE(seen[j] != h);
                seen[i] = h;
                TEST_REQUIRE(handle_remove(&t, HANDLE_STREAM, h) == OBJ(i + 1));
                /* every earlier handle of this slot is dead */
                TEST_REQUIRE(handle_lookup(&t, HANDLE_STREAM, h) == NULL);
        }
        ck_assert_uint_eq(t.nslots, 2);
        ck_assert_uint_eq(t.count[HANDLE_STREAM], 0);
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], 1);
        handle_table_deinit(&t);
        free(seen);
}
END_TEST

START_TEST(test_free_list_lifo)
{
        struct handle_table t;
        uint32_t h[4];

        handle_table_init(&t);
        for (int i = 0; i < 4; i++)
                h[i] = insert_ok(&t, HANDLE_BUFFER, OBJ(i));
        ck_assert_ptr_nonnull(handle_remove(&t, HANDLE_BUFFER, h[1]));
        ck_assert_ptr_nonnull(handle_remove(&t, HANDLE_BUFFER, h[3]));
        /* freed slots are reused before the table grows */
        uint32_t a = insert_ok(&t, HANDLE_REGION, OBJ(10));
        uint32_t b = insert_ok(&t, HANDLE_REGION, OBJ(11));
        uint32_t c = insert_ok(&t, HANDLE_REGION, OBJ(12));
        ck_assert_uint_eq(a & SLOT_MASK, h[3] & SLOT_MASK);
        ck_assert_uint_eq(b & SLOT_MASK, h[1] & SLOT_MASK);
        ck_assert_uint_eq(c & SLOT_MASK, 5);
        ck_assert_uint_eq(t.nslots, 5);
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_BUFFER, h[1]));
        ck_assert_ptr_null(handle_lookup(&t, HANDLE_REGION, h[1]));
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_REGION, b), OBJ(11));
        handle_table_deinit(&t);
}
END_TEST

START_TEST(test_counts)
{
        struct handle_table t;
        uint32_t h[40];

        handle_table_init(&t);
        for (int i = 0; i < 40; i++)
                h[i] = insert_ok(&t, (enum handle_type)(HANDLE_BUFFER + i % 4), OBJ(i));
        ck_assert_uint_eq(t.count[HANDLE_NONE], 0);
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], 10);
        ck_assert_uint_eq(t.count[HANDLE_REGION], 10);
        ck_assert_uint_eq(t.count[HANDLE_STREAM], 10);
        ck_assert_uint_eq(t.count[HANDLE_EVENT], 10);
        /* remove the streams, plus a double remove and a wrong-type remove of a buffer */
        for (int i = 2; i < 40; i += 4)
                ck_assert_ptr_eq(handle_remove(&t, HANDLE_STREAM, h[i]), OBJ(i));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_STREAM, h[2]));
        ck_assert_ptr_null(handle_remove(&t, HANDLE_EVENT, h[0]));
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], 10);
        ck_assert_uint_eq(t.count[HANDLE_REGION], 10);
        ck_assert_uint_eq(t.count[HANDLE_STREAM], 0);
        ck_assert_uint_eq(t.count[HANDLE_EVENT], 10);
        ck_assert_ptr_eq(handle_remove(&t, HANDLE_BUFFER, h[4]), OBJ(4));
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], 9);
        handle_table_deinit(&t);
        for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
                ck_assert_uint_eq(t.count[k], 0);
}
END_TEST

struct visit {
        unsigned calls;
        unsigned per_type[HANDLE_TYPE_COUNT];
        unsigned char seen[1024];
        int bad;
};

static void visit_fn(enum handle_type type, void *obj, void *userdata)
{
        struct visit *v = userdata;
        size_t idx = (size_t)((char *)obj - objs);

        v->calls++;
        if (type <= HANDLE_NONE || type >= HANDLE_TYPE_COUNT || idx >= sizeof(objs)) {
                v->bad = 1;
                return;
        }
        v->per_type[type]++;
        v->seen[idx]++;
        /* each object was inserted with type HANDLE_BUFFER + idx % 4 */
        if ((int)type != HANDLE_BUFFER + (int)(idx % 4))
                v->bad = 1;
}

START_TEST(test_foreach)
{
        struct handle_table t;
        struct visit v;
        uint32_t h[200];

        handle_table_init(&t);
        memset(&v, 0, sizeof(v));
        handle_foreach(&t, visit_fn, &v); /* empty table: no calls */
        ck_assert_uint_eq(v.calls, 0);

        for (int i = 0; i < 200; i++)
                h[i] = insert_ok(&t, (enum handle_type)(HANDLE_BUFFER + i % 4), OBJ(i));
        for (int i = 0; i < 200; i += 3) /* remove every third */
                ck_assert_ptr_nonnull(handle_remove(&t, (enum handle_type)(HANDLE_BUFFER + i % 4), h[i]));

        memset(&v, 0, sizeof(v));
        handle_foreach(&t, visit_fn, &v);
        ck_assert_int_eq(v.bad, 0);
        ck_assert_uint_eq(v.calls, 200 - 67);
        for (int i = 0; i < 200; i++)
                ck_assert_uint_eq(v.seen[i], i % 3 ? 1 : 0);
        for (int k = HANDLE_BUFFER; k < HANDLE_TYPE_COUNT; k++)
                ck_assert_uint_eq(v.per_type[k], t.count[k]);
        handle_table_deinit(&t);
}
END_TEST

START_TEST(test_many_inserts)
{
        enum { N = 100000 };
        struct handle_table t;
        uint32_t *h = malloc(sizeof(uint32_t) * N);

        ck_assert_ptr_nonnull(h);
        handle_table_init(&t);
        for (uint32_t i = 0; i < N; i++) {
                TEST_REQUIRE(handle_insert(&t, HANDLE_BUFFER, OBJ(i), &h[i]) == 0);
                TEST_REQUIRE((h[i] & SLOT_MASK) == i + 1);
        }
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], N);
        for (uint32_t i = 0; i < N; i++)
                TEST_REQUIRE(handle_lookup(&t, HANDLE_BUFFER, h[i]) == OBJ(i));
        /* remove the odd ones, reinsert as streams: all slots reused, no growth */
        for (uint32_t i = 1; i < N; i += 2)
                TEST_REQUIRE(handle_remove(&t, HANDLE_BUFFER, h[i]) == OBJ(i));
        ck_assert_uint_eq(t.count[HANDLE_BUFFER], N / 2);
        for (uint32_t i = 1; i < N; i += 2) {
                uint32_t nh;
                TEST_REQUIRE(handle_insert(&t, HANDLE_STREAM, OBJ(i), &nh) == 0);
                TEST_REQUIRE((nh & SLOT_MASK) <= N);
                TEST_REQUIRE(nh != h[i]);
                h[i] = nh;
        }
        ck_assert_uint_eq(t.nslots, N);
        ck_assert_uint_eq(t.count[HANDLE_STREAM], N / 2);
        for (uint32_t i = 0; i < N; i++)
                TEST_REQUIRE(handle_lookup(&t, i % 2 ? HANDLE_STREAM : HANDLE_BUFFER, h[i]) == OBJ(i));
        for (uint32_t i = 0; i < N; i++)
                TEST_REQUIRE(handle_remove(&t, i % 2 ? HANDLE_STREAM : HANDLE_BUFFER, h[i]) == OBJ(i));
        for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
                ck_assert_uint_eq(t.count[k], 0);
        handle_table_deinit(&t);
        free(h);
}
END_TEST

/* The table holds HANDLE_MAX_SLOTS entries, then says -ENOSPC; a freed slot makes room. */
START_TEST(test_slot_limit)
{
        struct handle_table t;
        uint32_t h = 0, last = 0, first = 0;

        handle_table_init(&t);
        for (uint32_t i = 0; i < HANDLE_MAX_SLOTS; i++) {
                TEST_REQUIRE(handle_insert(&t, HANDLE_EVENT, OBJ(i), &h) == 0);
                if (i == 0)
                        first = h;
                last = h;
        }
        ck_assert_uint_eq(last & SLOT_MASK, HANDLE_MAX_SLOTS);
        ck_assert_ptr_eq(handle_lookup(&t, HANDLE_EVENT, last), OBJ(HANDLE_MAX_SLOTS - 1));
        h = 0x5a5a;
        ck_assert_int_eq(handle_insert(&t, HANDLE_EVENT, OBJ(0), &h), -ENOSPC);
        ck_assert_uint_eq(h, 0x5a5a);
        ck_assert_uint_eq(t.count[HANDLE_EVENT], HANDLE_MAX_SLOTS);
        ck_assert_ptr_nonnull(handle_remove(&t, HANDLE_EVENT, first));
        ck_assert_int_eq(handle_insert(&t, HANDLE_EVENT, OBJ(1), &h), 0);
        ck_assert_uint_eq(h & SLOT_MASK, first & SLOT_MASK);
        ck_assert_uint_ne(h, first);
        handle_table_deinit(&t);
}
END_TEST

static Suite *handle_suite(void)
{
        Suite *s = suite_create("handle");
        TCase *tc = tcase_create("basic");

        tcase_add_test(tc, test_insert_lookup_remove);
        tcase_add_test(tc, test_handle_layout);
        tcase_add_test(tc, test_type_mismatch);
        tcase_add_test(tc, test_stale_handle);
        tcase_add_test(tc, test_invalid_handles);
        tcase_add_test(tc, test_reuse_new_generation);
        tcase_add_test(tc, test_free_list_lifo);
        tcase_add_test(tc, test_counts);
        tcase_add_test(tc, test_foreach);
        suite_add_tcase(s, tc);

        tc = tcase_create("scale");
        tcase_add_test(tc, test_many_inserts);
        tcase_add_test(tc, test_slot_limit);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(handle_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

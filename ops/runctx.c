/* Run contexts of kernels on worker threads (see runctx.h). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proto/errors.h"
#include "runctx.h"

static __thread struct ops_runctx *current;

void ops_runctx_set(struct ops_runctx *c)
{
        current = c;
}

struct ops_runctx *ops_runctx_current(void)
{
        return current;
}

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *ops_runctx_reason(int code)
{
        struct ops_runctx *c = current;

        switch (code) {
        case PROTO_E_CANCELLED:
                return "cancelled while running";
        case PROTO_E_LIMIT:
                return c && c->deadline_ns && mono_ns() > c->deadline_ns
                               ? "run exceeded its time limit (tenant max_run_ms)"
                               : "run exceeded a limit of its tenant (max_loop_trips)";
        case PROTO_E_QUOTA:
                return "intermediates exceed the memory the run may use (tenant memory_quota, "
                       "or half of the host's memory for all running work)";
        default:
                return "run stopped";
        }
}

int ops_runctx_check(char *err, size_t errlen)
{
        struct ops_runctx *c = current;

        if (!c)
                return 0;
        if (c->code)
                goto stop;
        if (c->cancel && atomic_load_explicit(c->cancel, memory_order_relaxed))
                c->code = PROTO_E_CANCELLED;
        else if (c->deadline_ns && mono_ns() > c->deadline_ns)
                c->code = PROTO_E_LIMIT;
        else
                return 0;
stop:
        if (err && errlen)
                snprintf(err, errlen, "%s", ops_runctx_reason(c->code));
        return c->code;
}

uint64_t ops_runctx_max_trips(void)
{
        return current ? current->max_loop_trips : 0;
}

int ops_mem_budget_charge(struct ops_mem_budget *b, uint64_t n, char *err, size_t errlen)
{
        for (struct ops_mem_budget *l = b; l; l = l->parent) {
                uint64_t used = atomic_fetch_add(&l->used, n) + n;
                uint64_t limit = atomic_load(&l->limit);
                uint64_t held = atomic_load(&l->held);
                if (limit && (used < n || used + held < used || used + held > limit)) {
                        for (struct ops_mem_budget *u = b; u != l->parent; u = u->parent)
                                atomic_fetch_sub(&u->used, n);
                        if (err && errlen)
                                snprintf(err, errlen,
                                         "intermediates of %llu bytes exceed the memory of %s "
                                         "(%llu of %llu bytes in use)",
                                         (unsigned long long)n, l->name ? l->name : "the run",
                                         (unsigned long long)(used - n + held),
                                         (unsigned long long)limit);
                        return PROTO_E_QUOTA;
                }
                uint64_t peak = atomic_load(&l->peak);
                while (used > peak && !atomic_compare_exchange_weak(&l->peak, &peak, used))
                        ;
        }
        return 0;
}

void ops_mem_budget_uncharge(struct ops_mem_budget *b, uint64_t n)
{
        for (struct ops_mem_budget *l = b; l; l = l->parent)
                atomic_fetch_sub(&l->used, n);
}

int ops_runctx_stop(int code)
{
        struct ops_runctx *c = current;

        if (!c)
                return 0;
        if (!c->code)
                c->code = code;
        return c->code;
}

int ops_runctx_code(void)
{
        return current ? current->code : 0;
}

/* Before every buffer: its size and the budget charged. 16 bytes keep malloc's alignment. */
struct buf_head {
        uint64_t n;
        struct ops_mem_budget *b;
};

_Static_assert(sizeof(struct buf_head) == 16, "the header must keep 16-byte alignment");

uint64_t ops_bytes(uint64_t n, uint64_t size)
{
        uint64_t r;

        return __builtin_mul_overflow(n, size, &r) ? UINT64_MAX : r;
}

/* Can a buffer of n bytes (plus its header) be asked of malloc at all? When not, the run
 * stops over quota unless try (the caller has a way on without it). */
static int buf_size_ok(uint64_t n, int try, char *err, size_t errlen)
{
        if (n <= SIZE_MAX - 2 * sizeof(struct buf_head))
                return 1;
        if (err && errlen)
                snprintf(err, errlen, "intermediates of %llu bytes are too large",
                         (unsigned long long)n);
        if (!try)
                ops_runctx_stop(PROTO_E_QUOTA);
        return 0;
}

/* try: a refusal records no stop reason (ops_buf_try_alloc). */
static void *buf_alloc(uint64_t n, int zero, int try, char *err, size_t errlen)
{
        struct ops_mem_budget *b = current ? current->mem : NULL;
        struct buf_head *h;
        int rc;

        if (!buf_size_ok(n, try, err, errlen))
                return NULL;
        rc = ops_mem_budget_charge(b, n, err, errlen);
        if (rc) {
                if (!try)
                        ops_runctx_stop(rc);
                return NULL;
        }
        h = zero ? calloc(1, sizeof(*h) + (size_t)n) : malloc(sizeof(*h) + (size_t)n);
        if (!h) {
                ops_mem_budget_uncharge(b, n);
                if (err && errlen)
                        snprintf(err, errlen, "out of host memory for %llu bytes of intermediates",
                                 (unsigned long long)n);
                return NULL;
        }
        h->n = n;
        h->b = b;
        return h + 1;
}

void *ops_buf_try_alloc(uint64_t n)
{
        return buf_alloc(n, 0, 1, NULL, 0);
}

void *ops_buf_alloc(uint64_t n, char *err, size_t errlen)
{
        return buf_alloc(n, 0, 0, err, errlen);
}

void *ops_buf_alloc0(uint64_t n, char *err, size_t errlen)
{
        return buf_alloc(n, 1, 0, err, errlen);
}

void *ops_buf_realloc(void *p, uint64_t n, char *err, size_t errlen)
{
        struct buf_head *h, *nh;
        int rc;

        if (!p)
                return buf_alloc(n, 0, 0, err, errlen);
        h = (struct buf_head *)p - 1;
        if (!buf_size_ok(n, 0, err, errlen))
                return NULL;
        /* Growth is charged before the memory is taken; shrinking gives back afterwards. */
        if (n > h->n) {
                rc = ops_mem_budget_charge(h->b, n - h->n, err, errlen);
                if (rc) {
                        ops_runctx_stop(rc);
                        return NULL;
                }
        }
        nh = realloc(h, sizeof(*h) + (size_t)n);
        if (!nh) {
                if (n > h->n)
                        ops_mem_budget_uncharge(h->b, n - h->n);
                if (err && errlen)
                        snprintf(err, errlen, "out of host memory for %llu bytes of intermediates",
                                 (unsigned long long)n);
                return NULL;
        }
        if (n < nh->n)
                ops_mem_budget_uncharge(nh->b, nh->n - n);
        nh->n = n;
        return nh + 1;
}

void ops_buf_free(void *p)
{
        struct buf_head *h;

        if (!p)
                return;
        h = (struct buf_head *)p - 1;
        ops_mem_budget_uncharge(h->b, h->n);
        free(h);
}

uint64_t ops_buf_size(const void *p)
{
        return p ? ((const struct buf_head *)p - 1)->n : 0;
}

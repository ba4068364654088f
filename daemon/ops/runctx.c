/* Run contexts of kernels on worker threads (see runctx.h). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../proto/errors.h"
#include "runctx.h"

static __thread struct ops_runctx *current;

void ops_runctx_set(struct ops_runctx *c)
{
        current = c;
}

struct ops_runctx *ops_runctx_get(void)
{
        return current;
}

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
                snprintf(err, errlen, "%s", c->code == PROTO_E_CANCELLED
                                                    ? "cancelled while running"
                                                    : "run exceeded its time limit (tenant max_run_ms)");
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

int ops_mem_charge(uint64_t n, char *err, size_t errlen)
{
        return current ? ops_mem_budget_charge(current->mem, n, err, errlen) : 0;
}

void ops_mem_uncharge(uint64_t n)
{
        if (current)
                ops_mem_budget_uncharge(current->mem, n);
}

void *ops_ws_alloc(uint64_t n, char *err, size_t errlen)
{
        void *p;

        if (ops_mem_charge(n, err, errlen))
                return NULL;
        p = n <= SIZE_MAX ? malloc(n ? (size_t)n : 1) : NULL;
        if (!p) {
                ops_mem_uncharge(n);
                if (err && errlen)
                        snprintf(err, errlen, "out of host memory for %llu bytes of intermediates",
                                 (unsigned long long)n);
        }
        return p;
}

void ops_ws_free(void *p, uint64_t n)
{
        if (!p)
                return;
        free(p);
        ops_mem_uncharge(n);
}

/* The limits a kernel honours while it runs on a backend worker thread: cancellation (reset,
 * session end, shutdown), a deadline (the tenant's limit on a run's length), a cap on Loop
 * trip counts, and a byte budget for graph intermediates and kernel workspaces charged to
 * the tenant that runs them. The worker installs one context per item with
 * ops_runctx_set(); kernels that can run long call ops_runctx_check() at least every few
 * milliseconds, and every intermediate allocation is an ops_buf (below). Outside a
 * worker (unit tests, the fuzzers) no context is installed and nothing is limited. */
#ifndef NPUD_OPS_RUNCTX_H
#define NPUD_OPS_RUNCTX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A byte budget shared by concurrent runs (a tenant's, the daemon's). used counts bytes
 * charged by runs now; held counts bytes the owner holds by other means (allocations, kept
 * up to date by the loop thread); limit 0 = none. A charge succeeds when used + held + n <=
 * limit at every level of the chain through parent. */
struct ops_mem_budget {
        _Atomic uint64_t used;
        _Atomic uint64_t held;
        _Atomic uint64_t limit;
        _Atomic uint64_t peak;
        const char *name; /* for messages: "tenant 'batch'", "npud" */
        struct ops_mem_budget *parent;
};

struct ops_runctx {
        atomic_int *cancel;      /* nonzero: stop now (NULL: never cancelled) */
        uint64_t deadline_ns;    /* CLOCK_MONOTONIC; 0 = none */
        uint64_t max_loop_trips; /* per Loop/Scan node; 0 = none */
        struct ops_mem_budget *mem; /* NULL = unlimited */
        int code;                /* PROTO_E_* of the first stop reason, sticky */
};

/* Install c for the calling thread (NULL removes it). */
void ops_runctx_set(struct ops_runctx *c);
/* The context installed on the calling thread (NULL: none). */
struct ops_runctx *ops_runctx_current(void);

/* 0 to go on; PROTO_E_CANCELLED (cancelled) or PROTO_E_LIMIT (past the deadline) with a
 * message when the running kernel must stop and fail. Cheap: call it in inner loops every
 * few thousand elements. */
int ops_runctx_check(char *err, size_t errlen);
/* A message for a stop code of the current run (PROTO_E_CANCELLED, _LIMIT, _QUOTA). */
const char *ops_runctx_reason(int code);
/* The cap on Loop/Scan trip counts in force (0 = none). */
uint64_t ops_runctx_max_trips(void);

/* Charge to an explicit budget chain (NULL: nothing charged). */
int ops_mem_budget_charge(struct ops_mem_budget *b, uint64_t n, char *err, size_t errlen);
void ops_mem_budget_uncharge(struct ops_mem_budget *b, uint64_t n);

/* Record code (a PROTO_E_*) as the reason the current run stops, unless one is recorded
 * already; returns the code in force (0 without a context). Kernels call it for limits they
 * enforce themselves (Loop trip cap: PROTO_E_LIMIT; over budget: PROTO_E_QUOTA) so that the
 * executor reports that code rather than a generic kernel failure. */
int ops_runctx_stop(int code);
/* The recorded stop reason of the current run (0: none, or no context). */
int ops_runctx_code(void);

/* Intermediates that remember their size and the budget they were charged to, so that any
 * code (the executor, a control-flow kernel, a later stage) frees them with ops_buf_free
 * alone and the right budget gets the bytes back. NULL with a message when over budget (the
 * run's stop reason becomes PROTO_E_QUOTA) or out of memory. ops_buf_alloc0 zero-fills.
 * ops_buf_realloc keeps the contents (p NULL: a fresh buffer); on failure p is untouched. */
void *ops_buf_alloc(uint64_t n, char *err, size_t errlen);
void *ops_buf_alloc0(uint64_t n, char *err, size_t errlen);
/* ops_buf_alloc for a caller that has a way on without the buffer (a path that needs less):
 * NULL when over budget or out of memory, and the run goes on (no stop reason recorded). */
void *ops_buf_try_alloc(uint64_t n);
void *ops_buf_realloc(void *p, uint64_t n, char *err, size_t errlen);
void ops_buf_free(void *p);
/* Bytes a buffer of ops_buf_alloc holds (0 for NULL). */
uint64_t ops_buf_size(const void *p);

/* n * size and a + b in bytes, or UINT64_MAX when they overflow (an allocation of that size
 * always fails). */
uint64_t ops_bytes(uint64_t n, uint64_t size);

#endif

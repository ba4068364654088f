/* STRING tensors inside a run. An element of a PROTO_DTYPE_STRING tensor is a pointer
 * (8 bytes) to an ops_str: a length, the bytes, and a NUL after them (so that C parsers
 * can read one without a copy; the bytes themselves may hold NULs). A NULL element reads as
 * the empty string, so that zero-filled tensors are valid.
 *
 * Kernels that copy elements (Identity, Reshape, Gather, ...) copy the pointers; kernels
 * that make strings take them from the string pool of the calling thread, which the graph
 * executor installs for the length of a run and frees when the run ends. Initializers
 * hold strings the graph owns. Such pointers are never taken from a client: launches
 * refuse the dtype, and graph runs decode an encoded form into the pool. */
#ifndef NPUD_OPS_STRINGS_H
#define NPUD_OPS_STRINGS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct ops_str {
        uint32_t len;
        char s[]; /* len bytes, then a NUL */
};

/* Bytes of the string element p (NULL: empty) and its length. */
static inline const char *ops_str_bytes(const struct ops_str *p, uint32_t *ret_len)
{
        *ret_len = p ? p->len : 0;
        return p ? p->s : "";
}

/* A run's strings. Steps of one run may make strings at the same time on several workers,
 * so taking a string locks the pool. */
struct ops_strpool {
        struct ops_strpool_chunk *chunks;
        int kept; /* ops_strpool_begin found a pool installed, which serves this run too */
        pthread_mutex_t lock;
};

/* One thread's run (graph_exec): install p for the calling thread unless a pool is
 * installed already, which then serves this run too (a subgraph run shares its parent's).
 * Allocates nothing. ops_strpool_end frees every string of p and uninstalls it (nothing
 * when an outer pool was kept). */
void ops_strpool_begin(struct ops_strpool *p);
void ops_strpool_end(struct ops_strpool *p);

/* A run in steps (graph_run_step): the pool made once with ops_strpool_init, installed on
 * the worker for each step (enter/leave, no nesting) and freed with ops_strpool_end. */
void ops_strpool_init(struct ops_strpool *p);
void ops_strpool_enter(struct ops_strpool *p);
void ops_strpool_leave(struct ops_strpool *p);

/* A string of len bytes copied from s, in the thread's pool (charged to the run's byte
 * budget), or NULL with a message (no pool, over budget, out of memory, over 4 GiB). */
struct ops_str *ops_str_new(const void *s, size_t len, char *err, size_t errlen);

/* Size of an ops_str of len bytes (header, bytes, NUL). */
static inline size_t ops_str_size(size_t len)
{
        return sizeof(struct ops_str) + len + 1;
}

/* ONNX strings are UTF-8. -1 when the len bytes at s are valid UTF-8 (no overlong forms,
 * surrogates or code points past U+10FFFF; NUL is a valid character), else the offset of
 * the first byte of the first invalid sequence. */
int64_t ops_utf8_check(const void *s, size_t len);

#endif

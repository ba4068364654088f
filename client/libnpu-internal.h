/* libnpu's private interface between its source files: the context, the request/reply
 * machinery and the batch. Nothing here is exported (libnpu.map lists the API). */
#ifndef NPU_LIBNPU_INTERNAL_H
#define NPU_LIBNPU_INTERNAL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/dtype.h"
#include "proto/frame.h"
#include "proto/message.h"
#include "proto/socket-path.h"
#include "proto/submit.h"
#include "npu.h"

#define NPU_EXPORT __attribute__((visibility("default")))
#define BATCH_FLUSH_BYTES (256u << 10)
#define STAGE_SIZE (8u << 20)
#define HANDLE_INDEX(h) ((h) & ((1u << 20) - 1))

#define NPU_WAKE_QUEUE 16

struct pending {
        uint64_t id;
        int done;
        int empty_result; /* the reply was {"result":{}}: nothing was parsed */
        json_t *reply;
        /* its waiter sleeps on this futex word (npu_wake_locked sets it, after the context's
         * lock is released: npu_ctx_unlock), woken for its reply or to take the reader's
         * turn */
        atomic_int wake;
        int sleeping;         /* the caller sleeps on wake (wakes go only to sleepers) */
        struct pending *next;
};

struct region_ent {
        uint32_t id;
        void *ptr;
        uint64_t size;
};

/* An operator name resolved to its registry id (op_resolve), so that launches carry the id. */
struct op_ent {
        uint32_t hash;         /* 0: empty slot */
        int32_t id;            /* registry id; -1: unknown to npud, launched by name */
        uint8_t len;
        char name[PROTO_REC_OP_NAME];
};

struct npu_context {
        int fd;
        int version;                /* the session protocol version hello negotiated */
        pthread_mutex_t mu;
        pthread_cond_t cv;
        int cv_sleepers;            /* threads waiting on cv (the completion reader thread):
                                     * broadcasts only when there are any */
        int reader_active;
        /* waiters to wake once the lock is released (npu_wake_locked, npu_ctx_unlock) */
        atomic_int *wake_q[NPU_WAKE_QUEUE];
        int nwake;
        int broken;
        /* why npud closed the connection, when it said so first ("session-killed"): the
         * errors of calls that find the connection gone carry it */
        char closed_reason[160];
        uint64_t next_id, next_seq;
        struct pending *pending;
        struct proto_reader reader;
        uint8_t *batch;
        size_t batch_len, batch_cap;
        int ndevices;
        uint32_t *internal_streams; /* per device, 0 until created */
        int32_t *buf_device;        /* device of each buffer, by handle index */
        size_t buf_device_cap;
        int32_t *stream_device;     /* device of each stream, by handle index */
        size_t stream_device_cap;
        char tenant[64];
        struct region_ent *regions;
        size_t nregions, regions_cap;
        void *stage_ptr;
        uint32_t stage_region;
        pthread_mutex_t stage_mu;   /* the staging region; each synchronous operation whole */
        struct graph_desc *graphs;  /* descriptions of the loaded graphs (mu) */
        struct op_ent *ops;         /* operator name -> id, open addressing (mu) */
        size_t ops_cap, ops_count;
        /* Fork detection (libnpu-lifecycle.c): the process and fork generation that connected;
         * a child of fork() shares the parent's socket and must not write to it. */
        pid_t pid;
        unsigned fork_gen;
        /* What npu_reconnect connects with again: NULL socket re-resolves the default. */
        char *conn_socket, *conn_tenant;
        npu_backpressure_t conn_backpressure;
        int conn_wait_spin_us;      /* as asked for (npu_connect_options_t.wait_spin_us) */
        uint64_t wait_spin_ns;      /* what a reply wait polls before it sleeps (0: never) */
        struct npu_compl *compl;    /* completion queue and reader thread, on first use (mu) */
        struct npu_hostrun *hostrun; /* npu_graph_run_host's per-graph slots (libnpu-hostrun.c) */
};

/* Size of the first released layout of a caller-allocated struct: up to the end of its last
 * member in that release (later members never lower it). */
#define NPU_SIZE_V1(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* The per-thread detail of the last failed call (npu_error_message, npu_error_task). */
extern __thread char npu_tls_message[4096];
extern __thread uint64_t npu_tls_task;

/* Sets the per-thread message and returns st. */
npu_status_t npu_fail(npu_status_t st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define fail npu_fail
/* NPU_ERR_CONNECTION, with "METHOD: " before (method may be NULL) and the reason npud gave
 * for closing the connection after, when it gave one. Takes ctx->mu: call it unlocked. */
npu_status_t npu_fail_lost(npu_context_t *ctx, const char *method);

/* Framing; ctx->mu held. */
int npu_send_frame_locked(npu_context_t *ctx, int kind, uint64_t id, const void *body, size_t len,
                          const int *fds, int nfds);
int npu_flush_locked(npu_context_t *ctx);

/* One request/reply; steals params. On success *ret (if given) is a new reference. */
npu_status_t npu_call_fds(npu_context_t *ctx, const char *method, json_t *params, const int *fds,
                          int nfds, json_t **ret);
npu_status_t npu_call(npu_context_t *ctx, const char *method, json_t *params, json_t **ret);
/* The devices the environment asks for (libnpu-visible.c): 1 with *mask set, 0 for no
 * restriction, -1 with err set when a variable is malformed. */
int npu_visible_devices(uint64_t *mask, char *err, size_t errlen);
npu_status_t npu_get_u32(json_t *result, const char *key, uint32_t *ret);

/* Appends one record to the batch (flushed at 256 KiB, at any call and at npu_flush). */
npu_status_t npu_submit(npu_context_t *ctx, struct proto_rec *rec, uint64_t *ret_task);

/* The device a buffer lives on, from the handles this context created or imported; -1. */
int npu_buffer_device(npu_context_t *ctx, npu_buffer_t b);

/* Fork safety (libnpu-lifecycle.c). npu_fork_gen counts the fork()s this process came
 * from (a pthread_atfork child handler, installed at the first connect), so every request
 * and submission checks a counter instead of making a getpid() system call (a ping costs
 * about 0.5 us of client CPU). npu_forked returns 1, with the per-thread message naming
 * both processes, when ctx was connected by another process (the parent); the caller then
 * fails with NPU_ERR_CONNECTION without touching ctx's lock or socket (the parent's). A
 * child made by clone() without the fork handlers is not detected. */
extern unsigned npu_fork_gen;
void npu_fork_init(npu_context_t *ctx);
int npu_forked_fail(npu_context_t *ctx, const char *what);
static inline int npu_forked(npu_context_t *ctx, const char *what)
{
        return __builtin_expect(ctx->fork_gen != __atomic_load_n(&npu_fork_gen, __ATOMIC_RELAXED), 0)
                       ? npu_forked_fail(ctx, what) : 0;
}
/* A waiter of a shared context is woken after the context's lock is released, not while the
 * waker holds it: woken under the lock, it preempted the waker on their CPU and blocked on the
 * lock at once (npubench serve, 4 threads on one context: 6.4 context switches a request
 * against 3.3 on their own contexts). npu_wake_locked queues p's waiter (under ctx->mu);
 * npu_ctx_unlock releases ctx->mu, then wakes what was queued; every release of ctx->mu goes
 * through it, and a wait on ctx->cv wakes the queue first (npu_wakes_flush_locked), so no
 * wake is left behind. */
void npu_wake_locked(npu_context_t *ctx, struct pending *p);
void npu_ctx_unlock(npu_context_t *ctx);
void npu_wakes_flush_locked(npu_context_t *ctx);
/* Everything npu_disconnect releases except the context itself (npu_reconnect reuses it). */
void npu_context_release(npu_context_t *ctx);
/* Become the reader once: read the socket (wait NPU_READ_NOW: only what is there; else
 * waiting for data, NPU_READ_REPLY after polling for the context's wait_spin_ns first) and
 * handle its frames (the caller found no reader active; mu is released during the read). */
enum { NPU_READ_NOW = 0, NPU_READ_REPLY = 1, NPU_READ_SLEEP = 2 };
void npu_read_once_locked(npu_context_t *ctx, int wait);

/* Completions (libnpu-completion.c): a notification frame's body, mu held; and stopping the
 * reader thread at disconnect, before the socket closes. */
void npu_notify_frame_locked(npu_context_t *ctx, const uint8_t *body, size_t len);
void npu_completion_frame_locked(npu_context_t *ctx, const uint8_t *body, size_t len);
void npu_completion_shutdown(npu_context_t *ctx);

/* Graph descriptions (libnpu-graph.c). */
void npu_graph_descs_free(npu_context_t *ctx);

/* npu_graph_run_host's state (libnpu-hostrun.c): a graph's slots released at its unload
 * (device buffers, regions, streams), everything client-side at disconnect. */
void npu_hostrun_graph_drop(npu_context_t *ctx, uint32_t graph);
void npu_hostrun_free(npu_context_t *ctx);

#endif

/* libnpu: the client library of npud, the NPU runtime service.
 *
 * A program connects to npud (npu_connect), allocates device memory, registers host regions
 * (shared memory both sides map), creates streams and events, and submits copies and operator
 * launches. Submission is asynchronous and pipelined: *_async calls and npu_launch queue work
 * and return at once; errors of queued work surface at the next synchronization point
 * (npu_stream_synchronize, npu_event_synchronize, npu_synchronize) with the failing task
 * identified by the task number the submitting call returned.
 *
 * Threads: every function may be called from any thread of the process, concurrently, on the
 * same context; calls on one context are serialized internally in the order they take its
 * lock. Work submitted to one stream from several threads runs in that lock order, so a
 * program that needs a particular order on a stream must order its submitting threads itself.
 * Error details (npu_error_message, npu_error_task) are per thread. A shared context is one
 * session (handles usable by every thread; give each thread its own stream, errors are per
 * stream) at the cost of its lock; one context per thread contends for nothing but its
 * handles are its own (libnpu(3), Threads).
 *
 * fork(): a context is not inherited (see npu_connect_with); npud restarts: npu_reconnect.
 * Typed administration calls: npu-admin.h.
 *
 * Return values: NPU_OK (0) or a positive npu_status_t. */
#ifndef NPU_H
#define NPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPU_API_VERSION 1
#define NPU_MAX_DIMS 8

typedef enum npu_status {
        NPU_OK = 0,
        NPU_ERR_INVALID = 1,
        NPU_ERR_BAD_HANDLE = 2,
        NPU_ERR_NO_MEMORY = 3,
        NPU_ERR_QUOTA = 4,
        NPU_ERR_LIMIT = 5,
        NPU_ERR_PERMISSION = 6,
        NPU_ERR_UNSUPPORTED = 7,
        NPU_ERR_SHAPE = 8,
        NPU_ERR_OUT_OF_RANGE = 9,
        NPU_ERR_PROTOCOL = 10,
        NPU_ERR_VERSION = 11,
        NPU_ERR_DEVICE = 12,
        NPU_ERR_EXEC = 13,
        NPU_ERR_BUSY = 14,
        NPU_ERR_NOT_READY = 15,
        NPU_ERR_CANCELLED = 16,
        NPU_ERR_CONNECTION = 17,
        NPU_ERR_SYSTEM = 18,
} npu_status_t;

/* Element types; values are the ONNX TensorProto data type codes. */
typedef enum npu_dtype {
        NPU_FLOAT32 = 1,
        NPU_UINT8 = 2,
        NPU_INT8 = 3,
        NPU_UINT16 = 4,
        NPU_INT16 = 5,
        NPU_INT32 = 6,
        NPU_INT64 = 7,
        /* Graph runs only: the bound bytes, from the tensor's offset to the end of its
         * buffer, hold each element as a uint32 little-endian length and the bytes, in
         * row-major order (docs/protocol.md). Launches refuse it. */
        NPU_STRING = 8,
        NPU_BOOL = 9,
        NPU_FLOAT16 = 10,
        NPU_FLOAT64 = 11,
        NPU_UINT32 = 12,
        NPU_UINT64 = 13,
        NPU_BFLOAT16 = 16,
        /* Graph values that are not tensors (docs/protocol.md, "Sequence and optional
         * values"): a sequence of tensors bound as a 1-D byte block in the layout of
         * proto/seq.h, and an empty optional bound as a 1-D value of extent 0. */
        NPU_SEQUENCE = 64,
        NPU_OPTIONAL_NONE = 65,
} npu_dtype_t;

typedef struct npu_context npu_context_t;
typedef struct { uint32_t id; } npu_buffer_t;
typedef struct { uint32_t id; } npu_stream_t;
typedef struct { uint32_t id; } npu_event_t;
typedef struct { uint32_t id; } npu_region_t;

typedef struct npu_tensor {
        npu_buffer_t buf;
        uint64_t offset; /* bytes into buf */
        npu_dtype_t dtype;
        int ndim;
        int64_t dims[NPU_MAX_DIMS];
} npu_tensor_t;

typedef struct npu_attr {
        const char *name;
        int is_float;
        int64_t i;
        double f;
} npu_attr_t;

/* Filled by npu_device_get_info. The caller sets size = sizeof(npu_device_info_t) before the
 * call (so the struct can grow in later releases without breaking this one): a size below this
 * first released layout is refused with NPU_ERR_INVALID (0 included); a larger one (a newer
 * header) has the fields this libnpu knows filled and size set to the bytes filled (later
 * fields, past that size, are left untouched). */
typedef struct npu_device_info {
        size_t size; /* set to sizeof(npu_device_info_t) */
        int id;
        char name[32];
        char profile[16];
        char health[16];
        uint64_t memory_total;
        uint64_t memory_used;
        int cube_cores, vector_cores, aicpu_cores;
} npu_device_info_t;

/* Human-readable name of a status ("invalid argument", ...). Never NULL. */
const char *npu_strerror(npu_status_t status);
/* Detail of the last failed call on this thread ("" when none). */
const char *npu_error_message(void);
/* Task number of the failed task behind the last synchronization error on this thread, 0
 * when the failure was not an asynchronous task. */
uint64_t npu_error_task(void);
const char *npu_version(void);

/* Connect to npud. path NULL: $NPU_SOCKET, else the system socket /run/npud/npud.sock when it
 * exists, else this user's socket ($XDG_RUNTIME_DIR/npud.sock or /tmp/npud-UID/npud.sock).
 * NPU_ERR_PERMISSION when the socket's permissions refuse this user, NPU_ERR_CONNECTION when
 * no npud listens there. */
npu_status_t npu_connect(const char *path, npu_context_t **ret_ctx);

/* What a client does when it has queued more work than its session or tenant may. */
typedef enum npu_backpressure {
        NPU_BACKPRESSURE_BLOCK = 0, /* submitting calls block until work drains (default) */
        NPU_BACKPRESSURE_ERROR = 1, /* work over the limit fails with NPU_ERR_BUSY, reported at
                                       the next synchronize; resubmit it later */
} npu_backpressure_t;

/* Options of npu_connect_with. The caller sets size = sizeof(npu_connect_options_t), e.g.
 * npu_connect_options_t o = { .size = sizeof(o), .tenant = "t" }; so the struct can grow in
 * later releases: a size below this first released layout is refused with NPU_ERR_INVALID (0
 * included); a larger one (a newer header) is accepted, fields libnpu does not know ignored. */
typedef struct npu_connect_options {
        size_t size;          /* set to sizeof(npu_connect_options_t) */
        const char *socket;   /* NULL: as npu_connect */
        const char *tenant;   /* tenant to join (granted only if npud's policy allows this
                                 user); NULL: $NPU_TENANT when set and not
                                 empty, else the tenant the credentials match */
        npu_backpressure_t backpressure;
        /* How long a thread waiting for a reply polls the socket before it sleeps, in
         * microseconds: > 0 that long, < 0 never, 0 (the default) NPU_WAIT_SPIN_LC_US when the
         * context's tenant is latency-critical and never otherwise. A reply that comes within
         * it finds the thread running: waking a sleeping one costs an interrupt to its CPU,
         * which on a busy host preempts the work there. $NPU_WAIT_SPIN_US, when set, decides
         * instead (same values). Since 0.1.0's wait_spin_us; an older, smaller struct gets the
         * default. */
        int wait_spin_us;
} npu_connect_options_t;

/* The default spin before a latency-critical tenant's waits sleep (wait_spin_us). */
#define NPU_WAIT_SPIN_LC_US 200

/* fork(): a context belongs to the process that connected it. A child of fork() shares the
 * parent's socket, so using the inherited context would interleave its requests with the
 * parent's and steal the parent's replies; libnpu detects it instead: in the child every call
 * that would talk to npud fails with NPU_ERR_CONNECTION and a message saying so, and the
 * parent's session is untouched. In the child, npu_disconnect the inherited context (it only
 * releases the child's copy: the parent's session stays open) and npu_connect anew, or
 * npu_reconnect it. Handles, host regions and graphs are per session: the child's new
 * session shares nothing with the parent's except through npu_buffer_export/import. */
npu_status_t npu_connect_with(const npu_connect_options_t *options, npu_context_t **ret_ctx);
/* The tenant the context belongs to (valid until npu_disconnect). */
const char *npu_tenant(npu_context_t *ctx);
/* Close the connection; npud releases everything the context still holds. */
void npu_disconnect(npu_context_t *ctx);
/* A null request round trip. */
npu_status_t npu_ping(npu_context_t *ctx);

/* After npud went away (restart, crash, the session killed): every call on the context fails
 * with NPU_ERR_CONNECTION, and everything the session held is gone for good: buffers,
 * streams, events, host regions (npud released them), loaded graphs and export tokens.
 * npu_reconnect gives the context a new session with the options it was connected with (a
 * NULL socket is looked up again, so $NPU_SOCKET is read anew) and the same pointer. It then
 * holds nothing: the old handles are unknown to the new session (NPU_ERR_BAD_HANDLE, or
 * worse, the same number naming a new object of this session), and the pointers of the old
 * host regions are unmapped; the program loads its graphs, allocates and uploads again. On
 * failure (npud not back yet: NPU_ERR_CONNECTION) the context stays as it was; retry later.
 * No other thread may use the context during the call. Also the way for a forked child to
 * get its own session from an inherited context (see npu_connect_with). */
npu_status_t npu_reconnect(npu_context_t *ctx);

npu_status_t npu_device_count(npu_context_t *ctx, int *ret_count);
npu_status_t npu_device_get_info(npu_context_t *ctx, int device, npu_device_info_t *ret_info);

/* Device memory. */
npu_status_t npu_malloc(npu_context_t *ctx, int device, uint64_t size, npu_buffer_t *ret_buf);
npu_status_t npu_free(npu_context_t *ctx, npu_buffer_t buf);
npu_status_t npu_memset(npu_context_t *ctx, npu_buffer_t buf, uint64_t offset, int value,
                        uint64_t size);

/* Free at a point in a stream: the handle dies now (later work naming it is rejected), the
 * memory returns once the stream has run everything submitted before. */
npu_status_t npu_free_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t buf,
                            uint64_t *ret_task);
/* A view of [offset, offset+size) of buf: its own handle, sharing buf's memory and lifetime
 * (the memory stays while any view or task uses it). Free it with npu_free. */
npu_status_t npu_buffer_view(npu_context_t *ctx, npu_buffer_t buf, uint64_t offset,
                             uint64_t size, npu_buffer_t *ret_view);

/* Sharing with other sessions. npu_buffer_export returns a 32-character token (plus NUL)
 * that sessions of the same tenant — or of the tenants named (at most 8) — can import. An
 * importer gets its own handle and keeps the memory alive after the exporter frees or exits.
 * readonly: imports may only be read. The exporter can revoke the token (no new imports). */
#define NPU_TOKEN_LEN 33
npu_status_t npu_buffer_export(npu_context_t *ctx, npu_buffer_t buf, const char *const *tenants,
                               int ntenants, int readonly, char ret_token[NPU_TOKEN_LEN]);
npu_status_t npu_buffer_import(npu_context_t *ctx, const char *token, int readonly,
                               npu_buffer_t *ret_buf);
npu_status_t npu_buffer_revoke(npu_context_t *ctx, const char *token);

/* Host regions: shared memory mapped by the client and npud, the analogue of pinned memory. */
npu_status_t npu_host_alloc(npu_context_t *ctx, uint64_t size, void **ret_ptr,
                            npu_region_t *ret_region);
npu_status_t npu_host_free(npu_context_t *ctx, npu_region_t region);

/* Synchronous copies from and to ordinary memory (staged through a library region). */
npu_status_t npu_memcpy_to_device(npu_context_t *ctx, npu_buffer_t dst, uint64_t dst_offset,
                                  const void *src, uint64_t size);
npu_status_t npu_memcpy_from_device(npu_context_t *ctx, void *dst, npu_buffer_t src,
                                    uint64_t src_offset, uint64_t size);
npu_status_t npu_memcpy_device(npu_context_t *ctx, npu_buffer_t dst, uint64_t dst_offset,
                               npu_buffer_t src, uint64_t src_offset, uint64_t size);

/* Streams: priority 0 (highest) to 7, ordering a tenant's own streams. device may be
 * NPU_DEVICE_ANY: npud places the stream by its placement policy; npu_stream_device tells
 * where it landed. */
#define NPU_DEVICE_ANY (-1)
npu_status_t npu_stream_create(npu_context_t *ctx, int device, int priority,
                               npu_stream_t *ret_stream);
npu_status_t npu_stream_destroy(npu_context_t *ctx, npu_stream_t stream);
npu_status_t npu_stream_device(npu_context_t *ctx, npu_stream_t stream, int *ret_device);
/* Give every task submitted to the stream from now on a deadline of deadline_us after its
 * submission (0 = none). Latency-critical tenants' tasks with deadlines are dispatched
 * earliest deadline first. */
npu_status_t npu_stream_set_deadline(npu_context_t *ctx, npu_stream_t stream, uint64_t deadline_us);
/* Wait for the stream's work. Fails with the first failure of a task of this stream since the
 * stream's last npu_stream_synchronize (npu_error_task names it), and clears it: work queued
 * behind a failed task is cancelled until then. Failures of other streams never fail it, and
 * nothing but this call consumes the stream's failure. */
npu_status_t npu_stream_synchronize(npu_context_t *ctx, npu_stream_t stream);
/* Wait for all work of this context on every stream. Fails with, in this order: a failure of
 * work submitted to an unknown or destroyed stream (reported here only, then cleared); else
 * a failure on a stream destroyed while it drained (cleared); else the earliest failure held
 * by a live stream, which is NOT cleared: that stream's npu_stream_synchronize still reports
 * it (and clears it), and until then every npu_synchronize reports it again and the stream's
 * work stays cancelled. */
npu_status_t npu_synchronize(npu_context_t *ctx);

/* Asynchronous work. ret_task (may be NULL) receives the task number. */
npu_status_t npu_memcpy_h2d_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t dst,
                                  uint64_t dst_offset, npu_region_t src, uint64_t src_offset,
                                  uint64_t size, uint64_t *ret_task);
npu_status_t npu_memcpy_d2h_async(npu_context_t *ctx, npu_stream_t stream, npu_region_t dst,
                                  uint64_t dst_offset, npu_buffer_t src, uint64_t src_offset,
                                  uint64_t size, uint64_t *ret_task);
npu_status_t npu_memcpy_d2d_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t dst,
                                  uint64_t dst_offset, npu_buffer_t src, uint64_t src_offset,
                                  uint64_t size, uint64_t *ret_task);
npu_status_t npu_memset_async(npu_context_t *ctx, npu_stream_t stream, npu_buffer_t buf,
                              uint64_t offset, int value, uint64_t size, uint64_t *ret_task);
npu_status_t npu_launch(npu_context_t *ctx, npu_stream_t stream, const char *op,
                        const npu_tensor_t *inputs, int ninputs,
                        const npu_tensor_t *outputs, int noutputs,
                        const npu_attr_t *attrs, int nattrs, uint64_t *ret_task);
/* Send queued submissions now (they are also sent by every synchronous call). */
npu_status_t npu_flush(npu_context_t *ctx);

/* Events. */
npu_status_t npu_event_create(npu_context_t *ctx, npu_event_t *ret_event);
npu_status_t npu_event_destroy(npu_context_t *ctx, npu_event_t event);
npu_status_t npu_event_record(npu_context_t *ctx, npu_event_t event, npu_stream_t stream);
npu_status_t npu_stream_wait_event(npu_context_t *ctx, npu_stream_t stream, npu_event_t event);
/* NPU_OK when the last record completed, NPU_ERR_NOT_READY while it has not. */
npu_status_t npu_event_query(npu_context_t *ctx, npu_event_t event);
/* Wait for the last record; fails with the failure its stream held when the record ran,
 * without clearing it (only the stream's npu_stream_synchronize does). */
npu_status_t npu_event_synchronize(npu_context_t *ctx, npu_event_t event);
npu_status_t npu_event_elapsed_ms(npu_context_t *ctx, npu_event_t start, npu_event_t end,
                                  float *ret_ms);

/* Completions without polling. npu_completion_fd gives a file descriptor (an eventfd the
 * context owns: do not read or close it) that is readable while completions are queued, for
 * the caller's own epoll/poll loop (level-triggered); npu_completion_next takes the oldest
 * one. The fd is an epoll instance the context owns (do not read or close it): it watches the
 * connection, which npu_completion_next then reads without blocking when no other call of
 * the program is reading it, and the queue, which completions read by other calls fill. A
 * wakeup may find nothing (NPU_ERR_NOT_READY): wait again. Needs npud speaking session
 * protocol version 3 (NPU_ERR_UNSUPPORTED otherwise).
 *
 * Kinds: NPU_COMPLETION_NOTIFY, the stream reached a npu_stream_notify point (everything
 * submitted to it before had finished); status is the stream's own first failure since its
 * last npu_stream_synchronize (error_task and message name the failed task), never another
 * stream's, and the failure is not cleared by it. NPU_COMPLETION_DEVICE_HEALTH (device,
 * health "ok"/"failed"/"resetting", draining) and NPU_COMPLETION_MEMORY_LOW (device,
 * free_bytes, total_bytes) are npud's notices to every client; they are queued from
 * npu_connect on, whether or not the program has called a completion function yet (a server
 * that creates its fd after loading its models still learns that a device failed meanwhile;
 * they are read from the socket by any call, or by npu_completion_next), at most 256 unread
 * at a time: past that the oldest unread notice is dropped, and npu_completion_dropped
 * counts the notices dropped since the connection. NPU_COMPLETION_EVENT (event, tag, status,
 * error_task, message) answers npu_event_notify. After the connection is lost the fd stays
 * readable and npu_completion_next returns NPU_ERR_CONNECTION once the queue is empty.
 *
 * Fork: a child must connect anew (the reader thread of host callbacks is not in it) (the calls here fail
 * with NPU_ERR_INVALID in a child, and its npu_disconnect leaves the parent's connection and
 * thread alone). */
typedef enum npu_completion_kind {
        NPU_COMPLETION_NOTIFY = 1,
        NPU_COMPLETION_DEVICE_HEALTH = 2,
        NPU_COMPLETION_MEMORY_LOW = 3,
        NPU_COMPLETION_EVENT = 4,
} npu_completion_kind_t;

typedef struct npu_completion {
        size_t size;        /* set by the caller: sizeof(npu_completion_t) */
        npu_completion_kind_t kind;
        npu_status_t status; /* NOTIFY: the stream's failure, NPU_OK when it has none */
        npu_stream_t stream; /* NOTIFY */
        uint64_t task;       /* NOTIFY: the task number npu_stream_notify returned */
        uint64_t tag;        /* NOTIFY, EVENT: the caller's tag */
        uint64_t error_task; /* NOTIFY: the failed task when status is not NPU_OK, else 0 */
        int device;          /* DEVICE_HEALTH, MEMORY_LOW */
        int draining;        /* DEVICE_HEALTH */
        char health[16];     /* DEVICE_HEALTH */
        uint64_t free_bytes, total_bytes; /* MEMORY_LOW */
        char message[256];   /* NOTIFY, EVENT: the failure's detail; "" when status is NPU_OK */
        npu_event_t event;   /* EVENT (added after message: an older caller's size stops before) */
} npu_completion_t;

npu_status_t npu_completion_fd(npu_context_t *ctx, int *ret_fd);
/* Ask for a NPU_COMPLETION_NOTIFY when the stream gets to this point; sends the queued
 * submissions (npu_flush). ret_task (may be NULL) gets the notify's task number.
 * NPU_ERR_BAD_HANDLE for a stream this context did not create or has destroyed. */
npu_status_t npu_stream_notify(npu_context_t *ctx, npu_stream_t stream, uint64_t tag,
                               uint64_t *ret_task);
/* Ask for a NPU_COMPLETION_EVENT (event, tag) once the event is complete, when
 * npu_event_synchronize would return (npu_event_query says NPU_OK): at once when it is, or
 * was never recorded. status is what npu_event_synchronize would return (the failure its
 * stream held when the record ran, not cleared). As for npu_event_synchronize, a record
 * reaching npud after this call but before the event completed is waited for too. Unlike npu_stream_notify after npu_event_record, it needs no
 * access to the recording stream (another thread's, or one whose later work must not delay
 * it) and tells the event's status, not the stream's. A request to npud (not batched); until
 * it fires it counts as one of the session's waiting synchronizations (npud's
 * limits.max_waiters, NPU_ERR_LIMIT past it). NPU_ERR_BAD_HANDLE for an unknown event. */
npu_status_t npu_event_notify(npu_context_t *ctx, npu_event_t event, uint64_t tag);
/* The device notices dropped since npu_connect because 256 were unread (the oldest go). */
npu_status_t npu_completion_dropped(npu_context_t *ctx, uint64_t *ret_count);
/* The oldest queued completion into *ret (ret->size set by the caller); NPU_ERR_NOT_READY
 * when none is queued. Never blocks. */
npu_status_t npu_completion_next(npu_context_t *ctx, npu_completion_t *ret);

/* Host callbacks (like cudaLaunchHostFunc): fn(user, status) runs on the context's reader
 * thread (started by the first such call, all signals blocked; from then on it reads npud's
 * replies and notices whenever no call of the program does) once everything submitted to the stream before it has finished (status as for a
 * notify: the stream's own failure, or NPU_OK), and nothing submitted to the stream after
 * it starts until fn has returned (libnpu then tells npud). fn may call libnpu, but must
 * not wait for its own stream (npu_stream_synchronize of it, npu_synchronize) nor call
 * npu_disconnect; while it runs, no other host callback of the context runs and completions
 * are still queued. Only this stream waits for fn: other streams, sessions and tenants go
 * on. When the connection is lost (or at npu_disconnect) callbacks not yet run are called
 * with NPU_ERR_CONNECTION. Sends the queued submissions. */
typedef void (*npu_host_func_t)(void *user, npu_status_t status);
npu_status_t npu_launch_host_func(npu_context_t *ctx, npu_stream_t stream, npu_host_func_t fn,
                                  void *user, uint64_t *ret_task);

/* Graphs (ONNX models) run inside npud: load once, run many times without a round trip
 * per operator. npu_graph_load takes the model bytes (sent to npud in a sealed memfd); the
 * graph's weights live in device memory of `device`, charged to the caller's tenant.
 * npu_graph_info returns JSON {"inputs":[{"name","dtype","shape"}],"outputs":[...],"steps":N,...}
 * (shape entries -1 where the model leaves a dimension open; steps: how many steps a run is
 * scheduled as; free() the string). npu_graph_run binds inputs and outputs, in the graph's
 * order, to device tensors and runs the graph as one task on the stream (which npud
 * schedules step by step, other work getting workers between steps); an output whose computed shape differs from the bound one fails
 * the task (NPU_ERR_SHAPE). Several runs of one graph may be in flight on different streams.
 * Before it queues the run, npu_graph_run checks the bound inputs against the graph's
 * description (below): a count that differs fails the call itself with NPU_ERR_INVALID, an
 * input whose dtype, rank or fixed extent differs with NPU_ERR_SHAPE, the message naming the
 * input; nothing is queued then. npud checks every binding again when it receives the run.
 * npud refuses at load a model whose fixed shapes conflict (NPU_ERR_SHAPE naming the node).
 * npu_graph_run_with (below) adds per-run options: deadline, tag, data-dependent outputs. */
typedef struct { uint32_t id; } npu_graph_t;
npu_status_t npu_graph_load(npu_context_t *ctx, int device, const void *model, size_t size,
                            npu_graph_t *ret_graph);
/* Load options (npu_graph_load_with), sized like npu_run_options_t (size =
 * sizeof(npu_load_options_t); below this first layout, or above 64 KiB: NPU_ERR_INVALID).
 * accumulate: how the graph's products (MatMul, Gemm, Conv, and every operator built on a
 *   matrix product) sum their terms. NPU_ACCUMULATE_FLOAT32 (the default): in float32, at
 *   the full speed of the float32 kernels; an element's error then grows with the number of
 *   terms it sums (K), about K float32 ulps of the terms, which after cancellation (an
 *   output near zero) can be far more than its own size. NPU_ACCUMULATE_FLOAT64: every
 *   multiply-add in float64 and one rounding to float32, so each element is within a few
 *   ulps of the exact sum of its float32 products, at about half the float32 kernels'
 *   throughput (docs/benchmarks.md measures both). NPU_ACCUMULATE_MIXED: GEMMs and MatMuls
 *   sum runs of 32 products in float32, four runs at a time in float32, and those sums in
 *   float64, so an element's error stays about 34 float32 ulps of its terms whatever K is,
 *   at about 90 % of the float32 kernels' throughput; convolutions sum the same runs over
 *   their im2col (channel, then kernel position), the bias added in float64. Needs an npud of protocol version 6 for NPU_ACCUMULATE_FLOAT64,
 *   7 for NPU_ACCUMULATE_MIXED (NPU_ERR_VERSION); other values: NPU_ERR_INVALID. npu_graph_load
 *   (or opts NULL) takes npud's default, its configuration's "graph_accumulate" (float32
 *   unless the operator set it). npu_graph_info's "accumulate" says which a graph uses. */
enum npu_accumulate {
        NPU_ACCUMULATE_FLOAT32 = 0,
        NPU_ACCUMULATE_FLOAT64 = 1,
        NPU_ACCUMULATE_MIXED = 2,
};
typedef struct npu_load_options {
        size_t size; /* set to sizeof(npu_load_options_t) */
        int accumulate; /* enum npu_accumulate */
} npu_load_options_t;
/* npu_graph_load with options (opts NULL: exactly npu_graph_load). */
npu_status_t npu_graph_load_with(npu_context_t *ctx, int device, const void *model, size_t size,
                                 const npu_load_options_t *opts, npu_graph_t *ret_graph);
npu_status_t npu_graph_unload(npu_context_t *ctx, npu_graph_t graph);
npu_status_t npu_graph_info(npu_context_t *ctx, npu_graph_t graph, char **ret_json);
npu_status_t npu_graph_run(npu_context_t *ctx, npu_stream_t stream, npu_graph_t graph,
                           const npu_tensor_t *inputs, int ninputs,
                           const npu_tensor_t *outputs, int noutputs, uint64_t *ret_task);

/* Per-run options (npu_graph_run_with). Allocated by the caller, which sets size =
 * sizeof(npu_run_options_t) so the struct can grow: a size below this first released layout
 * is refused with NPU_ERR_INVALID (0 included); a larger one is accepted, members this
 * library does not know ignored. Needs an npud of protocol version 3 (NPU_ERR_VERSION).
 * deadline_us: the run's deadline, deadline_us after its submission, replacing the stream's
 *   (npu_stream_set_deadline) for this run only; 0: the stream's. At most one hour.
 * tag: up to NPU_RUN_TAG_MAX printable ASCII characters (NULL or "": none), for tracing:
 *   a failure of the run names it ("run 'TAG': ..." in npu_error_message).
 * flags: NPU_RUN_FLEX_OUTPUTS: outputs whose shape depends on the data. Each bound output is
 *   a capacity: the computed output may have any shape of the bound dtype whose bytes fit in
 *   the bound tensor's (a bigger one fails the run with NPU_ERR_SHAPE); it is written from
 *   the tensor's offset, packed. After the run completed, npu_graph_run_output_shape reads
 *   each output's computed dtype and shape. */
#define NPU_RUN_TAG_MAX 32
#define NPU_RUN_FLEX_OUTPUTS 1u
typedef struct npu_run_options {
        size_t size;          /* set to sizeof(npu_run_options_t) */
        uint64_t deadline_us;
        const char *tag;
        unsigned flags;
} npu_run_options_t;
/* npu_graph_run with options (opts NULL: exactly npu_graph_run). */
npu_status_t npu_graph_run_with(npu_context_t *ctx, npu_stream_t stream, npu_graph_t graph,
                                const npu_tensor_t *inputs, int ninputs,
                                const npu_tensor_t *outputs, int noutputs,
                                const npu_run_options_t *opts, uint64_t *ret_task);
/* The computed dtype, rank and extents of output `index` of a completed run submitted with
 * NPU_RUN_FLEX_OUTPUTS (task: the number npu_graph_run_with returned), written into io's
 * dtype, ndim and dims (its buffer and offset are left as they are). npud keeps the shapes
 * of the last 16 such runs of each stream. NPU_ERR_NOT_READY while the run is queued or
 * running; NPU_ERR_INVALID for a run that failed, was not flexible, or is older;
 * NPU_ERR_OUT_OF_RANGE for an index past the outputs. */
npu_status_t npu_graph_run_output_shape(npu_context_t *ctx, npu_stream_t stream, uint64_t task,
                                        int index, npu_tensor_t *io);
/* Cancel a task of this context (any queued task: a graph run, launch or copy). A task not
 * started yet fails in place with NPU_ERR_CANCELLED: the stream's synchronize reports it
 * (npu_error_task names it) and, as after any failure, the stream's later work is cancelled
 * until that synchronize. A graph run already running is cut at its next node (and reported
 * the same way); a tiled kernel at its next tile. NPU_ERR_BUSY: the task already runs in a
 * chain of short tasks and will finish. NPU_ERR_INVALID: the task is neither queued nor
 * running on that stream (completed, failed, never submitted there). NPU_ERR_BAD_HANDLE: the
 * stream is not one of this context's. Other streams are never affected. */
npu_status_t npu_task_cancel(npu_context_t *ctx, npu_stream_t stream, uint64_t task);

/* Sharing a loaded graph with the other sessions of the same tenant (a pre-fork server loads
 * the weights once; each worker imports them). npu_graph_export returns a 32-character token
 * (plus NUL); npu_graph_import gives the importing context its own handle to the same graph
 * (weights are not copied). Only the context that loaded the graph may export it. A session
 * of another tenant is refused with NPU_ERR_PERMISSION; an unknown or ended token with
 * NPU_ERR_INVALID. A token ends with npu_graph_revoke, when the exporter unloads the graph,
 * and when the exporter disconnects; graphs already imported stay usable until their
 * importer unloads them, and the weights stay charged to the tenant (the loader's) until the
 * last handle and run using them are gone. */
npu_status_t npu_graph_export(npu_context_t *ctx, npu_graph_t graph, char ret_token[NPU_TOKEN_LEN]);
npu_status_t npu_graph_import(npu_context_t *ctx, const char *token, npu_graph_t *ret_graph);
npu_status_t npu_graph_revoke(npu_context_t *ctx, const char *token);

/* Typed graph introspection, without JSON and without a round trip: libnpu keeps each
 * graph's description from npu_graph_load's reply (else fetches it once with graph_info) until
 * npu_graph_unload. Inputs and outputs are numbered from 0 in binding order, the order
 * npu_graph_run takes them.
 * npu_graph_io_t is allocated by the caller and grows by version: set size to
 * sizeof(npu_graph_io_t) before the call. A smaller size is refused (NPU_ERR_INVALID); a
 * larger one (a program built against a newer header) gets the members this library knows
 * and zeros after them.
 * name: NUL-terminated; a name of NPU_GRAPH_NAME_LEN bytes or more is cut to fewer bytes
 * (on a UTF-8 character boundary) and name_len, always the full length, tells: name_len >=
 * NPU_GRAPH_NAME_LEN means cut. npu_graph_find_input/_output and npu_graph_info work with
 * full names. dtype: 0 where the model leaves the element type open. ndim: -1 where it leaves
 * the rank open. dims: -1 for an open extent (any extent binds).
 * npu_graph_find_input/_output: the index of the input or output with that exact name (the
 * first, when the model lists one value as several outputs).
 * Errors: NPU_ERR_BAD_HANDLE (unknown or unloaded graph), NPU_ERR_OUT_OF_RANGE (index),
 * NPU_ERR_INVALID (NULL argument, size; a name the graph has no input or output of). */
#define NPU_GRAPH_NAME_LEN 128
typedef struct npu_graph_io {
        size_t size;                  /* caller: sizeof(npu_graph_io_t) */
        char name[NPU_GRAPH_NAME_LEN];
        size_t name_len;              /* length of the whole name, in bytes */
        npu_dtype_t dtype;            /* 0: open */
        int ndim;                     /* -1: open rank */
        int64_t dims[NPU_MAX_DIMS];   /* -1: open extent */
} npu_graph_io_t;
/* Either count pointer may be NULL. */
npu_status_t npu_graph_io_count(npu_context_t *ctx, npu_graph_t graph, int *ret_ninputs,
                                int *ret_noutputs);
npu_status_t npu_graph_input(npu_context_t *ctx, npu_graph_t graph, int index, npu_graph_io_t *ret_io);
npu_status_t npu_graph_output(npu_context_t *ctx, npu_graph_t graph, int index, npu_graph_io_t *ret_io);
npu_status_t npu_graph_find_input(npu_context_t *ctx, npu_graph_t graph, const char *name,
                                  int *ret_index);
npu_status_t npu_graph_find_output(npu_context_t *ctx, npu_graph_t graph, const char *name,
                                   int *ret_index);

/* The one-call path for simple servers: run a loaded graph on tensors in ordinary host memory
 * and get the outputs back in host memory, without streams, regions or device buffers:
 *
 *   npu_host_tensor_t in[1] = { { .data = x, .bytes = sizeof(x), .dtype = NPU_FLOAT32,
 *                                 .ndim = 2, .dims = { 1, 8 } } };
 *   npu_host_tensor_t out[1] = { { .data = y, .bytes = sizeof(y) } };
 *   st = npu_graph_run_host(ctx, graph, in, 1, out, 1);   // out[0].dims now [1,4]
 *
 * inputs and outputs are in the graph's binding order (npu_graph_input/_output); their counts
 * must be the graph's. An input's dtype and shape must match the graph's description (open
 * extents take any value) and bytes must be exactly the tensor's size. An output's dtype,
 * ndim and dims are filled from the description on return; where the model leaves them open,
 * the caller sets them before the call (a call that reuses the outputs of the previous one
 * keeps them); bytes is the room at data, at least the output's size. Errors before anything
 * runs name the tensor: NPU_ERR_INVALID (counts, NULL data, bytes, nonzero reserved members),
 * NPU_ERR_SHAPE (dtype or shape); a failed run returns the run's error; NPU_ERR_BAD_HANDLE
 * for an unknown graph. The outputs' data is written only when the call succeeds.
 * The layout is fixed (arrays of it are passed): reserved members must be zero, e.g. by
 * initializing the struct with = { ... } or memset.
 *
 * How: libnpu keeps, per graph, device buffers, host regions and a stream for each call in
 * flight, made at first use and reused (a larger input grows them); the copies and the run go
 * through the region in one H2D copy and one D2H copy. Several threads may call it at once on
 * one context and one graph; each gets its own slot and stream, and a failure is reported to
 * the call that caused it only. npu_graph_unload frees the graph's slots (device memory
 * included), npu_disconnect everything. */
typedef struct npu_host_tensor {
        void *data;                 /* inputs: read only; outputs: written on success */
        uint64_t bytes;             /* inputs: the tensor's size; outputs: room at data */
        npu_dtype_t dtype;          /* outputs: filled */
        int ndim;                   /* outputs: filled */
        int64_t dims[NPU_MAX_DIMS]; /* outputs: filled */
        uint64_t reserved[4];       /* zero */
} npu_host_tensor_t;
npu_status_t npu_graph_run_host(npu_context_t *ctx, npu_graph_t graph,
                                const npu_host_tensor_t *inputs, int ninputs,
                                npu_host_tensor_t *outputs, int noutputs);

/* Administration: the daemon's JSON answer of an admin method ("devices", "sessions"),
 * returned as a string the caller frees with free(). npu-admin.h has typed calls for the
 * same methods; prefer those, whose results do not depend on the JSON's layout. */
npu_status_t npu_admin_call(npu_context_t *ctx, const char *method, const char *params_json,
                            char **ret_json);

#ifdef __cplusplus
}
#endif

#endif

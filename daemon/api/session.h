/* A client connection: its credentials, its frame reader and writer, its handle table and
 * everything it holds. When the connection ends, queued work is cancelled, running work
 * drains, and every object the client held is released. */
#ifndef NPUD_SESSION_H
#define NPUD_SESSION_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <jansson.h>

#include "proto/frame.h"
#include "daemon/exec/handle.h"
#include "daemon/exec/lcpoll.h"
#include "daemon/exec/stream.h"

struct npud;
struct event;

/* What one uid holds across its sessions, for the per-uid limits (npud.conf "limits"):
 * connections, streams (until the stream object is gone, draining included) and replies or
 * notifications written but not yet read. Loop thread only. */
struct uid_usage {
        struct uid_usage *next;
        uid_t uid;
        uint32_t conns;
        uint32_t streams;
        uint64_t output;
};

struct session {
        TAILQ_ENTRY(session) link;
        struct npud *npud;
        uint64_t id;
        int fd;
        struct event *read_event, *write_event;
        int write_armed; /* write_event added: output waits for the socket */
        struct proto_reader reader;
        struct proto_writer writer;
        pid_t pid;
        uid_t uid;
        gid_t gid;
        char comm[32];
        int admin; /* may see and manage other users' sessions */
        int version; /* negotiated protocol version, 0 before hello */
        struct handle_table handles;
        uint64_t buffer_bytes, region_bytes;
        uint32_t queued_tasks;
        uint64_t tasks_submitted, tasks_completed, tasks_failed;
        int read_paused;
        int closing;
        TAILQ_HEAD(, stream) streams; /* every stream still referring to this session */
        struct waiter_list waiters;
        struct stream_error deferred; /* failure not attributable to a live stream */
        struct tenant *tenant;        /* reference */
        char tenant_request[64];      /* tenant asked for at hello, "" for none */
        gid_t groups[64];             /* supplementary groups from SO_PEERGROUPS */
        int ngroups;
        uint64_t *dev_bytes;          /* device memory held through handles, per device */
        int backpressure_error;       /* over the queued-task limit: reject, don't block */
        /* Devices the client asked at hello not to see ('devices': a container given some
         * devices through CDI); a narrowing of its tenant's devices, never a widening. */
        uint64_t hidden_devices;
        struct uid_usage *uu;         /* this uid's usage, held while the session lives */
        struct event *timer_event;    /* hello timeout, then idle timeout */
        struct event *hup_event;      /* peer hang-up while reading is paused */
        uint64_t last_active_ns;      /* CLOCK_MONOTONIC of the last bytes read */
        int64_t started;              /* CLOCK_REALTIME seconds at accept (sessions listing) */
        uint64_t out_charged;         /* pending output counted in uu and the daemon total */
        const char *kill_reason;      /* close at the next timer callback (set by others) */
        uint32_t graph_loads;         /* graph_load requests not yet answered (graph-load.c) */
        /* The CPU the client's waiting thread last said it runs on ("cpu" of a wait, session
         * version 5), -1 unknown: output is written from there when a worker idles on it
         * (backend run_on_cpu), so that the client's wake-up stays on its CPU. */
        int client_cpu;
        struct lcpoll lcpoll; /* a latency-critical session's cadence (lcpoll.h) */
        uint64_t writes_on_client_cpu; /* flushes written from the client's CPU */
        ssize_t cpu_flush_left;        /* what such a flush left unwritten, or -errno */
};

/* The client gave up its handle to b (free, FREE record, session end): every export token
 * of b (and of views of b when b is an allocation) ends; an allocation leaves the session's
 * own figures, and its tenant's charge moves to b, which ends it with its last reference
 * (views and imports are never charged themselves: they share someone's allocation). */
void session_buffer_released(struct session *s, struct buffer *b);

/* The session gives up its handle to a loaded graph (unload, session end): the weights stay
 * charged to the tenant until runs still using them have completed, then the handle's
 * reference is dropped (methods-graph.c). */
struct graph_obj;
void graph_obj_release(struct session *s, struct graph_obj *o);
/* End the graph export tokens of a session (its end; methods-graph.c). */
void graph_exports_end_session(uint64_t session_id);
/* The session ends with graph_load requests in flight: queued ones go, running ones are
 * discarded when their helper thread is done (graph-load.c). */
void graph_loads_session_closed(struct session *s);

/* Move the session to the tenant its credentials (and request) match under the current
 * policy. 0, -EPERM or -ENOENT (request refused or unknown; tenant unchanged). */
int session_assign_tenant(struct session *s, const char *request);

/* Take over an accepted connection. 0 or -errno (fd is closed on failure); -EUSERS when the
 * connection limits refuse it (a "connection-refused" notification naming the limit is sent
 * before closing). */
int session_new(struct npud *d, int fd, struct session **ret);
/* hello succeeded: lift the before-hello frame limit, switch to the idle timeout. */
void session_hello_done(struct session *s);
/* Usage of a uid: the existing entry or a new one (NULL without memory); _put frees it once
 * nothing is counted. */
struct uid_usage *uid_usage_get(uid_t uid);
void uid_usage_put(struct uid_usage *u);
/* Number of deferred replies the session waits to send. */
uint32_t session_waiter_count(const struct session *s, uint32_t stop_at);
/* End a session now: cancel, drain, release. */
void session_close(struct session *s, const char *reason);
/* Queue a reply or notification. */
void session_send_json(struct session *s, int kind, uint64_t request_id, json_t *body);
void session_reply_result(struct session *s, uint64_t request_id, json_t *result);
void session_reply_error(struct session *s, uint64_t request_id, int code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Record an asynchronous failure on a stream (or the session when st is NULL) and notify. */
/* A "completion" notification (docs/protocol.md): a NOTIFY record reached (or refused, with
 * code set and held 0); held: the stream waits for host_func_done. */
void session_send_completion(struct session *s, uint32_t stream, uint64_t seq, uint64_t tag,
                             int host_func, int held, int code, uint64_t error_task,
                             const char *message);
void session_task_failed(struct session *s, struct stream *st, uint64_t seq, int code,
                         const char *message);
const char *session_tenant_name(const struct session *s);
/* 1 after replying PERMISSION when the session asked at hello not to use device id. */
int session_device_hidden(struct session *s, uint64_t request_id, const char *method, int id);
const char *session_tenant_class(const struct session *s);
/* A stream of the session on dev, linked into its list and its uid's stream count. */
struct device;
struct stream *session_stream_new(struct session *s, struct device *dev, int priority);
/* Answer the session's synchronize-everything waiters if all its streams are idle. */
void session_check_sync_waiters(struct session *s);
/* Become the observer of the execution layer (at start-up). */
void session_observe(struct npud *d);
/* Whether a reply went, since the last call, from the loop thread's CPU to a client that
 * waits on that same CPU (the wait's "cpu") or did not name one: the woken client may then
 * run there only once the loop thread sleeps, so the loop must not poll (main.c). Clears
 * it. */
int session_woke_here(void);
/* Reading resumes once queued work fell below the limit. */
void session_maybe_resume(struct session *s);

#endif

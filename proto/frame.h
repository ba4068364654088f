/* Wire framing shared by npud and libnpu: a fixed 24-byte little-endian header followed by
 * a body (JSON for requests, replies and notifications; binary records for SUBMIT), with
 * SCM_RIGHTS file descriptors attached to the first byte of the frame that declares them.
 * Every size is checked against the limits below before anything is allocated. */
#ifndef NPU_PROTO_FRAME_H
#define NPU_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC 0x3155504eu /* "NPU1" as little-endian bytes */
#define PROTO_VERSION 1         /* frame format version: every header carries it */
#define PROTO_VERSION_MIN 1
/* Session protocol versions, negotiated by hello (docs/protocol.md section 4). They are
 * separate from the frame version, which version 2 did not change. */
#define PROTO_SESSION_VERSION 7
#define PROTO_SESSION_VERSION_MIN 1
#define PROTO_VERSION_OP_ID 2 /* op_resolve and LAUNCH_ID records */
#define PROTO_VERSION_NOTIFY 3 /* NOTIFY records, "completion" notifications, host_func_done */
#define PROTO_VERSION_RUN_OPT 3 /* GRAPH_RUN_OPT records */
#define PROTO_VERSION_COMPLETION 4 /* completions as binary COMPLETION frames (completion.h) */
#define PROTO_VERSION_WAIT_CPU 5 /* waits name the client's CPU ("cpu") */
#define PROTO_VERSION_ACCUMULATE 6 /* graph_load's "accumulate" */
#define PROTO_VERSION_MIXED 7 /* graph_load's "accumulate": "mixed" */
#define PROTO_HEADER_SIZE 24
#define PROTO_MAX_BODY (16u << 20)     /* any frame */
#define PROTO_MAX_JSON_BODY (1u << 20) /* JSON frames are parsed only below this */
#define PROTO_MAX_FDS 4                /* fds per frame */

enum proto_kind {
        PROTO_KIND_REQUEST = 1, /* JSON {"method","params"}; expects one REPLY */
        PROTO_KIND_REPLY = 2,   /* JSON {"result"} or {"error":{code,name,message}} */
        PROTO_KIND_NOTIFY = 3,  /* JSON {"event","data"}; unsolicited, request_id 0 */
        PROTO_KIND_SUBMIT = 4,  /* binary task records (submit.h); no reply */
        PROTO_KIND_COMPLETION = 5, /* npud to client, session version 4: completion.h; request_id 0 */
};

struct proto_header {
        uint32_t magic;
        uint16_t version;
        uint8_t kind;
        uint8_t flags; /* reserved, must be 0 */
        uint8_t nfds;
        uint32_t body_len;
        uint64_t request_id;
};

void proto_header_encode(const struct proto_header *h, uint8_t out[PROTO_HEADER_SIZE]);
/* 0, or a negative errno: -EBADMSG (magic, reserved bits, unknown kind), -EPROTONOSUPPORT
 * (version), -EMSGSIZE (body over the limit for its kind), -ETOOMANYREFS (nfds). */
int proto_header_decode(const uint8_t in[PROTO_HEADER_SIZE], struct proto_header *ret);

/* Incremental frame reader: bytes (and fds) go in, whole frames come out. */
struct proto_reader {
        uint8_t *buf;
        size_t start, len, cap; /* unread bytes are buf[start, start+len) */
        int fds[PROTO_MAX_FDS * 2];
        int nfds;
        /* fds come in batches, one per read that carried them. The kernel may glue earlier
         * bytes in front of the frame that carried fds, so a batch is known only to belong to
         * a frame starting within the bytes of its read: [batch_start, batch_end). */
        struct {
                uint64_t start, end;
                int count;
        } batch[PROTO_MAX_FDS * 2];
        int nbatches;
        uint64_t received, consumed; /* stream offsets */
        uint32_t max_body;   /* 0, or a lower body limit than the protocol's (e.g. before hello) */
        uint64_t body_left;  /* body bytes still to come of a frame read in parts */
        int drained;         /* the last read took less than it had room for: the socket
                              * held nothing more at that moment */
};

struct proto_frame {
        struct proto_header hdr;
        const uint8_t *body; /* valid until the next call on the reader */
        int fds[PROTO_MAX_FDS]; /* owned by the caller after proto_reader_next */
};

void proto_reader_init(struct proto_reader *r);
void proto_reader_deinit(struct proto_reader *r); /* closes fds still queued */
/* Read what the socket has. Returns bytes read (> 0), 0 at EOF, -EAGAIN, -EBADMSG when fds
 * were truncated or too many are queued, or another -errno. */
ssize_t proto_reader_fill(struct proto_reader *r, int sock);
/* Append bytes as if read from a socket (tests, fuzzing). 0 or -ENOMEM. */
int proto_reader_feed(struct proto_reader *r, const void *data, size_t len);
/* Is a whole frame buffered? */
int proto_reader_has_frame(const struct proto_reader *r);
/* 1 with *ret filled, 0 when more input is needed, negative errno on a framing error (the
 * connection must be closed). A frame's fds must have arrived in the read that carried its
 * first byte, and match its declared count exactly; fds that no frame claims are a framing
 * error. */
int proto_reader_next(struct proto_reader *r, struct proto_frame *ret);
/* A frame read in parts (npud's SUBMIT bodies), so that a big body is never buffered whole:
 * proto_reader_peek_header checks the header at the front (1 with *ret filled, 0 when fewer
 * than 24 bytes are buffered, negative errno as proto_reader_next); proto_reader_begin_body
 * consumes that header (the frame must declare no fds) and starts its body; then
 * proto_reader_body returns the buffered part of the body (at most what is left of it) and
 * proto_reader_body_consume drops n bytes of it. 0 or a negative errno (-EBADMSG: fds that no
 * frame claims). While a body is in progress proto_reader_next and has_frame report nothing. */
int proto_reader_peek_header(const struct proto_reader *r, struct proto_header *ret);
int proto_reader_begin_body(struct proto_reader *r, const struct proto_header *h);
size_t proto_reader_body(const struct proto_reader *r, const uint8_t **ret);
int proto_reader_body_consume(struct proto_reader *r, size_t n);
/* Bytes of memory the reader holds. */
static inline size_t proto_reader_footprint(const struct proto_reader *r)
{
        return r->cap;
}

/* Growable output buffer of whole frames; flushes without blocking. */
struct proto_writer {
        uint8_t *buf;
        size_t start, len, cap;
};

void proto_writer_init(struct proto_writer *w);
void proto_writer_deinit(struct proto_writer *w);
int proto_writer_append(struct proto_writer *w, const struct proto_header *h, const void *body);
/* Writes as much as the socket takes. Returns bytes still pending (>= 0) or -errno. A buffer
 * that grew past 256 KiB is released once everything is written. */
ssize_t proto_writer_flush(struct proto_writer *w, int sock);

/* Blocking send of one frame with optional fds (client side). 0 or -errno. */
int proto_send_frame(int sock, const struct proto_header *h, const void *body, const int *fds);

#endif

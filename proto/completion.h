/* COMPLETION frames (kind 5, session version 4): a stream's NOTIFY point reached, or an
 * event_notify answered, as a fixed little-endian record instead of a JSON "completion"
 * notification. A completion is the one message a server's request loop waits for on every
 * request; encoding it on npud's loop thread and parsing it in the client cost more than the
 * rest of the notification path together (docs/protocol.md section 7.2 has the layout).
 *
 *   off  size
 *    0   u32  stream   (0 for an event's completion)
 *    4   u32  event    (the event of an event_notify; 0 otherwise)
 *    8   u64  task     (the NOTIFY record's sequence number; 0 for an event)
 *   16   u64  tag
 *   24   u64  error_task
 *   32   i32  code     (the first failure's code, 0 when none)
 *   36   u32  flags    (bit 0 host_func, bit 1 held, bit 2 the completion of an event)
 *   40   u32  message length (bytes that follow, at most PROTO_COMPLETION_MSG_MAX)
 *   44   u32  0
 *   48   message, UTF-8, not NUL-terminated */
#ifndef NPU_PROTO_COMPLETION_H
#define NPU_PROTO_COMPLETION_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_COMPLETION_FIXED 48
#define PROTO_COMPLETION_MSG_MAX 1024
#define PROTO_COMPLETION_MAX (PROTO_COMPLETION_FIXED + PROTO_COMPLETION_MSG_MAX)

enum {
        PROTO_COMPLETION_HOST_FUNC = 1u << 0,
        PROTO_COMPLETION_HELD = 1u << 1,
        PROTO_COMPLETION_EVENT = 1u << 2,
        PROTO_COMPLETION_FLAGS = 0x7u, /* every defined bit */
};

struct proto_completion {
        uint32_t stream, event;
        uint64_t task, tag, error_task;
        int32_t code;
        uint32_t flags;
        const char *message; /* encode: NUL-terminated; decode: points into the body */
        size_t message_len;  /* decode only */
};

/* Encodes c into out (at least PROTO_COMPLETION_MAX bytes); a longer message is cut at a
 * UTF-8 character boundary. Returns the body length. */
size_t proto_completion_encode(const struct proto_completion *c, uint8_t *out);
/* 0, or -1 when the body is not a well-formed completion (short, a length that disagrees with
 * the body, unknown flag bits, a non-zero reserved word). c->message then points into body. */
int proto_completion_decode(const uint8_t *body, size_t len, struct proto_completion *c);

#endif

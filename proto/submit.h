/* Hot-path task records carried in SUBMIT frames: fixed-width little-endian binary so the
 * daemon decodes a task in well under a microsecond (a JSON launch costs 8-10 us to parse).
 * A SUBMIT body is a sequence of records; each starts with a 24-byte record header.
 *
 *   record header: u16 type, u16 flags(0), u32 len (whole record, multiple of 8),
 *                  u64 seq (client task number, echoed in errors), u32 stream, u32 0
 *   COPY        : u8 dst_kind, u8 src_kind, u8[6] 0, u32 dst, u32 src,
 *                 u64 dst_off, u64 src_off, u64 len                        (40 bytes)
 *   MEMSET      : u32 buf, u8 value, u8[3] 0, u64 off, u64 len             (24 bytes)
 *   EVENT_RECORD, STREAM_WAIT: u32 event, u32 0                            (8 bytes)
 *   FREE        : u32 buf, u32 0: the buffer handle dies at submission, the memory returns
 *                 when the stream reaches this point                        (8 bytes)
 *   LAUNCH      : char op[32] (NUL padded), u8 nin, u8 nout, u8 nattr, u8 0, u32 0,
 *                 then nin+nout tensors of 80 bytes:
 *                   u32 buf, u8 dtype, u8 ndim, u16 0, u64 offset, i64 dims[8]
 *                 then nattr attributes of 48 bytes:
 *                   char name[32], u8 type (1 int, 2 float), u8[7] 0, i64 or f64 value
 *   GRAPH_RUN   : u32 graph, u16 nin, u16 nout, u32 0, u32 0, then nin+nout tensors in the
 *                 LAUNCH layout (inputs first), nin+nout <= 64       (16 + 80 per tensor)
 *   LAUNCH_ID   : u16 op_id (registry id from op_resolve), u8 nin, u8 nout, u8 nattr, u8[3] 0,
 *                 then tensors and attributes as in LAUNCH (session protocol version 2)
 *   NOTIFY      : u64 tag, u32 flags (bit 0 HOLD), u32 0: when the stream reaches it, npud
 *                 sends a "completion" notification carrying the tag, the record's seq
 *                 and the stream's error; with HOLD (a host callback) the stream then
 *                 waits for the client's host_func_done before its next task
 *                 (session protocol version 3)                       (16 bytes)
 *   GRAPH_RUN_OPT: u32 graph, u16 nin, u16 nout, u32 flags, u32 0, u64 deadline_us,
 *                 char tag[32] (NUL padded, printable), u64 0, then the tensors as in
 *                 GRAPH_RUN (64 + 80 per tensor; session protocol version 3). flags:
 *                 PROTO_RUN_FLEX_OUTPUTS. deadline_us 0: the stream's deadline.
 * Kinds for COPY endpoints: 0 = device buffer, 1 = host region. */
#ifndef NPU_PROTO_SUBMIT_H
#define NPU_PROTO_SUBMIT_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_REC_HEADER_SIZE 24
#define PROTO_REC_MAX_DIMS 8
#define PROTO_REC_MAX_TENSORS 12
#define PROTO_REC_MAX_ATTRS 8
#define PROTO_REC_OP_NAME 32
#define PROTO_REC_MAX_GRAPH_TENSORS 64

enum proto_rec_type {
        PROTO_REC_COPY = 1,
        PROTO_REC_MEMSET = 2,
        PROTO_REC_EVENT_RECORD = 3,
        PROTO_REC_STREAM_WAIT = 4,
        PROTO_REC_LAUNCH = 5,
        PROTO_REC_FREE = 6,
        PROTO_REC_GRAPH_RUN = 7,
        PROTO_REC_LAUNCH_ID = 8,
        PROTO_REC_NOTIFY = 9,
        PROTO_REC_GRAPH_RUN_OPT = 10,
};

#define PROTO_NOTIFY_HOLD 1u /* NOTIFY flag: a host callback; the stream waits for its ack */

/* GRAPH_RUN_OPT flags. */
#define PROTO_RUN_FLEX_OUTPUTS 1u /* outputs bound by capacity; computed shapes kept */
#define PROTO_RUN_FLAGS_KNOWN PROTO_RUN_FLEX_OUTPUTS
#define PROTO_REC_TAG_LEN 32

enum proto_mem_kind { PROTO_MEM_BUFFER = 0, PROTO_MEM_REGION = 1 };

struct proto_rec_tensor {
        uint32_t buf;
        uint8_t dtype;
        uint8_t ndim;
        uint64_t offset;
        int64_t dims[PROTO_REC_MAX_DIMS];
};

struct proto_rec_attr {
        char name[PROTO_REC_OP_NAME];
        uint8_t type;
        int64_t i;
        double f;
};

struct proto_rec {
        uint16_t type;
        uint64_t seq;
        uint32_t stream;
        union {
                struct {
                        uint8_t dst_kind, src_kind;
                        uint32_t dst, src;
                        uint64_t dst_off, src_off, len;
                } copy;
                struct {
                        uint32_t buf;
                        uint8_t value;
                        uint64_t off, len;
                } memset;
                struct {
                        uint32_t event;
                } event;
                struct {
                        uint32_t buf;
                } free;
                struct {
                        uint64_t tag;
                        uint32_t flags;
                } notify;
                /* LAUNCH and LAUNCH_ID: op names the operator of a LAUNCH (NUL terminated
                         * after decode; "" for LAUNCH_ID), op_id that of a LAUNCH_ID. */
                struct {
                        char op[PROTO_REC_OP_NAME];
                        uint16_t op_id;
                        uint8_t nin, nout, nattr;
                        struct proto_rec_tensor t[PROTO_REC_MAX_TENSORS];
                        struct proto_rec_attr attr[PROTO_REC_MAX_ATTRS];
                } launch;
                /* GRAPH_RUN and GRAPH_RUN_OPT (flags, deadline_us and tag: the latter only;
                 * tag NUL terminated after decode). */
                struct {
                        uint32_t graph;
                        uint16_t nin, nout;
                        uint32_t flags;
                        uint64_t deadline_us;
                        char tag[PROTO_REC_TAG_LEN + 1];
                        struct proto_rec_tensor t[PROTO_REC_MAX_GRAPH_TENSORS];
                } graph;
        };
};

/* Encoded size of a record, 0 if it is not encodable (too many tensors/attrs, bad type). */
size_t proto_rec_size(const struct proto_rec *rec);
/* Encode into out (which has proto_rec_size() bytes). Returns the size written. */
size_t proto_rec_encode(const struct proto_rec *rec, uint8_t *out);
/* Decode the record at buf[*pos]; advances *pos. 1 = decoded, 0 = end of buffer,
 * -EBADMSG with a message in err for a malformed record (the rest of the body is then
 * unusable, and *ret partly written). Only the members the record holds are written: the
 * header, its type's fields and, for launches and graph runs, the first nin+nout tensors
 * and nattr attributes; the rest of *ret is left as it was. */
int proto_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct proto_rec *ret,
                     char *err, size_t errlen);

/* Direct encoding of a launch record, for a client that builds it from its own structures
 * rather than a zero-filled struct proto_rec (several KB) per launch. Write the header and
 * fixed part with proto_launch_begin() into proto_launch_size() bytes, then the nin+nout
 * tensors and the nattr attributes in order; each helper returns where the next item goes.
 * op is the name of a LAUNCH record, or NULL for a LAUNCH_ID record carrying op_id. The
 * caller checks the limits (counts, name lengths, ndim <= PROTO_REC_MAX_DIMS) beforehand. */
size_t proto_launch_size(int by_id, unsigned ntensors, unsigned nattr);
uint8_t *proto_launch_begin(uint8_t *out, size_t size, uint64_t seq, uint32_t stream,
                            const char *op, uint16_t op_id, uint8_t nin, uint8_t nout,
                            uint8_t nattr);
/* dims holds ndim extents; the record's remaining extents are written as 0. */
uint8_t *proto_launch_put_tensor(uint8_t *p, uint32_t buf, uint8_t dtype, uint8_t ndim,
                                 uint64_t offset, const int64_t *dims);
/* type 1 integer (i), 2 float (f). */
uint8_t *proto_launch_put_attr(uint8_t *p, const char *name, uint8_t type, int64_t i, double f);

#endif

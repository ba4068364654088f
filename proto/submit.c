/* Encoding and bounds-checked decoding of SUBMIT task records (layout in submit.h). */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "submit.h"

#define TENSOR_SIZE 80
#define ATTR_SIZE 48

static void put16(uint8_t *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

/* Writes nd extents of dims and zeros for the rest of the 8. */
static uint8_t *put_tensor_dims(uint8_t *p, uint32_t buf, uint8_t dtype, uint8_t ndim,
                                uint64_t offset, const int64_t *dims, int nd)
{
        put32(p, buf);
        p[4] = dtype;
        p[5] = ndim;
        put16(p + 6, 0);
        put64(p + 8, offset);
        for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                put64(p + 16 + 8 * d, d < nd ? (uint64_t)dims[d] : 0);
        return p + TENSOR_SIZE;
}

/* Every extent, also beyond ndim: a record must round-trip whatever it holds. */
static uint8_t *put_tensor(uint8_t *p, const struct proto_rec_tensor *t)
{
        return put_tensor_dims(p, t->buf, t->dtype, t->ndim, t->offset, t->dims, PROTO_REC_MAX_DIMS);
}

uint8_t *proto_launch_put_tensor(uint8_t *p, uint32_t buf, uint8_t dtype, uint8_t ndim,
                                 uint64_t offset, const int64_t *dims)
{
        return put_tensor_dims(p, buf, dtype, ndim, offset, dims,
                               ndim < PROTO_REC_MAX_DIMS ? ndim : PROTO_REC_MAX_DIMS);
}

/* A NUL-padded name field; the caller has checked the length. */
static void put_name(uint8_t *p, const char *name)
{
        size_t n = name ? strnlen(name, PROTO_REC_OP_NAME - 1) : 0;
        memcpy(p, name, n);
        memset(p + n, 0, PROTO_REC_OP_NAME - n);
}

uint8_t *proto_launch_put_attr(uint8_t *p, const char *name, uint8_t type, int64_t i, double f)
{
        uint64_t bits;

        put_name(p, name);
        p[32] = type;
        memset(p + 33, 0, 7);
        if (type == 2)
                memcpy(&bits, &f, 8);
        else
                bits = (uint64_t)i;
        put64(p + 40, bits);
        return p + ATTR_SIZE;
}

static void put_header(uint8_t *out, uint16_t type, size_t size, uint64_t seq, uint32_t stream)
{
        put16(out, type);
        put16(out + 2, 0);
        put32(out + 4, (uint32_t)size);
        put64(out + 8, seq);
        put32(out + 16, stream);
        put32(out + 20, 0);
}

size_t proto_launch_size(int by_id, unsigned ntensors, unsigned nattr)
{
        if (ntensors > PROTO_REC_MAX_TENSORS || nattr > PROTO_REC_MAX_ATTRS)
                return 0;
        return PROTO_REC_HEADER_SIZE + (by_id ? 8 : 40) + TENSOR_SIZE * (size_t)ntensors +
               ATTR_SIZE * (size_t)nattr;
}

uint8_t *proto_launch_begin(uint8_t *out, size_t size, uint64_t seq, uint32_t stream,
                            const char *op, uint16_t op_id, uint8_t nin, uint8_t nout,
                            uint8_t nattr)
{
        uint8_t *p = out + PROTO_REC_HEADER_SIZE;

        put_header(out, op ? PROTO_REC_LAUNCH : PROTO_REC_LAUNCH_ID, size, seq, stream);
        if (!op) {
                put16(p, op_id);
                p[2] = nin;
                p[3] = nout;
                p[4] = nattr;
                memset(p + 5, 0, 3);
                return p + 8;
        }
        put_name(p, op);
        p[32] = nin;
        p[33] = nout;
        p[34] = nattr;
        memset(p + 35, 0, 5);
        return p + 40;
}

/* -1 when the reserved bytes are not zero. */
static int get_tensor(const uint8_t *p, struct proto_rec_tensor *t)
{
        t->buf = get32(p);
        t->dtype = p[4];
        t->ndim = p[5];
        t->offset = get64(p + 8);
        for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                t->dims[d] = (int64_t)get64(p + 16 + 8 * d);
        return get16(p + 6) ? -1 : 0;
}

static size_t payload_size(const struct proto_rec *rec)
{
        switch (rec->type) {
        case PROTO_REC_COPY: return 40;
        case PROTO_REC_MEMSET: return 24;
        case PROTO_REC_EVENT_RECORD:
        case PROTO_REC_STREAM_WAIT:
        case PROTO_REC_FREE: return 8;
        case PROTO_REC_NOTIFY: return 16;
        case PROTO_REC_LAUNCH:
        case PROTO_REC_LAUNCH_ID: {
                size_t n = proto_launch_size(rec->type == PROTO_REC_LAUNCH_ID,
                                             (unsigned)rec->launch.nin + rec->launch.nout,
                                             rec->launch.nattr);
                return n ? n - PROTO_REC_HEADER_SIZE : 0;
        }
        case PROTO_REC_GRAPH_RUN:
                if ((unsigned)rec->graph.nin + rec->graph.nout > PROTO_REC_MAX_GRAPH_TENSORS)
                        return 0;
                return 16 + TENSOR_SIZE * ((size_t)rec->graph.nin + rec->graph.nout);
        case PROTO_REC_GRAPH_RUN_OPT:
                if ((unsigned)rec->graph.nin + rec->graph.nout > PROTO_REC_MAX_GRAPH_TENSORS)
                        return 0;
                return 64 + TENSOR_SIZE * ((size_t)rec->graph.nin + rec->graph.nout);
        default: return 0;
        }
}

size_t proto_rec_size(const struct proto_rec *rec)
{
        size_t p = payload_size(rec);
        return p ? PROTO_REC_HEADER_SIZE + p : 0;
}

size_t proto_rec_encode(const struct proto_rec *rec, uint8_t *out)
{
        size_t size = proto_rec_size(rec);
        uint8_t *p = out + PROTO_REC_HEADER_SIZE;

        if (!size)
                return 0;
        memset(out, 0, size);
        put16(out, rec->type);
        put32(out + 4, (uint32_t)size);
        put64(out + 8, rec->seq);
        put32(out + 16, rec->stream);
        switch (rec->type) {
        case PROTO_REC_COPY:
                p[0] = rec->copy.dst_kind;
                p[1] = rec->copy.src_kind;
                put32(p + 8, rec->copy.dst);
                put32(p + 12, rec->copy.src);
                put64(p + 16, rec->copy.dst_off);
                put64(p + 24, rec->copy.src_off);
                put64(p + 32, rec->copy.len);
                break;
        case PROTO_REC_MEMSET:
                put32(p, rec->memset.buf);
                p[4] = rec->memset.value;
                put64(p + 8, rec->memset.off);
                put64(p + 16, rec->memset.len);
                break;
        case PROTO_REC_EVENT_RECORD:
        case PROTO_REC_STREAM_WAIT:
                put32(p, rec->event.event);
                break;
        case PROTO_REC_FREE:
                put32(p, rec->free.buf);
                break;
        case PROTO_REC_NOTIFY:
                put64(p, rec->notify.tag);
                put32(p + 8, rec->notify.flags);
                break;
        case PROTO_REC_LAUNCH:
        case PROTO_REC_LAUNCH_ID: {
                size_t nt = (size_t)rec->launch.nin + rec->launch.nout;
                p = proto_launch_begin(out, size, rec->seq, rec->stream,
                                       rec->type == PROTO_REC_LAUNCH ? rec->launch.op : NULL,
                                       rec->launch.op_id, rec->launch.nin, rec->launch.nout,
                                       rec->launch.nattr);
                for (size_t i = 0; i < nt; i++)
                        p = put_tensor(p, &rec->launch.t[i]);
                for (size_t i = 0; i < rec->launch.nattr; i++) {
                        const struct proto_rec_attr *a = &rec->launch.attr[i];
                        p = proto_launch_put_attr(p, a->name, a->type, a->i, a->f);
                }
                break;
        }
        case PROTO_REC_GRAPH_RUN: {
                size_t nt = (size_t)rec->graph.nin + rec->graph.nout;
                put32(p, rec->graph.graph);
                put16(p + 4, rec->graph.nin);
                put16(p + 6, rec->graph.nout);
                p += 16;
                for (size_t i = 0; i < nt; i++)
                        p = put_tensor(p, &rec->graph.t[i]);
                break;
        }
        case PROTO_REC_GRAPH_RUN_OPT: {
                size_t nt = (size_t)rec->graph.nin + rec->graph.nout;
                put32(p, rec->graph.graph);
                put16(p + 4, rec->graph.nin);
                put16(p + 6, rec->graph.nout);
                put32(p + 8, rec->graph.flags);
                put64(p + 16, rec->graph.deadline_us);
                memcpy(p + 24, rec->graph.tag, strnlen(rec->graph.tag, PROTO_REC_TAG_LEN));
                p += 64;
                for (size_t i = 0; i < nt; i++)
                        p = put_tensor(p, &rec->graph.t[i]);
                break;
        }
        }
        return size;
}

static int all_zero(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return 0;
        return 1;
}

/* A fixed-size name field must hold a NUL-terminated, non-empty printable name. */
static int decode_name(const uint8_t *p, char *out)
{
        size_t n = strnlen((const char *)p, PROTO_REC_OP_NAME);
        if (n == 0 || n == PROTO_REC_OP_NAME || !all_zero(p + n, PROTO_REC_OP_NAME - n))
                return -1;
        for (size_t i = 0; i < n; i++)
                if (p[i] < 0x21 || p[i] > 0x7e)
                        return -1;
        memcpy(out, p, n + 1);
        return 0;
}

/* Tensors into t; -1 when reserved bytes are not zero. */
static int get_tensors(const uint8_t *p, size_t nt, struct proto_rec_tensor *t)
{
        for (size_t i = 0; i < nt; i++, p += TENSOR_SIZE)
                if (get_tensor(p, &t[i]) < 0)
                        return -1;
        return 0;
}

/* Decoding writes only what the record holds, straight into *ret: clearing or copying a
 * whole struct proto_rec (5 KB, sized for a graph run's 64 tensors) per record would cost
 * more than decoding a small record does. */
int proto_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct proto_rec *ret,
                     char *err, size_t errlen)
{
        const uint8_t *h, *p;
        size_t left, size;
        struct proto_rec *rec = ret;

        if (*pos >= len)
                return 0;
        left = len - *pos;
        h = buf + *pos;
        if (left < PROTO_REC_HEADER_SIZE) {
                snprintf(err, errlen, "truncated record header at byte %zu", *pos);
                return -EBADMSG;
        }
        rec->type = get16(h);
        size = get32(h + 4);
        rec->seq = get64(h + 8);
        rec->stream = get32(h + 16);
        if (get16(h + 2) || get32(h + 20)) {
                snprintf(err, errlen, "record %llu: reserved header bytes are not zero",
                         (unsigned long long)rec->seq);
                return -EBADMSG;
        }
        if (size < PROTO_REC_HEADER_SIZE || size > left) {
                snprintf(err, errlen, "record %llu: length %zu outside the frame",
                         (unsigned long long)rec->seq, size);
                return -EBADMSG;
        }
        p = h + PROTO_REC_HEADER_SIZE;
        if (rec->type == PROTO_REC_LAUNCH) {
                if (size < PROTO_REC_HEADER_SIZE + 40) {
                        snprintf(err, errlen, "record %llu: launch record too short",
                                 (unsigned long long)rec->seq);
                        return -EBADMSG;
                }
                rec->launch.nin = p[32];
                rec->launch.nout = p[33];
                rec->launch.nattr = p[34];
        }
        if (rec->type == PROTO_REC_LAUNCH_ID) {
                if (size < PROTO_REC_HEADER_SIZE + 8) {
                        snprintf(err, errlen, "record %llu: launch-by-id record too short",
                                 (unsigned long long)rec->seq);
                        return -EBADMSG;
                }
                rec->launch.nin = p[2];
                rec->launch.nout = p[3];
                rec->launch.nattr = p[4];
        }
        if (rec->type == PROTO_REC_GRAPH_RUN || rec->type == PROTO_REC_GRAPH_RUN_OPT) {
                if (size < PROTO_REC_HEADER_SIZE + (rec->type == PROTO_REC_GRAPH_RUN ? 16 : 64)) {
                        snprintf(err, errlen, "record %llu: graph run record too short",
                                 (unsigned long long)rec->seq);
                        return -EBADMSG;
                }
                rec->graph.nin = get16(p + 4);
                rec->graph.nout = get16(p + 6);
        }
        size_t want = proto_rec_size(rec);
        if (!want || want != size) {
                snprintf(err, errlen, "record %llu: type %u with length %zu is not valid",
                         (unsigned long long)rec->seq, rec->type, size);
                return -EBADMSG;
        }
        switch (rec->type) {
        case PROTO_REC_COPY:
                rec->copy.dst_kind = p[0];
                rec->copy.src_kind = p[1];
                rec->copy.dst = get32(p + 8);
                rec->copy.src = get32(p + 12);
                rec->copy.dst_off = get64(p + 16);
                rec->copy.src_off = get64(p + 24);
                rec->copy.len = get64(p + 32);
                if (!all_zero(p + 2, 6))
                        goto reserved;
                break;
        case PROTO_REC_MEMSET:
                rec->memset.buf = get32(p);
                rec->memset.value = p[4];
                rec->memset.off = get64(p + 8);
                rec->memset.len = get64(p + 16);
                if (!all_zero(p + 5, 3))
                        goto reserved;
                break;
        case PROTO_REC_EVENT_RECORD:
        case PROTO_REC_STREAM_WAIT:
                rec->event.event = get32(p);
                if (get32(p + 4))
                        goto reserved;
                break;
        case PROTO_REC_FREE:
                rec->free.buf = get32(p);
                if (get32(p + 4))
                        goto reserved;
                break;
        case PROTO_REC_NOTIFY:
                rec->notify.tag = get64(p);
                rec->notify.flags = get32(p + 8);
                if (get32(p + 12) || (rec->notify.flags & ~(uint32_t)PROTO_NOTIFY_HOLD))
                        goto reserved;
                break;
        case PROTO_REC_LAUNCH:
        case PROTO_REC_LAUNCH_ID: {
                size_t nt = (size_t)rec->launch.nin + rec->launch.nout;
                if (rec->type == PROTO_REC_LAUNCH_ID) {
                        rec->launch.op[0] = 0;
                        rec->launch.op_id = get16(p);
                        if (!all_zero(p + 5, 3))
                                goto reserved;
                        p += 8;
                } else {
                        rec->launch.op_id = 0;
                        if (decode_name(p, rec->launch.op) < 0) {
                                snprintf(err, errlen, "record %llu: operator name is malformed",
                                         (unsigned long long)rec->seq);
                                return -EBADMSG;
                        }
                        if (p[35] || get32(p + 36))
                                goto reserved;
                        p += 40;
                }
                if (get_tensors(p, nt, rec->launch.t) < 0)
                        goto reserved;
                p += TENSOR_SIZE * nt;
                for (size_t i = 0; i < rec->launch.nattr; i++, p += ATTR_SIZE) {
                        struct proto_rec_attr *a = &rec->launch.attr[i];
                        uint64_t bits = get64(p + 40);
                        if (decode_name(p, a->name) < 0) {
                                snprintf(err, errlen,
                                         "record %llu: attribute %zu name is malformed",
                                         (unsigned long long)rec->seq, i);
                                return -EBADMSG;
                        }
                        a->type = p[32];
                        if (!all_zero(p + 33, 7))
                                goto reserved;
                        /* the member the type does not use reads as 0, as it always has */
                        a->i = 0;
                        a->f = 0;
                        if (a->type == 2)
                                memcpy(&a->f, &bits, 8);
                        else
                                a->i = (int64_t)bits;
                }
                break;
        }
        case PROTO_REC_GRAPH_RUN: {
                size_t nt = (size_t)rec->graph.nin + rec->graph.nout;
                rec->graph.graph = get32(p);
                if (get32(p + 8) || get32(p + 12))
                        goto reserved;
                if (get_tensors(p + 16, nt, rec->graph.t) < 0)
                        goto reserved;
                break;
        }
        case PROTO_REC_GRAPH_RUN_OPT: {
                size_t nt = (size_t)rec->graph.nin + rec->graph.nout;
                rec->graph.graph = get32(p);
                rec->graph.flags = get32(p + 8);
                rec->graph.deadline_us = get64(p + 16);
                if (get32(p + 12) || get64(p + 56))
                        goto reserved;
                /* the tag: printable ASCII, NUL padded (it ends up in logs and messages) */
                int end = 0;
                for (int i = 0; i < PROTO_REC_TAG_LEN; i++) {
                        uint8_t c = p[24 + i];
                        if (!c)
                                end = 1;
                        else if (end || c < 0x20 || c > 0x7e) {
                                snprintf(err, errlen, "record %llu: the run's tag is not printable "
                                         "ASCII padded with NULs", (unsigned long long)rec->seq);
                                return -EBADMSG;
                        }
                }
                memcpy(rec->graph.tag, p + 24, PROTO_REC_TAG_LEN);
                rec->graph.tag[PROTO_REC_TAG_LEN] = 0;
                if (get_tensors(p + 64, nt, rec->graph.t) < 0)
                        goto reserved;
                break;
        }
        }
        *pos += size;
        return 1;
reserved:
        snprintf(err, errlen, "record %llu: reserved bytes are not zero",
                 (unsigned long long)rec->seq);
        return -EBADMSG;
}

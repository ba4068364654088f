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

static void put_tensor(uint8_t *p, const struct proto_rec_tensor *t)
{
        put32(p, t->buf);
        p[4] = t->dtype;
        p[5] = t->ndim;
        put64(p + 8, t->offset);
        for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                put64(p + 16 + 8 * d, (uint64_t)t->dims[d]);
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
        case PROTO_REC_LAUNCH:
                if ((unsigned)rec->launch.nin + rec->launch.nout > PROTO_REC_MAX_TENSORS ||
                    rec->launch.nattr > PROTO_REC_MAX_ATTRS)
                        return 0;
                return 40 + TENSOR_SIZE * ((size_t)rec->launch.nin + rec->launch.nout) +
                       ATTR_SIZE * (size_t)rec->launch.nattr;
        case PROTO_REC_GRAPH_RUN:
                if ((unsigned)rec->graph.nin + rec->graph.nout > PROTO_REC_MAX_GRAPH_TENSORS)
                        return 0;
                return 16 + TENSOR_SIZE * ((size_t)rec->graph.nin + rec->graph.nout);
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
        case PROTO_REC_LAUNCH: {
                size_t nt = (size_t)rec->launch.nin + rec->launch.nout;
                memcpy(p, rec->launch.op, strnlen(rec->launch.op, PROTO_REC_OP_NAME - 1));
                p[32] = rec->launch.nin;
                p[33] = rec->launch.nout;
                p[34] = rec->launch.nattr;
                p += 40;
                for (size_t i = 0; i < nt; i++, p += TENSOR_SIZE) {
                        const struct proto_rec_tensor *t = &rec->launch.t[i];
                        put32(p, t->buf);
                        p[4] = t->dtype;
                        p[5] = t->ndim;
                        put64(p + 8, t->offset);
                        for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                                put64(p + 16 + 8 * d, (uint64_t)t->dims[d]);
                }
                for (size_t i = 0; i < rec->launch.nattr; i++, p += ATTR_SIZE) {
                        const struct proto_rec_attr *a = &rec->launch.attr[i];
                        uint64_t bits;
                        memcpy(p, a->name, strnlen(a->name, PROTO_REC_OP_NAME - 1));
                        p[32] = a->type;
                        if (a->type == 2)
                                memcpy(&bits, &a->f, 8);
                        else
                                bits = (uint64_t)a->i;
                        put64(p + 40, bits);
                }
                break;
        }
        case PROTO_REC_GRAPH_RUN: {
                size_t nt = (size_t)rec->graph.nin + rec->graph.nout;
                put32(p, rec->graph.graph);
                put16(p + 4, rec->graph.nin);
                put16(p + 6, rec->graph.nout);
                p += 16;
                for (size_t i = 0; i < nt; i++, p += TENSOR_SIZE)
                        put_tensor(p, &rec->graph.t[i]);
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

int proto_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct proto_rec *ret,
                     char *err, size_t errlen)
{
        const uint8_t *h, *p;
        size_t left, size;
        struct proto_rec rec;

        if (*pos >= len)
                return 0;
        left = len - *pos;
        h = buf + *pos;
        if (left < PROTO_REC_HEADER_SIZE) {
                snprintf(err, errlen, "truncated record header at byte %zu", *pos);
                return -EBADMSG;
        }
        /* A graph run's 64 tensors make the record large; clearing and copying all of it
         * would double the decoding time of every small record, so the union is cleared as
         * far as the other types use it and graph runs clear what they use. */
        memset(&rec, 0, offsetof(struct proto_rec, launch) + sizeof(rec.launch));
        rec.type = get16(h);
        size = get32(h + 4);
        rec.seq = get64(h + 8);
        rec.stream = get32(h + 16);
        if (get16(h + 2) || get32(h + 20)) {
                snprintf(err, errlen, "record %llu: reserved header bytes are not zero",
                         (unsigned long long)rec.seq);
                return -EBADMSG;
        }
        if (size < PROTO_REC_HEADER_SIZE || size > left) {
                snprintf(err, errlen, "record %llu: length %zu outside the frame",
                         (unsigned long long)rec.seq, size);
                return -EBADMSG;
        }
        p = h + PROTO_REC_HEADER_SIZE;
        if (rec.type == PROTO_REC_LAUNCH) {
                if (size < PROTO_REC_HEADER_SIZE + 40) {
                        snprintf(err, errlen, "record %llu: launch record too short",
                                 (unsigned long long)rec.seq);
                        return -EBADMSG;
                }
                rec.launch.nin = p[32];
                rec.launch.nout = p[33];
                rec.launch.nattr = p[34];
        }
        if (rec.type == PROTO_REC_GRAPH_RUN) {
                if (size < PROTO_REC_HEADER_SIZE + 16) {
                        snprintf(err, errlen, "record %llu: graph run record too short",
                                 (unsigned long long)rec.seq);
                        return -EBADMSG;
                }
                rec.graph.nin = get16(p + 4);
                rec.graph.nout = get16(p + 6);
        }
        size_t want = proto_rec_size(&rec);
        if (!want || want != size) {
                snprintf(err, errlen, "record %llu: type %u with length %zu is not valid",
                         (unsigned long long)rec.seq, rec.type, size);
                return -EBADMSG;
        }
        switch (rec.type) {
        case PROTO_REC_COPY:
                rec.copy.dst_kind = p[0];
                rec.copy.src_kind = p[1];
                rec.copy.dst = get32(p + 8);
                rec.copy.src = get32(p + 12);
                rec.copy.dst_off = get64(p + 16);
                rec.copy.src_off = get64(p + 24);
                rec.copy.len = get64(p + 32);
                if (!all_zero(p + 2, 6))
                        goto reserved;
                break;
        case PROTO_REC_MEMSET:
                rec.memset.buf = get32(p);
                rec.memset.value = p[4];
                rec.memset.off = get64(p + 8);
                rec.memset.len = get64(p + 16);
                if (!all_zero(p + 5, 3))
                        goto reserved;
                break;
        case PROTO_REC_EVENT_RECORD:
        case PROTO_REC_STREAM_WAIT:
                rec.event.event = get32(p);
                if (get32(p + 4))
                        goto reserved;
                break;
        case PROTO_REC_FREE:
                rec.free.buf = get32(p);
                if (get32(p + 4))
                        goto reserved;
                break;
        case PROTO_REC_LAUNCH: {
                size_t nt = (size_t)rec.launch.nin + rec.launch.nout;
                if (decode_name(p, rec.launch.op) < 0) {
                        snprintf(err, errlen, "record %llu: operator name is malformed",
                                 (unsigned long long)rec.seq);
                        return -EBADMSG;
                }
                if (p[35] || get32(p + 36))
                        goto reserved;
                p += 40;
                for (size_t i = 0; i < nt; i++, p += TENSOR_SIZE) {
                        struct proto_rec_tensor *t = &rec.launch.t[i];
                        t->buf = get32(p);
                        t->dtype = p[4];
                        t->ndim = p[5];
                        t->offset = get64(p + 8);
                        if (get16(p + 6))
                                goto reserved;
                        for (int d = 0; d < PROTO_REC_MAX_DIMS; d++)
                                t->dims[d] = (int64_t)get64(p + 16 + 8 * d);
                }
                for (size_t i = 0; i < rec.launch.nattr; i++, p += ATTR_SIZE) {
                        struct proto_rec_attr *a = &rec.launch.attr[i];
                        uint64_t bits = get64(p + 40);
                        if (decode_name(p, a->name) < 0) {
                                snprintf(err, errlen,
                                         "record %llu: attribute %zu name is malformed",
                                         (unsigned long long)rec.seq, i);
                                return -EBADMSG;
                        }
                        a->type = p[32];
                        if (!all_zero(p + 33, 7))
                                goto reserved;
                        if (a->type == 2)
                                memcpy(&a->f, &bits, 8);
                        else
                                a->i = (int64_t)bits;
                }
                break;
        }
        case PROTO_REC_GRAPH_RUN: {
                size_t nt = (size_t)rec.graph.nin + rec.graph.nout;
                rec.graph.graph = get32(p);
                if (get32(p + 8) || get32(p + 12))
                        goto reserved;
                p += 16;
                for (size_t i = 0; i < nt; i++, p += TENSOR_SIZE)
                        if (get_tensor(p, &rec.graph.t[i]) < 0)
                                goto reserved;
                break;
        }
        }
        *pos += size;
        if (rec.type == PROTO_REC_GRAPH_RUN)
                memcpy(ret, &rec, offsetof(struct proto_rec, graph.t) +
                                  sizeof(rec.graph.t[0]) * ((size_t)rec.graph.nin + rec.graph.nout));
        else
                memcpy(ret, &rec, offsetof(struct proto_rec, launch) + sizeof(rec.launch));
        return 1;
reserved:
        snprintf(err, errlen, "record %llu: reserved bytes are not zero",
                 (unsigned long long)rec.seq);
        return -EBADMSG;
}

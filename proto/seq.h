/* The byte layout of a sequence value (PROTO_DTYPE_SEQUENCE): how graphs hold ONNX sequences
 * of tensors, and how a client binds a sequence graph input or output (a 1-D tensor of dtype
 * sequence whose extent is the block's size in bytes). Native byte order, like tensor data.
 *
 *   header   u32 magic "NSQ1", u32 count, i32 element dtype (0: not known, empty only), u32 0
 *   entries  count x { i32 dtype, i32 ndim, i64 dims[8], u64 offset, u64 bytes }
 *   data     each tensor's bytes at its offset from the block's start
 *
 * Canonical blocks (what npud writes, proto_seq_layout) place the data in entry order, each
 * at the next multiple of PROTO_SEQ_ALIGN, zero padding, and end at a multiple of it, so two
 * sequences with the same tensors have the same bytes. Readers accept any block whose
 * entries lie inside it (proto_seq_check): the bytes may come from an untrusted client.
 * Header-only so that the daemon's layers, libnpu tools and the fuzzers share it without a
 * new object. */
#ifndef NPU_PROTO_SEQ_H
#define NPU_PROTO_SEQ_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

#define PROTO_SEQ_MAGIC 0x3151534eu /* "NSQ1" */
#define PROTO_SEQ_ALIGN 16
#define PROTO_SEQ_MAX_DIMS 8
/* Most tensors one sequence holds (npud refuses to build longer ones). */
#define PROTO_SEQ_MAX_COUNT (1u << 20)

struct proto_seq_header {
        uint32_t magic;
        uint32_t count;
        int32_t elem_dtype;
        uint32_t reserved;
};

struct proto_seq_entry {
        int32_t dtype;
        int32_t ndim;
        int64_t dims[PROTO_SEQ_MAX_DIMS];
        uint64_t offset;
        uint64_t bytes;
};

/* Bytes of a tensor of dtype and shape, UINT64_MAX when it is not a tensor of a dtype a
 * sequence may hold (sequences of sequences are not supported, nor of strings: a string
 * element is a pointer inside npud, never bytes a client may write). */
static inline uint64_t proto_seq_tensor_bytes(int dtype, int ndim, const int64_t *dims)
{
        uint64_t n = proto_dtype_size(dtype);

        if (!n || dtype == PROTO_DTYPE_SEQUENCE || dtype == PROTO_DTYPE_OPTIONAL_NONE ||
            dtype == PROTO_DTYPE_STRING || ndim < 0 || ndim > PROTO_SEQ_MAX_DIMS)
                return UINT64_MAX;
        for (int d = 0; d < ndim; d++)
                if (dims[d] < 0 || __builtin_mul_overflow(n, (uint64_t)dims[d], &n))
                        return UINT64_MAX;
        return n;
}

static inline uint64_t proto_seq_align(uint64_t n)
{
        return n > UINT64_MAX - PROTO_SEQ_ALIGN ? UINT64_MAX
                                                 : (n + PROTO_SEQ_ALIGN - 1) & ~(uint64_t)(PROTO_SEQ_ALIGN - 1);
}

/* Canonical offsets of count entries whose dtype, ndim, dims and bytes are set; returns the
 * block's size, UINT64_MAX when it overflows. */
static inline uint64_t proto_seq_layout(struct proto_seq_entry *e, uint32_t count)
{
        uint64_t off = sizeof(struct proto_seq_header), per = sizeof(struct proto_seq_entry);

        if (count > (UINT64_MAX - off) / per)
                return UINT64_MAX;
        off = proto_seq_align(off + per * count);
        for (uint32_t i = 0; i < count; i++) {
                if (off == UINT64_MAX || e[i].bytes > UINT64_MAX - off)
                        return UINT64_MAX;
                e[i].offset = off;
                off = proto_seq_align(off + e[i].bytes);
        }
        return off;
}

/* Write the header and entries of a canonical block of size bytes and zero the padding;
 * the caller copies each tensor's data to block + e[i].offset. */
static inline void proto_seq_write(void *block, uint64_t size, uint32_t count, int32_t elem_dtype,
                                   const struct proto_seq_entry *e)
{
        struct proto_seq_header h = { PROTO_SEQ_MAGIC, count, elem_dtype, 0 };
        uint8_t *p = block;

        memset(p, 0, (size_t)size);
        memcpy(p, &h, sizeof(h));
        if (count)
                memcpy(p + sizeof(h), e, sizeof(*e) * count);
}

/* Entry i of a block proto_seq_check accepted. */
static inline void proto_seq_get(const void *block, uint32_t i, struct proto_seq_entry *ret)
{
        memcpy(ret, (const uint8_t *)block + sizeof(struct proto_seq_header) + sizeof(*ret) * i,
               sizeof(*ret));
}

/* Is block (size bytes) a sequence? 0 with its header in *ret, or -1 with the reason in why. */
static inline int proto_seq_check(const void *block, uint64_t size, struct proto_seq_header *ret,
                                  const char **why)
{
        struct proto_seq_header h;
        struct proto_seq_entry e;
        uint64_t end;

        if (!block || size < sizeof(h)) {
                *why = "shorter than a sequence header";
                return -1;
        }
        memcpy(&h, block, sizeof(h));
        if (h.magic != PROTO_SEQ_MAGIC) {
                *why = "no sequence header";
                return -1;
        }
        if (h.count > (size - sizeof(h)) / sizeof(e)) {
                *why = "more entries than the block holds";
                return -1;
        }
        end = sizeof(h) + sizeof(e) * (uint64_t)h.count;
        if (h.elem_dtype && proto_seq_tensor_bytes(h.elem_dtype, 0, NULL) == UINT64_MAX) {
                *why = "an element type a sequence cannot hold";
                return -1;
        }
        for (uint32_t i = 0; i < h.count; i++) {
                proto_seq_get(block, i, &e);
                if (e.bytes == UINT64_MAX || proto_seq_tensor_bytes(e.dtype, e.ndim, e.dims) != e.bytes) {
                        *why = "an entry whose type, shape and size disagree";
                        return -1;
                }
                if (e.dtype != h.elem_dtype) {
                        *why = "tensors of different element types";
                        return -1;
                }
                if (e.offset < end || e.offset % PROTO_SEQ_ALIGN || e.offset > size ||
                    e.bytes > size - e.offset) {
                        *why = "an entry outside the block";
                        return -1;
                }
        }
        *ret = h;
        return 0;
}

#endif

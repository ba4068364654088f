/* Sequence and optional values (sequence.c): the operators that make and read them, and the
 * helpers SequenceMap (control.c) builds its outputs with. A sequence is one value of dtype
 * PROTO_DTYPE_SEQUENCE whose bytes are a block in the proto/seq.h layout; an empty optional
 * is a value of dtype PROTO_DTYPE_OPTIONAL_NONE (0 bytes); an optional holding something is
 * that tensor or sequence itself. */
#ifndef NPUD_OPS_SEQUENCE_H
#define NPUD_OPS_SEQUENCE_H

#include "proto/seq.h"
#include "ops-internal.h"

/* A sequence input read: its header and block (validated). */
struct seq_view {
        uint32_t count;
        int elem_dtype;
        const uint8_t *base;
};

/* Open input value t of op as a sequence: -EINVAL with a message naming op and what when it
 * is not one, its data is not readable or its bytes are not a valid block. */
int seq_open(const struct ops_tensor *t, const char *op, const char *what, struct seq_view *ret,
             char *err, size_t errlen);
/* Tensor i (< count) of an opened sequence; its data points into the block. */
void seq_at(const struct seq_view *v, uint32_t i, struct ops_tensor *ret);

/* Write a canonical block holding the n tensors t (elem_dtype for an empty sequence) into
 * an ops_buf: *ret becomes the sequence value. -EINVAL (tensors that are not of one
 * element type a sequence holds) or -ENOMEM with a message. */
int seq_make(const struct ops_tensor *t, uint32_t n, int elem_dtype, const char *op,
             struct ops_tensor *ret, char *err, size_t errlen);

extern const struct ops_def ops_sequence_construct_def;
extern const struct ops_def ops_sequence_empty_def;
extern const struct ops_def ops_sequence_insert_def;
extern const struct ops_def ops_sequence_at_def;
extern const struct ops_def ops_sequence_erase_def;
extern const struct ops_def ops_sequence_length_def;
extern const struct ops_def ops_split_to_sequence_def;
extern const struct ops_def ops_concat_from_sequence_def;
extern const struct ops_def ops_optional_def;
extern const struct ops_def ops_optional_has_element_def;
extern const struct ops_def ops_optional_get_element_def;
extern const struct ops_def ops_sequence_map_def;

#endif

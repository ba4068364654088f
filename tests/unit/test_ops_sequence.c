/* Unit tests of the sequence and optional values (ops/sequence.c, proto/seq.h, SequenceMap
 * and opset-8 Scan in ops/control.c, the executor's refusal of sequences to tensor
 * operators): operators called the way the executor calls them (infer reading the inputs'
 * data, then run into outputs of the size infer gave), canonical blocks, and the untrusted
 * inputs that must fail with a message: bad positions, type mismatches, empty optionals,
 * corrupt sequence blocks. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "ops/ops.h"
#include "ops/runctx.h"
#include "ops/sequence.h"
#include "proto/errors.h"
#include "proto/seq.h"

#define F32 PROTO_DTYPE_FLOAT32
#define I64 PROTO_DTYPE_INT64
#define SEQ PROTO_DTYPE_SEQUENCE

static struct ops_tensor f32(int ndim, const int64_t *dims, const float *v)
{
        struct ops_tensor t = { .dtype = F32, .ndim = ndim };
        int64_t n = 1;

        for (int d = 0; d < ndim; d++) {
                t.dims[d] = dims[d];
                n *= dims[d];
        }
        t.data = ops_buf_alloc((uint64_t)(n ? n : 1) * sizeof(float), NULL, 0);
        if (v && n)
                memcpy(t.data, v, (size_t)n * sizeof(float));
        return t;
}

static struct ops_tensor i64(int64_t v)
{
        struct ops_tensor t = { .dtype = I64, .ndim = 0 };

        t.data = ops_buf_alloc(8, NULL, 0);
        *(int64_t *)t.data = v;
        return t;
}

static const struct ops_def *def_of(const char *name)
{
        const struct ops_def *d = ops_lookup_onnx(NULL, name, 18);

        ck_assert_msg(d != NULL, "%s not registered", name);
        return d;
}

/* infer, allocate the output infer sized, run: what the executor does. 0 or the failing
 * hook's result; *ret gets output 0 (caller frees its data). */
static int exec1(const char *op, int nin, const struct ops_tensor *in, struct ops_tensor *ret,
                 char *err, size_t errlen)
{
        const struct ops_def *def = def_of(op);
        struct ops_call c;
        int64_t bytes;
        int rc;

        memset(&c, 0, sizeof(c));
        c.opset = 18;
        c.nin = nin;
        c.nout = 1;
        for (int i = 0; i < nin; i++)
                c.in[i] = in[i];
        err[0] = 0;
        rc = ops_infer(def, &c, err, errlen);
        if (rc)
                return rc;
        bytes = ops_tensor_numel(&c.out[0]) * (int64_t)proto_dtype_size(c.out[0].dtype);
        ck_assert_int_ge(bytes, 0);
        c.out[0].data = ops_buf_alloc0((uint64_t)(bytes ? bytes : 1), NULL, 0);
        rc = ops_run(def, &c, err, errlen);
        if (rc) {
                ops_buf_free(c.out[0].data);
                return rc;
        }
        *ret = c.out[0];
        return 0;
}

static struct ops_tensor make_seq(uint32_t n, const struct ops_tensor *t)
{
        struct ops_tensor s;
        char err[256];

        ck_assert_int_eq(seq_make(t, n, F32, "test", &s, err, sizeof(err)), 0);
        return s;
}

static uint32_t seq_len(const struct ops_tensor *s)
{
        struct seq_view v;
        char err[256];

        ck_assert_int_eq(seq_open(s, "test", "seq", &v, err, sizeof(err)), 0);
        return v.count;
}

static struct ops_tensor seq_item(const struct ops_tensor *s, uint32_t i)
{
        struct seq_view v;
        struct ops_tensor t;
        char err[256];

        ck_assert_int_eq(seq_open(s, "test", "seq", &v, err, sizeof(err)), 0);
        ck_assert_uint_lt(i, v.count);
        seq_at(&v, i, &t);
        return t;
}

START_TEST(test_construct_at_insert_erase)
{
        struct ops_tensor a = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 2 });
        struct ops_tensor b = f32(2, (int64_t[]){ 1, 3 }, (float[]){ 3, 4, 5 });
        struct ops_tensor in[3], s, s2, s3, t, len, pos;
        char err[256];

        in[0] = a;
        in[1] = b;
        ck_assert_int_eq(exec1("SequenceConstruct", 2, in, &s, err, sizeof(err)), 0);
        ck_assert_int_eq(s.dtype, SEQ);
        ck_assert_uint_eq(seq_len(&s), 2);
        /* the block is canonical: the same as the helper writes */
        {
                struct ops_tensor ref = make_seq(2, in);
                ck_assert_int_eq(ref.dims[0], s.dims[0]);
                ck_assert(memcmp(ref.data, s.data, (size_t)s.dims[0]) == 0);
                ops_buf_free(ref.data);
        }
        ck_assert_int_eq(exec1("SequenceLength", 1, &s, &len, err, sizeof(err)), 0);
        ck_assert_int_eq(*(int64_t *)len.data, 2);
        ops_buf_free(len.data);

        pos = i64(-1);
        in[0] = s;
        in[1] = pos;
        ck_assert_int_eq(exec1("SequenceAt", 2, in, &t, err, sizeof(err)), 0);
        ck_assert_int_eq(t.ndim, 2);
        ck_assert_float_eq(((float *)t.data)[2], 5);
        ops_buf_free(t.data);

        /* insert a at the front: [a, a, b] */
        *(int64_t *)pos.data = 0;
        in[0] = s;
        in[1] = a;
        in[2] = pos;
        ck_assert_int_eq(exec1("SequenceInsert", 3, in, &s2, err, sizeof(err)), 0);
        ck_assert_uint_eq(seq_len(&s2), 3);
        ck_assert_int_eq(seq_item(&s2, 2).ndim, 2);
        /* erase the last (default position): [a, a] */
        ck_assert_int_eq(exec1("SequenceErase", 1, &s2, &s3, err, sizeof(err)), 0);
        ck_assert_uint_eq(seq_len(&s3), 2);
        ck_assert_float_eq(((float *)seq_item(&s3, 1).data)[1], 2);

        /* positions outside the sequence */
        *(int64_t *)pos.data = 3;
        in[0] = s;
        in[1] = pos;
        ck_assert_int_eq(exec1("SequenceAt", 2, in, &t, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "outside") != NULL, "%s", err);
        *(int64_t *)pos.data = -3;
        in[0] = s;
        in[1] = a;
        in[2] = pos;
        ck_assert_int_eq(exec1("SequenceInsert", 3, in, &t, err, sizeof(err)), -EINVAL);
        /* a tensor of another type than the sequence holds */
        *(int64_t *)pos.data = 0;
        in[1] = pos; /* int64 into a float sequence */
        ck_assert_int_eq(exec1("SequenceInsert", 2, in, &t, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "int64") != NULL, "%s", err);
        /* a tensor where a sequence belongs */
        in[0] = a;
        in[1] = pos;
        ck_assert_int_eq(exec1("SequenceAt", 2, in, &t, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "expected a sequence") != NULL, "%s", err);

        ops_buf_free(s.data);
        ops_buf_free(s2.data);
        ops_buf_free(s3.data);
        ops_buf_free(a.data);
        ops_buf_free(b.data);
        ops_buf_free(pos.data);
}
END_TEST

START_TEST(test_split_concat)
{
        /* x [2,3]: split along axis 1 into pieces of 2 (the last one 1), concat back */
        struct ops_tensor x = f32(2, (int64_t[]){ 2, 3 }, (float[]){ 0, 1, 2, 3, 4, 5 });
        struct ops_tensor s, y, p, chunk = i64(2);
        const struct ops_def *def = def_of("SplitToSequence");
        struct ops_call c;
        char err[256];

        memset(&c, 0, sizeof(c));
        c.nin = 2;
        c.nout = 1;
        c.in[0] = x;
        c.in[1] = chunk;
        c.nattr = 1;
        strcpy(c.attr[0].name, "axis");
        c.attr[0].type = OPS_ATTR_INT;
        c.attr[0].i = 1;
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), 0);
        c.out[0].data = ops_buf_alloc((uint64_t)c.out[0].dims[0], NULL, 0);
        ck_assert_int_eq(ops_run(def, &c, err, sizeof(err)), 0);
        s = c.out[0];
        ck_assert_uint_eq(seq_len(&s), 2);
        p = seq_item(&s, 0);
        ck_assert_int_eq(p.dims[1], 2);
        ck_assert_float_eq(((float *)p.data)[2], 3); /* row 1, column 0 */
        p = seq_item(&s, 1);
        ck_assert_int_eq(p.dims[1], 1);
        ck_assert_float_eq(((float *)p.data)[1], 5);

        def = def_of("ConcatFromSequence");
        memset(&c, 0, sizeof(c));
        c.nin = 1;
        c.nout = 1;
        c.in[0] = s;
        c.nattr = 1;
        strcpy(c.attr[0].name, "axis");
        c.attr[0].type = OPS_ATTR_INT;
        c.attr[0].i = -1;
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), 0);
        ck_assert_int_eq(c.out[0].dims[0], 2);
        ck_assert_int_eq(c.out[0].dims[1], 3);
        c.out[0].data = ops_buf_alloc(6 * sizeof(float), NULL, 0);
        ck_assert_int_eq(ops_run(def, &c, err, sizeof(err)), 0);
        y = c.out[0];
        ck_assert(memcmp(y.data, x.data, 6 * sizeof(float)) == 0);
        ops_buf_free(y.data);

        /* tensors of different shapes cannot be stacked on a new axis */
        c.nattr = 2;
        strcpy(c.attr[1].name, "new_axis");
        c.attr[1].type = OPS_ATTR_INT;
        c.attr[1].i = 1;
        c.out[0].data = NULL;
        ck_assert_int_eq(ops_infer(def, &c, err, sizeof(err)), -EINVAL);

        ops_buf_free(s.data);
        ops_buf_free(x.data);
        ops_buf_free(chunk.data);
}
END_TEST

START_TEST(test_optional)
{
        struct ops_tensor a = f32(1, (int64_t[]){ 2 }, (float[]){ 7, 8 });
        struct ops_tensor none = { 0 }, o, h, g;
        char err[256];

        /* Optional() with no input is empty; OptionalHasElement says so */
        ck_assert_int_eq(exec1("Optional", 0, &none, &o, err, sizeof(err)), 0);
        ck_assert_int_eq(o.dtype, PROTO_DTYPE_OPTIONAL_NONE);
        ck_assert_int_eq(exec1("OptionalHasElement", 1, &o, &h, err, sizeof(err)), 0);
        ck_assert_int_eq(*(uint8_t *)h.data, 0);
        ops_buf_free(h.data);
        ck_assert_int_eq(exec1("OptionalGetElement", 1, &o, &g, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "empty") != NULL, "%s", err);
        ops_buf_free(o.data);

        ck_assert_int_eq(exec1("Optional", 1, &a, &o, err, sizeof(err)), 0);
        ck_assert_int_eq(exec1("OptionalHasElement", 1, &o, &h, err, sizeof(err)), 0);
        ck_assert_int_eq(*(uint8_t *)h.data, 1);
        ck_assert_int_eq(exec1("OptionalGetElement", 1, &o, &g, err, sizeof(err)), 0);
        ck_assert_int_eq(g.dtype, F32);
        ck_assert_float_eq(((float *)g.data)[1], 8);
        ops_buf_free(h.data);
        ops_buf_free(g.data);
        ops_buf_free(o.data);
        ops_buf_free(a.data);
}
END_TEST

/* Blocks from a client are checked entry by entry before anything reads them. */
START_TEST(test_corrupt_blocks)
{
        struct ops_tensor a = f32(1, (int64_t[]){ 4 }, (float[]){ 1, 2, 3, 4 });
        struct ops_tensor s = make_seq(1, &a), bad, len;
        struct proto_seq_header h;
        struct proto_seq_entry e;
        char err[256];

        bad = s;
        bad.data = ops_buf_alloc((uint64_t)s.dims[0], NULL, 0);

        /* count larger than the block */
        memcpy(bad.data, s.data, (size_t)s.dims[0]);
        memcpy(&h, bad.data, sizeof(h));
        h.count = 1000000;
        memcpy(bad.data, &h, sizeof(h));
        ck_assert_int_eq(exec1("SequenceLength", 1, &bad, &len, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "not a valid sequence") != NULL, "%s", err);

        /* an entry whose data runs past the block */
        memcpy(bad.data, s.data, (size_t)s.dims[0]);
        proto_seq_get(bad.data, 0, &e);
        e.offset = (uint64_t)s.dims[0] - 8;
        memcpy((uint8_t *)bad.data + sizeof(h), &e, sizeof(e));
        ck_assert_int_eq(exec1("SequenceLength", 1, &bad, &len, err, sizeof(err)), -EINVAL);

        /* an entry whose shape does not match its size */
        memcpy(bad.data, s.data, (size_t)s.dims[0]);
        e.offset = 0;
        proto_seq_get(bad.data, 0, &e);
        e.dims[0] = INT64_MAX / 2;
        memcpy((uint8_t *)bad.data + sizeof(h), &e, sizeof(e));
        ck_assert_int_eq(exec1("SequenceLength", 1, &bad, &len, err, sizeof(err)), -EINVAL);

        /* no header at all */
        memset(bad.data, 0, (size_t)s.dims[0]);
        ck_assert_int_eq(exec1("SequenceLength", 1, &bad, &len, err, sizeof(err)), -EINVAL);
        bad.dims[0] = 3; /* shorter than a header */
        ck_assert_int_eq(exec1("SequenceLength", 1, &bad, &len, err, sizeof(err)), -EINVAL);

        ops_buf_free(bad.data);
        ops_buf_free(s.data);
        ops_buf_free(a.data);
}
END_TEST

/* A sequence reaching an operator that takes tensors is refused by the executor, naming
 * the value, rather than read as bytes. */
START_TEST(test_exec_refuses_sequence_to_tensor_op)
{
        struct graph *g = graph_new(NULL);
        struct ops_tensor a = f32(1, (int64_t[]){ 2 }, (float[]){ 1, 2 });
        struct ops_tensor s = make_seq(1, &a), out = f32(1, (int64_t[]){ 1 }, NULL);
        char err[256] = "";
        int vs, vy, n;

        ck_assert_ptr_nonnull(g);
        g->opset = 18;
        vs = graph_add_value(g, "s", GRAPH_VALUE_INPUT, SEQ, -1, NULL);
        vy = graph_add_value(g, "y", GRAPH_VALUE_NODE, 0, -1, NULL);
        n = graph_add_node(g, "relu", "Relu", "", ops_lookup_onnx(NULL, "Relu", 18));
        g->nodes[n].nin = 1;
        g->nodes[n].nout = 1;
        g->nodes[n].in = graph_alloc(g, sizeof(int));
        g->nodes[n].out = graph_alloc(g, sizeof(int));
        g->nodes[n].in[0] = vs;
        g->nodes[n].out[0] = vy;
        g->values[vy].producer = n;
        g->inputs = graph_alloc(g, sizeof(int));
        g->outputs = graph_alloc(g, sizeof(int));
        g->inputs[g->ninputs++] = vs;
        g->outputs[g->noutputs++] = vy;
        g->values[vy].output = 0;
        ck_assert_int_eq(graph_finalize(g, err, sizeof(err)), 0);
        ck_assert_int_eq(graph_exec(g, 1, &s, 1, &out, err, sizeof(err)), PROTO_E_SHAPE);
        ck_assert_msg(strstr(err, "input 's' is a sequence, not a tensor") != NULL, "%s", err);
        graph_free(g);
        ops_buf_free(s.data);
        ops_buf_free(a.data);
        ops_buf_free(out.data);
}
END_TEST

static Suite *sequence_suite(void)
{
        Suite *s = suite_create("ops-sequence");
        TCase *tc = tcase_create("sequence");

        tcase_add_test(tc, test_construct_at_insert_erase);
        tcase_add_test(tc, test_split_concat);
        tcase_add_test(tc, test_optional);
        tcase_add_test(tc, test_corrupt_blocks);
        tcase_add_test(tc, test_exec_refuses_sequence_to_tensor_op);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(sequence_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

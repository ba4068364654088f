/* Unit tests of the shape kernel family (ops/shape*.c): every operator on examples
 * from the ONNX node tests and against references computed here (every permutation of a
 * transpose, random slices with negative steps, pads in every mode, strided copies of
 * every element size), output shapes that depend on input data (Reshape, Slice, Split,
 * Expand, Tile, Pad, Range, NonZero, Compress, Unique, OneHot, ConstantOfShape, Resize),
 * definitions chosen by opset, and the messages of calls that must fail, including wire
 * launches whose output shape cannot be known without the data. */
#include <check.h>
#include "ops-test-util.h"


/* An int64 1-D tensor over v. */
static struct ops_tensor ints1(int64_t *v, int64_t n)
{
        return tensor(I64, v, 1, &n);
}

static struct ops_tensor iota(int dtype, int ndim, const int64_t *dims)
{
        struct ops_tensor t = tensor(dtype, NULL, ndim, dims);
        int64_t i, n = numel(&t);

        t.data = calloc((size_t)(n ? n : 1), 8);
        for (i = 0; i < n; i++)
                put(dtype, t.data, i, (double)(i % 100));
        return t;
}

/* Every element of out equals element src_index(i) of x (bit-exact via double). */
static void assert_gathered(const struct ops_tensor *out, const struct ops_tensor *x,
                            const int64_t *src)
{
        int64_t i, n = numel(out);

        for (i = 0; i < n; i++)
                ck_assert_msg(get(out->dtype, out->data, i) == get(x->dtype, x->data, src[i]),
                              "[%lld] from [%lld]: %g vs %g", (long long)i, (long long)src[i],
                              get(out->dtype, out->data, i), get(x->dtype, x->data, src[i]));
}

/* ---------------------------------------------------------------- Reshape and friends */

START_TEST(test_reshape)
{
        float x[24];
        struct ops_tensor in[2];
        struct ops_call c;
        int64_t s1[] = { 4, 2, 3 }, s2[] = { -1, 2, 0 }, s3[] = { 0, 0, 4 }, s4[] = { 6, -1 };
        int64_t s5[] = { -1, -1 }, s6[] = { 5, 5 }, s7[] = { 0, 4, 6 }, s8[] = { 3, 0, 4 };
        int64_t zero[] = { 2, 0, 4 }, s9[] = { -1, 8 };
        int i;

        for (i = 0; i < 24; i++)
                x[i] = (float)i;
        in[0] = tensor(F32, x, SHP(2, 3, 4));
        in[1] = ints1(s1, 3);
        c = call_in(2, in);
        run_ok("Reshape", 14, &c);
        assert_shape(&c.out[0], SHP(4, 2, 3));
        ck_assert(memcmp(c.out[0].data, x, sizeof(x)) == 0);
        free_outs(&c);
        /* -1 inferred, 0 copies the input's dim */
        in[1] = ints1(s2, 3);
        c = call_in(2, in);
        run_ok("Reshape", 14, &c);
        assert_shape(&c.out[0], SHP(3, 2, 4));
        free_outs(&c);
        in[1] = ints1(s3, 3);
        c = call_in(2, in);
        run_ok("Reshape", 14, &c);
        assert_shape(&c.out[0], SHP(2, 3, 4));
        free_outs(&c);
        in[1] = ints1(s4, 2);
        c = call_in(2, in);
        run_ok("Reshape", 5, &c);
        assert_shape(&c.out[0], SHP(6, 4));
        free_outs(&c);
        /* opset 1: the shape attribute */
        c = call_in(1, in);
        attr_ints(&c, "shape", 2, s4);
        run_ok("Reshape", 4, &c);
        assert_shape(&c.out[0], SHP(6, 4));
        free_outs(&c);
        /* allowzero: 0 is a real zero (test_reshape_allowzero_reordered) */
        in[0] = tensor(F32, x, SHP(0, 3, 4));
        in[1] = ints1(s8, 3);
        c = call_in(2, in);
        attr_int(&c, "allowzero", 1);
        run_ok("Reshape", 14, &c);
        assert_shape(&c.out[0], SHP(3, 0, 4));
        free_outs(&c);
        c = call_in(2, in);
        expect_fail("Reshape", 14, &c, "cannot reshape [0,3,4] (0 elements) to 36 elements");
        /* errors */
        in[0] = tensor(F32, x, SHP(2, 3, 4));
        in[1] = ints1(s5, 2);
        c = call_in(2, in);
        expect_fail("Reshape", 14, &c, "more than one -1");
        in[1] = ints1(s6, 2);
        c = call_in(2, in);
        expect_fail("Reshape", 14, &c, "cannot reshape [2,3,4] (24 elements) to 25 elements");
        in[1] = ints1(s7, 3);
        c = call_in(2, in);
        expect_fail("Reshape", 14, &c, "to 48 elements");
        in[1] = ints1(zero, 3);
        c = call_in(2, in);
        attr_int(&c, "allowzero", 1);
        expect_fail("Reshape", 14, &c, "to 0 elements");
        in[0] = tensor(F32, x, SHP(24));
        in[1] = ints1(s9, 2);
        c = call_in(2, in);
        run_ok("Reshape", 14, &c);
        assert_shape(&c.out[0], SHP(3, 8));
        free_outs(&c);
        in[0] = tensor(F32, x, SHP(3, 8));
        in[1] = ints1((int64_t[]){ 4, 6, 0 }, 3);
        c = call_in(2, in);
        expect_fail("Reshape", 14, &c, "dimension 2 is 0 (copy the input's) but the input has "
                                       "rank 2");
        /* a wire launch cannot know the shape input's values */
        in[0] = tensor(F32, NULL, SHP(2, 3, 4));
        in[1] = tensor(I64, NULL, SHP(3));
        c = call_in(2, in);
        c.out[0] = tensor(F32, NULL, SHP(4, 2, 3));
        expect_check_fail("Reshape", 14, &c,
                          "Reshape: the output shape depends on the values of input 1 (shape)");
}
END_TEST

START_TEST(test_flatten_squeeze_unsqueeze)
{
        float x[120] = { 0 };
        int64_t a0[] = { 0 }, am1[] = { -1 }, a31[] = { 3, 1 }, a20[] = { 2, 0, 5 }, a1[] = { 1 };
        struct ops_tensor in[2];
        struct ops_call c;
        int axis;
        static const int64_t flat[6][2] = { { 1, 120 }, { 2, 60 }, { 6, 20 },
                                            { 24, 5 },  { 120, 1 } };

        in[0] = tensor(F32, x, SHP(2, 3, 4, 5));
        for (axis = -4; axis <= 4; axis++) {
                c = call_in(1, in);
                attr_int(&c, "axis", axis);
                run_ok("Flatten", 13, &c);
                assert_shape(&c.out[0], 2, flat[axis < 0 ? axis + 4 : axis]);
                free_outs(&c);
        }
        c = call_in(1, in);
        run_ok("Flatten", 13, &c);
        assert_shape(&c.out[0], SHP(2, 60));
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "axis", 5);
        expect_fail("Flatten", 13, &c, "axis 5 out of range for rank 4");
        /* Squeeze: named axes (input from 13, attribute before), or every unit dim */
        in[0] = tensor(F32, x, SHP(1, 3, 1, 5));
        in[1] = ints1(am1, 1);
        c = call_in(2, in);
        expect_fail("Squeeze", 13, &c, "axis 3 has extent 5, not 1");
        in[1] = ints1(a0, 1);
        c = call_in(2, in);
        run_ok("Squeeze", 13, &c);
        assert_shape(&c.out[0], SHP(3, 1, 5));
        free_outs(&c);
        c = call_in(1, in);
        run_ok("Squeeze", 13, &c);
        assert_shape(&c.out[0], SHP(3, 5));
        free_outs(&c);
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, (int64_t[]){ -2 });
        run_ok("Squeeze", 11, &c);
        assert_shape(&c.out[0], SHP(1, 3, 5));
        free_outs(&c);
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, a0);
        expect_fail("Squeeze", 13, &c, "axes are an input from opset 13");
        /* Unsqueeze: axes against the output rank, in any order */
        in[0] = tensor(F32, x, SHP(3, 4, 5));
        in[1] = ints1(a20, 3);
        c = call_in(2, in);
        run_ok("Unsqueeze", 13, &c);
        assert_shape(&c.out[0], SHP(1, 3, 1, 4, 5, 1));
        free_outs(&c);
        in[1] = ints1(a31, 2);
        c = call_in(2, in);
        run_ok("Unsqueeze", 13, &c);
        assert_shape(&c.out[0], SHP(3, 1, 4, 1, 5));
        free_outs(&c);
        c = call_in(1, in);
        attr_ints(&c, "axes", 1, am1);
        run_ok("Unsqueeze", 11, &c);
        assert_shape(&c.out[0], SHP(3, 4, 5, 1));
        free_outs(&c);
        in[1] = ints1((int64_t[]){ 1, -4 }, 2);
        c = call_in(2, in);
        expect_fail("Unsqueeze", 13, &c, "axis -4 given twice");
        c = call_in(1, in);
        expect_fail("Unsqueeze", 13, &c, "expected 2 inputs, got 1");
        c = call_in(1, in);
        expect_fail("Unsqueeze", 11, &c, "axes are required");
        in[0] = tensor(F32, x, 0, NULL);
        in[1] = ints1(a1, 1);
        c = call_in(2, in);
        expect_fail("Unsqueeze", 13, &c, "axis 1 out of range for rank 1");
}
END_TEST

START_TEST(test_identity_dropout)
{
        double x[6] = { 1, -2, 3, -4, 5, -6 }, want[6], one[6] = { 1, 1, 1, 1, 1, 1 };
        float ratio = 0.5f;
        uint8_t train = 1;
        struct ops_tensor in[3];
        struct ops_call c;
        int i, kept = 0;

        in[0] = tensor(F64, x, SHP(2, 3));
        c = call_in(1, in);
        run_ok("Identity", 16, &c);
        assert_vals(&c.out[0], x, 6, 0);
        free_outs(&c);
        /* inference: identity, all-true bool mask */
        c = call_in(1, in);
        c.nout = 2;
        run_ok("Dropout", 13, &c);
        assert_vals(&c.out[0], x, 6, 0);
        ck_assert_int_eq(c.out[1].dtype, BOOL);
        assert_vals(&c.out[1], one, 6, 0);
        free_outs(&c);
        /* opset 7: the mask has the data's dtype */
        c = call_in(1, in);
        c.nout = 2;
        attr_float(&c, "ratio", 0.3);
        run_ok("Dropout", 7, &c);
        ck_assert_int_eq(c.out[1].dtype, F64);
        assert_vals(&c.out[1], one, 6, 0);
        free_outs(&c);
        /* training: kept elements scaled by 1 / (1 - ratio), the mask telling which */
        in[1] = tensor(F32, &ratio, 0, NULL);
        in[2] = tensor(BOOL, &train, 0, NULL);
        c = call_in(3, in);
        c.nout = 2;
        attr_int(&c, "seed", 7);
        run_ok("Dropout", 13, &c);
        for (i = 0; i < 6; i++) {
                int m = ((uint8_t *)c.out[1].data)[i];

                want[i] = m ? 2 * x[i] : 0;
                kept += m;
        }
        assert_vals(&c.out[0], want, 6, 0);
        ck_assert(kept > 0 && kept < 6);
        free_outs(&c);
        ratio = 1;
        c = call_in(3, in);
        expect_fail("Dropout", 13, &c, "ratio 1 out of [0, 1)");
        in[0] = tensor(I32, x, SHP(2));
        c = call_in(1, in);
        expect_fail("Dropout", 13, &c, "input 0 has unsupported dtype int32");
}
END_TEST

START_TEST(test_shape_size)
{
        int16_t x[1];
        struct ops_tensor in[1];
        struct ops_call c;
        static const struct {
                int has_s, has_e;
                int64_t s, e, n, first;
        } cases[] = { { 0, 0, 0, 0, 4, 2 },  { 1, 0, 1, 0, 3, 3 },   { 0, 1, 0, 1, 1, 2 },
                      { 1, 1, 1, -1, 2, 3 }, { 1, 0, -1, 0, 1, 5 },  { 1, 0, -10, 0, 4, 2 },
                      { 0, 1, 0, 10, 4, 2 }, { 1, 1, 3, 1, 0, 0 } };
        int i;

        in[0] = tensor(I16, x, SHP(2, 3, 0, 5));
        for (i = 0; i < NELEM(cases); i++) {
                c = call_in(1, in);
                if (cases[i].has_s)
                        attr_int(&c, "start", cases[i].s);
                if (cases[i].has_e)
                        attr_int(&c, "end", cases[i].e);
                run_ok("Shape", 15, &c);
                ck_assert_int_eq(c.out[0].dtype, I64);
                assert_shape(&c.out[0], 1, &cases[i].n);
                if (cases[i].n)
                        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], cases[i].first);
                free_outs(&c);
        }
        c = call_in(1, in);
        run_ok("Size", 13, &c);
        assert_shape(&c.out[0], 0, NULL);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], 0);
        free_outs(&c);
        /* Shape and Size need no data: wire launches check fine. */
        in[0] = tensor(F32, NULL, SHP(7, 2));
        c = call_in(1, in);
        c.out[0] = tensor(I64, NULL, SHP(2));
        ck_assert_int_eq(ops_check(ops_lookup("Shape"), &c, (char[128]){ 0 }, 128), 0);
        c.out[0] = tensor(I64, NULL, 0, NULL);
        ck_assert_int_eq(ops_check(ops_lookup("Size"), &c, (char[128]){ 0 }, 128), 0);
}
END_TEST

START_TEST(test_constants)
{
        int32_t v[6] = { 1, 2, 3, 4, 5, 6 };
        struct ops_tensor t = tensor(I32, v, SHP(2, 3)), one, in[1];
        float fl[3] = { 0.5f, 1.5f, -2 };
        int64_t shape[] = { 2, 2 }, empty[1], seven = 7;
        double w6[6] = { 1, 2, 3, 4, 5, 6 }, w3[3] = { 0.5, 1.5, -2 }, w4[4] = { 7, 7, 7, 7 };
        struct ops_call c;
        struct ops_attr *a;

        memset(&c, 0, sizeof(c));
        c.nout = 1;
        attr_tensor(&c, "value", &t);
        run_ok("Constant", 13, &c);
        ck_assert_int_eq(c.out[0].dtype, I32);
        assert_shape(&c.out[0], SHP(2, 3));
        assert_vals(&c.out[0], w6, 6, 0);
        free_outs(&c);
        memset(&c, 0, sizeof(c));
        c.nout = 1;
        a = attr_new(&c, "value_floats", OPS_ATTR_FLOATS);
        a->n = 3;
        a->floats = fl;
        run_ok("Constant", 13, &c);
        ck_assert_int_eq(c.out[0].dtype, F32);
        assert_vals(&c.out[0], w3, 3, 0);
        free_outs(&c);
        memset(&c, 0, sizeof(c));
        c.nout = 1;
        attr_int(&c, "value_int", 5);
        run_ok("Constant", 13, &c);
        ck_assert_int_eq(c.out[0].dtype, I64);
        assert_shape(&c.out[0], 0, NULL);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], 5);
        free_outs(&c);
        attr_float(&c, "value_float", 1);
        expect_fail("Constant", 13, &c, "exactly one value attribute needed");
        memset(&c, 0, sizeof(c));
        c.nout = 1;
        attr_str(&c, "value_string", "x");
        expect_fail("Constant", 13, &c, "'value_string' of this kind is not supported");
        /* ConstantOfShape: the value tensor's dtype, float32 zeros by default */
        one = tensor(I64, &seven, SHP(1));
        in[0] = ints1(shape, 2);
        c = call_in(1, in);
        attr_tensor(&c, "value", &one);
        run_ok("ConstantOfShape", 9, &c);
        ck_assert_int_eq(c.out[0].dtype, I64);
        assert_shape(&c.out[0], SHP(2, 2));
        assert_vals(&c.out[0], w4, 4, 0);
        free_outs(&c);
        in[0] = ints1(empty, 0);
        c = call_in(1, in);
        run_ok("ConstantOfShape", 9, &c);
        ck_assert_int_eq(c.out[0].dtype, F32);
        assert_shape(&c.out[0], 0, NULL);
        ck_assert_float_eq(((float *)c.out[0].data)[0], 0);
        free_outs(&c);
        shape[1] = -1;
        in[0] = ints1(shape, 2);
        c = call_in(1, in);
        expect_fail("ConstantOfShape", 9, &c, "invalid dimension -1");
}
END_TEST

START_TEST(test_range_eyelike)
{
        float fs = 1, fl = 10, fd = 2;
        int32_t is = 10, il = 4, id = -3;
        int16_t hs = 0, hl = 0, hd = 1;
        double wf[5] = { 1, 3, 5, 7, 9 }, wi[2] = { 10, 7 };
        double e1[12] = { 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 };
        double e2[12] = { 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0 };
        struct ops_tensor in[3];
        struct ops_call c;
        int64_t n0 = 0;

        in[0] = tensor(F32, &fs, 0, NULL);
        in[1] = tensor(F32, &fl, 0, NULL);
        in[2] = tensor(F32, &fd, 0, NULL);
        c = call_in(3, in);
        run_ok("Range", 11, &c);
        assert_shape(&c.out[0], SHP(5));
        assert_vals(&c.out[0], wf, 5, 0);
        free_outs(&c);
        in[0] = tensor(I32, &is, 0, NULL);
        in[1] = tensor(I32, &il, 0, NULL);
        in[2] = tensor(I32, &id, 0, NULL);
        c = call_in(3, in);
        run_ok("Range", 11, &c);
        assert_vals(&c.out[0], wi, 2, 0);
        free_outs(&c);
        in[0] = tensor(I16, &hs, 0, NULL);
        in[1] = tensor(I16, &hl, 0, NULL);
        in[2] = tensor(I16, &hd, 0, NULL);
        c = call_in(3, in);
        run_ok("Range", 11, &c);
        assert_shape(&c.out[0], 1, &n0);
        free_outs(&c);
        hd = 0;
        c = call_in(3, in);
        expect_fail("Range", 11, &c, "delta is 0");
        in[2] = tensor(I32, &id, 0, NULL);
        c = call_in(3, in);
        expect_fail("Range", 11, &c, "input 2 dtype differs");
        /* EyeLike: diagonal k, dtype attribute */
        in[0] = tensor(F32, NULL, SHP(3, 4));
        c = call_in(1, in);
        attr_int(&c, "k", 1);
        run_ok("EyeLike", 9, &c);
        assert_vals(&c.out[0], e1, 12, 0);
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "k", -1);
        attr_int(&c, "dtype", I64);
        run_ok("EyeLike", 9, &c);
        ck_assert_int_eq(c.out[0].dtype, I64);
        assert_vals(&c.out[0], e2, 12, 0);
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "k", 100);
        run_ok("EyeLike", 9, &c);
        free_outs(&c);
        c = call_in(1, in);
        attr_int(&c, "dtype", 99);
        expect_fail("EyeLike", 9, &c, "unsupported dtype 99");
}
END_TEST

/* ---------------------------------------------------------------- movement */

START_TEST(test_transpose)
{
        static const int dtypes[] = { F32, F16, I64, BOOL, U8 };
        int64_t perm[4], src[120], idx[4], xs[4] = { 60, 20, 5, 1 };
        struct ops_tensor x;
        struct ops_call c;
        int p, t, d, k, used;

        for (t = 0; t < NELEM(dtypes); t++) {
                x = iota(dtypes[t], SHP(2, 3, 4, 5));
                if (dtypes[t] == BOOL)
                        for (k = 0; k < 120; k++)
                                ((uint8_t *)x.data)[k] = (uint8_t)(k % 3 == 0);
                /* all 24 permutations */
                for (p = 0; p < 24; p++) {
                        int64_t od[4], i;

                        used = 0;
                        for (d = 0, k = p; d < 4; d++) {
                                int pick = k % (4 - d), j;

                                k /= 4 - d;
                                for (j = 0; j < 4; j++) {
                                        if (used & (1 << j))
                                                continue;
                                        if (pick-- == 0)
                                                break;
                                }
                                perm[d] = j;
                                used |= 1 << j;
                        }
                        for (d = 0; d < 4; d++)
                                od[d] = x.dims[perm[d]];
                        for (i = 0; i < 120; i++) {
                                int64_t r = i;

                                for (d = 3; d >= 0; d--) {
                                        idx[d] = r % od[d];
                                        r /= od[d];
                                }
                                src[i] = 0;
                                for (d = 0; d < 4; d++)
                                        src[i] += idx[d] * xs[perm[d]];
                        }
                        c = call_in(1, &x);
                        attr_ints(&c, "perm", 4, perm);
                        run_ok("Transpose", 13, &c);
                        assert_shape(&c.out[0], 4, od);
                        assert_gathered(&c.out[0], &x, src);
                        free_outs(&c);
                }
                c = call_in(1, &x);
                run_ok("Transpose", 13, &c);
                assert_shape(&c.out[0], SHP(5, 4, 3, 2));
                free_outs(&c);
                free(x.data);
        }
        x = iota(F32, SHP(2, 3));
        c = call_in(1, &x);
        attr_ints(&c, "perm", 2, (int64_t[]){ 0, 0 });
        expect_fail("Transpose", 13, &c, "'perm' is not a permutation of 0..1");
        c = call_in(1, &x);
        attr_ints(&c, "perm", 3, (int64_t[]){ 0, 1, 2 });
        expect_fail("Transpose", 13, &c, "'perm' has 3 entries for rank 2");
        free(x.data);
}
END_TEST

START_TEST(test_transpose_large)
{
        /* Big enough for blocked copies, odd sizes for the edges, every element size. */
        static const int dtypes[] = { U8, I16, F32, F64 };
        int64_t rows = 67, cols = 131, i, j, *src = malloc(3 * 67 * 131 * sizeof(int64_t));
        struct ops_tensor x;
        struct ops_call c;
        int t;

        for (t = 0; t < NELEM(dtypes); t++) {
                x = iota(dtypes[t], SHP(3, 67, 131));
                for (i = 0; i < 3 * rows * cols; i++)
                        put(dtypes[t], x.data, i, (double)(i % 97));
                c = call_in(1, &x);
                attr_ints(&c, "perm", 3, (int64_t[]){ 0, 2, 1 });
                run_ok("Transpose", 13, &c);
                for (i = 0; i < 3; i++)
                        for (j = 0; j < rows * cols; j++)
                                src[i * rows * cols + j] = i * rows * cols + (j % rows) * cols + j / rows;
                assert_gathered(&c.out[0], &x, src);
                free_outs(&c);
                c = call_in(1, &x);
                attr_ints(&c, "perm", 3, (int64_t[]){ 2, 1, 0 });
                run_ok("Transpose", 13, &c);
                for (i = 0; i < 3 * rows * cols; i++) {
                        int64_t a = i / (rows * 3), b = (i / 3) % rows, k = i % 3;

                        src[i] = k * rows * cols + b * cols + a;
                }
                assert_gathered(&c.out[0], &x, src);
                free_outs(&c);
                free(x.data);
        }
        free(src);
}
END_TEST

START_TEST(test_concat_split)
{
        struct ops_tensor in[3], x;
        struct ops_call c;
        double w0[14], w1[14];
        int64_t sp[] = { 1, 3 }, spbad[] = { 1, 2 }, i;
        int k;

        in[0] = iota(F32, SHP(2, 1));
        in[1] = iota(F32, SHP(2, 3));
        in[2] = iota(F32, SHP(2, 3));
        for (i = 0; i < 6; i++)
                put(F32, in[2].data, i, 10 + (double)i);
        c = call_in(3, in);
        attr_int(&c, "axis", -1);
        run_ok("Concat", 13, &c);
        assert_shape(&c.out[0], SHP(2, 7));
        {
                double w[14] = { 0, 0, 1, 2, 10, 11, 12, 1, 3, 4, 5, 13, 14, 15 };

                memcpy(w0, w, sizeof(w));
        }
        assert_vals(&c.out[0], w0, 14, 0);
        free_outs(&c);
        c = call_in(3, in);
        expect_fail("Concat", 13, &c, "attribute 'axis' is required");
        c = call_in(3, in);
        run_ok("Concat", 3, &c); /* before opset 4 the axis defaults to 1 */
        assert_shape(&c.out[0], SHP(2, 7));
        free_outs(&c);
        c = call_in(3, in);
        attr_int(&c, "axis", 0);
        expect_fail("Concat", 13, &c, "input 1 shape [2,3] does not fit input 0's [2,1] on axis 0");
        in[2].dtype = F64;
        c = call_in(3, in);
        attr_int(&c, "axis", 1);
        expect_fail("Concat", 13, &c, "input 2 dtype float64 differs from input 0's float32");
        for (k = 0; k < 3; k++)
                free(in[k].data);
        /* Split into equal parts, by sizes (input from 13, attribute before), num_outputs */
        x = iota(I32, SHP(2, 4));
        c = call_in(1, &x);
        c.nout = 2;
        attr_int(&c, "axis", 1);
        run_ok("Split", 13, &c);
        {
                double a[4] = { 0, 1, 4, 5 }, b[4] = { 2, 3, 6, 7 };

                assert_shape(&c.out[1], SHP(2, 2));
                assert_vals(&c.out[0], a, 4, 0);
                assert_vals(&c.out[1], b, 4, 0);
        }
        free_outs(&c);
        in[0] = x;
        in[1] = ints1(sp, 2);
        c = call_in(2, in);
        c.nout = 2;
        attr_int(&c, "axis", -1);
        run_ok("Split", 13, &c);
        {
                double a[2] = { 0, 4 }, b[6] = { 1, 2, 3, 5, 6, 7 };

                assert_vals(&c.out[0], a, 2, 0);
                assert_vals(&c.out[1], b, 6, 0);
        }
        free_outs(&c);
        c = call_in(1, &x);
        c.nout = 2;
        attr_int(&c, "axis", 1);
        attr_ints(&c, "split", 2, sp);
        run_ok("Split", 11, &c);
        assert_shape(&c.out[1], SHP(2, 3));
        free_outs(&c);
        c = call_in(1, &x);
        c.nout = 3;
        attr_int(&c, "axis", 1);
        attr_int(&c, "num_outputs", 3);
        run_ok("Split", 18, &c);
        assert_shape(&c.out[0], SHP(2, 2));
        assert_shape(&c.out[2], SHP(2, 0));
        free_outs(&c);
        c = call_in(1, &x);
        c.nout = 3;
        attr_int(&c, "axis", 1);
        expect_fail("Split", 13, &c, "axis extent 4 does not divide into 3 outputs");
        in[1] = ints1(spbad, 2);
        c = call_in(2, in);
        c.nout = 2;
        attr_int(&c, "axis", 1);
        expect_fail("Split", 13, &c, "sizes add up to 3, the axis has 4");
        c = call_in(2, in);
        c.nout = 3;
        attr_int(&c, "axis", 1);
        expect_fail("Split", 13, &c, "2 split sizes for 3 outputs");
        (void)w1;
        free(x.data);
}
END_TEST

/* Reference slice: output index -> input index, with the ONNX clamping rules. */
static void slice_case(const int64_t *starts, const int64_t *ends, const int64_t *axes,
                       const int64_t *steps, int n)
{
        struct ops_tensor x = iota(F32, SHP(5, 6, 7)), in[5];
        int64_t st[3] = { 0, 0, 0 }, sp[3] = { 1, 1, 1 }, od[3] = { 5, 6, 7 }, xs[3] = { 42, 7, 1 };
        int64_t *src, i, idx[3];
        struct ops_call c;
        int k, d;

        for (i = 0; i < 210; i++)
                put(F32, x.data, i, (double)i);
        for (k = 0; k < n; k++) {
                int a = (int)(axes[k] < 0 ? axes[k] + 3 : axes[k]);
                int64_t dim = x.dims[a], s = starts[k], e = ends[k], step = steps[k];

                s = s < 0 ? s + dim : s;
                e = e < 0 ? e + dim : e;
                if (step > 0) {
                        s = s < 0 ? 0 : s > dim ? dim : s;
                        e = e < 0 ? 0 : e > dim ? dim : e;
                } else {
                        s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
                        e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
                }
                od[a] = 0;
                for (i = s; step > 0 ? i < e : i > e; i += step)
                        od[a]++;
                st[a] = s;
                sp[a] = step;
        }
        src = malloc(210 * sizeof(*src));
        for (i = 0; i < od[0] * od[1] * od[2]; i++) {
                int64_t r = i;

                for (d = 2; d >= 0; d--) {
                        idx[d] = r % od[d];
                        r /= od[d];
                }
                src[i] = 0;
                for (d = 0; d < 3; d++)
                        src[i] += (st[d] + idx[d] * sp[d]) * xs[d];
        }
        in[0] = x;
        in[1] = ints1((int64_t *)starts, n);
        in[2] = ints1((int64_t *)ends, n);
        in[3] = ints1((int64_t *)axes, n);
        in[4] = ints1((int64_t *)steps, n);
        c = call_in(5, in);
        run_ok("Slice", 13, &c);
        assert_shape(&c.out[0], 3, od);
        assert_gathered(&c.out[0], &x, src);
        free_outs(&c);
        free(src);
        free(x.data);
}

START_TEST(test_slice)
{
        static const int64_t big = INT64_MAX, small = INT64_MIN;
        struct ops_tensor x, in[5];
        struct ops_call c;
        int64_t s[3], e[3], a[3], st[3];
        int r, k;

        slice_case((int64_t[]){ 0, 0, 3 }, (int64_t[]){ 20, 10, 4 }, (int64_t[]){ 0, 1, 2 },
                   (int64_t[]){ 1, 1, 1 }, 3);
        slice_case((int64_t[]){ 1 }, (int64_t[]){ -1 }, (int64_t[]){ -2 }, (int64_t[]){ 2 }, 1);
        slice_case((int64_t[]){ -1, 5 }, (int64_t[]){ small, -100 }, (int64_t[]){ 2, 1 },
                   (int64_t[]){ -1, -2 }, 2);
        slice_case((int64_t[]){ big }, (int64_t[]){ small }, (int64_t[]){ 0 },
                   (int64_t[]){ -3 }, 1);
        slice_case((int64_t[]){ 100 }, (int64_t[]){ 1000 }, (int64_t[]){ 1 }, (int64_t[]){ 1 },
                   1);
        slice_case((int64_t[]){ 2 }, (int64_t[]){ big }, (int64_t[]){ 1 },
                   (int64_t[]){ small }, 1);
        /* random */
        for (r = 0; r < 300; r++) {
                int n = 1 + (int)(rng() % 3);
                uint32_t used = 0;

                for (k = 0; k < n; k++) {
                        do
                                a[k] = (int64_t)(rng() % 3);
                        while (used & (1u << a[k]));
                        used |= 1u << a[k];
                        if (rng() % 2)
                                a[k] -= 3;
                        s[k] = (int64_t)(rng() % 19) - 9;
                        e[k] = (int64_t)(rng() % 19) - 9;
                        do
                                st[k] = (int64_t)(rng() % 7) - 3;
                        while (!st[k]);
                }
                slice_case(s, e, a, st, n);
        }
        /* defaults: no axes, no steps */
        x = iota(F32, SHP(5, 6, 7));
        in[0] = x;
        in[1] = ints1((int64_t[]){ 1, 2 }, 2);
        in[2] = ints1((int64_t[]){ 3, 4 }, 2);
        c = call_in(3, in);
        run_ok("Slice", 13, &c);
        assert_shape(&c.out[0], SHP(2, 2, 7));
        free_outs(&c);
        /* opset 1 attributes */
        c = call_in(1, in);
        attr_ints(&c, "starts", 1, (int64_t[]){ 1 });
        attr_ints(&c, "ends", 1, (int64_t[]){ 1000 });
        attr_ints(&c, "axes", 1, (int64_t[]){ -1 });
        run_ok("Slice", 9, &c);
        assert_shape(&c.out[0], SHP(5, 6, 6));
        free_outs(&c);
        in[3] = ints1((int64_t[]){ 0, 0 }, 2);
        c = call_in(4, in);
        expect_fail("Slice", 13, &c, "axis 0 given twice");
        in[3] = ints1((int64_t[]){ 0, 1 }, 2);
        in[4] = ints1((int64_t[]){ 1, 0 }, 2);
        c = call_in(5, in);
        expect_fail("Slice", 13, &c, "step 0 on axis 1");
        in[4] = ints1((int64_t[]){ 1 }, 1);
        c = call_in(5, in);
        expect_fail("Slice", 13, &c, "differ in length");
        free(x.data);
}
END_TEST

START_TEST(test_expand_tile)
{
        struct ops_tensor x = iota(F32, SHP(3, 1)), in[2];
        int64_t shape[] = { 2, 1, 6 }, bad[] = { 2 }, rep[] = { 2, 3 }, *src, i;
        struct ops_call c;

        in[0] = x;
        in[1] = ints1(shape, 3);
        c = call_in(2, in);
        run_ok("Expand", 13, &c);
        assert_shape(&c.out[0], SHP(2, 3, 6));
        src = malloc(36 * sizeof(*src));
        for (i = 0; i < 36; i++)
                src[i] = (i / 6) % 3;
        assert_gathered(&c.out[0], &x, src);
        free_outs(&c);
        in[1] = ints1(bad, 1);
        c = call_in(2, in);
        run_ok("Expand", 13, &c); /* bidirectional: [3,1] with [2] gives [3,2] */
        assert_shape(&c.out[0], SHP(3, 2));
        free_outs(&c);
        in[1] = ints1((int64_t[]){ 4, 5 }, 2);
        c = call_in(2, in);
        expect_fail("Expand", 13, &c, "Expand: cannot broadcast shapes [3,1] and [4,5]");
        free(x.data);
        /* Tile */
        x = iota(U8, SHP(2, 3));
        in[0] = x;
        in[1] = ints1(rep, 2);
        c = call_in(2, in);
        run_ok("Tile", 13, &c);
        assert_shape(&c.out[0], SHP(4, 9));
        for (i = 0; i < 36; i++)
                src[i] = ((i / 9) % 2) * 3 + (i % 9) % 3;
        assert_gathered(&c.out[0], &x, src);
        free_outs(&c);
        rep[1] = 0;
        c = call_in(2, in);
        run_ok("Tile", 13, &c);
        assert_shape(&c.out[0], SHP(4, 0));
        free_outs(&c);
        in[1] = ints1(rep, 1);
        c = call_in(2, in);
        expect_fail("Tile", 13, &c, "1 repeats for rank 2");
        rep[0] = -1;
        in[1] = ints1(rep, 2);
        c = call_in(2, in);
        expect_fail("Tile", 13, &c, "invalid repeat -1");
        free(x.data);
        free(src);
}
END_TEST

/* numpy's pad index rules, written independently of the kernel's. */
static int64_t pad_ref(const char *mode, int64_t j, int64_t n)
{
        if (strcmp(mode, "edge") == 0)
                return j < 0 ? 0 : j >= n ? n - 1 : j;
        if (strcmp(mode, "wrap") == 0)
                return ((j % n) + n) % n;
        /* reflect: bounce off the ends without repeating them */
        while (j < 0 || j >= n) {
                if (n == 1)
                        return 0;
                if (j < 0)
                        j = -j;
                if (j >= n)
                        j = 2 * (n - 1) - j;
        }
        return j;
}

static void pad_case(const char *mode, const int64_t *pads, int opset)
{
        struct ops_tensor x = iota(I32, SHP(3, 4)), in[3];
        int64_t od[2], i, r, q;
        int32_t cv = -7;
        struct ops_call c;
        int is_const = strcmp(mode, "constant") == 0;

        od[0] = 3 + pads[0] + pads[2];
        od[1] = 4 + pads[1] + pads[3];
        in[0] = x;
        in[1] = ints1((int64_t *)pads, 4);
        in[2] = tensor(I32, &cv, 0, NULL);
        if (opset >= 11) {
                c = call_in(is_const ? 3 : 2, in);
        } else {
                c = call_in(1, in);
                attr_ints(&c, "pads", 4, pads);
                attr_float(&c, "value", -7);
        }
        attr_str(&c, "mode", mode);
        run_ok("Pad", opset, &c);
        assert_shape(&c.out[0], 2, od);
        for (i = 0; i < od[0] * od[1]; i++) {
                int64_t a = i / od[1] - pads[0], b = i % od[1] - pads[1];
                double want;

                if (is_const) {
                        want = a >= 0 && a < 3 && b >= 0 && b < 4 ? (double)(a * 4 + b) : -7;
                } else {
                        r = pad_ref(mode, a, 3);
                        q = pad_ref(mode, b, 4);
                        want = (double)(r * 4 + q);
                }
                ck_assert_msg(get(I32, c.out[0].data, i) == want, "%s [%lld]: %g vs %g", mode,
                              (long long)i, get(I32, c.out[0].data, i), want);
        }
        free_outs(&c);
        free(x.data);
}

START_TEST(test_pad)
{
        static const char *const modes[] = { "constant", "edge", "reflect", "wrap" };
        static const int64_t pads[][4] = { { 0, 0, 0, 0 }, { 1, 2, 3, 4 }, { 2, 0, 0, 3 },
                                           { 0, 7, 5, 0 }, { -1, 1, 1, -2 }, { -2, -3, 0, 0 } };
        struct ops_tensor x = iota(F32, SHP(3, 4)), in[4];
        struct ops_call c;
        int m, p;

        for (m = 0; m < 4; m++)
                for (p = 0; p < NELEM(pads); p++) {
                        pad_case(modes[m], pads[p], 13);
                        pad_case(modes[m], pads[p], 2);
                }
        /* opset 18 axes */
        in[0] = x;
        in[1] = ints1((int64_t[]){ 1, 2 }, 2);
        in[2] = tensor(0, NULL, 0, NULL);
        in[3] = ints1((int64_t[]){ -1 }, 1);
        c = call_in(4, in);
        run_ok("Pad", 18, &c);
        assert_shape(&c.out[0], SHP(3, 7));
        free_outs(&c);
        in[1] = ints1((int64_t[]){ 0, -5, 0, 0 }, 4);
        c = call_in(2, in);
        expect_fail("Pad", 13, &c, "pads -5, 0 on axis 1 of extent 4");
        in[1] = ints1((int64_t[]){ 0, 1 }, 2);
        c = call_in(2, in);
        expect_fail("Pad", 13, &c, "2 pads for 2 axes");
        in[1] = ints1((int64_t[]){ 0, 1, 0, 1 }, 4);
        c = call_in(2, in);
        attr_str(&c, "mode", "mirror");
        expect_fail("Pad", 13, &c, "unknown mode 'mirror'");
        free(x.data);
        x = iota(F32, SHP(0, 2));
        in[0] = x;
        in[1] = ints1((int64_t[]){ 1, 0, 0, 0 }, 4);
        c = call_in(2, in);
        attr_str(&c, "mode", "edge");
        expect_fail("Pad", 13, &c, "cannot pad the empty axis 0 in this mode");
        free(x.data);
}
END_TEST

START_TEST(test_depth_space)
{
        /* test_depthtospace_example and _crd_mode_example, test_spacetodepth_example */
        static const double xin[48] = { 0,  1,  2,  3,  4,  5,  9,  10, 11, 12, 13, 14,
                                        18, 19, 20, 21, 22, 23, 27, 28, 29, 30, 31, 32,
                                        36, 37, 38, 39, 40, 41, 45, 46, 47, 48, 49, 50,
                                        54, 55, 56, 57, 58, 59, 63, 64, 65, 66, 67, 68 };
        static const double dcr[48] = { 0,  18, 1,  19, 2,  20, 36, 54, 37, 55, 38, 56,
                                        3,  21, 4,  22, 5,  23, 39, 57, 40, 58, 41, 59,
                                        9,  27, 10, 28, 11, 29, 45, 63, 46, 64, 47, 65,
                                        12, 30, 13, 31, 14, 32, 48, 66, 49, 67, 50, 68 };
        static const double crd[48] = { 0,  9,  1,  10, 2,  11, 18, 27, 19, 28, 20, 29,
                                        3,  12, 4,  13, 5,  14, 21, 30, 22, 31, 23, 32,
                                        36, 45, 37, 46, 38, 47, 54, 63, 55, 64, 56, 65,
                                        39, 48, 40, 49, 41, 50, 57, 66, 58, 67, 59, 68 };
        static const double s2d_in[24] = { 0, 6,  1, 7,  2, 8,  12, 18, 13, 19, 14, 20,
                                           3, 9,  4, 10, 5, 11, 15, 21, 16, 22, 17, 23 };
        struct ops_tensor x = tensor(F64, (void *)xin, SHP(1, 8, 2, 3)), back;
        double seq[24];
        struct ops_call c;
        int i;

        c = call_in(1, &x);
        attr_int(&c, "blocksize", 2);
        run_ok("DepthToSpace", 13, &c);
        assert_shape(&c.out[0], SHP(1, 2, 4, 6));
        assert_vals(&c.out[0], dcr, 48, 0);
        /* SpaceToDepth undoes DCR */
        back = c.out[0];
        {
                struct ops_call c2 = call_in(1, &back);

                attr_int(&c2, "blocksize", 2);
                run_ok("SpaceToDepth", 13, &c2);
                assert_shape(&c2.out[0], SHP(1, 8, 2, 3));
                assert_vals(&c2.out[0], xin, 48, 0);
                free_outs(&c2);
        }
        free_outs(&c);
        c = call_in(1, &x);
        attr_int(&c, "blocksize", 2);
        attr_str(&c, "mode", "CRD");
        run_ok("DepthToSpace", 13, &c);
        assert_vals(&c.out[0], crd, 48, 0);
        free_outs(&c);
        x = tensor(F64, (void *)s2d_in, SHP(1, 1, 4, 6));
        c = call_in(1, &x);
        attr_int(&c, "blocksize", 2);
        run_ok("SpaceToDepth", 13, &c);
        assert_shape(&c.out[0], SHP(1, 4, 2, 3));
        for (i = 0; i < 24; i++)
                seq[i] = i;
        assert_vals(&c.out[0], seq, 24, 0);
        free_outs(&c);
        c = call_in(1, &x);
        attr_int(&c, "blocksize", 4);
        expect_fail("SpaceToDepth", 13, &c, "spatial dims 4x6 do not divide by blocksize 4");
        c = call_in(1, &x);
        attr_int(&c, "blocksize", 2);
        expect_fail("DepthToSpace", 13, &c, "1 channels do not divide by blocksize^2 4");
        c = call_in(1, &x);
        expect_fail("DepthToSpace", 13, &c, "attribute 'blocksize' is required");
}
END_TEST

START_TEST(test_trilu)
{
        struct ops_tensor x = iota(F32, SHP(2, 3, 5)), in[2];
        int64_t k;
        struct ops_call c;
        int up, i;

        in[0] = x;
        for (up = 0; up < 2; up++) {
                for (k = -4; k <= 6; k++) {
                        in[1] = tensor(I64, &k, 0, NULL);
                        c = call_in(2, in);
                        attr_int(&c, "upper", up);
                        run_ok("Trilu", 14, &c);
                        for (i = 0; i < 30; i++) {
                                int64_t r = (i / 5) % 3, col = i % 5;
                                int keep = up ? col - r >= k : col - r <= k;

                                ck_assert_msg(get(F32, c.out[0].data, i) ==
                                                      (keep ? get(F32, x.data, i) : 0),
                                              "upper %d k %lld [%d]", up, (long long)k, i);
                        }
                        free_outs(&c);
                }
        }
        k = INT64_MIN;
        in[1] = tensor(I64, &k, 0, NULL);
        c = call_in(2, in);
        run_ok("Trilu", 14, &c); /* all kept */
        assert_gathered(&c.out[0], &x, (int64_t[]){ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                                     15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                                                     26, 27, 28, 29 });
        free_outs(&c);
        in[0] = tensor(F32, x.data, SHP(30));
        c = call_in(1, in);
        expect_fail("Trilu", 14, &c, "input 0 has rank 1, 2 or more needed");
        free(x.data);
}
END_TEST

START_TEST(test_reverse_sequence)
{
        /* test_reversesequence_batch and _time */
        struct ops_tensor x = iota(F32, SHP(4, 4)), in[2];
        int64_t lens[4] = { 1, 2, 3, 4 }, lt[4] = { 4, 3, 2, 1 };
        double wb[16] = { 0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12 };
        double wt[16] = { 12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15 };
        struct ops_call c;

        in[0] = x;
        in[1] = ints1(lens, 4);
        c = call_in(2, in);
        attr_int(&c, "batch_axis", 0);
        attr_int(&c, "time_axis", 1);
        run_ok("ReverseSequence", 10, &c);
        assert_vals(&c.out[0], wb, 16, 0);
        free_outs(&c);
        in[1] = ints1(lt, 4);
        c = call_in(2, in);
        run_ok("ReverseSequence", 10, &c);
        assert_vals(&c.out[0], wt, 16, 0);
        free_outs(&c);
        lt[0] = 5;
        c = call_in(2, in);
        expect_fail("ReverseSequence", 10, &c, "sequence length 5 out of [0, 4]");
        c = call_in(2, in);
        attr_int(&c, "batch_axis", 0);
        expect_fail("ReverseSequence", 10, &c, "must be 0 and 1 in some order");
        free(x.data);
}
END_TEST

/* ---------------------------------------------------------------- indexing */

START_TEST(test_gather)
{
        struct ops_tensor x = iota(F16, SHP(3, 4)), in[2];
        int64_t idx[4] = { 0, -1, 2, 1 };
        int32_t i32[2] = { 3, -4 };
        struct ops_call c;

        in[0] = x;
        in[1] = tensor(I64, idx, SHP(2, 2));
        c = call_in(2, in);
        run_ok("Gather", 13, &c);
        assert_shape(&c.out[0], SHP(2, 2, 4));
        assert_gathered(&c.out[0], &x, (int64_t[]){ 0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, 11, 4,
                                                     5, 6, 7 });
        free_outs(&c);
        in[1] = tensor(I32, i32, SHP(2));
        c = call_in(2, in);
        attr_int(&c, "axis", -1);
        run_ok("Gather", 13, &c);
        assert_shape(&c.out[0], SHP(3, 2));
        assert_gathered(&c.out[0], &x, (int64_t[]){ 3, 0, 7, 4, 11, 8 });
        free_outs(&c);
        {
                /* single 4- and 8-byte elements take their own path */
                struct ops_tensor f = iota(F32, SHP(3, 4)), g = iota(I64, SHP(3, 4));

                in[0] = f;
                c = call_in(2, in);
                attr_int(&c, "axis", 1);
                run_ok("Gather", 13, &c);
                assert_gathered(&c.out[0], &f, (int64_t[]){ 3, 0, 7, 4, 11, 8 });
                free_outs(&c);
                in[0] = g;
                c = call_in(2, in);
                attr_int(&c, "axis", 1);
                run_ok("Gather", 13, &c);
                assert_gathered(&c.out[0], &g, (int64_t[]){ 3, 0, 7, 4, 11, 8 });
                free_outs(&c);
                free(f.data);
                free(g.data);
                in[0] = x;
        }
        /* scalar index drops the axis */
        in[1] = tensor(I64, idx + 2, 0, NULL);
        c = call_in(2, in);
        run_ok("Gather", 13, &c);
        assert_shape(&c.out[0], SHP(4));
        free_outs(&c);
        idx[1] = 3;
        in[1] = tensor(I64, idx, SHP(2, 2));
        c = call_in(2, in);
        expect_fail("Gather", 13, &c, "index 3 out of range [-3, 2]");
        in[1] = tensor(F32, idx, SHP(2));
        c = call_in(2, in);
        expect_fail("Gather", 13, &c, "input 1 has unsupported dtype float32");
        /* GatherElements (test_gather_elements_negative_indices) */
        {
                struct ops_tensor d = iota(F32, SHP(3, 3));
                int64_t ge[4] = { -1, -2, 0, -2 };

                in[0] = d;
                in[1] = tensor(I64, ge, SHP(2, 2));
                c = call_in(2, in);
                run_ok("GatherElements", 13, &c);
                assert_shape(&c.out[0], SHP(2, 2));
                assert_gathered(&c.out[0], &d, (int64_t[]){ 6, 4, 0, 4 });
                free_outs(&c);
                c = call_in(2, in);
                attr_int(&c, "axis", 1);
                run_ok("GatherElements", 13, &c);
                assert_gathered(&c.out[0], &d, (int64_t[]){ 2, 1, 3, 4 });
                free_outs(&c);
                ge[0] = 3;
                c = call_in(2, in);
                expect_fail("GatherElements", 13, &c, "index 3 out of range [-3, 2]");
                free(d.data);
        }
        /* GatherND (test_gathernd_example_int32_batch_dim1 and plain) */
        {
                struct ops_tensor d = iota(I32, SHP(2, 2, 2));
                int64_t gi[2] = { 1, 0 }, gj[4] = { 0, 1, 1, 0 };

                in[0] = d;
                in[1] = tensor(I64, gi, SHP(2, 1));
                c = call_in(2, in);
                attr_int(&c, "batch_dims", 1);
                run_ok("GatherND", 13, &c);
                assert_shape(&c.out[0], SHP(2, 2));
                assert_gathered(&c.out[0], &d, (int64_t[]){ 2, 3, 4, 5 });
                free_outs(&c);
                in[1] = tensor(I64, gj, SHP(2, 2));
                c = call_in(2, in);
                run_ok("GatherND", 13, &c);
                assert_shape(&c.out[0], SHP(2, 2));
                assert_gathered(&c.out[0], &d, (int64_t[]){ 2, 3, 4, 5 });
                free_outs(&c);
                in[1] = tensor(I64, gj, SHP(1, 4));
                c = call_in(2, in);
                expect_fail("GatherND", 13, &c, "index tuples of 4 entries for 3 dims");
                free(d.data);
        }
        free(x.data);
}
END_TEST

START_TEST(test_scatter)
{
        float d[5] = { 1, 2, 3, 4, 5 }, u[2] = { 1.5f, 2.5f };
        int64_t ix[2] = { 1, 1 };
        double add[5] = { 1, 6, 3, 4, 5 }, mx[5] = { 1, 2.5, 3, 4, 5 }, none[5] = { 1, 2.5, 3, 4, 5 };
        double mn[5] = { 1, 1.5, 3, 4, 5 };
        const char *reds[] = { "add", "max", "min" };
        const double *want[] = { add, mx, mn };
        struct ops_tensor in[3];
        struct ops_call c;
        int r;

        in[0] = tensor(F32, d, SHP(1, 5));
        in[1] = tensor(I64, ix, SHP(1, 2));
        in[2] = tensor(F32, u, SHP(1, 2));
        for (r = 0; r < 3; r++) {
                c = call_in(3, in);
                attr_int(&c, "axis", 1);
                attr_str(&c, "reduction", reds[r]);
                run_ok("ScatterElements", 18, &c);
                assert_vals(&c.out[0], want[r], 5, 0);
                free_outs(&c);
        }
        c = call_in(3, in);
        attr_int(&c, "axis", -1);
        run_ok("ScatterElements", 13, &c);
        assert_vals(&c.out[0], none, 5, 0);
        free_outs(&c);
        c = call_in(3, in);
        attr_int(&c, "axis", 1);
        run_ok("Scatter", 10, &c);
        assert_vals(&c.out[0], none, 5, 0);
        free_outs(&c);
        c = call_in(3, in);
        attr_int(&c, "axis", 1);
        attr_str(&c, "reduction", "avg");
        expect_fail("ScatterElements", 18, &c, "unknown reduction 'avg'");
        ix[0] = -6;
        c = call_in(3, in);
        attr_int(&c, "axis", 1);
        expect_fail("ScatterElements", 18, &c, "index -6 out of range [-5, 4]");
        /* ScatterND: slices, and int64 multiply */
        {
                int64_t data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, up[4] = { 10, 10, -1, 2 };
                int64_t nd[2] = { 1, -2 };
                double set[8] = { 10, 10, 3, 4, -1, 2, 7, 8 }, mul[8] = { 10, 20, 3, 4, -5, 12, 7, 8 };

                in[0] = tensor(I64, data, SHP(4, 2));
                in[1] = tensor(I64, nd, SHP(2, 1));
                in[2] = tensor(I64, up, SHP(2, 2));
                nd[0] = 0;
                c = call_in(3, in);
                run_ok("ScatterND", 16, &c);
                assert_vals(&c.out[0], set, 8, 0);
                free_outs(&c);
                c = call_in(3, in);
                attr_str(&c, "reduction", "mul");
                run_ok("ScatterND", 16, &c);
                assert_vals(&c.out[0], mul, 8, 0);
                free_outs(&c);
                in[2] = tensor(I64, up, SHP(2, 1));
                c = call_in(3, in);
                expect_fail("ScatterND", 16, &c, "updates shape [2,1], expected [2,2]");
        }
}
END_TEST

START_TEST(test_onehot)
{
        /* test_onehot_with_axis */
        float ix[4] = { 1, 9, 2, 4 }, depth = 10, vals[2] = { 1, 3 };
        int64_t neg[3] = { 0, -7, -8 }, d3 = 5;
        struct ops_tensor in[3];
        struct ops_call c;
        int64_t i;

        in[0] = tensor(F32, ix, SHP(2, 2));
        in[1] = tensor(F32, &depth, 0, NULL);
        in[2] = tensor(F32, vals, SHP(2));
        c = call_in(3, in);
        attr_int(&c, "axis", 1);
        run_ok("OneHot", 11, &c);
        assert_shape(&c.out[0], SHP(2, 10, 2));
        for (i = 0; i < 40; i++) {
                int64_t a = i / 20, dd = (i / 2) % 10, b = i % 2;

                ck_assert_float_eq(((float *)c.out[0].data)[i], dd == (int64_t)ix[a * 2 + b] ? 3 : 1);
        }
        free_outs(&c);
        /* negative indices count from the end; out of range gives all off */
        in[0] = tensor(I64, neg, SHP(3));
        in[1] = tensor(I64, &d3, SHP(1));
        c = call_in(3, in);
        run_ok("OneHot", 11, &c);
        {
                double w[15] = { 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };

                assert_shape(&c.out[0], SHP(3, 5));
                assert_vals(&c.out[0], w, 15, 0);
        }
        free_outs(&c);
        neg[1] = -2;
        c = call_in(3, in);
        attr_int(&c, "axis", 0);
        run_ok("OneHot", 11, &c);
        assert_shape(&c.out[0], SHP(5, 3));
        ck_assert_float_eq(((float *)c.out[0].data)[3 * 3 + 1], 3);
        free_outs(&c);
        c = call_in(3, in);
        attr_int(&c, "axis", 2);
        expect_fail("OneHot", 11, &c, "axis 2 out of range for rank 2");
        d3 = 0;
        c = call_in(3, in);
        expect_fail("OneHot", 11, &c, "depth 0 out of range");
}
END_TEST

START_TEST(test_nonzero_compress)
{
        uint8_t cond[4] = { 1, 0, 1, 1 }, sel[3] = { 0, 1, 1 };
        float fz[5] = { 0.0f, -0.0f, NAN, 2, 0 }, x[6] = { 1, 2, 3, 4, 5, 6 };
        double nz[6] = { 0, 1, 1, 0, 0, 1 }, c0[4] = { 3, 4, 5, 6 }, c1[3] = { 2, 4, 6 };
        double cf[2] = { 2, 3 };
        struct ops_tensor in[2];
        struct ops_call c;

        in[0] = tensor(BOOL, cond, SHP(2, 2));
        c = call_in(1, in);
        run_ok("NonZero", 13, &c);
        assert_shape(&c.out[0], SHP(2, 3));
        assert_vals(&c.out[0], nz, 6, 0);
        free_outs(&c);
        /* -0.0 is zero, NaN is not */
        in[0] = tensor(F32, fz, SHP(5));
        c = call_in(1, in);
        run_ok("NonZero", 13, &c);
        assert_shape(&c.out[0], SHP(1, 2));
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], 2);
        free_outs(&c);
        in[0] = tensor(F32, NULL, SHP(5));
        c = call_in(1, in);
        c.out[0] = tensor(I64, NULL, SHP(1, 2));
        expect_check_fail("NonZero", 13, &c, "depends on the values of input 0");
        /* Compress along an axis, flattened, with a short condition */
        in[0] = tensor(F32, x, SHP(3, 2));
        in[1] = tensor(BOOL, sel, SHP(3));
        c = call_in(2, in);
        attr_int(&c, "axis", 0);
        run_ok("Compress", 11, &c);
        assert_shape(&c.out[0], SHP(2, 2));
        assert_vals(&c.out[0], c0, 4, 0);
        free_outs(&c);
        in[1] = tensor(BOOL, sel, SHP(2));
        c = call_in(2, in);
        attr_int(&c, "axis", -1);
        run_ok("Compress", 11, &c);
        assert_shape(&c.out[0], SHP(3, 1));
        assert_vals(&c.out[0], c1, 3, 0);
        free_outs(&c);
        in[1] = tensor(BOOL, sel, SHP(3));
        c = call_in(2, in);
        run_ok("Compress", 11, &c);
        assert_shape(&c.out[0], SHP(2));
        assert_vals(&c.out[0], cf, 2, 0);
        free_outs(&c);
        in[1] = tensor(U8, sel, SHP(3));
        c = call_in(2, in);
        expect_fail("Compress", 11, &c, "input 1 has unsupported dtype uint8");
}
END_TEST

START_TEST(test_unique)
{
        /* test_unique_not_sorted_without_axis, test_unique_sorted_with_axis_3d */
        float x[6] = { 2, 1, 1, 3, 4, 3 };
        float x3[16] = { 1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1 };
        double y[4] = { 2, 1, 3, 4 }, ind[4] = { 0, 1, 3, 4 }, inv[6] = { 0, 1, 1, 2, 3, 2 };
        double cnt[4] = { 1, 2, 2, 1 };
        double ys[4] = { 1, 2, 3, 4 }, inds[4] = { 1, 0, 3, 4 }, invs[6] = { 1, 0, 0, 2, 3, 2 };
        double cnts[4] = { 2, 1, 2, 1 };
        double y3[12] = { 0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1 }, i3[3] = { 1, 0, 2 };
        double v3[4] = { 1, 0, 2, 0 }, c3[3] = { 2, 1, 1 };
        int64_t big[5] = { INT64_MAX, -1, INT64_MAX, INT64_MIN, -1 };
        double bigs[3] = { (double)INT64_MIN, -1, (double)INT64_MAX };
        struct ops_tensor in[1];
        struct ops_call c;

        in[0] = tensor(F32, x, SHP(6));
        c = call_in(1, in);
        c.nout = 4;
        attr_int(&c, "sorted", 0);
        run_ok("Unique", 11, &c);
        assert_vals(&c.out[0], y, 4, 0);
        assert_vals(&c.out[1], ind, 4, 0);
        assert_vals(&c.out[2], inv, 6, 0);
        assert_vals(&c.out[3], cnt, 4, 0);
        free_outs(&c);
        c = call_in(1, in);
        c.nout = 4;
        run_ok("Unique", 11, &c);
        assert_vals(&c.out[0], ys, 4, 0);
        assert_vals(&c.out[1], inds, 4, 0);
        assert_vals(&c.out[2], invs, 6, 0);
        assert_vals(&c.out[3], cnts, 4, 0);
        free_outs(&c);
        in[0] = tensor(F32, x3, SHP(2, 4, 2));
        c = call_in(1, in);
        c.nout = 4;
        attr_int(&c, "axis", -2);
        run_ok("Unique", 11, &c);
        assert_shape(&c.out[0], SHP(2, 3, 2));
        assert_vals(&c.out[0], y3, 12, 0);
        assert_vals(&c.out[1], i3, 3, 0);
        assert_vals(&c.out[2], v3, 4, 0);
        assert_vals(&c.out[3], c3, 3, 0);
        free_outs(&c);
        /* int64 compared exactly; only Y asked for */
        in[0] = tensor(I64, big, SHP(5));
        c = call_in(1, in);
        run_ok("Unique", 11, &c);
        assert_shape(&c.out[0], SHP(3));
        ck_assert_int_eq(((int64_t *)c.out[0].data)[0], INT64_MIN);
        ck_assert_int_eq(((int64_t *)c.out[0].data)[2], INT64_MAX);
        (void)bigs;
        free_outs(&c);
        c = call_in(1, in);
        c.nout = 5;
        expect_fail("Unique", 11, &c, "expected 1 to 4 outputs, got 5");
}
END_TEST

/* ---------------------------------------------------------------- Resize */

START_TEST(test_resize)
{
        float x4[16], x2[4] = { 1, 2, 3, 4 }, sc2[4] = { 1, 1, 2, 2 }, sc06[4] = { 1, 1, 0.6f, 0.6f };
        float roi[8] = { 0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f };
        int64_t sz[4] = { 1, 1, 3, 3 }, sz8[4] = { 1, 1, 8, 8 };
        /* test_resize_upsample_scales_linear */
        double lin[16] = { 1,   1.25, 1.75, 2,   1.5, 1.75, 2.25, 2.5,
                           2.5, 2.75, 3.25, 3.5, 3,   3.25, 3.75, 4 };
        /* test_resize_upsample_scales_nearest */
        double nn[16] = { 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4 };
        /* first row of test_resize_upsample_scales_cubic */
        double cub[8] = { 0.47265625, 0.76953125, 1.24609375, 1.875,
                          2.28125,    2.91015625, 3.38671875, 3.68359375 };
        /* test_resize_tf_crop_and_resize */
        double crop[9] = { 7.6, 10, 10, 12.4, 10, 10, 10, 10, 10 };
        /* test_resize_downsample_scales_linear_align_corners on [[1,2,3,4],[5,6,7,8]] */
        double ac[2] = { 1, 3.142857 };
        struct ops_tensor in[4], none = tensor(0, NULL, 0, NULL);
        struct ops_call c;
        int i;

        for (i = 0; i < 16; i++)
                x4[i] = (float)(i + 1);
        in[0] = tensor(F32, x2, SHP(1, 1, 2, 2));
        in[1] = none;
        in[2] = tensor(F32, sc2, SHP(4));
        c = call_in(3, in);
        attr_str(&c, "mode", "linear");
        run_ok("Resize", 13, &c);
        assert_shape(&c.out[0], SHP(1, 1, 4, 4));
        assert_vals(&c.out[0], lin, 16, 1e-6);
        free_outs(&c);
        c = call_in(3, in);
        run_ok("Resize", 13, &c);
        assert_vals(&c.out[0], nn, 16, 0);
        free_outs(&c);
        /* nearest on int8 goes through the byte copy */
        {
                int8_t b[4] = { 1, 2, 3, 4 };

                in[0] = tensor(I8, b, SHP(1, 1, 2, 2));
                c = call_in(3, in);
                run_ok("Resize", 13, &c);
                ck_assert_int_eq(c.out[0].dtype, I8);
                assert_vals(&c.out[0], nn, 16, 0);
                free_outs(&c);
        }
        in[0] = tensor(F32, x4, SHP(1, 1, 4, 4));
        c = call_in(3, in);
        attr_str(&c, "mode", "cubic");
        run_ok("Resize", 13, &c);
        assert_shape(&c.out[0], SHP(1, 1, 8, 8));
        {
                struct ops_tensor row = tensor(F32, c.out[0].data, SHP(8));

                assert_vals(&row, cub, 8, 1e-6);
        }
        free_outs(&c);
        in[1] = tensor(F32, roi, SHP(8));
        in[2] = none;
        in[3] = tensor(I64, sz, SHP(4));
        c = call_in(4, in);
        attr_str(&c, "mode", "linear");
        attr_str(&c, "coordinate_transformation_mode", "tf_crop_and_resize");
        attr_float(&c, "extrapolation_value", 10);
        run_ok("Resize", 13, &c);
        assert_shape(&c.out[0], SHP(1, 1, 3, 3));
        assert_vals(&c.out[0], crop, 9, 1e-6);
        free_outs(&c);
        in[0] = tensor(F32, x4, SHP(1, 1, 2, 4));
        in[1] = none;
        in[2] = tensor(F32, sc06, SHP(4));
        c = call_in(3, in);
        attr_str(&c, "mode", "linear");
        attr_str(&c, "coordinate_transformation_mode", "align_corners");
        run_ok("Resize", 13, &c);
        assert_shape(&c.out[0], SHP(1, 1, 1, 2));
        assert_vals(&c.out[0], ac, 2, 1e-6);
        free_outs(&c);
        /* Upsample (opset 9): asymmetric nearest */
        in[0] = tensor(F32, x2, SHP(1, 1, 2, 2));
        in[1] = tensor(F32, sc2, SHP(4));
        c = call_in(2, in);
        run_ok("Upsample", 9, &c);
        assert_vals(&c.out[0], nn, 16, 0);
        free_outs(&c);
        /* errors */
        in[1] = none;
        in[2] = tensor(F32, sc2, SHP(4));
        in[3] = tensor(I64, sz8, SHP(4));
        c = call_in(4, in);
        expect_fail("Resize", 13, &c, "exactly one of scales and sizes needed");
        c = call_in(3, in);
        attr_str(&c, "mode", "area");
        expect_fail("Resize", 13, &c, "unknown mode 'area'");
        c = call_in(3, in);
        attr_int(&c, "antialias", 1);
        expect_fail("Resize", 13, &c, "not supported");
        in[2] = tensor(F32, sc2, SHP(2));
        c = call_in(3, in);
        expect_fail("Resize", 13, &c, "2 scales for rank 4");
}
END_TEST

/* ---------------------------------------------------------------- registry, checks, cost */

START_TEST(test_shape_registry_and_checks)
{
        static const char *const ops[] = {
                "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Shape",
                "Size", "Constant", "ConstantOfShape", "Range", "EyeLike", "Transpose",
                "Concat", "Split", "Slice", "Expand", "Tile", "Pad", "DepthToSpace",
                "SpaceToDepth", "Trilu", "ReverseSequence", "Gather", "GatherElements",
                "GatherND", "ScatterElements", "Scatter", "ScatterND", "OneHot", "NonZero",
                "Compress", "Unique", "Resize", "Upsample",
        };
        struct ops_tensor in[2];
        struct ops_call c;
        uint64_t flops, bytes;
        char err[160];
        int i;

        for (i = 0; i < NELEM(ops); i++) {
                const struct ops_def *d = ops_lookup(ops[i]);

                ck_assert_msg(d != NULL, "%s", ops[i]);
                ck_assert(d->check || d->infer); /* NULL: the default check through infer */
                ck_assert_ptr_nonnull(d->run);
                ck_assert_ptr_nonnull(d->cost);
                ck_assert_ptr_nonnull(d->infer);
                ck_assert_ptr_eq(ops_lookup_onnx(NULL, ops[i], 17) ? d : NULL, d);
        }
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Split", 12)->since_version, 1);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Split", 17)->since_version, 13);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Pad", 10)->since_version, 1);
        ck_assert_int_eq(ops_lookup_onnx(NULL, "Resize", 12)->since_version, 11);
        ck_assert_ptr_null(ops_lookup_onnx(NULL, "Trilu", 13));
        /* A wire check of a data-independent op: counts, attributes, output shape. */
        in[0] = tensor(F32, NULL, SHP(2, 3));
        c = call_in(1, in);
        c.out[0] = tensor(F32, NULL, SHP(3, 2));
        ck_assert_int_eq(ops_check(ops_lookup("Transpose"), &c, err, sizeof(err)), 0);
        c.out[0] = tensor(F32, NULL, SHP(2, 3));
        expect_check_fail("Transpose", 13, &c, "Transpose: output shape [2,3] but expected [3,2]");
        c.out[0] = tensor(F16, NULL, SHP(3, 2));
        expect_check_fail("Transpose", 13, &c, "output dtype float16 but expected float32");
        c.out[0] = tensor(F32, NULL, SHP(3, 2));
        c.nout = 2;
        expect_check_fail("Transpose", 13, &c, "expected 1 output, got 2");
        c.nout = 1;
        c.in[0].dims[0] = -1;
        expect_check_fail("Transpose", 13, &c, "negative dimension -1 at axis 0");
        c.in[0].dims[0] = 2;
        c.in[0].ndim = 9;
        expect_check_fail("Transpose", 13, &c, "invalid rank 9");
        c.in[0].ndim = 2;
        attr_int(&c, "perm", 0);
        attr_int(&c, "perm", 0);
        expect_check_fail("Transpose", 13, &c, "attribute 'perm' given twice");
        c.nattr = 0;
        attr_int(&c, "axis", 0);
        expect_check_fail("Transpose", 13, &c, "unknown attribute 'axis'");
        c.nattr = OPS_MAX_ATTRS + 1;
        expect_check_fail("Transpose", 13, &c, "invalid attribute count");
        c.nattr = 0;
        c.nin = 2;
        expect_check_fail("Transpose", 13, &c, "expected 1 input, got 2");
        /* cost: bytes of every tensor */
        c = call_in(1, in);
        c.out[0] = tensor(F32, NULL, SHP(3, 2));
        ops_cost(ops_lookup("Transpose"), &c, &flops, &bytes);
        ck_assert_uint_eq(bytes, 48);
}
END_TEST

static Suite *shape_suite(void)
{
        Suite *s = suite_create("ops_shape");
        TCase *tc;

        tc = tcase_create("shape");
        tcase_add_test(tc, test_reshape);
        tcase_add_test(tc, test_flatten_squeeze_unsqueeze);
        tcase_add_test(tc, test_identity_dropout);
        tcase_add_test(tc, test_shape_size);
        tcase_add_test(tc, test_constants);
        tcase_add_test(tc, test_range_eyelike);
        suite_add_tcase(s, tc);

        tc = tcase_create("move");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_transpose);
        tcase_add_test(tc, test_transpose_large);
        tcase_add_test(tc, test_concat_split);
        tcase_add_test(tc, test_slice);
        tcase_add_test(tc, test_expand_tile);
        tcase_add_test(tc, test_pad);
        tcase_add_test(tc, test_depth_space);
        tcase_add_test(tc, test_trilu);
        tcase_add_test(tc, test_reverse_sequence);
        suite_add_tcase(s, tc);

        tc = tcase_create("index");
        tcase_add_test(tc, test_gather);
        tcase_add_test(tc, test_scatter);
        tcase_add_test(tc, test_onehot);
        tcase_add_test(tc, test_nonzero_compress);
        tcase_add_test(tc, test_unique);
        suite_add_tcase(s, tc);

        tc = tcase_create("resize");
        tcase_add_test(tc, test_resize);
        suite_add_tcase(s, tc);

        tc = tcase_create("registry");
        tcase_add_test(tc, test_shape_registry_and_checks);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(shape_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Comparisons, logic and selection: Equal, Less, LessOrEqual, Greater, GreaterOrEqual
 * (bool outputs), And, Or, Xor, Not (bool), Where and BitShift.
 *
 * Bools are bytes; any nonzero byte counts as true and results are 0 or 1. float16 and
 * bfloat16 compare through float32, exactly. Where selects by element size (it only moves
 * bits, so every dtype works natively). BitShift by the element width or more gives 0.
 * Its "direction" attribute is the string LEFT or RIGHT; launches over the wire, which
 * cannot carry strings, may give it as an int (0 = LEFT, 1 = RIGHT).
 *
 * Equal and Where also take STRING tensors (in graph runs only; the executor lets strings
 * reach them at their data inputs): Equal compares the strings byte for byte, Where moves
 * the element pointers. For the element-wise rules (dtype checks, broadcasting) the strings
 * stand as uint64, the same size, in a probe copy of the call. */
#include <errno.h>
#include <string.h>

#include "ew.h"
#include "strings.h"

/* 1 and *probe: the call with its STRING inputs among op's same-dtype ones as uint64 (and
 * a STRING output likewise); 0: no strings; < 0: strings mixed with other dtypes. */
static int string_probe(const struct ew_op *op, const struct ops_call *call,
                        struct ops_call *probe, char *err, size_t errlen)
{
        int any = 0, other = -1;

        for (int i = 0; i < call->nin && i < 32; i++) {
                if (!((op->same >> i) & 1) || !call->in[i].dtype)
                        continue;
                if (call->in[i].dtype == PROTO_DTYPE_STRING)
                        any = 1;
                else
                        other = i;
        }
        if (!any)
                return 0;
        if (other >= 0)
                return ops_fail(err, errlen, -EINVAL, "%s: input %d is not a string like the others",
                                op->name, other);
        *probe = *call;
        for (int i = 0; i < call->nin && i < 32; i++)
                if (((op->same >> i) & 1) && probe->in[i].dtype == PROTO_DTYPE_STRING)
                        probe->in[i].dtype = PROTO_DTYPE_UINT64;
        if (probe->nout >= 1 && probe->out[0].dtype == PROTO_DTYPE_STRING)
                probe->out[0].dtype = PROTO_DTYPE_UINT64;
        return 1;
}

/* ew_infer on the probe; out_dtype (nonzero) replaces the inferred output dtype. */
static int string_infer(const struct ew_op *op, struct ops_call *call, int out_dtype, char *err,
                        size_t errlen)
{
        struct ops_call *probe = __builtin_alloca(sizeof(*probe));
        int rc = string_probe(op, call, probe, err, errlen);

        if (rc <= 0)
                return rc < 0 ? rc : ew_infer(op, call, err, errlen);
        rc = ew_infer(op, probe, err, errlen);
        if (rc)
                return rc;
        call->out[0].dtype = out_dtype ? out_dtype : probe->out[0].dtype;
        call->out[0].ndim = probe->out[0].ndim;
        memcpy(call->out[0].dims, probe->out[0].dims, sizeof(call->out[0].dims));
        return 0;
}

/* --------------------------------------------------------------------- comparisons */

#define C_EQ(T, x, y) ((x) == (y))
#define C_LT(T, x, y) ((x) < (y))
#define C_LE(T, x, y) ((x) <= (y))
#define C_GT(T, x, y) ((x) > (y))
#define C_GE(T, x, y) ((x) >= (y))
#define B_EQ(T, x, y) (((x) != 0) == ((y) != 0))

EW_FOR_NUMERIC(EW_BINARY_BOOL, equal, C_EQ)
EW_BINARY(equal_b, uint8_t, uint8_t, B_EQ)
EW_FOR_NUMERIC(EW_BINARY_BOOL, less, C_LT)
EW_FOR_NUMERIC(EW_BINARY_BOOL, lesseq, C_LE)
EW_FOR_NUMERIC(EW_BINARY_BOOL, greater, C_GT)
EW_FOR_NUMERIC(EW_BINARY_BOOL, greatereq, C_GE)

static const ew_kernel equal_k[EW_NTYPES] = { EW_TAB_NUMERIC(equal), [EW_BOOL] = equal_b };
static const ew_kernel less_k[EW_NTYPES] = { EW_TAB_NUMERIC(less) };
static const ew_kernel lesseq_k[EW_NTYPES] = { EW_TAB_NUMERIC(lesseq) };
static const ew_kernel greater_k[EW_NTYPES] = { EW_TAB_NUMERIC(greater) };
static const ew_kernel greatereq_k[EW_NTYPES] = { EW_TAB_NUMERIC(greatereq) };

#define EW_CMP_OP(sym, opname, mask, tab)                                                      \
        static const struct ew_op sym = {                                                      \
                .name = opname, .min_in = 2, .max_in = 2, .types = mask, .same = 3,            \
                .out = PROTO_DTYPE_BOOL, .k = tab, .flops = 1,                                 \
        };

EW_CMP_OP(equal_op, "Equal", EW_ALL, equal_k)
EW_CMP_OP(less_op, "Less", EW_NUMERIC, less_k)
EW_CMP_OP(lesseq_op, "LessOrEqual", EW_NUMERIC, lesseq_k)
EW_CMP_OP(greater_op, "Greater", EW_NUMERIC, greater_k)
EW_CMP_OP(greatereq_op, "GreaterOrEqual", EW_NUMERIC, greatereq_k)

/* Version 7 brought broadcasting; later versions added dtypes. */
/* Equal on strings: same length, same bytes (a NULL element is the empty string). */
static void equal_str(void *o, const void *const *in, const int64_t *st, int64_t n,
                      const struct ew_params *p)
{
        const struct ops_str *const *a = in[0], *const *b = in[1];
        uint8_t *y = o;

        (void)p;
        for (int64_t i = 0; i < n; i++) {
                uint32_t la, lb;
                const char *sa = ops_str_bytes(a[i * st[0]], &la);
                const char *sb = ops_str_bytes(b[i * st[1]], &lb);
                y[i] = la == lb && memcmp(sa, sb, la) == 0;
        }
}

static int equal_infer(const struct ops_def *d, struct ops_call *c, char *e, size_t l)
{
        return string_infer(&equal_op, c, PROTO_DTYPE_BOOL, e, l);
}

static int equal_check(const struct ops_def *d, const struct ops_call *c, char *e, size_t l)
{
        return ew_check(&equal_op, d, c, e, l);
}

static int equal_run(const struct ops_def *d, const struct ops_call *c, char *e, size_t l)
{
        struct ops_call *probe = __builtin_alloca(sizeof(*probe));
        struct ew_plan pl;
        int rc = string_probe(&equal_op, c, probe, e, l);

        if (rc <= 0)
                return rc < 0 ? rc : ew_run(&equal_op, c, e, l);
        rc = ew_plan_init(&equal_op, probe, &pl, e, l);
        if (rc)
                return rc;
        pl.k = equal_str;
        return ew_apply(&pl, &c->out[0], equal_op.name, e, l);
}

static void equal_cost(const struct ops_def *d, const struct ops_call *c, uint64_t *f, uint64_t *b)
{
        ew_cost(&equal_op, c, f, b);
}

const struct ops_def ops_equal_def = {
        .name = "Equal", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .check = equal_check, .run = equal_run, .cost = equal_cost,
        .flags = OPS_FLAG_ELEMENTWISE, .infer = equal_infer, .since_version = 7,
};
EW_DEFINE(ops_less_def, "Less", less_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_lessorequal_def, "LessOrEqual", lesseq_op, 2, 2, OPS_ENGINE_VECTOR, 12)
EW_DEFINE(ops_greater_def, "Greater", greater_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_greaterorequal_def, "GreaterOrEqual", greatereq_op, 2, 2, OPS_ENGINE_VECTOR,
          12)

/* --------------------------------------------------------------------------- logic */

#define L_AND(T, x, y) (((x) != 0) & ((y) != 0))
#define L_OR(T, x, y) (((x) != 0) | ((y) != 0))
#define L_XOR(T, x, y) (((x) != 0) ^ ((y) != 0))
#define L_NOT(T, x) ((x) == 0)

EW_BINARY(and_b, uint8_t, uint8_t, L_AND)
EW_BINARY(or_b, uint8_t, uint8_t, L_OR)
EW_BINARY(xor_b, uint8_t, uint8_t, L_XOR)
EW_UNARY(not_b, uint8_t, uint8_t, L_NOT)

static const ew_kernel and_k[EW_NTYPES] = { [EW_BOOL] = and_b };
static const ew_kernel or_k[EW_NTYPES] = { [EW_BOOL] = or_b };
static const ew_kernel xor_k[EW_NTYPES] = { [EW_BOOL] = xor_b };
static const ew_kernel not_k[EW_NTYPES] = { [EW_BOOL] = not_b };

EW_CMP_OP(and_op, "And", EW_M(EW_BOOL), and_k)
EW_CMP_OP(or_op, "Or", EW_M(EW_BOOL), or_k)
EW_CMP_OP(xor_op, "Xor", EW_M(EW_BOOL), xor_k)

static const struct ew_op not_op = {
        .name = "Not", .min_in = 1, .max_in = 1, .types = EW_M(EW_BOOL), .k = not_k,
        .flops = 1,
};

EW_DEFINE(ops_and_def, "And", and_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_or_def, "Or", or_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_xor_def, "Xor", xor_op, 2, 2, OPS_ENGINE_VECTOR, 7)
EW_DEFINE(ops_not_def, "Not", not_op, 1, 1, OPS_ENGINE_VECTOR, 1)

/* --------------------------------------------------------------------------- Where */

#define W_SEL(c, x, y) ((c) ? (x) : (y))

EW_TERNARY(where_1, uint8_t, uint8_t, W_SEL)
EW_TERNARY(where_2, uint8_t, uint16_t, W_SEL)
EW_TERNARY(where_4, uint8_t, uint32_t, W_SEL)
EW_TERNARY(where_8, uint8_t, uint64_t, W_SEL)

static const ew_kernel where_k[EW_NTYPES] = {
        [EW_F32] = where_4, [EW_F64] = where_8, [EW_F16] = where_2, [EW_BF16] = where_2,
        [EW_I8] = where_1,  [EW_I16] = where_2, [EW_I32] = where_4, [EW_I64] = where_8,
        [EW_U8] = where_1,  [EW_U16] = where_2, [EW_U32] = where_4, [EW_U64] = where_8,
        [EW_BOOL] = where_1,
};

static int where_infer(const struct ew_op *op, struct ops_call *call, char *err,
                       size_t errlen)
{
        char buf[OPS_DTYPE_STR_MAX];

        if (call->in[0].dtype != PROTO_DTYPE_BOOL)
                return ops_fail(err, errlen, -EINVAL, "Where: input 0 (condition) is %s, not bool",
                                ops_dtype_str(call->in[0].dtype, buf, sizeof(buf)));
        return 0;
}

static const struct ew_op where_op = {
        .name = "Where", .min_in = 3, .max_in = 3, .key = 1, .types = EW_ALL, .same = 6,
        .k = where_k, .infer = where_infer, .flops = 1,
};

static int where_infer_def(const struct ops_def *d, struct ops_call *c, char *e, size_t l)
{
        int strings = c->in[1].dtype == PROTO_DTYPE_STRING || c->in[2].dtype == PROTO_DTYPE_STRING;

        return string_infer(&where_op, c, strings ? PROTO_DTYPE_STRING : 0, e, l);
}

static int where_check(const struct ops_def *d, const struct ops_call *c, char *e, size_t l)
{
        return ew_check(&where_op, d, c, e, l);
}

/* Strings: the 8-byte selection of uint64 moves their pointers. */
static int where_run(const struct ops_def *d, const struct ops_call *c, char *e, size_t l)
{
        struct ops_call *probe = __builtin_alloca(sizeof(*probe));
        int rc = string_probe(&where_op, c, probe, e, l);

        if (rc <= 0)
                return rc < 0 ? rc : ew_run(&where_op, c, e, l);
        return ew_run(&where_op, probe, e, l);
}

static void where_cost(const struct ops_def *d, const struct ops_call *c, uint64_t *f, uint64_t *b)
{
        ew_cost(&where_op, c, f, b);
}

/* Where-16 only added bfloat16. */
const struct ops_def ops_where_def = {
        .name = "Where", .min_inputs = 3, .max_inputs = 3, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .check = where_check, .run = where_run, .cost = where_cost,
        .flags = OPS_FLAG_ELEMENTWISE, .infer = where_infer_def, .since_version = 9,
};

/* ------------------------------------------------------------------------ BitShift */

#define SH_LEFT(T, x, y) ((uint64_t)(y) >= 8 * sizeof(T) ? (T)0 : (T)((x) << (y)))
#define SH_RIGHT(T, x, y) ((uint64_t)(y) >= 8 * sizeof(T) ? (T)0 : (T)((x) >> (y)))

EW_FOR_UINTS(EW_BINARY_SAME, shl, SH_LEFT)
EW_FOR_UINTS(EW_BINARY_SAME, shr, SH_RIGHT)

static const ew_kernel shl_k[EW_NTYPES] = { EW_TAB_UINTS(shl) };
static const ew_kernel shr_k[EW_NTYPES] = { EW_TAB_UINTS(shr) };

static const char *const bitshift_attrs[] = { "direction", NULL };

/* params i: 0 = LEFT, 1 = RIGHT */
static int bitshift_attr(const struct ew_op *op, const struct ops_call *call,
                         struct ew_params *p, char *err, size_t errlen)
{
        const struct ops_attr *a = ops_attr_find(call, "direction");

        if (!a)
                return ops_fail(err, errlen, -EINVAL, "BitShift: attribute 'direction' is required");
        if (a->type == OPS_ATTR_STRING && a->s && strcmp(a->s, "LEFT") == 0)
                p->i = 0;
        else if (a->type == OPS_ATTR_STRING && a->s && strcmp(a->s, "RIGHT") == 0)
                p->i = 1;
        else if (a->type == OPS_ATTR_INT && (a->i == 0 || a->i == 1))
                p->i = a->i;
        else
                return ops_fail(err, errlen, -EINVAL,
                                "BitShift: attribute 'direction' must be LEFT or RIGHT");
        return 0;
}

static int bitshift_prepare(const struct ew_op *op, const struct ops_call *call,
                            struct ew_plan *pl, char *err, size_t errlen)
{
        pl->k = (pl->p.i ? shr_k : shl_k)[ew_type_of(pl->ct[0])];
        return 0;
}

static const struct ew_op bitshift_op = {
        .name = "BitShift", .min_in = 2, .max_in = 2, .types = EW_UINTS, .same = 3,
        .k = shl_k, .attrs = bitshift_attrs, .attr = bitshift_attr,
        .prepare = bitshift_prepare, .flops = 1,
};

EW_DEFINE(ops_bitshift_def, "BitShift", bitshift_op, 2, 2, OPS_ENGINE_VECTOR, 11)

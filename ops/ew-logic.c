/* Comparisons, logic and selection: Equal, Less, LessOrEqual, Greater, GreaterOrEqual
 * (bool outputs), And, Or, Xor, Not (bool), Where and BitShift.
 *
 * Bools are bytes; any nonzero byte counts as true and results are 0 or 1. float16 and
 * bfloat16 compare through float32, exactly. Where selects by element size (it only moves
 * bits, so every dtype works natively). BitShift by the element width or more gives 0.
 * Its "direction" attribute is the string LEFT or RIGHT; launches over the wire, which
 * cannot carry strings, may give it as an int (0 = LEFT, 1 = RIGHT). */
#include <errno.h>
#include <string.h>

#include "ew.h"

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
EW_DEFINE(ops_equal_def, "Equal", equal_op, 2, 2, OPS_ENGINE_VECTOR, 7)
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

/* Where-16 only added bfloat16. */
EW_DEFINE(ops_where_def, "Where", where_op, 3, 3, OPS_ENGINE_VECTOR, 9)

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

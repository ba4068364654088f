/* Cast for the AI CPU: converts a tensor to the dtype of the output (the conversion itself
 * is convert.c). On the wire the ONNX "to" attribute is optional and, when given, must
 * agree with the output descriptor; in graphs infer takes the dtype from it. The "saturate"
 * attribute only concerns float8 types, which are not supported. The output may start at
 * the input's address even when the sizes differ. */
#include <errno.h>
#include <string.h>

#include "convert.h"
#include "ops-internal.h"

static const char *const cast_attrs[] = { "to", "saturate", NULL };

static int cast_dtype_ok(int dtype)
{
        return ops_convert_dtype_ok(dtype) || dtype == PROTO_DTYPE_STRING;
}

static int cast_check(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        const struct ops_tensor *in = &call->in[0], *out = &call->out[0];
        const struct ops_attr *to;
        char b1[OPS_DTYPE_STR_MAX], b2[OPS_DTYPE_STR_MAX];
        int rc;

        rc = ops_check_common(def, call, cast_attrs, err, errlen);
        if (rc)
                return rc;
        if (!cast_dtype_ok(in->dtype))
                return ops_fail(err, errlen, -EINVAL, "Cast: input 0 has unsupported dtype %s",
                                ops_dtype_str(in->dtype, b1, sizeof(b1)));
        if (!cast_dtype_ok(out->dtype))
                return ops_fail(err, errlen, -EINVAL,
                                "Cast: output 0 has unsupported dtype %s",
                                ops_dtype_str(out->dtype, b1, sizeof(b1)));
        to = ops_attr_find(call, "to");
        if (to && to->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "Cast: attribute 'to' must be an int");
        if (to && to->i != out->dtype)
                return ops_fail(err, errlen, -EINVAL,
                                "Cast: attribute 'to' is %s but output dtype is %s",
                                to->i >= INT32_MIN && to->i <= INT32_MAX ?
                                        ops_dtype_str((int)to->i, b1, sizeof(b1)) : "invalid",
                                ops_dtype_str(out->dtype, b2, sizeof(b2)));
        return ops_check_output(def, call, out->dtype, in, err, errlen);
}

static int cast_run(const struct ops_def *def, const struct ops_call *call, char *err,
                    size_t errlen)
{
        int rc = ops_cast_strings(&call->in[0], &call->out[0], err, errlen);

        if (rc <= 0)
                return rc;
        ops_convert_tensor_opset(&call->in[0], &call->out[0], call->opset);
        return 0;
}

static void cast_cost(const struct ops_def *def, const struct ops_call *call, uint64_t *ret_flops,
                      uint64_t *ret_bytes)
{
        uint64_t n = (uint64_t)ops_tensor_numel(&call->in[0]);

        *ret_flops = n;
        *ret_bytes = ops_mul_sat(n, proto_dtype_size(call->in[0].dtype) +
                                            proto_dtype_size(call->out[0].dtype));
}

/* The output dtype of Cast is its "to" attribute. */
static int cast_infer_to(struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_attr *to = ops_attr_find(call, "to");
        char buf[OPS_DTYPE_STR_MAX];

        if (!to || to->type != OPS_ATTR_INT)
                return ops_fail(err, errlen, -EINVAL, "Cast: attribute 'to' (an int) is required");
        if (to->i < 0 || to->i > INT32_MAX || !cast_dtype_ok((int)to->i))
                return ops_fail(err, errlen, -EINVAL, "Cast: unsupported target dtype %s",
                                to->i >= 0 && to->i <= INT32_MAX ?
                                        ops_dtype_str((int)to->i, buf, sizeof(buf)) : "invalid");
        call->out[0].dtype = (int)to->i;
        return 0;
}

/* Shape of input 0; dtype from "to". */
static int cast_infer(const struct ops_def *def, struct ops_call *call, char *err, size_t errlen)
{
        const struct ops_tensor *in = &call->in[0];
        char buf[OPS_DTYPE_STR_MAX];
        int rc;

        if (call->nin != 1 || call->nout != 1)
                return ops_fail(err, errlen, -EINVAL,
                                "Cast: expected 1 input and 1 output, got %d and %d", call->nin,
                                call->nout);
        if (in->ndim < 0 || in->ndim > OPS_MAX_DIMS)
                return ops_fail(err, errlen, -EINVAL, "Cast: input 0 has invalid rank %d",
                                in->ndim);
        if (!cast_dtype_ok(in->dtype))
                return ops_fail(err, errlen, -EINVAL, "Cast: input 0 has unsupported dtype %s",
                                ops_dtype_str(in->dtype, buf, sizeof(buf)));
        rc = cast_infer_to(call, err, errlen);
        if (rc)
                return rc;
        call->out[0].ndim = in->ndim;
        memcpy(call->out[0].dims, in->dims, (size_t)in->ndim * sizeof(in->dims[0]));
        return 0;
}

/* Cast-6 took 'to' as an int (Cast-1 as a string); later versions only added dtypes. */
const struct ops_def ops_cast_def = {
        .name = "Cast", .min_inputs = 1, .max_inputs = 1, .outputs = 1, .engine = OPS_ENGINE_AICPU,
        .check = cast_check, .run = cast_run, .cost = cast_cost, .flags = OPS_FLAG_ELEMENTWISE,
        .infer = cast_infer, .since_version = 6,
};

/* The ONNX version converter's rules for models of opsets 1 to 8 (see convert-opset.h):
 *
 *   5 -> 6  consumed_inputs (a Caffe2 in-place hint) is dropped from every operator;
 *           Cast-1's "to" names the dtype as a string (the converter lacks this rule;
 *           it maps the names to the codes Cast-6 takes).
 *   3 -> 4  Concat without "axis" gets axis 1.
 *   6 -> 7  Add, Sub, Mul, Div, Pow (and the logical and comparison operators, which
 *           the converter lacks) lose "broadcast" and "axis": without "axis" the old
 *           broadcast matched trailing dimensions, which numpy broadcasting does too; with
 *           it, B lined up with A's dimensions from axis on, so a BroadcastAxis node gives
 *           B trailing dimensions of 1. PRelu-6's slope is per channel (axis 1): a
 *           BroadcastAxis node lines it up the same way.
 *           Upsample-1's height_scale, width_scale and mode "bilinear" become Upsample-7's
 *           scales [1, 1, height_scale, width_scale] and mode "linear".
 *   8 -> 9  BatchNormalization's spatial = 1 is dropped (spatial = 0, statistics per
 *           element, has no current form and is refused).
 *
 * BatchNormalization's and Dropout's is_test stay: their definitions read it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "graph/convert-opset.h"
#include "ops/ops.h"
#include "proto/dtype.h"

static const char *const bcast_ops[] = { "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor",
                                         "Equal", "Greater", "Less", NULL };
/* Operators whose only change before opset 6 is consumed_inputs (or Cast's "to"). */
static const char *const v6_ops[] = { "Relu", "Sigmoid", "Tanh", "Abs", "Ceil", "Floor", "Exp",
                                      "Log", "Neg", "Reciprocal", "Sqrt", "Elu", "LeakyRelu",
                                      "Selu", "HardSigmoid", "Clip", "Sum", "Max", "Min", "Mean",
                                      "Cast", NULL };

static int in_list(const char *const *list, const char *s)
{
        for (; *list; list++)
                if (strcmp(*list, s) == 0)
                        return 1;
        return 0;
}

int convert_opset_version(const char *op_type, int opset)
{
        if (!op_type || opset < 1 || opset >= 7)
                return opset;
        if (in_list(bcast_ops, op_type) || strcmp(op_type, "PRelu") == 0 ||
            strcmp(op_type, "Upsample") == 0)
                return 7;
        if (opset < 6 && in_list(v6_ops, op_type))
                return 6;
        return opset;
}

/* ---- BroadcastAxis: B reshaped to line up with A from axis on ---- */

static int balign_infer(const struct ops_def *def, struct ops_call *call, char *err,
                        size_t errlen)
{
        const struct ops_tensor *a = &call->in[0], *b = &call->in[1];
        int64_t axis = ops_attr_int(call, "axis", 0);
        int i;

        if (axis < 0)
                axis += a->ndim;
        if (ops_tensor_numel(b) == 1) { /* one value broadcasts anywhere as it is */
                call->out[0] = *b;
                call->out[0].data = NULL;
                return 0;
        }
        if (axis < 0 || axis + b->ndim > a->ndim) {
                snprintf(err, errlen,
                         "BroadcastAxis: B of rank %d does not fit A of rank %d from axis %lld "
                         "(the broadcast/axis attributes of opset 6)", b->ndim, a->ndim,
                         (long long)ops_attr_int(call, "axis", 0));
                return -EINVAL;
        }
        for (i = 0; i < b->ndim; i++)
                if (b->dims[i] != 1 && b->dims[i] != a->dims[axis + i]) {
                        snprintf(err, errlen,
                                 "BroadcastAxis: B's dimension %d (%lld) does not match A's "
                                 "dimension %lld (%lld)", i, (long long)b->dims[i],
                                 (long long)(axis + i), (long long)a->dims[axis + i]);
                        return -EINVAL;
                }
        call->out[0] = *b;
        call->out[0].data = NULL;
        call->out[0].ndim = (int)(a->ndim - axis);
        for (i = b->ndim; i < call->out[0].ndim; i++)
                call->out[0].dims[i] = 1;
        return 0;
}

static int balign_run(const struct ops_def *def, const struct ops_call *call, char *err,
                      size_t errlen)
{
        int64_t n = ops_tensor_numel(&call->in[1]);

        if (n > 0)
                memcpy(call->out[0].data, call->in[1].data,
                       (size_t)n * proto_dtype_size(call->in[1].dtype));
        return 0;
}

static void balign_cost(const struct ops_def *def, const struct ops_call *call,
                        uint64_t *ret_flops, uint64_t *ret_bytes)
{
        *ret_flops = 0;
        *ret_bytes = 2 * (uint64_t)ops_tensor_numel(&call->in[1]) *
                     proto_dtype_size(call->in[1].dtype);
}

static const struct ops_def balign_def = {
        .name = "BroadcastAxis", .min_inputs = 2, .max_inputs = 2, .outputs = 1,
        .engine = OPS_ENGINE_VECTOR, .run = balign_run, .cost = balign_cost,
        .infer = balign_infer, .since_version = 1, .domain = "ai.npud.convert",
};

/* ---- attribute edits ---- */

static struct ops_attr *attr_get(struct graph_node *gn, const char *name)
{
        for (int i = 0; i < gn->nattr; i++)
                if (strcmp(gn->attr[i].name, name) == 0)
                        return &gn->attr[i];
        return NULL;
}

static void attr_drop(struct graph_node *gn, const char *name)
{
        for (int i = 0; i < gn->nattr; i++)
                if (strcmp(gn->attr[i].name, name) == 0) {
                        memmove(&gn->attr[i], &gn->attr[i + 1],
                                sizeof(gn->attr[0]) * (size_t)(gn->nattr - i - 1));
                        gn->nattr--;
                        return;
                }
}

/* A fresh attribute slot (the array grows; the graph owns both). */
static struct ops_attr *attr_add(struct graph *g, struct graph_node *gn, const char *name,
                                 int type)
{
        struct ops_attr *a;

        if (gn->nattr >= OPS_MAX_ATTRS)
                return NULL;
        a = graph_alloc(g, sizeof(*a) * (size_t)(gn->nattr + 1));
        if (!a)
                return NULL;
        if (gn->nattr)
                memcpy(a, gn->attr, sizeof(*a) * (size_t)gn->nattr);
        gn->attr = a;
        a = &gn->attr[gn->nattr++];
        memset(a, 0, sizeof(*a));
        snprintf(a->name, sizeof(a->name), "%s", name);
        a->type = type;
        return a;
}

static int fail(char *err, size_t errlen, int rc, const struct graph_node *gn, const char *fmt,
                const char *what)
{
        char label[400];

        graph_node_label(gn, label, sizeof(label));
        snprintf(err, errlen, "%s: ", label);
        snprintf(err + strlen(err), errlen - strlen(err), fmt, what);
        return rc;
}

static int int_attr(const struct ops_attr *a, int64_t *v)
{
        if (!a || a->type != OPS_ATTR_INT)
                return -1;
        *v = a->i;
        return 0;
}

/* Inserts BroadcastAxis(A, B, axis) before node n and makes n read its output as B. */
static int add_broadcast_axis(struct graph *g, int n, int64_t axis, char *err, size_t errlen)
{
        char name[600];
        int m, v, *in, *out;
        struct ops_attr *a;

        snprintf(name, sizeof(name), "%s/broadcast_axis", g->nodes[n].name);
        v = graph_add_value(g, name, GRAPH_VALUE_NODE, 0, -1, NULL);
        if (v == -EEXIST)
                return fail(err, errlen, -EINVAL, &g->nodes[n], "value '%s' already exists", name);
        m = v < 0 ? v : graph_add_node(g, name, "BroadcastAxis", "ai.npud.convert", &balign_def);
        in = graph_alloc(g, 2 * sizeof(int));
        out = graph_alloc(g, sizeof(int));
        a = graph_alloc(g, sizeof(*a));
        if (m < 0 || !in || !out || !a)
                return fail(err, errlen, -ENOMEM, &g->nodes[n], "%s", "out of memory");
        in[0] = g->nodes[n].in[0];
        in[1] = g->nodes[n].in[1];
        out[0] = v;
        snprintf(a->name, sizeof(a->name), "axis");
        a->type = OPS_ATTR_INT;
        a->i = axis;
        g->nodes[m].in = in;
        g->nodes[m].nin = 2;
        g->nodes[m].out = out;
        g->nodes[m].nout = 1;
        g->nodes[m].attr = a;
        g->nodes[m].nattr = 1;
        g->values[v].producer = m;
        g->nodes[n].in[1] = v;
        return 0;
}

static int cast_to_code(const char *s)
{
        static const struct {
                const char *name;
                int code;
        } names[] = {
                { "FLOAT", PROTO_DTYPE_FLOAT32 }, { "UINT8", PROTO_DTYPE_UINT8 },
                { "INT8", PROTO_DTYPE_INT8 },     { "UINT16", PROTO_DTYPE_UINT16 },
                { "INT16", PROTO_DTYPE_INT16 },   { "INT32", PROTO_DTYPE_INT32 },
                { "INT64", PROTO_DTYPE_INT64 },   { "BOOL", PROTO_DTYPE_BOOL },
                { "FLOAT16", PROTO_DTYPE_FLOAT16 }, { "DOUBLE", PROTO_DTYPE_FLOAT64 },
                { "UINT32", PROTO_DTYPE_UINT32 }, { "UINT64", PROTO_DTYPE_UINT64 },
        };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(names[i].name, s) == 0)
                        return names[i].code;
        return 0;
}

int convert_opset_node(struct graph *g, int n, int opset, char *err, size_t errlen)
{
        struct graph_node *gn = &g->nodes[n];
        const char *op = gn->op_type;
        struct ops_attr *a;
        int64_t v;

        if (gn->domain && *gn->domain)
                return 0;
        if (opset >= 1 && opset < 6)
                attr_drop(gn, "consumed_inputs");
        if (opset >= 1 && opset < 6 && strcmp(op, "Cast") == 0) {
                a = attr_get(gn, "to");
                if (a && a->type == OPS_ATTR_STRING) {
                        int code = a->s ? cast_to_code(a->s) : 0;

                        if (!code)
                                return fail(err, errlen, -EINVAL, gn,
                                            "Cast-1: unknown target type '%s'", a->s ? a->s : "");
                        a->type = OPS_ATTR_INT;
                        a->i = code;
                        a->s = NULL;
                }
        }
        if (opset >= 1 && opset < 4 && strcmp(op, "Concat") == 0 && !attr_get(gn, "axis")) {
                a = attr_add(g, gn, "axis", OPS_ATTR_INT);
                if (!a)
                        return fail(err, errlen, -ENOMEM, gn, "%s", "out of memory");
                a->i = 1;
        }
        if (opset >= 1 && opset < 7 && in_list(bcast_ops, op)) {
                int64_t bcast = 0, axis = 0;
                int has_axis = int_attr(attr_get(gn, "axis"), &axis) == 0;

                if (attr_get(gn, "broadcast") && int_attr(attr_get(gn, "broadcast"), &bcast))
                        return fail(err, errlen, -EINVAL, gn, "attribute '%s' must be an int",
                                    "broadcast");
                if (attr_get(gn, "axis") && !has_axis)
                        return fail(err, errlen, -EINVAL, gn, "attribute '%s' must be an int",
                                    "axis");
                attr_drop(gn, "broadcast");
                attr_drop(gn, "axis");
                if (bcast && has_axis && gn->nin == 2 && gn->in[0] >= 0 && gn->in[1] >= 0)
                        return add_broadcast_axis(g, n, axis, err, errlen);
                return 0;
        }
        /* PRelu-6's slope holds one value or one per channel (axis 1), as the converter's
         * PRelu 6 -> 7 rule has it; PRelu-7 broadcasts from the last axis. */
        if (opset >= 1 && opset < 7 && strcmp(op, "PRelu") == 0 && gn->nin == 2 &&
            gn->in[0] >= 0 && gn->in[1] >= 0)
                return add_broadcast_axis(g, n, 1, err, errlen);
        if (opset >= 1 && opset < 7 && strcmp(op, "Upsample") == 0 && !attr_get(gn, "scales")) {
                double h = 1, w = 1;
                float *s;

                a = attr_get(gn, "height_scale");
                if (a)
                        h = a->type == OPS_ATTR_FLOAT ? a->f : (double)a->i;
                a = attr_get(gn, "width_scale");
                if (a)
                        w = a->type == OPS_ATTR_FLOAT ? a->f : (double)a->i;
                attr_drop(gn, "height_scale");
                attr_drop(gn, "width_scale");
                a = attr_get(gn, "mode");
                if (a && a->type == OPS_ATTR_STRING && a->s && strcmp(a->s, "bilinear") == 0)
                        a->s = "linear";
                s = graph_alloc(g, 4 * sizeof(float));
                a = s ? attr_add(g, gn, "scales", OPS_ATTR_FLOATS) : NULL;
                if (!a)
                        return fail(err, errlen, -ENOMEM, gn, "%s", "out of memory");
                s[0] = s[1] = 1;
                s[2] = (float)h;
                s[3] = (float)w;
                a->n = 4;
                a->floats = s;
                return 0;
        }
        if (opset >= 1 && opset < 9 && strcmp(op, "BatchNormalization") == 0 &&
            (a = attr_get(gn, "spatial"))) {
                if (int_attr(a, &v) || v != 1)
                        return fail(err, errlen, -EINVAL, gn, "%s",
                                    "spatial = 0 (statistics per element) is not supported");
                attr_drop(gn, "spatial");
        }
        return 0;
}

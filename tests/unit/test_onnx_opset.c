/* What the importer and the operators do according to the opset a model declares, on small
 * hand-built models run through the registry: Cast/CastLike to bfloat16 truncating in
 * models of opset 17 and older and rounding after, and graph inputs whose data no node reads
 * (CastLike's "like") accepting any shape of their dtype. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "proto/dtype.h"
#include "proto/errors.h"

/* ---- building models: every allocation is kept until the model is packed ---- */

static void *keep[1024];
static int nkeep;

static void *K(size_t n)
{
        void *p = calloc(1, n ? n : 1);

        ck_assert_ptr_nonnull(p);
        ck_assert_int_lt(nkeep, 1024);
        keep[nkeep++] = p;
        return p;
}

static void keep_free(void)
{
        while (nkeep)
                free(keep[--nkeep]);
}

static void **list(int n, ...)
{
        void **v = K(sizeof(void *) * (size_t)(n ? n : 1));
        va_list ap;

        va_start(ap, n);
        for (int i = 0; i < n; i++)
                v[i] = va_arg(ap, void *);
        va_end(ap);
        return v;
}

/* A tensor value; ndim < 0: no shape. */
static Onnx__ValueInfoProto *tvalue(const char *name, int dtype, int ndim, const int64_t *dims)
{
        Onnx__ValueInfoProto *vi = K(sizeof(*vi));
        Onnx__TypeProto *tp = K(sizeof(*tp));
        Onnx__TypeProto__Tensor *tt = K(sizeof(*tt));

        onnx__value_info_proto__init(vi);
        onnx__type_proto__init(tp);
        onnx__type_proto__tensor__init(tt);
        vi->name = (char *)name;
        vi->type = tp;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        tt->has_elem_type = 1;
        tt->elem_type = dtype;
        if (ndim >= 0) {
                Onnx__TensorShapeProto *sh = K(sizeof(*sh));

                onnx__tensor_shape_proto__init(sh);
                tt->shape = sh;
                sh->n_dim = (size_t)ndim;
                sh->dim = K(sizeof(*sh->dim) * (size_t)(ndim ? ndim : 1));
                for (int i = 0; i < ndim; i++) {
                        Onnx__TensorShapeProto__Dimension *d = K(sizeof(*d));

                        onnx__tensor_shape_proto__dimension__init(d);
                        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                        d->dim_value = dims[i];
                        sh->dim[i] = d;
                }
        }
        return vi;
}

static Onnx__NodeProto *node(const char *op, int nin, const char *const *in, int nout,
                             const char *const *out)
{
        Onnx__NodeProto *n = K(sizeof(*n));

        onnx__node_proto__init(n);
        n->op_type = (char *)op;
        n->n_input = (size_t)nin;
        n->input = K(sizeof(char *) * (size_t)(nin ? nin : 1));
        memcpy(n->input, in, sizeof(char *) * (size_t)nin);
        n->n_output = (size_t)nout;
        n->output = K(sizeof(char *) * (size_t)nout);
        memcpy(n->output, out, sizeof(char *) * (size_t)nout);
        return n;
}

static void node_attr(Onnx__NodeProto *n, Onnx__AttributeProto *a)
{
        Onnx__AttributeProto **v = K(sizeof(*v) * (n->n_attribute + 1));

        memcpy(v, n->attribute, sizeof(*v) * n->n_attribute);
        v[n->n_attribute++] = a;
        n->attribute = v;
}

static void attr_i(Onnx__NodeProto *n, const char *name, int64_t i)
{
        Onnx__AttributeProto *a = K(sizeof(*a));

        onnx__attribute_proto__init(a);
        a->name = (char *)name;
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = i;
        node_attr(n, a);
}

__attribute__((unused)) static void attr_f(Onnx__NodeProto *n, const char *name, float f)
{
        Onnx__AttributeProto *a = K(sizeof(*a));

        onnx__attribute_proto__init(a);
        a->name = (char *)name;
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        a->has_f = 1;
        a->f = f;
        node_attr(n, a);
}

__attribute__((unused)) static void attr_ints(Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v)
{
        Onnx__AttributeProto *a = K(sizeof(*a));

        onnx__attribute_proto__init(a);
        a->name = (char *)name;
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a->n_ints = (size_t)cnt;
        a->ints = K(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
        memcpy(a->ints, v, sizeof(int64_t) * (size_t)cnt);
        node_attr(n, a);
}

/* A float32 initializer. */
__attribute__((unused)) static Onnx__TensorProto *finit(const char *name, int ndim, const int64_t *dims, int n,
                                const float *v)
{
        Onnx__TensorProto *t = K(sizeof(*t));

        onnx__tensor_proto__init(t);
        t->name = (char *)name;
        t->has_data_type = 1;
        t->data_type = PROTO_DTYPE_FLOAT32;
        t->n_dims = (size_t)ndim;
        t->dims = K(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
        memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
        t->n_float_data = (size_t)n;
        t->float_data = K(sizeof(float) * (size_t)n);
        memcpy(t->float_data, v, sizeof(float) * (size_t)n);
        return t;
}

struct model {
        int opset;
        int nnode, nin, nout, ninit;
        Onnx__NodeProto *nodes[8];
        Onnx__ValueInfoProto *in[8], *out[8];
        Onnx__TensorProto *init[8];
};

/* Packs m and imports it with the registry's operators; 0 or the import's error. */
static int import(const struct model *mm, struct graph **ret, char *err, size_t errlen)
{
        Onnx__ModelProto *m = K(sizeof(*m));
        Onnx__OperatorSetIdProto *o = K(sizeof(*o));
        Onnx__GraphProto *g = K(sizeof(*g));
        uint8_t *buf;
        size_t len;
        int rc;

        onnx__model_proto__init(m);
        onnx__operator_set_id_proto__init(o);
        onnx__graph_proto__init(g);
        o->domain = (char *)"";
        o->has_version = 1;
        o->version = mm->opset;
        m->n_opset_import = 1;
        m->opset_import = (Onnx__OperatorSetIdProto **)list(1, o);
        g->n_node = (size_t)mm->nnode;
        g->node = (Onnx__NodeProto **)mm->nodes;
        g->n_input = (size_t)mm->nin;
        g->input = (Onnx__ValueInfoProto **)mm->in;
        g->n_output = (size_t)mm->nout;
        g->output = (Onnx__ValueInfoProto **)mm->out;
        g->n_initializer = (size_t)mm->ninit;
        g->initializer = (Onnx__TensorProto **)mm->init;
        m->graph = g;
        len = onnx__model_proto__get_packed_size(m);
        buf = malloc(len);
        ck_assert_ptr_nonnull(buf);
        onnx__model_proto__pack(m, buf);
        keep_free();
        rc = onnx_import(buf, len, NULL, ret, err, errlen);
        free(buf);
        return rc;
}

static struct ops_tensor tens(int dtype, void *data, int ndim, ...)
{
        struct ops_tensor t = { .dtype = dtype, .ndim = ndim, .data = data };
        va_list ap;

        va_start(ap, ndim);
        for (int i = 0; i < ndim; i++)
                t.dims[i] = va_arg(ap, int64_t);
        va_end(ap);
        return t;
}

/* ---- bfloat16 ---- */

/* y = Cast(x, to=bfloat16) and z = CastLike(x, like) at the given opset. */
static struct graph *bf16_model(int opset)
{
        static const int64_t d4[] = { 4 }, d23[] = { 2, 3 };
        struct model m = { .opset = opset };
        struct graph *g;
        char err[512];

        m.nodes[m.nnode] = node("Cast", 1, (const char *[]){ "x" }, 1, (const char *[]){ "y" });
        attr_i(m.nodes[m.nnode++], "to", PROTO_DTYPE_BFLOAT16);
        m.nodes[m.nnode++] = node("CastLike", 2, (const char *[]){ "x", "like" }, 1,
                                  (const char *[]){ "z" });
        m.in[m.nin++] = tvalue("x", PROTO_DTYPE_FLOAT32, 1, d4);
        m.in[m.nin++] = tvalue("like", PROTO_DTYPE_BFLOAT16, 2, d23);
        m.out[m.nout++] = tvalue("y", PROTO_DTYPE_BFLOAT16, 1, d4);
        m.out[m.nout++] = tvalue("z", PROTO_DTYPE_BFLOAT16, 1, d4);
        ck_assert_msg(import(&m, &g, err, sizeof(err)) == 0, "%s", err);
        return g;
}

START_TEST(test_bf16_by_opset)
{
        /* 0x3ef5e000 lies above the midpoint of 0x3ef5 and 0x3ef6; 0x3f808000 is a tie */
        uint32_t bits[4] = { 0x3ef5e000, 0x3f808000, 0x7fc00001, 0xbf7fffff };
        float x[4];
        uint16_t like = 0, y[4], z[4];
        static const uint16_t trunc[4] = { 0x3ef5, 0x3f80, 0x7fc0, 0xbf7f };
        static const uint16_t rne[4] = { 0x3ef6, 0x3f80, 0x7fc0, 0xbf80 };
        struct ops_tensor in[2], out[2];
        char err[512];

        memcpy(x, bits, sizeof(x));
        for (int opset = 17; opset <= 18; opset++) {
                struct graph *g = bf16_model(opset);
                const uint16_t *want = opset == 17 ? trunc : rne;

                /* "like" is declared [2,3]: only its dtype matters, any shape binds */
                in[0] = tens(PROTO_DTYPE_FLOAT32, x, 1, (int64_t)4);
                in[1] = tens(PROTO_DTYPE_BFLOAT16, &like, 1, (int64_t)1);
                out[0] = tens(PROTO_DTYPE_BFLOAT16, y, 1, (int64_t)4);
                out[1] = tens(PROTO_DTYPE_BFLOAT16, z, 1, (int64_t)4);
                ck_assert_msg(graph_check_inputs(g, 2, in, err, sizeof(err)) == 0, "%s", err);
                ck_assert_msg(graph_exec(g, 2, in, 2, out, err, sizeof(err)) == 0, "%s", err);
                for (int i = 0; i < 4; i++) {
                        ck_assert_msg(y[i] == want[i], "opset %d Cast [%d]: %#x, want %#x",
                                      opset, i, y[i], want[i]);
                        ck_assert_msg(z[i] == want[i], "opset %d CastLike [%d]: %#x, want %#x",
                                      opset, i, z[i], want[i]);
                }
                /* the dtype still binds */
                in[1].dtype = PROTO_DTYPE_FLOAT16;
                ck_assert_int_ne(graph_check_inputs(g, 2, in, err, sizeof(err)), 0);
                ck_assert_msg(strstr(err, "input 'like' is bfloat16"), "%s", err);
                /* an input whose data is read keeps its shape */
                in[1].dtype = PROTO_DTYPE_BFLOAT16;
                in[0].dims[0] = 3;
                ck_assert_int_ne(graph_check_inputs(g, 2, in, err, sizeof(err)), 0);
                ck_assert_msg(strstr(err, "input 'x' has shape [4]"), "%s", err);
                graph_free(g);
        }
}
END_TEST

int main(void)
{
        Suite *s = suite_create("onnx_opset");
        TCase *tc = tcase_create("onnx_opset");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_bf16_by_opset);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

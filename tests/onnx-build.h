/* Building ONNX models by hand in tests, for the unit tests of the importer and the
 * integration tests through npud: every allocation is kept (K) until the model is packed
 * and keep_free() is called. Header-only; a test program includes it once. A program that
 * is not a Check test (a bench) defines ONNX_BUILD_ASSERT(cond) before including it: Check's
 * asserts report to a test runner and exit without one. */
#ifndef NPUD_TESTS_ONNX_BUILD_H
#define NPUD_TESTS_ONNX_BUILD_H

#ifndef ONNX_BUILD_ASSERT
#include <check.h>
#define ONNX_BUILD_ASSERT(cond) ck_assert(cond)
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

static void *keep[1024];
static int nkeep;

static __attribute__((unused)) void *K(size_t n)
{
        void *p = calloc(1, n ? n : 1);

        ONNX_BUILD_ASSERT(p != NULL);
        ONNX_BUILD_ASSERT(nkeep < 1024);
        keep[nkeep++] = p;
        return p;
}

static __attribute__((unused)) void keep_free(void)
{
        while (nkeep)
                free(keep[--nkeep]);
}

static __attribute__((unused)) void **list(int n, ...)
{
        void **v = K(sizeof(void *) * (size_t)(n ? n : 1));
        va_list ap;

        va_start(ap, n);
        for (int i = 0; i < n; i++)
                v[i] = va_arg(ap, void *);
        va_end(ap);
        return v;
}

/* A tensor value; ndim < 0: no shape; an extent < 0: open. */
static __attribute__((unused)) Onnx__ValueInfoProto *tvalue(const char *name, int dtype, int ndim,
                                                            const int64_t *dims)
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
                        if (dims[i] < 0) { /* open */
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                                d->dim_param = (char *)"n";
                        } else {
                                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                                d->dim_value = dims[i];
                        }
                        sh->dim[i] = d;
                }
        }
        return vi;
}

static __attribute__((unused)) Onnx__NodeProto *node(const char *op, int nin, const char *const *in, int nout,
                             const char *const *out)
{
        Onnx__NodeProto *n = K(sizeof(*n));

        onnx__node_proto__init(n);
        n->op_type = (char *)op;
        n->n_input = (size_t)nin;
        n->input = K(sizeof(char *) * (size_t)(nin ? nin : 1));
        if (nin)
                memcpy(n->input, in, sizeof(char *) * (size_t)nin);
        n->n_output = (size_t)nout;
        n->output = K(sizeof(char *) * (size_t)nout);
        memcpy(n->output, out, sizeof(char *) * (size_t)nout);
        return n;
}

static __attribute__((unused)) void node_attr(Onnx__NodeProto *n, Onnx__AttributeProto *a)
{
        Onnx__AttributeProto **v = K(sizeof(*v) * (n->n_attribute + 1));

        if (n->n_attribute) /* memcpy from a NULL array is undefined even for 0 bytes */
                memcpy(v, n->attribute, sizeof(*v) * n->n_attribute);
        v[n->n_attribute++] = a;
        n->attribute = v;
}

/* A new attribute of n (appended to its list) named name, of type type, to fill in. */
static __attribute__((unused)) Onnx__AttributeProto *attr_add(Onnx__NodeProto *n, const char *name, int type)
{
        Onnx__AttributeProto *a = K(sizeof(*a));

        onnx__attribute_proto__init(a);
        a->name = (char *)name;
        a->has_type = 1;
        a->type = type;
        node_attr(n, a);
        return a;
}

static __attribute__((unused)) void attr_i(Onnx__NodeProto *n, const char *name, int64_t i)
{
        Onnx__AttributeProto *a = attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

        a->has_i = 1;
        a->i = i;
}

static __attribute__((unused)) void attr_f(Onnx__NodeProto *n, const char *name, float f)
{
        Onnx__AttributeProto *a = attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

        a->has_f = 1;
        a->f = f;
}

static __attribute__((unused)) void attr_ints(Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v)
{
        Onnx__AttributeProto *a = attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

        a->n_ints = (size_t)cnt;
        a->ints = K(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
        memcpy(a->ints, v, sizeof(int64_t) * (size_t)cnt);
}

static __attribute__((unused)) void attr_s(Onnx__NodeProto *n, const char *name, const char *v)
{
        Onnx__AttributeProto *a = attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

        a->has_s = 1;
        a->s.data = (uint8_t *)v;
        a->s.len = strlen(v);
}

static __attribute__((unused)) void attr_strings(Onnx__NodeProto *n, const char *name, int cnt,
                                                 const char *const *v)
{
        Onnx__AttributeProto *a = attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);

        a->n_strings = (size_t)cnt;
        a->strings = K(sizeof(*a->strings) * (size_t)(cnt ? cnt : 1));
        for (int i = 0; i < cnt; i++) {
                a->strings[i].data = (uint8_t *)v[i];
                a->strings[i].len = strlen(v[i]);
        }
}

/* A string tensor [cnt] (an initializer, or an attribute's value) named name. */
static __attribute__((unused)) Onnx__TensorProto *str_tensor(const char *name, int cnt, const char *const *v)
{
        Onnx__TensorProto *c = K(sizeof(*c));

        onnx__tensor_proto__init(c);
        c->name = (char *)name;
        c->has_data_type = 1;
        c->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
        c->n_dims = 1;
        c->dims = K(sizeof(int64_t));
        c->dims[0] = cnt;
        c->n_string_data = (size_t)cnt;
        c->string_data = K(sizeof(*c->string_data) * (size_t)(cnt ? cnt : 1));
        for (int i = 0; i < cnt; i++) {
                c->string_data[i].data = (uint8_t *)v[i];
                c->string_data[i].len = strlen(v[i]);
        }
        return c;
}

/* An empty graph to fill in (kept like everything else). */
/* A float32 initializer of the given shape over n = prod(dims) values at v (kept, not copied:
 * K-allocated by the caller). */
static __attribute__((unused)) Onnx__TensorProto *finit_data(const char *name, int ndim, const int64_t *dims,
                                                             float *v)
{
        Onnx__TensorProto *t = K(sizeof(*t));
        int64_t n = 1;

        for (int i = 0; i < ndim; i++)
                n *= dims[i];
        onnx__tensor_proto__init(t);
        t->name = (char *)name;
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->n_dims = (size_t)ndim;
        t->dims = K(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
        if (ndim)
                memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
        t->n_float_data = (size_t)n;
        t->float_data = v;
        return t;
}

static __attribute__((unused)) Onnx__GraphProto *graph_proto(void)
{
        Onnx__GraphProto *g = K(sizeof(*g));

        onnx__graph_proto__init(g);
        return g;
}

/* The model of graph g importing the default domain at opset, packed into a malloc'd buffer
 * of *ret_len bytes; everything kept so far is freed. */
static __attribute__((unused)) uint8_t *model_pack(Onnx__GraphProto *g, int opset, size_t *ret_len)
{
        Onnx__ModelProto *m = K(sizeof(*m));
        Onnx__OperatorSetIdProto *o = K(sizeof(*o));
        uint8_t *buf;

        onnx__model_proto__init(m);
        onnx__operator_set_id_proto__init(o);
        o->domain = (char *)"";
        o->has_version = 1;
        o->version = opset;
        m->n_opset_import = 1;
        m->opset_import = (Onnx__OperatorSetIdProto **)list(1, o);
        m->graph = g;
        *ret_len = onnx__model_proto__get_packed_size(m);
        buf = malloc(*ret_len);
        ONNX_BUILD_ASSERT(buf != NULL);
        onnx__model_proto__pack(m, buf);
        keep_free();
        return buf;
}

/* Y = X + W0 + W1 + ... as a chain of ninit Adds (T0, T1, ... between them) over X float
 * [nelem], every Wi an initializer of its own (all holding j % wmod at j): a model of ninit *
 * nelem * 4 bytes of weights, for what a large graph_load costs. Packed at opset 13 like
 * model_pack (everything kept so far is freed). */
static __attribute__((unused)) uint8_t *add_chain_model(int nelem, int ninit, int wmod, size_t *ret_len)
{
        const int64_t dims[1] = { nelem };
        Onnx__GraphProto *g = graph_proto();
        float *w = K(sizeof(float) * (size_t)nelem);
        const char *prev = "X";

        for (int j = 0; j < nelem; j++)
                w[j] = (float)(j % wmod);
        g->n_node = g->n_initializer = (size_t)ninit;
        g->node = K(sizeof(*g->node) * (size_t)ninit);
        g->initializer = K(sizeof(*g->initializer) * (size_t)ninit);
        for (int i = 0; i < ninit; i++) {
                Onnx__TensorProto *t = K(sizeof(*t));
                char *wn = K(16), *tn = K(16);

                snprintf(wn, 16, "W%d", i);
                snprintf(tn, 16, i == ninit - 1 ? "Y" : "T%d", i);
                onnx__tensor_proto__init(t);
                t->name = wn;
                t->has_data_type = 1;
                t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
                t->n_dims = 1;
                t->dims = K(sizeof(int64_t));
                t->dims[0] = nelem;
                t->has_raw_data = 1; /* every initializer points at the same bytes until packed */
                t->raw_data.len = sizeof(float) * (size_t)nelem;
                t->raw_data.data = (uint8_t *)w;
                g->initializer[i] = t;
                g->node[i] = node("Add", 2, (const char *const[]){ prev, wn }, 1, (const char *const[]){ tn });
                prev = tn;
        }
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("X", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, dims));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("Y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, dims));
        return model_pack(g, 13, ret_len);
}

#endif

/* A small MLP in ONNX, built with protobuf-c, for tests and benchmarks of the graph paths
 * (test_host_run, npubench's serve section):
 *   inputs  X float32 [B,K], W float32 [K,M], C float32 [M]
 *   outputs Y = X·W + C float32 [B,M], Z = Relu(Y) float32 [?,M] (the batch left open)
 * mlp_model returns the model's bytes (malloc'd), NULL when out of memory. */
#ifndef NPU_TESTS_MODEL_MLP_H
#define NPU_TESTS_MODEL_MLP_H

#include <stdint.h>
#include <stdlib.h>

#include <onnx.pb-c.h>

struct mlp_value {
        Onnx__ValueInfoProto vi;
        Onnx__TypeProto tp;
        Onnx__TypeProto__Tensor tt;
        Onnx__TensorShapeProto sh;
        Onnx__TensorShapeProto__Dimension d[2], *dp[2];
};

/* dim -1: an open extent. */
static inline void mlp_value_init(struct mlp_value *v, const char *name, int ndim, int64_t d0, int64_t d1)
{
        int64_t dims[2] = { d0, d1 };

        onnx__value_info_proto__init(&v->vi);
        onnx__type_proto__init(&v->tp);
        onnx__type_proto__tensor__init(&v->tt);
        onnx__tensor_shape_proto__init(&v->sh);
        v->vi.name = (char *)name;
        v->vi.type = &v->tp;
        v->tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        v->tp.tensor_type = &v->tt;
        v->tt.has_elem_type = 1;
        v->tt.elem_type = 1; /* float32 */
        v->tt.shape = &v->sh;
        for (int i = 0; i < ndim; i++) {
                onnx__tensor_shape_proto__dimension__init(&v->d[i]);
                if (dims[i] >= 0) {
                        v->d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                        v->d[i].dim_value = dims[i];
                } else {
                        v->d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                        v->d[i].dim_param = (char *)"N";
                }
                v->dp[i] = &v->d[i];
        }
        v->sh.n_dim = (size_t)ndim;
        v->sh.dim = v->dp;
}

static inline uint8_t *mlp_model(int64_t b, int64_t k, int64_t m, size_t *ret_len)
{
        Onnx__ModelProto mp;
        Onnx__GraphProto g;
        Onnx__OperatorSetIdProto o, *ops[1] = { &o };
        Onnx__NodeProto n[3], *np[3] = { &n[0], &n[1], &n[2] };
        struct mlp_value vx, vw, vc, vy, vz;
        Onnx__ValueInfoProto *in[3] = { &vx.vi, &vw.vi, &vc.vi }, *out[2] = { &vy.vi, &vz.vi };
        char *n0in[2] = { (char *)"X", (char *)"W" }, *n0out[1] = { (char *)"H" };
        char *n1in[2] = { (char *)"H", (char *)"C" }, *n1out[1] = { (char *)"Y" };
        char *n2in[1] = { (char *)"Y" }, *n2out[1] = { (char *)"Z" };
        char **nin[3] = { n0in, n1in, n2in }, **nout[3] = { n0out, n1out, n2out };
        const char *optype[3] = { "MatMul", "Add", "Relu" };
        uint8_t *bytes;
        size_t len;

        onnx__model_proto__init(&mp);
        onnx__graph_proto__init(&g);
        onnx__operator_set_id_proto__init(&o);
        o.domain = (char *)"";
        o.has_version = 1;
        o.version = 13;
        mp.has_ir_version = 1;
        mp.ir_version = 8;
        mp.n_opset_import = 1;
        mp.opset_import = ops;
        mp.graph = &g;
        g.name = (char *)"mlp";
        mlp_value_init(&vx, "X", 2, b, k);
        mlp_value_init(&vw, "W", 2, k, m);
        mlp_value_init(&vc, "C", 1, m, 0);
        mlp_value_init(&vy, "Y", 2, b, m);
        mlp_value_init(&vz, "Z", 2, -1, m);
        for (int i = 0; i < 3; i++) {
                onnx__node_proto__init(&n[i]);
                n[i].op_type = (char *)optype[i];
                n[i].n_input = i == 2 ? 1 : 2;
                n[i].input = nin[i];
                n[i].n_output = 1;
                n[i].output = nout[i];
        }
        g.n_input = 3;
        g.input = in;
        g.n_output = 2;
        g.output = out;
        g.n_node = 3;
        g.node = np;
        len = onnx__model_proto__get_packed_size(&mp);
        bytes = malloc(len);
        if (bytes && onnx__model_proto__pack(&mp, bytes) != len) {
                free(bytes);
                return NULL;
        }
        *ret_len = len;
        return bytes;
}

/* The reference: y = x·w + c, z = relu(y), row-major. */
static inline void mlp_reference(const float *x, const float *w, const float *c, int64_t b, int64_t k,
                                 int64_t m, float *y, float *z)
{
        for (int64_t i = 0; i < b; i++)
                for (int64_t j = 0; j < m; j++) {
                        float acc = 0;
                        for (int64_t p = 0; p < k; p++)
                                acc += x[i * k + p] * w[p * m + j];
                        y[i * m + j] = acc + c[j];
                        z[i * m + j] = y[i * m + j] > 0 ? y[i * m + j] : 0;
                }
}

#endif

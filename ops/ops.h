/* Operator registry: what an operator accepts, how its outputs are checked, what it costs and
 * the kernel that computes it. Kernels run on backend worker threads and touch nothing but
 * the tensors of their call; check and cost run on the loop thread before submission. */
#ifndef NPUD_OPS_H
#define NPUD_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/dtype.h"

#define OPS_MAX_DIMS 8
#define OPS_MAX_INPUTS 16
#define OPS_MAX_OUTPUTS 8
#define OPS_MAX_ATTRS 24
#define OPS_NAME_MAX 32

enum ops_engine {
        OPS_ENGINE_CUBE = 0,   /* matrix unit of the AI core */
        OPS_ENGINE_VECTOR = 1, /* vector unit */
        OPS_ENGINE_AICPU = 2,  /* general-purpose device CPU */
        OPS_ENGINE_DMA = 3,    /* copy engines (no operator kernels) */
        OPS_ENGINE_COUNT
};

struct ops_tensor {
        int dtype; /* enum proto_dtype; 0 = an omitted optional input or output */
        int ndim;  /* 0 = scalar */
        int64_t dims[OPS_MAX_DIMS];
        void *data; /* resolved device pointer; NULL while checking */
};

/* Launches over the wire carry INT and FLOAT attributes only; graphs (ONNX models) carry
 * every kind. Arrays and strings are owned by the graph and outlive the call. */
enum ops_attr_type {
        OPS_ATTR_INT = 1,
        OPS_ATTR_FLOAT = 2,
        OPS_ATTR_INTS = 3,
        OPS_ATTR_FLOATS = 4,
        OPS_ATTR_STRING = 5,
        OPS_ATTR_TENSOR = 6,
        OPS_ATTR_GRAPH = 7,
        OPS_ATTR_STRINGS = 8,
        /* Internal to the graph compiler (graph/compile*.c): a structure in .graph that only
         * the definition that made it reads (a fused node's chain). Never from the wire or a
         * model, and not freed as a subgraph. */
        OPS_ATTR_OPAQUE = 9,
};

struct ops_attr {
        char name[OPS_NAME_MAX];
        int type; /* enum ops_attr_type */
        int64_t i;
        double f;
        int n;                        /* elements of ints / floats / strings */
        const int64_t *ints;
        const float *floats;
        const char *s;
        const char *const *strings;
        const struct ops_tensor *t;   /* TENSOR: dtype, dims and data */
        const void *graph;            /* GRAPH: a subgraph, run through call->graph_run */
};

struct ops_call;

/* Run a subgraph attribute (If, Loop, Scan): inputs bound to the graph's inputs; outputs
 * allocated by the executor (ops_buf_alloc'd data, charged to the run's byte budget, that the
 * caller frees with ops_buf_free(); see runctx.h). */
typedef int (*ops_graph_run_fn)(void *graph_ctx, const void *graph, int nin,
                                const struct ops_tensor *in, int *ret_nout,
                                struct ops_tensor *out, int max_out, char *err, size_t errlen);

struct ops_call {
        int nin, nout, nattr;
        struct ops_tensor in[OPS_MAX_INPUTS];
        struct ops_tensor out[OPS_MAX_OUTPUTS];
        struct ops_attr attr[OPS_MAX_ATTRS];
        int opset;               /* the model's default-domain opset; 0 for wire launches */
        ops_graph_run_fn graph_run; /* NULL outside graphs */
        void *graph_ctx;
};

struct ops_def {
        const char *name;         /* "Add", "MatMul", ... (ONNX op type) */
        int min_inputs, max_inputs;
        int outputs;              /* most outputs; trailing optional ones may be absent */
        enum ops_engine engine;   /* the engine kind its kernel targets */
        /* Every hook receives its own definition first, so that one function can serve
         * several definitions (opset versions, operator families). */
        /* Validate dtypes, shapes and attributes of a call whose data pointers are NULL.
         * Returns 0, or -EINVAL with a message naming what is wrong written to err. NULL:
         * ops_check_by_infer (see ops_check()). */
        int (*check)(const struct ops_def *def, const struct ops_call *call, char *err,
                     size_t errlen);
        /* Compute. Called only for calls that passed check. 0 or -errno with a message. */
        int (*run)(const struct ops_def *def, const struct ops_call *call, char *err,
                   size_t errlen);
        /* Work estimate for the cost model: floating/integer operations and bytes moved. */
        void (*cost)(const struct ops_def *def, const struct ops_call *call,
                     uint64_t *ret_flops, uint64_t *ret_bytes);
        unsigned flags; /* enum ops_flags */
        /* Output dtypes and shapes from the inputs (whose data is readable) and attributes;
         * data-dependent shapes (Reshape, NonZero, ...) read the inputs. 0 or -errno with a
         * message naming the op. NULL: the op cannot be used in graphs. */
        int (*infer)(const struct ops_def *def, struct ops_call *call, char *err,
                     size_t errlen);
        int since_version; /* first ONNX opset this definition implements (0 = any) */
        const char *domain; /* NULL = the default ONNX domain ("" / "ai.onnx") */
        /* Attribute names the default check accepts (NULL-terminated); NULL: it leaves
         * attribute names to infer. */
        const char *const *attrs;
        /* The elementwise engine's description of the operator (ops/ew.h), NULL for any
         * other: what ops_ew_direct_init reads. */
        const void *ew;
};

enum ops_flags {
        /* out[i] depends only on in[*][i] (after broadcasting): a call can be split into
         * element ranges (tiles) when every input has the output's element count or one. */
        OPS_FLAG_ELEMENTWISE = 1 << 0,
        /* a 2-D MatMul-like call can be split into row blocks of input 0 and the output */
        OPS_FLAG_ROW_SPLIT = 1 << 1,
        /* takes sequence and empty-optional values (PROTO_DTYPE_SEQUENCE, _OPTIONAL_NONE) as
         * inputs; the executor refuses them to every other operator */
        OPS_FLAG_VALUES = 1 << 2,
};

/* The registry: every definition of the families below, in a fixed order, indexed once
 * (ops_registry_init, run by pthread_once; every function here calls it, so explicit calls
 * are optional). A definition's registry id is its position: stable for the lifetime of the
 * process (not across builds), below ops_count() and below 65536, so it fits the uint16_t
 * that wire launches carry to name an operator without a string lookup. */
void ops_registry_init(void);
size_t ops_count(void);
/* The definition with registry id id; NULL past the end. O(1). */
const struct ops_def *ops_by_id(size_t id);
/* The registry id of def; ops_count() for a definition not in the registry. O(1). */
size_t ops_id(const struct ops_def *def);
/* Same as ops_id (the name per-operator tables use). */
size_t ops_index(const struct ops_def *def);
/* Iterate the registry: the i-th operator or NULL past the end (same as ops_by_id). */
const struct ops_def *ops_get(size_t i);

/* Lookup by exact name in the default domain (wire launches): the newest definition of the
 * name; NULL when unknown. O(1) on average. */
const struct ops_def *ops_lookup(const char *name);
/* ONNX lookup: the definition of (domain, name) with the highest since_version <= opset that
 * has an infer. domain NULL or "" or "ai.onnx" is the default domain. O(1) on average. */
const struct ops_def *ops_lookup_onnx(const char *domain, const char *name, int opset);

/* The one check through infer, used for every definition whose check is NULL: input and
 * output counts (trailing outputs may be absent, dtype 0), attribute names against
 * def->attrs when set, every tensor's rank, dims and size, then infer on a copy of the call
 * and every output given compared with what infer gives. */
int ops_check_by_infer(const struct ops_def *def, const struct ops_call *call, char *err,
                       size_t errlen);

/* Calling a definition's hooks: check falls back to ops_check_by_infer. */
static inline int ops_check(const struct ops_def *def, const struct ops_call *call, char *err,
                            size_t errlen)
{
        return def->check ? def->check(def, call, err, errlen)
                          : ops_check_by_infer(def, call, err, errlen);
}

static inline int ops_run(const struct ops_def *def, const struct ops_call *call, char *err,
                          size_t errlen)
{
        return def->run(def, call, err, errlen);
}

static inline int ops_infer(const struct ops_def *def, struct ops_call *call, char *err,
                            size_t errlen)
{
        return def->infer(def, call, err, errlen);
}

static inline void ops_cost(const struct ops_def *def, const struct ops_call *call,
                            uint64_t *ret_flops, uint64_t *ret_bytes)
{
        def->cost(def, call, ret_flops, ret_bytes);
}

/* An elementwise call prepared once for direct kernel calls on contiguous runs, as a fused
 * chain runs its blocks: what ops_run does on every call (attributes, the dtype's kernel,
 * the operator's own preparation) done once by ops_ew_direct_init, after which
 * ops_ew_direct_run runs the same kernel on runs of the caller's choice, each element's
 * result bit for bit what ops_run gives it. Opaque: ops_ew_direct_size bytes (8-aligned). */
struct ops_ew_direct;
size_t ops_ew_direct_size(void);
/* 0 when the call (its data pointers may be NULL) can run directly: an elementwise operator
 * whose present inputs and output are all float32 or all float64, none converted or
 * substituted by the operator's preparation; 1 otherwise (run it with ops_run). */
int ops_ew_direct_init(const struct ops_def *def, const struct ops_call *call, struct ops_ew_direct *d);
/* n outputs at out from input k at in[k][i * st[k]], st[k] 1 (contiguous) or 0 (one
 * element); out must not overlap any input. */
void ops_ew_direct_run(const struct ops_ew_direct *d, void *out, const void *const *in, const int64_t *st,
                       int64_t n);

/* Attribute lookup helpers; return the default when the attribute is absent. */
int64_t ops_attr_int(const struct ops_call *call, const char *name, int64_t def);
double ops_attr_float(const struct ops_call *call, const char *name, double def);

/* Number of elements of a tensor (1 for a scalar); -1 if it overflows int64 or a dim < 0. */
int64_t ops_tensor_numel(const struct ops_tensor *t);

/* ONNX multidirectional broadcasting of a and b into ret (ret->dtype untouched).
 * Returns 0 or -EINVAL with a message. */
int ops_broadcast_shape(const struct ops_tensor *a, const struct ops_tensor *b,
                        struct ops_tensor *ret, char *err, size_t errlen);

/* IEEE half <-> single conversions (round to nearest even). */
float ops_half_to_float(uint16_t h);
uint16_t ops_float_to_half(float f);

/* Limit the threads a kernel library (OpenBLAS) may start from one kernel. */
void ops_set_threads(int n);

#endif

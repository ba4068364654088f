/* ONNX model import: a serialized ModelProto (the bytes of a .onnx file) becomes a graph
 * (graph.h) whose nodes are bound to the operator registry. Everything that would stop the
 * model from running is found here, before anything runs: malformed or truncated protobuf,
 * operators the registry lacks (all of them, in one message), wrong input or output counts,
 * undefined values, cycles, tensors whose dimensions overflow, external or sparse data. */
#ifndef NPUD_ONNX_IMPORT_H
#define NPUD_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/* What the importer asks of its caller; any member may be NULL.
 *
 * alloc: where the tensor data of a model (initializers and tensor attributes, of the graph
 * and its subgraphs, GRAPH_ALIGN-aligned) goes. Called at most once, after the model has been
 * checked, with the total size (> 0); returns 0 with *ret set, or a PROTO_E_* code (QUOTA,
 * NO_MEMORY, ...) with a message. The importer does not free that memory; on a failure after
 * alloc the caller releases it. NULL: malloc'd, owned by the graph.
 *
 * lookup: the operator definition for (domain, op_type) at the version the model imports for
 * the domain, NULL when unsupported. NULL: the registry (ops_lookup_onnx). */
struct onnx_import_env {
        int (*alloc)(void *ctx, uint64_t size, void **ret, char *err, size_t errlen);
        const struct ops_def *(*lookup)(void *ctx, const char *domain, const char *op_type,
                                        int version);
        void *ctx;
};

/* Largest model accepted (the daemon's limit for graph_load). */
#define ONNX_MAX_MODEL_BYTES (1ull << 30)
/* opset_import entries a model may list (each node's domain is looked up among them). */
#define ONNX_MAX_OPSET_IMPORTS 256

/* Import the model in data[0..len); env may be NULL (see above). 0 with *ret set, or a
 * PROTO_E_* code (INVALID for a malformed model, UNSUPPORTED for unknown operators or types,
 * SHAPE for impossible dimensions, or alloc's code) with a message that names the node,
 * value or tensor at fault. */
int onnx_import(const void *data, size_t len, const struct onnx_import_env *env,
                struct graph **ret, char *err, size_t errlen);

#endif

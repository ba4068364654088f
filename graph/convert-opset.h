/* Models of old opsets (1 to 8) converted on import to the operators' current form, with
 * the rules of the ONNX version converter (onnx/version_converter/convert.h) written here:
 * the importer looks an old node's operator up at the version the rules lead to, then lets
 * convert_opset_node rewrite its attributes and, where broadcasting along an axis needs it,
 * add a node aligning the second operand. */
#ifndef NPUD_GRAPH_CONVERT_OPSET_H
#define NPUD_GRAPH_CONVERT_OPSET_H

#include <stddef.h>

#include "graph/graph.h"

/* The opset at which to look up op_type (default domain) of a model declaring opset: the
 * version after the breaking changes the rules undo, opset itself when none apply. */
int convert_opset_version(const char *op_type, int opset);

/* Rewrite node n of g, imported from a model declaring opset, to the form of the definition
 * convert_opset_version chose. 0, or -EINVAL (what cannot be converted) / -ENOMEM with a
 * message naming the node. */
int convert_opset_node(struct graph *g, int n, int opset, char *err, size_t errlen);

#endif

//===- SchemaArity.h - A node's input and output counts against its schema -===//
//
// The importer checks every node of a domain onnx defines (ai.onnx,
// ai.onnx.ml, ai.onnx.preview.training) against onnx's operator schema
// before its handler runs: the number of inputs and outputs, and that no
// required input is omitted. A handler then never reads past the inputs
// the node has (reliability findings 9 and 14 were handlers that did).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_SCHEMAARITY_H
#define KILN_LIB_FRONTEND_ONNX_SCHEMAARITY_H

#include <cstdint>
#include <string>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace kiln::onnx_frontend {

/// Checks `node` against onnx's schema of its op type at `opset` in its
/// domain. Returns an empty string when it conforms or when onnx has no
/// schema for it (com.microsoft's ops, an unknown op: the handler lookup
/// reports those), else the reason, one line, e.g. "expects 1 to 3 inputs,
/// got 4 (onnx's Clip-13)".
std::string checkSchemaArity(const onnx::NodeProto &node, int64_t opset);

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_SCHEMAARITY_H

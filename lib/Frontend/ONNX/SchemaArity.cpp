//===- SchemaArity.cpp - A node's input and output counts against its schema ===//
//
// Compiled with -fexceptions (lib/Frontend/ONNX/CMakeLists.txt): onnx's
// schema headers throw from inline code. Nothing here throws: the lookups
// and the accessors only read the registry.
//
//===----------------------------------------------------------------------===//

#include "SchemaArity.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <limits>

namespace kiln::onnx_frontend {

namespace {

std::string range(int min, int max) {
  if (min == max)
    return std::to_string(min);
  if (max == std::numeric_limits<int>::max())
    return "at least " + std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

} // namespace

std::string checkSchemaArity(const onnx::NodeProto &node, int64_t opset) {
  // com.microsoft's ops have no schema in libonnx (onnxruntime defines
  // them), nor do ops onnx does not know.
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(opset), domain);
  if (!schema)
    return "";
  // Debian's libonnx (1.12) knows opsets up to 17 (ai.onnx.ml 3): past
  // that, a newer version of the op may take more inputs or outputs than
  // the schema found, so only its minimum is checked.
  const auto &known =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range_ = known.find(domain);
  bool newer = range_ == known.end() || opset > range_->second.second;
  // The one op whose minimum a later version lowered (in onnx 1.17's
  // schemas, through opset 22: test/Frontend/ONNX/schema_lowerings.py
  // lists them): OptionalHasElement-18 made its input optional.
  if (newer && domain.empty() && node.op_type() == "OptionalHasElement")
    return "";
  std::string name = node.op_type() + "-" +
                     std::to_string(schema->SinceVersion());
  int inputs = node.input_size(), outputs = node.output_size();
  int maxInputs = newer ? std::numeric_limits<int>::max() : schema->max_input();
  int maxOutputs =
      newer ? std::numeric_limits<int>::max() : schema->max_output();
  if (inputs < schema->min_input() || inputs > maxInputs)
    return "expects " + range(schema->min_input(), maxInputs) +
           " inputs, got " + std::to_string(inputs) + " (onnx's " + name + ")";
  if (outputs < schema->min_output() || outputs > maxOutputs)
    return "expects " + range(schema->min_output(), maxOutputs) +
           " outputs, got " + std::to_string(outputs) + " (onnx's " + name +
           ")";
  // An omitted ("") input must be an optional one. Inputs past the formal
  // list belong to its last, variadic, parameter.
  const auto &formal = schema->inputs();
  int checked = newer ? std::min(inputs, schema->min_input()) : inputs;
  for (int i = 0; i < checked; ++i) {
    if (!node.input(i).empty() || formal.empty())
      continue;
    const auto &param = formal[std::min<size_t>(i, formal.size() - 1)];
    if (param.GetOption() != onnx::OpSchema::Optional)
      return "required input " + std::to_string(i) + " ('" +
             param.GetName() + "' of " + name + ") is omitted";
  }
  return "";
}

} // namespace kiln::onnx_frontend

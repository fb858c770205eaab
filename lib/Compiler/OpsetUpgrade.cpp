//===- OpsetUpgrade.cpp - Raise a model's opset with onnx's converter -----===//
//
// Compiled with -fexceptions (lib/Compiler/CMakeLists.txt): onnx's version
// converter and shape inference throw on what they cannot convert.
//
//===----------------------------------------------------------------------===//

#include "OpsetUpgrade.h"

#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <exception>
#include <set>
#include <string>

namespace kiln {

bool upgradeOpset(onnx::ModelProto &model, int version, std::string &error) {
  try {
    // The converter's graph only knows initializers that are also graph
    // inputs (IR version 3's rule): list them as inputs for the
    // conversion, and take them out again after.
    onnx::ModelProto listed = model;
    onnx::GraphProto &graph = *listed.mutable_graph();
    std::set<std::string> inputs, added;
    for (const onnx::ValueInfoProto &v : graph.input())
      inputs.insert(v.name());
    for (const onnx::TensorProto &t : graph.initializer()) {
      if (inputs.count(t.name()))
        continue;
      onnx::ValueInfoProto *v = graph.add_input();
      v->set_name(t.name());
      auto *type = v->mutable_type()->mutable_tensor_type();
      type->set_elem_type(t.data_type());
      for (int64_t d : t.dims())
        type->mutable_shape()->add_dim()->set_dim_value(d);
      added.insert(t.name());
    }
    onnx::ModelProto converted =
        onnx::version_conversion::ConvertVersion(listed, version);
    auto *convertedInputs = converted.mutable_graph()->mutable_input();
    convertedInputs->erase(
        std::remove_if(convertedInputs->begin(), convertedInputs->end(),
                       [&](const onnx::ValueInfoProto &v) {
                         return added.count(v.name()) != 0;
                       }),
        convertedInputs->end());
    model = std::move(converted);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
  } catch (...) {
    error = "unknown failure";
  }
  // One line: the converter's messages may span several.
  for (char &c : error)
    if (c == '\n' || c == '\r')
      c = ' ';
  return false;
}

} // namespace kiln

//===- OpsetUpgrade.cpp - Raise a model's opset with onnx's converter -----===//
//
// Compiled with -fexceptions (lib/Compiler/CMakeLists.txt): onnx's version
// converter and shape inference throw on what they cannot convert.
//
//===----------------------------------------------------------------------===//

#include "OpsetUpgrade.h"

#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>

#include <exception>

namespace kiln {

bool upgradeOpset(onnx::ModelProto &model, int version, std::string &error) {
  try {
    onnx::ModelProto converted =
        onnx::version_conversion::ConvertVersion(model, version);
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

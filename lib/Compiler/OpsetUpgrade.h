//===- OpsetUpgrade.h - Raise a model's opset with onnx's converter -------===//
//
// kilnc --precision=int8 writes per-channel DequantizeLinear (opset 13); an
// older model is raised first with onnx's own version converter
// (onnx::version_conversion::ConvertVersion, libonnx from Debian), as
// onnxruntime's quantizer does. The converter reports failures by
// throwing, so OpsetUpgrade.cpp alone is compiled with exceptions and
// turns them into a message.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_OPSETUPGRADE_H
#define KILN_LIB_COMPILER_OPSETUPGRADE_H

#include <string>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace kiln {

/// Converts `model` in place to default-domain opset `version`. On failure
/// returns false, `error` says why, and `model` is unchanged.
bool upgradeOpset(onnx::ModelProto &model, int version, std::string &error);

} // namespace kiln

#endif // KILN_LIB_COMPILER_OPSETUPGRADE_H

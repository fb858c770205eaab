//===- HostNodes.cpp - Which ONNX nodes the host runs ---------------------===//
//
// The rules HostPartition.cpp and HostLabelEncoders.cpp share: the ops the
// host runs, the runtime dtype of an ONNX element type, and how a node is
// named in errors.
//
//===----------------------------------------------------------------------===//

#include "HostNodes.h"

using namespace mlir;

namespace kiln::onnx_frontend::host {

bool isStringOnlyOp(StringRef op) {
  return op == "StringConcat" || op == "StringSplit" ||
         op == "RegexFullMatch" || op == "StringNormalizer";
}

bool isHostCapableOp(const onnx::NodeProto &node) {
  StringRef op = node.op_type();
  if (node.domain() == kMLDomain)
    return op == "LabelEncoder";
  return isStringOnlyOp(op) || op == "Cast" || op == "CastLike" ||
         op == "Identity" || op == "Equal" || op == "Reshape" ||
         op == "Squeeze" || op == "Unsqueeze" || op == "Constant" ||
         op == "Gather" || op == "Transpose" || op == "Slice" ||
         op == "Compress" || op == "Unique";
}

bool isDefaultDomain(const onnx::NodeProto &node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

bool isDataDependentOp(const onnx::NodeProto &node) {
  StringRef op = node.op_type();
  return isDefaultDomain(node) &&
         (op == "NonZero" || op == "Compress" || op == "Unique" ||
          op == "NonMaxSuppression");
}

bool isHostNumericOp(const onnx::NodeProto &node) {
  StringRef op = node.op_type();
  return isDataDependentOp(node) ||
         (isDefaultDomain(node) &&
          (op == "Gather" || op == "Transpose" || op == "Slice" ||
           op == "Cast" || op == "Identity" || op == "Reshape" ||
           op == "Squeeze" || op == "Unsqueeze"));
}

/// The runtime dtype of an ONNX element type the host handles.
std::optional<rt::DType> runtimeDType(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return rt::DType::F32;
  case onnx::TensorProto::DOUBLE:
    return rt::DType::F64;
  case onnx::TensorProto::FLOAT16:
    return rt::DType::F16;
  case onnx::TensorProto::BFLOAT16:
    return rt::DType::BF16;
  case onnx::TensorProto::INT8:
    return rt::DType::I8;
  case onnx::TensorProto::INT16:
    return rt::DType::I16;
  case onnx::TensorProto::INT32:
    return rt::DType::I32;
  case onnx::TensorProto::INT64:
    return rt::DType::I64;
  case onnx::TensorProto::UINT8:
    return rt::DType::U8;
  case onnx::TensorProto::UINT16:
    return rt::DType::U16;
  case onnx::TensorProto::UINT32:
    return rt::DType::U32;
  case onnx::TensorProto::UINT64:
    return rt::DType::U64;
  case onnx::TensorProto::BOOL:
    return rt::DType::Bool;
  default:
    return std::nullopt;
  }
}

std::string describeNode(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return "node '" + node.name() + "' (" + node.op_type() + ")";
  return "unnamed node producing '" +
         (node.output_size() ? node.output(0) : std::string()) + "' (" +
         node.op_type() + ")";
}

} // namespace kiln::onnx_frontend::host

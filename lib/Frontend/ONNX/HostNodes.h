//===- HostNodes.h - Which ONNX nodes the host runs -------------*- C++ -*-===//
//
// Internal to the ONNX frontend: what HostPartition.cpp (the split into a
// device graph and a host program), HostNodes.cpp (the rules) and
// HostLabelEncoders.cpp (LabelEncoder's forms and splits) share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HOSTNODES_H
#define KILN_LIB_FRONTEND_ONNX_HOSTNODES_H

#include "kiln/runtime/HostSteps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace kiln::onnx_frontend::host {

namespace rt = kiln::runtime;

constexpr int32_t kOnnxString = onnx::TensorProto::STRING;
constexpr const char *kMLDomain = "ai.onnx.ml";

/// The ONNX element type of a value by name, 0 when unknown.
using TypeOf = llvm::function_ref<int32_t(llvm::StringRef)>;

/// Ops that exist only for strings (StringConcat, StringSplit,
/// RegexFullMatch, StringNormalizer).
bool isStringOnlyOp(llvm::StringRef op);

/// Ops the host runs when they touch a STRING tensor (the string ops,
/// Cast, CastLike, Identity, Equal, Reshape, Squeeze, Unsqueeze, Constant,
/// Gather, Transpose, Slice, Compress, Unique, and ai.onnx.ml's
/// LabelEncoder).
bool isHostCapableOp(const onnx::NodeProto &node);

/// Whether the node is of ONNX's default domain ("" or "ai.onnx").
bool isDefaultDomain(const onnx::NodeProto &node);

/// Ops whose output shape depends on their data (NonZero, Compress,
/// Unique, NonMaxSuppression): host nodes unless the data is constant.
bool isDataDependentOp(const onnx::NodeProto &node);

/// Ops the host runs on numbers, when they read a host node's result: the
/// data-dependent ones, Gather, Transpose, Slice, Cast, Identity, Reshape,
/// Squeeze and Unsqueeze.
bool isHostNumericOp(const onnx::NodeProto &node);

/// The runtime dtype of an ONNX element type the host handles.
std::optional<rt::DType> runtimeDType(int32_t onnxType);

/// "node 'n' (Op)", or "unnamed node producing 'y' (Op)".
std::string describeNode(const onnx::NodeProto &node);

/// The ONNX element type of LabelEncoder's values (values_strings,
/// values_int64s, values_floats or values_tensor), 0 when it has none.
int32_t labelEncoderValueType(const onnx::NodeProto &node);

/// LabelEncoder's attributes in the one form the host step takes
/// (runtime/lib/HostStringOps.cpp), added to `step`; on failure `error`
/// names the node.
mlir::LogicalResult labelEncoderAttributes(const onnx::NodeProto &node,
                                           int64_t mlOpset, TypeOf typeOf,
                                           llvm::StringRef baseDir,
                                           mlir::MLIRContext &context,
                                           rt::HostStep &step,
                                           std::string &error);

/// Splits each LabelEncoder from numbers to strings and each
/// TreeEnsembleClassifier with string labels into a device lookup of
/// positions and host steps from positions to strings. Returns whether
/// any node was split.
bool splitLabelEncoders(onnx::GraphProto &graph, TypeOf typeOf);

} // namespace kiln::onnx_frontend::host

#endif // KILN_LIB_FRONTEND_ONNX_HOSTNODES_H

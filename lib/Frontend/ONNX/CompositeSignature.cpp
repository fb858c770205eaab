//===- CompositeSignature.cpp - Sequence and optional graph inputs --------===//
//
// Plans how a sequence or optional graph input becomes tensors, and records
// the grouping for the artifact (CompositeSignature.h). Lengths and
// presence are compile-time facts: an ML engineer who exports a model with
// a list input knows how long the list is when deploying it, and a fixed
// count keeps the memory plan static (docs/architecture.md).
//
//===----------------------------------------------------------------------===//

#include "CompositeSignature.h"

#include "llvm/ADT/Twine.h"

using namespace mlir;

namespace kiln::onnx_frontend {

std::string sequenceElementName(llvm::StringRef name, size_t index) {
  return (name + "[" + llvm::Twine(index) + "]").str();
}

namespace {

/// What a TypeProto is, for messages.
std::string describeType(const onnx::TypeProto &type) {
  if (type.has_tensor_type())
    return "a tensor";
  if (type.has_sequence_type())
    return "a sequence";
  if (type.has_optional_type())
    return "an optional";
  if (type.has_map_type())
    return "a map";
  if (type.has_sparse_tensor_type())
    return "a sparse tensor";
  return "untyped";
}

} // namespace

FailureOr<GraphInputPlan> planGraphInput(const onnx::ValueInfoProto &input,
                                         const ImportOptions &options,
                                         MLIRContext *context,
                                         std::string &error) {
  const std::string &name = input.name();
  const onnx::TypeProto &type = input.type();
  auto fail = [&](const llvm::Twine &message) {
    error = message.str();
    return failure();
  };
  GraphInputPlan plan;
  if (type.has_tensor_type()) {
    plan.tensors.push_back({name, &type.tensor_type(), ""});
    return plan;
  }
  const onnx::TypeProto *inner = &type;
  if (type.has_optional_type()) {
    inner = &type.optional_type().elem_type();
    if (!inner->has_tensor_type() && !inner->has_sequence_type())
      return fail("input '" + name + "' is an optional of " +
                  describeType(*inner) +
                  " (only optionals of tensors and of sequences of tensors "
                  "are supported)");
    plan.groupKind =
        inner->has_sequence_type() ? "optional-sequence" : "optional";
    plan.present = !options.absentInputs.contains(name);
  } else if (type.has_sequence_type()) {
    plan.groupKind = "sequence";
  } else {
    return fail("input '" + name + "' is " + describeType(type) +
                " (graph inputs may be tensors, sequences of tensors and "
                "optionals of either)");
  }
  const onnx::TypeProto *tensorType = inner;
  if (inner->has_sequence_type()) {
    tensorType = &inner->sequence_type().elem_type();
    if (!tensorType->has_tensor_type())
      return fail("input '" + name + "' is a sequence of " +
                  describeType(*tensorType) +
                  " (only sequences of tensors are supported)");
  }
  int32_t onnxElementType = tensorType->tensor_type().elem_type();
  plan.elementType = convertElementType(onnxElementType, context);
  if (!plan.elementType)
    return fail("input '" + name + "' has unsupported element type " +
                onnxTypeName(onnxElementType));
  auto length = options.sequenceLengths.find(name);
  if (!plan.present) {
    if (length != options.sequenceLengths.end())
      return fail("input '" + name + "': --sequence " + name + "=" +
                  llvm::Twine(length->second) + " and --absent " + name +
                  " contradict each other");
    return plan;
  }
  if (!inner->has_sequence_type()) {
    if (length != options.sequenceLengths.end())
      return fail("--sequence names '" + name +
                  "', an optional of a tensor, not a sequence");
    plan.tensors.push_back({name, &tensorType->tensor_type(), ""});
    return plan;
  }
  if (length == options.sequenceLengths.end())
    return fail("input '" + name +
                "' is a sequence of unknown length: give "
                "it with --sequence " +
                name +
                "=N (its tensors become "
                "inputs " +
                name + "[0] ... " + name + "[N-1]" +
                (plan.groupKind == "optional-sequence"
                     ? std::string(", or --absent ") + name
                     : std::string()) +
                ")");
  for (int64_t i = 0; i < length->second; ++i)
    plan.tensors.push_back(
        {sequenceElementName(name, i), &tensorType->tensor_type(), name});
  return plan;
}

CompositeValue compositeForInput(const GraphInputPlan &plan,
                                 ArrayRef<Value> values) {
  CompositeValue value;
  value.kind = plan.groupKind == "optional" || !plan.present
                   ? CompositeValue::Kind::Optional
                   : CompositeValue::Kind::Sequence;
  value.elements.assign(values.begin(), values.end());
  if (value.elements.empty())
    value.elementType = plan.elementType;
  return value;
}

std::string outputGroupKind(const onnx::ValueInfoProto &output,
                            const CompositeValue *composite) {
  const onnx::TypeProto &type = output.type();
  if (type.has_optional_type())
    return type.optional_type().elem_type().has_sequence_type() ||
                   (composite &&
                    composite->kind == CompositeValue::Kind::Sequence)
               ? "optional-sequence"
               : "optional";
  if (!composite)
    return "";
  return composite->kind == CompositeValue::Kind::Sequence ? "sequence"
                                                           : "optional";
}

DictionaryAttr signatureGroup(Builder &b, StringRef name, StringRef kind,
                              bool present, ArrayRef<std::string> elements) {
  SmallVector<Attribute> names;
  for (const std::string &element : elements)
    names.push_back(b.getStringAttr(element));
  return b.getDictionaryAttr({
      b.getNamedAttr("name", b.getStringAttr(name)),
      b.getNamedAttr("kind", b.getStringAttr(kind)),
      b.getNamedAttr("present", b.getBoolAttr(present)),
      b.getNamedAttr("elements", b.getArrayAttr(names)),
  });
}

LogicalResult checkCompositeFlags(const ImportOptions &options,
                                  const llvm::StringMap<std::string> &planned,
                                  std::string &error) {
  for (const auto &entry : options.sequenceLengths) {
    auto it = planned.find(entry.getKey());
    if (it == planned.end() || it->second == "optional") {
      error = "--sequence names '" + entry.getKey().str() +
              "', which is not a sequence graph input";
      return failure();
    }
  }
  for (const auto &entry : options.absentInputs) {
    auto it = planned.find(entry.getKey());
    if (it == planned.end() || it->second == "sequence") {
      error = "--absent names '" + entry.getKey().str() +
              "', which is not an optional graph input";
      return failure();
    }
  }
  return success();
}

} // namespace kiln::onnx_frontend

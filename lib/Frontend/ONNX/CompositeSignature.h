//===- CompositeSignature.h - Sequence and optional graph inputs -*- C++
//-*-===//
//
// The runtime binds tensors only, so a sequence or optional graph input or
// output becomes a fixed number of tensors at compile time: a sequence of N
// (kilnc --sequence NAME=N) is N tensors NAME[0] ... NAME[N-1]; an optional
// is compiled present (its tensor or sequence) or absent (kilnc --absent
// NAME: no tensor). Inside the graph they are CompositeValues again. The
// grouping is recorded on the module (kSignatureGroupsAttrName) for the
// artifact's signature groups.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_COMPOSITESIGNATURE_H
#define KILN_LIB_FRONTEND_ONNX_COMPOSITESIGNATURE_H

#include "NodeImporter.h"
#include "kiln/Frontend/ONNX/Importer.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kiln::onnx_frontend {

/// How one graph input becomes tensor inputs.
struct GraphInputPlan {
  struct Tensor {
    /// Its name in the flat signature (NAME, or NAME[i] in a sequence).
    std::string name;
    const onnx::TypeProto::Tensor *type = nullptr;
    /// For a sequence element: the sequence's name, whose --shape applies
    /// when the element's own is not given.
    std::string shapeFallback;
  };
  llvm::SmallVector<Tensor> tensors;
  /// "" for a tensor input; "sequence", "optional" or "optional-sequence".
  std::string groupKind;
  bool present = true;
  /// The element type of the sequence or optional (for an absent one, which
  /// has no tensor to tell).
  mlir::Type elementType;
};

/// Plans graph input `input` under the user's --sequence and --absent.
/// Fails with a one-line `error` naming the input and the flag to use.
llvm::FailureOr<GraphInputPlan>
planGraphInput(const onnx::ValueInfoProto &input, const ImportOptions &options,
               mlir::MLIRContext *context, std::string &error);

/// The composite value a planned input is inside the graph, its tensors
/// being `values` (one per plan.tensors entry).
CompositeValue compositeForInput(const GraphInputPlan &plan,
                                 llvm::ArrayRef<mlir::Value> values);

/// The group kind of graph output `output` whose value is `composite` (null
/// for a tensor): "" when it is a plain tensor output.
std::string outputGroupKind(const onnx::ValueInfoProto &output,
                            const CompositeValue *composite);

/// One entry of kSignatureGroupsAttrName.
mlir::DictionaryAttr signatureGroup(mlir::Builder &b, llvm::StringRef name,
                                    llvm::StringRef kind, bool present,
                                    llvm::ArrayRef<std::string> elements);

/// Fails with `error` when --sequence or --absent names no input they apply
/// to (`planned`: the sequence and optional inputs, by name, with their
/// group kind).
llvm::LogicalResult
checkCompositeFlags(const ImportOptions &options,
                    const llvm::StringMap<std::string> &planned,
                    std::string &error);

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_COMPOSITESIGNATURE_H

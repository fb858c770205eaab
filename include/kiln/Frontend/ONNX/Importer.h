//===- Importer.h - ONNX model to kiln IR -------------------------*- C++
//-*-===//
//
// The public entry point of the ONNX frontend. It reads an .onnx file (and
// the external-data files next to it), fixes unknown dimensions from the
// user's shapes, and returns a module holding `func.func @main` in the kiln
// dialect with weights as `ml_program.global` resource blobs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_ONNX_IMPORTER_H
#define KILN_FRONTEND_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir

namespace kiln::onnx_frontend {

/// The range of a symbolic dimension (kilnc --dim NAME=MIN..MAX[:OPT]): the
/// sizes the artifact must accept, and the one to tune for.
struct DimRange {
  int64_t min = 1, max = 1, opt = 1;
};

struct ImportOptions {
  /// Shapes for graph inputs, by name; they fix dimensions the model leaves
  /// symbolic and must agree with the ones it fixes. A -1 entry with a name
  /// in `inputDimNames` makes that dim symbolic under the name.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Per input given in `inputShapes`: the name of each dim given as a name
  /// (--shape x=Nx3x224x224), empty for the numeric ones.
  llvm::StringMap<llvm::SmallVector<std::string>> inputDimNames;
  /// Ranges of symbolic dims by name: the model's dim_params and the names
  /// --shape gives. Every symbolic dim needs one. The module is compiled at
  /// each range's maximum, and records the ranges (`kiln.dim_ranges` on the
  /// module, `kiln.symbolic_dims` on each argument).
  llvm::StringMap<DimRange> dimRanges;
  /// Initializers with at most this many elements become inline
  /// `kiln.constant`s (so shape arithmetic folds); larger ones become globals.
  int64_t inlineConstantLimit = 64;
  /// Float initializers become globals whatever their size (training: every
  /// float initializer is a parameter that may train, biases included).
  bool floatInitializersAsGlobals = false;
  /// Training-mode Dropout with a non-zero ratio becomes kiln.dropout (its
  /// mask is drawn in train_step); without it, such a node is an error.
  bool trainingDropout = false;
  /// When set, receives each initializer that became an inline constant
  /// (name and value): it cannot be rebound in the artifact, which records
  /// it so that binding new weights can check it is unchanged.
  std::vector<std::pair<std::string, mlir::DenseElementsAttr>>
      *inlinedInitializers = nullptr;
  /// Receives the importer's warnings (one line each, naming the file and
  /// the tensor): a declared output shape that differs from the inferred
  /// one. Dropped when unset.
  std::function<void(const std::string &message)> warning;
};

/// Registers the dialects the importer produces.
void registerImportDialects(mlir::DialectRegistry &registry);

/// Imports the model at `path`. Errors are one line: the file, then the node
/// (name and op type) or tensor at fault, then what is wrong.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModelFile(llvm::StringRef path, mlir::MLIRContext &context,
                const ImportOptions &options);

/// One row of the supported-op table: an ONNX op type, the opset version its
/// handler starts at, the op family, and what the handler does not support.
struct SupportedOp {
  std::string opType;
  int sinceVersion;
  std::string family;
  std::string limits;
};

/// Every (op type, since-version) the importer has a handler for, sorted.
std::vector<SupportedOp> listSupportedOps();

/// The newest default-domain opset the handlers are written against.
int maxSupportedOpset();
/// The oldest default-domain opset the importer accepts.
int minSupportedOpset();

} // namespace kiln::onnx_frontend

#endif // KILN_FRONTEND_ONNX_IMPORTER_H

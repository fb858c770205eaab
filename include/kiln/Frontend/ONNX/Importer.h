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
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir
namespace kiln::runtime {
struct HostProgram;
} // namespace kiln::runtime

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
  /// kilnc --sequence NAME=N: the length of a sequence graph input (or of
  /// the sequence inside an optional one). ONNX types carry no length, so
  /// every sequence input needs one; it becomes N tensor inputs named
  /// NAME[0] ... NAME[N-1], whose shapes come from the sequence's element
  /// type, `--shape NAME=...` (every element) or `--shape NAME[i]=...`.
  llvm::StringMap<int64_t> sequenceLengths;
  /// kilnc --absent NAME: optional graph inputs compiled absent (no tensor);
  /// the others are compiled present.
  llvm::StringSet<> absentInputs;
  /// Initializers with at most this many elements become inline
  /// `kiln.constant`s (so shape arithmetic folds); larger ones become globals.
  int64_t inlineConstantLimit = 64;
  /// Float initializers become globals whatever their size (training: every
  /// float initializer is a parameter that may train, biases included).
  bool floatInitializersAsGlobals = false;
  /// Training-mode Dropout with a non-zero ratio becomes kiln.dropout (its
  /// mask is drawn in train_step); without it, such a node is an error.
  bool trainingDropout = false;
  /// RNN, GRU and LSTM layers whose sizes are static become one
  /// kiln.recurrence per direction (a persistent kernel); without it, and
  /// for the layers it does not take, the time loop is unrolled into kiln
  /// ops (what training differentiates).
  bool persistentRecurrence = false;
  /// When set, receives each initializer that became an inline constant
  /// (name and value): it cannot be rebound in the artifact, which records
  /// it so that binding new weights can check it is unchanged.
  std::vector<std::pair<std::string, mlir::DenseElementsAttr>>
      *inlinedInitializers = nullptr;
  /// Receives the importer's warnings (one line each, naming the file and
  /// the tensor): a declared output shape that differs from the inferred
  /// one. Dropped when unset.
  std::function<void(const std::string &message)> warning;
  /// When set, nodes on STRING tensors are moved out of the graph into
  /// this host program (kiln/runtime/HostSteps.h) before import; when null,
  /// a STRING tensor is an error, as for any unsupported type.
  runtime::HostProgram *hostProgram = nullptr;
};

/// The module attribute that records how sequence and optional graph inputs
/// and outputs became tensors: {inputs = [...], outputs = [...]}, each entry
/// {name, kind = "sequence" | "optional" | "optional-sequence", present,
/// elements = [tensor names]} (CompositeSignature.cpp). The compiler turns
/// it into the artifact's signature groups. A plain string, not a dialect
/// attribute helper: only the importer writes it and only compileModel
/// reads it, before any pass runs.
inline constexpr llvm::StringLiteral kSignatureGroupsAttrName =
    "kiln.signature_groups";

/// The name of tensor `index` of sequence `name` in the flat signature.
std::string sequenceElementName(llvm::StringRef name, size_t index);

/// Registers the dialects the importer produces.
void registerImportDialects(mlir::DialectRegistry &registry);

/// Imports the model at `path`. Errors are one line: the file, then the node
/// (name and op type) or tensor at fault, then what is wrong.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModelFile(llvm::StringRef path, mlir::MLIRContext &context,
                const ImportOptions &options);

/// Imports the model held in `bytes` (the fuzz target's entry point, and
/// anything that has the model in memory): as importModelFile, with `path`
/// naming the model in errors and locating its external-data files (their
/// directory is path's).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModelBuffer(llvm::StringRef bytes, llvm::StringRef path,
                  mlir::MLIRContext &context, const ImportOptions &options);

/// `text` with each control character (newline, tab, DEL, ...) written as
/// \xNN: names in a model are bytes from the file, and an error or warning
/// quoting one must stay one line.
std::string escapeControlCharacters(llvm::StringRef text);

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

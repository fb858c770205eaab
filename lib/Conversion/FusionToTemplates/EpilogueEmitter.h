//===- EpilogueEmitter.h - A fusion region's epilogue as CUDA C++ -*- C++ -*-===//
//
// The elementwise ops that follow a contraction in a kiln.fusion region run
// on each accumulator in registers, inside the template kernel. This turns
// them into the statements of the template's custom epilogue: one float
// variable per value, region inputs read through extra pointer parameters at
// the index their broadcast gives, constants as literals.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_EPILOGUEEMITTER_H
#define KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_EPILOGUEEMITTER_H

#include "kiln/runtime/DType.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace kiln::templates {

/// How the kernel's (batch, row, col) map to the coordinates of the
/// contraction's result, of shape `shape` (rank >= 2).
struct OutputIndexing {
  llvm::SmallVector<int64_t> shape;
  /// The leading (batch) dimensions are folded into the GEMM's rows: `row`
  /// linearises every dimension but the last, and `batch` is 0.
  bool batchFoldedIntoRows = false;
};

struct EmittedEpilogue {
  /// Statements over `batch`, `row`, `col`, `acc` and `extra0..`, ending in
  /// `return <float>;`.
  std::string body;
  /// The tensors the body reads, one extra pointer parameter each.
  llvm::SmallVector<mlir::Value> operands;
  /// The type the kernel stores (the region's result type).
  runtime::DType outputType = runtime::DType::F32;
  /// With a second output (emitEpilogue's `auxResult`): its type. The body
  /// then returns it when `which` is 1 (contraction::Epilogue::aux).
  std::optional<runtime::DType> auxType;
};

/// The epilogue computing `result` from `acc` (the contraction's value) by
/// `ops` (in block order, each elementwise on the result's shape). Operands
/// that are neither `acc` nor computed by `ops` are read from memory (they
/// must be defined outside the region: the caller materialises the rest) or,
/// for splat constants, written as literals. Fails with `why` set when an op
/// or type has no epilogue form.
/// `substitutions` replaces operands the caller materialised elsewhere.
/// `accBias`, when set, is a vector broadcast to the result (a
/// convolution's per-channel bias) added to `acc` before the ops.
/// `auxResult`, when set, is a second value `ops` compute (of the result's
/// shape), the kernel's second output.
llvm::FailureOr<EmittedEpilogue>
emitEpilogue(mlir::Value acc, llvm::ArrayRef<mlir::Operation *> ops,
             mlir::Value result, const OutputIndexing &indexing,
             const llvm::DenseMap<mlir::Value, mlir::Value> &substitutions,
             mlir::Value accBias, std::string &why,
             mlir::Value auxResult = {});

/// A constant i1 tensor that is a triangle over its last two dimensions,
/// which match `shape`'s (every other dimension 1): true where j - i <= k
/// (lower) or j - i >= k (upper). A causal mask (Trilu, or Where on one).
struct Triangle {
  bool upper = false;
  int64_t k = 0;
};
std::optional<Triangle> constantTriangle(mlir::Value condition,
                                         llvm::ArrayRef<int64_t> shape);

/// Whether `v` is a splat float constant (an epilogue literal).
bool isSplatConstant(mlir::Value v);

/// Whether `op` can be part of an epilogue (an elementwise op emitEpilogue
/// knows).
bool hasEpilogueForm(mlir::Operation *op);

} // namespace kiln::templates

#endif // KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_EPILOGUEEMITTER_H

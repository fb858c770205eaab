//===- SymbolicLoops.h - Which kernels' work follows a symbolic dim -------===//
//
// kiln-map-to-gpu's proof for launch scaling (#kiln.grid_scale,
// KilnKernelAttrs.td): on the bufferized function, follows each symbol of
// `kiln.symbolic_dims` (the arguments) from buffer to buffer through the
// linalg.generic ops and GEMM template calls, in program order. A buffer
// dim that follows symbol N with factor f holds the run's data in its
// first n * f indices (n the run's size); everything after them is padding
// that no real result reads. A generic whose loop 0 alone follows N, read
// only through `linalg.index 0` at every symbolic dim, needs only the
// points with loop 0 below n * f. Anything else (a view other than a
// reshape, a gather, a reduction over N, a symbol on another loop) stops
// the proof for that op, and its outputs are unknown from then on: the ops
// that read them keep the compiled grid. A function with any
// data-dependent load (a gather) scales nothing: an unscaled gather could
// read padding a scaled producer left unwritten as an index.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_LINALGTOGPU_SYMBOLICLOOPS_H
#define KILN_LIB_CONVERSION_LINALGTOGPU_SYMBOLICLOOPS_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

namespace kiln::mapping {

/// Loop 0 of a generic follows `symbol`: its extent is `maximum * factor`.
struct SymbolicLoop {
  mlir::StringAttr symbol;
  int64_t maximum = 0;
  int64_t factor = 1;
};

struct SymbolicLoops {
  /// The generics whose loop 0 alone follows a symbol.
  llvm::DenseMap<mlir::Operation *, SymbolicLoop> generics;
  /// The template calls that may scale, with their `kiln.grid_scale`.
  llvm::DenseMap<mlir::Operation *, kiln::GridScaleAttr> calls;
};

SymbolicLoops analyzeSymbolicLoops(mlir::func::FuncOp func);

/// `kiln.grid_scale` for a launch whose grid dim 0 linearises `points`
/// points (loop 0 outermost) `perBlock` a block, when loop 0 is `loop`;
/// null unless ceil(maximum * numerator / denominator) is `grid`.
kiln::GridScaleAttr gridScaleFor(mlir::MLIRContext *ctx,
                                 const SymbolicLoop &loop, int64_t points,
                                 int64_t perBlock, int64_t grid);

} // namespace kiln::mapping

#endif // KILN_LIB_CONVERSION_LINALGTOGPU_SYMBOLICLOOPS_H

//===- KernelMapping.h - Helpers shared by kiln-map-to-gpu's builders -----===//
//
// Index arithmetic and view rebuilding used by every kernel shape that
// kiln-map-to-gpu emits (MapToGpu.cpp: thread, block and row kernels;
// VectorizedElementwise.cpp: 128-bit vectorised elementwise kernels;
// TiledTranspose.cpp: shared-memory tiled transposes; SplitReductions.cpp:
// column and whole-tensor reductions).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_LINALGTOGPU_KERNELMAPPING_H
#define KILN_LIB_CONVERSION_LINALGTOGPU_KERNELMAPPING_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace kiln::mapping {

mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc, int64_t v);

/// Splits `linear` into coordinates over `extents` (row-major).
llvm::SmallVector<mlir::Value> delinearize(mlir::OpBuilder &b,
                                           mlir::Location loc,
                                           mlir::Value linear,
                                           llvm::ArrayRef<int64_t> extents);

/// The indices an indexing map yields at loop coordinates `ivs`.
llvm::SmallVector<mlir::Value> applyMap(mlir::OpBuilder &b, mlir::Location loc,
                                        mlir::AffineMap map,
                                        mlir::ValueRange ivs);

/// Rebuilds `value` inside the kernel being built: buffers (function
/// arguments, allocations, globals) are captured as they are and become
/// kernel arguments; views and the index arithmetic feeding them are cloned.
mlir::Value rebuildInKernel(mlir::OpBuilder &b, mlir::Value value,
                            mlir::IRMapping &mapping);

/// The gpu.all_reduce kind and identity of a body's combining op.
struct Combiner {
  mlir::gpu::AllReduceOperation kind;
  double identity;
};
std::optional<Combiner> classifyCombiner(mlir::Operation *op, mlir::Type type);

/// A constant of an integer or float type.
mlir::Value typedConstant(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Type type, double v);

/// The combining op of a loop `scf.for ... iter_args(%acc = %init)` whose
/// body ends in `yield combine(%acc, term)` and uses %acc nowhere else.
mlir::Operation *loopCombiner(mlir::scf::ForOp loop);

/// `combiner` (combining a loop's accumulator `acc` with a term) applied to
/// `x` (in the accumulator's place) and `y`.
mlir::Value combineWith(mlir::OpBuilder &b, mlir::Operation *combiner,
                        mlir::Value acc, mlir::Value x, mlir::Value y);

/// Launch geometry: kiln-map-to-gpu's block size and the target's facts
/// (TargetInfo.h: SMs, resident threads per SM).
struct TargetShape {
  int64_t blockSize;
  int64_t smCount;
  int64_t maxThreadsPerSm;
};

/// Builds a vectorised elementwise kernel for `op` (all-parallel, static,
/// bufferized) at `b`'s insertion point when at least one of its global
/// accesses is provably contiguous and aligned for 128-bit vectors; returns
/// false (building nothing) otherwise. See VectorizedElementwise.cpp.
bool buildVectorizedElementwise(mlir::OpBuilder &b, mlir::linalg::GenericOp op,
                                const TargetShape &target);

/// Builds a shared-memory tiled transpose for `op` (all-parallel, static,
/// bufferized) when one of its reads has a different innermost dimension
/// than its write; returns false (building nothing) otherwise. See
/// TiledTranspose.cpp.
bool buildTiledTranspose(mlir::OpBuilder &b, mlir::linalg::GenericOp op,
                         const TargetShape &target);

/// Builds a column reduction (consecutive threads over the kept innermost
/// dimension) or a deterministic two-pass whole-tensor reduction for a fused
/// generic whose every output is one row (the body's `rowLoops`, in body
/// order, reduce over it); returns false (building nothing) when neither
/// applies. See SplitReductions.cpp.
bool buildSplitReduction(mlir::OpBuilder &b, mlir::linalg::GenericOp op,
                         llvm::ArrayRef<mlir::scf::ForOp> rowLoops,
                         const TargetShape &target);

} // namespace kiln::mapping

#endif // KILN_LIB_CONVERSION_LINALGTOGPU_KERNELMAPPING_H

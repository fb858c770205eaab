//===- KernelMapping.h - Helpers shared by kiln-map-to-gpu's builders -----===//
//
// Index arithmetic and view rebuilding used by every kernel shape that
// kiln-map-to-gpu emits, and each shape's plan (what
// kiln-select-generic-kernels decides) and builder (what kiln-map-to-gpu
// follows) (MapToGpu.cpp: thread, block and row kernels;
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

#include <optional>
#include <string>

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

/// Which kernel shapes kiln-select-generic-kernels may pick besides a
/// thread per output and a block per output (its A/B switches).
struct Strategies {
  bool vectorize = true;
  bool rowKernels = true;
  bool tiledTranspose = true;
  bool reductionKernels = true;
};

/// A vectorised elementwise kernel: `width` consecutive points a thread,
/// `block` threads a block.
struct VectorizedShape {
  int64_t width = 4;
  int64_t block = 256;
};

/// The vectorised kernel the selection gives `op` (all-parallel, static,
/// bufferized): the width from its narrowest element, when at least one of
/// its global accesses is provably contiguous and aligned for it; nothing
/// otherwise. See VectorizedElementwise.cpp.
std::optional<VectorizedShape>
planVectorizedElementwise(mlir::linalg::GenericOp op,
                          const TargetShape &target);

/// Builds the vectorised kernel of `shape` for `op` at `b`'s insertion
/// point; fails (building nothing) with `why` when no access is a vector at
/// that width.
mlir::LogicalResult buildVectorizedElementwise(mlir::OpBuilder &b,
                                               mlir::linalg::GenericOp op,
                                               const TargetShape &target,
                                               const VectorizedShape &shape,
                                               std::string &why);

/// The only tile the shared-memory transposes use (32x32).
constexpr int64_t kTransposeTile = 32;

/// Whether `op` (all-parallel, static, bufferized) has a read whose
/// innermost dimension differs from its write's: a shared-memory tiled
/// transpose computes it. See TiledTranspose.cpp.
bool planTiledTranspose(mlir::linalg::GenericOp op);

/// Builds the tiled transpose (tiles of `tile`); fails (building nothing)
/// with `why` when `op` is not a transpose or the tile is not 32.
mlir::LogicalResult buildTiledTranspose(mlir::OpBuilder &b,
                                        mlir::linalg::GenericOp op,
                                        int64_t tile, std::string &why);

/// A column reduction (consecutive threads over the kept innermost
/// dimension) or a deterministic two-pass whole-tensor one, over `splits`
/// blocks per output tile (1: a single kernel for a column reduction).
struct SplitReductionShape {
  bool column = true;
  int64_t splits = 1;
};

/// The split reduction the selection gives a fused generic whose every
/// output is one row (the body's `rowLoops`, in body order, reduce over
/// it); nothing when neither kind applies. See SplitReductions.cpp.
std::optional<SplitReductionShape>
planSplitReduction(mlir::linalg::GenericOp op,
                   llvm::ArrayRef<mlir::scf::ForOp> rowLoops,
                   const TargetShape &target);

/// Builds `shape`; fails (building nothing) with `why` when `op` cannot
/// have it (a column reduction without a read contiguous along the kept
/// dimension, a whole-tensor one over more than 32 outputs).
mlir::LogicalResult
buildSplitReduction(mlir::OpBuilder &b, mlir::linalg::GenericOp op,
                    llvm::ArrayRef<mlir::scf::ForOp> rowLoops,
                    const TargetShape &target,
                    const SplitReductionShape &shape, std::string &why);

} // namespace kiln::mapping

#endif // KILN_LIB_CONVERSION_LINALGTOGPU_KERNELMAPPING_H

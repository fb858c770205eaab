//===- GenericKernelBuilder.h - One generic, one kernel ---------*- C++ -*-===//
//
// KernelBuilder is shared by kiln-select-generic-kernels (select: which
// kernel shape a bufferized linalg.generic gets, SelectGenericKernels.cpp)
// and kiln-map-to-gpu (follow: build that shape, MapToGpu.cpp); the row
// kernels' plans and builders are in RowKernels.cpp. The other shapes have
// files of their own behind KernelMapping.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_LINALGTOGPU_GENERICKERNELBUILDER_H
#define KILN_LIB_CONVERSION_LINALGTOGPU_GENERICKERNELBUILDER_H

#include "KernelMapping.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln::mapping {

using namespace mlir;

constexpr int64_t kWarpSize = 32;
constexpr llvm::StringLiteral kKernelAttr =
    kiln::KilnDialect::KernelAttrHelper::getNameStr();
constexpr llvm::StringLiteral kLaunchKernelsAttr =
    kiln::KilnDialect::LaunchKernelsAttrHelper::getNameStr();
/// Above this many outputs, a reduction runs a thread per output.
constexpr int64_t kMaxBlockReductionOutputs = 16384;

/// Whether `op`, and everything nested in it, at most reads memory.
bool onlyReads(Operation *op);

/// Clones ops into one straight-line block, reusing an earlier clone that
/// computes the same value (same op, properties, operands and regions)
/// instead of keeping a second one. A row kernel evaluates the bodies of a
/// fused row's loops (a softmax's max, sum and output) at the same
/// positions of the row one after the other; with this, the row's producers
/// (the loads, a fused matmul's dot products) are computed once and stay in
/// registers between the phases. Sound because such a kernel writes memory
/// only after the last read (its stores come last).
class SharedCloner {
public:
  Operation *clone(OpBuilder &b, Operation &op, IRMapping &values) {
    Operation *copy = b.clone(op, values);
    if (!onlyReads(copy))
      return copy;
    size_t hash = static_cast<size_t>(OperationEquivalence::computeHash(
        copy, OperationEquivalence::directHashValue,
        OperationEquivalence::ignoreHashValue,
        OperationEquivalence::IgnoreLocations));
    SmallVector<Operation *> &bucket = seen[hash];
    for (Operation *prev : bucket) {
      if (prev->getBlock() != copy->getBlock() ||
          !OperationEquivalence::isEquivalentTo(
              copy, prev, OperationEquivalence::IgnoreLocations))
        continue;
      for (auto [from, to] :
           llvm::zip_equal(op.getResults(), prev->getResults()))
        values.map(from, to);
      copy->erase();
      return prev;
    }
    bucket.push_back(copy);
    return copy;
  }

private:
  DenseMap<size_t, SmallVector<Operation *>> seen;
};

class KernelBuilder {
public:
  KernelBuilder(linalg::GenericOp op, const TargetShape &target)
      : op(op), blockSize(target.blockSize), target(target) {
    ranges = op.getStaticLoopRanges();
    for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
      (type == utils::IteratorType::reduction ? reductionDims : parallelDims)
          .push_back(i);
  }

  /// The kernel kiln-select-generic-kernels gives the generic: the first
  /// of block reduction, row kernels (split reductions, strips, a block
  /// per row), tiled transpose, vectorised elementwise that applies (and
  /// that `strategies` allows), else a thread per output.
  FailureOr<kiln::GenericKernelAttr> select(const Strategies &strategies);
  /// Builds the kernel `config` names (kiln-map-to-gpu); an error at the
  /// generic when its analysis does not hold for it.
  LogicalResult follow(OpBuilder &b, kiln::GenericKernelAttr config);
  /// After follow: when the launch's block b (grid dim x) takes points
  /// [b * perBlock, (b + 1) * perBlock) of a row-major order of `points`
  /// points whose outermost coordinate is loop 0, {points, perBlock}
  /// (launch scaling, SymbolicLoops.h); nullopt for other kernels.
  std::optional<std::pair<int64_t, int64_t>> linearGrid() const {
    return linear;
  }

private:
  int64_t product(ArrayRef<int64_t> dims) const {
    int64_t p = 1;
    for (int64_t d : dims)
      p *= ranges[d];
    return p;
  }
  SmallVector<int64_t> extentsOf(ArrayRef<int64_t> dims) const {
    SmallVector<int64_t> e;
    for (int64_t d : dims)
      e.push_back(ranges[d]);
    return e;
  }
  /// The combining op when a block-wide reduction applies, else null.
  Operation *blockReductionCombiner();
  gpu::LaunchOp createLaunch(OpBuilder &b, int64_t grid, int64_t block);
  /// Loads the block arguments the body uses at loop coordinates `ivs`.
  void loadOperands(OpBuilder &b, ValueRange ivs, IRMapping &values,
                    bool withOutputs);
  /// Clones the body into `b`; returns the yielded values (skipping `stop`
  /// and everything after it, which must only be the yield).
  SmallVector<Value> inlineBody(OpBuilder &b, ValueRange ivs, IRMapping &values,
                                Operation *stop = nullptr);
  /// The failures both select and follow report.
  LogicalResult checkStatic();
  /// The combining op when the body folds into its one output with
  /// add/mul/max/min (a block per output can compute it), else null.
  Operation *reductionCombiner();
  void buildThreadPerOutput(OpBuilder &b, int64_t block);
  void buildBlockPerOutput(OpBuilder &b, Operation *combiner,
                           int64_t threads);
  /// Clones a body op into the kernel; buffers it reads from outside the
  /// generic (fused kernels read their inputs this way) are rebuilt inside.
  Operation *cloneIntoKernel(OpBuilder &b, Operation &inner,
                             IRMapping &values);
  /// Rebuilds, at the top of the kernel, every buffer view the generic
  /// reads or writes from outside, so that each is defined once where all
  /// of the kernel can use it (rebuilt lazily, a view first read inside a
  /// block-wide reduction loop was defined in that loop only).
  void rebuildCapturedViews(OpBuilder &b);

  /// A fused kernel's plan for a block per row (see planRows).
  struct RowPlan {
    unsigned numOuter = 0;
    int64_t threads = 0;
    DenseSet<Operation *> rowLoops; // Become block-wide reductions.
    DenseSet<Operation *> uniform;  // Depend on the outer coordinates only.
  };
  std::optional<RowPlan> planRows();
  void buildBlockPerRow(OpBuilder &b, const RowPlan &plan);
  void buildCooperativeLoop(OpBuilder &b, scf::ForOp loop, Value tid,
                            int64_t threads, IRMapping &values);
  /// Row kernels with the row's strip in registers (see buildStripRows in
  /// RowKernels below): a warp (threads 32, rowsPerBlock rows a block) or
  /// a block of `threads` per row.
  struct StripShape {
    int64_t threads = kWarpSize;
    int64_t rowsPerBlock = 1;
  };
  /// The strip shape for the plan (`given`, or the selection's), or
  /// nothing with `why` when the rows do not fit it.
  std::optional<StripShape> planStrip(const RowPlan &plan,
                                      std::optional<StripShape> given,
                                      std::string &why);
  void buildStripRows(OpBuilder &b, const RowPlan &plan,
                      const StripShape &shape);
  /// The row loops of `plan` in body order, and the points per row.
  SmallVector<scf::ForOp> rowLoopsOf(const RowPlan &plan, int64_t &inner);
  /// cloneIntoKernel, but reusing an equivalent earlier clone (see
  /// SharedCloner).
  void cloneShared(OpBuilder &b, Operation &inner, IRMapping &values);

  linalg::GenericOp op;
  int64_t blockSize;
  TargetShape target;
  SmallVector<int64_t> ranges;
  SmallVector<int64_t> parallelDims, reductionDims;
  IRMapping kernelValues;
  SharedCloner shared;
  std::optional<std::pair<int64_t, int64_t>> linear;
};

/// memref.copy as an identity generic, so one kernel builder serves both.
linalg::GenericOp copyAsGeneric(OpBuilder &b, memref::CopyOp copy);

} // namespace kiln::mapping

#endif // KILN_LIB_CONVERSION_LINALGTOGPU_GENERICKERNELBUILDER_H

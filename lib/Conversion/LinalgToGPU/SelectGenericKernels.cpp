//===- SelectGenericKernels.cpp - Decide each generated kernel's shape ----===//
//
// kiln-select-generic-kernels: the rules that were kiln-map-to-gpu's
// try-and-fall-back chain, in the same order, now a decision recorded as
// `kiln.kernel = #kiln.generic_kernel<strategy, parameters>` on each
// bufferized linalg.generic and memref.copy (KilnKernelAttrs.td);
// kiln-map-to-gpu follows it.
//
//===----------------------------------------------------------------------===//

#include "GenericKernelBuilder.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/Target/CUDA/TargetInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_SELECTGENERICKERNELSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::mapping;

namespace kiln::mapping {

FailureOr<kiln::GenericKernelAttr>
KernelBuilder::select(const Strategies &strategies) {
  if (failed(checkStatic()))
    return failure();
  MLIRContext *ctx = op.getContext();
  using kiln::GenericStrategy;
  auto make = [&](GenericStrategy strategy, int64_t vectorWidth,
                  int64_t block, int64_t threads, int64_t rowsPerBlock,
                  int64_t splits, int64_t tile) {
    return kiln::GenericKernelAttr::get(ctx, strategy, vectorWidth, block,
                                        threads, rowsPerBlock, splits, tile);
  };
  if (product(parallelDims) > 0) {
    if (blockReductionCombiner())
      // Threads: the row length rounded up to a power of two, at most
      // blockSize.
      return make(GenericStrategy::BlockReduction, 0, 0,
                  std::min<int64_t>(blockSize,
                                    llvm::PowerOf2Ceil(static_cast<uint64_t>(
                                        product(reductionDims)))),
                  0, 0, 0);
    if (std::optional<RowPlan> plan = planRows()) {
      // Every output its own row: a column or whole-tensor reduction when
      // the rows' reads suit one (SplitReductions.cpp).
      int64_t inner = 1;
      SmallVector<scf::ForOp> rowLoops = rowLoopsOf(*plan, inner);
      if (strategies.reductionKernels && inner == 1)
        if (std::optional<SplitReductionShape> shape =
                planSplitReduction(op, rowLoops, target))
          return make(shape->column ? GenericStrategy::ColumnReduction
                                    : GenericStrategy::WholeReduction,
                      0, 0, 0, 0, shape->splits, 0);
      std::string why;
      if (strategies.rowKernels)
        if (std::optional<StripShape> strip =
                planStrip(*plan, std::nullopt, why))
          return make(GenericStrategy::StripRows, 0, 0, strip->threads,
                      strip->rowsPerBlock, 0, 0);
      return make(GenericStrategy::BlockRows, 0, 0, plan->threads, 0, 0, 0);
    }
    if (strategies.tiledTranspose && planTiledTranspose(op))
      return make(GenericStrategy::TiledTranspose, 0, 0, 0, 0, 0,
                  kTransposeTile);
    if (strategies.vectorize)
      if (std::optional<VectorizedShape> shape =
              planVectorizedElementwise(op, target))
        return make(GenericStrategy::Vectorized, shape->width, shape->block, 0,
                    0, 0, 0);
  }
  return make(GenericStrategy::ThreadPerOutput, 0,
              std::min(blockSize, std::max<int64_t>(product(parallelDims), 1)),
              0, 0, 0, 0);
}

} // namespace kiln::mapping

namespace {

/// Decides each generic's kernel (KernelBuilder::select) and records it as
/// `kiln.kernel`; kiln-map-to-gpu follows it.
struct SelectGenericKernelsPass
    : kiln::impl::SelectGenericKernelsPassBase<SelectGenericKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    const kiln::TargetInfo *info = kiln::TargetInfo::forChip(chip);
    if (!info) {
      func.emitError() << "kiln-select-generic-kernels: chip '" << chip
                       << "' is not in the target table ("
                       << kiln::TargetInfo::supportedChips() << ")";
      return signalPassFailure();
    }
    TargetShape target{blockSize, smCount ? smCount : info->smCount(),
                       info->maxThreadsPerSm()};
    Strategies strategies{vectorize, rowKernels, tiledTranspose,
                          reductionKernels};
    auto decide = [&](linalg::GenericOp generic) -> FailureOr<Attribute> {
      if (Attribute given = generic->getAttr(kKernelAttr))
        return given; // A choice already in the IR stands.
      FailureOr<kiln::GenericKernelAttr> config =
          KernelBuilder(generic, target).select(strategies);
      if (failed(config))
        return failure();
      return Attribute(*config);
    };
    WalkResult walked = func.walk([&](Operation *op) {
      if (op->getParentOfType<gpu::LaunchOp>())
        return WalkResult::advance();
      if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
        FailureOr<Attribute> config = decide(generic);
        if (failed(config))
          return WalkResult::interrupt();
        generic->setAttr(kKernelAttr, *config);
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        // A copy is decided as the identity generic kiln-map-to-gpu makes
        // of it.
        OpBuilder b(copy);
        linalg::GenericOp generic = copyAsGeneric(b, copy);
        if (Attribute given = copy->getAttr(kKernelAttr))
          generic->setAttr(kKernelAttr, given);
        FailureOr<Attribute> config = decide(generic);
        generic.erase();
        if (failed(config))
          return WalkResult::interrupt();
        copy->setAttr(kKernelAttr, *config);
      }
      return WalkResult::advance();
    });
    if (walked.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

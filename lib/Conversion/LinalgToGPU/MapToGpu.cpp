//===- MapToGpu.cpp - One gpu.launch per linalg op on buffers -------------===//
//
// After bufferization every linalg op (generalized) and memref.copy becomes a
// gpu.launch. kiln-select-generic-kernels decides each one's shape
// (KernelBuilder::select: the rules, in order) and records it as
// `kiln.kernel = #kiln.generic_kernel<...>`; kiln-map-to-gpu follows it
// (KernelBuilder::follow). The shapes (see Passes.td): a thread per output
// element, reductions walked serially per thread; a block per output with a
// block-wide gpu.all_reduce; row kernels (here) for fused rows; tiled
// transposes, split reductions and vectorised elementwise kernels (their own
// files). Views are rebuilt inside the kernel so that outlining passes whole
// buffers.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"

#include "GenericKernelBuilder.h"
#include "SymbolicLoops.h"
#include "kiln/Target/CUDA/TargetInfo.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <map>

namespace kiln {
#define GEN_PASS_DEF_MAPTOGPUPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::mapping;

namespace kiln::mapping {

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Splits `linear` into coordinates over `extents` (row-major).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<int64_t> extents) {
  SmallVector<Value> coords(extents.size());
  for (int64_t i = static_cast<int64_t>(extents.size()) - 1; i >= 0; --i) {
    Value extent = indexConstant(b, loc, extents[i]);
    coords[i] =
        i == 0 ? linear : Value(arith::RemUIOp::create(b, loc, linear, extent));
    if (i > 0)
      linear = arith::DivUIOp::create(b, loc, linear, extent);
  }
  return coords;
}

/// The indices an indexing map yields at loop coordinates `ivs`.
SmallVector<Value> applyMap(OpBuilder &b, Location loc, AffineMap map,
                            ValueRange ivs) {
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults())
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, expr), ivs));
  return indices;
}

/// Rebuilds `value` inside the kernel being built: buffers (function
/// arguments, allocations, globals) are captured as they are and become
/// kernel arguments; views and the index arithmetic feeding them are cloned.
Value rebuildInKernel(OpBuilder &b, Value value, IRMapping &mapping) {
  if (Value mapped = mapping.lookupOrNull(value))
    return mapped;
  Operation *def = value.getDefiningOp();
  bool isView = def && isa<ViewLikeOpInterface>(def);
  bool isPureScalar = def && isPure(def) && def->getNumRegions() == 0 &&
                      !isa<MemRefType>(value.getType());
  if (!isView && !isPureScalar)
    return value;
  for (Value operand : def->getOperands())
    rebuildInKernel(b, operand, mapping);
  Operation *clone = b.clone(*def, mapping);
  return clone->getResult(cast<OpResult>(value).getResultNumber());
}

/// The gpu.all_reduce kind and identity of a body's combining op.
std::optional<Combiner> classifyCombiner(Operation *op, Type type) {
  double lowest = isa<FloatType>(type)
                      ? -std::numeric_limits<double>::infinity()
                      : std::ldexp(-1.0, type.getIntOrFloatBitWidth() - 1);
  double highest = -lowest;
  using K = gpu::AllReduceOperation;
  return llvm::TypeSwitch<Operation *, std::optional<Combiner>>(op)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) {
        return Combiner{K::ADD, 0};
      })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) {
        return Combiner{K::MUL, 1};
      })
      .Case([&](arith::MaximumFOp) {
        return Combiner{K::MAXIMUMF, lowest};
      })
      .Case([&](arith::MinimumFOp) {
        return Combiner{K::MINIMUMF, highest};
      })
      .Case([&](arith::MaxNumFOp) {
        return Combiner{K::MAXNUMF, lowest};
      })
      .Case([&](arith::MinNumFOp) {
        return Combiner{K::MINNUMF, highest};
      })
      .Case([&](arith::MaxSIOp) {
        return Combiner{K::MAXSI, lowest};
      })
      .Case([&](arith::MinSIOp) {
        return Combiner{K::MINSI, highest - 1};
      })
      .Default([](Operation *) { return std::nullopt; });
}

Value typedConstant(OpBuilder &b, Location loc, Type type, double v) {
  if (auto f = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f, v));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(v)));
}

/// The combining op of a loop `scf.for ... iter_args(%acc = %init)` whose
/// body ends in `yield combine(%acc, term)` and uses %acc nowhere else.
Operation *loopCombiner(scf::ForOp loop) {
  if (loop.getNumRegionIterArgs() != 1)
    return nullptr;
  BlockArgument acc = loop.getRegionIterArgs().front();
  Operation *combiner =
      loop.getBody()->getTerminator()->getOperand(0).getDefiningOp();
  if (!combiner || combiner->getBlock() != loop.getBody() ||
      combiner->getNumOperands() != 2 || !acc.hasOneUse() ||
      !llvm::is_contained(combiner->getOperands(), acc) ||
      !classifyCombiner(combiner, acc.getType()))
    return nullptr;
  return combiner;
}

/// `combiner` (combining a loop's accumulator `acc` with a term) applied to
/// `x` (in the accumulator's place) and `y`.
Value combineWith(OpBuilder &b, Operation *combiner, Value acc,
                                 Value x, Value y) {
  Value term = combiner->getOperand(0) == acc ? combiner->getOperand(1)
                                              : combiner->getOperand(0);
  IRMapping mapping;
  mapping.map(acc, x);
  mapping.map(term, y);
  return b.clone(*combiner, mapping)->getResult(0);
}

} // namespace kiln::mapping

namespace kiln::mapping {

/// Whether `op`, and everything nested in it, at most reads memory.
bool onlyReads(Operation *op) {
  bool ok = true;
  op->walk([&](Operation *nested) {
    if (nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return;
    auto iface = dyn_cast<MemoryEffectOpInterface>(nested);
    if (!iface) {
      ok = false;
      return;
    }
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    for (MemoryEffects::EffectInstance &e : effects)
      if (!isa<MemoryEffects::Read>(e.getEffect()))
        ok = false;
  });
  return ok;
}

Operation *KernelBuilder::blockReductionCombiner() {
  // A block per output pays off for rows of at least a warp, as long as
  // there are not so many outputs that a thread each already fills the GPU
  // (contractions: many outputs, each with a modest K).
  if (product(reductionDims) < kWarpSize ||
      product(parallelDims) > kMaxBlockReductionOutputs)
    return nullptr;
  return reductionCombiner();
}

Operation *KernelBuilder::reductionCombiner() {
  if (reductionDims.empty() || op.getNumDpsInits() != 1)
    return nullptr;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  BlockArgument out = op.getRegionOutputArgs().front();
  Operation *combiner = yield.getOperand(0).getDefiningOp();
  if (!combiner || combiner->getBlock() != &body ||
      combiner->getNumOperands() != 2 || !out.hasOneUse() ||
      !llvm::is_contained(combiner->getOperands(), out) ||
      !classifyCombiner(combiner, out.getType()))
    return nullptr;
  return combiner;
}

gpu::LaunchOp KernelBuilder::createLaunch(OpBuilder &b, int64_t grid,
                                          int64_t block) {
  Location loc = op.getLoc();
  Value one = indexConstant(b, loc, 1);
  return gpu::LaunchOp::create(b, loc, indexConstant(b, loc, grid), one, one,
                               indexConstant(b, loc, block), one, one);
}

void KernelBuilder::loadOperands(OpBuilder &b, ValueRange ivs,
                                 IRMapping &values, bool withOutputs) {
  Location loc = op.getLoc();
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    bool isOutput = op.isDpsInit(&operand);
    if (arg.use_empty() || (isOutput && !withOutputs))
      continue;
    Value buffer = rebuildInKernel(b, operand.get(), kernelValues);
    if (!isa<MemRefType>(buffer.getType())) {
      values.map(arg, buffer); // A scalar operand.
      continue;
    }
    SmallVector<Value> indices =
        applyMap(b, loc, op.getMatchingIndexingMap(&operand), ivs);
    values.map(arg, memref::LoadOp::create(b, loc, buffer, indices));
  }
}

void KernelBuilder::rebuildCapturedViews(OpBuilder &b) {
  auto capture = [&](Value operand) {
    if (isa<MemRefType>(operand.getType()) &&
        !op->isAncestor(operand.getParentBlock()->getParentOp()))
      rebuildInKernel(b, operand, kernelValues);
  };
  for (Value operand : op->getOperands())
    capture(operand);
  op.getRegion().walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      capture(operand);
  });
}

Operation *KernelBuilder::cloneIntoKernel(OpBuilder &b, Operation &inner,
                                          IRMapping &values) {
  inner.walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (isa<MemRefType>(operand.getType()) &&
          !op->isAncestor(operand.getParentBlock()->getParentOp()) &&
          !values.contains(operand))
        values.map(operand, rebuildInKernel(b, operand, kernelValues));
  });
  return b.clone(inner, values);
}

SmallVector<Value> KernelBuilder::inlineBody(OpBuilder &b, ValueRange ivs,
                                             IRMapping &values,
                                             Operation *stop) {
  Block &body = op.getRegion().front();
  for (Operation &inner : body.without_terminator()) {
    if (&inner == stop)
      break;
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      values.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    cloneIntoKernel(b, inner, values);
  }
  SmallVector<Value> yielded;
  for (Value v : body.getTerminator()->getOperands())
    yielded.push_back(values.lookupOrDefault(v));
  return yielded;
}

void KernelBuilder::buildThreadPerOutput(OpBuilder &b, int64_t block) {
  Location loc = op.getLoc();
  int64_t outputs = product(parallelDims);
  gpu::LaunchOp launch = createLaunch(b, (outputs + block - 1) / block, block);
  if (!parallelDims.empty() && parallelDims.front() == 0)
    linear = {outputs, block};
  b.setInsertionPointToStart(&launch.getBody().front());
  rebuildCapturedViews(b);
  Value gid = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                            indexConstant(b, loc, block)),
      launch.getThreadIds().x);
  Value inBounds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, gid,
                                         indexConstant(b, loc, outputs));
  auto guard = scf::IfOp::create(b, loc, inBounds, /*withElseRegion=*/false);
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&guard.getThenRegion().front());

  SmallVector<Value> ivs(ranges.size());
  for (auto [d, v] : llvm::zip_equal(
           parallelDims, delinearize(b, loc, gid, extentsOf(parallelDims))))
    ivs[d] = v;

  SmallVector<Value> results;
  if (reductionDims.empty()) {
    IRMapping values;
    loadOperands(b, ivs, values, /*withOutputs=*/true);
    results = inlineBody(b, ivs, values);
  } else {
    // Accumulate in registers from the output's initial values.
    SmallVector<Value> init;
    for (OpOperand &out : op.getDpsInitsMutable()) {
      Value buffer = rebuildInKernel(b, out.get(), kernelValues);
      SmallVector<Value> zeroes(ranges.size());
      for (int64_t d : parallelDims)
        zeroes[d] = ivs[d];
      for (int64_t d : reductionDims)
        zeroes[d] = indexConstant(b, loc, 0);
      init.push_back(memref::LoadOp::create(
          b, loc, buffer,
          applyMap(b, loc, op.getMatchingIndexingMap(&out), zeroes)));
    }
    auto loop =
        scf::ForOp::create(b, loc, indexConstant(b, loc, 0),
                           indexConstant(b, loc, product(reductionDims)),
                           indexConstant(b, loc, 1), init);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    for (auto [d, v] : llvm::zip_equal(
             reductionDims, delinearize(b, loc, loop.getInductionVar(),
                                        extentsOf(reductionDims))))
      ivs[d] = v;
    IRMapping values;
    loadOperands(b, ivs, values, /*withOutputs=*/false);
    for (auto [arg, acc] :
         llvm::zip_equal(op.getRegionOutputArgs(), loop.getRegionIterArgs()))
      values.map(arg, acc);
    scf::YieldOp::create(b, loc, inlineBody(b, ivs, values));
    b.setInsertionPointAfter(loop);
    results.assign(loop.getResults().begin(), loop.getResults().end());
    for (int64_t d : reductionDims)
      ivs[d] = indexConstant(b, loc, 0);
  }
  for (auto [out, value] : llvm::zip_equal(op.getDpsInitsMutable(), results)) {
    Value buffer = rebuildInKernel(b, out.get(), kernelValues);
    memref::StoreOp::create(
        b, loc, value, buffer,
        applyMap(b, loc, op.getMatchingIndexingMap(&out), ivs));
  }
}

void KernelBuilder::buildBlockPerOutput(OpBuilder &b, Operation *combiner,
                                       int64_t threads) {
  Location loc = op.getLoc();
  BlockArgument outArg = op.getRegionOutputArgs().front();
  Type type = outArg.getType();
  Combiner kind = *classifyCombiner(combiner, type);
  gpu::LaunchOp launch = createLaunch(b, product(parallelDims), threads);
  if (!parallelDims.empty() && parallelDims.front() == 0)
    linear = {product(parallelDims), 1};
  b.setInsertionPointToStart(&launch.getBody().front());
  rebuildCapturedViews(b);
  Value tid = launch.getThreadIds().x;

  SmallVector<Value> ivs(ranges.size());
  for (auto [d, v] :
       llvm::zip_equal(parallelDims, delinearize(b, loc, launch.getBlockIds().x,
                                                 extentsOf(parallelDims))))
    ivs[d] = v;

  // Each thread folds a strided share of the reduction into a partial.
  Value identity = typedConstant(b, loc, type, kind.identity);
  auto loop = scf::ForOp::create(
      b, loc, tid, indexConstant(b, loc, product(reductionDims)),
      indexConstant(b, loc, threads), ValueRange(identity));
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> loopIvs = ivs;
    for (auto [d, v] : llvm::zip_equal(
             reductionDims, delinearize(b, loc, loop.getInductionVar(),
                                        extentsOf(reductionDims))))
      loopIvs[d] = v;
    IRMapping values;
    loadOperands(b, loopIvs, values, /*withOutputs=*/false);
    inlineBody(b, loopIvs, values, combiner);
    Value term = combiner->getOperand(0) == outArg ? combiner->getOperand(1)
                                                   : combiner->getOperand(0);
    IRMapping combine;
    combine.map(outArg, loop.getRegionIterArgs().front());
    combine.map(term, values.lookupOrDefault(term));
    scf::YieldOp::create(b, loc, b.clone(*combiner, combine)->getResult(0));
  }
  Value total = gpu::AllReduceOp::create(
      b, loc, loop.getResult(0),
      gpu::AllReduceOperationAttr::get(b.getContext(), kind.kind),
      b.getUnitAttr());

  // Thread 0 folds the block's total into the output's initial value.
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                        indexConstant(b, loc, 0));
  auto guard = scf::IfOp::create(b, loc, isFirst, /*withElseRegion=*/false);
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  for (int64_t d : reductionDims)
    ivs[d] = indexConstant(b, loc, 0);
  OpOperand &out = op.getDpsInitsMutable()[0];
  Value buffer = rebuildInKernel(b, out.get(), kernelValues);
  SmallVector<Value> indices =
      applyMap(b, loc, op.getMatchingIndexingMap(&out), ivs);
  Value init = memref::LoadOp::create(b, loc, buffer, indices);
  IRMapping combine;
  combine.map(combiner->getOperand(0), init);
  combine.map(combiner->getOperand(1), total);
  if (combiner->getOperand(1) == outArg) {
    combine.map(combiner->getOperand(1), init);
    combine.map(combiner->getOperand(0), total);
  }
  memref::StoreOp::create(b, loc, b.clone(*combiner, combine)->getResult(0),
                          buffer, indices);
}

LogicalResult KernelBuilder::checkStatic() {
  if (!op.hasPureBufferSemantics())
    return op.emitOpError("must be bufferized before kiln-map-to-gpu");
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return op.emitOpError(
        "has a dynamic iteration space, which kiln-map-to-gpu "
        "does not support yet");
  return success();
}

SmallVector<scf::ForOp> KernelBuilder::rowLoopsOf(const RowPlan &plan,
                                                 int64_t &inner) {
  SmallVector<scf::ForOp> rowLoops;
  for (Operation &nested : op.getRegion().front())
    if (plan.rowLoops.contains(&nested))
      rowLoops.push_back(cast<scf::ForOp>(nested));
  inner = 1;
  for (int64_t e : ArrayRef(ranges).drop_front(plan.numOuter))
    inner *= e;
  return rowLoops;
}

LogicalResult KernelBuilder::follow(OpBuilder &b,
                                    kiln::GenericKernelAttr config) {
  if (failed(checkStatic()))
    return failure();
  // Nothing to compute for an empty output (a zero-sized dimension).
  if (product(parallelDims) == 0)
    return success();
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(op);
  using kiln::GenericStrategy;
  std::string why;
  switch (config.getStrategy()) {
  case GenericStrategy::ThreadPerOutput:
    buildThreadPerOutput(b, config.getBlock());
    return success();
  case GenericStrategy::BlockReduction:
    if (Operation *combiner = reductionCombiner()) {
      buildBlockPerOutput(b, combiner, config.getThreads());
      return success();
    }
    why = "the body does not fold into one output with add, mul, max or min";
    break;
  case GenericStrategy::Vectorized:
    if (succeeded(buildVectorizedElementwise(
            b, op, target, {config.getVectorWidth(), config.getBlock()}, why)))
      return success();
    break;
  case GenericStrategy::TiledTranspose:
    if (succeeded(buildTiledTranspose(b, op, config.getTile(), why)))
      return success();
    break;
  case GenericStrategy::BlockRows:
  case GenericStrategy::StripRows:
  case GenericStrategy::ColumnReduction:
  case GenericStrategy::WholeReduction: {
    std::optional<RowPlan> plan = planRows();
    if (!plan) {
      why = "the body has no row loops over outer coordinates (or too many "
            "rows for a block each)";
      break;
    }
    int64_t inner = 1;
    SmallVector<scf::ForOp> rowLoops = rowLoopsOf(*plan, inner);
    if (config.getStrategy() == GenericStrategy::BlockRows) {
      plan->threads = config.getThreads();
      buildBlockPerRow(b, *plan);
      return success();
    }
    if (config.getStrategy() == GenericStrategy::StripRows) {
      if (std::optional<StripShape> shape = planStrip(
              *plan, StripShape{config.getThreads(), config.getRowsPerBlock()},
              why)) {
        buildStripRows(b, *plan, *shape);
        return success();
      }
      break;
    }
    if (inner != 1) {
      why = "the row loops do not cover the whole output (points per row: " +
            std::to_string(inner) + ")";
      break;
    }
    SplitReductionShape shape{
        config.getStrategy() == GenericStrategy::ColumnReduction,
        config.getSplits()};
    if (succeeded(
            buildSplitReduction(b, op, rowLoops, target, shape, why)))
      return success();
    break;
  }
  }
  return op.emitOpError() << "cannot follow kiln.kernel = " << config << ": "
                          << why;
}

/// memref.copy as an identity generic, so one kernel builder serves both.
linalg::GenericOp copyAsGeneric(OpBuilder &b, memref::CopyOp copy) {
  auto type = cast<MemRefType>(copy.getTarget().getType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
      b, copy.getLoc(), copy.getSource(), copy.getTarget(),
      ArrayRef<AffineMap>{id, id}, iterators,
      [](OpBuilder &nested, Location loc, ValueRange args) {
        linalg::YieldOp::create(nested, loc, args.front());
      });
}

} // namespace kiln::mapping

namespace {

struct MapToGpuPass : kiln::impl::MapToGpuPassBase<MapToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    OpBuilder b(&getContext());
    SmallVector<memref::CopyOp> copies;
    func.walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    for (memref::CopyOp copy : copies) {
      b.setInsertionPoint(copy);
      linalg::GenericOp generic = copyAsGeneric(b, copy);
      if (Attribute config = copy->getAttr(kKernelAttr))
        generic->setAttr(kKernelAttr, config);
      copy.erase();
    }
    SmallVector<linalg::GenericOp> generics;
    func.walk([&](linalg::GenericOp generic) {
      if (!generic->getParentOfType<gpu::LaunchOp>())
        generics.push_back(generic);
    });
    const kiln::TargetInfo *info = kiln::TargetInfo::forChip(chip);
    if (!info) {
      func.emitError() << "kiln-map-to-gpu: chip '" << chip
                       << "' is not in the target table ("
                       << kiln::TargetInfo::supportedChips() << ")";
      return signalPassFailure();
    }
    TargetShape target{blockSize, smCount ? smCount : info->smCount(),
                       info->maxThreadsPerSm()};
    // Launch scaling (#kiln.grid_scale, KilnKernelAttrs.td): which
    // kernels' work follows a symbolic dim in loop 0 (templates: in A's
    // rows).
    using GridScale = kiln::KilnDialect::GridScaleAttrHelper;
    SymbolicLoops symbolic = analyzeSymbolicLoops(func);
    for (auto [call, scale] : symbolic.calls)
      call->setAttr(GridScale::getNameStr(), scale);
    for (linalg::GenericOp generic : generics) {
      auto config = generic->getAttrOfType<kiln::GenericKernelAttr>(kKernelAttr);
      if (!config) {
        generic.emitOpError() << "has no kiln.kernel = #kiln.generic_kernel "
                                 "(kiln-select-generic-kernels decides it)";
        return signalPassFailure();
      }
      Operation *before = generic->getPrevNode();
      KernelBuilder builder(generic, target);
      if (failed(builder.follow(b, config)))
        return signalPassFailure();
      SmallVector<gpu::LaunchOp> launches;
      for (Operation *at = before ? before->getNextNode()
                                  : &generic->getBlock()->front();
           at != generic.getOperation(); at = at->getNextNode())
        if (auto launch = dyn_cast<gpu::LaunchOp>(at)) {
          launch->setAttr(kKernelAttr, config);
          launches.push_back(launch);
        }
      // One launch whose grid x linearises loop 0 outermost.
      std::optional<std::pair<int64_t, int64_t>> linear = builder.linearGrid();
      if (config.getStrategy() == kiln::GenericStrategy::Vectorized &&
          llvm::all_of(generic.getIteratorTypesArray(), [](auto type) {
            return type == utils::IteratorType::parallel;
          })) {
        int64_t total = 1;
        for (int64_t r : generic.getStaticLoopRanges())
          total *= r;
        linear = {total, config.getVectorWidth() * config.getBlock()};
      }
      auto loop = symbolic.generics.find(generic);
      if (launches.size() == 1 && linear && loop != symbolic.generics.end())
        if (std::optional<int64_t> grid =
                getConstantIntValue(launches.front().getGridSizeX()))
          if (kiln::GridScaleAttr scale =
                  gridScaleFor(&getContext(), loop->second, linear->first,
                               linear->second, *grid))
            launches.front()->setAttr(GridScale::getNameStr(), scale);
      generic.erase();
    }
    // Outlining drops the launches' attributes: the function lists their
    // decisions (and grid scales) in launch order, and kiln-name-kernels
    // puts each on its gpu.launch_func (kilnc --stats names each kernel's
    // strategy).
    SmallVector<Attribute> configs, scales;
    bool anyScale = false;
    func.walk([&](gpu::LaunchOp launch) {
      if (Attribute config = launch->getAttr(kKernelAttr)) {
        configs.push_back(config);
        Attribute scale = launch->getAttr(GridScale::getNameStr());
        anyScale |= static_cast<bool>(scale);
        scales.push_back(scale ? scale : b.getDictionaryAttr({}));
      }
    });
    if (!configs.empty())
      func->setAttr(kLaunchKernelsAttr, b.getArrayAttr(configs));
    if (anyScale)
      func->setAttr(kiln::KilnDialect::LaunchGridScalesAttrHelper::getNameStr(),
                    b.getArrayAttr(scales));
  }
};

} // namespace

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

#include "KernelMapping.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

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
#define GEN_PASS_DEF_SELECTGENERICKERNELSPASS
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

namespace {

constexpr int64_t kWarpSize = 32;
constexpr llvm::StringLiteral kKernelAttr = "kiln.kernel";
constexpr llvm::StringLiteral kLaunchKernelsAttr = "kiln.launch_kernels";
/// Above this many outputs, a reduction runs a thread per output.
constexpr int64_t kMaxBlockReductionOutputs = 16384;

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
};

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


// A fused kernel (kiln-collapse-fusions) is an all-parallel generic whose
// body may hold reduction loops. When such a loop depends only on the outer
// coordinates (a softmax's max and sum, a layer norm's mean and variance, a
// dot product per output), a block per point of those coordinates computes
// it once, with its threads striding over the loop and a gpu.all_reduce,
// then strides over the inner coordinates for the rest of the body.
std::optional<KernelBuilder::RowPlan> KernelBuilder::planRows() {
  if (!reductionDims.empty() || ranges.size() > 63)
    return std::nullopt;
  Block &body = op.getRegion().front();
  if (llvm::any_of(op.getRegionOutputArgs(),
                   [](BlockArgument a) { return !a.use_empty(); }))
    return std::nullopt;
  // The coordinates each top-level op depends on, as a bit mask.
  DenseMap<Operation *, uint64_t> deps;
  auto maskOf = [&](Value v) -> uint64_t {
    Operation *def = v.getDefiningOp();
    if (!def)
      return v.getParentBlock() == &body ? ~0ull : 0;
    auto it = deps.find(def);
    return it == deps.end() ? 0 : it->second;
  };
  // Candidate loops and the number of leading coordinates each depends on.
  SmallVector<std::pair<Operation *, unsigned>> candidates;
  for (Operation &inner : body.without_terminator()) {
    uint64_t mask = 0;
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      mask = 1ull << index.getDim();
    } else {
      inner.walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (!inner.isAncestor(operand.getParentBlock()->getParentOp()))
            mask |= maskOf(operand);
      });
    }
    deps[&inner] = mask;
    auto loop = dyn_cast<scf::ForOp>(inner);
    if (!loop || !loopCombiner(loop))
      continue;
    std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
    std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
    std::optional<int64_t> step = getConstantIntValue(loop.getStep());
    if (!lb || !ub || !step || *lb != 0 || *step != 1 || *ub < kWarpSize)
      continue;
    candidates.push_back({loop, mask ? llvm::Log2_64(mask) + 1 : 0});
  }
  if (candidates.empty())
    return std::nullopt;
  // Rows are the fewest leading coordinates some loop depends on alone, so
  // that the block has inner points to share (softmax: the row's max and
  // sum; a score computed per element stays a per-thread loop). Without
  // such a loop, a block per output.
  unsigned rank = ranges.size();
  RowPlan plan;
  plan.numOuter = rank;
  for (auto [loop, level] : candidates)
    if (level < rank)
      plan.numOuter = std::min(plan.numOuter, level);
  int64_t rows = 1, inner = 1, longest = 0;
  for (auto [d, extent] : llvm::enumerate(ranges))
    (d < plan.numOuter ? rows : inner) *= extent;
  // A block per output only pays while a thread per output would not
  // already fill the GPU.
  if (inner == 1 && rows > kMaxBlockReductionOutputs)
    return std::nullopt;
  for (auto [loop, level] : candidates)
    if (level <= plan.numOuter) {
      plan.rowLoops.insert(loop);
      longest = std::max(longest, *getConstantIntValue(
                                      cast<scf::ForOp>(loop).getUpperBound()));
    }
  uint64_t outerMask = (1ull << plan.numOuter) - 1;
  for (auto [inner, mask] : deps)
    if ((mask & ~outerMask) == 0)
      plan.uniform.insert(inner);
  plan.threads = std::min<int64_t>(
      blockSize, llvm::PowerOf2Ceil(static_cast<uint64_t>(
                     std::max<int64_t>({longest, inner, kWarpSize}))));
  return plan;
}

void KernelBuilder::buildCooperativeLoop(OpBuilder &b, scf::ForOp loop,
                                         Value tid, int64_t threads,
                                         IRMapping &values) {
  Location loc = loop.getLoc();
  Operation *combiner = loopCombiner(loop);
  BlockArgument acc = loop.getRegionIterArgs().front();
  Type type = acc.getType();
  Combiner kind = *classifyCombiner(combiner, type);
  Value identity = typedConstant(b, loc, type, kind.identity);
  auto strided = scf::ForOp::create(b, loc, tid, values.lookupOrDefault(
                                                      loop.getUpperBound()),
                                    indexConstant(b, loc, threads),
                                    ValueRange(identity));
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(strided.getBody());
    IRMapping inner = values;
    inner.map(loop.getInductionVar(), strided.getInductionVar());
    inner.map(acc, strided.getRegionIterArgs().front());
    for (Operation &nested : loop.getBody()->without_terminator())
      cloneIntoKernel(b, nested, inner);
    scf::YieldOp::create(b, loc, inner.lookup(combiner->getResult(0)));
  }
  Value total = gpu::AllReduceOp::create(
      b, loc, strided.getResult(0),
      gpu::AllReduceOperationAttr::get(b.getContext(), kind.kind),
      b.getUnitAttr());
  IRMapping combine;
  Value init = values.lookupOrDefault(loop.getInitArgs().front());
  combine.map(combiner->getOperand(0) == acc ? combiner->getOperand(0)
                                             : combiner->getOperand(1),
              init);
  combine.map(combiner->getOperand(0) == acc ? combiner->getOperand(1)
                                             : combiner->getOperand(0),
              total);
  values.map(loop.getResult(0), b.clone(*combiner, combine)->getResult(0));
}

void KernelBuilder::buildBlockPerRow(OpBuilder &b, const RowPlan &plan) {
  Location loc = op.getLoc();
  SmallVector<int64_t> outer(ranges.begin(), ranges.begin() + plan.numOuter);
  SmallVector<int64_t> innerExtents(ranges.begin() + plan.numOuter,
                                    ranges.end());
  int64_t rows = 1, inner = 1;
  for (int64_t e : outer)
    rows *= e;
  for (int64_t e : innerExtents)
    inner *= e;
  gpu::LaunchOp launch = createLaunch(b, rows, plan.threads);
  b.setInsertionPointToStart(&launch.getBody().front());
  rebuildCapturedViews(b);
  Value tid = launch.getThreadIds().x;
  SmallVector<Value> ivs(ranges.size());
  if (!outer.empty())
    for (auto [d, v] : llvm::enumerate(
             delinearize(b, loc, launch.getBlockIds().x, outer)))
      ivs[d] = v;

  Block &body = op.getRegion().front();
  IRMapping values;
  for (Operation &nested : body.without_terminator()) {
    if (!plan.uniform.contains(&nested))
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(nested))
      values.map(index.getResult(), ivs[index.getDim()]);
    else if (plan.rowLoops.contains(&nested))
      buildCooperativeLoop(b, cast<scf::ForOp>(nested), tid, plan.threads,
                           values);
    else
      cloneIntoKernel(b, nested, values);
  }
  // The rest of the body, for each inner point this thread owns.
  auto loop = scf::ForOp::create(b, loc, tid, indexConstant(b, loc, inner),
                                 indexConstant(b, loc, plan.threads));
  b.setInsertionPointToStart(loop.getBody());
  if (!innerExtents.empty())
    for (auto [i, v] : llvm::enumerate(
             delinearize(b, loc, loop.getInductionVar(), innerExtents)))
      ivs[plan.numOuter + i] = v;
  for (Operation &nested : body.without_terminator()) {
    if (plan.uniform.contains(&nested))
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(nested))
      values.map(index.getResult(), ivs[index.getDim()]);
    else
      cloneIntoKernel(b, nested, values);
  }
  for (auto [out, value] :
       llvm::zip_equal(op.getDpsInitsMutable(),
                       body.getTerminator()->getOperands())) {
    Value buffer = rebuildInKernel(b, out.get(), kernelValues);
    memref::StoreOp::create(
        b, loc, values.lookupOrDefault(value), buffer,
        applyMap(b, loc, op.getMatchingIndexingMap(&out), ivs));
  }
  b.setInsertionPointAfter(loop);
  gpu::TerminatorOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// Row kernels: a warp or a block per row, the row's strip in registers
//===----------------------------------------------------------------------===//

/// Rows up to this long get a warp each; longer ones a block.
constexpr int64_t kMaxWarpRow = 1024;
/// Positions of the row one thread keeps in registers, at most.
constexpr int64_t kMaxStripSlots = 32;


/// Whether a warp butterfly can move values of `type` (gpu.shuffle moves
/// 32-bit values; narrower floats travel extended).
static bool shuffleable(Type type) {
  if (auto f = dyn_cast<FloatType>(type))
    return f.getWidth() <= 32;
  return type.isInteger(32);
}

void KernelBuilder::cloneShared(OpBuilder &b, Operation &inner,
                                IRMapping &values) {
  inner.walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (isa<MemRefType>(operand.getType()) &&
          !op->isAncestor(operand.getParentBlock()->getParentOp()) &&
          !values.contains(operand))
        values.map(operand, rebuildInKernel(b, operand, kernelValues));
  });
  shared.clone(b, inner, values);
}

// The row plan of planRows (rows: the outer coordinates; row loops: the
// reductions over the row), with each thread owning fixed positions of the
// row instead of striding over it per loop. A row of at most 1024, when
// there are rows for every SM (sm-count), gets a warp (up to blockSize / 32
// rows per block, fewer while that leaves SMs without a block); a longer
// row, or fewer rows, a block of 64-1024 threads (about 8 positions each). Each thread evaluates, for each of its
// positions (lane + s * threads, s < slots), every row loop's body in turn
// and combines the terms in registers; a loop's partials meet in a
// gpu.shuffle xor butterfly (warp: every lane ends with the total, in the
// same order, so the result is deterministic) or a gpu.all_reduce (block:
// warp shuffles, then shared memory across warps). Then the rest of the body
// for each position, and the stores. The loop bodies and the rest are
// cloned straight-line through a SharedCloner, so a producer that several
// phases read at the same position (a softmax's input, a fused matmul row)
// is computed once and stays in registers. Positions past a loop's length
// read the last element (clamped) and are dropped with a select; positions
// past the row do not store.
std::optional<KernelBuilder::StripShape>
KernelBuilder::planStrip(const RowPlan &plan,
                         std::optional<StripShape> given, std::string &why) {
  int64_t rows = 1, inner = 1, longest = 0;
  for (int64_t e : ArrayRef(ranges).take_front(plan.numOuter))
    rows *= e;
  for (int64_t e : ArrayRef(ranges).drop_front(plan.numOuter))
    inner *= e;
  for (Operation *loopOp : plan.rowLoops) {
    auto loop = cast<scf::ForOp>(loopOp);
    Operation *combiner = loopCombiner(loop);
    if (!combiner->getResult(0).hasOneUse()) {
      why = "a row loop's combined value is used more than once";
      return std::nullopt;
    }
    longest =
        std::max(longest, *getConstantIntValue(loop.getUpperBound()));
  }
  int64_t length = std::max(longest, inner);
  StripShape shape;
  if (given) {
    shape = *given;
  } else {
    // A warp per row needs rows for every SM (fewer rows leave SMs idle: a
    // block per row spreads each row over more threads instead).
    bool warp = length <= kMaxWarpRow && rows >= target.smCount;
    shape.threads =
        warp ? kWarpSize
             : std::clamp<int64_t>(llvm::PowerOf2Ceil(
                                       static_cast<uint64_t>((length + 7) / 8)),
                                   64, 1024);
    // Up to blockSize / 32 rows per block, fewer while that would leave
    // SMs without a block.
    shape.rowsPerBlock =
        warp ? std::clamp<int64_t>(
                   (rows + target.smCount - 1) / target.smCount, 1,
                   std::max<int64_t>(blockSize / kWarpSize, 1))
             : 1;
  }
  bool warp = shape.threads == kWarpSize;
  if ((length + shape.threads - 1) / shape.threads > kMaxStripSlots) {
    why = "rows of " + std::to_string(length) + " need more than " +
          std::to_string(kMaxStripSlots) + " positions a thread with " +
          std::to_string(shape.threads) + " threads";
    return std::nullopt;
  }
  if (warp && llvm::any_of(plan.rowLoops, [](Operation *loop) {
        return !shuffleable(
            cast<scf::ForOp>(loop).getRegionIterArgs().front().getType());
      })) {
    why = "a row loop's accumulator is wider than a warp shuffle moves";
    return std::nullopt;
  }
  return shape;
}

void KernelBuilder::buildStripRows(OpBuilder &b, const RowPlan &plan,
                                   const StripShape &shape) {
  Location loc = op.getLoc();
  Block &body = op.getRegion().front();
  SmallVector<int64_t> outer(ranges.begin(), ranges.begin() + plan.numOuter);
  SmallVector<int64_t> innerExtents(ranges.begin() + plan.numOuter,
                                    ranges.end());
  int64_t rows = 1, inner = 1, longest = 0;
  for (int64_t e : outer)
    rows *= e;
  for (int64_t e : innerExtents)
    inner *= e;
  for (Operation *loopOp : plan.rowLoops)
    longest = std::max(longest, *getConstantIntValue(
                                    cast<scf::ForOp>(loopOp).getUpperBound()));
  int64_t length = std::max(longest, inner);
  bool warp = shape.threads == kWarpSize;
  int64_t threads = shape.threads;
  int64_t slots = (length + threads - 1) / threads;
  int64_t rowsPerBlock = shape.rowsPerBlock;
  gpu::LaunchOp launch =
      createLaunch(b, (rows + rowsPerBlock - 1) / rowsPerBlock,
                   warp ? rowsPerBlock * kWarpSize : threads);
  b.setInsertionPointToStart(&launch.getBody().front());
  rebuildCapturedViews(b);
  auto terminator = gpu::TerminatorOp::create(b, loc);
  b.setInsertionPoint(terminator);
  Value lane = launch.getThreadIds().x, row = launch.getBlockIds().x;
  if (warp) {
    Value warpSize = indexConstant(b, loc, kWarpSize);
    Value warpId = arith::DivUIOp::create(b, loc, lane, warpSize);
    lane = arith::RemUIOp::create(b, loc, lane, warpSize);
    row = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, row,
                              indexConstant(b, loc, rowsPerBlock)),
        warpId);
    if (rows % rowsPerBlock != 0) {
      // Warp-uniform: a warp past the last row skips its shuffles whole.
      Value live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         row, indexConstant(b, loc, rows));
      auto guard = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
    }
  }
  SmallVector<Value> ivs(ranges.size());
  if (!outer.empty())
    for (auto [d, v] : llvm::enumerate(delinearize(b, loc, row, outer)))
      ivs[d] = v;

  // Position s of this thread, clamped into [0, bound), and whether it is
  // inside (null: statically always).
  SmallVector<Value> positions(slots);
  std::map<std::pair<int64_t, int64_t>, Value> clamped, inside;
  auto position = [&](int64_t s) {
    if (!positions[s])
      positions[s] =
          s == 0 ? lane
                 : Value(arith::AddIOp::create(
                       b, loc, lane, indexConstant(b, loc, s * threads)));
    return positions[s];
  };
  auto at = [&](int64_t s, int64_t bound) -> Value {
    if ((s + 1) * threads <= bound)
      return position(s);
    Value &v = clamped[{s, bound}];
    if (!v)
      v = arith::MinUIOp::create(b, loc, position(s),
                                 indexConstant(b, loc, bound - 1));
    return v;
  };
  auto inBounds = [&](int64_t s, int64_t bound) -> Value {
    if ((s + 1) * threads <= bound)
      return nullptr;
    Value &v = inside[{s, bound}];
    if (!v)
      v = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                position(s), indexConstant(b, loc, bound));
    return v;
  };

  auto reduceRowLoop = [&](scf::ForOp loop, IRMapping &values) {
    Operation *combiner = loopCombiner(loop);
    BlockArgument acc = loop.getRegionIterArgs().front();
    Type type = acc.getType();
    Combiner kind = *classifyCombiner(combiner, type);
    int64_t bound = *getConstantIntValue(loop.getUpperBound());
    Value term = combiner->getOperand(0) == acc ? combiner->getOperand(1)
                                                : combiner->getOperand(0);
    // The first term starts the partial (no identity to fold, except for
    // a lane with no position inside the loop).
    Value partial;
    for (int64_t s = 0; s < slots && s * threads < bound; ++s) {
      IRMapping slot = values;
      slot.map(loop.getInductionVar(), at(s, bound));
      for (Operation &nested : loop.getBody()->without_terminator())
        if (&nested != combiner)
          cloneShared(b, nested, slot);
      Value next = slot.lookupOrDefault(term);
      if (partial)
        next = combineWith(b, combiner, acc, partial, next);
      if (Value ok = inBounds(s, bound))
        next = arith::SelectOp::create(
            b, loc, ok, next,
            partial ? partial : typedConstant(b, loc, type, kind.identity));
      partial = next;
    }
    Value total;
    if (warp) {
      total = partial;
      for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
        Value moved = total;
        bool narrow = isa<FloatType>(type) && type.getIntOrFloatBitWidth() < 32;
        if (narrow)
          moved = arith::ExtFOp::create(b, loc, b.getF32Type(), moved);
        Value shuffled =
            gpu::ShuffleOp::create(b, loc, moved, offset, kWarpSize,
                                   gpu::ShuffleMode::XOR)
                .getShuffleResult();
        if (narrow)
          shuffled = arith::TruncFOp::create(b, loc, type, shuffled);
        total = combineWith(b, combiner, acc, total, shuffled);
      }
    } else {
      total = gpu::AllReduceOp::create(
          b, loc, partial,
          gpu::AllReduceOperationAttr::get(b.getContext(), kind.kind),
          b.getUnitAttr());
    }
    Value init = values.lookupOrDefault(loop.getInitArgs().front());
    values.map(loop.getResult(0), combineWith(b, combiner, acc, init, total));
  };

  IRMapping values;
  for (Operation &nested : body.without_terminator()) {
    if (!plan.uniform.contains(&nested))
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(nested))
      values.map(index.getResult(), ivs[index.getDim()]);
    else if (plan.rowLoops.contains(&nested))
      reduceRowLoop(cast<scf::ForOp>(nested), values);
    else
      cloneShared(b, nested, values);
  }

  // The rest of the body at each position; stores after the last read.
  struct Point {
    Value inside;
    SmallVector<Value> ivs, results;
  };
  SmallVector<Point> points;
  for (int64_t s = 0; s < slots && s * threads < inner; ++s) {
    Point point{inBounds(s, inner), ivs, {}};
    if (!innerExtents.empty())
      for (auto [i, v] :
           llvm::enumerate(delinearize(b, loc, at(s, inner), innerExtents)))
        point.ivs[plan.numOuter + i] = v;
    IRMapping slot = values;
    for (Operation &nested : body.without_terminator()) {
      if (plan.uniform.contains(&nested))
        continue;
      if (auto index = dyn_cast<linalg::IndexOp>(nested))
        slot.map(index.getResult(), point.ivs[index.getDim()]);
      else
        cloneShared(b, nested, slot);
    }
    for (Value v : body.getTerminator()->getOperands())
      point.results.push_back(slot.lookupOrDefault(v));
    points.push_back(std::move(point));
  }
  for (Point &point : points) {
    OpBuilder::InsertionGuard g(b);
    if (point.inside) {
      auto guard =
          scf::IfOp::create(b, loc, point.inside, /*withElseRegion=*/false);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
    }
    for (auto [out, value] :
         llvm::zip_equal(op.getDpsInitsMutable(), point.results)) {
      Value buffer = rebuildInKernel(b, out.get(), kernelValues);
      memref::StoreOp::create(
          b, loc, value, buffer,
          applyMap(b, loc, op.getMatchingIndexingMap(&out), point.ivs));
    }
  }
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
    TargetShape target{blockSize, smCount, maxThreadsPerSm};
    for (linalg::GenericOp generic : generics) {
      auto config = generic->getAttrOfType<kiln::GenericKernelAttr>(kKernelAttr);
      if (!config) {
        generic.emitOpError() << "has no kiln.kernel = #kiln.generic_kernel "
                                 "(kiln-select-generic-kernels decides it)";
        return signalPassFailure();
      }
      Operation *before = generic->getPrevNode();
      if (failed(KernelBuilder(generic, target).follow(b, config)))
        return signalPassFailure();
      for (Operation *at = before ? before->getNextNode()
                                  : &generic->getBlock()->front();
           at != generic.getOperation(); at = at->getNextNode())
        if (isa<gpu::LaunchOp>(at))
          at->setAttr(kKernelAttr, config);
      generic.erase();
    }
    // Outlining drops the launches' attributes: the function lists their
    // decisions in launch order, and kiln-name-kernels puts each on its
    // gpu.launch_func (kilnc --stats names each kernel's strategy).
    SmallVector<Attribute> configs;
    func.walk([&](gpu::LaunchOp launch) {
      if (Attribute config = launch->getAttr(kKernelAttr))
        configs.push_back(config);
    });
    if (!configs.empty())
      func->setAttr(kLaunchKernelsAttr, b.getArrayAttr(configs));
  }
};

/// Decides each generic's kernel (KernelBuilder::select) and records it as
/// `kiln.kernel`; kiln-map-to-gpu follows it.
struct SelectGenericKernelsPass
    : kiln::impl::SelectGenericKernelsPassBase<SelectGenericKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    TargetShape target{blockSize, smCount, maxThreadsPerSm};
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

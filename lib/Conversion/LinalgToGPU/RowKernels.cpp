//===- RowKernels.cpp - Kernels for fused rows ----------------------------===//
//
// kiln-map-to-gpu's kernels for a fused generic whose body holds reduction
// loops over the row (kiln-collapse-fusions: softmax, layer norm, a fused
// matmul row): planRows finds the rows; a block per row strides each loop
// over its threads (block_rows), or a warp or block keeps the row's strip
// in registers (strip_rows). See docs/architecture.md, "Code generation
// decisions".
//
//===----------------------------------------------------------------------===//

#include "GenericKernelBuilder.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <map>

using namespace mlir;

namespace kiln::mapping {

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
  if (!outer.empty())
    linear = {rows, 1};
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
  if (plan.numOuter > 0)
    linear = {rows, warp ? rowsPerBlock : 1};
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
      // gpu.all_reduce lowers to 32-bit shuffles: a bf16/f16 partial is
      // combined in f32 (exact for max and min; a sum rounds once).
      bool narrow = isa<FloatType>(type) && type.getIntOrFloatBitWidth() < 32;
      Value wide = narrow ? arith::ExtFOp::create(b, loc, b.getF32Type(),
                                                  partial)
                                .getResult()
                          : partial;
      total = gpu::AllReduceOp::create(
          b, loc, wide,
          gpu::AllReduceOperationAttr::get(b.getContext(), kind.kind),
          b.getUnitAttr());
      if (narrow)
        total = arith::TruncFOp::create(b, loc, type, total);
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

} // namespace kiln::mapping

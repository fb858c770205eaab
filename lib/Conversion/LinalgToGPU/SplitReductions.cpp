//===- SplitReductions.cpp - Column and whole-tensor reductions -----------===//
//
// Fused reductions whose every output is one row: an all-parallel generic
// whose body's row loops (`scf.for` with a combiner, see planRows in
// MapToGpu.cpp) depend on all the output coordinates. The row kernels give
// such an output a warp or a block whose threads stride over the loop;
// that suits a row that is contiguous in memory, but not
//
//   - a column reduction (ReduceSum over axis 0, batch-norm statistics
//     over N, H, W of NHWC): the row is strided, and consecutive outputs
//     read consecutive addresses. Here a block has 32 x 8 threads: x over 32
//     consecutive outputs (coalesced reads), y over slices of the row, each
//     thread's partial to shared memory [8][33], then each output's 8
//     partials combined in a fixed order. When that leaves SMs without a
//     block (fewer output tiles than SMs) and the row is long, the row is
//     split over S blocks (grid S x
//     output tiles) that write partials to a scratch buffer, and a second
//     kernel (a thread per output) combines the S partials in order;
//   - a whole-tensor reduction (a scalar or at most 32 outputs, rows over
//     8192): pass 1 runs G blocks of 256 threads per output over a
//     grid-stride range of the row (G sized to fill the GPU: SM count x
//     resident blocks per SM), each block's total (gpu.all_reduce) to a
//     scratch buffer; pass 2, a block per output, reduces its G partials
//     the same way.
//
// Both are deterministic: the partials are combined in an order fixed by
// the launch shape, never by atomics (float addition is not associative, so
// atomics would make a sum's last bits differ from run to run; a training
// loss and its gradients should not). Scratch buffers are memref.alloc in
// the function, which the memory plan (ArtifactBuilder) places in the arena
// like any intermediate. A body with several row loops (LogSumExp: the max,
// then a sum that reads it) runs them in turn: in one kernel through shared
// memory, or, split, as one pair of kernels per loop, each loop's result
// stored for the next ones to read.
//
//===----------------------------------------------------------------------===//

#include "KernelMapping.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"

#include <functional>

using namespace mlir;

namespace kiln::mapping {
namespace {

constexpr int64_t kTile = 32;      // Outputs per column block (threads x).
constexpr int64_t kSlices = 8;     // Row slices per column block (threads y).
constexpr int64_t kWholeThreads = 256;
/// Rows up to this long stay on the row kernels (one block of 1024 threads,
/// 8 positions each, reads them in one go).
constexpr int64_t kMinWholeRow = 8192;
constexpr int64_t kMaxWholeOutputs = 32;
/// A split column slice has at least this many terms per thread.
constexpr int64_t kMinTermsPerThread = 32;

enum class Mode { Column, Whole };

class ReductionBuilder {
public:
  ReductionBuilder(linalg::GenericOp op, ArrayRef<scf::ForOp> loops,
                   const TargetShape &target)
      : op(op), loops(loops.begin(), loops.end()), target(target),
        ranges(op.getStaticLoopRanges()) {
    for (int64_t e : ranges)
      outputs *= e;
  }
  /// The kernel the selection gives `op`: a column reduction, or a
  /// whole-tensor one, and its splits; nothing when neither applies.
  std::optional<SplitReductionShape> plan();
  /// Builds `shape`; false (building nothing) with `why` when `op` cannot
  /// have it.
  bool build(OpBuilder &b, const SplitReductionShape &shape,
             std::string &why);

private:
  /// What every split reduction needs: row loops of constant length in a
  /// generic directly in a function.
  bool eligible();
  Block *body() { return &op.getRegion().front(); }
  int64_t length(unsigned i) {
    return *getConstantIntValue(loops[i].getUpperBound());
  }
  Type accType(unsigned i) {
    return loops[i].getRegionIterArgs().front().getType();
  }
  bool isColumn();
  gpu::LaunchOp launch(OpBuilder &b, int64_t grid, int64_t bx, int64_t by,
                       TypeRange workgroup = {});
  /// At the top of a kernel: every buffer or view from outside rebuilt once.
  void captureAll(OpBuilder &b, IRMapping &values);
  /// Clones the body in order with linalg.index at `ivs`; row loop j's
  /// result is `onLoop(j, values)`. Stops before row loop `stop`.
  void cloneBody(OpBuilder &b, IRMapping &values, ArrayRef<Value> ivs,
                 function_ref<Value(unsigned, IRMapping &)> onLoop,
                 int stop = -1);
  /// This thread's partial of row loop i over [lb, ub) step `step`.
  Value partial(OpBuilder &b, unsigned i, IRMapping &values, Value lb,
                Value ub, Value step);
  void storeResults(OpBuilder &b, IRMapping &values, ArrayRef<Value> ivs);
  void buildColumnSingle(OpBuilder &b);
  void buildSplit(OpBuilder &b, Mode mode, int64_t splits);

  linalg::GenericOp op;
  SmallVector<scf::ForOp> loops;
  TargetShape target;
  SmallVector<int64_t> ranges;
  int64_t outputs = 1;
};

bool ReductionBuilder::isColumn() {
  // The innermost output dimension that is not 1.
  std::optional<unsigned> inner;
  for (unsigned d = 0; d < ranges.size(); ++d)
    if (ranges[d] > 1)
      inner = d;
  if (!inner)
    return false;
  bool column = false;
  for (scf::ForOp loop : loops)
    loop.walk([&](memref::LoadOp load) {
      if (load.getIndices().empty())
        return;
      auto index = load.getIndices().back().getDefiningOp<linalg::IndexOp>();
      auto type = cast<MemRefType>(load.getMemRef().getType());
      SmallVector<int64_t> strides;
      int64_t offset;
      if (index && index.getDim() == *inner &&
          succeeded(type.getStridesAndOffset(strides, offset)) &&
          strides.back() == 1)
        column = true;
    });
  return column;
}

gpu::LaunchOp ReductionBuilder::launch(OpBuilder &b, int64_t grid, int64_t bx,
                                       int64_t by, TypeRange workgroup) {
  Location loc = op.getLoc();
  Value one = indexConstant(b, loc, 1);
  auto l = gpu::LaunchOp::create(
      b, loc, indexConstant(b, loc, grid), one, one, indexConstant(b, loc, bx),
      indexConstant(b, loc, by), one, /*dynamicSharedMemorySize=*/nullptr,
      /*asyncTokenType=*/nullptr, {}, workgroup);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToEnd(&l.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  return l;
}

void ReductionBuilder::captureAll(OpBuilder &b, IRMapping &values) {
  auto capture = [&](Value v) {
    if (isa<MemRefType>(v.getType()) &&
        !op->isAncestor(v.getParentBlock()->getParentOp()))
      values.map(v, rebuildInKernel(b, v, values));
  };
  for (Value operand : op->getOperands())
    capture(operand);
  op.getRegion().walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      capture(operand);
  });
}

void ReductionBuilder::cloneBody(
    OpBuilder &b, IRMapping &values, ArrayRef<Value> ivs,
    function_ref<Value(unsigned, IRMapping &)> onLoop, int stop) {
  for (Operation &inner : body()->without_terminator()) {
    auto it = llvm::find(loops, dyn_cast<scf::ForOp>(inner));
    if (it != loops.end()) {
      unsigned j = it - loops.begin();
      if (static_cast<int>(j) == stop)
        return;
      values.map(inner.getResult(0), onLoop(j, values));
      continue;
    }
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      values.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, values);
  }
}

Value ReductionBuilder::partial(OpBuilder &b, unsigned i, IRMapping &values,
                                Value lb, Value ub, Value step) {
  scf::ForOp loop = loops[i];
  Location loc = loop.getLoc();
  Operation *combiner = loopCombiner(loop);
  BlockArgument acc = loop.getRegionIterArgs().front();
  Combiner kind = *classifyCombiner(combiner, acc.getType());
  Value identity = typedConstant(b, loc, acc.getType(), kind.identity);
  auto strided = scf::ForOp::create(b, loc, lb, ub, step, ValueRange(identity));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(strided.getBody());
  IRMapping inner = values;
  inner.map(loop.getInductionVar(), strided.getInductionVar());
  inner.map(acc, strided.getRegionIterArgs().front());
  for (Operation &nested : loop.getBody()->without_terminator())
    b.clone(nested, inner);
  scf::YieldOp::create(b, loc, inner.lookup(combiner->getResult(0)));
  return strided.getResult(0);
}

void ReductionBuilder::storeResults(OpBuilder &b, IRMapping &values,
                                    ArrayRef<Value> ivs) {
  for (auto [out, value] :
       llvm::zip_equal(op.getDpsInitsMutable(),
                       body()->getTerminator()->getOperands()))
    memref::StoreOp::create(
        b, op.getLoc(), values.lookupOrDefault(value),
        values.lookupOrDefault(out.get()),
        applyMap(b, op.getLoc(), op.getMatchingIndexingMap(&out), ivs));
}

/// The combination of tile[0..kSlices)[tx] in order.
static Value foldSlices(OpBuilder &b, Location loc, Operation *combiner,
                        Value acc, Value tile, Value tx) {
  Value total;
  for (int64_t s = 0; s < kSlices; ++s) {
    Value v = memref::LoadOp::create(b, loc, tile,
                                     ValueRange{indexConstant(b, loc, s), tx});
    total = total ? combineWith(b, combiner, acc, total, v) : v;
  }
  return total;
}

static MemRefType sliceTileType(MLIRContext *ctx, Type type) {
  return MemRefType::get(
      {kSlices, kTile + 1}, type, MemRefLayoutAttrInterface{},
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
}

// One kernel: blocks of 32 x 8 threads over 32 consecutive outputs, the
// row in 8 slices, each row loop's partials through shared memory.
void ReductionBuilder::buildColumnSingle(OpBuilder &b) {
  Location loc = op.getLoc();
  SmallVector<Type> tiles;
  for (unsigned i = 0; i < loops.size(); ++i)
    tiles.push_back(sliceTileType(op.getContext(), accType(i)));
  gpu::LaunchOp l =
      launch(b, (outputs + kTile - 1) / kTile, kTile, kSlices, tiles);
  b.setInsertionPointToStart(&l.getBody().front());
  auto c = [&](int64_t v) { return indexConstant(b, loc, v); };
  IRMapping values;
  captureAll(b, values);
  Value tx = l.getThreadIds().x, ty = l.getThreadIds().y;
  Value o = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, l.getBlockIds().x, c(kTile)), tx);
  Value clamped = arith::MinUIOp::create(b, loc, o, c(outputs - 1));
  SmallVector<Value> ivs = delinearize(b, loc, clamped, ranges);
  cloneBody(b, values, ivs, [&](unsigned i, IRMapping &v) -> Value {
    Operation *combiner = loopCombiner(loops[i]);
    Value acc = loops[i].getRegionIterArgs().front();
    Value mine = partial(b, i, v, ty, c(length(i)), c(kSlices));
    Value tile = l.getWorkgroupAttributions()[i];
    memref::StoreOp::create(b, loc, mine, tile, ValueRange{ty, tx});
    gpu::BarrierOp::create(b, loc);
    Value total = foldSlices(b, loc, combiner, acc, tile, tx);
    return combineWith(b, combiner, acc,
                       v.lookupOrDefault(loops[i].getInitArgs().front()),
                       total);
  });
  Value live = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, o, c(outputs)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ty, c(0)));
  auto guard = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  storeResults(b, values, ivs);
}

// A pair of kernels per row loop: partials of `splits` slices of the row
// into a scratch buffer, then their combination in order.
void ReductionBuilder::buildSplit(OpBuilder &b, Mode mode, int64_t splits) {
  Location loc = op.getLoc();
  auto c = [&](int64_t v) { return indexConstant(b, loc, v); };
  int64_t tilesP = (outputs + kTile - 1) / kTile;
  // Each finished loop's result per output, for the later kernels.
  SmallVector<Value> results;
  for (unsigned i = 0; i < loops.size(); ++i) {
    Type type = accType(i);
    Operation *combiner = loopCombiner(loops[i]);
    Value acc = loops[i].getRegionIterArgs().front();
    Combiner kind = *classifyCombiner(combiner, type);
    auto reduceKind =
        gpu::AllReduceOperationAttr::get(op.getContext(), kind.kind);
    bool last = i + 1 == loops.size();
    // Column: [splits][outputs]; whole: [outputs][splits].
    SmallVector<int64_t> shape = {outputs, splits};
    if (mode == Mode::Column)
      std::swap(shape[0], shape[1]);
    Value scratch =
        memref::AllocOp::create(b, loc, MemRefType::get(shape, type));
    Value result;
    if (!last)
      result = memref::AllocOp::create(b, loc, MemRefType::get({outputs}, type));
    auto earlier = [&](Value o) {
      return [&, o](unsigned j, IRMapping &v) -> Value {
        return memref::LoadOp::create(b, loc, v.lookupOrDefault(results[j]),
                                      ValueRange{o});
      };
    };

    // Pass 1: partials.
    {
      OpBuilder::InsertionGuard g(b);
      gpu::LaunchOp l =
          mode == Mode::Column
              ? launch(b, tilesP * splits, kTile, kSlices,
                       {sliceTileType(op.getContext(), type)})
              : launch(b, outputs * splits, kWholeThreads, 1);
      b.setInsertionPointToStart(&l.getBody().front());
      IRMapping values;
      captureAll(b, values);
      for (Value r : results)
        values.map(r, rebuildInKernel(b, r, values));
      Value bid = l.getBlockIds().x, tx = l.getThreadIds().x;
      if (mode == Mode::Column) {
        Value ty = l.getThreadIds().y;
        Value s = arith::DivUIOp::create(b, loc, bid, c(tilesP));
        Value tile = arith::RemUIOp::create(b, loc, bid, c(tilesP));
        Value o = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, tile, c(kTile)), tx);
        Value oc = arith::MinUIOp::create(b, loc, o, c(outputs - 1));
        SmallVector<Value> ivs = delinearize(b, loc, oc, ranges);
        cloneBody(b, values, ivs, earlier(oc), i);
        int64_t chunk = (length(i) + splits - 1) / splits;
        Value start = arith::MulIOp::create(b, loc, s, c(chunk));
        Value lb = arith::AddIOp::create(b, loc, start, ty);
        Value ub = arith::MinUIOp::create(
            b, loc, arith::AddIOp::create(b, loc, start, c(chunk)),
            c(length(i)));
        Value mine = partial(b, i, values, lb, ub, c(kSlices));
        Value smem = l.getWorkgroupAttributions()[0];
        memref::StoreOp::create(b, loc, mine, smem, ValueRange{ty, tx});
        gpu::BarrierOp::create(b, loc);
        Value live = arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, o,
                                  c(outputs)),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ty, c(0)));
        auto guard = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
        b.setInsertionPointToStart(&guard.getThenRegion().front());
        memref::StoreOp::create(b, loc,
                                foldSlices(b, loc, combiner, acc, smem, tx),
                                scratch, ValueRange{s, o});
      } else {
        Value o = arith::DivUIOp::create(b, loc, bid, c(splits));
        Value g = arith::RemUIOp::create(b, loc, bid, c(splits));
        SmallVector<Value> ivs = delinearize(b, loc, o, ranges);
        cloneBody(b, values, ivs, earlier(o), i);
        Value lb = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, g, c(kWholeThreads)), tx);
        Value mine = partial(b, i, values, lb, c(length(i)),
                             c(splits * kWholeThreads));
        Value total = gpu::AllReduceOp::create(b, loc, mine, reduceKind,
                                               b.getUnitAttr());
        auto guard = scf::IfOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tx, c(0)),
            /*withElseRegion=*/false);
        b.setInsertionPointToStart(&guard.getThenRegion().front());
        memref::StoreOp::create(b, loc, total, scratch, ValueRange{o, g});
      }
    }

    // Pass 2: each output's partials in order, then the loop's result (or,
    // after the last loop, the rest of the body and the stores).
    {
      OpBuilder::InsertionGuard g(b);
      int64_t threads =
          mode == Mode::Column
              ? target.blockSize
              : std::min<int64_t>(kWholeThreads,
                                  llvm::PowerOf2Ceil(
                                      static_cast<uint64_t>(splits)));
      int64_t grid = mode == Mode::Column
                         ? (outputs + threads - 1) / threads
                         : outputs;
      gpu::LaunchOp l = launch(b, grid, threads, 1);
      b.setInsertionPointToStart(&l.getBody().front());
      IRMapping values;
      captureAll(b, values);
      for (Value r : results)
        values.map(r, rebuildInKernel(b, r, values));
      Value bid = l.getBlockIds().x, tx = l.getThreadIds().x;
      Value o, total, store;
      if (mode == Mode::Column) {
        o = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, bid, c(threads)), tx);
        store = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, o,
                                      c(outputs));
        auto guard = scf::IfOp::create(b, loc, store, /*withElseRegion=*/false);
        b.setInsertionPointToStart(&guard.getThenRegion().front());
        total = memref::LoadOp::create(b, loc, scratch, ValueRange{c(0), o});
        auto fold = scf::ForOp::create(b, loc, c(1), c(splits), c(1),
                                       ValueRange(total));
        {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(fold.getBody());
          Value v = memref::LoadOp::create(
              b, loc, scratch, ValueRange{fold.getInductionVar(), o});
          scf::YieldOp::create(
              b, loc,
              combineWith(b, combiner, acc, fold.getRegionIterArgs().front(),
                          v));
        }
        total = fold.getResult(0);
        store = nullptr; // Already guarded.
      } else {
        o = bid;
        Value identity = typedConstant(b, loc, type, kind.identity);
        auto strided = scf::ForOp::create(b, loc, tx, c(splits), c(threads),
                                          ValueRange(identity));
        {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(strided.getBody());
          Value v = memref::LoadOp::create(
              b, loc, scratch, ValueRange{o, strided.getInductionVar()});
          scf::YieldOp::create(
              b, loc,
              combineWith(b, combiner, acc,
                          strided.getRegionIterArgs().front(), v));
        }
        total = gpu::AllReduceOp::create(b, loc, strided.getResult(0),
                                         reduceKind, b.getUnitAttr());
        store =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tx, c(0));
      }
      SmallVector<Value> ivs = delinearize(b, loc, o, ranges);
      Value finished;
      auto onLoop = [&](unsigned j, IRMapping &v) -> Value {
        if (j < i)
          return earlier(o)(j, v);
        finished = combineWith(b, combiner, acc,
                               v.lookupOrDefault(loops[i].getInitArgs().front()),
                               total);
        return finished;
      };
      if (!last) {
        cloneBody(b, values, ivs, onLoop, i);
        onLoop(i, values);
      } else {
        cloneBody(b, values, ivs, onLoop);
      }
      if (store) {
        auto guard = scf::IfOp::create(b, loc, store, /*withElseRegion=*/false);
        b.setInsertionPointToStart(&guard.getThenRegion().front());
      }
      if (!last)
        memref::StoreOp::create(b, loc, finished, values.lookupOrDefault(result),
                                ValueRange{o});
      else
        storeResults(b, values, ivs);
    }
    results.push_back(result);
  }
}

bool ReductionBuilder::eligible() {
  if (loops.empty() || outputs < 1 || !isa<func::FuncOp>(op->getParentOp()))
    return false;
  // Every loop's first op is its row (planRows checked lb 0, step 1).
  for (scf::ForOp loop : loops)
    if (!getConstantIntValue(loop.getUpperBound()))
      return false;
  return true;
}

std::optional<SplitReductionShape> ReductionBuilder::plan() {
  if (!eligible())
    return std::nullopt;
  int64_t longest = 0;
  for (unsigned i = 0; i < loops.size(); ++i)
    longest = std::max(longest, length(i));
  int64_t resident =
      target.smCount *
      std::max<int64_t>(target.maxThreadsPerSm / target.blockSize, 1);
  if (isColumn()) {
    // Split only when the output tiles leave SMs without a block: an extra
    // launch (a few µs) costs more than it buys on a GPU already filled.
    int64_t tilesP = (outputs + kTile - 1) / kTile;
    int64_t splits = tilesP >= target.smCount ? 1 : std::min<int64_t>(
        (resident + tilesP - 1) / tilesP,
        (longest + kSlices * kMinTermsPerThread - 1) /
            (kSlices * kMinTermsPerThread));
    return SplitReductionShape{/*column=*/true, std::max<int64_t>(splits, 1)};
  }
  if (outputs > kMaxWholeOutputs || longest <= kMinWholeRow)
    return std::nullopt;
  // gpu.all_reduce moves 32-bit values.
  for (unsigned i = 0; i < loops.size(); ++i)
    if (!accType(i).isF32() && !accType(i).isInteger(32))
      return std::nullopt;
  int64_t splits = std::clamp<int64_t>(
      (longest + kWholeThreads * 8 - 1) / (kWholeThreads * 8), 1,
      std::max<int64_t>((resident + outputs - 1) / outputs, 1));
  return SplitReductionShape{/*column=*/false, splits};
}

bool ReductionBuilder::build(OpBuilder &b, const SplitReductionShape &shape,
                             std::string &why) {
  if (!eligible()) {
    why = "no row loops of constant length over the whole output";
    return false;
  }
  if (shape.column) {
    if (!isColumn()) {
      why = "no read of the row is contiguous along the innermost output "
            "dimension";
      return false;
    }
    if (shape.splits <= 1)
      buildColumnSingle(b);
    else
      buildSplit(b, Mode::Column, shape.splits);
    return true;
  }
  if (outputs > kMaxWholeOutputs) {
    why = "more than " + std::to_string(kMaxWholeOutputs) + " outputs";
    return false;
  }
  for (unsigned i = 0; i < loops.size(); ++i)
    if (!accType(i).isF32() && !accType(i).isInteger(32)) {
      why = "an accumulator that is not f32 or i32 (gpu.all_reduce)";
      return false;
    }
  buildSplit(b, Mode::Whole, shape.splits);
  return true;
}

} // namespace

std::optional<SplitReductionShape>
planSplitReduction(linalg::GenericOp op, ArrayRef<scf::ForOp> rowLoops,
                   const TargetShape &target) {
  return ReductionBuilder(op, rowLoops, target).plan();
}

LogicalResult buildSplitReduction(OpBuilder &b, linalg::GenericOp op,
                                  ArrayRef<scf::ForOp> rowLoops,
                                  const TargetShape &target,
                                  const SplitReductionShape &shape,
                                  std::string &why) {
  return success(ReductionBuilder(op, rowLoops, target).build(b, shape, why));
}

} // namespace kiln::mapping

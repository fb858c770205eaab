//===- TiledTranspose.cpp - Transposes through shared-memory tiles --------===//
//
// A data-movement region (an all-parallel generic without loops in its body:
// a transpose, an NCHW<->NHWC layout change, with or without elementwise ops
// on the moved values) whose write is contiguous along loop dimension dW
// but one of whose reads is contiguous along another dimension dR. A thread
// per output (or the vectorised kernel) reads that input with a stride of
// extent(dR...) elements between consecutive threads: one 32-byte sector per
// element. Here each block moves a 32x32 tile of the (dR, dW) plane through
// shared memory, with 32x8 threads and 4 elements each:
//
//   phase 1: thread (tx, ty) reads, for k < 4, the point dR = R0 + tx,
//            dW = W0 + ty + 8k (consecutive tx: consecutive addresses) and
//            stores it to tile[ty + 8k][tx];
//   barrier;
//   phase 2: thread (tx, ty) takes the point dW = W0 + tx, dR = R0 + ty + 8k
//            from tile[tx][ty + 8k], runs the rest of the body (other
//            reads, elementwise ops) there and writes it (consecutive tx:
//            consecutive addresses).
//
// Rows of the tile are padded to an odd number of 4-byte words (one element
// for 4-byte types; 2 or 4 for 2- and 1-byte types; 8-byte types are
// accessed in half-warp phases, where one element of padding suffices), so
// that phase 2's column reads hit 32 distinct banks. Every read of the body
// contiguous along dR is staged this way (each in its own tile); the other
// dimensions (batch, the third dimension of a 3-D permutation) are folded
// into the block index. Points past the extents (ragged edges) neither read
// nor write. Any element type of at least 8 bits.
//
//===----------------------------------------------------------------------===//

#include "KernelMapping.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace kiln::mapping {
namespace {

constexpr int64_t kTile = 32;
constexpr int64_t kRowsPerPass = 8; // Threads in y; 4 elements each.

/// Whether `memref` is contiguous along its last dimension.
bool innermostContiguous(Value memref) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  if (!type || type.getRank() == 0)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

/// A read the tile stages: an input operand whose map ends in dR, or a body
/// load whose last index is `linalg.index dR` (its other indices computed
/// from loop coordinates only: `slice`, in body order).
struct Staged {
  OpOperand *operand = nullptr;
  memref::LoadOp load;
  SmallVector<Operation *> slice;
  Type type;
};

class TransposeBuilder {
public:
  TransposeBuilder(linalg::GenericOp op)
      : op(op), ranges(op.getStaticLoopRanges()) {}
  /// Builds the kernel; false (building nothing) when `op` is no
  /// transpose. With `dryRun`, only says whether it would build.
  bool build(OpBuilder &b, bool dryRun = false);

private:
  /// The innermost dimension of a read candidate, if it is one.
  /// The innermost dimension of a read candidate, if it is one; the
  /// dimensions its other indices depend on are added to `outerDims`.
  std::optional<unsigned> innermostDim(memref::LoadOp load,
                                       SmallVector<Operation *> &slice,
                                       llvm::SmallDenseSet<unsigned> &outerDims);
  Block *body() { return &op.getRegion().front(); }

  linalg::GenericOp op;
  SmallVector<int64_t> ranges;
  IRMapping kernelValues;
};

std::optional<unsigned>
TransposeBuilder::innermostDim(memref::LoadOp load,
                               SmallVector<Operation *> &slice,
                               llvm::SmallDenseSet<unsigned> &outerDims) {
  if (load->getBlock() != body() || load.getIndices().empty() ||
      !innermostContiguous(load.getMemRef()) ||
      op->isAncestor(load.getMemRef().getParentBlock()->getParentOp()))
    return std::nullopt;
  auto last = load.getIndices().back().getDefiningOp<linalg::IndexOp>();
  if (!last)
    return std::nullopt;
  // The indices' backward slice inside the body: pure, regionless, no loads
  // (a gather's data-dependent index is not a transpose).
  SetVector<Operation *> seen;
  SmallVector<Value> work(load.getIndices().begin(), load.getIndices().end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def) {
      if (v.getParentBlock() == body())
        return std::nullopt; // A block argument (an input's value).
      continue;
    }
    if (def->getBlock() != body() || seen.contains(def))
      continue;
    if (!isPure(def) || def->getNumRegions() != 0)
      return std::nullopt;
    seen.insert(def);
    work.append(def->getOperands().begin(), def->getOperands().end());
  }
  for (Operation &inner : *body())
    if (seen.contains(&inner))
      slice.push_back(&inner);
  // The loop dimensions the other indices depend on (a transpose's read
  // moves along the write's dimension there; a broadcast does not).
  for (Value index : load.getIndices().drop_back()) {
    SmallVector<Value> stack{index};
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != body())
        continue;
      if (auto dim = dyn_cast<linalg::IndexOp>(def))
        outerDims.insert(dim.getDim());
      stack.append(def->getOperands().begin(), def->getOperands().end());
    }
  }
  return last.getDim();
}

bool TransposeBuilder::build(OpBuilder &b, bool dryRun) {
  unsigned rank = ranges.size();
  if (rank < 2 || op.getNumDpsInits() < 1 ||
      llvm::any_of(op.getIteratorTypesArray(), [](utils::IteratorType t) {
        return t != utils::IteratorType::parallel;
      }))
    return false;
  for (Operation &inner : body()->without_terminator())
    if (inner.getNumRegions() != 0)
      return false;
  // The write's innermost dimension, the same for every output.
  std::optional<unsigned> writeDim;
  for (OpOperand &out : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&out);
    if (!map.getNumResults())
      return false;
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    if (!last || !innermostContiguous(out.get()) ||
        (writeDim && *writeDim != last.getPosition()))
      return false;
    writeDim = last.getPosition();
  }
  unsigned dW = *writeDim;

  // The reads contiguous along another dimension that move along dW in an
  // outer index (a broadcast along dW, x[i] in y[i, j], is no transpose):
  // the first one found picks dR, and every read contiguous along dR is
  // staged (a tile each).
  SmallVector<std::tuple<unsigned, Staged, bool>> candidates;
  for (OpOperand *operand : op.getDpsInputOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(operand);
    AffineMap map = op.getMatchingIndexingMap(operand);
    if (arg.use_empty() || !map.getNumResults() ||
        !innermostContiguous(operand->get()))
      continue;
    bool movesAlongW = llvm::any_of(
        map.getResults().drop_back(),
        [&](AffineExpr e) { return e.isFunctionOfDim(dW); });
    if (auto last = dyn_cast<AffineDimExpr>(map.getResults().back()))
      candidates.push_back({last.getPosition(),
                            Staged{operand, {}, {}, arg.getType()},
                            movesAlongW});
  }
  for (Operation &inner : body()->without_terminator()) {
    auto load = dyn_cast<memref::LoadOp>(inner);
    if (!load)
      continue;
    Staged staged{nullptr, load, {}, load.getType()};
    llvm::SmallDenseSet<unsigned> outerDims;
    if (std::optional<unsigned> d =
            innermostDim(load, staged.slice, outerDims))
      candidates.push_back(
          {*d, std::move(staged), outerDims.contains(dW)});
  }
  std::optional<unsigned> readDim;
  for (auto &[d, staged, movesAlongW] : candidates)
    if (d != dW && movesAlongW) {
      readDim = d;
      break;
    }
  if (!readDim)
    return false;
  unsigned dR = *readDim;
  if (ranges[dR] < 2 || ranges[dW] < 2)
    return false;
  SmallVector<Staged> staged;
  for (auto &[d, s, movesAlongW] : candidates) {
    if (d != dR || !movesAlongW)
      continue;
    if (!s.type.isIntOrFloat() || s.type.getIntOrFloatBitWidth() < 8 ||
        s.type.getIntOrFloatBitWidth() > 64)
      return false;
    staged.push_back(std::move(s));
  }

  // Tile rows padded to an odd number of 4-byte words.
  MLIRContext *ctx = op.getContext();
  auto workgroup =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  SmallVector<Type> tileTypes;
  for (Staged &s : staged) {
    int64_t bytes = s.type.getIntOrFloatBitWidth() / 8;
    int64_t pad = bytes >= 4 ? 1 : 4 / bytes;
    tileTypes.push_back(MemRefType::get({kTile, kTile + pad}, s.type,
                                        MemRefLayoutAttrInterface{},
                                        workgroup));
  }

  // Blocks: the other dimensions x tiles of dR x tiles of dW.
  SmallVector<unsigned> otherDims;
  SmallVector<int64_t> otherExtents;
  int64_t others = 1;
  for (unsigned d = 0; d < rank; ++d)
    if (d != dR && d != dW) {
      otherDims.push_back(d);
      otherExtents.push_back(ranges[d]);
      others *= ranges[d];
    }
  int64_t tilesR = (ranges[dR] + kTile - 1) / kTile;
  int64_t tilesW = (ranges[dW] + kTile - 1) / kTile;
  int64_t blocks = others * tilesR * tilesW;
  if (blocks > std::numeric_limits<int32_t>::max())
    return false;
  if (dryRun)
    return true;

  Location loc = op.getLoc();
  auto c = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value one = c(1);
  auto launch =
      gpu::LaunchOp::create(b, loc, c(blocks), one, one, c(kTile),
                            c(kRowsPerPass), one, /*dynamicSharedMemorySize=*/
                            nullptr, /*asyncTokenType=*/nullptr, {}, tileTypes);
  b.setInsertionPointToStart(&launch.getBody().front());
  auto terminator = gpu::TerminatorOp::create(b, loc);
  b.setInsertionPoint(terminator);
  ArrayRef<BlockArgument> tiles = launch.getWorkgroupAttributions();
  Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  SmallVector<Value> blockCoords =
      delinearize(b, loc, launch.getBlockIds().x, {others, tilesR, tilesW});
  SmallVector<Value> base(rank);
  if (!otherDims.empty())
    for (auto [d, v] : llvm::zip_equal(
             otherDims, delinearize(b, loc, blockCoords[0], otherExtents)))
      base[d] = v;
  Value r0 = arith::MulIOp::create(b, loc, blockCoords[1], c(kTile));
  Value w0 = arith::MulIOp::create(b, loc, blockCoords[2], c(kTile));

  // Runs `fn` at the point (dR = r, dW = w) when it is inside.
  auto guarded = [&](Value r, Value w, auto fn) {
    OpBuilder::InsertionGuard g(b);
    Value inside = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, r,
                              c(ranges[dR])),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, w,
                              c(ranges[dW])));
    auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<Value> ivs = base;
    ivs[dR] = r;
    ivs[dW] = w;
    fn(ivs);
  };
  auto captured = [&](Value v) { return rebuildInKernel(b, v, kernelValues); };
  // Buffers and views from outside, rebuilt once at the top (both phases
  // use them, each inside its own guards).
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()))
      captured(operand);
  op.getRegion().walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (isa<MemRefType>(operand.getType()) &&
          !op->isAncestor(operand.getParentBlock()->getParentOp()))
        captured(operand);
  });

  // Phase 1: coalesced along dR, into tile[w - w0][r - r0].
  Value r = arith::AddIOp::create(b, loc, r0, tx);
  for (int64_t k = 0; k < kTile / kRowsPerPass; ++k) {
    Value row = arith::AddIOp::create(b, loc, ty, c(k * kRowsPerPass));
    Value w = arith::AddIOp::create(b, loc, w0, row);
    guarded(r, w, [&](ArrayRef<Value> ivs) {
      for (auto [s, tile] : llvm::zip_equal(staged, tiles)) {
        Value value;
        if (s.operand) {
          value = memref::LoadOp::create(
              b, loc, captured(s.operand->get()),
              applyMap(b, loc, op.getMatchingIndexingMap(s.operand), ivs));
        } else {
          IRMapping values;
          for (Operation &inner : *body())
            if (auto index = dyn_cast<linalg::IndexOp>(inner))
              values.map(index.getResult(), ivs[index.getDim()]);
          for (Operation *inner : s.slice)
            if (!isa<linalg::IndexOp>(inner))
              b.clone(*inner, values);
          SmallVector<Value> indices;
          for (Value index : s.load.getIndices())
            indices.push_back(values.lookupOrDefault(index));
          value = memref::LoadOp::create(b, loc, captured(s.load.getMemRef()),
                                         indices);
        }
        memref::StoreOp::create(b, loc, value, tile, ValueRange{row, tx});
      }
    });
  }
  gpu::BarrierOp::create(b, loc);

  // Phase 2: coalesced along dW, from tile[w - w0][r - r0] (a column).
  Value w = arith::AddIOp::create(b, loc, w0, tx);
  for (int64_t k = 0; k < kTile / kRowsPerPass; ++k) {
    Value col = arith::AddIOp::create(b, loc, ty, c(k * kRowsPerPass));
    Value rr = arith::AddIOp::create(b, loc, r0, col);
    guarded(rr, w, [&](ArrayRef<Value> ivs) {
      IRMapping values;
      DenseSet<Operation *> skip;
      for (auto [s, tile] : llvm::zip_equal(staged, tiles)) {
        Value value = memref::LoadOp::create(b, loc, tile, ValueRange{tx, col});
        if (s.operand) {
          values.map(op.getMatchingBlockArgument(s.operand), value);
        } else {
          values.map(s.load.getResult(), value);
          skip.insert(s.load);
        }
      }
      for (OpOperand &operand : op->getOpOperands()) {
        BlockArgument arg = op.getMatchingBlockArgument(&operand);
        if (arg.use_empty() || values.contains(arg))
          continue;
        Value buffer = captured(operand.get());
        if (!isa<MemRefType>(buffer.getType())) {
          values.map(arg, buffer);
          continue;
        }
        values.map(arg, memref::LoadOp::create(
                            b, loc, buffer,
                            applyMap(b, loc, op.getMatchingIndexingMap(&operand),
                                     ivs)));
      }
      for (Operation &inner : body()->without_terminator()) {
        if (skip.contains(&inner))
          continue;
        if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
          values.map(index.getResult(), ivs[index.getDim()]);
          continue;
        }
        for (Value operand : inner.getOperands())
          if (isa<MemRefType>(operand.getType()) && !values.contains(operand))
            values.map(operand, captured(operand));
        b.clone(inner, values);
      }
      for (auto [out, value] :
           llvm::zip_equal(op.getDpsInitsMutable(),
                           body()->getTerminator()->getOperands()))
        memref::StoreOp::create(
            b, loc, values.lookupOrDefault(value), captured(out.get()),
            applyMap(b, loc, op.getMatchingIndexingMap(&out), ivs));
    });
  }
  return true;
}

} // namespace

bool planTiledTranspose(linalg::GenericOp op) {
  OpBuilder b(op);
  return TransposeBuilder(op).build(b, /*dryRun=*/true);
}

LogicalResult buildTiledTranspose(OpBuilder &b, linalg::GenericOp op,
                                  int64_t tile, std::string &why) {
  if (tile != kTile) {
    why = "the tiles are " + std::to_string(kTile) + "x" +
          std::to_string(kTile) + ", not " + std::to_string(tile);
    return failure();
  }
  if (!TransposeBuilder(op).build(b)) {
    why = "no read is contiguous along another dimension than the write "
          "(not a transpose)";
    return failure();
  }
  return success();
}

} // namespace kiln::mapping

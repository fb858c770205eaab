//===- CollapseFusions.cpp - kiln.fusion regions to one linalg.generic ----===//
//
// After kiln-lower-to-linalg, a kiln.fusion region holds linalg and tensor
// ops. This pass replaces the region by one all-parallel linalg.generic over
// the region's iteration space (the shape of its results) whose body computes
// every result element from the region's inputs: each value the region
// computes is evaluated at the point where it is used ("compute at point").
// Producers inside the region never reach memory:
//   - an elementwise or broadcast producer becomes scalar code;
//   - a reduction (matmul, conv, pooling, reduce) becomes an scf.for nest
//     with accumulators in registers (reduction dimensions without
//     computed indices: one loop over their product);
//   - data movement (pad, slices, reshapes, transposes, concat) becomes
//     index arithmetic, guarded by scf.if where it selects between sources.
// Code that only depends on outer coordinates is emitted outside the loops
// that do not need it, so a row reduction feeding a broadcast (softmax's max
// and sum) is computed once per row, not once per element; kiln-map-to-gpu
// then turns such loops into block-wide reductions.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

namespace kiln {
#define GEN_PASS_DEF_COLLAPSEFUSIONSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Evaluates the values of one fusion region at given coordinates, inside
/// the body of the generic being built.
class PointEmitter {
public:
  PointEmitter(kiln::FusionOp fusion, OpBuilder &b, Block *body)
      : fusion(fusion), b(b), loc(fusion.getLoc()), body(body) {}

  /// The element of `tensor` at `idx`, or failure with `error` set.
  FailureOr<Value> emit(Value tensor, ArrayRef<Value> idx);

  std::string error;

private:
  bool inRegion(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && fusion->isProperAncestor(def);
  }
  LogicalResult fail(Operation *op, const Twine &why) {
    error = (op->getName().getStringRef() + " " + why).str();
    return failure();
  }

  /// The outermost loop this emitter created that `deps` do not depend on,
  /// or null: code depending only on `deps` can be emitted before it.
  Operation *hoistTarget(ValueRange deps);
  /// Runs `build` at the outermost point where `deps` are available.
  template <typename F>
  auto hoisted(ValueRange deps, F build) {
    OpBuilder::InsertionGuard guard(b);
    if (Operation *target = hoistTarget(deps))
      b.setInsertionPoint(target);
    return build();
  }
  /// Whether `v` can be used at the current insertion point.
  bool availableHere(Value v);

  Value constantIndex(int64_t v) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(body);
    return indexConstant(b, loc, v);
  }
  Value apply(AffineExpr expr, ArrayRef<Value> coords);
  SmallVector<Value> applyMap(AffineMap map, ArrayRef<Value> coords);
  Value cmp(arith::CmpIPredicate pred, Value lhs, int64_t rhs);
  Value addConstant(Value v, int64_t c);
  Value both(Value a, Value b);

  FailureOr<Value> emitGeneric(linalg::GenericOp op, unsigned resultNumber,
                               ArrayRef<Value> idx);
  FailureOr<SmallVector<Value>> emitBody(linalg::GenericOp op,
                                         ArrayRef<Value> coords,
                                         IRMapping &values);
  LogicalResult rewriteInnerExtracts(Operation *root);
  FailureOr<Value> emitPad(tensor::PadOp op, ArrayRef<Value> idx);
  FailureOr<Value> emitInsertSlice(tensor::InsertSliceOp op,
                                   ArrayRef<Value> idx);
  FailureOr<Value> emitExtractSlice(tensor::ExtractSliceOp op,
                                    ArrayRef<Value> idx);
  FailureOr<Value> emitCollapse(tensor::CollapseShapeOp op,
                                ArrayRef<Value> idx);
  FailureOr<Value> emitExpand(tensor::ExpandShapeOp op, ArrayRef<Value> idx);
  FailureOr<Value> select(Value cond, Type type,
                          function_ref<FailureOr<Value>()> thenValue,
                          function_ref<FailureOr<Value>()> elseValue);

  using Key = std::vector<const void *>;
  Key keyOf(const void *what, ArrayRef<Value> idx) {
    Key key{what};
    for (Value v : idx)
      key.push_back(v.getAsOpaquePointer());
    return key;
  }

  kiln::FusionOp fusion;
  OpBuilder &b;
  Location loc;
  Block *body;
  DenseSet<Operation *> hoistable;
  std::map<Key, SmallVector<Value>> memo;
};

Operation *PointEmitter::hoistTarget(ValueRange deps) {
  Operation *target = nullptr;
  Block *block = b.getInsertionBlock();
  while (Operation *parent = block->getParentOp()) {
    if (!hoistable.contains(parent))
      break;
    bool needed = llvm::any_of(deps, [&](Value dep) {
      return parent->isAncestor(dep.getParentBlock()->getParentOp());
    });
    if (needed)
      break;
    target = parent;
    block = parent->getBlock();
  }
  return target;
}

bool PointEmitter::availableHere(Value v) {
  Block *defBlock = v.getParentBlock();
  Block *block = b.getInsertionBlock();
  Block::iterator point = b.getInsertionPoint();
  while (block) {
    if (block == defBlock) {
      Operation *def = v.getDefiningOp();
      return !def || point == block->end() || def->isBeforeInBlock(&*point);
    }
    Operation *parent = block->getParentOp();
    if (!parent || parent == fusion)
      return false;
    point = Block::iterator(parent);
    block = parent->getBlock();
  }
  return false;
}

Value PointEmitter::apply(AffineExpr expr, ArrayRef<Value> coords) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return coords[dim.getPosition()];
  if (auto c = dyn_cast<AffineConstantExpr>(expr))
    return constantIndex(c.getValue());
  // The apply takes only the coordinates it uses, so that it can be hoisted
  // above loops defining the others.
  SmallVector<Value> deps;
  SmallVector<AffineExpr> renumbered(coords.size());
  expr.walk([&](AffineExpr e) {
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim || renumbered[dim.getPosition()])
      return;
    renumbered[dim.getPosition()] =
        getAffineDimExpr(deps.size(), expr.getContext());
    deps.push_back(coords[dim.getPosition()]);
  });
  for (AffineExpr &e : renumbered)
    if (!e)
      e = getAffineConstantExpr(0, expr.getContext());
  AffineExpr compact = expr.replaceDims(renumbered);
  return hoisted(deps, [&]() -> Value {
    return affine::AffineApplyOp::create(
        b, loc, AffineMap::get(deps.size(), 0, compact), deps);
  });
}

SmallVector<Value> PointEmitter::applyMap(AffineMap map,
                                          ArrayRef<Value> coords) {
  SmallVector<Value> out;
  for (AffineExpr expr : map.getResults())
    out.push_back(apply(expr, coords));
  return out;
}

Value PointEmitter::cmp(arith::CmpIPredicate pred, Value lhs, int64_t rhs) {
  Value c = constantIndex(rhs);
  return hoisted(ValueRange{lhs}, [&]() -> Value {
    return arith::CmpIOp::create(b, loc, pred, lhs, c);
  });
}

Value PointEmitter::addConstant(Value v, int64_t c) {
  if (c == 0)
    return v;
  Value k = constantIndex(c);
  return hoisted(ValueRange{v}, [&]() -> Value {
    return arith::AddIOp::create(b, loc, v, k);
  });
}

Value PointEmitter::both(Value x, Value y) {
  if (!x)
    return y;
  return hoisted(ValueRange{x, y}, [&]() -> Value {
    return arith::AndIOp::create(b, loc, x, y);
  });
}

FailureOr<Value> PointEmitter::emit(Value tensor, ArrayRef<Value> idx) {
  // Every point form must hand its source one index per dimension; a
  // mismatch is a bug here, reported instead of read past the end.
  if (static_cast<int64_t>(idx.size()) !=
      cast<RankedTensorType>(tensor.getType()).getRank()) {
    error = "reads a rank-" +
            std::to_string(cast<RankedTensorType>(tensor.getType()).getRank()) +
            " tensor with " + std::to_string(idx.size()) + " indices";
    return failure();
  }
  if (!inRegion(tensor))
    return hoisted(idx, [&]() -> Value {
      return tensor::ExtractOp::create(b, loc, tensor, idx);
    });
  Operation *def = tensor.getDefiningOp();
  Key key = keyOf(tensor.getAsOpaquePointer(), idx);
  if (auto it = memo.find(key); it != memo.end() && availableHere(it->second[0]))
    return it->second[0];
  FailureOr<Value> value =
      llvm::TypeSwitch<Operation *, FailureOr<Value>>(def)
          .Case([&](linalg::GenericOp op) {
            return emitGeneric(op, cast<OpResult>(tensor).getResultNumber(),
                               idx);
          })
          .Case([&](tensor::PadOp op) { return emitPad(op, idx); })
          .Case([&](tensor::InsertSliceOp op) {
            return emitInsertSlice(op, idx);
          })
          .Case([&](tensor::ExtractSliceOp op) {
            return emitExtractSlice(op, idx);
          })
          .Case([&](tensor::CollapseShapeOp op) {
            return emitCollapse(op, idx);
          })
          .Case(
              [&](tensor::ExpandShapeOp op) { return emitExpand(op, idx); })
          .Case([&](tensor::CastOp op) { return emit(op.getSource(), idx); })
          .Case([&](tensor::EmptyOp op) -> FailureOr<Value> {
            // Reached only past the last slice of a fully covered
            // concatenation: any value will do.
            Type type = op.getType().getElementType();
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(body);
            return arith::ConstantOp::create(b, loc, b.getZeroAttr(type))
                .getResult();
          })
          .Default([&](Operation *op) -> FailureOr<Value> {
            return fail(op, "has no point form");
          });
  if (succeeded(value))
    memo[key] = {*value};
  return value;
}

FailureOr<Value> PointEmitter::emitGeneric(linalg::GenericOp op,
                                           unsigned resultNumber,
                                           ArrayRef<Value> idx) {
  unsigned numLoops = op.getNumLoops();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  OpOperand &init = op.getDpsInitsMutable()[resultNumber];
  AffineMap outMap = op.getMatchingIndexingMap(&init);
  SmallVector<Value> coords(numLoops);
  for (auto [expr, v] : llvm::zip_equal(outMap.getResults(), idx)) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr))
      coords[dim.getPosition()] = v;
    else if (!isa<AffineConstantExpr>(expr))
      return fail(op, "has an output indexing map that is not a projection");
  }
  SmallVector<unsigned> reductionDims;
  for (auto [d, type] : llvm::enumerate(op.getIteratorTypesArray())) {
    if (type == utils::IteratorType::reduction)
      reductionDims.push_back(d);
    else if (!coords[d])
      return fail(op, "has a parallel loop its output does not index");
  }
  // Reduction dimensions that feed computed indices (a window's offsets,
  // which decide padding guards) go outermost, so the guards and index
  // arithmetic are hoisted out of the loops over plain dimensions (a
  // convolution's input channels become the innermost loop).
  llvm::SmallBitVector computed(numLoops);
  for (AffineMap map : op.getIndexingMapsArray())
    for (AffineExpr expr : map.getResults())
      if (!isa<AffineDimExpr>(expr))
        expr.walk([&](AffineExpr e) {
          if (auto dim = dyn_cast<AffineDimExpr>(e))
            computed.set(dim.getPosition());
        });
  llvm::stable_sort(reductionDims, [&](unsigned a, unsigned b) {
    return computed.test(a) && !computed.test(b);
  });
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return fail(op, "has a dynamic iteration space");

  SmallVector<Value> parallelCoords;
  for (Value c : coords)
    if (c)
      parallelCoords.push_back(c);
  Key key = keyOf(op.getOperation(), parallelCoords);
  if (auto it = memo.find(key);
      it != memo.end() && availableHere(it->second[resultNumber]))
    return it->second[resultNumber];
  // The op's value at these coordinates depends on nothing else: compute it
  // outside every loop that does not define them.
  OpBuilder::InsertionGuard guard(b);
  if (Operation *target = hoistTarget(parallelCoords))
    b.setInsertionPoint(target);

  // The value each output starts from, at this point.
  SmallVector<Value> inits;
  {
    SmallVector<Value> initCoords = coords;
    for (unsigned d : reductionDims)
      initCoords[d] = constantIndex(0);
    for (OpOperand &out : op.getDpsInitsMutable()) {
      if (reductionDims.empty() &&
          op.getMatchingBlockArgument(&out).use_empty()) {
        inits.push_back(nullptr);
        continue;
      }
      FailureOr<Value> v =
          emit(out.get(), applyMap(op.getMatchingIndexingMap(&out), initCoords));
      if (failed(v))
        return failure();
      inits.push_back(*v);
    }
  }

  SmallVector<Value> results;
  if (reductionDims.empty()) {
    IRMapping values;
    for (auto [arg, v] : llvm::zip_equal(op.getRegionOutputArgs(), inits))
      if (v)
        values.map(arg, v);
    FailureOr<SmallVector<Value>> yielded = emitBody(op, coords, values);
    if (failed(yielded))
      return failure();
    results = *yielded;
  } else {
    // One loop per reduction dimension, accumulators as iter_args; several
    // reduction dimensions none of which feeds a computed index (a reduce
    // over several axes, a whole-tensor reduce) are one loop over their
    // product instead, the coordinates split off the induction variable
    // (row-major: the last dimension fastest), so that kiln-map-to-gpu sees
    // one reduction loop and can spread it over a warp or a block.
    SmallVector<scf::ForOp> loops;
    ValueRange accs = inits;
    bool flatten = reductionDims.size() > 1 &&
                   llvm::none_of(reductionDims,
                                 [&](unsigned d) { return computed.test(d); });
    if (flatten) {
      int64_t total = 1;
      for (unsigned d : reductionDims)
        total *= ranges[d];
      auto loop = scf::ForOp::create(b, loc, constantIndex(0),
                                     constantIndex(total), constantIndex(1),
                                     accs);
      hoistable.insert(loop);
      loops.push_back(loop);
      b.setInsertionPointToStart(loop.getBody());
      Value rest = loop.getInductionVar();
      for (int64_t i = reductionDims.size() - 1; i >= 0; --i) {
        unsigned d = reductionDims[i];
        if (ranges[d] == 1) {
          coords[d] = constantIndex(0);
          continue;
        }
        Value extent = constantIndex(ranges[d]);
        coords[d] = i == 0 ? rest
                           : Value(arith::RemUIOp::create(b, loc, rest, extent));
        if (i > 0)
          rest = arith::DivUIOp::create(b, loc, rest, extent);
      }
      accs = loop.getRegionIterArgs();
    }
    for (unsigned d : flatten ? ArrayRef<unsigned>() : reductionDims) {
      auto loop = scf::ForOp::create(b, loc, constantIndex(0),
                                     constantIndex(ranges[d]),
                                     constantIndex(1), accs);
      hoistable.insert(loop);
      if (!loops.empty())
        scf::YieldOp::create(b, loc, loop.getResults());
      loops.push_back(loop);
      coords[d] = loop.getInductionVar();
      b.setInsertionPointToStart(loop.getBody());
      accs = loop.getRegionIterArgs();
    }
    IRMapping values;
    for (auto [arg, acc] : llvm::zip_equal(op.getRegionOutputArgs(), accs))
      values.map(arg, acc);
    FailureOr<SmallVector<Value>> yielded = emitBody(op, coords, values);
    if (failed(yielded))
      return failure();
    scf::YieldOp::create(b, loc, *yielded);
    b.setInsertionPointAfter(loops.front());
    results.assign(loops.front().getResults().begin(),
                   loops.front().getResults().end());
  }
  memo[key] = results;
  return results[resultNumber];
}

FailureOr<SmallVector<Value>>
PointEmitter::emitBody(linalg::GenericOp op, ArrayRef<Value> coords,
                       IRMapping &values) {
  for (OpOperand *in : op.getDpsInputOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(in);
    if (arg.use_empty())
      continue;
    if (!isa<RankedTensorType>(in->get().getType())) {
      values.map(arg, in->get()); // A scalar input.
      continue;
    }
    FailureOr<Value> v =
        emit(in->get(), applyMap(op.getMatchingIndexingMap(in), coords));
    if (failed(v))
      return failure();
    values.map(arg, *v);
  }
  Block &opBody = op.getRegion().front();
  for (Operation &inner : opBody.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      values.map(index.getResult(), coords[index.getDim()]);
      continue;
    }
    // A gather's read of a tensor the region computes is evaluated at the
    // point instead of cloned: its value may be yielded or used by later
    // ops of the body, so it must stay mapped (a cloned extract replaced
    // afterwards would leave `values` pointing at an erased op).
    if (auto extract = dyn_cast<tensor::ExtractOp>(inner);
        extract && inRegion(extract.getTensor())) {
      SmallVector<Value> idx;
      for (Value i : extract.getIndices())
        idx.push_back(values.lookupOrDefault(i));
      FailureOr<Value> v = emit(extract.getTensor(), idx);
      if (failed(v))
        return failure();
      values.map(extract.getResult(), *v);
      continue;
    }
    Operation *clone = b.clone(inner, values);
    if (failed(rewriteInnerExtracts(clone)))
      return failure();
  }
  SmallVector<Value> yielded;
  for (Value v : opBody.getTerminator()->getOperands())
    yielded.push_back(values.lookupOrDefault(v));
  return yielded;
}

/// A read of a tensor of the region nested in `root`'s regions (a gather
/// under a guard) reads it at the point instead. Such reads' results cannot
/// escape their region except through `root`'s own (cloned) terminators, so
/// replacing their uses is complete.
LogicalResult PointEmitter::rewriteInnerExtracts(Operation *root) {
  SmallVector<tensor::ExtractOp> extracts;
  root->walk([&](tensor::ExtractOp e) {
    if (inRegion(e.getTensor()))
      extracts.push_back(e);
  });
  for (tensor::ExtractOp e : extracts) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(e);
    SmallVector<Value> idx(e.getIndices());
    FailureOr<Value> v = emit(e.getTensor(), idx);
    if (failed(v))
      return failure();
    e.replaceAllUsesWith(*v);
    e.erase();
  }
  return success();
}

FailureOr<Value>
PointEmitter::select(Value cond, Type type,
                     function_ref<FailureOr<Value>()> thenValue,
                     function_ref<FailureOr<Value>()> elseValue) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, cond,
                                /*addThenBlock=*/true, /*addElseBlock=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  FailureOr<Value> t = thenValue();
  if (failed(t))
    return failure();
  scf::YieldOp::create(b, loc, *t);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  FailureOr<Value> e = elseValue();
  if (failed(e))
    return failure();
  scf::YieldOp::create(b, loc, *e);
  return ifOp.getResult(0);
}

FailureOr<Value> PointEmitter::emitPad(tensor::PadOp op, ArrayRef<Value> idx) {
  Value padValue = op.getConstantPaddingValue();
  if (!padValue || inRegion(padValue))
    return fail(op, "pads with a value computed in the region");
  ArrayRef<int64_t> low = op.getStaticLow();
  ArrayRef<int64_t> srcShape = op.getSourceType().getShape();
  if (llvm::any_of(low, ShapedType::isDynamic) ||
      llvm::any_of(op.getStaticHigh(), ShapedType::isDynamic))
    return fail(op, "has dynamic padding");
  Value inside;
  for (auto [d, v] : llvm::enumerate(idx)) {
    if (low[d] > 0)
      inside = both(inside, cmp(arith::CmpIPredicate::sge, v, low[d]));
    if (op.getStaticHigh()[d] > 0)
      inside =
          both(inside, cmp(arith::CmpIPredicate::slt, v, low[d] + srcShape[d]));
  }
  auto sourceIndices = [&]() {
    SmallVector<Value> src;
    for (auto [d, v] : llvm::enumerate(idx))
      src.push_back(addConstant(v, -low[d]));
    return src;
  };
  if (!inside)
    return emit(op.getSource(), sourceIndices());
  return select(
      inside, padValue.getType(),
      [&]() { return emit(op.getSource(), sourceIndices()); },
      [&]() -> FailureOr<Value> { return padValue; });
}

FailureOr<Value> PointEmitter::emitInsertSlice(tensor::InsertSliceOp op,
                                               ArrayRef<Value> idx) {
  if (op.getSourceType().getRank() != op.getDestType().getRank() ||
      !op.hasUnitStride() ||
      llvm::any_of(op.getStaticOffsets(), ShapedType::isDynamic) ||
      llvm::any_of(op.getStaticSizes(), ShapedType::isDynamic))
    return fail(op, "is not a static, unit-stride, rank-preserving slice");
  ArrayRef<int64_t> offsets = op.getStaticOffsets();
  ArrayRef<int64_t> sizes = op.getStaticSizes();
  ArrayRef<int64_t> destShape = op.getDestType().getShape();
  Value inside;
  for (auto [d, v] : llvm::enumerate(idx)) {
    if (offsets[d] > 0)
      inside = both(inside, cmp(arith::CmpIPredicate::sge, v, offsets[d]));
    if (offsets[d] + sizes[d] < destShape[d])
      inside = both(inside,
                    cmp(arith::CmpIPredicate::slt, v, offsets[d] + sizes[d]));
  }
  auto fromSource = [&]() {
    SmallVector<Value> src;
    for (auto [d, v] : llvm::enumerate(idx))
      src.push_back(addConstant(v, -offsets[d]));
    return emit(op.getSource(), src);
  };
  if (!inside)
    return fromSource();
  // Outside every slice of a tensor.empty any value is right, but arith has
  // no constant of a signed or unsigned integer type (ui8 and the like):
  // read the source's nearest element instead, its indices clamped into
  // the slice so the read stays in bounds.
  Type element = op.getSourceType().getElementType();
  if (op.getDest().getDefiningOp<tensor::EmptyOp>() && element.isInteger() &&
      !element.isSignlessInteger()) {
    SmallVector<Value> src;
    for (auto [d, v] : llvm::enumerate(idx)) {
      Value shifted = addConstant(v, -offsets[d]);
      shifted = arith::MaxSIOp::create(b, loc, shifted, constantIndex(0));
      src.push_back(arith::MinSIOp::create(b, loc, shifted,
                                           constantIndex(sizes[d] - 1)));
    }
    return emit(op.getSource(), src);
  }
  return select(inside, op.getSourceType().getElementType(), fromSource,
                [&]() { return emit(op.getDest(), idx); });
}

FailureOr<Value> PointEmitter::emitExtractSlice(tensor::ExtractSliceOp op,
                                                ArrayRef<Value> idx) {
  if (llvm::any_of(op.getStaticOffsets(), ShapedType::isDynamic) ||
      llvm::any_of(op.getStaticStrides(), ShapedType::isDynamic))
    return fail(op, "has dynamic offsets or strides");
  llvm::SmallBitVector dropped = op.getDroppedDims();
  SmallVector<Value> src;
  unsigned next = 0;
  for (unsigned d = 0; d < op.getSourceType().getRank(); ++d) {
    int64_t offset = op.getStaticOffsets()[d];
    if (dropped.test(d)) {
      src.push_back(constantIndex(offset));
      continue;
    }
    Value v = idx[next++];
    int64_t stride = op.getStaticStrides()[d];
    if (stride != 1) {
      Value s = constantIndex(stride);
      v = hoisted(ValueRange{v}, [&]() -> Value {
        return arith::MulIOp::create(b, loc, v, s);
      });
    }
    src.push_back(addConstant(v, offset));
  }
  return emit(op.getSource(), src);
}

FailureOr<Value> PointEmitter::emitCollapse(tensor::CollapseShapeOp op,
                                            ArrayRef<Value> idx) {
  ArrayRef<int64_t> srcShape = op.getSrcType().getShape();
  SmallVector<Value> src;
  // A collapse to rank 0 has no groups: every source dimension is 1.
  if (op.getReassociationIndices().empty())
    return emit(op.getSrc(),
                SmallVector<Value>(srcShape.size(), constantIndex(0)));
  for (auto [group, v] :
       llvm::zip_equal(op.getReassociationIndices(), idx)) {
    // Row-major: the last dimension of the group varies fastest.
    SmallVector<Value> parts(group.size());
    Value rest = v;
    for (int64_t i = group.size() - 1; i >= 0; --i) {
      int64_t extent = srcShape[group[i]];
      if (i == 0) {
        parts[i] = rest;
        break;
      }
      if (extent == 1) {
        parts[i] = constantIndex(0);
        continue;
      }
      Value e = constantIndex(extent);
      Value r = rest;
      parts[i] = hoisted(ValueRange{r}, [&]() -> Value {
        return arith::RemUIOp::create(b, loc, r, e);
      });
      rest = hoisted(ValueRange{r}, [&]() -> Value {
        return arith::DivUIOp::create(b, loc, r, e);
      });
    }
    src.append(parts);
  }
  return emit(op.getSrc(), src);
}

FailureOr<Value> PointEmitter::emitExpand(tensor::ExpandShapeOp op,
                                          ArrayRef<Value> idx) {
  ArrayRef<int64_t> resultShape = op.getResultType().getShape();
  SmallVector<Value> src;
  for (ReassociationIndices group : op.getReassociationIndices()) {
    Value linear;
    for (int64_t d : group) {
      if (!linear) {
        linear = idx[d];
        continue;
      }
      if (resultShape[d] == 1)
        continue;
      Value e = constantIndex(resultShape[d]);
      Value acc = linear, v = idx[d];
      linear = hoisted(ValueRange{acc, v}, [&]() -> Value {
        return arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, acc, e), v);
      });
    }
    src.push_back(linear);
  }
  return emit(op.getSrc(), src);
}

/// Replaces `fusion` by one generic; on failure leaves the region's ops in
/// place of it, as separate kernels, and says why.
void collapse(kiln::FusionOp fusion) {
  Location loc = fusion.getLoc();
  OpBuilder b(fusion);
  // Constants are shared, not recomputed: move them out of the region.
  for (Operation &op :
       llvm::make_early_inc_range(fusion.getBody().front().without_terminator()))
    if (op.hasTrait<OpTrait::ConstantLike>())
      op.moveBefore(fusion);
  IRRewriter rewriter(fusion.getContext());
  SmallVector<linalg::LinalgOp> named;
  fusion.walk([&](linalg::LinalgOp op) {
    if (!isa<linalg::GenericOp>(op))
      named.push_back(op);
  });
  for (linalg::LinalgOp op : named) {
    rewriter.setInsertionPoint(op);
    (void)linalg::generalizeNamedOp(rewriter, op);
  }

  auto resultType = cast<RankedTensorType>(fusion.getResult(0).getType());
  int64_t rank = resultType.getRank();
  SmallVector<Value> inits;
  for (Type type : fusion.getResultTypes()) {
    auto t = cast<RankedTensorType>(type);
    inits.push_back(
        tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType()));
  }
  SmallVector<AffineMap> maps(inits.size(), b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  std::string error;
  auto generic = linalg::GenericOp::create(b, loc, fusion.getResultTypes(),
                                           ValueRange{}, inits, maps,
                                           iterators);
  {
    // The body is built once the op exists, so the emitter can walk from
    // the body to its enclosing ops.
    SmallVector<Type> argTypes;
    for (Type type : fusion.getResultTypes())
      argTypes.push_back(cast<RankedTensorType>(type).getElementType());
    SmallVector<Location> argLocs(argTypes.size(), loc);
    OpBuilder nested(fusion.getContext());
    Block *body = nested.createBlock(&generic.getRegion(), {}, argTypes,
                                     argLocs);
    SmallVector<Value> coords;
    for (int64_t d = 0; d < rank; ++d)
      coords.push_back(linalg::IndexOp::create(nested, loc, d));
    PointEmitter emitter(fusion, nested, body);
    SmallVector<Value> results;
    for (Value v : fusion.getYield().getValues()) {
      FailureOr<Value> r = emitter.emit(v, coords);
      if (failed(r)) {
        error = emitter.error;
        break;
      }
      results.push_back(*r);
    }
    if (error.empty())
      linalg::YieldOp::create(nested, loc, results);
  }
  generic->setAttr(kiln::KilnDialect::FusionKindAttrHelper::getNameStr(),
                   fusion.getKindAttr());
  if (!error.empty()) {
    generic.erase();
    for (Value init : inits)
      init.getDefiningOp()->erase();
    fusion.emitWarning() << "fusion region kept as separate kernels: "
                         << error;
    Block &block = fusion.getBody().front();
    for (auto [result, value] :
         llvm::zip_equal(fusion.getResults(), fusion.getYield().getValues()))
      result.replaceAllUsesWith(value);
    for (Operation &op : llvm::make_early_inc_range(block.without_terminator()))
      op.moveBefore(fusion);
    fusion.erase();
    return;
  }
  fusion.replaceAllUsesWith(generic.getResults());
  fusion.erase();
}

struct CollapseFusionsPass
    : kiln::impl::CollapseFusionsPassBase<CollapseFusionsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<kiln::FusionOp> fusions;
    getOperation().walk([&](kiln::FusionOp f) { fusions.push_back(f); });
    for (kiln::FusionOp f : fusions)
      collapse(f);
  }
};

} // namespace

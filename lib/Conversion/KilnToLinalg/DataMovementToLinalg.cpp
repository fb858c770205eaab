//===- DataMovementToLinalg.cpp - Data movement kiln ops to linalg
//----------===//
//
// Regroupings and windows of a tensor become tensor ops (collapse_shape,
// expand_shape, extract_slice, insert_slice, pad); permutations and
// broadcasts become named linalg ops. An op whose source element is not an
// increasing affine function of the result coordinates (reversed slices,
// gathers, reflect and edge padding, tiling, resizing) becomes a
// linalg.generic over the result that computes the source coordinates from
// linalg.index and reads the input with tensor.extract. Such accesses never
// hide in an indexing map: linalg tiling assumes maps that grow with the loop
// indices, and a reversed or modular map would be tiled wrongly.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Shared pieces
//===----------------------------------------------------------------------===//

/// Every shape must be static: the lowerings below size tensor.empty and
/// slices from the types (symbolic dimensions come later, through type
/// inference). Ops that only move elements accept any element type; those
/// that compute on elements (`computesOnElements`) refuse unsigned integers,
/// which need a signless type conversion that does not exist yet.
LogicalResult checkTypes(Operation *op, PatternRewriter &rewriter,
                         bool computesOnElements) {
  for (Type type :
       llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped)
      continue;
    if (!shaped.hasStaticShape())
      return rewriter.notifyMatchFailure(op,
                                         "dynamic shapes are not lowered yet");
    if (computesOnElements && shaped.getElementType().isUnsignedInteger())
      return rewriter.notifyMatchFailure(
          op, "unsigned integer tensors are not lowered yet");
  }
  return success();
}

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

SmallVector<OpFoldResult> indexAttrs(OpBuilder &b, ArrayRef<int64_t> values) {
  return getAsIndexOpFoldResult(b.getContext(), values);
}

/// An element of an indices tensor as an `index` counted from the front:
/// negative values count from the end. With `clamp` the index is also forced
/// into [0, size), so a malformed index (which ONNX leaves undefined) cannot
/// read outside the tensor.
Value normalizedIndex(OpBuilder &b, Location loc, Value element, int64_t size,
                      bool clamp) {
  Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), element);
  Value zero = indexConstant(b, loc, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, index, zero);
  Value wrapped =
      arith::AddIOp::create(b, loc, index, indexConstant(b, loc, size));
  index = arith::SelectOp::create(b, loc, negative, wrapped, index);
  if (!clamp)
    return index;
  index = arith::MaxSIOp::create(b, loc, index, zero);
  return arith::MinSIOp::create(b, loc, index, indexConstant(b, loc, size - 1));
}

/// Body of a coordinate-computing generic: the elements read through the
/// inputs' indexing maps and the loop indices in, the result element out.
using IndexedBodyFn = llvm::function_ref<Value(
    OpBuilder &, Location, ValueRange elements, ValueRange indices)>;

/// An all-parallel linalg.generic over `resultType`'s shape whose body also
/// sees the loop indices (one linalg.index per dimension).
Value indexedGeneric(OpBuilder &b, Location loc, RankedTensorType resultType,
                     ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                     IndexedBodyFn body) {
  return parallelGeneric(
      b, loc, resultType, inputs, inputMaps,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange elements) {
        SmallVector<Value> indices;
        for (int64_t d = 0; d < resultType.getRank(); ++d)
          indices.push_back(linalg::IndexOp::create(nested, nestedLoc, d));
        return body(nested, nestedLoc, elements, indices);
      });
}

//===----------------------------------------------------------------------===//
// constant, iota
//===----------------------------------------------------------------------===//

/// Any ElementsAttr (dense, splat, dense_resource) becomes an arith.constant
/// holding the same attribute, so resource blobs are never expanded here.
struct ConstantToArith : OpRewritePattern<ConstantOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConstantOp op,
                                PatternRewriter &rewriter) const override {
    auto value = dyn_cast<TypedAttr>(op.getValue());
    if (!value)
      return rewriter.notifyMatchFailure(op, "an untyped elements attribute");
    rewriter.replaceOp(
        op,
        arith::ConstantOp::create(rewriter, op.getLoc(), value).getResult());
    return success();
  }
};

/// `start + i * step`, computed in f64 and then converted exactly as
/// IotaOp::fold converts it, so a folded and a lowered iota agree bit for bit.
struct IotaToGeneric : OpRewritePattern<IotaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(IotaOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    double start = op.getStart().convertToDouble(),
           step = op.getStep().convertToDouble();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), type, {}, {},
        [&](OpBuilder &b, Location loc, ValueRange,
            ValueRange indices) -> Value {
          Type f64 = b.getF64Type(), i64 = b.getI64Type();
          Value i = arith::IndexCastOp::create(b, loc, i64, indices[0]);
          Value x = arith::SIToFPOp::create(b, loc, f64, i);
          x = arith::MulFOp::create(b, loc, x,
                                    scalarConstant(b, loc, f64, step));
          x = arith::AddFOp::create(b, loc, x,
                                    scalarConstant(b, loc, f64, start));
          if (isa<FloatType>(elementType))
            return elementType.isF64()
                       ? x
                       : Value(arith::TruncFOp::create(b, loc, elementType, x));
          Value n = arith::FPToSIOp::create(b, loc, i64, x);
          return elementType.isInteger(64)
                     ? n
                     : Value(arith::TruncIOp::create(b, loc, elementType, n));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// reshape, transpose, broadcast
//===----------------------------------------------------------------------===//

/// A reshape between two static shapes of the same (non-zero) element count,
/// cut into the shortest runs of source and result dimensions whose products
/// agree. Collapsing each source run to one dimension and expanding it into
/// its result run is then always valid.
struct ReshapePlan {
  SmallVector<ReassociationIndices> sourceRuns, resultRuns;
  SmallVector<int64_t> runSizes;
};

ReshapePlan planReshape(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  ReshapePlan plan;
  size_t i = 0, j = 0;
  while (i < from.size() && j < to.size()) {
    ReassociationIndices source{static_cast<int64_t>(i)},
        result{static_cast<int64_t>(j)};
    int64_t p = from[i++], q = to[j++];
    // The totals agree, so the shorter side always has a dimension left.
    while (p != q) {
      if (p < q) {
        source.push_back(i);
        p *= from[i++];
      } else {
        result.push_back(j);
        q *= to[j++];
      }
    }
    plan.sourceRuns.push_back(source);
    plan.resultRuns.push_back(result);
    plan.runSizes.push_back(p);
  }
  // What is left on either side is all size-1 dimensions: they join the last
  // run (with no run at all, one side is rank 0 and the other all ones).
  if (!plan.sourceRuns.empty()) {
    for (; i < from.size(); ++i)
      plan.sourceRuns.back().push_back(i);
    for (; j < to.size(); ++j)
      plan.resultRuns.back().push_back(j);
  }
  return plan;
}

/// At most one tensor.collapse_shape and one tensor.expand_shape: a pure
/// collapse or expansion needs only one of them, and any other reshape is a
/// collapse into the common runs followed by an expansion (never a
/// tensor.reshape, whose shape operand hides the structure from later passes).
struct ReshapeToTensorReshapes : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType inType = op.getInput().getType(), outType = op.getType();
    Location loc = op.getLoc();
    if (inType == outType) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    if (outType.getNumElements() == 0) {
      rewriter.replaceOp(op, emptyTensor(rewriter, loc, outType));
      return success();
    }
    ReshapePlan plan = planReshape(inType.getShape(), outType.getShape());
    Value value = op.getInput();
    if (ArrayRef<int64_t>(plan.runSizes) != inType.getShape())
      value = tensor::CollapseShapeOp::create(
          rewriter, loc,
          RankedTensorType::get(plan.runSizes, inType.getElementType()), value,
          plan.sourceRuns);
    if (ArrayRef<int64_t>(plan.runSizes) != outType.getShape())
      value = tensor::ExpandShapeOp::create(rewriter, loc, outType, value,
                                            plan.resultRuns);
    rewriter.replaceOp(op, value);
    return success();
  }
};

struct TransposeToLinalg : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    ArrayRef<int64_t> perm = op.getPermutation();
    if (llvm::equal(perm,
                    llvm::seq<int64_t>(0, static_cast<int64_t>(perm.size())))) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    Value init = emptyTensor(rewriter, op.getLoc(), op.getType());
    auto transpose = linalg::TransposeOp::create(rewriter, op.getLoc(),
                                                 op.getInput(), init, perm);
    rewriter.replaceOp(op, transpose->getResults());
    return success();
  }
};

/// linalg.broadcast when the input only gains leading dimensions; a size-1
/// dimension that stretches needs a generic whose map reads index 0 there.
struct BroadcastToLinalg : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType inType = op.getInput().getType(), outType = op.getType();
    Location loc = op.getLoc();
    if (inType == outType) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    int64_t added = outType.getRank() - inType.getRank();
    bool stretches =
        llvm::any_of(llvm::seq<int64_t>(0, inType.getRank()), [&](int64_t d) {
          return inType.getDimSize(d) != outType.getDimSize(added + d);
        });
    if (!stretches) {
      auto broadcast = linalg::BroadcastOp::create(
          rewriter, loc, op.getInput(), emptyTensor(rewriter, loc, outType),
          llvm::to_vector(llvm::seq<int64_t>(0, added)));
      rewriter.replaceOp(op, broadcast->getResults());
      return success();
    }
    Value result = elementwiseGeneric(
        rewriter, loc, outType, op.getInput(),
        [](OpBuilder &, Location, ValueRange args) { return args.front(); });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// concat, slice, split
//===----------------------------------------------------------------------===//

/// One tensor.insert_slice per non-empty input into a tensor.empty.
struct ConcatToInsertSlices : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType outType = op.getType();
    if (op.getInputs().size() == 1) {
      rewriter.replaceOp(op, op.getInputs().front());
      return success();
    }
    Location loc = op.getLoc();
    int64_t axis = op.getAxis();
    Value result = emptyTensor(rewriter, loc, outType);
    SmallVector<int64_t> offsets(outType.getRank(), 0),
        strides(outType.getRank(), 1);
    for (Value input : op.getInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getNumElements() != 0)
        result = tensor::InsertSliceOp::create(
            rewriter, loc, input, result, indexAttrs(rewriter, offsets),
            indexAttrs(rewriter, type.getShape()),
            indexAttrs(rewriter, strides));
      offsets[axis] += type.getDimSize(axis);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Positive steps are a tensor.extract_slice. A negative step walks
/// backwards, which extract_slice cannot express: a generic reads
/// `input[start + i * step]` instead.
struct SliceToTensor : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType outType = op.getType();
    Location loc = op.getLoc();
    ArrayRef<int64_t> starts = op.getStarts(), steps = op.getSteps();
    // An empty result may carry starts the verifier lets through unchecked.
    if (outType.getNumElements() == 0) {
      rewriter.replaceOp(op, emptyTensor(rewriter, loc, outType));
      return success();
    }
    if (llvm::all_of(steps, [](int64_t s) { return s > 0; })) {
      rewriter.replaceOp(op, tensor::ExtractSliceOp::create(
                                 rewriter, loc, outType, op.getInput(),
                                 indexAttrs(rewriter, starts),
                                 indexAttrs(rewriter, outType.getShape()),
                                 indexAttrs(rewriter, steps))
                                 .getResult());
      return success();
    }
    Value input = op.getInput();
    Value result = indexedGeneric(
        rewriter, loc, outType, {}, {},
        [&](OpBuilder &b, Location nestedLoc, ValueRange, ValueRange indices) {
          SmallVector<Value> coords;
          for (auto [d, i] : llvm::enumerate(indices)) {
            Value coord = i;
            if (steps[d] != 1)
              coord = arith::MulIOp::create(
                  b, nestedLoc, coord, indexConstant(b, nestedLoc, steps[d]));
            if (starts[d] != 0)
              coord = arith::AddIOp::create(
                  b, nestedLoc, coord, indexConstant(b, nestedLoc, starts[d]));
            coords.push_back(coord);
          }
          return tensor::ExtractOp::create(b, nestedLoc, input, coords);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// One tensor.extract_slice per piece.
struct SplitToExtractSlices : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    Location loc = op.getLoc();
    RankedTensorType inType = op.getInput().getType();
    int64_t axis = op.getAxis();
    SmallVector<int64_t> offsets(inType.getRank(), 0),
        strides(inType.getRank(), 1);
    SmallVector<Value> pieces;
    for (Value result : op.getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      if (type == inType)
        pieces.push_back(op.getInput());
      else if (type.getNumElements() == 0)
        pieces.push_back(emptyTensor(rewriter, loc, type));
      else
        pieces.push_back(tensor::ExtractSliceOp::create(
            rewriter, loc, type, op.getInput(), indexAttrs(rewriter, offsets),
            indexAttrs(rewriter, type.getShape()),
            indexAttrs(rewriter, strides)));
      offsets[axis] += type.getDimSize(axis);
    }
    rewriter.replaceOp(op, pieces);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// gather, gather_elements, scatter_elements
//===----------------------------------------------------------------------===//

/// A generic over the result reads `indices` through its map and the input
/// with tensor.extract at the (wrapped, clamped) index.
struct GatherToGeneric : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType outType = op.getType();
    int64_t axis = op.getAxis();
    int64_t indexRank = op.getIndices().getType().getRank();
    int64_t axisSize = op.getInput().getType().getDimSize(axis);
    SmallVector<AffineExpr> indexExprs;
    for (int64_t d = axis; d < axis + indexRank; ++d)
      indexExprs.push_back(rewriter.getAffineDimExpr(d));
    AffineMap indexMap =
        AffineMap::get(outType.getRank(), 0, indexExprs, rewriter.getContext());
    Value input = op.getInput();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), outType, op.getIndices(), indexMap,
        [&](OpBuilder &b, Location loc, ValueRange elements,
            ValueRange indices) {
          SmallVector<Value> coords = llvm::to_vector(indices.take_front(axis));
          coords.push_back(
              normalizedIndex(b, loc, elements[0], axisSize, /*clamp=*/true));
          llvm::append_range(coords, indices.drop_front(axis + indexRank));
          return tensor::ExtractOp::create(b, loc, input, coords);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// A generic over `indices`: the result position with its axis coordinate
/// replaced by the (wrapped, clamped) index.
struct GatherElementsToGeneric : OpRewritePattern<GatherElementsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherElementsOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType outType = op.getType();
    int64_t axis = op.getAxis();
    int64_t axisSize = op.getInput().getType().getDimSize(axis);
    Value input = op.getInput();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), outType, op.getIndices(),
        AffineMap::getMultiDimIdentityMap(outType.getRank(),
                                          rewriter.getContext()),
        [&](OpBuilder &b, Location loc, ValueRange elements,
            ValueRange indices) {
          SmallVector<Value> coords = llvm::to_vector(indices);
          coords[axis] =
              normalizedIndex(b, loc, elements[0], axisSize, /*clamp=*/true);
          return tensor::ExtractOp::create(b, loc, input, coords);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// The new value of an element hit by `update` under `reduction`.
Value combineScatter(OpBuilder &b, Location loc, ScatterReduction reduction,
                     Value old, Value update) {
  bool isFloat = isa<FloatType>(old.getType());
  switch (reduction) {
  case ScatterReduction::None:
    return update;
  case ScatterReduction::Add:
    return isFloat ? Value(arith::AddFOp::create(b, loc, old, update))
                   : Value(arith::AddIOp::create(b, loc, old, update));
  case ScatterReduction::Mul:
    return isFloat ? Value(arith::MulFOp::create(b, loc, old, update))
                   : Value(arith::MulIOp::create(b, loc, old, update));
  case ScatterReduction::Max:
    return isFloat ? Value(arith::MaximumFOp::create(b, loc, old, update))
                   : Value(arith::MaxSIOp::create(b, loc, old, update));
  case ScatterReduction::Min:
    return isFloat ? Value(arith::MinimumFOp::create(b, loc, old, update))
                   : Value(arith::MinSIOp::create(b, loc, old, update));
  }
  llvm_unreachable("unknown scatter reduction");
}

/// An update at position p only ever lands on the line of the result through
/// p along `axis` (the other coordinates are kept), so the result is a
/// generic over the input (restricted to the rows `indices` covers) with one
/// more, reduction, dimension k that walks that line's updates in order:
///
///   result[p] = fold over k of: indices[p with p[axis] = k] == p[axis]
///                               ? combine(acc, updates[...]) : acc
///
/// starting from input[p]. This keeps the sequential semantics (a later
/// update of the same element wins or combines last) in pure linalg, with
/// no loop-carried tensor and no write conflicts: each result element is
/// owned by one iteration of the parallel dimensions. The cost is
/// |result rows covered| * indices.shape[axis] comparisons, which suits the
/// short update lines of ScatterElements in models; an index outside the
/// axis is never matched and so ignored.
struct ScatterElementsToGeneric : OpRewritePattern<ScatterElementsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScatterElementsOp op,
                                PatternRewriter &rewriter) const override {
    ScatterReduction reduction = op.getReduction();
    if (failed(checkTypes(op, rewriter,
                          /*computesOnElements=*/reduction !=
                              ScatterReduction::None)))
      return failure();
    RankedTensorType inType = op.getInput().getType();
    RankedTensorType indexType = op.getIndices().getType();
    if (reduction != ScatterReduction::None &&
        inType.getElementType().isInteger(1))
      return rewriter.notifyMatchFailure(op, "a reducing scatter of booleans");
    int64_t axis = op.getAxis(), rank = inType.getRank();
    int64_t axisSize = inType.getDimSize(axis);
    // The region of the input that updates can reach.
    SmallVector<int64_t> regionShape(indexType.getShape());
    regionShape[axis] = axisSize;
    for (int64_t d = 0; d < rank; ++d)
      if (regionShape[d] > inType.getDimSize(d))
        return rewriter.notifyMatchFailure(
            op,
            "indices reach past the input in a dimension other than the axis");
    Location loc = op.getLoc();
    if (indexType.getNumElements() == 0) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }

    SmallVector<int64_t> zeros(rank, 0), ones(rank, 1);
    auto regionType =
        RankedTensorType::get(regionShape, inType.getElementType());
    bool whole = regionType == inType;
    Value region = whole ? op.getInput()
                         : tensor::ExtractSliceOp::create(
                               rewriter, loc, regionType, op.getInput(),
                               indexAttrs(rewriter, zeros),
                               indexAttrs(rewriter, regionShape),
                               indexAttrs(rewriter, ones))
                               .getResult();

    MLIRContext *context = rewriter.getContext();
    SmallVector<AffineExpr> updateExprs;
    for (int64_t d = 0; d < rank; ++d)
      updateExprs.push_back(getAffineDimExpr(d == axis ? rank : d, context));
    AffineMap updateMap = AffineMap::get(rank + 1, 0, updateExprs, context);
    AffineMap resultMap =
        AffineMap::getMultiDimIdentityMap(rank + 1, context).dropResult(rank);
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange(regionType),
        ValueRange{op.getIndices(), op.getUpdates()}, region,
        SmallVector<AffineMap>{updateMap, updateMap, resultMap}, iterators,
        [&](OpBuilder &b, Location nestedLoc, ValueRange args) {
          Value target =
              normalizedIndex(b, nestedLoc, args[0], axisSize, /*clamp=*/false);
          Value position = linalg::IndexOp::create(b, nestedLoc, axis);
          Value hit = arith::CmpIOp::create(
              b, nestedLoc, arith::CmpIPredicate::eq, target, position);
          Value combined =
              combineScatter(b, nestedLoc, reduction, args[2], args[1]);
          linalg::YieldOp::create(b, nestedLoc,
                                  Value(arith::SelectOp::create(
                                      b, nestedLoc, hit, combined, args[2])));
        });
    Value result = generic.getResult(0);
    if (!whole)
      result = tensor::InsertSliceOp::create(
          rewriter, loc, result, op.getInput(), indexAttrs(rewriter, zeros),
          indexAttrs(rewriter, regionShape), indexAttrs(rewriter, ones));
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// pad, tile
//===----------------------------------------------------------------------===//

/// `constant` is a tensor.pad yielding the value. `reflect` and `edge` are a
/// generic that maps each result coordinate back into the input:
/// edge clamps `i - low` into [0, n), reflect mirrors it about 0 and n - 1
/// (the verifier keeps the pads below n, so one mirror suffices).
struct PadToTensor : OpRewritePattern<PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PadOp op,
                                PatternRewriter &rewriter) const override {
    PadMode mode = op.getMode();
    if (failed(checkTypes(op, rewriter,
                          /*computesOnElements=*/mode == PadMode::Constant)))
      return failure();
    RankedTensorType inType = op.getInput().getType(), outType = op.getType();
    ArrayRef<int64_t> low = op.getLow(), high = op.getHigh();
    Location loc = op.getLoc();
    if (inType == outType) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    if (outType.getNumElements() == 0) {
      rewriter.replaceOp(op, emptyTensor(rewriter, loc, outType));
      return success();
    }
    if (mode == PadMode::Constant) {
      Value value = scalarConstant(rewriter, loc, outType.getElementType(),
                                   op.getValue().convertToDouble());
      rewriter.replaceOp(
          op, tensor::PadOp::create(rewriter, loc, outType, op.getInput(),
                                    indexAttrs(rewriter, low),
                                    indexAttrs(rewriter, high), value)
                  .getResult());
      return success();
    }
    Value input = op.getInput();
    Value result = indexedGeneric(
        rewriter, loc, outType, {}, {},
        [&](OpBuilder &b, Location nestedLoc, ValueRange, ValueRange indices) {
          SmallVector<Value> coords;
          for (auto [d, i] : llvm::enumerate(indices)) {
            if (low[d] == 0 && high[d] == 0) {
              coords.push_back(i);
              continue;
            }
            int64_t last = inType.getDimSize(d) - 1;
            Value coord = i;
            if (low[d] != 0)
              coord = arith::SubIOp::create(
                  b, nestedLoc, coord, indexConstant(b, nestedLoc, low[d]));
            Value zero = indexConstant(b, nestedLoc, 0);
            if (mode == PadMode::Edge) {
              coord = arith::MaxSIOp::create(b, nestedLoc, coord, zero);
              coord = arith::MinSIOp::create(b, nestedLoc, coord,
                                             indexConstant(b, nestedLoc, last));
            } else {
              // |j| folds the front, 2 (n - 1) - j the back.
              Value negated = arith::SubIOp::create(b, nestedLoc, zero, coord);
              coord = arith::MaxSIOp::create(b, nestedLoc, coord, negated);
              Value mirrored = arith::SubIOp::create(
                  b, nestedLoc, indexConstant(b, nestedLoc, 2 * last), coord);
              coord = arith::MinSIOp::create(b, nestedLoc, coord, mirrored);
            }
            coords.push_back(coord);
          }
          return tensor::ExtractOp::create(b, nestedLoc, input, coords);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// A generic over the result reading `input[i mod n]`.
struct TileToGeneric : OpRewritePattern<TileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TileOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType inType = op.getInput().getType(), outType = op.getType();
    Location loc = op.getLoc();
    if (inType == outType) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    if (outType.getNumElements() == 0) {
      rewriter.replaceOp(op, emptyTensor(rewriter, loc, outType));
      return success();
    }
    Value input = op.getInput();
    ArrayRef<int64_t> repeats = op.getRepeats();
    Value result = indexedGeneric(
        rewriter, loc, outType, {}, {},
        [&](OpBuilder &b, Location nestedLoc, ValueRange, ValueRange indices) {
          SmallVector<Value> coords;
          for (auto [d, i] : llvm::enumerate(indices)) {
            int64_t size = inType.getDimSize(d);
            if (size == 1)
              coords.push_back(indexConstant(b, nestedLoc, 0));
            else if (repeats[d] == 1)
              coords.push_back(i);
            else
              coords.push_back(arith::RemUIOp::create(
                  b, nestedLoc, i, indexConstant(b, nestedLoc, size)));
          }
          return tensor::ExtractOp::create(b, nestedLoc, input, coords);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

/// How one dimension is resampled.
struct ResizeAxis {
  int64_t inSize, outSize;
  double scale;
  /// False when the dimension maps identically (same size, unit scale, and
  /// for tf_crop_and_resize the whole extent): it then reads the output
  /// coordinate unchanged.
  bool resized;
  /// tf_crop_and_resize's region along this dimension.
  double roiStart = 0, roiEnd = 1;
};

/// Input coordinates are computed in f64, as ONNX's reference does: in f32,
/// `4 / 1.6f` rounds to exactly 2.5 and a nearest tie flips. Scales are the
/// model's (f32) values held exactly in f64.
struct CoordinateBuilder {
  OpBuilder &b;
  Location loc;
  CoordinateMode mode;
  /// tf_crop_and_resize: whether any coordinate computed so far falls
  /// outside the input (null until one is computed).
  mutable Value outside = nullptr;

  Value constant(double v) const {
    return scalarConstant(b, loc, b.getF64Type(), v);
  }

  /// The (fractional) input coordinate of output index `index` along `axis`.
  /// As in ONNX's reference, align_corners and pytorch_half_pixel measure the
  /// resized length as scale * input length, which differs from the output
  /// size when the scale does not divide evenly.
  Value sourceCoordinate(Value index, const ResizeAxis &axis) const {
    Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
    Value x = arith::SIToFPOp::create(b, loc, b.getF64Type(), i);
    double resizedLength = axis.scale * static_cast<double>(axis.inSize);
    auto halfPixel = [&] {
      Value shifted = arith::AddFOp::create(b, loc, x, constant(0.5));
      Value scaled =
          arith::DivFOp::create(b, loc, shifted, constant(axis.scale));
      return Value(arith::SubFOp::create(b, loc, scaled, constant(0.5)));
    };
    switch (mode) {
    case CoordinateMode::HalfPixel:
      return halfPixel();
    case CoordinateMode::PytorchHalfPixel:
      return resizedLength == 1 ? constant(0) : halfPixel();
    case CoordinateMode::AlignCorners: {
      if (resizedLength == 1)
        return constant(0);
      Value stretched =
          arith::MulFOp::create(b, loc, x, constant(axis.inSize - 1));
      return arith::DivFOp::create(b, loc, stretched,
                                   constant(resizedLength - 1));
    }
    case CoordinateMode::Asymmetric:
      return arith::DivFOp::create(b, loc, x, constant(axis.scale));
    case CoordinateMode::TfCropAndResize: {
      // As ONNX's reference: the region [start, end] of the input spans the
      // resized length; outside [0, size - 1] the output is extrapolated.
      double extent = static_cast<double>(axis.inSize - 1);
      double start = axis.roiStart * extent;
      Value source;
      if (resizedLength == 1) {
        source = constant((axis.roiEnd - axis.roiStart) * extent / 2 + start);
      } else {
        double step =
            (axis.roiEnd - axis.roiStart) * extent / (resizedLength - 1);
        source = arith::AddFOp::create(
            b, loc, arith::MulFOp::create(b, loc, x, constant(step)),
            constant(start));
      }
      Value out = arith::OrIOp::create(
          b, loc,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, source,
                                constant(0)),
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, source,
                                constant(extent)));
      outside =
          outside ? Value(arith::OrIOp::create(b, loc, outside, out)) : out;
      return source;
    }
    case CoordinateMode::HalfPixelSymmetric: {
      // half_pixel, shifted so that the output stays centred on the input
      // when the output size is a rounded scale * input size.
      double adjustment = static_cast<double>(axis.outSize) / resizedLength;
      double offset = static_cast<double>(axis.inSize) / 2 * (1 - adjustment);
      return arith::AddFOp::create(b, loc, halfPixel(), constant(offset));
    }
    }
    llvm_unreachable("unknown coordinate mode");
  }

  /// An integral f64 as an index clamped into [0, size): reads past the
  /// border repeat the edge, as ONNX's edge padding does.
  Value clampedIndex(Value integral, int64_t size) const {
    Value i = arith::FPToSIOp::create(b, loc, b.getI64Type(), integral);
    Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
    index = arith::MaxSIOp::create(b, loc, index, indexConstant(b, loc, 0));
    return arith::MinSIOp::create(b, loc, index,
                                  indexConstant(b, loc, size - 1));
  }

  /// The pixel nearest to `x`. Ties are decided on the exact fraction
  /// `x - floor(x)` (never on `x + 0.5`, which can round up across an
  /// integer).
  Value nearest(Value x, NearestMode rounding) const {
    if (rounding == NearestMode::Floor)
      return math::FloorOp::create(b, loc, x);
    if (rounding == NearestMode::Ceil)
      return math::CeilOp::create(b, loc, x);
    Value floor = math::FloorOp::create(b, loc, x);
    Value fraction = arith::SubFOp::create(b, loc, x, floor);
    auto predicate = rounding == NearestMode::RoundPreferFloor
                         ? arith::CmpFPredicate::OGT
                         : arith::CmpFPredicate::OGE;
    Value up =
        arith::CmpFOp::create(b, loc, predicate, fraction, constant(0.5));
    Value next = arith::AddFOp::create(b, loc, floor, constant(1));
    return arith::SelectOp::create(b, loc, up, next, floor);
  }
};

/// Keys' cubic convolution weights of the four pixels floor(x) - 1 ..
/// floor(x) + 2 for the fraction t = x - floor(x) (ONNX's cubic_coeff_a =
/// A), in f64. With `excludeOutside`, pixels outside [0, size) get weight 0
/// and the rest are rescaled to sum to 1.
SmallVector<Value> cubicWeights(const CoordinateBuilder &c, Value floor,
                                Value t, double a, bool excludeOutside,
                                int64_t size) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  auto add = [&](Value x, Value y) {
    return Value(arith::AddFOp::create(b, loc, x, y));
  };
  auto sub = [&](Value x, Value y) {
    return Value(arith::SubFOp::create(b, loc, x, y));
  };
  auto mul = [&](Value x, Value y) {
    return Value(arith::MulFOp::create(b, loc, x, y));
  };
  Value one = c.constant(1);
  // |d| in (1, 2): ((A d - 5A) d + 8A) d - 4A; |d| <= 1: ((A + 2) d - (A +
  // 3)) d^2 + 1.
  auto outer = [&](Value d) {
    return sub(mul(add(mul(sub(mul(c.constant(a), d), c.constant(5 * a)), d),
                       c.constant(8 * a)),
                   d),
               c.constant(4 * a));
  };
  auto inner = [&](Value d) {
    return add(
        mul(sub(mul(c.constant(a + 2), d), c.constant(a + 3)), mul(d, d)), one);
  };
  Value oneMinusT = sub(one, t);
  SmallVector<Value> weights{outer(add(t, one)), inner(t), inner(oneMinusT),
                             outer(add(oneMinusT, one))};
  if (!excludeOutside)
    return weights;
  Value zero = c.constant(0), sum = zero;
  for (auto [k, w] : llvm::enumerate(weights)) {
    Value position = add(floor, c.constant(static_cast<double>(k) - 1));
    Value inside = arith::AndIOp::create(
        b, loc,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, position,
                              zero),
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, position,
                              c.constant(static_cast<double>(size))));
    w = arith::SelectOp::create(b, loc, inside, w, zero);
    sum = add(sum, w);
  }
  for (Value &w : weights)
    w = arith::DivFOp::create(b, loc, w, sum);
  return weights;
}

/// One cubic-resampled element: per resized dimension the four pixels
/// around the input coordinate (edge-clamped) and their weights; the 4^k
/// pixels are blended one dimension at a time from the innermost.
Value cubicSample(OpBuilder &b, Location loc, const CoordinateBuilder &c,
                  Value input, SmallVector<Value> coords, ValueRange indices,
                  ArrayRef<ResizeAxis> axes, Type blendType, double a,
                  bool excludeOutside) {
  Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
  SmallVector<int64_t> resizedDims;
  SmallVector<SmallVector<Value>> taps, weights;
  for (auto [d, axis] : llvm::enumerate(axes)) {
    if (!axis.resized)
      continue;
    Value x = c.sourceCoordinate(indices[d], axis);
    Value floor = math::FloorOp::create(b, loc, x);
    Value t = arith::SubFOp::create(b, loc, x, floor);
    SmallVector<Value> w =
        cubicWeights(c, floor, t, a, excludeOutside, axis.inSize);
    SmallVector<Value> pixels;
    for (int k = 0; k < 4; ++k) {
      pixels.push_back(c.clampedIndex(
          arith::AddFOp::create(b, loc, floor, c.constant(k - 1)),
          axis.inSize));
      if (blendType != w[k].getType())
        w[k] = arith::TruncFOp::create(b, loc, blendType, w[k]);
    }
    resizedDims.push_back(d);
    taps.push_back(std::move(pixels));
    weights.push_back(std::move(w));
  }
  // Pixel m takes tap (m / 4^(n-1-k)) % 4 in resized dimension k: the four
  // pixels 4j .. 4j + 3 differ only in the innermost resized dimension.
  size_t n = resizedDims.size();
  uint64_t count = uint64_t{1} << (2 * n);
  SmallVector<Value> values;
  for (uint64_t m = 0; m < count; ++m) {
    for (size_t k = 0; k < n; ++k)
      coords[resizedDims[k]] = taps[k][(m >> (2 * (n - 1 - k))) & 3];
    Value v = tensor::ExtractOp::create(b, loc, input, coords);
    if (elementType != blendType)
      v = arith::ExtFOp::create(b, loc, blendType, v);
    values.push_back(v);
  }
  for (size_t k = n; k-- > 0;) {
    SmallVector<Value> blended;
    for (size_t j = 0; j < values.size(); j += 4) {
      Value sum = arith::MulFOp::create(b, loc, values[j], weights[k][0]);
      for (int i = 1; i < 4; ++i)
        sum = arith::AddFOp::create(
            b, loc, sum,
            arith::MulFOp::create(b, loc, values[j + i], weights[k][i]));
      blended.push_back(sum);
    }
    values = std::move(blended);
  }
  Value v = values.front();
  if (elementType != blendType)
    v = arith::TruncFOp::create(b, loc, elementType, v);
  return v;
}

/// A generic over the result. Per resized dimension it computes the input
/// coordinate; nearest rounds it to one pixel, linear reads the two pixels
/// around it and blends them (in f32, or f64 for f64 tensors), one
/// dimension at a time from the innermost, so k resized dimensions read 2^k
/// pixels; cubic reads four per dimension (4^k pixels).
struct ResizeToGeneric : OpRewritePattern<ResizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ResizeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType inType = op.getInput().getType(), outType = op.getType();
    Location loc = op.getLoc();
    if (outType.getNumElements() == 0) {
      rewriter.replaceOp(op, emptyTensor(rewriter, loc, outType));
      return success();
    }
    if (inType.getNumElements() == 0)
      return rewriter.notifyMatchFailure(op, "resizing an empty tensor");
    ArrayRef<double> scales = op.getScales();
    SmallVector<ResizeAxis> axes;
    for (int64_t d = 0; d < inType.getRank(); ++d) {
      int64_t in = inType.getDimSize(d), out = outType.getDimSize(d);
      double scale = scales.empty() ? static_cast<double>(out) / in : scales[d];
      ResizeAxis axis{in, out, scale, in != out || scale != 1.0};
      if (std::optional<ArrayRef<double>> roi = op.getRoi()) {
        axis.roiStart = (*roi)[d];
        axis.roiEnd = (*roi)[inType.getRank() + d];
        axis.resized |= axis.roiStart != 0 || axis.roiEnd != 1;
      }
      axes.push_back(axis);
    }
    double extrapolation = op.getExtrapolationValue().convertToDouble();
    Type elementType = inType.getElementType();
    Type blendType = elementType.isF64() ? elementType : rewriter.getF32Type();
    bool linear = op.getMode() == ResizeMode::Linear;
    bool cubic = op.getMode() == ResizeMode::Cubic;
    double cubicA = op.getCubicCoeffA().convertToDouble();
    bool excludeOutside = op.getExcludeOutside();
    NearestMode nearestMode = op.getNearestMode();
    CoordinateMode coordinateMode = op.getCoordinateMode();
    Value input = op.getInput();

    // One output element from its indices.
    auto interpolate = [&](OpBuilder &b, Location nestedLoc,
                           const CoordinateBuilder &c,
                           ValueRange indices) -> Value {
      SmallVector<Value> coords = llvm::to_vector(indices);
      if (!linear && !cubic) {
        for (auto [d, axis] : llvm::enumerate(axes))
          if (axis.resized)
            coords[d] = c.clampedIndex(
                c.nearest(c.sourceCoordinate(indices[d], axis), nearestMode),
                axis.inSize);
        return tensor::ExtractOp::create(b, nestedLoc, input, coords);
      }
      if (cubic)
        return cubicSample(b, nestedLoc, c, input, coords, indices, axes,
                           blendType, cubicA, excludeOutside);
      // Per resized dimension: the two neighbouring pixels and the
      // weight of the upper one.
      SmallVector<int64_t> resizedDims;
      SmallVector<Value> lower, upper, weights;
      for (auto [d, axis] : llvm::enumerate(axes)) {
        if (!axis.resized)
          continue;
        Value x = c.sourceCoordinate(indices[d], axis);
        Value floor = math::FloorOp::create(b, nestedLoc, x);
        Value weight = arith::SubFOp::create(b, nestedLoc, x, floor);
        if (blendType != weight.getType())
          weight = arith::TruncFOp::create(b, nestedLoc, blendType, weight);
        resizedDims.push_back(d);
        weights.push_back(weight);
        lower.push_back(c.clampedIndex(floor, axis.inSize));
        upper.push_back(c.clampedIndex(
            arith::AddFOp::create(b, nestedLoc, floor, c.constant(1)),
            axis.inSize));
      }
      // Corner m takes the upper pixel in resized dimension k when bit
      // (n - 1 - k) of m is set, so corners 2j and 2j + 1 differ only in
      // the innermost resized dimension.
      size_t n = resizedDims.size();
      SmallVector<Value> corners;
      for (uint64_t m = 0; m < (uint64_t{1} << n); ++m) {
        for (size_t k = 0; k < n; ++k)
          coords[resizedDims[k]] = (m >> (n - 1 - k)) & 1 ? upper[k] : lower[k];
        Value v = tensor::ExtractOp::create(b, nestedLoc, input, coords);
        if (elementType != blendType)
          v = arith::ExtFOp::create(b, nestedLoc, blendType, v);
        corners.push_back(v);
      }
      // (1 - t) a + t b, innermost resized dimension first.
      Value one = scalarConstant(b, nestedLoc, blendType, 1);
      for (size_t k = n; k-- > 0;) {
        Value t = weights[k];
        Value oneMinusT = arith::SubFOp::create(b, nestedLoc, one, t);
        SmallVector<Value> blended;
        for (size_t j = 0; j < corners.size(); j += 2) {
          Value lo = arith::MulFOp::create(b, nestedLoc, corners[j], oneMinusT);
          Value hi = arith::MulFOp::create(b, nestedLoc, corners[j + 1], t);
          blended.push_back(arith::AddFOp::create(b, nestedLoc, lo, hi));
        }
        corners = std::move(blended);
      }
      Value v = corners.front();
      if (elementType != blendType)
        v = arith::TruncFOp::create(b, nestedLoc, elementType, v);
      return v;
    };
    Value result = indexedGeneric(
        rewriter, loc, outType, {}, {},
        [&](OpBuilder &b, Location nestedLoc, ValueRange,
            ValueRange indices) -> Value {
          CoordinateBuilder c{b, nestedLoc, coordinateMode};
          Value v = interpolate(b, nestedLoc, c, indices);
          if (!c.outside)
            return v;
          return arith::SelectOp::create(
              b, nestedLoc, c.outside,
              scalarConstant(b, nestedLoc, elementType, extrapolation), v);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void kiln::populateDataMovementToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<ConstantToArith, IotaToGeneric, ReshapeToTensorReshapes,
               TransposeToLinalg, BroadcastToLinalg, ConcatToInsertSlices,
               SliceToTensor, SplitToExtractSlices, GatherToGeneric,
               GatherElementsToGeneric, ScatterElementsToGeneric, PadToTensor,
               TileToGeneric, ResizeToGeneric>(patterns.getContext());
}

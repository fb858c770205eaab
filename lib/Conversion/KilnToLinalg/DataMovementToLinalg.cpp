//===- DataMovementToLinalg.cpp - Data movement kiln ops to linalg
//----------===//
//
// Regroupings and windows of a tensor become tensor ops (collapse_shape,
// expand_shape, extract_slice, insert_slice, pad); permutations and
// broadcasts become named linalg ops. An op whose source element is not an
// increasing affine function of the result coordinates (reversed slices,
// gathers, reflect and edge padding, tiling) becomes a linalg.generic over
// the result that computes the source coordinates from linalg.index and
// reads the input with tensor.extract (resizing does the same, in
// ResizeToLinalg.cpp). Such accesses never
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

} // namespace

void kiln::populateDataMovementToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<ConstantToArith, IotaToGeneric, ReshapeToTensorReshapes,
               TransposeToLinalg, BroadcastToLinalg, ConcatToInsertSlices,
               SliceToTensor, SplitToExtractSlices, GatherToGeneric,
               GatherElementsToGeneric, ScatterElementsToGeneric, PadToTensor,
               TileToGeneric>(patterns.getContext());
}

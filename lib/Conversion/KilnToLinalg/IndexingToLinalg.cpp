//===- IndexingToLinalg.cpp - N-d gathers and scatters to linalg ----------===//
//
// kiln.gather_nd is a generic over its result that reads the index tuple and
// then the input with tensor.extract. kiln.scatter_nd keeps ScatterElements'
// scheme (DataMovementToLinalg.cpp): a generic over the input whose
// reduction dimensions walk the updates in order, so each result element is
// owned by one parallel iteration and a later update wins or combines last.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// result[o..., s...] = input[o[:b]..., t0, ..., tq-1, s...] with
/// t = indices[o..., :] (wrapped, clamped).
struct GatherNdToGeneric : OpRewritePattern<GatherNdOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherNdOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/false)))
      return failure();
    RankedTensorType inType = op.getInput().getType();
    RankedTensorType indexType = op.getIndices().getType();
    int64_t batchDims = op.getBatchDims();
    int64_t q = indexType.getShape().back();
    int64_t outer = indexType.getRank() - 1;
    Value input = op.getInput(), indices = op.getIndices();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), op.getType(), ValueRange(), {},
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange idx) {
          SmallVector<Value> tuple(idx.take_front(outer));
          tuple.push_back(Value());
          SmallVector<Value> coords(idx.take_front(batchDims));
          for (int64_t k = 0; k < q; ++k) {
            tuple.back() = indexConstant(b, loc, k);
            Value t = tensor::ExtractOp::create(b, loc, indices, tuple);
            coords.push_back(normalizedIndex(
                b, loc, t, inType.getDimSize(batchDims + k), /*clamp=*/true));
          }
          llvm::append_range(coords, idx.drop_front(outer));
          return tensor::ExtractOp::create(b, loc, input, coords);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// result[p] = fold over the update positions u (row-major) of:
///   all_k(indices[u, k] == p[k]) ? combine(acc, updates[u, p[q:]]) : acc
/// starting from input[p]. Costs |input| * |updates rows| comparisons.
struct ScatterNdToGeneric : OpRewritePattern<ScatterNdOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScatterNdOp op,
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
    if (indexType.getNumElements() == 0) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    int64_t rank = inType.getRank();
    int64_t q = indexType.getShape().back();
    int64_t outer = indexType.getRank() - 1;
    MLIRContext *context = rewriter.getContext();
    // Iteration space: the input's dims, then the update positions.
    int64_t loops = rank + outer;
    SmallVector<AffineExpr> updateExprs;
    for (int64_t d = 0; d < outer; ++d)
      updateExprs.push_back(getAffineDimExpr(rank + d, context));
    for (int64_t d = q; d < rank; ++d)
      updateExprs.push_back(getAffineDimExpr(d, context));
    AffineMap updateMap = AffineMap::get(loops, 0, updateExprs, context);
    SmallVector<AffineExpr> resultExprs;
    for (int64_t d = 0; d < rank; ++d)
      resultExprs.push_back(getAffineDimExpr(d, context));
    AffineMap resultMap = AffineMap::get(loops, 0, resultExprs, context);
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    iterators.append(outer, utils::IteratorType::reduction);
    Value indices = op.getIndices();
    auto generic = linalg::GenericOp::create(
        rewriter, op.getLoc(), TypeRange(inType), ValueRange{op.getUpdates()},
        op.getInput(), SmallVector<AffineMap>{updateMap, resultMap}, iterators,
        [&](OpBuilder &b, Location loc, ValueRange args) {
          SmallVector<Value> tuple;
          for (int64_t d = 0; d < outer; ++d)
            tuple.push_back(linalg::IndexOp::create(b, loc, rank + d));
          tuple.push_back(Value());
          Value hit;
          for (int64_t k = 0; k < q; ++k) {
            tuple.back() = indexConstant(b, loc, k);
            Value t = tensor::ExtractOp::create(b, loc, indices, tuple);
            Value target = normalizedIndex(b, loc, t, inType.getDimSize(k),
                                           /*clamp=*/false);
            Value position = linalg::IndexOp::create(b, loc, k);
            Value same = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::eq, target, position);
            hit = hit ? Value(arith::AndIOp::create(b, loc, hit, same)) : same;
          }
          Value combined = combineScatter(b, loc, reduction, args[1], args[0]);
          linalg::YieldOp::create(
              b, loc,
              Value(arith::SelectOp::create(b, loc, hit, combined, args[1])));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void kiln::populateIndexingToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<GatherNdToGeneric, ScatterNdToGeneric>(patterns.getContext());
}

//===- ScanToLinalg.cpp - Running sums and top-k along an axis to linalg --===//
//
// Both are written as reductions along the axis, which linalg and the GPU
// mapping already handle, instead of a sequential scan or a sort:
//   - kiln.cumsum: result[i] = sum over j of (j within the prefix of i) ?
//     x[j] : 0, an extra reduction dimension over the axis (n^2 additions per
//     line; exact order of the forward sum).
//   - kiln.top_k: each element's rank along the axis (how many elements beat
//     it, ties broken by position), then output q takes the element of rank
//     q. Two generics, n^2 + n * k comparisons per line, and the order ONNX
//     requires (equal values: lower position first).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// The map reading a rank-`rank` tensor inside an iteration space of rank
/// `rank + 1` whose last dimension walks `axis`.
AffineMap alongExtraDim(MLIRContext *context, int64_t rank, int64_t axis) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    exprs.push_back(getAffineDimExpr(d == axis ? rank : d, context));
  return AffineMap::get(rank + 1, 0, exprs, context);
}

struct CumSumToGeneric : OpRewritePattern<CumSumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CumSumOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank(), axis = op.getAxis();
    SmallVector<int64_t> shape(type.getShape());
    shape.push_back(type.getDimSize(axis));
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Value init = filledTensor(rewriter, loc, type, 0);
    bool exclusive = op.getExclusive(), reverse = op.getReverse();
    // j joins i's sum when j <= i (forward) or j >= i (reverse); exclusive
    // leaves j = i out.
    arith::CmpIPredicate joins =
        reverse ? (exclusive ? arith::CmpIPredicate::sgt
                             : arith::CmpIPredicate::sge)
                : (exclusive ? arith::CmpIPredicate::slt
                             : arith::CmpIPredicate::sle);
    bool isFloat = isa<FloatType>(type.getElementType());
    Value result = reductionGeneric(
        rewriter, loc, shape, {rank}, op.getInput(),
        alongExtraDim(context, rank, axis), init,
        [&](OpBuilder &b, Location nested, ValueRange args) {
          Value i = linalg::IndexOp::create(b, nested, axis);
          Value j = linalg::IndexOp::create(b, nested, rank);
          Value in = arith::CmpIOp::create(b, nested, joins, j, i);
          Value sum =
              isFloat ? Value(arith::AddFOp::create(b, nested, args[1], args[0]))
                      : Value(arith::AddIOp::create(b, nested, args[1], args[0]));
          return SmallVector<Value>{
              arith::SelectOp::create(b, nested, in, sum, args[1])};
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Whether (a at position ia) comes before (b at position ib) in top-k
/// order: larger first (smaller with `smallest`), NaN above every number,
/// equal values by lower position.
Value precedes(OpBuilder &b, Location loc, Value a, Value ia, Value bv,
               Value ib, bool smallest) {
  Value earlier =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, ia, ib);
  if (!isa<FloatType>(a.getType())) {
    Value beats = arith::CmpIOp::create(
        b, loc, smallest ? arith::CmpIPredicate::slt : arith::CmpIPredicate::sgt,
        a, bv);
    Value same =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, a, bv);
    return arith::OrIOp::create(
        b, loc, beats, arith::AndIOp::create(b, loc, same, earlier));
  }
  using P = arith::CmpFPredicate;
  Value aNan = arith::CmpFOp::create(b, loc, P::UNO, a, a);
  Value bNan = arith::CmpFOp::create(b, loc, P::UNO, bv, bv);
  Value ordered =
      arith::CmpFOp::create(b, loc, smallest ? P::OLT : P::OGT, a, bv);
  // NaN ranks above numbers: it beats them when looking for the largest and
  // loses to them when looking for the smallest.
  Value nanBeats = smallest
                       ? Value(arith::AndIOp::create(
                             b, loc, bNan,
                             arith::XOrIOp::create(
                                 b, loc, aNan,
                                 arith::ConstantIntOp::create(b, loc, 1, 1))))
                       : Value(arith::AndIOp::create(
                             b, loc, aNan,
                             arith::XOrIOp::create(
                                 b, loc, bNan,
                                 arith::ConstantIntOp::create(b, loc, 1, 1))));
  Value same = arith::OrIOp::create(
      b, loc, arith::CmpFOp::create(b, loc, P::OEQ, a, bv),
      arith::AndIOp::create(b, loc, aNan, bNan));
  return arith::OrIOp::create(
      b, loc, arith::OrIOp::create(b, loc, ordered, nanBeats),
      arith::AndIOp::create(b, loc, same, earlier));
}

struct TopKToGenerics : OpRewritePattern<TopKOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TopKOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType inType = op.getInput().getType();
    int64_t rank = inType.getRank(), axis = op.getAxis();
    int64_t n = inType.getDimSize(axis);
    bool smallest = op.getSmallest();
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Type i64 = rewriter.getI64Type();
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(rank + 1, context).dropResult(rank);
    AffineMap along = alongExtraDim(context, rank, axis);

    // rank[p] = #{j : x[j] precedes x[p]} along the axis.
    SmallVector<int64_t> rankShape(inType.getShape());
    rankShape.push_back(n);
    auto rankType = RankedTensorType::get(inType.getShape(), i64);
    Value ranks = reductionGeneric(
        rewriter, loc, rankShape, {rank}, {op.getInput(), op.getInput()},
        {identity, along}, filledTensor(rewriter, loc, rankType, 0),
        [&](OpBuilder &b, Location nested, ValueRange args) {
          Value i = arith::IndexCastOp::create(
              b, nested, i64, linalg::IndexOp::create(b, nested, axis));
          Value j = arith::IndexCastOp::create(
              b, nested, i64, linalg::IndexOp::create(b, nested, rank));
          Value beats = precedes(b, nested, args[1], j, args[0], i, smallest);
          Value one = arith::ConstantIntOp::create(b, nested, i64, 1);
          Value zero = arith::ConstantIntOp::create(b, nested, i64, 0);
          return SmallVector<Value>{arith::AddIOp::create(
              b, nested, args[2],
              arith::SelectOp::create(b, nested, beats, one, zero))};
        })[0];

    // values[q], indices[q] = the element of rank q and its position.
    RankedTensorType valuesType = op.getValues().getType();
    RankedTensorType indicesType = op.getIndices().getType();
    SmallVector<int64_t> pickShape(valuesType.getShape());
    pickShape.push_back(n);
    SmallVector<Value> picked = reductionGeneric(
        rewriter, loc, pickShape, {rank}, {op.getInput(), ranks},
        {along, along},
        {filledTensor(rewriter, loc, valuesType, 0),
         filledTensor(rewriter, loc, indicesType, 0)},
        [&](OpBuilder &b, Location nested, ValueRange args) {
          Value q = arith::IndexCastOp::create(
              b, nested, i64, linalg::IndexOp::create(b, nested, axis));
          Value j = arith::IndexCastOp::create(
              b, nested, i64, linalg::IndexOp::create(b, nested, rank));
          Value hit = arith::CmpIOp::create(
              b, nested, arith::CmpIPredicate::eq, args[1], q);
          return SmallVector<Value>{
              arith::SelectOp::create(b, nested, hit, args[0], args[2]),
              arith::SelectOp::create(b, nested, hit, j, args[3])};
        });
    rewriter.replaceOp(op, picked);
    return success();
  }
};

} // namespace

void kiln::populateScanToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<CumSumToGeneric, TopKToGenerics>(patterns.getContext());
}

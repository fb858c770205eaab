//===- ReductionToLinalg.cpp - Reductions, normalisation, pooling to linalg
//-===//
//
// Every reduction is a linalg.generic whose reduced dims are reduction loops
// (never scf loops), so GPU mapping can later parallelise them; statistics
// computed by one generic are read by the next through projection maps.
// keepdims reinserts unit dims with tensor.expand_shape. Pooling windows are
// reduction loops over a padded input, like convolution windows.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Conversion/KilnToLinalg/ScalarSemantics.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// Scalar arithmetic over one element type (float, signless or signed int,
/// i1), as reductions need it.
struct Arith {
  OpBuilder &b;
  Location loc;

  static bool isFloat(Value v) { return isa<FloatType>(v.getType()); }
  Value constant(Type type, double v) const {
    return scalarConstant(b, loc, type, v);
  }
  Value add(Value x, Value y) const {
    return isFloat(x) ? Value(arith::AddFOp::create(b, loc, x, y))
                      : Value(arith::AddIOp::create(b, loc, x, y));
  }
  Value sub(Value x, Value y) const {
    return isFloat(x) ? Value(arith::SubFOp::create(b, loc, x, y))
                      : Value(arith::SubIOp::create(b, loc, x, y));
  }
  Value mul(Value x, Value y) const {
    return isFloat(x) ? Value(arith::MulFOp::create(b, loc, x, y))
                      : Value(arith::MulIOp::create(b, loc, x, y));
  }
  Value div(Value x, Value y) const {
    return isFloat(x) ? Value(arith::DivFOp::create(b, loc, x, y))
                      : Value(arith::DivSIOp::create(b, loc, x, y));
  }
  /// NaN-propagating max and min; or/and on booleans.
  Value max(Value x, Value y) const {
    if (isFloat(x))
      return arith::MaximumFOp::create(b, loc, x, y);
    if (x.getType().isInteger(1))
      return arith::OrIOp::create(b, loc, x, y);
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value min(Value x, Value y) const {
    if (isFloat(x))
      return arith::MinimumFOp::create(b, loc, x, y);
    if (x.getType().isInteger(1))
      return arith::AndIOp::create(b, loc, x, y);
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value exp(Value x) const { return math::ExpOp::create(b, loc, x); }
  Value log(Value x) const { return math::LogOp::create(b, loc, x); }
};

double epsilonOf(APFloat epsilon) { return epsilon.convertToDouble(); }

//===----------------------------------------------------------------------===//
// reduce, global_pool
//===----------------------------------------------------------------------===//

/// Reduces `reduced` (sorted) dims of `input` with `kind` into `resultType`
/// (which has the reduced dims as size 1 or drops them).
Value reduceDims(OpBuilder &b, Location loc, Value input,
                 ArrayRef<int64_t> reduced, ReduceKind kind,
                 RankedTensorType resultType) {
  MLIRContext *context = b.getContext();
  auto inputType = cast<RankedTensorType>(input.getType());
  Type elementType = inputType.getElementType();
  RankedTensorType accType = dropDims(inputType, reduced);
  double identity = 0;
  if (kind == ReduceKind::Max)
    identity = lowestValue(elementType);
  else if (kind == ReduceKind::Min)
    identity = highestValue(elementType);
  else if (kind == ReduceKind::Prod)
    identity = 1;
  Value init = filledTensor(b, loc, accType, identity);
  Value acc = reductionGeneric(
      b, loc, inputType.getShape(), reduced, input,
      AffineMap::getMultiDimIdentityMap(inputType.getRank(), context), init,
      [&](OpBuilder &nested, Location nestedLoc,
          ValueRange args) -> SmallVector<Value> {
        Arith a{nested, nestedLoc};
        switch (kind) {
        case ReduceKind::Sum:
        case ReduceKind::Mean:
          return {a.add(args[1], args[0])};
        case ReduceKind::Prod:
          return {a.mul(args[1], args[0])};
        case ReduceKind::Max:
          return {a.max(args[1], args[0])};
        case ReduceKind::Min:
          return {a.min(args[1], args[0])};
        }
        llvm_unreachable("unknown reduce kind");
      })[0];
  if (kind == ReduceKind::Mean) {
    int64_t count = 1;
    for (int64_t d : reduced)
      count *= inputType.getDimSize(d);
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(accType.getRank(), context);
    acc = parallelGeneric(
        b, loc, accType, acc, identity,
        [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
          Arith a{nested, nestedLoc};
          return a.div(args[0], a.constant(elementType, count));
        });
  }
  if (accType != resultType) {
    acc = insertUnitDims(b, loc, acc, resultType, reduced);
  }
  return acc;
}

struct ReduceLowering : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(refuseUnsignedTensors(op, rewriter)))
      return failure();
    ReduceKind kind = op.getKind();
    if (op.getInput().getType().getElementType().isInteger(1) &&
        kind != ReduceKind::Max && kind != ReduceKind::Min)
      return rewriter.notifyMatchFailure(
          op, "boolean sum, mean and prod are not lowered");
    if (op.getAxes().empty()) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    rewriter.replaceOp(op, reduceDims(rewriter, op.getLoc(), op.getInput(),
                                      op.getAxes(), kind, op.getType()));
    return success();
  }
};

SmallVector<int64_t> spatialDims(int64_t rank, DataFormat format) {
  bool last = format == DataFormat::ChannelsLast;
  SmallVector<int64_t> dims;
  for (int64_t d = last ? 1 : 2, e = last ? rank - 1 : rank; d < e; ++d)
    dims.push_back(d);
  return dims;
}

struct GlobalPoolLowering : OpRewritePattern<GlobalPoolOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GlobalPoolOp op,
                                PatternRewriter &rewriter) const override {
    ReduceKind kind =
        op.getKind() == PoolKind::Max ? ReduceKind::Max : ReduceKind::Mean;
    SmallVector<int64_t> dims =
        spatialDims(op.getInput().getType().getRank(), op.getDataFormat());
    rewriter.replaceOp(op, reduceDims(rewriter, op.getLoc(), op.getInput(),
                                      dims, kind, op.getType()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// argmax, argmin
//===----------------------------------------------------------------------===//

/// One generic with two accumulators, the best value so far and its index
/// (from linalg.index). A later element replaces the best only if strictly
/// better (first index on ties) or also if equal (last index). NaN counts as
/// better than any number, as in numpy.
template <typename OpTy> struct ArgReduceLowering : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  static constexpr bool isMax = std::is_same_v<OpTy, ArgMaxOp>;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (failed(refuseUnsignedTensors(op, rewriter)))
      return failure();
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    Type elementType = inputType.getElementType();
    int64_t axis = normalizeAxis(op.getAxis(), inputType.getRank());
    bool last = op.getSelectLastIndex();
    RankedTensorType valueType = dropDims(inputType, {axis});
    auto indexType =
        RankedTensorType::get(valueType.getShape(), rewriter.getI64Type());
    double worst = isMax ? lowestValue(elementType) : highestValue(elementType);
    Value values = filledTensor(rewriter, loc, valueType, worst);
    Value indices = filledTensor(rewriter, loc, indexType, 0);

    SmallVector<Value> results = reductionGeneric(
        rewriter, loc, inputType.getShape(), {axis}, op.getInput(),
        AffineMap::getMultiDimIdentityMap(inputType.getRank(),
                                          rewriter.getContext()),
        ValueRange{values, indices},
        [&](OpBuilder &b, Location nestedLoc,
            ValueRange args) -> SmallVector<Value> {
          Value x = args[0], best = args[1], bestIndex = args[2];
          Value better;
          if (isa<FloatType>(elementType)) {
            using P = arith::CmpFPredicate;
            P predicate =
                isMax ? (last ? P::OGE : P::OGT) : (last ? P::OLE : P::OLT);
            better = arith::CmpFOp::create(b, nestedLoc, predicate, x, best);
            Value xIsNan = arith::CmpFOp::create(b, nestedLoc, P::UNO, x, x);
            if (!last) {
              Value bestIsNumber =
                  arith::CmpFOp::create(b, nestedLoc, P::ORD, best, best);
              xIsNan =
                  arith::AndIOp::create(b, nestedLoc, xIsNan, bestIsNumber);
            }
            better = arith::OrIOp::create(b, nestedLoc, better, xIsNan);
          } else {
            // Booleans compare as 0 and 1, other integers as signed.
            using P = arith::CmpIPredicate;
            bool u = elementType.isInteger(1);
            P predicate =
                isMax ? (last ? (u ? P::uge : P::sge) : (u ? P::ugt : P::sgt))
                      : (last ? (u ? P::ule : P::sle) : (u ? P::ult : P::slt));
            better = arith::CmpIOp::create(b, nestedLoc, predicate, x, best);
          }
          Value index = arith::IndexCastOp::create(
              b, nestedLoc, b.getI64Type(),
              linalg::IndexOp::create(b, nestedLoc, axis));
          return {
              arith::SelectOp::create(b, nestedLoc, better, x, best),
              arith::SelectOp::create(b, nestedLoc, better, index, bestIndex)};
        });
    Value result = results[1];
    if (op.getKeepdims())
      result = insertUnitDims(rewriter, loc, result, op.getType(), {axis});
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// Three generics: the row maximum, the sum of e^(x - max), then the
/// normalised elements.
template <typename OpTy> struct SoftmaxLowering : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  static constexpr bool isLog = std::is_same_v<OpTy, LogSoftmaxOp>;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    int64_t axis = normalizeAxis(op.getAxis(), rank);
    RankedTensorType rowType = dropDims(type, {axis});
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context);
    AffineMap row = projectionMap(context, rank, {axis});
    Value x = op.getInput();

    Value max =
        reductionGeneric(rewriter, loc, type.getShape(), {axis}, x, identity,
                         filledTensor(rewriter, loc, rowType,
                                      lowestValue(type.getElementType())),
                         [](OpBuilder &b, Location nestedLoc,
                            ValueRange args) -> SmallVector<Value> {
                           return {Arith{b, nestedLoc}.max(args[1], args[0])};
                         })[0];
    Value sum = reductionGeneric(
        rewriter, loc, type.getShape(), {axis}, ValueRange{x, max},
        {identity, row}, filledTensor(rewriter, loc, rowType, 0),
        [](OpBuilder &b, Location nestedLoc,
           ValueRange args) -> SmallVector<Value> {
          Arith a{b, nestedLoc};
          return {a.add(args[2], a.exp(a.sub(args[0], args[1])))};
        })[0];
    Value result = parallelGeneric(
        rewriter, loc, type, ValueRange{x, max, sum}, {identity, row, row},
        [](OpBuilder &b, Location nestedLoc, ValueRange args) {
          Arith a{b, nestedLoc};
          Value shifted = a.sub(args[0], args[1]);
          if (isLog)
            return a.sub(shifted, a.log(args[2]));
          return a.div(a.exp(shifted), args[2]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// layer_norm, instance_norm, batch_norm
//===----------------------------------------------------------------------===//

/// (x - mean) / sqrt(variance + epsilon) * scale + bias over `reduced` dims,
/// in three generics: the sum, the sum of squared deviations from the mean
/// (two passes, so large means do not cancel), then the elementwise result.
/// `scale` and `bias` (optional) are read through the given maps.
Value normalize(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> reduced,
                double epsilon, Value scale, AffineMap scaleMap, Value bias,
                AffineMap biasMap) {
  MLIRContext *context = b.getContext();
  auto type = cast<RankedTensorType>(x.getType());
  Type elementType = type.getElementType();
  int64_t rank = type.getRank();
  int64_t count = 1;
  for (int64_t d : reduced)
    count *= type.getDimSize(d);
  RankedTensorType statType = dropDims(type, reduced);
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context);
  AffineMap stat = projectionMap(context, rank, reduced);

  Value sum = reductionGeneric(
      b, loc, type.getShape(), reduced, x, identity,
      filledTensor(b, loc, statType, 0),
      [](OpBuilder &nested, Location nestedLoc,
         ValueRange args) -> SmallVector<Value> {
        return {Arith{nested, nestedLoc}.add(args[1], args[0])};
      })[0];
  Value squares = reductionGeneric(
      b, loc, type.getShape(), reduced, ValueRange{x, sum}, {identity, stat},
      filledTensor(b, loc, statType, 0),
      [&](OpBuilder &nested, Location nestedLoc,
          ValueRange args) -> SmallVector<Value> {
        Arith a{nested, nestedLoc};
        Value deviation =
            a.sub(args[0], a.div(args[1], a.constant(elementType, count)));
        return {a.add(args[2], a.mul(deviation, deviation))};
      })[0];

  SmallVector<Value> inputs{x, sum, squares, scale};
  SmallVector<AffineMap> maps{identity, stat, stat, scaleMap};
  if (bias) {
    inputs.push_back(bias);
    maps.push_back(biasMap);
  }
  return parallelGeneric(
      b, loc, type, inputs, maps,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Arith a{nested, nestedLoc};
        Value n = a.constant(elementType, count);
        Value variance = a.div(args[2], n);
        Value invStd = math::RsqrtOp::create(
            nested, nestedLoc,
            a.add(variance, a.constant(elementType, epsilon)));
        Value y =
            a.mul(a.mul(a.sub(args[0], a.div(args[1], n)), invStd), args[3]);
        return bias ? a.add(y, args[4]) : y;
      });
}

struct LayerNormLowering : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    int64_t axis = normalizeAxis(op.getAxis(), rank);
    SmallVector<int64_t> reduced;
    for (int64_t d = axis; d < rank; ++d)
      reduced.push_back(d);
    // scale and bias broadcast against the trailing (normalised) dims.
    auto paramMap = [&](Value param) -> AffineMap {
      if (!param)
        return {};
      return broadcastMap(context,
                          cast<RankedTensorType>(param.getType()).getShape(),
                          type.getShape());
    };
    Value bias = op.getBias();
    rewriter.replaceOp(op, normalize(rewriter, op.getLoc(), op.getInput(),
                                     reduced, epsilonOf(op.getEpsilon()),
                                     op.getScale(), paramMap(op.getScale()),
                                     bias, paramMap(bias)));
    return success();
  }
};

/// The map reading a per-channel vector in an iteration space of `rank`.
AffineMap channelMap(MLIRContext *context, int64_t rank, int64_t channelDim) {
  return AffineMap::get(rank, 0, getAffineDimExpr(channelDim, context),
                        context);
}

struct InstanceNormLowering : OpRewritePattern<InstanceNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(InstanceNormOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    AffineMap channel = channelMap(rewriter.getContext(), rank, 1);
    rewriter.replaceOp(op,
                       normalize(rewriter, op.getLoc(), op.getInput(),
                                 spatialDims(rank, DataFormat::ChannelsFirst),
                                 epsilonOf(op.getEpsilon()), op.getScale(),
                                 channel, op.getBias(), channel));
    return success();
  }
};

/// One elementwise generic reading the four per-channel vectors.
struct BatchNormLowering : OpRewritePattern<BatchNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BatchNormOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    int64_t channelDim =
        op.getDataFormat() == DataFormat::ChannelsLast ? rank - 1 : 1;
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context);
    AffineMap channel = channelMap(context, rank, channelDim);
    Value result = parallelGeneric(
        rewriter, op.getLoc(), type,
        ValueRange{op.getInput(), op.getScale(), op.getBias(), op.getMean(),
                   op.getVariance()},
        {identity, channel, channel, channel, channel},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          return buildScalar(op, b, loc, args);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Sliding windows (lrn, pool)
//===----------------------------------------------------------------------===//

/// A shape-only operand for the window loops `firstLoop`.. of a sliding-window
/// reduction, as linalg's pooling ops have: the input map mixes each window
/// loop with an output loop, so some operand must carry the window loops on
/// their own for linalg to infer their bounds. Its elements are never read.
std::pair<Value, AffineMap>
windowShapeOperand(OpBuilder &b, Location loc, ArrayRef<int64_t> window,
                   Type elementType, int64_t numLoops, int64_t firstLoop) {
  MLIRContext *context = b.getContext();
  SmallVector<AffineExpr> exprs;
  for (int64_t i = 0, e = window.size(); i < e; ++i)
    exprs.push_back(getAffineDimExpr(firstLoop + i, context));
  Value shape = emptyTensor(b, loc, RankedTensorType::get(window, elementType));
  return {shape, AffineMap::get(numLoops, 0, exprs, context)};
}

/// The sum of squares over the channel window is a reduction loop over a
/// channel-padded input; then x / (bias + alpha / size * sum)^beta.
struct LrnLowering : OpRewritePattern<LrnOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LrnOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank(), size = op.getSize();
    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    low[1] = (size - 1) / 2;
    high[1] = size - 1 - low[1];
    Value padded = padConstant(rewriter, loc, op.getInput(), low, high, 0);

    // Loops: the result dims, then the window position j (reduction).
    SmallVector<int64_t> loopShape(type.getShape());
    loopShape.push_back(size);
    SmallVector<AffineExpr> window;
    for (int64_t d = 0; d < rank; ++d)
      window.push_back(getAffineDimExpr(d, context));
    window[1] = window[1] + getAffineDimExpr(rank, context);
    auto [windowShape, windowShapeMap] = windowShapeOperand(
        rewriter, loc, {size}, type.getElementType(), rank + 1, rank);
    Value sumSquares = reductionGeneric(
        rewriter, loc, loopShape, {rank}, ValueRange{padded, windowShape},
        {AffineMap::get(rank + 1, 0, window, context), windowShapeMap},
        filledTensor(rewriter, loc, type, 0),
        [](OpBuilder &b, Location nestedLoc,
           ValueRange args) -> SmallVector<Value> {
          Arith a{b, nestedLoc};
          return {a.add(args[2], a.mul(args[0], args[0]))};
        })[0];

    double alpha = op.getAlpha().convertToDouble(),
           beta = op.getBeta().convertToDouble(),
           bias = op.getBias().convertToDouble();
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context);
    Value result = parallelGeneric(
        rewriter, loc, type, ValueRange{op.getInput(), sumSquares},
        {identity, identity},
        [&](OpBuilder &b, Location nestedLoc, ValueRange args) {
          Arith a{b, nestedLoc};
          Type t = args[0].getType();
          Value base = a.add(a.constant(t, bias),
                             a.mul(a.constant(t, alpha / size), args[1]));
          Value power =
              math::PowFOp::create(b, nestedLoc, base, a.constant(t, beta));
          return a.div(args[0], power);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// pool
//===----------------------------------------------------------------------===//

/// For each output position along one spatial dim, how many window taps land
/// in [lowerBound, upperBound) of the unpadded input's coordinates.
SmallVector<int64_t> tapCounts(int64_t outSize, int64_t kernel, int64_t stride,
                               int64_t dilation, int64_t padLow,
                               int64_t lowerBound, int64_t upperBound) {
  SmallVector<int64_t> counts;
  for (int64_t y = 0; y < outSize; ++y) {
    int64_t count = 0;
    for (int64_t k = 0; k < kernel; ++k) {
      int64_t position = y * stride - padLow + k * dilation;
      count += position >= lowerBound && position < upperBound;
    }
    counts.push_back(count);
  }
  return counts;
}

/// Max pooling pads with -inf (the lowest value), average pooling with 0 and
/// then divides each window's sum by its divisor. ceil_mode windows that run
/// past the padded input get extra high padding. Without count_include_pad
/// the divisor counts the taps inside the input; with it, every tap of the
/// window, the ceil_mode overhang included (ONNX's reference pads that with
/// zeros too).
struct PoolLowering : OpRewritePattern<PoolOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PoolOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    RankedTensorType inputType = op.getInput().getType(),
                     resultType = op.getType();
    Type elementType = inputType.getElementType();
    int64_t rank = inputType.getRank();
    SmallVector<int64_t> dims = spatialDims(rank, op.getDataFormat());
    int64_t spatial = dims.size();
    ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                      dilations = op.getDilations(), padding = op.getPadding();
    bool isMax = op.getKind() == PoolKind::Max;

    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t d = dims[i];
      low[d] = padding[i];
      int64_t reach = (resultType.getDimSize(d) - 1) * strides[i] +
                      dilations[i] * (kernel[i] - 1) + 1;
      int64_t available =
          inputType.getDimSize(d) + padding[i] + padding[spatial + i];
      high[d] = padding[spatial + i] + std::max<int64_t>(0, reach - available);
    }
    double padValue = isMax ? lowestValue(elementType) : 0;
    Value padded =
        padConstant(rewriter, loc, op.getInput(), low, high, padValue);

    // Loops: the result dims, then one window loop per spatial dim.
    SmallVector<int64_t> loopShape(resultType.getShape());
    llvm::append_range(loopShape, kernel);
    SmallVector<AffineExpr> window;
    for (int64_t d = 0; d < rank; ++d)
      window.push_back(getAffineDimExpr(d, context));
    SmallVector<int64_t> windowLoops;
    for (int64_t i = 0; i < spatial; ++i) {
      AffineExpr k = getAffineDimExpr(rank + i, context);
      window[dims[i]] = window[dims[i]] * strides[i] + k * dilations[i];
      windowLoops.push_back(rank + i);
    }
    auto [windowShape, windowShapeMap] = windowShapeOperand(
        rewriter, loc, kernel, elementType, rank + spatial, rank);
    Value pooled = reductionGeneric(
        rewriter, loc, loopShape, windowLoops, ValueRange{padded, windowShape},
        {AffineMap::get(rank + spatial, 0, window, context), windowShapeMap},
        filledTensor(rewriter, loc, resultType, padValue),
        [&](OpBuilder &b, Location nestedLoc,
            ValueRange args) -> SmallVector<Value> {
          Arith a{b, nestedLoc};
          return {isMax ? a.max(args[2], args[0]) : a.add(args[2], args[0])};
        })[0];
    if (isMax) {
      rewriter.replaceOp(op, pooled);
      return success();
    }

    // The divisor of an average is a product of per-dim tap counts, known at
    // compile time: dims where every window has the same count contribute a
    // scalar factor, the others a small constant vector indexed by the
    // output position.
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context);
    SmallVector<Value> inputs{pooled};
    SmallVector<AffineMap> maps{identity};
    double scalarDivisor = 1;
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t in = inputType.getDimSize(dims[i]);
      bool includePad = op.getCountIncludePad();
      SmallVector<int64_t> counts =
          includePad
              ? SmallVector<int64_t>(resultType.getDimSize(dims[i]), kernel[i])
              : tapCounts(resultType.getDimSize(dims[i]), kernel[i], strides[i],
                          dilations[i], padding[i], 0, in);
      if (llvm::all_equal(counts)) {
        scalarDivisor *= counts.front();
        continue;
      }
      auto countType = RankedTensorType::get(
          {static_cast<int64_t>(counts.size())}, elementType);
      SmallVector<Attribute> values;
      for (int64_t count : counts)
        values.push_back(rewriter.getFloatAttr(elementType, count));
      inputs.push_back(arith::ConstantOp::create(
          rewriter, loc, DenseElementsAttr::get(countType, values)));
      maps.push_back(channelMap(context, rank, dims[i]));
    }
    Value result =
        parallelGeneric(rewriter, loc, resultType, inputs, maps,
                        [&](OpBuilder &b, Location nestedLoc, ValueRange args) {
                          Arith a{b, nestedLoc};
                          Value divisor;
                          if (scalarDivisor != 1 || args.size() == 1)
                            divisor = a.constant(elementType, scalarDivisor);
                          for (Value count : args.drop_front())
                            divisor = divisor ? a.mul(divisor, count) : count;
                          return a.div(args[0], divisor);
                        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// The windows of PoolLowering, each reduced to (best value, its flat
/// index). Taps in the padding are skipped (read at a clamped position, then
/// never chosen), a tap wins only when strictly greater (the first of equal
/// maxima stays), and the first in-bounds tap always replaces the initial
/// index -1.
struct PoolIndicesLowering : OpRewritePattern<PoolIndicesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PoolIndicesOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    RankedTensorType resultType = op.getType();
    Type elementType = inputType.getElementType();
    int64_t rank = inputType.getRank(), spatial = rank - 2;
    ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                      dilations = op.getDilations(), padding = op.getPadding();
    ArrayRef<int64_t> inShape = inputType.getShape();
    bool columnMajor = op.getColumnMajor();

    SmallVector<int64_t> loopShape(resultType.getShape());
    llvm::append_range(loopShape, kernel);
    SmallVector<int64_t> windowLoops;
    for (int64_t i = 0; i < spatial; ++i)
      windowLoops.push_back(rank + i);
    auto [windowShape, windowShapeMap] = windowShapeOperand(
        rewriter, loc, kernel, elementType, rank + spatial, rank);
    auto valueType = RankedTensorType::get(resultType.getShape(), elementType);
    Value input = op.getInput();
    SmallVector<Value> results = reductionGeneric(
        rewriter, loc, loopShape, windowLoops, ValueRange{windowShape},
        {windowShapeMap},
        ValueRange{filledTensor(rewriter, loc, valueType,
                                lowestValue(elementType)),
                   filledTensor(rewriter, loc, resultType, -1)},
        [&](OpBuilder &b, Location nestedLoc,
            ValueRange args) -> SmallVector<Value> {
          Type i64 = b.getI64Type();
          auto i64Const = [&](int64_t v) -> Value {
            return arith::ConstantIntOp::create(b, nestedLoc, i64, v);
          };
          SmallVector<Value> coords{linalg::IndexOp::create(b, nestedLoc, 0),
                                    linalg::IndexOp::create(b, nestedLoc, 1)};
          SmallVector<Value> positions; // i64, unclamped
          Value valid;
          for (int64_t i = 0; i < spatial; ++i) {
            Value o = arith::IndexCastOp::create(
                b, nestedLoc, i64, linalg::IndexOp::create(b, nestedLoc, 2 + i));
            Value k = arith::IndexCastOp::create(
                b, nestedLoc, i64,
                linalg::IndexOp::create(b, nestedLoc, rank + i));
            Value p = arith::AddIOp::create(
                b, nestedLoc,
                arith::SubIOp::create(
                    b, nestedLoc,
                    arith::MulIOp::create(b, nestedLoc, o,
                                          i64Const(strides[i])),
                    i64Const(padding[i])),
                arith::MulIOp::create(b, nestedLoc, k, i64Const(dilations[i])));
            Value in = arith::AndIOp::create(
                b, nestedLoc,
                arith::CmpIOp::create(b, nestedLoc, arith::CmpIPredicate::sge,
                                      p, i64Const(0)),
                arith::CmpIOp::create(b, nestedLoc, arith::CmpIPredicate::slt,
                                      p, i64Const(inShape[2 + i])));
            valid = valid ? Value(arith::AndIOp::create(b, nestedLoc, valid, in))
                          : in;
            positions.push_back(p);
            Value clamped = arith::MinSIOp::create(
                b, nestedLoc,
                arith::MaxSIOp::create(b, nestedLoc, p, i64Const(0)),
                i64Const(inShape[2 + i] - 1));
            coords.push_back(arith::IndexCastOp::create(
                b, nestedLoc, b.getIndexType(), clamped));
          }
          Value x = tensor::ExtractOp::create(b, nestedLoc, input, coords);
          Value best = args[1], bestIndex = args[2];
          Value greater =
              isa<FloatType>(elementType)
                  ? Value(arith::CmpFOp::create(
                        b, nestedLoc, arith::CmpFPredicate::OGT, x, best))
                  : Value(arith::CmpIOp::create(
                        b, nestedLoc, arith::CmpIPredicate::sgt, x, best));
          Value none = arith::CmpIOp::create(
              b, nestedLoc, arith::CmpIPredicate::slt, bestIndex, i64Const(0));
          Value better = arith::AndIOp::create(
              b, nestedLoc, valid,
              arith::OrIOp::create(b, nestedLoc, greater, none));
          // Flat index: (n * C + c) * spatial size + the spatial offset, in
          // row-major or column-major order.
          Value nc = arith::AddIOp::create(
              b, nestedLoc,
              arith::MulIOp::create(
                  b, nestedLoc,
                  arith::IndexCastOp::create(b, nestedLoc, i64, coords[0]),
                  i64Const(inShape[1])),
              arith::IndexCastOp::create(b, nestedLoc, i64, coords[1]));
          Value flat = nc;
          SmallVector<int64_t> order;
          for (int64_t i = 0; i < spatial; ++i)
            order.push_back(columnMajor ? spatial - 1 - i : i);
          for (int64_t i : order)
            flat = arith::AddIOp::create(
                b, nestedLoc,
                arith::MulIOp::create(b, nestedLoc, flat,
                                      i64Const(inShape[2 + i])),
                positions[i]);
          return {arith::SelectOp::create(b, nestedLoc, better, x, best),
                  arith::SelectOp::create(b, nestedLoc, better, flat,
                                          bestIndex)};
        });
    rewriter.replaceOp(op, results[1]);
    return success();
  }
};

} // namespace

void kiln::populateReductionToLinalgPatterns(RewritePatternSet &patterns) {
  patterns
      .add<ReduceLowering, GlobalPoolLowering, ArgReduceLowering<ArgMaxOp>,
           ArgReduceLowering<ArgMinOp>, SoftmaxLowering<SoftmaxOp>,
           SoftmaxLowering<LogSoftmaxOp>, LayerNormLowering,
           InstanceNormLowering, BatchNormLowering, LrnLowering, PoolLowering,
           PoolIndicesLowering>(
          patterns.getContext());
}

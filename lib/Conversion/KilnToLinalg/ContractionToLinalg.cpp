//===- ContractionToLinalg.cpp - Contraction kiln ops to linalg
//-------------===//
//
// matmul becomes linalg.matmul or linalg.batch_matmul where those fit
// exactly, and otherwise one linalg.generic whose maps broadcast the batch
// dims and drop the dims of 1-D operands. conv and conv_transpose become one
// linalg.generic each whose input map expresses the sliding window, so one
// code path covers 1-3 spatial dims, both data formats, strides, dilations
// and groups (split off the channel dims with tensor.expand_shape).
// Accumulation is in the result's element type: f32 for the bf16/f16
// operands kiln-lower-precision gives an f32 result.
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

/// acc + lhs * rhs in the accumulator's type: bf16/f16 operands of an f32
/// accumulator (kiln-lower-precision) are widened first.
Value multiplyAccumulate(OpBuilder &b, Location loc, Value lhs, Value rhs,
                         Value acc) {
  if (isa<FloatType>(acc.getType())) {
    if (lhs.getType() != acc.getType())
      lhs = arith::ExtFOp::create(b, loc, acc.getType(), lhs);
    if (rhs.getType() != acc.getType())
      rhs = arith::ExtFOp::create(b, loc, acc.getType(), rhs);
    return arith::AddFOp::create(b, loc, acc,
                                 arith::MulFOp::create(b, loc, lhs, rhs));
  }
  return arith::AddIOp::create(b, loc, acc,
                               arith::MulIOp::create(b, loc, lhs, rhs));
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

struct MatmulLowering : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(refuseUnsignedTensors(op, rewriter)))
      return failure();
    RankedTensorType lhsType = op.getLhs().getType(),
                     rhsType = op.getRhs().getType();
    RankedTensorType resultType = op.getType();
    // Boolean matmul (or-of-ands) is not what arith's i1 add and mul compute.
    if (lhsType.getElementType().isInteger(1))
      return rewriter.notifyMatchFailure(op, "boolean matmul is not lowered");
    Location loc = op.getLoc();
    Value init = filledTensor(rewriter, loc, resultType, 0);
    Value lhs = op.getLhs(), rhs = op.getRhs();

    Value result;
    if (lhsType.getRank() == 2 && rhsType.getRank() == 2) {
      result = linalg::MatmulOp::create(rewriter, loc, TypeRange(resultType),
                                        ValueRange{lhs, rhs}, ValueRange(init))
                   .getResult(0);
    } else if (lhsType.getRank() == 3 && rhsType.getRank() == 3 &&
               lhsType.getDimSize(0) == rhsType.getDimSize(0)) {
      result =
          linalg::BatchMatmulOp::create(rewriter, loc, TypeRange(resultType),
                                        ValueRange{lhs, rhs}, ValueRange(init))
              .getResult(0);
    } else {
      result = broadcastingMatmul(rewriter, loc, lhs, rhs, init);
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  /// The general case as one generic: loops over the result dims (batch...,
  /// m if lhs is a matrix, n if rhs is a matrix) and a reduction loop k last.
  static Value broadcastingMatmul(OpBuilder &b, Location loc, Value lhs,
                                  Value rhs, Value init) {
    MLIRContext *context = b.getContext();
    auto lhsType = cast<RankedTensorType>(lhs.getType());
    auto rhsType = cast<RankedTensorType>(rhs.getType());
    auto resultType = cast<RankedTensorType>(init.getType());
    bool lhsMatrix = lhsType.getRank() > 1, rhsMatrix = rhsType.getRank() > 1;
    int64_t resultRank = resultType.getRank();
    int64_t batchRank = resultRank - lhsMatrix - rhsMatrix;
    ArrayRef<int64_t> batchShape = resultType.getShape().take_front(batchRank);
    AffineExpr m = b.getAffineDimExpr(batchRank);
    AffineExpr n = b.getAffineDimExpr(batchRank + lhsMatrix);
    AffineExpr k = b.getAffineDimExpr(resultRank);

    // An operand's batch dims align with the trailing result batch dims and
    // broadcast as in numpy.
    auto operandMap = [&](RankedTensorType type,
                          ArrayRef<AffineExpr> matrixDims) {
      ArrayRef<int64_t> operandBatch =
          type.getShape().drop_back(std::min<int64_t>(type.getRank(), 2));
      AffineMap batchMap = broadcastMap(context, operandBatch, batchShape);
      SmallVector<AffineExpr> exprs(batchMap.getResults());
      exprs.append(matrixDims.begin(), matrixDims.end());
      return AffineMap::get(resultRank + 1, 0, exprs, context);
    };
    SmallVector<AffineExpr> lhsDims, rhsDims;
    if (lhsMatrix)
      lhsDims.push_back(m);
    lhsDims.push_back(k);
    rhsDims.push_back(k);
    if (rhsMatrix)
      rhsDims.push_back(n);
    SmallVector<AffineMap> maps{
        operandMap(lhsType, lhsDims), operandMap(rhsType, rhsDims),
        projectionMap(context, resultRank + 1, {resultRank})};
    SmallVector<utils::IteratorType> iterators(resultRank,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange(resultType), ValueRange{lhs, rhs}, ValueRange(init),
        maps, iterators,
        [](OpBuilder &nested, Location nestedLoc, ValueRange args) {
          linalg::YieldOp::create(
              nested, nestedLoc,
              multiplyAccumulate(nested, nestedLoc, args[0], args[1], args[2]));
        });
    return generic.getResult(0);
  }
};

//===----------------------------------------------------------------------===//
// conv, conv_transpose
//===----------------------------------------------------------------------===//

/// One convolution generic, already reduced to a cross-correlation over a
/// prepared (padded, for conv_transpose also zero-inserted) input:
///
///   out[n, g, o, y...] += in[n, g, c, y * stride + k * kernelStep + offset]
///                         * filter[g, (o, c) or (c, o), k...]
///
/// with the channel dims where `channelsLast` puts them.
struct WindowConv {
  Value input;  // [N, C, spatial...] or [N, spatial..., C]
  Value filter; // [O or C, ...] as the op has it
  Value init;   // result-shaped: the bias broadcast, or zeros
  bool channelsLast = false;
  int64_t groups = 1;
  /// conv_transpose filters hold [C, O / groups] where conv filters hold
  /// [O, C / groups]. (Their flipped kernel is a negative kernel step.)
  bool transposedFilter = false;
  /// Per spatial dim: the output stride, the step between kernel taps (the
  /// dilation, negated to flip the kernel) and a constant offset.
  SmallVector<int64_t> strides, kernelSteps, offsets;
};

/// Splits dim `dim` of `value` into [groups, size / groups].
Value splitGroups(OpBuilder &b, Location loc, Value value, int64_t dim,
                  int64_t groups) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= groups;
  shape.insert(shape.begin() + dim, groups);
  SmallVector<ReassociationIndices> reassociation;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (d == dim)
      reassociation.push_back({d, d + 1});
    else
      reassociation.push_back({d < dim ? d : d + 1});
  }
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), value,
      reassociation);
}

/// Merges dims `dim` and `dim + 1` of `value`.
Value mergeGroups(OpBuilder &b, Location loc, Value value, int64_t dim) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<ReassociationIndices> reassociation;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim + 1)
      continue;
    if (d == dim)
      reassociation.push_back({d, d + 1});
    else
      reassociation.push_back({d});
  }
  return tensor::CollapseShapeOp::create(b, loc, value, reassociation);
}

Value buildWindowConv(OpBuilder &b, Location loc, const WindowConv &conv) {
  auto inputType = cast<RankedTensorType>(conv.input.getType());
  int64_t rank = inputType.getRank(), spatial = rank - 2;
  bool grouped = conv.groups > 1;
  int64_t channelDim = conv.channelsLast ? rank - 1 : 1;
  Value input = conv.input, filter = conv.filter, init = conv.init;
  if (grouped) {
    input = splitGroups(b, loc, input, channelDim, conv.groups);
    filter = splitGroups(b, loc, filter, 0, conv.groups);
    init = splitGroups(b, loc, init, channelDim, conv.groups);
  }

  // Loops: n, [g], o, y..., c, k...
  int64_t numLoops = 0;
  auto next = [&] { return b.getAffineDimExpr(numLoops++); };
  AffineExpr n = next();
  SmallVector<AffineExpr> g;
  if (grouped)
    g.push_back(next());
  AffineExpr o = next();
  SmallVector<AffineExpr> y, k;
  for (int64_t i = 0; i < spatial; ++i)
    y.push_back(next());
  AffineExpr c = next();
  for (int64_t i = 0; i < spatial; ++i)
    k.push_back(next());

  SmallVector<AffineExpr> window;
  for (int64_t i = 0; i < spatial; ++i)
    window.push_back(y[i] * conv.strides[i] + k[i] * conv.kernelSteps[i] +
                     conv.offsets[i]);
  auto activation = [&](AffineExpr channel, ArrayRef<AffineExpr> spatialExprs) {
    SmallVector<AffineExpr> channels(g);
    channels.push_back(channel);
    SmallVector<AffineExpr> exprs{n};
    if (conv.channelsLast) {
      llvm::append_range(exprs, spatialExprs);
      llvm::append_range(exprs, channels);
    } else {
      llvm::append_range(exprs, channels);
      llvm::append_range(exprs, spatialExprs);
    }
    return exprs;
  };
  AffineExpr filterFirst = conv.transposedFilter ? c : o;
  AffineExpr filterSecond = conv.transposedFilter ? o : c;
  SmallVector<AffineExpr> filterExprs(g);
  filterExprs.push_back(filterFirst);
  if (!conv.channelsLast)
    filterExprs.push_back(filterSecond);
  llvm::append_range(filterExprs, k);
  if (conv.channelsLast)
    filterExprs.push_back(filterSecond);

  MLIRContext *context = b.getContext();
  SmallVector<AffineMap> maps{
      AffineMap::get(numLoops, 0, activation(c, window), context),
      AffineMap::get(numLoops, 0, filterExprs, context),
      AffineMap::get(numLoops, 0, activation(o, y), context)};
  int64_t parallelLoops = numLoops - 1 - spatial;
  SmallVector<utils::IteratorType> iterators(parallelLoops,
                                             utils::IteratorType::parallel);
  iterators.append(1 + spatial, utils::IteratorType::reduction);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(init.getType()), ValueRange{input, filter},
      ValueRange(init), maps, iterators,
      [](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        linalg::YieldOp::create(
            nested, nestedLoc,
            multiplyAccumulate(nested, nestedLoc, args[0], args[1], args[2]));
      });
  Value result = generic.getResult(0);
  if (grouped)
    result = mergeGroups(b, loc, result, channelDim);
  return result;
}

/// The bias broadcast along the channel dim of `resultType`, or zeros.
Value biasOrZeros(OpBuilder &b, Location loc, Value bias,
                  RankedTensorType resultType, int64_t channelDim) {
  if (!bias)
    return filledTensor(b, loc, resultType, 0);
  SmallVector<int64_t> broadcastDims;
  for (int64_t d = 0; d < resultType.getRank(); ++d)
    if (d != channelDim)
      broadcastDims.push_back(d);
  return linalg::BroadcastOp::create(
             b, loc, bias, emptyTensor(b, loc, resultType), broadcastDims)
      .getResult()[0];
}

struct ConvLowering : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConvOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType(),
                     resultType = op.getType();
    int64_t rank = inputType.getRank(), spatial = rank - 2;
    bool channelsLast = op.getDataFormat() == DataFormat::ChannelsLast;
    int64_t firstSpatial = channelsLast ? 1 : 2;

    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    for (int64_t i = 0; i < spatial; ++i) {
      low[firstSpatial + i] = op.getPadding()[i];
      high[firstSpatial + i] = op.getPadding()[spatial + i];
    }
    WindowConv conv;
    conv.input = padConstant(rewriter, loc, op.getInput(), low, high, 0);
    conv.filter = op.getFilter();
    conv.init = biasOrZeros(rewriter, loc, op.getBias(), resultType,
                            channelsLast ? rank - 1 : 1);
    conv.channelsLast = channelsLast;
    conv.groups = op.getGroups();
    conv.strides.assign(op.getStrides().begin(), op.getStrides().end());
    conv.kernelSteps.assign(op.getDilations().begin(), op.getDilations().end());
    conv.offsets.assign(spatial, 0);
    rewriter.replaceOp(op, buildWindowConv(rewriter, loc, conv));
    return success();
  }
};

/// conv_transpose as a stride-1 convolution with the flipped kernel over the
/// input with (stride - 1) zeros inserted between elements and
/// dilation * (kernel - 1) - pad zeros around it. Where `padding` exceeds
/// that border, the window starts further in instead (a positive offset),
/// so nothing is ever cropped.
struct ConvTransposeLowering : OpRewritePattern<ConvTransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConvTransposeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType(),
                     resultType = op.getType();
    RankedTensorType filterType = op.getFilter().getType();
    int64_t rank = inputType.getRank(), spatial = rank - 2;
    bool channelsLast = op.getDataFormat() == DataFormat::ChannelsLast;
    // Input and filter have their spatial dims at the same positions.
    int64_t firstSpatial = channelsLast ? 1 : 2;
    ArrayRef<int64_t> strides = op.getStrides(), dilations = op.getDilations(),
                      padding = op.getPadding();

    WindowConv conv;
    conv.channelsLast = channelsLast;
    conv.groups = op.getGroups();
    conv.transposedFilter = true;
    conv.filter = op.getFilter();
    conv.strides.assign(spatial, 1);

    // Per spatial dim: low border, window offset, total prepared size.
    SmallVector<int64_t> low(rank, 0), preparedShape(inputType.getShape());
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t d = firstSpatial + i;
      int64_t in = inputType.getDimSize(d), out = resultType.getDimSize(d);
      int64_t extent =
          dilations[i] * (filterType.getDimSize(firstSpatial + i) - 1);
      int64_t lowBorder = std::max<int64_t>(0, extent - padding[i]);
      int64_t offset = std::max<int64_t>(0, padding[i] - extent);
      int64_t dilated = (in - 1) * strides[i] + 1;
      // The window reads prepared positions up to out - 1 + extent + offset.
      int64_t needed = out + extent + offset;
      low[d] = lowBorder;
      preparedShape[d] = std::max(needed, lowBorder + dilated);
      // The flipped kernel: tap k reads what tap (kernel - 1 - k) would.
      conv.kernelSteps.push_back(-dilations[i]);
      conv.offsets.push_back(offset + extent);
    }

    // A stride between the elements of a dim of size 1 places nothing: it
    // is 1 there. (A strided insert_slice into a size-1 innermost dim made
    // the vectorizer emit a vector.store on a non-unit-stride memref, an
    // invalid op: found by test/e2e/train_fuzz.py, the data gradient of a
    // stride-2 Conv whose input is one column wide.)
    SmallVector<int64_t> steps(strides);
    for (int64_t i = 0; i < spatial; ++i)
      if (inputType.getDimSize(firstSpatial + i) == 1)
        steps[i] = 1;
    bool unitStrides = llvm::all_of(steps, [](int64_t s) { return s == 1; });
    if (unitStrides) {
      SmallVector<int64_t> high(rank, 0);
      for (int64_t d = 0; d < rank; ++d)
        high[d] = preparedShape[d] - inputType.getDimSize(d) - low[d];
      conv.input = padConstant(rewriter, loc, op.getInput(), low, high, 0);
    } else {
      // Zero insertion and the border in one strided insert_slice.
      Value zeros = filledTensor(
          rewriter, loc,
          RankedTensorType::get(preparedShape, inputType.getElementType()), 0);
      SmallVector<OpFoldResult> offsets, sizes, sliceStrides;
      for (int64_t d = 0; d < rank; ++d) {
        offsets.push_back(rewriter.getIndexAttr(low[d]));
        sizes.push_back(rewriter.getIndexAttr(inputType.getDimSize(d)));
        bool isSpatial = d >= firstSpatial && d < firstSpatial + spatial;
        sliceStrides.push_back(
            rewriter.getIndexAttr(isSpatial ? steps[d - firstSpatial] : 1));
      }
      conv.input = tensor::InsertSliceOp::create(
          rewriter, loc, op.getInput(), zeros, offsets, sizes, sliceStrides);
    }
    conv.init = biasOrZeros(rewriter, loc, op.getBias(), resultType,
                            channelsLast ? rank - 1 : 1);
    rewriter.replaceOp(op, buildWindowConv(rewriter, loc, conv));
    return success();
  }
};

} // namespace

void kiln::populateContractionToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MatmulLowering, ConvLowering, ConvTransposeLowering>(
      patterns.getContext());
}

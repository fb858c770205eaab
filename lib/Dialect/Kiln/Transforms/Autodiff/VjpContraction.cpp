//===- VjpContraction.cpp - Gradients of matmul and convolution ------------===//
//
// matmul: dA = dY B^T and dB = A^T dY over the last two dimensions, with
// broadcast batch dimensions summed back and 1-D operands promoted to
// matrices first (numpy's rule) and restored after.
//
// conv (NCHW, any spatial rank, strides, dilations, padding, groups):
//   dX = conv_transpose(dY, W) with the same window and the output padding
//        that gives back X's extent;
//   dW = a convolution of X (channels as batch) with dY (channels as
//        filters), stride and dilation swapped, cropped to the kernel; with
//        groups, the diagonal blocks of the all-pairs result;
//   db = dY summed over batch and space.
// conv_transpose is the adjoint: dX = conv(dY, W) with its window, and dW
// is the weight gradient of that convolution with the roles of X and dY
// exchanged.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::autodiff {

namespace {
RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Swaps the last two dimensions.
Value transposeLast2(GradBuilder &g, Value value) {
  int64_t rank = typeOf(value).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return g.transpose(value, perm);
}

/// Swaps dimensions 0 and 1 (batch and channels).
Value swapBatchChannels(GradBuilder &g, Value value) {
  SmallVector<int64_t> perm =
      llvm::to_vector(llvm::seq<int64_t>(0, typeOf(value).getRank()));
  std::swap(perm[0], perm[1]);
  return g.transpose(value, perm);
}

/// d loss / d W of `out = conv(in, W)` (NCHW, W [O, C / groups, K...]),
/// given `dOut`.
Value convFilterGrad(GradBuilder &g, Value in, Value dOut,
                     RankedTensorType filterType, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> dilations, ArrayRef<int64_t> padding,
                     int64_t groups) {
  // [C, N, S...] convolved with [O, N, OS...]: out[c, o, k] sums
  // in[n, c, k * dilation + i * stride] dOut[n, o, i] over n and i.
  Value all = ConvOp::create(g.b, swapBatchChannels(g, in),
                             swapBatchChannels(g, dOut), Value(), dilations,
                             strides, padding, /*groups=*/1);
  RankedTensorType allType = typeOf(all);
  int64_t rank = allType.getRank();
  int64_t channels = allType.getDimSize(0), outputs = allType.getDimSize(1);
  SmallVector<int64_t> starts(rank, 0), limits(allType.getShape()),
      steps(rank, 1);
  for (int64_t d = 2; d < rank; ++d)
    limits[d] = filterType.getDimSize(d);
  Value cropped = g.slice(all, starts, limits, steps);
  if (groups > 1) {
    // Only input channel c and output o of the same group meet.
    int64_t cg = channels / groups, og = outputs / groups;
    SmallVector<Value> blocks;
    for (int64_t i = 0; i < groups; ++i) {
      SmallVector<int64_t> st(rank, 0), lim(limits);
      st[0] = i * cg;
      lim[0] = (i + 1) * cg;
      st[1] = i * og;
      lim[1] = (i + 1) * og;
      blocks.push_back(g.slice(cropped, st, lim, steps));
    }
    cropped = ConcatOp::create(g.b, blocks, g.b.getI64IntegerAttr(1));
  }
  return swapBatchChannels(g, cropped);
}

/// The bias gradient: dY summed over every dimension but the channels.
Value channelSum(GradBuilder &g, Value dy) {
  RankedTensorType type = typeOf(dy);
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d != 1)
      axes.push_back(d);
  return g.reshape(g.sumKeep(dy, axes), {type.getDimSize(1)});
}

RuleStatus convVjp(GradBuilder &g, ConvOp op, Value dy,
                   MutableArrayRef<Value> operandGrads, std::string &why) {
  if (op.getDataFormat() != DataFormat::ChannelsFirst) {
    why = "only nchw convolutions (autodiff runs before kiln-assign-layout)";
    return RuleStatus::Unsupported;
  }
  if (getElementTypeOrSelf(op.getType()) !=
      getElementTypeOrSelf(op.getInput().getType())) {
    why = "a convolution with a wider result than its operands (run autodiff "
          "before kiln-lower-precision)";
    return RuleStatus::Unsupported;
  }
  RankedTensorType inType = typeOf(op.getInput());
  RankedTensorType filterType = typeOf(op.getFilter());
  RankedTensorType outType = typeOf(op.getResult());
  ArrayRef<int64_t> strides = op.getStrides(), dilations = op.getDilations(),
                    padding = op.getPadding();
  int64_t spatial = inType.getRank() - 2;
  SmallVector<int64_t> outputPadding;
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t k = filterType.getDimSize(i + 2);
    int64_t covered = strides[i] * (outType.getDimSize(i + 2) - 1) +
                      dilations[i] * (k - 1) + 1 - padding[i] -
                      padding[i + spatial];
    outputPadding.push_back(inType.getDimSize(i + 2) - covered);
  }
  operandGrads[0] = ConvTransposeOp::create(
      g.b, dy, op.getFilter(), Value(), strides, dilations, padding,
      outputPadding, op.getGroups());
  operandGrads[1] = convFilterGrad(g, op.getInput(), dy, filterType, strides,
                                   dilations, padding, op.getGroups());
  if (op.getBias())
    operandGrads[2] = channelSum(g, dy);
  return RuleStatus::Applied;
}

RuleStatus convTransposeVjp(GradBuilder &g, ConvTransposeOp op, Value dy,
                            MutableArrayRef<Value> operandGrads,
                            std::string &why) {
  if (op.getDataFormat() != DataFormat::ChannelsFirst) {
    why = "only nchw transposed convolutions (autodiff runs before "
          "kiln-assign-layout)";
    return RuleStatus::Unsupported;
  }
  // x = conv(y) with the same window is the adjoint; W [C, O / groups, K]
  // is that convolution's filter as it stands.
  operandGrads[0] =
      ConvOp::create(g.b, dy, op.getFilter(), Value(), op.getStrides(),
                     op.getDilations(), op.getPadding(), op.getGroups());
  if (operandGrads[0].getType() != op.getInput().getType()) {
    why = "an output padding the adjoint convolution does not invert";
    return RuleStatus::Unsupported;
  }
  operandGrads[1] = convFilterGrad(g, dy, op.getInput(),
                                   typeOf(op.getFilter()), op.getStrides(),
                                   op.getDilations(), op.getPadding(),
                                   op.getGroups());
  if (op.getBias())
    operandGrads[2] = channelSum(g, dy);
  return RuleStatus::Applied;
}

RuleStatus matmulVjp(GradBuilder &g, MatmulOp op, Value dy,
                     MutableArrayRef<Value> operandGrads, std::string &why) {
  if (getElementTypeOrSelf(op.getType()) !=
      getElementTypeOrSelf(op.getLhs().getType())) {
    why = "a matmul with a wider result than its operands (run autodiff "
          "before kiln-lower-precision)";
    return RuleStatus::Unsupported;
  }
  RankedTensorType lhsType = typeOf(op.getLhs()), rhsType = typeOf(op.getRhs());
  Value a = op.getLhs(), b = op.getRhs();
  if (lhsType.getRank() == 1)
    a = g.reshape(a, {1, lhsType.getDimSize(0)});
  if (rhsType.getRank() == 1)
    b = g.reshape(b, {rhsType.getDimSize(0), 1});
  // The result as if neither operand had been 1-D.
  ArrayRef<int64_t> aShape = typeOf(a).getShape(), bShape = typeOf(b).getShape();
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes(aShape.drop_back(2), bShape.drop_back(2));
  if (!batch) {
    why = "matmul batch dimensions that do not broadcast";
    return RuleStatus::Unsupported;
  }
  SmallVector<int64_t> full = *batch;
  full.push_back(aShape[aShape.size() - 2]);
  full.push_back(bShape.back());
  Value grad = g.reshape(dy, full);

  Value da = MatmulOp::create(g.b, grad, transposeLast2(g, b));
  Value db = MatmulOp::create(g.b, transposeLast2(g, a), grad);
  operandGrads[0] = g.reshape(g.unbroadcast(da, typeOf(a)), lhsType.getShape());
  operandGrads[1] = g.reshape(g.unbroadcast(db, typeOf(b)), rhsType.getShape());
  return RuleStatus::Applied;
}
} // namespace

RuleStatus contractionVjp(GradBuilder &g, Operation *op,
                          ArrayRef<Value> resultGrads,
                          MutableArrayRef<Value> operandGrads,
                          std::string &why) {
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](MatmulOp m) {
        return matmulVjp(g, m, resultGrads[0], operandGrads, why);
      })
      .Case([&](ConvOp c) {
        return convVjp(g, c, resultGrads[0], operandGrads, why);
      })
      .Case([&](ConvTransposeOp c) {
        return convTransposeVjp(g, c, resultGrads[0], operandGrads, why);
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

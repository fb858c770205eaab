//===- VjpPooling.cpp - Gradients of pooling -------------------------------===//
//
// Average pooling spreads each output's gradient over its window: dY is
// divided by the window's element count (a compile-time constant per
// output position) and distributed by a transposed convolution with a
// ones filter, every channel on its own.
//
// Max pooling routes each output's gradient to the element its window
// picked (argmax routing). For every kernel offset the pass compares the
// strided slice of the padded input at that offset with the result; the
// first offset that matches claims the output (ties go to the first
// element, as PyTorch and onnxruntime pick it), and its gradient is put
// back by the slice's adjoint. Padding is filled with the lowest float, so
// it never wins.
//
// Global pooling: the gradient broadcast over the spatial positions
// (divided by their count for avg), or routed to each plane's first
// maximum (an argmax over the flattened positions) for max.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;

namespace kiln::autodiff {

namespace {
RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// The number of window elements that count for each output position along
/// one dimension: positions inside the input (or inside the padding too,
/// with countPad).
SmallVector<int64_t> windowCounts(int64_t in, int64_t out, int64_t kernel,
                                  int64_t stride, int64_t dilation, int64_t lo,
                                  int64_t hi, bool countPad) {
  SmallVector<int64_t> counts;
  for (int64_t o = 0; o < out; ++o) {
    int64_t n = 0;
    for (int64_t k = 0; k < kernel; ++k) {
      int64_t p = o * stride + k * dilation; // in padded coordinates
      n += countPad ? (p < in + lo + hi) : (p >= lo && p < in + lo);
    }
    counts.push_back(n);
  }
  return counts;
}

RuleStatus avgPoolVjp(GradBuilder &g, PoolOp op, Value dy,
                      MutableArrayRef<Value> operandGrads) {
  RankedTensorType inType = typeOf(op.getInput()), outType = typeOf(dy);
  Type element = inType.getElementType();
  int64_t rank = inType.getRank(), spatial = rank - 2;
  ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                    dilations = op.getDilations(), padding = op.getPadding();
  // Divisors: the outer product of the per-dimension counts.
  SmallVector<SmallVector<int64_t>> perDim;
  for (int64_t i = 0; i < spatial; ++i)
    perDim.push_back(windowCounts(
        inType.getDimSize(i + 2), outType.getDimSize(i + 2), kernel[i],
        strides[i], dilations[i], padding[i], padding[i + spatial],
        op.getCountIncludePad()));
  SmallVector<int64_t> countShape(rank, 1);
  int64_t positions = 1;
  for (int64_t i = 0; i < spatial; ++i) {
    countShape[i + 2] = outType.getDimSize(i + 2);
    positions *= countShape[i + 2];
  }
  SmallVector<Attribute> reciprocal;
  for (int64_t flat = 0; flat < positions; ++flat) {
    int64_t rest = flat, n = 1;
    for (int64_t i = spatial - 1; i >= 0; --i) {
      n *= perDim[i][rest % countShape[i + 2]];
      rest /= countShape[i + 2];
    }
    reciprocal.push_back(g.b.getFloatAttr(element, 1.0 / double(n)));
  }
  Value scale = ConstantOp::create(
      g.b, DenseElementsAttr::get(RankedTensorType::get(countShape, element),
                                  reciprocal));
  Value scaled = g.mul(dy, scale);
  // Every channel on its own: [N * C, 1, OS...] through a [1, 1, K...] ones
  // filter; the output padding (or a larger crop, in ceil mode) gives back
  // the input's extent.
  int64_t planes = inType.getDimSize(0) * inType.getDimSize(1);
  SmallVector<int64_t> planeShape{planes, 1};
  llvm::append_range(planeShape, outType.getShape().drop_front(2));
  SmallVector<int64_t> filterShape{1, 1};
  llvm::append_range(filterShape, kernel);
  Value ones = g.splat(RankedTensorType::get(filterShape, element), 1.0);
  SmallVector<int64_t> pads(padding), outputPadding;
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t covered = strides[i] * (outType.getDimSize(i + 2) - 1) +
                      dilations[i] * (kernel[i] - 1) + 1 - pads[i] -
                      pads[i + spatial];
    int64_t extra = inType.getDimSize(i + 2) - covered;
    if (extra < 0) {
      pads[i + spatial] -= extra;
      extra = 0;
    }
    outputPadding.push_back(extra);
  }
  Value spread = ConvTransposeOp::create(g.b, g.reshape(scaled, planeShape),
                                         ones, Value(), strides, dilations,
                                         pads, outputPadding, /*groups=*/1);
  operandGrads[0] = g.reshape(spread, inType.getShape());
  return RuleStatus::Applied;
}

RuleStatus maxPoolVjp(GradBuilder &g, PoolOp op, Value dy,
                      MutableArrayRef<Value> operandGrads) {
  RankedTensorType inType = typeOf(op.getInput()), outType = typeOf(dy);
  Type element = inType.getElementType();
  int64_t rank = inType.getRank(), spatial = rank - 2;
  ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                    dilations = op.getDilations(), padding = op.getPadding();
  // Pad so that every window (ceil mode included) is inside.
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t span = (outType.getDimSize(i + 2) - 1) * strides[i] +
                   (kernel[i] - 1) * dilations[i] + 1;
    low[i + 2] = padding[i];
    high[i + 2] =
        std::max(padding[i + spatial],
                 span - inType.getDimSize(i + 2) - padding[i]);
  }
  Value padded = g.pad(op.getInput(), low, high,
                       -double(std::numeric_limits<float>::max()));
  RankedTensorType paddedType = typeOf(padded);
  Value zero = g.scalar(element, 0.0);
  Value claimed, total;
  int64_t offsets = 1;
  for (int64_t k : kernel)
    offsets *= k;
  for (int64_t flat = 0; flat < offsets; ++flat) {
    SmallVector<int64_t> starts(rank, 0), limits(paddedType.getShape()),
        steps(rank, 1);
    int64_t rest = flat;
    for (int64_t i = spatial - 1; i >= 0; --i) {
      int64_t k = rest % kernel[i];
      rest /= kernel[i];
      starts[i + 2] = k * dilations[i];
      limits[i + 2] =
          starts[i + 2] + (outType.getDimSize(i + 2) - 1) * strides[i] + 1;
      steps[i + 2] = strides[i];
    }
    Value window = g.slice(padded, starts, limits, steps);
    Value hit = EqualOp::create(g.b, window, op.getResult());
    if (claimed) {
      hit = AndOp::create(g.b, hit, NotOp::create(g.b, claimed));
      claimed = OrOp::create(g.b, claimed, hit);
    } else {
      claimed = hit;
    }
    Value routed = g.sliceAdjoint(SelectOp::create(g.b, hit, dy, zero),
                                  paddedType, starts, steps);
    total = total ? g.add(total, routed) : routed;
  }
  SmallVector<int64_t> starts(low), limits(rank), steps(rank, 1);
  for (int64_t d = 0; d < rank; ++d)
    limits[d] = low[d] + inType.getDimSize(d);
  operandGrads[0] = g.slice(total, starts, limits, steps);
  return RuleStatus::Applied;
}

RuleStatus globalPoolVjp(GradBuilder &g, GlobalPoolOp op, Value dy,
                         MutableArrayRef<Value> operandGrads,
                         std::string &why) {
  if (op.getDataFormat() != DataFormat::ChannelsFirst) {
    why = "only nchw pooling (autodiff runs before kiln-assign-layout)";
    return RuleStatus::Unsupported;
  }
  RankedTensorType inType = typeOf(op.getInput());
  Value spread = g.broadcastTo(dy, inType);
  if (op.getKind() == PoolKind::Avg) {
    int64_t positions = inType.getNumElements() /
                        (inType.getDimSize(0) * inType.getDimSize(1));
    operandGrads[0] = g.scale(spread, 1.0 / double(positions));
    return RuleStatus::Applied;
  }
  // Max: each plane's gradient goes to its first maximum, as windowed max
  // pooling routes it (and PyTorch and onnxruntime pick the element); every
  // tied maximum taking it all would give k times the gradient for k ties.
  int64_t n = inType.getDimSize(0), c = inType.getDimSize(1);
  int64_t positions = inType.getNumElements() / (n * c);
  Value planes = g.reshape(op.getInput(), {n, c, positions});
  Value first = ArgMaxOp::create(g.b, planes, g.b.getI64IntegerAttr(2),
                                 g.b.getBoolAttr(true), UnitAttr());
  Value index =
      IotaOp::create(g.b, RankedTensorType::get({positions}, g.b.getI64Type()),
                     g.b.getF64FloatAttr(0.0), g.b.getF64FloatAttr(1.0));
  Value hit = EqualOp::create(g.b, first, g.reshape(index, {1, 1, positions}));
  Value routed =
      SelectOp::create(g.b, hit, g.reshape(spread, {n, c, positions}),
                       g.scalar(inType.getElementType(), 0.0));
  operandGrads[0] = g.reshape(routed, inType.getShape());
  return RuleStatus::Applied;
}
} // namespace

RuleStatus poolingVjp(GradBuilder &g, Operation *op,
                      ArrayRef<Value> resultGrads,
                      MutableArrayRef<Value> operandGrads, std::string &why) {
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](PoolOp p) {
        if (p.getDataFormat() != DataFormat::ChannelsFirst) {
          why = "only nchw pooling (autodiff runs before kiln-assign-layout)";
          return RuleStatus::Unsupported;
        }
        return p.getKind() == PoolKind::Avg
                   ? avgPoolVjp(g, p, resultGrads[0], operandGrads)
                   : maxPoolVjp(g, p, resultGrads[0], operandGrads);
      })
      .Case([&](GlobalPoolOp p) {
        return globalPoolVjp(g, p, resultGrads[0], operandGrads, why);
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

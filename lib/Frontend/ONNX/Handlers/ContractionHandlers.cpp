//===- ContractionHandlers.cpp - ONNX matrix products and convolutions ----===//
//
// MatMul, Gemm (lowered to kiln.transpose, kiln.matmul, kiln.mul and
// kiln.add), Conv and ConvTranspose. The window attributes the convolutions
// share with pooling (kernel_shape, strides, dilations, pads, auto_pad) are
// read by WindowAttrs.h.
//
//===----------------------------------------------------------------------===//

#include "WindowAttrs.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

LogicalResult importMatMul(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  return bind(n, n.make<MatmulOp>({n.input(0), n.input(1)}));
}

/// `value * factor`, or `value` itself when the factor is 1.
FailureOr<Value> scaleBy(NodeImporter &n, Value value, float factor,
                         StringRef what) {
  if (factor == 1.0f)
    return value;
  Type elementType = elementTypeOf(value);
  if (!isa<FloatType>(elementType) && factor != std::trunc(factor))
    return n.fail(Twine(what) + " must be a whole number for integer operands");
  return n.make<MulOp>({value, n.scalar(elementType, factor)});
}

/// Y = alpha * A' B' + beta * C, where A' is A transposed when transA is set
/// (B' likewise) and C broadcasts to Y's [M, N] but never grows it. C is
/// required until opset 11. A zero beta drops C, as ONNX's reference does.
LogicalResult importGemm(NodeImporter &n) {
  if (failed(n.checkArity(n.opset() < 11 ? 3 : 2, 3)))
    return failure();
  if (n.inputType(0).getRank() != 2 || n.inputType(1).getRank() != 2) {
    return n.fail("A and B must be 2-D, got rank " +
                  Twine(n.inputType(0).getRank()) + " and " +
                  Twine(n.inputType(1).getRank()));
  }
  auto transposedIf = [&](size_t i, StringRef attr) -> FailureOr<Value> {
    if (n.intAttr(attr, 0) == 0)
      return n.input(i);
    return n.make<TransposeOp>(n.input(i),
                               {n.namedArray("permutation", {1, 0})});
  };
  FailureOr<Value> a = transposedIf(0, "transA");
  FailureOr<Value> b = transposedIf(1, "transB");
  if (failed(a) || failed(b))
    return failure();
  FailureOr<Value> product = n.make<MatmulOp>({*a, *b});
  if (failed(product))
    return failure();
  FailureOr<Value> y =
      scaleBy(n, *product, n.floatAttr("alpha", 1.0f), "alpha");
  float beta = n.floatAttr("beta", 1.0f);
  if (failed(y) || !n.hasInput(2) || beta == 0.0f)
    return bind(n, y);

  ArrayRef<int64_t> yShape = cast<RankedTensorType>(y->getType()).getShape();
  RankedTensorType cType = n.inputType(2);
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(yShape, cType.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != yShape) {
    return n.fail("C of shape " + formatInts(cType.getShape()) +
                  " does not broadcast to the product's shape " +
                  formatInts(yShape));
  }
  FailureOr<Value> c = scaleBy(n, n.input(2), beta, "beta");
  if (failed(c))
    return failure();
  return bind(n, n.make<AddOp>({*y, *c}));
}

/// Checks that the input and weight have one rank with 1 to 3 spatial dims.
LogicalResult checkConvRanks(NodeImporter &n) {
  int64_t rank = n.inputType(0).getRank();
  if (rank < 3 || rank > 5) {
    return n.fail(
        "only 1-D, 2-D and 3-D convolutions are supported (input rank 3 to 5), "
        "got input rank " +
        Twine(rank));
  }
  if (n.inputType(1).getRank() != rank) {
    return n.fail("weight rank " + Twine(n.inputType(1).getRank()) +
                  " differs from input rank " + Twine(rank));
  }
  return success();
}

/// The kiln.conv / kiln.conv_transpose operands: input, weight, optional bias.
SmallVector<Value> convOperands(NodeImporter &n) {
  SmallVector<Value> operands{n.input(0), n.input(1)};
  if (n.hasInput(2))
    operands.push_back(n.input(2));
  return operands;
}

LogicalResult importConv(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)) || failed(checkConvRanks(n)))
    return failure();
  ArrayRef<int64_t> inputShape = n.inputType(0).getShape();
  // Weight: [out channels, in channels / group, kernel...].
  FailureOr<WindowAttrs> w = readWindowAttrs(
      n, inputShape.size() - 2, n.inputType(1).getShape().drop_front(2));
  if (failed(w))
    return failure();
  resolveForwardPadding(*w, inputShape.drop_front(2));
  return bind(n, n.make<ConvOp>(convOperands(n),
                                {n.namedArray("strides", w->strides),
                                 n.namedArray("dilations", w->dilations),
                                 n.namedArray("padding", w->padding),
                                 n.namedI64("groups", n.intAttr("group", 1))}));
}

/// Explicit ConvTranspose padding. With an output_shape (given, or implied by
/// SAME_* as `in * stride`) the padding is whatever trims the full output to
/// that shape: `stride * (in - 1) + output_padding + window - out`, split
/// with the odd element at the end for SAME_UPPER and at the start otherwise.
/// ConvTranspose-1 stated the split of a given output_shape the other way
/// round (its auto_pad text agrees with opset 11), so models of that era get
/// it. An output_shape beyond the full output extends `outputPadding`.
LogicalResult resolveTransposedPadding(NodeImporter &n, WindowAttrs &w,
                                       MutableArrayRef<int64_t> outputPadding) {
  ArrayRef<int64_t> inputShape = n.inputType(0).getShape();
  ArrayRef<int64_t> spatialIn = inputShape.drop_front(2);
  size_t spatial = spatialIn.size();
  SmallVector<int64_t> outputShape = n.intsAttr("output_shape");
  // Opset 1 models may spell out the batch and channel dimensions too.
  if (outputShape.size() == inputShape.size())
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  if (!outputShape.empty() && outputShape.size() != spatial) {
    return n.fail("output_shape has " + Twine(outputShape.size()) +
                  " entries, expected " + Twine(spatial));
  }
  for (int64_t d : outputShape)
    if (d < 1)
      return n.fail("output_shape entry " + Twine(d) + " is not positive");
  bool upper = w.autoPad == "SAME_UPPER";
  bool extraHigh = upper;
  if (outputShape.empty()) {
    if (w.autoPad == "NOTSET")
      return success();
    if (w.autoPad == "VALID") {
      std::fill(w.padding.begin(), w.padding.end(), 0);
      return success();
    }
    for (size_t i = 0; i < spatial; ++i) {
      int64_t out;
      if (__builtin_mul_overflow(spatialIn[i], w.strides[i], &out))
        return n.fail("the SAME output size overflows 64 bits");
      outputShape.push_back(out);
    }
  } else if (n.opset() < 11) {
    extraHigh = !upper;
  }
  for (size_t i = 0; i < spatial; ++i) {
    // stride * (in - 1) + output_padding + window - out, in checked
    // arithmetic: every term comes from the model (reliability finding 15).
    int64_t window, full, total;
    if (__builtin_mul_overflow(w.dilations[i], w.kernel[i] - 1, &window) ||
        __builtin_add_overflow(window, int64_t(1), &window) ||
        __builtin_mul_overflow(w.strides[i], spatialIn[i] - 1, &full) ||
        __builtin_add_overflow(full, outputPadding[i], &full) ||
        __builtin_add_overflow(full, window, &full) ||
        __builtin_sub_overflow(full, outputShape[i], &total) ||
        total == std::numeric_limits<int64_t>::min())
      return n.fail("the padding for output_shape overflows 64 bits");
    // An output larger than the full result grows at the end, as in
    // onnxruntime: the extra elements get no contribution but the bias.
    if (total < 0)
      outputPadding[i] -= total;
    splitPadding(w.padding, i, std::max<int64_t>(total, 0), extraHigh);
  }
  return success();
}

LogicalResult importConvTranspose(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)) || failed(checkConvRanks(n)))
    return failure();
  size_t spatial = n.inputType(0).getRank() - 2;
  // Weight: [in channels, out channels / group, kernel...].
  FailureOr<WindowAttrs> w =
      readWindowAttrs(n, spatial, n.inputType(1).getShape().drop_front(2));
  if (failed(w))
    return failure();
  SmallVector<int64_t> outputPadding = n.hasAttr("output_padding")
                                           ? n.intsAttr("output_padding")
                                           : SmallVector<int64_t>(spatial, 0);
  if (outputPadding.size() != spatial ||
      llvm::any_of(outputPadding, [](int64_t p) { return p < 0; })) {
    return n.fail("output_padding " + formatInts(outputPadding) +
                  " must have " + Twine(spatial) + " non-negative entries");
  }
  if (failed(resolveTransposedPadding(n, *w, outputPadding)))
    return failure();
  return bind(
      n, n.make<ConvTransposeOp>(
             convOperands(n), {n.namedArray("strides", w->strides),
                               n.namedArray("dilations", w->dilations),
                               n.namedArray("padding", w->padding),
                               n.namedArray("output_padding", outputPadding),
                               n.namedI64("groups", n.intAttr("group", 1))}));
}

} // namespace

void registerContractionHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"MatMul", 1, importMatMul, ""},
      {"Gemm", 7, importGemm, "integer operands need whole alpha and beta"},
      {"Gemm", 11, importGemm, "integer operands need whole alpha and beta"},
      {"Conv", 1, importConv, "1-D to 3-D only"},
      {"ConvTranspose", 1, importConvTranspose, "1-D to 3-D only"},
      {"ConvTranspose", 11, importConvTranspose, "1-D to 3-D only"},
  });
}

} // namespace kiln::onnx_frontend

//===- ContribQuantizationHandlers.cpp - com.microsoft quantized ops ------===//
//
// The com.microsoft contrib ops onnxruntime's quantizer writes (QOperator
// format, quantize_dynamic), with onnxruntime 1.20.1's semantics, composed
// from kiln ops like the ONNX ones (QuantizationHandlers.cpp):
//
//  - QLinearAdd, QLinearMul: MLAS's formulas, in f32: the scale ratios
//    a_scale / c_scale and b_scale / c_scale (Add) or a_scale * b_scale /
//    c_scale (Mul) times the zero-point-free integers;
//  - QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearConcat,
//    QLinearAveragePool, QLinearGlobalAveragePool: dequantize, the float
//    op, quantize (what
//    onnxruntime's lookup tables and requantizing copies compute);
//  - QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul: the exact i32
//    product, then the scales (and QGemm's optional requantize);
//  - QuantizeLinear, DequantizeLinear: the ONNX ops.
//
// Values may differ from onnxruntime's where a float result lies within an
// ulp of a rounding tie (different operation order): one quantization step.
//
//===----------------------------------------------------------------------===//

#include "QuantizationCompose.h"
#include "WindowAttrs.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {
using namespace quant;

LogicalResult checkStorage(NodeImporter &n, std::initializer_list<size_t> in) {
  for (size_t i : in)
    if (n.hasInput(i) && !integerRange(elementTypeOf(n.input(i))))
      return n.fail("input " + Twine(i) + " must be an 8- or 16-bit integer, got " +
                    typeName(elementTypeOf(n.input(i))));
  return success();
}

Value minusZeroPoint(Composer &c, Value x, Value zeroPoint) {
  Type f32 = c.importer().builder().getF32Type();
  Value v = c.cast(x, f32);
  if (!zeroPoint)
    return v;
  return c.make<SubOp>({v, c.cast(perTensor(c, zeroPoint, "zero point"), f32)});
}

/// QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
/// C_zp).
template <bool IsAdd> LogicalResult importQLinearBinary(NodeImporter &n) {
  if (failed(n.checkArity(7, 8)) || failed(checkStorage(n, {0, 2, 3, 5, 7})))
    return failure();
  Composer c(n);
  Type f32 = n.builder().getF32Type();
  Value a = minusZeroPoint(c, n.input(0), n.input(2));
  Value b = minusZeroPoint(c, n.input(3), n.input(5));
  auto scale = [&](size_t i) {
    return c.cast(perTensor(c, n.input(i), "scale"), f32);
  };
  Value v;
  if (IsAdd) {
    Value ra = c.make<DivOp>({scale(1), scale(6)});
    Value rb = c.make<DivOp>({scale(4), scale(6)});
    v = c.make<AddOp>({c.make<MulOp>({a, ra}), c.make<MulOp>({b, rb})});
  } else {
    Value r = c.make<DivOp>({c.make<MulOp>({scale(1), scale(4)}), scale(6)});
    v = c.make<MulOp>({c.make<MulOp>({a, b}), r});
  }
  Type storage = elementTypeOf(n.input(0));
  Value zp = n.hasInput(7) ? perTensor(c, n.input(7), "C_zero_point") : Value();
  return bindComposed(c, roundSaturate(c, v, zp, storage));
}

/// Unary ops on (X, X_scale, X_zp, Y_scale, Y_zp): dequantize, `f`,
/// quantize.
LogicalResult importQLinearUnary(NodeImporter &n,
                                 llvm::function_ref<Value(Composer &, Value)> f,
                                 size_t minInputs = 4) {
  if (failed(n.checkArity(minInputs, 5)) || failed(checkStorage(n, {0, 2, 4})))
    return failure();
  Composer c(n);
  Value v = f(c, dequantizeF32(c, n.input(0), n.input(1), n.input(2)));
  Type storage = elementTypeOf(n.input(0));
  Value zp = n.hasInput(4) ? n.input(4) : Value();
  Value q = c.make<DivOp>(
      {v, c.cast(perTensor(c, n.input(3), "Y_scale"), n.builder().getF32Type())});
  return bindComposed(
      c, roundSaturate(c, q, zp ? perTensor(c, zp, "Y_zero_point") : Value(),
                       storage));
}

LogicalResult importQLinearSigmoid(NodeImporter &n) {
  return importQLinearUnary(
      n, [](Composer &c, Value v) { return c.make<SigmoidOp>(v); });
}

LogicalResult importQLinearLeakyRelu(NodeImporter &n) {
  float alpha = n.floatAttr("alpha", 0.01f);
  return importQLinearUnary(n, [&](Composer &c, Value v) {
    return c.make<LeakyReluOp>(v, {n.namedF32("alpha", alpha)});
  });
}

/// QLinearSoftmax (axis, opset: the original Softmax's): the softmax of
/// the dequantized values along `axis`. Softmax before opset 13 flattens
/// the input to 2-D at `axis`; that equals a softmax along the axis only
/// when it is the last one, the only case taken here (what the quantizer
/// writes for a classifier's [N, classes] logits).
LogicalResult importQLinearSoftmax(NodeImporter &n) {
  // The arity first: the rank below reads input 0 (reliability finding 14).
  if (failed(n.checkArity(4, 5)))
    return failure();
  int64_t rank = n.inputType(0).getRank();
  if (rank < 1)
    return n.fail("expects an input of rank >= 1, got rank 0");
  int64_t opset = n.intAttr("opset", 13);
  int64_t axis = n.intAttr("axis", opset < 13 ? 1 : -1);
  if (axis < -rank || axis >= rank)
    return n.fail("axis " + Twine(axis) + " is out of range for rank " +
                  Twine(rank));
  if (axis < 0)
    axis += rank;
  if (opset < 13 && axis != rank - 1)
    return n.fail("opset " + Twine(opset) + " softmax (2-D flattening) on "
                  "axis " + Twine(axis) + " of rank " + Twine(rank) +
                  " is not supported (only the last axis)");
  return importQLinearUnary(n, [&](Composer &c, Value v) {
    return c.make<SoftmaxOp>(v, {n.namedI64("axis", axis)});
  });
}

/// QLinearGlobalAveragePool (channels_last 0 or 1): the mean of the
/// dequantized window.
LogicalResult importQLinearGlobalAveragePool(NodeImporter &n) {
  // The arity first: inputType(0) of a missing input is null (finding 9).
  if (failed(n.checkArity(4, 5)))
    return failure();
  int64_t rank = n.inputType(0).getRank();
  if (rank < 3)
    return n.fail("expects an input of rank >= 3, got rank " + Twine(rank));
  bool channelsLast = n.intAttr("channels_last", 0) != 0;
  SmallVector<int64_t> axes;
  for (int64_t d = channelsLast ? 1 : 2; d < (channelsLast ? rank - 1 : rank);
       ++d)
    axes.push_back(d);
  return importQLinearUnary(n, [&](Composer &c, Value v) {
    return c.reduce(ReduceKind::Mean, v, axes, /*keepdims=*/true);
  });
}

/// QLinearAveragePool: NCHW (channels_last 0) only.
LogicalResult importQLinearAveragePool(NodeImporter &n) {
  // The arity first: inputType(0) of a missing input is null (finding 9).
  if (failed(n.checkArity(4, 5)))
    return failure();
  int64_t rank = n.inputType(0).getRank();
  if (rank < 3)
    return n.fail("expects an input of rank >= 3, got rank " + Twine(rank));
  if (n.intAttr("channels_last", 0) != 0)
    return n.fail("channels_last = 1 is not supported");
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  FailureOr<WindowAttrs> w = readWindowAttrs(n, shape.size() - 2);
  if (failed(w))
    return failure();
  resolveForwardPadding(*w, shape.drop_front(2));
  SmallVector<NamedAttribute> attrs{
      n.named("kind", PoolKindAttr::get(n.context(), PoolKind::Avg)),
      n.namedArray("kernel", w->kernel), n.namedArray("strides", w->strides),
      n.namedArray("dilations", w->dilations),
      n.namedArray("padding", w->padding)};
  if (n.intAttr("ceil_mode", 0) != 0)
    attrs.push_back(n.namedUnit("ceil_mode"));
  if (n.intAttr("count_include_pad", 0) != 0)
    attrs.push_back(n.namedUnit("count_include_pad"));
  return importQLinearUnary(n, [&](Composer &c, Value v) {
    return c.make<PoolOp>(v, attrs);
  });
}

/// QLinearConcat(Y_scale, Y_zp, X1, X1_scale, X1_zp, ...): every input
/// requantized to Y's parameters (exactly itself where they agree).
LogicalResult importQLinearConcat(NodeImporter &n) {
  size_t count = n.numInputs();
  if (count < 5 || (count - 2) % 3 != 0)
    return n.fail("expects Y_scale, Y_zero_point and (X, X_scale, "
                  "X_zero_point) triples, got " +
                  Twine(count) + " inputs");
  if (failed(checkStorage(n, {1})))
    return failure();
  Composer c(n);
  int64_t rank = n.inputType(2).getRank();
  FailureOr<int64_t> axis = normalizeAxisOrFail(n, n.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  SmallVector<Value> parts;
  for (size_t i = 2; i < count; i += 3) {
    if (!n.hasInput(i) || !n.hasInput(i + 1))
      return n.fail("input " + Twine(i) + " or its scale is missing");
    parts.push_back(dequantizeF32(c, n.input(i), n.input(i + 1),
                                  n.hasInput(i + 2) ? n.input(i + 2)
                                                    : Value()));
  }
  // Quantizing is elementwise, so concatenating the dequantized f32 parts
  // first gives the same bytes. (Written when kiln.concat on ui8 did not
  // lower; it does now, concat-unsigned.test, but the parts have their own
  // scales and zero points, so they are requantized to Y's anyway.)
  return bindComposed(
      c, quantizeF32(c, c.concat(parts, *axis), n.input(0), n.input(1)));
}

/// `v` times a per-tensor or per-column ([N]) scale, as f32.
Value timesScale(Composer &c, Value v, Value scale) {
  if (!v || !scale)
    return {};
  Type f32 = c.importer().builder().getF32Type();
  if (typeOf(scale).getNumElements() == 1)
    scale = c.reshape(scale, {});
  return c.make<MulOp>({c.cast(v, f32), c.cast(scale, f32)});
}

/// MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp?, b_zp?, bias?):
/// the exact product times a_scale * b_scale, plus the bias.
LogicalResult importMatMulIntegerToFloat(NodeImporter &n) {
  if (failed(n.checkArity(4, 7)) || failed(checkStorage(n, {0, 1, 4, 5})))
    return failure();
  Composer c(n);
  Value acc = integerMatmul(c, n.input(0), n.input(4), n.input(1), n.input(5));
  Value y = timesScale(c, timesScale(c, acc, perTensor(c, n.input(2), "a_scale")),
                       n.input(3));
  if (n.hasInput(6))
    y = c.make<AddOp>({y, n.input(6)});
  return bindComposed(c, y);
}

/// DynamicQuantizeMatMul(A, B, b_scale, b_zp?, bias?): A quantized as
/// DynamicQuantizeLinear does (uint8), then MatMulIntegerToFloat.
LogicalResult importDynamicQuantizeMatMul(NodeImporter &n) {
  if (failed(n.checkArity(3, 5)) || failed(checkStorage(n, {1, 3})))
    return failure();
  if (elementTypeOf(n.input(0)) != n.builder().getF32Type())
    return n.fail("A must be f32, got " + typeName(elementTypeOf(n.input(0))));
  Composer c(n);
  DynamicQuantized a = dynamicQuantize(c, n.input(0));
  Value acc = integerMatmul(c, a.value, a.zeroPoint, n.input(1), n.input(3));
  Value y = timesScale(c, timesScale(c, acc, a.scale), n.input(2));
  if (n.hasInput(4))
    y = c.make<AddOp>({y, n.input(4)});
  return bindComposed(c, y);
}

/// QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?): alpha *
/// A' B' in i32 plus the i32 C, scaled to f32, requantized when y_scale is
/// given.
LogicalResult importQGemm(NodeImporter &n) {
  if (failed(n.checkArity(6, 9)) || failed(checkStorage(n, {0, 2, 3, 5, 8})))
    return failure();
  Composer c(n);
  auto transposedIf = [&](size_t i, StringRef attr) -> Value {
    if (n.intAttr(attr, 0) == 0)
      return n.input(i);
    return c.transpose(n.input(i), {1, 0});
  };
  Value acc = integerMatmul(c, transposedIf(0, "transA"), n.input(2),
                            transposedIf(3, "transB"), n.input(5));
  if (n.hasInput(6))
    acc = c.make<AddOp>({acc, c.cast(n.input(6), elementTypeOf(acc))});
  float alpha = n.floatAttr("alpha", 1.0f);
  Type f32 = n.builder().getF32Type();
  Value y = timesScale(c, acc, perTensor(c, n.input(1), "a_scale"));
  y = timesScale(c, y, n.input(4));
  if (alpha != 1.0f)
    y = c.make<MulOp>({y, c.scalar(f32, alpha)});
  if (!n.hasInput(7))
    return bindComposed(c, y);
  Value zp = n.hasInput(8) ? n.input(8) : Value();
  Type storage = zp ? elementTypeOf(zp) : elementTypeOf(n.input(0));
  Value q = c.make<DivOp>({y, c.cast(perTensor(c, n.input(7), "y_scale"), f32)});
  return bindComposed(
      c, roundSaturate(c, q, zp ? perTensor(c, zp, "y_zero_point") : Value(),
                       storage));
}

} // namespace

void registerContribQuantizationHandlers(SmallVectorImpl<Handler> &handlers) {
  const char *perTensorLimits = "per-tensor scales and zero points";
  handlers.append({
      {"com.microsoft.QuantizeLinear", 1, importQuantizeLinear,
       "integer storage types only"},
      {"com.microsoft.DequantizeLinear", 1, importDequantizeLinear,
       "integer storage types only"},
      {"com.microsoft.QLinearAdd", 1, importQLinearBinary<true>,
       perTensorLimits},
      {"com.microsoft.QLinearMul", 1, importQLinearBinary<false>,
       perTensorLimits},
      {"com.microsoft.QLinearSigmoid", 1, importQLinearSigmoid,
       perTensorLimits},
      {"com.microsoft.QLinearLeakyRelu", 1, importQLinearLeakyRelu,
       perTensorLimits},
      {"com.microsoft.QLinearSoftmax", 1, importQLinearSoftmax,
       "per-tensor scales and zero points; before opset 13, the last axis "
       "only"},
      {"com.microsoft.QLinearConcat", 1, importQLinearConcat,
       perTensorLimits},
      {"com.microsoft.QLinearGlobalAveragePool", 1,
       importQLinearGlobalAveragePool, perTensorLimits},
      {"com.microsoft.QLinearAveragePool", 1, importQLinearAveragePool,
       "NCHW only; per-tensor scales and zero points"},
      {"com.microsoft.QGemm", 1, importQGemm,
       "per-tensor a_scale; b_scale per tensor or per column"},
      {"com.microsoft.MatMulIntegerToFloat", 1, importMatMulIntegerToFloat,
       "per-tensor a_scale; b_scale per tensor or per column"},
      {"com.microsoft.DynamicQuantizeMatMul", 1, importDynamicQuantizeMatMul,
       "b_scale per tensor or per column"},
  });
}

} // namespace kiln::onnx_frontend

//===- ElementwiseHandlers.cpp - ONNX elementwise ops
//----------------------===//
//
// Unary math and activations, binary arithmetic with broadcasting, logic and
// comparisons, variadic Sum/Mean/Max/Min, Where, Cast. Activations kiln has no
// op for (Selu, Celu, Softsign, Mish, ...) are decomposed into kiln ops here.
//
//===----------------------------------------------------------------------===//

#include "../NodeImporter.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

template <typename OpTy> LogicalResult importUnary(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  return bind(n, n.make<OpTy>(n.input(0)));
}

template <typename OpTy> LogicalResult importBinary(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  return bind(n, n.make<OpTy>({n.input(0), n.input(1)}));
}

/// Max, Min, Sum, Mean: a left fold of the binary op over every input.
template <typename OpTy> FailureOr<Value> foldVariadic(NodeImporter &n) {
  if (n.numInputs() == 0 ||
      llvm::any_of(llvm::seq<size_t>(0, n.numInputs()),
                   [&](size_t i) { return !n.hasInput(i); })) {
    (void)n.fail("expects at least one input and no omitted inputs");
    return failure();
  }
  Value acc = n.input(0);
  for (size_t i = 1; i < n.numInputs(); ++i) {
    FailureOr<Value> next = n.make<OpTy>({acc, n.input(i)});
    if (failed(next))
      return failure();
    acc = *next;
  }
  return acc;
}

template <typename OpTy> LogicalResult importVariadic(NodeImporter &n) {
  return bind(n, foldVariadic<OpTy>(n));
}

LogicalResult importMean(NodeImporter &n) {
  FailureOr<Value> sum = foldVariadic<AddOp>(n);
  if (failed(sum))
    return failure();
  Value count =
      n.scalar(elementTypeOf(*sum), static_cast<double>(n.numInputs()));
  return bind(n, n.make<DivOp>({*sum, count}));
}

LogicalResult importLeakyRelu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  return bind(
      n, n.make<LeakyReluOp>(
             n.input(0), {n.namedF32("alpha", n.floatAttr("alpha", 0.01f))}));
}

LogicalResult importElu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  return bind(n,
              n.make<EluOp>(n.input(0),
                            {n.namedF32("alpha", n.floatAttr("alpha", 1.0f))}));
}

LogicalResult importHardSigmoid(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  return bind(n,
              n.make<HardSigmoidOp>(
                  n.input(0), {n.namedF32("alpha", n.floatAttr("alpha", 0.2f)),
                               n.namedF32("beta", n.floatAttr("beta", 0.5f))}));
}

LogicalResult importGelu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) ||
      failed(n.requireStringAttrIn("approximate", "none", {"none", "tanh"})))
    return failure();
  SmallVector<NamedAttribute> attrs;
  if (n.stringAttr("approximate", "none") == "tanh")
    attrs.push_back(n.namedUnit("tanh"));
  return bind(n, n.make<GeluOp>(n.input(0), attrs));
}

/// Clip-6 takes its bounds as attributes, Clip-11 as optional inputs: a
/// constant bound becomes kiln.clip's attribute, a bound given at run time
/// (a one-element tensor of x's type) a kiln.max or kiln.min against it, in
/// the spec's order min(max(x, min), max).
LogicalResult importClip(NodeImporter &n) {
  SmallVector<NamedAttribute> attrs;
  Value runtimeBounds[2];
  if (n.opset() < 11) {
    if (failed(n.checkArity(1, 1)))
      return failure();
    attrs.push_back(n.namedF64("min", n.floatAttr("min", -3.402823466e38f)));
    attrs.push_back(n.namedF64("max", n.floatAttr("max", 3.402823466e38f)));
  } else {
    if (failed(n.checkArity(1, 3)))
      return failure();
    const StringRef names[] = {"min", "max"};
    for (auto [i, name] : llvm::enumerate(names)) {
      if (!n.hasInput(i + 1))
        continue;
      RankedTensorType type = n.inputType(i + 1);
      if (!n.constantInput(i + 1) && type.hasStaticShape() &&
          type.getNumElements() == 1 &&
          type.getElementType() == n.inputType(0).getElementType()) {
        runtimeBounds[i] = n.input(i + 1);
        continue;
      }
      FailureOr<SmallVector<double>> bound = n.constantFloats(i + 1, name);
      if (failed(bound))
        return failure();
      if (bound->size() != 1)
        return n.fail(Twine(name) + " must be a scalar");
      attrs.push_back(n.namedF64(name, bound->front()));
    }
  }
  Value y = n.input(0);
  if (runtimeBounds[0]) {
    FailureOr<Value> raised = n.make<MaxOp>({y, runtimeBounds[0]});
    if (failed(raised))
      return failure();
    y = *raised;
  }
  if (!attrs.empty() || !(runtimeBounds[0] || runtimeBounds[1])) {
    FailureOr<Value> clipped = n.make<ClipOp>(y, attrs);
    if (failed(clipped))
      return failure();
    y = *clipped;
  }
  if (runtimeBounds[1]) {
    FailureOr<Value> lowered = n.make<MinOp>({y, runtimeBounds[1]});
    if (failed(lowered))
      return failure();
    y = *lowered;
  }
  return n.setResult(y);
}

/// selu(x) = gamma * elu_alpha(x).
LogicalResult importSelu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  float alpha = n.floatAttr("alpha", 1.67326319217681884765625f);
  float gamma = n.floatAttr("gamma", 1.05070102214813232421875f);
  FailureOr<Value> elu =
      n.make<EluOp>(n.input(0), {n.namedF32("alpha", alpha)});
  if (failed(elu))
    return failure();
  return bind(n, n.make<MulOp>({*elu, n.scalar(elementTypeOf(*elu), gamma)}));
}

/// celu(x) = alpha * elu_1(x / alpha).
LogicalResult importCelu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  float alpha = n.floatAttr("alpha", 1.0f);
  Value x = n.input(0);
  Value a = n.scalar(elementTypeOf(x), alpha);
  FailureOr<Value> scaled = n.make<DivOp>({x, a});
  if (failed(scaled))
    return failure();
  FailureOr<Value> elu = n.make<EluOp>(*scaled, {n.namedF32("alpha", 1.0f)});
  if (failed(elu))
    return failure();
  return bind(n, n.make<MulOp>({*elu, a}));
}

/// softsign(x) = x / (1 + |x|).
LogicalResult importSoftsign(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  FailureOr<Value> absX = n.make<AbsOp>(x);
  if (failed(absX))
    return failure();
  FailureOr<Value> denom =
      n.make<AddOp>({*absX, n.scalar(elementTypeOf(x), 1.0)});
  if (failed(denom))
    return failure();
  return bind(n, n.make<DivOp>({x, *denom}));
}

/// tan(x) = sin(x) / cos(x).
LogicalResult importTan(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  FailureOr<Value> s = n.make<SinOp>(n.input(0));
  FailureOr<Value> c = n.make<CosOp>(n.input(0));
  if (failed(s) || failed(c))
    return failure();
  return bind(n, n.make<DivOp>({*s, *c}));
}

/// mish(x) = x * tanh(softplus(x)).
LogicalResult importMish(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  FailureOr<Value> sp = n.make<SoftplusOp>(n.input(0));
  if (failed(sp))
    return failure();
  FailureOr<Value> t = n.make<TanhOp>(*sp);
  if (failed(t))
    return failure();
  return bind(n, n.make<MulOp>({n.input(0), *t}));
}

/// thresholded_relu(x) = x > alpha ? x : 0.
LogicalResult importThresholdedRelu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  Type type = elementTypeOf(x);
  FailureOr<Value> above =
      n.make<GreaterOp>({x, n.scalar(type, n.floatAttr("alpha", 1.0f))});
  if (failed(above))
    return failure();
  return bind(n, n.make<SelectOp>({*above, x, n.scalar(type, 0.0)}));
}

/// prelu(x, slope) = x < 0 ? slope * x : x, slope broadcasting to x.
LogicalResult importPRelu(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  Value x = n.input(0), slope = n.input(1);
  FailureOr<Value> negative =
      n.make<LessOp>({x, n.scalar(elementTypeOf(x), 0.0)});
  FailureOr<Value> scaled = n.make<MulOp>({slope, x});
  if (failed(negative) || failed(scaled))
    return failure();
  return bind(n, n.make<SelectOp>({*negative, *scaled, x}));
}

/// isnan(x) = !(x == x).
LogicalResult importIsNaN(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  FailureOr<Value> same = n.make<EqualOp>({n.input(0), n.input(0)});
  if (failed(same))
    return failure();
  return bind(n, n.make<NotOp>(*same));
}

/// isinf(x) = (detect_positive && x == +inf) || (detect_negative && x == -inf),
/// both comparisons exact.
LogicalResult importIsInf(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  Type type = elementTypeOf(x);
  if (!isa<FloatType>(type))
    return n.fail("IsInf needs a floating-point input");
  bool positive = n.intAttr("detect_positive", 1) != 0;
  bool negative = n.intAttr("detect_negative", 1) != 0;
  SmallVector<Value> hits;
  for (auto [detect, sign] : {std::pair{positive, 1.0}, {negative, -1.0}}) {
    if (!detect)
      continue;
    FailureOr<Value> hit =
        n.make<EqualOp>({x, n.scalar(type, sign * INFINITY)});
    if (failed(hit))
      return failure();
    hits.push_back(*hit);
  }
  if (hits.empty()) {
    // Neither sign detected: all false (nothing is below -inf, NaN neither).
    FailureOr<Value> never = n.make<LessOp>({x, n.scalar(type, -INFINITY)});
    return bind(n, never);
  }
  if (hits.size() == 1)
    return n.setResult(hits.front());
  return bind(n, n.make<OrOp>({hits[0], hits[1]}));
}

/// shrink(x) = x < -lambd ? x + bias : (x > lambd ? x - bias : 0).
LogicalResult importShrink(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  Type type = elementTypeOf(x);
  double lambd = n.floatAttr("lambd", 0.5f);
  double bias = n.floatAttr("bias", 0.0f);
  FailureOr<Value> below = n.make<LessOp>({x, n.scalar(type, -lambd)});
  FailureOr<Value> above = n.make<GreaterOp>({x, n.scalar(type, lambd)});
  FailureOr<Value> plus = n.make<AddOp>({x, n.scalar(type, bias)});
  FailureOr<Value> minus = n.make<SubOp>({x, n.scalar(type, bias)});
  if (failed(below) || failed(above) || failed(plus) || failed(minus))
    return failure();
  FailureOr<Value> upper =
      n.make<SelectOp>({*above, *minus, n.scalar(type, 0.0)});
  if (failed(upper))
    return failure();
  return bind(n, n.make<SelectOp>({*below, *plus, *upper}));
}

LogicalResult importBitShift(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  if (!n.hasAttr("direction"))
    return n.fail("attribute 'direction' (LEFT or RIGHT) is required");
  if (failed(n.requireStringAttrIn("direction", "", {"LEFT", "RIGHT"})))
    return failure();
  if (n.stringAttr("direction", "") == "LEFT")
    return bind(n, n.make<ShiftLeftOp>({n.input(0), n.input(1)}));
  return bind(n, n.make<ShiftRightOp>({n.input(0), n.input(1)}));
}

/// Pow allows an exponent of another element type; kiln.pow does not.
LogicalResult importPow(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  Value base = n.input(0), exponent = n.input(1);
  if (elementTypeOf(exponent) != elementTypeOf(base)) {
    auto type =
        RankedTensorType::get(n.inputType(1).getShape(), elementTypeOf(base));
    FailureOr<Value> converted = n.makeTyped<CastOp>(type, exponent);
    if (failed(converted))
      return failure();
    exponent = *converted;
  }
  return bind(n, n.make<PowOp>({base, exponent}));
}

LogicalResult importMod(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  SmallVector<NamedAttribute> attrs;
  if (n.intAttr("fmod", 0) != 0)
    attrs.push_back(n.namedUnit("fmod"));
  else if (isa<FloatType>(elementTypeOf(n.input(0))))
    return n.fail("Mod on floats requires fmod=1");
  return bind(n, n.make<ModOp>({n.input(0), n.input(1)}, attrs));
}

LogicalResult importWhere(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  return bind(n, n.make<SelectOp>({n.input(0), n.input(1), n.input(2)}));
}

FailureOr<Value> castTo(NodeImporter &n, Value input, Type elementType) {
  auto type = RankedTensorType::get(
      cast<RankedTensorType>(input.getType()).getShape(), elementType);
  return n.makeTyped<CastOp>(type, input);
}

/// The largest finite value of a float8 type, or nothing for other types.
std::optional<double> float8Max(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return 448.0;
  if (isa<Float8E4M3FNUZType>(type))
    return 240.0;
  if (isa<Float8E5M2Type>(type) || isa<Float8E5M2FNUZType>(type))
    return 57344.0;
  return std::nullopt;
}

FailureOr<Value> clip(NodeImporter &n, Value v, double lo, double hi) {
  return n.make<ClipOp>(v, {n.namedF64("min", lo), n.namedF64("max", hi)});
}

/// Cast with ONNX's rules for the storage types, as the reference computes
/// them: the source goes through f32 first where the target is float8 or
/// 4-bit (a float8 source always: it has no arithmetic), then
///  - float8 targets with `saturate` clip to +-max (which takes +-Inf there
///    too, as the reference does for every float8 type; NaN stays NaN); the
///    cast itself rounds to nearest even and overflows to Inf (E5M2) or NaN;
///  - INT4/UINT4 targets (`fourBit`, held as i8/ui8) clip to [-8, 7] or
///    [0, 15] and round half to even.
FailureOr<Value> castWithOnnxRules(NodeImporter &n, Value input,
                                   Type elementType, bool fourBit,
                                   bool saturate) {
  std::optional<double> f8Max = float8Max(elementType);
  if (!f8Max && !fourBit)
    return castTo(n, input, elementType);
  Type f32 = n.builder().getF32Type();
  Type from = elementTypeOf(input);
  FailureOr<Value> v = input;
  if (!isa<FloatType>(from) || float8Max(from) || (fourBit && !from.isF32()))
    v = castTo(n, input, f32);
  if (failed(v))
    return failure();
  if (f8Max) {
    if (saturate)
      v = clip(n, *v, -*f8Max, *f8Max);
  } else {
    bool isSigned = !elementType.isUnsignedInteger();
    v = clip(n, *v, isSigned ? -8.0 : 0.0, isSigned ? 7.0 : 15.0);
    if (succeeded(v))
      v = n.make<RoundOp>(*v);
  }
  if (failed(v))
    return failure();
  return castTo(n, *v, elementType);
}

LogicalResult importCast(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  auto to = static_cast<int32_t>(n.intAttr("to", 0));
  Type elementType = convertElementType(to, n.context());
  if (!elementType)
    return n.fail("cast to unsupported element type " + onnxTypeName(to));
  bool fourBit = isFourBitType(to);
  if (fourBit)
    n.markOutputFourBit(0);
  return bind(n, castWithOnnxRules(n, n.input(0), elementType, fourBit,
                                   n.intAttr("saturate", 1) != 0));
}

LogicalResult importCastLike(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  bool fourBit = n.inputIsFourBit(1);
  if (fourBit)
    n.markOutputFourBit(0);
  return bind(n, castWithOnnxRules(n, n.input(0), elementTypeOf(n.input(1)),
                                   fourBit, n.intAttr("saturate", 1) != 0));
}

} // namespace

void registerElementwiseHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"Abs", 6, importUnary<AbsOp>, ""},
      {"Neg", 6, importUnary<NegOp>, ""},
      {"Exp", 6, importUnary<ExpOp>, ""},
      {"Log", 6, importUnary<LogOp>, ""},
      {"Sqrt", 6, importUnary<SqrtOp>, ""},
      {"Reciprocal", 6, importUnary<ReciprocalOp>, ""},
      {"Tanh", 6, importUnary<TanhOp>, ""},
      {"Sigmoid", 6, importUnary<SigmoidOp>, ""},
      {"Erf", 9, importUnary<ErfOp>, ""},
      {"Sin", 7, importUnary<SinOp>, ""},
      {"Cos", 7, importUnary<CosOp>, ""},
      {"Tan", 7, importTan, "decomposed as sin / cos"},
      {"Asin", 7, importUnary<AsinOp>, ""},
      {"Acos", 7, importUnary<AcosOp>, ""},
      {"Atan", 7, importUnary<AtanOp>, ""},
      {"Sinh", 9, importUnary<SinhOp>, ""},
      {"Cosh", 9, importUnary<CoshOp>, ""},
      {"Asinh", 9, importUnary<AsinhOp>, ""},
      {"Acosh", 9, importUnary<AcoshOp>, ""},
      {"Atanh", 9, importUnary<AtanhOp>, ""},
      {"Floor", 6, importUnary<FloorOp>, ""},
      {"Ceil", 6, importUnary<CeilOp>, ""},
      {"Round", 11, importUnary<RoundOp>, ""},
      {"Sign", 9, importUnary<SignOp>, ""},
      {"Not", 1, importUnary<NotOp>, ""},
      {"Relu", 6, importUnary<ReluOp>, ""},
      {"Softplus", 1, importUnary<SoftplusOp>, ""},
      {"HardSwish", 14, importUnary<HardSwishOp>, ""},
      {"LeakyRelu", 6, importLeakyRelu, ""},
      {"Elu", 6, importElu, ""},
      {"Selu", 6, importSelu, "decomposed as gamma * elu"},
      {"Celu", 12, importCelu, "decomposed as alpha * elu(x / alpha)"},
      {"HardSigmoid", 6, importHardSigmoid, ""},
      {"Gelu", 20, importGelu, ""},
      {"Softsign", 1, importSoftsign, "decomposed as x / (1 + |x|)"},
      {"Mish", 18, importMish, "decomposed as x * tanh(softplus(x))"},
      {"ThresholdedRelu", 10, importThresholdedRelu, ""},
      {"PRelu", 7, importPRelu, ""},
      {"IsNaN", 9, importIsNaN, ""},
      {"IsInf", 10, importIsInf, ""},
      {"Shrink", 9, importShrink, ""},
      {"BitwiseNot", 18, importUnary<BitwiseNotOp>, ""},
      {"BitwiseAnd", 18, importBinary<BitwiseAndOp>, ""},
      {"BitwiseOr", 18, importBinary<BitwiseOrOp>, ""},
      {"BitwiseXor", 18, importBinary<BitwiseXorOp>, ""},
      {"BitShift", 11, importBitShift, ""},
      {"Clip", 6, importClip, ""},
      {"Clip", 11, importClip,
       "min and max: constants, or one-element tensors of the input's type"},
      {"Add", 7, importBinary<AddOp>, ""},
      {"Sub", 7, importBinary<SubOp>, ""},
      {"Mul", 7, importBinary<MulOp>, ""},
      {"Div", 7, importBinary<DivOp>, ""},
      {"Pow", 7, importPow, ""},
      {"Mod", 10, importMod, ""},
      {"And", 7, importBinary<AndOp>, ""},
      {"Or", 7, importBinary<OrOp>, ""},
      {"Xor", 7, importBinary<XorOp>, ""},
      {"Equal", 7, importBinary<EqualOp>, ""},
      {"Less", 7, importBinary<LessOp>, ""},
      {"LessOrEqual", 12, importBinary<LessEqualOp>, ""},
      {"Greater", 7, importBinary<GreaterOp>, ""},
      {"GreaterOrEqual", 12, importBinary<GreaterEqualOp>, ""},
      {"Max", 6, importVariadic<MaxOp>, ""},
      {"Min", 6, importVariadic<MinOp>, ""},
      {"Sum", 6, importVariadic<AddOp>, ""},
      {"Mean", 6, importMean, ""},
      {"Where", 9, importWhere, ""},
      {"Cast", 6, importCast,
       "no complex types; to and from STRING as host steps (FLOAT, DOUBLE, "
       "integers, BOOL)"},
      {"CastLike", 15, importCastLike,
       "no complex types; to and from STRING as host steps (FLOAT, DOUBLE, "
       "integers, BOOL)"},
  });
}

} // namespace kiln::onnx_frontend

//===- QuantizedChains.cpp - The importer's quantized contractions --------===//
//
// See QuantizedChains.h. The shapes matched here are the importer's
// (lib/Frontend/ONNX/Handlers/QuantizationHandlers.cpp,
// ContribQuantizationHandlers.cpp, QuantizationCompose.h).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/Transforms/QuantizedChains.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace mlir;

namespace kiln {
namespace {

/// The one value of a splat attribute, as a double.
std::optional<double> splatOf(DenseElementsAttr dense) {
  if (!dense || !dense.isSplat())
    return std::nullopt;
  Type element = dense.getElementType();
  if (isa<FloatType>(element))
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (auto integer = dyn_cast<IntegerType>(element)) {
    APInt value = dense.getSplatValue<APInt>();
    // Two branches: one conditional expression would make both unsigned.
    if (integer.isUnsigned())
      return static_cast<double>(value.getZExtValue());
    return static_cast<double>(value.getSExtValue());
  }
  return std::nullopt;
}

/// The one value of a constant that holds a single value (any shape), as a
/// double.
std::optional<double> splatValue(Value v) {
  auto constant = v.getDefiningOp<kiln::ConstantOp>();
  if (!constant)
    return std::nullopt;
  return splatOf(dyn_cast<DenseElementsAttr>(constant.getValue()));
}

/// One element of raw little-endian bytes of type `element`, as a double.
std::optional<double> elementAt(ArrayRef<char> bytes, Type element, int64_t i) {
  auto read = [&](auto zero) -> std::optional<double> {
    using T = decltype(zero);
    if (static_cast<size_t>(i + 1) * sizeof(T) > bytes.size())
      return std::nullopt;
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  };
  if (element.isF32())
    return read(float());
  if (element.isF64())
    return read(double());
  if (element.isInteger(32))
    return read(int32_t());
  if (element.isUnsignedInteger(8))
    return read(uint8_t());
  if (element.isInteger(8))
    return read(int8_t());
  return std::nullopt;
}

/// The values of a constant operand that is one value or one per column
/// (`columns` of them along its dimension `fromEnd` places before the last,
/// every other dimension 1),
/// seen through reshapes and casts from integers (which keep the values):
/// a kiln.constant or a constant global. Nothing for anything else.
std::optional<std::vector<double>> columnValues(Value v, int64_t columns,
                                                int64_t fromEnd = 0) {
  // Where the values lie is the operand's shape as the op reads it; the
  // reshapes below it (a [O] scale read as [O][1][1][1]) keep their order.
  auto used = dyn_cast<RankedTensorType>(v.getType());
  if (!used || !used.hasStaticShape())
    return std::nullopt;
  while (true) {
    if (auto reshape = v.getDefiningOp<kiln::ReshapeOp>()) {
      v = reshape.getInput();
    } else if (auto cast = v.getDefiningOp<kiln::CastOp>();
               cast &&
               isa<IntegerType>(getElementTypeOrSelf(cast.getInput()))) {
      v = cast.getInput();
    } else {
      break;
    }
  }
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  int64_t count = type.getNumElements();
  if (count != used.getNumElements() || (count != 1 && count != columns))
    return std::nullopt;
  // Along that dimension only (counted from the end, numpy's alignment):
  // [K][1] values with K == N are per row of B, not per column.
  if (count != 1 && (used.getRank() <= fromEnd ||
                     used.getShape()[used.getRank() - 1 - fromEnd] != count))
    return std::nullopt;
  Attribute value;
  if (auto constant = v.getDefiningOp<kiln::ConstantOp>()) {
    value = constant.getValue();
  } else if (auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>()) {
    auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
        load, load.getGlobalAttr());
    if (!global || global.getIsMutable() || !global.getValue())
      return std::nullopt;
    value = *global.getValue();
  } else {
    return std::nullopt;
  }
  Type element = type.getElementType();
  std::vector<double> values;
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dense.isSplat()) {
      std::optional<double> one = splatOf(dense);
      if (!one)
        return std::nullopt;
      return std::vector<double>{*one};
    }
    ArrayRef<char> raw = dense.getRawData();
    for (int64_t i = 0; i < count; ++i)
      if (std::optional<double> x = elementAt(raw, element, i))
        values.push_back(*x);
      else
        return std::nullopt;
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    for (int64_t i = 0; i < count; ++i)
      if (std::optional<double> x = elementAt(blob->getData(), element, i))
        values.push_back(*x);
      else
        return std::nullopt;
  } else {
    return std::nullopt;
  }
  return values;
}

/// The `count` values of a vector computed at compile time from constants
/// by casts, reshapes and elementwise sub/mul/add (a QDQ bias the importer
/// did not fold: DequantizeLinear of an int32 vector with per-channel
/// scale and zero-point globals), evaluated as the ops do: in f64, rounded
/// to f32 where a cast says so. Operands are one value or `count`.
std::optional<std::vector<double>> evaluateVector(Value v, int64_t count,
                                                  int depth = 0) {
  if (depth > 16)
    return std::nullopt;
  if (std::optional<std::vector<double>> values = columnValues(v, count))
    return values;
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto operand = [&](unsigned i) {
    return evaluateVector(op->getOperand(i), count, depth + 1);
  };
  auto at = [](const std::vector<double> &x, int64_t i) {
    return x.size() == 1 ? x[0] : x[i];
  };
  if (isa<kiln::ReshapeOp>(op))
    return operand(0);
  if (auto cast = dyn_cast<kiln::CastOp>(op)) {
    std::optional<std::vector<double>> x = operand(0);
    Type to = getElementTypeOrSelf(cast.getType());
    if (!x || !(to.isF32() || to.isF64()))
      return std::nullopt;
    if (to.isF32())
      for (double &e : *x)
        e = static_cast<double>(static_cast<float>(e));
    return x;
  }
  if (!isa<kiln::SubOp, kiln::MulOp, kiln::AddOp>(op) ||
      !getElementTypeOrSelf(op->getResult(0).getType()).isF64())
    return std::nullopt; // f32 arithmetic would round differently
  std::optional<std::vector<double>> x = operand(0), y = operand(1);
  if (!x || !y)
    return std::nullopt;
  int64_t n = std::max(x->size(), y->size());
  std::vector<double> r(n);
  for (int64_t i = 0; i < n; ++i)
    r[i] = isa<kiln::SubOp>(op)   ? at(*x, i) - at(*y, i)
           : isa<kiln::MulOp>(op) ? at(*x, i) * at(*y, i)
                                  : at(*x, i) + at(*y, i);
  return r;
}

/// The 8-bit storage type (an integer or a float8 type) a value was cast
/// from, or null.
Type byteSource(Value v, Value *source) {
  auto cast = v.getDefiningOp<kiln::CastOp>();
  if (!cast)
    return nullptr;
  Type type = getElementTypeOrSelf(cast.getInput());
  if (!isa<IntegerType, FloatType>(type) || type.getIntOrFloatBitWidth() != 8)
    return nullptr;
  *source = cast.getInput();
  return type;
}

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

/// One operand of the matmul: storage bytes, zero point, (QDQ) scale;
/// one value, or (B only) one per column.
struct QuantizedOperand {
  Value bytes;
  Type storage;
  std::vector<double> zeroPoints{0.0};
  std::vector<double> scales; // QDQ form only
};

/// Matches `[mul(...,scale)] <- [sub(..., zp)] <- cast(bytes)`; `floatForm`
/// asks for the scale (a dequantize), else there is none (integer form).
/// `columns` is B's N (its scale and zero point may be one per column), 1
/// for A. On failure, `why` says what did not fit.
/// A convolution filter seen through the reshapes kiln-assign-layout makes
/// of transposes that only move unit dimensions ([O][C][1][1] to
/// [O][1][1][C]): they keep the bytes and the output channel first, so the
/// weight's bytes are the filter's.
Value peelFilterReshapes(Value v) {
  while (auto reshape = v.getDefiningOp<kiln::ReshapeOp>()) {
    auto from = cast<RankedTensorType>(reshape.getInput().getType());
    auto to = cast<RankedTensorType>(reshape.getType());
    if (from.getRank() != to.getRank() || from.getRank() == 0 ||
        from.getDimSize(0) != to.getDimSize(0))
      break;
    v = reshape.getInput();
  }
  return v;
}

/// `filter`: B is a convolution's filter, and reshapes that keep its output
/// channels first may come between the steps (peelFilterReshapes).
std::optional<QuantizedOperand> matchOperand(Value v, bool floatForm,
                                             int64_t columns, StringRef what,
                                             std::string &why,
                                             int64_t fromEnd = 0,
                                             bool filter = false) {
  auto peel = [&](Value x) { return filter ? peelFilterReshapes(x) : x; };
  v = peel(v);
  QuantizedOperand q;
  StringRef shape =
      columns == 1 ? "one constant" : "one constant or one per column";
  if (floatForm) {
    auto mul = v.getDefiningOp<kiln::MulOp>();
    std::optional<std::vector<double>> scales =
        mul ? columnValues(mul.getRhs(), columns, fromEnd) : std::nullopt;
    if (!scales) {
      why = (what + " is not dequantized by " + shape + " scale").str();
      return std::nullopt;
    }
    q.scales = *scales;
    v = peel(mul.getLhs());
  }
  if (auto sub = v.getDefiningOp<kiln::SubOp>()) {
    std::optional<std::vector<double>> zps =
        columnValues(sub.getRhs(), columns, fromEnd);
    if (!zps) {
      why = (what + "'s zero point is not " + shape +
             (columns == 1 ? " (per row zero points are not matched yet)" : ""))
                .str();
      return std::nullopt;
    }
    q.zeroPoints = *zps;
    v = peel(sub.getLhs());
  }
  q.storage = byteSource(v, &q.bytes);
  if (q.storage && filter)
    q.bytes = peelFilterReshapes(q.bytes);
  if (!q.storage) {
    why = (what + " is not an int8, uint8 or float8 tensor cast up").str();
    return std::nullopt;
  }
  return q;
}

/// The one op that reads `v`, or null when none or several do.
Operation *single(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// The requantization after the matmul: `[cast] -> mul/div scale -> round
/// -> add zp -> clip -> cast to 8 bits`.
struct Requantize {
  // Multipliers (QOperator: one, or one per channel) or the divisor (QDQ).
  std::vector<double> scales;
  double zeroPoint = 0;
  Type storage;
  /// The narrowing cast's result.
  Value result;
};

/// `wide`: the integer form's product is already in float (the
/// importer's f64 convolution), so no cast comes first; `channels` and
/// `fromEnd` say where a per-channel multiplier may lie.
std::optional<Requantize> matchRequantize(Value acc, bool floatForm,
                                          std::string &why, bool wide = false,
                                          int64_t channels = 1,
                                          int64_t fromEnd = 0) {
  Value v = acc;
  Requantize r;
  Operation *next = single(v);
  if (!floatForm) {
    auto widen = dyn_cast_or_null<kiln::CastOp>(next);
    bool toInteger =
        widen && getElementTypeOrSelf(widen.getResult()).isInteger(32);
    if (wide ? toInteger : !widen)
      return std::nullopt; // MatMulInteger, ConvInteger: an i32 output
    if (!wide) {
      v = widen.getResult();
      next = single(v);
    }
    auto mul = dyn_cast_or_null<kiln::MulOp>(next);
    std::optional<std::vector<double>> scales =
        mul && mul.getLhs() == v ? columnValues(mul.getRhs(), channels, fromEnd)
                                 : std::nullopt;
    if (!scales) {
      why = "the requantize scale is not one constant (or one per channel)";
      return std::nullopt;
    }
    r.scales = *scales;
    v = mul.getResult();
  } else {
    auto div = dyn_cast_or_null<kiln::DivOp>(next);
    std::optional<double> scale =
        div && div.getLhs() == v ? splatValue(div.getRhs()) : std::nullopt;
    if (!scale) {
      why = "the product is not quantized by one constant scale";
      return std::nullopt;
    }
    r.scales = {*scale};
    v = div.getResult();
  }
  // round -> [add zp] -> clip -> cast; the importer leaves out the add of
  // a zero point 0.
  auto round = dyn_cast_or_null<kiln::RoundOp>(single(v));
  Operation *afterRound = round ? single(round.getResult()) : nullptr;
  auto add = dyn_cast_or_null<kiln::AddOp>(afterRound);
  std::optional<double> zp = add     ? splatValue(add.getRhs())
                             : round ? std::optional<double>(0.0)
                                     : std::nullopt;
  auto clip = !zp   ? nullptr
              : add ? dyn_cast_or_null<kiln::ClipOp>(single(add.getResult()))
                    : dyn_cast_or_null<kiln::ClipOp>(afterRound);
  auto narrow =
      clip ? dyn_cast_or_null<kiln::CastOp>(single(clip.getResult())) : nullptr;
  auto storage =
      narrow ? dyn_cast<IntegerType>(getElementTypeOrSelf(narrow.getResult()))
             : nullptr;
  if (!storage || storage.getWidth() != 8) {
    why = "the product is not requantized to int8 or uint8 (round, zero "
          "point, clip, cast)";
    return std::nullopt;
  }
  // The kernel saturates to the output type's range, nothing narrower.
  double lo = storage.isUnsigned() ? 0 : -128,
         hi = storage.isUnsigned() ? 255 : 127;
  if (!clip.getMin() || !clip.getMax() ||
      clip.getMin()->convertToDouble() != lo ||
      clip.getMax()->convertToDouble() != hi) {
    why = "the requantized value is clipped to other bounds than its type's";
    return std::nullopt;
  }
  r.zeroPoint = *zp;
  r.storage = storage;
  r.result = narrow.getResult();
  return r;
}

/// Whether `v` is exactly an f32 value.
bool isF32Value(double v) {
  return static_cast<double>(static_cast<float>(v)) == v;
}


/// What one contraction looks like to the analysis.
struct Contraction {
  Operation *op;
  Value lhs, rhs, result;
  bool integerForm, floatForm;
  /// The importer's QLinearConv/ConvInteger convolve in f64: the i32
  /// operands are cast up, and the product needs no cast.
  bool wide = false;
  /// Output channels, and where they lie in the weight and the result
  /// (dimensions before the last).
  int64_t channels = 1, weightFromEnd = 0, resultFromEnd = 0;
  bool conv = false;
  /// A convolution's bias operand, or a matmul's added bias vector (null
  /// without one).
  Value bias;
  /// The matmul's B is a [N][K] weight transposed ([1, 0]): Gemm's transB.
  bool bTransposed = false;
};

std::optional<Contraction> contractionOf(Operation *op, std::string &why) {
  if (auto matmul = dyn_cast<kiln::MatmulOp>(op)) {
    Type element = getElementTypeOrSelf(matmul.getType());
    auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(matmul.getRhs().getType());
    Contraction c{matmul,
                  matmul.getLhs(),
                  matmul.getRhs(),
                  matmul.getResult(),
                  element.isInteger(32),
                  element.isF32()};
    c.channels = rhsType.getShape().back();
    if (!c.integerForm && !c.floatForm)
      return std::nullopt;
    if (rhsType.getRank() != 2 || lhsType.getRank() < 2) {
      if (c.integerForm)
        why = "B is not a [K][N] matrix";
      return std::nullopt;
    }
    // Gemm with transB: the [N][K] weight is K-major already, and its
    // per-column parameters lie along its dimension 0.
    if (auto t = c.rhs.getDefiningOp<kiln::TransposeOp>();
        t && t.getPermutation() == ArrayRef<int64_t>{1, 0}) {
      c.rhs = t.getInput();
      c.bTransposed = true;
      c.weightFromEnd = 1;
    }
    // A float bias vector added to the product (Gemm's C, dequantized):
    // the kernel adds it as int32 (recovered below).
    if (c.floatForm && c.result.hasOneUse())
      if (auto add = dyn_cast<kiln::AddOp>(*c.result.getUsers().begin())) {
        Value other = add.getLhs() == c.result ? add.getRhs() : add.getLhs();
        auto type = cast<RankedTensorType>(other.getType());
        bool alongN = type.getRank() >= 1 && type.hasStaticShape() &&
                      type.getNumElements() == type.getShape().back() &&
                      (type.getShape().back() == c.channels ||
                       type.getNumElements() == 1);
        if (alongN && add.getType() == c.result.getType() &&
            evaluateVector(other, c.channels)) {
          c.bias = other;
          c.result = add.getResult();
        }
      }
    return c;
  }
  auto conv = dyn_cast<kiln::ConvOp>(op);
  if (!conv)
    return std::nullopt;
  Type element = getElementTypeOrSelf(conv.getType());
  auto wType = cast<RankedTensorType>(conv->getOperand(1).getType());
  // The importer's integer convolutions are f64 convolutions of i32
  // values cast up (exact); QDQ ones are f32.
  Value lhs = conv->getOperand(0),
        rhs = peelFilterReshapes(conv->getOperand(1));
  // Canonicalization folds an 8-bit value's two casts (up to i32, then to
  // f64) into one when no zero point comes between: that cast is then the
  // operand's "cast up" itself.
  auto peel = [](Value v) -> Value {
    auto cast = v.getDefiningOp<kiln::CastOp>();
    Type from = cast ? getElementTypeOrSelf(cast.getInput()) : Type();
    if (from && from.isInteger(32))
      return cast.getInput();
    if (from && from.isInteger(8))
      return v;
    return Value();
  };
  Contraction c{conv, lhs, rhs, conv.getResult(), false, element.isF32()};
  if (element.isF64() && peel(lhs) && peel(rhs)) {
    c.lhs = peel(lhs), c.rhs = peel(rhs);
    c.integerForm = c.wide = true;
  }
  if (!c.integerForm && !c.floatForm)
    return std::nullopt;
  c.conv = true;
  if (conv->getNumOperands() > 2)
    c.bias = conv->getOperand(2);
  c.channels = wType.getShape().front();
  // [O][C][KH][KW] or, channels-last, [O][KH][KW][C]: O first either way.
  c.weightFromEnd = wType.getRank() - 1;
  // [N][O][H][W]: O; channels-last [N][H][W][O]: O last.
  c.resultFromEnd = conv.getDataFormat() == kiln::DataFormat::ChannelsLast
                        ? 0
                        : wType.getRank() - 2;
  return c;
}

/// Extends an fp8 chain by the QuantizeLinear to float8 its f32 result
/// alone feeds (through a Relu, if one comes first), as the importer
/// writes one with saturate = 1: `x / y_scale`
/// (one f32 constant), clipped to +-max of the type, cast to f8E4M3FN or
/// f8E5M2. The kernel then stores the float8 value (a saturating
/// round-to-nearest-even conversion, which is the clip and the cast).
void extendFp8Output(QuantizedChain &chain) {
  Value sum = chain.result;
  auto relu = dyn_cast_or_null<kiln::ReluOp>(single(sum));
  if (relu)
    sum = relu.getResult();
  auto div = dyn_cast_or_null<kiln::DivOp>(single(sum));
  if (!div || div.getLhs() != sum ||
      div->getBlock() != chain.contraction->getBlock())
    return;
  std::optional<double> scale = splatValue(div.getRhs());
  if (!scale || !isF32Value(*scale) || !(*scale > 0) || !std::isfinite(*scale))
    return;
  auto clip = dyn_cast_or_null<kiln::ClipOp>(single(div.getResult()));
  auto cast =
      clip ? dyn_cast_or_null<kiln::CastOp>(single(clip.getResult())) : nullptr;
  Type storage = cast ? getElementTypeOrSelf(cast.getResult()) : Type();
  if (!storage || !isFp8KernelType(storage))
    return;
  double max = isa<Float8E4M3FNType>(storage) ? 448.0 : 57344.0;
  if (!clip.getMin() || !clip.getMax() ||
      clip.getMin()->convertToDouble() != -max ||
      clip.getMax()->convertToDouble() != max)
    return;
  chain.outputScale = static_cast<float>(*scale);
  chain.relu = bool(relu);
  chain.outputStorage = storage;
  chain.result = cast.getResult();
}

/// The rest of matchQuantizedChain for float8 operands `a` and `b`: the
/// dequantized product in f32, its bias added, is the result.
std::optional<QuantizedChain> matchFp8Chain(const Contraction &c,
                                            const QuantizedOperand &a,
                                            const QuantizedOperand &b,
                                            std::string &why) {
  auto fail = [&](const std::string &reason) -> std::optional<QuantizedChain> {
    why = reason;
    return std::nullopt;
  };
  if (!isa<FloatType>(a.storage) || !isa<FloatType>(b.storage))
    return fail("A is " + typeName(a.storage) + " and B " +
                typeName(b.storage) +
                ": one kernel reads both in 8-bit "
                "integers or both in float8");
  for (Type t : {a.storage, b.storage})
    if (!isFp8KernelType(t))
      return fail("the fp8 kernel reads f8E4M3FN and f8E5M2 operands, not " +
                  typeName(t));
  if (!c.floatForm || !getElementTypeOrSelf(c.result.getType()).isF32())
    return fail("the float8 product is not computed in f32");
  for (const std::vector<double> *zps : {&a.zeroPoints, &b.zeroPoints})
    for (double z : *zps)
      if (z != 0)
        return fail("a float8 zero point is not 0");
  QuantizedChain chain;
  chain.contraction = c.op;
  chain.conv = c.conv;
  chain.fp8 = true;
  chain.channels = c.channels;
  chain.a = a.bytes;
  chain.b = b.bytes;
  chain.aStorage = a.storage;
  chain.bStorage = b.storage;
  chain.bTransposed = c.bTransposed;
  // The kernel scales the exact-product sum by a_scale * b_scale[n] (one
  // f32 product; the reference rounds each dequantized operand instead).
  if (!isF32Value(a.scales[0]))
    return fail("a scale is not an f32 value");
  for (double bScale : b.scales) {
    if (!isF32Value(bScale))
      return fail("a scale is not an f32 value");
    float m = static_cast<float>(a.scales[0]) * static_cast<float>(bScale);
    if (!(m > 0) || !std::isfinite(m))
      return fail("the dequantization scales are not finite and positive");
    chain.multipliers.push_back(m);
  }
  if (c.bias) {
    std::optional<std::vector<double>> values =
        evaluateVector(c.bias, c.channels);
    if (!values)
      return fail("the bias is not a constant");
    for (double v : *values) {
      if (!isF32Value(v))
        return fail("the bias is not an f32 vector");
      chain.floatBias.push_back(static_cast<float>(v));
    }
    if (chain.floatBias.size() == 1 && c.channels > 1)
      chain.floatBias.assign(c.channels, chain.floatBias[0]);
  }
  chain.requantized = false;
  chain.outputStorage = Float32Type::get(c.op->getContext());
  chain.result = c.result;
  chain.form = c.conv ? "QDQ fp8 conv" : "QDQ fp8";
  extendFp8Output(chain);
  return chain;
}

} // namespace

/// Extends a requantized int8 chain by the QDQ residual block its result
/// feeds, if it does (QuantizedChain::residual): the result's only use is
/// its dequantization (`cast, [sub zp], mul scale`), whose only use is an
/// add of another per-tensor dequantized 8-bit tensor R of the same shape,
/// then optionally a Relu, then a per-tensor quantization to 8 bits. The
/// chain is left as it is when anything differs.
static void extendResidual(QuantizedChain &chain) {
  if (chain.fp8 || !chain.requantized || chain.residual)
    return;
  // Forward from the result to the add: the dequantization's ops.
  Value side = chain.result;
  Operation *next = single(side);
  for (int i = 0;
       i < 3 && next && isa<kiln::CastOp, kiln::SubOp, kiln::MulOp>(next);
       ++i) {
    side = next->getResult(0);
    next = single(side);
  }
  // The block lies beside the contraction: not in a region another chain
  // formed (kiln-fuse-quantized: a ResNet downsample add's other branch
  // takes the add first and reads this chain's result from above).
  auto add = dyn_cast_or_null<kiln::AddOp>(next);
  if (!add || add.getLhs() == add.getRhs() ||
      add->getBlock() != chain.contraction->getBlock())
    return;
  Value other = add.getLhs() == side ? add.getRhs() : add.getLhs();
  std::string why;
  std::optional<QuantizedOperand> mine =
      matchOperand(side, /*floatForm=*/true, 1, "q", why);
  std::optional<QuantizedOperand> theirs =
      matchOperand(other, /*floatForm=*/true, 1, "R", why);
  if (!mine || !theirs || mine->bytes != chain.result ||
      mine->zeroPoints[0] != static_cast<double>(chain.outputZeroPoint) ||
      !isa<IntegerType>(theirs->storage))
    return;
  // R, the sum and the result all have the result's shape (no broadcast:
  // the kernel reads R with C's layout).
  auto shapeOf = [](Value v) {
    return cast<ShapedType>(v.getType()).getShape();
  };
  if (shapeOf(theirs->bytes) != shapeOf(chain.result) ||
      shapeOf(add.getResult()) != shapeOf(chain.result) ||
      !getElementTypeOrSelf(add.getResult()).isF32())
    return;
  Value sum = add.getResult();
  bool relu = false;
  if (auto r = dyn_cast_or_null<kiln::ReluOp>(single(sum))) {
    relu = true;
    sum = r.getResult();
  }
  std::optional<Requantize> q = matchRequantize(sum, /*floatForm=*/true, why);
  if (!q)
    return;
  double zr = theirs->zeroPoints[0];
  for (double v : {mine->scales[0], theirs->scales[0], q->scales[0], zr})
    if (!isF32Value(v) || !std::isfinite(v))
      return;
  if (!(mine->scales[0] > 0) || !(theirs->scales[0] > 0) ||
      !(q->scales[0] > 0) || zr != std::nearbyint(zr) ||
      zr < (theirs->storage.isUnsignedInteger() ? 0 : -128) ||
      zr > (theirs->storage.isUnsignedInteger() ? 255 : 127))
    return;
  QuantizedChain::Residual r;
  r.bytes = theirs->bytes;
  r.storage = theirs->storage;
  r.zeroPoint = static_cast<int64_t>(zr);
  r.scale = static_cast<float>(theirs->scales[0]);
  r.requantizedScale = static_cast<float>(mine->scales[0]);
  r.relu = relu;
  r.sumScale = static_cast<float>(q->scales[0]);
  r.sumZeroPoint = static_cast<int64_t>(q->zeroPoint);
  r.sumStorage = q->storage;
  chain.residual = r;
  chain.result = q->result;
}

bool isFp8KernelType(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

std::optional<QuantizedChain> matchQuantizedChain(Operation *op,
                                                  std::string &why) {
  why.clear();
  std::optional<Contraction> found = contractionOf(op, why);
  if (!found)
    return std::nullopt;
  const Contraction &c = *found;
  auto fail = [&](const std::string &reason) -> std::optional<QuantizedChain> {
    why = reason;
    return std::nullopt;
  };
  std::optional<QuantizedOperand> a =
      matchOperand(c.lhs, c.floatForm, 1, "A", why);
  std::optional<QuantizedOperand> b =
      a ? matchOperand(c.rhs, c.floatForm, c.channels, "B", why,
                       c.weightFromEnd, /*filter=*/c.conv)
        : std::nullopt;
  if (!a || !b) {
    // A float contraction whose A is not dequantized is no quantized
    // chain.
    if (!c.integerForm && !a)
      why.clear();
    return std::nullopt;
  }
  if (!b->bytes.getDefiningOp<ml_program::GlobalLoadConstOp>())
    return fail("B is not a constant weight (the kernel stores weights "
                "K-major at compile time)");
  if (isa<FloatType>(a->storage) || isa<FloatType>(b->storage))
    return matchFp8Chain(c, *a, *b, why);
  QuantizedChain chain;
  chain.contraction = c.op;
  chain.conv = c.conv;
  chain.channels = c.channels;
  chain.a = a->bytes;
  chain.b = b->bytes;
  chain.aStorage = a->storage;
  chain.bStorage = b->storage;
  chain.bTransposed = c.bTransposed;
  chain.aZeroPoint = static_cast<int64_t>(a->zeroPoints[0]);
  chain.bZeroPoints.clear();
  for (double z : b->zeroPoints)
    chain.bZeroPoints.push_back(static_cast<int64_t>(z));
  // The kernel adds an int32 bias to the accumulator. The importer folds
  // QLinearConv's (cast up: integral values) and a QDQ one (an int32
  // times a_scale * w_scale[o] in f32, which is recovered here and
  // checked to give back every folded value exactly).
  if (c.bias) {
    std::optional<std::vector<double>> values =
        evaluateVector(c.bias, c.channels);
    if (!values)
      return fail("the bias is not a constant");
    for (size_t o = 0; o < values->size(); ++o) {
      double v = (*values)[o];
      double q = v;
      if (c.floatForm) {
        float scale =
            static_cast<float>(a->scales[0]) *
            static_cast<float>(b->scales[b->scales.size() == 1 ? 0 : o]);
        q = std::nearbyint(v / scale);
        if (!(std::fabs(q) < 2147483648.0) ||
            static_cast<double>(static_cast<float>(q) * scale) != v)
          return fail("the bias is not an int32 dequantized with "
                      "a_scale * w_scale");
      } else if (v != std::nearbyint(v) || !(std::fabs(v) < 2147483648.0)) {
        return fail("the bias is not an int32 value");
      }
      chain.bias.push_back(static_cast<int32_t>(q));
    }
    if (chain.bias.size() == 1 && c.channels > 1)
      chain.bias.assign(c.channels, chain.bias[0]);
  }
  std::optional<Requantize> r = matchRequantize(
      c.result, c.floatForm, why, c.wide, c.channels, c.resultFromEnd);
  if (!r && !why.empty())
    return std::nullopt;
  if (c.floatForm && !r)
    return fail("the product is not quantized");
  // The kernel's f32 multipliers: onnxruntime's (a * b) / y in f32 for
  // QDQ (what its QDQ -> QLinear fusions compute); the importer's f32
  // products for QLinearMatMul/QLinearConv, carried in f64.
  if (r && c.floatForm) {
    if (!isF32Value(a->scales[0]) || !isF32Value(r->scales[0]))
      return fail("a scale is not an f32 value");
    for (double bScale : b->scales) {
      if (!isF32Value(bScale))
        return fail("a scale is not an f32 value");
      float ab = static_cast<float>(a->scales[0]) * static_cast<float>(bScale);
      chain.multipliers.push_back(ab / static_cast<float>(r->scales[0]));
    }
  } else if (r) {
    for (double m : r->scales) {
      if (!isF32Value(m))
        return fail("the requantize scale is not an f32 value");
      chain.multipliers.push_back(static_cast<float>(m));
    }
  }
  for (float m : chain.multipliers)
    if (!(m > 0) || !std::isfinite(m))
      return fail("the requantize scale is not finite and positive");
  chain.requantized = bool(r);
  if (r) {
    chain.outputStorage = r->storage;
    chain.outputZeroPoint = static_cast<int64_t>(r->zeroPoint);
    chain.result = r->result;
  } else {
    chain.outputStorage = IntegerType::get(op->getContext(), 32);
    chain.result = c.result;
    // ConvInteger: the f64 product's cast to i32 is the output.
    if (c.wide) {
      auto narrow = c.result.hasOneUse()
                        ? dyn_cast<kiln::CastOp>(*c.result.getUsers().begin())
                        : kiln::CastOp();
      if (!narrow || !getElementTypeOrSelf(narrow.getResult()).isInteger(32))
        return fail("the integer convolution is neither requantized nor "
                    "cast to int32");
      chain.result = narrow.getResult();
    }
  }
  chain.form = c.floatForm ? (c.conv ? "QDQ conv" : "QDQ")
               : r         ? (c.conv ? "QLinearConv" : "QLinearMatMul")
                           : (c.conv ? "ConvInteger" : "MatMulInteger");
  extendResidual(chain);
  return chain;
}

SmallVector<Operation *> chainOps(const QuantizedChain &chain) {
  // Back from the result to the 8-bit operands: the chain and what computes
  // its constants (a matched chain's other inputs are constants).
  SmallVector<Operation *> cone;
  llvm::SmallPtrSet<Operation *, 16> seen;
  SmallVector<Value> work{chain.result};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == chain.a || v == chain.b ||
        (chain.residual && v == chain.residual->bytes))
      continue;
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != chain.contraction->getBlock() ||
        !seen.insert(def).second)
      continue;
    cone.push_back(def);
    llvm::append_range(work, def->getOperands());
  }
  llvm::sort(cone, [](Operation *x, Operation *y) {
    return x->isBeforeInBlock(y);
  });
  return cone;
}

std::string describeChain(const QuantizedChain &c) {
  std::string s;
  llvm::raw_string_ostream os(s);
  // "scale 1.0e-03 (f32)", or "scale per column (N, lo to hi) (f32)".
  auto scale = [&] {
    auto scientific = [](float v) {
      return llvm::formatv("{0:e}", static_cast<double>(v)).str();
    };
    const std::vector<float> &m = c.multipliers;
    os << "scale ";
    if (m.size() == 1) {
      os << scientific(m[0]);
    } else {
      auto [lo, hi] = std::minmax_element(m.begin(), m.end());
      os << "per column (" << m.size() << ", " << scientific(*lo) << " to "
         << scientific(*hi) << ")";
    }
    os << " (f32)";
  };
  if (c.fp8) {
    os << "(" << c.form << (c.floatBias.empty() ? "" : ", f32 bias") << "): A "
       << typeName(c.aStorage) << ", B " << typeName(c.bStorage)
       << " constant, ";
    scale();
    os << ", output " << typeName(c.outputStorage);
    if (c.outputScale != 1.0f)
      os << (c.relu ? " (Relu and QuantizeLinear fused, y_scale "
                    : " (QuantizeLinear fused, y_scale ")
         << llvm::formatv("{0:e}", static_cast<double>(c.outputScale)).str()
         << ")";
    return s;
  }
  os << "(" << c.form << (c.bias.empty() ? "" : ", int32 bias") << "): A "
     << typeName(c.aStorage) << " zero point " << c.aZeroPoint << ", B "
     << typeName(c.bStorage) << " constant, zero point ";
  const std::vector<int64_t> &zb = c.bZeroPoints;
  if (std::all_of(zb.begin(), zb.end(), [&](int64_t z) { return z == zb[0]; }))
    os << zb[0];
  else
    os << "per column";
  if (c.requantized) {
    os << ", ";
    scale();
    os << ", output " << typeName(c.outputStorage) << " zero point "
       << c.outputZeroPoint;
    if (const std::optional<QuantizedChain::Residual> &r = c.residual)
      os << "; + residual " << typeName(r->storage) << " zero point "
         << r->zeroPoint << (r->relu ? ", Relu" : "") << ", sum "
         << typeName(r->sumStorage) << " zero point " << r->sumZeroPoint;
  } else {
    os << ", output i32";
  }
  return s;
}

} // namespace kiln

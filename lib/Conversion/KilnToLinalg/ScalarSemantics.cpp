//===- ScalarSemantics.cpp - What each elementwise kiln op computes -------===//
//
// The element-level meaning of every elementwise kiln op, in arith and math
// ops (ScalarSemantics.h). The linalg lowering and the template epilogues
// both build from here; nothing else defines what an op computes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToLinalg/ScalarSemantics.h"

#include "Float8Conversion.h"
#include "LoweringUtils.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {


/// Scalar helpers over one element type.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;
  Type type;
  /// The operands are unsigned integers (carried as signless ones of the same
  /// width inside the generic's body).
  bool isUnsigned = false;

  bool isFloat() const { return isa<FloatType>(type); }
  Value constant(double v) const { return scalarConstant(b, loc, type, v); }
  Value add(Value x, Value y) const {
    return isFloat() ? Value(arith::AddFOp::create(b, loc, x, y))
                     : Value(arith::AddIOp::create(b, loc, x, y));
  }
  Value sub(Value x, Value y) const {
    return isFloat() ? Value(arith::SubFOp::create(b, loc, x, y))
                     : Value(arith::SubIOp::create(b, loc, x, y));
  }
  Value mul(Value x, Value y) const {
    return isFloat() ? Value(arith::MulFOp::create(b, loc, x, y))
                     : Value(arith::MulIOp::create(b, loc, x, y));
  }
  Value div(Value x, Value y) const {
    return arith::DivFOp::create(b, loc, x, y);
  }
  Value max(Value x, Value y) const {
    if (isFloat())
      return arith::MaximumFOp::create(b, loc, x, y);
    if (isUnsigned)
      return arith::MaxUIOp::create(b, loc, x, y);
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value min(Value x, Value y) const {
    if (isFloat())
      return arith::MinimumFOp::create(b, loc, x, y);
    if (isUnsigned)
      return arith::MinUIOp::create(b, loc, x, y);
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value select(Value c, Value x, Value y) const {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value cmp(arith::CmpFPredicate f, arith::CmpIPredicate i, Value x,
            Value y) const {
    if (isFloat())
      return arith::CmpFOp::create(b, loc, f, x, y);
    if (isUnsigned) {
      using CI = arith::CmpIPredicate;
      switch (i) {
      case CI::slt:
        i = CI::ult;
        break;
      case CI::sle:
        i = CI::ule;
        break;
      case CI::sgt:
        i = CI::ugt;
        break;
      case CI::sge:
        i = CI::uge;
        break;
      default:
        break;
      }
    }
    return arith::CmpIOp::create(b, loc, i, x, y);
  }
  Value exp(Value x) const { return math::ExpOp::create(b, loc, x); }
  /// 1 / (1 + e^-x)
  Value sigmoid(Value x) const {
    Value one = constant(1);
    return div(one, add(one, exp(arith::NegFOp::create(b, loc, x))));
  }
};

/// x^e for integers by binary exponentiation, unrolled over the exponent's
/// bits (wrapping like repeated multiplication): math.ipowi has no NVVM
/// lowering, and a pow through f64 calls libdevice functions. A negative
/// exponent gives the truncated real result: 1 for x = 1, +-1 for x = -1, 0
/// otherwise.
Value integerPow(const ScalarBuilder &s, Value x, Value e) {
  OpBuilder &b = s.b;
  Location loc = s.loc;
  unsigned width = x.getType().getIntOrFloatBitWidth();
  Value one = s.constant(1), zero = s.constant(0);
  Value result = one, square = x;
  for (unsigned bit = 0; bit < width; ++bit) {
    Value set = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(
            b, loc, arith::ShRUIOp::create(b, loc, e, s.constant(bit)), one),
        zero);
    result = s.select(set, s.mul(result, square), result);
    if (bit + 1 < width)
      square = s.mul(square, square);
  }
  if (s.isUnsigned)
    return result;
  Value minusOne = s.constant(-1);
  Value odd =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                            arith::AndIOp::create(b, loc, e, one), zero);
  Value negative = s.select(
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, one), one,
      s.select(
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, minusOne),
          s.select(odd, minusOne, one), zero));
  return s.select(
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, e, zero),
      negative, result);
}

/// `x << amount` or `x >> amount` (logical for unsigned, arithmetic for
/// signed) with kiln's rule for amounts outside [0, width): the bits all
/// shift out (0, or -1 for a negative signed `x` shifted right). arith's
/// shifts are poison there, and PTX clamps the amount instead.
Value emitShift(const ScalarBuilder &s, Value x, Value amount, bool left) {
  OpBuilder &b = s.b;
  Location loc = s.loc;
  unsigned width = x.getType().getIntOrFloatBitWidth();
  Value widthValue = s.constant(width);
  // Unsigned compare: a negative signed amount is a huge unsigned one.
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        amount, widthValue);
  Value zero = s.constant(0);
  Value safeAmount = s.select(inRange, amount, zero);
  if (left)
    return s.select(inRange, arith::ShLIOp::create(b, loc, x, safeAmount),
                    zero);
  if (s.isUnsigned)
    return s.select(inRange, arith::ShRUIOp::create(b, loc, x, safeAmount),
                    zero);
  Value fill = arith::ShRSIOp::create(b, loc, x, s.constant(width - 1));
  return s.select(inRange, arith::ShRSIOp::create(b, loc, x, safeAmount),
                  fill);
}

/// Result element of one elementwise kiln op, given its operands' elements
/// (signless; `isUnsigned` says the integers are unsigned).
Value emitScalar(Operation *op, OpBuilder &b, Location loc, ValueRange args,
                 bool isUnsigned) {
  Type type = args.front().getType();
  ScalarBuilder s{b, loc, type, isUnsigned};
  Value x = args.front();
  using CF = arith::CmpFPredicate;
  using CI = arith::CmpIPredicate;
  return llvm::TypeSwitch<Operation *, Value>(op)
      // Unary.
      .Case([&](NegOp) {
        return s.isFloat() ? Value(arith::NegFOp::create(b, loc, x))
                           : s.sub(s.constant(0), x);
      })
      .Case([&](AbsOp) -> Value {
        if (s.isFloat())
          return math::AbsFOp::create(b, loc, x);
        if (s.isUnsigned)
          return x;
        // select(x < 0, 0 - x, x): math.absi has no NVVM lowering.
        Value negative = s.cmp(CF::OLT, CI::slt, x, s.constant(0));
        return s.select(negative, s.sub(s.constant(0), x), x);
      })
      .Case([&](ExpOp) { return s.exp(x); })
      .Case([&](LogOp) { return math::LogOp::create(b, loc, x); })
      .Case([&](SqrtOp) { return math::SqrtOp::create(b, loc, x); })
      .Case([&](RsqrtOp) { return math::RsqrtOp::create(b, loc, x); })
      .Case([&](ReciprocalOp) { return s.div(s.constant(1), x); })
      .Case([&](TanhOp) { return math::TanhOp::create(b, loc, x); })
      .Case([&](SigmoidOp) { return s.sigmoid(x); })
      .Case([&](ErfOp) { return math::ErfOp::create(b, loc, x); })
      .Case([&](SinOp) { return math::SinOp::create(b, loc, x); })
      .Case([&](CosOp) { return math::CosOp::create(b, loc, x); })
      .Case([&](AsinOp) { return math::AsinOp::create(b, loc, x); })
      .Case([&](AcosOp) { return math::AcosOp::create(b, loc, x); })
      .Case([&](AtanOp) { return math::AtanOp::create(b, loc, x); })
      .Case([&](SinhOp) { return math::SinhOp::create(b, loc, x); })
      .Case([&](CoshOp) { return math::CoshOp::create(b, loc, x); })
      .Case([&](AsinhOp) { return math::AsinhOp::create(b, loc, x); })
      .Case([&](AcoshOp) { return math::AcoshOp::create(b, loc, x); })
      .Case([&](AtanhOp) { return math::AtanhOp::create(b, loc, x); })
      .Case([&](FloorOp) { return math::FloorOp::create(b, loc, x); })
      .Case([&](CeilOp) { return math::CeilOp::create(b, loc, x); })
      .Case([&](RoundOp) { return math::RoundEvenOp::create(b, loc, x); })
      .Case([&](SignOp) {
        Value zero = s.constant(0);
        Value positive = s.cmp(CF::OGT, CI::sgt, x, zero);
        Value negative = s.cmp(CF::OLT, CI::slt, x, zero);
        return s.select(positive, s.constant(1),
                        s.select(negative, s.constant(-1), zero));
      })
      .Case([&](NotOp) {
        return arith::XOrIOp::create(b, loc, x, s.constant(1));
      })
      .Case([&](BitwiseNotOp) {
        return arith::XOrIOp::create(b, loc, x, s.constant(-1));
      })
      .Case([&](ReluOp) {
        // max(x, 0) that propagates NaN, as PyTorch and ONNX Runtime do.
        return s.max(x, s.constant(0));
      })
      .Case([&](SoftplusOp) {
        // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): no overflow for large x.
        Value absX = math::AbsFOp::create(b, loc, x);
        Value tail = math::Log1pOp::create(
            b, loc, s.exp(arith::NegFOp::create(b, loc, absX)));
        return s.add(arith::MaximumFOp::create(b, loc, x, s.constant(0)), tail);
      })
      .Case([&](HardSwishOp) {
        Value gate =
            s.min(s.max(s.add(s.mul(x, s.constant(1.0 / 6)), s.constant(0.5)),
                        s.constant(0)),
                  s.constant(1));
        return s.mul(x, gate);
      })
      .Case([&](LeakyReluOp leaky) {
        Value scaled = s.mul(x, s.constant(leaky.getAlpha().convertToDouble()));
        return s.select(s.cmp(CF::OGE, CI::sge, x, s.constant(0)), x, scaled);
      })
      .Case([&](EluOp elu) {
        Value expm1 = math::ExpM1Op::create(b, loc, x);
        Value negative =
            s.mul(expm1, s.constant(elu.getAlpha().convertToDouble()));
        return s.select(s.cmp(CF::OGE, CI::sge, x, s.constant(0)), x, negative);
      })
      .Case([&](GeluOp gelu) {
        Value half = s.constant(0.5), one = s.constant(1);
        Value inner;
        if (gelu.getTanh()) {
          // tanh(sqrt(2 / pi) * (x + 0.044715 x^3))
          Value cube = s.mul(s.mul(x, x), x);
          Value poly = s.add(x, s.mul(cube, s.constant(0.044715)));
          inner = math::TanhOp::create(
              b, loc, s.mul(poly, s.constant(std::sqrt(2.0 / M_PI))));
        } else {
          inner = math::ErfOp::create(b, loc, s.mul(x, s.constant(M_SQRT1_2)));
        }
        return s.mul(s.mul(x, half), s.add(one, inner));
      })
      .Case([&](HardSigmoidOp hs) {
        Value linear =
            s.add(s.mul(x, s.constant(hs.getAlpha().convertToDouble())),
                  s.constant(hs.getBeta().convertToDouble()));
        return s.min(s.max(linear, s.constant(0)), s.constant(1));
      })
      .Case([&](ClipOp clip) {
        Value y = x;
        if (std::optional<APFloat> lo = clip.getMin())
          y = s.max(y, s.constant(lo->convertToDouble()));
        if (std::optional<APFloat> hi = clip.getMax())
          y = s.min(y, s.constant(hi->convertToDouble()));
        return y;
      })
      // Binary.
      .Case([&](AddOp) { return s.add(x, args[1]); })
      .Case([&](SubOp) { return s.sub(x, args[1]); })
      .Case([&](MulOp) { return s.mul(x, args[1]); })
      .Case([&](DivOp) -> Value {
        if (s.isFloat())
          return s.div(x, args[1]);
        if (s.isUnsigned)
          return arith::DivUIOp::create(b, loc, x, args[1]);
        return arith::DivSIOp::create(b, loc, x, args[1]);
      })
      .Case([&](PowOp) -> Value {
        if (s.isFloat())
          return math::PowFOp::create(b, loc, x, args[1]);
        return integerPow(s, x, args[1]);
      })
      .Case([&](MaxOp) { return s.max(x, args[1]); })
      .Case([&](MinOp) { return s.min(x, args[1]); })
      .Case([&](ModOp mod) -> Value {
        if (s.isFloat())
          return arith::RemFOp::create(b, loc, x, args[1]);
        if (s.isUnsigned) // both conventions agree on non-negative operands
          return arith::RemUIOp::create(b, loc, x, args[1]);
        Value rem = arith::RemSIOp::create(b, loc, x, args[1]);
        if (mod.getFmod())
          return rem;
        // Python semantics: the remainder takes the divisor's sign.
        Value zero = s.constant(0);
        Value nonZero = s.cmp(CF::ONE, CI::ne, rem, zero);
        Value signsDiffer =
            s.cmp(CF::ONE, CI::ne, s.cmp(CF::OLT, CI::slt, rem, zero),
                  s.cmp(CF::OLT, CI::slt, args[1], zero));
        Value fix = arith::AndIOp::create(b, loc, nonZero, signsDiffer);
        return s.select(fix, s.add(rem, args[1]), rem);
      })
      .Case([&](AndOp) { return arith::AndIOp::create(b, loc, x, args[1]); })
      .Case([&](OrOp) { return arith::OrIOp::create(b, loc, x, args[1]); })
      .Case([&](XorOp) { return arith::XOrIOp::create(b, loc, x, args[1]); })
      .Case([&](BitwiseAndOp) {
        return arith::AndIOp::create(b, loc, x, args[1]);
      })
      .Case([&](BitwiseOrOp) {
        return arith::OrIOp::create(b, loc, x, args[1]);
      })
      .Case([&](BitwiseXorOp) {
        return arith::XOrIOp::create(b, loc, x, args[1]);
      })
      .Case([&](ShiftLeftOp) { return emitShift(s, x, args[1], true); })
      .Case([&](ShiftRightOp) { return emitShift(s, x, args[1], false); })
      .Case([&](EqualOp) { return s.cmp(CF::OEQ, CI::eq, x, args[1]); })
      .Case([&](LessOp) { return s.cmp(CF::OLT, CI::slt, x, args[1]); })
      .Case([&](LessEqualOp) { return s.cmp(CF::OLE, CI::sle, x, args[1]); })
      .Case([&](GreaterOp) { return s.cmp(CF::OGT, CI::sgt, x, args[1]); })
      .Case([&](GreaterEqualOp) { return s.cmp(CF::OGE, CI::sge, x, args[1]); })
      .Case([&](SelectOp) { return s.select(x, args[1], args[2]); })
      .Default([](Operation *) { return Value(); });
}

/// Converts a scalar between element types with kiln.cast's rules. Integers
/// are signless here; `fromUnsigned` and `toUnsigned` give their signedness.
Value emitCast(OpBuilder &b, Location loc, Value x, Type to,
               bool fromUnsigned = false, bool toUnsigned = false) {
  Type from = x.getType();
  if (from == to)
    return x;
  // float8 is a storage type: every conversion goes through f32, as ONNX's
  // reference does (a wider source rounds to f32 first).
  if (isFloat8StorageType(from))
    return emitCast(b, loc, emitFloat8ToF32(b, loc, x), to,
                    /*fromUnsigned=*/false, toUnsigned);
  if (isFloat8StorageType(to)) {
    Value wide = emitCast(b, loc, x, b.getF32Type(), fromUnsigned);
    return emitF32ToFloat8(b, loc, wide, cast<FloatType>(to));
  }
  auto fromF = dyn_cast<FloatType>(from), toF = dyn_cast<FloatType>(to);
  // f16 <-> bf16 (same width, neither holds the other): through f32, which
  // holds both, so the one rounding is the final truncation's.
  if (fromF && toF && fromF.getWidth() == toF.getWidth())
    return arith::TruncFOp::create(
        b, loc, to, arith::ExtFOp::create(b, loc, b.getF32Type(), x));
  if (fromF && toF)
    return fromF.getWidth() < toF.getWidth()
               ? Value(arith::ExtFOp::create(b, loc, to, x))
               : Value(arith::TruncFOp::create(b, loc, to, x));
  if (to.isInteger(1)) {
    Value zero = scalarConstant(b, loc, from, 0);
    return fromF ? Value(arith::CmpFOp::create(
                       b, loc, arith::CmpFPredicate::UNE, x, zero))
                 : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                               x, zero));
  }
  bool fromBool = from.isInteger(1);
  bool zeroExtend = fromBool || fromUnsigned;
  if (toF)
    return zeroExtend ? Value(arith::UIToFPOp::create(b, loc, to, x))
                      : Value(arith::SIToFPOp::create(b, loc, to, x));
  if (fromF)
    return toUnsigned ? Value(arith::FPToUIOp::create(b, loc, to, x))
                      : Value(arith::FPToSIOp::create(b, loc, to, x));
  unsigned fromWidth = from.getIntOrFloatBitWidth(),
           toWidth = to.getIntOrFloatBitWidth();
  if (fromWidth < toWidth)
    return zeroExtend ? Value(arith::ExtUIOp::create(b, loc, to, x))
                      : Value(arith::ExtSIOp::create(b, loc, to, x));
  return arith::TruncIOp::create(b, loc, to, x);
}


} // namespace

Value kiln::buildScalarCast(OpBuilder &b, Location loc, Value x, Type to,
                            bool fromUnsigned, bool toUnsigned) {
  return emitCast(b, loc, x, to, fromUnsigned, toUnsigned);
}

Value kiln::buildRoundToTf32(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i32, v);
  };
  Value lsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, constant(13)), constant(1));
  Value sum = arith::AddIOp::create(
      b, loc, bits, arith::AddIOp::create(b, loc, lsb, constant(0xfff)));
  Value cleared = arith::AndIOp::create(
      b, loc, sum, constant(static_cast<int32_t>(0xffffe000u)));
  Value isNan =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  return arith::SelectOp::create(
      b, loc, isNan, x, arith::BitcastOp::create(b, loc, x.getType(), cleared));
}

Value kiln::buildScalar(Operation *op, OpBuilder &b, Location loc,
                        ValueRange args, bool isUnsigned) {
  if (auto cast = dyn_cast<CastOp>(op)) {
    Type to = getElementTypeOrSelf(cast.getType());
    bool toUnsigned = to.isUnsignedInteger();
    if (toUnsigned)
      to = IntegerType::get(b.getContext(), to.getIntOrFloatBitWidth());
    return emitCast(b, loc, args.front(), to, isUnsigned, toUnsigned);
  }
  if (auto norm = dyn_cast<BatchNormOp>(op)) {
    // (x - mean) * rsqrt(variance + epsilon) * scale + bias.
    Type type = args[4].getType();
    Value invStd = math::RsqrtOp::create(
        b, loc,
        arith::AddFOp::create(
            b, loc, args[4],
            scalarConstant(b, loc, type, norm.getEpsilon().convertToDouble())));
    Value centred = arith::SubFOp::create(b, loc, args[0], args[3]);
    Value scaled = arith::MulFOp::create(
        b, loc, arith::MulFOp::create(b, loc, centred, invStd), args[1]);
    return arith::AddFOp::create(b, loc, scaled, args[2]);
  }
  return emitScalar(op, b, loc, args, isUnsigned);
}

//===- Float8Conversion.cpp - float8 <-> f32 by integer bit manipulation --===//
//
// The conversions are branch-free i32 arithmetic on the bit patterns, checked
// bit for bit against ONNX's reference (test/e2e/float8_cast.py). The one
// rounding is round to nearest even on the f32 mantissa bits the float8
// code drops; subnormal results shift the implicit bit in, and a carry out
// of the mantissa moves into the exponent as it should.
//
//===----------------------------------------------------------------------===//

#include "Float8Conversion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cassert>
#include <cmath>

using namespace mlir;

namespace kiln::lowering {

namespace {

/// The layout of a float8 type and where its special values live.
struct Float8Format {
  unsigned mantissaBits;
  int bias;
  /// The largest finite magnitude's code (sign bit clear).
  int32_t maxCode;
  enum Kind { FiniteOnly, Ieee, UnsignedZero } kind;
};

Float8Format formatOf(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return {3, 7, 0x7E, Float8Format::FiniteOnly};
  if (isa<Float8E4M3FNUZType>(type))
    return {3, 8, 0x7F, Float8Format::UnsignedZero};
  if (isa<Float8E5M2Type>(type))
    return {2, 15, 0x7B, Float8Format::Ieee};
  assert(isa<Float8E5M2FNUZType>(type) && "not a float8 storage type");
  return {2, 16, 0x7F, Float8Format::UnsignedZero};
}

/// i32 arithmetic with short names; the bit twiddling reads better so.
struct I32Ops {
  OpBuilder &b;
  Location loc;

  Value c(int64_t v) const {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value add(Value x, Value y) const {
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value sub(Value x, Value y) const {
    return arith::SubIOp::create(b, loc, x, y);
  }
  Value band(Value x, Value y) const {
    return arith::AndIOp::create(b, loc, x, y);
  }
  Value bor(Value x, Value y) const {
    return arith::OrIOp::create(b, loc, x, y);
  }
  Value shl(Value x, Value y) const {
    return arith::ShLIOp::create(b, loc, x, y);
  }
  Value shr(Value x, Value y) const {
    return arith::ShRUIOp::create(b, loc, x, y);
  }
  Value max(Value x, Value y) const {
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value min(Value x, Value y) const {
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) const {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value cond, Value x, Value y) const {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
};

} // namespace

bool isFloat8StorageType(Type type) {
  return isa<Float8E4M3FNType>(type) || isa<Float8E4M3FNUZType>(type) ||
         isa<Float8E5M2Type>(type) || isa<Float8E5M2FNUZType>(type);
}

Value emitFloat8ToF32(OpBuilder &b, Location loc, Value x) {
  using P = arith::CmpIPredicate;
  Float8Format f = formatOf(x.getType());
  I32Ops i{b, loc};
  Value code = arith::ExtUIOp::create(
      b, loc, b.getI32Type(),
      arith::BitcastOp::create(b, loc, b.getIntegerType(8), x));
  Value sign = i.shl(i.band(code, i.c(0x80)), i.c(24));
  Value magnitude = i.band(code, i.c(0x7F));
  Value exponent = i.shr(magnitude, i.c(f.mantissaBits));
  Value mantissa = i.band(magnitude, i.c((1 << f.mantissaBits) - 1));
  // Normal: rebias the exponent, left-align the mantissa.
  Value normal =
      i.bor(i.shl(i.add(exponent, i.c(127 - f.bias)), i.c(23)),
            i.shl(mantissa, i.c(23 - f.mantissaBits)));
  // Subnormal: mantissa * 2^(1 - bias - M), exact in f32.
  Value scaled = arith::MulFOp::create(
      b, loc, arith::UIToFPOp::create(b, loc, b.getF32Type(), mantissa),
      arith::ConstantOp::create(
          b, loc,
          b.getF32FloatAttr(std::ldexp(1.0, 1 - f.bias -
                                                static_cast<int>(
                                                    f.mantissaBits)))));
  Value subnormal = arith::BitcastOp::create(b, loc, b.getI32Type(), scaled);
  Value bits = i.bor(
      i.select(i.cmp(P::eq, exponent, i.c(0)), subnormal, normal), sign);
  Value nan = i.c(0x7FC00000);
  switch (f.kind) {
  case Float8Format::FiniteOnly:
    bits = i.select(i.cmp(P::eq, magnitude, i.c(0x7F)), nan, bits);
    break;
  case Float8Format::Ieee:
    bits = i.select(i.cmp(P::eq, magnitude, i.c(0x7C)),
                    i.bor(i.c(0x7F800000), sign), bits);
    bits = i.select(i.cmp(P::ugt, magnitude, i.c(0x7C)), nan, bits);
    break;
  case Float8Format::UnsignedZero:
    bits = i.select(i.cmp(P::eq, code, i.c(0x80)), nan, bits);
    break;
  }
  return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
}

Value emitF32ToFloat8(OpBuilder &b, Location loc, Value x, FloatType to) {
  using P = arith::CmpIPredicate;
  Float8Format f = formatOf(to);
  I32Ops i{b, loc};
  int32_t dropped = 23 - static_cast<int32_t>(f.mantissaBits);
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), x);
  Value sign = i.shr(bits, i.c(31));
  Value magnitude = i.band(bits, i.c(0x7FFFFFFF));
  Value exponent = i.shr(magnitude, i.c(23));
  Value mantissa = i.bor(i.band(magnitude, i.c(0x7FFFFF)), i.c(0x800000));
  // The float8 exponent; below 1 the result is subnormal and the implicit
  // bit shifts in. A shift of 25 drops every bit of the 24-bit mantissa
  // and its rounding bit: everything smaller is zero.
  Value exponent8 = i.sub(exponent, i.c(127 - f.bias));
  Value clamped = i.max(exponent8, i.c(1));
  Value shift =
      i.min(i.add(i.c(dropped), i.sub(clamped, exponent8)), i.c(25));
  Value result = i.add(i.shl(i.sub(clamped, i.c(1)), i.c(f.mantissaBits)),
                       i.shr(mantissa, shift));
  // Round to nearest even: up when the first dropped bit is set and either a
  // later one is or the kept lsb is odd.
  Value roundBit = i.band(i.shr(mantissa, i.sub(shift, i.c(1))), i.c(1));
  Value stickyMask = i.sub(i.shl(i.c(1), i.sub(shift, i.c(1))), i.c(1));
  Value sticky = arith::ExtUIOp::create(
      b, loc, b.getI32Type(),
      i.cmp(P::ne, i.band(mantissa, stickyMask), i.c(0)));
  Value odd = i.band(result, i.c(1));
  result = i.add(result, i.band(roundBit, i.bor(sticky, odd)));
  // Infinities come here too: exponent 255 overflows every format.
  Value overflow = i.cmp(P::sgt, result, i.c(f.maxCode));
  Value isNan = i.cmp(P::ugt, magnitude, i.c(0x7F800000));
  Value signBit = i.shl(sign, i.c(7));
  switch (f.kind) {
  case Float8Format::FiniteOnly:
    result = i.select(i.bor(overflow, isNan), i.c(0x7F), result);
    result = i.bor(result, signBit);
    break;
  case Float8Format::Ieee:
    result = i.select(overflow, i.c(0x7C), result);
    result = i.select(isNan, i.c(0x7F), result);
    result = i.bor(result, signBit);
    break;
  case Float8Format::UnsignedZero:
    // No negative zero; one NaN, 0x80, for NaN and overflow alike.
    result = i.select(i.cmp(P::eq, result, i.c(0)), result,
                      i.bor(result, signBit));
    result = i.select(i.bor(overflow, isNan), i.c(0x80), result);
    break;
  }
  Value byte = arith::TruncIOp::create(b, loc, b.getIntegerType(8), result);
  return arith::BitcastOp::create(b, loc, to, byte);
}

} // namespace kiln::lowering

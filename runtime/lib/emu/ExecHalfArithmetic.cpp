//===- ExecHalfArithmetic.cpp - f16, bf16, f16x2 and bf16x2 arithmetic ----===//
//
// Each half on its own: operands widen exactly to double, sums are rounded
// to odd there (TwoSum) and the result is rounded once to the 16-bit format,
// so every result is correctly rounded. Round to nearest without modifiers
// takes a faster path through an f32 rounded to odd.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

namespace kiln::runtime::emu::detail {

bool BlockRunner::halfArithmetic(uint64_t *r, const Instruction &in,
                                 uint32_t exec) {
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  const uint64_t *a = in.numSrc > 0 ? slot(in.src[0]) : nullptr;
  const uint64_t *b = in.numSrc > 1 ? slot(in.src[1]) : nullptr;
  const uint64_t *c = in.numSrc > 2 ? slot(in.src[2]) : nullptr;
  const bool bf = in.type == Type::BF16 || in.type == Type::BF16x2;
  const unsigned halves =
      in.type == Type::F16x2 || in.type == Type::BF16x2 ? 2 : 1;
  const Format format = bf ? kBf16 : kHalf;
  const uint16_t exponentMask = bf ? 0x7f80u : 0x7c00u;
  const Rounding rounding =
      in.rounding == Rounding::None ? Rounding::Rn : in.rounding;
  auto decode = [&](uint16_t h) -> double {
    if (in.ftz && (h & exponentMask) == 0)
      h &= 0x8000u;
    return bf ? bf16ToFloat(h) : halfToFloat(h);
  };
  // Round to nearest without modifiers (the common case): the double is
  // rounded to odd as an f32 (still enough bits for a correct second
  // rounding), then to 16 bits with the bit-level conversions.
  const bool fast = rounding == Rounding::Rn && !in.sat && !in.relu && !in.ftz;
  auto encode = [&](double v) -> uint16_t {
    if (fast) {
      float f = static_cast<float>(v);
      if (std::isfinite(f) && static_cast<double>(f) != v && !(toBits(f) & 1))
        f = std::nextafter(f, v > f ? std::numeric_limits<float>::infinity()
                                    : -std::numeric_limits<float>::infinity());
      return bf ? floatToBf16(f) : floatToHalf(f);
    }
    if (in.sat)
      v = saturate01(v);
    if (in.relu && v < 0)
      v = 0;
    uint16_t h = static_cast<uint16_t>(roundToFormat(v, format, rounding));
    if (in.ftz && (h & exponentMask) == 0)
      h &= 0x8000u;
    return h;
  };
  // Products of two halves are exact in a double; sums are rounded to odd
  // first, so the one rounding to the narrow format is correct. Each op
  // gets its own lane loop.
  auto apply = [&](auto &&one) {
    forLanes(exec, [&](unsigned l) {
      uint64_t result = 0;
      for (unsigned h = 0; h < halves; ++h) {
        unsigned shift = 16 * h;
        uint16_t x = static_cast<uint16_t>(a[l] >> shift);
        uint16_t y = b ? static_cast<uint16_t>(b[l] >> shift) : 0;
        uint16_t z = c ? static_cast<uint16_t>(c[l] >> shift) : 0;
        result |= static_cast<uint64_t>(one(x, y, z)) << shift;
      }
      d[l] = result;
    });
    return true;
  };
  auto unary = [&](double (*f)(double)) {
    return apply(
        [&](uint16_t x, uint16_t, uint16_t) { return encode(f(decode(x))); });
  };
  switch (in.op) {
  case Op::Add:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(roundOddSum(decode(x), decode(y)));
    });
  case Op::Sub:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(roundOddSum(decode(x), -decode(y)));
    });
  case Op::Mul:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(decode(x) * decode(y));
    });
  case Op::Fma:
  case Op::Mad:
    return apply([&](uint16_t x, uint16_t y, uint16_t z) {
      return encode(roundOddSum(decode(x) * decode(y), decode(z)));
    });
  case Op::Neg:
    return apply([](uint16_t x, uint16_t, uint16_t) {
      return static_cast<uint16_t>(x ^ 0x8000u);
    });
  case Op::Abs:
    return apply([](uint16_t x, uint16_t, uint16_t) {
      return static_cast<uint16_t>(x & 0x7fffu);
    });
  case Op::Min:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(floatMin(decode(x), decode(y), in.propagateNaN));
    });
  case Op::Max:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(floatMax(decode(x), decode(y), in.propagateNaN));
    });
  case Op::Ex2:
    return unary([](double x) { return std::exp2(x); });
  case Op::Tanh:
    return unary([](double x) { return std::tanh(x); });
  case Op::Sqrt:
    return unary([](double x) { return std::sqrt(x); });
  case Op::Rcp:
    return unary([](double x) { return 1.0 / x; });
  case Op::Rsqrt:
    return unary([](double x) { return 1.0 / std::sqrt(x); });
  case Op::Lg2:
    return unary([](double x) { return std::log2(x); });
  case Op::Sin:
    return unary([](double x) { return std::sin(x); });
  case Op::Cos:
    return unary([](double x) { return std::cos(x); });
  default:
    return false;
  }
}

} // namespace kiln::runtime::emu::detail

//===- Numerics.h - Bit casts, roundings and PTX float rules ----*- C++ -*-===//
//
// Private to the interpreter: the numeric helpers the instruction families
// share (arithmetic, conversions, atomics, mma): bit casts, f16/bf16/tf32
// rounding, the host rounding mode for .rz/.rm/.rp, PTX min/max and
// comparisons, and the C++ types behind PTX's integer and float types.
//
// The files that include it are compiled with -frounding-math (see
// runtime/CMakeLists.txt): RoundingScope switches the host rounding mode.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_NUMERICS_H
#define KILN_RUNTIME_LIB_EMU_NUMERICS_H

#include "PtxParser.h"

#include "../FloatConversion.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace kiln::runtime::emu::detail {

template <typename T> inline T bitsTo(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
template <typename T> inline uint64_t toBits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

inline float flushDenormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}
inline double flushDenormal(double x) { return x; }

template <typename T> inline T saturate01(T x) {
  if (std::isnan(x))
    return T(0);
  return std::min(std::max(x, T(0)), T(1));
}

/// IEEE half <-> float, round to nearest even.
inline float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      // Subnormal: normalise.
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mantissa & 0x3ff) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return bitsTo<float>(bits);
}

inline uint16_t floatToHalf(float f) {
  uint32_t x = static_cast<uint32_t>(toBits(f));
  // The hardware writes its canonical NaN; otherwise round to nearest even.
  return isNanBits(x) ? uint16_t(0x7fffu) : f32BitsToF16(x);
}

inline float bf16ToFloat(uint16_t h) {
  return bitsTo<float>(static_cast<uint32_t>(h) << 16);
}
inline uint16_t floatToBf16(float f) {
  uint32_t x = static_cast<uint32_t>(toBits(f));
  return isNanBits(x) ? uint16_t(0x7fffu) : f32BitsToBf16(x);
}

/// The value of an 8-bit float (exact in a double). E4M3 (OCP "FN"):
/// bias 7, subnormals m * 2^-9, no infinities, S.1111.111 is NaN (max
/// 448). E5M2: bias 15, subnormals m * 2^-16, IEEE infinities and NaNs.
inline double fp8ToDouble(uint8_t bits, bool e5m2) {
  const double sign = bits & 0x80 ? -1.0 : 1.0;
  const int mantissaBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int exponent = (bits & 0x7f) >> mantissaBits;
  const int mantissa = bits & ((1 << mantissaBits) - 1);
  const int maxExponent = e5m2 ? 31 : 15;
  if (exponent == maxExponent) {
    if (e5m2 && mantissa == 0)
      return sign * std::numeric_limits<double>::infinity();
    if (e5m2 || mantissa == (1 << mantissaBits) - 1)
      return std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0)
    return sign * std::ldexp(mantissa, 1 - bias - mantissaBits);
  return sign * std::ldexp((1 << mantissaBits) + mantissa,
                           exponent - bias - mantissaBits);
}

/// A binary floating-point format narrower than f64.
struct Format {
  int exponentBits;
  int mantissaBits;
};
constexpr Format kHalf{5, 10}, kBf16{8, 7}, kTf32{8, 10};

/// Rounds `x` to `format` (sign, exponent, mantissa packed in the low
/// 1 + E + M bits), with subnormals, overflow by rounding direction, and
/// NaN as the canonical all-ones NaN. Independent of the host's rounding
/// mode: only exact operations (frexp, ldexp, floor, ceil, trunc).
inline uint32_t roundToFormat(double x, Format format, Rounding rounding) {
  const int e = format.exponentBits, m = format.mantissaBits;
  const uint32_t sign = std::signbit(x) ? 1u << (e + m) : 0u;
  const uint32_t infinity = ((1u << e) - 1) << m;
  if (std::isnan(x))
    return infinity | ((1u << m) - 1);
  if (std::isinf(x))
    return sign | infinity;
  double magnitude = std::fabs(x);
  if (magnitude == 0)
    return sign;
  const int bias = (1 << (e - 1)) - 1;
  const int minExponent = 1 - bias, maxExponent = bias;
  int binary = 0;
  std::frexp(magnitude, &binary); // magnitude in [2^(binary-1), 2^binary)
  int exponent = std::max(binary - 1, minExponent);
  double scaled = std::ldexp(magnitude, m - exponent);
  bool negative = sign != 0;
  double n;
  switch (rounding) {
  case Rounding::Rz:
    n = std::trunc(scaled);
    break;
  case Rounding::Rm:
    n = negative ? std::ceil(scaled) : std::floor(scaled);
    break;
  case Rounding::Rp:
    n = negative ? std::floor(scaled) : std::ceil(scaled);
    break;
  case Rounding::Rna:
    n = std::floor(scaled + 0.5); // scaled < 2^(m+1): exact
    break;
  default: {
    n = std::floor(scaled);
    double rest = scaled - n;
    if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) != 0))
      n += 1;
    break;
  }
  }
  uint64_t q = static_cast<uint64_t>(n);
  if (q >= (2ull << m)) { // rounded up into the next binade
    q >>= 1;
    ++exponent;
  }
  if (exponent > maxExponent) {
    bool toInfinity = rounding == Rounding::Rp   ? !negative
                      : rounding == Rounding::Rm ? negative
                                                 : rounding != Rounding::Rz;
    uint32_t maxFinite = (((1u << e) - 2) << m) | ((1u << m) - 1);
    return sign | (toInfinity ? infinity : maxFinite);
  }
  if (q < (1ull << m)) // subnormal (exponent is the minimum)
    return sign | static_cast<uint32_t>(q);
  return sign | (static_cast<uint32_t>(exponent + bias) << m) |
         (static_cast<uint32_t>(q) - (1u << m));
}

/// `x` rounded to nearest even in E4M3 or E5M2 with .satfinite, as cvt's
/// .e4m3x2/.e5m2x2 do: NaN is 0x7f, infinities and overflow become +-max
/// (448, 57344). E4M3 has no infinity, so it is rounded here (3 mantissa
/// bits, exponents -6..8); E5M2 is an IEEE-like format.
inline uint8_t roundToFp8Satfinite(double x, bool e5m2) {
  if (std::isnan(x))
    return 0x7f;
  if (e5m2) {
    uint32_t bits = roundToFormat(x, Format{5, 2}, Rounding::Rn);
    if ((bits & 0x7f) == 0x7c) // +-inf
      bits -= 1;
    return static_cast<uint8_t>(bits);
  }
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double ax = std::fabs(x);
  if (ax >= 448) // everything from 448 up rounds to 448 or saturates there
    return sign | 0x7e;
  const int exponent = ax == 0 ? -6 : std::max(std::ilogb(ax), -6);
  const double quantum = std::ldexp(1.0, exponent - 3);
  double units = std::floor(ax / quantum); // exact: quantum is 2^n
  const double rest = ax / quantum - units;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(units, 2.0) != 0))
    units += 1;
  const double r = units * quantum;
  if (r < std::ldexp(1.0, -6)) // subnormal: m * 2^-9
    return sign | static_cast<uint8_t>(r / std::ldexp(1.0, -9));
  const int e = std::ilogb(r);
  const int mantissa = static_cast<int>(r / std::ldexp(1.0, e - 3)) - 8;
  return sign | static_cast<uint8_t>(((e + 7) << 3) | mantissa);
}

/// x + y rounded to odd: correct after a second rounding to any format at
/// least two bits narrower than f64 (TwoSum gives the exact error).
inline double roundOddSum(double x, double y) {
  double s = x + y;
  if (!std::isfinite(s))
    return s;
  double yv = s - x;
  double error = (x - (s - yv)) + (y - yv);
  if (error == 0 || (toBits(s) & 1))
    return s;
  return std::nextafter(s, error > 0
                               ? std::numeric_limits<double>::infinity()
                               : -std::numeric_limits<double>::infinity());
}

inline int roundingModeOf(Rounding r) {
  switch (r) {
  case Rounding::Rz:
  case Rounding::Rzi:
    return FE_TOWARDZERO;
  case Rounding::Rm:
  case Rounding::Rmi:
    return FE_DOWNWARD;
  case Rounding::Rp:
  case Rounding::Rpi:
    return FE_UPWARD;
  default:
    return FE_TONEAREST;
  }
}

/// Sets the host rounding mode for one instruction when it asks for a
/// directed one.
class RoundingScope {
public:
  explicit RoundingScope(Rounding r) : mode(roundingModeOf(r)) {
    if (mode != FE_TONEAREST)
      std::fesetround(mode);
  }
  ~RoundingScope() {
    if (mode != FE_TONEAREST)
      std::fesetround(FE_TONEAREST);
  }

private:
  int mode;
};

template <typename T> T roundToIntegral(T x, Rounding r) {
  switch (r) {
  case Rounding::Rzi:
    return std::trunc(x);
  case Rounding::Rmi:
    return std::floor(x);
  case Rounding::Rpi:
    return std::ceil(x);
  case Rounding::Rni:
    return std::nearbyint(x); // the default mode: to nearest even
  default:
    return x;
  }
}

/// PTX's canonical NaN (all ones but the sign), what min/max return for a
/// NaN result; the host's quiet_NaN() (0x7fc00000) is another NaN.
template <typename T> T canonicalNaN() {
  if constexpr (sizeof(T) == 4)
    return bitsTo<T>(0x7fffffffu);
  else
    return bitsTo<T>(0x7fffffffffffffffull);
}

/// PTX min/max for floats: a NaN operand is ignored unless .NaN (then the
/// result is the canonical NaN, as it is when both are NaN), and -0 is
/// below +0.
template <typename T> T floatMin(T a, T b, bool propagateNaN) {
  if (std::isnan(a) || std::isnan(b)) {
    if (propagateNaN || (std::isnan(a) && std::isnan(b)))
      return canonicalNaN<T>();
    return std::isnan(a) ? b : a;
  }
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
template <typename T> T floatMax(T a, T b, bool propagateNaN) {
  if (std::isnan(a) || std::isnan(b)) {
    if (propagateNaN || (std::isnan(a) && std::isnan(b)))
      return canonicalNaN<T>();
    return std::isnan(a) ? b : a;
  }
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

template <typename T> bool compareInt(Cmp cmp, T a, T b) {
  switch (cmp) {
  case Cmp::Eq:
    return a == b;
  case Cmp::Ne:
    return a != b;
  case Cmp::Lt:
  case Cmp::Lo:
    return a < b;
  case Cmp::Le:
  case Cmp::Ls:
    return a <= b;
  case Cmp::Gt:
  case Cmp::Hi:
    return a > b;
  case Cmp::Ge:
  case Cmp::Hs:
    return a >= b;
  default:
    return false;
  }
}

template <typename T> bool compareFloat(Cmp cmp, T a, T b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (cmp) {
  case Cmp::Eq:
    return !unordered && a == b;
  case Cmp::Ne:
    return !unordered && a != b;
  case Cmp::Lt:
    return !unordered && a < b;
  case Cmp::Le:
    return !unordered && a <= b;
  case Cmp::Gt:
    return !unordered && a > b;
  case Cmp::Ge:
    return !unordered && a >= b;
  case Cmp::Equ:
    return unordered || a == b;
  case Cmp::Neu:
    return unordered || a != b;
  case Cmp::Ltu:
    return unordered || a < b;
  case Cmp::Leu:
    return unordered || a <= b;
  case Cmp::Gtu:
    return unordered || a > b;
  case Cmp::Geu:
    return unordered || a >= b;
  case Cmp::Num:
    return !unordered;
  case Cmp::Nan:
    return unordered;
  default:
    return false;
  }
}

/// Float to integer: NaN is 0, out-of-range values saturate.
template <typename I, typename F> I floatToInt(F x) {
  if (std::isnan(x))
    return 0;
  if (x <= static_cast<F>(std::numeric_limits<I>::min()))
    return std::numeric_limits<I>::min();
  if (x >= static_cast<F>(std::numeric_limits<I>::max()))
    return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

/// Calls f with a value of the C++ type for an integer PTX type.
template <typename F> bool withIntType(Type type, F &&f) {
  switch (type) {
  case Type::B8:
  case Type::U8:
    f(uint8_t{});
    return true;
  case Type::S8:
    f(int8_t{});
    return true;
  case Type::B16:
  case Type::U16:
    f(uint16_t{});
    return true;
  case Type::S16:
    f(int16_t{});
    return true;
  case Type::B32:
  case Type::U32:
    f(uint32_t{});
    return true;
  case Type::S32:
    f(int32_t{});
    return true;
  case Type::B64:
  case Type::U64:
    f(uint64_t{});
    return true;
  case Type::S64:
    f(int64_t{});
    return true;
  default:
    return false;
  }
}

template <typename F> bool withFloatType(Type type, F &&f) {
  switch (type) {
  case Type::F32:
    f(float{});
    return true;
  case Type::F64:
    f(double{});
    return true;
  default:
    return false;
  }
}

/// The unsigned integer type of the same size.
template <typename T> struct UnsignedOf {
  using type = std::make_unsigned_t<T>;
};
template <typename T> using UnsignedOfT = typename UnsignedOf<T>::type;

template <typename T> struct WideOf;
template <> struct WideOf<uint8_t> { using type = uint16_t; };
template <> struct WideOf<int8_t> { using type = int16_t; };
template <> struct WideOf<uint16_t> { using type = uint32_t; };
template <> struct WideOf<int16_t> { using type = int32_t; };
template <> struct WideOf<uint32_t> { using type = uint64_t; };
template <> struct WideOf<int32_t> { using type = int64_t; };
template <> struct WideOf<uint64_t> { using type = unsigned __int128; };
template <> struct WideOf<int64_t> { using type = __int128; };
template <typename T> using WideOfT = typename WideOf<T>::type;

} // namespace kiln::runtime::emu::detail

#endif // KILN_RUNTIME_LIB_EMU_NUMERICS_H

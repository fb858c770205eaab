//===- ExecConversions.cpp - cvt between integer and float types ----------===//
//
// Float to integer saturates (NaN is 0); conversions to f16/bf16/tf32 round
// once from the exact source with the instruction's rounding, .relu,
// .satfinite; cvt.rn.f16x2.f32 packs two, cvt.rn.satfinite.e4m3x2.f32
// (and e5m2x2) two fp8, cvt.rn.f16x2.e4m3x2 unpacks them. Directed
// roundings to f32 switch the host's rounding mode (RoundingScope).
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

#include <type_traits>

namespace kiln::runtime::emu::detail {

bool BlockRunner::convert(uint64_t *r, const Instruction &in, uint32_t exec) {
  const uint64_t *a = r + static_cast<size_t>(in.src[0]) * 32;
  uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
  Type dt = in.type, st = in.srcType;
  if (dt == Type::E4M3x2 || dt == Type::E5M2x2) {
    // cvt.rn.satfinite.e4m3x2.f32 d, a, b: a in the upper byte, b in the
    // lower (the decoder admits nothing else).
    const uint64_t *b = r + static_cast<size_t>(in.src[1]) * 32;
    const bool e5m2 = dt == Type::E5M2x2;
    forLanes(exec, [&](unsigned l) {
      uint8_t hi = roundToFp8Satfinite(bitsTo<float>(a[l]), e5m2);
      uint8_t lo = roundToFp8Satfinite(bitsTo<float>(b[l]), e5m2);
      d[l] = (static_cast<uint32_t>(hi) << 8) | lo;
    });
    return true;
  }
  if (st == Type::E4M3x2 || st == Type::E5M2x2) {
    // cvt.rn.f16x2.e4m3x2 d, a: exact (every fp8 value is an f16); byte i
    // of a becomes half i of d, NaN the canonical 0x7fff.
    const bool e5m2 = st == Type::E5M2x2;
    forLanes(exec, [&](unsigned l) {
      uint32_t out = 0;
      for (unsigned i = 0; i < 2; ++i) {
        double v = fp8ToDouble(static_cast<uint8_t>(a[l] >> (8 * i)), e5m2);
        out |= roundToFormat(v, kHalf, Rounding::Rn) << (16 * i);
      }
      d[l] = out;
    });
    return true;
  }
  // Reads the source as a double (floats) or int64/uint64 (integers).
  auto readFloat = [&](const uint64_t *s, unsigned l) -> double {
    if (st == Type::F16) {
      float f = halfToFloat(static_cast<uint16_t>(s[l]));
      return in.ftz ? flushDenormal(f) : f;
    }
    if (st == Type::BF16)
      return bf16ToFloat(static_cast<uint16_t>(s[l]));
    if (st == Type::F32 || st == Type::TF32) {
      float f = bitsTo<float>(s[l]);
      return in.ftz ? flushDenormal(f) : f;
    }
    return bitsTo<double>(s[l]);
  };
  const bool integral =
      in.rounding == Rounding::Rni || in.rounding == Rounding::Rzi ||
      in.rounding == Rounding::Rmi || in.rounding == Rounding::Rpi;
  // Rounds a double to a 16-bit (or tf32) destination; the result's bits.
  auto toNarrow = [&](double x) -> uint64_t {
    if (in.relu && x < 0)
      x = 0;
    Rounding rounding =
        integral || in.rounding == Rounding::None ? Rounding::Rn : in.rounding;
    Format format = dt == Type::BF16 || dt == Type::BF16x2 ? kBf16
                    : dt == Type::TF32                     ? kTf32
                                                           : kHalf;
    uint32_t bits = roundToFormat(x, format, rounding);
    uint32_t infinity = ((1u << format.exponentBits) - 1)
                        << format.mantissaBits;
    if (in.satfinite && (bits & ~(infinity << 1)) == infinity)
      bits -= 1;          // +-inf to +-max finite
    if (dt == Type::TF32) // an f32 pattern whose low 13 bits are zero
      return std::isnan(x) ? 0x7fffffffu : static_cast<uint64_t>(bits) << 13;
    if (in.ftz && dt == Type::F16 && (bits & 0x7c00u) == 0)
      bits &= 0x8000u;
    return bits;
  };
  auto isNarrow = [](Type t) {
    return t == Type::F16 || t == Type::BF16 || t == Type::TF32 ||
           t == Type::F16x2 || t == Type::BF16x2;
  };
  RoundingScope scope(isFloat(dt) && !isFloat(st) ? in.rounding
                      : isFloat(dt) && isFloat(st) &&
                              typeBytes(dt) < typeBytes(st)
                          ? in.rounding
                          : Rounding::None);
  if (isFloat(st) && !isFloat(dt)) {
    // Float to integer.
    if (st == Type::F16x2 || st == Type::BF16x2)
      return false;
    Rounding rnd = in.rounding == Rounding::None ? Rounding::Rzi : in.rounding;
    return withIntType(dt, [&](auto tag) {
      using T = decltype(tag);
      forLanes(exec, [&](unsigned l) {
        double x = roundToIntegral(readFloat(a, l), rnd);
        d[l] = toBits(static_cast<UnsignedOfT<T>>(floatToInt<T>(x)));
      });
    });
  }
  if (!isFloat(st) && isFloat(dt)) {
    // Integer to float.
    if (dt == Type::F16x2 || dt == Type::BF16x2 || dt == Type::TF32)
      return false;
    return withIntType(st, [&](auto tag) {
      using S = decltype(tag);
      forLanes(exec, [&](unsigned l) {
        S x = bitsTo<S>(a[l]);
        if (dt == Type::F64) {
          d[l] = toBits(static_cast<double>(x));
        } else if (dt == Type::F32) {
          float f = static_cast<float>(x); // rounded in the scope's mode
          if (in.sat)
            f = saturate01(f);
          d[l] = toBits(f);
        } else {
          // One rounding, from the exact value (exact in a double for
          // integers up to 2^53).
          double v = static_cast<double>(x);
          if (in.sat)
            v = saturate01(v);
          d[l] = toNarrow(v);
        }
      });
    });
  }
  if (isFloat(st) && isFloat(dt)) {
    if (st == Type::F16x2 || st == Type::BF16x2)
      return false;
    if (dt == Type::F16x2 || dt == Type::BF16x2) {
      // cvt.rn.f16x2.f32 d, a, b: a in the upper half, b in the lower.
      if (st != Type::F32 || in.numSrc != 2)
        return false;
      const uint64_t *b = r + static_cast<size_t>(in.src[1]) * 32;
      forLanes(exec, [&](unsigned l) {
        double hi = readFloat(a, l), lo = readFloat(b, l);
        if (in.sat) {
          hi = saturate01(hi);
          lo = saturate01(lo);
        }
        d[l] = (toNarrow(hi) << 16) | toNarrow(lo);
      });
      return true;
    }
    const bool fastHalf =
        st == Type::F32 && !in.relu && !in.satfinite && !in.sat && !integral &&
        !in.ftz &&
        (in.rounding == Rounding::None || in.rounding == Rounding::Rn);
    if (fastHalf && dt == Type::F16) {
      forLanes(exec,
               [&](unsigned l) { d[l] = floatToHalf(bitsTo<float>(a[l])); });
      return true;
    }
    if (fastHalf && dt == Type::BF16) {
      forLanes(exec,
               [&](unsigned l) { d[l] = floatToBf16(bitsTo<float>(a[l])); });
      return true;
    }
    forLanes(exec, [&](unsigned l) {
      double x = readFloat(a, l);
      if (integral)
        x = roundToIntegral(x, in.rounding); // exact in the source's type
      if (in.sat)
        x = saturate01(x);
      if (dt == Type::F64) {
        d[l] = toBits(x);
        return;
      }
      if (isNarrow(dt)) {
        d[l] = toNarrow(x);
        return;
      }
      float f = static_cast<float>(x); // f64: rounded in the scope's mode
      if (in.ftz)
        f = flushDenormal(f);
      d[l] = toBits(f);
    });
    return true;
  }
  // Integer to integer: extend by the source's signedness, saturate to the
  // destination's range when asked, truncate. A signed destination type
  // narrower than its register (cvt.s8.s32 into a .b16 register) is
  // sign-extended to the register's width, as the ISA says and as LLVM's
  // NVPTX backend relies on (it reads such a result as .s16).
  const unsigned dstBits =
      in.dst[0] < kernel.slotBits.size() ? kernel.slotBits[in.dst[0]] : 64;
  return withIntType(st, [&](auto stag) {
    using S = decltype(stag);
    withIntType(dt, [&](auto dtag) {
      using D = decltype(dtag);
      forLanes(exec, [&](unsigned l) {
        S x = bitsTo<S>(a[l]);
        D y;
        if (in.sat) {
          // Compare in a type wide enough for both.
          using W = __int128;
          W v = static_cast<W>(x);
          W lo = static_cast<W>(std::numeric_limits<D>::min());
          W hi = static_cast<W>(std::numeric_limits<D>::max());
          y = static_cast<D>(std::min(std::max(v, lo), hi));
        } else {
          y = static_cast<D>(x);
        }
        d[l] = toBits(static_cast<UnsignedOfT<D>>(y));
        if constexpr (std::is_signed_v<D> && sizeof(D) < 4) {
          if (dstBits > 8 * sizeof(D) && dstBits <= 64) {
            uint64_t wide = static_cast<uint64_t>(static_cast<int64_t>(y));
            d[l] = dstBits == 64 ? wide : wide & ((1ull << dstBits) - 1);
          }
        }
      });
    });
  });
}

} // namespace kiln::runtime::emu::detail

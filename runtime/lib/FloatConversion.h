//===- FloatConversion.h - f32 to bf16, f16 and tf32, nearest even -*- C++ -*-===//
//
// Bit-level conversions of f32 values, rounding to nearest even: the ones
// kilnc applies to weights at compile time (kiln-lower-precision), which
// bindWeights replays, and the core of the emulator's cvt.rn. NaNs stay
// quiet NaNs with their top payload bits (the emulator substitutes the
// hardware's canonical NaN itself).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_FLOATCONVERSION_H
#define KILN_RUNTIME_LIB_FLOATCONVERSION_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::runtime {

inline bool isNanBits(uint32_t bits) {
  return (bits & 0x7fffffffu) > 0x7f800000u;
}

inline uint16_t f32BitsToBf16(uint32_t bits) {
  if (isNanBits(bits))
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline uint16_t f32BitsToF16(uint32_t bits) {
  uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  if (isNanBits(bits))
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) // rounds to >= 65520: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { // below the smallest normal half
    float value;
    std::memcpy(&value, &magnitude, sizeof(value));
    // Scale so that the subnormal step (2^-24) is 1; nearbyint rounds even.
    return static_cast<uint16_t>(
        sign | static_cast<uint32_t>(std::nearbyint(value * 16777216.0f)));
  }
  // Normal: rebias the exponent 127 -> 15 and round at bit 13.
  uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

/// tf32 keeps f32's exponent and the top 10 mantissa bits.
inline uint32_t roundToTf32Bits(uint32_t bits) {
  if (isNanBits(bits))
    return bits;
  return (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
}

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_FLOATCONVERSION_H

//===- Fp8Reference.h - The tests' own fp8 decoder --------------*- C++ -*-===//
//
// float8 values from the formats' definitions (OCP 8-bit floating point),
// written independently of the emulator's fp8ToDouble: the reference of
// Emu8BitMmaTest (mma/wgmma) and EmuFp8ConvertTest (cvt).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_FP8REFERENCE_H
#define KILN_TEST_UNITTESTS_RUNTIME_FP8REFERENCE_H

#include <cmath>
#include <cstdint>

namespace kiln::runtime::test {

/// An 8-bit float's value, from its definition: E4M3 (OCP FP8 "FN")
/// has bias 7, no infinities, and only S.1111.111 is NaN; E5M2 has bias
/// 15 and IEEE infinities and NaNs. Subnormals are 0.m * 2^(1 - bias).
inline double fp8Value(uint8_t bits, bool e5m2) {
  int manBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  int exp = (bits >> manBits) & (e5m2 ? 31 : 15);
  int man = bits & ((1 << manBits) - 1);
  double sign = (bits & 0x80) ? -1 : 1;
  if (e5m2 && exp == 31)
    return man ? NAN : sign * INFINITY;
  if (!e5m2 && exp == 15 && man == 7)
    return NAN;
  double fraction = double(man) / double(1 << manBits);
  if (exp == 0)
    return sign * fraction * std::pow(2.0, 1 - bias);
  return sign * (1 + fraction) * std::pow(2.0, exp - bias);
}

inline bool isFinite(uint8_t bits, bool e5m2) {
  return std::isfinite(fp8Value(bits, e5m2));
}

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_FP8REFERENCE_H

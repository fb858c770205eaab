//===- EmuHalfTest.cpp - f16, bf16, f16x2, bf16x2 and tf32 on the emulator ===//
//
// Hand-written kernels run through the emu device; every expected value is
// computed here without the emulator's code: the exact result in __float128
// (products and sums of two halves are exact or correctly rounded there,
// since 113 >= 2 * 11 + 2), then rounded to the narrow format by choosing
// among the neighbouring encodings by exact distance. The compiler's
// _Float16 is a second, independent check of the f16 results.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtils.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

using quad = __float128;

/// A 16-bit format: f16 (5 exponent bits) or bf16 (8).
struct Fmt {
  int exponentBits;
  int mantissaBits;
  bool isBf16() const { return exponentBits == 8; }
  uint16_t infinity() const {
    return static_cast<uint16_t>(((1u << exponentBits) - 1) << mantissaBits);
  }
};
constexpr Fmt kF16{5, 10}, kBf16{8, 7};

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}
uint16_t f16Bits(_Float16 h) {
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
_Float16 f16Of(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return h;
}

/// The value of an encoding, as a float (exact for both formats).
float decode(uint16_t bits, Fmt fmt) {
  if (fmt.isBf16())
    return bitsToFloat(static_cast<uint32_t>(bits) << 16);
  return static_cast<float>(f16Of(bits));
}
bool isNaN(uint16_t bits, Fmt fmt) {
  return (bits & fmt.infinity()) == fmt.infinity() &&
         (bits & ((1u << fmt.mantissaBits) - 1)) != 0;
}
bool isSubnormal(uint16_t bits, Fmt fmt) {
  return (bits & fmt.infinity()) == 0 && (bits & 0x7fff) != 0;
}

enum class Mode { Rn, Rz, Rm, Rp };

/// Rounds q to `fmt` by looking at the encodings around a first guess: the
/// nearest (ties to the even encoding) or the directed neighbour. The
/// infinity encoding stands for 2^(emax+1) when measuring distances, which
/// is IEEE's overflow rule.
/// `residual` is the sign of what q lost when it was rounded to a quad
/// (the true value is q + a tiny amount of that sign); it breaks ties.
uint16_t roundQuad(quad q, Fmt fmt, Mode mode = Mode::Rn, int residual = 0) {
  if (q != q)
    return 0x7fff;
  bool negative = q < 0 || (q == 0 && std::signbit(static_cast<double>(q)));
  quad magnitude = negative ? -q : q;
  uint16_t sign = negative ? 0x8000 : 0;
  uint16_t inf = fmt.infinity();
  if (std::isinf(static_cast<double>(q)))
    return sign | inf;
  int sticky = negative ? -residual : residual; // on the magnitude
  if (magnitude > static_cast<quad>(std::numeric_limits<double>::max()))
    magnitude = static_cast<quad>(std::numeric_limits<double>::max());
  int guess;
  float f = static_cast<float>(magnitude);
  if (fmt.isBf16())
    guess = std::isinf(f) ? inf : static_cast<int>(floatBits(f) >> 16);
  else
    guess = f > 70000.0f ? inf : f16Bits(static_cast<_Float16>(f)) & 0x7fff;
  auto value = [&](int code) -> quad {
    if (code == inf) // 2^(emax + 1)
      return static_cast<quad>(std::ldexp(1.0, (1 << (fmt.exponentBits - 1))));
    return static_cast<quad>(decode(static_cast<uint16_t>(code), fmt));
  };
  // Directed: toward zero, or away from it, on the magnitude.
  bool away = (mode == Mode::Rp && !negative) || (mode == Mode::Rm && negative);
  bool toward = mode == Mode::Rz || (mode == Mode::Rp && negative) ||
                (mode == Mode::Rm && !negative);
  int best = -1;
  for (int code = std::max(0, guess - 3); code <= std::min<int>(inf, guess + 3);
       ++code) {
    quad v = value(code);
    if (toward) {
      if ((v < magnitude || (v == magnitude && sticky >= 0)) && code != inf)
        best = code; // the largest below
    } else if (away) {
      if ((v > magnitude || (v == magnitude && sticky <= 0)) && best < 0)
        best = code; // the smallest above
    } else {
      if (best < 0) {
        best = code;
        continue;
      }
      quad dv = v > magnitude ? v - magnitude : magnitude - v;
      quad vb = value(best);
      quad db = vb > magnitude ? vb - magnitude : magnitude - vb;
      // A tie in q is no tie when q was rounded: the residual decides.
      bool tieUp = sticky > 0, tieDown = sticky < 0;
      if (dv < db || (dv == db && (tieUp     ? v > vb
                                   : tieDown ? v < vb
                                             : (code & 1) == 0)))
        best = code;
    }
  }
  if (best < 0) // beyond the largest finite
    best = away ? inf : inf - 1;
  return static_cast<uint16_t>(sign | best);
}

quad quadOf(uint16_t bits, Fmt fmt) {
  return static_cast<quad>(decode(bits, fmt));
}

/// a + b rounded: the sum and the sign of its rounding error (TwoSum).
uint16_t roundSum(quad a, quad b, Fmt fmt, Mode mode = Mode::Rn) {
  quad s = a + b;
  quad bv = s - a;
  quad error = (a - (s - bv)) + (b - bv);
  if (s != s || std::isinf(static_cast<double>(s)))
    error = 0;
  return roundQuad(s, fmt, mode, error > 0 ? 1 : error < 0 ? -1 : 0);
}

/// PTX min/max: a NaN operand is ignored unless .NaN; -0 < +0.
uint16_t refMinMax(uint16_t x, uint16_t y, Fmt fmt, bool isMax, bool nanOp) {
  bool nx = isNaN(x, fmt), ny = isNaN(y, fmt);
  if (nx || ny) {
    if (nanOp || (nx && ny))
      return 0x7fff;
    return nx ? y : x;
  }
  float a = decode(x, fmt), b = decode(y, fmt);
  if (a == b) { // equal values, maybe zeros of different signs
    bool aNeg = x & 0x8000;
    return isMax ? (aNeg ? y : x) : (aNeg ? x : y);
  }
  return (a < b) != isMax ? x : y;
}

/// A deterministic stream of 32-bit words.
struct Lcg {
  uint64_t state;
  uint32_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 32);
  }
};

/// Random halves, plus the special values every test wants: zeros, the
/// smallest and largest subnormals and normals, one, infinities, NaN.
std::vector<uint16_t> interestingHalves(Fmt fmt, unsigned count,
                                        uint64_t seed) {
  std::vector<uint16_t> special;
  if (fmt.isBf16())
    special = {0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3f81,
               0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x4000, 0x3b80, 0xc0a0};
  else
    special = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00,
               0xbc00, 0x3c01, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
               0x7e00, 0x6800, 0x3800, 0x6801, 0x0003, 0x8001};
  Lcg rng{seed};
  std::vector<uint16_t> out;
  for (unsigned i = 0; i < count; ++i) {
    if (i % 3 == 0) {
      out.push_back(special[rng.next() % special.size()]);
    } else {
      uint16_t v = static_cast<uint16_t>(rng.next());
      if (fmt.isBf16() && i % 3 == 1) // keep exponents in a moderate range
        v = static_cast<uint16_t>((v & 0x807f) |
                                  ((0x3c00 + (v & 0x0f00)) & 0x7f80));
      out.push_back(v);
    }
  }
  return out;
}

struct ArithmeticCase {
  const char *name;
  std::function<uint16_t(uint16_t, uint16_t, uint16_t)> reference;
};

/// Runs `body` over threads whose %r1, %r2, %r3 hold two halves each
/// (x, y, z low; X, Y, Z high); checks output word k against cases[k]
/// applied to the low halves, or to both halves when the case's name ends
/// in "x2".
void checkArithmetic(Fmt fmt, const std::string &body,
                     const std::vector<ArithmeticCase> &cases,
                     const std::vector<std::pair<uint16_t, uint16_t>> &extra,
                     uint64_t seed) {
  unsigned threads = 2048;
  std::vector<uint16_t> lo = interestingHalves(fmt, threads * 3, seed),
                        hi = interestingHalves(fmt, threads * 3, seed + 1);
  // Hand-picked (x, y) pairs first (z = 0).
  for (size_t i = 0; i < extra.size(); ++i) {
    lo[3 * i] = extra[i].first;
    lo[3 * i + 1] = extra[i].second;
    lo[3 * i + 2] = 0;
  }
  std::vector<uint32_t> in(threads * 3);
  for (unsigned i = 0; i < threads * 3; ++i)
    in[i] = lo[i] | (static_cast<uint32_t>(hi[i]) << 16);
  std::vector<uint32_t> out =
      runWords(body, 3, static_cast<unsigned>(cases.size()), in);
  ASSERT_EQ(out.size(), threads * cases.size());
  unsigned failures = 0;
  for (unsigned t = 0; t < threads && failures < 20; ++t) {
    for (size_t k = 0; k < cases.size(); ++k) {
      std::string name = cases[k].name;
      bool pair = name.size() > 2 && name.substr(name.size() - 2) == "x2";
      uint32_t got = out[t * cases.size() + k];
      uint32_t want =
          cases[k].reference(lo[3 * t], lo[3 * t + 1], lo[3 * t + 2]);
      if (pair)
        want |= static_cast<uint32_t>(
                    cases[k].reference(hi[3 * t], hi[3 * t + 1], hi[3 * t + 2]))
                << 16;
      else
        got &= 0xffff;
      if (got != want) {
        ++failures;
        ADD_FAILURE() << name << " thread " << t << std::hex << ": x=0x"
                      << lo[3 * t] << " y=0x" << lo[3 * t + 1] << " z=0x"
                      << lo[3 * t + 2] << " (high 0x" << hi[3 * t] << " 0x"
                      << hi[3 * t + 1] << " 0x" << hi[3 * t + 2] << "): got 0x"
                      << got << ", want 0x" << want;
      }
    }
  }
}

std::vector<ArithmeticCase> arithmeticCases(Fmt fmt) {
  auto q = [fmt](uint16_t b) { return quadOf(b, fmt); };
  auto rounded = [fmt](quad v) { return roundQuad(v, fmt); };
  auto nanIn = [fmt](uint16_t a, uint16_t b) {
    return isNaN(a, fmt) || isNaN(b, fmt);
  };
  auto add = [=](uint16_t x, uint16_t y, uint16_t) -> uint16_t {
    return nanIn(x, y) ? 0x7fff : roundSum(q(x), q(y), fmt);
  };
  auto sub = [=](uint16_t x, uint16_t y, uint16_t) -> uint16_t {
    return nanIn(x, y) ? 0x7fff : roundSum(q(x), -q(y), fmt);
  };
  auto mul = [=](uint16_t x, uint16_t y, uint16_t) -> uint16_t {
    return nanIn(x, y) ? 0x7fff : rounded(q(x) * q(y));
  };
  auto fma = [=](uint16_t x, uint16_t y, uint16_t z) -> uint16_t {
    // The product is exact in a quad; the sum may not be.
    return nanIn(x, y) || isNaN(z, fmt) ? 0x7fff
                                        : roundSum(q(x) * q(y), q(z), fmt);
  };
  return {
      {"add", add},
      {"sub", sub},
      {"mul", mul},
      {"fma", fma},
      {"min", [=](uint16_t x, uint16_t y,
                  uint16_t) { return refMinMax(x, y, fmt, false, false); }},
      {"max", [=](uint16_t x, uint16_t y,
                  uint16_t) { return refMinMax(x, y, fmt, true, false); }},
      {"min.NaN", [=](uint16_t x, uint16_t y,
                      uint16_t) { return refMinMax(x, y, fmt, false, true); }},
      {"max.NaN", [=](uint16_t x, uint16_t y,
                      uint16_t) { return refMinMax(x, y, fmt, true, true); }},
      {"neg", [](uint16_t x, uint16_t,
                 uint16_t) { return static_cast<uint16_t>(x ^ 0x8000); }},
      {"abs", [](uint16_t x, uint16_t,
                 uint16_t) { return static_cast<uint16_t>(x & 0x7fff); }},
      {"add x2", add},
      {"fma x2", fma},
      {"min x2", [=](uint16_t x, uint16_t y,
                     uint16_t) { return refMinMax(x, y, fmt, false, false); }},
      {"max.NaN x2",
       [=](uint16_t x, uint16_t y, uint16_t) {
         return refMinMax(x, y, fmt, true, true);
       }},
      {"mul x2", mul},
      {"sub x2", sub},
  };
}

/// The body for arithmeticCases with type suffix `t` (f16 or bf16).
std::string arithmeticBody(const std::string &t) {
  return R"(	cvt.u16.u32 	%rs1, %r1;
	cvt.u16.u32 	%rs2, %r2;
	cvt.u16.u32 	%rs3, %r3;
	add.rn.)" +
         t + R"( 	%rs10, %rs1, %rs2;
	sub.rn.)" +
         t + R"( 	%rs11, %rs1, %rs2;
	mul.rn.)" +
         t + R"( 	%rs12, %rs1, %rs2;
	fma.rn.)" +
         t + R"( 	%rs13, %rs1, %rs2, %rs3;
	min.)" +
         t + R"( 	%rs14, %rs1, %rs2;
	max.)" +
         t + R"( 	%rs15, %rs1, %rs2;
	min.NaN.)" +
         t + R"( 	%rs16, %rs1, %rs2;
	max.NaN.)" +
         t + R"( 	%rs17, %rs1, %rs2;
	neg.)" +
         t + R"( 	%rs18, %rs1;
	abs.)" +
         t + R"( 	%rs19, %rs1;
	cvt.u32.u16 	%r20, %rs10;
	cvt.u32.u16 	%r21, %rs11;
	cvt.u32.u16 	%r22, %rs12;
	cvt.u32.u16 	%r23, %rs13;
	cvt.u32.u16 	%r24, %rs14;
	cvt.u32.u16 	%r25, %rs15;
	cvt.u32.u16 	%r26, %rs16;
	cvt.u32.u16 	%r27, %rs17;
	cvt.u32.u16 	%r28, %rs18;
	cvt.u32.u16 	%r29, %rs19;
	add.rn.)" +
         t + R"(x2 	%r30, %r1, %r2;
	fma.rn.)" +
         t + R"(x2 	%r31, %r1, %r2, %r3;
	min.)" +
         t + R"(x2 	%r32, %r1, %r2;
	max.NaN.)" +
         t + R"(x2 	%r33, %r1, %r2;
	mul.rn.)" +
         t + R"(x2 	%r34, %r1, %r2;
	sub.rn.)" +
         t + R"(x2 	%r35, %r1, %r2;
)";
}

TEST(EmuHalfTest, HalfArithmetic) {
  // Ties to even: 2048 + 1 = 2049 is halfway between 2048 and 2050 (keeps
  // the even 2048); 2050 + 1 goes up to 2052. Subnormals: 2^-24 + 2^-24,
  // the largest subnormal + 2^-24 = the smallest normal; 2^-24 * 0.5 is a
  // tie between 0 and 2^-24 (0 is even); 3 * 2^-24 * 0.5 rounds up to
  // 2 * 2^-24. inf - inf is NaN, inf * 0 is NaN, 65504 + 16 overflows.
  std::vector<std::pair<uint16_t, uint16_t>> extra = {
      {0x6800, 0x3c00}, {0x6801, 0x3c00}, {0x0001, 0x0001}, {0x03ff, 0x0001},
      {0x0001, 0x3800}, {0x0003, 0x3800}, {0x7c00, 0x7c00}, {0x7c00, 0x0000},
      {0x7bff, 0x4c00}, {0x8000, 0x0000}, {0x7e00, 0x3c00}, {0x3c00, 0x7e00}};
  checkArithmetic(kF16, arithmeticBody("f16"), arithmeticCases(kF16), extra, 1);
  // Spot checks of the hand-derived values, so the reference is checked
  // too.
  EXPECT_EQ(roundQuad(quadOf(0x6800, kF16) + 1, kF16), 0x6800);
  EXPECT_EQ(roundQuad(quadOf(0x6801, kF16) + 1, kF16), 0x6802);
  EXPECT_EQ(roundQuad(quadOf(0x0001, kF16) / 2, kF16), 0x0000);
  EXPECT_EQ(roundQuad(quadOf(0x0003, kF16) / 2, kF16), 0x0002);
  EXPECT_EQ(roundQuad(65520, kF16), 0x7c00); // the overflow threshold
  EXPECT_EQ(roundQuad(65519.99, kF16), 0x7bff);
}

TEST(EmuHalfTest, HalfReferenceAgreesWithFloat16) {
  // The candidate rounding above against the compiler's _Float16 (which
  // rounds a float sum once more: correct for f16, as 24 >= 2 * 11 + 2).
  Lcg rng{7};
  for (int i = 0; i < 20000; ++i) {
    uint16_t x = static_cast<uint16_t>(rng.next()),
             y = static_cast<uint16_t>(rng.next());
    if (isNaN(x, kF16) || isNaN(y, kF16))
      continue;
    _Float16 s = f16Of(x) + f16Of(y);
    _Float16 p = f16Of(x) * f16Of(y);
    uint16_t sum = roundQuad(quadOf(x, kF16) + quadOf(y, kF16), kF16);
    uint16_t product = roundQuad(quadOf(x, kF16) * quadOf(y, kF16), kF16);
    if (!isNaN(sum, kF16)) {
      ASSERT_EQ(f16Bits(s), sum) << std::hex << x << " " << y;
    }
    if (!isNaN(product, kF16)) {
      ASSERT_EQ(f16Bits(p), product) << std::hex << x << " " << y;
    }
  }
}

TEST(EmuHalfTest, BFloat16Arithmetic) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (keeps 1); (1 + 2^-7) +
  // 2^-8 goes up to 1 + 2^-6. Largest finite + itself overflows.
  std::vector<std::pair<uint16_t, uint16_t>> extra = {
      {0x3f80, 0x3b80}, {0x3f81, 0x3b80}, {0x7f7f, 0x7f7f},
      {0x0001, 0x0001}, {0x7f80, 0xff80}, {0x7fc0, 0x3f80}};
  checkArithmetic(kBf16, arithmeticBody("bf16"), arithmeticCases(kBf16), extra,
                  11);
  EXPECT_EQ(roundQuad(quadOf(0x3f80, kBf16) + quadOf(0x3b80, kBf16), kBf16),
            0x3f80);
  EXPECT_EQ(roundQuad(quadOf(0x3f81, kBf16) + quadOf(0x3b80, kBf16), kBf16),
            0x3f82);
  // A tie in the product broken by an addend far below it (the case that
  // needs the residual): -5 * -0x1.54p-5 = 0x1.a9p-3 is halfway between
  // bf16 0x3e54 and 0x3e55; a positive subnormal addend rounds it up.
  EXPECT_EQ(roundSum(quadOf(0xc0a0, kBf16) * quadOf(0xbd2a, kBf16),
                     quadOf(0x00ca, kBf16), kBf16),
            0x3e55);
  EXPECT_EQ(roundQuad(quadOf(0xc0a0, kBf16) * quadOf(0xbd2a, kBf16), kBf16),
            0x3e54);
}

TEST(EmuHalfTest, SaturateFlushAndRelu) {
  auto q = [](uint16_t b) { return quadOf(b, kF16); };
  std::vector<ArithmeticCase> cases = {
      {"add.sat",
       [&](uint16_t x, uint16_t y, uint16_t) -> uint16_t {
         if (isNaN(x, kF16) || isNaN(y, kF16))
           return 0;
         quad v = q(x) + q(y);
         if (v != v)
           return 0; // NaN saturates to +0
         uint16_t r = roundQuad(v, kF16);
         if (r == 0x8000)
           return r; // -0 is in [0, 1]
         if (r & 0x8000)
           return 0;
         return decode(r, kF16) > 1.0f ? 0x3c00 : r;
       }},
      {"add.ftz",
       [&](uint16_t x, uint16_t y, uint16_t) -> uint16_t {
         if (isNaN(x, kF16) || isNaN(y, kF16))
           return 0x7fff;
         uint16_t fx = isSubnormal(x, kF16) ? x & 0x8000 : x;
         uint16_t fy = isSubnormal(y, kF16) ? y & 0x8000 : y;
         uint16_t r = roundQuad(q(fx) + q(fy), kF16);
         return isSubnormal(r, kF16) ? r & 0x8000 : r;
       }},
      {"fma.relu",
       [&](uint16_t x, uint16_t y, uint16_t z) -> uint16_t {
         if (isNaN(x, kF16) || isNaN(y, kF16) || isNaN(z, kF16))
           return 0x7fff;
         uint16_t r = roundSum(q(x) * q(y), q(z), kF16);
         if (isNaN(r, kF16))
           return 0x7fff;
         return (r & 0x8000) && (r & 0x7fff) ? 0 : r;
       }},
  };
  std::string body = R"(	cvt.u16.u32 	%rs1, %r1;
	cvt.u16.u32 	%rs2, %r2;
	cvt.u16.u32 	%rs3, %r3;
	add.rn.sat.f16 	%rs10, %rs1, %rs2;
	add.rn.ftz.f16 	%rs11, %rs1, %rs2;
	fma.rn.relu.f16 	%rs12, %rs1, %rs2, %rs3;
	cvt.u32.u16 	%r20, %rs10;
	cvt.u32.u16 	%r21, %rs11;
	cvt.u32.u16 	%r22, %rs12;
)";
  checkArithmetic(kF16, body, cases, {{0x0001, 0x0000}, {0x3c00, 0x3c00}}, 21);
}

/// Floats that exercise rounding to halves: near the f16 and bf16 ranges,
/// subnormals, exact ties, random bits, and the special values.
std::vector<float> roundingInputs(unsigned count) {
  std::vector<float> out = {1.0f + 0x1p-11f,
                            1.0f + 3 * 0x1p-11f, // f16 ties
                            1.0f + 0x1p-8f,
                            1.0f + 3 * 0x1p-8f, // bf16 ties
                            0x1p-25f,
                            3 * 0x1p-25f, // f16 subnormal ties
                            0x1p-24f,
                            0x1.ff8p-15f, // f16 subnormals
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -65520.0f,
                            1e-30f,
                            -0.0f,
                            0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(),
                            -2.5f,
                            3.14159265f};
  Lcg rng{99};
  while (out.size() < count) {
    uint32_t bits = rng.next();
    if (out.size() % 2) // exponent within the f16 range
      bits = (bits & 0x807fffffu) | ((100 + rng.next() % 50) << 23);
    out.push_back(bitsToFloat(bits));
  }
  return out;
}

TEST(EmuHalfTest, ConversionsFromF32WithEveryRounding) {
  std::vector<float> values = roundingInputs(4096);
  std::vector<uint32_t> in;
  for (float f : values)
    in.push_back(floatBits(f));
  std::string body = R"(	mov.b32 	%f1, %r1;
	cvt.rn.f16.f32 	%rs10, %f1;
	cvt.rz.f16.f32 	%rs11, %f1;
	cvt.rm.f16.f32 	%rs12, %f1;
	cvt.rp.f16.f32 	%rs13, %f1;
	cvt.rn.bf16.f32 	%rs14, %f1;
	cvt.rz.bf16.f32 	%rs15, %f1;
	cvt.rm.bf16.f32 	%rs16, %f1;
	cvt.rp.bf16.f32 	%rs17, %f1;
	cvt.u32.u16 	%r20, %rs10;
	cvt.u32.u16 	%r21, %rs11;
	cvt.u32.u16 	%r22, %rs12;
	cvt.u32.u16 	%r23, %rs13;
	cvt.u32.u16 	%r24, %rs14;
	cvt.u32.u16 	%r25, %rs15;
	cvt.u32.u16 	%r26, %rs16;
	cvt.u32.u16 	%r27, %rs17;
	cvt.rna.tf32.f32 	%r28, %f1;
	cvt.rn.f16x2.f32 	%r29, %f1, %f1;
	neg.f32 	%f2, %f1;
	cvt.rn.bf16x2.f32 	%r30, %f1, %f2;
	cvt.rn.relu.f16.f32 	%rs18, %f1;
	cvt.u32.u16 	%r31, %rs18;
	cvt.f64.f32 	%fd1, %f1;
	cvt.rn.f16.f64 	%rs19, %fd1;
	cvt.u32.u16 	%r32, %rs19;
)";
  const unsigned nout = 13;
  std::vector<uint32_t> out = runWords(body, 1, nout, in);
  ASSERT_EQ(out.size(), values.size() * nout);
  const Mode modes[] = {Mode::Rn, Mode::Rz, Mode::Rm, Mode::Rp};
  unsigned failures = 0;
  for (size_t i = 0; i < values.size() && failures < 20; ++i) {
    float f = values[i];
    quad q = static_cast<quad>(f);
    const uint32_t *g = &out[i * nout];
    std::vector<uint32_t> want;
    for (Mode m : modes)
      want.push_back(roundQuad(q, kF16, m));
    for (Mode m : modes)
      want.push_back(roundQuad(q, kBf16, m));
    // tf32: 10 mantissa bits, ties away from zero: add half an ulp of the
    // f32 pattern's bit 13 and clear the rest (a carry moves the exponent).
    uint32_t bits = floatBits(f);
    want.push_back(std::isnan(f) ? 0x7fffffffu : (bits + 0x1000u) & ~0x1fffu);
    uint32_t h = roundQuad(q, kF16);
    want.push_back(h | (h << 16));
    want.push_back((static_cast<uint32_t>(roundQuad(q, kBf16)) << 16) |
                   roundQuad(-q, kBf16));
    want.push_back(f < 0 ? 0 : h);
    want.push_back(h); // f64 -> f16: the same single rounding
    for (unsigned k = 0; k < nout; ++k)
      if (g[k] != want[k]) {
        ++failures;
        ADD_FAILURE() << "input " << i << " (" << f << ", 0x" << std::hex
                      << bits << ") output " << std::dec << k << ": got 0x"
                      << std::hex << g[k] << ", want 0x" << want[k];
      }
  }
  // The reference itself, on hand-derived cases.
  EXPECT_EQ(roundQuad(1.0 + 0x1p-11, kF16), 0x3c00);
  EXPECT_EQ(roundQuad(1.0 + 3 * 0x1p-11, kF16), 0x3c02);
  EXPECT_EQ(roundQuad(0x1p-25, kF16), 0x0000);
  EXPECT_EQ(roundQuad(3 * 0x1p-25, kF16), 0x0002);
  EXPECT_EQ(roundQuad(1.0 + 0x1p-11, kF16, Mode::Rp), 0x3c01);
  EXPECT_EQ(roundQuad(-1.0 - 0x1p-11, kF16, Mode::Rz), 0xbc00);
  EXPECT_EQ(roundQuad(-1.0 - 0x1p-11, kF16, Mode::Rm), 0xbc01);
  EXPECT_EQ(roundQuad(1e6, kF16, Mode::Rz), 0x7bff);
  EXPECT_EQ(roundQuad(1.0 + 0x1p-8, kBf16), 0x3f80);
  EXPECT_EQ(roundQuad(1.0 + 3 * 0x1p-8, kBf16), 0x3f82);
}

TEST(EmuHalfTest, ConversionsToF32AreExact) {
  // Every f16 and bf16 encoding.
  std::vector<uint32_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i)
    in[i] = i;
  std::string body = R"(	cvt.u16.u32 	%rs1, %r1;
	cvt.f32.f16 	%f10, %rs1;
	mov.b32 	%r20, %f10;
	cvt.f32.bf16 	%f11, %rs1;
	mov.b32 	%r21, %f11;
	cvt.rzi.s32.f16 	%r22, %rs1;
)";
  std::vector<uint32_t> out = runWords(body, 1, 3, in, 256);
  ASSERT_EQ(out.size(), 65536u * 3);
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t h = static_cast<uint16_t>(i);
    float want16 = static_cast<float>(f16Of(h));
    float wantBf = bitsToFloat(i << 16);
    float got16 = bitsToFloat(out[i * 3]), gotBf = bitsToFloat(out[i * 3 + 1]);
    if (std::isnan(want16))
      ASSERT_TRUE(std::isnan(got16)) << i;
    else
      ASSERT_EQ(floatBits(got16), floatBits(want16)) << i;
    if (std::isnan(wantBf))
      ASSERT_TRUE(std::isnan(gotBf)) << i;
    else
      ASSERT_EQ(floatBits(gotBf), floatBits(wantBf)) << i;
    int32_t wantInt = std::isnan(want16) ? 0
                      : std::isinf(want16)
                          ? (want16 > 0 ? INT32_MAX : INT32_MIN)
                          : static_cast<int32_t>(std::trunc(want16));
    ASSERT_EQ(static_cast<int32_t>(out[i * 3 + 2]), wantInt) << i;
  }
}

TEST(EmuHalfTest, IntegersToHalves) {
  // 2049 is a tie between 2048 and 2050 in f16; 65520 overflows to inf.
  std::vector<int32_t> ints = {0,     1,     -1,     2049,    2051,  4097,
                               65504, 65520, -70000, 1 << 20, 12345, -3};
  std::vector<uint32_t> in;
  for (int32_t i : ints)
    in.push_back(static_cast<uint32_t>(i));
  std::string body = R"(	cvt.rn.f16.s32 	%rs10, %r1;
	cvt.u32.u16 	%r20, %rs10;
	cvt.rz.f16.s32 	%rs11, %r1;
	cvt.u32.u16 	%r21, %rs11;
	cvt.rn.bf16.s32 	%rs12, %r1;
	cvt.u32.u16 	%r22, %rs12;
)";
  std::vector<uint32_t> out = runWords(body, 1, 3, in, 32);
  ASSERT_EQ(out.size(), ints.size() * 3);
  for (size_t i = 0; i < ints.size(); ++i) {
    quad q = static_cast<quad>(ints[i]);
    EXPECT_EQ(out[i * 3], roundQuad(q, kF16)) << ints[i];
    EXPECT_EQ(out[i * 3 + 1], roundQuad(q, kF16, Mode::Rz)) << ints[i];
    EXPECT_EQ(out[i * 3 + 2], roundQuad(q, kBf16)) << ints[i];
  }
  EXPECT_EQ(out[3 * 3], 0x6800u); // 2049 -> 2048
  EXPECT_EQ(out[4 * 3], 0x6802u); // 2051 -> 2052
  EXPECT_EQ(out[7 * 3], 0x7c00u); // 65520 -> inf
}

TEST(EmuHalfTest, HalfComparesAndMemory) {
  // setp on f16x2 writes p for the low halves and q for the high ones; b16
  // loads and stores move the bits unchanged.
  std::vector<uint32_t> in = {
      0x3c00bc00, 0x3c003c00, // (-1, 1) vs (1, 1)
      0x7e000000, 0x00000000, // (0, NaN) vs (0, 0)
      0x80000001, 0x00000000, // (2^-24, -0) vs (0, 0)
  };
  std::string body = R"(	setp.lt.f16x2 	%p1|%p2, %r1, %r2;
	selp.u32 	%r20, 1, 0, %p1;
	selp.u32 	%r21, 1, 0, %p2;
	setp.equ.f16x2 	%p3|%p4, %r1, %r2;
	selp.u32 	%r22, 1, 0, %p3;
	selp.u32 	%r23, 1, 0, %p4;
	st.global.b16 	[%rd4+16], %r1;
	ld.global.b16 	%rs1, [%rd4+16];
	cvt.u32.u16 	%r24, %rs1;
	mov.b32 	{%rs2, %rs3}, %r1;
	setp.gt.bf16 	%p5, %rs3, %rs2;
	selp.u32 	%r25, 1, 0, %p5;
)";
  std::vector<uint32_t> out = runWords(body, 2, 6, in, 32);
  ASSERT_EQ(out.size(), 18u);
  // Thread 0: low -1 < 1, high 1 < 1 false.
  EXPECT_THAT(std::vector<uint32_t>(out.begin(), out.begin() + 6),
              ::testing::ElementsAre(1, 0, 0, 1, 0xbc00, 1));
  // Thread 1: low 0 < 0 false; high NaN: lt false, equ true.
  EXPECT_THAT(std::vector<uint32_t>(out.begin() + 6, out.begin() + 12),
              ::testing::ElementsAre(0, 0, 1, 1, 0x0000, 1));
  // Thread 2: low 2^-24 < 0 false, high -0 < 0 false, -0 == 0; as bf16,
  // -0 > 0x0001 (a tiny positive subnormal) is false.
  EXPECT_THAT(std::vector<uint32_t>(out.begin() + 12, out.end()),
              ::testing::ElementsAre(0, 0, 0, 1, 0x0001, 0));
}

} // namespace

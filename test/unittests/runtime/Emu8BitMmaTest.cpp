//===- Emu8BitMmaTest.cpp - fp8 and int8 tensor-core MMA on the emulator --===//
//
// mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_89)
// and wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}
// (sm_90a) against a float64 reference computed here from the fp8 bytes,
// which this file decodes itself (fp8Value, checked at the formats'
// anchors), element by element; wgmma m64nNk32{.satfinite}.s32.{s8,u8}.
// {s8,u8} against int64 sums wrapped or clamped per instruction, exactly.
// (mma.sync s8/u8 is EmuInt8MmaTest.cpp's.) The fragments are written per
// element from the PTX ISA's tables: mma.m16n8k32 with 8-bit types (a_i at
// row g, or g + 8 for 4 <= i < 8 and i >= 12, column 4t + (i & 3), + 16
// for i >= 8; b_i at row 4t + (i & 3), + 16 for i >= 4, column g; c_i/d_i
// at row g, + 8 for i >= 2, column 2t + (i & 1)); wgmma's D in the m64nN
// fragment (row 16 * warp + lane / 4 + 8 * ((i / 2) % 2), column
// 8 * (i / 4) + 2 * (lane % 4) + i % 2) and its K-major shared tiles from
// WgmmaSharedLayouts.h.
//
// The fp8 bound: every product of two fp8 values is exact in a double, and each
// instruction rounds C + its 32 products to f32 once (as the f16 shapes
// do), so after S instructions
//   |d - ref| <= sum_s 2^-24 |ref_s| (1 + 2^-10) + 2^-47 sum|terms|
//                + S 2^-149,
// where ref_s is the exact running sum after instruction s (half an f32
// ulp per rounding), 2^-47 covers the double accumulation of 33 terms
// (33 * 2^-53 < 2^-47) and 2^-149 the f32 subnormal spacing. A swapped
// row, column, byte or type is off by a whole term: far outside it.
//
// Every kernel is also given to ptxas (sm_89 for mma.sync, sm_90a for
// wgmma) when the toolkit is installed.
//
//===----------------------------------------------------------------------===//

#include "../PtxasUtils.h"
#include "EmuDirectTestUtils.h"
#include "Fp8Reference.h"
#include "WgmmaSharedLayouts.h"
#include "WgmmaTestKernel.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

// The decoder above at the formats' anchors (OCP 8-bit FP spec, table 1).
TEST(EmuFp8MmaTest, ReferenceDecoderAnchors) {
  EXPECT_EQ(fp8Value(0x7e, false), 448);               // e4m3 max
  EXPECT_EQ(fp8Value(0x08, false), std::ldexp(1, -6)); // min normal
  EXPECT_EQ(fp8Value(0x01, false), std::ldexp(1, -9)); // min subnormal
  EXPECT_EQ(fp8Value(0xb8, false), -1);                // -1
  EXPECT_TRUE(std::isnan(fp8Value(0x7f, false)));
  EXPECT_EQ(fp8Value(0x7b, true), 57344);              // e5m2 max
  EXPECT_EQ(fp8Value(0x04, true), std::ldexp(1, -14)); // min normal
  EXPECT_EQ(fp8Value(0x01, true), std::ldexp(1, -16)); // min subnormal
  EXPECT_EQ(fp8Value(0xbc, true), -1);
  EXPECT_EQ(fp8Value(0xfc, true), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8Value(0x7d, true)));
}

/// What the operand bytes are drawn from.
enum class Fill {
  /// Any finite code, uniformly (so subnormals, zeros and extremes too).
  AnyFinite,
  /// +-max, +-min normal, +-min subnormal, +-0.
  Extremes,
  /// Subnormals and zeros only, with C = 0: the smallest products.
  Subnormals,
};

uint8_t drawByte(std::mt19937 &rng, Fill fill, bool e5m2) {
  for (;;) {
    uint8_t b = static_cast<uint8_t>(rng() & 0xff);
    uint8_t magnitude = b & 0x7f;
    if (!isFinite(b, e5m2))
      continue;
    if (fill == Fill::AnyFinite)
      return b;
    if (fill == Fill::Subnormals) {
      if ((magnitude >> (e5m2 ? 2 : 3)) == 0)
        return b;
      continue;
    }
    uint8_t max = e5m2 ? 0x7b : 0x7e, minNormal = e5m2 ? 0x04 : 0x08;
    if (magnitude == max || magnitude == minNormal || magnitude == 0x01 ||
        magnitude == 0)
      return b;
  }
}

/// C drawn in [-2^10, 2^10] (zero for Fill::Subnormals).
float drawC(std::mt19937 &rng, Fill fill) {
  if (fill == Fill::Subnormals)
    return 0;
  std::uniform_real_distribution<float> dist(-1024, 1024);
  return dist(rng);
}

const char *typeName(bool e5m2) { return e5m2 ? "e5m2" : "e4m3"; }

/// Checks one result against c + sum(terms), rounded to f32 after every
/// 32 terms (one instruction), under the file's bound.
::testing::AssertionResult withinBound(float got, long double c,
                                       const std::vector<long double> &terms) {
  long double ref = c, magnitude = std::fabs(c), roundings = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    ref += terms[i];
    magnitude += std::fabs(terms[i]);
    if (i % 32 == 31 || i + 1 == terms.size())
      roundings +=
          std::ldexp(std::fabs(ref), -24) * (1 + std::ldexp(1.0L, -10)) +
          std::ldexp(1.0L, -149);
  }
  long double bound = roundings + std::ldexp(magnitude, -47);
  long double error = std::fabs(static_cast<long double>(got) - ref);
  if (error <= bound)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << static_cast<double>(ref) << " (error "
         << static_cast<double>(error) << " > bound "
         << static_cast<double>(bound) << ")";
}

//===----------------------------------------------------------------------===//
// mma.sync.aligned.m16n8k32 with e4m3/e5m2
//===----------------------------------------------------------------------===//

/// The mma kernel: wordKernel's (A in %r1..4, B in %r5..6, C in %r7..10,
/// D to %r20..23) for PTX ISA 8.4 and sm_89, where fp8 mma.sync begins.
std::string mmaKernel(const std::string &instruction) {
  std::string body = "\t" + instruction + " \t" + ptxRegisterList("r", 20, 4) +
                     ", " + ptxRegisterList("r", 1, 4) + ", " +
                     ptxRegisterList("r", 5, 2) + ", " +
                     ptxRegisterList("r", 7, 4) + ";\n";
  std::string ptx = wordKernel(body, 10, 4);
  ptx.replace(ptx.find(".version 8.0"), 12, ".version 8.4");
  ptx.replace(ptx.find(".target sm_90"), 13, ".target sm_89");
  return ptx;
}

void runMmaCase(bool aE5m2, bool bE5m2, Fill fill, unsigned seed) {
  std::mt19937 rng(seed);
  uint8_t a[16][32], b[32][8];
  float c[16][8];
  for (auto &row : a)
    for (uint8_t &v : row)
      v = drawByte(rng, fill, aE5m2);
  for (auto &row : b)
    for (uint8_t &v : row)
      v = drawByte(rng, fill, bE5m2);
  for (auto &row : c)
    for (float &v : row)
      v = drawC(rng, fill);
  std::vector<uint32_t> regs(32 * 10, 0);
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane / 4, t = lane % 4;
    uint32_t *r = &regs[lane * 10];
    for (unsigned i = 0; i < 16; ++i) {
      unsigned row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
      unsigned col = 4 * t + (i & 3) + (i >= 8 ? 16 : 0);
      r[i / 4] |= uint32_t{a[row][col]} << (8 * (i % 4));
    }
    for (unsigned i = 0; i < 8; ++i) {
      unsigned row = 4 * t + (i & 3) + (i >= 4 ? 16 : 0);
      r[4 + i / 4] |= uint32_t{b[row][g]} << (8 * (i % 4));
    }
    for (unsigned i = 0; i < 4; ++i)
      std::memcpy(&r[6 + i], &c[i < 2 ? g : g + 8][2 * t + (i & 1)], 4);
  }
  std::string instruction = std::string("mma.sync.aligned.m16n8k32.row.col."
                                        "f32.") +
                            typeName(aE5m2) + "." + typeName(bE5m2) + ".f32";
  std::string ptx = mmaKernel(instruction);
  if (!kiln::testing::ptxasPath().empty()) {
    EXPECT_EQ(kiln::testing::runPtxas(ptx, "sm_89"), "") << instruction;
  }
  Buffer in = Buffer::of(regs);
  Buffer out = Buffer::zeros<uint32_t>(32 * 4);
  ASSERT_EQ(runPtx(ptx, "k", {1, 1, 1}, {32, 1, 1}, {&in, &out}), "<success>");
  std::vector<float> d = out.as<float>();
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane / 4, t = lane % 4;
    for (unsigned i = 0; i < 4; ++i) {
      unsigned m = i < 2 ? g : g + 8, n = 2 * t + (i & 1);
      std::vector<long double> terms;
      for (unsigned k = 0; k < 32; ++k)
        terms.push_back(static_cast<long double>(fp8Value(a[m][k], aE5m2)) *
                        fp8Value(b[k][n], bE5m2));
      ASSERT_TRUE(withinBound(d[lane * 4 + i], c[m][n], terms))
          << instruction << " D(" << m << ", " << n << "), seed " << seed;
    }
  }
}

TEST(EmuFp8MmaTest, MmaSyncEveryTypePairAnyFiniteValue) {
  for (bool aE5m2 : {false, true})
    for (bool bE5m2 : {false, true})
      for (unsigned seed = 1; seed <= 4; ++seed)
        runMmaCase(aE5m2, bE5m2, Fill::AnyFinite, seed);
}

TEST(EmuFp8MmaTest, MmaSyncExtremesAndSubnormals) {
  for (bool aE5m2 : {false, true})
    for (bool bE5m2 : {false, true}) {
      runMmaCase(aE5m2, bE5m2, Fill::Extremes, 11);
      runMmaCase(aE5m2, bE5m2, Fill::Subnormals, 12);
    }
}

// NaN (e4m3 S.1111.111) and infinity (e5m2) operands reach D as IEEE
// arithmetic says: NaN rows are NaN, inf * finite nonzero is inf.
TEST(EmuFp8MmaTest, MmaSyncNanAndInfinity) {
  std::vector<uint32_t> regs(32 * 10, 0);
  const uint32_t one = 0x38; // e4m3 1.0
  for (unsigned lane = 0; lane < 32; ++lane) {
    uint32_t *r = &regs[lane * 10];
    for (unsigned i = 0; i < 4; ++i)
      r[i] = one * 0x01010101u;
    r[4] = r[5] = 0x3c3c3c3cu; // e5m2 1.0
  }
  regs[0 * 10 + 0] = 0x7f | (one * 0x01010100u); // A(0, 0) = NaN
  regs[1 * 10 + 4] = 0x7c | 0x3c3c3c00u;         // B(4, 0) = +inf (e5m2)
  std::string ptx =
      mmaKernel("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32");
  Buffer in = Buffer::of(regs);
  Buffer out = Buffer::zeros<uint32_t>(32 * 4);
  ASSERT_EQ(runPtx(ptx, "k", {1, 1, 1}, {32, 1, 1}, {&in, &out}), "<success>");
  std::vector<float> d = out.as<float>();
  // Lane 0 holds (0, 0), (0, 1), (8, 0), (8, 1); lane 4 the same of row 1.
  EXPECT_TRUE(std::isnan(d[0])); // row 0 has the NaN (and column 0 inf)
  EXPECT_TRUE(std::isnan(d[1]));
  EXPECT_EQ(d[2], INFINITY); // column 0 has the infinity
  EXPECT_EQ(d[3], 32.0f);    // 32 products 1 * 1
  EXPECT_EQ(d[4 * 4 + 0], INFINITY);
  EXPECT_EQ(d[4 * 4 + 1], 32.0f);
}

// What the emulator does not model is refused when the PTX is parsed.
TEST(EmuFp8MmaTest, MmaSyncUnmodelledFormsRefused) {
  for (const char *bad :
       {"mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
        "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32",
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.f16.f32"}) {
    Expected<emu::Module> module = emu::parsePtx(mmaKernel(bad));
    ASSERT_FALSE(module) << bad;
    EXPECT_THAT(module.error().message(), HasSubstr("PTX line")) << bad;
    EXPECT_THAT(module.error().message(), HasSubstr("mma.sync")) << bad;
  }
}

//===----------------------------------------------------------------------===//
// wgmma.mma_async.m64nNk32 with e4m3/e5m2
//===----------------------------------------------------------------------===//

struct WgmmaCase {
  bool aE5m2 = false, bE5m2 = false;
  /// s8/u8 x s8/u8 -> s32 instead of fp8 (aE5m2/bE5m2 then mean u8).
  bool integer = false;
  bool satfinite = false;
  /// Added to every C element (integer: to push sums past the s32 range).
  int64_t cBias = 0;
  unsigned n = 64;
  unsigned steps = 4; // K = 32 * steps
  bool aRegisters = false;
  Swz swizzle = Swz::B128;
  bool scaleD = true;
  int scaleA = 1, scaleB = 1;
  Fill fill = Fill::AnyFinite;
  unsigned seed = 1;
};

std::string wgmmaTypes(const WgmmaCase &c) {
  if (c.integer)
    return std::string(c.satfinite ? "satfinite." : "") + "s32." +
           (c.aE5m2 ? "u8" : "s8") + "." + (c.bE5m2 ? "u8" : "s8");
  return std::string("f32.") + typeName(c.aE5m2) + "." + typeName(c.bE5m2);
}

/// An operand byte's value: an fp8 code, or an s8/u8 integer.
double byteValue(const WgmmaCase &c, uint8_t bits, bool second) {
  bool flag = second ? c.bE5m2 : c.aE5m2;
  if (c.integer)
    return flag ? double(bits) : double(int8_t(bits));
  return fp8Value(bits, flag);
}

/// The kernel (WgmmaTestKernel.h) for a case. 8-bit types take no
/// transpose flags (both operands are K-major) and the integer ones no
/// scales either.
std::string byteWgmmaKernel(const WgmmaCase &c, uint64_t sharedBytes) {
  WgmmaTestKernel kernel;
  // PTX ISA 8.4: wgmma with mixed s8/u8 types begins there.
  kernel.version = "8.4";
  kernel.accumulator = c.integer ? "s32" : "f32";
  kernel.n = c.n;
  kernel.steps = c.steps;
  kernel.aRegisters = c.aRegisters;
  kernel.instruction = "wgmma.mma_async.sync.aligned.m64n" +
                       std::to_string(c.n) + "k32." + wgmmaTypes(c);
  kernel.trailing = [&c](unsigned) {
    return c.integer ? std::string()
                     : ", " + std::to_string(c.scaleA) + ", " +
                           std::to_string(c.scaleB);
  };
  return wgmmaTestKernel(kernel, sharedBytes);
}

void runWgmmaCase(const WgmmaCase &c) {
  const unsigned kTotal = 32 * c.steps;
  std::mt19937 rng(c.seed);
  std::vector<uint8_t> a(64 * kTotal), b(kTotal * c.n);
  for (uint8_t &v : a)
    v = c.integer ? uint8_t(rng()) : drawByte(rng, c.fill, c.aE5m2);
  for (uint8_t &v : b)
    v = c.integer ? uint8_t(rng()) : drawByte(rng, c.fill, c.bE5m2);
  auto aAt = [&](unsigned m, unsigned k) { return a[m * kTotal + k]; };
  auto bAt = [&](unsigned k, unsigned n) { return b[k * c.n + n]; };
  // K-major tiles: a swizzled one holds one swizzle row of K.
  Tile ta, tb;
  for (Tile *t : {&ta, &tb}) {
    t->swizzle = c.swizzle;
    t->elem = 1;
    t->kTile = c.swizzle == Swz::None ? kTotal : spanOf(c.swizzle);
  }
  ASSERT_GE(ta.kTile, kTotal);
  ta.mn = 64;
  tb.mn = c.n;
  uint64_t aBytes = c.aRegisters ? 0 : ta.layOut();
  tb.base = (aBytes + 1023) / 1024 * 1024;
  uint64_t total = (tb.base + tb.layOut() + 1023) / 1024 * 1024;
  std::vector<uint8_t> image(total, 0);
  if (!c.aRegisters)
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned k = 0; k < kTotal; ++k)
        image[ta.byteAddress(m, k)] = aAt(m, k);
  for (unsigned n = 0; n < c.n; ++n)
    for (unsigned k = 0; k < kTotal; ++k)
      image[tb.byteAddress(n, k)] = bAt(k, n);
  std::vector<uint64_t> descs;
  for (unsigned s = 0; s < c.steps; ++s) {
    descs.push_back(c.aRegisters ? 0 : ta.descriptor(32 * s));
    descs.push_back(tb.descriptor(32 * s));
  }
  // C as 32-bit words: f32, or s32 (within +-10^5 of cBias, wrapped).
  std::vector<uint32_t> cFrag(128 * c.n / 2);
  std::vector<uint32_t> aFrag(128 * 4 * c.steps, 0);
  std::vector<double> cValues(64 * c.n);
  for (double &v : cValues)
    v = c.integer ? double(int32_t(
                        uint32_t(int64_t(rng() % 200001) - 100000 + c.cBias)))
                  : drawC(rng, c.fill);
  auto cBits = [&](double v) {
    if (c.integer)
      return uint32_t(int32_t(v));
    float f = float(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
  };
  for (unsigned t = 0; t < 128; ++t) {
    unsigned warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    for (unsigned i = 0; i < c.n / 2; ++i) {
      unsigned row = 16 * warp + g + 8 * ((i / 2) % 2);
      unsigned col = 8 * (i / 4) + 2 * q + i % 2;
      cFrag[t * c.n / 2 + i] = cBits(cValues[row * c.n + col]);
    }
    // A from registers: the mma.m16n8k32 A fragment of the warp's rows.
    for (unsigned s = 0; s < c.steps; ++s)
      for (unsigned i = 0; i < 16; ++i) {
        unsigned row = 16 * warp + ((i < 4 || (i >= 8 && i < 12)) ? g : g + 8);
        unsigned col = 4 * q + (i & 3) + (i >= 8 ? 16 : 0);
        aFrag[(t * c.steps + s) * 4 + i / 4] |= uint32_t{aAt(row, 32 * s + col)}
                                                << (8 * (i % 4));
      }
  }
  std::string ptx = byteWgmmaKernel(c, total);
  if (!kiln::testing::ptxasPath().empty()) {
    EXPECT_EQ(kiln::testing::runPtxas(ptx, "sm_90a"), "") << wgmmaTypes(c);
  }
  DirectMemory memory;
  size_t iImage = memory.add(image), iDesc = memory.add(descs),
         iC = memory.add(cFrag), iA = memory.add(aFrag);
  ParamBytes params;
  for (size_t i : {iImage, iDesc, iC, iA})
    params.addU64(DirectMemory::address(i));
  params.addU32(static_cast<uint32_t>(total / 4));
  params.addU32(c.scaleD ? 1 : 0);
  DirectResult result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory,
                                  0, /*countPerformance=*/true);
  ASSERT_EQ(result.error, "<success>") << wgmmaTypes(c);
  std::vector<float> d = memory.as<float>(iC);
  std::vector<int32_t> dInt = memory.as<int32_t>(iC);
  unsigned wrong = 0;
  for (unsigned t = 0; t < 128 && wrong < 5; ++t) {
    unsigned warp = t / 32, lane = t % 32;
    for (unsigned i = 0; i < c.n / 2 && wrong < 5; ++i) {
      unsigned row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
      unsigned col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      long double cv = c.scaleD ? cValues[row * c.n + col] : 0;
      if (c.integer) {
        // int64 per instruction, then wrapped or clamped to s32.
        int64_t acc = static_cast<int64_t>(cv);
        for (unsigned s = 0; s < c.steps; ++s) {
          for (unsigned k = 32 * s; k < 32 * s + 32; ++k)
            acc += static_cast<int64_t>(byteValue(c, aAt(row, k), false)) *
                   static_cast<int64_t>(byteValue(c, bAt(k, col), true));
          acc = c.satfinite ? std::clamp<int64_t>(acc, INT32_MIN, INT32_MAX)
                            : int32_t(uint32_t(uint64_t(acc)));
        }
        if (dInt[t * c.n / 2 + i] != acc) {
          ADD_FAILURE() << wgmmaTypes(c) << " D(" << row << ", " << col
                        << ") = " << dInt[t * c.n / 2 + i] << ", want " << acc;
          ++wrong;
        }
        continue;
      }
      std::vector<long double> terms;
      for (unsigned k = 0; k < kTotal; ++k)
        terms.push_back(static_cast<long double>(c.scaleA * c.scaleB) *
                        byteValue(c, aAt(row, k), false) *
                        byteValue(c, bAt(k, col), true));
      ::testing::AssertionResult ok =
          withinBound(d[t * c.n / 2 + i], cv, terms);
      if (!ok) {
        ADD_FAILURE() << wgmmaTypes(c) << " D(" << row << ", " << col
                      << "): " << ok.message();
        ++wrong;
      }
    }
  }
  EXPECT_EQ(result.stats.mmaFlops, 2ull * 64 * c.n * kTotal);
}

// Every signedness pair, K = 128 through the 128B swizzle and K = 64 with
// A in registers; full-range bytes.
TEST(EmuInt8WgmmaTest, EverySignednessExact) {
  for (bool aUnsigned : {false, true})
    for (bool bUnsigned : {false, true}) {
      WgmmaCase c;
      c.integer = true;
      c.aE5m2 = aUnsigned;
      c.bE5m2 = bUnsigned;
      c.seed = 21 + 2 * aUnsigned + bUnsigned;
      runWgmmaCase(c);
      c.aRegisters = true;
      c.steps = 2;
      c.n = 16;
      c.swizzle = Swz::B64;
      runWgmmaCase(c);
    }
}

// C near the s32 limits: the sums wrap, or clamp with .satfinite (per
// instruction); scale-d = 0 ignores C.
TEST(EmuInt8WgmmaTest, OverflowWrapsOrSaturatesScaleDZero) {
  WgmmaCase c;
  c.integer = true;
  c.aE5m2 = c.bE5m2 = true; // u8 x u8: every product positive
  c.n = 24;
  c.steps = 2;
  c.swizzle = Swz::None;
  c.cBias = INT32_MAX - 300000;
  runWgmmaCase(c);
  c.satfinite = true;
  runWgmmaCase(c);
  c.satfinite = false;
  c.scaleD = false;
  runWgmmaCase(c);
}

TEST(EmuFp8MmaTest, WgmmaEveryTypePairSwizzle128KLoop) {
  for (bool aE5m2 : {false, true})
    for (bool bE5m2 : {false, true}) {
      WgmmaCase c;
      c.aE5m2 = aE5m2;
      c.bE5m2 = bE5m2;
      c.seed = 3 + 2 * aE5m2 + bE5m2;
      runWgmmaCase(c); // K = 128: one 128-byte row, 32-byte steps
    }
}

TEST(EmuFp8MmaTest, WgmmaSwizzle64And32NoSwizzleN8To256) {
  WgmmaCase c;
  c.swizzle = Swz::B64;
  c.steps = 2;
  c.n = 256;
  runWgmmaCase(c);
  c.swizzle = Swz::B32;
  c.steps = 1;
  c.n = 24;
  c.bE5m2 = true;
  runWgmmaCase(c);
  c.swizzle = Swz::None;
  c.steps = 3;
  c.n = 8;
  c.scaleD = false;
  runWgmmaCase(c);
}

TEST(EmuFp8MmaTest, WgmmaAFromRegistersNegatedScalesExtremes) {
  WgmmaCase c;
  c.aRegisters = true;
  c.n = 32;
  c.steps = 2;
  c.scaleA = -1;
  c.fill = Fill::Extremes;
  c.aE5m2 = true;
  runWgmmaCase(c);
  c.scaleA = 1;
  c.scaleB = -1;
  c.fill = Fill::Subnormals;
  c.aE5m2 = false;
  c.swizzle = Swz::B64;
  runWgmmaCase(c);
}

// wgmma forms the emulator does not model are parse errors.
TEST(EmuFp8MmaTest, WgmmaUnmodelledFormsRefused) {
  WgmmaCase c;
  c.n = 8;
  c.steps = 1;
  std::string ptx = byteWgmmaKernel(c, 4096);
  auto refused = [&](const std::string &from, const std::string &to,
                     const char *why) {
    std::string bad = ptx;
    bad.replace(bad.find(from), from.size(), to);
    Expected<emu::Module> module = emu::parsePtx(bad);
    ASSERT_FALSE(module) << to;
    EXPECT_THAT(module.error().message(), HasSubstr(why)) << to;
  };
  // f16 accumulators.
  refused("m64n8k32.f32.e4m3", "m64n8k32.f16.e4m3", "is not emulated");
  // fp8 with K = 16.
  refused("m64n8k32.f32", "m64n8k16.f32", "m64nNk32 for e4m3, e5m2");
  // e4m3 with bf16.
  refused("f32.e4m3.e4m3", "f32.e4m3.bf16", "is not emulated");
  // Transpose flags, which fp8 does not take.
  refused("%p2, 1, 1;", "%p2, 1, 1, 0, 0;", "operand");
  // .satfinite on float types; s8 with f32 or s32 with f16 accumulators.
  refused("m64n8k32.f32", "m64n8k32.satfinite.f32", "is not emulated");
  refused("f32.e4m3.e4m3", "f32.s8.s8", "is not emulated");
  refused("f32.e4m3.e4m3", "s32.s8.f16", "is not emulated");
  // Integer wgmma takes no scale operands.
  refused("f32.e4m3.e4m3 \t", "s32.s8.s8 \t", "operand");
}

} // namespace

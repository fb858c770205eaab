//===- EmuInt8MmaTest.cpp - mma.sync s8/u8 on the emulator ----------------===//
//
// The int8 fragment layouts are written here per element from the PTX ISA's
// tables ("Matrix Fragments for mma.m16n8k32" and "mma.m16n8k16" with .s8 or
// .u8: element a_i of A lies at row g (i < 4 or 8 <= i < 12, else g + 8),
// column 4t + (i & 3) (+ 16 for i >= 8); b_i of B at row 4t + (i & 3)
// (+ 16 for i >= 4), column g; c_i/d_i at row g (+ 8 for i >= 2), column
// 2t + (i & 1)), independently of the emulator's register-wise reading. The
// expected D = A * B + C is computed in int64 and wrapped (or, with
// .satfinite, clamped) to s32.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtils.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// Full-range operands, so a swapped sign, byte or row shows.
int aValue(int m, int k, bool isSigned) {
  int v = (m * 37 + k * 101 + 11) % 256;
  return isSigned ? v - 128 : v;
}
int bValue(int k, int n, bool isSigned) {
  int v = (k * 59 + n * 83 + 7) % 256;
  return isSigned ? v - 128 : v;
}
int64_t cValue(int m, int n) { return (m * 7919 + n * 104729) % 200001 - 100000; }

struct Case {
  unsigned k;
  bool aSigned, bSigned;
  bool satfinite = false;
  /// Added to every C element (to push sums past the s32 range).
  int64_t cBias = 0;
};

std::string listRegs(unsigned first, unsigned count) {
  std::string s = "{";
  for (unsigned i = 0; i < count; ++i)
    s += (i ? ", %r" : "%r") + std::to_string(first + i);
  return s + "}";
}

void runCase(const Case &cs) {
  const unsigned numA = cs.k / 8, numB = cs.k / 16, numC = 4;
  const unsigned perLane = numA + numB + numC;
  std::vector<uint32_t> regs(32 * perLane, 0);
  auto c = [&](int m, int n) { return cValue(m, n) + cs.cBias; };
  for (unsigned lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    uint32_t *r = &regs[lane * perLane];
    for (unsigned i = 0; i < 4 * numA; ++i) {
      int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
      int col = 4 * t + (i & 3) + (i >= 8 ? 16 : 0);
      uint8_t byte = static_cast<uint8_t>(aValue(row, col, cs.aSigned));
      r[i / 4] |= static_cast<uint32_t>(byte) << (8 * (i % 4));
    }
    for (unsigned i = 0; i < 4 * numB; ++i) {
      int row = 4 * t + (i & 3) + (i >= 4 ? 16 : 0);
      uint8_t byte = static_cast<uint8_t>(bValue(row, g, cs.bSigned));
      r[numA + i / 4] |= static_cast<uint32_t>(byte) << (8 * (i % 4));
    }
    for (unsigned i = 0; i < 4; ++i)
      r[numA + numB + i] = static_cast<uint32_t>(
          static_cast<int32_t>(c(i < 2 ? g : g + 8, 2 * t + (i & 1))));
  }
  std::string instruction =
      "mma.sync.aligned.m16n8k" + std::to_string(cs.k) + ".row.col" +
      (cs.satfinite ? ".satfinite" : "") + ".s32." +
      (cs.aSigned ? "s8" : "u8") + "." + (cs.bSigned ? "s8" : "u8") + ".s32";
  std::string body = "\t" + instruction + " \t" + listRegs(20, 4) + ", " +
                     listRegs(1, numA) + ", " + listRegs(1 + numA, numB) +
                     ", " + listRegs(1 + numA + numB, numC) + ";\n";
  std::vector<uint32_t> d = runWords(body, perLane, 4, regs, 32);
  ASSERT_EQ(d.size(), 32u * 4) << instruction;
  for (unsigned lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      int m = i < 2 ? g : g + 8, n = 2 * t + (i & 1);
      int64_t want = static_cast<int32_t>(c(m, n));
      for (unsigned k = 0; k < cs.k; ++k)
        want += int64_t{aValue(m, k, cs.aSigned)} * bValue(k, n, cs.bSigned);
      int32_t expected =
          cs.satfinite
              ? static_cast<int32_t>(std::clamp<int64_t>(want, INT32_MIN,
                                                         INT32_MAX))
              : static_cast<int32_t>(static_cast<uint32_t>(want));
      ASSERT_EQ(static_cast<int32_t>(d[lane * 4 + i]), expected)
          << instruction << " lane " << lane << " d" << i;
    }
  }
}

TEST(EmuInt8MmaTest, M16N8K32EverySignedness) {
  for (bool aSigned : {true, false})
    for (bool bSigned : {true, false})
      runCase({32, aSigned, bSigned});
}

TEST(EmuInt8MmaTest, M16N8K16EverySignedness) {
  for (bool aSigned : {true, false})
    for (bool bSigned : {true, false})
      runCase({16, aSigned, bSigned});
}

// C near INT32_MAX: without .satfinite the s32 sum wraps, with it it clamps.
TEST(EmuInt8MmaTest, OverflowWrapsOrSaturates) {
  runCase({32, false, false, /*satfinite=*/false, INT32_MAX - 200000});
  runCase({32, false, false, /*satfinite=*/true, INT32_MAX - 200000});
  runCase({16, true, false, /*satfinite=*/true, INT32_MIN + 200000});
}

// An s8 x f16 mma is no shape the ISA has: a clear error, not a guess.
TEST(EmuInt8MmaTest, MixedFloatTypesRejected) {
  std::string body = "\tmma.sync.aligned.m16n8k32.row.col.s32.s8.f16.s32 \t" +
                     listRegs(20, 4) + ", " + listRegs(1, 4) + ", " +
                     listRegs(5, 2) + ", " + listRegs(7, 4) + ";\n";
  Buffer in = Buffer::zeros<uint32_t>(32 * 10);
  Buffer out = Buffer::zeros<uint32_t>(32 * 4);
  std::string result = runPtx(wordKernel(body, 10, 4), "k", {1, 1, 1},
                              {32, 1, 1}, {&in, &out});
  EXPECT_THAT(result, HasSubstr("mma.sync"));
}

// cvt to .s8 into a wider register sign-extends to the register's width:
// LLVM's NVPTX backend unpacks int8 weights with `cvt.s8.s32 %rs, %r`
// and reads %rs as .s16 (found through a quantized SqueezeNet whose
// negative int8 weights came out as +256).
TEST(EmuInt8MmaTest, NarrowSignedConversionSignExtends) {
  std::string body = "\tcvt.s8.s32 \t%rs1, %r1;\n"
                     "\tcvt.rn.f32.s16 \t%f1, %rs1;\n"
                     "\tmov.b32 \t%r20, %f1;\n"
                     "\tcvt.s8.s32 \t%r21, %r1;\n"
                     "\tcvt.u8.s32 \t%r22, %r1;\n"
                     "\tcvt.s16.s32 \t%r23, %r1;\n";
  std::vector<uint32_t> in{0xf0u, 0x7fu, 0x180u, 0x12345678u, 0x8000u};
  std::vector<uint32_t> out = runWords(body, 1, 4, in, 32);
  ASSERT_EQ(out.size(), 4u * in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    int32_t byte = static_cast<int8_t>(in[i] & 0xff);
    float asFloat;
    std::memcpy(&asFloat, &out[4 * i], 4);
    EXPECT_EQ(asFloat, static_cast<float>(byte)) << "input " << in[i];
    EXPECT_EQ(static_cast<int32_t>(out[4 * i + 1]), byte) << "input " << in[i];
    EXPECT_EQ(out[4 * i + 2], in[i] & 0xffu) << "input " << in[i];
    EXPECT_EQ(static_cast<int32_t>(out[4 * i + 3]),
              static_cast<int16_t>(in[i] & 0xffff))
        << "input " << in[i];
  }
}

} // namespace

//===- EmuWgmmaTest.cpp - wgmma.mma_async on the emulator -----------------===//
//
// The shared-memory images are built here from the PTX ISA's canonical
// layouts ("Asynchronous Warpgroup Level Matrix Shared Memory Layout",
// written as CuTe layouts there), tile by tile, and swizzled with the
// definition of CuTe's Swizzle<B, 4, 3> (offset ^ ((offset & (2^B - 1) <<
// 7) >> 3) on byte addresses), independently of the emulator's own
// address function. The register fragments follow the ISA's figures for
// wgmma .m64nNk16/.m64nNk8 (D: row 16 * warp + lane / 4 + 8 * ((i / 2) %
// 2), column 8 * (i / 4) + 2 * (lane % 4) + i % 2; A from registers: the
// mma.m16n8k16 / m16n8k8 A fragment of the warp's 16 rows). Values are
// small integers, so the float64 reference D = scale * A * B + C is exact
// and compared for equality.
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"
#include "WgmmaSharedLayouts.h"
#include "WgmmaTestKernel.h"

#include <gmock/gmock.h>

#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

enum class Elem { F16, BF16, TF32 };
unsigned elemBytes(Elem e) { return e == Elem::TF32 ? 4 : 2; }

uint32_t encode(Elem e, double v) {
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (e == Elem::BF16)
    return bits >> 16; // exact for the small integers used
  if (e == Elem::TF32)
    return bits;
  _Float16 h = static_cast<_Float16>(f);
  uint16_t hb;
  std::memcpy(&hb, &h, 2);
  return hb;
}

struct Case {
  Elem elem = Elem::BF16;
  unsigned n = 64;
  unsigned steps = 1; // K = steps * k
  bool aRegisters = false;
  bool transA = false, transB = false;
  Swz swizzleA = Swz::B128, swizzleB = Swz::B128;
  bool scaleD = true;
  int scaleA = 1, scaleB = 1;
};

double aValue(unsigned m, unsigned k) {
  return double((m * 3 + k * 5) % 7) - 3;
}
double bValue(unsigned k, unsigned n) {
  return double((k * 2 + n * 3) % 5) - 2;
}
double cValue(unsigned m, unsigned n) { return double((m + 2 * n) % 9) - 4; }

/// The kernel (WgmmaTestKernel.h) for a case.
std::string wgmmaKernel(const Case &c, uint64_t sharedBytes) {
  unsigned k = c.elem == Elem::TF32 ? 8 : 16;
  const char *types = c.elem == Elem::TF32  ? "f32.tf32.tf32"
                      : c.elem == Elem::F16 ? "f32.f16.f16"
                                            : "f32.bf16.bf16";
  WgmmaTestKernel kernel;
  kernel.n = c.n;
  kernel.steps = c.steps;
  kernel.aRegisters = c.aRegisters;
  kernel.instruction = "wgmma.mma_async.sync.aligned.m64n" +
                       std::to_string(c.n) + "k" + std::to_string(k) + "." +
                       types;
  kernel.trailing = [&c](unsigned) {
    std::string s =
        ", " + std::to_string(c.scaleA) + ", " + std::to_string(c.scaleB);
    if (c.elem != Elem::TF32) {
      if (!c.aRegisters)
        s += std::string(", ") + (c.transA ? "1" : "0");
      s += std::string(", ") + (c.transB ? "1" : "0");
    }
    return s;
  };
  return wgmmaTestKernel(kernel, sharedBytes);
}

/// Runs a case; returns "<success>" after checking D, else the error.
std::string runCase(const Case &c, unsigned threads = 128) {
  const unsigned kStep = c.elem == Elem::TF32 ? 8 : 16;
  const unsigned kTotal = kStep * c.steps;
  const unsigned elem = elemBytes(c.elem);
  // K-major swizzled tiles hold one swizzle row of K; the others hold the
  // whole K.
  auto kTileOf = [&](bool mnMajor, Swz swz) {
    return (!mnMajor && swz != Swz::None) ? spanOf(swz) / elem : kTotal;
  };
  Tile a, b;
  a.mnMajor = c.transA;
  a.swizzle = c.swizzleA;
  a.mn = 64;
  a.elem = elem;
  a.kTile = kTileOf(a.mnMajor, a.swizzle);
  b.mnMajor = c.transB;
  b.swizzle = c.swizzleB;
  b.mn = c.n;
  b.elem = elem;
  b.kTile = kTileOf(b.mnMajor, b.swizzle);
  EXPECT_GE(a.kTile, kTotal);
  EXPECT_GE(b.kTile, kTotal);
  uint64_t aBytes = c.aRegisters ? 0 : a.layOut();
  b.layOut();
  b.base = (aBytes + 1023) / 1024 * 1024;
  uint64_t bBytes = b.layOut();
  uint64_t total = b.base + bBytes;
  total = (total + 1023) / 1024 * 1024;
  std::vector<uint8_t> image(total, 0xee);
  auto put = [&](uint64_t address, uint32_t bits) {
    EXPECT_LE(address + elem, total);
    std::memcpy(image.data() + address, &bits, elem);
  };
  // tf32: low mantissa bits the MMA ignores (2^-15 is below tf32's
  // precision at these magnitudes), so the exact result stays that of the
  // integers.
  auto stored = [&](double v) {
    uint32_t bits = encode(c.elem, v);
    if (c.elem == Elem::TF32 && v != 0)
      bits |= 0x40;
    return bits;
  };
  if (!c.aRegisters)
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned k = 0; k < kTotal; ++k)
        put(a.byteAddress(m, k), stored(aValue(m, k)));
  for (unsigned n = 0; n < c.n; ++n)
    for (unsigned k = 0; k < kTotal; ++k)
      put(b.byteAddress(n, k), stored(bValue(k, n)));
  // Descriptors per step.
  std::vector<uint64_t> descs;
  for (unsigned s = 0; s < c.steps; ++s) {
    descs.push_back(c.aRegisters ? 0 : a.descriptor(s * kStep));
    descs.push_back(b.descriptor(s * kStep));
  }
  // C in the D fragment layout, and A's register fragments.
  unsigned groups = threads / 128;
  std::vector<float> cFrag(threads * c.n / 2);
  std::vector<uint32_t> aFrag(threads * 4 * c.steps);
  for (unsigned t = 0; t < threads; ++t) {
    unsigned warp = (t / 32) % 4, lane = t % 32;
    for (unsigned i = 0; i < c.n / 2; ++i) {
      unsigned row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
      unsigned col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      cFrag[t * c.n / 2 + i] = static_cast<float>(cValue(row, col));
    }
    for (unsigned s = 0; s < c.steps; ++s)
      for (unsigned r = 0; r < 4; ++r) {
        unsigned g = lane / 4, q = lane % 4;
        uint32_t word = 0;
        if (c.elem ==
            Elem::TF32) { // a0 (g,q) a1 (g+8,q) a2 (g,q+4) a3 (g+8,q+4)
          unsigned row = 16 * warp + g + 8 * (r % 2), col = q + 4 * (r / 2);
          word = stored(aValue(row, s * kStep + col));
        } else { // a{2r}, a{2r+1}: row g (+8 odd r), cols 2q, 2q+1 (+8 r>=2)
          unsigned row = 16 * warp + g + 8 * (r % 2);
          unsigned col = 2 * q + 8 * (r / 2);
          word = encode(c.elem, aValue(row, s * kStep + col)) |
                 (encode(c.elem, aValue(row, s * kStep + col + 1)) << 16);
        }
        aFrag[(t * c.steps + s) * 4 + r] = word;
      }
  }
  DirectMemory memory;
  size_t iImage = memory.add(image);
  size_t iDesc = memory.add(descs);
  size_t iC = memory.add(cFrag);
  size_t iA = memory.add(aFrag);
  ParamBytes params;
  params.addU64(DirectMemory::address(iImage));
  params.addU64(DirectMemory::address(iDesc));
  params.addU64(DirectMemory::address(iC));
  params.addU64(DirectMemory::address(iA));
  params.addU32(static_cast<uint32_t>(total / 4));
  params.addU32(c.scaleD ? 1 : 0);
  DirectResult result = runDirect(wgmmaKernel(c, total), {1, 1, 1},
                                  {threads, 1, 1}, params, memory, 0,
                                  /*countPerformance=*/true);
  if (result.error != "<success>")
    return result.error;
  std::vector<float> d = memory.as<float>(iC);
  unsigned wrong = 0;
  for (unsigned t = 0; t < threads && wrong < 5; ++t) {
    unsigned warp = (t / 32) % 4, lane = t % 32;
    for (unsigned i = 0; i < c.n / 2; ++i) {
      unsigned row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
      unsigned col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      double want = c.scaleD ? cValue(row, col) : 0;
      for (unsigned k = 0; k < kTotal; ++k)
        want += c.scaleA * c.scaleB * aValue(row, k) * bValue(k, col);
      if (d[t * c.n / 2 + i] != static_cast<float>(want)) {
        ADD_FAILURE() << "D(" << row << ", " << col
                      << ") = " << d[t * c.n / 2 + i] << ", want " << want
                      << " (thread " << t << ")";
        ++wrong;
      }
    }
  }
  // Counters: 2*64*N*K per wgmma per warpgroup, 32 thread-instructions of
  // the class per warp.
  EXPECT_EQ(result.stats.mmaFlops, 2ull * 64 * c.n * kStep * c.steps * groups);
  EXPECT_EQ(result.stats.mmaInstructions, 128ull * c.steps * groups);
  return "<success>";
}

TEST(EmuWgmmaTest, KMajorSwizzle128KLoopAccumulates) {
  Case c;
  c.elem = Elem::BF16;
  c.n = 64;
  c.steps = 4; // K = 64: a 128-byte row, descriptors advanced by 32 bytes
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, NoSwizzleN8ScaleDZero) {
  Case c;
  c.elem = Elem::F16;
  c.n = 8;
  c.swizzleA = c.swizzleB = Swz::None;
  c.scaleD = false;
  c.steps = 2;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, Swizzle64WithMNMajorB) {
  Case c;
  c.elem = Elem::BF16;
  c.n = 128;
  c.swizzleA = c.swizzleB = Swz::B64;
  c.transB = true;
  c.steps = 2;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, Swizzle32WithMNMajorBN256) {
  Case c;
  c.elem = Elem::F16;
  c.n = 256;
  c.swizzleA = c.swizzleB = Swz::B32;
  c.transB = true;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, MNMajorAAndBSwizzle128N256) {
  Case c;
  c.elem = Elem::BF16;
  c.n = 256;
  c.transA = c.transB = true;
  c.steps = 2;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, MNMajorNoSwizzleAndNegatedScales) {
  Case c;
  c.elem = Elem::F16;
  c.n = 24;
  c.transA = c.transB = true;
  c.swizzleA = c.swizzleB = Swz::None;
  c.scaleA = -1;
  c.steps = 2;
  EXPECT_EQ(runCase(c), "<success>");
  c.scaleA = 1;
  c.scaleB = -1;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, AFromRegisters) {
  Case c;
  c.elem = Elem::BF16;
  c.n = 16;
  c.aRegisters = true;
  c.scaleA = -1;
  c.steps = 3;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, Tf32DescriptorsAndRegisters) {
  Case c;
  c.elem = Elem::TF32;
  c.n = 32;
  c.steps = 4; // K = 32 tf32: one 128-byte row
  EXPECT_EQ(runCase(c), "<success>");
  c.aRegisters = true;
  c.swizzleB = Swz::B64;
  c.steps = 2;
  EXPECT_EQ(runCase(c), "<success>");
}

TEST(EmuWgmmaTest, TwoWarpgroups) {
  Case c;
  c.n = 32;
  c.steps = 2;
  EXPECT_EQ(runCase(c, 256), "<success>");
}

TEST(EmuWgmmaTest, ReadingAnAccumulatorBeforeTheWaitFaults) {
  Case c;
  c.n = 8;
  std::string ptx = wgmmaKernel(c, 4096);
  // Store an accumulator between the commit and the wait.
  size_t wait = ptx.find("\twgmma.wait_group.sync.aligned 0;");
  ptx.insert(wait, "\tst.global.f32 \t[%rd8], %f1;\n");
  DirectMemory memory;
  size_t buffer = memory.add(std::vector<uint8_t>(1 << 16, 0));
  ParamBytes params;
  for (int i = 0; i < 4; ++i)
    params.addU64(DirectMemory::address(buffer));
  params.addU32(0);
  params.addU32(1);
  DirectResult result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("reads an accumulator register of the "
                                      "wgmma.mma_async at PTX line"));
  EXPECT_THAT(result.error, HasSubstr("(st.global.f32)"));
  // Writing one (a mov into it) too.
  ptx = wgmmaKernel(c, 4096);
  ptx.insert(ptx.find("\twgmma.commit_group"),
             "\tmov.f32 \t%f2, 0f00000000;\n");
  result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("writes an accumulator register"));
}

TEST(EmuWgmmaTest, ReadingSharedMemoryACopyStillWritesFaults) {
  Case c;
  c.n = 8;
  std::string ptx = wgmmaKernel(c, 4096);
  // A cp.async into the A tile, never waited for, before the wgmma.
  ptx.insert(ptx.find("\twgmma.fence"),
             "\tcp.async.cg.shared.global \t[%r4], [%rd1], 16;\n"
             "\tcp.async.commit_group;\n");
  DirectMemory memory;
  size_t buffer = memory.add(std::vector<uint8_t>(1 << 16, 0));
  ParamBytes params;
  for (int i = 0; i < 4; ++i)
    params.addU64(DirectMemory::address(buffer));
  params.addU32(0);
  params.addU32(1);
  DirectResult result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("which a cp.async copy has not written "
                                      "yet"));
  EXPECT_THAT(result.error, HasSubstr("reads A(0, 0) at shared offset 0"));
}

TEST(EmuWgmmaTest, NeedsAWholeWarpgroupAndCanonicalDescriptors) {
  Case c;
  c.n = 8;
  std::string ptx = wgmmaKernel(c, 4096);
  DirectMemory memory;
  std::vector<uint64_t> descs = {0, 0};
  size_t buffer = memory.add(std::vector<uint8_t>(1 << 16, 0));
  size_t desc = memory.add(descs);
  ParamBytes params;
  params.addU64(DirectMemory::address(buffer));
  params.addU64(DirectMemory::address(desc));
  params.addU64(DirectMemory::address(buffer));
  params.addU64(DirectMemory::address(buffer));
  params.addU32(0);
  params.addU32(1);
  DirectResult result = runDirect(ptx, {1, 1, 1}, {64, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("needs a whole warpgroup (threads "
                                      "0..127), the block has 64 threads"));
  memory.buffers[desc] = std::vector<uint8_t>(16, 0);
  uint64_t withBase = 1ull << 49;
  std::memcpy(memory.buffers[desc].data(), &withBase, 8);
  result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("the A descriptor's matrix base offset "
                                      "1 is not emulated"));
}

TEST(EmuWgmmaTest, UnsupportedShapesAreParseErrors) {
  Case c;
  c.n = 8;
  std::string ptx = wgmmaKernel(c, 4096);
  std::string bad = ptx;
  bad.replace(bad.find("m64n8k16"), 8, "m64n12k16");
  Expected<emu::Module> module = emu::parsePtx(bad);
  ASSERT_FALSE(module);
  EXPECT_THAT(module.error().message(), HasSubstr("N = 8..256 in steps of 8"));
  bad = ptx;
  bad.replace(bad.find("f32.bf16.bf16"), 13, "f16.bf16.bf16");
  module = emu::parsePtx(bad);
  ASSERT_FALSE(module);
  EXPECT_THAT(module.error().message(), HasSubstr("is not emulated"));
}

} // namespace

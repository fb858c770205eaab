//===- EmuNvrtcPipelineTest.cpp - A compiler-made sm_90 kernel on emu -----===//
//
// Inputs/wgmma_tma_pipeline.ptx is nvcc's (CUDA 13, -arch=sm_90a) PTX for
// Inputs/wgmma_tma_pipeline.cu: a warp-specialized bf16 GEMM tile with the
// spellings NVRTC and CUTLASS-style inline PTX produce (__grid_constant__
// tensor maps through cvta.param, elect.sync with a sink, setmaxnreg,
// try_wait loops whose labels repeat in every inlined asm block, TMA with
// an L2 cache hint, full/empty mbarrier rings, wgmma with a setp'd
// scale-d). D = A * B for a 64 x K by K x 64 product is checked against a
// float64 reference; the values are small integers, so exactly. Under the
// race check (RaceCheck.h) it is clean; with the consumers' empty-barrier
// arrive moved before their wgmma.wait_group (the stage handed back while
// the wgmma may still read it) the numbers stay right on emu and the check
// reports the producer's next TMA copy into that stage.
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include "emu/TensorMap.h"

#include <gmock/gmock.h>

#include <fstream>
#include <regex>
#include <sstream>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

std::string readFixture(const std::string &name) {
  std::ifstream in(std::string(KILN_RUNTIME_TEST_INPUTS) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

uint16_t bf16(double v) {
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16); // exact for small integers
}

emu::EmuTensorMap kMajorMap(uint64_t address, uint32_t k) {
  emu::EmuTensorMap map;
  map.dataType = 9; // bf16
  map.rank = 2;
  map.swizzle = 3; // 128B
  map.globalAddress = address;
  map.globalDims[0] = k;
  map.globalDims[1] = 64;
  map.globalStrides[0] = 2ull * k;
  map.boxDims[0] = 64;
  map.boxDims[1] = 64;
  map.elementStrides[0] = map.elementStrides[1] = 1;
  return map;
}

/// Runs the tile (K = 256) and checks D; "<success>" or the error.
std::string runTile(const std::string &ptx, bool checkRaces) {
  // K = 256: four stages of 64 through a 2-deep ring, so the producer
  // waits on the empty barriers' second phase.
  const uint32_t k = 256;
  auto aValue = [](unsigned m, unsigned kk) {
    return double((m * 5 + kk * 3) % 9) - 4;
  };
  auto bValue = [](unsigned kk, unsigned n) {
    return double((kk * 7 + n * 2) % 5) - 2;
  };
  std::vector<uint16_t> a(64 * k), bt(64 * k);
  for (unsigned r = 0; r < 64; ++r)
    for (unsigned kk = 0; kk < k; ++kk) {
      a[r * k + kk] = bf16(aValue(r, kk));
      bt[r * k + kk] = bf16(bValue(kk, r));
    }
  DirectMemory memory;
  size_t iA = memory.add(a), iB = memory.add(bt);
  size_t iD = memory.add(std::vector<float>(64 * 64, -1.0f));
  emu::EmuTensorMap mapA = kMajorMap(DirectMemory::address(iA), k);
  emu::EmuTensorMap mapB = kMajorMap(DirectMemory::address(iB), k);
  ParamBytes params;
  params.add(&mapA, sizeof(mapA), 128);
  params.add(&mapB, sizeof(mapB), 128);
  params.addU64(DirectMemory::address(iD));
  params.addU32(k);
  DirectResult result =
      runDirect(ptx, {1, 1, 1}, {256, 1, 1}, params, memory, 0,
                /*countPerformance=*/true, /*checkShared=*/true, Dim3(),
                /*explicitCluster=*/false, checkRaces);
  if (result.error != "<success>")
    return result.error;
  std::vector<float> d = memory.as<float>(iD);
  unsigned wrong = 0;
  for (unsigned m = 0; m < 64 && wrong < 5; ++m)
    for (unsigned n = 0; n < 64; ++n) {
      double want = 0;
      for (unsigned kk = 0; kk < k; ++kk)
        want += aValue(m, kk) * bValue(kk, n);
      if (d[m * 64 + n] != static_cast<float>(want)) {
        ADD_FAILURE() << "D(" << m << ", " << n << ") = " << d[m * 64 + n]
                      << ", want " << want;
        ++wrong;
      }
    }
  EXPECT_EQ(result.stats.mmaFlops, 2ull * 64 * 64 * k);
  return "<success>";
}

TEST(EmuNvrtcPipelineTest, WarpSpecializedTmaWgmmaTile) {
  std::string ptx = readFixture("wgmma_tma_pipeline.ptx");
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(runTile(ptx, /*checkRaces=*/false), "<success>");
}

TEST(EmuNvrtcPipelineTest, RaceCheckIsCleanAndCatchesAStageReleasedEarly) {
  std::string ptx = readFixture("wgmma_tma_pipeline.ptx");
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(runTile(ptx, /*checkRaces=*/true), "<success>");
  // Each consumer iteration's wgmma.wait_group moved after its arrive on
  // the stage's empty barrier.
  std::regex early(R"((\twgmma\.wait_group\.sync\.aligned 0;\n)((?:.*\n)*?.*mbarrier\.arrive\.release\.cta\.shared::cta\.b64 _, \[%r\d+\];\n))");
  std::string planted = std::regex_replace(ptx, early, "$2$1");
  ASSERT_NE(planted, ptx);
  EXPECT_EQ(runTile(planted, /*checkRaces=*/false), "<success>");
  std::string report = runTile(planted, /*checkRaces=*/true);
  EXPECT_THAT(report, ::testing::HasSubstr(
                          "thread (0,0,0), PTX line 671 "
                          "(cp.async.bulk.tensor.2d.shared::cluster.global."
                          "mbarrier::complete_tx::bytes.L2::cache_hint): data "
                          "race at shared offset"));
  EXPECT_THAT(report, ::testing::HasSubstr(
                          "this TMA/bulk copy and the wgmma.mma_async of warp "
                          "4 (thread (128,0,0))"));
  EXPECT_THAT(report, ::testing::HasSubstr(
                          "the wgmma.wait_group that retires it comes first"));
}

} // namespace

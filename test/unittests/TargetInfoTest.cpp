//===- TargetInfoTest.cpp - The compiler's target facts --------------------===//
//
// TargetInfo is the compiler's only source of SM counts and shared-memory
// sizes, so it must give the target table's figures, and those must be the
// GPUs' own (NVIDIA's CUDA C++ Programming Guide, "Technical
// Specifications per Compute Capability"; the H200 and A100 datasheets for
// the SM counts).
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/TargetInfo.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

TEST(TargetInfoTest, ChipsAreTheTablesGpus) {
  const TargetInfo *sm90 = TargetInfo::forChip("sm_90");
  ASSERT_NE(sm90, nullptr);
  EXPECT_EQ(sm90->name(), "sm_90-h200");
  EXPECT_EQ(sm90->sm(), 90u);
  EXPECT_EQ(sm90->smCount(), 132u);
  // Compute capability 9.0: 227 KB per block (opt-in), 228 KB per SM.
  EXPECT_EQ(sm90->maxSharedBytesPerBlock(), 227u * 1024);
  EXPECT_EQ(sm90->sharedBytesPerSm(), 228u * 1024);
  EXPECT_EQ(sm90->registersPerSm(), 65536u);
  EXPECT_EQ(sm90->maxThreadsPerSm(), 2048u);
  EXPECT_TRUE(sm90->hasWgmma());
  // sm_90a compiles for the same GPU.
  EXPECT_EQ(TargetInfo::forChip("sm_90a"), sm90);

  const TargetInfo *sm80 = TargetInfo::forChip("sm_80");
  ASSERT_NE(sm80, nullptr);
  EXPECT_EQ(sm80->smCount(), 108u);
  // Compute capability 8.0: 163 KB per block, 164 KB per SM.
  EXPECT_EQ(sm80->maxSharedBytesPerBlock(), 163u * 1024);
  EXPECT_EQ(sm80->sharedBytesPerSm(), 164u * 1024);
  EXPECT_FALSE(sm80->hasWgmma());
  EXPECT_TRUE(sm80->hasMmaSync());
}

TEST(TargetInfoTest, FiguresAreTheRuntimesTable) {
  // The runtime's performance model reads the same embedded table.
  for (const char *chip : {"sm_80", "sm_90"}) {
    runtime::Expected<runtime::GpuTarget> runtimeView =
        runtime::findTarget(runtime::builtinTargetTable(), chip);
    ASSERT_TRUE(runtimeView) << runtimeView.error().message();
    const TargetInfo *info = TargetInfo::forChip(chip);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name(), runtimeView->name);
    EXPECT_EQ(info->smCount(), runtimeView->smCount);
    EXPECT_EQ(info->maxSharedBytesPerBlock(),
              runtimeView->maxSharedBytesPerBlock);
    EXPECT_EQ(info->dramBandwidthGBps(), runtimeView->dramBandwidthGBps);
  }
}

TEST(TargetInfoTest, UnknownChipsAndNearestSm) {
  EXPECT_EQ(TargetInfo::forChip("sm_75"), nullptr);
  EXPECT_EQ(TargetInfo::forChip("gfx90a"), nullptr);
  EXPECT_EQ(TargetInfo::supportedChips(), "sm_80, sm_90");
  // A heuristic asked about another sm assumes the nearest GPU below it
  // (the lowest above when there is none).
  EXPECT_EQ(TargetInfo::forSm(86).sm(), 80u);
  EXPECT_EQ(TargetInfo::forSm(100).sm(), 90u);
  EXPECT_EQ(TargetInfo::forSm(70).sm(), 80u);
}

} // namespace

//===- MemoryPlanTest.cpp - The static arena planner ----------------------===//

#include "kiln/runtime/MemoryPlan.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <random>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// The planner's contract, checked pair by pair without checkMemoryPlan (so
/// a bug shared by the planner and the checker cannot hide).
void expectValidPlan(const std::vector<LiveBuffer> &buffers,
                     const MemoryPlan &plan, uint64_t alignment,
                     const std::string &trial) {
  ASSERT_EQ(plan.offsets.size(), buffers.size()) << trial;
  uint64_t naive = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    naive += (buffers[i].size + alignment - 1) / alignment * alignment;
    EXPECT_EQ(plan.offsets[i] % alignment, 0u) << trial << " buffer " << i;
    EXPECT_LE(plan.offsets[i] + buffers[i].size, plan.arenaSize)
        << trial << " buffer " << i;
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (buffers[i].size == 0 || buffers[j].size == 0)
        continue;
      bool liveTogether = buffers[i].firstUse <= buffers[j].lastUse &&
                          buffers[j].firstUse <= buffers[i].lastUse;
      bool shareBytes = plan.offsets[i] < plan.offsets[j] + buffers[j].size &&
                        plan.offsets[j] < plan.offsets[i] + buffers[i].size;
      EXPECT_FALSE(liveTogether && shareBytes)
          << trial << ": buffers " << i << " and " << j << " overlap";
    }
  }
  EXPECT_EQ(plan.naiveSize, naive) << trial;
  EXPECT_LE(plan.arenaSize, plan.naiveSize) << trial;
  EXPECT_EQ(plan.arenaSize % alignment, 0u) << trial;
}

TEST(MemoryPlanTest, RandomBufferSetsNeverOverlapWhileLive) {
  std::mt19937 rng(20240601);
  for (int trial = 0; trial < 300; ++trial) {
    int count = 1 + static_cast<int>(rng() % 80);
    uint32_t launches = 1 + rng() % 40;
    uint64_t alignment = trial % 3 == 0 ? 256 : (trial % 3 == 1 ? 64 : 1);
    std::vector<LiveBuffer> buffers;
    for (int i = 0; i < count; ++i) {
      uint32_t first = rng() % launches;
      uint32_t last = first + rng() % (launches - first);
      uint64_t size = rng() % 10 == 0 ? 0 : 1 + rng() % (1 << (rng() % 20));
      buffers.push_back({size, first, last});
    }
    Expected<MemoryPlan> plan = planMemory(buffers, alignment);
    ASSERT_TRUE(plan) << errorOf(plan);
    std::string name = "trial " + std::to_string(trial);
    expectValidPlan(buffers, *plan, alignment, name);
    EXPECT_EQ(errorOf(checkMemoryPlan(buffers, plan->offsets, plan->arenaSize,
                                      alignment)),
              "<success>")
        << name;
  }
}

TEST(MemoryPlanTest, DisjointLifetimesShareOneSlot) {
  std::vector<LiveBuffer> chain = {{1000, 0, 0}, {1000, 1, 1}, {1000, 2, 2}};
  Expected<MemoryPlan> plan = planMemory(chain);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->offsets, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(plan->arenaSize, 1024u);
  EXPECT_EQ(plan->naiveSize, 3072u);
}

TEST(MemoryPlanTest, OverlappingLifetimesStack) {
  std::vector<LiveBuffer> all = {{100, 0, 5}, {300, 2, 3}, {256, 3, 9}};
  Expected<MemoryPlan> plan = planMemory(all);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->arenaSize, plan->naiveSize);
  EXPECT_EQ(plan->arenaSize, 256u + 512 + 256);
  // Largest first: the 300-byte buffer (512 aligned) sits at 0.
  EXPECT_EQ(plan->offsets[1], 0u);
}

TEST(MemoryPlanTest, BestFitTakesTheSmallestGap) {
  // Placed largest first, the buffers end up as
  //   A [0,1024) live 0-3, B [1024,1536) live 0-1, C [1536,2048) live 0-3,
  //   D [2048,2304) live 0-1, E [2304,2560) live 0-3.
  // F (256 bytes, live 2-3) fits both B's hole (512) and D's (256): best
  // fit takes D's, first fit would have taken B's.
  std::vector<LiveBuffer> buffers = {{1024, 0, 3}, {512, 0, 1}, {512, 0, 3},
                                     {256, 0, 1},  {256, 0, 3}, {200, 2, 3}};
  Expected<MemoryPlan> plan = planMemory(buffers);
  ASSERT_TRUE(plan);
  expectValidPlan(buffers, *plan, 256, "best fit");
  EXPECT_EQ(plan->offsets,
            (std::vector<uint64_t>{0, 1024, 1536, 2048, 2304, 2048}));
  EXPECT_EQ(plan->arenaSize, 2560u);
  EXPECT_EQ(plan->naiveSize, 2816u);
}

TEST(MemoryPlanTest, ZeroSizedBuffersTakeNoSpace) {
  Expected<MemoryPlan> plan = planMemory({{0, 0, 3}, {0, 1, 1}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->arenaSize, 0u);
  EXPECT_EQ(plan->naiveSize, 0u);
  Expected<MemoryPlan> none = planMemory({});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->arenaSize, 0u);
}

TEST(MemoryPlanTest, RejectsBadInput) {
  EXPECT_EQ(errorOf(planMemory({{16, 0, 1}, {16, 3, 2}})),
            "memory plan: buffer 1: first use 3 is after last use 2");
  EXPECT_EQ(errorOf(planMemory({{16, 0, 1}}, 48)),
            "memory plan: alignment 48 is not a power of two");
  EXPECT_EQ(errorOf(planMemory({{~uint64_t(0) - 10, 0, 1}})),
            "memory plan: buffer 0: sizes overflow 64 bits");
}

TEST(MemoryPlanTest, CheckerCatchesBrokenPlans) {
  std::vector<LiveBuffer> buffers = {{512, 0, 2}, {256, 1, 3}, {256, 4, 5}};
  EXPECT_EQ(errorOf(checkMemoryPlan(buffers, {0, 512, 512}, 768)), "<success>");
  EXPECT_EQ(errorOf(checkMemoryPlan(buffers, {0, 256, 768}, 1024)),
            "buffer 0 (launches 0-2, bytes [0, 512)) and buffer 1 (launches "
            "1-3, bytes [256, 512)) are live at the same time and share bytes");
  EXPECT_EQ(errorOf(checkMemoryPlan(buffers, {0, 512, 520}, 1024)),
            "buffer 2: offset 520 is not a multiple of 256");
  EXPECT_EQ(errorOf(checkMemoryPlan(buffers, {0, 512, 768}, 768)),
            "buffer 2: 256 bytes at offset 768 lie past the end of the arena "
            "(768 bytes)");
  EXPECT_EQ(errorOf(checkMemoryPlan(buffers, {0, 512}, 768)),
            "2 offsets for 3 buffers");
}

} // namespace

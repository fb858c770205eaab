//===- StepTimelineTest.cpp - kiln-train --trace's modelled step ----------===//
//
// The schedule of modelStepTimeline on a small hand-made step (four
// train_step launches, one train_update launch, two buckets: one complete
// after launch 1, one after the last) with made-up counters: each expected
// time is computed here from the timeline's own launch durations and the
// ring formula, independently of StepTimeline.cpp. Real artifacts:
// test/Pipelines/Training/train-trace.test.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Profile.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cmath>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

Artifact smallStep() {
  Artifact artifact;
  for (int k = 0; k < 5; ++k) {
    Kernel kernel;
    kernel.name = "k" + std::to_string(k);
    kernel.grid = {64, 1, 1};
    kernel.block = {128, 1, 1};
    artifact.kernels.push_back(kernel);
    artifact.launches.push_back({uint32_t(k), {}});
  }
  artifact.entryPoints.push_back({"train_step", 0, 4, {}, {}, {}});
  artifact.entryPoints.push_back({"train_update", 4, 1, {}, {}, {}});
  CollectiveStep early;
  early.elementOffset = 1000;
  // 12 GB: still on the link when train_step ends, so the late bucket
  // has to wait for it.
  early.elementCount = 3000000000ull;
  early.afterLaunch = 1;
  CollectiveStep late;
  late.elementCount = 1000;
  late.afterLaunch = 3;
  artifact.collectives = {early, late};
  return artifact;
}

std::vector<LaunchProfile> countersFor(const Artifact &artifact) {
  std::vector<LaunchProfile> launches;
  for (size_t i = 0; i < artifact.launches.size(); ++i) {
    LaunchProfile profile;
    profile.kernel = artifact.kernels[i].name;
    profile.config = {artifact.kernels[i].grid, artifact.kernels[i].block, 0};
    LaunchCounters &c = profile.counters;
    c.blocksTotal = c.blocksRun = 64;
    // A different amount of work per launch, so the durations differ.
    c.fmaFlops = 2000000000ull * (i + 1);
    c.fmaInstructions = c.threadInstructions = c.fmaFlops / 2;
    c.warpInstructions = c.threadInstructions / 32;
    c.dramReadSectors = 100000 * (i + 1);
    launches.push_back(profile);
  }
  return launches;
}

const StepSlice *find(const StepTimeline &timeline, const std::string &track,
                      uint32_t index) {
  for (const StepSlice &slice : timeline.slices)
    if (slice.track == track && slice.index == index)
      return &slice;
  return nullptr;
}

TEST(StepTimelineTest, RingFormula) {
  // 8 ranks, 100 GB/s, 5 us: 2*7/8 * 1e9 B / 1e11 B/s = 17.5 ms, + 70 us.
  RingModel ring{8, 100, 5};
  EXPECT_NEAR(ringAllReduceMicros(ring, 1000000000), 17500 + 70, 1e-6);
  EXPECT_EQ(ringAllReduceMicros({1, 100, 5}, 1000), 0);
}

TEST(StepTimelineTest, BucketsOverlapTheRestOfTheBackwardPass) {
  Artifact artifact = smallStep();
  const GpuTarget &target = builtinTargetTable().front();
  RingModel ring{4, 50, 10};
  Expected<StepTimeline> timeline =
      modelStepTimeline(artifact, countersFor(artifact), target, ring);
  ASSERT_TRUE(timeline.hasValue()) << errorOf(timeline);
  EXPECT_EQ(timeline->timeSource, "modelled");
  // Compute: end to end, in launch order, every duration positive.
  double clock = 0;
  for (uint32_t l = 0; l < 4; ++l) {
    const StepSlice *launch = find(*timeline, "compute", l);
    ASSERT_NE(launch, nullptr);
    EXPECT_GT(launch->durationMicros, 0);
    EXPECT_DOUBLE_EQ(launch->startMicros, clock);
    clock += launch->durationMicros;
  }
  double stepEnd = clock;
  auto ringMicros = [&](double bytes) {
    return 2.0 * 3 / 4 * bytes / 50e9 * 1e6 + 10.0 * 2 * 3;
  };
  const StepSlice *early = find(*timeline, "collectives", 0);
  const StepSlice *late = find(*timeline, "collectives", 1);
  ASSERT_TRUE(early && late);
  const StepSlice *launch1 = find(*timeline, "compute", 1);
  EXPECT_DOUBLE_EQ(early->startMicros,
                   launch1->startMicros + launch1->durationMicros);
  EXPECT_NEAR(early->durationMicros, ringMicros(12e9), 1e-6);
  EXPECT_EQ(early->bytes, 12000000000u);
  ASSERT_GT(early->startMicros + early->durationMicros, stepEnd);
  // The early bucket runs while launches 2 and 3 do.
  EXPECT_LT(early->startMicros, stepEnd);
  // The late one waits for the last launch and for the early one.
  EXPECT_DOUBLE_EQ(
      late->startMicros,
      std::max(stepEnd, early->startMicros + early->durationMicros));
  EXPECT_GT(late->startMicros, stepEnd);
  EXPECT_NEAR(late->durationMicros, ringMicros(4000), 1e-9);
  // train_update after both.
  const StepSlice *update = find(*timeline, "compute", 4);
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->entry, "train_update");
  EXPECT_DOUBLE_EQ(update->startMicros,
                   late->startMicros + late->durationMicros);
}

TEST(StepTimelineTest, BadInputsAreOneLine) {
  Artifact artifact = smallStep();
  const GpuTarget &target = builtinTargetTable().front();
  std::vector<LaunchProfile> counters = countersFor(artifact);
  EXPECT_EQ(errorOf(modelStepTimeline(artifact, counters, target, {4, 0, 10})),
            "the step timeline needs a link bandwidth above 0 GB/s (target " +
                target.name +
                " has no collective_bandwidth_gbps: give --link-gbps)");
  counters.pop_back();
  EXPECT_EQ(errorOf(modelStepTimeline(artifact, counters, target, {4, 50, 10})),
            "the step timeline: profile: the device recorded 4 launches for "
            "5 launches of the list");
}

} // namespace

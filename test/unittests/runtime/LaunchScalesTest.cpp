//===- LaunchScalesTest.cpp - Launch grids that follow a symbolic dim -----===//
//
// Format 1.9's `launch-scales` section: round trip, an older reader that
// skips it (and runs the compiled grids, still correct), verifyArtifact's
// checks, the block counts against a brute-force ceiling, and a session
// (FakeDevice) that launches the scaled grid for the run's size, with and
// without graph replay (one graph per size, at most four), and the
// emulator model's DRAM cap for a sampled, scaled launch.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "kiln/runtime/Profile.h"
#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SymbolicDims.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::ElementsAre;

namespace {

/// The add-scale sample with N in 1..2 symbolic and separable, and launch
/// 1 ('scale', compiled grid x 4) scaled: ceil(N * 2 / 1) blocks.
Artifact scaledArtifact() {
  Artifact artifact = makeAddScaleArtifact();
  artifact.symbolicDims = {{"N", 1, 2, 2, true, ""}};
  artifact.inputs[0].symbolicAxes = {{0, 0, 1}};
  artifact.outputs[0].symbolicAxes = {{0, 0, 1}};
  artifact.kernels[1].grid = {4, 1, 1};
  artifact.launchScales = {{1, 0, 0, 2, 1}};
  return artifact;
}

TEST(LaunchScalesTest, SectionRoundTrips) {
  Artifact artifact = scaledArtifact();
  artifact.kernels[0].grid = {1, 3, 1};
  artifact.launchScales.insert(artifact.launchScales.begin(),
                               LaunchScale{0, 0, 1, 5, 4}); // ceil(2*5/4)=3
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_NE(tableEntryOf(*image, SectionKind::LaunchScales), nullptr);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_EQ(read->formatMinor, kArtifactFormatMinor);
  ASSERT_EQ(read->launchScales.size(), 2u);
  const LaunchScale &first = read->launchScales[0];
  EXPECT_EQ(first.launch, 0u);
  EXPECT_EQ(first.symbol, 0u);
  EXPECT_EQ(first.gridDim, 1u);
  EXPECT_EQ(first.numerator, 5u);
  EXPECT_EQ(first.denominator, 4u);
  EXPECT_EQ(read->launchScales[1].launch, 1u);
  EXPECT_EQ(read->launchScales[1].numerator, 2u);
}

TEST(LaunchScalesTest, StaticAndUnscaledArtifactsHaveNoSection) {
  Artifact unscaled = scaledArtifact();
  unscaled.launchScales.clear();
  for (const Artifact &artifact : {makeAddScaleArtifact(), unscaled}) {
    Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
    ASSERT_TRUE(image);
    for (const RawSection &section : splitImage(*image))
      EXPECT_NE(section.kind, uint32_t(SectionKind::LaunchScales));
  }
}

TEST(LaunchScalesTest, OlderReaderSkipsTheSectionAndRunsCompiledGrids) {
  // A 1.8 reader does not know kind 18: it checks the checksum and skips
  // it. Every launch then runs its compiled grid, which only costs time:
  // the padding scheme is unchanged.
  Expected<std::vector<uint8_t>> image = serializeArtifact(scaledArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  for (RawSection &section : sections)
    if (section.kind == uint32_t(SectionKind::LaunchScales))
      section.kind = 99;
  Expected<Artifact> read = parseBytes(joinImage(sections, 1, 8));
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_TRUE(read->launchScales.empty());
  EXPECT_EQ(read->symbolicDims.size(), 1u);
  EXPECT_EQ(launchGridAt(*read, 1, {1}).x, 4u);
}

TEST(LaunchScalesTest, VerifyRejectsInconsistentRecords) {
  auto errorFor = [](const std::function<void(Artifact &)> &edit) {
    Artifact artifact = scaledArtifact();
    edit(artifact);
    return errorOf(verifyArtifact(artifact));
  };
  EXPECT_EQ(errorFor([](Artifact &) {}), "<success>");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchScales[0].launch = 2; }),
            "section 'launch-scales': record 0 (launch 2): the launch is out "
            "of range (the artifact has 2 launches)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.launchScales.push_back(a.launchScales[0]);
            }),
            "section 'launch-scales': record 1 (launch 1): launches are not "
            "in increasing order (after launch 1)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchScales[0].symbol = 1; }),
            "section 'launch-scales': record 0 (launch 1): symbol 1 is out of "
            "range (the artifact has 1 symbolic dims)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.symbolicDims[0].separable = false;
              a.symbolicDims[0].reason = "why not";
              a.outputs[0].symbolicAxes.clear();
            }),
            "section 'launch-scales': record 0 (launch 1): symbol 'N' is not "
            "separable: its launches run the compiled grid");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchScales[0].gridDim = 3; }),
            "section 'launch-scales': record 0 (launch 1): grid dim 3 is not "
            "0 (x), 1 (y) or 2 (z)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchScales[0].denominator = 0; }),
            "section 'launch-scales': record 0 (launch 1): blocks = ceil(N * "
            "2 / 0) needs a numerator and a denominator in 1..2^32-1 and a "
            "maximum below 2^31");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.launchScales[0].numerator = uint64_t(1) << 32;
            }),
            "section 'launch-scales': record 0 (launch 1): blocks = ceil(N * "
            "4294967296 / 1) needs a numerator and a denominator in "
            "1..2^32-1 and a maximum below 2^31");
  // At the maximum a record must give the compiled grid exactly.
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchScales[0].numerator = 3; }),
            "section 'launch-scales': record 0 (launch 1): at N = 2 it gives "
            "6 blocks along grid dim 0, not the kernel's compiled 4");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchScales[0].gridDim = 1; }),
            "section 'launch-scales': record 0 (launch 1): at N = 2 it gives "
            "4 blocks along grid dim 1, not the kernel's compiled 1");
}

TEST(LaunchScalesTest, ReaderRejectsATruncatedRecord) {
  Expected<std::vector<uint8_t>> image = serializeArtifact(scaledArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  for (RawSection &section : sections)
    if (section.kind == uint32_t(SectionKind::LaunchScales))
      section.bytes.resize(section.bytes.size() - 1);
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections, 1, 9))),
            "test.kiln: section 'launch-scales': 1 launch scales cannot fit "
            "in the 27 bytes left");
}

TEST(LaunchScalesTest, BlocksAreTheCeilingClampedToTheCompiledGrid) {
  // Against a brute-force ceiling: the fewest blocks of `b` points that
  // hold n * a points.
  for (uint64_t a : {1u, 3u, 49u, 196u})
    for (uint64_t b : {1u, 2u, 64u, 128u, 256u}) {
      int64_t max = 64;
      uint32_t compiled = static_cast<uint32_t>((max * a + b - 1) / b);
      for (int64_t n = 1; n <= max; ++n) {
        uint64_t blocks = 0;
        while (blocks * b < uint64_t(n) * a)
          ++blocks;
        EXPECT_EQ(scaledBlocks({0, 0, 0, a, b}, n, compiled), blocks)
            << "a " << a << " b " << b << " n " << n;
      }
      // Never more than compiled, never fewer than one.
      EXPECT_EQ(scaledBlocks({0, 0, 0, a, b}, max + 5, compiled), compiled);
      EXPECT_EQ(scaledBlocks({0, 0, 0, a, b}, 0, compiled),
                std::min<uint32_t>(compiled, (a + b - 1) / b));
    }
}

std::shared_ptr<FakeDevice> gridRecordingDevice(std::vector<uint32_t> &grids) {
  auto device = std::make_shared<FakeDevice>();
  device->kernels["scale"] = [&grids](const PackedParams &,
                                      const LaunchConfig &config) {
    grids.push_back(config.grid.x);
  };
  return device;
}

TEST(LaunchScalesTest, SessionLaunchesTheRunsGrid) {
  std::vector<uint32_t> grids;
  auto device = gridRecordingDevice(grids);
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(scaledArtifact()), device);
  ASSERT_TRUE(session) << errorOf(session);
  float two[6] = {1, 2, 3, 4, 5, 6}, one[3] = {7, 8, 9};
  ASSERT_FALSE((*session)->bindInput("x", DType::F32, {2, 3}, two, 24));
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  ASSERT_FALSE((*session)->bindInput("x", DType::F32, {1, 3}, one, 12));
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  ASSERT_FALSE((*session)->bindInput("x", DType::F32, {2, 3}, two, 24));
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  EXPECT_THAT(grids, ElementsAre(4, 2, 4));
}

TEST(LaunchScalesTest, GraphReplayKeepsOneGraphPerSize) {
  std::vector<uint32_t> grids;
  auto device = gridRecordingDevice(grids);
  device->graphs = true;
  Artifact artifact = scaledArtifact();
  // N in 1..2 has two sizes; the LRU bound (4) is exercised in
  // Runtime.cpp's kMaxGraphs by a wider range.
  artifact.symbolicDims[0].max = 6;
  artifact.symbolicDims[0].opt = 6;
  artifact.inputs[0].shape = {6, 3};
  artifact.outputs[0].shape = {6, 3};
  artifact.memoryPlan.buffers[0].size = 72;
  artifact.memoryPlan.buffers[2].size = 72;
  Expected<MemoryPlan> plan =
      planMemory({{72, 0, 0}, {24, 0, 1}, {72, 1, 1}}, kArenaAlignment);
  ASSERT_TRUE(plan);
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  for (size_t i = 0; i < 3; ++i)
    artifact.memoryPlan.buffers[i].offset = plan->offsets[i];
  artifact.inputs[0].arenaOffset = plan->offsets[0];
  artifact.outputs[0].arenaOffset = plan->offsets[2];
  artifact.launches[0].args = {plan->offsets[0], artifact.weights[0].offset,
                               plan->offsets[1], 6};
  artifact.launches[1].args = {plan->offsets[1], plan->offsets[2], 3};
  artifact.kernels[1].grid = {12, 1, 1}; // ceil(6 * 2 / 1)
  ASSERT_EQ(errorOf(verifyArtifact(artifact)), "<success>");
  SessionOptions options;
  options.useGraph = true;
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(artifact), device, options);
  ASSERT_TRUE(session) << errorOf(session);
  std::vector<float> x(18, 1.0f);
  for (int64_t n : {1, 2, 1, 3, 4, 5, 6, 1}) {
    ASSERT_FALSE((*session)->bindInput("x", DType::F32, {n, 3}, x.data(),
                                       uint64_t(n) * 12));
    ASSERT_EQ(errorOf((*session)->run()), "<success>");
  }
  // The run's grid each time, whether captured or replayed.
  EXPECT_THAT(grids, ElementsAre(2, 4, 2, 6, 8, 10, 12, 2));
  // Sizes 1, 2, 3, 4, 5 and 6 captured once each while they were kept;
  // 1 again after 3, 4, 5 and 6 pushed it out (at most 4 kept).
  EXPECT_EQ(device->graphsCaptured.size(), 7u);
  EXPECT_EQ(device->graphsDestroyed, 3);
}

TEST(LaunchScalesTest, SampledDramOfAScaledLaunchIsCappedAtItsSlices) {
  // Launch 1 ('scale') is passed 'tmp' and 'y', 24 bytes each. Sampled at
  // N = 1 it ran 2 of its 4 blocks: its DRAM cap is half its arena
  // buffers, 24 bytes (1 sector), where the compiled grid's is 48 (2).
  Expected<std::vector<GpuTarget>> table = loadTargetTable();
  ASSERT_TRUE(table) << errorOf(table);
  Expected<GpuTarget> h200 = findTarget(*table, "sm_90-h200");
  ASSERT_TRUE(h200) << errorOf(h200);
  auto dramBytesOfScaleLaunch = [&](const Artifact &artifact,
                                    uint32_t blocks) {
    std::vector<LaunchProfile> profiles;
    for (const Launch &launch : artifact.launches) {
      const Kernel &kernel = artifact.kernels[launch.kernel];
      LaunchProfile profile;
      profile.kernel = kernel.name;
      profile.config = {kernel.grid, kernel.block, kernel.dynamicSharedBytes};
      profile.stream = 1;
      profile.counters.blocksTotal = profile.config.grid.x;
      profile.counters.blocksRun = 1; // sampled
      profile.counters.dramReadSectors = 1000;
      profiles.push_back(profile);
    }
    profiles[1].config.grid.x = blocks;
    profiles[1].counters.blocksTotal = blocks;
    Expected<ProfileReport> report =
        profileFromCounters(artifact, profiles, *h200);
    EXPECT_TRUE(report) << errorOf(report);
    return report ? report->launches[1].dramBytes.value_or(0) : 0;
  };
  Artifact unscaled = scaledArtifact();
  unscaled.launchScales.clear();
  EXPECT_EQ(dramBytesOfScaleLaunch(scaledArtifact(), 2), 32u);
  EXPECT_EQ(dramBytesOfScaleLaunch(scaledArtifact(), 4), 64u);
  EXPECT_EQ(dramBytesOfScaleLaunch(unscaled, 2), 64u);
}

} // namespace

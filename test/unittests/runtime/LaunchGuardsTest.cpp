//===- LaunchGuardsTest.cpp - Launches that run only at some sizes --------===//
//
// Format 1.11's `launch-guards` section (size buckets, kilnc
// --size-buckets): round trip, an older reader that skips it (and runs
// every launch: the last variant recomputes the result, still correct),
// verifyArtifact's checks, launchRunsAt/launchesAt against the ranges, and
// a session (FakeDevice) that queues only the launches of the run's size,
// with and without graph replay and through an entry point.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SymbolicDims.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::ElementsAre;

namespace {

/// The add-scale sample with N in 1..2 symbolic and separable, and a third
/// launch: a second 'scale' kernel ('scale_big') writing the same y. Launch
/// 1 ('scale') runs at N = 1, launch 2 ('scale_big') at N = 2: two size
/// buckets of the last step.
Artifact guardedArtifact() {
  Artifact artifact = makeAddScaleArtifact();
  artifact.symbolicDims = {{"N", 1, 2, 2, true, ""}};
  artifact.inputs[0].symbolicAxes = {{0, 0, 1}};
  artifact.outputs[0].symbolicAxes = {{0, 0, 1}};
  Kernel big = artifact.kernels[1];
  big.name = "scale_big";
  big.ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
            ".visible .entry scale_big() { ret; }\n";
  artifact.kernels.push_back(big);
  Launch second = artifact.launches[1];
  second.kernel = 2;
  artifact.launches.push_back(second);
  // The buffers live through the new last launch.
  for (ArenaBuffer &buffer : artifact.memoryPlan.buffers)
    if (buffer.lastUse == 1)
      buffer.lastUse = 2;
  artifact.launchGuards = {{1, 0, 1, 1}, {2, 0, 2, 2}};
  return artifact;
}

TEST(LaunchGuardsTest, SectionRoundTrips) {
  Artifact artifact = guardedArtifact();
  ASSERT_EQ(errorOf(verifyArtifact(artifact)), "<success>");
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_NE(tableEntryOf(*image, SectionKind::LaunchGuards), nullptr);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_EQ(read->formatMinor, kArtifactFormatMinor);
  ASSERT_EQ(read->launchGuards.size(), 2u);
  EXPECT_EQ(read->launchGuards[0].launch, 1u);
  EXPECT_EQ(read->launchGuards[0].symbol, 0u);
  EXPECT_EQ(read->launchGuards[0].min, 1);
  EXPECT_EQ(read->launchGuards[0].max, 1);
  EXPECT_EQ(read->launchGuards[1].launch, 2u);
  EXPECT_EQ(read->launchGuards[1].min, 2);
  EXPECT_EQ(read->launchGuards[1].max, 2);
}

TEST(LaunchGuardsTest, UnguardedArtifactsHaveNoSection) {
  Artifact unguarded = guardedArtifact();
  unguarded.launchGuards.clear();
  for (const Artifact &artifact : {makeAddScaleArtifact(), unguarded}) {
    Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
    ASSERT_TRUE(image);
    for (const RawSection &section : splitImage(*image))
      EXPECT_NE(section.kind, uint32_t(SectionKind::LaunchGuards));
  }
}

TEST(LaunchGuardsTest, OlderReaderSkipsTheSectionAndRunsEveryLaunch) {
  // A 1.10 reader does not know kind 21: it checks the checksum and skips
  // it, and runs both variants; the last one writes y again.
  Expected<std::vector<uint8_t>> image = serializeArtifact(guardedArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  for (RawSection &section : sections)
    if (section.kind == uint32_t(SectionKind::LaunchGuards))
      section.kind = 99;
  Expected<Artifact> read = parseBytes(joinImage(sections, 1, 10));
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_TRUE(read->launchGuards.empty());
  EXPECT_THAT(launchesAt(*read, {1}), ElementsAre(0, 1, 2));
}

TEST(LaunchGuardsTest, LaunchesAtFollowTheRanges) {
  Artifact artifact = guardedArtifact();
  EXPECT_THAT(launchesAt(artifact, {1}), ElementsAre(0, 1));
  EXPECT_THAT(launchesAt(artifact, {2}), ElementsAre(0, 2));
  EXPECT_TRUE(launchRunsAt(artifact, 0, {2}));
  EXPECT_FALSE(launchRunsAt(artifact, 1, {2}));
  // A range past the symbol's maximum never runs (kilnc leaves a bucket so
  // when its launches would not scale).
  artifact.launchGuards[0] = {1, 0, 3, 3};
  EXPECT_THAT(launchesAt(artifact, {1}), ElementsAre(0));
  EXPECT_THAT(launchesAt(artifact, {2}), ElementsAre(0, 2));
}

TEST(LaunchGuardsTest, VerifyRejectsInconsistentRecords) {
  auto errorFor = [](const std::function<void(Artifact &)> &edit) {
    Artifact artifact = guardedArtifact();
    edit(artifact);
    return errorOf(verifyArtifact(artifact));
  };
  EXPECT_EQ(errorFor([](Artifact &) {}), "<success>");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchGuards[1].launch = 3; }),
            "section 'launch-guards': record 1 (launch 3): the launch is out "
            "of range (the artifact has 3 launches)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchGuards[1].launch = 1; }),
            "section 'launch-guards': record 1 (launch 1): launches are not "
            "in increasing order (after launch 1)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchGuards[0].symbol = 1; }),
            "section 'launch-guards': record 0 (launch 1): symbol 1 is out of "
            "range (the artifact has 1 symbolic dims)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.launchGuards[0].min = 2;
              a.launchGuards[0].max = 1;
            }),
            "section 'launch-guards': record 0 (launch 1): sizes 2..1 of 'N' "
            "are not a range");
  EXPECT_EQ(errorFor([](Artifact &a) { a.launchGuards[0].min = -1; }),
            "section 'launch-guards': record 0 (launch 1): sizes -1..1 of 'N' "
            "are not a range");
}

TEST(LaunchGuardsTest, ReaderRejectsATruncatedRecord) {
  Expected<std::vector<uint8_t>> image = serializeArtifact(guardedArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  for (RawSection &section : sections)
    if (section.kind == uint32_t(SectionKind::LaunchGuards))
      section.bytes.resize(section.bytes.size() - 1);
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections, 1, 11))),
            "test.kiln: section 'launch-guards': 2 launch guards cannot fit "
            "in the 47 bytes left");
}

/// A FakeDevice that records the name of every kernel it runs.
std::shared_ptr<FakeDevice>
namesRecordingDevice(std::vector<std::string> &ran) {
  auto device = std::make_shared<FakeDevice>();
  for (const char *name : {"add_bias", "scale", "scale_big"})
    device->kernels[name] = [&ran, name](const PackedParams &,
                                         const LaunchConfig &) {
      ran.push_back(name);
    };
  return device;
}

TEST(LaunchGuardsTest, SessionRunsTheBucketOfTheRunsSize) {
  for (bool graph : {false, true}) {
    std::vector<std::string> ran;
    auto device = namesRecordingDevice(ran);
    device->graphs = graph;
    SessionOptions options;
    options.useGraph = graph;
    Expected<std::unique_ptr<Session>> session = Session::create(
        std::make_shared<const Artifact>(guardedArtifact()), device, options);
    ASSERT_TRUE(session) << errorOf(session);
    float two[6] = {1, 2, 3, 4, 5, 6}, one[3] = {7, 8, 9};
    for (int n : {2, 1, 2, 1}) {
      ASSERT_FALSE((*session)->bindInput("x", DType::F32, {n, 3},
                                         n == 2 ? two : one, 12 * n));
      ASSERT_EQ(errorOf((*session)->run()), "<success>");
      EXPECT_THAT((*session)->lastRunLaunches(),
                  n == 2 ? ElementsAre(0, 2) : ElementsAre(0, 1));
    }
    EXPECT_THAT(ran, ElementsAre("add_bias", "scale_big", "add_bias", "scale",
                                 "add_bias", "scale_big", "add_bias", "scale"))
        << (graph ? "graph replay" : "launches");
    if (graph)
      EXPECT_EQ(device->graphsCaptured.size(), 2u); // one per size
  }
}

} // namespace

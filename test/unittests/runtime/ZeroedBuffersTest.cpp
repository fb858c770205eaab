//===- ZeroedBuffersTest.cpp - Buffers the runtime zeroes (format 1.6) ----===//
//
// Split-K's per-tile semaphores live in a zeroed buffer: zero before the
// first launch, left zero by every launch. These tests check the format
// (round trip, the header flag, the verifier's rules) and the session's
// side: it zeroes the buffer before the first run, trusts the kernels
// after a complete run, and zeroes it again after a run that did not run
// every block.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Runtime.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::HasSubstr;

namespace {

/// The add/scale sample with a 16-byte zeroed buffer "sem" (buffer 3) at
/// the end of the arena, live for both launches.
Artifact artifactWithZeroedBuffer() {
  Artifact artifact = makeAddScaleArtifact();
  uint64_t offset = artifact.memoryPlan.arenaSize;
  artifact.memoryPlan.arenaSize += kArenaAlignment;
  artifact.memoryPlan.buffers.push_back({"sem", offset, 16, 0, 1});
  artifact.zeroedBuffers = {3};
  return artifact;
}

uint64_t semOffset(const Artifact &artifact) {
  return artifact.memoryPlan.buffers[3].offset;
}

TEST(ZeroedBuffersTest, RoundTripSetsTheHeaderFlag) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(artifactWithZeroedBuffer());
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(loadU32(image->data() + kFlagsOffset), kHeaderFlagZeroedBuffers);
  Expected<Artifact> back = parseBytes(*image);
  ASSERT_TRUE(back) << errorOf(back);
  EXPECT_EQ(back->zeroedBuffers, std::vector<uint32_t>{3});
  // An artifact without zeroed buffers has neither the section nor the flag.
  Expected<std::vector<uint8_t>> plain =
      serializeArtifact(makeAddScaleArtifact());
  ASSERT_TRUE(plain) << errorOf(plain);
  EXPECT_EQ(loadU32(plain->data() + kFlagsOffset), 0u);
  for (const RawSection &section : splitImage(*plain))
    EXPECT_NE(section.kind, uint32_t(SectionKind::ZeroedBuffers));
}

TEST(ZeroedBuffersTest, OlderReadersRejectTheFlag) {
  // What a 1.5 reader sees: bit 2 is not a flag it knows.
  std::vector<uint8_t> image =
      joinImage(splitImage(*serializeArtifact(artifactWithZeroedBuffer())),
                kArtifactFormatMajor, 5);
  storeU32(image.data() + kFlagsOffset, kHeaderFlagZeroedBuffers);
  refreshHeaderChecksum(image);
  EXPECT_EQ(errorOf(parseBytes(image)), "test.kiln: header: unknown flags 0x4");
}

TEST(ZeroedBuffersTest, FlagAndSectionGoTogether) {
  std::vector<uint8_t> image = *serializeArtifact(artifactWithZeroedBuffer());
  std::vector<RawSection> sections = splitImage(image);
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const RawSection &s) {
                                  return s.kind ==
                                         uint32_t(SectionKind::ZeroedBuffers);
                                }),
                 sections.end());
  std::vector<uint8_t> withoutSection = joinImage(sections);
  storeU32(withoutSection.data() + kFlagsOffset, kHeaderFlagZeroedBuffers);
  refreshHeaderChecksum(withoutSection);
  EXPECT_THAT(errorOf(parseBytes(withoutSection)),
              HasSubstr("the zeroed-buffers flag is set but there is no "
                        "'zeroed-buffers' section"));
  storeU32(image.data() + kFlagsOffset, 0);
  refreshHeaderChecksum(image);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("section 'zeroed-buffers' is present but the "
                        "header's zeroed-buffers flag is not set"));
}

TEST(ZeroedBuffersTest, VerifierNamesEachProblem) {
  struct Case {
    std::function<void(Artifact &)> edit;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](Artifact &a) { a.zeroedBuffers = {7}; },
       "section 'zeroed-buffers': entry 0: buffer 7 is not in the memory "
       "plan (4 buffers)"},
      {[](Artifact &a) { a.zeroedBuffers = {3, 3}; },
       "section 'zeroed-buffers': buffer 3 'sem' is listed twice"},
      {[](Artifact &a) { a.memoryPlan.buffers[3].firstUse = 1; },
       "section 'zeroed-buffers': buffer 3 'sem' is live for launches [1, "
       "1], not the whole launch list [0, 1]"},
  };
  for (const Case &c : cases) {
    Artifact artifact = artifactWithZeroedBuffer();
    c.edit(artifact);
    EXPECT_EQ(errorOf(verifyArtifact(artifact)), c.message);
  }
  Artifact x = artifactWithZeroedBuffer();
  x.zeroedBuffers = {0}; // x: an input, live [0, 0] in a 2-launch list
  EXPECT_EQ(errorOf(verifyArtifact(x)),
            "section 'zeroed-buffers': buffer 0 'x' is live for launches [0, "
            "0], not the whole launch list [0, 1]");
}

/// A device whose add_bias records the semaphore bytes it finds and counts
/// them up (as split-K's blocks do), and whose scale resets them (as the
/// last block does) unless `leaveCounted`.
struct SemaphoreDevice {
  std::shared_ptr<FakeDevice> device = std::make_shared<FakeDevice>();
  std::vector<std::vector<uint32_t>> seen;
  bool leaveCounted = false;

  explicit SemaphoreDevice(const Artifact &artifact) {
    uint64_t fromX = semOffset(artifact) - artifact.memoryPlan.buffers[0].offset;
    device->kernels["add_bias"] = [this, fromX](const PackedParams &p,
                                                const LaunchConfig &) {
      auto *sem = reinterpret_cast<uint32_t *>(paramAt<uint64_t>(p, 0) + fromX);
      seen.emplace_back(sem, sem + 4);
      for (int i = 0; i < 4; ++i)
        ++sem[i];
    };
    uint64_t fromTmp =
        semOffset(artifact) - artifact.memoryPlan.buffers[1].offset;
    device->kernels["scale"] = [this, fromTmp](const PackedParams &p,
                                               const LaunchConfig &) {
      auto *sem =
          reinterpret_cast<uint32_t *>(paramAt<uint64_t>(p, 0) + fromTmp);
      if (!leaveCounted)
        std::fill(sem, sem + 4, 0u);
    };
  }
};

/// A session on `fake` with input x bound (ones).
std::unique_ptr<Session> boundSession(std::shared_ptr<const Artifact> artifact,
                                      SemaphoreDevice &fake) {
  auto session = Session::create(std::move(artifact), fake.device, {});
  EXPECT_TRUE(session) << errorOf(session);
  if (!session)
    return nullptr;
  std::vector<float> x(6, 1.0f);
  EXPECT_FALSE((*session)->bindInput("x", DType::F32, {2, 3}, x.data(), 24));
  return session.take();
}

TEST(ZeroedBuffersTest, SessionZeroesBeforeTheFirstRunAndAfterPartialRuns) {
  auto artifact = std::make_shared<const Artifact>(artifactWithZeroedBuffer());
  SemaphoreDevice fake(*artifact);
  std::unique_ptr<Session> session = boundSession(artifact, fake);
  ASSERT_TRUE(session);
  const std::vector<uint32_t> zeros(4, 0u);

  // The device's memory starts as 0xAB bytes; the first run finds zeros.
  ASSERT_FALSE(session->run());
  ASSERT_EQ(fake.seen.size(), 1u);
  EXPECT_EQ(fake.seen[0], zeros);

  // A complete run is trusted to leave them zero: the session does not
  // zero them again (a kernel that left them counted shows through).
  fake.leaveCounted = true;
  ASSERT_FALSE(session->run());
  EXPECT_EQ(fake.seen[1], zeros);
  ASSERT_FALSE(session->run());
  EXPECT_EQ(fake.seen[2], std::vector<uint32_t>(4, 1u));

  // After a run that did not run every block, the next run zeroes them.
  fake.device->everyBlock = false;
  ASSERT_FALSE(session->run());
  fake.device->everyBlock = true;
  fake.leaveCounted = false;
  ASSERT_FALSE(session->run());
  EXPECT_EQ(fake.seen[4], zeros);
}

TEST(ZeroedBuffersTest, AFailedRunMakesTheNextOneZero) {
  auto artifact = std::make_shared<const Artifact>(artifactWithZeroedBuffer());
  SemaphoreDevice fake(*artifact);
  std::unique_ptr<Session> session = boundSession(artifact, fake);
  ASSERT_TRUE(session);
  fake.leaveCounted = true;
  ASSERT_FALSE(session->run()); // leaves 1s behind
  fake.device->failCall = "launch";
  EXPECT_TRUE(bool(session->run()));
  fake.device->failCall.clear();
  ASSERT_FALSE(session->run());
  ASSERT_EQ(fake.seen.size(), 2u);
  EXPECT_EQ(fake.seen[1], std::vector<uint32_t>(4, 0u));
}

} // namespace

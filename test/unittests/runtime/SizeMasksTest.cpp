//===- SizeMasksTest.cpp - Inputs the runtime fills from the run's sizes ---===//
//
// Format 1.10's `size-masks` section: round trip and the header flag, a
// 1.9 reader's refusal, verifyArtifact's checks, the masks' bytes in f32,
// f16 and bf16 (against the IEEE encodings of 0, 1 and -inf, written out)
// and the mean scale's value, and
// a session (FakeDevice) that fills the mask for each run's size and will
// not let the user bind it.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SymbolicDims.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::ElementsAre;

namespace {

/// The add-scale sample with N in 1..2 separable, plus a size mask for N:
/// input 'kiln.size_mask.N', f32 [2 * factor], in an arena buffer of its
/// own after the others.
Artifact maskedArtifact(uint64_t factor = 1) {
  Artifact artifact = makeAddScaleArtifact();
  artifact.symbolicDims = {{"N", 1, 2, 2, true, ""}};
  artifact.inputs[0].symbolicAxes = {{0, 0, 1}};
  artifact.outputs[0].symbolicAxes = {{0, 0, 1}};
  uint64_t bytes = 2 * factor * sizeof(float);
  uint64_t offset = (artifact.memoryPlan.arenaSize + 255) / 256 * 256;
  artifact.memoryPlan.buffers.push_back(
      {"kiln.size_mask.N", offset, bytes, 0, 1});
  artifact.memoryPlan.arenaSize = offset + bytes;
  artifact.inputs.push_back({"kiln.size_mask.N", DType::F32,
                             {static_cast<int64_t>(2 * factor)}, offset,
                             static_cast<uint32_t>(
                                 artifact.memoryPlan.buffers.size() - 1),
                             {}});
  artifact.sizeMasks = {{1, 0, SizeMaskKind::AdditiveMask, factor}};
  return artifact;
}

/// The add-scale sample with a mean scale for N: input 'kiln.size_scale.N',
/// an f32 scalar.
Artifact scaledArtifact() {
  Artifact artifact = maskedArtifact();
  artifact.inputs[1].name = "kiln.size_scale.N";
  artifact.inputs[1].shape = {};
  artifact.memoryPlan.buffers.back().size = 4;
  artifact.sizeMasks = {{1, 0, SizeMaskKind::MeanScale, 1}};
  return artifact;
}

TEST(SizeMasksTest, SectionRoundTripsWithItsHeaderFlag) {
  Expected<std::vector<uint8_t>> image = serializeArtifact(maskedArtifact(3));
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(loadU32(image->data() + kFlagsOffset) & kHeaderFlagSizeMasks,
            kHeaderFlagSizeMasks);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_EQ(read->formatMinor, kArtifactFormatMinor);
  ASSERT_EQ(read->sizeMasks.size(), 1u);
  EXPECT_EQ(read->sizeMasks[0].input, 1u);
  EXPECT_EQ(read->sizeMasks[0].symbol, 0u);
  EXPECT_EQ(read->sizeMasks[0].factor, 3u);
  EXPECT_EQ(read->sizeMasks[0].kind, SizeMaskKind::AdditiveMask);
  for (SizeMaskKind kind : {SizeMaskKind::KeepMask, SizeMaskKind::MeanScale}) {
    Artifact other = kind == SizeMaskKind::KeepMask ? maskedArtifact()
                                                    : scaledArtifact();
    other.sizeMasks[0].kind = kind;
    Expected<std::vector<uint8_t>> bytes = serializeArtifact(other);
    ASSERT_TRUE(bytes) << errorOf(bytes);
    Expected<Artifact> back = parseBytes(*bytes);
    ASSERT_TRUE(back) << errorOf(back);
    EXPECT_EQ(back->sizeMasks[0].kind, kind);
  }
  EXPECT_NE(read->findSizeMask("kiln.size_mask.N"), nullptr);
  EXPECT_EQ(read->findSizeMask("x"), nullptr);
}

TEST(SizeMasksTest, ArtifactsWithoutMasksHaveNoSectionOrFlag) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeAddScaleArtifact());
  ASSERT_TRUE(image);
  EXPECT_EQ(loadU32(image->data() + kFlagsOffset) & kHeaderFlagSizeMasks, 0u);
  for (const RawSection &section : splitImage(*image))
    EXPECT_NE(section.kind, uint32_t(SectionKind::SizeMasks));
}

TEST(SizeMasksTest, FlagAndSectionMustAgreeAndA19ReaderRefusesTheFlag) {
  Expected<std::vector<uint8_t>> image = serializeArtifact(maskedArtifact());
  ASSERT_TRUE(image);
  // The section without the flag.
  std::vector<uint8_t> unflagged = *image;
  storeU32(unflagged.data() + kFlagsOffset,
           loadU32(unflagged.data() + kFlagsOffset) & ~kHeaderFlagSizeMasks);
  refreshHeaderChecksum(unflagged);
  EXPECT_EQ(errorOf(parseBytes(unflagged)),
            "test.kiln: section 'size-masks' is present but the header's "
            "size-masks flag is not set");
  // The flag without the section.
  std::vector<RawSection> sections = splitImage(*image);
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const RawSection &s) {
                                  return s.kind ==
                                         uint32_t(SectionKind::SizeMasks);
                                }),
                 sections.end());
  std::vector<uint8_t> sectionless = joinImage(sections);
  storeU32(sectionless.data() + kFlagsOffset, kHeaderFlagSizeMasks);
  refreshHeaderChecksum(sectionless);
  EXPECT_EQ(errorOf(parseBytes(sectionless)),
            "test.kiln: header: the size-masks flag is set but there is no "
            "'size-masks' section");
  // A file that claims 1.9 cannot carry the flag.
  std::vector<uint8_t> old = joinImage(splitImage(*image), 1, 9);
  storeU32(old.data() + kFlagsOffset, kHeaderFlagSizeMasks);
  refreshHeaderChecksum(old);
  EXPECT_EQ(errorOf(parseBytes(old)), "test.kiln: header: unknown flags 0x20");
  // A damaged record: the section's checksum names it.
  std::vector<uint8_t> damaged = *image;
  uint8_t *entry = tableEntryOf(damaged, SectionKind::SizeMasks);
  damaged[loadU64(entry + kEntryOffsetOffset)] ^= 1;
  EXPECT_THAT(errorOf(parseBytes(damaged)),
              ::testing::StartsWith("test.kiln: section 'size-masks': "
                                    "checksum mismatch (stored 0x"));
}

TEST(SizeMasksTest, VerifyRejectsInconsistentRecords) {
  auto errorFor = [](const std::function<void(Artifact &)> &edit) {
    Artifact artifact = maskedArtifact();
    edit(artifact);
    return errorOf(verifyArtifact(artifact));
  };
  EXPECT_EQ(errorFor([](Artifact &) {}), "<success>");
  EXPECT_EQ(errorFor([](Artifact &a) { a.sizeMasks[0].input = 2; }),
            "section 'size-masks': record 0 (input 2): the input is out of "
            "range (the signature has 2 inputs)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.sizeMasks.push_back(a.sizeMasks[0]);
            }),
            "section 'size-masks': record 1 (input 1): inputs are not in "
            "increasing order (after input 1)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.sizeMasks[0].symbol = 1; }),
            "section 'size-masks': record 0 (input 1): symbol 1 is out of "
            "range (the artifact has 1 symbolic dims)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.sizeMasks[0].factor = 0; }),
            "section 'size-masks': record 0 (input 1): factor 0 is not in "
            "1..2^32-1");
  EXPECT_EQ(errorFor([](Artifact &a) { a.sizeMasks[0].factor = 2; }),
            "section 'size-masks': record 0 (input 1): input "
            "'kiln.size_mask.N' is f32 [2], not an f32, f16 or bf16 vector "
            "of N * 2 elements");
  EXPECT_EQ(errorFor([](Artifact &a) { a.inputs[1].dtype = DType::I32; }),
            "section 'size-masks': record 0 (input 1): input "
            "'kiln.size_mask.N' is i32 [2], not an f32, f16 or bf16 vector "
            "of N * 1 elements");
  EXPECT_EQ(errorFor([](Artifact &a) { a.sizeMasks[0].input = 0; }),
            "section 'size-masks': record 0 (input 0): input 'x' is f32 [2, "
            "3], not an f32, f16 or bf16 vector of N * 1 elements");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.sizeMasks[0].kind = static_cast<SizeMaskKind>(3);
            }),
            "section 'size-masks': record 0 (input 1): unknown kind 3");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.sizeMasks[0].kind = SizeMaskKind::MeanScale;
            }),
            "section 'size-masks': record 0 (input 1): a mean scale is an f32 "
            "scalar with factor 1, not f32 [2] with factor 1");
  EXPECT_EQ(errorOf(verifyArtifact(scaledArtifact())), "<success>");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.kernels[1].grid = {2, 1, 1};
              a.launchScales = {{1, 0, 0, 1, 1}};
            }),
            "section 'size-masks': record 0 (input 1): symbol 'N' has launch "
            "scales, but a masked symbol's padded slices must be computed "
            "(launch 1)");
}

TEST(SizeMasksTest, MaskBytesAreZeroThenMinusInfinity) {
  Artifact artifact = maskedArtifact(2); // f32 [4]: N * 2
  std::vector<uint8_t> bytes;
  fillSizeMask(artifact, artifact.sizeMasks[0], 1, bytes);
  ASSERT_EQ(bytes.size(), 16u);
  uint32_t words[4];
  std::memcpy(words, bytes.data(), sizeof(words));
  // 0.0f and -inf, as IEEE 754 binary32 writes them.
  EXPECT_THAT(words, ElementsAre(0u, 0u, 0xFF800000u, 0xFF800000u));
  float floats[4];
  std::memcpy(floats, bytes.data(), sizeof(floats));
  EXPECT_EQ(floats[3], -std::numeric_limits<float>::infinity());
  fillSizeMask(artifact, artifact.sizeMasks[0], 2, bytes);
  std::memcpy(words, bytes.data(), sizeof(words));
  EXPECT_THAT(words, ElementsAre(0u, 0u, 0u, 0u));

  // binary16 -inf is 0xFC00, bfloat16's 0xFF80.
  for (auto [dtype, minusInf] : {std::pair(DType::F16, uint16_t(0xFC00)),
                                 std::pair(DType::BF16, uint16_t(0xFF80))}) {
    artifact.inputs[1].dtype = dtype;
    fillSizeMask(artifact, artifact.sizeMasks[0], 1, bytes);
    ASSERT_EQ(bytes.size(), 8u);
    uint16_t halves[4];
    std::memcpy(halves, bytes.data(), sizeof(halves));
    EXPECT_THAT(halves, ElementsAre(0, 0, minusInf, minusInf));
  }

  // A keep mask: 1 then 0 (binary32 1.0f is 0x3F800000, binary16's 0x3C00,
  // bfloat16's 0x3F80).
  artifact.inputs[1].dtype = DType::F32;
  artifact.sizeMasks[0].kind = SizeMaskKind::KeepMask;
  fillSizeMask(artifact, artifact.sizeMasks[0], 1, bytes);
  std::memcpy(words, bytes.data(), sizeof(words));
  EXPECT_THAT(words, ElementsAre(0x3F800000u, 0x3F800000u, 0u, 0u));
  for (auto [dtype, one] : {std::pair(DType::F16, uint16_t(0x3C00)),
                            std::pair(DType::BF16, uint16_t(0x3F80))}) {
    artifact.inputs[1].dtype = dtype;
    fillSizeMask(artifact, artifact.sizeMasks[0], 1, bytes);
    uint16_t halves[4];
    std::memcpy(halves, bytes.data(), sizeof(halves));
    EXPECT_THAT(halves, ElementsAre(one, one, 0, 0));
  }

  // A mean scale: max / n as an f32.
  Artifact scaled = scaledArtifact();
  fillSizeMask(scaled, scaled.sizeMasks[0], 1, bytes);
  ASSERT_EQ(bytes.size(), 4u);
  float scale;
  std::memcpy(&scale, bytes.data(), 4);
  EXPECT_EQ(scale, 2.0f);
  fillSizeMask(scaled, scaled.sizeMasks[0], 2, bytes);
  std::memcpy(&scale, bytes.data(), 4);
  EXPECT_EQ(scale, 1.0f);
}

TEST(SizeMasksTest, SessionFillsTheMaskPerRunAndRefusesToBindIt) {
  Artifact artifact = maskedArtifact();
  uint64_t xOffset = artifact.inputs[0].arenaOffset;
  uint64_t maskOffset = artifact.inputs[1].arenaOffset;
  std::vector<uint32_t> seenMask;
  auto device = std::make_shared<FakeDevice>();
  device->kernels["add_bias"] = [&](const PackedParams &p,
                                    const LaunchConfig &) {
    // The mask sits in the arena at its own offset from x's.
    auto x = paramAt<uint64_t>(p, 0);
    const auto *mask =
        reinterpret_cast<const uint32_t *>(x - xOffset + maskOffset);
    seenMask.assign(mask, mask + 2);
  };
  device->kernels["scale"] = [](const PackedParams &, const LaunchConfig &) {};
  Expected<std::unique_ptr<Session>> session =
      Session::create(std::make_shared<const Artifact>(artifact), device);
  ASSERT_TRUE(session) << errorOf(session);
  float mask[2] = {};
  EXPECT_EQ(errorOf((*session)->bindInput("kiln.size_mask.N", DType::F32, {2},
                                          mask, sizeof(mask))),
            "input 'kiln.size_mask.N' is a size mask: the runtime fills it "
            "from the run's sizes; it is not bound");
  float one[3] = {1, 2, 3};
  ASSERT_EQ(errorOf((*session)->bindInput("x", DType::F32, {1, 3}, one, 12)),
            "<success>");
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  EXPECT_THAT(seenMask, ElementsAre(0u, 0xFF800000u));
  float two[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(errorOf((*session)->bindInput("x", DType::F32, {2, 3}, two, 24)),
            "<success>");
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  EXPECT_THAT(seenMask, ElementsAre(0u, 0u));
}

} // namespace

//===- SignatureGroupsTest.cpp - Sequence and optional groups -------------===//
//
// Format 1.9's signature groups: the section round-trips, the verifier
// names each broken group, a 1.8 reader refuses the file, and a session
// binds a sequence as a list with its count checked.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/SignatureGroups.h"
#include "kiln/runtime/Runtime.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::HasSubstr;

namespace {

/// The add-scale artifact with its input as a sequence of one tensor
/// (`xs[0]`), its output as a present optional `y`, and an optional input
/// `o` compiled absent.
Artifact makeGroupedArtifact() {
  Artifact artifact = makeAddScaleArtifact();
  artifact.inputs[0].name = "xs[0]";
  artifact.inputGroups = {{"xs", SignatureGroupKind::Sequence, true, 0, 1},
                          {"o", SignatureGroupKind::Optional, false, 0, 0}};
  artifact.outputGroups = {{"y", SignatureGroupKind::Optional, true, 0, 1}};
  return artifact;
}

TEST(SignatureGroupsTest, SectionRoundTrips) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeGroupedArtifact());
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(loadU32(image->data() + kFlagsOffset) & kHeaderFlagSignatureGroups,
            kHeaderFlagSignatureGroups);
  Expected<Artifact> artifact = parseBytes(*image);
  ASSERT_TRUE(artifact) << errorOf(artifact);
  ASSERT_EQ(artifact->inputGroups.size(), 2u);
  const SignatureGroup *xs = artifact->findInputGroup("xs");
  ASSERT_NE(xs, nullptr);
  EXPECT_EQ(xs->kind, SignatureGroupKind::Sequence);
  EXPECT_TRUE(xs->present);
  EXPECT_EQ(xs->first, 0u);
  EXPECT_EQ(xs->count, 1u);
  const SignatureGroup *o = artifact->findInputGroup("o");
  ASSERT_NE(o, nullptr);
  EXPECT_FALSE(o->present);
  EXPECT_EQ(o->count, 0u);
  ASSERT_EQ(artifact->outputGroups.size(), 1u);
  EXPECT_EQ(artifact->outputGroups[0].kind, SignatureGroupKind::Optional);
  // Without groups there is no section and no flag.
  Expected<std::vector<uint8_t>> plain =
      serializeArtifact(makeAddScaleArtifact());
  ASSERT_TRUE(plain) << errorOf(plain);
  EXPECT_EQ(loadU32(plain->data() + kFlagsOffset) & kHeaderFlagSignatureGroups,
            0u);
}

TEST(SignatureGroupsTest, ChecksumAndFlagAreChecked) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeGroupedArtifact());
  ASSERT_TRUE(image) << errorOf(image);
  std::vector<uint8_t> corrupt = *image;
  uint8_t *entry = tableEntryOf(corrupt, SectionKind::SignatureGroups);
  corrupt[loadU64(entry + kEntryOffsetOffset) + 5] ^= 0x01;
  EXPECT_THAT(errorOf(parseBytes(corrupt)),
              HasSubstr("section 'signature-groups': checksum mismatch"));
  // The section without the header flag, and the flag without the section.
  std::vector<uint8_t> unflagged = *image;
  storeU32(unflagged.data() + kFlagsOffset,
           loadU32(unflagged.data() + kFlagsOffset) &
               ~kHeaderFlagSignatureGroups);
  refreshHeaderChecksum(unflagged);
  EXPECT_THAT(errorOf(parseBytes(unflagged)),
              HasSubstr("section 'signature-groups' is present but the "
                        "header's signature-groups flag is not set"));
}

TEST(SignatureGroupsTest, AFormat18ReaderRefusesIt) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeGroupedArtifact());
  ASSERT_TRUE(image) << errorOf(image);
  // What a 1.8 reader sees: bit 3 is not a flag it knows.
  storeU32(image->data() + kMinorOffset, 8);
  refreshHeaderChecksum(*image);
  EXPECT_EQ(errorOf(parseBytes(*image)),
            "test.kiln: header: unknown flags 0x8");
}

TEST(SignatureGroupsTest, VerifierNamesTheGroup) {
  auto errorWith = [](const std::function<void(Artifact &)> &edit) {
    Artifact artifact = makeGroupedArtifact();
    edit(artifact);
    return errorOf(verifySignatureGroups(artifact));
  };
  EXPECT_EQ(errorWith([](Artifact &) {}), "<success>");
  EXPECT_EQ(errorWith([](Artifact &a) { a.inputs[0].name = "xs"; }),
            "section 'signature-groups': input group 'xs' (sequence): input 0 "
            "is 'xs', not 'xs[0]'");
  EXPECT_EQ(errorWith([](Artifact &a) { a.inputGroups[0].count = 2; }),
            "section 'signature-groups': input group 'xs' (sequence): "
            "tensors 0..2 lie past the signature's 1 inputs");
  EXPECT_EQ(errorWith([](Artifact &a) { a.inputGroups[1].count = 1; }),
            "section 'signature-groups': input group 'o' (optional): absent, "
            "but it has 1 tensors");
  EXPECT_EQ(errorWith([](Artifact &a) { a.inputGroups[1].name = "xs"; }),
            "section 'signature-groups': input group 'xs' appears twice");
  EXPECT_EQ(errorWith([](Artifact &a) { a.inputGroups[0].present = false; }),
            "section 'signature-groups': input group 'xs' (sequence): a "
            "sequence cannot be absent");
  EXPECT_EQ(errorWith([](Artifact &a) {
              a.outputGroups.push_back(
                  {"z", SignatureGroupKind::Optional, true, 0, 1});
            }),
            "section 'signature-groups': output group 'z' (optional): its "
            "tensors overlap the previous group's");
  // The reader runs the same checks.
  Artifact broken = makeGroupedArtifact();
  broken.inputs[0].name = "x";
  Expected<std::vector<uint8_t>> image = serializeArtifact(broken);
  EXPECT_FALSE(image);
}

TEST(SignatureGroupsTest, BindingChecksTheGroup) {
  Artifact artifact = makeGroupedArtifact();
  EXPECT_EQ(errorOf(checkSequenceInput(artifact, "xs", 1)), "<success>");
  EXPECT_EQ(errorOf(checkSequenceInput(artifact, "xs", 2)),
            "input 'xs' is a sequence of 1 tensors (kilnc --sequence xs=1); "
            "2 given");
  EXPECT_EQ(errorOf(checkSequenceInput(artifact, "o", 0)),
            "input 'o' is an optional tensor, not a sequence: bind one tensor");
  EXPECT_EQ(errorOf(checkSequenceInput(artifact, "q", 1)),
            "input 'q' is not a sequence input of the artifact");
  float x[6] = {};
  EXPECT_EQ(errorOf(checkInput(artifact, "o", DType::F32, {2, 3}, sizeof(x))),
            "input 'o' is an optional compiled absent (kilnc --absent o): it "
            "takes no tensor");
  EXPECT_EQ(errorOf(checkInput(artifact, "xs", DType::F32, {2, 3}, sizeof(x))),
            "input 'xs' is a sequence of 1 tensors: bind it as a list (its "
            "tensors are xs[0] ... xs[0])");
}

TEST(SignatureGroupsTest, SessionBindsAndReadsSequences) {
  auto device = std::make_shared<FakeDevice>(90);
  device->kernels["add_bias"] = [](const PackedParams &p,
                                   const LaunchConfig &) {
    auto *x = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 0));
    auto *tmp = reinterpret_cast<float *>(paramAt<uint64_t>(p, 2));
    for (int i = 0; i < 6; ++i)
      tmp[i] = x[i] + 1;
  };
  device->kernels["scale"] = [](const PackedParams &p, const LaunchConfig &) {
    auto *tmp = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 0));
    auto *y = reinterpret_cast<float *>(paramAt<uint64_t>(p, 1));
    for (int i = 0; i < 6; ++i)
      y[i] = tmp[i] * 2;
  };
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(makeGroupedArtifact()), device);
  ASSERT_TRUE(session) << errorOf(session);
  HostTensor x{DType::F32, {2, 3}, std::vector<uint8_t>(24)};
  float values[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(x.data.data(), values, sizeof(values));
  EXPECT_EQ(errorOf((*session)->bindSequence("xs", {x, x})),
            "input 'xs' is a sequence of 1 tensors (kilnc --sequence xs=1); "
            "2 given");
  ASSERT_EQ(errorOf((*session)->bindSequence("xs", {x})), "<success>");
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  // y is an optional, not a sequence; its tensor is read by its name.
  EXPECT_EQ(errorOf((*session)->readSequence("y")),
            "no sequence output named 'y'");
  Expected<HostTensor> y = (*session)->readOutput("y");
  ASSERT_TRUE(y) << errorOf(y);
  float got[6];
  std::memcpy(got, y->data.data(), sizeof(got));
  EXPECT_THAT(got, ::testing::ElementsAre(4, 6, 8, 10, 12, 14));
}

} // namespace

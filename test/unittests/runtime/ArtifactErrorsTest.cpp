//===- ArtifactErrorsTest.cpp - Every way the reader rejects a file -------===//
//
// Each test breaks one thing in a good image and checks the one-line message
// names what broke. Edits behind a checksum go through splitImage/joinImage,
// which recompute the checksums, so the check behind them is reached.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include <fmt/core.h>

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

std::vector<uint8_t> goodImage() {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeAddScaleArtifact());
  EXPECT_TRUE(image) << errorOf(image);
  return image ? *image : std::vector<uint8_t>();
}

/// Parses an image rebuilt after `edit` changed its sections.
std::string
errorAfterEdit(const std::function<void(std::vector<RawSection> &)> &edit) {
  std::vector<RawSection> sections = splitImage(goodImage());
  edit(sections);
  return errorOf(parseBytes(joinImage(sections)));
}

TEST(ArtifactErrorsTest, GoodImageParses) {
  EXPECT_EQ(errorOf(parseBytes(goodImage())), "<success>");
  // splitImage/joinImage reproduce the writer's bytes exactly.
  EXPECT_EQ(joinImage(splitImage(goodImage())), goodImage());
}

TEST(ArtifactErrorsTest, TruncatedFile) {
  std::vector<uint8_t> image = goodImage();
  EXPECT_EQ(errorOf(parseBytes({})),
            "test.kiln: empty file, not a Kiln artifact");
  for (size_t size : {size_t(3), size_t(8), size_t(63)}) {
    std::vector<uint8_t> cut(image.begin(), image.begin() + size);
    EXPECT_EQ(errorOf(parseBytes(cut)),
              "test.kiln: truncated: " + std::to_string(size) +
                  " bytes, less than the 64-byte header")
        << size;
  }
  for (size_t size :
       {size_t(64), size_t(200), image.size() / 2, image.size() - 1}) {
    std::vector<uint8_t> cut(image.begin(), image.begin() + size);
    EXPECT_EQ(errorOf(parseBytes(cut)),
              "test.kiln: truncated: the header records " +
                  std::to_string(image.size()) + " bytes but the file has " +
                  std::to_string(size))
        << size;
  }
}

TEST(ArtifactErrorsTest, TruncatedFileOnDisk) {
  TempDir dir;
  std::vector<uint8_t> image = goodImage();
  image.resize(image.size() - 5);
  writeBytes(dir.file("cut.kiln"), image);
  EXPECT_THAT(errorOf(readArtifact(dir.file("cut.kiln"))),
              StartsWith(dir.file("cut.kiln") + ": truncated:"));
}

TEST(ArtifactErrorsTest, TrailingBytes) {
  std::vector<uint8_t> image = goodImage();
  image.push_back(0);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("1 unexpected bytes after the end the header records"));
}

TEST(ArtifactErrorsTest, BadMagic) {
  std::vector<uint8_t> image = goodImage();
  image[4] = '\n'; // what a text-mode transfer does to "\r\n"
  EXPECT_EQ(errorOf(parseBytes(image)),
            "test.kiln: not a Kiln artifact (bad magic)");
  std::vector<uint8_t> text = {'{', '"', 'a', '"', '}'};
  EXPECT_EQ(errorOf(parseBytes(text)),
            "test.kiln: not a Kiln artifact (bad magic)");
}

TEST(ArtifactErrorsTest, FutureMajorVersionIsRejectedClearly) {
  std::vector<uint8_t> image = goodImage();
  storeU32(image.data() + kMajorOffset, 2);
  storeU32(image.data() + kMinorOffset, 3);
  // Rejected before any checksum: a newer header may be laid out differently.
  EXPECT_EQ(errorOf(parseBytes(image)),
            "test.kiln: format version 2.3 is newer than this runtime reads "
            "(1.x); use a newer kiln-run or recompile the model");
}

TEST(ArtifactErrorsTest, NewerMinorVersionIsRead) {
  std::vector<uint8_t> image =
      joinImage(splitImage(goodImage()), 1, kArtifactFormatMinor + 1);
  Expected<Artifact> artifact = parseBytes(image);
  ASSERT_TRUE(artifact) << errorOf(artifact);
  EXPECT_EQ(artifact->formatMinor, kArtifactFormatMinor + 1);
}

// Compatibility across versions (docs/artifact-format.md "Versioning"),
// written against the version constants so that a bump keeps testing the
// versions before it: a reader accepts the previous minor version, and every
// earlier one of its major.
std::vector<uint8_t> imageAsWrittenBy(uint32_t minor) {
  std::vector<RawSection> sections = splitImage(goodImage());
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [&](const RawSection &s) {
                                  return sectionKindSinceMinor(s.kind) > minor;
                                }),
                 sections.end());
  return joinImage(sections, kArtifactFormatMajor, minor);
}

TEST(ArtifactErrorsTest, PreviousMinorVersionIsRead) {
  ASSERT_GT(kArtifactFormatMinor, 0u) << "no previous minor version yet";
  uint32_t previous = kArtifactFormatMinor - 1;
  Expected<Artifact> artifact = parseBytes(imageAsWrittenBy(previous));
  ASSERT_TRUE(artifact) << errorOf(artifact);
  EXPECT_EQ(artifact->formatMajor, kArtifactFormatMajor);
  EXPECT_EQ(artifact->formatMinor, previous);
  // Its signature and launches read as the current version's do.
  Expected<Artifact> current = parseBytes(goodImage());
  ASSERT_TRUE(current) << errorOf(current);
  ASSERT_EQ(artifact->inputs.size(), current->inputs.size());
  EXPECT_EQ(artifact->inputs[0].name, current->inputs[0].name);
  EXPECT_EQ(artifact->inputs[0].shape, current->inputs[0].shape);
  EXPECT_EQ(artifact->launches.size(), current->launches.size());
  EXPECT_EQ(artifact->kernels.size(), current->kernels.size());
}

TEST(ArtifactErrorsTest, EveryEarlierMinorVersionIsRead) {
  for (uint32_t minor = 0; minor <= kArtifactFormatMinor; ++minor) {
    Expected<Artifact> artifact = parseBytes(imageAsWrittenBy(minor));
    ASSERT_TRUE(artifact) << "1." << minor << ": " << errorOf(artifact);
    EXPECT_EQ(artifact->formatMinor, minor);
  }
}

TEST(ArtifactErrorsTest, UnknownSectionIsSkippedButChecked) {
  std::vector<RawSection> sections = splitImage(goodImage());
  sections.insert(sections.begin() + 2, RawSection{42, {1, 2, 3, 4, 5}});
  std::vector<uint8_t> image = joinImage(sections, 1, 1);
  EXPECT_EQ(errorOf(parseBytes(image)), "<success>");
  // Find the unknown section's bytes and break them.
  uint8_t *entry = image.data() + kHeaderSize + 2 * kSectionEntrySize;
  image[loadU64(entry + kEntryOffsetOffset)] ^= 0xFF;
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("section of unknown kind 42: checksum mismatch"));
}

TEST(ArtifactErrorsTest, ZeroMajorVersion) {
  std::vector<uint8_t> image = goodImage();
  storeU32(image.data() + kMajorOffset, 0);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr(fmt::format("format version 0.{} is not a released "
                                    "version",
                                    kArtifactFormatMinor)));
}

TEST(ArtifactErrorsTest, HeaderChecksumMismatch) {
  std::vector<uint8_t> image = goodImage();
  image[kFlagsOffset + 3] ^= 0x40;
  EXPECT_THAT(errorOf(parseBytes(image)),
              StartsWith("test.kiln: header: checksum mismatch (stored 0x"));
}

TEST(ArtifactErrorsTest, UnknownHeaderFlags) {
  std::vector<uint8_t> image = goodImage();
  storeU32(image.data() + kFlagsOffset, 128);
  refreshHeaderChecksum(image);
  EXPECT_EQ(errorOf(parseBytes(image)),
            "test.kiln: header: unknown flags 0x80");
}

TEST(ArtifactErrorsTest, SectionTableChecksumMismatch) {
  std::vector<uint8_t> image = goodImage();
  image[kHeaderSize + kEntrySizeOffset] ^= 1;
  EXPECT_THAT(errorOf(parseBytes(image)),
              StartsWith("test.kiln: section table: checksum mismatch"));
}

TEST(ArtifactErrorsTest, ChecksumMismatchInEachSection) {
  for (uint32_t kind = kFirstSectionKind; kind <= kLastSectionKind; ++kind) {
    if (kind == uint32_t(SectionKind::Training))
      continue; // Only training artifacts have it (TrainingTest).
    if (kind == uint32_t(SectionKind::TensorMaps))
      continue; // Only artifacts with TMA kernels have it (TensorMapTest).
    if (kind == uint32_t(SectionKind::Collectives))
      continue; // Only data-parallel artifacts have it (TrainingTest).
    if (kind == uint32_t(SectionKind::ZeroedBuffers))
      continue; // Only split-K artifacts have it (ZeroedBuffersTest).
    if (kind == uint32_t(SectionKind::SymbolicDims))
      continue; // Only kilnc --dim artifacts have it (SymbolicDimsTest).
    if (kind == uint32_t(SectionKind::PowerSgd))
      continue; // Only PowerSGD artifacts have it (TrainingTest).
    if (kind == uint32_t(SectionKind::ShardOptimizer))
      continue; // Only ZeRO artifacts have it (TrainingTest).
    if (kind == uint32_t(SectionKind::LaunchScales))
      continue; // Only scaled kilnc --dim artifacts (LaunchScalesTest).
    if (kind == uint32_t(SectionKind::SignatureGroups))
      continue; // Only sequence/optional artifacts have it
                // (SignatureGroupsTest).
    if (kind == uint32_t(SectionKind::HostSteps))
      continue; // Only STRING models have it (HostStepsTest).
    if (kind == uint32_t(SectionKind::SizeMasks))
      continue; // Only masked kilnc --dim artifacts (SizeMasksTest).
    if (kind == uint32_t(SectionKind::LaunchGuards))
      continue; // Only size-bucketed kilnc --dim artifacts
                // (LaunchGuardsTest).
    if (kind == uint32_t(SectionKind::ControlRegions))
      continue; // Only artifacts with device-side loops
                // (ControlRegionsTest).
    std::vector<uint8_t> image = goodImage();
    uint8_t *entry = tableEntryOf(image, SectionKind(kind));
    uint64_t offset = loadU64(entry + kEntryOffsetOffset);
    uint64_t size = loadU64(entry + kEntrySizeOffset);
    ASSERT_GT(size, 0u) << sectionName(kind);
    image[offset + size / 2] ^= 0x01;
    EXPECT_THAT(errorOf(parseBytes(image)),
                StartsWith("test.kiln: section '" +
                           std::string(sectionName(kind)) +
                           "': checksum mismatch (stored 0x"))
        << sectionName(kind);
  }
}

TEST(ArtifactErrorsTest, WeightChecksumCanBeSkipped) {
  std::vector<uint8_t> image = goodImage();
  uint8_t *entry = tableEntryOf(image, SectionKind::WeightData);
  image[loadU64(entry + kEntryOffsetOffset)] ^= 0x01;
  ReadOptions options;
  options.verifyWeightChecksum = false;
  EXPECT_TRUE(
      parseArtifact(Blob::copyOf(image.data(), image.size()), "t", options));
  EXPECT_FALSE(parseBytes(image));
}

TEST(ArtifactErrorsTest, SectionOffsetPastEnd) {
  std::vector<uint8_t> image = goodImage();
  uint8_t *entry = tableEntryOf(image, SectionKind::Kernels);
  storeU64(entry + kEntryOffsetOffset, image.size() - 4);
  refreshTableChecksum(image);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("section 'kernels': " +
                        std::to_string(loadU64(entry + kEntrySizeOffset)) +
                        " bytes at offset " + std::to_string(image.size() - 4) +
                        " lie past the end of the file"));
  // Offsets near 2^64 must not wrap around the bounds check.
  storeU64(entry + kEntryOffsetOffset, ~uint64_t(0) - 2);
  refreshTableChecksum(image);
  EXPECT_THAT(errorOf(parseBytes(image)), HasSubstr("section 'kernels':"));
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("past the end of the file"));
}

TEST(ArtifactErrorsTest, SectionTablePastEnd) {
  std::vector<uint8_t> image = goodImage();
  storeU32(image.data() + kSectionCountOffset, 1000);
  refreshHeaderChecksum(image);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("section table: 32000 bytes at offset 64 lie outside "
                        "the file"));
  storeU32(image.data() + kSectionCountOffset, 5000);
  refreshHeaderChecksum(image);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("section table: 5000 sections (at most 1024)"));
}

TEST(ArtifactErrorsTest, OverlappingSections) {
  std::vector<uint8_t> image = goodImage();
  uint8_t *meta = tableEntryOf(image, SectionKind::Meta);
  uint8_t *signature = tableEntryOf(image, SectionKind::Signature);
  storeU64(signature + kEntryOffsetOffset,
           loadU64(meta + kEntryOffsetOffset) + 4);
  refreshTableChecksum(image);
  EXPECT_EQ(errorOf(parseBytes(image)),
            "test.kiln: sections 'meta' and 'signature' overlap");
}

TEST(ArtifactErrorsTest, SectionOverlappingTheTable) {
  std::vector<uint8_t> image = goodImage();
  storeU64(tableEntryOf(image, SectionKind::Meta) + kEntryOffsetOffset,
           kHeaderSize + 8);
  refreshTableChecksum(image);
  EXPECT_EQ(errorOf(parseBytes(image)),
            "test.kiln: section 'meta': overlaps the section table");
}

TEST(ArtifactErrorsTest, MissingAndDuplicateSections) {
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              sectionOf(sections, SectionKind::Launches).kind = 99;
            }),
            "test.kiln: section 'launches' is missing");
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              sectionOf(sections, SectionKind::Meta).kind =
                  uint32_t(SectionKind::Kernels);
            }),
            "test.kiln: section 'kernels' appears twice");
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              sectionOf(sections, SectionKind::Meta).flags = 2;
            }),
            "test.kiln: section 'meta': unknown flags 0x2");
}

TEST(ArtifactErrorsTest, MisalignedWeightData) {
  std::vector<uint8_t> image = goodImage();
  uint8_t *entry = tableEntryOf(image, SectionKind::WeightData);
  uint64_t offset = loadU64(entry + kEntryOffsetOffset);
  uint64_t size = loadU64(entry + kEntrySizeOffset);
  // Move the weight data (the last section) 8 bytes later.
  std::vector<uint8_t> data(image.begin() + offset,
                            image.begin() + offset + size);
  image.resize(offset + 8 + size);
  std::copy(data.begin(), data.end(), image.begin() + offset + 8);
  entry = tableEntryOf(image, SectionKind::WeightData); // resize moved it
  storeU64(entry + kEntryOffsetOffset, offset + 8);
  storeU64(image.data() + kFileSizeOffset, image.size());
  refreshTableChecksum(image);
  EXPECT_EQ(errorOf(parseBytes(image)),
            "test.kiln: section 'weight-data': offset " +
                std::to_string(offset + 8) + " is not a multiple of 64");
}

// Edits behind the checksums: the contents are parsed and cross-checked.

/// Offset of launch `index`'s kernel index in the launches section
/// (u32 count, then per launch: u32 kernel, u32 argc, u64 args[argc]).
size_t launchKernelOffset(const std::vector<uint8_t> &bytes, size_t index) {
  size_t offset = 4;
  for (size_t i = 0; i < index; ++i)
    offset += 8 + 8 * loadU32(bytes.data() + offset + 4);
  return offset;
}

TEST(ArtifactErrorsTest, BadKernelIndex) {
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              std::vector<uint8_t> &launches =
                  sectionOf(sections, SectionKind::Launches).bytes;
              storeU32(launches.data() + launchKernelOffset(launches, 1), 5);
            }),
            "test.kiln: section 'launches': launch 1: kernel index 5 is out "
            "of range (the artifact has 2 kernels)");
}

TEST(ArtifactErrorsTest, WrongArgumentCount) {
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              std::vector<uint8_t> &launches =
                  sectionOf(sections, SectionKind::Launches).bytes;
              // Launch 1 is last: drop its last argument.
              size_t at = launchKernelOffset(launches, 1);
              storeU32(launches.data() + at + 4, 2);
              launches.resize(launches.size() - 8);
            }),
            "test.kiln: section 'launches': launch 1 (kernel 'scale'): 2 "
            "arguments for 3 parameters");
}

TEST(ArtifactErrorsTest, ArenaPointerPastTheArena) {
  Artifact artifact = makeAddScaleArtifact();
  uint64_t arena = artifact.memoryPlan.arenaSize;
  EXPECT_EQ(errorAfterEdit([&](std::vector<RawSection> &sections) {
              std::vector<uint8_t> &launches =
                  sectionOf(sections, SectionKind::Launches).bytes;
              size_t at = launchKernelOffset(launches, 1);
              storeU64(launches.data() + at + 8 + 8, arena); // argument 1 'y'
            }),
            "test.kiln: section 'launches': launch 1 (kernel 'scale'): "
            "argument 1 'y': arena offset " +
                std::to_string(arena) + " is past the end of the arena (" +
                std::to_string(arena) + " bytes)");
}

TEST(ArtifactErrorsTest, CountsLargerThanTheSection) {
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              storeU32(sectionOf(sections, SectionKind::Kernels).bytes.data(),
                       0xFFFFFFFF);
            }),
            "test.kiln: section 'kernels': 4294967295 kernels cannot fit in "
            "the " +
                std::to_string(splitImage(goodImage())[3].bytes.size() - 4) +
                " bytes left");
}

TEST(ArtifactErrorsTest, TruncatedSectionContents) {
  EXPECT_THAT(errorAfterEdit([](std::vector<RawSection> &sections) {
                std::vector<uint8_t> &kernels =
                    sectionOf(sections, SectionKind::Kernels).bytes;
                kernels.resize(kernels.size() - 3);
              }),
              StartsWith("test.kiln: section 'kernels': kernel 1 'scale': "
                         "truncated while reading the cubin"));
  EXPECT_THAT(errorAfterEdit([](std::vector<RawSection> &sections) {
                sectionOf(sections, SectionKind::Meta).bytes.push_back(0);
              }),
              StartsWith("test.kiln: section 'meta': 1 unexpected bytes after "
                         "the last entry"));
}

/// The signature section starts with u32 inputs, u32 outputs, then input 0:
/// name "x" (u32 1 + 'x'), u32 dtype, u32 rank, i64 dims[2], u64 byte size.
constexpr size_t kInput0DType = 8 + 4 + 1;
constexpr size_t kInput0Dims = kInput0DType + 8;
constexpr size_t kInput0ByteSize = kInput0Dims + 16;

TEST(ArtifactErrorsTest, TensorByteSizeDisagreesWithShape) {
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              storeU64(
                  sectionOf(sections, SectionKind::Signature).bytes.data() +
                      kInput0ByteSize,
                  20);
            }),
            "test.kiln: section 'signature': input 'x': stored byte size 20 "
            "does not match f32 [2, 3] (24 bytes)");
}

TEST(ArtifactErrorsTest, UnknownDTypeAndNegativeDimension) {
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              storeU32(
                  sectionOf(sections, SectionKind::Signature).bytes.data() +
                      kInput0DType,
                  77);
            }),
            "test.kiln: section 'signature': input 'x': unknown dtype code 77");
  EXPECT_EQ(errorAfterEdit([](std::vector<RawSection> &sections) {
              storeU64(
                  sectionOf(sections, SectionKind::Signature).bytes.data() +
                      kInput0Dims,
                  uint64_t(-2));
            }),
            "test.kiln: section 'signature': input 'x': shape [-2, 3] has a "
            "negative dimension");
}

TEST(ArtifactErrorsTest, SignatureTensorOutsideItsBuffer) {
  Artifact artifact = makeAddScaleArtifact();
  artifact.inputs[0].arenaOffset += 8;
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  EXPECT_THAT(errorOf(image),
              HasSubstr("section 'signature': input 'x': bytes ["));
  EXPECT_THAT(errorOf(image), HasSubstr("lie outside its buffer 0 'x'"));
}

TEST(ArtifactErrorsTest, VerifierNamesEachProblem) {
  struct Case {
    std::function<void(Artifact &)> edit;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](Artifact &a) { a.target = "gfx90a"; },
       "section 'meta': target 'gfx90a' is not an sm name like 'sm_90'"},
      {[](Artifact &a) { a.inputs[0].buffer = 9; },
       "section 'signature': input 'x': buffer 9 is out of range (the memory "
       "plan has 3 buffers)"},
      {[](Artifact &a) { a.inputs[0].dtype = DType(42); },
       "section 'signature': input 'x': unknown dtype code 42"},
      {[](Artifact &a) { a.outputs.push_back(a.outputs[0]); },
       "section 'signature': output 'y' appears twice"},
      {[](Artifact &a) { a.weights[0].offset = 32; },
       "section 'weights': weight 'bias': offset 32 is not a multiple of 64"},
      {[](Artifact &a) { a.weights[0].shape = {4}; },
       "section 'weights': weight 'bias': bytes [0, 16) lie past the end of "
       "the weight data (12 bytes)"},
      {[](Artifact &a) { a.kernels[1].ptx.clear(); },
       "section 'kernels': kernel 1 'scale': has no PTX"},
      {[](Artifact &a) { a.kernels[1].name = "add_bias"; },
       "section 'kernels': kernel 1 'add_bias': kernel 0 has the same name"},
      {[](Artifact &a) { a.kernels[0].cubinSm = 90; },
       "section 'kernels': kernel 0 'add_bias': names cubin sm 90 but has no "
       "cubin"},
      {[](Artifact &a) {
         a.kernels[0].block = {1024, 2, 1};
       },
       "section 'kernels': kernel 0 'add_bias': block (1024, 2, 1) is empty or "
       "has more than 1024 threads"},
      {[](Artifact &a) {
         a.kernels[0].grid = {1, 0, 1};
       },
       "section 'kernels': kernel 0 'add_bias': grid (1, 0, 1) is empty or too "
       "large"},
      {[](Artifact &a) { a.launches[0].args[3] = uint64_t(1) << 32; },
       "section 'launches': launch 0 (kernel 'add_bias'): argument 3 'n': "
       "value 4294967296 does not fit the 32-bit parameter"},
      {[](Artifact &a) { a.launches[0].args[1] = 12; },
       "section 'launches': launch 0 (kernel 'add_bias'): argument 1 'bias': "
       "weights offset 12 is past the end of the weight data (12 bytes)"},
      {[](Artifact &a) { a.memoryPlan.buffers[2].lastUse = 2; },
       "section 'memory-plan': buffer 2 'y': last use 2 is past the last "
       "launch (2 launches)"},
      {[](Artifact &a) {
         a.memoryPlan.buffers[1].firstUse = 1;
         a.memoryPlan.buffers[1].lastUse = 0;
       },
       "section 'memory-plan': buffer 1 'tmp': first use 1 is after last use "
       "0"},
  };
  for (const Case &c : cases) {
    Artifact artifact = makeAddScaleArtifact();
    c.edit(artifact);
    EXPECT_EQ(errorOf(verifyArtifact(artifact)), c.message);
  }
}

TEST(ArtifactErrorsTest, MemoryPlanOverlapBetweenLiveBuffers) {
  Artifact artifact = makeAddScaleArtifact();
  // tmp and y are both live in launch 1; put y on top of tmp.
  artifact.memoryPlan.buffers[2].offset = artifact.memoryPlan.buffers[1].offset;
  artifact.outputs[0].arenaOffset = artifact.memoryPlan.buffers[1].offset;
  artifact.launches[1].args[1] = artifact.memoryPlan.buffers[1].offset;
  EXPECT_THAT(errorOf(verifyArtifact(artifact)),
              HasSubstr("section 'memory-plan': buffer 1 'tmp'"));
  EXPECT_THAT(errorOf(verifyArtifact(artifact)),
              HasSubstr("buffer 2 'y' (launches 1-1"));
  EXPECT_THAT(errorOf(verifyArtifact(artifact)),
              HasSubstr("are live at the same time and share bytes"));
}

TEST(ArtifactErrorsTest, GarbageNeverCrashes) {
  // Random byte flips anywhere: every result is a clean error or a valid
  // artifact (flips in padding), never a crash or a hang.
  std::vector<uint8_t> good = goodImage();
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> image = good;
    int flips = 1 + next() % 4;
    for (int f = 0; f < flips; ++f)
      image[next() % image.size()] ^= static_cast<uint8_t>(1 + next() % 255);
    if (trial % 2) {
      // Half the time make the flips pass the checksums.
      std::vector<uint8_t> header(image.begin(), image.begin() + kHeaderSize);
      if (std::memcmp(header.data(), kMagic, 8) == 0 &&
          loadU32(header.data() + kMajorOffset) == 1 &&
          loadU64(header.data() + kSectionTableOffset) == kHeaderSize &&
          loadU32(header.data() + kSectionCountOffset) == 7) {
        std::vector<RawSection> sections = splitImage(good);
        uint64_t table = kHeaderSize;
        for (size_t s = 0; s < sections.size(); ++s) {
          const uint8_t *entry = good.data() + table + s * kSectionEntrySize;
          uint64_t offset = loadU64(entry + kEntryOffsetOffset);
          for (size_t b = 0; b < sections[s].bytes.size(); ++b)
            sections[s].bytes[b] = image[offset + b];
        }
        image = joinImage(sections);
      }
    }
    Expected<Artifact> result = parseBytes(image);
    if (!result) {
      EXPECT_THAT(result.error().message(), StartsWith("test.kiln: "));
      EXPECT_EQ(result.error().message().find('\n'), std::string::npos);
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// kernel-resources (format 1.2)
//===----------------------------------------------------------------------===//

TEST(ArtifactErrorsTest, KernelResourcesRoundTripPerKernel) {
  Expected<Artifact> artifact = parseBytes(goodImage());
  ASSERT_TRUE(artifact) << errorOf(artifact);
  ASSERT_EQ(artifact->kernels.size(), 2u);
  ASSERT_TRUE(artifact->kernels[0].resources.has_value());
  EXPECT_EQ(artifact->kernels[0].resources->registersPerThread, 12u);
  EXPECT_EQ(artifact->kernels[0].resources->staticSharedBytes, 256u);
  EXPECT_EQ(artifact->kernels[0].resources->stackFrameBytes, 16u);
  EXPECT_EQ(artifact->kernels[0].resources->spillStoreBytes, 4u);
  EXPECT_EQ(artifact->kernels[0].resources->spillLoadBytes, 8u);
  // The second kernel was not assembled: no resources, not zeros.
  EXPECT_FALSE(artifact->kernels[1].resources.has_value());
}

TEST(ArtifactErrorsTest, VersionOneOneFileWithoutResourcesIsRead) {
  // What a 1.1 writer wrote: no kernel-resources section.
  std::vector<RawSection> sections = splitImage(goodImage());
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const RawSection &s) {
                                  return s.kind ==
                                         uint32_t(SectionKind::KernelResources);
                                }),
                 sections.end());
  Expected<Artifact> artifact = parseBytes(joinImage(sections, 1, 1));
  ASSERT_TRUE(artifact) << errorOf(artifact);
  EXPECT_EQ(artifact->formatMinor, 1u);
  for (const Kernel &kernel : artifact->kernels)
    EXPECT_FALSE(kernel.resources.has_value()) << kernel.name;
}

TEST(ArtifactErrorsTest, WriterOmitsResourcesWhenNoKernelHasThem) {
  Artifact artifact = makeAddScaleArtifact();
  for (Kernel &kernel : artifact.kernels)
    kernel.resources.reset();
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  for (const RawSection &section : splitImage(*image))
    EXPECT_NE(section.kind, uint32_t(SectionKind::KernelResources));
}

TEST(ArtifactErrorsTest, KernelResourcesCountMustMatchKernels) {
  std::vector<RawSection> sections = splitImage(goodImage());
  storeU32(sectionOf(sections, SectionKind::KernelResources).bytes.data(), 3);
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections))),
            "test.kiln: section 'kernel-resources': 3 entries for 2 kernels");
}

TEST(ArtifactErrorsTest, KernelResourcesTruncatedOrPadded) {
  std::vector<RawSection> sections = splitImage(goodImage());
  RawSection &resources = sectionOf(sections, SectionKind::KernelResources);
  resources.bytes.resize(resources.bytes.size() - 2);
  EXPECT_THAT(errorOf(parseBytes(joinImage(sections))),
              HasSubstr("section 'kernel-resources': kernel 1 'scale': "
                        "truncated while reading the spill load size"));
  resources.bytes.resize(resources.bytes.size() + 6);
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections))),
            "test.kiln: section 'kernel-resources': 4 unexpected bytes after "
            "the last entry");
}

TEST(ArtifactErrorsTest, KernelResourcesBadPresenceFlag) {
  std::vector<RawSection> sections = splitImage(goodImage());
  storeU32(sectionOf(sections, SectionKind::KernelResources).bytes.data() + 4,
           7);
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections))),
            "test.kiln: section 'kernel-resources': kernel 0 'add_bias': "
            "presence flag 7 is neither 0 nor 1");
}

TEST(ArtifactErrorsTest, KernelResourcesTooManyRegisters) {
  std::vector<RawSection> sections = splitImage(goodImage());
  storeU32(sectionOf(sections, SectionKind::KernelResources).bytes.data() + 8,
           256);
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections))),
            "test.kiln: section 'kernel-resources': kernel 0 'add_bias': 256 "
            "registers per thread is more than any GPU has (255)");
}

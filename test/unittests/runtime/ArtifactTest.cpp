//===- ArtifactTest.cpp - Artifact round trips and the writer -------------===//

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

void expectSameTensor(const TensorSignature &a, const TensorSignature &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype) << a.name;
  EXPECT_EQ(a.shape, b.shape) << a.name;
  EXPECT_EQ(a.arenaOffset, b.arenaOffset) << a.name;
  EXPECT_EQ(a.buffer, b.buffer) << a.name;
}

void expectSameArtifact(const Artifact &a, const Artifact &b) {
  EXPECT_EQ(a.formatMajor, b.formatMajor);
  EXPECT_EQ(a.formatMinor, b.formatMinor);
  EXPECT_EQ(a.compilerVersion, b.compilerVersion);
  EXPECT_EQ(a.compilerOptions, b.compilerOptions);
  EXPECT_EQ(a.target, b.target);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i)
    expectSameTensor(a.inputs[i], b.inputs[i]);
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i)
    expectSameTensor(a.outputs[i], b.outputs[i]);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_EQ(a.weights[i].name, b.weights[i].name);
    EXPECT_EQ(a.weights[i].dtype, b.weights[i].dtype);
    EXPECT_EQ(a.weights[i].shape, b.weights[i].shape);
    EXPECT_EQ(a.weights[i].offset, b.weights[i].offset);
    EXPECT_EQ(a.weights[i].origin, b.weights[i].origin);
  }
  EXPECT_EQ(a.strippedWeightBytes, b.strippedWeightBytes);
  ASSERT_EQ(a.inlinedInitializers.size(), b.inlinedInitializers.size());
  for (size_t i = 0; i < a.inlinedInitializers.size(); ++i) {
    EXPECT_EQ(a.inlinedInitializers[i].name, b.inlinedInitializers[i].name);
    EXPECT_EQ(a.inlinedInitializers[i].dtype, b.inlinedInitializers[i].dtype);
    EXPECT_EQ(a.inlinedInitializers[i].shape, b.inlinedInitializers[i].shape);
    EXPECT_EQ(a.inlinedInitializers[i].bytes, b.inlinedInitializers[i].bytes);
  }
  ASSERT_EQ(a.weightData.size(), b.weightData.size());
  EXPECT_TRUE(std::equal(a.weightData.data(),
                         a.weightData.data() + a.weightData.size(),
                         b.weightData.data()));
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const Kernel &x = a.kernels[i], &y = b.kernels[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.ptx, y.ptx);
    EXPECT_EQ(x.cubin, y.cubin);
    EXPECT_EQ(x.cubinSm, y.cubinSm);
    EXPECT_EQ(x.grid.x, y.grid.x);
    EXPECT_EQ(x.grid.y, y.grid.y);
    EXPECT_EQ(x.grid.z, y.grid.z);
    EXPECT_EQ(x.block.x, y.block.x);
    EXPECT_EQ(x.block.y, y.block.y);
    EXPECT_EQ(x.block.z, y.block.z);
    EXPECT_EQ(x.dynamicSharedBytes, y.dynamicSharedBytes);
    ASSERT_EQ(x.resources.has_value(), y.resources.has_value()) << x.name;
    if (x.resources) {
      EXPECT_EQ(x.resources->registersPerThread,
                y.resources->registersPerThread);
      EXPECT_EQ(x.resources->staticSharedBytes, y.resources->staticSharedBytes);
      EXPECT_EQ(x.resources->stackFrameBytes, y.resources->stackFrameBytes);
      EXPECT_EQ(x.resources->spillStoreBytes, y.resources->spillStoreBytes);
      EXPECT_EQ(x.resources->spillLoadBytes, y.resources->spillLoadBytes);
    }
    ASSERT_EQ(x.params.size(), y.params.size());
    for (size_t p = 0; p < x.params.size(); ++p) {
      EXPECT_EQ(x.params[p].kind, y.params[p].kind);
      EXPECT_EQ(x.params[p].name, y.params[p].name);
    }
  }
  ASSERT_EQ(a.launches.size(), b.launches.size());
  for (size_t i = 0; i < a.launches.size(); ++i) {
    EXPECT_EQ(a.launches[i].kernel, b.launches[i].kernel);
    EXPECT_EQ(a.launches[i].args, b.launches[i].args);
  }
  EXPECT_EQ(a.memoryPlan.arenaSize, b.memoryPlan.arenaSize);
  ASSERT_EQ(a.memoryPlan.buffers.size(), b.memoryPlan.buffers.size());
  for (size_t i = 0; i < a.memoryPlan.buffers.size(); ++i) {
    const ArenaBuffer &x = a.memoryPlan.buffers[i],
                      &y = b.memoryPlan.buffers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(x.firstUse, y.firstUse);
    EXPECT_EQ(x.lastUse, y.lastUse);
  }
}

TEST(ArtifactTest, FullArtifactIsValid) {
  Artifact artifact = makeFullArtifact();
  EXPECT_EQ(errorOf(verifyArtifact(artifact)), "<success>");
  EXPECT_EQ(artifact.weights.size(), allDTypes().size());
  EXPECT_EQ(artifact.targetSm(), 90u);
}

TEST(ArtifactTest, RoundTripThroughFileKeepsEveryField) {
  TempDir dir;
  Artifact artifact = makeFullArtifact();
  std::string path = dir.file("model.kiln");
  ASSERT_EQ(errorOf(writeArtifact(artifact, path)), "<success>");
  Expected<Artifact> read = readArtifact(path);
  ASSERT_TRUE(read) << errorOf(read);
  expectSameArtifact(artifact, *read);
  // Nothing but the artifact is left in the directory.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.kiln"});
}

TEST(ArtifactTest, RoundTripInMemoryMatchesFile) {
  TempDir dir;
  Artifact artifact = makeAddScaleArtifact();
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  ASSERT_EQ(errorOf(writeArtifact(artifact, dir.file("a.kiln"))), "<success>");
  EXPECT_EQ(*image, readBytes(dir.file("a.kiln")));
  Expected<Artifact> parsed = parseBytes(*image);
  ASSERT_TRUE(parsed) << errorOf(parsed);
  expectSameArtifact(artifact, *parsed);
}

TEST(ArtifactTest, EmptyArtifactRoundTrips) {
  Artifact artifact;
  artifact.target = "sm_80";
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  Expected<Artifact> parsed = parseBytes(*image);
  ASSERT_TRUE(parsed) << errorOf(parsed);
  expectSameArtifact(artifact, *parsed);
}

TEST(ArtifactTest, WeightsAreAlignedInFileAndMapping) {
  TempDir dir;
  Artifact artifact = makeFullArtifact();
  std::string path = dir.file("model.kiln");
  ASSERT_EQ(errorOf(writeArtifact(artifact, path)), "<success>");
  Expected<Artifact> read = readArtifact(path);
  ASSERT_TRUE(read) << errorOf(read);
  // The mapping is page-aligned and the weight data 64-byte aligned in the
  // file, so every weight is 64-byte aligned in memory without a copy.
  for (const Weight &weight : read->weights) {
    auto address =
        reinterpret_cast<uintptr_t>(read->weightData.data() + weight.offset);
    EXPECT_EQ(address % kWeightAlignment, 0u) << weight.name;
  }
  std::vector<uint8_t> bytes = readBytes(path);
  std::vector<RawSection> sections = splitImage(bytes);
  uint64_t table = format::loadU64(bytes.data() + format::kSectionTableOffset);
  for (size_t i = 0; i < sections.size(); ++i) {
    uint64_t offset =
        format::loadU64(bytes.data() + table + i * format::kSectionEntrySize +
                        format::kEntryOffsetOffset);
    uint64_t alignment =
        sections[i].kind == uint32_t(format::SectionKind::WeightData) ? 64 : 8;
    EXPECT_EQ(offset % alignment, 0u) << format::sectionName(sections[i].kind);
  }
}

TEST(ArtifactTest, WeightDataOutlivesTheArtifactThatReadIt) {
  TempDir dir;
  std::string path = dir.file("model.kiln");
  ASSERT_EQ(errorOf(writeArtifact(makeAddScaleArtifact(), path)), "<success>");
  Blob weights;
  {
    Expected<Artifact> read = readArtifact(path);
    ASSERT_TRUE(read) << errorOf(read);
    weights = read->weightData;
  }
  ASSERT_EQ(weights.size(), 12u);
  float values[3];
  std::memcpy(values, weights.data(), sizeof(values));
  EXPECT_EQ(values[0], 10.0f);
  EXPECT_EQ(values[2], 30.0f);
}

TEST(ArtifactTest, AddWeightAlignsAndChecksSize) {
  Artifact artifact;
  uint8_t bytes[3] = {1, 2, 3};
  ASSERT_TRUE(artifact.addWeight("a", DType::U8, {3}, bytes, 3));
  Expected<uint32_t> second = artifact.addWeight("b", DType::U8, {3}, bytes, 3);
  ASSERT_TRUE(second);
  EXPECT_EQ(artifact.weights[*second].offset, 64u);
  EXPECT_EQ(artifact.weightData.size(), 67u);
  Expected<uint32_t> bad = artifact.addWeight("c", DType::F32, {2}, bytes, 3);
  EXPECT_EQ(errorOf(bad), "weight 'c': 3 bytes given for f32 [2] (8 bytes)");
  EXPECT_EQ(errorOf(artifact.addWeight("d", DType::U8, {-1}, bytes, 3)),
            "weight 'd': shape [-1] has a negative dimension");
  EXPECT_EQ(artifact.weights.size(), 2u);
}

TEST(ArtifactTest, WriterReplacesAnExistingFile) {
  TempDir dir;
  std::string path = dir.file("model.kiln");
  writeBytes(path, std::vector<uint8_t>(10, 'x'));
  ASSERT_EQ(errorOf(writeArtifact(makeAddScaleArtifact(), path)), "<success>");
  EXPECT_TRUE(readArtifact(path));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.kiln"});
}

TEST(ArtifactTest, WriterRefusesInvalidArtifactAndKeepsOldFile) {
  TempDir dir;
  std::string path = dir.file("model.kiln");
  std::vector<uint8_t> old(10, 'x');
  writeBytes(path, old);
  Artifact artifact = makeAddScaleArtifact();
  artifact.launches[1].kernel = 7;
  EXPECT_THAT(errorOf(writeArtifact(artifact, path)),
              HasSubstr("launch 1: kernel index 7 is out of range"));
  EXPECT_EQ(readBytes(path), old);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.kiln"});
}

// `kilnc -o /dev/null` must not rename a temporary over the device node: a
// destination that is not a regular file is written in place. A FIFO stands
// in for /dev/null (a regression would only replace the FIFO).
TEST(ArtifactTest, WriterWritesANonRegularDestinationInPlace) {
  TempDir dir;
  std::string file = dir.file("model.kiln");
  ASSERT_EQ(errorOf(writeArtifact(makeAddScaleArtifact(), file)), "<success>");
  std::vector<uint8_t> expected = readBytes(file);
  std::string pipe = dir.file("pipe");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  // Open the read end first (non-blocking) so the writer's open succeeds,
  // and make the pipe large enough that the writer never blocks.
  int readEnd = ::open(pipe.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(readEnd, 0);
  ASSERT_GE(::fcntl(readEnd, F_SETPIPE_SZ, 1 << 20), int(expected.size()));
  ASSERT_EQ(errorOf(writeArtifact(makeAddScaleArtifact(), pipe)), "<success>");
  std::vector<uint8_t> received(expected.size() + 1);
  ssize_t got = ::read(readEnd, received.data(), received.size());
  ::close(readEnd);
  ASSERT_EQ(got, ssize_t(expected.size()));
  received.resize(got);
  EXPECT_EQ(received, expected);
  struct stat status;
  ASSERT_EQ(::stat(pipe.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"model.kiln", "pipe"}));
}

TEST(ArtifactTest, WriterRefusesADirectory) {
  TempDir dir;
  EXPECT_THAT(errorOf(writeArtifact(makeAddScaleArtifact(), dir.path)),
              HasSubstr("is a directory"));
}

TEST(ArtifactTest, WriterReportsUnwritableDirectory) {
  EXPECT_THAT(
      errorOf(
          writeArtifact(makeAddScaleArtifact(), "/nonexistent-dir/model.kiln")),
      HasSubstr("cannot create a temporary file in '/nonexistent-dir'"));
}

TEST(ArtifactTest, ReadMissingFileNamesIt) {
  EXPECT_THAT(errorOf(readArtifact("/nonexistent/model.kiln")),
              HasSubstr("cannot open '/nonexistent/model.kiln'"));
}

TEST(ArtifactTest, TargetSmParsesArchitectureNames) {
  Artifact artifact;
  for (auto [target, sm] :
       std::vector<std::pair<std::string, uint32_t>>{{"sm_80", 80},
                                                     {"sm_90a", 90},
                                                     {"sm_100f", 100},
                                                     {"sm_", 0},
                                                     {"sm90", 0},
                                                     {"sm_9x", 0},
                                                     {"compute_90", 0}}) {
    artifact.target = target;
    EXPECT_EQ(artifact.targetSm(), sm) << target;
  }
}

} // namespace

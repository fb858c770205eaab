//===- TrainingTest.cpp - Training artifacts, sessions, checkpoints -------===//
//
// Two hand-built single-function artifacts stand in for what kilnc --train
// compiles: train_step (w' = w - 0.5 (w - x), loss = sum (w - x)^2) and eval
// (y = w + x), both reading the state `params` = w. combineEntryPoints joins
// them; the FakeDevice runs C++ versions of the two kernels, so the state's
// life (initial value, updates, persistence across entry points,
// checkpoints) is checked without a GPU. Expected values are worked out by
// hand from the kernels' formulas.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Checksum.h"
#include "kiln/runtime/Training.h"

#include "ArtifactFormat.h"
#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

float *pointerParam(const PackedParams &params, size_t i) {
  return reinterpret_cast<float *>(paramAt<uint64_t>(params, i));
}

/// One part: inputs (name, shape), outputs, and one kernel taking every
/// input then every output, all live for the whole (one-launch) part.
Artifact makePart(const std::string &kernelName,
                  const std::vector<std::pair<std::string, Shape>> &inputs,
                  const std::vector<std::pair<std::string, Shape>> &outputs) {
  Artifact artifact;
  artifact.compilerVersion = "kilnc test";
  artifact.target = "sm_80";
  std::vector<LiveBuffer> live;
  for (size_t i = 0; i < inputs.size() + outputs.size(); ++i)
    live.push_back({64, 0, 0});
  Expected<MemoryPlan> plan = planMemory(live, kArenaAlignment);
  EXPECT_TRUE(plan.hasValue());
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  Kernel kernel;
  kernel.name = kernelName;
  kernel.ptx = ".version 8.0\n.target sm_80\n.address_size 64\n";
  Launch launch;
  for (size_t i = 0; i < live.size(); ++i) {
    bool isInput = i < inputs.size();
    const auto &[name, shape] =
        isInput ? inputs[i] : outputs[i - inputs.size()];
    artifact.memoryPlan.buffers.push_back(
        {name, plan->offsets[i], 64, 0, 0});
    (isInput ? artifact.inputs : artifact.outputs)
        .push_back({name,
                    DType::F32,
                    shape,
                    plan->offsets[i],
                    static_cast<uint32_t>(i),
                    {}});
    kernel.params.push_back({ParamKind::ArenaPointer, name});
    launch.args.push_back(plan->offsets[i]);
  }
  artifact.kernels = {kernel};
  artifact.launches = {launch};
  return artifact;
}

std::vector<uint8_t> floats(std::vector<float> values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> valuesOf(const HostTensor &tensor) {
  std::vector<float> values(tensor.data.size() / 4);
  std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

std::vector<StateSpec> specs(std::vector<float> initial = {1, 2, 3}) {
  return {{"params", floats(initial), {{"w", 0, {3}}}}, {"opt.step", {}, {}}};
}

Expected<Artifact> makeTrainingArtifact() {
  std::vector<EntryPointArtifact> parts;
  parts.push_back(
      {"train_step",
       makePart("step",
                {{"x", {3}}, {"kiln.state.params", {3}},
                 {"kiln.state.opt.step", {}}},
                {{"loss", {}}, {"kiln.state.params.next", {3}},
                 {"kiln.state.opt.step.next", {}}})});
  parts.push_back({"eval", makePart("eval_add",
                                    {{"x", {3}}, {"kiln.state.params", {3}}},
                                    {{"y", {3}}})});
  return combineEntryPoints(std::move(parts), specs());
}

std::shared_ptr<FakeDevice> makeDevice() {
  auto device = std::make_shared<FakeDevice>(90);
  device->kernels["step"] = [](const PackedParams &p, const LaunchConfig &) {
    const float *x = pointerParam(p, 0), *w = pointerParam(p, 1),
                *t = pointerParam(p, 2);
    float *loss = pointerParam(p, 3), *next = pointerParam(p, 4),
          *tNext = pointerParam(p, 5);
    *loss = 0;
    for (int i = 0; i < 3; ++i) {
      *loss += (w[i] - x[i]) * (w[i] - x[i]);
      next[i] = w[i] - 0.5f * (w[i] - x[i]);
    }
    *tNext = *t + 1;
  };
  device->kernels["eval_add"] = [](const PackedParams &p,
                                   const LaunchConfig &) {
    const float *x = pointerParam(p, 0), *w = pointerParam(p, 1);
    float *y = pointerParam(p, 2);
    for (int i = 0; i < 3; ++i)
      y[i] = w[i] + x[i];
  };
  return device;
}

std::unique_ptr<TrainingSession> makeSession(std::shared_ptr<FakeDevice> device) {
  Expected<Artifact> artifact = makeTrainingArtifact();
  EXPECT_TRUE(artifact) << errorOf(artifact);
  if (!artifact)
    return nullptr;
  Expected<std::unique_ptr<TrainingSession>> session = TrainingSession::create(
      std::make_shared<const Artifact>(artifact.take()), std::move(device));
  EXPECT_TRUE(session) << errorOf(session);
  return session ? session.take() : nullptr;
}

HostTensor tensor(std::vector<float> values, Shape shape) {
  return {DType::F32, std::move(shape), floats(std::move(values))};
}

TEST(TrainingTest, CombineLaysEntryPointsEndToEnd) {
  Expected<Artifact> artifact = makeTrainingArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  ASSERT_EQ(artifact->entryPoints.size(), 2u);
  const EntryPoint &step = artifact->entryPoints[0];
  const EntryPoint &eval = artifact->entryPoints[1];
  EXPECT_EQ(step.name, "train_step");
  EXPECT_EQ(step.firstLaunch, 0u);
  EXPECT_EQ(eval.firstLaunch, 1u);
  // State inputs leave the signature; the others are entry:name.
  ASSERT_EQ(step.inputs.size(), 1u);
  EXPECT_EQ(artifact->inputs[step.inputs[0]].name, "train_step:x");
  EXPECT_EQ(artifact->inputs[eval.inputs[0]].name, "eval:x");
  ASSERT_EQ(step.outputs.size(), 1u);
  EXPECT_EQ(artifact->outputs[step.outputs[0]].name, "train_step:loss");
  ASSERT_EQ(step.updates.size(), 2u);
  EXPECT_TRUE(eval.updates.empty());
  // eval's launch reads params where train_step keeps it, and that buffer
  // is live for the whole launch list.
  const StateTensor *params = artifact->findState("params");
  ASSERT_TRUE(params);
  EXPECT_EQ(artifact->launches[1].args[1], params->arenaOffset);
  const ArenaBuffer &home = artifact->memoryPlan.buffers[params->buffer];
  EXPECT_EQ(home.firstUse, 0u);
  EXPECT_EQ(home.lastUse, 1u);
  // eval's own buffers lie after train_step's arena.
  EXPECT_GE(artifact->launches[1].args[0], artifact->launches[0].args.back());
  EXPECT_EQ(artifact->kernels.size(), 2u);
}

TEST(TrainingTest, TrainingSectionRoundTrips) {
  Expected<Artifact> artifact = makeTrainingArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  Expected<std::vector<uint8_t>> image = serializeArtifact(*artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(format::loadU32(image->data() + format::kFlagsOffset),
            format::kHeaderFlagEntryPoints);
  Expected<Artifact> read =
      parseArtifact(Blob::copyOf(image->data(), image->size()), "t.kiln");
  ASSERT_TRUE(read) << errorOf(read);
  ASSERT_EQ(read->entryPoints.size(), 2u);
  EXPECT_EQ(read->entryPoints[1].name, "eval");
  EXPECT_EQ(read->entryPoints[0].updates.size(), 2u);
  ASSERT_EQ(read->state.size(), 2u);
  EXPECT_EQ(read->state[0].initial, floats({1, 2, 3}));
  ASSERT_EQ(read->state[0].segments.size(), 1u);
  EXPECT_EQ(read->state[0].segments[0].name, "w");
  EXPECT_TRUE(read->state[1].initial.empty());
  EXPECT_EQ(stateFingerprint(*read), stateFingerprint(*artifact));
}

TEST(TrainingTest, OlderMinorVersionsCannotHaveEntryPoints) {
  Expected<Artifact> artifact = makeTrainingArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  std::vector<uint8_t> image = *serializeArtifact(*artifact);
  // A 1.2 file with the flag: the flag is unknown to 1.2.
  format::storeU32(image.data() + format::kMinorOffset, 2);
  format::storeU32(image.data() + format::kHeaderChecksumOffset,
                   crc32c(image.data(), format::kHeaderChecksumOffset));
  EXPECT_EQ(errorOf(parseArtifact(Blob::copyOf(image.data(), image.size()),
                                  "t.kiln")),
            "t.kiln: header: unknown flags 0x1");
  // A 1.3 file with the section but without the flag.
  image = *serializeArtifact(*artifact);
  format::storeU32(image.data() + format::kFlagsOffset, 0);
  format::storeU32(image.data() + format::kHeaderChecksumOffset,
                   crc32c(image.data(), format::kHeaderChecksumOffset));
  EXPECT_EQ(errorOf(parseArtifact(Blob::copyOf(image.data(), image.size()),
                                  "t.kiln")),
            "t.kiln: section 'training' is present but the header's "
            "entry-points flag is not set");
}

TEST(TrainingTest, InferenceArtifactsAreUnchanged) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeAddScaleArtifact());
  ASSERT_TRUE(image);
  EXPECT_EQ(format::loadU32(image->data() + format::kFlagsOffset), 0u);
  // ... and the reader still takes every older minor version of them.
  for (uint32_t minor = kArtifactFormatOldestMinor; minor <= kArtifactFormatMinor;
       ++minor) {
    std::vector<uint8_t> copy = *image;
    format::storeU32(copy.data() + format::kMinorOffset, minor);
    format::storeU32(copy.data() + format::kHeaderChecksumOffset,
                     crc32c(copy.data(), format::kHeaderChecksumOffset));
    EXPECT_TRUE(parseArtifact(Blob::copyOf(copy.data(), copy.size()), "t"))
        << minor;
  }
}

TEST(TrainingTest, VerifierRejectsStateThatCouldBeReused) {
  Expected<Artifact> artifact = makeTrainingArtifact();
  ASSERT_TRUE(artifact);
  Artifact broken = *artifact;
  broken.memoryPlan.buffers[broken.state[0].buffer].lastUse = 0;
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("state 'params': buffer 1 is live for launches [0, "
                        "0], not the whole launch list"));
  broken = *artifact;
  broken.entryPoints[1].launchCount = 0;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'training': launch 1 belongs to no entry point");
  broken = *artifact;
  broken.state[0].initial.pop_back();
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("the initial value has 11 bytes, the tensor 12"));
  broken = *artifact;
  broken.state[0].segments[0].shape = {4};
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("segment 'w' ([4] at element 0) lies outside"));
}

TEST(TrainingTest, CombineRejectsUnknownState) {
  std::vector<EntryPointArtifact> parts;
  parts.push_back({"train_step", makePart("step", {{"kiln.state.mystery", {3}}},
                                          {{"loss", {}}})});
  EXPECT_THAT(errorOf(combineEntryPoints(std::move(parts), specs())),
              HasSubstr("reads state 'mystery', which has no specification"));
}

TEST(TrainingTest, StepsUpdateStateThatEvalSees) {
  auto device = makeDevice();
  std::unique_ptr<TrainingSession> session = makeSession(device);
  ASSERT_TRUE(session);
  ASSERT_EQ(errorOf(session->bindBatch("x", tensor({3, 2, 1}, {3}))),
            "<success>");
  // w = [1,2,3], x = [3,2,1]: loss 4+0+4 = 8, w' = [2,2,2].
  ASSERT_EQ(errorOf(session->step()), "<success>");
  EXPECT_EQ(*session->loss(), 8.0f);
  EXPECT_EQ(valuesOf(*session->readState("params")),
            (std::vector<float>{2, 2, 2}));
  // loss 1+0+1 = 2, w' = [2.5, 2, 1.5].
  ASSERT_EQ(errorOf(session->step()), "<success>");
  EXPECT_EQ(*session->loss(), 2.0f);
  EXPECT_EQ(*session->stepCount(), 2u);
  ASSERT_EQ(errorOf(session->evaluate()), "<success>");
  EXPECT_EQ(valuesOf(*session->readEvalOutput("y")),
            (std::vector<float>{5.5f, 4, 2.5f}));
  // A plain run() is refused: the entry points run one at a time.
  EXPECT_THAT(errorOf(session->base().run()),
              HasSubstr("the artifact has entry points (train_step, eval)"));
  EXPECT_THAT(errorOf(session->bindBatch("z", tensor({1, 2, 3}, {3}))),
              HasSubstr("no input named 'z' (train_step reads 'x')"));
}

TEST(TrainingTest, CheckpointsRestoreEveryStateTensor) {
  TempDir dir;
  auto device = makeDevice();
  std::unique_ptr<TrainingSession> session = makeSession(device);
  ASSERT_TRUE(session);
  ASSERT_FALSE(session->bindBatch("x", tensor({3, 2, 1}, {3})));
  ASSERT_FALSE(session->step());
  ASSERT_EQ(errorOf(session->saveCheckpoint(dir.file("c.safetensors"),
                                            {{"epoch", "1"}})),
            "<success>");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"c.safetensors"}));
  ASSERT_FALSE(session->step());
  ASSERT_FALSE(session->step());
  Expected<std::map<std::string, std::string>> meta =
      session->loadCheckpoint(dir.file("c.safetensors"));
  ASSERT_TRUE(meta) << errorOf(meta);
  EXPECT_EQ(meta->at("epoch"), "1");
  EXPECT_EQ(valuesOf(*session->readState("params")),
            (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(*session->stepCount(), 1u);
  // The weights are stored by initializer name, readable by any tool.
  Expected<Checkpoint> file = readSafetensors(dir.file("c.safetensors"));
  ASSERT_TRUE(file) << errorOf(file);
  EXPECT_EQ(valuesOf(file->tensors.at("w")), (std::vector<float>{2, 2, 2}));
  EXPECT_TRUE(file->tensors.count("kiln.state.opt.step"));
}

TEST(TrainingTest, BadCheckpointsChangeNothing) {
  TempDir dir;
  auto device = makeDevice();
  std::unique_ptr<TrainingSession> session = makeSession(device);
  ASSERT_TRUE(session);
  ASSERT_FALSE(session->saveCheckpoint(dir.file("good.safetensors")));
  std::ifstream in(dir.file("good.safetensors"), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 20u);
  // Truncated.
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 3);
  {
    std::ofstream out(dir.file("cut.safetensors"), std::ios::binary);
    out.write(reinterpret_cast<const char *>(cut.data()), cut.size());
  }
  EXPECT_THAT(errorOf(session->loadCheckpoint(dir.file("cut.safetensors"))),
              StartsWith(dir.file("cut.safetensors") + ": truncated"));
  // Another model: same file, different state layout.
  std::vector<EntryPointArtifact> parts;
  parts.push_back({"train_step", makePart("step",
                                          {{"x", {3}}, {"kiln.state.params", {3}},
                                           {"kiln.state.opt.step", {}}},
                                          {{"loss", {}}})});
  parts.push_back({"eval", makePart("eval_add",
                                    {{"x", {3}}, {"kiln.state.params", {3}}},
                                    {{"y", {3}}})});
  std::vector<StateSpec> other = specs();
  other[0].segments[0].name = "other_w";
  Expected<Artifact> otherArtifact =
      combineEntryPoints(std::move(parts), other);
  ASSERT_TRUE(otherArtifact) << errorOf(otherArtifact);
  Expected<std::unique_ptr<TrainingSession>> otherSession =
      TrainingSession::create(
          std::make_shared<const Artifact>(otherArtifact.take()), makeDevice());
  ASSERT_TRUE(otherSession);
  ASSERT_FALSE((*otherSession)->bindBatch("x", tensor({9, 9, 9}, {3})));
  EXPECT_THAT(
      errorOf((*otherSession)->loadCheckpoint(dir.file("good.safetensors"))),
      HasSubstr("the checkpoint is from another model"));
  EXPECT_EQ(valuesOf(*(*otherSession)->readState("params")),
            (std::vector<float>{1, 2, 3}));
  // Not safetensors at all.
  writeBytes(dir.file("junk.safetensors"), {1, 2, 3});
  {
    std::ofstream out(dir.file("junk.safetensors"), std::ios::binary);
    out << "this is not a checkpoint";
  }
  EXPECT_THAT(errorOf(session->loadCheckpoint(dir.file("junk.safetensors"))),
              StartsWith(dir.file("junk.safetensors") + ": truncated"));
}

} // namespace

namespace {

/// A safetensors file: the header's length, the header, then `data`.
void writeSafetensorsBytes(const std::string &path, const std::string &header,
                           size_t dataBytes) {
  std::vector<uint8_t> bytes(8);
  uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + dataBytes, 0);
  writeBytes(path, bytes);
}

TEST(TrainingTest, SafetensorsHeadersAreStrict) {
  TempDir dir;
  std::string path = dir.file("h.safetensors");
  auto errorFor = [&](const std::string &header, size_t dataBytes) {
    writeSafetensorsBytes(path, header, dataBytes);
    return errorOf(readSafetensors(path));
  };
  const std::string w = R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  EXPECT_EQ(errorFor("{" + w + "}", 4), "<success>");
  // JSON would keep the last of two equal keys; safetensors has one entry
  // per tensor.
  EXPECT_EQ(errorFor("{" + w + "," + w + "}", 4),
            path + ": header: duplicate key 'w'");
  EXPECT_EQ(
      errorFor(R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})",
               4),
      path + ": tensor 'w': a dimension is not an integer");
  EXPECT_EQ(
      errorFor(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
               4),
      path + ": tensor 'w': a dimension is not an integer");
  EXPECT_EQ(
      errorFor(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})",
               4),
      path + ": tensor 'w': data_offsets do not hold f32 [1]");
  EXPECT_EQ(errorFor(R"({"__metadata__":{"epoch":1}})", 0),
            path + ": header: metadata 'epoch' is not a string");
  EXPECT_EQ(errorFor("[1,2]", 0), path + ": header: not a JSON object");
  EXPECT_THAT(errorFor("{\"w\":", 0),
              StartsWith(path + ": header: not valid JSON: parse error at "
                                "line 1, column 6"));
  std::string deep(20, '[');
  EXPECT_EQ(errorFor("{\"a\":" + deep + std::string(20, ']') + "}", 0),
            path + ": header: nesting too deep");
}

TEST(TrainingTest, SafetensorsNamesRoundTrip) {
  // Names and metadata with quotes, backslashes, control and non-ASCII
  // characters come back as written, and the header is what Python's json
  // module would read (checked here by its exact bytes).
  TempDir dir;
  Checkpoint checkpoint;
  HostTensor tensor;
  tensor.dtype = DType::F32;
  tensor.shape = {};
  tensor.data = {0, 0, 128, 63};
  checkpoint.tensors["a\"b\\c\nd\xc3\xa9"] = tensor;
  checkpoint.metadata["note"] = "tab\there";
  ASSERT_EQ(errorOf(writeSafetensors(dir.file("n.safetensors"), checkpoint)),
            "<success>");
  std::vector<uint8_t> bytes = readBytes(dir.file("n.safetensors"));
  uint64_t length;
  std::memcpy(&length, bytes.data(), 8);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + length);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            "{\"__metadata__\":{\"note\":\"tab\\there\"},"
            "\"a\\\"b\\\\c\\nd\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[],"
            "\"data_offsets\":[0,4]}}");
  EXPECT_EQ((8 + length) % 8, 0u);
  Expected<Checkpoint> back = readSafetensors(dir.file("n.safetensors"));
  ASSERT_TRUE(back) << errorOf(back);
  EXPECT_EQ(back->tensors.count("a\"b\\c\nd\xc3\xa9"), 1u);
  EXPECT_EQ(back->metadata.at("note"), "tab\there");
}

} // namespace

//===----------------------------------------------------------------------===//
// Format 1.5: collective steps (data-parallel training).
//===----------------------------------------------------------------------===//

namespace {
/// The training artifact with one all-reduce over params[1, 3) after
/// train_step's launch (a stand-in for a gradient bucket).
Expected<Artifact> makeCollectiveArtifact() {
  Expected<Artifact> artifact = makeTrainingArtifact();
  if (artifact) {
    CollectiveStep step;
    step.state = 0;
    step.elementOffset = 1;
    step.elementCount = 2;
    step.afterLaunch = 0;
    artifact->collectives.push_back(step);
  }
  return artifact;
}

std::vector<uint8_t> withHeader(std::vector<uint8_t> image, uint32_t minor,
                                uint32_t flags) {
  format::storeU32(image.data() + format::kMinorOffset, minor);
  format::storeU32(image.data() + format::kFlagsOffset, flags);
  format::storeU32(image.data() + format::kHeaderChecksumOffset,
                   crc32c(image.data(), format::kHeaderChecksumOffset));
  return image;
}
} // namespace

TEST(CollectiveFormatTest, CollectivesSectionRoundTrips) {
  Expected<Artifact> artifact = makeCollectiveArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  ASSERT_FALSE(verifyArtifact(*artifact)) << errorOf(verifyArtifact(*artifact));
  Expected<std::vector<uint8_t>> image = serializeArtifact(*artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(format::loadU32(image->data() + format::kFlagsOffset),
            format::kHeaderFlagEntryPoints | format::kHeaderFlagCollectives);
  Expected<Artifact> read =
      parseArtifact(Blob::copyOf(image->data(), image->size()), "t.kiln");
  ASSERT_TRUE(read) << errorOf(read);
  ASSERT_EQ(read->collectives.size(), 1u);
  EXPECT_EQ(read->collectives[0].kind, CollectiveKind::AllReduceMean);
  EXPECT_EQ(read->collectives[0].state, 0u);
  EXPECT_EQ(read->collectives[0].elementOffset, 1u);
  EXPECT_EQ(read->collectives[0].elementCount, 2u);
  EXPECT_EQ(read->collectives[0].afterLaunch, 0u);
  // A training artifact without collectives keeps format 1.3's flags.
  Expected<Artifact> plain = makeTrainingArtifact();
  ASSERT_TRUE(plain);
  EXPECT_EQ(format::loadU32(serializeArtifact(*plain)->data() +
                            format::kFlagsOffset),
            format::kHeaderFlagEntryPoints);
}

TEST(CollectiveFormatTest, ChecksumCoversTheSection) {
  Expected<Artifact> artifact = makeCollectiveArtifact();
  ASSERT_TRUE(artifact);
  std::vector<uint8_t> image = *serializeArtifact(*artifact);
  uint32_t count = format::loadU32(image.data() + format::kSectionCountOffset);
  uint64_t table = format::loadU64(image.data() + format::kSectionTableOffset);
  bool found = false;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *entry = image.data() + table + i * format::kSectionEntrySize;
    if (format::loadU32(entry + format::kEntryKindOffset) !=
        uint32_t(format::SectionKind::Collectives))
      continue;
    found = true;
    uint64_t offset = format::loadU64(entry + format::kEntryOffsetOffset);
    image[offset + 6] ^= 0x01; // inside the first step's state index
  }
  ASSERT_TRUE(found);
  EXPECT_THAT(errorOf(parseArtifact(Blob::copyOf(image.data(), image.size()),
                                    "t.kiln")),
              StartsWith("t.kiln: section 'collectives': checksum mismatch"));
}

TEST(CollectiveFormatTest, OlderReadersRejectCollectives) {
  Expected<Artifact> artifact = makeCollectiveArtifact();
  ASSERT_TRUE(artifact);
  std::vector<uint8_t> image = *serializeArtifact(*artifact);
  uint32_t both =
      format::kHeaderFlagEntryPoints | format::kHeaderFlagCollectives;
  // What a 1.4 reader sees: the collectives flag is unknown to it (a 1.4
  // file cannot carry it), so the file is rejected, not trained rank by
  // rank without the all-reduce.
  EXPECT_EQ(errorOf(parseArtifact(
                Blob::copyOf(withHeader(image, 4, both).data(), image.size()),
                "t.kiln")),
            "t.kiln: header: unknown flags 0x2");
  // The section without the flag, and the flag without the section.
  EXPECT_EQ(errorOf(parseArtifact(
                Blob::copyOf(withHeader(image, 5, 1).data(), image.size()),
                "t.kiln")),
            "t.kiln: section 'collectives' is present but the header's "
            "collectives flag is not set");
  Expected<Artifact> plain = makeTrainingArtifact();
  std::vector<uint8_t> plainImage = *serializeArtifact(*plain);
  EXPECT_EQ(errorOf(parseArtifact(
                Blob::copyOf(withHeader(plainImage, 5, both).data(),
                             plainImage.size()),
                "t.kiln")),
            "t.kiln: header: the collectives flag is set but there is no "
            "'collectives' section");
}

TEST(CollectiveFormatTest, VerifierRejectsBadSteps) {
  Expected<Artifact> artifact = makeCollectiveArtifact();
  ASSERT_TRUE(artifact);
  Artifact broken = *artifact;
  broken.collectives[0].elementCount = 3;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'collectives': step 0: elements [1, 4) lie outside "
            "state 'params' (3 elements)");
  broken = *artifact;
  broken.collectives[0].elementCount = 0;
  EXPECT_THAT(errorOf(verifyArtifact(broken)), HasSubstr("elements [1, 1)"));
  broken = *artifact;
  broken.collectives[0].state = 7;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'collectives': step 0: state index 7 is out of range (2 "
            "state tensors)");
  broken = *artifact;
  broken.collectives[0].afterLaunch = 2;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'collectives': step 0: launch 2 is out of range (2 "
            "launches)");
  broken = *artifact;
  broken.collectives[0].kind = static_cast<CollectiveKind>(9);
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'collectives': step 0: unknown collective kind 9");
}

namespace {
/// makeCollectiveArtifact with its step compressed by PowerSGD: one 1 x 2
/// matrix at element 1 of 'params', rank 1.
Expected<Artifact> makePowerSgdArtifact() {
  Expected<Artifact> artifact = makeCollectiveArtifact();
  if (artifact) {
    artifact->collectives[0].kind = CollectiveKind::AllReducePowerSgd;
    artifact->powerSgd.rank = 1;
    artifact->powerSgd.seed = 42;
    artifact->powerSgd.matrices.push_back({0, 1, 1, 2});
  }
  return artifact;
}
} // namespace

TEST(CollectiveFormatTest, PowerSgdSectionRoundTrips) {
  Expected<Artifact> artifact = makePowerSgdArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  Expected<std::vector<uint8_t>> image = serializeArtifact(*artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(format::loadU32(image->data() + format::kMinorOffset),
            kArtifactFormatMinor);
  Expected<Artifact> read =
      parseArtifact(Blob::copyOf(image->data(), image->size()), "t.kiln");
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_EQ(read->collectives[0].kind, CollectiveKind::AllReducePowerSgd);
  EXPECT_EQ(collectiveKindName(read->collectives[0].kind),
            "all-reduce-powersgd");
  EXPECT_EQ(read->powerSgd.rank, 1u);
  EXPECT_EQ(read->powerSgd.seed, 42u);
  ASSERT_EQ(read->powerSgd.matrices.size(), 1u);
  EXPECT_EQ(read->powerSgd.matrices[0].step, 0u);
  EXPECT_EQ(read->powerSgd.matrices[0].elementOffset, 1u);
  EXPECT_EQ(read->powerSgd.matrices[0].rows, 1u);
  EXPECT_EQ(read->powerSgd.matrices[0].cols, 2u);
  // Without PowerSGD there is no section 15.
  Expected<Artifact> plain = makeCollectiveArtifact();
  ASSERT_TRUE(plain);
  Expected<Artifact> plainRead = parseArtifact(
      Blob::copyOf(serializeArtifact(*plain)->data(),
                   serializeArtifact(*plain)->size()),
      "t.kiln");
  ASSERT_TRUE(plainRead) << errorOf(plainRead);
  EXPECT_EQ(plainRead->powerSgd.rank, 0u);
  EXPECT_TRUE(plainRead->powerSgd.matrices.empty());
}

TEST(CollectiveFormatTest, ChecksumCoversThePowerSgdSection) {
  Expected<Artifact> artifact = makePowerSgdArtifact();
  ASSERT_TRUE(artifact);
  std::vector<uint8_t> image = *serializeArtifact(*artifact);
  uint32_t count = format::loadU32(image.data() + format::kSectionCountOffset);
  uint64_t table = format::loadU64(image.data() + format::kSectionTableOffset);
  bool found = false;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *entry = image.data() + table + i * format::kSectionEntrySize;
    if (format::loadU32(entry + format::kEntryKindOffset) !=
        uint32_t(format::SectionKind::PowerSgd))
      continue;
    found = true;
    uint64_t offset = format::loadU64(entry + format::kEntryOffsetOffset);
    image[offset + 4] ^= 0x01; // inside the seed
  }
  ASSERT_TRUE(found);
  EXPECT_THAT(errorOf(parseArtifact(Blob::copyOf(image.data(), image.size()),
                                    "t.kiln")),
              StartsWith("t.kiln: section 'powersgd': checksum mismatch"));
}

//===----------------------------------------------------------------------===//
// Format 1.8: ZeRO stage 1 (kilnc --shard-optimizer=N).
//===----------------------------------------------------------------------===//

namespace {
/// A 2-rank ZeRO artifact of 3 weights: S = 2, `grad` padded to 4, a
/// reduce-scatter-mean after train_step and an all-gather after
/// train_update, opt.m sharded.
Expected<Artifact> makeShardArtifact() {
  std::vector<EntryPointArtifact> parts;
  parts.push_back(
      {"train_step", makePart("zstep", {{"x", {3}}, {"kiln.state.params", {3}}},
                              {{"loss", {}}, {"kiln.state.grad.next", {4}}})});
  parts.push_back(
      {"train_update", makePart("zupdate",
                                {{"kiln.state.params.shard", {2}},
                                 {"kiln.state.opt.m", {2}},
                                 {"kiln.state.grad.shard", {2}}},
                                {{"kiln.state.params.shard.next", {2}},
                                 {"kiln.state.opt.m.next", {2}}})});
  parts.push_back(
      {"eval", makePart("eval_add", {{"x", {3}}, {"kiln.state.params", {3}}},
                        {{"y", {3}}})});
  std::vector<StateSpec> states = {
      {"params", floats({1, 2, 3}), {{"w", 0, {3}}}},
      {"grad", {}, {}},
      {"params.shard", {}, {}},
      {"opt.m", {}, {}},
      {"grad.shard", {}, {}}};
  Expected<Artifact> artifact = combineEntryPoints(std::move(parts), states);
  if (!artifact)
    return artifact;
  auto index = [&](std::string_view name) {
    return uint32_t(artifact->findState(name) - artifact->state.data());
  };
  artifact->collectives.push_back(
      {CollectiveKind::ReduceScatterMean, index("grad"), 0, 2, 0});
  artifact->collectives.push_back(
      {CollectiveKind::AllGather, index("params"), 0, 2, 1});
  artifact->shardOptimizer.shards = 2;
  artifact->shardOptimizer.gradShard = index("grad.shard");
  artifact->shardOptimizer.paramsShard = index("params.shard");
  artifact->shardOptimizer.sharded = {index("opt.m")};
  return artifact;
}
} // namespace

TEST(ShardOptimizerFormatTest, SectionRoundTrips) {
  Expected<Artifact> artifact = makeShardArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  ASSERT_FALSE(verifyArtifact(*artifact)) << errorOf(verifyArtifact(*artifact));
  Expected<std::vector<uint8_t>> image = serializeArtifact(*artifact);
  ASSERT_TRUE(image) << errorOf(image);
  // The writer writes the current format (the section came in 1.8).
  EXPECT_EQ(format::loadU32(image->data() + format::kMinorOffset),
            kArtifactFormatMinor);
  EXPECT_GE(kArtifactFormatMinor, 8u);
  Expected<Artifact> read =
      parseArtifact(Blob::copyOf(image->data(), image->size()), "t.kiln");
  ASSERT_TRUE(read) << errorOf(read);
  ASSERT_EQ(read->collectives.size(), 2u);
  EXPECT_EQ(collectiveKindName(read->collectives[0].kind),
            "reduce-scatter-mean");
  EXPECT_EQ(collectiveKindName(read->collectives[1].kind), "all-gather");
  EXPECT_EQ(read->shardOptimizer.shards, 2u);
  EXPECT_EQ(read->state[read->shardOptimizer.gradShard].name, "grad.shard");
  EXPECT_EQ(read->state[read->shardOptimizer.paramsShard].name, "params.shard");
  EXPECT_EQ(read->shardOptimizer.squaredNorm, ShardOptimizerConfig::kNone);
  ASSERT_EQ(read->shardOptimizer.sharded.size(), 1u);
  EXPECT_EQ(read->state[read->shardOptimizer.sharded[0]].name, "opt.m");
}

TEST(ShardOptimizerFormatTest, VerifierRejectsBadShards) {
  Expected<Artifact> artifact = makeShardArtifact();
  ASSERT_TRUE(artifact) << errorOf(artifact);
  Artifact broken = *artifact;
  broken.shardOptimizer = {};
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("a reduce-scatter-mean or all-gather step but no "
                        "'shard-optimizer' section"));
  broken = *artifact;
  broken.shardOptimizer.shards = 3; // grad has 4 elements, not 3 x 2
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("step 0 (reduce-scatter-mean): state 'grad' has 4 "
                        "elements, not 3 shards of 2"));
  broken = *artifact;
  broken.collectives[1].elementOffset = 1; // [1, 3) leaves the shard
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("step 1 (all-gather): elements [1, 3) lie outside "
                        "the shard (2 elements)"));
  broken = *artifact;
  broken.shardOptimizer.sharded = {broken.shardOptimizer.paramsShard};
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("is listed as optimizer state"));
  broken = *artifact;
  broken.collectives[0].kind = CollectiveKind::AllReduceMean;
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("step 0 is all-reduce-mean, which does not combine"));
}

TEST(CollectiveFormatTest, VerifierRejectsBadPowerSgd) {
  Expected<Artifact> artifact = makePowerSgdArtifact();
  ASSERT_TRUE(artifact);
  EXPECT_EQ(errorOf(verifyArtifact(*artifact)), "<success>");
  Artifact broken = *artifact;
  broken.powerSgd = {};
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'collectives': an all-reduce-powersgd step but no "
            "'powersgd' section (or rank 0)");
  broken = *artifact;
  broken.collectives[0].kind = CollectiveKind::AllReduceMean;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'powersgd' is present but no collective step is "
            "all-reduce-powersgd");
  broken = *artifact;
  broken.powerSgd.matrices[0].step = 3;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'powersgd': matrix 0: collective step 3 is not an "
            "all-reduce-powersgd step");
  broken = *artifact;
  broken.powerSgd.matrices[0].cols = 3;
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'powersgd': matrix 0: 1 x 3 at element 1 lies outside "
            "step 0's elements [1, 3)");
  broken = *artifact;
  broken.powerSgd.matrices[0].elementOffset = 0;
  EXPECT_THAT(errorOf(verifyArtifact(broken)),
              HasSubstr("1 x 2 at element 0 lies outside"));
  broken = *artifact;
  broken.powerSgd.matrices[0].rows = 0;
  EXPECT_THAT(errorOf(verifyArtifact(broken)), HasSubstr("lies outside"));
  broken = *artifact;
  broken.powerSgd.matrices[0].cols = 1;
  broken.powerSgd.matrices.push_back({0, 1, 1, 1});
  EXPECT_EQ(errorOf(verifyArtifact(broken)),
            "section 'powersgd': matrix 1: not after matrix 0 (matrices are "
            "ordered by step and offset and do not overlap)");
}

namespace {
/// A world of one for allReduceMeanPowerSgd: every collective is the
/// identity.
class LoneCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view engine() const override { return "lone"; }
  Error allReduceMean(float *, uint64_t, std::string_view) override {
    return Error::success();
  }
  Error reduceScatterMean(const float *, float *, uint64_t,
                          std::string_view) override {
    return Error::success();
  }
  Error allGather(const void *, uint64_t, void *, std::string_view) override {
    return Error::success();
  }
  Error broadcast(void *, uint64_t, int, std::string_view) override {
    return Error::success();
  }
  Error barrier(std::string_view) override { return Error::success(); }
  [[noreturn]] void abort(int) override { std::abort(); }
};
} // namespace

// Full rank (r = min(rows, cols)) reconstructs M exactly up to f32
// rounding: P P^T M = M. A rank-1 approximation of a rank-2 matrix
// cannot, and what it misses is kept as the error feedback. (The numpy
// reference of the whole algorithm: test/e2e/training/powersgd_unit.py.)
TEST(PowerSgdTest, FullRankIsExactAndLowRankKeepsTheRest) {
  LoneCommunicator lone;
  // A bias of 2, then a 2 x 3 matrix of rank 2.
  std::vector<float> grad = {0.5f, -1.0f, 1, 2, 3, -4, 5, 6};
  std::vector<float> data = grad;
  PowerSgdMemory memory;
  ASSERT_FALSE(allReduceMeanPowerSgd(lone, data.data(), data.size(),
                                     {{2, 2, 3, 0}}, 2, 1, memory, "b"));
  for (size_t i = 0; i < grad.size(); ++i)
    EXPECT_NEAR(data[i], grad[i], 1e-5f) << i;
  data = grad;
  PowerSgdMemory low;
  ASSERT_FALSE(allReduceMeanPowerSgd(lone, data.data(), data.size(),
                                     {{2, 2, 3, 0}}, 1, 1, low, "b"));
  EXPECT_EQ(data[0], 0.5f);
  EXPECT_EQ(data[1], -1.0f);
  float missed = 0;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(data[2 + i] + low.error[0][i], grad[2 + i], 1e-5f) << i;
    missed = std::max(missed, std::fabs(low.error[0][i]));
  }
  EXPECT_GT(missed, 0.1f);
  // A NaN (an fp16 overflow the update will skip) leaves no trace in the
  // memory: zero error and the seeded Q again.
  data = grad;
  data[3] = NAN;
  ASSERT_FALSE(allReduceMeanPowerSgd(lone, data.data(), data.size(),
                                     {{2, 2, 3, 0}}, 1, 1, low, "b"));
  EXPECT_TRUE(std::isnan(data[2]));
  EXPECT_EQ(low.error[0], std::vector<float>(6, 0.0f));
  EXPECT_EQ(low.q[0], powerSgdInitialQ(1, 0, 3, 1));
  EXPECT_EQ(errorOf(allReduceMeanPowerSgd(lone, data.data(), data.size(),
                                          {{4, 2, 3, 0}}, 1, 1, low, "b")),
            "PowerSGD all-reduce of b: matrix 0 (2 x 3 at element 4) is "
            "outside the bucket (8 elements) or overlaps the one before");
}

TEST(CollectiveFormatTest, SessionsNeedTrainUpdate) {
  Expected<Artifact> artifact = makeCollectiveArtifact();
  ASSERT_TRUE(artifact);
  auto shared = std::make_shared<const Artifact>(artifact.take());
  EXPECT_EQ(errorOf(TrainingSession::create(shared, makeDevice())),
            "the artifact has collective steps but no 'train_update' entry "
            "point");
}

TEST(CollectiveWorldTest, DetectsTheLauncherFromTheEnvironment) {
  for (const char *name :
       {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK",
        "MPI_LOCALRANKID", "SLURM_LOCALID"})
    ::unsetenv(name);
  Expected<WorldInfo> alone = detectWorld();
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->size, 1);
  EXPECT_EQ(alone->rank, 0);
  EXPECT_TRUE(alone->launcher.empty());

  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  Expected<WorldInfo> ompi = detectWorld();
  ASSERT_TRUE(ompi) << errorOf(ompi);
  EXPECT_EQ(ompi->launcher, "open-mpi");
  EXPECT_EQ(ompi->size, 4);
  EXPECT_EQ(ompi->rank, 3);
  EXPECT_EQ(ompi->localRank, 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "4", 1);
  EXPECT_EQ(errorOf(detectWorld()),
            "OMPI_COMM_WORLD_RANK=4 and OMPI_COMM_WORLD_SIZE=4: the rank lies "
            "outside the job");
  ::setenv("OMPI_COMM_WORLD_RANK", "x", 1);
  EXPECT_EQ(errorOf(detectWorld()),
            "environment variable OMPI_COMM_WORLD_RANK='x' is not a rank or a "
            "size");
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_LOCAL_RANK"})
    ::unsetenv(name);

  ::setenv("PMI_SIZE", "2", 1);
  ::setenv("PMI_RANK", "1", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  Expected<WorldInfo> pmi = detectWorld();
  ASSERT_TRUE(pmi) << errorOf(pmi);
  EXPECT_EQ(pmi->launcher, "pmi");
  EXPECT_EQ(pmi->rank, 1);
  EXPECT_EQ(pmi->localRank, 1);
  for (const char *name : {"PMI_SIZE", "PMI_RANK", "SLURM_LOCALID"})
    ::unsetenv(name);
}

//===----------------------------------------------------------------------===//
// Compressed all-reduce (kilnc --allreduce-dtype): f32 sums of 16-bit
// values and error feedback, against a stand-in second rank.
//===----------------------------------------------------------------------===//

namespace {
/// Rank 0 of two; rank 1 "sends" `other` (16-bit values) in every
/// all-gather.
class TwoRankCommunicator final : public Communicator {
public:
  std::vector<uint16_t> other;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string_view engine() const override { return "test"; }
  Error allReduceMean(float *, uint64_t, std::string_view) override {
    return Error::failure("not used");
  }
  Error reduceScatterMean(const float *, float *, uint64_t,
                          std::string_view) override {
    return Error::failure("not used");
  }
  Error allGather(const void *send, uint64_t bytes, void *receive,
                  std::string_view) override {
    if (other.size() * 2 != bytes)
      return Error::failure("rank 1 sends another size");
    std::memcpy(receive, send, bytes);
    std::memcpy(static_cast<uint8_t *>(receive) + bytes, other.data(), bytes);
    return Error::success();
  }
  Error broadcast(void *, uint64_t, int, std::string_view) override {
    return Error::failure("not used");
  }
  Error barrier(std::string_view) override { return Error::success(); }
  [[noreturn]] void abort(int) override { std::abort(); }
};
} // namespace

TEST(CompressedAllReduceTest, SumsSixteenBitValuesInF32) {
  TwoRankCommunicator comm;
  // Rank 1 sends bf16 3.0 (0x4040) and 0.25 (0x3e80); f16 3.0 (0x4200),
  // 0.25 (0x3400).
  comm.other = {0x4040, 0x3e80};
  std::vector<float> data = {1.0f, 0.5f}, residual;
  ASSERT_FALSE(allReduceMeanCompressed(comm, data.data(), 2, DType::BF16,
                                       residual, "test"));
  EXPECT_EQ(data, (std::vector<float>{2.0f, 0.375f}));
  EXPECT_EQ(residual, (std::vector<float>{0.0f, 0.0f}));
  comm.other = {0x4200, 0x3400};
  data = {1.0f, 0.5f};
  residual.clear();
  ASSERT_FALSE(allReduceMeanCompressed(comm, data.data(), 2, DType::F16,
                                       residual, "test"));
  EXPECT_EQ(data, (std::vector<float>{2.0f, 0.375f}));
  EXPECT_EQ(errorOf(allReduceMeanCompressed(comm, data.data(), 2, DType::F32,
                                            residual, "bucket 0")),
            "compressed all-reduce of bucket 0: f32 is not a wire type (bf16, "
            "f16)");
}

TEST(CompressedAllReduceTest, ErrorFeedbackKeepsTheSumWithinOneRounding) {
  // g = 1 + 2^-10 rounds to 1.0 in bf16 (8 significant bits) every time:
  // without feedback 64 steps would lose 64 x 2^-10 = 0.0625. With it,
  // the total sent stays within half a bf16 ulp of 1 (2^-8) of 64 g.
  TwoRankCommunicator comm;
  comm.other = {0};
  const float g = 1.0f + std::ldexp(1.0f, -10);
  std::vector<float> residual;
  double sent = 0;
  for (int step = 0; step < 64; ++step) {
    float value = g;
    ASSERT_FALSE(
        allReduceMeanCompressed(comm, &value, 1, DType::BF16, residual, "g"));
    sent += 2.0 * value; // the mean of (mine, 0): twice it is what I sent
  }
  EXPECT_LE(std::abs(sent - 64.0 * g), std::ldexp(1.0, -8))
      << "sent " << sent << " for " << 64.0 * g;
  EXPECT_LE(std::abs(residual[0]), std::ldexp(1.0f, -8));
}

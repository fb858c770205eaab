//===- RuntimeTestUtils.h - Runtime test fixtures ---------------*- C++ -*-===//
//
// Sample artifacts, a scratch directory, a host-memory FakeDevice that runs
// registered C++ functions in place of kernels, and helpers that take an
// artifact image apart and put it back together with fresh checksums (so a
// test can change one field and reach the check behind the checksums).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
#define KILN_TEST_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H

#include "ArtifactFormat.h"

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Checksum.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/MemoryPlan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

namespace kiln::runtime::test {

/// A host step of node 'n' (HostStepsTest, HostDataOpsTest).
inline HostStep hostStep(std::string op, std::vector<std::string> inputs,
                         std::vector<std::string> outputs,
                         std::vector<HostAttribute> attributes = {}) {
  HostStep s;
  s.op = std::move(op);
  s.node = "n";
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  s.attributes = std::move(attributes);
  return s;
}

/// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "kiln-rt-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      ADD_FAILURE() << "mkdtemp failed";
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string &name) const { return path + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto &entry : std::filesystem::directory_iterator(path))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string path;
};

inline void writeBytes(const std::string &path,
                       const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline Expected<Artifact> parseBytes(const std::vector<uint8_t> &bytes) {
  return parseArtifact(Blob::copyOf(bytes.data(), bytes.size()), "test.kiln");
}

/// The message of a failed Expected, or a marker when it unexpectedly held a
/// value (so EXPECT_THAT on messages fails readably).
template <typename T> std::string errorOf(const Expected<T> &result) {
  return result ? std::string("<success>") : result.error().message();
}
inline std::string errorOf(const Error &err) {
  return err ? err.message() : std::string("<success>");
}

//===----------------------------------------------------------------------===//
// Sample artifacts
//===----------------------------------------------------------------------===//

/// y = (x + bias) * k over f32 [2, 3], as two kernels:
///   launch 0: add_bias(x: arena, bias: weights, tmp: arena, n: scalar32)
///   launch 1: scale(tmp: arena, y: arena, k: scalar64)
/// The memory plan comes from planMemory, so y may reuse x's bytes.
inline Artifact makeAddScaleArtifact() {
  Artifact artifact;
  artifact.compilerVersion = "kilnc test";
  artifact.compilerOptions = "--test";
  artifact.target = "sm_80";
  const float bias[3] = {10, 20, 30};
  EXPECT_TRUE(artifact.addWeight("bias", DType::F32, {3}, bias, sizeof(bias))
                  .hasValue());
  // An origin (and an inlined initializer) give the artifact every section.
  artifact.weights[0].origin = "initializer f32 3 bias";
  artifact.inlinedInitializers.push_back(
      {"scale", DType::F32, {1}, {0, 0, 0x40, 0x40}}); // 3.0f

  std::vector<LiveBuffer> live = {{24, 0, 0}, {24, 0, 1}, {24, 1, 1}};
  Expected<MemoryPlan> plan = planMemory(live, kArenaAlignment);
  EXPECT_TRUE(plan.hasValue());
  const char *names[] = {"x", "tmp", "y"};
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  for (size_t i = 0; i < live.size(); ++i)
    artifact.memoryPlan.buffers.push_back({names[i], plan->offsets[i],
                                           live[i].size, live[i].firstUse,
                                           live[i].lastUse});
  uint64_t x = plan->offsets[0], tmp = plan->offsets[1], y = plan->offsets[2];
  artifact.inputs.push_back({"x", DType::F32, {2, 3}, x, 0, {}});
  artifact.outputs.push_back({"y", DType::F32, {2, 3}, y, 2, {}});

  Kernel addBias;
  addBias.name = "add_bias";
  addBias.ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
                ".visible .entry add_bias() { ret; }\n";
  addBias.grid = {1, 1, 1};
  addBias.block = {6, 1, 1};
  // Resources give the artifact the kernel-resources section too.
  addBias.resources = KernelResources{12, 256, 16, 4, 8};
  addBias.params = {{ParamKind::ArenaPointer, "x"},
                    {ParamKind::WeightsPointer, "bias"},
                    {ParamKind::ArenaPointer, "tmp"},
                    {ParamKind::Scalar32, "n"}};
  Kernel scale;
  scale.name = "scale";
  scale.ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
              ".visible .entry scale() { ret; }\n";
  scale.block = {6, 1, 1};
  scale.params = {{ParamKind::ArenaPointer, "tmp"},
                  {ParamKind::ArenaPointer, "y"},
                  {ParamKind::Scalar64, "k"}};
  artifact.kernels = {addBias, scale};
  artifact.launches = {{0, {x, artifact.weights[0].offset, tmp, 6}},
                       {1, {tmp, y, 3}}};
  return artifact;
}

/// An artifact that sets every field to something other than its default:
/// every dtype, a cubin, all parameter kinds, 3-D geometry, shared memory.
inline Artifact makeFullArtifact() {
  Artifact artifact;
  artifact.compilerVersion = "kilnc 0.1.0 (test)";
  artifact.compilerOptions = "--target=sm_90 --precision=bf16 --shape x=2x3";
  artifact.target = "sm_90a";
  std::vector<LiveBuffer> live;
  std::vector<std::string> bufferNames;
  std::vector<TensorSignature> tensors;
  int i = 0;
  for (DType dtype : allDTypes()) {
    Shape shape = {2, i + 1, 3};
    uint64_t size = *tensorByteSize(dtype, shape);
    std::vector<uint8_t> data(size);
    for (size_t b = 0; b < size; ++b)
      data[b] = static_cast<uint8_t>(b * 7 + i);
    std::string name(dtypeName(dtype));
    EXPECT_TRUE(artifact.addWeight("w." + name, dtype, shape, data.data(), size)
                    .hasValue());
    live.push_back(
        {size, static_cast<uint32_t>(i % 3), static_cast<uint32_t>(i % 3 + 1)});
    bufferNames.push_back("buf." + name);
    tensors.push_back(
        {"t." + name, dtype, shape, 0, static_cast<uint32_t>(i), {}});
    ++i;
  }
  // A scalar and an empty tensor too.
  live.push_back({8, 0, 3});
  bufferNames.push_back("buf.scalar");
  tensors.push_back({"scalar",
                     DType::I64,
                     {},
                     0,
                     static_cast<uint32_t>(live.size() - 1),
                     {}});
  live.push_back({0, 2, 2});
  bufferNames.push_back("buf.empty");
  tensors.push_back({"empty/with:odd name",
                     DType::F16,
                     {4, 0},
                     0,
                     static_cast<uint32_t>(live.size() - 1),
                     {}});

  Expected<MemoryPlan> plan = planMemory(live, kArenaAlignment);
  EXPECT_TRUE(plan.hasValue());
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  for (size_t b = 0; b < live.size(); ++b) {
    artifact.memoryPlan.buffers.push_back({bufferNames[b], plan->offsets[b],
                                           live[b].size, live[b].firstUse,
                                           live[b].lastUse});
    tensors[b].arenaOffset = plan->offsets[b];
  }
  for (size_t t = 0; t < tensors.size(); ++t)
    (t % 2 ? artifact.outputs : artifact.inputs).push_back(tensors[t]);

  Kernel gemm;
  gemm.name = "gemm_bf16_128x128";
  gemm.ptx = std::string(".version 8.0\n.target sm_90a\n") +
             std::string(3000, ' ') + "// long PTX\n";
  gemm.cubin = {0x7F, 'E', 'L', 'F', 0, 1, 2, 3, 255};
  gemm.cubinSm = 90;
  gemm.grid = {64, 32, 2};
  gemm.block = {128, 2, 1};
  gemm.dynamicSharedBytes = 98304;
  gemm.resources = KernelResources{168, 1024, 0, 0, 0};
  gemm.params = {{ParamKind::ArenaPointer, "a"},
                 {ParamKind::WeightsPointer, "b"},
                 {ParamKind::Scalar32, "m"},
                 {ParamKind::Scalar64, ""}};
  Kernel relu;
  relu.name = "relu";
  relu.ptx = ".version 8.0\n.target sm_90a\n";
  relu.grid = {1000, 1, 1};
  relu.block = {256, 1, 1};
  relu.params = {{ParamKind::ArenaPointer, "in"},
                 {ParamKind::ArenaPointer, "out"}};
  artifact.kernels = {gemm, relu};
  artifact.launches = {
      {0,
       {plan->offsets[0], artifact.weights[3].offset, 0xFFFFFFFFu,
        0x123456789ABCDEF0ull}},
      {1, {plan->offsets[1], plan->offsets[2]}},
      {0, {0, 0, 7, 0}},
      {1, {plan->offsets[2], plan->offsets[0]}},
  };
  return artifact;
}

//===----------------------------------------------------------------------===//
// Taking images apart
//===----------------------------------------------------------------------===//

struct RawSection {
  uint32_t kind;
  std::vector<uint8_t> bytes;
  uint32_t flags = 0;
};

/// The sections of a well-formed image, in table order.
inline std::vector<RawSection> splitImage(const std::vector<uint8_t> &image) {
  using namespace format;
  std::vector<RawSection> sections;
  uint32_t count = loadU32(image.data() + kSectionCountOffset);
  uint64_t table = loadU64(image.data() + kSectionTableOffset);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *entry = image.data() + table + i * kSectionEntrySize;
    uint64_t offset = loadU64(entry + kEntryOffsetOffset);
    uint64_t size = loadU64(entry + kEntrySizeOffset);
    sections.push_back({loadU32(entry + kEntryKindOffset),
                        std::vector<uint8_t>(image.begin() + offset,
                                             image.begin() + offset + size),
                        loadU32(entry + kEntryFlagsOffset)});
  }
  return sections;
}

/// Recomputes the header checksum after a test edits the header.
inline void refreshHeaderChecksum(std::vector<uint8_t> &image) {
  using namespace format;
  storeU32(image.data() + kHeaderChecksumOffset,
           crc32c(image.data(), kHeaderChecksumOffset));
}

/// A well-formed image of these sections (fresh checksums, 8/64 alignment).
inline std::vector<uint8_t> joinImage(const std::vector<RawSection> &sections,
                                      uint32_t major = kArtifactFormatMajor,
                                      uint32_t minor = kArtifactFormatMinor) {
  using namespace format;
  uint64_t tableSize = sections.size() * kSectionEntrySize;
  std::vector<uint8_t> image(kHeaderSize + tableSize, 0);
  for (size_t i = 0; i < sections.size(); ++i) {
    uint64_t alignment =
        sections[i].kind == uint32_t(SectionKind::WeightData) ? 64 : 8;
    image.resize((image.size() + alignment - 1) / alignment * alignment, 0);
    uint8_t *entry = image.data() + kHeaderSize + i * kSectionEntrySize;
    storeU32(entry + kEntryKindOffset, sections[i].kind);
    storeU32(entry + kEntryFlagsOffset, sections[i].flags);
    storeU64(entry + kEntryOffsetOffset, image.size());
    storeU64(entry + kEntrySizeOffset, sections[i].bytes.size());
    storeU32(entry + kEntryChecksumOffset,
             crc32c(sections[i].bytes.data(), sections[i].bytes.size()));
    image.insert(image.end(), sections[i].bytes.begin(),
                 sections[i].bytes.end());
  }
  std::memcpy(image.data(), kMagic, sizeof(kMagic));
  storeU32(image.data() + kMajorOffset, major);
  storeU32(image.data() + kMinorOffset, minor);
  storeU32(image.data() + kHeaderSizeOffset, kHeaderSize);
  storeU32(image.data() + kSectionCountOffset,
           static_cast<uint32_t>(sections.size()));
  storeU64(image.data() + kSectionTableOffset, kHeaderSize);
  storeU64(image.data() + kFileSizeOffset, image.size());
  storeU32(image.data() + kTableChecksumOffset,
           crc32c(image.data() + kHeaderSize, tableSize));
  refreshHeaderChecksum(image);
  return image;
}

/// Recomputes the table checksum (and then the header's) after a test edits
/// the section table.
inline void refreshTableChecksum(std::vector<uint8_t> &image) {
  using namespace format;
  uint64_t table = loadU64(image.data() + kSectionTableOffset);
  uint32_t count = loadU32(image.data() + kSectionCountOffset);
  storeU32(image.data() + kTableChecksumOffset,
           crc32c(image.data() + table, uint64_t(count) * kSectionEntrySize));
  refreshHeaderChecksum(image);
}

inline RawSection &sectionOf(std::vector<RawSection> &sections,
                             format::SectionKind kind) {
  for (RawSection &section : sections)
    if (section.kind == uint32_t(kind))
      return section;
  ADD_FAILURE() << "no section " << format::sectionName(kind);
  return sections.front();
}

/// Where a section's entry sits in the image's table.
inline uint8_t *tableEntryOf(std::vector<uint8_t> &image,
                             format::SectionKind kind) {
  using namespace format;
  uint64_t table = loadU64(image.data() + kSectionTableOffset);
  uint32_t count = loadU32(image.data() + kSectionCountOffset);
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t *entry = image.data() + table + i * kSectionEntrySize;
    if (loadU32(entry + kEntryKindOffset) == uint32_t(kind))
      return entry;
  }
  ADD_FAILURE() << "no section " << sectionName(kind);
  return image.data() + table;
}

//===----------------------------------------------------------------------===//
// FakeDevice
//===----------------------------------------------------------------------===//

/// A device whose memory is host memory and whose "kernels" are C++
/// functions registered by kernel name. It records every launch, so tests can
/// check what a session packs, and it can be told to fail a named call.
class FakeDevice final : public Device {
public:
  using KernelFn =
      std::function<void(const PackedParams &, const LaunchConfig &)>;

  explicit FakeDevice(uint32_t computeCapability = 90) {
    deviceInfo.kind = "fake";
    deviceInfo.name = "Fake GPU";
    deviceInfo.computeCapability = computeCapability;
  }
  ~FakeDevice() override {
    for (auto &[ptr, memory] : allocations)
      std::free(reinterpret_cast<void *>(ptr));
  }

  std::map<std::string, KernelFn> kernels;
  std::vector<std::string> launched;
  std::string failCall;
  uint64_t liveAllocations() const { return allocations.size(); }
  int loadedModules = 0;
  bool graphs = false;
  int graphLaunches = 0;
  /// copyOnDevice calls (device-resident inputs and outputs).
  int onDeviceCopies = 0;
  /// What runsEveryBlock answers (false: as emu's sampled profiling).
  bool everyBlock = true;
  /// Fresh allocations are filled with this byte (device memory is not
  /// zeroed).
  uint8_t allocationFill = 0xAB;

  const DeviceInfo &info() const override { return deviceInfo; }
  Expected<DevicePtr> allocate(uint64_t size) override {
    if (failCall == "allocate")
      return Error::failure("fakeAlloc: out of memory");
    void *memory = std::aligned_alloc(256, (size + 255) / 256 * 256);
    std::memset(memory, allocationFill, (size + 255) / 256 * 256);
    auto ptr = reinterpret_cast<DevicePtr>(memory);
    allocations[ptr] = size;
    return ptr;
  }
  Error deallocate(DevicePtr ptr) override {
    if (!allocations.erase(ptr))
      return Error::failure("fakeFree: unknown pointer");
    std::free(reinterpret_cast<void *>(ptr));
    return Error::success();
  }
  Error copyToDevice(DevicePtr dst, const void *src, uint64_t size) override {
    std::memcpy(reinterpret_cast<void *>(dst), src, size);
    return Error::success();
  }
  Error copyToHost(void *dst, DevicePtr src, uint64_t size) override {
    std::memcpy(dst, reinterpret_cast<const void *>(src), size);
    return Error::success();
  }
  Error copyOnDevice(DevicePtr dst, DevicePtr src, uint64_t size) override {
    ++onDeviceCopies;
    std::memmove(reinterpret_cast<void *>(dst),
                 reinterpret_cast<const void *>(src), size);
    return Error::success();
  }
  Expected<ModuleHandle> loadModule(const ModuleImage &image) override {
    if (failCall == "loadModule")
      return Error::failure("fakeModuleLoad (kernel '" +
                            std::string(image.kernelName) + "'): bad PTX");
    ++loadedModules;
    moduleNames.push_back(std::string(image.kernelName));
    return ModuleHandle{moduleNames.size()};
  }
  Error unloadModule(ModuleHandle) override {
    --loadedModules;
    return Error::success();
  }
  Expected<FunctionHandle> getFunction(ModuleHandle module,
                                       std::string_view name) override {
    functionNames.push_back(std::string(name));
    return FunctionHandle{functionNames.size()};
  }
  Expected<StreamHandle> createStream() override { return StreamHandle{1}; }
  Error destroyStream(StreamHandle) override { return Error::success(); }
  Error synchronize(StreamHandle) override { return Error::success(); }
  Error launch(FunctionHandle function, const LaunchConfig &config,
               const PackedParams &params, StreamHandle) override {
    const std::string &name = functionNames.at(function.id - 1);
    if (failCall == "launch")
      return Error::failure("fakeLaunch (kernel '" + name + "'): failed");
    if (capturing) {
      captured.push_back({name, params, config});
      return Error::success();
    }
    launched.push_back(name);
    if (kernels.count(name))
      kernels[name](params, config);
    return Error::success();
  }
  /// When set, energyMillijoules returns it, then adds energyStep.
  std::optional<uint64_t> energy;
  uint64_t energyStep = 0;
  Expected<uint64_t> energyMillijoules() override {
    if (!energy)
      return Device::energyMillijoules();
    uint64_t value = *energy;
    *energy += energyStep;
    return value;
  }
  Expected<EventHandle> createEvent() override { return EventHandle{1}; }
  Error destroyEvent(EventHandle) override { return Error::success(); }
  Error recordEvent(EventHandle, StreamHandle) override {
    return Error::success();
  }
  Expected<float> elapsedMilliseconds(EventHandle, EventHandle) override {
    return 0.5f;
  }
  bool supportsGraphs() const override { return graphs; }
  bool runsEveryBlock() const override { return everyBlock; }
  Error beginCapture(StreamHandle) override {
    capturing = true;
    return Error::success();
  }
  Expected<GraphHandle> endCapture(StreamHandle) override {
    capturing = false;
    graphsCaptured.push_back(std::move(captured));
    captured.clear();
    return GraphHandle{graphsCaptured.size()};
  }
  Error launchGraph(GraphHandle graph, StreamHandle) override {
    ++graphLaunches;
    for (auto &[name, params, config] : graphsCaptured.at(graph.id - 1)) {
      launched.push_back(name);
      if (kernels.count(name))
        kernels[name](params, config);
    }
    return Error::success();
  }
  Error destroyGraph(GraphHandle) override {
    ++graphsDestroyed;
    return Error::success();
  }
  /// Graphs captured so far (each one's launches) and destroyed.
  std::vector<std::vector<std::tuple<std::string, PackedParams, LaunchConfig>>>
      graphsCaptured;
  int graphsDestroyed = 0;

private:
  DeviceInfo deviceInfo;
  std::map<DevicePtr, uint64_t> allocations;
  std::vector<std::string> moduleNames;
  std::vector<std::string> functionNames;
  bool capturing = false;
  std::vector<std::tuple<std::string, PackedParams, LaunchConfig>> captured;
};

/// Parameter `i` of a packed launch.
template <typename T> T paramAt(const PackedParams &params, size_t i) {
  T value;
  std::memcpy(&value, params.data() + params.offset(i), sizeof(T));
  return value;
}

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H

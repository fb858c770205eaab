//===- ControlRegionsTest.cpp - Device-side loops over the launch list ----===//
//
// Format 1.12's `control-regions` section (an ONNX Loop whose trip count or
// condition is known only at run time): hand-built artifacts whose kernels,
// written here in PTX, count on the arena, run on the emu device as a
// counting loop and as two nested loops, against values worked out by hand;
// the same through an entry point; a FakeDevice session with graph replay
// on (not captured: no conditional graph nodes) and a benchmark (whole runs
// only); a device with conditional WHILE nodes (a host model of them) that
// captures both artifacts once and replays them at other trip counts, and
// its error paths; the kiln_set_while cubins the build embedded; on a GPU
// (skipped without one), both artifacts on cuda with graph replay off and on;
// the round trip with its header flag; every verifier and reader rule with
// its message; a 1.11 reader refusing the flag; kiln-run's region lines.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"
#include "SetWhileKernel.h"

#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Runtime.h"

#include <fmt/core.h>
#include <gmock/gmock.h>

#include <cstring>
#include <list>
#include <set>
#include <sys/wait.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

constexpr const char *kPtxHeader =
    ".version 8.0\n.target sm_80\n.address_size 64\n";

/// One-thread kernels on i32 values in the arena (each parameter a pointer).
/// A flag is one byte: 1 while the loop goes on.
struct KernelSource {
  const char *name;
  std::vector<const char *> params;
  const char *body;
};

const std::vector<KernelSource> &kernelLibrary() {
  static const std::vector<KernelSource> library = {
      // *p = 0
      {"zero", {"p"}, R"(
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 0;
  st.global.u32 [%rd1], %r1;
  ret;)"},
      // *p += 1
      {"increment", {"p"}, R"(
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  ld.global.u32 %r1, [%rd1];
  add.s32 %r2, %r1, 1;
  st.global.u32 [%rd1], %r2;
  ret;)"},
      // *dst += *src
      {"accumulate", {"dst", "src"}, R"(
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [dst];
  ld.param.u64 %rd2, [src];
  ld.global.u32 %r1, [%rd1];
  ld.global.u32 %r2, [%rd2];
  add.s32 %r3, %r1, %r2;
  st.global.u32 [%rd1], %r3;
  ret;)"},
      // *counter = 0; *flag = 0 < *limit
      {"reset", {"counter", "flag", "limit"}, R"(
  .reg .pred %p<2>;
  .reg .b16 %h<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [counter];
  ld.param.u64 %rd2, [flag];
  ld.param.u64 %rd3, [limit];
  mov.u32 %r1, 0;
  st.global.u32 [%rd1], %r1;
  ld.global.u32 %r2, [%rd3];
  setp.lt.s32 %p1, %r1, %r2;
  selp.u32 %r3, 1, 0, %p1;
  cvt.u16.u32 %h1, %r3;
  st.global.u8 [%rd2], %h1;
  ret;)"},
      // *counter += 1; *flag = *counter < *limit
      {"step", {"counter", "flag", "limit"}, R"(
  .reg .pred %p<2>;
  .reg .b16 %h<2>;
  .reg .b32 %r<5>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [counter];
  ld.param.u64 %rd2, [flag];
  ld.param.u64 %rd3, [limit];
  ld.global.u32 %r1, [%rd1];
  add.s32 %r2, %r1, 1;
  st.global.u32 [%rd1], %r2;
  ld.global.u32 %r3, [%rd3];
  setp.lt.s32 %p1, %r2, %r3;
  selp.u32 %r4, 1, 0, %p1;
  cvt.u16.u32 %h1, %r4;
  st.global.u8 [%rd2], %h1;
  ret;)"},
  };
  return library;
}

Kernel makeKernel(const KernelSource &source) {
  Kernel kernel;
  kernel.name = source.name;
  std::string params;
  for (const char *param : source.params) {
    params += std::string(params.empty() ? "" : ", ") + ".param .u64 " + param;
    kernel.params.push_back({ParamKind::ArenaPointer, param});
  }
  kernel.ptx = std::string(kPtxHeader) + ".visible .entry " + source.name +
               "(" + params + ")\n{" + source.body + "\n}\n";
  kernel.grid = {1, 1, 1};
  kernel.block = {1, 1, 1};
  return kernel;
}

/// A launch of kernel `kernel` on buffers `buffers` (by name).
struct Step {
  std::string kernel;
  std::vector<std::string> buffers;
};

/// An artifact over 4-byte i32 buffers, each live for the whole launch
/// list: inputs and outputs are scalars of the buffers of their name; each
/// region is (first launch, launch count, the flag's buffer).
Artifact loopArtifact(
    const std::vector<std::string> &bufferNames,
    const std::vector<std::string> &inputs,
    const std::vector<std::string> &outputs, const std::vector<Step> &steps,
    const std::vector<std::tuple<uint32_t, uint32_t, std::string>> &regions) {
  Artifact artifact;
  artifact.compilerVersion = "kilnc test";
  artifact.compilerOptions = "--test";
  artifact.target = "sm_80";
  uint32_t last = static_cast<uint32_t>(steps.size() - 1);
  std::vector<LiveBuffer> live(bufferNames.size(), {4, 0, last});
  Expected<MemoryPlan> plan = planMemory(live, kArenaAlignment);
  EXPECT_TRUE(plan.hasValue());
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  auto bufferIndex = [&](const std::string &name) {
    auto it = std::find(bufferNames.begin(), bufferNames.end(), name);
    EXPECT_NE(it, bufferNames.end()) << name;
    return static_cast<uint32_t>(it - bufferNames.begin());
  };
  for (size_t b = 0; b < bufferNames.size(); ++b)
    artifact.memoryPlan.buffers.push_back(
        {bufferNames[b], plan->offsets[b], 4, 0, last});
  for (const std::string &name : inputs)
    artifact.inputs.push_back({name,
                               DType::I32,
                               {},
                               plan->offsets[bufferIndex(name)],
                               bufferIndex(name),
                               {}});
  for (const std::string &name : outputs)
    artifact.outputs.push_back({name,
                                DType::I32,
                                {},
                                plan->offsets[bufferIndex(name)],
                                bufferIndex(name),
                                {}});
  for (const Step &step : steps) {
    auto kernel =
        std::find_if(artifact.kernels.begin(), artifact.kernels.end(),
                     [&](const Kernel &k) { return k.name == step.kernel; });
    if (kernel == artifact.kernels.end()) {
      for (const KernelSource &source : kernelLibrary())
        if (step.kernel == source.name)
          artifact.kernels.push_back(makeKernel(source));
      kernel = artifact.kernels.end() - 1;
    }
    Launch launch;
    launch.kernel = static_cast<uint32_t>(kernel - artifact.kernels.begin());
    for (const std::string &buffer : step.buffers)
      launch.args.push_back(plan->offsets[bufferIndex(buffer)]);
    artifact.launches.push_back(std::move(launch));
  }
  for (const auto &[first, count, flag] : regions)
    artifact.controlRegions.push_back({ControlRegionKind::While, first, count,
                                       bufferIndex(flag),
                                       plan->offsets[bufferIndex(flag)]});
  return artifact;
}

/// for (count = 0; count < limit; ++count) sum += count;
///   0 zero(sum)   1 reset(count, flag, limit)
///   2 accumulate(sum, count)   3 step(count, flag, limit)   region [2, 4)
Artifact countingArtifact() {
  return loopArtifact({"limit", "count", "flag", "sum"}, {"limit"},
                      {"count", "sum"},
                      {{"zero", {"sum"}},
                       {"reset", {"count", "flag", "limit"}},
                       {"accumulate", {"sum", "count"}},
                       {"step", {"count", "flag", "limit"}}},
                      {{2, 2, "flag"}});
}

/// for (o = 0; o < outer; ++o) for (j = 0; j < inner; ++j) {
///   jsum += j; total += 1; }
///   0 zero(total)  1 zero(jsum)  2 reset(o, oflag, outer)
///   3 reset(j, iflag, inner)  4 accumulate(jsum, j)  5 increment(total)
///   6 step(j, iflag, inner)   7 step(o, oflag, outer)
///   regions [3, 8) on oflag, [4, 7) on iflag
Artifact nestedArtifact() {
  return loopArtifact(
      {"outer", "inner", "o", "j", "oflag", "iflag", "total", "jsum"},
      {"outer", "inner"}, {"o", "total", "jsum"},
      {{"zero", {"total"}},
       {"zero", {"jsum"}},
       {"reset", {"o", "oflag", "outer"}},
       {"reset", {"j", "iflag", "inner"}},
       {"accumulate", {"jsum", "j"}},
       {"increment", {"total"}},
       {"step", {"j", "iflag", "inner"}},
       {"step", {"o", "oflag", "outer"}}},
      {{3, 5, "oflag"}, {4, 3, "iflag"}});
}

std::unique_ptr<Session> emuSession(const Artifact &artifact) {
  Expected<std::unique_ptr<Device>> device = createDevice("emu");
  EXPECT_TRUE(device) << errorOf(device);
  if (!device)
    return nullptr;
  Expected<std::unique_ptr<Session>> session =
      Session::create(std::make_shared<const Artifact>(artifact),
                      std::shared_ptr<Device>(device.take()));
  EXPECT_TRUE(session) << errorOf(session);
  return session ? session.take() : nullptr;
}

Error bindScalar(Session &session, const std::string &name, int32_t value) {
  return session.bindInput(name, DType::I32, {}, &value, sizeof(value));
}

int32_t readScalar(Session &session, const std::string &name) {
  int32_t value = -12345;
  EXPECT_EQ(errorOf(session.readOutput(name, &value, sizeof(value))),
            "<success>")
      << name;
  return value;
}

//===----------------------------------------------------------------------===//
// Running loops
//===----------------------------------------------------------------------===//

TEST(ControlRegionsTest, CountingLoopRunsOnEmu) {
  std::unique_ptr<Session> session = emuSession(countingArtifact());
  ASSERT_TRUE(session);
  // One session, several runs: each starts from the flag reset sets.
  for (int32_t limit : {0, 1, 5, 2, 0, 7}) {
    ASSERT_EQ(errorOf(bindScalar(*session, "limit", limit)), "<success>");
    ASSERT_EQ(errorOf(session->run()), "<success>") << limit;
    // The flag is tested before the first iteration: limit 0 runs none.
    EXPECT_EQ(readScalar(*session, "count"), limit);
    int32_t sum = 0;
    for (int32_t i = 0; i < limit; ++i)
      sum += i;
    EXPECT_EQ(readScalar(*session, "sum"), sum) << "limit " << limit;
    if (limit == 2) {
      EXPECT_THAT(session->lastRunLaunches(), ElementsAre(0, 1, 2, 3, 2, 3));
    }
    if (limit == 0) {
      EXPECT_THAT(session->lastRunLaunches(), ElementsAre(0, 1));
    }
  }
}

TEST(ControlRegionsTest, NestedLoopsRunOnEmu) {
  std::unique_ptr<Session> session = emuSession(nestedArtifact());
  ASSERT_TRUE(session);
  for (auto [outer, inner] : {std::pair{3, 4}, {2, 0}, {0, 4}, {1, 1}}) {
    ASSERT_EQ(errorOf(bindScalar(*session, "outer", outer)), "<success>");
    ASSERT_EQ(errorOf(bindScalar(*session, "inner", inner)), "<success>");
    ASSERT_EQ(errorOf(session->run()), "<success>");
    // Hand-worked: 3 x 4 = 12 inner iterations, j summing 0+1+2+3 in each
    // of the 3 outer ones.
    int32_t total = 0, jsum = 0;
    for (int32_t o = 0; o < outer; ++o)
      for (int32_t j = 0; j < inner; ++j) {
        jsum += j;
        ++total;
      }
    if (outer == 3 && inner == 4) {
      EXPECT_EQ(total, 12);
      EXPECT_EQ(jsum, 18);
    }
    EXPECT_EQ(readScalar(*session, "o"), outer);
    EXPECT_EQ(readScalar(*session, "total"), total) << outer << " x " << inner;
    EXPECT_EQ(readScalar(*session, "jsum"), jsum) << outer << " x " << inner;
    if (outer == 1 && inner == 1) {
      EXPECT_THAT(session->lastRunLaunches(),
                  ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
    }
  }
}

TEST(ControlRegionsTest, EntryPointRunsItsLoops) {
  // The counting loop as a training artifact's one entry point, run by
  // runEntryPoint through the same walk as Session::run.
  Artifact artifact = countingArtifact();
  artifact.entryPoints.push_back({"count_up", 0, 4, {0}, {0, 1}, {}});
  std::unique_ptr<Session> session = emuSession(artifact);
  ASSERT_TRUE(session);
  for (int32_t limit : {4, 0}) {
    ASSERT_EQ(errorOf(bindScalar(*session, "limit", limit)), "<success>");
    ASSERT_EQ(errorOf(session->runEntryPoint("count_up")), "<success>");
    EXPECT_EQ(readScalar(*session, "count"), limit);
    EXPECT_EQ(readScalar(*session, "sum"), limit == 4 ? 0 + 1 + 2 + 3 : 0);
  }
}

/// The counting loop's kernels in C++, on a FakeDevice.
std::shared_ptr<FakeDevice> countingFakeDevice() {
  auto device = std::make_shared<FakeDevice>();
  auto at = [](const PackedParams &params, size_t i) {
    return reinterpret_cast<int32_t *>(paramAt<uint64_t>(params, i));
  };
  device->kernels["zero"] = [at](const PackedParams &p, const LaunchConfig &) {
    *at(p, 0) = 0;
  };
  device->kernels["reset"] = [at](const PackedParams &p, const LaunchConfig &) {
    *at(p, 0) = 0;
    *reinterpret_cast<uint8_t *>(at(p, 1)) = 0 < *at(p, 2);
  };
  device->kernels["accumulate"] = [at](const PackedParams &p,
                                       const LaunchConfig &) {
    *at(p, 0) += *at(p, 1);
  };
  device->kernels["step"] = [at](const PackedParams &p, const LaunchConfig &) {
    *at(p, 0) += 1;
    *reinterpret_cast<uint8_t *>(at(p, 1)) = *at(p, 0) < *at(p, 2);
  };
  return device;
}

TEST(ControlRegionsTest, GraphReplayIsNotUsedForLoops) {
  auto device = countingFakeDevice();
  device->graphs = true;
  SessionOptions options;
  options.useGraph = true;
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(countingArtifact()), device, options);
  ASSERT_TRUE(session) << errorOf(session);
  for (int32_t limit : {3, 6}) {
    ASSERT_FALSE(bindScalar(**session, "limit", limit));
    ASSERT_EQ(errorOf((*session)->run()), "<success>");
    EXPECT_EQ(readScalar(**session, "sum"), limit * (limit - 1) / 2);
  }
  EXPECT_TRUE(device->graphsCaptured.empty());
  EXPECT_EQ(device->graphLaunches, 0);
  // The device has graphs but no conditional nodes: the host reads flags.
  EXPECT_EQ((*session)->deviceLoops(),
            "host-read flags (the fake device has no conditional graph "
            "nodes)");
}

TEST(ControlRegionsTest, DeviceLoopsSaysWhichPathRuns) {
  auto pathOn = [](std::shared_ptr<Device> device, const Artifact &artifact,
                   bool graph) {
    SessionOptions options;
    options.useGraph = graph;
    Expected<std::unique_ptr<Session>> session = Session::create(
        std::make_shared<const Artifact>(artifact), device, options);
    EXPECT_TRUE(session) << errorOf(session);
    return session ? (*session)->deviceLoops() : std::string("no session");
  };
  Expected<std::unique_ptr<Device>> emu = createDevice("emu");
  ASSERT_TRUE(emu) << errorOf(emu);
  std::shared_ptr<Device> device = emu.take();
  EXPECT_EQ(errorOf(device->checkConditionalGraphs()),
            "the emu device has no conditional graph nodes");
  EXPECT_EQ(pathOn(device, countingArtifact(), true),
            "host-read flags (the emu device has no graphs)");
  EXPECT_EQ(pathOn(device, countingArtifact(), false),
            "host-read flags (graph replay is off)");
  Artifact plain = countingArtifact();
  plain.controlRegions.clear();
  EXPECT_EQ(pathOn(device, plain, true), "");
  // The emu device's answers to the capture calls.
  EXPECT_EQ(errorOf(device->beginWhileCapture(StreamHandle{1}, 0)),
            "the emu device has no conditional graph nodes");
  EXPECT_EQ(errorOf(device->endWhileCapture(StreamHandle{1})),
            "the emu device has no conditional graph nodes");
}

//===----------------------------------------------------------------------===//
// Conditional WHILE nodes (a host model of them)
//===----------------------------------------------------------------------===//

/// A device whose memory is host memory and whose kernels are the test
/// library's in C++, with graphs and conditional WHILE nodes as CUDA has
/// them: launches on a capturing stream become nodes; beginWhileCapture
/// adds a node that repeats its body while the flag byte is nonzero and
/// returns a stream capturing into that body. It records the calls, so the
/// session's capture sequence can be checked without a GPU.
class WhileNodeDevice final : public Device {
public:
  struct Node {
    /// A launch (kernel name and parameters), or a WHILE node (`flag`
    /// nonzero) with its body.
    std::string kernel;
    PackedParams params;
    DevicePtr flag = 0;
    std::list<Node> body;
  };

  WhileNodeDevice() {
    deviceInfo.kind = "while-nodes";
    deviceInfo.name = "Fake GPU with conditional nodes";
    deviceInfo.computeCapability = 90;
  }
  ~WhileNodeDevice() override {
    for (void *memory : allocations)
      std::free(memory);
  }

  /// Fail the call of this name: "begin", "end", or a kernel's name (its
  /// launch while capturing).
  std::string failCall;
  int graphLaunches = 0;
  int whileNodes = 0;
  int openBodies = 0;
  /// Each captured graph's nodes.
  std::vector<std::list<Node>> graphs;
  /// The kernels that ran, in order.
  std::vector<std::string> ran;

  const DeviceInfo &info() const override { return deviceInfo; }
  Expected<DevicePtr> allocate(uint64_t size) override {
    void *memory = std::aligned_alloc(256, (size + 255) / 256 * 256);
    std::memset(memory, 0xAB, (size + 255) / 256 * 256);
    allocations.push_back(memory);
    return reinterpret_cast<DevicePtr>(memory);
  }
  Error deallocate(DevicePtr) override { return Error::success(); }
  Error copyToDevice(DevicePtr dst, const void *src, uint64_t size) override {
    std::memcpy(reinterpret_cast<void *>(dst), src, size);
    return Error::success();
  }
  Error copyToHost(void *dst, DevicePtr src, uint64_t size) override {
    std::memcpy(dst, reinterpret_cast<const void *>(src), size);
    return Error::success();
  }
  Expected<ModuleHandle> loadModule(const ModuleImage &) override {
    return ModuleHandle{1};
  }
  Error unloadModule(ModuleHandle) override { return Error::success(); }
  Expected<FunctionHandle> getFunction(ModuleHandle,
                                       std::string_view name) override {
    functionNames.emplace_back(name);
    return FunctionHandle{functionNames.size()};
  }
  Expected<StreamHandle> createStream() override {
    return StreamHandle{++streamCount};
  }
  Error destroyStream(StreamHandle) override { return Error::success(); }
  Error synchronize(StreamHandle) override { return Error::success(); }
  Error launch(FunctionHandle function, const LaunchConfig &,
               const PackedParams &params, StreamHandle stream) override {
    const std::string &name = functionNames.at(function.id - 1);
    auto target = capturing.find(stream.id);
    if (target == capturing.end()) {
      run(name, params);
      return Error::success();
    }
    if (failCall == name)
      return Error::failure("launch of '" + name + "' failed");
    target->second->push_back(Node{name, params, 0, {}});
    return Error::success();
  }
  Expected<EventHandle> createEvent() override { return EventHandle{1}; }
  Error destroyEvent(EventHandle) override { return Error::success(); }
  Error recordEvent(EventHandle, StreamHandle) override {
    return Error::success();
  }
  Expected<float> elapsedMilliseconds(EventHandle, EventHandle) override {
    return 0.5f;
  }

  bool supportsGraphs() const override { return true; }
  Error beginCapture(StreamHandle stream) override {
    graphs.emplace_back();
    capturing[stream.id] = &graphs.back();
    return Error::success();
  }
  Expected<GraphHandle> endCapture(StreamHandle stream) override {
    capturing.erase(stream.id);
    if (openBodies != 0)
      return Error::failure("endCapture with a body still capturing");
    return GraphHandle{graphs.size()};
  }
  Error launchGraph(GraphHandle graph, StreamHandle) override {
    ++graphLaunches;
    replay(graphs.at(graph.id - 1));
    return Error::success();
  }
  Error destroyGraph(GraphHandle) override { return Error::success(); }

  Error checkConditionalGraphs() override { return Error::success(); }
  Expected<StreamHandle> beginWhileCapture(StreamHandle stream,
                                           DevicePtr flag) override {
    if (failCall == "begin")
      return Error::failure("no WHILE node today");
    auto parent = capturing.find(stream.id);
    if (parent == capturing.end())
      return Error::failure("beginWhileCapture: the stream is not capturing");
    parent->second->push_back(Node{"", {}, flag, {}});
    ++whileNodes;
    ++openBodies;
    StreamHandle body{++streamCount};
    capturing[body.id] = &parent->second->back().body;
    return body;
  }
  Error endWhileCapture(StreamHandle body) override {
    if (!capturing.erase(body.id))
      return Error::failure("endWhileCapture: not a body");
    --openBodies;
    if (failCall == "end")
      return Error::failure("the body did not end");
    return Error::success();
  }

private:
  static int32_t *at(const PackedParams &params, size_t i) {
    return reinterpret_cast<int32_t *>(paramAt<uint64_t>(params, i));
  }
  void run(const std::string &name, const PackedParams &p) {
    ran.push_back(name);
    auto flag = [&] { return reinterpret_cast<uint8_t *>(at(p, 1)); };
    if (name == "zero")
      *at(p, 0) = 0;
    else if (name == "increment")
      *at(p, 0) += 1;
    else if (name == "accumulate")
      *at(p, 0) += *at(p, 1);
    else if (name == "reset") {
      *at(p, 0) = 0;
      *flag() = 0 < *at(p, 2);
    } else if (name == "step") {
      *at(p, 0) += 1;
      *flag() = *at(p, 0) < *at(p, 2);
    }
  }
  /// A WHILE node tests its flag before every iteration (what the setter
  /// before the node and the one ending its body give the handle).
  void replay(const std::list<Node> &nodes) {
    for (const Node &node : nodes) {
      if (!node.flag) {
        run(node.kernel, node.params);
        continue;
      }
      // A body that never clears its flag would spin for ever.
      for (int i = 0; *reinterpret_cast<const uint8_t *>(node.flag); ++i) {
        if (i == 100000) {
          ADD_FAILURE() << "a WHILE node ran 100000 iterations";
          return;
        }
        replay(node.body);
      }
    }
  }

  DeviceInfo deviceInfo;
  std::vector<void *> allocations;
  std::vector<std::string> functionNames;
  uint64_t streamCount = 0;
  /// Where each capturing stream's launches go.
  std::map<uint64_t, std::list<Node> *> capturing;
};

/// The kernels of a node list, a WHILE node as "while(<body>)".
std::string describeNodes(const std::list<WhileNodeDevice::Node> &nodes) {
  std::string text;
  for (const WhileNodeDevice::Node &node : nodes) {
    if (!text.empty())
      text += " ";
    text += node.flag ? "while(" + describeNodes(node.body) + ")" : node.kernel;
  }
  return text;
}

std::unique_ptr<Session> graphSession(const Artifact &artifact,
                                      std::shared_ptr<Device> device) {
  SessionOptions options;
  options.useGraph = true;
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(artifact), std::move(device), options);
  EXPECT_TRUE(session) << errorOf(session);
  return session ? session.take() : nullptr;
}

TEST(ControlRegionsTest, ConditionalNodesKeepTheCountingLoopInOneGraph) {
  auto device = std::make_shared<WhileNodeDevice>();
  std::unique_ptr<Session> session = graphSession(countingArtifact(), device);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->deviceLoops(), "conditional graph nodes");
  // Captured once, replayed at every trip count: the graph holds the loop,
  // not its iterations.
  for (int32_t limit : {0, 1, 5, 2, 0, 7}) {
    ASSERT_FALSE(bindScalar(*session, "limit", limit));
    ASSERT_EQ(errorOf(session->run()), "<success>") << limit;
    EXPECT_EQ(readScalar(*session, "count"), limit);
    EXPECT_EQ(readScalar(*session, "sum"), limit * (limit - 1) / 2)
        << "limit " << limit;
    // The host does not see the iterations.
    EXPECT_TRUE(session->lastRunLaunches().empty());
  }
  ASSERT_EQ(device->graphs.size(), 1u);
  EXPECT_EQ(describeNodes(device->graphs[0]),
            "zero reset while(accumulate step)");
  EXPECT_EQ(device->graphLaunches, 6);
  EXPECT_EQ(device->openBodies, 0);
}

TEST(ControlRegionsTest, ConditionalNodesNest) {
  auto device = std::make_shared<WhileNodeDevice>();
  std::unique_ptr<Session> session = graphSession(nestedArtifact(), device);
  ASSERT_TRUE(session);
  for (auto [outer, inner] : {std::pair{3, 4}, {2, 0}, {0, 4}, {1, 1}}) {
    ASSERT_FALSE(bindScalar(*session, "outer", outer));
    ASSERT_FALSE(bindScalar(*session, "inner", inner));
    ASSERT_EQ(errorOf(session->run()), "<success>");
    int32_t total = 0, jsum = 0;
    for (int32_t o = 0; o < outer; ++o)
      for (int32_t j = 0; j < inner; ++j) {
        jsum += j;
        ++total;
      }
    EXPECT_EQ(readScalar(*session, "o"), outer);
    EXPECT_EQ(readScalar(*session, "total"), total) << outer << " x " << inner;
    EXPECT_EQ(readScalar(*session, "jsum"), jsum) << outer << " x " << inner;
  }
  // The inner region's node sits in the outer one's body, and the outer
  // body's last launch follows it.
  ASSERT_EQ(device->graphs.size(), 1u);
  EXPECT_EQ(describeNodes(device->graphs[0]),
            "zero zero reset while(reset while(accumulate increment step) "
            "step)");
  EXPECT_EQ(device->whileNodes, 2);
  EXPECT_EQ(device->openBodies, 0);
  // The benchmark replays the same graph; only whole runs are timed.
  ASSERT_FALSE(bindScalar(*session, "outer", 2));
  ASSERT_FALSE(bindScalar(*session, "inner", 3));
  Expected<BenchmarkResult> result = session->benchmark(1, 2);
  ASSERT_TRUE(result) << errorOf(result);
  EXPECT_EQ(result->runMilliseconds.size(), 2u);
  EXPECT_TRUE(result->kernels.empty());
  EXPECT_EQ(readScalar(*session, "total"), 6);
  EXPECT_EQ(device->graphs.size(), 1u);
}

TEST(ControlRegionsTest, ConditionalNodeErrorsNameTheRegion) {
  // The node cannot be added: the run fails naming the region, and
  // nothing ran.
  {
    auto device = std::make_shared<WhileNodeDevice>();
    device->failCall = "begin";
    std::unique_ptr<Session> session = graphSession(nestedArtifact(), device);
    ASSERT_TRUE(session);
    ASSERT_FALSE(bindScalar(*session, "outer", 1));
    ASSERT_FALSE(bindScalar(*session, "inner", 1));
    EXPECT_EQ(errorOf(session->run()),
              "capturing the launch list: control region 0 (launches [3, "
              "8)): adding its WHILE node: no WHILE node today");
    EXPECT_TRUE(device->ran.empty());
  }
  // A launch in the inner body fails: both bodies still end (their
  // streams released) before the error comes back.
  {
    auto device = std::make_shared<WhileNodeDevice>();
    device->failCall = "increment";
    std::unique_ptr<Session> session = graphSession(nestedArtifact(), device);
    ASSERT_TRUE(session);
    ASSERT_FALSE(bindScalar(*session, "outer", 1));
    ASSERT_FALSE(bindScalar(*session, "inner", 1));
    EXPECT_EQ(errorOf(session->run()),
              "capturing the launch list: launch 5: launch of 'increment' "
              "failed");
    EXPECT_EQ(device->openBodies, 0);
  }
  // The body cannot end.
  {
    auto device = std::make_shared<WhileNodeDevice>();
    device->failCall = "end";
    std::unique_ptr<Session> session = graphSession(countingArtifact(), device);
    ASSERT_TRUE(session);
    ASSERT_FALSE(bindScalar(*session, "limit", 2));
    EXPECT_EQ(errorOf(session->run()),
              "capturing the launch list: control region 0 (launches [2, "
              "4)): ending its WHILE node's body: the body did not end");
  }
}

//===----------------------------------------------------------------------===//
// The kiln_set_while cubins, and loops on a GPU
//===----------------------------------------------------------------------===//

TEST(ControlRegionsTest, SetWhileCubinsAreEmbeddedWhenTheBuildHadNvcc) {
  // KILN_SET_WHILE_ARCHS: what CMake built ("80,90,100,120"), empty when
  // it found no nvcc or was told not to.
  std::string built;
  std::set<uint32_t> sms;
  for (const SetWhileCubin &cubin : setWhileCubins()) {
    built += fmt::format("{}{}", built.empty() ? "" : ",", cubin.sm);
    sms.insert(cubin.sm);
  }
  EXPECT_EQ(built, KILN_SET_WHILE_ARCHS);
  if (built.empty()) {
    EXPECT_EQ(findSetWhileCubin(90), nullptr);
    GTEST_SKIP() << "built without the kiln_set_while cubins (no nvcc, or "
                    "KILN_BUILD_SET_WHILE_CUBINS=OFF)";
  }
  EXPECT_TRUE(sms.count(80) && sms.count(90)) << built;
  for (const SetWhileCubin &cubin : setWhileCubins()) {
    std::string bytes(reinterpret_cast<const char *>(cubin.data), cubin.size);
    EXPECT_EQ(bytes.substr(0, 4), "\x7f"
                                  "ELF")
        << "sm_" << cubin.sm;
    EXPECT_NE(bytes.find(kSetWhileKernelName), std::string::npos)
        << "sm_" << cubin.sm;
  }
  // A cubin runs on later minors of its own major only.
  auto pick = [](uint32_t cc) {
    const SetWhileCubin *cubin = findSetWhileCubin(cc);
    return cubin ? cubin->sm : 0u;
  };
  EXPECT_EQ(pick(80), 80u);
  EXPECT_EQ(pick(86), 80u);
  EXPECT_EQ(pick(89), 80u);
  EXPECT_EQ(pick(90), 90u);
  EXPECT_EQ(pick(75), 0u);
  if (sms.count(100)) {
    EXPECT_EQ(pick(103), 100u);
  }
  EXPECT_EQ(pick(110), 0u);
}

TEST(ControlRegionsTest, LoopsRunOnCudaWithAndWithoutGraphs) {
  Expected<std::unique_ptr<Device>> created = createDevice("cuda");
  if (!created)
    GTEST_SKIP() << "no GPU: " << errorOf(created);
  std::shared_ptr<Device> device = created.take();
  Error conditional = device->checkConditionalGraphs();
  // The same runs with graph replay off (host-read flags) and on
  // (conditional WHILE nodes, where the driver has them): the same counts,
  // worked out by hand.
  for (bool graph : {false, true}) {
    SessionOptions options;
    options.useGraph = graph;
    SCOPED_TRACE(graph ? "graph replay" : "direct launches");
    Expected<std::unique_ptr<Session>> counting = Session::create(
        std::make_shared<const Artifact>(countingArtifact()), device, options);
    ASSERT_TRUE(counting) << errorOf(counting);
    EXPECT_EQ((*counting)->deviceLoops(),
              !graph        ? "host-read flags (graph replay is off)"
              : conditional ? "host-read flags (" + conditional.message() + ")"
                            : "conditional graph nodes");
    for (int32_t limit : {0, 1, 5, 2, 0, 7, 300}) {
      ASSERT_FALSE(bindScalar(**counting, "limit", limit));
      ASSERT_EQ(errorOf((*counting)->run()), "<success>") << limit;
      EXPECT_EQ(readScalar(**counting, "count"), limit);
      EXPECT_EQ(readScalar(**counting, "sum"), limit * (limit - 1) / 2)
          << "limit " << limit;
    }
    Expected<std::unique_ptr<Session>> nested = Session::create(
        std::make_shared<const Artifact>(nestedArtifact()), device, options);
    ASSERT_TRUE(nested) << errorOf(nested);
    for (auto [outer, inner] :
         {std::pair{3, 4}, {2, 0}, {0, 4}, {1, 1}, {20, 30}}) {
      ASSERT_FALSE(bindScalar(**nested, "outer", outer));
      ASSERT_FALSE(bindScalar(**nested, "inner", inner));
      ASSERT_EQ(errorOf((*nested)->run()), "<success>");
      EXPECT_EQ(readScalar(**nested, "o"), outer);
      EXPECT_EQ(readScalar(**nested, "total"), outer * inner)
          << outer << " x " << inner;
      EXPECT_EQ(readScalar(**nested, "jsum"), outer * (inner * (inner - 1) / 2))
          << outer << " x " << inner;
    }
  }
  if (conditional)
    std::printf("note: no conditional graph nodes on this GPU (%s): graph "
                "replay read the flags on the host\n",
                conditional.message().c_str());
}

TEST(ControlRegionsTest, BenchmarkTimesWholeRunsOnly) {
  auto device = countingFakeDevice();
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(countingArtifact()), device);
  ASSERT_TRUE(session) << errorOf(session);
  ASSERT_FALSE(bindScalar(**session, "limit", 3));
  Expected<BenchmarkResult> result = (*session)->benchmark(1, 2);
  ASSERT_TRUE(result) << errorOf(result);
  EXPECT_EQ(result->runMilliseconds.size(), 2u);
  EXPECT_TRUE(result->kernels.empty());
  EXPECT_TRUE(result->launches.empty());
  EXPECT_EQ(result->launchTimingsUnavailable,
            "the artifact has device-side loops (control regions): launches "
            "per run depend on the data, so only whole runs are timed");
  EXPECT_EQ(readScalar(**session, "sum"), 3);
  // Without regions the kernels are timed and the note is empty.
  Artifact plain = countingArtifact();
  plain.controlRegions.clear();
  Expected<std::unique_ptr<Session>> other = Session::create(
      std::make_shared<const Artifact>(plain), countingFakeDevice());
  ASSERT_TRUE(other) << errorOf(other);
  ASSERT_FALSE(bindScalar(**other, "limit", 3));
  Expected<BenchmarkResult> timed = (*other)->benchmark(0, 1);
  ASSERT_TRUE(timed) << errorOf(timed);
  EXPECT_EQ(timed->kernels.size(), 4u);
  EXPECT_EQ(timed->launchTimingsUnavailable, "");
}

//===----------------------------------------------------------------------===//
// The section
//===----------------------------------------------------------------------===//

TEST(ControlRegionsTest, SectionRoundTripsWithItsHeaderFlag) {
  Artifact artifact = nestedArtifact();
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_EQ(loadU32(image->data() + kFlagsOffset), kHeaderFlagControlRegions);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_EQ(read->formatMinor, 12u);
  ASSERT_EQ(read->controlRegions.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ControlRegion &want = artifact.controlRegions[i];
    const ControlRegion &got = read->controlRegions[i];
    EXPECT_EQ(got.kind, ControlRegionKind::While);
    EXPECT_EQ(got.firstLaunch, want.firstLaunch);
    EXPECT_EQ(got.launchCount, want.launchCount);
    EXPECT_EQ(got.flagBuffer, want.flagBuffer);
    EXPECT_EQ(got.flagOffset, want.flagOffset);
  }
  EXPECT_EQ(read->controlRegions[1].firstLaunch, 4u);
  EXPECT_EQ(read->controlRegions[1].launchCount, 3u);
  EXPECT_EQ(read->controlRegions[1].flagBuffer, 5u);
  // Without regions: neither the section nor the flag.
  Artifact plain = nestedArtifact();
  plain.controlRegions.clear();
  Expected<std::vector<uint8_t>> plainImage = serializeArtifact(plain);
  ASSERT_TRUE(plainImage) << errorOf(plainImage);
  EXPECT_EQ(loadU32(plainImage->data() + kFlagsOffset), 0u);
  for (const RawSection &section : splitImage(*plainImage))
    EXPECT_NE(section.kind, uint32_t(SectionKind::ControlRegions));
}

TEST(ControlRegionsTest, VerifyRejectsInconsistentRecords) {
  auto errorFor = [](const std::function<void(Artifact &)> &edit) {
    Artifact artifact = nestedArtifact();
    edit(artifact);
    return errorOf(verifyArtifact(artifact));
  };
  EXPECT_EQ(errorFor([](Artifact &) {}), "<success>");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.controlRegions[1].kind = static_cast<ControlRegionKind>(7);
            }),
            "section 'control-regions': record 1 (launches [4, 7)): unknown "
            "kind 7");
  EXPECT_EQ(errorFor([](Artifact &a) { a.controlRegions[1].launchCount = 0; }),
            "section 'control-regions': record 1 (launches [4, 4)): the "
            "region has no launches");
  EXPECT_EQ(errorFor([](Artifact &a) { a.controlRegions[0].launchCount = 6; }),
            "section 'control-regions': record 0 (launches [3, 9)): the range "
            "lies outside the launch list (8 launches)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.controlRegions[1].firstLaunch = 0xFFFFFFFFu;
            }),
            "section 'control-regions': record 1 (launches [4294967295, "
            "4294967298)): the range lies outside the launch list (8 "
            "launches)");
  // Partial overlap: [3, 8) and [6, 9) with a ninth launch.
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.launches.push_back(a.launches.back());
              for (ArenaBuffer &buffer : a.memoryPlan.buffers)
                buffer.lastUse = 8;
              a.controlRegions[1].firstLaunch = 6;
            }),
            "section 'control-regions': record 1 (launches [6, 9)): it partly "
            "overlaps record 0 (launches [3, 8)): regions must nest or be "
            "disjoint");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.controlRegions[1].firstLaunch = 3;
              a.controlRegions[1].launchCount = 5;
            }),
            "section 'control-regions': record 1 (launches [3, 8)): record 0 "
            "has the same range");
  // Unsorted: an inner region before its outer one, or a later start first.
  EXPECT_EQ(errorFor([](Artifact &a) {
              std::swap(a.controlRegions[0], a.controlRegions[1]);
            }),
            "section 'control-regions': record 1 (launches [3, 8)): it comes "
            "after record 0 (launches [4, 7)) but must come before it "
            "(regions are sorted by first launch, an outer region before the "
            "regions inside it)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.controlRegions[1].firstLaunch = 3;
              a.controlRegions[1].launchCount = 2;
              a.controlRegions[0].firstLaunch = 4;
              a.controlRegions[0].launchCount = 1;
            }),
            "section 'control-regions': record 1 (launches [3, 5)): it comes "
            "after record 0 (launches [4, 5)) but must come before it "
            "(regions are sorted by first launch, an outer region before the "
            "regions inside it)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.controlRegions[0].flagBuffer = 8; }),
            "section 'control-regions': record 0 (launches [3, 8)): flag "
            "buffer 8 is out of range (the memory plan has 8 buffers)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.controlRegions[0].flagOffset =
                  a.memoryPlan.buffers[4].offset + 4;
            }),
            fmt::format("section 'control-regions': record 0 (launches [3, "
                        "8)): the flag byte at arena offset {} lies outside "
                        "its buffer 4 'oflag' at [{}, {})",
                        nestedArtifact().memoryPlan.buffers[4].offset + 4,
                        nestedArtifact().memoryPlan.buffers[4].offset,
                        nestedArtifact().memoryPlan.buffers[4].offset + 4));
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.controlRegions[0].flagOffset =
                  a.memoryPlan.buffers[4].offset - 1;
            }),
            fmt::format("section 'control-regions': record 0 (launches [3, "
                        "8)): the flag byte at arena offset {} lies outside "
                        "its buffer 4 'oflag' at [{}, {})",
                        nestedArtifact().memoryPlan.buffers[4].offset - 1,
                        nestedArtifact().memoryPlan.buffers[4].offset,
                        nestedArtifact().memoryPlan.buffers[4].offset + 4));
  // The flag's buffer must hold it from the region's first launch to its
  // last: another buffer could reuse the bytes otherwise.
  EXPECT_EQ(errorFor([](Artifact &a) { a.memoryPlan.buffers[5].lastUse = 5; }),
            "section 'control-regions': record 1 (launches [4, 7)): flag "
            "buffer 5 'iflag' is live for launches [0, 5], not across the "
            "whole region [4, 6]");
  EXPECT_EQ(errorFor([](Artifact &a) { a.memoryPlan.buffers[4].firstUse = 4; }),
            "section 'control-regions': record 0 (launches [3, 8)): flag "
            "buffer 4 'oflag' is live for launches [4, 7], not across the "
            "whole region [3, 7]");
}

TEST(ControlRegionsTest, VerifyKeepsRegionsInsideOneEntryPoint) {
  Artifact artifact = countingArtifact();
  artifact.entryPoints = {{"setup", 0, 3, {0}, {}, {}},
                          {"finish", 3, 1, {0}, {0, 1}, {}}};
  EXPECT_EQ(errorOf(verifyArtifact(artifact)),
            "section 'control-regions': record 0 (launches [2, 4)): the "
            "region does not lie inside one entry point");
  artifact.entryPoints = {{"setup", 0, 2, {0}, {}, {}},
                          {"loop", 2, 2, {0}, {0, 1}, {}}};
  EXPECT_EQ(errorOf(verifyArtifact(artifact)), "<success>");
  // A collective step after a launch in the loop would repeat per
  // iteration; BucketScheduler queues it once.
  artifact.collectives.push_back(
      {CollectiveKind::AllReduceMean, 0, 0, 1, /*afterLaunch=*/3});
  EXPECT_EQ(errorOf(verifyArtifact(artifact)),
            "section 'control-regions': record 0 (launches [2, 4)): "
            "collective step 0 follows launch 3, inside the region: a "
            "collective step cannot repeat in a device-side loop");
}

/// The counting artifact's image with its sections split out.
std::vector<RawSection> countingSections() {
  Expected<std::vector<uint8_t>> image = serializeArtifact(countingArtifact());
  EXPECT_TRUE(image) << errorOf(image);
  return image ? splitImage(*image) : std::vector<RawSection>();
}

std::vector<uint8_t> withFlags(std::vector<uint8_t> image, uint32_t flags) {
  storeU32(image.data() + kFlagsOffset, flags);
  refreshHeaderChecksum(image);
  return image;
}

TEST(ControlRegionsTest, ReaderChecksTheSectionAndTheFlag) {
  // A record's fields as read (the kind at byte 4, the first launch at 8):
  // the verifier's rules apply to the file.
  for (size_t field : {4, 8}) {
    std::vector<RawSection> sections = countingSections();
    storeU32(sectionOf(sections, SectionKind::ControlRegions).bytes.data() +
                 field,
             9);
    EXPECT_EQ(errorOf(parseBytes(
                  withFlags(joinImage(sections), kHeaderFlagControlRegions))),
              field == 4
                  ? "test.kiln: section 'control-regions': record 0 (launches "
                    "[2, 4)): unknown kind 9"
                  : "test.kiln: section 'control-regions': record 0 (launches "
                    "[9, 11)): the range lies outside the launch list (4 "
                    "launches)");
  }
  // No records.
  {
    std::vector<RawSection> sections = countingSections();
    sectionOf(sections, SectionKind::ControlRegions).bytes = {0, 0, 0, 0};
    EXPECT_EQ(errorOf(parseBytes(
                  withFlags(joinImage(sections), kHeaderFlagControlRegions))),
              "test.kiln: section 'control-regions': no records (the section "
              "is written only when there are regions)");
  }
  // A truncated record, and bytes after the last.
  {
    std::vector<RawSection> sections = countingSections();
    RawSection &regions = sectionOf(sections, SectionKind::ControlRegions);
    regions.bytes.resize(regions.bytes.size() - 1);
    EXPECT_EQ(errorOf(parseBytes(
                  withFlags(joinImage(sections), kHeaderFlagControlRegions))),
              "test.kiln: section 'control-regions': 1 control regions cannot "
              "fit in the 23 bytes left");
    regions.bytes.resize(regions.bytes.size() + 5, 0);
    EXPECT_EQ(errorOf(parseBytes(
                  withFlags(joinImage(sections), kHeaderFlagControlRegions))),
              "test.kiln: section 'control-regions': 4 unexpected bytes after "
              "the last entry");
  }
  // A damaged byte: the section's checksum names it.
  {
    Expected<std::vector<uint8_t>> image =
        serializeArtifact(countingArtifact());
    ASSERT_TRUE(image);
    uint8_t *entry = tableEntryOf(*image, SectionKind::ControlRegions);
    (*image)[loadU64(entry + kEntryOffsetOffset) + 9] ^= 0x01;
    EXPECT_THAT(errorOf(parseBytes(*image)),
                ::testing::StartsWith("test.kiln: section 'control-regions': "
                                      "checksum mismatch (stored 0x"));
  }
  // The section without the flag, and the flag without the section.
  std::vector<uint8_t> unflagged = withFlags(joinImage(countingSections()), 0);
  EXPECT_EQ(errorOf(parseBytes(unflagged)),
            "test.kiln: section 'control-regions' is present but the header's "
            "control-regions flag is not set");
  std::vector<RawSection> sections = countingSections();
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const RawSection &s) {
                                  return s.kind ==
                                         uint32_t(SectionKind::ControlRegions);
                                }),
                 sections.end());
  EXPECT_EQ(errorOf(parseBytes(
                withFlags(joinImage(sections), kHeaderFlagControlRegions))),
            "test.kiln: header: the control-regions flag is set but there is "
            "no 'control-regions' section");
}

TEST(ControlRegionsTest, AnOlderReaderRefusesTheFile) {
  // A 1.11 reader would skip kind 22 and run each loop body once: the
  // header flag (bit 6) is what stops it. A file that claims 1.11 cannot
  // carry the flag, so this reader refuses it exactly as a 1.11 one does.
  EXPECT_EQ(sectionKindSinceMinor(uint32_t(SectionKind::ControlRegions)), 12u);
  std::vector<uint8_t> old = withFlags(joinImage(countingSections(), 1, 11),
                                       kHeaderFlagControlRegions);
  EXPECT_EQ(errorOf(parseBytes(old)), "test.kiln: header: unknown flags 0x40");
  // What the section table of a 1.11 writer would hold, without the
  // section or the flag, still reads (and has no regions).
  std::vector<RawSection> sections = countingSections();
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const RawSection &s) {
                                  return sectionKindSinceMinor(s.kind) > 11;
                                }),
                 sections.end());
  Expected<Artifact> read = parseBytes(joinImage(sections, 1, 11));
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_TRUE(read->controlRegions.empty());
}

//===----------------------------------------------------------------------===//
// kiln-run
//===----------------------------------------------------------------------===//

/// kiln-run's exit status and its stdout and stderr together.
std::pair<int, std::string> runKilnRun(const std::string &arguments) {
  std::string command = std::string(KILN_RUN_PATH) + " " + arguments + " 2>&1";
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    output.append(buffer, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(ControlRegionsTest, KilnRunPrintsTheRegionsAndTimesWholeRuns) {
  TempDir dir;
  Artifact artifact = nestedArtifact();
  ASSERT_EQ(errorOf(writeArtifact(artifact, dir.file("loops.kiln"))),
            "<success>");
  int32_t outer = 3, inner = 4;
  ASSERT_FALSE(writeNpy(dir.file("outer.npy"), DType::I32, {}, &outer, 4));
  ASSERT_FALSE(writeNpy(dir.file("inner.npy"), DType::I32, {}, &inner, 4));
  std::string run = fmt::format("{} --device emu -i outer={} -i inner={}",
                                dir.file("loops.kiln"), dir.file("outer.npy"),
                                dir.file("inner.npy"));
  auto [status, output] = runKilnRun(run + " --bench 1 --warmup 0");
  ASSERT_EQ(status, 0) << output;
  uint64_t oflag = artifact.memoryPlan.buffers[4].offset;
  uint64_t iflag = artifact.memoryPlan.buffers[5].offset;
  EXPECT_THAT(output, HasSubstr(fmt::format(
                          "control region 0: while launches 3-7 on flag "
                          "buffer 4 'oflag' @{}\n"
                          "control region 1: while launches 4-6 on flag "
                          "buffer 5 'iflag' @{}\n",
                          oflag, iflag)));
  EXPECT_THAT(output, HasSubstr("  kernels: not timed: the artifact has "
                                "device-side loops (control regions)"));
  EXPECT_THAT(output, HasSubstr("output 'total': i32 []  min 12  max 12"));
  // How the loops ran: said only with --graph.
  EXPECT_THAT(output, Not(HasSubstr("device loops:")));
  auto [graphed, graphOutput] = runKilnRun(run + " --graph");
  ASSERT_EQ(graphed, 0) << graphOutput;
  EXPECT_THAT(graphOutput,
              HasSubstr("@" + std::to_string(iflag) +
                        "\ndevice loops: host-read flags (the emu device has "
                        "no graphs)\n"));
  // The emu profile counts every iteration: 3 outer x 4 inner runs of
  // `increment`'s 5 instructions (the launches column counts the list's).
  auto [profiled, table] = runKilnRun(run + " --profile");
  ASSERT_EQ(profiled, 0) << table;
  EXPECT_THAT(
      table, ::testing::ContainsRegex("increment +1 +1x1x1 +1x1x1 +- +- +60 "));
  EXPECT_THAT(table, HasSubstr("output 'jsum': i32 []  min 18  max 18"));
}

} // namespace

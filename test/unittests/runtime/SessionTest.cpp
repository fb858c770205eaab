//===- SessionTest.cpp - Sessions on a host-memory fake device ------------===//
//
// The FakeDevice runs C++ stand-ins for the sample artifact's kernels, so the
// session's whole path (allocation, weight upload, parameter packing, input
// upload, launch order, graph replay, output read-back) runs without a GPU.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Runtime.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

float *pointerParam(const PackedParams &params, size_t i) {
  return reinterpret_cast<float *>(paramAt<uint64_t>(params, i));
}

/// A FakeDevice with add_bias and scale implemented on the host.
std::shared_ptr<FakeDevice> makeDevice(uint32_t computeCapability = 90) {
  auto device = std::make_shared<FakeDevice>(computeCapability);
  device->kernels["add_bias"] = [](const PackedParams &p,
                                   const LaunchConfig &) {
    const float *x = pointerParam(p, 0);
    const float *bias = pointerParam(p, 1);
    float *tmp = pointerParam(p, 2);
    uint32_t n = paramAt<uint32_t>(p, 3);
    for (uint32_t i = 0; i < n; ++i)
      tmp[i] = x[i] + bias[i % 3];
  };
  device->kernels["scale"] = [](const PackedParams &p, const LaunchConfig &c) {
    const float *tmp = pointerParam(p, 0);
    float *y = pointerParam(p, 1);
    uint64_t k = paramAt<uint64_t>(p, 2);
    for (uint32_t i = 0; i < c.block.x; ++i)
      y[i] = tmp[i] * static_cast<float>(k);
  };
  return device;
}

std::shared_ptr<const Artifact> sampleArtifact() {
  return std::make_shared<const Artifact>(makeAddScaleArtifact());
}

std::unique_ptr<Session> makeSession(std::shared_ptr<FakeDevice> device,
                                     SessionOptions options = {}) {
  Expected<std::unique_ptr<Session>> session =
      Session::create(sampleArtifact(), std::move(device), options);
  EXPECT_TRUE(session) << errorOf(session);
  return session ? session.take() : nullptr;
}

TEST(SessionTest, RunsTheLaunchList) {
  auto device = makeDevice();
  std::unique_ptr<Session> session = makeSession(device);
  ASSERT_TRUE(session);
  float x[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(errorOf(session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x))),
            "<success>");
  ASSERT_EQ(errorOf(session->run()), "<success>");
  Expected<HostTensor> y = session->readOutput("y");
  ASSERT_TRUE(y) << errorOf(y);
  EXPECT_EQ(y->shape, (Shape{2, 3}));
  float values[6];
  std::memcpy(values, y->data.data(), sizeof(values));
  EXPECT_THAT(values, ::testing::ElementsAre(33, 66, 99, 42, 75, 108));
  EXPECT_EQ(device->launched, (std::vector<std::string>{"add_bias", "scale"}));
}

TEST(SessionTest, InputsAreUploadedOnEveryRun) {
  // The planner lets y reuse x's bytes, so x must be re-uploaded each run.
  Artifact artifact = makeAddScaleArtifact();
  ASSERT_EQ(artifact.inputs[0].arenaOffset, artifact.outputs[0].arenaOffset);
  auto device = makeDevice();
  std::unique_ptr<Session> session = makeSession(device);
  ASSERT_TRUE(session);
  float x[6] = {0, 0, 0, 0, 0, 0};
  ASSERT_FALSE(session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x)));
  float first[6], second[6];
  ASSERT_FALSE(session->run());
  ASSERT_FALSE(session->readOutput("y", first, sizeof(first)));
  ASSERT_FALSE(session->run());
  ASSERT_FALSE(session->readOutput("y", second, sizeof(second)));
  EXPECT_EQ(0, std::memcmp(first, second, sizeof(first)));
  EXPECT_EQ(second[0], 30.0f);
}

TEST(SessionTest, DeviceResidentInputsAndOutputsAreCopiedOnTheDevice) {
  // A tensor already on the device (DLPack from another library) goes in
  // and out through copyOnDevice, never through the host.
  auto device = makeDevice();
  std::unique_ptr<Session> session = makeSession(device);
  ASSERT_TRUE(session);
  float x[6] = {1, 2, 3, 4, 5, 6};
  Expected<DevicePtr> in = device->allocate(sizeof(x));
  Expected<DevicePtr> out = device->allocate(sizeof(x));
  ASSERT_TRUE(in && out);
  ASSERT_FALSE(device->copyToDevice(*in, x, sizeof(x)));
  EXPECT_THAT(errorOf(session->bindDeviceInput("x", DType::F16, {2, 3}, *in,
                                               sizeof(x) / 2)),
              HasSubstr("input 'x': dtype f16 does not match"));
  ASSERT_EQ(errorOf(session->bindDeviceInput("x", DType::F32, {2, 3}, *in,
                                             sizeof(x))),
            "<success>");
  EXPECT_THAT(errorOf(session->readOutputToDevice("y", *out, sizeof(x))),
              HasSubstr("has not run yet"));
  ASSERT_EQ(errorOf(session->run()), "<success>");
  ASSERT_EQ(errorOf(session->readOutputToDevice("y", *out, sizeof(x))),
            "<success>");
  EXPECT_THAT(errorOf(session->readOutputToDevice("y", *out, 4)),
              HasSubstr("output 'y': a 4-byte buffer given"));
  EXPECT_EQ(device->onDeviceCopies, 2);
  float y[6];
  ASSERT_FALSE(device->copyToHost(y, *out, sizeof(y)));
  EXPECT_THAT(y, ::testing::ElementsAre(33, 66, 99, 42, 75, 108));
  ASSERT_FALSE(device->deallocate(*in));
  ASSERT_FALSE(device->deallocate(*out));
}

TEST(SessionTest, GraphReplay) {
  auto device = makeDevice();
  device->graphs = true;
  SessionOptions options;
  options.useGraph = true;
  std::unique_ptr<Session> session = makeSession(device, options);
  ASSERT_TRUE(session);
  float x[6] = {1, 1, 1, 1, 1, 1};
  ASSERT_FALSE(session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x)));
  ASSERT_FALSE(session->run());
  ASSERT_FALSE(session->run());
  EXPECT_EQ(device->graphLaunches, 2);
  float y[6];
  ASSERT_FALSE(session->readOutput("y", y, sizeof(y)));
  EXPECT_EQ(y[5], 93.0f);
}

TEST(SessionTest, BindChecksNameDTypeAndShape) {
  std::unique_ptr<Session> session = makeSession(makeDevice());
  ASSERT_TRUE(session);
  float x[6] = {};
  EXPECT_EQ(errorOf(session->bindInput("x", DType::F32, {3, 2}, x, sizeof(x))),
            "input 'x': shape [3, 2] does not match the signature's [2, 3]");
  EXPECT_EQ(errorOf(session->bindInput("x", DType::F16, {2, 3}, x, 12)),
            "input 'x': dtype f16 does not match the signature's f32");
  EXPECT_EQ(errorOf(session->bindInput("x", DType::F32, {2, 3}, x, 20)),
            "input 'x': 20 bytes given, f32 [2, 3] has 24");
  EXPECT_EQ(errorOf(session->bindInput("z", DType::F32, {2, 3}, x, 24)),
            "no input named 'z' (the inputs are 'x')");
  EXPECT_EQ(errorOf(session->run()), "input 'x' is not bound");
  EXPECT_EQ(errorOf(session->readOutput("y")),
            "output 'y': the session has not run yet");
  float y[6];
  EXPECT_EQ(errorOf(session->readOutput("y", y, 8)),
            "output 'y': a 8-byte buffer given, f32 [2, 3] has 24");
  EXPECT_EQ(errorOf(session->readOutput("q")), "no output named 'q'");
}

TEST(SessionTest, PacksParametersFromTheLaunchList) {
  auto device = makeDevice();
  std::vector<PackedParams> seen;
  device->kernels["scale"] = [&](const PackedParams &p, const LaunchConfig &c) {
    seen.push_back(p);
    EXPECT_EQ(c.block.x, 6u);
  };
  std::unique_ptr<Session> session = makeSession(device);
  ASSERT_TRUE(session);
  float x[6] = {};
  ASSERT_FALSE(session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x)));
  ASSERT_FALSE(session->run());
  ASSERT_EQ(seen.size(), 1u);
  const Artifact &artifact = session->artifact();
  uint64_t tmp = paramAt<uint64_t>(seen[0], 0);
  uint64_t y = paramAt<uint64_t>(seen[0], 1);
  EXPECT_EQ(y - tmp, artifact.memoryPlan.buffers[2].offset -
                         artifact.memoryPlan.buffers[1].offset);
  EXPECT_EQ(paramAt<uint64_t>(seen[0], 2), 3u);
  EXPECT_EQ(seen[0].size(), 24u);
}

TEST(SessionTest, RejectsADeviceBelowTheTarget) {
  Expected<std::unique_ptr<Session>> session =
      Session::create(sampleArtifact(), makeDevice(75));
  EXPECT_EQ(errorOf(session),
            "the artifact targets sm_80 but the device 'Fake GPU' is sm_75");
  Artifact archSpecific = makeAddScaleArtifact();
  archSpecific.target = "sm_90a";
  EXPECT_THAT(
      errorOf(Session::create(std::make_shared<const Artifact>(archSpecific),
                              makeDevice(100))),
      HasSubstr("targets sm_90a but the device 'Fake GPU' is sm_100"));
}

TEST(SessionTest, DeviceErrorsAreReportedAndNothingLeaks) {
  auto device = makeDevice();
  device->failCall = "loadModule";
  EXPECT_EQ(errorOf(Session::create(sampleArtifact(), device)),
            "fakeModuleLoad (kernel 'add_bias'): bad PTX");
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->loadedModules, 0);

  device->failCall = "allocate";
  EXPECT_EQ(errorOf(Session::create(sampleArtifact(), device)),
            "allocating the arena (512 bytes): fakeAlloc: out of memory");

  device->failCall = "launch";
  std::unique_ptr<Session> session = makeSession(device);
  ASSERT_TRUE(session);
  float x[6] = {};
  ASSERT_FALSE(session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x)));
  EXPECT_EQ(errorOf(session->run()),
            "launch 0: fakeLaunch (kernel 'add_bias'): failed");
  session.reset();
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->loadedModules, 0);
}

TEST(SessionTest, RejectsAnInvalidInMemoryArtifact) {
  Artifact artifact = makeAddScaleArtifact();
  artifact.launches[0].kernel = 3;
  EXPECT_THAT(errorOf(Session::create(
                  std::make_shared<const Artifact>(artifact), makeDevice())),
              HasSubstr("launch 0: kernel index 3 is out of range"));
}

TEST(SessionTest, BenchmarkTimesRunsAndKernels) {
  auto device = makeDevice();
  std::unique_ptr<Session> session = makeSession(device);
  ASSERT_TRUE(session);
  float x[6] = {};
  ASSERT_FALSE(session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x)));
  Expected<BenchmarkResult> result = session->benchmark(2, 5);
  ASSERT_TRUE(result) << errorOf(result);
  EXPECT_EQ(result->runMilliseconds.size(), 5u);
  ASSERT_EQ(result->kernels.size(), 2u);
  EXPECT_EQ(result->kernels[0].kernel, "add_bias");
  EXPECT_EQ(result->kernels[0].launchesPerRun, 1u);
  EXPECT_EQ(result->kernels[1].milliseconds.size(), 5u);
  // 2 warm-up + 5 timed + 5 per-kernel runs of 2 launches each.
  EXPECT_EQ(device->launched.size(), 24u);
  EXPECT_EQ(errorOf(session->benchmark(0, 0)),
            "benchmark: at least one iteration is needed");
  // Per launch of the last kernel-by-kernel run, for traces.
  EXPECT_EQ(result->launches.size(), 2u);
  // The fake device has no energy counter, and says so.
  EXPECT_FALSE(result->energyJoules.has_value());
  EXPECT_EQ(result->energyUnavailable, "the fake device has no energy counter");
}

/// One warm-up and four timed runs on a fake device whose energy counter
/// reads `start` mJ, then `step` more at each read.
Expected<BenchmarkResult>
benchmarkWithEnergy(const std::shared_ptr<FakeDevice> &device, uint64_t start,
                    uint64_t step) {
  device->energy = start;
  device->energyStep = step;
  std::unique_ptr<Session> session = makeSession(device);
  if (!session)
    return Error::failure("no session");
  float x[6] = {};
  if (Error err = session->bindInput("x", DType::F32, {2, 3}, x, sizeof(x)))
    return err;
  return session->benchmark(1, 4);
}

TEST(SessionTest, BenchmarkReadsEnergyAroundTheTimedRuns) {
  auto device = makeDevice();
  Expected<BenchmarkResult> result =
      benchmarkWithEnergy(device, 1000, 5000); // 5 J between the two reads
  ASSERT_TRUE(result) << errorOf(result);
  ASSERT_TRUE(result->energyJoules.has_value()) << result->energyUnavailable;
  EXPECT_DOUBLE_EQ(*result->energyJoules, 5.0);
  EXPECT_GE(result->energySeconds, 0.0);
  EXPECT_EQ(*device->energy, 11000u); // read exactly twice
}

// A counter that did not move over the timed runs (NVML refreshes it every
// few tens of ms) says nothing about the energy: no figure, and why.
TEST(SessionTest, BenchmarkEnergyCounterThatDidNotAdvanceIsNoFigure) {
  Expected<BenchmarkResult> result =
      benchmarkWithEnergy(makeDevice(), 1000, 0); // the same reading twice
  ASSERT_TRUE(result) << errorOf(result);
  EXPECT_FALSE(result->energyJoules.has_value());
  EXPECT_NE(result->energyUnavailable.find(
                "the energy counter did not advance over the"),
            std::string::npos)
      << result->energyUnavailable;
}

} // namespace

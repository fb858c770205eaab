//===- NcclTest.cpp - The NCCL engine: library, unique id, GPU-only runs --===//
//
// Without a GPU: the real libnccl.so.2 loads and every symbol the engine
// calls resolves, its version agrees with what ncclGetVersion says when
// called directly (not through the engine), ncclGetUniqueId works (it
// needs no GPU: the id is a bootstrap socket address and a random magic),
// and the engine refuses a device that is not cuda with one line. With a
// GPU (else skipped, with the reason): a world of one reduces host and
// device buffers through NCCL. Two GPUs:
// test/Pipelines/Training/nccl-2gpu.test.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Collective.h"
#include "kiln/runtime/Device.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cstring>
#include <dlfcn.h>
#include <set>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

/// libnccl.so.2 opened directly, independently of the engine; null when
/// this machine has none.
void *openNcclDirectly() {
  return ::dlopen(ncclLibraryPath().c_str(), RTLD_NOW | RTLD_LOCAL);
}

TEST(NcclTest, LoadsTheLibraryAndResolvesEverySymbol) {
  void *direct = openNcclDirectly();
  if (!direct)
    GTEST_SKIP() << "no " << ncclLibraryPath()
                 << " on this machine (set KILN_NCCL_LIBRARY)";
  Expected<int> version = loadNcclLibrary();
  ASSERT_TRUE(version.hasValue()) << errorOf(version);
  using GetVersion = int (*)(int *);
  auto getVersion =
      reinterpret_cast<GetVersion>(::dlsym(direct, "ncclGetVersion"));
  ASSERT_NE(getVersion, nullptr);
  int expected = 0;
  ASSERT_EQ(getVersion(&expected), 0);
  EXPECT_EQ(*version, expected);
  EXPECT_GE(*version, 21000) << "ncclAvg needs NCCL 2.10";
}

TEST(NcclTest, GetsAUniqueIdWithoutAGpu) {
  void *direct = openNcclDirectly();
  if (!direct)
    GTEST_SKIP() << "no " << ncclLibraryPath() << " on this machine";
  Expected<std::vector<uint8_t>> first = ncclUniqueIdBytes();
  if (!first)
    GTEST_SKIP() << "ncclGetUniqueId fails on this machine: " << errorOf(first);
  Expected<std::vector<uint8_t>> second = ncclUniqueIdBytes();
  ASSERT_TRUE(second.hasValue()) << errorOf(second);
  ASSERT_EQ(first->size(), 128u);
  // Not all zeros, and each call a new id (a fresh random magic).
  EXPECT_NE(std::set<uint8_t>(first->begin(), first->end()).size(), 1u);
  EXPECT_NE(*first, *second);
}

TEST(NcclTest, RefusesAnEmuDeviceInOneLine) {
  Expected<std::unique_ptr<Device>> emu = createDevice("emu");
  ASSERT_TRUE(emu.hasValue()) << errorOf(emu);
  std::shared_ptr<Device> device = emu.take();
  EXPECT_EQ(
      errorOf(createNcclCommunicator({300}, createLocalCommunicator(), device)),
      "the NCCL engine reduces GPU memory: it needs a cuda device, not "
      "emu (use --collective-engine mpi)");
  EXPECT_EQ(errorOf(createNcclCommunicator({300}, nullptr, device)),
            "the NCCL engine needs the MPI communicator to share its unique "
            "id");
  EXPECT_EQ(
      errorOf(createNcclCommunicator({-1}, createLocalCommunicator(), device)),
      "the collective timeout must not be negative");
}

TEST(NcclTest, LocalCommunicatorIsTheIdentity) {
  std::shared_ptr<Communicator> local = createLocalCommunicator();
  EXPECT_EQ(local->size(), 1);
  std::vector<float> values = {1.5f, -2.0f, 3.25f}, out(3);
  ASSERT_FALSE(local->allReduceMean(values.data(), 3, "x"));
  EXPECT_EQ(values, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  ASSERT_FALSE(local->reduceScatterMean(values.data(), out.data(), 3, "x"));
  EXPECT_EQ(out, values);
  ASSERT_FALSE(local->allGather(values.data(), 12, out.data(), "x"));
  EXPECT_EQ(out, values);
}

/// A cuda device and the engine on it at world size 1, or why not.
struct GpuWorld {
  std::shared_ptr<Device> device;
  std::shared_ptr<Communicator> nccl;
  std::string whyNot;
};

GpuWorld gpuWorldOfOne() {
  GpuWorld world;
  if (!openNcclDirectly()) {
    world.whyNot = "no libnccl.so.2";
    return world;
  }
  Expected<std::unique_ptr<Device>> cuda = createCudaDevice(0);
  if (!cuda) {
    world.whyNot = "no GPU: " + errorOf(cuda);
    return world;
  }
  world.device = cuda.take();
  Expected<std::shared_ptr<Communicator>> nccl =
      createNcclCommunicator({60}, createLocalCommunicator(), world.device);
  if (!nccl) {
    world.whyNot = "the engine failed on this GPU: " + errorOf(nccl);
    return world;
  }
  world.nccl = nccl.take();
  return world;
}

TEST(NcclGpuTest, WorldOfOneReducesHostBuffers) {
  GpuWorld world = gpuWorldOfOne();
  if (!world.nccl) {
    if (world.device) // a GPU is there, so the engine must work
      FAIL() << world.whyNot;
    GTEST_SKIP() << world.whyNot;
  }
  EXPECT_EQ(world.nccl->engine(), "nccl");
  // The mean over one rank is the value itself, exactly.
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 1e-30f};
  std::vector<float> want = values;
  ASSERT_FALSE(world.nccl->allReduceMean(values.data(), 4, "host values"));
  EXPECT_EQ(values, want);
  std::vector<float> out(4, 0.0f);
  ASSERT_FALSE(
      world.nccl->reduceScatterMean(values.data(), out.data(), 4, "rs"));
  EXPECT_EQ(out, want);
  std::vector<uint16_t> halves = {1, 2, 3}, gathered(3, 0);
  ASSERT_FALSE(world.nccl->allGather(halves.data(), 6, gathered.data(), "ag"));
  EXPECT_EQ(gathered, halves);
}

TEST(NcclGpuTest, WorldOfOneReducesADeviceBufferAfterAnEvent) {
  GpuWorld world = gpuWorldOfOne();
  if (!world.nccl) {
    if (world.device)
      FAIL() << world.whyNot;
    GTEST_SKIP() << world.whyNot;
  }
  DeviceCollectives *onDevice = world.nccl->deviceCollectives();
  ASSERT_NE(onDevice, nullptr);
  std::vector<float> values = {4.0f, -0.5f, 7.0f, 8.0f};
  Expected<DevicePtr> buffer = world.device->allocate(16);
  ASSERT_TRUE(buffer.hasValue()) << errorOf(buffer);
  ASSERT_FALSE(world.device->copyToDevice(*buffer, values.data(), 16));
  Expected<StreamHandle> compute = world.device->createStream();
  ASSERT_TRUE(compute.hasValue()) << errorOf(compute);
  ASSERT_FALSE(
      onDevice->enqueueAllReduceMean(*buffer + 4, 2, *compute, "two of four"));
  ASSERT_FALSE(onDevice->finish(*compute));
  ASSERT_FALSE(world.device->synchronize(*compute));
  std::vector<float> got(4, 0.0f);
  ASSERT_FALSE(world.device->copyToHost(got.data(), *buffer, 16));
  EXPECT_EQ(got, values);
  ASSERT_FALSE(world.device->deallocate(*buffer));
}

} // namespace

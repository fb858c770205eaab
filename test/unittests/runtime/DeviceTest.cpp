//===- DeviceTest.cpp - Device lookup, the cuda device without a GPU ------===//

#include "kiln/runtime/Device.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cstdlib>
#include <dlfcn.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

bool cudaDriverPresent() {
  void *library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return false;
  ::dlclose(library);
  return true;
}

TEST(DeviceTest, CudaWithoutDriverFailsCleanly) {
  if (cudaDriverPresent())
    GTEST_SKIP() << "a CUDA driver is installed; this test is for machines "
                    "without one";
  EXPECT_EQ(errorOf(createDevice("cuda")),
            "no CUDA driver (libcuda.so.1 not found)");
  EXPECT_EQ(errorOf(createDevice("cuda:1")),
            "no CUDA driver (libcuda.so.1 not found)");
  // Asking twice gives the same answer (the driver is probed once).
  EXPECT_EQ(errorOf(createCudaDevice(0)),
            "no CUDA driver (libcuda.so.1 not found)");
}

TEST(DeviceTest, CudaWithDriverFindsADeviceOrSaysSo) {
  if (!cudaDriverPresent())
    GTEST_SKIP() << "no CUDA driver on this machine";
  Expected<std::unique_ptr<Device>> device = createDevice("cuda");
  if (!device) {
    EXPECT_EQ(errorOf(device), "no CUDA device");
    return;
  }
  EXPECT_EQ((*device)->info().kind, "cuda");
  EXPECT_GE((*device)->info().computeCapability, 50u);
}

TEST(DeviceTest, EmuIsAlwaysAvailable) {
  Expected<std::unique_ptr<Device>> device = createDevice("emu");
  ASSERT_TRUE(device.hasValue()) << errorOf(device);
  EXPECT_EQ((*device)->info().kind, "emu");
  EXPECT_EQ((*device)->info().computeCapability, 0u);
}

TEST(DeviceTest, EmuCopiesOnTheDeviceWithinAllocations) {
  Expected<std::unique_ptr<Device>> device = createDevice("emu");
  ASSERT_TRUE(device.hasValue()) << errorOf(device);
  Expected<DevicePtr> a = (*device)->allocate(16);
  Expected<DevicePtr> b = (*device)->allocate(16);
  ASSERT_TRUE(a && b);
  const char text[17] = "0123456789abcdef";
  ASSERT_FALSE((*device)->copyToDevice(*a, text, 16));
  ASSERT_FALSE((*device)->copyOnDevice(*b, *a + 4, 8));
  char back[9] = {};
  ASSERT_FALSE((*device)->copyToHost(back, *b, 8));
  EXPECT_STREQ(back, "456789ab");
  // A range past the end of an allocation is refused, naming the copy.
  EXPECT_THAT(errorOf((*device)->copyOnDevice(*b + 8, *a, 16)),
              ::testing::HasSubstr("copy on the device (to)"));
  ASSERT_FALSE((*device)->deallocate(*a));
  ASSERT_FALSE((*device)->deallocate(*b));
}

TEST(DeviceTest, UnknownDeviceNames) {
  for (const char *spec : {"gpu", "cuda:", "cuda:x", "cuda:123456", "", "EMU"})
    EXPECT_EQ(errorOf(createDevice(spec)),
              "unknown device '" + std::string(spec) +
                  "' (expected cuda, cuda:N or emu)")
        << spec;
}

TEST(DeviceTest, PackedParamsUseNaturalAlignment) {
  PackedParams params;
  params.addU32(7);
  params.addU64(0x1122334455667788ull);
  params.addU32(9);
  params.addU32(10);
  params.addU64(3);
  ASSERT_EQ(params.count(), 5u);
  EXPECT_EQ(params.offset(0), 0u);
  EXPECT_EQ(params.offset(1), 8u); // padded up from 4
  EXPECT_EQ(params.offset(2), 16u);
  EXPECT_EQ(params.offset(3), 20u);
  EXPECT_EQ(params.offset(4), 24u);
  EXPECT_EQ(params.size(), 32u);
  EXPECT_EQ(paramAt<uint64_t>(params, 1), 0x1122334455667788ull);
  EXPECT_EQ(paramAt<uint32_t>(params, 3), 10u);
}

/// Launches `spin` (a warp that branches to itself forever) on a fresh emu
/// device; returns the launch's error.
std::string launchEndlessLoop() {
  static const char *ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry spin()
{
$Lspin:
	bra.uni 	$Lspin;
}
)";
  Expected<std::unique_ptr<Device>> device = createDevice("emu");
  if (!device)
    return "no emu device: " + errorOf(device);
  Expected<ModuleHandle> module =
      (*device)->loadModule(ModuleImage{"spin", ptx});
  if (!module)
    return "load: " + errorOf(module);
  Expected<FunctionHandle> function = (*device)->getFunction(*module, "spin");
  Expected<StreamHandle> stream = (*device)->createStream();
  if (!function || !stream)
    return "no function or stream";
  LaunchConfig config;
  config.grid = {1, 1, 1};
  config.block = {32, 1, 1};
  PackedParams params;
  Error launched = (*device)->launch(*function, config, params, *stream);
  if (launched)
    return errorOf(std::move(launched));
  return errorOf((*device)->synchronize(*stream));
}

TEST(DeviceTest, EmuStepLimitNamesTheKernelAndTheFlag) {
  // KILN_EMU_MAX_STEPS (read when the device is made) ends an endless loop
  // with an error naming the kernel, the limit and how to raise it.
  ::setenv("KILN_EMU_MAX_STEPS", "100000", 1);
  std::string error = launchEndlessLoop();
  ::unsetenv("KILN_EMU_MAX_STEPS");
  EXPECT_THAT(error, ::testing::HasSubstr("kernel 'spin'"));
  // (checked between time slices: a little past the limit)
  EXPECT_THAT(error, ::testing::ContainsRegex(
                         "still running after [0-9]+ warp instructions"));
  EXPECT_THAT(error, ::testing::HasSubstr(
                         "the limit is 100000 (KILN_EMU_MAX_STEPS=N raises "
                         "it, 0 for none)"));
}

TEST(DeviceTest, EmuStopsAnEndlessLoopByDefault) {
  // Without KILN_EMU_MAX_STEPS the limit is 1e9 warp instructions per block
  // (EmuDevice.cpp: 850x the largest block of ResNet-50 at batch 32), so a
  // kernel that never ends fails the run instead of hanging it: ~6 s of CPU.
  ::unsetenv("KILN_EMU_MAX_STEPS");
  EXPECT_THAT(launchEndlessLoop(),
              ::testing::HasSubstr("the limit is 1000000000 "
                                   "(KILN_EMU_MAX_STEPS=N raises it"));
}

TEST(DeviceTest, GraphsAreOptional) {
  // A device that does not override the graph methods says so by name.
  FakeDevice device;
  EXPECT_FALSE(device.Device::supportsGraphs());
  EXPECT_EQ(errorOf(device.Device::beginCapture(StreamHandle{1})),
            "graph capture is not supported by the fake device");
}

} // namespace

//===- DeviceTest.cpp - Device lookup, the cuda device without a GPU ------===//

#include "kiln/runtime/Device.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

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

TEST(DeviceTest, GraphsAreOptional) {
  // A device that does not override the graph methods says so by name.
  FakeDevice device;
  EXPECT_FALSE(device.Device::supportsGraphs());
  EXPECT_EQ(errorOf(device.Device::beginCapture(StreamHandle{1})),
            "graph capture is not supported by the fake device");
}

} // namespace

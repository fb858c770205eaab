//===- EmuTestUtils.h - Running hand-written PTX on the emu device -*- C++ -*-===//
//
// runPtx loads one kernel on the emu device, uploads the buffers, passes
// each as a pointer parameter (in order, then the u32 scalars), launches and
// downloads the buffers again.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_EMUTESTUTILS_H
#define KILN_TEST_UNITTESTS_RUNTIME_EMUTESTUTILS_H

#include "kiln/runtime/Device.h"

#include <cstring>
#include <string>
#include <vector>

namespace kiln::runtime::test {

/// Bytes of a device buffer, built from and read back as typed values.
struct Buffer {
  std::vector<uint8_t> bytes;

  template <typename T> static Buffer of(const std::vector<T> &values) {
    Buffer buffer;
    buffer.bytes.resize(values.size() * sizeof(T));
    std::memcpy(buffer.bytes.data(), values.data(), buffer.bytes.size());
    return buffer;
  }
  template <typename T> static Buffer zeros(size_t count) {
    Buffer buffer;
    buffer.bytes.assign(count * sizeof(T), 0);
    return buffer;
  }
  template <typename T> std::vector<T> as() const {
    std::vector<T> values(bytes.size() / sizeof(T));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
    return values;
  }
};

/// "<success>" or the error message.
inline std::string runPtx(const std::string &ptx, const std::string &kernel,
                          Dim3 grid, Dim3 block,
                          std::vector<Buffer *> buffers,
                          std::vector<uint32_t> scalars = {},
                          uint32_t dynamicSharedBytes = 0) {
  Expected<std::unique_ptr<Device>> created = createDevice("emu");
  if (!created)
    return created.error().message();
  Device &device = **created;
  auto fail = [](const Error &err) { return err.message(); };
  Expected<ModuleHandle> module = device.loadModule({kernel, ptx});
  if (!module)
    return fail(module.error());
  Expected<FunctionHandle> function = device.getFunction(*module, kernel);
  if (!function)
    return fail(function.error());
  PackedParams params;
  std::vector<DevicePtr> pointers;
  for (Buffer *buffer : buffers) {
    Expected<DevicePtr> ptr = device.allocate(buffer->bytes.size());
    if (!ptr)
      return fail(ptr.error());
    if (Error err = device.copyToDevice(*ptr, buffer->bytes.data(),
                                        buffer->bytes.size()))
      return fail(err);
    pointers.push_back(*ptr);
    params.addU64(*ptr);
  }
  for (uint32_t scalar : scalars)
    params.addU32(scalar);
  Expected<StreamHandle> stream = device.createStream();
  if (!stream)
    return fail(stream.error());
  if (Error err = device.launch(*function, {grid, block, dynamicSharedBytes},
                                params, *stream))
    return fail(err);
  for (size_t i = 0; i < buffers.size(); ++i)
    if (Error err = device.copyToHost(buffers[i]->bytes.data(), pointers[i],
                                      buffers[i]->bytes.size()))
      return fail(err);
  return "<success>";
}

/// The PTX module header every test kernel starts with.
inline std::string ptxHeader() {
  return ".version 8.0\n.target sm_90\n.address_size 64\n\n";
}

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_EMUTESTUTILS_H

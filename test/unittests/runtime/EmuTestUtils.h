//===- EmuTestUtils.h - Running hand-written PTX on the emu device -*- C++
//-*-===//
//
// runPtx loads one kernel on the emu device, uploads the buffers, passes
// each as a pointer parameter (in order, then the u32 scalars), launches and
// downloads the buffers again.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_EMUTESTUTILS_H
#define KILN_TEST_UNITTESTS_RUNTIME_EMUTESTUTILS_H

#include "kiln/runtime/Device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

/// With KILN_EMU_DUMP_PTX=<dir>, every test kernel is also written to
/// <dir>/<kernel>-<n>.ptx, so that `ptxas -arch=sm_90` can check that the
/// hand-written PTX is real PTX.
inline void dumpPtx(const std::string &ptx, const std::string &kernel) {
  static std::atomic<unsigned> counter{0};
  const char *dir = std::getenv("KILN_EMU_DUMP_PTX");
  if (!dir || !*dir)
    return;
  std::ofstream(std::string(dir) + "/" + kernel + "-" +
                std::to_string(counter++) + ".ptx")
      << ptx;
}

/// "<success>" or the error message.
inline std::string runPtx(const std::string &ptx, const std::string &kernel,
                          Dim3 grid, Dim3 block, std::vector<Buffer *> buffers,
                          std::vector<uint32_t> scalars = {},
                          uint32_t dynamicSharedBytes = 0) {
  dumpPtx(ptx, kernel);
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

/// A kernel `k(in, out)` for instruction tests: global thread t loads the
/// 32-bit words in[t*nin ..] into %r1..%r<nin>, runs `body`, and stores
/// %r20..%r<20+nout-1> to out[t*nout ..]. Declared: %p<16>, %rs<40> (b16),
/// %r<64> (b32), %f<40>, %rd<40>, %fd<16>; %r0 is the global thread index,
/// %rd1/%rd2 the global in/out pointers. `decls` goes before the prologue.
inline std::string wordKernel(const std::string &body, unsigned nin,
                              unsigned nout, const std::string &decls = "") {
  std::string s = ptxHeader() + R"(.visible .entry k(
	.param .u64 .ptr .align 1 k_param_0,
	.param .u64 .ptr .align 1 k_param_1
)
{
	.reg .pred 	%p<16>;
	.reg .b16 	%rs<40>;
	.reg .b32 	%r<64>;
	.reg .f32 	%f<40>;
	.reg .b64 	%rd<40>;
	.reg .f64 	%fd<16>;
)" + decls + R"(
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [k_param_1];
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r0, %tid.x;
	mov.u32 	%r63, %ctaid.x;
	mov.u32 	%r62, %ntid.x;
	mad.lo.s32 	%r0, %r63, %r62, %r0;
	mul.wide.u32 	%rd3, %r0, )" +
                  std::to_string(4 * nin) + R"(;
	add.s64 	%rd3, %rd1, %rd3;
	mul.wide.u32 	%rd4, %r0, )" +
                  std::to_string(4 * nout) + R"(;
	add.s64 	%rd4, %rd2, %rd4;
)";
  for (unsigned i = 0; i < nin; ++i)
    s += "\tld.global.b32 \t%r" + std::to_string(1 + i) + ", [%rd3+" +
         std::to_string(4 * i) + "];\n";
  s += body;
  for (unsigned k = 0; k < nout; ++k)
    s += "\tst.global.b32 \t[%rd4+" + std::to_string(4 * k) + "], %r" +
         std::to_string(20 + k) + ";\n";
  return s + "\tret;\n}\n";
}

/// Runs wordKernel(body, nin, nout) over in.size() / nin threads in blocks
/// of `blockSize`; returns the out words (empty, with a test failure, on an
/// error).
inline std::vector<uint32_t> runWords(const std::string &body, unsigned nin,
                                      unsigned nout,
                                      const std::vector<uint32_t> &in,
                                      unsigned blockSize = 128,
                                      const std::string &decls = "") {
  unsigned threads = static_cast<unsigned>(in.size() / nin);
  unsigned blocks = (threads + blockSize - 1) / blockSize;
  std::vector<uint32_t> padded = in;
  padded.resize(static_cast<size_t>(blocks) * blockSize * nin, 0);
  Buffer bufIn = Buffer::of(padded);
  Buffer out =
      Buffer::zeros<uint32_t>(static_cast<size_t>(blocks) * blockSize * nout);
  std::string result =
      runPtx(wordKernel(body, nin, nout, decls), "k", {blocks, 1, 1},
             {blockSize, 1, 1}, {&bufIn, &out});
  EXPECT_EQ(result, "<success>");
  if (result != "<success>")
    return {};
  std::vector<uint32_t> words = out.as<uint32_t>();
  words.resize(static_cast<size_t>(threads) * nout);
  return words;
}

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_EMUTESTUTILS_H

//===- SetWhileKernel.h - The WHILE-node setter's cubins --------*- C++ -*-===//
//
// kiln_set_while(handle, flag) sets a CUDA conditional graph handle to
// whether the byte at `flag` is nonzero (SetWhileKernel.cu). It needs the
// device runtime library, so it is not JIT-compiled from PTX like the
// artifact's kernels: the build compiles it with nvcc into one cubin per
// architecture major (runtime/cmake/SetWhileCubins.cmake) and embeds them
// here. A build without nvcc embeds none, and the cuda device then has no
// conditional graph nodes (docs/runtime.md "Device-side loops").
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_SETWHILEKERNEL_H
#define KILN_RUNTIME_LIB_SETWHILEKERNEL_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::runtime {

/// The kernel's entry name in every cubin.
inline constexpr const char *kSetWhileKernelName = "kiln_set_while";

struct SetWhileCubin {
  /// major * 10 + minor of the architecture it was built for (90: sm_90).
  uint32_t sm = 0;
  const uint8_t *data = nullptr;
  size_t size = 0;
};

/// Every cubin this build embedded, by increasing sm; empty when CMake
/// found no nvcc.
std::vector<SetWhileCubin> setWhileCubins();

/// The cubin that runs on a GPU of compute capability `computeCapability`
/// (major * 10 + minor): built for the same major at or below its minor,
/// the highest such. nullptr when there is none.
const SetWhileCubin *findSetWhileCubin(uint32_t computeCapability);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_SETWHILEKERNEL_H

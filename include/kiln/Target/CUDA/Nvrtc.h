//===- Nvrtc.h - CUDA C++ to PTX through a dlopened NVRTC -------*- C++ -*-===//
//
// NVRTC (libnvrtc.so, in the CUDA Toolkit) is opened with dlopen the first
// time it is needed, so the compiler builds and runs without it; only the
// contraction kernels need it, and they report a missing library as an error
// value. KILN_NVRTC_LIBRARY=<path> names the library to open instead of the
// default search (libnvrtc.so.13, .so.12, .so, then /usr/local/cuda/lib64).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_NVRTC_H
#define KILN_TARGET_CUDA_NVRTC_H

#include "kiln/runtime/Error.h"

#include <string>
#include <vector>

namespace kiln::nvrtc {

/// Whether NVRTC can be loaded; the reason when it cannot.
runtime::Error available();

/// "<major>.<minor>" of the loaded NVRTC.
runtime::Expected<std::string> version();

struct CompileResult {
  std::string ptx;
  /// The compiler's log (warnings); empty when it had nothing to say.
  std::string log;
  /// Wall-clock seconds spent in nvrtcCompileProgram.
  double seconds = 0;
};

/// Compiles `source` (named `name` in messages) with `options` (e.g.
/// "--gpu-architecture=compute_90", "-default-device"). A compile error
/// is an error value carrying NVRTC's log.
runtime::Expected<CompileResult>
compileToPtx(const std::string &source, const std::string &name,
             const std::vector<std::string> &options);

} // namespace kiln::nvrtc

#endif // KILN_TARGET_CUDA_NVRTC_H

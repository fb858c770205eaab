//===- CudaDriver.cpp - dlopen libcuda.so.1 and resolve the table ---------===//

#include "CudaDriver.h"

#include "Support.h"

#include <dlfcn.h>

namespace kiln::runtime {

std::string CudaDriver::describe(CUresult result) const {
  const char *name = nullptr;
  const char *text = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    name = "unknown CUDA error";
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    text = "no description";
  return fmt::format("{} ({}): {}", name, static_cast<int>(result), text);
}

Error CudaDriver::check(CUresult result, std::string_view call,
                        std::string_view subject) const {
  if (result == CUDA_SUCCESS)
    return Error::success();
  if (subject.empty())
    return makeError("{}: {}", call, describe(result));
  return makeError("{} ({}): {}", call, subject, describe(result));
}

namespace {
Expected<CudaDriver> resolveDriver() {
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace.
  void *library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return makeError("no CUDA driver (libcuda.so.1 not found)");
  // The library is never closed: the driver lives as long as the process.
  CudaDriver driver;
  std::string missing;
  auto resolve = [&](auto &member, const char *symbol, const char *fallback,
                     bool required) {
    void *address = ::dlsym(library, symbol);
    if (!address && fallback)
      address = ::dlsym(library, fallback);
    if (!address && required && missing.empty())
      missing = symbol;
    member =
        reinterpret_cast<std::remove_reference_t<decltype(member)>>(address);
    return address != nullptr;
  };
  bool graphs = true;
#define KILN_CUDA_RESOLVE_REQUIRED(member, symbol, fallback)                   \
  resolve(driver.member, symbol, fallback, true);
#define KILN_CUDA_RESOLVE_OPTIONAL(member, symbol, fallback)                   \
  graphs &= resolve(driver.member, symbol, fallback, false);
  bool tensorMaps = true;
#define KILN_CUDA_RESOLVE_TENSOR_MAP(member, symbol, fallback)                 \
  tensorMaps &= resolve(driver.member, symbol, fallback, false);
  bool conditional = true;
#define KILN_CUDA_RESOLVE_CONDITIONAL(member, symbol, fallback)                \
  conditional &= resolve(driver.member, symbol, fallback, false);
  KILN_CUDA_DRIVER_ENTRY_POINTS(
      KILN_CUDA_RESOLVE_REQUIRED, KILN_CUDA_RESOLVE_OPTIONAL,
      KILN_CUDA_RESOLVE_TENSOR_MAP, KILN_CUDA_RESOLVE_CONDITIONAL)
#undef KILN_CUDA_RESOLVE_REQUIRED
#undef KILN_CUDA_RESOLVE_OPTIONAL
#undef KILN_CUDA_RESOLVE_TENSOR_MAP
#undef KILN_CUDA_RESOLVE_CONDITIONAL
  driver.hasGraphs = graphs;
  driver.hasTensorMaps = tensorMaps;
  if (!missing.empty())
    return makeError("CUDA driver too old: libcuda.so.1 has no {}", missing);

  CUresult result = driver.cuInit(0);
  if (result == CUDA_ERROR_NO_DEVICE)
    return makeError("no CUDA device");
  if (result == CUDA_ERROR_STUB_LIBRARY)
    return makeError("no CUDA driver (libcuda.so.1 is the CUDA toolkit's stub "
                     "library)");
  if (Error err = driver.check(result, "cuInit", ""))
    return err;
  if (Error err = driver.check(driver.cuDriverGetVersion(&driver.version),
                               "cuDriverGetVersion", ""))
    return err;
  // The entry points appeared in 12.3; NVIDIA supports conditional nodes
  // from 12.4 on, which is what Kiln asks for.
  driver.hasConditionalGraphs =
      graphs && conditional && driver.version >= kConditionalGraphsVersion;
  return driver;
}
} // namespace

Expected<const CudaDriver *> loadCudaDriver() {
  // Resolved once; the outcome (driver or error) is the same for the whole
  // process.
  static const Expected<CudaDriver> driver = resolveDriver();
  if (!driver)
    return driver.error();
  return &*driver;
}

} // namespace kiln::runtime

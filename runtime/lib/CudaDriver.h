//===- CudaDriver.h - The CUDA driver API, loaded at run time ---*- C++ -*-===//
//
// Kiln never links libcuda: the runtime must start (and fail cleanly) on
// machines without a GPU, and one binary must work across driver versions.
// Every driver entry point the runtime calls is listed once, in
// KILN_CUDA_DRIVER_ENTRY_POINTS, and resolved with dlsym from
// libcuda.so.1 into one CudaDriver table.
//
// The types come from cuda.h. Note that cuda.h #defines several names to
// their versioned symbols (cuMemAlloc -> cuMemAlloc_v2, ...); the table's
// members are spelled with the plain names and so take the versioned
// declarations' types, while the symbol strings name the versioned exports
// explicitly.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_CUDADRIVER_H
#define KILN_RUNTIME_LIB_CUDADRIVER_H

#include "kiln/runtime/Error.h"

#include <cuda.h>

#include <string>
#include <string_view>

namespace kiln::runtime {

// X(member, exported symbol, older exported symbol or nullptr). REQUIRED
// entries must all resolve; OPTIONAL ones (graphs), TENSOR_MAP ones (TMA
// descriptors, CUDA 12) and CONDITIONAL ones (conditional graph nodes
// built by stream capture, CUDA 12.3) may be missing.
#define KILN_CUDA_DRIVER_ENTRY_POINTS(REQUIRED, OPTIONAL, TENSOR_MAP,          \
                                      CONDITIONAL)                             \
  REQUIRED(cuGetErrorName, "cuGetErrorName", nullptr)                          \
  REQUIRED(cuGetErrorString, "cuGetErrorString", nullptr)                      \
  REQUIRED(cuInit, "cuInit", nullptr)                                          \
  REQUIRED(cuDriverGetVersion, "cuDriverGetVersion", nullptr)                  \
  REQUIRED(cuDeviceGetCount, "cuDeviceGetCount", nullptr)                      \
  REQUIRED(cuDeviceGet, "cuDeviceGet", nullptr)                                \
  REQUIRED(cuDeviceGetName, "cuDeviceGetName", nullptr)                        \
  REQUIRED(cuDeviceGetAttribute, "cuDeviceGetAttribute", nullptr)              \
  REQUIRED(cuDeviceTotalMem, "cuDeviceTotalMem_v2", nullptr)                   \
  REQUIRED(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", nullptr)                \
  REQUIRED(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", nullptr)      \
  REQUIRED(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", nullptr) \
  REQUIRED(cuCtxSetCurrent, "cuCtxSetCurrent", nullptr)                        \
  REQUIRED(cuCtxSynchronize, "cuCtxSynchronize", nullptr)                      \
  REQUIRED(cuModuleLoadDataEx, "cuModuleLoadDataEx", nullptr)                  \
  REQUIRED(cuModuleUnload, "cuModuleUnload", nullptr)                          \
  REQUIRED(cuModuleGetFunction, "cuModuleGetFunction", nullptr)                \
  REQUIRED(cuFuncSetAttribute, "cuFuncSetAttribute", nullptr)                  \
  REQUIRED(cuMemAlloc, "cuMemAlloc_v2", nullptr)                               \
  REQUIRED(cuMemFree, "cuMemFree_v2", nullptr)                                 \
  REQUIRED(cuMemcpyHtoD, "cuMemcpyHtoD_v2", nullptr)                           \
  REQUIRED(cuMemcpyDtoH, "cuMemcpyDtoH_v2", nullptr)                           \
  REQUIRED(cuMemcpyDtoD, "cuMemcpyDtoD_v2", nullptr)                           \
  REQUIRED(cuStreamCreate, "cuStreamCreate", nullptr)                          \
  REQUIRED(cuStreamDestroy, "cuStreamDestroy_v2", nullptr)                     \
  REQUIRED(cuStreamSynchronize, "cuStreamSynchronize", nullptr)                \
  REQUIRED(cuLaunchKernel, "cuLaunchKernel", nullptr)                          \
  REQUIRED(cuEventCreate, "cuEventCreate", nullptr)                            \
  REQUIRED(cuEventDestroy, "cuEventDestroy_v2", nullptr)                       \
  REQUIRED(cuEventRecord, "cuEventRecord", nullptr)                            \
  REQUIRED(cuEventSynchronize, "cuEventSynchronize", nullptr)                  \
  REQUIRED(cuEventQuery, "cuEventQuery", nullptr)                              \
  REQUIRED(cuStreamWaitEvent, "cuStreamWaitEvent", nullptr)                    \
  REQUIRED(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")  \
  OPTIONAL(cuStreamBeginCapture, "cuStreamBeginCapture_v2", nullptr)           \
  OPTIONAL(cuStreamEndCapture, "cuStreamEndCapture", nullptr)                  \
  OPTIONAL(cuGraphInstantiate, "cuGraphInstantiateWithFlags", nullptr)         \
  OPTIONAL(cuGraphLaunch, "cuGraphLaunch", nullptr)                            \
  OPTIONAL(cuGraphExecDestroy, "cuGraphExecDestroy", nullptr)                  \
  OPTIONAL(cuGraphDestroy, "cuGraphDestroy", nullptr)                          \
  TENSOR_MAP(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", nullptr)        \
  CONDITIONAL(cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v3", nullptr)    \
  CONDITIONAL(cuGraphConditionalHandleCreate,                                  \
              "cuGraphConditionalHandleCreate", nullptr)                       \
  CONDITIONAL(cuGraphAddNode, "cuGraphAddNode_v2", nullptr)                    \
  CONDITIONAL(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph",      \
              nullptr)                                                         \
  CONDITIONAL(cuStreamUpdateCaptureDependencies,                               \
              "cuStreamUpdateCaptureDependencies_v2", nullptr)

/// The first driver version with conditional WHILE nodes Kiln uses
/// (CudaDriver::version of CUDA 12.4).
inline constexpr int kConditionalGraphsVersion = 12040;

/// The driver entry points, resolved from libcuda.so.1.
struct CudaDriver {
#define KILN_CUDA_DECLARE(member, symbol, fallback)                            \
  decltype(&::member) member = nullptr;
  KILN_CUDA_DRIVER_ENTRY_POINTS(KILN_CUDA_DECLARE, KILN_CUDA_DECLARE,
                                KILN_CUDA_DECLARE, KILN_CUDA_DECLARE)
#undef KILN_CUDA_DECLARE

  /// True when every graph entry point resolved.
  bool hasGraphs = false;
  /// True when cuTensorMapEncodeTiled resolved (TMA kernels can run).
  bool hasTensorMaps = false;
  /// True when the graph and the CONDITIONAL entry points resolved and the
  /// driver is CUDA 12.4 or later (conditional WHILE nodes whose bodies are
  /// captured, nested ones included). A device also needs a kiln_set_while
  /// cubin for its architecture (SetWhileKernel.h).
  bool hasConditionalGraphs = false;
  /// cuDriverGetVersion: 1000 * major + 10 * minor (12040: CUDA 12.4).
  int version = 0;

  /// "CUDA_ERROR_OUT_OF_MEMORY: out of memory".
  std::string describe(CUresult result) const;
  /// "<call> (<subject>): <describe(result)>"; success when result is
  /// CUDA_SUCCESS.
  Error check(CUresult result, std::string_view call,
              std::string_view subject) const;
};

/// Loads libcuda.so.1 and calls cuInit once per process. Fails with "no
/// CUDA driver (libcuda.so.1 not found)" or "no CUDA device".
Expected<const CudaDriver *> loadCudaDriver();

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_CUDADRIVER_H

//===- Nvml.h - NVML's energy counter, loaded at run time -------*- C++ -*-===//
//
// Like the CUDA driver (CudaDriver.h), NVML is never linked: the runtime
// dlopens libnvidia-ml.so.1 the first time a benchmark asks for energy, and
// a machine without it only loses the energy figures. The few entry points
// are declared here (the toolkit ships no nvml.h on every machine); their
// signatures are NVML's stable C ABI.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_NVML_H
#define KILN_RUNTIME_LIB_NVML_H

#include "kiln/runtime/Error.h"

#include <cstdint>
#include <string>

namespace kiln::runtime {

/// NVML's handles and status codes, as nvml.h declares them.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque *;
constexpr NvmlReturn kNvmlSuccess = 0;

struct NvmlLibrary {
  NvmlReturn (*init)() = nullptr;                        // nvmlInit_v2
  const char *(*errorString)(NvmlReturn) = nullptr;      // nvmlErrorString
  NvmlReturn (*deviceByPciBusId)(const char *, NvmlDevice *) = nullptr;
  NvmlReturn (*deviceByIndex)(unsigned, NvmlDevice *) = nullptr;
  /// nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver
  /// loaded (Volta and newer).
  NvmlReturn (*totalEnergy)(NvmlDevice, unsigned long long *) = nullptr;

  /// "<call>: <NVML's description> (<code>)".
  std::string describe(NvmlReturn result, const char *call) const;
};

/// Loads `library` (libnvidia-ml.so.1 by default) and calls nvmlInit_v2,
/// once per process for the default library. Fails with "no NVML
/// (libnvidia-ml.so.1 not found)" or the failing call.
Expected<const NvmlLibrary *> loadNvml();
/// The same for another file name, not cached (for tests).
Expected<NvmlLibrary> loadNvmlFrom(const char *library);

/// The NVML device whose PCI bus id is `pciBusId` (as cuDeviceGetPCIBusId
/// writes it, "0000:17:00.0"), so that NVML and CUDA agree on the GPU
/// whatever CUDA_VISIBLE_DEVICES says.
Expected<NvmlDevice> nvmlDeviceForPciBusId(const NvmlLibrary &nvml,
                                           const std::string &pciBusId);

/// The device's total energy counter in millijoules.
Expected<uint64_t> nvmlEnergyMillijoules(const NvmlLibrary &nvml,
                                         NvmlDevice device);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_NVML_H

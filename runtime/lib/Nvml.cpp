//===- Nvml.cpp - dlopen libnvidia-ml.so.1 for the energy counter ---------===//

#include "Nvml.h"

#include "Support.h"

#include <dlfcn.h>

namespace kiln::runtime {

std::string NvmlLibrary::describe(NvmlReturn result, const char *call) const {
  const char *text = errorString ? errorString(result) : nullptr;
  return fmt::format("{}: {} ({})", call, text ? text : "unknown NVML error",
                     result);
}

Expected<NvmlLibrary> loadNvmlFrom(const char *library) {
  // RTLD_LOCAL: NVML's symbols stay out of the global namespace. Never
  // closed: the library lives as long as the process.
  void *handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return makeError("no NVML ({} not found)", library);
  NvmlLibrary nvml;
  const char *missing = nullptr;
  auto resolve = [&](auto &member, const char *symbol) {
    void *address = ::dlsym(handle, symbol);
    if (!address && !missing)
      missing = symbol;
    member =
        reinterpret_cast<std::remove_reference_t<decltype(member)>>(address);
  };
  resolve(nvml.init, "nvmlInit_v2");
  resolve(nvml.errorString, "nvmlErrorString");
  resolve(nvml.deviceByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2");
  resolve(nvml.deviceByIndex, "nvmlDeviceGetHandleByIndex_v2");
  resolve(nvml.totalEnergy, "nvmlDeviceGetTotalEnergyConsumption");
  if (missing)
    return makeError("NVML too old: {} has no {}", library, missing);
  if (NvmlReturn result = nvml.init(); result != kNvmlSuccess)
    return makeError("{}", nvml.describe(result, "nvmlInit_v2"));
  return nvml;
}

Expected<const NvmlLibrary *> loadNvml() {
  // Loaded once; the outcome is the same for the whole process.
  static const Expected<NvmlLibrary> nvml = loadNvmlFrom("libnvidia-ml.so.1");
  if (!nvml)
    return nvml.error();
  return &*nvml;
}

Expected<NvmlDevice> nvmlDeviceForPciBusId(const NvmlLibrary &nvml,
                                           const std::string &pciBusId) {
  NvmlDevice device = nullptr;
  if (NvmlReturn result = nvml.deviceByPciBusId(pciBusId.c_str(), &device);
      result != kNvmlSuccess)
    return makeError("{} (PCI bus id {})",
                     nvml.describe(result, "nvmlDeviceGetHandleByPciBusId_v2"),
                     pciBusId);
  return device;
}

Expected<uint64_t> nvmlEnergyMillijoules(const NvmlLibrary &nvml,
                                         NvmlDevice device) {
  unsigned long long millijoules = 0;
  if (NvmlReturn result = nvml.totalEnergy(device, &millijoules);
      result != kNvmlSuccess)
    return makeError(
        "{}", nvml.describe(result, "nvmlDeviceGetTotalEnergyConsumption"));
  return static_cast<uint64_t>(millijoules);
}

} // namespace kiln::runtime

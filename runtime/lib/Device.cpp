//===- Device.cpp - Device defaults, packed parameters, device lookup ----===//

#include "kiln/runtime/Device.h"

#include "Support.h"

#include <cstring>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// PackedParams
//===----------------------------------------------------------------------===//

void PackedParams::add(const void *value, size_t size, size_t alignment) {
  // Each parameter at its alignment, as in the PTX .param space.
  size_t offset = (bytes.size() + alignment - 1) & ~(alignment - 1);
  bytes.resize(offset + size, 0);
  std::memcpy(bytes.data() + offset, value, size);
  offsets.push_back(static_cast<uint32_t>(offset));
}

void PackedParams::addU32(uint32_t value) { add(&value, 4, 4); }
void PackedParams::addU64(uint64_t value) { add(&value, 8, 8); }
void PackedParams::addBytes(const void *value, size_t size,
                            size_t alignment) {
  add(value, size, alignment);
}

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

Device::~Device() = default;

namespace {
Error noGraphs(const Device &device) {
  return makeError("graph capture is not supported by the {} device",
                   device.info().kind);
}
Error noConditionalGraphs(const Device &device) {
  return makeError("the {} device has no conditional graph nodes",
                   device.info().kind);
}
} // namespace

Error Device::copyOnDevice(DevicePtr, DevicePtr, uint64_t) {
  return makeError("device-to-device copies are not supported by the {} "
                   "device",
                   info().kind);
}

Error Device::encodeTensorMap(const TensorMapRecord &, DevicePtr,
                              std::string_view subject, uint8_t *) {
  return makeError("{}: the {} device cannot build TMA tensor maps", subject,
                   info().kind);
}

Error Device::waitEvent(StreamHandle, EventHandle) {
  return makeError("cross-stream waits are not supported by the {} device",
                   info().kind);
}
Expected<bool> Device::eventDone(EventHandle) {
  return makeError("event queries are not supported by the {} device",
                   info().kind);
}
Expected<void *> Device::nativeStream(StreamHandle) {
  return makeError("the {} device has no native streams", info().kind);
}

Error Device::beginCapture(StreamHandle) { return noGraphs(*this); }
Expected<GraphHandle> Device::endCapture(StreamHandle) {
  return noGraphs(*this);
}
Error Device::launchGraph(GraphHandle, StreamHandle) { return noGraphs(*this); }
Error Device::destroyGraph(GraphHandle) { return noGraphs(*this); }

Error Device::checkConditionalGraphs() { return noConditionalGraphs(*this); }
Expected<StreamHandle> Device::beginWhileCapture(StreamHandle, DevicePtr) {
  return noConditionalGraphs(*this);
}
Error Device::endWhileCapture(StreamHandle) {
  return noConditionalGraphs(*this);
}

Error Device::setProfiling(const ProfilingOptions &options) {
  if (!options.enabled)
    return Error::success();
  return makeError("the {} device does not count performance events (profile "
                   "on emu, or time launches with events)",
                   info().kind);
}
std::vector<LaunchProfile> Device::takeLaunchProfiles() { return {}; }
Expected<uint64_t> Device::energyMillijoules() {
  return makeError("the {} device has no energy counter", info().kind);
}

Expected<std::unique_ptr<Device>> createDevice(std::string_view spec) {
  if (spec == "emu")
    return createEmuDevice();
  if (spec == "cuda")
    return createCudaDevice(0);
  if (spec.substr(0, 5) == "cuda:" && spec.size() > 5 && spec.size() < 9) {
    int ordinal = 0;
    for (char c : spec.substr(5)) {
      if (c < '0' || c > '9')
        return makeError("unknown device '{}' (expected cuda, cuda:N or emu)",
                         spec);
      ordinal = ordinal * 10 + (c - '0');
    }
    return createCudaDevice(ordinal);
  }
  return makeError("unknown device '{}' (expected cuda, cuda:N or emu)", spec);
}

} // namespace kiln::runtime

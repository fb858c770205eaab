//===- EmuDevice.cpp - The `emu` device: PTX run on the CPU ---------------===//
//
// Memory is host allocations behind made-up device addresses: each one
// starts on a fresh 256-byte boundary after a guard gap, and addresses are
// never reused, so a stray or stale pointer lands in no allocation and the
// interpreter reports it. Modules are parsed PTX (see emu/PtxParser.h);
// launches run the interpreter to completion before returning, so streams
// and synchronisation are trivial and events read the host clock.
//
// KILN_EMU_THREADS=N sets how many host threads run independent blocks
// (default: the hardware's count). KILN_EMU_STATS=1 prints the number of
// emulated thread-instructions and their rate to stderr when the device
// is destroyed. KILN_EMU_RANDOM_BLOCKS=<seed> (non-zero) runs each launch's
// blocks in a random order drawn from the seed; KILN_EMU_CHECK_SHARED=1
// fails a launch that reads shared memory no thread of the block wrote;
// KILN_EMU_MAX_STEPS=N fails a block still running after N warp
// instructions (an endless loop would otherwise hang the run).
// KILN_EMU_CHECK=races[,shared] turns on the race check (shared-memory
// races, async-proxy hazards, global writes of two blocks, mbarrier misuse:
// emu/RaceCheck.h) and, with `shared`, the shared-read check; an unknown
// name makes creating the device fail.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Device.h"

#include "Support.h"
#include "emu/PtxInterpreter.h"
#include "emu/PtxParser.h"
#include "emu/TensorMap.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <utility>

namespace kiln::runtime {

namespace {

/// The first device address handed out; far from 0 so that small integers
/// used as pointers are caught.
constexpr uint64_t kFirstAddress = 1ull << 40;
/// Unused bytes between allocations.
constexpr uint64_t kGuardBytes = 256;

struct Allocation {
  std::unique_ptr<uint8_t[]> bytes;
  uint64_t size = 0;
};

struct ModuleSlot {
  bool live = false;
  std::string kernelName;
  emu::Module module;
  /// Device addresses of the module's global variables.
  std::vector<DevicePtr> globals;
};

struct FunctionSlot {
  size_t module = 0;
  size_t kernel = 0;
};

using Clock = std::chrono::steady_clock;

/// The default step limit (KILN_EMU_MAX_STEPS): warp instructions one block
/// may execute before the launch fails, so that an endless loop or a spin
/// on another block ends a run (and a test) instead of hanging it. The
/// largest block of ResNet-50 at batch 32 runs 1.18e6 (the unfused fp32
/// convolution; 6.3e4 on the bf16 templates): 850x below this, which an
/// endless loop reaches in seconds (docs/emulator.md "Flags").
constexpr uint64_t kDefaultMaxWarpInstructionsPerBlock = 1'000'000'000;

/// The emulated device memory (KILN_EMU_DEVICE_MEMORY): 1 TiB, more than
/// any host this runs on, so by default only the host's memory limits a
/// model; a smaller size models a GPU (docs/reliability.md "Faults").
constexpr uint64_t kDefaultDeviceMemory = 1ull << 40;

/// "256M", "80G", "1048576": bytes with an optional binary suffix (K, M, G,
/// T; an optional trailing "iB" or "B"). nullopt for anything else, zero
/// and sizes past 2^64.
std::optional<uint64_t> parseByteSize(std::string_view text) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0)
    return std::nullopt;
  std::string_view suffix = text.substr(i);
  unsigned shift = 0;
  constexpr std::string_view kUnits = "KMGT";
  size_t unit = suffix.empty() ? std::string_view::npos
                               : kUnits.find(static_cast<char>(std::toupper(
                                     static_cast<unsigned char>(suffix[0]))));
  if (unit != std::string_view::npos) {
    shift = 10 * static_cast<unsigned>(unit + 1);
    suffix.remove_prefix(1);
  }
  if (!suffix.empty() && suffix != "iB" && suffix != "B")
    return std::nullopt;
  if (value == 0 || (shift && value > (UINT64_MAX >> shift)))
    return std::nullopt;
  return value << shift;
}

class EmuDevice final : public Device {
public:
  EmuDevice() {
    deviceInfo.kind = "emu";
    deviceInfo.name = "Kiln PTX emulator";
    deviceInfo.computeCapability = 0;
    deviceInfo.totalMemory = kDefaultDeviceMemory;
    unsigned hardware = std::thread::hardware_concurrency();
    workers = hardware ? hardware : 1;
    if (const char *env = std::getenv("KILN_EMU_THREADS")) {
      int n = std::atoi(env);
      if (n > 0)
        workers = static_cast<unsigned>(n);
    }
    const char *stats = std::getenv("KILN_EMU_STATS");
    printStats = stats && *stats && std::strcmp(stats, "0") != 0;
    if (const char *env = std::getenv("KILN_EMU_RANDOM_BLOCKS"))
      blockOrderSeed = std::strtoull(env, nullptr, 0);
    if (const char *env = std::getenv("KILN_EMU_MAX_STEPS"); env && *env)
      maxWarpInstructionsPerBlock = std::strtoull(env, nullptr, 0);
    const char *checkShared = std::getenv("KILN_EMU_CHECK_SHARED");
    checkSharedReads =
        checkShared && *checkShared && std::strcmp(checkShared, "0") != 0;
  }
  ~EmuDevice() override;

  /// Reads KILN_EMU_DEVICE_MEMORY: the emulated device's memory size.
  Error readDeviceMemory(std::string_view text) {
    std::optional<uint64_t> bytes = parseByteSize(text);
    if (!bytes)
      return makeError("emu: KILN_EMU_DEVICE_MEMORY: '{}' is not a size in "
                       "bytes (e.g. 268435456, 256M, 80G)",
                       printable(text));
    deviceInfo.totalMemory = *bytes;
    return Error::success();
  }

  /// Reads KILN_EMU_CHECK (a comma-separated list: races, shared).
  Error readChecks(std::string_view list) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string_view::npos)
        end = list.size();
      std::string_view name = list.substr(start, end - start);
      if (name == "races")
        checkRaces = true;
      else if (name == "shared")
        checkSharedReads = true;
      else if (!name.empty())
        return makeError("emu: KILN_EMU_CHECK: unknown check '{}' (known: "
                         "races, shared; comma-separated)",
                         name);
      start = end + 1;
    }
    return Error::success();
  }

  const DeviceInfo &info() const override { return deviceInfo; }

  Expected<DevicePtr> allocate(uint64_t size) override;
  Error deallocate(DevicePtr ptr) override;
  Error copyToDevice(DevicePtr dst, const void *src, uint64_t size) override;
  Error copyToHost(void *dst, DevicePtr src, uint64_t size) override;
  Error copyOnDevice(DevicePtr dst, DevicePtr src, uint64_t size) override;

  Expected<ModuleHandle> loadModule(const ModuleImage &image) override;
  Error unloadModule(ModuleHandle module) override;
  Expected<FunctionHandle> getFunction(ModuleHandle module,
                                       std::string_view name) override;

  Expected<StreamHandle> createStream() override;
  Error destroyStream(StreamHandle stream) override;
  Error synchronize(StreamHandle stream) override;
  Error launch(FunctionHandle function, const LaunchConfig &config,
               const PackedParams &params, StreamHandle stream) override;

  Error encodeTensorMap(const TensorMapRecord &map, DevicePtr address,
                        std::string_view subject, uint8_t *out128) override;

  Expected<EventHandle> createEvent() override;
  Error destroyEvent(EventHandle event) override;
  Error recordEvent(EventHandle event, StreamHandle stream) override;
  Expected<float> elapsedMilliseconds(EventHandle start,
                                      EventHandle end) override;

  Error setProfiling(const ProfilingOptions &options) override {
    profiling = options;
    return Error::success();
  }
  std::vector<LaunchProfile> takeLaunchProfiles() override {
    return std::exchange(profiles, {});
  }
  bool runsEveryBlock() const override {
    return !profiling.enabled || profiling.sampleBlocks == 0;
  }

private:
  /// Host bytes for [ptr, ptr + size), or an error naming `what`.
  Expected<uint8_t *> hostRange(DevicePtr ptr, uint64_t size,
                                std::string_view what);
  void rebuildRegions();

  DeviceInfo deviceInfo;
  unsigned workers = 1;
  bool printStats = false;
  uint64_t blockOrderSeed = 0;
  uint64_t maxWarpInstructionsPerBlock = kDefaultMaxWarpInstructionsPerBlock;
  uint64_t launches = 0;
  bool checkSharedReads = false;
  bool checkRaces = false;
  /// Blocks the race check ran (KILN_EMU_STATS reports them).
  uint64_t raceCheckedBlocks = 0;
  uint64_t nextAddress = kFirstAddress;
  /// Bytes of live allocations, each rounded up to 256 as allocate does.
  uint64_t bytesInUse = 0;
  std::map<DevicePtr, Allocation> allocations;
  std::vector<emu::MemoryRegion> regions;
  std::vector<ModuleSlot> modules;
  std::vector<FunctionSlot> functions;
  /// Streams: true while live.
  std::vector<bool> streams;
  /// Events: when recorded (nullopt until then); id = index + 1.
  std::vector<std::optional<Clock::time_point>> events;
  std::vector<bool> eventLive;
  emu::LaunchStats stats;
  double launchSeconds = 0;
  ProfilingOptions profiling;
  std::vector<LaunchProfile> profiles;
};

/// The emulator's counters as the runtime's (Device.h) LaunchCounters.
LaunchCounters countersOf(const emu::LaunchStats &stats, const Dim3 &grid) {
  LaunchCounters counters;
  counters.threadInstructions = stats.threadInstructions;
  counters.warpInstructions = stats.warpInstructions;
  counters.fmaInstructions = stats.fmaInstructions;
  counters.mmaInstructions = stats.mmaInstructions;
  counters.loadStoreInstructions = stats.loadStoreInstructions;
  counters.shuffleInstructions = stats.shuffleInstructions;
  counters.otherInstructions = stats.otherInstructions;
  counters.fmaFlops = stats.fmaFlops;
  counters.mmaFlops = stats.mmaFlops;
  counters.globalAccesses = stats.globalAccesses;
  counters.globalBytesRequested = stats.globalBytesRequested;
  counters.globalSectors = stats.globalSectors;
  counters.dramReadSectors = stats.dramReadSectors;
  counters.dramWriteSectors = stats.dramWriteSectors;
  counters.sharedAccesses = stats.sharedAccesses;
  counters.sharedBankConflictReplays = stats.sharedBankConflictReplays;
  counters.blocksTotal = stats.blocksTotal;
  counters.blocksRun = stats.blocksRun;
  // An interpreter that does not report blocks ran them all.
  if (counters.blocksRun == 0) {
    counters.blocksTotal = uint64_t(grid.x) * grid.y * grid.z;
    counters.blocksRun = counters.blocksTotal;
  }
  return counters;
}

EmuDevice::~EmuDevice() {
  if (printStats && launchSeconds > 0)
    std::fprintf(stderr,
                 "kiln emu: %llu thread-instructions (%llu warp-instructions) "
                 "in %.3f s: %.1f M thread-instructions/s on %u thread(s)\n",
                 static_cast<unsigned long long>(stats.threadInstructions),
                 static_cast<unsigned long long>(stats.warpInstructions),
                 launchSeconds, stats.threadInstructions / launchSeconds / 1e6,
                 workers);
  if (printStats && checkRaces)
    std::fprintf(stderr,
                 "kiln emu: race check (KILN_EMU_CHECK=races): %llu blocks of "
                 "%llu launches checked\n",
                 static_cast<unsigned long long>(raceCheckedBlocks),
                 static_cast<unsigned long long>(launches));
}

void EmuDevice::rebuildRegions() {
  regions.clear();
  for (auto &[base, allocation] : allocations)
    regions.push_back({base, allocation.size, allocation.bytes.get()});
}

Expected<DevicePtr> EmuDevice::allocate(uint64_t size) {
  std::optional<uint64_t> rounded = alignUp(std::max<uint64_t>(size, 1), 256);
  if (!rounded || *rounded > deviceInfo.totalMemory - bytesInUse)
    return makeError("emu: out of device memory: cannot allocate {} bytes, "
                     "{} of the device's {} bytes are free "
                     "(KILN_EMU_DEVICE_MEMORY)",
                     size, deviceInfo.totalMemory - bytesInUse,
                     deviceInfo.totalMemory);
  Allocation allocation;
  allocation.bytes.reset(new (std::nothrow) uint8_t[*rounded]);
  if (!allocation.bytes)
    return makeError("emu: out of host memory allocating {} bytes", size);
  std::memset(allocation.bytes.get(), 0, *rounded);
  allocation.size = size;
  bytesInUse += *rounded;
  DevicePtr ptr = nextAddress;
  nextAddress += *rounded + kGuardBytes;
  allocations.emplace(ptr, std::move(allocation));
  rebuildRegions();
  return ptr;
}

Error EmuDevice::deallocate(DevicePtr ptr) {
  auto it = allocations.find(ptr);
  if (it == allocations.end())
    return makeError("emu: free of 0x{:x}, which is not an allocation", ptr);
  bytesInUse -= *alignUp(std::max<uint64_t>(it->second.size, 1), 256);
  allocations.erase(it);
  rebuildRegions();
  return Error::success();
}

Expected<uint8_t *> EmuDevice::hostRange(DevicePtr ptr, uint64_t size,
                                         std::string_view what) {
  auto it = allocations.upper_bound(ptr);
  if (it != allocations.begin()) {
    --it;
    uint64_t offset = ptr - it->first;
    if (rangeFits(offset, size, it->second.size))
      return it->second.bytes.get() + offset;
  }
  return makeError("emu: {} of {} bytes at 0x{:x} is outside every "
                   "allocation",
                   what, size, ptr);
}

Error EmuDevice::copyToDevice(DevicePtr dst, const void *src, uint64_t size) {
  if (size == 0)
    return Error::success();
  Expected<uint8_t *> host = hostRange(dst, size, "copy to the device");
  if (!host)
    return host.takeError();
  std::memcpy(*host, src, size);
  return Error::success();
}

Error EmuDevice::copyToHost(void *dst, DevicePtr src, uint64_t size) {
  if (size == 0)
    return Error::success();
  Expected<uint8_t *> host = hostRange(src, size, "copy to the host");
  if (!host)
    return host.takeError();
  std::memcpy(dst, *host, size);
  return Error::success();
}

Error EmuDevice::copyOnDevice(DevicePtr dst, DevicePtr src, uint64_t size) {
  if (size == 0)
    return Error::success();
  Expected<uint8_t *> to = hostRange(dst, size, "copy on the device (to)");
  if (!to)
    return to.takeError();
  Expected<uint8_t *> from = hostRange(src, size, "copy on the device (from)");
  if (!from)
    return from.takeError();
  std::memmove(*to, *from, size);
  return Error::success();
}

Expected<ModuleHandle> EmuDevice::loadModule(const ModuleImage &image) {
  Expected<emu::Module> parsed = emu::parsePtx(image.ptx);
  if (!parsed)
    return parsed.error().withContext(
        fmt::format("emu: kernel '{}'", image.kernelName));
  ModuleSlot slot;
  slot.live = true;
  slot.kernelName = std::string(image.kernelName);
  slot.module = parsed.take();
  for (const emu::GlobalVar &var : slot.module.globals) {
    Expected<DevicePtr> ptr = allocate(var.size);
    if (!ptr)
      return ptr.takeError();
    if (Error err = copyToDevice(*ptr, var.init.data(), var.size))
      return err;
    slot.globals.push_back(*ptr);
  }
  for (emu::Kernel &kernel : slot.module.kernels)
    for (emu::Constant &constant : kernel.constants)
      if (constant.globalVar >= 0)
        constant.value = slot.globals[constant.globalVar];
  modules.push_back(std::move(slot));
  return ModuleHandle{modules.size()};
}

Error EmuDevice::unloadModule(ModuleHandle handle) {
  if (handle.id == 0 || handle.id > modules.size() ||
      !modules[handle.id - 1].live)
    return makeError("emu: unload of an unknown module handle");
  ModuleSlot &slot = modules[handle.id - 1];
  for (DevicePtr ptr : slot.globals)
    (void)deallocate(ptr);
  slot.live = false;
  slot.module = emu::Module();
  return Error::success();
}

Expected<FunctionHandle> EmuDevice::getFunction(ModuleHandle handle,
                                                std::string_view name) {
  if (handle.id == 0 || handle.id > modules.size() ||
      !modules[handle.id - 1].live)
    return makeError("emu: kernel '{}': unknown module handle", name);
  const emu::Module &module = modules[handle.id - 1].module;
  for (size_t k = 0; k < module.kernels.size(); ++k)
    if (module.kernels[k].name == name) {
      functions.push_back({handle.id - 1, k});
      return FunctionHandle{functions.size()};
    }
  return makeError("emu: kernel '{}' is not in its module's PTX", name);
}

Expected<StreamHandle> EmuDevice::createStream() {
  streams.push_back(true);
  return StreamHandle{streams.size()};
}

Error EmuDevice::destroyStream(StreamHandle stream) {
  if (stream.id == 0 || stream.id > streams.size() || !streams[stream.id - 1])
    return makeError("emu: unknown stream handle");
  streams[stream.id - 1] = false;
  return Error::success();
}

Error EmuDevice::synchronize(StreamHandle stream) {
  if (stream.id == 0 || stream.id > streams.size() || !streams[stream.id - 1])
    return makeError("emu: unknown stream handle");
  return Error::success(); // launches finish before they return
}

Error EmuDevice::encodeTensorMap(const TensorMapRecord &map, DevicePtr address,
                                 std::string_view subject, uint8_t *out128) {
  // The record was verified (verifyArtifact); what is left to refuse is
  // what only the address decides, as cuTensorMapEncodeTiled does.
  if (address % 16)
    return makeError("{}: the driver refused the tensor map: global address "
                     "{:#x} is not 16-byte aligned",
                     subject, address);
  emu::EmuTensorMap encoded;
  encoded.dataType = map.dtype == DType::BF16  ? emu::kTensorMapBFloat16
                     : map.dtype == DType::F16 ? emu::kTensorMapFloat16
                                               : emu::kTensorMapFloat32;
  encoded.rank = static_cast<uint8_t>(map.rank);
  encoded.swizzle = static_cast<uint8_t>(map.swizzle);
  encoded.interleave = static_cast<uint8_t>(map.interleave);
  encoded.oobFill = static_cast<uint8_t>(map.oobFill);
  encoded.globalAddress = address;
  for (uint32_t d = 0; d < map.rank; ++d) {
    // 2^32 elements is the one dimension the u32 field cannot hold.
    if (map.globalDims[d] > 0xFFFFFFFFull)
      return makeError("{}: dimension {} has {} elements, more than the "
                       "emulator's tensor maps hold",
                       subject, d, map.globalDims[d]);
    encoded.globalDims[d] = static_cast<uint32_t>(map.globalDims[d]);
    encoded.boxDims[d] = map.boxDims[d];
    encoded.elementStrides[d] = static_cast<uint8_t>(map.elementStrides[d]);
    if (d > 0)
      encoded.globalStrides[d - 1] = map.globalStrides[d - 1];
  }
  std::memcpy(out128, &encoded, sizeof(encoded));
  return Error::success();
}

Error EmuDevice::launch(FunctionHandle function, const LaunchConfig &config,
                        const PackedParams &params, StreamHandle stream) {
  if (function.id == 0 || function.id > functions.size())
    return makeError("emu: launch of an unknown function handle");
  if (stream.id == 0 || stream.id > streams.size() || !streams[stream.id - 1])
    return makeError("emu: launch on an unknown stream handle");
  const FunctionSlot &slot = functions[function.id - 1];
  if (!modules[slot.module].live)
    return makeError("emu: launch of a kernel whose module was unloaded");
  const emu::Kernel &kernel = modules[slot.module].module.kernels[slot.kernel];
  // The packed layout must be the PTX's: a by-value aggregate (a 128-byte
  // tensor map) packed at another alignment than its `.param .align N`
  // would shift every parameter after it.
  for (size_t i = 0; i < params.count() && i < kernel.params.size(); ++i)
    if (params.offset(i) != kernel.params[i].offset)
      return makeError("emu: kernel '{}': parameter {} '{}' is packed at byte "
                       "{} but the PTX declares it at byte {}",
                       kernel.name, i, kernel.params[i].name, params.offset(i),
                       kernel.params[i].offset);
  emu::LaunchSpec spec;
  spec.grid = config.grid;
  spec.block = config.block;
  spec.dynamicSharedBytes = config.dynamicSharedBytes;
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &regions;
  spec.workers = workers;
  spec.checkSharedReads = checkSharedReads;
  spec.checkRaces = checkRaces;
  spec.maxWarpInstructionsPerBlock = maxWarpInstructionsPerBlock;
  ++launches;
  if (blockOrderSeed) // a different order for every launch
    spec.blockOrderSeed = blockOrderSeed * 0x9e3779b97f4a7c15ull + launches;
  if (profiling.enabled) {
    spec.countPerformance = true;
    spec.sampleBlocks = profiling.sampleBlocks;
    spec.sampleSeed = profiling.sampleSeed + launches;
  }
  // Counts per launch; the device's totals (KILN_EMU_STATS) sum them.
  emu::LaunchStats launchStats;
  auto start = Clock::now();
  Error err = emu::runKernel(kernel, spec, &launchStats);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  launchSeconds += seconds;
  stats.threadInstructions += launchStats.threadInstructions;
  stats.warpInstructions += launchStats.warpInstructions;
  if (checkRaces && !err)
    raceCheckedBlocks += launchStats.blocksRun;
  if (profiling.enabled && !err)
    profiles.push_back({kernel.name, config, stream.id,
                        countersOf(launchStats, config.grid), seconds});
  return err;
}

Expected<EventHandle> EmuDevice::createEvent() {
  events.emplace_back();
  eventLive.push_back(true);
  return EventHandle{events.size()};
}

Error EmuDevice::destroyEvent(EventHandle event) {
  if (event.id == 0 || event.id > events.size() || !eventLive[event.id - 1])
    return makeError("emu: unknown event handle");
  eventLive[event.id - 1] = false;
  return Error::success();
}

Error EmuDevice::recordEvent(EventHandle event, StreamHandle stream) {
  if (event.id == 0 || event.id > events.size() || !eventLive[event.id - 1])
    return makeError("emu: unknown event handle");
  if (stream.id == 0 || stream.id > streams.size() || !streams[stream.id - 1])
    return makeError("emu: unknown stream handle");
  events[event.id - 1] = Clock::now();
  return Error::success();
}

Expected<float> EmuDevice::elapsedMilliseconds(EventHandle start,
                                               EventHandle end) {
  for (EventHandle event : {start, end})
    if (event.id == 0 || event.id > events.size() || !eventLive[event.id - 1])
      return makeError("emu: unknown event handle");
  const auto &from = events[start.id - 1];
  const auto &to = events[end.id - 1];
  if (!from || !to)
    return makeError("emu: elapsed time of an event that was not recorded");
  return std::chrono::duration<float, std::milli>(*to - *from).count();
}

} // namespace

Expected<std::unique_ptr<Device>> createEmuDevice() {
  auto device = std::make_unique<EmuDevice>();
  if (const char *memory = std::getenv("KILN_EMU_DEVICE_MEMORY");
      memory && *memory)
    if (Error err = device->readDeviceMemory(memory))
      return err;
  if (const char *checks = std::getenv("KILN_EMU_CHECK"))
    if (Error err = device->readChecks(checks))
      return err;
  return std::unique_ptr<Device>(std::move(device));
}

} // namespace kiln::runtime

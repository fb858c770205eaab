//===- Device.h - What the runtime needs from a device ----------*- C++ -*-===//
//
// A Device allocates memory, copies to and from it, loads kernels, launches
// them on streams, times them with events and, optionally, captures a stream
// into a graph to replay. Implementations: `cuda` (the driver API, loaded
// with dlopen at run time) and `emu` (the PTX emulator). Handles are
// opaque ids that only mean something to the device that made them.
//
// Stability: createDevice, Device::info and DeviceInfo are stable (as
// Runtime.h). The rest of Device (memory, modules, launches, events,
// graphs, profiling hooks) is the interface sessions use and may change
// between minor versions; applications should not implement or call it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DEVICE_H
#define KILN_RUNTIME_DEVICE_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// A device address (CUdeviceptr on cuda).
using DevicePtr = uint64_t;

/// An opaque, typed id; 0 is "none".
template <typename Tag> struct Handle {
  uint64_t id = 0;
  bool valid() const { return id != 0; }
  friend bool operator==(Handle a, Handle b) { return a.id == b.id; }
  friend bool operator!=(Handle a, Handle b) { return a.id != b.id; }
};
using ModuleHandle = Handle<struct ModuleTag>;
using FunctionHandle = Handle<struct FunctionTag>;
using StreamHandle = Handle<struct StreamTag>;
using EventHandle = Handle<struct EventTag>;
using GraphHandle = Handle<struct GraphTag>;

/// What a kernel's module is loaded from. The device uses the cubin when its
/// sm equals the device's compute capability, else JIT-compiles the PTX.
struct ModuleImage {
  /// The kernel this module holds (for messages).
  std::string_view kernelName;
  std::string_view ptx;
  const uint8_t *cubin = nullptr;
  size_t cubinSize = 0;
  uint32_t cubinSm = 0;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  uint32_t dynamicSharedBytes = 0;
};

/// Kernel arguments laid out as the kernel's parameter space expects them:
/// each at its natural alignment, in order.
class PackedParams {
public:
  void addU32(uint32_t value);
  void addU64(uint64_t value);
  /// A by-value aggregate (a 128-byte tensor map: alignment 64, as the
  /// PTX's `.param .align 64 .b8 name[128]`).
  void addBytes(const void *value, size_t size, size_t alignment);

  const uint8_t *data() const { return bytes.data(); }
  size_t size() const { return bytes.size(); }
  size_t count() const { return offsets.size(); }
  /// Where parameter `i` starts in data().
  size_t offset(size_t i) const { return offsets[i]; }

private:
  void add(const void *value, size_t size, size_t alignment);

  std::vector<uint8_t> bytes;
  std::vector<uint32_t> offsets;
};

struct DeviceInfo {
  /// "cuda", "emu".
  std::string kind;
  /// The product name, e.g. "NVIDIA H200".
  std::string name;
  /// major * 10 + minor (90 for sm_90); 0 when the device runs any PTX.
  uint32_t computeCapability = 0;
  uint64_t totalMemory = 0;
};

/// What a counting device (emu) measured in one launch: the inputs of the
/// performance model (Profile.h). Mirrors the emulator's counters; counts
/// cover the blocks that ran (`blocksRun` of `blocksTotal` when sampled).
struct LaunchCounters {
  /// Instructions issued, per lane and per warp.
  uint64_t threadInstructions = 0;
  uint64_t warpInstructions = 0;
  /// Thread-instructions by class.
  uint64_t fmaInstructions = 0;
  uint64_t mmaInstructions = 0;
  uint64_t loadStoreInstructions = 0;
  uint64_t shuffleInstructions = 0;
  uint64_t otherInstructions = 0;
  /// Floating-point operations of FMA lanes and of MMA instructions.
  uint64_t fmaFlops = 0;
  uint64_t mmaFlops = 0;
  /// Warp-level global accesses, the bytes their lanes asked for and the
  /// 32-byte sectors those bytes touch.
  uint64_t globalAccesses = 0;
  uint64_t globalBytesRequested = 0;
  uint64_t globalSectors = 0;
  /// Distinct 32-byte sectors read and written (the DRAM-traffic estimate).
  uint64_t dramReadSectors = 0;
  uint64_t dramWriteSectors = 0;
  /// Warp-level shared accesses, and the extra passes bank conflicts cost.
  uint64_t sharedAccesses = 0;
  uint64_t sharedBankConflictReplays = 0;
  uint64_t blocksTotal = 0;
  uint64_t blocksRun = 0;
};

/// One launch, as a device with profiling on recorded it.
struct LaunchProfile {
  /// The kernel's PTX entry name.
  std::string kernel;
  LaunchConfig config;
  /// The stream it was queued on (StreamHandle::id).
  uint64_t stream = 0;
  LaunchCounters counters;
  /// Host time the launch took (the emulator's own speed, not the GPU's).
  double hostSeconds = 0;
};

struct ProfilingOptions {
  /// Count the performance counters of every launch and record a
  /// LaunchProfile for it.
  bool enabled = false;
  /// Run only this many blocks of each grid, drawn at random (0: all).
  /// The memory effects are then incomplete: for estimates only.
  uint64_t sampleBlocks = 0;
  uint64_t sampleSeed = 1;
};

class Device {
public:
  virtual ~Device();

  virtual const DeviceInfo &info() const = 0;

  virtual Expected<DevicePtr> allocate(uint64_t size) = 0;
  virtual Error deallocate(DevicePtr ptr) = 0;
  /// Synchronous copies: they wait for all work queued on the device and
  /// are complete when they return.
  virtual Error copyToDevice(DevicePtr dst, const void *src, uint64_t size) = 0;
  virtual Error copyToHost(void *dst, DevicePtr src, uint64_t size) = 0;
  /// A synchronous copy between two ranges of this device's memory (for
  /// tensors that already live on the device, e.g. a DLPack tensor from
  /// another library on the same GPU). Devices without it return an error
  /// naming themselves.
  virtual Error copyOnDevice(DevicePtr dst, DevicePtr src, uint64_t size);

  virtual Expected<ModuleHandle> loadModule(const ModuleImage &image) = 0;
  virtual Error unloadModule(ModuleHandle module) = 0;
  virtual Expected<FunctionHandle> getFunction(ModuleHandle module,
                                               std::string_view name) = 0;

  virtual Expected<StreamHandle> createStream() = 0;
  virtual Error destroyStream(StreamHandle stream) = 0;
  /// Waits until everything queued on the stream has finished.
  virtual Error synchronize(StreamHandle stream) = 0;
  virtual Error launch(FunctionHandle function, const LaunchConfig &config,
                       const PackedParams &params, StreamHandle stream) = 0;

  /// A TMA tensor map for `map` over the tensor at `address`, as the
  /// 128 bytes a `const __grid_constant__ CUtensorMap` parameter receives:
  /// cuda encodes it with cuTensorMapEncodeTiled, emu writes the emulator's
  /// EmuTensorMap. `subject` ("kernel 'k' tensor map 0 (parameter 'A')")
  /// names it in errors. Devices without TMA return an error naming
  /// themselves.
  virtual Error encodeTensorMap(const TensorMapRecord &map, DevicePtr address,
                                std::string_view subject, uint8_t *out128);

  virtual Expected<EventHandle> createEvent() = 0;
  virtual Error destroyEvent(EventHandle event) = 0;
  virtual Error recordEvent(EventHandle event, StreamHandle stream) = 0;
  /// Waits for `end`, then returns the time between the two events.
  virtual Expected<float> elapsedMilliseconds(EventHandle start,
                                              EventHandle end) = 0;
  /// Later work queued on `stream` waits until `event` (recorded on
  /// another stream) has happened; the host does not wait. Devices with one
  /// queue in effect (emu) return an error naming themselves.
  virtual Error waitEvent(StreamHandle stream, EventHandle event);
  /// Whether the work before `event` has finished, without waiting (for a
  /// host that polls with a deadline: the NCCL engine's timeout).
  virtual Expected<bool> eventDone(EventHandle event);
  /// The driver's own handle of `stream` (a CUstream on cuda), with the
  /// device's context made current on the calling thread, for a library
  /// that queues work on it (NCCL). Devices without one return an error.
  virtual Expected<void *> nativeStream(StreamHandle stream);

  /// Graph capture: launches queued on the stream between beginCapture and
  /// endCapture are recorded (not run) into a graph that launchGraph
  /// replays. Devices without graphs return an error from each of these.
  virtual bool supportsGraphs() const { return false; }
  virtual Error beginCapture(StreamHandle stream);
  virtual Expected<GraphHandle> endCapture(StreamHandle stream);
  virtual Error launchGraph(GraphHandle graph, StreamHandle stream);
  virtual Error destroyGraph(GraphHandle graph);

  /// Device-side loops inside a captured graph (docs/runtime.md
  /// "Device-side loops"): success when this device can capture a loop
  /// whose test runs on the device (cuda: conditional WHILE nodes), else an
  /// error saying why not. The answer does not change; cuda loads its setter
  /// kernel on the first call, which is best made before any capture.
  virtual Error checkConditionalGraphs();
  /// While `stream` is capturing: adds a node that repeats a body while the
  /// byte at `flag` is nonzero, tested before every iteration (the first
  /// included), and returns a new stream capturing that body. Launches
  /// queued on it form the body until endWhileCapture(body); launches on
  /// `stream` come after the node. A body stream is a capturing stream, so
  /// loops nest.
  virtual Expected<StreamHandle> beginWhileCapture(StreamHandle stream,
                                                   DevicePtr flag);
  /// Ends a body begun by beginWhileCapture (after its last launch, the
  /// flag is tested again) and releases its stream, also when the capture
  /// failed.
  virtual Error endWhileCapture(StreamHandle body);

  /// Profiling: a device that counts (emu) records a LaunchProfile per
  /// launch while it is enabled, and takeLaunchProfiles hands them over (in
  /// launch order) and forgets them. Devices that cannot count return an
  /// error naming themselves; they time launches with events instead.
  virtual Error setProfiling(const ProfilingOptions &options);
  virtual std::vector<LaunchProfile> takeLaunchProfiles();
  /// False while launches run only some of their blocks (emu's sampled
  /// profiling): memory a kernel leaves as it found it (split-K's
  /// semaphores, Artifact::zeroedBuffers) may then be left otherwise.
  virtual bool runsEveryBlock() const { return true; }

  /// The device's energy counter in millijoules (NVML's total energy on
  /// cuda; an arbitrary origin, so only differences mean anything), or an
  /// error saying why there is none.
  virtual Expected<uint64_t> energyMillijoules();
};

/// The device named by `spec`: "cuda" (the first GPU), "cuda:N" or "emu".
Expected<std::unique_ptr<Device>> createDevice(std::string_view spec);

/// The cuda device `ordinal`. Fails with "no CUDA driver (libcuda.so.1 not
/// found)" or "no CUDA device" where there is nothing to run on.
Expected<std::unique_ptr<Device>> createCudaDevice(int ordinal = 0);

/// The emu device: the PTX emulator, which runs kernels on the CPU.
Expected<std::unique_ptr<Device>> createEmuDevice();

} // namespace kiln::runtime

#endif // KILN_RUNTIME_DEVICE_H

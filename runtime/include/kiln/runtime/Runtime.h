//===- Runtime.h - Run a .kiln artifact on a device -------------*- C++ -*-===//
//
// The runtime's C++ API:
//
//   Expected<Artifact> artifact = readArtifact("model.kiln");
//   Expected<std::unique_ptr<Device>> device = createDevice("cuda");
//   Expected<std::unique_ptr<Session>> session = Session::create(
//       std::make_shared<const Artifact>(artifact.take()), device.take());
//   (*session)->bindInput("x", DType::F32, {1, 3, 224, 224}, data, bytes);
//   (*session)->run();
//   Expected<HostTensor> y = (*session)->readOutput("y");
//
// A session owns the device memory of one model instance (the arena and the
// weights), its loaded kernels, a stream and, if asked, a CUDA graph of the
// launch list. It is not thread-safe; use one session per thread.
//
// Stability: stable. Session, SessionOptions, HostTensor, BenchmarkResult
// and checkInput keep their meaning within a Kiln minor version (0.x: a
// change comes with a new minor version and a note in docs/runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

struct SessionOptions {
  /// Capture the launch list into a graph on the first run and replay it on
  /// every run (when the device supports graphs; otherwise launch directly).
  /// When launch grids follow a symbolic dim (section launch-scales), one
  /// graph per size seen, the four most recently used kept. An artifact
  /// with device-side loops (format 1.12, control regions) is captured too
  /// where the device has conditional graph nodes (cuda with a 12.4 driver:
  /// each loop a WHILE node), and launched directly otherwise
  /// (docs/runtime.md "Device-side loops"; Session::deviceLoops).
  bool useGraph = false;
};

/// A dense tensor in host memory: numbers in `data`, or (format 1.9, a
/// model with STRING inputs or outputs) UTF-8 strings in `strings`, one per
/// element in C order, when `isString` is set (dtype is then unused).
struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data;
  bool isString = false;
  std::vector<std::string> strings;
};

/// Timings of `runs` benchmark runs, in milliseconds.
struct KernelTiming {
  std::string kernel;
  /// How many launches of this kernel one run makes.
  uint32_t launchesPerRun = 0;
  /// Per run: the time spent in this kernel's launches.
  std::vector<double> milliseconds;
};

/// One launch of the last kernel-by-kernel run: when it started, from the
/// event before the first launch, and how long it took (milliseconds).
struct LaunchTiming {
  double startMilliseconds = 0;
  double milliseconds = 0;
};

struct BenchmarkResult {
  /// Per run: the whole launch list, input upload excluded.
  std::vector<double> runMilliseconds;
  /// One entry per kernel that is launched, in launch-list order of first
  /// launch (measured in separate runs, events between launches).
  std::vector<KernelTiming> kernels;
  /// Per launch, in launch-list order: the last kernel-by-kernel run (for
  /// a trace).
  std::vector<LaunchTiming> launches;
  /// The device's energy over the timed runs (Device::energyMillijoules
  /// read before and after them) and the host time they took, so energy per
  /// run = energyJoules / runMilliseconds.size() and average power =
  /// energyJoules / energySeconds. Absent where the device has no counter;
  /// `energyUnavailable` then says why.
  std::optional<double> energyJoules;
  double energySeconds = 0;
  std::string energyUnavailable;
  /// Why `kernels` and `launches` are empty: an artifact with device-side
  /// loops (format 1.12, control regions) has its whole runs timed only,
  /// since how often each launch runs depends on the data. Empty when they
  /// were measured.
  std::string launchTimingsUnavailable;
};

/// Checks a host tensor against the artifact's input `name`: the name exists,
/// the dtype and shape match (a separable symbolic dim may be any size in
/// its range: checkInputShape in SymbolicDims.h), `size` is the tensor's
/// byte size. Errors name the tensor and both dtypes or shapes. Needs no
/// device.
Error checkInput(const Artifact &artifact, std::string_view name, DType dtype,
                 const Shape &shape, uint64_t size);

/// Work another engine queues between the launches of an entry point: the
/// NCCL engine's all-reduce of a gradient bucket, ordered on its own stream
/// after the launch that completes the bucket (Session::runEntryPoint).
class LaunchObserver {
public:
  virtual ~LaunchObserver();
  /// The entry point's launches are about to be queued on `stream`.
  virtual Error beforeLaunches(StreamHandle stream) {
    return Error::success();
  }
  /// Launch `index` (of the artifact's launch list) is queued on `stream`.
  virtual Error afterLaunch(uint32_t index, StreamHandle stream) = 0;
  /// Every launch is queued; the session waits for `stream` next.
  virtual Error beforeWait(StreamHandle stream) = 0;
};

class Session {
public:
  /// Allocates the arena and the weights, uploads the weights, loads every
  /// kernel and prepares every launch's parameters. Fails when the device's
  /// compute capability is below the artifact's target.
  static Expected<std::unique_ptr<Session>>
  create(std::shared_ptr<const Artifact> artifact,
         std::shared_ptr<Device> device, const SessionOptions &options = {});
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  const Artifact &artifact() const;
  Device &device();

  /// Copies a host tensor for input `name` (see checkInput); it is uploaded
  /// at the start of every run, since the memory plan may reuse its bytes.
  /// A symbolic dim (kilnc --dim) that the compiler proved separable may be
  /// any size in its range: the run pads the input to the compiled size with
  /// zeros and slices the outputs (inputs that share a symbol must agree).
  Error bindInput(std::string_view name, DType dtype, const Shape &shape,
                  const void *data, uint64_t size);
  /// Also binds the host inputs of an artifact with host steps (format
  /// 1.9): string tensors, and numbers only host steps read.
  Error bindInput(std::string_view name, const HostTensor &tensor);
  /// Format 1.9: binds sequence input `name` (kilnc --sequence name=N) to N
  /// tensors, each checked as bindInput checks name[i]. A wrong count is an
  /// error naming the input and the compiled length (SignatureGroups.h).
  Error bindSequence(std::string_view name,
                     const std::vector<HostTensor> &tensors);
  /// Binds input `name` to `size` bytes of this session's device memory at
  /// `data` (a tensor another library already holds on the same device). It
  /// is copied on the device at the start of every run, so it must stay
  /// valid until the last run that uses it.
  Error bindDeviceInput(std::string_view name, DType dtype, const Shape &shape,
                        DevicePtr data, uint64_t size);

  /// Runs the host steps that come before the launches (format 1.9),
  /// uploads the inputs, runs the launch list, waits for it, then runs the
  /// host steps that come after. Every input must be bound. An artifact with entry points runs them one at a time
  /// with runEntryPoint instead.
  Error run();

  /// Training artifacts (format 1.3): uploads the entry point's inputs (each
  /// must be bound), runs its launches, waits, then copies each state update
  /// over its state tensor. State starts at its initial value when the
  /// session is created and persists across runs.
  Error runEntryPoint(std::string_view name);
  /// As above, telling `observer` (when not null) of each launch as it is
  /// queued, and before waiting for them.
  Error runEntryPoint(std::string_view name, LaunchObserver *observer);
  /// Where output `name`'s bytes live in this session's device memory (the
  /// arena; every run rewrites them).
  Expected<DevicePtr> outputAddress(std::string_view name) const;
  /// A state tensor's current value, or replaces it (dtype, shape and size
  /// must match).
  Expected<HostTensor> readState(std::string_view name);
  Error writeState(std::string_view name, DType dtype, const Shape &shape,
                   const void *data, uint64_t size);

  /// The shape output `name` has after the last run: the compiled shape,
  /// or, for an artifact with symbolic dims (kilnc --dim) run at smaller
  /// sizes, the shape at those sizes (docs/runtime.md "Sizes at run time").
  Expected<Shape> outputShape(std::string_view name) const;
  /// The launches the last run queued, in order: every launch, less those
  /// a launch-guards record leaves out at the last run's sizes. With
  /// device-side loops (format 1.12, control regions), a loop body's
  /// launches once per iteration the run made; none when the loops ran in a
  /// graph (deviceLoops() "conditional graph nodes": the host does not see
  /// the iterations).
  std::vector<uint32_t> lastRunLaunches() const;
  /// How run() repeats the artifact's device-side loops (format 1.12;
  /// docs/runtime.md "Device-side loops"): "conditional graph nodes" (graph
  /// replay with conditional WHILE nodes: the device tests each flag), or
  /// "host-read flags (<why not in a graph>)" (the host reads each flag byte
  /// before every iteration). Empty when the artifact has no control
  /// regions. runEntryPoint always reads the flags on the host.
  const std::string &deviceLoops() const;
  /// An output of the last run, at the last run's sizes.
  Expected<HostTensor> readOutput(std::string_view name);
  /// Format 1.9: sequence output `name`'s tensors after the last run, in
  /// order (an absent optional sequence has none).
  Expected<std::vector<HostTensor>> readSequence(std::string_view name);
  /// Copies an output of the last run into `dst`, which holds `size` bytes
  /// (the output's byte size).
  Error readOutput(std::string_view name, void *dst, uint64_t size);
  /// Copies an output of the last run into `size` bytes of this session's
  /// device memory at `dst`, on the device (no host copy).
  Error readOutputToDevice(std::string_view name, DevicePtr dst, uint64_t size);

  /// `warmup` untimed runs, then `iterations` timed runs, then `iterations`
  /// runs timed kernel by kernel (not with device-side loops:
  /// BenchmarkResult::launchTimingsUnavailable).
  Expected<BenchmarkResult> benchmark(unsigned warmup, unsigned iterations);

private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_RUNTIME_H

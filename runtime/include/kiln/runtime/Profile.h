//===- Profile.h - Performance model, profiles and traces -------*- C++ -*-===//
//
// Turns what a launch did into what it would cost on a GPU, and reports it:
//
//   counters (emu, Device.h LaunchCounters) ─┐
//   kernel resources (artifact, ptxas -v) ───┼─▶ estimateLaunch ─▶ ProfileReport
//   target figures (runtime/targets/gpus.ini)┘                     │
//   measured times (cuda, BenchmarkResult) ──────────────────────▶ │
//                                   formatProfileTable / profileToJson / traceToJson
//
// The model is a roofline with an occupancy correction; docs/emulator.md
// ("Performance model") says how each term is computed. kilnc --stats uses
// estimateStatic, the same figures without counters.
//
// Stability: experimental: the performance model and the profile and
// trace formats change as the model is calibrated.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PROFILE_H
#define KILN_RUNTIME_PROFILE_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Error.h"
#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/TargetTable.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

struct Occupancy {
  uint32_t warpsPerBlock = 0;
  /// Blocks resident on one SM at a time.
  uint32_t blocksPerSm = 0;
  /// Resident warps / the SM's maximum.
  double theoretical = 0;
  /// What stops one more block: "warps", "registers", "shared memory",
  /// "blocks".
  std::string_view limiter;
};

/// The occupancy calculator: resident blocks per SM from the block's warps,
/// registers (`registersPerThread` 0: unknown, not a limit) and shared
/// memory (static + dynamic) against the target's per-SM limits. An error
/// when one block cannot fit at all.
Expected<Occupancy> computeOccupancy(const GpuTarget &target,
                                     uint32_t threadsPerBlock,
                                     uint32_t registersPerThread,
                                     uint32_t sharedBytesPerBlock);

/// The input type of a kernel's tensor-core instructions, which picks the
/// peak its MMA FLOPs run at.
enum class MmaType { Unknown, F16, BF16, TF32, I8 };
/// From the first mma.sync / wgmma in the PTX.
MmaType mmaTypeOfPtx(std::string_view ptx);
/// "f16", "bf16", "tf32", "int8", "" (unknown).
std::string_view mmaTypeName(MmaType type);

/// Counts of a sampled launch scaled to the whole grid (each by
/// blocksTotal / blocksRun; blocksRun becomes blocksTotal). Unsampled
/// counts come back unchanged.
LaunchCounters scaleSampledCounters(const LaunchCounters &counters);
/// The bytes of the arena buffers (the one live at the launch, where
/// buffers share an offset) and weights that launch `index` is passed.
uint64_t launchFootprintBytes(const Artifact &artifact, size_t index);
/// Shrinks the DRAM sectors of a scaled sample to the launch's footprint
/// (read and write alike): shared data a sampled block touches is not
/// touched again by every block the sample stands for.
void capDramAtFootprint(LaunchCounters &scaled, uint64_t footprintBytes);
/// Field-wise sum.
void addCounters(LaunchCounters &sum, const LaunchCounters &counters);

struct LaunchEstimate {
  Occupancy occupancy;
  uint64_t waves = 0;
  /// Average resident warps per SM over the launch / the SM's maximum:
  /// below the theoretical figure when the grid leaves SMs idle.
  double achievedOccupancy = 0;
  double memorySeconds = 0;
  double computeSeconds = 0;
  double issueSeconds = 0;
  double overheadSeconds = 0;
  /// max(memory, compute, issue) + overhead.
  double seconds = 0;
  /// "memory", "compute", "issue" or "launch" (the overhead dominates).
  std::string_view bound;
};

/// The estimated time of one launch on `target` (docs/emulator.md,
/// "Performance model"). `counters` should be scaled already
/// (scaleSampledCounters).
Expected<LaunchEstimate>
estimateLaunch(const GpuTarget &target, const LaunchCounters &counters,
               const LaunchConfig &config,
               const std::optional<KernelResources> &resources,
               MmaType mmaType);

struct StaticEstimate {
  double memorySeconds = 0;
  double computeSeconds = 0;
  double overheadSeconds = 0;
  double seconds = 0;
  std::string_view bound;
};

/// A roofline from what the compiler knows of a kernel: `bytes` moved at the
/// DRAM bandwidth, `flops` at the fp32 (non-tensor) peak, plus the launch
/// overhead. No occupancy, no coalescing: a lower bound for kilnc --stats.
StaticEstimate estimateStatic(const GpuTarget &target, uint64_t bytes,
                              uint64_t flops);

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

/// One row of the profile: every launch of one kernel, summed.
struct KernelProfile {
  std::string kernel;
  uint32_t launches = 0;
  LaunchConfig config;
  std::optional<KernelResources> resources;
  MmaType mmaType = MmaType::Unknown;
  /// Summed over the launches; sampled launches scaled to their grid.
  bool haveCounters = false;
  bool sampled = false;
  LaunchCounters counters;
  std::optional<Occupancy> occupancy;
  double achievedOccupancy = 0;
  /// Estimated time of all the launches; absent without counters (or when
  /// the kernel cannot fit the target, `estimateError` says why).
  std::optional<double> estimatedSeconds;
  std::string bound;
  std::string estimateError;
  /// Measured (cuda): the median over the runs of the time of all the
  /// launches in one run.
  std::optional<double> measuredSeconds;
};

/// One launch, for the trace.
struct LaunchSlice {
  uint32_t launch = 0;
  std::string kernel;
  uint64_t stream = 0;
  LaunchConfig config;
  double startMicros = 0;
  double durationMicros = 0;
  /// From the counters (estimate), when there are any.
  std::optional<uint64_t> dramBytes, globalBytesRequested, flops;
};

struct ProfileReport {
  /// "emu" or "cuda", and the device's name.
  std::string device;
  std::string deviceName;
  /// The target figures of the estimates (empty: none).
  std::string target;
  std::string targetDescription;
  /// "estimated" (emu: slices laid end to end) or "measured" (cuda events).
  std::string timeSource;
  /// cuda: how many runs the medians are over.
  unsigned measuredRuns = 0;
  /// The blocks per launch when sampled (0: every block ran).
  uint64_t sampleBlocks = 0;
  std::vector<KernelProfile> kernels;
  /// Every kernel summed (kernel "total").
  KernelProfile total;
  std::vector<LaunchSlice> launches;
};

/// The emu profile: one LaunchProfile per launch of one run of `artifact`,
/// estimated on `target`.
Expected<ProfileReport>
profileFromCounters(const Artifact &artifact,
                    const std::vector<LaunchProfile> &launches,
                    const GpuTarget &target, uint64_t sampleBlocks = 0);

/// The same for some launches of the list: `launches[i]` is a run of
/// launch `launchIndices[i]` (a training step's entry points); the slices
/// are laid end to end in that order.
Expected<ProfileReport>
profileFromCounters(const Artifact &artifact,
                    const std::vector<uint32_t> &launchIndices,
                    const std::vector<LaunchProfile> &launches,
                    const GpuTarget &target, uint64_t sampleBlocks = 0);

/// The cuda profile: per-kernel medians and the last run's launch times.
Expected<ProfileReport> profileFromBenchmark(const Artifact &artifact,
                                             const BenchmarkResult &benchmark,
                                             const DeviceInfo &device);

/// Puts the estimates of an emu profile (profileToJson's, read back with
/// parseProfileJson) beside the measured times, matching kernels by name
/// and launches by index. Fails when the profiles are of different models.
Error mergeEstimates(ProfileReport &measured, const ProfileReport &estimated);

/// Reads profileToJson's output back (enough of it for mergeEstimates).
Expected<ProfileReport> parseProfileJson(std::string_view text,
                                         std::string_view source);
Expected<ProfileReport> readProfileJson(const std::string &path);

/// The table kiln-run --profile prints: one row per kernel and a total.
std::string formatProfileTable(const ProfileReport &report);
/// The same as JSON (kiln-run --profile-json), one object per kernel.
std::string profileToJson(const ProfileReport &report);
/// Chrome trace-event JSON: one complete ("X") slice per launch, one track
/// per stream (kiln-run --trace; opens in Perfetto or chrome://tracing).
std::string traceToJson(const ProfileReport &report);

//===----------------------------------------------------------------------===//
// Training step timelines (kiln-train --trace)
//===----------------------------------------------------------------------===//

/// The ring all-reduce cost model: N ranks in a ring, each link
/// `bandwidthGBps` (GB/s, 1e9 bytes) and `latencyMicros` per step.
struct RingModel {
  uint32_t ranks = 1;
  double bandwidthGBps = 0;
  double latencyMicros = 0;
};

/// 2(N-1)/N x bytes / bandwidth + latency x 2(N-1), in microseconds: the
/// reduce-scatter and all-gather halves of a ring all-reduce, each N-1
/// steps that move bytes/N. 0 for one rank.
double ringAllReduceMicros(const RingModel &ring, uint64_t bytes);

/// One slice of a training step's timeline.
struct StepSlice {
  /// "compute" or "collectives".
  std::string track;
  std::string name;
  /// The launch (compute) or the collective step (collectives).
  uint32_t index = 0;
  double startMicros = 0;
  double durationMicros = 0;
  /// Collectives: the bytes on the wire, the elements, the launch after
  /// which the bucket is complete.
  uint64_t bytes = 0, elements = 0;
  uint32_t afterLaunch = 0;
  /// Compute: the entry point ("train_step", "train_update").
  std::string entry;
};

struct StepTimeline {
  /// "modelled" (emu: the performance model and the ring model) or
  /// "measured" (cuda events).
  std::string timeSource;
  /// What the times are of ("sm_90-h200", "NVIDIA H200").
  std::string subject;
  RingModel ring;
  std::vector<StepSlice> slices;
};

/// The modelled timeline of one step of a training artifact on emu: each
/// launch of train_step, then train_update (`launches`: one counted run of
/// each, in that order) takes its estimated time on `target`, one after
/// another on the compute track; collective step i starts when its
/// afterLaunch launch has ended and step i-1 has finished, and lasts
/// ringAllReduceMicros of its wire bytes (4 per element; 2 for the bf16
/// and f16 wires; PowerSGD modelled uncompressed, an upper bound);
/// train_update starts after train_step's last launch and the last
/// collective. docs/runtime.md "The step timeline".
Expected<StepTimeline>
modelStepTimeline(const Artifact &artifact,
                  const std::vector<LaunchProfile> &launches,
                  const GpuTarget &target, const RingModel &ring);

/// Chrome trace-event JSON of a step: a "compute" and a "collectives"
/// track, every slice labelled with its time source.
std::string stepTimelineToJson(const StepTimeline &timeline);

/// Writes `text` to `path` through a temporary file and a rename: never a
/// half-written file.
Error writeTextFile(const std::string &path, std::string_view text);
/// Fails, as writeTextFile would, when `path` cannot be written (its
/// directory is missing or read-only); leaves nothing behind.
Error checkWritable(const std::string &path);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_PROFILE_H

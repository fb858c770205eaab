//===- Profile.cpp - Performance model, profiles and traces ---------------===//
//
// The model (docs/emulator.md, "Performance model"):
//
//   occupancy  resident blocks per SM from warps, registers and shared
//              memory against the target's limits (the occupancy calculator);
//   waves      ceil(blocks / (blocks per SM x SMs));
//   achieved   blocks x warps per block / (waves x SMs x max warps per SM);
//   memory     DRAM bytes (sectors x 32) / (bandwidth x min(1, achieved /
//              occupancy_for_peak_bandwidth));
//   compute    (MMA FLOPs / tensor peak of the MMA type + FMA FLOPs / fp32
//              peak) / min(1, achieved / occupancy_for_peak_compute);
//   issue      warp-instructions / (SMs x schedulers x clock), slowed the
//              same way when fewer warps than schedulers are resident;
//   time       max(memory, compute, issue) + launch overhead.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Profile.h"

#include "Support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

namespace {
uint64_t roundUp(uint64_t value, uint64_t unit) {
  return unit ? (value + unit - 1) / unit * unit : value;
}
uint64_t blockCount(const Dim3 &grid) {
  return uint64_t(grid.x) * grid.y * grid.z;
}
uint64_t threadCount(const Dim3 &block) {
  return uint64_t(block.x) * block.y * block.z;
}
} // namespace

Expected<Occupancy> computeOccupancy(const GpuTarget &target,
                                     uint32_t threadsPerBlock,
                                     uint32_t registersPerThread,
                                     uint32_t sharedBytesPerBlock) {
  if (threadsPerBlock == 0 || threadsPerBlock > target.maxThreadsPerBlock)
    return makeError("a block of {} threads does not fit {} (at most {})",
                     threadsPerBlock, target.name, target.maxThreadsPerBlock);
  if (registersPerThread > target.maxRegistersPerThread)
    return makeError("{} registers per thread is more than {} allows ({})",
                     registersPerThread, target.name,
                     target.maxRegistersPerThread);
  if (sharedBytesPerBlock > target.maxSharedBytesPerBlock)
    return makeError("a block needs {} bytes of shared memory; {} allows {}",
                     sharedBytesPerBlock, target.name,
                     target.maxSharedBytesPerBlock);
  Occupancy occupancy;
  occupancy.warpsPerBlock = (threadsPerBlock + 31) / 32;
  struct Limit {
    std::string_view name;
    uint64_t blocks;
  };
  std::vector<Limit> limits;
  limits.push_back({"warps", target.maxWarpsPerSm / occupancy.warpsPerBlock});
  if (registersPerThread > 0) {
    // Registers are allocated per warp, in units of the allocation size.
    uint64_t perWarp =
        roundUp(uint64_t(registersPerThread) * 32, target.registerAllocationUnit);
    uint64_t perBlock = perWarp * occupancy.warpsPerBlock;
    if (perBlock > target.registersPerSm)
      return makeError("a block needs {} registers; an SM of {} has {}",
                       perBlock, target.name, target.registersPerSm);
    limits.push_back({"registers", target.registersPerSm / perBlock});
  }
  uint64_t sharedPerBlock =
      roundUp(uint64_t(sharedBytesPerBlock) + target.reservedSharedBytesPerBlock,
              target.sharedAllocationUnit);
  if (sharedPerBlock > 0)
    limits.push_back(
        {"shared memory", target.sharedBytesPerSm / sharedPerBlock});
  limits.push_back({"blocks", target.maxBlocksPerSm});
  const Limit *tightest = &limits.front();
  for (const Limit &limit : limits)
    if (limit.blocks < tightest->blocks)
      tightest = &limit;
  if (tightest->blocks == 0)
    return makeError("no block fits an SM of {}: limited by {}", target.name,
                     tightest->name);
  occupancy.blocksPerSm = static_cast<uint32_t>(tightest->blocks);
  occupancy.limiter = tightest->name;
  occupancy.theoretical = double(occupancy.blocksPerSm) *
                          occupancy.warpsPerBlock / target.maxWarpsPerSm;
  return occupancy;
}

MmaType mmaTypeOfPtx(std::string_view ptx) {
  for (std::string_view opcode : {"mma.sync", "wgmma.mma_async"}) {
    size_t at = ptx.find(opcode);
    if (at == std::string_view::npos)
      continue;
    // The operand types follow the shape in the same instruction, e.g.
    // mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32.
    std::string_view instruction =
        ptx.substr(at, ptx.find_first_of(" \t", at) - at);
    if (instruction.find(".tf32") != std::string_view::npos)
      return MmaType::TF32;
    if (instruction.find(".bf16") != std::string_view::npos)
      return MmaType::BF16;
    if (instruction.find(".f16") != std::string_view::npos)
      return MmaType::F16;
  }
  return MmaType::Unknown;
}

std::string_view mmaTypeName(MmaType type) {
  switch (type) {
  case MmaType::F16:
    return "f16";
  case MmaType::BF16:
    return "bf16";
  case MmaType::TF32:
    return "tf32";
  case MmaType::Unknown:
    break;
  }
  return "";
}

namespace {
/// Every additive field of LaunchCounters, for scaling and summing.
constexpr uint64_t LaunchCounters::*kAdditiveCounters[] = {
    &LaunchCounters::threadInstructions,
    &LaunchCounters::warpInstructions,
    &LaunchCounters::fmaInstructions,
    &LaunchCounters::mmaInstructions,
    &LaunchCounters::loadStoreInstructions,
    &LaunchCounters::shuffleInstructions,
    &LaunchCounters::otherInstructions,
    &LaunchCounters::fmaFlops,
    &LaunchCounters::mmaFlops,
    &LaunchCounters::globalAccesses,
    &LaunchCounters::globalBytesRequested,
    &LaunchCounters::globalSectors,
    &LaunchCounters::dramReadSectors,
    &LaunchCounters::dramWriteSectors,
    &LaunchCounters::sharedAccesses,
    &LaunchCounters::sharedBankConflictReplays,
};
} // namespace

LaunchCounters scaleSampledCounters(const LaunchCounters &counters) {
  if (counters.blocksRun == 0 || counters.blocksRun >= counters.blocksTotal)
    return counters;
  LaunchCounters scaled = counters;
  double factor = double(counters.blocksTotal) / double(counters.blocksRun);
  for (uint64_t LaunchCounters::*field : kAdditiveCounters)
    scaled.*field =
        static_cast<uint64_t>(std::llround(double(counters.*field) * factor));
  scaled.blocksRun = counters.blocksTotal;
  return scaled;
}

uint64_t launchFootprintBytes(const Artifact &artifact, size_t index) {
  const Launch &launch = artifact.launches[index];
  const Kernel &kernel = artifact.kernels[launch.kernel];
  uint64_t bytes = 0;
  for (size_t p = 0; p < kernel.params.size() && p < launch.args.size(); ++p) {
    uint64_t offset = launch.args[p];
    if (kernel.params[p].kind == ParamKind::ArenaPointer) {
      // Buffers share offsets over time: the one live at this launch.
      for (const ArenaBuffer &buffer : artifact.memoryPlan.buffers)
        if (buffer.offset == offset && buffer.firstUse <= index &&
            index <= buffer.lastUse) {
          bytes += buffer.size;
          break;
        }
    } else if (kernel.params[p].kind == ParamKind::WeightsPointer) {
      for (const Weight &weight : artifact.weights)
        if (weight.offset == offset) {
          uint64_t elements = 1;
          for (int64_t d : weight.shape)
            elements *= static_cast<uint64_t>(d);
          bytes += elements * dtypeSize(weight.dtype);
          break;
        }
    }
  }
  return bytes;
}

void capDramAtFootprint(LaunchCounters &scaled, uint64_t footprintBytes) {
  uint64_t cap = (footprintBytes + 31) / 32;
  uint64_t total = scaled.dramReadSectors + scaled.dramWriteSectors;
  if (!cap || total <= cap)
    return;
  double shrink = double(cap) / double(total);
  scaled.dramReadSectors =
      static_cast<uint64_t>(std::llround(scaled.dramReadSectors * shrink));
  scaled.dramWriteSectors =
      static_cast<uint64_t>(std::llround(scaled.dramWriteSectors * shrink));
}

void addCounters(LaunchCounters &sum, const LaunchCounters &counters) {
  for (uint64_t LaunchCounters::*field : kAdditiveCounters)
    sum.*field += counters.*field;
  sum.blocksTotal += counters.blocksTotal;
  sum.blocksRun += counters.blocksRun;
}

namespace {
double tensorPeakTflops(const GpuTarget &target, MmaType type) {
  switch (type) {
  case MmaType::F16:
    return target.fp16Tflops;
  case MmaType::TF32:
    return target.tf32Tflops;
  case MmaType::BF16:
  case MmaType::Unknown: // the common case for Kiln's tensor-core kernels
    break;
  }
  return target.bf16Tflops;
}
} // namespace

Expected<LaunchEstimate>
estimateLaunch(const GpuTarget &target, const LaunchCounters &counters,
               const LaunchConfig &config,
               const std::optional<KernelResources> &resources,
               MmaType mmaType) {
  uint32_t registers = resources ? resources->registersPerThread : 0;
  uint64_t shared = uint64_t(config.dynamicSharedBytes) +
                    (resources ? resources->staticSharedBytes : 0);
  Expected<Occupancy> occupancy = computeOccupancy(
      target, static_cast<uint32_t>(threadCount(config.block)), registers,
      static_cast<uint32_t>(std::min<uint64_t>(shared, UINT32_MAX)));
  if (!occupancy)
    return occupancy.takeError();
  LaunchEstimate estimate;
  estimate.occupancy = *occupancy;
  uint64_t blocks =
      counters.blocksTotal ? counters.blocksTotal : blockCount(config.grid);
  uint64_t slots = uint64_t(occupancy->blocksPerSm) * target.smCount;
  estimate.waves = (blocks + slots - 1) / slots;
  estimate.achievedOccupancy =
      estimate.waves == 0
          ? 0
          : double(blocks) * occupancy->warpsPerBlock /
                (double(estimate.waves) * target.smCount *
                 target.maxWarpsPerSm);

  // Too few resident warps cannot hide latency: the rate falls in
  // proportion below the figure the target table gives.
  double achieved = std::max(estimate.achievedOccupancy, 1e-9);
  double bandwidthScale =
      std::min(1.0, achieved / target.occupancyForPeakBandwidth);
  double computeScale = std::min(1.0, achieved / target.occupancyForPeakCompute);
  double issueScale =
      std::min(1.0, achieved * target.maxWarpsPerSm / target.schedulersPerSm);

  double dramBytes =
      double(counters.dramReadSectors + counters.dramWriteSectors) * 32;
  estimate.memorySeconds =
      dramBytes / (target.dramBandwidthGBps * 1e9 * bandwidthScale);
  double tensorPeak = tensorPeakTflops(target, mmaType);
  double mmaSeconds =
      counters.mmaFlops == 0
          ? 0
          : double(counters.mmaFlops) /
                ((tensorPeak > 0 ? tensorPeak : target.fp32Tflops) * 1e12);
  double fmaSeconds = double(counters.fmaFlops) / (target.fp32Tflops * 1e12);
  estimate.computeSeconds = (mmaSeconds + fmaSeconds) / computeScale;
  estimate.issueSeconds =
      double(counters.warpInstructions) /
      (double(target.smCount) * target.schedulersPerSm * target.clockGhz *
       1e9) /
      issueScale;
  estimate.overheadSeconds = target.launchOverheadUs * 1e-6;

  double longest = estimate.memorySeconds;
  estimate.bound = "memory";
  if (estimate.computeSeconds > longest) {
    longest = estimate.computeSeconds;
    estimate.bound = "compute";
  }
  if (estimate.issueSeconds > longest) {
    longest = estimate.issueSeconds;
    estimate.bound = "issue";
  }
  if (estimate.overheadSeconds > longest)
    estimate.bound = "launch";
  estimate.seconds = longest + estimate.overheadSeconds;
  return estimate;
}

StaticEstimate estimateStatic(const GpuTarget &target, uint64_t bytes,
                              uint64_t flops) {
  StaticEstimate estimate;
  estimate.memorySeconds = double(bytes) / (target.dramBandwidthGBps * 1e9);
  estimate.computeSeconds = double(flops) / (target.fp32Tflops * 1e12);
  estimate.overheadSeconds = target.launchOverheadUs * 1e-6;
  double longest = std::max(estimate.memorySeconds, estimate.computeSeconds);
  estimate.bound =
      estimate.memorySeconds >= estimate.computeSeconds ? "memory" : "compute";
  if (estimate.overheadSeconds > longest)
    estimate.bound = "launch";
  estimate.seconds = longest + estimate.overheadSeconds;
  return estimate;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

namespace {

uint64_t dramBytesOf(const LaunchCounters &counters) {
  return (counters.dramReadSectors + counters.dramWriteSectors) * 32;
}

/// A row per kernel, in order of first launch; `rowOf[k]` for kernel k.
std::vector<KernelProfile> rowsFor(const Artifact &artifact,
                                   std::vector<size_t> &rowOf) {
  std::vector<KernelProfile> rows;
  rowOf.assign(artifact.kernels.size(), SIZE_MAX);
  for (const Launch &launch : artifact.launches) {
    if (rowOf[launch.kernel] == SIZE_MAX) {
      rowOf[launch.kernel] = rows.size();
      const Kernel &kernel = artifact.kernels[launch.kernel];
      KernelProfile row;
      row.kernel = kernel.name;
      row.config = {kernel.grid, kernel.block, kernel.dynamicSharedBytes};
      row.resources = kernel.resources;
      row.mmaType = mmaTypeOfPtx(kernel.ptx);
      rows.push_back(std::move(row));
    }
    ++rows[rowOf[launch.kernel]].launches;
  }
  return rows;
}

void sumTotal(ProfileReport &report) {
  KernelProfile &total = report.total;
  total = KernelProfile();
  total.kernel = "total";
  bool allEstimated = !report.kernels.empty(), allMeasured = allEstimated;
  double estimated = 0, measured = 0;
  for (const KernelProfile &row : report.kernels) {
    total.launches += row.launches;
    total.haveCounters |= row.haveCounters;
    total.sampled |= row.sampled;
    addCounters(total.counters, row.counters);
    allEstimated &= row.estimatedSeconds.has_value();
    allMeasured &= row.measuredSeconds.has_value();
    estimated += row.estimatedSeconds.value_or(0);
    measured += row.measuredSeconds.value_or(0);
  }
  if (allEstimated)
    total.estimatedSeconds = estimated;
  if (allMeasured)
    total.measuredSeconds = measured;
}

} // namespace

Expected<ProfileReport>
profileFromCounters(const Artifact &artifact,
                    const std::vector<LaunchProfile> &launches,
                    const GpuTarget &target, uint64_t sampleBlocks) {
  if (launches.size() != artifact.launches.size())
    return makeError("profile: the device recorded {} launches for a launch "
                     "list of {}",
                     launches.size(), artifact.launches.size());
  ProfileReport report;
  report.device = "emu";
  report.deviceName = "Kiln PTX emulator";
  report.target = target.name;
  report.targetDescription = target.description;
  report.timeSource = "estimated";
  report.sampleBlocks = sampleBlocks;
  std::vector<size_t> rowOf;
  report.kernels = rowsFor(artifact, rowOf);
  double clock = 0;
  for (size_t i = 0; i < launches.size(); ++i) {
    const LaunchProfile &profile = launches[i];
    const Launch &launch = artifact.launches[i];
    const Kernel &kernel = artifact.kernels[launch.kernel];
    if (profile.kernel != kernel.name)
      return makeError("profile: launch {} ran kernel '{}' where the launch "
                       "list has '{}'",
                       i, profile.kernel, kernel.name);
    KernelProfile &row = report.kernels[rowOf[launch.kernel]];
    LaunchCounters counters = scaleSampledCounters(profile.counters);
    // A sample's distinct sectors include data every block shares (a
    // filter, a weight matrix), which scaling counts once per block: a
    // launch moves at most the buffers it is passed.
    if (profile.counters.blocksRun < profile.counters.blocksTotal)
      capDramAtFootprint(counters, launchFootprintBytes(artifact, i));
    row.haveCounters = true;
    row.sampled |= profile.counters.blocksRun < profile.counters.blocksTotal;
    addCounters(row.counters, counters);

    LaunchSlice slice;
    slice.launch = static_cast<uint32_t>(i);
    slice.kernel = kernel.name;
    slice.stream = profile.stream;
    slice.config = profile.config;
    slice.dramBytes = dramBytesOf(counters);
    slice.globalBytesRequested = counters.globalBytesRequested;
    slice.flops = counters.fmaFlops + counters.mmaFlops;
    Expected<LaunchEstimate> estimate = estimateLaunch(
        target, counters, profile.config, kernel.resources, row.mmaType);
    if (estimate) {
      row.occupancy = estimate->occupancy;
      row.achievedOccupancy = estimate->achievedOccupancy;
      if (row.estimateError.empty())
        row.estimatedSeconds =
            row.estimatedSeconds.value_or(0) + estimate->seconds;
      row.bound = std::string(estimate->bound);
      slice.startMicros = clock;
      slice.durationMicros = estimate->seconds * 1e6;
      clock += slice.durationMicros; // laid end to end
    } else {
      row.estimateError = estimate.error().message();
      row.estimatedSeconds.reset();
      slice.startMicros = clock;
    }
    report.launches.push_back(std::move(slice));
  }
  sumTotal(report);
  return report;
}

Expected<ProfileReport> profileFromBenchmark(const Artifact &artifact,
                                             const BenchmarkResult &benchmark,
                                             const DeviceInfo &device) {
  ProfileReport report;
  report.device = device.kind;
  report.deviceName = device.name;
  report.timeSource = "measured";
  report.measuredRuns = static_cast<unsigned>(benchmark.runMilliseconds.size());
  std::vector<size_t> rowOf;
  report.kernels = rowsFor(artifact, rowOf);
  for (const KernelTiming &timing : benchmark.kernels) {
    auto row = std::find_if(
        report.kernels.begin(), report.kernels.end(),
        [&](const KernelProfile &r) { return r.kernel == timing.kernel; });
    if (row == report.kernels.end() || timing.milliseconds.empty())
      continue;
    std::vector<double> sorted = timing.milliseconds;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    double median =
        n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    row->measuredSeconds = median / 1000.0;
  }
  if (!benchmark.launches.empty() &&
      benchmark.launches.size() != artifact.launches.size())
    return makeError("profile: {} launch timings for a launch list of {}",
                     benchmark.launches.size(), artifact.launches.size());
  for (size_t i = 0; i < benchmark.launches.size(); ++i) {
    const Kernel &kernel = artifact.kernels[artifact.launches[i].kernel];
    LaunchSlice slice;
    slice.launch = static_cast<uint32_t>(i);
    slice.kernel = kernel.name;
    slice.stream = 1; // a session queues everything on its one stream
    slice.config = {kernel.grid, kernel.block, kernel.dynamicSharedBytes};
    slice.startMicros = benchmark.launches[i].startMilliseconds * 1000.0;
    slice.durationMicros = benchmark.launches[i].milliseconds * 1000.0;
    report.launches.push_back(std::move(slice));
  }
  sumTotal(report);
  return report;
}

Error mergeEstimates(ProfileReport &measured, const ProfileReport &estimated) {
  for (KernelProfile &row : measured.kernels) {
    auto match = std::find_if(
        estimated.kernels.begin(), estimated.kernels.end(),
        [&](const KernelProfile &e) { return e.kernel == row.kernel; });
    if (match == estimated.kernels.end())
      return makeError("the estimate has no kernel '{}': it was made for "
                       "another model",
                       row.kernel);
    if (match->launches != row.launches)
      return makeError("the estimate has {} launches of kernel '{}' where "
                       "this model has {}",
                       match->launches, row.kernel, row.launches);
    row.haveCounters = match->haveCounters;
    row.sampled = match->sampled;
    row.counters = match->counters;
    row.occupancy = match->occupancy;
    row.achievedOccupancy = match->achievedOccupancy;
    row.estimatedSeconds = match->estimatedSeconds;
    row.bound = match->bound;
    row.estimateError = match->estimateError;
  }
  for (LaunchSlice &slice : measured.launches)
    if (slice.launch < estimated.launches.size() &&
        estimated.launches[slice.launch].kernel == slice.kernel) {
      const LaunchSlice &source = estimated.launches[slice.launch];
      slice.dramBytes = source.dramBytes;
      slice.globalBytesRequested = source.globalBytesRequested;
      slice.flops = source.flops;
    }
  measured.target = estimated.target;
  measured.targetDescription = estimated.targetDescription;
  measured.sampleBlocks = estimated.sampleBlocks;
  sumTotal(measured);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Text and JSON
//===----------------------------------------------------------------------===//

namespace {

/// 1234567 -> "1.23M"; below 10000 exact.
std::string compact(double value) {
  if (value < 10000)
    return fmt::format("{}", static_cast<uint64_t>(std::llround(value)));
  const char *suffixes[] = {"k", "M", "G", "T", "P", "E"};
  int index = -1;
  while (value >= 1000 && index < 5) {
    value /= 1000;
    ++index;
  }
  return fmt::format(value < 100 ? "{:.2f}{}" : "{:.1f}{}", value,
                     suffixes[index]);
}

std::string dims(const Dim3 &d) { return fmt::format("{}x{}x{}", d.x, d.y, d.z); }

std::string micros(std::optional<double> seconds) {
  return seconds ? fmt::format("{:.2f}", *seconds * 1e6) : "-";
}

std::vector<std::string> rowCells(const KernelProfile &row, bool isTotal) {
  const LaunchCounters &c = row.counters;
  bool counted = row.haveCounters;
  auto count = [&](uint64_t value) {
    return counted ? compact(double(value)) : std::string("-");
  };
  std::string coalesced = "-";
  if (counted && c.globalSectors > 0)
    coalesced = fmt::format("{:.0f}%", 100.0 * double(c.globalBytesRequested) /
                                           (double(c.globalSectors) * 32));
  std::string occupancy = "-";
  if (!isTotal && row.occupancy)
    occupancy = fmt::format("{:.0f}%/{:.0f}%", 100 * row.occupancy->theoretical,
                            100 * row.achievedOccupancy);
  std::string regs = "-", smem = "-";
  if (!isTotal && row.resources) {
    regs = fmt::format("{}", row.resources->registersPerThread);
    smem = fmt::format("{}", row.resources->staticSharedBytes +
                                 row.config.dynamicSharedBytes);
  } else if (!isTotal && row.config.dynamicSharedBytes) {
    smem = fmt::format("{}+?", row.config.dynamicSharedBytes);
  }
  std::string estimate = micros(row.estimatedSeconds);
  if (!row.estimateError.empty())
    estimate = "n/a";
  return {
      row.kernel + (row.sampled ? "*" : ""),
      fmt::format("{}", row.launches),
      isTotal ? "" : dims(row.config.grid),
      isTotal ? "" : dims(row.config.block),
      regs,
      smem,
      count(c.threadInstructions),
      count(c.fmaInstructions),
      count(c.mmaInstructions),
      count(c.loadStoreInstructions),
      count(c.shuffleInstructions),
      count(c.otherInstructions),
      count(c.mmaFlops),
      count(c.fmaFlops),
      count(c.globalBytesRequested),
      count(c.globalSectors),
      coalesced,
      count(dramBytesOf(c)),
      count(c.sharedBankConflictReplays),
      occupancy,
      estimate,
      isTotal ? "" : (row.bound.empty() ? "-" : row.bound),
      micros(row.measuredSeconds),
  };
}

} // namespace

std::string formatProfileTable(const ProfileReport &report) {
  std::string text;
  if (report.timeSource == "measured")
    text += fmt::format("profile: {} ({}), measured with events around each "
                        "launch, median of {} runs",
                        report.device, report.deviceName, report.measuredRuns);
  else
    text += fmt::format("profile: {}, counted by the emulator", report.device);
  if (!report.target.empty())
    text += fmt::format("; estimate for {} ({})", report.target,
                        report.targetDescription);
  text += "\n";
  if (report.sampleBlocks)
    text += fmt::format("  sampled: {} blocks per launch, counts of kernels "
                        "marked * scaled to the whole grid\n",
                        report.sampleBlocks);
  const LaunchCounters &t = report.total.counters;
  if (report.total.haveCounters && t.threadInstructions > 0 &&
      t.fmaInstructions + t.mmaInstructions + t.loadStoreInstructions +
              t.shuffleInstructions + t.otherInstructions ==
          0)
    text += "  note: the emulator reported instruction totals only (no "
            "classes, FLOPs or memory counts): estimates are issue-bound\n";
  std::vector<std::vector<std::string>> table = {
      {"kernel", "launches", "grid", "block", "regs", "smem", "thr-instr",
       "fma", "mma", "ld/st", "shfl", "other", "mma-flop", "fma-flop",
       "gl-bytes", "sectors", "coalesced", "dram-bytes", "bank-repl",
       "occupancy", "est-us", "bound", "meas-us"}};
  for (const KernelProfile &row : report.kernels)
    table.push_back(rowCells(row, false));
  table.push_back(rowCells(report.total, true));
  std::vector<size_t> widths(table.front().size(), 0);
  for (const auto &cells : table)
    for (size_t c = 0; c < cells.size(); ++c)
      widths[c] = std::max(widths[c], cells[c].size());
  for (const auto &cells : table) {
    std::string line = " ";
    for (size_t c = 0; c < cells.size(); ++c)
      line += c == 0 ? fmt::format(" {:<{}}", cells[c], widths[c])
                     : fmt::format("  {:>{}}", cells[c], widths[c]);
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    text += line + "\n";
  }
  for (const KernelProfile &row : report.kernels)
    if (!row.estimateError.empty())
      text += fmt::format("  {}: no estimate: {}\n", row.kernel,
                          row.estimateError);
  text += "  (occupancy: theoretical/achieved; est-us: the estimate of all "
          "launches, docs/emulator.md \"Performance model\")\n";
  return text;
}

namespace {

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  return fmt::format("{}", value);
}

std::string jsonOptional(std::optional<double> value) {
  return value ? jsonNumber(*value) : "null";
}

std::string jsonDims(const Dim3 &d) {
  return fmt::format("[{}, {}, {}]", d.x, d.y, d.z);
}

std::string kernelJson(const KernelProfile &row) {
  const LaunchCounters &c = row.counters;
  std::string json = "{";
  json += fmt::format("\"kernel\": {}, \"launches\": {}, \"grid\": {}, "
                      "\"block\": {}, \"dynamic_shared_bytes\": {}",
                      jsonString(row.kernel), row.launches,
                      jsonDims(row.config.grid), jsonDims(row.config.block),
                      row.config.dynamicSharedBytes);
  if (row.resources)
    json += fmt::format(", \"registers\": {}, \"static_shared_bytes\": {}, "
                        "\"stack_frame_bytes\": {}, \"spill_store_bytes\": {}, "
                        "\"spill_load_bytes\": {}",
                        row.resources->registersPerThread,
                        row.resources->staticSharedBytes,
                        row.resources->stackFrameBytes,
                        row.resources->spillStoreBytes,
                        row.resources->spillLoadBytes);
  else
    json += ", \"registers\": null, \"static_shared_bytes\": null";
  json += fmt::format(", \"mma_type\": {}", jsonString(mmaTypeName(row.mmaType)));
  if (row.haveCounters) {
    json += fmt::format(
        ", \"sampled\": {}, \"thread_instructions\": {}, "
        "\"warp_instructions\": {}, \"fma_instructions\": {}, "
        "\"mma_instructions\": {}, \"load_store_instructions\": {}, "
        "\"shuffle_instructions\": {}, \"other_instructions\": {}, "
        "\"fma_flops\": {}, \"mma_flops\": {}, \"global_accesses\": {}, "
        "\"global_bytes_requested\": {}, \"global_sectors\": {}, "
        "\"coalescing_efficiency\": {}, \"dram_read_sectors\": {}, "
        "\"dram_write_sectors\": {}, \"dram_bytes\": {}, "
        "\"shared_accesses\": {}, \"shared_bank_conflict_replays\": {}, "
        "\"blocks_total\": {}, \"blocks_run\": {}",
        row.sampled ? "true" : "false", c.threadInstructions,
        c.warpInstructions, c.fmaInstructions, c.mmaInstructions,
        c.loadStoreInstructions, c.shuffleInstructions, c.otherInstructions,
        c.fmaFlops, c.mmaFlops, c.globalAccesses, c.globalBytesRequested,
        c.globalSectors,
        c.globalSectors ? jsonNumber(double(c.globalBytesRequested) /
                                     (double(c.globalSectors) * 32))
                        : "null",
        c.dramReadSectors, c.dramWriteSectors, dramBytesOf(c),
        c.sharedAccesses, c.sharedBankConflictReplays, c.blocksTotal,
        c.blocksRun);
  }
  if (row.occupancy)
    json += fmt::format(", \"blocks_per_sm\": {}, \"occupancy\": {}, "
                        "\"occupancy_limiter\": {}, \"achieved_occupancy\": {}",
                        row.occupancy->blocksPerSm,
                        jsonNumber(row.occupancy->theoretical),
                        jsonString(row.occupancy->limiter),
                        jsonNumber(row.achievedOccupancy));
  json += fmt::format(", \"estimated_us\": {}, \"bound\": {}",
                      jsonOptional(row.estimatedSeconds
                                       ? std::optional<double>(
                                             *row.estimatedSeconds * 1e6)
                                       : std::nullopt),
                      row.bound.empty() ? "null" : jsonString(row.bound));
  if (!row.estimateError.empty())
    json += fmt::format(", \"estimate_error\": {}",
                        jsonString(row.estimateError));
  json += fmt::format(", \"measured_us\": {}}}",
                      jsonOptional(row.measuredSeconds
                                       ? std::optional<double>(
                                             *row.measuredSeconds * 1e6)
                                       : std::nullopt));
  return json;
}

std::string sliceArgs(const LaunchSlice &slice) {
  std::string args = fmt::format(
      "\"launch\": {}, \"grid\": {}, \"block\": {}, "
      "\"dynamic_shared_bytes\": {}",
      slice.launch, jsonDims(slice.config.grid), jsonDims(slice.config.block),
      slice.config.dynamicSharedBytes);
  if (slice.dramBytes)
    args += fmt::format(", \"dram_bytes\": {}", *slice.dramBytes);
  if (slice.globalBytesRequested)
    args += fmt::format(", \"global_bytes_requested\": {}",
                        *slice.globalBytesRequested);
  if (slice.flops)
    args += fmt::format(", \"flops\": {}", *slice.flops);
  return args;
}

} // namespace

std::string profileToJson(const ProfileReport &report) {
  std::string json = "{\n";
  json += fmt::format("  \"format\": \"kiln-profile\", \"version\": 1,\n"
                      "  \"device\": {}, \"device_name\": {},\n"
                      "  \"target\": {}, \"target_description\": {},\n"
                      "  \"time_source\": {}, \"measured_runs\": {}, "
                      "\"sample_blocks\": {},\n",
                      jsonString(report.device), jsonString(report.deviceName),
                      jsonString(report.target),
                      jsonString(report.targetDescription),
                      jsonString(report.timeSource), report.measuredRuns,
                      report.sampleBlocks);
  json += "  \"kernels\": [\n";
  for (size_t i = 0; i < report.kernels.size(); ++i)
    json += "    " + kernelJson(report.kernels[i]) +
            (i + 1 < report.kernels.size() ? ",\n" : "\n");
  json += "  ],\n  \"total\": " + kernelJson(report.total) + ",\n";
  json += "  \"launches\": [\n";
  for (size_t i = 0; i < report.launches.size(); ++i) {
    const LaunchSlice &slice = report.launches[i];
    json += fmt::format("    {{\"kernel\": {}, \"stream\": {}, \"start_us\": "
                        "{}, \"duration_us\": {}, {}}}{}\n",
                        jsonString(slice.kernel), slice.stream,
                        jsonNumber(slice.startMicros),
                        jsonNumber(slice.durationMicros), sliceArgs(slice),
                        i + 1 < report.launches.size() ? "," : "");
  }
  json += "  ]\n}\n";
  return json;
}

std::string traceToJson(const ProfileReport &report) {
  std::string process =
      report.timeSource == "measured"
          ? fmt::format("kiln {} ({}), measured", report.device,
                        report.deviceName)
          : fmt::format("kiln {}, estimated for {}", report.device,
                        report.target);
  std::vector<std::string> events;
  events.push_back(fmt::format("{{\"name\": \"process_name\", \"ph\": \"M\", "
                               "\"pid\": 1, \"tid\": 0, \"args\": {{\"name\": "
                               "{}}}}}",
                               jsonString(process)));
  std::vector<uint64_t> streams;
  for (const LaunchSlice &slice : report.launches)
    if (std::find(streams.begin(), streams.end(), slice.stream) ==
        streams.end())
      streams.push_back(slice.stream);
  for (uint64_t stream : streams)
    events.push_back(fmt::format(
        "{{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": {}, "
        "\"args\": {{\"name\": \"stream {}\"}}}}",
        stream, stream));
  for (const LaunchSlice &slice : report.launches)
    events.push_back(fmt::format(
        "{{\"name\": {}, \"cat\": \"kernel\", \"ph\": \"X\", \"ts\": {}, "
        "\"dur\": {}, \"pid\": 1, \"tid\": {}, \"args\": {{{}}}}}",
        jsonString(slice.kernel), jsonNumber(slice.startMicros),
        jsonNumber(slice.durationMicros), slice.stream, sliceArgs(slice)));
  std::string json = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i)
    json += "  " + events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  return json + "]}\n";
}

//===----------------------------------------------------------------------===//
// Reading a profile back (--estimate-from)
//===----------------------------------------------------------------------===//

namespace {

/// Just enough JSON for profileToJson's output: objects, arrays, strings,
/// numbers, true/false/null.
struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  const JsonValue *get(std::string_view key) const {
    for (const auto &[name, value] : members)
      if (name == key)
        return &value;
    return nullptr;
  }
};

class JsonReader {
public:
  explicit JsonReader(std::string_view text) : text(text) {}

  Expected<JsonValue> document() {
    JsonValue value;
    if (!parseValue(value, 0))
      return makeError("{} (at byte {})", problem, position);
    skipSpace();
    if (position != text.size())
      return makeError("unexpected text after the JSON value (at byte {})",
                       position);
    return value;
  }

private:
  bool fail(std::string message) {
    if (problem.empty())
      problem = std::move(message);
    return false;
  }
  void skipSpace() {
    while (position < text.size() &&
           (text[position] == ' ' || text[position] == '\n' ||
            text[position] == '\t' || text[position] == '\r'))
      ++position;
  }
  bool literal(std::string_view word) {
    if (text.substr(position, word.size()) != word)
      return fail("malformed JSON");
    position += word.size();
    return true;
  }
  bool parseString(std::string &out) {
    ++position; // the opening quote
    while (position < text.size() && text[position] != '"') {
      char c = text[position++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (position >= text.size())
        break;
      char escape = text[position++];
      switch (escape) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (position + 4 > text.size())
          return fail("truncated \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char h = text[position++];
          code <<= 4;
          if (h >= '0' && h <= '9')
            code |= unsigned(h - '0');
          else if (h >= 'a' && h <= 'f')
            code |= unsigned(h - 'a' + 10);
          else if (h >= 'A' && h <= 'F')
            code |= unsigned(h - 'A' + 10);
          else
            return fail("bad \\u escape");
        }
        // Names here are ASCII; anything else is kept as UTF-8.
        if (code < 0x80) {
          out += char(code);
        } else if (code < 0x800) {
          out += char(0xC0 | (code >> 6));
          out += char(0x80 | (code & 0x3F));
        } else {
          out += char(0xE0 | (code >> 12));
          out += char(0x80 | ((code >> 6) & 0x3F));
          out += char(0x80 | (code & 0x3F));
        }
        break;
      }
      default:
        out += escape; // \" \\ \/
      }
    }
    if (position >= text.size())
      return fail("unterminated string");
    ++position;
    return true;
  }
  bool parseValue(JsonValue &value, int depth) {
    if (depth > 32)
      return fail("JSON nested too deeply");
    skipSpace();
    if (position >= text.size())
      return fail("unexpected end of the file");
    char c = text[position];
    if (c == '{') {
      value.kind = JsonValue::Object;
      ++position;
      skipSpace();
      if (position < text.size() && text[position] == '}') {
        ++position;
        return true;
      }
      while (true) {
        skipSpace();
        if (position >= text.size() || text[position] != '"')
          return fail("expected a member name");
        std::string name;
        if (!parseString(name))
          return false;
        skipSpace();
        if (position >= text.size() || text[position] != ':')
          return fail("expected ':'");
        ++position;
        JsonValue member;
        if (!parseValue(member, depth + 1))
          return false;
        value.members.emplace_back(std::move(name), std::move(member));
        skipSpace();
        if (position < text.size() && text[position] == ',') {
          ++position;
          continue;
        }
        if (position < text.size() && text[position] == '}') {
          ++position;
          return true;
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      value.kind = JsonValue::Array;
      ++position;
      skipSpace();
      if (position < text.size() && text[position] == ']') {
        ++position;
        return true;
      }
      while (true) {
        JsonValue item;
        if (!parseValue(item, depth + 1))
          return false;
        value.items.push_back(std::move(item));
        skipSpace();
        if (position < text.size() && text[position] == ',') {
          ++position;
          continue;
        }
        if (position < text.size() && text[position] == ']') {
          ++position;
          return true;
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      value.kind = JsonValue::String;
      return parseString(value.string);
    }
    if (c == 't' || c == 'f') {
      value.kind = JsonValue::Bool;
      value.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return literal("null");
    std::string number;
    while (position < text.size() &&
           std::string_view("+-0123456789.eE").find(text[position]) !=
               std::string_view::npos)
      number += text[position++];
    char *end = nullptr;
    value.kind = JsonValue::Number;
    value.number = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0')
      return fail("malformed JSON");
    return true;
  }

  std::string_view text;
  size_t position = 0;
  std::string problem;
};

std::string stringOf(const JsonValue &object, std::string_view key) {
  const JsonValue *value = object.get(key);
  return value && value->kind == JsonValue::String ? value->string : "";
}
std::optional<double> numberOf(const JsonValue &object, std::string_view key) {
  const JsonValue *value = object.get(key);
  if (!value || value->kind != JsonValue::Number)
    return std::nullopt;
  return value->number;
}
uint64_t countOf(const JsonValue &object, std::string_view key) {
  std::optional<double> value = numberOf(object, key);
  return value && *value > 0 ? static_cast<uint64_t>(*value) : 0;
}
Dim3 dimsOf(const JsonValue &object, std::string_view key) {
  Dim3 d;
  const JsonValue *value = object.get(key);
  if (value && value->kind == JsonValue::Array && value->items.size() == 3) {
    d.x = static_cast<uint32_t>(value->items[0].number);
    d.y = static_cast<uint32_t>(value->items[1].number);
    d.z = static_cast<uint32_t>(value->items[2].number);
  }
  return d;
}

KernelProfile kernelFromJson(const JsonValue &object) {
  KernelProfile row;
  row.kernel = stringOf(object, "kernel");
  row.launches = static_cast<uint32_t>(countOf(object, "launches"));
  row.config = {dimsOf(object, "grid"), dimsOf(object, "block"),
                static_cast<uint32_t>(countOf(object, "dynamic_shared_bytes"))};
  if (numberOf(object, "registers")) {
    KernelResources resources;
    resources.registersPerThread =
        static_cast<uint32_t>(countOf(object, "registers"));
    resources.staticSharedBytes =
        static_cast<uint32_t>(countOf(object, "static_shared_bytes"));
    resources.stackFrameBytes =
        static_cast<uint32_t>(countOf(object, "stack_frame_bytes"));
    resources.spillStoreBytes =
        static_cast<uint32_t>(countOf(object, "spill_store_bytes"));
    resources.spillLoadBytes =
        static_cast<uint32_t>(countOf(object, "spill_load_bytes"));
    row.resources = resources;
  }
  std::string mma = stringOf(object, "mma_type");
  row.mmaType = mma == "f16"    ? MmaType::F16
                : mma == "bf16" ? MmaType::BF16
                : mma == "tf32" ? MmaType::TF32
                                : MmaType::Unknown;
  row.haveCounters = object.get("thread_instructions") != nullptr;
  if (const JsonValue *sampled = object.get("sampled"))
    row.sampled = sampled->boolean;
  LaunchCounters &c = row.counters;
  c.threadInstructions = countOf(object, "thread_instructions");
  c.warpInstructions = countOf(object, "warp_instructions");
  c.fmaInstructions = countOf(object, "fma_instructions");
  c.mmaInstructions = countOf(object, "mma_instructions");
  c.loadStoreInstructions = countOf(object, "load_store_instructions");
  c.shuffleInstructions = countOf(object, "shuffle_instructions");
  c.otherInstructions = countOf(object, "other_instructions");
  c.fmaFlops = countOf(object, "fma_flops");
  c.mmaFlops = countOf(object, "mma_flops");
  c.globalAccesses = countOf(object, "global_accesses");
  c.globalBytesRequested = countOf(object, "global_bytes_requested");
  c.globalSectors = countOf(object, "global_sectors");
  c.dramReadSectors = countOf(object, "dram_read_sectors");
  c.dramWriteSectors = countOf(object, "dram_write_sectors");
  c.sharedAccesses = countOf(object, "shared_accesses");
  c.sharedBankConflictReplays = countOf(object, "shared_bank_conflict_replays");
  c.blocksTotal = countOf(object, "blocks_total");
  c.blocksRun = countOf(object, "blocks_run");
  if (numberOf(object, "occupancy")) {
    Occupancy occupancy;
    occupancy.blocksPerSm =
        static_cast<uint32_t>(countOf(object, "blocks_per_sm"));
    occupancy.theoretical = *numberOf(object, "occupancy");
    std::string limiter = stringOf(object, "occupancy_limiter");
    for (std::string_view known :
         {"warps", "registers", "shared memory", "blocks"})
      if (limiter == known)
        occupancy.limiter = known;
    occupancy.warpsPerBlock = static_cast<uint32_t>(
        (uint64_t(row.config.block.x) * row.config.block.y *
             row.config.block.z +
         31) /
        32);
    row.occupancy = occupancy;
    row.achievedOccupancy = numberOf(object, "achieved_occupancy").value_or(0);
  }
  if (std::optional<double> us = numberOf(object, "estimated_us"))
    row.estimatedSeconds = *us * 1e-6;
  row.bound = stringOf(object, "bound");
  row.estimateError = stringOf(object, "estimate_error");
  if (std::optional<double> us = numberOf(object, "measured_us"))
    row.measuredSeconds = *us * 1e-6;
  return row;
}

} // namespace

Expected<ProfileReport> parseProfileJson(std::string_view text,
                                         std::string_view source) {
  Expected<JsonValue> parsed = JsonReader(text).document();
  if (!parsed)
    return parsed.error().withContext(source);
  const JsonValue &root = *parsed;
  if (root.kind != JsonValue::Object || stringOf(root, "format") != "kiln-profile")
    return makeError("{}: not a kiln-run --profile-json file", source);
  if (numberOf(root, "version").value_or(0) != 1)
    return makeError("{}: profile version {} is not 1", source,
                     numberOf(root, "version").value_or(0));
  ProfileReport report;
  report.device = stringOf(root, "device");
  report.deviceName = stringOf(root, "device_name");
  report.target = stringOf(root, "target");
  report.targetDescription = stringOf(root, "target_description");
  report.timeSource = stringOf(root, "time_source");
  report.measuredRuns = static_cast<unsigned>(countOf(root, "measured_runs"));
  report.sampleBlocks = countOf(root, "sample_blocks");
  const JsonValue *kernels = root.get("kernels");
  if (!kernels || kernels->kind != JsonValue::Array)
    return makeError("{}: no 'kernels' array", source);
  for (const JsonValue &kernel : kernels->items) {
    if (kernel.kind != JsonValue::Object || stringOf(kernel, "kernel").empty())
      return makeError("{}: a kernel entry without a name", source);
    report.kernels.push_back(kernelFromJson(kernel));
  }
  if (const JsonValue *launches = root.get("launches");
      launches && launches->kind == JsonValue::Array) {
    for (const JsonValue &item : launches->items) {
      LaunchSlice slice;
      slice.launch = static_cast<uint32_t>(countOf(item, "launch"));
      slice.kernel = stringOf(item, "kernel");
      slice.stream = countOf(item, "stream");
      slice.config = {dimsOf(item, "grid"), dimsOf(item, "block"),
                      static_cast<uint32_t>(
                          countOf(item, "dynamic_shared_bytes"))};
      slice.startMicros = numberOf(item, "start_us").value_or(0);
      slice.durationMicros = numberOf(item, "duration_us").value_or(0);
      if (item.get("dram_bytes"))
        slice.dramBytes = countOf(item, "dram_bytes");
      if (item.get("global_bytes_requested"))
        slice.globalBytesRequested = countOf(item, "global_bytes_requested");
      if (item.get("flops"))
        slice.flops = countOf(item, "flops");
      report.launches.push_back(std::move(slice));
    }
  }
  sumTotal(report);
  return report;
}

Expected<ProfileReport> readProfileJson(const std::string &path) {
  Expected<Blob> file = mapFile(path);
  if (!file)
    return file.takeError();
  return parseProfileJson(
      std::string_view(reinterpret_cast<const char *>(file->data()),
                       file->size()),
      path);
}

Error writeTextFile(const std::string &path, std::string_view text) {
  return writeFileAtomically(path, text.data(), text.size());
}

Error checkWritable(const std::string &path) {
  // Creating the writer makes (and, uncommitted, removes) the temporary
  // file the real write will use: the same checks, nothing left behind.
  Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.takeError();
  return Error::success();
}

} // namespace kiln::runtime

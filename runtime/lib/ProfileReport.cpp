//===- ProfileReport.cpp - Profiles from counters or measured times -------===//
//
// One row per kernel (its launches summed) and a total: from the emulator's
// counters with the performance model's estimates (PerformanceModel.cpp), or
// from a GPU benchmark's measured times, merged with an emu profile's
// estimates; and the table kiln-run --profile prints. The JSON forms are
// ProfileJson.cpp's.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Profile.h"

#include "ProfileSupport.h"
#include "Support.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

uint64_t dramBytesOf(const LaunchCounters &counters) {
  return (counters.dramReadSectors + counters.dramWriteSectors) * 32;
}

namespace {

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

/// launchFootprintBytes for the grid the launch ran: a launch whose grid
/// follows a symbolic dim (section launch-scales) touches only the run's
/// slices of its arena buffers, about the fraction of the compiled blocks
/// it ran (an estimate for the sampled DRAM cap); its weights stay whole.
uint64_t scaledFootprintBytes(const Artifact &artifact, size_t index,
                              const LaunchConfig &ran) {
  uint64_t bytes = launchFootprintBytes(artifact, index);
  const Kernel &kernel = artifact.kernels[artifact.launches[index].kernel];
  uint64_t compiled = uint64_t(kernel.grid.x) * kernel.grid.y * kernel.grid.z;
  uint64_t blocks = uint64_t(ran.grid.x) * ran.grid.y * ran.grid.z;
  if (artifact.launchScales.empty() || blocks >= compiled || compiled == 0)
    return bytes;
  const Launch &launch = artifact.launches[index];
  uint64_t weights = 0;
  for (size_t p = 0; p < kernel.params.size() && p < launch.args.size(); ++p)
    if (kernel.params[p].kind == ParamKind::WeightsPointer)
      for (const Weight &weight : artifact.weights)
        if (weight.offset == launch.args[p]) {
          uint64_t elements = 1;
          for (int64_t d : weight.shape)
            elements *= static_cast<uint64_t>(d);
          weights += elements * dtypeSize(weight.dtype);
          break;
        }
  uint64_t arena = bytes > weights ? bytes - weights : 0;
  return weights + static_cast<uint64_t>(double(arena) * double(blocks) /
                                         double(compiled));
}

} // namespace

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

Expected<ProfileReport>
profileFromCounters(const Artifact &artifact,
                    const std::vector<LaunchProfile> &launches,
                    const GpuTarget &target, uint64_t sampleBlocks) {
  if (launches.size() != artifact.launches.size())
    return makeError("profile: the device recorded {} launches for a launch "
                     "list of {}",
                     launches.size(), artifact.launches.size());
  std::vector<uint32_t> indices(launches.size());
  for (size_t i = 0; i < indices.size(); ++i)
    indices[i] = static_cast<uint32_t>(i);
  return profileFromCounters(artifact, indices, launches, target,
                             sampleBlocks);
}

Expected<ProfileReport>
profileFromCounters(const Artifact &artifact,
                    const std::vector<uint32_t> &launchIndices,
                    const std::vector<LaunchProfile> &launches,
                    const GpuTarget &target, uint64_t sampleBlocks) {
  if (launches.size() != launchIndices.size())
    return makeError("profile: the device recorded {} launches for {} "
                     "launches of the list",
                     launches.size(), launchIndices.size());
  for (uint32_t index : launchIndices)
    if (index >= artifact.launches.size())
      return makeError("profile: launch {} is outside the launch list of {}",
                       index, artifact.launches.size());
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
  for (size_t n = 0; n < launches.size(); ++n) {
    const LaunchProfile &profile = launches[n];
    const uint32_t i = launchIndices[n];
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
      capDramAtFootprint(counters,
                         scaledFootprintBytes(artifact, i, profile.config));
    row.haveCounters = true;
    row.config = profile.config; // a scaled launch's grid (launch-scales)
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

} // namespace kiln::runtime

//===- StepTimeline.cpp - One training step's compute and collectives -----===//
//
// kiln-train --trace: where a data-parallel step spends its time, with the
// gradient all-reduces on their own track beside the kernels. On emu the
// times are modelled: each launch's estimate comes from the performance
// model (profileFromCounters, as kiln-run --trace), each all-reduce's from
// the ring cost model, and the schedule is the one the NCCL engine runs
// (an all-reduce waits for the launch that completes its bucket and for
// the previous all-reduce; train_update waits for the last one).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Profile.h"

#include "Json.h"
#include "Support.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime {

double ringAllReduceMicros(const RingModel &ring, uint64_t bytes) {
  if (ring.ranks <= 1)
    return 0;
  double n = ring.ranks;
  double transfer =
      2 * (n - 1) / n * double(bytes) / (ring.bandwidthGBps * 1e9) * 1e6;
  return transfer + ring.latencyMicros * 2 * (n - 1);
}

namespace {
/// Bytes one element of a collective step puts on the wire.
uint64_t wireBytesPerElement(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduceMeanBf16:
  case CollectiveKind::AllReduceMeanF16:
    return 2;
  default:
    return 4; // fp32; PowerSGD modelled uncompressed (an upper bound)
  }
}
} // namespace

Expected<StepTimeline>
modelStepTimeline(const Artifact &artifact,
                  const std::vector<LaunchProfile> &launches,
                  const GpuTarget &target, const RingModel &ring) {
  if (ring.ranks == 0)
    return makeError("the step timeline needs at least one rank");
  if (ring.ranks > 1 && !(ring.bandwidthGBps > 0))
    return makeError("the step timeline needs a link bandwidth above 0 GB/s "
                     "(target {} has no collective_bandwidth_gbps: give "
                     "--link-gbps)",
                     target.name);
  const EntryPoint *step = artifact.findEntryPoint("train_step");
  if (!step)
    return makeError("the artifact has no train_step entry point");
  const EntryPoint *update = artifact.findEntryPoint("train_update");
  std::vector<uint32_t> indices;
  for (const EntryPoint *entry : {step, update})
    if (entry)
      for (uint32_t l = 0; l < entry->launchCount; ++l)
        indices.push_back(entry->firstLaunch + l);
  Expected<ProfileReport> report =
      profileFromCounters(artifact, indices, launches, target);
  if (!report)
    return report.takeError().withContext("the step timeline");
  for (const KernelProfile &row : report->kernels)
    if (!row.estimateError.empty())
      return makeError("the step timeline: kernel '{}' has no estimate on "
                       "{}: {}",
                       row.kernel, target.name, row.estimateError);

  StepTimeline timeline;
  timeline.timeSource = "modelled";
  timeline.subject = target.name;
  timeline.ring = ring;
  // train_step's launches end to end; remember when each one ends.
  std::vector<double> endOf(artifact.launches.size(), 0);
  double clock = 0;
  size_t n = 0;
  for (; n < step->launchCount; ++n) {
    const LaunchSlice &launch = report->launches[n];
    timeline.slices.push_back({"compute", launch.kernel, launch.launch, clock,
                               launch.durationMicros, 0, 0, 0, "train_step"});
    clock += launch.durationMicros;
    endOf[launch.launch] = clock;
  }
  double stepEnd = clock;
  // Each bucket after its launch and the previous bucket, on one link.
  double linkFree = 0;
  for (size_t i = 0; i < artifact.collectives.size(); ++i) {
    const CollectiveStep &collective = artifact.collectives[i];
    uint32_t after = collective.afterLaunch;
    double ready = after >= step->firstLaunch &&
                           after < step->firstLaunch + step->launchCount
                       ? endOf[after]
                       : stepEnd;
    double start = std::max(ready, linkFree);
    uint64_t bytes =
        collective.elementCount * wireBytesPerElement(collective.kind);
    double duration = ringAllReduceMicros(ring, bytes);
    StepSlice slice{"collectives",
                    fmt::format("all-reduce bucket {}", i),
                    uint32_t(i),
                    start,
                    duration,
                    bytes,
                    collective.elementCount,
                    after,
                    ""};
    timeline.slices.push_back(std::move(slice));
    linkFree = start + duration;
  }
  // train_update after the gradients are averaged.
  clock = std::max(stepEnd, linkFree);
  for (; n < report->launches.size(); ++n) {
    const LaunchSlice &launch = report->launches[n];
    timeline.slices.push_back({"compute", launch.kernel, launch.launch, clock,
                               launch.durationMicros, 0, 0, 0, "train_update"});
    clock += launch.durationMicros;
  }
  return timeline;
}

std::string stepTimelineToJson(const StepTimeline &timeline) {
  bool modelled = timeline.timeSource == "modelled";
  std::string process =
      modelled ? fmt::format("kiln-train step, modelled for {} (performance "
                             "model; ring all-reduce {} ranks, {} GB/s, {} us)",
                             timeline.subject, timeline.ring.ranks,
                             timeline.ring.bandwidthGBps,
                             timeline.ring.latencyMicros)
               : fmt::format("kiln-train step, measured with events on {}",
                             timeline.subject);
  Json events = Json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 0},
                    {"args", {{"name", process}}}});
  const char *tracks[] = {"compute", "collectives"};
  for (int t = 0; t < 2; ++t)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", t + 1},
                      {"args", {{"name", tracks[t]}}}});
  for (const StepSlice &slice : timeline.slices) {
    bool compute = slice.track == "compute";
    Json args = {{"time_source", timeline.timeSource}};
    if (slice.entry == "host") {
      args["entry"] = "host";
    } else if (compute) {
      args["launch"] = slice.index;
      args["entry"] = slice.entry;
    } else {
      args["collective"] = slice.index;
      args["bytes"] = slice.bytes;
      args["elements"] = slice.elements;
      args["after_launch"] = slice.afterLaunch;
    }
    events.push_back({{"name", slice.name},
                      {"cat", compute ? "kernel" : "collective"},
                      {"ph", "X"},
                      {"ts", slice.startMicros},
                      {"dur", slice.durationMicros},
                      {"pid", 1},
                      {"tid", compute ? 1 : 2},
                      {"args", std::move(args)}});
  }
  Json other = {{"time_source", timeline.timeSource},
                {"subject", timeline.subject},
                {"ranks", timeline.ring.ranks}};
  if (modelled) {
    other["link_gbps"] = timeline.ring.bandwidthGBps;
    other["link_latency_us"] = timeline.ring.latencyMicros;
  }
  Json trace = {{"displayTimeUnit", "ns"},
                {"traceEvents", std::move(events)},
                {"otherData", std::move(other)}};
  return dumpJson(trace, 2) + "\n";
}

} // namespace kiln::runtime

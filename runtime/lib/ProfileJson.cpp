//===- ProfileJson.cpp - Profiles and traces as JSON, and back -------------===//
//
// kiln-run --profile-json (a "kiln-profile" version 1 object: the device, the
// target, one object per kernel, the total and one per launch), --trace
// (Chrome trace-event JSON, one complete slice per launch, one track per
// stream) and --estimate-from, which reads a profile back. Written and read
// with nlohmann::json (Json.h); absent values are null.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Profile.h"

#include "Json.h"
#include "ProfileSupport.h"
#include "Support.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// A number, or null for a missing one (and for NaN/inf, which JSON lacks).
Json number(std::optional<double> value) {
  return value && std::isfinite(*value) ? Json(*value) : Json(nullptr);
}

Json dims(const Dim3 &d) { return Json::array({d.x, d.y, d.z}); }

/// A string, or null for an empty one.
Json stringOrNull(std::string_view text) {
  return text.empty() ? Json(nullptr) : Json(std::string(text));
}

std::optional<double> micros(std::optional<double> seconds) {
  return seconds ? std::optional<double>(*seconds * 1e6) : std::nullopt;
}

Json kernelJson(const KernelProfile &row) {
  const LaunchCounters &c = row.counters;
  Json json = {{"kernel", row.kernel},
               {"launches", row.launches},
               {"grid", dims(row.config.grid)},
               {"block", dims(row.config.block)},
               {"dynamic_shared_bytes", row.config.dynamicSharedBytes}};
  if (row.resources) {
    json["registers"] = row.resources->registersPerThread;
    json["static_shared_bytes"] = row.resources->staticSharedBytes;
    json["stack_frame_bytes"] = row.resources->stackFrameBytes;
    json["spill_store_bytes"] = row.resources->spillStoreBytes;
    json["spill_load_bytes"] = row.resources->spillLoadBytes;
  } else {
    json["registers"] = nullptr;
    json["static_shared_bytes"] = nullptr;
  }
  json["mma_type"] = std::string(mmaTypeName(row.mmaType));
  if (row.haveCounters) {
    json["sampled"] = row.sampled;
    json["thread_instructions"] = c.threadInstructions;
    json["warp_instructions"] = c.warpInstructions;
    json["fma_instructions"] = c.fmaInstructions;
    json["mma_instructions"] = c.mmaInstructions;
    json["load_store_instructions"] = c.loadStoreInstructions;
    json["shuffle_instructions"] = c.shuffleInstructions;
    json["other_instructions"] = c.otherInstructions;
    json["fma_flops"] = c.fmaFlops;
    json["mma_flops"] = c.mmaFlops;
    json["global_accesses"] = c.globalAccesses;
    json["global_bytes_requested"] = c.globalBytesRequested;
    json["global_sectors"] = c.globalSectors;
    json["coalescing_efficiency"] =
        c.globalSectors ? number(double(c.globalBytesRequested) /
                                 (double(c.globalSectors) * 32))
                        : Json(nullptr);
    json["dram_read_sectors"] = c.dramReadSectors;
    json["dram_write_sectors"] = c.dramWriteSectors;
    json["dram_bytes"] = dramBytesOf(c);
    json["shared_accesses"] = c.sharedAccesses;
    json["shared_bank_conflict_replays"] = c.sharedBankConflictReplays;
    json["blocks_total"] = c.blocksTotal;
    json["blocks_run"] = c.blocksRun;
  }
  if (row.occupancy) {
    json["blocks_per_sm"] = row.occupancy->blocksPerSm;
    json["occupancy"] = number(row.occupancy->theoretical);
    json["occupancy_limiter"] = std::string(row.occupancy->limiter);
    json["achieved_occupancy"] = number(row.achievedOccupancy);
  }
  json["estimated_us"] = number(micros(row.estimatedSeconds));
  json["bound"] = stringOrNull(row.bound);
  if (!row.estimateError.empty())
    json["estimate_error"] = row.estimateError;
  json["measured_us"] = number(micros(row.measuredSeconds));
  return json;
}

/// The launch's geometry and counts (a profile's launch entry, a trace
/// slice's args).
Json sliceArgs(const LaunchSlice &slice) {
  Json args = {{"launch", slice.launch},
               {"grid", dims(slice.config.grid)},
               {"block", dims(slice.config.block)},
               {"dynamic_shared_bytes", slice.config.dynamicSharedBytes}};
  if (slice.dramBytes)
    args["dram_bytes"] = *slice.dramBytes;
  if (slice.globalBytesRequested)
    args["global_bytes_requested"] = *slice.globalBytesRequested;
  if (slice.flops)
    args["flops"] = *slice.flops;
  return args;
}

} // namespace

std::string profileToJson(const ProfileReport &report) {
  Json json = {{"format", "kiln-profile"},
               {"version", 1},
               {"device", report.device},
               {"device_name", report.deviceName},
               {"target", report.target},
               {"target_description", report.targetDescription},
               {"time_source", report.timeSource},
               {"measured_runs", report.measuredRuns},
               {"sample_blocks", report.sampleBlocks}};
  Json kernels = Json::array();
  for (const KernelProfile &row : report.kernels)
    kernels.push_back(kernelJson(row));
  json["kernels"] = std::move(kernels);
  json["total"] = kernelJson(report.total);
  Json launches = Json::array();
  for (const LaunchSlice &slice : report.launches) {
    Json launch = {{"kernel", slice.kernel},
                   {"stream", slice.stream},
                   {"start_us", number(slice.startMicros)},
                   {"duration_us", number(slice.durationMicros)}};
    launch.update(sliceArgs(slice));
    launches.push_back(std::move(launch));
  }
  json["launches"] = std::move(launches);
  return dumpJson(json, 2) + "\n";
}

std::string traceToJson(const ProfileReport &report) {
  std::string process =
      report.timeSource == "measured"
          ? fmt::format("kiln {} ({}), measured", report.device,
                        report.deviceName)
          : fmt::format("kiln {}, estimated for {}", report.device,
                        report.target);
  Json events = Json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 0},
                    {"args", {{"name", process}}}});
  std::vector<uint64_t> streams;
  for (const LaunchSlice &slice : report.launches)
    if (std::find(streams.begin(), streams.end(), slice.stream) ==
        streams.end())
      streams.push_back(slice.stream);
  for (uint64_t stream : streams)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", stream},
                      {"args", {{"name", fmt::format("stream {}", stream)}}}});
  for (const LaunchSlice &slice : report.launches)
    events.push_back({{"name", slice.kernel},
                      {"cat", "kernel"},
                      {"ph", "X"},
                      {"ts", number(slice.startMicros)},
                      {"dur", number(slice.durationMicros)},
                      {"pid", 1},
                      {"tid", slice.stream},
                      {"args", sliceArgs(slice)}});
  Json trace = {{"displayTimeUnit", "ns"}, {"traceEvents", std::move(events)}};
  return dumpJson(trace, 2) + "\n";
}

//===----------------------------------------------------------------------===//
// Reading a profile back (--estimate-from)
//===----------------------------------------------------------------------===//

namespace {

std::string stringOf(const Json &object, const char *key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}
std::optional<double> numberOf(const Json &object, const char *key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number())
    return std::nullopt;
  return it->get<double>();
}
/// A non-negative count; 0 for anything else.
uint64_t countOf(const Json &value) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>();
  if (!value.is_number())
    return 0;
  double number = value.get<double>();
  return number > 0 ? static_cast<uint64_t>(number) : 0;
}
uint64_t countOf(const Json &object, const char *key) {
  auto it = object.find(key);
  return it == object.end() ? 0 : countOf(*it);
}
Dim3 dimsOf(const Json &object, const char *key) {
  Dim3 d;
  auto it = object.find(key);
  if (it != object.end() && it->is_array() && it->size() == 3) {
    d.x = static_cast<uint32_t>(countOf((*it)[0]));
    d.y = static_cast<uint32_t>(countOf((*it)[1]));
    d.z = static_cast<uint32_t>(countOf((*it)[2]));
  }
  return d;
}

KernelProfile kernelFromJson(const Json &object) {
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
                : mma == "int8" ? MmaType::I8
                                : MmaType::Unknown;
  row.haveCounters = object.contains("thread_instructions");
  if (auto sampled = object.find("sampled");
      sampled != object.end() && sampled->is_boolean())
    row.sampled = sampled->get<bool>();
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
  Expected<Json> parsed = parseJson(text, source);
  if (!parsed)
    return parsed.takeError();
  const Json &root = *parsed;
  if (!root.is_object() || stringOf(root, "format") != "kiln-profile")
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
  auto kernels = root.find("kernels");
  if (kernels == root.end() || !kernels->is_array())
    return makeError("{}: no 'kernels' array", source);
  for (const Json &kernel : *kernels) {
    if (!kernel.is_object() || stringOf(kernel, "kernel").empty())
      return makeError("{}: a kernel entry without a name", source);
    report.kernels.push_back(kernelFromJson(kernel));
  }
  if (auto launches = root.find("launches");
      launches != root.end() && launches->is_array()) {
    for (const Json &item : *launches) {
      if (!item.is_object())
        return makeError("{}: a launch entry is not an object", source);
      LaunchSlice slice;
      slice.launch = static_cast<uint32_t>(countOf(item, "launch"));
      slice.kernel = stringOf(item, "kernel");
      slice.stream = countOf(item, "stream");
      slice.config = {dimsOf(item, "grid"), dimsOf(item, "block"),
                      static_cast<uint32_t>(
                          countOf(item, "dynamic_shared_bytes"))};
      slice.startMicros = numberOf(item, "start_us").value_or(0);
      slice.durationMicros = numberOf(item, "duration_us").value_or(0);
      if (item.contains("dram_bytes"))
        slice.dramBytes = countOf(item, "dram_bytes");
      if (item.contains("global_bytes_requested"))
        slice.globalBytesRequested = countOf(item, "global_bytes_requested");
      if (item.contains("flops"))
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

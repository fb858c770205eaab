//===- TargetTable.cpp - runtime/targets/gpus.ini, parsed ------------------===//
//
// The INI syntax is inih's (ini.h, Debian libinih-dev): it splits sections,
// keys and values and strips comments and blanks; the reader below also
// cuts '#' comments after a value. This file checks what the
// entries mean: every key known and given once per target, numbers where
// numbers go, the divisors of the performance model non-zero. Lines reach
// inih through a reader that counts them, so each message names its line.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/TargetTable.h"

#include "Support.h"

#include <ini.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace kiln::runtime {

namespace {
#include "TargetTable.inc" // kBuiltinTargetTable: runtime/targets/gpus.ini

/// Where each key of a section goes.
struct TargetField {
  const char *key;
  double GpuTarget::*real = nullptr;
  uint32_t GpuTarget::*count = nullptr;
  /// A key a section may leave out (its field keeps its default).
  bool optional = false;
};

const std::vector<TargetField> &targetFields() {
  static const std::vector<TargetField> fields = {
      {"sm", nullptr, &GpuTarget::sm},
      {"sm_count", nullptr, &GpuTarget::smCount},
      {"dram_bandwidth_gbps", &GpuTarget::dramBandwidthGBps},
      {"bf16_tflops", &GpuTarget::bf16Tflops},
      {"fp16_tflops", &GpuTarget::fp16Tflops},
      {"tf32_tflops", &GpuTarget::tf32Tflops},
      {"fp32_tflops", &GpuTarget::fp32Tflops},
      // Optional: 0 (left out) is twice bf16's rate.
      {"int8_tops", &GpuTarget::int8Tops, nullptr, /*optional=*/true},
      // Optional: the link a ring all-reduce between GPUs of this kind
      // runs over (kiln-train --trace); 0 when left out.
      {"collective_bandwidth_gbps", &GpuTarget::collectiveBandwidthGBps,
       nullptr, /*optional=*/true},
      {"collective_latency_us", &GpuTarget::collectiveLatencyUs, nullptr,
       /*optional=*/true},
      {"schedulers_per_sm", nullptr, &GpuTarget::schedulersPerSm},
      {"clock_ghz", &GpuTarget::clockGhz},
      {"registers_per_sm", nullptr, &GpuTarget::registersPerSm},
      {"register_allocation_unit", nullptr,
       &GpuTarget::registerAllocationUnit},
      {"max_registers_per_thread", nullptr, &GpuTarget::maxRegistersPerThread},
      {"shared_bytes_per_sm", nullptr, &GpuTarget::sharedBytesPerSm},
      {"max_shared_bytes_per_block", nullptr,
       &GpuTarget::maxSharedBytesPerBlock},
      {"shared_allocation_unit", nullptr, &GpuTarget::sharedAllocationUnit},
      {"reserved_shared_bytes_per_block", nullptr,
       &GpuTarget::reservedSharedBytesPerBlock},
      {"max_warps_per_sm", nullptr, &GpuTarget::maxWarpsPerSm},
      {"max_blocks_per_sm", nullptr, &GpuTarget::maxBlocksPerSm},
      {"max_threads_per_block", nullptr, &GpuTarget::maxThreadsPerBlock},
      {"occupancy_for_peak_bandwidth", &GpuTarget::occupancyForPeakBandwidth},
      {"occupancy_for_peak_compute", &GpuTarget::occupancyForPeakCompute},
      {"launch_overhead_us", &GpuTarget::launchOverheadUs},
  };
  return fields;
}

/// inih's state: the text left, the line it is on, what was read so far,
/// and the first error (inih goes on after one; only the first is kept).
struct ParseState {
  std::string_view rest;
  std::string_view source;
  size_t lineNumber = 0;
  std::string_view line;
  /// ini.h reads lines into a buffer of INI_MAX_LINE bytes; a longer one
  /// would be split, so the reader refuses it.
  bool lineTooLong = false;
  std::vector<GpuTarget> table;
  std::vector<std::set<std::string>> seen;
  std::string currentSection;
  Error error;
  size_t errorLine = 0;

  void fail(Error err) {
    if (!error) {
      error = std::move(err);
      errorLine = lineNumber;
    }
  }
};

/// ini_reader: copies the next line (with its newline) into `buffer`.
char *readLine(char *buffer, int size, void *stream) {
  auto &state = *static_cast<ParseState *>(stream);
  if (state.rest.empty())
    return nullptr;
  size_t newline = state.rest.find('\n');
  size_t length =
      newline == std::string_view::npos ? state.rest.size() : newline + 1;
  state.line = state.rest.substr(0, length);
  state.rest.remove_prefix(length);
  ++state.lineNumber;
  if (length + 1 > static_cast<size_t>(size)) {
    state.lineTooLong = true;
    state.fail(makeError("{}:{}: a line is at most {} characters",
                         state.source, state.lineNumber, size - 2));
    length = 0;
  }
  // '#' starts a comment anywhere on a line, as the table has always
  // allowed (inih itself takes ';' after a value, '#' only at a line's
  // start).
  std::string_view text = state.line.substr(0, length);
  if (size_t hash = text.find('#'); hash != std::string_view::npos)
    text = text.substr(0, hash);
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  return buffer;
}

/// ini_handler: one `key = value` of `section`; 1 to go on.
int handleEntry(void *user, const char *section, const char *name,
                const char *value) {
  auto &state = *static_cast<ParseState *>(user);
  size_t line = state.lineNumber;
  std::string_view source = state.source;
  if (!*section) {
    state.fail(makeError("{}:{}: a key before the first [target] section",
                         source, line));
    return 0;
  }
  if (state.table.empty() || state.currentSection != section) {
    state.currentSection = section;
    for (const GpuTarget &other : state.table)
      if (other.name == section) {
        state.fail(makeError("{}:{}: target '{}' appears twice", source, line,
                             section));
        return 0;
      }
    GpuTarget target;
    target.name = section;
    state.table.push_back(std::move(target));
    state.seen.emplace_back();
  }
  GpuTarget &target = state.table.back();
  std::string key = name;
  if (!state.seen.back().insert(key).second) {
    state.fail(makeError("{}:{}: '{}' is given twice for '{}'", source, line,
                         key, target.name));
    return 0;
  }
  std::string text = value;
  if (key == "description") {
    target.description = text;
    return 1;
  }
  const std::vector<TargetField> &fields = targetFields();
  auto field = std::find_if(fields.begin(), fields.end(),
                            [&](const TargetField &f) { return key == f.key; });
  if (field == fields.end()) {
    state.fail(makeError("{}:{}: unknown key '{}'", source, line, key));
    return 0;
  }
  char *end = nullptr;
  double number = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(number) || number < 0) {
    state.fail(makeError("{}:{}: '{}' is not a non-negative number", source,
                         line, text));
    return 0;
  }
  if (field->real) {
    target.*(field->real) = number;
    return 1;
  }
  if (number != std::floor(number) || number > 4294967295.0) {
    state.fail(makeError("{}:{}: '{}' needs a whole number, not '{}'", source,
                         line, key, text));
    return 0;
  }
  target.*(field->count) = static_cast<uint32_t>(number);
  return 1;
}

} // namespace

Expected<std::vector<GpuTarget>> parseTargetTable(std::string_view text,
                                                  std::string_view source) {
  ParseState state;
  state.rest = text;
  state.source = source;
  int errorLine = ini_parse_stream(readLine, &state, handleEntry, &state);
  if (errorLine < 0)
    return makeError("{}: cannot be parsed", source);
  // inih returns the first error's line: when it is not one of ours, it is
  // a syntax error inih found on its own. Re-read the table up to it to
  // name what is wrong.
  if (errorLine > 0 && size_t(errorLine) != state.errorLine) {
    std::string_view rest = text;
    std::string_view line;
    for (int i = 0; i < errorLine; ++i) {
      size_t newline = rest.find('\n');
      line = rest.substr(0, newline);
      rest = newline == std::string_view::npos ? std::string_view()
                                               : rest.substr(newline + 1);
    }
    size_t first = line.find_first_not_of(" \t\r");
    bool header = first != std::string_view::npos && line[first] == '[';
    return makeError(header ? "{}:{}: a section header is '[name]'"
                            : "{}:{}: expected 'key = value'",
                     source, errorLine);
  }
  if (state.error)
    return state.error;
  for (size_t t = 0; t < state.table.size(); ++t) {
    const GpuTarget &target = state.table[t];
    for (const TargetField &field : targetFields())
      if (!field.optional && !state.seen[t].count(field.key))
        return makeError("{}: target '{}' has no '{}'", source, target.name,
                         field.key);
    // The divisors of the model.
    if (!target.smCount || !target.dramBandwidthGBps || !target.fp32Tflops ||
        !target.clockGhz || !target.schedulersPerSm || !target.maxWarpsPerSm ||
        !target.maxBlocksPerSm || !target.registersPerSm ||
        !target.registerAllocationUnit || !target.sharedAllocationUnit ||
        !target.occupancyForPeakBandwidth || !target.occupancyForPeakCompute)
      return makeError("{}: target '{}': SM count, bandwidth, fp32 peak, "
                       "clock, schedulers, per-SM limits, allocation units "
                       "and the occupancy figures must be non-zero",
                       source, target.name);
  }
  return std::move(state.table);
}

const std::vector<GpuTarget> &builtinTargetTable() {
  static const std::vector<GpuTarget> table = [] {
    Expected<std::vector<GpuTarget>> parsed =
        parseTargetTable(kBuiltinTargetTable, "runtime/targets/gpus.ini");
    // A broken embedded table is a Kiln bug (the unit test
    // ProfileTest.BuiltinTableIsTheGpusFigures fails on one).
    if (!parsed) {
      std::fprintf(stderr, "kiln: internal error: %s\n",
                   parsed.error().message().c_str());
      std::abort();
    }
    return parsed.take();
  }();
  return table;
}

Expected<std::vector<GpuTarget>> loadTargetTable() {
  if (const char *path = std::getenv("KILN_TARGET_TABLE"); path && *path) {
    Expected<Blob> file = mapFile(path);
    if (!file)
      return file.error().withContext("KILN_TARGET_TABLE");
    return parseTargetTable(
        std::string_view(reinterpret_cast<const char *>(file->data()),
                         file->size()),
        path);
  }
  return builtinTargetTable();
}

uint32_t smOfTarget(std::string_view target) {
  if (target.substr(0, 3) != "sm_")
    return 0;
  std::string_view digits = target.substr(3);
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f'))
    digits.remove_suffix(1);
  if (digits.empty() || digits.size() >= 5)
    return 0;
  uint32_t sm = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return 0;
    sm = sm * 10 + uint32_t(c - '0');
  }
  return sm;
}

Expected<GpuTarget> findTarget(const std::vector<GpuTarget> &table,
                               std::string_view nameOrTarget) {
  for (const GpuTarget &target : table)
    if (target.name == nameOrTarget)
      return target;
  // An artifact target: sm_<digits>[a|f].
  if (uint32_t sm = smOfTarget(nameOrTarget))
    for (const GpuTarget &target : table)
      if (target.sm == sm)
        return target;
  std::string names;
  for (const GpuTarget &target : table)
    names += (names.empty() ? "" : ", ") + target.name;
  return makeError("no performance figures for '{}' in the target table "
                   "(runtime/targets/gpus.ini has {}); pick one with "
                   "--perf-target",
                   nameOrTarget, names.empty() ? "none" : names);
}

} // namespace kiln::runtime

//===- kiln-run.cpp - Run a .kiln artifact on a device --------------------===//
//
//   kiln-run model.kiln [-i name=file.npy ...] [--random-inputs] [-o outdir]
//            [--device cuda|cuda:N|emu] [--check=races] [--bench N] [--graph]
//            [--profile] [--profile-json FILE] [--trace FILE.json]
//
// Everything that can be checked without a device is checked first (the
// artifact, the input files against the signature), so a bad input is
// reported the same way on a laptop as on a GPU machine. Every error is one
// line on stderr and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "Sizes.h"

#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Profile.h"
#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SignatureGroups.h"

#include "kiln/runtime/Version.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <signal.h>
#include <unistd.h>

using namespace kiln::runtime;

namespace {

constexpr const char *kUsage = R"(usage: kiln-run MODEL.kiln [options]

Runs a compiled Kiln model on a GPU (cuda) or on Kiln's PTX emulator (emu)
and prints a summary of each output.

Exit status: 0 success; 1 bad input, options or environment (the artifact,
an input file, no CUDA driver); 2 internal error (a crash, or a kernel that
faulted: a Kiln bug).

Input:
  -i NAME=FILE.npy      bind input NAME from a .npy file (repeatable); a
                        sequence input (kilnc --sequence NAME=N) takes N files:
                        -i NAME=A.npy,B.npy,...
  --random-inputs       fill every input not given with -i with random values
  --seed N              seed for --random-inputs (default: 0)
  --sizes NAME=N[,N...] sizes of a symbolic dim (kilnc --dim) for
                        --random-inputs (default: the compiled maximum); with
                        --bench, several values time each size, one line each
                        (repeatable, one symbol per flag)
  --weights DIR         bind the weights compiled from ONNX initializers to new
                        values: DIR/<initializer>.npy (name sanitized as for
                        -o; scripts/device/export_initializers.py writes them).
                        Required by artifacts built with kilnc --strip-weights

Device:
  --device DEV          cuda, cuda:N or emu (default: cuda)
  --graph               capture the launch list into a CUDA graph and replay
                        it, device-side loops as conditional WHILE nodes where
                        the driver has them (default: off)
  --check LIST          emu: slower runs that fail on what a GPU would hide,
                        comma-separated: races (shared-memory races between
                        threads, missing fence.proxy.async, mbarrier misuse,
                        two blocks writing the same global bytes), shared
                        (reads of shared memory nothing wrote). Sets
                        KILN_EMU_CHECK (default: off)

Output:
  -o DIR                write each output to DIR/<name>.npy (characters outside
                        [A-Za-z0-9._-] in the name become '_'), a sequence
                        output's tensors to DIR/<name>.<i>.npy (default: none)
  --json                print one JSON object on stdout instead of the text
                        summary: outputs, and --bench's latency and throughput

Benchmark and profile:
  --bench N             warm up, then time N runs: latency per run and per
                        kernel, throughput in inferences/s (default: off)
  --warmup N            warm-up runs before --bench (default: 3)
  --profile             per-kernel profile table: on emu the emulator's counts
                        and an estimated time (one run); on cuda times measured
                        with events (the --bench runs, or 10)
  --profile-sample N    emu: run only N random blocks per launch and scale the
                        counts (estimates only: the outputs are incomplete)
  --profile-json FILE   write the profile as JSON too (implies --profile)
  --estimate-from FILE  cuda: show the estimates of an emu --profile-json
                        FILE beside the measured times
  --perf-target NAME    the target table entry for estimates (default: the
                        artifact's sm, e.g. sm_90-h200; runtime/targets/gpus.ini)
  --trace FILE.json     Chrome trace of the launches (Perfetto, chrome://tracing):
                        estimated times on emu, measured on cuda

Generic:
  -h, --help            show this help
  --version             show the version of kiln-run and what it was built with
)";

/// kiln-run's exit statuses (docs/runtime.md "Exit status").
enum ExitStatus : int {
  kExitSuccess = 0,
  /// The input, the options or the environment are at fault.
  kExitUserError = 1,
  /// Kiln is at fault: a crash, or a kernel that faulted on a validated
  /// artifact with checked inputs.
  kExitInternalError = 2,
};

struct Options {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputFiles;
  bool randomInputs = false;
  std::vector<tools::SizeFlag> sizes;
  uint64_t seed = 0;
  std::string outputDir;
  std::string weightsDir;
  std::string device = "cuda";
  unsigned bench = 0;
  unsigned warmup = 3;
  bool useGraph = false;
  bool profile = false;
  uint64_t profileSample = 0;
  std::string profileJson;
  std::string estimateFrom;
  std::string perfTarget;
  std::string trace;
  /// --check: the emu device's KILN_EMU_CHECK list.
  std::string checks;
  bool json = false;
  bool version = false;
};

int fail(const std::string &message) {
  fmt::print(stderr, "kiln-run: error: {}\n", message);
  return kExitUserError;
}

int internalError(const std::string &message) {
  fmt::print(stderr,
             "kiln-run: internal error: {} (this is a Kiln bug: please report "
             "it with the model and the command line)\n",
             message);
  return kExitInternalError;
}

/// A failed run: a host step's error is about the bound values (a string a
/// Cast cannot parse, a shape input its guard refuses: exit 1); anything
/// else is Kiln's fault (exit 2).
int runFailed(const Error &err) {
  if (err.message().rfind("host step: ", 0) == 0)
    return fail(err.message());
  return internalError(err.message());
}

/// A crash exits with status 2. Runs in a signal handler: only
/// async-signal-safe calls.
extern "C" void exitOnCrashSignal(int) {
  static const char message[] =
      "kiln-run: internal error: crashed (this is a Kiln bug: please report "
      "it with the model and the command line)\n";
  ssize_t ignored = ::write(2, message, sizeof(message) - 1);
  (void)ignored;
  ::_exit(kExitInternalError);
}

void installCrashHandlers() {
  struct sigaction action {};
  action.sa_handler = exitOnCrashSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    ::sigaction(signal, &action, nullptr);
}

void printVersion() {
  const BuildInfo &info = buildInfo();
  fmt::print("{}\n  CUDA {} (cuda.h at build time; the driver is loaded at "
             "run time)\n  artifact format {}.{} (reads {}.0 to {}.{})\n",
             versionLine("kiln-run"), info.cudaVersion, kArtifactFormatMajor,
             kArtifactFormatMinor, kArtifactFormatMajor, kArtifactFormatMajor,
             kArtifactFormatMinor);
}

Expected<unsigned> parseCount(const std::string &flag,
                              const std::string &text) {
  char *end = nullptr;
  errno = 0;
  unsigned long value = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value > 1000000000ul ||
      text[0] == '-')
    return Error::failure(
        fmt::format("{} expects a non-negative integer, not '{}'", flag, text));
  return static_cast<unsigned>(value);
}

/// Parses argv; a returned Error with an empty message means "--help".
Expected<Options> parseArguments(int argc, char **argv) {
  Options options;
  auto value = [&](int &i, const std::string &flag) -> Expected<std::string> {
    if (i + 1 >= argc)
      return Error::failure(fmt::format("{} needs a value", flag));
    return std::string(argv[++i]);
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help")
      return Error::failure("");
    if (arg == "--version") {
      options.version = true;
      return options;
    }
    if (arg == "-i" || arg == "--input") {
      Expected<std::string> binding = value(i, arg);
      if (!binding)
        return binding.takeError();
      size_t equals = binding->find('=');
      if (equals == std::string::npos || equals == 0 ||
          equals + 1 == binding->size())
        return Error::failure(
            fmt::format("-i expects NAME=FILE.npy, not '{}'", *binding));
      options.inputFiles.emplace_back(binding->substr(0, equals),
                                      binding->substr(equals + 1));
    } else if (arg == "--sizes") {
      Expected<std::string> text = value(i, arg);
      if (!text)
        return text.takeError();
      Expected<tools::SizeFlag> flag = tools::parseSizeFlag(*text);
      if (!flag)
        return flag.takeError();
      options.sizes.push_back(flag.take());
    } else if (arg == "--random-inputs") {
      options.randomInputs = true;
    } else if (arg == "--graph") {
      options.useGraph = true;
    } else if (arg == "--profile") {
      options.profile = true;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "-o" || arg == "--device" || arg == "--weights" ||
               arg == "--profile-json" || arg == "--estimate-from" ||
               arg == "--perf-target" || arg == "--trace") {
      Expected<std::string> text = value(i, arg);
      if (!text)
        return text.takeError();
      if (text->empty())
        return Error::failure(fmt::format("{} needs a value", arg));
      (arg == "-o"                ? options.outputDir
       : arg == "--weights"       ? options.weightsDir
       : arg == "--profile-json"  ? options.profileJson
       : arg == "--estimate-from" ? options.estimateFrom
       : arg == "--perf-target"   ? options.perfTarget
       : arg == "--trace"         ? options.trace
                                  : options.device) = *text;
      if (arg == "--profile-json")
        options.profile = true;
    } else if (arg == "--check" || arg.rfind("--check=", 0) == 0) {
      std::string list;
      if (arg == "--check") {
        Expected<std::string> text = value(i, arg);
        if (!text)
          return text.takeError();
        list = *text;
      } else {
        list = arg.substr(8);
      }
      // The names KILN_EMU_CHECK knows (EmuDevice.cpp).
      size_t start = 0;
      while (true) {
        size_t end = std::min(list.find(',', start), list.size());
        std::string name = list.substr(start, end - start);
        if (name != "races" && name != "shared")
          return Error::failure(
              fmt::format("--check expects races and/or shared, "
                          "comma-separated, not '{}'",
                          list));
        if (end == list.size())
          break;
        start = end + 1;
      }
      options.checks = list;
    } else if (arg == "--profile-sample") {
      Expected<std::string> text = value(i, arg);
      if (!text)
        return text.takeError();
      Expected<unsigned> count = parseCount(arg, *text);
      if (!count || *count == 0)
        return Error::failure(fmt::format(
            "--profile-sample expects a number of blocks (at least 1), not "
            "'{}'",
            *text));
      options.profileSample = *count;
      options.profile = true;
    } else if (arg == "--bench" || arg == "--warmup" || arg == "--seed") {
      Expected<std::string> text = value(i, arg);
      if (!text)
        return text.takeError();
      Expected<unsigned> count = parseCount(arg, *text);
      if (!count)
        return count.takeError();
      if (arg == "--bench" && *count == 0)
        return Error::failure("--bench expects at least 1 run");
      if (arg == "--bench")
        options.bench = *count;
      else if (arg == "--warmup")
        options.warmup = *count;
      else
        options.seed = *count;
    } else if (!arg.empty() && arg[0] == '-') {
      return Error::failure(
          fmt::format("unknown option '{}' (see kiln-run --help)", arg));
    } else if (options.model.empty()) {
      options.model = arg;
    } else {
      return Error::failure(fmt::format(
          "more than one model given ('{}' and '{}')", options.model, arg));
    }
  }
  if (options.model.empty())
    return Error::failure("no model given (see kiln-run --help)");
  bool emu = options.device == "emu";
  if (!options.estimateFrom.empty() && emu)
    return Error::failure("--estimate-from applies to --device cuda (on emu "
                          "the profile makes its own estimates)");
  if (!options.estimateFrom.empty())
    options.profile = true;
  if (options.profileSample && !emu)
    return Error::failure("--profile-sample applies to --device emu (a GPU "
                          "runs every block)");
  if (!options.checks.empty() && !emu)
    return Error::failure("--check applies to --device emu (the checks "
                          "follow the emulator's threads)");
  if (options.json && options.profile && options.profileJson.empty())
    return Error::failure("--json replaces the text output: write the "
                          "profile with --profile-json FILE");
  bool sweep = false;
  for (const tools::SizeFlag &flag : options.sizes)
    sweep |= flag.values.size() > 1;
  if (!options.sizes.empty() && !options.randomInputs)
    return Error::failure("--sizes sets the sizes of --random-inputs (-i "
                          "files carry their own sizes)");
  if (sweep && !options.bench)
    return Error::failure("--sizes with several values times each size: "
                          "add --bench N");
  if (sweep && (options.profile || options.json || !options.trace.empty()))
    return Error::failure("--sizes with several values prints one line per "
                          "size: drop --profile, --json and --trace");
  if (!options.perfTarget.empty() && !emu)
    return Error::failure("--perf-target applies to --device emu (cuda "
                          "estimates come from --estimate-from)");
  return options;
}

//===----------------------------------------------------------------------===//
// Host-side element conversions (random inputs, output summaries)
//===----------------------------------------------------------------------===//

uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xFF) - 127 + 15;
  uint32_t mantissa = bits & 0x7FFFFF;
  if (exponent <= 0) // flush values below the normal range to zero
    return static_cast<uint16_t>(sign);
  if (exponent >= 31)
    return static_cast<uint16_t>(sign | 0x7C00);
  uint32_t half = sign | (uint32_t(exponent) << 10) | (mantissa >> 13);
  if (mantissa & 0x1000) // round half up; good enough for random data
    ++half;
  return static_cast<uint16_t>(half);
}

float halfToFloat(uint16_t half) {
  uint32_t sign = uint32_t(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1F;
  uint32_t mantissa = half & 0x3FF;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400),
                       static_cast<int>(exponent) - 25);
  }
  return sign ? -value : value;
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7FFF + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float bf16ToFloat(uint16_t value) {
  uint32_t bits = uint32_t(value) << 16;
  float result;
  std::memcpy(&result, &bits, 4);
  return result;
}

/// A float8 code's value: `mantissaBits` of mantissa, the given bias; which
/// codes are NaN or infinite depends on the type.
double float8ToDouble(DType dtype, uint8_t code) {
  bool e4m3 = dtype == DType::F8E4M3FN || dtype == DType::F8E4M3FNUZ;
  int mantissaBits = e4m3 ? 3 : 2;
  int bias = dtype == DType::F8E4M3FN    ? 7
             : dtype == DType::F8E4M3FNUZ ? 8
             : dtype == DType::F8E5M2     ? 15
                                          : 16;
  unsigned magnitude = code & 0x7F;
  bool fnuz = dtype == DType::F8E4M3FNUZ || dtype == DType::F8E5M2FNUZ;
  if ((fnuz && code == 0x80) ||
      (dtype == DType::F8E4M3FN && magnitude == 0x7F) ||
      (dtype == DType::F8E5M2 && magnitude > 0x7C))
    return NAN;
  double sign = (code & 0x80) ? -1.0 : 1.0;
  if (dtype == DType::F8E5M2 && magnitude == 0x7C)
    return sign * INFINITY;
  int exponent = static_cast<int>(magnitude >> mantissaBits);
  int mantissa = static_cast<int>(magnitude & ((1u << mantissaBits) - 1));
  if (exponent == 0)
    return sign * std::ldexp(mantissa, 1 - bias - mantissaBits);
  return sign * std::ldexp(mantissa | (1 << mantissaBits),
                           exponent - bias - mantissaBits);
}

/// Element `i` of a tensor, as a double.
double elementAt(DType dtype, const uint8_t *data, size_t i) {
  auto load = [&](auto tag) {
    decltype(tag) value;
    std::memcpy(&value, data + i * sizeof(value), sizeof(value));
    return value;
  };
  switch (dtype) {
  case DType::F32:
    return load(float());
  case DType::F64:
    return load(double());
  case DType::F16:
    return halfToFloat(load(uint16_t()));
  case DType::BF16:
    return bf16ToFloat(load(uint16_t()));
  case DType::I8:
    return load(int8_t());
  case DType::I16:
    return load(int16_t());
  case DType::I32:
    return load(int32_t());
  case DType::I64:
    return static_cast<double>(load(int64_t()));
  case DType::U8:
  case DType::Bool:
    return load(uint8_t());
  case DType::U16:
    return load(uint16_t());
  case DType::U32:
    return load(uint32_t());
  case DType::U64:
    return static_cast<double>(load(uint64_t()));
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
    return float8ToDouble(dtype, load(uint8_t()));
  }
  return 0;
}

HostTensor randomTensor(const TensorSignature &input, const Shape &shape,
                        std::mt19937_64 &rng) {
  HostTensor tensor;
  tensor.dtype = input.dtype;
  tensor.shape = shape;
  uint64_t count = *elementCount(shape);
  uint64_t size = dtypeSize(input.dtype);
  tensor.data.resize(count * size);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(-8, 7);
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t *element = tensor.data.data() + i * size;
    auto store = [&](auto value) {
      std::memcpy(element, &value, sizeof(value));
    };
    switch (input.dtype) {
    case DType::F32:
      store(real(rng));
      break;
    case DType::F64:
      store(static_cast<double>(real(rng)));
      break;
    case DType::F16:
      store(floatToHalf(real(rng)));
      break;
    case DType::BF16:
      store(floatToBf16(real(rng)));
      break;
    case DType::Bool:
      store(static_cast<uint8_t>(small(rng) & 1));
      break;
    default: {
      // Small values keep integer inputs (indices, say) plausible.
      int value = small(rng);
      if (!isSignedIntDType(input.dtype))
        value &= 0x7;
      int64_t wide = value;
      std::memcpy(element, &wide, size); // little-endian truncation
      break;
    }
    }
  }
  return tensor;
}

std::string sanitizeFileName(const std::string &name) {
  std::string result = name;
  for (char &c : result)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != '-')
      c = '_';
  return result.empty() ? "_" : result;
}

/// What kiln-run prints about an output.
struct OutputSummary {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t count = 0;
  uint64_t nonFinite = 0;
  double min = 0, max = 0, mean = 0;
  std::vector<double> head; // the first (up to) 4 elements
  /// A string output (format 1.9 host steps): its first (up to) 4 strings.
  bool isString = false;
  std::vector<std::string> headStrings;
};

OutputSummary summarizeStrings(const std::string &name,
                               const HostTensor &tensor) {
  OutputSummary summary;
  summary.name = name;
  summary.shape = tensor.shape;
  summary.count = tensor.strings.size();
  summary.isString = true;
  for (size_t i = 0; i < tensor.strings.size() && i < 4; ++i)
    summary.headStrings.push_back(tensor.strings[i]);
  return summary;
}

OutputSummary summarize(const TensorSignature &output,
                        const HostTensor &tensor) {
  OutputSummary summary;
  summary.name = output.name;
  summary.dtype = tensor.dtype;
  summary.shape = tensor.shape;
  summary.count = *elementCount(tensor.shape);
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (uint64_t i = 0; i < summary.count; ++i) {
    double v = elementAt(tensor.dtype, tensor.data.data(), i);
    if (i < 4)
      summary.head.push_back(v);
    if (!std::isfinite(v)) {
      ++summary.nonFinite;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  if (summary.count > summary.nonFinite) {
    summary.min = lo;
    summary.max = hi;
    summary.mean = sum / double(summary.count - summary.nonFinite);
  }
  return summary;
}

void printSummary(const OutputSummary &summary) {
  if (summary.isString) {
    std::string head;
    for (size_t i = 0; i < summary.headStrings.size(); ++i)
      for (char c : std::string(i ? "', '" : "'") + summary.headStrings[i])
        head += static_cast<unsigned char>(c) < 0x20
                    ? fmt::format("\\x{:02x}", static_cast<unsigned>(c))
                    : std::string(1, c);
    if (!head.empty())
      head += "'";
    fmt::print("output '{}': string {}  first [{}{}]\n", summary.name,
               formatShape(summary.shape), head,
               summary.count > 4 ? ", ..." : "");
    return;
  }
  std::string text =
      fmt::format("output '{}': {} {}", summary.name, dtypeName(summary.dtype),
                  formatShape(summary.shape));
  if (summary.count > 0) {
    if (summary.count > summary.nonFinite)
      text += fmt::format("  min {:.6g}  max {:.6g}  mean {:.6g}", summary.min,
                          summary.max, summary.mean);
    if (summary.nonFinite)
      text += fmt::format("  ({} NaN/inf)", summary.nonFinite);
    std::string head;
    for (size_t i = 0; i < summary.head.size(); ++i)
      head += fmt::format("{}{:.6g}", i ? ", " : "", summary.head[i]);
    text += fmt::format("  first [{}{}]", head, summary.count > 4 ? ", ..." : "");
  }
  fmt::print("{}\n", text);
}

//===----------------------------------------------------------------------===//
// JSON output (--json)
//===----------------------------------------------------------------------===//

/// kiln-run --json's objects keep the documented member order.
using Json = nlohmann::ordered_json;

/// A JSON number; NaN and infinities, which JSON lacks, become null.
Json number(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

std::string dump(const Json &json) {
  return json.dump(-1, ' ', /*ensure_ascii=*/false,
                   Json::error_handler_t::replace);
}

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  double position = fraction * double(values.size() - 1);
  size_t low = static_cast<size_t>(position);
  size_t high = std::min(low + 1, values.size() - 1);
  double weight = position - double(low);
  return values[low] * (1 - weight) + values[high] * weight;
}

/// "median 1.234 ms  p10-p90 1.200-1.300 ms (±4.1%)".
std::string describeTimes(const std::vector<double> &ms) {
  double median = percentile(ms, 0.5);
  double p10 = percentile(ms, 0.1), p90 = percentile(ms, 0.9);
  double spread = median > 0 ? 50.0 * (p90 - p10) / median : 0;
  return fmt::format("median {:.4f} ms  p10-p90 {:.4f}-{:.4f} ms (±{:.1f}%)",
                     median, p10, p90, spread);
}

/// Inferences (runs) per second over the timed runs: their count over their
/// summed time, so slow outliers count as they would in a serving loop.
double inferencesPerSecond(const BenchmarkResult &result) {
  double total = 0;
  for (double ms : result.runMilliseconds)
    total += ms;
  return total > 0 ? 1000.0 * double(result.runMilliseconds.size()) / total
                   : 0.0;
}

/// The batch a run processes: the leading dimension of the first input as
/// bound (a symbolic dim may run below its compiled size; 1 for a model
/// without inputs or with a scalar first input).
uint64_t batchOf(const Artifact &artifact,
                 const std::map<std::string, HostTensor> &inputs) {
  if (artifact.inputs.empty())
    return 1;
  auto bound = inputs.find(artifact.inputs[0].name);
  const Shape &shape =
      bound != inputs.end() ? bound->second.shape : artifact.inputs[0].shape;
  return shape.empty() ? 1 : static_cast<uint64_t>(shape[0]);
}

void printBenchmark(const BenchmarkResult &result, unsigned warmup,
                    const DeviceInfo &device, const Artifact &artifact,
                    uint64_t batch) {
  fmt::print("bench: {} runs after {} warm-up runs\n",
             result.runMilliseconds.size(), warmup);
  fmt::print("  per run: {}\n", describeTimes(result.runMilliseconds));
  double throughput = inferencesPerSecond(result);
  std::string samples =
      batch > 1 ? fmt::format(" ({:.4g} samples/s at batch {}, the leading "
                              "dimension of input '{}')",
                              throughput * double(batch), batch,
                              artifact.inputs[0].name)
                : "";
  fmt::print("  throughput: {:.4g} inferences/s{}\n", throughput, samples);
  if (result.energyJoules && result.energySeconds > 0) {
    double runs = double(result.runMilliseconds.size());
    fmt::print("  energy: {:.4f} J per run, average power {:.1f} W (NVML, "
               "{:.3f} J over the {} timed runs in {:.3f} s)\n",
               *result.energyJoules / runs,
               *result.energyJoules / result.energySeconds,
               *result.energyJoules, result.runMilliseconds.size(),
               result.energySeconds);
  } else if (device.kind == "cuda") {
    // Once, and not an error: the times are still good.
    fmt::print(stderr, "kiln-run: note: no energy figures: {}\n",
               result.energyUnavailable.empty() ? "no energy counter"
                                                : result.energyUnavailable);
  }
  double total = 0;
  for (const KernelTiming &timing : result.kernels)
    total += percentile(timing.milliseconds, 0.5);
  for (const KernelTiming &timing : result.kernels) {
    double median = percentile(timing.milliseconds, 0.5);
    fmt::print("  kernel {} (x{}): {}  {:.1f}% of kernel time\n", timing.kernel,
               timing.launchesPerRun, describeTimes(timing.milliseconds),
               total > 0 ? 100.0 * median / total : 0.0);
  }
  if (!result.launchTimingsUnavailable.empty())
    fmt::print("  kernels: not timed: {}\n", result.launchTimingsUnavailable);
}

/// Format 1.12: "control region 0: while launches 2-3 on flag buffer 2
/// 'cond' @512", one line per device-side loop; with --graph, then how the
/// loops ran: "device loops: conditional graph nodes" or "device loops:
/// host-read flags (why)".
void printControlRegions(const Artifact &artifact, const Session &session,
                         bool graph) {
  for (size_t i = 0; i < artifact.controlRegions.size(); ++i) {
    const ControlRegion &region = artifact.controlRegions[i];
    const ArenaBuffer &flag = artifact.memoryPlan.buffers[region.flagBuffer];
    fmt::print("control region {}: {} launches {}-{} on flag buffer {} '{}' "
               "@{}\n",
               i, controlRegionKindName(region.kind), region.firstLaunch,
               region.firstLaunch + region.launchCount - 1, region.flagBuffer,
               flag.name, region.flagOffset);
  }
  if (graph && !session.deviceLoops().empty())
    fmt::print("device loops: {}\n", session.deviceLoops());
}

Json benchmarkJson(const BenchmarkResult &result, unsigned warmup,
                   uint64_t batch) {
  const std::vector<double> &ms = result.runMilliseconds;
  double sum = 0;
  for (double v : ms)
    sum += v;
  Json runs = Json::array();
  for (double v : ms)
    runs.push_back(number(v));
  Json kernels = Json::array();
  for (const KernelTiming &timing : result.kernels)
    kernels.push_back(
        {{"kernel", timing.kernel},
         {"launches_per_run", timing.launchesPerRun},
         {"median_ms", number(percentile(timing.milliseconds, 0.5))}});
  double throughput = inferencesPerSecond(result);
  Json json = {{"runs", ms.size()},
               {"warmup", warmup},
               {"batch", batch},
               {"median_ms", number(percentile(ms, 0.5))},
               {"mean_ms", number(sum / double(ms.size()))},
               {"p10_ms", number(percentile(ms, 0.1))},
               {"p90_ms", number(percentile(ms, 0.9))},
               {"min_ms", number(*std::min_element(ms.begin(), ms.end()))},
               {"inferences_per_s", number(throughput)},
               {"samples_per_s", number(throughput * double(batch))}};
  if (result.energyJoules) {
    json["energy_j_per_run"] = number(*result.energyJoules / double(ms.size()));
    json["average_power_w"] =
        number(result.energySeconds > 0
                   ? *result.energyJoules / result.energySeconds
                   : NAN);
  }
  json["run_ms"] = std::move(runs);
  json["kernels"] = std::move(kernels);
  if (!result.launchTimingsUnavailable.empty())
    json["kernels_not_timed"] = result.launchTimingsUnavailable;
  return json;
}

/// kiln-run --json: one object on stdout.
void printJson(const Options &options, const DeviceInfo &device,
               const std::vector<OutputSummary> &outputs,
               const std::optional<Json> &bench) {
  Json list = Json::array();
  for (const OutputSummary &o : outputs) {
    Json head = Json::array();
    for (double v : o.head)
      head.push_back(number(v));
    if (o.isString) {
      list.push_back({{"name", o.name},
                      {"dtype", "string"},
                      {"shape", o.shape},
                      {"first", o.headStrings}});
      continue;
    }
    bool any = o.count > o.nonFinite;
    list.push_back({{"name", o.name},
                    {"dtype", std::string(dtypeName(o.dtype))},
                    {"shape", o.shape},
                    {"min", any ? number(o.min) : Json(nullptr)},
                    {"max", any ? number(o.max) : Json(nullptr)},
                    {"mean", any ? number(o.mean) : Json(nullptr)},
                    {"non_finite", o.nonFinite},
                    {"first", std::move(head)}});
  }
  Json json = {{"kiln_version", buildInfo().version},
               {"model", options.model},
               {"device", {{"kind", device.kind}, {"name", device.name}}},
               {"outputs", std::move(list)},
               {"bench", bench ? *bench : Json(nullptr)}};
  fmt::print("{}\n", dump(json));
}

int runTool(const Options &options) {
  Expected<Artifact> loaded = readArtifact(options.model);
  if (!loaded)
    return fail(loaded.error().message());
  if (!options.weightsDir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(options.weightsDir, ec))
      return fail(fmt::format("--weights: '{}' is not a directory",
                              options.weightsDir));
    auto fromDirectory = [&](const std::string &initializer)
        -> Expected<std::optional<NpyArray>> {
      std::string path =
          options.weightsDir + "/" + sanitizeFileName(initializer) + ".npy";
      std::error_code ec;
      if (!std::filesystem::exists(path, ec))
        return std::optional<NpyArray>();
      Expected<NpyArray> array = readNpy(path);
      if (!array)
        return array.takeError();
      return std::optional<NpyArray>(array.take());
    };
    if (Error err = bindWeights(*loaded, fromDirectory))
      return fail(fmt::format("{} (weights are read from {}/<initializer>.npy)",
                              err.withContext(options.model).message(),
                              options.weightsDir));
  }
  if (loaded->strippedWeightBytes != 0 && options.weightsDir.empty())
    return fail(fmt::format("{}: its weights were stripped (kilnc "
                            "--strip-weights): bind them with --weights DIR",
                            options.model));
  auto artifact = std::make_shared<const Artifact>(loaded.take());

  // Inputs, checked against the signature before any device is touched.
  std::map<std::string, HostTensor> inputs;
  // A sequence input (kilnc --sequence x=N) takes its N files as one
  // comma-separated list: -i x=a.npy,b.npy binds x[0] and x[1].
  std::vector<std::pair<std::string, std::string>> inputFiles;
  for (const auto &[name, file] : options.inputFiles) {
    const SignatureGroup *group = artifact->findInputGroup(name);
    if (!group || !group->isSequence()) {
      inputFiles.emplace_back(name, file);
      continue;
    }
    std::vector<std::string> files;
    for (size_t start = 0;;) {
      size_t comma = file.find(',', start);
      files.push_back(file.substr(start, comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    if (Error err = checkSequenceInput(*artifact, name, files.size()))
      return fail(
          fmt::format("{} (-i {}=FILE.npy,FILE.npy,...)", err.message(), name));
    for (size_t i = 0; i < files.size(); ++i)
      inputFiles.emplace_back(sequenceElementName(name, i), files[i]);
  }
  // Format 1.9: inputs only host steps read (strings, and numbers no
  // kernel reads), bound once the session exists (it checks them).
  std::map<std::string, HostTensor> hostInputs;
  const HostProgram &host = artifact->host;
  for (const auto &[name, file] : inputFiles) {
    if (inputs.count(name) || hostInputs.count(name))
      return fail(fmt::format("input '{}' is given twice", name));
    Expected<NpyArray> array = readNpy(file);
    if (!array)
      return fail(array.error().message());
    const HostTensorDecl *hostInput = host.findInput(name);
    if (hostInput && hostInput->isString != array->isString)
      return fail(fmt::format("{}: input '{}' is {}, the file holds {}", file,
                              name,
                              describeHostType(hostInput->isString,
                                               hostInput->dtype),
                              array->isString ? "strings ('<U')"
                                              : dtypeName(array->dtype)));
    if (array->isString && !hostInput)
      return fail(fmt::format("{}: input '{}' is not a string input", file,
                              name));
    HostTensor tensor;
    tensor.dtype = array->dtype;
    tensor.shape = array->shape;
    tensor.data = std::move(array->data);
    if (hostInput && !artifact->findInput(name)) {
      tensor.isString = array->isString;
      tensor.strings = std::move(array->strings);
      hostInputs[name] = std::move(tensor);
      continue;
    }
    if (hostInput)
      hostInputs[name] = tensor;
    // '|V1' bytes are any float8 type: the signature says which.
    if (const TensorSignature *signature = artifact->findInput(name)) {
      if (npyDTypeMatches(array->dtype, signature->dtype))
        tensor.dtype = signature->dtype;
      else if (isFloat8DType(array->dtype))
        return fail(fmt::format("{}: input '{}': '|V1' data (float8 bytes) "
                                "does not match the signature's {}",
                                file, name, dtypeName(signature->dtype)));
    }
    if (Error err = checkInput(*artifact, name, tensor.dtype, tensor.shape,
                               tensor.data.size()))
      return fail(err.withContext(file).message());
    inputs[name] = std::move(tensor);
  }
  // --sizes: the sizes of the random inputs, one set per run of a sweep.
  std::vector<SymbolSizes> runSizes = {compiledSizes(*artifact)};
  if (!options.sizes.empty()) {
    Expected<std::vector<SymbolSizes>> runs =
        tools::sizesToRun(*artifact, options.sizes);
    if (!runs)
      return fail(runs.error().message());
    runSizes = runs.take();
  }
  std::mt19937_64 rng(options.seed);
  for (const HostTensorDecl &input : host.inputs)
    if (!hostInputs.count(input.name))
      return fail(fmt::format("input '{}' ({} {}) is not given; use -i "
                              "{}=FILE.npy{}",
                              input.name,
                              describeHostType(input.isString, input.dtype),
                              formatShape(input.shape), input.name,
                              input.isString ? " (a NumPy str array, saved "
                                               "as '<U')"
                                             : ""));
  for (const TensorSignature &input : artifact->inputs) {
    if (inputs.count(input.name) || host.writesDeviceInput(input.name) ||
        artifact->findSizeMask(input.name))
      continue;
    if (!options.randomInputs)
      return fail(
          fmt::format("input '{}' ({} {}) is not given; use -i {}=FILE.npy "
                      "or --random-inputs",
                      input.name, dtypeName(input.dtype),
                      describeShape(*artifact, input), input.name));
    inputs[input.name] =
        randomTensor(input, shapeAt(input, runSizes.front()), rng);
  }

  // Inputs that share a symbolic dim (kilnc --dim) must agree on its size.
  {
    std::vector<std::optional<Shape>> shapes;
    for (const TensorSignature &input : artifact->inputs)
      shapes.push_back(host.writesDeviceInput(input.name) ||
                               artifact->findSizeMask(input.name)
                           ? std::optional<Shape>(input.shape)
                           : std::optional<Shape>(inputs.at(input.name).shape));
    Expected<SymbolSizes> sizes = resolveSizes(*artifact, shapes);
    if (!sizes)
      return fail(sizes.error().message());
  }

  // Profile outputs: everything that can fail is checked before the run.
  bool emu = options.device == "emu";
  bool wantReport = options.profile || !options.trace.empty();
  for (const std::string *path : {&options.profileJson, &options.trace})
    if (!path->empty())
      if (Error err = checkWritable(*path))
        return fail(err.message());
  std::optional<ProfileReport> estimates;
  if (!options.estimateFrom.empty()) {
    Expected<ProfileReport> read = readProfileJson(options.estimateFrom);
    if (!read)
      return fail(read.error().withContext("--estimate-from").message());
    estimates = read.take();
  }
  std::optional<GpuTarget> perfTarget;
  if ((wantReport || !options.perfTarget.empty()) && emu) {
    Expected<std::vector<GpuTarget>> table = loadTargetTable();
    if (!table)
      return fail(table.error().message());
    Expected<GpuTarget> target = findTarget(
        *table,
        options.perfTarget.empty() ? artifact->target : options.perfTarget);
    if (!target)
      return fail(target.error().message());
    perfTarget = target.take();
  }

  // The emu device reads its checks from the environment.
  if (!options.checks.empty())
    ::setenv("KILN_EMU_CHECK", options.checks.c_str(), /*overwrite=*/1);
  Expected<std::unique_ptr<Device>> device = createDevice(options.device);
  if (!device)
    return fail(device.error().message());
  std::shared_ptr<Device> sharedDevice = device.take();
  SessionOptions sessionOptions;
  sessionOptions.useGraph = options.useGraph;
  Expected<std::unique_ptr<Session>> session =
      Session::create(artifact, sharedDevice, sessionOptions);
  if (!session)
    return fail(session.error().message());
  for (const auto &[name, tensor] : inputs)
    if (Error err = (*session)->bindInput(name, tensor))
      return fail(err.message());
  for (const auto &[name, tensor] : hostInputs)
    if (!artifact->findInput(name))
      if (Error err = (*session)->bindInput(name, tensor))
        return fail(err.message());

  if (runSizes.size() > 1) {
    // --bench R --sizes N=1,8,32: each size in turn, one line each; the
    // outputs printed below are the last size's.
    for (const SymbolSizes &sizes : runSizes) {
      for (const TensorSignature &input : artifact->inputs)
        if (!input.symbolicAxes.empty())
          if (Error err = (*session)->bindInput(
                  input.name, randomTensor(input, shapeAt(input, sizes), rng)))
            return fail(err.message());
      Expected<BenchmarkResult> result =
          (*session)->benchmark(options.warmup, options.bench);
      if (!result)
        return runFailed(result.error());
      fmt::print("size {}: per run {}  throughput {:.4g} inferences/s\n",
                 tools::describeSizes(*artifact, sizes),
                 describeTimes(result->runMilliseconds),
                 inferencesPerSecond(*result));
    }
  }

  std::optional<ProfileReport> report;
  if (wantReport && emu) {
    // One counted run; its outputs are the ones printed below.
    ProfilingOptions profiling;
    profiling.enabled = true;
    profiling.sampleBlocks = options.profileSample;
    if (Error err = sharedDevice->setProfiling(profiling))
      return fail(err.message());
    if (options.profileSample)
      fmt::print(stderr,
                 "kiln-run: note: --profile-sample {} runs only {} blocks of "
                 "each launch: the outputs are incomplete\n",
                 options.profileSample, options.profileSample);
    if (Error err = (*session)->run())
      return runFailed(err);
    Expected<ProfileReport> counted = profileFromCounters(
        *artifact, (*session)->lastRunLaunches(),
        sharedDevice->takeLaunchProfiles(), *perfTarget, options.profileSample);
    if (!counted)
      return fail(counted.error().message());
    report = counted.take();
    if (Error err = sharedDevice->setProfiling(ProfilingOptions()))
      return fail(err.message());
  }

  // On cuda a profile is measured: the --bench runs, or 10 of them.
  unsigned benchRuns = runSizes.size() > 1 ? 0 : options.bench;
  std::optional<Json> benchJson;
  if (wantReport && !emu && benchRuns == 0)
    benchRuns = 10;
  if (benchRuns) {
    Expected<BenchmarkResult> result =
        (*session)->benchmark(options.warmup, benchRuns);
    if (!result)
      return runFailed(result.error());
    if (options.bench && options.json)
      benchJson =
          benchmarkJson(*result, options.warmup, batchOf(*artifact, inputs));
    else if (options.bench)
      printBenchmark(*result, options.warmup, sharedDevice->info(), *artifact,
                     batchOf(*artifact, inputs));
    if (wantReport && !emu) {
      Expected<ProfileReport> measured =
          profileFromBenchmark(*artifact, *result, sharedDevice->info());
      if (!measured)
        return fail(measured.error().message());
      report = measured.take();
      if (estimates)
        if (Error err = mergeEstimates(*report, *estimates))
          return fail(err.withContext(fmt::format("--estimate-from {}",
                                                  options.estimateFrom))
                          .message());
    }
  } else if (!report && runSizes.size() == 1) {
    if (Error err = (*session)->run())
      return runFailed(err);
  }

  if (report) {
    if (options.profile)
      fmt::print("{}", formatProfileTable(*report));
    if (!options.profileJson.empty())
      if (Error err = writeTextFile(options.profileJson, profileToJson(*report)))
        return fail(err.message());
    if (!options.trace.empty())
      if (Error err = writeTextFile(options.trace, traceToJson(*report)))
        return fail(err.message());
  }

  if (!options.outputDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.outputDir, ec);
    if (ec)
      return fail(fmt::format("cannot create output directory '{}': {}",
                              options.outputDir, ec.message()));
  }
  if (!options.json)
    printControlRegions(*artifact, **session, options.useGraph);
  std::set<std::string> usedNames;
  std::vector<OutputSummary> summaries;
  std::vector<std::string> outputNames;
  for (const TensorSignature &output : artifact->outputs)
    if (!host.hidesDeviceOutput(output.name))
      outputNames.push_back(output.name);
  for (const HostTensorDecl &output : host.outputs)
    outputNames.push_back(output.name);
  for (const std::string &name : outputNames) {
    Expected<HostTensor> tensor = (*session)->readOutput(name);
    if (!tensor)
      return internalError(tensor.error().message());
    const TensorSignature *signature = artifact->findOutput(name);
    if (tensor->isString)
      summaries.push_back(summarizeStrings(name, *tensor));
    else if (signature && !host.findOutput(name))
      summaries.push_back(summarize(*signature, *tensor));
    else {
      TensorSignature described;
      described.name = name;
      described.dtype = tensor->dtype;
      described.shape = tensor->shape;
      summaries.push_back(summarize(described, *tensor));
    }
    if (!options.json)
      printSummary(summaries.back());
    if (options.outputDir.empty())
      continue;
    // A sequence's tensors are NAME.0.npy, NAME.1.npy, ...
    std::string base = sanitizeFileName(name);
    for (const SignatureGroup &group : artifact->outputGroups)
      for (uint32_t i = 0; group.isSequence() && i < group.count; ++i)
        if (artifact->outputs[group.first + i].name == name)
          base = fmt::format("{}.{}", sanitizeFileName(group.name), i);
    std::string file = base;
    for (int n = 2; usedNames.count(file); ++n)
      file = fmt::format("{}_{}", base, n); // two names that sanitize alike
    usedNames.insert(file);
    std::string path = options.outputDir + "/" + file + ".npy";
    Error written =
        tensor->isString
            ? writeNpyStrings(path, tensor->shape, tensor->strings)
            : writeNpy(path, tensor->dtype, tensor->shape, tensor->data.data(),
                       tensor->data.size());
    if (written)
      return fail(written.message());
  }
  if (!options.json)
    for (const SignatureGroup &group : artifact->outputGroups)
      if (!group.present)
        fmt::print("{}: absent ({})\n", group.name,
                   signatureGroupKindName(group.kind));
  if (options.json)
    printJson(options, sharedDevice->info(), summaries, benchJson);
  return kExitSuccess;
}

} // namespace

int main(int argc, char **argv) {
  installCrashHandlers();
  Expected<Options> options = parseArguments(argc, argv);
  if (!options) {
    if (options.error().message().empty()) {
      fmt::print("{}", kUsage);
      return kExitSuccess;
    }
    return fail(options.error().message());
  }
  if (options->version) {
    printVersion();
    return kExitSuccess;
  }
  // The runtime reports errors as values; an exception here is a bug.
  try {
    return runTool(*options);
  } catch (const std::exception &e) {
    return internalError(e.what());
  }
}

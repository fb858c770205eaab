//===- kiln-tune-worker.cpp - Time contraction candidates for kilnc --tune -===//
//
// kilnc --tune starts this tool once per contraction problem (and again
// after a candidate that failed), so that a kernel that faults, hangs or
// corrupts its context takes down this process and not the compiler. It
// reads a job file kilnc wrote (docs/runtime.md, "kiln-tune-worker"):
//
//   kiln-tune-job 1
//   device emu|cuda
//   target sm_90            the performance model's figures (emu)
//   seed 7                  the inputs' random data
//   repeats 20              timed runs per candidate (cuda)
//   timeout 60              seconds one candidate may take
//   buffer A 4096 bf16      an input, filled with seeded random integers
//   output C 8192 f32       the output, zeroed before each candidate
//   candidate 0 c0.ptx 0 1  index, PTX file (relative: to the job file),
//                           workspace bytes, kernel count, and optionally
//                           semaphore bytes (zeroed before the candidate)
//   kernel NAME gx gy gz bx by bz smem ARG...   ARG: A, B, C, W (workspace),
//                           S (split-K's semaphores),
//                           BAD (an address nothing owns), u32:V, u64:V,
//                           tmap:BUF:DTYPE:RANK:DIMS:STRIDES:BOX:SWIZZLE:L2:OOB
//                           (a TMA tensor map over buffer BUF; the lists
//                           comma-separated, as TensorMapRecord holds them)
//   time 0 1 2              the candidates to time
//
// A job with no candidates (and no output) only prints the device line.
//
// Candidate 0 is the reference (the heuristic's pick): it runs first, and
// every other candidate's output must match it. The inputs are integers in
// [-2, 2], so every product and partial sum is exact in fp32 (for K below
// 2^22) and any correct kernel, whatever its tiling or split-K order, rounds
// the same exact sum to the output type: the bound is one unit in the last
// place of the output type, which only a wrong kernel exceeds.
//
// It prints one JSON object a line, flushed as it goes, so that kilnc knows
// which candidates finished before a crash:
//   {"device":"cuda","name":"NVIDIA H200","cc":90}
//   {"candidate":1,"ok":true,"us":12.5,"max_error":0}
//   {"candidate":2,"ok":false,"error":"..."}
//   {"done":true}
// Exit status: 0 when it got through the job, 3 after a candidate failed
// (the device may be unusable: kilnc starts a new worker for the rest),
// 124 when a candidate ran past the timeout, 1 for a bad job file or device.
//
// On cuda a candidate's time is the median of `repeats` CUDA-event timings
// after one warm-up run; on emu it is the performance model's estimate
// (Profile.h estimateLaunch) from the emulator's counters of one run, which
// ranks candidates by the model, not by a measurement.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Device.h"
#include "kiln/runtime/Profile.h"
#include "kiln/runtime/Version.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace kiln::runtime;

namespace {

constexpr int kExitBadJob = 1;
constexpr int kExitCandidateFailed = 3;
constexpr int kExitTimeout = 124;

enum class ElementType { F32, F16, BF16 };

bool parseElementType(const std::string &name, ElementType &type) {
  if (name == "f32")
    type = ElementType::F32;
  else if (name == "f16")
    type = ElementType::F16;
  else if (name == "bf16")
    type = ElementType::BF16;
  else
    return false;
  return true;
}

uint32_t elementBytes(ElementType type) {
  return type == ElementType::F32 ? 4 : 2;
}

struct BufferSpec {
  std::string name;
  uint64_t bytes = 0;
  ElementType type = ElementType::F32;
};

struct KernelSpec {
  std::string name;
  LaunchConfig config;
  std::vector<std::string> args;
};

struct CandidateSpec {
  unsigned index = 0;
  std::string ptxPath;
  uint64_t workspaceBytes = 0;
  uint64_t semaphoreBytes = 0;
  std::vector<KernelSpec> kernels;
};

struct Job {
  std::string device = "emu";
  std::string target = "sm_90";
  uint64_t seed = 1;
  unsigned repeats = 20;
  unsigned timeoutSeconds = 60;
  std::vector<BufferSpec> inputs;
  BufferSpec output;
  std::vector<CandidateSpec> candidates;
  std::vector<unsigned> timed;
};

Expected<Job> readJob(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return Error::failure(fmt::format("cannot read job file '{}'", path));
  Job job;
  std::string line;
  unsigned lineNo = 0;
  auto bad = [&](const std::string &why) {
    return Error::failure(fmt::format("{}:{}: {}", path, lineNo, why));
  };
  bool header = false, haveOutput = false;
  while (std::getline(in, line)) {
    ++lineNo;
    std::istringstream words(line);
    std::string word;
    if (!(words >> word) || word[0] == '#')
      continue;
    if (!header) {
      unsigned version = 0;
      if (word != "kiln-tune-job" || !(words >> version) || version != 1)
        return bad("not a kiln-tune-job 1 file");
      header = true;
      continue;
    }
    if (word == "device") {
      words >> job.device;
    } else if (word == "target") {
      words >> job.target;
    } else if (word == "seed") {
      words >> job.seed;
    } else if (word == "repeats") {
      words >> job.repeats;
    } else if (word == "timeout") {
      words >> job.timeoutSeconds;
    } else if (word == "buffer" || word == "output") {
      BufferSpec buffer;
      std::string type;
      if (!(words >> buffer.name >> buffer.bytes >> type) ||
          !parseElementType(type, buffer.type) || !buffer.bytes)
        return bad("expected '" + word + " NAME BYTES f32|f16|bf16'");
      if (word == "output") {
        job.output = buffer;
        haveOutput = true;
      } else {
        job.inputs.push_back(buffer);
      }
    } else if (word == "candidate") {
      CandidateSpec c;
      unsigned kernels = 0;
      if (!(words >> c.index >> c.ptxPath >> c.workspaceBytes >> kernels) ||
          !kernels)
        return bad("expected 'candidate INDEX PTX WORKSPACE KERNELS "
                   "[SEMAPHORES]'");
      if (!(words >> c.semaphoreBytes))
        c.semaphoreBytes = 0;
      // A relative PTX path is relative to the job file (exported jobs move
      // to the GPU machine as a directory).
      if (c.ptxPath[0] != '/' && path.find('/') != std::string::npos)
        c.ptxPath = path.substr(0, path.rfind('/') + 1) + c.ptxPath;
      job.candidates.push_back(c);
    } else if (word == "kernel") {
      if (job.candidates.empty())
        return bad("a kernel before any candidate");
      KernelSpec k;
      LaunchConfig &lc = k.config;
      if (!(words >> k.name >> lc.grid.x >> lc.grid.y >> lc.grid.z >>
            lc.block.x >> lc.block.y >> lc.block.z >> lc.dynamicSharedBytes))
        return bad("expected 'kernel NAME GX GY GZ BX BY BZ SMEM ARG...'");
      std::string arg;
      while (words >> arg)
        k.args.push_back(arg);
      job.candidates.back().kernels.push_back(k);
    } else if (word == "time") {
      unsigned index;
      while (words >> index)
        job.timed.push_back(index);
    } else {
      return bad("unknown directive '" + word + "'");
    }
  }
  if (!header)
    return Error::failure(fmt::format("{}: empty job file", path));
  // A job without candidates only reports the device (kilnc's probe).
  if (!job.candidates.empty() && !haveOutput)
    return Error::failure(fmt::format("{}: candidates need an output", path));
  if (job.device != "emu" && job.device != "cuda")
    return Error::failure(
        fmt::format("{}: device '{}' is not cuda or emu", path, job.device));
  return job;
}

/// The bits of a small integer (|v| <= 2) in the element type: exact in all
/// three.
void storeSmallInteger(uint8_t *out, ElementType type, int v) {
  float f = float(v);
  if (type == ElementType::F32) {
    std::memcpy(out, &f, 4);
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t h;
  if (type == ElementType::BF16) {
    h = uint16_t(bits >> 16);
  } else {
    // f32 -> f16 for values with a short mantissa and a small exponent.
    uint16_t sign = uint16_t((bits >> 16) & 0x8000);
    int exponent = int((bits >> 23) & 0xff);
    h = v == 0 ? sign
               : uint16_t(sign | ((exponent - 127 + 15) << 10) |
                          ((bits >> 13) & 0x3ff));
  }
  std::memcpy(out, &h, 2);
}

double loadElement(const uint8_t *in, ElementType type) {
  if (type == ElementType::F32) {
    float f;
    std::memcpy(&f, in, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, in, 2);
  if (type == ElementType::BF16) {
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude =
      exponent == 0    ? std::ldexp(mantissa, -24)
      : exponent == 31 ? (mantissa ? NAN : INFINITY)
                       : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

/// One unit in the last place of the type, relative.
double relativeUlp(ElementType type) {
  return type == ElementType::F32    ? std::ldexp(1.0, -23)
         : type == ElementType::BF16 ? std::ldexp(1.0, -7)
                                     : std::ldexp(1.0, -10);
}

void printLine(const std::string &json) {
  std::fputs(json.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

/// One line of the worker's output (kilnc reads them with llvm::json).
std::string line(const nlohmann::ordered_json &json) {
  return json.dump(-1, ' ', /*ensure_ascii=*/false,
                   nlohmann::ordered_json::error_handler_t::replace);
}

/// Ends the process when a candidate runs past the job's timeout (a hung
/// kernel cannot be interrupted otherwise; the driver tears the context down
/// with the process).
class Watchdog {
public:
  explicit Watchdog(unsigned seconds) : limit(seconds) {
    thread = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    thread.join();
  }
  void arm(unsigned candidate) {
    std::lock_guard<std::mutex> lock(mutex);
    current = candidate;
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit);
    armed = true;
    wake.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lock(mutex);
    armed = false;
  }

private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      if (!armed) {
        wake.wait(lock);
        continue;
      }
      if (wake.wait_until(lock, deadline) == std::cv_status::timeout &&
          armed && std::chrono::steady_clock::now() >= deadline) {
        printLine(line({{"candidate", current},
                        {"ok", false},
                        {"error", fmt::format("timed out after {} s", limit)}}));
        std::_Exit(kExitTimeout);
      }
    }
  }

  unsigned limit;
  std::mutex mutex;
  std::condition_variable wake;
  std::thread thread;
  bool armed = false, stopping = false;
  unsigned current = 0;
  std::chrono::steady_clock::time_point deadline;
};

class Worker {
public:
  Worker(const Job &job, Device &device) : job(job), device(device) {}

  Error setUp();
  /// Runs candidate `c` once (its output into the output buffer) and, when
  /// `timed`, times it; the output is compared with the reference unless
  /// this is the reference. Prints the candidate's line.
  Error run(const CandidateSpec &c, bool timed);
  /// The performance model's figures (emu), or null (cuda).
  const GpuTarget *modelTarget() const { return target ? &*target : nullptr; }

private:
  Expected<DevicePtr> pointerFor(const std::string &arg, DevicePtr workspace,
                                 DevicePtr semaphores);
  Expected<PackedParams> paramsFor(const KernelSpec &k, DevicePtr workspace,
                                   DevicePtr semaphores);
  Expected<double> estimatedSeconds(const std::vector<LaunchProfile> &runs,
                                    const std::string &ptx);

  const Job &job;
  Device &device;
  StreamHandle stream;
  std::map<std::string, DevicePtr> buffers;
  DevicePtr output = 0;
  std::vector<uint8_t> reference;
  std::optional<GpuTarget> target;
};

Error Worker::setUp() {
  Expected<StreamHandle> s = device.createStream();
  if (!s)
    return s.takeError();
  stream = *s;
  std::mt19937_64 random(job.seed);
  for (const BufferSpec &b : job.inputs) {
    uint32_t size = elementBytes(b.type);
    std::vector<uint8_t> data(b.bytes, 0);
    for (uint64_t i = 0; i + size <= b.bytes; i += size)
      storeSmallInteger(&data[i], b.type, int(random() % 5) - 2);
    Expected<DevicePtr> ptr = device.allocate(b.bytes);
    if (!ptr)
      return ptr.takeError();
    if (Error err = device.copyToDevice(*ptr, data.data(), b.bytes))
      return err;
    buffers[b.name] = *ptr;
  }
  if (job.output.bytes) {
    Expected<DevicePtr> out = device.allocate(job.output.bytes);
    if (!out)
      return out.takeError();
    output = *out;
  }
  if (job.device == "emu") {
    Expected<std::vector<GpuTarget>> table = loadTargetTable();
    if (!table)
      return table.takeError();
    Expected<GpuTarget> found = findTarget(*table, job.target);
    if (!found)
      return found.takeError();
    target = *found;
  }
  return Error::success();
}

Expected<DevicePtr> Worker::pointerFor(const std::string &arg,
                                       DevicePtr workspace,
                                       DevicePtr semaphores) {
  if (arg == job.output.name)
    return output;
  if (arg == "W") {
    if (!workspace)
      return Error::failure("a workspace argument without a workspace");
    return workspace;
  }
  if (arg == "S") {
    if (!semaphores)
      return Error::failure("a semaphores argument without semaphores");
    return semaphores;
  }
  if (arg == "BAD") // kilnc's KILN_TUNE_INJECT_FAULT: a pointer to nothing.
    return DevicePtr(0x10);
  auto it = buffers.find(arg);
  if (it == buffers.end())
    return Error::failure("unknown buffer '" + arg + "'");
  return it->second;
}

Expected<PackedParams> Worker::paramsFor(const KernelSpec &k,
                                         DevicePtr workspace,
                                         DevicePtr semaphores) {
  PackedParams params;
  for (const std::string &arg : k.args) {
    if (arg.rfind("u32:", 0) == 0) {
      params.addU32(uint32_t(std::strtoull(arg.c_str() + 4, nullptr, 10)));
    } else if (arg.rfind("u64:", 0) == 0) {
      params.addU64(std::strtoull(arg.c_str() + 4, nullptr, 10));
    } else if (arg.rfind("tmap:", 0) == 0) {
      std::vector<std::string> f;
      std::stringstream fields(arg.substr(5));
      for (std::string part; std::getline(fields, part, ':');)
        f.push_back(part);
      std::optional<DType> dtype =
          f.size() == 9 ? parseDType(f[1]) : std::nullopt;
      if (!dtype)
        return Error::failure("bad tensor map argument '" + arg + "'");
      TensorMapRecord map;
      map.dtype = *dtype;
      map.rank = uint32_t(std::strtoul(f[2].c_str(), nullptr, 10));
      auto list = [](const std::string &text, auto *out, size_t n) {
        std::stringstream in(text);
        size_t i = 0;
        for (std::string v; std::getline(in, v, ',') && i < n; ++i)
          out[i] = std::strtoull(v.c_str(), nullptr, 10);
      };
      list(f[3], map.globalDims, kTensorMapMaxRank);
      list(f[4], map.globalStrides, kTensorMapMaxRank - 1);
      list(f[5], map.boxDims, kTensorMapMaxRank);
      map.swizzle = uint32_t(std::strtoul(f[6].c_str(), nullptr, 10));
      map.l2Promotion = uint32_t(std::strtoul(f[7].c_str(), nullptr, 10));
      map.oobFill = uint32_t(std::strtoul(f[8].c_str(), nullptr, 10));
      Expected<DevicePtr> ptr = pointerFor(f[0], workspace, semaphores);
      if (!ptr)
        return ptr.takeError();
      alignas(64) uint8_t bytes[128] = {};
      if (Error err = device.encodeTensorMap(
              map, *ptr, "kernel '" + k.name + "' tensor map over " + f[0],
              bytes))
        return err;
      params.addBytes(bytes, sizeof(bytes), 64);
    } else {
      Expected<DevicePtr> ptr = pointerFor(arg, workspace, semaphores);
      if (!ptr)
        return ptr.takeError();
      params.addU64(*ptr);
    }
  }
  return params;
}

Expected<double>
Worker::estimatedSeconds(const std::vector<LaunchProfile> &runs,
                         const std::string &ptx) {
  double seconds = 0;
  for (const LaunchProfile &launch : runs) {
    Expected<LaunchEstimate> estimate =
        estimateLaunch(*target, scaleSampledCounters(launch.counters),
                       launch.config, std::nullopt, mmaTypeOfPtx(ptx));
    if (!estimate)
      return estimate.takeError();
    seconds += estimate->seconds;
  }
  return seconds;
}

Error Worker::run(const CandidateSpec &c, bool timed) {
  std::ifstream in(c.ptxPath);
  if (!in)
    return Error::failure("cannot read '" + c.ptxPath + "'");
  std::string ptx((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  ModuleImage image;
  image.kernelName = c.kernels.front().name;
  image.ptx = ptx;
  Expected<ModuleHandle> module = device.loadModule(image);
  if (!module)
    return module.takeError();
  std::vector<FunctionHandle> functions;
  for (const KernelSpec &k : c.kernels) {
    Expected<FunctionHandle> f = device.getFunction(*module, k.name);
    if (!f)
      return f.takeError();
    functions.push_back(*f);
  }
  DevicePtr workspace = 0;
  if (c.workspaceBytes) {
    Expected<DevicePtr> w = device.allocate(c.workspaceBytes);
    if (!w)
      return w.takeError();
    workspace = *w;
  }
  // Split-K's semaphores: zero before the first launch; each launch leaves
  // them zero (every block runs here).
  DevicePtr semaphores = 0;
  if (c.semaphoreBytes) {
    Expected<DevicePtr> s = device.allocate(c.semaphoreBytes);
    if (!s)
      return s.takeError();
    semaphores = *s;
    std::vector<uint8_t> zeros(c.semaphoreBytes, 0);
    if (Error err = device.copyToDevice(semaphores, zeros.data(), zeros.size()))
      return err;
  }
  std::vector<PackedParams> params;
  for (const KernelSpec &k : c.kernels) {
    Expected<PackedParams> p = paramsFor(k, workspace, semaphores);
    if (!p)
      return p.takeError();
    params.push_back(p.take());
  }
  auto launchAll = [&]() -> Error {
    for (size_t i = 0; i < c.kernels.size(); ++i)
      if (Error err = device.launch(functions[i], c.kernels[i].config,
                                    params[i], stream))
        return err.withContext(c.kernels[i].name);
    return Error::success();
  };

  std::vector<uint8_t> zeros(job.output.bytes, 0);
  if (Error err = device.copyToDevice(output, zeros.data(), zeros.size()))
    return err;
  bool emu = job.device == "emu";
  if (emu)
    if (Error err = device.setProfiling({/*enabled=*/true}))
      return err;
  if (Error err = launchAll())
    return err;
  if (Error err = device.synchronize(stream))
    return err;
  std::optional<double> seconds;
  if (emu) {
    std::vector<LaunchProfile> runs = device.takeLaunchProfiles();
    if (Error err = device.setProfiling({}))
      return err;
    Expected<double> estimate = estimatedSeconds(runs, ptx);
    if (!estimate)
      return estimate.takeError();
    seconds = *estimate;
  }
  std::vector<uint8_t> result(job.output.bytes);
  if (Error err = device.copyToHost(result.data(), output, result.size()))
    return err;

  double maxError = 0;
  if (reference.empty()) {
    reference = result;
  } else {
    uint32_t size = elementBytes(job.output.type);
    double ulp = relativeUlp(job.output.type);
    for (uint64_t i = 0; i + size <= result.size(); i += size) {
      if (!std::memcmp(&result[i], &reference[i], size))
        continue;
      double got = loadElement(&result[i], job.output.type);
      double want = loadElement(&reference[i], job.output.type);
      double error = std::fabs(got - want);
      if (!(error <= ulp * std::fabs(want)))
        return Error::failure(fmt::format(
            "element {} is {} where the reference kernel gives {}",
            i / size, got, want));
      maxError = std::max(maxError, error);
    }
  }

  if (timed && !emu) {
    Expected<EventHandle> start = device.createEvent();
    Expected<EventHandle> end = device.createEvent();
    if (!start)
      return start.takeError();
    if (!end)
      return end.takeError();
    std::vector<double> times;
    for (unsigned r = 0; r < std::max(1u, job.repeats); ++r) {
      if (Error err = device.recordEvent(*start, stream))
        return err;
      if (Error err = launchAll())
        return err;
      if (Error err = device.recordEvent(*end, stream))
        return err;
      Expected<float> ms = device.elapsedMilliseconds(*start, *end);
      if (!ms)
        return ms.takeError();
      times.push_back(*ms * 1e-3);
    }
    std::sort(times.begin(), times.end());
    seconds = times[times.size() / 2];
    (void)device.destroyEvent(*start);
    (void)device.destroyEvent(*end);
  }
  if (workspace)
    (void)device.deallocate(workspace);
  if (semaphores)
    (void)device.deallocate(semaphores);
  (void)device.unloadModule(*module);
  if (timed)
    printLine(line({{"candidate", c.index},
                    {"ok", true},
                    // 0.1 ns: finer than a GPU event resolves.
                    {"us", std::round(seconds.value_or(0) * 1e10) / 1e4},
                    {"max_error", maxError}}));
  return Error::success();
}

int usage() {
  std::fputs("usage: kiln-tune-worker JOB-FILE\n"
             "Runs the contraction candidates a kilnc --tune job file lists "
             "and prints one JSON line per candidate (docs/runtime.md).\n",
             stderr);
  return kExitBadJob;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::puts(versionLine("kiln-tune-worker").c_str());
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-')
    return usage();
  Expected<Job> job = readJob(argv[1]);
  if (!job) {
    std::fprintf(stderr, "kiln-tune-worker: error: %s\n",
                 job.error().message().c_str());
    return kExitBadJob;
  }
  Expected<std::unique_ptr<Device>> device = createDevice(job->device);
  if (!device) {
    std::fprintf(stderr, "kiln-tune-worker: error: %s\n",
                 device.error().message().c_str());
    return kExitBadJob;
  }
  Worker worker(*job, **device);
  if (Error err = worker.setUp()) {
    std::fprintf(stderr, "kiln-tune-worker: error: %s\n",
                 err.message().c_str());
    return kExitBadJob;
  }
  // On emu the times are the model's for the job's target: the target is
  // what they are "measured" on.
  const DeviceInfo &info = (*device)->info();
  std::string name = info.name;
  uint32_t cc = info.computeCapability;
  if (const GpuTarget *target = worker.modelTarget()) {
    name = fmt::format("{} ({} model)", info.name, target->name);
    cc = target->sm;
  }
  printLine(line({{"device", info.kind}, {"name", name}, {"cc", cc}}));
  Watchdog watchdog(job->timeoutSeconds);
  for (const CandidateSpec &c : job->candidates) {
    bool timed = std::find(job->timed.begin(), job->timed.end(), c.index) !=
                 job->timed.end();
    watchdog.arm(c.index);
    Error err = worker.run(c, timed);
    watchdog.disarm();
    if (err) {
      printLine(line({{"candidate", c.index},
                      {"ok", false},
                      {"error", err.message()}}));
      return kExitCandidateFailed;
    }
  }
  printLine("{\"done\":true}");
  return 0;
}

//===- Tuner.cpp - Choosing configs: cache, tuning in a worker, heuristic -===//
//
// For a problem: a config chosen earlier in this compile, else (without
// --tune) a cache entry that still passes unsupportedReason, else (with
// --tune) the fastest candidate kiln-tune-worker measured, else the
// heuristic. Tuning a problem:
//   1. the first `maxCandidates` distinct configs of candidateConfigs (the
//      heuristic's pick first: it is the reference) are compiled by NVRTC
//      in parallel, with a plain epilogue (the cache key is the problem, not
//      the region's epilogue, which costs the same for every config);
//   2. a job file lists them with their launch geometry and buffers; the
//      worker runs the reference, then each candidate, and prints a JSON
//      line per candidate;
//   3. a worker that stops early (a fault, a crash, a timeout) has failed
//      on the first candidate it did not report: that one is rejected and a
//      new worker runs the rest.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/ContractionTuning.h"

#include "kiln/runtime/Version.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::tuning {

namespace json = llvm::json;

namespace {

/// Bytes an operand spans: the last batch's start plus one matrix.
uint64_t operandBytes(uint64_t batch, uint64_t batchStride, uint64_t rows,
                      uint64_t ld, uint64_t contiguous, uint64_t elementBytes) {
  uint64_t last = (batch > 1 ? (batch - 1) * batchStride : 0) +
                  (rows - 1) * ld + contiguous;
  return last * elementBytes;
}

struct Buffers {
  uint64_t a = 0, b = 0, c = 0;
};

Buffers bufferBytes(const cx::GemmProblem &p) {
  uint64_t in = kiln::runtime::dtypeSize(p.inputType),
           out = kiln::runtime::dtypeSize(p.outputType);
  Buffers bytes;
  bool rowA = p.layoutA == cx::Layout::RowMajor;
  if (p.conv.enabled) {
    // A is the NHWC image the implicit GEMM reads.
    uint64_t images = p.m / (p.conv.p * p.conv.q);
    bytes.a = images * p.conv.h * p.conv.w * p.conv.c * in;
  } else {
    bytes.a = operandBytes(p.batch, p.batchStrideA, rowA ? p.m : p.k,
                           p.ldaOrPacked(), rowA ? p.k : p.m, in);
  }
  bool rowB = p.layoutB == cx::Layout::RowMajor;
  bytes.b = operandBytes(p.batch, p.batchStrideB, rowB ? p.k : p.n,
                         p.ldbOrPacked(), rowB ? p.n : p.k, in);
  bytes.c = operandBytes(p.batch, p.batchStrideC, p.m, p.ldcOrPacked(), p.n,
                         out);
  return bytes;
}

std::string formatMicros(double us) {
  return llvm::formatv("{0:f1} µs", us).str();
}

} // namespace

struct Tuner::Measured {
  std::optional<double> us;
  std::string rejected;
};

Tuner::Tuner(TuneOptions options, uint32_t smVersion, WarningHandler warn)
    : options(std::move(options)), smVersion(smVersion), warn(std::move(warn)) {
}

Tuner::~Tuner() {
  if (!workDir.empty())
    (void)llvm::sys::fs::remove_directories(workDir);
}

llvm::Error Tuner::loadCache() {
  if (cacheLoaded)
    return llvm::Error::success();
  cacheLoaded = true;
  if (options.cachePath.empty())
    return llvm::Error::success();
  std::string warning;
  cache = TuneCache::load(options.cachePath, warning);
  if (!warning.empty()) {
    warn(warning);
    // Tuning rewrites a file it could not use.
    cacheChanged = options.tune;
  }
  if (!options.importDir.empty())
    importResults();
  return llvm::Error::success();
}

void Tuner::importResults() {
  llvm::StringRef dir = options.importDir;
  std::string manifestPath = (dir + "/manifest.json").str();
  auto buffer = llvm::MemoryBuffer::getFile(manifestPath);
  if (!buffer) {
    warn("--tune-import: cannot read '" + manifestPath + "'");
    return;
  }
  llvm::Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  const json::Object *root = parsed ? parsed->getAsObject() : nullptr;
  if (!parsed)
    llvm::consumeError(parsed.takeError());
  const json::Array *jobs = root ? root->getArray("jobs") : nullptr;
  if (!jobs || root->getString("format") != "kiln-tune-jobs") {
    warn("--tune-import: '" + manifestPath + "' is not a tune job manifest");
    return;
  }
  for (const json::Value &value : *jobs) {
    const json::Object *job = value.getAsObject();
    std::optional<llvm::StringRef> name = job ? job->getString("job")
                                              : std::nullopt;
    std::optional<llvm::StringRef> key = job ? job->getString("key")
                                             : std::nullopt;
    const json::Array *configs = job ? job->getArray("configs") : nullptr;
    const json::Object *problem = job ? job->getObject("problem") : nullptr;
    if (!name || !key || !configs || !problem) {
      warn("--tune-import: '" + manifestPath + "': a job without its name, "
           "key, problem or configs");
      continue;
    }
    std::string outPath = (dir + "/" + *name + ".out").str();
    auto out = llvm::MemoryBuffer::getFile(outPath);
    if (!out) {
      warn("--tune-import: no results for " + name->str() + " ('" + outPath +
           "' missing): not imported");
      continue;
    }
    CacheEntry entry;
    std::map<int64_t, double> times;
    llvm::SmallVector<llvm::StringRef> lines;
    (*out)->getBuffer().split(lines, '\n', -1, false);
    for (llvm::StringRef line : lines) {
      llvm::Expected<json::Value> v = json::parse(line);
      if (!v) {
        llvm::consumeError(v.takeError());
        continue;
      }
      const json::Object *o = v->getAsObject();
      if (!o)
        continue;
      if (std::optional<llvm::StringRef> gpu = o->getString("name")) {
        entry.gpu = gpu->str();
        entry.device = o->getString("device").value_or("cuda").str();
        entry.computeCapability =
            static_cast<uint32_t>(o->getInteger("cc").value_or(0));
      } else if (std::optional<int64_t> i = o->getInteger("candidate")) {
        if (o->getBoolean("ok").value_or(false))
          times[*i] = o->getNumber("us").value_or(0);
        else
          warn(llvm::formatv("--tune-import: {0} candidate {1} rejected: {2}",
                             *name, *i,
                             o->getString("error").value_or("failed"))
                   .str());
      }
    }
    if (entry.gpu.empty() || !times.count(0)) {
      warn("--tune-import: " + name->str() +
           ": no device line or no time for the reference: not imported");
      continue;
    }
    int64_t best = 0;
    for (auto [i, us] : times)
      if (us < times[best])
        best = i;
    const json::Object *config =
        size_t(best) < configs->size() ? (*configs)[best].getAsObject()
                                       : nullptr;
    llvm::Expected<cx::GemmConfig> winner =
        config ? configFromJson(*config)
               : llvm::Expected<cx::GemmConfig>(
                     llvm::createStringError("no such config"));
    if (!winner) {
      warn("--tune-import: " + name->str() + ": " +
           llvm::toString(winner.takeError()));
      continue;
    }
    entry.key = key->str();
    entry.problem = *problem;
    entry.config = *winner;
    entry.timeUs = times[best];
    entry.heuristicUs = times[0];
    entry.candidates = static_cast<unsigned>(times.size());
    added.push_back(entry);
    cache.insert(std::move(entry));
    cacheChanged = true;
  }
}

llvm::Error Tuner::probeDevice() {
  if (probed)
    return llvm::Error::success();
  if (options.device != "cuda" && options.device != "emu")
    return llvm::createStringError("--tune-device '" + options.device +
                                   "' is not cuda or emu");
  if (options.workerPath.empty() ||
      !llvm::sys::fs::can_execute(options.workerPath))
    return llvm::createStringError(
        "--tune needs kiln-tune-worker (looked for '" + options.workerPath +
        "')");
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("kiln-tune", dir))
    return llvm::createStringError("--tune: cannot make a temporary "
                                   "directory: " +
                                   ec.message());
  workDir = dir.str().str();
  // A job without candidates: the worker only opens the device.
  std::string job = workDir + "/probe.job";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(job, ec);
    if (ec)
      return llvm::createStringError("--tune: cannot write '" + job +
                                     "': " + ec.message());
    os << "kiln-tune-job 1\ndevice " << options.device << "\ntarget sm_"
       << smVersion << "\n";
  }
  std::string out = workDir + "/probe.out", err = workDir + "/probe.err";
  std::optional<llvm::StringRef> redirects[] = {std::nullopt,
                                                llvm::StringRef(out),
                                                llvm::StringRef(err)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(
      options.workerPath, {options.workerPath, job}, std::nullopt, redirects,
      /*SecondsToWait=*/120, 0, &message);
  auto readAll = [](const std::string &path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    return buffer ? (*buffer)->getBuffer().trim().str() : std::string();
  };
  if (rc != 0) {
    std::string why = readAll(err);
    llvm::StringRef line = llvm::StringRef(why).rsplit('\n').second;
    if (line.empty())
      line = why;
    line.consume_front("kiln-tune-worker: error: ");
    return llvm::createStringError(
        "--tune-device=" + options.device + ": " +
        (line.empty() ? (message.empty() ? "the worker failed" : message)
                      : line.str()));
  }
  std::string first = readAll(out);
  llvm::Expected<json::Value> device =
      json::parse(llvm::StringRef(first).split('\n').first);
  const json::Object *object = device ? device->getAsObject() : nullptr;
  if (!device)
    llvm::consumeError(device.takeError());
  if (!object || !object->getString("name") || !object->getInteger("cc"))
    return llvm::createStringError("--tune: kiln-tune-worker printed no "
                                   "device line");
  deviceName = object->getString("name")->str();
  deviceCc = static_cast<uint32_t>(*object->getInteger("cc"));
  if (deviceCc != smVersion)
    warn(llvm::formatv("--tune: the device '{0}' is sm_{1}, the target is "
                       "sm_{2}: its times may not hold for the target",
                       deviceName, deviceCc, smVersion)
             .str());
  probed = true;
  return llvm::Error::success();
}

llvm::Expected<ConfigChoice> Tuner::choose(const cx::GemmProblem &problem,
                                           cx::Family family) {
  std::string key = problemKey(problem, family);
  if (auto it = chosen.find(key); it != chosen.end())
    return it->second;
  if (llvm::Error err = loadCache())
    return std::move(err);
  cx::GemmConfig heuristic = cx::pickConfig(problem, family, smVersion, options.wgmma,
                                           options.tma);

  auto fromEntry = [&](const CacheEntry &entry) -> std::optional<ConfigChoice> {
    // mma_f16 (mma_tf32, mma_f8, mma_s8) problems on sm_90 may run on
    // wgmma_f16 (wgmma_tf32, wgmma_f8, wgmma_s8) unless --wgmma=false.
    bool familyOk = entry.config.family == family ||
                    (options.wgmma && smVersion >= 90 &&
                     ((family == cx::Family::MmaF16 &&
                       entry.config.family == cx::Family::WgmmaF16) ||
                      (family == cx::Family::MmaTf32 &&
                       entry.config.family == cx::Family::WgmmaTf32) ||
                      (family == cx::Family::MmaF8 &&
                       entry.config.family == cx::Family::WgmmaF8) ||
                      (family == cx::Family::MmaS8 &&
                       entry.config.family == cx::Family::WgmmaS8)));
    std::string why = !familyOk ? "its family is not " +
                                      std::string(cx::familyName(family))
                      : entry.config.tma && !options.tma
                          ? "it uses TMA and --tma=false"
                          : cx::unsupportedReason(problem, entry.config);
    if (why.empty())
      return ConfigChoice{entry.config, "tuned (cache)"};
    warn(llvm::formatv("tune cache '{0}': the entry for '{1}' ({2}) is not "
                       "supported any more ({3}): using the heuristic's "
                       "config",
                       options.cachePath, key, entry.config.describe(), why)
             .str());
    return std::nullopt;
  };

  ConfigChoice choice{heuristic, "heuristic"};
  if (!options.tune || !options.exportDir.empty()) {
    if (const CacheEntry *entry = cache.lookup(key, smVersion))
      if (std::optional<ConfigChoice> hit = fromEntry(*entry))
        choice = *hit;
    if (options.tune && choice.origin == "heuristic") {
      // Exported for a GPU machine: the heuristic compiles meanwhile.
      llvm::Expected<std::optional<ConfigChoice>> exported =
          tune(problem, family, key);
      if (!exported)
        return exported.takeError();
      choice.origin = "heuristic (tuning job exported)";
    }
  } else {
    if (llvm::Error err = probeDevice())
      return std::move(err);
    const CacheEntry *entry = cache.lookup(key, deviceCc, deviceName);
    std::optional<ConfigChoice> hit;
    if (entry)
      hit = fromEntry(*entry);
    if (hit) {
      choice = *hit;
    } else {
      llvm::Expected<std::optional<ConfigChoice>> tuned =
          tune(problem, family, key);
      if (!tuned)
        return tuned.takeError();
      if (*tuned)
        choice = **tuned;
    }
  }
  chosen[key] = choice;
  return choice;
}

llvm::Expected<std::optional<ConfigChoice>>
Tuner::tune(const cx::GemmProblem &problem, cx::Family family,
            const std::string &key) {
  // The candidates, the heuristic's pick (candidateConfigs' first) first.
  std::vector<cx::GemmConfig> configs;
  llvm::StringSet<> seen;
  for (const cx::GemmConfig &c :
       cx::candidateConfigs(problem, family, smVersion, options.wgmma,
                            options.tma)) {
    if (configs.size() >= std::max(1u, options.maxCandidates))
      break;
    if (seen.insert(c.describe()).second)
      configs.push_back(c);
  }
  if (configs.empty())
    return std::nullopt;

  // Compile them all at once (NVRTC is thread-safe; each compile takes a
  // second or two).
  unsigned job = nextJob++;
  std::vector<kiln::runtime::Expected<cx::GemmKernels>> kernels(
      configs.size(), kiln::runtime::Error::failure("not compiled"));
  {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency());
    for (size_t i = 0; i < configs.size(); ++i)
      pool.async([&, i] {
        cx::GenerateOptions generate;
        generate.smVersion = smVersion;
        generate.name = llvm::formatv("kiln_tune_{0}_{1}", job, i).str();
        kernels[i] = cx::generateGemm(problem, configs[i], cx::Epilogue(),
                                      generate);
      });
    pool.wait();
  }
  std::vector<Measured> measured(configs.size());
  for (size_t i = 0; i < configs.size(); ++i)
    if (!kernels[i])
      measured[i].rejected = "does not compile: " + kernels[i].error().message();
  if (!measured[0].rejected.empty()) {
    warn("--tune: " + key + ": the heuristic's config " +
         configs[0].describe() + " " + measured[0].rejected +
         "; not tuned");
    return std::nullopt;
  }

  bool exporting = !options.exportDir.empty();
  if (exporting)
    if (std::error_code ec =
            llvm::sys::fs::create_directories(options.exportDir))
      return llvm::createStringError("--tune-export: cannot make '" +
                                     options.exportDir + "': " + ec.message());
  std::string jobName = llvm::formatv("job{0}", job).str();
  std::string prefix =
      (exporting ? options.exportDir : workDir) + "/" + jobName;
  // Exported jobs name their PTX relative to themselves.
  auto ptxRef = [&](size_t i) {
    return (exporting ? jobName : prefix) + "_" + std::to_string(i) + ".ptx";
  };
  Buffers bytes = bufferBytes(problem);
  std::string inType(kiln::runtime::dtypeName(problem.inputType));
  std::string outType(kiln::runtime::dtypeName(problem.outputType));
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!kernels[i])
      continue;
    std::error_code ec;
    llvm::raw_fd_ostream ptx(prefix + "_" + std::to_string(i) + ".ptx", ec);
    if (ec)
      return llvm::createStringError("--tune: cannot write a PTX file: " +
                                     ec.message());
    ptx << kernels[i]->kernels.front().ptx;
  }

  auto writeJob = [&](const std::vector<size_t> &timed,
                      const std::string &path) -> llvm::Error {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return llvm::createStringError("--tune: cannot write '" + path +
                                     "': " + ec.message());
    os << "kiln-tune-job 1\ndevice " << options.device << "\ntarget sm_"
       << smVersion << "\nseed " << (job + 1) << "\nrepeats "
       << options.repeats << "\ntimeout " << options.timeoutSeconds << "\n";
    os << "buffer A " << bytes.a << " " << inType << "\nbuffer B " << bytes.b
       << " " << inType << "\noutput C " << bytes.c << " " << outType << "\n";
    std::vector<size_t> order{0};
    for (size_t i : timed)
      if (i != 0)
        order.push_back(i);
    for (size_t i : order) {
      const cx::GemmKernels &k = *kernels[i];
      os << "candidate " << i << " " << ptxRef(i) << " " << k.workspaceBytes
         << " " << k.kernels.size() << " " << k.semaphoreCount * 4 << "\n";
      for (const cx::GemmKernel &kernel : k.kernels) {
        kiln::runtime::Dim3 grid = kernel.gridFor(problem.m);
        os << "kernel " << kernel.name << " " << grid.x << " " << grid.y
           << " " << grid.z << " " << kernel.block.x << " " << kernel.block.y
           << " " << kernel.block.z << " " << kernel.dynamicSharedBytes;
        for (const cx::KernelParameter &p : kernel.params) {
          using Kind = cx::KernelParameter::Kind;
          if (p.kind == Kind::TensorMap) {
            // kiln-tune-worker encodes it over the address parameter's
            // buffer, as the runtime does at load.
            const kiln::runtime::TensorMapRecord &m = p.tensorMap;
            auto list = [](const auto *v, uint32_t n) {
              std::string s;
              for (uint32_t d = 0; d < n; ++d)
                s += (d ? "," : "") + std::to_string(v[d]);
              return s;
            };
            const std::string &over = kernel.params[m.addressParam].name;
            // The injected fault reaches a TMA candidate through its map.
            bool fault = over == "A" && int(i) == options.injectFault;
            os << " tmap:" << (fault ? std::string("BAD") : over) << ":"
               << kiln::runtime::dtypeName(m.dtype) << ":" << m.rank << ":"
               << list(m.globalDims, m.rank) << ":"
               << list(m.globalStrides, m.rank - 1) << ":"
               << list(m.boxDims, m.rank) << ":" << m.swizzle << ":"
               << m.l2Promotion << ":" << m.oobFill;
          } else if (p.kind != Kind::Pointer) {
            uint64_t v = p.name == "M"              ? problem.m
                         : p.name == "batchStrideA" ? problem.batchStrideA
                                                    : problem.batchStrideC;
            os << (p.kind == Kind::U32 ? " u32:" : " u64:") << v;
          } else if (p.name == "A" && int(i) == options.injectFault) {
            os << " BAD";
          } else {
            os << " "
               << (p.name == "workspace"    ? std::string("W")
                   : p.name == "semaphores" ? std::string("S")
                                            : p.name);
          }
        }
        os << "\n";
      }
    }
    os << "time";
    for (size_t i : timed)
      os << " " << i;
    os << "\n";
    return llvm::Error::success();
  };

  if (exporting) {
    std::vector<size_t> all;
    json::Array list;
    for (size_t i = 0; i < configs.size(); ++i) {
      list.push_back(configToJson(configs[i]));
      if (kernels[i])
        all.push_back(i);
    }
    if (llvm::Error err = writeJob(all, prefix + ".job"))
      return std::move(err);
    exported.push_back(json::Object{{"job", jobName},
                                    {"key", key},
                                    {"problem", problemToJson(problem, family)},
                                    {"configs", std::move(list)}});
    return std::nullopt;
  }

  // Run workers until every candidate is timed or rejected.
  for (unsigned attempt = 0;; ++attempt) {
    std::vector<size_t> timed;
    for (size_t i = 0; i < configs.size(); ++i)
      if (!measured[i].us && measured[i].rejected.empty())
        timed.push_back(i);
    if (timed.empty())
      break;
    std::string path = prefix + "_" + std::to_string(attempt);
    if (llvm::Error err = writeJob(timed, path + ".job"))
      return std::move(err);
    std::string out = path + ".out", err = path + ".err";
    std::optional<llvm::StringRef> redirects[] = {
        std::nullopt, llvm::StringRef(out), llvm::StringRef(err)};
    std::string message;
    // The worker's own watchdog ends a candidate at the timeout; this one
    // covers the loading and the reference run too.
    unsigned wait = options.timeoutSeconds * (timed.size() + 2) + 30;
    int rc = llvm::sys::ExecuteAndWait(
        options.workerPath, {options.workerPath, path + ".job"}, std::nullopt,
        redirects, wait, 0, &message);
    std::set<size_t> reported;
    if (auto buffer = llvm::MemoryBuffer::getFile(out)) {
      llvm::SmallVector<llvm::StringRef> lines;
      (*buffer)->getBuffer().split(lines, '\n', -1, false);
      for (llvm::StringRef line : lines) {
        llvm::Expected<json::Value> value = json::parse(line);
        if (!value) {
          llvm::consumeError(value.takeError());
          continue;
        }
        const json::Object *o = value->getAsObject();
        std::optional<int64_t> index = o ? o->getInteger("candidate")
                                         : std::nullopt;
        if (!index || *index < 0 || size_t(*index) >= configs.size())
          continue;
        reported.insert(size_t(*index));
        Measured &m = measured[*index];
        if (o->getBoolean("ok").value_or(false))
          m.us = o->getNumber("us").value_or(0);
        else
          m.rejected = o->getString("error").value_or("failed").str();
      }
    }
    if (rc != 0) {
      // The first candidate of the job without a line is the one that was
      // running (the reference when it is 0).
      std::vector<size_t> order{0};
      for (size_t i : timed)
        if (i != 0)
          order.push_back(i);
      for (size_t i : order) {
        if (reported.count(i))
          continue;
        // ExecuteAndWait: -2 is a signal or its own timeout.
        measured[i].rejected =
            rc == -2 ? "the worker crashed or timed out" +
                           (message.empty() ? std::string() : ": " + message)
                     : llvm::formatv("the worker stopped (exit {0})", rc).str();
        break;
      }
    }
    if (!measured[0].rejected.empty()) {
      warn("--tune: " + key + ": the reference (the heuristic's config " +
           configs[0].describe() + ") failed: " + measured[0].rejected +
           "; not tuned");
      return std::nullopt;
    }
    if (attempt > configs.size())
      break;
  }

  size_t best = 0;
  unsigned ok = 0, rejected = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (measured[i].us) {
      ++ok;
      if (*measured[i].us < *measured[best].us)
        best = i;
    } else {
      ++rejected;
      warn(llvm::formatv("--tune: candidate {0} ({1}) rejected: {2}", i,
                         configs[i].describe(), measured[i].rejected)
               .str());
    }
  }
  if (!measured[0].us)
    return std::nullopt;

  CacheEntry entry;
  entry.gpu = deviceName;
  entry.computeCapability = deviceCc;
  entry.device = options.device;
  entry.key = key;
  entry.problem = problemToJson(problem, family);
  entry.config = configs[best];
  entry.timeUs = *measured[best].us;
  entry.heuristicUs = *measured[0].us;
  entry.candidates = ok;
  cache.insert(entry);
  added.push_back(entry);
  cacheChanged = true;
  std::string origin = llvm::formatv(
      "tuned (now, {0} candidates{1}, best {2} vs heuristic {3})", ok,
      rejected ? llvm::formatv(", {0} rejected", rejected).str() : "",
      formatMicros(entry.timeUs), formatMicros(entry.heuristicUs));
  return ConfigChoice{configs[best], origin};
}

llvm::Error Tuner::finish() {
  if (!options.exportDir.empty() && !exported.empty()) {
    std::string path = options.exportDir + "/manifest.json";
    json::Object manifest{{"format", "kiln-tune-jobs"},
                          {"kiln_version", kiln::runtime::buildInfo().version},
                          {"target", "sm_" + std::to_string(smVersion)},
                          {"jobs", std::move(exported)}};
    exported = json::Array();
    if (llvm::Error err =
            llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
              os << llvm::formatv("{0:2}", json::Value(std::move(manifest)))
                 << "\n";
              return llvm::Error::success();
            }))
      return llvm::createStringError("--tune-export: cannot write '" + path +
                                     "': " + llvm::toString(std::move(err)));
  }
  if (!cacheChanged || options.cachePath.empty())
    return llvm::Error::success();
  cacheChanged = false;
  // Two kilnc may tune into one cache at once: under an exclusive lock on
  // CACHE.lock, this compile's entries are merged into the file as it is
  // now, so that neither loses the other's (the save itself is atomic).
  std::string lockPath = options.cachePath + ".lock";
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForReadWrite(
          lockPath, fd, llvm::sys::fs::CD_OpenAlways, llvm::sys::fs::OF_None))
    return llvm::createStringError("cannot lock tune cache '" + lockPath +
                                   "': " + ec.message());
  auto closeLock =
      llvm::make_scope_exit([&] { llvm::sys::Process::SafelyCloseFileDescriptor(fd); });
  if (std::error_code ec = llvm::sys::fs::lockFile(fd))
    return llvm::createStringError("cannot lock tune cache '" + lockPath +
                                   "': " + ec.message());
  std::string warning;
  TuneCache merged = TuneCache::load(options.cachePath, warning);
  for (const CacheEntry &entry : added)
    merged.insert(entry);
  llvm::Error saved = merged.save(options.cachePath);
  llvm::sys::fs::unlockFile(fd);
  if (!saved)
    cache = std::move(merged);
  return saved;
}

} // namespace kiln::tuning

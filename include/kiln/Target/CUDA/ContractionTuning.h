//===- ContractionTuning.h - Autotuning contraction configs -----*- C++ -*-===//
//
// kilnc --tune: for each distinct contraction problem, the first candidates
// of candidateConfigs are compiled (NVRTC, plain epilogue) and timed by
// kiln-tune-worker in a child process, on cuda (CUDA-event medians) or emu
// (the performance model's estimate). Each candidate's output is checked
// against the heuristic's pick on the same inputs; the fastest that agrees
// wins. Winners go into a tune cache (JSON, `--tune-cache FILE`) that later
// compiles read without a GPU. docs/architecture.md ("Contraction kernels",
// "Autotuning") describes the flow and the cache format.
//
// Unlike ContractionKernels.h this is compiler-side code: it uses LLVM's
// JSON and process support.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_CONTRACTIONTUNING_H
#define KILN_TARGET_CUDA_CONTRACTIONTUNING_H

#include "kiln/Target/CUDA/ContractionKernels.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tuning {

namespace cx = kiln::contraction;

/// The tune cache's format name and version (a file with others is foreign).
inline constexpr llvm::StringLiteral kCacheFormat = "kiln-tune-cache";
inline constexpr int kCacheFormatVersion = 1;

struct TuneOptions {
  /// Time candidates (kilnc --tune); otherwise only read the cache.
  bool tune = false;
  /// "cuda" or "emu".
  std::string device = "cuda";
  /// The tune cache; empty: none.
  std::string cachePath;
  /// Candidates timed per problem (the heuristic's pick included).
  unsigned maxCandidates = 8;
  /// kiln-tune-worker.
  std::string workerPath;
  /// Seconds one candidate may run in the worker.
  unsigned timeoutSeconds = 60;
  /// Timed runs per candidate on cuda (the median is kept).
  unsigned repeats = 20;
  /// With `tune`: write each problem's job (job files, PTX, manifest.json)
  /// into this directory instead of running the worker, and compile with
  /// the heuristic (for a GPU machine without the compiler:
  /// scripts/device/tune_bench.py runs the jobs there).
  std::string exportDir;
  /// Before anything else: add the winners of an exported directory whose
  /// jobs have run (each job's `.out`) to the cache.
  std::string importDir;
  /// bf16/fp16 on sm_90: the wgmma candidates first (kilnc --wgmma).
  bool wgmma = true;
  /// With wgmma: the TMA producer's candidates too (kilnc --tma).
  bool tma = true;
  /// Test hook (KILN_TUNE_INJECT_FAULT): the candidate at this index gets a
  /// pointer to nothing for A, so it faults in the worker. -1: none.
  int injectFault = -1;
};

/// The problem's cache key: every field that changes which configs are
/// valid or fast (shapes, dtypes, layouts, strides, alignment, conv
/// geometry) and the instruction family asked for.
std::string problemKey(const cx::GemmProblem &problem, cx::Family family);
llvm::json::Object problemToJson(const cx::GemmProblem &problem,
                                 cx::Family family);
llvm::json::Object configToJson(const cx::GemmConfig &config);
/// The config, or an error naming what is missing or wrong.
llvm::Expected<cx::GemmConfig> configFromJson(const llvm::json::Object &object);

struct CacheEntry {
  /// The device's name ("NVIDIA H200"; on emu "... (sm_90-h200 model)").
  std::string gpu;
  /// major * 10 + minor.
  uint32_t computeCapability = 0;
  /// "cuda" or "emu".
  std::string device;
  std::string key;
  llvm::json::Object problem;
  cx::GemmConfig config;
  /// The winner's time and the heuristic's pick's, in microseconds.
  double timeUs = 0, heuristicUs = 0;
  unsigned candidates = 0;
};

class TuneCache {
public:
  /// Reads `path`. A missing file is an empty cache; a corrupt or foreign
  /// one (another format, format version or Kiln version) is an empty cache
  /// and `warning` says why, naming the file.
  static TuneCache load(llvm::StringRef path, std::string &warning);
  /// As load, for the file's text in memory; `path` names it in `warning`
  /// (the fuzz target's entry point, fuzz/).
  static TuneCache parse(llvm::StringRef text, llvm::StringRef path,
                         std::string &warning);

  /// The entry for `key` on a device of compute capability `cc`: one from
  /// `gpu` when it is given and present, else one measured on cuda, else
  /// any (the first in the file).
  const CacheEntry *lookup(llvm::StringRef key, uint32_t cc,
                           llvm::StringRef gpu = "") const;
  /// Adds or replaces the entry of the same gpu and key.
  void insert(CacheEntry entry);
  size_t size() const { return entries.size(); }

  llvm::json::Value toJson() const;
  /// Writes the cache through a temporary file and a rename.
  llvm::Error save(llvm::StringRef path) const;

private:
  std::vector<CacheEntry> entries;
};

/// A config and where it came from, as kilnc --stats prints it:
/// "tuned (cache)", "tuned (now, N candidates, best x µs vs heuristic y
/// µs)" or "heuristic".
struct ConfigChoice {
  cx::GemmConfig config;
  std::string origin;
};

/// Picks configs for one compile: cache, tuning or the heuristic.
class Tuner {
public:
  using WarningHandler = std::function<void(const std::string &)>;
  Tuner(TuneOptions options, uint32_t smVersion, WarningHandler warn);
  ~Tuner();

  /// The config for the problem. Errors are fatal to the compile (no GPU
  /// for --tune-device=cuda, no worker); a candidate that fails is not.
  llvm::Expected<ConfigChoice> choose(const cx::GemmProblem &problem,
                                      cx::Family family);
  /// Writes the cache when tuning added entries.
  llvm::Error finish();
  /// Whether sm_90 problems try the wgmma families first (kilnc --wgmma).
  bool wgmma() const { return options.wgmma && smVersion == 90; }

private:
  struct Measured;
  llvm::Error loadCache();
  void importResults();
  llvm::Error probeDevice();
  llvm::Expected<std::optional<ConfigChoice>>
  tune(const cx::GemmProblem &problem, cx::Family family,
       const std::string &key);

  TuneOptions options;
  uint32_t smVersion;
  WarningHandler warn;
  bool cacheLoaded = false, cacheChanged = false;
  TuneCache cache;
  /// The entries this compile tuned or imported: what finish() merges into
  /// the cache file as it is then (another kilnc may have saved it since).
  std::vector<CacheEntry> added;
  /// The tuning device (after the probe).
  bool probed = false;
  std::string deviceName;
  uint32_t deviceCc = 0;
  /// Choices made in this compile, by key (a problem is tuned once).
  llvm::StringMap<ConfigChoice> chosen;
  std::string workDir;
  unsigned nextJob = 0;
  /// exportDir's manifest: one object per exported job.
  llvm::json::Array exported;
};

} // namespace kiln::tuning

#endif // KILN_TARGET_CUDA_CONTRACTIONTUNING_H

//===- TuneCache.cpp - The tune cache: problem keys and JSON --------------===//
//
// The file (docs/architecture.md, "The tune cache"):
//   {"format": "kiln-tune-cache", "format_version": 1, "kiln_version": "0.1.0",
//    "entries": [{"gpu": "NVIDIA H200", "compute_capability": 90,
//                 "device": "cuda", "key": "...", "problem": {...},
//                 "config": {...}, "time_us": 12.5, "heuristic_us": 14.0,
//                 "candidates": 8}, ...]}
// llvm/Support/JSON.h reads and writes it (already a dependency of the
// compiler, so no JSON code of Kiln's own).
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/ContractionTuning.h"

#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Version.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace kiln::tuning {

namespace json = llvm::json;

namespace {

const char *layoutName(cx::Layout layout) {
  return layout == cx::Layout::RowMajor ? "row" : "col";
}

std::optional<cx::Family> familyFromName(llvm::StringRef name) {
  // Every family familyName knows (new families need no change here).
  for (unsigned f = 0; f < 64; ++f) {
    auto family = static_cast<cx::Family>(f);
    std::string_view known = cx::familyName(family);
    if (known == "?")
      break;
    if (name == llvm::StringRef(known.data(), known.size()))
      return family;
  }
  return std::nullopt;
}

/// The path of the first number in `value` that is not a finite double
/// ("entries[0].problem.align[2]"), or nullopt. json::parse reads 1e309 as
/// infinity, which json's writer prints as `inf`: a cache holding one would
/// be saved as a file nothing can read back (found by kiln-fuzz-tune-cache,
/// docs/reliability.md).
std::optional<std::string> nonFiniteNumber(const json::Value &value,
                                           const std::string &path) {
  if (std::optional<double> number = value.getAsNumber())
    return std::isfinite(*number) ? std::nullopt
                                  : std::optional<std::string>(path);
  if (const json::Array *array = value.getAsArray()) {
    for (auto [i, element] : llvm::enumerate(*array))
      if (auto found = nonFiniteNumber(
              element, path + "[" + std::to_string(i) + "]"))
        return found;
  } else if (const json::Object *object = value.getAsObject()) {
    for (const auto &[key, member] : *object)
      if (auto found = nonFiniteNumber(
              member, (path.empty() ? "" : path + ".") +
                          llvm::StringRef(key).str()))
        return found;
  }
  return std::nullopt;
}

} // namespace

std::string problemKey(const cx::GemmProblem &p, cx::Family family) {
  std::string key = llvm::formatv(
      "{0} m={1} n={2} k={3} batch={4} in={5} out={6} acc={7} a={8} b={9} "
      "lda={10} ldb={11} ldc={12} bsa={13} bsb={14} bsc={15} "
      "align={16},{17},{18}",
      cx::familyName(family), p.m, p.n, p.k, p.batch,
      kiln::runtime::dtypeName(p.inputType),
      kiln::runtime::dtypeName(p.outputType),
      kiln::runtime::dtypeName(p.accumulatorType), layoutName(p.layoutA),
      layoutName(p.layoutB), p.ldaOrPacked(), p.ldbOrPacked(), p.ldcOrPacked(),
      p.batchStrideA, p.batchStrideB, p.batchStrideC, p.alignA, p.alignB,
      p.alignC);
  // The 8-bit families' B may differ from A (i8/u8, e4m3/e5m2); the other
  // families' B is A's type.
  if (family == cx::Family::MmaS8 || family == cx::Family::WgmmaS8 ||
      family == cx::Family::MmaF8 || family == cx::Family::WgmmaF8)
    key += " in_b=" + std::string(kiln::runtime::dtypeName(p.inputTypeB));
  if (p.conv.enabled) {
    const cx::ImplicitConv &c = p.conv;
    key += llvm::formatv(" conv={0}x{1}x{2}->{3}x{4} window={5}x{6} "
                         "stride={7},{8} pad={9},{10} dilation={11},{12} "
                         "channels={13}/{14}",
                         c.h, c.w, c.c, c.p, c.q, c.kh, c.kw, c.strideH,
                         c.strideW, c.padH, c.padW, c.dilationH, c.dilationW,
                         c.groupChannels, c.paddedGroupChannels)
               .str();
  }
  return key;
}

json::Object problemToJson(const cx::GemmProblem &p, cx::Family family) {
  json::Object o{
      {"family", std::string(cx::familyName(family))},
      {"m", int64_t(p.m)},
      {"n", int64_t(p.n)},
      {"k", int64_t(p.k)},
      {"batch", int64_t(p.batch)},
      {"input", std::string(kiln::runtime::dtypeName(p.inputType))},
      {"output", std::string(kiln::runtime::dtypeName(p.outputType))},
      {"accumulator", std::string(kiln::runtime::dtypeName(p.accumulatorType))},
      {"layout_a", layoutName(p.layoutA)},
      {"layout_b", layoutName(p.layoutB)},
      {"lda", int64_t(p.ldaOrPacked())},
      {"ldb", int64_t(p.ldbOrPacked())},
      {"ldc", int64_t(p.ldcOrPacked())},
      {"batch_stride_a", int64_t(p.batchStrideA)},
      {"batch_stride_b", int64_t(p.batchStrideB)},
      {"batch_stride_c", int64_t(p.batchStrideC)},
      {"align", json::Array{p.alignA, p.alignB, p.alignC}},
  };
  if (p.conv.enabled) {
    const cx::ImplicitConv &c = p.conv;
    o["conv"] = json::Object{
        {"h", int64_t(c.h)},         {"w", int64_t(c.w)},
        {"c", int64_t(c.c)},         {"p", int64_t(c.p)},
        {"q", int64_t(c.q)},         {"kh", c.kh},
        {"kw", c.kw},                {"stride", json::Array{c.strideH, c.strideW}},
        {"pad", json::Array{c.padH, c.padW}},
        {"dilation", json::Array{c.dilationH, c.dilationW}},
        {"group_channels", int64_t(c.groupChannels)},
        {"padded_group_channels", int64_t(c.paddedGroupChannels)},
    };
  }
  return o;
}

json::Object configToJson(const cx::GemmConfig &c) {
  return json::Object{
      {"family", std::string(cx::familyName(c.family))},
      {"block_m", c.blockM},
      {"block_n", c.blockN},
      {"block_k", c.blockK},
      {"warp_m", c.warpM},
      {"warp_n", c.warpN},
      {"thread_m", c.threadM},
      {"thread_n", c.threadN},
      {"stages", c.stages},
      {"split_k", c.splitK},
      {"tma", c.tma},
  };
}

llvm::Expected<cx::GemmConfig> configFromJson(const json::Object &o) {
  cx::GemmConfig c;
  std::optional<llvm::StringRef> family = o.getString("family");
  if (!family)
    return llvm::createStringError("the config has no family");
  std::optional<cx::Family> known = familyFromName(*family);
  if (!known)
    return llvm::createStringError("unknown family '" + *family + "'");
  c.family = *known;
  struct Field {
    const char *name;
    uint32_t *value;
  } fields[] = {{"block_m", &c.blockM},   {"block_n", &c.blockN},
                {"block_k", &c.blockK},   {"warp_m", &c.warpM},
                {"warp_n", &c.warpN},     {"thread_m", &c.threadM},
                {"thread_n", &c.threadN}, {"stages", &c.stages},
                {"split_k", &c.splitK}};
  for (const Field &f : fields) {
    std::optional<int64_t> v = o.getInteger(f.name);
    if (!v || *v < 0 || *v > (1 << 20))
      return llvm::createStringError(
          llvm::formatv("the config's '{0}' is missing or out of range",
                        f.name)
              .str());
    *f.value = static_cast<uint32_t>(*v);
  }
  // Caches written before the TMA producer have no "tma": cp.async.
  c.tma = o.getBoolean("tma").value_or(false);
  return c;
}

TuneCache TuneCache::load(llvm::StringRef path, std::string &warning) {
  TuneCache cache;
  if (!llvm::sys::fs::exists(path))
    return cache;
  auto ignored = [&](const llvm::Twine &why) {
    warning = ("ignoring tune cache '" + path + "': " + why).str();
    return TuneCache();
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return ignored(buffer.getError().message());
  return parse((*buffer)->getBuffer(), path, warning);
}

TuneCache TuneCache::parse(llvm::StringRef text, llvm::StringRef path,
                           std::string &warning) {
  TuneCache cache;
  auto ignored = [&](const llvm::Twine &why) {
    warning = ("ignoring tune cache '" + path + "': " + why).str();
    return TuneCache();
  };
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return ignored("not JSON (" + llvm::toString(parsed.takeError()) + ")");
  if (std::optional<std::string> where = nonFiniteNumber(*parsed, ""))
    return ignored("the number at '" + *where +
                   "' is out of range (not a finite double)");
  const json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != kCacheFormat)
    return ignored("not a Kiln tune cache");
  if (root->getInteger("format_version") != kCacheFormatVersion)
    return ignored("format version is not " +
                   llvm::Twine(kCacheFormatVersion));
  llvm::StringRef version = kiln::runtime::buildInfo().version;
  std::optional<llvm::StringRef> written = root->getString("kiln_version");
  if (written != version)
    return ignored("written by Kiln " + written.value_or("?") +
                   ", this is Kiln " + version);
  const json::Array *entries = root->getArray("entries");
  if (!entries)
    return ignored("no 'entries' array");
  for (auto [i, value] : llvm::enumerate(*entries)) {
    const json::Object *e = value.getAsObject();
    auto bad = [&](const llvm::Twine &why) {
      return ignored("entry " + llvm::Twine(i) + ": " + why);
    };
    if (!e)
      return bad("not an object");
    CacheEntry entry;
    std::optional<llvm::StringRef> gpu = e->getString("gpu"),
                                   device = e->getString("device"),
                                   key = e->getString("key");
    std::optional<int64_t> cc = e->getInteger("compute_capability");
    const json::Object *config = e->getObject("config");
    const json::Object *problem = e->getObject("problem");
    if (!gpu || !device || !key || !cc || !config || !problem)
      return bad("needs gpu, compute_capability, device, key, problem and "
                 "config");
    entry.gpu = gpu->str();
    entry.device = device->str();
    entry.key = key->str();
    entry.computeCapability = static_cast<uint32_t>(*cc);
    entry.problem = *problem;
    llvm::Expected<cx::GemmConfig> parsedConfig = configFromJson(*config);
    if (!parsedConfig)
      return bad(llvm::toString(parsedConfig.takeError()));
    entry.config = *parsedConfig;
    entry.timeUs = e->getNumber("time_us").value_or(0);
    entry.heuristicUs = e->getNumber("heuristic_us").value_or(0);
    entry.candidates =
        static_cast<unsigned>(e->getInteger("candidates").value_or(0));
    cache.entries.push_back(std::move(entry));
  }
  return cache;
}

const CacheEntry *TuneCache::lookup(llvm::StringRef key, uint32_t cc,
                                    llvm::StringRef gpu) const {
  const CacheEntry *fromCuda = nullptr, *any = nullptr;
  for (const CacheEntry &e : entries) {
    if (e.key != key || e.computeCapability != cc)
      continue;
    if (!gpu.empty() && e.gpu == gpu)
      return &e;
    if (!fromCuda && e.device == "cuda")
      fromCuda = &e;
    if (!any)
      any = &e;
  }
  if (!gpu.empty())
    return nullptr; // Tuning: another GPU's entry is a miss.
  return fromCuda ? fromCuda : any;
}

void TuneCache::insert(CacheEntry entry) {
  for (CacheEntry &e : entries)
    if (e.key == entry.key && e.gpu == entry.gpu) {
      e = std::move(entry);
      return;
    }
  entries.push_back(std::move(entry));
}

json::Value TuneCache::toJson() const {
  json::Array list;
  for (const CacheEntry &e : entries)
    list.push_back(json::Object{
        {"gpu", e.gpu},
        {"compute_capability", e.computeCapability},
        {"device", e.device},
        {"key", e.key},
        {"problem", json::Object(e.problem)},
        {"config", configToJson(e.config)},
        {"time_us", e.timeUs},
        {"heuristic_us", e.heuristicUs},
        {"candidates", e.candidates},
    });
  return json::Object{
      {"format", kCacheFormat},
      {"format_version", kCacheFormatVersion},
      {"kiln_version", kiln::runtime::buildInfo().version},
      {"entries", std::move(list)},
  };
}

llvm::Error TuneCache::save(llvm::StringRef path) const {
  // The runtime's atomic write (temporary file, fsync, rename): a kill or a
  // full disk leaves the previous cache. (llvm::writeToOutput renamed a
  // partly written file into place when the disk filled.)
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", toJson()) << "\n";
  if (kiln::runtime::Error err = kiln::runtime::writeFileAtomically(
          path.str(), text.data(), text.size()))
    return llvm::createStringError("cannot write tune cache: " + err.message());
  return llvm::Error::success();
}

} // namespace kiln::tuning

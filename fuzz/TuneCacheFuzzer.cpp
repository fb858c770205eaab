//===- TuneCacheFuzzer.cpp - libFuzzer target: tune-cache JSON ------------===//
//
// TuneCache::parse (lib/Target/CUDA/ContractionTuning/TuneCache.cpp) on
// arbitrary text: a cache or a warning, never a crash. A cache that parses
// must survive toJson and parse again with the same number of entries.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/ContractionTuning.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

using namespace kiln::tuning;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string warning;
  TuneCache cache = TuneCache::parse(text, "fuzz.json", warning);
  if (!warning.empty() || cache.size() == 0)
    return 0;
  std::string written;
  llvm::raw_string_ostream os(written);
  os << cache.toJson();
  os.flush();
  std::string again;
  TuneCache reread = TuneCache::parse(written, "fuzz-rewritten.json", again);
  if (!again.empty() || reread.size() != cache.size()) {
    std::fprintf(stderr, "a parsed cache does not read back: %s\n",
                 again.c_str());
    std::abort();
  }
  return 0;
}

//===- KernelCache.h - Persistent cache of compiled kernels -----*- C++ -*-===//
//
// NVRTC's PTX for a template source and ptxas's cubin for a PTX module are
// pure functions of their input, their options and the toolchain, so a
// compile keeps them on disk, as Triton (~/.triton/cache) and torch.compile
// (inductor's FX graph and kernel caches) do, and the next compile of the
// same kernel skips the tool. The key is a SHA-256 of everything the output
// depends on (the caller's job: source or PTX, options, tool version, Kiln
// version); the value is the tool's output.
//
// Layout: DIR/<kind>/<2 hex digits>/<64 hex digits>, one file per entry, a
// header line (format, kind, key, size) then the value. Entries are written
// to DIR/tmp and renamed into place, so a reader sees a whole entry or none
// (concurrent compiles, a compile killed with SIGKILL); a file whose header
// does not match is removed and counts as a miss. The cache is bounded:
// trim() removes the least recently used entries (a hit refreshes the file's
// modification time) until it holds at most `maxBytes`, and temporary files
// older than an hour (left by killed compiles).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_KERNELCACHE_H
#define KILN_TARGET_CUDA_KERNELCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

class KernelCache {
public:
  /// $XDG_CACHE_HOME/kiln/kernels, else $HOME/.cache/kiln/kernels; empty
  /// when neither variable is set.
  static std::string defaultDirectory();
  /// The default bound: 1 GiB.
  static constexpr uint64_t kDefaultMaxBytes = uint64_t(1) << 30;

  /// A cache in `directory` (created on first store); an empty directory
  /// is a cache that is off (every lookup misses, stores do nothing).
  explicit KernelCache(std::string directory = "",
                       uint64_t maxBytes = kDefaultMaxBytes);

  bool enabled() const { return !directory.empty(); }
  const std::string &path() const { return directory; }

  /// The value stored under (`kind`, `key`), if any.
  std::optional<std::string> lookup(llvm::StringRef kind,
                                    llvm::StringRef key);
  /// Stores `value` under (`kind`, `key`); failures (a full disk, an
  /// unwritable directory) only cost the next compile a miss.
  void store(llvm::StringRef kind, llvm::StringRef key,
             llvm::StringRef value);
  /// Removes least recently used entries until the cache holds at most
  /// maxBytes, and stale temporary files.
  void trim();

  /// The hex SHA-256 of `parts` (each length-prefixed, so no two lists of
  /// parts collide by concatenation).
  static std::string hashKey(llvm::ArrayRef<llvm::StringRef> parts);

  /// Counted by lookup, store and trim (thread-safe).
  std::atomic<unsigned> hits{0}, misses{0}, stores{0}, evictions{0};

private:
  std::string entryPath(llvm::StringRef kind, llvm::StringRef key) const;

  std::string directory;
  uint64_t maxBytes;
};

} // namespace kiln

#endif // KILN_TARGET_CUDA_KERNELCACHE_H

//===- KernelCache.cpp - Persistent cache of compiled kernels -------------===//
//
// LLVM's Support library does the work: SHA256 for keys, FileSystem for the
// atomic rename, directory walks and modification times (the LRU order), so
// no file-format or locking code of Kiln's own beyond the entry header.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/KernelCache.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace kiln {

namespace {
constexpr llvm::StringLiteral kFormat = "kiln-kernel-cache 1";

/// Sets `file`'s modification (and access) time: its place in the LRU
/// order.
void touch(const std::string &file, llvm::sys::TimePoint<> time) {
  int fd;
  if (fs::openFileForReadWrite(file, fd, fs::CD_OpenExisting, fs::OF_None))
    return;
  (void)fs::setLastAccessAndModificationTime(fd, time);
  (void)llvm::sys::Process::SafelyCloseFileDescriptor(fd);
}

/// The header line an entry starts with.
std::string header(llvm::StringRef kind, llvm::StringRef key, size_t size) {
  return (kFormat + " " + kind + " " + key + " " + llvm::Twine(size) + "\n")
      .str();
}
} // namespace

std::string KernelCache::defaultDirectory() {
  llvm::SmallString<256> dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    dir = xdg;
  } else if (const char *home = std::getenv("HOME"); home && *home) {
    dir = home;
    path::append(dir, ".cache");
  } else {
    return "";
  }
  path::append(dir, "kiln", "kernels");
  return dir.str().str();
}

KernelCache::KernelCache(std::string directory, uint64_t maxBytes)
    : directory(std::move(directory)), maxBytes(maxBytes) {}

std::string KernelCache::hashKey(llvm::ArrayRef<llvm::StringRef> parts) {
  llvm::SHA256 sha;
  for (llvm::StringRef part : parts) {
    std::string length = std::to_string(part.size()) + ":";
    sha.update(length);
    sha.update(part);
  }
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

std::string KernelCache::entryPath(llvm::StringRef kind,
                                   llvm::StringRef key) const {
  llvm::SmallString<256> p(directory);
  path::append(p, kind, key.take_front(2), key);
  return p.str().str();
}

std::optional<std::string> KernelCache::lookup(llvm::StringRef kind,
                                               llvm::StringRef key) {
  if (!enabled()) {
    ++misses;
    return std::nullopt;
  }
  std::string file = entryPath(kind, key);
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    ++misses;
    return std::nullopt;
  }
  llvm::StringRef data = (*buffer)->getBuffer();
  size_t newline = data.find('\n');
  llvm::StringRef value =
      newline == llvm::StringRef::npos ? "" : data.drop_front(newline + 1);
  if (newline == llvm::StringRef::npos ||
      data.take_front(newline + 1) != header(kind, key, value.size())) {
    // Not an entry this build wrote (another format, a damaged file): it
    // goes, and the tool runs again.
    fs::remove(file);
    ++misses;
    return std::nullopt;
  }
  // The least recently used entries go first (trim): a hit is a use.
  touch(file, std::chrono::system_clock::now());
  ++hits;
  return value.str();
}

void KernelCache::store(llvm::StringRef kind, llvm::StringRef key,
                        llvm::StringRef value) {
  if (!enabled())
    return;
  std::string file = entryPath(kind, key);
  llvm::SmallString<256> tmpDir(directory);
  path::append(tmpDir, "tmp");
  if (fs::create_directories(path::parent_path(file)) ||
      fs::create_directories(tmpDir))
    return;
  // A private temporary name, written whole, then renamed into place:
  // rename is atomic within one file system, so concurrent readers and
  // writers of the same key see an old entry, a new one or none.
  llvm::SmallString<256> model(tmpDir);
  path::append(model, key + "-%%%%%%%%.tmp");
  int fd;
  llvm::SmallString<256> tmp;
  if (fs::createUniqueFile(model, fd, tmp))
    return;
  // Locked while it has its temporary name: trim() removes only the
  // temporaries nobody holds (their compile was killed), whatever their age.
  // The lock goes with the descriptor, so the file stays open until renamed.
  (void)fs::tryLockFile(fd);
  auto closeFile = llvm::make_scope_exit([&] { fs::closeFile(fd); });
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/false);
  os << header(kind, key, value.size()) << value;
  os.flush();
  if (os.has_error()) {
    os.clear_error();
    fs::remove(tmp);
    return;
  }
  if (fs::rename(tmp, file)) {
    fs::remove(tmp);
    return;
  }
  ++stores;
}

void KernelCache::trim() {
  if (!enabled() || !fs::exists(directory))
    return;
  struct Entry {
    std::string file;
    uint64_t size;
    llvm::sys::TimePoint<> used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(directory, ec), end;
       it != end && !ec; it.increment(ec)) {
    fs::file_status status;
    if (fs::status(it->path(), status) ||
        status.type() != fs::file_type::regular_file)
      continue;
    llvm::StringRef file = it->path();
    if (file.ends_with(".tmp")) {
      // Left by a compile that was killed while writing it, if no live
      // writer holds its lock (store()).
      int fd;
      if (!fs::openFileForReadWrite(file, fd, fs::CD_OpenExisting,
                                    fs::OF_None)) {
        if (!fs::tryLockFile(fd))
          fs::remove(file);
        fs::closeFile(fd);
      }
      continue;
    }
    entries.push_back({file.str(), status.getSize(),
                       status.getLastModificationTime()});
    total += status.getSize();
  }
  if (total <= maxBytes)
    return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.used < b.used; });
  for (const Entry &entry : entries) {
    if (total <= maxBytes)
      break;
    if (!fs::remove(entry.file)) {
      total -= entry.size;
      ++evictions;
    }
  }
}

} // namespace kiln

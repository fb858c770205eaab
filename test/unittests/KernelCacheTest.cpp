//===- KernelCacheTest.cpp - The persistent kernel cache ------------------===//
//
// KernelCache (include/kiln/Target/CUDA/KernelCache.h) in a temporary
// directory: what is stored comes back byte for byte, nothing else does
// (another key, another kind, a damaged or foreign file, a cache that is
// off), trim() keeps the most recently used entries under the bound and
// removes stale temporary files, and writers racing on one key leave one
// whole entry.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/KernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = llvm::sys::fs;
using kiln::KernelCache;

namespace {

void touch(llvm::StringRef file, llvm::sys::TimePoint<> time) {
  int fd;
  ASSERT_FALSE(
      fs::openFileForReadWrite(file, fd, fs::CD_OpenExisting, fs::OF_None));
  EXPECT_FALSE(fs::setLastAccessAndModificationTime(fd, time));
  ::close(fd);
}

class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(fs::createUniqueDirectory("kiln-kernel-cache-test", dir));
  }
  void TearDown() override { fs::remove_directories(dir); }

  /// The entry files under the cache (not its temporary files).
  std::vector<std::string> entries() {
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
         it.increment(ec))
      if (fs::is_regular_file(it->path()) &&
          !llvm::StringRef(it->path()).ends_with(".tmp"))
        files.push_back(it->path());
    return files;
  }

  llvm::SmallString<128> dir;
};

TEST_F(KernelCacheTest, KeysHashEveryPartSeparately) {
  std::string a = KernelCache::hashKey({"ab", "c"});
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, KernelCache::hashKey({"ab", "c"}));
  // Concatenation must not collide: the parts are length-prefixed.
  EXPECT_NE(a, KernelCache::hashKey({"a", "bc"}));
  EXPECT_NE(a, KernelCache::hashKey({"abc"}));
}

TEST_F(KernelCacheTest, StoredValuesComeBackByteForByte) {
  KernelCache cache(dir.str().str());
  std::string key = KernelCache::hashKey({"source"});
  EXPECT_FALSE(cache.lookup("ptx", key));
  std::string value("ptx\0with\nnul and newlines\n", 27);
  cache.store("ptx", key, value);
  std::optional<std::string> back = cache.lookup("ptx", key);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, value);
  // Another kind or key is another entry.
  EXPECT_FALSE(cache.lookup("cubin", key));
  EXPECT_FALSE(cache.lookup("ptx", KernelCache::hashKey({"other"})));
  EXPECT_EQ(cache.hits, 1u);
  EXPECT_EQ(cache.misses, 3u);
  EXPECT_EQ(cache.stores, 1u);
  // A new cache on the same directory (the next compile) finds it.
  KernelCache next(dir.str().str());
  EXPECT_EQ(next.lookup("ptx", key).value_or(""), value);
}

TEST_F(KernelCacheTest, DamagedEntriesAreMissesAndGo) {
  KernelCache cache(dir.str().str());
  std::string key = KernelCache::hashKey({"damaged"});
  cache.store("ptx", key, "0123456789");
  std::vector<std::string> files = entries();
  ASSERT_EQ(files.size(), 1u);
  // Truncated: the header's size no longer matches.
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(files[0], ec);
    ASSERT_FALSE(ec);
    os << "kiln-kernel-cache 1 ptx " << key << " 10\n01234";
  }
  EXPECT_FALSE(cache.lookup("ptx", key));
  EXPECT_FALSE(fs::exists(files[0]));
  // A file of another format under the entry's name.
  cache.store("ptx", key, "x");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(files[0], ec);
    os << "not a cache entry";
  }
  EXPECT_FALSE(cache.lookup("ptx", key));
}

TEST_F(KernelCacheTest, OffMeansNothingIsKept) {
  KernelCache off;
  EXPECT_FALSE(off.enabled());
  off.store("ptx", KernelCache::hashKey({"k"}), "v");
  EXPECT_FALSE(off.lookup("ptx", KernelCache::hashKey({"k"})));
  EXPECT_EQ(off.stores, 0u);
}

TEST_F(KernelCacheTest, TrimKeepsTheMostRecentlyUsedUnderTheBound) {
  // Entries of ~1000 bytes, a bound of 3500: three fit.
  KernelCache cache(dir.str().str(), 3500);
  std::vector<std::string> keys;
  std::string value(900, 'x');
  for (int i = 0; i < 5; ++i) {
    keys.push_back(KernelCache::hashKey({std::to_string(i)}));
    cache.store("cubin", keys.back(), value);
  }
  // Oldest first by modification time: 0..4 one second apart, then a hit
  // makes entry 0 the most recent.
  auto base = std::chrono::system_clock::now() - std::chrono::hours(1);
  for (const std::string &file : entries()) {
    for (int k = 0; k < 5; ++k)
      if (llvm::StringRef(file).ends_with(keys[k]))
        touch(file, base + std::chrono::seconds(k));
  }
  ASSERT_TRUE(cache.lookup("cubin", keys[0]));
  cache.trim();
  EXPECT_EQ(cache.evictions, 2u);
  EXPECT_TRUE(cache.lookup("cubin", keys[0]));  // used last
  EXPECT_FALSE(cache.lookup("cubin", keys[1])); // least recently used
  EXPECT_FALSE(cache.lookup("cubin", keys[2]));
  EXPECT_TRUE(cache.lookup("cubin", keys[3]));
  EXPECT_TRUE(cache.lookup("cubin", keys[4]));
}

TEST_F(KernelCacheTest, TrimRemovesAbandonedTemporaryFiles) {
  KernelCache cache(dir.str().str());
  cache.store("ptx", KernelCache::hashKey({"k"}), "v");
  // What a compile killed while writing leaves (nobody holds its lock), and
  // what a live compile is writing (another process holds its lock).
  llvm::SmallString<128> abandoned(dir), live(dir);
  llvm::sys::path::append(abandoned, "tmp", "abandoned-12345678.tmp");
  llvm::sys::path::append(live, "tmp", "live-12345678.tmp");
  for (llvm::StringRef file : {abandoned.str(), live.str()}) {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    ASSERT_FALSE(ec);
    os << "half an entry";
  }
  // The live writer: a child process that locks the file as store() does
  // and holds it until it is killed. (Locks are per process: this process
  // could always take its own.)
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd;
    if (fs::openFileForReadWrite(live, fd, fs::CD_OpenExisting, fs::OF_None) ||
        fs::tryLockFile(fd))
      ::_exit(1);
    char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    for (;;)
      ::pause();
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  cache.trim();
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(live)); // its writer is still running
  EXPECT_TRUE(cache.lookup("ptx", KernelCache::hashKey({"k"})));
  // Killed: the kernel drops the lock, and the next trim removes the file,
  // however young it is.
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  cache.trim();
  EXPECT_FALSE(fs::exists(live));
}

TEST_F(KernelCacheTest, RacingWritersLeaveOneWholeEntry) {
  std::string key = KernelCache::hashKey({"race"});
  std::vector<std::thread> threads;
  // Each writer stores a different value of one size; a reader must see
  // one of them whole, never a mix or a prefix.
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      KernelCache cache(dir.str().str());
      for (int i = 0; i < 20; ++i) {
        cache.store("ptx", key, std::string(4096, char('a' + t)));
        if (std::optional<std::string> v = cache.lookup("ptx", key)) {
          ASSERT_EQ(v->size(), 4096u);
          EXPECT_EQ(v->find_first_not_of(v->front()), std::string::npos);
        }
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(entries().size(), 1u);
}

} // namespace

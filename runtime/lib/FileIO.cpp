//===- FileIO.cpp - Read-only mappings and atomic file writes -------------===//
//
// Readers map files read-only so weights are never copied on the host;
// writers write a temporary file in the destination directory and rename it,
// so a crash or an error never leaves a half-written artifact or .npy. A
// writer holds an flock on its temporary file; the next writer of the same
// destination removes the temporaries nobody holds (a process killed while
// writing), so they never accumulate (docs/reliability.md "Faults").
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/FileIO.h"

#include "Support.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::runtime {

std::string errnoMessage(int error) {
  char buffer[256];
  // The GNU strerror_r returns the message, which may not be `buffer`.
  return strerror_r(error, buffer, sizeof(buffer));
}

Expected<Blob> mapFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError("cannot open '{}': {}", path, errnoMessage(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return makeError("cannot stat '{}': {}", path, errnoMessage(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return makeError("'{}' is not a regular file", path);
  }
  size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return Blob();
  }
  void *address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int error = errno;
  ::close(fd);
  if (address == MAP_FAILED)
    return makeError("cannot map '{}': {}", path, errnoMessage(error));
  std::shared_ptr<const void> mapping(address, [size](const void *p) {
    ::munmap(const_cast<void *>(p), size);
  });
  return Blob::view(std::move(mapping), static_cast<const uint8_t *>(address),
                    size);
}

//===----------------------------------------------------------------------===//
// AtomicFileWriter
//===----------------------------------------------------------------------===//

namespace {

/// Removes the temporary files `prefix`* in `directory` that no live writer
/// holds: a writer keeps an exclusive flock on its temporary file until it
/// renames or removes it, and the kernel drops the lock when the process
/// dies, however it dies. Best effort: an error here only leaves a file.
void removeAbandonedTemporaries(const std::string &directory,
                                const std::string &prefix) {
  DIR *dir = ::opendir(directory.c_str());
  if (!dir)
    return;
  while (const struct dirent *entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix)
      continue;
    std::string file = directory + "/" + std::string(name);
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
      continue;
    struct stat info;
    // Locked by nobody: its writer is gone. (A writer between mkostemp and
    // its flock, a few instructions, would lose its file and fail to
    // rename with an error; nothing half-written is left either way.)
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0)
      ::unlink(file.c_str());
    ::close(fd);
  }
  ::closedir(dir);
}

} // namespace

Expected<AtomicFileWriter> AtomicFileWriter::create(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string directory =
      slash == std::string::npos ? "." : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty())
    return makeError("cannot write '{}': not a file name", path);
  if (directory.empty())
    directory = "/";
  // A destination that exists but is not a regular file (/dev/null, a pipe,
  // /dev/stdout) is written in place: renaming over it would replace the
  // device node, and a pipe has no partial file to protect.
  struct stat existing;
  if (::stat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    if (S_ISDIR(existing.st_mode))
      return makeError("cannot write '{}': it is a directory", path);
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return makeError("cannot write '{}': {}", path, errnoMessage(errno));
    return AtomicFileWriter(path, /*tempPath=*/"", fd);
  }
  std::string prefix = fmt::format(".{}.tmp.", base);
  removeAbandonedTemporaries(directory, prefix);
  std::string tempPath = fmt::format("{}/{}XXXXXX", directory, prefix);
  int fd = ::mkostemp(tempPath.data(), O_CLOEXEC);
  if (fd < 0)
    return makeError("cannot create a temporary file in '{}' to write '{}': {}",
                     directory, path, errnoMessage(errno));
  // Held until commit() or discard() closes the file: it marks the file as
  // in use for removeAbandonedTemporaries.
  ::flock(fd, LOCK_EX | LOCK_NB);
  // mkstemp creates the file 0600; artifacts and outputs are not secrets.
  // (Reading the umask would mean changing it, which races other threads.)
  ::fchmod(fd, 0644);
  return AtomicFileWriter(path, std::move(tempPath), fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter &&other) noexcept
    : path(std::move(other.path)), tempPath(std::move(other.tempPath)),
      fd(other.fd) {
  other.fd = -1;
  other.tempPath.clear();
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  // Removed while still open (and locked), so no other writer's sweep can
  // race the unlink.
  if (!tempPath.empty())
    ::unlink(tempPath.c_str());
  tempPath.clear();
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

Error AtomicFileWriter::write(const void *data, size_t size) {
  if (fd < 0)
    return makeError("cannot write '{}': the file is closed", path);
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return makeError("cannot write '{}': {}", path, errnoMessage(errno));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return Error::success();
}

Error AtomicFileWriter::writeZeros(size_t size) {
  static const char zeros[4096] = {};
  while (size > 0) {
    size_t chunk = size < sizeof(zeros) ? size : sizeof(zeros);
    if (Error err = write(zeros, chunk))
      return err;
    size -= chunk;
  }
  return Error::success();
}

Error AtomicFileWriter::commit() {
  if (fd < 0)
    return makeError("cannot write '{}': the file is closed", path);
  if (tempPath.empty()) {
    // In-place writes go to devices and pipes: nothing to sync or rename.
    int result = ::close(fd);
    fd = -1;
    if (result != 0)
      return makeError("cannot write '{}': {}", path, errnoMessage(errno));
    return Error::success();
  }
  // fsync first, so the rename never publishes a file whose data is still
  // unwritten; rename while the file is open, so its flock protects it from
  // other writers' sweeps until it has its final name. On an error the
  // destructor removes the temporary file.
  if (::fsync(fd) != 0)
    return makeError("cannot write '{}': {}", path, errnoMessage(errno));
  if (::rename(tempPath.c_str(), path.c_str()) != 0)
    return makeError("cannot rename '{}' to '{}': {}", tempPath, path,
                     errnoMessage(errno));
  tempPath.clear();
  int result = ::close(fd);
  fd = -1;
  if (result != 0)
    return makeError("cannot write '{}': {}", path, errnoMessage(errno));
  return Error::success();
}

Error writeFileAtomically(const std::string &path, const void *data,
                          size_t size) {
  Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.takeError();
  if (Error err = writer->write(data, size))
    return err;
  return writer->commit();
}

} // namespace kiln::runtime

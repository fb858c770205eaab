//===- Support.h - Helpers shared by the runtime's sources ------*- C++ -*-===//
//
// Internal to runtime/lib: fmt-formatted errors, overflow-checked arithmetic,
// and the file I/O every reader and writer goes through (read-only mapping,
// write-to-temporary-then-rename).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_SUPPORT_H
#define KILN_RUNTIME_LIB_SUPPORT_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Error.h"
#include "kiln/runtime/MemoryPlan.h"

#include <fmt/core.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::runtime {

template <typename... Args>
Error makeError(fmt::format_string<Args...> format, Args &&...args) {
  return Error::failure(fmt::format(format, std::forward<Args>(args)...));
}

/// `text` with every control character (below 0x20, and 0x7f) written as
/// \xNN, so that a name read from a file cannot break an error message
/// over several lines (docs/reliability.md, found by kiln-fuzz-artifact).
inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  return out;
}

inline bool hasControlCharacter(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return true;
  return false;
}

/// a + b, or nothing on overflow.
inline std::optional<uint64_t> checkedAdd(uint64_t a, uint64_t b) {
  uint64_t result;
  if (__builtin_add_overflow(a, b, &result))
    return std::nullopt;
  return result;
}

/// a * b, or nothing on overflow.
inline std::optional<uint64_t> checkedMul(uint64_t a, uint64_t b) {
  uint64_t result;
  if (__builtin_mul_overflow(a, b, &result))
    return std::nullopt;
  return result;
}

/// `value` rounded up to a multiple of `alignment` (a power of two), or
/// nothing on overflow.
inline std::optional<uint64_t> alignUp(uint64_t value, uint64_t alignment) {
  std::optional<uint64_t> bumped = checkedAdd(value, alignment - 1);
  if (!bumped)
    return std::nullopt;
  return *bumped & ~(alignment - 1);
}

/// True when [offset, offset + size) lies inside [0, limit).
/// The length of the UTF-8 sequence a lead byte starts (1 to 4), or 0 for
/// a byte that cannot start one.
inline size_t utf8SequenceLength(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2
                       : (lead >> 4) == 14  ? 3
                       : (lead >> 3) == 30  ? 4
                                            : 0;
}

inline bool rangeFits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

/// The memory-plan check behind checkMemoryPlan and verifyArtifact;
/// `label(i)` names buffer i in messages ("buffer 3", "buffer 3 'tmp'").
Error checkMemoryPlanLabelled(const std::vector<LiveBuffer> &buffers,
                              const std::vector<uint64_t> &offsets,
                              uint64_t arenaSize, uint64_t alignment,
                              const std::function<std::string(size_t)> &label);

/// The rules of format 1.3's `training` section (ArtifactTraining.cpp).
Error verifyTraining(const Artifact &artifact);
/// Format 1.5's collective steps (ArtifactTraining.cpp).
Error verifyCollectives(const Artifact &artifact);

/// The text of errno, for messages.
std::string errnoMessage(int error);

/// Maps a whole file read-only. The Blob keeps the mapping alive.
Expected<Blob> mapFile(const std::string &path);

/// Writes a file by writing a temporary file next to it and renaming it over
/// the destination on commit(). Destroying an uncommitted writer removes
/// the temporary file, so the destination is never left half-written.
class AtomicFileWriter {
public:
  static Expected<AtomicFileWriter> create(const std::string &path);
  AtomicFileWriter(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter &operator=(AtomicFileWriter &&) = delete;
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  ~AtomicFileWriter();

  Error write(const void *data, size_t size);
  Error writeZeros(size_t size);
  /// Flushes, closes and renames over the destination. A destination that
  /// exists and is not a regular file (/dev/null, a pipe) is written in place.
  Error commit();

private:
  AtomicFileWriter(std::string path, std::string tempPath, int fd)
      : path(std::move(path)), tempPath(std::move(tempPath)), fd(fd) {}
  void discard();

  std::string path;
  std::string tempPath;
  int fd = -1;
};

/// Writes `size` bytes to `path` through an AtomicFileWriter.
Error writeFileAtomically(const std::string &path, const void *data,
                          size_t size);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_SUPPORT_H

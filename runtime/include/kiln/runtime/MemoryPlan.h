//===- MemoryPlan.h - Static arena planning by lifetime ---------*- C++ -*-===//
//
// The compiler knows, for every intermediate buffer, its size and the first
// and last launch that touch it. planMemory packs them into one arena so that
// buffers alive at the same time never share bytes: largest first, each into
// the smallest gap (among buffers it is alive with) that holds it, else above
// them. The runtime uses checkMemoryPlan to re-verify a plan read from a file.
//
// Stability: internal (the compiler and the reader use it); may change in
// any version.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_MEMORYPLAN_H
#define KILN_RUNTIME_MEMORYPLAN_H

#include "kiln/runtime/Error.h"

#include <cstdint>
#include <vector>

namespace kiln::runtime {

/// A buffer to place: `size` bytes, live over launches [firstUse, lastUse].
struct LiveBuffer {
  uint64_t size = 0;
  uint32_t firstUse = 0;
  uint32_t lastUse = 0;
};

struct MemoryPlan {
  /// One offset per buffer, a multiple of the alignment.
  std::vector<uint64_t> offsets;
  /// Bytes the arena needs (a multiple of the alignment).
  uint64_t arenaSize = 0;
  /// Bytes without any reuse: the sum of the sizes, each rounded up to the
  /// alignment. arenaSize <= naiveSize always holds.
  uint64_t naiveSize = 0;
};

/// True when the two buffers are live during a common launch.
inline bool lifetimesOverlap(const LiveBuffer &a, const LiveBuffer &b) {
  return a.firstUse <= b.lastUse && b.firstUse <= a.lastUse;
}

/// Places the buffers. Fails (naming the buffer index) when a lifetime is
/// reversed, the alignment is not a power of two, or sizes overflow.
Expected<MemoryPlan> planMemory(const std::vector<LiveBuffer> &buffers,
                                uint64_t alignment = 256);

/// Checks a plan: one aligned offset per buffer, every buffer inside
/// [0, arenaSize), and no two buffers with overlapping lifetimes sharing a
/// byte. Zero-sized buffers occupy no bytes. The message names the buffers.
Error checkMemoryPlan(const std::vector<LiveBuffer> &buffers,
                      const std::vector<uint64_t> &offsets, uint64_t arenaSize,
                      uint64_t alignment = 256);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_MEMORYPLAN_H

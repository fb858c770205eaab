//===- MemoryPlan.cpp - Static arena planning over launch lifetimes -------===//
//
// Greedy by size with best fit: big buffers are placed first because they
// are the hardest to fit into gaps later; each buffer goes into the smallest
// gap between the buffers it is alive with, else on top of them. Every
// offset stays a multiple of the alignment, so the arena is never larger
// than the naive sum of aligned sizes.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/MemoryPlan.h"

#include "Support.h"

#include <algorithm>
#include <numeric>

namespace kiln::runtime {

namespace {
bool isPowerOfTwo(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

std::string describe(const LiveBuffer &buffer, uint64_t offset) {
  return fmt::format("launches {}-{}, bytes [{}, {})", buffer.firstUse,
                     buffer.lastUse, offset, offset + buffer.size);
}
} // namespace

Expected<MemoryPlan> planMemory(const std::vector<LiveBuffer> &buffers,
                                uint64_t alignment) {
  if (!isPowerOfTwo(alignment))
    return makeError("memory plan: alignment {} is not a power of two",
                     alignment);
  MemoryPlan plan;
  std::vector<uint64_t> alignedSizes(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const LiveBuffer &buffer = buffers[i];
    if (buffer.firstUse > buffer.lastUse)
      return makeError("memory plan: buffer {}: first use {} is after last "
                       "use {}",
                       i, buffer.firstUse, buffer.lastUse);
    std::optional<uint64_t> aligned = alignUp(buffer.size, alignment);
    std::optional<uint64_t> total =
        aligned ? checkedAdd(plan.naiveSize, *aligned) : std::nullopt;
    if (!total)
      return makeError("memory plan: buffer {}: sizes overflow 64 bits", i);
    alignedSizes[i] = *aligned;
    plan.naiveSize = *total;
  }

  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (alignedSizes[a] != alignedSizes[b])
      return alignedSizes[a] > alignedSizes[b];
    return buffers[a].firstUse < buffers[b].firstUse;
  });

  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  std::vector<size_t> conflicts;
  for (size_t index : order) {
    uint64_t size = alignedSizes[index];
    if (size == 0)
      continue; // occupies no bytes; offset 0
    conflicts.clear();
    for (size_t other : placed)
      if (lifetimesOverlap(buffers[index], buffers[other]))
        conflicts.push_back(other);
    std::sort(conflicts.begin(), conflicts.end(), [&](size_t a, size_t b) {
      return plan.offsets[a] < plan.offsets[b];
    });
    // Walk the gaps below and between the conflicting buffers; `top` is the
    // highest byte they occupy so far.
    uint64_t top = 0;
    std::optional<uint64_t> bestOffset;
    uint64_t bestGap = 0;
    for (size_t other : conflicts) {
      uint64_t start = plan.offsets[other];
      if (start > top) {
        uint64_t gap = start - top;
        if (gap >= size && (!bestOffset || gap < bestGap)) {
          bestOffset = top;
          bestGap = gap;
        }
      }
      top = std::max(top, start + alignedSizes[other]);
    }
    uint64_t offset = bestOffset ? *bestOffset : top;
    plan.offsets[index] = offset;
    plan.arenaSize = std::max(plan.arenaSize, offset + size);
    placed.push_back(index);
  }
  return plan;
}

Error checkMemoryPlanLabelled(const std::vector<LiveBuffer> &buffers,
                              const std::vector<uint64_t> &offsets,
                              uint64_t arenaSize, uint64_t alignment,
                              const std::function<std::string(size_t)> &label) {
  if (!isPowerOfTwo(alignment))
    return makeError("alignment {} is not a power of two", alignment);
  if (offsets.size() != buffers.size())
    return makeError("{} offsets for {} buffers", offsets.size(),
                     buffers.size());
  std::vector<size_t> occupying;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const LiveBuffer &buffer = buffers[i];
    if (buffer.firstUse > buffer.lastUse)
      return makeError("{}: first use {} is after last use {}", label(i),
                       buffer.firstUse, buffer.lastUse);
    if (offsets[i] % alignment != 0)
      return makeError("{}: offset {} is not a multiple of {}", label(i),
                       offsets[i], alignment);
    if (!rangeFits(offsets[i], buffer.size, arenaSize))
      return makeError("{}: {} bytes at offset {} lie past the end of the "
                       "arena ({} bytes)",
                       label(i), buffer.size, offsets[i], arenaSize);
    if (buffer.size != 0)
      occupying.push_back(i);
  }
  // Sweep by offset: only buffers that start before one ends can share bytes
  // with it.
  std::sort(occupying.begin(), occupying.end(), [&](size_t a, size_t b) {
    return offsets[a] != offsets[b] ? offsets[a] < offsets[b] : a < b;
  });
  for (size_t x = 0; x < occupying.size(); ++x) {
    size_t a = occupying[x];
    uint64_t end = offsets[a] + buffers[a].size;
    for (size_t y = x + 1; y < occupying.size() && offsets[occupying[y]] < end;
         ++y) {
      size_t b = occupying[y];
      if (lifetimesOverlap(buffers[a], buffers[b]))
        return makeError("{} ({}) and {} ({}) are live at the same time and "
                         "share bytes",
                         label(a), describe(buffers[a], offsets[a]), label(b),
                         describe(buffers[b], offsets[b]));
    }
  }
  return Error::success();
}

Error checkMemoryPlan(const std::vector<LiveBuffer> &buffers,
                      const std::vector<uint64_t> &offsets, uint64_t arenaSize,
                      uint64_t alignment) {
  return checkMemoryPlanLabelled(
      buffers, offsets, arenaSize, alignment,
      [](size_t i) { return fmt::format("buffer {}", i); });
}

} // namespace kiln::runtime

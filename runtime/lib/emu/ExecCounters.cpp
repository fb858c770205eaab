//===- ExecCounters.cpp - Performance counters of a launch ----------------===//
//
// What LaunchSpec::countPerformance adds to LaunchStats: thread-instructions
// by class, FLOPs, and per warp-level access the global sectors (coalescing)
// and shared-memory bank conflicts, plus the distinct global sectors a
// launch reads and writes. The instruction families call countAccess after
// an access has succeeded; runWarp calls countInstruction for each issued
// instruction. Nothing here runs unless the launch asked for it.
//
// Bank conflicts follow the hardware's rule: 32 banks of 4-byte words; the
// warp is processed in phases (the whole warp for accesses of up to 4
// bytes a lane, half-warps for 8 bytes, quarter-warps for 16), and a phase
// takes as many passes as the largest number of distinct words any one
// bank holds. Lanes reading the same word share it (a broadcast).
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

#include <algorithm>

namespace kiln::runtime::emu::detail {

namespace {

constexpr uint64_t kSectorBytes = 32;

/// Adds `sector` to `set` unless `recent` (a direct-mapped cache of the
/// sectors added last) says it is there: loops that touch the same
/// sectors again skip the hash set.
void recordSector(std::unordered_set<uint64_t> &set,
                  std::vector<uint64_t> &recent, uint64_t sector) {
  uint64_t &slot = recent[(sector ^ (sector >> 12)) & (recent.size() - 1)];
  if (slot == sector)
    return;
  slot = sector;
  set.insert(sector);
}
constexpr unsigned kBanks = 32;

/// FLOPs (integer ops for s8/u8) of one warp-level mma: 2 * M * N * K.
uint64_t mmaFlopsOf(MmaShape shape) {
  return 2ull * 16 * 8 * mmaK(shape);
}

} // namespace

void addPerformanceCounters(LaunchStats &into, const LaunchStats &from) {
  into.fmaInstructions += from.fmaInstructions;
  into.mmaInstructions += from.mmaInstructions;
  into.loadStoreInstructions += from.loadStoreInstructions;
  into.shuffleInstructions += from.shuffleInstructions;
  into.otherInstructions += from.otherInstructions;
  into.fmaFlops += from.fmaFlops;
  into.mmaFlops += from.mmaFlops;
  into.globalAccesses += from.globalAccesses;
  into.globalBytesRequested += from.globalBytesRequested;
  into.globalSectors += from.globalSectors;
  into.sharedAccesses += from.sharedAccesses;
  into.sharedBankConflictReplays += from.sharedBankConflictReplays;
  into.asyncSharedBytes += from.asyncSharedBytes;
}

void mergeSectors(std::unordered_set<uint64_t> &into,
                  std::unordered_set<uint64_t> &from) {
  if (into.empty())
    into.swap(from);
  else
    into.insert(from.begin(), from.end());
}

void BlockRunner::countInstruction(const Instruction &in, uint32_t mask,
                                   uint32_t exec) {
  const uint64_t issued = __builtin_popcount(mask);
  switch (in.op) {
  case Op::Fma:
  case Op::Mad:
    if (isFloat(in.type)) {
      perf.fmaInstructions += issued;
      // Lanes whose guard held do the arithmetic: 2 FLOPs each, per half
      // for the x2 types.
      uint64_t perLane =
          in.type == Type::F16x2 || in.type == Type::BF16x2 ? 4 : 2;
      perf.fmaFlops += perLane * __builtin_popcount(exec);
      return;
    }
    break;
  case Op::Mma:
    perf.mmaInstructions += issued;
    if (exec)
      perf.mmaFlops += mmaFlopsOf(MmaShape(in.subop));
    return;
  case Op::Wgmma:
    if (WgmmaOp(in.subop) != WgmmaOp::MmaAsync)
      break;
    perf.mmaInstructions += issued;
    if (exec) {
      // Each warp computes its 16 of the warpgroup's 64 rows: a quarter of
      // 2 * 64 * N * K, and reads its A rows (from shared memory unless
      // they are registers) and a quarter of B, so that the four warps add
      // up to the instruction's traffic.
      const WgmmaInfo &info = kernel.wgmmas[in.target];
      uint64_t elem = typeBytes(info.abType);
      perf.mmaFlops += 2ull * 16 * info.n * info.k;
      perf.asyncSharedBytes += (info.aFromRegisters ? 0 : 16 * info.k * elem) +
                               info.n * info.k * elem / 4;
    }
    return;
  case Op::BulkCopy:
    if (BulkOp(in.subop) == BulkOp::Commit || BulkOp(in.subop) == BulkOp::Wait)
      break;
    perf.loadStoreInstructions += issued;
    return;
  case Op::Ld:
  case Op::St:
  case Op::Atom:
  case Op::Red:
  case Op::CpAsync:
  case Op::Ldmatrix:
  case Op::Stmatrix:
    perf.loadStoreInstructions += issued;
    return;
  case Op::Shfl:
  case Op::Vote:
  case Op::Redux:
  case Op::Match:
    perf.shuffleInstructions += issued;
    return;
  default:
    break;
  }
  perf.otherInstructions += issued;
}

void BlockRunner::countAccess(Space space, const uint64_t *address,
                              const unsigned *bytes, uint32_t lanes, bool reads,
                              bool writes) {
  // Split the lanes by the memory they reach (a generic access may reach
  // both).
  uint64_t where[32];
  uint32_t globalLanes = 0, sharedLanes = 0;
  forLanes(lanes, [&](unsigned l) {
    if (bytes[l] == 0)
      return;
    uint64_t a = address[l];
    Space s = space;
    if (s == Space::Generic) {
      s = Space::Global;
      if (a >= kParamWindow && a < kParamWindow + (1ull << 32))
        s = Space::Param;
      else if (a >= kSharedWindow && a < kLocalWindow + (1ull << 32)) {
        if (a >= kLocalWindow)
          s = Space::Local;
        else if (a < kSharedWindow + (1ull << 32)) {
          s = Space::Shared;
          a -= kSharedWindow;
        }
      }
    }
    where[l] = a;
    if (s == Space::Global)
      globalLanes |= 1u << l;
    else if (s == Space::Shared)
      sharedLanes |= 1u << l;
  });

  if (globalLanes) {
    // Accesses are at most 16 bytes a lane: two sectors at most each.
    uint64_t sectors[64];
    unsigned n = 0;
    // The distinct bytes the lanes asked for: a byte several lanes read
    // (a broadcast) is one useful byte, so coalescing stays <= 1.
    std::pair<uint64_t, uint64_t> spans[32];
    unsigned lanesSeen = 0;
    forLanes(globalLanes, [&](unsigned l) {
      spans[lanesSeen++] = {where[l], where[l] + bytes[l]};
      uint64_t first = where[l] / kSectorBytes;
      uint64_t last = (where[l] + bytes[l] - 1) / kSectorBytes;
      for (uint64_t s = first; s <= last && n < 64; ++s)
        sectors[n++] = s;
    });
    // Lanes in order usually give sectors in order (a coalesced access):
    // then counting the changes is enough.
    if (!std::is_sorted(sectors, sectors + n))
      std::sort(sectors, sectors + n);
    n = static_cast<unsigned>(std::unique(sectors, sectors + n) - sectors);
    if (!std::is_sorted(spans, spans + lanesSeen))
      std::sort(spans, spans + lanesSeen);
    uint64_t covered = 0, end = 0;
    for (unsigned i = 0; i < lanesSeen; ++i) {
      uint64_t from = std::max(spans[i].first, end);
      if (spans[i].second > from)
        covered += spans[i].second - from;
      end = std::max(end, spans[i].second);
    }
    perf.globalBytesRequested += covered;
    ++perf.globalAccesses;
    perf.globalSectors += n;
    for (unsigned i = 0; i < n; ++i) {
      if (reads)
        recordSector(sectorsRead, recentRead, sectors[i]);
      if (writes)
        recordSector(sectorsWritten, recentWritten, sectors[i]);
    }
  }

  if (sharedLanes) {
    ++perf.sharedAccesses;
    unsigned width = 0;
    forLanes(sharedLanes,
             [&](unsigned l) { width = std::max(width, bytes[l]); });
    const unsigned lanesPerPhase = width > 8 ? 8 : width > 4 ? 16 : 32;
    for (unsigned start = 0; start < 32; start += lanesPerPhase) {
      uint32_t phase =
          lanesPerPhase == 32
              ? sharedLanes
              : sharedLanes & (((1u << lanesPerPhase) - 1) << start);
      if (!phase)
        continue;
      // The distinct 4-byte words of the phase, then the most any bank
      // holds. Words in distinct banks (the common, conflict-free case)
      // need no sort.
      uint64_t words[32 * 5];
      unsigned n = 0;
      uint32_t banksUsed = 0;
      bool distinctBanks = true;
      forLanes(phase, [&](unsigned l) {
        uint64_t first = where[l] / 4, last = (where[l] + bytes[l] - 1) / 4;
        for (uint64_t w = first; w <= last && n < 32 * 5; ++w) {
          uint32_t bank = 1u << (w % kBanks);
          distinctBanks = distinctBanks && !(banksUsed & bank);
          banksUsed |= bank;
          words[n++] = w;
        }
      });
      if (distinctBanks)
        continue;
      std::sort(words, words + n);
      n = static_cast<unsigned>(std::unique(words, words + n) - words);
      unsigned perBank[kBanks] = {};
      unsigned passes = 0;
      for (unsigned i = 0; i < n; ++i)
        passes = std::max(passes, ++perBank[words[i] % kBanks]);
      perf.sharedBankConflictReplays += passes - 1;
    }
  }
}

void BlockRunner::countUniformAccess(Space space, const uint64_t *base,
                                     int64_t offset, unsigned bytes,
                                     uint32_t lanes, bool reads, bool writes) {
  uint64_t address[32];
  unsigned sizes[32];
  forLanes(lanes, [&](unsigned l) {
    address[l] = base[l] + offset;
    sizes[l] = bytes;
  });
  countAccess(space, address, sizes, lanes, reads, writes);
}

} // namespace kiln::runtime::emu::detail

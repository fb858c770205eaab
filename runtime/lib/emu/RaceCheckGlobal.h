//===- RaceCheckGlobal.h - Global memory between blocks ---------*- C++ -*-===//
//
// The launch-wide half of KILN_EMU_CHECK=races (the per-block half is
// RaceCheck.h), shared by the launch's host threads:
//   - which block wrote each global byte (two blocks writing the same
//     bytes outside atomics are a race: their order is not defined);
//   - each global synchronisation location (the address of an atomic,
//     ld.acquire or st.release): its modification order, as a sequence
//     number per operation, and what the releases into it carried;
//   - every block's global reads, checked when the launch ends: a read of
//     bytes another block wrote is a race unless a release/acquire chain
//     orders the write before it.
//
// Release/acquire between blocks. A block's write W is released at
// location L, sequence p, when a gpu-scope fence follows W (in the writing
// thread, or in a thread a barrier orders after W) and an atomic on L (the
// p-th operation on L) follows that fence (in the fencing thread, or in
// one a barrier orders after it), or when the atomic is itself .release or
// .acq_rel and follows W. A thread knows (L, s) after an atomic (or
// ld.acquire) on L that was operation s, once a gpu-scope fence follows it
// (in that thread, or in one a barrier orders after it) or at once when it
// is .acquire/.acq_rel. Atomics are read-modify-writes of L: each continues
// the release sequence, so operation s observes every release p < s. A
// read ordered after knowing (L, s) (program order or the block's
// barriers) is ordered after every write released at (L, p < s), and after
// everything the releases at L carried (releases join their thread's
// knowledge into L: chains through several blocks).
//
// Whether a read is ordered does not depend on which block ran first: a
// read that ran before the write in the emulator cannot be ordered after
// it, and the check runs when every block has finished, on what each
// block's accesses knew when they ran.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_RACECHECKGLOBAL_H
#define KILN_RUNTIME_LIB_EMU_RACECHECKGLOBAL_H

#include "PtxInterpreter.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::runtime::emu::detail {

/// What a thread knows of the global synchronisation locations: (location,
/// sequence) pairs sorted by location, sequence s meaning "after operation
/// s - 1 on it" (the releases p < s).
using SyncKnowledge = std::vector<std::pair<uint32_t, uint32_t>>;

/// Joins `from` into `into` (the larger sequence per location); true when
/// `into` changed.
bool joinKnowledge(SyncKnowledge &into, const SyncKnowledge &from);
/// The sequence `k` holds for `location` (0: none).
uint32_t knownSequence(const SyncKnowledge &k, uint32_t location);

class GlobalAccessTracker {
public:
  /// Granules of 16 bytes: a byte mask per granule.
  static constexpr unsigned kGranule = 16;
  static constexpr uint32_t kNoRelease = UINT32_MAX;
  struct Write {
    uint64_t granule = 0; ///< address / kGranule
    uint16_t mask = 0;    ///< bytes of the granule written
    uint16_t thread = 0;
    uint32_t pc = 0;
    /// The writing thread's clock (RaceCheck), to find its release.
    uint32_t clock = 0;
    /// The first release that covers it (location, sequence), or
    /// kNoRelease.
    uint32_t releaseLocation = kNoRelease;
    uint32_t releaseSequence = 0;
  };
  /// A block's reads of one granule with one knowledge.
  struct Read {
    uint64_t granule = 0;
    /// What the readers knew: an index in the block's knowledge list (0:
    /// nothing), then, once added, in the launch's.
    uint32_t knowledge = 0;
    /// The first read's instruction.
    uint32_t pc = 0;
    uint16_t mask = 0;
    /// The first thread reading each 4-byte word (for reports).
    uint16_t thread[4] = {0, 0, 0, 0};
  };
  /// A global synchronisation location.
  struct Location {
    uint32_t id = 0;
    /// Operations on it so far.
    uint32_t sequence = 0;
    /// Joined knowledge of the threads that released into it.
    SyncKnowledge carried;
  };

  GlobalAccessTracker();

  /// Adds the writes of block `block` (linear index); on a conflict with
  /// another block fills `conflict` and `other`, and returns false.
  bool addWrites(uint64_t block, std::vector<Write> &writes, Write &conflict,
                 Write &otherWrite, uint64_t &otherBlock);
  /// Adds the reads of block `block`, their knowledge indexing `known`
  /// (entry 0 empty).
  void addReads(uint64_t block, std::vector<Read> &reads,
                const std::vector<SyncKnowledge> &known);

  /// The location at `address`, locked (its modification order) while
  /// `lock` holds.
  Location &lockLocation(uint64_t address, std::unique_lock<std::mutex> &lock);

  /// A read of bytes another block wrote that nothing orders after the
  /// write.
  struct ReadRace {
    uint64_t readBlock = 0, writeBlock = 0;
    uint64_t address = 0;
    Read read;
    Write write;
    /// Why: the write was never released; the reader knows nothing of its
    /// release location; or it knows only operations before the release.
    enum Cause { Unreleased, NotAcquired, AcquiredEarlier } cause = Unreleased;
    uint64_t releaseAddress = 0;
  };
  /// After every block ran: the race with the lowest reading block (then
  /// address), or false when there is none.
  bool findReadRace(ReadRace &race);

private:
  struct Owner {
    uint64_t block = 0;
    uint32_t pc = 0;
    uint16_t thread = 0;
    uint16_t mask = 0;
    uint32_t releaseLocation = kNoRelease;
    uint32_t releaseSequence = 0;
    /// 1 + the index in the shard's `more` of the next block writing bytes
    /// of this granule, or 0.
    uint32_t next = 0;
  };
  static constexpr unsigned kShards = 64;
  static unsigned shardOf(uint64_t key) {
    return static_cast<unsigned>((key * 0x9e3779b97f4a7c15ull) >> 58);
  }
  struct Shard {
    std::mutex mutex;
    std::unordered_map<uint64_t, Owner> owners;
    std::vector<Owner> more;
  };
  Shard shards[kShards];
  struct LocationShard {
    std::mutex mutex;
    std::unordered_map<uint64_t, Location> locations;
  };
  LocationShard locationShards[kShards];
  /// Location id -> address (for reports), under `locationIds`.
  std::mutex locationIds;
  std::vector<uint64_t> locationAddresses;

  std::mutex readsMutex;
  struct BlockRead {
    uint64_t block;
    Read read;
  };
  std::vector<BlockRead> reads;
  std::vector<SyncKnowledge> knowledge;
};

/// The fault message of `race` in launch `spec` of `kernel` (the reading
/// thread's, like a block's fault).
std::string describeReadRace(const Kernel &kernel, const LaunchSpec &spec,
                             const GlobalAccessTracker::ReadRace &race);

} // namespace kiln::runtime::emu::detail

#endif // KILN_RUNTIME_LIB_EMU_RACECHECKGLOBAL_H

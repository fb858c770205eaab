//===- InterpreterInternal.h - The interpreter's shared state ---*- C++ -*-===//
//
// Private to runtime/lib/emu: the block runner that every instruction
// family's file (Exec*.cpp) adds member functions to, the per-warp state
// and the lane loop. PtxInterpreter.cpp holds the scheduling core (warps,
// divergence, the time slice, launch).
//
// Registers live in one array per warp, slot-major: slot s of lane l is
// regs[s * 32 + l], a 64-bit cell holding the value's bits zero-extended
// (a 32-bit register's upper half is never read). Each instruction is
// dispatched once per warp and loops over its active lanes inside.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_INTERPRETERINTERNAL_H
#define KILN_RUNTIME_LIB_EMU_INTERPRETERINTERNAL_H

#include "PtxInterpreter.h"
#include "RaceCheck.h"

#include "../Support.h"

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::runtime::emu::detail {

constexpr uint32_t kFullMask = 0xffffffffu;
/// Warp instructions a warp issues before the next warp of its block runs.
constexpr uint64_t kTimeSlice = 1 << 16;
/// WarpState::barrier of lanes that wait in mbarrier.try_wait (barriers
/// 0..15 are bar.sync's).
constexpr uint32_t kMbarrierWait = 16;
/// WarpState::barrier of lanes that wait in barrier.cluster.wait.
constexpr uint32_t kClusterWait = 17;
/// A shared::cluster address of another block of the cluster (what mapa
/// returns for it): (rank + 1) << kClusterRankShift | offset. Addresses
/// below 1 << kClusterRankShift are the block's own shared memory (a
/// block has at most 228 KiB).
constexpr unsigned kClusterRankShift = 24;
constexpr uint64_t kClusterOffsetMask = (1ull << kClusterRankShift) - 1;

template <typename F>
inline __attribute__((always_inline)) void forLanes(uint32_t mask, F &&f) {
  if (mask == kFullMask) {
    for (unsigned l = 0; l < 32; ++l)
      f(l);
  } else {
    for (uint32_t m = mask; m; m &= m - 1)
      f(static_cast<unsigned>(__builtin_ctz(m)));
  }
}

/// The member mask of a .sync warp exchange (shfl, vote, redux, match) as
/// the first lane of `mask` holds it in registers `r`; 0 for any other
/// instruction (and for vote without .sync).
uint32_t syncMembers(const uint64_t *r, const Instruction &in, uint32_t mask);

struct WarpState {
  /// Lanes that have not exited.
  uint32_t live = 0;
  /// Lanes waiting at a barrier.
  uint32_t waiting = 0;
  /// When true every live lane that is not waiting is at `pc`.
  bool converged = true;
  uint32_t pc = 0;
  uint32_t lanePc[32] = {};
  /// The barrier id the waiting lanes wait at.
  uint32_t barrier = 0;
  /// Each lane's carry flag (CC.CF), for add.cc/addc/mad.cc/madc.
  uint32_t carry = 0;
  /// For lanes waiting in mbarrier.try_wait: BlockRunner::mbarrierEvents
  /// when they began to wait (they try again once it changes).
  uint64_t waitEvents = 0;
  /// wgmma.mma_async not yet retired by wgmma.wait_group (their registers
  /// are checked on every instruction while this is non-zero).
  uint32_t wgmmaInFlight = 0;
  /// The race check: the warp's last time slice ended in a failed
  /// test_wait (a spin that may never end) of lane `spinLane` at `spinPc`.
  bool spinning = false;
  unsigned spinLane = 0;
  uint32_t spinPc = 0;
};

/// Stops a warp: the fault to report, with the lane that caused it.
struct Fault {
  bool raised = false;
  unsigned warp = 0, lane = 0;
  uint32_t pc = 0;
  std::string what;
};

/// Adds the per-instruction and per-access counters of `from` (instruction
/// classes, FLOPs, global and shared accesses) to `into`; the instruction
/// totals, block counts and DRAM sectors are the caller's.
void addPerformanceCounters(LaunchStats &into, const LaunchStats &from);
/// into |= from (`from` may be emptied).
void mergeSectors(std::unordered_set<uint64_t> &into,
                  std::unordered_set<uint64_t> &from);

class BlockRunner;

/// The blocks of one cluster, co-scheduled on one host thread (by rank),
/// and the cluster barrier's phase (barrier.cluster; each block keeps its
/// threads' arrivals).
struct ClusterRun {
  std::vector<BlockRunner *> blocks;
  uint64_t barrierPhase = 0;
  /// Drives the skewed schedule (runCluster): how many time slices each
  /// block gets in a round.
  uint64_t schedule = 0x9e3779b97f4a7c15ull;
};
/// Runs the begun blocks of `run` to completion, interleaved; the block
/// that faulted (its errorMessage() says why), or nullptr. The interleaving
/// is skewed: in each round every block of a cluster gets from 0 to 3 time
/// slices, drawn from `run.schedule`, so blocks drift apart as they may on
/// hardware (nothing orders two blocks of a cluster but barrier.cluster
/// and mbarriers), and a kernel that reads another block's shared memory
/// without waiting for it reads stale data here too.
BlockRunner *runCluster(ClusterRun &run);

/// What one scheduling round of a block did (BlockRunner::step).
enum class BlockStep { Fault, Progress, Done, Stuck };

/// What a barrier instruction does to the lanes that issue it.
/// Advance and Yield move on (Yield also ends the warp's time slice: a
/// test_wait that failed).
enum class BarrierStep { Fault, Advance, Wait, Yield };

/// Runs the blocks of one launch, one after another, on one host thread.
/// Its member functions live in the file of their instruction family
/// (Exec*.cpp); the scheduling core is PtxInterpreter.cpp.
class BlockRunner {
public:
  /// `globalWrites`: the launch's record of global writes by block (the
  /// race check, LaunchSpec::checkRaces), or nullptr.
  BlockRunner(const Kernel &kernel, const LaunchSpec &spec,
              GlobalAccessTracker *globalWrites = nullptr);
  ~BlockRunner();

  /// What went wrong, after a fault: kernel, block, thread, PTX line.
  std::string errorMessage() const;

  // Co-scheduling (the blocks of a cluster): beginBlock resets the block,
  // then step runs each warp for a time slice, or opens barriers when
  // none can run. Stuck: nothing here can move without another block;
  // stuckFault names what it waits for (a deadlock).
  void beginBlock(Dim3 id, ClusterRun *run, uint32_t rank);
  BlockStep step();
  bool stuckFault();
  Dim3 blockId() const { return ctaid; }
  /// Changes other blocks can see (mbarrier events, cluster arrivals).
  uint64_t eventCount() const { return mbarrierEvents + clusterArrivals; }
  /// Whether every live thread has arrived at the cluster barrier's
  /// current phase; `arrived` and `live` count them.
  void countClusterArrivals(uint64_t &arrived, uint64_t &live) const;
  /// The cluster barrier's phase completed: its waiters try again.
  void wakeClusterWaiters();
  /// Every waiting lane waits in barrier.cluster.wait.
  bool waitsOnlyAtClusterBarrier() const {
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].waiting && warps[w].barrier != kClusterWait)
        return false;
    return true;
  }

  uint64_t threadInstructions = 0;
  uint64_t warpInstructions = 0;

  /// The performance counters (LaunchSpec::countPerformance) of the blocks
  /// this runner ran. The instruction totals and block counts stay zero
  /// here: runKernel fills those. dramReadSectors/dramWriteSectors are
  /// filled from the sets below when the launch merges its runners.
  LaunchStats perf;
  /// Distinct 32-byte global sectors read and written (sector index =
  /// address / 32).
  std::unordered_set<uint64_t> sectorsRead, sectorsWritten;
  /// Direct-mapped caches of the sectors last added to each set (a power
  /// of two entries; UINT64_MAX is empty).
  std::vector<uint64_t> recentRead, recentWritten;

private:
  uint64_t *warpRegs(unsigned w) {
    return regs.data() + static_cast<size_t>(w) * numSlots * 32;
  }
  /// The block of rank `rank` in this block's cluster (this one when the
  /// cluster is this block alone), or nullptr.
  BlockRunner *clusterBlock(uint32_t rank) {
    if (!cluster)
      return rank == 0 ? this : nullptr;
    return rank < cluster->blocks.size() ? cluster->blocks[rank] : nullptr;
  }
  /// The block's rank in its cluster (%cluster_ctarank).
  uint32_t clusterRank(Dim3 id) const {
    return id.x % spec.cluster.x +
           spec.cluster.x * (id.y % spec.cluster.y +
                             spec.cluster.y * (id.z % spec.cluster.z));
  }
  bool runWarp(unsigned w);
  bool fault(unsigned warp, unsigned lane, uint32_t pc, std::string what) {
    if (!faultState.raised) {
      faultState.raised = true;
      faultState.warp = warp;
      faultState.lane = lane;
      faultState.pc = pc;
      faultState.what = std::move(what);
    }
    return false;
  }

  /// Host pointer for a global access, or nullptr (and a fault).
  uint8_t *globalPointer(uint64_t address, unsigned size) {
    if (address >= cacheBase && address - cacheBase + size <= cacheSize)
      return cacheHost + (address - cacheBase);
    // Binary search for the last region starting at or before address.
    size_t lo = 0, hi = numRegions;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (regions[mid].base <= address)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0)
      return nullptr;
    const MemoryRegion &region = regions[lo - 1];
    if (address - region.base + size > region.size)
      return nullptr;
    cacheBase = region.base;
    cacheSize = region.size;
    cacheHost = region.host;
    return region.host + (address - region.base);
  }
  std::string describeGlobalMiss(uint64_t address, unsigned size) const;

  bool memoryAccess(unsigned w, uint32_t pc, const Instruction &in,
                    uint32_t exec);
  /// Host pointer for `bytes` at `address` in `space` for lane `lane` of
  /// warp `w` (generic addresses may be shared or local), checked for
  /// bounds and alignment to `align`; nullptr after a fault.
  __attribute__((noinline)) uint8_t *resolve(unsigned w, unsigned lane,
                                             uint32_t pc, Space space,
                                             uint64_t address, unsigned bytes,
                                             unsigned align, const char *what,
                                             bool *isSharedOut = nullptr);
  /// The shared-read check (--check-shared-reads): every byte was written.
  bool checkSharedRead(unsigned w, unsigned lane, uint32_t pc, uint64_t offset,
                       unsigned bytes);
  void markSharedWritten(uint64_t offset, unsigned bytes) {
    if (checkShared)
      std::memset(sharedWritten.data() + offset, 1, bytes);
  }
  bool atomic(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  /// vote, activemask, redux: `mask` is every lane at the instruction.
  bool warpCollective(unsigned w, uint32_t pc, const Instruction &in,
                      uint32_t mask, uint32_t exec);
  bool loadMatrix(unsigned w, uint32_t pc, const Instruction &in,
                  uint32_t exec);
  bool storeMatrix(unsigned w, uint32_t pc, const Instruction &in,
                   uint32_t exec);
  bool matrixMultiply(unsigned w, uint32_t pc, const Instruction &in,
                      uint32_t exec);
  /// mma.sync with s8/u8 inputs and s32 accumulators (exact, wrapping).
  bool integerMatrixMultiply(unsigned w, const Instruction &in);
  /// mma.sync with e4m3/e5m2 inputs and f32 accumulators.
  bool fp8MatrixMultiply(unsigned w, const Instruction &in);
  bool asyncCopy(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  /// Completes lane `lane`'s copies of groups before `group` (all with
  /// UINT32_MAX).
  void completeCopies(unsigned w, uint32_t lanes, uint32_t keepGroups,
                      bool all);
  /// bar.sync/bar.arrive/bar.red for the lanes `exec` of the `mask` at
  /// `pc`: whether they wait, move on, or faulted.
  BarrierStep barrier(unsigned w, uint32_t pc, const Instruction &in,
                      uint32_t mask, uint32_t exec);
  /// Opens barrier `id`: its waiting lanes move past it (bar.red writes).
  void releaseBarrier(uint32_t id);
  /// Writes every lane's pc so that the lanes of warp `ws` can go separate
  /// ways.
  static void diverge(WarpState &ws) {
    if (!ws.converged)
      return;
    for (unsigned l = 0; l < 32; ++l)
      ws.lanePc[l] = ws.pc;
    ws.converged = false;
  }
  bool shuffle(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  bool elect(unsigned w, const Instruction &in, uint32_t exec);

  // mbarrier (ExecMbarrier.cpp).
  /// Where a thread used an mbarrier (for the race check's reports).
  struct MbarrierSite {
    unsigned warp = 0, lane = 0;
    uint32_t pc = 0;
  };
  struct Mbarrier {
    uint64_t offset = 0; ///< in shared memory
    uint32_t expected = 0, pending = 0;
    int64_t tx = 0;
    uint64_t phase = 0; ///< phases completed so far
    bool valid = false;
    /// The phases a failed wait needed completed (0: none), where it
    /// waited, and the last expect_tx.
    uint64_t awaited = 0;
    MbarrierSite waitSite, expectSite;
  };
  /// The mbarrier at shared offset `offset`, or nullptr.
  Mbarrier *findMbarrier(uint64_t offset) {
    for (Mbarrier &m : mbarriers)
      if (m.offset == offset)
        return &m;
    return nullptr;
  }
  /// The shared offset of lane `lane`'s mbarrier operand, checked (8-byte
  /// aligned, in shared memory); false after a fault.
  bool mbarrierOffset(unsigned w, unsigned lane, uint32_t pc, Space space,
                      uint64_t address, uint64_t &offset);
  /// Arrives `count` times; completes the phase when nothing is pending.
  bool mbarrierArrive(unsigned w, unsigned lane, uint32_t pc, Mbarrier &m,
                      uint32_t count, bool drop);
  /// Adds `delta` to the tx-count (expect_tx: +, complete_tx: -).
  bool mbarrierTx(unsigned w, unsigned lane, uint32_t pc, Mbarrier &m,
                  int64_t delta);
  void mbarrierMaybeComplete(Mbarrier &m);
  /// Lands the asynchronous work that completes on the mbarrier at
  /// `offset` (bulk copies, cp.async arrive-ons): the emulator lets it
  /// happen as late as allowed, when a thread waits on it.
  bool landAsyncWork(uint64_t offset);
  /// mbarrier.*: whether the lanes move on, wait (try_wait) or faulted.
  BarrierStep mbarrier(unsigned w, uint32_t pc, const Instruction &in,
                       uint32_t mask, uint32_t exec);
  /// Lets the lanes waiting in try_wait try again after mbarrier events.
  bool wakeMbarrierWaiters();
  /// The deadlock message for a warp whose lanes wait in try_wait (or, for
  /// the race check, spin on test_wait at `pc`).
  bool mbarrierDeadlock(unsigned w);
  bool mbarrierDeadlock(unsigned w, unsigned lane, uint32_t pc);
  /// The race check at the end of a block: copies never waited for,
  /// tx-counts that never drained, phases waited for that never completed
  /// (each a hang on a GPU).
  bool checkMbarriersAtExit();
  std::vector<Mbarrier> mbarriers;
  /// Counts mbarrier state changes and async work queued on them.
  uint64_t mbarrierEvents = 0;
  unsigned mbarrierWaiters = 0;
  /// cp.async.mbarrier.arrive: the lane's copies issued before it land,
  /// then it arrives.
  struct DeferredArrive {
    uint64_t mbarrier = 0;
    uint64_t serial = 0; ///< copies with a smaller serial are before it
    unsigned warp = 0, lane = 0;
    uint32_t pc = 0;
    bool noinc = false;
  };
  std::vector<DeferredArrive> deferredArrives;
  uint64_t copySerial = 0;

  // Bulk copies and TMA (ExecBulkCopy.cpp): loads read global memory
  // when issued and land in shared memory (16-byte chunks) when a thread
  // waits on their mbarrier.
  struct PendingBulk {
    uint64_t mbarrier = 0;
    unsigned warp = 0, lane = 0;
    uint32_t pc = 0;
    std::vector<uint32_t> chunks; ///< shared offsets of 16-byte chunks
    std::vector<uint8_t> data;    ///< 16 bytes per chunk
    uint64_t bytes = 0;           ///< the tx bytes it completes
  };
  std::vector<PendingBulk> pendingBulk;
  bool bulkCopy(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  // Clusters (ExecCluster.cpp).
  bool mapAddress(unsigned w, uint32_t pc, const Instruction &in,
                  uint32_t exec);
  /// barrier.cluster.arrive / wait.
  BarrierStep clusterBarrier(unsigned w, uint32_t pc, const Instruction &in,
                             uint32_t mask, uint32_t exec);
  /// The block and offset a shared::cluster address names (rank bits
  /// above kClusterRankShift), checked for `bytes` in bounds; nullptr
  /// after a fault.
  BlockRunner *clusterTarget(unsigned w, unsigned lane, uint32_t pc,
                             uint64_t address, unsigned bytes,
                             const char *what, uint64_t &offset);
  /// The deadlock message for a warp waiting in barrier.cluster.wait.
  bool clusterBarrierDeadlock(unsigned w);
  ClusterRun *cluster = nullptr;
  uint32_t rankInCluster = 0;
  /// Every thread of the block has exited (its shared memory is gone).
  bool exited = false;
  /// Per thread: the cluster barrier phase + 1 it arrived in (0: none).
  std::vector<uint64_t> clusterArrivedPhase;
  uint64_t clusterArrivals = 0;
  unsigned clusterWaiters = 0;
  /// warpInstructions when the block began (for the step limit).
  uint64_t blockStart = 0;
  /// Rounds of step() in which every runnable warp only spun on a failed
  /// test_wait and no mbarrier changed (the race check's hang detector).
  unsigned spinRounds = 0;

  // wgmma (ExecWgmma.cpp).
  bool wgmma(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  /// The registers of the wgmma in flight that `in` reads or writes, as a
  /// fault; true when it touches none.
  bool checkWgmmaRegisters(unsigned w, uint32_t pc, const Instruction &in,
                           uint32_t exec);
  struct WgmmaPending {
    uint32_t group = 0; ///< UINT32_MAX until committed
    uint32_t pc = 0;
    uint32_t info = 0;
  };
  std::vector<std::vector<WgmmaPending>> wgmmaPending;
  std::vector<uint32_t> wgmmaCommitted;
  /// Per warp and slot: 1 an accumulator in flight, 2 an A register.
  std::vector<std::vector<uint8_t>> wgmmaBusy;
  void retireWgmma(unsigned w, uint32_t keepGroups);
  bool convert(uint64_t *r, const Instruction &in, uint32_t exec);
  bool arithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
  /// prmt, bfind, slct, lop3, testp, mul24, mad24, sad, cnot, bmsk, szext,
  /// dp4a.
  bool bitArithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
  /// f16, bf16, f16x2 and bf16x2 arithmetic (each half on its own).
  bool halfArithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
  /// add/mad with .cc (carry out) or addc/madc (carry in), 32 or 64 bits.
  bool carryArithmetic(WarpState &ws, uint64_t *r, const Instruction &in,
                       uint32_t exec);

  const Kernel &kernel;
  const LaunchSpec &spec;
  const Instruction *code;
  uint32_t numSlots;
  uint32_t threadsPerBlock = 0;
  unsigned numWarps = 0;
  std::vector<uint64_t> regs;
  std::vector<WarpState> warps;
  std::vector<uint8_t> shared;
  uint64_t sharedBytes = 0;
  /// Every thread's local memory, kernel.localBytes each, by thread index.
  std::vector<uint8_t> local;
  const MemoryRegion *regions = nullptr;
  size_t numRegions = 0;
  uint64_t cacheBase = 0, cacheSize = 0;
  uint8_t *cacheHost = nullptr;
  Dim3 ctaid;
  Fault faultState;

  /// Barriers 0..15: threads that arrived without waiting (bar.arrive),
  /// the thread count each expects (0: the whole block), bar.red's
  /// accumulators.
  static constexpr unsigned kBarriers = 16;
  uint32_t barrierArrived[kBarriers] = {};
  uint32_t barrierExpected[kBarriers] = {};
  uint32_t barrierPopc[kBarriers] = {};
  bool barrierAll[kBarriers] = {};
  bool barrierAny[kBarriers] = {};

  /// cp.async copies in flight: read at issue, written to shared memory
  /// when a wait completes their group.
  struct PendingCopy {
    uint64_t sharedOffset = 0;
    uint32_t group = 0;
    uint8_t lane = 0;
    uint8_t size = 0;
    uint8_t bytes[16] = {};
    /// Issue order (cp.async.mbarrier.arrive waits for the earlier ones).
    uint64_t serial = 0;
  };
  std::vector<std::vector<PendingCopy>> pendingCopies;
  /// Per warp and lane: groups committed so far.
  std::vector<std::array<uint32_t, 32>> committedGroups;

  bool checkShared = false;
  std::vector<uint8_t> sharedWritten;

  /// KILN_EMU_CHECK=races (LaunchSpec::checkRaces): the happens-before
  /// checker the instruction families report their accesses and
  /// synchronisation to (nullptr when off).
  std::unique_ptr<RaceCheck> raceCheck;
  /// A race the checker found: the fault of lane `lane` of warp `w`.
  bool raceFault(unsigned w, unsigned lane, uint32_t pc) {
    return fault(w, lane, pc, raceCheck->takeReport());
  }

  // Performance counters (ExecCounters.cpp), only with
  // LaunchSpec::countPerformance: the default path tests one flag.
  bool countPerformance = false;
  /// Classifies the instruction the lanes `mask` issued (`exec`: those
  /// whose guard held).
  void countInstruction(const Instruction &in, uint32_t mask, uint32_t exec);
  /// One warp-level access by the lanes `lanes` in `space`: lane l touches
  /// `bytes[l]` bytes at `address[l]` (generic addresses are mapped to
  /// shared or global memory here; param, const and local ones are not
  /// counted). Global bytes count toward the sectors read and/or written;
  /// shared ones toward bank conflicts.
  void countAccess(Space space, const uint64_t *address,
                   const unsigned *bytes, uint32_t lanes, bool reads,
                   bool writes);
  /// The same for a uniform access `base[l] + offset` of `bytes` per lane.
  void countUniformAccess(Space space, const uint64_t *base, int64_t offset,
                          unsigned bytes, uint32_t lanes, bool reads,
                          bool writes);
};

} // namespace kiln::runtime::emu::detail

#endif // KILN_RUNTIME_LIB_EMU_INTERPRETERINTERNAL_H

//===- RaceCheck.h - Data races and async-proxy hazards in a block -*- C++ -*-===//
//
// KILN_EMU_CHECK=races (LaunchSpec::checkRaces). The emulator runs a
// block's warps one after another, so it hides the races real warps
// expose; this checker tracks happens-before between the block's threads
// with vector clocks and reports, as a fault of the launch:
//   - a shared-memory byte written by one thread and read or written by
//     another with nothing ordering the two;
//   - a generic-proxy write read by the async proxy (wgmma descriptors,
//     TMA and bulk stores) with no fence.proxy.async on the path from the
//     write to the read, and async-proxy writes (TMA loads) read before
//     their mbarrier wait;
//   - two blocks of one launch writing the same global bytes outside
//     atomics, and a block reading global bytes another block wrote with
//     no release/acquire chain from the write (RaceCheckGlobal.h: there
//     the ordering between blocks; here, what a block's barriers add to
//     it: which of its writes a fence and an atomic release, and which of
//     its reads an atomic and a fence acquire).
//
// Ordering. Each thread has a clock that moves on at each of its releases;
// a thread's vector clock says how far it knows every other thread's (and
// every agent's) clock. Releases and acquires:
//   - bar.sync / barrier.sync / bar.red: the participants (waiters and the
//     threads that bar.arrive'd since the barrier last opened) release, the
//     waiters acquire;
//   - mbarrier arrive (and a cp.async.mbarrier.arrive when its copies land)
//     releases into the mbarrier; a successful test_wait/try_wait acquires
//     everything released into it so far (arrivals are read-modify-writes
//     of one object, each continuing the release sequence of the earlier
//     ones);
//   - shfl.sync, vote.sync, redux.sync, match.sync and bar.warp.sync order
//     their member lanes among themselves. Nothing else orders two lanes of
//     one warp (independent thread scheduling, sm_70 on), not even running
//     the same instruction together.
// Asynchronous units are agents with clocks of their own: a wgmma's reads
// (per warp) are retired when wgmma.wait_group completes its group, a bulk
// store's reads (per warp) at cp.async.bulk.wait_group, and a TMA load's
// writes (per mbarrier) when its bytes complete on the mbarrier. A
// cp.async's writes are in flight until its wait_group (they then belong
// to the issuing thread) or until the cp.async.mbarrier.arrive after it
// lands (they then belong to that mbarrier's agent).
//
// Cost. A full-block barrier costs O(threads) (the snapshot S every thread
// knows afterwards); other synchronisation costs O(entries above S). Each
// shared byte keeps its last write and its reads since (one inline, more in
// a list while concurrent readers exist). docs/emulator.md has the
// measured slowdown.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_RACECHECK_H
#define KILN_RUNTIME_LIB_EMU_RACECHECK_H

#include "PtxInterpreter.h"
#include "RaceCheckGlobal.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime::emu::detail {

/// The per-block happens-before state of one BlockRunner. Threads are
/// numbered warp * 32 + lane.
class RaceCheck {
public:
  RaceCheck(const Kernel &kernel, const LaunchSpec &spec, uint64_t sharedBytes,
            unsigned numWarps, GlobalAccessTracker *global);
  ~RaceCheck();

  void beginBlock(Dim3 ctaid, uint64_t linearBlock);
  /// The warp instruction being issued (a number unique in the block): the
  /// lanes of one store that write the same bytes are not a race (one of
  /// them writes, as the CUDA programming guide defines).
  void setIssue(uint32_t serial) { issue = serial; }
  /// The report of the check that failed last (a fault message's tail).
  std::string takeReport() { return std::move(report); }

  // Generic-proxy shared accesses of thread `t` (ld/st/atom/red, ldmatrix,
  // stmatrix).
  bool read(unsigned t, uint32_t pc, uint64_t offset, unsigned bytes);
  bool write(unsigned t, uint32_t pc, uint64_t offset, unsigned bytes);
  bool atomic(unsigned t, uint32_t pc, uint64_t offset, unsigned bytes);

  // cp.async: issued (in flight), landed (by the thread's wait_group, or
  // when a thread waits on the mbarrier of a cp.async.mbarrier.arrive
  // issued after it), and the arrive itself.
  bool copyIssued(unsigned t, uint32_t pc, uint64_t offset, unsigned bytes);
  void copyLanded(unsigned t, uint64_t offset, unsigned bytes, uint64_t serial,
                  bool byOwnWait);
  void copyArriveIssued(unsigned t, uint64_t mbarrier, uint64_t serial);
  void copyArriveLanded(unsigned t, uint64_t mbarrier);

  // Barriers 0-15 and warp-synchronous exchanges.
  void barrierArrive(unsigned id, unsigned t);
  /// Barrier `id` opens for the lanes `waiting[w]` of each warp.
  void barrierOpen(unsigned id, const uint32_t *waiting);
  void warpSync(unsigned w, uint32_t lanes);
  /// fence.proxy.async (covering shared memory) by thread `t`.
  void proxyFence(unsigned t);

  // mbarriers (keyed by shared offset).
  void mbarrierInit(uint64_t offset);
  void mbarrierArrive(uint64_t offset, unsigned t);
  void mbarrierAcquire(uint64_t offset, unsigned t);

  // wgmma.mma_async of warp `w`: begin, then each element it reads (the
  // whole 16-byte row of shared memory it lies in is checked, once: the
  // unit the async proxy reads).
  void wgmmaBegin(unsigned w, uint32_t pc);
  bool wgmmaRead(uint64_t offset, unsigned bytes);
  void wgmmaCommit(unsigned w);
  void wgmmaWait(unsigned w, uint32_t lanes, uint32_t keepGroups);

  // TMA / bulk loads (async-proxy writes completing on an mbarrier) and
  // stores (async-proxy reads of shared memory, retired by bulk groups).
  void bulkLoadBegin(unsigned t, uint32_t pc, uint64_t mbarrier);
  bool bulkLoadWrite(uint64_t offset, unsigned bytes);
  void bulkLoadLanded(uint64_t mbarrier);
  void bulkStoreBegin(unsigned t, uint32_t pc);
  bool bulkStoreRead(uint64_t offset, unsigned bytes);
  void bulkCommit(unsigned t);
  void bulkWait(unsigned t, uint32_t keepGroups);

  /// A global store of thread `t` (not an atomic; bulk and TMA stores
  /// too).
  void globalWrite(unsigned t, uint32_t pc, uint64_t address, unsigned bytes);
  /// A global load of thread `t` (ld.global and generic loads of global
  /// memory, cp.async, bulk and TMA load sources; not ld.acquire, an
  /// acquire: globalSync).
  void globalRead(unsigned t, uint32_t pc, uint64_t address, unsigned bytes);
  /// A membar/fence.sc/fence.acq_rel of thread `t` (only gpu and sys scope
  /// order between blocks).
  void memoryFence(unsigned t, uint32_t pc);
  /// Whether the ld/st at `pc` is .acquire/.release (a synchronisation:
  /// globalSync, not globalRead/globalWrite).
  bool isSyncAccess(uint32_t pc) const {
    return syncTracking && (pcFlags[pc] & (kPcAcquire | kPcRelease));
  }
  /// An atomic on global memory (reads: atom; writes: atom, red), or an
  /// ld.acquire (reads) or st.release (writes), of thread `t`: `perform`
  /// does the memory operation, in the location's modification order.
  template <typename F>
  void globalSync(unsigned t, uint32_t pc, uint64_t address, bool reads,
                  bool writes, F &&perform) {
    if (!global || !syncTracking) {
      perform();
      return;
    }
    std::unique_lock<std::mutex> lock;
    GlobalAccessTracker::Location &at = global->lockLocation(address, lock);
    perform();
    syncLocked(t, pc, at, reads, writes);
  }
  /// At the end of a block: merges its global writes and reads into the
  /// launch's; false on a write-write conflict with another block (then
  /// faultThread/faultPc name this block's write).
  bool endBlock(unsigned &faultThread, uint32_t &faultPc);

  /// Whether the kernel issues fence.proxy.async and async-proxy reads
  /// (then the fenced clocks below are tracked).
  bool tracksFences() const { return fenceTracking; }

private:
  /// One access remembered per shared byte.
  struct Record {
    uint32_t clock = 0;
    /// epoch when made; 0: never. Valid from the block's first epoch on.
    uint32_t gen = 0;
    uint32_t pc = 0;
    /// The warp instruction that made it (setIssue).
    uint32_t issue = 0;
    /// Whose clock `clock` is: a thread or an agent.
    uint16_t who = 0;
    /// The thread that issued it (for messages).
    uint16_t thread = 0;
    uint8_t kind = 0;
    bool operator==(const Record &o) const {
      return clock == o.clock && gen == o.gen && pc == o.pc &&
             issue == o.issue && who == o.who && thread == o.thread &&
             kind == o.kind;
    }
  };
  /// A vector clock's entries that are above the block snapshot S (a
  /// thread's knowledge, or what was released into a barrier).
  class SparseClock {
  public:
    void init(size_t width);
    bool has(uint32_t i) const { return stamp[i] == current; }
    uint32_t at(uint32_t i) const { return value[i]; }
    void raise(uint32_t i, uint32_t v);
    void clear();
    const std::vector<uint32_t> &entries() const { return touched; }

  private:
    std::vector<uint32_t> value, stamp, touched;
    uint32_t current = 1;
  };
  /// What a synchronisation object holds: released clocks (and, with
  /// fence tracking, released fenced clocks; with sync tracking, what the
  /// releasing threads knew of global sync locations).
  struct Released {
    SparseClock clocks;
    std::vector<uint32_t> fenced;
    SyncKnowledge acquired, pending;
  };
  /// Who performs an access and what it records.
  struct Actor {
    /// The thread whose vector clock orders the access, or -1 to use
    /// `view` (a warp's joined clocks).
    int thread = -1;
    const uint32_t *view = nullptr;
    /// The fenced clocks of the reader (async reads); nullptr: none.
    const uint32_t *fenced = nullptr;
    uint16_t who = 0;
    uint32_t clock = 0;
    uint16_t reportThread = 0;
    uint32_t pc = 0;
    uint8_t kind = 0;
  };
  struct MbarrierState {
    uint64_t offset = 0;
    Released released;
    /// Agent clocks of TMA/bulk loads issued and not landed, in order.
    std::vector<uint32_t> inFlight;
    uint16_t agent = 0;
  };
  /// A cp.async.mbarrier.arrive whose copies have not landed yet.
  struct CopyArrive {
    uint64_t mbarrier = 0;
    uint64_t serial = 0;
    /// The arriving thread's knowledge when it issued the arrive.
    std::vector<std::pair<uint32_t, uint32_t>> clocks;
    std::vector<uint32_t> fenced;
    /// The highest agent clock its copies landed with (0: none).
    uint32_t agentClock = 0;
  };
  struct PendingGroup {
    uint32_t group = 0; ///< UINT32_MAX until committed
    uint32_t clock = 0;
  };
  /// A cp.async's writes before it completes: ordered before nothing.
  static constexpr uint32_t kInFlightClock = UINT32_MAX;
  /// What a shadow record remembers.
  enum Kind : uint8_t {
    KindRead,       ///< generic load (ld, ldmatrix)
    KindAsyncRead,  ///< wgmma operand, bulk/TMA store source
    KindWrite,      ///< generic store (st, stmatrix)
    KindAtomic,     ///< atom/red on shared memory
    KindCopy,       ///< cp.async (generic proxy, asynchronous)
    KindAsyncWrite, ///< TMA / bulk load (async proxy)
  };
  static bool isGenericWrite(uint8_t kind) {
    return kind == KindWrite || kind == KindAtomic || kind == KindCopy;
  }

  uint32_t known(unsigned u, uint32_t x) const {
    if (x == u)
      return clocks[u];
    return view[u].has(x) ? view[u].at(x) : snapshot[x];
  }
  uint32_t knownBy(const Actor &a, uint32_t x) const {
    return a.thread >= 0 ? known(static_cast<unsigned>(a.thread), x)
                         : a.view[x];
  }
  bool valid(const Record &r) const { return r.gen >= blockEpoch; }
  /// A thread's access before the last full-block barrier is ordered
  /// before everything after it (an agent's may still be in flight).
  bool beforeBarrier(const Record &r) const {
    return r.who < threads && r.gen < epoch;
  }
  bool ordered(const Actor &a, const Record &r) const {
    if (r.clock == kInFlightClock)
      return false;
    if (beforeBarrier(r))
      return true;
    return knownBy(a, r.who) >= r.clock;
  }
  /// The checks and bookkeeping of one access of `bytes` bytes.
  bool access(const Actor &a, uint64_t offset, unsigned bytes);
  /// Where a run's shadow state lives: `n` consecutive bytes' records, or
  /// one uniform row's.
  struct Slots {
    Record *writes;
    Record *reads;
    uint32_t *lists;
  };
  /// The same for a run whose state is alike, at `at` (n slots); `b` is
  /// its first byte, for reports.
  bool accessRun(const Actor &a, uint64_t b, const Slots &at, unsigned n);
  bool raceWith(const Actor &a, uint64_t b, const Record &other,
                bool proxy = false);
  void addReads(const Actor &a, const Slots &at, unsigned n, const Record &r);
  void clearReads(const Slots &at, unsigned n);
  uint32_t newList(unsigned refs);
  /// A uniform row's bytes get byte 0's state (before part of it changes).
  void materialize(uint64_t row);
  /// After an access left the row's 16 bytes alike.
  void makeUniform(uint64_t row);
  void compact(const Actor &a, std::vector<Record> &list);
  Actor threadActor(unsigned t, uint32_t pc, uint8_t kind);

  /// Retires the committed groups but the newest `keepGroups`: the highest
  /// agent clock among them (0: none).
  static uint32_t retire(std::vector<PendingGroup> &groups, uint32_t committed,
                         uint32_t keepGroups);
  void publish(unsigned u, Released &into);
  void acquire(unsigned u, const Released &from);
  /// A release moves the thread's clock on before its next access (lazily,
  /// so that releases with no access between them, a warp reduction's
  /// shuffles, change nothing).
  void tick(unsigned u) { tickPending[u] = 1; }
  void settle(unsigned u) {
    if (tickPending[u]) {
      tickPending[u] = 0;
      ++clocks[u];
      bump(u);
    }
  }
  /// Thread `u`'s knowledge or clock changed.
  void bump(unsigned u) { ++warpVersion[u / 32]; }
  void bumpAll() {
    for (uint32_t &v : warpVersion)
      ++v;
    cachedWarp = UINT32_MAX;
  }
  void fullBarrier();
  MbarrierState &mbarrierState(uint64_t offset);

  std::string threadName(unsigned t) const;
  std::string describe(const Record &r) const;
  std::string lineOf(uint32_t pc) const;

  const Kernel &kernel;
  const LaunchSpec &spec;
  GlobalAccessTracker *global;
  unsigned threads = 0, numWarps = 0;
  /// Vector clock width: threads, then agents (a wgmma and a bulk-store
  /// agent per warp, then the mbarriers').
  unsigned width = 0;
  static constexpr unsigned kMbarrierAgents = 64;
  uint32_t wgmmaAgent(unsigned w) const { return threads + w; }
  uint32_t bulkAgent(unsigned w) const { return threads + numWarps + w; }
  uint32_t firstMbarrierAgent() const { return threads + 2 * numWarps; }
  bool fenceTracking = false;

  Dim3 ctaid;
  uint64_t linearBlock = 0;
  uint32_t issue = 0;
  uint32_t epoch = 1, blockEpoch = 1;
  /// Own clocks (threads and agents).
  std::vector<uint32_t> clocks;
  std::vector<uint8_t> tickPending;
  /// Per warp: changes to its lanes' knowledge and clocks; the lanes and
  /// version of its last warp exchange (one with nothing new to join is
  /// skipped); the warp whose joined view warpView holds, at which version.
  std::vector<uint32_t> warpVersion, syncedVersion, syncedLanes;
  uint32_t cachedWarp = UINT32_MAX, cachedWarpVersion = 0;
  /// The block snapshot: what every thread knows since the last full-block
  /// barrier.
  std::vector<uint32_t> snapshot;
  /// Each thread's knowledge above the snapshot.
  std::vector<SparseClock> view;
  /// Each thread's fenced clocks (dense; only with fenceTracking): how far
  /// it knows each clock with a fence.proxy.async on the way.
  std::vector<std::vector<uint32_t>> fenced;

  // Global memory between blocks (RaceCheckGlobal.h).
  /// Per pc: a gpu- or sys-scope fence; an .acquire/.acq_rel or
  /// .release/.acq_rel access.
  enum : uint8_t { kPcGpuFence = 1, kPcAcquire = 2, kPcRelease = 4 };
  std::vector<uint8_t> pcFlags;
  /// The kernel has atomics, ld.acquire or st.release on memory that may
  /// be global: fences, releases and acquires are tracked.
  bool syncTracking = false;
  /// A gpu-scope fence of the block: its thread, its clock, and what that
  /// thread knew of the block's threads (snapshot `snapshot` of
  /// fenceSnapshots, the entries `above` it).
  struct FenceRecord {
    uint16_t thread = 0;
    uint32_t clock = 0;
    uint32_t snapshot = 0;
    std::vector<std::pair<uint32_t, uint32_t>> above;
  };
  std::vector<FenceRecord> fences;
  std::vector<std::vector<uint32_t>> fenceSnapshots;
  uint32_t fenceSnapshotEpoch = 0;
  /// An atomic (or st.release) of the block on a global location: the
  /// clock of each thread up to which it releases that thread's writes.
  struct ReleaseRecord {
    uint32_t location = 0, sequence = 0;
    std::vector<uint32_t> frontier;
  };
  std::vector<ReleaseRecord> releases;
  /// Per thread: what it knows of global sync locations (acquired: after a
  /// fence; pending: an atomic's, until a fence), and the index of
  /// `acquired` in blockKnowledge (UINT32_MAX: not looked up yet).
  std::vector<SyncKnowledge> acquired, pendingAcquired;
  std::vector<uint32_t> knowledgeIndex;
  std::vector<SyncKnowledge> blockKnowledge;
  bool anyKnowledge = false;
  /// Whether reads between blocks are checked: every block of the launch
  /// runs (LaunchSpec::sampleBlocks runs a sample, in which a handshake
  /// between blocks cannot complete).
  bool checkReads = true;
  /// The block's global reads, one per granule and knowledge: an
  /// open-addressing table (a slot with no mask is free; `readUsed` lists
  /// the others in the order they were made).
  std::vector<GlobalAccessTracker::Read> readTable;
  std::vector<uint32_t> readUsed;
  /// The slot of the last read (checked before hashing).
  size_t lastRead = 0;
  std::vector<GlobalAccessTracker::Read> globalReads;
  void growReadTable();
  /// The first slot to probe for (granule, knowledge) in a table of
  /// `slots` (a power of two) slots.
  static size_t readSlot(uint64_t granule, uint32_t knowledge, size_t slots) {
    return static_cast<size_t>(
        ((granule ^ (static_cast<uint64_t>(knowledge) << 40)) *
         0x9e3779b97f4a7c15ull) >>
        (64 - __builtin_ctzll(slots)));
  }

  void syncLocked(unsigned t, uint32_t pc, GlobalAccessTracker::Location &at,
                  bool reads, bool writes);
  /// What an atomic of thread `a` releases, per thread (`qualified`: it is
  /// .release itself).
  void releaseFrontier(unsigned a, bool qualified,
                       std::vector<uint32_t> &frontier);
  void learnKnowledge(unsigned t, const SyncKnowledge &k, bool pending);
  void joinAllKnowledge();

  /// Barriers 0-15: what their bar.arrive'd threads released.
  std::vector<Released> barriers;
  std::vector<bool> barrierArrived;
  Released scratch;
  std::vector<MbarrierState> mbarriers;
  unsigned nextMbarrierAgent = 0;
  /// Per thread, the cp.async.mbarrier.arrive instructions not landed yet.
  std::vector<std::vector<CopyArrive>> copyArrives;
  /// Per warp: wgmma groups; per thread: bulk-store groups.
  std::vector<std::vector<PendingGroup>> wgmmaGroups, bulkGroups;
  std::vector<uint32_t> wgmmaCommitted, bulkCommitted;

  /// The wgmma or bulk store being issued: its actor and clocks.
  Actor asyncActor;
  std::vector<uint32_t> warpView, warpFenced;
  /// Per 16-byte row of shared memory: the wgmma (wgmmaSerial) that last
  /// checked it.
  std::vector<uint32_t> rowChecked;
  uint32_t wgmmaSerial = 0;
  /// The TMA/bulk load being issued.
  Actor loadActor;

  // Shadow shared memory, per byte.
  std::vector<Record> writes, reads;
  /// 0, or 1 + the index in `lists` of the byte's concurrent reads (then
  /// `reads` holds an empty record).
  std::vector<uint32_t> readList;
  /// Concurrent reads, shared by the bytes accessed alike (`refs` bytes
  /// point to a list); compacted when `records` reaches `compactAt`.
  struct ReadList {
    std::vector<Record> records;
    uint32_t refs = 0;
    uint32_t compactAt = 8;
  };
  std::vector<ReadList> lists;
  std::vector<uint32_t> freeLists;
  /// compact()'s scratch: per clock owner, the compaction that saw it last
  /// and where it kept its read.
  std::vector<uint32_t> seenStamp, seenSlot;
  uint32_t compactStamp = 0;
  bool anyList = false;
  /// Per 16-byte row: 1 when its bytes' state is alike and kept in the
  /// row arrays (the bytes' records are stale then).
  std::vector<uint8_t> uniform;
  std::vector<Record> rowWrites, rowReads;
  std::vector<uint32_t> rowLists;

  std::vector<GlobalAccessTracker::Write> globalWrites;
  std::string report;
};

} // namespace kiln::runtime::emu::detail

#endif // KILN_RUNTIME_LIB_EMU_RACECHECK_H

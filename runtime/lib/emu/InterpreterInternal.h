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

#include "../Support.h"

#include <array>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::runtime::emu::detail {

constexpr uint32_t kFullMask = 0xffffffffu;
/// Warp instructions a warp issues before the next warp of its block runs.
constexpr uint64_t kTimeSlice = 1 << 16;

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

/// What a barrier instruction does to the lanes that issue it.
enum class BarrierStep { Fault, Advance, Wait };

/// Runs the blocks of one launch, one after another, on one host thread.
/// Its member functions live in the file of their instruction family
/// (Exec*.cpp); the scheduling core is PtxInterpreter.cpp.
class BlockRunner {
public:
  BlockRunner(const Kernel &kernel, const LaunchSpec &spec);

  /// Runs block `ctaid`; false on a fault (see errorMessage()).
  bool runBlock(Dim3 ctaid);
  std::string errorMessage() const;

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
  };
  std::vector<std::vector<PendingCopy>> pendingCopies;
  /// Per warp and lane: groups committed so far.
  std::vector<std::array<uint32_t, 32>> committedGroups;

  bool checkShared = false;
  std::vector<uint8_t> sharedWritten;

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

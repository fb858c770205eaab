//===- PtxInterpreter.h - Runs decoded PTX kernels on the CPU ---*- C++ -*-===//
//
// A launch runs each block on its own: the block's threads form warps of 32
// lanes that execute one decoded instruction for all their active lanes at
// a time. Divergent lanes keep their own program counters and the warp always
// runs the lanes at the lowest one, so lanes meet again where their paths
// join (after an if, at a loop exit). A warp runs until every live lane waits
// at bar.sync or has exited; when all warps of the block are there, the
// barrier opens. shfl.sync exchanges registers between the lanes at the same
// instruction and requires every lane of its member mask to be there.
//
// Global memory is a set of regions (the device's allocations) addressed by
// device pointers; shared memory is per block and addressed from 0 in the
// shared space (and at kSharedWindow in the generic space). Out-of-bounds
// and misaligned accesses and barriers that only part of a block reaches
// fail the launch with a message naming kernel, block, thread and PTX line.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_PTXINTERPRETER_H
#define KILN_RUNTIME_LIB_EMU_PTXINTERPRETER_H

#include "PtxParser.h"

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Error.h"

#include <cstdint>
#include <vector>

namespace kiln::runtime::emu {

/// Where shared memory appears in the generic address space (cvta.shared).
constexpr uint64_t kSharedWindow = 1ull << 48;
/// Where each thread's local memory appears in the generic address space
/// (cvta.local).
constexpr uint64_t kLocalWindow = 1ull << 49;
/// Where the kernel's parameters appear in the generic address space
/// (cvta.param; `__grid_constant__` parameters whose address is taken).
/// Generic accesses there are loads from the parameter buffer.
constexpr uint64_t kParamWindow = 3ull << 48;

/// One device allocation: device addresses [base, base + size) are the host
/// bytes at `host`.
struct MemoryRegion {
  uint64_t base = 0;
  uint64_t size = 0;
  uint8_t *host = nullptr;
};

struct LaunchSpec {
  Dim3 grid;
  Dim3 block;
  /// Blocks per cluster (sm_90); the grid must be a whole number of
  /// clusters. `explicitCluster` is what %is_explicit_cluster reads (a
  /// launch that named a cluster shape, even 1 x 1 x 1).
  Dim3 cluster;
  bool explicitCluster = false;
  uint32_t dynamicSharedBytes = 0;
  /// The packed parameters (PackedParams layout).
  const uint8_t *params = nullptr;
  size_t paramBytes = 0;
  /// Global memory, sorted by base, not overlapping.
  const std::vector<MemoryRegion> *memory = nullptr;
  /// Worker threads for independent blocks (1 runs on the caller's thread).
  unsigned workers = 1;
  /// When non-zero, blocks run in a random order drawn from this seed
  /// (else in linear order).
  uint64_t blockOrderSeed = 0;
  /// Report loads of shared memory that no thread of the block wrote in
  /// this launch.
  bool checkSharedReads = false;
  /// The race check (RaceCheck.h): shared-memory races between a block's
  /// threads, async-proxy hazards, global writes of two blocks to the same
  /// bytes, mbarrier misuse. Slower (docs/emulator.md).
  bool checkRaces = false;
  /// Fail a block still running after this many warp instructions (0: no
  /// limit), so that an endless loop ends the run instead of hanging it.
  uint64_t maxWarpInstructionsPerBlock = 0;
  /// When non-zero, run only this many blocks of the grid, drawn at random
  /// with `sampleSeed` (for a performance estimate: the memory effects are
  /// then incomplete). LaunchStats::blocksRun says how many ran.
  uint64_t sampleBlocks = 0;
  uint64_t sampleSeed = 1;
  /// Count the performance counters of LaunchStats beyond the two
  /// instruction totals (costs emulation speed, so it is off by default).
  bool countPerformance = false;
};

/// What a launch did, as counted by the emulator: the inputs of the
/// performance model (runtime/lib/Profile.cpp turns them into an estimated
/// time for a target). Counts cover the blocks that ran; with
/// LaunchSpec::sampleBlocks they are the sample's, and `blocksRun` says how
/// many of `blocksTotal` that was, so the caller can scale.
struct LaunchStats {
  /// Instructions issued, counted once per lane that issued them.
  uint64_t threadInstructions = 0;
  /// Instructions issued, counted once per warp.
  uint64_t warpInstructions = 0;

  /// Thread-instructions by class (they add up to threadInstructions).
  uint64_t fmaInstructions = 0;    ///< fma/mad on floats (scalar or x2).
  uint64_t mmaInstructions = 0;    ///< mma.sync / wgmma, per lane.
  uint64_t loadStoreInstructions = 0; ///< ld/st/atom/red/cp.async/ldmatrix.
  uint64_t shuffleInstructions = 0;   ///< shfl, vote, redux, match.
  uint64_t otherInstructions = 0;

  /// Floating-point operations: 2 per FMA lane (4 for x2), and each MMA's
  /// 2*M*N*K counted once per warp-level (or warpgroup-level) instruction.
  uint64_t fmaFlops = 0;
  uint64_t mmaFlops = 0;

  /// Global memory, per warp-level access: bytes the active lanes asked
  /// for, and the distinct 32-byte sectors those bytes touch.
  uint64_t globalAccesses = 0; ///< warp-level global ld/st instructions
  uint64_t globalBytesRequested = 0;
  uint64_t globalSectors = 0;
  /// Distinct 32-byte sectors of global memory the launch read and wrote
  /// (each counted once per launch, as an L2 at least as large as the
  /// data would): the DRAM-traffic estimate.
  uint64_t dramReadSectors = 0;
  uint64_t dramWriteSectors = 0;

  /// Shared memory, per warp-level access: accesses, and the extra passes
  /// bank conflicts cost (0 for a conflict-free access).
  uint64_t sharedAccesses = 0;
  uint64_t sharedBankConflictReplays = 0;
  /// Bytes the asynchronous units move through shared memory: what wgmma
  /// reads from its descriptors and what TMA and bulk copies write (loads)
  /// or read (stores). Not in sharedAccesses.
  uint64_t asyncSharedBytes = 0;

  /// Blocks of the grid, and how many of them ran (all, unless sampled).
  uint64_t blocksTotal = 0;
  uint64_t blocksRun = 0;
};

/// Runs `kernel` over the grid. `stats`, when given, accumulates counts.
Error runKernel(const Kernel &kernel, const LaunchSpec &spec,
                LaunchStats *stats = nullptr);

} // namespace kiln::runtime::emu

#endif // KILN_RUNTIME_LIB_EMU_PTXINTERPRETER_H

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
  /// Fail a block still running after this many warp instructions (0: no
  /// limit), so that an endless loop ends the run instead of hanging it.
  uint64_t maxWarpInstructionsPerBlock = 0;
};

struct LaunchStats {
  /// Instructions issued, counted once per lane that issued them.
  uint64_t threadInstructions = 0;
  /// Instructions issued, counted once per warp.
  uint64_t warpInstructions = 0;
};

/// Runs `kernel` over the grid. `stats`, when given, accumulates counts.
Error runKernel(const Kernel &kernel, const LaunchSpec &spec,
                LaunchStats *stats = nullptr);

} // namespace kiln::runtime::emu

#endif // KILN_RUNTIME_LIB_EMU_PTXINTERPRETER_H

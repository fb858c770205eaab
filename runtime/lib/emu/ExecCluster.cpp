//===- ExecCluster.cpp - sm_90 thread-block clusters ----------------------===//
//
// The blocks of a cluster run interleaved on one host thread
// (runCluster in PtxInterpreter.cpp), so each can reach the others'
// shared memory (distributed shared memory). A shared::cluster address
// names a block of the cluster by rank: below 1 << kClusterRankShift it is
// the executing block's own shared memory (a shared::cta address is a
// valid shared::cluster address of the executing block, PTX ISA "State
// spaces"), above it (rank + 1) << kClusterRankShift | offset, which is
// what `mapa` returns for another block (hardware's numbers differ; only
// the bytes reached are the ISA's). `barrier.cluster.arrive` / `.wait`
// is the cluster-wide barrier: a wait completes once every thread of the
// cluster that has not exited has arrived.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

namespace kiln::runtime::emu::detail {

bool BlockRunner::mapAddress(unsigned w, uint32_t pc, const Instruction &in,
                             uint32_t exec) {
  uint64_t *r = warpRegs(w);
  const uint64_t *a = r + static_cast<size_t>(in.src[0]) * 32;
  const uint64_t *rank = r + static_cast<size_t>(in.src[1]) * 32;
  uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
  uint32_t blocks = spec.cluster.x * spec.cluster.y * spec.cluster.z;
  for (uint32_t m = exec; m; m &= m - 1) {
    unsigned l = __builtin_ctz(m);
    uint64_t address = a[l];
    uint32_t target = static_cast<uint32_t>(rank[l]);
    if (target >= blocks)
      return fault(
          w, l, pc,
          fmt::format("mapa to block {} of a cluster of {}", target, blocks));
    uint64_t offset = address;
    if (in.space == Space::Generic) {
      if (address < kSharedWindow || address >= kSharedWindow + (1ull << 32) ||
          ((address - kSharedWindow) & kClusterOffsetMask) >= sharedBytes)
        return fault(w, l, pc,
                     fmt::format("mapa of generic address {:#x}, which is not "
                                 "in this block's shared memory",
                                 address));
      offset = address - kSharedWindow;
    }
    // The address may itself name a block of the cluster.
    offset &= kClusterOffsetMask;
    if (offset >= sharedBytes)
      return fault(w, l, pc,
                   fmt::format("mapa of shared offset {:#x}, outside the "
                               "block's {} bytes",
                               offset, sharedBytes));
    uint64_t mapped =
        target == rankInCluster
            ? offset
            : (uint64_t(target) + 1) << kClusterRankShift | offset;
    if (in.space == Space::Generic)
      mapped += kSharedWindow;
    d[l] = in.type == Type::U32 ? mapped & 0xffffffffu : mapped;
  }
  return true;
}

BlockRunner *BlockRunner::clusterTarget(unsigned w, unsigned lane, uint32_t pc,
                                        uint64_t address, unsigned bytes,
                                        const char *what, uint64_t &offset) {
  uint64_t rank = address >> kClusterRankShift;
  offset = address & kClusterOffsetMask;
  BlockRunner *target = rank == 0 ? this : clusterBlock(rank - 1);
  if (!target || rank > 16) {
    fault(w, lane, pc,
          fmt::format("shared {} at 0x{:x}: no block of rank {} in the "
                      "cluster (of {})",
                      what, address, rank - 1,
                      cluster ? cluster->blocks.size() : 1));
    return nullptr;
  }
  if (target->exited) {
    fault(w, lane, pc,
          fmt::format("shared {} at 0x{:x}: block {} of the cluster has "
                      "exited, and its shared memory with it",
                      what, address, rank - 1));
    return nullptr;
  }
  if (offset > target->sharedBytes || bytes > target->sharedBytes - offset) {
    fault(w, lane, pc,
          fmt::format("out-of-bounds shared {} of {} bytes at offset {} of "
                      "block {} of the cluster (which has {} bytes)",
                      what, bytes, offset, target->rankInCluster,
                      target->sharedBytes));
    return nullptr;
  }
  return target;
}

BarrierStep BlockRunner::clusterBarrier(unsigned w, uint32_t pc,
                                        const Instruction &in, uint32_t mask,
                                        uint32_t exec) {
  const uint64_t phase = cluster ? cluster->barrierPhase : 0;
  if (in.subop == 0) { // arrive
    for (uint32_t m = exec; m; m &= m - 1) {
      unsigned l = __builtin_ctz(m);
      uint64_t &arrived = clusterArrivedPhase[w * 32 + l];
      if (arrived > phase) {
        fault(w, l, pc,
              "barrier.cluster.arrive twice in one phase of the cluster "
              "barrier (without barrier.cluster.wait between)");
        return BarrierStep::Fault;
      }
      arrived = phase + 1;
      ++clusterArrivals;
    }
    return BarrierStep::Advance;
  }
  // wait: the lanes whose arrival's phase has not completed wait here.
  uint32_t notReady = 0;
  for (uint32_t m = exec; m; m &= m - 1) {
    unsigned l = __builtin_ctz(m);
    uint64_t &arrived = clusterArrivedPhase[w * 32 + l];
    if (arrived == 0) {
      fault(w, l, pc,
            "barrier.cluster.wait without a barrier.cluster.arrive before it");
      return BarrierStep::Fault;
    }
    if (arrived <= phase)
      arrived = 0; // its phase completed
    else
      notReady |= 1u << l;
  }
  if (!notReady)
    return BarrierStep::Advance;
  WarpState &ws = warps[w];
  if (ws.waiting && ws.barrier != kClusterWait) {
    fault(w, __builtin_ctz(notReady), pc,
          fmt::format("barrier.cluster.wait while other lanes of the warp "
                      "wait at barrier {}",
                      ws.barrier));
    return BarrierStep::Fault;
  }
  diverge(ws);
  forLanes(mask & ~notReady, [&](unsigned l) { ws.lanePc[l] = pc + 1; });
  ws.waiting |= notReady;
  ws.barrier = kClusterWait;
  ws.waitEvents = phase;
  clusterWaiters += __builtin_popcount(notReady);
  return BarrierStep::Wait;
}

void BlockRunner::countClusterArrivals(uint64_t &arrived,
                                       uint64_t &live) const {
  const uint64_t phase = cluster ? cluster->barrierPhase : 0;
  for (unsigned w = 0; w < numWarps; ++w)
    for (uint32_t m = warps[w].live; m; m &= m - 1) {
      ++live;
      arrived += clusterArrivedPhase[w * 32 + __builtin_ctz(m)] == phase + 1;
    }
}

void BlockRunner::wakeClusterWaiters() {
  const uint64_t phase = cluster ? cluster->barrierPhase : 0;
  for (unsigned w = 0; w < numWarps; ++w) {
    WarpState &ws = warps[w];
    if (ws.waiting && ws.barrier == kClusterWait && ws.waitEvents != phase) {
      clusterWaiters -= __builtin_popcount(ws.waiting);
      ws.waiting = 0;
    }
  }
}

bool BlockRunner::clusterBarrierDeadlock(unsigned w) {
  const WarpState &ws = warps[w];
  unsigned lane = __builtin_ctz(ws.waiting);
  uint64_t arrived = 0, live = 0;
  if (cluster)
    for (BlockRunner *b : cluster->blocks)
      b->countClusterArrivals(arrived, live);
  return fault(w, lane, ws.converged ? ws.pc : ws.lanePc[lane],
               fmt::format("deadlock: barrier.cluster.wait, but {} of the "
                           "cluster's {} live threads have arrived and the "
                           "others wait elsewhere",
                           arrived, live));
}

} // namespace kiln::runtime::emu::detail

//===- PtxInterpreter.cpp - Runs decoded PTX kernels on the CPU -----------===//
//
// The interpreter's core: a block's warps, their divergence and
// reconvergence, the time slice that lets warps that spin on each other
// make progress, opening barriers (and naming deadlocks), the blocks of a
// cluster interleaved on one host thread (runCluster; a lone block is a
// cluster of one), and the launch that hands clusters to host threads.
// Each instruction family executes in its own file (Exec*.cpp); runWarp
// dispatches to them.
//
// This file is compiled with -frounding-math like the other interpreter
// files: see Numerics.h.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

namespace kiln::runtime::emu {
namespace detail {

BlockRunner::BlockRunner(const Kernel &kernel, const LaunchSpec &spec,
                         GlobalAccessTracker *globalWrites)
    : kernel(kernel), spec(spec), code(kernel.code.data()),
      numSlots(kernel.numSlots) {
  threadsPerBlock = spec.block.x * spec.block.y * spec.block.z;
  numWarps = (threadsPerBlock + 31) / 32;
  regs.assign(static_cast<size_t>(numWarps) * numSlots * 32, 0);
  warps.resize(numWarps);
  sharedBytes = kernel.dynamicSharedOffset + spec.dynamicSharedBytes;
  if (spec.dynamicSharedBytes == 0)
    sharedBytes = std::max<uint64_t>(kernel.staticSharedBytes, 0);
  shared.assign(sharedBytes, 0);
  local.assign(kernel.localBytes * threadsPerBlock, 0);
  regions = spec.memory->data();
  numRegions = spec.memory->size();
  pendingCopies.resize(numWarps);
  committedGroups.resize(numWarps);
  wgmmaPending.resize(numWarps);
  wgmmaCommitted.assign(numWarps, 0);
  wgmmaBusy.resize(numWarps);
  checkShared = spec.checkSharedReads;
  countPerformance = spec.countPerformance;
  if (countPerformance) {
    recentRead.assign(4096, UINT64_MAX);
    recentWritten.assign(4096, UINT64_MAX);
  }
  if (checkShared)
    sharedWritten.assign(sharedBytes, 0);
  if (spec.checkRaces)
    raceCheck = std::make_unique<RaceCheck>(kernel, spec, sharedBytes, numWarps,
                                            globalWrites);
  // Constants and per-thread specials are the same in every block.
  for (unsigned w = 0; w < numWarps; ++w) {
    uint64_t *r = warpRegs(w);
    for (const Constant &c : kernel.constants)
      std::fill_n(r + static_cast<size_t>(c.slot) * 32, 32, c.value);
    for (const SpecialSlot &s : kernel.specials) {
      uint64_t *cell = r + static_cast<size_t>(s.slot) * 32;
      for (unsigned l = 0; l < 32; ++l) {
        uint32_t t = w * 32 + l;
        uint64_t v = 0;
        switch (s.which) {
        case Special::TidX:
          v = t % spec.block.x;
          break;
        case Special::TidY:
          v = (t / spec.block.x) % spec.block.y;
          break;
        case Special::TidZ:
          v = t / (spec.block.x * spec.block.y);
          break;
        case Special::NtidX:
          v = spec.block.x;
          break;
        case Special::NtidY:
          v = spec.block.y;
          break;
        case Special::NtidZ:
          v = spec.block.z;
          break;
        case Special::NctaidX:
          v = spec.grid.x;
          break;
        case Special::NctaidY:
          v = spec.grid.y;
          break;
        case Special::NctaidZ:
          v = spec.grid.z;
          break;
        case Special::LaneId:
          v = l;
          break;
        case Special::WarpId:
          v = w;
          break;
        case Special::NWarpId:
          v = numWarps;
          break;
        case Special::LanemaskEq:
          v = 1u << l;
          break;
        case Special::LanemaskLt:
          v = (1u << l) - 1;
          break;
        case Special::LanemaskLe:
          v = l == 31 ? kFullMask : (2u << l) - 1;
          break;
        case Special::LanemaskGt:
          v = l == 31 ? 0 : ~((2u << l) - 1);
          break;
        case Special::LanemaskGe:
          v = ~((1u << l) - 1);
          break;
        case Special::Smid:
        case Special::GridId:
          v = 0;
          break;
        case Special::Nsmid:
          v = 1;
          break;
        case Special::DynamicSmemSize:
          v = spec.dynamicSharedBytes;
          break;
        case Special::TotalSmemSize:
          v = sharedBytes;
          break;
        case Special::ClusterNctaidX:
          v = spec.cluster.x;
          break;
        case Special::ClusterNctaidY:
          v = spec.cluster.y;
          break;
        case Special::ClusterNctaidZ:
          v = spec.cluster.z;
          break;
        case Special::ClusterNctarank:
          v = spec.cluster.x * spec.cluster.y * spec.cluster.z;
          break;
        case Special::NclusteridX:
          v = spec.grid.x / spec.cluster.x;
          break;
        case Special::NclusteridY:
          v = spec.grid.y / spec.cluster.y;
          break;
        case Special::NclusteridZ:
          v = spec.grid.z / spec.cluster.z;
          break;
        case Special::IsExplicitCluster:
          v = spec.explicitCluster;
          break;
        default: // ctaid and the block's place in its cluster: per block
          break;
        }
        cell[l] = v;
      }
    }
  }
}

BlockRunner::~BlockRunner() = default;

std::string BlockRunner::errorMessage() const {
  uint32_t t = faultState.warp * 32 + faultState.lane;
  uint32_t tx = t % spec.block.x, ty = (t / spec.block.x) % spec.block.y,
           tz = t / (spec.block.x * spec.block.y);
  const Instruction &in = code[faultState.pc];
  return fmt::format("kernel '{}', block ({},{},{}), thread ({},{},{}), PTX "
                     "line {} ({}): {}",
                     kernel.name, ctaid.x, ctaid.y, ctaid.z, tx, ty, tz,
                     in.line, kernel.opcodeText[faultState.pc],
                     faultState.what);
}

void BlockRunner::beginBlock(Dim3 id, ClusterRun *run, uint32_t rank) {
  cluster = run;
  rankInCluster = rank;
  ctaid = id;
  for (unsigned w = 0; w < numWarps; ++w) {
    uint64_t *r = warpRegs(w);
    for (const SpecialSlot &s : kernel.specials) {
      uint64_t v;
      switch (s.which) {
      case Special::CtaidX:
        v = id.x;
        break;
      case Special::CtaidY:
        v = id.y;
        break;
      case Special::CtaidZ:
        v = id.z;
        break;
      case Special::ClusterCtaidX:
        v = id.x % spec.cluster.x;
        break;
      case Special::ClusterCtaidY:
        v = id.y % spec.cluster.y;
        break;
      case Special::ClusterCtaidZ:
        v = id.z % spec.cluster.z;
        break;
      case Special::ClusterCtarank:
        v = clusterRank(id);
        break;
      case Special::ClusteridX:
        v = id.x / spec.cluster.x;
        break;
      case Special::ClusteridY:
        v = id.y / spec.cluster.y;
        break;
      case Special::ClusteridZ:
        v = id.z / spec.cluster.z;
        break;
      default:
        continue;
      }
      std::fill_n(r + static_cast<size_t>(s.slot) * 32, 32, v);
    }
    WarpState &ws = warps[w];
    uint32_t lanes = std::min<uint32_t>(32, threadsPerBlock - w * 32);
    ws.live = lanes == 32 ? kFullMask : ((1u << lanes) - 1);
    ws.waiting = 0;
    ws.converged = true;
    ws.pc = 0;
    ws.spinning = false;
  }
  if (raceCheck)
    raceCheck->beginBlock(
        id, id.x + static_cast<uint64_t>(spec.grid.x) *
                       (id.y + static_cast<uint64_t>(spec.grid.y) * id.z));
  if (!shared.empty())
    std::memset(shared.data(), 0, shared.size());
  if (checkShared && !sharedWritten.empty())
    std::memset(sharedWritten.data(), 0, sharedWritten.size());
  for (unsigned w = 0; w < numWarps; ++w) {
    pendingCopies[w].clear();
    committedGroups[w].fill(0);
    warps[w].carry = 0;
    warps[w].wgmmaInFlight = 0;
    wgmmaPending[w].clear();
    wgmmaCommitted[w] = 0;
    std::fill(wgmmaBusy[w].begin(), wgmmaBusy[w].end(), 0);
  }
  mbarriers.clear();
  mbarrierEvents = 0;
  mbarrierWaiters = 0;
  deferredArrives.clear();
  pendingBulk.clear();
  for (unsigned b = 0; b < kBarriers; ++b) {
    barrierArrived[b] = barrierExpected[b] = barrierPopc[b] = 0;
    barrierAll[b] = true;
    barrierAny[b] = false;
  }
  clusterArrivedPhase.assign(threadsPerBlock, 0);
  clusterArrivals = 0;
  clusterWaiters = 0;
  exited = false;
  blockStart = warpInstructions;
  spinRounds = 0;
}

BlockStep BlockRunner::step() {
  // Each warp runs until it waits, exits or uses up its time slice; a
  // warp that spins on a flag another warp sets gets to see it set.
  bool runnable = false;
  if (mbarrierWaiters)
    wakeMbarrierWaiters();
  if (clusterWaiters)
    wakeClusterWaiters();
  uint64_t eventsBefore = mbarrierEvents;
  bool allSpin = true;
  for (unsigned w = 0; w < numWarps; ++w)
    if (warps[w].live & ~warps[w].waiting) {
      warps[w].spinning = false;
      if (!runWarp(w))
        return BlockStep::Fault;
      bool stillRuns = (warps[w].live & ~warps[w].waiting) != 0;
      runnable |= stillRuns;
      allSpin &= !stillRuns || warps[w].spinning;
    }
  // The race check: two rounds in which every warp that can run only
  // failed a test_wait and no mbarrier changed: nothing ever will (the
  // spin would hang a GPU). In a cluster of several blocks another block
  // may still arrive on this one's mbarriers, so the check is for lone
  // blocks only.
  if (raceCheck && runnable && spec.cluster.x * spec.cluster.y *
                                       spec.cluster.z == 1) {
    spinRounds =
        allSpin && mbarrierEvents == eventsBefore ? spinRounds + 1 : 0;
    if (spinRounds == 2) {
      unsigned w = 0;
      while (!warps[w].spinning)
        ++w;
      mbarrierDeadlock(w, warps[w].spinLane, warps[w].spinPc);
      return BlockStep::Fault;
    }
  }
  if (runnable) {
    if (spec.maxWarpInstructionsPerBlock &&
        warpInstructions - blockStart > spec.maxWarpInstructionsPerBlock) {
      unsigned w = 0;
      while (!(warps[w].live & ~warps[w].waiting))
        ++w;
      const WarpState &ws = warps[w];
      unsigned lane = __builtin_ctz(ws.live & ~ws.waiting);
      fault(w, lane, ws.converged ? ws.pc : ws.lanePc[lane],
            fmt::format("the block is still running after {} warp "
                        "instructions (an endless loop, or a wait "
                        "for another block?); the limit is {} "
                        "(KILN_EMU_MAX_STEPS=N raises it, 0 for none)",
                        warpInstructions - blockStart,
                        spec.maxWarpInstructionsPerBlock));
      return BlockStep::Fault;
    }
    return BlockStep::Progress;
  }
  // Every warp has exited or waits at a barrier. A barrier opens when
  // the threads waiting at it plus those that arrived (bar.arrive) reach
  // its count, or the whole block when it has none.
  uint32_t waitingAt[kClusterWait + 1] = {};
  bool anyWaiting = false;
  for (unsigned w = 0; w < numWarps; ++w)
    if (warps[w].waiting) {
      waitingAt[warps[w].barrier] += __builtin_popcount(warps[w].waiting);
      anyWaiting = true;
    }
  if (!anyWaiting) {
    exited = true;
    if (!raceCheck)
      return BlockStep::Done;
    if (!checkMbarriersAtExit())
      return BlockStep::Fault;
    unsigned thread = 0;
    uint32_t pc = 0;
    if (!raceCheck->endBlock(thread, pc)) {
      raceFault(thread / 32, thread % 32, pc);
      return BlockStep::Fault;
    }
    return BlockStep::Done;
  }
  // Lanes in mbarrier.try_wait try again after a change (the last
  // warp to run may have arrived and exited).
  if (mbarrierWaiters && wakeMbarrierWaiters())
    return BlockStep::Progress;
  bool opened = false;
  for (uint32_t id = 0; id < kBarriers; ++id) {
    if (!waitingAt[id])
      continue;
    uint32_t need = barrierExpected[id] ? barrierExpected[id] : threadsPerBlock;
    if (waitingAt[id] + barrierArrived[id] >= need) {
      releaseBarrier(id);
      opened = true;
    }
  }
  return opened ? BlockStep::Progress : BlockStep::Stuck;
}

bool BlockRunner::stuckFault() {
  uint32_t waitingAt[kClusterWait + 1] = {};
  for (unsigned w = 0; w < numWarps; ++w)
    if (warps[w].waiting)
      waitingAt[warps[w].barrier] += __builtin_popcount(warps[w].waiting);
  if (waitingAt[kMbarrierWait])
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].waiting && warps[w].barrier == kMbarrierWait)
        return mbarrierDeadlock(w);
  if (waitingAt[kClusterWait])
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].waiting && warps[w].barrier == kClusterWait)
        return clusterBarrierDeadlock(w);
  // Deadlock: name the first waiting lane, and a thread that exited or
  // waits elsewhere.
  unsigned waitingWarp = 0;
  while (!warps[waitingWarp].waiting)
    ++waitingWarp;
  const WarpState &ws = warps[waitingWarp];
  uint32_t lane = __builtin_ctz(ws.waiting);
  uint32_t pc = ws.converged ? ws.pc : ws.lanePc[lane];
  uint32_t id = ws.barrier;
  auto threadName = [&](uint32_t t) {
    return fmt::format("({},{},{})", t % spec.block.x,
                       (t / spec.block.x) % spec.block.y,
                       t / (spec.block.x * spec.block.y));
  };
  for (unsigned w = 0; w < numWarps; ++w) {
    uint32_t lanes = std::min<uint32_t>(32, threadsPerBlock - w * 32);
    uint32_t all = lanes == 32 ? kFullMask : ((1u << lanes) - 1);
    if (warps[w].live != all && barrierExpected[id] == 0)
      return fault(
          waitingWarp, lane, pc,
          fmt::format(
              "barrier {} is reached by only part of the "
              "block: thread {} has exited",
              id, threadName(w * 32 + __builtin_ctz(all & ~warps[w].live))));
  }
  for (unsigned w = 0; w < numWarps; ++w)
    if (warps[w].waiting && warps[w].barrier != id)
      return fault(
          waitingWarp, lane, pc,
          fmt::format("barrier {} waits while thread {} waits at "
                      "barrier {}: neither can complete",
                      id, threadName(w * 32 + __builtin_ctz(warps[w].waiting)),
                      warps[w].barrier));
  uint32_t need = barrierExpected[id] ? barrierExpected[id] : threadsPerBlock;
  return fault(waitingWarp, lane, pc,
               fmt::format("barrier {} expects {} threads but only {} "
                           "arrived before the rest of the block exited",
                           id, need, waitingAt[id] + barrierArrived[id]));
}

BlockRunner *runCluster(ClusterRun &run) {
  const size_t n = run.blocks.size();
  std::vector<char> done(n, 0);
  auto events = [&]() {
    uint64_t sum = run.barrierPhase;
    for (BlockRunner *b : run.blocks)
      sum += b->eventCount();
    return sum;
  };
  // A lone block needs no skew. In a cluster, each round gives each block
  // 0-3 time slices (xorshift64 on run.schedule); a round where every
  // block drew 0 gives each one slice, so every round steps every block
  // that can move at least once in four rounds on average and none starves.
  auto slices = [&]() -> unsigned {
    if (n == 1)
      return 1;
    run.schedule ^= run.schedule << 13;
    run.schedule ^= run.schedule >> 7;
    run.schedule ^= run.schedule << 17;
    return static_cast<unsigned>(run.schedule >> 62);
  };
  std::vector<unsigned> turns(n, 1);
  while (true) {
    bool progress = false;
    size_t finished = 0;
    uint64_t before = events();
    bool any = false;
    for (size_t i = 0; i < n; ++i)
      any |= (turns[i] = slices()) != 0;
    if (!any)
      std::fill(turns.begin(), turns.end(), 1u);
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) {
        ++finished;
        continue;
      }
      for (unsigned k = 0; k < turns[i] && !done[i]; ++k) {
        switch (run.blocks[i]->step()) {
        case BlockStep::Fault:
          return run.blocks[i];
        case BlockStep::Progress:
          progress = true;
          break;
        case BlockStep::Done:
          done[i] = 1;
          ++finished;
          break;
        case BlockStep::Stuck:
          k = turns[i]; // nothing to do until another block moves
          break;
        }
      }
    }
    if (finished == n)
      return nullptr;
    // Nothing moved, but a block may have changed another's mbarriers or
    // arrived at the cluster barrier after that one's step.
    if (progress || events() != before)
      continue;
    // The cluster barrier completes when every live thread of the
    // cluster has arrived.
    uint64_t arrived = 0, live = 0;
    for (BlockRunner *b : run.blocks)
      b->countClusterArrivals(arrived, live);
    if (arrived && arrived == live) {
      ++run.barrierPhase;
      for (BlockRunner *b : run.blocks)
        b->wakeClusterWaiters();
      continue;
    }
    // The blocks that drew slices were stuck while another drew none: that
    // one may still move. Only a round that tried every block decides.
    bool skipped = false;
    for (size_t i = 0; i < n; ++i)
      skipped |= !done[i] && turns[i] == 0;
    if (skipped)
      continue;
    // Deadlock. A block waiting only at the cluster barrier waits for
    // the others, so name a block stuck on something else if there is one.
    BlockRunner *stuck = nullptr;
    for (size_t i = 0; i < n && !stuck; ++i)
      if (!done[i] && !run.blocks[i]->waitsOnlyAtClusterBarrier())
        stuck = run.blocks[i];
    for (size_t i = 0; i < n && !stuck; ++i)
      if (!done[i])
        stuck = run.blocks[i];
    stuck->stuckFault();
    return stuck;
  }
}

bool BlockRunner::runWarp(unsigned w) {
  WarpState &ws = warps[w];
  uint64_t *r = warpRegs(w);
  const uint32_t codeSize = static_cast<uint32_t>(kernel.code.size());
  uint64_t issuedLanes = 0, issued = 0;
  auto finish = [&](bool ok) {
    threadInstructions += issuedLanes;
    warpInstructions += issued;
    return ok;
  };
  while (true) {
    uint32_t ready = ws.live & ~ws.waiting;
    if (!ready || issued == kTimeSlice)
      return finish(true);
    uint32_t pc, mask;
    if (ws.converged) {
      pc = ws.pc;
      mask = ready;
    } else {
      // The lanes at the lowest pc run, unless they are at a .sync warp
      // exchange whose member mask names live lanes elsewhere: those run
      // first, as hardware makes the arrived lanes wait for them (after an
      // if-else whose join precedes one branch in the code, say).
      uint32_t candidates = ready;
      while (true) {
        pc = UINT32_MAX;
        for (uint32_t m = candidates; m; m &= m - 1)
          pc = std::min(pc, ws.lanePc[__builtin_ctz(m)]);
        mask = 0;
        for (uint32_t m = candidates; m; m &= m - 1) {
          unsigned l = __builtin_ctz(m);
          if (ws.lanePc[l] == pc)
            mask |= 1u << l;
        }
        uint32_t missing =
            pc < codeSize ? syncMembers(r, code[pc], mask) & ws.live & ~mask
                          : 0;
        if (!missing || !(candidates & ~mask))
          break; // Nothing else can run: the exchange reports the lanes.
        candidates &= ~mask;
      }
      if (mask == ready && ws.waiting == 0) {
        ws.converged = true;
        ws.pc = pc;
      }
    }
    if (pc >= codeSize)
      return finish(fault(w, __builtin_ctz(mask), codeSize - 1,
                          "ran past the end of the kernel"));
    const Instruction &in = code[pc];
    ++issued;
    issuedLanes += __builtin_popcount(mask);
    uint32_t exec = mask;
    if (in.guard != kNoSlot) {
      const uint64_t *g = r + static_cast<size_t>(in.guard) * 32;
      uint32_t on = 0;
      forLanes(mask, [&](unsigned l) { on |= (g[l] & 1) << l; });
      exec = in.negateGuard ? mask & ~on : on;
    }
    if (__builtin_expect(countPerformance, 0))
      countInstruction(in, mask, exec);
    if (__builtin_expect(raceCheck != nullptr, 0))
      raceCheck->setIssue(static_cast<uint32_t>(warpInstructions + issued));
    if (__builtin_expect(ws.wgmmaInFlight != 0, 0) && exec &&
        in.op != Op::Wgmma && !checkWgmmaRegisters(w, pc, in, exec))
      return finish(false);
    uint32_t next = pc + 1;
    switch (in.op) {
    case Op::Bra: {
      uint32_t stay = mask & ~exec;
      if (ws.converged && stay == 0) {
        ws.pc = in.target;
      } else if (ws.converged && exec == 0) {
        ws.pc = next;
      } else {
        diverge(ws);
        forLanes(exec, [&](unsigned l) { ws.lanePc[l] = in.target; });
        forLanes(stay, [&](unsigned l) { ws.lanePc[l] = next; });
      }
      continue;
    }
    case Op::Ret:
    case Op::Exit: {
      ws.live &= ~exec;
      uint32_t stay = mask & ~exec;
      if (stay) {
        if (ws.converged)
          ws.pc = next;
        else
          forLanes(stay, [&](unsigned l) { ws.lanePc[l] = next; });
      }
      continue;
    }
    case Op::Bar: {
      BarrierStep step = barrier(w, pc, in, mask, exec);
      if (step == BarrierStep::Fault)
        return finish(false);
      if (step == BarrierStep::Wait)
        continue;
      break;
    }
    case Op::Mbarrier: {
      BarrierStep step = mbarrier(w, pc, in, mask, exec);
      if (step == BarrierStep::Fault)
        return finish(false);
      if (step == BarrierStep::Wait)
        continue;
      if (step == BarrierStep::Yield) {
        ws.spinning = true;
        ws.spinLane = __builtin_ctz(mask);
        ws.spinPc = pc;
        if (ws.converged)
          ws.pc = next;
        else
          forLanes(mask, [&](unsigned l) { ws.lanePc[l] = next; });
        return finish(true);
      }
      break;
    }
    case Op::Wgmma:
      if (!wgmma(w, pc, in, exec))
        return finish(false);
      break;
    case Op::BulkCopy:
      if (!bulkCopy(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Elect:
      elect(w, in, exec);
      break;
    case Op::Mapa:
      if (!mapAddress(w, pc, in, exec))
        return finish(false);
      break;
    case Op::ClusterBarrier: {
      BarrierStep step = clusterBarrier(w, pc, in, mask, exec);
      if (step == BarrierStep::Fault)
        return finish(false);
      if (step == BarrierStep::Wait)
        continue;
      break;
    }
    case Op::Setmaxnreg:
      break;
    case Op::Atom:
    case Op::Red:
      if (!atomic(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Vote:
    case Op::Activemask:
    case Op::Redux:
    case Op::Match:
      if (!warpCollective(w, pc, in, mask, exec))
        return finish(false);
      break;
    case Op::Clock: {
      // %clock/%clock64 count the warp's issued instructions since the
      // launch began on this host thread; %globaltimer is the host's
      // nanoseconds.
      uint64_t v = warpInstructions + issued;
      ClockKind kind = ClockKind(in.subop);
      if (kind == ClockKind::GlobalTimer || kind == ClockKind::GlobalTimerLo ||
          kind == ClockKind::GlobalTimerHi) {
        v = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now().time_since_epoch())
                .count());
        if (kind == ClockKind::GlobalTimerHi)
          v >>= 32;
      }
      if (typeBytes(in.type) < 8 || kind == ClockKind::Clock ||
          kind == ClockKind::GlobalTimerLo)
        v &= 0xffffffffull;
      uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
      forLanes(exec, [&](unsigned l) { d[l] = v; });
      break;
    }
    case Op::Ldmatrix:
      if (!loadMatrix(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Stmatrix:
      if (!storeMatrix(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Mma:
      if (!matrixMultiply(w, pc, in, exec))
        return finish(false);
      break;
    case Op::CpAsync:
      if (!asyncCopy(w, pc, in, exec))
        return finish(false);
      break;
    case Op::CpAsyncCommit:
      forLanes(exec, [&](unsigned l) { ++committedGroups[w][l]; });
      break;
    case Op::CpAsyncWait: {
      uint32_t keep =
          in.numSrc
              ? static_cast<uint32_t>(r[static_cast<size_t>(in.src[0]) * 32 +
                                        (exec ? __builtin_ctz(exec) : 0)])
              : 0;
      completeCopies(w, exec, keep, in.numSrc == 0);
      break;
    }
    case Op::Shfl:
      if (!shuffle(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Ld:
    case Op::St:
      if (!memoryAccess(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Membar:
      if (FenceKind(in.subop) == FenceKind::Memory) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (raceCheck)
          forLanes(exec,
                   [&](unsigned l) { raceCheck->memoryFence(w * 32 + l, pc); });
      }
      if (raceCheck && FenceKind(in.subop) == FenceKind::ProxyAsync &&
          in.space != Space::Global)
        forLanes(exec, [&](unsigned l) { raceCheck->proxyFence(w * 32 + l); });
      break;
    case Op::Cvt:
      if (!convert(r, in, exec))
        return finish(
            fault(w, __builtin_ctz(mask), pc, "unsupported conversion"));
      break;
    default:
      if (in.carryIn || in.carryOut) {
        if (!carryArithmetic(ws, r, in, exec))
          return finish(fault(w, __builtin_ctz(mask), pc,
                              "unsupported carry-chain instruction"));
        break;
      }
      if (!arithmetic(r, in, exec))
        return finish(fault(w, __builtin_ctz(mask), pc,
                            fmt::format("type .{} is not emulated for this "
                                        "instruction",
                                        typeName(in.type))));
      break;
    }
    if (ws.converged)
      ws.pc = next;
    else
      forLanes(mask, [&](unsigned l) { ws.lanePc[l] = next; });
  }
}

} // namespace detail

Error runKernel(const Kernel &kernel, const LaunchSpec &launch,
                LaunchStats *stats) {
  // A kernel compiled with a cluster shape (.reqnctapercluster) runs in
  // clusters of that shape whatever the launch names, as on hardware (a
  // launch naming another shape is an error there).
  LaunchSpec spec = launch;
  if (kernel.clusterX) {
    Dim3 declared{kernel.clusterX, kernel.clusterY, kernel.clusterZ};
    if (launch.explicitCluster &&
        (launch.cluster.x != declared.x || launch.cluster.y != declared.y ||
         launch.cluster.z != declared.z))
      return makeError("kernel '{}': launched in clusters of ({},{},{}) but "
                       "compiled for ({},{},{})",
                       kernel.name, launch.cluster.x, launch.cluster.y,
                       launch.cluster.z, declared.x, declared.y, declared.z);
    spec.cluster = declared;
    spec.explicitCluster = true;
  }
  uint64_t threads =
      static_cast<uint64_t>(spec.block.x) * spec.block.y * spec.block.z;
  if (threads == 0 || threads > 1024)
    return makeError("kernel '{}': {} threads per block (1 to 1024 allowed)",
                     kernel.name, threads);
  if (kernel.maxThreads && threads > kernel.maxThreads)
    return makeError("kernel '{}': {} threads per block exceed its .maxntid "
                     "of {}",
                     kernel.name, threads, kernel.maxThreads);
  if (!spec.cluster.x || !spec.cluster.y || !spec.cluster.z ||
      spec.grid.x % spec.cluster.x || spec.grid.y % spec.cluster.y ||
      spec.grid.z % spec.cluster.z)
    return makeError("kernel '{}': grid ({},{},{}) is not a whole number of "
                     "clusters of ({},{},{})",
                     kernel.name, spec.grid.x, spec.grid.y, spec.grid.z,
                     spec.cluster.x, spec.cluster.y, spec.cluster.z);
  const uint32_t clusterSize = spec.cluster.x * spec.cluster.y * spec.cluster.z;
  if (clusterSize > 16)
    return makeError("kernel '{}': a cluster of {} blocks (at most 16)",
                     kernel.name, clusterSize);
  if (spec.paramBytes < kernel.paramBytes)
    return makeError("kernel '{}': {} bytes of parameters passed, the kernel "
                     "takes {}",
                     kernel.name, spec.paramBytes, kernel.paramBytes);
  uint64_t blocks =
      static_cast<uint64_t>(spec.grid.x) * spec.grid.y * spec.grid.z;
  if (blocks == 0)
    return Error::success();
  // The unit of scheduling is a cluster: its blocks run interleaved on
  // one host thread (a block alone when the cluster is 1 x 1 x 1).
  const uint64_t clusters = blocks / clusterSize;
  const Dim3 clusterGrid{spec.grid.x / spec.cluster.x,
                         spec.grid.y / spec.cluster.y,
                         spec.grid.z / spec.cluster.z};
  // A sample (sampleBlocks) is drawn from its own seed and runs in linear
  // order, unless blockOrderSeed shuffles it too.
  // (With clusters, whole clusters are sampled: sampleBlocks rounded up.)
  uint64_t unitsToRun = clusters;
  std::vector<uint64_t> order;
  uint64_t sampleUnits = (spec.sampleBlocks + clusterSize - 1) / clusterSize;
  if (spec.sampleBlocks && sampleUnits < clusters) {
    order.resize(clusters);
    for (uint64_t i = 0; i < clusters; ++i)
      order[i] = i;
    std::mt19937_64 rng(spec.sampleSeed);
    for (uint64_t i = 0; i < sampleUnits; ++i)
      std::swap(order[i], order[i + rng() % (clusters - i)]);
    unitsToRun = sampleUnits;
    order.resize(unitsToRun);
    std::sort(order.begin(), order.end());
  }
  // A random order (blockOrderSeed) shows up kernels that depend on the
  // order blocks run in, which the hardware does not promise.
  if (spec.blockOrderSeed) {
    if (order.empty()) {
      order.resize(clusters);
      for (uint64_t i = 0; i < clusters; ++i)
        order[i] = i;
    }
    std::mt19937_64 rng(spec.blockOrderSeed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  unsigned workers = static_cast<unsigned>(
      std::min<uint64_t>(std::max(1u, spec.workers), unitsToRun));
  std::atomic<uint64_t> nextBlock{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  std::string firstError;
  uint64_t firstErrorBlock = UINT64_MAX;
  // Every runner's counts, merged as each worker ends.
  std::mutex countsMutex;
  LaunchStats counts;
  std::unordered_set<uint64_t> sectorsRead, sectorsWritten;
  // The race check's record of which block wrote each global byte.
  std::unique_ptr<detail::GlobalAccessTracker> globalWrites;
  if (spec.checkRaces)
    globalWrites = std::make_unique<detail::GlobalAccessTracker>();
  auto work = [&]() {
    std::vector<std::unique_ptr<detail::BlockRunner>> runners;
    detail::ClusterRun run;
    for (uint32_t r = 0; r < clusterSize; ++r) {
      runners.push_back(std::make_unique<detail::BlockRunner>(
          kernel, spec, globalWrites.get()));
      run.blocks.push_back(runners.back().get());
    }
    uint64_t blocksRun = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t next = nextBlock.fetch_add(1);
      if (next >= unitsToRun)
        break;
      uint64_t c = order.empty() ? next : order[next];
      Dim3 origin;
      origin.x = static_cast<uint32_t>(c % clusterGrid.x) * spec.cluster.x;
      origin.y = static_cast<uint32_t>((c / clusterGrid.x) % clusterGrid.y) *
                 spec.cluster.y;
      origin.z = static_cast<uint32_t>(
                     c / (static_cast<uint64_t>(clusterGrid.x) *
                          clusterGrid.y)) *
                 spec.cluster.z;
      for (uint32_t r = 0; r < clusterSize; ++r) {
        Dim3 id;
        id.x = origin.x + r % spec.cluster.x;
        id.y = origin.y + (r / spec.cluster.x) % spec.cluster.y;
        id.z = origin.z + r / (spec.cluster.x * spec.cluster.y);
        runners[r]->beginBlock(id, &run, r);
      }
      run.barrierPhase = 0;
      // Each cluster's skewed schedule depends on the cluster and the seed
      // only (not on which worker runs it): a racy kernel fails the same
      // way every run.
      run.schedule = (spec.blockOrderSeed + c + 1) * 0xbf58476d1ce4e5b9ull;
      if (!run.schedule)
        run.schedule = 1;
      blocksRun += clusterSize;
      if (detail::BlockRunner *bad = detail::runCluster(run)) {
        Dim3 id = bad->blockId();
        uint64_t b = id.x + static_cast<uint64_t>(spec.grid.x) *
                                (id.y + static_cast<uint64_t>(spec.grid.y) *
                                            id.z);
        std::lock_guard<std::mutex> lock(errorMutex);
        // Report the lowest failing block, whichever worker found it.
        if (b < firstErrorBlock) {
          firstErrorBlock = b;
          firstError = bad->errorMessage();
        }
        stop = true;
        break;
      }
    }
    std::lock_guard<std::mutex> lock(countsMutex);
    counts.blocksRun += blocksRun;
    for (auto &runner : runners) {
      counts.threadInstructions += runner->threadInstructions;
      counts.warpInstructions += runner->warpInstructions;
      if (spec.countPerformance) {
        detail::addPerformanceCounters(counts, runner->perf);
        detail::mergeSectors(sectorsRead, runner->sectorsRead);
        detail::mergeSectors(sectorsWritten, runner->sectorsWritten);
      }
    }
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < workers; ++i)
      pool.emplace_back(work);
    for (std::thread &t : pool)
      t.join();
  }
  if (stats) {
    counts.blocksTotal = blocks;
    counts.dramReadSectors = sectorsRead.size();
    counts.dramWriteSectors = sectorsWritten.size();
    stats->threadInstructions += counts.threadInstructions;
    stats->warpInstructions += counts.warpInstructions;
    stats->blocksTotal += counts.blocksTotal;
    stats->blocksRun += counts.blocksRun;
    stats->dramReadSectors += counts.dramReadSectors;
    stats->dramWriteSectors += counts.dramWriteSectors;
    detail::addPerformanceCounters(*stats, counts);
  }
  if (!firstError.empty())
    return Error::failure(firstError);
  // Every block ran: the reads of bytes other blocks wrote (whichever ran
  // first), each against the release/acquire chain it knew. (Not in a
  // sample: a handshake between blocks cannot complete there.)
  detail::GlobalAccessTracker::ReadRace race;
  if (globalWrites && unitsToRun == clusters &&
      globalWrites->findReadRace(race))
    return Error::failure(detail::describeReadRace(kernel, spec, race));
  return Error::success();
}

} // namespace kiln::runtime::emu

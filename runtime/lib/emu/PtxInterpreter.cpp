//===- PtxInterpreter.cpp - Runs decoded PTX kernels on the CPU -----------===//
//
// The interpreter's core: a block's warps, their divergence and
// reconvergence, the time slice that lets warps that spin on each other
// make progress, opening barriers (and naming deadlocks), and the launch
// that hands blocks to host threads. Each instruction family executes in
// its own file (Exec*.cpp); runWarp dispatches to them.
//
// This file is compiled with -frounding-math like the other interpreter
// files: see Numerics.h.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

namespace kiln::runtime::emu {
namespace detail {

BlockRunner::BlockRunner(const Kernel &kernel, const LaunchSpec &spec)
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
        default: // ctaid: per block
          break;
        }
        cell[l] = v;
      }
    }
  }
}

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

bool BlockRunner::runBlock(Dim3 id) {
  ctaid = id;
  for (unsigned w = 0; w < numWarps; ++w) {
    uint64_t *r = warpRegs(w);
    for (const SpecialSlot &s : kernel.specials) {
      uint64_t v;
      if (s.which == Special::CtaidX)
        v = id.x;
      else if (s.which == Special::CtaidY)
        v = id.y;
      else if (s.which == Special::CtaidZ)
        v = id.z;
      else
        continue;
      std::fill_n(r + static_cast<size_t>(s.slot) * 32, 32, v);
    }
    WarpState &ws = warps[w];
    uint32_t lanes = std::min<uint32_t>(32, threadsPerBlock - w * 32);
    ws.live = lanes == 32 ? kFullMask : ((1u << lanes) - 1);
    ws.waiting = 0;
    ws.converged = true;
    ws.pc = 0;
  }
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
  uint64_t blockStart = warpInstructions;
  while (true) {
    // Each warp runs until it waits, exits or uses up its time slice; a
    // warp that spins on a flag another warp sets gets to see it set.
    bool runnable = false;
    if (mbarrierWaiters)
      wakeMbarrierWaiters();
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].live & ~warps[w].waiting) {
        if (!runWarp(w))
          return false;
        runnable |= (warps[w].live & ~warps[w].waiting) != 0;
      }
    if (runnable) {
      if (spec.maxWarpInstructionsPerBlock &&
          warpInstructions - blockStart > spec.maxWarpInstructionsPerBlock) {
        unsigned w = 0;
        while (!(warps[w].live & ~warps[w].waiting))
          ++w;
        const WarpState &ws = warps[w];
        unsigned lane = __builtin_ctz(ws.live & ~ws.waiting);
        return fault(w, lane, ws.converged ? ws.pc : ws.lanePc[lane],
                     fmt::format("the block is still running after {} warp "
                                 "instructions (an endless loop, or a wait "
                                 "for another block?); the limit is {} "
                                 "(KILN_EMU_MAX_STEPS=N raises it, 0 for "
                                 "none)",
                                 warpInstructions - blockStart,
                                 spec.maxWarpInstructionsPerBlock));
      }
      continue;
    }
    // Every warp has exited or waits at a barrier. A barrier opens when
    // the threads waiting at it plus those that arrived (bar.arrive) reach
    // its count, or the whole block when it has none.
    uint32_t waitingAt[kBarriers + 1] = {};
    bool anyWaiting = false;
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].waiting) {
        waitingAt[warps[w].barrier] += __builtin_popcount(warps[w].waiting);
        anyWaiting = true;
      }
    if (!anyWaiting)
      return true;
    // Lanes in mbarrier.try_wait try again after a change (the last
    // warp to run may have arrived and exited).
    if (mbarrierWaiters && wakeMbarrierWaiters())
      continue;
    bool opened = false;
    for (uint32_t id = 0; id < kBarriers; ++id) {
      if (!waitingAt[id])
        continue;
      uint32_t need =
          barrierExpected[id] ? barrierExpected[id] : threadsPerBlock;
      if (waitingAt[id] + barrierArrived[id] >= need) {
        releaseBarrier(id);
        opened = true;
      }
    }
    if (opened)
      continue;
    if (waitingAt[kMbarrierWait])
      for (unsigned w = 0; w < numWarps; ++w)
        if (warps[w].waiting && warps[w].barrier == kMbarrierWait)
          return mbarrierDeadlock(w);
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
                        id,
                        threadName(w * 32 + __builtin_ctz(warps[w].waiting)),
                        warps[w].barrier));
    uint32_t need = barrierExpected[id] ? barrierExpected[id] : threadsPerBlock;
    return fault(waitingWarp, lane, pc,
                 fmt::format("barrier {} expects {} threads but only {} "
                             "arrived before the rest of the block exited",
                             id, need, waitingAt[id] + barrierArrived[id]));
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

Error runKernel(const Kernel &kernel, const LaunchSpec &spec,
                LaunchStats *stats) {
  uint64_t threads =
      static_cast<uint64_t>(spec.block.x) * spec.block.y * spec.block.z;
  if (threads == 0 || threads > 1024)
    return makeError("kernel '{}': {} threads per block (1 to 1024 allowed)",
                     kernel.name, threads);
  if (kernel.maxThreads && threads > kernel.maxThreads)
    return makeError("kernel '{}': {} threads per block exceed its .maxntid "
                     "of {}",
                     kernel.name, threads, kernel.maxThreads);
  if (spec.paramBytes < kernel.paramBytes)
    return makeError("kernel '{}': {} bytes of parameters passed, the kernel "
                     "takes {}",
                     kernel.name, spec.paramBytes, kernel.paramBytes);
  uint64_t blocks =
      static_cast<uint64_t>(spec.grid.x) * spec.grid.y * spec.grid.z;
  if (blocks == 0)
    return Error::success();
  // A sample (sampleBlocks) is drawn from its own seed and runs in linear
  // order, unless blockOrderSeed shuffles it too.
  uint64_t blocksToRun = blocks;
  std::vector<uint64_t> order;
  if (spec.sampleBlocks && spec.sampleBlocks < blocks) {
    order.resize(blocks);
    for (uint64_t i = 0; i < blocks; ++i)
      order[i] = i;
    std::mt19937_64 rng(spec.sampleSeed);
    for (uint64_t i = 0; i < spec.sampleBlocks; ++i)
      std::swap(order[i], order[i + rng() % (blocks - i)]);
    blocksToRun = spec.sampleBlocks;
    order.resize(blocksToRun);
    std::sort(order.begin(), order.end());
  }
  // A random order (blockOrderSeed) shows up kernels that depend on the
  // order blocks run in, which the hardware does not promise.
  if (spec.blockOrderSeed) {
    if (order.empty()) {
      order.resize(blocks);
      for (uint64_t i = 0; i < blocks; ++i)
        order[i] = i;
    }
    std::mt19937_64 rng(spec.blockOrderSeed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  unsigned workers = static_cast<unsigned>(
      std::min<uint64_t>(std::max(1u, spec.workers), blocksToRun));
  std::atomic<uint64_t> nextBlock{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  std::string firstError;
  uint64_t firstErrorBlock = UINT64_MAX;
  // Every runner's counts, merged as each worker ends.
  std::mutex countsMutex;
  LaunchStats counts;
  std::unordered_set<uint64_t> sectorsRead, sectorsWritten;
  auto work = [&]() {
    detail::BlockRunner runner(kernel, spec);
    uint64_t blocksRun = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t next = nextBlock.fetch_add(1);
      if (next >= blocksToRun)
        break;
      uint64_t b = order.empty() ? next : order[next];
      Dim3 id;
      id.x = static_cast<uint32_t>(b % spec.grid.x);
      id.y = static_cast<uint32_t>((b / spec.grid.x) % spec.grid.y);
      id.z = static_cast<uint32_t>(
          b / (static_cast<uint64_t>(spec.grid.x) * spec.grid.y));
      ++blocksRun;
      if (!runner.runBlock(id)) {
        std::lock_guard<std::mutex> lock(errorMutex);
        // Report the lowest failing block, whichever worker found it.
        if (b < firstErrorBlock) {
          firstErrorBlock = b;
          firstError = runner.errorMessage();
        }
        stop = true;
        break;
      }
    }
    std::lock_guard<std::mutex> lock(countsMutex);
    counts.threadInstructions += runner.threadInstructions;
    counts.warpInstructions += runner.warpInstructions;
    counts.blocksRun += blocksRun;
    if (spec.countPerformance) {
      detail::addPerformanceCounters(counts, runner.perf);
      detail::mergeSectors(sectorsRead, runner.sectorsRead);
      detail::mergeSectors(sectorsWritten, runner.sectorsWritten);
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
  return Error::success();
}

} // namespace kiln::runtime::emu

//===- ExecMbarrier.cpp - mbarrier objects in shared memory ---------------===//
//
// An mbarrier is a 64-bit object in shared memory; the emulator keeps its
// state beside the block's shared memory, keyed by its offset: the current
// phase (phases completed so far), the pending arrival count, the expected
// arrival count and the tx-count, as the PTX ISA describes them. A phase
// completes when its pending count and tx-count are both zero; then the
// next phase begins with the expected count pending and a tx-count of 0.
// The state an arrive returns is the phase it arrived in; test_wait and
// try_wait with a state complete once that phase has, with .parity once
// the current phase's parity differs from the operand.
//
// Asynchronous work that completes on an mbarrier (TMA and bulk copies,
// cp.async.mbarrier.arrive) lands as late as the ISA allows: when a thread
// waits on that mbarrier. try_wait blocks: its lanes wait (the warp yields
// to the others) and try again after any mbarrier changes; when no thread
// of the block can run and none of them would change it, the launch fails
// naming the mbarrier (a deadlock). test_wait does not block but ends the
// warp's time slice when it fails, so that a spin on it lets the other
// warps run.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

namespace kiln::runtime::emu::detail {

namespace {
constexpr int64_t kMaxTxCount = (1 << 20) - 1;
constexpr uint64_t kMaxArrivals = (1 << 20) - 1;
} // namespace

bool BlockRunner::mbarrierOffset(unsigned w, unsigned lane, uint32_t pc,
                                 Space space, uint64_t address,
                                 uint64_t &offset) {
  bool isShared = false;
  uint8_t *p =
      resolve(w, lane, pc, space == Space::Generic ? space : Space::Shared,
              address, 8, 8, "mbarrier access", &isShared);
  if (!p)
    return false;
  if (!isShared)
    return fault(
        w, lane, pc,
        fmt::format("the mbarrier at 0x{:x} is not in shared memory", address));
  offset = static_cast<uint64_t>(p - shared.data());
  return true;
}

void BlockRunner::mbarrierMaybeComplete(Mbarrier &m) {
  if (m.pending != 0 || m.tx != 0)
    return;
  ++m.phase;
  m.pending = m.expected;
  m.tx = 0;
  ++mbarrierEvents;
}

bool BlockRunner::mbarrierArrive(unsigned w, unsigned lane, uint32_t pc,
                                 Mbarrier &m, uint32_t count, bool drop) {
  if (count == 0 || count > m.pending)
    return fault(w, lane, pc,
                 fmt::format("arrives {} times on the mbarrier at shared "
                             "offset {}, whose phase {} has {} arrivals "
                             "pending",
                             count, m.offset, m.phase, m.pending));
  m.pending -= count;
  if (drop)
    m.expected -= std::min(m.expected, count);
  ++mbarrierEvents;
  mbarrierMaybeComplete(m);
  return true;
}

bool BlockRunner::mbarrierTx(unsigned w, unsigned lane, uint32_t pc,
                             Mbarrier &m, int64_t delta) {
  int64_t tx = m.tx + delta;
  if (tx > kMaxTxCount || tx < -kMaxTxCount)
    return fault(w, lane, pc,
                 fmt::format("the tx-count of the mbarrier at shared offset "
                             "{} leaves its range (+-{}): {}",
                             m.offset, kMaxTxCount, tx));
  m.tx = tx;
  ++mbarrierEvents;
  mbarrierMaybeComplete(m);
  return true;
}

bool BlockRunner::landAsyncWork(uint64_t offset) {
  // Bulk copies: their bytes land, then complete their tx bytes.
  for (size_t i = 0; i < pendingBulk.size();) {
    PendingBulk &copy = pendingBulk[i];
    if (copy.mbarrier != offset) {
      ++i;
      continue;
    }
    for (size_t c = 0; c < copy.chunks.size(); ++c) {
      std::memcpy(shared.data() + copy.chunks[c], copy.data.data() + 16 * c,
                  16);
      markSharedWritten(copy.chunks[c], 16);
    }
    Mbarrier *m = findMbarrier(offset);
    if (!m || !m->valid)
      return fault(copy.warp, copy.lane, copy.pc,
                   fmt::format("the copy completes on the mbarrier at shared "
                               "offset {}, which is not initialized",
                               offset));
    PendingBulk done = std::move(copy);
    pendingBulk.erase(pendingBulk.begin() + i);
    ++mbarrierEvents;
    if (raceCheck)
      raceCheck->bulkLoadLanded(offset);
    if (!mbarrierTx(done.warp, done.lane, done.pc, *m,
                    -static_cast<int64_t>(done.bytes)))
      return false;
  }
  // cp.async arrive-ons: the lane's earlier copies land, then it arrives.
  for (size_t i = 0; i < deferredArrives.size();) {
    DeferredArrive a = deferredArrives[i];
    if (a.mbarrier != offset) {
      ++i;
      continue;
    }
    deferredArrives.erase(deferredArrives.begin() + i);
    std::vector<PendingCopy> &pending = pendingCopies[a.warp];
    size_t kept = 0;
    for (size_t c = 0; c < pending.size(); ++c) {
      PendingCopy &copy = pending[c];
      if (copy.lane == a.lane && copy.serial < a.serial) {
        std::memcpy(shared.data() + copy.sharedOffset, copy.bytes, copy.size);
        markSharedWritten(copy.sharedOffset, copy.size);
        if (raceCheck)
          raceCheck->copyLanded(a.warp * 32 + a.lane, copy.sharedOffset,
                                copy.size, copy.serial, /*byOwnWait=*/false);
      } else {
        pending[kept++] = copy;
      }
    }
    pending.resize(kept);
    Mbarrier *m = findMbarrier(offset);
    if (!m || !m->valid)
      return fault(a.warp, a.lane, a.pc,
                   fmt::format("cp.async.mbarrier.arrive on the mbarrier at "
                               "shared offset {}, which is not initialized",
                               offset));
    if (raceCheck)
      raceCheck->copyArriveLanded(a.warp * 32 + a.lane, offset);
    if (!mbarrierArrive(a.warp, a.lane, a.pc, *m, 1, false))
      return false;
  }
  return true;
}

BarrierStep BlockRunner::mbarrier(unsigned w, uint32_t pc,
                                  const Instruction &in, uint32_t mask,
                                  uint32_t exec) {
  uint64_t *r = warpRegs(w);
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  const MbarrierOp op = MbarrierOp(in.subop);
  const uint64_t *address = slot(in.src[0]);
  const uint64_t *operand = in.numSrc > 1 ? slot(in.src[1]) : nullptr;
  uint64_t *d = in.numDst && in.dst[0] != kNoSlot ? slot(in.dst[0]) : nullptr;
  bool ok = true;
  uint32_t notReady = 0;
  forLanes(exec, [&](unsigned l) {
    if (!ok)
      return;
    uint64_t offset = 0;
    // Another block's mbarrier (a shared::cluster address from mapa):
    // arrive and the tx-count operations only, as the ISA allows.
    BlockRunner *owner = this;
    uint64_t a = address[l] + in.offset;
    bool windowed = in.space == Space::Generic && a >= kSharedWindow &&
                    a < kSharedWindow + (1ull << 32);
    if ((in.space == Space::Shared || windowed) &&
        ((windowed ? a - kSharedWindow : a) >> kClusterRankShift) != 0) {
      owner = clusterTarget(w, l, pc, windowed ? a - kSharedWindow : a, 8,
                            "mbarrier access", offset);
      if (!owner) {
        ok = false;
        return;
      }
      if (offset % 8) {
        ok = fault(w, l, pc,
                   fmt::format("misaligned mbarrier at offset {} of block {} "
                               "of the cluster",
                               offset, owner->rankInCluster));
        return;
      }
      if (owner != this && op != MbarrierOp::Arrive &&
          op != MbarrierOp::ArriveDrop && op != MbarrierOp::ArriveExpectTx &&
          op != MbarrierOp::ExpectTx && op != MbarrierOp::CompleteTx) {
        ok = fault(w, l, pc,
                   fmt::format("{} on the mbarrier of block {} of the "
                               "cluster (only arrive and the tx-count "
                               "operations reach another block's)",
                               kernel.opcodeText[pc], owner->rankInCluster));
        return;
      }
      if (owner != this && d) {
        ok = fault(w, l, pc,
                   "an arrive on another block's mbarrier returns no state "
                   "(its destination must be '_')");
        return;
      }
      ++owner->mbarrierEvents; // its waiters look again
    } else if (!mbarrierOffset(w, l, pc, in.space, a, offset)) {
      ok = false;
      return;
    }
    Mbarrier *m = owner->findMbarrier(offset);
    if (op == MbarrierOp::Init) {
      uint64_t count = operand[l] & 0xffffffffu;
      if (count < 1 || count > kMaxArrivals) {
        ok = fault(w, l, pc,
                   fmt::format("mbarrier.init with an arrival count of {} "
                               "(1 to {})",
                               count, kMaxArrivals));
        return;
      }
      if (!m) {
        mbarriers.emplace_back();
        m = &mbarriers.back();
      }
      m->offset = offset;
      m->expected = m->pending = static_cast<uint32_t>(count);
      m->tx = 0;
      m->phase = 0;
      m->valid = true;
      std::memset(shared.data() + offset, 0, 8);
      markSharedWritten(offset, 8);
      ++mbarrierEvents;
      m->awaited = 0;
      if (raceCheck)
        raceCheck->mbarrierInit(offset);
      return;
    }
    if (!m || !m->valid) {
      ok = fault(w, l, pc,
                 fmt::format("the mbarrier at shared offset {} is {}", offset,
                             m ? "invalidated (mbarrier.inval)"
                               : "not initialized (mbarrier.init)"));
      return;
    }
    switch (op) {
    case MbarrierOp::Inval:
      m->valid = false;
      ++mbarrierEvents;
      return;
    case MbarrierOp::Arrive:
    case MbarrierOp::ArriveDrop:
    case MbarrierOp::ArriveExpectTx: {
      uint64_t state = m->phase;
      uint32_t count = 1;
      if (raceCheck)
        raceCheck->mbarrierArrive(offset, w * 32 + l);
      if (op == MbarrierOp::ArriveExpectTx) {
        m->expectSite = {w, l, pc};
        if (!mbarrierTx(w, l, pc, *m,
                        static_cast<int64_t>(operand[l] & 0xffffffffu))) {
          ok = false;
          return;
        }
      } else if (operand) {
        count = static_cast<uint32_t>(operand[l]);
      }
      if (!mbarrierArrive(w, l, pc, *m, count, op == MbarrierOp::ArriveDrop)) {
        ok = false;
        return;
      }
      if (d)
        d[l] = state;
      return;
    }
    case MbarrierOp::ExpectTx:
    case MbarrierOp::CompleteTx: {
      int64_t bytes = static_cast<int64_t>(operand[l] & 0xffffffffu);
      if (op == MbarrierOp::ExpectTx)
        m->expectSite = {w, l, pc};
      ok =
          mbarrierTx(w, l, pc, *m, op == MbarrierOp::ExpectTx ? bytes : -bytes);
      return;
    }
    case MbarrierOp::CpAsyncArrive:
      // Without .noinc the pending count goes up now and down when the
      // copies land: no net change to the phase's arrivals.
      if (!in.aux)
        ++m->pending;
      if (raceCheck)
        raceCheck->copyArriveIssued(w * 32 + l, offset, copySerial);
      deferredArrives.push_back({offset, copySerial, w, l, pc, in.aux != 0});
      ++mbarrierEvents;
      return;
    case MbarrierOp::TestWait:
    case MbarrierOp::TryWait: {
      if (raceCheck && !in.aux && operand[l] > m->phase) {
        ok = fault(w, l, pc,
                   fmt::format("waits for phase {} of the mbarrier at shared "
                               "offset {}, which has not begun (the current "
                               "phase is {}): the state was not returned by "
                               "an arrive on this mbarrier",
                               operand[l], offset, m->phase));
        return;
      }
      if (!landAsyncWork(offset)) {
        ok = false;
        return;
      }
      m = findMbarrier(offset);
      bool done =
          in.aux ? (m->phase & 1) != (operand[l] & 1) : m->phase > operand[l];
      if (done || op == MbarrierOp::TestWait) {
        if (d)
          d[l] = done;
      }
      if (done && raceCheck)
        raceCheck->mbarrierAcquire(offset, w * 32 + l);
      if (!done) {
        notReady |= 1u << l;
        // The phases it needs completed: the current one.
        m->awaited = std::max(m->awaited, m->phase + 1);
        m->waitSite = {w, l, pc};
      }
      return;
    }
    case MbarrierOp::Init:
      return;
    }
  });
  if (!ok)
    return BarrierStep::Fault;
  if (!notReady)
    return BarrierStep::Advance;
  if (op == MbarrierOp::TestWait)
    return BarrierStep::Yield;
  // try_wait: the lanes whose phase is not complete wait here and try again
  // once an mbarrier changes; the others move on.
  WarpState &ws = warps[w];
  if (ws.waiting && ws.barrier != kMbarrierWait) {
    fault(w, __builtin_ctz(notReady), pc,
          fmt::format("mbarrier.try_wait while other lanes of the warp wait "
                      "at barrier {}",
                      ws.barrier));
    return BarrierStep::Fault;
  }
  diverge(ws);
  forLanes(mask & ~notReady, [&](unsigned l) { ws.lanePc[l] = pc + 1; });
  if (!ws.waiting)
    ws.waitEvents = mbarrierEvents;
  ws.waiting |= notReady;
  ws.barrier = kMbarrierWait;
  mbarrierWaiters += __builtin_popcount(notReady);
  return BarrierStep::Wait;
}

bool BlockRunner::wakeMbarrierWaiters() {
  bool woke = false;
  for (unsigned w = 0; w < numWarps; ++w) {
    WarpState &ws = warps[w];
    if (ws.waiting && ws.barrier == kMbarrierWait &&
        ws.waitEvents != mbarrierEvents) {
      mbarrierWaiters -= __builtin_popcount(ws.waiting);
      ws.waiting = 0;
      woke = true;
    }
  }
  return woke;
}

bool BlockRunner::mbarrierDeadlock(unsigned w) {
  const WarpState &ws = warps[w];
  unsigned lane = __builtin_ctz(ws.waiting);
  return mbarrierDeadlock(w, lane, ws.converged ? ws.pc : ws.lanePc[lane]);
}

bool BlockRunner::mbarrierDeadlock(unsigned w, unsigned lane, uint32_t pc) {
  const Instruction &in = code[pc];
  const uint64_t *r = warpRegs(w);
  uint64_t address = r[static_cast<size_t>(in.src[0]) * 32 + lane] + in.offset;
  uint64_t operand = r[static_cast<size_t>(in.src[1]) * 32 + lane];
  if (address >= kSharedWindow && address < kSharedWindow + (1ull << 32))
    address -= kSharedWindow;
  const Mbarrier *m = findMbarrier(address);
  std::string what = in.aux ? fmt::format("the phase of parity {}", operand & 1)
                            : fmt::format("phase {}", operand);
  return fault(
      w, lane, pc,
      fmt::format("deadlock: mbarrier.{} on the mbarrier at shared "
                  "offset {} waits for {} to complete, but every thread of "
                  "the {} waits{} or has exited (phase {}: {} of {} "
                  "arrivals pending, tx-count {})",
                  MbarrierOp(in.subop) == MbarrierOp::TestWait ? "test_wait"
                                                               : "try_wait",
                  address, what,
                  cluster && cluster->blocks.size() > 1 ? "cluster" : "block",
                  MbarrierOp(in.subop) == MbarrierOp::TestWait
                      ? ", spins on test_wait with nothing changing"
                      : "",
                  m ? m->phase : 0, m ? m->pending : 0, m ? m->expected : 0,
                  m ? m->tx : 0));
}

bool BlockRunner::checkMbarriersAtExit() {
  // A copy nobody waited for lands after the block: its bytes and its
  // tx-count never reach the block.
  for (const PendingBulk &copy : pendingBulk)
    return fault(copy.warp, copy.lane, copy.pc,
                 fmt::format("the block ends before any thread waits on the "
                             "mbarrier at shared offset {} that this copy "
                             "completes on ({} bytes never waited for)",
                             copy.mbarrier, copy.bytes));
  for (const Mbarrier &m : mbarriers) {
    if (!m.valid)
      continue;
    if (m.awaited > m.phase)
      return fault(m.waitSite.warp, m.waitSite.lane, m.waitSite.pc,
                   fmt::format("the block ends with phase {} of the mbarrier "
                               "at shared offset {} incomplete, though this "
                               "wait waited for it ({} of {} arrivals "
                               "pending, tx-count {}): on a GPU the wait "
                               "would hang",
                               m.phase, m.offset, m.pending, m.expected, m.tx));
    if (m.tx != 0)
      return fault(m.expectSite.warp, m.expectSite.lane, m.expectSite.pc,
                   fmt::format("the block ends with the tx-count of the "
                               "mbarrier at shared offset {} at {} in phase "
                               "{}: {} (a wait on the phase would hang on a "
                               "GPU)",
                               m.offset, m.tx, m.phase,
                               m.tx > 0
                                   ? fmt::format("{} bytes announced by "
                                                 "expect_tx never arrived",
                                                 m.tx)
                                   : fmt::format("{} bytes more than "
                                                 "expect_tx announced arrived",
                                                 -m.tx)));
  }
  return true;
}

} // namespace kiln::runtime::emu::detail

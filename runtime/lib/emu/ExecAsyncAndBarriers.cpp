//===- ExecAsyncAndBarriers.cpp - Barriers and asynchronous copies --------===//
//
// bar/barrier (sync, arrive, red) with counts on barriers 0-15, opening a
// barrier, and cp.async with its commit and wait groups: copies read their
// source and check both addresses when issued, and write shared memory when
// a wait completes their group (or when cp.async.mbarrier.arrive's
// mbarrier is waited on: ExecMbarrier.cpp). mbarrier, TMA and wgmma are in
// ExecMbarrier.cpp, ExecBulkCopy.cpp and ExecWgmma.cpp.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

namespace kiln::runtime::emu::detail {

BarrierStep BlockRunner::barrier(unsigned w, uint32_t pc, const Instruction &in,
                                 uint32_t mask, uint32_t exec) {
  WarpState &ws = warps[w];
  const uint64_t *r = warpRegs(w);
  BarMode mode = BarMode(in.subop);
  if (mode == BarMode::WarpSync) {
    // bar.warp.sync: every member lane must be here (the scheduler runs
    // members elsewhere first: syncMembers); it orders their memory
    // accesses, nothing else.
    if (!exec)
      return BarrierStep::Advance;
    unsigned first = __builtin_ctz(exec);
    uint32_t members =
        static_cast<uint32_t>(r[static_cast<size_t>(in.src[0]) * 32 + first]);
    if (members & ~exec) {
      fault(w, first, pc,
            fmt::format("bar.warp.sync member mask 0x{:08x} names lane {}, "
                        "which is not at this instruction",
                        members, __builtin_ctz(members & ~exec)));
      return BarrierStep::Fault;
    }
    if (raceCheck)
      raceCheck->warpSync(w, members);
    return BarrierStep::Advance;
  }
  if (exec) {
    unsigned first = __builtin_ctz(exec);
    uint32_t id =
        static_cast<uint32_t>(r[static_cast<size_t>(in.src[0]) * 32 + first]);
    if (id >= kBarriers) {
      fault(w, first, pc,
            fmt::format("barrier {} does not exist (0 to 15)", id));
      return BarrierStep::Fault;
    }
    uint32_t count = in.src[1] == kNoSlot
                         ? 0
                         : static_cast<uint32_t>(
                               r[static_cast<size_t>(in.src[1]) * 32 + first]);
    if (count && barrierExpected[id] && count != barrierExpected[id]) {
      fault(w, first, pc,
            fmt::format("barrier {} used with {} threads while it expects {}",
                        id, count, barrierExpected[id]));
      return BarrierStep::Fault;
    }
    if (count)
      barrierExpected[id] = count;
    if (mode == BarMode::Arrive) {
      barrierArrived[id] += __builtin_popcount(exec);
      if (raceCheck)
        forLanes(exec, [&](unsigned l) { raceCheck->barrierArrive(id, w * 32 + l); });
      return BarrierStep::Advance; // moves on like any instruction
    }
    if (mode != BarMode::Sync) {
      const uint64_t *p = r + static_cast<size_t>(in.src[2]) * 32;
      forLanes(exec, [&](unsigned l) {
        bool v = ((p[l] & 1) != 0) != in.negateSrc;
        barrierPopc[id] += v;
        barrierAll[id] = barrierAll[id] && v;
        barrierAny[id] = barrierAny[id] || v;
      });
    }
    if (ws.waiting && id != ws.barrier) {
      fault(w, first, pc,
            fmt::format("barrier {} reached while other lanes of the warp "
                        "wait at barrier {}",
                        id, ws.barrier));
      return BarrierStep::Fault;
    }
    ws.barrier = id;
  } else if (mode == BarMode::Arrive) {
    return BarrierStep::Advance;
  }
  uint32_t stay = mask & ~exec;
  if (stay) {
    diverge(ws);
    forLanes(stay, [&](unsigned l) { ws.lanePc[l] = pc + 1; });
  }
  ws.waiting |= exec;
  return BarrierStep::Wait;
}

void BlockRunner::releaseBarrier(uint32_t id) {
  if (raceCheck) {
    std::vector<uint32_t> waiting(numWarps, 0);
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].barrier == id)
        waiting[w] = warps[w].waiting;
    raceCheck->barrierOpen(id, waiting.data());
  }
  for (unsigned w = 0; w < numWarps; ++w) {
    WarpState &ws = warps[w];
    if (!ws.waiting || ws.barrier != id)
      continue;
    uint64_t *r = warpRegs(w);
    for (uint32_t m = ws.waiting; m; m &= m - 1) {
      unsigned l = __builtin_ctz(m);
      uint32_t pc = ws.converged ? ws.pc : ws.lanePc[l];
      const Instruction &in = code[pc];
      BarMode mode = BarMode(in.subop);
      uint64_t value = mode == BarMode::RedPopc  ? barrierPopc[id]
                       : mode == BarMode::RedAnd ? barrierAll[id]
                                                 : barrierAny[id];
      if (mode != BarMode::Sync && in.dst[0] != kNoSlot)
        r[static_cast<size_t>(in.dst[0]) * 32 + l] = value;
    }
    if (ws.converged) {
      ++ws.pc;
    } else {
      for (uint32_t m = ws.waiting; m; m &= m - 1)
        ++ws.lanePc[__builtin_ctz(m)];
    }
    ws.waiting = 0;
  }
  barrierArrived[id] = 0;
  barrierExpected[id] = 0;
  barrierPopc[id] = 0;
  barrierAll[id] = true;
  barrierAny[id] = false;
}

bool BlockRunner::asyncCopy(unsigned w, uint32_t pc, const Instruction &in,
                            uint32_t exec) {
  uint64_t *r = warpRegs(w);
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  const uint64_t *dstBase = slot(in.src[0]);
  const uint64_t *srcBase = slot(in.src[1]);
  const uint64_t *sizeSlot = slot(in.src[2]);
  const uint64_t *srcSizeSlot = in.numSrc > 3 ? slot(in.src[3]) : nullptr;
  // A 1-bit fourth operand is the ignore-src predicate.
  const bool ignoreSrcPredicate =
      srcSizeSlot && kernel.slotBits[in.src[3]] == 1;
  int64_t srcOffset = static_cast<int64_t>(
      static_cast<uint64_t>(kernel.operandLists[in.target]) |
      (static_cast<uint64_t>(kernel.operandLists[in.target + 1]) << 32));
  bool ok = true;
  // The global bytes each lane reads, for the performance counters.
  uint64_t srcAddress[32];
  unsigned srcBytes[32];
  forLanes(exec, [&](unsigned l) {
    if (!ok)
      return;
    uint32_t size = static_cast<uint32_t>(sizeSlot[l]);
    if (size != 4 && size != 8 && size != 16) {
      ok = fault(w, l, pc,
                 fmt::format("cp.async copies 4, 8 or 16 bytes, not {}", size));
      return;
    }
    uint32_t srcSize = size;
    if (ignoreSrcPredicate)
      srcSize = (srcSizeSlot[l] & 1) ? 0 : size;
    else if (srcSizeSlot)
      srcSize = static_cast<uint32_t>(srcSizeSlot[l]);
    if (srcSize > size) {
      ok = fault(w, l, pc,
                 fmt::format("cp.async src-size {} exceeds the copy size {}",
                             srcSize, size));
      return;
    }
    uint64_t dst = dstBase[l] + in.offset;
    if (dst >= kSharedWindow && dst < kSharedWindow + (1ull << 32))
      dst -= kSharedWindow;
    bool isShared = false;
    uint8_t *to = resolve(w, l, pc, Space::Shared, dst, size, size,
                          "cp.async destination", &isShared);
    if (!to) {
      ok = false;
      return;
    }
    if (raceCheck && !raceCheck->copyIssued(w * 32 + l, pc,
                                            static_cast<uint64_t>(to - shared.data()),
                                            size)) {
      ok = raceFault(w, l, pc);
      return;
    }
    PendingCopy copy;
    copy.sharedOffset = static_cast<uint64_t>(to - shared.data());
    copy.size = static_cast<uint8_t>(size);
    copy.lane = static_cast<uint8_t>(l);
    copy.group = committedGroups[w][l];
    copy.serial = copySerial++;
    if (srcSize) { // only the bytes read are checked (src-size 0 reads none)
      uint8_t *from =
          resolve(w, l, pc, Space::Global, srcBase[l] + srcOffset, srcSize,
                  srcSize == size ? size : 1, "cp.async source");
      if (!from) {
        ok = false;
        return;
      }
      std::memcpy(copy.bytes, from, srcSize);
      if (raceCheck) // read when issued: what the thread knows then
        raceCheck->globalRead(w * 32 + l, pc, srcBase[l] + srcOffset, srcSize);
    }
    srcAddress[l] = srcBase[l] + srcOffset;
    srcBytes[l] = srcSize;
    pendingCopies[w].push_back(copy);
  });
  if (countPerformance && ok)
    countAccess(Space::Global, srcAddress, srcBytes, exec, /*reads=*/true,
                /*writes=*/false);
  return ok;
}

void BlockRunner::completeCopies(unsigned w, uint32_t lanes,
                                 uint32_t keepGroups, bool all) {
  std::vector<PendingCopy> &pending = pendingCopies[w];
  size_t kept = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    PendingCopy &copy = pending[i];
    bool done = false;
    if (lanes >> copy.lane & 1) {
      uint32_t committed = committedGroups[w][copy.lane];
      // wait_group N: every committed group but the newest N.
      done = all ||
             (copy.group < committed && committed - copy.group > keepGroups);
    }
    if (done) {
      std::memcpy(shared.data() + copy.sharedOffset, copy.bytes, copy.size);
      markSharedWritten(copy.sharedOffset, copy.size);
      if (raceCheck)
        raceCheck->copyLanded(w * 32 + copy.lane, copy.sharedOffset, copy.size,
                              copy.serial, /*byOwnWait=*/true);
    } else {
      pending[kept++] = copy;
    }
  }
  pending.resize(kept);
}

} // namespace kiln::runtime::emu::detail

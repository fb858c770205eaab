//===- ExecWarp.cpp - Warp-level exchanges and votes ----------------------===//
//
// shfl.sync, vote, activemask, redux.sync and match.sync. Every lane named
// in the member mask must be at the instruction (the scheduler first runs
// live members that are elsewhere: syncMembers, which also covers
// bar.warp.sync); all sources are read before any destination is written.
// The .sync exchanges order their members' memory accesses for the race
// check (RaceCheck.h).
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

namespace kiln::runtime::emu::detail {

uint32_t syncMembers(const uint64_t *r, const Instruction &in, uint32_t mask) {
  uint32_t slot = kNoSlot;
  switch (in.op) {
  case Op::Shfl:
    slot = in.src[3];
    break;
  case Op::Vote:
    slot = in.numSrc > 1 ? in.src[1] : kNoSlot;
    break;
  case Op::Redux:
  case Op::Match:
    slot = in.src[1];
    break;
  case Op::Bar:
    if (BarMode(in.subop) != BarMode::WarpSync)
      return 0;
    slot = in.src[0];
    break;
  default:
    return 0;
  }
  if (slot == kNoSlot || !mask)
    return 0;
  return static_cast<uint32_t>(
      r[static_cast<size_t>(slot) * 32 + __builtin_ctz(mask)]);
}

bool BlockRunner::shuffle(unsigned w, uint32_t pc, const Instruction &in,
                          uint32_t exec) {
  if (!exec)
    return true;
  uint64_t *r = warpRegs(w);
  const uint64_t *a = r + static_cast<size_t>(in.src[0]) * 32;
  const uint64_t *b = r + static_cast<size_t>(in.src[1]) * 32;
  const uint64_t *c = r + static_cast<size_t>(in.src[2]) * 32;
  const uint64_t *memberMask = r + static_cast<size_t>(in.src[3]) * 32;
  unsigned first = __builtin_ctz(exec);
  uint32_t members = static_cast<uint32_t>(memberMask[first]);
  if (members & ~exec) {
    unsigned missing = __builtin_ctz(members & ~exec);
    return fault(w, first, pc,
                 fmt::format("shfl.sync member mask 0x{:08x} names lane {}, "
                             "which is not at this instruction",
                             members, missing));
  }
  if (raceCheck)
    raceCheck->warpSync(w, members);
  uint32_t values[32];
  bool valid[32];
  forLanes(exec, [&](unsigned lane) {
    uint32_t bval = static_cast<uint32_t>(b[lane]) & 31;
    uint32_t cval = static_cast<uint32_t>(c[lane]);
    uint32_t segmask = (cval >> 8) & 31;
    uint32_t clamp = cval & 31;
    int maxLane = static_cast<int>((lane & segmask) | (clamp & ~segmask));
    int minLane = static_cast<int>(lane & segmask);
    int j = 0;
    bool pval = false;
    switch (in.shflMode) {
    case ShflMode::Up: // the clamp is a lower bound here (c is usually 0)
      j = static_cast<int>(lane) - static_cast<int>(bval);
      pval = j >= maxLane;
      break;
    case ShflMode::Down:
      j = static_cast<int>(lane) + static_cast<int>(bval);
      pval = j <= maxLane;
      break;
    case ShflMode::Bfly:
      j = static_cast<int>(lane ^ bval);
      pval = j <= maxLane;
      break;
    case ShflMode::Idx:
      j = minLane | static_cast<int>(bval & ~segmask);
      pval = j <= maxLane;
      break;
    }
    if (!pval)
      j = static_cast<int>(lane);
    values[lane] = static_cast<uint32_t>(a[j]);
    valid[lane] = pval;
  });
  uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
  forLanes(exec, [&](unsigned lane) { d[lane] = values[lane]; });
  if (in.dst[1] != kNoSlot) {
    uint64_t *p = r + static_cast<size_t>(in.dst[1]) * 32;
    forLanes(exec, [&](unsigned lane) { p[lane] = valid[lane]; });
  }
  return true;
}

bool BlockRunner::warpCollective(unsigned w, uint32_t pc, const Instruction &in,
                                 uint32_t mask, uint32_t exec) {
  if (!exec)
    return true;
  uint64_t *r = warpRegs(w);
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  unsigned first = __builtin_ctz(exec);
  if (in.op == Op::Activemask) {
    forLanes(exec, [&](unsigned l) { d[l] = mask; });
    return true;
  }
  // The member mask is the last source (vote without .sync: the lanes
  // here). Every member must be at this instruction.
  uint32_t members = exec;
  uint32_t memberSlot =
      in.op == Op::Vote ? (in.numSrc > 1 ? in.src[1] : kNoSlot) : in.src[1];
  if (memberSlot != kNoSlot)
    members = static_cast<uint32_t>(slot(memberSlot)[first]);
  if (members & ~exec)
    return fault(w, first, pc,
                 fmt::format("{} member mask 0x{:08x} names lane {}, which is "
                             "not at this instruction",
                             kernel.opcodeText[pc], members,
                             __builtin_ctz(members & ~exec)));
  uint32_t group = exec & members;
  if (raceCheck && memberSlot != kNoSlot)
    raceCheck->warpSync(w, group);
  const uint64_t *a = slot(in.src[0]);
  if (in.op == Op::Match) {
    uint64_t mask = typeBytes(in.type) == 8 ? ~0ull : 0xffffffffull;
    uint64_t *p = in.dst[1] != kNoSlot ? slot(in.dst[1]) : nullptr;
    if (in.subop) { // all: every member has the same value
      uint64_t v = a[__builtin_ctz(group)] & mask;
      bool same = true;
      forLanes(group, [&](unsigned l) { same = same && (a[l] & mask) == v; });
      forLanes(exec, [&](unsigned l) {
        d[l] = same ? group : 0;
        if (p)
          p[l] = same;
      });
    } else { // any: the members with this lane's value
      uint32_t result[32];
      forLanes(exec, [&](unsigned l) {
        uint32_t m = 0;
        forLanes(group, [&](unsigned k) {
          if ((a[k] & mask) == (a[l] & mask))
            m |= 1u << k;
        });
        result[l] = m;
      });
      forLanes(exec, [&](unsigned l) { d[l] = result[l]; });
    }
    return true;
  }
  if (in.op == Op::Vote) {
    uint32_t ballot = 0;
    forLanes(group, [&](unsigned l) {
      if (((a[l] & 1) != 0) != in.negateSrc)
        ballot |= 1u << l;
    });
    uint64_t v;
    switch (VoteMode(in.subop)) {
    case VoteMode::All:
      v = ballot == group;
      break;
    case VoteMode::Any:
      v = ballot != 0;
      break;
    case VoteMode::Uni:
      v = ballot == 0 || ballot == group;
      break;
    default:
      v = ballot;
      break;
    }
    forLanes(exec, [&](unsigned l) { d[l] = v; });
    return true;
  }
  // redux.sync
  AtomOp op = AtomOp(in.subop);
  bool isSignedType = isSigned(in.type);
  uint32_t acc = 0;
  bool firstLane = true;
  forLanes(group, [&](unsigned l) {
    uint32_t x = static_cast<uint32_t>(a[l]);
    if (firstLane) {
      acc = x;
      firstLane = false;
      return;
    }
    switch (op) {
    case AtomOp::Add:
      acc += x;
      break;
    case AtomOp::Min:
      acc = isSignedType
                ? static_cast<uint32_t>(std::min(static_cast<int32_t>(acc),
                                                 static_cast<int32_t>(x)))
                : std::min(acc, x);
      break;
    case AtomOp::Max:
      acc = isSignedType
                ? static_cast<uint32_t>(std::max(static_cast<int32_t>(acc),
                                                 static_cast<int32_t>(x)))
                : std::max(acc, x);
      break;
    case AtomOp::And:
      acc &= x;
      break;
    case AtomOp::Or:
      acc |= x;
      break;
    case AtomOp::Xor:
      acc ^= x;
      break;
    default:
      break;
    }
  });
  forLanes(exec, [&](unsigned l) { d[l] = acc; });
  return true;
}

} // namespace kiln::runtime::emu::detail

namespace kiln::runtime::emu::detail {

bool BlockRunner::elect(unsigned w, const Instruction &in, uint32_t exec) {
  // elect.sync d|p, membermask: the leader is the lowest lane of the
  // member mask among the lanes executing it.
  uint64_t *r = warpRegs(w);
  if (!exec)
    return true;
  uint32_t members =
      static_cast<uint32_t>(
          r[static_cast<size_t>(in.src[0]) * 32 + __builtin_ctz(exec)]) &
      exec;
  unsigned leader = members ? __builtin_ctz(members) : 0;
  uint64_t *d =
      in.dst[0] != kNoSlot ? r + static_cast<size_t>(in.dst[0]) * 32 : nullptr;
  uint64_t *p = in.numDst > 1 && in.dst[1] != kNoSlot
                    ? r + static_cast<size_t>(in.dst[1]) * 32
                    : nullptr;
  forLanes(exec, [&](unsigned l) {
    if (d)
      d[l] = leader;
    if (p)
      p[l] = members && l == leader;
  });
  return true;
}

} // namespace kiln::runtime::emu::detail

//===- ExecWgmma.cpp - Warpgroup MMA (wgmma) ------------------------------===//
//
// wgmma.mma_async.m64nNk16 (f16, bf16), m64nNk8 (tf32) and m64nNk32
// (e4m3, e5m2, which may mix; K-major only) with f32 accumulators, and
// m64nNk32 s8/u8 with s32 ones (exact, wrapping or .satfinite). A
// warpgroup is four consecutive warps (warps 4g..4g+3); warp i of it holds
// rows 16i..16i+15 of D (and of A from registers) in the mma.m16n8
// fragment layout repeated over N in steps of 8, so each warp computes its
// own rows when it issues the instruction: its part of the product depends
// only on its registers and on the shared-memory matrices both descriptors
// name. Operands come from the PTX ISA's canonical layouts (K-major or,
// with imm-trans, MN-major; no swizzle or 32/64/128-byte swizzle, the
// 16-byte chunk index within the swizzle span XOR the address bits 7 up),
// in units of 16-byte rows of T elements:
//
//   K-major,  none:     ((8,m),(T,2k)):((1T,SBO),(1,LBO))
//   K-major,  swizzled: ((8,m),(T,2k)):((cT,SBO),(1,T))     c = span / 16
//   MN-major, none:     ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
//   MN-major, swizzled: ((T,c,m),(8,k)):((1,T,LBO),(cT,SBO))
//
// Products are exact in double (fp8 products have at most 8 significant
// bits); D is rounded to f32 once per instruction. Real fp8 tensor cores
// accumulate with fewer bits than that: the emulator is the
// exact-then-rounded reference. The result is written when the instruction
// issues, but the accumulators (and A registers) stay in flight until the
// wgmma.wait_group that retires the group: any other instruction that
// reads or writes them before is a fault, as is a wgmma reading shared
// memory a cp.async or bulk copy has not yet written.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

#include <algorithm>

namespace kiln::runtime::emu::detail {

namespace {

/// A decoded shared-memory matrix descriptor.
struct MatrixDescriptor {
  uint64_t start = 0, leading = 0, stride = 0;
  unsigned baseOffset = 0;
  /// Swizzle span in bytes (0: none).
  unsigned span = 0;

  explicit MatrixDescriptor(uint64_t desc) {
    start = (desc & 0x3fff) << 4;
    leading = ((desc >> 16) & 0x3fff) << 4;
    stride = ((desc >> 32) & 0x3fff) << 4;
    baseOffset = (desc >> 49) & 7;
    static constexpr unsigned kSpans[4] = {0, 128, 64, 32};
    span = kSpans[desc >> 62];
  }

  /// The shared-memory byte address of element (mn, k) of `elem` bytes.
  uint64_t address(uint64_t mn, uint64_t k, uint64_t elem, bool mnMajor) const {
    const uint64_t t = 16 / elem; // elements per 16-byte row
    uint64_t offset;
    if (!mnMajor) {
      if (span == 0)
        offset = (mn % 8) * 16 + (mn / 8) * stride + (k % t) * elem +
                 (k / t) * leading;
      else
        offset = (mn % 8) * span + (mn / 8) * stride + k * elem;
    } else {
      if (span == 0) {
        offset = (mn % t) * elem + (mn / t) * stride + (k % 8) * 16 +
                 (k / 8) * leading;
      } else {
        uint64_t c = span / 16;
        offset = (mn % t) * elem + ((mn / t) % c) * 16 +
                 (mn / (c * t)) * leading + (k % 8) * span + (k / 8) * stride;
      }
    }
    uint64_t a = start + offset;
    if (span)
      a ^= ((a >> 7) & (span / 16 - 1)) << 4;
    return a;
  }
};

double elementValue(const uint8_t *p, Type type) {
  if (type == Type::S8)
    return static_cast<int8_t>(*p);
  if (type == Type::U8)
    return *p;
  if (type == Type::E4M3 || type == Type::E5M2)
    return fp8ToDouble(*p, type == Type::E5M2);
  if (type == Type::TF32) {
    uint32_t bits;
    std::memcpy(&bits, p, 4);
    return bitsTo<float>(bits & 0xffffe000u); // the upper 19 bits
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return type == Type::BF16 ? bf16ToFloat(h) : halfToFloat(h);
}

} // namespace

bool BlockRunner::wgmma(unsigned w, uint32_t pc, const Instruction &in,
                        uint32_t exec) {
  WarpState &ws = warps[w];
  uint64_t *r = warpRegs(w);
  switch (WgmmaOp(in.subop)) {
  case WgmmaOp::Fence:
    return true;
  case WgmmaOp::Commit:
    // Every uncommitted wgmma of the warp forms a group (possibly empty).
    for (WgmmaPending &p : wgmmaPending[w])
      if (p.group == UINT32_MAX)
        p.group = wgmmaCommitted[w];
    ++wgmmaCommitted[w];
    if (raceCheck)
      raceCheck->wgmmaCommit(w);
    return true;
  case WgmmaOp::Wait: {
    uint32_t keep = static_cast<uint32_t>(
        r[static_cast<size_t>(in.src[0]) * 32 +
          (exec ? __builtin_ctz(exec) : 0)]);
    retireWgmma(w, keep);
    if (raceCheck)
      raceCheck->wgmmaWait(w, exec, keep);
    return true;
  }
  case WgmmaOp::MmaAsync:
    break;
  }
  if (exec != kFullMask)
    return fault(w, exec ? __builtin_ctz(~exec) : 0, pc,
                 "wgmma.mma_async is .sync.aligned: all 32 lanes of the "
                 "warp must execute it");
  unsigned group = w / 4;
  if (group * 4 + 3 >= numWarps || threadsPerBlock < (group + 1) * 128)
    return fault(w, 0, pc,
                 fmt::format("wgmma.mma_async needs a whole warpgroup "
                             "(threads {}..{}), the block has {} threads",
                             group * 128, group * 128 + 127, threadsPerBlock));
  const WgmmaInfo &info = kernel.wgmmas[in.target];
  const uint32_t *ops = kernel.operandLists.data();
  auto reg = [&](uint32_t s, unsigned l) -> uint64_t & {
    return r[static_cast<size_t>(s) * 32 + l];
  };
  const unsigned n = info.n, kDim = info.k;
  const uint64_t elem = typeBytes(info.abType); // B's size is the same
  const unsigned rowBase = 16 * (w % 4);
  // The descriptors must be the same in every lane.
  auto uniform = [&](uint32_t s, const char *what, uint64_t &value) {
    value = reg(s, 0);
    for (unsigned l = 1; l < 32; ++l)
      if (reg(s, l) != value)
        return fault(w, l, pc,
                     fmt::format("the {} differs between lanes 0 and {} "
                                 "(0x{:x}, 0x{:x})",
                                 what, l, value, reg(s, l)));
    return true;
  };
  // Shared memory that copies still in flight will write: a wgmma must
  // not read it (the hardware would read the old bytes or the new).
  std::vector<uint8_t> pendingChunk;
  bool anyPending = !pendingBulk.empty();
  for (unsigned v = 0; v < numWarps && !anyPending; ++v)
    anyPending = !pendingCopies[v].empty();
  if (anyPending) {
    pendingChunk.assign(sharedBytes / 16 + 1, 0);
    for (unsigned v = 0; v < numWarps; ++v)
      for (const PendingCopy &c : pendingCopies[v])
        for (uint64_t b = c.sharedOffset / 16;
             b <= (c.sharedOffset + c.size - 1) / 16; ++b)
          pendingChunk[b] = 1;
    for (const PendingBulk &c : pendingBulk)
      for (uint32_t chunk : c.chunks)
        pendingChunk[chunk / 16] = 2;
  }
  auto load = [&](const MatrixDescriptor &desc, uint64_t mn, uint64_t k,
                  bool mnMajor, char which, double &value) {
    const Type type = which == 'A' ? info.abType : info.bType;
    uint64_t a = desc.address(mn, k, elem, mnMajor);
    if (a + elem > sharedBytes)
      return fault(w, 0, pc,
                   fmt::format("wgmma reads {}({}, {}) at shared offset {}, "
                               "past the {} bytes of shared memory",
                               which, mn, k, a, sharedBytes));
    if (anyPending && pendingChunk[a / 16])
      return fault(
          w, 0, pc,
          fmt::format("wgmma reads {}({}, {}) at shared offset {}, "
                      "which a {} copy has not written yet (wait "
                      "for it first)",
                      which, mn, k, a,
                      pendingChunk[a / 16] == 2 ? "bulk/TMA" : "cp.async"));
    if (checkShared && !checkSharedRead(w, 0, pc, a, elem))
      return false;
    if (raceCheck && !raceCheck->wgmmaRead(a, static_cast<unsigned>(elem)))
      return raceFault(w, 0, pc);
    value = elementValue(shared.data() + a, type);
    return true;
  };
  if (raceCheck)
    raceCheck->wgmmaBegin(w, pc);
  // A: this warp's 16 rows by K, as doubles.
  double aValues[16][32];
  if (info.aFromRegisters) {
    for (unsigned l = 0; l < 32; ++l) {
      unsigned g = l / 4, t = l % 4;
      for (unsigned i = 0; i < 4; ++i) {
        uint64_t bits = reg(ops[info.aFirst + i], l);
        if (elem == 1) {
          // The mma.m16n8k32 A fragment: four bytes of row g (+8 for odd
          // i), columns 4t + 16 * (i / 2) + 0..3, byte 0 first.
          for (unsigned e = 0; e < 4; ++e) {
            uint8_t byte = static_cast<uint8_t>(bits >> (8 * e));
            aValues[g + 8 * (i % 2)][4 * t + 16 * (i / 2) + e] =
                elementValue(&byte, info.abType);
          }
        } else if (info.abType == Type::TF32) {
          // a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
          aValues[g + 8 * (i % 2)][t + 4 * (i / 2)] =
              bitsTo<float>(static_cast<uint32_t>(bits) & 0xffffe000u);
        } else {
          // a{2i}, a{2i+1}: row g (+8 for odd i), columns 2t, 2t+1 (+8
          // for i >= 2); the lower half first.
          for (unsigned h = 0; h < 2; ++h) {
            uint16_t half = static_cast<uint16_t>(bits >> (16 * h));
            aValues[g + 8 * (i % 2)][2 * t + h + 8 * (i / 2)] =
                info.abType == Type::BF16 ? bf16ToFloat(half)
                                          : halfToFloat(half);
          }
        }
      }
    }
  } else {
    uint64_t bits;
    if (!uniform(info.aDesc, "A matrix descriptor", bits))
      return false;
    MatrixDescriptor desc(bits);
    if (desc.baseOffset)
      return fault(w, 0, pc,
                   fmt::format("the A descriptor's matrix base offset {} is "
                               "not emulated (0 for canonical layouts)",
                               desc.baseOffset));
    for (unsigned m = 0; m < 16; ++m)
      for (unsigned k = 0; k < kDim; ++k)
        if (!load(desc, rowBase + m, k, info.transA, 'A', aValues[m][k]))
          return false;
  }
  uint64_t bBits;
  if (!uniform(info.bDesc, "B matrix descriptor", bBits))
    return false;
  MatrixDescriptor bDesc(bBits);
  if (bDesc.baseOffset)
    return fault(w, 0, pc,
                 fmt::format("the B descriptor's matrix base offset {} is "
                             "not emulated (0 for canonical layouts)",
                             bDesc.baseOffset));
  // B as N x K (element (n, k) of the K x N matrix).
  std::vector<double> bValues(static_cast<size_t>(n) * kDim);
  for (unsigned col = 0; col < n; ++col)
    for (unsigned k = 0; k < kDim; ++k)
      if (!load(bDesc, col, k, info.transB, 'B', bValues[col * kDim + k]))
        return false;
  const double sign = info.scaleA * info.scaleB;
  // D: register 4j + i of lane (g, t) is row g (+8 for i >= 2), column
  // 8j + 2t + (i & 1).
  for (unsigned l = 0; l < 32; ++l) {
    unsigned g = l / 4, t = l % 4;
    bool accumulate = reg(info.scaleD, l) & 1;
    for (unsigned j = 0; j < n / 8; ++j)
      for (unsigned i = 0; i < 4; ++i) {
        unsigned row = g + 8 * (i / 2), col = 8 * j + 2 * t + (i & 1);
        uint64_t &d = reg(ops[info.dFirst + 4 * j + i], l);
        double sum = 0;
        for (unsigned k = 0; k < kDim; ++k)
          sum += aValues[row][k] * bValues[col * kDim + k];
        if (in.type == Type::S32) {
          // Exact: 32 byte products stay below 2^21. The s32 sum wraps,
          // or with .satfinite clamps.
          int64_t total = static_cast<int64_t>(sum);
          if (accumulate)
            total += static_cast<int32_t>(static_cast<uint32_t>(d));
          if (in.satfinite)
            total = std::clamp<int64_t>(total, INT32_MIN, INT32_MAX);
          d = static_cast<uint32_t>(static_cast<uint64_t>(total));
          continue;
        }
        sum *= sign;
        if (accumulate)
          sum += bitsTo<float>(static_cast<uint32_t>(d));
        d = toBits(static_cast<float>(sum));
      }
  }
  // The registers stay in flight until wait_group retires the wgmma.
  std::vector<uint8_t> &busy = wgmmaBusy[w];
  if (busy.size() < numSlots)
    busy.assign(numSlots, 0);
  for (unsigned i = 0; i < n / 2; ++i)
    busy[ops[info.dFirst + i]] |= 1;
  if (info.aFromRegisters)
    for (unsigned i = 0; i < 4; ++i)
      busy[ops[info.aFirst + i]] |= 2;
  wgmmaPending[w].push_back({UINT32_MAX, pc, in.target});
  ws.wgmmaInFlight = static_cast<uint32_t>(wgmmaPending[w].size());
  return true;
}

void BlockRunner::retireWgmma(unsigned w, uint32_t keepGroups) {
  std::vector<WgmmaPending> &pending = wgmmaPending[w];
  uint32_t committed = wgmmaCommitted[w];
  size_t kept = 0;
  for (const WgmmaPending &p : pending)
    if (p.group == UINT32_MAX || committed - p.group <= keepGroups)
      pending[kept++] = p;
  pending.resize(kept);
  std::vector<uint8_t> &busy = wgmmaBusy[w];
  std::fill(busy.begin(), busy.end(), 0);
  const uint32_t *ops = kernel.operandLists.data();
  for (const WgmmaPending &p : pending) {
    const WgmmaInfo &info = kernel.wgmmas[p.info];
    for (unsigned i = 0; i < info.n / 2; ++i)
      busy[ops[info.dFirst + i]] |= 1;
    if (info.aFromRegisters)
      for (unsigned i = 0; i < 4; ++i)
        busy[ops[info.aFirst + i]] |= 2;
  }
  warps[w].wgmmaInFlight = static_cast<uint32_t>(kept);
}

bool BlockRunner::checkWgmmaRegisters(unsigned w, uint32_t pc,
                                      const Instruction &in, uint32_t exec) {
  const std::vector<uint8_t> &busy = wgmmaBusy[w];
  auto culprit = [&](uint32_t slot, bool accumulator) {
    const uint32_t *ops = kernel.operandLists.data();
    for (const WgmmaPending &p : wgmmaPending[w]) {
      const WgmmaInfo &info = kernel.wgmmas[p.info];
      bool hit = false;
      if (accumulator)
        for (unsigned i = 0; i < info.n / 2; ++i)
          hit |= ops[info.dFirst + i] == slot;
      else if (info.aFromRegisters)
        for (unsigned i = 0; i < 4; ++i)
          hit |= ops[info.aFirst + i] == slot;
      if (hit)
        return code[p.pc].line;
    }
    return 0u;
  };
  auto check = [&](uint32_t slot, bool writes) {
    if (slot == kNoSlot || slot >= busy.size())
      return true;
    uint8_t b = busy[slot];
    if (!(b & 1) && !(writes && (b & 2)))
      return true;
    bool accumulator = b & 1;
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("{} {} register of the wgmma.mma_async at PTX "
                             "line {} before the wgmma.wait_group that "
                             "retires it",
                             writes ? "writes" : "reads",
                             accumulator ? "an accumulator" : "an A",
                             culprit(slot, accumulator)));
  };
  // Instructions whose operands live in operandLists (mma.sync) are
  // checked by their fixed operands only.
  for (unsigned i = 0; i < in.numSrc && i < 5; ++i)
    if (!check(in.src[i], false))
      return false;
  for (unsigned i = 0; i < in.numDst && i < 4; ++i)
    if (!check(in.dst[i], true))
      return false;
  return true;
}

} // namespace kiln::runtime::emu::detail

//===- ExecTensorCore.cpp - ldmatrix, stmatrix and mma.sync ---------------===//
//
// The warp-wide tensor-core instructions: all 32 lanes must be at the
// instruction. Fragments follow the PTX ISA's layout tables; mma.sync
// accumulates in double (f16/bf16/tf32 products are exact there) and
// rounds once when it writes D; the s8/u8 shapes accumulate exactly in
// 64-bit integers and wrap (or, with .satfinite, clamp) to s32; the
// e4m3/e5m2 shape reads the int8 fragments and accumulates like the f16
// ones (in double, one rounding to f32).
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

#include <algorithm>

namespace kiln::runtime::emu::detail {

bool BlockRunner::loadMatrix(unsigned w, uint32_t pc, const Instruction &in,
                             uint32_t exec) {
  if (!exec)
    return true;
  WarpState &ws = warps[w];
  uint32_t all = ws.live;
  if (exec != kFullMask)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("ldmatrix needs all 32 lanes of the warp; lanes "
                             "0x{:08x} are here (live 0x{:08x})",
                             exec, all));
  uint64_t *r = warpRegs(w);
  const uint64_t *base = r + static_cast<size_t>(in.src[0]) * 32;
  // Matrix i's row j comes from the address in lane 8 * i + j.
  uint16_t rows[4][8][8];
  Space space = in.space == Space::Generic ? Space::Generic : Space::Shared;
  for (unsigned i = 0; i < in.vec; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      unsigned lane = 8 * i + j;
      bool isShared = false;
      uint8_t *p = resolve(w, lane, pc, space, base[lane] + in.offset, 16, 16,
                           "ldmatrix row load", &isShared);
      if (!p)
        return false;
      if (isShared && checkShared &&
          !checkSharedRead(w, lane, pc, p - shared.data(), 16))
        return false;
      if (isShared && raceCheck &&
          !raceCheck->read(w * 32 + lane, pc, p - shared.data(), 16))
        return raceFault(w, lane, pc);
      std::memcpy(rows[i][j], p, 16);
    }
  for (unsigned i = 0; i < in.vec; ++i) {
    uint64_t *d = r + static_cast<size_t>(in.dst[i]) * 32;
    for (unsigned t = 0; t < 32; ++t) {
      unsigned row = t / 4, col = 2 * (t % 4);
      uint16_t lo, hi;
      if (in.transpose) {
        lo = rows[i][col][row];
        hi = rows[i][col + 1][row];
      } else {
        lo = rows[i][row][col];
        hi = rows[i][row][col + 1];
      }
      d[t] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
  // Lane 8i + j gives row j of matrix i: one 16-byte row each.
  if (countPerformance)
    countUniformAccess(space, base, in.offset, 16,
                       in.vec == 4 ? kFullMask : (1u << (8 * in.vec)) - 1,
                       /*reads=*/true, /*writes=*/false);
  return true;
}

bool BlockRunner::storeMatrix(unsigned w, uint32_t pc, const Instruction &in,
                              uint32_t exec) {
  if (!exec)
    return true;
  if (exec != kFullMask)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("stmatrix needs all 32 lanes of the warp; lanes "
                             "0x{:08x} are here",
                             exec));
  uint64_t *r = warpRegs(w);
  const uint64_t *base = r + static_cast<size_t>(in.src[0]) * 32;
  // The inverse of ldmatrix: gather each matrix's rows from the fragments,
  // then store row j of matrix i at the address in lane 8 * i + j.
  uint16_t rows[4][8][8];
  for (unsigned i = 0; i < in.vec; ++i) {
    const uint64_t *s = r + static_cast<size_t>(in.src[1 + i]) * 32;
    for (unsigned t = 0; t < 32; ++t) {
      unsigned row = t / 4, col = 2 * (t % 4);
      uint16_t lo = static_cast<uint16_t>(s[t]),
               hi = static_cast<uint16_t>(s[t] >> 16);
      if (in.transpose) {
        rows[i][col][row] = lo;
        rows[i][col + 1][row] = hi;
      } else {
        rows[i][row][col] = lo;
        rows[i][row][col + 1] = hi;
      }
    }
  }
  Space space = in.space == Space::Generic ? Space::Generic : Space::Shared;
  for (unsigned i = 0; i < in.vec; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      unsigned lane = 8 * i + j;
      bool isShared = false;
      uint8_t *p = resolve(w, lane, pc, space, base[lane] + in.offset, 16, 16,
                           "stmatrix row store", &isShared);
      if (!p)
        return false;
      if (isShared && raceCheck &&
          !raceCheck->write(w * 32 + lane, pc, p - shared.data(), 16))
        return raceFault(w, lane, pc);
      std::memcpy(p, rows[i][j], 16);
      if (isShared)
        markSharedWritten(static_cast<uint64_t>(p - shared.data()), 16);
    }
  if (countPerformance)
    countUniformAccess(space, base, in.offset, 16,
                       in.vec == 4 ? kFullMask : (1u << (8 * in.vec)) - 1,
                       /*reads=*/false, /*writes=*/true);
  return true;
}

bool BlockRunner::matrixMultiply(unsigned w, uint32_t pc, const Instruction &in,
                                 uint32_t exec) {
  if (!exec)
    return true;
  if (exec != kFullMask)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("mma.sync needs all 32 lanes of the warp; lanes "
                             "0x{:08x} are here",
                             exec));
  uint64_t *r = warpRegs(w);
  const uint32_t *ops = kernel.operandLists.data() + in.target;
  MmaShape shape = MmaShape(in.subop);
  if (shape == MmaShape::M16N8K32I8 || shape == MmaShape::M16N8K16I8)
    return integerMatrixMultiply(w, in);
  if (shape == MmaShape::M16N8K32F8)
    return fp8MatrixMultiply(w, in);
  const unsigned k =
      shape == MmaShape::M16N8K16F32 || shape == MmaShape::M16N8K16F16 ? 16 : 8;
  const unsigned numD = shape == MmaShape::M16N8K16F16 ? 2 : 4;
  const unsigned numA = shape == MmaShape::M16N8K8F32 ? 2 : 4;
  const unsigned numB = shape == MmaShape::M16N8K8F32 ? 1 : 2;
  const uint32_t *dSlots = ops, *aSlots = ops + numD,
                 *bSlots = ops + numD + numA,
                 *cSlots = ops + numD + numA + numB;
  auto reg = [&](uint32_t s, unsigned lane) {
    return static_cast<uint32_t>(r[static_cast<size_t>(s) * 32 + lane]);
  };
  const bool bf = in.srcType == Type::BF16;
  auto half = [&](uint32_t bits) -> double {
    uint16_t h = static_cast<uint16_t>(bits);
    return bf ? bf16ToFloat(h) : halfToFloat(h);
  };
  double a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    if (shape == MmaShape::M16N8K8Tf32) {
      // a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (t, g),
      // b1 (t+4, g). tf32 reads the upper 19 bits of each f32.
      for (unsigned e = 0; e < 4; ++e)
        a[g + 8 * (e & 1)][t + 4 * (e >> 1)] =
            bitsTo<float>(reg(aSlots[e], lane) & 0xffffe000u);
      for (unsigned e = 0; e < 2; ++e)
        b[t + 4 * e][g] = bitsTo<float>(reg(bSlots[e], lane) & 0xffffe000u);
    } else {
      // Element e of A is half (e & 1) of register e / 2.
      for (unsigned e = 0; e < 2 * numA; ++e) {
        unsigned row = g + 8 * ((e >> 1) & 1);
        unsigned col = 2 * t + (e & 1) + 8 * (e >> 2);
        a[row][col] = half(reg(aSlots[e / 2], lane) >> (16 * (e & 1)));
      }
      for (unsigned e = 0; e < 2 * numB; ++e)
        b[2 * t + (e & 1) + 8 * (e >> 1)][g] =
            half(reg(bSlots[e / 2], lane) >> (16 * (e & 1)));
    }
    // C: c0, c1 at (g, 2t), (g, 2t+1); c2, c3 at (g+8, ...).
    for (unsigned e = 0; e < 4; ++e) {
      unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      if (numD == 2)
        c[row][col] = halfToFloat(
            static_cast<uint16_t>(reg(cSlots[e / 2], lane) >> (16 * (e & 1))));
      else
        c[row][col] = bitsTo<float>(reg(cSlots[e], lane));
    }
  }
  // Products of f16/bf16/tf32 values are exact in a double; the sum is
  // rounded once more when it is stored.
  double dm[16][8];
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double sum = c[i][j];
      for (unsigned q = 0; q < k; ++q)
        sum += a[i][q] * b[q][j];
      dm[i][j] = sum;
    }
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    if (numD == 2) {
      for (unsigned e = 0; e < 2; ++e) {
        uint32_t lo = roundToFormat(dm[g + 8 * e][2 * t], kHalf, Rounding::Rn);
        uint32_t hi =
            roundToFormat(dm[g + 8 * e][2 * t + 1], kHalf, Rounding::Rn);
        r[static_cast<size_t>(dSlots[e]) * 32 + lane] = lo | (hi << 16);
      }
    } else {
      for (unsigned e = 0; e < 4; ++e)
        r[static_cast<size_t>(dSlots[e]) * 32 + lane] =
            toBits(static_cast<float>(dm[g + 8 * (e >> 1)][2 * t + (e & 1)]));
    }
  }
  return true;
}

bool BlockRunner::integerMatrixMultiply(unsigned w, const Instruction &in) {
  // PTX ISA, "Matrix Fragments for mma.m16n8k32" (and .m16n8k16) with .s8 or
  // .u8: each .b32 register of A or B holds four consecutive K elements,
  // byte 0 first. With g = lane >> 2, t = lane & 3:
  //   A register i: row g + 8 * (i & 1), columns 4t + 16 * (i >> 1) + 0..3
  //   B register i: rows 4t + 16 * i + 0..3, column g
  //   C/D element e: row g + 8 * (e >> 1), column 2t + (e & 1)
  // (k16 uses A registers 0, 1 and B register 0 only).
  uint64_t *r = warpRegs(w);
  const uint32_t *ops = kernel.operandLists.data() + in.target;
  const bool k32 = MmaShape(in.subop) == MmaShape::M16N8K32I8;
  const unsigned k = k32 ? 32 : 16, numA = k32 ? 4 : 2, numB = k32 ? 2 : 1;
  const uint32_t *dSlots = ops, *aSlots = ops + 4, *bSlots = ops + 4 + numA,
                 *cSlots = ops + 4 + numA + numB;
  auto reg = [&](uint32_t s, unsigned lane) {
    return static_cast<uint32_t>(r[static_cast<size_t>(s) * 32 + lane]);
  };
  const bool aSigned = in.srcType == Type::S8, bSigned = in.aux != 0;
  auto byteOf = [](uint32_t word, unsigned i, bool isSigned) -> int64_t {
    uint8_t byte = static_cast<uint8_t>(word >> (8 * i));
    return isSigned ? static_cast<int8_t>(byte) : byte;
  };
  int64_t a[16][32] = {}, b[32][8] = {}, c[16][8] = {};
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    for (unsigned i = 0; i < numA; ++i)
      for (unsigned e = 0; e < 4; ++e)
        a[g + 8 * (i & 1)][4 * t + 16 * (i >> 1) + e] =
            byteOf(reg(aSlots[i], lane), e, aSigned);
    for (unsigned i = 0; i < numB; ++i)
      for (unsigned e = 0; e < 4; ++e)
        b[4 * t + 16 * i + e][g] = byteOf(reg(bSlots[i], lane), e, bSigned);
    for (unsigned e = 0; e < 4; ++e)
      c[g + 8 * (e >> 1)][2 * t + (e & 1)] =
          static_cast<int32_t>(reg(cSlots[e], lane));
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    for (unsigned e = 0; e < 4; ++e) {
      unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      int64_t sum = c[row][col];
      for (unsigned q = 0; q < k; ++q)
        sum += a[row][q] * b[q][col];
      if (in.satfinite)
        sum = std::clamp<int64_t>(sum, INT32_MIN, INT32_MAX);
      r[static_cast<size_t>(dSlots[e]) * 32 + lane] =
          static_cast<uint32_t>(static_cast<uint64_t>(sum));
    }
  }
  return true;
}

bool BlockRunner::fp8MatrixMultiply(unsigned w, const Instruction &in) {
  // PTX ISA, "Matrix Fragments for mma.m16n8k32" with .e4m3 or .e5m2: the
  // s8/u8 layout (see integerMatrixMultiply), one byte per element.
  uint64_t *r = warpRegs(w);
  const uint32_t *ops = kernel.operandLists.data() + in.target;
  const uint32_t *dSlots = ops, *aSlots = ops + 4, *bSlots = ops + 8,
                 *cSlots = ops + 10;
  auto reg = [&](uint32_t s, unsigned lane) {
    return static_cast<uint32_t>(r[static_cast<size_t>(s) * 32 + lane]);
  };
  const bool aE5m2 = in.srcType == Type::E5M2, bE5m2 = in.aux != 0;
  auto byteOf = [](uint32_t word, unsigned i, bool e5m2) {
    return fp8ToDouble(static_cast<uint8_t>(word >> (8 * i)), e5m2);
  };
  double a[16][32] = {}, b[32][8] = {}, c[16][8] = {};
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    for (unsigned i = 0; i < 4; ++i)
      for (unsigned e = 0; e < 4; ++e)
        a[g + 8 * (i & 1)][4 * t + 16 * (i >> 1) + e] =
            byteOf(reg(aSlots[i], lane), e, aE5m2);
    for (unsigned i = 0; i < 2; ++i)
      for (unsigned e = 0; e < 4; ++e)
        b[4 * t + 16 * i + e][g] = byteOf(reg(bSlots[i], lane), e, bE5m2);
    for (unsigned e = 0; e < 4; ++e)
      c[g + 8 * (e >> 1)][2 * t + (e & 1)] =
          bitsTo<float>(reg(cSlots[e], lane));
  }
  // Each product of two fp8 values has at most 8 significant bits, so it is
  // exact in a double; the sum is rounded to f32 once.
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    for (unsigned e = 0; e < 4; ++e) {
      unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      double sum = c[row][col];
      for (unsigned q = 0; q < 32; ++q)
        sum += a[row][q] * b[q][col];
      r[static_cast<size_t>(dSlots[e]) * 32 + lane] =
          toBits(static_cast<float>(sum));
    }
  }
  return true;
}

} // namespace kiln::runtime::emu::detail

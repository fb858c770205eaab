//===- GemmHeuristic.cpp - Candidate configs and a GPU-free choice --------===//
//
// The candidates are a fixed menu of block tiles per family (big square
// tiles for throughput, narrow ones for small M or N), each also with split-K
// when the problem has fewer output tiles than the GPU has SMs. Without a GPU
// to time them, a roofline-style estimate ranks them:
//
//   a block's time  = pipeline fill + K tiles x max(compute, shared, global)
//                     + the epilogue's stores
//   compute         = 2 BM BN BK / (the SM's tensor-core FLOPs per cycle);
//                     for FFMA, the instructions a thread issues per k
//                     (TM TN FFMAs, (TM+TN)/4 shared loads, 2 more) at 128
//                     lanes a cycle
//   shared          = the bytes the warps read for their fragments / 128 B
//   global          = (BM + BN) BK input bytes / the SM's share of L2
//   the GPU's time  = ceil(blocks / SMs) x a block's time / latency hiding
//
// where latency hiding (0..1] grows with the warps resident on an SM (8
// warps of mma.sync, 16 of FFMA, hide the pipeline's latency), resident
// blocks are limited by shared memory, registers and threads, and split-K
// adds the partials' workspace traffic and, per output tile, the last
// split's atomic round trip and reduction of the tile (SplitKReduce.cuh;
// no second launch). The SM count and the
// per-SM limits are the target's (TargetInfo.h, runtime/targets/gpus.ini);
// the throughput figures are per SM per cycle, H100/A100 class: tensor
// cores through mma.sync 2048 (f16/bf16), 4096 (int8 ops and fp8) and 1024
// (tf32) FLOPs, through
// wgmma 4096 (f16/bf16: H100's 989 TFLOP/s dense over its SMs at 1.83 GHz,
// twice what mma.sync reaches) and 8192 (fp8: twice f16's, H100's 1979
// TFLOP/s dense), FFMA 256, shared memory 128 B, L2 ~32 B,
// and tf32 at half the f16 rate (wgmma 2048:
// H100's 494 TFLOP/s dense tf32). For wgmma 4 consumer warps hide the latency
// (the MMAs are asynchronous and a producer warpgroup keeps the ring full), and
// the shared traffic is each consumer's A rows plus the whole B tile. On
// sm_90 the bf16/fp16 list is the wgmma candidates, then the mma.sync ones,
// and the tf32 and fp8 lists likewise (GemmConfig::Family order, not the
// estimate, decides between families). The estimate only has to order
// candidates; autotuning on a GPU replaces it.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include "kiln/Target/CUDA/TargetInfo.h"

#include <algorithm>
#include <cmath>

namespace kiln::contraction {
namespace {

struct Machine {
  double sms, flopsPerCycle, sharedBytesPerCycle = 128, l2BytesPerCycle = 32;
  double maxSharedPerSm;
  /// An atomic on a semaphore in L2 and the fences around it.
  double atomicRoundTripCycles = 1000;
  /// Per-SM and per-thread limits (TargetInfo.h).
  double maxThreadsPerSm, registersPerSm, maxBlocksPerSm, maxRegisters;
};

Machine machineFor(uint32_t smVersion, Family family) {
  const TargetInfo &target = TargetInfo::forSm(smVersion);
  Machine m;
  m.sms = target.smCount();
  m.maxSharedPerSm = target.sharedBytesPerSm();
  m.maxThreadsPerSm = target.maxThreadsPerSm();
  m.registersPerSm = target.registersPerSm();
  m.maxBlocksPerSm = target.maxBlocksPerSm();
  m.maxRegisters = target.maxRegistersPerThread();
  m.flopsPerCycle = family == Family::WgmmaF8 || family == Family::WgmmaS8
                        ? 8192
                    : family == Family::WgmmaF16  ? 4096
                    : family == Family::MmaS8     ? 4096
                    : family == Family::MmaF8     ? 4096
                    : family == Family::MmaF16    ? 2048
                    : family == Family::WgmmaTf32 ? 2048
                    : family == Family::MmaTf32   ? 1024
                                                  : 256;
  return m;
}

/// Registers a thread needs, roughly: accumulators, fragments, addresses.
double registersPerThread(const GemmConfig &c) {
  if (c.family == Family::SimtF32)
    return c.threadM * c.threadN + c.threadM + c.threadN + 40;
  if (isWgmma(c.family)) // BN/2 accumulators a consumer thread
    return c.blockN / 2.0 + 40;
  double mi = c.warpM / 16.0, ni = c.warpN / 8.0;
  return mi * ni * 4 + mi * 4 + ni * 2 + 40;
}

double estimateCycles(const GemmProblem &p, const GemmConfig &c,
                      uint32_t smVersion) {
  Machine mc = machineFor(smVersion, c.family);
  GemmPlan plan = planGemm(p, c);
  double threads = c.threads();
  double regs = std::min(mc.maxRegisters, registersPerThread(c));
  double residentBlocks = std::min(
      {std::floor(mc.maxSharedPerSm / std::max(1u, plan.sharedBytes)),
       std::floor(mc.maxThreadsPerSm / threads),
       std::floor(mc.registersPerSm / (regs * threads)), mc.maxBlocksPerSm});
  if (residentBlocks < 1)
    return INFINITY;
  double blocks = double(plan.grid.x) * plan.grid.y * plan.grid.z;
  double blocksPerSm = std::ceil(blocks / mc.sms);
  double resident = std::min(residentBlocks, blocksPerSm);
  double warps = resident * threads / 32;
  // wgmma's asynchronous MMAs and its producer hide latency with fewer
  // warps: 4 consumer warps are enough.
  double hiding = std::min(1.0, warps / (c.family == Family::SimtF32 ? 16.0
                                         : isWgmma(c.family)          ? 4.0
                                                                      : 8.0));

  double bk = c.blockK, bm = c.blockM, bn = c.blockN;
  // FFMA kernels are bound by issue: per k a thread issues TM*TN FFMAs,
  // (TM+TN)/4 vector shared loads and ~2 more, at 128 lanes a cycle.
  double compute =
      c.family == Family::SimtF32
          ? threads * bk *
                (c.threadM * c.threadN + (c.threadM + c.threadN) / 4.0 + 2) /
                128
          : 2 * bm * bn * bk / mc.flopsPerCycle;
  // wgmma reads each consumer's A rows and the whole B tile once a K tile.
  double sharedBytes =
      c.family == Family::SimtF32
          ? threads * (c.threadM + c.threadN) * 4 * bk /
                2 // float4, halved by broadcast
      : isWgmma(c.family)
          ? (bm / 64) * (64 + bn) * bk * plan.inBytes
          : (threads / 32) * (c.warpM + c.warpN) * bk * plan.inBytes;
  double shared = sharedBytes / mc.sharedBytesPerCycle;
  double global = (bm + bn) * bk * plan.inBytes / mc.l2BytesPerCycle;
  double perTile = std::max({compute, shared, global});
  double outBytes = bm * bn * (c.splitK > 1 ? 4 : plan.outBytes);
  double block =
      600 + plan.kTilesPerSplit * perTile + outBytes / mc.l2BytesPerCycle;
  double total = blocksPerSm * block / hiding;
  if (c.splitK > 1) {
    // The last split of each output tile reads the tile's partials back
    // from L2 and stores C; the tiles' last blocks are spread over the SMs.
    double tiles = std::ceil(double(p.m) / bm) * std::ceil(double(p.n) / bn) *
                   double(p.batch);
    total += std::ceil(tiles / mc.sms) *
             (mc.atomicRoundTripCycles +
              bm * bn * (c.splitK * 4 + plan.outBytes) / mc.l2BytesPerCycle);
  }
  return total;
}

struct Tile {
  uint32_t bm, bn, bk, wm, wn, stages;
};

} // namespace

namespace {

/// wgmma tiles {BM, BN, stages}: the largest ring that fits 227 KiB. The
/// K tile is one 128-byte row: 64 f16/bf16, 32 tf32 or 128 fp8 elements,
/// so a stage has the same bytes in every family.
std::vector<GemmConfig> wgmmaBase(Family family) {
  const uint32_t tiles[][3] = {{128, 256, 4}, {128, 128, 5}, {64, 256, 5},
                               {128, 64, 6},  {64, 128, 6},  {64, 64, 8}};
  std::vector<GemmConfig> base;
  for (const auto &t : tiles) {
    GemmConfig c;
    c.family = family;
    c.blockM = t[0], c.blockN = t[1];
    c.blockK = family == Family::WgmmaTf32                              ? 32
               : family == Family::WgmmaF8 || family == Family::WgmmaS8 ? 128
                                                                        : 64;
    c.warpM = 64, c.warpN = t[1], c.stages = t[2];
    base.push_back(c);
  }
  return base;
}

} // namespace

std::vector<GemmConfig> candidateConfigs(const GemmProblem &p, Family family,
                                         uint32_t smVersion, bool wgmma,
                                         bool tma) {
  if ((family == Family::MmaF16 || family == Family::MmaTf32 ||
       family == Family::MmaF8 || family == Family::MmaS8) &&
      smVersion == 90 && wgmma) {
    // wgmma first (each list ranked by the estimate), mma.sync after it;
    // TMA producers for f16/bf16 only (see the TMA list below).
    Family async = family == Family::MmaF16  ? Family::WgmmaF16
                   : family == Family::MmaF8 ? Family::WgmmaF8
                   : family == Family::MmaS8 ? Family::WgmmaS8
                                             : Family::WgmmaTf32;
    std::vector<GemmConfig> all =
        candidateConfigs(p, async, smVersion, false, tma);
    std::vector<GemmConfig> sync =
        candidateConfigs(p, family, smVersion, false);
    all.insert(all.end(), sync.begin(), sync.end());
    return all;
  }
  std::vector<GemmConfig> base;
  if (family == Family::SimtF32) {
    // {BM, BN, BK, TM, TN, stages}
    const Tile tiles[] = {{128, 128, 8, 8, 8, 3}, {128, 64, 8, 8, 8, 3},
                          {64, 128, 8, 8, 8, 3},  {64, 64, 16, 4, 4, 3},
                          {64, 64, 8, 8, 8, 3},   {128, 32, 16, 4, 4, 3},
                          {32, 128, 16, 4, 4, 3}, {32, 32, 16, 4, 4, 3}};
    for (const Tile &t : tiles) {
      GemmConfig c;
      c.family = family;
      c.blockM = t.bm, c.blockN = t.bn, c.blockK = t.bk;
      c.threadM = t.wm, c.threadN = t.wn, c.stages = t.stages;
      base.push_back(c);
    }
  } else if (isWgmma(family)) {
    if (smVersion != 90)
      return {};
    base = wgmmaBase(family);
  } else {
    bool tf32 = family == Family::MmaTf32;
    bool int8 = family == Family::MmaS8 || family == Family::MmaF8;
    // {BM, BN, BK, WTM, WTN, stages}; tf32 halves BK to keep rows 64-128 B;
    // int8 and fp8 take 64 (64-byte rows, two m16n8k32 steps).
    const Tile tiles[] = {{128, 256, 32, 64, 64, 3}, {256, 128, 32, 64, 64, 3},
                          {128, 128, 32, 64, 64, 4}, {128, 64, 32, 64, 32, 4},
                          {64, 128, 32, 32, 64, 4},  {64, 64, 32, 32, 32, 4},
                          {64, 64, 64, 32, 32, 3},   {128, 16, 64, 32, 16, 4},
                          {16, 128, 64, 16, 32, 4},  {32, 32, 64, 16, 16, 4}};
    for (const Tile &t : tiles) {
      GemmConfig c;
      c.family = family;
      c.blockM = t.bm, c.blockN = t.bn;
      c.blockK = tf32 ? t.bk / 2 : int8 ? 64 : t.bk;
      c.warpM = t.wm, c.warpN = t.wn, c.stages = t.stages;
      base.push_back(c);
    }
  }

  Machine mc = machineFor(smVersion, family);
  std::vector<GemmConfig> all;
  for (const GemmConfig &c : base) {
    if (!unsupportedReason(p, c).empty())
      continue;
    all.push_back(c);
    // Split K when the output tiles leave SMs idle and K is long enough
    // that each split keeps at least 4 K tiles.
    GemmPlan plan = planGemm(p, c);
    double tiles = double(plan.grid.x) * plan.grid.y * plan.grid.z;
    for (uint32_t split : {2u, 4u, 8u, 16u}) {
      if (tiles * split > 2 * mc.sms || plan.kTiles < 4u * split)
        break;
      GemmConfig s = c;
      s.splitK = split;
      if (unsupportedReason(p, s).empty())
        all.push_back(s);
    }
  }
  // A wgmma ring deeper than a split's K tiles only costs shared memory
  // (and residency): trim it to the tiles, at least 2.
  for (GemmConfig &c : all)
    if (isWgmma(c.family)) {
      uint64_t tiles = planGemm(p, c).kTilesPerSplit;
      c.stages = static_cast<uint32_t>(
          std::max<uint64_t>(2, std::min<uint64_t>(c.stages, tiles)));
    }
  auto fits = [&](const GemmConfig &c) {
    return planGemm(p, c).sharedBytes <= maxSharedBytesPerBlock(smVersion);
  };
  all.erase(std::remove_if(all.begin(), all.end(),
                           [&](const GemmConfig &c) { return !fits(c); }),
            all.end());
  std::stable_sort(all.begin(), all.end(),
                   [&](const GemmConfig &a, const GemmConfig &b) {
                     return estimateCycles(p, a, smVersion) <
                            estimateCycles(p, b, smVersion);
                   });
  if (family != Family::WgmmaF16 || !tma || !tmaUnsupportedReason(p).empty())
    return all;
  // The estimate does not model the producer: each tile with TMA first (one
  // thread issues a stage's copies, no per-row address arithmetic, edges
  // filled by the copy engine), then the same tile with cp.async, so the
  // tuner times both.
  std::vector<GemmConfig> withTma;
  for (const GemmConfig &c : all) {
    GemmConfig t = c;
    t.tma = true;
    if (unsupportedReason(p, t).empty())
      withTma.push_back(t);
    withTma.push_back(c);
  }
  return withTma;
}

GemmConfig pickConfig(const GemmProblem &p, Family family, uint32_t smVersion,
                      bool wgmma, bool tma) {
  std::vector<GemmConfig> candidates =
      candidateConfigs(p, family, smVersion, wgmma, tma);
  if (candidates.empty()) {
    GemmConfig c;
    c.family = family;
    return c;
  }
  return candidates.front();
}

} // namespace kiln::contraction

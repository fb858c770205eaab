//===- AttentionWgmma.cuh - sm_90a flash attention on wgmma (bf16/f16) ----===//
//
// One block owns Cfg::BM = 64 * CONSUMERS query rows of one (batch, head);
// its warpgroups (128 threads) have two roles, as in GemmWgmma.cuh:
//   - warpgroup 0, the producer, streams the K and V tiles (BN = 64 keys)
//     through a STAGES-deep ring with cp.async: it waits on a stage's
//     `empty` mbarrier, issues the copies (keys past SK and columns past the
//     head dimension zero-filled), and `cp.async.mbarrier.arrive.noinc`
//     completes the stage's `full` mbarrier when they have landed (operands
//     only 2-byte aligned are copied through registers, then the producer
//     arrives itself).
//   - warpgroups 1..CONSUMERS each own 64 query rows. Per key tile:
//       S = Q K^T: wgmma m64n64k16 with Q (copied once, by every thread,
//         before the roles split) and K from 128B-swizzled K-major
//         descriptors, D/16 instructions into 32 fp32 registers a thread;
//       the scores (kilnScore: scale, masks) and the online softmax on that
//         fragment in registers, as Attention.cuh's tc:: kernel does (the
//         wgmma accumulator fragment of warp w is the mma.sync m16n8 one of
//         rows 16w..16w+15);
//       O += P V: P rounded to bf16/f16 in registers is wgmma's A operand
//         from registers (the m16n8 C layout of two adjacent 8-key tiles is
//         the m16k16 A layout), V through an MN-major (transposed)
//         descriptor: V's rows are keys, the product's K dimension.
//     The two products of neighbouring tiles overlap the softmax: per tile
//     t the consumer issues S(t + 1) and P V(t), waits for S(t + 1) alone
//     (groups retire in order) and runs its softmax while P V(t) is on the
//     tensor cores, then waits for P V(t), hands stage t back (`empty`,
//     count: every consumer thread), rescales O (skipped by a warp none
//     of whose rows' maxima grew) and packs P(t + 1).
//   - with two consumers `setmaxnreg` moves registers from the producer to
//     the consumers (56 / 224 a thread, as the GEMM).
//
// Shared memory (1024-byte aligned) holds every tile as 64-row blocks of
// 64 columns, 128 bytes a row, 16-byte chunk c of row r at chunk c ^ (r % 8)
// (the canonical 128B swizzle): for Q and K the columns are the head
// dimension (K-major: a k16 step moves 32 bytes inside a block, every
// fourth step to the next 8 KiB block), for V the value columns (MN-major:
// the descriptor's leading offset is the 8 KiB block, its stride the
// 1024-byte 8-row atom; a k16 step is 16 key rows, 2 KiB). Q and K rows are
// DQK = D rounded up to 64 columns wide, V rows NV = DV rounded up to 64
// (the product's N; the zero-filled columns are not stored).
//
// Cfg and the two generated instructions (wgmmaScores, wgmmaValues) come
// from AttentionSource.cpp. This file is compiled after Attention.cuh.
//
//===----------------------------------------------------------------------===//

namespace wga {

constexpr int kConsumers = Cfg::CONSUMERS;
constexpr int kProducerThreads = 128;
constexpr int kSAccs = Cfg::BN / 2; // S accumulators a consumer thread
constexpr int kOAccs = Cfg::NV / 2; // O accumulators a consumer thread
constexpr u32 kQBytes = 64 * Cfg::DQK * 2; // one consumer's Q rows
constexpr u32 kKBytes = Cfg::BN * Cfg::DQK * 2;
constexpr u32 kVBytes = Cfg::BN * Cfg::NV * 2;
constexpr u32 kStageBytes = kKBytes + kVBytes;
static_assert(Cfg::BN == 64, "the swizzled blocks are 64 rows");

/// Byte offset of chunk `chunk` (8 elements) of row `row` in a tile of
/// 64-row, 64-column blocks.
KILN_INLINE u32 chunkOffset(int row, int chunk) {
  return (u32)((chunk >> 3) * 8192 + row * 128 +
               (((chunk & 7) ^ (row & 7)) << 4));
}

/// Copies rows [row0, row0 + 64) of an operand (Cols valid elements a row,
/// rows `ld` elements apart) into a tile whose rows are Width columns: the
/// columns past Cols and the rows at or past `limit` are zero-filled (every
/// 16-byte chunk of a 128-byte row is written, so a warp's copies cover all
/// banks once). `Threads` threads starting at `tid` share the work.
template <int Cols, int Width, int Vec, int Threads>
KILN_INLINE void loadTile(u32 tile, const char *base, i64 ld, int row0,
                          int limit, int tid) {
  constexpr int kChunks = Width / 8;
  constexpr int kTotal = 64 * kChunks;
#pragma unroll 4
  for (int q = tid; q < kTotal; q += Threads) {
    int r = q / kChunks, c = q % kChunks;
    int valid = row0 + r < limit ? Cols - c * 8 : 0;
    valid = valid < 0 ? 0 : valid > 8 ? 8 : valid;
    const char *src =
        valid > 0 ? base + ((i64)(row0 + r) * ld + c * 8) * 2 : base;
    copyChunk<2, Vec>(tile + chunkOffset(r, c), src, base, valid);
  }
}

/// A copy narrower than 4 bytes goes through registers (no cp.async).
constexpr bool kRegisterCopies = Cfg::VEC_K == 1 || Cfg::VEC_V == 1;

// mbarrier, proxy fence, descriptors and wgmma fences: Sm90.cuh.
using namespace sm90;

/// Keeps the compiler from moving accumulator accesses across the
/// asynchronous MMAs that own the registers.
template <int N> KILN_INLINE void fenceRegisters(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(acc[i])::"memory");
}
/// The descriptor offset (in 16 bytes) of k16 step `ks` of a K-major tile.
KILN_INLINE u64 kMajorStep(int ks) {
  return (u64)(((ks >> 2) * 8192 + (ks & 3) * 32) >> 4);
}

KILN_INLINE u32 pack(float lo, float hi) {
  return Cfg::BF16 ? packBf16(lo, hi) : packF16(lo, hi);
}

/// Stores output elements i and i + 1 (i even, so the pair is aligned) as
/// one 8- or 4-byte store of the output dtype (codes as in storeOut).
KILN_INLINE void storePair(void *out, i64 i, float v0, float v1) {
  if (Cfg::OUT_CODE == kElementF32)
    *(float2 *)((float *)out + i) = make_float2(v0, v1);
  else
    *(u32 *)((u16 *)out + i) =
        Cfg::OUT_CODE == kElementF16 ? packF16(v0, v1) : packBf16(v0, v1);
}

/// The scores of a consumer thread's 32 S accumulators (accumulator
/// 4j + 2h + e: row rowBase + 8h, key n0 + 8j + 2t + e): kilnScore, and on
/// a tile at the edge (Edge) -inf past the last key and 0 past the last
/// query row (whose mask operands may not exist).
template <bool Edge>
KILN_INLINE void scores(float (&sc)[kSAccs], unsigned batch, int rowBase,
                        int n0, int t, const ScoreArgs &sa) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = rowBase + 8 * h;
#pragma unroll
    for (int j = 0; j < Cfg::BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = n0 + 8 * j + 2 * t + e;
        float &x = sc[4 * j + 2 * h + e];
        if (!Edge)
          x = kilnScore(batch, row, col, x, sa);
        else
          x = col >= (int)Cfg::SK ? kNegInf
              : row < (int)Cfg::SQ ? kilnScore(batch, row, col, x, sa)
                                   : 0.0f;
      }
  }
}

/// Issues S = Q K^T of the tile in `stage` into `sc` (one commit group).
KILN_INLINE void issueScores(float (&sc)[kSAccs], u64 descQ, u32 stage) {
  const u64 descK = descriptor(stage, 16, 1024);
  fenceRegisters(sc);
  wgmmaFence();
#pragma unroll
  for (int ks = 0; ks < Cfg::D / 16; ++ks)
    wgmmaScores(sc, descQ + kMajorStep(ks), descK + kMajorStep(ks),
                ks > 0 ? 1u : 0u);
  wgmmaCommit();
}

/// Issues O += P V of the tile in `stage` (one commit group): keys
/// 16kk..16kk+15 of P are A registers, V a transposed descriptor 16 key
/// rows (2 KiB) on per step.
KILN_INLINE void issueValues(float (&o)[kOAccs], const u32 (&a)[Cfg::BN / 16][4],
                             u32 stage) {
  const u64 descV = descriptor(stage + kKBytes, 8192, 1024);
  fenceRegisters(o);
  wgmmaFence();
#pragma unroll
  for (int kk = 0; kk < Cfg::BN / 16; ++kk)
    wgmmaValues(o, a[kk], descV + (u64)((kk * 2048) >> 4));
  wgmmaCommit();
  fenceRegisters(o);
}

/// The scores of key tile n0 (the edge checks only on the last key tile
/// and the last query block, when the lengths are not tile multiples),
/// then the online softmax of rows g and g + 8: `sc` becomes P (fp32), the
/// running max and sum move on, and alpha[h] is what O must be scaled by.
KILN_INLINE void softmaxTile(float (&sc)[kSAccs], float (&mRow)[2],
                             float (&lRow)[2], float (&alpha)[2],
                             unsigned batch, int m0, int rowBase, int n0, int t,
                             const ScoreArgs &sa) {
  const bool edge = (Cfg::SK % Cfg::BN != 0 && n0 + Cfg::BN > (int)Cfg::SK) ||
                    (Cfg::SQ % Cfg::BM != 0 && m0 + Cfg::BM > (int)Cfg::SQ);
  if (edge)
    scores<true>(sc, batch, rowBase, n0, t, sa);
  else
    scores<false>(sc, batch, rowBase, n0, t, sa);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = kNegInf;
#pragma unroll
    for (int j = 0; j < Cfg::BN / 8; ++j)
      mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * h], sc[4 * j + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mNew = fmaxf(mRow[h], mx);
    const float mUse = mNew == kNegInf ? 0.0f : mNew;
    // An unchanged maximum scales O by exactly 1 (the rescale is skipped).
    alpha[h] = mNew == mRow[h]
                   ? 1.0f
                   : flash::exp2Approx((mRow[h] - mUse) * flash::kLog2e);
    // exp(x - m) = 2^(x log2e - m log2e): one FFMA and one ex2 a score.
    const float mLog2 = mUse * flash::kLog2e;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < Cfg::BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float &x = sc[4 * j + 2 * h + e];
        x = flash::exp2Approx(fmaf(x, flash::kLog2e, -mLog2));
        sum += x;
      }
    lRow[h] = lRow[h] * alpha[h] + sum;
    mRow[h] = mNew;
  }
}

/// P (fp32 in `sc`) rounded to the input type as wgmma's A registers: the
/// m16n8 C layout of keys 16kk..16kk+7 and 16kk+8..16kk+15 is the m16k16 A
/// layout.
KILN_INLINE void packP(const float (&sc)[kSAccs], u32 (&a)[Cfg::BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
    a[kk][0] = pack(sc[8 * kk], sc[8 * kk + 1]);
    a[kk][1] = pack(sc[8 * kk + 2], sc[8 * kk + 3]);
    a[kk][2] = pack(sc[8 * kk + 4], sc[8 * kk + 5]);
    a[kk][3] = pack(sc[8 * kk + 6], sc[8 * kk + 7]);
  }
}

KILN_INLINE void attention(const void *qPtr, const void *kPtr,
                           const void *vPtr, void *oPtr, const ScoreArgs &sa,
                           const OutputArgs &oa) {
  extern __shared__ __align__(1024) unsigned char sharedBytes[];
  // Swizzling works on address bits: the tiles start 1024-byte aligned.
  const u32 shared = (sharedAddress(sharedBytes) + 1023) & ~1023u;
  const u32 tileQ = shared;
  const u32 stages = tileQ + kConsumers * kQBytes;
  const u32 fullBars = stages + Cfg::STAGES * kStageBytes;
  const u32 emptyBars = fullBars + 8 * Cfg::STAGES;

  const int warpgroup = threadIdx.x / 128;
  const int m0 = blockIdx.x * Cfg::BM;
  const flash::Operands p = flash::operandsOf(qPtr, kPtr, vPtr, oPtr);
  const int tiles = flash::keyTiles(m0);

  // Every thread copies a share of the block's Q rows, once.
#pragma unroll
  for (int c = 0; c < kConsumers; ++c)
    loadTile<Cfg::D, Cfg::DQK, Cfg::VEC_Q, Cfg::THREADS>(
        tileQ + c * kQBytes, p.q, Cfg::Q_SI, m0 + 64 * c, (int)Cfg::SQ,
        (int)threadIdx.x);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::STAGES; ++s) {
      mbarrierInit(fullBars + 8 * s, kProducerThreads);
      mbarrierInit(emptyBars + 8 * s, kConsumers * 128);
    }
  }
  cpAsyncWaitAll();
  fenceProxyAsync();
  __syncthreads();

  if (warpgroup == 0) {
    // --- Producer ---
    if (kConsumers == 2)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
    const int tid = (int)threadIdx.x;
    int s = 0;
    u32 parity = 0;
    for (int kt = 0; kt < tiles; ++kt) {
      if (kt >= Cfg::STAGES)
        mbarrierWait(emptyBars + 8 * s, parity ^ 1);
      const u32 stage = stages + s * kStageBytes;
      const int n0 = kt * Cfg::BN;
      loadTile<Cfg::D, Cfg::DQK, Cfg::VEC_K, kProducerThreads>(
          stage, p.k, Cfg::K_SI, n0, (int)Cfg::SK, tid);
      loadTile<Cfg::DV, Cfg::NV, Cfg::VEC_V, kProducerThreads>(
          stage + kKBytes, p.v, Cfg::V_SI, n0, (int)Cfg::SK, tid);
      if (kRegisterCopies) {
        cpAsyncWaitAll();
        fenceProxyAsync();
        mbarrierArrive(fullBars + 8 * s);
      } else {
        cpAsyncArriveNoinc(fullBars + 8 * s);
      }
      if (++s == Cfg::STAGES)
        s = 0, parity ^= 1;
    }
    cpAsyncWaitAll();
    return;
  }

  // --- Consumers ---
  if (kConsumers == 2)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
  const int consumer = warpgroup - 1;
  const int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4;
  const int g = lane / 4, t = lane % 4;
  const int rowBase = m0 + 64 * consumer + 16 * w + g;
  const u64 descQ = descriptor(tileQ + consumer * kQBytes, 16, 1024);

  float o[kOAccs], sc[kSAccs];
#pragma unroll
  for (int i = 0; i < kOAccs; ++i)
    o[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < kSAccs; ++i)
    sc[i] = 0.0f;
  float mRow[2] = {kNegInf, kNegInf}, lRow[2] = {0.0f, 0.0f}, alpha[2];
  u32 a[Cfg::BN / 16][4]; // P of the tile whose P V is next

  // Tile t + 1's S = Q K^T and tile t's P V are in flight together, and
  // the softmax of tile t + 1 runs while P V of tile t does: per tile,
  // issue S(t + 1), issue P V(t), wait for S(t + 1) (groups retire in
  // order), its softmax, wait for P V(t), hand stage t back, rescale O and
  // pack P(t + 1).
  if (tiles > 0) {
    mbarrierWait(fullBars, 0);
    fenceProxyAsync();
    issueScores(sc, descQ, stages);
    wgmmaWait<0>();
    fenceRegisters(sc);
    softmaxTile(sc, mRow, lRow, alpha, p.batch, m0, rowBase, 0, t, sa);
    packP(sc, a);
  }
  int s = 0;
  u32 parity = 0;
  for (int kt = 0; kt < tiles; ++kt) {
    const int next = s + 1 == Cfg::STAGES ? 0 : s + 1;
    const u32 nextParity = next == 0 ? parity ^ 1 : parity;
    const bool more = kt + 1 < tiles;
    if (more) {
      mbarrierWait(fullBars + 8 * next, nextParity);
      fenceProxyAsync();
      issueScores(sc, descQ, stages + next * kStageBytes);
    }
    issueValues(o, a, stages + s * kStageBytes);
    if (more) {
      wgmmaWait<1>();
      fenceRegisters(sc);
      softmaxTile(sc, mRow, lRow, alpha, p.batch, m0, rowBase,
                  (kt + 1) * Cfg::BN, t, sa);
    }
    wgmmaWait<0>();
    fenceRegisters(o);
    mbarrierArrive(emptyBars + 8 * s);
    if (more) {
      // Once the running maxima settle most tiles leave them unchanged: the
      // warp skips the rescale when none of its rows' maxima grew.
      if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int j = 0; j < Cfg::NV / 8; ++j) {
            o[4 * j + 2 * h] *= alpha[h];
            o[4 * j + 2 * h + 1] *= alpha[h];
          }
      }
      packP(sc, a);
    }
    s = next;
    parity = nextParity;
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = lRow[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = rowBase + 8 * h;
    if (row >= (int)Cfg::SQ)
      continue;
    // Columns 2t, 2t + 1 of each 8: one paired store (DV is a multiple of
    // 16, so a pair is inside the row and aligned).
#pragma unroll
    for (int j = 0; j < Cfg::NV / 8; ++j) {
      const int col = 8 * j + 2 * t;
      if (Cfg::NV != Cfg::DV && col >= Cfg::DV)
        continue;
      float v0 = kilnOutput(p.batch, row, col, o[4 * j + 2 * h] * inv, oa);
      float v1 =
          kilnOutput(p.batch, row, col + 1, o[4 * j + 2 * h + 1] * inv, oa);
      storePair(p.o, (i64)row * Cfg::DV + col, v0, v1);
    }
  }
}

} // namespace wga

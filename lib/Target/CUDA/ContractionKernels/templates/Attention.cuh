//===- Attention.cuh - Flash-attention-style fused attention --------------===//
//
// One block owns Cfg::BM query rows of one (batch, head) and streams the
// keys and values through shared memory in tiles of Cfg::BN rows, two
// stages deep (cp.async for tile t + 1 is in flight while tile t is
// computed). Per query row it keeps the running maximum m and sum l of the
// softmax; a tile whose maximum is larger rescales the output accumulators
// by exp(m_old - m_new). Scores live in registers only.
//
//   tc::   bf16/f16. A warp owns 16 query rows. S = Q K^T and O += P V are
//          mma.sync m16n8k16 with fp32 accumulators; the S accumulators are
//          rounded to the input type and used in place as the A fragments
//          of P V (the m16n8 C layout of two adjacent key tiles is the
//          m16k16 A layout). Q and K tiles are read with ldmatrix, V with
//          ldmatrix.trans; all tiles are XOR-swizzled (SwizzledTile).
//   wga::  bf16/f16 on sm_90a: wgmma with a producer warpgroup
//          (AttentionWgmma.cuh).
//   simt:: f32 on CUDA cores. A warp owns BM / WARPS query rows; lane j
//          computes the score of key j of the tile (16-byte shared loads of
//          a swizzled K row), the row's max and sum are warp shuffles, and
//          lane c accumulates output columns c, c + 32, ... from V rows.
//
// The score of each element is kilnScore(batch, row, col, q.k) (the
// region's scale and masks, generated); keys past SK are -inf. Rows whose
// keys are all -inf give 0 (l = 0), not NaN.
//
//===----------------------------------------------------------------------===//

namespace flash {

constexpr float kLog2e = 1.4426950408889634f;
#define kNegInf __int_as_float(0xff800000)

KILN_INLINE float exp2Approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/// Copies rows [row0, row0 + Tile::kRows) of an operand whose rows are `ld`
/// elements apart (Cols valid elements each) into a shared tile; rows at or
/// past `limit` are zero-filled.
template <class Tile, int Cols, int EB, int Vec>
KILN_INLINE void loadRows(u32 tile, const char *base, i64 ld, int row0,
                          int limit) {
  constexpr int kCE = 16 / EB;
  constexpr int kChunks = (Cols + kCE - 1) / kCE;
  constexpr int kTotal = Tile::kRows * kChunks;
#pragma unroll 4
  for (int q = threadIdx.x; q < kTotal; q += Cfg::THREADS) {
    int r = q / kChunks, c = q % kChunks;
    int valid = row0 + r < limit ? Cols - c * kCE : 0;
    valid = valid > kCE ? kCE : valid;
    const char *src =
        valid > 0 ? base + ((i64)(row0 + r) * ld + c * kCE) * EB : base;
    copyChunk<EB, Vec>(tile + Tile::chunkOffset(r, c), src, base, valid);
  }
}

/// The keys a block of query rows [m0, m0 + BM) needs: all, or under a
/// causal mask those up to the last row's diagonal.
KILN_INLINE int keyTiles(int m0) {
  int keys = (int)Cfg::SK;
  if (Cfg::CAUSAL_SKIP) {
    i64 last = (i64)m0 + Cfg::BM - 1 + Cfg::CAUSAL_OFFSET;
    if (last + 1 < keys)
      keys = last < 0 ? 0 : (int)(last + 1);
  }
  return (keys + Cfg::BN - 1) / Cfg::BN;
}

struct Operands {
  const char *q, *k, *v;
  char *o;
  unsigned batch; // outer * HEADS + head
};

KILN_INLINE Operands operandsOf(const void *qPtr, const void *kPtr,
                                const void *vPtr, void *oPtr) {
  Operands p;
  p.batch = blockIdx.y;
  const i64 outer = blockIdx.y / Cfg::HEADS, head = blockIdx.y % Cfg::HEADS;
  p.q = (const char *)qPtr + (outer * Cfg::Q_SO + head * Cfg::Q_SH) * Cfg::EB;
  p.k = (const char *)kPtr +
        (outer * Cfg::K_SO + head / Cfg::K_GROUP * Cfg::K_SH) * Cfg::EB;
  p.v = (const char *)vPtr +
        (outer * Cfg::V_SO + head / Cfg::V_GROUP * Cfg::V_SH) * Cfg::EB;
  p.o = (char *)oPtr + (i64)blockIdx.y * Cfg::SQ * Cfg::DV * Cfg::OUT_BYTES;
  return p;
}

} // namespace flash

// The sm_90 wgmma variant (AttentionWgmma.cuh, compiled after this file)
// uses the flash:: helpers alone.
#if KILN_ATTN_WGMMA
#elif KILN_ATTN_TENSOR_CORES
namespace tc {

using TileQ = SwizzledTile<Cfg::BM, Cfg::DP, 2>;
using TileK = SwizzledTile<Cfg::BN, Cfg::DP, 2>;
using TileV = SwizzledTile<Cfg::BN, Cfg::DVP, 2>;
constexpr int kStageBytes = TileK::kBytes + TileV::kBytes;
constexpr int kNT = Cfg::BN / 8;  // key tiles of 8 in S
constexpr int kOT = Cfg::DV / 8;  // value-column tiles of 8 in O

KILN_INLINE u32 pack(float lo, float hi) {
  return Cfg::BF16 ? packBf16(lo, hi) : packF16(lo, hi);
}

KILN_INLINE void attention(const void *qPtr, const void *kPtr,
                           const void *vPtr, void *oPtr, const ScoreArgs &sa,
                           const OutputArgs &oa) {
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  const u32 shared = sharedAddress(sharedBytes);
  const u32 tileQ = shared, stages = shared + TileQ::kBytes;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.x * Cfg::BM;
  const flash::Operands p = flash::operandsOf(qPtr, kPtr, vPtr, oPtr);
  const int tiles = flash::keyTiles(m0);

  flash::loadRows<TileQ, Cfg::D, 2, Cfg::VEC_Q>(tileQ, p.q, Cfg::Q_SI, m0,
                                               (int)Cfg::SQ);
  if (tiles > 0) {
    flash::loadRows<TileK, Cfg::D, 2, Cfg::VEC_K>(stages, p.k, Cfg::K_SI, 0,
                                                 (int)Cfg::SK);
    flash::loadRows<TileV, Cfg::DV, 2, Cfg::VEC_V>(stages + TileK::kBytes, p.v,
                                                  Cfg::V_SI, 0, (int)Cfg::SK);
  }
  cpAsyncCommit();

  float o[kOT][4];
#pragma unroll
  for (int i = 0; i < kOT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[i][e] = 0.0f;
  float mRow[2] = {kNegInf, kNegInf}, lRow[2] = {0.0f, 0.0f};
  const int rowBase = m0 + warp * 16 + g;

  for (int kt = 0; kt < tiles; ++kt) {
    if (kt + 1 < tiles) {
      u32 next = stages + ((kt + 1) & 1) * kStageBytes;
      int n0 = (kt + 1) * Cfg::BN;
      flash::loadRows<TileK, Cfg::D, 2, Cfg::VEC_K>(next, p.k, Cfg::K_SI, n0,
                                                   (int)Cfg::SK);
      flash::loadRows<TileV, Cfg::DV, 2, Cfg::VEC_V>(
          next + TileK::kBytes, p.v, Cfg::V_SI, n0, (int)Cfg::SK);
    }
    cpAsyncCommit();
    cpAsyncWait<1>();
    __syncthreads();
    const u32 tileK = stages + (kt & 1) * kStageBytes;
    const u32 tileV = tileK + TileK::kBytes;
    const int n0 = kt * Cfg::BN;

    // S = Q K^T for this warp's 16 rows and the tile's BN keys.
    float s[kNT][4];
#pragma unroll
    for (int i = 0; i < kNT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[i][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < Cfg::D / 16; ++ks) {
      u32 a[4];
      ldmatrixX4(a, tileQ + TileQ::offset(warp * 16 + (lane % 16),
                                          ks * 16 + (lane / 16) * 8));
#pragma unroll
      for (int pr = 0; pr < kNT / 2; ++pr) {
        u32 b[4];
        int j = lane / 8;
        ldmatrixX4(b, tileK + TileK::offset(pr * 16 + (lane % 8) + (j >> 1) * 8,
                                            ks * 16 + (j & 1) * 8));
        mmaM16N8K16<Cfg::BF16>(s[2 * pr], a, b[0], b[1]);
        mmaM16N8K16<Cfg::BF16>(s[2 * pr + 1], a, b[2], b[3]);
      }
    }

    // Scores, then the online softmax of rows g and g + 8.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rowBase + 8 * h;
      float mx = kNegInf;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = n0 + nt * 8 + 2 * t + e;
          float v = col >= (int)Cfg::SK ? kNegInf
                    : row < (int)Cfg::SQ
                        ? kilnScore(p.batch, row, col, s[nt][2 * h + e], sa)
                        : 0.0f;
          s[nt][2 * h + e] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mNew = fmaxf(mRow[h], mx);
      const float mUse = mNew == kNegInf ? 0.0f : mNew;
      const float alpha = flash::exp2Approx((mRow[h] - mUse) * flash::kLog2e);
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float pv =
              flash::exp2Approx((s[nt][2 * h + e] - mUse) * flash::kLog2e);
          s[nt][2 * h + e] = pv;
          sum += pv;
        }
      lRow[h] = lRow[h] * alpha + sum;
      mRow[h] = mNew;
#pragma unroll
      for (int ot = 0; ot < kOT; ++ot) {
        o[ot][2 * h] *= alpha;
        o[ot][2 * h + 1] *= alpha;
      }
    }

    // O += P V: the S accumulators of keys 16kk..16kk+15 are P's A fragment.
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk) {
      u32 a[4] = {pack(s[2 * kk][0], s[2 * kk][1]),
                  pack(s[2 * kk][2], s[2 * kk][3]),
                  pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                  pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int pr = 0; pr < kOT / 2; ++pr) {
        u32 b[4];
        int j = lane / 8;
        ldmatrixX4Trans(b, tileV + TileV::offset(kk * 16 + (lane % 8) +
                                                     (j & 1) * 8,
                                                 pr * 16 + (j >> 1) * 8));
        mmaM16N8K16<Cfg::BF16>(o[2 * pr], a, b[0], b[1]);
        mmaM16N8K16<Cfg::BF16>(o[2 * pr + 1], a, b[2], b[3]);
      }
    }
    __syncthreads(); // the stage is refilled two tiles on
  }
  cpAsyncWait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = lRow[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = rowBase + 8 * h;
    if (row >= (int)Cfg::SQ)
      continue;
#pragma unroll
    for (int ot = 0; ot < kOT; ++ot)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = ot * 8 + 2 * t + e;
        float v = kilnOutput(p.batch, row, col, o[ot][2 * h + e] * inv, oa);
        storeOut<Cfg::OUT_CODE>(p.o, (i64)row * Cfg::DV + col, v);
      }
  }
}

} // namespace tc
#else
namespace simt {

using TileQ = SwizzledTile<Cfg::BM, Cfg::DP, 4>;
using TileK = SwizzledTile<Cfg::BN, Cfg::DP, 4>;
using TileV = SwizzledTile<Cfg::BN, Cfg::DVP, 4>;
constexpr int kStageBytes = TileK::kBytes + TileV::kBytes;
constexpr int kRows = Cfg::BM / Cfg::WARPS; // query rows per warp
constexpr int kCols = (Cfg::DV + 31) / 32;  // output columns per lane
constexpr int kChunks = (Cfg::D + 3) / 4;   // 16-byte chunks of a Q/K row

KILN_INLINE float4 loadShared4(u32 address) {
  float4 r;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "r"(address));
  return r;
}
KILN_INLINE float loadSharedF(u32 address) {
  float r;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(r) : "r"(address));
  return r;
}

KILN_INLINE void attention(const void *qPtr, const void *kPtr,
                           const void *vPtr, void *oPtr, const ScoreArgs &sa,
                           const OutputArgs &oa) {
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  const u32 shared = sharedAddress(sharedBytes);
  const u32 tileQ = shared, stages = shared + TileQ::kBytes;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int m0 = blockIdx.x * Cfg::BM;
  const flash::Operands p = flash::operandsOf(qPtr, kPtr, vPtr, oPtr);
  const int tiles = flash::keyTiles(m0);

  flash::loadRows<TileQ, Cfg::D, 4, Cfg::VEC_Q>(tileQ, p.q, Cfg::Q_SI, m0,
                                               (int)Cfg::SQ);
  if (tiles > 0) {
    flash::loadRows<TileK, Cfg::D, 4, Cfg::VEC_K>(stages, p.k, Cfg::K_SI, 0,
                                                 (int)Cfg::SK);
    flash::loadRows<TileV, Cfg::DV, 4, Cfg::VEC_V>(stages + TileK::kBytes, p.v,
                                                  Cfg::V_SI, 0, (int)Cfg::SK);
  }
  cpAsyncCommit();

  float o[kRows][kCols];
  float mRow[kRows], lRow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    mRow[r] = kNegInf;
    lRow[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      o[r][c] = 0.0f;
  }

  for (int kt = 0; kt < tiles; ++kt) {
    if (kt + 1 < tiles) {
      u32 next = stages + ((kt + 1) & 1) * kStageBytes;
      int n0 = (kt + 1) * Cfg::BN;
      flash::loadRows<TileK, Cfg::D, 4, Cfg::VEC_K>(next, p.k, Cfg::K_SI, n0,
                                                   (int)Cfg::SK);
      flash::loadRows<TileV, Cfg::DV, 4, Cfg::VEC_V>(
          next + TileK::kBytes, p.v, Cfg::V_SI, n0, (int)Cfg::SK);
    }
    cpAsyncCommit();
    cpAsyncWait<1>();
    __syncthreads();
    const u32 tileK = stages + (kt & 1) * kStageBytes;
    const u32 tileV = tileK + TileK::kBytes;
    const int n0 = kt * Cfg::BN;

    // Lane j: the dot products of key n0 + j with the warp's query rows.
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      acc[r] = 0.0f;
#pragma unroll 4
    for (int c = 0; c < kChunks; ++c) {
      float4 kv = loadShared4(tileK + TileK::chunkOffset(lane, c));
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float4 qv =
            loadShared4(tileQ + TileQ::chunkOffset(warp * kRows + r, c));
        acc[r] = fmaf(qv.x, kv.x, acc[r]);
        acc[r] = fmaf(qv.y, kv.y, acc[r]);
        acc[r] = fmaf(qv.z, kv.z, acc[r]);
        acc[r] = fmaf(qv.w, kv.w, acc[r]);
      }
    }
    const int col = n0 + lane;
    float pr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = m0 + warp * kRows + r;
      float v = col >= (int)Cfg::SK ? kNegInf
                : row < (int)Cfg::SQ ? kilnScore(p.batch, row, col, acc[r], sa)
                                     : 0.0f;
      float mx = v;
#pragma unroll
      for (int s = 16; s > 0; s /= 2)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, s));
      const float mNew = fmaxf(mRow[r], mx);
      const float mUse = mNew == kNegInf ? 0.0f : mNew;
      const float alpha = flash::exp2Approx((mRow[r] - mUse) * flash::kLog2e);
      pr[r] = flash::exp2Approx((v - mUse) * flash::kLog2e);
      lRow[r] = lRow[r] * alpha + pr[r]; // lane-partial; summed at the end
      mRow[r] = mNew;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        o[r][c] *= alpha;
    }
    // Lane c: output columns c, c + 32, ... from the tile's V rows.
    const int keys = (int)Cfg::SK - n0 < Cfg::BN ? (int)Cfg::SK - n0 : Cfg::BN;
    for (int j = 0; j < keys; ++j) {
      float pj[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        pj[r] = __shfl_sync(0xffffffffu, pr[r], j);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int d = lane + 32 * c;
        if (Cfg::DV % 32 != 0 && d >= Cfg::DV)
          continue;
        const float vv = loadSharedF(tileV + TileV::offset(j, d));
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          o[r][c] = fmaf(pj[r], vv, o[r][c]);
      }
    }
    __syncthreads(); // the stage is refilled two tiles on
  }
  cpAsyncWait<0>();

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float l = lRow[r];
#pragma unroll
    for (int s = 16; s > 0; s /= 2)
      l += __shfl_xor_sync(0xffffffffu, l, s);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = m0 + warp * kRows + r;
    if (row >= (int)Cfg::SQ)
      continue;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = lane + 32 * c;
      if (Cfg::DV % 32 != 0 && d >= Cfg::DV)
        continue;
      float v = kilnOutput(p.batch, row, d, o[r][c] * inv, oa);
      storeOut<Cfg::OUT_CODE>(p.o, (i64)row * Cfg::DV + d, v);
    }
  }
}

} // namespace simt
#endif

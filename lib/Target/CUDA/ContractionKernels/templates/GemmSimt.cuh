//===- GemmSimt.cuh - fp32 GEMM on CUDA cores (FFMA), no TF32 -------------===//
//
// What cuBLAS does for fp32 without TF32: a BM x BN block tile, BK-deep
// slices of A and B staged in shared memory by a STAGES-deep cp.async
// pipeline, and a TM x TN register tile per thread updated by outer products
// (TM*TN FFMAs per TM+TN shared loads). Both shared tiles are stored K-major
// ([BK][BM] and [BK][BN]) so a thread's TM (TN) values at one k are float4
// loads: MN-contiguous operands arrive in 16-byte copies, K-contiguous ones
// are transposed element by element (4-byte cp.async), with rows padded by
// 4 floats so those transposing writes do not collide on one bank.
//
// A thread's rows are TM/4 groups of 4, the groups 4*BM/TM apart (and the
// same for columns), so that the 16 threads of a half-warp read 16
// different float4s of one row of the tile.
//
//===----------------------------------------------------------------------===//

namespace simt {

constexpr int kPadA = Cfg::A_K_CONTIG ? 4 : 0;
constexpr int kPadB = Cfg::B_K_CONTIG ? 4 : 0;
constexpr int kPitchA = Cfg::BM + kPadA; // floats
constexpr int kPitchB = Cfg::BN + kPadB;
constexpr int kTileABytes = Cfg::BK * kPitchA * 4;
constexpr int kStageBytes = kTileABytes + Cfg::BK * kPitchB * 4;
constexpr int kSharedBytes = Cfg::STAGES * kStageBytes;
constexpr int kThreadsN = Cfg::BN / Cfg::TN;
constexpr int kGroupStrideM = 4 * Cfg::BM / Cfg::TM;
constexpr int kGroupStrideN = 4 * Cfg::BN / Cfg::TN;

/// Copies a tile of one operand into [BK][BMN + pad] floats.
template <int BMN, int Pitch, int Vec, bool KContig, i64 Ld>
KILN_INLINE void loadTile(u32 tile, const char *base, int mn0, int mnEnd,
                          int k0, int kEnd) {
  if (KContig) {
    // Element (mn, k) of the slice goes to [k][mn]; consecutive threads
    // take consecutive k of one row, so global reads stay in 32-byte runs.
    constexpr int kTotal = BMN * Cfg::BK;
#pragma unroll
    for (int i = 0; i < (kTotal + Cfg::THREADS - 1) / Cfg::THREADS; ++i) {
      int q = (int)threadIdx.x + i * Cfg::THREADS;
      if (kTotal % Cfg::THREADS != 0 && q >= kTotal)
        break;
      int mn = q / Cfg::BK, k = q % Cfg::BK;
      bool valid = mn0 + mn < mnEnd && k0 + k < kEnd;
      const char *src =
          valid ? base + ((i64)(mn0 + mn) * Ld + k0 + k) * 4 : base;
      cpAsync<4>(tile + (k * Pitch + mn) * 4, src, valid ? 4u : 0u);
    }
  } else {
    constexpr int kChunks = BMN / 4;
    constexpr int kTotal = Cfg::BK * kChunks;
#pragma unroll
    for (int i = 0; i < (kTotal + Cfg::THREADS - 1) / Cfg::THREADS; ++i) {
      int q = (int)threadIdx.x + i * Cfg::THREADS;
      if (kTotal % Cfg::THREADS != 0 && q >= kTotal)
        break;
      int k = q / kChunks, ch = q % kChunks;
      int col = mn0 + ch * 4;
      int valid = k0 + k < kEnd ? mnEnd - col : 0;
      const char *src =
          valid > 0 ? base + ((i64)(k0 + k) * Ld + col) * 4 : base;
      copyChunk<4, Vec>(tile + (k * Pitch + ch * 4) * 4, src, base, valid);
    }
  }
}

/// A of an implicit-GEMM NHWC convolution (Cfg::CONV), transposed into
/// [BK][BM + 4] like any K-contiguous A: element (m, k) is channel c of the
/// input pixel that output pixel m sees through window position (kh, kw),
/// (kh, kw, c) = k, or zero in the padding. A thread always copies the same
/// k of a tile (the block's threads are a multiple of BK) for rows r0,
/// r0 + R, ...: per row it keeps the image's offset and the window's corner,
/// per tile it decomposes its k once.
template <int Unused> struct ConvLoaderA {
  static constexpr int kIters = Cfg::BM * Cfg::BK / Cfg::THREADS;
  static constexpr int kRowStep = Cfg::THREADS / Cfg::BK;
  const char *base;
  i64 image[kIters];
  int h0[kIters], w0[kIters];
  u32 dst[kIters];
  int kFirst, kEnd;

  KILN_INLINE void init(const char *operand, int m0, int M, int kBegin,
                        int kLimit) {
    base = operand, kEnd = kLimit;
    int r0 = (int)threadIdx.x / Cfg::BK, kk = (int)threadIdx.x % Cfg::BK;
    kFirst = kBegin + kk;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int r = r0 + i * kRowStep, m = m0 + r;
      int n = m / (int)(Cfg::CONV_P * Cfg::CONV_Q);
      int pq = m % (int)(Cfg::CONV_P * Cfg::CONV_Q);
      image[i] = (i64)n * Cfg::CONV_H * Cfg::CONV_W * Cfg::CONV_C;
      h0[i] = m < M ? (pq / (int)Cfg::CONV_Q) * Cfg::CONV_SH - Cfg::CONV_PH
                    : -(1 << 30);
      w0[i] = (pq % (int)Cfg::CONV_Q) * Cfg::CONV_SW - Cfg::CONV_PW;
      dst[i] = opaque((u32)(kk * kPitchA + r) * 4);
    }
  }

  KILN_INLINE void load(u32 tile, int t) const {
    int k = kFirst + t * Cfg::BK;
    int c = k % Cfg::CONV_CP;
    int window = k / Cfg::CONV_CP;
    int dh = (window / Cfg::CONV_KW) * Cfg::CONV_DH;
    int dw = (window % Cfg::CONV_KW) * Cfg::CONV_DW;
    bool channel = k < kEnd && c < Cfg::CONV_CG;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int h = h0[i] + dh, w = w0[i] + dw;
      bool valid = channel && (unsigned)h < (unsigned)Cfg::CONV_H &&
                   (unsigned)w < (unsigned)Cfg::CONV_W;
      const char *from =
          valid ? base + (image[i] + ((i64)h * Cfg::CONV_W + w) * Cfg::CONV_C +
                          c) *
                             4
                : base;
      cpAsync<4>(tile + dst[i], from, valid ? 4u : 0u);
    }
  }
};

KILN_INLINE float4 loadShared4(u32 address) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address));
  return v;
}

/// Stores four consecutive outputs of one row: one vector store when all
/// four are inside N and the row is aligned for it, else one by one.
/// (C by default; the second output with its own code, size and vector
/// width.)
template <int Code = Cfg::OUT_CODE, int Bytes = Cfg::OUT_BYTES,
          int Vec = Cfg::VEC_C>
KILN_INLINE void storeFour(char *row, int col, const float (&v)[4]) {
  char *to = row + (i64)col * Bytes;
  if (Vec >= 4 && col + 3 < (int)Cfg::N) {
    if (Code == kElementF32) {
      *(float4 *)to = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      u32 lo = Code == kElementF16 ? packF16(v[0], v[1]) : packBf16(v[0], v[1]);
      u32 hi = Code == kElementF16 ? packF16(v[2], v[3]) : packBf16(v[2], v[3]);
      *(uint2 *)to = make_uint2(lo, hi);
    }
    return;
  }
  for (int e = 0; e < 4 && col + e < (int)Cfg::N; ++e)
    storeOut<Code>(to, e, v[e]);
}

KILN_INLINE void gemm(const void *aPtr, const void *bPtr, void *cPtr,
                      float *workspace, u32 M, u64 batchStrideA,
                      u64 batchStrideC, const EpilogueArgs &ep,
                      unsigned *semaphores = nullptr) {
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  const u32 shared = sharedAddress(sharedBytes);
  const int ty = threadIdx.x / kThreadsN, tx = threadIdx.x % kThreadsN;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  const unsigned batch = blockIdx.z / Cfg::SPLITK;
  const int split = blockIdx.z % Cfg::SPLITK;
  const char *a = (const char *)aPtr + batch * batchStrideA * 4;
  const char *b = (const char *)bPtr + batch * (u64)Cfg::STRIDE_B * 4;

  constexpr int kTilesTotal = (int)((Cfg::K + Cfg::BK - 1) / Cfg::BK);
  constexpr int kTilesPerSplit = (kTilesTotal + Cfg::SPLITK - 1) / Cfg::SPLITK;
  const int kBegin = split * kTilesPerSplit * Cfg::BK;
  int kEnd = kBegin + kTilesPerSplit * Cfg::BK;
  kEnd = kEnd < (int)Cfg::K ? kEnd : (int)Cfg::K;
  const int kTiles =
      kEnd > kBegin ? (kEnd - kBegin + Cfg::BK - 1) / Cfg::BK : 0;

  float acc[Cfg::TM][Cfg::TN];
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::TN; ++j)
      acc[i][j] = 0.0f;

  ConvLoaderA<0> conv;
  if (Cfg::CONV)
    conv.init(a, m0, (int)M, kBegin, kEnd);
  // Copies K tile t of the split into stage s.
  auto load = [&](int s, int t) {
    u32 stage = shared + s * kStageBytes;
    int k0 = kBegin + t * Cfg::BK;
    if (Cfg::CONV)
      conv.load(stage, t);
    else
      loadTile<Cfg::BM, kPitchA, Cfg::VEC_A, Cfg::A_K_CONTIG, Cfg::LDA>(
          stage, a, m0, (int)M, k0, kEnd);
    loadTile<Cfg::BN, kPitchB, Cfg::VEC_B, Cfg::B_K_CONTIG, Cfg::LDB>(
        stage + kTileABytes, b, n0, (int)Cfg::N, k0, kEnd);
  };
#pragma unroll
  for (int s = 0; s < Cfg::STAGES - 1; ++s) {
    if (s < kTiles)
      load(s, s);
    cpAsyncCommit();
  }
  for (int kt = 0; kt < kTiles; ++kt) {
    cpAsyncWait<Cfg::STAGES - 2>();
    __syncthreads();
    int next = kt + Cfg::STAGES - 1;
    if (next < kTiles)
      load(next % Cfg::STAGES, next);
    cpAsyncCommit();
    u32 tileA = shared + (kt % Cfg::STAGES) * kStageBytes;
    u32 tileB = tileA + kTileABytes;
#pragma unroll
    for (int k = 0; k < Cfg::BK; ++k) {
      float av[Cfg::TM], bv[Cfg::TN];
#pragma unroll
      for (int gi = 0; gi < Cfg::TM / 4; ++gi) {
        float4 v = loadShared4(tileA +
                               (k * kPitchA + gi * kGroupStrideM + ty * 4) * 4);
        av[gi * 4 + 0] = v.x, av[gi * 4 + 1] = v.y, av[gi * 4 + 2] = v.z,
                    av[gi * 4 + 3] = v.w;
      }
#pragma unroll
      for (int gj = 0; gj < Cfg::TN / 4; ++gj) {
        float4 v = loadShared4(tileB +
                               (k * kPitchB + gj * kGroupStrideN + tx * 4) * 4);
        bv[gj * 4 + 0] = v.x, bv[gj * 4 + 1] = v.y, bv[gj * 4 + 2] = v.z,
                    bv[gj * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::TN; ++j)
          acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  }
  cpAsyncWait<0>();

  const unsigned batches = gridDim.z / Cfg::SPLITK;
  float *ws = workspace + ((i64)split * batches + batch) * M * Cfg::N;
  char *c = (char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES;
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i) {
    int row = m0 + (i / 4) * kGroupStrideM + ty * 4 + i % 4;
    if (row >= (int)M)
      continue;
#pragma unroll
    for (int gj = 0; gj < Cfg::TN / 4; ++gj) {
      int col = n0 + gj * kGroupStrideN + tx * 4;
      if (col >= (int)Cfg::N)
        continue;
      float v[4];
      if (Cfg::SPLITK > 1) {
        float *to = ws + (i64)row * Cfg::N + col;
        if (Cfg::N % 4 == 0) {
          *(float4 *)to = make_float4(acc[i][gj * 4], acc[i][gj * 4 + 1],
                                      acc[i][gj * 4 + 2], acc[i][gj * 4 + 3]);
        } else {
          for (int e = 0; e < 4 && col + e < (int)Cfg::N; ++e)
            to[e] = acc[i][gj * 4 + e];
        }
        continue;
      }
      // With a second output, both values before either store, so their
      // epilogues share the work.
      float second[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = 0.0f;
        if (col + e >= (int)Cfg::N)
          continue;
        const int epiCol = col + e + batch * Cfg::EPI_COL_PER_BATCH;
        if constexpr (Cfg::AUX_CODE != kElementNone)
          second[e] = kilnEpilogue(batch, row, epiCol, acc[i][gj * 4 + e], ep, 1);
        v[e] = kilnEpilogue(batch, row, epiCol, acc[i][gj * 4 + e], ep);
      }
      storeFour(c + (i64)row * Cfg::LDC * Cfg::OUT_BYTES, col, v);
      if constexpr (Cfg::AUX_CODE != kElementNone)
        storeFour<Cfg::AUX_CODE, Cfg::AUX_BYTES, Cfg::VEC_AUX>(
            (char *)ep.aux +
                (batch * batchStrideC + (i64)row * Cfg::LDC) * Cfg::AUX_BYTES,
            col, second);
    }
  }
  if (Cfg::SPLITK > 1)
    splitk::finishIfLast(workspace, cPtr, M, batchStrideC, ep, semaphores,
                         batch, m0, n0);
}

} // namespace simt

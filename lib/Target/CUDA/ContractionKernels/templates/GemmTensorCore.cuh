//===- GemmTensorCore.cuh - mma.sync GEMM (f16/bf16, tf32) and conv -------===//
//
// One block computes a BM x BN tile of C for one batch and one K split:
//   - warps tile the block (WTM x WTN each) and hold fp32 accumulators for
//     (WTM/16) x (WTN/8) mma tiles in registers;
//   - a STAGES-deep pipeline of cp.async copies (zero-filled past M, N and
//     the split's end of K) keeps the next tiles in flight while the warps
//     compute on the current one; one commit group per K tile, always
//     committed (even empty) so wait_group counts stay uniform;
//   - the shared tiles keep the operand's global layout (a K-contiguous
//     operand is stored [MN][K], else [K][MN]) and are XOR-swizzled by
//     16-byte chunk (SwizzledTile), so ldmatrix reads are conflict-free;
//     ldmatrix.trans turns MN-contiguous 16-bit tiles into the row/col
//     fragments mma.sync wants; tf32 MN-contiguous tiles are read by 32-bit
//     loads (ldmatrix has no 32-bit transpose);
//   - the epilogue runs on the accumulators in registers, rounds to the
//     output type into shared memory (reusing the pipeline's buffers), and
//     the block then writes whole rows with the widest stores the output's
//     alignment allows. With split-K the block writes fp32 partials to the
//     workspace instead, and the tile's last split sums them and applies
//     the epilogue (SplitKReduce.cuh).
//
// An implicit-GEMM NHWC convolution (Cfg::CONV) is the same kernel with
// another loader for A (ConvLoaderA), which gathers 16-byte channel chunks
// of input pixels for each (kh, kw) instead of reading a matrix.
//
// Cfg (generated) holds every compile-time fact; see GemmSource.cpp.
//
//===----------------------------------------------------------------------===//

namespace tc {

constexpr int kEB = Cfg::IN_BYTES;
constexpr int kChunkElems = 16 / kEB;
constexpr int kWarpsM = Cfg::BM / Cfg::WTM;
constexpr int kMI = Cfg::WTM / 16;
constexpr int kNI = Cfg::WTN / 8;
constexpr int kKStep = Cfg::INT8 || Cfg::FP8 ? 32 : Cfg::TF32 ? 8 : 16;

using TileA = SwizzledTile<Cfg::A_K_CONTIG ? Cfg::BM : Cfg::BK,
                           Cfg::A_K_CONTIG ? Cfg::BK : Cfg::BM, kEB>;
using TileB = SwizzledTile<Cfg::B_K_CONTIG ? Cfg::BN : Cfg::BK,
                           Cfg::B_K_CONTIG ? Cfg::BK : Cfg::BN, kEB>;
constexpr int kStageBytes = TileA::kBytes + TileB::kBytes;

/// Issues one operand's copies for each K tile. KContig: tile rows are M
/// (or N) and columns K, else rows K and columns M (or N).
///
/// When the block's threads divide the tile's chunks evenly and a row's
/// chunk count, every thread copies the same column chunk of rows r0,
/// r0 + R, r0 + 2R, ...: the source addresses are one pointer plus
/// compile-time offsets, the destinations are fixed per thread, and a K
/// tile only moves the pointer and shrinks what is left of K. Other shapes
/// take the general path, which derives each chunk from its index.
///
/// `Threads` threads, 0 to Threads - 1 in threadIdx.x, issue the copies:
/// the whole block here, the producer warpgroup in GemmWgmma.cuh.
template <class Tile, int Vec, bool KContig, i64 Ld, int Threads = Cfg::THREADS>
struct OperandLoader {
  static constexpr int kTotal = Tile::kRows * Tile::kChunks;
  static constexpr int kIters = (kTotal + Threads - 1) / Threads;
  static constexpr bool kRegular =
      kTotal % Threads == 0 && Threads % Tile::kChunks == 0;
  static constexpr int kRowStep = Threads / Tile::kChunks; // R
  /// Bytes the source moves per K tile.
  static constexpr i64 kTileStep = KContig ? Cfg::BK * kEB : Cfg::BK * Ld * kEB;

  const char *base;
  const char *src; // row r0's chunk at the split's first K tile
  u32 dst[kIters];
  // KContig: K elements left after this thread's column at the first tile
  // (per row: a row outside M gets none). Else: MN elements left after the
  // column, and K rows left after row r0.
  int left[KContig ? kIters : 1];
  int kRowsLeft;
  // The general path keeps the tile origin.
  int mn0, mnEnd, kBegin, kEnd;

  /// Whether every row (or column) of M or N the block covers exists.
  KILN_INLINE static bool allInside(int mnOrigin, int mnLimit) {
    return mnOrigin + (KContig ? Tile::kRows : Tile::kChunks * kChunkElems) <=
           mnLimit;
  }

  KILN_INLINE void init(const char *operand, int mnOrigin, int mnLimit,
                        int kFirst, int kLimit) {
    base = operand, mn0 = mnOrigin, mnEnd = mnLimit, kBegin = kFirst,
    kEnd = kLimit;
    if (!kRegular)
      return;
    int r0 = (int)threadIdx.x / Tile::kChunks;
    int ch = (int)threadIdx.x % Tile::kChunks;
    int rowG = (KContig ? mn0 : kBegin) + r0;
    int colG = (KContig ? kBegin : mn0) + ch * kChunkElems;
    src = base + ((i64)rowG * Ld + colG) * kEB;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      dst[i] = opaque(Tile::chunkOffset(r0 + i * kRowStep, ch));
      if (KContig)
        left[i] = rowG + i * kRowStep < mnEnd ? kEnd - colG : -(1 << 30);
    }
    if (!KContig) {
      left[0] = mnEnd - colG;
      kRowsLeft = kEnd - rowG;
    }
  }

  /// Copies K tile `t` of the split into the stage at `tile`. `interior`:
  /// the whole tile lies inside the operand (every K tile but the last,
  /// in every block but the edge ones), so no chunk needs a bound.
  KILN_INLINE void load(u32 tile, int t, bool interior) const {
    if (kRegular) {
      const char *from = src + t * kTileStep;
      if (Vec * kEB == 16 && interior) {
#pragma unroll
        for (int i = 0; i < kIters; ++i)
          cpAsync<16>(tile + dst[i], from + (i64)i * kRowStep * Ld * kEB, 16);
        return;
      }
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        int valid =
            KContig
                ? left[i] - t * Cfg::BK
                : (kRowsLeft - t * Cfg::BK - i * kRowStep > 0 ? left[0] : 0);
        const char *at = from + (i64)i * kRowStep * Ld * kEB;
        copyChunk<kEB, Vec>(tile + dst[i], valid > 0 ? at : base, base, valid);
      }
      return;
    }
    int k0 = kBegin + t * Cfg::BK;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int q = (int)threadIdx.x + i * Threads;
      if (kTotal % Threads != 0 && q >= kTotal)
        break;
      int r = q / Tile::kChunks;
      int ch = q % Tile::kChunks;
      int rowG = (KContig ? mn0 : k0) + r;
      int rowEnd = KContig ? mnEnd : kEnd;
      int colG = (KContig ? k0 : mn0) + ch * kChunkElems;
      int colEnd = KContig ? kEnd : mnEnd;
      int valid = rowG < rowEnd ? colEnd - colG : 0;
      const char *from =
          valid > 0 ? base + ((i64)rowG * Ld + colG) * kEB : base;
      copyChunk<kEB, Vec>(tile + Tile::chunkOffset(r, ch), from, base, valid);
    }
  }
};

/// A of an implicit-GEMM NHWC convolution: row m of A is output pixel
/// (n, p, q), column k is (kh, kw, c) with c innermost. A thread copies the
/// same column chunk (8 or 4 channels of one input pixel) for rows r0,
/// r0 + R, ...: per row it keeps the image's offset and the window's
/// top-left corner, per K tile it decomposes its k once. `Threads` as in
/// OperandLoader.
template <class Tile = TileA, int Threads = Cfg::THREADS> struct ConvLoaderA {
  static constexpr int kIters = Tile::kRows * Tile::kChunks / Threads;
  static constexpr int kRowStep = Threads / Tile::kChunks;
  const char *base;
  i64 image[kIters]; // element offset of the row's image
  int h0[kIters], w0[kIters];
  u32 dst[kIters];
  int kFirst, kEnd;

  KILN_INLINE static bool allInside(int, int) { return false; }

  KILN_INLINE void init(const char *operand, int m0, int M, int kBegin,
                        int kLimit) {
    base = operand, kEnd = kLimit;
    int r0 = (int)threadIdx.x / Tile::kChunks;
    int ch = (int)threadIdx.x % Tile::kChunks;
    kFirst = kBegin + ch * kChunkElems;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int m = m0 + r0 + i * kRowStep;
      int n = m / (int)(Cfg::CONV_P * Cfg::CONV_Q);
      int pq = m % (int)(Cfg::CONV_P * Cfg::CONV_Q);
      image[i] = (i64)n * Cfg::CONV_H * Cfg::CONV_W * Cfg::CONV_C;
      h0[i] = m < M ? (pq / (int)Cfg::CONV_Q) * Cfg::CONV_SH - Cfg::CONV_PH
                    : -(1 << 30);
      w0[i] = (pq % (int)Cfg::CONV_Q) * Cfg::CONV_SW - Cfg::CONV_PW;
      dst[i] = opaque(Tile::chunkOffset(r0 + i * kRowStep, ch));
    }
  }

  KILN_INLINE void load(u32 tile, int t, bool) const {
    int k = kFirst + t * Cfg::BK;
    int c0 = k % Cfg::CONV_CP;
    int window = k / Cfg::CONV_CP;
    int dh = (window / Cfg::CONV_KW) * Cfg::CONV_DH;
    int dw = (window % Cfg::CONV_KW) * Cfg::CONV_DW;
    int channels = k < kEnd ? Cfg::CONV_CG - c0 : 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int h = h0[i] + dh, w = w0[i] + dw;
      bool inside = (unsigned)h < (unsigned)Cfg::CONV_H &&
                    (unsigned)w < (unsigned)Cfg::CONV_W;
      if (Cfg::INT8 && Cfg::CONV_PAD_BYTE != 0 && !inside) {
        // int8: an out-of-image pixel reads A's zero point (its x - za is
        // 0, as onnxruntime pads), in the real channels only.
        fillChunkBytes(tile + dst[i], Cfg::CONV_PAD_BYTE, channels);
        continue;
      }
      int valid = inside ? channels : 0;
      const char *from =
          valid > 0 ? base + (image[i] +
                              ((i64)h * Cfg::CONV_W + w) * Cfg::CONV_C + c0) *
                                 kEB
                    : base;
      copyChunk<kEB, Cfg::VEC_A>(tile + dst[i], from, base, valid);
    }
  }
};

template <bool Conv> struct SelectLoaderA {
  using type = OperandLoader<TileA, Cfg::VEC_A, Cfg::A_K_CONTIG, Cfg::LDA>;
};
template <> struct SelectLoaderA<true> { using type = ConvLoaderA<>; };

using LoaderA = SelectLoaderA<Cfg::CONV>::type;
using LoaderB = OperandLoader<TileB, Cfg::VEC_B, Cfg::B_K_CONTIG, Cfg::LDB>;

constexpr int kKSteps = Cfg::BK / kKStep;
/// tf32 tiles stored MN-contiguous are read by 32-bit loads instead.
constexpr bool kLdmatrixA = Cfg::A_K_CONTIG || !Cfg::TF32;
constexpr bool kLdmatrixB = Cfg::B_K_CONTIG || !Cfg::TF32;

/// Where this lane's ldmatrix row address for the A fragment of mma tile
/// row `m` (tile-relative) at k offset `kk` lies in a stage.
KILN_INLINE u32 fragmentOffsetA(int m, int kk, int lane) {
  if (Cfg::A_K_CONTIG)
    return TileA::offset(m + (lane % 16), kk + (lane / 16) * kChunkElems);
  int j = lane / 8;
  return TileA::offset(kk + (lane % 8) + (j >> 1) * 8, m + (j & 1) * 8);
}
/// The same for the B fragments of the two mma tiles at columns n..n+15.
KILN_INLINE u32 fragmentOffsetB(int n, int kk, int lane) {
  int j = lane / 8;
  if (Cfg::B_K_CONTIG)
    return TileB::offset(n + (lane % 8) + (j >> 1) * 8,
                         kk + (j & 1) * kChunkElems);
  return TileB::offset(kk + (lane % 8) + (j & 1) * 8, n + (j >> 1) * 8);
}

/// The fragment addresses are the same in every stage: computed once.
struct FragmentOffsets {
  u32 a[kMI][kKSteps];
  u32 b[kNI / 2][kKSteps];
  KILN_INLINE void init(int wm, int wn, int lane) {
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
        a[mi][ks] = kLdmatrixA ? opaque(fragmentOffsetA(wm * Cfg::WTM + mi * 16,
                                                        ks * kKStep, lane))
                               : 0;
#pragma unroll
      for (int p = 0; p < kNI / 2; ++p)
        b[p][ks] = kLdmatrixB ? opaque(fragmentOffsetB(wn * Cfg::WTN + p * 16,
                                                       ks * kKStep, lane))
                              : 0;
    }
  }
};

/// The A fragment of mma tile row `m` (tile-relative) at k offset `kk`.
KILN_INLINE void loadFragmentA(u32 (&a)[4], u32 tile, u32 offset, int m, int kk,
                               int lane) {
  if (Cfg::A_K_CONTIG) {
    ldmatrixX4(a, tile + offset);
  } else if (!Cfg::TF32) {
    ldmatrixX4Trans(a, tile + offset);
  } else {
    int g = lane / 4, t = lane % 4;
    a[0] = loadShared32(tile + TileA::offset(kk + t, m + g));
    a[1] = loadShared32(tile + TileA::offset(kk + t, m + g + 8));
    a[2] = loadShared32(tile + TileA::offset(kk + t + 4, m + g));
    a[3] = loadShared32(tile + TileA::offset(kk + t + 4, m + g + 8));
  }
  if (Cfg::TF32)
    for (int i = 0; i < 4; ++i)
      a[i] = toTf32(a[i]);
}

/// The B fragments of the two mma tiles at columns n..n+15: b[0], b[1] for
/// the first, b[2], b[3] for the second.
KILN_INLINE void loadFragmentsB(u32 (&b)[4], u32 tile, u32 offset, int n,
                                int kk, int lane) {
  if (Cfg::B_K_CONTIG) {
    ldmatrixX4(b, tile + offset);
  } else if (!Cfg::TF32) {
    ldmatrixX4Trans(b, tile + offset);
  } else {
    int g = lane / 4, t = lane % 4;
    b[0] = loadShared32(tile + TileB::offset(kk + t, n + g));
    b[1] = loadShared32(tile + TileB::offset(kk + t + 4, n + g));
    b[2] = loadShared32(tile + TileB::offset(kk + t, n + 8 + g));
    b[3] = loadShared32(tile + TileB::offset(kk + t + 4, n + 8 + g));
  }
  if (Cfg::TF32)
    for (int i = 0; i < 4; ++i)
      b[i] = toTf32(b[i]);
}

KILN_INLINE void computeStage(float (&acc)[kMI][kNI][4], u32 stage,
                              const FragmentOffsets &off, int wm, int wn,
                              int lane) {
  u32 tileA = stage, tileB = stage + TileA::kBytes;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    const int kk = ks * kKStep;
    u32 a[kMI][4];
    u32 b[kNI / 2][4];
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
      loadFragmentA(a[mi], tileA, off.a[mi][ks], wm * Cfg::WTM + mi * 16, kk,
                    lane);
#pragma unroll
    for (int p = 0; p < kNI / 2; ++p)
      loadFragmentsB(b[p], tileB, off.b[p][ks], wn * Cfg::WTN + p * 16, kk,
                     lane);
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        const u32 *bb = &b[ni / 2][(ni % 2) * 2];
        if (Cfg::TF32)
          mmaM16N8K8Tf32(acc[mi][ni], a[mi], bb[0], bb[1]);
        else if (Cfg::FP8) // both tiles K-contiguous: ldmatrix's bytes
          mmaM16N8K32F8<Cfg::A_E5M2, Cfg::B_E5M2>(acc[mi][ni], a[mi], bb[0],
                                                  bb[1]);
        else
          mmaM16N8K16<Cfg::IN_BF16>(acc[mi][ni], a[mi], bb[0], bb[1]);
      }
  }
}

/// C rows of the block tile go out through shared memory. A thread holds
/// two adjacent outputs of rows g and g + 8 (g = lane / 4) and stores them
/// as one 8-byte (f32) or 4-byte (16-bit) word; the rows are padded so
/// those stores hit distinct banks: 8 words (f32, per half-warp) or 4
/// words (16-bit, per warp) more than the data. The second output
/// (Cfg::AUX_CODE, the epilogue's `which` 1) is staged the same way in its
/// own element size, never wider than C's, so it fits C's staging space.
template <int Bytes> constexpr int outPitch() {
  return Cfg::BN * Bytes + (Bytes == 4 ? 32 : 16);
}
constexpr int kOutPitch = outPitch<Cfg::OUT_BYTES>();

template <int Code = Cfg::OUT_CODE>
KILN_INLINE void storeStagedPair(u32 address, float v0, float v1) {
  if (Code == kElementF32) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(address), "f"(v0),
                 "f"(v1)
                 : "memory");
  } else if (Code == kElementE4M3 || Code == kElementE5M2) {
    asm volatile("st.shared.u16 [%0], %1;" ::"r"(address),
                 "h"(packF8<Code>(v0, v1))
                 : "memory");
  } else {
    u32 word = Code == kElementF16 ? packF16(v0, v1) : packBf16(v0, v1);
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(address), "r"(word)
                 : "memory");
  }
}

/// Copies the staged tile to C (or the second output): `Vec` elements of
/// `Bytes` a store where they are all inside N, element by element at the
/// right edge. `Threads` threads (`tid` 0 to Threads - 1) share the work.
template <int Threads = Cfg::THREADS, int Bytes = Cfg::OUT_BYTES,
          int Vec = Cfg::VEC_C>
KILN_INLINE void writeStaged(u32 staged, char *c, int m0, int M, int n0,
                             int tid) {
  constexpr int kVec = Vec;
  constexpr int kVecBytes = kVec * Bytes;
  constexpr int kPerRow = Cfg::BN / kVec;
  constexpr int kTotal = Cfg::BM * kPerRow;
  constexpr int kPitch = outPitch<Bytes>();
#pragma unroll 4
  for (int q = tid; q < kTotal; q += Threads) {
    int r = q / kPerRow, cv = q % kPerRow;
    int row = m0 + r, col = n0 + cv * kVec;
    if (row >= M || col >= (int)Cfg::N)
      continue;
    u32 from = staged + r * kPitch + cv * kVecBytes;
    char *to = c + ((i64)row * Cfg::LDC + col) * Bytes;
    if (col + kVec <= (int)Cfg::N) {
      if (kVecBytes == 16) {
        u32 x, y, z, w;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                     : "r"(from));
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(to),
                     "r"(x), "r"(y), "r"(z), "r"(w)
                     : "memory");
      } else if (kVecBytes == 8) {
        u32 x, y;
        asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];"
                     : "=r"(x), "=r"(y)
                     : "r"(from));
        asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(to), "r"(x),
                     "r"(y)
                     : "memory");
      } else if (kVecBytes == 4) {
        *(u32 *)to = loadShared32(from);
      } else if (kVecBytes == 2) {
        u16 h;
        asm volatile("ld.shared.u16 %0, [%1];" : "=h"(h) : "r"(from));
        *(u16 *)to = h;
      } else { // one fp8 byte
        u16 h;
        asm volatile("ld.shared.u8 %0, [%1];" : "=h"(h) : "r"(from));
        *(unsigned char *)to = (unsigned char)h;
      }
    } else {
      for (int e = 0; col + e < (int)Cfg::N; ++e) {
        if (Bytes == 4) {
          *(u32 *)(to + 4 * e) = loadShared32(from + 4 * e);
        } else if (Bytes == 2) {
          u16 h;
          asm volatile("ld.shared.u16 %0, [%1];" : "=h"(h) : "r"(from + 2 * e));
          *(u16 *)(to + 2 * e) = h;
        } else {
          u16 h;
          asm volatile("ld.shared.u8 %0, [%1];" : "=h"(h) : "r"(from + e));
          to[e] = (char)h;
        }
      }
    }
  }
}

/// One output of the block tile, through shared memory to `out` (the
/// batch's base). Pass 0 stores C; with a second output it also computes
/// that one's value from the same accumulator, in the same epilogue
/// expressions (the two calls are adjacent, so the compiler shares their
/// loads and arithmetic), and leaves it in `acc` for pass 1, which stores
/// it. The caller synchronises before (the staging space is free).
/// Pass `Pass`'s value of accumulator `a` at (row, col) (storeTile's
/// passes; shared with the wgmma kernel).
template <int Pass>
KILN_INLINE float outputOf(float &a, unsigned batch, int row, int col,
                           const EpilogueArgs &ep) {
  if (Pass == 1)
    return a;
  if constexpr (Cfg::AUX_CODE != kElementNone) {
    float second = kilnEpilogue(batch, row, col, a, ep, 1);
    float v = kilnEpilogue(batch, row, col, a, ep, 0);
    a = second;
    return v;
  }
  return kilnEpilogue(batch, row, col, a, ep, 0);
}

template <int Pass, int Code, int Bytes, int Vec>
KILN_INLINE void storeTile(float (&acc)[kMI][kNI][4], u32 shared, char *out,
                           int m0, int n0, int M, unsigned batch, int wm,
                           int wn, int g, int t, const EpilogueArgs &ep) {
  const int kEpiCol = batch * Cfg::EPI_COL_PER_BATCH;
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int r = wm * Cfg::WTM + mi * 16 + g + 8 * h;
        int cl = wn * Cfg::WTN + ni * 8 + 2 * t;
        int row = m0 + r, col = n0 + cl;
        float v[2] = {0.0f, 0.0f};
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (Pass == 1 || (row < M && col + e < (int)Cfg::N))
            v[e] = outputOf<Pass>(acc[mi][ni][2 * h + e], batch, row,
                                  col + e + kEpiCol, ep);
        storeStagedPair<Code>(shared + r * outPitch<Bytes>() + cl * Bytes,
                              v[0], v[1]);
      }
  __syncthreads();
  writeStaged<Cfg::THREADS, Bytes, Vec>(shared, out, m0, M, n0,
                                        (int)threadIdx.x);
}

/// The cp.async pipeline of the mma.sync kernels (this one and
/// GemmInt8.cuh): STAGES - 1 K tiles in flight ahead of the stage
/// `compute(stage)` reads (its shared-memory offset). K tiles before
/// `wholeTiles` are whole, and with `insideA`/`insideB` their copies skip
/// the bounds checks. Returns with every copy landed.
template <typename LA, typename LB, typename Compute>
KILN_INLINE void runPipeline(u32 shared, LA &loaderA, LB &loaderB, int kTiles,
                             int wholeTiles, bool insideA, bool insideB,
                             Compute &&compute) {
  constexpr u32 kPipelineBytes = Cfg::STAGES * kStageBytes;
#pragma unroll
  for (int s = 0; s < Cfg::STAGES - 1; ++s) {
    if (s < kTiles) {
      loaderA.load(shared + s * kStageBytes, s, insideA && s < wholeTiles);
      loaderB.load(shared + s * kStageBytes + TileA::kBytes, s,
                   insideB && s < wholeTiles);
    }
    cpAsyncCommit();
  }
  // Byte offsets of the stage being read and of the one being filled.
  u32 readStage = 0, writeStage = (Cfg::STAGES - 1) * kStageBytes;
  for (int kt = 0; kt < kTiles; ++kt) {
    cpAsyncWait<Cfg::STAGES - 2>();
    __syncthreads();
    int next = kt + Cfg::STAGES - 1;
    if (next < kTiles) {
      loaderA.load(shared + writeStage, next, insideA && next < wholeTiles);
      loaderB.load(shared + writeStage + TileA::kBytes, next,
                   insideB && next < wholeTiles);
    }
    cpAsyncCommit();
    compute(shared + readStage);
    readStage =
        readStage + kStageBytes == kPipelineBytes ? 0 : readStage + kStageBytes;
    writeStage = writeStage + kStageBytes == kPipelineBytes
                     ? 0
                     : writeStage + kStageBytes;
  }
  cpAsyncWait<0>();
}

KILN_INLINE void gemm(const void *aPtr, const void *bPtr, void *cPtr,
                      float *workspace, u32 M, u64 batchStrideA,
                      u64 batchStrideC, const EpilogueArgs &ep,
                      unsigned *semaphores = nullptr) {
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  const u32 shared = sharedAddress(sharedBytes);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  const unsigned batch = blockIdx.z / Cfg::SPLITK;
  const int split = blockIdx.z % Cfg::SPLITK;
  const char *a = (const char *)aPtr + batch * batchStrideA * kEB;
  const char *b = (const char *)bPtr + batch * (u64)Cfg::STRIDE_B * kEB;

  constexpr int kTilesTotal = (int)((Cfg::K + Cfg::BK - 1) / Cfg::BK);
  constexpr int kTilesPerSplit = (kTilesTotal + Cfg::SPLITK - 1) / Cfg::SPLITK;
  const int kBegin = split * kTilesPerSplit * Cfg::BK;
  int kEnd = kBegin + kTilesPerSplit * Cfg::BK;
  kEnd = kEnd < (int)Cfg::K ? kEnd : (int)Cfg::K;
  const int kTiles =
      kEnd > kBegin ? (kEnd - kBegin + Cfg::BK - 1) / Cfg::BK : 0;

  float acc[kMI][kNI][4];
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[mi][ni][e] = 0.0f;

  FragmentOffsets offsets;
  offsets.init(wm, wn, lane);
  LoaderA loaderA;
  LoaderB loaderB;
  loaderA.init(a, m0, (int)M, kBegin, kEnd);
  loaderB.init(b, n0, (int)Cfg::N, kBegin, kEnd);
  // K tiles before this one are whole; the last may be partial.
  const int wholeTiles = (kEnd - kBegin) / Cfg::BK;
  runPipeline(shared, loaderA, loaderB, kTiles, wholeTiles,
              LoaderA::allInside(m0, (int)M),
              LoaderB::allInside(n0, (int)Cfg::N), [&](u32 stage) {
                computeStage(acc, stage, offsets, wm, wn, lane);
              });

  const int g = lane / 4, t = lane % 4;
  if (Cfg::SPLITK > 1) {
    const unsigned batches = gridDim.z / Cfg::SPLITK;
    float *ws = workspace + ((i64)split * batches + batch) * M * Cfg::N;
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int row = m0 + wm * Cfg::WTM + mi * 16 + g + 8 * h;
          int col = n0 + wn * Cfg::WTN + ni * 8 + 2 * t;
          if (row >= (int)M || col >= (int)Cfg::N)
            continue;
          float *to = ws + (i64)row * Cfg::N + col;
          if (Cfg::N % 2 == 0) {
            *(float2 *)to =
                make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
          } else {
            to[0] = acc[mi][ni][2 * h];
            if (col + 1 < (int)Cfg::N)
              to[1] = acc[mi][ni][2 * h + 1];
          }
        }
    splitk::finishIfLast(workspace, cPtr, M, batchStrideC, ep, semaphores,
                         batch, m0, n0);
    return;
  }

  __syncthreads(); // every warp is done with the pipeline's buffers
  storeTile<0, Cfg::OUT_CODE, Cfg::OUT_BYTES, Cfg::VEC_C>(
      acc, shared, (char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES, m0,
      n0, (int)M, batch, wm, wn, g, t, ep);
  if constexpr (Cfg::AUX_CODE != kElementNone) {
    __syncthreads(); // C's staged tile is out
    storeTile<1, Cfg::AUX_CODE, Cfg::AUX_BYTES, Cfg::VEC_AUX>(
        acc, shared, (char *)ep.aux + batch * batchStrideC * Cfg::AUX_BYTES,
        m0, n0, (int)M, batch, wm, wn, g, t, ep);
  }
}

} // namespace tc

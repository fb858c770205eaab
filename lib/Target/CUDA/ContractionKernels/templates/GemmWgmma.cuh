//===- GemmWgmma.cuh - sm_90a warp-specialised wgmma GEMM (all families) --===//
//
// One block computes a BM x BN tile of C (BM = 64 or 128, BN = 64, 128 or
// 256) for one batch and one K split, with warpgroups (128 threads) in two
// roles:
//   - warpgroup 0, the producer, fills a STAGES-deep ring of shared-memory
//     stages. With Cfg::TMA (plain GEMMs whose operands TMA can address,
//     tmaUnsupportedReason) one thread does it: per stage it waits on
//     `empty`, arms `full` with mbarrier.arrive.expect_tx for the stage's
//     bytes and issues `cp.async.bulk.tensor` copies from the tensor maps
//     the runtime encoded at load (GemmSource.cpp's tmaOperandMap: the
//     box is the tile, swizzled 128B exactly as the descriptors below
//     expect, zeros past M, N and K); `full` (count 1) completes when the
//     copy engine has written every byte. Otherwise it uses cp.async,
//     through the loaders of GemmTensorCore.cuh (so
//     edges are zero-filled and an implicit-GEMM convolution gathers its
//     im2col rows the same way). It waits on a stage's `empty` mbarrier,
//     issues the stage's copies, and `cp.async.mbarrier.arrive.noinc` makes
//     the stage's `full` mbarrier (count 128) complete when every copy has
//     landed. Operands only 2-byte aligned are copied through registers;
//     then the producer waits for its copies and arrives itself.
//   - warpgroups 1 and 2, the consumers, each own 64 rows of the tile: they
//     wait on `full`, `fence.proxy.async` (cp.async writes in the generic
//     proxy, wgmma reads in the async proxy), and issue four
//     `wgmma.mma_async.m64nBNk16` (K tile 64) from shared-memory
//     descriptors (tf32: K tile 32, four `m64nBNk8`), accumulating BN/2
//     fp32 registers a thread. One group
//     stays in flight: after committing tile t they wait for tile t - 1's
//     group and arrive on its stage's `empty` mbarrier (count: every
//     consumer thread), which hands the stage back to the producer.
//   - with two consumers `setmaxnreg` moves registers from the producer
//     (56 a thread: its loaders keep per-row addresses) to the consumers
//     (224). The producer returns after its last copy; the epilogue is the
//     consumers' alone (named barrier 1).
//
// Shared memory holds each operand in the canonical 128-byte-swizzled
// layout wgmma descriptors describe (every stage 1024-byte aligned):
//   - K-major (A row-major, B stored [N][K]): a row of the tile (one m or n)
//     is the K tile's 64 (tf32: 32) elements, 128 bytes; 16-byte chunk c of
//     row r sits at chunk c ^ (r % 8); 8 rows make a 1024-byte swizzle atom
//     (the descriptor's stride offset). A k16 (tf32: k8) step moves the
//     start address by 32 bytes.
//   - MN-major (A column-major, B row-major [K][N]; wgmma's transpose bit):
//     blocks of 64 m (or n) elements, each 64 K rows of 128 bytes, swizzled
//     the same way; the descriptor's leading offset is the block size
//     (8 KiB), its stride offset the 8-row atom (1024 B). A k16 step moves
//     16 rows (2 KiB).
//   - fp8 (e4m3/e5m2) and int8 (s8/u8; K tile 128, `m64nBNk32`) have no
//     transpose bits either, and no transposing loader: their problems are
//     K-major already (unsupportedReason).
//   - tf32 wgmma has no transpose bits: both operands must be K-major.
//     kiln-match-contractions stores a row-major weight B transposed at
//     compile time; any other MN-major tf32 operand (an activation B as
//     [K][N], A column-major) is transposed by the producer as it stages
//     it (TransposingLoader: four K rows of one column through registers,
//     written as one 16-byte chunk). Its st.shared
//     writes are fenced into the async proxy and arrive on `full` after the
//     stage's cp.async copies (full counts 256 arrivals then).
//
// tf32 rounding: wgmma's tensor core reads only the upper 19 bits of an
// fp32 operand (it truncates). Weights arrive rounded to nearest at
// compile time (kiln-lower-precision), but an activation would be
// truncated, off by up to 2^-9 of its magnitude instead of 2^-10 and
// biased toward zero, which over a deep network exceeds the tf32 bound
// (docs/testing.md). So the consumers round each stage in shared memory
// with cvt.rna (roundStageTf32) before their wgmmas read it, as mma.sync
// tf32 (GemmTensorCore.cuh) rounds its fragments; rounding is idempotent,
// so an already rounded weight tile is unchanged.
//
// The epilogue is GemmTensorCore.cuh's: wgmma's accumulator fragment is the
// mma.sync m16n8 one per warp (warp w of a consumer holds rows 16w..16w+15
// of its 64), so the consumers apply kilnEpilogue in registers, stage the
// rounded tile in shared memory and the consumers write it with
// writeStaged's 128-bit stores. With split-K the consumers write fp32
// partials to the workspace, and the tile's last split sums them and
// applies the epilogue (SplitKReduce.cuh).
//
// int8 (Cfg::INT8, Family::WgmmaS8): the accumulators are s32 registers,
// and the epilogue is IntegerEpilogue.cuh's, applied to each accumulator
// and stored from registers (the fragment holds its row and column). When
// B has zero points the epilogue needs A's row sums: every K step also
// issues `wgmmaRowSum`, an m64n8k32 of the consumer's A against a
// 1024-byte tile of ones (after the ring; written once by the whole block
// before the first barrier, and fenced into the async proxy), whose four
// accumulators a thread are its two rows' sums. A convolution's padding
// pixels hold A's zero point, written with st.shared: the producer then
// also arrives on `full` after a proxy fence (kStoreArrive). No split-K.
//
// Cfg (generated) holds every compile-time fact and the generated
// `wgmmaTile` (the wgmma instruction for this BN, dtype and layouts; int8:
// `wgmmaRowSum` too); see GemmSource.cpp. This file is compiled after
// GemmTensorCore.cuh (and, for int8, IntegerEpilogue.cuh).
//
//===----------------------------------------------------------------------===//

namespace wg {

/// A `const __grid_constant__` TMA tensor map parameter (CUDA's
/// CUtensorMap: 128 opaque bytes, 64-byte aligned; the PTX declares it
/// `.param .align 64 .b8 name[128]`).
struct __align__(64) TensorMap {
  unsigned long long opaque[16];
};

constexpr int kEB = Cfg::IN_BYTES;
/// The MMA's K: 16 f16/bf16, 8 tf32 or 32 fp8 or int8 elements, 32 bytes
/// each way.
constexpr int kMmaK = Cfg::TF32 ? 8 : Cfg::FP8 || Cfg::INT8 ? 32 : 16;
/// How each operand sits in shared memory: tf32 is always K-major.
constexpr bool kAKMajor = Cfg::A_K_CONTIG || Cfg::TF32;
constexpr bool kBKMajor = Cfg::B_K_CONTIG || Cfg::TF32;
// The TMA producer copies tiles as they are (no transposing staging) and
// its boxes are laid out for 2-byte elements: f16/bf16 only.
static_assert(!(Cfg::TMA && Cfg::TF32), "TMA producer: f16/bf16 only");
constexpr int kConsumers = Cfg::BM / 64;
constexpr int kProducerThreads = 128;
constexpr int kAccs = Cfg::BN / 2;
/// The accumulators' type: s32 for int8, f32 otherwise.
template <bool Integer> struct AccumulatorOf {
  using type = float;
};
template <> struct AccumulatorOf<true> {
  using type = int;
};
using Acc = AccumulatorOf<Cfg::INT8>::type;
static_assert(!Cfg::INT8 || Cfg::SPLITK == 1,
              "the int8 epilogue needs the whole sum: no split-K");

/// A K-major tile: Rows rows (m or n) of 64 K elements.
template <int Rows> struct KMajorTile {
  static constexpr int kRows = Rows;
  static constexpr int kChunks = 8;
  static constexpr int kBytes = Rows * 128;
  static KILN_INLINE u32 chunkOffset(int row, int chunk) {
    return (u32)(row * 128 + ((chunk ^ (row & 7)) << 4));
  }
};

/// An MN-major tile: 64 K rows of MN elements, in blocks of 64 elements.
template <int MN> struct MnMajorTile {
  static constexpr int kRows = 64;
  static constexpr int kChunks = MN / 8;
  static constexpr int kBytes = MN * 128;
  static KILN_INLINE u32 chunkOffset(int row, int chunk) {
    return (u32)((chunk >> 3) * 8192 + row * 128 +
                 (((chunk & 7) ^ (row & 7)) << 4));
  }
};

template <bool KContig, int MN> struct SelectTile {
  using type = KMajorTile<MN>;
};
template <int MN> struct SelectTile<false, MN> {
  using type = MnMajorTile<MN>;
};

using TileA = SelectTile<kAKMajor, Cfg::BM>::type;
using TileB = SelectTile<kBKMajor, Cfg::BN>::type;
constexpr int kStageBytes = TileA::kBytes + TileB::kBytes;

/// No "memory" clobber: the next chunks' global loads may be issued
/// before this store (nothing in the kernel writes what they read); it
/// stays before the fence and arrive that publish it (volatile asm keeps
/// its order).
KILN_INLINE void storeShared4(u32 address, float x, float y, float z,
                              float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address),
               "f"(x), "f"(y), "f"(z), "f"(w));
}

/// Stages an MN-major fp32 operand ([K][MN] in global memory, leading
/// dimension Ld) K-major for tf32 wgmma. Thread q handles chunk q / Rows
/// of tile row q % Rows: it reads that column's four K elements (adjacent
/// threads read adjacent columns, so each K row is one coalesced access),
/// zero past MN or the split's K, and stores them as one 16-byte chunk
/// (8 adjacent rows' chunks are swizzled onto distinct banks).
template <class Tile, i64 Ld, int Threads> struct TransposingLoader {
  static constexpr int kUnits = Tile::kRows * Tile::kChunks;
  static_assert(kUnits % Threads == 0, "whole chunks per thread");
  static constexpr int kIters = kUnits / Threads;
  const float *base;
  int mn0, mnEnd, kBegin, kEnd;

  KILN_INLINE static bool allInside(int mnOrigin, int mnLimit) {
    return mnOrigin + Tile::kRows <= mnLimit;
  }
  KILN_INLINE void init(const char *operand, int mnOrigin, int mnLimit,
                        int kFirst, int kLimit) {
    base = (const float *)operand, mn0 = mnOrigin, mnEnd = mnLimit,
    kBegin = kFirst, kEnd = kLimit;
  }
  KILN_INLINE void load(u32 tile, int t, bool interior) const {
    const int k0 = kBegin + t * Cfg::BK;
    // Four chunks' loads in flight at a time: a fully unrolled loop would
    // keep up to 64 values live in the producer's 56 registers.
#pragma unroll 4
    for (int i = 0; i < kIters; ++i) {
      const int q = (int)threadIdx.x + i * Threads;
      const int r = q % Tile::kRows, ch = q / Tile::kRows;
      const int mn = mn0 + r, k = k0 + ch * 4;
      const float *from = base + (i64)k * Ld + mn;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        v[e] = interior || (mn < mnEnd && k + e < kEnd) ? from[e * Ld] : 0.0f;
      storeShared4(tile + Tile::chunkOffset(r, ch), v[0], v[1], v[2], v[3]);
    }
  }
};

/// A and B's loaders: the implicit convolution's gather for A, a
/// transposing copy for an MN-major tf32 operand, cp.async otherwise.
template <bool Conv, bool Transpose> struct SelectLoaderA {
  using type = tc::OperandLoader<TileA, Cfg::VEC_A, Cfg::A_K_CONTIG, Cfg::LDA,
                                 kProducerThreads>;
};
template <bool Transpose> struct SelectLoaderA<true, Transpose> {
  using type = tc::ConvLoaderA<TileA, kProducerThreads>;
};
template <> struct SelectLoaderA<false, true> {
  using type = TransposingLoader<TileA, Cfg::LDA, kProducerThreads>;
};
template <bool Transpose> struct SelectLoaderB {
  using type = tc::OperandLoader<TileB, Cfg::VEC_B, Cfg::B_K_CONTIG, Cfg::LDB,
                                 kProducerThreads>;
};
template <> struct SelectLoaderB<true> {
  using type = TransposingLoader<TileB, Cfg::LDB, kProducerThreads>;
};
constexpr bool kTransposeA = !Cfg::CONV && !Cfg::A_K_CONTIG && Cfg::TF32;
constexpr bool kTransposeB = !Cfg::B_K_CONTIG && Cfg::TF32;
using LoaderA = SelectLoaderA<Cfg::CONV, kTransposeA>::type;
using LoaderB = SelectLoaderB<kTransposeB>::type;
/// A 16-bit copy narrower than 4 bytes goes through registers (no
/// cp.async): the producer waits for its copies and arrives itself.
constexpr bool kRegisterCopies =
    Cfg::VEC_A * kEB < 4 || Cfg::VEC_B * kEB < 4;
/// Otherwise each producer thread arrives on `full` once when its cp.async
/// copies land (if it issues any) and once after its transposing stores
/// (if it makes any).
constexpr bool kAsyncArrive =
    !kRegisterCopies && !(kTransposeA && kTransposeB);
/// An int8 convolution writes A's zero point into padding pixels with
/// st.shared (tc::ConvLoaderA).
constexpr bool kPadStores = Cfg::INT8 && Cfg::CONV && Cfg::CONV_PAD_BYTE != 0;
constexpr bool kStoreArrive =
    kRegisterCopies || kTransposeA || kTransposeB || kPadStores;
constexpr u32 kFullArrivals =
    kProducerThreads * ((kAsyncArrive ? 1 : 0) + (kStoreArrive ? 1 : 0));

// --- barriers ----------------------------------------------------------------
// mbarrier phases, cp.async arrival, the proxy fence: Sm90.cuh.
using namespace sm90;

KILN_INLINE void consumerBarrier() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers * 128) : "memory");
}

/// tf32: rounds every fp32 of the stage at `stage` to tf32 (cvt.rna) in
/// place, the consumers' threads sharing its 16-byte chunks, and publishes
/// the stores to the async proxy, where wgmma reads them. Every consumer
/// has waited for the stage's `full` phase; after this no consumer writes
/// the stage until the producer refills it (after every consumer's `empty`
/// arrival), and consumerBarrier orders the stores before any wgmma.
KILN_INLINE void roundStageTf32(u32 stage) {
  constexpr int kChunks = kStageBytes / 16, kThreads = kConsumers * 128;
  static_assert(kChunks % kThreads == 0, "whole chunks per consumer thread");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const u32 at = stage + 16u * (u32)(((int)threadIdx.x - 128) + i * kThreads);
    u32 v[4];
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(at)
                 : "memory");
#pragma unroll
    for (int e = 0; e < 4; ++e)
      v[e] = toTf32(v[e]);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(at),
                 "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
  }
  fenceProxyAsync();
  consumerBarrier();
}

// --- TMA ---------------------------------------------------------------------

/// Arrives on `bar` and adds `bytes` to the transactions its phase waits for.
KILN_INLINE void mbarrierArriveExpectTx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   bar),
               "r"(bytes)
               : "memory");
}
/// One box of `map` at {c0, c1} (and c2, the batch, when Batched) into
/// shared memory at `dst`, completing `bytes` transactions on `bar`.
template <bool Batched>
KILN_INLINE void tmaLoad(u32 dst, const TensorMap *map, u32 bar, int c0,
                         int c1, int c2) {
  if (Batched)
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
                 "complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(
                     dst),
                 "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                 "complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
                 "l"(map), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
/// One operand's tile for K offset k: a K-major tile is one box (64 K by
/// the tile's rows), an MN-major one a box per 64-element block.
template <bool KContig, int MN, bool Batched>
KILN_INLINE void tmaLoadTile(u32 dst, const TensorMap *map, u32 bar, int k,
                             int mn0, int batch) {
  if (KContig) {
    tmaLoad<Batched>(dst, map, bar, k, mn0, batch);
  } else {
#pragma unroll
    for (int i = 0; i < MN / 64; ++i)
      tmaLoad<Batched>(dst + i * 8192, map, bar, mn0 + 64 * i, k, batch);
  }
}

// --- wgmma -------------------------------------------------------------------
// Descriptors, fence, commit and wait: Sm90.cuh.

/// Keeps the compiler from moving accumulator accesses across the
/// asynchronous MMAs that own the registers.
template <int N> KILN_INLINE void fenceAccumulators(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(acc[i])::"memory");
}
template <int N> KILN_INLINE void fenceAccumulators(int (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+r"(acc[i])::"memory");
}

/// Descriptor of the consumer's A (its 64 rows) and of B at k16 step 0.
KILN_INLINE u64 descriptorA(u32 stage, int consumer) {
  if (kAKMajor)
    return descriptor(stage + consumer * 64 * 128, 16, 1024);
  return descriptor(stage + consumer * 8192, 8192, 1024);
}
KILN_INLINE u64 descriptorB(u32 stage) {
  u32 tile = stage + TileA::kBytes;
  return kBKMajor ? descriptor(tile, 16, 1024) : descriptor(tile, 8192, 1024);
}
/// What an MMA's K step adds to a descriptor (the start address, in 16
/// bytes): 32 bytes K-major, 16 K rows (2 KiB) MN-major.
constexpr u64 kStepA = kAKMajor ? 32 >> 4 : 2048 >> 4;
constexpr u64 kStepB = kBKMajor ? 32 >> 4 : 2048 >> 4;

/// One output of the consumers' block tile, through shared memory
/// (tc::storeTile's layout and passes: 0 stores C and leaves the second
/// output's values in `acc`, 1 stores those) to `out` (the batch's base).
/// The caller synchronises the consumers before.
template <int Pass, int Code, int Bytes, int Vec>
KILN_INLINE void storeTile(Acc (&acc)[kAccs], u32 shared, char *out, int m0,
                           int M, int n0, unsigned batch, int rowBase, int t,
                           const EpilogueArgs &ep) {
  const int kEpiCol = batch * Cfg::EPI_COL_PER_BATCH;
#pragma unroll
  for (int j = 0; j < Cfg::BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int r = rowBase + 8 * h, cl = 8 * j + 2 * t;
      int row = m0 + r, col = n0 + cl;
      float v[2] = {0.0f, 0.0f};
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (Pass == 1 || (row < M && col + e < (int)Cfg::N))
          v[e] = tc::outputOf<Pass>(acc[4 * j + 2 * h + e], batch, row,
                                    col + e + kEpiCol, ep);
      tc::storeStagedPair<Code>(shared + r * tc::outPitch<Bytes>() +
                                    cl * Bytes,
                                v[0], v[1]);
    }
  consumerBarrier();
  tc::writeStaged<kConsumers * 128, Bytes, Vec>(shared, out, m0, M, n0,
                                                (int)threadIdx.x - 128);
}

KILN_INLINE void gemm(const void *aPtr, const void *bPtr, void *cPtr,
                      float *workspace, u32 M, u64 batchStrideA,
                      u64 batchStrideC, const EpilogueArgs &ep,
                      unsigned *semaphores = nullptr,
                      const TensorMap *mapA = nullptr,
                      const TensorMap *mapB = nullptr) {
  extern __shared__ __align__(1024) unsigned char sharedBytes[];
  // Swizzling works on address bits: the ring starts 1024-byte aligned.
  const u32 shared = (sharedAddress(sharedBytes) + 1023) & ~1023u;
  constexpr u32 kPipelineBytes = Cfg::STAGES * kStageBytes;
  // int8 stores from registers; its tile of ones follows the ring.
  constexpr u32 kStagedBytes = Cfg::INT8 ? 0 : Cfg::BM * tc::kOutPitch;
  constexpr u32 kOnesBytes = Cfg::INT8 ? 1024 : 0;
  constexpr u32 kRingBytes =
      (kPipelineBytes > kStagedBytes ? kPipelineBytes : kStagedBytes) +
      kOnesBytes;
  const u32 ones = shared + kPipelineBytes;
  const u32 fullBars = shared + kRingBytes;
  const u32 emptyBars = fullBars + 8 * Cfg::STAGES;

  const int warpgroup = threadIdx.x / 128;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  const unsigned batch = blockIdx.z / Cfg::SPLITK;
  const int split = blockIdx.z % Cfg::SPLITK;

  constexpr int kTilesTotal = (int)((Cfg::K + Cfg::BK - 1) / Cfg::BK);
  constexpr int kTilesPerSplit = (kTilesTotal + Cfg::SPLITK - 1) / Cfg::SPLITK;
  const int kBegin = split * kTilesPerSplit * Cfg::BK;
  int kEnd = kBegin + kTilesPerSplit * Cfg::BK;
  kEnd = kEnd < (int)Cfg::K ? kEnd : (int)Cfg::K;
  const int kTiles =
      kEnd > kBegin ? (kEnd - kBegin + Cfg::BK - 1) / Cfg::BK : 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::STAGES; ++s) {
      // TMA: the one issuing thread arrives (with the stage's bytes).
      mbarrierInit(fullBars + 8 * s, Cfg::TMA ? 1 : kFullArrivals);
      mbarrierInit(emptyBars + 8 * s, kConsumers * 128);
    }
    if (Cfg::TMA) // the copy engine (async proxy) sees the initialised barriers
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (Cfg::INT8 && Cfg::Q_ROWSUM && threadIdx.x < kOnesBytes / 16) {
    // B = ones for A's row sums (wgmmaRowSum), read by the async proxy.
    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(
                     ones + 16 * threadIdx.x),
                 "r"(0x01010101u)
                 : "memory");
    fenceProxyAsync();
  }
  __syncthreads();

  Acc acc[kAccs];
  int rowSum[4]; // int8 with B's zero points: A's row sums (wgmmaRowSum)
  if (warpgroup == 0) {
    // --- Producer ---
    if (kConsumers == 2)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
    if (Cfg::TMA) {
      if (threadIdx.x == 0) {
        int s = 0;
        u32 parity = 0;
        for (int kt = 0; kt < kTiles; ++kt) {
          if (kt >= Cfg::STAGES)
            mbarrierWait(emptyBars + 8 * s, parity ^ 1);
          const u32 stage = shared + s * kStageBytes, full = fullBars + 8 * s;
          // Every box's bytes count, those filled past an edge too.
          mbarrierArriveExpectTx(full, kStageBytes);
          const int k = kBegin + kt * Cfg::BK;
          tmaLoadTile<Cfg::A_K_CONTIG, Cfg::BM, Cfg::TMA_A_BATCHED>(
              stage, mapA, full, k, m0, (int)batch);
          tmaLoadTile<Cfg::B_K_CONTIG, Cfg::BN, Cfg::TMA_B_BATCHED>(
              stage + TileA::kBytes, mapB, full, k, n0, (int)batch);
          if (++s == Cfg::STAGES)
            s = 0, parity ^= 1;
        }
      }
      return;
    }
    const char *a = (const char *)aPtr + batch * batchStrideA * kEB;
    const char *b = (const char *)bPtr + batch * (u64)Cfg::STRIDE_B * kEB;
    LoaderA loaderA;
    LoaderB loaderB;
    loaderA.init(a, m0, (int)M, kBegin, kEnd);
    loaderB.init(b, n0, (int)Cfg::N, kBegin, kEnd);
    const int wholeTiles = (kEnd - kBegin) / Cfg::BK;
    const bool insideA = LoaderA::allInside(m0, (int)M);
    const bool insideB = LoaderB::allInside(n0, (int)Cfg::N);
    int s = 0;
    u32 parity = 0;
    for (int kt = 0; kt < kTiles; ++kt) {
      if (kt >= Cfg::STAGES)
        mbarrierWait(emptyBars + 8 * s, parity ^ 1);
      const u32 stage = shared + s * kStageBytes;
      // cp.async copies first, so they fly while the transposing ones
      // wait for their loads.
      if (!kTransposeA)
        loaderA.load(stage, kt, insideA && kt < wholeTiles);
      if (!kTransposeB)
        loaderB.load(stage + TileA::kBytes, kt, insideB && kt < wholeTiles);
      if (kAsyncArrive)
        cpAsyncArriveNoinc(fullBars + 8 * s);
      if (kTransposeA)
        loaderA.load(stage, kt, insideA && kt < wholeTiles);
      if (kTransposeB)
        loaderB.load(stage + TileA::kBytes, kt, insideB && kt < wholeTiles);
      if (kStoreArrive) {
        if (kRegisterCopies)
          cpAsyncWaitAll();
        fenceProxyAsync();
        mbarrierArrive(fullBars + 8 * s);
      }
      if (++s == Cfg::STAGES)
        s = 0, parity ^= 1;
    }
    // The producer's work ends here: its last copies complete before the
    // consumers' last `full` wait returns.
    cpAsyncWaitAll();
    return;
  } else {
    // --- Consumers ---
    if (kConsumers == 2)
      asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    const int consumer = warpgroup - 1;
    // The registers the asynchronous MMAs own: the accumulators, and A's
    // row sums when the int8 epilogue needs them.
    auto fenceAll = [&] {
      fenceAccumulators(acc);
      if constexpr (Cfg::INT8 && Cfg::Q_ROWSUM)
        fenceAccumulators(rowSum);
    };
#pragma unroll
    for (int i = 0; i < kAccs; ++i)
      acc[i] = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      rowSum[i] = 0;
    int s = 0, previous = 0;
    u32 parity = 0;
    for (int kt = 0; kt < kTiles; ++kt) {
      mbarrierWait(fullBars + 8 * s, parity);
      if (!Cfg::TMA) // cp.async wrote in the generic proxy
        fenceProxyAsync();
      const u32 stage = shared + s * kStageBytes;
      if constexpr (Cfg::TF32)
        roundStageTf32(stage);
      const u64 da = descriptorA(stage, consumer), db = descriptorB(stage);
      fenceAll();
      wgmmaFence();
#pragma unroll
      for (int ks = 0; ks < Cfg::BK / kMmaK; ++ks) {
        wgmmaTile(acc, da + ks * kStepA, db + ks * kStepB);
        if constexpr (Cfg::INT8 && Cfg::Q_ROWSUM)
          wgmmaRowSum(rowSum, da + ks * kStepA,
                      descriptor(ones, 16, 1024) + ks * kStepB);
      }
      wgmmaCommit();
      fenceAll();
      wgmmaWait<1>();
      fenceAll();
      if (kt > 0)
        mbarrierArrive(emptyBars + 8 * previous);
      previous = s;
      if (++s == Cfg::STAGES)
        s = 0, parity ^= 1;
    }
    wgmmaWait<0>();
    fenceAll();
  }

  // Fragment position of accumulator 4j + 2h + e of a consumer thread:
  // row 16 w + g + 8 h of its 64, column 8 j + 2 t + e.
  const int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4;
  const int g = lane / 4, t = lane % 4;
  const int rowBase = (warpgroup - 1) * 64 + 16 * w + g;
  if constexpr (Cfg::INT8) {
    // The integer epilogue, from registers. Row sum h (rows g, g + 8) is
    // wgmmaRowSum's accumulator 2h (every column of it is the sum).
    char *c = (char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES;
    // A residual block's R has C's layout (and 1-byte elements).
    const char *residual =
        Cfg::Q_RESIDUAL ? (const char *)ep.residual + batch * batchStrideC
                        : nullptr;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + rowBase + 8 * h;
      if (row >= (int)M)
        continue;
#pragma unroll
      for (int j = 0; j < Cfg::BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = n0 + 8 * j + 2 * t + e;
          if (col >= (int)Cfg::N)
            continue;
          // A convolution's vectors run over the channels of every group.
          q8::store(c, residual, (i64)row * Cfg::LDC + col,
                    (u32)acc[4 * j + 2 * h + e], (u32)rowSum[2 * h],
                    col + (int)batch * Cfg::EPI_COL_PER_BATCH, ep);
        }
    }
  } else {
    // The float epilogue (not instantiated for int8: storeTile stages f32).
    if (Cfg::SPLITK > 1) {
      const unsigned batches = gridDim.z / Cfg::SPLITK;
      float *ws = workspace + ((i64)split * batches + batch) * M * Cfg::N;
#pragma unroll
      for (int j = 0; j < Cfg::BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int row = m0 + rowBase + 8 * h;
          int col = n0 + 8 * j + 2 * t;
          if (row >= (int)M || col >= (int)Cfg::N)
            continue;
          float *to = ws + (i64)row * Cfg::N + col;
          if (Cfg::N % 2 == 0) {
            *(float2 *)to =
                make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
          } else {
            to[0] = acc[4 * j + 2 * h];
            if (col + 1 < (int)Cfg::N)
              to[1] = acc[4 * j + 2 * h + 1];
          }
        }
      // The last split of the tile finishes it (SplitKReduce.cuh), among the
      // consumers alone: the producer warpgroup has returned.
      __threadfence();
      consumerBarrier(); // every consumer's partials before the count
      u32 last = 0;
      if (threadIdx.x == 128)
        last = splitk::arrive(semaphores, batch);
      asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\t"
                   "bar.red.or.pred q, 1, %2, p;\n\tselp.u32 %0, 1, 0, q;\n\t}"
                   : "=r"(last)
                   : "r"(last), "n"(kConsumers * 128)
                   : "memory");
      if (!last)
        return;
      __threadfence();
      splitk::finishTile<kConsumers * 128>(workspace, cPtr, M, batchStrideC,
                                           ep, batch, m0, n0,
                                           (int)threadIdx.x - 128);
      return;
    }

    // Every consumer is done with the ring (named barrier 1: the consumers
    // alone).
    consumerBarrier();
    storeTile<0, Cfg::OUT_CODE, Cfg::OUT_BYTES, Cfg::VEC_C>(
        acc, shared, (char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES, m0,
        (int)M, n0, batch, rowBase, t, ep);
    if constexpr (Cfg::AUX_CODE != kElementNone) {
      consumerBarrier(); // C's staged tile is out
      storeTile<1, Cfg::AUX_CODE, Cfg::AUX_BYTES, Cfg::VEC_AUX>(
          acc, shared, (char *)ep.aux + batch * batchStrideC * Cfg::AUX_BYTES,
          m0, (int)M, n0, batch, rowBase, t, ep);
    }
  }
}

} // namespace wg

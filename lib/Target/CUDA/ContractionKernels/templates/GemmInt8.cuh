//===- GemmInt8.cuh - mma.sync m16n8k32 int8 GEMM, integer epilogue -------===//
//
// The int8 family (Family::MmaS8): s8/u8 x s8/u8 -> s32 on sm_80 and later.
// It is GemmTensorCore.cuh's kernel with 1-byte elements, and reuses its
// pieces: the cp.async loaders (a 16-byte chunk is 16 elements), the
// swizzled tiles and the fragment addresses. Both operands are K-major in
// shared memory (A row-major, B stored [N][K]), so one ldmatrix.x4 (which
// moves 8 x 16-byte rows per matrix, whatever the element) gives exactly
// the m16n8k32 A fragment (rows g and g + 8, bytes 4t..4t+3 of k 0..15 and
// 16..31) and two B fragments; ldmatrix cannot transpose bytes, which is
// why the family needs K-contiguous operands.
//
// The accumulators are s32 and wrap, like the reference's int32 GEMM. The
// epilogue (IntegerEpilogue.cuh) runs in registers. A's row sums, needed
// only when B has a zero point, come from one more m16n8k32 per row tile
// and K step against a B of ones. Outputs are stored from registers, one
// element at a time (no staging through shared memory yet).
//
// An implicit-GEMM NHWC convolution (Cfg::CONV) uses GemmTensorCore.cuh's
// ConvLoaderA with 16-channel chunks; a pixel outside the image reads A's
// zero point (IntegerEpilogue::paddingValue) in its real channels, so the
// host's zero-point terms (computed over every tap) stay exact at borders.
//
// No split-K: the requantization needs the whole sum.
//
//===----------------------------------------------------------------------===//

namespace i8 {

using tc::kKSteps;
using tc::kMI;
using tc::kNI;
using tc::kStageBytes;
using tc::TileA;
using tc::TileB;

static_assert(Cfg::INT8 && Cfg::A_K_CONTIG && Cfg::B_K_CONTIG,
              "the int8 kernel reads both operands K-major");
static_assert(tc::kKStep == 32, "one m16n8k32 per K step");

KILN_INLINE void computeStage(int (&acc)[kMI][kNI][4], int (&rowSum)[kMI][4],
                              u32 stage, const tc::FragmentOffsets &off) {
  u32 tileA = stage, tileB = stage + TileA::kBytes;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    u32 a[kMI][4];
    u32 b[kNI / 2][4];
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
      ldmatrixX4(a[mi], tileA + off.a[mi][ks]);
#pragma unroll
    for (int p = 0; p < kNI / 2; ++p)
      ldmatrixX4(b[p], tileB + off.b[p][ks]);
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        const u32 *bb = &b[ni / 2][(ni % 2) * 2];
        mmaM16N8K32I8<Cfg::A_U8, Cfg::B_U8>(acc[mi][ni], a[mi], bb[0], bb[1]);
      }
      if (Cfg::Q_ROWSUM) // every column of the product with ones: the row sum
        mmaM16N8K32I8<Cfg::A_U8, false>(rowSum[mi], a[mi], 0x01010101u,
                                        0x01010101u);
    }
  }
}

KILN_INLINE void gemm(const void *aPtr, const void *bPtr, void *cPtr, float *,
                      u32 M, u64 batchStrideA, u64 batchStrideC,
                      const EpilogueArgs &ep) {
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  const u32 shared = sharedAddress(sharedBytes);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp % tc::kWarpsM, wn = warp / tc::kWarpsM;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  const unsigned batch = blockIdx.z;
  const char *a = (const char *)aPtr + batch * batchStrideA;
  const char *b = (const char *)bPtr + batch * (u64)Cfg::STRIDE_B;

  constexpr int kTiles = (int)((Cfg::K + Cfg::BK - 1) / Cfg::BK);
  constexpr int kWholeTiles = (int)(Cfg::K / Cfg::BK);

  int acc[kMI][kNI][4];
  int rowSum[kMI][4];
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[mi][ni][e] = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      rowSum[mi][e] = 0;
  }

  tc::FragmentOffsets offsets;
  offsets.init(wm, wn, lane);
  tc::LoaderA loaderA;
  tc::LoaderB loaderB;
  loaderA.init(a, m0, (int)M, 0, (int)Cfg::K);
  loaderB.init(b, n0, (int)Cfg::N, 0, (int)Cfg::K);
  tc::runPipeline(shared, loaderA, loaderB, kTiles, kWholeTiles,
                  tc::LoaderA::allInside(m0, (int)M),
                  tc::LoaderB::allInside(n0, (int)Cfg::N), [&](u32 stage) {
                    computeStage(acc, rowSum, stage, offsets);
                  });

  // Accumulator e of an mma tile: row g + 8 * (e / 2), column 2t + e % 2.
  const int g = lane / 4, t = lane % 4;
  char *c = (char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES;
  // A residual block's R has C's layout (and 1-byte elements).
  const char *residual =
      Cfg::Q_RESIDUAL ? (const char *)ep.residual + batch * batchStrideC
                      : nullptr;
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int row = m0 + wm * Cfg::WTM + mi * 16 + g + 8 * h;
      if (row >= (int)M)
        continue;
      u32 rs = (u32)rowSum[mi][2 * h];
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int col = n0 + wn * Cfg::WTN + ni * 8 + 2 * t + e;
          if (col >= (int)Cfg::N)
            continue;
          // A convolution's vectors run over the channels of every group.
          int channel = col + (int)batch * Cfg::EPI_COL_PER_BATCH;
          q8::store(c, residual, (i64)row * Cfg::LDC + col,
                    (u32)acc[mi][ni][2 * h + e], rs, channel, ep);
        }
    }
}

} // namespace i8

//===- IntegerEpilogue.cuh - The int8 families' requantizing epilogue ----===//
//
// What the int8 kernels (GemmInt8.cuh's mma.sync, GemmWgmma.cuh's wgmma)
// do with each s32 accumulator, in registers (IntegerEpilogue in
// ContractionKernels.h):
//   v = acc + offset[n] - zeroPointB[n] * rowsum_A[m]   (s32, wrapping)
//   I32 output: v; I8/U8: rni(clamp(f32(v) * scale, lo - zy, hi - zy)) + zy
// which is onnxruntime's MlasRequantizeOutput step for step (its
// clamp-then-round equals round-then-saturate, the bounds being integers).
// Both fragments hold each accumulator beside its row and column, so both
// kernels store from registers, one element at a time.
//
//===----------------------------------------------------------------------===//

namespace q8 {

/// The output type's range.
constexpr int kLow = Cfg::OUT_CODE == kElementU8 ? 0 : -128;
constexpr int kHigh = Cfg::OUT_CODE == kElementU8 ? 255 : 127;

/// Stores output `index` of C (the batch's base) from its accumulator and
/// its row's sum of A; `channel` indexes the per-column vectors (a
/// convolution's channel across groups).
KILN_INLINE void store(char *c, i64 index, u32 acc, u32 rowSum, int channel,
                       const EpilogueArgs &ep) {
  // Unsigned arithmetic: the s32 sums wrap, as the reference's.
  u32 v = acc;
  if (Cfg::Q_OFFSET)
    v += (u32)((const int *)ep.bias)[channel];
  if (Cfg::Q_ROWSUM)
    v -= (u32)((const int *)ep.zeroPointB)[channel] * rowSum;
  if (Cfg::OUT_CODE == kElementS32) {
    ((int *)c)[index] = (int)v;
    return;
  }
  float scale =
      Cfg::Q_SCALE_VECTOR ? ((const float *)ep.scale)[channel] : Cfg::Q_SCALE;
  float f;
  asm("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(v));
  asm("mul.rn.f32 %0, %0, %1;" : "+f"(f) : "f"(scale));
  f = fminf(fmaxf(f, (float)(kLow - Cfg::Q_ZP)), (float)(kHigh - Cfg::Q_ZP));
  int r;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(r) : "f"(f));
  ((unsigned char *)c)[index] = (unsigned char)(r + Cfg::Q_ZP);
}

} // namespace q8

//===- IntegerEpilogue.cuh - The int8 families' requantizing epilogue ----===//
//
// What the int8 kernels (GemmInt8.cuh's mma.sync, GemmWgmma.cuh's wgmma)
// do with each s32 accumulator, in registers (IntegerEpilogue in
// ContractionKernels.h):
//   v = acc + offset[n] - zeroPointB[n] * rowsum_A[m]   (s32, wrapping)
//   I32 output: v; I8/U8: rni(clamp(f32(v) * scale, lo - zy, hi - zy)) + zy
// which is onnxruntime's MlasRequantizeOutput step for step (its
// clamp-then-round equals round-then-saturate, the bounds being integers).
// With a residual block (Cfg::Q_RESIDUAL) the requantized value q goes on
// through onnxruntime's unfused QDQ residual add, one f32 operation per
// step (explicit PTX, so nothing is contracted into an fma):
//   s = (f32(q) - zy) * RES_Q_SCALE + ((f32(R) - RES_ZP) * RES_SCALE)
//   [s = max(s, 0)];  C = rni(clamp(s / SUM_SCALE, lo - zs, hi - zs)) + zs
// Both fragments hold each accumulator beside its row and column, so both
// kernels store from registers, one element at a time.
//
//===----------------------------------------------------------------------===//

namespace q8 {

/// The requantized value's range, and the output's (they differ only
/// with a residual block).
constexpr int kLow = Cfg::Q_MID_CODE == kElementU8 ? 0 : -128;
constexpr int kHigh = Cfg::Q_MID_CODE == kElementU8 ? 255 : 127;
constexpr int kOutLow = Cfg::OUT_CODE == kElementU8 ? 0 : -128;
constexpr int kOutHigh = Cfg::OUT_CODE == kElementU8 ? 255 : 127;

KILN_INLINE float sub(float a, float b) {
  asm("sub.rn.f32 %0, %0, %1;" : "+f"(a) : "f"(b));
  return a;
}
KILN_INLINE float mul(float a, float b) {
  asm("mul.rn.f32 %0, %0, %1;" : "+f"(a) : "f"(b));
  return a;
}
KILN_INLINE float toFloat(int v) {
  float f;
  asm("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(v));
  return f;
}

/// The residual block's output from the requantized value `q`.
KILN_INLINE int residualBlock(int q, const char *residual, i64 index) {
  const int stored = Cfg::RES_U8
                         ? (int)((const unsigned char *)residual)[index]
                         : (int)((const signed char *)residual)[index];
  float d = mul(sub(toFloat(q), (float)Cfg::Q_ZP), Cfg::RES_Q_SCALE);
  float r = mul(sub(toFloat(stored), (float)Cfg::RES_ZP), Cfg::RES_SCALE);
  float s;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(s) : "f"(d), "f"(r));
  if (Cfg::RES_RELU)
    s = fmaxf(s, 0.0f);
  asm("div.rn.f32 %0, %0, %1;" : "+f"(s) : "f"(Cfg::SUM_SCALE));
  s = fminf(fmaxf(s, (float)(kOutLow - Cfg::SUM_ZP)),
            (float)(kOutHigh - Cfg::SUM_ZP));
  int v;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(v) : "f"(s));
  return v + Cfg::SUM_ZP;
}

/// Stores output `index` of C (`c`, the batch's base; `residual` the
/// residual's at the same offset) from its accumulator and its row's sum
/// of A; `channel` indexes the per-column vectors (a convolution's channel
/// across groups).
KILN_INLINE void store(char *c, const char *residual, i64 index, u32 acc,
                       u32 rowSum, int channel, const EpilogueArgs &ep) {
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
  float f = mul(toFloat((int)v), scale);
  f = fminf(fmaxf(f, (float)(kLow - Cfg::Q_ZP)), (float)(kHigh - Cfg::Q_ZP));
  int r;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(r) : "f"(f));
  const int q = r + Cfg::Q_ZP;
  ((unsigned char *)c)[index] =
      (unsigned char)(Cfg::Q_RESIDUAL ? residualBlock(q, residual, index) : q);
}

} // namespace q8

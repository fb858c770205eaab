//===- Depthwise.cuh - Depthwise NHWC convolution on CUDA cores -----------===//
//
// One input channel per group (MobileNet's 3x3 layers): a
// GEMM would waste 7/8 of every tensor-core K chunk on zeros, and the work
// is a few multiply-adds per loaded byte, so the kernel is bandwidth-bound
// CUDA-core code. Thread t computes Cfg::VEC consecutive channels of
// Cfg::PIX consecutive output pixels of one row (each tap's filter vector
// is loaded once for them): consecutive threads take consecutive channel
// vectors, so a
// warp's image loads, filter loads and stores are contiguous 16-byte
// vectors (NHWC keeps the channels innermost). The filter is read as
// [KH][KW][C] (the compiler reorders it), so each tap is one vector load
// too. Accumulation is fp32; the generated epilogue (`kilnEpilogue`, row =
// output pixel, col = channel) runs on each accumulator before the store.
//
// Output channel o reads input channel o / MULT (a channel multiplier:
// O = MULT * C); with MULT > 1 the image is read one element at a time.
//
// Cfg (generated): H, W, C (input channels), O = MULT * C, P, Q, KH, KW,
// SH, SW, PH, PW, DH, DW, VEC, PIX, IN_CODE, OUT_CODE, THREADS, and M
// (output pixels: N*P*Q).
//
//===----------------------------------------------------------------------===//

namespace kiln_dw {

constexpr int kInBytes = Cfg::IN_CODE == kElementF32 ? 4 : 2;
constexpr int kOutBytes = Cfg::OUT_CODE == kElementF32 ? 4 : 2;

/// 32-bit words of `Bytes` bytes at `p` (1 to 16, a power of two, aligned).
template <int Bytes>
KILN_INLINE void loadWords(const void *p, u32 (&w)[(Bytes + 3) / 4]) {
  if (Bytes == 16)
    asm volatile("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p));
  else if (Bytes == 8)
    asm volatile("ld.global.nc.v2.b32 {%0, %1}, [%2];"
                 : "=r"(w[0]), "=r"(w[1])
                 : "l"(p));
  else if (Bytes == 4)
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(w[0]) : "l"(p));
  else {
    u16 h;
    asm volatile("ld.global.nc.b16 %0, [%1];" : "=h"(h) : "l"(p));
    w[0] = h;
  }
}

/// VEC elements of dtype IN_CODE at element `i` of `p`, as floats.
KILN_INLINE void loadVector(const void *p, i64 i, float (&v)[Cfg::VEC]) {
  constexpr int kBytes = Cfg::VEC * kInBytes;
  u32 w[(kBytes + 3) / 4];
  loadWords<kBytes>((const char *)p + i * kInBytes, w);
#pragma unroll
  for (int j = 0; j < Cfg::VEC; ++j) {
    if (Cfg::IN_CODE == kElementF32) {
      v[j] = __uint_as_float(w[j]);
    } else {
      u16 h = (u16)(w[j / 2] >> (16 * (j % 2)));
      v[j] = Cfg::IN_CODE == kElementF16 ? f16ToFloat(h) : bf16ToFloat(h);
    }
  }
}

/// VEC outputs at element `i` of `p`, in 16-byte stores (one, or two for
/// eight f32 outputs of 16-bit inputs) or one narrower store.
KILN_INLINE void storeVector(void *p, i64 i, const float (&v)[Cfg::VEC]) {
  constexpr int kBytes = Cfg::VEC * kOutBytes;
  char *at = (char *)p + i * kOutBytes;
  u32 w[(kBytes + 3) / 4 > 4 ? (kBytes + 3) / 4 : 4];
#pragma unroll
  for (int k = 0; k < (int)(sizeof(w) / 4); ++k)
    w[k] = 0;
#pragma unroll
  for (int j = 0; j < Cfg::VEC; ++j) {
    if (Cfg::OUT_CODE == kElementF32)
      w[j] = __float_as_uint(v[j]);
    else
      w[j / 2] |= (u32)(Cfg::OUT_CODE == kElementF16 ? floatToF16(v[j])
                                           : floatToBf16(v[j]))
                  << (16 * (j % 2));
  }
  if (kBytes >= 16) {
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(
                       at + 16 * k),
                   "r"(w[4 * k]), "r"(w[4 * k + 1]), "r"(w[4 * k + 2]),
                   "r"(w[4 * k + 3])
                   : "memory");
  } else if (kBytes == 8)
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(at), "r"(w[0]),
                 "r"(w[1])
                 : "memory");
  else if (kBytes == 4)
    asm volatile("st.global.b32 [%0], %1;" ::"l"(at), "r"(w[0]) : "memory");
  else
    asm volatile("st.global.b16 [%0], %1;" ::"l"(at), "h"((u16)w[0])
                 : "memory");
}

KILN_INLINE void depthwise(const void *image, const void *filter, void *out,
                           const EpilogueArgs &ep) {
  constexpr i64 kVectors = Cfg::O / Cfg::VEC;
  constexpr int kQGroups = (Cfg::Q + Cfg::PIX - 1) / Cfg::PIX;
  i64 index = (i64)blockIdx.x * Cfg::THREADS + threadIdx.x;
  if (index >= Cfg::M / Cfg::Q * kQGroups * kVectors)
    return;
  int c = (int)(index % kVectors) * Cfg::VEC;
  i64 group = index / kVectors;
  int q0 = (int)(group % kQGroups) * Cfg::PIX;
  i64 row = group / kQGroups; // n * P + p
  int p = (int)(row % Cfg::P);
  i64 n = row / Cfg::P;

  float acc[Cfg::PIX][Cfg::VEC];
#pragma unroll
  for (int x = 0; x < Cfg::PIX; ++x)
#pragma unroll
    for (int j = 0; j < Cfg::VEC; ++j)
      acc[x][j] = 0.0f;
  int h0 = p * Cfg::SH - Cfg::PH;
#pragma unroll
  for (int kh = 0; kh < Cfg::KH; ++kh) {
    int h = h0 + kh * Cfg::DH;
    if (h < 0 || h >= Cfg::H)
      continue;
    i64 rowStart = (n * Cfg::H + h) * Cfg::W;
#pragma unroll
    for (int kw = 0; kw < Cfg::KW; ++kw) {
      // One filter vector per tap, shared by the thread's PIX pixels.
      float f[Cfg::VEC];
      loadVector(filter, (i64)(kh * Cfg::KW + kw) * Cfg::O + c, f);
#pragma unroll
      for (int x = 0; x < Cfg::PIX; ++x) {
        int w = (q0 + x) * Cfg::SW - Cfg::PW + kw * Cfg::DW;
        if (q0 + x >= Cfg::Q || w < 0 || w >= Cfg::W)
          continue;
        float v[Cfg::VEC];
        i64 at = (rowStart + w) * Cfg::C;
        if (Cfg::MULT == 1) {
          loadVector(image, at + c, v);
        } else {
#pragma unroll
          for (int j = 0; j < Cfg::VEC; ++j)
            v[j] = loadAsFloat<Cfg::IN_CODE>(image, at + (c + j) / Cfg::MULT);
        }
#pragma unroll
        for (int j = 0; j < Cfg::VEC; ++j)
          acc[x][j] = fmaf(v[j], f[j], acc[x][j]);
      }
    }
  }
#pragma unroll
  for (int x = 0; x < Cfg::PIX; ++x) {
    if (q0 + x >= Cfg::Q)
      break;
    i64 pixel = row * Cfg::Q + q0 + x;
#pragma unroll
    for (int j = 0; j < Cfg::VEC; ++j)
      acc[x][j] = kilnEpilogue(0, (int)pixel, c + j, acc[x][j], ep);
    storeVector(out, pixel * Cfg::O + c, acc[x]);
  }
}

} // namespace kiln_dw

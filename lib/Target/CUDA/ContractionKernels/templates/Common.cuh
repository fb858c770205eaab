//===- Common.cuh - Inline-PTX helpers the contraction kernels share ------===//
//
// Compiled by NVRTC with -default-device and no headers at all: 16-bit
// floats are raw bit patterns converted with cvt, shared memory is addressed
// by 32-bit offsets from the dynamic shared base, and every tensor-core,
// ldmatrix and cp.async instruction is written out as PTX, so the kernels
// contain only instructions the emulator runs.
//
// The generated prelude defines before this file: KILN_IN_BYTES (2 or 4),
// KILN_IN_F16 / KILN_IN_BF16 / KILN_IN_F32, KILN_OUT_* likewise.
//
//===----------------------------------------------------------------------===//

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define KILN_INLINE __device__ __forceinline__

// --- Conversions -----------------------------------------------------------

KILN_INLINE float bf16ToFloat(u16 x) { return __uint_as_float((u32)x << 16); }
KILN_INLINE float f16ToFloat(u16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}
KILN_INLINE u16 floatToBf16(float f) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
KILN_INLINE u16 floatToF16(float f) {
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
/// Two floats as one bf16x2/f16x2 word, `lo` in the low half.
KILN_INLINE u32 packBf16(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
KILN_INLINE u32 packF16(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
KILN_INLINE u32 toTf32(u32 bits) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
  return r;
}

// --- Elementwise semantics shared with the generated kernels ---------------

/// max/min that propagate NaN and order -0 below +0 (IEEE 754-2019
/// maximum/minimum, as PyTorch and onnxruntime propagate NaN): the
/// instructions the generated kernels' arith.maximumf/minimumf lower to, so
/// a fused epilogue's Relu, Clip, Max and Min give the generated kernel's
/// values, NaN included (fmaxf/fminf would drop a NaN operand).
KILN_INLINE float maxNaN(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
KILN_INLINE float minNaN(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

/// Loads element `i` of a vector of element type `Code` (KilnElementType,
/// ElementType.cuh) as float.
template <int Code> KILN_INLINE float loadAsFloat(const void *p, i64 i) {
  if (Code == kElementF32)
    return ((const float *)p)[i];
  if (Code == kElementF16)
    return f16ToFloat(((const u16 *)p)[i]);
  return bf16ToFloat(((const u16 *)p)[i]);
}

/// The value, opaque to the optimiser: a loop-invariant address computed
/// before a loop stays in a register instead of being recomputed inside it.
KILN_INLINE u32 opaque(u32 v) {
  asm volatile("mov.b32 %0, %1;" : "=r"(v) : "r"(v));
  return v;
}

// --- Shared memory ---------------------------------------------------------

KILN_INLINE u32 sharedAddress(const void *p) {
  u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
      : "=r"(r)
      : "l"(p));
  return r;
}

/// An operand tile in shared memory: `Rows` rows of `Cols` elements, the
/// columns contiguous, stored in 16-byte chunks. Chunk c of row r lives at
/// chunk c ^ f(r) of that row, f chosen so that the 8 rows one ldmatrix
/// (or a warp's fragment load) reads at one logical chunk fall on 8
/// different 16-byte bank groups: with 8 or more chunks a row, f(r) = r % 8;
/// with fewer, 8 / chunks rows share a 128-byte line and f(r) = (r /
/// (8 / chunks)) % chunks.
template <int Rows, int Cols, int ElemBytes> struct SwizzledTile {
  static constexpr int kRows = Rows;
  static constexpr int kChunkElems = 16 / ElemBytes;
  static constexpr int kChunks = Cols / kChunkElems;
  static constexpr int kBytes = Rows * Cols * ElemBytes;
  static constexpr int kRowsPerLine = kChunks >= 8 ? 1 : 8 / kChunks;
  static KILN_INLINE u32 chunkOffset(int row, int chunk) {
    int f = kChunks >= 8 ? (row & 7) : ((row / kRowsPerLine) & (kChunks - 1));
    return (u32)(row * Cols * ElemBytes + ((chunk ^ f) * 16));
  }
  /// Byte offset of element (row, col).
  static KILN_INLINE u32 offset(int row, int col) {
    return chunkOffset(row, col / kChunkElems) +
           (u32)((col % kChunkElems) * ElemBytes);
  }
};

// --- Asynchronous copies -----------------------------------------------------

/// Copies `srcBytes` (0..Bytes) from global `src` and zero-fills the rest of
/// the `Bytes` at shared `dst`. With srcBytes == 0 nothing is read, but the
/// address must still be a valid one, so callers pass the operand's base.
template <int Bytes>
KILN_INLINE void cpAsync(u32 dst, const void *src, u32 srcBytes) {
  if (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst),
                 "l"(src), "r"(srcBytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst),
                 "l"(src), "n"(Bytes), "r"(srcBytes)
                 : "memory");
}
KILN_INLINE void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> KILN_INLINE void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/// Fills one 16-byte chunk of a shared tile from global memory: `valid`
/// elements (clamped to 0..chunk) starting at `src`, zeros after them.
/// `Vec` is how many elements one copy may move given the operand's
/// alignment: a whole chunk is one 16-byte cp.async; 4- and 8-byte pieces
/// use cp.async.ca; 2-byte elements that are only 2-byte aligned are
/// copied through registers (cp.async has no 2-byte form), and so are
/// 1-byte elements (the int8 family) that are not 4-byte aligned.
template <int ElemBytes, int Vec>
KILN_INLINE void copyChunk(u32 dst, const void *src, const void *base,
                           int valid) {
  constexpr int kChunkElems = 16 / ElemBytes;
  constexpr int kPieceBytes = Vec * ElemBytes;
  if (kPieceBytes < 4 && ElemBytes == 1) {
    const unsigned char *from = (const unsigned char *)src;
#pragma unroll
    for (int p = 0; p < kChunkElems; ++p) {
      u16 v = p < valid ? (u16)from[p] : (u16)0;
      asm volatile("st.shared.u8 [%0], %1;" ::"r"(dst + p), "h"(v)
                   : "memory");
    }
  } else if (kPieceBytes >= 4) {
#pragma unroll
    for (int p = 0; p < kChunkElems / Vec; ++p) {
      int n = valid - p * Vec;
      n = n < 0 ? 0 : (n > Vec ? Vec : n);
      const char *from =
          n > 0 ? (const char *)src + p * kPieceBytes : (const char *)base;
      cpAsync<kPieceBytes>(dst + p * kPieceBytes, from, (u32)(n * ElemBytes));
    }
  } else {
    const u16 *from = (const u16 *)src;
#pragma unroll
    for (int p = 0; p < kChunkElems; ++p) {
      u16 v = p < valid ? from[p] : (u16)0;
      asm volatile("st.shared.u16 [%0], %1;" ::"r"(dst + 2 * p), "h"(v)
                   : "memory");
    }
  }
}

/// Fills one 16-byte chunk of a shared tile with `count` (clamped to
/// 0..16) copies of the byte `value`, zeros after them.
KILN_INLINE void fillChunkBytes(u32 dst, int value, int count) {
#pragma unroll
  for (int p = 0; p < 16; ++p) {
    u16 v = p < count ? (u16)(value & 0xFF) : (u16)0;
    asm volatile("st.shared.u8 [%0], %1;" ::"r"(dst + p), "h"(v) : "memory");
  }
}

// --- Tensor-core fragments ---------------------------------------------------

KILN_INLINE void ldmatrixX4(u32 (&r)[4], u32 address) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(address));
}
KILN_INLINE void ldmatrixX4Trans(u32 (&r)[4], u32 address) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(address));
}
KILN_INLINE u32 loadShared32(u32 address) {
  u32 r;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r) : "r"(address));
  return r;
}

/// D = A * B + D for one m16n8k16 (Bf16: bf16 inputs, else f16).
template <bool Bf16>
KILN_INLINE void mmaM16N8K16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if (Bf16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
}
KILN_INLINE void mmaM16N8K8Tf32(float (&d)[4], const u32 (&a)[4], u32 b0,
                                u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// D = A * B + D for one m16n8k32 with 8-bit integer inputs (AU8/BU8: the
/// operand is u8, else s8) and s32 accumulators (wrapping, as the ISA's
/// non-.satfinite form).
template <bool AU8, bool BU8>
KILN_INLINE void mmaM16N8K32I8(int (&d)[4], const u32 (&a)[4], u32 b0,
                               u32 b1) {
#define KILN_MMA_I8(TA, TB)                                                    \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." TA "." TB ".s32 "      \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "                \
               "{%0, %1, %2, %3};"                                             \
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if (AU8 && BU8)
    KILN_MMA_I8("u8", "u8");
  else if (AU8)
    KILN_MMA_I8("u8", "s8");
  else if (BU8)
    KILN_MMA_I8("s8", "u8");
  else
    KILN_MMA_I8("s8", "s8");
#undef KILN_MMA_I8
}

/// D = A * B + D for one m16n8k32 with fp8 inputs (AE5M2/BE5M2: the operand
/// is e5m2, else e4m3) and fp32 accumulators (sm_89 and later). The
/// fragments are the int8 m16n8k32's: four bytes of K a register.
template <bool AE5M2, bool BE5M2>
KILN_INLINE void mmaM16N8K32F8(float (&d)[4], const u32 (&a)[4], u32 b0,
                               u32 b1) {
#define KILN_MMA_F8(TA, TB)                                                    \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 "      \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "                \
               "{%0, %1, %2, %3};"                                             \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if (AE5M2 && BE5M2)
    KILN_MMA_F8("e5m2", "e5m2");
  else if (AE5M2)
    KILN_MMA_F8("e5m2", "e4m3");
  else if (BE5M2)
    KILN_MMA_F8("e4m3", "e5m2");
  else
    KILN_MMA_F8("e4m3", "e4m3");
#undef KILN_MMA_F8
}

// --- Output ------------------------------------------------------------------

/// Stores `v` as element type `Code` (KilnElementType).
/// Two floats as two float8 codes (Code: kElementE4M3 or kElementE5M2),
/// `lo` in the low byte: round to nearest even, saturated to the largest
/// finite value (a QuantizeLinear to float8 with saturate = 1; NaN stays
/// NaN).
template <int Code> KILN_INLINE u16 packF8(float lo, float hi) {
  u16 r;
  if (Code == kElementE5M2)
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

template <int Code> KILN_INLINE void storeOut(void *p, i64 i, float v) {
  if (Code == kElementF32)
    ((float *)p)[i] = v;
  else if (Code == kElementF16)
    ((u16 *)p)[i] = floatToF16(v);
  else if (Code == kElementE4M3 || Code == kElementE5M2)
    ((unsigned char *)p)[i] = (unsigned char)packF8<Code>(v, 0.0f);
  else
    ((u16 *)p)[i] = floatToBf16(v);
}

//===- GemmProblem.cpp - Checking a config against a problem, and its plan
//-===//

#include "GemmPlan.h"

#include "kiln/Target/CUDA/TargetInfo.h"

#include <algorithm>

namespace kiln::contraction {

uint64_t GemmProblem::ldaOrPacked() const {
  return lda ? lda : (layoutA == Layout::RowMajor ? k : m);
}
uint64_t GemmProblem::ldbOrPacked() const {
  return ldb ? ldb : (layoutB == Layout::RowMajor ? n : k);
}
uint64_t GemmProblem::ldcOrPacked() const { return ldc ? ldc : n; }

std::string_view familyName(Family family) {
  switch (family) {
  case Family::MmaF16:
    return "mma_f16";
  case Family::MmaTf32:
    return "mma_tf32";
  case Family::SimtF32:
    return "simt_f32";
  case Family::WgmmaF16:
    return "wgmma_f16";
  case Family::WgmmaTf32:
    return "wgmma_tf32";
  case Family::MmaS8:
    return "mma_s8";
  case Family::MmaF8:
    return "mma_f8";
  case Family::WgmmaF8:
    return "wgmma_f8";
  case Family::WgmmaS8:
    return "wgmma_s8";
  }
  return "?";
}

uint32_t GemmConfig::threads() const {
  if (family == Family::SimtF32)
    return (threadM && threadN) ? (blockM / threadM) * (blockN / threadN) : 0;
  if (isWgmma(family)) // a producer and blockM / 64 consumers
    return (blockM / 64 + 1) * 128;
  return (warpM && warpN) ? (blockM / warpM) * (blockN / warpN) * 32 : 0;
}

std::string GemmConfig::describe() const {
  std::string s = std::string(familyName(family)) + " " +
                  std::to_string(blockM) + "x" + std::to_string(blockN) + "x" +
                  std::to_string(blockK);
  if (family == Family::SimtF32)
    s += " t" + std::to_string(threadM) + "x" + std::to_string(threadN);
  else
    s += " w" + std::to_string(warpM) + "x" + std::to_string(warpN);
  s += " s" + std::to_string(stages) + " k" + std::to_string(splitK);
  return tma ? s + " tma" : s;
}

uint32_t dtypeBytes(DType type) {
  switch (type) {
  case DType::F32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  default:
    return 0;
  }
}

uint32_t integerBytes(DType type) {
  switch (type) {
  case DType::I8:
  case DType::U8:
    return 1;
  case DType::I32:
    return 4;
  default:
    return 0;
  }
}

namespace {

bool isPowerOfTwo(uint64_t v) { return v && !(v & (v - 1)); }

} // namespace

uint32_t vectorElements(uint32_t elemBytes, uint64_t ld, uint64_t batchStride,
                        uint32_t align) {
  uint32_t vec = 16 / elemBytes;
  while (vec > 1 &&
         (ld % vec || batchStride % vec || align % (vec * elemBytes)))
    vec /= 2;
  return vec;
}

const char *elementTypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "kElementF32";
  case DType::F16:
    return "kElementF16";
  case DType::BF16:
    return "kElementBF16";
  case DType::I8:
    return "kElementS8";
  case DType::I32:
    return "kElementS32";
  case DType::U8:
    return "kElementU8";
  case DType::F8E4M3FN:
    return "kElementE4M3";
  case DType::F8E5M2:
    return "kElementE5M2";
  default:
    return "kElementNone";
  }
}

uint32_t maxSharedBytesPerBlock(uint32_t smVersion) {
  return TargetInfo::forSm(smVersion).maxSharedBytesPerBlock();
}

uint32_t outputBytes(const GemmProblem &p, const GemmConfig &c) {
  if (isInt8(c.family))
    return integerBytes(p.outputType);
  if (isFp8(c.family) && isFp8Operand(p.outputType))
    return 1;
  return dtypeBytes(p.outputType);
}

GemmPlan planGemm(const GemmProblem &p, const GemmConfig &c) {
  GemmPlan plan;
  bool int8 = isInt8(c.family);
  plan.inBytes = int8              ? integerBytes(p.inputType)
                 : isFp8(c.family) ? (isFp8Operand(p.inputType) ? 1 : 0)
                                   : dtypeBytes(p.inputType);
  plan.outBytes = outputBytes(p, c);
  if (!plan.inBytes || !plan.outBytes)
    return plan;
  plan.aKContiguous = p.layoutA == Layout::RowMajor;
  plan.bKContiguous = p.layoutB == Layout::ColMajor;
  // A convolution's chunks start at pixel * C + group * Cg + c0.
  plan.vecA = p.conv.enabled
                  ? vectorElements(plan.inBytes, p.conv.c, p.conv.groupChannels,
                                   p.alignA)
                  : vectorElements(plan.inBytes, p.ldaOrPacked(),
                                   p.batch > 1 ? p.batchStrideA : 0, p.alignA);
  plan.vecB = vectorElements(plan.inBytes, p.ldbOrPacked(),
                             p.batch > 1 ? p.batchStrideB : 0, p.alignB);
  plan.vecC = vectorElements(plan.outBytes, p.ldcOrPacked(),
                             p.batch > 1 ? p.batchStrideC : 0, p.alignC);
  if (c.blockK)
    plan.kTiles = (p.k + c.blockK - 1) / c.blockK;
  if (c.splitK)
    plan.kTilesPerSplit = (plan.kTiles + c.splitK - 1) / c.splitK;
  if (c.family == Family::SimtF32) {
    uint32_t padA = plan.aKContiguous ? 4 : 0, padB = plan.bKContiguous ? 4 : 0;
    plan.sharedBytes =
        c.stages * c.blockK * ((c.blockM + padA) + (c.blockN + padB)) * 4;
  } else if (isWgmma(c.family)) {
    // GemmWgmma.cuh: 1024 bytes to align the ring, the ring (or the staged
    // output tile, which reuses it), a full and an empty mbarrier a stage.
    // The int8 kernel stores from registers (no staged tile) and keeps a
    // 1024-byte tile of ones for A's row sums after the ring.
    uint32_t stage = (c.blockM + c.blockN) * c.blockK * plan.inBytes;
    uint32_t staged = int8 ? 1024
                           : c.blockM * (c.blockN * plan.outBytes +
                                         (plan.outBytes == 4 ? 32 : 16));
    plan.sharedBytes = 1024 +
                       (int8 ? c.stages * stage + staged
                             : std::max(c.stages * stage, staged)) +
                       16 * c.stages;
  } else if (int8) {
    // GemmInt8.cuh stores its outputs from registers: the pipeline only.
    plan.sharedBytes = c.stages * (c.blockM + c.blockN) * c.blockK;
  } else {
    uint32_t stage = (c.blockM + c.blockN) * c.blockK * plan.inBytes;
    // The output tile's padded rows (GemmTensorCore.cuh, kOutPitch).
    uint32_t staged =
        c.blockM * (c.blockN * plan.outBytes + (plan.outBytes == 4 ? 32 : 16));
    plan.sharedBytes = std::max(c.stages * stage, staged);
  }
  plan.block = {c.threads(), 1, 1};
  if (c.blockM && c.blockN)
    plan.grid = {static_cast<uint32_t>((p.m + c.blockM - 1) / c.blockM),
                 static_cast<uint32_t>((p.n + c.blockN - 1) / c.blockN),
                 static_cast<uint32_t>(p.batch * c.splitK)};
  return plan;
}

std::string tmaUnsupportedReason(const GemmProblem &p) {
  if (p.conv.enabled)
    return "TMA loads plain GEMM operands (a convolution gathers im2col rows "
           "with cp.async)";
  uint64_t bytes = dtypeBytes(p.inputType);
  if (bytes != 2)
    return "TMA loads 16-bit operands";
  if (p.alignA < 16 || p.alignB < 16)
    return "TMA needs 16-byte aligned operands";
  if (p.ldaOrPacked() * bytes % 16 || p.ldbOrPacked() * bytes % 16)
    return "TMA needs leading dimensions that are multiples of 16 bytes";
  for (uint64_t stride : {p.batchStrideA, p.batchStrideB})
    if (p.batch > 1 && stride * bytes % 16)
      return "TMA needs batch strides that are multiples of 16 bytes";
  uint64_t limit = 1ull << 32;
  if (p.m > limit || p.n > limit || p.k > limit || p.batch > limit)
    return "TMA's dimensions hold at most 2^32 elements";
  if (p.ldaOrPacked() * bytes >= (1ull << 40) ||
      p.ldbOrPacked() * bytes >= (1ull << 40) ||
      p.batchStrideA * bytes >= (1ull << 40) ||
      p.batchStrideB * bytes >= (1ull << 40))
    return "TMA's strides are below 2^40 bytes";
  return "";
}

namespace {

/// What the int8 family asks beyond the checks every family shares.
std::string int8UnsupportedReason(const GemmProblem &p, const GemmConfig &c) {
  std::string name(familyName(c.family));
  auto isByte = [](DType t) { return t == DType::I8 || t == DType::U8; };
  if (!isByte(p.inputType) || !isByte(p.inputTypeB))
    return name + " needs i8 or u8 inputs";
  if (p.accumulatorType != DType::I32)
    return name + " accumulates in i32";
  if (!isByte(p.outputType) && p.outputType != DType::I32)
    return name + "'s output must be i8, u8 (requantized) or i32";
  // Neither ldmatrix nor 8-bit wgmma transposes bytes: both operands are
  // read K-major.
  if (p.layoutA != Layout::RowMajor || p.layoutB != Layout::ColMajor)
    return name + " needs A row-major and B stored [N][K] (both K-contiguous)";
  if (c.splitK != 1)
    return name + " has no split-K (its epilogue runs on the whole sum)";
  if (c.blockK < 32)
    return name + "'s block K must be at least 32 (one k32 MMA)";
  return "";
}

/// What the fp8 families ask beyond the checks every family shares.
std::string fp8UnsupportedReason(const GemmProblem &p, const GemmConfig &c) {
  std::string name(familyName(c.family));
  if (!isFp8Operand(p.inputType) || !isFp8Operand(p.inputTypeB))
    return name + " needs f8E4M3FN or f8E5M2 inputs";
  // Neither ldmatrix nor 8-bit wgmma transposes 8-bit elements: both
  // operands are read K-major.
  if (p.layoutA != Layout::RowMajor || p.layoutB != Layout::ColMajor)
    return name + " needs A row-major and B stored [N][K] (both "
                  "K-contiguous)";
  return "";
}

} // namespace

std::string unsupportedReason(const GemmProblem &p, const GemmConfig &c) {
  if (!p.m || !p.n || !p.k || !p.batch)
    return "an empty dimension (M, N, K and batch must be at least 1)";
  if (p.m >= (1u << 31) || p.n >= (1u << 31) || p.k >= (1u << 31))
    return "M, N and K must be below 2^31";
  if (isInt8(c.family)) {
    if (std::string why = int8UnsupportedReason(p, c); !why.empty())
      return why;
  } else if (p.accumulatorType != DType::F32)
    return "the accumulator must be f32";
  else if (!outputBytes(p, c))
    return isFp8Operand(p.outputType)
               ? "an f8E4M3FN or f8E5M2 output needs an fp8 family"
               : "the output must be f32, f16 or bf16";
  bool int8 = isInt8(c.family);
  bool fp8 = isFp8(c.family);
  bool halfIn = p.inputType == DType::F16 || p.inputType == DType::BF16;
  bool halfFamily =
      c.family == Family::MmaF16 || c.family == Family::WgmmaF16;
  if (fp8) {
    if (std::string why = fp8UnsupportedReason(p, c); !why.empty())
      return why;
  } else if (halfFamily && !halfIn)
    return std::string(familyName(c.family)) + " needs f16 or bf16 inputs";
  else if (!halfFamily && !int8 && p.inputType != DType::F32)
    return std::string(familyName(c.family)) + " needs f32 inputs";
  if (p.ldaOrPacked() < (p.layoutA == Layout::RowMajor ? p.k : p.m))
    return "lda is smaller than A's contiguous extent";
  if (p.ldbOrPacked() < (p.layoutB == Layout::RowMajor ? p.n : p.k))
    return "ldb is smaller than B's contiguous extent";
  if (p.ldcOrPacked() < p.n)
    return "ldc is smaller than N";
  if (p.batch > 1 && !p.batchStrideC)
    return "a batched C needs a batch stride";
  for (uint32_t align : {p.alignA, p.alignB, p.alignC})
    if (!isPowerOfTwo(align))
      return "alignments must be powers of two";
  uint32_t inBytes = int8 || fp8 ? 1 : dtypeBytes(p.inputType),
           outBytes = outputBytes(p, c);
  for (uint32_t align : {p.alignA, p.alignB})
    if (align < inBytes)
      return "an input pointer is not aligned to its element";
  if (p.alignC < outBytes)
    return "the output pointer is not aligned to its element";

  if (!isPowerOfTwo(c.blockM) || !isPowerOfTwo(c.blockN) ||
      !isPowerOfTwo(c.blockK))
    return "block tile sizes must be powers of two";
  if (c.stages < 2 || c.stages > 8)
    return "stages must be 2 to 8";
  if (c.splitK < 1)
    return "split-K must be at least 1";
  if (isWgmma(c.family)) {
    if (c.blockM != 64 && c.blockM != 128)
      return "wgmma's block M must be 64 or 128 (one or two consumer "
             "warpgroups)";
    if (c.blockN != 64 && c.blockN != 128 && c.blockN != 256)
      return "wgmma's block N must be 64, 128 or 256";
    if (c.blockK * inBytes != 128)
      return "wgmma's block K must be one 128-byte swizzle row (64 f16/bf16, "
             "32 tf32 or 128 fp8 or int8 elements)";
    if (c.warpM != 64 || c.warpN != c.blockN)
      return "wgmma's warp tile is 64 x block N";
    if (c.tma)
      if (std::string why = tmaUnsupportedReason(p); !why.empty())
        return why;
  } else if (c.family == Family::SimtF32) {
    if (c.threadM % 4 || c.threadN % 4 || !c.threadM || !c.threadN)
      return "thread tiles must be multiples of 4";
    if (c.blockM % c.threadM || c.blockN % c.threadN)
      return "the block tile must be a multiple of the thread tile";
  } else {
    uint32_t kStep = c.family == Family::MmaTf32 ? 8 : int8 || fp8 ? 32 : 16;
    uint32_t chunk = 16 / inBytes;
    if (!c.warpM || !c.warpN || c.warpM % 16 || c.warpN % 16)
      return "warp tiles must be multiples of 16";
    if (c.blockM % c.warpM || c.blockN % c.warpN)
      return "the block tile must be a multiple of the warp tile";
    if (c.blockK % kStep || c.blockK % chunk)
      return "the block's K must be a multiple of the mma's K";
  }
  if (c.tma && c.family != Family::WgmmaF16)
    return "only the wgmma kernel has a TMA producer";
  uint32_t threads = c.threads();
  if (threads < 32 || threads > 1024 || threads % 32)
    return "the block must have 32 to 1024 threads, a multiple of 32";
  if (p.conv.enabled) {
    const ImplicitConv &cv = p.conv;
    if (!cv.h || !cv.w || !cv.c || !cv.p || !cv.q || !cv.groupChannels)
      return "an empty convolution (no input or output pixels, or channels)";
    if (cv.paddedGroupChannels % (16 / inBytes))
      return "the filter's channels must be padded to the 16-byte chunk";
    // Each thread copies one column of A's tile: a 16-byte chunk of
    // channels (tensor cores) or one channel (FFMA, transposing).
    uint32_t columns =
        c.family == Family::SimtF32 ? c.blockK : c.blockK * inBytes / 16;
    // wgmma: the producer warpgroup alone copies.
    uint32_t copiers = isWgmma(c.family) ? 128 : c.threads();
    if (copiers % columns || (c.blockM * columns) % copiers)
      return "the block's threads must divide its A tile's columns evenly";
    if (cv.h * cv.w * cv.c * (p.m / (cv.p * cv.q) + 1) >= (1ull << 40))
      return "the input image is too large";
  }
  GemmPlan plan = planGemm(p, c);
  if (c.splitK > plan.kTiles)
    return "split-K is larger than the number of K tiles";
  if (plan.grid.y > 65535 || uint64_t(p.batch) * c.splitK > 65535)
    return "the grid is too large (N tiles or batch * split-K above 65535)";
  return "";
}

runtime::Dim3 GemmKernel::gridFor(uint64_t m) const {
  runtime::Dim3 g = grid;
  if (gridXPerM)
    g.x = static_cast<uint32_t>((m * gridXPerM + gridXDivisor - 1) /
                                gridXDivisor);
  return g;
}

} // namespace kiln::contraction

//===- Int8GemmKernelsTest.cpp - The int8 GEMMs on the emulator -----------===//
//
// Each case generates an int8 kernel (Family::MmaS8, mma.sync on sm_80, or
// Family::WgmmaS8, wgmma on sm_90a; NVRTC), checks its PTX with ptxas when
// there is one, runs it on the emu device and compares
// every output, bit for bit, with a reference computed here by a naive
// loop in 64-bit integers over the stored bytes:
//   v = sum_k A[m][k] * B[k][n] + offset[n] - zb[n] * sum_k A[m][k]
// wrapped to s32, then for an i8/u8 output onnxruntime's requantization
// (MLAS MlasRequantizeOutput): f = f32(v) * scale, one f32 multiply
// rounded to nearest; clamped to [lo - zy, hi - zy]; rounded half to even
// (std::nearbyint in the default rounding mode); plus zy. The scale is the
// f32 value onnxruntime would use, (a_scale * b_scale) / y_scale in f32.
// There is no tolerance: integer sums are exact, and the one rounding
// (the f32 multiply) is the same operation on both sides.
//
// The tie cases pick scales (0.5, 0.25, 0.1f) where many products land
// exactly on .5, and count the outputs where the f32 product is a tie
// that the float64 product (the ONNX reference's numpy promotion) would
// round the other way: the kernel must follow onnxruntime there.
//
//===----------------------------------------------------------------------===//

#include "ContractionTestSupport.h"

#include <cfenv>
#include <fstream>
#include <optional>

using namespace kiln::contraction_test;

namespace {

struct Int8Case {
  GemmProblem problem;
  GemmConfig config;
  IntegerEpilogue epilogue;
  /// The inputs are drawn uniformly from [low, high] of their type.
  int low = -128, high = 127;
  int lowB = -128, highB = 127;
  uint32_t seed = 5;
  /// When set, `offset` is A's zero point term, -za * colsum_B[n] +
  /// K * za * zb[n], instead of random values (the onnxruntime cases).
  std::optional<int> aZeroPoint;
  /// When not empty: the per-column scales (else random ones).
  std::vector<float> scales;
  /// When not empty: write the operands, the output and the parameters
  /// here (`<dumpTo>.a.bin`, `.b.bin`, `.zb.bin`, `.out.bin`), for
  /// int8_gemm_vs_onnxruntime.py.
  std::string dumpTo;
};

GemmProblem int8Problem(uint64_t m, uint64_t n, uint64_t k, DType a, DType b,
                        DType out) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.inputType = a, p.inputTypeB = b;
  p.accumulatorType = DType::I32;
  p.outputType = out;
  p.layoutA = Layout::RowMajor;
  p.layoutB = Layout::ColMajor; // B stored [N][K]
  return p;
}

GemmConfig int8Config(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wm,
                      uint32_t wn, uint32_t stages) {
  return tensorCore(bm, bn, bk, wm, wn, stages, 1, Family::MmaS8);
}

/// The wgmma int8 kernel: BM 64 (one consumer) or 128 (two), BN 64-256,
/// K tiles of 128.
GemmConfig wgmmaS8(uint32_t bm, uint32_t bn, uint32_t stages) {
  return wgmmaConfig(bm, bn, stages, 1, Family::WgmmaS8);
}

/// The target a config's kernel is generated for and ptxas checks.
uint32_t smFor(const GemmConfig &c) {
  return c.family == Family::WgmmaS8 ? 90 : 80;
}
const char *ptxasArch(const GemmConfig &c) {
  return c.family == Family::WgmmaS8 ? "sm_90a" : "sm_80";
}

/// What the last run saw: ties the f32 rule decides.
struct TieCount {
  int f32Ties = 0;    // f32(v) * scale is exactly k + 0.5
  int f64Differs = 0; // ... and the float64 product rounds elsewhere
};

/// Runs the case and checks every output; returns the tie counts.
TieCount runInt8Case(const Int8Case &c) {
  const GemmProblem &p = c.problem;
  const IntegerEpilogue &q = c.epilogue;
  Epilogue e;
  e.integer = q;
  GenerateOptions options;
  options.name = "int8_gemm";
  options.smVersion = smFor(c.config);
  auto generated = generateGemm(p, c.config, e, options);
  EXPECT_TRUE(bool(generated)) << generated.error().message();
  if (!generated)
    return {};
  if (!ptxasPath().empty()) {
    EXPECT_EQ(runPtxas(generated->kernels[0].ptx, ptxasArch(c.config)), "")
        << c.config.describe();
  }

  std::mt19937 rng(c.seed);
  auto draw = [&](DType type, int lo, int hi, size_t count) {
    lo = std::max(lo, type == DType::U8 ? 0 : -128);
    hi = std::min(hi, type == DType::U8 ? 255 : 127);
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<int> values(count);
    for (int &v : values)
      v = dist(rng);
    return values;
  };
  std::vector<int> a = draw(p.inputType, c.low, c.high, p.m * p.k);
  std::vector<int> b = draw(p.inputTypeB, c.lowB, c.highB, p.n * p.k);
  std::uniform_int_distribution<int> offsetDist(-5000, 5000),
      zpDist(p.inputTypeB == DType::U8 ? 0 : -3, 9);
  std::uniform_real_distribution<float> scaleDist(0.002f, 0.05f);
  std::vector<int32_t> offset(p.n, 0), zb(p.n, 0);
  std::vector<float> scales(p.n, q.scale);
  for (uint64_t n = 0; n < p.n; ++n) {
    if (q.offset)
      offset[n] = offsetDist(rng);
    if (q.rowSumZeroPointB)
      zb[n] = zpDist(rng);
    if (q.scaleVector)
      scales[n] = c.scales.empty() ? scaleDist(rng) : c.scales[n];
  }
  if (c.aZeroPoint) {
    EXPECT_TRUE(q.offset);
    int64_t za = *c.aZeroPoint;
    for (uint64_t n = 0; n < p.n; ++n) {
      int64_t colSum = 0;
      for (uint64_t k = 0; k < p.k; ++k)
        colSum += b[n * p.k + k];
      offset[n] =
          static_cast<int32_t>(-za * colSum + int64_t(p.k) * za * zb[n]);
    }
  }

  Operands in;
  auto bytesOf = [](const std::vector<int> &v) {
    std::vector<uint8_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out[i] = static_cast<uint8_t>(v[i]);
    return out;
  };
  auto rawBytes = [](const void *data, size_t n) {
    const uint8_t *from = static_cast<const uint8_t *>(data);
    return std::vector<uint8_t>(from, from + n);
  };
  in.a = bytesOf(a);
  in.b = bytesOf(b);
  if (q.offset)
    in.bias = rawBytes(offset.data(), 4 * p.n);
  if (q.rowSumZeroPointB)
    in.zeroPointB = rawBytes(zb.data(), 4 * p.n);
  if (q.scaleVector)
    in.scale = rawBytes(scales.data(), 4 * p.n);
  // A residual block's R: random bytes of its type, C's layout.
  const IntegerEpilogue::Residual &res = q.residual;
  std::vector<int> residual;
  if (res.enabled) {
    residual = draw(res.type, -128, 255, p.m * p.n);
    in.residual = bytesOf(residual);
  }
  uint64_t count = p.m * p.n;
  std::vector<uint8_t> out = runOnEmu(*generated, p, in, count);
  if (out.empty())
    return {};
  if (!c.dumpTo.empty()) {
    auto write = [&](const std::string &suffix, const void *data, size_t n) {
      std::ofstream file(c.dumpTo + suffix, std::ios::binary);
      file.write(static_cast<const char *>(data), n);
      EXPECT_TRUE(file.good()) << c.dumpTo + suffix;
    };
    write(".a.bin", in.a.data(), in.a.size());
    write(".b.bin", in.b.data(), in.b.size());
    write(".zb.bin", zb.data(), 4 * zb.size());
    write(".out.bin", out.data(), out.size());
  }

  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
  TieCount ties;
  int reported = 0;
  // The requantized value's range (the residual block's own type), then
  // the output's.
  DType mid = res.enabled ? res.requantizedType : p.outputType;
  int lo = mid == DType::U8 ? 0 : -128;
  int hi = mid == DType::U8 ? 255 : 127;
  int outLo = p.outputType == DType::U8 ? 0 : -128;
  int outHi = p.outputType == DType::U8 ? 255 : 127;
  for (uint64_t m = 0; m < p.m; ++m) {
    int64_t rowSum = 0;
    for (uint64_t k = 0; k < p.k; ++k)
      rowSum += a[m * p.k + k];
    for (uint64_t n = 0; n < p.n; ++n) {
      int64_t acc = 0;
      for (uint64_t k = 0; k < p.k; ++k)
        acc += int64_t(a[m * p.k + k]) * b[n * p.k + k];
      acc += offset[n] - int64_t(zb[n]) * rowSum;
      int32_t v = static_cast<int32_t>(static_cast<uint32_t>(acc));
      int64_t want;
      int64_t got;
      if (p.outputType == DType::I32) {
        want = v;
        int32_t word;
        std::memcpy(&word, &out[4 * (m * p.n + n)], 4);
        got = word;
      } else {
        volatile float product = static_cast<float>(v) * scales[n];
        float f = product;
        if (f - std::floor(f) == 0.5f) {
          ++ties.f32Ties;
          double exact = double(v) * double(scales[n]);
          if (std::nearbyint(exact) != std::nearbyint(double(f)))
            ++ties.f64Differs;
        }
        f = std::min(std::max(f, float(lo - q.outputZeroPoint)),
                     float(hi - q.outputZeroPoint));
        want = static_cast<int64_t>(std::nearbyint(f)) + q.outputZeroPoint;
        if (res.enabled) {
          // onnxruntime's unfused DequantizeLinear (both), Add, Relu and
          // QuantizeLinear: one f32 operation a step (volatile: no fma).
          volatile float d = float(want) - float(q.outputZeroPoint);
          d = d * res.requantizedScale;
          volatile float r =
              float(residual[m * p.n + n]) - float(res.zeroPoint);
          r = r * res.scale;
          volatile float sum = d + r;
          if (res.relu)
            sum = std::max(float(sum), 0.0f);
          sum = sum / res.sumScale;
          float t =
              std::min(std::max(float(sum), float(outLo - res.sumZeroPoint)),
                       float(outHi - res.sumZeroPoint));
          want = static_cast<int64_t>(std::nearbyint(t)) + res.sumZeroPoint;
        }
        uint8_t byte = out[m * p.n + n];
        got = p.outputType == DType::U8 ? int64_t(byte)
                                        : int64_t(static_cast<int8_t>(byte));
      }
      if (got != want && reported++ < 8)
        ADD_FAILURE() << c.config.describe() << ": C[" << m << "][" << n
                      << "] = " << got << ", expected " << want << " (v = " << v
                      << ")";
    }
  }
  return ties;
}

class Int8GemmKernelsTest : public ContractionKernelsTest {};

TEST_F(Int8GemmKernelsTest, S8S8ToS8RaggedEveryDimension) {
  // M, N, K off the tile; K = 70 rows are 2-byte aligned (byte copies).
  Int8Case c{int8Problem(77, 45, 70, DType::I8, DType::I8, DType::I8),
             int8Config(64, 64, 64, 32, 32, 3),
             {}};
  c.epilogue.scale = 0.0007f;
  c.epilogue.outputZeroPoint = -3;
  runInt8Case(c);
}

TEST_F(Int8GemmKernelsTest, U8ActivationsWithZeroPointFoldedIntoOffset) {
  // onnxruntime's quantizer: u8 activations with a zero point, s8 weights
  // with none. The zero point's term is a per-column offset (and a bias).
  Int8Case c{int8Problem(130, 72, 256, DType::U8, DType::I8, DType::U8),
             int8Config(128, 64, 64, 64, 32, 3),
             {}};
  c.epilogue.offset = true;
  c.epilogue.scale = 0.00031f;
  c.epilogue.outputZeroPoint = 131;
  runInt8Case(c);
}

TEST_F(Int8GemmKernelsTest, WeightZeroPointsNeedRowSumsI32Out) {
  // A per-column zero point of B: the kernel sums A's rows on the tensor
  // cores. i32 output (MatMulInteger), K = 100 (4-byte aligned rows).
  Int8Case c{int8Problem(40, 24, 100, DType::I8, DType::U8, DType::I32),
             int8Config(64, 64, 32, 32, 32, 2),
             {}};
  c.epilogue.offset = true;
  c.epilogue.rowSumZeroPointB = true;
  runInt8Case(c);
}

TEST_F(Int8GemmKernelsTest, PerColumnScalesU8U8ToS8) {
  Int8Case c{int8Problem(64, 96, 160, DType::U8, DType::U8, DType::I8),
             int8Config(64, 32, 32, 32, 16, 4),
             {}};
  c.epilogue.scaleVector = true;
  c.epilogue.offset = true;
  c.epilogue.rowSumZeroPointB = true;
  c.epilogue.outputZeroPoint = 5;
  c.low = 0, c.high = 40, c.lowB = 0, c.highB = 40;
  runInt8Case(c);
}

TEST_F(Int8GemmKernelsTest, TiesRoundHalfToEven) {
  // scale 1/2 and 1/4: every odd v (every v = 2 mod 4) is a tie.
  for (float scale : {0.5f, 0.25f}) {
    Int8Case c{int8Problem(48, 40, 64, DType::I8, DType::I8, DType::I8),
               int8Config(64, 64, 64, 32, 32, 2),
               {}};
    c.epilogue.scale = scale;
    c.low = -4, c.high = 4, c.lowB = -4, c.highB = 4;
    TieCount ties = runInt8Case(c);
    EXPECT_GT(ties.f32Ties, 100) << "scale " << scale;
  }
}

TEST_F(Int8GemmKernelsTest, TiesFollowOnnxruntimesF32Multiply) {
  // 0.1f is slightly above 0.1: v = 10j + 5 times it is j + 0.5 plus less
  // than half an f32 ulp, so the f32 product is a tie (rounded to even)
  // where the float64 product rounds away from j.
  Int8Case c{int8Problem(64, 64, 96, DType::I8, DType::I8, DType::I8),
             int8Config(64, 64, 32, 32, 32, 3),
             {}};
  c.epilogue.scale = 0.1f;
  c.low = -6, c.high = 6, c.lowB = -6, c.highB = 6;
  TieCount ties = runInt8Case(c);
  EXPECT_GT(ties.f64Differs, 20);
}

TEST_F(Int8GemmKernelsTest, PtxHasInt8TensorCoreInstructions) {
  Epilogue e;
  e.integer.scale = 0.01f;
  GenerateOptions options;
  options.smVersion = 80;
  auto u8 =
      generateGemm(int8Problem(64, 64, 64, DType::U8, DType::I8, DType::U8),
                   int8Config(64, 64, 64, 32, 32, 3), e, options);
  ASSERT_TRUE(bool(u8)) << u8.error().message();
  EXPECT_THAT(
      u8->kernels[0].ptx,
      ::testing::HasSubstr("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32"));
  auto s8 =
      generateGemm(int8Problem(64, 64, 64, DType::I8, DType::I8, DType::I8),
                   int8Config(64, 64, 64, 32, 32, 3), e, options);
  ASSERT_TRUE(bool(s8)) << s8.error().message();
  EXPECT_THAT(
      s8->kernels[0].ptx,
      ::testing::HasSubstr("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
}

// --- wgmma (sm_90a) --------------------------------------------------------
//
// The same reference, the same exactness: wgmma m64nNk32 s8/u8 sums into
// s32 like mma.sync, and the epilogue is the same code.

TEST_F(Int8GemmKernelsTest, WgmmaS8RaggedTwoConsumers) {
  SKIP_WITHOUT_EMU_WGMMA();
  // M, N and K off the tiles (K = 300: two K tiles of 128 and a ragged
  // third, rows 4-byte aligned), two consumer warpgroups.
  Int8Case c{int8Problem(150, 100, 300, DType::I8, DType::I8, DType::I8),
             wgmmaS8(128, 64, 3),
             {}};
  c.epilogue.scale = 0.0004f;
  c.epilogue.outputZeroPoint = -3;
  runInt8Case(c);
}

TEST_F(Int8GemmKernelsTest, WgmmaU8ActivationsOffsetPerColumnScales) {
  SKIP_WITHOUT_EMU_WGMMA();
  // onnxruntime's quantizer's shape: u8 activations (zero point folded
  // into the offset), s8 weights, per-column scales, u8 output; BN 128.
  Int8Case c{int8Problem(70, 130, 256, DType::U8, DType::I8, DType::U8),
             wgmmaS8(64, 128, 2),
             {}};
  c.epilogue.offset = true;
  c.epilogue.scaleVector = true;
  c.epilogue.outputZeroPoint = 131;
  c.aZeroPoint = 128;
  runInt8Case(c);
}

TEST_F(Int8GemmKernelsTest, WgmmaWeightZeroPointsRowSumsI32Out) {
  SKIP_WITHOUT_EMU_WGMMA();
  // B's per-column zero points: A's row sums from wgmma against the tile
  // of ones (u8 A: the sums of bytes up to 255 each). MatMulInteger's i32
  // output; K = 200 (8-byte aligned rows).
  Int8Case c{int8Problem(96, 72, 200, DType::U8, DType::U8, DType::I32),
             wgmmaS8(128, 64, 2),
             {}};
  c.epilogue.offset = true;
  c.epilogue.rowSumZeroPointB = true;
  runInt8Case(c);
  // s8 A (negative sums) with a requantized s8 output.
  Int8Case s{int8Problem(64, 64, 128, DType::I8, DType::U8, DType::I8),
             wgmmaS8(64, 64, 2),
             {}};
  s.epilogue.offset = true;
  s.epilogue.rowSumZeroPointB = true;
  s.epilogue.scale = 0.0005f;
  s.seed = 8;
  runInt8Case(s);
}

TEST_F(Int8GemmKernelsTest, WgmmaTiesFollowOnnxruntimesF32Multiply) {
  SKIP_WITHOUT_EMU_WGMMA();
  Int8Case c{int8Problem(64, 64, 96, DType::I8, DType::I8, DType::I8),
             wgmmaS8(64, 64, 2),
             {}};
  c.epilogue.scale = 0.1f;
  c.low = -6, c.high = 6, c.lowB = -6, c.highB = 6;
  TieCount ties = runInt8Case(c);
  EXPECT_GT(ties.f64Differs, 20);
}

/// A QDQ residual block after the requantization (ResNet's add):
/// Q(relu?(DQ(q) + DQ(R))) with its own scales, zero points and types.
IntegerEpilogue::Residual residualBlock(DType type, DType requantized,
                                        bool relu) {
  IntegerEpilogue::Residual r;
  r.enabled = true;
  r.type = type;
  r.zeroPoint = type == DType::U8 ? 121 : -9;
  r.scale = 0.031f;
  r.requantizedType = requantized;
  r.requantizedScale = 0.047f;
  r.relu = relu;
  r.sumScale = 0.06f;
  r.sumZeroPoint = relu ? 0 : 130;
  return r;
}

TEST_F(Int8GemmKernelsTest, ResidualBlockAfterRequantization) {
  // u8 activations and a u8 residual; the sum requantized to u8 with zero
  // point 130 (no Relu), on mma.sync and on wgmma.
  for (GemmConfig config :
       {int8Config(64, 64, 64, 32, 32, 3), wgmmaS8(64, 64, 2)}) {
    if (config.family == Family::WgmmaS8 && !emuWgmmaGap().empty())
      continue;
    Int8Case c{
        int8Problem(70, 80, 160, DType::U8, DType::I8, DType::U8), config, {}};
    c.epilogue.offset = true;
    c.epilogue.scaleVector = true;
    c.epilogue.outputZeroPoint = 117;
    c.epilogue.residual = residualBlock(DType::U8, DType::U8, false);
    c.aZeroPoint = 128;
    runInt8Case(c);
  }
}

TEST_F(Int8GemmKernelsTest, ResidualBlockReluSignedTypes) {
  // s8 requantized value and residual, an explicit Relu, a u8 sum with
  // zero point 0 (what a folded Relu looks like too); weight zero points.
  SKIP_WITHOUT_EMU_WGMMA();
  for (GemmConfig config :
       {int8Config(64, 32, 32, 32, 16, 2), wgmmaS8(128, 64, 2)}) {
    Int8Case c{
        int8Problem(130, 40, 96, DType::I8, DType::U8, DType::U8), config, {}};
    c.epilogue.offset = true;
    c.epilogue.rowSumZeroPointB = true;
    c.epilogue.scale = 0.0009f;
    c.epilogue.outputZeroPoint = 3;
    c.epilogue.residual = residualBlock(DType::I8, DType::I8, true);
    c.seed = 12;
    runInt8Case(c);
  }
}

TEST_F(Int8GemmKernelsTest, WgmmaPtxHasInt8WarpgroupInstructions) {
  Epilogue e;
  e.integer.scale = 0.01f;
  e.integer.rowSumZeroPointB = true;
  GenerateOptions options;
  options.smVersion = 90;
  auto u8 =
      generateGemm(int8Problem(64, 64, 64, DType::U8, DType::I8, DType::U8),
                   wgmmaS8(64, 128, 3), e, options);
  ASSERT_TRUE(bool(u8)) << u8.error().message();
  EXPECT_THAT(u8->kernels[0].ptx,
              ::testing::HasSubstr(
                  "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.s8"));
  // The row sums: A against ones.
  EXPECT_THAT(
      u8->kernels[0].ptx,
      ::testing::HasSubstr("wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8"));
  // sm_90 puts wgmma_s8 first, mma_s8 after it; --wgmma=false and sm_80
  // get mma_s8 alone.
  GemmProblem p = int8Problem(512, 512, 512, DType::I8, DType::I8, DType::I8);
  std::vector<GemmConfig> candidates =
      candidateConfigs(p, Family::MmaS8, 90, /*wgmma=*/true, /*tma=*/true);
  ASSERT_FALSE(candidates.empty());
  EXPECT_EQ(candidates.front().family, Family::WgmmaS8);
  EXPECT_EQ(candidates.back().family, Family::MmaS8);
  for (const GemmConfig &c :
       candidateConfigs(p, Family::MmaS8, 90, /*wgmma=*/false, false))
    EXPECT_EQ(c.family, Family::MmaS8);
  for (const GemmConfig &c :
       candidateConfigs(p, Family::MmaS8, 80, /*wgmma=*/true, false))
    EXPECT_EQ(c.family, Family::MmaS8);
}

// --- Implicit-GEMM NHWC convolutions
// ------------------------------------------------------
//
// The reference is a direct convolution in 64-bit integers over the ONNX
// ordered filter (so the reordering is checked too): the sum of
// (x - za) * (w - zw[o]) over the taps inside the image (a tap in the
// padding adds nothing, as onnxruntime pads with the zero point), plus the
// bias, then the requantization above. The kernel gets the zero-point
// terms as the per-channel offset (bias - za * sum w + K * za * zw with K =
// KH * KW * C/groups) and pads with za.

struct Int8ConvCase {
  ConvProblem problem;
  GemmConfig config;
  DType filterType = DType::I8;
  int aZeroPoint = 0;
  bool weightZeroPoints = false;
  int outputZeroPoint = 0;
  uint32_t seed = 9;
  /// The filter values are drawn from [filterLow, filterHigh] (clamped to
  /// the filter type).
  int filterLow = -128, filterHigh = 255;
  /// When not empty: the per-channel scales (else random ones).
  std::vector<float> scales;
  /// When not empty: write x (NHWC), the filter (OIHW), the bias and the
  /// output (NHWC) here, as Int8Case::dumpTo does.
  std::string dumpTo;
};

void runInt8ConvCase(const Int8ConvCase &cc) {
  const ConvProblem &cp = cc.problem;
  GemmProblem p = convolutionAsGemm(cp);
  p.inputTypeB = cc.filterType;
  p.accumulatorType = DType::I32;
  bool requantize = cp.outputType != DType::I32;
  Epilogue e;
  IntegerEpilogue &q = e.integer;
  q.offset = true;
  q.rowSumZeroPointB = cc.weightZeroPoints;
  q.scaleVector = requantize;
  q.outputZeroPoint = cc.outputZeroPoint;
  q.paddingValue = cc.aZeroPoint;
  GenerateOptions options;
  options.name = "int8_conv";
  options.smVersion = smFor(cc.config);
  auto generated = generateGemm(p, cc.config, e, options);
  ASSERT_TRUE(bool(generated)) << generated.error().message();
  if (!ptxasPath().empty()) {
    EXPECT_EQ(runPtxas(generated->kernels[0].ptx, ptxasArch(cc.config)), "");
  }

  std::mt19937 rng(cc.seed);
  auto draw = [&](DType type, size_t count, int lo = -128, int hi = 255) {
    std::uniform_int_distribution<int> dist(
        std::max(lo, type == DType::U8 ? 0 : -128),
        std::min(hi, type == DType::U8 ? 255 : 127));
    std::vector<int> values(count);
    for (int &v : values)
      v = dist(rng);
    return values;
  };
  uint64_t groups = cp.groups, cg = cp.c / groups, og = cp.o / groups;
  uint64_t P = p.conv.p, Q = p.conv.q, taps = cg * cp.kh * cp.kw;
  std::vector<int> x = draw(cp.inputType, cp.n * cp.h * cp.w * cp.c);
  std::vector<int> f =
      draw(cc.filterType, cp.o * taps, cc.filterLow, cc.filterHigh);
  std::uniform_int_distribution<int> zpDist(cc.filterType == DType::U8 ? 0 : -3,
                                            9),
      biasDist(-3000, 3000);
  std::uniform_real_distribution<float> scaleDist(0.0002f, 0.002f);
  std::vector<int32_t> zw(cp.o, 0), bias(cp.o), offset(cp.o);
  std::vector<float> scales(cp.o);
  for (uint64_t o = 0; o < cp.o; ++o) {
    if (cc.weightZeroPoints)
      zw[o] = zpDist(rng);
    bias[o] = biasDist(rng);
    scales[o] = cc.scales.empty() ? scaleDist(rng) : cc.scales[o];
    int64_t sum = 0;
    for (uint64_t t = 0; t < taps; ++t)
      sum += f[o * taps + t];
    int64_t za = cc.aZeroPoint;
    offset[o] =
        static_cast<int32_t>(bias[o] - za * sum + int64_t(taps) * za * zw[o]);
  }
  auto bytesOf = [](const std::vector<int> &v) {
    std::vector<uint8_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out[i] = static_cast<uint8_t>(v[i]);
    return out;
  };
  auto rawBytes = [](const void *data, size_t n) {
    const uint8_t *from = static_cast<const uint8_t *>(data);
    return std::vector<uint8_t>(from, from + n);
  };
  std::vector<uint8_t> filterBytes = bytesOf(f);
  Operands in;
  in.a = bytesOf(x);
  in.b = reorderConvFilter(cp, filterBytes.data(), 1);
  in.bias = rawBytes(offset.data(), 4 * cp.o);
  if (cc.weightZeroPoints)
    in.zeroPointB = rawBytes(zw.data(), 4 * cp.o);
  if (requantize)
    in.scale = rawBytes(scales.data(), 4 * cp.o);
  std::vector<uint8_t> out = runOnEmu(*generated, p, in, p.m * cp.o);
  ASSERT_FALSE(out.empty());
  if (!cc.dumpTo.empty()) {
    auto write = [&](const std::string &suffix, const void *data, size_t n) {
      std::ofstream file(cc.dumpTo + suffix, std::ios::binary);
      file.write(static_cast<const char *>(data), n);
      EXPECT_TRUE(file.good()) << cc.dumpTo + suffix;
    };
    write(".x.bin", in.a.data(), in.a.size());
    write(".w.bin", filterBytes.data(), filterBytes.size());
    write(".bias.bin", bias.data(), 4 * bias.size());
    write(".out.bin", out.data(), out.size());
  }

  int reported = 0, inPadding = 0;
  int lo = cp.outputType == DType::U8 ? 0 : -128;
  int hi = cp.outputType == DType::U8 ? 255 : 127;
  for (uint64_t n = 0; n < cp.n; ++n)
    for (uint64_t py = 0; py < P; ++py)
      for (uint64_t qx = 0; qx < Q; ++qx)
        for (uint64_t o = 0; o < cp.o; ++o) {
          uint64_t g = o / og;
          int64_t acc = bias[o];
          bool padded = false;
          for (uint64_t c = 0; c < cg; ++c)
            for (uint64_t y = 0; y < cp.kh; ++y)
              for (uint64_t xx = 0; xx < cp.kw; ++xx) {
                int64_t h = int64_t(py * cp.strideH) - cp.padH +
                            int64_t(y * cp.dilationH);
                int64_t w = int64_t(qx * cp.strideW) - cp.padW +
                            int64_t(xx * cp.dilationW);
                if (h < 0 || w < 0 || h >= int64_t(cp.h) ||
                    w >= int64_t(cp.w)) {
                  padded = true;
                  continue;
                }
                int64_t xv = x[((n * cp.h + h) * cp.w + w) * cp.c + g * cg + c];
                int64_t fv = f[((o * cg + c) * cp.kh + y) * cp.kw + xx];
                acc += (xv - cc.aZeroPoint) * (fv - zw[o]);
              }
          inPadding += padded;
          int32_t v = static_cast<int32_t>(static_cast<uint32_t>(acc));
          uint64_t ci = ((n * P + py) * Q + qx) * cp.o + o;
          int64_t want, got;
          if (!requantize) {
            want = v;
            int32_t word;
            std::memcpy(&word, &out[4 * ci], 4);
            got = word;
          } else {
            volatile float product = static_cast<float>(v) * scales[o];
            float fl = std::min(
                std::max(float(product), float(lo - cc.outputZeroPoint)),
                float(hi - cc.outputZeroPoint));
            want =
                static_cast<int64_t>(std::nearbyint(fl)) + cc.outputZeroPoint;
            got = cp.outputType == DType::U8
                      ? int64_t(out[ci])
                      : int64_t(static_cast<int8_t>(out[ci]));
          }
          if (got != want && reported++ < 8)
            ADD_FAILURE() << cc.config.describe() << ": Y[" << n << "][" << py
                          << "][" << qx << "][" << o << "] = " << got
                          << ", expected " << want;
        }
  EXPECT_GT(inPadding, 0) << "the case should reach the padding";
}

ConvProblem int8Conv(uint64_t n, uint64_t h, uint64_t w, uint64_t c, uint64_t o,
                     uint32_t k, uint32_t stride, uint32_t pad, DType in,
                     DType out, uint32_t dilation = 1, uint32_t groups = 1) {
  ConvProblem p = conv(n, h, w, c, o, k, stride, pad, dilation, groups);
  p.inputType = in, p.outputType = out;
  return p;
}

TEST_F(Int8GemmKernelsTest, ConvU8StemPaddedWithZeroPoint) {
  // 3 channels (byte copies, padded to 16), stride 2, pad 1: the border
  // taps read A's zero point 131; per-channel scales, u8 output.
  Int8ConvCase cc{int8Conv(2, 9, 11, 3, 24, 3, 2, 1, DType::U8, DType::U8),
                  int8Config(64, 32, 32, 32, 16, 3)};
  cc.aZeroPoint = 131;
  cc.outputZeroPoint = 128;
  runInt8ConvCase(cc);
}

TEST_F(Int8GemmKernelsTest, ConvGroupsDilationWeightZeroPointsI32) {
  // Two groups of 8 channels, dilation 2, pad 2, s8 input with zero point
  // -5 and u8 filters with a zero point per output channel: the row sums
  // include the padding's zero points. i32 output (ConvInteger).
  Int8ConvCase cc{
      int8Conv(1, 7, 7, 16, 8, 3, 1, 2, DType::I8, DType::I32, 2, 2),
      int8Config(64, 32, 32, 32, 16, 2)};
  cc.filterType = DType::U8;
  cc.aZeroPoint = -5;
  cc.weightZeroPoints = true;
  runInt8ConvCase(cc);
}

TEST_F(Int8GemmKernelsTest, ConvS8ToS8WideChannels) {
  // 40 channels (two whole chunks and a partial one a tap), 1x1 and 3x3.
  for (uint32_t k : {1u, 3u}) {
    Int8ConvCase cc{
        int8Conv(1, 6, 5, 40, 48, k, 1, k / 2, DType::I8, DType::I8),
        int8Config(64, 64, 64, 32, 32, 3)};
    cc.aZeroPoint = 2;
    cc.outputZeroPoint = -7;
    if (k == 1) // no padding: nothing to reach
      cc.problem.padH = cc.problem.padW = 1, cc.problem.padBottom = 1,
      cc.problem.padRight = 1;
    runInt8ConvCase(cc);
  }
}

TEST_F(Int8GemmKernelsTest, WgmmaConvU8StemAndGroupsWithWeightZeroPoints) {
  SKIP_WITHOUT_EMU_WGMMA();
  // The stem: 3 channels padded to 16, stride 2, pad 1, the border reads
  // A's zero point 131 (st.shared by the producer: its own arrival).
  Int8ConvCase stem{int8Conv(2, 9, 11, 3, 24, 3, 2, 1, DType::U8, DType::U8),
                    wgmmaS8(64, 64, 2)};
  stem.aZeroPoint = 131;
  stem.outputZeroPoint = 128;
  runInt8ConvCase(stem);
  // Two groups of 24 channels (two chunks a tap, the second partial),
  // dilation 2, u8 filters with per-channel zero points (row sums), i32.
  Int8ConvCase groups{
      int8Conv(1, 8, 7, 48, 16, 3, 1, 2, DType::I8, DType::I32, 2, 2),
      wgmmaS8(64, 64, 3)};
  groups.filterType = DType::U8;
  groups.aZeroPoint = -5;
  groups.weightZeroPoints = true;
  runInt8ConvCase(groups);
}

/// Writes cases for int8-gemm-vs-onnxruntime.test (which compares them
/// with onnxruntime's QLinearMatMul and MatMulInteger) into
/// $KILN_INT8_DUMP_DIR; skipped without it. Each case is also checked
/// here, as the others are. The scales are onnxruntime's: (a_scale *
/// b_scale) / y_scale in f32, left to right (qlinearmatmul.cc).
TEST_F(Int8GemmKernelsTest, CasesForOnnxruntime) {
  const char *dir = std::getenv("KILN_INT8_DUMP_DIR");
  if (!dir)
    GTEST_SKIP() << "KILN_INT8_DUMP_DIR is not set "
                    "(int8-gemm-vs-onnxruntime.test sets it)";
  auto ortScale = [](float a, float b, float y) {
    volatile float ab = a * b;
    volatile float s = ab / y;
    return static_cast<float>(s);
  };
  std::ofstream list(std::string(dir) + "/cases.txt");
  auto emit = [&](const std::string &name, Int8Case c, float aScale,
                  std::vector<float> bScales, float yScale) {
    const GemmProblem &p = c.problem;
    c.dumpTo = std::string(dir) + "/" + name;
    if (c.epilogue.scaleVector) {
      for (float bs : bScales)
        c.scales.push_back(ortScale(aScale, bs, yScale));
    } else if (p.outputType != DType::I32) {
      c.epilogue.scale = ortScale(aScale, bScales[0], yScale);
    }
    runInt8Case(c);
    auto typeName = [](DType t) {
      return t == DType::U8 ? "uint8" : t == DType::I8 ? "int8" : "int32";
    };
    list << name << " " << p.m << " " << p.n << " " << p.k << " "
         << typeName(p.inputType) << " " << typeName(p.inputTypeB) << " "
         << typeName(p.outputType) << " " << c.aZeroPoint.value_or(0) << " "
         << c.epilogue.outputZeroPoint << " "
         << (c.epilogue.rowSumZeroPointB ? 1 : 0) << " ";
    char text[32];
    std::snprintf(text, sizeof(text), "%a", aScale);
    list << text << " " << yScale << " " << bScales.size();
    for (float bs : bScales) {
      std::snprintf(text, sizeof(text), "%a", bs);
      list << " " << text;
    }
    list << "\n";
  };
  {
    // onnxruntime's quantizer's shape: u8 activations with a zero point,
    // s8 weights without; ragged M, N and K.
    Int8Case c{int8Problem(50, 40, 70, DType::U8, DType::I8, DType::U8),
               int8Config(64, 64, 64, 32, 32, 3),
               {}};
    c.epilogue.offset = true;
    c.epilogue.outputZeroPoint = 128;
    c.aZeroPoint = 131;
    emit("qlinear_u8s8_u8", c, 0.02f, {0.01f}, 0.05f);
  }
  {
    // Small values and a scale of 0.1f after onnxruntime's f32 steps:
    // the f32 product lands on ties the float64 one does not.
    Int8Case c{int8Problem(64, 48, 96, DType::I8, DType::I8, DType::I8),
               int8Config(64, 64, 32, 32, 32, 3),
               {}};
    c.epilogue.offset = true;
    c.epilogue.outputZeroPoint = -2;
    c.aZeroPoint = 3;
    c.low = -6, c.high = 6, c.lowB = -6, c.highB = 6;
    emit("qlinear_ties_s8s8_s8", c, 0.5f, {0.25f}, 1.25f);
  }
  {
    // A per-column weight scale (onnxruntime's QLinearMatMul kernels
    // output A's type).
    Int8Case c{int8Problem(33, 24, 64, DType::U8, DType::I8, DType::U8),
               int8Config(64, 32, 32, 32, 16, 2),
               {}};
    c.epilogue.offset = true;
    c.epilogue.scaleVector = true;
    c.epilogue.outputZeroPoint = 120;
    c.aZeroPoint = 100;
    std::vector<float> bScales;
    for (int n = 0; n < 24; ++n)
      bScales.push_back(0.002f + 0.0005f * n);
    emit("qlinear_per_column", c, 0.03f, bScales, 0.07f);
  }
  {
    // MatMulInteger: u8 x u8 with a zero point each (B's per column), i32.
    Int8Case c{int8Problem(40, 24, 100, DType::U8, DType::U8, DType::I32),
               int8Config(64, 64, 32, 32, 32, 2),
               {}};
    c.epilogue.offset = true;
    c.epilogue.rowSumZeroPointB = true;
    c.aZeroPoint = 7;
    emit("matmulinteger_u8u8_i32", c, 1.0f, {1.0f}, 1.0f);
  }
  {
    // QLinearConv: a u8 image with zero point 131 (the padding reads it),
    // s8 filters with per-channel scales, an int32 bias, u8 output. The
    // filters are 7-bit ([-64, 63], onnxruntime's reduce_range): on AVX2
    // without VNNI onnxruntime's u8 x s8 convolution adds pairs of
    // products in saturating 16 bits (vpmaddubsw), so with full-range
    // filters it is not exact (370 of 1440 outputs off, by up to 26, on the
    // 2-core machine, 2026-12-02).
    Int8ConvCase cc{int8Conv(2, 9, 11, 3, 24, 3, 2, 1, DType::U8, DType::U8),
                    int8Config(64, 32, 32, 32, 16, 3)};
    cc.filterLow = -64, cc.filterHigh = 63;
    cc.aZeroPoint = 131;
    cc.outputZeroPoint = 128;
    float xScale = 0.02f, yScale = 0.3f;
    std::vector<float> wScales;
    for (int o = 0; o < 24; ++o)
      wScales.push_back(0.001f + 0.0003f * o);
    for (float ws : wScales)
      cc.scales.push_back(ortScale(xScale, ws, yScale));
    cc.dumpTo = std::string(dir) + "/qlinearconv_u8s8_u8";
    runInt8ConvCase(cc);
    const ConvProblem &cp = cc.problem;
    char text[32];
    list << "qlinearconv_u8s8_u8 conv " << cp.n << " " << cp.h << " " << cp.w
         << " " << cp.c << " " << cp.o << " " << cp.kh << " " << cp.strideH
         << " " << cp.padH << " " << cc.aZeroPoint << " " << cc.outputZeroPoint;
    std::snprintf(text, sizeof(text), "%a", xScale);
    list << " " << text;
    std::snprintf(text, sizeof(text), "%a", yScale);
    list << " " << text << " " << wScales.size();
    for (float ws : wScales) {
      std::snprintf(text, sizeof(text), "%a", ws);
      list << " " << text;
    }
    list << "\n";
  }
}

TEST(Int8GemmProblems, RefusedWithReasons) {
  GemmConfig c = int8Config(64, 64, 64, 32, 32, 3);
  GemmProblem p = int8Problem(64, 64, 64, DType::I8, DType::I8, DType::I8);
  EXPECT_EQ(unsupportedReason(p, c), "");
  GemmProblem rowB = p;
  rowB.layoutB = Layout::RowMajor;
  EXPECT_THAT(unsupportedReason(rowB, c),
              ::testing::HasSubstr("B stored [N][K]"));
  GemmProblem f16 = p;
  f16.inputType = DType::F16;
  EXPECT_THAT(unsupportedReason(f16, c),
              ::testing::HasSubstr("needs i8 or u8 inputs"));
  GemmConfig split = c;
  split.splitK = 2;
  EXPECT_THAT(unsupportedReason(p, split), ::testing::HasSubstr("split-K"));
  Epilogue floatEpilogue;
  floatEpilogue.activation = Activation::Relu;
  auto source = generateGemmSource(p, c, floatEpilogue, {});
  ASSERT_FALSE(bool(source));
  EXPECT_THAT(source.error().message(),
              ::testing::HasSubstr("only the integer epilogue"));
  Epilogue badZp;
  badZp.integer.outputZeroPoint = 200;
  auto zp = generateGemmSource(p, c, badZp, {});
  ASSERT_FALSE(bool(zp));
  EXPECT_THAT(zp.error().message(), ::testing::HasSubstr("zero point"));
  Epilogue badResidual;
  badResidual.integer.residual.enabled = true;
  badResidual.integer.residual.sumScale = 0.0f;
  auto res = generateGemmSource(p, c, badResidual, {});
  ASSERT_FALSE(bool(res));
  EXPECT_THAT(res.error().message(),
              ::testing::HasSubstr("finite and positive"));
  Epilogue residualI32;
  residualI32.integer.residual.enabled = true;
  auto i32 = generateGemmSource(
      int8Problem(64, 64, 64, DType::I8, DType::I8, DType::I32), c, residualI32,
      {});
  ASSERT_FALSE(bool(i32));
  EXPECT_THAT(i32.error().message(), ::testing::HasSubstr("8-bit outputs"));
  Epilogue badPad;
  badPad.integer.paddingValue = 128; // A is s8
  auto pad = generateGemmSource(p, c, badPad, {});
  ASSERT_FALSE(bool(pad));
  EXPECT_THAT(pad.error().message(), ::testing::HasSubstr("padding value"));
  Epilogue onFloat;
  onFloat.integer.offset = true;
  auto wrongFamily =
      generateGemmSource(problem(64, 64, 64, DType::BF16, DType::F32),
                         tensorCore(64, 64, 32, 32, 32, 3), onFloat, {});
  ASSERT_FALSE(bool(wrongFamily));
  EXPECT_THAT(wrongFamily.error().message(),
              ::testing::HasSubstr("needs an int8 family"));
}

} // namespace

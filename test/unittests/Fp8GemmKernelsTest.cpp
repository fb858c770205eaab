//===- Fp8GemmKernelsTest.cpp - The fp8 GEMM families on the emulator -----===//
//
// The fp8 families (Family::MmaF8: mma.sync m16n8k32; Family::WgmmaF8:
// sm_90a wgmma m64nNk32), each case generated with NVRTC, checked by ptxas
// when there is one, run on the emu device, and every output compared with
// a float64 reference over the operands' decoded values
// (ContractionTestSupport.h: decodeFp8 reads the e4m3fn and e5m2 bytes from
// the formats' definitions, not from the emulator's or the runtime's
// decoder).
//
// The bound is the float families' (ContractionTestSupport.h,
// referenceOutput): a product of two fp8 values has at most 8 significant
// bits, so it is exact in f32, and the only rounding is the f32
// accumulation, (K + 8) u sum |products| (u = 2^-24), then the epilogue's
// and the output type's. The operands are drawn from every finite byte in
// [-1, 1] (subnormals included), so a decoder that misreads an exponent or
// the e4m3/e5m2 split misses the reference by far more than the bound.
//
// Real Hopper tensor cores accumulate fp8 products with fewer than f32's
// bits inside one wgmma (DeepSeek-V3's report measures ~14); the emulator
// accumulates in f32, so these cases check the kernels' data movement and
// instruction use, not that hardware detail (docs/emulator.md).
//
//===----------------------------------------------------------------------===//

#include "ContractionTestSupport.h"

using namespace kiln::contraction_test;

namespace {

GemmProblem fp8Problem(uint64_t m, uint64_t n, uint64_t k, DType a, DType b,
                       DType out) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.inputType = a, p.inputTypeB = b;
  p.accumulatorType = DType::F32;
  p.outputType = out;
  p.layoutA = Layout::RowMajor;
  p.layoutB = Layout::ColMajor; // B stored [N][K]
  return p;
}

GemmConfig mmaF8(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wm,
                 uint32_t wn, uint32_t stages, uint32_t split = 1) {
  return tensorCore(bm, bn, bk, wm, wn, stages, split, Family::MmaF8);
}

GemmConfig wgmmaF8(uint32_t bm, uint32_t bn, uint32_t stages,
                   uint32_t split = 1) {
  return wgmmaConfig(bm, bn, stages, split, Family::WgmmaF8);
}

/// The PTX of the case's main kernel.
std::string ptxOf(const GemmProblem &p, const GemmConfig &c,
                  const Epilogue &e = {}) {
  GenerateOptions options;
  options.name = "fp8_gemm";
  auto generated = generateGemm(p, c, e, options);
  EXPECT_TRUE(bool(generated)) << generated.error().message();
  return generated ? generated->kernels.front().ptx : std::string();
}

class Fp8GemmKernelsTest : public ContractionKernelsTest {};

TEST_F(Fp8GemmKernelsTest, MmaE4M3RaggedTiles) {
  // M and N not multiples of the tile, K = 160: five K steps of 32, the
  // last K tile of 64 half full.
  Case c{fp8Problem(70, 72, 160, DType::F8E4M3FN, DType::F8E4M3FN, DType::F32),
         mmaF8(64, 64, 64, 32, 32, 3),
         {}};
  EXPECT_FALSE(runCase(c, "mma_f8").empty());
}

TEST_F(Fp8GemmKernelsTest, MmaMixedTypesWithScaleBiasRelu) {
  // A e5m2, B e4m3 (the mma mixes them), per-column scale and bias, relu,
  // f16 output.
  Case c{fp8Problem(48, 80, 96, DType::F8E5M2, DType::F8E4M3FN, DType::F16),
         mmaF8(32, 32, 64, 16, 16, 3),
         {}};
  c.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.activation = Activation::Relu;
  c.seed = 11;
  EXPECT_FALSE(runCase(c, "mma_f8_mixed").empty());
}

TEST_F(Fp8GemmKernelsTest, MmaSplitK) {
  Case c{fp8Problem(32, 64, 512, DType::F8E4M3FN, DType::F8E5M2, DType::BF16),
         mmaF8(32, 64, 64, 32, 32, 3, /*split=*/4),
         {}};
  c.epilogue.alpha = 0.5f;
  EXPECT_FALSE(runCase(c, "mma_f8_split").empty());
}

TEST_F(Fp8GemmKernelsTest, WgmmaE4M3) {
  if (std::string gap = emuWgmmaGap(); !gap.empty())
    GTEST_SKIP() << gap;
  // Two K tiles of 128 and a ragged third; M, N ragged.
  Case c{fp8Problem(100, 96, 320, DType::F8E4M3FN, DType::F8E4M3FN, DType::F32),
         wgmmaF8(64, 64, 3),
         {}};
  c.epilogue.alpha = 0.25f;
  EXPECT_FALSE(runCase(c, "wgmma_f8").empty());
}

TEST_F(Fp8GemmKernelsTest, WgmmaTwoConsumersE5M2ScaleBias) {
  if (std::string gap = emuWgmmaGap(); !gap.empty())
    GTEST_SKIP() << gap;
  Case c{fp8Problem(130, 128, 256, DType::F8E5M2, DType::F8E5M2, DType::BF16),
         wgmmaF8(128, 128, 2),
         {}};
  c.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.seed = 4;
  EXPECT_FALSE(runCase(c, "wgmma_f8_two").empty());
}

TEST_F(Fp8GemmKernelsTest, WgmmaSplitK) {
  if (std::string gap = emuWgmmaGap(); !gap.empty())
    GTEST_SKIP() << gap;
  Case c{fp8Problem(64, 64, 1024, DType::F8E4M3FN, DType::F8E5M2, DType::F32),
         wgmmaF8(64, 64, 2, /*split=*/2),
         {}};
  EXPECT_FALSE(runCase(c, "wgmma_f8_split").empty());
}

TEST_F(Fp8GemmKernelsTest, ImplicitConvolutions) {
  // 3x3, 20 channels (padded to 32 in the filter), stride 1, pad 1; then a
  // strided grouped one on wgmma.
  ConvCase mma{
      conv(2, 7, 6, 20, 24, 3, 1, 1), mmaF8(64, 32, 32, 32, 16, 3), {}};
  mma.problem.inputType = DType::F8E4M3FN;
  mma.problem.outputType = DType::F32;
  mma.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  runConvCase(mma);
  if (std::string gap = emuWgmmaGap(); !gap.empty())
    GTEST_SKIP() << gap;
  ConvCase wg{conv(1, 9, 9, 32, 128, 3, 2, 1, 1, 2), wgmmaF8(64, 64, 2), {}};
  wg.problem.inputType = DType::F8E5M2;
  wg.problem.outputType = DType::BF16;
  runConvCase(wg);
}

// --- fp8 outputs: a QuantizeLinear to float8 fused (Epilogue::outputScale)
//
// The reference divides the epilogue's value by the output scale and
// saturates it to the type's largest finite value; the bound adds the
// division's rounding and the float8 rounding (half an ulp: 2^-4 relative
// for e4m3, 2^-3 for e5m2, and half the smallest subnormal near zero).

TEST_F(Fp8GemmKernelsTest, MmaE4M3OutputScaleBiasRelu) {
  // e4m3 in and out; the scale 1/512 puts the largest outputs past 448, so
  // the saturation is reached; ragged N (element stores at the edge).
  Case c{fp8Problem(70, 45, 160, DType::F8E4M3FN, DType::F8E4M3FN,
                    DType::F8E4M3FN),
         mmaF8(64, 64, 64, 32, 32, 3),
         {}};
  c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.activation = Activation::Relu;
  c.epilogue.outputScale = 1.0f / 512;
  std::vector<double> got = runCase(c, "mma_f8_out");
  ASSERT_FALSE(got.empty());
  EXPECT_GT(std::count(got.begin(), got.end(), 448.0), 0)
      << "no output reached the saturation";
}

TEST_F(Fp8GemmKernelsTest, WgmmaE4M3OutputScaleVector) {
  if (std::string gap = emuWgmmaGap(); !gap.empty())
    GTEST_SKIP() << gap;
  Case c{fp8Problem(130, 128, 256, DType::F8E4M3FN, DType::F8E5M2,
                    DType::F8E4M3FN),
         wgmmaF8(128, 128, 2),
         {}};
  c.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.outputScale = 0.37f;
  c.seed = 6;
  EXPECT_FALSE(runCase(c, "wgmma_f8_out").empty());
}

TEST_F(Fp8GemmKernelsTest, SplitKE5M2Output) {
  // The last split converts (SplitKReduce.cuh's storeOut), on both kernels.
  Case mma{
      fp8Problem(32, 64, 512, DType::F8E4M3FN, DType::F8E4M3FN, DType::F8E5M2),
      mmaF8(32, 64, 64, 32, 32, 3, /*split=*/4),
      {}};
  mma.epilogue.outputScale = 0.05f;
  EXPECT_FALSE(runCase(mma, "mma_f8_split_out").empty());
  if (std::string gap = emuWgmmaGap(); !gap.empty())
    GTEST_SKIP() << gap;
  Case wg{
      fp8Problem(64, 64, 1024, DType::F8E4M3FN, DType::F8E5M2, DType::F8E4M3FN),
      wgmmaF8(64, 64, 2, /*split=*/2),
      {}};
  wg.epilogue.outputScale = 2.5f;
  EXPECT_FALSE(runCase(wg, "wgmma_f8_split_out").empty());
}

TEST_F(Fp8GemmKernelsTest, InstructionsInThePtx) {
  GemmProblem p =
      fp8Problem(64, 64, 128, DType::F8E4M3FN, DType::F8E5M2, DType::F32);
  EXPECT_THAT(ptxOf(p, mmaF8(64, 64, 64, 32, 32, 2)),
              ::testing::HasSubstr(
                  "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"));
  EXPECT_THAT(
      ptxOf(p, wgmmaF8(64, 64, 2)),
      ::testing::HasSubstr("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3."
                           "e5m2"));
  // On sm_90 the heuristic offers wgmma_f8 first, mma_f8 after it.
  std::vector<GemmConfig> candidates =
      candidateConfigs(p, Family::MmaF8, 90, /*wgmma=*/true, /*tma=*/false);
  ASSERT_FALSE(candidates.empty());
  EXPECT_EQ(candidates.front().family, Family::WgmmaF8);
  EXPECT_EQ(candidates.front().blockK, 128u);
  EXPECT_EQ(candidates.back().family, Family::MmaF8);
}

TEST_F(Fp8GemmKernelsTest, Refusals) {
  GemmProblem p =
      fp8Problem(64, 64, 128, DType::F8E4M3FN, DType::F8E4M3FN, DType::F32);
  // No transposing loads of 8-bit elements: B must be [N][K].
  GemmProblem rowB = p;
  rowB.layoutB = Layout::RowMajor;
  EXPECT_THAT(unsupportedReason(rowB, mmaF8(64, 64, 64, 32, 32, 2)),
              ::testing::HasSubstr("B stored [N][K]"));
  // The FNUZ variants have no instruction.
  GemmProblem fnuz = p;
  fnuz.inputType = DType::F8E4M3FNUZ;
  EXPECT_THAT(unsupportedReason(fnuz, wgmmaF8(64, 64, 2)),
              ::testing::HasSubstr("needs f8E4M3FN or f8E5M2 inputs"));
  // wgmma_f8's K tile is one 128-byte row: 128 elements.
  GemmConfig shortK = wgmmaF8(64, 64, 2);
  shortK.blockK = 64;
  EXPECT_THAT(unsupportedReason(p, shortK),
              ::testing::HasSubstr("128 fp8 or int8 elements"));
  // Only the fp8 families store float8.
  GemmProblem f8Out = problem(64, 64, 64, DType::BF16, DType::F8E4M3FN);
  EXPECT_THAT(unsupportedReason(f8Out, tensorCore(64, 64, 32, 32, 32, 3)),
              ::testing::HasSubstr("output needs an fp8 family"));
  // fp8 tensor cores start at sm_89.
  GenerateOptions sm80;
  sm80.name = "fp8_sm80";
  sm80.smVersion = 80;
  auto refused = specializeGemm(p, mmaF8(64, 64, 64, 32, 32, 2), {}, sm80);
  ASSERT_FALSE(bool(refused));
  EXPECT_THAT(refused.error().message(),
              ::testing::HasSubstr("fp8 tensor cores need sm_89"));
}

} // namespace

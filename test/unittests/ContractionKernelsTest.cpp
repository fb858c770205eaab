//===- ContractionKernelsTest.cpp - Generated GEMM kernels on the emulator
//-===//
//
// Each case generates a kernel (NVRTC), checks its PTX with ptxas, runs it
// on the emu device and compares every output with a float64 reference
// computed here by a naive loop over the same (already rounded) inputs.
//
// Tolerance, per output: the inputs are exactly representable in the
// kernel's input type (tf32 cases round them here with the kernel's own
// cvt.rna), so the products are exact and the only error is fp32
// accumulation: at most (K + 8) u S with u = 2^-24 and S the sum of
// |a_k b_k| (a rigorous bound on recursive or blocked fp32 summation, which
// also covers the split-K sums and the few epilogue roundings). In practice
// this is ~1e-5 of S at the K used here. Activations add their own few ulps
// (4 u |f| + 1e-7) and propagate the error with slope at most 1.13 (GELU's
// largest). A 16-bit output then adds half an ulp of the result plus one
// for the fp32 error that can push it across a rounding boundary: 2^-8 |v|
// for bf16, 2^-11 for f16. A tf32 case is also compared with the reference
// on the unrounded fp32 inputs, within 1e-3 S (tf32 keeps 10 explicit
// mantissa bits: each product is off by at most 2 * 2^-11 relative). The
// wgmma tf32 kernel hands the tensor core unrounded fp32 operands, which
// it truncates to their upper 19 bits: its references truncate the inputs
// the same way, and the unrounded comparison allows 2^-9 S (each operand
// loses less than 2^-10 of itself, so each product less than 2^-9).
//
// NVRTC or ptxas missing: the cases skip. Every launch runs with the
// shared-memory read check and a random block order (set below unless the
// environment already chose).
//
//===----------------------------------------------------------------------===//

#include "ContractionTestSupport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace kiln::contraction_test;

namespace {

// --- bf16 / f16 tensor cores
// -----------------------------------------------------

TEST_F(ContractionKernelsTest, Bf16RowRowTailsInEveryDimension) {
  // M, N, K all off the 64x64x32 tile; B row-major needs ldmatrix.trans.
  runCase({problem(77, 45, 70, DType::BF16, DType::F32),
           tensorCore(64, 64, 32, 32, 32, 3),
           {}});
}

TEST_F(ContractionKernelsTest, F16TransposedBBiasReluF16Out) {
  // A * W^T with W stored [N][K]; per-column bias, relu, f16 output.
  Case c{problem(40, 72, 96, DType::F16, DType::F16, Layout::RowMajor,
                 Layout::ColMajor),
         tensorCore(64, 64, 32, 32, 32, 4),
         {}};
  c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F16};
  c.epilogue.activation = Activation::Relu;
  runCase(c);
}

TEST_F(ContractionKernelsTest, Bf16ColumnMajorA) {
  // A stored [K][M]: its fragments come from ldmatrix.trans too.
  Case c{problem(50, 40, 48, DType::BF16, DType::BF16, Layout::ColMajor,
                 Layout::ColMajor),
         tensorCore(64, 64, 32, 32, 32, 3),
         {}};
  c.epilogue.alpha = 0.5f;
  runCase(c);
}

TEST_F(ContractionKernelsTest, KSmallerThanOneTileAndUnaligned) {
  // K = 8 (one chunk), then K = 5 with lda = 5: rows start 10 bytes apart,
  // so A is copied element by element through registers.
  runCase({problem(33, 24, 8, DType::BF16, DType::F32),
           tensorCore(32, 32, 64, 16, 16, 3),
           {}});
  runCase({problem(33, 24, 5, DType::BF16, DType::F32),
           tensorCore(32, 32, 64, 16, 16, 3),
           {}});
}

TEST_F(ContractionKernelsTest, EveryCopyWidth) {
  // A's rows of 12 elements, and padded ones of 10 for K = 6, are 8- and
  // 4-byte aligned (cp.async of 8 and 4 bytes); B's base only 4-byte aligned
  // (cp.async of 4 bytes), and it is batched, not broadcast; C's odd ldc leaves
  // only 2-byte stores.
  for (uint64_t k : {12u, 6u}) {
    Case c{problem(21, 44, k, DType::BF16, DType::BF16),
           tensorCore(32, 32, 32, 16, 16, 3),
           {}};
    uint64_t lda = k == 12 ? 12 : 10;
    c.problem.lda = lda;
    c.problem.alignB = 4;
    c.problem.ldc = 45;
    c.problem.batch = 2;
    c.problem.batchStrideA = 21 * lda;
    c.problem.batchStrideB = k * 44 + 2;
    c.problem.batchStrideC = 21 * 45;
    runCase(c);
  }
}

TEST_F(ContractionKernelsTest, NEqualsOne) {
  // A matrix-vector product: B is [K][1] (ldb = 1), C is [M][1].
  Case c{problem(100, 1, 40, DType::BF16, DType::BF16),
         tensorCore(128, 16, 64, 32, 16, 3),
         {}};
  c.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::F32};
  runCase(c);
}

TEST_F(ContractionKernelsTest, BatchOfThreeWithBroadcastBResidualGelu) {
  Case c = batchedResidualGelu(40, DType::BF16,
                               tensorCore(32, 32, 64, 16, 16, 3), DType::BF16);
  runCase(c);
  // Batch 1 of the same shape, for the batch-stride-free path.
  c.problem.batch = 1;
  runCase(c);
}

TEST_F(ContractionKernelsTest, SplitKSumsInOrderThenEpilogue) {
  // Small M*N, long K: four splits of 5 K tiles, the reduction applies
  // per-row bias, a per-column scale and a sigmoid.
  Case c{problem(20, 24, 600, DType::BF16, DType::BF16),
         tensorCore(32, 32, 32, 16, 16, 3, 4),
         {}};
  c.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::BF16};
  c.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.activation = Activation::Sigmoid;
  runCase(c);
}

TEST_F(ContractionKernelsTest, EveryEpilogueKind) {
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu,
                         Activation::GeluTanh, Activation::Sigmoid,
                         Activation::Tanh, Activation::Clip}) {
    Case c{problem(18, 20, 24, DType::BF16, DType::F32),
           tensorCore(32, 32, 32, 16, 16, 2),
           {}};
    c.epilogue.activation = act;
    c.epilogue.clipMin = -0.25f, c.epilogue.clipMax = 0.25f;
    c.epilogue.alpha = 2.0f;
    c.epilogue.residual = true;
    c.epilogue.beta = -0.5f;
    runCase(c);
  }
}

TEST_F(ContractionKernelsTest, CustomEpilogueBody) {
  // What a fusion region generates: its own statements over extra operands.
  Case c{problem(16, 16, 16, DType::BF16, DType::F32),
         tensorCore(32, 32, 32, 16, 16, 2),
         {}};
  c.epilogue.customOperands = {"shift"};
  c.epilogue.customBody = "  return acc - 2.0f * ((const float *)extra0)[col];";
  GenerateOptions options;
  auto source = generateGemmSource(c.problem, c.config, c.epilogue, options);
  ASSERT_TRUE(bool(source)) << source.error().message();
  EXPECT_THAT(*source, ::testing::HasSubstr("const void *__restrict__ shift"));
  auto kernels = generateGemm(c.problem, c.config, c.epilogue, options);
  ASSERT_TRUE(bool(kernels)) << kernels.error().message();
  ASSERT_EQ(kernels->kernels[0].params.size(), 7u);
  EXPECT_EQ(kernels->kernels[0].params[3].name, "shift");
}

TEST_F(ContractionKernelsTest, SecondOutput) {
  // A region's f32 value and a copy of it (here relu(acc) in bf16 or f16)
  // in one kernel: C from `which` 0, "aux" from `which` 1, on every family
  // and through the split-K reduction, with ragged M and N edges.
  auto withAux = [](Case c, DType auxType) {
    c.epilogue.customBody =
        "  return which == 1 ? fmaxf(acc, 0.0f) : acc;";
    c.epilogue.aux = true;
    c.epilogue.auxType = auxType;
    return c;
  };
  runCase(withAux({problem(70, 40, 48, DType::BF16, DType::F32),
                   tensorCore(32, 32, 32, 16, 16, 2), {}},
                  DType::BF16));
  runCase(withAux({problem(70, 40, 96, DType::F16, DType::F32),
                   tensorCore(32, 32, 32, 16, 16, 2, 2), {}},
                  DType::F16));
  runCase(withAux({problem(33, 20, 24, DType::F32, DType::F32),
                   simt(32, 32, 8, 4, 4, 2), {}},
                  DType::BF16));
  runCase(withAux({problem(70, 40, 48, DType::F32, DType::F32),
                   tensorCore(32, 32, 16, 16, 16, 2, 1, Family::MmaTf32), {}},
                  DType::BF16));
  // bf16 C with a bf16 copy: aux as wide as C.
  runCase(withAux({problem(70, 40, 48, DType::BF16, DType::BF16),
                   tensorCore(32, 32, 32, 16, 16, 2), {}},
                  DType::BF16));
  if (!emuWgmmaGap().empty())
    GTEST_SKIP() << emuWgmmaGap();
  runCase(withAux({problem(130, 72, 64, DType::BF16, DType::F32),
                   wgmmaConfig(128, 64, 2), {}},
                  DType::BF16));
}

TEST_F(ContractionKernelsTest, SecondOutputRefused) {
  // Wider than C, or without a custom body: one-line errors.
  Epilogue e;
  e.aux = true;
  e.auxType = DType::F32;
  e.customBody = "  return acc;";
  GenerateOptions options;
  auto wider = generateGemmSource(problem(16, 16, 16, DType::BF16, DType::BF16),
                                  tensorCore(32, 32, 32, 16, 16, 2), e, options);
  ASSERT_FALSE(bool(wider));
  EXPECT_THAT(wider.error().message(), ::testing::HasSubstr("no wider than C"));
  e.customBody.clear();
  auto bodiless = generateGemmSource(
      problem(16, 16, 16, DType::BF16, DType::F32),
      tensorCore(32, 32, 32, 16, 16, 2), e, options);
  ASSERT_FALSE(bool(bodiless));
  EXPECT_THAT(bodiless.error().message(),
              ::testing::HasSubstr("custom epilogue body"));
}

TEST_F(ContractionKernelsTest, LargeTiles) {
  // The tiles the heuristic picks for big problems, on one block each.
  runCase({problem(128, 128, 64, DType::BF16, DType::BF16),
           tensorCore(128, 128, 32, 64, 64, 4),
           {}});
  runCase({problem(100, 200, 40, DType::F16, DType::F32, Layout::RowMajor,
                   Layout::ColMajor),
           tensorCore(128, 256, 32, 64, 64, 3),
           {}});
}

TEST_F(ContractionKernelsTest, WgmmaTailsInEveryDimension) {
  SKIP_WITHOUT_EMU_WGMMA();
  // M, N, K off every tile (K: three K tiles, the last partial), B
  // row-major (MN-major, wgmma's transpose bit); one and two consumers.
  runCase({problem(77, 45, 150, DType::BF16, DType::F32), wgmmaConfig(64, 64, 2),
           {}});
  runCase({problem(200, 136, 200, DType::BF16, DType::BF16),
           wgmmaConfig(128, 128, 3),
           {}});
}

TEST_F(ContractionKernelsTest, WgmmaEveryLayout) {
  SKIP_WITHOUT_EMU_WGMMA();
  // K-major and MN-major A and B, f16, bias + relu, f16 out, a 2-stage
  // ring that wraps several times (K = 320: five K tiles).
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
      Case c{problem(70, 72, 320, DType::F16, DType::F16, la, lb),
             wgmmaConfig(128, 64, 2),
             {}};
      c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F16};
      c.epilogue.activation = Activation::Relu;
      runCase(c);
    }
}

TEST_F(ContractionKernelsTest, WgmmaSmallKNEqualsOneUnaligned) {
  SKIP_WITHOUT_EMU_WGMMA();
  // K = 8 (below one K tile); N = 1; K = 5 with lda = 5 (register copies,
  // the producer arrives itself).
  runCase({problem(33, 24, 8, DType::BF16, DType::F32), wgmmaConfig(64, 64, 2),
           {}});
  Case n1{problem(100, 1, 40, DType::BF16, DType::BF16),
          wgmmaConfig(128, 64, 2),
          {}};
  n1.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::F32};
  runCase(n1);
  runCase({problem(33, 24, 5, DType::BF16, DType::F32), wgmmaConfig(64, 64, 2),
           {}});
}

TEST_F(ContractionKernelsTest, WgmmaBatchesSplitKAndWideTile) {
  SKIP_WITHOUT_EMU_WGMMA();
  // Batch 3 with a broadcast B, residual and gelu; then batch 1.
  Case c = batchedResidualGelu(70, DType::BF16, wgmmaConfig(64, 64, 3),
                               DType::BF16);
  runCase(c);
  c.problem.batch = 1;
  runCase(c);
  // Split-K: 3 splits of 3 K tiles; the reduction applies the epilogue.
  Case s{problem(20, 24, 576, DType::BF16, DType::BF16),
         wgmmaConfig(64, 64, 2, 3),
         {}};
  s.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::BF16};
  s.epilogue.activation = Activation::Sigmoid;
  runCase(s);
  // The 128x256 tile (128 accumulators a thread, setmaxnreg).
  runCase({problem(130, 260, 72, DType::F16, DType::F32, Layout::RowMajor,
                   Layout::ColMajor),
           wgmmaConfig(128, 256, 2),
           {}});
}

// --- sm_90a wgmma with the TMA producer
// ----------------------------------------------------
//
// The same references and bounds as the cp.async producer's cases: every
// edge of M, N and K is the copy engine's zero fill (tensor maps with OOB
// fill 0), so a wrong box, coordinate or fill shows up as a wrong sum.

TEST_F(ContractionKernelsTest, TmaRaggedEdgesEveryLayout) {
  SKIP_WITHOUT_EMU_WGMMA();
  // M, N, K off every tile (K = 136: three K tiles, the last 8 wide) in
  // every operand layout (K-major: one box a tile; MN-major: a box per 64
  // elements); one and two consumers, a 2-stage ring that wraps.
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
      Case c{problem(72, 40, 136, DType::BF16, DType::F32, la, lb),
             tmaConfig(la == lb ? 128 : 64, 64, 2),
             {}};
      runCase(c);
    }
}

TEST_F(ContractionKernelsTest, TmaKBelowOneTileAndNEqualsOne) {
  SKIP_WITHOUT_EMU_WGMMA();
  // K = 8: one box mostly past K; N = 8 with B [N][K]; f16 in and out.
  runCase({problem(33, 24, 8, DType::F16, DType::F16), tmaConfig(64, 64, 2),
           {}});
  Case n1{problem(70, 8, 40, DType::BF16, DType::BF16, Layout::RowMajor,
                  Layout::ColMajor),
          tmaConfig(64, 64, 2),
          {}};
  n1.problem.n = 1; // B [1][K]: one row of the map, the rest zero fill
  n1.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::F32};
  runCase(n1);
}

TEST_F(ContractionKernelsTest, TmaBatchesSplitKAndEpilogues) {
  SKIP_WITHOUT_EMU_WGMMA();
  // Batch 3: A's map has a batch dimension, B (broadcast) has none;
  // residual + gelu.
  Case c = batchedResidualGelu(72, DType::BF16, tmaConfig(64, 64, 3),
                               DType::BF16);
  runCase(c);
  // Both batched, B [N][K].
  Case both{problem(16, 24, 64, DType::F16, DType::F16, Layout::RowMajor,
                    Layout::ColMajor),
            tmaConfig(64, 64, 2),
            {}};
  both.problem.batch = 2;
  both.problem.batchStrideA = 16 * 64;
  both.problem.batchStrideB = 24 * 64;
  both.problem.batchStrideC = 16 * 24;
  both.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  runCase(both);
  // Split-K: 3 splits of 3 K tiles each start their maps at their own K;
  // the reduction applies bias + sigmoid.
  Case s{problem(20, 24, 576, DType::BF16, DType::BF16),
         tmaConfig(64, 64, 2, 3),
         {}};
  s.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::BF16};
  s.epilogue.activation = Activation::Sigmoid;
  runCase(s);
}

TEST(ContractionConfigTest, TmaOnlyWhereTheCopyEngineCanAddress) {
  // The candidates pair each wgmma tile with TMA first, then cp.async.
  GemmProblem p = problem(512, 512, 512, DType::BF16, DType::BF16);
  std::vector<GemmConfig> all = candidateConfigs(p, Family::MmaF16, 90);
  ASSERT_GE(all.size(), 2u);
  EXPECT_TRUE(all[0].tma) << all[0].describe();
  EXPECT_FALSE(all[1].tma) << all[1].describe();
  EXPECT_EQ(all[0].blockM, all[1].blockM);
  EXPECT_EQ(pickConfig(p, Family::MmaF16, 90).describe().substr(0, 5), "wgmma");
  EXPECT_TRUE(pickConfig(p, Family::MmaF16, 90).tma);
  // --tma=false: none.
  for (const GemmConfig &c :
       candidateConfigs(p, Family::MmaF16, 90, true, /*tma=*/false))
    EXPECT_FALSE(c.tma) << c.describe();
  // Strides TMA cannot take fall back to cp.async, saying why.
  GemmProblem odd = problem(64, 64, 60, DType::BF16, DType::F32); // 120 B rows
  EXPECT_THAT(tmaUnsupportedReason(odd),
              ::testing::HasSubstr("multiples of 16 bytes"));
  for (const GemmConfig &c : candidateConfigs(odd, Family::MmaF16, 90))
    EXPECT_FALSE(c.tma) << c.describe();
  GemmConfig forced = tmaConfig(64, 64, 2);
  EXPECT_THAT(unsupportedReason(odd, forced),
              ::testing::HasSubstr("multiples of 16 bytes"));
  odd.alignA = 8;
  odd.k = 64;
  EXPECT_THAT(unsupportedReason(odd, forced),
              ::testing::HasSubstr("16-byte aligned"));
  ConvProblem image;
  image.h = image.w = 8, image.c = image.o = 16, image.kh = image.kw = 3;
  GemmProblem cv = convolutionAsGemm(image);
  EXPECT_THAT(tmaUnsupportedReason(cv), ::testing::HasSubstr("im2col"));
  GemmConfig mma = tensorCore(64, 64, 32, 32, 32, 3);
  mma.tma = true;
  EXPECT_THAT(unsupportedReason(p, mma), ::testing::HasSubstr("wgmma"));
}

TEST_F(ContractionKernelsTest, TmaCandidatesPassPtxasOnSm90a) {
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  // Every TMA candidate (every tile, plain and split-K) in every operand
  // layout, batched: ptxas -arch=sm_90a accepts it, and its PTX takes two
  // 128-byte tensor-map parameters and copies with cp.async.bulk.tensor.
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
      GemmProblem p = problem(1000, 512, 2048, DType::BF16, DType::BF16, la, lb);
      p.batch = 2;
      p.batchStrideA = 1000 * 2048;
      p.batchStrideB = 512 * 2048;
      p.batchStrideC = 1000 * 512;
      // Every tile with row-major operands (split-K too), the first tile
      // in the other layouts (NVRTC + ptxas take seconds each).
      bool everyTile = la == Layout::RowMajor && lb == Layout::RowMajor;
      size_t tma = 0;
      for (const GemmConfig &c : candidateConfigs(p, Family::WgmmaF16, 90)) {
        if (!c.tma || (!everyTile && tma > 0))
          continue;
        ++tma;
        Epilogue e;
        e.bias = {EpilogueVector::Kind::PerColumn, DType::BF16};
        auto kernels = generateGemm(p, c, e, {});
        ASSERT_TRUE(bool(kernels))
            << c.describe() << ": " << kernels.error().message();
        const std::string &ptx = kernels->kernels[0].ptx;
        EXPECT_NE(ptx.find(".param .align 64 .b8 kiln_gemm_param_"), std::string::npos)
            << c.describe();
        EXPECT_NE(ptx.find("cp.async.bulk.tensor.3d"), std::string::npos)
            << c.describe();
        EXPECT_EQ(ptx.find("cp.async.ca"), std::string::npos) << c.describe();
        EXPECT_EQ(ptx.find("cp.async.cg"), std::string::npos) << c.describe();
        EXPECT_EQ(runPtxas(ptx, "sm_90"), "") << c.describe();
      }
      if (everyTile)
        EXPECT_GE(tma, 6u) << "every wgmma tile has a TMA variant";
    }
}

// --- tf32
// ------------------------------------------------------------------------

TEST_F(ContractionKernelsTest, Tf32AllLayouts) {
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
      Case c{problem(50, 40, 37, DType::F32, DType::F32, la, lb),
             tensorCore(64, 64, 16, 32, 32, 3, 1, Family::MmaTf32),
             {}};
      c.epilogue.activation = Activation::Tanh;
      c.checkUnroundedTf32 = true;
      runCase(c);
    }
}

// --- fp32 SIMT
// -------------------------------------------------------------------

TEST_F(ContractionKernelsTest, SimtF32Tiles) {
  runCase({problem(130, 129, 33, DType::F32, DType::F32),
           simt(128, 128, 8, 8, 8, 3),
           {}});
  Case c{problem(70, 50, 45, DType::F32, DType::BF16, Layout::ColMajor,
                 Layout::ColMajor),
         simt(64, 64, 16, 4, 4, 2),
         {}};
  c.epilogue.activation = Activation::Clip;
  c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  runCase(c);
}

TEST_F(ContractionKernelsTest, SimtF32SplitKAndNEqualsOne) {
  runCase({problem(24, 36, 300, DType::F32, DType::F32),
           simt(32, 32, 16, 4, 4, 3, 3),
           {}});
  runCase({problem(40, 1, 30, DType::F32, DType::F32),
           simt(32, 32, 16, 4, 4, 2),
           {}});
}

TEST_F(ContractionKernelsTest, WgmmaTf32EveryLayout) {
  SKIP_WITHOUT_EMU_WGMMA();
  // Every operand layout (row-major B and column-major A transposed by the
  // producer; both at once: only st.shared arrivals), M, N and K off the
  // tile (K = 100: four K tiles of 32, the last partial) in a 2-stage ring
  // that wraps; tanh, and the unrounded-input comparison.
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
      Case c{problem(70, 72, 100, DType::F32, DType::F32, la, lb),
             wgmmaTf32(128, 64, 2),
             {}};
      c.epilogue.activation = Activation::Tanh;
      c.checkUnroundedTf32 = true;
      runCase(c);
    }
}

TEST_F(ContractionKernelsTest, WgmmaTf32EdgesSplitKAndBatches) {
  SKIP_WITHOUT_EMU_WGMMA();
  // K below one K tile with rows only 4-byte aligned (K = 5: 4-byte
  // cp.async); N = 1 with a per-row bias and a bf16 output.
  runCase({problem(33, 24, 5, DType::F32, DType::F32), wgmmaTf32(64, 64, 2),
           {}});
  Case n1{problem(100, 1, 40, DType::F32, DType::BF16), wgmmaTf32(64, 64, 2),
          {}};
  n1.epilogue.bias = {EpilogueVector::Kind::PerRow, DType::F32};
  runCase(n1);
  // Split-K: 3 splits of 6 K tiles; the reduction applies the epilogue.
  Case s{problem(20, 24, 576, DType::F32, DType::F32), wgmmaTf32(64, 64, 3, 3),
         {}};
  s.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  s.epilogue.activation = Activation::Sigmoid;
  runCase(s);
  // Batch 3 with a broadcast row-major B, a residual and gelu.
  Case c = batchedResidualGelu(70, DType::F32, wgmmaTf32(64, 64, 3),
                               DType::F32);
  runCase(c);
  // The 128x128 tile (two consumers, setmaxnreg) with B stored [N][K].
  runCase({problem(130, 136, 40, DType::F32, DType::F32, Layout::RowMajor,
                   Layout::ColMajor),
           wgmmaTf32(128, 128, 2),
           {}});
}

// --- Counters
// ---------------------------------------------------------------------

/// The emulator's counters for one launch of the kernel on zero inputs.
runtime::emu::LaunchStats countLaunch(const GemmKernel &kernel,
                                      const GemmProblem &p) {
  namespace emu = runtime::emu;
  runtime::emu::LaunchStats stats;
  auto module = emu::parsePtx(kernel.ptx);
  EXPECT_TRUE(bool(module)) << module.error().message();
  if (!module)
    return stats;
  size_t in = p.inputType == DType::F32 ? 4 : 2;
  size_t out = p.outputType == DType::F32 ? 4 : 2;
  std::vector<uint8_t> a(p.m * p.k * in), b(p.k * p.n * in), c(p.m * p.n * out);
  const uint64_t base = 1ull << 40, step = 1ull << 32;
  std::vector<emu::MemoryRegion> memory = {
      {base, a.size(), a.data()},
      {base + step, b.size(), b.data()},
      {base + 2 * step, c.size(), c.data()}};
  runtime::PackedParams params;
  for (const KernelParameter &param : kernel.params) {
    if (param.name == "A" || param.name == "B" || param.name == "C")
      params.addU64(base + step * (param.name[0] - 'A'));
    else if (param.name == "M")
      params.addU32(static_cast<uint32_t>(p.m));
    else
      params.addU64(0);
  }
  emu::LaunchSpec spec;
  spec.grid = kernel.gridFor(p.m);
  spec.block = kernel.block;
  spec.dynamicSharedBytes = kernel.dynamicSharedBytes;
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &memory;
  spec.countPerformance = true;
  spec.workers = 1;
  runtime::Error err = emu::runKernel(module->kernels[0], spec, &stats);
  EXPECT_FALSE(err) << err.message();
  return stats;
}

TEST_F(ContractionKernelsTest, MainTilesAreBankConflictFree) {
  // The swizzle makes every ldmatrix conflict-free in all four layouts, the
  // padded output rows every staged store and read; the FFMA kernel's
  // float4 reads and padded transposing writes too. And every global
  // access is coalesced: the sectors touched are exactly the bytes asked
  // for, over 32.
  struct Variant {
    Family family;
    GemmConfig config;
    DType in, out;
  };
  std::vector<Variant> variants = {
      {Family::MmaF16, tensorCore(128, 128, 32, 64, 64, 3), DType::BF16,
       DType::BF16},
      {Family::MmaF16, tensorCore(128, 128, 32, 64, 64, 3), DType::F16,
       DType::F32},
      {Family::MmaF16, tensorCore(64, 64, 64, 32, 32, 3), DType::BF16,
       DType::F32},
      {Family::SimtF32, simt(128, 128, 8, 8, 8, 3), DType::F32, DType::F32}};
  for (const Variant &v : variants)
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
        GemmProblem p =
            problem(v.config.blockM, v.config.blockN, 64, v.in, v.out, la, lb);
        auto kernels = generateGemm(p, v.config, {}, {});
        ASSERT_TRUE(bool(kernels)) << kernels.error().message();
        runtime::emu::LaunchStats stats = countLaunch(kernels->kernels[0], p);
        std::string what = v.config.describe() +
                           (la == Layout::RowMajor ? " A row" : " A col") +
                           (lb == Layout::RowMajor ? " B row" : " B col");
        EXPECT_GT(stats.sharedAccesses, 0u) << what;
        EXPECT_EQ(stats.sharedBankConflictReplays, 0u) << what;
        EXPECT_EQ(stats.globalSectors * 32, stats.globalBytesRequested) << what;
        EXPECT_EQ(stats.mmaFlops + stats.fmaFlops, 2 * p.m * p.n * p.k) << what;
      }
}

// --- Configs, the heuristic and errors
// --------------------------------------------

TEST(ContractionConfigTest, UnsupportedConfigsSayWhy) {
  GemmProblem p = problem(64, 64, 64, DType::BF16, DType::F32);
  EXPECT_THAT(unsupportedReason(p, tensorCore(64, 64, 32, 24, 32, 3)),
              ::testing::HasSubstr("multiples of 16"));
  EXPECT_THAT(unsupportedReason(p, tensorCore(64, 64, 32, 32, 32, 3, 8)),
              ::testing::HasSubstr("split-K"));
  EXPECT_THAT(unsupportedReason(p, simt(64, 64, 8, 8, 8, 3)),
              ::testing::HasSubstr("f32 inputs"));
  EXPECT_THAT(unsupportedReason(p, wgmmaConfig(128, 32, 4)),
              ::testing::HasSubstr("64, 128 or 256"));
  EXPECT_THAT(unsupportedReason(p, wgmmaConfig(256, 128, 4)),
              ::testing::HasSubstr("64 or 128"));
  GemmConfig narrowK = wgmmaConfig(64, 64, 4);
  narrowK.blockK = 32;
  EXPECT_THAT(unsupportedReason(p, narrowK), ::testing::HasSubstr("64"));
  EXPECT_THAT(
      unsupportedReason(problem(64, 64, 64, DType::F32, DType::F32),
                        wgmmaConfig(64, 64, 4)),
      ::testing::HasSubstr("f16 or bf16"));
  p.batch = 2;
  EXPECT_THAT(unsupportedReason(p, tensorCore(64, 64, 32, 32, 32, 3)),
              ::testing::HasSubstr("batch stride"));
  GemmProblem big = problem(8192, 8192, 8192, DType::BF16, DType::BF16);
  auto generated =
      generateGemmSource(big, tensorCore(256, 256, 64, 64, 64, 8), {}, {});
  ASSERT_FALSE(bool(generated));
  EXPECT_THAT(generated.error().message(),
              ::testing::HasSubstr("bytes of shared memory"));
}

TEST(ContractionConfigTest, HeuristicPicks) {
  // Big square problems get big tiles and no split.
  GemmConfig big = pickConfig(
      problem(4096, 4096, 4096, DType::BF16, DType::BF16), Family::MmaF16, 90);
  EXPECT_GE(big.blockM * big.blockN, 128u * 128u) << big.describe();
  EXPECT_EQ(big.splitK, 1u);
  // Few output tiles and a long K: split-K.
  GemmConfig tall = pickConfig(problem(64, 64, 8192, DType::BF16, DType::F32),
                               Family::MmaF16, 90);
  EXPECT_GT(tall.splitK, 1u) << tall.describe();
  // A matrix-vector product uses the narrow-N tile (mma.sync; wgmma's
  // narrowest N is 64).
  GemmConfig gemv = pickConfig(problem(4096, 1, 4096, DType::BF16, DType::F32),
                               Family::MmaF16, 90, /*wgmma=*/false);
  EXPECT_EQ(gemv.blockN, 16u) << gemv.describe();
  // bf16/fp16 on sm_90: wgmma first, the big tiles for big problems, and
  // the mma.sync candidates after every wgmma one; never on sm_80, and not
  // with wgmma off.
  EXPECT_EQ(big.family, Family::WgmmaF16) << big.describe();
  EXPECT_EQ(big.blockM, 128u) << big.describe();
  EXPECT_GE(big.blockN, 128u) << big.describe();
  {
    GemmProblem p = problem(300, 200, 1000, DType::F16, DType::F32);
    std::vector<GemmConfig> all = candidateConfigs(p, Family::MmaF16, 90);
    auto firstSync =
        std::find_if(all.begin(), all.end(), [](const GemmConfig &c) {
          return c.family == Family::MmaF16;
        });
    ASSERT_NE(firstSync, all.begin());
    ASSERT_NE(firstSync, all.end());
    EXPECT_TRUE(std::all_of(firstSync, all.end(), [](const GemmConfig &c) {
      return c.family == Family::MmaF16;
    }));
    for (const GemmConfig &c : all)
      EXPECT_EQ(unsupportedReason(p, c), "") << c.describe();
    for (const GemmConfig &c : candidateConfigs(p, Family::MmaF16, 80))
      EXPECT_EQ(c.family, Family::MmaF16) << c.describe();
    EXPECT_EQ(pickConfig(p, Family::MmaF16, 90, false).family,
              Family::MmaF16);
  }
  // Few output tiles and a long K on wgmma: split-K too.
  EXPECT_EQ(tall.family, Family::WgmmaF16) << tall.describe();
  GemmConfig f32 = pickConfig(problem(4096, 4096, 4096, DType::F32, DType::F32),
                              Family::SimtF32, 90);
  EXPECT_EQ(f32.blockM * f32.blockN, 128u * 128u) << f32.describe();
  // A ResNet-50 3x3 convolution at batch 32 (M = 100352) has candidates;
  // its few-pixel last stage at batch 1 splits K.
  GemmProblem resnet = convolutionAsGemm(conv(32, 56, 56, 64, 64, 3, 1, 1));
  EXPECT_FALSE(candidateConfigs(resnet, Family::MmaF16, 90).empty());
  GemmConfig late = pickConfig(
      convolutionAsGemm(conv(1, 7, 7, 512, 512, 3, 1, 1)), Family::MmaF16, 90);
  EXPECT_GT(late.splitK, 1u) << late.describe();
  // Every candidate is one the generator accepts.
  for (Family family : {Family::MmaF16, Family::MmaTf32, Family::SimtF32}) {
    GemmProblem p = problem(300, 200, 1000,
                            family == Family::MmaF16 ? DType::BF16 : DType::F32,
                            DType::F32);
    for (const GemmConfig &c : candidateConfigs(p, family, 80))
      EXPECT_EQ(unsupportedReason(p, c), "") << c.describe();
  }
}

TEST_F(ContractionKernelsTest, CandidatesPassPtxasOnSm80AndSm90) {
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  {
    // The convolution's loader, in the heuristic's first choice.
    GemmProblem p = convolutionAsGemm(conv(8, 28, 28, 128, 128, 3, 1, 1));
    for (uint32_t sm : {80u, 90u}) {
      GenerateOptions options;
      options.smVersion = sm;
      auto kernels =
          generateGemm(p, pickConfig(p, Family::MmaF16, sm), {}, options);
      ASSERT_TRUE(bool(kernels)) << kernels.error().message();
      EXPECT_EQ(runPtxas(kernels->kernels[0].ptx, "sm_" + std::to_string(sm)),
                "");
    }
  }
  struct Variant {
    Family family;
    DType in;
    Layout la, lb;
  };
  for (Variant v :
       {Variant{Family::MmaF16, DType::BF16, Layout::RowMajor,
                Layout::RowMajor},
        Variant{Family::MmaF16, DType::F16, Layout::ColMajor, Layout::ColMajor},
        Variant{Family::MmaTf32, DType::F32, Layout::RowMajor,
                Layout::ColMajor},
        Variant{Family::SimtF32, DType::F32, Layout::RowMajor,
                Layout::RowMajor}}) {
    GemmProblem p = problem(1000, 512, 2048, v.in, DType::BF16, v.la, v.lb);
    for (uint32_t sm : {80u, 90u}) {
      std::vector<GemmConfig> candidates = candidateConfigs(p, v.family, sm);
      ASSERT_FALSE(candidates.empty());
      // Every bf16 candidate for sm_90; the heuristic's top two otherwise
      // (each kernel costs ~0.3 s of NVRTC and ptxas).
      if (!(v.family == Family::MmaF16 && v.in == DType::BF16 && sm == 90) &&
          candidates.size() > 2)
        candidates.resize(2);
      for (const GemmConfig &c : candidates) {
        GenerateOptions options;
        options.smVersion = sm;
        Epilogue e;
        e.bias = {EpilogueVector::Kind::PerColumn, DType::BF16};
        e.activation = Activation::Relu;
        auto kernels = generateGemm(p, c, e, options);
        ASSERT_TRUE(bool(kernels))
            << c.describe() << ": " << kernels.error().message();
        EXPECT_EQ(runPtxas(kernels->kernels[0].ptx, "sm_" + std::to_string(sm)),
                  "")
            << c.describe();
      }
    }
  }
}

TEST_F(ContractionKernelsTest, WgmmaCandidatesPassPtxasOnSm90a) {
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  // The heuristic's first two wgmma tiles in every operand layout and
  // output type, plain and split-K, and the convolution loader: ptxas
  // -arch=sm_90a accepts each (CandidatesPassPtxasOnSm80AndSm90 covers
  // every tile, for bf16 row-major operands).
  struct Variant {
    DType in, out;
    Layout la, lb;
    uint32_t split;
  };
  for (Variant v :
       {Variant{DType::BF16, DType::BF16, Layout::RowMajor, Layout::RowMajor, 1},
        Variant{DType::F16, DType::F32, Layout::ColMajor, Layout::ColMajor, 1},
        Variant{DType::BF16, DType::F32, Layout::RowMajor, Layout::ColMajor, 2},
        Variant{DType::F16, DType::F16, Layout::ColMajor, Layout::RowMajor, 1}}) {
    GemmProblem p = problem(1000, 512, 2048, v.in, v.out, v.la, v.lb);
    std::vector<GemmConfig> candidates =
        candidateConfigs(p, Family::WgmmaF16, 90, true, /*tma=*/false);
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [](const GemmConfig &c) {
                                      return c.splitK != 1;
                                    }),
                     candidates.end());
    ASSERT_EQ(candidates.size(), 6u) << "every wgmma tile fits";
    candidates.resize(2);
    for (GemmConfig c : candidates) {
      c.splitK = v.split;
      GenerateOptions options;
      Epilogue e;
      e.bias = {EpilogueVector::Kind::PerColumn, DType::BF16};
      e.activation = Activation::Relu;
      auto kernels = generateGemm(p, c, e, options);
      ASSERT_TRUE(bool(kernels))
          << c.describe() << ": " << kernels.error().message();
      EXPECT_NE(kernels->kernels[0].ptx.find(".target sm_90a"),
                std::string::npos);
      EXPECT_NE(kernels->kernels[0].ptx.find("wgmma.mma_async"),
                std::string::npos);
      EXPECT_EQ(runPtxas(kernels->kernels[0].ptx, "sm_90"), "")
          << c.describe();
    }
  }
  // The implicit-GEMM loader, odd channels (copies through registers).
  GemmProblem p = convolutionAsGemm(conv(2, 9, 9, 3, 24, 7, 2, 3));
  GemmConfig c = pickConfig(p, Family::MmaF16, 90);
  EXPECT_EQ(c.family, Family::WgmmaF16) << c.describe();
  auto kernels = generateGemm(p, c, {}, {});
  ASSERT_TRUE(bool(kernels)) << kernels.error().message();
  EXPECT_EQ(runPtxas(kernels->kernels[0].ptx, "sm_90"), "") << c.describe();
  // sm_80 has no wgmma: an error, not a kernel.
  GenerateOptions sm80;
  sm80.smVersion = 80;
  auto refused = generateGemm(p, c, {}, sm80);
  ASSERT_FALSE(bool(refused));
  EXPECT_THAT(refused.error().message(), ::testing::HasSubstr("needs sm_90"));
}

TEST_F(ContractionKernelsTest, WgmmaTf32CandidatesAndPtxas) {
  // tf32 on sm_90: the wgmma_tf32 candidates first, then mma.sync's; only
  // mma.sync with wgmma off or on sm_80.
  GemmProblem p = problem(1000, 512, 2048, DType::F32, DType::BF16);
  std::vector<GemmConfig> all = candidateConfigs(p, Family::MmaTf32, 90);
  auto firstSync = std::find_if(all.begin(), all.end(), [](const GemmConfig &c) {
    return c.family == Family::MmaTf32;
  });
  ASSERT_NE(firstSync, all.begin());
  ASSERT_NE(firstSync, all.end());
  EXPECT_TRUE(std::all_of(all.begin(), firstSync, [](const GemmConfig &c) {
    return c.family == Family::WgmmaTf32 && c.blockK == 32;
  }));
  EXPECT_TRUE(std::all_of(firstSync, all.end(), [](const GemmConfig &c) {
    return c.family == Family::MmaTf32;
  }));
  for (const GemmConfig &c : all)
    EXPECT_EQ(unsupportedReason(p, c), "") << c.describe();
  EXPECT_EQ(pickConfig(p, Family::MmaTf32, 90, false).family, Family::MmaTf32);
  for (const GemmConfig &c : candidateConfigs(p, Family::MmaTf32, 80))
    EXPECT_EQ(c.family, Family::MmaTf32) << c.describe();
  // wgmma_tf32 takes f32 inputs and a 32-element K tile only.
  EXPECT_THAT(unsupportedReason(problem(64, 64, 64, DType::BF16, DType::F32),
                                wgmmaConfig(64, 64, 2, 1, Family::WgmmaTf32)),
              ::testing::HasSubstr("needs f32 inputs"));
  GemmConfig wide = wgmmaConfig(64, 64, 2, 1, Family::WgmmaTf32);
  wide.blockK = 64;
  EXPECT_THAT(unsupportedReason(p, wide),
              ::testing::HasSubstr("128-byte swizzle row"));
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  // ptxas -arch=sm_90a accepts every heuristic tile with B row-major (the
  // transposing copy) and bias + relu, the first two in the other operand
  // layouts and with split-K, and the convolution loader.
  struct Variant {
    Layout la, lb;
    uint32_t split;
    size_t tiles;
  };
  for (Variant v : {Variant{Layout::RowMajor, Layout::RowMajor, 1, 6},
                    Variant{Layout::ColMajor, Layout::ColMajor, 1, 2},
                    Variant{Layout::ColMajor, Layout::RowMajor, 1, 2},
                    Variant{Layout::RowMajor, Layout::ColMajor, 2, 2}}) {
    GemmProblem q = problem(1000, 512, 2048, DType::F32, DType::F32, v.la, v.lb);
    std::vector<GemmConfig> tiles = candidateConfigs(q, Family::WgmmaTf32, 90);
    tiles.erase(std::remove_if(tiles.begin(), tiles.end(),
                               [](const GemmConfig &c) { return c.splitK != 1; }),
                tiles.end());
    ASSERT_EQ(tiles.size(), 6u) << "every wgmma tile fits";
    tiles.resize(v.tiles);
    for (GemmConfig c : tiles) {
      c.splitK = v.split;
      Epilogue e;
      e.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
      e.activation = Activation::Relu;
      auto kernels = generateGemm(q, c, e, {});
      ASSERT_TRUE(bool(kernels))
          << c.describe() << ": " << kernels.error().message();
      EXPECT_NE(kernels->kernels[0].ptx.find("k8.f32.tf32.tf32"),
                std::string::npos);
      EXPECT_EQ(runPtxas(kernels->kernels[0].ptx, "sm_90"), "")
          << c.describe();
    }
  }
  ConvProblem cp = conv(2, 9, 9, 3, 24, 7, 2, 3);
  cp.inputType = cp.outputType = DType::F32;
  GemmProblem q = convolutionAsGemm(cp);
  GemmConfig c = pickConfig(q, Family::MmaTf32, 90);
  EXPECT_EQ(c.family, Family::WgmmaTf32) << c.describe();
  auto kernels = generateGemm(q, c, {}, {});
  ASSERT_TRUE(bool(kernels)) << kernels.error().message();
  EXPECT_EQ(runPtxas(kernels->kernels[0].ptx, "sm_90"), "") << c.describe();
}

TEST(ContractionNvrtcTest, MissingLibraryIsAnError) {
  // In a fresh process (the library is loaded once per process).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KILN_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
        auto kernels =
            generateGemm(problem(16, 16, 16, DType::BF16, DType::F32),
                         tensorCore(32, 32, 32, 16, 16, 2), {}, {});
        bool ok = !kernels && kernels.error().message().find(
                                  "NVRTC not found") != std::string::npos;
        std::fprintf(stderr, "%s\n",
                     kernels ? "compiled" : kernels.error().message().c_str());
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "NVRTC not found");
}

} // namespace

//===- DepthwiseKernelsTest.cpp - The depthwise convolution kernel --------===//
//
// Every variant kiln-match-contractions generates for a depthwise
// convolution (16-, 8-, 4-byte and scalar channel vectors, f32/bf16/f16,
// a channel multiplier, a custom epilogue reading a pointer) compiles with
// NVRTC and passes ptxas for sm_80 and sm_90; the filter reorder and the
// unsupported cases are checked here too. The numerics are checked through
// the compiler against onnxruntime by test/Target/CUDA/conv-templates.test
// (the depthwise-* and inverted-residual models).
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/DepthwiseKernels.h"
#include "kiln/Target/CUDA/Nvrtc.h"

#include "PtxasUtils.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::contraction;
using kiln::testing::ptxasPath;
using kiln::testing::runPtxas;

namespace {

ConvProblem depthwise(uint64_t c, uint64_t multiplier, DType in, DType out) {
  ConvProblem p;
  p.n = 2, p.h = 9, p.w = 11, p.c = c, p.o = c * multiplier;
  p.kh = p.kw = 3;
  p.strideH = p.strideW = 2;
  p.padH = p.padW = 1, p.padBottom = p.padRight = 1;
  p.groups = static_cast<uint32_t>(c);
  p.p = 5, p.q = 6;
  p.inputType = in;
  p.outputType = out;
  return p;
}

TEST(DepthwiseKernelsTest, VariantsPassPtxasOnSm80AndSm90) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  struct Variant {
    uint64_t c, multiplier;
    DType in, out;
    uint32_t vec;
    bool custom;
  };
  for (Variant v : {Variant{32, 1, DType::BF16, DType::BF16, 8, false},
                    Variant{32, 1, DType::BF16, DType::F32, 8, true},
                    Variant{12, 1, DType::F16, DType::F16, 4, false},
                    Variant{16, 1, DType::F32, DType::F32, 4, true},
                    Variant{6, 1, DType::F32, DType::F32, 2, false},
                    Variant{5, 1, DType::BF16, DType::BF16, 1, true},
                    Variant{8, 2, DType::F16, DType::F32, 8, false}}) {
    ConvProblem p = depthwise(v.c, v.multiplier, v.in, v.out);
    ASSERT_EQ(depthwiseUnsupportedReason(p), "");
    EXPECT_EQ(depthwiseVector(p), v.vec) << "C=" << v.c;
    Epilogue e;
    if (v.custom) {
      e.customBody = "  return fmaxf(acc + ((const float *)extra0)[col], "
                     "0.0f);";
      e.customOperands = {"epilogue0"};
    }
    for (uint32_t sm : {80u, 90u}) {
      GenerateOptions options;
      options.smVersion = sm;
      options.name = "dw";
      auto kernels = generateDepthwise(p, e, options);
      ASSERT_TRUE(bool(kernels)) << kernels.error().message();
      ASSERT_EQ(kernels->kernels.size(), 1u);
      const GemmKernel &k = kernels->kernels[0];
      uint64_t threads = p.n * p.p * ((p.q + 1) / 2) * (p.o / v.vec);
      EXPECT_EQ(k.grid.x, (threads + kDepthwiseThreads - 1) / kDepthwiseThreads);
      EXPECT_EQ(k.gridFor(p.n * p.p * p.q).x, k.grid.x);
      EXPECT_EQ(k.params.size(), v.custom ? 4u : 3u);
      EXPECT_EQ(runPtxas(k.ptx, "sm_" + std::to_string(sm)), "")
          << describeDepthwise(p) << " sm_" << sm;
      if (v.vec * (v.in == DType::F32 ? 4 : 2) == 16 && v.multiplier == 1)
        EXPECT_NE(k.ptx.find("ld.global.nc.v4.b32"), std::string::npos);
    }
  }
}

TEST(DepthwiseKernelsTest, FilterReorderAndUnsupported) {
  // [O=3][KH=1][KW=2] -> [KH][KW][O]: tap-major.
  ConvProblem p;
  p.o = 3, p.kh = 1, p.kw = 2;
  const float okhkw[] = {0, 1, 10, 11, 20, 21};
  std::vector<uint8_t> bytes = reorderDepthwiseFilter(p, okhkw, 4);
  ASSERT_EQ(bytes.size(), 24u);
  const float *out = reinterpret_cast<const float *>(bytes.data());
  EXPECT_EQ(std::vector<float>(out, out + 6),
            (std::vector<float>{0, 10, 20, 1, 11, 21}));

  ConvProblem grouped = depthwise(16, 1, DType::BF16, DType::BF16);
  grouped.groups = 8; // two input channels a group
  EXPECT_NE(depthwiseUnsupportedReason(grouped).find("not depthwise"),
            std::string::npos);
  ConvProblem f64 = depthwise(16, 1, DType::F64, DType::F32);
  EXPECT_NE(depthwiseUnsupportedReason(f64).find("f32, bf16 or f16"),
            std::string::npos);
  // A misaligned output narrows the vector.
  ConvProblem narrow = depthwise(32, 1, DType::BF16, DType::BF16);
  narrow.alignY = 4;
  EXPECT_EQ(depthwiseVector(narrow), 2u);
}

} // namespace

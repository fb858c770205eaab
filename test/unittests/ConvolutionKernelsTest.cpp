//===- ConvolutionKernelsTest.cpp - Implicit-GEMM convolutions on emu ----===//
//
// The convolution kernels (mma.sync, wgmma, tf32 wgmma, FFMA) against a
// float64 direct convolution of the same rounded inputs, with the bounds
// of ContractionKernelsTest.cpp (K = kh kw c); runner in
// ContractionTestSupport.h.
//
//===----------------------------------------------------------------------===//

#include "ContractionTestSupport.h"

#include <gtest/gtest.h>

using namespace kiln::contraction_test;

namespace {

TEST_F(ContractionKernelsTest, Conv1x1And3x3) {
  // 1x1: a plain GEMM over pixels. 3x3 pad 1: the window leaves the image
  // at every border; C = 16 gives 16-byte chunks.
  runConvCase(
      {conv(2, 5, 6, 16, 24, 1, 1, 0), tensorCore(64, 32, 32, 32, 16, 3), {}});
  ConvCase c{
      conv(2, 7, 6, 16, 40, 3, 1, 1), tensorCore(64, 64, 32, 32, 32, 3), {}};
  c.problem.outputType = DType::F32;
  runConvCase(c);
}

TEST_F(ContractionKernelsTest, ConvStride2PaddedAndResNetEpilogue) {
  // 3x3 stride 2 pad 1 with the ResNet block's epilogue: folded batch norm
  // (per-channel scale and shift), the shortcut, relu.
  ConvCase c{
      conv(1, 9, 9, 8, 32, 3, 2, 1), tensorCore(32, 32, 32, 16, 16, 3), {}};
  c.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  c.epilogue.residual = true;
  c.epilogue.residualType = DType::BF16;
  c.epilogue.activation = Activation::Relu;
  runConvCase(c);
}

TEST_F(ContractionKernelsTest, Conv7x7Stride2ThreeChannels) {
  // The stem: 3 input channels (6-byte pixels: register copies, channels
  // padded to 8 in the filter), 7x7, stride 2, pad 3; and asymmetric pads.
  ConvCase c{
      conv(1, 12, 11, 3, 16, 7, 2, 3), tensorCore(32, 32, 64, 16, 16, 3), {}};
  runConvCase(c);
  c.problem.padBottom = 1, c.problem.padRight = 2, c.problem.strideW = 1;
  runConvCase(c);
}

TEST_F(ContractionKernelsTest, ConvDilatedGroupedOddChannels) {
  // Dilation 2; two groups of 8 channels (channel offsets per group, bias
  // indexed across groups); 5 channels (10-byte pixels).
  runConvCase({conv(1, 9, 8, 16, 16, 3, 1, 2, 2),
               tensorCore(32, 32, 32, 16, 16, 3),
               {}});
  ConvCase g{conv(2, 5, 5, 16, 24, 3, 1, 1, 1, 2),
             tensorCore(32, 16, 32, 16, 16, 3),
             {}};
  g.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::BF16};
  g.epilogue.residual = true;
  runConvCase(g);
  runConvCase(
      {conv(1, 6, 7, 5, 16, 3, 1, 1), tensorCore(32, 16, 32, 16, 16, 2), {}});
}

TEST_F(ContractionKernelsTest, ConvSplitKAndTf32) {
  // Few pixels, many channels: split-K over (kh, kw, c); then tf32.
  runConvCase({conv(1, 4, 4, 64, 32, 3, 1, 1),
               tensorCore(16, 32, 64, 16, 16, 3, 3),
               {}});
  ConvCase t{conv(1, 6, 5, 12, 16, 3, 1, 1),
             tensorCore(32, 16, 16, 16, 16, 3, 1, Family::MmaTf32),
             {}};
  t.problem.inputType = DType::F32, t.problem.outputType = DType::F32;
  runConvCase(t);
}

TEST_F(ContractionKernelsTest, WgmmaConvolutions) {
  SKIP_WITHOUT_EMU_WGMMA();
  // 1x1; 3x3 stride 2 pad 1 with the ResNet epilogue; the 7x7 stride-2
  // stem on 3 channels (register copies); dilation 2; two groups; 5
  // channels; split-K.
  runConvCase({conv(2, 5, 6, 16, 24, 1, 1, 0), wgmmaConfig(64, 64, 2), {}});
  ConvCase r{conv(1, 9, 9, 8, 32, 3, 2, 1), wgmmaConfig(64, 64, 3), {}};
  r.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  r.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  r.epilogue.residual = true;
  r.epilogue.residualType = DType::BF16;
  r.epilogue.activation = Activation::Relu;
  runConvCase(r);
  runConvCase({conv(1, 12, 11, 3, 16, 7, 2, 3), wgmmaConfig(128, 64, 2), {}});
  runConvCase({conv(1, 9, 8, 16, 16, 3, 1, 2, 2), wgmmaConfig(64, 64, 2), {}});
  ConvCase g{conv(2, 5, 5, 16, 24, 3, 1, 1, 1, 2), wgmmaConfig(64, 64, 2), {}};
  g.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::BF16};
  g.epilogue.residual = true;
  runConvCase(g);
  runConvCase({conv(1, 6, 7, 5, 16, 3, 1, 1), wgmmaConfig(64, 64, 2), {}});
  runConvCase({conv(1, 4, 4, 64, 32, 3, 1, 1), wgmmaConfig(64, 64, 2, 3), {}});
}

TEST_F(ContractionKernelsTest, WgmmaTf32Convolutions) {
  SKIP_WITHOUT_EMU_WGMMA();
  // 3x3 stride 2 pad 1 with the ResNet epilogue; the 7x7 stride-2 stem on
  // 3 channels (channels padded to 4); two groups; split-K.
  auto f32 = [](ConvProblem p) {
    p.inputType = p.outputType = DType::F32;
    return p;
  };
  ConvCase r{f32(conv(1, 9, 9, 8, 32, 3, 2, 1)), wgmmaTf32(64, 64, 3), {}};
  r.epilogue.scale = {EpilogueVector::Kind::PerColumn, DType::F32};
  r.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  r.epilogue.residual = true;
  r.epilogue.residualType = DType::F32;
  r.epilogue.activation = Activation::Relu;
  runConvCase(r);
  runConvCase({f32(conv(1, 12, 11, 3, 16, 7, 2, 3)), wgmmaTf32(64, 64, 2), {}});
  ConvCase g{f32(conv(2, 5, 5, 16, 24, 3, 1, 1, 1, 2)), wgmmaTf32(64, 64, 2),
             {}};
  g.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  runConvCase(g);
  runConvCase(
      {f32(conv(1, 4, 4, 64, 32, 3, 1, 1)), wgmmaTf32(64, 64, 2, 3), {}});
}

TEST_F(ContractionKernelsTest, ConvFp32OnCudaCores) {
  // fp32 without tf32: the FFMA kernel with the convolution's A loader;
  // 3x3 pad 1, stride 2 with two groups and a bias, 1x1 with 5 channels.
  auto f32 = [](ConvProblem p) {
    p.inputType = p.outputType = DType::F32;
    return p;
  };
  runConvCase(
      {f32(conv(2, 7, 6, 8, 24, 3, 1, 1)), simt(64, 64, 16, 4, 4, 3), {}});
  ConvCase g{
      f32(conv(1, 9, 9, 16, 32, 3, 2, 1, 1, 2)), simt(32, 32, 16, 4, 4, 2), {}};
  g.epilogue.bias = {EpilogueVector::Kind::PerColumn, DType::F32};
  g.epilogue.activation = Activation::Relu;
  runConvCase(g);
  runConvCase(
      {f32(conv(1, 5, 5, 5, 8, 1, 1, 0)), simt(32, 32, 16, 4, 4, 2), {}});
}

TEST(ContractionConvTest, GemmViewAndFilterOrder) {
  ConvProblem p = conv(2, 9, 9, 6, 8, 3, 2, 1, 1, 2);
  GemmProblem g = convolutionAsGemm(p);
  EXPECT_EQ(g.conv.p, 5u);
  EXPECT_EQ(g.m, 2u * 5 * 5);
  EXPECT_EQ(g.n, 4u);
  EXPECT_EQ(g.conv.paddedGroupChannels, 8u); // 3 channels a group, padded
  EXPECT_EQ(g.k, 9u * 8);
  EXPECT_EQ(g.batch, 2u);
  // [O][C/g][KH][KW] -> [O][KH][KW][Cp]: element (o=1, c=2, y=0, x=1).
  std::vector<float> oihw(8 * 3 * 3 * 3);
  for (size_t i = 0; i < oihw.size(); ++i)
    oihw[i] = float(i);
  std::vector<uint8_t> r = reorderConvFilter(p, oihw.data(), 4);
  ASSERT_EQ(r.size(), 8u * 3 * 3 * 8 * 4);
  float v;
  std::memcpy(&v, &r[(((1 * 3 + 0) * 3 + 1) * 8 + 2) * 4], 4);
  EXPECT_EQ(v, float(((1 * 3 + 2) * 3 + 0) * 3 + 1));
  std::memcpy(&v, &r[(((1 * 3 + 0) * 3 + 1) * 8 + 5) * 4], 4);
  EXPECT_EQ(v, 0.0f); // a padding channel
  ConvProblem f = p;
  f.inputType = DType::F32, f.outputType = DType::F32;
  EXPECT_THAT(
      unsupportedReason(convolutionAsGemm(f), simt(32, 32, 128, 4, 4, 2)),
      ::testing::HasSubstr("columns evenly")); // 64 threads, BK 128
}

} // namespace

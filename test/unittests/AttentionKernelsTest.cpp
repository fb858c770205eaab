//===- AttentionKernelsTest.cpp - The fused attention kernel's variants ---===//
//
// Every variant of the attention template that kiln-match-contractions can
// generate must compile (NVRTC) and pass ptxas for sm_80 and sm_90: head
// dimensions 32 to 256 (on and off the padded shared-memory width), bf16,
// f16 and f32, causal tile skipping, grouped K/V heads, strided operands
// and a generated score body with a mask pointer; and the sm_90a wgmma
// variant's for sm_90a (one and two consumer warpgroups, operands only
// 2-byte aligned). Operands only 2-byte aligned (register copies instead
// of cp.async) run on emu against float64 here; otherwise the numerics are
// checked through the compiler against
// float64 by test/Target/CUDA/attention-kernels.test (wgmma) and
// attention-kernels-mma-sync.test.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/AttentionKernels.h"
#include "kiln/Target/CUDA/Nvrtc.h"
#include "kiln/runtime/Device.h"

#include "PtxasUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace kiln;
using namespace kiln::contraction;

namespace {

using kiln::testing::ptxasPath;
using kiln::testing::runPtxas;

AttentionProblem problem(uint64_t d, DType in, uint64_t seqQ = 100,
                         uint64_t seqK = 300) {
  AttentionProblem p;
  p.outer = 2;
  p.heads = 4;
  p.seqQ = seqQ;
  p.seqK = seqK;
  p.headDim = p.valueDim = d;
  p.inputType = in;
  p.outputType = in == DType::F32 ? DType::F32 : DType::BF16;
  // Heads split from [outer][seq][heads][d] projections.
  p.q = {seqQ * 4 * d, d, 4 * d};
  p.k = p.v = {seqK * 4 * d, d, 4 * d};
  return p;
}

TEST(AttentionKernelsTest, VariantsPassPtxasOnSm80AndSm90) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  struct Variant {
    uint64_t d;
    DType in;
    bool causal, grouped, masked;
  };
  for (Variant v : {Variant{32, DType::BF16, false, false, true},
                    Variant{64, DType::F16, true, false, false},
                    Variant{96, DType::BF16, false, true, false},
                    Variant{128, DType::BF16, true, false, true},
                    Variant{256, DType::F16, true, true, false},
                    Variant{32, DType::F32, false, false, true},
                    Variant{80, DType::F32, true, true, false},
                    Variant{256, DType::F32, true, false, false}}) {
    AttentionProblem p = problem(v.d, v.in);
    p.causalSkip = v.causal;
    p.causalOffset = 200;
    if (v.grouped)
      p.keyHeadGroup = p.valueHeadGroup = 2;
    AttentionBodies bodies;
    if (v.masked) {
      bodies.score = "  return acc * 0.125f + ((const float *)extra0)[(batch "
                     "/ 4) * 300 + col];";
      bodies.scoreOperands = {"score0"};
    }
    for (uint32_t sm : {80u, 90u}) {
      GenerateOptions options;
      options.smVersion = sm;
      options.name = "attn";
      AttentionConfig config = pickAttentionConfig(p);
      auto kernels = generateAttention(p, config, bodies, options);
      ASSERT_TRUE(bool(kernels))
          << config.describe(p) << ": " << kernels.error().message();
      ASSERT_EQ(kernels->kernels.size(), 1u);
      const GemmKernel &k = kernels->kernels[0];
      EXPECT_EQ(k.grid.x, (100 + config.blockM - 1) / config.blockM);
      EXPECT_EQ(k.grid.y, 8u);
      EXPECT_EQ(k.params.size(), v.masked ? 5u : 4u);
      EXPECT_EQ(runPtxas(k.ptx, "sm_" + std::to_string(sm)), "")
          << config.describe(p) << " sm_" << sm;
      if (v.in != DType::F32)
        EXPECT_NE(k.ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos);
      else
        EXPECT_EQ(k.ptx.find("mma.sync"), std::string::npos);
    }
  }
}

TEST(AttentionKernelsTest, WgmmaVariantsPassPtxasOnSm90a) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  struct Variant {
    uint64_t d, seqQ;
    DType in;
    bool causal, grouped, masked, unaligned;
  };
  for (Variant v : {Variant{32, 100, DType::BF16, false, false, true, false},
                    Variant{64, 100, DType::F16, true, false, false, false},
                    Variant{64, 40, DType::BF16, false, false, false, true},
                    Variant{96, 100, DType::BF16, false, true, false, false},
                    Variant{128, 100, DType::BF16, true, false, true, false},
                    Variant{128, 1, DType::F16, false, true, false, false},
                    Variant{256, 100, DType::F16, true, true, false, false}}) {
    AttentionProblem p = problem(v.d, v.in, v.seqQ);
    p.causalSkip = v.causal;
    p.causalOffset = 200;
    if (v.grouped)
      p.keyHeadGroup = p.valueHeadGroup = 2;
    if (v.unaligned)
      p.alignQ = p.alignK = p.alignV = 2;
    AttentionBodies bodies;
    if (v.masked) {
      bodies.score = "  return acc * 0.125f + ((const float *)extra0)[(batch "
                     "/ 4) * 300 + col];";
      bodies.scoreOperands = {"score0"};
    }
    GenerateOptions options;
    options.smVersion = 90;
    options.name = "attn";
    AttentionConfig config = pickAttentionConfig(p, 90, true);
    ASSERT_TRUE(config.wgmma) << config.describe(p);
    // Two consumer warpgroups (128 rows) when the queries need them and
    // the head fits their registers.
    const uint32_t rows = v.seqQ > 64 && v.d <= 128 ? 128 : 64;
    EXPECT_EQ(config.blockM, rows);
    auto kernels = generateAttention(p, config, bodies, options);
    ASSERT_TRUE(bool(kernels))
        << config.describe(p) << ": " << kernels.error().message();
    const GemmKernel &k = kernels->kernels[0];
    EXPECT_EQ(k.block.x, 128 + rows * 2);
    EXPECT_EQ(k.grid.x, (v.seqQ + rows - 1) / rows);
    EXPECT_EQ(k.grid.y, 8u);
    EXPECT_LE(k.dynamicSharedBytes, 227u * 1024);
    EXPECT_EQ(runPtxas(k.ptx, "sm_90"), "") << config.describe(p);
    EXPECT_NE(k.ptx.find(".target sm_90a"), std::string::npos);
    EXPECT_NE(k.ptx.find("wgmma.mma_async.sync.aligned.m64n64k16"),
              std::string::npos);
    const std::string values = "wgmma.mma_async.sync.aligned.m64n" +
                               std::to_string((v.d + 63) / 64 * 64) + "k16";
    EXPECT_NE(k.ptx.find(values), std::string::npos) << values;
    EXPECT_EQ(k.ptx.find("mma.sync"), std::string::npos);
    EXPECT_EQ(k.ptx.find("setmaxnreg") != std::string::npos, rows == 128);
  }
}

uint16_t toBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFF + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}
double fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Runs the kernel of `config` on emu with Q, K and V packed [heads][seq][d]
/// bf16 at `offsetBytes` past a 256-byte-aligned allocation; the output
/// (f32) against float64 attention on the same rounded inputs: the
/// relative error of the output norm, or a negative value on failure.
double attentionErrorOnEmu(const AttentionProblem &p,
                           const AttentionConfig &config,
                           const AttentionBodies &bodies, uint64_t offsetBytes,
                           double scale, bool offsetInProblem = false) {
  GenerateOptions options;
  options.smVersion = 90;
  options.name = "attn";
  auto kernels = generateAttention(p, config, bodies, options);
  EXPECT_TRUE(bool(kernels)) << kernels.error().message();
  if (!kernels)
    return -1;
  const GemmKernel &k = kernels->kernels[0];
  auto created = runtime::createEmuDevice();
  EXPECT_TRUE(bool(created));
  if (!created)
    return -1;
  runtime::Device &device = **created;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const uint64_t h = p.heads, d = p.headDim;
  auto operand = [&](uint64_t seq, std::vector<double> &values) {
    std::vector<uint8_t> bytes(offsetBytes + h * seq * d * 2);
    values.resize(h * seq * d);
    for (uint64_t i = 0; i < values.size(); ++i) {
      uint16_t b = toBf16(normal(rng));
      values[i] = fromBf16(b);
      std::memcpy(bytes.data() + offsetBytes + 2 * i, &b, 2);
    }
    auto ptr = device.allocate(bytes.size());
    EXPECT_TRUE(bool(ptr));
    EXPECT_FALSE(device.copyToDevice(*ptr, bytes.data(), bytes.size()));
    // With offsetInProblem the kernel gets the allocation's start and the
    // problem's offsets (a slice of a fused projection) move it.
    return offsetInProblem ? *ptr : *ptr + offsetBytes;
  };
  std::vector<double> q, kv, v;
  runtime::DevicePtr dQ = operand(p.seqQ, q), dK = operand(p.seqK, kv),
                     dV = operand(p.seqK, v);
  std::vector<float> out(h * p.seqQ * d, std::nanf(""));
  auto dO = device.allocate(out.size() * 4);
  EXPECT_FALSE(device.copyToDevice(*dO, out.data(), out.size() * 4));
  auto module = device.loadModule({k.name, k.ptx});
  EXPECT_TRUE(bool(module)) << module.error().message();
  if (!module)
    return -1;
  auto function = device.getFunction(*module, k.name);
  auto stream = device.createStream();
  runtime::PackedParams params;
  for (runtime::DevicePtr ptr : {dQ, dK, dV, *dO})
    params.addU64(ptr);
  runtime::Error err = device.launch(
      *function, {k.grid, k.block, k.dynamicSharedBytes}, params, *stream);
  EXPECT_FALSE(err) << err.message();
  if (err)
    return -1;
  EXPECT_FALSE(device.copyToHost(out.data(), *dO, out.size() * 4));
  double diff = 0, norm = 0;
  for (uint64_t head = 0; head < h; ++head)
    for (uint64_t i = 0; i < p.seqQ; ++i) {
      std::vector<double> s(p.seqK);
      double mx = -INFINITY, sum = 0;
      for (uint64_t j = 0; j < p.seqK; ++j) {
        double dot = 0;
        for (uint64_t c = 0; c < d; ++c)
          dot += q[(head * p.seqQ + i) * d + c] * kv[(head * p.seqK + j) * d + c];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      for (double &x : s)
        sum += (x = std::exp(x - mx));
      for (uint64_t c = 0; c < d; ++c) {
        double ref = 0;
        for (uint64_t j = 0; j < p.seqK; ++j)
          ref += s[j] / sum * v[(head * p.seqK + j) * d + c];
        double got = out[(head * p.seqQ + i) * d + c];
        if (!std::isfinite(got))
          return -1;
        diff += (got - ref) * (got - ref);
        norm += ref * ref;
      }
    }
  return std::sqrt(diff / norm);
}

// Q, K and V only 2-byte aligned (the producer copies through registers and
// arrives on the `full` mbarrier itself, instead of cp.async's arrive) and
// lengths off every tile (70 queries: two consumers, the second mostly past
// the end; 100 keys: the second tile partly past it), on emu against
// float64 for the wgmma kernel and the mma.sync one. Bound 2e-2 (the
// project's bf16 bound: P is rounded to bf16 before P V; the inputs are
// bf16 exactly in both).
TEST(AttentionKernelsTest, UnalignedOperandsOnEmu) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  AttentionProblem p;
  p.outer = 1;
  p.heads = 2;
  p.seqQ = 70;
  p.seqK = 100;
  p.headDim = p.valueDim = 64;
  p.inputType = DType::BF16;
  p.outputType = DType::F32;
  p.q = {2 * 70 * 64, 70 * 64, 64};
  p.k = p.v = {2 * 100 * 64, 100 * 64, 64};
  p.alignQ = p.alignK = p.alignV = 2;
  AttentionBodies bodies;
  bodies.score = "  return acc * 0.125f;";
  for (bool wgmma : {true, false}) {
    AttentionConfig config = pickAttentionConfig(p, 90, wgmma);
    ASSERT_EQ(config.wgmma, wgmma);
    double err = attentionErrorOnEmu(p, config, bodies, 2, 0.125);
    EXPECT_GE(err, 0) << config.describe(p);
    EXPECT_LE(err, 2e-2) << config.describe(p);
    // An aligned copy of the same problem takes cp.async's path.
    AttentionProblem aligned = p;
    aligned.alignQ = aligned.alignK = aligned.alignV = 16;
    err = attentionErrorOnEmu(aligned, pickAttentionConfig(aligned, 90, wgmma),
                              bodies, 0, 0.125);
    EXPECT_GE(err, 0) << config.describe(p) << " aligned";
    EXPECT_LE(err, 2e-2) << config.describe(p) << " aligned";
  }
}

// Q, K and V as slices of one fused projection (kiln-fuse-sibling-
// contractions): the kernel is given each buffer's start and
// AttentionStrides::offset elements move it; 3 elements (6 bytes: the
// register-copy path) and 64 (128 bytes: cp.async), on emu against float64
// for the wgmma and mma.sync kernels, bound 2e-2 as above. Teeth: without
// the generated base move, the kernel reads the buffers' first elements
// and misses by far more than the bound.
TEST(AttentionKernelsTest, OperandOffsetsOnEmu) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  for (uint64_t offset : {3u, 64u}) {
    AttentionProblem p;
    p.outer = 1;
    p.heads = 2;
    p.seqQ = p.seqK = 64;
    p.headDim = p.valueDim = 64;
    p.inputType = DType::BF16;
    p.outputType = DType::F32;
    p.q = p.k = p.v = {2 * 64 * 64, 64 * 64, 64, offset};
    // The buffers are 16-byte aligned, as the matcher says (its default);
    // the offset alone must bring the copies down to 2 bytes.
    p.alignQ = p.alignK = p.alignV = 16;
    AttentionBodies bodies;
    bodies.score = "  return acc * 0.125f;";
    for (bool wgmma : {true, false}) {
      AttentionConfig config = pickAttentionConfig(p, 90, wgmma);
      double err = attentionErrorOnEmu(p, config, bodies, offset * 2, 0.125,
                                       /*offsetInProblem=*/true);
      EXPECT_GE(err, 0) << config.describe(p) << " offset " << offset;
      EXPECT_LE(err, 2e-2) << config.describe(p) << " offset " << offset;
    }
  }
}

TEST(AttentionKernelsTest, WgmmaNeedsSm90AndSixteenBitInputs) {
  AttentionProblem p = problem(64, DType::BF16);
  EXPECT_FALSE(pickAttentionConfig(p, 90, false).wgmma);
  EXPECT_FALSE(pickAttentionConfig(p, 80, true).wgmma);
  EXPECT_FALSE(pickAttentionConfig(problem(64, DType::F32), 90, true).wgmma);
  EXPECT_EQ(wgmmaUnsupportedReason(problem(64, DType::F32)), "f32 inputs");
  AttentionConfig config = pickAttentionConfig(p, 90, true);
  GenerateOptions options;
  options.smVersion = 80;
  options.name = "attn";
  auto source = generateAttentionSource(p, config, {}, options);
  ASSERT_FALSE(bool(source));
  EXPECT_EQ(source.error().message(),
            "attention attn_wgmma_f16 128x64 w12 s4 d64: wgmma needs sm_90, "
            "not sm_80");
}

TEST(AttentionKernelsTest, UnsupportedProblemsSayWhy) {
  EXPECT_EQ(unsupportedReason(problem(64, DType::BF16)), "");
  EXPECT_EQ(unsupportedReason(problem(72, DType::BF16)),
            "a 16-bit head dimension that is not a multiple of 16");
  EXPECT_EQ(unsupportedReason(problem(72, DType::F32)), "");
  EXPECT_EQ(unsupportedReason(problem(320, DType::F32)),
            "head dimension above 256");
  AttentionProblem grouped = problem(64, DType::BF16);
  grouped.keyHeadGroup = 3;
  EXPECT_EQ(unsupportedReason(grouped),
            "query heads are not a multiple of the key/value heads");
  AttentionProblem empty = problem(64, DType::BF16, 0);
  EXPECT_EQ(unsupportedReason(empty), "an empty dimension");
}

TEST(AttentionKernelsTest, ConfigsBySize) {
  EXPECT_EQ(pickAttentionConfig(problem(64, DType::BF16)).describe(
                problem(64, DType::BF16)),
            "attn_mma_f16 64x64 w4 d64");
  EXPECT_EQ(pickAttentionConfig(problem(256, DType::BF16)).blockN, 32u);
  EXPECT_EQ(pickAttentionConfig(problem(64, DType::F32)).describe(
                problem(64, DType::F32)),
            "attn_simt_f32 16x32 w4 d64");
  // wgmma: the deepest ring up to 4 stages that fits 227 KiB; d256 has one
  // consumer warpgroup (64 rows) and 3 stages.
  EXPECT_EQ(pickAttentionConfig(problem(64, DType::BF16), 90, true)
                .describe(problem(64, DType::BF16)),
            "attn_wgmma_f16 128x64 w12 s4 d64");
  EXPECT_EQ(pickAttentionConfig(problem(64, DType::BF16, 64), 90, true)
                .describe(problem(64, DType::BF16, 64)),
            "attn_wgmma_f16 64x64 w8 s4 d64");
  EXPECT_EQ(pickAttentionConfig(problem(256, DType::F16), 90, true)
                .describe(problem(256, DType::F16)),
            "attn_wgmma_f16 64x64 w8 s3 d256");
}

} // namespace

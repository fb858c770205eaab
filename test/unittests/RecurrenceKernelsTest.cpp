//===- RecurrenceKernelsTest.cpp - The persistent recurrence kernel -------===//
//
// The kernel kiln-lower-recurrence generates (RecurrenceKernels.h) for each
// cell, with the optional inputs, in f32/bf16/f16, as one block (sm_80) and
// as clusters of 2 to 8 (sm_90), R in shared and in global memory:
//   - it passes ptxas for sm_80 and sm_90, and the sm_90 form is a cluster
//     kernel (.reqnctapercluster, mapa, barrier.cluster with release /
//     acquire);
//   - it runs on emu against a float64 recurrence written here from the
//     ONNX operator spec (the same rounded inputs), element by element:
//     f32 within 2e-5 |want| + 2e-5 (the kernel accumulates each product
//     over H <= 20 terms in fp32 and keeps h and c in fp32: a few ulps per
//     step, T = 5 steps); bf16/f16 outputs within 2^-8 |want| + 1e-4 (one
//     rounding of the stored value, 2^-9 relative for bf16, plus the fp32
//     part).
// The emulator runs a cluster's blocks on a skewed schedule (runCluster),
// so a missing or misplaced step barrier fails here (and in
// recurrent-models.test) rather than only on hardware.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/RecurrenceKernels.h"
#include "kiln/Target/CUDA/Nvrtc.h"
#include "kiln/runtime/Device.h"

#include "ContractionTestSupport.h"
#include "PtxasUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;
using namespace kiln::contraction;
using kiln::contraction_test::fromBf16;
using kiln::contraction_test::fromF16;
using kiln::contraction_test::toBf16;
using kiln::contraction_test::toF16;
using kiln::testing::ptxasPath;
using kiln::testing::runPtxas;

namespace {

double activate(const RecurrentActivation &a, double x) {
  const std::string &n = a.name;
  if (n == "relu")
    return x > 0 ? x : 0;
  if (n == "tanh")
    return std::tanh(x);
  if (n == "sigmoid")
    return 1 / (1 + std::exp(-x));
  if (n == "softsign")
    return x / (1 + std::fabs(x));
  if (n == "softplus")
    return std::log1p(std::exp(x));
  if (n == "leakyrelu")
    return x >= 0 ? x : a.alpha * x;
  if (n == "thresholdedrelu")
    return x > a.alpha ? x : 0;
  if (n == "elu")
    return x >= 0 ? x : a.alpha * std::expm1(x);
  if (n == "hardsigmoid")
    return std::min(1.0, std::max(0.0, a.alpha * x + a.beta));
  if (n == "affine")
    return a.alpha * x + a.beta;
  return a.alpha * std::tanh(a.beta * x); // scaledtanh
}

/// One case: the problem's inputs (as the rounded values the kernel reads)
/// and the float64 outputs.
struct Case {
  RecurrenceProblem p;
  std::vector<double> x, r, h0, c0, peep, resetBias;
  std::vector<int32_t> lens;
  std::vector<double> y, lastH, lastC;
};

double roundTo(DType type, double v) {
  if (type == DType::BF16)
    return fromBf16(toBf16(static_cast<float>(v)));
  if (type == DType::F16)
    return fromF16(toF16(static_cast<float>(v)));
  return static_cast<float>(v);
}

/// Random inputs and the ONNX semantics in float64.
Case makeCase(const RecurrenceProblem &p, unsigned seed) {
  Case c;
  c.p = p;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, 0.5);
  const uint64_t T = p.steps, B = p.batch, H = p.hidden, G = p.gates();
  auto fill = [&](std::vector<double> &v, uint64_t n) {
    v.resize(n);
    for (double &e : v)
      e = roundTo(p.type, normal(rng));
  };
  fill(c.x, T * B * G * H);
  fill(c.r, G * H * H);
  fill(c.h0, B * H);
  if (p.cell == RecurrentCell::Lstm)
    fill(c.c0, B * H);
  if (p.peepholes)
    fill(c.peep, 3 * H);
  if (p.resetBias)
    fill(c.resetBias, H);
  if (p.sequenceLens)
    for (uint64_t b = 0; b < B; ++b)
      c.lens.push_back(static_cast<int32_t>((b * 2) % (T + 1)));
  auto f = [&](int i, double v) {
    if (p.clip)
      v = std::min<double>(*p.clip, std::max<double>(-*p.clip, v));
    return activate(p.activations[i], v);
  };
  std::vector<double> h = c.h0, cs = c.c0;
  if (cs.empty())
    cs.assign(B * H, 0);
  c.y.assign(T * B * H, 0);
  auto dot = [&](uint64_t row, const std::vector<double> &v, uint64_t b) {
    double s = 0;
    for (uint64_t k = 0; k < H; ++k)
      s += c.r[row * H + k] * v[b * H + k];
    return s;
  };
  for (uint64_t s = 0; s < T; ++s) {
    uint64_t t = p.reverse ? T - 1 - s : s;
    std::vector<double> hn(B * H), cn(B * H);
    std::vector<double> rh(B * H);
    if (p.cell == RecurrentCell::Gru && !p.linearBeforeReset)
      for (uint64_t b = 0; b < B; ++b)
        for (uint64_t u = 0; u < H; ++u) {
          double xr = c.x[(t * B + b) * G * H + H + u];
          rh[b * H + u] = f(0, xr + dot(H + u, h, b)) * h[b * H + u];
        }
    for (uint64_t b = 0; b < B; ++b)
      for (uint64_t u = 0; u < H; ++u) {
        auto x = [&](uint64_t g) {
          return c.x[(t * B + b) * G * H + g * H + u];
        };
        auto pre = [&](uint64_t g) { return x(g) + dot(g * H + u, h, b); };
        double hv = h[b * H + u], cv = cs[b * H + u], out, cnew = 0;
        if (p.cell == RecurrentCell::Lstm) {
          double gi = pre(0), go = pre(1), gf = pre(2);
          if (p.peepholes) {
            gi += c.peep[u] * cv;
            gf += c.peep[2 * H + u] * cv;
          }
          double i = f(0, gi);
          double fg = p.inputForget ? 1 - i : f(0, gf);
          cnew = fg * cv + i * f(1, pre(3));
          if (p.peepholes)
            go += c.peep[H + u] * cnew;
          out = f(0, go) * activate(p.activations[2], cnew);
        } else if (p.cell == RecurrentCell::Gru) {
          double z = f(0, pre(0)), candidate;
          if (p.linearBeforeReset) {
            double r = f(0, pre(1));
            double hh =
                dot(2 * H + u, h, b) + (p.resetBias ? c.resetBias[u] : 0.0);
            candidate = f(1, x(2) + r * hh);
          } else {
            candidate = f(1, x(2) + dot(2 * H + u, rh, b));
          }
          out = (1 - z) * candidate + z * hv;
        } else {
          out = f(0, pre(0));
        }
        bool live = !p.sequenceLens || static_cast<int64_t>(t) < c.lens[b];
        c.y[(t * B + b) * H + u] = live ? out : 0;
        hn[b * H + u] = live ? out : hv;
        cn[b * H + u] = live ? cnew : cv;
      }
    h = hn;
    cs = cn;
  }
  // A row of length 0 has no last state: zeros (onnxruntime's LSTM and GRU).
  for (uint64_t b = 0; b < B && p.sequenceLens; ++b)
    if (c.lens[b] == 0)
      for (uint64_t u = 0; u < H; ++u)
        h[b * H + u] = cs[b * H + u] = 0;
  c.lastH = h;
  if (p.cell == RecurrentCell::Lstm)
    c.lastC = cs;
  return c;
}

/// Runs `c` with `config` on emu; the count of elements outside the bound
/// (-1 when the kernel did not run), each printed.
int mismatchesOnEmu(const Case &c, const RecurrenceConfig &config,
                    uint32_t sm) {
  const RecurrenceProblem &p = c.p;
  GenerateOptions options;
  options.smVersion = sm;
  options.name = "rnn";
  auto kernels = generateRecurrence(p, config, options);
  EXPECT_TRUE(bool(kernels)) << kernels.error().message();
  if (!kernels)
    return -1;
  const GemmKernel &k = kernels->kernels[0];
  auto created = runtime::createEmuDevice();
  if (!created)
    return -1;
  runtime::Device &device = **created;
  size_t elem = p.type == DType::F32 ? 4 : 2;
  auto encode = [&](const std::vector<double> &values) {
    std::vector<uint8_t> bytes(values.size() * elem + 16);
    for (size_t i = 0; i < values.size(); ++i) {
      if (p.type == DType::F32) {
        float v = static_cast<float>(values[i]);
        std::memcpy(&bytes[i * 4], &v, 4);
      } else {
        uint16_t v = p.type == DType::BF16
                         ? toBf16(static_cast<float>(values[i]))
                         : toF16(static_cast<float>(values[i]));
        std::memcpy(&bytes[i * 2], &v, 2);
      }
    }
    return bytes;
  };
  auto upload = [&](const std::vector<uint8_t> &bytes) {
    auto ptr = device.allocate(bytes.size());
    EXPECT_TRUE(bool(ptr));
    EXPECT_FALSE(device.copyToDevice(*ptr, bytes.data(), bytes.size()));
    return *ptr;
  };
  runtime::PackedParams params;
  params.addU64(upload(encode(c.x)));
  params.addU64(upload(encode(c.r)));
  params.addU64(upload(encode(c.h0)));
  if (p.cell == RecurrentCell::Lstm)
    params.addU64(upload(encode(c.c0)));
  if (p.peepholes)
    params.addU64(upload(encode(c.peep)));
  if (p.sequenceLens) {
    std::vector<uint8_t> bytes(c.lens.size() * 4);
    std::memcpy(bytes.data(), c.lens.data(), bytes.size());
    params.addU64(upload(bytes));
  }
  if (p.resetBias)
    params.addU64(upload(encode(c.resetBias)));
  // Outputs start as NaN: an element the kernel does not write fails.
  std::vector<double> nan(c.y.size(), std::nan(""));
  runtime::DevicePtr y = upload(encode(nan));
  std::vector<double> nanState(c.lastH.size(), std::nan(""));
  runtime::DevicePtr lastH = upload(encode(nanState));
  runtime::DevicePtr lastC = upload(encode(nanState));
  params.addU64(y);
  params.addU64(lastH);
  if (p.cell == RecurrentCell::Lstm)
    params.addU64(lastC);
  auto module = device.loadModule({k.name, k.ptx});
  EXPECT_TRUE(bool(module)) << module.error().message();
  if (!module)
    return -1;
  auto function = device.getFunction(*module, k.name);
  auto stream = device.createStream();
  runtime::Error err = device.launch(
      *function, {k.grid, k.block, k.dynamicSharedBytes}, params, *stream);
  EXPECT_FALSE(err) << err.message();
  if (err)
    return -1;
  int bad = 0;
  auto check = [&](runtime::DevicePtr ptr, const std::vector<double> &want,
                   const char *what) {
    std::vector<uint8_t> bytes(want.size() * elem);
    EXPECT_FALSE(device.copyToHost(bytes.data(), ptr, bytes.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      double got;
      if (p.type == DType::F32) {
        float v;
        std::memcpy(&v, &bytes[i * 4], 4);
        got = v;
      } else {
        uint16_t v;
        std::memcpy(&v, &bytes[i * 2], 2);
        got = p.type == DType::BF16 ? fromBf16(v) : fromF16(v);
      }
      double bound = p.type == DType::F32
                         ? 2e-5 * std::fabs(want[i]) + 2e-5
                         : std::ldexp(std::fabs(want[i]), -8) + 1e-4;
      if (!(std::fabs(got - want[i]) <= bound) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << got << ", want "
                      << want[i] << " (bound " << bound << ")";
    }
  };
  check(y, c.y, "y");
  check(lastH, c.lastH, "last_h");
  if (p.cell == RecurrentCell::Lstm)
    check(lastC, c.lastC, "last_c");
  return bad;
}

RecurrenceProblem problem(RecurrentCell cell, DType type, uint64_t hidden) {
  RecurrenceProblem p;
  p.cell = cell;
  p.type = type;
  p.steps = 5;
  p.batch = 3;
  p.hidden = hidden;
  if (cell == RecurrentCell::Lstm)
    p.activations = {{"sigmoid"}, {"tanh"}, {"tanh"}};
  else if (cell == RecurrentCell::Gru)
    p.activations = {{"sigmoid"}, {"tanh"}};
  else
    p.activations = {{"tanh"}};
  return p;
}

/// The cases: every cell and option, each type, uneven unit splits.
std::vector<RecurrenceProblem> cases() {
  std::vector<RecurrenceProblem> all;
  RecurrenceProblem lstm = problem(RecurrentCell::Lstm, DType::F32, 12);
  lstm.peepholes = lstm.sequenceLens = lstm.reverse = true;
  lstm.clip = 1.5f;
  all.push_back(lstm);
  RecurrenceProblem forget = problem(RecurrentCell::Lstm, DType::BF16, 8);
  forget.inputForget = true;
  forget.activations = {
      {"hardsigmoid", 0.3f, 0.4f}, {"softsign"}, {"elu", 0.7f}};
  all.push_back(forget);
  RecurrenceProblem gru = problem(RecurrentCell::Gru, DType::F16, 20);
  gru.sequenceLens = true;
  all.push_back(gru);
  RecurrenceProblem lbr = problem(RecurrentCell::Gru, DType::F32, 9);
  lbr.linearBeforeReset = lbr.resetBias = true;
  lbr.activations = {{"sigmoid"}, {"scaledtanh", 1.5f, 0.5f}};
  all.push_back(lbr);
  RecurrenceProblem rnn = problem(RecurrentCell::Rnn, DType::F32, 16);
  rnn.reverse = true;
  rnn.activations = {{"leakyrelu", 0.2f}};
  all.push_back(rnn);
  // Seven batch rows: in chunks of 3 (and 2) the last chunk is partial.
  RecurrenceProblem rows = problem(RecurrentCell::Lstm, DType::F32, 8);
  rows.batch = 7;
  rows.sequenceLens = true;
  all.push_back(rows);
  return all;
}

std::string name(const RecurrenceProblem &p, const RecurrenceConfig &c) {
  return describeRecurrence(p, c) + ", H " + std::to_string(p.hidden);
}

TEST(RecurrenceKernelsTest, PassesPtxasOnSm80AndSm90) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  for (const RecurrenceProblem &p : cases())
    for (uint32_t sm : {80u, 90u}) {
      RecurrenceConfig c = pickRecurrenceConfig(p, sm, 232448);
      EXPECT_EQ(c.blocks > 1, sm == 90) << name(p, c);
      GenerateOptions options;
      options.smVersion = sm;
      options.name = "rnn";
      auto kernels = generateRecurrence(p, c, options);
      ASSERT_TRUE(bool(kernels)) << kernels.error().message();
      const std::string &ptx = kernels->kernels[0].ptx;
      EXPECT_EQ(runPtxas(ptx, "sm_" + std::to_string(sm)), "") << name(p, c);
      bool cluster = sm == 90;
      EXPECT_EQ(ptx.find(".reqnctapercluster") != std::string::npos, cluster);
      EXPECT_EQ(ptx.find("mapa.shared::cluster") != std::string::npos, cluster);
      EXPECT_EQ(ptx.find("barrier.cluster.arrive.release") != std::string::npos,
                cluster);
      EXPECT_EQ(ptx.find("barrier.cluster.wait.acquire") != std::string::npos,
                cluster);
    }
}

TEST(RecurrenceKernelsTest, MatchesFloat64OnEmu) {
  if (runtime::Error err = nvrtc::available())
    GTEST_SKIP() << err.message();
  unsigned seed = 1;
  for (const RecurrenceProblem &p : cases()) {
    Case c = makeCase(p, seed++);
    struct Run {
      uint32_t sm, blocks, kSplit, chunk;
      bool shared;
    };
    for (Run run : {Run{80, 1, 1, 0, true}, Run{80, 1, 8, 2, false},
                    Run{90, 2, 2, 0, false}, Run{90, 4, 0, 3, true},
                    Run{90, 8, 4, 0, true}}) {
      if (run.blocks > p.hidden)
        continue;
      RecurrenceConfig config = pickRecurrenceConfig(p, run.sm, 232448);
      config.blocks = run.blocks;
      if (run.kSplit)
        config.kSplit = run.kSplit;
      if (run.chunk)
        config.batchChunk =
            std::min<uint32_t>(run.chunk, static_cast<uint32_t>(p.batch));
      config.threads = recurrenceThreads(p, config.blocks, config.kSplit);
      config.recurrentWeightsShared = run.shared;
      EXPECT_EQ(mismatchesOnEmu(c, config, run.sm), 0)
          << name(p, config) << " on sm_" << run.sm;
    }
  }
}

TEST(RecurrenceKernelsTest, ConfigAndUnsupported) {
  RecurrenceProblem p = problem(RecurrentCell::Lstm, DType::F32, 256);
  p.batch = 8;
  p.steps = 100;
  // sm_90: a cluster of 8, 32 units (128 rows of R) each, 4 threads a
  // row; R's rows fit.
  RecurrenceConfig c = pickRecurrenceConfig(p, 90, 232448);
  EXPECT_EQ(c.blocks, 8u);
  EXPECT_EQ(c.batchChunk, 8u);
  EXPECT_EQ(recurrenceChunks(p, c), 1u);
  EXPECT_EQ(c.kSplit, 4u);
  EXPECT_EQ(c.threads, 512u);
  EXPECT_TRUE(c.recurrentWeightsShared);
  RecurrenceSharedLayout l = recurrenceLayout(p, c);
  // R: 128 rows of 260 floats (4 words modulo 32: the 4 lanes of 8 rows
  // on 32 banks); h: 2 x 256 x 8; gates 128 x 8; c 32 x 8.
  EXPECT_EQ(l.weightStride, 260u);
  EXPECT_EQ(l.total,
            128u * 260 * 4 + 2 * 256 * 8 * 4 + 128 * 8 * 4 + 32 * 8 * 4);
  // bf16: max(2, 4) elements modulo 64.
  RecurrenceProblem half = p;
  half.type = DType::BF16;
  EXPECT_EQ(recurrenceLayout(half, c).weightStride, 260u);
  RecurrenceConfig one16 = c;
  one16.kSplit = 1;
  EXPECT_EQ(recurrenceLayout(half, one16).weightStride, 258u);
  // sm_80: one block; all of R (1 MB) does not fit, so it stays in global.
  RecurrenceConfig one = pickRecurrenceConfig(p, 80, 166912);
  EXPECT_EQ(one.blocks, 1u);
  EXPECT_FALSE(one.recurrentWeightsShared);
  EXPECT_EQ(recurrenceUnsupportedReason(p, one, 80, 166912), "");
  // H = 3: at most two blocks.
  EXPECT_EQ(pickRecurrenceConfig(problem(RecurrentCell::Rnn, DType::F32, 3), 90,
                                 232448)
                .blocks,
            2u);
  RecurrenceConfig cluster = c;
  EXPECT_NE(recurrenceUnsupportedReason(p, cluster, 80, 232448)
                .find("a cluster of blocks needs sm_90"),
            std::string::npos);
  cluster.blocks = 16;
  EXPECT_NE(
      recurrenceUnsupportedReason(p, cluster, 90, 232448).find("power of two"),
      std::string::npos);
  RecurrenceProblem f64 = p;
  f64.type = DType::F64;
  EXPECT_NE(recurrenceUnsupportedReason(f64, c, 90, 232448).find("f32, f16"),
            std::string::npos);
  RecurrenceProblem wrong = p;
  wrong.activations = {{"gelu"}, {"tanh"}, {"tanh"}};
  EXPECT_NE(recurrenceUnsupportedReason(wrong, c, 90, 232448)
                .find("unknown activation 'gelu'"),
            std::string::npos);
  // A batch of 40: three clusters of 16 rows (the last holds 8).
  RecurrenceProblem b40 = p;
  b40.batch = 40;
  RecurrenceConfig c40 = pickRecurrenceConfig(b40, 90, 232448);
  EXPECT_EQ(c40.batchChunk, 16u);
  EXPECT_EQ(recurrenceChunks(b40, c40), 3u);
  EXPECT_EQ(describeRecurrence(b40, c40),
            "persistent lstm, 3 clusters of 8 x 512 threads (k split 4), 16 "
            "batch rows a cluster, R in shared memory");
  // B 64 x H 1024 on sm_80: R (16 MB) in global memory and 4 rows a block
  // (28 KB of state a row: 2 h buffers, 4 gates and c, fp32).
  RecurrenceProblem big = p;
  big.batch = 64;
  big.hidden = 1024;
  RecurrenceConfig bigConfig = pickRecurrenceConfig(big, 80, 166912);
  EXPECT_FALSE(bigConfig.recurrentWeightsShared);
  EXPECT_EQ(bigConfig.batchChunk, 4u);
  EXPECT_EQ(recurrenceUnsupportedReason(big, bigConfig, 80, 166912), "");
  // Even one row's state is too large at H 16384 (an RNN: 256 KB).
  RecurrenceProblem huge = problem(RecurrentCell::Rnn, DType::F32, 16384);
  RecurrenceConfig hugeConfig = pickRecurrenceConfig(huge, 80, 166912);
  EXPECT_EQ(hugeConfig.batchChunk, 1u);
  EXPECT_NE(recurrenceUnsupportedReason(huge, hugeConfig, 80, 166912)
                .find("bytes of shared memory per block"),
            std::string::npos);
}

} // namespace

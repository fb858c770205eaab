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

#include "kiln/Target/CUDA/ContractionKernels.h"
#include "kiln/Target/CUDA/Nvrtc.h"
#include "kiln/runtime/Device.h"

#include "emu/PtxInterpreter.h"

#include <gmock/gmock.h>
#include "PtxasUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;
using namespace kiln::contraction;
using runtime::Dim3;

namespace {

// --- Host-side number formats
// -------------------------------------------------

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float floatOf(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/// Round to nearest even, for finite values.
uint16_t toBf16(float f) {
  uint32_t b = bitsOf(f);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}
float fromBf16(uint16_t h) { return floatOf(uint32_t(h) << 16); }
uint16_t toF16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float fromF16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
/// cvt.rna.tf32.f32: round to 10 explicit mantissa bits, ties away.
float toTf32(float f) { return floatOf((bitsOf(f) + 0x1000u) & 0xFFFFE000u); }
/// What wgmma's tf32 inputs keep of an fp32 operand: its upper 19 bits.
float truncTf32(float f) { return floatOf(bitsOf(f) & 0xFFFFE000u); }
/// The inputs as the family's tensor cores see them.
double asTf32(Family family, double v) {
  return family == Family::WgmmaTf32 ? truncTf32(static_cast<float>(v))
                                     : toTf32(static_cast<float>(v));
}

/// Host values of one tensor and their device bytes.
struct Tensor {
  std::vector<double> values;
  std::vector<uint8_t> bytes;
  DType type = DType::F32;
};

Tensor randomTensor(size_t count, DType type, std::mt19937 &rng,
                    double low = -1, double high = 1) {
  std::uniform_real_distribution<float> dist(static_cast<float>(low),
                                             static_cast<float>(high));
  Tensor t;
  t.type = type;
  t.values.resize(count);
  t.bytes.resize(count * (type == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < count; ++i) {
    float f = dist(rng);
    if (type == DType::F32) {
      t.values[i] = f;
      std::memcpy(&t.bytes[4 * i], &f, 4);
    } else {
      uint16_t h = type == DType::BF16 ? toBf16(f) : toF16(f);
      t.values[i] = type == DType::BF16 ? fromBf16(h) : fromF16(h);
      std::memcpy(&t.bytes[2 * i], &h, 2);
    }
  }
  return t;
}

double readOut(const std::vector<uint8_t> &bytes, size_t i, DType type) {
  if (type == DType::F32) {
    float f;
    std::memcpy(&f, &bytes[4 * i], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &bytes[2 * i], 2);
  return type == DType::BF16 ? fromBf16(h) : fromF16(h);
}

// --- Tools
// ---------------------------------------------------------------------

using kiln::testing::ptxasPath;
using kiln::testing::runPtxas;

bool skipWithoutNvrtc() {
  if (runtime::Error err = nvrtc::available()) {
    std::fprintf(stderr, "skipping: %s\n", err.message().c_str());
    return true;
  }
  return false;
}

// --- The case runner
// --------------------------------------------------------------

struct Case {
  GemmProblem problem;
  GemmConfig config;
  Epilogue epilogue;
  uint32_t seed = 1;
  /// For tf32 cases: also compare with the unrounded inputs within 1e-3 S.
  bool checkUnroundedTf32 = false;
};

double activate(Activation act, double v, const Epilogue &e) {
  switch (act) {
  case Activation::None:
    return v;
  case Activation::Relu:
    return v > 0 ? v : 0;
  case Activation::Gelu:
    return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  case Activation::GeluTanh:
    return 0.5 * v *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  case Activation::Sigmoid:
    return 1 / (1 + std::exp(-v));
  case Activation::Tanh:
    return std::tanh(v);
  case Activation::Clip:
    return std::min<double>(std::max<double>(v, e.clipMin), e.clipMax);
  }
  return v;
}

/// The exact epilogue of one output and the bound on the kernel's error
/// (see the file comment): `acc` and `mag` are the exact sum and the sum
/// of |products| over `k` terms; sc, bi, rs the scale, bias and
/// beta * residual that apply.
std::pair<double, double> referenceOutput(const Epilogue &e, DType outType,
                                          uint64_t k, double acc, double mag,
                                          double sc, double bi, double rs) {
  const double u = std::ldexp(1.0, -24);
  double out = activate(e.activation, acc * e.alpha * sc + bi + rs, e);
  double err = (k + 8) * u *
               (std::fabs(e.alpha * sc) * mag + std::fabs(bi) + std::fabs(rs));
  if (e.activation != Activation::None)
    err = 1.13 * err + 4 * u * std::fabs(out) + 1e-7;
  double ulp = outType == DType::BF16  ? std::ldexp(1.0, -8)
               : outType == DType::F16 ? std::ldexp(1.0, -11)
                                       : 0;
  err += ulp * (std::fabs(out) + err);
  return {out, err};
}

/// The device bytes of a case's operands.
struct Operands {
  std::vector<uint8_t> a, b, scale, bias, residual;
};

/// Runs the kernels on a fresh emu device; C's bytes (empty on failure).
std::vector<uint8_t> runOnEmu(const GemmKernels &generated,
                              const GemmProblem &p, const Operands &in,
                              uint64_t cCount) {
  auto created = runtime::createEmuDevice();
  EXPECT_TRUE(bool(created)) << created.error().message();
  if (!created)
    return {};
  runtime::Device &device = **created;
  std::vector<runtime::DevicePtr> allocations;
  auto upload = [&](const std::vector<uint8_t> &bytes) -> runtime::DevicePtr {
    auto ptr = device.allocate(std::max<size_t>(bytes.size(), 4));
    EXPECT_TRUE(bool(ptr));
    if (!bytes.empty()) {
      EXPECT_FALSE(device.copyToDevice(*ptr, bytes.data(), bytes.size()));
    }
    allocations.push_back(*ptr);
    return *ptr;
  };
  uint32_t outBytes = p.outputType == DType::F32 ? 4 : 2;
  // C starts as a NaN-ish pattern so an element the kernel misses shows up.
  std::vector<uint8_t> cInit(cCount * outBytes, 0xFF);
  runtime::DevicePtr dA = upload(in.a), dB = upload(in.b), dC = upload(cInit);
  runtime::DevicePtr dScale = in.scale.empty() ? 0 : upload(in.scale);
  runtime::DevicePtr dBias = in.bias.empty() ? 0 : upload(in.bias);
  runtime::DevicePtr dResidual = in.residual.empty() ? 0 : upload(in.residual);
  runtime::DevicePtr dWorkspace =
      generated.workspaceBytes
          ? upload(std::vector<uint8_t>(generated.workspaceBytes, 0))
          : 0;
  auto stream = device.createStream();
  EXPECT_TRUE(bool(stream));
  for (const GemmKernel &kernel : generated.kernels) {
    auto module = device.loadModule({kernel.name, kernel.ptx});
    EXPECT_TRUE(bool(module)) << module.error().message();
    if (!module)
      return {};
    auto function = device.getFunction(*module, kernel.name);
    EXPECT_TRUE(bool(function)) << function.error().message();
    if (!function)
      return {};
    runtime::PackedParams params;
    for (const KernelParameter &param : kernel.params) {
      const std::string &n = param.name;
      if (n == "A")
        params.addU64(dA);
      else if (n == "B")
        params.addU64(dB);
      else if (n == "C")
        params.addU64(dC);
      else if (n == "scale")
        params.addU64(dScale);
      else if (n == "bias")
        params.addU64(dBias);
      else if (n == "residual")
        params.addU64(dResidual);
      else if (n == "workspace")
        params.addU64(dWorkspace);
      else if (n == "M")
        params.addU32(static_cast<uint32_t>(p.m));
      else if (n == "batchStrideA")
        params.addU64(p.batchStrideA);
      else if (n == "batchStrideC")
        params.addU64(p.batchStrideC);
      else if (param.kind == KernelParameter::Kind::TensorMap) {
        // What the runtime does at load (Runtime.cpp): the map over the
        // operand its address parameter names.
        const std::string &source =
            kernel.params[param.tensorMap.addressParam].name;
        alignas(64) uint8_t map[128];
        runtime::Error err = device.encodeTensorMap(
            param.tensorMap, source == "A" ? dA : dB, n, map);
        EXPECT_FALSE(err) << err.message();
        params.addBytes(map, sizeof(map), 64);
      } else
        ADD_FAILURE() << "unknown parameter " << n;
    }
    Dim3 grid = kernel.gridFor(p.m);
    EXPECT_EQ(grid.x, kernel.grid.x);
    runtime::Error err = device.launch(
        *function, {grid, kernel.block, kernel.dynamicSharedBytes}, params,
        *stream);
    EXPECT_FALSE(err) << kernel.name << ": " << err.message();
    if (err)
      return {};
  }
  std::vector<uint8_t> cBytes(cInit.size());
  EXPECT_FALSE(device.copyToHost(cBytes.data(), dC, cBytes.size()));
  return cBytes;
}

/// Runs the case; every output element is checked. Returns the emulated
/// result for further checks (empty on failure).
std::vector<double> runCase(const Case &c, const std::string &name = "k") {
  const GemmProblem &p = c.problem;
  const Epilogue &e = c.epilogue;
  GenerateOptions options;
  options.name = name;
  runtime::Expected<GemmKernels> generated =
      generateGemm(p, c.config, e, options);
  EXPECT_TRUE(bool(generated)) << generated.error().message();
  if (!generated)
    return {};
  if (!ptxasPath().empty()) {
    EXPECT_EQ(runPtxas(generated->kernels[0].ptx, "sm_90"), "")
        << c.config.describe();
  }

  std::mt19937 rng(c.seed);
  uint64_t lda = p.ldaOrPacked(), ldb = p.ldbOrPacked(), ldc = p.ldcOrPacked();
  bool aRow = p.layoutA == Layout::RowMajor,
       bRow = p.layoutB == Layout::RowMajor;
  uint64_t aBatches = p.batchStrideA ? p.batch : 1;
  uint64_t bBatches = p.batchStrideB ? p.batch : 1;
  uint64_t aSpan = (aRow ? (p.m - 1) * lda + p.k : (p.k - 1) * lda + p.m);
  uint64_t bSpan = (bRow ? (p.k - 1) * ldb + p.n : (p.n - 1) * ldb + p.k);
  uint64_t cSpan = (p.m - 1) * ldc + p.n;
  auto total = [&](uint64_t batches, uint64_t stride, uint64_t span) {
    return (batches - 1) * stride + span;
  };
  Tensor a =
      randomTensor(total(aBatches, p.batchStrideA, aSpan), p.inputType, rng);
  Tensor b =
      randomTensor(total(bBatches, p.batchStrideB, bSpan), p.inputType, rng);
  uint64_t cCount = total(p.batch, p.batchStrideC, cSpan);
  auto vectorLength = [&](const EpilogueVector &v) {
    return v.kind == EpilogueVector::Kind::PerRow ? p.m : p.n;
  };
  Tensor scale, bias, residual;
  if (e.scale.present())
    scale = randomTensor(vectorLength(e.scale), e.scale.type, rng, 0.5, 2);
  if (e.bias.present())
    bias = randomTensor(vectorLength(e.bias), e.bias.type, rng);
  if (e.residual)
    residual = randomTensor(cCount, e.residualType, rng);

  auto at = [](const Tensor &t, uint64_t i) { return t.values[i]; };
  // Reference and bound per output.
  std::vector<double> ref(cCount, 0), bound(cCount, 0), refUnrounded;
  bool tf32 = c.config.family == Family::MmaTf32 ||
              c.config.family == Family::WgmmaTf32;
  // The unrounded reference's slack (the header): rna or truncation.
  double tf32Slack = c.config.family == Family::WgmmaTf32
                         ? std::ldexp(1.0, -9)
                         : 1e-3;
  if (c.checkUnroundedTf32)
    refUnrounded.assign(cCount, 0);
  std::vector<double> sums(cCount, 0);
  const double u = std::ldexp(1.0, -24);
  for (uint64_t bt = 0; bt < p.batch; ++bt)
    for (uint64_t i = 0; i < p.m; ++i)
      for (uint64_t j = 0; j < p.n; ++j) {
        double acc = 0, mag = 0, accUnrounded = 0;
        for (uint64_t k = 0; k < p.k; ++k) {
          uint64_t ai = (aBatches > 1 ? bt * p.batchStrideA : 0) +
                        (aRow ? i * lda + k : k * lda + i);
          uint64_t bi = (bBatches > 1 ? bt * p.batchStrideB : 0) +
                        (bRow ? k * ldb + j : j * ldb + k);
          double av = at(a, ai), bv = at(b, bi);
          if (tf32) {
            accUnrounded += av * bv;
            av = asTf32(c.config.family, av);
            bv = asTf32(c.config.family, bv);
          }
          acc += av * bv;
          mag += std::fabs(av * bv);
        }
        uint64_t ci = bt * p.batchStrideC + i * ldc + j;
        double sc = 1, bi = 0, rs = 0;
        uint64_t vi = 0;
        if (e.scale.present()) {
          vi = e.scale.kind == EpilogueVector::Kind::PerRow ? i : j;
          sc = at(scale, vi);
        }
        if (e.bias.present()) {
          vi = e.bias.kind == EpilogueVector::Kind::PerRow ? i : j;
          bi = at(bias, vi);
        }
        if (e.residual)
          rs = e.beta * at(residual, ci);
        auto finish = [&](double sum) {
          return activate(e.activation, sum * e.alpha * sc + bi + rs, e);
        };
        double pre = acc * e.alpha * sc + bi + rs;
        double out = activate(e.activation, pre, e);
        double err =
            (p.k + 8) * u *
            (std::fabs(e.alpha * sc) * mag + std::fabs(bi) + std::fabs(rs));
        if (e.activation != Activation::None)
          err = 1.13 * err + 4 * u * std::fabs(out) + 1e-7;
        double ulp = p.outputType == DType::BF16  ? std::ldexp(1.0, -8)
                     : p.outputType == DType::F16 ? std::ldexp(1.0, -11)
                                                  : 0;
        err += ulp * (std::fabs(out) + err);
        ref[ci] = out;
        bound[ci] = err;
        sums[ci] = std::fabs(e.alpha * sc) * mag;
        if (c.checkUnroundedTf32)
          refUnrounded[ci] = finish(accUnrounded);
      }

  Operands operands{a.bytes, b.bytes, scale.bytes, bias.bytes, residual.bytes};
  std::vector<uint8_t> cBytes = runOnEmu(*generated, p, operands, cCount);
  if (cBytes.empty())
    return {};

  std::vector<double> got(cCount, 0);
  int reported = 0;
  double worst = 0;
  for (uint64_t bt = 0; bt < p.batch; ++bt)
    for (uint64_t i = 0; i < p.m; ++i)
      for (uint64_t j = 0; j < p.n; ++j) {
        uint64_t ci = bt * p.batchStrideC + i * ldc + j;
        got[ci] = readOut(cBytes, ci, p.outputType);
        double diff = std::fabs(got[ci] - ref[ci]);
        if (sums[ci] > 0)
          worst = std::max(worst, diff / sums[ci]);
        if (!(diff <= bound[ci]) && reported++ < 8)
          ADD_FAILURE() << c.config.describe() << ": C[" << bt << "][" << i
                        << "][" << j << "] = " << got[ci] << ", expected "
                        << ref[ci] << " (bound " << bound[ci] << ")";
        if (c.checkUnroundedTf32 &&
            !(std::fabs(got[ci] - refUnrounded[ci]) <=
              tf32Slack * sums[ci] + bound[ci]) &&
            reported++ < 8)
          ADD_FAILURE() << "tf32 C[" << i << "][" << j << "] = " << got[ci]
                        << ", unrounded reference " << refUnrounded[ci];
      }
  if (std::getenv("KILN_GEMM_TEST_VERBOSE"))
    std::fprintf(stderr,
                 "%s: M=%llu N=%llu K=%llu batch=%llu: worst |err|/S = %.3g, "
                 "NVRTC %.3f s\n",
                 c.config.describe().c_str(), (unsigned long long)p.m,
                 (unsigned long long)p.n, (unsigned long long)p.k,
                 (unsigned long long)p.batch, worst, generated->compileSeconds);
  return got;
}

GemmConfig tensorCore(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wm,
                      uint32_t wn, uint32_t stages, uint32_t split = 1,
                      Family family = Family::MmaF16) {
  GemmConfig c;
  c.family = family;
  c.blockM = bm, c.blockN = bn, c.blockK = bk;
  c.warpM = wm, c.warpN = wn, c.stages = stages, c.splitK = split;
  return c;
}

GemmConfig wgmmaConfig(uint32_t bm, uint32_t bn, uint32_t stages,
                       uint32_t split = 1, Family family = Family::WgmmaF16) {
  GemmConfig c;
  c.family = family;
  c.blockM = bm, c.blockN = bn;
  c.blockK = family == Family::WgmmaTf32 ? 32 : 64;
  c.warpM = 64, c.warpN = bn, c.stages = stages, c.splitK = split;
  return c;
}

GemmConfig tmaConfig(uint32_t bm, uint32_t bn, uint32_t stages,
                     uint32_t split = 1) {
  GemmConfig c = wgmmaConfig(bm, bn, stages, split);
  c.tma = true;
  return c;
}

GemmConfig simt(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn,
                uint32_t stages, uint32_t split = 1) {
  GemmConfig c;
  c.family = Family::SimtF32;
  c.blockM = bm, c.blockN = bn, c.blockK = bk;
  c.threadM = tm, c.threadN = tn, c.stages = stages, c.splitK = split;
  return c;
}

GemmProblem problem(uint64_t m, uint64_t n, uint64_t k, DType in, DType out,
                    Layout la = Layout::RowMajor,
                    Layout lb = Layout::RowMajor) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.inputType = in, p.outputType = out;
  p.layoutA = la, p.layoutB = lb;
  return p;
}

class ContractionKernelsTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    // The emulator's checks: shared reads of unwritten bytes fail, and
    // blocks run in a random order.
    setenv("KILN_EMU_CHECK_SHARED", "1", 0);
    setenv("KILN_EMU_RANDOM_BLOCKS", "7", 0);
  }
  void SetUp() override {
    if (skipWithoutNvrtc())
      GTEST_SKIP() << "NVRTC not available";
  }
};

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
  Case c{problem(20, 24, 40, DType::BF16, DType::F32),
         tensorCore(32, 32, 64, 16, 16, 3),
         {}};
  c.problem.batch = 3;
  c.problem.batchStrideA = 20 * 40;
  c.problem.batchStrideB = 0; // every batch multiplies the same B
  c.problem.batchStrideC = 20 * 24;
  c.epilogue.residual = true;
  c.epilogue.residualType = DType::BF16;
  c.epilogue.activation = Activation::Gelu;
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

// --- sm_90a wgmma (warp-specialised)
// ----------------------------------------------------
//
// The same float64 references and bounds; the emulator runs wgmma, mbarrier
// and the fences. Until it does (it says so when it loads the module) the
// cases skip, and WgmmaCandidatesPassPtxasOnSm90a still checks the PTX.

/// "" when the emu device loads a wgmma kernel, else why not.
std::string emuWgmmaGap() {
  static const std::string gap = [] {
    auto kernels = generateGemm(problem(64, 64, 64, DType::BF16, DType::F32),
                                wgmmaConfig(64, 64, 2), {}, {});
    if (!kernels)
      return kernels.error().message();
    auto device = runtime::createEmuDevice();
    if (!device)
      return device.error().message();
    auto module = (*device)->loadModule(
        {kernels->kernels[0].name, kernels->kernels[0].ptx});
    return module ? std::string() : module.error().message();
  }();
  return gap;
}

#define SKIP_WITHOUT_EMU_WGMMA()                                               \
  if (std::string gap = emuWgmmaGap(); !gap.empty())                           \
  GTEST_SKIP() << "the emulator does not run wgmma yet: " << gap

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
  Case c{problem(20, 24, 70, DType::BF16, DType::F32), wgmmaConfig(64, 64, 3),
         {}};
  c.problem.batch = 3;
  c.problem.batchStrideA = 20 * 70;
  c.problem.batchStrideB = 0;
  c.problem.batchStrideC = 20 * 24;
  c.epilogue.residual = true;
  c.epilogue.residualType = DType::BF16;
  c.epilogue.activation = Activation::Gelu;
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
  Case c{problem(20, 24, 72, DType::BF16, DType::F32), tmaConfig(64, 64, 3),
         {}};
  c.problem.batch = 3;
  c.problem.batchStrideA = 20 * 72;
  c.problem.batchStrideB = 0;
  c.problem.batchStrideC = 20 * 24;
  c.epilogue.residual = true;
  c.epilogue.residualType = DType::BF16;
  c.epilogue.activation = Activation::Gelu;
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

// --- Implicit-GEMM convolution
// ----------------------------------------------------

struct ConvCase {
  ConvProblem problem;
  GemmConfig config;
  Epilogue epilogue;
  uint32_t seed = 3;
};

/// Runs a convolution case against a direct float64 convolution over the
/// ONNX-ordered filter (so the reordering is checked too).
void runConvCase(const ConvCase &cc) {
  const ConvProblem &cp = cc.problem;
  const Epilogue &e = cc.epilogue;
  GemmProblem p = convolutionAsGemm(cp);
  GenerateOptions options;
  options.name = "conv";
  auto generated = generateGemm(p, cc.config, e, options);
  ASSERT_TRUE(bool(generated)) << generated.error().message();
  if (!ptxasPath().empty()) {
    EXPECT_EQ(runPtxas(generated->kernels[0].ptx, "sm_90"), "");
  }

  std::mt19937 rng(cc.seed);
  uint64_t groups = cp.groups, cg = cp.c / groups, og = cp.o / groups;
  uint64_t P = p.conv.p, Q = p.conv.q, M = p.m;
  size_t eb = cp.inputType == DType::F32 ? 4 : 2;
  Tensor x = randomTensor(cp.n * cp.h * cp.w * cp.c, cp.inputType, rng);
  Tensor f = randomTensor(cp.o * cg * cp.kh * cp.kw, cp.inputType, rng);
  Tensor scale, bias, residual;
  uint64_t cCount = M * cp.o;
  auto length = [&](const EpilogueVector &v) {
    return v.kind == EpilogueVector::Kind::PerRow ? M : cp.o;
  };
  if (e.scale.present())
    scale = randomTensor(length(e.scale), e.scale.type, rng, 0.5, 2);
  if (e.bias.present())
    bias = randomTensor(length(e.bias), e.bias.type, rng);
  if (e.residual)
    residual = randomTensor(cCount, e.residualType, rng);

  Operands operands{x.bytes, reorderConvFilter(cp, f.bytes.data(), eb),
                    scale.bytes, bias.bytes, residual.bytes};
  std::vector<uint8_t> cBytes = runOnEmu(*generated, p, operands, cCount);
  ASSERT_FALSE(cBytes.empty());

  int reported = 0;
  bool tf32 = cc.config.family == Family::MmaTf32 ||
              cc.config.family == Family::WgmmaTf32;
  for (uint64_t n = 0; n < cp.n; ++n)
    for (uint64_t py = 0; py < P; ++py)
      for (uint64_t qx = 0; qx < Q; ++qx)
        for (uint64_t o = 0; o < cp.o; ++o) {
          uint64_t g = o / og;
          double acc = 0, mag = 0;
          for (uint64_t c = 0; c < cg; ++c)
            for (uint64_t y = 0; y < cp.kh; ++y)
              for (uint64_t xx = 0; xx < cp.kw; ++xx) {
                int64_t h = int64_t(py * cp.strideH) - cp.padH +
                            int64_t(y * cp.dilationH);
                int64_t w = int64_t(qx * cp.strideW) - cp.padW +
                            int64_t(xx * cp.dilationW);
                if (h < 0 || w < 0 || h >= int64_t(cp.h) || w >= int64_t(cp.w))
                  continue;
                double xv =
                    x.values[((n * cp.h + h) * cp.w + w) * cp.c + g * cg + c];
                double fv = f.values[((o * cg + c) * cp.kh + y) * cp.kw + xx];
                if (tf32) {
                  xv = asTf32(cc.config.family, xv);
                  fv = asTf32(cc.config.family, fv);
                }
                acc += xv * fv;
                mag += std::fabs(xv * fv);
              }
          uint64_t m = (n * P + py) * Q + qx, ci = m * cp.o + o;
          auto pick = [&](const EpilogueVector &v, const Tensor &t,
                          double none) {
            if (!v.present())
              return none;
            return t.values[v.kind == EpilogueVector::Kind::PerRow ? m : o];
          };
          double rs = e.residual ? e.beta * residual.values[ci] : 0;
          auto [ref, bound] = referenceOutput(e, cp.outputType, p.k, acc, mag,
                                              pick(e.scale, scale, 1),
                                              pick(e.bias, bias, 0), rs);
          double got = readOut(cBytes, ci, cp.outputType);
          if (!(std::fabs(got - ref) <= bound) && reported++ < 8)
            ADD_FAILURE() << cc.config.describe() << ": Y[" << n << "][" << py
                          << "][" << qx << "][" << o << "] = " << got
                          << ", expected " << ref << " (bound " << bound << ")";
        }
  if (std::getenv("KILN_GEMM_TEST_VERBOSE"))
    std::fprintf(stderr,
                 "conv %s: M=%llu N=%llu K=%llu groups=%llu, NVRTC %.3f s\n",
                 cc.config.describe().c_str(), (unsigned long long)p.m,
                 (unsigned long long)p.n, (unsigned long long)p.k,
                 (unsigned long long)groups, generated->compileSeconds);
}

ConvProblem conv(uint64_t n, uint64_t h, uint64_t w, uint64_t c, uint64_t o,
                 uint32_t k, uint32_t stride, uint32_t pad,
                 uint32_t dilation = 1, uint32_t groups = 1) {
  ConvProblem p;
  p.n = n, p.h = h, p.w = w, p.c = c, p.o = o;
  p.kh = p.kw = k;
  p.strideH = p.strideW = stride;
  p.padH = p.padW = p.padBottom = p.padRight = pad;
  p.dilationH = p.dilationW = dilation;
  p.groups = groups;
  return p;
}

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

// --- tf32 on sm_90a wgmma
// -----------------------------------------------------
//
// tf32 wgmma reads both operands K-major: an MN-major A or B goes through
// the producer's transposing copy. The references truncate the inputs as
// the tensor core does (the header).

GemmConfig wgmmaTf32(uint32_t bm, uint32_t bn, uint32_t stages,
                     uint32_t split = 1) {
  return wgmmaConfig(bm, bn, stages, split, Family::WgmmaTf32);
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
  Case c{problem(20, 24, 70, DType::F32, DType::F32), wgmmaTf32(64, 64, 3),
         {}};
  c.problem.batch = 3;
  c.problem.batchStrideA = 20 * 70;
  c.problem.batchStrideB = 0;
  c.problem.batchStrideC = 20 * 24;
  c.epilogue.residual = true;
  c.epilogue.residualType = DType::F32;
  c.epilogue.activation = Activation::Gelu;
  runCase(c);
  // The 128x128 tile (two consumers, setmaxnreg) with B stored [N][K].
  runCase({problem(130, 136, 40, DType::F32, DType::F32, Layout::RowMajor,
                   Layout::ColMajor),
           wgmmaTf32(128, 128, 2),
           {}});
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

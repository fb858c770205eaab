//===- ContractionTestSupport.h - GEMM/conv kernel cases on emu -*- C++ -*-===//
//
// What ContractionKernelsTest.cpp (GEMMs, configs, ptxas) and
// ConvolutionKernelsTest.cpp (implicit-GEMM convolutions) share: host
// number formats, the case runners (NVRTC, ptxas, the emu device, the
// float64 references and their bounds, which ContractionKernelsTest.cpp's
// header states), config helpers and the fixture.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_CONTRACTIONTESTSUPPORT_H
#define KILN_TEST_UNITTESTS_CONTRACTIONTESTSUPPORT_H

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

namespace kiln::contraction_test {

using namespace kiln;
using namespace kiln::contraction;
using runtime::Dim3;


// --- Host-side number formats
// -------------------------------------------------

inline uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float floatOf(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/// Round to nearest even, for finite values.
inline uint16_t toBf16(float f) {
  uint32_t b = bitsOf(f);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}
inline float fromBf16(uint16_t h) { return floatOf(uint32_t(h) << 16); }
inline uint16_t toF16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline float fromF16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
/// cvt.rna.tf32.f32: round to 10 explicit mantissa bits, ties away.
inline float toTf32(float f) { return floatOf((bitsOf(f) + 0x1000u) & 0xFFFFE000u); }
/// The inputs as the family's tensor cores see them: rounded to nearest
/// by both tf32 families. wgmma's tensor core itself would keep only an
/// fp32 operand's upper 19 bits (truncation; the emulator does that), so
/// the wgmma kernel rounds each stage in shared memory first
/// (GemmWgmma.cuh roundStageTf32); a truncating kernel misses these
/// references by ~2^-11 of each product, far outside their bounds.
inline double asTf32(Family, double v) {
  return toTf32(static_cast<float>(v));
}

/// The fp8 operand types (e4m3fn, e5m2).
inline bool isFp8Type(DType type) {
  return type == DType::F8E4M3FN || type == DType::F8E5M2;
}
/// The value of an e4m3fn (no infinities; S.1111.111 is NaN) or e5m2
/// (IEEE-like) byte, decoded from the formats' definitions.
inline double decodeFp8(uint8_t byte, DType type) {
  bool e5m2 = type == DType::F8E5M2;
  int mantissaBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  int exponent = (byte & 0x7F) >> mantissaBits;
  int mantissa = byte & ((1 << mantissaBits) - 1);
  double sign = (byte & 0x80) ? -1 : 1;
  if (e5m2 && exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  if (!e5m2 && exponent == 15 && mantissa == 7)
    return NAN;
  if (exponent == 0) // subnormal
    return sign * std::ldexp(mantissa, 1 - bias - mantissaBits);
  return sign * std::ldexp((1 << mantissaBits) + mantissa,
                           exponent - bias - mantissaBits);
}

/// Host values of one tensor and their device bytes.
struct Tensor {
  std::vector<double> values;
  std::vector<uint8_t> bytes;
  DType type = DType::F32;
};

inline Tensor randomTensor(size_t count, DType type, std::mt19937 &rng,
                    double low = -1, double high = 1) {
  std::uniform_real_distribution<float> dist(static_cast<float>(low),
                                             static_cast<float>(high));
  Tensor t;
  t.type = type;
  t.values.resize(count);
  if (isFp8Type(type)) {
    // Every finite byte whose value lies in [low, high], equally likely:
    // the subnormals and every binade of the range are drawn.
    std::uniform_int_distribution<int> byteDist(0, 255);
    t.bytes.resize(count);
    for (size_t i = 0; i < count; ++i) {
      double v;
      uint8_t byte;
      do {
        byte = static_cast<uint8_t>(byteDist(rng));
        v = decodeFp8(byte, type);
      } while (!std::isfinite(v) || v < low || v > high);
      t.values[i] = v;
      t.bytes[i] = byte;
    }
    return t;
  }
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

inline double readOut(const std::vector<uint8_t> &bytes, size_t i, DType type) {
  if (isFp8Type(type))
    return decodeFp8(bytes[i], type);
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

inline bool skipWithoutNvrtc() {
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
  /// With epilogue.aux (a custom body returning `acc` for C): the second
  /// output is relu(acc) in epilogue.auxType, checked against relu of the
  /// reference (relu is 1-Lipschitz: C's bound, plus the aux rounding).
};

inline double activate(Activation act, double v, const Epilogue &e) {
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

/// The relative rounding of storing in `type`: half an ulp of bf16 (2^-8)
/// or f16 (2^-11), none for f32.
inline double outputRounding(DType type) {
  return type == DType::BF16       ? std::ldexp(1.0, -8)
         : type == DType::F16      ? std::ldexp(1.0, -11)
         : type == DType::F8E4M3FN ? std::ldexp(1.0, -4)
         : type == DType::F8E5M2   ? std::ldexp(1.0, -3)
                                   : 0;
}

/// A float8 output's largest finite value (what a saturating conversion
/// clamps to) and half its smallest subnormal (the absolute rounding near
/// zero); 0 for the other types.
inline double fp8Max(DType type) {
  return type == DType::F8E4M3FN ? 448.0 : type == DType::F8E5M2 ? 57344.0 : 0;
}
inline double fp8HalfSubnormal(DType type) {
  return type == DType::F8E4M3FN ? std::ldexp(1.0, -10)
         : type == DType::F8E5M2 ? std::ldexp(1.0, -17)
                                 : 0;
}

/// The exact epilogue of one output and the bound on the kernel's error
/// (see the file comment): `acc` and `mag` are the exact sum and the sum
/// of |products| over `k` terms; sc, bi, rs the scale, bias and
/// beta * residual that apply.
inline std::pair<double, double> referenceOutput(const Epilogue &e, DType outType,
                                          uint64_t k, double acc, double mag,
                                          double sc, double bi, double rs) {
  const double u = std::ldexp(1.0, -24);
  double out = activate(e.activation, acc * e.alpha * sc + bi + rs, e);
  double err = (k + 8) * u *
               (std::fabs(e.alpha * sc) * mag + std::fabs(bi) + std::fabs(rs));
  if (e.activation != Activation::None)
    err = 1.13 * err + 4 * u * std::fabs(out) + 1e-7;
  double ulp = outputRounding(outType);
  err += ulp * (std::fabs(out) + err);
  return {out, err};
}

/// The device bytes of a case's operands.
struct Operands {
  std::vector<uint8_t> a, b, scale, bias, residual, zeroPointB;
};

/// Runs the kernels on a fresh emu device; C's bytes (empty on failure).
/// With `aux`, a second output of `auxType` (the "aux" parameter) is
/// allocated like C and its bytes returned there.
inline std::vector<uint8_t> runOnEmu(const GemmKernels &generated,
                              const GemmProblem &p, const Operands &in,
                              uint64_t cCount,
                              std::vector<uint8_t> *aux = nullptr,
                              DType auxType = DType::BF16) {
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
  uint32_t outBytes = static_cast<uint32_t>(runtime::dtypeSize(p.outputType));
  // C starts as a NaN-ish pattern so an element the kernel misses shows up.
  std::vector<uint8_t> cInit(cCount * outBytes, 0xFF);
  runtime::DevicePtr dA = upload(in.a), dB = upload(in.b), dC = upload(cInit);
  std::vector<uint8_t> auxInit(aux ? cCount * (auxType == DType::F32 ? 4 : 2)
                                   : 0,
                               0xFF);
  runtime::DevicePtr dAux = aux ? upload(auxInit) : 0;
  runtime::DevicePtr dScale = in.scale.empty() ? 0 : upload(in.scale);
  runtime::DevicePtr dBias = in.bias.empty() ? 0 : upload(in.bias);
  runtime::DevicePtr dResidual = in.residual.empty() ? 0 : upload(in.residual);
  runtime::DevicePtr dZeroPointB =
      in.zeroPointB.empty() ? 0 : upload(in.zeroPointB);
  // The workspace starts as NaNs: split-K must not read a partial no split
  // wrote. The semaphores start at zero, as the runtime leaves them.
  runtime::DevicePtr dWorkspace =
      generated.workspaceBytes
          ? upload(std::vector<uint8_t>(generated.workspaceBytes, 0xFF))
          : 0;
  runtime::DevicePtr dSemaphores =
      generated.semaphoreCount
          ? upload(std::vector<uint8_t>(generated.semaphoreCount * 4, 0))
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
      else if (n == "aux" && aux)
        params.addU64(dAux);
      else if (n == "scale")
        params.addU64(dScale);
      else if (n == "bias")
        params.addU64(dBias);
      else if (n == "residual")
        params.addU64(dResidual);
      else if (n == "zeroPointB")
        params.addU64(dZeroPointB);
      else if (n == "workspace")
        params.addU64(dWorkspace);
      else if (n == "semaphores")
        params.addU64(dSemaphores);
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
  // Split-K's last blocks reset every semaphore, ready for the next launch.
  if (generated.semaphoreCount) {
    std::vector<uint32_t> semaphores(generated.semaphoreCount, 1);
    EXPECT_FALSE(device.copyToHost(semaphores.data(), dSemaphores,
                                   semaphores.size() * 4));
    for (size_t i = 0; i < semaphores.size(); ++i)
      EXPECT_EQ(semaphores[i], 0u) << "split-K semaphore " << i;
  }
  std::vector<uint8_t> cBytes(cInit.size());
  EXPECT_FALSE(device.copyToHost(cBytes.data(), dC, cBytes.size()));
  if (aux) {
    aux->assign(auxInit.size(), 0);
    EXPECT_FALSE(device.copyToHost(aux->data(), dAux, aux->size()));
  }
  return cBytes;
}

/// Runs the case; every output element is checked. Returns the emulated
/// result for further checks (empty on failure).
inline std::vector<double> runCase(const Case &c, const std::string &name = "k") {
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
  // The 8-bit float families read B in its own type.
  Tensor b =
      randomTensor(total(bBatches, p.batchStrideB, bSpan),
                   isFp8Type(p.inputType) ? p.inputTypeB : p.inputType, rng);
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
  // The unrounded reference's slack (the header): rna.
  double tf32Slack = 1e-3;
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
        // QuantizeLinear's division (one f32 rounding), then a float8
        // output's saturation and rounding (relative, and absolute among
        // the subnormals).
        if (e.outputScale != 1.0f) {
          out /= e.outputScale;
          err = err / e.outputScale + u * std::fabs(out);
        }
        if (double max = fp8Max(p.outputType))
          out = std::clamp(out, -max, max);
        double ulp = outputRounding(p.outputType);
        err += ulp * (std::fabs(out) + err) + fp8HalfSubnormal(p.outputType);
        ref[ci] = out;
        bound[ci] = err;
        sums[ci] = std::fabs(e.alpha * sc) * mag;
        if (c.checkUnroundedTf32)
          refUnrounded[ci] = finish(accUnrounded);
      }

  Operands operands{a.bytes, b.bytes, scale.bytes, bias.bytes, residual.bytes};
  std::vector<uint8_t> auxBytes;
  std::vector<uint8_t> cBytes =
      runOnEmu(*generated, p, operands, cCount, e.aux ? &auxBytes : nullptr,
               e.auxType);
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
        if (e.aux) {
          double want = std::max(ref[ci], 0.0);
          double ulp = outputRounding(e.auxType);
          double auxBound = bound[ci] + ulp * (want + bound[ci]);
          double auxGot = readOut(auxBytes, ci, e.auxType);
          if (!(std::fabs(auxGot - want) <= auxBound) && reported++ < 8)
            ADD_FAILURE() << c.config.describe() << ": aux[" << bt << "]["
                          << i << "][" << j << "] = " << auxGot
                          << ", expected " << want << " (bound " << auxBound
                          << ")";
        }
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

inline GemmConfig tensorCore(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wm,
                      uint32_t wn, uint32_t stages, uint32_t split = 1,
                      Family family = Family::MmaF16) {
  GemmConfig c;
  c.family = family;
  c.blockM = bm, c.blockN = bn, c.blockK = bk;
  c.warpM = wm, c.warpN = wn, c.stages = stages, c.splitK = split;
  return c;
}

inline GemmConfig wgmmaConfig(uint32_t bm, uint32_t bn, uint32_t stages,
                       uint32_t split = 1, Family family = Family::WgmmaF16) {
  GemmConfig c;
  c.family = family;
  c.blockM = bm, c.blockN = bn;
  c.blockK = family == Family::WgmmaTf32                              ? 32
             : family == Family::WgmmaF8 || family == Family::WgmmaS8 ? 128
                                                                      : 64;
  c.warpM = 64, c.warpN = bn, c.stages = stages, c.splitK = split;
  return c;
}

inline GemmConfig tmaConfig(uint32_t bm, uint32_t bn, uint32_t stages,
                     uint32_t split = 1) {
  GemmConfig c = wgmmaConfig(bm, bn, stages, split);
  c.tma = true;
  return c;
}

inline GemmConfig simt(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn,
                uint32_t stages, uint32_t split = 1) {
  GemmConfig c;
  c.family = Family::SimtF32;
  c.blockM = bm, c.blockN = bn, c.blockK = bk;
  c.threadM = tm, c.threadN = tn, c.stages = stages, c.splitK = split;
  return c;
}

inline GemmProblem problem(uint64_t m, uint64_t n, uint64_t k, DType in, DType out,
                    Layout la = Layout::RowMajor,
                    Layout lb = Layout::RowMajor) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.inputType = in, p.outputType = out;
  p.layoutA = la, p.layoutB = lb;
  return p;
}

/// Batch 3 of [20 x k] times one broadcast B (batch stride 0) into
/// [20 x 24], then a residual of `residualType` and gelu: the encoder
/// FFN's shape, with every batch stride in play.
inline Case batchedResidualGelu(uint64_t k, DType in, GemmConfig config,
                         DType residualType) {
  Case c{problem(20, 24, k, in, DType::F32), config, {}};
  c.problem.batch = 3;
  c.problem.batchStrideA = 20 * k;
  c.problem.batchStrideB = 0; // every batch multiplies the same B
  c.problem.batchStrideC = 20 * 24;
  c.epilogue.residual = true;
  c.epilogue.residualType = residualType;
  c.epilogue.activation = Activation::Gelu;
  return c;
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

// --- sm_90a wgmma (warp-specialised)
// ----------------------------------------------------
//
// The same float64 references and bounds; the emulator runs wgmma, mbarrier
// and the fences. Until it does (it says so when it loads the module) the
// cases skip, and WgmmaCandidatesPassPtxasOnSm90a still checks the PTX.

/// "" when the emu device loads a wgmma kernel, else why not.
inline std::string emuWgmmaGap() {
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
inline void runConvCase(const ConvCase &cc) {
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
  size_t eb = cp.inputType == DType::F32 ? 4 : isFp8Type(cp.inputType) ? 1 : 2;
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

inline ConvProblem conv(uint64_t n, uint64_t h, uint64_t w, uint64_t c, uint64_t o,
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

// --- tf32 on sm_90a wgmma
// -----------------------------------------------------
//
// tf32 wgmma reads both operands K-major: an MN-major A or B goes through
// the producer's transposing copy. The consumers round each stage to
// tf32 before the tensor core reads it; the references round the inputs
// the same way (the header).

inline GemmConfig wgmmaTf32(uint32_t bm, uint32_t bn, uint32_t stages,
                     uint32_t split = 1) {
  return wgmmaConfig(bm, bn, stages, split, Family::WgmmaTf32);
}

} // namespace kiln::contraction_test

#endif // KILN_TEST_UNITTESTS_CONTRACTIONTESTSUPPORT_H

//===- EmuFp8ConvertTest.cpp - cvt to and from fp8 pairs on the emulator -===//
//
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b (a to the upper byte, b to
// the lower) and cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a (byte i to half i), the
// conversions an fp8 kernel quantizes and dequantizes with. The expected
// codes come from a brute-force search, not from a rounding formula: the
// nearest of all finite codes of the input's sign, the even code on a tie,
// +-max beyond the range (.satfinite: infinities too), 0x7f for NaN.
// Dequantizing is exact, so every one of the 65536 pairs must give the
// f16 of fp8Value (Fp8Reference.h), NaN as 0x7fff. Inputs/fp8_quantize.ptx
// is nvcc's own spelling of both (cuda_fp8.h's intrinsics, a per-tensor
// scale in front).
//
//===----------------------------------------------------------------------===//

#include "../PtxasUtils.h"
#include "EmuDirectTestUtils.h"
#include "Fp8Reference.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// The code cvt.rn.satfinite must give for `x`, by search.
uint8_t expectedCode(float x, bool e5m2) {
  if (std::isnan(x))
    return 0x7f;
  uint8_t best = 0;
  double bestDistance = std::numeric_limits<double>::infinity();
  double ax = std::fabs(static_cast<double>(x));
  for (unsigned code = 0; code < 0x80; ++code) {
    double v = fp8Value(static_cast<uint8_t>(code), e5m2);
    if (!std::isfinite(v))
      continue;
    // Past the largest finite value (infinity included) the largest wins:
    // nearest or, with .satfinite, saturated (and 1e30 - v would round).
    double distance = ax >= v ? ax - v : v - ax;
    if (ax > 60000)
      distance = -v;
    if (distance < bestDistance ||
        (distance == bestDistance && (code & 1) == 0)) {
      best = static_cast<uint8_t>(code);
      bestDistance = distance;
    }
  }
  return best | (std::signbit(x) ? 0x80 : 0);
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Inputs: every fp8 value and the midpoints around each (exactly, and a
/// hair to either side), the range's ends, infinities, NaN, zeros and
/// random f32 across the range.
std::vector<float> packInputs(bool e5m2) {
  std::vector<double> values;
  for (unsigned code = 0; code < 0x80; ++code)
    if (isFinite(static_cast<uint8_t>(code), e5m2))
      values.push_back(fp8Value(static_cast<uint8_t>(code), e5m2));
  std::sort(values.begin(), values.end());
  std::vector<float> in;
  for (size_t i = 0; i < values.size(); ++i) {
    in.push_back(static_cast<float>(values[i]));
    if (i + 1 < values.size()) {
      float mid = static_cast<float>((values[i] + values[i + 1]) / 2);
      in.push_back(mid);
      in.push_back(std::nextafter(mid, 0.0f));
      in.push_back(std::nextafter(mid, 1e30f));
    }
  }
  double max = values.back();
  for (float x : {float(max * 1.0625), float(max * 1.2), 1e30f, INFINITY, NAN,
                  0.0f, 1e-30f, std::numeric_limits<float>::denorm_min()})
    in.push_back(x);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(e5m2 ? -20 : -12,
                                                  e5m2 ? 17 : 10);
  for (int i = 0; i < 2000; ++i)
    in.push_back(static_cast<float>(std::exp2(exponent(rng))));
  size_t n = in.size();
  for (size_t i = 0; i < n; ++i)
    in.push_back(-in[i]);
  if (in.size() % 2)
    in.push_back(1.0f);
  return in;
}

void checkPack(bool e5m2) {
  const char *type = e5m2 ? "e5m2x2" : "e4m3x2";
  std::string body = "\tmov.b32 \t%f1, %r1;\n\tmov.b32 \t%f2, %r2;\n"
                     "\tcvt.rn.satfinite." +
                     std::string(type) +
                     ".f32 \t%rs1, %f1, %f2;\n"
                     "\tcvt.u32.u16 \t%r20, %rs1;\n";
  if (!kiln::testing::ptxasPath().empty()) {
    EXPECT_EQ(kiln::testing::runPtxas(wordKernel(body, 2, 1), "sm_90"), "");
  }
  std::vector<float> inputs = packInputs(e5m2);
  std::vector<uint32_t> in;
  for (float x : inputs)
    in.push_back(bitsOf(x));
  std::vector<uint32_t> out = runWords(body, 2, 1, in);
  ASSERT_EQ(out.size(), in.size() / 2);
  unsigned wrong = 0;
  for (size_t t = 0; t < out.size() && wrong < 10; ++t) {
    float a = inputs[2 * t], b = inputs[2 * t + 1];
    uint32_t want =
        (uint32_t{expectedCode(a, e5m2)} << 8) | expectedCode(b, e5m2);
    if (out[t] != want) {
      ADD_FAILURE() << type << "(" << a << ", " << b << ") = 0x" << std::hex
                    << out[t] << ", want 0x" << want << std::dec;
      ++wrong;
    }
  }
}

TEST(EmuFp8ConvertTest, PackE4m3x2NearestEvenSatfinite) { checkPack(false); }
TEST(EmuFp8ConvertTest, PackE5m2x2NearestEvenSatfinite) { checkPack(true); }

// Every 16-bit input: the two halves are the bytes' values as f16.
TEST(EmuFp8ConvertTest, UnpackEveryPairToF16x2) {
  for (bool e5m2 : {false, true}) {
    const char *type = e5m2 ? "e5m2x2" : "e4m3x2";
    std::string body = "\tcvt.u16.u32 \t%rs1, %r1;\n"
                       "\tcvt.rn.f16x2." +
                       std::string(type) + " \t%r20, %rs1;\n";
    if (!kiln::testing::ptxasPath().empty()) {
      EXPECT_EQ(kiln::testing::runPtxas(wordKernel(body, 1, 1), "sm_90"), "");
    }
    std::vector<uint32_t> in(65536);
    for (uint32_t i = 0; i < 65536; ++i)
      in[i] = i;
    std::vector<uint32_t> out = runWords(body, 1, 1, in);
    ASSERT_EQ(out.size(), in.size());
    unsigned wrong = 0;
    for (uint32_t i = 0; i < 65536 && wrong < 10; ++i) {
      uint32_t want = 0;
      for (unsigned h = 0; h < 2; ++h) {
        double v = fp8Value(static_cast<uint8_t>(i >> (8 * h)), e5m2);
        uint16_t half;
        if (std::isnan(v)) {
          half = 0x7fff;
        } else {
          _Float16 f = static_cast<_Float16>(v); // exact
          std::memcpy(&half, &f, 2);
        }
        want |= uint32_t{half} << (16 * h);
      }
      if (out[i] != want) {
        ADD_FAILURE() << type << " 0x" << std::hex << i << " -> 0x" << out[i]
                      << ", want 0x" << want << std::dec;
        ++wrong;
      }
    }
  }
}

// nvcc's PTX for a per-tensor-scaled quantize to e4m3 pairs and back
// (Inputs/fp8_quantize.cu): q[i] packs x * scale in the low byte and
// y * scale in the high one (f32 products, as the kernel rounds them).
TEST(EmuFp8ConvertTest, NvccQuantizeKernel) {
  std::ifstream file(std::string(KILN_RUNTIME_TEST_INPUTS) +
                     "/fp8_quantize.ptx");
  std::string ptx((std::istreambuf_iterator<char>(file)), {});
  ASSERT_NE(ptx.find("cvt.rn.satfinite.e4m3x2.f32"), std::string::npos);
  for (float scale : {1.0f, 0.75f, 40.0f}) {
    std::vector<float> inputs = packInputs(false);
    const uint32_t n = static_cast<uint32_t>(inputs.size() / 2);
    Buffer in = Buffer::of(inputs);
    Buffer q = Buffer::zeros<uint16_t>(n);
    Buffer back = Buffer::zeros<uint32_t>(n);
    ASSERT_EQ(runPtx(ptx, "quantize", {(n + 127) / 128, 1, 1}, {128, 1, 1},
                     {&in, &q, &back}, {bitsOf(scale), n}),
              "<success>");
    std::vector<uint16_t> codes = q.as<uint16_t>();
    std::vector<uint32_t> halves = back.as<uint32_t>();
    unsigned wrong = 0;
    for (uint32_t i = 0; i < n && wrong < 10; ++i) {
      float x = inputs[2 * i] * scale, y = inputs[2 * i + 1] * scale;
      uint8_t lo = expectedCode(x, false), hi = expectedCode(y, false);
      uint32_t wantHalves = 0;
      for (unsigned h = 0; h < 2; ++h) {
        double v = fp8Value(h ? hi : lo, false);
        uint16_t half = 0x7fff;
        if (!std::isnan(v)) {
          _Float16 f = static_cast<_Float16>(v);
          std::memcpy(&half, &f, 2);
        }
        wantHalves |= uint32_t{half} << (16 * h);
      }
      if (codes[i] != ((hi << 8) | lo) || halves[i] != wantHalves) {
        ADD_FAILURE() << "scale " << scale << ", (" << x << ", " << y
                      << "): q 0x" << std::hex << codes[i] << " want 0x"
                      << ((hi << 8) | lo) << ", f16x2 0x" << halves[i]
                      << " want 0x" << wantHalves << std::dec;
        ++wrong;
      }
    }
  }
}

// The forms not emulated are parse errors naming the instruction.
TEST(EmuFp8ConvertTest, UnmodelledFormsRefused) {
  for (const char *bad : {"\tcvt.rn.e4m3x2.f32 \t%rs1, %f1, %f2;\n",
                          "\tcvt.rn.satfinite.relu.e4m3x2.f32 \t%rs1, %f1, "
                          "%f2;\n",
                          "\tcvt.rz.satfinite.e5m2x2.f32 \t%rs1, %f1, %f2;\n",
                          "\tcvt.rn.satfinite.e4m3x2.f16x2 \t%rs1, %r1;\n",
                          "\tcvt.rn.f32.e4m3x2 \t%f1, %rs1;\n",
                          "\tmov.b16 \t%rs1, %rs2;\n\tadd.e4m3x2 \t%rs1, "
                          "%rs1, %rs2;\n"}) {
    Expected<emu::Module> module = emu::parsePtx(wordKernel(bad, 1, 0));
    ASSERT_FALSE(module) << bad;
    EXPECT_THAT(module.error().message(), HasSubstr("PTX line")) << bad;
  }
}

} // namespace

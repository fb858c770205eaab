//===- EmuInterpreterTest.cpp - The PTX emulator, one family at a time ----===//
//
// Each test runs a hand-written kernel on the emu device and checks its
// results against values computed here, independently, in C++.
//
//===----------------------------------------------------------------------===//

#include "emu/PtxInterpreter.h"

#include "EmuTestUtils.h"
#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <chrono>
#include <cmath>
#include <cstdio>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// A kernel `k(a, b, out)` over one block of `n` threads: thread i loads
/// a[i] and b[i] (32-bit) into %r1/%r2 (and %f1/%f2 as floats), runs `body`
/// which writes results 0..count-1 through `st.global.b32 [%rd9+4*k]`.
std::string elementwiseKernel(const std::string &body, unsigned count) {
  return ptxHeader() + R"(.visible .entry k(
	.param .u64 .ptr .align 1 k_param_0,
	.param .u64 .ptr .align 1 k_param_1,
	.param .u64 .ptr .align 1 k_param_2
)
{
	.reg .pred 	%p<8>;
	.reg .b16 	%rs<8>;
	.reg .b32 	%r<40>;
	.reg .f32 	%f<40>;
	.reg .b64 	%rd<20>;
	.reg .f64 	%fd<8>;

	ld.param.b64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.param.b64 	%rd3, [k_param_1];
	cvta.to.global.u64 	%rd4, %rd3;
	ld.param.b64 	%rd5, [k_param_2];
	cvta.to.global.u64 	%rd6, %rd5;
	mov.u32 	%r30, %tid.x;
	mul.wide.u32 	%rd7, %r30, 4;
	add.s64 	%rd8, %rd2, %rd7;
	ld.global.b32 	%r1, [%rd8];
	add.s64 	%rd8, %rd4, %rd7;
	ld.global.b32 	%r2, [%rd8];
	mov.b32 	%f1, %r1;
	mov.b32 	%f2, %r2;
	mul.wide.u32 	%rd10, %r30, )" +
         std::to_string(4 * count) + R"(;
	add.s64 	%rd9, %rd6, %rd10;
)" + body + "\tret;\n}\n";
}

template <typename T>
std::vector<T> runElementwise(const std::string &body, unsigned count,
                              const std::vector<T> &a,
                              const std::vector<T> &b) {
  Buffer bufA = Buffer::of(a), bufB = Buffer::of(b);
  Buffer out = Buffer::zeros<T>(a.size() * count);
  std::string result =
      runPtx(elementwiseKernel(body, count), "k", {1, 1, 1},
             {static_cast<uint32_t>(a.size()), 1, 1}, {&bufA, &bufB, &out});
  EXPECT_EQ(result, "<success>");
  return out.as<T>();
}

std::string storeAll(unsigned count, const char *prefix = "%r") {
  std::string s;
  for (unsigned k = 0; k < count; ++k)
    s += "\tst.global.b32 [%rd9+" + std::to_string(4 * k) + "], " + prefix +
         std::to_string(10 + k) + ";\n";
  return s;
}

TEST(EmuInterpreterTest, IntegerArithmetic) {
  std::vector<int32_t> a = {7, -7, 123456789, INT32_MIN, 0, 65535, -1, 100};
  std::vector<int32_t> b = {3, 3, -1000, -1, 5, 16, 31, 0};
  const unsigned count = 20;
  std::string body = R"(	add.s32 %r10, %r1, %r2;
	sub.s32 %r11, %r1, %r2;
	mul.lo.s32 %r12, %r1, %r2;
	mul.hi.s32 %r13, %r1, %r2;
	mad.lo.s32 %r14, %r1, %r2, 5;
	min.s32 %r15, %r1, %r2;
	max.u32 %r16, %r1, %r2;
	abs.s32 %r17, %r1;
	neg.s32 %r18, %r1;
	and.b32 %r19, %r1, %r2;
	or.b32 %r20, %r1, %r2;
	xor.b32 %r21, %r1, %r2;
	not.b32 %r22, %r1;
	and.b32 %r31, %r2, 31;
	shl.b32 %r23, %r1, %r31;
	shr.s32 %r24, %r1, %r31;
	shr.u32 %r25, %r1, %r31;
	popc.b32 %r26, %r1;
	clz.b32 %r27, %r1;
	bfe.u32 %r28, %r1, 4, 8;
	mov.u32 %r29, %r28;
)" + storeAll(count);
  std::vector<int32_t> got = runElementwise(body, count, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    int32_t x = a[i], y = b[i];
    uint32_t ux = static_cast<uint32_t>(x), uy = static_cast<uint32_t>(y);
    uint32_t s = uy & 31;
    std::vector<int32_t> want = {
        static_cast<int32_t>(ux + uy),
        static_cast<int32_t>(ux - uy),
        static_cast<int32_t>(ux * uy),
        static_cast<int32_t>((static_cast<int64_t>(x) * y) >> 32),
        static_cast<int32_t>(ux * uy + 5),
        std::min(x, y),
        static_cast<int32_t>(std::max(ux, uy)),
        x == INT32_MIN ? INT32_MIN : std::abs(x),
        static_cast<int32_t>(0u - ux),
        x & y,
        x | y,
        x ^ y,
        ~x,
        static_cast<int32_t>(ux << s),
        x >> s,
        static_cast<int32_t>(ux >> s),
        __builtin_popcount(ux),
        ux == 0 ? 32 : __builtin_clz(ux),
        static_cast<int32_t>((ux >> 4) & 0xff),
        static_cast<int32_t>((ux >> 4) & 0xff),
    };
    for (unsigned k = 0; k < count; ++k)
      EXPECT_EQ(got[i * count + k], want[k]) << "lane " << i << " op " << k;
  }
}

TEST(EmuInterpreterTest, LocalMemoryIsPerThread) {
  // Every thread writes its two inputs to its own .local scratch and reads
  // them back swapped; a local memory shared between threads would mix the
  // lanes' values (all lanes store before any loads).
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int32_t> b = {-1, -2, -3, -4, -5, -6, -7, -8};
  std::string body = R"(	.local .align 4 .b8 depot[8];
	.reg .b64 %SPL;
	mov.b64 %SPL, depot;
	st.local.b32 [%SPL], %r1;
	st.local.b32 [%SPL+4], %r2;
	ld.local.b32 %r10, [%SPL+4];
	ld.local.b32 %r11, [%SPL];
)" + storeAll(2);
  std::vector<int32_t> got = runElementwise(body, 2, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(got[2 * i], b[i]) << "lane " << i;
    EXPECT_EQ(got[2 * i + 1], a[i]) << "lane " << i;
  }
}

TEST(EmuInterpreterTest, LocalAccessOutOfBoundsIsReported) {
  std::vector<int32_t> a = {1}, b = {2};
  std::string body = R"(	.local .align 4 .b8 depot[8];
	.reg .b64 %SPL;
	mov.b64 %SPL, depot;
	st.local.b32 [%SPL+8], %r1;
)";
  Buffer bufA = Buffer::of(a), bufB = Buffer::of(b);
  Buffer out = Buffer::zeros<int32_t>(1);
  std::string result = runPtx(elementwiseKernel(body, 1), "k", {1, 1, 1},
                              {1, 1, 1}, {&bufA, &bufB, &out});
  EXPECT_THAT(result, HasSubstr("out-of-bounds local store of 4 bytes at offset 8"));
}

TEST(EmuInterpreterTest, CarryChainsAndFunnelShifts) {
  // A 64-bit product built from 32-bit halves with mad.lo.cc/madc.hi (as
  // libdevice's argument reduction does), add.cc/addc, and funnel shifts.
  std::vector<uint32_t> a = {0xffffffffu, 0x80000001u, 12345u, 0u, 7u};
  std::vector<uint32_t> b = {0xffffffffu, 0x80000001u, 67890u, 5u, 0xfffffff0u};
  std::string body = R"(	mad.lo.cc.u32 %r10, %r1, %r2, %r2;
	madc.hi.u32 %r11, %r1, %r2, 0;
	add.cc.u32 %r12, %r1, %r2;
	addc.u32 %r13, %r1, 0;
	and.b32 %r31, %r2, 63;
	shf.l.wrap.b32 %r14, %r1, %r2, %r31;
	shf.r.wrap.b32 %r15, %r1, %r2, %r31;
	shf.l.clamp.b32 %r16, %r1, %r2, %r31;
	shf.r.clamp.b32 %r17, %r1, %r2, %r31;
)" + storeAll(8);
  std::vector<uint32_t> got = runElementwise(body, 8, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    uint64_t x = a[i], y = b[i];
    uint64_t low = (x * y) & 0xffffffffu;
    uint64_t lowSum = low + y; // mad.lo.cc: carry out of lo(x*y) + y
    uint32_t carry1 = static_cast<uint32_t>(lowSum >> 32);
    uint32_t hi = static_cast<uint32_t>(((x * y) >> 32) + carry1);
    uint64_t sum = x + y;
    uint32_t carry2 = static_cast<uint32_t>(sum >> 32);
    uint64_t pair = (y << 32) | x;
    uint32_t n = static_cast<uint32_t>(y & 63);
    uint32_t wrap = n & 31, clamp = std::min<uint32_t>(n, 32);
    std::vector<uint32_t> want = {
        static_cast<uint32_t>(lowSum), hi, static_cast<uint32_t>(sum),
        static_cast<uint32_t>(x + carry2),
        static_cast<uint32_t>((pair << wrap) >> 32), static_cast<uint32_t>(pair >> wrap),
        static_cast<uint32_t>((pair << clamp) >> 32), static_cast<uint32_t>(pair >> clamp)};
    for (unsigned k = 0; k < 8; ++k)
      EXPECT_EQ(got[i * 8 + k], want[k]) << "lane " << i << " op " << k;
  }
}

TEST(EmuInterpreterTest, WideAnd64BitIntegers) {
  std::vector<int32_t> a = {-3, 40000, 2147483647, 5};
  std::vector<int32_t> b = {7, 40000, 2, -9};
  const unsigned count = 8;
  // Results are 64-bit pairs stored as two words.
  std::string body = R"(	mul.wide.s32 %rd11, %r1, %r2;
	mul.wide.u32 %rd12, %r1, %r2;
	cvt.s64.s32 %rd13, %r1;
	cvt.s64.s32 %rd14, %r2;
	mad.lo.s64 %rd15, %rd13, %rd14, -100;
	div.s64 %rd16, %rd15, %rd14;
	mov.b64 {%r10, %r11}, %rd11;
	mov.b64 {%r12, %r13}, %rd12;
	mov.b64 {%r14, %r15}, %rd15;
	mov.b64 {%r16, %r17}, %rd16;
)" + storeAll(count);
  std::vector<int32_t> got = runElementwise(body, count, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t wide = static_cast<int64_t>(a[i]) * b[i];
    uint64_t uwide = static_cast<uint64_t>(static_cast<uint32_t>(a[i])) *
                     static_cast<uint32_t>(b[i]);
    int64_t madded = wide - 100;
    int64_t quotient = madded / b[i];
    int64_t words[4] = {wide, static_cast<int64_t>(uwide), madded, quotient};
    for (unsigned w = 0; w < 4; ++w) {
      int64_t value = static_cast<int64_t>(
          static_cast<uint32_t>(got[i * count + 2 * w]) |
          (static_cast<uint64_t>(static_cast<uint32_t>(
               got[i * count + 2 * w + 1]))
           << 32));
      EXPECT_EQ(value, words[w]) << "lane " << i << " result " << w;
    }
  }
}

TEST(EmuInterpreterTest, FloatArithmetic) {
  float nan = std::nanf("");
  std::vector<float> a = {1.5f, -2.25f, 3.0f, 0.0f, nan, 1e-3f, -0.0f, 10.0f};
  std::vector<float> b = {0.5f, 4.0f, -3.0f, 2.0f, 1.0f, 7.0f, 0.0f, 0.1f};
  const unsigned count = 14;
  std::string body = R"(	add.rn.f32 %f10, %f1, %f2;
	sub.rn.f32 %f11, %f1, %f2;
	mul.rn.f32 %f12, %f1, %f2;
	fma.rn.f32 %f13, %f1, %f2, %f1;
	div.rn.f32 %f14, %f1, %f2;
	neg.f32 %f15, %f1;
	abs.f32 %f16, %f1;
	min.f32 %f17, %f1, %f2;
	max.f32 %f18, %f1, %f2;
	max.NaN.f32 %f19, %f1, %f2;
	copysign.f32 %f20, %f1, %f2;
	sqrt.rn.f32 %f21, %f2;
	rcp.rn.f32 %f22, %f2;
	add.rn.sat.f32 %f23, %f1, %f2;
)" + storeAll(count, "%f");
  std::vector<float> got = runElementwise(body, count, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    float x = a[i], y = b[i];
    float fmax = std::isnan(x) ? y : std::isnan(y) ? x : std::max(x, y);
    float fmin = std::isnan(x) ? y : std::isnan(y) ? x : std::min(x, y);
    if (x == 0 && y == 0) { // -0 < +0
      fmax = std::signbit(x) ? y : x;
      fmin = std::signbit(x) ? x : y;
    }
    float sum = x + y;
    float sat = std::isnan(sum) ? 0.0f : std::min(std::max(sum, 0.0f), 1.0f);
    std::vector<float> want = {x + y,
                               x - y,
                               x * y,
                               std::fma(x, y, x),
                               x / y,
                               -x,
                               std::fabs(x),
                               fmin,
                               fmax,
                               (std::isnan(x) || std::isnan(y)) ? nan : fmax,
                               std::copysign(y, x),
                               std::sqrt(y),
                               1.0f / y,
                               sat};
    for (unsigned k = 0; k < count; ++k) {
      float g = got[i * count + k];
      if (std::isnan(want[k]))
        EXPECT_TRUE(std::isnan(g)) << "lane " << i << " op " << k;
      else
        EXPECT_EQ(std::memcmp(&g, &want[k], 4), 0)
            << "lane " << i << " op " << k << ": " << g << " vs " << want[k];
    }
  }
}

TEST(EmuInterpreterTest, ApproximateFunctionsAndDirectedRounding) {
  std::vector<float> a = {0.5f, -1.25f, 3.0f, 0.1f};
  std::vector<float> b = {1.0f / 3.0f, 2.1f, 0.7f, 1e-4f};
  const unsigned count = 9;
  std::string body = R"(	ex2.approx.ftz.f32 %f10, %f1;
	lg2.approx.f32 %f11, %f2;
	rsqrt.approx.f32 %f12, %f2;
	sin.approx.f32 %f13, %f1;
	cos.approx.f32 %f14, %f1;
	tanh.approx.f32 %f15, %f1;
	fma.rm.f32 %f16, %f2, %f2, %f1;
	fma.rp.f32 %f17, %f2, %f2, %f1;
	fma.rn.f32 %f18, %f2, %f2, %f1;
)" + storeAll(count, "%f");
  std::vector<float> got = runElementwise(body, count, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = b[i];
    double want[6] = {std::exp2(x), std::log2(y), 1 / std::sqrt(y),
                      std::sin(x),  std::cos(x),  std::tanh(x)};
    for (unsigned k = 0; k < 6; ++k)
      EXPECT_NEAR(got[i * count + k], want[k], 2e-6 * std::fabs(want[k]))
          << "lane " << i << " op " << k;
    // y*y + x is inexact in f32 for these inputs: rounding down and up
    // bracket the exact value one ulp apart, and nearest is one of them.
    double exact = y * y + x; // exact in double for f32 inputs
    float down = got[i * count + 6], up = got[i * count + 7],
          nearest = got[i * count + 8];
    EXPECT_LE(down, exact) << "lane " << i;
    EXPECT_GE(up, exact) << "lane " << i;
    EXPECT_EQ(std::nextafter(down, INFINITY), up) << "lane " << i;
    EXPECT_TRUE(nearest == down || nearest == up) << "lane " << i;
  }
}

TEST(EmuInterpreterTest, ComparisonsAndSelects) {
  float nan = std::nanf("");
  std::vector<float> a = {1.0f, 2.0f, nan, -1.0f};
  std::vector<float> b = {2.0f, 2.0f, 1.0f, nan};
  const unsigned count = 8;
  std::string body = R"(	setp.lt.f32 %p1, %f1, %f2;
	selp.b32 %r10, 1, 0, %p1;
	setp.ltu.f32 %p1, %f1, %f2;
	selp.b32 %r11, 1, 0, %p1;
	setp.ne.f32 %p1, %f1, %f2;
	selp.b32 %r12, 1, 0, %p1;
	setp.neu.f32 %p1, %f1, %f2;
	selp.b32 %r13, 1, 0, %p1;
	setp.nan.f32 %p1, %f1, %f2;
	selp.b32 %r14, 1, 0, %p1;
	setp.ge.f32 %p1|%p2, %f1, %f2;
	selp.b32 %r15, 1, 0, %p2;
	setp.gt.s32 %p3, %r1, %r2;
	selp.b32 %r16, 1, 0, %p3;
	setp.hi.u32 %p3, %r1, %r2;
	not.pred %p4, %p3;
	selp.b32 %r17, 1, 0, %p4;
)" + storeAll(count);
  Buffer bufA = Buffer::of(a), bufB = Buffer::of(b);
  Buffer out = Buffer::zeros<int32_t>(a.size() * count);
  ASSERT_EQ(runPtx(elementwiseKernel(body, count), "k", {1, 1, 1}, {4, 1, 1},
                   {&bufA, &bufB, &out}),
            "<success>");
  std::vector<int32_t> got = out.as<int32_t>();
  for (size_t i = 0; i < a.size(); ++i) {
    float x = a[i], y = b[i];
    bool unordered = std::isnan(x) || std::isnan(y);
    int32_t xi, yi;
    std::memcpy(&xi, &x, 4);
    std::memcpy(&yi, &y, 4);
    std::vector<int32_t> want = {
        !unordered && x < y,
        unordered || x < y,
        !unordered && x != y,
        unordered || x != y,
        unordered,
        !(!unordered && x >= y),
        xi > yi,
        !(static_cast<uint32_t>(xi) > static_cast<uint32_t>(yi)),
    };
    for (unsigned k = 0; k < count; ++k)
      EXPECT_EQ(got[i * count + k], want[k]) << "lane " << i << " op " << k;
  }
}

TEST(EmuInterpreterTest, Conversions) {
  std::vector<float> a = {2.5f, -2.5f, 3.7f, -3.7f, 3e9f, std::nanf(""),
                          1e-8f, 65504.0f};
  std::vector<float> b(a.size(), 0.0f);
  const unsigned count = 12;
  std::string body = R"(	cvt.rni.s32.f32 %r10, %f1;
	cvt.rzi.s32.f32 %r11, %f1;
	cvt.rmi.s32.f32 %r12, %f1;
	cvt.rpi.s32.f32 %r13, %f1;
	cvt.rzi.u32.f32 %r14, %f1;
	cvt.rn.f16.f32 %rs1, %f1;
	cvt.u32.u16 %r15, %rs1;
	cvt.f32.f16 %f2, %rs1;
	mov.b32 %r16, %f2;
	cvt.rn.bf16.f32 %rs2, %f1;
	cvt.u32.u16 %r17, %rs2;
	cvt.sat.f32.f32 %f3, %f1;
	mov.b32 %r18, %f3;
	cvt.f64.f32 %fd1, %f1;
	add.rn.f64 %fd2, %fd1, %fd1;
	cvt.rn.f32.f64 %f4, %fd2;
	mov.b32 %r19, %f4;
	cvt.rni.f32.f32 %f5, %f1;
	mov.b32 %r20, %f5;
	cvt.s16.s32 %rs3, %r11;
	cvt.s32.s16 %r21, %rs3;
)" + storeAll(count);
  Buffer bufA = Buffer::of(a), bufB = Buffer::of(b);
  Buffer out = Buffer::zeros<int32_t>(a.size() * count);
  ASSERT_EQ(runPtx(elementwiseKernel(body, count), "k", {1, 1, 1},
                   {static_cast<uint32_t>(a.size()), 1, 1},
                   {&bufA, &bufB, &out}),
            "<success>");
  std::vector<int32_t> got = out.as<int32_t>();
  auto toInt = [](double x, double rounded) -> int32_t {
    if (std::isnan(x))
      return 0;
    return static_cast<int32_t>(std::min(std::max(rounded, -2147483648.0),
                                         2147483647.0));
  };
  auto bits = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i;
  };
  // Known half and bf16 encodings of the inputs (round to nearest even; a
  // NaN becomes the hardware's canonical 0x7FFF).
  const int32_t half[] = {0x4100, 0xC100, 0x4366, 0xC366,
                          0x7C00, 0x7FFF, 0x0000, 0x7BFF};
  const float halfValue[] = {2.5f, -2.5f, 3.69921875f, -3.69921875f,
                             INFINITY, NAN, 0.0f, 65504.0f};
  const int32_t bf16[] = {0x4020, 0xC020, 0x406D, 0xC06D,
                          0x4F33, 0x7FFF, 0x322C, 0x4780};
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i];
    const int32_t *g = &got[i * count];
    EXPECT_EQ(g[0], toInt(x, std::nearbyint(x))) << i;
    EXPECT_EQ(g[1], toInt(x, std::trunc(x))) << i;
    EXPECT_EQ(g[2], toInt(x, std::floor(x))) << i;
    EXPECT_EQ(g[3], toInt(x, std::ceil(x))) << i;
    uint32_t wantU = std::isnan(x) || x <= 0 ? 0
                     : x >= 4294967295.0     ? 0xffffffffu
                                             : static_cast<uint32_t>(x);
    EXPECT_EQ(static_cast<uint32_t>(g[4]), wantU) << i;
    EXPECT_EQ(g[5], half[i]) << i;
    if (std::isnan(halfValue[i]))
      EXPECT_EQ(g[6] & 0x7fc00000, 0x7fc00000) << i;
    else
      EXPECT_EQ(g[6], bits(halfValue[i])) << i;
    EXPECT_EQ(g[7], bf16[i]) << i;
    float sat = std::isnan(x) ? 0.0f
                              : static_cast<float>(std::min(
                                    std::max(x, 0.0), 1.0));
    EXPECT_EQ(g[8], bits(sat)) << i;
    if (!std::isnan(x)) {
      EXPECT_EQ(g[9], bits(static_cast<float>(2 * x))) << i;
      EXPECT_EQ(g[10], bits(std::nearbyint(a[i]))) << i;
    }
    EXPECT_EQ(g[11], static_cast<int16_t>(toInt(x, std::trunc(x)))) << i;
  }
}

TEST(EmuInterpreterTest, NarrowAndVectorMemory) {
  // Thread i: ld.s8 / ld.u8 / ld.s16 of bytes, then v4 copy and v2 store.
  std::string ptx = ptxHeader() + R"(.visible .entry k(
	.param .u64 k_in,
	.param .u64 k_out
)
{
	.reg .b16 %rs<3>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [k_in];
	ld.param.u64 %rd2, [k_out];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 16;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	ld.global.s8 %r2, [%rd4];
	ld.global.u8 %r3, [%rd4+1];
	ld.global.s16 %rs1, [%rd4+2];
	cvt.s32.s16 %r4, %rs1;
	ld.global.v4.b32 {%r5, %r6, %r7, %r8}, [%rd4];
	st.global.v2.b32 [%rd5], {%r2, %r3};
	st.global.b32 [%rd5+8], %r4;
	st.global.b8 [%rd5+12], %r8;
	st.global.b16 [%rd5+14], %r7;
	ret;
}
)";
  std::vector<uint8_t> bytes(64);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(0x80 + i * 7);
  Buffer in{bytes};
  Buffer out = Buffer::zeros<uint8_t>(64);
  ASSERT_EQ(runPtx(ptx, "k", {1, 1, 1}, {4, 1, 1}, {&in, &out}), "<success>");
  for (unsigned t = 0; t < 4; ++t) {
    const uint8_t *src = bytes.data() + 16 * t;
    const uint8_t *dst = out.bytes.data() + 16 * t;
    int32_t words[3];
    std::memcpy(words, dst, 12);
    EXPECT_EQ(words[0], static_cast<int8_t>(src[0])) << t;
    EXPECT_EQ(words[1], src[1]) << t;
    int16_t s16;
    std::memcpy(&s16, src + 2, 2);
    EXPECT_EQ(words[2], s16) << t;
    EXPECT_EQ(dst[12], src[12]) << t;
    EXPECT_EQ(dst[14], src[8]) << t;
    EXPECT_EQ(dst[15], src[9]) << t;
  }
}

/// Every lane of one warp shuffles lane * 10 in all four modes; the first
/// half of the warp also runs a shuffle confined to its 16 lanes.
TEST(EmuInterpreterTest, ShuffleModes) {
  std::string ptx = ptxHeader() + R"(.visible .entry k(.param .u64 k_out)
{
	.reg .pred %p<5>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [k_out];
	mov.u32 %r1, %laneid;
	mul.lo.s32 %r2, %r1, 10;
	mov.u32 %r7, -1;
	shfl.sync.up.b32 %r3|%p1, %r2, 3, 0, -1;
	shfl.sync.down.b32 %r4|%p2, %r2, 5, 31, -1;
	shfl.sync.bfly.b32 %r5, %r2, 6, 31, -1;
	shfl.sync.idx.b32 %r6, %r2, 17, 31, -1;
	setp.lt.u32 %p4, %r1, 16;
	@%p4 shfl.sync.bfly.b32 %r7|%p3, %r2, 1, 15, 65535;
	selp.b32 %r8, 1, 0, %p1;
	selp.b32 %r9, 1, 0, %p2;
	mul.wide.u32 %rd2, %r1, 32;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.b32 [%rd3], {%r3, %r4, %r5, %r6};
	st.global.b32 [%rd3+16], %r8;
	st.global.b32 [%rd3+20], %r9;
	st.global.b32 [%rd3+24], %r7;
	ret;
}
)";
  Buffer out = Buffer::zeros<int32_t>(32 * 8);
  ASSERT_EQ(runPtx(ptx, "k", {1, 1, 1}, {32, 1, 1}, {&out}), "<success>");
  std::vector<int32_t> got = out.as<int32_t>();
  for (int lane = 0; lane < 32; ++lane) {
    const int32_t *g = &got[lane * 8];
    // Out-of-range sources leave the lane's own value and clear the
    // predicate.
    bool upOk = lane - 3 >= 0, downOk = lane + 5 <= 31;
    EXPECT_EQ(g[0], (upOk ? lane - 3 : lane) * 10) << lane;
    EXPECT_EQ(g[1], (downOk ? lane + 5 : lane) * 10) << lane;
    EXPECT_EQ(g[2], (lane ^ 6) * 10) << lane;
    EXPECT_EQ(g[3], 170) << lane;
    EXPECT_EQ(g[4], upOk) << lane;
    EXPECT_EQ(g[5], downOk) << lane;
    EXPECT_EQ(g[6], lane < 16 ? (lane ^ 1) * 10 : -1) << lane;
  }
}

/// Sums 256 values per block with the pattern gpu.all_reduce lowers to:
/// warp shuffles, one partial per warp in shared memory, a barrier, and
/// the first warp reducing the partials.
TEST(EmuInterpreterTest, BlockReductionWithSharedMemoryAndBarriers) {
  std::string ptx = ptxHeader() + R"(.visible .entry k(
	.param .u64 .ptr .align 1 k_in,
	.param .u64 .ptr .align 1 k_out
)
.maxntid 256, 1, 1
{
	.reg .pred %p<4>;
	.reg .b32 %r<20>;
	.reg .f32 %f<12>;
	.reg .b64 %rd<12>;
	.shared .align 4 .b8 partials[32];
	ld.param.u64 %rd1, [k_in];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u64 %rd3, [k_out];
	cvta.to.global.u64 %rd4, %rd3;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mad.lo.s32 %r4, %r2, %r3, %r1;
	mul.wide.u32 %rd5, %r4, 4;
	add.s64 %rd6, %rd2, %rd5;
	ld.global.f32 %f1, [%rd6];
	shfl.sync.bfly.b32 %f2, %f1, 16, 31, -1;
	add.rn.f32 %f1, %f1, %f2;
	shfl.sync.bfly.b32 %f2, %f1, 8, 31, -1;
	add.rn.f32 %f1, %f1, %f2;
	shfl.sync.bfly.b32 %f2, %f1, 4, 31, -1;
	add.rn.f32 %f1, %f1, %f2;
	shfl.sync.bfly.b32 %f2, %f1, 2, 31, -1;
	add.rn.f32 %f1, %f1, %f2;
	shfl.sync.bfly.b32 %f2, %f1, 1, 31, -1;
	add.rn.f32 %f1, %f1, %f2;
	and.b32 %r5, %r1, 31;
	setp.ne.s32 %p1, %r5, 0;
	mov.u64 %rd7, partials;
	@%p1 bra $L__skip_store;
	shr.u32 %r6, %r1, 5;
	mul.wide.u32 %rd8, %r6, 4;
	add.s64 %rd9, %rd7, %rd8;
	st.shared.f32 [%rd9], %f1;
$L__skip_store:
	bar.sync 0;
	setp.ge.u32 %p2, %r1, 8;
	@%p2 bra $L__done;
	cvta.shared.u64 %rd10, %rd7;
	mul.wide.u32 %rd8, %r1, 4;
	add.s64 %rd10, %rd10, %rd8;
	ld.f32 %f3, [%rd10];
	shfl.sync.bfly.b32 %f4, %f3, 4, 7, 255;
	add.rn.f32 %f3, %f3, %f4;
	shfl.sync.bfly.b32 %f4, %f3, 2, 7, 255;
	add.rn.f32 %f3, %f3, %f4;
	shfl.sync.bfly.b32 %f4, %f3, 1, 7, 255;
	add.rn.f32 %f3, %f3, %f4;
	setp.ne.s32 %p3, %r1, 0;
	@%p3 bra $L__done;
	mul.wide.u32 %rd11, %r2, 4;
	add.s64 %rd11, %rd4, %rd11;
	st.global.f32 [%rd11], %f3;
$L__done:
	ret;
}
)";
  const unsigned blocks = 24;
  std::vector<float> values(blocks * 256);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>((i * 37) % 101) - 50.0f; // exact sums
  Buffer in = Buffer::of(values), out = Buffer::zeros<float>(blocks);
  ASSERT_EQ(runPtx(ptx, "k", {blocks, 1, 1}, {256, 1, 1}, {&in, &out}),
            "<success>");
  std::vector<float> got = out.as<float>();
  for (unsigned b = 0; b < blocks; ++b) {
    double sum = 0;
    for (unsigned t = 0; t < 256; ++t)
      sum += values[b * 256 + t];
    EXPECT_EQ(got[b], sum) << "block " << b;
  }
}

/// Lane i loops i times (divergent trip counts); after the loop the warp
/// must reconverge for a full-warp shuffle.
TEST(EmuInterpreterTest, DivergentLoopReconverges) {
  std::string ptx = ptxHeader() + R"(.visible .entry k(.param .u64 k_out)
{
	.reg .pred %p<3>;
	.reg .b32 %r<10>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [k_out];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, 0;
	mov.u32 %r3, 0;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 bra $L__after;
$L__loop:
	add.s32 %r2, %r2, %r3;
	add.s32 %r3, %r3, 1;
	setp.lt.u32 %p2, %r3, %r1;
	@%p2 bra $L__loop;
$L__after:
	shfl.sync.idx.b32 %r4, %r2, 31, 31, -1;
	mul.wide.u32 %rd2, %r1, 8;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v2.b32 [%rd3], {%r2, %r4};
	ret;
}
)";
  Buffer out = Buffer::zeros<int32_t>(64);
  ASSERT_EQ(runPtx(ptx, "k", {1, 1, 1}, {32, 1, 1}, {&out}), "<success>");
  std::vector<int32_t> got = out.as<int32_t>();
  for (int lane = 0; lane < 32; ++lane) {
    int want = lane * (lane - 1) / 2; // 0 + 1 + ... + (lane - 1)
    EXPECT_EQ(got[2 * lane], lane == 0 ? 0 : want) << lane;
    EXPECT_EQ(got[2 * lane + 1], 31 * 30 / 2) << lane;
  }
}

TEST(EmuInterpreterTest, ModuleGlobalsAndTwoDimensionalBlocks) {
  std::string ptx = ptxHeader() + R"(.global .align 4 .b32 table[4] = {5, 6, 7, 8};
.visible .entry k(.param .u64 k_out)
{
	.reg .b32 %r<12>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [k_out];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %tid.y;
	mov.u32 %r3, %ctaid.y;
	mov.u32 %r4, %ntid.x;
	mov.u64 %rd2, table;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.u32 %r5, [%rd4];
	mad.lo.s32 %r6, %r2, %r4, %r1;
	mad.lo.s32 %r7, %r3, 8, %r6;
	mad.lo.s32 %r8, %r2, 100, %r5;
	mad.lo.s32 %r8, %r3, 1000, %r8;
	mul.wide.u32 %rd5, %r7, 4;
	add.s64 %rd6, %rd1, %rd5;
	st.global.u32 [%rd6], %r8;
	ret;
}
)";
  Buffer out = Buffer::zeros<int32_t>(16);
  ASSERT_EQ(runPtx(ptx, "k", {1, 2, 1}, {4, 2, 1}, {&out}), "<success>");
  std::vector<int32_t> got = out.as<int32_t>();
  for (int by = 0; by < 2; ++by)
    for (int ty = 0; ty < 2; ++ty)
      for (int tx = 0; tx < 4; ++tx)
        EXPECT_EQ(got[by * 8 + ty * 4 + tx], 1000 * by + 100 * ty + 5 + tx);
}

//===----------------------------------------------------------------------===//
// What hardware would not report
//===----------------------------------------------------------------------===//

const char *kIndexedStore = R"(.visible .entry oob(
	.param .u64 oob_out,
	.param .u32 oob_stride
)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [oob_out];
	ld.param.u32 %r1, [oob_stride];
	mov.u32 %r2, %tid.x;
	mul.lo.s32 %r3, %r2, %r1;
	mul.wide.u32 %rd2, %r3, 1;
	add.s64 %rd3, %rd1, %rd2;
	st.global.b32 [%rd3], %r2;
	ret;
}
)";

TEST(EmuInterpreterTest, OutOfBoundsStoreIsReported) {
  Buffer out = Buffer::zeros<int32_t>(8); // 32 bytes; thread 8 writes at 32
  std::string error = runPtx(ptxHeader() + kIndexedStore, "oob", {1, 1, 1},
                             {12, 1, 1}, {&out}, {4});
  EXPECT_THAT(error, HasSubstr("kernel 'oob', block (0,0,0), thread (8,0,0), "
                               "PTX line 18 (st.global.b32): out-of-bounds "
                               "global store of 4 bytes: 0x"));
  EXPECT_THAT(error, HasSubstr(" is 0 bytes past the end of the 32-byte "
                               "allocation at 0x"));
}

TEST(EmuInterpreterTest, MisalignedAccessIsReported) {
  Buffer out = Buffer::zeros<int32_t>(64);
  std::string error = runPtx(ptxHeader() + kIndexedStore, "oob", {1, 1, 1},
                             {4, 1, 1}, {&out}, {6});
  // Thread 0 writes at offset 0, thread 1 at offset 6.
  EXPECT_THAT(error, HasSubstr("thread (1,0,0), PTX line 18 (st.global.b32): "
                               "misaligned global store of 4 bytes at 0x"));
}

TEST(EmuInterpreterTest, BarrierReachedByPartOfTheBlockIsReported) {
  std::string ptx = ptxHeader() + R"(.visible .entry half_barrier()
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p1, %r1, 40;
	@%p1 bra $L__out;
	bar.sync 0;
$L__out:
	ret;
}
)";
  EXPECT_EQ(runPtx(ptx, "half_barrier", {2, 1, 1}, {64, 1, 1}, {}),
            "kernel 'half_barrier', block (0,0,0), thread (0,0,0), PTX line "
            "12 (bar.sync): barrier 0 is reached by only part of the block: "
            "thread (40,0,0) has exited");
}

TEST(EmuInterpreterTest, ShuffleWaitsForMembersOnAnotherPath) {
  // The if-else's join comes before its else branch in the code, so lanes
  // 0-15 (then) reach the shfl.sync while lanes 16-31 are still at the else
  // branch further down. Hardware makes the arrived lanes wait for the
  // members; the emulator must run the else lanes first, not fault. Each
  // lane then holds its xor-1 neighbour's value: 1 below lane 16, 2 above.
  std::string ptx = ptxHeader() + R"(.visible .entry join_first(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<5>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p1, %r1, 16;
	@%p1 bra $L__else;
	mov.u32 %r2, 1;
$L__join:
	shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r3;
	ret;
$L__else:
	mov.u32 %r2, 2;
	bra.uni $L__join;
}
)";
  Buffer out = Buffer::zeros<uint32_t>(32);
  ASSERT_EQ(runPtx(ptx, "join_first", {1, 1, 1}, {32, 1, 1}, {&out}),
            "<success>");
  std::vector<uint32_t> got = out.as<uint32_t>();
  for (unsigned lane = 0; lane < 32; ++lane)
    EXPECT_EQ(got[lane], lane < 16 ? 1u : 2u) << "lane " << lane;
}

TEST(EmuInterpreterTest, ShuffleWithAbsentMemberIsReported) {
  std::string ptx = ptxHeader() + R"(.visible .entry bad_shfl()
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p1, %r1, 16;
	@%p1 bra $L__out;
	shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
$L__out:
	ret;
}
)";
  EXPECT_EQ(runPtx(ptx, "bad_shfl", {1, 1, 1}, {32, 1, 1}, {}),
            "kernel 'bad_shfl', block (0,0,0), thread (0,0,0), PTX line 12 "
            "(shfl.sync.bfly.b32): shfl.sync member mask 0xffffffff names "
            "lane 16, which is not at this instruction");
}

TEST(EmuInterpreterTest, LaunchChecks) {
  std::string ptx = ptxHeader() + kIndexedStore;
  Buffer out = Buffer::zeros<int32_t>(8);
  EXPECT_EQ(runPtx(ptx, "oob", {1, 1, 1}, {4, 1, 1}, {&out}),
            "kernel 'oob': 8 bytes of parameters passed, the kernel takes 12");
  EXPECT_EQ(runPtx(ptx, "oob", {1, 1, 1}, {2048, 1, 1}, {&out}, {4}),
            "kernel 'oob': 2048 threads per block (1 to 1024 allowed)");
  EXPECT_EQ(runPtx(ptx, "nope", {1, 1, 1}, {1, 1, 1}, {&out}, {4}),
            "emu: kernel 'nope' is not in its module's PTX");
}

/// Not a check: prints the emulator's speed on one host thread, in
/// thread-instructions per second, on an arithmetic loop.
TEST(EmuInterpreterTest, ThroughputOnOneThread) {
  std::string ptx = ptxHeader() + R"(.visible .entry spin(.param .u64 spin_out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [spin_out];
	mov.u32 %r1, %tid.x;
	cvt.rn.f32.u32 %f1, %r1;
	mov.f32 %f2, 0f00000000;
	mov.u32 %r2, 0;
$L__loop:
	fma.rn.f32 %f2, %f1, 0f3F000000, %f2;
	add.s32 %r2, %r2, 1;
	setp.lt.u32 %p1, %r2, 200;
	@%p1 bra $L__loop;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.f32 [%rd3], %f2;
	ret;
}
)";
  Expected<emu::Module> module = emu::parsePtx(ptx);
  ASSERT_TRUE(module.hasValue()) << errorOf(module);
  std::vector<float> out(256 * 64);
  std::vector<emu::MemoryRegion> memory = {
      {1ull << 40, out.size() * 4, reinterpret_cast<uint8_t *>(out.data())}};
  PackedParams params;
  params.addU64(1ull << 40);
  emu::LaunchSpec spec;
  spec.grid = {64, 1, 1};
  spec.block = {256, 1, 1};
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &memory;
  spec.workers = 1;
  emu::LaunchStats stats;
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(errorOf(emu::runKernel(module->kernels[0], spec, &stats)),
            "<success>");
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  EXPECT_EQ(stats.threadInstructions, 64ull * 256 * (5 + 4 * 200 + 4));
  EXPECT_EQ(out[255], 255 * 0.5f * 200);
  std::printf("emu throughput: %.1f M thread-instructions/s on one thread "
              "(%llu in %.3f s)\n",
              stats.threadInstructions / seconds / 1e6,
              static_cast<unsigned long long>(stats.threadInstructions),
              seconds);
}


/// Not a check either: the same on a loop of global loads, shared stores
/// and shared loads (the memory path's per-lane checks).
TEST(EmuInterpreterTest, MemoryThroughputOnOneThread) {
  std::string ptx = ptxHeader() + R"(.visible .entry mem(.param .u64 mem_out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<6>;
	.shared .align 4 .b8 buf[1024];
	ld.param.u64 %rd1, [mem_out];
	mov.u32 %r1, %tid.x;
	shl.b32 %r3, %r1, 2;
	mov.u32 %r4, buf;
	add.s32 %r5, %r4, %r3;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	mov.f32 %f2, 0f00000000;
	mov.u32 %r2, 0;
$L__loop:
	ld.global.f32 %f1, [%rd3];
	st.shared.f32 [%r5], %f1;
	ld.shared.f32 %f3, [%r5];
	add.rn.f32 %f2, %f2, %f3;
	add.s32 %r2, %r2, 1;
	setp.lt.u32 %p1, %r2, 100;
	@%p1 bra $L__loop;
	st.global.f32 [%rd3], %f2;
	ret;
}
)";
  Expected<emu::Module> module = emu::parsePtx(ptx);
  ASSERT_TRUE(module.hasValue()) << errorOf(module);
  std::vector<float> out(256, 1.0f);
  std::vector<emu::MemoryRegion> memory = {
      {1ull << 40, out.size() * 4, reinterpret_cast<uint8_t *>(out.data())}};
  PackedParams params;
  params.addU64(1ull << 40);
  emu::LaunchSpec spec;
  spec.grid = {64, 1, 1};
  spec.block = {256, 1, 1};
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &memory;
  spec.workers = 1;
  emu::LaunchStats stats;
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(errorOf(emu::runKernel(module->kernels[0], spec, &stats)),
            "<success>");
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  EXPECT_EQ(stats.threadInstructions, 64ull * 256 * (9 + 7 * 100 + 2));
  std::printf("emu memory throughput: %.1f M thread-instructions/s on one "
              "thread (%llu in %.3f s)\n",
              stats.threadInstructions / seconds / 1e6,
              static_cast<unsigned long long>(stats.threadInstructions),
              seconds);
}

} // namespace

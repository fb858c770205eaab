//===- EmuTensorCoreTest.cpp - mma.sync, ldmatrix, cp.async on the emulator
//===//
//
// The fragment layouts are written here from the PTX ISA's tables (section
// "Matrix fragments for mma.m16n8k*"), separately from the emulator's code;
// the products use small integers, so the expected D = A * B + C is exact.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtils.h"

#include <gmock/gmock.h>

#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// f16 and bf16 encodings of small integers (exact in both).
uint16_t halfOf(int v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
uint16_t bf16Of(int v) {
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16); // exact for small integers
}
uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}
float asFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int aValue(int m, int k) { return (m * 3 + k * 5) % 7 - 3; }
int bValue(int k, int n) { return (k * 2 + n * 3) % 5 - 2; }
int cValue(int m, int n) { return (m + 2 * n) % 9 - 4; }

enum class Kind { F16, BF16 };

/// Runs one mma over a warp whose registers are loaded from `regs` (per
/// lane, `perLane` words) and returns the D registers (per lane, `numD`).
std::vector<uint32_t> runMma(const std::string &instruction, unsigned numA,
                             unsigned numB, unsigned numC, unsigned numD,
                             const std::vector<uint32_t> &regs) {
  // %r1.. hold A, then B, then C; D goes to %r20...
  auto list = [](unsigned first, unsigned count) {
    std::string s = "{";
    for (unsigned i = 0; i < count; ++i)
      s += (i ? ", %r" : "%r") + std::to_string(first + i);
    return s + "}";
  };
  std::string body = "\t" + instruction + " \t" + list(20, numD) + ", " +
                     list(1, numA) + ", " + list(1 + numA, numB) + ", " +
                     list(1 + numA + numB, numC) + ";\n";
  return runWords(body, numA + numB + numC, numD, regs, 32);
}

TEST(EmuTensorCoreTest, MmaM16N8K16F32Accumulate) {
  for (Kind kind : {Kind::F16, Kind::BF16}) {
    auto enc = kind == Kind::F16 ? halfOf : bf16Of;
    std::vector<uint32_t> regs(32 * 10);
    for (unsigned lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      uint32_t *r = &regs[lane * 10];
      // A: a0..a7 in four registers, two per register (low half first).
      for (int i = 0; i < 8; ++i) {
        int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
        int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        r[i / 2] |= static_cast<uint32_t>(enc(aValue(row, col)))
                    << (16 * (i & 1));
      }
      // B: b0..b3 in two registers.
      for (int i = 0; i < 4; ++i) {
        int row = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);
        r[4 + i / 2] |= static_cast<uint32_t>(enc(bValue(row, g)))
                        << (16 * (i & 1));
      }
      // C: c0..c3, one f32 each.
      for (int i = 0; i < 4; ++i)
        r[6 + i] = floatBits(
            static_cast<float>(cValue(i < 2 ? g : g + 8, t * 2 + (i & 1))));
    }
    std::string type = kind == Kind::F16 ? "f16" : "bf16";
    std::vector<uint32_t> d = runMma("mma.sync.aligned.m16n8k16.row.col.f32." +
                                         type + "." + type + ".f32",
                                     4, 2, 4, 4, regs);
    ASSERT_EQ(d.size(), 32u * 4);
    for (unsigned lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i) {
        int m = i < 2 ? g : g + 8, n = t * 2 + (i & 1);
        int want = cValue(m, n);
        for (int k = 0; k < 16; ++k)
          want += aValue(m, k) * bValue(k, n);
        EXPECT_EQ(asFloat(d[lane * 4 + i]), static_cast<float>(want))
            << type << " lane " << lane << " d" << i;
      }
    }
  }
}

TEST(EmuTensorCoreTest, MmaM16N8K16F16Accumulate) {
  std::vector<uint32_t> regs(32 * 8);
  for (unsigned lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    uint32_t *r = &regs[lane * 8];
    for (int i = 0; i < 8; ++i) {
      int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
      int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      r[i / 2] |= static_cast<uint32_t>(halfOf(aValue(row, col)))
                  << (16 * (i & 1));
    }
    for (int i = 0; i < 4; ++i) {
      int row = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);
      r[4 + i / 2] |= static_cast<uint32_t>(halfOf(bValue(row, g)))
                      << (16 * (i & 1));
    }
    // C: c0..c3 as two f16x2 registers.
    for (int i = 0; i < 4; ++i)
      r[6 + i / 2] |= static_cast<uint32_t>(
                          halfOf(cValue(i < 2 ? g : g + 8, t * 2 + (i & 1))))
                      << (16 * (i & 1));
  }
  std::vector<uint32_t> d = runMma(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 4, 2, 2, 2, regs);
  ASSERT_EQ(d.size(), 32u * 2);
  for (unsigned lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      int m = i < 2 ? g : g + 8, n = t * 2 + (i & 1);
      int want = cValue(m, n);
      for (int k = 0; k < 16; ++k)
        want += aValue(m, k) * bValue(k, n);
      EXPECT_EQ((d[lane * 2 + i / 2] >> (16 * (i & 1))) & 0xffff, halfOf(want))
          << "lane " << lane << " d" << i;
    }
  }
}

TEST(EmuTensorCoreTest, MmaM16N8K8) {
  // f16 inputs: A in two registers, B in one.
  {
    std::vector<uint32_t> regs(32 * 7);
    for (unsigned lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      uint32_t *r = &regs[lane * 7];
      for (int i = 0; i < 4; ++i)
        r[i / 2] |= static_cast<uint32_t>(
                        halfOf(aValue(i < 2 ? g : g + 8, t * 2 + (i & 1))))
                    << (16 * (i & 1));
      for (int i = 0; i < 2; ++i)
        r[2] |= static_cast<uint32_t>(halfOf(bValue(t * 2 + i, g))) << (16 * i);
      for (int i = 0; i < 4; ++i)
        r[3 + i] = floatBits(
            static_cast<float>(cValue(i < 2 ? g : g + 8, t * 2 + (i & 1))));
    }
    std::vector<uint32_t> d = runMma(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 2, 1, 4, 4, regs);
    ASSERT_EQ(d.size(), 32u * 4);
    for (unsigned lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i) {
        int m = i < 2 ? g : g + 8, n = t * 2 + (i & 1);
        int want = cValue(m, n);
        for (int k = 0; k < 8; ++k)
          want += aValue(m, k) * bValue(k, n);
        EXPECT_EQ(asFloat(d[lane * 4 + i]), static_cast<float>(want))
            << "f16 lane " << lane << " d" << i;
      }
    }
  }
  // tf32 inputs: one f32 per element, of which the low 13 bits are
  // ignored (set here to junk that would change the result if read).
  {
    std::vector<uint32_t> regs(32 * 10);
    auto tf32 = [](int v, unsigned junk) {
      return floatBits(static_cast<float>(v) * 0.5f) | (junk & 0x1fffu);
    };
    for (unsigned lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      uint32_t *r = &regs[lane * 10];
      for (int i = 0; i < 4; ++i) {
        int row = (i == 0 || i == 2) ? g : g + 8;
        int col = i < 2 ? t : t + 4;
        r[i] = tf32(aValue(row, col), lane * 977 + i);
      }
      for (int i = 0; i < 2; ++i)
        r[4 + i] = tf32(bValue(i == 0 ? t : t + 4, g), lane * 131 + i);
      for (int i = 0; i < 4; ++i)
        r[6 + i] = floatBits(
            static_cast<float>(cValue(i < 2 ? g : g + 8, t * 2 + (i & 1))));
    }
    std::vector<uint32_t> d = runMma(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 4, 2, 4, 4, regs);
    ASSERT_EQ(d.size(), 32u * 4);
    for (unsigned lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i) {
        int m = i < 2 ? g : g + 8, n = t * 2 + (i & 1);
        float want = static_cast<float>(cValue(m, n));
        for (int k = 0; k < 8; ++k)
          want += 0.25f * static_cast<float>(aValue(m, k) * bValue(k, n));
        EXPECT_EQ(asFloat(d[lane * 4 + i]), want)
            << "tf32 lane " << lane << " d" << i;
      }
    }
  }
}

TEST(EmuTensorCoreTest, MmaNeedsTheWholeWarp) {
  std::string body = R"(	setp.ge.u32 	%p1, %r0, 16;
	@%p1 bra 	$L__out;
	mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 	{%r20, %r21, %r22, %r23}, {%r1, %r2}, {%r3}, {%r4, %r5, %r6, %r7};
$L__out:
)";
  std::vector<uint32_t> in(32 * 7, 0);
  Buffer bufIn = Buffer::of(in), out = Buffer::zeros<uint32_t>(32 * 4);
  EXPECT_THAT(runPtx(wordKernel(body, 7, 4), "k", {1, 1, 1}, {32, 1, 1},
                     {&bufIn, &out}),
              HasSubstr("mma.sync needs all 32 lanes of the warp; lanes "
                        "0x0000ffff are here"));
}

TEST(EmuTensorCoreTest, LoadMatrix) {
  // Shared memory holds 32 rows of 8 halves: row s, column c has the bits
  // s * 8 + c. Lane L names the row address of matrix L / 8, row L % 8,
  // taken from stored row 8 * (L / 8) + (7 - L % 8): rows in reverse, so
  // the addresses each lane gives matter.
  std::string body = R"(	shl.b32 	%r5, %r0, 4;
	mov.u32 	%r6, rows;
	add.s32 	%r7, %r6, %r5;
	st.shared.v4.u32 	[%r7], {%r1, %r2, %r3, %r4};
	bar.sync 	0;
	and.b32 	%r8, %r0, 7;
	sub.s32 	%r9, 7, %r8;
	and.b32 	%r10, %r0, 24;
	add.s32 	%r11, %r10, %r9;
	shl.b32 	%r12, %r11, 4;
	add.s32 	%r13, %r6, %r12;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 	{%r20, %r21, %r22, %r23}, [%r13];
	ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 	{%r24, %r25, %r26, %r27}, [%r13];
	ldmatrix.sync.aligned.m8n8.x2.shared.b16 	{%r28, %r29}, [%r13];
	ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 	{%r30}, [%r13];
)";
  std::vector<uint32_t> in(32 * 4);
  for (unsigned s = 0; s < 32; ++s)
    for (unsigned c = 0; c < 8; c += 2)
      in[s * 4 + c / 2] = (s * 8 + c) | ((s * 8 + c + 1) << 16);
  std::vector<uint32_t> out =
      runWords(body, 4, 11, in, 32, "\t.shared .align 16 .b8 rows[512];\n");
  ASSERT_EQ(out.size(), 32u * 11);
  // Element (row j, column c) of matrix i.
  auto element = [](unsigned i, unsigned j, unsigned c) {
    unsigned stored = 8 * i + (7 - j);
    return stored * 8 + c;
  };
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned row = lane / 4, col = 2 * (lane % 4);
    const uint32_t *g = &out[lane * 11];
    for (unsigned i = 0; i < 4; ++i) {
      uint32_t plain = element(i, row, col) | (element(i, row, col + 1) << 16);
      uint32_t trans = element(i, col, row) | (element(i, col + 1, row) << 16);
      EXPECT_EQ(g[i], plain) << "lane " << lane << " x4 matrix " << i;
      EXPECT_EQ(g[4 + i], trans) << "lane " << lane << " x4.trans " << i;
      if (i < 2) {
        EXPECT_EQ(g[8 + i], plain) << "lane " << lane << " x2 matrix " << i;
      }
      if (i < 1) {
        EXPECT_EQ(g[10], trans) << "lane " << lane << " x1.trans";
      }
    }
  }
}

TEST(EmuTensorCoreTest, StoreMatrixInvertsLoadMatrix) {
  // ldmatrix (rows in reverse, as above) then stmatrix to rows in order:
  // region 2 row L must be the stored row that fed matrix L / 8, row L % 8;
  // .trans on both sides is the same identity (region 3).
  std::string body = R"(	shl.b32 	%r5, %r0, 4;
	mov.u32 	%r6, rows;
	add.s32 	%r7, %r6, %r5;
	st.shared.v4.u32 	[%r7], {%r1, %r2, %r3, %r4};
	bar.sync 	0;
	and.b32 	%r8, %r0, 7;
	sub.s32 	%r9, 7, %r8;
	and.b32 	%r10, %r0, 24;
	add.s32 	%r11, %r10, %r9;
	shl.b32 	%r12, %r11, 4;
	add.s32 	%r13, %r6, %r12;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 	{%r40, %r41, %r42, %r43}, [%r13];
	ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 	{%r44, %r45, %r46, %r47}, [%r13];
	add.s32 	%r14, %r7, 512;
	add.s32 	%r15, %r7, 1024;
	stmatrix.sync.aligned.m8n8.x4.shared.b16 	[%r14], {%r40, %r41, %r42, %r43};
	stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 	[%r15], {%r44, %r45, %r46, %r47};
	bar.sync 	0;
	ld.shared.v4.u32 	{%r20, %r21, %r22, %r23}, [%r14];
	ld.shared.v4.u32 	{%r24, %r25, %r26, %r27}, [%r15];
)";
  std::vector<uint32_t> in(32 * 4);
  auto word = [](unsigned s, unsigned c) {
    return (s * 8 + c) | ((s * 8 + c + 1) << 16);
  };
  for (unsigned s = 0; s < 32; ++s)
    for (unsigned c = 0; c < 8; c += 2)
      in[s * 4 + c / 2] = word(s, c);
  std::vector<uint32_t> out =
      runWords(body, 4, 8, in, 32, "\t.shared .align 16 .b8 rows[1536];\n");
  ASSERT_EQ(out.size(), 32u * 8);
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned source = 8 * (lane / 8) + (7 - lane % 8);
    for (unsigned c = 0; c < 8; c += 2) {
      EXPECT_EQ(out[lane * 8 + c / 2], word(source, c)) << "lane " << lane;
      EXPECT_EQ(out[lane * 8 + 4 + c / 2], word(source, c))
          << "trans, lane " << lane;
    }
  }
}

TEST(EmuTensorCoreTest, AsyncCopiesLandAtTheirWait) {
  // Each thread copies 16 bytes (group 0), then 4 bytes into an 8-byte
  // slot that the rest zero-fills (group 1). Reads before the waits see the
  // old contents; wait_group 1 completes group 0 only; wait_all the rest.
  // A copy with src-size 0 reads nothing (its source address is not even
  // valid) and zero-fills; so does one whose ignore-src predicate is true
  // (every thread but 0).
  std::string body = R"(	mov.u32 	%r5, buf;
	shl.b32 	%r6, %r0, 4;
	add.s32 	%r7, %r5, %r6;
	shl.b32 	%r8, %r0, 3;
	add.s32 	%r9, %r5, 512;
	add.s32 	%r9, %r9, %r8;
	add.s32 	%r10, %r5, 768;
	shl.b32 	%r11, %r0, 2;
	add.s32 	%r10, %r10, %r11;
	mov.u32 	%r12, -1431655766;
	st.shared.v4.u32 	[%r7], {%r12, %r12, %r12, %r12};
	st.shared.v2.u32 	[%r9], {%r12, %r12};
	st.shared.u32 	[%r10], %r12;
	cp.async.cg.shared.global 	[%r7], [%rd3], 16;
	cp.async.commit_group;
	cp.async.ca.shared.global 	[%r9], [%rd3+4], 8, 4;
	cp.async.commit_group;
	ld.shared.u32 	%r20, [%r7];
	cp.async.wait_group 	1;
	ld.shared.u32 	%r21, [%r7+12];
	ld.shared.u32 	%r22, [%r9];
	cp.async.wait_all;
	ld.shared.u32 	%r23, [%r9];
	ld.shared.u32 	%r24, [%r9+4];
	mov.u64 	%rd10, 0;
	cp.async.ca.shared.global 	[%r10], [%rd10], 4, 0;
	cp.async.wait_all;
	ld.shared.u32 	%r25, [%r10];
	add.s32 	%r13, %r5, 896;
	add.s32 	%r13, %r13, %r11;
	st.shared.u32 	[%r13], %r12;
	setp.ne.u32 	%p1, %r0, 0;
	cp.async.ca.shared.global 	[%r13], [%rd3], 4, %p1;
	cp.async.wait_all;
	ld.shared.u32 	%r26, [%r13];
)";
  std::vector<uint32_t> in(32 * 4);
  for (unsigned i = 0; i < in.size(); ++i)
    in[i] = 1000 + i;
  std::vector<uint32_t> out =
      runWords(body, 4, 7, in, 32, "\t.shared .align 16 .b8 buf[1024];\n");
  ASSERT_EQ(out.size(), 32u * 7);
  for (unsigned t = 0; t < 32; ++t) {
    const uint32_t *g = &out[t * 7];
    EXPECT_THAT(std::vector<uint32_t>(g, g + 7),
                ::testing::ElementsAre(0xaaaaaaaau, in[t * 4 + 3], 0xaaaaaaaau,
                                       in[t * 4 + 1], 0u, 0u,
                                       t == 0 ? in[0] : 0u))
        << "thread " << t;
  }
}

TEST(EmuTensorCoreTest, AsyncCopyOutOfBoundsIsReported) {
  std::string body = R"(	mov.u32 	%r5, buf;
	cp.async.cg.shared.global 	[%r5], [%rd3+4096], 16;
	cp.async.wait_all;
)";
  std::vector<uint32_t> in(4, 0);
  Buffer bufIn = Buffer::of(in), out = Buffer::zeros<uint32_t>(4);
  EXPECT_THAT(
      runPtx(wordKernel(body, 1, 0, "\t.shared .align 16 .b8 buf[64];\n"), "k",
             {1, 1, 1}, {1, 1, 1}, {&bufIn, &out}),
      HasSubstr("(cp.async.cg.shared.global): out-of-bounds global "
                "cp.async source of 16 bytes"));
}

TEST(EmuTensorCoreTest, ModuleScopeSharedVariables) {
  // nvcc and NVRTC declare __shared__ arrays, static and extern (dynamic),
  // at module scope, before the entries. Each entry gets both; the dynamic
  // one starts after the static ones. Thread t writes t to stat[t] and
  // 100 + t to dyn[t], then reads its neighbour's, through the generic
  // (cvta) and the shared addresses.
  std::string ptx = ptxHeader() + R"(.shared .align 4 .b8 stat[128];
.extern .shared .align 16 .b8 dyn[];

.visible .entry first(.param .u64 out)
{
	.reg .b32 %r<12>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	shl.b32 %r2, %r1, 2;
	mov.u32 %r3, stat;
	add.s32 %r4, %r3, %r2;
	st.shared.u32 [%r4], %r1;
	mov.u64 %rd2, dyn;
	cvta.shared.u64 %rd3, %rd2;
	cvt.u64.u32 %rd4, %r2;
	add.s64 %rd5, %rd3, %rd4;
	add.s32 %r5, %r1, 100;
	st.u32 [%rd5], %r5;
	bar.sync 0;
	add.s32 %r6, %r1, 1;
	and.b32 %r6, %r6, 31;
	shl.b32 %r7, %r6, 2;
	add.s32 %r8, %r3, %r7;
	ld.shared.u32 %r9, [%r8];
	mov.u32 %r10, dyn;
	add.s32 %r10, %r10, %r7;
	ld.shared.u32 %r11, [%r10];
	add.s32 %r9, %r9, %r11;
	mul.wide.u32 %rd6, %r1, 4;
	add.s64 %rd7, %rd1, %rd6;
	st.global.u32 [%rd7], %r9;
	ret;
}

.visible .entry second(.param .u64 out)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, dyn;
	mov.u32 %r2, stat;
	sub.s32 %r3, %r1, %r2;
	st.global.u32 [%rd1], %r3;
	ret;
}
)";
  Buffer out = Buffer::zeros<uint32_t>(32);
  ASSERT_EQ(runPtx(ptx, "first", {1, 1, 1}, {32, 1, 1}, {&out}, {}, 128),
            "<success>");
  std::vector<uint32_t> got = out.as<uint32_t>();
  for (uint32_t t = 0; t < 32; ++t)
    EXPECT_EQ(got[t], 2 * ((t + 1) % 32) + 100) << t;
  Buffer offset = Buffer::zeros<uint32_t>(1);
  ASSERT_EQ(runPtx(ptx, "second", {1, 1, 1}, {1, 1, 1}, {&offset}, {}, 16),
            "<success>");
  EXPECT_EQ(offset.as<uint32_t>()[0], 128u); // dyn follows stat
}

} // namespace

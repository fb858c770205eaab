//===- EmuInstructionTest.cpp - The emulator's instruction families -------===//
//
// Hand-written PTX per family (atomics, votes and warp reductions, bit
// manipulation, integer edge cases, float edge cases and rounding modes,
// barriers with counts and reductions, special registers, launch flags),
// run on the emu device. Expected values are computed here in C++ from the
// PTX ISA's definitions, never taken from the emulator.
//
//===----------------------------------------------------------------------===//

#include "emu/PtxInterpreter.h"

#include "EmuTestUtils.h"
#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

struct Lcg {
  uint64_t state;
  uint32_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 32);
  }
};

float asFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

//===----------------------------------------------------------------------===//
// Atomics
//===----------------------------------------------------------------------===//

TEST(EmuInstructionTest, GlobalAtomicsUnderContention) {
  // 8 blocks x 256 threads, all on the same few words (the device runs
  // blocks on every host core, so the blocks race for real).
  const unsigned blocks = 8, threads = 256, total = blocks * threads;
  std::string ptx = ptxHeader() + R"(.visible .entry atomics(
	.param .u64 .ptr .align 1 atomics_param_0,
	.param .u64 .ptr .align 1 atomics_param_1
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<32>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<16>;
	.reg .f64 	%fd<4>;

	ld.param.u64 	%rd1, [atomics_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [atomics_param_1];
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mad.lo.s32 	%r4, %r2, %r3, %r1;
	mul.wide.u32 	%rd3, %r4, 16;
	add.s64 	%rd4, %rd2, %rd3;
	atom.global.add.u32 	%r5, [%rd1], 1;
	st.global.u32 	[%rd4], %r5;
	atom.global.add.f32 	%f1, [%rd1+4], 0f3F000000;
	sub.s32 	%r6, %r4, 1000;
	atom.global.max.s32 	%r7, [%rd1+8], %r6;
	atom.global.min.u32 	%r8, [%rd1+12], %r4;
	atom.global.inc.u32 	%r9, [%rd1+16], 99;
	atom.global.dec.u32 	%r10, [%rd1+20], 9;
	and.b32 	%r11, %r4, 31;
	mov.u32 	%r12, 1;
	shl.b32 	%r13, %r12, %r11;
	atom.global.or.b32 	%r14, [%rd1+24], %r13;
	not.b32 	%r15, %r13;
	atom.global.and.b32 	%r16, [%rd1+28], %r15;
	atom.global.xor.b32 	%r17, [%rd1+32], %r4;
	atom.global.exch.b32 	%r18, [%rd1+36], %r4;
	st.global.u32 	[%rd4+4], %r18;
	cvt.u64.u32 	%rd5, %r4;
	red.global.add.u64 	[%rd1+40], %rd5;
	cvt.rn.f64.u32 	%fd1, %r4;
	atom.global.add.f64 	%fd2, [%rd1+48], %fd1;
	// A lock-free increment through compare-and-swap (a divergent loop:
	// the lanes that lose retry).
$L__retry:
	ld.volatile.global.u32 	%r20, [%rd1+56];
	add.s32 	%r21, %r20, 1;
	atom.global.cas.b32 	%r22, [%rd1+56], %r20, %r21;
	setp.ne.s32 	%p1, %r22, %r20;
	@%p1 bra 	$L__retry;
	st.global.u32 	[%rd4+8], %r20;
	ret;
}
)";
  std::vector<uint32_t> init(16, 0);
  init[3] = 0xffffffffu;                  // min.u32 starts high
  init[2] = static_cast<uint32_t>(-5000); // max.s32 starts low
  init[7] = 0xffffffffu;                  // and clears every bit
  init[9] = 0xdeadbeef;                   // exch: the first old value
  Buffer words = Buffer::of(init);
  Buffer out = Buffer::zeros<uint32_t>(total * 4);
  ASSERT_EQ(
      runPtx(ptx, "atomics", {blocks, 1, 1}, {threads, 1, 1}, {&words, &out}),
      "<success>");
  std::vector<uint32_t> w = words.as<uint32_t>();
  std::vector<uint32_t> o = out.as<uint32_t>();
  EXPECT_EQ(w[0], total);
  EXPECT_EQ(asFloat(w[1]), 0.5f * total);
  EXPECT_EQ(static_cast<int32_t>(w[2]), static_cast<int32_t>(total - 1) - 1000);
  EXPECT_EQ(w[3], 0u);
  EXPECT_EQ(w[4], total % 100); // inc wraps to 0 after 99
  // dec from 0: 0 -> 9, then counts down and wraps: after n steps the
  // value is (9 - (n - 1) mod 10) for n >= 1.
  EXPECT_EQ(w[5], 9 - ((total - 1) % 10));
  EXPECT_EQ(w[6], 0xffffffffu);
  EXPECT_EQ(w[7], 0u);
  uint32_t x = 0;
  for (uint32_t t = 0; t < total; ++t)
    x ^= t;
  EXPECT_EQ(w[8], x);
  uint64_t sum = 0;
  for (uint32_t t = 0; t < total; ++t)
    sum += t;
  uint64_t red;
  std::memcpy(&red, &w[10], 8);
  EXPECT_EQ(red, sum);
  double fsum;
  std::memcpy(&fsum, &w[12], 8);
  EXPECT_EQ(fsum, static_cast<double>(sum));
  EXPECT_EQ(w[14], total);
  // The old values each atomic returned are all different: add's are a
  // permutation of 0..total-1, so are the CAS loop's; exch's old values
  // plus the final value are the initial value and every thread's.
  std::set<uint32_t> adds, cas, exch;
  for (uint32_t t = 0; t < total; ++t) {
    adds.insert(o[t * 4]);
    exch.insert(o[t * 4 + 1]);
    cas.insert(o[t * 4 + 2]);
  }
  exch.insert(w[9]);
  EXPECT_EQ(adds.size(), total);
  EXPECT_EQ(*adds.rbegin(), total - 1);
  EXPECT_EQ(cas.size(), total);
  EXPECT_EQ(*cas.rbegin(), total - 1);
  EXPECT_EQ(exch.size(), total + 1);
  EXPECT_TRUE(exch.count(0xdeadbeef));
}

TEST(EmuInstructionTest, SharedAtomicsPerBlock) {
  // Each block counts its threads with a shared atomic (a fresh shared
  // memory per block), then thread 0 writes the count and the block's
  // maximum thread index.
  std::string ptx = ptxHeader() + R"(.visible .entry shared_atomics(
	.param .u64 .ptr .align 1 shared_atomics_param_0
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 counts[8];

	ld.param.u64 	%rd1, [shared_atomics_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r1, %tid.x;
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__wait;
	st.shared.u32 	[counts], 0;
	st.shared.u32 	[counts+4], 0;
$L__wait:
	bar.sync 	0;
	atom.shared.add.u32 	%r2, [counts], 1;
	mov.u64 	%rd2, counts;
	cvta.shared.u64 	%rd3, %rd2;
	atom.max.u32 	%r3, [%rd3+4], %r1;
	bar.sync 	0;
	@%p1 bra 	$L__done;
	ld.shared.u32 	%r4, [counts];
	ld.shared.u32 	%r5, [counts+4];
	mov.u32 	%r6, %ctaid.x;
	mul.wide.u32 	%rd4, %r6, 8;
	add.s64 	%rd5, %rd1, %rd4;
	st.global.v2.u32 	[%rd5], {%r4, %r5};
$L__done:
	ret;
}
)";
  Buffer out = Buffer::zeros<uint32_t>(8);
  ASSERT_EQ(runPtx(ptx, "shared_atomics", {4, 1, 1}, {96, 1, 1}, {&out}),
            "<success>");
  EXPECT_THAT(out.as<uint32_t>(),
              ::testing::ElementsAre(96, 95, 96, 95, 96, 95, 96, 95));
}

TEST(EmuInstructionTest, AtomicErrorsNameTheLine) {
  std::string ptx = ptxHeader() + R"(.visible .entry bad_atom(
	.param .u64 .ptr .align 1 bad_atom_param_0
)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [bad_atom_param_0];
	atom.global.add.u32 	%r1, [%rd1+2], 1;
	ret;
}
)";
  Buffer out = Buffer::zeros<uint32_t>(4);
  EXPECT_THAT(runPtx(ptx, "bad_atom", {1, 1, 1}, {1, 1, 1}, {&out}),
              HasSubstr("PTX line 12 (atom.global.add.u32): misaligned "
                        "global atomic of 4 bytes"));
  // Packed-half atomics are not emulated: an error naming the line.
  std::string half = ptx;
  half.replace(half.find("atom.global.add.u32 \t%r1, [%rd1+2], 1"),
               std::string("atom.global.add.u32 \t%r1, [%rd1+2], 1").size(),
               "atom.global.add.noftz.f16x2 \t%r1, [%rd1], %r1");
  EXPECT_EQ(runPtx(half, "bad_atom", {1, 1, 1}, {1, 1, 1}, {&out}),
            "emu: kernel 'bad_atom': PTX line 12: unsupported instruction "
            "'atom.global.add.noftz.f16x2' in kernel 'bad_atom'");
}

//===----------------------------------------------------------------------===//
// Votes, warp reductions, activemask
//===----------------------------------------------------------------------===//

TEST(EmuInstructionTest, VotesAndWarpReductions) {
  // 64 threads; inputs x[t]. Every vote over the full warp, then inside a
  // divergent branch (lanes 0..19 of each warp) with the active mask as the
  // member mask.
  std::vector<uint32_t> in(64);
  Lcg rng{5};
  for (auto &v : in)
    v = rng.next() % 1000;
  in[3] = 0; // makes "all nonzero" false in warp 0
  std::string body = R"(	and.b32 	%r5, %r1, 1;
	setp.eq.s32 	%p1, %r5, 1;
	vote.sync.ballot.b32 	%r20, %p1, -1;
	vote.sync.all.pred 	%p2, %p1, -1;
	selp.u32 	%r21, 1, 0, %p2;
	setp.ne.s32 	%p3, %r1, 0;
	vote.sync.all.pred 	%p4, %p3, -1;
	selp.u32 	%r22, 1, 0, %p4;
	vote.sync.any.pred 	%p5, !%p3, -1;
	selp.u32 	%r23, 1, 0, %p5;
	setp.lt.u32 	%p6, %r1, 2000;
	vote.sync.uni.pred 	%p7, %p6, -1;
	selp.u32 	%r24, 1, 0, %p7;
	vote.sync.uni.pred 	%p8, %p1, -1;
	selp.u32 	%r25, 1, 0, %p8;
	redux.sync.add.u32 	%r26, %r1, -1;
	redux.sync.max.u32 	%r27, %r1, -1;
	sub.s32 	%r6, %r1, 500;
	redux.sync.min.s32 	%r28, %r6, -1;
	redux.sync.xor.b32 	%r29, %r1, -1;
	redux.sync.or.b32 	%r30, %r1, -1;
	redux.sync.and.b32 	%r31, %r1, -1;
	mov.u32 	%r32, 0;
	mov.u32 	%r33, 0;
	mov.u32 	%r7, %laneid;
	setp.ge.u32 	%p9, %r7, 20;
	@%p9 bra 	$L__join;
	activemask.b32 	%r32;
	vote.sync.ballot.b32 	%r33, %p1, %r32;
$L__join:
)";
  const unsigned nout = 14;
  std::vector<uint32_t> out = runWords(body, 1, nout, in, 64);
  ASSERT_EQ(out.size(), 64u * nout);
  for (unsigned warp = 0; warp < 2; ++warp) {
    uint32_t ballot = 0, ballot20 = 0, sum = 0, mx = 0, xr = 0, orv = 0,
             andv = ~0u;
    int32_t mn = INT32_MAX;
    bool allNonzero = true;
    for (unsigned l = 0; l < 32; ++l) {
      uint32_t v = in[warp * 32 + l];
      if (v & 1) {
        ballot |= 1u << l;
        if (l < 20)
          ballot20 |= 1u << l;
      }
      allNonzero = allNonzero && v != 0;
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, static_cast<int32_t>(v) - 500);
      xr ^= v;
      orv |= v;
      andv &= v;
    }
    for (unsigned l = 0; l < 32; ++l) {
      const uint32_t *g = &out[(warp * 32 + l) * nout];
      std::vector<uint32_t> want = {ballot,
                                    ballot == ~0u,
                                    allNonzero,
                                    !allNonzero,
                                    1,
                                    ballot == 0 || ballot == ~0u,
                                    sum,
                                    mx,
                                    static_cast<uint32_t>(mn),
                                    xr,
                                    orv,
                                    andv,
                                    l < 20 ? 0xfffffu : 0,
                                    l < 20 ? ballot20 : 0};
      for (unsigned k = 0; k < nout; ++k)
        EXPECT_EQ(g[k], want[k])
            << "warp " << warp << " lane " << l << " output " << k;
    }
  }
}

TEST(EmuInstructionTest, VoteWithAbsentMemberIsReported) {
  std::string body = R"(	setp.ge.u32 	%p1, %r0, 16;
	@%p1 bra 	$L__out;
	vote.sync.any.pred 	%p2, %p1, -1;
$L__out:
)";
  std::vector<uint32_t> in(32, 0);
  Buffer bufIn = Buffer::of(in), out = Buffer::zeros<uint32_t>(32);
  EXPECT_THAT(runPtx(wordKernel(body, 1, 0), "k", {1, 1, 1}, {32, 1, 1},
                     {&bufIn, &out}),
              HasSubstr("(vote.sync.any.pred): vote.sync.any.pred member "
                        "mask 0xffffffff names lane 16, which is not at this "
                        "instruction"));
}

//===----------------------------------------------------------------------===//
// Nested divergence
//===----------------------------------------------------------------------===//

TEST(EmuInstructionTest, NestedDivergenceReconverges) {
  // Odd lanes run a loop of (lane % 5) trips with an if/else inside it,
  // then (reconverged) query the active mask and shuffle among themselves
  // with it as the member mask; even lanes take the else branch. After the
  // join, a full-warp ballot must see every lane again.
  std::string body = R"(	mov.u32 	%r2, %laneid;
	mov.u32 	%r20, 0;
	mov.u32 	%r21, 0;
	and.b32 	%r3, %r2, 1;
	setp.eq.s32 	%p1, %r3, 0;
	@%p1 bra 	$L__even;
	rem.u32 	%r4, %r2, 5;
	mov.u32 	%r5, 0;
	setp.eq.s32 	%p2, %r4, 0;
	@%p2 bra 	$L__loopdone;
$L__loop:
	and.b32 	%r6, %r5, 1;
	setp.eq.s32 	%p3, %r6, 0;
	@%p3 bra 	$L__evenstep;
	sub.s32 	%r20, %r20, 1;
	bra.uni 	$L__next;
$L__evenstep:
	mad.lo.s32 	%r20, %r5, %r2, %r20;
$L__next:
	add.s32 	%r5, %r5, 1;
	setp.lt.u32 	%p4, %r5, %r4;
	@%p4 bra 	$L__loop;
$L__loopdone:
	activemask.b32 	%r22;
	shfl.sync.bfly.b32 	%r21, %r20, 2, 31, %r22;
	bra.uni 	$L__join;
$L__even:
	add.s32 	%r20, %r2, 100;
	activemask.b32 	%r22;
$L__join:
	setp.gt.s32 	%p5, %r20, 5;
	vote.sync.ballot.b32 	%r23, %p5, -1;
)";
  std::vector<uint32_t> in(32, 0);
  std::vector<uint32_t> out = runWords(body, 1, 4, in, 32);
  ASSERT_EQ(out.size(), 32u * 4);
  auto acc = [](int lane) {
    if (lane % 2 == 0)
      return lane + 100;
    int a = 0;
    for (int i = 0; i < lane % 5; ++i)
      a += i % 2 == 0 ? i * lane : -1;
    return a;
  };
  uint32_t ballot = 0;
  for (int lane = 0; lane < 32; ++lane)
    if (acc(lane) > 5)
      ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    const uint32_t *g = &out[lane * 4];
    EXPECT_EQ(static_cast<int32_t>(g[0]), acc(lane)) << lane;
    EXPECT_EQ(static_cast<int32_t>(g[1]), lane % 2 ? acc(lane ^ 2) : 0) << lane;
    EXPECT_EQ(g[2], lane % 2 ? 0xaaaaaaaau : 0x55555555u) << lane;
    EXPECT_EQ(g[3], ballot) << lane;
  }
}

//===----------------------------------------------------------------------===//
// Bit manipulation and integer edge cases
//===----------------------------------------------------------------------===//

uint32_t refPrmt(uint32_t a, uint32_t b, uint32_t c, int mode) {
  uint8_t bytes[8];
  for (int i = 0; i < 4; ++i) {
    bytes[i] = static_cast<uint8_t>(a >> (8 * i));
    bytes[4 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  // The PTX ISA's tables, d.b3 d.b2 d.b1 d.b0 for c[1:0] = 0..3.
  static const int f4e[4][4] = {
      {3, 2, 1, 0}, {4, 3, 2, 1}, {5, 4, 3, 2}, {6, 5, 4, 3}};
  static const int b4e[4][4] = {
      {5, 6, 7, 0}, {6, 7, 0, 1}, {7, 0, 1, 2}, {0, 1, 2, 3}};
  static const int rc8[4][4] = {
      {0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}};
  static const int ecl[4][4] = {
      {3, 2, 1, 0}, {3, 2, 1, 1}, {3, 2, 2, 2}, {3, 3, 3, 3}};
  static const int ecr[4][4] = {
      {0, 0, 0, 0}, {1, 1, 1, 0}, {2, 2, 1, 0}, {3, 2, 1, 0}};
  static const int rc16[4][4] = {
      {1, 0, 1, 0}, {3, 2, 3, 2}, {1, 0, 1, 0}, {3, 2, 3, 2}};
  const int(*table)[4] = mode == 1   ? f4e
                         : mode == 2 ? b4e
                         : mode == 3 ? rc8
                         : mode == 4 ? ecl
                         : mode == 5 ? ecr
                                     : rc16;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    uint8_t byte;
    if (mode == 0) {
      unsigned sel = (c >> (4 * i)) & 0xf;
      byte = bytes[sel & 7];
      if (sel & 8)
        byte = (byte & 0x80) ? 0xff : 0x00;
    } else {
      byte = bytes[table[c & 3][3 - i]];
    }
    d |= static_cast<uint32_t>(byte) << (8 * i);
  }
  return d;
}

TEST(EmuInstructionTest, BitManipulation) {
  std::vector<uint32_t> in;
  Lcg rng{17};
  std::vector<uint32_t> specials = {
      0, 1, 0x80000000u, 0xffffffffu, 0x7fffffffu, 0x00ff00ffu, 40, 33};
  for (int i = 0; i < 256; ++i)
    for (int k = 0; k < 3; ++k)
      in.push_back(i < 24 ? specials[(i + 3 * k) % specials.size()]
                          : rng.next());
  std::string body = R"(	prmt.b32 	%r20, %r1, %r2, %r3;
	prmt.b32.f4e 	%r21, %r1, %r2, %r3;
	prmt.b32.b4e 	%r22, %r1, %r2, %r3;
	prmt.b32.rc8 	%r23, %r1, %r2, %r3;
	prmt.b32.ecl 	%r24, %r1, %r2, %r3;
	prmt.b32.ecr 	%r25, %r1, %r2, %r3;
	prmt.b32.rc16 	%r26, %r1, %r2, %r3;
	bfind.u32 	%r27, %r1;
	bfind.s32 	%r28, %r1;
	bfind.shiftamt.u32 	%r29, %r1;
	lop3.b32 	%r30, %r1, %r2, %r3, 0x96;
	lop3.b32 	%r31, %r1, %r2, %r3, 0xe8;
	brev.b32 	%r32, %r1;
	popc.b32 	%r33, %r1;
	clz.b32 	%r34, %r1;
	and.b32 	%r8, %r2, 31;
	and.b32 	%r9, %r3, 31;
	bfe.s32 	%r35, %r1, %r8, %r9;
	bfi.b32 	%r36, %r1, %r2, %r8, %r9;
	bmsk.wrap.b32 	%r37, %r8, %r9;
	szext.clamp.s32 	%r38, %r1, %r9;
	szext.wrap.u32 	%r39, %r1, %r9;
	cnot.b32 	%r40, %r1;
	dp4a.s32.u32 	%r41, %r1, %r2, %r3;
	sad.u32 	%r42, %r1, %r2, %r3;
	mul24.lo.s32 	%r43, %r1, %r2;
	mul24.hi.u32 	%r44, %r1, %r2;
	mad24.lo.u32 	%r45, %r1, %r2, %r3;
	slct.u32.s32 	%r46, %r1, %r2, %r3;
)";
  const unsigned nout = 27;
  std::vector<uint32_t> out = runWords(body, 3, nout, in);
  ASSERT_EQ(out.size(), 256u * nout);
  for (unsigned t = 0; t < 256; ++t) {
    uint32_t a = in[3 * t], b = in[3 * t + 1], c = in[3 * t + 2];
    uint32_t pos = b & 31, len = c & 31;
    auto bfind = [](uint32_t x) -> uint32_t {
      for (int i = 31; i >= 0; --i)
        if ((x >> i) & 1)
          return i;
      return 0xffffffffu;
    };
    uint32_t sbf = bfind(static_cast<int32_t>(a) < 0 ? ~a : a);
    uint32_t rev = 0;
    for (int i = 0; i < 32; ++i)
      rev |= ((a >> i) & 1) << (31 - i);
    // bfe.s32: bits pos..pos+len-1 of a, sign-extended from the last one
    // (bits past 31 repeat bit 31).
    int32_t bfe = 0;
    if (len) {
      uint64_t field = 0;
      for (uint32_t i = 0; i < len; ++i) {
        uint32_t bit = pos + i <= 31 ? (a >> (pos + i)) & 1 : a >> 31;
        field |= static_cast<uint64_t>(bit) << i;
      }
      bool sign = (field >> (len - 1)) & 1;
      if (sign)
        field |= ~0ull << len;
      bfe = static_cast<int32_t>(field);
    }
    uint32_t bfi = b;
    for (uint32_t i = 0; i < len && pos + i < 32; ++i)
      bfi = (bfi & ~(1u << (pos + i))) | (((a >> i) & 1) << (pos + i));
    uint32_t bmsk = static_cast<uint32_t>(((1ull << len) - 1) << pos);
    uint32_t sz =
        len == 0 ? 0
                 : static_cast<uint32_t>(
                       static_cast<int32_t>(a << (32 - len)) >> (32 - len));
    uint32_t zz = len == 0 ? 0 : a & ((1u << len) - 1);
    int64_t dp = static_cast<int32_t>(c);
    for (int i = 0; i < 4; ++i)
      dp += static_cast<int64_t>(static_cast<int8_t>(a >> (8 * i))) *
            static_cast<int64_t>((b >> (8 * i)) & 0xff);
    auto s24 = [](uint32_t v) {
      int64_t x = v & 0xffffff;
      return x >= 0x800000 ? x - 0x1000000 : x;
    };
    uint64_t u48 = static_cast<uint64_t>(a & 0xffffff) * (b & 0xffffff);
    std::vector<uint32_t> want = {
        refPrmt(a, b, c, 0),
        refPrmt(a, b, c, 1),
        refPrmt(a, b, c, 2),
        refPrmt(a, b, c, 3),
        refPrmt(a, b, c, 4),
        refPrmt(a, b, c, 5),
        refPrmt(a, b, c, 6),
        bfind(a),
        sbf,
        a == 0 ? 0xffffffffu : 31 - bfind(a),
        a ^ b ^ c,                   // 0x96: three-way xor
        (a & b) | (a & c) | (b & c), // 0xe8: majority
        rev,
        static_cast<uint32_t>(__builtin_popcount(a)),
        a == 0 ? 32u : static_cast<uint32_t>(__builtin_clz(a)),
        static_cast<uint32_t>(bfe),
        bfi,
        bmsk,
        sz,
        zz,
        a == 0 ? 1u : 0u,
        static_cast<uint32_t>(dp),
        c + (a > b ? a - b : b - a),
        static_cast<uint32_t>(s24(a) * s24(b)),
        static_cast<uint32_t>(u48 >> 16),
        static_cast<uint32_t>(u48) + c,
        static_cast<int32_t>(c) >= 0 ? a : b,
    };
    for (unsigned k = 0; k < nout; ++k)
      EXPECT_EQ(out[t * nout + k], want[k])
          << "thread " << t << " output " << k << std::hex << " a=0x" << a
          << " b=0x" << b << " c=0x" << c;
  }
}

TEST(EmuInstructionTest, MatchAndDp2a) {
  // match.sync.any: the lanes holding the same value; .all: the member
  // mask when every member agrees (else 0), and its predicate. dp2a: two
  // 16-bit halves of a times two bytes of b, plus c.
  std::vector<uint32_t> in(64 * 3);
  Lcg rng{23};
  for (unsigned t = 0; t < 64; ++t) {
    in[t * 3] = t < 32 ? (t * 7) % 5 : 42; // warp 1: all equal
    in[t * 3 + 1] = rng.next();
    in[t * 3 + 2] = rng.next();
  }
  std::string body = R"(	match.sync.any.b32 	%r20, %r1, -1;
	match.sync.all.b32 	%r21|%p1, %r1, -1;
	selp.u32 	%r22, 1, 0, %p1;
	dp2a.lo.s32.s32 	%r23, %r2, %r3, %r1;
	dp2a.hi.u32.s32 	%r24, %r2, %r3, %r1;
)";
  std::vector<uint32_t> out = runWords(body, 3, 5, in, 64);
  ASSERT_EQ(out.size(), 64u * 5);
  for (unsigned t = 0; t < 64; ++t) {
    unsigned warp = t / 32;
    uint32_t any = 0;
    bool all = true;
    for (unsigned k = 0; k < 32; ++k) {
      uint32_t v = in[(warp * 32 + k) * 3];
      if (v == in[t * 3])
        any |= 1u << k;
      all = all && v == in[warp * 32 * 3];
    }
    uint32_t a = in[t * 3 + 1], b = in[t * 3 + 2], c = in[t * 3];
    auto dp2a = [&](bool aSigned, bool bSigned, unsigned first) {
      int64_t sum = static_cast<int32_t>(c);
      for (unsigned i = 0; i < 2; ++i) {
        uint32_t ha = (a >> (16 * i)) & 0xffff;
        uint32_t bb = (b >> (8 * (first + i))) & 0xff;
        int64_t x = aSigned ? static_cast<int16_t>(ha) : ha;
        int64_t y = bSigned ? static_cast<int8_t>(bb) : bb;
        sum += x * y;
      }
      return static_cast<uint32_t>(sum);
    };
    const uint32_t *g = &out[t * 5];
    EXPECT_EQ(g[0], any) << t;
    EXPECT_EQ(g[1], all ? 0xffffffffu : 0u) << t;
    EXPECT_EQ(g[2], all ? 1u : 0u) << t;
    EXPECT_EQ(g[3], dp2a(true, true, 0)) << t;
    EXPECT_EQ(g[4], dp2a(false, true, 2)) << t;
  }
}

TEST(EmuInstructionTest, IntegerOverflowShiftsAndCarries) {
  // Wrapping, saturating, shifts past the width, division by zero, 64-bit
  // subtraction through a borrow chain, setp combined with a predicate.
  std::vector<uint32_t> in = {
      0x7fffffffu, 1, 40, 0x80000000u, 0xffffffffu, 32, 5,         7, 31,
      0,           0, 0,  0x80000000u, 0xffffffffu, 1,  123456789, 0, 100,
  };
  std::string body = R"(	add.s32 	%r20, %r1, %r2;
	add.sat.s32 	%r21, %r1, %r2;
	sub.sat.s32 	%r22, %r1, %r2;
	shl.b32 	%r23, %r1, %r3;
	shr.s32 	%r24, %r1, %r3;
	shr.u32 	%r25, %r1, %r3;
	div.u32 	%r26, %r1, %r2;
	rem.s32 	%r27, %r1, %r2;
	mov.b64 	%rd5, {%r1, %r2};
	mov.b64 	%rd6, {%r3, %r3};
	sub.cc.u32 	%r10, %r1, %r3;
	subc.u32 	%r11, %r2, %r3;
	mov.b64 	%rd7, {%r10, %r11};
	sub.s64 	%rd8, %rd5, %rd6;
	setp.eq.s64 	%p1, %rd7, %rd8;
	selp.u32 	%r28, 1, 0, %p1;
	mov.b64 	{%r29, %r30}, %rd7;
	setp.gt.u32 	%p2, %r1, %r2;
	setp.lt.and.u32 	%p3, %r1, 100, %p2;
	setp.lt.or.u32 	%p4|%p5, %r1, 100, !%p2;
	selp.u32 	%r31, 1, 0, %p3;
	selp.u32 	%r32, 1, 0, %p4;
	selp.u32 	%r33, 1, 0, %p5;
	mul.hi.u32 	%r34, %r1, %r2;
	mul.hi.s32 	%r35, %r1, %r2;
	mul.wide.s32 	%rd9, %r1, %r2;
	mov.b64 	{%r36, %r37}, %rd9;
)";
  const unsigned nout = 18;
  std::vector<uint32_t> out = runWords(body, 3, nout, in, 32);
  ASSERT_EQ(out.size(), 6u * nout);
  for (unsigned t = 0; t < 6; ++t) {
    uint32_t a = in[3 * t], b = in[3 * t + 1], c = in[3 * t + 2];
    int32_t sa = static_cast<int32_t>(a), sb = static_cast<int32_t>(b);
    int64_t wideSum = static_cast<int64_t>(sa) + sb;
    int64_t wideDiff = static_cast<int64_t>(sa) - sb;
    auto clamp32 = [](int64_t v) {
      return static_cast<uint32_t>(static_cast<int32_t>(
          std::min<int64_t>(std::max<int64_t>(v, INT32_MIN), INT32_MAX)));
    };
    uint64_t ab = (static_cast<uint64_t>(b) << 32) | a;
    uint64_t cc = (static_cast<uint64_t>(c) << 32) | c;
    uint64_t diff = ab - cc;
    bool gt = a > b, lt = a < 100;
    int64_t product = static_cast<int64_t>(sa) * sb;
    std::vector<uint32_t> want = {
        a + b,
        clamp32(wideSum),
        clamp32(wideDiff),
        c >= 32 ? 0 : a << c,
        c >= 32 ? (sa < 0 ? 0xffffffffu : 0) : static_cast<uint32_t>(sa >> c),
        c >= 32 ? 0 : a >> c,
        b == 0 ? 0xffffffffu : a / b, // division by zero: all ones
        b == 0     ? a
        : sb == -1 ? 0
                   : static_cast<uint32_t>(sa % sb),
        1,
        static_cast<uint32_t>(diff),
        static_cast<uint32_t>(diff >> 32),
        lt && gt,
        lt || !gt,
        !lt || !gt,
        static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32),
        static_cast<uint32_t>(static_cast<uint64_t>(product) >> 32),
        static_cast<uint32_t>(product),
        static_cast<uint32_t>(static_cast<uint64_t>(product) >> 32),
    };
    for (unsigned k = 0; k < nout; ++k)
      EXPECT_EQ(out[t * nout + k], want[k])
          << "thread " << t << " output " << k;
  }
}

TEST(EmuInstructionTest, SetWritesMasksOrOnes) {
  // set.cmp.dtype.stype: all ones (u32/s32) or 1.0f (f32) when true, else 0;
  // the .and form combines with a (negated) predicate.
  std::vector<uint32_t> in = {5,
                              7,
                              static_cast<uint32_t>(-3),
                              7,
                              bitsOf(1.5f),
                              bitsOf(-2.0f),
                              bitsOf(std::numeric_limits<float>::quiet_NaN()),
                              bitsOf(1.0f)};
  std::string body = R"(	set.lt.u32.s32 	%r20, %r1, %r2;
	set.lt.u32.u32 	%r21, %r1, %r2;
	mov.b32 	%f1, %r1;
	mov.b32 	%f2, %r2;
	set.gt.f32.f32 	%r22, %f1, %f2;
	set.nan.u32.f32 	%r23, %f1, %f2;
	setp.ne.s32 	%p1, %r0, 1;
	set.ne.and.u32.s32 	%r24, %r1, %r2, !%p1;
)";
  std::vector<uint32_t> out = runWords(body, 2, 5, in, 32);
  ASSERT_EQ(out.size(), 4u * 5);
  for (unsigned t = 0; t < 4; ++t) {
    uint32_t a = in[2 * t], b = in[2 * t + 1];
    float fa = asFloat(a), fb = asFloat(b);
    bool nan = std::isnan(fa) || std::isnan(fb);
    EXPECT_EQ(out[t * 5], static_cast<int32_t>(a) < static_cast<int32_t>(b)
                              ? 0xffffffffu
                              : 0u)
        << t;
    EXPECT_EQ(out[t * 5 + 1], a < b ? 0xffffffffu : 0u) << t;
    EXPECT_EQ(out[t * 5 + 2], !nan && fa > fb ? bitsOf(1.0f) : 0u) << t;
    EXPECT_EQ(out[t * 5 + 3], nan ? 0xffffffffu : 0u) << t;
    EXPECT_EQ(out[t * 5 + 4], a != b && t == 1 ? 0xffffffffu : 0u) << t;
  }
}

TEST(EmuInstructionTest, FloatMinMaxFollowPtx) {
  // min/max.f32 return the other operand when one is NaN; .NaN returns
  // NaN; a NaN result (both NaN, or .NaN) is PTX's canonical NaN 0x7fffffff
  // (not the host's 0x7fc00000); -0 is below +0. The generated kernels'
  // relu/max lower to max.NaN.f32 (arith.maximumf), the templates' to both.
  const uint32_t canonical = 0x7fffffffu;
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::pair<float, float>> pairs = {
      {nan, 1.0f}, {1.0f, nan}, {nan, nan}, {-0.0f, 0.0f}, {0.0f, -0.0f},
      {2.0f, -3.0f}};
  std::vector<uint32_t> in;
  for (auto [x, y] : pairs) {
    in.push_back(bitsOf(x));
    in.push_back(bitsOf(y));
  }
  std::string body = R"(	mov.b32 	%f1, %r1;
	mov.b32 	%f2, %r2;
	max.f32 	%f10, %f1, %f2;
	min.f32 	%f11, %f1, %f2;
	max.NaN.f32 	%f12, %f1, %f2;
	min.NaN.f32 	%f13, %f1, %f2;
	mov.b32 	%r20, %f10;
	mov.b32 	%r21, %f11;
	mov.b32 	%r22, %f12;
	mov.b32 	%r23, %f13;
)";
  std::vector<uint32_t> out = runWords(body, 2, 4, in, 32);
  ASSERT_EQ(out.size(), pairs.size() * 4);
  // {max, min, max.NaN, min.NaN} per pair, as bits.
  std::vector<std::array<uint32_t, 4>> want = {
      {bitsOf(1.0f), bitsOf(1.0f), canonical, canonical},
      {bitsOf(1.0f), bitsOf(1.0f), canonical, canonical},
      {canonical, canonical, canonical, canonical},
      {bitsOf(0.0f), bitsOf(-0.0f), bitsOf(0.0f), bitsOf(-0.0f)},
      {bitsOf(0.0f), bitsOf(-0.0f), bitsOf(0.0f), bitsOf(-0.0f)},
      {bitsOf(2.0f), bitsOf(-3.0f), bitsOf(2.0f), bitsOf(-3.0f)}};
  for (size_t t = 0; t < pairs.size(); ++t)
    for (unsigned k = 0; k < 4; ++k)
      EXPECT_EQ(out[t * 4 + k], want[t][k])
          << "pair " << t << " result " << k << std::hex << " got 0x"
          << out[t * 4 + k];
}

//===----------------------------------------------------------------------===//
// Floats: special values, ties, directed rounding
//===----------------------------------------------------------------------===//

enum class Dir { Rz, Rm, Rp };

/// Rounds an exactly known value (a double holding it exactly) to f32 in
/// direction `dir`, from the nearest float and its neighbours.
float roundDirected(long double exact, Dir dir) {
  float nearest = static_cast<float>(exact);
  if (static_cast<long double>(nearest) == exact)
    return nearest;
  float below = static_cast<long double>(nearest) < exact
                    ? nearest
                    : std::nextafter(nearest, -INFINITY);
  float above = std::nextafter(below, INFINITY);
  switch (dir) {
  case Dir::Rm:
    return below;
  case Dir::Rp:
    return above;
  default:
    return exact < 0 ? above : below;
  }
}

TEST(EmuInstructionTest, FloatSpecialsTiesAndDirectedRounding) {
  float inf = std::numeric_limits<float>::infinity();
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::pair<float, float>> pairs = {
      {inf, -inf},         {inf, 0.0f},   {nan, 1.0f},   {-0.0f, 0.0f},
      {1.0f, 3.0f},        {-1.0f, 3.0f}, {2.5f, 0.1f},  {-3.5f, 7.0f},
      {16777216.0f, 1.0f}, {1e10f, 0.1f}, {-2.0f, 0.3f}, {5.5f, -1e-8f}};
  std::vector<uint32_t> in;
  for (auto [x, y] : pairs) {
    in.push_back(bitsOf(x));
    in.push_back(bitsOf(y));
  }
  std::string body = R"(	mov.b32 	%f1, %r1;
	mov.b32 	%f2, %r2;
	add.rn.f32 	%f10, %f1, %f2;
	add.rz.f32 	%f11, %f1, %f2;
	add.rm.f32 	%f12, %f1, %f2;
	add.rp.f32 	%f13, %f1, %f2;
	mul.rz.f32 	%f14, %f1, %f2;
	div.rm.f32 	%f15, %f1, %f2;
	div.rp.f32 	%f16, %f1, %f2;
	sqrt.rz.f32 	%f17, %f2;
	rcp.rm.f32 	%f18, %f2;
	cvt.rni.s32.f32 	%r29, %f1;
	cvt.rni.f32.f32 	%f19, %f1;
	cvt.rn.f32.s32 	%f20, %r2;
	cvt.rz.f32.u32 	%f21, %r2;
	testp.notanumber.f32 	%p1, %f10;
	selp.u32 	%r35, 1, 0, %p1;
	testp.infinite.f32 	%p2, %f1;
	selp.u32 	%r36, 1, 0, %p2;
	slct.f32.f32 	%f22, %f1, %f2, %f2;
	mov.b32 	%r20, %f10;
	mov.b32 	%r21, %f11;
	mov.b32 	%r22, %f12;
	mov.b32 	%r23, %f13;
	mov.b32 	%r24, %f14;
	mov.b32 	%r25, %f15;
	mov.b32 	%r26, %f16;
	mov.b32 	%r27, %f17;
	mov.b32 	%r28, %f18;
	mov.b32 	%r30, %f19;
	mov.b32 	%r31, %f20;
	mov.b32 	%r32, %f21;
	mov.b32 	%r33, %f22;
	mov.b32 	%r34, %f22;
)";
  // Outputs: 0-3 add rn/rz/rm/rp, 4 mul.rz, 5-6 div rm/rp, 7 sqrt.rz,
  // 8 rcp.rm, 9 cvt.rni.s32, 10 cvt.rni.f32, 11 cvt.rn.f32.s32,
  // 12 cvt.rz.f32.u32, 13-14 slct, 15 testp.notanumber, 16 testp.infinite.
  const unsigned nout = 17;
  std::vector<uint32_t> out = runWords(body, 2, nout, in, 32);
  ASSERT_EQ(out.size(), pairs.size() * nout);
  for (size_t t = 0; t < pairs.size(); ++t) {
    float x = pairs[t].first, y = pairs[t].second;
    long double lx = x, ly = y;
    // Exact sums, products and quotients' neighbours in long double (64
    // significant bits: sums of these pairs and products are exact;
    // quotients and roots are checked by bracketing below).
    auto expectFloat = [&](unsigned k, float want) {
      float got = asFloat(out[t * nout + k]);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got)) << "pair " << t << " output " << k;
      else
        EXPECT_EQ(bitsOf(got), bitsOf(want))
            << "pair " << t << " output " << k << ": " << got << " vs " << want;
    };
    bool special = !std::isfinite(x) || !std::isfinite(y);
    expectFloat(0, x + y);
    if (!special) {
      // An exact zero sum of opposite signs is -0 when rounding down.
      bool cancels = lx + ly == 0 && std::signbit(x) != std::signbit(y);
      expectFloat(1, roundDirected(lx + ly, Dir::Rz));
      expectFloat(2, cancels ? -0.0f : roundDirected(lx + ly, Dir::Rm));
      expectFloat(3, roundDirected(lx + ly, Dir::Rp));
      expectFloat(4, roundDirected(lx * ly, Dir::Rz));
      if (y != 0) {
        // x / y: rm and rp bracket the quotient one ulp apart (or agree
        // when it is exact); products of two floats are exact in a long
        // double.
        float down = asFloat(out[t * nout + 5]),
              up = asFloat(out[t * nout + 6]);
        long double sign = y > 0 ? 1 : -1;
        EXPECT_LE(sign * (static_cast<long double>(down) * ly), sign * lx) << t;
        EXPECT_GE(sign * (static_cast<long double>(up) * ly), sign * lx) << t;
        EXPECT_TRUE(down == up || std::nextafter(down, INFINITY) == up) << t;
        EXPECT_TRUE(down == x / y || up == x / y) << t;
      }
    } else {
      expectFloat(1, x + y); // NaN and infinities are not rounded
      expectFloat(4, x * y);
    }
    if (y >= 0 && std::isfinite(y)) {
      float r = asFloat(out[t * nout + 7]); // sqrt.rz: the root rounded down
      EXPECT_LE(static_cast<long double>(r) * r, ly) << t;
      float r2 = std::nextafter(r, INFINITY);
      EXPECT_GT(static_cast<long double>(r2) * r2, ly) << t;
    }
    if (y != 0 && std::isfinite(y)) {
      // rcp.rm: the largest float at or below 1/y.
      float q = asFloat(out[t * nout + 8]);
      float q2 = std::nextafter(q, INFINITY);
      long double p = static_cast<long double>(q) * ly,
                  p2 = static_cast<long double>(q2) * ly;
      if (y > 0) {
        EXPECT_LE(p, 1.0L) << t;
        EXPECT_GT(p2, 1.0L) << t;
      } else {
        EXPECT_GE(p, 1.0L) << t;
        EXPECT_LT(p2, 1.0L) << t;
      }
    }
    // cvt.rni: ties to even (2.5 -> 2, -3.5 -> -4); NaN -> 0.
    double rounded = std::nearbyint(static_cast<double>(x));
    int32_t wantInt =
        std::isnan(x) ? 0
                      : static_cast<int32_t>(std::min(
                            std::max(rounded, -2147483648.0), 2147483647.0));
    EXPECT_EQ(static_cast<int32_t>(out[t * nout + 9]), wantInt) << t;
    expectFloat(10, std::nearbyint(x));
    int32_t iy = static_cast<int32_t>(bitsOf(y));
    expectFloat(11, static_cast<float>(iy)); // the host rounds to nearest
    expectFloat(12,
                roundDirected(static_cast<long double>(bitsOf(y)), Dir::Rz));
    // slct.f32: y >= 0 picks x (-0 counts as >= 0; NaN picks y).
    expectFloat(13, y >= 0 ? x : y);
    expectFloat(14, y >= 0 ? x : y);
    EXPECT_EQ(out[t * nout + 15], std::isnan(x + y) ? 1u : 0u) << t;
    EXPECT_EQ(out[t * nout + 16], std::isinf(x) ? 1u : 0u) << t;
  }
  // Ties: 1 + 2^-24 is halfway between 1 and the next float; nearest even
  // is 1. 16777216 + 1 likewise stays 16777216.
  EXPECT_EQ(asFloat(out[8 * nout]), 16777216.0f);
  EXPECT_EQ(asFloat(out[8 * nout + 3]), 16777218.0f); // rp goes up
}

//===----------------------------------------------------------------------===//
// Barriers
//===----------------------------------------------------------------------===//

TEST(EmuInstructionTest, NamedBarriersWithCountsAndArrive) {
  // Warp 0 produces into shared memory and arrives at barrier 1 (64
  // threads: warps 0 and 1); warp 1 waits there, then reads. Warps 2-3
  // meanwhile synchronise on barrier 2 with a count of 64. Then bar.red
  // counts, ands and ors a predicate across the whole block.
  std::string ptx = ptxHeader() + R"(.visible .entry named(
	.param .u64 .ptr .align 1 named_param_0
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 buf[128];

	ld.param.u64 	%rd1, [named_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r1, %tid.x;
	shr.u32 	%r2, %r1, 5;
	and.b32 	%r3, %r1, 31;
	shl.b32 	%r4, %r3, 2;
	mov.u32 	%r5, buf;
	add.s32 	%r6, %r5, %r4;
	mul.wide.u32 	%rd2, %r1, 16;
	add.s64 	%rd3, %rd1, %rd2;
	mov.u32 	%r7, 0;
	setp.eq.s32 	%p1, %r2, 0;
	@!%p1 bra 	$L__consumer;
	mul.lo.s32 	%r8, %r3, 3;
	st.shared.u32 	[%r6], %r8;
	bar.arrive 	1, 64;
	bra.uni 	$L__reduce;
$L__consumer:
	setp.eq.s32 	%p2, %r2, 1;
	@!%p2 bra 	$L__others;
	bar.sync 	1, 64;
	ld.shared.u32 	%r7, [%r6];
	bra.uni 	$L__reduce;
$L__others:
	barrier.sync 	2, 64;
	mov.u32 	%r7, 7;
$L__reduce:
	setp.lt.u32 	%p3, %r1, 100;
	bar.red.popc.u32 	%r9, 0, %p3;
	bar.red.and.pred 	%p4, 0, %p3;
	bar.red.or.pred 	%p5, 0, !%p3;
	selp.u32 	%r10, 1, 0, %p4;
	selp.u32 	%r11, 1, 0, %p5;
	st.global.v4.u32 	[%rd3], {%r7, %r9, %r10, %r11};
	ret;
}
)";
  Buffer out = Buffer::zeros<uint32_t>(128 * 4);
  ASSERT_EQ(runPtx(ptx, "named", {1, 1, 1}, {128, 1, 1}, {&out}), "<success>");
  std::vector<uint32_t> o = out.as<uint32_t>();
  for (unsigned t = 0; t < 128; ++t) {
    unsigned warp = t / 32;
    uint32_t want = warp == 0 ? 0 : warp == 1 ? (t % 32) * 3 : 7;
    EXPECT_EQ(o[t * 4], want) << t;
    EXPECT_EQ(o[t * 4 + 1], 100u) << t;
    EXPECT_EQ(o[t * 4 + 2], 0u) << t;
    EXPECT_EQ(o[t * 4 + 3], 1u) << t;
  }
}

TEST(EmuInstructionTest, BarrierErrors) {
  // Two warps wait at different whole-block barriers: a deadlock.
  std::string ptx = ptxHeader() + R"(.visible .entry split()
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	mov.u32 	%r1, %tid.x;
	setp.ge.u32 	%p1, %r1, 32;
	@%p1 bra 	$L__second;
	bar.sync 	0;
	ret;
$L__second:
	bar.sync 	1;
	ret;
}
)";
  EXPECT_EQ(runPtx(ptx, "split", {1, 1, 1}, {64, 1, 1}, {}),
            "kernel 'split', block (0,0,0), thread (0,0,0), PTX line 12 "
            "(bar.sync): barrier 0 waits while thread (32,0,0) waits at "
            "barrier 1: neither can complete");
  // A barrier id past 15.
  std::string bad = ptxHeader() + R"(.visible .entry badid()
{
	bar.sync 	16;
	ret;
}
)";
  EXPECT_THAT(runPtx(bad, "badid", {1, 1, 1}, {32, 1, 1}, {}),
              HasSubstr("barrier 16 does not exist"));
}

//===----------------------------------------------------------------------===//
// .func and call
//===----------------------------------------------------------------------===//

const char *kCallsModule = R"(.func  (.param .b32 func_retval0) triple(
	.param .b32 triple_param_0
)
;
.func  (.param .b32 func_retval0) scale_or_diff(
	.param .b32 scale_or_diff_param_0,
	.param .b32 scale_or_diff_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	ld.param.u32 	%r1, [scale_or_diff_param_0];
	ld.param.u32 	%r2, [scale_or_diff_param_1];
	setp.gt.u32 	%p1, %r1, 10;
	@%p1 bra 	$L__big;
	{ // callseq 1, 0
	.param .b32 	param0;
	.param .b32 	retval0;
	st.param.b32 	[param0], %r1;
	call.uni (retval0), triple, (param0);
	ld.param.b32 	%r3, [retval0];
	} // callseq 1
	add.s32 	%r4, %r3, %r2;
	st.param.b32 	[func_retval0], %r4;
	ret;
$L__big:
	sub.s32 	%r4, %r1, %r2;
	st.param.b32 	[func_retval0], %r4;
	ret;
}
.func  (.param .b32 func_retval0) triple(
	.param .b32 triple_param_0
)
{
	.reg .b32 	%r<3>;
	ld.param.u32 	%r1, [triple_param_0];
	mul.lo.s32 	%r2, %r1, 3;
	st.param.b32 	[func_retval0], %r2;
	ret;
}
.func store_twice(
	.param .b64 store_twice_param_0,
	.param .b32 store_twice_param_1
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<2>;
	ld.param.u64 	%rd1, [store_twice_param_0];
	ld.param.u32 	%r1, [store_twice_param_1];
	shl.b32 	%r2, %r1, 1;
	st.global.u32 	[%rd1], %r2;
	ret;
}
.visible .entry calls(
	.param .u64 .ptr .align 1 calls_param_0,
	.param .u64 .ptr .align 1 calls_param_1
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [calls_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [calls_param_1];
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r0, %tid.x;
	mul.wide.u32 	%rd3, %r0, 4;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.u32 	%r1, [%rd4];
	mul.wide.u32 	%rd5, %r0, 16;
	add.s64 	%rd6, %rd2, %rd5;
	mov.u32 	%r2, 5;
	{ // callseq 2, 0
	.param .b32 	param0;
	.param .b32 	param1;
	.param .b32 	retval0;
	st.param.b32 	[param0], %r1;
	st.param.b32 	[param1], %r2;
	call.uni (retval0), scale_or_diff, (param0, param1);
	ld.param.b32 	%r10, [retval0];
	} // callseq 2
	add.s32 	%r3, %r1, 1;
	{ // callseq 3, 0
	.param .b32 	param0;
	.param .b32 	param1;
	.param .b32 	retval0;
	st.param.b32 	[param0], %r3;
	st.param.b32 	[param1], %r1;
	call (retval0), scale_or_diff, (param0, param1);
	ld.param.b32 	%r11, [retval0];
	} // callseq 3
	and.b32 	%r4, %r0, 1;
	setp.eq.s32 	%p1, %r4, 0;
	add.s64 	%rd7, %rd6, 12;
	{ // callseq 4, 0
	.param .b64 	param0;
	.param .b32 	param1;
	st.param.b64 	[param0], %rd7;
	st.param.b32 	[param1], %r1;
	@%p1 call.uni store_twice, (param0, param1);
	} // callseq 4
	bra.uni 	$L__scoped;
	mov.u32 	%r12, 99;
$L__scoped:
	{ .reg .b32 tmp; add.s32 tmp, %r1, 7; mov.u32 %r12, tmp; }
	st.global.u32 	[%rd6], %r10;
	st.global.u32 	[%rd6+4], %r11;
	st.global.u32 	[%rd6+8], %r12;
	ret;
}
)";

TEST(EmuInstructionTest, FunctionCallsAreInlined) {
  // Two call sites of one function (which calls another, declared after
  // it, and returns from two places while its lanes diverge), a predicated
  // call of a function without a return value, and a label in front of a
  // scope.
  std::vector<uint32_t> in(64);
  for (uint32_t t = 0; t < 64; ++t)
    in[t] = (t * 7) % 23;
  Buffer bufIn = Buffer::of(in), out = Buffer::zeros<uint32_t>(64 * 4);
  ASSERT_EQ(runPtx(ptxHeader() + kCallsModule, "calls", {1, 1, 1}, {64, 1, 1},
                   {&bufIn, &out}),
            "<success>");
  std::vector<uint32_t> o = out.as<uint32_t>();
  auto f = [](uint32_t x, uint32_t y) { return x > 10 ? x - y : 3 * x + y; };
  for (uint32_t t = 0; t < 64; ++t) {
    uint32_t x = in[t];
    EXPECT_EQ(o[t * 4], f(x, 5)) << t;
    EXPECT_EQ(o[t * 4 + 1], f(x + 1, x)) << t;
    EXPECT_EQ(o[t * 4 + 2], x + 7) << t;
    EXPECT_EQ(o[t * 4 + 3], t % 2 == 0 ? 2 * x : 0) << t;
  }
}

TEST(EmuInstructionTest, CallErrors) {
  std::string recursive = ptxHeader() + R"(.func loop(
	.param .b32 loop_param_0
)
{
	.reg .b32 	%r<2>;
	ld.param.u32 	%r1, [loop_param_0];
	{
	.param .b32 	param0;
	st.param.b32 	[param0], %r1;
	call.uni loop, (param0);
	}
	ret;
}
.visible .entry k()
{
	.reg .b32 	%r<2>;
	mov.u32 	%r1, 0;
	{
	.param .b32 	param0;
	st.param.b32 	[param0], %r1;
	call.uni loop, (param0);
	}
	ret;
}
)";
  Expected<emu::Module> module = emu::parsePtx(recursive);
  ASSERT_FALSE(module.hasValue());
  EXPECT_EQ(module.error().message(),
            "PTX line 14: recursive call to 'loop' is not emulated (inlined "
            "from the call at PTX line 25)");
  std::string arity = ptxHeader() + R"(.func one(
	.param .b32 one_param_0
)
{
	ret;
}
.visible .entry k()
{
	call.uni one, ();
	ret;
}
)";
  module = emu::parsePtx(arity);
  ASSERT_FALSE(module.hasValue());
  EXPECT_EQ(module.error().message(),
            "PTX line 13: call to 'one' passes 0 arguments and 0 return "
            "values; it takes 1 and 0");
}

TEST(EmuInstructionTest, GenericAccessesToLocalMemory) {
  // LLVM's pattern for a local array whose address escapes: cvta.local to a
  // generic pointer, generic stores, .local loads (each thread its own).
  std::string decls = "\t.local .align 4 .b8 depot[16];\n"
                      "\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n";
  std::string body = R"(	mov.u64 	%SPL, depot;
	cvta.local.u64 	%SP, %SPL;
	st.u32 	[%SP], %r1;
	mul.lo.s32 	%r5, %r1, 3;
	st.u32 	[%SP+12], %r5;
	ld.local.u32 	%r20, [%SPL+12];
	ld.local.u32 	%r21, [%SPL];
	cvta.to.local.u64 	%rd10, %SP;
	ld.local.u32 	%r22, [%rd10];
)";
  std::vector<uint32_t> in(64);
  for (uint32_t t = 0; t < 64; ++t)
    in[t] = t * 11 + 1;
  std::vector<uint32_t> out = runWords(body, 1, 3, in, 64, decls);
  ASSERT_EQ(out.size(), 64u * 3);
  for (uint32_t t = 0; t < 64; ++t) {
    EXPECT_EQ(out[t * 3], in[t] * 3) << t;
    EXPECT_EQ(out[t * 3 + 1], in[t]) << t;
    EXPECT_EQ(out[t * 3 + 2], in[t]) << t;
  }
  // Past the 16 bytes each thread has: reported like a .local access.
  std::string bad = body + "\tst.u32 \t[%SP+16], %r1;\n";
  Buffer bufIn = Buffer::of(in), outBuf = Buffer::zeros<uint32_t>(64 * 3);
  EXPECT_THAT(runPtx(wordKernel(bad, 1, 3, decls), "k", {1, 1, 1}, {64, 1, 1},
                     {&bufIn, &outBuf}),
              HasSubstr("(st.u32): out-of-bounds local store of 4 bytes at "
                        "offset 16 (each thread has 16 bytes)"));
}

//===----------------------------------------------------------------------===//
// Special registers
//===----------------------------------------------------------------------===//

TEST(EmuInstructionTest, SpecialRegisters) {
  std::string body = R"(	mov.u32 	%r20, %lanemask_lt;
	mov.u32 	%r21, %lanemask_le;
	mov.u32 	%r22, %lanemask_gt;
	mov.u32 	%r23, %lanemask_ge;
	mov.u32 	%r24, %lanemask_eq;
	mov.u32 	%r25, %warpid;
	mov.u32 	%r26, %nwarpid;
	mov.u32 	%r27, %smid;
	mov.u32 	%r28, %nsmid;
	mov.u64 	%rd10, %clock64;
	add.s32 	%r5, %r1, 1;
	add.s32 	%r5, %r5, 1;
	mov.u64 	%rd11, %clock64;
	sub.s64 	%rd12, %rd11, %rd10;
	setp.gt.s64 	%p1, %rd12, 0;
	selp.u32 	%r29, 1, 0, %p1;
	mov.u32 	%r30, %clock;
	mov.u64 	%rd13, %globaltimer;
	setp.gt.u64 	%p2, %rd13, 0;
	selp.u32 	%r31, 1, 0, %p2;
	mov.u32 	%r32, %total_smem_size;
	mov.u32 	%r33, %dynamic_smem_size;
)";
  std::vector<uint32_t> in(96, 0);
  std::vector<uint32_t> out = runWords(body, 1, 14, in, 96);
  ASSERT_EQ(out.size(), 96u * 14);
  for (unsigned t = 0; t < 96; ++t) {
    unsigned l = t % 32;
    const uint32_t *g = &out[t * 14];
    uint32_t lt = static_cast<uint32_t>((1ull << l) - 1);
    uint32_t le = static_cast<uint32_t>((2ull << l) - 1);
    EXPECT_EQ(g[0], lt) << t;
    EXPECT_EQ(g[1], le) << t;
    EXPECT_EQ(g[2], ~le) << t;
    EXPECT_EQ(g[3], ~lt) << t;
    EXPECT_EQ(g[4], 1u << l) << t;
    EXPECT_EQ(g[5], t / 32) << t;
    EXPECT_EQ(g[6], 3u) << t;
    EXPECT_EQ(g[7], 0u) << t;
    EXPECT_EQ(g[8], 1u) << t;
    EXPECT_EQ(g[9], 1u) << t; // %clock64 advances
    EXPECT_EQ(g[11], 1u) << t;
    EXPECT_EQ(g[12], 0u) << t;
    EXPECT_EQ(g[13], 0u) << t;
  }
}

//===----------------------------------------------------------------------===//
// Launch flags: random block order, the shared-read check
//===----------------------------------------------------------------------===//

/// Runs a kernel through emu::runKernel with the given spec tweaks.
std::string runDirect(const std::string &ptx, Dim3 grid, Dim3 block,
                      std::vector<uint32_t> &buffer, emu::LaunchSpec spec) {
  dumpPtx(ptx, "direct");
  Expected<emu::Module> module = emu::parsePtx(ptx);
  if (!module)
    return module.error().message();
  std::vector<emu::MemoryRegion> memory = {
      {1ull << 40, buffer.size() * 4,
       reinterpret_cast<uint8_t *>(buffer.data())}};
  PackedParams params;
  params.addU64(1ull << 40);
  spec.grid = grid;
  spec.block = block;
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &memory;
  Error err = emu::runKernel(module->kernels[0], spec);
  return err ? err.message() : "<success>";
}

const char *kBlockOrderKernel = R"(.visible .entry order(
	.param .u64 .ptr .align 1 order_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;
	ld.param.u64 	%rd1, [order_param_0];
	mov.u32 	%r1, %ctaid.x;
	atom.global.add.u32 	%r2, [%rd1], 1;
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3+4], %r2;
	ret;
}
)";

TEST(EmuInstructionTest, RandomBlockOrder) {
  // Each block records when it ran (a ticket from an atomic counter): in
  // order without a seed, a permutation of 0..63 that is not the identity
  // with one, and the same permutation for the same seed.
  std::string ptx = ptxHeader() + kBlockOrderKernel;
  auto run = [&](uint64_t seed) {
    std::vector<uint32_t> buffer(65, 0);
    emu::LaunchSpec spec;
    spec.blockOrderSeed = seed;
    EXPECT_EQ(runDirect(ptx, {64, 1, 1}, {1, 1, 1}, buffer, spec), "<success>");
    return std::vector<uint32_t>(buffer.begin() + 1, buffer.end());
  };
  std::vector<uint32_t> identity(64);
  for (uint32_t i = 0; i < 64; ++i)
    identity[i] = i;
  EXPECT_EQ(run(0), identity);
  std::vector<uint32_t> shuffled = run(42);
  EXPECT_NE(shuffled, identity);
  std::vector<uint32_t> sorted = shuffled;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity);
  EXPECT_EQ(run(42), shuffled);
  EXPECT_NE(run(43), shuffled);
}

TEST(EmuInstructionTest, SharedReadCheck) {
  // Thread t writes buf[t] for t < 31 only, then everyone reads buf[t]:
  // thread 31 reads a word no thread wrote.
  std::string ptx = ptxHeader() + R"(.visible .entry uninit(
	.param .u64 .ptr .align 1 uninit_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 buf[128];
	ld.param.u64 	%rd1, [uninit_param_0];
	mov.u32 	%r1, %tid.x;
	shl.b32 	%r2, %r1, 2;
	mov.u32 	%r3, buf;
	add.s32 	%r4, %r3, %r2;
	setp.lt.u32 	%p1, %r1, %r5;
	@%p1 st.shared.u32 	[%r4], %r1;
	bar.sync 	0;
	ld.shared.u32 	%r6, [%r4];
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r6;
	ret;
}
)";
  // %r5 (the number of writers) is never set: registers start at 0, so
  // set it through a tiny edit per case.
  auto kernelWith = [&](unsigned writers) {
    std::string k = ptx;
    k.replace(k.find("setp.lt.u32 	%p1, %r1, %r5"),
              std::string("setp.lt.u32 	%p1, %r1, %r5").size(),
              "setp.lt.u32 	%p1, %r1, " + std::to_string(writers));
    return k;
  };
  std::vector<uint32_t> buffer(32, 0);
  emu::LaunchSpec spec;
  spec.checkSharedReads = true;
  EXPECT_EQ(runDirect(kernelWith(32), {1, 1, 1}, {32, 1, 1}, buffer, spec),
            "<success>");
  EXPECT_EQ(runDirect(kernelWith(31), {1, 1, 1}, {32, 1, 1}, buffer, spec),
            "kernel 'uninit', block (0,0,0), thread (31,0,0), PTX line 21 "
            "(ld.shared.u32): reads shared memory at offset 124 that no "
            "thread of the block wrote in this launch");
  // Without the flag the read is of zeros, as on a fresh launch here.
  spec.checkSharedReads = false;
  EXPECT_EQ(runDirect(kernelWith(31), {1, 1, 1}, {32, 1, 1}, buffer, spec),
            "<success>");
  EXPECT_EQ(buffer[31], 0u);
}

TEST(EmuInstructionTest, WarpsWaitingForEachOtherMakeProgress) {
  // Warp 0 spins on a shared flag that warp 1 sets after writing data:
  // warps take turns (time slices), so the spin ends.
  std::string body = R"(	mov.u32 	%r5, flag;
	mov.u32 	%r6, data;
	setp.ne.s32 	%p1, %r0, 0;
	@%p1 bra 	$L__init_done;
	st.volatile.shared.u32 	[%r5], 0;
$L__init_done:
	bar.sync 	0;
	shl.b32 	%r7, %r0, 2;
	and.b32 	%r7, %r7, 127;
	add.s32 	%r8, %r6, %r7;
	mov.u32 	%r20, 0;
	setp.ge.u32 	%p2, %r0, 32;
	@%p2 bra 	$L__producer;
$L__spin:
	ld.volatile.shared.u32 	%r9, [%r5];
	setp.eq.s32 	%p3, %r9, 0;
	@%p3 bra 	$L__spin;
	ld.volatile.shared.u32 	%r20, [%r8];
	bra.uni 	$L__done;
$L__producer:
	add.s32 	%r10, %r0, 1000;
	st.volatile.shared.u32 	[%r8], %r10;
	membar.cta;
	setp.eq.s32 	%p4, %r0, 32;
	@%p4 st.volatile.shared.u32 	[%r5], 1;
$L__done:
)";
  std::string decls = "\t.shared .align 4 .b32 flag;\n"
                      "\t.shared .align 4 .b8 data[128];\n";
  std::vector<uint32_t> in(64, 0);
  std::vector<uint32_t> out = runWords(body, 1, 1, in, 64, decls);
  ASSERT_EQ(out.size(), 64u);
  for (uint32_t t = 0; t < 32; ++t)
    EXPECT_EQ(out[t], t + 32 + 1000) << t;
  for (uint32_t t = 32; t < 64; ++t)
    EXPECT_EQ(out[t], 0u) << t;
}

TEST(EmuInstructionTest, EndlessLoopIsReportedWithALimit) {
  std::string ptx = ptxHeader() + R"(.visible .entry forever(
	.param .u64 .ptr .align 1 forever_param_0
)
{
	.reg .b32 	%r<4>;
	mov.u32 	%r1, 0;
$L__top:
	add.s32 	%r1, %r1, 1;
	bra.uni 	$L__top;
}
)";
  std::vector<uint32_t> buffer(4, 0);
  emu::LaunchSpec spec;
  spec.maxWarpInstructionsPerBlock = 1000000;
  // The loop's add or its branch, whichever the warp was at.
  std::string message = runDirect(ptx, {1, 1, 1}, {32, 1, 1}, buffer, spec);
  EXPECT_THAT(message,
              ::testing::AnyOf(HasSubstr("PTX line 12 (add.s32): the block is "
                                         "still running after"),
                               HasSubstr("PTX line 13 (bra.uni): the block is "
                                         "still running after")));
  EXPECT_THAT(message, ::testing::StartsWith(
                           "kernel 'forever', block (0,0,0), thread (0,0,0)"));
}

TEST(EmuInstructionTest, UnknownInstructionNamesItsLine) {
  std::string ptx = ptxHeader() + R"(.visible .entry odd()
{
	.reg .b32 	%r<4>;
	mov.u32 	%r1, 1;
	fns.b32 	%r2, %r1, 0, 1;
	ret;
}
)";
  dumpPtx(ptx, "odd");
  Expected<emu::Module> module = emu::parsePtx(ptx);
  ASSERT_FALSE(module.hasValue());
  EXPECT_EQ(module.error().message(),
            "PTX line 9: unsupported instruction 'fns.b32' in kernel 'odd'");
}

} // namespace

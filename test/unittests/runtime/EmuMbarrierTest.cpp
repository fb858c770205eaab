//===- EmuMbarrierTest.cpp - mbarrier on the emulator ---------------------===//
//
// The expected behaviour is the PTX ISA's ("Parallel Synchronization and
// Communication Instructions: mbarrier"): init sets the expected and
// pending arrival counts and phase 0; a phase completes when its pending
// count and tx-count are zero, and the next phase starts with the expected
// count; test_wait/try_wait.parity P complete once the phase of parity P
// has (the current phase's parity is no longer P); with a state operand,
// once the phase the state came from has. The tests check values against
// those rules, worked out by hand in each test.
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// A kernel k(u64 out) with an 8-byte mbarrier `bar` and 4 KiB `buf` in
/// shared memory. %r0 = tid, %r1 = warp, %r2 = lane, %r9 = the mbarrier's
/// shared address, %r10 = buf's; %rd3 = &out[tid * 4] (4 words a thread).
std::string mbarrierKernel(const std::string &body) {
  return sm90Header() + R"(.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<16>;
	.shared .align 8 .b64 bar;
	.shared .align 128 .b8 buf[4096];
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r0, %tid.x;
	shr.u32 	%r1, %r0, 5;
	and.b32 	%r2, %r0, 31;
	mul.wide.u32 	%rd2, %r0, 16;
	add.s64 	%rd3, %rd1, %rd2;
	mov.u32 	%r9, bar;
	mov.u32 	%r10, buf;
)" + body + "\tret;\n}\n";
}

DirectResult run(const std::string &body, unsigned threads,
                 std::vector<uint32_t> &out) {
  DirectMemory memory;
  size_t index = memory.add(std::vector<uint32_t>(threads * 4, 0xdeadbeef));
  ParamBytes params;
  params.addU64(DirectMemory::address(index));
  DirectResult result = runDirect(mbarrierKernel(body), {2, 1, 1},
                                  {threads, 1, 1}, params, memory);
  out = memory.as<uint32_t>(index);
  return result;
}

// Warp 0 (the consumer) waits on phase 0 before warp 1 (the producer) has
// run at all: the wait must let warp 1 run, and see its shared store.
TEST(EmuMbarrierTest, ConsumerWaitsForProducer) {
  std::string body = R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_init_done;
	mov.u32 	%r11, 1;
	mbarrier.init.shared::cta.b64 	[%r9], %r11;
	fence.mbarrier_init.release.cluster;
$L_init_done:
	bar.sync 	0;
	setp.eq.u32 	%p2, %r1, 1;
	@%p2 bra 	$L_producer;
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r9], 0;
	@!%p3 bra 	$L_wait;
	ld.shared.u32 	%r20, [buf];
	st.global.u32 	[%rd3], %r20;
	ret;
$L_producer:
	setp.ne.u32 	%p4, %r2, 0;
	@%p4 bra 	$L_done;
	mov.u32 	%r12, 4242;
	st.shared.u32 	[buf], %r12;
	mbarrier.arrive.release.cta.shared::cta.b64 	%rd5, [%r9];
	cvt.u32.u64 	%r13, %rd5;
	st.global.u32 	[%rd3], %r13;
$L_done:
)";
  std::vector<uint32_t> out;
  DirectResult result = run(body, 64, out);
  ASSERT_EQ(result.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(out[t * 4], 4242u) << t;
  // The producer's state is the phase it arrived in: 0.
  EXPECT_EQ(out[32 * 4], 0u);
  // The consumers blocked rather than spun: far fewer than a time slice
  // of instructions per block.
  EXPECT_LT(result.stats.warpInstructions, 400u);
}

// Two arrivals per phase, from lanes 0 and 1; the state of each arrive
// names its phase; test_wait does not block.
TEST(EmuMbarrierTest, PhasesCountsAndStates) {
  std::string body = R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_out;
	mov.u32 	%r11, 2;
	mbarrier.init.shared.b64 	[%r9], %r11;
	mov.u64 	%rd6, bar;
	cvta.shared.u64 	%rd6, %rd6;
	// Phase 0: one arrival of two.
	mbarrier.arrive.shared.b64 	%rd7, [%r9];
	mbarrier.test_wait.shared.b64 	%p2, [%r9], %rd7;
	selp.u32 	%r20, 1, 0, %p2;
	// The second arrival (generic address) completes phase 0.
	mbarrier.arrive.b64 	%rd8, [%rd6];
	mbarrier.test_wait.b64 	%p3, [%rd6], %rd7;
	selp.u32 	%r21, 1, 0, %p3;
	// Phase 1: an arrive with a count of 2 completes it at once.
	mbarrier.arrive.shared::cta.b64 	%rd9, [%r9], 2;
	mbarrier.test_wait.parity.shared.b64 	%p4, [%r9], 1;
	selp.u32 	%r22, 1, 0, %p4;
	// Phase 2 (parity 0) is open: parity 0 is not complete.
	mbarrier.test_wait.parity.shared.b64 	%p5, [%r9], 0;
	selp.u32 	%r23, 1, 0, %p5;
	cvt.u32.u64 	%r24, %rd7;
	cvt.u32.u64 	%r25, %rd8;
	cvt.u32.u64 	%r26, %rd9;
	shl.b32 	%r24, %r24, 16;
	shl.b32 	%r25, %r25, 8;
	or.b32 	%r24, %r24, %r25;
	or.b32 	%r24, %r24, %r26;
	st.global.v4.u32 	[%rd3], {%r20, %r21, %r22, %r24};
	st.global.u32 	[%rd3+12], %r24;
	mov.u32 	%r27, %r23;
	st.global.u32 	[%rd3+16], %r27;
$L_out:
)";
  std::vector<uint32_t> out;
  DirectResult result = run(body, 32, out);
  ASSERT_EQ(result.error, "<success>");
  EXPECT_EQ(out[0], 0u); // phase 0 incomplete after one arrival
  EXPECT_EQ(out[1], 1u); // complete after the second
  EXPECT_EQ(out[2], 1u); // phase 1 (parity 1) complete
  // States: phases 0, 0 and 1.
  EXPECT_EQ(out[3], (0u << 16) | (0u << 8) | 1u);
  EXPECT_EQ(out[4], 0u); // thread 1's first word holds phase 2's test
}

// The tx-count: arrive.expect_tx adds bytes, complete_tx removes them; the
// phase completes only when both counts are zero.
TEST(EmuMbarrierTest, TransactionCounts) {
  std::string body = R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_out;
	mbarrier.init.shared::cta.b64 	[%r9], 1;
	mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 	_, [%r9], 64;
	mbarrier.test_wait.parity.shared::cta.b64 	%p2, [%r9], 0;
	selp.u32 	%r20, 1, 0, %p2;
	mbarrier.complete_tx.shared::cta.b64 	[%r9], 32;
	mbarrier.test_wait.parity.shared::cta.b64 	%p3, [%r9], 0;
	selp.u32 	%r21, 1, 0, %p3;
	mbarrier.expect_tx.shared::cta.b64 	[%r9], 16;
	mbarrier.complete_tx.shared::cta.b64 	[%r9], 48;
	mbarrier.try_wait.parity.shared::cta.b64 	%p4, [%r9], 0, 1000;
	selp.u32 	%r22, 1, 0, %p4;
	mbarrier.inval.shared::cta.b64 	[%r9];
	st.global.v4.u32 	[%rd3], {%r20, %r21, %r22, %r22};
$L_out:
)";
  std::vector<uint32_t> out;
  DirectResult result = run(body, 32, out);
  ASSERT_EQ(result.error, "<success>");
  EXPECT_EQ(out[0], 0u); // 64 bytes outstanding
  EXPECT_EQ(out[1], 0u); // 32 outstanding
  EXPECT_EQ(out[2], 1u); // 64 + 16 - 32 - 48 = 0
}

TEST(EmuMbarrierTest, WaitingForeverIsADeadlock) {
  std::string body = R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_skip;
	mbarrier.init.shared::cta.b64 	[%r9], 2;
	mbarrier.arrive.shared::cta.b64 	_, [%r9];
$L_skip:
	bar.sync 	0;
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r9], 0;
	@!%p3 bra 	$L_wait;
)";
  std::vector<uint32_t> out;
  DirectResult result = run(body, 64, out);
  EXPECT_THAT(result.error, HasSubstr("kernel 'k', block (0,0,0)"));
  EXPECT_THAT(result.error, HasSubstr("mbarrier.try_wait.parity"));
  EXPECT_THAT(result.error,
              HasSubstr("deadlock: mbarrier.try_wait on the mbarrier at "
                        "shared offset 0 waits for the phase of parity 0"));
  EXPECT_THAT(result.error, HasSubstr("1 of 2 arrivals pending"));
}

TEST(EmuMbarrierTest, MisuseFaults) {
  std::vector<uint32_t> out;
  DirectResult result =
      run("\tmbarrier.arrive.shared::cta.b64 \t_, [%r9];\n", 32, out);
  EXPECT_THAT(result.error, HasSubstr("the mbarrier at shared offset 0 is "
                                      "not initialized (mbarrier.init)"));
  result = run("\tmbarrier.init.shared::cta.b64 \t[%r9], 1;\n"
               "\tmbarrier.arrive.shared::cta.b64 \t_, [%r9], 3;\n",
               32, out);
  EXPECT_THAT(result.error, HasSubstr("arrives 3 times on the mbarrier"));
  result = run("\tmbarrier.init.shared::cta.b64 \t[%r9], 1;\n"
               "\tmbarrier.inval.shared::cta.b64 \t[%r9];\n"
               "\tmbarrier.arrive.shared::cta.b64 \t_, [%r9];\n",
               1, out);
  EXPECT_THAT(result.error, HasSubstr("is invalidated (mbarrier.inval)"));
  result = run("\tmbarrier.init.shared::cta.b64 \t[%r10+4], 1;\n", 1, out);
  EXPECT_THAT(result.error, HasSubstr("misaligned shared mbarrier access"));
  result = run("\tmbarrier.init.shared::cta.b64 \t[%r9], 0;\n", 1, out);
  EXPECT_THAT(result.error, HasSubstr("arrival count of 0"));
  Expected<emu::Module> bad =
      emu::parsePtx(mbarrierKernel("\tmbarrier.arrive.shared.b32 \t_, [%r9];\n"));
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("needs .b64"));
}

// cp.async.mbarrier.arrive: the arrive-on happens when the thread's earlier
// cp.async copies have landed, so the waiting thread sees them. With
// .noinc it counts as one of the phase's arrivals; without, the pending
// count was raised first, so the phase needs its own arrival too (lane 0's,
// after the arrive-ons: 1 + 32 - 1 pending until the copies land).
TEST(EmuMbarrierTest, CpAsyncArriveOn) {
  for (bool noinc : {true, false}) {
    std::string body = std::string(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_init_done;
	mbarrier.init.shared::cta.b64 	[%r9], )") +
                       (noinc ? "32" : "1") + R"(;
$L_init_done:
	bar.sync 	0;
	setp.ne.u32 	%p2, %r1, 1;
	@%p2 bra 	$L_consumer;
	// Warp 1 copies in[lane] (the out buffer's first words) into buf.
	mul.wide.u32 	%rd10, %r2, 4;
	add.s64 	%rd11, %rd1, %rd10;
	shl.b32 	%r12, %r2, 2;
	add.s32 	%r13, %r10, %r12;
	cp.async.ca.shared.global 	[%r13], [%rd11], 4;
	cp.async.mbarrier.arrive)" +
                       (noinc ? ".noinc" : "") + R"(.shared::cta.b64 	[%r9];
	setp.eq.u32 	%p5, %r2, 0;
)" + (noinc ? "" : "\t@%p5 mbarrier.arrive.shared::cta.b64 \t_, [%r9];\n") +
                       R"(	ret;
$L_consumer:
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r9], 0;
	@!%p3 bra 	$L_wait;
	shl.b32 	%r14, %r2, 2;
	add.s32 	%r15, %r10, %r14;
	ld.shared.u32 	%r20, [%r15];
	st.global.u32 	[%rd3+4], %r20;
)";
    DirectMemory memory;
    std::vector<uint32_t> init(64 * 4);
    for (unsigned i = 0; i < init.size(); ++i)
      init[i] = 500 + i;
    size_t index = memory.add(init);
    ParamBytes params;
    params.addU64(DirectMemory::address(index));
    DirectResult result = runDirect(mbarrierKernel(body), {1, 1, 1},
                                    {64, 1, 1}, params, memory);
    ASSERT_EQ(result.error, "<success>") << noinc;
    std::vector<uint32_t> out = memory.as<uint32_t>(index);
    for (unsigned t = 0; t < 32; ++t)
      EXPECT_EQ(out[t * 4 + 1], 500u + t) << noinc << " " << t;
  }
}

// A spin on test_wait (which does not block) still lets the producer run.
TEST(EmuMbarrierTest, TestWaitSpinYields) {
  std::string body = R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_init_done;
	mbarrier.init.shared::cta.b64 	[%r9], 1;
$L_init_done:
	bar.sync 	0;
	setp.eq.u32 	%p2, %r1, 1;
	@%p2 bra 	$L_producer;
$L_spin:
	mbarrier.test_wait.parity.shared::cta.b64 	%p3, [%r9], 0;
	@!%p3 bra 	$L_spin;
	ld.shared.u32 	%r20, [buf];
	st.global.u32 	[%rd3], %r20;
	ret;
$L_producer:
	@%p1 bra 	$L_lane;
$L_lane:
	setp.ne.u32 	%p4, %r2, 0;
	@%p4 bra 	$L_done;
	mov.u32 	%r12, 77;
	st.shared.u32 	[buf], %r12;
	mbarrier.arrive.shared::cta.b64 	_, [%r9];
$L_done:
)";
  std::vector<uint32_t> out;
  DirectResult result = run(body, 64, out);
  ASSERT_EQ(result.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(out[t * 4], 77u) << t;
  EXPECT_LT(result.stats.warpInstructions, 1000u);
}

} // namespace

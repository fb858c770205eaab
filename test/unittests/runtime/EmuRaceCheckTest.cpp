//===- EmuRaceCheckTest.cpp - The emulator's race and hazard checker ------===//
//
// LaunchSpec::checkRaces (KILN_EMU_CHECK=races) on hand-written kernels,
// each in a correct form (clean, with its numbers checked where it computes
// any) and with its synchronisation removed or misplaced (caught, the
// report naming both threads and both PTX lines, which the tests find in
// the kernel text by a marker comment, not from the emulator). The
// orderings are the PTX ISA's memory model: barriers, mbarrier
// arrive/wait, warp-synchronous exchanges (lanes of one warp are not
// ordered by running together), cp.async/wgmma/bulk groups, and
// fence.proxy.async between the generic and the async proxy.
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include <gmock/gmock.h>

#include <sstream>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// A kernel k(u32 *out) with 4 KiB of shared memory `smem` (offset 0) and
/// an mbarrier `bar` (offset 4096). %r0 = tid, %r1 = lane, %r2 = warp,
/// %r3 = smem, %r4 = bar, %r5 = ctaid.x; %rd1 = out (global);
/// %rd2 = &out[tid].
std::string kernel(const std::string &body) {
  return sm90Header() + R"(.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<16>;
	.reg .b16 	%h<8>;
	.reg .b32 	%r<64>;
	.reg .b64 	%rd<32>;
	.reg .f32 	%f<16>;
	.shared .align 1024 .b8 smem[4096];
	.shared .align 8 .b64 bar;
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r0, %tid.x;
	and.b32 	%r1, %r0, 31;
	shr.u32 	%r2, %r0, 5;
	mov.u32 	%r3, smem;
	mov.u32 	%r4, bar;
	mov.u32 	%r5, %ctaid.x;
	mul.wide.u32 	%rd3, %r0, 4;
	add.s64 	%rd2, %rd1, %rd3;
)" + body + "\tret;\n}\n";
}

/// The 1-based line of `ptx` holding `marker` (a comment in the kernel).
unsigned lineOf(const std::string &ptx, const std::string &marker) {
  std::istringstream in(ptx);
  std::string line;
  for (unsigned n = 1; std::getline(in, line); ++n)
    if (line.find(marker) != std::string::npos)
      return n;
  ADD_FAILURE() << "no line holds " << marker;
  return 0;
}

struct RunResult {
  std::string error = "<success>";
  std::vector<uint32_t> out;
};

/// Runs kernel 0 of `ptx` on `blocks` x `threads`, blocks in linear order
/// on one host thread, with the race check on or off.
RunResult run(const std::string &ptx, unsigned threads, bool check = true,
        unsigned blocks = 1) {
  dumpPtx(ptx, "races");
  RunResult result;
  Expected<emu::Module> module = emu::parsePtx(ptx);
  if (!module) {
    result.error = module.error().message();
    return result;
  }
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(1024, 0));
  std::vector<emu::MemoryRegion> regions;
  for (size_t i = 0; i < memory.buffers.size(); ++i)
    regions.push_back({DirectMemory::address(i), memory.buffers[i].size(),
                       memory.buffers[i].data()});
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  emu::LaunchSpec spec;
  spec.grid = {blocks, 1, 1};
  spec.block = {threads, 1, 1};
  spec.params = params.bytes.data();
  spec.paramBytes = params.bytes.size();
  spec.memory = &regions;
  spec.checkRaces = check;
  spec.maxWarpInstructionsPerBlock = 200000;
  Error err = emu::runKernel(module->kernels[0], spec);
  if (err)
    result.error = err.message();
  result.out = memory.as<uint32_t>(out);
  return result;
}

std::string at(const std::string &ptx, const std::string &marker,
               const std::string &opcode) {
  return "PTX line " + std::to_string(lineOf(ptx, marker)) + " (" + opcode +
         ")";
}

//===----------------------------------------------------------------------===//
// Barriers
//===----------------------------------------------------------------------===//

/// Each of 64 threads stores its id, then reads its partner's in the other
/// warp (tid ^ 32): the exchange a tiled transpose makes.
std::string exchange(bool barrier) {
  return kernel(std::string(R"(
	shl.b32 	%r10, %r0, 2;
	add.s32 	%r11, %r3, %r10;
	st.shared.u32 	[%r11], %r0; // @store
)") + (barrier ? "\tbar.sync \t0;\n" : "") +
                R"(	xor.b32 	%r12, %r0, 32;
	shl.b32 	%r13, %r12, 2;
	add.s32 	%r14, %r3, %r13;
	ld.shared.u32 	%r15, [%r14]; // @load
	st.global.u32 	[%rd2], %r15;
)");
}

TEST(EmuRaceCheckTest, PlantedMissingBarrierIsCaughtNamingThreadsAndLines) {
  std::string good = exchange(true);
  RunResult clean = run(good, 64);
  ASSERT_EQ(clean.error, "<success>");
  for (unsigned t = 0; t < 64; ++t)
    EXPECT_EQ(clean.out[t], t ^ 32) << t;

  // Warp 0 runs first: it stores and reads its partners' words before warp
  // 1 has stored them, so warp 1's store is the second access of a race.
  std::string bad = exchange(false);
  RunResult racy = run(bad, 64);
  EXPECT_EQ(racy.error,
            "kernel 'k', block (0,0,0), thread (32,0,0), " +
                at(bad, "@store", "st.shared.u32") +
                ": data race at shared offset 128: this write and the read "
                "of thread (0,0,0) at " +
                at(bad, "@load", "ld.shared.u32") +
                " are not ordered (no barrier, mbarrier wait or "
                "warp-synchronous exchange between them)");
  // The check is what finds it: without it the kernel runs.
  EXPECT_EQ(run(bad, 64, /*check=*/false).error, "<success>");
}

/// Thread 0 of 64 sums what every thread stored (a block reduction).
std::string reduction(bool barrier) {
  return kernel(std::string(R"(
	shl.b32 	%r10, %r0, 2;
	add.s32 	%r11, %r3, %r10;
	st.shared.u32 	[%r11], %r0; // @store
)") + (barrier ? "\tbar.sync \t0;\n" : "") +
                R"(	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_done;
	mov.u32 	%r20, 0;
	mov.u32 	%r21, 0;
$L_sum:
	shl.b32 	%r22, %r21, 2;
	add.s32 	%r23, %r3, %r22;
	ld.shared.u32 	%r24, [%r23]; // @sum
	add.u32 	%r20, %r20, %r24;
	add.u32 	%r21, %r21, 1;
	setp.lt.u32 	%p2, %r21, 64;
	@%p2 bra 	$L_sum;
	st.global.u32 	[%rd1], %r20;
$L_done:
)");
}

TEST(EmuRaceCheckTest, BlockReductionNeedsItsBarrier) {
  RunResult clean = run(reduction(true), 64);
  ASSERT_EQ(clean.error, "<success>");
  EXPECT_EQ(clean.out[0], 63u * 64 / 2);
  // Without it, thread 0 already races with lane 1 of its own warp.
  std::string bad = reduction(false);
  RunResult racy = run(bad, 64);
  EXPECT_THAT(racy.error,
              HasSubstr("thread (0,0,0), " + at(bad, "@sum", "ld.shared.u32") +
                        ": data race at shared offset 4: this read and the "
                        "write of thread (1,0,0) at " +
                        at(bad, "@store", "st.shared.u32")));
}

/// Warp 1 produces (bar.arrive 1, 64), warp 0 consumes (bar.sync 1, 64);
/// `late` puts the producer's store after its arrive.
std::string producerConsumer(bool late) {
  std::string store = R"(	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	add.u32 	%r12, %r1, 100;
	st.shared.u32 	[%r11], %r12; // @produce
)";
  return kernel(R"(
	setp.eq.u32 	%p1, %r2, 1;
	@%p1 bra 	$L_producer;
	bar.sync 	1, 64;
	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	ld.shared.u32 	%r13, [%r11]; // @consume
	st.global.u32 	[%rd2], %r13;
	ret;
$L_producer:
)" + (late ? "" : store) +
                "\tbar.arrive \t1, 64; // @arrive\n" + (late ? store : ""));
}

TEST(EmuRaceCheckTest, NamedBarrierArriveOrdersOnlyEarlierAccesses) {
  RunResult clean = run(producerConsumer(false), 64);
  ASSERT_EQ(clean.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(clean.out[t], t + 100) << t;
  std::string bad = producerConsumer(true);
  RunResult racy = run(bad, 64);
  EXPECT_THAT(racy.error,
              HasSubstr("thread (0,0,0), " +
                        at(bad, "@consume", "ld.shared.u32") +
                        ": data race at shared offset 0: this read and the "
                        "write of thread (32,0,0) at " +
                        at(bad, "@produce", "st.shared.u32")));
}

//===----------------------------------------------------------------------===//
// Lanes of one warp
//===----------------------------------------------------------------------===//

/// Lane 0 stores, then (after `sync`) lane 1 loads the word.
std::string laneHandoff(const std::string &sync) {
  return kernel(R"(
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	$L_stored;
	mov.u32 	%r10, 77;
	st.shared.u32 	[smem], %r10; // @lane0
$L_stored:
)" + sync + R"(
	setp.ne.u32 	%p2, %r1, 1;
	@%p2 bra 	$L_done;
	ld.shared.u32 	%r11, [smem]; // @lane1
	st.global.u32 	[%rd1], %r11;
$L_done:
)");
}

TEST(EmuRaceCheckTest, LanesOfAWarpAreOrderedOnlyBySyncExchanges) {
  // Running together in the emulator (or in lockstep) orders nothing.
  std::string bad = laneHandoff("");
  EXPECT_EQ(run(bad, 32).error,
            "kernel 'k', block (0,0,0), thread (1,0,0), " +
                at(bad, "@lane1", "ld.shared.u32") +
                ": data race at shared offset 0: this read and the write of "
                "thread (0,0,0) at " +
                at(bad, "@lane0", "st.shared.u32") +
                " are not ordered (no barrier, mbarrier wait or "
                "warp-synchronous exchange between them)");
  for (const char *sync :
       {"\tbar.warp.sync \t-1;",
        "\tsetp.lt.u32 \t%p4, %r1, 2;\n\t@%p4 bar.warp.sync \t3;",
        "\tshfl.sync.idx.b32 \t%r20, %r0, 0, 31, -1;",
        "\tvote.sync.any.pred \t%p5, %p1, -1;"}) {
    RunResult clean = run(laneHandoff(sync), 32);
    EXPECT_EQ(clean.error, "<success>") << sync;
    EXPECT_EQ(clean.out[0], 77u) << sync;
  }
}

TEST(EmuRaceCheckTest, LanesOfOneStoreMayWriteTheSameWord) {
  // One st instruction whose lanes write one word: one of them writes (the
  // CUDA programming guide's rule), not a race. Two instructions are.
  std::string same = kernel(R"(
	st.shared.u32 	[smem], %r1;
	bar.warp.sync 	-1;
	ld.shared.u32 	%r10, [smem];
	st.global.u32 	[%rd2], %r10;
)");
  EXPECT_EQ(run(same, 32).error, "<success>");
  std::string two = kernel(R"(
	setp.eq.u32 	%p1, %r1, 0;
	@%p1 bra 	$L_second;
	st.shared.u32 	[smem], %r1; // @first
	bra.uni 	$L_done;
$L_second:
	st.shared.u32 	[smem], %r1; // @second
$L_done:
)");
  // Lanes 1-31 store first (the lower pc), lane 0 second.
  EXPECT_THAT(run(two, 32).error,
              HasSubstr("thread (0,0,0), " + at(two, "@second", "st.shared.u32") +
                        ": data race at shared offset 0: this write and the "
                        "write of thread (31,0,0) at " +
                        at(two, "@first", "st.shared.u32")));
}

//===----------------------------------------------------------------------===//
// mbarrier
//===----------------------------------------------------------------------===//

/// Thread 0 initialises `bar` (32 arrivals); warp 1 stores and arrives,
/// warp 0 waits and loads. `order`: "store,arrive" or "arrive,store";
/// `wait`: whether warp 0 waits.
std::string mbarrierHandoff(bool storeFirst, bool wait) {
  std::string store = R"(	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	st.shared.u32 	[%r11], %r1; // @store
)";
  std::string arrive =
      "\tmbarrier.arrive.shared::cta.b64 \t%rd5, [%r4]; // @arrive\n";
  return kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_init;
	mbarrier.init.shared::cta.b64 	[%r4], 32;
$L_init:
	bar.sync 	0;
	setp.eq.u32 	%p2, %r2, 1;
	@%p2 bra 	$L_producer;
)" + std::string(wait ? R"($L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r4], 0;
	@!%p3 bra 	$L_wait;
)"
                                     : "") +
                R"(	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	ld.shared.u32 	%r12, [%r11]; // @load
	st.global.u32 	[%rd2], %r12;
	ret;
$L_producer:
)" + (storeFirst ? store + arrive : arrive + store));
}

TEST(EmuRaceCheckTest, MbarrierWaitOrdersTheArrivalsWrites) {
  RunResult clean = run(mbarrierHandoff(true, true), 64);
  ASSERT_EQ(clean.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(clean.out[t], t) << t;
  // No wait: warp 0 reads first, warp 1's store races with it.
  std::string noWait = mbarrierHandoff(true, false);
  EXPECT_THAT(run(noWait, 64).error,
              HasSubstr("thread (32,0,0), " +
                        at(noWait, "@store", "st.shared.u32") +
                        ": data race at shared offset 0: this write and the "
                        "read of thread (0,0,0) at " +
                        at(noWait, "@load", "ld.shared.u32")));
  // A store after the arrive is not released by it.
  std::string late = mbarrierHandoff(false, true);
  EXPECT_THAT(run(late, 64).error,
              HasSubstr("thread (0,0,0), " +
                        at(late, "@load", "ld.shared.u32") +
                        ": data race at shared offset 0: this read and the "
                        "write of thread (32,0,0) at " +
                        at(late, "@store", "st.shared.u32")));
}

TEST(EmuRaceCheckTest, TxCountThatNeverDrainsIsReported) {
  std::string ptx = kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_done;
	mbarrier.init.shared::cta.b64 	[%r4], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r4], 64; // @expect
$L_done:
)");
  EXPECT_EQ(run(ptx, 32).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(ptx, "@expect", "mbarrier.arrive.expect_tx.shared::cta.b64") +
                ": the block ends with the tx-count of the mbarrier at "
                "shared offset 4096 at 64 in phase 0: 64 bytes announced by "
                "expect_tx never arrived (a wait on the phase would hang on "
                "a GPU)");
  EXPECT_EQ(run(ptx, 32, /*check=*/false).error, "<success>");
}

/// Thread 0 arrives once on an mbarrier expecting two arrivals, then
/// `wait`s on phase 0.
std::string lonelyArrival(const std::string &wait) {
  return kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_done;
	mbarrier.init.shared::cta.b64 	[%r4], 2;
	mbarrier.arrive.shared::cta.b64 	%rd5, [%r4];
)" + wait + R"(
$L_done:
)");
}

TEST(EmuRaceCheckTest, WaitsOnPhasesThatCannotCompleteAreReported) {
  // A test_wait spin: without the check it runs until the step limit.
  std::string spin = lonelyArrival(R"($L_spin:
	mbarrier.test_wait.parity.shared::cta.b64 	%p2, [%r4], 0; // @spin
	@!%p2 bra 	$L_spin;)");
  EXPECT_THAT(run(spin, 32, /*check=*/false).error,
              HasSubstr("still running after"));
  EXPECT_EQ(run(spin, 32).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(spin, "@spin",
                   "mbarrier.test_wait.parity.shared::cta.b64") +
                ": deadlock: mbarrier.test_wait on the mbarrier at shared "
                "offset 4096 waits for the phase of parity 0 to complete, "
                "but every thread of the block waits, spins on test_wait "
                "with nothing changing or has exited (phase 0: 1 of 2 "
                "arrivals pending, tx-count 0)");
  // One failed test_wait, then the thread gives up and exits.
  std::string once = lonelyArrival(
      "\tmbarrier.test_wait.shared::cta.b64 \t%p2, [%r4], %rd5; // @once");
  EXPECT_EQ(run(once, 32).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(once, "@once", "mbarrier.test_wait.shared::cta.b64") +
                ": the block ends with phase 0 of the mbarrier at shared "
                "offset 4096 incomplete, though this wait waited for it (1 "
                "of 2 arrivals pending, tx-count 0): on a GPU the wait would "
                "hang");
  // A state from no arrive on this mbarrier: a phase that has not begun.
  std::string future = lonelyArrival(R"(	mov.u64 	%rd6, 3;
	mbarrier.test_wait.shared::cta.b64 	%p2, [%r4], %rd6; // @future)");
  EXPECT_THAT(run(future, 32).error,
              HasSubstr(at(future, "@future",
                           "mbarrier.test_wait.shared::cta.b64") +
                        ": waits for phase 3 of the mbarrier at shared "
                        "offset 4096, which has not begun (the current "
                        "phase is 0)"));
}

//===----------------------------------------------------------------------===//
// cp.async
//===----------------------------------------------------------------------===//

/// Thread 0 copies 16 bytes of out[512..] into smem; thread 32 reads them
/// after a barrier; `wait` is what thread 0 does before the barrier.
std::string copyThenRead(const std::string &wait) {
  return kernel(R"(
	st.global.u32 	[%rd2+2048], %r0;
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_issued;
	cp.async.ca.shared.global 	[smem], [%rd1+2048], 16; // @copy
	cp.async.commit_group;
)" + wait + R"(
$L_issued:
	bar.sync 	0;
	setp.ne.u32 	%p2, %r0, 32;
	@%p2 bra 	$L_done;
	ld.shared.u32 	%r10, [smem+4]; // @read
	st.global.u32 	[%rd1], %r10;
$L_done:
)");
}

TEST(EmuRaceCheckTest, CpAsyncIsInFlightUntilItsWaitGroup) {
  // Thread 0 copies what it stored itself; thread 32 reads it after the
  // copy's wait_group and the barrier.
  std::string good = kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_issued;
	mov.u32 	%r9, 5;
	st.global.u32 	[%rd1+2052], %r9;
	cp.async.ca.shared.global 	[smem], [%rd1+2048], 16;
	cp.async.commit_group;
	cp.async.wait_group 	0;
$L_issued:
	bar.sync 	0;
	setp.ne.u32 	%p2, %r0, 32;
	@%p2 bra 	$L_done;
	ld.shared.u32 	%r10, [smem+4];
	st.global.u32 	[%rd1], %r10;
$L_done:
)");
  RunResult clean = run(good, 64);
  ASSERT_EQ(clean.error, "<success>");
  EXPECT_EQ(clean.out[0], 5u);
  EXPECT_EQ(run(copyThenRead("\tcp.async.wait_all;"), 64).error,
            "<success>");
  std::string bad = copyThenRead("");
  EXPECT_THAT(run(bad, 64).error,
              HasSubstr("thread (32,0,0), " + at(bad, "@read", "ld.shared.u32") +
                        ": data race at shared offset 4: this read meets the "
                        "cp.async of thread (0,0,0) at " +
                        at(bad, "@copy", "cp.async.ca.shared.global") +
                        ", which is still in flight (no cp.async.wait_group "
                        "or mbarrier wait has completed it)"));
}

/// Warp 1 copies one word a lane and completes `bar` (32 arrivals) with
/// cp.async.mbarrier.arrive.noinc, then waits for its own copies and
/// exits (the producer of GemmWgmma.cuh's cp.async path); warp 0 waits on
/// `bar` (unless !wait) and reads.
std::string copyArrive(bool wait) {
  return kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_init;
	mbarrier.init.shared::cta.b64 	[%r4], 32;
$L_init:
	add.u32 	%r9, %r0, 1000;
	st.global.u32 	[%rd2+2048], %r9;
	bar.sync 	0;
	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	setp.eq.u32 	%p2, %r2, 1;
	@%p2 bra 	$L_producer;
)" + std::string(wait ? R"($L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r4], 0;
	@!%p3 bra 	$L_wait;
)"
                                     : "") +
                R"(	ld.shared.u32 	%r12, [%r11]; // @read
	st.global.u32 	[%rd2], %r12;
	ret;
$L_producer:
	mul.wide.u32 	%rd6, %r0, 4;
	add.s64 	%rd7, %rd1, %rd6;
	cp.async.ca.shared.global 	[%r11], [%rd7+2048], 4; // @copy
	cp.async.mbarrier.arrive.noinc.shared::cta.b64 	[%r4];
	cp.async.wait_all;
)");
}

TEST(EmuRaceCheckTest, CpAsyncMbarrierArriveOrdersTheCopies) {
  // The producer's wait_all lands the copies before the consumers wait:
  // they still belong to the mbarrier's phase.
  RunResult clean = run(copyArrive(true), 64);
  ASSERT_EQ(clean.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(clean.out[t], 1032 + t) << t;
  std::string bad = copyArrive(false);
  EXPECT_THAT(run(bad, 64).error,
              HasSubstr("thread (32,0,0), " +
                        at(bad, "@copy", "cp.async.ca.shared.global") +
                        ": data race at shared offset 0: this cp.async and "
                        "the read of thread (0,0,0) at " +
                        at(bad, "@read", "ld.shared.u32")));
}

//===----------------------------------------------------------------------===//
// The async proxy: wgmma, TMA and bulk copies
//===----------------------------------------------------------------------===//

/// 128 threads store a 64x16 bf16 A (K-major, no swizzle, 2 KiB at 0) and
/// an 8x16 B (256 bytes at 2048), then one m64n8k16 wgmma reads them.
/// `beforeBarrier` and `afterBarrier` go around the bar.sync; `tail`
/// after the commit.
std::string wgmmaKernel(const std::string &beforeBarrier,
                        const std::string &afterBarrier,
                        const std::string &tail = "\twgmma.wait_group.sync."
                                                  "aligned 0;\n") {
  // A: LBO 128 (the next 8 K), SBO 256 (the next 8 rows); B the same at
  // 2048 (start address field 2048 >> 4 = 128).
  return kernel(R"(
	mov.u32 	%r10, %r0;
	mov.u32 	%r12, 0x3f803f80;
$L_fill:
	shl.b32 	%r11, %r10, 2;
	add.s32 	%r13, %r3, %r11;
	st.shared.u32 	[%r13], %r12; // @fill
	add.u32 	%r10, %r10, 128;
	setp.lt.u32 	%p1, %r10, 576;
	@%p1 bra 	$L_fill;
)" + beforeBarrier +
                "\tbar.sync \t0;\n" + afterBarrier + R"(
	mov.b64 	%rd20, 0x0000001000080000;
	mov.b64 	%rd21, 0x0000001000080080;
	setp.ne.u32 	%p2, %r0, %r0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 	{%f0, %f1, %f2, %f3}, %rd20, %rd21, %p2, 1, 1, 0, 0; // @wgmma
	wgmma.commit_group.sync.aligned;
)" + tail + R"(	st.global.f32 	[%rd2], %f0;
)");
}

TEST(EmuRaceCheckTest, WgmmaNeedsAProxyFenceAfterGenericStores) {
  const char *fence = "\tfence.proxy.async.shared::cta;\n";
  // The writers fence, or the readers fence after the barrier: either puts
  // a fence on the path from the stores to the wgmma.
  for (bool writerFences : {true, false}) {
    RunResult clean = run(writerFences ? wgmmaKernel(fence, "")
                                 : wgmmaKernel("", fence),
                    128);
    ASSERT_EQ(clean.error, "<success>") << writerFences;
    // D = sum over k of 1 * 1.
    EXPECT_EQ(clean.out[0], 0x41800000u) << writerFences; // 16.0f
  }
  std::string bad = wgmmaKernel("", "");
  EXPECT_EQ(run(bad, 128).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(bad, "@wgmma",
                   "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16") +
                ": async-proxy hazard at shared offset 0: this "
                "wgmma.mma_async (async proxy) reads what the write of "
                "thread (0,0,0) at " +
                at(bad, "@fill", "st.shared.u32") +
                " wrote through the generic proxy, with no "
                "fence.proxy.async on the way from that write to this read");
  // Without the barrier, warp 1 stores B while warp 0's wgmma reads it.
  std::string unordered = kernel(R"(
	shl.b32 	%r11, %r0, 2;
	add.s32 	%r13, %r3, %r11;
	mov.u32 	%r12, 0x3f803f80;
	st.shared.u32 	[%r13+2048], %r12; // @storeB
	fence.proxy.async.shared::cta;
	mov.b64 	%rd20, 0x0000001000080000;
	mov.b64 	%rd21, 0x0000001000080080;
	setp.ne.u32 	%p2, %r0, %r0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 	{%f0, %f1, %f2, %f3}, %rd20, %rd21, %p2, 1, 1, 0, 0; // @wgmma
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
)");
  EXPECT_THAT(run(unordered, 128).error,
              HasSubstr("thread (32,0,0), " +
                        at(unordered, "@storeB", "st.shared.u32") +
                        ": data race at shared offset 2176: this write and "
                        "the wgmma.mma_async of warp 0 (thread (0,0,0)) at " +
                        at(unordered, "@wgmma",
                           "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16."
                           "bf16")));
}

TEST(EmuRaceCheckTest, WgmmaReadsAreInFlightUntilWaitGroup) {
  const char *fence = "\tfence.proxy.async.shared::cta;\n";
  // Thread 0 overwrites A(0, 0) after the wgmma that reads it.
  const char *overwrite = "\tbar.sync \t0;\n\tsetp.ne.u32 \t%p3, %r0, 0;\n"
                          "\t@%p3 bra \t$L_end;\n\tst.shared.u32 \t[smem], "
                          "%r0; // @overwrite\n$L_end:\n";
  std::string bad = wgmmaKernel(fence, "", overwrite);
  EXPECT_THAT(run(bad, 128).error,
              HasSubstr(at(bad, "@overwrite", "st.shared.u32") +
                        ": data race at shared offset 0: this write and the "
                        "wgmma.mma_async of warp 0 (thread (0,0,0)) at " +
                        at(bad, "@wgmma", "wgmma.mma_async.sync.aligned."
                                          "m64n8k16.f32.bf16.bf16") +
                        " are not ordered (no barrier, mbarrier wait or "
                        "warp-synchronous exchange between them; the "
                        "wgmma.wait_group that retires it comes first)"));
  std::string good = wgmmaKernel(
      fence, "",
      std::string("\twgmma.wait_group.sync.aligned 0;\n") + overwrite);
  EXPECT_EQ(run(good, 128).error, "<success>");
}

/// One warp stores 128 bytes, thread 0 stores them to out[0..32) with a
/// bulk copy; `fence` before the barrier; `afterIssue` after the commit.
std::string bulkStore(bool fence, const std::string &afterIssue) {
  return kernel(std::string(R"(
	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	add.u32 	%r12, %r1, 500;
	st.shared.u32 	[%r11], %r12; // @fill
)") + (fence ? "\tfence.proxy.async.shared::cta;\n" : "") +
                R"(	bar.sync 	0;
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_issued;
	cp.async.bulk.global.shared::cta.bulk_group 	[%rd1], [%r3], 128; // @store
	cp.async.bulk.commit_group;
)" + afterIssue + R"(
$L_issued:
)");
}

TEST(EmuRaceCheckTest, BulkStoreNeedsAProxyFenceAndItsWaitGroup) {
  const char *wait = "\tcp.async.bulk.wait_group.read 0;\n";
  RunResult clean = run(bulkStore(true, wait), 32);
  ASSERT_EQ(clean.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(clean.out[t], 500 + t) << t;
  std::string noFence = bulkStore(false, wait);
  EXPECT_EQ(run(noFence, 32).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(noFence, "@store",
                   "cp.async.bulk.global.shared::cta.bulk_group") +
                ": async-proxy hazard at shared offset 0: this bulk/TMA "
                "store (async proxy) reads what the write of thread (0,0,0) "
                "at " +
                at(noFence, "@fill", "st.shared.u32") +
                " wrote through the generic proxy, with no "
                "fence.proxy.async on the way from that write to this read");
  // Its source may not be overwritten before cp.async.bulk.wait_group.read.
  std::string overwrite = "\tst.shared.u32 \t[smem], %r0; // @overwrite\n";
  std::string early = bulkStore(true, overwrite);
  EXPECT_THAT(run(early, 32).error,
              HasSubstr(at(early, "@overwrite", "st.shared.u32") +
                        ": data race at shared offset 0: this write and the "
                        "bulk/TMA store of thread (0,0,0) at " +
                        at(early, "@store",
                           "cp.async.bulk.global.shared::cta.bulk_group") +
                        " are not ordered (no barrier, mbarrier wait or "
                        "warp-synchronous exchange between them; "
                        "cp.async.bulk.wait_group.read comes first)"));
  EXPECT_EQ(run(bulkStore(true, std::string(wait) + overwrite), 32).error,
            "<success>");
}

/// Thread 0 loads 128 bytes of out[256..] into smem with a bulk copy on
/// `bar`; after a barrier every lane `wait`s and reads a word.
std::string bulkLoad(const std::string &wait) {
  return kernel(R"(
	add.u32 	%r9, %r0, 900;
	st.global.u32 	[%rd2+1024], %r9;
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_issued;
	mbarrier.init.shared::cta.b64 	[%r4], 1;
	fence.mbarrier_init.release.cluster;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r4], 128;
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes 	[%r3], [%rd1+1024], 128, [%r4]; // @load
$L_issued:
	bar.sync 	0;
)" + wait + R"(
	shl.b32 	%r10, %r1, 2;
	add.s32 	%r11, %r3, %r10;
	ld.shared.u32 	%r12, [%r11]; // @read
	st.global.u32 	[%rd2], %r12;
)");
}

TEST(EmuRaceCheckTest, BulkLoadIsReadAfterItsMbarrierWait) {
  RunResult clean = run(bulkLoad(R"($L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r4], 0;
	@!%p3 bra 	$L_wait;)"),
                  32);
  ASSERT_EQ(clean.error, "<success>");
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(clean.out[t], 900 + t) << t;
  std::string bad = bulkLoad("");
  EXPECT_EQ(run(bad, 32).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(bad, "@read", "ld.shared.u32") +
                ": data race at shared offset 0: this read and the TMA/bulk "
                "copy issued by thread (0,0,0) at " +
                at(bad, "@load", "cp.async.bulk.shared::cluster.global."
                                 "mbarrier::complete_tx::bytes") +
                " are not ordered (no barrier, mbarrier wait or "
                "warp-synchronous exchange between them; wait on the "
                "copy's mbarrier first)");
}

TEST(EmuRaceCheckTest, CopyNobodyWaitsForIsReportedAtTheEnd) {
  std::string ptx = kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_done;
	mbarrier.init.shared::cta.b64 	[%r4], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r4], 128;
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes 	[%r3], [%rd1+1024], 128, [%r4]; // @load
$L_done:
)");
  EXPECT_EQ(run(ptx, 32).error,
            "kernel 'k', block (0,0,0), thread (0,0,0), " +
                at(ptx, "@load", "cp.async.bulk.shared::cluster.global."
                                 "mbarrier::complete_tx::bytes") +
                ": the block ends before any thread waits on the mbarrier "
                "at shared offset 4096 that this copy completes on (128 "
                "bytes never waited for)");
}

//===----------------------------------------------------------------------===//
// Global memory between blocks
//===----------------------------------------------------------------------===//

TEST(EmuRaceCheckTest, TwoBlocksWritingTheSameGlobalBytesAreReported) {
  std::string same = kernel(R"(
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_done;
	st.global.u32 	[%rd1+8], %r5; // @store
$L_done:
)");
  EXPECT_EQ(run(same, 32, true, 2).error,
            "kernel 'k', block (1,0,0), thread (0,0,0), " +
                at(same, "@store", "st.global.u32") +
                ": global write-write race: block (0,0,0) also writes "
                "global memory at 0x100000008 (its thread (0,0,0) at " +
                at(same, "@store", "st.global.u32") +
                "), outside atomics; blocks run in no defined order, so "
                "which value stays is undefined");
  EXPECT_EQ(run(same, 32, false, 2).error, "<success>");
  // Each block its own word, its own half of one word, or atomics: clean.
  std::string own = kernel(R"(
	mul.wide.u32 	%rd5, %r5, 4;
	add.s64 	%rd6, %rd1, %rd5;
	st.global.u32 	[%rd6], %r0;
	mul.wide.u32 	%rd7, %r5, 2;
	add.s64 	%rd8, %rd1, %rd7;
	cvt.u16.u32 	%h1, %r5;
	st.global.u16 	[%rd8+64], %h1;
	red.global.add.u32 	[%rd1+128], 1;
)");
  RunResult clean = run(own, 32, true, 2);
  ASSERT_EQ(clean.error, "<success>");
  EXPECT_EQ(clean.out[16], 0x00010000u); // halves 0 and 1 of one word
  EXPECT_EQ(clean.out[32], 64u);
}

} // namespace

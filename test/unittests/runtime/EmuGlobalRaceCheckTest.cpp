//===- EmuGlobalRaceCheckTest.cpp - The race check between blocks ---------===//
//
// LaunchSpec::checkRaces on global memory between the blocks of a launch
// (runtime/lib/emu/RaceCheckGlobal.h): a block reading bytes another block
// wrote needs a release/acquire chain from the write (a gpu-scope fence
// after the write, an atomic after the fence; an atomic in the reader's
// block that observes it, a fence after that atomic, a barrier or program
// order to the read). Hand-written kernels in the shape of split-K's
// last-block handshake (SplitKReduce.cuh): the correct form is clean and
// sums right; each link removed is caught, the report naming both blocks,
// both threads and both PTX lines (found in the kernel text by marker
// comments, not from the emulator).
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include <gmock/gmock.h>

#include <sstream>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

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

std::string at(const std::string &ptx, const std::string &marker,
               const std::string &opcode) {
  return "PTX line " + std::to_string(lineOf(ptx, marker)) + " (" + opcode +
         ")";
}

/// The pieces of the handshake a variant keeps.
struct Handshake {
  /// The writers' fence: membar.gl, a CTA-scope one, or none ("").
  std::string releaseFence = "membar.gl";
  /// The barrier between the writers' fences and the count.
  bool barrier = true;
  /// The count: "atom.global.add.u32" or a qualified form.
  std::string atom = "atom.global.add.u32";
  /// The last block's fence after the count.
  std::string acquireFence = "membar.gl";
};

/// k(u32 *buf) on 2 blocks ("splits") of 64 threads: thread t of block b
/// writes its partial buf[64 b + t] = t + 100 b; then the handshake; the
/// block that counts last reads both partials of column t and writes
/// their sum, 2 t + 100, to buf[256 + t]. The semaphore is buf[512].
std::string splitK(const Handshake &h) {
  std::string ptx = sm90Header() + R"(.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<16>;
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r0, %tid.x;
	mov.u32 	%r1, %ctaid.x;
	mad.lo.u32 	%r2, %r1, 64, %r0;
	mad.lo.u32 	%r3, %r1, 100, %r0;
	mul.wide.u32 	%rd2, %r2, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r3; // @write
)";
  if (!h.releaseFence.empty())
    ptx += "\t" + h.releaseFence + ";\n";
  if (h.barrier)
    ptx += "\tbar.sync \t0;\n";
  ptx += R"(	mov.u32 	%r4, 0;
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_counted;
	)" +
         h.atom + R"( 	%r5, [%rd1+2048], 1; // @atom
	setp.eq.u32 	%p2, %r5, 1;
	selp.u32 	%r4, 1, 0, %p2;
$L_counted:
	setp.ne.u32 	%p3, %r4, 0;
	bar.red.or.pred 	%p4, 0, %p3;
	@!%p4 bra 	$L_done;
)";
  if (!h.acquireFence.empty())
    ptx += "\t" + h.acquireFence + ";\n";
  ptx += R"(	mul.wide.u32 	%rd4, %r0, 4;
	add.s64 	%rd5, %rd1, %rd4;
	ld.global.cg.u32 	%r6, [%rd5]; // @read0
	ld.global.cg.u32 	%r7, [%rd5+256]; // @read1
	add.s32 	%r8, %r6, %r7;
	st.global.u32 	[%rd5+1024], %r8;
$L_done:
	ret;
}
)";
  return ptx;
}

struct RunResult {
  std::string error = "<success>";
  std::vector<uint32_t> buf;
};

/// Runs kernel 0 of `ptx` on `blocks` x `threads` with the race check;
/// blocks in linear order on one host thread unless `seed` shuffles them
/// over `workers` threads; `sample` blocks of them when not 0.
RunResult run(const std::string &ptx, unsigned threads, unsigned blocks,
              bool check = true, uint64_t seed = 0, unsigned workers = 1,
              uint64_t sample = 0) {
  dumpPtx(ptx, "global-races");
  RunResult result;
  Expected<emu::Module> module = emu::parsePtx(ptx);
  if (!module) {
    result.error = module.error().message();
    return result;
  }
  DirectMemory memory;
  size_t buf = memory.add(std::vector<uint32_t>(1024, 0));
  std::vector<emu::MemoryRegion> regions;
  for (size_t i = 0; i < memory.buffers.size(); ++i)
    regions.push_back({DirectMemory::address(i), memory.buffers[i].size(),
                       memory.buffers[i].data()});
  ParamBytes params;
  params.addU64(DirectMemory::address(buf));
  emu::LaunchSpec spec;
  spec.grid = {blocks, 1, 1};
  spec.block = {threads, 1, 1};
  spec.params = params.bytes.data();
  spec.paramBytes = params.bytes.size();
  spec.memory = &regions;
  spec.checkRaces = check;
  spec.blockOrderSeed = seed;
  spec.workers = workers;
  spec.sampleBlocks = sample;
  spec.maxWarpInstructionsPerBlock = 200000;
  Error err = emu::runKernel(module->kernels[0], spec);
  if (err)
    result.error = err.message();
  result.buf = memory.as<uint32_t>(buf);
  return result;
}

/// The report of the last block's thread `t` reading (at `read`) what
/// block `writer`'s thread `w` wrote.
std::string report(const std::string &ptx, unsigned reader, unsigned t,
                   const std::string &read, unsigned writer, unsigned w,
                   uint64_t address, const std::string &why) {
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%llx",
                static_cast<unsigned long long>(address));
  return "kernel 'k', block (" + std::to_string(reader) + ",0,0), thread (" +
         std::to_string(t) + ",0,0), " + at(ptx, read, "ld.global.cg.u32") +
         ": global read-after-write race at " + hex +
         ": this read and the write of block (" + std::to_string(writer) +
         ",0,0), thread (" + std::to_string(w) + ",0,0) at " +
         at(ptx, "@write", "st.global.u32") + " are not ordered: " + why;
}

const char *kUnreleased =
    "the write is released by no atomic (a gpu-scope fence after the write, "
    "by its thread or one a barrier orders after it, then an atomic ordered "
    "after that fence)";

uint64_t bufAddress(unsigned word) {
  return DirectMemory::address(0) + 4ull * word;
}

TEST(EmuGlobalRaceCheckTest, SplitKHandshakeDoneRightIsClean) {
  std::string ptx = splitK(Handshake());
  RunResult r = run(ptx, 64, 2);
  ASSERT_EQ(r.error, "<success>");
  for (unsigned t = 0; t < 64; ++t)
    EXPECT_EQ(r.buf[256 + t], 2 * t + 100) << t;
  EXPECT_EQ(r.buf[512], 2u); // both blocks counted
  // Whichever block is last, on several host threads: still clean.
  for (uint64_t seed : {3, 7, 11}) {
    RunResult shuffled = run(ptx, 64, 2, true, seed, 2);
    EXPECT_EQ(shuffled.error, "<success>") << seed;
  }
}

TEST(EmuGlobalRaceCheckTest, CountBeforeTheOtherWarpsFencedIsARace) {
  // No barrier between the fences and the count: thread 0 counts the
  // block knowing only its own fenced partial (the bug SplitKReduce.cuh
  // had). Block 1 counts last and reads block 0's partial of thread 1,
  // which no atomic released (lane 1 is not ordered before lane 0).
  Handshake h;
  h.barrier = false;
  std::string ptx = splitK(h);
  EXPECT_EQ(run(ptx, 64, 2).error,
            report(ptx, 1, 1, "@read0", 0, 1, bufAddress(1), kUnreleased));
  EXPECT_EQ(run(ptx, 64, 2, /*check=*/false).error, "<success>");
  // In any block order, on several host threads: reported (the last
  // block, whichever it is, reads an unreleased partial).
  for (uint64_t seed : {3, 7, 11})
    EXPECT_THAT(run(ptx, 64, 2, true, seed, 2).error,
                HasSubstr("global read-after-write race"))
        << seed;
}

TEST(EmuGlobalRaceCheckTest, CountWithoutTheWritersFenceIsARace) {
  Handshake h;
  h.releaseFence = "";
  std::string ptx = splitK(h);
  EXPECT_EQ(run(ptx, 64, 2).error,
            report(ptx, 1, 0, "@read0", 0, 0, bufAddress(0), kUnreleased));
  // A CTA-scope fence does not order for other blocks.
  h.releaseFence = "membar.cta";
  std::string cta = splitK(h);
  EXPECT_EQ(run(cta, 64, 2).error,
            report(cta, 1, 0, "@read0", 0, 0, bufAddress(0), kUnreleased));
  // fence.acq_rel.gpu is __threadfence too.
  h.releaseFence = "fence.acq_rel.gpu";
  EXPECT_EQ(run(splitK(h), 64, 2).error, "<success>");
}

TEST(EmuGlobalRaceCheckTest, ReaderWithoutItsAcquireFenceIsARace) {
  // The count observes the release, but no fence follows it before the
  // reads: the atomic alone (relaxed) acquires nothing.
  Handshake h;
  h.acquireFence = "";
  std::string ptx = splitK(h);
  char semaphore[32];
  std::snprintf(semaphore, sizeof(semaphore), "0x%llx",
                static_cast<unsigned long long>(bufAddress(512)));
  EXPECT_EQ(run(ptx, 64, 2).error,
            report(ptx, 1, 0, "@read0", 0, 0, bufAddress(0),
                   std::string("the write is released through the atomic "
                               "at ") +
                       semaphore +
                       ", but this read is not ordered after an acquire "
                       "there (an atomic on it that observes the release, "
                       "then a gpu-scope fence, then a barrier or program "
                       "order to this read)"));
  // An .acquire count needs no fence after it; an .acq_rel one also
  // releases what its thread knows, so the writers need no fence either.
  h.atom = "atom.acquire.gpu.global.add.u32";
  EXPECT_EQ(run(splitK(h), 64, 2).error, "<success>");
  h.atom = "atom.acq_rel.gpu.global.add.u32";
  h.releaseFence = "";
  EXPECT_EQ(run(splitK(h), 64, 2).error, "<success>");
  // ... but only what its thread knows: without the barrier, the other
  // threads' partials are not released.
  h.barrier = false;
  std::string ptx2 = splitK(h);
  EXPECT_EQ(run(ptx2, 64, 2).error,
            report(ptx2, 1, 1, "@read0", 0, 1, bufAddress(1), kUnreleased));
}

TEST(EmuGlobalRaceCheckTest, ReadingAnotherBlocksBytesWithoutAtomicsIsARace) {
  // Each block writes its row, waits at its barrier and reads the other
  // block's row: nothing orders the blocks. Block 0 runs first and reads
  // bytes block 1 writes later: a race too (a GPU may run them the other
  // way round), reported for the lowest reading block.
  std::string ptx = sm90Header() + R"(.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<16>;
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r0, %tid.x;
	mov.u32 	%r1, %ctaid.x;
	mad.lo.u32 	%r2, %r1, 32, %r0;
	mul.wide.u32 	%rd2, %r2, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r2; // @write
	membar.gl;
	bar.sync 	0;
	xor.b32 	%r3, %r1, 1;
	mad.lo.u32 	%r4, %r3, 32, %r0;
	mul.wide.u32 	%rd4, %r4, 4;
	add.s64 	%rd5, %rd1, %rd4;
	ld.global.u32 	%r5, [%rd5]; // @read
	st.global.u32 	[%rd3+512], %r5;
	ret;
}
)";
  std::string expected =
      "kernel 'k', block (0,0,0), thread (0,0,0), " +
      at(ptx, "@read", "ld.global.u32") +
      ": global read-after-write race at 0x" +
      [] {
        char hex[32];
        std::snprintf(hex, sizeof(hex), "%llx",
                      static_cast<unsigned long long>(bufAddress(32)));
        return std::string(hex);
      }() +
      ": this read and the write of block (1,0,0), thread (0,0,0) at " +
      at(ptx, "@write", "st.global.u32") + " are not ordered: " + kUnreleased;
  EXPECT_EQ(run(ptx, 32, 2).error, expected);
  // The same in any order and on several host threads.
  for (uint64_t seed : {3, 7})
    EXPECT_EQ(run(ptx, 32, 2, true, seed, 2).error, expected) << seed;
  EXPECT_EQ(run(ptx, 32, 2, false).error, "<success>");
  // A block reading its own bytes back is not checked here (one block's
  // global accesses are ordered by its own barriers: not modelled).
  EXPECT_EQ(run(ptx, 32, 1).error, "<success>");
  // A sample of the blocks (--profile-sample) is not checked between
  // blocks: a handshake cannot complete in it. Both blocks of a sample of
  // 2 of 4 still are (the whole grid ran: 4 blocks, sample 4).
  EXPECT_EQ(run(ptx, 32, 4, true, 0, 1, 2).error, "<success>");
  EXPECT_THAT(run(ptx, 32, 4, true, 0, 1, 4).error,
              HasSubstr("global read-after-write race"));
}

} // namespace

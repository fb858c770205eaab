//===- EmuCountersTest.cpp - The emulator's performance counters ----------===//
//
// Hand-written kernels whose counts are known by construction: coalesced
// and strided copies (sectors, DRAM traffic), shared-memory access patterns
// with known bank conflicts, an FMA loop, mma.sync, warp shuffles, and
// sampled launches. Every expected value is derived in the comments from
// the kernel, not from running it.
//
//===----------------------------------------------------------------------===//

#include "emu/PtxInterpreter.h"

#include "EmuTestUtils.h"
#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

/// Device address of buffer i: 2^40 + i * 2^32, so every buffer starts on a
/// 32-byte sector (and a 128-byte line).
uint64_t bufferAddress(size_t i) { return (1ull << 40) + i * (1ull << 32); }

struct Counted {
  std::string error = "<success>";
  emu::LaunchStats stats;
};

/// Parses `ptx` and runs its one kernel with the buffers as its pointer
/// parameters (in order, then the u32 scalars), counters on.
Counted runCounted(const std::string &ptx, const std::string &name, Dim3 grid,
                   Dim3 block, std::vector<std::vector<uint8_t> *> buffers,
                   std::vector<uint32_t> scalars = {},
                   emu::LaunchSpec spec = {}) {
  dumpPtx(ptx, name);
  Counted result;
  Expected<emu::Module> module = emu::parsePtx(ptx);
  if (!module) {
    result.error = module.error().message();
    return result;
  }
  std::vector<emu::MemoryRegion> memory;
  PackedParams params;
  for (size_t i = 0; i < buffers.size(); ++i) {
    memory.push_back(
        {bufferAddress(i), buffers[i]->size(), buffers[i]->data()});
    params.addU64(bufferAddress(i));
  }
  for (uint32_t scalar : scalars)
    params.addU32(scalar);
  spec.grid = grid;
  spec.block = block;
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &memory;
  spec.countPerformance = true;
  if (spec.workers == 0)
    spec.workers = 1;
  Error err = emu::runKernel(module->kernels[0], spec, &result.stats);
  if (err)
    result.error = err.message();
  return result;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

/// The classes partition the thread-instructions.
void expectClassesAddUp(const emu::LaunchStats &s) {
  EXPECT_EQ(s.fmaInstructions + s.mmaInstructions + s.loadStoreInstructions +
                s.shuffleInstructions + s.otherInstructions,
            s.threadInstructions);
}

/// copy(in, out): out[g] = in[g * stride] for the global thread index g.
/// Per thread: 13 instructions, 4 of them loads/stores (two ld.param,
/// ld.global, st.global), the other 9 neither FMA nor shuffle.
std::string copyKernel(unsigned strideFloats) {
  return ptxHeader() + R"(.visible .entry copy(
	.param .u64 .ptr .align 1 copy_in,
	.param .u64 .ptr .align 1 copy_out
)
{
	.reg .b32 	%r<8>;
	.reg .f32 	%f<2>;
	.reg .b64 	%rd<8>;
	ld.param.u64 	%rd1, [copy_in];
	ld.param.u64 	%rd2, [copy_out];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mad.lo.s32 	%r4, %r2, %r3, %r1;
	mul.wide.u32 	%rd3, %r4, )" +
         std::to_string(4 * strideFloats) + R"(;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.f32 	%f1, [%rd4];
	mul.wide.u32 	%rd5, %r4, 4;
	add.s64 	%rd6, %rd2, %rd5;
	st.global.f32 	[%rd6], %f1;
	ret;
}
)";
}

// A warp copying 32 consecutive floats asks for 128 bytes that fill exactly
// 4 sectors, loads and stores alike: efficiency 1.
TEST(EmuCountersTest, CoalescedCopy) {
  const unsigned blocks = 4, threads = 128, n = blocks * threads;
  std::vector<float> in(n, 1.5f);
  std::vector<uint8_t> inBytes = bytesOf(in), out(n * 4, 0);
  Counted r = runCounted(copyKernel(1), "copy", {blocks, 1, 1}, {threads, 1, 1},
                         {&inBytes, &out});
  ASSERT_EQ(r.error, "<success>");
  const emu::LaunchStats &s = r.stats;
  const uint64_t warps = n / 32;
  EXPECT_EQ(s.threadInstructions, 13ull * n);
  EXPECT_EQ(s.warpInstructions, 13ull * warps);
  EXPECT_EQ(s.loadStoreInstructions, 4ull * n);
  EXPECT_EQ(s.otherInstructions, 9ull * n);
  EXPECT_EQ(s.fmaInstructions, 0u);
  expectClassesAddUp(s);
  // One load and one store per warp; ld.param is not global memory.
  EXPECT_EQ(s.globalAccesses, 2 * warps);
  EXPECT_EQ(s.globalBytesRequested, 2ull * n * 4);
  EXPECT_EQ(s.globalSectors, 2 * warps * 4);
  EXPECT_DOUBLE_EQ(static_cast<double>(s.globalBytesRequested) /
                       (s.globalSectors * 32.0),
                   1.0);
  // Each buffer is n * 4 bytes, read (in) or written (out) once.
  EXPECT_EQ(s.dramReadSectors, n * 4 / 32);
  EXPECT_EQ(s.dramWriteSectors, n * 4 / 32);
  EXPECT_EQ(s.sharedAccesses, 0u);
  EXPECT_EQ(s.blocksTotal, blocks);
  EXPECT_EQ(s.blocksRun, blocks);
}

// Every lane reading the same float (a broadcast, as an epilogue's
// per-column scale is for the 8 lanes sharing a column) asks for those 4
// bytes once per warp access: one sector, 4 useful bytes, so coalescing
// stays <= 1 (counting each lane's 4 bytes would give 128 / 32 = 4).
TEST(EmuCountersTest, BroadcastLoadCountsBytesOnce) {
  const unsigned blocks = 2, threads = 64, n = blocks * threads;
  std::vector<uint8_t> in(64, 0), out(n * 4, 0);
  Counted r = runCounted(copyKernel(0), "copy", {blocks, 1, 1},
                         {threads, 1, 1}, {&in, &out});
  ASSERT_EQ(r.error, "<success>");
  const emu::LaunchStats &s = r.stats;
  const uint64_t warps = n / 32;
  EXPECT_EQ(s.globalAccesses, 2 * warps);
  // Loads: 4 bytes in 1 sector a warp; stores: 128 bytes in 4 sectors.
  EXPECT_EQ(s.globalBytesRequested, warps * 4 + warps * 128);
  EXPECT_EQ(s.globalSectors, warps * 1 + warps * 4);
  EXPECT_LE(s.globalBytesRequested, s.globalSectors * 32);
}

// Reading with a stride of 32 floats (128 bytes) puts every lane in a
// sector of its own: 32 sectors for 128 requested bytes per warp load.
TEST(EmuCountersTest, StridedCopy) {
  const unsigned blocks = 2, threads = 128, n = blocks * threads;
  std::vector<uint8_t> in(n * 32 * 4, 0), out(n * 4, 0);
  Counted r = runCounted(copyKernel(32), "copy", {blocks, 1, 1},
                         {threads, 1, 1}, {&in, &out});
  ASSERT_EQ(r.error, "<success>");
  const emu::LaunchStats &s = r.stats;
  const uint64_t warps = n / 32;
  EXPECT_EQ(s.globalAccesses, 2 * warps);
  EXPECT_EQ(s.globalBytesRequested, 2ull * n * 4);
  // Loads: 32 sectors per warp; stores (coalesced): 4.
  EXPECT_EQ(s.globalSectors, warps * 32 + warps * 4);
  // Every loading lane reads a sector nobody else reads.
  EXPECT_EQ(s.dramReadSectors, n);
  EXPECT_EQ(s.dramWriteSectors, n * 4 / 32);
}

// Every block reads the same 128 floats: the launch reads those 16 sectors
// once however many blocks and host threads touch them.
TEST(EmuCountersTest, DramSectorsAreDistinctAcrossWorkers) {
  std::string ptx = ptxHeader() + R"(.visible .entry same(
	.param .u64 .ptr .align 1 same_in,
	.param .u64 .ptr .align 1 same_out
)
{
	.reg .b32 	%r<8>;
	.reg .f32 	%f<2>;
	.reg .b64 	%rd<8>;
	ld.param.u64 	%rd1, [same_in];
	ld.param.u64 	%rd2, [same_out];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mad.lo.s32 	%r4, %r2, %r3, %r1;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.f32 	%f1, [%rd4];
	mul.wide.u32 	%rd5, %r4, 4;
	add.s64 	%rd6, %rd2, %rd5;
	st.global.f32 	[%rd6], %f1;
	ret;
}
)";
  const unsigned blocks = 16, threads = 128;
  for (unsigned workers : {1u, 4u}) {
    std::vector<uint8_t> in(threads * 4, 0), out(blocks * threads * 4, 0);
    emu::LaunchSpec spec;
    spec.workers = workers;
    Counted r = runCounted(ptx, "same", {blocks, 1, 1}, {threads, 1, 1},
                           {&in, &out}, {}, spec);
    ASSERT_EQ(r.error, "<success>");
    EXPECT_EQ(r.stats.dramReadSectors, threads * 4 / 32) << workers;
    EXPECT_EQ(r.stats.dramWriteSectors, blocks * threads * 4 / 32) << workers;
    // Per access, each block's loads still touch 4 sectors a warp.
    EXPECT_EQ(r.stats.globalSectors, 2ull * blocks * (threads / 32) * 4)
        << workers;
  }
}

/// One warp loads `vector` floats per lane (1, 2 or 4) from shared memory
/// at byte offset tid * strideBytes, and stores the first to out[tid].
std::string sharedKernel(unsigned strideBytes, unsigned vector) {
  std::string load = vector == 1 ? "ld.shared.f32 \t%f1, [%r4];"
                     : vector == 2
                         ? "ld.shared.v2.f32 \t{%f1, %f2}, [%r4];"
                         : "ld.shared.v4.f32 \t{%f1, %f2, %f3, %f4}, [%r4];";
  return ptxHeader() + R"(.visible .entry banks(
	.param .u64 .ptr .align 1 banks_out
)
{
	.reg .b32 	%r<8>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<8>;
	.shared .align 16 .b8 buf[8192];
	mov.u32 	%r1, %tid.x;
	mul.lo.s32 	%r2, %r1, )" +
         std::to_string(strideBytes) + R"(;
	mov.u32 	%r3, buf;
	add.s32 	%r4, %r3, %r2;
	)" +
         load + R"(
	ld.param.u64 	%rd1, [banks_out];
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.f32 	[%rd3], %f1;
	ret;
}
)";
}

uint64_t replaysOf(unsigned strideBytes, unsigned vector,
                   unsigned threads = 32) {
  std::vector<uint8_t> out(threads * 4, 0);
  Counted r = runCounted(sharedKernel(strideBytes, vector), "banks", {1, 1, 1},
                         {threads, 1, 1}, {&out});
  EXPECT_EQ(r.error, "<success>");
  EXPECT_EQ(r.stats.sharedAccesses, threads / 32);
  return r.stats.sharedBankConflictReplays;
}

// 32 banks of 4 bytes. A lane at byte offset o uses bank (o / 4) % 32.
TEST(EmuCountersTest, SharedBankConflicts) {
  // Stride 1 word: lane l in bank l, no conflict.
  EXPECT_EQ(replaysOf(4, 1), 0u);
  // Stride 2 words: lanes l and l + 16 share bank 2l % 32 with different
  // words, 2 passes.
  EXPECT_EQ(replaysOf(8, 1), 1u);
  // Stride 32 words: every lane in bank 0, 32 distinct words.
  EXPECT_EQ(replaysOf(128, 1), 31u);
  // Stride 0: all lanes read one word, a broadcast.
  EXPECT_EQ(replaysOf(0, 1), 0u);
  // Two warps with 32-way conflicts: 31 each.
  EXPECT_EQ(replaysOf(128, 1, 64), 62u);
  // 8 bytes a lane, half-warps: 16 lanes cover 32 consecutive words.
  EXPECT_EQ(replaysOf(8, 2), 0u);
  // 16 bytes a lane, quarter-warps: 8 lanes cover 32 consecutive words.
  EXPECT_EQ(replaysOf(16, 4), 0u);
  // 16 bytes at a stride of 8 words: in a quarter-warp, lanes l and l + 4
  // start 32 words apart, so each bank holds 2 distinct words: 1 replay in
  // each of the 4 phases.
  EXPECT_EQ(replaysOf(32, 4), 4u);
  // 8 bytes at a stride of 32 words: the 16 lanes of a half-warp all use
  // banks 0 and 1 with distinct words: 15 replays per half-warp.
  EXPECT_EQ(replaysOf(128, 2), 30u);
}

/// One warp's ldmatrix.x4: lane l gives the row at byte tid * strideBytes.
uint64_t ldmatrixReplays(unsigned strideBytes) {
  std::string ptx = ptxHeader() + R"(.visible .entry rows(
	.param .u64 .ptr .align 1 rows_out
)
{
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<4>;
	.shared .align 16 .b8 tile[4096];
	mov.u32 	%r1, %tid.x;
	mul.lo.s32 	%r2, %r1, )" +
                    std::to_string(strideBytes) + R"(;
	mov.u32 	%r3, tile;
	add.s32 	%r4, %r3, %r2;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 	{%r5, %r6, %r7, %r8}, [%r4];
	ld.param.u64 	%rd1, [rows_out];
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r5;
	ret;
}
)";
  std::vector<uint8_t> out(32 * 4, 0);
  Counted r = runCounted(ptx, "rows", {1, 1, 1}, {32, 1, 1}, {&out});
  EXPECT_EQ(r.error, "<success>");
  EXPECT_EQ(r.stats.sharedAccesses, 1u);
  EXPECT_EQ(r.stats.loadStoreInstructions, 32u * 3);
  return r.stats.sharedBankConflictReplays;
}

// ldmatrix reads 16-byte rows, 8 lanes (one matrix) per phase.
TEST(EmuCountersTest, LdmatrixBankConflicts) {
  // Consecutive rows: a matrix's 8 rows cover 32 consecutive words.
  EXPECT_EQ(ldmatrixReplays(16), 0u);
  // Rows 128 bytes apart: all 8 rows of a matrix in banks 0-3, 8 distinct
  // words each: 7 replays in each of the 4 phases.
  EXPECT_EQ(ldmatrixReplays(128), 4u * 7);
}

// 100 iterations of one f32 FMA (2 FLOPs) and one f16x2 FMA (4 FLOPs),
// then one f32 FMA that only the odd lanes execute.
TEST(EmuCountersTest, FmaLoop) {
  std::string ptx = ptxHeader() + R"(.visible .entry fmas(
	.param .u64 .ptr .align 1 fmas_out
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<8>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<4>;
	mov.u32 	%r1, %tid.x;
	cvt.rn.f32.u32 	%f1, %r1;
	mov.f32 	%f2, 0f00000000;
	mov.b32 	%r5, 1006648320;
	mov.b32 	%r6, 0;
	mov.u32 	%r2, 0;
$L__loop:
	fma.rn.f32 	%f2, %f1, 0f3F000000, %f2;
	fma.rn.f16x2 	%r6, %r5, %r5, %r6;
	add.s32 	%r2, %r2, 1;
	setp.lt.u32 	%p1, %r2, 100;
	@%p1 bra 	$L__loop;
	and.b32 	%r3, %r1, 1;
	setp.eq.u32 	%p2, %r3, 1;
	@%p2 fma.rn.f32 	%f2, %f1, %f1, %f2;
	ld.param.u64 	%rd1, [fmas_out];
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.f32 	[%rd3], %f2;
	ret;
}
)";
  const unsigned blocks = 2, threads = 64, n = blocks * threads;
  std::vector<uint8_t> out(threads * 4, 0);
  Counted r = runCounted(ptx, "fmas", {blocks, 1, 1}, {threads, 1, 1}, {&out});
  ASSERT_EQ(r.error, "<success>");
  const emu::LaunchStats &s = r.stats;
  // Issued by every lane: 2 per iteration, and the guarded one.
  EXPECT_EQ(s.fmaInstructions, n * (2ull * 100 + 1));
  // Executed: 6 FLOPs per iteration, 2 more in the n / 2 odd lanes.
  EXPECT_EQ(s.fmaFlops, n * 6ull * 100 + (n / 2) * 2);
  EXPECT_EQ(s.mmaFlops, 0u);
  // 6 before the loop, 5 per iteration, 8 after.
  EXPECT_EQ(s.threadInstructions, n * (6ull + 5 * 100 + 8));
  EXPECT_EQ(s.loadStoreInstructions, 2ull * n);
  expectClassesAddUp(s);
}

// Three mma.sync per warp: m16n8k16 f16 and bf16 (2*16*8*16 = 4096 FLOPs
// each) and m16n8k8 tf32 (2048), over two warps.
TEST(EmuCountersTest, MmaFlops) {
  std::string ptx = ptxHeader() + R"(.visible .entry mmas(
	.param .u64 .ptr .align 1 mmas_out
)
{
	.reg .b32 	%r<12>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<4>;
	mov.b32 	%r1, 0;
	mov.b32 	%r2, 0;
	mov.b32 	%r3, 0;
	mov.b32 	%r4, 0;
	mov.b32 	%r5, 0;
	mov.b32 	%r6, 0;
	mov.f32 	%f1, 0f3F800000;
	mov.f32 	%f2, 0f3F800000;
	mov.f32 	%f3, 0f3F800000;
	mov.f32 	%f4, 0f3F800000;
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	mov.u32 	%r7, %tid.x;
	ld.param.u64 	%rd1, [mmas_out];
	mul.wide.u32 	%rd2, %r7, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.f32 	[%rd3], %f1;
	ret;
}
)";
  std::vector<uint8_t> out(64 * 4, 0);
  Counted r = runCounted(ptx, "mmas", {1, 1, 1}, {64, 1, 1}, {&out});
  ASSERT_EQ(r.error, "<success>");
  const emu::LaunchStats &s = r.stats;
  EXPECT_EQ(s.mmaFlops, 2 * (2ull * 16 * 8 * 16 * 2 + 2ull * 16 * 8 * 8));
  EXPECT_EQ(s.mmaInstructions, 64u * 3);
  EXPECT_EQ(s.fmaFlops, 0u);
  expectClassesAddUp(s);
  // A D = A * B + C with zero A and B leaves C (1.0) in place.
  float first;
  std::memcpy(&first, out.data(), 4);
  EXPECT_EQ(first, 1.0f);
}

// shfl, vote and redux are shuffles; a guarded-off lane still issues.
TEST(EmuCountersTest, ShuffleClass) {
  std::string ptx = ptxHeader() + R"(.visible .entry shuffles(
	.param .u64 .ptr .align 1 shuffles_out
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;
	mov.u32 	%r1, %tid.x;
	shfl.sync.bfly.b32 	%r2, %r1, 1, 31, -1;
	setp.ne.u32 	%p1, %r2, 0;
	vote.sync.ballot.b32 	%r3, %p1, -1;
	redux.sync.add.u32 	%r4, %r1, -1;
	add.s32 	%r5, %r3, %r4;
	ld.param.u64 	%rd1, [shuffles_out];
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r5;
	ret;
}
)";
  std::vector<uint8_t> out(64 * 4, 0);
  Counted r = runCounted(ptx, "shuffles", {1, 1, 1}, {64, 1, 1}, {&out});
  ASSERT_EQ(r.error, "<success>");
  EXPECT_EQ(r.stats.shuffleInstructions, 64u * 3);
  EXPECT_EQ(r.stats.loadStoreInstructions, 64u * 2);
  EXPECT_EQ(r.stats.otherInstructions, 64u * 6);
  expectClassesAddUp(r.stats);
}

// Sampling N of 64 blocks runs N of them: the counts of a kernel whose
// blocks all do the same work are N/64 of the whole grid's.
TEST(EmuCountersTest, SampledBlocks) {
  const unsigned blocks = 64, threads = 128, n = blocks * threads;
  std::vector<float> in(n, 2.0f);
  auto run = [&](uint64_t sample, uint64_t seed, std::vector<uint8_t> &out) {
    std::vector<uint8_t> inBytes = bytesOf(in);
    out.assign(n * 4, 0);
    emu::LaunchSpec spec;
    spec.sampleBlocks = sample;
    spec.sampleSeed = seed;
    Counted r = runCounted(copyKernel(1), "copy", {blocks, 1, 1},
                           {threads, 1, 1}, {&inBytes, &out}, {}, spec);
    EXPECT_EQ(r.error, "<success>");
    return r.stats;
  };
  // How many blocks of out were written (their floats are 2.0).
  auto blocksWritten = [&](const std::vector<uint8_t> &out) {
    unsigned count = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      float first;
      std::memcpy(&first, out.data() + b * threads * 4, 4);
      count += first == 2.0f;
    }
    return count;
  };
  std::vector<uint8_t> out, again;
  emu::LaunchStats s = run(8, 7, out);
  EXPECT_EQ(s.blocksTotal, blocks);
  EXPECT_EQ(s.blocksRun, 8u);
  EXPECT_EQ(blocksWritten(out), 8u);
  EXPECT_EQ(s.threadInstructions, 8ull * threads * 13);
  EXPECT_EQ(s.globalSectors, 8ull * (threads / 32) * 2 * 4);
  EXPECT_EQ(s.dramReadSectors, 8ull * threads * 4 / 32);
  // The same seed draws the same blocks.
  emu::LaunchStats s2 = run(8, 7, again);
  EXPECT_EQ(out, again);
  EXPECT_EQ(s2.globalSectors, s.globalSectors);
  // A sample at least as large as the grid is the grid.
  emu::LaunchStats all = run(blocks, 7, out);
  EXPECT_EQ(all.blocksRun, blocks);
  EXPECT_EQ(blocksWritten(out), blocks);
  EXPECT_EQ(all.threadInstructions, 1ull * n * 13);
  EXPECT_EQ(run(1000, 7, out).blocksRun, blocks);
}

// Without countPerformance only the totals and the block counts are kept.
TEST(EmuCountersTest, OffByDefault) {
  const unsigned blocks = 2, threads = 64, n = blocks * threads;
  std::vector<uint8_t> in(n * 4, 0), out(n * 4, 0);
  std::string ptx = copyKernel(1);
  Expected<emu::Module> module = emu::parsePtx(ptx);
  ASSERT_TRUE(module.hasValue()) << errorOf(module);
  std::vector<emu::MemoryRegion> memory = {
      {bufferAddress(0), in.size(), in.data()},
      {bufferAddress(1), out.size(), out.data()}};
  PackedParams params;
  params.addU64(bufferAddress(0));
  params.addU64(bufferAddress(1));
  emu::LaunchSpec spec;
  spec.grid = {blocks, 1, 1};
  spec.block = {threads, 1, 1};
  spec.params = params.data();
  spec.paramBytes = params.size();
  spec.memory = &memory;
  emu::LaunchStats s;
  ASSERT_EQ(errorOf(emu::runKernel(module->kernels[0], spec, &s)), "<success>");
  EXPECT_EQ(s.threadInstructions, 13ull * n);
  EXPECT_EQ(s.blocksTotal, blocks);
  EXPECT_EQ(s.blocksRun, blocks);
  EXPECT_EQ(s.loadStoreInstructions + s.otherInstructions, 0u);
  EXPECT_EQ(s.globalAccesses + s.globalSectors + s.dramReadSectors, 0u);
}

} // namespace

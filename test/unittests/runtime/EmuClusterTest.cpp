//===- EmuClusterTest.cpp - sm_90 cluster registers and mapa on emu -------===//
//
// The PTX ISA's definitions ("Special Registers": %cluster_ctaid,
// %cluster_nctaid, %cluster_ctarank, %cluster_nctarank, %clusterid,
// %nclusterid, %is_explicit_cluster; "mapa"; "barrier.cluster";
// distributed shared memory), worked out by hand per block from the grid
// and cluster shapes: mapa to the block's own rank reaches the same bytes;
// to another rank, that block's shared memory (loads, stores, and
// mbarrier arrives, CUTLASS's ClusterBarrier::arrive(cta_id) pattern);
// barrier.cluster makes blocks wait for each other; misuse faults.
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include "emu/TensorMap.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// k(u64 out): %rd3 = &out[linear block id * 16] (16 words a block),
/// `flag` a shared word, `bar` a shared mbarrier.
std::string clusterKernel(const std::string &body) {
  return sm90Header() + R"(.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<16>;
	.shared .align 8 .b64 bar;
	.shared .align 4 .b32 flag;
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r0, %ctaid.x;
	mov.u32 	%r1, %ctaid.y;
	mov.u32 	%r2, %nctaid.x;
	mad.lo.u32 	%r3, %r1, %r2, %r0;
	mul.wide.u32 	%rd2, %r3, 64;
	add.s64 	%rd3, %rd1, %rd2;
)" + body +
         "\tret;\n}\n";
}

/// `text` without the first occurrence of `part` (which must be there).
std::string without(std::string text, const std::string &part) {
  size_t at = text.find(part);
  EXPECT_NE(at, std::string::npos) << part;
  if (at != std::string::npos)
    text.erase(at, part.size());
  return text;
}

TEST(EmuClusterTest, SpecialRegistersOfOneBlockClusters) {
  std::string body = R"(
	mov.u32 	%r10, %cluster_ctaid.x;
	mov.u32 	%r11, %cluster_ctaid.y;
	mov.u32 	%r12, %cluster_ctaid.z;
	mov.u32 	%r13, %cluster_nctaid.x;
	st.global.v4.u32 	[%rd3], {%r10, %r11, %r12, %r13};
	mov.u32 	%r14, %cluster_ctarank;
	mov.u32 	%r15, %cluster_nctarank;
	mov.u32 	%r16, %clusterid.x;
	mov.u32 	%r17, %clusterid.y;
	st.global.v4.u32 	[%rd3+16], {%r14, %r15, %r16, %r17};
	mov.u32 	%r18, %nclusterid.x;
	mov.u32 	%r19, %nclusterid.y;
	mov.u32 	%r20, %cluster_nctaid.y;
	mov.pred 	%p1, %is_explicit_cluster;
	selp.u32 	%r21, 1, 0, %p1;
	st.global.v4.u32 	[%rd3+32], {%r18, %r19, %r20, %r21};
)";
  for (bool explicitCluster : {false, true}) {
    DirectMemory memory;
    size_t out = memory.add(std::vector<uint32_t>(6 * 16, 0xdeadbeef));
    ParamBytes params;
    params.addU64(DirectMemory::address(out));
    DirectResult result =
        runDirect(clusterKernel(body), {3, 2, 1}, {32, 1, 1}, params, memory, 0,
                  false, false, Dim3(), explicitCluster);
    ASSERT_EQ(result.error, "<success>");
    std::vector<uint32_t> w = memory.as<uint32_t>(out);
    for (unsigned y = 0; y < 2; ++y)
      for (unsigned x = 0; x < 3; ++x) {
        const uint32_t *b = &w[(y * 3 + x) * 16];
        // A block is its own cluster: at (0,0,0) of a 1x1x1 cluster whose
        // id is the block's id, in a grid of 3 x 2 clusters.
        EXPECT_THAT(std::vector<uint32_t>(b, b + 12),
                    ::testing::ElementsAre(0u, 0u, 0u, 1u, 0u, 1u, x, y, 3u, 2u,
                                           1u, explicitCluster ? 1u : 0u))
            << "block (" << x << "," << y << ")";
      }
  }
}

TEST(EmuClusterTest, MapaToOwnRankReachesTheSameBytes) {
  std::string body = R"(
	mov.u32 	%r10, flag;
	mov.u32 	%r11, 1234;
	st.shared.u32 	[%r10], %r11;
	mov.u32 	%r12, %cluster_ctarank;
	mapa.shared::cluster.u32 	%r13, %r10, %r12;
	ld.shared::cluster.u32 	%r14, [%r13];
	mov.u64 	%rd4, flag;
	cvta.shared.u64 	%rd5, %rd4;
	mapa.u64 	%rd6, %rd5, %r12;
	ld.u32 	%r15, [%rd6];
	st.global.v4.u32 	[%rd3], {%r14, %r15, %r12, %r12};
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(2 * 16, 0xdeadbeef));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(clusterKernel(body), {2, 1, 1}, {32, 1, 1}, params, memory, 0,
                false, false, Dim3(), true);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> w = memory.as<uint32_t>(out);
  for (unsigned b = 0; b < 2; ++b) {
    EXPECT_EQ(w[b * 16 + 0], 1234u) << b; // through mapa.shared::cluster
    EXPECT_EQ(w[b * 16 + 1], 1234u) << b; // through generic mapa
    EXPECT_EQ(w[b * 16 + 2], 0u) << b;    // rank 0
  }
}

// CUTLASS's ClusterBarrier::arrive(cta_id, pred): mapa to the target
// block's mbarrier, then mbarrier.arrive.shared::cluster there.
TEST(EmuClusterTest, ArriveThroughMapaCompletesThePhase) {
  std::string body = R"(
	mov.u32 	%r4, %tid.x;
	mov.u32 	%r10, bar;
	setp.ne.u32 	%p1, %r4, 0;
	@%p1 bra 	$L_init_done;
	mov.u32 	%r11, 2;
	mbarrier.init.shared::cta.b64 	[%r10], %r11;
$L_init_done:
	bar.sync 	0;
	setp.eq.u32 	%p2, %r4, 0;
	setp.eq.u32 	%p3, %r4, 32;
	or.pred 	%p4, %p2, %p3;
	@!%p4 bra 	$L_wait;
	mov.u32 	%r12, %cluster_ctarank;
	mapa.shared::cluster.u32 	%r13, %r10, %r12;
	mbarrier.arrive.release.cluster.shared::cluster.b64 	_, [%r13];
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p5, [%r10], 0;
	@!%p5 bra 	$L_wait;
	selp.u32 	%r14, 1, 0, %p5;
	@%p2 st.global.u32 	[%rd3], %r14;
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(16, 0));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(clusterKernel(body), {1, 1, 1}, {64, 1, 1}, params, memory, 0,
                false, false, Dim3(), true);
  ASSERT_EQ(result.error, "<success>");
  EXPECT_EQ(memory.as<uint32_t>(out)[0], 1u);
  // With one of the two arrivals gone, nobody completes the phase.
  std::string oneArrival = body;
  oneArrival.replace(oneArrival.find("or.pred"), 24, "mov.pred 	%p4, %p2;");
  result = runDirect(clusterKernel(oneArrival), {1, 1, 1}, {64, 1, 1}, params,
                     memory, 0, false, false, Dim3(), true);
  EXPECT_THAT(result.error, HasSubstr("deadlock: mbarrier.try_wait"));
}

TEST(EmuClusterTest, MapaFaults) {
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(16, 0));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  // Rank 1 of a one-block cluster.
  DirectResult result = runDirect(clusterKernel(R"(
	mov.u32 	%r10, flag;
	mov.u32 	%r11, 1;
	mapa.shared::cluster.u32 	%r13, %r10, %r11;
)"),
                                  {1, 1, 1}, {32, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("mapa to block 1 of a cluster of 1"));
  EXPECT_THAT(result.error, HasSubstr("(mapa.shared::cluster.u32)"));
  // A generic address outside shared memory.
  result = runDirect(clusterKernel(R"(
	mov.u32 	%r11, 0;
	mapa.u64 	%rd6, %rd1, %r11;
)"),
                     {1, 1, 1}, {32, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("mapa of generic address"));
  EXPECT_THAT(result.error, HasSubstr("not in this block's shared memory"));
  // The decoder: a type mapa does not take.
  Expected<emu::Module> module = emu::parsePtx(
      clusterKernel("\tmapa.shared::cluster.b32 \t%r13, %r10, %r11;\n"));
  ASSERT_FALSE(module);
  EXPECT_THAT(module.error().message(), HasSubstr("takes .u32 or .u64"));
}

TEST(EmuClusterTest, LaunchesCheckTheClusterShape) {
  Expected<emu::Module> module = emu::parsePtx(clusterKernel(""));
  ASSERT_TRUE(static_cast<bool>(module));
  std::vector<uint32_t> words(64);
  std::vector<emu::MemoryRegion> regions = {
      {DirectMemory::address(0), words.size() * 4,
       reinterpret_cast<uint8_t *>(words.data())}};
  uint64_t param = DirectMemory::address(0);
  emu::LaunchSpec spec;
  spec.grid = {3, 1, 1};
  spec.block = {32, 1, 1};
  spec.params = reinterpret_cast<const uint8_t *>(&param);
  spec.paramBytes = 8;
  spec.memory = &regions;
  spec.cluster = {2, 1, 1};
  Error err = emu::runKernel(module->kernels[0], spec);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_THAT(err.message(), HasSubstr("grid (3,1,1) is not a whole number of "
                                       "clusters of (2,1,1)"));
  spec.grid = {34, 1, 1};
  spec.cluster = {17, 1, 1};
  err = emu::runKernel(module->kernels[0], spec);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_THAT(err.message(), HasSubstr("a cluster of 17 blocks (at most 16)"));
}

TEST(EmuClusterTest, SpecialRegistersOfTwoByTwoClusters) {
  std::string body = R"(
	mov.u32 	%r10, %cluster_ctaid.x;
	mov.u32 	%r11, %cluster_ctaid.y;
	mov.u32 	%r12, %cluster_ctarank;
	mov.u32 	%r13, %cluster_nctarank;
	st.global.v4.u32 	[%rd3], {%r10, %r11, %r12, %r13};
	mov.u32 	%r14, %clusterid.x;
	mov.u32 	%r15, %clusterid.y;
	mov.u32 	%r16, %nclusterid.x;
	mov.u32 	%r17, %nclusterid.y;
	st.global.v4.u32 	[%rd3+16], {%r14, %r15, %r16, %r17};
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(8 * 16, 0xdeadbeef));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(clusterKernel(body), {4, 2, 1}, {32, 1, 1}, params, memory, 0,
                false, false, Dim3{2, 2, 1}, true);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> w = memory.as<uint32_t>(out);
  for (unsigned y = 0; y < 2; ++y)
    for (unsigned x = 0; x < 4; ++x) {
      const uint32_t *b = &w[(y * 4 + x) * 16];
      // Block (x, y) is (x % 2, y % 2) of cluster (x / 2, y / 2); rank x
      // fastest; a grid of 2 x 1 clusters of 4.
      EXPECT_THAT(std::vector<uint32_t>(b, b + 8),
                  ::testing::ElementsAre(x % 2, y % 2, x % 2 + 2 * (y % 2), 4u,
                                         x / 2, y / 2, 2u, 1u))
          << "block (" << x << "," << y << ")";
    }
}

// Each block of a 2-block cluster writes its shared word (the first of
// `bar`'s two), the cluster synchronises, each reads its peer's word
// through mapa and writes it plus 1000 into the peer's second word; after
// another cluster barrier each block stores both of its words.
TEST(EmuClusterTest, DistributedSharedMemoryAndClusterBarrier) {
  std::string body = R"(
	mov.u32 	%r4, %tid.x;
	mov.u32 	%r5, %cluster_ctarank;
	mov.u32 	%r10, bar;
	mad.lo.u32 	%r11, %r5, 100, 7;
	setp.eq.u32 	%p1, %r4, 0;
	@%p1 st.shared.u32 	[%r10], %r11;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	xor.b32 	%r12, %r5, 1;
	mapa.shared::cluster.u32 	%r13, %r10, %r12;
	ld.shared::cluster.u32 	%r14, [%r13];
	add.u32 	%r15, %r14, 1000;
	@%p1 st.shared::cluster.u32 	[%r13+4], %r15;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ld.shared.u32 	%r16, [%r10];
	ld.shared.u32 	%r17, [%r10+4];
	@%p1 st.global.v4.u32 	[%rd3], {%r14, %r16, %r17, %r5};
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(4 * 16, 0xdeadbeef));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(clusterKernel(body), {4, 1, 1}, {64, 1, 1}, params, memory, 0,
                false, /*checkShared=*/true, Dim3{2, 1, 1}, true);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> w = memory.as<uint32_t>(out);
  for (unsigned b = 0; b < 4; ++b) {
    unsigned rank = b % 2, peer = rank ^ 1;
    EXPECT_THAT(std::vector<uint32_t>(&w[b * 16], &w[b * 16] + 4),
                ::testing::ElementsAre(peer * 100 + 7, rank * 100 + 7,
                                       rank * 100 + 7 + 1000, rank))
        << "block " << b;
  }
  // Without the first cluster barrier a block may read its peer's word
  // before the peer wrote it; without the last, a block may exit while its
  // peer still writes its shared memory: the emulator runs the blocks in
  // rank order, so block 1 stores into block 0's exited shared memory.
  std::string noFinalBarrier =
      without(body, "\tbarrier.cluster.arrive.aligned;\n"
                    "\tbarrier.cluster.wait.aligned;\n");
  result = runDirect(clusterKernel(noFinalBarrier), {2, 1, 1}, {64, 1, 1},
                     params, memory, 0, false, false, Dim3{2, 1, 1}, true);
  EXPECT_THAT(result.error, HasSubstr("block 0 of the cluster has exited"));
}

// A consumer block waits on its own mbarrier; the producer block of the
// cluster arrives on it remotely (mapa + mbarrier.arrive.shared::cluster).
TEST(EmuClusterTest, RemoteArriveReleasesAnotherBlock) {
  std::string body = R"(
	mov.u32 	%r4, %tid.x;
	mov.u32 	%r5, %cluster_ctarank;
	mov.u32 	%r10, bar;
	setp.eq.u32 	%p1, %r4, 0;
	@!%p1 bra 	$L_init_done;
	mov.u32 	%r11, 1;
	mbarrier.init.shared::cta.b64 	[%r10], %r11;
$L_init_done:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	setp.eq.u32 	%p2, %r5, 1;
	@%p2 bra 	$L_consumer;
	@!%p1 bra 	$L_done;
	mov.u32 	%r12, 1;
	mapa.shared::cluster.u32 	%r13, %r10, %r12;
	mbarrier.arrive.release.cluster.shared::cluster.b64 	_, [%r13];
	bra.uni 	$L_done;
$L_consumer:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r10], 0;
	@!%p3 bra 	$L_consumer;
	selp.u32 	%r14, 1, 0, %p3;
	@%p1 st.global.u32 	[%rd3], %r14;
$L_done:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(2 * 16, 0));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(clusterKernel(body), {2, 1, 1}, {64, 1, 1}, params, memory, 0,
                false, false, Dim3{2, 1, 1}, true);
  ASSERT_EQ(result.error, "<success>");
  EXPECT_EQ(memory.as<uint32_t>(out)[16], 1u);
  // Without the producer's arrive the consumer waits forever.
  std::string noArrive = without(
      body,
      "\tmbarrier.arrive.release.cluster.shared::cluster.b64 \t_, [%r13];\n");
  result = runDirect(clusterKernel(noArrive), {2, 1, 1}, {64, 1, 1}, params,
                     memory, 0, false, false, Dim3{2, 1, 1}, true);
  // The consumer is named (the producer only waits for it at the cluster
  // barrier).
  EXPECT_THAT(result.error, HasSubstr("block (1,0,0)"));
  EXPECT_THAT(result.error, HasSubstr("deadlock: mbarrier.try_wait"));
  EXPECT_THAT(result.error, HasSubstr("every thread of the cluster waits"));
}

TEST(EmuClusterTest, ClusterBarrierMisuse) {
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(16, 0));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result = runDirect(clusterKernel("\tbarrier.cluster.wait;\n"),
                                  {2, 1, 1}, {32, 1, 1}, params, memory, 0,
                                  false, false, Dim3{2, 1, 1}, true);
  EXPECT_THAT(result.error,
              HasSubstr("barrier.cluster.wait without a barrier.cluster.arrive "
                        "before it"));
  result = runDirect(
      clusterKernel("\tbarrier.cluster.arrive;\n\tbarrier.cluster.arrive;\n"),
      {2, 1, 1}, {32, 1, 1}, params, memory, 0, false, false, Dim3{2, 1, 1},
      true);
  EXPECT_THAT(result.error, HasSubstr("barrier.cluster.arrive twice"));
  // try_wait on another block's mbarrier.
  result = runDirect(clusterKernel(R"(
	mov.u32 	%r10, bar;
	mov.u32 	%r11, 1;
	mapa.shared::cluster.u32 	%r13, %r10, %r11;
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r13], 0;
)"),
                     {2, 1, 1}, {32, 1, 1}, params, memory, 0, false, false,
                     Dim3{2, 1, 1}, true);
  EXPECT_THAT(result.error, HasSubstr("only arrive and the tx-count "
                                      "operations reach another block's"));
  Expected<emu::Module> module =
      emu::parsePtx(clusterKernel("\tbarrier.cluster.aligned;\n"));
  ASSERT_FALSE(module);
  EXPECT_THAT(module.error().message(), HasSubstr("needs .arrive or .wait"));
}

// TMA multicast: block 0 of a 2-block cluster loads one 8 x 4 box of a
// 16 x 8 u16 tensor (no swizzle: the box lands densely, row by row) into
// both blocks; each block expects the 64 bytes on its own mbarrier and
// copies what landed to out[rank].
std::string multicastKernel(const std::string &mask) {
  return sm90Header() + R"(.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .u64 k_param_1
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<16>;
	.shared .align 128 .b8 smem[64];
	.shared .align 8 .b64 bar;
	mov.u32 	%r0, %tid.x;
	mov.u32 	%r1, %cluster_ctarank;
	mov.b64 	%rd1, k_param_0;
	cvta.param.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [k_param_1];
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r9, bar;
	mov.u32 	%r10, smem;
	setp.eq.u32 	%p1, %r0, 0;
	@!%p1 bra 	$L_synced;
	mbarrier.init.shared::cta.b64 	[%r9], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r9], 64;
$L_synced:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	setp.eq.u32 	%p2, %r1, 0;
	and.pred 	%p3, %p1, %p2;
	@!%p3 bra 	$L_wait;
	mov.u32 	%r20, 4;
	mov.u32 	%r21, 2;
	mov.u16 	%rs1, )" +
         mask + R"(;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r10], [%rd1, {%r20, %r21}], [%r9], %rs1;
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 	%p4, [%r9], 0;
	@!%p4 bra 	$L_wait;
	setp.lt.u32 	%p5, %r0, 16;
	@!%p5 bra 	$L_done;
	shl.b32 	%r11, %r0, 2;
	add.u32 	%r12, %r10, %r11;
	ld.shared.u32 	%r13, [%r12];
	mad.lo.u32 	%r14, %r1, 16, %r0;
	mul.wide.u32 	%rd3, %r14, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r13;
$L_done:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ret;
}
)";
}

TEST(EmuClusterTest, TmaMulticastLandsInEveryBlockOfTheMask) {
  std::vector<uint16_t> tensor(16 * 8);
  for (unsigned i = 0; i < tensor.size(); ++i)
    tensor[i] = static_cast<uint16_t>(1000 + i);
  DirectMemory memory;
  size_t in = memory.add(tensor);
  size_t out = memory.add(std::vector<uint32_t>(2 * 16, 0xdeadbeef));
  emu::EmuTensorMap map;
  map.dataType = 1; // CU_TENSOR_MAP_DATA_TYPE_UINT16
  map.rank = 2;
  map.globalAddress = DirectMemory::address(in);
  map.globalDims[0] = 16;
  map.globalDims[1] = 8;
  map.globalStrides[0] = 32;
  map.boxDims[0] = 8;
  map.boxDims[1] = 4;
  map.elementStrides[0] = map.elementStrides[1] = 1;
  ParamBytes params;
  params.add(&map, sizeof(map), 64);
  params.addU64(DirectMemory::address(out));
  std::string ptx = multicastKernel("3");
  ptx.replace(ptx.find(".reg .b64"), 0, ".reg .b16 \t%rs<4>;\n\t");
  DirectResult result =
      runDirect(ptx, {2, 1, 1}, {32, 1, 1}, params, memory, 0, false,
                /*checkShared=*/true, Dim3{2, 1, 1}, true);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> words = memory.as<uint32_t>(out);
  for (unsigned rank = 0; rank < 2; ++rank)
    for (unsigned wd = 0; wd < 16; ++wd) {
      // Word wd holds box elements 2wd and 2wd + 1: row 2 + wd / 4,
      // columns 4 + 2 (wd % 4) and the next.
      unsigned row = 2 + wd / 4, col = 4 + 2 * (wd % 4);
      uint32_t want = tensor[row * 16 + col] |
                      static_cast<uint32_t>(tensor[row * 16 + col + 1]) << 16;
      EXPECT_EQ(words[rank * 16 + wd], want)
          << "rank " << rank << " word " << wd;
    }
  // Mask 1: block 1 expects bytes that never come.
  ptx = multicastKernel("1");
  ptx.replace(ptx.find(".reg .b64"), 0, ".reg .b16 \t%rs<4>;\n\t");
  result = runDirect(ptx, {2, 1, 1}, {32, 1, 1}, params, memory, 0, false,
                     false, Dim3{2, 1, 1}, true);
  EXPECT_THAT(result.error, HasSubstr("block (1,0,0)"));
  EXPECT_THAT(result.error, HasSubstr("tx-count 64"));
}

} // namespace

// A kernel compiled with __cluster_dims__ (.reqnctapercluster) runs in
// clusters of that shape whatever the launch names, as cuLaunchKernel
// launches it on hardware; a launch naming another shape is an error.
TEST(EmuClusterTest, ReqnctaperclusterSetsTheClusterShape) {
  std::string body = R"(
	mov.u32 	%r10, %cluster_ctarank;
	mov.u32 	%r11, %cluster_nctarank;
	mov.u32 	%r12, %clusterid.x;
	mov.pred 	%p1, %is_explicit_cluster;
	selp.u32 	%r13, 1, 0, %p1;
	st.global.v4.u32 	[%rd3], {%r10, %r11, %r12, %r13};
)";
  std::string ptx = clusterKernel(body);
  size_t brace = ptx.find(")\n{");
  ASSERT_NE(brace, std::string::npos);
  ptx.insert(brace + 1, "\n.reqnctapercluster 2, 1, 1");
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(4 * 16, 0xdeadbeef));
  ParamBytes params;
  params.addU64(DirectMemory::address(out));
  DirectResult result = runDirect(ptx, {4, 1, 1}, {32, 1, 1}, params, memory);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> w = memory.as<uint32_t>(out);
  for (unsigned b = 0; b < 4; ++b)
    EXPECT_THAT(std::vector<uint32_t>(&w[b * 16], &w[b * 16] + 4),
                ::testing::ElementsAre(b % 2, 2u, b / 2, 1u))
        << "block " << b;
  DirectResult other = runDirect(ptx, {4, 1, 1}, {32, 1, 1}, params, memory, 0,
                                 false, false, Dim3{4, 1, 1}, true);
  EXPECT_THAT(other.error, HasSubstr("launched in clusters of (4,1,1) but "
                                     "compiled for (2,1,1)"));
  // A grid that is not a whole number of the declared clusters.
  DirectResult odd = runDirect(ptx, {3, 1, 1}, {32, 1, 1}, params, memory);
  EXPECT_THAT(odd.error, HasSubstr("is not a whole number of clusters"));
}

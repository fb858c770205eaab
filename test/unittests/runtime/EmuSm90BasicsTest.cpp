//===- EmuSm90BasicsTest.cpp - sm_90a targets, fences, setmaxnreg, elect --===//
//
// The sm_90 instructions without data of their own: `.target sm_90a`,
// the async-proxy and mbarrier-init fences, wgmma.fence, setmaxnreg (whose
// count the parser checks), prefetches, elect.sync (the leader is the
// lowest member lane, PTX ISA "elect.sync"), and the generic address of a
// kernel parameter (what NVRTC emits for a `__grid_constant__` parameter
// whose address is taken: mov of the parameter, then cvta.param).
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

std::string kernelWith(const std::string &body) {
  return sm90Header() + R"(.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .u64 k_param_1
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<16>;
	ld.param.u64 	%rd1, [k_param_1];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r0, %tid.x;
	mul.wide.u32 	%rd2, %r0, 16;
	add.s64 	%rd3, %rd1, %rd2;
)" + body + "\tret;\n}\n";
}

TEST(EmuSm90BasicsTest, FencesSetmaxnregElectAndParamAddresses) {
  std::string body = R"(
	fence.proxy.async.shared::cta;
	fence.proxy.async.global;
	fence.proxy.async;
	fence.mbarrier_init.release.cluster;
	fence.acq_rel.cta;
	wgmma.fence.sync.aligned;
	setmaxnreg.dec.sync.aligned.u32 40;
	setmaxnreg.inc.sync.aligned.u32 232;
	prefetch.global.L2 	[%rd1];
	mov.b64 	%rd4, k_param_0;
	cvta.param.u64 	%rd5, %rd4;
	prefetch.tensormap 	[%rd5];
	ld.u32 	%r1, [%rd5+8];
	ld.b32 	%r2, [%rd5+124];
	{
	.reg .pred P1;
	elect.sync 	%r3|P1, -1;
	selp.u32 	%r4, 1, 0, P1;
	}
	elect.sync 	_|%p2, 0xfffffff0;
	selp.u32 	%r5, 1, 0, %p2;
	st.global.v4.u32 	[%rd3], {%r1, %r3, %r4, %r5};
	st.global.u32 	[%rd3+12], %r5;
	add.s32 	%r6, %r2, %r5;
	st.global.u32 	[%rd3+12], %r6;
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(64 * 4, 0xdeadbeef));
  ParamBytes params;
  std::vector<uint32_t> map(32);
  for (unsigned i = 0; i < 32; ++i)
    map[i] = 1000 + i;
  params.add(map.data(), 128, 64);
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(kernelWith(body), {1, 1, 1}, {64, 1, 1}, params, memory);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> words = memory.as<uint32_t>(out);
  for (unsigned t = 0; t < 64; ++t) {
    unsigned lane = t % 32;
    EXPECT_EQ(words[t * 4 + 0], 1002u) << t; // param word 2
    EXPECT_EQ(words[t * 4 + 1], 0u) << t;    // leader of all lanes: lane 0
    EXPECT_EQ(words[t * 4 + 2], lane == 0 ? 1u : 0u) << t;
    // Leader of 0xfffffff0 is lane 4; word 3 is param word 31 plus it.
    EXPECT_EQ(words[t * 4 + 3], 1031u + (lane == 4 ? 1u : 0u)) << t;
  }
}

TEST(EmuSm90BasicsTest, ElectAmongActiveLanes) {
  // Only the odd lanes execute elect: the leader is lane 1.
  std::string body = R"(
	and.b32 	%r1, %r0, 1;
	setp.eq.u32 	%p1, %r1, 0;
	mov.u32 	%r3, 99;
	@%p1 bra 	$L_skip;
	elect.sync 	%r3|%p2, -1;
	selp.u32 	%r4, 1, 0, %p2;
	st.global.u32 	[%rd3+4], %r4;
$L_skip:
	st.global.u32 	[%rd3], %r3;
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(32 * 4, 0));
  ParamBytes params;
  std::vector<uint8_t> map(128);
  params.add(map.data(), 128, 64);
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(kernelWith(body), {1, 1, 1}, {32, 1, 1}, params, memory);
  ASSERT_EQ(result.error, "<success>");
  std::vector<uint32_t> words = memory.as<uint32_t>(out);
  for (unsigned t = 0; t < 32; ++t) {
    EXPECT_EQ(words[t * 4], t % 2 ? 1u : 99u) << t;
    EXPECT_EQ(words[t * 4 + 1], t == 1 ? 1u : 0u) << t;
  }
}

TEST(EmuSm90BasicsTest, SetmaxnregCountsAreChecked) {
  for (const char *count : {"20", "264", "100"}) {
    std::string ptx = kernelWith(
        std::string("\tsetmaxnreg.inc.sync.aligned.u32 ") + count + ";\n");
    Expected<emu::Module> module = emu::parsePtx(ptx);
    ASSERT_FALSE(module) << count;
    EXPECT_THAT(module.error().message(),
                HasSubstr(std::string("setmaxnreg register count ") + count +
                          " must be a multiple of 8 in 24..256"));
    EXPECT_THAT(module.error().message(), HasSubstr("PTX line 18"));
  }
}

TEST(EmuSm90BasicsTest, ParametersAreReadOnlyThroughGenericAddresses) {
  std::string body = R"(
	mov.b64 	%rd4, k_param_0;
	cvta.param.u64 	%rd5, %rd4;
	st.u32 	[%rd5], %r0;
)";
  DirectMemory memory;
  size_t out = memory.add(std::vector<uint32_t>(4, 0));
  ParamBytes params;
  std::vector<uint8_t> map(128);
  params.add(map.data(), 128, 64);
  params.addU64(DirectMemory::address(out));
  DirectResult result =
      runDirect(kernelWith(body), {1, 1, 1}, {1, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("generic store at parameter offset 0"));
  EXPECT_THAT(result.error, HasSubstr("PTX line 21 (st.u32)"));
  // Past the end of the parameters.
  body = R"(
	mov.b64 	%rd4, k_param_0;
	cvta.param.u64 	%rd5, %rd4;
	ld.u32 	%r1, [%rd5+136];
)";
  result = runDirect(kernelWith(body), {1, 1, 1}, {1, 1, 1}, params, memory);
  EXPECT_THAT(result.error, HasSubstr("generic load at parameter offset 136"));
}

TEST(EmuSm90BasicsTest, Sm90TargetsParse) {
  for (const char *target : {"sm_90", "sm_90a"}) {
    std::string ptx = std::string(".version 8.0\n.target ") + target +
                      "\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n";
    EXPECT_TRUE(static_cast<bool>(emu::parsePtx(ptx))) << target;
  }
}

} // namespace

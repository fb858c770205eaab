//===- WgmmaTestKernel.h - The PTX kernel of the wgmma tests ----*- C++ -*-===//
//
// One warpgroup copies a shared-memory image in (bar.sync, then the
// async-proxy fence), loads its C fragment, runs `steps` wgmmas (a commit
// after each, wait_group 1 after the second, wait_group 0 at the end) and
// stores D. Shared by EmuWgmmaTest (16- and 32-bit types) and
// Emu8BitMmaTest (8-bit types), which differ only in the instruction's
// type suffix, its trailing operands and the accumulator's type.
//
// Parameters: the image, the descriptors (A, B per step, 16 bytes), C/D
// (row-major, one thread's n/2 accumulators per 2n bytes), the A fragments
// (16 bytes per step and thread, with aRegisters), the image's 32-bit
// words, and scale-d (0: D = A*B for the first step).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_WGMMATESTKERNEL_H
#define KILN_TEST_UNITTESTS_RUNTIME_WGMMATESTKERNEL_H

#include "EmuDirectTestUtils.h"

#include <cstdint>
#include <functional>
#include <string>

namespace kiln::runtime::test {

struct WgmmaTestKernel {
  /// The module's ".version" (wgmma with mixed s8/u8 types needs 8.4).
  std::string version = "8.0";
  /// "f32" or "s32".
  std::string accumulator = "f32";
  unsigned n = 8, steps = 1;
  bool aRegisters = false;
  /// The instruction up to its operands, e.g.
  /// "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16".
  std::string instruction;
  /// What follows the scale-d predicate (", 1, 1, 0, 0"), by step.
  std::function<std::string(unsigned step)> trailing;
};

inline std::string ptxRegisterList(const char *prefix, unsigned first,
                                   unsigned count) {
  std::string s = "{";
  for (unsigned i = 0; i < count; ++i)
    s += (i ? ", %" : "%") + std::string(prefix) + std::to_string(first + i);
  return s + "}";
}

inline std::string wgmmaTestKernel(const WgmmaTestKernel &k,
                                   uint64_t sharedBytes) {
  std::string header = sm90Header();
  header.replace(header.find(".version 8.0"), 12, ".version " + k.version);
  const std::string &acc = k.accumulator;
  std::string s = header + R"(.visible .entry k(
	.param .u64 k_param_0,
	.param .u64 k_param_1,
	.param .u64 k_param_2,
	.param .u64 k_param_3,
	.param .u32 k_param_4,
	.param .u32 k_param_5
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<32>;
	.reg .)" + acc +
                  R"( 	%f<130>;
	.reg .b32 	%a<32>;
	.shared .align 1024 .b8 smem[)" +
                  std::to_string(sharedBytes) + R"(];
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u64 	%rd2, [k_param_1];
	ld.param.u64 	%rd3, [k_param_2];
	ld.param.u64 	%rd4, [k_param_3];
	ld.param.u32 	%r10, [k_param_4];
	ld.param.u32 	%r11, [k_param_5];
	mov.u32 	%r0, %tid.x;
	mov.u32 	%r1, %r0;
	mov.u32 	%r4, smem;
$L_copy:
	setp.ge.u32 	%p1, %r1, %r10;
	@%p1 bra 	$L_copied;
	mul.wide.u32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.u32 	%r2, [%rd6];
	shl.b32 	%r3, %r1, 2;
	add.s32 	%r5, %r4, %r3;
	st.shared.u32 	[%r5], %r2;
	add.u32 	%r1, %r1, 128;
	bra 	$L_copy;
$L_copied:
	bar.sync 	0;
	fence.proxy.async.shared::cta;
	mul.wide.u32 	%rd7, %r0, )" +
                  std::to_string(2 * k.n) + R"(;
	add.s64 	%rd8, %rd3, %rd7;
	mul.wide.u32 	%rd9, %r0, )" +
                  std::to_string(16 * k.steps) + R"(;
	add.s64 	%rd10, %rd4, %rd9;
)";
  for (unsigned i = 0; i < k.n / 2; ++i)
    s += "\tld.global." + acc + " \t%f" + std::to_string(i) + ", [%rd8+" +
         std::to_string(4 * i) + "];\n";
  if (k.aRegisters)
    for (unsigned i = 0; i < 4 * k.steps; ++i)
      s += "\tld.global.b32 \t%a" + std::to_string(i) + ", [%rd10+" +
           std::to_string(4 * i) + "];\n";
  s += "\tsetp.ne.u32 \t%p2, %r11, 0;\n\tsetp.eq.u32 \t%p3, %r11, %r11;\n";
  s += "\twgmma.fence.sync.aligned;\n";
  std::string dList = ptxRegisterList("f", 0, k.n / 2);
  for (unsigned step = 0; step < k.steps; ++step) {
    s += "\tld.global.u64 \t%rd20, [%rd2+" + std::to_string(16 * step) +
         "];\n\tld.global.u64 \t%rd21, [%rd2+" + std::to_string(16 * step + 8) +
         "];\n";
    std::string a = k.aRegisters ? ptxRegisterList("a", 4 * step, 4) : "%rd20";
    s += "\t" + k.instruction + " \t" + dList + ", " + a + ", %rd21, " +
         (step == 0 ? "%p2" : "%p3") + (k.trailing ? k.trailing(step) : "") +
         ";\n\twgmma.commit_group.sync.aligned;\n";
    if (step == 1)
      s += "\twgmma.wait_group.sync.aligned 1;\n";
  }
  s += "\twgmma.wait_group.sync.aligned 0;\n";
  for (unsigned i = 0; i < k.n / 2; ++i)
    s += "\tst.global." + acc + " \t[%rd8+" + std::to_string(4 * i) + "], %f" +
         std::to_string(i) + ";\n";
  return s + "\tret;\n}\n";
}

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_WGMMATESTKERNEL_H

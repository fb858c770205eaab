//===- TargetInfo.h - What the compiler may ask about its GPU ---*- C++ -*-===//
//
// The one interface through which passes and kernel heuristics learn the
// facts of the GPU they compile for: sm version, SM count, shared memory
// per block and per SM, registers, resident threads, tensor-core
// instructions, peaks and bandwidth. Every figure comes from
// runtime/targets/gpus.ini (kiln/runtime/TargetTable.h), embedded at build
// time, the same table the runtime's performance model reads; nothing else
// in the compiler writes an SM count or a shared-memory size down.
//
// A chip ("sm_90") stands for the first GPU of the table with its sm (the
// H200 for sm_90, the A100 for sm_80). Plain C++17, no LLVM, so the
// NVRTC-side kernel heuristics (KilnContractionKernels) use it too.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_TARGETINFO_H
#define KILN_TARGET_CUDA_TARGETINFO_H

#include "kiln/runtime/TargetTable.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

class TargetInfo {
public:
  /// The GPU a compile for `chip` ("sm_90", "sm_90a") targets, or nullptr
  /// when the target table has no GPU of that sm.
  static const TargetInfo *forChip(std::string_view chip);
  /// The GPU of the greatest sm of the table not above `sm` (the smallest
  /// sm when all are above): what a heuristic asked about another sm
  /// assumes.
  static const TargetInfo &forSm(uint32_t sm);
  /// The chips forChip knows, for messages: "sm_80, sm_90".
  static std::string supportedChips();

  /// The table's entry name ("sm_90-h200").
  const std::string &name() const { return figures_.name; }
  /// major * 10 + minor (90).
  uint32_t sm() const { return figures_.sm; }
  uint32_t smCount() const { return figures_.smCount; }
  uint32_t sharedBytesPerSm() const { return figures_.sharedBytesPerSm; }
  /// The most shared memory one block may use (the opt-in maximum).
  uint32_t maxSharedBytesPerBlock() const {
    return figures_.maxSharedBytesPerBlock;
  }
  uint32_t registersPerSm() const { return figures_.registersPerSm; }
  uint32_t maxRegistersPerThread() const {
    return figures_.maxRegistersPerThread;
  }
  uint32_t maxThreadsPerSm() const { return figures_.maxWarpsPerSm * 32; }
  uint32_t maxThreadsPerBlock() const { return figures_.maxThreadsPerBlock; }
  uint32_t maxBlocksPerSm() const { return figures_.maxBlocksPerSm; }
  double dramBandwidthGBps() const { return figures_.dramBandwidthGBps; }
  double fp32Tflops() const { return figures_.fp32Tflops; }

  /// Tensor-core instructions: mma.sync (m16n8k16 for bf16/fp16, m16n8k8
  /// for tf32) from sm_80; warpgroup wgmma (m64nNk16) and TMA from sm_90.
  bool hasMmaSync() const { return sm() >= 80; }
  bool hasWgmma() const { return sm() >= 90; }
  bool hasTma() const { return sm() >= 90; }

  /// Every figure, as the table gives it.
  const runtime::GpuTarget &figures() const { return figures_; }

  explicit TargetInfo(runtime::GpuTarget figures)
      : figures_(std::move(figures)) {}

private:
  runtime::GpuTarget figures_;
};

} // namespace kiln

#endif // KILN_TARGET_CUDA_TARGETINFO_H

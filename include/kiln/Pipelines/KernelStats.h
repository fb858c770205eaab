//===- KernelStats.h - What the kernels of a module do ----------*- C++ -*-===//
//
// Read after the gpu phase (kilnc --stats): one entry per launch, with the
// bytes it moves, the FLOPs it does as written and the precision it runs in.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_KERNELSTATS_H
#define KILN_PIPELINES_KERNELSTATS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace kiln {

/// One launch's share of KernelStats.
struct KernelLaunchStats {
  /// The gpu.func's name (the artifact's kernel name).
  std::string kernel;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  /// Floating-point operations every thread of the grid executes, as the
  /// kernel is written: arith/math float ops (fma 2) times the trip counts
  /// of their loops. Guarded code counts as run by every thread (an upper
  /// bound); loops with a non-constant bound count once.
  uint64_t flops = 0;
  /// The precision it runs in: the float element types of the buffers it
  /// reads and writes ("bf16->f32", or "f32" when they agree) and, for a
  /// generated kernel, of the float arithmetic in its body ("compute f32");
  /// "int" when it touches no float.
  std::string precision;
  /// False for a size bucket's launch that does not run at the compiled
  /// size (kilnc --size-buckets): it is listed, but the totals and the
  /// static estimate leave it out (every bucket computes the whole result).
  bool runsAtCompiledSize = true;
  /// The kernel's `kiln.kernel` decision as IR text
  /// ("#kiln.generic_kernel<vectorized, ...>"); empty when none.
  std::string config;
};

struct KernelStats {
  size_t kernels = 0;
  /// Estimated traffic: each buffer a kernel reads (writes) counts once per
  /// launch, in full, as if every kernel had an ideal cache.
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  uint64_t flops = 0;
  /// Per launch, in launch order.
  std::vector<KernelLaunchStats> launches;
};

/// Counts the launches of `module` (after the gpu phase) and their traffic.
KernelStats estimateKernelStats(mlir::ModuleOp module);

} // namespace kiln

#endif // KILN_PIPELINES_KERNELSTATS_H

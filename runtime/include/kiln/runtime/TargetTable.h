//===- TargetTable.h - The one table of GPU target facts --------*- C++ -*-===//
//
// runtime/targets/gpus.ini holds every figure Kiln knows about a GPU: SM
// count, shared memory and register limits, peaks, bandwidth, clock. It is
// the one source: the performance model (Profile.h), kiln-run --profile and
// the compiler's TargetInfo (include/kiln/Target/CUDA/TargetInfo.h, which
// sizes grids and kernel tiles from it) all read it through this header.
// The file is embedded at build time; the INI syntax is read by inih
// (Debian libinih-dev, docs/runtime.md "Target table").
//
// Stability: experimental (the figures are recalibrated).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TARGETTABLE_H
#define KILN_RUNTIME_TARGETTABLE_H

#include "kiln/runtime/Error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// One GPU's figures, as runtime/targets/gpus.ini gives them.
struct GpuTarget {
  /// The section name, e.g. "sm_90-h200".
  std::string name;
  std::string description;
  /// major * 10 + minor.
  uint32_t sm = 0;
  uint32_t smCount = 0;
  double dramBandwidthGBps = 0;
  double bf16Tflops = 0, fp16Tflops = 0, tf32Tflops = 0, fp32Tflops = 0;
  /// Dense int8 tensor-core peak (tera-ops); 0: twice bf16's.
  double int8Tops = 0;
  /// The GPU-to-GPU link of a ring all-reduce (NVLink): bus bandwidth in
  /// GB/s and latency per ring step in microseconds; 0: not given.
  double collectiveBandwidthGBps = 0;
  double collectiveLatencyUs = 0;
  uint32_t schedulersPerSm = 4;
  double clockGhz = 0;
  uint32_t registersPerSm = 0;
  uint32_t registerAllocationUnit = 256;
  uint32_t maxRegistersPerThread = 255;
  uint32_t sharedBytesPerSm = 0;
  uint32_t maxSharedBytesPerBlock = 0;
  uint32_t sharedAllocationUnit = 128;
  uint32_t reservedSharedBytesPerBlock = 0;
  uint32_t maxWarpsPerSm = 0;
  uint32_t maxBlocksPerSm = 0;
  uint32_t maxThreadsPerBlock = 1024;
  double occupancyForPeakBandwidth = 0.25;
  double occupancyForPeakCompute = 0.125;
  double launchOverheadUs = 0;
};

/// Parses a table in gpus.ini's format: `[name]` sections of `key = value`
/// lines, `#` or `;` comment lines. Every key of GpuTarget is required;
/// unknown keys are errors (a typo must not silently keep a default).
/// `source` names the table in messages ("FILE:LINE: ...").
Expected<std::vector<GpuTarget>> parseTargetTable(std::string_view text,
                                                  std::string_view source);

/// The table built into this binary (runtime/targets/gpus.ini at build
/// time). The compiler reads only this one, so a compile does not depend on
/// the environment.
const std::vector<GpuTarget> &builtinTargetTable();

/// The built-in table, or the file $KILN_TARGET_TABLE names (to calibrate
/// the performance model without rebuilding).
Expected<std::vector<GpuTarget>> loadTargetTable();

/// The entry named `nameOrTarget` ("sm_90-h200"), or the first entry whose
/// sm is that of an artifact target ("sm_90", "sm_90a").
Expected<GpuTarget> findTarget(const std::vector<GpuTarget> &table,
                               std::string_view nameOrTarget);

/// The sm number of "sm_90", "sm_90a", "sm_80f"; 0 when `target` is not of
/// that form.
uint32_t smOfTarget(std::string_view target);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_TARGETTABLE_H

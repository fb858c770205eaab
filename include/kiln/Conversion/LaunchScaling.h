//===- LaunchScaling.h - Launch grids that follow a symbolic dim -*- C++ -*-===//
//
// Sizes at run time, first stage of "kernels take sizes as parameters"
// (issue 24): an artifact compiled with `kilnc --dim N=1..64` keeps the
// maximum's memory plan and padding, but a launch whose work for slices
// N..63 lies only in a suffix of one grid dimension runs
// `ceil(N * numerator / denominator)` blocks there. These attributes carry
// that proof from the passes that know each kernel's shape to the artifact
// builder (docs/runtime.md "Sizes at run time").
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_LAUNCHSCALING_H
#define KILN_CONVERSION_LAUNCHSCALING_H

#include "llvm/ADT/StringRef.h"

namespace kiln {

/// On a `kiln.call_kernel` of a GEMM template (kiln-match-contractions):
/// `{rows = M, tile = BM, a = I}`: blockIdx.x tiles M's rows BM at a time,
/// and M's rows are slices of input I's dim 0 in order. kiln-map-to-gpu
/// turns it into a `kiln.grid_scale` when a symbol follows that dim.
inline constexpr llvm::StringLiteral kGridRowsAttr = "kiln.grid_rows";

/// On a `gpu.launch_func` (and, before outlining, a `gpu.launch` or a
/// `kiln.call_kernel`): `{symbol = "N", dim = 0 : i64, numerator = A : i64,
/// denominator = B : i64}`: with symbol N at size n the launch needs only
/// the first ceil(n * A / B) blocks of grid dim `dim`.
inline constexpr llvm::StringLiteral kGridScaleAttr = "kiln.grid_scale";

/// On a function, between kiln-map-to-gpu and kiln-name-kernels (outlining
/// drops the launches' attributes): one entry per generic launch in launch
/// order, a `kiln.grid_scale` dictionary or an empty one.
inline constexpr llvm::StringLiteral kLaunchGridScalesAttr =
    "kiln.launch_grid_scales";

} // namespace kiln

#endif // KILN_CONVERSION_LAUNCHSCALING_H

//===- SymbolicDims.h - Run-time sizes of symbolic dims ---------*- C++ -*-===//
//
// An artifact compiled with `kilnc --dim N=1..64` records its symbolic dims
// (Artifact::symbolicDims) and which signature dims follow them
// (TensorSignature::symbolicAxes). For a separable dim the runtime runs any
// size in the range by padding the inputs to the compiled maximum (zeros in
// the tail) and slicing the outputs back; these functions check the sizes a
// caller gives and do the copies. docs/runtime.md "Sizes at run time".
//
// Stability: as Runtime.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SYMBOLICDIMS_H
#define KILN_RUNTIME_SYMBOLICDIMS_H

#include "kiln/runtime/Artifact.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// One value per Artifact::symbolicDims entry.
using SymbolSizes = std::vector<int64_t>;

/// Each symbolic dim at its maximum: the compiled sizes.
SymbolSizes compiledSizes(const Artifact &artifact);

/// The shape of `tensor` when the symbolic dims have `sizes`.
Shape shapeAt(const TensorSignature &tensor, const SymbolSizes &sizes);

/// "Nx3 (N in 1..16)" for a tensor with symbolic dims, else "16x3".
std::string describeShape(const Artifact &artifact,
                          const TensorSignature &tensor);

/// Checks `shape` against input `input` (whose dtype and name the caller has
/// checked): the rank and every fixed dim match, and every symbolic dim is
/// in its range and, for a dim that is not separable, the compiled size.
/// Errors name the input, the dim (index and symbol), its range and the
/// value given.
Error checkInputShape(const Artifact &artifact, const TensorSignature &input,
                      const Shape &shape);

/// The sizes a run has, from the shapes bound to the inputs (nullopt for an
/// input not bound; its symbols keep their compiled size unless another
/// input gives them). Two inputs that give one symbol different values are
/// an error naming both.
Expected<SymbolSizes>
resolveSizes(const Artifact &artifact,
             const std::vector<std::optional<Shape>> &inputShapes);

/// Calls `copy(srcOffset, dstOffset, bytes)` for each contiguous run of the
/// row-major box common to a `srcShape` tensor and a `dstShape` tensor of
/// the same rank (extent min(src, dst) in every dim), byte offsets into
/// each. Pads (src smaller) or slices (src larger).
void forEachBoxRun(
    const Shape &srcShape, const Shape &dstShape, uint64_t elementSize,
    const std::function<void(uint64_t srcOffset, uint64_t dstOffset,
                             uint64_t bytes)> &copy);

/// Copies the common box of two host tensors (see forEachBoxRun); the
/// bytes of `dst` outside it are left as they are.
void copyBox(const void *src, const Shape &srcShape, void *dst,
             const Shape &dstShape, uint64_t elementSize);

/// verifyArtifact's checks of section `symbolic-dims`: ranges, names,
/// indices, and every symbolic signature dim at its symbol's maximum times
/// its factor.
Error verifySymbolicDims(const Artifact &artifact);

/// verifyArtifact's checks of section `launch-scales`: launches in
/// increasing order and in range, each symbol in range and separable, the
/// grid dim 0..2, numerator and denominator 1..2^32-1, and at the symbol's
/// maximum exactly the kernel's compiled block count along that dim.
Error verifyLaunchScales(const Artifact &artifact);

/// verifyArtifact's checks of section `launch-guards`: launches in
/// increasing order and in range, each symbol in range, each range
/// 0 <= min <= max (one past the symbol's range: a launch that never runs).
Error verifyLaunchGuards(const Artifact &artifact);

/// Whether launch `launch` runs when the symbolic dims have `sizes`: true
/// unless a launch-guards record excludes the size.
bool launchRunsAt(const Artifact &artifact, uint32_t launch,
                  const SymbolSizes &sizes);

/// The launches that run at `sizes`, in order (launchRunsAt).
std::vector<uint32_t> launchesAt(const Artifact &artifact,
                                 const SymbolSizes &sizes);

/// verifyArtifact's checks of section `size-masks`: inputs in increasing
/// order and in range, a known kind; an additive or keep mask a 1-D f32, f16 or
/// bf16 vector of its symbol's maximum times its factor, a mean scale an f32
/// scalar with factor 1; no symbolic dims and not a host step's;
/// the symbol in range and with no launch scales (a masked symbol's padded
/// slices are read, so they must be computed).
Error verifySizeMasks(const Artifact &artifact);

/// Writes size mask `mask` for a run where its symbol is `size` into
/// `bytes` (its input's compiled byte size): an additive mask 0 at
/// positions below size * factor, -inf from there on; a keep mask 1 then 0;
/// a mean scale the f32 max / size.
void fillSizeMask(const Artifact &artifact, const SizeMask &mask, int64_t size,
                  std::vector<uint8_t> &bytes);

/// The blocks `scale` asks for along its grid dim when its symbol is
/// `size`, clamped to 1..`compiled`.
uint32_t scaledBlocks(const LaunchScale &scale, int64_t size,
                      uint32_t compiled);

/// The grid launch `launch` runs when the symbolic dims have `sizes`: the
/// kernel's compiled grid, with the dim of its launch-scales record (if
/// any) scaled (scaledBlocks).
Dim3 launchGridAt(const Artifact &artifact, uint32_t launch,
                  const SymbolSizes &sizes);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SYMBOLICDIMS_H

//===- HostDataOps.h - Host steps on numbers: data-dependent shapes -*- C++ -*-===//
//
// Internal to runtime/lib: the host ops whose output shape depends on the
// data (NonZero, Compress, Unique, NonMaxSuppression), the indexing and
// data movement that follow them on the host (Gather, Transpose, Slice),
// and Cast between number types (HostSteps.cpp dispatches to them).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_HOSTDATAOPS_H
#define KILN_RUNTIME_LIB_HOSTDATAOPS_H

#include "kiln/runtime/HostSteps.h"

#include "Support.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::runtime {

/// Integer values of an int64 or int32 host tensor (Reshape's shape,
/// Squeeze's axes, Slice's starts, indices); `what` names it in the error.
Expected<std::vector<int64_t>> integersOf(const HostValue &value,
                                          std::string_view what);

/// The shape functions of the host's data movement (HostSteps.cpp), shared
/// with the shape guards (HostGuards.cpp): numpy broadcasting (nothing when
/// the shapes do not broadcast), Reshape's target (0 copies the input's dim
/// unless allowZero, one -1 is inferred), and Squeeze/Unsqueeze's result
/// (negative axes count from the end; Squeeze with no axes drops every 1).
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b);
Expected<Shape> reshapeTarget(const Shape &from, std::vector<int64_t> dims,
                              bool allowZero);
Expected<Shape> squeezeShape(const Shape &shape,
                             const std::vector<int64_t> &axes, bool squeeze);

/// Slice's window over `shape` (ONNX's clamping of starts and ends; axes
/// default to 0.., steps to 1): per dimension the first index, the stride
/// and the count. Shared with the `slice` shape guard.
struct SliceWindow {
  Shape start, stride, count;
};
Expected<SliceWindow> sliceWindow(const Shape &shape,
                                  std::vector<int64_t> starts,
                                  std::vector<int64_t> ends,
                                  std::vector<int64_t> axes,
                                  std::vector<int64_t> steps);

/// An ints attribute of a step (absent: none); the text comes from the
/// file, so a value that is not an integer is an error naming it.
Expected<std::vector<int64_t>> intsAttribute(const HostStep &step,
                                             std::string_view name);

/// Whether `op` is one of this file's (Cast aside).
bool isHostDataOp(std::string_view op);

/// The attribute checks of verifyHostStep for this file's ops (known
/// attribute values: Unique's `sorted`, NonMaxSuppression's
/// `center_point_box`, a Transpose permutation's entries).
Error verifyDataOpAttributes(const HostStep &step);

/// Runs one of this file's ops.
Error runDataOp(const HostStep &step,
                std::map<std::string, HostValue, std::less<>> &values);

/// Cast between number types (f32, f64, the integer types and bool; not
/// f16 or bf16): floats to integers truncate toward zero and saturate
/// (NaN gives 0), as the device's cvt.rzi.sat does; integers to narrower
/// integers wrap, as numpy's astype does; anything to bool is "not 0".
Expected<HostValue> castNumbers(const HostStep &step, const HostValue &in,
                                DType to);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_HOSTDATAOPS_H

//===- HostGuards.h - Checks on shape inputs taken at run time --*- C++ -*-===//
//
// Internal to runtime/lib. An exported model often passes the input that
// decides a node's shape (ReduceSum's axes, Reshape's shape, Tile's
// repeats, ...) as a graph input. When the model's declared shapes fix
// what that value must do, kilnc compiles the node for it and adds a
// `ShapeGuard` host step (Kiln's own op, not ONNX's) that checks the bound
// value before the launches, as torch.compile's guards do: a value that
// would give the node another shape, or reduce other axes, fails the run
// naming the node, the input, the value and what the artifact was compiled
// for. docs/runtime.md "Shape inputs at run time".
//
// Attributes (ints in decimal):
//   kind     axes-one-of | reshape | squeeze | unsqueeze | expand | equal,
//            which check the step's one input; or slice | pad |
//            resize-scales | resize-sizes, which read several operands:
//            step input k, or when it is empty (a constant) the ints
//            attribute named for operand k (slice: starts, ends, axes,
//            steps; pad: pads, axes; resize-scales: scales, f32 or f64;
//            resize-sizes: sizes)
//   op       the guarded node's ONNX op type (for messages)
//   operand  the input's role (axes, shape, repeats, split, k), or the
//            run-time operands' roles
//   input_shape  the guarded node's data input shape (all but `equal`)
//   expected axes-one-of: the axes sets the artifact computes, as bitmasks
//            (a reduction's, or CumSum's one axis; where there are several,
//            the device picks by the input); equal: the values; the
//            others: the node's output shape
//   free     axes-one-of: one bitmask of size-1 axes that may be in the
//            set or not (the reduction is the identity on them); equal:
//            positions whose value does not matter (AffineGrid's C)
//   axes     resize-scales and resize-sizes: the dimensions the values
//            cover (Resize's axes attribute)
//   not_smaller  resize-sizes: 1 for keep_aspect_ratio_policy not_smaller,
//            0 for not_larger
//   keepdims, noop_with_empty_axes, allowzero  as the node's attributes
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_HOSTGUARDS_H
#define KILN_RUNTIME_LIB_HOSTGUARDS_H

#include "kiln/runtime/HostSteps.h"

#include <map>
#include <string>

namespace kiln::runtime {

/// verifyHostStep's attribute checks for a ShapeGuard.
Error verifyShapeGuard(const HostStep &step);

/// Checks the guarded input's value; an error names the node and says what
/// the artifact was compiled for.
Error runShapeGuard(const HostStep &step,
                    const std::map<std::string, HostValue, std::less<>> &values);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_HOSTGUARDS_H

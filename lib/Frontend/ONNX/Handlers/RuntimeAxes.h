//===- RuntimeAxes.h - Axes inputs taken at run time ------------*- C++ -*-===//
//
// Private to the ONNX handlers (issue 24; docs/runtime.md "Shape inputs at
// run time"). A reduction's `axes` or CumSum's `axis` passed as a graph
// input: the axes sets the node's declared output shape allows, and, where
// it allows several (3x2x2 to 3x2: axis 1 or axis 2), a node that computes
// every one and picks at run time by the input's value.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERS_RUNTIMEAXES_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERS_RUNTIMEAXES_H

#include "../NodeImporter.h"

namespace kiln::onnx_frontend {

/// The axes sets a reduction of `in` may reduce to give `out`, sorted, each
/// with the size-1 axes it may reduce or not (`free`, only with keepdims
/// and when reducing a size-1 axis is the identity: `identityOnOnes`).
/// keepdims: the one set whose axes became 1. Without: every way of
/// dropping dims from `in` that leaves `out`.
struct AxesChoice {
  llvm::SmallVector<int64_t> axes;
  llvm::SmallVector<int64_t> free;
};
llvm::SmallVector<AxesChoice> axesForDeclaredShape(llvm::ArrayRef<int64_t> in,
                                                   llvm::ArrayRef<int64_t> out,
                                                   bool keepdims,
                                                   bool identityOnOnes);

/// Input `i` (canGuardInput holds) names one of `choices`, axes sets of a
/// rank-`rank` input: builds `build(axes)` for each and selects, on the
/// device, the one whose set the input names (negative axes counted from
/// the end; for more than one set, each given axis in the set, the sets
/// being of one size). A ShapeGuard of kind `axes-one-of` refuses any other
/// value before the launches. One choice is built alone, with its guard.
llvm::FailureOr<mlir::Value> selectByRuntimeAxes(
    NodeImporter &n, size_t i, llvm::StringRef operand,
    llvm::ArrayRef<int64_t> inputShape, llvm::ArrayRef<AxesChoice> choices,
    bool noopWithEmptyAxes,
    llvm::function_ref<llvm::FailureOr<mlir::Value>(llvm::ArrayRef<int64_t>)>
        build);

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERS_RUNTIMEAXES_H

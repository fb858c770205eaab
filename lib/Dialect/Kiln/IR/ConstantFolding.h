//===- ConstantFolding.h - Folding helpers for kiln ops ---------*- C++ -*-===//
//
// Private to the dialect library. Folding is meant for shape arithmetic and
// other small tensors: anything larger than kMaxFoldElements (and not a splat)
// is left for the compiled kernels.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_DIALECT_KILN_IR_CONSTANTFOLDING_H
#define KILN_LIB_DIALECT_KILN_IR_CONSTANTFOLDING_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"

#include <functional>
#include <optional>

namespace kiln {

/// Largest non-splat tensor the folders materialise.
constexpr int64_t kMaxFoldElements = 1 << 16;

/// The attribute as dense elements when it is one and small enough to fold.
mlir::DenseElementsAttr getFoldableElements(mlir::Attribute attr);

using IntBinaryFn = std::function<std::optional<llvm::APInt>(
    const llvm::APInt &, const llvm::APInt &, bool)>;
using FloatBinaryFn = std::function<std::optional<llvm::APFloat>(
    const llvm::APFloat &, const llvm::APFloat &)>;
using IntCompareFn =
    std::function<bool(const llvm::APInt &, const llvm::APInt &, bool)>;
using FloatCompareFn =
    std::function<bool(const llvm::APFloat &, const llvm::APFloat &)>;

/// Folds an elementwise binary op over two constant operands with numpy
/// broadcasting into `resultType`. Null where an operand is not foldable, the
/// callback for the element kind is absent, or a callback refuses
/// (division by zero). The bool passed to integer callbacks is "unsigned".
mlir::Attribute foldBinary(mlir::Attribute lhs, mlir::Attribute rhs,
                           mlir::RankedTensorType resultType,
                           const IntBinaryFn &intFn,
                           const FloatBinaryFn &floatFn);
mlir::Attribute foldCompare(mlir::Attribute lhs, mlir::Attribute rhs,
                            mlir::RankedTensorType resultType,
                            const IntCompareFn &intFn,
                            const FloatCompareFn &floatFn);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> computeStrides(llvm::ArrayRef<int64_t> shape);

/// Maps a linear index of `resultShape` to the linear index of an operand of
/// `operandShape` broadcast to it.
int64_t broadcastSourceIndex(int64_t linear,
                             llvm::ArrayRef<int64_t> resultShape,
                             llvm::ArrayRef<int64_t> operandShape);

/// Whether every element of `attr` equals the integer/float `value`.
bool isSplatOf(mlir::Attribute attr, double value);

} // namespace kiln

#endif // KILN_LIB_DIALECT_KILN_IR_CONSTANTFOLDING_H

//===- LoweringUtils.h - Shared helpers of the kiln-to-linalg lowering -*- C++ -*-===//
//
// Private to lib/Conversion/KilnToLinalg. Building blocks every op family
// uses: empty and filled tensors, broadcasting indexing maps, elementwise
// generics, scalar constants.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H
#define KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace kiln::lowering {

/// `tensor.empty` of a static type.
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type);

/// A tensor of `type` filled with `value` (linalg.fill).
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::RankedTensorType type, double value);

/// A scalar constant of an int or float type (arith.constant).
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                           double value);

/// The indexing map that reads an operand of `operandShape` broadcast (numpy
/// rules) to an iteration space of `resultShape`: leading dims it lacks are
/// dropped, and its size-1 dims read index 0.
mlir::AffineMap broadcastMap(mlir::MLIRContext *context,
                             llvm::ArrayRef<int64_t> operandShape,
                             llvm::ArrayRef<int64_t> resultShape);

/// The largest and smallest finite values of a float type, or the extreme
/// values of an integer type; the identities of max and min reductions.
double lowestValue(mlir::Type type);
double highestValue(mlir::Type type);

/// Scalar body builder of an elementwise generic: block arguments of the
/// inputs in, the result element out.
using ScalarBodyFn = llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                                   mlir::ValueRange)>;

/// A linalg.generic over `resultType`'s shape reading each input with
/// numpy broadcasting and computing each element with `body`.
mlir::Value elementwiseGeneric(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::RankedTensorType resultType,
                               mlir::ValueRange inputs, ScalarBodyFn body);

} // namespace kiln::lowering

#endif // KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H

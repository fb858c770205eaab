//===- LoweringUtils.h - Shared helpers of the kiln-to-linalg lowering -*- C++
//-*-===//
//
// Private to lib/Conversion/KilnToLinalg. Building blocks every op family
// uses: empty and filled tensors, broadcasting indexing maps, elementwise
// generics, scalar constants.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H
#define KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::lowering {

/// `tensor.empty` of a static type.
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type);

/// A tensor of `type` filled with `value` (linalg.fill).
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::RankedTensorType type, double value);

/// A scalar constant of an int or float type (arith.constant).
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type, double value);

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
using ScalarBodyFn = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// A linalg.generic over `resultType`'s shape reading each input with
/// numpy broadcasting and computing each element with `body`.
mlir::Value elementwiseGeneric(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::RankedTensorType resultType,
                               mlir::ValueRange inputs, ScalarBodyFn body);

//===----------------------------------------------------------------------===//
// Window and reduction helpers (contractions, reductions, pooling)
//===----------------------------------------------------------------------===//

/// Refuses ops with unsigned-integer tensors: arith works on signless integers
/// and the signedness-erasing type conversion does not exist yet.
mlir::LogicalResult refuseUnsignedTensors(mlir::Operation *op,
                                          mlir::PatternRewriter &rewriter);

/// `value` padded with the constant `padValue` (`tensor.pad`); `low` and
/// `high` have one entry per dimension. Returns `value` when nothing pads.
mlir::Value padConstant(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value, llvm::ArrayRef<int64_t> low,
                        llvm::ArrayRef<int64_t> high, double padValue);

/// The map from a `rank`-d iteration space to the dims it keeps after
/// dropping `dropped` (sorted): how a reduction writes its accumulator and how
/// later generics read per-row statistics.
mlir::AffineMap projectionMap(mlir::MLIRContext *context, int64_t rank,
                              llvm::ArrayRef<int64_t> dropped);

/// `type`'s shape without the dims in `dropped` (sorted).
mlir::RankedTensorType dropDims(mlir::RankedTensorType type,
                                llvm::ArrayRef<int64_t> dropped);

/// Scalar body of a generic: the block arguments in, one value per result out.
using MultiBodyFn = llvm::function_ref<llvm::SmallVector<mlir::Value>(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// A linalg.generic over `resultType`'s shape (all loops parallel) reading
/// each input through the given map; `body` gets the input elements only.
mlir::Value parallelGeneric(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::RankedTensorType resultType,
                            mlir::ValueRange inputs,
                            llvm::ArrayRef<mlir::AffineMap> inputMaps,
                            ScalarBodyFn body);

/// A linalg.generic over an iteration space of `shape` whose `reduced` dims
/// (sorted) are reduction loops: reads `inputs` through `inputMaps` and
/// combines into `inits`, which have `shape` without the reduced dims.
/// `body` gets the input elements then the accumulators and returns the new
/// accumulators.
llvm::SmallVector<mlir::Value>
reductionGeneric(mlir::OpBuilder &b, mlir::Location loc,
                 llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> reduced,
                 mlir::ValueRange inputs,
                 llvm::ArrayRef<mlir::AffineMap> inputMaps,
                 mlir::ValueRange inits, MultiBodyFn body);

/// Reinserts the size-1 dims `dims` (sorted, positions in `resultType`) into
/// `value` with tensor.expand_shape: keepdims after a reduction.
mlir::Value insertUnitDims(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value value, mlir::RankedTensorType resultType,
                           llvm::ArrayRef<int64_t> dims);

//===----------------------------------------------------------------------===//
// Index arithmetic (gathers, scatters, coordinate-computing generics)
//===----------------------------------------------------------------------===//

/// Every shape must be static: the lowerings size tensor.empty and slices
/// from the types (symbolic dimensions come later, through type inference).
/// Ops that only move elements accept any element type; those that compute
/// on elements (`computesOnElements`) refuse unsigned integers, which need a
/// signless type conversion that does not exist yet.
mlir::LogicalResult checkTypes(mlir::Operation *op,
                               mlir::PatternRewriter &rewriter,
                               bool computesOnElements);

mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc,
                          int64_t value);
llvm::SmallVector<mlir::OpFoldResult> indexAttrs(mlir::OpBuilder &b,
                                                 llvm::ArrayRef<int64_t> values);

/// An element of an indices tensor as an `index` counted from the front:
/// negative values count from the end. With `clamp` the index is also forced
/// into [0, size), so a malformed index (which ONNX leaves undefined) cannot
/// read outside the tensor.
mlir::Value normalizedIndex(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value element, int64_t size, bool clamp);

/// Body of a coordinate-computing generic: the elements read through the
/// inputs' indexing maps and the loop indices in, the result element out.
using IndexedBodyFn = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange elements,
    mlir::ValueRange indices)>;

/// An all-parallel linalg.generic over `resultType`'s shape whose body also
/// sees the loop indices (one linalg.index per dimension).
mlir::Value indexedGeneric(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::RankedTensorType resultType,
                           mlir::ValueRange inputs,
                           llvm::ArrayRef<mlir::AffineMap> inputMaps,
                           IndexedBodyFn body);

/// The new value of an element hit by `update` under `reduction`.
mlir::Value combineScatter(mlir::OpBuilder &b, mlir::Location loc,
                           ScatterReduction reduction, mlir::Value old,
                           mlir::Value update);

} // namespace kiln::lowering

#endif // KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H

//===- LoweringUtils.cpp - Shared helpers of the kiln-to-linalg lowering
//----===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::lowering {

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

Value scalarConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  if (type.isInteger(1))
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(value != 0));
  // kiln tensors may hold unsigned integers; arith works on signless ones of
  // the same width, and the bit pattern is what matters. A value past the
  // type's range saturates: highestValue(i64) is 2^63 - 1, which a double
  // rounds to 2^63, and casting that to int64_t gave INT64_MIN (ReduceMin
  // over i64 returned -2^63 whatever the data).
  unsigned width = type.getIntOrFloatBitWidth();
  auto signless = IntegerType::get(b.getContext(), width);
  bool isUnsigned = type.isUnsignedInteger();
  double limit = std::ldexp(1.0, isUnsigned ? width : width - 1);
  APInt bits;
  if (std::isnan(value))
    bits = APInt(width, 0);
  else if (value >= limit)
    bits = isUnsigned ? APInt::getMaxValue(width)
                      : APInt::getSignedMaxValue(width);
  else if (isUnsigned ? value <= 0 : value < -limit)
    bits = isUnsigned ? APInt(width, 0) : APInt::getSignedMinValue(width);
  else if (isUnsigned)
    bits = APInt(width, static_cast<uint64_t>(value));
  else
    bits = APInt(width, static_cast<int64_t>(value), /*isSigned=*/true);
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(signless, bits));
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value) {
  Value scalar = scalarConstant(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, emptyTensor(b, loc, type))
      .getResult(0);
}

AffineMap broadcastMap(MLIRContext *context, ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape) {
  int64_t offset = resultShape.size() - operandShape.size();
  SmallVector<AffineExpr> exprs;
  for (auto [i, size] : llvm::enumerate(operandShape)) {
    int64_t dim = offset + static_cast<int64_t>(i);
    exprs.push_back(size == 1 && resultShape[dim] != 1
                        ? getAffineConstantExpr(0, context)
                        : getAffineDimExpr(dim, context));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, context);
}

double lowestValue(Type type) {
  if (isa<FloatType>(type))
    return -std::numeric_limits<double>::infinity();
  if (type.isInteger(1) || type.isUnsignedInteger())
    return 0;
  return -std::ldexp(1.0, type.getIntOrFloatBitWidth() - 1);
}

double highestValue(Type type) {
  if (isa<FloatType>(type))
    return std::numeric_limits<double>::infinity();
  if (type.isInteger(1))
    return 1;
  unsigned width = type.getIntOrFloatBitWidth();
  return type.isUnsignedInteger() ? std::ldexp(1.0, width) - 1
                                  : std::ldexp(1.0, width - 1) - 1;
}

Value elementwiseGeneric(OpBuilder &b, Location loc,
                         RankedTensorType resultType, ValueRange inputs,
                         ScalarBodyFn body) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(
        b.getContext(), cast<RankedTensorType>(input.getType()).getShape(),
        resultType.getShape()));
  return parallelGeneric(b, loc, resultType, inputs, maps, body);
}

//===----------------------------------------------------------------------===//
// Window and reduction helpers (contractions, reductions, pooling)
//===----------------------------------------------------------------------===//

LogicalResult refuseUnsignedTensors(Operation *op, PatternRewriter &rewriter) {
  for (Type type :
       llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
    if (getElementTypeOrSelf(type).isUnsignedInteger())
      return rewriter.notifyMatchFailure(
          op, "unsigned integer tensors are not lowered yet");
  return success();
}

Value padConstant(OpBuilder &b, Location loc, Value value,
                  ArrayRef<int64_t> low, ArrayRef<int64_t> high,
                  double padValue) {
  if (llvm::all_of(low, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(high, [](int64_t p) { return p == 0; }))
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<OpFoldResult> lowSizes, highSizes;
  for (size_t d = 0; d < shape.size(); ++d) {
    shape[d] += low[d] + high[d];
    lowSizes.push_back(b.getIndexAttr(low[d]));
    highSizes.push_back(b.getIndexAttr(high[d]));
  }
  auto paddedType = RankedTensorType::get(shape, type.getElementType());
  Value scalar = scalarConstant(b, loc, type.getElementType(), padValue);
  return tensor::PadOp::create(b, loc, paddedType, value, lowSizes, highSizes,
                               scalar);
}

AffineMap projectionMap(MLIRContext *context, int64_t rank,
                        ArrayRef<int64_t> dropped) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dropped, d))
      exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(rank, 0, exprs, context);
}

RankedTensorType dropDims(RankedTensorType type, ArrayRef<int64_t> dropped) {
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(type.getShape()))
    if (!llvm::is_contained(dropped, static_cast<int64_t>(d)))
      shape.push_back(size);
  return RankedTensorType::get(shape, type.getElementType());
}

Value parallelGeneric(OpBuilder &b, Location loc, RankedTensorType resultType,
                      ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                      ScalarBodyFn body) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(
      AffineMap::getMultiDimIdentityMap(resultType.getRank(), b.getContext()));
  SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(resultType), inputs, emptyTensor(b, loc, resultType),
      maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        linalg::YieldOp::create(nested, nestedLoc,
                                body(nested, nestedLoc, args.drop_back()));
      });
  return generic.getResult(0);
}

SmallVector<Value> reductionGeneric(OpBuilder &b, Location loc,
                                    ArrayRef<int64_t> shape,
                                    ArrayRef<int64_t> reduced,
                                    ValueRange inputs,
                                    ArrayRef<AffineMap> inputMaps,
                                    ValueRange inits, MultiBodyFn body) {
  int64_t rank = shape.size();
  SmallVector<AffineMap> maps(inputMaps);
  maps.append(inits.size(), projectionMap(b.getContext(), rank, reduced));
  SmallVector<utils::IteratorType> iterators;
  for (int64_t d = 0; d < rank; ++d)
    iterators.push_back(llvm::is_contained(reduced, d)
                            ? utils::IteratorType::reduction
                            : utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, inits.getTypes(), inputs, inits, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        linalg::YieldOp::create(nested, nestedLoc,
                                body(nested, nestedLoc, args));
      });
  return SmallVector<Value>(generic.getResults());
}

Value insertUnitDims(OpBuilder &b, Location loc, Value value,
                     RankedTensorType resultType, ArrayRef<int64_t> dims) {
  if (dims.empty())
    return value;
  // Each unit dim joins the group of the kept dim before it (or, before the
  // first kept dim, the group of that first kept dim).
  int64_t rank = resultType.getRank();
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices leading;
  for (int64_t d = 0; d < rank; ++d) {
    if (!llvm::is_contained(dims, d)) {
      groups.push_back(leading);
      groups.back().push_back(d);
      leading.clear();
    } else if (groups.empty()) {
      leading.push_back(d);
    } else {
      groups.back().push_back(d);
    }
  }
  return tensor::ExpandShapeOp::create(b, loc, resultType, value, groups);
}

//===----------------------------------------------------------------------===//
// Index arithmetic (gathers, scatters, coordinate-computing generics)
//===----------------------------------------------------------------------===//

/// Every shape must be static: the lowerings below size tensor.empty and
/// slices from the types (symbolic dimensions come later, through type
/// inference). Ops that only move elements accept any element type; those
/// that compute on elements (`computesOnElements`) refuse unsigned integers,
/// which need a signless type conversion that does not exist yet.
LogicalResult checkTypes(Operation *op, PatternRewriter &rewriter,
                         bool computesOnElements) {
  for (Type type :
       llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped)
      continue;
    if (!shaped.hasStaticShape())
      return rewriter.notifyMatchFailure(op,
                                         "dynamic shapes are not lowered yet");
    if (computesOnElements && shaped.getElementType().isUnsignedInteger())
      return rewriter.notifyMatchFailure(
          op, "unsigned integer tensors are not lowered yet");
  }
  return success();
}

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

SmallVector<OpFoldResult> indexAttrs(OpBuilder &b, ArrayRef<int64_t> values) {
  return getAsIndexOpFoldResult(b.getContext(), values);
}

/// An element of an indices tensor as an `index` counted from the front:
/// negative values count from the end. With `clamp` the index is also forced
/// into [0, size), so a malformed index (which ONNX leaves undefined) cannot
/// read outside the tensor.
Value normalizedIndex(OpBuilder &b, Location loc, Value element, int64_t size,
                      bool clamp) {
  Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), element);
  Value zero = indexConstant(b, loc, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, index, zero);
  Value wrapped =
      arith::AddIOp::create(b, loc, index, indexConstant(b, loc, size));
  index = arith::SelectOp::create(b, loc, negative, wrapped, index);
  if (!clamp)
    return index;
  index = arith::MaxSIOp::create(b, loc, index, zero);
  return arith::MinSIOp::create(b, loc, index, indexConstant(b, loc, size - 1));
}

/// Body of a coordinate-computing generic: the elements read through the
/// inputs' indexing maps and the loop indices in, the result element out.

/// An all-parallel linalg.generic over `resultType`'s shape whose body also
/// sees the loop indices (one linalg.index per dimension).
Value indexedGeneric(OpBuilder &b, Location loc, RankedTensorType resultType,
                     ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                     IndexedBodyFn body) {
  return parallelGeneric(
      b, loc, resultType, inputs, inputMaps,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange elements) {
        SmallVector<Value> indices;
        for (int64_t d = 0; d < resultType.getRank(); ++d)
          indices.push_back(linalg::IndexOp::create(nested, nestedLoc, d));
        return body(nested, nestedLoc, elements, indices);
      });
}


/// The new value of an element hit by `update` under `reduction`.
Value combineScatter(OpBuilder &b, Location loc, ScatterReduction reduction,
                     Value old, Value update) {
  bool isFloat = isa<FloatType>(old.getType());
  switch (reduction) {
  case ScatterReduction::None:
    return update;
  case ScatterReduction::Add:
    return isFloat ? Value(arith::AddFOp::create(b, loc, old, update))
                   : Value(arith::AddIOp::create(b, loc, old, update));
  case ScatterReduction::Mul:
    return isFloat ? Value(arith::MulFOp::create(b, loc, old, update))
                   : Value(arith::MulIOp::create(b, loc, old, update));
  case ScatterReduction::Max:
    return isFloat ? Value(arith::MaximumFOp::create(b, loc, old, update))
                   : Value(arith::MaxSIOp::create(b, loc, old, update));
  case ScatterReduction::Min:
    return isFloat ? Value(arith::MinimumFOp::create(b, loc, old, update))
                   : Value(arith::MinSIOp::create(b, loc, old, update));
  }
  llvm_unreachable("unknown scatter reduction");
}


} // namespace kiln::lowering

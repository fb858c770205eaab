//===- LoweringUtils.cpp - Shared helpers of the kiln-to-linalg lowering
//----===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

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
  // the same width, and the bit pattern is what matters.
  auto signless =
      IntegerType::get(b.getContext(), type.getIntOrFloatBitWidth());
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(signless, static_cast<int64_t>(value)));
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

} // namespace kiln::lowering

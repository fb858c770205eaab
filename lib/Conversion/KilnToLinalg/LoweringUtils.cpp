//===- LoweringUtils.cpp - Shared helpers of the kiln-to-linalg lowering ----===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;

namespace kiln::lowering {

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
}

Value scalarConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  if (type.isInteger(1))
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(value != 0));
  // kiln tensors may hold unsigned integers; arith works on signless ones of
  // the same width, and the bit pattern is what matters.
  auto signless = IntegerType::get(b.getContext(), type.getIntOrFloatBitWidth());
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(signless, static_cast<int64_t>(value)));
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Value scalar = scalarConstant(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, emptyTensor(b, loc, type)).getResult(0);
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

Value elementwiseGeneric(OpBuilder &b, Location loc, RankedTensorType resultType,
                         ValueRange inputs, ScalarBodyFn body) {
  MLIRContext *context = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(context, cast<RankedTensorType>(input.getType()).getShape(),
                                resultType.getShape()));
  maps.push_back(AffineMap::getMultiDimIdentityMap(resultType.getRank(), context));
  SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(resultType), inputs, emptyTensor(b, loc, resultType), maps,
      iterators, [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value result = body(nested, nestedLoc, args.drop_back());
        linalg::YieldOp::create(nested, nestedLoc, result);
      });
  return generic.getResult(0);
}

} // namespace kiln::lowering

//===- RandomOps.cpp - Verifiers of the Philox random-number ops ----------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

namespace {
/// Philox's key is two words and its counter four.
LogicalResult verifyKeyAndCounter(Operation *op, Value key, Value counter) {
  auto keyType = cast<RankedTensorType>(key.getType());
  auto counterType = cast<RankedTensorType>(counter.getType());
  if (keyType.getRank() != 1 || keyType.getDimSize(0) != 2)
    return op->emitOpError("expects a tensor<2xi32> key, got ") << keyType;
  if (counterType.getRank() != 1 || counterType.getDimSize(0) != 4)
    return op->emitOpError("expects a tensor<4xi32> counter, got ")
           << counterType;
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (!result.hasStaticShape())
    return op->emitOpError("expects a static result shape, got ") << result;
  return success();
}
} // namespace

LogicalResult PhiloxOp::verify() {
  return verifyKeyAndCounter(*this, getKey(), getCounter());
}

LogicalResult DropoutMaskOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1))
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  return verifyKeyAndCounter(*this, getKey(), getCounter());
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio > 0 && ratio < 1))
    return emitOpError("ratio must be in (0, 1), got ") << ratio;
  return success();
}

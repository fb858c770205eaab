//===- GradBuilder.cpp - Helpers the VJP rules share -----------------------===//
//
// Constants, arithmetic and the shape plumbing of gradients: summing a
// broadcast result's gradient back to its operand's shape, and broadcasting
// a reduced gradient back to the input's.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

using namespace mlir;

namespace kiln::autodiff {

Value GradBuilder::scalar(Type elementType, double value) {
  return splat(RankedTensorType::get({}, elementType), value);
}

Value GradBuilder::splat(Type type, double value) {
  auto tensorType = cast<RankedTensorType>(type);
  Type element = tensorType.getElementType();
  Attribute attr = isa<FloatType>(element)
                       ? Attribute(b.getFloatAttr(element, value))
                       : Attribute(b.getIntegerAttr(element, int64_t(value)));
  return ConstantOp::create(b, DenseElementsAttr::get(tensorType, attr));
}

Value GradBuilder::add(Value lhs, Value rhs) {
  return AddOp::create(b, lhs, rhs);
}
Value GradBuilder::sub(Value lhs, Value rhs) {
  return SubOp::create(b, lhs, rhs);
}
Value GradBuilder::mul(Value lhs, Value rhs) {
  return MulOp::create(b, lhs, rhs);
}
Value GradBuilder::div(Value lhs, Value rhs) {
  return DivOp::create(b, lhs, rhs);
}
Value GradBuilder::neg(Value value) { return NegOp::create(b, value); }

Value GradBuilder::scale(Value value, double factor) {
  if (factor == 1.0)
    return value;
  return mul(value, scalar(getElementTypeOrSelf(value.getType()), factor));
}

Value GradBuilder::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(b, type.clone(shape), value);
}

Value GradBuilder::transpose(Value value, ArrayRef<int64_t> permutation) {
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
    return value;
  return TransposeOp::create(b, value, b.getDenseI64ArrayAttr(permutation));
}

Value GradBuilder::sumKeep(Value value, ArrayRef<int64_t> axes) {
  if (axes.empty())
    return value;
  return ReduceOp::create(b, ReduceKind::Sum, value, axes, /*keepdims=*/true);
}

Value GradBuilder::broadcastTo(Value value, RankedTensorType type) {
  auto from = cast<RankedTensorType>(value.getType());
  if (from.getShape() == type.getShape())
    return value;
  return BroadcastOp::create(b, type.clone(from.getElementType()), value);
}

Value GradBuilder::unbroadcast(Value grad, RankedTensorType target) {
  auto type = cast<RankedTensorType>(grad.getType());
  if (type.getShape() == target.getShape())
    return grad;
  int64_t lead = type.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < lead || (target.getDimSize(d - lead) == 1 && type.getDimSize(d) != 1))
      axes.push_back(d);
  return reshape(sumKeep(grad, axes), target.getShape());
}

RuleStatus applyVjpRule(GradBuilder &g, Operation *op,
                        ArrayRef<Value> resultGrads,
                        MutableArrayRef<Value> operandGrads, std::string &why) {
  for (RuleFn rule :
       {elementwiseVjp, contractionVjp, dataMovementVjp, reductionVjp}) {
    RuleStatus status = rule(g, op, resultGrads, operandGrads, why);
    if (status != RuleStatus::NoRule)
      return status;
  }
  return RuleStatus::NoRule;
}

} // namespace kiln::autodiff

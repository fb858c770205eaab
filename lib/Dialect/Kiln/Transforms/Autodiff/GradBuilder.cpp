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

Value GradBuilder::pad(Value value, ArrayRef<int64_t> low,
                       ArrayRef<int64_t> high, double fill) {
  if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
      llvm::all_of(high, [](int64_t v) { return v == 0; }))
    return value;
  return PadOp::create(b, PadMode::Constant, value, low, high,
                       llvm::APFloat(fill));
}

Value GradBuilder::slice(Value value, ArrayRef<int64_t> starts,
                         ArrayRef<int64_t> limits, ArrayRef<int64_t> steps) {
  auto type = cast<RankedTensorType>(value.getType());
  bool identity = true;
  for (int64_t d = 0; d < type.getRank(); ++d)
    identity &= starts[d] == 0 && limits[d] == type.getDimSize(d) &&
                steps[d] == 1;
  if (identity)
    return value;
  return SliceOp::create(b, value, b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(limits),
                         b.getDenseI64ArrayAttr(steps));
}

Value GradBuilder::sliceAdjoint(Value grad, RankedTensorType inputType,
                                ArrayRef<int64_t> starts,
                                ArrayRef<int64_t> steps) {
  Value current = grad;
  int64_t rank = inputType.getRank();
  for (int64_t d = 0; d < rank; ++d) {
    auto type = cast<RankedTensorType>(current.getType());
    int64_t count = type.getDimSize(d), step = steps[d], start = starts[d];
    int64_t extent = inputType.getDimSize(d);
    SmallVector<int64_t> zeros(rank, 0), ones(rank, 1);
    SmallVector<int64_t> shape(type.getShape());
    if (count == 0)
      return splat(inputType, 0.0);
    if (step < 0) {
      // Reverse, so the elements land in ascending order.
      SmallVector<int64_t> st(zeros), lim(shape), sp(ones);
      st[d] = count - 1;
      lim[d] = -1;
      sp[d] = -1;
      current = slice(current, st, lim, sp);
      start += (count - 1) * step;
      step = -step;
    }
    if (step > 1) {
      // Interleave step - 1 zeros after every element: [.., n, 1, ..] padded
      // to [.., n, step, ..], flattened, then the trailing zeros dropped.
      SmallVector<int64_t> split(shape);
      split.insert(split.begin() + d + 1, 1);
      current = reshape(current, split);
      SmallVector<int64_t> low(rank + 1, 0), high(rank + 1, 0);
      high[d + 1] = step - 1;
      current = pad(current, low, high);
      SmallVector<int64_t> merged(shape);
      merged[d] = count * step;
      current = reshape(current, merged);
      SmallVector<int64_t> lim(merged);
      lim[d] = (count - 1) * step + 1;
      current = slice(current, zeros, lim, ones);
    }
    int64_t span = (count - 1) * step + 1;
    SmallVector<int64_t> low(zeros), high(zeros);
    low[d] = start;
    high[d] = extent - start - span;
    current = pad(current, low, high);
  }
  return current;
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
       {elementwiseVjp, contractionVjp, dataMovementVjp, reductionVjp,
        poolingVjp}) {
    RuleStatus status = rule(g, op, resultGrads, operandGrads, why);
    if (status != RuleStatus::NoRule)
      return status;
  }
  return RuleStatus::NoRule;
}

} // namespace kiln::autodiff

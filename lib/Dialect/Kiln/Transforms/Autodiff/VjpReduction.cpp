//===- VjpReduction.cpp - Gradients of reductions and softmax --------------===//
//
// A reduction's gradient broadcasts back over the reduced axes (divided by
// the count for mean, routed to the extreme elements for max and min);
// softmax and log-softmax use their results:
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - e^y * sum(dy)
// with the sums along the op's axis.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::autodiff {

namespace {
RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `dy` of a reduction over `axes` broadcast back to `inputType`.
Value expandReduced(GradBuilder &g, Value dy, RankedTensorType inputType,
                    ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(inputType.getShape());
  for (int64_t axis : axes)
    kept[axis] = 1;
  return g.broadcastTo(g.reshape(dy, kept), inputType);
}

RuleStatus reduceVjp(GradBuilder &g, ReduceOp r, Value dy,
                     MutableArrayRef<Value> operandGrads, std::string &why) {
  RankedTensorType inputType = typeOf(r.getInput());
  if (!isa<FloatType>(inputType.getElementType()))
    return RuleStatus::Applied;
  ArrayRef<int64_t> axes = r.getAxes();
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= inputType.getDimSize(axis);
  Value expanded = expandReduced(g, dy, inputType, axes);
  switch (r.getKind()) {
  case ReduceKind::Sum:
    operandGrads[0] = expanded;
    return RuleStatus::Applied;
  case ReduceKind::Mean:
    operandGrads[0] = g.scale(expanded, 1.0 / double(count));
    return RuleStatus::Applied;
  case ReduceKind::Max:
  case ReduceKind::Min: {
    // The extreme element takes the gradient (each of them, on a tie).
    Value extreme = expandReduced(g, r.getResult(), inputType, axes);
    Value hit = EqualOp::create(g.b, r.getInput(), extreme);
    Value zero = g.scalar(inputType.getElementType(), 0.0);
    operandGrads[0] = SelectOp::create(g.b, hit, expanded, zero);
    return RuleStatus::Applied;
  }
  case ReduceKind::Prod:
    why = "reduce<prod> has no gradient rule yet";
    return RuleStatus::Unsupported;
  }
  return RuleStatus::NoRule;
}

int64_t softmaxAxis(Operation *op, int64_t axis) {
  return normalizeAxis(axis, typeOf(op->getResult(0)).getRank());
}
} // namespace

RuleStatus reductionVjp(GradBuilder &g, Operation *op,
                        ArrayRef<Value> resultGrads,
                        MutableArrayRef<Value> operandGrads,
                        std::string &why) {
  Value dy = resultGrads.empty() ? Value() : resultGrads.front();
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](ReduceOp r) { return reduceVjp(g, r, dy, operandGrads, why); })
      .Case([&](SoftmaxOp s) {
        Value y = s.getResult();
        int64_t axis = softmaxAxis(op, s.getAxis());
        Value dot = g.sumKeep(g.mul(dy, y), {axis});
        operandGrads[0] = g.mul(y, g.sub(dy, dot));
        return RuleStatus::Applied;
      })
      .Case([&](LogSoftmaxOp s) {
        Value y = s.getResult();
        int64_t axis = softmaxAxis(op, s.getAxis());
        Value total = g.sumKeep(dy, {axis});
        operandGrads[0] = g.sub(dy, g.mul(ExpOp::create(g.b, y), total));
        return RuleStatus::Applied;
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

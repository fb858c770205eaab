//===- Backprop.cpp - Activity and the reverse sweep ----------------------===//
//
// The two steps every differentiation shares: which values depend on the
// variables (activity), and the reverse sweep that asks each op on the way
// back for its vector-Jacobian product. kiln-autodiff differentiates the
// loss with respect to the weights; kiln-expand-gradients a kiln.gradient's
// y with respect to its xs.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace kiln::autodiff {

std::string describeOp(Operation *op) {
  std::string s = "'" + op->getName().getStringRef().str() + "'";
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    s += " (node '" + name.getName().str() + "')";
  return s;
}

void propagateActivity(ArrayRef<Operation *> ops,
                       llvm::function_ref<bool(Operation *)> isSource,
                       llvm::DenseSet<Value> &varied) {
  for (Operation *op : ops) {
    bool active = isSource(op) || llvm::any_of(op->getOperands(), [&](Value v) {
                    return varied.contains(v);
                  });
    if (!active)
      continue;
    for (Value result : op->getResults())
      if (isa<FloatType>(getElementTypeOrSelf(result.getType())))
        varied.insert(result);
  }
}

LogicalResult backpropagate(GradBuilder &g, ArrayRef<Operation *> ops,
                            const llvm::DenseSet<Value> &varied,
                            llvm::DenseMap<Value, Value> &grads,
                            const SweepMessages &messages) {
  auto accumulate = [&](Value value, Value contribution) {
    auto [it, inserted] = grads.try_emplace(value, contribution);
    if (!inserted)
      it->second = g.add(it->second, contribution);
  };
  for (Operation *op : llvm::reverse(ops)) {
    if (llvm::none_of(op->getResults(),
                      [&](Value r) { return grads.contains(r); }) ||
        llvm::none_of(op->getOperands(),
                      [&](Value v) { return varied.contains(v); }))
      continue;
    g.b.setLoc(op->getLoc());
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults()) {
      Value dy = grads.lookup(result);
      if (!dy && isa<FloatType>(getElementTypeOrSelf(result.getType())))
        dy = g.splat(result.getType(), 0.0);
      resultGrads.push_back(dy);
    }
    SmallVector<Value> operandGrads(op->getNumOperands());
    std::string why;
    RuleStatus status = applyVjpRule(g, op, resultGrads, operandGrads, why);
    if (status == RuleStatus::NoRule) {
      op->emitError() << messages.pass << ": no gradient rule for "
                      << describeOp(op) << ", which is on the path from "
                      << messages.path;
      return failure();
    }
    if (status == RuleStatus::Unsupported) {
      op->emitError() << messages.pass << ": cannot differentiate "
                      << describeOp(op) << ": " << why;
      return failure();
    }
    for (auto [operand, dx] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!dx || !varied.contains(operand))
        continue;
      if (dx.getType() != operand.getType()) {
        op->emitError() << messages.pass
                        << ": internal error: the gradient rule of "
                        << describeOp(op) << " gave " << dx.getType()
                        << " for an operand of type " << operand.getType();
        return failure();
      }
      accumulate(operand, dx);
    }
  }
  return success();
}

} // namespace kiln::autodiff

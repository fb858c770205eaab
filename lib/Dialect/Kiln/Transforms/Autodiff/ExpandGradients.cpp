//===- ExpandGradients.cpp - kiln.gradient becomes backward ops -----------===//
//
// kiln-expand-gradients: ONNX's Gradient operator, differentiated with
// kiln-autodiff's activity analysis, reverse sweep and VJP rules
// (Backprop.cpp) over the ops that come before it in the same function.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_EXPANDGRADIENTSPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::autodiff;

namespace {

/// Replaces `gradient` (in a function's body) with its backward ops.
LogicalResult expand(GradientOp gradient) {
  Block *block = gradient->getBlock();
  SmallVector<Operation *> before;
  for (Operation &op : *block) {
    if (&op == gradient.getOperation())
      break;
    before.push_back(&op);
  }
  llvm::DenseSet<Value> varied(gradient.getXs().begin(),
                               gradient.getXs().end());
  propagateActivity(
      before, [](Operation *) { return false; }, varied);

  ImplicitLocOpBuilder b(gradient.getLoc(), gradient);
  GradBuilder g(b);
  llvm::DenseMap<Value, Value> grads;
  Value y = gradient.getY();
  if (varied.contains(y)) {
    grads[y] = g.splat(y.getType(), 1.0);
    if (failed(backpropagate(g, before, varied, grads,
                             {"kiln-expand-gradients",
                              "the Gradient's xs to its y"})))
      return failure();
  }
  b.setLoc(gradient.getLoc());
  SmallVector<Value> results;
  for (Value x : gradient.getXs()) {
    Value dx = grads.lookup(x);
    results.push_back(dx ? dx : g.splat(x.getType(), 0.0));
  }
  gradient->replaceAllUsesWith(results);
  gradient->erase();
  return success();
}

struct ExpandGradientsPass
    : kiln::impl::ExpandGradientsPassBase<ExpandGradientsPass> {
  void runOnOperation() override {
    // Program order, one at a time: a later gradient may differentiate an
    // earlier one's backward ops.
    SmallVector<GradientOp> gradients;
    getOperation().walk([&](GradientOp op) { gradients.push_back(op); });
    for (GradientOp gradient : gradients) {
      if (gradient->getBlock() !=
          &getOperation().getBody().front()) {
        gradient.emitError("kiln-expand-gradients: a kiln.gradient must be "
                           "in the function's body, not a nested region");
        return signalPassFailure();
      }
      if (failed(expand(gradient)))
        return signalPassFailure();
    }
  }
};

} // namespace

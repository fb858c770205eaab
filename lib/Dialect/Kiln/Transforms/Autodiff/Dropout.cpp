//===- Dropout.cpp - Training-mode dropout in @train_grad and @main -------===//
//
// kiln.dropout has no RNG operands; the training function gives it one.
// @train_grad gets two arguments, `rng.key` (tensor<2xi32>) and
// `rng.counter` (tensor<4xi32>), and each dropout becomes `x *
// kiln.dropout_mask(rng.key, rng.counter)` with its own stream (its place
// among the function's dropouts), so two dropouts never share a mask. The
// mask is a pure function of the arguments: rematerialisation recomputes it
// in the backward instead of keeping it, and the backward's multiply by the
// same mask is the multiply's ordinary VJP. In @main (eval, inference)
// dropout is the identity. kiln-optimizer feeds the two arguments from the
// RNG state (Passes.td, kiln-optimizer).
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace kiln::autodiff {

void expandDropouts(func::FuncOp grad) {
  SmallVector<DropoutOp> dropouts;
  grad.walk([&](DropoutOp op) { dropouts.push_back(op); });
  if (dropouts.empty())
    return;
  MLIRContext *ctx = grad.getContext();
  Builder attrs(ctx);
  auto i32 = IntegerType::get(ctx, 32);
  auto named = [&](StringRef name) {
    return attrs.getDictionaryAttr(attrs.getNamedAttr(
        KilnDialect::NameAttrHelper::getNameStr(), attrs.getStringAttr(name)));
  };
  unsigned keyIndex = grad.getNumArguments();
  (void)grad.insertArgument(keyIndex, RankedTensorType::get({2}, i32),
                            named("rng.key"), grad.getLoc());
  (void)grad.insertArgument(keyIndex + 1, RankedTensorType::get({4}, i32),
                            named("rng.counter"), grad.getLoc());
  Value key = grad.getArgument(keyIndex);
  Value counter = grad.getArgument(keyIndex + 1);
  for (auto [stream, op] : llvm::enumerate(dropouts)) {
    OpBuilder b(op);
    Value mask = DropoutMaskOp::create(b, op.getLoc(), op.getType(), key,
                                       counter, op.getRatioAttr(),
                                       b.getI64IntegerAttr(stream));
    Value dropped = MulOp::create(b, op.getLoc(), op.getInput(), mask);
    op.replaceAllUsesWith(dropped);
    op.erase();
  }
}

void removeDropouts(func::FuncOp main) {
  main.walk([](DropoutOp op) {
    op.replaceAllUsesWith(op.getInput());
    op.erase();
  });
}

} // namespace kiln::autodiff

//===- ContractFloatOps.cpp - Let the backend form FMAs -------------------===//

#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kiln {
#define GEN_PASS_DEF_CONTRACTFLOATOPSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct ContractFloatOpsPass
    : kiln::impl::ContractFloatOpsPassBase<ContractFloatOpsPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([](Operation *op) {
      if (!isa<arith::MulFOp, arith::AddFOp, arith::SubFOp>(op))
        return;
      auto fastMath = cast<arith::ArithFastMathInterface>(op);
      arith::FastMathFlags flags =
          fastMath.getFastMathFlagsAttr().getValue() |
          arith::FastMathFlags::contract;
      op->setAttr(fastMath.getFastMathAttrName(),
                  arith::FastMathFlagsAttr::get(op->getContext(), flags));
    });
  }
};
} // namespace

//===- DistinctResults.cpp - One buffer per function result ---------------===//
//
// A model may return one value under two names (after fusion and CSE, two
// identical reshapes become one). Each function result must become its own
// out-parameter buffer, so every repeated return operand gets a copy.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace kiln {
#define GEN_PASS_DEF_DISTINCTRESULTSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct DistinctResultsPass
    : kiln::impl::DistinctResultsPassBase<DistinctResultsPass> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      OpBuilder b(ret);
      DenseSet<Value> seen;
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || seen.insert(v).second)
          continue;
        Value empty = tensor::EmptyOp::create(b, ret.getLoc(), type.getShape(),
                                              type.getElementType());
        operand.set(
            linalg::CopyOp::create(b, ret.getLoc(), v, empty).getResult(0));
      }
    });
  }
};
} // namespace

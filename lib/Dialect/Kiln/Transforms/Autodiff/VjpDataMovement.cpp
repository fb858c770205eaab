//===- VjpDataMovement.cpp - Gradients of shape and data movement ops ------===//
//
// Data movement is linear, so each gradient is the adjoint movement:
// reshape back, transpose by the inverse permutation, sum a broadcast back,
// slice a concat's gradient apart and concatenate a split's.
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

/// The piece [offset, offset + size) of `value` along `axis`.
Value sliceAlong(GradBuilder &g, Value value, int64_t axis, int64_t offset,
                 int64_t size) {
  RankedTensorType type = typeOf(value);
  SmallVector<int64_t> starts(type.getRank(), 0);
  SmallVector<int64_t> limits(type.getShape());
  SmallVector<int64_t> steps(type.getRank(), 1);
  starts[axis] = offset;
  limits[axis] = offset + size;
  return SliceOp::create(g.b, value, g.b.getDenseI64ArrayAttr(starts),
                         g.b.getDenseI64ArrayAttr(limits),
                         g.b.getDenseI64ArrayAttr(steps));
}
} // namespace

RuleStatus dataMovementVjp(GradBuilder &g, Operation *op,
                           ArrayRef<Value> resultGrads,
                           MutableArrayRef<Value> operandGrads,
                           std::string &why) {
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](ReshapeOp r) {
        operandGrads[0] =
            g.reshape(resultGrads[0], typeOf(r.getInput()).getShape());
        return RuleStatus::Applied;
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = static_cast<int64_t>(i);
        operandGrads[0] = g.transpose(resultGrads[0], inverse);
        return RuleStatus::Applied;
      })
      .Case([&](BroadcastOp bc) {
        operandGrads[0] = g.unbroadcast(resultGrads[0], typeOf(bc.getInput()));
        return RuleStatus::Applied;
      })
      .Case([&](ConcatOp c) {
        int64_t axis = c.getAxis();
        int64_t offset = 0;
        for (auto [i, input] : llvm::enumerate(c.getInputs())) {
          int64_t size = typeOf(input).getDimSize(axis);
          operandGrads[i] = sliceAlong(g, resultGrads[0], axis, offset, size);
          offset += size;
        }
        return RuleStatus::Applied;
      })
      .Case([&](SplitOp s) {
        operandGrads[0] = ConcatOp::create(
            g.b, resultGrads, g.b.getI64IntegerAttr(s.getAxis()));
        return RuleStatus::Applied;
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

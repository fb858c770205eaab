//===- VjpContraction.cpp - Gradients of matmul and convolution ------------===//
//
// matmul: dA = dY B^T and dB = A^T dY over the last two dimensions, with
// broadcast batch dimensions summed back and 1-D operands promoted to
// matrices first (numpy's rule) and restored after.
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

/// Swaps the last two dimensions.
Value transposeLast2(GradBuilder &g, Value value) {
  int64_t rank = typeOf(value).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return g.transpose(value, perm);
}

RuleStatus matmulVjp(GradBuilder &g, MatmulOp op, Value dy,
                     MutableArrayRef<Value> operandGrads, std::string &why) {
  if (getElementTypeOrSelf(op.getType()) !=
      getElementTypeOrSelf(op.getLhs().getType())) {
    why = "a matmul with a wider result than its operands (run autodiff "
          "before kiln-lower-precision)";
    return RuleStatus::Unsupported;
  }
  RankedTensorType lhsType = typeOf(op.getLhs()), rhsType = typeOf(op.getRhs());
  Value a = op.getLhs(), b = op.getRhs();
  if (lhsType.getRank() == 1)
    a = g.reshape(a, {1, lhsType.getDimSize(0)});
  if (rhsType.getRank() == 1)
    b = g.reshape(b, {rhsType.getDimSize(0), 1});
  // The result as if neither operand had been 1-D.
  ArrayRef<int64_t> aShape = typeOf(a).getShape(), bShape = typeOf(b).getShape();
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes(aShape.drop_back(2), bShape.drop_back(2));
  if (!batch) {
    why = "matmul batch dimensions that do not broadcast";
    return RuleStatus::Unsupported;
  }
  SmallVector<int64_t> full = *batch;
  full.push_back(aShape[aShape.size() - 2]);
  full.push_back(bShape.back());
  Value grad = g.reshape(dy, full);

  Value da = MatmulOp::create(g.b, grad, transposeLast2(g, b));
  Value db = MatmulOp::create(g.b, transposeLast2(g, a), grad);
  operandGrads[0] = g.reshape(g.unbroadcast(da, typeOf(a)), lhsType.getShape());
  operandGrads[1] = g.reshape(g.unbroadcast(db, typeOf(b)), rhsType.getShape());
  return RuleStatus::Applied;
}
} // namespace

RuleStatus contractionVjp(GradBuilder &g, Operation *op,
                          ArrayRef<Value> resultGrads,
                          MutableArrayRef<Value> operandGrads,
                          std::string &why) {
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](MatmulOp m) {
        return matmulVjp(g, m, resultGrads[0], operandGrads, why);
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

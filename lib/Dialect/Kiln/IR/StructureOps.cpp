//===- StructureOps.cpp - kiln.fusion and kiln.yield ----------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln {

YieldOp FusionOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

LogicalResult FusionOp::verify() {
  YieldOp yield = getYield();
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes() << " but its results are "
           << getResultTypes();
  if (getNumResults() == 0)
    return emitOpError("must yield at least one value");
  auto shape = cast<ShapedType>(getResult(0).getType()).getShape();
  for (Type type : getResultTypes())
    if (cast<ShapedType>(type).getShape() != shape)
      return emitOpError("results must share one shape (the kernel's "
                         "iteration space), got ")
             << getResult(0).getType() << " and " << type;
  for (Operation &op : getBody().front().without_terminator()) {
    // Lowering rewrites the contents in place, so any side-effect-free op
    // may appear; what would be a kernel's side effect may not.
    if (!isMemoryEffectFree(&op))
      return op.emitOpError("cannot be part of a kiln.fusion region: it has "
                            "side effects");
    if (isa<FusionOp>(op))
      return op.emitOpError("cannot nest inside another kiln.fusion");
  }
  return success();
}

} // namespace kiln

//===- AutodiffOps.cpp - kiln.gradient's types and verifier ---------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

LogicalResult GradientOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  if (adaptor.getXs().empty())
    return emitOptionalError(loc, "kiln.gradient needs at least one x");
  for (Value x : adaptor.getXs())
    types.push_back(x.getType());
  return success();
}

LogicalResult GradientOp::verify() {
  for (auto [i, x] : llvm::enumerate(getXs()))
    if (!cast<RankedTensorType>(x.getType()).hasStaticShape())
      return emitOpError("x #") << i << " has no static shape: "
                                << x.getType();
  if (isa<FusionOp>((*this)->getParentOp()))
    return emitOpError("cannot be inside a kiln.fusion (kiln-expand-gradients "
                       "runs before kiln-fuse)");
  return success();
}

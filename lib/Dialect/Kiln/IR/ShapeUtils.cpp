//===- ShapeUtils.cpp - Shape rules shared by kiln op families
//---------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln {

std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                    ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l == r || r == 1)
      result[i] = l;
    else if (l == 1)
      result[i] = r;
    else if (ShapedType::isDynamic(l) || ShapedType::isDynamic(r))
      result[i] = ShapedType::kDynamic;
    else
      return std::nullopt;
  }
  return result;
}

LogicalResult inferBroadcastResult(std::optional<Location> loc, Type lhs,
                                   Type rhs, Type elementType,
                                   SmallVectorImpl<Type> &results) {
  auto lhsType = dyn_cast<RankedTensorType>(lhs);
  auto rhsType = dyn_cast<RankedTensorType>(rhs);
  if (!lhsType || !rhsType)
    return emitOptionalError(loc, "operands must be ranked tensors");
  // Comparisons yield i1 but still need operands of one element type.
  if (lhsType.getElementType() != rhsType.getElementType())
    return emitOptionalError(
        loc, "operand element types differ: ", lhsType.getElementType(), " vs ",
        rhsType.getElementType());
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(lhsType.getShape(), rhsType.getShape());
  if (!shape)
    return emitOptionalError(loc, "operand shapes ", lhsType, " and ", rhsType,
                             " do not broadcast");
  results.push_back(RankedTensorType::get(*shape, elementType));
  return success();
}

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t dilation, int64_t lo, int64_t hi,
                         bool ceilMode) {
  int64_t span = in + lo + hi - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // With ceil_mode, the last window must start inside the input or the low
  // padding (ONNX and PyTorch agree on this rule).
  if (ceilMode && (out - 1) * stride >= in + lo)
    --out;
  return out;
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return -1;
  return axis < 0 ? axis + rank : axis;
}

} // namespace kiln

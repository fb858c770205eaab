//===- ReductionOps.cpp - Reductions, normalisation and pooling
//-------------===//

#include "ConstantFolding.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

namespace {
/// The shape left after reducing `axes` (already non-negative).
SmallVector<int64_t> reducedShape(ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> axes, bool keepdims) {
  SmallVector<int64_t> result;
  for (auto [d, size] : llvm::enumerate(shape)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
      result.push_back(size);
    else if (keepdims)
      result.push_back(1);
  }
  return result;
}

LogicalResult checkAxis(Operation *op, int64_t axis, int64_t rank) {
  if (normalizeAxis(axis, rank) < 0)
    return op->emitOpError("axis ")
           << axis << " is out of range for rank " << rank;
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// reduce, argmax, argmin
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  for (int64_t axis : adaptor.getAxes())
    if (axis < 0 || axis >= input.getRank())
      return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                               input.getRank());
  types.push_back(RankedTensorType::get(
      reducedShape(input.getShape(), adaptor.getAxes(), adaptor.getKeepdims()),
      input.getElementType()));
  return success();
}

LogicalResult ReduceOp::verify() {
  ArrayRef<int64_t> axes = getAxes();
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] <= axes[i - 1])
      return emitOpError("axes must be sorted and unique");
  return success();
}

OpFoldResult ReduceOp::fold(FoldAdaptor adaptor) {
  if (getAxes().empty() && getInput().getType() == getType())
    return getInput();
  // Integer reductions of constants are shape arithmetic (ReduceProd of a
  // Shape slice is the flattened size); they fold exactly. Float ones are
  // left to the kernels (their summation order is the kernel's).
  DenseElementsAttr input = getFoldableElements(adaptor.getInput());
  auto intType = dyn_cast<IntegerType>(getType().getElementType());
  if (!input || !intType || getKind() == ReduceKind::Mean ||
      !getInput().getType().hasStaticShape() ||
      getInput().getType().getNumElements() > kMaxFoldElements)
    return {};
  bool isUnsigned = intType.isUnsigned();
  ArrayRef<int64_t> inShape = getInput().getType().getShape();
  ArrayRef<int64_t> axes = getAxes();
  // The result's strides over the input's axes: 0 along a reduced axis.
  SmallVector<int64_t> kept = reducedShape(inShape, axes, /*keepdims=*/true);
  SmallVector<int64_t> keptStrides = computeStrides(kept);
  SmallVector<int64_t> inStrides = computeStrides(inShape);
  unsigned width = intType.getWidth();
  std::optional<APInt> init;
  switch (getKind()) {
  case ReduceKind::Sum:
    init = APInt(width, 0);
    break;
  case ReduceKind::Prod:
    init = APInt(width, 1);
    break;
  default:
    break; // max/min start from the first element
  }
  SmallVector<std::optional<APInt>> acc(getType().getNumElements(), init);
  SmallVector<APInt> values(input.getValues<APInt>()); // n <= 65,536
  int64_t n = getInput().getType().getNumElements();
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t out = 0, rest = linear;
    for (size_t d = 0; d < inShape.size(); ++d) {
      int64_t coord = rest / inStrides[d];
      rest %= inStrides[d];
      if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
        out += coord * keptStrides[d];
    }
    const APInt &v = values[linear];
    std::optional<APInt> &a = acc[out];
    if (!a) {
      a = v;
      continue;
    }
    switch (getKind()) {
    case ReduceKind::Sum:
      *a += v;
      break;
    case ReduceKind::Prod:
      *a *= v;
      break;
    case ReduceKind::Max:
      if (isUnsigned ? v.ugt(*a) : v.sgt(*a))
        a = v;
      break;
    case ReduceKind::Min:
      if (isUnsigned ? v.ult(*a) : v.slt(*a))
        a = v;
      break;
    case ReduceKind::Mean:
      return {};
    }
  }
  SmallVector<APInt> result;
  for (std::optional<APInt> &a : acc) {
    if (!a)
      return {}; // max/min over an empty axis
    result.push_back(*a);
  }
  return DenseElementsAttr::get(getType(), result);
}

static LogicalResult inferArgReduce(std::optional<Location> loc, Type inputType,
                                    int64_t axis, bool keepdims,
                                    SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(inputType);
  int64_t d = normalizeAxis(axis, input.getRank());
  if (d < 0)
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             input.getRank());
  types.push_back(
      RankedTensorType::get(reducedShape(input.getShape(), {d}, keepdims),
                            IntegerType::get(input.getContext(), 64)));
  return success();
}

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferArgReduce(loc, adaptor.getInput().getType(), adaptor.getAxis(),
                        adaptor.getKeepdims(), types);
}

LogicalResult ArgMinOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferArgReduce(loc, adaptor.getInput().getType(), adaptor.getAxis(),
                        adaptor.getKeepdims(), types);
}

LogicalResult CumSumOp::verify() {
  if (getAxis() < 0 || getAxis() >= getType().getRank())
    return emitOpError("axis ")
           << getAxis() << " is out of range for rank " << getType().getRank();
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             input.getRank());
  int64_t k = adaptor.getK();
  int64_t extent = input.getDimSize(axis);
  if (k < 0 || (!ShapedType::isDynamic(extent) && k > extent))
    return emitOptionalError(loc, "k ", k, " must be in [0, ", extent,
                             "], the extent of axis ", axis);
  SmallVector<int64_t> shape(input.getShape());
  shape[axis] = k;
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  types.push_back(RankedTensorType::get(shape, IntegerType::get(context, 64)));
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return checkAxis(*this, getAxis(), getType().getRank());
}

LogicalResult LogSoftmaxOp::verify() {
  return checkAxis(*this, getAxis(), getType().getRank());
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

namespace {
/// Checks that every per-channel parameter is 1-D with `channels` entries.
LogicalResult verifyChannelParams(Operation *op, ValueRange params,
                                  int64_t channels) {
  for (Value p : params) {
    auto type = cast<RankedTensorType>(p.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != channels)
      return op->emitOpError("expects per-channel parameters of shape [")
             << channels << "], got " << type;
  }
  return success();
}
} // namespace

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t axis = normalizeAxis(getAxis(), input.getRank());
  if (axis < 0)
    return checkAxis(*this, getAxis(), input.getRank());
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  SmallVector<Value> params{getScale()};
  if (getBias())
    params.push_back(getBias());
  for (Value p : params) {
    auto type = cast<RankedTensorType>(p.getType());
    std::optional<SmallVector<int64_t>> shape =
        broadcastShapes(normalized, type.getShape());
    if (!shape || ArrayRef<int64_t>(*shape) != normalized)
      return emitOpError("parameter ")
             << type << " does not broadcast to the normalised shape";
  }
  return success();
}

LogicalResult BatchNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (input.getRank() < 2)
    return emitOpError("expects an input of rank >= 2");
  int64_t channelDim =
      getDataFormat() == DataFormat::ChannelsLast ? input.getRank() - 1 : 1;
  return verifyChannelParams(*this,
                             {getScale(), getBias(), getMean(), getVariance()},
                             input.getDimSize(channelDim));
}

LogicalResult InstanceNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (input.getRank() < 3)
    return emitOpError("expects an input of rank >= 3");
  return verifyChannelParams(*this, {getScale(), getBias()},
                             input.getDimSize(1));
}

LogicalResult LrnOp::verify() {
  if (getSize() < 1)
    return emitOpError("size must be positive");
  if (getType().getRank() < 3)
    return emitOpError("expects an input of rank >= 3");
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {
SmallVector<int64_t> spatialDimsOf(int64_t rank, DataFormat format) {
  SmallVector<int64_t> dims;
  bool last = format == DataFormat::ChannelsLast;
  for (int64_t d = last ? 1 : 2, e = last ? rank - 1 : rank; d < e; ++d)
    dims.push_back(d);
  return dims;
}
} // namespace

LogicalResult PoolOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() < 3)
    return emitOptionalError(loc, "expects an input of rank >= 3");
  SmallVector<int64_t> dims =
      spatialDimsOf(input.getRank(), adaptor.getDataFormat());
  size_t spatial = dims.size();
  ArrayRef<int64_t> kernel = adaptor.getKernel(),
                    strides = adaptor.getStrides(),
                    dilations = adaptor.getDilations(),
                    padding = adaptor.getPadding();
  if (kernel.size() != spatial || strides.size() != spatial ||
      dilations.size() != spatial || padding.size() != 2 * spatial)
    return emitOptionalError(loc, "expects ", spatial,
                             " kernel, stride and dilation entries and ",
                             2 * spatial, " padding entries");
  SmallVector<int64_t> shape(input.getShape());
  for (size_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1)
      return emitOptionalError(
          loc, "kernel, strides and dilations must be positive");
    shape[dims[i]] = windowOutputSize(
        input.getDimSize(dims[i]), kernel[i], strides[i], dilations[i],
        padding[i], padding[spatial + i], adaptor.getCeilMode());
    if (shape[dims[i]] < 1)
      return emitOptionalError(
          loc, "window larger than padded input in spatial dim ", i);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult PoolOp::verifyRegions() {
  // A window lying wholly in the padding has no input element to pool.
  ArrayRef<int64_t> kernel = getKernel(), padding = getPadding(),
                    dilations = getDilations();
  for (size_t i = 0; i < kernel.size(); ++i) {
    int64_t extent = dilations[i] * (kernel[i] - 1) + 1;
    if (padding[i] >= extent || padding[kernel.size() + i] >= extent)
      return emitOpError(
                 "padding must be smaller than the dilated kernel extent (")
             << extent << ") in spatial dim " << i;
  }
  return success();
}

LogicalResult PoolIndicesOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() < 3)
    return emitOptionalError(loc, "expects an input of rank >= 3");
  size_t spatial = input.getRank() - 2;
  ArrayRef<int64_t> kernel = adaptor.getKernel(),
                    strides = adaptor.getStrides(),
                    dilations = adaptor.getDilations(),
                    padding = adaptor.getPadding();
  if (kernel.size() != spatial || strides.size() != spatial ||
      dilations.size() != spatial || padding.size() != 2 * spatial)
    return emitOptionalError(loc, "expects ", spatial,
                             " kernel, stride and dilation entries and ",
                             2 * spatial, " padding entries");
  SmallVector<int64_t> shape(input.getShape());
  for (size_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1)
      return emitOptionalError(
          loc, "kernel, strides and dilations must be positive");
    shape[2 + i] = windowOutputSize(
        input.getDimSize(2 + i), kernel[i], strides[i], dilations[i],
        padding[i], padding[spatial + i], adaptor.getCeilMode());
    if (shape[2 + i] < 1)
      return emitOptionalError(
          loc, "window larger than padded input in spatial dim ", i);
  }
  types.push_back(RankedTensorType::get(shape, IntegerType::get(context, 64)));
  return success();
}

LogicalResult GlobalPoolOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() < 3)
    return emitOptionalError(loc, "expects an input of rank >= 3");
  SmallVector<int64_t> shape(input.getShape());
  for (int64_t d : spatialDimsOf(input.getRank(), adaptor.getDataFormat()))
    shape[d] = 1;
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

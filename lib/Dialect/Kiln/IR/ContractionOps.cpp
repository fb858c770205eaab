//===- ContractionOps.cpp - Type inference and verifiers of contractions
//----===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

/// The inferred result type, or the same shape in f32 when the inferred
/// element type is bf16 or f16: a contraction may accumulate (and return) in
/// f32 what it multiplies in a 16-bit float type.
static bool isCompatibleContractionResult(TypeRange inferred,
                                          TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  if (inferred == actual)
    return true;
  auto inferredType = dyn_cast<RankedTensorType>(inferred.front());
  auto actualType = dyn_cast<RankedTensorType>(actual.front());
  if (!inferredType || !actualType ||
      inferredType.getShape() != actualType.getShape())
    return false;
  Type from = inferredType.getElementType();
  return (from.isBF16() || from.isF16()) && actualType.getElementType().isF32();
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

bool MatmulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return isCompatibleContractionResult(l, r);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(
        loc, "operand element types differ: ", lhs.getElementType(), " vs ",
        rhs.getElementType());
  if (lhs.getRank() == 0 || rhs.getRank() == 0)
    return emitOptionalError(loc, "operands must have rank >= 1");
  // Promote 1-D operands to matrices, remembering to drop the added dims.
  SmallVector<int64_t> l(lhs.getShape()), r(rhs.getShape());
  bool lhsVector = l.size() == 1, rhsVector = r.size() == 1;
  if (lhsVector)
    l.insert(l.begin(), 1);
  if (rhsVector)
    r.push_back(1);
  int64_t k = l.back(), k2 = r[r.size() - 2];
  if (k != k2 && !ShapedType::isDynamic(k) && !ShapedType::isDynamic(k2))
    return emitOptionalError(loc, "contraction dimensions differ: ", k, " vs ",
                             k2);
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes(ArrayRef(l).drop_back(2), ArrayRef(r).drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "batch dimensions do not broadcast");
  SmallVector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(l[l.size() - 2]);
  if (!rhsVector)
    shape.push_back(r.back());
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// conv, conv_transpose
//===----------------------------------------------------------------------===//

namespace {
/// The spatial dims of an activation and the channel dim, by data format.
struct ActivationLayout {
  int64_t channelDim;
  SmallVector<int64_t> spatialDims;
};

ActivationLayout getActivationLayout(int64_t rank, DataFormat format) {
  ActivationLayout layout;
  bool last = format == DataFormat::ChannelsLast;
  layout.channelDim = last ? rank - 1 : 1;
  for (int64_t d = last ? 1 : 2, e = last ? rank - 1 : rank; d < e; ++d)
    layout.spatialDims.push_back(d);
  return layout;
}

/// Checks what conv and conv_transpose share: ranks, attribute lengths, and
/// that the filter's spatial dims sit where the format puts them.
LogicalResult verifyWindowAttrs(std::optional<Location> loc,
                                RankedTensorType input, RankedTensorType filter,
                                ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> dilations,
                                ArrayRef<int64_t> padding, int64_t groups) {
  int64_t rank = input.getRank();
  if (rank < 3 || rank > 5)
    return emitOptionalError(
        loc, "expects a 3-D to 5-D input (1 to 3 spatial dims), got ", input);
  if (filter.getRank() != rank)
    return emitOptionalError(loc, "filter rank ", filter.getRank(),
                             " differs from input rank ", rank);
  size_t spatial = rank - 2;
  if (strides.size() != spatial || dilations.size() != spatial ||
      padding.size() != 2 * spatial)
    return emitOptionalError(loc, "expects ", spatial,
                             " strides and dilations and ", 2 * spatial,
                             " padding entries");
  if (llvm::any_of(strides, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(dilations, [](int64_t d) { return d < 1; }))
    return emitOptionalError(loc, "strides and dilations must be positive");
  if (llvm::any_of(padding, [](int64_t p) { return p < 0; }))
    return emitOptionalError(loc, "padding must be non-negative");
  if (groups < 1)
    return emitOptionalError(loc, "groups must be positive");
  if (input.getElementType() != filter.getElementType())
    return emitOptionalError(loc, "input and filter element types differ");
  return success();
}

SmallVector<int64_t> filterSpatialShape(RankedTensorType filter,
                                        DataFormat format) {
  ArrayRef<int64_t> shape = filter.getShape();
  return format == DataFormat::ChannelsLast
             ? SmallVector<int64_t>(shape.drop_front().drop_back())
             : SmallVector<int64_t>(shape.drop_front(2));
}
} // namespace

bool ConvOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return isCompatibleContractionResult(l, r);
}

bool ConvTransposeOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return isCompatibleContractionResult(l, r);
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto filter = cast<RankedTensorType>(adaptor.getFilter().getType());
  if (failed(verifyWindowAttrs(loc, input, filter, adaptor.getStrides(),
                               adaptor.getDilations(), adaptor.getPadding(),
                               adaptor.getGroups())))
    return failure();
  DataFormat format = adaptor.getDataFormat();
  ActivationLayout layout = getActivationLayout(input.getRank(), format);
  SmallVector<int64_t> kernel = filterSpatialShape(filter, format);
  SmallVector<int64_t> shape(input.getShape());
  shape[layout.channelDim] = filter.getDimSize(0);
  size_t spatial = layout.spatialDims.size();
  for (size_t i = 0; i < spatial; ++i) {
    int64_t d = layout.spatialDims[i];
    shape[d] = windowOutputSize(
        input.getDimSize(d), kernel[i], adaptor.getStrides()[i],
        adaptor.getDilations()[i], adaptor.getPadding()[i],
        adaptor.getPadding()[spatial + i]);
    if (shape[d] < 1)
      return emitOptionalError(
          loc, "window larger than padded input in spatial dim ", i);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConvOp::verifyRegions() {
  RankedTensorType input = getInput().getType(), filter = getFilter().getType();
  ActivationLayout layout =
      getActivationLayout(input.getRank(), getDataFormat());
  int64_t filterChannelDim =
      getDataFormat() == DataFormat::ChannelsLast ? filter.getRank() - 1 : 1;
  int64_t inChannels = input.getDimSize(layout.channelDim);
  int64_t groups = getGroups();
  if (inChannels % groups != 0 || filter.getDimSize(0) % groups != 0)
    return emitOpError("channels (")
           << inChannels << " in, " << filter.getDimSize(0)
           << " out) are not divisible by groups (" << groups << ")";
  if (filter.getDimSize(filterChannelDim) != inChannels / groups)
    return emitOpError("filter has ")
           << filter.getDimSize(filterChannelDim)
           << " input channels per group, expected " << inChannels / groups;
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 ||
        biasType.getDimSize(0) != filter.getDimSize(0))
      return emitOpError("bias must be 1-D with ")
             << filter.getDimSize(0) << " elements, got " << biasType;
    if (biasType.getElementType() != getType().getElementType())
      return emitOpError("bias element type ")
             << biasType.getElementType() << " differs from the result's "
             << getType().getElementType();
  }
  return success();
}

LogicalResult ConvTransposeOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto filter = cast<RankedTensorType>(adaptor.getFilter().getType());
  if (failed(verifyWindowAttrs(loc, input, filter, adaptor.getStrides(),
                               adaptor.getDilations(), adaptor.getPadding(),
                               adaptor.getGroups())))
    return failure();
  size_t spatial = input.getRank() - 2;
  if (adaptor.getOutputPadding().size() != spatial)
    return emitOptionalError(loc, "expects ", spatial,
                             " output_padding entries");
  DataFormat format = adaptor.getDataFormat();
  ActivationLayout layout = getActivationLayout(input.getRank(), format);
  SmallVector<int64_t> kernel = filterSpatialShape(filter, format);
  int64_t filterOutDim =
      format == DataFormat::ChannelsLast ? filter.getRank() - 1 : 1;
  SmallVector<int64_t> shape(input.getShape());
  shape[layout.channelDim] =
      filter.getDimSize(filterOutDim) * adaptor.getGroups();
  for (size_t i = 0; i < spatial; ++i) {
    int64_t d = layout.spatialDims[i];
    shape[d] = adaptor.getStrides()[i] * (input.getDimSize(d) - 1) +
               adaptor.getOutputPadding()[i] +
               adaptor.getDilations()[i] * (kernel[i] - 1) + 1 -
               adaptor.getPadding()[i] - adaptor.getPadding()[spatial + i];
    if (shape[d] < 1)
      return emitOptionalError(loc, "padding leaves no output in spatial dim ",
                               i);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConvTransposeOp::verifyRegions() {
  RankedTensorType input = getInput().getType(), filter = getFilter().getType();
  ActivationLayout layout =
      getActivationLayout(input.getRank(), getDataFormat());
  if (input.getDimSize(layout.channelDim) != filter.getDimSize(0))
    return emitOpError("filter has ")
           << filter.getDimSize(0) << " input channels, input has "
           << input.getDimSize(layout.channelDim);
  if (input.getDimSize(layout.channelDim) % getGroups() != 0)
    return emitOpError("input channels are not divisible by groups");
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    int64_t outChannels = getType().getDimSize(layout.channelDim);
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != outChannels)
      return emitOpError("bias must be 1-D with ")
             << outChannels << " elements, got " << biasType;
    if (biasType.getElementType() != getType().getElementType())
      return emitOpError("bias element type ")
             << biasType.getElementType() << " differs from the result's "
             << getType().getElementType();
  }
  return success();
}

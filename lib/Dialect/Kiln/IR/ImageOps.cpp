//===- ImageOps.cpp - Type inference of the image sampling ops ------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

LogicalResult GridSampleOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto grid = cast<RankedTensorType>(adaptor.getGrid().getType());
  int64_t spatial = input.getRank() - 2;
  if (spatial < 1)
    return emitOptionalError(loc, "expects an input [N, C, spatial...] of "
                                  "rank >= 3, got rank ", input.getRank());
  if (grid.getRank() != spatial + 2 || grid.getShape().back() != spatial ||
      grid.getDimSize(0) != input.getDimSize(0))
    return emitOptionalError(loc, "grid must be [N, out spatial..., ",
                             spatial, "] for an input ", input, ", got ",
                             grid);
  if (adaptor.getMode() == ResizeMode::Cubic && spatial != 2)
    return emitOptionalError(loc, "cubic grid sampling is 2-D only");
  if (grid.getElementType() != input.getElementType())
    return emitOptionalError(loc, "grid and input element types differ");
  SmallVector<int64_t> shape{input.getDimSize(0), input.getDimSize(1)};
  llvm::append_range(shape, grid.getShape().slice(1, spatial));
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult RoiAlignOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto rois = cast<RankedTensorType>(adaptor.getRois().getType());
  auto batch = cast<RankedTensorType>(adaptor.getBatchIndices().getType());
  if (input.getRank() != 4)
    return emitOptionalError(loc, "expects a 4-D input [N, C, H, W], got ",
                             input);
  if (rois.getRank() != 2 || rois.getDimSize(1) != 4)
    return emitOptionalError(loc, "rois must be [R, 4], got ", rois);
  if (batch.getRank() != 1 || batch.getDimSize(0) != rois.getDimSize(0))
    return emitOptionalError(loc, "batch_indices must be [R] with R = ",
                             rois.getDimSize(0), ", got ", batch);
  if (rois.getElementType() != input.getElementType())
    return emitOptionalError(loc, "rois and input element types differ");
  if (adaptor.getOutputHeight() < 1 || adaptor.getOutputWidth() < 1 ||
      adaptor.getSamplingRatio() < 0)
    return emitOptionalError(loc, "output sizes must be positive and "
                                  "sampling_ratio non-negative");
  types.push_back(RankedTensorType::get(
      {rois.getDimSize(0), input.getDimSize(1), adaptor.getOutputHeight(),
       adaptor.getOutputWidth()},
      input.getElementType()));
  return success();
}

LogicalResult DeformSampleOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto offset = cast<RankedTensorType>(adaptor.getOffset().getType());
  auto mask = cast<RankedTensorType>(adaptor.getMask().getType());
  ArrayRef<int64_t> kernel = adaptor.getKernel(),
                    strides = adaptor.getStrides(),
                    dilations = adaptor.getDilations(),
                    padding = adaptor.getPadding();
  if (input.getRank() != 4)
    return emitOptionalError(loc, "expects a 4-D input [N, C, H, W], got ",
                             input);
  if (kernel.size() != 2 || strides.size() != 2 || dilations.size() != 2 ||
      padding.size() != 4)
    return emitOptionalError(loc, "expects 2 kernel, stride and dilation "
                                  "entries and 4 padding entries");
  int64_t groups = adaptor.getOffsetGroups();
  if (groups < 1 || input.getDimSize(1) % groups != 0)
    return emitOptionalError(loc, "offset_groups ", groups,
                             " must divide the ", input.getDimSize(1),
                             " channels");
  SmallVector<int64_t> out;
  for (int i = 0; i < 2; ++i) {
    int64_t size =
        windowOutputSize(input.getDimSize(2 + i), kernel[i], strides[i],
                         dilations[i], padding[i], padding[2 + i], false);
    if (size < 1)
      return emitOptionalError(loc, "window larger than the padded input");
    out.push_back(size);
  }
  int64_t taps = groups * kernel[0] * kernel[1];
  SmallVector<int64_t> offsetShape{input.getDimSize(0), 2 * taps, out[0],
                                   out[1]};
  SmallVector<int64_t> maskShape{input.getDimSize(0), taps, out[0], out[1]};
  if (offset.getShape() != ArrayRef<int64_t>(offsetShape))
    return emitOptionalError(loc, "offset must be ",
                             RankedTensorType::get(offsetShape,
                                                   input.getElementType()),
                             ", got ", offset);
  if (mask.getShape() != ArrayRef<int64_t>(maskShape))
    return emitOptionalError(loc, "mask must be ",
                             RankedTensorType::get(maskShape,
                                                   input.getElementType()),
                             ", got ", mask);
  if (offset.getElementType() != input.getElementType() ||
      mask.getElementType() != input.getElementType())
    return emitOptionalError(loc, "offset, mask and input element types "
                                  "differ");
  types.push_back(RankedTensorType::get(
      {input.getDimSize(0), input.getDimSize(1), kernel[0], kernel[1], out[0],
       out[1]},
      input.getElementType()));
  return success();
}

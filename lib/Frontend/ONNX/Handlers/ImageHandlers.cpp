//===- ImageHandlers.cpp - ONNX ops on images and boxes -------------------===//
//
// GridSample, RoiAlign and DeformConv (kiln.grid_sample, kiln.roi_align,
// kiln.deform_sample followed by a matmul), and the ops that are exact
// compositions: AffineGrid (a constant base grid times theta), Col2Im (a
// grouped transposed convolution with a one-hot filter). NonMaxSuppression
// runs as a host step in inference compiles (HostPartition.cpp) and is
// refused here, in training compiles; ImageDecoder is refused with the
// reason.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"
#include "WindowAttrs.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

//===----------------------------------------------------------------------===//
// GridSample, AffineGrid
//===----------------------------------------------------------------------===//

/// GridSample-16 names its modes bilinear/bicubic and takes 4-D inputs only;
/// GridSample-20 says linear/cubic and takes any rank.
LogicalResult importGridSample(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  bool legacy = n.opset() < 20;
  SmallVector<StringRef> modes =
      legacy ? SmallVector<StringRef>{"bilinear", "nearest", "bicubic"}
             : SmallVector<StringRef>{"linear", "nearest", "cubic"};
  StringRef defaultMode = legacy ? "bilinear" : "linear";
  if (failed(n.requireStringAttrIn("mode", defaultMode, modes)) ||
      failed(n.requireStringAttrIn("padding_mode", "zeros",
                                   {"zeros", "border", "reflection"})))
    return failure();
  if (legacy && n.inputType(0).getRank() != 4)
    return n.fail("GridSample-16 takes 4-D inputs, got rank " +
                  Twine(n.inputType(0).getRank()));
  std::string mode = n.stringAttr("mode", defaultMode);
  ResizeMode kind = llvm::StringSwitch<ResizeMode>(mode)
                        .Cases("linear", "bilinear", ResizeMode::Linear)
                        .Cases("cubic", "bicubic", ResizeMode::Cubic)
                        .Default(ResizeMode::Nearest);
  GridPadding padding =
      llvm::StringSwitch<GridPadding>(n.stringAttr("padding_mode", "zeros"))
          .Case("border", GridPadding::Border)
          .Case("reflection", GridPadding::Reflection)
          .Default(GridPadding::Zeros);
  SmallVector<NamedAttribute> attrs{
      n.named("mode", ResizeModeAttr::get(n.context(), kind)),
      n.named("padding", GridPaddingAttr::get(n.context(), padding))};
  if (n.intAttr("align_corners", 0) != 0)
    attrs.push_back(n.namedUnit("align_corners"));
  Composer c(n);
  Value grid = c.cast(n.input(1), n.inputType(0).getElementType());
  return bindComposed(c, c.make<GridSampleOp>({n.input(0), grid}, attrs));
}

/// grid[n, p, :] = theta[n] @ [x_p, y_p, (z_p,) 1]: a constant base grid of
/// normalised pixel positions (x fastest, as GridSample reads it) times
/// theta transposed, one batched matmul.
LogicalResult importAffineGrid(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  // A size given at run time: N and the spatial dims from the declared
  // grid [N, (D,) H, W, spatial], guarded; C never shapes the grid, so the
  // guard lets it be anything.
  FailureOr<SmallVector<int64_t>> size = n.constantOrDeclaredInts(
      1, "size",
      [](ArrayRef<int64_t> declared) -> std::optional<SmallVector<int64_t>> {
        if (declared.size() != 4 && declared.size() != 5)
          return std::nullopt;
        SmallVector<int64_t> fixed{declared.front(), 1};
        fixed.append(declared.begin() + 1, declared.end() - 1);
        return fixed;
      },
      /*free=*/{1});
  if (failed(size))
    return failure();
  RankedTensorType thetaType = n.inputType(0);
  int64_t spatial = static_cast<int64_t>(size->size()) - 2;
  if ((spatial != 2 && spatial != 3) || thetaType.getRank() != 3 ||
      thetaType.getDimSize(1) != spatial ||
      thetaType.getDimSize(2) != spatial + 1 ||
      thetaType.getDimSize(0) != (*size)[0])
    return n.fail("expects size [N, C, H, W] or [N, C, D, H, W] and theta "
                  "[N, 2, 3] or [N, 3, 4], got size " +
                  formatInts(*size) + " and theta " +
                  formatInts(thetaType.getShape()));
  bool align = n.intAttr("align_corners", 0) != 0;
  // Spatial sizes, outermost first (D, H, W); grid components innermost
  // first (x along W).
  SmallVector<int64_t> dims(size->begin() + 2, size->end());
  int64_t points = Composer::product(dims);
  // As ONNX's reference: with align_corners a single pixel sits at -1.
  auto coordinate = [&](int64_t i, int64_t len) {
    if (align)
      return len == 1 ? -1.0 : -1.0 + 2.0 * i / static_cast<double>(len - 1);
    double step = 2.0 / static_cast<double>(len);
    return -1.0 + step / 2 + step * i;
  };
  SmallVector<double> base;
  base.reserve(points * (spatial + 1));
  for (int64_t p = 0; p < points; ++p) {
    SmallVector<int64_t> at(spatial);
    int64_t rest = p;
    for (int64_t d = spatial - 1; d >= 0; --d) {
      at[d] = rest % dims[d];
      rest /= dims[d];
    }
    for (int64_t k = 0; k < spatial; ++k) {
      int64_t d = spatial - 1 - k;
      base.push_back(coordinate(at[d], dims[d]));
    }
    base.push_back(1.0);
  }
  Composer c(n);
  Type elementType = thetaType.getElementType();
  Value grid = c.constant(
      RankedTensorType::get({points, spatial + 1}, elementType), base);
  Value thetaT = c.transpose(n.input(0), {0, 2, 1});
  Value product = c.make<MatmulOp>({grid, thetaT}); // [N, points, spatial]
  SmallVector<int64_t> shape{(*size)[0]};
  llvm::append_range(shape, dims);
  shape.push_back(spatial);
  return bindComposed(c, c.reshape(product, shape));
}

//===----------------------------------------------------------------------===//
// RoiAlign
//===----------------------------------------------------------------------===//

/// RoiAlign-10 has no coordinate_transformation_mode: it behaves as
/// output_half_pixel, which RoiAlign-16 keeps as an option.
LogicalResult importRoiAlign(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)) ||
      failed(n.requireStringAttrIn("mode", "avg", {"avg", "max"})))
    return failure();
  bool halfPixel = false;
  if (n.opset() >= 16) {
    if (failed(n.requireStringAttrIn("coordinate_transformation_mode",
                                     "half_pixel",
                                     {"half_pixel", "output_half_pixel"})))
      return failure();
    halfPixel = n.stringAttr("coordinate_transformation_mode",
                             "half_pixel") == "half_pixel";
  }
  PoolKind kind =
      n.stringAttr("mode", "avg") == "max" ? PoolKind::Max : PoolKind::Avg;
  SmallVector<NamedAttribute> attrs{
      n.named("kind", PoolKindAttr::get(n.context(), kind)),
      n.namedI64("output_height", n.intAttr("output_height", 1)),
      n.namedI64("output_width", n.intAttr("output_width", 1)),
      n.namedI64("sampling_ratio", n.intAttr("sampling_ratio", 0)),
      n.namedF32("spatial_scale", n.floatAttr("spatial_scale", 1.0f))};
  if (halfPixel)
    attrs.push_back(n.namedUnit("half_pixel"));
  return bind(n, n.make<RoiAlignOp>({n.input(0), n.input(1), n.input(2)},
                                    attrs));
}

//===----------------------------------------------------------------------===//
// DeformConv
//===----------------------------------------------------------------------===//

/// kiln.deform_sample gathers the [N, C, kh, kw, oh, ow] columns; a batched
/// matmul per group applies the weights: [G, OC/G, C/G*kh*kw] x
/// [N, G, C/G*kh*kw, oh*ow].
LogicalResult importDeformConv(NodeImporter &n) {
  if (failed(n.checkArity(3, 5)))
    return failure();
  RankedTensorType xType = n.inputType(0), wType = n.inputType(1);
  if (xType.getRank() != 4 || wType.getRank() != 4)
    return n.fail("only 2-D deformable convolutions are supported, got input "
                  "rank " +
                  Twine(xType.getRank()));
  FailureOr<WindowAttrs> w =
      readWindowAttrs(n, 2, wType.getShape().drop_front(2));
  if (failed(w))
    return failure();
  int64_t groups = n.intAttr("group", 1);
  int64_t offsetGroups = n.intAttr("offset_group", 1);
  int64_t batch = xType.getDimSize(0), channels = xType.getDimSize(1);
  int64_t outChannels = wType.getDimSize(0);
  if (groups < 1 || channels % groups || outChannels % groups ||
      wType.getDimSize(1) * groups != channels)
    return n.fail("group " + Twine(groups) + " does not fit input channels " +
                  Twine(channels) + " and weight " +
                  formatInts(wType.getShape()));
  Composer c(n);
  Type elementType = xType.getElementType();
  RankedTensorType offsetType = n.inputType(2);
  Value mask;
  if (n.hasInput(4)) {
    mask = n.input(4);
  } else {
    int64_t taps = offsetGroups * w->kernel[0] * w->kernel[1];
    mask = c.constant(RankedTensorType::get({batch, taps,
                                             offsetType.getDimSize(2),
                                             offsetType.getDimSize(3)},
                                            elementType),
                      {1.0});
  }
  Value columns = c.make<DeformSampleOp>(
      {n.input(0), n.input(2), mask},
      {n.namedArray("kernel", w->kernel), n.namedArray("strides", w->strides),
       n.namedArray("dilations", w->dilations),
       n.namedArray("padding", w->padding),
       n.namedI64("offset_groups", offsetGroups)});
  if (!columns)
    return failure();
  ArrayRef<int64_t> colShape = typeOf(columns).getShape();
  int64_t outH = colShape[4], outW = colShape[5];
  int64_t k = channels / groups * w->kernel[0] * w->kernel[1];
  Value cols = c.reshape(columns, {batch, groups, k, outH * outW});
  Value weights = c.reshape(n.input(1), {groups, outChannels / groups, k});
  Value y = c.make<MatmulOp>({weights, cols}); // [N, G, OC/G, P]
  y = c.reshape(y, {batch, outChannels, outH, outW});
  if (n.hasInput(3))
    y = c.make<AddOp>({y, c.reshape(n.input(3), {outChannels, 1, 1})});
  return bindComposed(c, y);
}

//===----------------------------------------------------------------------===//
// Col2Im
//===----------------------------------------------------------------------===//

/// Col2Im sums each column entry into its image position: exactly a
/// transposed convolution of the columns (viewed as [N, C * K, L1, ...])
/// with groups = C and the filter [C * K, 1, block...] that is 1 where the
/// block position equals the column's row within its channel.
LogicalResult importCol2Im(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  FailureOr<SmallVector<int64_t>> image = n.constantInts(1, "image_shape");
  FailureOr<SmallVector<int64_t>> block = n.constantInts(2, "block_shape");
  if (failed(image) || failed(block))
    return failure();
  size_t spatial = image->size();
  RankedTensorType inType = n.inputType(0);
  if (spatial < 1 || spatial > 3 || block->size() != spatial ||
      inType.getRank() != 3)
    return n.fail("expects input [N, C * prod(block), L] and 1 to 3 image "
                  "dimensions, got input " +
                  formatInts(inType.getShape()) + ", image_shape " +
                  formatInts(*image) + ", block_shape " + formatInts(*block));
  auto readOr = [&](StringRef name, size_t count, int64_t value) {
    return n.hasAttr(name) ? n.intsAttr(name)
                           : SmallVector<int64_t>(count, value);
  };
  SmallVector<int64_t> strides = readOr("strides", spatial, 1);
  SmallVector<int64_t> dilations = readOr("dilations", spatial, 1);
  SmallVector<int64_t> pads = readOr("pads", 2 * spatial, 0);
  if (strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial)
    return n.fail("strides, dilations and pads must have " + Twine(spatial) +
                  ", " + Twine(spatial) + " and " + Twine(2 * spatial) +
                  " entries");
  int64_t k = Composer::product(*block);
  if (k < 1 || inType.getDimSize(1) % k)
    return n.fail("input dimension 1 (" + Twine(inType.getDimSize(1)) +
                  ") is not a multiple of the block size " + Twine(k));
  int64_t channels = inType.getDimSize(1) / k;
  SmallVector<int64_t> blocks, outputPadding;
  for (size_t d = 0; d < spatial; ++d) {
    int64_t window = dilations[d] * ((*block)[d] - 1) + 1;
    int64_t span = (*image)[d] + pads[d] + pads[spatial + d] - window;
    if (span < 0)
      return n.fail("block " + formatInts(*block) +
                    " does not fit the padded image " + formatInts(*image));
    int64_t count = span / strides[d] + 1;
    blocks.push_back(count);
    outputPadding.push_back((*image)[d] -
                            (strides[d] * (count - 1) + window - pads[d] -
                             pads[spatial + d]));
  }
  if (Composer::product(blocks) != inType.getDimSize(2))
    return n.fail("input has " + Twine(inType.getDimSize(2)) +
                  " blocks, the image and block shapes give " +
                  Twine(Composer::product(blocks)));
  Composer c(n);
  SmallVector<int64_t> viewShape{inType.getDimSize(0), channels * k};
  llvm::append_range(viewShape, blocks);
  Value view = c.reshape(n.input(0), viewShape);
  SmallVector<int64_t> filterShape{channels * k, 1};
  llvm::append_range(filterShape, *block);
  SmallVector<double> filter(channels * k * k, 0.0);
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t row = 0; row < k; ++row)
      filter[(ch * k + row) * k + row] = 1.0;
  Value weights = c.constant(
      RankedTensorType::get(filterShape, inType.getElementType()), filter);
  return bindComposed(
      c, c.make<ConvTransposeOp>(
             {view, weights},
             {n.namedArray("strides", strides),
              n.namedArray("dilations", dilations),
              n.namedArray("padding", pads),
              n.namedArray("output_padding", outputPadding),
              n.namedI64("groups", channels)}));
}

//===----------------------------------------------------------------------===//
// Refused ops
//===----------------------------------------------------------------------===//

LogicalResult importNonMaxSuppression(NodeImporter &n) {
  return n.fail("the number of selected boxes depends on the scores at run "
                "time (an inference compile runs NonMaxSuppression as a "
                "host step; a training compile does not take it)");
}

LogicalResult importImageDecoder(NodeImporter &n) {
  return n.fail("decoding encoded images (JPEG, PNG, ...) is not supported: "
                "the output shape depends on the encoded bytes and Kiln's "
                "runtime has no image codecs; decode on the host before "
                "running the model");
}

} // namespace

void registerImageHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"GridSample", 16, importGridSample, "4-D inputs only"},
      {"GridSample", 20, importGridSample, "cubic mode 2-D only"},
      {"AffineGrid", 20, importAffineGrid,
       "size: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"RoiAlign", 10, importRoiAlign, ""},
      {"RoiAlign", 16, importRoiAlign, ""},
      {"DeformConv", 19, importDeformConv, "2-D only"},
      {"Col2Im", 18, importCol2Im,
       "image_shape and block_shape must be compile-time constants; 1-3 "
       "image dimensions"},
      {"NonMaxSuppression", 10, importNonMaxSuppression,
       "a host step (inference only)"},
      {"NonMaxSuppression", 11, importNonMaxSuppression,
       "a host step (inference only)"},
      {"ImageDecoder", 20, importImageDecoder,
       "refused: no image codecs in the runtime"},
  });
}

} // namespace kiln::onnx_frontend

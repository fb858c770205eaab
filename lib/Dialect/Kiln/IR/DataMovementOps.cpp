//===- DataMovementOps.cpp - Shape and data movement ops
//--------------------===//

#include "ConstantFolding.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace kiln;

namespace {
/// Builds a constant of `type` whose element `i` is element `source(i)` of
/// `input`: the shared core of every folder that only moves elements.
Attribute gatherElements(DenseElementsAttr input, RankedTensorType type,
                         llvm::function_ref<int64_t(int64_t)> source) {
  // A constant needs a static shape, even a splat one.
  if (!type.hasStaticShape())
    return {};
  if (input.isSplat())
    return input.resizeSplat(type);
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  auto values = input.getValues<Attribute>();
  SmallVector<Attribute> result;
  result.reserve(type.getNumElements());
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i)
    result.push_back(values[source(i)]);
  return DenseElementsAttr::get(type, result);
}

/// Coordinates of linear index `linear` in `shape`.
SmallVector<int64_t> delinearize(int64_t linear, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> coords(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coords[d] = linear % shape[d];
    linear /= shape[d];
  }
  return coords;
}

int64_t linearize(ArrayRef<int64_t> coords, ArrayRef<int64_t> strides) {
  int64_t linear = 0;
  for (auto [c, s] : llvm::zip_equal(coords, strides))
    linear += c * s;
  return linear;
}

bool isIdentityPermutation(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (p != static_cast<int64_t>(i))
      return false;
  return true;
}

/// Extent of a strided slice: how many of start, start+step, ... lie before
/// limit.
int64_t sliceExtent(int64_t start, int64_t limit, int64_t step) {
  if (step > 0)
    return limit > start ? (limit - start + step - 1) / step : 0;
  return start > limit ? (start - limit + (-step) - 1) / (-step) : 0;
}
} // namespace

//===----------------------------------------------------------------------===//
// constant, iota
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult IotaOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError("expects a 1-D result, got ") << getType();
  return success();
}

OpFoldResult IotaOp::fold(FoldAdaptor) {
  RankedTensorType type = getType();
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return {};
  double start = getStart().convertToDouble(),
         step = getStep().convertToDouble();
  Type elementType = type.getElementType();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    double v = start + static_cast<double>(i) * step;
    if (isa<FloatType>(elementType))
      values.push_back(FloatAttr::get(elementType, v));
    else
      values.push_back(IntegerAttr::get(elementType, static_cast<int64_t>(v)));
  }
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// reshape
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError("changes the element count from ")
           << in.getNumElements() << " to " << out.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  auto input = getFoldableElements(adaptor.getInput());
  if (input && getType().hasStaticShape())
    return input.reshape(getType());
  return {};
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries for rank ", input.getRank());
  SmallVector<bool> seen(perm.size());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return emitOptionalError(loc, "permutation is not a permutation of [0, ",
                               input.getRank(), ")");
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  if (isIdentityPermutation(getPermutation()))
    return getInput();
  // transpose(transpose(x, p), q) = transpose(x, p o q).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t q : getPermutation())
      composed.push_back(inner.getPermutation()[q]);
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    if (isIdentityPermutation(composed))
      return getInput();
    return getResult();
  }
  auto input = getFoldableElements(adaptor.getInput());
  if (!input)
    return {};
  ArrayRef<int64_t> outShape = getType().getShape();
  SmallVector<int64_t> inStrides =
      computeStrides(getInput().getType().getShape());
  ArrayRef<int64_t> perm = getPermutation();
  return gatherElements(input, getType(), [&](int64_t i) {
    SmallVector<int64_t> coords = delinearize(i, outShape);
    int64_t source = 0;
    for (auto [d, c] : llvm::enumerate(coords))
      source += c * inStrides[perm[d]];
    return source;
  });
}

//===----------------------------------------------------------------------===//
// broadcast
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(in.getShape(), out.getShape());
  if (in.getRank() > out.getRank() || !shape ||
      ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto input = getFoldableElements(adaptor.getInput());
  if (!input)
    return {};
  ArrayRef<int64_t> outShape = getType().getShape(),
                    inShape = getInput().getType().getShape();
  return gatherElements(input, getType(), [&](int64_t i) {
    return broadcastSourceIndex(i, outShape, inShape);
  });
}

//===----------------------------------------------------------------------===//
// concat
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "expects at least one input");
  auto first = cast<RankedTensorType>(adaptor.getInputs().front().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return emitOptionalError(loc, "inputs differ in rank or element type");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "inputs differ in dimension ", d);
    shape[axis] += type.getDimSize(axis);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute a : adaptor.getInputs()) {
    auto dense = getFoldableElements(a);
    if (!dense)
      return {};
    inputs.push_back(dense);
  }
  RankedTensorType type = getType();
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  int64_t axis = getAxis();
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    SmallVector<int64_t> coords = delinearize(i, shape);
    int64_t which = 0;
    while (coords[axis] >= inputs[which].getType().getDimSize(axis))
      coords[axis] -= inputs[which++].getType().getDimSize(axis);
    DenseElementsAttr src = inputs[which];
    int64_t index =
        src.isSplat()
            ? 0
            : linearize(coords, computeStrides(src.getType().getShape()));
    values.push_back(src.getValues<Attribute>()[index]);
  }
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits(),
                    steps = adaptor.getSteps();
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(limits.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return emitOptionalError(loc, "expects ", rank,
                             " starts, limits and steps");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] == 0)
      return emitOptionalError(loc, "step of dimension ", d, " is zero");
    shape.push_back(sliceExtent(starts[d], limits[d], steps[d]));
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult SliceOp::verifyRegions() {
  RankedTensorType input = getInput().getType();
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t size = input.getDimSize(d);
    if (getType().getDimSize(d) == 0)
      continue;
    int64_t start = getStarts()[d];
    if (start < 0 || start >= size)
      return emitOpError("start ") << start << " of dimension " << d
                                   << " is outside [0, " << size << ")";
    if (getLimits()[d] < -1 || getLimits()[d] > size)
      return emitOpError("limit ") << getLimits()[d] << " of dimension " << d
                                   << " is outside [-1, " << size << "]";
  }
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getSteps(), [](int64_t s) { return s == 1; }))
    return getInput();
  auto input = getFoldableElements(adaptor.getInput());
  if (!input)
    return {};
  ArrayRef<int64_t> outShape = getType().getShape();
  SmallVector<int64_t> inStrides =
      computeStrides(getInput().getType().getShape());
  return gatherElements(input, getType(), [&](int64_t i) {
    SmallVector<int64_t> coords = delinearize(i, outShape);
    int64_t source = 0;
    for (auto [d, c] : llvm::enumerate(coords))
      source += (getStarts()[d] + c * getSteps()[d]) * inStrides[d];
    return source;
  });
}

//===----------------------------------------------------------------------===//
// gather, gather_elements, scatter_elements
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             input.getRank());
  SmallVector<int64_t> shape(input.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, input.getShape().drop_front(axis + 1));
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto input = getFoldableElements(adaptor.getInput());
  auto indices = getFoldableElements(adaptor.getIndices());
  if (!input || !indices)
    return {};
  int64_t axis = getAxis();
  RankedTensorType inType = getInput().getType();
  int64_t axisSize = inType.getDimSize(axis);
  int64_t indexRank = getIndices().getType().getRank();
  SmallVector<int64_t> inStrides = computeStrides(inType.getShape());
  SmallVector<int64_t> indexStrides =
      computeStrides(getIndices().getType().getShape());
  auto indexValues = indices.getValues<APInt>();
  for (const APInt &v : indexValues) {
    int64_t idx = v.getSExtValue();
    if (idx < -axisSize || idx >= axisSize)
      return {}; // Out of range: leave it for the verifier of the user's model.
  }
  ArrayRef<int64_t> outShape = getType().getShape();
  return gatherElements(input, getType(), [&](int64_t i) {
    SmallVector<int64_t> coords = delinearize(i, outShape);
    int64_t indexLinear =
        indices.isSplat()
            ? 0
            : linearize(ArrayRef(coords).slice(axis, indexRank), indexStrides);
    int64_t idx = indexValues[indexLinear].getSExtValue();
    if (idx < 0)
      idx += axisSize;
    SmallVector<int64_t> src(coords.begin(), coords.begin() + axis);
    src.push_back(idx);
    src.append(coords.begin() + axis + indexRank, coords.end());
    return linearize(src, inStrides);
  });
}

namespace {
LogicalResult verifyElementsAxis(std::optional<Location> loc,
                                 RankedTensorType input,
                                 RankedTensorType indices, int64_t axis) {
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             input.getRank());
  if (indices.getRank() != input.getRank())
    return emitOptionalError(loc, "indices rank ", indices.getRank(),
                             " differs from input rank ", input.getRank());
  return success();
}
} // namespace

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  if (failed(verifyElementsAxis(loc, input, indices, adaptor.getAxis())))
    return failure();
  types.push_back(
      RankedTensorType::get(indices.getShape(), input.getElementType()));
  return success();
}

LogicalResult
ScatterElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  auto updates = cast<RankedTensorType>(adaptor.getUpdates().getType());
  if (failed(verifyElementsAxis(loc, input, indices, adaptor.getAxis())))
    return failure();
  if (updates.getShape() != indices.getShape() ||
      updates.getElementType() != input.getElementType())
    return emitOptionalError(loc,
                             "updates must have the indices' shape and the "
                             "input's element type");
  types.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// pad, split, tile, resize
//===----------------------------------------------------------------------===//

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != input.getRank() ||
      static_cast<int64_t>(high.size()) != input.getRank())
    return emitOptionalError(loc, "expects ", input.getRank(),
                             " low and high pads");
  SmallVector<int64_t> shape(input.getShape());
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return emitOptionalError(loc, "pads must be non-negative");
    shape[d] += low[d] + high[d];
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult PadOp::verifyRegions() {
  if (getMode() == PadMode::Reflect) {
    RankedTensorType input = getInput().getType();
    for (int64_t d = 0; d < input.getRank(); ++d)
      if (getLow()[d] >= input.getDimSize(d) ||
          getHigh()[d] >= input.getDimSize(d))
        return emitOpError("reflect padding of dimension ")
               << d << " must be smaller than its size " << input.getDimSize(d);
  }
  if (getMode() == PadMode::Edge) {
    RankedTensorType input = getInput().getType();
    for (int64_t d = 0; d < input.getRank(); ++d)
      if (input.getDimSize(d) == 0 && (getLow()[d] > 0 || getHigh()[d] > 0))
        return emitOpError("edge padding of an empty dimension");
  }
  return success();
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             input.getRank());
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return emitOptionalError(loc, "split sizes must be non-negative");
    SmallVector<int64_t> shape(input.getShape());
    shape[axis] = size;
    types.push_back(RankedTensorType::get(shape, input.getElementType()));
    total += size;
  }
  if (total != input.getDimSize(axis))
    return emitOptionalError(loc, "split sizes sum to ", total, ", not ",
                             input.getDimSize(axis));
  return success();
}

LogicalResult SplitOp::verify() {
  if (getSizes().empty())
    return emitOpError("expects at least one piece");
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> repeats = adaptor.getRepeats();
  if (static_cast<int64_t>(repeats.size()) != input.getRank())
    return emitOptionalError(loc, "expects ", input.getRank(), " repeats");
  SmallVector<int64_t> shape(input.getShape());
  for (auto [d, r] : llvm::enumerate(repeats)) {
    if (r < 0)
      return emitOptionalError(loc, "repeats must be non-negative");
    shape[d] *= r;
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult TileOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult ResizeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  if (in.getRank() != out.getRank() ||
      in.getElementType() != out.getElementType())
    return emitOpError("must keep rank and element type");
  if (!getScales().empty() &&
      static_cast<int64_t>(getScales().size()) != in.getRank())
    return emitOpError("expects ") << in.getRank() << " scales or none";
  if (llvm::any_of(getScales(), [](double s) { return s <= 0; }))
    return emitOpError("scales must be positive");
  if (getMode() != ResizeMode::Cubic &&
      (getExcludeOutside() || getCubicCoeffA().convertToDouble() != -0.75))
    return emitOpError(
        "cubic_coeff_a and exclude_outside apply to cubic mode only");
  bool crop = getCoordinateMode() == CoordinateMode::TfCropAndResize;
  if (crop != getRoi().has_value())
    return emitOpError("roi is required by and only taken by the "
                       "tf_crop_and_resize coordinate mode");
  if (!crop && getExtrapolationValue().convertToDouble() != 0)
    return emitOpError(
        "extrapolation_value applies to tf_crop_and_resize only");
  if (crop && static_cast<int64_t>(getRoi()->size()) != 2 * in.getRank())
    return emitOpError("expects ")
           << 2 * in.getRank() << " roi values (a start and an end per "
           << "dimension), got " << getRoi()->size();
  if (getAntialias() && getMode() == ResizeMode::Nearest)
    return emitOpError("antialias applies to linear and cubic modes only");
  if (getCoordinateMode() == CoordinateMode::TfHalfPixelForNn &&
      getMode() != ResizeMode::Nearest)
    return emitOpError("tf_half_pixel_for_nn applies to nearest mode only");
  // Values given at run time.
  bool runtime = getRuntimeScales() || getRuntimeRoi();
  if (runtime != getValueAxes().has_value())
    return emitOpError("value_axes is required by and only taken with "
                       "runtime scales or roi");
  if (!runtime)
    return success();
  ArrayRef<int64_t> axes = *getValueAxes();
  for (auto [k, d] : llvm::enumerate(axes))
    if (d < 0 || d >= in.getRank() || llvm::is_contained(axes.take_front(k), d))
      return emitOpError("value_axes must be distinct dimensions of the "
                         "input, got ")
             << d;
  auto checkLength = [&](Value v, int64_t count,
                         StringRef what) -> LogicalResult {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != count)
      return emitOpError("expects ")
             << what << " of " << count << " values (1-D), got " << type;
    return success();
  };
  if (getRuntimeScales()) {
    if (!getScales().empty())
      return emitOpError("takes runtime scales or the scales attribute, "
                         "not both");
    if (failed(checkLength(getRuntimeScales(), axes.size(), "runtime_scales")))
      return failure();
    for (int64_t d = 0; d < in.getRank(); ++d)
      if (!llvm::is_contained(axes, d) && in.getDimSize(d) != out.getDimSize(d))
        return emitOpError("dimension ")
               << d << " changes size but no runtime scale covers it";
  }
  if (getRuntimeRoi()) {
    if (!crop)
      return emitOpError("runtime_roi is taken by the tf_crop_and_resize "
                         "coordinate mode only");
    if (failed(checkLength(getRuntimeRoi(), 2 * axes.size(), "runtime_roi")))
      return failure();
  }
  return success();
}

bool ResizeOp::resamples(int64_t d) {
  if (getType().getDimSize(d) != getInput().getType().getDimSize(d))
    return true;
  if (!getScales().empty() && getScales()[d] != 1.0)
    return true;
  if (std::optional<ArrayRef<double>> roi = getRoi();
      roi && ((*roi)[d] != 0 || (*roi)[getType().getRank() + d] != 1))
    return true;
  return getValueAxes() && llvm::is_contained(*getValueAxes(), d);
}

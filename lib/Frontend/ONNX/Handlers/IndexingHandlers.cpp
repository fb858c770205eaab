//===- IndexingHandlers.cpp - ONNX ops that select elements by index ------===//
//
// One-hot encodings (OneHot, EyeLike), N-d gathers and scatters (GatherND,
// ScatterND), crops and reversals (CenterCropPad, ReverseSequence), MaxUnpool,
// and the ops whose result size depends on data (Compress, NonZero, Unique),
// which Kiln supports only when that data is a compile-time constant.
// Where an exact composition of kiln ops exists it is used; GatherND and
// ScatterND have kiln ops of their own.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"
#include "WindowAttrs.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

/// The element type an ONNX `dtype`-style attribute names, or `fallback`
/// when the attribute is absent.
FailureOr<Type> dtypeAttr(NodeImporter &n, StringRef name, Type fallback) {
  if (!n.hasAttr(name))
    return fallback;
  int64_t code = n.intAttr(name, 0);
  Type type = convertElementType(static_cast<int32_t>(code), n.context());
  if (!type)
    return n.fail(Twine(name) + " " + onnxTypeName(static_cast<int32_t>(code)) +
                  " is not a supported element type");
  return type;
}

/// eye(k)[i, j] = (j - i == k): two iotas compared, so a large identity is a
/// kernel, not a constant in the IR. The input gives only the shape.
LogicalResult importEyeLike(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  RankedTensorType inType = n.inputType(0);
  if (inType.getRank() != 2)
    return n.fail("expects a 2-D input, got rank " + Twine(inType.getRank()));
  FailureOr<Type> elementType =
      dtypeAttr(n, "dtype", inType.getElementType());
  if (failed(elementType))
    return failure();
  Composer c(n);
  Type i64 = n.builder().getI64Type();
  int64_t k = n.intAttr("k", 0);
  Value rows = c.iotaAlong(inType.getDimSize(0), 0, 2, i64);
  Value cols = c.iotaAlong(inType.getDimSize(1), 1, 2, i64);
  Value shifted = c.make<AddOp>({rows, c.scalar(i64, k)});
  Value hit = c.make<EqualOp>({shifted, cols});
  Value y = c.cast(c.broadcast(hit, inType.getShape()), *elementType);
  return bindComposed(c, y);
}

/// y = (indices' == iota along `axis`) ? values[1] : values[0], with
/// indices' the indices (truncated to integers, negative ones counted from
/// `depth`) given a unit dimension at `axis`. Indices outside [-depth, depth)
/// match nothing and give off values everywhere.
LogicalResult importOneHot(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  // A depth given at run time: the declared output's extent along the
  // axis, guarded (the value truncated to an integer, as here).
  FailureOr<SmallVector<double>> depthValues = failure();
  std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
  int64_t outRank = n.inputType(0).getRank() + 1;
  int64_t depthAxis = n.intAttr("axis", -1);
  depthAxis = depthAxis < 0 ? depthAxis + outRank : depthAxis;
  if (n.canGuardInput(1, /*allowFloat=*/true) && declared &&
      static_cast<int64_t>(declared->size()) == outRank && depthAxis >= 0 &&
      depthAxis < outRank && n.inputType(1).getNumElements() == 1) {
    n.guardInput(1, "depth", "equal", {}, {(*declared)[depthAxis]});
    depthValues = SmallVector<double>{double((*declared)[depthAxis])};
  } else {
    depthValues = n.constantFloats(1, "depth");
  }
  if (failed(depthValues))
    return failure();
  if (depthValues->size() != 1)
    return n.fail("depth must hold one value, got " +
                  Twine(depthValues->size()));
  int64_t depth = static_cast<int64_t>(depthValues->front());
  if (depth < 1)
    return n.fail("depth " + Twine(depth) + " must be at least 1");
  RankedTensorType valuesType = n.inputType(2);
  if (valuesType.getNumElements() != 2)
    return n.fail("values must hold two elements (off, on), got " +
                  Twine(valuesType.getNumElements()));
  RankedTensorType indicesType = n.inputType(0);
  int64_t rank = indicesType.getRank() + 1;
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();

  Composer c(n);
  Type i64 = n.builder().getI64Type();
  Value index = c.cast(n.input(0), i64);
  Value negative = c.make<LessOp>({index, c.scalar(i64, 0)});
  Value wrapped = c.make<AddOp>({index, c.scalar(i64, depth)});
  index = c.make<SelectOp>({negative, wrapped, index});
  SmallVector<int64_t> unitShape(indicesType.getShape());
  unitShape.insert(unitShape.begin() + *axis, 1);
  Value hit = c.make<EqualOp>(
      {c.reshape(index, unitShape), c.iotaAlong(depth, *axis, rank, i64)});
  Value values = c.reshape(n.input(2), {2});
  Value off = c.reshape(c.sliceAxis(values, 0, 0, 1), {});
  Value on = c.reshape(c.sliceAxis(values, 0, 1, 2), {});
  return bindComposed(c, c.make<SelectOp>({hit, on, off}));
}

LogicalResult importGatherND(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  int64_t batchDims = n.opset() >= 12 ? n.intAttr("batch_dims", 0) : 0;
  return bind(n, n.make<GatherNdOp>({n.input(0), n.input(1)},
                                    {n.namedI64("batch_dims", batchDims)}));
}

LogicalResult importScatterND(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  SmallVector<StringRef> reductions = {"none"};
  if (n.opset() >= 16)
    reductions.append({"add", "mul"});
  if (n.opset() >= 18)
    reductions.append({"max", "min"});
  if (failed(n.requireStringAttrIn("reduction", "none", reductions)))
    return failure();
  std::string name = n.stringAttr("reduction", "none");
  ScatterReduction reduction =
      llvm::StringSwitch<ScatterReduction>(name)
          .Case("add", ScatterReduction::Add)
          .Case("mul", ScatterReduction::Mul)
          .Case("max", ScatterReduction::Max)
          .Case("min", ScatterReduction::Min)
          .Default(ScatterReduction::None);
  return bind(n, n.make<ScatterNdOp>(
                     {n.input(0), n.input(1), n.input(2)},
                     {n.named("reduction", ScatterReductionAttr::get(
                                               n.context(), reduction))}));
}

/// Crops or pads each named axis to `shape`, centred: a slice where the
/// input is longer (the extra element cut at the end), a zero pad where it
/// is shorter (the extra element added at the end).
LogicalResult importCenterCropPad(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  SmallVector<int64_t> axes;
  if (n.hasAttr("axes")) {
    for (int64_t axis : n.intsAttr("axes")) {
      FailureOr<int64_t> d = normalizeAxisOrFail(n, axis, rank, "axes entry");
      if (failed(d))
        return failure();
      axes.push_back(*d);
    }
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  // A shape given at run time: the declared output's extents along the
  // axes, guarded.
  FailureOr<SmallVector<int64_t>> shape = n.constantOrDeclaredInts(
      1, "shape",
      [&](ArrayRef<int64_t> declared) -> std::optional<SmallVector<int64_t>> {
        if (static_cast<int64_t>(declared.size()) != rank)
          return std::nullopt;
        SmallVector<int64_t> fixed;
        for (int64_t d : axes)
          fixed.push_back(declared[d]);
        return fixed;
      });
  if (failed(shape))
    return failure();
  if (axes.size() != shape->size())
    return n.fail("shape has " + Twine(shape->size()) + " entries for " +
                  Twine(axes.size()) + " axes");
  SmallVector<int64_t> starts(rank, 0), limits(type.getShape()),
      low(rank, 0), high(rank, 0);
  for (auto [axis, target] : llvm::zip(axes, *shape)) {
    int64_t have = type.getDimSize(axis);
    if (target < 0)
      return n.fail("shape " + formatInts(*shape) + " has a negative entry");
    if (have > target) {
      starts[axis] = (have - target) / 2;
      limits[axis] = starts[axis] + target;
    } else {
      low[axis] = (target - have) / 2;
      high[axis] = target - have - low[axis];
    }
  }
  Composer c(n);
  Value cropped = c.slice(n.input(0), starts, limits);
  if (llvm::any_of(low, [](int64_t v) { return v; }) ||
      llvm::any_of(high, [](int64_t v) { return v; }))
    cropped = c.make<PadOp>(
        cropped,
        {n.named("mode", PadModeAttr::get(n.context(), PadMode::Constant)),
         n.namedArray("low", low), n.namedArray("high", high)});
  return bindComposed(c, cropped);
}

/// y[b, t] = x[b, len[b] - 1 - t] for t < len[b], else x[b, t] (batch and
/// time axes as given): a gather_elements along the time axis whose indices
/// are computed from an iota and the (run-time) lengths.
LogicalResult importReverseSequence(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  int64_t batchAxis = n.intAttr("batch_axis", 1);
  int64_t timeAxis = n.intAttr("time_axis", 0);
  if (rank < 2 || !((batchAxis == 0 && timeAxis == 1) ||
                    (batchAxis == 1 && timeAxis == 0)))
    return n.fail("expects rank >= 2 and batch/time axes 0 and 1, got rank " +
                  Twine(rank) + ", batch_axis " + Twine(batchAxis) +
                  ", time_axis " + Twine(timeAxis));
  if (n.inputType(1).getRank() != 1 ||
      n.inputType(1).getDimSize(0) != type.getDimSize(batchAxis))
    return n.fail("sequence_lens must have one entry per batch element");
  Composer c(n);
  Type i64 = n.builder().getI64Type();
  Value time = c.iotaAlong(type.getDimSize(timeAxis), timeAxis, rank, i64);
  SmallVector<int64_t> lenShape(rank, 1);
  lenShape[batchAxis] = type.getDimSize(batchAxis);
  Value lens = c.reshape(c.cast(n.input(1), i64), lenShape);
  Value inside = c.make<LessOp>({time, lens});
  Value reversed = c.make<SubOp>(
      {c.make<SubOp>({lens, c.scalar(i64, 1)}), time});
  Value index = c.broadcast(c.make<SelectOp>({inside, reversed, time}),
                            type.getShape());
  return bindComposed(c, c.make<GatherElementsOp>(
                             {n.input(0), index},
                             {n.namedI64("axis", timeAxis)}));
}

/// Scatters each value to its flat index (MaxPool's Indices) in a zero
/// tensor of the shape the pooling window attributes invert to; a larger
/// output_shape pads that result with zeros at the end of each dimension
/// (the indices stay relative to the inverted shape, as in ONNX's reference
/// and onnxruntime).
LogicalResult importMaxUnpool(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t spatial = type.getRank() - 2;
  if (spatial < 1)
    return n.fail("expects an input [N, C, spatial...]");
  FailureOr<WindowAttrs> w = readWindowAttrs(n, spatial);
  if (failed(w))
    return failure();
  SmallVector<int64_t> inferred{type.getDimSize(0), type.getDimSize(1)};
  for (int64_t i = 0; i < spatial; ++i)
    inferred.push_back((type.getDimSize(2 + i) - 1) * w->strides[i] +
                       w->kernel[i] - w->padding[i] -
                       w->padding[spatial + i]);
  SmallVector<int64_t> outShape = inferred;
  if (n.hasInput(2)) {
    // An output shape given at run time: the declared one, guarded.
    FailureOr<SmallVector<int64_t>> given = n.constantOrDeclaredInts(
        2, "output_shape", [](ArrayRef<int64_t> declared) {
          return std::optional(SmallVector<int64_t>(declared));
        });
    if (failed(given))
      return failure();
    outShape = *given;
    if (static_cast<int64_t>(outShape.size()) != type.getRank())
      return n.fail("output_shape " + formatInts(outShape) + " must have " +
                    Twine(type.getRank()) + " entries");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (outShape[d] < inferred[d])
        return n.fail("output_shape " + formatInts(outShape) +
                      " is smaller than the unpooled shape " +
                      formatInts(inferred));
  }
  if (n.inputType(1).getShape() != type.getShape())
    return n.fail("indices must have the input's shape");
  Composer c(n);
  Type element = type.getElementType();
  int64_t total = Composer::product(inferred);
  int64_t count = type.getNumElements();
  Value zeros = c.constant(RankedTensorType::get({total}, element), {0.0});
  Value scattered = c.make<ScatterElementsOp>(
      {zeros, c.reshape(n.input(1), {count}), c.reshape(n.input(0), {count})},
      {n.namedI64("axis", 0)});
  Value result = c.reshape(scattered, inferred);
  SmallVector<int64_t> current = inferred;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (outShape[d] == current[d])
      continue;
    SmallVector<int64_t> padShape = current;
    padShape[d] = outShape[d] - current[d];
    Value pad = c.constant(RankedTensorType::get(padShape, element), {0.0});
    result = c.concat({result, pad}, d);
    current[d] = outShape[d];
  }
  return bindComposed(c, result);
}

/// The shapes of Compress, NonZero and Unique depend on data. With that
/// data known at compile time Compress and NonZero fold; otherwise an
/// inference compile has made the node a host step (HostPartition.cpp)
/// before it gets here, and a training compile refuses it.
LogicalResult refuseDataDependent(NodeImporter &n, StringRef what) {
  return n.fail("the output shape depends on " + what +
                ", which is only known at run time (an inference compile "
                "runs such a node as a host step; a training compile needs " +
                what + " to be a compile-time constant)");
}

/// Compress with a constant condition is a gather of the kept positions.
LogicalResult importCompress(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  std::optional<DenseElementsAttr> condition = n.constantInput(1);
  if (!condition)
    return refuseDataDependent(n, "input 'condition'");
  SmallVector<double> kept;
  int64_t position = 0;
  for (APInt v : condition->getValues<APInt>()) {
    if (!v.isZero())
      kept.push_back(static_cast<double>(position));
    ++position;
  }
  Composer c(n);
  Value input = n.input(0);
  int64_t axis = 0;
  if (n.hasAttr("axis")) {
    FailureOr<int64_t> d =
        normalizeAxisOrFail(n, n.intAttr("axis", 0), n.inputType(0).getRank());
    if (failed(d))
      return failure();
    axis = *d;
  } else {
    input = c.reshape(input, {n.inputType(0).getNumElements()});
  }
  int64_t extent = typeOf(input).getDimSize(axis);
  if (!kept.empty() && kept.back() >= extent)
    return n.fail("condition keeps position " +
                  Twine(static_cast<int64_t>(kept.back())) +
                  ", past the axis extent " + Twine(extent));
  auto indexType = RankedTensorType::get({static_cast<int64_t>(kept.size())},
                                         n.builder().getI64Type());
  if (kept.empty())
    return bindComposed(c, c.sliceAxis(input, axis, 0, 0));
  return bindComposed(c, c.make<GatherOp>({input, c.constant(indexType, kept)},
                                          {n.namedI64("axis", axis)}));
}

/// NonZero of a constant folds to the constant [rank, count] coordinates.
LogicalResult importNonZero(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  std::optional<DenseElementsAttr> input = n.constantInput(0);
  if (!input)
    return refuseDataDependent(n, "the input's values");
  RankedTensorType type = n.inputType(0);
  SmallVector<int64_t> hits;
  int64_t linear = 0;
  bool isFloat = isa<FloatType>(type.getElementType());
  for (Attribute v : input->getValues<Attribute>()) {
    bool nonZero = isFloat ? !cast<FloatAttr>(v).getValue().isZero()
                           : !cast<IntegerAttr>(v).getValue().isZero();
    if (nonZero)
      hits.push_back(linear);
    ++linear;
  }
  int64_t rank = type.getRank(), count = hits.size();
  SmallVector<double> coords(rank * count);
  for (auto [j, flat] : llvm::enumerate(hits)) {
    int64_t rest = flat;
    for (int64_t d = rank - 1; d >= 0; --d) {
      coords[d * count + j] = static_cast<double>(rest % type.getDimSize(d));
      rest /= type.getDimSize(d);
    }
  }
  Composer c(n);
  auto resultType =
      RankedTensorType::get({rank, count}, n.builder().getI64Type());
  if (coords.empty())
    return n.setResult(n.constant(DenseElementsAttr::get(
        resultType, ArrayRef<int64_t>{})));
  return bindComposed(c, c.constant(resultType, coords));
}

LogicalResult importUnique(NodeImporter &n) {
  return n.fail("the output shape depends on the input's values at run time "
                "(an inference compile runs Unique as a host step; a "
                "training compile does not take it)");
}

} // namespace

void registerIndexingHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"EyeLike", 9, importEyeLike, ""},
      {"OneHot", 9, importOneHot, "depth: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"OneHot", 11, importOneHot, "depth: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"GatherND", 11, importGatherND, ""},
      {"GatherND", 12, importGatherND, ""},
      {"GatherND", 13, importGatherND, ""},
      {"ScatterND", 11, importScatterND, ""},
      {"ScatterND", 16, importScatterND, ""},
      {"ScatterND", 18, importScatterND, ""},
      {"CenterCropPad", 18, importCenterCropPad,
       "shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"ReverseSequence", 10, importReverseSequence, ""},
      {"MaxUnpool", 9, importMaxUnpool,
       "output_shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"MaxUnpool", 11, importMaxUnpool,
       "output_shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Compress", 9, importCompress,
       "a constant condition is a gather; otherwise a host step "
       "(inference only)"},
      {"Compress", 11, importCompress,
       "a constant condition is a gather; otherwise a host step "
       "(inference only)"},
      {"NonZero", 9, importNonZero,
       "a constant input folds; otherwise a host step (inference only)"},
      {"NonZero", 13, importNonZero,
       "a constant input folds; otherwise a host step (inference only)"},
      {"Unique", 11, importUnique, "a host step (inference only)"},
  });
}

} // namespace kiln::onnx_frontend

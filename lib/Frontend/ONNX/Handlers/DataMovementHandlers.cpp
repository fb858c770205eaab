//===- DataMovementHandlers.cpp - ONNX shape and data movement ops
//---------===//
//
// Reshape and its relatives (Flatten, Squeeze, Unsqueeze), Transpose, Concat,
// Slice, Gather/Scatter, Pad, Expand, Split, Tile, Resize/Upsample and
// DepthToSpace/SpaceToDepth. ONNX passes most of their shape parameters as
// tensors; here they must fold to compile-time constants, and every ONNX
// normalisation (negative axes, clamped slice bounds, 0 and -1 in Reshape)
// happens in this file so that the kiln ops only see canonical values.
//
//===----------------------------------------------------------------------===//

#include "../NodeImporter.h"
#include "Composer.h"
#include "RuntimeWindows.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The type of input `i` when its shape is static; shape rules below do
/// arithmetic on dimensions, which a dynamic one would poison.
FailureOr<RankedTensorType> staticInputType(NodeImporter &n, size_t i) {
  RankedTensorType type = n.inputType(i);
  if (!type.hasStaticShape())
    return n.fail(Twine("input ") + Twine(i) + " must have a static shape");
  return type;
}

FailureOr<Value> reshapeTo(NodeImporter &n, Value v, ArrayRef<int64_t> shape) {
  return n.makeTyped<ReshapeOp>(
      RankedTensorType::get(shape, typeOf(v).getElementType()), v);
}

std::string formatInts(ArrayRef<int64_t> values) {
  return "[" +
         llvm::join(llvm::map_range(
                        values, [](int64_t v) { return std::to_string(v); }),
                    ", ") +
         "]";
}

/// Normalises a list of axes for `rank`, refusing out-of-range and repeated
/// ones.
FailureOr<SmallVector<int64_t>> normalizeAxesOrFail(NodeImporter &n,
                                                    ArrayRef<int64_t> axes,
                                                    int64_t rank,
                                                    StringRef what = "axis") {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    FailureOr<int64_t> d = normalizeAxisOrFail(n, axis, rank, what);
    if (failed(d))
      return failure();
    if (llvm::is_contained(result, *d))
      return n.fail(Twine(what) + " " + Twine(axis) + " is repeated");
    result.push_back(*d);
  }
  return result;
}

/// Axes given by attribute `axes` before opset `inputSince` and by input
/// `index` from it on; nullopt when the node gives none.
FailureOr<std::optional<SmallVector<int64_t>>>
readAxes(NodeImporter &n, int64_t inputSince, size_t index) {
  if (n.opset() < inputSince) {
    if (!n.hasAttr("axes"))
      return std::optional<SmallVector<int64_t>>();
    return std::optional<SmallVector<int64_t>>(n.intsAttr("axes"));
  }
  if (!n.hasInput(index))
    return std::optional<SmallVector<int64_t>>();
  FailureOr<SmallVector<int64_t>> axes = n.constantInts(index, "axes");
  if (failed(axes))
    return failure();
  return std::optional<SmallVector<int64_t>>(std::move(*axes));
}

/// Checks constant indices of input `i` against `extent` (negative ones
/// count from the end) and, with `makeNonNegative`, rewrites them into
/// [0, extent). Runtime indices pass through unchanged.
FailureOr<Value> checkIndices(NodeImporter &n, size_t i, int64_t extent,
                              bool makeNonNegative) {
  Type elementType = n.inputType(i).getElementType();
  if (!elementType.isSignlessInteger(32) &&
      !elementType.isSignlessInteger(64)) {
    std::string typeText;
    llvm::raw_string_ostream os(typeText);
    os << elementType;
    return n.fail("indices '" + n.node().input(i) +
                  "' must be int32 or int64, not " + typeText);
  }
  std::optional<DenseElementsAttr> indices = n.constantInput(i);
  if (!indices)
    return n.input(i);
  SmallVector<APInt> normalized;
  bool changed = false;
  for (const APInt &v : indices->getValues<APInt>()) {
    int64_t index = v.getSExtValue();
    if (index < -extent || index >= extent)
      return n.fail("index " + Twine(index) +
                    " is out of range for an axis of size " + Twine(extent));
    changed |= index < 0;
    normalized.push_back(APInt(v.getBitWidth(),
                               index < 0 ? index + extent : index,
                               /*isSigned=*/true));
  }
  if (!makeNonNegative || !changed)
    return n.input(i);
  return n.constant(DenseElementsAttr::get(indices->getType(), normalized));
}

/// The value of a scalar constant input as a double (bools as 0 or 1).
FailureOr<double> constantScalar(NodeImporter &n, size_t i, StringRef what) {
  std::optional<DenseElementsAttr> value = n.constantInput(i);
  if (!value)
    return n.fail(Twine("input '") + what +
                  "' must be a compile-time constant");
  if (value->getNumElements() != 1)
    return n.fail(Twine("input '") + what + "' must hold a single value");
  if (isa<FloatType>(value->getElementType()))
    return (*value->getValues<APFloat>().begin()).convertToDouble();
  APInt v = *value->getValues<APInt>().begin();
  bool isUnsigned =
      value->getElementType().isUnsignedInteger() || v.getBitWidth() == 1;
  return isUnsigned ? static_cast<double>(v.getZExtValue())
                    : static_cast<double>(v.getSExtValue());
}

/// Whether `small` is `large` with some size-1 dims left out (Squeeze's
/// input and output, or Unsqueeze's output and input).
bool dropsOnlyOnes(ArrayRef<int64_t> large, ArrayRef<int64_t> small) {
  if (small.size() > large.size())
    return false;
  size_t j = 0;
  for (int64_t dim : large) {
    if (j < small.size() && small[j] == dim)
      ++j;
    else if (dim != 1)
      return false;
  }
  return j == small.size();
}

int64_t elementsOf(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

//===----------------------------------------------------------------------===//
// Reshape, Flatten, Squeeze, Unsqueeze
//===----------------------------------------------------------------------===//

/// Reshape-5 copies the input dimension for a 0 entry; Reshape-14 does so
/// only without allowzero. At most one -1 entry is inferred.
LogicalResult importReshape(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  bool allowZero = n.opset() >= 14 && n.intAttr("allowzero", 0) != 0;
  // A shape given at run time: the declared result, guarded.
  if (std::optional<SmallVector<int64_t>> declared = n.guardedOutputShape(
          1, "shape", "reshape",
          [&](ArrayRef<int64_t> shape) {
            return elementsOf(shape) == elementsOf(inType->getShape()) &&
                   (allowZero || !llvm::is_contained(shape, 0));
          },
          {{"allowzero", {allowZero ? 1 : 0}}}))
    return bind(n, reshapeTo(n, n.input(0), *declared));
  FailureOr<SmallVector<int64_t>> requested = n.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  SmallVector<int64_t> shape;
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (auto [i, entry] : llvm::enumerate(*requested)) {
    int64_t dim = entry;
    if (dim == -1) {
      if (inferred)
        return n.fail("shape " + formatInts(*requested) +
                      " has more than one -1");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (dim < -1)
      return n.fail("shape " + formatInts(*requested) +
                    " has a negative dimension");
    if (dim == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= inType->getRank())
        return n.fail("shape " + formatInts(*requested) + " copies dimension " +
                      Twine(i) + " (a 0 entry), but the input has rank " +
                      Twine(inType->getRank()));
      dim = inType->getDimSize(i);
    }
    shape.push_back(dim);
    if (llvm::MulOverflow(known, dim, known))
      return n.fail("shape " + formatInts(*requested) + " overflows int64");
  }
  int64_t elements = inType->getNumElements();
  if (inferred) {
    if (known == 0 || elements % known != 0)
      return n.fail("cannot infer the -1 in shape " + formatInts(*requested) +
                    " for " + Twine(elements) + " elements");
    shape[*inferred] = elements / known;
  } else if (known != elements) {
    return n.fail("shape " + formatInts(*requested) + " holds " + Twine(known) +
                  " elements, the input " + Twine(elements));
  }
  return bind(n, reshapeTo(n, n.input(0), shape));
}

/// Flatten to 2-D: the dimensions before `axis` and those from it on.
LogicalResult importFlatten(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  int64_t rank = inType->getRank();
  int64_t axis = n.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return n.fail("axis " + Twine(axis) + " is out of range for rank " +
                  Twine(rank));
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) *= inType->getDimSize(d);
  return bind(n, reshapeTo(n, n.input(0), {outer, inner}));
}

/// Whether the model has symbolic dims with ranges (kilnc --dim): only then
/// does the separable-dims analysis read the importer's notes
/// (`kiln.slice_from_end`, `kiln.squeeze_all`).
bool hasDimRanges(NodeImporter &n) {
  Operation *parent = n.builder().getInsertionBlock()->getParentOp();
  auto module = parent ? parent->getParentOfType<ModuleOp>() : ModuleOp();
  return module &&
         module->hasAttr(KilnDialect::DimRangesAttrHelper::getNameStr());
}

/// Squeeze drops the listed size-1 dimensions, or every one without axes.
LogicalResult importSqueeze(NodeImporter &n) {
  if (failed(n.checkArity(1, n.opset() < 13 ? 1 : 2)))
    return failure();
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  // Axes given at run time: the declared result, guarded.
  if (std::optional<SmallVector<int64_t>> declared = n.guardedOutputShape(
          1, "axes", "squeeze", [&](ArrayRef<int64_t> shape) {
            return dropsOnlyOnes(inType->getShape(), shape);
          }))
    return bind(n, reshapeTo(n, n.input(0), *declared));
  FailureOr<std::optional<SmallVector<int64_t>>> axes = readAxes(n, 13, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> inShape = inType->getShape();
  SmallVector<int64_t> dropped;
  if (*axes && !(*axes)->empty()) {
    FailureOr<SmallVector<int64_t>> normalized =
        normalizeAxesOrFail(n, **axes, inType->getRank());
    if (failed(normalized))
      return failure();
    for (int64_t d : *normalized)
      if (inShape[d] != 1)
        return n.fail("cannot squeeze dimension " + Twine(d) + " of size " +
                      Twine(inShape[d]));
    dropped = *normalized;
  } else {
    for (auto [d, size] : llvm::enumerate(inShape))
      if (size == 1)
        dropped.push_back(d);
  }
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(inShape))
    if (!llvm::is_contained(dropped, static_cast<int64_t>(d)))
      shape.push_back(size);
  FailureOr<Value> reshaped = reshapeTo(n, n.input(0), shape);
  // Without axes the dims dropped are the ones of size 1, which for a
  // symbolic dim of minimum 1 depends on the run (kilnc --dim).
  if (succeeded(reshaped) && (!*axes || (*axes)->empty()) && hasDimRanges(n))
    if (Operation *op = reshaped->getDefiningOp())
      KilnDialect::SqueezeAllAttrHelper(op->getContext())
          .setAttr(op, UnitAttr::get(op->getContext()));
  return bind(n, reshaped);
}

/// Unsqueeze inserts size-1 dimensions at `axes`, which index the result.
LogicalResult importUnsqueeze(NodeImporter &n) {
  if (failed(n.checkArity(1, n.opset() < 13 ? 1 : 2)))
    return failure();
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  // Axes given at run time: the declared result, guarded.
  if (std::optional<SmallVector<int64_t>> declared = n.guardedOutputShape(
          1, "axes", "unsqueeze", [&](ArrayRef<int64_t> shape) {
            return shape.size() > static_cast<size_t>(inType->getRank()) &&
                   dropsOnlyOnes(shape, inType->getShape());
          }))
    return bind(n, reshapeTo(n, n.input(0), *declared));
  FailureOr<std::optional<SmallVector<int64_t>>> axes = readAxes(n, 13, 1);
  if (failed(axes))
    return failure();
  if (!*axes || (*axes)->empty())
    return n.fail("requires non-empty axes");
  int64_t outRank = inType->getRank() + static_cast<int64_t>((*axes)->size());
  FailureOr<SmallVector<int64_t>> inserted =
      normalizeAxesOrFail(n, **axes, outRank);
  if (failed(inserted))
    return failure();
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> rest = inType->getShape();
  for (int64_t d = 0; d < outRank; ++d) {
    if (llvm::is_contained(*inserted, d)) {
      shape.push_back(1);
    } else {
      shape.push_back(rest.front());
      rest = rest.drop_front();
    }
  }
  return bind(n, reshapeTo(n, n.input(0), shape));
}

//===----------------------------------------------------------------------===//
// Transpose, Concat, Slice
//===----------------------------------------------------------------------===//

LogicalResult importTranspose(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  SmallVector<int64_t> perm = n.intsAttr("perm");
  if (!n.hasAttr("perm"))
    perm = llvm::to_vector(
        llvm::reverse(llvm::seq<int64_t>(0, n.inputType(0).getRank())));
  return bind(
      n, n.make<TransposeOp>(n.input(0), {n.namedArray("permutation", perm)}));
}

LogicalResult importConcat(NodeImporter &n) {
  SmallVector<Value> inputs;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) + " is omitted");
    inputs.push_back(n.input(i));
  }
  if (inputs.empty())
    return n.fail("expects at least one input");
  if (!n.hasAttr("axis"))
    return n.fail("requires the 'axis' attribute");
  FailureOr<int64_t> axis = normalizeAxisOrFail(
      n, n.intAttr("axis", 0), typeOf(inputs.front()).getRank());
  if (failed(axis))
    return failure();
  return bind(n, n.make<ConcatOp>(inputs, {n.namedI64("axis", *axis)}));
}

/// Slice-1 reads starts, ends and axes from attributes; Slice-10 reads them
/// and steps from inputs. Bounds are clamped as ONNX does (so INT64_MAX and
/// INT_MIN mean "to the end" and "past the front"), then written out for
/// every dimension as kiln.slice expects.
LogicalResult importSlice(NodeImporter &n) {
  SmallVector<int64_t> starts, ends, steps;
  std::optional<SmallVector<int64_t>> axes;
  if (n.opset() < 10) {
    if (failed(n.checkArity(1, 1)))
      return failure();
    if (!n.hasAttr("starts") || !n.hasAttr("ends"))
      return n.fail("requires the 'starts' and 'ends' attributes");
    starts = n.intsAttr("starts");
    ends = n.intsAttr("ends");
    if (n.hasAttr("axes"))
      axes = n.intsAttr("axes");
  } else {
    if (failed(n.checkArity(3, 5)))
      return failure();
    // Values given at run time: an index vector per dimension, guarded.
    if (std::optional<LogicalResult> runtime = importRuntimeSlice(n))
      return *runtime;
    FailureOr<SmallVector<int64_t>> s = n.constantInts(1, "starts");
    if (failed(s))
      return failure();
    FailureOr<SmallVector<int64_t>> e = n.constantInts(2, "ends");
    if (failed(e))
      return failure();
    starts = std::move(*s);
    ends = std::move(*e);
    if (n.hasInput(3)) {
      FailureOr<SmallVector<int64_t>> a = n.constantInts(3, "axes");
      if (failed(a))
        return failure();
      axes = std::move(*a);
    }
    if (n.hasInput(4)) {
      FailureOr<SmallVector<int64_t>> st = n.constantInts(4, "steps");
      if (failed(st))
        return failure();
      steps = std::move(*st);
    }
  }
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  int64_t rank = inType->getRank();
  if (!axes)
    axes = llvm::to_vector(
        llvm::seq<int64_t>(0, static_cast<int64_t>(starts.size())));
  if (steps.empty() && !n.hasInput(4))
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes->size() != starts.size() ||
      steps.size() != starts.size())
    return n.fail("starts, ends, axes and steps differ in length (" +
                  Twine(starts.size()) + ", " + Twine(ends.size()) + ", " +
                  Twine(axes->size()) + ", " + Twine(steps.size()) + ")");
  FailureOr<SmallVector<int64_t>> dims = normalizeAxesOrFail(n, *axes, rank);
  if (failed(dims))
    return failure();

  SmallVector<int64_t> outStarts(rank, 0), limits(inType->getShape()),
      outSteps(rank, 1), fromEnd;
  for (auto [i, d] : llvm::enumerate(*dims)) {
    int64_t size = inType->getDimSize(d), step = steps[i];
    if (step == 0)
      return n.fail("step of axis " + Twine((*axes)[i]) + " is zero");
    // A bound counted from the end depends on the dim's size: at another
    // size of a symbolic dim (kilnc --dim) it is another row.
    if (starts[i] < 0 || ends[i] < 0)
      fromEnd.push_back(d);
    // Add the size only to negative bounds: INT64_MAX must not overflow.
    int64_t start = starts[i] < 0 ? starts[i] + size : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + size : ends[i];
    if (size == 0) {
      start = end = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, 0, size);
    } else {
      start = std::clamp<int64_t>(start, 0, size - 1);
      end = std::clamp<int64_t>(end, -1, size - 1);
    }
    outStarts[d] = start;
    limits[d] = end;
    outSteps[d] = step;
  }
  FailureOr<Value> slice =
      n.make<SliceOp>(n.input(0), {n.namedArray("starts", outStarts),
                                   n.namedArray("limits", limits),
                                   n.namedArray("steps", outSteps)});
  if (succeeded(slice) && !fromEnd.empty() && hasDimRanges(n))
    if (Operation *op = slice->getDefiningOp())
      KilnDialect::SliceFromEndAttrHelper(op->getContext())
          .setAttr(op, DenseI64ArrayAttr::get(op->getContext(), fromEnd));
  return bind(n, slice);
}

//===----------------------------------------------------------------------===//
// Gather, GatherElements, ScatterElements, Scatter
//===----------------------------------------------------------------------===//

/// kiln.gather takes negative indices as ONNX does; constant indices are
/// only range-checked.
LogicalResult importGather(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  RankedTensorType inType = n.inputType(0);
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), inType.getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> indices =
      checkIndices(n, 1, inType.getDimSize(*axis), false);
  if (failed(indices))
    return failure();
  return bind(
      n, n.make<GatherOp>({n.input(0), *indices}, {n.namedI64("axis", *axis)}));
}

LogicalResult importGatherElements(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  RankedTensorType inType = n.inputType(0);
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), inType.getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> indices = checkIndices(n, 1, inType.getDimSize(*axis), true);
  if (failed(indices))
    return failure();
  return bind(n, n.make<GatherElementsOp>({n.input(0), *indices},
                                          {n.namedI64("axis", *axis)}));
}

/// ScatterElements-11 (and the older Scatter-9) only overwrite;
/// ScatterElements-16 adds add/mul reductions and -18 max/min.
LogicalResult importScatterElements(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  SmallVector<StringRef> reductions = {"none"};
  if (n.node().op_type() == "ScatterElements" && n.opset() >= 16)
    reductions.append({"add", "mul"});
  if (n.node().op_type() == "ScatterElements" && n.opset() >= 18)
    reductions.append({"max", "min"});
  if (failed(n.requireStringAttrIn("reduction", "none", reductions)))
    return failure();
  ScatterReduction reduction =
      *symbolizeScatterReduction(n.stringAttr("reduction", "none"));
  RankedTensorType inType = n.inputType(0);
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), inType.getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> indices = checkIndices(n, 1, inType.getDimSize(*axis), true);
  if (failed(indices))
    return failure();
  return bind(n, n.make<ScatterElementsOp>(
                     {n.input(0), *indices, n.input(2)},
                     {n.namedI64("axis", *axis),
                      n.named("reduction", ScatterReductionAttr::get(
                                               n.context(), reduction))}));
}

//===----------------------------------------------------------------------===//
// Pad, Expand, Split, Tile
//===----------------------------------------------------------------------===//

/// Pad-2 takes pads and value as attributes, Pad-11 as inputs, Pad-18 adds
/// axes. Negative pads crop: the input is sliced first, then padded by the
/// positive amounts.
LogicalResult importPad(NodeImporter &n) {
  std::string modeName = n.stringAttr("mode", "constant");
  // Pad-19's wrap is a gather per padded axis (below), not a kiln.pad mode.
  bool wrap = n.opset() >= 19 && modeName == "wrap";
  if (!wrap && failed(n.requireStringAttrIn("mode", "constant",
                                            {"constant", "reflect", "edge"})))
    return failure();
  PadMode mode = wrap ? PadMode::Constant : *symbolizePadMode(modeName);

  SmallVector<int64_t> pads;
  std::optional<SmallVector<int64_t>> axes;
  double value = 0.0;
  if (n.opset() < 11) {
    if (failed(n.checkArity(1, 1)))
      return failure();
    if (!n.hasAttr("pads"))
      return n.fail("requires the 'pads' attribute");
    pads = n.intsAttr("pads");
    value = n.floatAttr("value", 0.0f);
  } else {
    if (failed(n.checkArity(2, n.opset() < 18 ? 3 : 4)))
      return failure();
    // Values given at run time: an index vector per dimension, guarded.
    if (std::optional<LogicalResult> runtime =
            importRuntimePad(n, wrap ? "wrap" : modeName))
      return *runtime;
    FailureOr<SmallVector<int64_t>> p = n.constantInts(1, "pads");
    if (failed(p))
      return failure();
    pads = std::move(*p);
    if (n.hasInput(2)) {
      FailureOr<double> v = constantScalar(n, 2, "constant_value");
      if (failed(v))
        return failure();
      value = *v;
    }
    if (n.hasInput(3)) {
      FailureOr<SmallVector<int64_t>> a = n.constantInts(3, "axes");
      if (failed(a))
        return failure();
      axes = std::move(*a);
    }
  }

  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  int64_t rank = inType->getRank();
  if (!axes)
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  FailureOr<SmallVector<int64_t>> dims = normalizeAxesOrFail(n, *axes, rank);
  if (failed(dims))
    return failure();
  size_t numAxes = dims->size();
  if (pads.size() != 2 * numAxes)
    return n.fail("expects " + Twine(2 * numAxes) + " pads, got " +
                  Twine(pads.size()));

  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  SmallVector<int64_t> starts(rank, 0), limits(inType->getShape()),
      steps(rank, 1);
  bool crops = false;
  for (auto [i, d] : llvm::enumerate(*dims)) {
    int64_t before = pads[i], after = pads[i + numAxes];
    low[d] = std::max<int64_t>(before, 0);
    high[d] = std::max<int64_t>(after, 0);
    starts[d] = std::max<int64_t>(-before, 0);
    limits[d] -= std::max<int64_t>(-after, 0);
    crops |= before < 0 || after < 0;
    if (limits[d] < starts[d])
      return n.fail("negative pads " + Twine(before) + " and " + Twine(after) +
                    " remove more than the " + Twine(inType->getDimSize(d)) +
                    " elements of dimension " + Twine(d));
  }
  Value input = n.input(0);
  if (crops) {
    // An empty crop gives starts at the end, which kiln.slice accepts only
    // for an empty result: keep them in range.
    for (int64_t d = 0; d < rank; ++d)
      if (starts[d] == limits[d])
        starts[d] = limits[d] = 0;
    FailureOr<Value> cropped = n.make<SliceOp>(
        input, {n.namedArray("starts", starts), n.namedArray("limits", limits),
                n.namedArray("steps", steps)});
    if (failed(cropped))
      return failure();
    input = *cropped;
  }
  if (wrap) {
    // out[j] = in[(j - low) mod extent] along each padded axis: exact, and
    // any pad size (a pad longer than the axis wraps more than once).
    for (int64_t d = 0; d < rank; ++d) {
      if (low[d] == 0 && high[d] == 0)
        continue;
      int64_t extent = typeOf(input).getDimSize(d);
      if (extent == 0)
        return n.fail("mode 'wrap' cannot pad dimension " + Twine(d) +
                      ", which is empty");
      SmallVector<int64_t> index;
      for (int64_t j = 0, e = low[d] + extent + high[d]; j < e; ++j)
        index.push_back((((j - low[d]) % extent) + extent) % extent);
      Value indices = n.constant(DenseElementsAttr::get(
          RankedTensorType::get({static_cast<int64_t>(index.size())},
                                n.builder().getI64Type()),
          ArrayRef<int64_t>(index)));
      FailureOr<Value> gathered =
          n.make<GatherOp>({input, indices}, {n.namedI64("axis", d)});
      if (failed(gathered))
        return failure();
      input = *gathered;
    }
    return n.setResult(input);
  }
  return bind(
      n, n.make<PadOp>(input,
                       {n.named("mode", PadModeAttr::get(n.context(), mode)),
                        n.namedArray("low", low), n.namedArray("high", high),
                        n.namedF64("value", value)}));
}

/// Expand broadcasts the input and the requested shape against each other
/// (numpy rules): a 1 in the shape keeps the input's extent.
LogicalResult importExpand(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  RankedTensorType inType = n.inputType(0);
  // A shape given at run time: the declared result, guarded.
  if (std::optional<SmallVector<int64_t>> declared = n.guardedOutputShape(
          1, "shape", "expand", [&](ArrayRef<int64_t> shape) {
            std::optional<SmallVector<int64_t>> out =
                broadcastShapes(inType.getShape(), shape);
            return out && ArrayRef<int64_t>(*out) == shape;
          }))
    return bind(n, n.makeTyped<BroadcastOp>(
                       RankedTensorType::get(*declared,
                                             inType.getElementType()),
                       n.input(0)));
  FailureOr<SmallVector<int64_t>> requested = n.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  if (llvm::any_of(*requested, [](int64_t d) { return d < 0; }))
    return n.fail("shape " + formatInts(*requested) +
                  " has a negative dimension");
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(inType.getShape(), *requested);
  if (!shape)
    return n.fail("cannot expand shape " + formatInts(inType.getShape()) +
                  " to " + formatInts(*requested));
  return bind(n, n.makeTyped<BroadcastOp>(
                     RankedTensorType::get(*shape, inType.getElementType()),
                     n.input(0)));
}

/// The sizes along `axis` of a Split's outputs, when the model declares a
/// static shape for each.
bool splitSizesDeclared(NodeImporter &n, int64_t axis,
                        SmallVectorImpl<int64_t> &sizes) {
  sizes.clear();
  for (int i = 0; i < n.node().output_size(); ++i) {
    std::optional<SmallVector<int64_t>> shape = n.declaredOutputShape(i);
    if (!shape || static_cast<int64_t>(shape->size()) <= axis)
      return false;
    sizes.push_back((*shape)[axis]);
  }
  return !sizes.empty();
}

/// Split-2 reads the sizes from the `split` attribute, Split-13 from an
/// input; without them the outputs share the axis evenly, except that
/// Split-18's num_outputs lets the last piece be smaller.
LogicalResult importSplit(NodeImporter &n) {
  int64_t numOutputs = n.node().output_size();
  if (failed(n.checkArity(1, n.opset() < 13 ? 1 : 2, numOutputs)))
    return failure();
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), inType->getRank());
  if (failed(axis))
    return failure();
  int64_t extent = inType->getDimSize(*axis);

  SmallVector<int64_t> sizes;
  if (n.opset() < 13 && n.hasAttr("split")) {
    sizes = n.intsAttr("split");
  } else if (n.opset() >= 13 && n.hasInput(1)) {
    // Sizes given at run time: the declared outputs', guarded.
    FailureOr<SmallVector<int64_t>> given = n.constantOrDeclaredInts(
        1, "split",
        [&](ArrayRef<int64_t>) -> std::optional<SmallVector<int64_t>> {
          SmallVector<int64_t> declared;
          if (!splitSizesDeclared(n, *axis, declared))
            return std::nullopt;
          return declared;
        });
    if (failed(given))
      return failure();
    sizes = std::move(*given);
  } else if (n.opset() >= 18 && n.hasAttr("num_outputs")) {
    int64_t pieces = n.intAttr("num_outputs", 0);
    if (pieces <= 0 || pieces != numOutputs)
      return n.fail("num_outputs is " + Twine(pieces) + " but the node has " +
                    Twine(numOutputs) + " outputs");
    int64_t piece = (extent + pieces - 1) / pieces;
    if (piece * (pieces - 1) > extent)
      return n.fail("cannot split " + Twine(extent) + " elements into " +
                    Twine(pieces) + " pieces of at most " + Twine(piece));
    sizes.assign(pieces - 1, piece);
    sizes.push_back(extent - piece * (pieces - 1));
  } else {
    if (numOutputs == 0 || extent % numOutputs != 0)
      return n.fail("cannot split " + Twine(extent) + " elements evenly into " +
                    Twine(numOutputs) + " outputs");
    sizes.assign(numOutputs, extent / numOutputs);
  }
  if (static_cast<int64_t>(sizes.size()) != numOutputs)
    return n.fail("split has " + Twine(sizes.size()) + " sizes for " +
                  Twine(numOutputs) + " outputs");
  FailureOr<SmallVector<Value>> pieces = n.makeMulti<SplitOp>(
      numOutputs, n.input(0),
      {n.namedI64("axis", *axis), n.namedArray("sizes", sizes)});
  if (failed(pieces))
    return failure();
  return n.setResults(*pieces);
}

LogicalResult importTile(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  // Repeats given at run time: the declared result's over the input's,
  // guarded.
  RankedTensorType inType = n.inputType(0);
  FailureOr<SmallVector<int64_t>> repeats = n.constantOrDeclaredInts(
      1, "repeats",
      [&](ArrayRef<int64_t> declared) -> std::optional<SmallVector<int64_t>> {
        if (!inType.hasStaticShape() ||
            declared.size() != static_cast<size_t>(inType.getRank()))
          return std::nullopt;
        SmallVector<int64_t> fixed;
        for (auto [in, out] : llvm::zip(inType.getShape(), declared)) {
          if (in <= 0 || out % in != 0)
            return std::nullopt;
          fixed.push_back(out / in);
        }
        return fixed;
      });
  if (failed(repeats))
    return failure();
  return bind(n,
              n.make<TileOp>(n.input(0), {n.namedArray("repeats", *repeats)}));
}

/// Trilu keeps the elements on and above (upper) or on and below (lower)
/// the k-th diagonal of the last two dimensions: select(mask, x, 0), the
/// mask (column - row >= k, or <= k) computed from two iotas and
/// broadcasting over the leading dimensions. (It was a materialised
/// constant of rows * cols booleans, whose size overflowed for a dim near
/// 2^63: reliability finding 18.)
LogicalResult importTrilu(NodeImporter &n) {
  if (failed(n.checkArity(1, 2)))
    return failure();
  RankedTensorType type = n.inputType(0);
  if (type.getRank() < 2)
    return n.fail("input must have rank >= 2");
  int64_t k = 0;
  // A k that is not a constant is compared at run time (an int64 scalar:
  // column - row is exact in i64 for any k, so it needs no clamp).
  bool runtimeK = n.hasInput(1) && !n.constantInput(1) &&
                  n.inputType(1).getElementType().isSignlessInteger(64) &&
                  n.inputType(1).hasStaticShape() &&
                  n.inputType(1).getNumElements() == 1;
  if (n.hasInput(1) && !runtimeK) {
    FailureOr<SmallVector<int64_t>> value = n.constantInts(1, "k");
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return n.fail("k must be a scalar");
    k = value->front();
  }
  bool upper = n.intAttr("upper", 1) != 0;
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t cols = type.getDimSize(type.getRank() - 1);
  if (ShapedType::isDynamic(rows) || ShapedType::isDynamic(cols))
    return n.fail("the last two dims must be known at compile time");
  // column - row lies in [1 - rows, cols - 1]: a k past that is the same as
  // the bound (and fits a double exactly, as the constant is built).
  int64_t bound = std::min<int64_t>(std::max(rows, cols), int64_t{1} << 52);
  k = std::clamp<int64_t>(k, -bound, bound);
  Composer c(n);
  Type i64 = n.builder().getI64Type();
  Value diff = c.make<SubOp>({c.iotaAlong(cols, 1, 2, i64),
                              c.iotaAlong(rows, 0, 2, i64)}); // [rows, cols]
  Value kValue = runtimeK ? n.input(1) : c.scalar(i64, static_cast<double>(k));
  Value mask = upper ? c.make<GreaterEqualOp>({diff, kValue})
                     : c.make<LessEqualOp>({diff, kValue});
  Value zero = c.scalar(type.getElementType(), 0.0);
  return bindComposed(c, c.make<SelectOp>({mask, n.input(0), zero}));
}

//===----------------------------------------------------------------------===//
// Resize, Upsample
//===----------------------------------------------------------------------===//

/// Builds kiln.resize. `scales` are the per-dimension factors the coordinate
/// mapping uses; empty means "output size over input size".
/// Scales and a region given at run time (ResizeOp's runtime_scales and
/// runtime_roi, over `axes`).
struct RuntimeResizeValues {
  Value scales, roi;
  SmallVector<int64_t> axes;
};

FailureOr<Value> makeResize(NodeImporter &n, ArrayRef<int64_t> shape,
                            ResizeMode mode, CoordinateMode coordinates,
                            NearestMode nearest, ArrayRef<double> scales,
                            ArrayRef<double> roi = {}, bool antialias = false,
                            const RuntimeResizeValues &runtime = {}) {
  RankedTensorType inType = n.inputType(0);
  SmallVector<Value> operands{n.input(0)};
  for (Value v : {runtime.scales, runtime.roi})
    if (v)
      operands.push_back(v);
  SmallVector<NamedAttribute> attrs{
      n.named("operandSegmentSizes",
              n.builder().getDenseI32ArrayAttr(
                  {1, runtime.scales ? 1 : 0, runtime.roi ? 1 : 0})),
      n.named("mode", ResizeModeAttr::get(n.context(), mode)),
      n.named("coordinate_mode",
              CoordinateModeAttr::get(n.context(), coordinates)),
      n.named("nearest_mode", NearestModeAttr::get(n.context(), nearest)),
      n.named("scales", n.builder().getDenseF64ArrayAttr(scales))};
  if (mode == ResizeMode::Cubic) {
    attrs.push_back(
        n.namedF64("cubic_coeff_a", n.floatAttr("cubic_coeff_a", -0.75f)));
    if (n.intAttr("exclude_outside", 0) != 0)
      attrs.push_back(n.namedUnit("exclude_outside"));
  }
  if (antialias)
    attrs.push_back(n.namedUnit("antialias"));
  if (coordinates == CoordinateMode::TfCropAndResize) {
    attrs.push_back(n.named("roi", n.builder().getDenseF64ArrayAttr(roi)));
    attrs.push_back(n.namedF64("extrapolation_value",
                               n.floatAttr("extrapolation_value", 0.0f)));
  }
  if (runtime.scales || runtime.roi)
    attrs.push_back(n.namedArray("value_axes", runtime.axes));
  return n.makeTyped<ResizeOp>(
      RankedTensorType::get(shape, inType.getElementType()), operands, attrs);
}

/// The result shape for per-dimension `scales`: floor(size * scale).
FailureOr<SmallVector<int64_t>>
scaledShape(NodeImporter &n, RankedTensorType inType, ArrayRef<double> scales) {
  SmallVector<int64_t> shape;
  for (auto [size, scale] : llvm::zip_equal(inType.getShape(), scales)) {
    if (!(scale > 0))
      return n.fail("scales must be positive, got " + std::to_string(scale));
    double extent = std::floor(static_cast<double>(size) * scale);
    if (extent > static_cast<double>(std::numeric_limits<int32_t>::max()))
      return n.fail("scale " + std::to_string(scale) +
                    " makes a dimension of " + Twine(size) + " too large");
    shape.push_back(static_cast<int64_t>(extent));
  }
  return shape;
}

/// Scales given at run time (Resize's or Upsample's input `index`, one per
/// dimension of `axes`): the declared output shape, after guarding the
/// input with a ShapeGuard of kind `resize-scales`; the kernel reads the
/// scales. Fails as for a missing constant when the shape is not declared,
/// a dimension outside `axes` changes, or the mode is tf_crop_and_resize
/// (whose scales also scale the region).
FailureOr<SmallVector<int64_t>>
guardRuntimeScales(NodeImporter &n, size_t index, RankedTensorType inType,
                   ArrayRef<int64_t> axes, bool crop) {
  int64_t rank = inType.getRank();
  std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
  bool fits = !crop && n.canGuardInput(index, /*allowFloat=*/true) &&
              n.inputType(index).getNumElements() ==
                  static_cast<int64_t>(axes.size()) &&
              declared && static_cast<int64_t>(declared->size()) == rank;
  for (int64_t d = 0; fits && d < rank; ++d)
    fits = (*declared)[d] > 0 && (llvm::is_contained(axes, d) ||
                                  (*declared)[d] == inType.getDimSize(d));
  if (!fits)
    return n.fail("input 'scales' must be a compile-time constant");
  n.guardOperands("resize-scales", {{"scales", index, std::nullopt}},
                  inType.getShape(), *declared,
                  {{"axes", SmallVector<int64_t>(axes)}});
  return *declared;
}

/// Checks what kiln.resize takes: a float input of static shape.
FailureOr<RankedTensorType> resizableInput(NodeImporter &n) {
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  if (!isa<FloatType>(inType->getElementType()))
    return n.fail("only float inputs can be resized");
  return inType;
}

/// Upsample and Resize-10 have asymmetric coordinates, and nearest rounds
/// down when upsampling but up when downsampling (as onnxruntime does and
/// the Resize-10 conformance tests expect). kiln.resize has one rounding for
/// all dimensions, so mixing the two directions is refused.
FailureOr<NearestMode> legacyNearestMode(NodeImporter &n, ResizeMode mode,
                                         ArrayRef<double> scales) {
  bool up = llvm::any_of(scales, [](double s) { return s > 1; });
  bool down = llvm::any_of(scales, [](double s) { return s < 1; });
  if (mode == ResizeMode::Nearest && up && down)
    return n.fail("nearest resizing that upsamples some dimensions and "
                  "downsamples others is not supported before opset 11");
  return down ? NearestMode::Ceil : NearestMode::Floor;
}

/// Resize-10 behaves like Upsample (see legacyNearestMode);
/// Resize-11 adds coordinate modes, roi and sizes; Resize-18 axes and
/// keep_aspect_ratio_policy; Resize-19 half_pixel_symmetric. Cubic from
/// Resize-11.
LogicalResult importResize(NodeImporter &n) {
  if (failed(n.checkArity(n.opset() < 11 ? 2 : 1, n.opset() < 11 ? 2 : 4)))
    return failure();
  if (failed(
          n.opset() < 11
              ? n.requireStringAttrIn("mode", "nearest", {"nearest", "linear"})
              : n.requireStringAttrIn("mode", "nearest",
                                      {"nearest", "linear", "cubic"})))
    return failure();
  ResizeMode mode = *symbolizeResizeMode(n.stringAttr("mode", "nearest"));
  CoordinateMode coordinates = CoordinateMode::Asymmetric;
  NearestMode nearest = NearestMode::Floor; // Resize-10: set below.
  if (n.opset() >= 11) {
    // roi only matters to tf_crop_and_resize; other modes ignore it.
    SmallVector<StringRef> coordinateModes{"half_pixel", "pytorch_half_pixel",
                                           "align_corners", "asymmetric",
                                           "tf_crop_and_resize"};
    if (n.opset() >= 19)
      coordinateModes.push_back("half_pixel_symmetric");
    // TensorFlow's nearest resize: Resize-11 only, nearest mode only.
    if (n.opset() < 13 && mode == ResizeMode::Nearest)
      coordinateModes.push_back("tf_half_pixel_for_nn");
    if (failed(n.requireStringAttrIn("coordinate_transformation_mode",
                                     "half_pixel", coordinateModes)) ||
        failed(n.requireStringAttrIn(
            "nearest_mode", "round_prefer_floor",
            {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})))
      return failure();
    coordinates = *symbolizeCoordinateMode(
        n.stringAttr("coordinate_transformation_mode", "half_pixel"));
    nearest = *symbolizeNearestMode(
        n.stringAttr("nearest_mode", "round_prefer_floor"));
  }
  if (n.opset() >= 18 &&
      failed(n.requireStringAttrIn("keep_aspect_ratio_policy", "stretch",
                                   {"stretch", "not_larger", "not_smaller"})))
    return failure();
  FailureOr<RankedTensorType> inType = resizableInput(n);
  if (failed(inType))
    return failure();
  int64_t rank = inType->getRank();

  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (n.opset() >= 18 && n.hasAttr("axes")) {
    FailureOr<SmallVector<int64_t>> given =
        normalizeAxesOrFail(n, n.intsAttr("axes"), rank);
    if (failed(given))
      return failure();
    axes = std::move(*given);
  }

  // tf_crop_and_resize's region: a start and an end per dimension (for the
  // resized axes as given, the others keep [0, 1]).
  SmallVector<double> roi;
  RuntimeResizeValues runtime;
  if (coordinates == CoordinateMode::TfCropAndResize && n.hasInput(1) &&
      !n.constantInput(1) && n.inputType(1).hasStaticShape()) {
    // A region given at run time decides no shape: the kernel reads it.
    if (n.inputType(1).getNumElements() !=
        2 * static_cast<int64_t>(axes.size()))
      return n.fail("expects " + Twine(2 * axes.size()) + " roi values, got " +
                    Twine(n.inputType(1).getNumElements()));
    roi.assign(rank, 0.0);
    roi.append(rank, 1.0);
    runtime.roi = n.input(1);
    runtime.axes = axes;
  } else if (coordinates == CoordinateMode::TfCropAndResize) {
    if (!n.hasInput(1))
      return n.fail("tf_crop_and_resize needs the 'roi' input");
    FailureOr<SmallVector<double>> given = n.constantFloats(1, "roi");
    if (failed(given))
      return failure();
    if (given->size() != 2 * axes.size())
      return n.fail("expects " + Twine(2 * axes.size()) + " roi values, got " +
                    Twine(given->size()));
    roi.assign(rank, 0.0);
    roi.append(rank, 1.0);
    for (auto [k, d] : llvm::enumerate(axes)) {
      roi[d] = (*given)[k];
      roi[rank + d] = (*given)[axes.size() + k];
    }
  }

  size_t scalesIndex = n.opset() < 11 ? 1 : 2, sizesIndex = 3;
  std::optional<DenseElementsAttr> scalesValue = n.constantInput(scalesIndex);
  bool haveScales = scalesValue && scalesValue->getNumElements() > 0;
  // Resize-11 exporters pass an empty tensor for whichever is unused.
  std::optional<DenseElementsAttr> sizesValue = n.constantInput(sizesIndex);
  bool haveSizes = n.hasInput(sizesIndex) &&
                   (!sizesValue || sizesValue->getNumElements() > 0);
  if (haveSizes && haveScales)
    return n.fail("takes scales or sizes, not both");
  SmallVector<int64_t> shape(inType->getShape());
  SmallVector<double> scales;
  if (!haveSizes && n.hasInput(scalesIndex) && !scalesValue) {
    FailureOr<SmallVector<int64_t>> declared =
        guardRuntimeScales(n, scalesIndex, *inType, axes,
                           coordinates == CoordinateMode::TfCropAndResize);
    if (failed(declared))
      return failure();
    shape = std::move(*declared);
    runtime.scales = n.input(scalesIndex);
    runtime.axes = axes;
  } else if (!haveSizes && !haveScales) {
    return n.fail("needs constant scales or sizes");
  } else if (haveScales) {
    FailureOr<SmallVector<double>> given =
        n.constantFloats(scalesIndex, "scales");
    if (failed(given))
      return failure();
    if (given->size() != axes.size())
      return n.fail("expects " + Twine(axes.size()) + " scales, got " +
                    Twine(given->size()));
    scales.assign(rank, 1.0);
    for (auto [d, s] : llvm::zip_equal(axes, *given))
      scales[d] = s;
    FailureOr<SmallVector<int64_t>> scaled = scaledShape(n, *inType, scales);
    if (failed(scaled))
      return failure();
    shape = std::move(*scaled);
  } else {
    std::string policy =
        n.opset() >= 18 ? n.stringAttr("keep_aspect_ratio_policy", "stretch")
                        : std::string("stretch");
    std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
    if (policy != "stretch" && n.canGuardInput(sizesIndex) && declared &&
        static_cast<int64_t>(declared->size()) == rank &&
        n.inputType(sizesIndex).getNumElements() ==
            static_cast<int64_t>(axes.size()) &&
        llvm::all_of(axes, [&](int64_t d) {
          return inType->getDimSize(d) > 0 && (*declared)[d] > 0;
        })) {
      // Sizes given at run time, fitted keeping the aspect ratio: the
      // device computes the one scale, min (not_larger) or max
      // (not_smaller) of size / extent in f64 as the host does, and the
      // guard checks that the sizes give the declared shape.
      n.guardOperands(
          "resize-sizes", {{"sizes", sizesIndex, std::nullopt}},
          inType->getShape(), *declared,
          {{"axes", axes}, {"not_smaller", {policy == "not_smaller" ? 1 : 0}}});
      Composer c(n);
      Type f64 = n.builder().getF64Type();
      int64_t count = static_cast<int64_t>(axes.size());
      SmallVector<double> extents;
      for (int64_t d : axes)
        extents.push_back(static_cast<double>(inType->getDimSize(d)));
      Value ratios = c.make<DivOp>(
          {c.reshape(c.cast(n.input(sizesIndex), f64), {count}),
           c.constant(RankedTensorType::get({count}, f64), extents)});
      Value scale =
          c.reduce(policy == "not_larger" ? ReduceKind::Min : ReduceKind::Max,
                   ratios, {0}, /*keepdims=*/true);
      runtime.scales = c.broadcast(scale, {count});
      runtime.axes = axes;
      if (c.failed())
        return failure();
      shape = *declared;
    } else {
      // Sizes given at run time (stretched to, not fitted): the declared
      // output's extents along the axes, guarded.
      FailureOr<SmallVector<int64_t>> sizes = n.constantOrDeclaredInts(
          sizesIndex, "sizes",
          [&](ArrayRef<int64_t> declared)
              -> std::optional<SmallVector<int64_t>> {
            if (policy != "stretch" ||
                static_cast<int64_t>(declared.size()) != rank)
              return std::nullopt;
            SmallVector<int64_t> fixed;
            for (int64_t d : axes)
              fixed.push_back(declared[d]);
            return fixed;
          });
      if (failed(sizes))
        return failure();
      if (sizes->size() != axes.size())
        return n.fail("expects " + Twine(axes.size()) + " sizes, got " +
                      Twine(sizes->size()));
      if (llvm::any_of(*sizes, [](int64_t s) { return s <= 0; }))
        return n.fail("sizes must be positive, got " + formatInts(*sizes));
      if (policy == "stretch") {
        for (auto [d, s] : llvm::zip_equal(axes, *sizes))
          shape[d] = s;
      } else {
        // One scale for every resized axis, the largest that fits in (or the
        // smallest that covers) the requested sizes.
        if (llvm::any_of(axes,
                         [&](int64_t d) { return inType->getDimSize(d) == 0; }))
          return n.fail("cannot keep the aspect ratio of an empty dimension");
        double scale = policy == "not_larger" ? INFINITY : 0.0;
        for (auto [d, s] : llvm::zip_equal(axes, *sizes)) {
          double ratio = static_cast<double>(s) /
                         static_cast<double>(inType->getDimSize(d));
          scale = policy == "not_larger" ? std::min(scale, ratio)
                                         : std::max(scale, ratio);
        }
        scales.assign(rank, 1.0);
        for (int64_t d : axes) {
          scales[d] = scale;
          shape[d] = static_cast<int64_t>(std::floor(
              scale * static_cast<double>(inType->getDimSize(d)) + 0.5));
        }
      }
    }
  }
  // Antialias only changes dimensions that shrink, and never nearest.
  bool antialias =
      n.opset() >= 18 && n.intAttr("antialias", 0) != 0 &&
      mode != ResizeMode::Nearest &&
      llvm::any_of(llvm::seq<int64_t>(0, rank),
                   [&](int64_t d) { return shape[d] < inType->getDimSize(d); });
  if (n.opset() < 11) {
    // Run-time scales go up or down as the declared shape does.
    SmallVector<double> directions(scales);
    if (runtime.scales)
      for (int64_t d = 0; d < rank; ++d)
        directions.push_back(static_cast<double>(shape[d]) /
                             static_cast<double>(inType->getDimSize(d)));
    FailureOr<NearestMode> legacy = legacyNearestMode(n, mode, directions);
    if (failed(legacy))
      return failure();
    nearest = *legacy;
  }
  return bind(n, makeResize(n, shape, mode, coordinates, nearest, scales, roi,
                            antialias, runtime));
}

/// Upsample-7 takes its scales as an attribute, Upsample-9 as an input.
LogicalResult importUpsample(NodeImporter &n) {
  if (failed(n.checkArity(n.opset() < 9 ? 1 : 2, n.opset() < 9 ? 1 : 2)) ||
      failed(n.requireStringAttrIn("mode", "nearest", {"nearest", "linear"})))
    return failure();
  FailureOr<RankedTensorType> inType = resizableInput(n);
  if (failed(inType))
    return failure();
  SmallVector<double> scales;
  ResizeMode mode = *symbolizeResizeMode(n.stringAttr("mode", "nearest"));
  if (n.opset() >= 9 && !n.constantInput(1)) {
    // Scales given at run time; the nearest rounding follows the declared
    // shape's direction (legacyNearestMode).
    int64_t rank = inType->getRank();
    FailureOr<SmallVector<int64_t>> shape = guardRuntimeScales(
        n, 1, *inType, llvm::to_vector(llvm::seq<int64_t>(0, rank)), false);
    if (failed(shape))
      return failure();
    SmallVector<double> directions;
    for (int64_t d = 0; d < rank; ++d)
      directions.push_back(static_cast<double>((*shape)[d]) /
                           static_cast<double>(inType->getDimSize(d)));
    FailureOr<NearestMode> nearest = legacyNearestMode(n, mode, directions);
    if (failed(nearest))
      return failure();
    RuntimeResizeValues runtime{n.input(1), nullptr,
                                llvm::to_vector(llvm::seq<int64_t>(0, rank))};
    return bind(n, makeResize(n, *shape, mode, CoordinateMode::Asymmetric,
                              *nearest, {}, {}, false, runtime));
  }
  if (n.opset() < 9) {
    if (!n.hasAttr("scales"))
      return n.fail("requires the 'scales' attribute");
    for (float s : n.floatsAttr("scales"))
      scales.push_back(s);
  } else {
    FailureOr<SmallVector<double>> given = n.constantFloats(1, "scales");
    if (failed(given))
      return failure();
    scales = std::move(*given);
  }
  if (static_cast<int64_t>(scales.size()) != inType->getRank())
    return n.fail("expects " + Twine(inType->getRank()) + " scales, got " +
                  Twine(scales.size()));
  FailureOr<SmallVector<int64_t>> shape = scaledShape(n, *inType, scales);
  if (failed(shape))
    return failure();
  FailureOr<NearestMode> nearest = legacyNearestMode(n, mode, scales);
  if (failed(nearest))
    return failure();
  return bind(n, makeResize(n, *shape, mode, CoordinateMode::Asymmetric,
                            *nearest, scales));
}

//===----------------------------------------------------------------------===//
// DepthToSpace, SpaceToDepth
//===----------------------------------------------------------------------===//

/// reshape -> transpose -> reshape, the standard decomposition.
FailureOr<Value> reshapeTransposeReshape(NodeImporter &n,
                                         ArrayRef<int64_t> split,
                                         ArrayRef<int64_t> perm,
                                         ArrayRef<int64_t> result) {
  FailureOr<Value> expanded = reshapeTo(n, n.input(0), split);
  if (failed(expanded))
    return failure();
  FailureOr<Value> permuted =
      n.make<TransposeOp>(*expanded, {n.namedArray("permutation", perm)});
  if (failed(permuted))
    return failure();
  return reshapeTo(n, *permuted, result);
}

/// The NCHW input and the block size, checked.
FailureOr<std::pair<RankedTensorType, int64_t>> blockInput(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  FailureOr<RankedTensorType> inType = staticInputType(n, 0);
  if (failed(inType))
    return failure();
  if (inType->getRank() != 4)
    return n.fail("expects a 4-D (NCHW) input, got rank " +
                  Twine(inType->getRank()));
  int64_t blockSize = n.intAttr("blocksize", 0);
  if (blockSize <= 0 || blockSize > std::numeric_limits<int32_t>::max())
    return n.fail("requires a 'blocksize' attribute in [1, 2^31)");
  return std::make_pair(*inType, blockSize);
}

/// DepthToSpace-1 orders the channels depth-column-row (DCR); DepthToSpace-11
/// adds column-row-depth (CRD).
LogicalResult importDepthToSpace(NodeImporter &n) {
  FailureOr<std::pair<RankedTensorType, int64_t>> in = blockInput(n);
  if (failed(in))
    return failure();
  if (n.opset() >= 11 &&
      failed(n.requireStringAttrIn("mode", "DCR", {"DCR", "CRD"})))
    return failure();
  auto [type, b] = *in;
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1),
          height = type.getDimSize(2), width = type.getDimSize(3);
  if (channels % (b * b) != 0)
    return n.fail("channels " + Twine(channels) +
                  " are not divisible by blocksize^2 " + Twine(b * b));
  int64_t c = channels / (b * b);
  SmallVector<int64_t> result = {batch, c, height * b, width * b};
  bool crd = n.opset() >= 11 && n.stringAttr("mode", "DCR") == "CRD";
  if (crd)
    return bind(n, reshapeTransposeReshape(n, {batch, c, b, b, height, width},
                                           {0, 1, 4, 2, 5, 3}, result));
  return bind(n, reshapeTransposeReshape(n, {batch, b, b, c, height, width},
                                         {0, 3, 4, 1, 5, 2}, result));
}

LogicalResult importSpaceToDepth(NodeImporter &n) {
  FailureOr<std::pair<RankedTensorType, int64_t>> in = blockInput(n);
  if (failed(in))
    return failure();
  auto [type, b] = *in;
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1),
          height = type.getDimSize(2), width = type.getDimSize(3);
  if (height % b != 0 || width % b != 0)
    return n.fail("spatial size " + Twine(height) + "x" + Twine(width) +
                  " is not divisible by blocksize " + Twine(b));
  return bind(n, reshapeTransposeReshape(
                     n, {batch, channels, height / b, b, width / b, b},
                     {0, 3, 5, 1, 2, 4},
                     {batch, channels * b * b, height / b, width / b}));
}

} // namespace

void registerDataMovementHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"Trilu", 14, importTrilu,
       "k: a constant or an int64 scalar given at run time"},
      {"Reshape", 5, importReshape, "shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Reshape", 14, importReshape, "shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Flatten", 1, importFlatten, ""},
      {"Flatten", 11, importFlatten, ""},
      {"Squeeze", 1, importSqueeze, ""},
      {"Squeeze", 11, importSqueeze, ""},
      {"Squeeze", 13, importSqueeze, "axes: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Unsqueeze", 1, importUnsqueeze, ""},
      {"Unsqueeze", 11, importUnsqueeze, ""},
      {"Unsqueeze", 13, importUnsqueeze, "axes: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Transpose", 1, importTranspose, ""},
      {"Concat", 4, importConcat, ""},
      {"Concat", 11, importConcat, ""},
      {"Slice", 1, importSlice, ""},
      {"Slice", 10, importSlice,
       "starts, ends, axes and steps: " KILN_FIXED_BY_DECLARED_SHAPE
       "; at run time, a gather per dimension"},
      {"Slice", 11, importSlice,
       "starts, ends, axes and steps: " KILN_FIXED_BY_DECLARED_SHAPE
       "; at run time, a gather per dimension"},
      {"Gather", 1, importGather, ""},
      {"Gather", 11, importGather, ""},
      {"GatherElements", 11, importGatherElements, ""},
      {"Scatter", 9, importScatterElements,
       "deprecated; imported as ScatterElements"},
      {"ScatterElements", 11, importScatterElements, ""},
      {"ScatterElements", 16, importScatterElements, ""},
      {"ScatterElements", 18, importScatterElements, ""},
      {"Pad", 2, importPad, ""},
      {"Pad", 11, importPad,
       "pads: " KILN_FIXED_BY_DECLARED_SHAPE
       "; constant_value any; at run time, a gather per dimension"},
      {"Pad", 18, importPad,
       "pads and axes: " KILN_FIXED_BY_DECLARED_SHAPE
       "; constant_value any; at run time, a gather per dimension"},
      {"Pad", 19, importPad,
       "wrap mode as a gather per padded axis; pads and "
       "axes: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Expand", 8, importExpand, "shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Split", 2, importSplit, ""},
      {"Split", 11, importSplit, ""},
      {"Split", 13, importSplit, "split: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Split", 18, importSplit, "split: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Tile", 6, importTile, "repeats: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Resize", 10, importResize,
       "float inputs only; scales: " KILN_FIXED_BY_DECLARED_SHAPE
       ", read by the kernel"},
      {"Resize", 11, importResize,
       "scales and sizes: " KILN_FIXED_BY_DECLARED_SHAPE
       " (scales at run time not with tf_crop_and_resize); roi at run time "
       "is read by the kernel"},
      {"Resize", 13, importResize, ""},
      {"Resize", 18, importResize, ""},
      {"Resize", 19, importResize, ""},
      {"Upsample", 7, importUpsample, "float inputs only"},
      {"Upsample", 9, importUpsample,
       "scales: " KILN_FIXED_BY_DECLARED_SHAPE ", read by the kernel"},
      {"DepthToSpace", 1, importDepthToSpace, "4-D inputs only"},
      {"DepthToSpace", 11, importDepthToSpace, "4-D inputs only"},
      {"SpaceToDepth", 1, importSpaceToDepth, "4-D inputs only"},
  });
}

} // namespace kiln::onnx_frontend

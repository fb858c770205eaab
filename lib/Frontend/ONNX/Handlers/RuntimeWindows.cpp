//===- RuntimeWindows.cpp - Slice and Pad windows given at run time ------===//
//
// RuntimeWindows.h. Per dimension the device builds the index vector of the
// output's elements, in i64, from the bound values (a start and a step for
// Slice, the leading pad for Pad) and gathers along it: one small kernel of
// index arithmetic and one gather per dimension the values may move. The
// guard has already checked that the values give the compiled extents, so
// every index is in range. Real models pass these as constants, which the
// handlers fold into one kiln.slice or kiln.pad; this path serves the
// exported graphs that pass them as inputs.
//
//===----------------------------------------------------------------------===//

#include "RuntimeWindows.h"

#include "Composer.h"
#include "WindowAttrs.h"

using namespace mlir;

namespace kiln::onnx_frontend {

namespace {

/// A handler's refusal (the error is recorded) as this file's result.
std::optional<LogicalResult> refuse(LogicalResult) { return failure(); }

bool isRuntime(NodeImporter &n, size_t i) {
  return n.hasInput(i) && !n.constantInput(i);
}

/// The index arithmetic, in i64, on [1]- and [L]-shaped tensors.
struct IndexMath {
  Composer &c;
  Type i64;

  Value constant(int64_t v) { return c.scalar(i64, static_cast<double>(v)); }
  /// Input `i` (of `count` integers) as a [count] i64 tensor, or `values`
  /// as a constant one.
  Value operand(NodeImporter &n, size_t i, ArrayRef<int64_t> values,
                int64_t count) {
    if (isRuntime(n, i))
      return c.reshape(c.cast(n.input(i), i64), {count});
    SmallVector<double> v(values.begin(), values.end());
    return c.constant(RankedTensorType::get({count}, i64), v);
  }
  /// Entry k of a [count] tensor, as [1].
  Value entry(Value v, int64_t k) { return c.sliceAxis(v, 0, k, k + 1); }
  Value add(Value a, Value b) { return c.make<AddOp>({a, b}); }
  Value sub(Value a, Value b) { return c.make<SubOp>({a, b}); }
  Value mul(Value a, Value b) { return c.make<MulOp>({a, b}); }
  Value select(Value p, Value a, Value b) {
    return c.make<SelectOp>({p, a, b});
  }
  Value less(Value a, Value b) { return c.make<LessOp>({a, b}); }
  Value clamp(Value v, int64_t lo, int64_t hi) {
    return c.make<MinOp>({c.make<MaxOp>({v, constant(lo)}), constant(hi)});
  }
  /// v < 0 ? v + size : v.
  Value fromEnd(Value v, int64_t size) {
    return select(less(v, constant(0)), add(v, constant(size)), v);
  }
  /// With axes given at run time (`axes`: [count], normalised), the entry
  /// of `values` whose axis is `d`, or `fallback` when none is.
  Value forAxis(Value axes, Value values, int64_t d, int64_t fallback) {
    Value hit = c.make<EqualOp>({axes, constant(d)});
    Value picked = c.reduce(ReduceKind::Sum, select(hit, values, constant(0)),
                            {0}, /*keepdims=*/true);
    if (fallback == 0)
      return picked;
    Value hits =
        c.reduce(ReduceKind::Sum, select(hit, constant(1), constant(0)), {0},
                 /*keepdims=*/true);
    return add(picked, mul(sub(constant(1), hits), constant(fallback)));
  }
  Value iota(int64_t size) { return c.iotaAlong(size, 0, 1, i64); }
};

/// Constant axes for `rank`, from the end when negative; refuses
/// out-of-range and repeated ones, naming them.
FailureOr<SmallVector<int64_t>> distinctAxes(NodeImporter &n,
                                             ArrayRef<int64_t> axes,
                                             int64_t rank) {
  SmallVector<int64_t> dims;
  for (int64_t axis : axes) {
    FailureOr<int64_t> d = normalizeAxisOrFail(n, axis, rank);
    if (failed(d))
      return failure();
    if (llvm::is_contained(dims, *d))
      return n.fail("axis " + Twine(axis) + " is repeated");
    dims.push_back(*d);
  }
  return dims;
}

/// The constant integers of input `i` (present and constant), or failure
/// with the handler's error.
FailureOr<SmallVector<int64_t>> constantOperand(NodeImporter &n, size_t i,
                                                StringRef what) {
  return n.constantInts(i, what);
}

} // namespace

std::optional<LogicalResult> importRuntimeSlice(NodeImporter &n) {
  constexpr StringRef names[] = {"", "starts", "ends", "axes", "steps"};
  if (n.opset() < 10 || n.numInputs() < 3)
    return std::nullopt;
  bool anyRuntime = false;
  for (size_t i = 1; i <= 4; ++i) {
    if (!isRuntime(n, i))
      continue;
    if (!n.canGuardInput(i))
      return std::nullopt;
    anyRuntime = true;
  }
  RankedTensorType inType = n.inputType(0);
  std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
  int64_t rank = inType.getRank();
  if (!anyRuntime || !inType.hasStaticShape() || !declared ||
      static_cast<int64_t>(declared->size()) != rank ||
      inType.getNumElements() == 0)
    return std::nullopt;
  ArrayRef<int64_t> in = inType.getShape(), out = *declared;
  // An empty result reads nothing (a start past the end): it is the empty
  // slice of the compiled shape, once the guard has seen the values give it.
  bool empty = llvm::is_contained(out, int64_t{0});
  if (empty && llvm::any_of(llvm::seq<int64_t>(0, rank),
                            [&](int64_t d) { return out[d] > in[d]; }))
    return std::nullopt;

  // Every operand's values, or for a run-time one its length.
  int64_t count = n.inputType(1).getNumElements();
  std::optional<SmallVector<int64_t>> constants[5];
  for (size_t i = 1; i <= 4; ++i) {
    if (!n.hasInput(i))
      continue;
    if (n.inputType(i).getNumElements() != count)
      return refuse(n.fail("starts, ends, axes and steps differ in length"));
    if (isRuntime(n, i))
      continue;
    FailureOr<SmallVector<int64_t>> v = constantOperand(n, i, names[i]);
    if (failed(v))
      return failure();
    constants[i] = std::move(*v);
  }
  SmallVector<int64_t> dims;
  if (constants[3]) {
    FailureOr<SmallVector<int64_t>> given = distinctAxes(n, *constants[3], rank);
    if (failed(given))
      return failure();
    dims = std::move(*given);
  } else if (!n.hasInput(3)) {
    dims = llvm::to_vector(llvm::seq<int64_t>(0, count));
    if (count > rank)
      return refuse(n.fail("starts has " + Twine(count) + " values for rank " +
                           Twine(rank)));
  }
  if (constants[4] && llvm::is_contained(*constants[4], int64_t{0}))
    return refuse(n.fail("a step is 0"));
  // With the axes known, a dimension no entry slices keeps its size: a
  // declared shape that says otherwise no value could satisfy.
  for (int64_t d = 0; d < rank && (constants[3] || !n.hasInput(3)); ++d)
    if (!llvm::is_contained(dims, d) && out[d] != in[d])
      return refuse(n.fail("the declared output shape " + formatInts(out) +
                           " changes dimension " + Twine(d) +
                           ", which the slice's axes leave whole"));

  SmallVector<NodeImporter::GuardOperand> operands;
  for (size_t i = 1; i <= 4; ++i)
    operands.push_back(
        {names[i], isRuntime(n, i) ? std::optional<size_t>(i) : std::nullopt,
         constants[i]});
  n.guardOperands("slice", operands, in, out);

  Composer c(n);
  if (empty)
    return bindComposed(
        c, c.slice(n.input(0), SmallVector<int64_t>(rank, 0), out));
  IndexMath m{c, n.builder().getI64Type()};
  Value starts =
      m.operand(n, 1, constants[1].value_or(SmallVector<int64_t>()), count);
  SmallVector<int64_t> unitSteps(count, 1);
  Value steps = m.operand(n, 4, constants[4].value_or(unitSteps), count);
  // out[j] = in[start + j * step] along `d`, start from the end when
  // negative and clamped into the dimension (the guard saw a non-empty
  // extent, so the clamped start is a valid index for either sign of step).
  Value x = n.input(0);
  auto gatherAlong = [&](int64_t d, Value start, Value step) {
    if (in[d] == 1 && out[d] == 1)
      return;
    Value first = m.clamp(m.fromEnd(start, in[d]), 0, in[d] - 1);
    Value index = m.add(first, m.mul(step, m.iota(out[d])));
    x = c.make<GatherOp>({x, index}, {n.namedI64("axis", d)});
  };
  if (!n.hasInput(3) || constants[3]) {
    for (auto [k, d] : llvm::enumerate(dims))
      gatherAlong(d, m.entry(starts, k), m.entry(steps, k));
  } else {
    // Axes at run time: every dimension may be the one an entry names.
    Value axes = m.operand(n, 3, {}, count);
    axes = m.fromEnd(axes, rank);
    for (int64_t d = 0; d < rank; ++d)
      gatherAlong(d, m.forAxis(axes, starts, d, 0),
                  m.forAxis(axes, steps, d, 1));
  }
  return bindComposed(c, x);
}

std::optional<LogicalResult> importRuntimePad(NodeImporter &n, StringRef mode) {
  if (n.opset() < 11)
    return std::nullopt;
  bool shapeAtRuntime = isRuntime(n, 1) || isRuntime(n, 3);
  if (!shapeAtRuntime && !isRuntime(n, 2))
    return std::nullopt;
  if ((isRuntime(n, 1) && !n.canGuardInput(1)) ||
      (isRuntime(n, 3) && !n.canGuardInput(3)))
    return std::nullopt;
  RankedTensorType inType = n.inputType(0);
  int64_t rank = inType.getRank();
  if (!inType.hasStaticShape() || inType.getNumElements() == 0)
    return std::nullopt;
  ArrayRef<int64_t> in = inType.getShape();

  std::optional<SmallVector<int64_t>> pads, axesGiven;
  if (!isRuntime(n, 1)) {
    FailureOr<SmallVector<int64_t>> v = constantOperand(n, 1, "pads");
    if (failed(v))
      return failure();
    pads = std::move(*v);
  }
  if (n.hasInput(3) && !isRuntime(n, 3)) {
    FailureOr<SmallVector<int64_t>> v = constantOperand(n, 3, "axes");
    if (failed(v))
      return failure();
    axesGiven = std::move(*v);
  }
  int64_t count = n.hasInput(3) ? n.inputType(3).getNumElements() : rank;
  if (n.inputType(1).getNumElements() != 2 * count)
    return refuse(n.fail("expects " + Twine(2 * count) + " pads, got " +
                         Twine(n.inputType(1).getNumElements())));
  SmallVector<int64_t> dims;
  if (axesGiven) {
    FailureOr<SmallVector<int64_t>> given = distinctAxes(n, *axesGiven, rank);
    if (failed(given))
      return failure();
    dims = std::move(*given);
  } else if (!n.hasInput(3)) {
    dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }

  // The result's shape: the declared one when the values decide it, else
  // the constant pads'.
  SmallVector<int64_t> out(in);
  if (shapeAtRuntime) {
    std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
    if (!declared || static_cast<int64_t>(declared->size()) != rank)
      return std::nullopt;
    out = *declared;
  } else {
    for (auto [k, d] : llvm::enumerate(dims))
      out[d] += (*pads)[k] + (*pads)[k + count];
  }
  if (llvm::any_of(out, [](int64_t e) { return e <= 0; }))
    return std::nullopt;
  for (int64_t d = 0; d < rank && (axesGiven || !n.hasInput(3)); ++d)
    if (!llvm::is_contained(dims, d) && out[d] != in[d])
      return refuse(n.fail("the declared output shape " + formatInts(out) +
                           " changes dimension " + Twine(d) +
                           ", which the pad's axes leave whole"));
  if (shapeAtRuntime)
    n.guardOperands(
        "pad",
        {{"pads", isRuntime(n, 1) ? std::optional<size_t>(1) : std::nullopt,
          pads},
         {"axes", isRuntime(n, 3) ? std::optional<size_t>(3) : std::nullopt,
          axesGiven}},
        in, out);

  Composer c(n);
  IndexMath m{c, n.builder().getI64Type()};
  Value padValues =
      m.operand(n, 1, pads.value_or(SmallVector<int64_t>()), 2 * count);
  Value x = n.input(0), inside;
  // Along `d`: output j reads input j - before. Negative pads crop first
  // (as the handler's constant path and onnxruntime do), so edge, reflect
  // and wrap map that into the kept window [lo, hi), lo = max(-before, 0),
  // hi = size - max(-after, 0); constant mode marks what falls outside.
  auto gatherAlong = [&](int64_t d, Value before, Value after) {
    int64_t size = in[d];
    Value source = m.sub(m.iota(out[d]), before);
    Value zero = m.constant(0);
    Value lo = c.make<MaxOp>({m.sub(zero, before), zero});
    Value hi =
        m.sub(m.constant(size), c.make<MaxOp>({m.sub(zero, after), zero}));
    Value extent = m.sub(hi, lo);
    Value offset = m.sub(source, lo);
    Value index;
    if (mode == "wrap") {
      index = m.add(lo, c.make<ModOp>({offset, extent}));
    } else if (mode == "reflect") {
      // Period 2 (extent - 1); a window of one element repeats it.
      Value period = c.make<MaxOp>(
          {m.mul(m.constant(2), m.sub(extent, m.constant(1))), m.constant(1)});
      Value phase = c.make<ModOp>({offset, period});
      index = m.add(
          lo, m.select(m.less(phase, extent), phase, m.sub(period, phase)));
    } else {
      index = m.clamp(source, 0, size - 1);
    }
    x = c.make<GatherOp>({x, index}, {n.namedI64("axis", d)});
    if (mode != "constant")
      return;
    Value valid =
        c.make<AndOp>({c.make<GreaterEqualOp>({source, m.constant(0)}),
                       m.less(source, m.constant(size))});
    SmallVector<int64_t> along(rank, 1);
    along[d] = out[d];
    valid = c.reshape(valid, along);
    inside = inside ? c.make<AndOp>({inside, valid}) : valid;
  };
  if (!n.hasInput(3) || axesGiven) {
    for (auto [k, d] : llvm::enumerate(dims)) {
      if (pads && (*pads)[k] == 0 && (*pads)[k + count] == 0)
        continue;
      gatherAlong(d, m.entry(padValues, k), m.entry(padValues, k + count));
    }
  } else {
    Value axes = m.fromEnd(m.operand(n, 3, {}, count), rank);
    Value leading = c.sliceAxis(padValues, 0, 0, count);
    Value trailing = c.sliceAxis(padValues, 0, count, 2 * count);
    for (int64_t d = 0; d < rank; ++d)
      gatherAlong(d, m.forAxis(axes, leading, d, 0),
                  m.forAxis(axes, trailing, d, 0));
  }
  if (inside) {
    Type element = inType.getElementType();
    Value fill;
    if (isRuntime(n, 2)) {
      if (n.inputType(2).getNumElements() != 1)
        return refuse(n.fail("input 'constant_value' must hold a single "
                             "value"));
      if (n.inputType(2).getElementType() != element)
        return refuse(n.fail("constant_value's type differs from the "
                             "data's"));
      fill = c.reshape(n.input(2), {});
    } else if (n.hasInput(2)) {
      std::optional<DenseElementsAttr> v = n.constantInput(2);
      if (v->getNumElements() != 1)
        return refuse(n.fail("input 'constant_value' must hold a single "
                             "value"));
      fill = c.reshape(n.input(2), {});
    } else {
      fill = c.scalar(element, 0.0);
    }
    x = c.make<SelectOp>({inside, x, fill});
  }
  return bindComposed(c, x);
}

} // namespace kiln::onnx_frontend

//===- HostGuards.cpp - Checks on shape inputs taken at run time ---------===//
//
// The `ShapeGuard` host step (HostGuards.h): the value of a graph input that
// decides a shape, checked against what the artifact was compiled for. The
// shape functions are the host's own data movement's (HostSteps.cpp), so a
// guard accepts exactly the values onnxruntime would give the compiled
// shape: [2, -1] and [2, 6] alike for a Reshape to 2x6, axes [-1] and [2]
// alike for a rank-3 reduction.
//
//===----------------------------------------------------------------------===//

#include "HostGuards.h"

#include "HostDataOps.h"
#include "HostStringOps.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

namespace kiln::runtime {

namespace {

constexpr std::string_view kKinds[] = {
    "axes-one-of",   "reshape",      "squeeze", "unsqueeze",
    "expand",        "equal",        "slice",   "pad",
    "resize-scales", "resize-sizes", "range"};

/// The kinds that read several operands: step input k (or, when it is
/// empty, the ints attribute of the same name) is operand k.
struct OperandKind {
  std::string_view kind;
  std::vector<std::string_view> operands;
};
const OperandKind kOperandKinds[] = {
    {"slice", {"starts", "ends", "axes", "steps"}},
    {"pad", {"pads", "axes"}},
    {"resize-scales", {"scales"}},
    {"resize-sizes", {"sizes"}},
    {"range", {"start", "limit", "delta"}},
};

/// The kinds whose operands are numbers of any type, read in f64 (their
/// constant attributes too, as `%.17g` text).
bool readsDoubles(std::string_view kind) {
  return kind == "resize-scales" || kind == "range";
}

/// A numbers attribute in f64 (absent: none); a text that is not a number
/// is an error naming it.
Expected<std::vector<double>> doublesAttribute(const HostStep &step,
                                               std::string_view name) {
  std::vector<double> out;
  if (const HostAttribute *attribute = step.findAttribute(name))
    for (const std::string &text : attribute->values) {
      char *end = nullptr;
      double value = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0')
        return stepError(step, fmt::format("attribute '{}' holds '{}', not "
                                           "a number",
                                           name, printable(text)));
      out.push_back(value);
    }
  return out;
}

const OperandKind *operandKind(std::string_view kind) {
  for (const OperandKind &k : kOperandKinds)
    if (k.kind == kind)
      return &k;
  return nullptr;
}

/// A single-valued text attribute, or "" when absent.
std::string_view textOf(const HostStep &step, std::string_view name) {
  const HostAttribute *attribute = step.findAttribute(name);
  if (!attribute || attribute->values.size() != 1)
    return {};
  return attribute->values[0];
}

bool flagOf(const HostStep &step, std::string_view name) {
  std::string_view text = textOf(step, name);
  return !text.empty() && text != "0";
}

std::string formatList(const std::vector<int64_t> &values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

/// ReduceX's axes as a set: negative axes from the end, empty meaning all
/// (or none with noop_with_empty_axes).
Expected<std::set<int64_t>> reducedAxes(const std::vector<int64_t> &given,
                                        int64_t rank, bool noop) {
  std::set<int64_t> axes;
  if (given.empty()) {
    if (!noop)
      for (int64_t d = 0; d < rank; ++d)
        axes.insert(d);
    return axes;
  }
  for (int64_t axis : given) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank || !axes.insert(a).second)
      return makeError("axis {} is out of range or repeated for rank {}", axis,
                       rank);
  }
  return axes;
}

/// The guarded input's values as integers: i64 and i32 as they are, f32
/// and f64 truncated toward zero (OneHot's depth, as kilnc reads a constant
/// one).
Expected<std::vector<int64_t>> guardedValues(const HostValue &value,
                                             const std::string &what) {
  if (value.isString ||
      (value.dtype != DType::F32 && value.dtype != DType::F64))
    return integersOf(value, what);
  std::vector<int64_t> out;
  size_t size = value.dtype == DType::F32 ? 4 : 8;
  for (size_t at = 0; at + size <= value.data.size(); at += size) {
    double v;
    if (size == 4) {
      float f;
      std::memcpy(&f, value.data.data() + at, 4);
      v = f;
    } else {
      std::memcpy(&v, value.data.data() + at, 8);
    }
    // A value no int64 holds cannot equal a compiled size.
    if (!(std::fabs(v) < 9.2e18))
      return makeError("{} holds {}, not a size", what, v);
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

/// A float input's values (Resize's scales) in f64, as kilnc reads a
/// constant one.
Expected<std::vector<double>> floatValues(const HostValue &value,
                                          const std::string &what) {
  if (value.isString)
    return makeError("{} is not a number", what);
  if (value.dtype != DType::F32 && value.dtype != DType::F64) {
    Expected<std::vector<int64_t>> ints = integersOf(value, what);
    if (!ints)
      return ints.takeError();
    return std::vector<double>(ints->begin(), ints->end());
  }
  std::vector<double> out;
  size_t size = value.dtype == DType::F32 ? 4 : 8;
  for (size_t at = 0; at + size <= value.data.size(); at += size) {
    if (size == 4) {
      float f;
      std::memcpy(&f, value.data.data() + at, 4);
      out.push_back(f);
    } else {
      double d;
      std::memcpy(&d, value.data.data() + at, 8);
      out.push_back(d);
    }
  }
  return out;
}

using Values = std::map<std::string, HostValue, std::less<>>;

/// The guards that read several operands (kOperandKinds): Slice's window,
/// Pad's pads, Resize's scales, each checked against the compiled output
/// shape with the spec's shape function.
Error runOperandGuard(const HostStep &step, const OperandKind &kind,
                      const Values &values) {
  std::vector<int64_t> shape = *intsAttribute(step, "input_shape");
  std::vector<int64_t> expected = *intsAttribute(step, "expected");
  int64_t rank = static_cast<int64_t>(shape.size());
  // "input 'b' (starts) is [1], input 'e' (ends) is [3]": the run-time
  // operands as the message gives them.
  std::string given;
  std::vector<std::vector<int64_t>> ints(kind.operands.size());
  std::vector<std::vector<double>> doubles(kind.operands.size());
  for (size_t k = 0; k < kind.operands.size(); ++k) {
    std::string role(kind.operands[k]);
    bool runtime = k < step.inputs.size() && !step.inputs[k].empty();
    if (!runtime) {
      if (readsDoubles(kind.kind))
        doubles[k] = *doublesAttribute(step, role);
      else
        ints[k] = *intsAttribute(step, role);
      continue;
    }
    const std::string &name = step.inputs[k];
    const HostValue &value = values.find(name)->second;
    std::string text;
    if (readsDoubles(kind.kind)) {
      Expected<std::vector<double>> v =
          floatValues(value, "input '" + name + "'");
      if (!v)
        return stepError(step, v.error().message());
      doubles[k] = v.take();
      text = fmt::format("[{}]", fmt::join(doubles[k], ", "));
    } else {
      Expected<std::vector<int64_t>> v =
          guardedValues(value, "input '" + name + "'");
      if (!v)
        return stepError(step, v.error().message());
      ints[k] = v.take();
      text = formatList(ints[k]);
    }
    given += fmt::format("{}input '{}' ({}) is {}", given.empty() ? "" : ", ",
                         name, role, text);
  }
  auto invalid = [&](const std::string &why) {
    return stepError(step, fmt::format("{}: {}", given, why));
  };

  const std::vector<double> &scales = doubles[0];
  Shape result(shape);
  if (kind.kind == "range") {
    // max(ceil((limit - start) / delta), 0) elements, in f64 as kilnc
    // counts constant ones.
    for (size_t k = 0; k < 3; ++k)
      if (doubles[k].size() != 1)
        return invalid(fmt::format("{} must hold one value", kind.operands[k]));
    double start = doubles[0][0], limit = doubles[1][0], delta = doubles[2][0];
    if (delta == 0)
      return invalid("delta is zero");
    double count = std::ceil((limit - start) / delta);
    if (!(count < 9.2e18))
      return invalid("the range has no size an int64 holds");
    result = {std::max<int64_t>(0, static_cast<int64_t>(count))};
  } else if (kind.kind == "slice") {
    Expected<SliceWindow> window =
        sliceWindow(shape, ints[0], ints[1], ints[2], ints[3]);
    if (!window)
      return invalid(window.error().message());
    result = window->count;
  } else if (kind.kind == "resize-sizes") {
    // keep_aspect_ratio_policy not_larger (or `not_smaller`): one scale,
    // the least (greatest) size / extent over the axes, in f64 as kilnc
    // computes it; each axis becomes floor(scale * extent + 0.5).
    std::vector<int64_t> axes = *intsAttribute(step, "axes");
    bool notSmaller = flagOf(step, "not_smaller");
    if (ints[0].size() != axes.size())
      return invalid(
          fmt::format("{} sizes for {} axes", ints[0].size(), axes.size()));
    double scale = notSmaller ? 0.0 : INFINITY;
    for (size_t k = 0; k < axes.size(); ++k) {
      if (axes[k] < 0 || axes[k] >= rank || shape[axes[k]] == 0)
        return invalid(fmt::format("axis {} has no extent to fit", axes[k]));
      if (ints[0][k] <= 0)
        return invalid(fmt::format("size {} is not positive", ints[0][k]));
      double ratio =
          static_cast<double>(ints[0][k]) / static_cast<double>(shape[axes[k]]);
      scale = notSmaller ? std::max(scale, ratio) : std::min(scale, ratio);
    }
    for (int64_t d : axes)
      result[d] = static_cast<int64_t>(
          std::floor(scale * static_cast<double>(shape[d]) + 0.5));
  } else {
    // pad and resize-scales: per axis (all when none are given) a pair of
    // pads, or a scale.
    std::vector<int64_t> axes =
        kind.kind == "pad" ? ints[1] : *intsAttribute(step, "axes");
    if (axes.empty())
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    size_t count = kind.kind == "pad" ? ints[0].size() : scales.size();
    size_t wanted = kind.kind == "pad" ? 2 * axes.size() : axes.size();
    if (count != wanted)
      return invalid(fmt::format("{} values for {} axes", count, axes.size()));
    std::vector<bool> seen(rank, false);
    for (size_t k = 0; k < axes.size(); ++k) {
      if (axes[k] < -rank || axes[k] >= rank)
        return invalid(
            fmt::format("axis {} is out of range for rank {}", axes[k], rank));
      int64_t d = axes[k] < 0 ? axes[k] + rank : axes[k];
      if (seen[d])
        return invalid(fmt::format("axis {} is repeated", axes[k]));
      seen[d] = true;
      if (kind.kind == "pad") {
        result[d] = shape[d] + ints[0][k] + ints[0][k + axes.size()];
        if (result[d] < 0)
          return invalid(fmt::format("pads {} and {} remove more than the "
                                     "{} elements of dimension {}",
                                     ints[0][k], ints[0][k + axes.size()],
                                     shape[d], d));
        continue;
      }
      double scale = scales[k];
      double extent = std::floor(static_cast<double>(shape[d]) * scale);
      if (!(scale > 0) || !(extent < 9.2e18))
        return invalid(
            fmt::format("scale {} is not a positive size factor", scale));
      result[d] = static_cast<int64_t>(extent);
    }
  }
  if (result != expected)
    return stepError(
        step, fmt::format("{}, which gives shape {}; this artifact was "
                          "compiled for shape {}, which the model's declared "
                          "shapes fix (bind such values, or compile with "
                          "these inputs as constants)",
                          given, formatShape(result), formatShape(expected)));
  return Error::success();
}

} // namespace

Error verifyShapeGuard(const HostStep &step) {
  std::string_view kind = textOf(step, "kind");
  if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds))
    return stepError(step,
                     fmt::format("guard kind '{}' is not one of "
                                 "axes-one-of, reshape, squeeze, "
                                 "unsqueeze, expand, equal, slice, "
                                 "pad, resize-scales, resize-sizes, range",
                                 printable(std::string(kind))));
  const OperandKind *operands = operandKind(kind);
  size_t maxInputs = operands ? operands->operands.size() : 1;
  bool anyInput = false;
  for (const std::string &input : step.inputs)
    anyInput |= !input.empty();
  if (step.inputs.size() > maxInputs || !anyInput ||
      (!operands && step.inputs[0].empty()))
    return stepError(step, fmt::format("a guard of kind '{}' checks 1 to {} "
                                       "inputs, got {}",
                                       kind, maxInputs, step.inputs.size()));
  if (textOf(step, "op").empty() || textOf(step, "operand").empty())
    return stepError(step, "a guard needs its node's op and operand");
  std::vector<std::string_view> intAttributes{"input_shape", "expected", "free",
                                              "axes"};
  if (operands && !readsDoubles(kind))
    intAttributes.insert(intAttributes.end(), operands->operands.begin(),
                         operands->operands.end());
  if (operands && readsDoubles(kind))
    for (std::string_view name : operands->operands)
      if (Expected<std::vector<double>> v = doublesAttribute(step, name); !v)
        return v.takeError();
  for (std::string_view name : intAttributes) {
    Expected<std::vector<int64_t>> ints = intsAttribute(step, name);
    if (!ints)
      return ints.takeError();
    if (name == "input_shape")
      for (int64_t dim : *ints)
        if (dim < 0)
          return stepError(step, fmt::format("input_shape has dim {}", dim));
  }
  if (kind != "equal" && kind != "range" && !step.findAttribute("input_shape"))
    return stepError(step, "a guard of kind '" + std::string(kind) +
                               "' needs input_shape");
  if (!step.findAttribute("expected"))
    return stepError(step, "a guard needs its expected value");
  return Error::success();
}

Error runShapeGuard(
    const HostStep &step,
    const std::map<std::string, HostValue, std::less<>> &values) {
  std::string_view kind = textOf(step, "kind");
  if (const OperandKind *operands = operandKind(kind))
    return runOperandGuard(step, *operands, values);
  std::string operand(textOf(step, "operand"));
  const std::string &input = step.inputs[0];
  Expected<std::vector<int64_t>> given =
      guardedValues(values.find(input)->second, "input '" + input + "'");
  if (!given)
    return stepError(step, given.error().message());
  // verifyShapeGuard has parsed these already.
  std::vector<int64_t> shape = *intsAttribute(step, "input_shape");
  std::vector<int64_t> expected = *intsAttribute(step, "expected");
  std::string value = formatList(*given);
  auto refuse = [&](const std::string &gives, const std::string &compiled) {
    return stepError(
        step,
        fmt::format(
            "input '{}' ({}) is {}, which {}; this artifact was compiled for "
            "{}, which the model's declared shapes fix (bind that value, or "
            "compile with this input as a constant)",
            input, operand, value, gives, compiled));
  };
  auto invalid = [&](const Error &err) {
    return stepError(step, fmt::format("input '{}' ({}) is {}: {}", input,
                                       operand, value, err.message()));
  };

  if (kind == "equal") {
    // `free`: positions whose value does not matter (AffineGrid's C).
    std::vector<int64_t> free = *intsAttribute(step, "free");
    bool same = given->size() == expected.size();
    for (size_t k = 0; same && k < expected.size(); ++k)
      same = (*given)[k] == expected[k] ||
             std::count(free.begin(), free.end(), int64_t(k)) > 0;
    if (!same)
      return refuse("differs", formatList(expected));
    return Error::success();
  }
  if (kind == "axes-one-of") {
    // `expected`: the compiled axes sets as bitmasks; `free`: one mask of
    // size-1 axes that may be in the given set or not.
    int64_t rank = static_cast<int64_t>(shape.size());
    Expected<std::set<int64_t>> axes =
        reducedAxes(*given, rank, flagOf(step, "noop_with_empty_axes"));
    if (!axes)
      return invalid(axes.error());
    std::vector<int64_t> free = *intsAttribute(step, "free");
    int64_t freeMask = free.empty() ? 0 : free.front();
    int64_t mask = 0;
    for (int64_t d : *axes)
      mask |= int64_t{1} << d;
    for (int64_t choice : expected)
      if (((choice ^ mask) & ~freeMask) == 0)
        return Error::success();
    std::string compiled;
    for (int64_t choice : expected) {
      std::vector<int64_t> set;
      for (int64_t d = 0; d < rank; ++d)
        if (choice & (int64_t{1} << d))
          set.push_back(d);
      compiled += (compiled.empty() ? "" : " or ") + formatList(set);
    }
    return refuse(
        fmt::format("names axes {}", formatList({axes->begin(), axes->end()})),
        "axes " + compiled);
  }
  Expected<Shape> result = makeError("unreachable");
  if (kind == "reshape") {
    result = reshapeTarget(shape, *given, flagOf(step, "allowzero"));
  } else if (kind == "squeeze" || kind == "unsqueeze") {
    result = squeezeShape(shape, *given, kind == "squeeze");
  } else {
    // expand: numpy broadcasting of the input's shape and the given one.
    for (int64_t dim : *given)
      if (dim < 0)
        return invalid(makeError("dim {} is negative", dim));
    std::optional<Shape> out = broadcastShapes(shape, *given);
    result = out ? Expected<Shape>(*out)
                 : Expected<Shape>(makeError(
                       "it does not broadcast with the input's shape {}",
                       formatShape(shape)));
  }
  if (!result)
    return invalid(result.error());
  if (*result != expected)
    return refuse("gives shape " + formatShape(*result),
                  "shape " + formatShape(expected));
  return Error::success();
}

} // namespace kiln::runtime

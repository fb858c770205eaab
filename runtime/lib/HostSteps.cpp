//===- HostSteps.cpp - The host program: checks, dispatch, data movement --===//
//
// verifyHostStep and runHostStep for every host op; the string-specific
// ops (StringSplit, RegexFullMatch, StringNormalizer, LabelEncoder) and the
// number <-> string conversions of Cast are in HostStringOps.cpp, the ops
// of data-dependent shapes (NonZero, Compress, Unique, NonMaxSuppression),
// Gather, Transpose, Slice and Cast between numbers in HostDataOps.cpp. Values
// are whole tensors in a map keyed by their ONNX names; each step reads its
// inputs there and writes its outputs there.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/HostSteps.h"

#include "HostDataOps.h"
#include "HostGuards.h"
#include "HostStringOps.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kiln::runtime {

std::string describeHostType(bool isString, DType dtype) {
  return isString ? "string" : std::string(dtypeName(dtype));
}

const HostAttribute *HostStep::findAttribute(std::string_view name) const {
  for (const HostAttribute &attribute : attributes)
    if (attribute.name == name)
      return &attribute;
  return nullptr;
}

std::string HostStep::describe() const {
  // A ShapeGuard speaks for the node whose shape input it checks.
  std::string_view shown = op;
  if (const HostAttribute *guarded = findAttribute("op");
      op == "ShapeGuard" && guarded && guarded->values.size() == 1)
    shown = guarded->values[0];
  if (!node.empty())
    return fmt::format("node '{}' ({})", node, shown);
  std::string produces = outputs.empty() ? std::string() : outputs.front();
  if (const HostAttribute *guarded = findAttribute("produces");
      outputs.empty() && guarded && guarded->values.size() == 1)
    produces = guarded->values[0];
  return fmt::format("unnamed node producing '{}' ({})", produces, shown);
}

const HostTensorDecl *HostProgram::findInput(std::string_view name) const {
  for (const HostTensorDecl &decl : inputs)
    if (decl.name == name)
      return &decl;
  return nullptr;
}

const HostTensorDecl *HostProgram::findOutput(std::string_view name) const {
  for (const HostTensorDecl &decl : outputs)
    if (decl.name == name)
      return &decl;
  return nullptr;
}

bool HostProgram::writesDeviceInput(std::string_view name) const {
  return std::find(toDevice.begin(), toDevice.end(), name) != toDevice.end();
}

bool HostProgram::hidesDeviceOutput(std::string_view name) const {
  return std::find(hiddenOutputs.begin(), hiddenOutputs.end(), name) !=
         hiddenOutputs.end();
}

const std::vector<std::string_view> &hostStepOps() {
  static const std::vector<std::string_view> ops = {
      "Cast",         "Compress",          "Equal",
      "Gather",       "Identity",          "LabelEncoder",
      "NonMaxSuppression", "NonZero",      "RegexFullMatch",
      "Reshape",      "ShapeGuard",        "Slice",
      "Squeeze",
      "StringConcat", "StringNormalizer",  "StringSplit",
      "Transpose",    "Unique",            "Unsqueeze"};
  return ops;
}

//===- Shape functions, shared with the guards (HostGuards.cpp) ----------===//

/// The numpy broadcast of two shapes, or nothing when they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Expected<Shape> reshapeTarget(const Shape &from, std::vector<int64_t> dims,
                              bool allowZero) {
  uint64_t count = elementCount(from).value_or(0);
  int inferred = -1;
  uint64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowZero) {
      if (i >= from.size())
        return makeError("shape entry {} is 0 but the input has rank {}", i,
                         from.size());
      dims[i] = from[i];
    }
    if (dims[i] == -1) {
      if (inferred >= 0)
        return makeError("the shape has two -1 entries");
      inferred = static_cast<int>(i);
      continue;
    }
    if (dims[i] < 0)
      return makeError("shape entry {} is {}", i, dims[i]);
    known *= static_cast<uint64_t>(dims[i]);
  }
  if (inferred >= 0) {
    if (known == 0 || count % known != 0)
      return makeError("cannot infer the -1 entry: {} elements into {}",
                       count, formatShape(dims));
    dims[inferred] = static_cast<int64_t>(count / known);
    known *= static_cast<uint64_t>(dims[inferred]);
  }
  if (known != count)
    return makeError("{} elements do not fill shape {}", count,
                     formatShape(dims));
  return Shape(dims.begin(), dims.end());
}

Expected<Shape> squeezeShape(const Shape &shape,
                             const std::vector<int64_t> &axes, bool squeeze) {
  int64_t rank = static_cast<int64_t>(shape.size()) +
                 (squeeze ? 0 : static_cast<int64_t>(axes.size()));
  std::vector<bool> marked(rank, false);
  for (int64_t axis : axes) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank || marked[a])
      return makeError("axis {} is out of range or repeated for rank {}",
                       axis, rank);
    marked[a] = true;
  }
  Shape next;
  if (squeeze) {
    for (int64_t d = 0; d < rank; ++d) {
      bool drop = axes.empty() ? shape[d] == 1 : bool(marked[d]);
      if (drop && shape[d] != 1)
        return makeError("cannot squeeze dim {} of size {}", d, shape[d]);
      if (!drop)
        next.push_back(shape[d]);
    }
  } else {
    size_t from = 0;
    for (int64_t d = 0; d < rank; ++d)
      next.push_back(marked[d] ? 1 : shape[from++]);
  }
  return next;
}

namespace {

struct Arity {
  std::string_view op;
  size_t minInputs, maxInputs, minOutputs, maxOutputs;
};

constexpr Arity kArities[] = {
    {"Cast", 1, 1, 1, 1},
    {"Compress", 2, 2, 1, 1},
    {"Equal", 2, 2, 1, 1},
    {"Gather", 2, 2, 1, 1},
    {"Identity", 1, 1, 1, 1},
    {"LabelEncoder", 1, 1, 1, 1},
    {"NonMaxSuppression", 2, 5, 1, 1},
    {"NonZero", 1, 1, 1, 1},
    {"RegexFullMatch", 1, 1, 1, 1},
    {"Reshape", 2, 2, 1, 1},
    {"ShapeGuard", 0, 4, 0, 0},
    {"Slice", 1, 5, 1, 1},
    {"Squeeze", 1, 2, 1, 1},
    {"StringConcat", 2, 2, 1, 1},
    {"StringNormalizer", 1, 1, 1, 1},
    {"StringSplit", 1, 1, 1, 2},
    {"Transpose", 1, 1, 1, 1},
    {"Unique", 1, 1, 1, 4},
    {"Unsqueeze", 1, 2, 1, 1},
};

/// For each element of `out` (C order), the flat index into `in`, which
/// broadcasts to `out`.
std::vector<uint64_t> broadcastIndices(const Shape &in, const Shape &out) {
  uint64_t count = elementCount(out).value_or(0);
  std::vector<uint64_t> indices(count);
  size_t offset = out.size() - in.size();
  std::vector<int64_t> position(out.size(), 0);
  for (uint64_t flat = 0; flat < count; ++flat) {
    uint64_t index = 0;
    for (size_t d = 0; d < in.size(); ++d)
      index = index * in[d] + (in[d] == 1 ? 0 : position[offset + d]);
    indices[flat] = index;
    for (size_t d = out.size(); d-- > 0;) {
      if (++position[d] < out[d])
        break;
      position[d] = 0;
    }
  }
  return indices;
}

/// The axes of Squeeze/Unsqueeze: the second input (opset 13) or the
/// `axes` attribute.
Expected<std::vector<int64_t>>
axesOf(const HostStep &step,
       const std::map<std::string, HostValue, std::less<>> &values) {
  if (step.inputs.size() > 1 && !step.inputs[1].empty())
    return integersOf(values.find(step.inputs[1])->second, "axes");
  // The attribute's text comes from the file: strtoll, never an exception.
  std::vector<int64_t> axes;
  if (const HostAttribute *attribute = step.findAttribute("axes"))
    for (const std::string &text : attribute->values) {
      char *end = nullptr;
      long long axis = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0')
        return makeError("axis '{}' is not an integer", printable(text));
      axes.push_back(axis);
    }
  return axes;
}

Error runDataMovement(const HostStep &step,
                      std::map<std::string, HostValue, std::less<>> &values) {
  HostValue out = values.find(step.inputs[0])->second;
  Shape &shape = out.shape;
  if (step.op == "Reshape") {
    Expected<std::vector<int64_t>> dims =
        integersOf(values.find(step.inputs[1])->second, "the shape");
    if (!dims)
      return stepError(step, dims.error().message());
    const HostAttribute *allowZero = step.findAttribute("allowzero");
    Expected<Shape> target = reshapeTarget(
        shape, dims.take(), allowZero && !allowZero->values.empty() &&
                                allowZero->values[0] != "0");
    if (!target)
      return stepError(step, target.error().message());
    shape = target.take();
  } else if (step.op == "Squeeze" || step.op == "Unsqueeze") {
    Expected<std::vector<int64_t>> axes = axesOf(step, values);
    if (!axes)
      return stepError(step, axes.error().message());
    Expected<Shape> next =
        squeezeShape(shape, *axes, /*squeeze=*/step.op == "Squeeze");
    if (!next)
      return stepError(step, next.error().message());
    shape = next.take();
  }
  values[step.outputs[0]] = std::move(out);
  return Error::success();
}

/// A binary step's broadcast: the output's shape and, for each of its
/// elements, the element of each input it reads.
struct Broadcast {
  Shape shape;
  std::vector<uint64_t> a, b;
};

Expected<Broadcast> broadcastInputs(const HostStep &step, const HostValue &a,
                                    const HostValue &b) {
  std::optional<Shape> shape = broadcastShapes(a.shape, b.shape);
  if (!shape)
    return stepError(step, fmt::format("shapes {} and {} do not broadcast",
                                       formatShape(a.shape),
                                       formatShape(b.shape)));
  return Broadcast{*shape, broadcastIndices(a.shape, *shape),
                   broadcastIndices(b.shape, *shape)};
}

Error runEqual(const HostStep &step,
               std::map<std::string, HostValue, std::less<>> &values) {
  const HostValue &a = values.find(step.inputs[0])->second;
  const HostValue &b = values.find(step.inputs[1])->second;
  if (!a.isString || !b.isString)
    return stepError(step, "both inputs must be strings on the host");
  Expected<Broadcast> bc = broadcastInputs(step, a, b);
  if (!bc)
    return bc.takeError();
  const std::vector<uint64_t> &ia = bc->a, &ib = bc->b;
  HostValue out;
  out.dtype = DType::Bool;
  out.shape = bc->shape;
  out.data.resize(ia.size());
  for (size_t i = 0; i < ia.size(); ++i)
    out.data[i] = a.strings[ia[i]] == b.strings[ib[i]];
  values[step.outputs[0]] = std::move(out);
  return Error::success();
}

Error runStringConcat(const HostStep &step,
                      std::map<std::string, HostValue, std::less<>> &values) {
  const HostValue &a = values.find(step.inputs[0])->second;
  const HostValue &b = values.find(step.inputs[1])->second;
  Expected<Broadcast> bc = broadcastInputs(step, a, b);
  if (!bc)
    return bc.takeError();
  const std::vector<uint64_t> &ia = bc->a, &ib = bc->b;
  HostValue out;
  out.isString = true;
  out.shape = bc->shape;
  out.strings.resize(ia.size());
  for (size_t i = 0; i < ia.size(); ++i)
    out.strings[i] = a.strings[ia[i]] + b.strings[ib[i]];
  values[step.outputs[0]] = std::move(out);
  return Error::success();
}

} // namespace

Error verifyHostStep(const HostStep &step) {
  const Arity *arity = nullptr;
  for (const Arity &known : kArities)
    if (known.op == step.op)
      arity = &known;
  if (!arity)
    return stepError(step, "not an op the host runs");
  if (step.inputs.size() < arity->minInputs ||
      step.inputs.size() > arity->maxInputs)
    return stepError(step, fmt::format("{} inputs (expected {} to {})",
                                       step.inputs.size(), arity->minInputs,
                                       arity->maxInputs));
  if (step.outputs.size() < arity->minOutputs ||
      step.outputs.size() > arity->maxOutputs)
    return stepError(step, fmt::format("{} outputs (expected {} to {})",
                                       step.outputs.size(), arity->minOutputs,
                                       arity->maxOutputs));
  for (size_t i = 0; i < arity->minInputs; ++i)
    if (step.inputs[i].empty())
      return stepError(step, fmt::format("input {} is missing", i));
  for (const std::string &output : step.outputs)
    if (output.empty())
      return stepError(step, "an output has no name");
  if (step.phase != HostPhase::Before && step.phase != HostPhase::After)
    return stepError(step, fmt::format("phase {} is neither 0 (before the "
                                       "launches) nor 1 (after them)",
                                       uint32_t(step.phase)));
  if (isHostDataOp(step.op))
    return verifyDataOpAttributes(step);
  if (step.op == "ShapeGuard")
    return verifyShapeGuard(step);
  return verifyStringOpAttributes(step);
}

Error runHostStep(const HostStep &step,
                  std::map<std::string, HostValue, std::less<>> &values) {
  if (Error err = verifyHostStep(step))
    return err;
  for (const std::string &input : step.inputs)
    if (!input.empty() && !values.count(input))
      return stepError(step, fmt::format("input '{}' has no value", input));
  if (step.op == "Identity" || step.op == "Reshape" || step.op == "Squeeze" ||
      step.op == "Unsqueeze")
    return runDataMovement(step, values);
  if (isHostDataOp(step.op))
    return runDataOp(step, values);
  if (step.op == "ShapeGuard")
    return runShapeGuard(step, values);
  if (step.op == "Equal")
    return runEqual(step, values);
  if (step.op == "StringConcat") {
    for (size_t i = 0; i < 2; ++i)
      if (!values.find(step.inputs[i])->second.isString)
        return stepError(step, "inputs must be strings");
    return runStringConcat(step, values);
  }
  return runStringOp(step, values);
}

} // namespace kiln::runtime

//===----------------------------------------------------------------------===//
// The program as a whole
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Artifact.h"

#include <set>

namespace kiln::runtime {

Error verifyHostProgram(const Artifact &artifact) {
  const HostProgram &host = artifact.host;
  auto sectionError = [](const std::string &message) {
    return makeError("section 'host-steps': {}", message);
  };
  std::set<std::string, std::less<>> defined, deviceOutputs;
  for (const HostTensorDecl &decl : host.inputs) {
    if (decl.name.empty() || !defined.insert(decl.name).second)
      return sectionError(fmt::format("input '{}' is unnamed or repeated",
                                      decl.name));
    if (!elementCount(decl.shape))
      return sectionError(fmt::format("input '{}': shape {} has a negative "
                                      "dim",
                                      decl.name, formatShape(decl.shape)));
    if (const TensorSignature *device = artifact.findInput(decl.name))
      if (decl.isString || device->dtype != decl.dtype ||
          device->shape != decl.shape)
        return sectionError(fmt::format("input '{}' differs from the "
                                        "signature's input of that name",
                                        decl.name));
  }
  for (const HostConstant &constant : host.constants) {
    const HostValue &value = constant.value;
    if (constant.name.empty() || !defined.insert(constant.name).second)
      return sectionError(fmt::format("constant '{}' is unnamed or repeated",
                                      constant.name));
    std::optional<uint64_t> count = elementCount(value.shape);
    bool fits = count && (value.isString
                              ? value.strings.size() == *count
                              : value.data.size() ==
                                    tensorByteSize(value.dtype, value.shape));
    if (!fits)
      return sectionError(fmt::format("constant '{}': its data does not "
                                      "match shape {}",
                                      constant.name,
                                      formatShape(value.shape)));
  }
  for (const std::string &name : host.fromDevice) {
    if (!artifact.findOutput(name))
      return sectionError(fmt::format("device output '{}' is not in the "
                                      "signature",
                                      name));
    deviceOutputs.insert(name);
  }
  for (const std::string &name : host.hiddenOutputs)
    if (!deviceOutputs.count(name))
      return sectionError(fmt::format("hidden output '{}' is not a device "
                                      "output the host reads",
                                      name));
  std::set<std::string, std::less<>> beforeDefined = defined;
  for (const HostStep &step : host.steps) {
    if (Error err = verifyHostStep(step))
      return sectionError(err.message());
    bool after = step.phase == HostPhase::After;
    for (const std::string &input : step.inputs)
      if (!input.empty() && !defined.count(input) &&
          !(after && deviceOutputs.count(input)))
        return sectionError(fmt::format("{}: input '{}' is not defined "
                                        "before it",
                                        step.describe(), input));
    for (const std::string &output : step.outputs) {
      if (!defined.insert(output).second || deviceOutputs.count(output))
        return sectionError(fmt::format("{}: output '{}' is defined twice",
                                        step.describe(), output));
      if (!after)
        beforeDefined.insert(output);
    }
  }
  for (const std::string &name : host.toDevice) {
    if (!artifact.findInput(name))
      return sectionError(fmt::format("device input '{}' is not in the "
                                      "signature",
                                      name));
    if (!beforeDefined.count(name))
      return sectionError(fmt::format("device input '{}' is not computed "
                                      "before the launches",
                                      name));
  }
  std::set<std::string, std::less<>> outputNames;
  for (const HostTensorDecl &decl : host.outputs) {
    if (decl.name.empty() || !outputNames.insert(decl.name).second ||
        (artifact.findOutput(decl.name) &&
         !host.hidesDeviceOutput(decl.name)))
      return sectionError(fmt::format("output '{}' is unnamed or repeated",
                                      decl.name));
    if (!defined.count(decl.name) && !deviceOutputs.count(decl.name))
      return sectionError(fmt::format("output '{}' is not computed",
                                      decl.name));
    for (int64_t dim : decl.shape)
      if (dim < -1)
        return sectionError(fmt::format("output '{}': dim {} is below -1",
                                        decl.name, dim));
  }
  return Error::success();
}

} // namespace kiln::runtime

//===- HostPartition.cpp - Move host nodes out to host steps --------------===//
//
// A node is a host node when its op only exists for strings (StringConcat,
// StringSplit, RegexFullMatch, StringNormalizer) or when it is one of the
// ops the host also runs (Cast, CastLike, Identity, Equal, Reshape, Squeeze,
// Unsqueeze, Constant, Gather, Transpose, Slice, Compress, Unique, and
// ai.onnx.ml's LabelEncoder) and touches a STRING tensor. Any other node that touches a STRING tensor is refused, naming it.
//
// A node whose output shape depends on its data is a host node too:
// NonZero of a value that is not a constant, Compress by such a condition
// (the importer folds the constant ones), Unique and NonMaxSuppression
// always; and so is every node of the ops the host runs on numbers (those,
// Gather, Transpose, Slice, Cast, Identity, Reshape, Squeeze, Unsqueeze)
// that reads a host result no kernel can take: one made after the
// launches, or one whose shape only the run knows.
//
// A host node runs before the launches unless it reads a device result;
// then it runs after them, and a device node may not read what it makes
// (that would need a host step between kernels, which the plan does not
// have yet). Numeric values crossing over become graph inputs of the device
// graph (computed by the host) or extra graph outputs (read by the host),
// which is why their shapes must be known here.
//
//===----------------------------------------------------------------------===//

#include "HostPartition.h"

#include "HostNodes.h"

#include "NodeImporter.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cstdio>
#include <cstring>
#include <optional>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

namespace rt = kiln::runtime;
using namespace host;


/// A static shape, or nothing where a dim is unknown here.
using MaybeShape = std::optional<rt::Shape>;

MaybeShape broadcast(const MaybeShape &a, const MaybeShape &b) {
  if (!a || !b)
    return std::nullopt;
  size_t rank = std::max(a->size(), b->size());
  rt::Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a->size() ? 1 : (*a)[i - (rank - a->size())];
    int64_t db = i < rank - b->size() ? 1 : (*b)[i - (rank - b->size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

class Partitioner {
public:
  Partitioner(onnx::ModelProto &model, const ImportOptions &options,
              StringRef baseDir, MLIRContext &context,
              rt::HostProgram &program, std::string &error)
      : model(model), graph(*model.mutable_graph()), options(options),
        baseDir(baseDir), context(context), program(program), error(error) {}

  LogicalResult run();

private:
  LogicalResult fail(const Twine &message) {
    if (error.empty())
      error = message.str();
    return failure();
  }
  void collectTypes();
  int32_t typeOf(StringRef name) const {
    auto it = types.find(name);
    return it == types.end() ? 0 : it->second;
  }
  bool isHostNode(const onnx::NodeProto &node) const;
  /// A data-dependent node whose data is not a constant.
  bool isDataDependentHostNode(const onnx::NodeProto &node) const;
  /// Values the importer sees as constants: initializers, Constant
  /// results, Shape and Size results (shapes are static), and results of
  /// nodes whose inputs are all constants.
  void collectConstants();
  LogicalResult inferNode(const onnx::NodeProto &node);
  LogicalResult makeStep(const onnx::NodeProto &node, rt::HostPhase phase);
  LogicalResult addConstant(const onnx::TensorProto &tensor,
                            const std::string &name);
  /// A graph input's or output's declaration, all but its shape: STRING,
  /// or the number type host steps read or write.
  FailureOr<rt::HostTensorDecl> declare(const std::string &name,
                                        bool isInput);
  LogicalResult rewriteGraph(const llvm::StringSet<> &deviceReads);
  int64_t mlOpset() const {
    int64_t version = 0;
    for (const onnx::OperatorSetIdProto &id : model.opset_import())
      if (id.domain() == kMLDomain)
        version = id.version();
    return version;
  }

  onnx::ModelProto &model;
  onnx::GraphProto &graph;
  const ImportOptions &options;
  StringRef baseDir;
  MLIRContext &context;
  rt::HostProgram &program;
  std::string &error;

  llvm::StringMap<int32_t> types;
  llvm::StringMap<MaybeShape> shapes;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringSet<> graphInputs;
  llvm::StringSet<> constants;
  /// Host node outputs, and which host nodes run after the launches.
  llvm::StringMap<rt::HostPhase> hostValues;
  std::vector<const onnx::NodeProto *> hostNodes;
};

void Partitioner::collectTypes() {
  for (const onnx::TensorProto &init : graph.initializer()) {
    initializers[init.name()] = &init;
    types[init.name()] = init.data_type();
    shapes[init.name()] = rt::Shape(init.dims().begin(), init.dims().end());
  }
  for (const auto *infos : {&graph.input(), &graph.output(),
                            &graph.value_info()})
    for (const onnx::ValueInfoProto &info : *infos)
      if (info.type().has_tensor_type() && !types.count(info.name()))
        types[info.name()] = info.type().tensor_type().elem_type();
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    graphInputs.insert(input.name());
    if (!input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    rt::Shape shape;
    bool known = true;
    for (const auto &dim : input.type().tensor_type().shape().dim()) {
      known &= dim.has_dim_value() && dim.dim_value() >= 0;
      shape.push_back(dim.dim_value());
    }
    auto given = options.inputShapes.find(input.name());
    if (given != options.inputShapes.end()) {
      shape.assign(given->second.begin(), given->second.end());
      known = llvm::all_of(shape, [](int64_t d) { return d >= 0; });
    }
    shapes[input.name()] = known ? MaybeShape(shape) : std::nullopt;
  }
}

void Partitioner::collectConstants() {
  constants.clear();
  for (const auto &entry : initializers)
    constants.insert(entry.getKey());
  for (const onnx::NodeProto &node : graph.node()) {
    StringRef op = node.op_type();
    bool constant = isDefaultDomain(node) &&
                    (op == "Constant" || op == "Shape" || op == "Size");
    bool neverFolds = isDataDependentOp(node) &&
                      (op == "Unique" || op == "NonMaxSuppression");
    if (!constant && node.input_size() > 0 && !neverFolds)
      constant = llvm::all_of(node.input(), [&](const std::string &name) {
        return name.empty() || constants.contains(name);
      });
    if (constant)
      for (const std::string &name : node.output())
        constants.insert(name);
  }
}

bool Partitioner::isDataDependentHostNode(const onnx::NodeProto &node) const {
  if (!isDataDependentOp(node))
    return false;
  // The importer folds NonZero of a constant and Compress by a constant
  // condition (a gather on the device); Unique and NonMaxSuppression never.
  StringRef op = node.op_type();
  if (op == "Unique" || op == "NonMaxSuppression")
    return true;
  int decider = op == "Compress" ? 1 : 0;
  return node.input_size() > decider && !node.input(decider).empty() &&
         !constants.contains(node.input(decider));
}

bool Partitioner::isHostNode(const onnx::NodeProto &node) const {
  if (node.domain() != kMLDomain && isStringOnlyOp(node.op_type()))
    return true;
  if (isDataDependentHostNode(node))
    return true;
  // A host result a kernel cannot take (one made after the launches, or
  // one whose shape only the run knows) keeps its readers on the host.
  if (isHostNumericOp(node) &&
      llvm::any_of(node.input(), [&](const std::string &name) {
        auto host = hostValues.find(name);
        return !name.empty() && host != hostValues.end() &&
               (host->second == rt::HostPhase::After ||
                !shapes.lookup(name));
      }))
    return true;
  if (!isHostCapableOp(node))
    return false;
  for (const std::string &name : node.input())
    if (!name.empty() && typeOf(name) == kOnnxString)
      return true;
  for (const std::string &name : node.output())
    if (typeOf(name) == kOnnxString)
      return true;
  return false;
}

/// Types and (where static) shapes of a node's outputs: for the ops the
/// host runs, from the op's rule; for a device node, nothing is needed.
LogicalResult Partitioner::inferNode(const onnx::NodeProto &node) {
  StringRef op = node.op_type();
  auto attrInt = [&](StringRef name, int64_t fallback) {
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.name() == name)
        return attr.i();
    return fallback;
  };
  auto inShape = [&](int i) -> MaybeShape {
    if (i >= node.input_size())
      return std::nullopt;
    auto it = shapes.find(node.input(i));
    return it == shapes.end() ? std::nullopt : it->second;
  };
  auto set = [&](int i, int32_t type, MaybeShape shape) {
    if (i >= node.output_size() || node.output(i).empty())
      return;
    if (!types.count(node.output(i)) || types[node.output(i)] == 0)
      types[node.output(i)] = type;
    shapes[node.output(i)] = std::move(shape);
  };
  int32_t in0 = node.input_size() ? typeOf(node.input(0)) : 0;
  if (node.domain() == kMLDomain) {
    if (op == "LabelEncoder")
      set(0, labelEncoderValueType(node), inShape(0));
  } else if (op == "Cast") {
    set(0, static_cast<int32_t>(attrInt("to", 0)), inShape(0));
  } else if (op == "CastLike") {
    set(0, node.input_size() > 1 ? typeOf(node.input(1)) : 0, inShape(0));
  } else if (op == "Identity") {
    set(0, in0, inShape(0));
  } else if (op == "Equal") {
    set(0, onnx::TensorProto::BOOL, broadcast(inShape(0), inShape(1)));
  } else if (op == "RegexFullMatch") {
    set(0, onnx::TensorProto::BOOL, inShape(0));
  } else if (op == "StringConcat") {
    set(0, kOnnxString, broadcast(inShape(0), inShape(1)));
  } else if (op == "StringNormalizer") {
    set(0, kOnnxString, std::nullopt);
  } else if (op == "StringSplit") {
    set(0, kOnnxString, std::nullopt);
    set(1, onnx::TensorProto::INT64, inShape(0));
  } else if (op == "Constant") {
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.name() == "value" && attr.has_t())
        set(0, attr.t().data_type(),
            rt::Shape(attr.t().dims().begin(), attr.t().dims().end()));
      if (attr.name() == "value_strings")
        set(0, kOnnxString, rt::Shape{attr.strings_size()});
    }
  } else if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
             op == "Slice" || op == "Compress") {
    // Shapes through data movement are only needed when a result goes to
    // the device; the step computes them at run time otherwise.
    set(0, in0, std::nullopt);
  } else if (op == "NonZero" || op == "NonMaxSuppression") {
    set(0, onnx::TensorProto::INT64, std::nullopt);
  } else if (op == "Unique") {
    set(0, in0, std::nullopt);
    for (int i = 1; i < 4; ++i)
      set(i, onnx::TensorProto::INT64, std::nullopt);
  } else if (op == "Gather") {
    MaybeShape data = inShape(0), indices = inShape(1), out;
    int64_t axis = attrInt("axis", 0);
    if (data && indices && !data->empty()) {
      int64_t rank = static_cast<int64_t>(data->size());
      if (axis < 0)
        axis += rank;
      if (axis >= 0 && axis < rank) {
        out = rt::Shape(data->begin(), data->begin() + axis);
        out->insert(out->end(), indices->begin(), indices->end());
        out->insert(out->end(), data->begin() + axis + 1, data->end());
      }
    }
    set(0, in0, out);
  } else if (op == "Transpose") {
    MaybeShape in = inShape(0), out;
    if (in) {
      SmallVector<int64_t> perm;
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.name() == "perm")
          perm.assign(attr.ints().begin(), attr.ints().end());
      if (perm.empty())
        for (size_t d = in->size(); d-- > 0;)
          perm.push_back(static_cast<int64_t>(d));
      if (perm.size() == in->size() &&
          llvm::all_of(perm, [&](int64_t p) {
            return p >= 0 && p < static_cast<int64_t>(in->size());
          })) {
        out = rt::Shape();
        for (int64_t p : perm)
          out->push_back((*in)[p]);
      }
    }
    set(0, in0, out);
  }
  return success();
}

LogicalResult Partitioner::addConstant(const onnx::TensorProto &tensor,
                                       const std::string &name) {
  rt::HostConstant constant;
  constant.name = name;
  rt::HostValue &value = constant.value;
  value.shape.assign(tensor.dims().begin(), tensor.dims().end());
  if (tensor.data_type() == kOnnxString) {
    value.isString = true;
    value.strings.assign(tensor.string_data().begin(),
                         tensor.string_data().end());
    std::optional<uint64_t> count = rt::elementCount(value.shape);
    if (!count || *count != value.strings.size())
      return fail("tensor '" + name + "': " + Twine(value.strings.size()) +
                  " strings for shape " + rt::formatShape(value.shape));
  } else {
    std::optional<rt::DType> dtype = runtimeDType(tensor.data_type());
    if (!dtype)
      return fail("tensor '" + name + "': element type " +
                  onnxTypeName(tensor.data_type()) +
                  " is not supported in host steps");
    std::string decodeError;
    FailureOr<DecodedTensor> decoded =
        decodeTensorData(tensor, baseDir, &context, decodeError);
    if (failed(decoded))
      return fail(decodeError);
    value.dtype = *dtype;
    value.data.assign(decoded->bytes.begin(), decoded->bytes.end());
  }
  program.constants.push_back(std::move(constant));
  return success();
}

LogicalResult Partitioner::makeStep(const onnx::NodeProto &node,
                                    rt::HostPhase phase) {
  rt::HostStep step;
  step.op = node.op_type();
  step.node = node.name();
  step.phase = phase;
  step.inputs.assign(node.input().begin(), node.input().end());
  step.outputs.assign(node.output().begin(), node.output().end());
  // Trailing optional outputs left unnamed are dropped; Unique's others
  // get a name nothing reads.
  while (!step.outputs.empty() && step.outputs.back().empty())
    step.outputs.pop_back();
  for (size_t i = 1; i < step.outputs.size(); ++i)
    if (step.outputs[i].empty())
      step.outputs[i] = step.outputs[0] + "__kiln_unused_" + std::to_string(i);
  if (node.domain() == kMLDomain) {
    if (failed(labelEncoderAttributes(
            node, mlOpset(), [&](StringRef name) { return typeOf(name); },
            baseDir, context, step, error)))
      return failure();
    if (runtime::Error err = rt::verifyHostStep(step))
      return fail(err.message());
    program.steps.push_back(std::move(step));
    return success();
  }
  for (const onnx::AttributeProto &attr : node.attribute()) {
    rt::HostAttribute attribute{attr.name(), {}};
    switch (attr.type()) {
    case onnx::AttributeProto::INT:
      attribute.values.push_back(std::to_string(attr.i()));
      break;
    case onnx::AttributeProto::INTS:
      for (int64_t v : attr.ints())
        attribute.values.push_back(std::to_string(v));
      break;
    case onnx::AttributeProto::STRING:
      attribute.values.push_back(attr.s());
      break;
    case onnx::AttributeProto::STRINGS:
      attribute.values.assign(attr.strings().begin(), attr.strings().end());
      break;
    default:
      return fail(describeNode(node) + ": attribute '" + attr.name() +
                  "' has a type host steps do not take");
    }
    step.attributes.push_back(std::move(attribute));
  }
  // Cast's `to` and CastLike's `like` become the runtime's type name.
  if (step.op == "Cast" || step.op == "CastLike") {
    int32_t to = typeOf(node.output(0));
    std::string target = "string";
    if (to != kOnnxString) {
      std::optional<rt::DType> dtype = runtimeDType(to);
      if (!dtype)
        return fail(describeNode(node) + ": cast between STRING and " +
                    onnxTypeName(to) + " is not supported");
      target = std::string(rt::dtypeName(*dtype));
    }
    llvm::erase_if(step.attributes, [](const rt::HostAttribute &a) {
      return a.name == "to" || a.name == "saturate";
    });
    step.attributes.push_back({"to", {target}});
    if (step.op == "CastLike")
      step.inputs.resize(1);
    step.op = "Cast";
    int32_t from = typeOf(node.input(0));
    if (from != kOnnxString && from != 0 && to == kOnnxString) {
      std::optional<rt::DType> dtype = runtimeDType(from);
      if (!dtype || *dtype == rt::DType::F16 || *dtype == rt::DType::BF16)
        return fail(describeNode(node) + ": cast from " + onnxTypeName(from) +
                    " to STRING is not supported (from FLOAT, DOUBLE, the "
                    "integer types and BOOL it is)");
    }
  }
  if (runtime::Error err = rt::verifyHostStep(step))
    return fail(err.message());
  program.steps.push_back(std::move(step));
  return success();
}

LogicalResult Partitioner::run() {
  collectTypes();
  // Types flow through the ops the host runs; nodes are in graph order,
  // which ONNX requires to be topological.
  for (const onnx::NodeProto &node : graph.node())
    if (failed(inferNode(node)))
      return failure();
  if (splitLabelEncoders(graph,
                         [&](StringRef name) { return typeOf(name); })) {
    types.clear();
    shapes.clear();
    initializers.clear();
    graphInputs.clear();
    collectTypes();
    for (const onnx::NodeProto &node : graph.node())
      if (failed(inferNode(node)))
        return failure();
  }
  bool any = false;
  for (const auto &entry : types)
    any |= entry.second == kOnnxString;
  for (const onnx::NodeProto &node : graph.node())
    any |= node.domain() != kMLDomain && isStringOnlyOp(node.op_type());
  collectConstants();
  for (const onnx::NodeProto &node : graph.node())
    any |= isDataDependentHostNode(node);
  if (!any)
    return success();

  // Every value a node reads is defined (the importer's own check comes
  // after the partition; reliability finding 22: a host Gather reading a
  // name nothing defines became a step the artifact check refused).
  llvm::StringSet<> defined;
  for (const onnx::ValueInfoProto &in : graph.input())
    defined.insert(in.name());
  for (const onnx::TensorProto &init : graph.initializer())
    defined.insert(init.name());
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &out : node.output())
      defined.insert(out);
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &name : node.input())
      if (!name.empty() && !defined.contains(name))
        return fail(describeNode(node) + ": input '" + name +
                    "' is not produced by any node, graph input or "
                    "initializer");

  // Which nodes run where, and when.
  llvm::StringSet<> deviceMade, deviceReads, hostReads;
  for (const onnx::NodeProto &node : graph.node()) {
    if (!isHostNode(node)) {
      for (const std::string &name : node.input()) {
        if (name.empty())
          continue;
        if (typeOf(name) == kOnnxString)
          return fail(describeNode(node) + ": input '" + name +
                      "' is a STRING tensor, which this op does not take "
                      "(host steps run Cast, CastLike, Identity, Equal, "
                      "Reshape, Squeeze, Unsqueeze, Gather, Transpose, "
                      "Slice, Compress, Unique, StringConcat, StringSplit, "
                      "RegexFullMatch, StringNormalizer and ai.onnx.ml's "
                      "LabelEncoder)");
        auto host = hostValues.find(name);
        if (host != hostValues.end() && host->second == rt::HostPhase::After)
          return fail(describeNode(node) + ": input '" + name +
                      "' comes from a host step that reads a device result; "
                      "a host step between kernels is not supported yet "
                      "(host steps after the launches run Gather, "
                      "Transpose, Slice, Cast, Identity, Reshape, Squeeze, "
                      "Unsqueeze, NonZero, Compress, Unique and "
                      "NonMaxSuppression)");
        deviceReads.insert(name);
      }
      for (const std::string &name : node.output()) {
        if (typeOf(name) == kOnnxString)
          return fail(describeNode(node) + ": output '" + name +
                      "' is a STRING tensor, which this op does not make");
        deviceMade.insert(name);
      }
      continue;
    }
    // Every host op makes a first output (the steps below name it).
    if (node.output_size() == 0 || node.output(0).empty())
      return fail(describeNode(node) + ": the node has no first output");
    rt::HostPhase phase = rt::HostPhase::Before;
    for (const std::string &name : node.input()) {
      if (name.empty())
        continue;
      hostReads.insert(name);
      auto host = hostValues.find(name);
      if (deviceMade.contains(name) ||
          (host != hostValues.end() && host->second == rt::HostPhase::After))
        phase = rt::HostPhase::After;
    }
    for (const std::string &name : node.output())
      if (!name.empty())
        hostValues[name] = phase;
    hostNodes.push_back(&node);
  }

  // Host inputs: graph inputs host steps read (strings always).
  for (const onnx::ValueInfoProto &input : graph.input()) {
    const std::string &name = input.name();
    if (!graphInputs.contains(name) ||
        (!hostReads.contains(name) && typeOf(name) != kOnnxString))
      continue;
    FailureOr<rt::HostTensorDecl> decl = declare(name, /*isInput=*/true);
    if (failed(decl))
      return failure();
    const MaybeShape &shape = shapes[name];
    if (!shape)
      return fail("input '" + name + "' has no fixed shape; give one with "
                  "--shape " + name + "=DIMxDIM...");
    decl->shape = *shape;
    program.inputs.push_back(std::move(*decl));
  }
  // Constants: initializers host steps read, and host Constant nodes.
  for (const auto &entry : initializers)
    if (hostReads.contains(entry.getKey()) ||
        entry.second->data_type() == kOnnxString)
      if (failed(addConstant(*entry.second, entry.getKey().str())))
        return failure();
  for (const onnx::NodeProto *node : hostNodes) {
    if (node->op_type() != "Constant") {
      if (failed(makeStep(*node, hostValues[node->output(0)])))
        return failure();
      continue;
    }
    const onnx::TensorProto *value = nullptr;
    onnx::TensorProto fromStrings; // value_strings: a 1-D STRING tensor
    for (const onnx::AttributeProto &attr : node->attribute()) {
      if (attr.name() == "value" && attr.has_t())
        value = &attr.t();
      if (attr.name() == "value_strings") {
        fromStrings.set_data_type(kOnnxString);
        fromStrings.add_dims(attr.strings_size());
        for (const std::string &text : attr.strings())
          fromStrings.add_string_data(text);
        value = &fromStrings;
      }
    }
    if (!value)
      return fail(describeNode(*node) + ": a STRING constant needs a "
                  "'value' tensor or 'value_strings'");
    if (failed(addConstant(*value, node->output(0))))
      return failure();
  }
  // Values crossing over.
  for (const auto &entry : hostValues) {
    StringRef name = entry.getKey();
    if (deviceReads.contains(name))
      program.toDevice.push_back(name.str());
  }
  for (const auto &entry : hostReads) {
    StringRef name = entry.getKey();
    if (deviceMade.contains(name))
      program.fromDevice.push_back(name.str());
  }
  llvm::sort(program.toDevice);
  llvm::sort(program.fromDevice);
  return rewriteGraph(deviceReads);
}

FailureOr<rt::HostTensorDecl> Partitioner::declare(const std::string &name,
                                                   bool isInput) {
  rt::HostTensorDecl decl;
  decl.name = name;
  decl.isString = typeOf(name) == kOnnxString;
  if (decl.isString)
    return decl;
  std::optional<rt::DType> dtype = runtimeDType(typeOf(name));
  if (!dtype) {
    if (isInput)
      return fail("input '" + name + "' has element type " +
                  onnxTypeName(typeOf(name)) +
                  ", which host steps do not read");
    return fail("output '" + name + "': element type " +
                onnxTypeName(typeOf(name)) + " is not one host steps make");
  }
  decl.dtype = *dtype;
  return decl;
}

LogicalResult Partitioner::rewriteGraph(const llvm::StringSet<> &deviceReads) {
  llvm::StringSet<> graphOutputs;
  for (const onnx::ValueInfoProto &output : graph.output())
    graphOutputs.insert(output.name());
  // Host outputs: graph outputs the host makes or holds.
  for (const onnx::ValueInfoProto &output : graph.output()) {
    const std::string &name = output.name();
    bool onHost = hostValues.count(name) || program.findInput(name);
    for (const rt::HostConstant &constant : program.constants)
      onHost |= constant.name == name;
    if (!onHost)
      continue;
    FailureOr<rt::HostTensorDecl> declared = declare(name, /*isInput=*/false);
    if (failed(declared))
      return failure();
    rt::HostTensorDecl decl = std::move(*declared);
    if (MaybeShape shape = shapes.lookup(name)) {
      decl.shape = *shape;
    } else if (output.type().has_tensor_type() &&
               output.type().tensor_type().has_shape()) {
      // A declared dim below 0 is unknown, as the importer reads inputs
      // (reliability finding 20: -3 reached the artifact's verifier).
      for (const auto &dim : output.type().tensor_type().shape().dim())
        decl.shape.push_back(dim.has_dim_value() && dim.dim_value() >= 0
                                 ? dim.dim_value()
                                 : -1);
    }
    program.outputs.push_back(std::move(decl));
  }

  // The device graph: without host nodes, string initializers, host-only
  // inputs and host outputs; with the values crossing over.
  onnx::GraphProto device;
  device.set_name(graph.name());
  for (const onnx::NodeProto &node : graph.node())
    if (!llvm::is_contained(hostNodes, &node))
      *device.add_node() = node;
  for (const onnx::TensorProto &init : graph.initializer())
    if (init.data_type() != kOnnxString)
      *device.add_initializer() = init;
  // A graph input stays a device input unless it is a string or only host
  // steps read it (an unused one stays, as without host steps).
  for (const onnx::ValueInfoProto &input : graph.input()) {
    const std::string &name = input.name();
    bool hostOnly = typeOf(name) == kOnnxString ||
                    (program.findInput(name) && !deviceReads.contains(name));
    if (!graphInputs.contains(name) || !hostOnly)
      *device.add_input() = input;
  }
  for (const std::string &name : program.toDevice) {
    const onnx::NodeProto *maker = nullptr;
    for (const onnx::NodeProto *node : hostNodes)
      if (llvm::is_contained(node->output(), name))
        maker = node;
    MaybeShape shape = shapes.lookup(name);
    if (!shape)
      return fail((maker ? describeNode(*maker) + ": output '"
                         : std::string("value '")) +
                  name +
                  "' goes to the device, and its shape is known only at run "
                  "time (a device input needs a fixed shape)");
    onnx::ValueInfoProto *input = device.add_input();
    input->set_name(name);
    auto *tensor = input->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(typeOf(name));
    auto *dims = tensor->mutable_shape();
    for (int64_t dim : *shape)
      dims->add_dim()->set_dim_value(dim);
  }
  for (const onnx::ValueInfoProto &output : graph.output())
    if (!program.findOutput(output.name()))
      *device.add_output() = output;
  for (const std::string &name : program.fromDevice) {
    if (graphOutputs.contains(name))
      continue;
    onnx::ValueInfoProto *output = device.add_output();
    output->set_name(name);
    output->mutable_type()->mutable_tensor_type()->set_elem_type(typeOf(name));
    program.hiddenOutputs.push_back(name);
  }
  for (const onnx::ValueInfoProto &info : graph.value_info())
    if (typeOf(info.name()) != kOnnxString)
      *device.add_value_info() = info;
  graph.Swap(&device);
  return success();
}

} // namespace

LogicalResult splitHostSteps(onnx::ModelProto &model,
                             const ImportOptions &options, StringRef baseDir,
                             MLIRContext &context,
                             runtime::HostProgram &program,
                             std::string &error) {
  return Partitioner(model, options, baseDir, context, program, error).run();
}

} // namespace kiln::onnx_frontend

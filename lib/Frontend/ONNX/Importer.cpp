//===- Importer.cpp - ONNX model to kiln IR
//----------------------------------===//
//
// Reads the model, checks what a malformed or unsupported model can get wrong
// (protobuf, opsets, domains, dangling names, cycles, dtypes, shapes), then
// walks the nodes in dependency order handing each to the handler registered
// for its (op type, since-version).
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/ONNX/Importer.h"

#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"

#include "CompositeSignature.h"
#include "HandlerRegistry.h"
#include "SchemaArity.h"
#include "HostPartition.h"
#include "NodeImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <limits>
#include <optional>
#include <queue>

using namespace mlir;

namespace kiln::onnx_frontend {

namespace {
/// Ops whose spec changed before opset 7 have no handler for the older
/// versions, so such a model fails on that node ("not supported at opset
/// N"), not on the opset as a whole.
constexpr int kMinOpset = 1;
constexpr int kMaxOpset = 22;
/// Protobuf messages nested this deep at most (protobuf's default is 100,
/// about 32 levels of If inside If): the parser and the importer recurse
/// once per level, and 400 levels stay far from the stack's end
/// (docs/reliability.md "Limits").
constexpr int kMaxMessageDepth = 400;
/// The domain of ONNX's training operators (Adagrad, Adam, Momentum).
constexpr const char *kTrainingDomain = "ai.onnx.preview.training";
/// onnxruntime's contrib domain: the quantized ops its quantizer writes
/// (QuantizationHandlers.cpp), registered under qualified names at version 1
/// and following onnxruntime 1.20.1's semantics.
constexpr const char *kMicrosoftDomain = "com.microsoft";
/// The traditional-ML domain (MLHandlers.cpp; LabelEncoder on strings is a
/// host step), its ops registered under qualified names and versioned by
/// that domain's opset.
constexpr const char *kMLDomain = "ai.onnx.ml";

std::string describeNode(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return "node '" + node.name() + "' (" + node.op_type() + ")";
  // Unnamed nodes are common in exported models: name them by what they make.
  std::string output = node.output_size() ? node.output(0) : "";
  return "unnamed node producing '" + output + "' (" + node.op_type() + ")";
}

/// The names a node's subgraphs (GRAPH attributes, at any depth) read from
/// enclosing scopes: read there and not defined there.
void collectCapturedNames(const onnx::NodeProto &node,
                          llvm::StringSet<> &captured) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    SmallVector<const onnx::GraphProto *> graphs;
    if (attr.has_g())
      graphs.push_back(&attr.g());
    for (const onnx::GraphProto &g : attr.graphs())
      graphs.push_back(&g);
    for (const onnx::GraphProto *g : graphs) {
      llvm::StringSet<> defined, reads;
      for (const auto &in : g->input())
        defined.insert(in.name());
      for (const auto &init : g->initializer())
        defined.insert(init.name());
      for (const onnx::NodeProto &inner : g->node()) {
        for (const std::string &out : inner.output())
          defined.insert(out);
        for (const std::string &in : inner.input())
          if (!in.empty())
            reads.insert(in);
        collectCapturedNames(inner, reads);
      }
      for (const auto &out : g->output())
        reads.insert(out.name());
      for (const auto &name : reads)
        if (!defined.contains(name.getKey()))
          captured.insert(name.getKey());
    }
  }
}

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return s;
}

/// A symbol-safe version of an ONNX name for resource blob keys.
std::string sanitize(StringRef name) {
  std::string s;
  for (char c : name)
    s += llvm::isAlnum(c) ? c : '_';
  if (s.empty() || llvm::isDigit(s[0]))
    s = "w_" + s;
  return s;
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

class GraphImporter {
public:
  /// Imports the model at `path`, or, when `bytes` is given, the model in
  /// those bytes (then `path` only names it and locates its external data).
  GraphImporter(MLIRContext &context, StringRef path,
                const ImportOptions &options,
                std::optional<StringRef> bytes = std::nullopt)
      : context(context), options(options), path(path.str()),
        baseDir(llvm::sys::path::parent_path(path).str()), bytes(bytes),
        b(&context) {
    if (baseDir.empty())
      baseDir = ".";
  }

  llvm::Expected<OwningOpRef<ModuleOp>> run();

private:
  LogicalResult fail(const Twine &message) {
    if (error.empty())
      error = message.str();
    return failure();
  }
  LogicalResult parseModel();
  LogicalResult readOpsets();
  LogicalResult collectInputs(SmallVectorImpl<Type> &types,
                              SmallVectorImpl<std::string> &names);
  LogicalResult checkSingleDefinitions();
  /// Fills shapeGuards.declared from the graph's declared shapes.
  void collectDeclaredShapes(ArrayRef<const onnx::NodeProto *> order);
  /// The opset a node's domain imports (com.microsoft's ops: 1).
  int64_t domainOpsetOf(const onnx::NodeProto &node) const {
    return node.domain() == kTrainingDomain    ? trainingOpset
           : node.domain() == kMicrosoftDomain ? 1
           : node.domain() == kMLDomain        ? mlOpset
                                               : opset;
  }
  /// The nodes in topological order (Kahn's, keeping the given order where
  /// it already is). `undefinedOk`: an input nothing defines is left for a
  /// later check to report (the first sort runs before the inputs' checks).
  LogicalResult sortNodes(SmallVectorImpl<const onnx::NodeProto *> &order,
                          bool undefinedOk = false);
  LogicalResult importNode(const onnx::NodeProto &node);
  FailureOr<SmallVector<SubgraphValue>>
  importSubgraph(const onnx::GraphProto &graph,
                 ArrayRef<SubgraphValue> inputs);
  LogicalResult bindOutputs(func::FuncOp func);
  FailureOr<Value> lookupValue(StringRef name, const onnx::NodeProto *user);
  FailureOr<Value> materializeInitializer(const onnx::TensorProto &tensor);
  /// A weight global; `fromInitializer` records the initializer as its
  /// origin (kiln/Dialect/Kiln/IR/WeightOrigins.h).
  Value createWeight(StringRef name, RankedTensorType type,
                     ArrayRef<char> bytes, Location loc,
                     bool fromInitializer = false);
  void hoistLargeConstants(func::FuncOp func);
  void removeDeadCode(func::FuncOp func);
  /// Records the inputs' symbolic dims and their ranges on the function and
  /// the module.
  void recordSymbolicDims(func::FuncOp func);

  MLIRContext &context;
  const ImportOptions &options;
  std::string path, baseDir, error;
  std::optional<StringRef> bytes;
  onnx::ModelProto model;
  int64_t opset = 0;
  /// The ai.onnx.preview.training opset, 0 when the model imports none.
  int64_t trainingOpset = 0;
  /// The ai.onnx.ml opset, 0 when the model imports none.
  int64_t mlOpset = 0;
  OpBuilder b;
  OwningOpRef<ModuleOp> module;
  Block *entry = nullptr;
  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  /// The INT4/UINT4 tensors (NodeImporter::setFourBitNames): declared so,
  /// or produced by a node that says so.
  llvm::StringSet<> fourBitNames;
  /// The sequences and optionals, resolved at compile time
  /// (NodeImporter::setCompositeValues).
  CompositeValues composites;
  /// Shape inputs taken at run time (NodeImporter::setShapeInputGuards).
  ShapeInputGuards shapeGuards;
  /// Per graph input: each dim's symbol ("" where fixed); empty when the
  /// input has no symbolic dim.
  SmallVector<SmallVector<std::string>> inputSymbols;
  /// The sequence and optional graph inputs, in order, and how each became
  /// tensors (CompositeSignature.h).
  SmallVector<std::pair<std::string, GraphInputPlan>> compositeInputs;
};

LogicalResult GraphImporter::parseModel() {
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (!bytes) {
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!buffer)
      return fail("cannot read file: " + buffer.getError().message());
    file = std::move(*buffer);
  }
  StringRef data = bytes ? *bytes : file->getBuffer();
  // protobuf's streams count in int: a model of 2 GiB or more is not one
  // ONNX can describe (its own limit), and the cast below would wrap.
  if (data.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return fail("not a valid ONNX model (" + Twine(data.size()) +
                " bytes: protobuf models are limited to 2 GiB; larger "
                "weights belong in external data)");
  auto parse = [&](onnx::ModelProto &into, int depthLimit) {
    google::protobuf::io::ArrayInputStream raw(data.data(),
                                               static_cast<int>(data.size()));
    google::protobuf::io::CodedInputStream stream(&raw);
    stream.SetTotalBytesLimit(std::numeric_limits<int>::max());
    stream.SetRecursionLimit(depthLimit);
    return into.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage();
  };
  if (!parse(model, kMaxMessageDepth)) {
    // Tell a model nested too deep from a damaged file: the same bytes with
    // a deeper (still bounded) limit. Each subgraph level is three messages
    // deep (NodeProto, AttributeProto, GraphProto).
    onnx::ModelProto probe;
    if (parse(probe, 8 * kMaxMessageDepth))
      return fail("subgraphs are nested too deep: the model's messages are "
                  "more than " +
                  Twine(kMaxMessageDepth) +
                  " deep (If/Loop/Scan bodies about " +
                  Twine(kMaxMessageDepth / 3) + " levels deep at most)");
    return fail("not a valid ONNX model (protobuf parse failed: truncated, "
                "not an .onnx file, or nested more than " +
                Twine(8 * kMaxMessageDepth) + " messages deep)");
  }
  if (!model.has_graph() || model.ir_version() <= 0)
    return fail("not a valid ONNX model (no graph or no IR version)");
  return success();
}

LogicalResult GraphImporter::readOpsets() {
  for (const onnx::OperatorSetIdProto &id : model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx")
      opset = id.version();
  // Ops of other domains first: a model of only such ops (ai.onnx.ml,
  // training) often imports no default-domain opset, and the op is the reason.
  for (const onnx::OperatorSetIdProto &id : model.opset_import()) {
    if (id.domain() == kTrainingDomain)
      trainingOpset = id.version();
    if (id.domain() == kMLDomain)
      mlOpset = id.version();
  }
  for (const onnx::NodeProto &node : model.graph().node())
    if (!node.domain().empty() && node.domain() != "ai.onnx" &&
        node.domain() != kMicrosoftDomain &&
        !(node.domain() == kTrainingDomain && trainingOpset > 0) &&
        !(node.domain() == kMLDomain && mlOpset > 0))
      return fail(describeNode(node) + ": op type '" + node.domain() + "." +
                  node.op_type() + "' is not supported (domain '" +
                  node.domain() +
                  "'; only ai.onnx, ai.onnx.ml, ai.onnx.preview.training "
                  "and com.microsoft's quantized ops are)");
  // A model of training or ai.onnx.ml ops only (ONNX's optimizer and
  // ai_onnx_ml node tests) needs no default-domain opset; their handlers
  // do not read it.
  if (opset == 0 && (trainingOpset > 0 || mlOpset > 0) &&
      model.graph().node_size() > 0 &&
      llvm::all_of(model.graph().node(), [](const onnx::NodeProto &node) {
        return node.domain() == kTrainingDomain || node.domain() == kMLDomain;
      }))
    opset = kMaxOpset;
  if (opset == 0)
    return fail("model imports no default-domain (ai.onnx) opset");
  if (opset < kMinOpset || opset > kMaxOpset)
    return fail("opset " + Twine(opset) + " is not supported (Kiln supports " +
                Twine(kMinOpset) + " to " + Twine(kMaxOpset) + ")");
  if (model.graph().sparse_initializer_size() > 0)
    return fail("tensor '" +
                model.graph().sparse_initializer(0).values().name() +
                "': sparse initializers are not supported");
  return success();
}

LogicalResult
GraphImporter::collectInputs(SmallVectorImpl<Type> &types,
                             SmallVectorImpl<std::string> &names) {
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    initializers[init.name()] = &init;
    if (isFourBitType(init.data_type()))
      fourBitNames.insert(init.name());
  }
  for (const auto *infos : {&model.graph().input(), &model.graph().output(),
                            &model.graph().value_info()})
    for (const onnx::ValueInfoProto &info : *infos)
      if (info.type().has_tensor_type() &&
          isFourBitType(info.type().tensor_type().elem_type()))
        fourBitNames.insert(info.name());
  // The model's symbolic dims (its dim_params) and the names --shape gives,
  // for the errors that list them.
  SmallVector<std::string> symbols; // in order of first appearance
  llvm::StringSet<> symbolSet;
  auto addSymbol = [&](const std::string &symbol) {
    if (symbolSet.insert(symbol).second)
      symbols.push_back(symbol);
  };
  for (const onnx::ValueInfoProto &input : model.graph().input())
    if (!initializers.count(input.name()) && input.type().has_tensor_type())
      for (const auto &dim : input.type().tensor_type().shape().dim())
        if (!(dim.has_dim_value() && dim.dim_value() >= 0) &&
            !dim.dim_param().empty())
          addSymbol(dim.dim_param());
  for (const auto &entry : options.inputDimNames)
    for (const std::string &symbol : entry.getValue())
      if (!symbol.empty())
        addSymbol(symbol);
  auto listSymbols = [&]() -> std::string {
    if (symbols.empty())
      return "the model has no symbolic dims";
    return "the model's symbolic dims: " + llvm::join(symbols, ", ");
  };

  llvm::StringSet<> seen, usedSymbols;
  // A sequence or optional input becomes zero or more tensor inputs
  // (CompositeSignature.h); every other input is one.
  SmallVector<GraphInputPlan::Tensor> flatInputs;
  llvm::StringMap<std::string> groupKinds;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    // Before IR version 4 every initializer is listed as an input too.
    if (initializers.count(input.name()))
      continue;
    const std::string &name = input.name();
    // The artifact names each input once (finding 8's twin).
    if (!seen.insert(name).second)
      return fail("input '" + name +
                  "' is listed twice among the graph's inputs");
    std::string planError;
    FailureOr<GraphInputPlan> plan =
        planGraphInput(input, options, &context, planError);
    if (failed(plan))
      return fail(planError);
    for (const GraphInputPlan::Tensor &flat : plan->tensors) {
      if (flat.name != name && !seen.insert(flat.name).second)
        return fail("input '" + flat.name + "' (of sequence '" + name +
                    "') has the name of another graph input");
      flatInputs.push_back(flat);
    }
    if (!plan->groupKind.empty()) {
      groupKinds[name] = plan->groupKind;
      compositeInputs.emplace_back(name, std::move(*plan));
    }
  }
  std::string flagError;
  if (failed(checkCompositeFlags(options, groupKinds, flagError)))
    return fail(flagError);
  for (const GraphInputPlan::Tensor &flat : flatInputs) {
    const std::string &name = flat.name;
    const onnx::TypeProto::Tensor &tensorType = *flat.type;
    Type elementType = convertElementType(tensorType.elem_type(), &context);
    if (!elementType)
      return fail("input '" + name + "' has unsupported element type " +
                  onnxTypeName(tensorType.elem_type()));
    // A sequence's --shape applies to each tensor without its own.
    std::string shapeKey = name;
    if (!flat.shapeFallback.empty() && !options.inputShapes.count(name))
      shapeKey = flat.shapeFallback;
    auto given = options.inputShapes.find(shapeKey);
    if (!tensorType.has_shape() && given == options.inputShapes.end())
      return fail("input '" + name + "' has no shape; give one with --shape " +
                  name + "=DIMxDIM...");
    // A negative or missing dim is unknown; its dim_param (if any) names it.
    // A tensor without a shape takes --shape's rank, every dim unknown.
    SmallVector<int64_t> shape;
    SmallVector<std::string> dimSymbols;
    for (const onnx::TensorShapeProto::Dimension &dim :
         tensorType.shape().dim()) {
      bool known = dim.has_dim_value() && dim.dim_value() >= 0;
      shape.push_back(known ? dim.dim_value() : ShapedType::kDynamic);
      dimSymbols.push_back(known ? std::string() : dim.dim_param());
    }
    if (!tensorType.has_shape()) {
      shape.assign(given->second.size(), ShapedType::kDynamic);
      dimSymbols.assign(given->second.size(), std::string());
    }
    if (given != options.inputShapes.end()) {
      ArrayRef<int64_t> user = given->second;
      ArrayRef<std::string> userSymbols;
      auto named = options.inputDimNames.find(shapeKey);
      if (named != options.inputDimNames.end())
        userSymbols = named->second;
      auto userSymbol = [&](size_t i) {
        return i < userSymbols.size() ? userSymbols[i] : std::string();
      };
      bool compatible = user.size() == shape.size();
      for (size_t i = 0; compatible && i < shape.size(); ++i)
        compatible = !userSymbol(i).empty() ||
                     ShapedType::isDynamic(shape[i]) || shape[i] == user[i];
      if (!compatible) {
        SmallVector<std::string> spelled;
        for (size_t i = 0; i < user.size(); ++i)
          spelled.push_back(userSymbol(i).empty() ? std::to_string(user[i])
                                                  : userSymbol(i));
        return fail("input '" + name + "': --shape " + llvm::join(spelled, "x") +
                    " conflicts with the model's shape " + formatShape(shape));
      }
      // A name in --shape makes the dim symbolic, even one the model fixes.
      for (size_t i = 0; i < shape.size(); ++i) {
        dimSymbols[i] = userSymbol(i);
        shape[i] = dimSymbols[i].empty() ? user[i] : ShapedType::kDynamic;
      }
    }
    // Symbolic dims take their range from --dim; the module is compiled at
    // the range's maximum.
    bool anySymbolic = false;
    // The --shape suggestion: the declared shape with 1 for each open dim.
    auto fixedExample = [&] {
      SmallVector<int64_t> example(shape.begin(), shape.end());
      for (int64_t &d : example)
        if (ShapedType::isDynamic(d))
          d = 1;
      return formatShape(example);
    };
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!ShapedType::isDynamic(shape[i]))
        continue;
      if (dimSymbols[i].empty())
        return fail("input '" + name + "' has an unnamed dynamic dimension " +
                    "(shape " + formatShape(shape) + "); fix it with --shape " +
                    name + "=" + fixedExample() +
                    ", or name it and give its range: --shape " + name +
                    "=N... --dim N=MIN..MAX");
      auto range = options.dimRanges.find(dimSymbols[i]);
      if (range == options.dimRanges.end())
        return fail("input '" + name + "' has symbolic dimension '" +
                    dimSymbols[i] + "' (shape " + formatShape(shape) +
                    ") with no range; " + listSymbols() + "; add --dim " +
                    dimSymbols[i] + "=MIN..MAX[:OPT], or fix it with --shape " +
                    name + "=" + fixedExample());
      shape[i] = range->second.max;
      usedSymbols.insert(dimSymbols[i]);
      anySymbolic = true;
    }
    if (!anySymbolic)
      dimSymbols.clear();
    types.push_back(RankedTensorType::get(shape, elementType));
    names.push_back(name);
    inputSymbols.push_back(std::move(dimSymbols));
  }
  for (const auto &entry : options.inputShapes)
    if (!seen.contains(entry.getKey()))
      return fail("--shape names '" + entry.getKey() +
                  "', which is not a graph input");
  for (const auto &entry : options.dimRanges)
    if (!usedSymbols.contains(entry.getKey()))
      return fail("--dim names '" + entry.getKey() +
                  "', which is not a symbolic dimension of the model (" +
                  listSymbols() + ")");
  return success();
}

void GraphImporter::recordSymbolicDims(func::FuncOp func) {
  SmallVector<NamedAttribute> ranges;
  for (auto [i, dimSymbols] : llvm::enumerate(inputSymbols)) {
    if (dimSymbols.empty())
      continue;
    SmallVector<Attribute> spelled;
    for (const std::string &symbol : dimSymbols)
      spelled.push_back(b.getStringAttr(symbol));
    func.setArgAttr(i, KilnDialect::SymbolicDimsAttrHelper::getNameStr(),
                    b.getArrayAttr(spelled));
  }
  for (const auto &entry : options.dimRanges) {
    const DimRange &r = entry.getValue();
    ranges.push_back(b.getNamedAttr(
        entry.getKey(), b.getDenseI64ArrayAttr({r.min, r.max, r.opt})));
  }
  if (!ranges.empty())
    (*module)->setAttr(KilnDialect::DimRangesAttrHelper::getNameStr(),
                       b.getDictionaryAttr(ranges));
}

LogicalResult GraphImporter::checkSingleDefinitions() {
  // ONNX graphs are in SSA form: each value has one definition, a graph
  // input, an initializer or one node's output. Checked before the host
  // steps leave the graph (reliability finding 16: two string nodes both
  // defining 'y' became two host steps writing it).
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> defined;
  for (const onnx::ValueInfoProto &in : graph.input())
    defined.insert(in.name());
  for (const onnx::TensorProto &init : graph.initializer())
    defined.insert(init.name());
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &out : node.output())
      if (!out.empty() && !defined.insert(out).second)
        return fail(describeNode(node) + ": value '" + out +
                    "' is defined more than once");
  return success();
}

LogicalResult
GraphImporter::sortNodes(SmallVectorImpl<const onnx::NodeProto *> &order,
                         bool undefinedOk) {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringMap<int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string &out : graph.node(i).output())
      if (!out.empty())
        producer.try_emplace(out, i);
  // Graph inputs and initializers (read from the graph: sortNodes also
  // runs before collectInputs fills `initializers`).
  llvm::StringSet<> graphInputs;
  for (const onnx::ValueInfoProto &in : graph.input())
    graphInputs.insert(in.name());
  for (const onnx::TensorProto &init : graph.initializer())
    graphInputs.insert(init.name());

  // Kahn's algorithm; a min-heap of ready nodes keeps the model's order
  // whenever it is already topological.
  std::vector<int> pending(graph.node_size(), 0);
  std::vector<SmallVector<int>> users(graph.node_size());
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    // A Gradient also reads the tensor its attribute `y` names.
    SmallVector<std::string> reads(node.input().begin(), node.input().end());
    if (node.domain() == kTrainingDomain && node.op_type() == "Gradient")
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.name() == "y")
          reads.push_back(attr.s());
    // A node with subgraphs (If, Loop, Scan) also reads what they capture.
    llvm::StringSet<> captured;
    collectCapturedNames(node, captured);
    for (const auto &name : captured)
      reads.push_back(name.getKey().str());
    for (const std::string &in : reads) {
      if (in.empty() || graphInputs.contains(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end() && undefinedOk)
        continue;
      if (it == producer.end())
        return fail(
            describeNode(node) + ": input '" + in +
            "' is not produced by any node, graph input or initializer");
      ++pending[i];
      users[it->second].push_back(i);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < graph.node_size(); ++i)
    if (pending[i] == 0)
      ready.push(i);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(&graph.node(i));
    for (int user : users[i])
      if (--pending[user] == 0)
        ready.push(user);
  }
  if (static_cast<int>(order.size()) != graph.node_size()) {
    for (int i = 0; i < graph.node_size(); ++i)
      if (pending[i] > 0)
        return fail("graph has a cycle through " + describeNode(graph.node(i)));
  }
  return success();
}

FailureOr<Value>
GraphImporter::materializeInitializer(const onnx::TensorProto &tensor) {
  std::string decodeError;
  FailureOr<DecodedTensor> decoded =
      decodeTensorData(tensor, baseDir, &context, decodeError);
  if (failed(decoded))
    return fail(decodeError);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Location loc = NameLoc::get(b.getStringAttr(tensor.name()));
  RankedTensorType type = decoded->type;
  // Some float inputs are modes or bounds, not weights: a Dropout ratio, a
  // Pad constant_value, Clip's min and max (ReLU6 as PyTorch exports it).
  // Their handlers read them at compile time, so they stay constants even
  // when float initializers become globals (kilnc --train; found by
  // test/e2e/train_fuzz.py: Pad and Clip were refused as "must be a
  // compile-time constant").
  bool isOperatorConstant =
      llvm::any_of(model.graph().node(), [&](const auto &n) {
        StringRef op = n.op_type();
        for (int i = 1; i < n.input_size(); ++i) {
          if (n.input(i) != tensor.name())
            continue;
          if ((op == "Dropout" && i == 1) || (op == "Pad" && i == 2) ||
              op == "Clip")
            return true;
        }
        return false;
      });
  bool keepAsGlobal = options.floatInitializersAsGlobals &&
                      !isOperatorConstant &&
                      isa<FloatType>(type.getElementType());
  if ((type.getNumElements() <= options.inlineConstantLimit && !keepAsGlobal) ||
      type.getElementType().isInteger(1)) {
    DenseElementsAttr value = toDenseElements(*decoded);
    if (options.inlinedInitializers && !type.getElementType().isInteger(1))
      options.inlinedInitializers->emplace_back(tensor.name(), value);
    return ConstantOp::create(b, loc, value).getResult();
  }

  return createWeight(
      tensor.name(), type,
      ArrayRef<char>(decoded->bytes.data(), decoded->bytes.size()), loc,
      /*fromInitializer=*/true);
}

Value GraphImporter::createWeight(StringRef name, RankedTensorType type,
                                  ArrayRef<char> bytes, Location loc,
                                  bool fromInitializer) {
  // Weights live in globals backed by resource blobs: never printed inline,
  // and ready to become mutable parameters for training.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entry->getParentOp());
  std::string symbol = name.str();
  for (int i = 1; SymbolTable::lookupSymbolIn(*module, symbol); ++i)
    symbol = name.str() + "_" + std::to_string(i);
  auto blob =
      HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, alignof(uint64_t));
  auto value =
      DenseResourceElementsAttr::get(type, sanitize(symbol), std::move(blob));
  auto global = ml_program::GlobalOp::create(
      b, loc, symbol, type, /*is_mutable=*/false, value,
      b.getStringAttr("private"));
  if (fromInitializer)
    kiln::setWeightOrigin(global, kiln::initializerOrigin(name, type));
  b.setInsertionPointToStart(entry);
  return ml_program::GlobalLoadConstOp::create(
             b, loc, type, FlatSymbolRefAttr::get(&context, symbol))
      .getResult();
}

void GraphImporter::hoistLargeConstants(func::FuncOp func) {
  // Constant nodes (and folds of them) can hold weights too.
  func.walk([&](ConstantOp op) {
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!dense || dense.isSplat() || dense.getElementType().isInteger(1) ||
        dense.getNumElements() <= options.inlineConstantLimit)
      return;
    std::string name = "constant";
    if (auto nameLoc = dyn_cast<NameLoc>(op.getLoc()))
      name = nameLoc.getName().str();
    Value weight = createWeight(name, cast<RankedTensorType>(dense.getType()),
                                dense.getRawData(), op.getLoc());
    // createWeight loads it at the top of main; a loop body loads its own.
    if (func != entry->getParentOp())
      weight.getDefiningOp()->moveBefore(&func.front(), func.front().begin());
    op.replaceAllUsesWith(weight);
    op.erase();
  });
}

/// "a sequence" or "an optional", for messages.
static const char *compositeKindName(const CompositeValue &value) {
  return value.kind == CompositeValue::Kind::Sequence ? "a sequence"
                                                      : "an optional";
}

FailureOr<Value> GraphImporter::lookupValue(StringRef name,
                                            const onnx::NodeProto *user) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto init = initializers.find(name);
  if (init != initializers.end()) {
    FailureOr<Value> value = materializeInitializer(*init->second);
    if (failed(value))
      return failure();
    values[name] = *value;
    return *value;
  }
  // (Sequences and optionals are looked up by the callers, in composites.)
  std::string where = user ? describeNode(*user) + ": input" : "graph output";
  return fail(where + " '" + name +
              "' has no value (its producer does not set it)");
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node) {
  // Ops of the training domain are registered under qualified names and
  // versioned by that domain's opset.
  // com.microsoft's ops likewise, all at that domain's version 1.
  // ai.onnx.ml's likewise, versioned by theirs.
  bool inTrainingDomain = node.domain() == kTrainingDomain;
  bool inMicrosoftDomain = node.domain() == kMicrosoftDomain;
  bool inMLDomain = node.domain() == kMLDomain;
  std::string opType = inTrainingDomain || inMicrosoftDomain || inMLDomain
                           ? node.domain() + "." + node.op_type()
                           : node.op_type();
  int64_t domainOpset = domainOpsetOf(node);
  // Other domains' handlers are registered under qualified names: a
  // default-domain op type spelled like one ("com.microsoft.QLinearSoftmax"
  // with no domain) is not theirs.
  bool qualifiedName = !inTrainingDomain && !inMicrosoftDomain &&
                       !inMLDomain && StringRef(opType).contains('.');
  const Handler *handler =
      qualifiedName ? nullptr
                    : HandlerRegistry::get().lookup(opType, domainOpset);
  if (!handler) {
    int first =
        qualifiedName ? 0 : HandlerRegistry::get().firstVersion(opType);
    if (first == 0)
      return fail(
          describeNode(node) + ": op type '" + opType +
          "' is not supported (kilnc --list-onnx-ops lists those that are)");
    return fail(describeNode(node) + ": not supported at opset " +
                Twine(domainOpset) + " (supported from opset " + Twine(first) +
                ")");
  }
  // Every handler may rely on the input and output counts onnx's schema
  // allows (com.microsoft's ops check their own).
  if (!inMicrosoftDomain) {
    std::string arity = checkSchemaArity(node, domainOpset);
    if (!arity.empty())
      return fail(describeNode(node) + ": " + arity);
  }
  SmallVector<Value> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    // A sequence or optional has no value: the ops that take one read it
    // from the composites (NodeImporter::compositeInput).
    auto composite = composites.find(name);
    if (composite != composites.end()) {
      if (!takesCompositeInputs(node.op_type()))
        return fail(describeNode(node) + ": input '" + name + "' is " +
                    compositeKindName(composite->second) +
                    "; only the sequence and optional ops take one");
      inputs.push_back(nullptr);
      continue;
    }
    FailureOr<Value> value = lookupValue(name, &node);
    if (failed(value))
      return failure();
    inputs.push_back(*value);
  }
  std::string nodeError;
  NodeImporter importer(b, node, opset, inputs, baseDir, nodeError);
  importer.setTraining(options.trainingDropout);
  importer.setPersistentRecurrence(options.persistentRecurrence);
  importer.setDomainOpset(domainOpset);
  importer.setGraphValues(&values);
  importer.setFourBitNames(&fourBitNames);
  importer.setCompositeValues(&composites);
  importer.setShapeInputGuards(&shapeGuards);
  importer.setSubgraphImporter(
      [this](const onnx::GraphProto &graph, ArrayRef<SubgraphValue> inputs) {
        return importSubgraph(graph, inputs);
      });
  if (failed(handler->fn(importer)))
    return fail(describeNode(node) + ": " +
                (nodeError.empty() ? std::string("import failed") : nodeError));
  ArrayRef<Value> results = importer.results();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    if (i < static_cast<int>(results.size()) && results[i])
      values[node.output(i)] = results[i];
  }
  return success();
}

FailureOr<SmallVector<SubgraphValue>>
GraphImporter::importSubgraph(const onnx::GraphProto &graph,
                              ArrayRef<SubgraphValue> inputs) {
  std::string where =
      "subgraph '" + (graph.name().empty() ? std::string("?") : graph.name()) +
      "'";
  if (graph.input_size() != static_cast<int>(inputs.size()))
    return fail(where + " has " + Twine(graph.input_size()) +
                " inputs; it is given " + Twine(inputs.size()));
  if (graph.sparse_initializer_size() > 0)
    return fail(where + ": sparse initializers are not supported");
  // The subgraph's names shadow the enclosing scopes' only while it is
  // imported: an unrolled body defines the same names once per iteration.
  // Sequences and optionals are scoped the same way.
  llvm::StringMap<Value> saved = values;
  CompositeValues savedComposites = composites;
  auto restore = llvm::make_scope_exit([&] {
    // Initializers of the main graph materialised inside stay materialised
    // (a weight becomes one global however often a body is unrolled).
    for (const auto &entry : values)
      if (initializers.count(entry.getKey()) && !saved.count(entry.getKey()))
        saved[entry.getKey()] = entry.getValue();
    values = std::move(saved);
    composites = std::move(savedComposites);
  });
  for (auto [i, in] : llvm::enumerate(graph.input())) {
    // An input shadows an outer value of the same name, of either kind.
    if (inputs[i].composite) {
      values.erase(in.name());
      composites[in.name()] = *inputs[i].composite;
    } else {
      composites.erase(in.name());
      values[in.name()] = inputs[i].tensor;
    }
  }
  for (const onnx::TensorProto &init : graph.initializer()) {
    std::string decodeError;
    FailureOr<DenseElementsAttr> value =
        decodeTensor(init, baseDir, &context, decodeError);
    if (failed(value))
      return fail(where + ": " + decodeError);
    composites.erase(init.name());
    values[init.name()] =
        ConstantOp::create(b, NameLoc::get(b.getStringAttr(init.name())),
                           *value)
            .getResult();
  }
  for (const onnx::NodeProto &node : graph.node()) {
    OpBuilder::InsertionGuard guard(b);
    if (failed(importNode(node))) {
      error += " (in " + where + ")";
      return failure();
    }
  }
  SmallVector<SubgraphValue> results;
  for (const onnx::ValueInfoProto &out : graph.output()) {
    auto composite = composites.find(out.name());
    if (composite != composites.end()) {
      results.push_back(composite->second);
      continue;
    }
    FailureOr<Value> value = lookupValue(out.name(), nullptr);
    if (failed(value))
      return failure();
    results.push_back(*value);
  }
  return results;
}

LogicalResult GraphImporter::bindOutputs(func::FuncOp func) {
  SmallVector<Value> results;
  SmallVector<Type> types;
  // The artifact names each output once (its signature); ONNX requires
  // graph outputs to be distinct too (docs/reliability.md, finding 8).
  llvm::StringSet<> outputNames;
  SmallVector<std::string> resultNames;
  SmallVector<Attribute> outputGroups;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    if (!outputNames.insert(output.name()).second)
      return fail("output '" + output.name() +
                  "' is listed twice among the graph's outputs");
    // A sequence or optional output becomes its tensors (CompositeSignature.h).
    auto composite = composites.find(output.name());
    std::string groupKind = outputGroupKind(
        output, composite == composites.end() ? nullptr : &composite->second);
    if (composite != composites.end()) {
      const CompositeValue &value = composite->second;
      bool sequence = value.kind == CompositeValue::Kind::Sequence;
      SmallVector<std::string> elements;
      for (auto [i, element] : llvm::enumerate(value.elements)) {
        elements.push_back(sequence ? sequenceElementName(output.name(), i)
                                    : output.name());
        if (sequence && !outputNames.insert(elements.back()).second)
          return fail("output '" + elements.back() + "' (of sequence '" +
                      output.name() + "') has the name of another output");
        results.push_back(element);
        types.push_back(element.getType());
        resultNames.push_back(elements.back());
      }
      outputGroups.push_back(signatureGroup(b, output.name(), groupKind,
                                            sequence || !value.elements.empty(),
                                            elements));
      continue;
    }
    if (!groupKind.empty())
      outputGroups.push_back(
          signatureGroup(b, output.name(), groupKind, true, {output.name()}));
    FailureOr<Value> value = lookupValue(output.name(), nullptr);
    if (failed(value))
      return failure();
    auto type = cast<RankedTensorType>(value->getType());
    // A declared shape is a cross-check of the shape rules, not a contract:
    // exporters write -1 or leave dims out for "unknown", and some declare
    // shapes that are plain wrong. A negative or missing dim matches
    // anything; a mismatch is a warning, and the inferred shape is used.
    if (output.type().has_tensor_type() &&
        output.type().tensor_type().has_shape()) {
      const auto &dims = output.type().tensor_type().shape().dim();
      SmallVector<int64_t> declared;
      for (const onnx::TensorShapeProto::Dimension &dim : dims)
        declared.push_back(dim.has_dim_value() && dim.dim_value() >= 0
                               ? dim.dim_value()
                               : ShapedType::kDynamic);
      bool matches = declared.size() == static_cast<size_t>(type.getRank());
      for (size_t i = 0; matches && i < declared.size(); ++i)
        matches = ShapedType::isDynamic(declared[i]) ||
                  declared[i] == type.getDimSize(i);
      if (!matches && options.warning)
        options.warning(escapeControlCharacters(
            (path + ": output '" + output.name() +
             "': the model declares shape " + formatShape(declared) +
             ", inferred " + formatShape(type.getShape()) +
             "; using the inferred shape")));
    }
    results.push_back(*value);
    types.push_back(type);
    resultNames.push_back(output.name());
  }
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, func.getLoc(), results);
  func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), types));
  for (auto [i, name] : llvm::enumerate(resultNames))
    func.setResultAttr(i, KilnDialect::NameAttrHelper::getNameStr(),
                       b.getStringAttr(name));
  SmallVector<Attribute> inputGroups;
  for (const auto &[groupName, plan] : compositeInputs) {
    SmallVector<std::string> elements;
    for (const GraphInputPlan::Tensor &flat : plan.tensors)
      elements.push_back(flat.name);
    inputGroups.push_back(
        signatureGroup(b, groupName, plan.groupKind, plan.present, elements));
  }
  if (!inputGroups.empty() || !outputGroups.empty())
    (*module)->setAttr(
        kSignatureGroupsAttrName,
        b.getDictionaryAttr(
            {b.getNamedAttr("inputs", b.getArrayAttr(inputGroups)),
             b.getNamedAttr("outputs", b.getArrayAttr(outputGroups))}));
  return success();
}

void GraphImporter::removeDeadCode(func::FuncOp func) {
  // Walk backwards so that a dead op's dead producers are seen after it.
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && isPure(op) && !op->hasTrait<OpTrait::IsTerminator>())
      op->erase();
  llvm::StringSet<> used;
  // Every function's loads count: a device-side loop's body is one.
  module->walk([&](ml_program::GlobalLoadConstOp load) {
    used.insert(load.getGlobal().getRootReference().getValue());
  });
  for (auto global :
       llvm::make_early_inc_range(module->getOps<ml_program::GlobalOp>()))
    if (!used.contains(global.getSymName()))
      global.erase();
}

void GraphImporter::collectDeclaredShapes(
    ArrayRef<const onnx::NodeProto *> order) {
  auto record = [&](const onnx::ValueInfoProto &info) {
    if (!info.type().has_tensor_type() ||
        !info.type().tensor_type().has_shape())
      return;
    SmallVector<int64_t> shape;
    for (const onnx::TensorShapeProto::Dimension &dim :
         info.type().tensor_type().shape().dim()) {
      if (!dim.has_dim_value() || dim.dim_value() < 0)
        return;
      shape.push_back(dim.dim_value());
    }
    shapeGuards.declared[info.name()] = std::move(shape);
  };
  for (const onnx::ValueInfoProto &output : model.graph().output())
    record(output);
  for (const onnx::ValueInfoProto &info : model.graph().value_info())
    record(info);
  // Back through the unary ops whose output has their input's shape: an
  // expanded ReduceL2 declares the shape of the CastLike after its
  // ReduceSum.
  static const llvm::StringSet<> keepShape = {
      "Abs",   "Cast",     "CastLike", "Ceil",     "Cos",   "Erf",
      "Exp",   "Floor",    "Identity", "IsInf",    "IsNaN", "Log",
      "Neg",   "Not",      "Reciprocal", "Relu",   "Round", "Sigmoid",
      "Sign",  "Sin",      "Softplus", "Softsign", "Sqrt",  "Tanh"};
  for (const onnx::NodeProto *node : llvm::reverse(order)) {
    if (!node->domain().empty() && node->domain() != "ai.onnx")
      continue;
    if (!keepShape.contains(node->op_type()) || node->input_size() < 1 ||
        node->output_size() < 1)
      continue;
    auto declared = shapeGuards.declared.find(node->output(0));
    if (declared != shapeGuards.declared.end() &&
        !shapeGuards.declared.count(node->input(0)))
      shapeGuards.declared[node->input(0)] = declared->second;
  }
}

llvm::Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  auto result = [&]() -> LogicalResult {
    if (failed(parseModel()) || failed(readOpsets()) ||
        failed(checkSingleDefinitions()))
      return failure();
    // The host partition takes nodes before importNode checks them: check
    // the main graph's nodes against onnx's schemas first (reliability
    // finding 21: a host Cast with no inputs was read past its end).
    for (const onnx::NodeProto &node : model.graph().node()) {
      if (node.domain() == kMicrosoftDomain)
        continue;
      std::string arity = checkSchemaArity(node, domainOpsetOf(node));
      if (!arity.empty())
        return fail(describeNode(node) + ": " + arity);
    }
    // The host partition walks the nodes in graph order: put them in
    // topological order first, as ONNX requires and the importer accepts
    // (reliability finding 19: a Cast to STRING listed before the Add it
    // reads became a host step reading an undefined value).
    {
      SmallVector<const onnx::NodeProto *> order;
      if (failed(sortNodes(order, /*undefinedOk=*/true)))
        return failure();
      bool sorted = true;
      for (auto [i, node] : llvm::enumerate(order))
        sorted &= node == &model.graph().node(static_cast<int>(i));
      if (!sorted) {
        google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
        for (const onnx::NodeProto *node : order)
          *nodes.Add() = *node;
        model.mutable_graph()->mutable_node()->Swap(&nodes);
      }
    }
    if (options.hostProgram &&
        failed(splitHostSteps(model, options, baseDir, context,
                              *options.hostProgram, error)))
      return failure();
    SmallVector<Type> inputTypes;
    SmallVector<std::string> inputNames;
    if (failed(collectInputs(inputTypes, inputNames)))
      return failure();
    SmallVector<const onnx::NodeProto *> order;
    if (failed(sortNodes(order)))
      return failure();
    shapeGuards.host = options.hostProgram;
    collectDeclaredShapes(order);

    Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
    module = ModuleOp::create(fileLoc);
    std::string graphName = model.graph().name();
    (*module)->setAttr(KilnDialect::SourceAttrHelper::getNameStr(),
                       b.getStringAttr(llvm::sys::path::filename(path)));
    (*module)->setAttr(KilnDialect::OpsetAttrHelper::getNameStr(),
                       b.getI64IntegerAttr(opset));
    if (!graphName.empty())
      (*module)->setAttr(KilnDialect::GraphNameAttrHelper::getNameStr(),
                         b.getStringAttr(graphName));
    b.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(b, fileLoc, "main",
                                     b.getFunctionType(inputTypes, {}));
    entry = func.addEntryBlock();
    for (auto [i, name] : llvm::enumerate(inputNames)) {
      func.setArgAttr(i, KilnDialect::NameAttrHelper::getNameStr(),
                      b.getStringAttr(name));
      values[name] = func.getArgument(i);
    }
    // Inside the graph a sequence or optional input is a composite again.
    for (const auto &[groupName, plan] : compositeInputs) {
      SmallVector<Value> elements;
      for (const GraphInputPlan::Tensor &flat : plan.tensors)
        elements.push_back(values.lookup(flat.name));
      for (const GraphInputPlan::Tensor &flat : plan.tensors)
        values.erase(flat.name);
      composites[groupName] = compositeForInput(plan, elements);
    }
    recordSymbolicDims(func);
    b.setInsertionPointToEnd(entry);
    for (const onnx::NodeProto *node : order) {
      b.setInsertionPointToEnd(entry);
      if (failed(importNode(*node)))
        return failure();
    }
    if (failed(bindOutputs(func)))
      return failure();
    // Device-side loops' bodies (ControlFlowHandlers.cpp) are functions
    // of their own.
    for (auto f : module->getOps<func::FuncOp>())
      hoistLargeConstants(f);
    removeDeadCode(func);

    std::string diagnostic;
    ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
      if (diagnostic.empty())
        diagnostic = diag.str();
      return success();
    });
    if (failed(verify(*module)))
      return fail("imported IR does not verify: " + diagnostic);
    return success();
  }();
  if (failed(result))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        escapeControlCharacters(path + ": " + error));
  return std::move(module);
}
} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

void registerImportDialects(DialectRegistry &registry) {
  registry
      .insert<KilnDialect, func::FuncDialect, ml_program::MLProgramDialect>();
}

llvm::Expected<OwningOpRef<ModuleOp>>
importModelFile(StringRef path, MLIRContext &context,
                const ImportOptions &options) {
  DialectRegistry registry;
  registerImportDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  return GraphImporter(context, path, options).run();
}

llvm::Expected<OwningOpRef<ModuleOp>>
importModelBuffer(StringRef bytes, StringRef path, MLIRContext &context,
                  const ImportOptions &options) {
  DialectRegistry registry;
  registerImportDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  return GraphImporter(context, path, options, bytes).run();
}

std::string escapeControlCharacters(StringRef text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      out += llvm::formatv("\\x{0:x-2}", unsigned(byte)).str();
    else
      out += c;
  }
  return out;
}

int maxSupportedOpset() { return kMaxOpset; }
int minSupportedOpset() { return kMinOpset; }

} // namespace kiln::onnx_frontend

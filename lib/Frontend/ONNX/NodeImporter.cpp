//===- NodeImporter.cpp - What an ONNX op handler sees
//----------------------===//

#include "NodeImporter.h"

#include "llvm/Support/FormatVariadic.h"

#include "kiln/runtime/HostSteps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace kiln::onnx_frontend {

NodeImporter::NodeImporter(OpBuilder &builder, const onnx::NodeProto &node,
                           int64_t opset, ArrayRef<Value> inputs,
                           StringRef baseDir, std::string &error)
    : b(builder), proto(node), opsetVersion(opset), inputValues(inputs),
      baseDir(baseDir.str()),
      location(NameLoc::get(
          b.getStringAttr(node.name().empty() ? node.op_type() : node.name()))),
      error(error) {}

LogicalResult NodeImporter::fail(const Twine &message) {
  if (error.empty())
    error = message.str();
  return failure();
}

RankedTensorType NodeImporter::inputType(size_t i) const {
  return hasInput(i) ? cast<RankedTensorType>(inputValues[i].getType())
                     : RankedTensorType();
}

std::optional<DenseElementsAttr> NodeImporter::constantInput(size_t i) const {
  DenseElementsAttr value;
  if (hasInput(i) && matchPattern(inputValues[i], m_Constant(&value)))
    return value;
  return std::nullopt;
}

FailureOr<SmallVector<int64_t>> NodeImporter::constantInts(size_t i,
                                                           StringRef what) {
  // An input with no elements has one value whatever it is bound to.
  if (hasInput(i) && inputType(i).hasStaticShape() &&
      inputType(i).getNumElements() == 0 &&
      isa<IntegerType>(inputType(i).getElementType()))
    return SmallVector<int64_t>();
  std::optional<DenseElementsAttr> value = constantInput(i);
  if (value && !isa<IntegerType>(value->getElementType()))
    return fail(Twine("input '") + what +
                "' must be a compile-time integer constant");
  if (!value) {
    // A graph input, bound at run time: Kiln takes it where the model's
    // declared shapes fix its value (a guard checks it before the first
    // launch); otherwise the shapes it decides are data-dependent.
    if (hasInput(i) && isa<BlockArgument>(inputValues[i]))
      return fail(Twine("input '") + what +
                  "' must be a compile-time integer constant: it is the "
                  "graph input '" +
                  proto.input(i) +
                  "', known only at run time, and nothing fixes its value "
                  "(an output shape would depend on data); make it an "
                  "initializer, or declare the outputs' shapes where "
                  "docs/onnx-ops.md says the value is then checked at run "
                  "time");
    return fail(Twine("input '") + what +
                "' must be a compile-time integer constant (it depends on "
                "run-time data; fix dynamic dims with --shape, or declare "
                "the shapes it decides)");
  }
  SmallVector<int64_t> result;
  bool isUnsigned = value->getElementType().isUnsignedInteger();
  for (const APInt &v : value->getValues<APInt>())
    result.push_back(isUnsigned ? static_cast<int64_t>(v.getZExtValue())
                                : v.getSExtValue());
  return result;
}

FailureOr<SmallVector<double>> NodeImporter::constantFloats(size_t i,
                                                            StringRef what) {
  std::optional<DenseElementsAttr> value = constantInput(i);
  if (!value)
    return fail(Twine("input '") + what + "' must be a compile-time constant");
  SmallVector<double> result;
  if (isa<FloatType>(value->getElementType())) {
    for (const APFloat &v : value->getValues<APFloat>())
      result.push_back(v.convertToDouble());
  } else {
    bool isUnsigned = value->getElementType().isUnsignedInteger() ||
                      value->getElementType().isInteger(1);
    for (const APInt &v : value->getValues<APInt>())
      result.push_back(isUnsigned ? static_cast<double>(v.getZExtValue())
                                  : static_cast<double>(v.getSExtValue()));
  }
  return result;
}

LogicalResult NodeImporter::checkArity(size_t min, size_t max,
                                       size_t maxOutputs) {
  if (numInputs() < min || numInputs() > max)
    return fail(Twine("expects ") + Twine(min) +
                (min == max ? Twine("") : Twine(" to ") + Twine(max)) +
                " inputs, got " + Twine(numInputs()));
  for (size_t i = 0; i < min; ++i)
    if (!hasInput(i))
      return fail("required input " + Twine(i) + " is omitted");
  for (int i = static_cast<int>(maxOutputs); i < proto.output_size(); ++i)
    if (!proto.output(i).empty())
      return fail(Twine("output ") + Twine(i) + " ('" + proto.output(i) +
                  "') is not supported");
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *NodeImporter::findAttr(StringRef name) const {
  for (const onnx::AttributeProto &attr : proto.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeImporter::intAttr(StringRef name, int64_t defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->i() : defaultValue;
}

float NodeImporter::floatAttr(StringRef name, float defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->f() : defaultValue;
}

std::string NodeImporter::stringAttr(StringRef name,
                                     StringRef defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->s() : defaultValue.str();
}

SmallVector<int64_t> NodeImporter::intsAttr(StringRef name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr)
    return {};
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

SmallVector<float> NodeImporter::floatsAttr(StringRef name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr)
    return {};
  return SmallVector<float>(attr->floats().begin(), attr->floats().end());
}

SmallVector<std::string> NodeImporter::stringsAttr(StringRef name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr)
    return {};
  return SmallVector<std::string>(attr->strings().begin(),
                                  attr->strings().end());
}

FailureOr<DenseElementsAttr> NodeImporter::tensorAttr(StringRef name) {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr || !attr->has_t())
    return fail(Twine("missing tensor attribute '") + name + "'");
  std::string decodeError;
  FailureOr<DenseElementsAttr> value =
      decodeTensor(attr->t(), baseDir, context(), decodeError);
  if (failed(value))
    return fail(decodeError);
  return value;
}

LogicalResult NodeImporter::requireStringAttrIn(StringRef name,
                                                StringRef defaultValue,
                                                ArrayRef<StringRef> supported) {
  std::string value = stringAttr(name, defaultValue);
  if (llvm::is_contained(supported, value))
    return success();
  return fail(Twine(name) + " '" + value + "' is not supported (supported: " +
              llvm::join(supported, ", ") + ")");
}

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>>
NodeImporter::create(StringRef opName, ValueRange operands,
                     ArrayRef<NamedAttribute> attrs, TypeRange types,
                     unsigned numResults) {
  // Capture the diagnostics of inference and verification: they become the
  // node's error message rather than text on stderr.
  std::string diagnostic;
  ScopedDiagnosticHandler capture(context(), [&](Diagnostic &diag) {
    if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostic = diag.str();
    return success();
  });
  auto failWith = [&](Operation *op) -> FailureOr<SmallVector<Value>> {
    if (op)
      op->erase();
    if (diagnostic.empty())
      return fail(Twine("cannot build ") + opName);
    // Verifier messages already name the op ('kiln.pad' op ...); inference
    // messages do not.
    if (StringRef(diagnostic).contains(opName))
      return fail(diagnostic);
    return fail(Twine(opName) + ": " + diagnostic);
  };

  OperationState state(location, opName);
  state.addOperands(operands);
  state.addAttributes(attrs);
  if (!types.empty())
    state.addTypes(types);
  else
    state.addTypes(SmallVector<Type>(numResults, b.getNoneType()));
  Operation *op = b.create(state);

  if (types.empty()) {
    auto inferrable = dyn_cast<InferTypeOpInterface>(op);
    SmallVector<Type> inferred;
    if (!inferrable ||
        failed(inferrable.inferReturnTypes(
            context(), location, op->getOperands(), op->getRawDictionaryAttrs(),
            op->getPropertiesStorage(), op->getRegions(), inferred)) ||
        inferred.size() != numResults)
      return failWith(op);
    for (auto [result, type] : llvm::zip_equal(op->getResults(), inferred))
      result.setType(type);
  }
  if (failed(verify(op)))
    return failWith(op);

  SmallVector<Value> folded;
  if (succeeded(b.tryFold(op, folded)) && !folded.empty()) {
    op->erase();
    return folded;
  }
  return SmallVector<Value>(op->getResults());
}

Value NodeImporter::constant(DenseElementsAttr value) {
  return ConstantOp::create(b, location, value);
}

FailureOr<SmallVector<Value>>
NodeImporter::importSubgraph(const onnx::GraphProto &graph,
                             ArrayRef<Value> inputs) {
  SmallVector<SubgraphValue> args(inputs.begin(), inputs.end());
  FailureOr<SmallVector<SubgraphValue>> outputs =
      importSubgraphValues(graph, args);
  if (failed(outputs))
    return failure();
  SmallVector<Value> tensors;
  for (auto [k, output] : llvm::enumerate(*outputs)) {
    if (output.composite)
      return fail(
          "output '" + graph.output(static_cast<int>(k)).name() +
          "' of subgraph '" + graph.name() + "' is " +
          (output.composite->kind == CompositeValue::Kind::Sequence
               ? "a sequence"
               : "an optional") +
          "; only If branches and Loop-carried values may be one (Kiln "
          "resolves them at compile time)");
    tensors.push_back(output.tensor);
  }
  return tensors;
}

FailureOr<SmallVector<SubgraphValue>>
NodeImporter::importSubgraphValues(const onnx::GraphProto &graph,
                                   ArrayRef<SubgraphValue> inputs) {
  if (!subgraphImporter)
    return fail("internal error: no subgraph importer");
  return subgraphImporter(graph, inputs);
}

FailureOr<SubgraphValue> NodeImporter::subgraphInput(size_t i) {
  if (const CompositeValue *value = compositeInput(i))
    return SubgraphValue(*value);
  if (!hasInput(i))
    return fail("input " + Twine(i) + " is omitted");
  return SubgraphValue(input(i));
}

const onnx::GraphProto *NodeImporter::graphAttr(StringRef name) {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr || !attr->has_g()) {
    (void)fail("attribute '" + name + "' (a graph) is missing");
    return nullptr;
  }
  return &attr->g();
}

Value NodeImporter::scalar(Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element = isa<FloatType>(elementType)
                          ? Attribute(b.getFloatAttr(elementType, value))
                          : Attribute(b.getIntegerAttr(
                                elementType, static_cast<int64_t>(value)));
  return constant(DenseElementsAttr::get(type, element));
}

LogicalResult NodeImporter::setResults(ValueRange values) {
  outputValues.assign(values.begin(), values.end());
  return success();
}

FailureOr<int64_t> normalizeAxisOrFail(NodeImporter &n, int64_t axis,
                                       int64_t rank, StringRef what) {
  int64_t d = normalizeAxis(axis, rank);
  if (d < 0)
    return n.fail(Twine(what) + " " + Twine(axis) +
                  " is out of range for rank " + Twine(rank));
  return d;
}

} // namespace kiln::onnx_frontend

//===----------------------------------------------------------------------===//
// Shape inputs taken at run time
//===----------------------------------------------------------------------===//

namespace kiln::onnx_frontend {

std::optional<SmallVector<int64_t>>
NodeImporter::declaredOutputShape(size_t i) const {
  if (!shapeGuards || static_cast<int>(i) >= proto.output_size())
    return std::nullopt;
  auto it = shapeGuards->declared.find(proto.output(static_cast<int>(i)));
  if (it == shapeGuards->declared.end())
    return std::nullopt;
  return it->second;
}

/// The graph input name of a main argument, or "" for any other value.
static std::string graphInputName(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return {};
  auto func = dyn_cast_or_null<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || func.getSymName() != "main")
    return {};
  auto name = func.getArgAttrOfType<StringAttr>(
      arg.getArgNumber(), KilnDialect::NameAttrHelper::getNameStr());
  return name ? name.str() : std::string();
}

bool NodeImporter::canGuardInput(size_t i, bool allowFloat) const {
  if (!shapeGuards || !shapeGuards->host || !hasInput(i) || constantInput(i))
    return false;
  Type element = inputType(i).getElementType();
  bool numeric = element.isSignlessInteger(64) ||
                 element.isSignlessInteger(32) ||
                 (allowFloat && (element.isF32() || element.isF64()));
  return numeric &&
         inputType(i).hasStaticShape() &&
         !graphInputName(inputValues[i]).empty();
}

std::string NodeImporter::declareGuardedInput(size_t i) {
  runtime::HostProgram &host = *shapeGuards->host;
  std::string name = graphInputName(inputValues[i]);
  if (!host.findInput(name)) {
    runtime::HostTensorDecl decl;
    decl.name = name;
    decl.isString = false;
    Type element = inputType(i).getElementType();
    decl.dtype = element.isSignlessInteger(64)   ? runtime::DType::I64
                 : element.isSignlessInteger(32) ? runtime::DType::I32
                 : element.isF64()               ? runtime::DType::F64
                                                 : runtime::DType::F32;
    decl.shape.assign(inputType(i).getShape().begin(),
                      inputType(i).getShape().end());
    host.inputs.push_back(std::move(decl));
  }
  return name;
}

static std::vector<std::string> intsText(ArrayRef<int64_t> values) {
  std::vector<std::string> text;
  for (int64_t v : values)
    text.push_back(std::to_string(v));
  return text;
}

void NodeImporter::guardOperands(
    StringRef kind, ArrayRef<GuardOperand> operands,
    ArrayRef<int64_t> inputShape, ArrayRef<int64_t> expected,
    ArrayRef<std::pair<StringRef, SmallVector<int64_t>>> extra) {
  runtime::HostStep step;
  step.op = "ShapeGuard";
  step.node = proto.name();
  step.phase = runtime::HostPhase::Before;
  std::string roles;
  for (const GuardOperand &operand : operands) {
    if (operand.input) {
      step.inputs.push_back(declareGuardedInput(*operand.input));
      roles += (roles.empty() ? "" : ", ") + operand.role.str();
    } else {
      step.inputs.emplace_back();
      if (operand.constant)
        step.attributes.push_back(
            {operand.role.str(), intsText(*operand.constant)});
      if (operand.numbers) {
        std::vector<std::string> text;
        for (double v : *operand.numbers)
          text.push_back(llvm::formatv("{0:e17}", v).str());
        step.attributes.push_back({operand.role.str(), std::move(text)});
      }
    }
  }
  while (!step.inputs.empty() && step.inputs.back().empty())
    step.inputs.pop_back();
  step.attributes.push_back({"kind", {kind.str()}});
  step.attributes.push_back({"op", {proto.op_type()}});
  step.attributes.push_back({"operand", {roles}});
  step.attributes.push_back({"expected", intsText(expected)});
  if (proto.output_size() > 0)
    step.attributes.push_back({"produces", {proto.output(0)}});
  step.attributes.push_back({"input_shape", intsText(inputShape)});
  for (const auto &[attrName, values] : extra)
    step.attributes.push_back({attrName.str(), intsText(values)});
  shapeGuards->host->steps.push_back(std::move(step));
}

void NodeImporter::guardInput(
    size_t i, StringRef operand, StringRef kind, ArrayRef<int64_t> inputShape,
    ArrayRef<int64_t> expected,
    ArrayRef<std::pair<StringRef, SmallVector<int64_t>>> extra) {
  runtime::HostProgram &host = *shapeGuards->host;
  std::string name = declareGuardedInput(i);
  auto ints = intsText;
  runtime::HostStep step;
  step.op = "ShapeGuard";
  step.node = proto.name();
  step.phase = runtime::HostPhase::Before;
  step.inputs = {name};
  step.attributes = {{"kind", {kind.str()}},
                     {"op", {proto.op_type()}},
                     {"operand", {operand.str()}},
                     {"expected", ints(expected)}};
  if (proto.output_size() > 0)
    step.attributes.push_back({"produces", {proto.output(0)}});
  if (kind != "equal")
    step.attributes.push_back({"input_shape", ints(inputShape)});
  for (const auto &[attrName, values] : extra)
    step.attributes.push_back({attrName.str(), ints(values)});
  host.steps.push_back(std::move(step));
}

FailureOr<SmallVector<int64_t>> NodeImporter::constantOrDeclaredInts(
    size_t i, StringRef what,
    function_ref<std::optional<SmallVector<int64_t>>(ArrayRef<int64_t>)>
        fromDeclared,
    ArrayRef<int64_t> free) {
  std::optional<SmallVector<int64_t>> declared = declaredOutputShape(0);
  if (canGuardInput(i) && declared) {
    std::optional<SmallVector<int64_t>> fixed = fromDeclared(*declared);
    if (fixed &&
        static_cast<int64_t>(fixed->size()) == inputType(i).getNumElements()) {
      SmallVector<std::pair<StringRef, SmallVector<int64_t>>> extra;
      if (!free.empty())
        extra.push_back({"free", SmallVector<int64_t>(free)});
      guardInput(i, what, "equal", {}, *fixed, extra);
      return *fixed;
    }
  }
  return constantInts(i, what);
}

std::optional<SmallVector<int64_t>> NodeImporter::guardedOutputShape(
    size_t i, StringRef operand, StringRef kind,
    function_ref<bool(ArrayRef<int64_t>)> fits,
    ArrayRef<std::pair<StringRef, SmallVector<int64_t>>> extra) {
  if (!canGuardInput(i) || !hasInput(0) || !inputType(0).hasStaticShape())
    return std::nullopt;
  std::optional<SmallVector<int64_t>> declared = declaredOutputShape(0);
  if (!declared || !fits(*declared))
    return std::nullopt;
  guardInput(i, operand, kind, inputType(0).getShape(), *declared, extra);
  return declared;
}

} // namespace kiln::onnx_frontend

//===- NodeImporter.h - What an ONNX op handler sees ------------*- C++ -*-===//
//
// Private to the frontend. A handler turns one ONNX node into kiln ops through
// a NodeImporter: typed access to inputs and attributes, op creation that
// infers result types, verifies and folds (so shape arithmetic collapses to
// constants as it is imported), and errors that name the node.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_NODEIMPORTER_H
#define KILN_LIB_FRONTEND_ONNX_NODEIMPORTER_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

namespace kiln::runtime {
struct HostProgram;
} // namespace kiln::runtime

#include <functional>
#include <optional>
#include <string>

namespace kiln::onnx_frontend {

class NodeImporter;

/// A handler imports one node; on failure it has called NodeImporter::fail.
using HandlerFn = llvm::LogicalResult (*)(NodeImporter &);

struct Handler {
  const char *opType;
  int sinceVersion;
  HandlerFn fn;
  /// What the handler does not support, in a few words (for docs/onnx-ops.md).
  const char *limits;
};

/// The op families, one registration function (and one source file) each.
void registerElementwiseHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerContractionHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerReductionHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerDataMovementHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerShapeHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerIndexingHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerLinearAlgebraHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerImageHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerSignalHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerRecurrentHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerControlFlowHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerRandomHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerTextHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerQuantizationHandlers(llvm::SmallVectorImpl<Handler> &handlers);
/// com.microsoft's quantized ops, registered under qualified names.
void registerContribQuantizationHandlers(
    llvm::SmallVectorImpl<Handler> &handlers);
/// ai.onnx.preview.training ops, registered under their qualified names.
void registerTrainingHandlers(llvm::SmallVectorImpl<Handler> &handlers);
void registerLossHandlers(llvm::SmallVectorImpl<Handler> &handlers);
/// Sequences and optionals, resolved at compile time (CompositeValue).
void registerSequenceHandlers(llvm::SmallVectorImpl<Handler> &handlers);
/// ai.onnx.ml ops, registered under their qualified names.
void registerMLHandlers(llvm::SmallVectorImpl<Handler> &handlers);

/// TensorProto.DataType codes newer than the protobuf definitions Kiln
/// builds against.
enum : int32_t {
  kOnnxFloat8E4M3FN = 17,
  kOnnxFloat8E4M3FNUZ = 18,
  kOnnxFloat8E5M2 = 19,
  kOnnxFloat8E5M2FNUZ = 20,
  kOnnxUInt4 = 21,
  kOnnxInt4 = 22,
};

/// Converts an ONNX element type to an MLIR one, or null when unsupported.
/// The float8 types become MLIR's f8E4M3FN, f8E4M3FNUZ, f8E5M2 and
/// f8E5M2FNUZ; INT4 and UINT4 become i8 and ui8 holding one value per byte
/// (initializers are unpacked on import, graph inputs and outputs carry one
/// value per byte: docs/onnx-ops.md, "Element types").
mlir::Type convertElementType(int32_t onnxType, mlir::MLIRContext *context);
/// Whether an ONNX element type is INT4 or UINT4 (held as i8/ui8).
bool isFourBitType(int32_t onnxType);
/// The ONNX name of an element type enum value ("FLOAT", "STRING", ...).
std::string onnxTypeName(int32_t onnxType);

/// A TensorProto's type and its little-endian bytes (bool: one per element).
struct DecodedTensor {
  mlir::RankedTensorType type;
  std::string bytes;
};

/// Reads a TensorProto's data, inline or external. Errors name the tensor.
llvm::FailureOr<DecodedTensor> decodeTensorData(const onnx::TensorProto &tensor,
                                                llvm::StringRef baseDir,
                                                mlir::MLIRContext *context,
                                                std::string &error);
mlir::DenseElementsAttr toDenseElements(const DecodedTensor &tensor);

/// Decodes a TensorProto (inline or external data) into a dense attribute.
/// `baseDir` resolves external-data locations. Errors name the tensor.
llvm::FailureOr<mlir::DenseElementsAttr>
decodeTensor(const onnx::TensorProto &tensor, llvm::StringRef baseDir,
             mlir::MLIRContext *context, std::string &error);

/// A sequence or an optional, resolved at compile time
/// (SequenceHandlers.cpp): kiln has no type for either, so the importer keeps
/// its tensors, each an ordinary value, under the ONNX name.
struct CompositeValue {
  enum class Kind { Sequence, Optional };
  Kind kind = Kind::Sequence;
  /// A sequence's tensors in order; an optional's one tensor, or none.
  llvm::SmallVector<mlir::Value> elements;
  /// The element type when `elements` is empty (SequenceEmpty's dtype, an
  /// empty Optional's type), else null.
  mlir::Type elementType;
};
using CompositeValues = llvm::StringMap<CompositeValue>;

/// What an If branch or a Loop body takes or gives: a tensor, or a sequence
/// or optional (resolved at compile time like any other).
struct SubgraphValue {
  SubgraphValue(mlir::Value tensor) : tensor(tensor) {}
  SubgraphValue(CompositeValue composite) : composite(std::move(composite)) {}
  mlir::Value tensor;
  std::optional<CompositeValue> composite;
};

/// Shape inputs taken at run time (issue 24): an exported model often passes
/// the input that decides a node's shape (ReduceSum's axes, Reshape's
/// shape, ...) as a graph input. Where the shapes the model declares fix
/// what that value must do, the handler compiles the node for it and adds a
/// ShapeGuard host step that checks the bound value before each run
/// (runtime/lib/HostGuards.h). The GraphImporter owns this.
struct ShapeInputGuards {
  /// ONNX value name -> the static shape the model declares for it: the
  /// graph's outputs and value_info, and back through the unary ops that
  /// keep a shape (Cast, Sqrt, Log, ...).
  llvm::StringMap<llvm::SmallVector<int64_t>> declared;
  /// Where the guards go; null when the compile takes no host steps.
  kiln::runtime::HostProgram *host = nullptr;
};

/// The limit docs/onnx-ops.md gives a shape input that ShapeInputGuards
/// may take at run time (a macro: handler tables concatenate it).
#define KILN_FIXED_BY_DECLARED_SHAPE                                           \
  "a constant, or a graph input whose value the declared output shapes fix "  \
  "(checked at run time)"

/// Whether an op type takes sequences or optionals as inputs (the others
/// refuse them with an error naming the input).
bool takesCompositeInputs(llvm::StringRef opType);

class NodeImporter {
public:
  NodeImporter(mlir::OpBuilder &builder, const onnx::NodeProto &node,
               int64_t opset, llvm::ArrayRef<mlir::Value> inputs,
               llvm::StringRef baseDir, std::string &error);

  mlir::OpBuilder &builder() { return b; }
  mlir::MLIRContext *context() { return b.getContext(); }
  mlir::Location loc() const { return location; }
  const onnx::NodeProto &node() const { return proto; }
  int64_t opset() const { return opsetVersion; }
  /// The opset of the node's own domain (ai.onnx.ml's for its ops; the
  /// default domain's for the others).
  int64_t domainOpset() const {
    return domainOpsetVersion ? domainOpsetVersion : opsetVersion;
  }
  void setDomainOpset(int64_t version) { domainOpsetVersion = version; }
  /// Whether the model is imported for training (ImportOptions::
  /// trainingDropout): training-mode dropout is then kept.
  bool training() const { return trainingMode; }
  void setTraining(bool training) { trainingMode = training; }
  /// Whether RNN/GRU/LSTM layers become kiln.recurrence ops
  /// (ImportOptions::persistentRecurrence) rather than unrolled steps.
  bool persistentRecurrence() const { return recurrenceOps; }
  void setPersistentRecurrence(bool on) { recurrenceOps = on; }
  /// The graph's tensors imported so far, by name (Gradient's `y` is an
  /// attribute naming one).
  void setGraphValues(const llvm::StringMap<mlir::Value> *values) {
    graphValues = values;
  }
  /// The graph's INT4/UINT4 tensors by name (held as i8/ui8, so the type
  /// alone does not say their range). Set by the GraphImporter.
  void setFourBitNames(llvm::StringSet<> *names) { fourBitNames = names; }
  /// Whether input `i` is an ONNX INT4/UINT4 tensor.
  bool inputIsFourBit(size_t i) const {
    return fourBitNames && i < static_cast<size_t>(proto.input_size()) &&
           fourBitNames->contains(proto.input(i));
  }
  /// Records output `i` as INT4/UINT4.
  void markOutputFourBit(size_t i) {
    if (fourBitNames && i < static_cast<size_t>(proto.output_size()))
      fourBitNames->insert(proto.output(i));
  }
  /// The graph's sequences and optionals by name. Set by the GraphImporter.
  void setCompositeValues(CompositeValues *values) { composites = values; }
  /// Set by the GraphImporter (ShapeInputGuards).
  void setShapeInputGuards(ShapeInputGuards *guards) { shapeGuards = guards; }
  /// The static shape the model declares for output `i`, if it declares one.
  std::optional<llvm::SmallVector<int64_t>> declaredOutputShape(size_t i) const;
  /// Whether input `i` is a graph input of i64 or i32 (or, with
  /// `allowFloat`, f32 or f64: OneHot's depth, truncated as the handler
  /// does) that is not a constant and that a ShapeGuard can check before
  /// each run.
  bool canGuardInput(size_t i, bool allowFloat = false) const;
  /// Adds the ShapeGuard host step for input `i` (canGuardInput(i) holds):
  /// `kind` and the attributes as runtime/lib/HostGuards.h lists them.
  void guardInput(size_t i, llvm::StringRef operand, llvm::StringRef kind,
                  llvm::ArrayRef<int64_t> inputShape,
                  llvm::ArrayRef<int64_t> expected,
                  llvm::ArrayRef<std::pair<llvm::StringRef,
                                           llvm::SmallVector<int64_t>>>
                      extra = {});
  /// One operand of a guard that reads several (HostGuards.h's slice, pad,
  /// resize-scales): node input `input` when it is taken at run time
  /// (canGuardInput holds), else the compile-time `constant` (none: the
  /// operand is absent and takes the spec's default).
  struct GuardOperand {
    llvm::StringRef role;
    std::optional<size_t> input;
    std::optional<llvm::SmallVector<int64_t>> constant;
    /// For the kinds that read numbers in f64 (range): the constant.
    std::optional<llvm::SmallVector<double>> numbers = std::nullopt;
  };
  /// Adds the ShapeGuard of such a kind; `expected` is output 0's shape.
  void guardOperands(
      llvm::StringRef kind, llvm::ArrayRef<GuardOperand> operands,
      llvm::ArrayRef<int64_t> inputShape, llvm::ArrayRef<int64_t> expected,
      llvm::ArrayRef<std::pair<llvm::StringRef, llvm::SmallVector<int64_t>>>
          extra = {});
  /// Input `i`'s integers: a constant's, or, for a graph input whose values
  /// `fromDeclared` derives from the static shape the model declares for
  /// output 0 (one value per element of the input), those values, with a
  /// ShapeGuard of kind `equal` on the input (`free`: positions whose value
  /// may differ). Otherwise fails as constantInts.
  llvm::FailureOr<llvm::SmallVector<int64_t>> constantOrDeclaredInts(
      size_t i, llvm::StringRef what,
      llvm::function_ref<std::optional<llvm::SmallVector<int64_t>>(
          llvm::ArrayRef<int64_t> declared)>
          fromDeclared,
      llvm::ArrayRef<int64_t> free = {});
  /// For input `i`, a graph input that decides output 0's shape (Reshape's
  /// shape, Squeeze's axes, ...): the static shape the model declares for
  /// output 0 when `fits` accepts it, after guarding the input with `kind`
  /// (expected: that shape); nothing when the input is a constant or cannot
  /// be guarded, no shape is declared, or `fits` refuses it.
  std::optional<llvm::SmallVector<int64_t>> guardedOutputShape(
      size_t i, llvm::StringRef operand, llvm::StringRef kind,
      llvm::function_ref<bool(llvm::ArrayRef<int64_t>)> fits,
      llvm::ArrayRef<std::pair<llvm::StringRef, llvm::SmallVector<int64_t>>>
          extra = {});
  /// Input `i` as a sequence or optional, or null when it is a tensor or
  /// absent (then input(i) is null too). Importing a subgraph restores the
  /// scope of sequences afterwards and invalidates the pointer: copy what a
  /// handler needs across importSubgraph calls.
  const CompositeValue *compositeInput(size_t i) const {
    if (!composites || i >= static_cast<size_t>(proto.input_size()) ||
        proto.input(i).empty())
      return nullptr;
    auto it = composites->find(proto.input(i));
    return it == composites->end() ? nullptr : &it->second;
  }
  /// Binds output `i` to a sequence or optional.
  void setCompositeResult(size_t i, CompositeValue value) {
    if (composites && i < static_cast<size_t>(proto.output_size()) &&
        !proto.output(i).empty())
      (*composites)[proto.output(i)] = std::move(value);
  }
  /// The tensor `name` computed before this node, or null.
  mlir::Value graphValue(llvm::StringRef name) const {
    return graphValues ? graphValues->lookup(name) : nullptr;
  }

  /// Imports a subgraph (an If branch, a Loop or Scan body) inline at the
  /// current insertion point, its formal inputs bound to `inputs` and the
  /// enclosing graphs' values visible (captured); returns its outputs. Set by
  /// the GraphImporter, which owns the value scopes.
  using SubgraphImporter =
      std::function<llvm::FailureOr<llvm::SmallVector<SubgraphValue>>(
          const onnx::GraphProto &, llvm::ArrayRef<SubgraphValue>)>;
  void setSubgraphImporter(SubgraphImporter fn) {
    subgraphImporter = std::move(fn);
  }
  /// The same where every input and output is a tensor: an output that is a
  /// sequence or optional is an error naming it.
  llvm::FailureOr<llvm::SmallVector<mlir::Value>>
  importSubgraph(const onnx::GraphProto &graph,
                 llvm::ArrayRef<mlir::Value> inputs);
  /// The same where inputs and outputs may be sequences or optionals (If
  /// branches, Loop-carried values).
  llvm::FailureOr<llvm::SmallVector<SubgraphValue>>
  importSubgraphValues(const onnx::GraphProto &graph,
                       llvm::ArrayRef<SubgraphValue> inputs);
  /// Input `i` as what a subgraph takes: its sequence or optional, else its
  /// tensor; fails naming it when it is omitted.
  llvm::FailureOr<SubgraphValue> subgraphInput(size_t i);
  /// A GRAPH attribute, or null (with an error naming it) when absent.
  const onnx::GraphProto *graphAttr(llvm::StringRef name);

  //===--------------------------------------------------------------------===//
  // Inputs
  //===--------------------------------------------------------------------===//

  /// Number of inputs as written, counting omitted optional ones ("").
  size_t numInputs() const { return inputValues.size(); }
  /// Whether input `i` exists and is not an omitted optional input.
  bool hasInput(size_t i) const {
    return i < inputValues.size() && inputValues[i];
  }
  /// Input `i`, or null when absent.
  mlir::Value input(size_t i) const {
    return hasInput(i) ? inputValues[i] : nullptr;
  }
  mlir::RankedTensorType inputType(size_t i) const;
  /// The compile-time value of input `i`, if it folded to a constant.
  std::optional<mlir::DenseElementsAttr> constantInput(size_t i) const;
  /// The integer values of a constant input; fails with an error naming
  /// `what` when the input is not a compile-time constant.
  llvm::FailureOr<llvm::SmallVector<int64_t>>
  constantInts(size_t i, llvm::StringRef what);
  /// Same for a float input.
  llvm::FailureOr<llvm::SmallVector<double>>
  constantFloats(size_t i, llvm::StringRef what);
  /// Fails unless the node has between `min` and `max` inputs, the first
  /// `min` of them present (not omitted), and at most `maxOutputs` outputs
  /// that are used.
  llvm::LogicalResult checkArity(size_t min, size_t max, size_t maxOutputs = 1);

  //===--------------------------------------------------------------------===//
  // Attributes
  //===--------------------------------------------------------------------===//

  bool hasAttr(llvm::StringRef name) const { return findAttr(name) != nullptr; }
  int64_t intAttr(llvm::StringRef name, int64_t defaultValue) const;
  float floatAttr(llvm::StringRef name, float defaultValue) const;
  std::string stringAttr(llvm::StringRef name,
                         llvm::StringRef defaultValue) const;
  llvm::SmallVector<int64_t> intsAttr(llvm::StringRef name) const;
  llvm::SmallVector<float> floatsAttr(llvm::StringRef name) const;
  llvm::SmallVector<std::string> stringsAttr(llvm::StringRef name) const;
  /// A TENSOR attribute decoded; fails (with an error) when absent or bad.
  llvm::FailureOr<mlir::DenseElementsAttr> tensorAttr(llvm::StringRef name);
  /// Fails naming the first attribute that is set but not in `supported`
  /// values; used where a handler implements only some modes.
  llvm::LogicalResult
  requireStringAttrIn(llvm::StringRef name, llvm::StringRef defaultValue,
                      llvm::ArrayRef<llvm::StringRef> supported);

  //===--------------------------------------------------------------------===//
  // Building
  //===--------------------------------------------------------------------===//

  /// Creates `OpTy` with inferred result types, verifies and folds it.
  template <typename OpTy>
  llvm::FailureOr<mlir::Value>
  make(mlir::ValueRange operands,
       llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return single(create(OpTy::getOperationName(), operands, attrs, {}, 1));
  }
  /// Same, with the result type given (ops that do not infer it).
  template <typename OpTy>
  llvm::FailureOr<mlir::Value>
  makeTyped(mlir::Type type, mlir::ValueRange operands,
            llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return single(create(OpTy::getOperationName(), operands, attrs, type, 1));
  }
  /// Multi-result creation with inferred types.
  template <typename OpTy>
  llvm::FailureOr<llvm::SmallVector<mlir::Value>>
  makeMulti(unsigned numResults, mlir::ValueRange operands,
            llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return create(OpTy::getOperationName(), operands, attrs, {}, numResults);
  }
  /// Multi-result creation with the result types given (ops that do not
  /// infer them).
  template <typename OpTy>
  llvm::FailureOr<llvm::SmallVector<mlir::Value>>
  makeMultiTyped(mlir::TypeRange types, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return create(OpTy::getOperationName(), operands, attrs, types,
                  types.size());
  }
  /// A `kiln.constant`.
  mlir::Value constant(mlir::DenseElementsAttr value);
  /// A scalar constant of `elementType` (rank 0).
  mlir::Value scalar(mlir::Type elementType, double value);

  /// Attribute shorthands.
  mlir::NamedAttribute named(llvm::StringRef name, mlir::Attribute value) {
    return b.getNamedAttr(name, value);
  }
  mlir::NamedAttribute namedI64(llvm::StringRef name, int64_t v) {
    return named(name, b.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute namedF32(llvm::StringRef name, float v) {
    return named(name, b.getF32FloatAttr(v));
  }
  mlir::NamedAttribute namedF64(llvm::StringRef name, double v) {
    return named(name, b.getF64FloatAttr(v));
  }
  mlir::NamedAttribute namedArray(llvm::StringRef name,
                                  llvm::ArrayRef<int64_t> v) {
    return named(name, b.getDenseI64ArrayAttr(v));
  }
  mlir::NamedAttribute namedUnit(llvm::StringRef name) {
    return named(name, b.getUnitAttr());
  }

  //===--------------------------------------------------------------------===//
  // Results and errors
  //===--------------------------------------------------------------------===//

  /// Binds the node's outputs, in order, to `values`; extra outputs that the
  /// graph never uses may be left unbound.
  llvm::LogicalResult setResults(mlir::ValueRange values);
  llvm::LogicalResult setResult(mlir::Value value) {
    return setResults(mlir::ValueRange(value));
  }
  llvm::ArrayRef<mlir::Value> results() const { return outputValues; }

  /// Records `message` as the import error and fails.
  llvm::LogicalResult fail(const llvm::Twine &message);

private:
  /// Declares graph input `i` to the host program; returns its name.
  std::string declareGuardedInput(size_t i);
  bool trainingMode = false;
  bool recurrenceOps = false;
  const llvm::StringMap<mlir::Value> *graphValues = nullptr;
  llvm::StringSet<> *fourBitNames = nullptr;
  CompositeValues *composites = nullptr;
  ShapeInputGuards *shapeGuards = nullptr;
  SubgraphImporter subgraphImporter;
  llvm::FailureOr<llvm::SmallVector<mlir::Value>>
  create(llvm::StringRef opName, mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs, mlir::TypeRange types,
         unsigned numResults);
  static llvm::FailureOr<mlir::Value>
  single(llvm::FailureOr<llvm::SmallVector<mlir::Value>> values) {
    if (mlir::failed(values))
      return mlir::failure();
    return values->front();
  }
  const onnx::AttributeProto *findAttr(llvm::StringRef name) const;

  mlir::OpBuilder &b;
  const onnx::NodeProto &proto;
  int64_t opsetVersion;
  int64_t domainOpsetVersion = 0;
  llvm::SmallVector<mlir::Value> inputValues;
  llvm::SmallVector<mlir::Value> outputValues;
  std::string baseDir;
  mlir::Location location;
  std::string &error;
};

/// Binds `value` as the node's only result, or forwards the failure that
/// building it reported.
inline llvm::LogicalResult bind(NodeImporter &n,
                                llvm::FailureOr<mlir::Value> value) {
  if (mlir::failed(value))
    return mlir::failure();
  return n.setResult(*value);
}

inline mlir::RankedTensorType typeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}
inline mlir::Type elementTypeOf(mlir::Value v) {
  return typeOf(v).getElementType();
}

/// Normalises `axis` for `rank`, failing with an error naming `what`.
llvm::FailureOr<int64_t> normalizeAxisOrFail(NodeImporter &n, int64_t axis,
                                             int64_t rank,
                                             llvm::StringRef what = "axis");

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_NODEIMPORTER_H

//===- SequenceHandlers.cpp - ONNX sequences and optionals, at compile time ===//
//
// Kiln has no sequence or optional type. The importer resolves them as it
// imports (NodeImporter's CompositeValue): every tensor in one is an
// ordinary kiln value, and a sequence op only picks, inserts or removes
// values, or concatenates and slices them. That takes positions, splits and
// axes known at compile time (constants, or shape arithmetic that folds to
// one); anything else is an error naming the node. SequenceMap unrolls its
// body over the elements. As graph inputs and
// outputs they become tensors (CompositeSignature.h). An If branch may give
// one, and a Loop carry one (ControlFlowHandlers.cpp); a Scan or SequenceMap
// body takes and gives tensors only.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace kiln::onnx_frontend {

bool takesCompositeInputs(StringRef opType) {
  static constexpr StringLiteral kOps[] = {
      "SequenceInsert", "SequenceErase",      "SequenceAt",
      "SequenceLength", "ConcatFromSequence", "Optional",
      "OptionalHasElement", "OptionalGetElement", "Identity",
      "SequenceMap",    "Loop"};
  return llvm::is_contained(kOps, opType);
}

namespace {

using Kind = CompositeValue::Kind;

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

/// Input `i` as a sequence, or an error saying what it is instead.
const CompositeValue *sequenceInput(NodeImporter &n, size_t i) {
  const CompositeValue *value = n.compositeInput(i);
  if (!value || value->kind != Kind::Sequence) {
    (void)n.fail("input " + Twine(i) + " must be a sequence, got " +
                 (value ? "an optional"
                        : n.hasInput(i) ? "a tensor" : "nothing"));
    return nullptr;
  }
  return value;
}

/// The element type every tensor of `seq` has.
Type elementTypeOfSequence(const CompositeValue &seq) {
  return seq.elements.empty() ? seq.elementType
                              : elementTypeOf(seq.elements.front());
}

/// Fails unless `tensor` may join `seq`: the same element type.
LogicalResult checkJoins(NodeImporter &n, const CompositeValue &seq,
                         Value tensor) {
  Type expected = elementTypeOfSequence(seq);
  if (expected && elementTypeOf(tensor) != expected)
    return n.fail("tensor of element type " +
                  typeName(elementTypeOf(tensor)) +
                  " cannot join a sequence of " + typeName(expected));
  return success();
}

/// The position input `i` (one integer, compile-time constant), normalised
/// for a sequence of `size` tensors; `inserting` allows `size` itself.
FailureOr<int64_t> positionInput(NodeImporter &n, size_t i, int64_t size,
                                 bool inserting) {
  FailureOr<SmallVector<int64_t>> values = n.constantInts(i, "position");
  if (failed(values))
    return failure();
  if (values->size() != 1)
    return n.fail("position must hold one integer, got " +
                  Twine(values->size()));
  int64_t position = values->front();
  int64_t normalized = position < 0 ? position + size : position;
  int64_t limit = inserting ? size : size - 1;
  if (normalized < 0 || normalized > limit)
    return n.fail("position " + Twine(position) +
                  " is out of range for a sequence of " + Twine(size) +
                  " tensors");
  return normalized;
}

LogicalResult importSequenceEmpty(NodeImporter &n) {
  auto dtype = static_cast<int32_t>(n.intAttr("dtype", 1));
  Type elementType = convertElementType(dtype, n.context());
  if (!elementType)
    return n.fail("dtype " + onnxTypeName(dtype) + " is not supported");
  n.setCompositeResult(0, {Kind::Sequence, {}, elementType});
  return success();
}

LogicalResult importSequenceConstruct(NodeImporter &n) {
  CompositeValue seq;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) + " is omitted");
    if (failed(checkJoins(n, seq, n.input(i))))
      return failure();
    seq.elements.push_back(n.input(i));
  }
  if (seq.elements.empty())
    return n.fail("expects at least one input");
  n.setCompositeResult(0, std::move(seq));
  return success();
}

LogicalResult importSequenceInsert(NodeImporter &n) {
  const CompositeValue *input = sequenceInput(n, 0);
  if (!input)
    return failure();
  if (!n.hasInput(1))
    return n.fail("input 1 (the tensor to insert) is missing");
  CompositeValue seq = *input;
  if (failed(checkJoins(n, seq, n.input(1))))
    return failure();
  int64_t size = seq.elements.size();
  int64_t position = size;
  if (n.hasInput(2)) {
    FailureOr<int64_t> given = positionInput(n, 2, size, /*inserting=*/true);
    if (failed(given))
      return failure();
    position = *given;
  }
  seq.elements.insert(seq.elements.begin() + position, n.input(1));
  n.setCompositeResult(0, std::move(seq));
  return success();
}

LogicalResult importSequenceErase(NodeImporter &n) {
  const CompositeValue *input = sequenceInput(n, 0);
  if (!input)
    return failure();
  CompositeValue seq = *input;
  int64_t size = seq.elements.size();
  if (size == 0)
    return n.fail("cannot erase from an empty sequence");
  int64_t position = size - 1;
  if (n.hasInput(1)) {
    FailureOr<int64_t> given = positionInput(n, 1, size, /*inserting=*/false);
    if (failed(given))
      return failure();
    position = *given;
  }
  if (seq.elements.size() == 1)
    seq.elementType = elementTypeOf(seq.elements.front());
  seq.elements.erase(seq.elements.begin() + position);
  n.setCompositeResult(0, std::move(seq));
  return success();
}

LogicalResult importSequenceAt(NodeImporter &n) {
  const CompositeValue *seq = sequenceInput(n, 0);
  if (!seq)
    return failure();
  if (!n.hasInput(1))
    return n.fail("input 1 (the position) is missing");
  FailureOr<int64_t> position =
      positionInput(n, 1, seq->elements.size(), /*inserting=*/false);
  if (failed(position))
    return failure();
  return n.setResult(seq->elements[*position]);
}

LogicalResult importSequenceLength(NodeImporter &n) {
  const CompositeValue *seq = sequenceInput(n, 0);
  if (!seq)
    return failure();
  return n.setResult(n.scalar(n.builder().getI64Type(),
                              static_cast<double>(seq->elements.size())));
}

LogicalResult importConcatFromSequence(NodeImporter &n) {
  const CompositeValue *seq = sequenceInput(n, 0);
  if (!seq)
    return failure();
  if (seq->elements.empty())
    return n.fail("cannot concatenate an empty sequence");
  if (!n.hasAttr("axis"))
    return n.fail("requires the 'axis' attribute");
  bool newAxis = n.intAttr("new_axis", 0) != 0;
  int64_t rank = typeOf(seq->elements.front()).getRank();
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), newAxis ? rank + 1 : rank);
  if (failed(axis))
    return failure();
  Composer c(n);
  SmallVector<Value> parts;
  for (Value element : seq->elements) {
    if (typeOf(element).getRank() != rank)
      return n.fail("the sequence's tensors have different ranks (" +
                    Twine(rank) + " and " + Twine(typeOf(element).getRank()) +
                    ")");
    if (!newAxis) {
      parts.push_back(element);
      continue;
    }
    SmallVector<int64_t> shape(typeOf(element).getShape());
    shape.insert(shape.begin() + *axis, 1);
    parts.push_back(c.reshape(element, shape));
  }
  Value result = c.concat(parts, *axis);
  if (c.failed())
    return failure();
  return n.setResult(result);
}

LogicalResult importSplitToSequence(NodeImporter &n) {
  if (!n.hasInput(0))
    return n.fail("input 0 (the tensor to split) is missing");
  Value input = n.input(0);
  ArrayRef<int64_t> shape = typeOf(input).getShape();
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  int64_t dim = shape[*axis];
  if (ShapedType::isDynamic(dim))
    return n.fail("the split axis " + Twine(*axis) + " has no static size");
  // Chunk sizes: ones (then keepdims decides), a scalar's size repeated
  // (the last chunk takes what is left), or the given sizes.
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (!n.hasInput(1)) {
    sizes.assign(dim, 1);
    squeeze = n.intAttr("keepdims", 1) == 0;
  } else {
    FailureOr<SmallVector<int64_t>> split = n.constantInts(1, "split");
    if (failed(split))
      return failure();
    if (n.inputType(1).getRank() == 0) {
      int64_t size = split->front();
      if (size <= 0)
        return n.fail("split " + Twine(size) + " must be positive");
      for (int64_t start = 0; start < dim; start += size)
        sizes.push_back(std::min(size, dim - start));
    } else {
      sizes.assign(split->begin(), split->end());
      int64_t total = 0;
      for (int64_t size : sizes) {
        if (size < 0)
          return n.fail("split sizes must not be negative, got " +
                        Twine(size));
        total += size;
      }
      if (total != dim)
        return n.fail("split sizes sum to " + Twine(total) + ", but axis " +
                      Twine(*axis) + " has " + Twine(dim) + " elements");
    }
  }
  Composer c(n);
  CompositeValue seq{Kind::Sequence, {}, elementTypeOf(input)};
  int64_t start = 0;
  for (int64_t size : sizes) {
    Value part = c.sliceAxis(input, *axis, start, start + size);
    start += size;
    if (squeeze) {
      SmallVector<int64_t> squeezed(shape);
      squeezed.erase(squeezed.begin() + *axis);
      part = c.reshape(part, squeezed);
    }
    seq.elements.push_back(part);
  }
  if (c.failed())
    return failure();
  n.setCompositeResult(0, std::move(seq));
  return success();
}

/// SequenceMap: the body imported once per element (unrolled), its i-th
/// run fed the i-th tensor of every sequence input and the tensor inputs
/// whole; each body output collects into an output sequence.
LogicalResult importSequenceMap(NodeImporter &n) {
  const CompositeValue *seq = sequenceInput(n, 0);
  if (!seq)
    return failure();
  const onnx::GraphProto *body = n.graphAttr("body");
  if (!body)
    return failure();
  size_t length = seq->elements.size();
  if (static_cast<size_t>(body->input_size()) != n.numInputs())
    return n.fail("the body takes " + Twine(body->input_size()) +
                  " inputs, the node gives " + Twine(n.numInputs()));
  for (size_t j = 1; j < n.numInputs(); ++j) {
    const CompositeValue *extra = n.compositeInput(j);
    if (extra && extra->kind != Kind::Sequence)
      return n.fail("input " + Twine(j) + " is an optional; SequenceMap "
                    "takes tensors and sequences");
    if (extra && extra->elements.size() != length)
      return n.fail("input " + Twine(j) + " is a sequence of " +
                    Twine(extra->elements.size()) + " tensors, input 0 of " +
                    Twine(length));
    if (!extra && !n.hasInput(j))
      return n.fail("input " + Twine(j) + " is omitted");
  }
  SmallVector<CompositeValue> outputs(body->output_size());
  for (int k = 0; k < body->output_size(); ++k)
    if (body->output(k).type().has_tensor_type())
      outputs[k].elementType = convertElementType(
          body->output(k).type().tensor_type().elem_type(), n.context());
  // Each run's arguments, gathered before the first import: importing a
  // body restores the sequence scope afterwards, which invalidates the
  // pointers compositeInput returned.
  SmallVector<SmallVector<Value>> runs(length);
  for (size_t i = 0; i < length; ++i) {
    runs[i].push_back(seq->elements[i]);
    for (size_t j = 1; j < n.numInputs(); ++j) {
      const CompositeValue *extra = n.compositeInput(j);
      runs[i].push_back(extra ? extra->elements[i] : n.input(j));
    }
  }
  seq = nullptr;
  for (ArrayRef<Value> args : runs) {
    FailureOr<SmallVector<Value>> results = n.importSubgraph(*body, args);
    if (failed(results))
      return failure();
    for (auto [k, value] : llvm::enumerate(*results))
      outputs[k].elements.push_back(value);
  }
  for (auto [k, output] : llvm::enumerate(outputs)) {
    if (!output.elements.empty())
      output.elementType = {};
    n.setCompositeResult(k, std::move(output));
  }
  return success();
}

LogicalResult importOptional(NodeImporter &n) {
  if (n.compositeInput(0))
    return n.fail("an optional of a sequence is not supported");
  if (n.hasInput(0)) {
    n.setCompositeResult(0, {Kind::Optional, {n.input(0)}, {}});
    return success();
  }
  // An empty optional: its type attribute names the element type.
  Type elementType;
  for (const onnx::AttributeProto &attr : n.node().attribute())
    if (attr.name() == "type" && attr.tp().has_optional_type() &&
        attr.tp().optional_type().elem_type().has_tensor_type())
      elementType = convertElementType(
          attr.tp().optional_type().elem_type().tensor_type().elem_type(),
          n.context());
  if (!elementType)
    for (const onnx::AttributeProto &attr : n.node().attribute())
      if (attr.name() == "type" && attr.tp().has_tensor_type())
        elementType = convertElementType(attr.tp().tensor_type().elem_type(),
                                         n.context());
  n.setCompositeResult(0, {Kind::Optional, {}, elementType});
  return success();
}

LogicalResult importOptionalHasElement(NodeImporter &n) {
  // No input (or an empty name) is an empty optional; a tensor or a sequence
  // is a full one.
  bool has = n.hasInput(0);
  if (const CompositeValue *value = n.compositeInput(0))
    has = value->kind == Kind::Sequence || !value->elements.empty();
  return n.setResult(n.scalar(n.builder().getI1Type(), has ? 1.0 : 0.0));
}

LogicalResult importOptionalGetElement(NodeImporter &n) {
  const CompositeValue *value = n.compositeInput(0);
  if (!value) {
    if (!n.hasInput(0))
      return n.fail("input 0 is missing");
    return n.setResult(n.input(0)); // a tensor is its own element
  }
  if (value->kind == Kind::Sequence) {
    n.setCompositeResult(0, *value);
    return success();
  }
  if (value->elements.empty())
    return n.fail("the optional is empty");
  return n.setResult(value->elements.front());
}

} // namespace

void registerSequenceHandlers(SmallVectorImpl<Handler> &handlers) {
  const char *positions = "positions must be compile-time constants";
  handlers.append({
      {"SequenceEmpty", 11, importSequenceEmpty, ""},
      {"SequenceConstruct", 11, importSequenceConstruct, ""},
      {"SequenceInsert", 11, importSequenceInsert, positions},
      {"SequenceErase", 11, importSequenceErase, positions},
      {"SequenceAt", 11, importSequenceAt, positions},
      {"SequenceLength", 11, importSequenceLength, ""},
      {"ConcatFromSequence", 11, importConcatFromSequence, ""},
      {"SplitToSequence", 11, importSplitToSequence,
       "split must be a compile-time constant"},
      {"SequenceMap", 17, importSequenceMap,
       "the body is unrolled over the sequence's length"},
      {"Optional", 15, importOptional, "no optional of a sequence"},
      {"OptionalHasElement", 15, importOptionalHasElement, ""},
      {"OptionalHasElement", 18, importOptionalHasElement, ""},
      {"OptionalGetElement", 15, importOptionalGetElement, ""},
      {"OptionalGetElement", 18, importOptionalGetElement, ""},
  });
}

} // namespace kiln::onnx_frontend

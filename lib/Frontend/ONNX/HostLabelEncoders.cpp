//===- HostLabelEncoders.cpp - LabelEncoder's host forms and splits -------===//
//
// ai.onnx.ml's LabelEncoder on the host: its attributes normalised to the
// one form the host step takes, and the splits that let the device do the
// numeric half of a LabelEncoder from numbers to strings and of a
// TreeEnsembleClassifier with string labels (HostPartition.cpp calls
// both).
//
//===----------------------------------------------------------------------===//

#include "HostNodes.h"

#include "NodeImporter.h"

#include <cstdio>

using namespace mlir;

namespace kiln::onnx_frontend::host {

/// The ONNX element type of LabelEncoder's values (values_strings,
/// values_int64s, values_floats or values_tensor), 0 when it has none.
int32_t labelEncoderValueType(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    if (attr.name() == "values_strings")
      return kOnnxString;
    if (attr.name() == "values_int64s")
      return onnx::TensorProto::INT64;
    if (attr.name() == "values_floats")
      return onnx::TensorProto::FLOAT;
    if (attr.name() == "values_tensor" && attr.has_t())
      return attr.t().data_type();
  }
  return 0;
}

/// LabelEncoder's attributes in the one form the host step takes
/// (HostStringOps.cpp): `keys` (strings), `values` and `default` (text) and
/// `to` ("string" or the values' dtype name), whichever of keys_strings /
/// keys_tensor, values_{strings,int64s,floats,tensor} and default_* the node
/// used. The defaults ONNX gives when none is set: "_Unused", -1 and -0.0.
LogicalResult labelEncoderAttributes(const onnx::NodeProto &node,
                                     int64_t mlOpset, TypeOf typeOf,
                                     StringRef baseDir, MLIRContext &context,
                                     rt::HostStep &step, std::string &error) {
  auto fail = [&](const Twine &message) -> LogicalResult {
    if (error.empty())
      error = message.str();
    return failure();
  };
  // (The nodes a split writes have the opset-2 form whatever the model's
  // opset: keys_strings.)
  bool split = llvm::any_of(node.attribute(), [](const auto &attr) {
    return attr.name() == "keys_strings";
  });
  if (mlOpset < 2 && !split)
    return fail(describeNode(node) + ": LabelEncoder of ai.onnx.ml opset " +
                Twine(mlOpset) +
                " (classes_strings) is not supported; opset 2 and later are");
  if (typeOf(node.input(0)) != kOnnxString)
    return fail(describeNode(node) + ": input '" + node.input(0) +
                "' must be a STRING tensor (LabelEncoder runs on the host "
                "from strings only)");
  const onnx::AttributeProto *keys = nullptr, *values = nullptr,
                             *fallback = nullptr;
  std::string valuesName;
  for (const onnx::AttributeProto &attr : node.attribute()) {
    StringRef name = attr.name();
    const onnx::AttributeProto **slot = name.starts_with("keys_")     ? &keys
                                        : name.starts_with("values_") ? &values
                                        : name.starts_with("default_")
                                            ? &fallback
                                            : nullptr;
    if (!slot)
      return fail(describeNode(node) + ": attribute '" + name +
                  "' is not one of LabelEncoder's");
    if (*slot)
      return fail(describeNode(node) + ": attributes '" + (*slot)->name() +
                  "' and '" + name + "' both set; give one");
    *slot = &attr;
  }
  if (!keys || !values)
    return fail(describeNode(node) +
                ": needs a keys_* and a values_* attribute");

  // Keys: strings only (the input is a STRING tensor).
  std::vector<std::string> keyTexts;
  if (keys->name() == "keys_strings") {
    keyTexts.assign(keys->strings().begin(), keys->strings().end());
  } else if (keys->name() == "keys_tensor" && keys->has_t() &&
             keys->t().data_type() == kOnnxString) {
    keyTexts.assign(keys->t().string_data().begin(),
                    keys->t().string_data().end());
  } else {
    return fail(describeNode(node) + ": keys '" + keys->name() +
                "' must be strings for a STRING input (keys_strings or a "
                "STRING keys_tensor)");
  }

  // Values, as text, and their type.
  int32_t valueType = labelEncoderValueType(node);
  auto numberText = [](double v, bool isDouble) {
    char buffer[40];
    std::snprintf(buffer, sizeof(buffer), isDouble ? "%.17g" : "%.9g", v);
    return std::string(buffer);
  };
  // A tensor's elements as text: strings as they are, integers in decimal,
  // floats with enough digits to read back exactly.
  auto tensorTexts = [&](const onnx::TensorProto &tensor)
      -> FailureOr<std::vector<std::string>> {
    if (tensor.data_type() == kOnnxString)
      return std::vector<std::string>(tensor.string_data().begin(),
                                      tensor.string_data().end());
    std::string decodeError;
    FailureOr<DenseElementsAttr> decoded =
        decodeTensor(tensor, baseDir, &context, decodeError);
    if (failed(decoded))
      return fail(describeNode(node) + ": " + decodeError);
    std::vector<std::string> texts;
    Type elementType = decoded->getElementType();
    if (auto integer = dyn_cast<IntegerType>(elementType)) {
      for (const APInt &v : decoded->getValues<APInt>())
        texts.push_back(integer.isUnsigned() || integer.getWidth() == 1
                            ? std::to_string(v.getZExtValue())
                            : std::to_string(v.getSExtValue()));
    } else if (isa<FloatType>(elementType)) {
      for (const APFloat &v : decoded->getValues<APFloat>())
        texts.push_back(numberText(v.convertToDouble(), elementType.isF64()));
    } else {
      return fail(describeNode(node) + ": tensor '" + tensor.name() +
                  "' has element type " + onnxTypeName(tensor.data_type()) +
                  ", which LabelEncoder on the host does not take");
    }
    return texts;
  };
  std::vector<std::string> valueTexts;
  if (values->name() == "values_strings") {
    valueTexts.assign(values->strings().begin(), values->strings().end());
  } else if (values->name() == "values_int64s") {
    for (int64_t v : values->ints())
      valueTexts.push_back(std::to_string(v));
  } else if (values->name() == "values_floats") {
    for (float v : values->floats())
      valueTexts.push_back(numberText(v, false));
  } else if (values->name() == "values_tensor" && values->has_t()) {
    FailureOr<std::vector<std::string>> texts = tensorTexts(values->t());
    if (failed(texts))
      return failure();
    valueTexts = std::move(*texts);
  } else {
    return fail(describeNode(node) + ": attribute '" + values->name() +
                "' is not one of LabelEncoder's");
  }

  // The default, of the values' type.
  std::string defaultText = valueType == kOnnxString ? "_Unused"
                            : valueType == onnx::TensorProto::FLOAT ||
                                    valueType == onnx::TensorProto::DOUBLE
                                ? "-0.0"
                                : "-1";
  if (fallback) {
    StringRef name = fallback->name();
    bool matches =
        (name == "default_string" && valueType == kOnnxString) ||
        (name == "default_int64" && values->name() == "values_int64s") ||
        (name == "default_float" && values->name() == "values_floats") ||
        (name == "default_tensor" && fallback->has_t() &&
         values->name() == "values_tensor" &&
         fallback->t().data_type() == valueType);
    if (!matches)
      return fail(describeNode(node) + ": default '" + name +
                  "' does not match values '" + values->name() + "' (" +
                  onnxTypeName(valueType) + ")");
    if (name == "default_string") {
      defaultText = fallback->s();
    } else if (name == "default_int64") {
      defaultText = std::to_string(fallback->i());
    } else if (name == "default_float") {
      defaultText = numberText(fallback->f(), false);
    } else {
      FailureOr<std::vector<std::string>> texts = tensorTexts(fallback->t());
      if (failed(texts))
        return failure();
      if (texts->size() != 1)
        return fail(describeNode(node) +
                    ": default_tensor must hold one value, got " +
                    Twine(texts->size()));
      defaultText = texts->front();
    }
  }

  std::string target = "string";
  if (valueType != kOnnxString) {
    std::optional<rt::DType> dtype = runtimeDType(valueType);
    if (!dtype)
      return fail(describeNode(node) + ": values of element type " +
                  onnxTypeName(valueType) + " are not supported");
    target = std::string(rt::dtypeName(*dtype));
  }
  int32_t declared = typeOf(node.output(0));
  if (declared != 0 && declared != valueType)
    return fail(describeNode(node) + ": output '" + node.output(0) +
                "' is declared " + onnxTypeName(declared) +
                " but the values are " + onnxTypeName(valueType));
  step.attributes.push_back({"keys", std::move(keyTexts)});
  step.attributes.push_back({"values", std::move(valueTexts)});
  step.attributes.push_back({"default", {defaultText}});
  step.attributes.push_back({"to", {target}});
  return success();
}

namespace {

/// The host half of a split: `position` (int64, 0 ... count-1, or count
/// for none) to text, then to `output` through a LabelEncoder from "0" ...
/// "count-1" to the values `valueAttrs` give (values_* and default_*).
void appendPositionsToStrings(std::vector<onnx::NodeProto> &nodes,
                              const std::string &position,
                              const std::string &output, int64_t count,
                              const std::string &name,
                              ArrayRef<onnx::AttributeProto> valueAttrs) {
  std::string text = output + "__kiln_label_text";
  onnx::NodeProto cast;
  cast.set_op_type("Cast");
  cast.add_input(position);
  cast.add_output(text);
  onnx::AttributeProto *to = cast.add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(kOnnxString);
  onnx::NodeProto map;
  map.set_domain(kMLDomain);
  map.set_op_type("LabelEncoder");
  map.set_name(name);
  map.add_input(text);
  map.add_output(output);
  onnx::AttributeProto *names = map.add_attribute();
  names->set_name("keys_strings");
  names->set_type(onnx::AttributeProto::STRINGS);
  for (int64_t i = 0; i < count; ++i)
    names->add_strings(std::to_string(i));
  for (const onnx::AttributeProto &attr : valueAttrs)
    *map.add_attribute() = attr;
  nodes.push_back(std::move(cast));
  nodes.push_back(std::move(map));
}

/// A TreeEnsembleClassifier with classlabels_strings: the device computes
/// the label's position (classlabels_int64s 0 ... C-1), the host maps it
/// to the string (appendPositionsToStrings). The scores stay as they are.
bool splitStringClassifier(const onnx::NodeProto &node,
                           std::vector<onnx::NodeProto> &nodes) {
  const onnx::AttributeProto *labels = nullptr;
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == "classlabels_strings")
      labels = &attr;
  if (node.domain() != kMLDomain ||
      node.op_type() != "TreeEnsembleClassifier" || !labels ||
      node.output_size() < 1)
    return false;
  int64_t count = labels->strings_size();
  onnx::NodeProto device = node;
  device.clear_attribute();
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() != "classlabels_strings")
      *device.add_attribute() = attr;
  onnx::AttributeProto *positions = device.add_attribute();
  positions->set_name("classlabels_int64s");
  positions->set_type(onnx::AttributeProto::INTS);
  for (int64_t i = 0; i < count; ++i)
    positions->add_ints(i);
  std::string output = node.output(0);
  if (output.empty()) {
    nodes.push_back(std::move(device));
    return true;
  }
  std::string position = output + "__kiln_label_position";
  device.set_output(0, position);
  nodes.push_back(std::move(device));
  onnx::AttributeProto values = *labels;
  values.set_name("values_strings");
  appendPositionsToStrings(nodes, position, output, count,
                           node.name().empty() ? "" : node.name() + "/labels",
                           {values});
  return true;
}

} // namespace

/// A LabelEncoder from numbers to strings becomes three nodes: a
/// LabelEncoder from the numbers to each key's position (0 to K - 1, K for
/// no key; on the device, MLHandlers.cpp), a Cast of the positions to
/// strings and a LabelEncoder from "0" ... "K-1" to the values (both host
/// steps). The device does the comparisons in the input's type (NaN keys,
/// the first of a key listed twice), the host only maps whole numbers,
/// whose text is exact. Returns whether any node was split.
bool splitLabelEncoders(onnx::GraphProto &graph, TypeOf typeOf) {
  std::vector<onnx::NodeProto> nodes;
  bool split = false;
  for (const onnx::NodeProto &node : graph.node()) {
    if (splitStringClassifier(node, nodes)) {
      split = true;
      continue;
    }
    if (node.domain() != kMLDomain || node.op_type() != "LabelEncoder" ||
        node.input_size() != 1 || node.output_size() != 1 ||
        typeOf(node.input(0)) == kOnnxString ||
        labelEncoderValueType(node) != kOnnxString) {
      nodes.push_back(node);
      continue;
    }
    const onnx::AttributeProto *keys = nullptr, *values = nullptr;
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (StringRef(attr.name()).starts_with("keys_"))
        keys = &attr;
      if (StringRef(attr.name()).starts_with("values_"))
        values = &attr;
    }
    int64_t count = !values                             ? 0
                    : values->name() == "values_strings" ? values->strings_size()
                                                         : values->t().string_data_size();
    if (!keys || !values) {
      nodes.push_back(node); // the device handler names what is missing
      continue;
    }
    std::string output = node.output(0);
    std::string position = output + "__kiln_label_position";
    onnx::NodeProto lookup;
    lookup.set_domain(kMLDomain);
    lookup.set_op_type("LabelEncoder");
    lookup.set_name(node.name().empty() ? "" : node.name() + "/positions");
    lookup.add_input(node.input(0));
    lookup.add_output(position);
    *lookup.add_attribute() = *keys;
    onnx::AttributeProto *positions = lookup.add_attribute();
    positions->set_name("values_int64s");
    positions->set_type(onnx::AttributeProto::INTS);
    for (int64_t i = 0; i < count; ++i)
      positions->add_ints(i);
    onnx::AttributeProto *none = lookup.add_attribute();
    none->set_name("default_int64");
    none->set_type(onnx::AttributeProto::INT);
    none->set_i(count);
    nodes.push_back(std::move(lookup));
    SmallVector<onnx::AttributeProto> valueAttrs;
    for (const onnx::AttributeProto &attr : node.attribute())
      if (!StringRef(attr.name()).starts_with("keys_"))
        valueAttrs.push_back(attr);
    appendPositionsToStrings(nodes, position, output, count, node.name(),
                             valueAttrs);
    split = true;
  }
  if (!split)
    return false;
  graph.clear_node();
  for (onnx::NodeProto &node : nodes)
    *graph.add_node() = std::move(node);
  return true;
}

} // namespace kiln::onnx_frontend::host

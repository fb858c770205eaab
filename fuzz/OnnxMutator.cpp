//===- OnnxMutator.cpp - Structure-aware mutation of ONNX models ----------===//
//
// kiln-fuzz-onnx's LLVMFuzzerCustomMutator. Byte flips rarely survive
// protobuf parsing, and those that do mostly change a weight. This mutator
// parses the input as a ModelProto and changes it the way a buggy exporter
// would: an attribute's value or type, a dim, a dtype, an op type, an
// initializer's size, a node's inputs and outputs, the opset; then
// serializes it. Inputs that do not parse (and one in eight that do) get
// libFuzzer's byte mutation instead, so the wire format is fuzzed too.
// Debian has no libprotobuf-mutator; this is our own, over the ONNX classes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/ONNX/Importer.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using Rng = std::minstd_rand;

size_t pick(Rng &rng, size_t n) {
  return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}

/// Integers an exporter gets wrong: the edges of each range, and small ones.
int64_t interestingInt(Rng &rng) {
  static const int64_t values[] = {0,
                                   1,
                                   -1,
                                   2,
                                   3,
                                   -2,
                                   7,
                                   64,
                                   255,
                                   1 << 16,
                                   std::numeric_limits<int32_t>::max(),
                                   std::numeric_limits<int32_t>::min(),
                                   int64_t(1) << 31,
                                   int64_t(1) << 32,
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  if (pick(rng, 4) == 0)
    return static_cast<int64_t>(rng()) % 17 - 8;
  return values[pick(rng, std::size(values))];
}

float interestingFloat(Rng &rng) {
  static const float values[] = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -1.0f,
                                 0.5f,
                                 1e-30f,
                                 1e30f,
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::denorm_min()};
  return values[pick(rng, std::size(values))];
}

/// Every op type the importer has a handler for, plus a few it has not.
const std::vector<std::string> &opTypes() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> all;
    for (const auto &op : kiln::onnx_frontend::listSupportedOps())
      all.push_back(op.opType);
    all.erase(std::unique(all.begin(), all.end()), all.end());
    all.insert(all.end(), {"", "NoSuchOp", "Loop", "If", "Scan"});
    return all;
  }();
  return types;
}

/// Every value name of the graph: inputs, initializers, node outputs.
std::vector<std::string> valueNames(const onnx::GraphProto &graph) {
  std::vector<std::string> names;
  for (const auto &input : graph.input())
    names.push_back(input.name());
  for (const auto &init : graph.initializer())
    names.push_back(init.name());
  for (const auto &node : graph.node())
    for (const auto &output : node.output())
      names.push_back(output);
  return names;
}

/// The graph to mutate: the main one, or now and then a subgraph of an
/// If/Loop/Scan attribute.
onnx::GraphProto &pickGraph(onnx::GraphProto &graph, Rng &rng, int depth = 0) {
  if (depth > 8 || pick(rng, 3) != 0)
    return graph;
  std::vector<onnx::GraphProto *> subgraphs;
  for (auto &node : *graph.mutable_node())
    for (auto &attr : *node.mutable_attribute()) {
      if (attr.has_g())
        subgraphs.push_back(attr.mutable_g());
      for (auto &g : *attr.mutable_graphs())
        subgraphs.push_back(&g);
    }
  if (subgraphs.empty())
    return graph;
  return pickGraph(*subgraphs[pick(rng, subgraphs.size())], rng, depth + 1);
}

void mutateAttribute(onnx::NodeProto &node, Rng &rng) {
  if (node.attribute_size() == 0 || pick(rng, 6) == 0) {
    // An attribute the node may not expect, or expect with another type.
    static const char *names[] = {
        "axis",     "axes",      "perm",        "kernel_shape", "strides",
        "pads",     "dilations", "group",       "keepdims",     "to",
        "epsilon",  "alpha",     "transA",      "transB",       "mode",
        "auto_pad", "value",     "num_outputs", "split",        "ceil_mode",
        "blocksize"};
    onnx::AttributeProto *attr = node.add_attribute();
    attr->set_name(names[pick(rng, std::size(names))]);
    attr->set_type(onnx::AttributeProto::INT);
    attr->set_i(interestingInt(rng));
    return;
  }
  int index = static_cast<int>(pick(rng, node.attribute_size()));
  onnx::AttributeProto &attr = *node.mutable_attribute(index);
  switch (pick(rng, 9)) {
  case 0:
    attr.set_i(interestingInt(rng));
    break;
  case 1:
    attr.set_f(interestingFloat(rng));
    break;
  case 2:
    if (attr.ints_size() > 0)
      attr.set_ints(pick(rng, attr.ints_size()), interestingInt(rng));
    else
      attr.add_ints(interestingInt(rng));
    break;
  case 3: // One more or one fewer element: pads of the wrong rank.
    if (attr.ints_size() > 0 && pick(rng, 2) == 0)
      attr.mutable_ints()->RemoveLast();
    else
      attr.add_ints(interestingInt(rng));
    break;
  case 4: { // The declared type no longer matches the field set.
    static const onnx::AttributeProto::AttributeType types[] = {
        onnx::AttributeProto::UNDEFINED, onnx::AttributeProto::FLOAT,
        onnx::AttributeProto::INT,       onnx::AttributeProto::STRING,
        onnx::AttributeProto::TENSOR,    onnx::AttributeProto::GRAPH,
        onnx::AttributeProto::FLOATS,    onnx::AttributeProto::INTS,
        onnx::AttributeProto::STRINGS};
    attr.set_type(types[pick(rng, std::size(types))]);
    break;
  }
  case 5:
    attr.set_s(pick(rng, 2) ? "" : "NOTSET");
    break;
  case 6:
    node.mutable_attribute()->DeleteSubrange(index, 1);
    break;
  case 7: // A tensor attribute (Constant's value) of another shape.
    if (attr.has_t()) {
      onnx::TensorProto &t = *attr.mutable_t();
      if (t.dims_size() > 0)
        t.set_dims(pick(rng, t.dims_size()), interestingInt(rng));
      else
        t.add_dims(interestingInt(rng));
    } else {
      attr.add_floats(interestingFloat(rng));
    }
    break;
  default: { // A duplicate (copied first: adding may move the original).
    onnx::AttributeProto copy = attr;
    *node.add_attribute() = std::move(copy);
    break;
  }
  }
}

void mutateShape(onnx::TypeProto &type, Rng &rng) {
  onnx::TypeProto_Tensor &tensor = *type.mutable_tensor_type();
  if (pick(rng, 4) == 0) {
    tensor.set_elem_type(static_cast<int32_t>(pick(rng, 26)));
    return;
  }
  onnx::TensorShapeProto &shape = *tensor.mutable_shape();
  switch (pick(rng, 5)) {
  case 0:
    shape.add_dim()->set_dim_value(interestingInt(rng));
    break;
  case 1:
    if (shape.dim_size() > 0)
      shape.mutable_dim()->RemoveLast();
    break;
  case 2:
    if (shape.dim_size() > 0)
      shape.mutable_dim(pick(rng, shape.dim_size()))
          ->set_dim_param(pick(rng, 2) ? "N" : "");
    break;
  case 3:
    tensor.clear_shape();
    break;
  default:
    if (shape.dim_size() > 0)
      shape.mutable_dim(pick(rng, shape.dim_size()))
          ->set_dim_value(interestingInt(rng));
    break;
  }
}

void mutateInitializer(onnx::TensorProto &t, Rng &rng) {
  switch (pick(rng, 6)) {
  case 0:
    t.set_data_type(static_cast<int32_t>(pick(rng, 26)));
    break;
  case 1: // The dims no longer match the data.
    if (t.dims_size() > 0)
      t.set_dims(pick(rng, t.dims_size()), interestingInt(rng));
    else
      t.add_dims(interestingInt(rng));
    break;
  case 2: // The data no longer matches the dims.
    if (t.has_raw_data()) {
      std::string raw = t.raw_data();
      raw.resize(pick(rng, 2) ? raw.size() / 2
                              : raw.size() + 1 + pick(rng, 16));
      t.set_raw_data(raw);
    } else if (t.float_data_size() > 0) {
      t.mutable_float_data()->RemoveLast();
    } else {
      t.add_int64_data(interestingInt(rng));
    }
    break;
  case 3: // One value changed: an index, a shape, a count.
    if (t.int64_data_size() > 0)
      t.set_int64_data(pick(rng, t.int64_data_size()), interestingInt(rng));
    else if (t.raw_data().size() >= 8 &&
             (t.data_type() == onnx::TensorProto::INT64)) {
      std::string raw = t.raw_data();
      int64_t v = interestingInt(rng);
      std::memcpy(&raw[8 * pick(rng, raw.size() / 8)], &v, 8);
      t.set_raw_data(raw);
    } else if (t.float_data_size() > 0) {
      t.set_float_data(pick(rng, t.float_data_size()), interestingFloat(rng));
    }
    break;
  case 4:
    t.add_dims(pick(rng, 2) ? 1 : 0);
    break;
  default: // Data in two fields at once.
    t.add_float_data(interestingFloat(rng));
    break;
  }
}

/// Rewires an edge: a node input or output renamed to another value, to
/// nothing, or to a name nobody produces.
void mutateEdge(onnx::GraphProto &graph, Rng &rng) {
  if (graph.node_size() == 0)
    return;
  onnx::NodeProto &node = *graph.mutable_node(pick(rng, graph.node_size()));
  std::vector<std::string> names = valueNames(graph);
  auto name = [&]() -> std::string {
    switch (pick(rng, 6)) {
    case 0:
      return "";
    case 1:
      return "dangling";
    default:
      return names.empty() ? "" : names[pick(rng, names.size())];
    }
  };
  switch (pick(rng, 6)) {
  case 0:
    node.add_input(name());
    break;
  case 1:
    if (node.input_size() > 0)
      node.mutable_input()->RemoveLast();
    break;
  case 2:
    if (node.output_size() > 0)
      node.set_output(pick(rng, node.output_size()), name());
    else
      node.add_output(name());
    break;
  case 3:
    if (graph.output_size() > 0)
      graph.mutable_output(pick(rng, graph.output_size()))->set_name(name());
    break;
  default:
    if (node.input_size() > 0)
      node.set_input(pick(rng, node.input_size()), name());
    break;
  }
}

void mutateNodes(onnx::GraphProto &graph, Rng &rng) {
  if (graph.node_size() == 0)
    return;
  int index = static_cast<int>(pick(rng, graph.node_size()));
  switch (pick(rng, 4)) {
  case 0:
    graph.mutable_node()->DeleteSubrange(index, 1);
    break;
  case 1: {
    onnx::NodeProto copy = graph.node(index);
    *graph.add_node() = std::move(copy);
  } break;
  case 2:
    graph.mutable_node()->SwapElements(
        index, static_cast<int>(pick(rng, graph.node_size())));
    break;
  default:
    graph.mutable_node(index)->set_domain(pick(rng, 2) ? "com.microsoft"
                                                       : "ai.onnx.ml");
    break;
  }
}

void mutateModel(onnx::ModelProto &model, Rng &rng) {
  onnx::GraphProto &graph = pickGraph(*model.mutable_graph(), rng);
  switch (pick(rng, 10)) {
  case 0:
  case 1:
    if (graph.node_size() > 0)
      mutateAttribute(*graph.mutable_node(pick(rng, graph.node_size())), rng);
    break;
  case 2: {
    std::vector<onnx::ValueInfoProto *> values;
    for (auto &v : *graph.mutable_input())
      values.push_back(&v);
    for (auto &v : *graph.mutable_output())
      values.push_back(&v);
    for (auto &v : *graph.mutable_value_info())
      values.push_back(&v);
    if (!values.empty())
      mutateShape(*values[pick(rng, values.size())]->mutable_type(), rng);
    break;
  }
  case 3:
    if (graph.initializer_size() > 0)
      mutateInitializer(
          *graph.mutable_initializer(pick(rng, graph.initializer_size())), rng);
    break;
  case 4:
  case 5:
    mutateEdge(graph, rng);
    break;
  case 6:
    if (graph.node_size() > 0)
      graph.mutable_node(pick(rng, graph.node_size()))
          ->set_op_type(opTypes()[pick(rng, opTypes().size())]);
    break;
  case 7:
    mutateNodes(graph, rng);
    break;
  case 8:
    if (model.opset_import_size() > 0)
      model.mutable_opset_import(pick(rng, model.opset_import_size()))
          ->set_version(pick(rng, 2) ? static_cast<int64_t>(1 + pick(rng, 25))
                                     : interestingInt(rng));
    break;
  default: // An initializer that is also a graph input, or is no longer.
    if (graph.initializer_size() > 0 && pick(rng, 2)) {
      onnx::ValueInfoProto &input = *graph.add_input();
      input.set_name(
          graph.initializer(pick(rng, graph.initializer_size())).name());
      input.mutable_type()->mutable_tensor_type()->set_elem_type(1);
    } else if (graph.initializer_size() > 0) {
      graph.mutable_initializer()->DeleteSubrange(
          static_cast<int>(pick(rng, graph.initializer_size())), 1);
    }
    break;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto model;
  if (pick(rng, 8) == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  // One to three changes: a buggy exporter rarely gets only one thing wrong.
  size_t changes = 1 + pick(rng, 3);
  for (size_t i = 0; i < changes; ++i)
    mutateModel(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

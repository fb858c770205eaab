//===- QdqRewrite.cpp - Plan and write a model's QDQ form -----------------===//
//
// The planning and rewriting halves of kilnc --precision=int8
// (kiln/Compiler/Quantization.h). The rewrite writes what onnxruntime's
// quantize_static writes in QDQ format, so the QDQ model kilnc compiles is
// also one onnxruntime runs (--save-quantized), and the importer and
// kiln-fuse-quantized treat it as any exported QDQ model:
//
//   x -> Q(s_x, z_x) -> DQ ----------.
//   W_int8 -> DQ(s_w[o], axis) ------+-> Conv/MatMul/Gemm -> Q(s_y) -> DQ -> y
//   B_int32 -> DQ(s_x * s_w[o]) -----'
//
// Activations: uint8 with zero point 0 where the calibrated minimum is not
// negative (after a Relu), else int8 with zero point 0; scale threshold /
// 255 or / 127. Weights: int8 in [-127, 127], one scale per output channel
// (max |w| / 127). Biases: int32 in units of s_x * s_w[o] (an f32 product,
// as onnxruntime computes it). A Relu that is a quantized node's only
// reader is folded into its uint8 output: quantizing to [0, 255] with zero
// point 0 clamps at zero as the Relu did. The DQ after a node keeps the
// node's (or the folded Relu's) output name, so every reader, and the graph
// outputs, see the same names as before.
//
// --precision=fp8 (plan.fp8) writes the same chain in float8 e4m3 (opset
// 19's FLOAT8E4M3FN, saturating, round to nearest even), as onnxruntime's
// quantizer does for QuantType.QFLOAT8E4M3FN:
//   - activations: per tensor, scale threshold / 448 (e4m3's largest
//     finite value), zero point an e4m3 zero;
//   - weights: per output channel, scale max |w| / 448, their DQ without a
//     zero point;
//   - biases stay f32 (the fp8 kernel adds them in its f32 epilogue);
//   - no Relu is folded: e4m3 is symmetric, the Relu runs after the DQ.
// Twins for the sensitivity report are named `_fp8` instead of `_int8`.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Quantization.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace kiln {
namespace {

/// ONNX's FLOAT8E4M3FN (opset 19), newer than the onnx protobuf definitions
/// Kiln builds against (Debian's libonnx).
constexpr int kFloat8E4M3FN = 17;
/// e4m3's largest finite value (1.75 * 2^8).
constexpr float kE4M3Max = 448.0f;

/// `x` as an e4m3fn byte: round to nearest even, saturating to +-448 (the
/// QuantizeLinear `saturate` default); NaN becomes 0x7F.
uint8_t toE4M3(float x) {
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  float a = std::fabs(x);
  if (std::isnan(a))
    return 0x7F;
  a = std::min(a, kE4M3Max);
  if (a < 0x1p-6f) // subnormal: steps of 2^-9 (8 of them reach 2^-6)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  int e = 0;
  float m = std::frexp(a, &e) * 2; // a = m * 2^(e-1), m in [1, 2)
  --e;
  int q = static_cast<int>(std::nearbyint((m - 1) * 8));
  if (q == 8)
    q = 0, ++e;
  return sign | static_cast<uint8_t>(((e + 7) << 3) | q);
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(message.str());
}

const onnx::AttributeProto *attribute(const onnx::NodeProto &node,
                                      llvm::StringRef name) {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t intAttribute(const onnx::NodeProto &node, llvm::StringRef name,
                     int64_t otherwise) {
  const onnx::AttributeProto *a = attribute(node, name);
  return a ? a->i() : otherwise;
}

float floatAttribute(const onnx::NodeProto &node, llvm::StringRef name,
                     float otherwise) {
  const onnx::AttributeProto *a = attribute(node, name);
  return a ? a->f() : otherwise;
}

std::string nodeName(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  return node.output_size() ? node.output(0) : node.op_type();
}

/// A float initializer's values (raw or float_data); nullopt for any other
/// type or for external data.
std::optional<std::vector<float>> floatValues(const onnx::TensorProto &t) {
  if (t.data_type() != onnx::TensorProto::FLOAT ||
      t.data_location() == onnx::TensorProto::EXTERNAL)
    return std::nullopt;
  int64_t count = 1;
  for (int64_t d : t.dims())
    count *= d;
  std::vector<float> values;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(count) * sizeof(float))
      return std::nullopt;
    values.resize(count);
    std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (t.float_data_size() != count)
      return std::nullopt;
    values.assign(t.float_data().begin(), t.float_data().end());
  }
  return values;
}

template <typename T>
void addInitializer(onnx::GraphProto &graph, const std::string &name,
                    int dataType, const std::vector<int64_t> &dims,
                    const std::vector<T> &values) {
  onnx::TensorProto *t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(dataType);
  for (int64_t d : dims)
    t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char *>(values.data()),
                              values.size() * sizeof(T)));
}

onnx::NodeProto makeNode(const std::string &op, const std::string &name,
                         std::vector<std::string> inputs,
                         const std::string &output, int64_t axis = -1) {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.set_name(name);
  for (std::string &in : inputs)
    node.add_input(std::move(in));
  node.add_output(output);
  if (axis >= 0) {
    onnx::AttributeProto *a = node.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return node;
}

/// An activation's quantization: uint8 for a non-negative range, else int8
/// (fp8: e4m3 either way); zero point 0.
struct ActivationParams {
  float scale;
  bool unsignedStorage;
  bool fp8 = false;
};

ActivationParams activationParams(const TensorRange &range, bool fp8) {
  bool nonNegative = range.min >= 0 && !fp8;
  double levels = fp8 ? kE4M3Max : nonNegative ? 255 : 127;
  float scale = static_cast<float>(range.threshold / levels);
  if (!(scale > 0) || !std::isfinite(scale))
    scale = 1.0f; // An all-zero (or empty) tensor: any scale is exact.
  return {scale, nonNegative, fp8};
}

} // namespace

llvm::Expected<QuantizationPlan>
planQuantization(const onnx::ModelProto &model,
                 const QuantizationOptions &options, llvm::StringRef path) {
  int64_t opset = 0;
  for (const onnx::OperatorSetIdProto &id : model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx")
      opset = id.version();
  if (opset < 13)
    return error(path + ": " + options.flag() +
                 " needs opset 13 or later (per-channel DequantizeLinear); "
                 "the model imports opset " +
                 llvm::Twine(opset));
  if (options.fp8 && opset < 19)
    return error(path +
                 ": --precision=fp8 needs opset 19 or later "
                 "(float8 QuantizeLinear); the model imports opset " +
                 llvm::Twine(opset) +
                 " (raise it with onnx.version_converter.convert_version"
                 "(model, 19))");
  const onnx::GraphProto &graph = model.graph();
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers[t.name()] = &t;
  llvm::StringMap<std::vector<int>> readers;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string &in : graph.node(i).input())
      if (!in.empty())
        readers[in].push_back(i);
  llvm::StringSet<> graphOutputs;
  for (const onnx::ValueInfoProto &v : graph.output())
    graphOutputs.insert(v.name());
  llvm::StringSet<> keep, kept;
  for (const std::string &name : options.keepFloat)
    keep.insert(name);

  auto floatWeight = [&](const std::string &name,
                         int rank) -> const onnx::TensorProto * {
    auto it = initializers.find(name);
    if (it == initializers.end())
      return nullptr;
    const onnx::TensorProto *t = it->second;
    if (t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() != rank ||
        t->data_location() == onnx::TensorProto::EXTERNAL)
      return nullptr;
    return t;
  };

  QuantizationPlan plan;
  plan.fp8 = options.fp8;
  std::set<std::string> tensors;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    bool standard = node.domain().empty() || node.domain() == "ai.onnx";
    if (!standard || node.input_size() < 2 || node.output_size() != 1)
      continue;
    QuantizedNode q;
    q.index = i;
    q.name = nodeName(node);
    q.activation = node.input(0);
    q.weight = node.input(1);
    const std::string &op = node.op_type();
    const onnx::TensorProto *bias = nullptr;
    if (op == "Conv") {
      if (!floatWeight(q.weight, 4))
        continue;
      q.weightAxis = 0;
      if (node.input_size() > 2 && !node.input(2).empty()) {
        bias = floatWeight(node.input(2), 1);
        if (!bias)
          continue;
      }
    } else if (op == "MatMul") {
      if (!floatWeight(q.weight, 2))
        continue;
      q.weightAxis = 1;
    } else if (op == "Gemm") {
      if (!floatWeight(q.weight, 2) || intAttribute(node, "transA", 0) != 0 ||
          floatAttribute(node, "alpha", 1) != 1.0f ||
          floatAttribute(node, "beta", 1) != 1.0f)
        continue;
      q.weightAxis = intAttribute(node, "transB", 0) ? 0 : 1;
      if (node.input_size() > 2 && !node.input(2).empty()) {
        // A bias along N only: the int8 kernel adds one int32 per column.
        bias = floatWeight(node.input(2), 1);
        if (!bias)
          continue;
      }
    } else {
      continue;
    }
    if (bias)
      q.bias = bias->name();
    if (keep.contains(q.name) || keep.contains(node.output(0))) {
      kept.insert(keep.contains(q.name) ? q.name : node.output(0));
      plan.skipped.push_back("node '" + q.name + "': --keep-float");
      continue;
    }
    q.output = q.quantizedOutput = node.output(0);
    // Fold a Relu that is the only reader of a non-output result (int8:
    // its uint8 output clamps at zero; e4m3 is symmetric).
    auto r = readers.find(q.output);
    if (!options.fp8 && r != readers.end() && r->second.size() == 1 &&
        !graphOutputs.contains(q.output)) {
      const onnx::NodeProto &reader = graph.node(r->second.front());
      if (reader.op_type() == "Relu" && reader.domain().empty() &&
          reader.output_size() == 1) {
        q.foldedRelu = r->second.front();
        q.quantizedOutput = reader.output(0);
      }
    }
    tensors.insert(q.activation);
    tensors.insert(q.quantizedOutput);
    plan.nodes.push_back(std::move(q));
  }
  for (const std::string &name : options.keepFloat)
    if (!kept.contains(name))
      return error(path + ": --keep-float '" + name +
                   "': no Conv, MatMul or Gemm with a constant weight has "
                   "that node or output name");
  plan.tensors.assign(tensors.begin(), tensors.end());
  return plan;
}

namespace {

/// Writes the QDQ form of planned nodes into a graph's new node list: the
/// state rewriteToQdq and addQuantizedTwins share (fresh names, the
/// quantized weights, which float weights are still read).
class QdqWriter {
public:
  QdqWriter(onnx::GraphProto &graph, const CalibrationTable &table, bool fp8)
      : graph(graph), table(table), fp8(fp8) {
    for (int i = 0; i < graph.initializer_size(); ++i) {
      initializerIndex[graph.initializer(i).name()] = i;
      names.insert(graph.initializer(i).name());
    }
    for (const onnx::NodeProto &node : graph.node()) {
      for (const std::string &in : node.input())
        ++floatReaders[in];
      for (const std::string &out : node.output())
        names.insert(out);
    }
    for (const onnx::ValueInfoProto &v : graph.input())
      names.insert(v.name());
  }

  std::vector<onnx::NodeProto> nodes;

  /// `base`, or `base_N` should the model already use it.
  std::string fresh(const std::string &base) {
    std::string name = base;
    for (int n = 1; !names.insert(name).second; ++n)
      name = base + "_" + std::to_string(n);
    return name;
  }

  llvm::Expected<ActivationParams> paramsOf(const std::string &tensor) {
    auto it = table.find(tensor);
    if (it == table.end())
      return error("the calibration table has no range for tensor '" +
                   tensor + "'");
    return activationParams(it->second, fp8);
  }

  /// QuantizeLinear(input) then DequantizeLinear into `output`, with `p`'s
  /// scale and zero point (initializers named after `base`).
  void appendQdq(const std::string &input, const std::string &base,
                 const std::string &output, ActivationParams p) {
    std::string scale = fresh(base + "_scale");
    std::string zero = fresh(base + "_zero_point");
    std::string quantized = fresh(base + "_quantized");
    addInitializer(graph, scale, onnx::TensorProto::FLOAT, {},
                   std::vector<float>{p.scale});
    if (p.fp8)
      addInitializer(graph, zero, kFloat8E4M3FN, {}, std::vector<uint8_t>{0});
    else if (p.unsignedStorage)
      addInitializer(graph, zero, onnx::TensorProto::UINT8, {},
                     std::vector<uint8_t>{0});
    else
      addInitializer(graph, zero, onnx::TensorProto::INT8, {},
                     std::vector<int8_t>{0});
    nodes.push_back(
        makeNode("QuantizeLinear", quantized, {input, scale, zero}, quantized));
    nodes.push_back(
        makeNode("DequantizeLinear", output, {quantized, scale, zero}, output));
  }

  /// Node `q` (a copy of the original) reading the dequantized activation
  /// `xDq` (scale `x`), its weight and bias quantized, its product
  /// quantized and dequantized into `output`.
  llvm::Error appendNode(const QuantizedNode &q, onnx::NodeProto node,
                         const std::string &xDq, ActivationParams x,
                         const std::string &output) {
    // The weight: symmetric int8 (e4m3), one scale per output channel.
    const onnx::TensorProto &w =
        graph.initializer(initializerIndex.lookup(q.weight));
    std::optional<std::vector<float>> wValues = floatValues(w);
    if (!wValues)
      return error("weight '" + q.weight + "' of node '" + q.name +
                   "' is not a float tensor held in the model");
    std::vector<int64_t> wDims(w.dims().begin(), w.dims().end());
    int64_t channels = wDims[q.weightAxis];
    int64_t inner = 1;
    for (size_t d = q.weightAxis + 1; d < wDims.size(); ++d)
      inner *= wDims[d];
    std::vector<float> wScale(channels, 0.0f);
    for (size_t e = 0; e < wValues->size(); ++e) {
      int64_t c = (e / inner) % channels;
      wScale[c] = std::max(wScale[c], std::fabs((*wValues)[e]));
    }
    const float levels = fp8 ? kE4M3Max : 127.0f;
    for (float &s : wScale)
      s = s > 0 ? s / levels : 1.0f;
    if (fp8)
      return appendFp8Node(q, std::move(node), *wValues, wDims, wScale, xDq,
                           output);
    std::vector<int8_t> wQuantized(wValues->size());
    for (size_t e = 0; e < wValues->size(); ++e) {
      float s = wScale[(e / inner) % channels];
      float v = std::nearbyint((*wValues)[e] / s);
      wQuantized[e] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
    std::string wq = fresh(q.weight + "_quantized");
    std::string ws = fresh(q.weight + "_scale");
    std::string wz = fresh(q.weight + "_zero_point");
    std::string wDq = fresh(q.weight + "_dequantized");
    addInitializer(graph, wq, onnx::TensorProto::INT8, wDims, wQuantized);
    addInitializer(graph, ws, onnx::TensorProto::FLOAT, {channels}, wScale);
    addInitializer(graph, wz, onnx::TensorProto::INT8, {channels},
                   std::vector<int8_t>(channels, 0));
    nodes.push_back(
        makeNode("DequantizeLinear", wDq, {wq, ws, wz}, wDq, q.weightAxis));
    node.set_input(1, wDq);
    --floatReaders[q.weight];

    // The bias: int32 in units of s_x * s_w[o].
    if (!q.bias.empty()) {
      const onnx::TensorProto &b =
          graph.initializer(initializerIndex.lookup(q.bias));
      std::optional<std::vector<float>> bValues = floatValues(b);
      if (!bValues || static_cast<int64_t>(bValues->size()) != channels)
        return error("bias '" + q.bias + "' of node '" + q.name +
                     "' is not one float per output channel");
      std::vector<float> bScale(channels);
      std::vector<int32_t> bQuantized(channels);
      for (int64_t c = 0; c < channels; ++c) {
        bScale[c] = x.scale * wScale[c];
        double v = std::nearbyint(double((*bValues)[c]) / bScale[c]);
        bQuantized[c] = static_cast<int32_t>(
            std::clamp(v, -2147483647.0, 2147483647.0));
      }
      std::string bq = fresh(q.bias + "_quantized");
      std::string bs = fresh(q.bias + "_scale");
      std::string bz = fresh(q.bias + "_zero_point");
      std::string bDq = fresh(q.bias + "_dequantized");
      addInitializer(graph, bq, onnx::TensorProto::INT32, {channels},
                     bQuantized);
      addInitializer(graph, bs, onnx::TensorProto::FLOAT, {channels}, bScale);
      addInitializer(graph, bz, onnx::TensorProto::INT32, {channels},
                     std::vector<int32_t>(channels, 0));
      nodes.push_back(makeNode("DequantizeLinear", bDq, {bq, bs, bz}, bDq, 0));
      node.set_input(2, bDq);
      --floatReaders[q.bias];
    }

    return appendProduct(q, std::move(node), xDq, output);
  }

  /// The node reading `xDq`, its float product quantized (by the range of
  /// the tensor it stands for) and dequantized into `output`.
  llvm::Error appendProduct(const QuantizedNode &q, onnx::NodeProto node,
                            const std::string &xDq, const std::string &output) {
    llvm::Expected<ActivationParams> y = paramsOf(q.quantizedOutput);
    if (!y)
      return y.takeError();
    node.set_input(0, xDq);
    std::string product = fresh(q.output + "_float");
    node.set_output(0, product);
    if (output != q.quantizedOutput) // A twin (addQuantizedTwins).
      node.set_name(nodeName(node) + (fp8 ? "_fp8" : "_int8"));
    nodes.push_back(std::move(node));
    appendQdq(product, output, output, *y);
    return llvm::Error::success();
  }

  /// appendNode's fp8 form: the weight in e4m3 with its per-channel scales
  /// (a DQ without zero point), the bias left f32, the output quantized.
  llvm::Error appendFp8Node(const QuantizedNode &q, onnx::NodeProto node,
                            const std::vector<float> &wValues,
                            const std::vector<int64_t> &wDims,
                            const std::vector<float> &wScale,
                            const std::string &xDq, const std::string &output) {
    int64_t channels = wDims[q.weightAxis];
    int64_t inner = 1;
    for (size_t d = q.weightAxis + 1; d < wDims.size(); ++d)
      inner *= wDims[d];
    std::vector<uint8_t> wQuantized(wValues.size());
    for (size_t e = 0; e < wValues.size(); ++e)
      wQuantized[e] = toE4M3(wValues[e] / wScale[(e / inner) % channels]);
    std::string wq = fresh(q.weight + "_quantized");
    std::string ws = fresh(q.weight + "_scale");
    std::string wDq = fresh(q.weight + "_dequantized");
    addInitializer(graph, wq, kFloat8E4M3FN, wDims, wQuantized);
    addInitializer(graph, ws, onnx::TensorProto::FLOAT, {channels}, wScale);
    nodes.push_back(
        makeNode("DequantizeLinear", wDq, {wq, ws}, wDq, q.weightAxis));
    node.set_input(1, wDq);
    --floatReaders[q.weight];
    return appendProduct(q, std::move(node), xDq, output);
  }

  /// Replaces the graph's nodes by `nodes`; drops the value_info (renamed
  /// products' are stale; the importer infers shapes again) and, with
  /// `dropFloatWeights`, the float weights no node reads any more.
  void finish(bool dropFloatWeights) {
    graph.clear_node();
    for (onnx::NodeProto &node : nodes)
      *graph.add_node() = std::move(node);
    graph.clear_value_info();
    if (!dropFloatWeights)
      return;
    auto unread = [&](const std::string &name) {
      auto r = floatReaders.find(name);
      return r != floatReaders.end() && r->second == 0;
    };
    auto *inits = graph.mutable_initializer();
    llvm::StringSet<> dropped;
    inits->erase(std::remove_if(inits->begin(), inits->end(),
                                [&](const onnx::TensorProto &t) {
                                  if (!unread(t.name()))
                                    return false;
                                  dropped.insert(t.name());
                                  return true;
                                }),
                 inits->end());
    // IR version 3 lists initializers as graph inputs too: a dropped one
    // must go from there, or it would become an input to bind.
    auto *inputs = graph.mutable_input();
    inputs->erase(std::remove_if(inputs->begin(), inputs->end(),
                                 [&](const onnx::ValueInfoProto &v) {
                                   return dropped.contains(v.name());
                                 }),
                  inputs->end());
  }

private:
  onnx::GraphProto &graph;
  const CalibrationTable &table;
  bool fp8;
  llvm::StringMap<int> initializerIndex;
  llvm::StringMap<int> floatReaders;
  llvm::StringSet<> names;
};

} // namespace

llvm::Error rewriteToQdq(onnx::ModelProto &model, const QuantizationPlan &plan,
                         const CalibrationTable &table) {
  onnx::GraphProto &graph = *model.mutable_graph();
  QdqWriter writer(graph, table, plan.fp8);
  std::map<int, const QuantizedNode *> byIndex;
  std::set<int> foldedRelus;
  for (const QuantizedNode &q : plan.nodes) {
    byIndex[q.index] = &q;
    if (q.foldedRelu >= 0)
      foldedRelus.insert(q.foldedRelu);
  }
  // Tensors that already are the DQ of an 8-bit tensor (a quantized node's
  // output, under its original name), and the DQ written for an activation
  // read by several nodes.
  llvm::StringSet<> dequantized;
  llvm::StringMap<std::string> activationDq;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (foldedRelus.count(i))
      continue;
    auto it = byIndex.find(i);
    if (it == byIndex.end()) {
      writer.nodes.push_back(graph.node(i));
      continue;
    }
    const QuantizedNode &q = *it->second;
    llvm::Expected<ActivationParams> x = writer.paramsOf(q.activation);
    if (!x)
      return x.takeError();
    // The activation, quantized once however many nodes read it (the node
    // before wrote a quantized output as its DQ: nothing to add).
    std::string xDq = q.activation;
    if (!dequantized.contains(q.activation)) {
      auto found = activationDq.find(q.activation);
      if (found != activationDq.end()) {
        xDq = found->second;
      } else {
        xDq = writer.fresh(q.activation + "_dequantized");
        writer.appendQdq(q.activation, q.activation, xDq, *x);
        activationDq[q.activation] = xDq;
      }
    }
    if (llvm::Error err =
            writer.appendNode(q, graph.node(i), xDq, *x, q.quantizedOutput))
      return err;
    dequantized.insert(q.quantizedOutput);
  }
  writer.finish(/*dropFloatWeights=*/true);
  return llvm::Error::success();
}

llvm::Expected<std::vector<std::pair<std::string, std::string>>>
addQuantizedTwins(onnx::ModelProto &model, const QuantizationPlan &plan,
                  const CalibrationTable &table) {
  onnx::GraphProto &graph = *model.mutable_graph();
  QdqWriter writer(graph, table, plan.fp8);
  std::map<int, const QuantizedNode *> byIndex;
  for (const QuantizedNode &q : plan.nodes)
    byIndex[q.index] = &q;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 0; i < graph.node_size(); ++i) {
    writer.nodes.push_back(graph.node(i));
    auto it = byIndex.find(i);
    if (it == byIndex.end())
      continue;
    const QuantizedNode &q = *it->second;
    // The twin reads the float activation, quantized here: its error is
    // its own, none of the quantized nodes before it.
    llvm::Expected<ActivationParams> x = writer.paramsOf(q.activation);
    if (!x)
      return x.takeError();
    std::string xDq = writer.fresh(q.activation + "_twin_dequantized");
    writer.appendQdq(q.activation, q.activation + "_twin", xDq, *x);
    std::string twin =
        writer.fresh(q.quantizedOutput + (plan.fp8 ? "_fp8" : "_int8"));
    if (llvm::Error err = writer.appendNode(q, graph.node(i), xDq, *x, twin))
      return std::move(err);
    pairs.emplace_back(q.quantizedOutput, twin);
  }
  // The float nodes still read the float weights.
  writer.finish(/*dropFloatWeights=*/false);
  for (const auto &[reference, twin] : pairs)
    for (const std::string &name : {reference, twin}) {
      if (llvm::any_of(graph.output(), [&](const onnx::ValueInfoProto &v) {
            return v.name() == name;
          }))
        continue;
      onnx::ValueInfoProto *v = graph.add_output();
      v->set_name(name);
      v->mutable_type()->mutable_tensor_type()->set_elem_type(
          onnx::TensorProto::FLOAT);
    }
  return pairs;
}

double percentileThreshold(const std::vector<double> &bins, double amax,
                           double percentile) {
  double total = 0;
  for (double b : bins)
    total += b;
  if (total == 0 || bins.empty())
    return amax;
  double width = amax / bins.size();
  double want = total * percentile / 100.0, seen = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    seen += bins[i];
    if (seen >= want)
      return (i + 1) * width;
  }
  return amax;
}

double entropyThreshold(const std::vector<double> &bins, double amax) {
  constexpr size_t kLevels = 128;
  size_t n = bins.size();
  if (n <= kLevels)
    return amax;
  double width = amax / n;
  double bestDivergence = INFINITY;
  size_t best = n;
  for (size_t i = kLevels; i <= n; ++i) {
    // P: the first i bins, the clipped outliers added to the last.
    std::vector<double> p(bins.begin(), bins.begin() + i);
    for (size_t j = i; j < n; ++j)
      p[i - 1] += bins[j];
    // Q: the first i bins merged into 128 levels, each level's count
    // spread evenly over its non-empty bins (an empty bin stays empty).
    std::vector<double> q(i, 0.0);
    for (size_t level = 0; level < kLevels; ++level) {
      size_t start = level * i / kLevels, end = (level + 1) * i / kLevels;
      double sum = 0;
      size_t nonEmpty = 0;
      for (size_t j = start; j < end; ++j) {
        sum += bins[j];
        nonEmpty += bins[j] != 0;
      }
      for (size_t j = start; j < end; ++j)
        if (bins[j] != 0)
          q[j] = sum / nonEmpty;
    }
    double pTotal = 0, qTotal = 0;
    for (size_t j = 0; j < i; ++j)
      pTotal += p[j], qTotal += q[j];
    if (pTotal == 0 || qTotal == 0)
      continue;
    // KL(P || Q) over P's support; a bin P has and Q lacks (only the last,
    // which gained the outliers) counts with Q smoothed to a small mass.
    double divergence = 0;
    for (size_t j = 0; j < i; ++j) {
      if (p[j] == 0)
        continue;
      double pj = p[j] / pTotal;
      double qj = q[j] > 0 ? q[j] / qTotal : 1e-10;
      divergence += pj * std::log(pj / qj);
    }
    if (divergence < bestDivergence) {
      bestDivergence = divergence;
      best = i;
    }
  }
  return best * width;
}

} // namespace kiln

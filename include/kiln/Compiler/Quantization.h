//===- Quantization.h - Post-training int8 and fp8 quantization -*- C++ -*-===//
//
// kilnc --precision=int8 --calibrate calib.npy (docs/quantization.md): Kiln's
// own post-training quantization, as TensorRT's int8 PTQ does it.
// --precision=fp8 is the same four steps with float8 e4m3 in place of int8
// (QdqRewrite.cpp says what changes), for the sm_90 fp8 tensor cores.
//
//   1. plan:      the Conv, MatMul and Gemm nodes with a constant float
//                 weight, and the activations each reads and writes
//                 (planQuantization);
//   2. calibrate: the float model, those activations added as outputs,
//                 compiled and run on the runtime's emu (or cuda) device over
//                 the calibration batches; each activation's range and
//                 clipping threshold (minmax, percentile:P or entropy) are
//                 kept in a table, which --calibration-cache saves and reuses
//                 (Calibration.cpp);
//   3. rewrite:   the ONNX graph gets QuantizeLinear/DequantizeLinear pairs
//                 as onnxruntime's quantize_static writes them in QDQ form:
//                 symmetric per-channel int8 weights, per-tensor activations
//                 (uint8 where the calibrated range is non-negative, else
//                 int8), int32 biases, and a Relu after a quantized node
//                 folded into its uint8 output (QdqRewrite.cpp);
//   4. compile:   the QDQ model goes through the same import and passes as a
//                 model quantized by onnxruntime: kiln-fuse-quantized makes
//                 each chain an int8 tensor-core kernel, and the rest runs in
//                 fp32.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_QUANTIZATION_H
#define KILN_COMPILER_QUANTIZATION_H

#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlir {
class MLIRContext;
} // namespace mlir
namespace onnx {
class ModelProto;
} // namespace onnx

namespace kiln {

struct CompileOptions;
struct CompileHooks;

/// kilnc's quantization flags.
struct QuantizationOptions {
  /// --precision=int8.
  bool int8 = false;
  /// --precision=fp8: e4m3 weights (per channel) and activations (per
  /// tensor), f32 biases.
  bool fp8 = false;
  bool quantizes() const { return int8 || fp8; }
  /// The flag as the user wrote it, for messages.
  const char *flag() const {
    return fp8 ? "--precision=fp8" : "--precision=int8";
  }
  /// --calibrate: [NAME=]FILE.npy, one per float graph input (NAME may be
  /// left out for a model with one). Each file's first dim counts samples;
  /// they are run in batches of the compiled input's first dim.
  std::vector<std::string> calibrationData;
  /// --calibration: minmax, percentile:P (0 < P <= 100) or entropy.
  std::string method = "minmax";
  /// --calibration-cache: read when the file exists (no calibration run),
  /// written after a calibration run otherwise.
  std::string cache;
  /// --keep-float: node names (or output tensor names) left in float.
  std::vector<std::string> keepFloat;
  /// --save-quantized: write the QDQ model kilnc compiles to this file.
  std::string saveQuantized;
  /// --calibration-device: the runtime device calibration runs on.
  std::string device = "emu";
  /// --auto-keep-float=K: keep the K nodes of the largest sensitivity
  /// (each quantized alone, the relative L2 error of its output) in float.
  unsigned autoKeepFloat = 0;
  /// Measure the sensitivity for --stats even without autoKeepFloat.
  bool sensitivity = false;
};

/// One activation's calibrated range over all calibration batches, and the
/// threshold its scale comes from (max(|min|, |max|) for minmax; lower for
/// percentile and entropy, which clip outliers).
struct TensorRange {
  double min = 0, max = 0, threshold = 0;
};
using CalibrationTable = std::map<std::string, TensorRange>;

/// A node the rewrite quantizes.
struct QuantizedNode {
  int index = 0;          ///< In graph.node.
  std::string name;       ///< The node's name, or its first output's.
  std::string activation; ///< Input 0: the activation it reads.
  std::string weight;     ///< Input 1: a float initializer.
  std::string bias;       ///< Input 2 when an initializer, else empty.
  int weightAxis = 0;     ///< The weight's output-channel dimension.
  /// The node's output, and the tensor the quantized output stands for:
  /// the same, or the output of a Relu folded into it.
  std::string output, quantizedOutput;
  int foldedRelu = -1; ///< The folded Relu's index, or -1.
};

struct QuantizationPlan {
  /// float8 e4m3 instead of int8 (QuantizationOptions::fp8).
  bool fp8 = false;
  std::vector<QuantizedNode> nodes;
  /// Every activation calibration measures, sorted.
  std::vector<std::string> tensors;
  /// Nodes left in float, with why ("node 'fc': --keep-float").
  std::vector<std::string> skipped;
};

/// The quantizable nodes of `model`'s main graph. Errors (one line) name the
/// model: an opset below 13, a --keep-float name no node has.
llvm::Expected<QuantizationPlan>
planQuantization(const onnx::ModelProto &model,
                 const QuantizationOptions &options, llvm::StringRef path);

/// Rewrites `model` in place into its QDQ form by `plan` and `table` (which
/// holds every tensor of plan.tensors).
llvm::Error rewriteToQdq(onnx::ModelProto &model, const QuantizationPlan &plan,
                         const CalibrationTable &table);

/// For the sensitivity report: adds, next to each planned node, a quantized
/// twin reading the float activation (its own QDQ, the quantized weight and
/// bias, the output quantized), and makes the node's float output (or its
/// folded Relu's) and the twin's graph outputs. Returns (float output, twin
/// output) per node, in plan order.
llvm::Expected<std::vector<std::pair<std::string, std::string>>>
addQuantizedTwins(onnx::ModelProto &model, const QuantizationPlan &plan,
                  const CalibrationTable &table);

/// The clipping threshold of an |x| histogram of `bins` equal bins over
/// [0, amax]: the smallest upper bin edge below which `percentile` percent
/// of the values lie.
double percentileThreshold(const std::vector<double> &bins, double amax,
                           double percentile);
/// TensorRT's entropy calibration: the threshold (a bin edge, at least 128
/// bins) whose 128-level quantization of the histogram loses the least
/// information (Kullback-Leibler divergence of the clipped distribution).
double entropyThreshold(const std::vector<double> &bins, double amax);

/// The whole first step: plan, calibration table (cache or calibration
/// run), rewrite. Returns the QDQ model's bytes, which compileModel then
/// compiles in place of options.input; `summary` gets one line per
/// quantized node (its activations' ranges and thresholds) and per node
/// kept in float, for --stats. Errors are CompileErrors (one line).
llvm::Expected<std::string> quantizeModel(const CompileOptions &options,
                                          mlir::MLIRContext &context,
                                          const CompileHooks &hooks,
                                          std::vector<std::string> &summary);

} // namespace kiln

#endif // KILN_COMPILER_QUANTIZATION_H

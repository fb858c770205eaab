//===- Calibration.cpp - Calibrate a float model, quantize it (int8, fp8) ===//
//
// quantizeModel, kilnc --precision=int8 (or fp8)'s first step
// (kiln/Compiler/Quantization.h): the plan, the calibration table (from
// --calibration-cache, or from running the float model over the
// --calibrate batches on the runtime's emu or cuda device), the QDQ
// rewrite. The calibration model is the original with every activation
// the plan measures added as a graph output, compiled by compileModel in
// fp32 and run by a runtime Session: the very kernels Kiln would run, so
// the ranges are those of Kiln's own float arithmetic.
//
// Statistics: minmax keeps each tensor's minimum and maximum. percentile:P
// and entropy need a histogram of |x| over [0, amax]; amax is only known
// after every batch, so they run the batches twice (TensorRT's calibrators
// do the same), binning into 2048 bins on the second pass.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Compiler.h"
#include "kiln/Compiler/Quantization.h"

#include "OpsetUpgrade.h"

#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Runtime.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace kiln {

llvm::Error compileError(CompileError::Kind kind, const llvm::Twine &message);

namespace {

constexpr size_t kHistogramBins = 2048;

llvm::Error userError(const llvm::Twine &message) {
  return compileError(CompileError::Kind::User, message);
}

/// --calibration: "minmax", "entropy" or "percentile:P".
struct Method {
  enum Kind { MinMax, Percentile, Entropy } kind = MinMax;
  double percentile = 100;
};

llvm::Expected<Method> parseMethod(llvm::StringRef flag) {
  Method m;
  llvm::StringRef spec = flag;
  if (spec == "minmax")
    return m;
  if (spec == "entropy") {
    m.kind = Method::Entropy;
    return m;
  }
  llvm::StringRef value;
  if (spec.consume_front("percentile:") || spec.consume_front("percentile=")) {
    m.kind = Method::Percentile;
    std::string text = spec.str();
    char *end = nullptr;
    m.percentile = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0' && m.percentile > 0 &&
        m.percentile <= 100)
      return m;
  }
  return userError("--calibration '" + flag +
                   "': expected minmax, entropy or percentile:P with "
                   "0 < P <= 100 (e.g. percentile:99.99)");
}

/// One activation's statistics while the batches run.
struct Stats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  std::vector<double> bins;
  double amax() const { return std::max(std::fabs(min), std::fabs(max)); }
  void observe(const float *values, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      min = std::min<double>(min, values[i]);
      max = std::max<double>(max, values[i]);
    }
  }
  void bin(const float *values, size_t count) {
    double top = amax();
    if (bins.empty())
      bins.assign(kHistogramBins, 0.0);
    if (!(top > 0))
      return;
    for (size_t i = 0; i < count; ++i) {
      double x = std::fabs(values[i]) / top * kHistogramBins;
      size_t b = std::min(static_cast<size_t>(x), kHistogramBins - 1);
      bins[b] += 1;
    }
  }
};

/// The calibration data: per graph input, its samples.
struct CalibrationInput {
  std::string name;
  runtime::NpyArray data;
  uint64_t sampleBytes = 0;
  /// The artifact's input it binds.
  const runtime::TensorSignature *signature = nullptr;
};

llvm::Expected<std::vector<CalibrationInput>>
readCalibrationData(const QuantizationOptions &options,
                    const runtime::Artifact &artifact, size_t &batches,
                    const CompileHooks &hooks) {
  std::vector<CalibrationInput> inputs;
  for (const std::string &spec : options.calibrationData) {
    CalibrationInput in;
    std::string file = spec;
    size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      in.name = spec.substr(0, eq);
      file = spec.substr(eq + 1);
    } else if (artifact.inputs.size() == 1) {
      in.name = artifact.inputs.front().name;
    } else {
      return userError("--calibrate '" + spec + "': the model has " +
                       llvm::Twine(artifact.inputs.size()) +
                       " inputs; name each (--calibrate NAME=FILE.npy,...)");
    }
    runtime::Expected<runtime::NpyArray> array = runtime::readNpy(file);
    if (!array)
      return userError("--calibrate: " + array.error().message());
    in.data = array.take();
    inputs.push_back(std::move(in));
  }
  for (const CalibrationInput &in : inputs)
    if (llvm::none_of(artifact.inputs, [&](const runtime::TensorSignature &s) {
          return s.name == in.name;
        }))
      return userError("--calibrate: the model has no input '" + in.name +
                       "'");
  size_t samples = 0;
  int64_t batch = 0;
  for (const runtime::TensorSignature &sig : artifact.inputs) {
    auto it = llvm::find_if(inputs, [&](const CalibrationInput &in) {
      return in.name == sig.name;
    });
    if (it == inputs.end())
      return userError("--calibrate: no data for model input '" + sig.name +
                       "' (--calibrate " + sig.name + "=FILE.npy)");
    const runtime::NpyArray &a = it->data;
    runtime::Shape want(sig.shape.begin() + (sig.shape.empty() ? 0 : 1),
                        sig.shape.end());
    runtime::Shape got(a.shape.begin() + (a.shape.empty() ? 0 : 1),
                       a.shape.end());
    if (a.isString || a.dtype != sig.dtype || sig.shape.empty() ||
        got != want)
      return userError(
          "--calibrate: the data for input '" + sig.name + "' is " +
          (a.isString ? std::string("a string array")
                      : std::string(runtime::dtypeName(a.dtype)) + " " +
                            runtime::formatShape(a.shape)) +
          "; the model takes " + std::string(runtime::dtypeName(sig.dtype)) + " " +
          runtime::formatShape(sig.shape) +
          " batches (samples along the first dim)");
    size_t n = a.shape[0];
    if (samples && n != samples)
      return userError("--calibrate: the inputs hold different numbers of "
                       "samples (" +
                       llvm::Twine(samples) + " and " + llvm::Twine(n) + ")");
    samples = n;
    batch = sig.shape[0];
    it->sampleBytes = a.data.size() / std::max<size_t>(n, 1);
    it->signature = &sig;
  }
  batches = batch > 0 ? samples / batch : 0;
  if (batches == 0)
    return userError("--calibrate: " + llvm::Twine(samples) +
                     " samples are fewer than one batch of " +
                     llvm::Twine(batch));
  if (samples % batch && hooks.warning)
    hooks.warning("--calibrate: " + llvm::Twine(samples % batch) +
                  " samples past the last whole batch of " +
                  llvm::Twine(batch) + " are not used");
  return inputs;
}

/// A float model (a probe: the original with more outputs) compiled in fp32
/// and loaded on the calibration device, with the calibration data.
class CalibrationRun {
public:
  /// Compiles `model` with `outputs` added as float graph outputs.
  static llvm::Expected<std::unique_ptr<CalibrationRun>>
  create(onnx::ModelProto model, const std::vector<std::string> &outputs,
         llvm::StringRef label, const CompileOptions &options,
         mlir::MLIRContext &context, const CompileHooks &hooks) {
    onnx::GraphProto &graph = *model.mutable_graph();
    llvm::StringSet<> present;
    for (const onnx::ValueInfoProto &v : graph.output())
      present.insert(v.name());
    for (const onnx::ValueInfoProto &v : graph.input())
      present.insert(v.name());
    for (const std::string &t : outputs)
      if (present.insert(t).second) {
        onnx::ValueInfoProto *v = graph.add_output();
        v->set_name(t);
        v->mutable_type()->mutable_tensor_type()->set_elem_type(
            onnx::TensorProto::FLOAT);
      }
    std::string bytes;
    if (!model.SerializeToString(&bytes))
      return userError(options.input + ": cannot serialize the " + label);
    CompileOptions floatCompile = options;
    floatCompile.inputBytes = llvm::StringRef(bytes);
    floatCompile.quantization = QuantizationOptions();
    floatCompile.pipeline.precision = "fp32";
    floatCompile.stats = false;
    floatCompile.stopAfter = std::nullopt;
    floatCompile.stripWeights = false;
    CompileHooks floatHooks = hooks;
    if (hooks.phaseStarted)
      floatHooks.phaseStarted = [&](llvm::StringRef phase) {
        hooks.phaseStarted((label + ": " + phase).str());
      };
    llvm::Expected<CompileResult> compiled =
        compileModel(floatCompile, context, floatHooks);
    if (!compiled)
      return compiled.takeError();
    auto run = std::make_unique<CalibrationRun>();
    run->artifact = std::make_shared<const runtime::Artifact>(
        std::move(*compiled->artifact));
    llvm::Expected<std::vector<CalibrationInput>> inputs = readCalibrationData(
        options.quantization, *run->artifact, run->batches, hooks);
    if (!inputs)
      return inputs.takeError();
    run->inputs = std::move(*inputs);
    runtime::Expected<std::unique_ptr<runtime::Device>> device =
        runtime::createDevice(options.quantization.device);
    if (!device)
      return userError("--calibration-device: " + device.error().message());
    runtime::Expected<std::unique_ptr<runtime::Session>> session =
        runtime::Session::create(
            run->artifact, std::shared_ptr<runtime::Device>(device.take()));
    if (!session)
      return userError(label + ": " + session.error().message());
    run->session = session.take();
    return run;
  }

  size_t batches = 0;

  /// Runs batch `b`; `values` gets each of `tensors` as float32 (a graph
  /// input's from the data itself), valid until the next run.
  llvm::Error run(size_t b, const std::vector<std::string> &tensors,
                  std::map<std::string, llvm::ArrayRef<float>> &values) {
    values.clear();
    held.clear();
    for (const CalibrationInput &in : inputs) {
      const runtime::TensorSignature *sig = in.signature;
      uint64_t size = in.sampleBytes * sig->shape[0];
      const uint8_t *data = in.data.data.data() + size * b;
      if (runtime::Error err =
              session->bindInput(in.name, sig->dtype, sig->shape, data, size))
        return userError("calibration: " + err.message());
      if (sig->dtype == runtime::DType::F32)
        values[in.name] = llvm::ArrayRef<float>(
            reinterpret_cast<const float *>(data), size / sizeof(float));
    }
    if (runtime::Error err = session->run())
      return userError("calibration: " + err.message());
    held.reserve(tensors.size());
    for (const std::string &t : tensors) {
      if (values.count(t))
        continue;
      runtime::Expected<runtime::HostTensor> out = session->readOutput(t);
      if (!out)
        return userError("calibration: " + out.error().message());
      if (out->dtype != runtime::DType::F32)
        return userError("calibration: activation '" + t + "' is " +
                         std::string(runtime::dtypeName(out->dtype)) +
                         ", not a float32 tensor");
      held.push_back(out.take());
      values[t] = llvm::ArrayRef<float>(
          reinterpret_cast<const float *>(held.back().data.data()),
          held.back().data.size() / sizeof(float));
    }
    return llvm::Error::success();
  }

private:
  std::shared_ptr<const runtime::Artifact> artifact;
  std::unique_ptr<runtime::Session> session;
  std::vector<CalibrationInput> inputs;
  std::vector<runtime::HostTensor> held;
};

/// Runs the float model over the calibration batches; returns the table.
llvm::Expected<CalibrationTable>
calibrate(const onnx::ModelProto &model, const QuantizationPlan &plan,
          const Method &method, const CompileOptions &options,
          mlir::MLIRContext &context, const CompileHooks &hooks) {
  llvm::Expected<std::unique_ptr<CalibrationRun>> run = CalibrationRun::create(
      model, plan.tensors, "calibration model", options, context, hooks);
  if (!run)
    return run.takeError();
  size_t batches = (*run)->batches;
  std::map<std::string, Stats> stats;
  for (const std::string &t : plan.tensors)
    stats[t];
  int passes = method.kind == Method::MinMax ? 1 : 2;
  std::map<std::string, llvm::ArrayRef<float>> values;
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t b = 0; b < batches; ++b) {
      if (hooks.phaseStarted)
        hooks.phaseStarted(
            "calibration: batch " + std::to_string(b + 1) + " of " +
            std::to_string(batches) +
            (passes > 1 ? ", pass " + std::to_string(pass + 1) + " of 2"
                        : std::string()));
      if (llvm::Error err = (*run)->run(b, plan.tensors, values))
        return std::move(err);
      for (auto &[name, v] : values) {
        auto it = stats.find(name);
        if (it == stats.end())
          continue;
        if (pass == 0)
          it->second.observe(v.data(), v.size());
        else
          it->second.bin(v.data(), v.size());
      }
    }
  }

  CalibrationTable table;
  for (auto &[name, s] : stats) {
    TensorRange r{s.min, s.max, s.amax()};
    if (!std::isfinite(r.min) || !std::isfinite(r.max))
      return userError("calibration: activation '" + name +
                       "' is not finite on the calibration data");
    if (method.kind == Method::Percentile)
      r.threshold = percentileThreshold(s.bins, s.amax(), method.percentile);
    else if (method.kind == Method::Entropy)
      r.threshold = entropyThreshold(s.bins, s.amax());
    table[name] = r;
  }
  return table;
}

/// One node's sensitivity: quantized alone (its twin reads the float
/// activation), the relative L2 error of its output against float over
/// the calibration data.
struct Sensitivity {
  std::string node;
  double error = 0;
};

llvm::Expected<std::vector<Sensitivity>>
measureSensitivity(const onnx::ModelProto &model, const QuantizationPlan &plan,
                   const CalibrationTable &table, const CompileOptions &options,
                   mlir::MLIRContext &context, const CompileHooks &hooks) {
  onnx::ModelProto twins = model;
  llvm::Expected<std::vector<std::pair<std::string, std::string>>> pairs =
      addQuantizedTwins(twins, plan, table);
  if (!pairs)
    return userError(options.input + ": " + llvm::toString(pairs.takeError()));
  std::vector<std::string> tensors;
  for (const auto &[reference, twin] : *pairs) {
    tensors.push_back(reference);
    tensors.push_back(twin);
  }
  llvm::Expected<std::unique_ptr<CalibrationRun>> run = CalibrationRun::create(
      twins, tensors, "sensitivity model", options, context, hooks);
  if (!run)
    return run.takeError();
  std::vector<double> difference(pairs->size()), reference(pairs->size());
  std::map<std::string, llvm::ArrayRef<float>> values;
  for (size_t b = 0; b < (*run)->batches; ++b) {
    if (hooks.phaseStarted)
      hooks.phaseStarted("sensitivity: batch " + std::to_string(b + 1) +
                         " of " + std::to_string((*run)->batches));
    if (llvm::Error err = (*run)->run(b, tensors, values))
      return std::move(err);
    for (size_t i = 0; i < pairs->size(); ++i) {
      llvm::ArrayRef<float> f = values[(*pairs)[i].first];
      llvm::ArrayRef<float> q = values[(*pairs)[i].second];
      for (size_t e = 0; e < std::min(f.size(), q.size()); ++e) {
        double d = double(q[e]) - double(f[e]);
        difference[i] += d * d;
        reference[i] += double(f[e]) * double(f[e]);
      }
    }
  }
  std::vector<Sensitivity> result;
  for (size_t i = 0; i < pairs->size(); ++i)
    result.push_back({plan.nodes[i].name,
                      reference[i] > 0
                          ? std::sqrt(difference[i] / reference[i])
                          : std::sqrt(difference[i])});
  std::stable_sort(result.begin(), result.end(),
                   [](const Sensitivity &a, const Sensitivity &b) {
                     return a.error > b.error;
                   });
  return result;
}

llvm::Expected<CalibrationTable> readCache(const std::string &path,
                                           llvm::StringRef method,
                                           const QuantizationPlan &plan) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr,
                                           /*allow_exceptions=*/false);
  auto bad = [&](const llvm::Twine &why) {
    return userError("--calibration-cache " + path + ": " + why +
                     " (delete it to calibrate again)");
  };
  if (j.is_discarded() || !j.is_object() || !j.contains("tensors") ||
      !j["tensors"].is_object() || !j.contains("method") ||
      !j["method"].is_string())
    return bad("not a Kiln calibration cache");
  if (j["method"].get<std::string>() != method)
    return bad("made with --calibration=" + j["method"].get<std::string>() +
               ", not " + method);
  CalibrationTable table;
  for (const std::string &t : plan.tensors) {
    const nlohmann::json &tensors = j["tensors"];
    if (!tensors.contains(t))
      return bad("no range for tensor '" + t + "'");
    const nlohmann::json &e = tensors[t];
    for (const char *key : {"min", "max", "threshold"})
      if (!e.is_object() || !e.contains(key) || !e[key].is_number())
        return bad("tensor '" + t + "' has no number '" + key + "'");
    TensorRange r{e["min"].get<double>(), e["max"].get<double>(),
                  e["threshold"].get<double>()};
    if (!(r.threshold >= 0) || !std::isfinite(r.threshold) || r.min > r.max)
      return bad("tensor '" + t + "' has an invalid range");
    table[t] = r;
  }
  return table;
}

llvm::Error writeCache(const std::string &path, llvm::StringRef method,
                       const CalibrationTable &table) {
  nlohmann::json j;
  j["format"] = "kiln-calibration-1";
  j["method"] = method.str();
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto &[name, r] : table)
    tensors[name] = {{"min", r.min}, {"max", r.max}, {"threshold", r.threshold}};
  j["tensors"] = std::move(tensors);
  std::string text = j.dump(2) + "\n";
  if (runtime::Error err =
          runtime::writeFileAtomically(path, text.data(), text.size()))
    return userError("--calibration-cache: " + err.message());
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::string> quantizeModel(const CompileOptions &options,
                                          mlir::MLIRContext &context,
                                          const CompileHooks &hooks,
                                          std::vector<std::string> &summary) {
  const QuantizationOptions &q = options.quantization;
  if (options.training.differentiates())
    return userError(std::string(q.flag()) +
                     " is for inference; training compiles "
                     "take fp32, tf32, bf16 or fp16");
  if (llvm::StringRef(options.input).ends_with(".mlir") || options.inputBytes)
    return userError(std::string(q.flag()) + " takes an ONNX model");
  llvm::Expected<Method> method = parseMethod(q.method);
  if (!method)
    return method.takeError();
  bool cached = !q.cache.empty() && llvm::sys::fs::exists(q.cache);
  if (!cached && q.calibrationData.empty())
    return userError(std::string(q.flag()) +
                     " needs calibration data: --calibrate "
                     "FILE.npy (or an existing --calibration-cache FILE)");

  auto buffer = llvm::MemoryBuffer::getFile(options.input, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return userError(options.input +
                     ": cannot read file: " + buffer.getError().message());
  onnx::ModelProto model;
  if ((*buffer)->getBufferSize() >
          static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize())))
    return userError(options.input + ": not a valid ONNX model (protobuf "
                                     "parse failed)");
  // Per-channel DequantizeLinear is opset 13: an older model is raised
  // first (onnx's version converter), as onnxruntime's quantizer does.
  int64_t opset = 0;
  for (const onnx::OperatorSetIdProto &id : model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx")
      opset = id.version();
  if (opset > 0 && opset < 13) {
    std::string why;
    if (!upgradeOpset(model, 13, why))
      return userError(options.input + ": " + q.flag() +
                       " needs opset 13 "
                       "(per-channel DequantizeLinear), and onnx's version "
                       "converter cannot raise the model's opset " +
                       llvm::Twine(opset) + ": " + why);
    if (hooks.warning)
      hooks.warning(options.input + ": " + q.flag() + ": the model's opset " +
                    llvm::Twine(opset) +
                    " raised to 13 (per-channel DequantizeLinear)");
  }
  llvm::Expected<QuantizationPlan> plan =
      planQuantization(model, q, options.input);
  if (!plan)
    return userError(llvm::toString(plan.takeError()));

  CalibrationTable table;
  if (cached) {
    llvm::Expected<CalibrationTable> read = readCache(q.cache, q.method, *plan);
    if (!read)
      return read.takeError();
    table = std::move(*read);
  } else if (!plan->nodes.empty()) {
    llvm::Expected<CalibrationTable> measured =
        calibrate(model, *plan, *method, options, context, hooks);
    if (!measured)
      return measured.takeError();
    table = std::move(*measured);
    if (!q.cache.empty())
      if (llvm::Error err = writeCache(q.cache, q.method, table))
        return err;
  }
  // The sensitivity report (--stats) and --auto-keep-float: each node
  // quantized alone, then the K most sensitive planned again as float.
  std::vector<Sensitivity> sensitivity;
  llvm::StringSet<> autoKept;
  if ((q.sensitivity || q.autoKeepFloat) && !plan->nodes.empty()) {
    if (q.calibrationData.empty()) {
      if (q.autoKeepFloat)
        return userError("--auto-keep-float measures each node on the "
                         "calibration data: it needs --calibrate FILE.npy");
    } else {
      llvm::Expected<std::vector<Sensitivity>> measured = measureSensitivity(
          model, *plan, table, options, context, hooks);
      if (!measured)
        return measured.takeError();
      sensitivity = std::move(*measured);
    }
    if (q.autoKeepFloat) {
      QuantizationOptions keep = q;
      for (size_t i = 0; i < sensitivity.size() && i < q.autoKeepFloat; ++i) {
        keep.keepFloat.push_back(sensitivity[i].node);
        autoKept.insert(sensitivity[i].node);
      }
      llvm::Expected<QuantizationPlan> replanned =
          planQuantization(model, keep, options.input);
      if (!replanned)
        return userError(llvm::toString(replanned.takeError()));
      *plan = std::move(*replanned);
    }
  }
  if (plan->nodes.empty() && hooks.warning)
    hooks.warning(options.input + ": " + q.flag() +
                  ": no Conv, MatMul or "
                  "Gemm with a constant float weight; "
                  "nothing is quantized");

  for (const QuantizedNode &n : plan->nodes) {
    const TensorRange &x = table[n.activation], &y = table[n.quantizedOutput];
    std::ostringstream line;
    line.precision(6);
    line << "node '" << n.name << "': in '" << n.activation << "' ["
         << x.min << ", " << x.max << "] clip " << x.threshold << ", out '"
         << n.quantizedOutput << "' [" << y.min << ", " << y.max << "] clip "
         << y.threshold << (n.foldedRelu >= 0 ? " (Relu folded)" : "");
    summary.push_back(line.str());
  }
  for (const std::string &s : plan->skipped)
    summary.push_back(s + ", kept in float");
  if (!sensitivity.empty()) {
    summary.push_back("sensitivity (each node quantized alone: the relative "
                      "L2 error of its output on the calibration data, "
                      "largest first):");
    for (const Sensitivity &s : sensitivity) {
      std::ostringstream line;
      line.precision(3);
      line << "  node '" << s.node << "': " << std::scientific << s.error
           << (autoKept.contains(s.node) ? " (kept in float: "
                                           "--auto-keep-float)"
                                         : "");
      summary.push_back(line.str());
    }
  }

  if (llvm::Error err = rewriteToQdq(model, *plan, table))
    return userError(options.input + ": " + llvm::toString(std::move(err)));
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return userError(options.input + ": cannot serialize the quantized model");
  if (!q.saveQuantized.empty())
    if (runtime::Error err = runtime::writeFileAtomically(
            q.saveQuantized, bytes.data(), bytes.size()))
      return userError("--save-quantized: " + err.message());
  return bytes;
}

} // namespace kiln

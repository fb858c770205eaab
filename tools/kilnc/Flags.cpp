//===- Flags.cpp - kilnc's own flags, read into CompileOptions -------------===//
//
// Input, output, training and diagnostics flags. The pipeline's flags are
// PipelineFlags.cpp's. Each flag names its group (OptionCategories.h) and
// says its default; test/tools/kilnc/help.test checks both.
//
//===----------------------------------------------------------------------===//

#include "Flags.h"
#include "OptionCategories.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cctype>
#include <cstdlib>

namespace cl = llvm::cl;

namespace kiln::kilnc {
namespace {

//===----------------------------------------------------------------------===//
// Input
//===----------------------------------------------------------------------===//

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"),
                               cl::cat(inputCategory()));
cl::list<std::string> shapes("shape",
                             cl::desc("Fix an input's shape: name=1x3x224x224 "
                                      "(repeatable, or comma-separated); a "
                                      "dim given as a name (name=Nx3x224x224) "
                                      "is symbolic, its range from --dim "
                                      "(default: as the model declares them)"),
                             cl::value_desc("name=dims"), cl::CommaSeparated,
                             cl::cat(inputCategory()));
cl::list<std::string> dimRanges(
    "dim",
    cl::desc("The range of a symbolic dim (a dim_param of the model, or a "
             "name --shape gives): N=1..64, or N=1..64:8 to tune for 8 "
             "(repeatable, or comma-separated) (default: none)"),
    cl::value_desc("name=min..max[:opt]"), cl::CommaSeparated,
    cl::cat(inputCategory()));

// Post-training int8 quantization (--precision=int8; Quantization.h). In
// --help-hidden, which --precision's help points to (--help stays within
// two screens).
cl::list<std::string> calibrationData(
    "calibrate",
    cl::desc("With --precision=int8|fp8: calibration data, [name=]file.npy per "
             "input, samples along the first dim (default: none)"),
    cl::value_desc("[name=]file.npy"), cl::CommaSeparated, cl::Hidden,
    cl::cat(passCategory()));
cl::opt<std::string> calibrationMethod(
    "calibration",
    cl::desc("How activation ranges clip: minmax, percentile:P or entropy "
             "(default: minmax)"),
    cl::init("minmax"), cl::Hidden, cl::cat(passCategory()));
cl::opt<std::string> calibrationCache(
    "calibration-cache",
    cl::desc("Read the calibration table from this file when it exists, "
             "else write it after calibrating (default: none)"),
    cl::value_desc("file.json"), cl::Hidden, cl::cat(passCategory()));
cl::list<std::string> keepFloat(
    "keep-float",
    cl::desc(
        "With --precision=int8|fp8: Conv/MatMul/Gemm nodes (names or output "
        "names) left in fp32 (default: none)"),
    cl::value_desc("node,..."), cl::CommaSeparated, cl::Hidden,
    cl::cat(passCategory()));
cl::opt<std::string> saveQuantized(
    "save-quantized",
    cl::desc("With --precision=int8|fp8: also write the QDQ ONNX model that is "
             "compiled (default: none)"),
    cl::value_desc("file.onnx"), cl::Hidden, cl::cat(passCategory()));
cl::opt<uint64_t> maxConstantBytes(
    "max-constant-bytes",
    cl::desc("The most bytes of constants (weights and tensors folded at "
             "compile time) the artifact may hold (default: 8589934592, "
             "8 GiB)"),
    cl::value_desc("N"), cl::init(uint64_t(8) << 30), cl::Hidden,
    cl::cat(outputCategory()));
cl::opt<unsigned> autoKeepFloat(
    "auto-keep-float",
    cl::desc(
        "With --precision=int8|fp8: keep the K Conv/MatMul/Gemm nodes whose "
        "output suffers most from quantization (each quantized alone, on the "
        "calibration data) in fp32 (default: 0)"),
    cl::value_desc("K"), cl::init(0), cl::Hidden, cl::cat(passCategory()));
cl::opt<std::string> calibrationDevice(
    "calibration-device",
    cl::desc("The runtime device calibration runs on: emu or cuda "
             "(default: emu)"),
    cl::init("emu"), cl::Hidden, cl::cat(passCategory()));

// Sequence and optional graph inputs. Hidden to keep --help on two screens
// (help.test); the importer's errors name them where a model needs them.
cl::list<std::string> sequenceLengths(
    "sequence",
    cl::desc("The length of a sequence graph input: name=N; its tensors are "
             "inputs name[0] ... name[N-1] (--shape name=... or "
             "name[i]=... fixes their shapes) (repeatable, or "
             "comma-separated) (default: none)"),
    cl::value_desc("name=N"), cl::CommaSeparated, cl::Hidden,
    cl::cat(inputCategory()));
cl::list<std::string> absentInputs(
    "absent",
    cl::desc("Compile an optional graph input absent (it takes no tensor) "
             "(repeatable, or comma-separated) (default: every optional "
             "input present)"),
    cl::value_desc("name"), cl::CommaSeparated, cl::Hidden,
    cl::cat(inputCategory()));

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

cl::opt<std::string> outputFile("o",
                                cl::desc("Output file; '-' is stdout "
                                         "(default: -)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(outputCategory()));
cl::opt<Output> emit(
    "emit",
    cl::desc("What to produce (default: the artifact when -o names a .kiln "
             "file, else kiln)"),
    cl::init(Output::Kiln),
    cl::values(clEnumValN(Output::Kiln, "kiln", "the imported kiln dialect"),
               clEnumValN(Output::Graph, "graph",
                          "kiln after layout, precision and fusion"),
               clEnumValN(Output::Linalg, "linalg", "linalg on tensors"),
               clEnumValN(Output::Gpu, "gpu",
                          "buffers, launches and gpu.func kernels"),
               clEnumValN(Output::Llvm, "llvm",
                          "kernels in the LLVM/NVVM dialects"),
               clEnumValN(Output::Ptx, "ptx", "the PTX of every kernel"),
               clEnumValN(Output::Artifact, "artifact",
                          "the .kiln artifact the runtime loads")),
    cl::cat(outputCategory()));
cl::opt<bool> stripWeights(
    "strip-weights",
    cl::desc("Leave the bytes of weights read from ONNX initializers out of "
             "the artifact; kiln-run --weights DIR binds them at load "
             "(default: false)"),
    cl::init(false), cl::cat(outputCategory()));
cl::opt<std::string> kernelCache(
    "kernel-cache",
    cl::desc("Keep compiled kernels (NVRTC's PTX, ptxas's cubins) in DIR, or "
             "'off' (default: $KILN_KERNEL_CACHE, else ~/.cache/kiln/kernels)"),
    cl::value_desc("DIR|off"), cl::init(""), cl::cat(codegenCategory()));
cl::opt<unsigned> kernelCacheMegabytes(
    "kernel-cache-size",
    cl::desc("Bound of the kernel cache in MiB; the least recently used "
             "kernels go first (default: 1024)"),
    cl::init(1024), cl::Hidden, cl::cat(codegenCategory()));
cl::opt<bool> summary("summary",
                      cl::desc("Print a one-line summary of the imported "
                               "model instead of IR (default: false)"),
                      cl::cat(outputCategory()));
cl::opt<bool> printWeights(
    "print-weights",
    cl::desc("Print weight blobs in full instead of eliding them "
             "(default: false)"),
    cl::cat(outputCategory()));
cl::opt<bool>
    listOnnxOps("list-onnx-ops",
                cl::desc("Print the supported ONNX ops as a Markdown table"),
                cl::cat(outputCategory()));
cl::opt<bool> printPipeline(
    "print-pipeline",
    cl::desc("Print each phase's passes as the textual pipeline kiln-opt "
             "--pass-pipeline replays, for these options, and exit "
             "(default: false)"),
    cl::cat(outputCategory()));

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

cl::opt<ProgressMode> progressMode(
    "progress",
    cl::desc("Progress of long compiles on stderr (default: auto)"),
    cl::init(ProgressMode::Auto),
    cl::values(clEnumValN(ProgressMode::Auto, "auto",
                          "on a terminal, for compiles over 2 s"),
               clEnumValN(ProgressMode::Always, "always",
                          "every phase and pass, one line each"),
               clEnumValN(ProgressMode::Never, "never", "no progress")),
    cl::cat(diagnosticsCategory()));
/// Exercises the internal-error path (exit status 2) in tests.
cl::opt<CrashKind> crashForTesting(
    "crash-for-testing", cl::desc("Fail as a Kiln bug would (tests only)"),
    cl::init(CrashKind::None),
    cl::values(clEnumValN(CrashKind::Abort, "abort", "abort()"),
               clEnumValN(CrashKind::Fatal, "fatal", "an LLVM fatal error")),
    cl::Hidden, cl::cat(diagnosticsCategory()));

//===----------------------------------------------------------------------===//
// Training: the optimizer step and the training artifact (docs/runtime.md
// "Training"). The loss and gradient options live in their own block.
//===----------------------------------------------------------------------===//
cl::opt<bool> train("train",
                    cl::desc("Compile a training artifact: entry points "
                             "train_step (forward, loss, backward, optimizer "
                             "update) and eval, with persistent state "
                             "(default: false)"),
                    cl::init(false), cl::cat(trainingCategory()));
cl::opt<std::string> optimizerSpec(
    "optimizer",
    cl::desc("With --train: sgd|momentum|nesterov|adam|adamw, then "
             "optionally ':' and KEY=VALUE,... (lr, momentum, beta1, beta2, "
             "eps, weight_decay, schedule=constant|step|cosine, "
             "warmup_steps, step_size, gamma, total_steps, min_lr) "
             "(default: sgd)"),
    cl::value_desc("name[:k=v,...]"), cl::init("sgd"),
    cl::cat(trainingCategory()));
cl::opt<double> gradClip("grad-clip",
                         cl::desc("With --train: clip the global gradient "
                                  "norm to this, 0 for off (default: 0)"),
                         cl::init(0), cl::cat(trainingCategory()));
cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("With --train: data-parallel training under mpirun: the "
             "gradients are averaged across the ranks in buckets (collective "
             "steps) before the update (default: false)"),
    cl::init(false), cl::cat(trainingCategory()));
cl::opt<double> bucketMb(
    "bucket-mb",
    cl::desc("With --data-parallel: the largest gradient bucket in MiB, "
             "filled in backward order (default: 25)"),
    cl::init(25), cl::cat(trainingCategory()));
cl::opt<std::string> allreduceDtype(
    "allreduce-dtype",
    cl::desc("With --data-parallel: the gradients on the wire: fp32, "
             "bf16/fp16 (f32 sums, error feedback), or powersgd:R (rank-R "
             "PowerSGD factors of each weight matrix, error feedback) "
             "(default: fp32)"),
    cl::value_desc("fp32|bf16|fp16|powersgd:R"), cl::init("fp32"),
    cl::cat(trainingCategory()));
cl::opt<unsigned> shardOptimizer(
    "shard-optimizer",
    cl::desc("With --data-parallel: ZeRO stage 1 for a job of N ranks: the "
             "gradients are reduce-scattered, each rank updates its 1/N of "
             "the weights and owns 1/N of the optimizer state, and the "
             "weights are all-gathered (default: off)"),
    cl::value_desc("N"), cl::init(0), cl::cat(trainingCategory()));
//===-- Mixed precision: loss scaling (kiln-optimizer loss-scale) ----------===//
cl::opt<std::string> lossScaleSpec(
    "loss-scale",
    cl::desc("With --train: dynamic, static:S or none: scale the loss "
             "before the backward pass, skip steps with inf/NaN gradients "
             "(default: dynamic with --precision=fp16, else none)"),
    cl::value_desc("dynamic|static:S|none"), cl::init(""),
    cl::cat(trainingCategory()));
cl::opt<double> lossScaleInit(
    "loss-scale-init",
    cl::desc("With --loss-scale=dynamic: the initial scale (default: 65536)"),
    cl::init(65536), cl::cat(trainingCategory()));
cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("With --loss-scale=dynamic: double the scale after this many "
             "finite steps (default: 2000)"),
    cl::init(2000), cl::cat(trainingCategory()));

//===-- Training randomness: dropout's Philox key (kiln-optimizer seed) ----===//
cl::opt<uint64_t> trainSeed(
    "seed",
    cl::desc("With --train: the first value of the RNG key (state rng.key) "
             "that dropout draws its Philox masks with (default: 0)"),
    cl::init(0), cl::cat(trainingCategory()));
cl::opt<std::string> augmentSpec(
    "augment",
    cl::desc("With --train or --gradients: on-device augmentation of the "
             "first input, seeded per step: flip, crop:PAD, "
             "normalize:MEAN/STD, layout:nchw|nhwc (default: none)"),
    cl::value_desc("spec"), cl::init(""), cl::cat(trainingCategory()));
//===-- Differentiation: loss, frozen weights, --gradients (kiln-autodiff) --===//
cl::opt<bool> gradients(
    "gradients",
    cl::desc("Compile the loss and its gradients instead of the model: an "
             "inference artifact whose outputs are 'loss' and one "
             "'grad.<initializer>' per trainable initializer, and whose "
             "inputs are the model's plus the labels (to check gradients "
             "with kiln-run) (default: false)"),
    cl::init(false), cl::cat(trainingCategory()));
cl::opt<std::string>
    lossKind("loss",
             cl::desc("The loss on --loss-on: cross_entropy, nll, mse or l1 "
                      "(mean over the batch) (default: none)"),
             cl::init(""), cl::cat(trainingCategory()));
cl::opt<std::string>
    lossOn("loss-on",
           cl::desc("The output the loss reads (default: the only output)"),
           cl::value_desc("OUTPUT"), cl::init(""), cl::cat(trainingCategory()));
cl::opt<std::string> labelsSpec(
    "labels",
    cl::desc("The labels input: NAME:SHAPE:DTYPE, e.g. y:32:int64 (class "
             "indices) or y:32x10:float32 (default: none)"),
    cl::value_desc("NAME:SHAPE:DTYPE"), cl::init(""),
    cl::cat(trainingCategory()));
cl::opt<std::string> lossOutput(
    "loss-output",
    cl::desc("An output that already is the scalar loss, instead of --loss "
             "(default: none)"),
    cl::value_desc("NAME"), cl::init(""), cl::cat(trainingCategory()));
cl::opt<std::string>
    freezeRegex("freeze",
                cl::desc("Initializers whose name this regular expression "
                         "matches in full do not train (default: none)"),
                cl::value_desc("REGEX"), cl::init(""),
                cl::cat(trainingCategory()));

cl::opt<bool> rematerialize(
    "rematerialize",
    cl::desc("Recompute cheap activations (elementwise, data movement) in "
             "the backward pass instead of keeping them (default false: on "
             "the models measured it did not lower the peak arena)"),
    cl::init(false), cl::cat(trainingCategory()));


/// Parses "name=1x3x224x224" into the shape map.
llvm::Error parseShapes(CompileOptions &options) {
  for (const std::string &spec : shapes) {
    auto [name, dims] = llvm::StringRef(spec).split('=');
    if (name.empty() || dims.empty())
      return llvm::createStringError("--shape '" + spec +
                                     "' is not name=DIMxDIM...");
    llvm::SmallVector<int64_t> shape;
    llvm::SmallVector<std::string> symbols;
    bool anySymbol = false;
    llvm::SmallVector<llvm::StringRef> parts;
    if (dims != "scalar")
      dims.split(parts, 'x');
    for (llvm::StringRef part : parts) {
      int64_t d;
      // A name (a letter or '_' first) makes the dim symbolic.
      if (!part.empty() && (std::isalpha(part.front()) || part.front() == '_') &&
          llvm::all_of(part, [](char c) { return std::isalnum(c) || c == '_'; })) {
        shape.push_back(-1);
        symbols.push_back(part.str());
        anySymbol = true;
        continue;
      }
      if (part.getAsInteger(10, d) || d < 0)
        return llvm::createStringError("--shape '" + spec + "': '" +
                                       part.str() + "' is not a dimension");
      shape.push_back(d);
      symbols.emplace_back();
    }
    options.shapes[name] = shape;
    if (anySymbol)
      options.shapeDimNames[name] = symbols;
  }
  return llvm::Error::success();
}

/// Parses --sequence "name=N" and --absent "name".
llvm::Error parseComposites(CompileOptions &options) {
  for (const std::string &spec : sequenceLengths) {
    auto [name, length] = llvm::StringRef(spec).split('=');
    int64_t n;
    if (name.empty() || length.getAsInteger(10, n) || n < 0)
      return llvm::createStringError("--sequence '" + spec +
                                     "' is not name=N (N >= 0)");
    if (!options.sequenceLengths.try_emplace(name, n).second)
      return llvm::createStringError("--sequence '" + name.str() +
                                     "' is given twice");
  }
  for (const std::string &name : absentInputs) {
    if (name.empty())
      return llvm::createStringError("--absent needs an input name");
    options.absentInputs.insert(name);
  }
  return llvm::Error::success();
}

/// Parses "N=1..64[:opt]" into the dim ranges.
llvm::Error parseDimRanges(CompileOptions &options) {
  for (const std::string &spec : dimRanges) {
    auto bad = [&](const std::string &why) {
      return llvm::createStringError("--dim '" + spec + "': " + why +
                                     " (expected NAME=MIN..MAX[:OPT], e.g. "
                                     "N=1..64 or N=1..64:8)");
    };
    auto [name, range] = llvm::StringRef(spec).split('=');
    if (name.empty() || range.empty())
      return bad("not NAME=MIN..MAX");
    auto [bounds, opt] = range.split(':');
    auto [lo, hi] = bounds.split("..");
    onnx_frontend::DimRange r;
    if (lo.getAsInteger(10, r.min) || hi.getAsInteger(10, r.max))
      return bad("'" + bounds.str() + "' is not MIN..MAX");
    if (r.min < 1 || r.max < r.min)
      return bad("needs 1 <= MIN <= MAX");
    r.opt = r.max;
    if (!opt.empty() && (opt.getAsInteger(10, r.opt) || r.opt < r.min ||
                         r.opt > r.max))
      return bad("OPT '" + opt.str() + "' is not a size in " +
                 std::to_string(r.min) + ".." + std::to_string(r.max));
    if (options.dims.count(name))
      return bad("'" + name.str() + "' is given twice");
    options.dims[name] = r;
  }
  return llvm::Error::success();
}

/// kiln-tune-worker: $KILN_TUNE_WORKER, else installed (and built) next to
/// kilnc.
std::string tuneWorkerPath() {
  if (const char *worker = std::getenv("KILN_TUNE_WORKER"))
    return worker;
  static int anchor;
  llvm::SmallString<256> path(
      llvm::sys::fs::getMainExecutable("kilnc", &anchor));
  llvm::sys::path::remove_filename(path);
  llvm::sys::path::append(path, "kiln-tune-worker");
  return path.str().str();
}

} // namespace

llvm::Error readFlags(DriverFlags &driver, CompileOptions &compile,
                      bool stats) {
  driver.inputFile = inputFile;
  driver.outputFile = outputFile;
  driver.summary = summary;
  driver.printWeights = printWeights;
  driver.listOnnxOps = listOnnxOps;
  driver.printPipeline = printPipeline;
  driver.progress = progressMode;
  driver.crashForTesting = crashForTesting;
  driver.output = emit;
  driver.emitGiven = emit.getNumOccurrences() > 0;
  if (emit.getNumOccurrences() == 0 &&
      llvm::StringRef(outputFile).ends_with(".kiln"))
    driver.output = Output::Artifact;

  compile.input = inputFile;
  if (llvm::Error err = parseShapes(compile))
    return err;
  if (llvm::Error err = parseDimRanges(compile))
    return err;
  if (llvm::Error err = parseComposites(compile))
    return err;
  compile.stats = stats;
  compile.stripWeights = stripWeights;
  compile.kernelCache = kernelCache;
  compile.kernelCacheBytes = uint64_t(kernelCacheMegabytes) << 20;
  compile.maxConstantBytes = maxConstantBytes;
  if (driver.output != Output::Artifact)
    compile.stopAfter = static_cast<Phase>(driver.output);
  readPipelineFlags(compile.pipeline);
  QuantizationOptions &quantization = compile.quantization;
  quantization.int8 = compile.pipeline.precision == "int8";
  quantization.fp8 = compile.pipeline.precision == "fp8";
  quantization.calibrationData = calibrationData;
  quantization.method = calibrationMethod;
  quantization.cache = calibrationCache;
  quantization.keepFloat = keepFloat;
  quantization.saveQuantized = saveQuantized;
  quantization.device = calibrationDevice;
  quantization.autoKeepFloat = autoKeepFloat;
  quantization.sensitivity = stats;
  if (!quantization.quantizes() &&
      (calibrationData.getNumOccurrences() || keepFloat.getNumOccurrences() ||
       autoKeepFloat.getNumOccurrences() ||
       calibrationCache.getNumOccurrences() ||
       saveQuantized.getNumOccurrences()))
    return llvm::createStringError(
        "--calibrate, --calibration-cache, --keep-float, --auto-keep-float "
        "and --save-quantized apply with --precision=int8 or fp8");
  if (compile.pipeline.tune)
    compile.pipeline.tuneWorker = tuneWorkerPath();

  TrainingOptions &training = compile.training;
  training.train = train;
  training.gradients = gradients;
  training.gradient.loss = lossKind;
  training.gradient.lossOn = lossOn;
  training.gradient.labels = labelsSpec;
  training.gradient.lossOutput = lossOutput;
  training.gradient.freeze = freezeRegex;
  training.gradient.rematerialize = rematerialize;
  training.gradient.augment = augmentSpec;
  training.optimizer = optimizerSpec;
  training.gradClip = gradClip;
  training.lossScale = lossScaleSpec;
  training.lossScaleInit = lossScaleInit;
  training.lossScaleGrowthInterval = lossScaleGrowthInterval;
  training.seed = trainSeed;
  training.dataParallel = dataParallel;
  training.bucketMb = bucketMb;
  training.allreduceDtype = allreduceDtype;
  if (shardOptimizer.getNumOccurrences())
    training.shardOptimizer =
        shardOptimizer == 0 ? -1 : int64_t(shardOptimizer);
  // --train --emit=kiln prints the module after kiln-optimizer; without
  // --emit, --train packs the artifact whatever -o says.
  if (train && emit.getNumOccurrences() == 0)
    compile.stopAfter.reset();
  return llvm::Error::success();
}

void describeOptions() {
  auto &options = cl::getRegisteredOptions();
  cl::HideUnrelatedOptions(allCategories());
  auto describe = [&](llvm::StringRef name, llvm::StringRef description) {
    if (cl::Option *option = options.lookup(name)) {
      option->setDescription(description);
      option->addCategory(diagnosticsCategory());
      option->setHiddenFlag(cl::NotHidden);
    }
  };
  describe("stats", "Print kernels (fused and unfused), bytes moved, a static "
                    "roofline per kernel, arena and weights; needs -o "
                    "model.kiln (default: false)");
  describe("time-passes", "Print the time of each phase and pass on stderr "
                          "(default: false)");
  // MLIR's pass-manager options (registerPassManagerCLOptions): listed by
  // --help-hidden, kept out of --help's two screens.
  for (auto &entry : options) {
    cl::Option *option = entry.second;
    llvm::StringRef name = entry.first;
    if (name.starts_with("mlir-print-ir") ||
        name.starts_with("mlir-pass-pipeline") ||
        name == "mlir-pass-statistics" || name == "mlir-disable-threading") {
      option->addCategory(diagnosticsCategory());
      option->setHiddenFlag(cl::Hidden);
    }
    // Tuning on another machine and full weight dumps are for the few who
    // look for them in --help-hidden; --help stays within two screens.
    if (name == "tune-export" || name == "tune-import" ||
        name == "tune-max-candidates" || name == "tune-device" ||
        name == "print-weights")
      option->setHiddenFlag(cl::Hidden);
  }
}

} // namespace kiln::kilnc

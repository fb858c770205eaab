//===- kilnc.cpp - The Kiln compiler driver
//---------------------------------===//
//
// kilnc model.onnx [--shape name=1x3x224x224] [--emit=kiln] [-o out]
//
// Today the driver imports a model into the kiln dialect and prints it (or a
// one-line summary). Later phases (linalg, gpu, llvm, ptx, the .kiln
// artifact) extend --emit. Output files are written atomically: a failed
// compile never leaves a partial file behind.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Frontend/ONNX/Importer.h"
#include "kiln/Pipelines/Pipelines.h"
#include "TrainingCompile.h"
#include "kiln/Target/CUDA/ArtifactBuilder.h"
#include "kiln/Target/CUDA/KernelCache.h"
#include "kiln/Target/CUDA/TemplateEmission.h"
#include "kiln/runtime/Profile.h"
#include "kiln/runtime/Version.h"

#include "OptionCategories.h"
#include "Progress.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;
namespace onnxfe = kiln::onnx_frontend;

namespace {

using kiln::kilnc::codegenCategory;
using kiln::kilnc::diagnosticsCategory;
using kiln::kilnc::inputCategory;
using kiln::kilnc::outputCategory;
using kiln::kilnc::passCategory;
using kiln::kilnc::trainingCategory;

//===----------------------------------------------------------------------===//
// Input
//===----------------------------------------------------------------------===//

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"),
                               cl::cat(inputCategory()));
cl::list<std::string> shapes("shape",
                             cl::desc("Fix an input's shape: name=1x3x224x224 "
                                      "(repeatable, or comma-separated; "
                                      "needed for symbolic dims) (default: as "
                                      "the model declares them)"),
                             cl::value_desc("name=dims"), cl::CommaSeparated,
                             cl::cat(inputCategory()));

//===----------------------------------------------------------------------===//
// Passes
//===----------------------------------------------------------------------===//

cl::opt<std::string> layout("layout",
                            cl::desc("Activation layout: nchw, nhwc, or auto "
                                     "(NHWC where convolutions run on tensor "
                                     "cores: tf32/bf16/fp16) (default: auto)"),
                            cl::init("auto"), cl::cat(passCategory()));
cl::opt<std::string>
    precision("precision",
              cl::desc("Precision of matmuls and convolutions: fp32, tf32, "
                       "bf16 or fp16; accumulation stays fp32 "
                       "(default: fp32)"),
              cl::init("fp32"), cl::cat(passCategory()));
cl::opt<std::string>
    ioPrecision("io-precision",
                cl::desc("Element type of the model's float inputs and "
                         "outputs: fp32, bf16 or fp16 (default: as the "
                         "model declares them)"),
                cl::init(""), cl::cat(passCategory()));
cl::opt<unsigned> f32HeadLayers(
    "f32-head-layers",
    cl::desc("With --precision=tf32|bf16|fp16: keep the last N layers of "
             "matmuls/convolutions before the outputs in f32 (default: 0)"),
    cl::init(0), cl::cat(passCategory()));
cl::opt<std::string> residualPrecision(
    "residual-precision",
    cl::desc("With --precision=bf16|fp16: values a contraction reads that "
             "other ops read too (skip connections): f32 stores an exact "
             "copy for them, low only the low-precision one, as PyTorch "
             "autocast does (default: f32)"),
    cl::init("f32"), cl::cat(passCategory()));
cl::opt<bool> fuse("fuse",
                   cl::desc("Fuse ops into kernels; --fuse=false: one kernel "
                            "per op (default: true)"),
                   cl::init(true), cl::cat(passCategory()));

//===----------------------------------------------------------------------===//
// Codegen
//===----------------------------------------------------------------------===//

cl::opt<std::string> target("target",
                            cl::desc("GPU architecture: sm_80 or sm_90 "
                                     "(default: sm_90)"),
                            cl::init("sm_90"), cl::cat(codegenCategory()));
cl::opt<bool> contractionKernels(
    "contraction-kernels",
    cl::desc("Run matmul and convolution regions on tiled tensor-core / FFMA "
             "kernels from the CUDA C++ templates (NVRTC); false: generic "
             "kernels (default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
cl::opt<bool> wgmma(
    "wgmma",
    cl::desc("On sm_90, bf16/fp16/tf32 matmuls and convolutions and "
             "bf16/fp16 attention on warp-specialised wgmma kernels; false: mma.sync, to compare "
             "(default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
cl::opt<bool> tma(
    "tma",
    cl::desc("With --wgmma: the producer loads plain-GEMM operands with TMA "
             "(tensor maps built by the runtime at load) where the strides "
             "allow; false: cp.async, to compare (default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
cl::opt<bool> vectorize(
    "vectorize",
    cl::desc("Vectorise elementwise kernels: 128-bit accesses where the "
             "compiler proves them contiguous and aligned; false: a thread "
             "per element, for before/after measurements (default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
cl::opt<bool> rowKernels(
    "row-kernels",
    cl::desc("Row kernels for softmax/norm/reduction rows: a warp (rows up to "
             "1024) or a block per row, the row kept in registers; false: "
             "the previous kernels, for before/after measurements "
             "(default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
// Memory-bound kernel mappings (kiln-map-to-gpu; A/B switches).
cl::opt<bool> tiledTranspose(
    "tiled-transpose",
    cl::desc("Transposes and layout changes through padded shared-memory "
             "tiles, both sides coalesced (default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
cl::opt<bool> reductionKernels(
    "reduction-kernels",
    cl::desc("Column reductions across the kept innermost dim and two-pass "
             "whole-tensor reductions (default: true)"),
    cl::init(true), cl::cat(codegenCategory()));
cl::opt<bool> attentionKernels(
    "attention-kernels",
    cl::desc("With --contraction-kernels: run attention (matmul -> softmax "
             "-> matmul) as one fused flash-attention kernel; false: a "
             "generic score + softmax kernel and a GEMM (default: true)"),
    cl::init(true), cl::cat(codegenCategory()));

//===----------------------------------------------------------------------===//
// Autotuning (docs/architecture.md, "Autotuning")
//===----------------------------------------------------------------------===//

cl::opt<bool> tune(
    "tune",
    cl::desc("Time each contraction's candidate configs in kiln-tune-worker "
             "(a child process) and keep the fastest that matches the "
             "heuristic's pick (default: false)"),
    cl::init(false), cl::cat(codegenCategory()));
cl::opt<std::string> tuneDevice(
    "tune-device",
    cl::desc("Where --tune times candidates: cuda (CUDA-event medians) or "
             "emu (the performance model's estimate) (default: cuda)"),
    cl::init("cuda"), cl::cat(codegenCategory()));
cl::opt<std::string> tuneCache(
    "tune-cache",
    cl::desc("Tune cache (JSON): its configs are used, and --tune adds the "
             "problems it lacks (default: none)"),
    cl::value_desc("FILE"), cl::init(""), cl::cat(codegenCategory()));
cl::opt<std::string> tuneExport(
    "tune-export",
    cl::desc("With --tune: write the tuning jobs to DIR for "
             "kiln-tune-worker on another machine and compile with the "
             "heuristic (default: none)"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(codegenCategory()));
cl::opt<std::string> tuneImport(
    "tune-import",
    cl::desc("Add the winners of a --tune-export DIR whose jobs have run to "
             "--tune-cache (default: none)"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(codegenCategory()));
cl::opt<unsigned> tuneMaxCandidates(
    "tune-max-candidates",
    cl::desc("Candidates --tune times per problem (default: 8)"), cl::init(8),
    cl::cat(codegenCategory()));
cl::opt<std::string> kernelCacheDir(
    "kernel-cache",
    cl::desc("Keep compiled kernels (NVRTC's PTX, ptxas's cubins) in DIR, or "
             "'off' (default: $KILN_KERNEL_CACHE, else ~/.cache/kiln/kernels)"),
    cl::value_desc("DIR|off"), cl::init(""), cl::cat(codegenCategory()));
cl::opt<unsigned> kernelCacheMegabytes(
    "kernel-cache-size",
    cl::desc("Bound of the kernel cache in MiB; the least recently used "
             "kernels go first (default: 1024)"),
    cl::init(1024), cl::Hidden, cl::cat(codegenCategory()));

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

cl::opt<std::string> outputFile("o",
                                cl::desc("Output file; '-' is stdout "
                                         "(default: -)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(outputCategory()));
/// What kilnc produces: a compilation phase's IR, or the artifact.
enum class Output { Kiln, Graph, Linalg, Gpu, Llvm, Ptx, Artifact };

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

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

/// --stats and --time-passes are read before LLVM's parser, which owns
/// unrelated options of the same names (LLVM statistics and pass timing);
/// --help lists them through describeInterceptedOptions.
bool stats = false;
bool timePasses = false;
cl::opt<kiln::kilnc::ProgressMode> progressMode(
    "progress",
    cl::desc("Progress of long compiles on stderr (default: auto)"),
    cl::init(kiln::kilnc::ProgressMode::Auto),
    cl::values(clEnumValN(kiln::kilnc::ProgressMode::Auto, "auto",
                          "on a terminal, for compiles over 2 s"),
               clEnumValN(kiln::kilnc::ProgressMode::Always, "always",
                          "every phase and pass, one line each"),
               clEnumValN(kiln::kilnc::ProgressMode::Never, "never",
                          "no progress")),
    cl::cat(diagnosticsCategory()));
/// Exercises the internal-error path (exit status 2) in tests.
enum class CrashKind { None, Abort, Fatal };
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

/// kiln-optimizer's loss-scale options for --loss-scale, or an error.
llvm::Expected<std::string> lossScaleOptions(llvm::StringRef precision) {
  std::string spec = lossScaleSpec;
  if (spec.empty())
    spec = precision == "fp16" ? "dynamic" : "none";
  if (spec == "none")
    return std::string();
  auto exact = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", v);
    return std::string(text);
  };
  if (spec == "dynamic")
    return " loss-scale=dynamic loss-scale-init=" +
           exact(lossScaleInit.getValue()) +
           " loss-scale-growth-interval=" +
           std::to_string(lossScaleGrowthInterval.getValue());
  llvm::StringRef value(spec);
  double scale = 0;
  if (value.consume_front("static:") && !value.getAsDouble(scale) &&
      scale > 0 && std::isfinite(scale))
    return " loss-scale=static loss-scale-init=" + exact(scale);
  return llvm::createStringError("--loss-scale '" + spec +
                                 "': expected dynamic, static:S with S > 0, "
                                 "or none");
}

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

/// Whether the compile differentiates the model (--gradients, --train).
bool differentiates() { return gradients || train; }

/// The loss options, checked: an error message, or "" when they are usable.
std::string checkLossOptions() {
  if (!augmentSpec.empty() && !differentiates())
    return "--augment applies when training (--train, --gradients)";
  bool any = !lossKind.empty() || !lossOn.empty() || !labelsSpec.empty() ||
             !lossOutput.empty() || !freezeRegex.empty();
  if (!differentiates())
    return any ? "--loss, --loss-on, --labels, --loss-output and --freeze "
                 "apply when differentiating (--gradients, --train)"
               : "";
  // A .mlir module may carry its own @train_grad (kiln-optimizer's tests).
  if (train && llvm::StringRef(inputFile).ends_with(".mlir") && !any)
    return "";
  if (lossKind.empty() == lossOutput.empty())
    return std::string(train ? "--train" : "--gradients") +
           " needs --loss=cross_entropy|nll|mse|l1 with "
           "--labels=NAME:SHAPE:DTYPE, or --loss-output=NAME";
  return "";
}
//===----------------------------------------------------------------------===//

std::string commandLine;

/// kilnc's exit statuses (docs/runtime.md "Exit status" has the table).
enum ExitStatus : int {
  kExitSuccess = 0,
  /// The input or the options are at fault: a bad or unsupported model, a
  /// bad flag, a file that cannot be read or written.
  kExitUserError = 1,
  /// Kiln is at fault: a crash, an LLVM fatal error, ptxas rejecting the
  /// PTX Kiln generated, an artifact Kiln built that does not verify.
  kExitInternalError = 2,
};

constexpr const char *kReportBug =
    "this is a Kiln bug: please report it with the model and the command line";

/// The compile's progress line, erased before an error is printed (on a
/// terminal the message would otherwise continue the line).
kiln::kilnc::Progress *progressLine = nullptr;

int error(const llvm::Twine &message) {
  if (progressLine)
    progressLine->finish();
  llvm::errs() << "kilnc: error: " << message << "\n";
  return kExitUserError;
}

void warning(const llvm::Twine &message) {
  if (progressLine)
    progressLine->finish();
  llvm::errs() << "kilnc: warning: " << message << "\n";
}

int internalError(const llvm::Twine &message) {
  if (progressLine)
    progressLine->finish();
  llvm::errs() << "kilnc: internal error: " << message << " (" << kReportBug
               << ")\n";
  return kExitInternalError;
}

/// Crashes and fatal errors exit with status 2 after LLVM's stack trace.
/// Runs in a signal handler: only async-signal-safe calls.
void exitOnCrashSignal(void *) {
  static const char message[] = "kilnc: internal error: crashed (this is a "
                                "Kiln bug: please report it with the model "
                                "and the command line)\n";
  ssize_t ignored = ::write(2, message, sizeof(message) - 1);
  (void)ignored;
  ::_exit(kExitInternalError);
}

void exitOnFatalError(void *, const char *reason, bool) {
  llvm::errs() << "kilnc: internal error: " << reason << " (" << kReportBug
               << ")\n";
  llvm::errs().flush();
  // Removes temporary output files, as the signal handlers do.
  llvm::sys::RunInterruptHandlers();
  ::_exit(kExitInternalError);
}

void printVersion(llvm::raw_ostream &os) {
  const kiln::runtime::BuildInfo &info = kiln::runtime::buildInfo();
  os << kiln::runtime::versionLine("kilnc") << "\n"
     << "  LLVM/MLIR " << LLVM_VERSION_STRING << "\n"
     << "  CUDA " << KILN_CUDA_TOOLKIT_VERSION << " (toolkit at build time; "
     << "cuda.h " << info.cudaVersion << ")\n"
     << "  artifact format " << kiln::runtime::kArtifactFormatMajor << "."
     << kiln::runtime::kArtifactFormatMinor << "\n";
}

/// Gives LLVM's options that kilnc reads itself (see `stats`) Kiln's
/// meaning in --help, and hides every other option that is not Kiln's.
void describeOptions() {
  auto &options = cl::getRegisteredOptions();
  cl::HideUnrelatedOptions(kiln::kilnc::allCategories());
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
}

/// Parses "name=1x3x224x224" into the options' shape map.
llvm::Error parseShapes(onnxfe::ImportOptions &options) {
  for (const std::string &spec : shapes) {
    auto [name, dims] = llvm::StringRef(spec).split('=');
    if (name.empty() || dims.empty())
      return llvm::createStringError("--shape '" + spec +
                                     "' is not name=DIMxDIM...");
    llvm::SmallVector<int64_t> shape;
    llvm::SmallVector<llvm::StringRef> parts;
    if (dims != "scalar")
      dims.split(parts, 'x');
    for (llvm::StringRef part : parts) {
      int64_t d;
      if (part.getAsInteger(10, d) || d < 0)
        return llvm::createStringError("--shape '" + spec + "': '" +
                                       part.str() + "' is not a dimension");
      shape.push_back(d);
    }
    options.inputShapes[name] = shape;
  }
  return llvm::Error::success();
}

std::string describeType(RankedTensorType type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  for (int64_t d : type.getShape())
    os << d << "x";
  os << type.getElementType();
  return s;
}

/// One line: inputs, outputs, op counts by kind, weights.
void printSummary(ModuleOp module, llvm::raw_ostream &os) {
  func::FuncOp func = *module.getOps<func::FuncOp>().begin();
  auto names = [&](auto getAttr, TypeRange types) {
    std::string s;
    for (auto [i, type] : llvm::enumerate(types)) {
      auto name = getAttr(i);
      s += (i ? ", " : "") + (name ? name.getValue().str() : "?") + ":" +
           describeType(cast<RankedTensorType>(type));
    }
    return s;
  };
  std::map<std::string, int> counts;
  int total = 0;
  func.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "kiln" &&
        !isa<kiln::ConstantOp>(op)) {
      ++counts[op->getName().stripDialect().str()];
      ++total;
    }
  });
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  llvm::stable_sort(sorted,
                    [](auto &a, auto &b) { return a.second > b.second; });
  int64_t weights = 0, params = 0, bytes = 0;
  for (auto global : module.getOps<ml_program::GlobalOp>()) {
    auto type = cast<RankedTensorType>(global.getType());
    ++weights;
    params += type.getNumElements();
    bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }
  auto source = module->getAttrOfType<StringAttr>("kiln.source");
  os << (source ? source.getValue() : "model") << ": opset "
     << module->getAttrOfType<IntegerAttr>("kiln.opset").getInt() << ", inputs "
     << names(
            [&](unsigned i) {
              return func.getArgAttrOfType<StringAttr>(i, "kiln.name");
            },
            func.getArgumentTypes())
     << "; outputs "
     << names(
            [&](unsigned i) {
              return func.getResultAttrOfType<StringAttr>(i, "kiln.name");
            },
            func.getResultTypes())
     << "; " << total << " kiln ops (";
  for (auto [i, entry] : llvm::enumerate(sorted))
    os << (i ? ", " : "") << entry.first << " " << entry.second;
  os << "); " << weights << " weight tensors, "
     << llvm::format("%.2fM parameters (%.1f MB)", params / 1e6, bytes / 1e6)
     << "\n";
}

/// The PTX text of every kernel module, each under a comment naming it.
void printPtx(ModuleOp module, llvm::raw_ostream &os) {
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects()) {
      os << "// kernel module @" << binary.getName() << "\n";
      os << cast<gpu::ObjectAttr>(object).getObject().getValue() << "\n";
    }
  });
}

void printOnnxOps(llvm::raw_ostream &os) {
  std::vector<onnxfe::SupportedOp> ops = onnxfe::listSupportedOps();
  std::map<std::string, std::vector<const onnxfe::SupportedOp *>> byType;
  for (const onnxfe::SupportedOp &op : ops)
    byType[op.opType].push_back(&op);
  os << "# Supported ONNX operators\n\n"
     << "Generated by `kilnc --list-onnx-ops` from the importer's handler "
        "registry; "
        "do not edit by hand.\n\n"
     << byType.size() << " op types, default domain (`ai.onnx`), opsets 7 to "
     << onnxfe::maxSupportedOpset()
     << "; ops of the `ai.onnx.preview.training` domain are listed under "
        "their qualified names, versioned by that domain's opset. A handler "
        "covers its since-version up to the next listed one.\n\n"
     << "| op type | handler since-versions | family | limits |\n"
     << "|---|---|---|---|\n";
  for (const auto &[type, handlers] : byType) {
    std::string versions, limits;
    for (const onnxfe::SupportedOp *op : handlers) {
      versions +=
          (versions.empty() ? "" : ", ") + std::to_string(op->sinceVersion);
      if (!op->limits.empty() && limits.find(op->limits) == std::string::npos)
        limits += (limits.empty() ? "" : "; ") + op->limits;
    }
    // A '|' inside a cell would end it.
    std::string cell = limits.empty() ? "—" : limits;
    for (size_t pos = 0; (pos = cell.find('|', pos)) != std::string::npos;
         pos += 2)
      cell.insert(pos, "\\");
    os << "| " << type << " | " << versions << " | " << handlers.front()->family
       << " | " << cell << " |\n";
  }
}
/// kilnc --stats: a roofline per kernel from the bytes and FLOPs the
/// compiler counts (Profile.h estimateStatic, runtime/targets/gpus.ini).
void printStaticEstimate(const kiln::KernelStats &fused,
                         const kiln::KernelStats &unfused,
                         const std::string &target, llvm::raw_ostream &os) {
  namespace rt = kiln::runtime;
  rt::Expected<std::vector<rt::GpuTarget>> table = rt::loadTargetTable();
  rt::Expected<rt::GpuTarget> figures =
      table ? rt::findTarget(*table, target)
            : rt::Expected<rt::GpuTarget>(table.takeError());
  if (!figures) {
    os << "static estimate: none (" << figures.error().message() << ")\n";
    return;
  }
  os << "static estimate for " << figures->name
     << " (per kernel: bytes moved at the DRAM bandwidth, FLOPs as written at "
        "the fp32 peak, plus launch overhead; no caches, coalescing or "
        "occupancy, so a lower bound; kiln-run --device emu --profile "
        "estimates from the emulator's counts; last column: the float types "
        "read->written, and computed with in generated kernels, the template "
        "kernels' MMA under contraction regions):\n";
  auto total = [&](const kiln::KernelStats &stats) {
    double seconds = 0;
    for (const kiln::KernelLaunchStats &launch : stats.launches)
      seconds += rt::estimateStatic(*figures,
                                    launch.bytesRead + launch.bytesWritten,
                                    launch.flops)
                     .seconds;
    return seconds;
  };
  for (const kiln::KernelLaunchStats &launch : fused.launches) {
    rt::StaticEstimate estimate = rt::estimateStatic(
        *figures, launch.bytesRead + launch.bytesWritten, launch.flops);
    os << llvm::format("  %-32s bytes %12llu  flops %14llu  %10.2f us  %-7s %s\n",
                       launch.kernel.c_str(),
                       (unsigned long long)(launch.bytesRead +
                                            launch.bytesWritten),
                       (unsigned long long)launch.flops, estimate.seconds * 1e6,
                       std::string(estimate.bound).c_str(),
                       launch.precision.c_str());
  }
  os << llvm::format("static estimate total: %.2f us (unfused: %.2f us), "
                     "flops %llu\n",
                     total(fused) * 1e6, total(unfused) * 1e6,
                     (unsigned long long)fused.flops);
}

/// kilnc --stats when differentiating: activations the backward pass
/// keeps from the forward pass and those it recomputes
/// (kiln-autodiff's rematerialisation).
void printRematReport(ModuleOp module, uint64_t arenaBytes,
                      llvm::raw_ostream &os) {
  auto report = module->getAttrOfType<DictionaryAttr>("kiln.remat_report");
  if (!report)
    return;
  auto get = [&](StringRef key) -> unsigned long long {
    auto attr = report.getAs<IntegerAttr>(key);
    return attr ? attr.getInt() : 0;
  };
  // The arena without rematerialisation is the same compile with
  // --rematerialize=false (a recomputed value can also lengthen its
  // operands' lives, so the difference is not the recomputed bytes).
  os << llvm::format("activations kept: %llu (%llu bytes)\n"
                     "activations recomputed: %llu (%llu bytes)\n"
                     "peak arena: %llu bytes\n",
                     get("kept"), get("kept_bytes"), get("recomputed"),
                     get("recomputed_bytes"), (unsigned long long)arenaBytes);
}

/// The kernel cache --kernel-cache names ($KILN_KERNEL_CACHE when it is not
/// given, which the tests set to 'off' or a directory of their own; else
/// the user's cache directory).
kiln::KernelCache openKernelCache() {
  std::string dir = kernelCacheDir;
  if (dir.empty())
    if (const char *env = std::getenv("KILN_KERNEL_CACHE"))
      dir = env;
  if (dir.empty())
    dir = kiln::KernelCache::defaultDirectory();
  if (dir == "off")
    dir.clear();
  return kiln::KernelCache(dir, uint64_t(kernelCacheMegabytes) << 20);
}

/// kilnc --stats: each launch's kernel decision (`kiln.kernel`, from
/// kiln-select-contraction-kernels and kiln-select-generic-kernels).
void printKernelConfigs(const kiln::KernelStats &stats,
                        llvm::raw_ostream &os) {
  os << "kernel configs:\n";
  for (const kiln::KernelLaunchStats &launch : stats.launches)
    os << llvm::format("  %-32s %s\n", launch.kernel.c_str(),
                       launch.config.empty() ? "-" : launch.config.c_str());
}

/// kilnc --stats: each matmul region's template kernel, or why it kept a
/// generic one (kiln-match-contractions' report).
void printContractionReport(ModuleOp module, llvm::raw_ostream &os) {
  auto lines = module->getAttrOfType<ArrayAttr>("kiln.contraction_report");
  if (!lines)
    return;
  os << "contraction regions: " << lines.size() << "\n";
  for (Attribute line : lines)
    os << "  " << cast<StringAttr>(line).getValue() << "\n";
}

/// kilnc --train --stats: each entry point's kernels, each state tensor,
/// then the activations the backward keeps and recomputes and the arena
/// (both entry points laid end to end; compare --rematerialize=false, the
/// default, which keeps everything).
void printTrainingStats(ModuleOp module, const kiln::runtime::Artifact &artifact,
                        llvm::raw_ostream &os) {
  for (const kiln::runtime::EntryPoint &entry : artifact.entryPoints)
    os << entry.name << ": " << entry.launchCount << " kernels\n";
  for (const kiln::runtime::StateTensor &state : artifact.state) {
    uint64_t elements = 1;
    for (int64_t d : state.shape)
      elements *= d;
    os << "state " << state.name << ": " << elements * 4 << " bytes";
    if (!state.segments.empty())
      os << " (" << state.segments.size() << " initializers)";
    os << "\n";
  }
  if (module->hasAttr("kiln.remat_report"))
    printRematReport(module, artifact.memoryPlan.arenaSize, os);
  else
    os << "peak arena: " << artifact.memoryPlan.arenaSize << " bytes\n";
}

} // namespace

/// kilnc --train: kiln-optimizer on a module with @train_grad, then each
/// entry point through the ordinary pipeline, joined into one artifact.
int compileForTraining(ModuleOp module,
                       const kiln::PipelineOptions &pipelineOptions) {
  // --emit=kiln prints the module after kiln-optimizer (train_step and
  // eval in kiln IR); the later phases run per entry point.
  bool printKiln = emit.getNumOccurrences() && emit == Output::Kiln;
  if (!printKiln &&
      (outputFile == "-" || !llvm::StringRef(outputFile).ends_with(".kiln")))
    return error("--train writes an artifact: name a file with -o "
                 "model.train.kiln");
  if (stripWeights || (emit.getNumOccurrences() && !printKiln))
    return error("--train does not combine with --strip-weights or --emit "
                 "other than kiln yet");
  llvm::Expected<std::string> optimizer =
      kiln::parseOptimizerSpec(optimizerSpec, gradClip);
  if (!optimizer)
    return error(llvm::toString(optimizer.takeError()));
  if (gradClip < 0)
    return error("--grad-clip must not be negative");
  llvm::Expected<std::string> lossScale =
      lossScaleOptions(pipelineOptions.precision);
  if (!lossScale)
    return error(llvm::toString(lossScale.takeError()));
  *optimizer += *lossScale;
  MLIRContext &context = *module.getContext();
  std::string diagnostic;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
    if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostic = diag.str();
    return success();
  });
  PassManager pm(&context);
  // The loss and gradients (@train_grad), unless a .mlir input has them.
  if (!module.lookupSymbol<func::FuncOp>("train_grad")) {
    kiln::TrainingGradientOptions gradientOptions;
    gradientOptions.loss = lossKind;
    gradientOptions.lossOn = lossOn;
    gradientOptions.labels = labelsSpec;
    gradientOptions.lossOutput = lossOutput;
    gradientOptions.freeze = freezeRegex;
    gradientOptions.lossSeedArgument = !lossScale->empty();
    gradientOptions.augment = augmentSpec;
    gradientOptions.rematerialize = rematerialize;
    kiln::addTrainingGradientPasses(pm, gradientOptions);
  }
  if (failed(kiln::addTrainingStepPasses(
          pm, *optimizer + " seed=" + std::to_string(trainSeed))))
    return error("--optimizer '" + optimizerSpec +
                 "': bad options: " + *optimizer);
  if (failed(pm.run(module)))
    return error(inputFile + ": " +
                 (diagnostic.empty() ? "the optimizer pass failed"
                                     : diagnostic));
  if (printKiln) {
    llvm::Error written =
        llvm::writeToOutput(outputFile, [&](llvm::raw_ostream &os) {
          OpPrintingFlags flags;
          if (!printWeights)
            flags.elideLargeResourceString(64);
          module->print(os, flags);
          return llvm::Error::success();
        });
    if (written)
      return error("cannot write '" + outputFile +
                   "': " + llvm::toString(std::move(written)));
    return 0;
  }
  kiln::ArtifactOptions artifactOptions;
  artifactOptions.target = target;
  artifactOptions.ptxasPath = kiln::defaultPtxasPath();
  artifactOptions.compilerOptions = commandLine;
  kiln::KernelCache kernelCache = openKernelCache();
  artifactOptions.kernelCache = &kernelCache;
  llvm::Expected<kiln::runtime::Artifact> artifact =
      kiln::compileTrainingArtifact(module, pipelineOptions, artifactOptions);
  kernelCache.trim();
  if (!artifact)
    return error(inputFile + ": " + llvm::toString(artifact.takeError()) +
                 (diagnostic.empty() ? "" : ": " + diagnostic));
  if (kiln::runtime::Error err =
          kiln::runtime::writeArtifact(*artifact, outputFile))
    return error(err.message());
  if (stats)
    printTrainingStats(module, *artifact, llvm::outs());
  return 0;
}

/// kilnc --tune, --tune-device, --tune-cache, --tune-max-candidates into
/// the pipeline's options; the error message, or empty.
std::string setTuneOptions(kiln::PipelineOptions &options) {
  if (tuneDevice != "cuda" && tuneDevice != "emu")
    return "--tune-device '" + tuneDevice + "' is not cuda or emu";
  if (tune && tuneMaxCandidates == 0)
    return "--tune-max-candidates must be at least 1";
  if (!tuneExport.empty() && !tune)
    return "--tune-export needs --tune";
  if (!tuneImport.empty() && tuneCache.empty())
    return "--tune-import needs --tune-cache (the file the winners go to)";
  if ((tune || !tuneImport.empty()) && !tuneCache.empty())
    // Before the compile: tuning takes minutes, and then nothing is lost.
    if (kiln::runtime::Error err = kiln::runtime::checkWritable(tuneCache))
      return "--tune-cache: " + err.message();
  options.tune = tune;
  options.tuneDevice = tuneDevice;
  options.tuneCache = tuneCache;
  options.tuneMaxCandidates = tuneMaxCandidates;
  options.tuneExport = tuneExport;
  options.tuneImport = tuneImport;
  if (const char *worker = std::getenv("KILN_TUNE_WORKER")) {
    options.tuneWorker = worker;
  } else {
    // Installed (and built) next to kilnc.
    static int anchor;
    llvm::SmallString<256> path(
        llvm::sys::fs::getMainExecutable("kilnc", &anchor));
    llvm::sys::path::remove_filename(path);
    llvm::sys::path::append(path, "kiln-tune-worker");
    options.tuneWorker = path.str().str();
  }
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::setBugReportMsg(
      "PLEASE report this Kiln bug with the model and the command line.\n");
  // After InitLLVM's handler, which prints the stack trace.
  llvm::sys::AddSignalHandler(exitOnCrashSignal, nullptr);
  llvm::install_fatal_error_handler(exitOnFatalError);
  kiln::registerPipelinePasses();
  std::vector<char *> args;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (i > 0 && (arg == "--stats" || arg == "-stats"))
      stats = true;
    else if (i > 0 && (arg == "--time-passes" || arg == "-time-passes"))
      timePasses = true;
    else
      args.push_back(argv[i]);
  }
  describeOptions();
  cl::SetVersionPrinter(printVersion);
  cl::ParseCommandLineOptions(
      static_cast<int>(args.size()), args.data(),
      "kilnc: compiles an ONNX model into a .kiln artifact for kiln-run\n\n"
      "  kilnc model.onnx -o model.kiln [--precision=bf16] [--stats]\n\n"
      "Exit status: 0 success, 1 bad input or options, 2 internal error.\n");
  for (int i = 1; i < argc; ++i)
    commandLine += (i > 1 ? " " : "") + std::string(argv[i]);
  if (crashForTesting == CrashKind::Abort)
    std::abort();
  if (crashForTesting == CrashKind::Fatal)
    llvm::report_fatal_error("--crash-for-testing=fatal");

  if (listOnnxOps) {
    printOnnxOps(llvm::outs());
    return 0;
  }
  if (inputFile.empty())
    return error("no input model (usage: kilnc model.onnx [-o out])");

  if (std::string message = checkLossOptions(); !message.empty())
    return error(message);
  onnxfe::ImportOptions options;
  // Every float initializer may train, however small (biases).
  options.floatInitializersAsGlobals = differentiates();
  options.trainingDropout = differentiates();
  std::vector<std::pair<std::string, DenseElementsAttr>> inlinedInitializers;
  options.inlinedInitializers = &inlinedInitializers;
  if (llvm::Error err = parseShapes(options))
    return error(llvm::toString(std::move(err)));

  Output output = emit;
  if (emit.getNumOccurrences() == 0 &&
      llvm::StringRef(outputFile).ends_with(".kiln"))
    output = Output::Artifact;
  if ((output == Output::Artifact || stats) && outputFile == "-")
    return error("the artifact is binary: name a file with -o model.kiln");
  if (stripWeights && output != Output::Artifact)
    return error("--strip-weights applies to the artifact: name a file with "
                 "-o model.kiln");
  kiln::Phase lastPhase = output == Output::Artifact
                              ? kiln::Phase::Ptx
                              : static_cast<kiln::Phase>(output);

  kiln::PipelineOptions pipelineOptions;
  pipelineOptions.chip = target;
  pipelineOptions.layout = layout;
  pipelineOptions.precision = precision;
  pipelineOptions.ioPrecision = ioPrecision;
  pipelineOptions.fuse = fuse;
  pipelineOptions.contractionKernels = contractionKernels;
  pipelineOptions.attentionKernels = attentionKernels;
  pipelineOptions.vectorize = vectorize;
  pipelineOptions.wgmma = wgmma;
  pipelineOptions.tma = tma;
  pipelineOptions.rowKernels = rowKernels;
  pipelineOptions.tiledTranspose = tiledTranspose;
  pipelineOptions.reductionKernels = reductionKernels;
  pipelineOptions.f32HeadLayers = f32HeadLayers;
  pipelineOptions.residualPrecision = residualPrecision;
  if (!llvm::is_contained({"f32", "low"}, residualPrecision.getValue()))
    return error("--residual-precision '" + residualPrecision +
                 "' is not one of f32, low");
  if (!llvm::is_contained({"nchw", "nhwc", "auto"}, layout.getValue()))
    return error("--layout '" + layout + "' is not one of nchw, nhwc, auto");
  if (!llvm::is_contained({"fp32", "tf32", "bf16", "fp16"},
                          precision.getValue()))
    return error("--precision '" + precision +
                 "' is not one of fp32, tf32, bf16, fp16");
  if (!ioPrecision.empty() &&
      !llvm::is_contained({"fp32", "bf16", "fp16"}, ioPrecision.getValue()))
    return error("--io-precision '" + ioPrecision +
                 "' is not one of fp32, bf16, fp16");
  if (!kiln::ptxFeaturesFor(target))
    return error("--target '" + target + "' is not supported (sm_80 or sm_90)");
  if (std::string message = setTuneOptions(pipelineOptions); !message.empty())
    return error(message);

  DialectRegistry registry;
  kiln::registerPipelineDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  // Declared before the progress line, so the line is erased before the
  // timing report prints (at destruction).
  DefaultTimingManager timing;
  timing.setEnabled(timePasses);
  timing.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  TimingScope rootTiming = timing.getRootScope();
  kiln::kilnc::Progress progress(progressMode);
  progressLine = &progress;
  llvm::scope_exit forgetProgress([] { progressLine = nullptr; });

  progress.setPhase("import");
  TimingScope importTiming = rootTiming.nest("import");
  // A .mlir input is kiln IR as kilnc --emit=kiln prints it (for tests of
  // the later phases, and of --train on a module that already has
  // @train_grad).
  llvm::Expected<OwningOpRef<ModuleOp>> module =
      llvm::StringRef(inputFile).ends_with(".mlir")
          ? [&]() -> llvm::Expected<OwningOpRef<ModuleOp>> {
              llvm::SourceMgr sources;
              std::string parseError;
              {
                ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
                  if (parseError.empty())
                    parseError = d.str();
                  return success();
                });
                OwningOpRef<ModuleOp> parsed =
                    parseSourceFile<ModuleOp>(inputFile, &context);
                if (parsed)
                  return parsed;
              }
              return llvm::createStringError(
                  inputFile + ": " +
                  (parseError.empty() ? "cannot parse" : parseError));
            }()
          : onnxfe::importModelFile(inputFile, context, options);
  importTiming.stop();
  if (!module)
    return error(llvm::toString(module.takeError()));
  if (train)
    return compileForTraining(**module, pipelineOptions);

  // Compile up to the requested phase; diagnostics become one error line.
  // --stats also compiles a copy without fusion, to the gpu phase, to report
  // what fusion saves.
  std::string diagnostic;
  std::optional<kiln::KernelStats> fused, unfused;
  OwningOpRef<ModuleOp> artifactModule;
  {
    ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
      if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
        diagnostic = diag.str();
      // Warnings (a tune cache ignored, a candidate rejected) are printed.
      if (diag.getSeverity() == DiagnosticSeverity::Warning)
        warning(diag.str());
      return success();
    });
    // One pass manager per phase, so that progress and --time-passes name
    // the phase.
    auto runPhases = [&](ModuleOp m, kiln::Phase first, kiln::Phase last,
                         const kiln::PipelineOptions &opts) -> LogicalResult {
      for (int p = static_cast<int>(first); p <= static_cast<int>(last); ++p) {
        auto phase = static_cast<kiln::Phase>(p);
        std::string name = (opts.fuse == pipelineOptions.fuse ? "" : "unfused ") +
                           kiln::phaseName(phase).str();
        PassManager pm(&context);
        if (failed(kiln::addPhase(pm, phase, opts)))
          return failure();
        progress.setPhase(name);
        TimingScope phaseTiming = rootTiming.nest(name);
        pm.enableTiming(phaseTiming);
        pm.addInstrumentation(
            std::make_unique<kiln::kilnc::ProgressInstrumentation>(progress));
        if (failed(pm.run(m)))
          return failure();
      }
      return success();
    };
    auto failedWith = [&]() {
      return error(
          inputFile + ": compilation failed: " +
          (diagnostic.empty() ? std::string("unknown error") : diagnostic));
    };
    if (differentiates()) {
      kiln::TrainingGradientOptions gradientOptions;
      gradientOptions.loss = lossKind;
      gradientOptions.lossOn = lossOn;
      gradientOptions.labels = labelsSpec;
      gradientOptions.lossOutput = lossOutput;
      gradientOptions.freeze = freezeRegex;
      gradientOptions.gradientsAsMain = gradients;
      gradientOptions.rematerialize = rematerialize;
      gradientOptions.augment = augmentSpec;
      PassManager pm(&context);
      kiln::addTrainingGradientPasses(pm, gradientOptions);
      if (failed(pm.run(**module)))
        return failedWith();
    }
    if (stats) {
      OwningOpRef<ModuleOp> copy((**module).clone());
      kiln::PipelineOptions unfusedOptions = pipelineOptions;
      unfusedOptions.fuse = false;
      if (failed(runPhases(*copy, kiln::Phase::Kiln, kiln::Phase::Gpu,
                           unfusedOptions)))
        return failedWith();
      unfused = kiln::estimateKernelStats(*copy);
    }
    // The fused statistics are read at the gpu phase and the artifact's at
    // ptx; when the requested output stops earlier, a copy goes all the way.
    if (stats && lastPhase < kiln::Phase::Ptx)
      artifactModule = (**module).clone();
    for (ModuleOp m : {**module, artifactModule ? *artifactModule : nullptr}) {
      if (!m)
        continue;
      kiln::Phase last = m == **module ? lastPhase : kiln::Phase::Ptx;
      bool pastGpu = last > kiln::Phase::Gpu;
      if (failed(runPhases(m, kiln::Phase::Kiln,
                           pastGpu ? kiln::Phase::Gpu : last,
                           pipelineOptions)))
        return failedWith();
      if (stats && pastGpu)
        fused = kiln::estimateKernelStats(m);
      if (pastGpu &&
          failed(runPhases(m, kiln::Phase::Llvm, last, pipelineOptions)))
        return failedWith();
    }
  }

  kiln::KernelCache kernelCache = openKernelCache();
  if (output == Output::Ptx) {
    // --emit=ptx prints every kernel as PTX: the template kernels' sources
    // are compiled as the artifact's are.
    if (llvm::Error err = kiln::emitTemplateKernels(**module, kernelCache))
      return internalError(inputFile + ": " + llvm::toString(std::move(err)));
  }
  if (output == Output::Artifact || stats) {
    kiln::ArtifactOptions artifactOptions;
    artifactOptions.target = target;
    artifactOptions.kernelCache = &kernelCache;
    artifactOptions.ptxasPath = kiln::defaultPtxasPath();
    artifactOptions.compilerOptions = commandLine;
    artifactOptions.inlinedInitializers = inlinedInitializers;
    artifactOptions.onKernelAssembled = [&](size_t done, size_t total) {
      progress.setKernels(done, total);
    };
    kiln::ArtifactStats artifactStats;
    progress.setPhase(artifactOptions.ptxasPath.empty() ? "artifact"
                                                        : "artifact (ptxas)");
    TimingScope artifactTiming = rootTiming.nest("artifact");
    artifactOptions.timing = &artifactTiming;
    auto artifact = kiln::buildArtifact(
        artifactModule ? *artifactModule : **module, artifactOptions,
        &artifactStats);
    kernelCache.trim();
    artifactTiming.stop();
    progress.finish();
    // The module compiled: packing it can only fail on what Kiln generated
    // (ptxas rejecting a kernel, a plan that does not verify).
    if (!artifact)
      return internalError(inputFile + ": " +
                           llvm::toString(artifact.takeError()));
    if (stats) {
      auto moved = [](const kiln::KernelStats &k) {
        return (unsigned long long)(k.bytesRead + k.bytesWritten);
      };
      llvm::outs() << llvm::format(
          "kernels: %zu\nkernels unfused: %zu\nbytes moved: %llu\nbytes "
          "moved unfused: %llu\narena bytes: %llu\nnaive arena bytes: "
          "%llu\nweight bytes: %llu\n",
          artifactStats.kernels, unfused->kernels, moved(*fused),
          moved(*unfused), (unsigned long long)artifactStats.arenaBytes,
          (unsigned long long)artifactStats.naiveArenaBytes,
          (unsigned long long)artifactStats.weightBytes);
      printStaticEstimate(*fused, *unfused, target, llvm::outs());
      printKernelConfigs(*fused, llvm::outs());
      printContractionReport(artifactModule ? *artifactModule : **module,
                             llvm::outs());
      printRematReport(artifactModule ? *artifactModule : **module,
                       artifactStats.arenaBytes, llvm::outs());
      llvm::outs() << llvm::format(
          "template kernels: %zu, %zu distinct, %zu from the kernel cache; "
          "ptxas: %zu modules, %zu from the kernel cache (%s)\n",
          artifactStats.templateBinaries, artifactStats.templateSources,
          artifactStats.templateCached, artifactStats.assembled,
          artifactStats.assembledCached,
          kernelCache.enabled() ? kernelCache.path().c_str() : "cache off");
    }
    if (stripWeights)
      if (kiln::runtime::Error err = kiln::runtime::stripWeights(*artifact))
        return error(inputFile + ": " + err.message());
    if (output == Output::Artifact) {
      // writeArtifact writes a temporary file and renames it into place.
      if (kiln::runtime::Error err =
              kiln::runtime::writeArtifact(*artifact, outputFile))
        return error(err.message());
      return 0;
    }
  }

  progress.finish();
  // Render first, then write atomically (temporary file + rename).
  llvm::Error written =
      llvm::writeToOutput(outputFile, [&](llvm::raw_ostream &os) {
        if (summary) {
          printSummary(**module, os);
          return llvm::Error::success();
        }
        if (output == Output::Ptx) {
          printPtx(**module, os);
          return llvm::Error::success();
        }
        OpPrintingFlags flags;
        if (!printWeights)
          flags.elideLargeResourceString(64);
        (*module)->print(os, flags);
        return llvm::Error::success();
      });
  if (written)
    return error("cannot write '" + outputFile +
                 "': " + llvm::toString(std::move(written)));
  return 0;
}

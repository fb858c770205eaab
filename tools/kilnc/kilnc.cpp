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
#include "kiln/runtime/Profile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
namespace cl = llvm::cl;
namespace onnxfe = kiln::onnx_frontend;

namespace {

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"));
cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("file"), cl::init("-"));
/// What kilnc produces: a compilation phase's IR, or the artifact.
enum class Output { Kiln, Graph, Linalg, Gpu, Llvm, Ptx, Artifact };

cl::opt<Output> emit(
    "emit",
    cl::desc("What to produce (default: the artifact when -o names a .kiln "
             "file, else the kiln IR)"),
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
                          "the .kiln artifact the runtime loads")));
/// --stats is read before LLVM's parser, which owns an unrelated -stats flag
/// (pass statistics).
bool stats = false;
cl::opt<std::string> target("target",
                            cl::desc("GPU architecture: sm_80 or sm_90"),
                            cl::init("sm_90"));
cl::list<std::string> shapes("shape",
                             cl::desc("Fix an input's shape: name=1x3x224x224 "
                                      "(repeatable, or comma-separated)"),
                             cl::value_desc("name=dims"), cl::CommaSeparated);
cl::opt<std::string> layout("layout",
                            cl::desc("Activation layout: nchw, nhwc, or auto "
                                     "(NHWC where convolutions use tensor "
                                     "cores: none do yet, so NCHW)"),
                            cl::init("auto"));
cl::opt<std::string>
    precision("precision",
              cl::desc("Precision of matmuls and convolutions: fp32, tf32, "
                       "bf16 or fp16 (accumulation stays fp32)"),
              cl::init("fp32"));
cl::opt<std::string>
    ioPrecision("io-precision",
                cl::desc("Element type of the model's float inputs and "
                         "outputs (default: as the model declares them)"),
                cl::init(""));
cl::opt<bool> contractionKernels(
    "contraction-kernels",
    cl::desc("Run matmul regions on tiled tensor-core / FFMA kernels from "
             "the CUDA C++ templates (NVRTC); false: generic kernels"),
    cl::init(true));
cl::opt<bool> fuse("fuse",
                   cl::desc("Fuse ops into kernels (--fuse=false: one kernel "
                            "per op)"),
                   cl::init(true));
cl::opt<unsigned> f32HeadLayers(
    "f32-head-layers",
    cl::desc("With --precision=tf32|bf16|fp16: keep the last N layers of "
             "matmuls/convolutions before the outputs in f32 (default 0)"),
    cl::init(0));
cl::opt<bool> stripWeights(
    "strip-weights",
    cl::desc("Leave the bytes of weights read from ONNX initializers out of "
             "the artifact; kiln-run --weights DIR binds them at load"),
    cl::init(false));
cl::opt<bool> summary("summary",
                      cl::desc("Print a one-line summary instead of IR"));
cl::opt<bool> printWeights(
    "print-weights",
    cl::desc("Print weight blobs in full instead of eliding them"));
cl::opt<bool>
    listOnnxOps("list-onnx-ops",
                cl::desc("Print the supported ONNX ops as a Markdown table"));

//===----------------------------------------------------------------------===//
// Training: the optimizer step and the training artifact (docs/runtime.md
// "Training"). The loss and gradient options live in their own block.
//===----------------------------------------------------------------------===//
cl::opt<bool> train("train",
                    cl::desc("Compile a training artifact: entry points "
                             "train_step (forward, loss, backward, optimizer "
                             "update) and eval, with persistent state"),
                    cl::init(false));
cl::opt<std::string> optimizerSpec(
    "optimizer",
    cl::desc("With --train: sgd|momentum|nesterov|adam|adamw, then "
             "optionally ':' and KEY=VALUE,... (lr, momentum, beta1, beta2, "
             "eps, weight_decay, schedule=constant|step|cosine, "
             "warmup_steps, step_size, gamma, total_steps, min_lr)"),
    cl::value_desc("name[:k=v,...]"), cl::init("sgd"));
cl::opt<double> gradClip("grad-clip",
                         cl::desc("With --train: clip the global gradient "
                                  "norm to this (0: off)"),
                         cl::init(0));
//===-- Differentiation: loss, frozen weights, --gradients (kiln-autodiff) --===//
cl::opt<bool> gradients(
    "gradients",
    cl::desc("Compile the loss and its gradients instead of the model: an "
             "inference artifact whose outputs are 'loss' and one "
             "'grad.<initializer>' per trainable initializer, and whose "
             "inputs are the model's plus the labels (to check gradients "
             "with kiln-run)"),
    cl::init(false));
cl::opt<std::string>
    lossKind("loss",
             cl::desc("The loss on --loss-on: cross_entropy, nll, mse or l1 "
                      "(mean over the batch)"),
             cl::init(""));
cl::opt<std::string>
    lossOn("loss-on",
           cl::desc("The output the loss reads (default: the only output)"),
           cl::value_desc("OUTPUT"), cl::init(""));
cl::opt<std::string> labelsSpec(
    "labels",
    cl::desc("The labels input: NAME:SHAPE:DTYPE, e.g. y:32:int64 (class "
             "indices) or y:32x10:float32"),
    cl::value_desc("NAME:SHAPE:DTYPE"), cl::init(""));
cl::opt<std::string> lossOutput(
    "loss-output",
    cl::desc("An output that already is the scalar loss (instead of --loss)"),
    cl::value_desc("NAME"), cl::init(""));
cl::opt<std::string>
    freezeRegex("freeze",
                cl::desc("Initializers whose name this regular expression "
                         "matches in full do not train"),
                cl::value_desc("REGEX"), cl::init(""));

/// Whether the compile differentiates the model (--gradients, --train).
bool differentiates() { return gradients || train; }

/// The loss options, checked: an error message, or "" when they are usable.
std::string checkLossOptions() {
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

int error(const llvm::Twine &message) {
  llvm::errs() << "kilnc: error: " << message << "\n";
  return 1;
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
     << ". A handler covers its since-version up to the next listed one.\n\n"
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
        "estimates from the emulator's counts):\n";
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
    os << llvm::format("  %-32s bytes %12llu  flops %14llu  %10.2f us  %s\n",
                       launch.kernel.c_str(),
                       (unsigned long long)(launch.bytesRead +
                                            launch.bytesWritten),
                       (unsigned long long)launch.flops, estimate.seconds * 1e6,
                       std::string(estimate.bound).c_str());
  }
  os << llvm::format("static estimate total: %.2f us (unfused: %.2f us), "
                     "flops %llu\n",
                     total(fused) * 1e6, total(unfused) * 1e6,
                     (unsigned long long)fused.flops);
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
  if (stats || stripWeights || (emit.getNumOccurrences() && !printKiln))
    return error("--train does not combine with --stats, --strip-weights or "
                 "--emit other than kiln yet");
  llvm::Expected<std::string> optimizer =
      kiln::parseOptimizerSpec(optimizerSpec, gradClip);
  if (!optimizer)
    return error(llvm::toString(optimizer.takeError()));
  if (gradClip < 0)
    return error("--grad-clip must not be negative");
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
    kiln::addTrainingGradientPasses(pm, gradientOptions);
  }
  if (failed(kiln::addTrainingStepPasses(pm, *optimizer)))
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
  llvm::Expected<kiln::runtime::Artifact> artifact =
      kiln::compileTrainingArtifact(module, pipelineOptions, artifactOptions);
  if (!artifact)
    return error(inputFile + ": " + llvm::toString(artifact.takeError()) +
                 (diagnostic.empty() ? "" : ": " + diagnostic));
  if (kiln::runtime::Error err =
          kiln::runtime::writeArtifact(*artifact, outputFile))
    return error(err.message());
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  kiln::registerPipelinePasses();
  std::vector<char *> args;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (i > 0 && (arg == "--stats" || arg == "-stats"))
      stats = true;
    else
      args.push_back(argv[i]);
  }
  cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                              "Kiln: ONNX to GPU compiler\n\n"
                              "  --stats  print kernel count, arena bytes "
                              "(planned and naive) and weight\n"
                              "           bytes; needs -o model.kiln\n");
  for (int i = 1; i < argc; ++i)
    commandLine += (i > 1 ? " " : "") + std::string(argv[i]);

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
  pipelineOptions.f32HeadLayers = f32HeadLayers;
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

  DialectRegistry registry;
  kiln::registerPipelineDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
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
      return success();
    });
    auto runPhases = [&](ModuleOp m, kiln::Phase first, kiln::Phase last,
                         const kiln::PipelineOptions &opts) -> LogicalResult {
      PassManager pm(&context);
      for (int p = static_cast<int>(first); p <= static_cast<int>(last); ++p)
        if (failed(kiln::addPhase(pm, static_cast<kiln::Phase>(p), opts)))
          return failure();
      return pm.run(m);
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

  if (output == Output::Artifact || stats) {
    kiln::ArtifactOptions artifactOptions;
    artifactOptions.target = target;
    artifactOptions.ptxasPath = kiln::defaultPtxasPath();
    artifactOptions.compilerOptions = commandLine;
    artifactOptions.inlinedInitializers = inlinedInitializers;
    kiln::ArtifactStats artifactStats;
    auto artifact = kiln::buildArtifact(
        artifactModule ? *artifactModule : **module, artifactOptions,
        &artifactStats);
    if (!artifact)
      return error(inputFile + ": " + llvm::toString(artifact.takeError()));
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
      printContractionReport(artifactModule ? *artifactModule : **module,
                             llvm::outs());
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

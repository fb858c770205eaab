//===- kilnc.cpp - The Kiln compiler driver -------------------------------===//
//
// kilnc model.onnx [--shape name=1x3x224x224] [--emit=PHASE] [-o out]
//
// Reads the command line (Flags.cpp, PipelineFlags.cpp), calls the compile
// library (kiln/Compiler/Compiler.h) with progress, timing and MLIR's
// pass-manager options (--mlir-print-ir-after=PASS, --mlir-print-ir-after-
// all, --mlir-pass-pipeline-crash-reproducer=FILE) hooked in, and writes
// what was asked for: IR, PTX, a summary or the artifact, plus --stats
// (Reports.cpp). Output files are written atomically: a failed compile
// never leaves a partial file behind.
//
//===----------------------------------------------------------------------===//

#include "ExitStatus.h"
#include "Flags.h"
#include "Progress.h"
#include "Reports.h"

#include "kiln/Compiler/Compiler.h"
#include "kiln/Pipelines/Pipelines.h"
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Version.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>
#include <vector>

using namespace mlir;
namespace cl = llvm::cl;
using namespace kiln::kilnc;

namespace {

void printVersion(llvm::raw_ostream &os) {
  const kiln::runtime::BuildInfo &info = kiln::runtime::buildInfo();
  os << kiln::runtime::versionLine("kilnc") << "\n"
     << "  LLVM/MLIR " << LLVM_VERSION_STRING << "\n"
     << "  CUDA " << KILN_CUDA_TOOLKIT_VERSION << " (toolkit at build time; "
     << "cuda.h " << info.cudaVersion << ")\n"
     << "  artifact format " << kiln::runtime::kArtifactFormatMajor << "."
     << kiln::runtime::kArtifactFormatMinor << "\n";
}

/// --print-pipeline: each phase up to --emit's (all without it), as
/// kiln-opt's --pass-pipeline takes it.
void printPipelines(MLIRContext &context, const kiln::CompileOptions &options,
                    bool emitGiven, llvm::raw_ostream &os) {
  kiln::Phase last = emitGiven ? options.stopAfter.value_or(kiln::Phase::Ptx)
                               : kiln::Phase::Ptx;
  for (kiln::Phase phase : kiln::kAllPhases) {
    if (phase > last)
      break;
    PassManager pm = PassManager::on<ModuleOp>(&context);
    kiln::addPhase(pm, phase, options.pipeline);
    os << kiln::phaseName(phase) << ": ";
    pm.printAsTextualPipeline(os);
    os << "\n";
  }
}

/// Writes `render`'s text to `path` (or stdout for "-") atomically.
int writeText(const std::string &path,
              llvm::function_ref<void(llvm::raw_ostream &)> render) {
  if (path == "-") {
    render(llvm::outs());
    return kExitSuccess;
  }
  // Rendered whole, then written atomically (temporary file, fsync, rename):
  // a kill or a full disk leaves the previous file. llvm::writeToOutput
  // renamed a partly written file into place when the disk filled.
  std::string text;
  llvm::raw_string_ostream os(text);
  render(os);
  if (kiln::runtime::Error err =
          kiln::runtime::writeFileAtomically(path, text.data(), text.size()))
    return error(err.message());
  return kExitSuccess;
}

void printModule(ModuleOp module, bool printWeights, llvm::raw_ostream &os) {
  OpPrintingFlags flags;
  if (!printWeights)
    flags.elideLargeResourceString(64);
  module->print(os, flags);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  installCrashHandlers();
  kiln::registerPipelinePasses();
  // --mlir-print-ir-after=PASS, --mlir-print-ir-after-all, crash
  // reproducers, --mlir-disable-threading: applied to every pass manager
  // the compile runs (CompileHooks::configure).
  registerPassManagerCLOptions();
  registerMLIRContextCLOptions();

  // --stats and --time-passes are read before LLVM's parser, which owns
  // unrelated options of the same names (LLVM statistics and pass timing);
  // --help lists them through describeOptions.
  bool stats = false, timePasses = false;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg == "--stats" || arg == "-stats")
      stats = true;
    else if (arg == "--time-passes" || arg == "-time-passes")
      timePasses = true;
    else
      rest.push_back(argv[i]);
  }
  rest = rewriteDeprecatedFlags(rest, warning);
  std::vector<const char *> args = {argv[0]};
  for (const std::string &arg : rest)
    args.push_back(arg.c_str());
  describeOptions();
  cl::SetVersionPrinter(printVersion);
  cl::ParseCommandLineOptions(
      static_cast<int>(args.size()), args.data(),
      "kilnc: compiles an ONNX model into a .kiln artifact for kiln-run\n\n"
      "  kilnc model.onnx -o model.kiln [--precision=bf16] [--stats]\n\n"
      "Exit status: 0 success, 1 bad input or options, 2 internal error.\n");

  DriverFlags driver;
  kiln::CompileOptions options;
  for (int i = 1; i < argc; ++i)
    options.commandLine += (i > 1 ? " " : "") + std::string(argv[i]);
  if (llvm::Error err = readFlags(driver, options, stats))
    return error(llvm::toString(std::move(err)));
  if (driver.crashForTesting == CrashKind::Abort)
    std::abort();
  if (driver.crashForTesting == CrashKind::Fatal)
    llvm::report_fatal_error("--crash-for-testing=fatal");
  if (driver.listOnnxOps) {
    printOnnxOps(llvm::outs());
    return kExitSuccess;
  }

  DialectRegistry registry;
  kiln::registerPipelineDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);

  kiln::CompileHooks hooks;
  hooks.warning = [](const llvm::Twine &message) { warning(message); };
  if (driver.printPipeline) {
    if (llvm::Error err = kiln::validateCompileOptions(options, hooks))
      return error(llvm::toString(std::move(err)));
    printPipelines(context, options, driver.emitGiven, llvm::outs());
    return kExitSuccess;
  }
  if (driver.inputFile.empty())
    return error("no input model (usage: kilnc model.onnx [-o out])");
  bool artifactOut = driver.output == Output::Artifact;
  if ((artifactOut || stats) && driver.outputFile == "-")
    return error("the artifact is binary: name a file with -o model.kiln");
  if (options.stripWeights && !artifactOut)
    return error("--strip-weights applies to the artifact: name a file with "
                 "-o model.kiln");
  if (options.training.train && options.stopAfter != kiln::Phase::Kiln &&
      (driver.outputFile == "-" ||
       !llvm::StringRef(driver.outputFile).ends_with(".kiln")))
    return error("--train writes an artifact: name a file with -o "
                 "model.train.kiln");

  // Declared before the progress line, so the line is erased before the
  // timing report prints (at destruction).
  DefaultTimingManager timing;
  timing.setEnabled(timePasses);
  timing.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  TimingScope rootTiming = timing.getRootScope();
  Progress progress(driver.progress);
  setProgressLine(&progress);
  auto forgetProgress = llvm::make_scope_exit([] { setProgressLine(nullptr); });

  hooks.phaseStarted = [&](llvm::StringRef phase) {
    progress.setPhase(phase.str());
  };
  hooks.kernelAssembled = [&](size_t done, size_t total) {
    progress.setKernels(done, total);
  };
  hooks.configure = [&](PassManager &pm) -> LogicalResult {
    pm.addInstrumentation(std::make_unique<ProgressInstrumentation>(progress));
    return applyPassManagerCLOptions(pm);
  };
  hooks.timing = &rootTiming;

  llvm::Expected<kiln::CompileResult> result =
      kiln::compileModel(options, context, hooks);
  progress.finish();
  if (!result) {
    int status = kExitUserError;
    llvm::handleAllErrors(
        result.takeError(),
        [&](const kiln::CompileError &err) {
          status = err.getKind() == kiln::CompileError::Kind::Internal
                       ? internalError(err.getMessage())
                       : error(err.getMessage());
        },
        [&](const llvm::ErrorInfoBase &err) { status = error(err.message()); });
    return status;
  }

  if (options.training.train) {
    if (!result->artifact)
      return writeText(driver.outputFile, [&](llvm::raw_ostream &os) {
        printModule(*result->module, driver.printWeights, os);
      });
    // writeArtifact writes a temporary file and renames it into place.
    if (kiln::runtime::Error err =
            kiln::runtime::writeArtifact(*result->artifact, driver.outputFile))
      return error(err.message());
    if (result->stats)
      printTrainingStats(*result->stats, *result->artifact, llvm::outs());
    return kExitSuccess;
  }

  if (result->stats)
    printStats(*result->stats, options.pipeline.chip, llvm::outs());
  if (artifactOut) {
    if (kiln::runtime::Error err =
            kiln::runtime::writeArtifact(*result->artifact, driver.outputFile))
      return error(err.message());
    return kExitSuccess;
  }
  // Render first, then write atomically (temporary file + rename).
  return writeText(driver.outputFile, [&](llvm::raw_ostream &os) {
    if (driver.summary)
      printSummary(*result->module, os);
    else if (driver.output == Output::Ptx)
      printPtx(*result->module, os);
    else
      printModule(*result->module, driver.printWeights, os);
  });
}

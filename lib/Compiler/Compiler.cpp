//===- Compiler.cpp - Compile a model: import, phases, artifact -----------===//
//
// compileModel's steps, in order: validate the options, import, add the
// gradients (--gradients, --train), then either the training compile
// (TrainingCompile.cpp) or the phases up to the one asked for, the unfused
// copy for --stats, and the artifact. PhaseRunner.h runs the pass managers
// with the caller's hooks and keeps the first error diagnostic.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Compiler.h"
#include "kiln/Compiler/Quantization.h"
#include "kiln/Compiler/SeparableDims.h"

#include "PhaseRunner.h"
#include "SignatureGroups.h"
#include "TrainingCompile.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Frontend/ONNX/Importer.h"
#include "kiln/Target/CUDA/KernelCache.h"
#include "kiln/Target/CUDA/TemplateEmission.h"
#include "kiln/runtime/Profile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdlib>

using namespace mlir;

namespace kiln {

char CompileError::ID = 0;

// Messages quote names from the model (tensors, nodes, dims): control
// characters in them are escaped, so that every error stays one line.
llvm::Error compileError(CompileError::Kind kind, const llvm::Twine &message) {
  return llvm::make_error<CompileError>(
      kind, onnx_frontend::escapeControlCharacters(message.str()));
}

namespace {

llvm::Error userError(const llvm::Twine &message) {
  return compileError(CompileError::Kind::User, message);
}

/// The loss options, checked.
llvm::Error checkTrainingOptions(const CompileOptions &options) {
  const TrainingOptions &training = options.training;
  const TrainingGradientOptions &g = training.gradient;
  if (!g.augment.empty() && !training.differentiates())
    return userError("--augment applies when training (--train, --gradients)");
  bool any = !g.loss.empty() || !g.lossOn.empty() || !g.labels.empty() ||
             !g.lossOutput.empty() || !g.freeze.empty();
  if (!training.differentiates())
    return any ? userError("--loss, --loss-on, --labels, --loss-output and "
                           "--freeze apply when differentiating (--gradients, "
                           "--train)")
               : llvm::Error::success();
  // A .mlir module may carry its own @train_grad (kiln-optimizer's tests).
  if (training.train && llvm::StringRef(options.input).ends_with(".mlir") &&
      !any)
    return llvm::Error::success();
  if (g.loss.empty() == g.lossOutput.empty())
    return userError(std::string(training.train ? "--train" : "--gradients") +
                     " needs --loss=cross_entropy|nll|mse|l1 with "
                     "--labels=NAME:SHAPE:DTYPE, or --loss-output=NAME");
  return llvm::Error::success();
}

/// The model as kiln IR: imported from ONNX, or parsed from a .mlir file
/// (for tests of the later phases, and of --train on a module that already
/// has @train_grad).
llvm::Expected<OwningOpRef<ModuleOp>>
loadModel(const CompileOptions &options, MLIRContext &context,
          const CompileHooks &hooks,
          std::vector<std::pair<std::string, DenseElementsAttr>> &inlined,
          runtime::HostProgram &host) {
  if (!options.inputBytes &&
      llvm::StringRef(options.input).ends_with(".mlir")) {
    std::string parseError;
    ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
      if (parseError.empty())
        parseError = d.str();
      return success();
    });
    OwningOpRef<ModuleOp> parsed =
        parseSourceFile<ModuleOp>(options.input, &context);
    if (parsed)
      return parsed;
    return userError(options.input + ": " +
                     (parseError.empty() ? "cannot parse" : parseError));
  }
  onnx_frontend::ImportOptions import;
  for (const auto &entry : options.shapes)
    import.inputShapes[entry.getKey()] = entry.getValue();
  for (const auto &entry : options.shapeDimNames)
    import.inputDimNames[entry.getKey()] = entry.getValue();
  for (const auto &entry : options.dims)
    import.dimRanges[entry.getKey()] = entry.getValue();
  for (const auto &entry : options.sequenceLengths)
    import.sequenceLengths[entry.getKey()] = entry.getValue();
  for (const auto &entry : options.absentInputs)
    import.absentInputs.insert(entry.getKey());
  // Every float initializer may train, however small (biases).
  import.floatInitializersAsGlobals = options.training.differentiates();
  import.trainingDropout = options.training.differentiates();
  // Training differentiates the unrolled steps (kiln-autodiff has no rule
  // for kiln.recurrence).
  import.persistentRecurrence = options.pipeline.recurrence == "persistent" &&
                                !options.training.differentiates();
  import.inlinedInitializers = &inlined;
  // STRING nodes become host steps (kiln/runtime/HostSteps.h) in inference
  // artifacts; a training compile refuses STRING tensors.
  if (!options.training.differentiates())
    import.hostProgram = &host;
  if (hooks.warning)
    import.warning = [&](const std::string &message) { hooks.warning(message); };
  llvm::Expected<OwningOpRef<ModuleOp>> module =
      options.inputBytes
          ? onnx_frontend::importModelBuffer(*options.inputBytes, options.input,
                                             context, import)
          : onnx_frontend::importModelFile(options.input, context, import);
  if (!module)
    return userError(llvm::toString(module.takeError()));
  // --gradients takes no run-time sizes (docs/runtime.md "Sizes at run
  // time"); inference and --train artifacts do where a dim is separable.
  if (!options.dims.empty() && hooks.warning && options.training.gradients)
    hooks.warning("--dim: symbolic dims are compiled at the maximum of their "
                  "range; a --gradients artifact runs that size only");
  return module;
}

/// kilnc --dim: one warning per symbol a run cannot pad.
void warnNotSeparable(const std::vector<runtime::SymbolicDim> &dims,
                      const CompileHooks &hooks) {
  for (const runtime::SymbolicDim &dim : dims)
    if (!dim.separable)
      hooks.warning("--dim: '" + dim.name + "' is not separable (" +
                    dim.reason + "): the artifact runs " + dim.name + " = " +
                    std::to_string(dim.max) + " only");
}

/// kilnc --train --dim: a train_step input whose first dim is a separable
/// symbol's maximum but does not follow it (labels given as `y:32:int64`
/// next to `--shape x=Nx...`) makes every smaller batch fail to bind.
void warnFixedBatchInputs(const runtime::Artifact &artifact,
                          const CompileHooks &hooks) {
  const runtime::EntryPoint *step = artifact.findEntryPoint("train_step");
  if (!step)
    return;
  for (uint32_t i : step->inputs) {
    const runtime::TensorSignature &follows = artifact.inputs[i];
    for (const runtime::SymbolicAxis &axis : follows.symbolicAxes) {
      const runtime::SymbolicDim &dim = artifact.symbolicDims[axis.symbol];
      if (axis.dim != 0 || !dim.separable)
        continue;
      for (uint32_t j : step->inputs) {
        const runtime::TensorSignature &fixed = artifact.inputs[j];
        if (!fixed.symbolicAxes.empty() || fixed.shape.empty() ||
            fixed.shape[0] != dim.max || artifact.findSizeMask(fixed.name))
          continue;
        hooks.warning(
            "--dim: train_step input '" + runtime::entryLocalName(fixed.name) +
            "' has a fixed first dim of " + std::to_string(dim.max) +
            " while '" + runtime::entryLocalName(follows.name) + "' follows '" +
            dim.name + "': a batch smaller than " + std::to_string(dim.max) +
            " needs it to follow the symbol too (--labels=" +
            runtime::entryLocalName(fixed.name) + ":" + dim.name + "...)");
      }
      return;
    }
  }
}

CompileStats::Remat rematReportOf(DictionaryAttr report) {
  auto get = [&](StringRef key) -> uint64_t {
    auto attr = report.getAs<IntegerAttr>(key);
    return attr ? attr.getInt() : 0;
  };
  return {get("kept"), get("kept_bytes"), get("recomputed"),
          get("recomputed_bytes")};
}

/// The reports passes leave on the module for --stats.
void readReports(ModuleOp module, CompileStats &stats) {
  if (auto lines = module->getAttrOfType<ArrayAttr>(
          KilnDialect::ContractionReportAttrHelper::getNameStr())) {
    stats.contractionReport.emplace();
    for (Attribute line : lines)
      stats.contractionReport->push_back(
          cast<StringAttr>(line).getValue().str());
  }
  if (auto lines = module->getAttrOfType<ArrayAttr>(
          KilnDialect::RecurrenceReportAttrHelper::getNameStr()))
    for (Attribute line : lines)
      stats.recurrenceReport.push_back(cast<StringAttr>(line).getValue().str());
  module.walk([&](func::FuncOp func) {
    if (auto lines = func->getAttrOfType<ArrayAttr>(
            KilnDialect::QuantizedReportAttrHelper::getNameStr()))
      for (Attribute line : lines)
        stats.quantizedFallbacks.push_back(
            cast<StringAttr>(line).getValue().str());
  });
  if (auto report = module->getAttrOfType<DictionaryAttr>(
          KilnDialect::RematReportAttrHelper::getNameStr()))
    stats.remat = rematReportOf(report);
}

/// The kernel cache --kernel-cache names ($KILN_KERNEL_CACHE when it is not
/// given, which the tests set to 'off' or a directory of their own; else
/// the user's cache directory).
KernelCache openKernelCache(const CompileOptions &options) {
  std::string dir = options.kernelCache;
  if (dir.empty())
    if (const char *env = std::getenv("KILN_KERNEL_CACHE"))
      dir = env;
  if (dir.empty())
    dir = KernelCache::defaultDirectory();
  if (dir == "off")
    dir.clear();
  return KernelCache(dir, options.kernelCacheBytes);
}

/// Bytes per element as the artifact stores them (i1 in a byte).
uint64_t elementBytes(MemRefType type) {
  Type element = type.getElementType();
  unsigned bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 8;
  return std::max(1u, bits / 8);
}

/// The byte size of a buffer of `type`, or nullopt past 2^48 (256 TiB,
/// beyond any device's memory; the memory plan sums them in 64 bits).
std::optional<uint64_t> bufferBytes(MemRefType type) {
  if (!type.hasStaticShape())
    return 0; // Not planned here.
  uint64_t bytes = elementBytes(type);
  for (int64_t d : type.getShape())
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      return std::nullopt;
  if (bytes > (uint64_t(1) << 48))
    return std::nullopt;
  return bytes;
}

/// Every buffer the run needs (inputs, outputs, intermediates) has a size
/// the memory plan can add up: a declared dim of 2^63 is the input's
/// fault, not an internal error of the plan.
llvm::Error checkTensorBytes(ModuleOp module, const CompileOptions &options) {
  std::string bad;
  module.walk([&](func::FuncOp func) {
    if (!bad.empty() || func.isExternal())
      return;
    for (BlockArgument arg : func.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || bufferBytes(type))
        continue;
      auto name = func.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), KilnDialect::NameAttrHelper::getNameStr());
      bad = "tensor '" + (name ? name.getValue().str() : "?") + "'";
      return;
    }
    func.walk([&](memref::AllocOp alloc) {
      if (bad.empty() && !bufferBytes(alloc.getType()))
        bad = "an intermediate tensor";
    });
  });
  if (bad.empty())
    return llvm::Error::success();
  return userError(options.input + ": " + bad +
                   " takes more than 2^48 bytes (its shape's dims multiply "
                   "past any device's memory)");
}

/// The constants the artifact will hold, against
/// CompileOptions::maxConstantBytes: a small model can fold into a huge
/// constant (a Dropout mask, a ConstantOfShape, an Expand of a constant
/// over a declared dim of 2^31), which packing would materialise byte by
/// byte. Checked on the types, before any byte is written.
llvm::Error checkConstantBytes(ModuleOp module, const CompileOptions &options) {
  uint64_t total = 0, largest = 0;
  std::string largestName;
  bool overflow = false;
  module.walk([&](memref::GlobalOp global) {
    auto value =
        dyn_cast_or_null<ElementsAttr>(global.getInitialValueAttr());
    if (!global.getConstant() || !value)
      return;
    MemRefType type = global.getType();
    uint64_t bytes = 0;
    uint64_t elements = static_cast<uint64_t>(type.getNumElements());
    if (__builtin_mul_overflow(elements, elementBytes(type), &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      overflow = true;
    if (bytes > largest) {
      largest = bytes;
      largestName = global.getSymName().str();
    }
  });
  if (!overflow && total <= options.maxConstantBytes)
    return checkTensorBytes(module, options);
  return userError(options.input + ": the model's constants take " +
                   (overflow ? std::string("more than 2^64")
                             : std::to_string(total)) +
                   " bytes after folding (the largest, '" + largestName +
                   "', " + std::to_string(largest) +
                   " bytes), past the limit of " +
                   std::to_string(options.maxConstantBytes) +
                   " bytes: a tensor folded from a shape that size is "
                   "usually a wrong shape (--max-constant-bytes)");
}

} // namespace

llvm::Error validateCompileOptions(CompileOptions &options,
                                   const CompileHooks &hooks) {
  auto warn = [&](const llvm::Twine &message) {
    if (hooks.warning)
      hooks.warning(message);
  };
  if (llvm::Error err = validatePipelineOptions(options.pipeline, warn))
    return userError(llvm::toString(std::move(err)));
  if (llvm::Error err = checkTrainingOptions(options))
    return err;
  const PipelineOptions &p = options.pipeline;
  if ((p.tune || !p.tuneImport.empty()) && !p.tuneCache.empty())
    // Before the compile: tuning takes minutes, and then nothing is lost.
    if (runtime::Error err = runtime::checkWritable(p.tuneCache))
      return userError("--tune-cache: " + err.message());
  return llvm::Error::success();
}

llvm::Expected<CompileResult> compileModel(CompileOptions options,
                                           MLIRContext &context,
                                           const CompileHooks &callerHooks) {
  // Warnings quote names from the model too: one line each, as errors.
  CompileHooks hooks = callerHooks;
  if (callerHooks.warning)
    hooks.warning = [&](const llvm::Twine &message) {
      callerHooks.warning(
          onnx_frontend::escapeControlCharacters(message.str()));
    };
  if (llvm::Error err = validateCompileOptions(options, hooks))
    return std::move(err);
  // --precision=int8 (fp8): calibrate and rewrite into a QDQ model first
  // (Quantization.h); the rest of the compile is that model's, in fp32
  // where no int8 (fp8) kernel runs.
  std::string quantizedModel;
  std::vector<std::string> quantizationSummary;
  if (options.quantization.quantizes()) {
    if (hooks.phaseStarted)
      hooks.phaseStarted("quantize");
    llvm::Expected<std::string> bytes =
        quantizeModel(options, context, hooks, quantizationSummary);
    if (!bytes)
      return bytes.takeError();
    quantizedModel = std::move(*bytes);
    options.inputBytes = llvm::StringRef(quantizedModel);
    options.pipeline.precision = "fp32";
  }
  PhaseRunner runner(context, hooks);

  runner.startPhase("import");
  std::optional<TimingScope> importTiming = runner.timePhase("import");
  std::vector<std::pair<std::string, DenseElementsAttr>> inlined;
  runtime::HostProgram host;
  llvm::Expected<OwningOpRef<ModuleOp>> loaded =
      loadModel(options, context, hooks, inlined, host);
  importTiming.reset();
  if (!loaded)
    return loaded.takeError();
  OwningOpRef<ModuleOp> module = std::move(*loaded);
  runner.captureDiagnostics();

  ArtifactOptions artifactOptions;
  artifactOptions.target = options.pipeline.chip;
  artifactOptions.ptxasPath = defaultPtxasPath();
  artifactOptions.compilerOptions = options.commandLine;
  artifactOptions.inlinedInitializers = inlined;
  artifactOptions.onKernelAssembled = hooks.kernelAssembled;
  KernelCache kernelCache = openKernelCache(options);
  artifactOptions.kernelCache = &kernelCache;
  auto trimCache = llvm::make_scope_exit([&] { kernelCache.trim(); });

  // How sequence and optional inputs and outputs became tensors, read as
  // imported, before any pass runs.
  auto signatureGroups = (*module)->getAttrOfType<DictionaryAttr>(
      onnx_frontend::kSignatureGroupsAttrName);
  if (signatureGroups && options.training.differentiates())
    return userError(options.input +
                     ": sequence and optional graph inputs and outputs are "
                     "not supported in training");

  if (options.training.train) {
    llvm::Expected<CompileResult> trained =
        compileTraining(options, std::move(module), artifactOptions, runner);
    if (trained && trained->artifact && hooks.warning) {
      warnNotSeparable(trained->artifact->symbolicDims, hooks);
      warnFixedBatchInputs(*trained->artifact, hooks);
    }
    return trained;
  }

  // Which symbolic dims a run may pad (SeparableDims.h), read on the IR as
  // imported: the graph passes below only rearrange what it proves.
  // A softmax along a symbol gets a mask of -inf at the padded positions.
  SeparableDims separable;
  std::vector<std::vector<std::string>> maskedNodes;
  if (!options.training.differentiates()) {
    separable = analyzeSeparableDims(*module);
    maskedNodes.resize(separable.symbols.size());
    for (const SeparableDims::MaskSite &site : separable.maskSites)
      maskedNodes[site.symbol].push_back(describeMaskSite(site));
    insertSizeMasks(*module, separable);
  }

  auto failedWith = [&]() {
    return userError(options.input + ": compilation failed: " +
                     runner.diagnosticOr("unknown error"));
  };
  if (options.training.gradients) {
    TrainingGradientOptions gradient = options.training.gradient;
    gradient.gradientsAsMain = true;
    PassManager pm = PassManager::on<ModuleOp>(&context);
    addTrainingGradientPasses(pm, gradient);
    if (failed(runner.run(pm, *module)))
      return failedWith();
  }

  Phase last = options.stopAfter.value_or(Phase::Ptx);
  CompileResult result;
  std::optional<CompileStats> stats;
  // --stats also compiles a copy without fusion, to the gpu phase, to
  // report what fusion saves.
  if (options.stats) {
    stats.emplace();
    stats->quantization = quantizationSummary;
    stats->quantizationFormat = options.quantization.fp8 ? "fp8" : "int8";
    OwningOpRef<ModuleOp> copy(module->clone());
    PipelineOptions unfused = options.pipeline;
    unfused.fuse = false;
    if (failed(runner.runPhases(*copy, Phase::Kiln, Phase::Gpu, unfused,
                                options.pipeline.fuse ? "unfused " : "")))
      return failedWith();
    stats->unfused = estimateKernelStats(*copy);
  }
  // The fused statistics are read at the gpu phase and the artifact's at
  // ptx; when the requested output stops earlier, a copy goes all the way.
  bool packs = !options.stopAfter || options.stats;
  OwningOpRef<ModuleOp> artifactModule;
  if (options.stats && last < Phase::Ptx)
    artifactModule = module->clone();
  for (ModuleOp m : {*module, artifactModule ? *artifactModule : nullptr}) {
    if (!m)
      continue;
    Phase until = m == *module ? last : Phase::Ptx;
    bool pastGpu = until > Phase::Gpu;
    if (failed(runner.runPhases(m, Phase::Kiln, pastGpu ? Phase::Gpu : until,
                                options.pipeline)))
      return failedWith();
    if (stats && pastGpu)
      stats->fused = estimateKernelStats(m);
    if (pastGpu &&
        failed(runner.runPhases(m, Phase::Llvm, until, options.pipeline)))
      return failedWith();
  }

  // --emit=ptx prints every kernel as PTX: the template kernels' sources
  // are compiled as the artifact's are (packing compiles them in place).
  if (options.stopAfter == Phase::Ptx && !packs)
    if (llvm::Error err = emitTemplateKernels(*module, kernelCache))
      return compileError(CompileError::Kind::Internal,
                          options.input + ": " +
                              llvm::toString(std::move(err)));

  if (packs) {
    ModuleOp packed = artifactModule ? *artifactModule : *module;
    if (llvm::Error err = checkConstantBytes(packed, options))
      return std::move(err);
    ArtifactStats artifactStats;
    runner.startPhase(artifactOptions.ptxasPath.empty() ? "artifact"
                                                        : "artifact (ptxas)");
    std::optional<TimingScope> timing = runner.timePhase("artifact");
    artifactOptions.timing = timing ? &*timing : nullptr;
    llvm::Expected<runtime::Artifact> artifact =
        buildArtifact(packed, artifactOptions, &artifactStats);
    timing.reset();
    // The module compiled: packing it can only fail on what Kiln generated
    // (ptxas rejecting a kernel, a plan that does not verify), or on the
    // machine (a full temporary directory: EnvironmentError).
    if (!artifact) {
      CompileError::Kind kind = CompileError::Kind::Internal;
      std::string message;
      llvm::handleAllErrors(
          artifact.takeError(),
          [&](const EnvironmentError &err) {
            kind = CompileError::Kind::User;
            message = err.message;
          },
          [&](const llvm::ErrorInfoBase &err) { message = err.message(); });
      return compileError(kind, options.input + ": " + message);
    }
    if (stats) {
      stats->artifact = artifactStats;
      if (kernelCache.enabled())
        stats->kernelCachePath = kernelCache.path();
      readReports(packed, *stats);
    }
    attachSymbolicDims(separable, *artifact);
    // From an ONNX model the importer wrote the groups (a bad one is a Kiln
    // bug); a .mlir input may carry hand-written ones.
    if (llvm::Error err = attachSignatureGroups(signatureGroups, *artifact))
      return compileError(llvm::StringRef(options.input).ends_with(".mlir")
                              ? CompileError::Kind::User
                              : CompileError::Kind::Internal,
                          options.input + ": " +
                              llvm::toString(std::move(err)));
    if (hooks.warning)
      warnNotSeparable(artifact->symbolicDims, hooks);
    if (stats) {
      stats->symbolicDims = artifact->symbolicDims;
      for (size_t s = 0; s < artifact->symbolicDims.size(); ++s) {
        CompileStats::ScaledLaunches counts;
        counts.total = artifact->launches.size();
        std::vector<bool> scaled(counts.total, false);
        for (const runtime::LaunchScale &scale : artifact->launchScales)
          if (scale.symbol == s)
            scaled[scale.launch] = true;
        for (size_t l = 0; l < counts.total; ++l) {
          if (scaled[l])
            ++counts.scaled;
          else
            counts.fixed.push_back(
                artifact->kernels[artifact->launches[l].kernel].name);
        }
        for (const runtime::LaunchGuard &guard : artifact->launchGuards) {
          if (guard.symbol != s)
            continue;
          std::pair<int64_t, int64_t> range{guard.min, guard.max};
          auto it = llvm::find_if(counts.buckets, [&](const auto &bucket) {
            return bucket.first == range;
          });
          if (it == counts.buckets.end())
            it = counts.buckets.insert(counts.buckets.end(), {range, {}});
          it->second.push_back(
              artifact->kernels[artifact->launches[guard.launch].kernel].name);
        }
        llvm::sort(counts.buckets, [](const auto &a, const auto &b) {
          return a.first < b.first;
        });
        counts.readsPadding = separable.readsPadding[s];
        counts.maskedNodes = maskedNodes[s];
        stats->scaledLaunches.push_back(std::move(counts));
      }
    }
    if (!host.empty()) {
      artifact->host = std::move(host);
      if (runtime::Error err = runtime::verifyHostProgram(*artifact))
        return compileError(CompileError::Kind::Internal,
                            options.input + ": " + err.message());
      if (stats)
        stats->hostSteps = artifact->host.steps;
    }
    if (stats)
      for (const runtime::ControlRegion &region : artifact->controlRegions) {
        // Each kernel once, with how often it launches per iteration.
        llvm::MapVector<llvm::StringRef, unsigned> kernels;
        for (uint32_t l = region.firstLaunch;
             l < region.firstLaunch + region.launchCount; ++l)
          ++kernels[artifact->kernels[artifact->launches[l].kernel].name];
        std::string list;
        for (const auto &[name, count] : kernels)
          list += (list.empty() ? "" : ", ") + name.str() +
                  (count > 1 ? " x" + std::to_string(count) : "");
        stats->deviceLoops.push_back(
            "while launches " + std::to_string(region.firstLaunch) + "-" +
            std::to_string(region.firstLaunch + region.launchCount - 1) +
            " (flag buffer '" +
            artifact->memoryPlan.buffers[region.flagBuffer].name +
            "'): " + std::to_string(region.launchCount) +
            " launches per iteration: " + list);
      }
    if (options.stripWeights)
      if (runtime::Error err = runtime::stripWeights(*artifact))
        return userError(options.input + ": " + err.message());
    result.artifact = std::move(*artifact);
  }
  result.module = std::move(module);
  result.stats = std::move(stats);
  return std::move(result);
}

} // namespace kiln

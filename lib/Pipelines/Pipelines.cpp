//===- Pipelines.cpp - Kiln's named compilation pipelines -----------------===//
//
// Each phase is a function that adds its passes with typed options
// (`createXPass(XPassOptions{...})`). What a phase runs can still be
// replayed pass by pass: kilnc --print-pipeline prints each phase as the
// textual pipeline kiln-opt takes. The passes come from upstream MLIR
// except the kiln-* ones.
//
//===----------------------------------------------------------------------===//

#include "kiln/Pipelines/Pipelines.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Target/CUDA/TargetInfo.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

using namespace mlir;

namespace kiln {

llvm::StringRef phaseName(Phase phase) {
  switch (phase) {
  case Phase::Kiln:
    return "kiln";
  case Phase::Graph:
    return "graph";
  case Phase::Linalg:
    return "linalg";
  case Phase::Gpu:
    return "gpu";
  case Phase::Llvm:
    return "llvm";
  case Phase::Ptx:
    return "ptx";
  }
  llvm_unreachable("unknown phase");
}

std::optional<std::string> ptxFeaturesFor(llvm::StringRef chip) {
  // sm_90 needs PTX ISA >= 7.8; LLVM 22 aborts below that. 8.0 serves both.
  if (chip == "sm_80" || chip == "sm_90")
    return std::string("+ptx80");
  return std::nullopt;
}

std::string PipelineOptions::defaultLibdevicePath() {
  if (const char *env = std::getenv("KILN_LIBDEVICE"))
    return env;
#ifdef KILN_LIBDEVICE_PATH
  return KILN_LIBDEVICE_PATH;
#else
  return "";
#endif
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {

/// "a, b, c" from "a|b|c".
std::string listOf(llvm::StringRef values) {
  llvm::SmallVector<llvm::StringRef> parts;
  values.split(parts, '|');
  return llvm::join(parts, ", ");
}

bool isOneOf(llvm::StringRef value, llvm::StringRef values) {
  llvm::SmallVector<llvm::StringRef> parts;
  values.split(parts, '|');
  return llvm::is_contained(parts, value);
}

/// The check of one string option against its VALUES (PipelineOptions.def);
/// an empty value means "none" and is accepted.
llvm::Error checkValue(llvm::StringRef flag, std::string &value,
                       llvm::StringRef values,
                       const std::function<void(const llvm::Twine &)> &warn) {
#define KILN_DEPRECATED_VALUE(FLAG, OLD, NEW)                                 \
  if (flag == FLAG && value == OLD) {                                         \
    warn("--" + flag + "=" + OLD + " is deprecated: use --" + flag + "=" +    \
         NEW);                                                                \
    value = NEW;                                                              \
  }
#include "kiln/Pipelines/PipelineOptions.def"
  if (value.empty() || values.empty())
    return llvm::Error::success();
  if (values == "target") {
    if (TargetInfo::forChip(value) && ptxFeaturesFor(value))
      return llvm::Error::success();
    return llvm::createStringError("--" + flag + " '" + value +
                                   "' is not one of " +
                                   TargetInfo::supportedChips());
  }
  if (isOneOf(value, values))
    return llvm::Error::success();
  return llvm::createStringError("--" + flag + " '" + value +
                                 "' is not one of " + listOf(values));
}

llvm::Error checkValue(llvm::StringRef, bool &, llvm::StringRef,
                       const std::function<void(const llvm::Twine &)> &) {
  return llvm::Error::success();
}
llvm::Error checkValue(llvm::StringRef, unsigned &, llvm::StringRef,
                       const std::function<void(const llvm::Twine &)> &) {
  return llvm::Error::success();
}

} // namespace

llvm::Error
validatePipelineOptions(PipelineOptions &options,
                        const std::function<void(const llvm::Twine &)> &warn) {
#define KILN_PIPELINE_OPTION(FIELD, FLAG, TYPE, DEFAULT, GROUP, VALUES,       \
                             METAVAR, HELP)                                   \
  if (llvm::Error err = checkValue(FLAG, options.FIELD, VALUES, warn))        \
    return err;
#include "kiln/Pipelines/PipelineOptions.def"
  if (options.tune && options.tuneMaxCandidates == 0)
    return llvm::createStringError(
        "--tune-max-candidates must be at least 1");
  if (!options.tuneExport.empty() && !options.tune)
    return llvm::createStringError("--tune-export needs --tune");
  if (!options.tuneImport.empty() && options.tuneCache.empty())
    return llvm::createStringError(
        "--tune-import needs --tune-cache (the file the winners go to)");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The phases
//===----------------------------------------------------------------------===//

namespace {

void addKilnPhase(OpPassManager &pm) {
  // The importer already folds as it builds; ONNX Gradient nodes become
  // backward ops (a no-op without them).
  pm.addNestedPass<func::FuncOp>(createExpandGradientsPass());
}

void addGraphPhase(OpPassManager &pm, const PipelineOptions &options) {
  // kiln-assign-layout and kiln-lower-precision are module passes: they add
  // transposed and converted weights. Convolutions run on tensor cores
  // (auto layout: NHWC) when kiln-match-contractions turns their regions
  // into template kernels.
  // Quantized matmul chains first, while they are still the importer's
  // (sibling fusion would concatenate their dequantized weights): each
  // becomes a `quantized_matmul` region for the int8 kernel.
  bool int8 = options.contractionKernels && options.int8Kernels;
  if (int8) {
    FuseQuantizedPassOptions matmuls;
    matmuls.convolutions = false;
    pm.addNestedPass<func::FuncOp>(createFuseQuantizedPass(matmuls));
  }
  // Horizontal fusion next: the concatenated weights then get layout and
  // precision like any other.
  if (options.fuseSiblings)
    pm.addPass(createFuseSiblingContractionsPass());
  AssignLayoutPassOptions layout;
  layout.layout = options.layout;
  // int8 and fp8 (kilnc --precision=int8|fp8) reach the pipeline as a QDQ
  // model: its chains become int8 or fp8 kernels, everything else fp32.
  std::string floatPrecision =
      options.precision == "int8" || options.precision == "fp8"
          ? "fp32"
          : options.precision;
  layout.precision = floatPrecision;
  layout.tensorCoreConvs = options.contractionKernels;
  layout.int8Convs = int8;
  pm.addPass(createAssignLayoutPass(layout));
  // Quantized convolution chains once they are NHWC (the int8 kernel is an
  // implicit GEMM over NHWC images), before kiln-lower-precision would
  // lower a QDQ chain's f32 ops: each becomes a `quantized_conv` region.
  if (int8) {
    FuseQuantizedPassOptions convolutions;
    convolutions.matmuls = false;
    pm.addNestedPass<func::FuncOp>(createFuseQuantizedPass(convolutions));
  }
  LowerPrecisionPassOptions precision;
  precision.precision = floatPrecision;
  precision.ioPrecision = options.ioPrecision;
  precision.f32HeadLayers = options.fp32HeadLayers;
  precision.residualPrecision = options.residualPrecision;
  pm.addPass(createLowerPrecisionPass(precision));
  // RNN/GRU/LSTM time loops (kiln.recurrence) become persistent kernels
  // before fusion, so the slices and reshapes they read in place die.
  LowerRecurrencePassOptions recurrence;
  recurrence.chip = options.chip;
  pm.addPass(createLowerRecurrencePass(recurrence));
  if (options.fuse)
    pm.addNestedPass<func::FuncOp>(createFusePass(FusePassOptions{
        /*attention=*/options.contractionKernels && options.attentionKernels}));
}

void addLinalgPhase(OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(createCanonicalizerPass());
  // Contraction regions get a template kernel config (selection), then
  // become those kernels (CUDA source, compiled when the artifact is
  // written); the other fusion regions become one linalg.generic each right
  // after lowering.
  if (options.contractionKernels) {
    SelectContractionKernelsPassOptions selection;
    selection.chip = options.chip;
    selection.wgmma = options.wgmma;
    selection.tma = options.tma;
    selection.checkNvrtc = true;
    if (options.tune) {
      selection.tune = true;
      selection.tuneDevice = options.tuneDevice;
      selection.tuneMaxCandidates = options.tuneMaxCandidates;
      selection.tuneWorker = options.tuneWorker;
    }
    selection.tuneCache = options.tuneCache;
    selection.tuneExport = options.tuneExport;
    selection.tuneImport = options.tuneImport;
    selection.sizeBuckets = options.sizeBuckets;
    pm.addPass(createSelectContractionKernelsPass(selection));
    MatchContractionsPassOptions contractions;
    contractions.chip = options.chip;
    pm.addPass(createMatchContractionsPass(contractions));
  }
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createLowerToLinalgPass());
  func.addPass(createCollapseFusionsPass());
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
}

void addGpuPhase(OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(createMaterializeWeightsPass());
  pm.addNestedPass<func::FuncOp>(createDistinctResultsPass());
  // Function results become out-parameters: the runtime owns every buffer.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.modifyPublicFunctions = true;
  outParams.hoistStaticAllocs = true;
  outParams.addResultAttribute = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addNestedPass<func::FuncOp>(createMaterializeCallOperandsPass());
  // Each linalg op becomes one kernel (kiln-select-generic-kernels picks its
  // shape from the chip's facts, TargetInfo.h; kiln-map-to-gpu follows).
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createLinalgGeneralizeNamedOpsPass());
  SelectGenericKernelsPassOptions selection;
  selection.chip = options.chip;
  selection.vectorize = options.vectorize;
  selection.rowKernels = options.rowKernels;
  selection.tiledTranspose = options.tiledTranspose;
  selection.reductionKernels = options.reductionKernels;
  func.addPass(createSelectGenericKernelsPass(selection));
  MapToGpuPassOptions mapping;
  mapping.chip = options.chip;
  func.addPass(createMapToGpuPass(mapping));
  func.addPass(createCanonicalizerPass());
  func.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createLowerKernelCallsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createNameKernelsPass());
  pm.addPass(createAlignKernelArgsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addLlvmPhase(OpPassManager &pm, const PipelineOptions &options) {
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = *ptxFeaturesFor(options.chip);
  target.optLevel = 3;
  if (!options.libdevicePath.empty())
    target.linkLibs.push_back(options.libdevicePath);
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createContractFloatOpsPass());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(memref::createExpandStridedMetadataPass());
  // Kernels take bare pointers: with a static memory plan the runtime
  // passes one address per buffer.
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

void addPtxPhase(OpPassManager &pm) {
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

} // namespace

void addPhase(OpPassManager &pm, Phase phase, const PipelineOptions &options) {
  switch (phase) {
  case Phase::Kiln:
    return addKilnPhase(pm);
  case Phase::Graph:
    return addGraphPhase(pm, options);
  case Phase::Linalg:
    return addLinalgPhase(pm, options);
  case Phase::Gpu:
    return addGpuPhase(pm, options);
  case Phase::Llvm:
    return addLlvmPhase(pm, options);
  case Phase::Ptx:
    return addPtxPhase(pm);
  }
  llvm_unreachable("unknown phase");
}

void addPhases(OpPassManager &pm, Phase first, Phase last,
               const PipelineOptions &options) {
  for (Phase phase : kAllPhases)
    if (phase >= first && phase <= last)
      addPhase(pm, phase, options);
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

void addTrainingGradientPasses(OpPassManager &pm,
                               const TrainingGradientOptions &options) {
  // A model's own Gradient nodes first: kiln-autodiff has no rule for them.
  pm.addNestedPass<func::FuncOp>(createExpandGradientsPass());
  AutodiffPassOptions autodiff;
  autodiff.loss = options.loss;
  autodiff.lossOn = options.lossOn;
  autodiff.labels = options.labels;
  autodiff.lossOutput = options.lossOutput;
  autodiff.freeze = options.freeze;
  autodiff.gradientsAsMain = options.gradientsAsMain;
  autodiff.rematerialize = options.rematerialize;
  autodiff.lossSeedArgument = options.lossSeedArgument;
  pm.addPass(createAutodiffPass(autodiff, options.forwardHook));
  // The rules emit reshapes of reshapes, identity broadcasts and repeated
  // constants; clean them up before layout assignment sees the graph.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (!options.augment.empty()) {
    AugmentPassOptions augment;
    augment.spec = options.augment;
    augment.trainFunction = options.gradientsAsMain ? "main" : "train_grad";
    augment.evalFunction = options.gradientsAsMain ? "" : "main";
    pm.addPass(createAugmentPass(augment));
  }
}

void addTrainingStepPasses(OpPassManager &pm,
                           const OptimizerPassOptions &options) {
  pm.addPass(createOptimizerPass(options));
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void registerPipelineDialects(DialectRegistry &registry) {
  registry.insert<KilnDialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
}

void registerPipelinePasses() {
  registerAllPasses();
  registerKilnConversionPasses();
  registerKilnTransformsPasses();
}

} // namespace kiln

//===- Pipelines.cpp - Kiln's named compilation pipelines
//-------------------===//
//
// Each phase is written as the textual pipeline an engineer would pass to
// kiln-opt, so what kilnc runs can be replayed pass by pass. The passes come
// from upstream MLIR except kiln-lower-to-linalg.
//
//===----------------------------------------------------------------------===//

#include "kiln/Pipelines/Pipelines.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace kiln {

std::optional<Phase> parsePhase(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("kiln", Phase::Kiln)
      .Case("graph", Phase::Graph)
      .Case("linalg", Phase::Linalg)
      .Case("gpu", Phase::Gpu)
      .Case("llvm", Phase::Llvm)
      .Case("ptx", Phase::Ptx)
      .Default(std::nullopt);
}

llvm::StringRef phaseName(Phase phase) {
  switch (phase) {
  case Phase::Kiln:
    return "kiln";
  case Phase::Graph:
    return "graph";
  case Phase::Linalg:
    // tuneOptionsFor: kilnc --tune and --tune-cache.
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

int64_t smCountFor(llvm::StringRef chip) {
  // The GPUs of runtime/targets/gpus.ini: H200 (sm_90), A100 (sm_80).
  return chip == "sm_80" ? 108 : 132;
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

namespace {
/// The textual pipeline of one phase.
/// kiln-select-contraction-kernels' tune options, when they are not the defaults
/// (paths quoted: they may hold spaces).
std::string tuneOptionsFor(const PipelineOptions &options) {
  std::string s;
  if (options.tune)
    s += llvm::formatv(" tune=true tune-device={0} tune-max-candidates={1} "
                       "tune-worker=\"{2}\"",
                       options.tuneDevice, options.tuneMaxCandidates,
                       options.tuneWorker)
             .str();
  if (!options.tuneCache.empty())
    s += " tune-cache=\"" + options.tuneCache + "\"";
  if (!options.tuneExport.empty())
    s += " tune-export=\"" + options.tuneExport + "\"";
  if (!options.tuneImport.empty())
    s += " tune-import=\"" + options.tuneImport + "\"";
  return s;
}

std::string phasePipeline(Phase phase, const PipelineOptions &options) {
  switch (phase) {
  case Phase::Kiln:
    // The importer already folds as it builds; ONNX Gradient nodes become
    // backward ops (a no-op without them).
    return "func.func(kiln-expand-gradients)";
  case Phase::Graph:
    return llvm::formatv(
        // kiln-assign-layout and kiln-lower-precision are module passes:
        // they add transposed and converted weights. Convolutions run on
        // tensor cores (auto layout: NHWC) when kiln-match-contractions
        // turns their regions into template kernels.
        "kiln-assign-layout{{layout={0} precision={1} "
        "tensor-core-convs={5}}, "
        "kiln-lower-precision{{precision={1}{2} f32-head-layers={4} "
        "residual-precision={6}}{3}",
        options.layout, options.precision,
        options.ioPrecision.empty() ? "" : " io-precision=" + options.ioPrecision,
        options.fuse ? std::string(", func.func(kiln-fuse{attention=") +
                           (options.contractionKernels && options.attentionKernels
                                ? "true"
                                : "false") +
                           "})"
                     : std::string(),
        options.f32HeadLayers,
        options.contractionKernels ? "true" : "false",
        options.residualPrecision);
  case Phase::Linalg:
    // Contraction regions get a template kernel config (selection), then
    // become those kernels (NVRTC); the other fusion regions become one
    // linalg.generic each right after lowering.
    return llvm::formatv("canonicalize, {0}func.func(kiln-lower-to-linalg, "
                         "kiln-collapse-fusions, canonicalize, cse)",
                         options.contractionKernels
                             ? "kiln-select-contraction-kernels{chip=" +
                                   options.chip + " wgmma=" +
                                   (options.wgmma ? "true" : "false") +
                                   " tma=" + (options.tma ? "true" : "false") +
                                   " check-nvrtc=true" +
                                   tuneOptionsFor(options) +
                                   "}, kiln-match-contractions{chip=" +
                                   options.chip + "}, "
                             : std::string());
  case Phase::Gpu:
    // Function results become out-parameters: the runtime owns every buffer.
    // Each linalg op becomes one kernel (kiln-select-generic-kernels picks
    // its shape, kiln-map-to-gpu follows).
    return llvm::formatv(
               "kiln-materialize-weights, func.func(kiln-distinct-results), "
               "one-shot-bufferize{{bufferize-function-boundaries "
               "function-boundary-type-conversion=identity-layout-map}, "
               "buffer-results-to-out-params{{modify-public-functions "
               "hoist-static-allocs add-result-attr}, "
               "func.func(linalg-generalize-named-ops, "
               "kiln-select-generic-kernels{{sm-count={0} vectorize={1} "
               "row-kernels={2} tiled-transpose={3} reduction-kernels={4}}, "
               "kiln-map-to-gpu{{sm-count={0}}, "
               "canonicalize, "
               "gpu-launch-sink-index-computations), "
               "kiln-lower-kernel-calls, "
               "gpu-kernel-outlining, kiln-name-kernels, "
               "kiln-align-kernel-args, canonicalize, cse",
               smCountFor(options.chip), options.vectorize ? "true" : "false",
               options.rowKernels ? "true" : "false",
               options.tiledTranspose ? "true" : "false",
               options.reductionKernels ? "true" : "false")
        .str();
  case Phase::Llvm:
    // Kernels take bare pointers: with a static memory plan the runtime
    // passes one address per buffer.
    return llvm::formatv(
        "nvvm-attach-target{{chip={0} features={1} O=3{2}}, "
        "gpu.module(kiln-contract-float-ops, lower-affine, convert-scf-to-cf, "
        "expand-strided-metadata, "
        "convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=true}, "
        "canonicalize, cse, reconcile-unrealized-casts)",
        options.chip, *ptxFeaturesFor(options.chip),
        options.libdevicePath.empty() ? "" : " l=" + options.libdevicePath);
  case Phase::Ptx:
    return "gpu-module-to-binary{format=isa}";
  }
  llvm_unreachable("unknown phase");
}
} // namespace

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
  pm.addPass(createAutodiffPass(autodiff));
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

LogicalResult addPhase(OpPassManager &pm, Phase phase,
                       const PipelineOptions &options) {
  if (!ptxFeaturesFor(options.chip))
    return failure();
  return parsePassPipeline(phasePipeline(phase, options), pm, llvm::errs());
}

LogicalResult buildPipelineUpTo(OpPassManager &pm, Phase last,
                                const PipelineOptions &options) {
  for (Phase phase :
       {Phase::Kiln, Phase::Graph, Phase::Linalg, Phase::Gpu, Phase::Llvm, Phase::Ptx}) {
    if (failed(addPhase(pm, phase, options)))
      return failure();
    if (phase == last)
      break;
  }
  return success();
}

LogicalResult addTrainingStepPasses(OpPassManager &pm,
                                    llvm::StringRef optimizerOptions) {
  return parsePassPipeline(("kiln-optimizer{" + optimizerOptions + "}").str(),
                           pm, llvm::errs());
}

namespace {
/// Whether a kernel reads and/or writes through `buffer` (or views of it).
void classifyAccess(Value buffer, bool &read, bool &written) {
  for (Operation *user : buffer.getUsers()) {
    if (isa<memref::LoadOp, vector::LoadOp>(user)) {
      read = true;
    } else if (auto store = dyn_cast<memref::StoreOp>(user)) {
      written |= store.getMemRef() == buffer;
    } else if (auto store = dyn_cast<vector::StoreOp>(user)) {
      written |= store.getBase() == buffer;
    } else if (isa<ViewLikeOpInterface>(user)) {
      for (Value view : user->getResults())
        classifyAccess(view, read, written);
    } else {
      read = written = true; // Unknown access: count both.
    }
  }
}
/// The constant part of a loop bound: the value itself, or c in x + c
/// (a thread-distributed loop starts at thread_id + c); 0 otherwise.
std::optional<int64_t> constantPart(Value value, bool requireConstant) {
  if (auto c = getConstantIntValue(value))
    return *c;
  if (requireConstant)
    return std::nullopt;
  if (auto add = value.getDefiningOp<arith::AddIOp>()) {
    if (auto c = getConstantIntValue(add.getRhs()))
      return *c;
    if (auto c = getConstantIntValue(add.getLhs()))
      return *c;
  }
  return 0;
}

/// Floating-point operations one thread executes in `block`, on average.
/// A loop runs (ub - lb) / step times; a lower bound that depends on the
/// thread (a block-strided loop) counts its constant part only, which gives
/// the block's total spread over its threads.
double flopsPerThread(Block &block) {
  double flops = 0;
  for (Operation &op : block) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> lb = constantPart(loop.getLowerBound(), false);
      std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
      std::optional<int64_t> step = getConstantIntValue(loop.getStep());
      double trips = 1;
      if (lb && ub && step && *step > 0)
        trips = std::max<double>(0, double(*ub - *lb) / double(*step));
      flops += trips * flopsPerThread(*loop.getBody());
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      double thenFlops = flopsPerThread(branch.getThenRegion().front());
      double elseFlops = branch.getElseRegion().empty()
                             ? 0
                             : flopsPerThread(branch.getElseRegion().front());
      flops += std::max(thenFlops, elseFlops);
      continue;
    }
    for (Region &region : op.getRegions())
      for (Block &nested : region)
        flops += flopsPerThread(nested);
    if (op.getNumResults() != 1 ||
        !isa<FloatType>(getElementTypeOrSelf(op.getResult(0).getType())))
      continue;
    if (isa<math::FmaOp>(op))
      flops += 2;
    else if (isa<gpu::AllReduceOp>(op))
      flops += 1; // block - 1 adds per block, about one per thread
    else if (isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) &&
             !isa<arith::ConstantOp, arith::ExtFOp, arith::TruncFOp,
                  arith::SIToFPOp, arith::UIToFPOp, arith::BitcastOp,
                  arith::SelectOp>(op))
      flops += 1;
  }
  return flops;
}

/// Threads the launch runs: its constant grid x block.
uint64_t threadsOf(gpu::LaunchFuncOp launch) {
  uint64_t threads = 1;
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  for (Value size : {grid.x, grid.y, grid.z, block.x, block.y, block.z}) {
    std::optional<int64_t> value = getConstantIntValue(size);
    if (!value || *value <= 0)
      return 0;
    threads *= uint64_t(*value);
  }
  return threads;
}

/// "bf16" for BF16Type etc. (the runtime's dtype names).
std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Appends `type` to `list` unless it is there.
void addType(SmallVectorImpl<std::string> &list, Type type) {
  std::string name = typeName(type);
  if (!llvm::is_contained(list, name))
    list.push_back(name);
}

/// KernelLaunchStats::precision from the float types read, written and
/// computed with (empty `computed`: a precompiled kernel).
std::string describePrecision(ArrayRef<std::string> read,
                              ArrayRef<std::string> written,
                              ArrayRef<std::string> computed) {
  if (read.empty() && written.empty() && computed.empty())
    return "int";
  std::string io = llvm::join(read, ",");
  if (!llvm::equal(read, written))
    io += "->" + llvm::join(written, ",");
  if (computed.empty() || llvm::equal(computed, read))
    return io;
  return io + " compute " + llvm::join(computed, ",");
}

/// The float types of a kernel body's arithmetic (arith/math results,
/// conversions excluded), in order of appearance.
void computeTypes(gpu::GPUFuncOp kernel, SmallVectorImpl<std::string> &types) {
  kernel.walk([&](Operation *op) {
    if (op->getNumResults() != 1 ||
        !isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        isa<arith::ConstantOp, arith::ExtFOp, arith::TruncFOp,
            arith::SIToFPOp, arith::UIToFPOp, arith::BitcastOp,
            arith::SelectOp>(op))
      return;
    Type type = getElementTypeOrSelf(op->getResult(0).getType());
    if (isa<FloatType>(type))
      addType(types, type);
  });
}

} // namespace

KernelStats estimateKernelStats(ModuleOp module) {
  KernelStats stats;
  module.walk([&](gpu::LaunchFuncOp launch) {
    ++stats.kernels;
    std::string config;
    if (Attribute attr = launch->getAttr("kiln.kernel"))
      llvm::raw_string_ostream(config) << attr;
    auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
        launch, launch.getKernel());
    if (!kernel) {
      // A precompiled kernel: kiln-lower-kernel-calls says which operands
      // it writes and how many FLOPs it does.
      KernelLaunchStats entry;
      entry.kernel = launch.getKernelName().str();
      entry.config = config;
      SmallVector<std::string> readTypes, writtenTypes;
      auto written = launch->getAttrOfType<DenseI32ArrayAttr>(
          "kiln.written_operands");
      for (auto [i, operand] : llvm::enumerate(launch.getKernelOperands())) {
        auto type = dyn_cast<MemRefType>(operand.getType());
        if (!type || !type.hasStaticShape())
          continue;
        uint64_t bytes = type.getNumElements() *
                         ((type.getElementTypeBitWidth() + 7) / 8);
        bool isWritten = written && llvm::is_contained(written.asArrayRef(),
                                                       static_cast<int32_t>(i));
        (isWritten ? entry.bytesWritten : entry.bytesRead) += bytes;
        if (isa<FloatType>(type.getElementType()))
          addType(isWritten ? writtenTypes : readTypes, type.getElementType());
      }
      entry.precision = describePrecision(readTypes, writtenTypes, {});
      if (auto flops = launch->getAttrOfType<IntegerAttr>("kiln.flops"))
        entry.flops = flops.getValue().getZExtValue();
      stats.bytesRead += entry.bytesRead;
      stats.bytesWritten += entry.bytesWritten;
      stats.flops += entry.flops;
      stats.launches.push_back(std::move(entry));
      return;
    }
    KernelLaunchStats entry;
    entry.kernel = kernel.getName().str();
    entry.config = config;
    SmallVector<std::string> readTypes, writtenTypes;
    for (BlockArgument arg : kernel.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape())
        continue;
      uint64_t bytes = type.getNumElements() *
                       ((type.getElementTypeBitWidth() + 7) / 8);
      bool read = false, written = false;
      classifyAccess(arg, read, written);
      entry.bytesRead += read ? bytes : 0;
      entry.bytesWritten += written ? bytes : 0;
      if (isa<FloatType>(type.getElementType())) {
        if (read)
          addType(readTypes, type.getElementType());
        if (written)
          addType(writtenTypes, type.getElementType());
      }
    }
    SmallVector<std::string> computed;
    computeTypes(kernel, computed);
    entry.precision = describePrecision(readTypes, writtenTypes, computed);
    if (!kernel.getBody().empty())
      entry.flops = static_cast<uint64_t>(
          std::llround(flopsPerThread(kernel.getBody().front()) *
                       double(threadsOf(launch))));
    stats.bytesRead += entry.bytesRead;
    stats.bytesWritten += entry.bytesWritten;
    stats.flops += entry.flops;
    stats.launches.push_back(std::move(entry));
  });
  return stats;
}

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

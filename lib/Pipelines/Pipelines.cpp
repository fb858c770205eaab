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

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

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

namespace {
/// The textual pipeline of one phase.
std::string phasePipeline(Phase phase, const PipelineOptions &options) {
  switch (phase) {
  case Phase::Kiln:
    // The importer already folds as it builds; --emit=kiln shows its output.
    return "";
  case Phase::Graph:
    return llvm::formatv(
        // kiln-assign-layout and kiln-lower-precision are module passes:
        // they add transposed and converted weights.
        "kiln-assign-layout{{layout={0} precision={1} "
        "tensor-core-convs=false}, "
        "kiln-lower-precision{{precision={1}{2} f32-head-layers={4}}{3}",
        options.layout, options.precision,
        options.ioPrecision.empty() ? "" : " io-precision=" + options.ioPrecision,
        options.fuse ? ", func.func(kiln-fuse)" : "", options.f32HeadLayers);
  case Phase::Linalg:
    // Fusion regions become one linalg.generic each right after lowering.
    return "canonicalize, func.func(kiln-lower-to-linalg, "
           "kiln-collapse-fusions, canonicalize, cse)";
  case Phase::Gpu:
    // Function results become out-parameters: the runtime owns every buffer.
    // Each linalg op becomes one kernel (kiln-map-to-gpu picks its shape).
    return "kiln-materialize-weights, func.func(kiln-distinct-results), "
           "one-shot-bufferize{bufferize-function-boundaries "
           "function-boundary-type-conversion=identity-layout-map}, "
           "buffer-results-to-out-params{modify-public-functions "
           "hoist-static-allocs add-result-attr}, "
           "func.func(linalg-generalize-named-ops, kiln-map-to-gpu, "
           "canonicalize, "
           "gpu-launch-sink-index-computations), "
           "kiln-lower-kernel-calls, "
           "gpu-kernel-outlining, kiln-name-kernels, canonicalize, cse";
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

namespace {
/// Whether a kernel reads and/or writes through `buffer` (or views of it).
void classifyAccess(Value buffer, bool &read, bool &written) {
  for (Operation *user : buffer.getUsers()) {
    if (isa<memref::LoadOp>(user)) {
      read = true;
    } else if (auto store = dyn_cast<memref::StoreOp>(user)) {
      written |= store.getMemRef() == buffer;
    } else if (isa<ViewLikeOpInterface>(user)) {
      for (Value view : user->getResults())
        classifyAccess(view, read, written);
    } else {
      read = written = true; // Unknown access: count both.
    }
  }
}
} // namespace

KernelStats estimateKernelStats(ModuleOp module) {
  KernelStats stats;
  module.walk([&](gpu::LaunchFuncOp launch) {
    ++stats.kernels;
    auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
        launch, launch.getKernel());
    if (!kernel)
      return;
    for (BlockArgument arg : kernel.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape())
        continue;
      uint64_t bytes = type.getNumElements() *
                       ((type.getElementTypeBitWidth() + 7) / 8);
      bool read = false, written = false;
      classifyAccess(arg, read, written);
      stats.bytesRead += read ? bytes : 0;
      stats.bytesWritten += written ? bytes : 0;
    }
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

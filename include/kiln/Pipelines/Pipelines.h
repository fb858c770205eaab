//===- Pipelines.h - Kiln's named compilation pipelines ---------*- C++ -*-===//
//
// The only place that knows pass order. A compile is a sequence of phases,
// each a C++ function that adds its passes, with their typed options, to a
// pass manager; the driver can stop after any of them (kilnc --emit=PHASE)
// and print it, and kilnc --print-pipeline prints each phase as the textual
// pipeline kiln-opt replays.
//
//   kiln    the kiln dialect as imported (folded during import)
//   graph   after layout, precision and fusion
//   linalg  linalg on tensors (kiln-lower-to-linalg), template kernels
//   gpu     buffers, gpu.launch_func on the host side, gpu.func kernels
//   llvm    kernels in the LLVM/NVVM dialects, target attached
//   ptx     kernels serialized to PTX (gpu.binary)
//
// Every option of PipelineOptions is declared once, in PipelineOptions.def.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_PIPELINES_H
#define KILN_PIPELINES_PIPELINES_H

#include "kiln/Dialect/Kiln/Transforms/AutodiffHook.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace kiln {

/// kiln-optimizer's options (kiln/Dialect/Kiln/Transforms/Passes.h).
struct OptimizerPassOptions;

/// kiln: the imported graph; graph: after the graph passes (layout,
/// precision, fusion); then the lowerings.
enum class Phase { Kiln, Graph, Linalg, Gpu, Llvm, Ptx };
/// Every phase, in order.
constexpr Phase kAllPhases[] = {Phase::Kiln, Phase::Graph, Phase::Linalg,
                                Phase::Gpu,  Phase::Llvm,  Phase::Ptx};
/// "kiln", "graph", ... (kilnc --emit's values, progress and timing names).
llvm::StringRef phaseName(Phase phase);

/// What the pipelines do, one field per option of PipelineOptions.def (the
/// defaults are kilnc's) plus where the tools are.
struct PipelineOptions {
#define KILN_PIPELINE_OPTION(FIELD, FLAG, TYPE, DEFAULT, GROUP, VALUES,       \
                             METAVAR, HELP)                                   \
  TYPE FIELD = DEFAULT;
#include "kiln/Pipelines/PipelineOptions.def"

  /// With `tune`: the kiln-tune-worker executable that times candidates.
  std::string tuneWorker;
  /// CUDA's libdevice bitcode, linked into kernels that call math functions
  /// (erf, exp, ...). Defaults to the toolkit found at build time.
  std::string libdevicePath = defaultLibdevicePath();

  static std::string defaultLibdevicePath();
};

/// Checks every option against its accepted values (PipelineOptions.def)
/// and their combinations; rewrites deprecated spellings, calling `warn`
/// with a message for each. Errors name the kilnc flag ("--precision 'x'
/// is not one of fp32, tf32, bf16, fp16").
llvm::Error
validatePipelineOptions(PipelineOptions &options,
                        const std::function<void(const llvm::Twine &)> &warn);

/// The PTX ISA version feature matching `chip` ("+ptx80"), or nullopt for a
/// chip Kiln does not generate code for.
std::optional<std::string> ptxFeaturesFor(llvm::StringRef chip);

/// Appends the passes of `phase` (alone) to `pm`, which runs on a module.
/// `options` must have passed validatePipelineOptions.
void addPhase(mlir::OpPassManager &pm, Phase phase,
              const PipelineOptions &options);

/// Appends every phase from `first` up to and including `last`.
void addPhases(mlir::OpPassManager &pm, Phase first, Phase last,
               const PipelineOptions &options);

/// What training differentiates: the loss and the weights that train
/// (kiln-autodiff's options, docs/passes.md).
struct TrainingGradientOptions {
  /// cross_entropy, nll, mse or l1, appended to the output `lossOn` (empty:
  /// the only output) against the labels argument `labels`
  /// (NAME:SHAPE:DTYPE). Or `lossOutput`: an output that is the loss.
  std::string loss;
  std::string lossOn;
  std::string labels;
  std::string lossOutput;
  /// Initializers whose name this regular expression matches in full stay
  /// fixed.
  std::string freeze;
  /// Recompute cheap activations in the backward pass instead of keeping
  /// them (kiln-autodiff's rematerialize).
  bool rematerialize = false;
  /// Replace @main by @train_grad (kilnc --gradients).
  bool gradientsAsMain = false;
  /// Seed the backward pass from a `kiln.loss_seed` argument (loss
  /// scaling; kiln-autodiff's loss-seed-argument).
  bool lossSeedArgument = false;
  /// kiln-augment's spec (kilnc --augment): crop, flip and normalise the
  /// first input in the training function; empty for none.
  std::string augment;
  /// Called by kiln-autodiff between the loss and the reverse sweep
  /// (AutodiffForwardHook; kilnc --train --dim inserts size masks there).
  AutodiffForwardHook forwardHook;
};

/// Appends the passes that add `func.func @train_grad` (loss and gradients,
/// attribute `kiln.gradients`) to a module as imported, before the graph
/// phase; `@main` stays unchanged unless `gradientsAsMain`.
void addTrainingGradientPasses(mlir::OpPassManager &pm,
                               const TrainingGradientOptions &options);

/// Training (kilnc --train), after the autodiff pipeline has added
/// @train_grad: kiln-optimizer, which turns @train_grad into @train_step
/// and @main into @eval. Each entry point then goes through the phases.
void addTrainingStepPasses(mlir::OpPassManager &pm,
                           const OptimizerPassOptions &options);

/// Registers what the pipelines need: dialects, bufferization and LLVM
/// translation interfaces, the NVVM target.
void registerPipelineDialects(mlir::DialectRegistry &registry);

/// Registers the passes the pipelines use, so textual pipelines parse
/// (kiln-opt, crash reproducers).
void registerPipelinePasses();

} // namespace kiln

#endif // KILN_PIPELINES_PIPELINES_H

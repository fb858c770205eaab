//===- Pipelines.h - Kiln's named compilation pipelines ---------*- C++ -*-===//
//
// The only place that knows pass order. A compile is a sequence of phases;
// the driver can stop after any of them (kilnc --emit=PHASE) and print it.
//
//   kiln    the kiln dialect as imported (folded during import)
//   linalg  linalg on tensors (kiln-lower-to-linalg)
//   gpu     buffers, gpu.launch_func on the host side, gpu.func kernels
//   llvm    kernels in the LLVM/NVVM dialects, target attached
//   ptx     kernels serialized to PTX (gpu.binary)
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_PIPELINES_H
#define KILN_PIPELINES_PIPELINES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class ModuleOp;
class OpPassManager;
} // namespace mlir

namespace kiln {

/// kiln: the imported graph; graph: after the graph passes (layout,
/// precision, fusion); then the lowerings.
enum class Phase { Kiln, Graph, Linalg, Gpu, Llvm, Ptx };

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
};

/// Appends the passes that add `func.func @train_grad` (loss and gradients,
/// attribute `kiln.gradients`) to a module as imported, before the graph
/// phase; `@main` stays unchanged unless `gradientsAsMain`.
void addTrainingGradientPasses(mlir::OpPassManager &pm,
                               const TrainingGradientOptions &options);

/// Parses a phase name ("kiln", "linalg", ...).
std::optional<Phase> parsePhase(llvm::StringRef name);
/// The name parsePhase reads.
llvm::StringRef phaseName(Phase phase);

struct PipelineOptions {
  /// GPU architecture: sm_80 or sm_90.
  std::string chip = "sm_90";
  /// CUDA's libdevice bitcode, linked into kernels that call math functions
  /// (erf, exp, ...). Defaults to the toolkit found at build time.
  std::string libdevicePath = defaultLibdevicePath();
  /// Graph passes (docs/passes.md): layout (nchw, nhwc, auto), precision of
  /// matmuls and convolutions (fp32, tf32, bf16, fp16), element type of the
  /// model's inputs and outputs (empty: as declared), and whether to fuse.
  std::string layout = "auto";
  std::string precision = "fp32";
  std::string ioPrecision;
  /// Contraction layers before the outputs that stay f32 (0: none).
  int64_t f32HeadLayers = 0;
  /// kiln-lower-precision's residual-precision: "f32" or "low".
  std::string residualPrecision = "f32";
  bool fuse = true;
  /// Matmul regions become tiled tensor-core / FFMA kernels from the CUDA
  /// C++ templates (kiln-match-contractions) instead of generic kernels.
  bool contractionKernels = true;
  /// With contractionKernels: attention (matmul -> softmax -> matmul) as one
  /// fused flash-attention kernel (kiln-fuse's rule 5).
  bool attentionKernels = true;
  /// kiln-map-to-gpu vectorises elementwise kernels (128-bit accesses).
  bool vectorize = true;
  /// With contractionKernels on sm_90: bf16/fp16 contractions on the wgmma
  /// kernels (mma.sync when false, or for a shape wgmma cannot do).
  bool wgmma = true;
  /// With wgmma: plain-GEMM operands through the TMA producer where the
  /// strides allow (the cp.async producer when false).
  bool tma = true;
  /// kiln-map-to-gpu maps fused row reductions to row kernels (a warp or a
  /// block per row, the row kept in registers).
  bool rowKernels = true;
  /// kiln-map-to-gpu's shared-memory tiled transposes, and its column and
  /// two-pass whole-tensor reductions.
  bool tiledTranspose = true;
  bool reductionKernels = true;
  /// Contraction configs (kiln-match-contractions' tune options): time
  /// candidates in `tuneWorker` on `tuneDevice` (cuda, emu), read and
  /// update the cache `tuneCache` (without `tune`: only read it).
  bool tune = false;
  std::string tuneDevice = "cuda";
  std::string tuneCache;
  unsigned tuneMaxCandidates = 8;
  std::string tuneWorker;
  /// Export the tuning jobs instead of running them / import ran ones.
  std::string tuneExport;
  std::string tuneImport;

  static std::string defaultLibdevicePath();
};

/// The PTX ISA version feature matching `chip` ("+ptx80"), or nullopt for an
/// unsupported chip.
std::optional<std::string> ptxFeaturesFor(llvm::StringRef chip);

/// Streaming multiprocessors of the GPU a chip names (runtime/targets/
/// gpus.ini's default for its sm): sizes kiln-map-to-gpu's grid-stride grids.
int64_t smCountFor(llvm::StringRef chip);

/// Appends the passes of `phase` (alone) to `pm`, which runs on a module.
llvm::LogicalResult addPhase(mlir::OpPassManager &pm, Phase phase,
                             const PipelineOptions &options);

/// Appends every phase after `Kiln` up to and including `last`.
llvm::LogicalResult buildPipelineUpTo(mlir::OpPassManager &pm, Phase last,
                                      const PipelineOptions &options);

/// Training (kilnc --train), after the autodiff pipeline has added
/// @train_grad: kiln-optimizer with `optimizerOptions` (its textual options,
/// "optimizer=adamw lr=0.001"), which turns @train_grad into @train_step and
/// @main into @eval. Each entry point then goes through buildPipelineUpTo.
llvm::LogicalResult addTrainingStepPasses(mlir::OpPassManager &pm,
                                          llvm::StringRef optimizerOptions);

/// Registers what the pipelines need: dialects, bufferization and LLVM
/// translation interfaces, the NVVM target.
/// What the kernels of a module do, read after the gpu phase.
/// One launch's share of KernelStats.
struct KernelLaunchStats {
  /// The gpu.func's name (the artifact's kernel name).
  std::string kernel;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  /// Floating-point operations every thread of the grid executes, as the
  /// kernel is written: arith/math float ops (fma 2) times the trip counts
  /// of their loops. Guarded code counts as run by every thread (an upper
  /// bound); loops with a non-constant bound count once.
  uint64_t flops = 0;
  /// The precision it runs in: the float element types of the buffers it
  /// reads and writes ("bf16->f32", or "f32" when they agree) and, for a
  /// generated kernel, of the float arithmetic in its body ("compute f32");
  /// "int" when it touches no float.
  std::string precision;
  /// The kernel's `kiln.kernel` decision as IR text
  /// ("#kiln.generic_kernel<vectorized, ...>"); empty when none.
  std::string config;
};

struct KernelStats {
  size_t kernels = 0;
  /// Estimated traffic: each buffer a kernel reads (writes) counts once per
  /// launch, in full, as if every kernel had an ideal cache.
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  uint64_t flops = 0;
  /// Per launch, in launch order.
  std::vector<KernelLaunchStats> launches;
};

/// Counts the launches of `module` (after the gpu phase) and their traffic.
KernelStats estimateKernelStats(mlir::ModuleOp module);

void registerPipelineDialects(mlir::DialectRegistry &registry);

/// Registers the passes the pipelines use, so textual pipelines parse.
void registerPipelinePasses();

} // namespace kiln

#endif // KILN_PIPELINES_PIPELINES_H

//===- Compiler.h - Compile a model: import, phases, artifact ---*- C++ -*-===//
//
// The compile library that kilnc (and anything else that compiles) calls:
//
//   compileModel(options, context, hooks) -> CompileResult or CompileError
//
// It imports the model (ONNX, or kiln IR in a .mlir file), differentiates it
// when training, runs the phases of Pipelines.h one pass manager per phase
// (so progress and timing name the phase), recompiles a copy without
// fusion for the statistics, and packs the artifact. Training artifacts
// (train_step and eval) go through the same phases, hooks and timing. The
// library prints nothing: warnings, progress and timing reach the caller
// through CompileHooks, and errors are one-line CompileErrors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_COMPILER_H
#define KILN_COMPILER_COMPILER_H

#include "kiln/Compiler/Quantization.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Frontend/ONNX/Importer.h"
#include "kiln/Pipelines/KernelStats.h"
#include "kiln/Pipelines/Pipelines.h"
#include "kiln/Target/CUDA/ArtifactBuilder.h"
#include "kiln/runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
class PassManager;
class TimingScope;
} // namespace mlir

namespace kiln {

/// Differentiation and training (kilnc --gradients, --train; docs/runtime.md
/// "Training").
struct TrainingOptions {
  /// --gradients: the loss and its gradients replace @main (an inference
  /// artifact whose outputs are the loss and one gradient per weight).
  bool gradients = false;
  /// --train: an artifact with train_step and eval and persistent state.
  bool train = false;
  /// The loss, labels, frozen weights, rematerialisation and augmentation
  /// (lossSeedArgument and gradientsAsMain are set by the library).
  TrainingGradientOptions gradient;
  /// --optimizer: NAME[:KEY=VALUE,...], as parseOptimizerSpec reads it.
  std::string optimizer = "sgd";
  double gradClip = 0;
  /// --loss-scale: dynamic, static:S or none; empty: dynamic with
  /// --precision=fp16, else none.
  std::string lossScale;
  double lossScaleInit = 65536;
  int64_t lossScaleGrowthInterval = 2000;
  /// --seed: the first value of the RNG key dropout draws from.
  uint64_t seed = 0;
  /// --data-parallel: split the update into @train_update and average the
  /// gradients across ranks in between, in buckets of --bucket-mb MiB
  /// (docs/runtime.md "Data-parallel training").
  bool dataParallel = false;
  double bucketMb = 25;
  /// --allreduce-dtype: fp32, bf16/fp16 on the wire (f32 sums, error
  /// feedback), or powersgd:R (rank-R factors of the weight matrices).
  std::string allreduceDtype = "fp32";
  /// --shard-optimizer=N: ZeRO stage 1 over N ranks (0: off; negative: the
  /// flag was given a value below 1, an error).
  int64_t shardOptimizer = 0;

  /// Whether the compile differentiates the model at all.
  bool differentiates() const { return gradients || train; }
};

/// Everything one compile needs.
struct CompileOptions {
  /// The model: an ONNX file, or kiln IR (.mlir) as --emit=kiln prints it.
  std::string input;
  /// An ONNX model's bytes, when the caller holds them (the ONNX fuzz
  /// target): compiled instead of reading `input`, which then only names the
  /// model in errors and locates its external data. Not owned: the bytes
  /// must outlive compileModel.
  std::optional<llvm::StringRef> inputBytes;
  /// --shape: fixes input shapes (needed for unnamed dynamic dims). A dim
  /// given as a name (--shape x=Nx3) is symbolic: it is in `shapeDimNames`
  /// (empty strings for the numeric dims) and its entry in `shapes` is -1.
  llvm::StringMap<llvm::SmallVector<int64_t>> shapes;
  llvm::StringMap<llvm::SmallVector<std::string>> shapeDimNames;
  /// --dim NAME=MIN..MAX[:OPT]: the range of a symbolic dimension.
  llvm::StringMap<onnx_frontend::DimRange> dims;
  /// --sequence NAME=N: a sequence graph input's length (its tensors are
  /// inputs NAME[0] ... NAME[N-1]); --absent NAME: an optional graph input
  /// compiled absent (ImportOptions).
  llvm::StringMap<int64_t> sequenceLengths;
  llvm::StringSet<> absentInputs;
  /// Stop after this phase and return its IR; nullopt: compile through ptx
  /// and pack the artifact.
  std::optional<Phase> stopAfter;
  /// --stats: also compile a copy without fusion to the gpu phase, and
  /// compile all the way to the artifact even when stopping earlier.
  bool stats = false;
  /// --strip-weights: leave ONNX initializers' bytes out of the artifact.
  bool stripWeights = false;
  /// --kernel-cache: where NVRTC's PTX and ptxas's cubins are kept between
  /// compiles (KernelCache.h): a directory, "off", or empty for
  /// $KILN_KERNEL_CACHE, else the user's cache directory.
  std::string kernelCache;
  /// --kernel-cache-size: the cache's bound; least recently used go first.
  uint64_t kernelCacheBytes = uint64_t(1024) << 20;
  /// --max-constant-bytes: the most bytes of constants (weights and folded
  /// tensors) the artifact may hold; more is a user error before packing.
  /// 8 GiB by default: compiling, packing and loading each hold the
  /// weights in host memory (the flag raises it); the ONNX fuzz target sets
  /// 256 MiB.
  uint64_t maxConstantBytes = uint64_t(8) << 30;
  PipelineOptions pipeline;
  TrainingOptions training;
  /// --precision=int8 and its calibration (Quantization.h).
  QuantizationOptions quantization;
  /// Recorded in the artifact, for reproducing the build.
  std::string commandLine;
};

/// How the caller watches a compile. Every member may be empty.
struct CompileHooks {
  /// A new phase starts: "import", "graph", "unfused gpu",
  /// "train_step llvm", "artifact (ptxas)".
  std::function<void(llvm::StringRef phase)> phaseStarted;
  /// ptxas assembled `done` of `total` kernels.
  std::function<void(size_t done, size_t total)> kernelAssembled;
  /// A compiler warning (a tune cache ignored, a deprecated option).
  std::function<void(const llvm::Twine &message)> warning;
  /// Called with each pass manager before it runs, after the library added
  /// its passes: kilnc adds progress instrumentation and MLIR's --mlir-*
  /// options (printing IR, crash reproducers) here. A failure stops the
  /// compile with an error.
  std::function<mlir::LogicalResult(mlir::PassManager &pm)> configure;
  /// When set, import, each phase and packing are timed under it.
  mlir::TimingScope *timing = nullptr;
};

/// What --stats reports, besides the artifact's own statistics.
struct CompileStats {
  /// The kernels after the gpu phase, fused (as compiled) and without
  /// fusion.
  KernelStats fused, unfused;
  ArtifactStats artifact;
  /// The kernel cache's directory; empty when it is off.
  std::string kernelCachePath;
  /// kiln-match-contractions' report: one line per matmul region (absent
  /// when the pass did not run).
  std::optional<std::vector<std::string>> contractionReport;
  /// kiln-lower-recurrence's report: one line per persistent recurrence
  /// kernel (an RNN/GRU/LSTM direction's whole time loop in one launch).
  std::vector<std::string> recurrenceReport;
  /// kiln-fuse-quantized's report: one line per quantized chain that stays
  /// on the exact fallback, and why.
  std::vector<std::string> quantizedFallbacks;
  /// --precision=int8|fp8: one line per node quantizeModel quantized (its
  /// activations' calibrated ranges and thresholds) or kept in float.
  std::vector<std::string> quantization;
  /// "int8" or "fp8": the format of those nodes.
  std::string quantizationFormat;
  /// kiln-autodiff's rematerialisation report, when differentiating.
  struct Remat {
    uint64_t kept = 0, keptBytes = 0, recomputed = 0, recomputedBytes = 0;
  };
  std::optional<Remat> remat;
  /// The artifact's symbolic dims (kilnc --dim): ranges, and whether each
  /// is separable (SeparableDims.h) and why not.
  std::vector<runtime::SymbolicDim> symbolicDims;
  /// Per symbolic dim: how many launches' grids follow it (launch-scales
  /// records), and the kernels of the launches that run the compiled grid.
  struct ScaledLaunches {
    size_t scaled = 0, total = 0;
    std::vector<std::string> fixed;
    /// Masked softmaxes (size masks) and whether valid slices read padded
    /// ones, which keeps every launch at its compiled grid.
    std::vector<std::string> maskedNodes;
    bool readsPadding = false;
    /// Size buckets (kilnc --size-buckets): each guarded range of the
    /// symbol and the kernels that run there, in launch order; a range
    /// past the maximum never runs.
    std::vector<
        std::pair<std::pair<int64_t, int64_t>, std::vector<std::string>>>
        buckets;
  };
  std::vector<ScaledLaunches> scaledLaunches;
  /// Format 1.9: the steps on STRING tensors that run on the host, before
  /// the first launch or after the last (kiln/runtime/HostSteps.h).
  std::vector<runtime::HostStep> hostSteps;
  /// Format 1.12: one line per device-side loop (a While region of the
  /// launch list) and the launches it repeats.
  std::vector<std::string> deviceLoops;
};

struct CompileResult {
  /// The IR after the last phase run (stopAfter, or ptx), or after
  /// kiln-optimizer for --train with stopAfter == Phase::Kiln.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The artifact, unless stopAfter stopped before it.
  std::optional<runtime::Artifact> artifact;
  /// With CompileOptions::stats.
  std::optional<CompileStats> stats;
};

/// A compile's failure: one line naming the file and what is wrong, and
/// whose fault it is (the input's and options', or Kiln's: ptxas rejecting
/// generated PTX, an artifact that does not verify).
class CompileError : public llvm::ErrorInfo<CompileError> {
public:
  enum class Kind { User, Internal };
  CompileError(Kind kind, std::string message)
      : kind(kind), message(std::move(message)) {}
  Kind getKind() const { return kind; }
  const std::string &getMessage() const { return message; }
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  static char ID;

private:
  Kind kind;
  std::string message;
};

/// Checks the options a compile takes before any work: the pipeline's
/// (validatePipelineOptions, deprecated spellings rewritten with a
/// warning), the training options and their combinations, that the tune
/// cache can be written. Errors are CompileError::Kind::User.
llvm::Error validateCompileOptions(CompileOptions &options,
                                   const CompileHooks &hooks);

/// Compiles `options.input` in `context` (whose registry must hold
/// registerPipelineDialects). Validates the options first.
llvm::Expected<CompileResult> compileModel(CompileOptions options,
                                           mlir::MLIRContext &context,
                                           const CompileHooks &hooks = {});

/// kiln-optimizer's options from --optimizer=NAME[:KEY=VALUE,...] (keys may
/// use '_' or '-'), --grad-clip, --loss-scale and --seed. Errors name the
/// flag and the bad key or value.
llvm::Expected<OptimizerPassOptions>
optimizerOptionsFor(const TrainingOptions &training,
                    llvm::StringRef precision);

} // namespace kiln

#endif // KILN_COMPILER_COMPILER_H

//===- RegionMatcher.h - Fusion regions to template kernels -----*- C++ -*-===//
//
// The state kept while fusion regions are matched to template kernels,
// shared by the anchors: matmuls (MatchContractions.cpp), NHWC convolutions
// (MatchConvolutions.cpp, MatchDepthwise.cpp) and attention
// (MatchAttention.cpp). Each finds the region's elementwise epilogue and the
// problem its kernel computes. The matcher runs twice:
//   - Mode::Select (kiln-select-contraction-kernels) stops once the
//     problem is known: it picks the config (tune cache, tuning or the
//     heuristic) and attaches it to the region as a typed attribute
//     (`kiln.kernel`, KilnKernelAttrs.td), or the reason the region keeps
//     a generic kernel (`kiln.generic_reason`); the IR is otherwise left as
//     it was (split-off producers are rolled back);
//   - Mode::Lower (kiln-match-contractions) follows the attribute: it splits
//     off the producers the kernel does not read in place, compiles the
//     kernel and calls it with kiln.call_kernel. A config it cannot follow
//     is an error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_REGIONMATCHER_H
#define KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_REGIONMATCHER_H

#include "EpilogueEmitter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDA/ContractionKernels.h"
#include "kiln/Target/CUDA/ContractionTuning.h"
#include "kiln/Target/CUDA/TemplateEmission.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {
struct QuantizedChain;
} // namespace kiln

namespace kiln::templates {

/// Whether `v` is computed inside `fusion`.
bool inRegion(mlir::Value v, kiln::FusionOp fusion);

/// The buffer a value of the region reads without computing: a region input
/// through reshapes (in the region or before it). Null when the value is
/// computed in the region or is a view (a split's or slice's part).
mlir::Value contiguousSource(mlir::Value v, kiln::FusionOp fusion);

/// The result a region's kernel stores: the only one, or the one every
/// other result is computed from without the anchor (an f32 value and its
/// bf16 copy, a matmul's value and its relu); nullopt when there is none.
/// Matcher::replaceResults moves the others into a region after the kernel.
std::optional<unsigned> storedResult(kiln::FusionOp fusion,
                                     mlir::Operation *anchor);

/// A 2-D NHWC convolution's geometry (shapes, strides, pads, dilation,
/// groups, output size); the dtypes are left to the caller.
contraction::ConvProblem convProblemOf(kiln::ConvOp conv);
/// Why the convolution kernels cannot take `conv` with these operand and
/// result types (not 2-D, not NHWC, a dynamic shape); empty when they can.
std::string unsupportedConvolution(kiln::ConvOp conv,
                                   mlir::RankedTensorType input,
                                   mlir::RankedTensorType filter,
                                   mlir::RankedTensorType result);

/// The row-major bytes of a weight global's value, if they are known.
std::optional<std::vector<char>>
globalBytes(mlir::ml_program::GlobalOp global);

/// The weight global `filter` loads, if it is one.
mlir::ml_program::GlobalOp filterGlobal(mlir::Value filter,
                                        mlir::ModuleOp module);

/// Sees through tf32 rounding pairs (the kernel rounds its operands).
mlir::Value peelTf32Rounding(mlir::Value v);

/// The kernels' dtype for an f32, bf16 or f16 (tensor) type.
std::optional<contraction::DType> kernelDType(mlir::Type type);

/// A contraction operand as the kernel reads it: the tensor whose buffer
/// holds it, and whether its last two dimensions are swapped in that buffer.
struct OperandView {
  mlir::Value buffer;
  contraction::Layout layout = contraction::Layout::RowMajor;
};

class Matcher {
public:
  enum class Mode { Select, Lower };

  /// `tuner` picks each problem's config (cache, tuning or heuristic) in
  /// Mode::Select; Mode::Lower takes none.
  Matcher(mlir::ModuleOp module, unsigned smVersion, llvm::StringRef chip,
          Mode mode, tuning::Tuner *tuner = nullptr)
      : module(module), smVersion(smVersion), chip(chip.str()), mode(mode),
        tuner(tuner) {}

  /// Select: attaches the region's config, or the reason it has none.
  /// Lower: replaces a region that has a config by its template kernels;
  /// false (with an error at the region) when the config cannot be
  /// followed.
  bool run(kiln::FusionOp fusion);

  /// Erases the weight globals a rewrite replaced and nothing reads.
  void eraseUnreadWeights();

  /// Select: attaches the attention kernel's config to an `attention`
  /// region; false with the reason when it does not fit, for the caller to
  /// split it (splitAttention) and select the parts (the reason is then
  /// `attentionSplitNote`).
  bool selectAttention(kiln::FusionOp fusion);
  std::string attentionSplitNote;

  /// Lower: the report lines (kiln.contraction_report) of regions the
  /// selection kept generic, in region order with the kernels'.
  void reportGeneric(kiln::FusionOp fusion);

  /// One line per contraction region, in region order: its kernel and
  /// config, or why it keeps a generic kernel (kilnc --stats prints them).
  llvm::SmallVector<std::string> report;
  /// An error that fails the pass (tuning without a GPU, no worker).
  std::string fatalError;
  /// Select: on sm_90, attention regions try the wgmma kernel (the pass's
  /// `wgmma`).
  bool wgmma = false;

  /// Size buckets (kilnc --size-buckets, docs/runtime.md "Size buckets").
  /// The module's one symbolic dim (kiln.dim_ranges), if it has exactly one.
  struct SymbolRange {
    std::string name;
    int64_t min = 0, max = 0, opt = 0;
  };
  std::optional<SymbolRange> singleRange() const;
  /// Select: the upper ends of every bucket but the last, within the
  /// symbol's range (empty: no buckets). Set by the selection pass.
  llvm::SmallVector<int64_t> sizeSplits;

private:
  // Matmul regions (MatchContractions.cpp).
  mlir::LogicalResult rewriteMatmul(kiln::FusionOp fusion, std::string &why);
  mlir::FailureOr<OperandView> operandView(mlir::Value v,
                                           kiln::FusionOp fusion);
  /// A row-major f32 (or 8-bit integer) `[K][N]` weight as `[N][K]`
  /// (tf32 wgmma and the int8 kernel read B K-major): a load of a new
  /// weight global, the transpose recorded in its origin. Null when
  /// `weight` is not a weight global whose bytes are known.
  mlir::Value kMajorWeight(mlir::Value weight, int64_t k, int64_t n,
                           kiln::FusionOp fusion, bool dryRun);

  // Attention regions (MatchAttention.cpp).
  /// Q, K (as Kt) or V as the kernel reads it.
  struct AttentionOperand {
    mlir::Value buffer;
    int64_t outerStride = 0, headStride = 0, rowStride = 0, headDiv = 1;
    /// Elements from the buffer's start (a slice of a fused projection).
    int64_t offset = 0;
    double scale = 1.0;
  };
  mlir::FailureOr<AttentionOperand>
  attentionOperand(mlir::Value v, kiln::FusionOp fusion, bool transposed,
                   bool scales, llvm::ArrayRef<int64_t> resultShape);
  mlir::LogicalResult rewriteAttention(kiln::FusionOp fusion,
                                       std::string &why);
  /// One kiln.call_kernel of `kernel` (a gpu.binary of its PTX): each
  /// pointer parameter but "C" from `pointers`, "C" the new output.
  mlir::Value
  buildKernelCall(kiln::FusionOp fusion,
                  const contraction::GemmKernel &kernel,
                  llvm::ArrayRef<std::pair<std::string, mlir::Value>> pointers,
                  mlir::RankedTensorType resultType, mlir::Attribute config,
                  int64_t flops);

  // Convolution regions (MatchConvolutions.cpp).
  mlir::LogicalResult rewriteConvolution(kiln::FusionOp fusion,
                                         std::string &why);
  // Quantized matmul regions (MatchQuantized.cpp): kiln-fuse-quantized's
  // chains on the int8 kernels (Family::MmaS8; WgmmaS8 first on sm_90),
  // float8 ones on the fp8 kernels (Family::MmaF8; WgmmaF8 first on sm_90).
  mlir::LogicalResult rewriteQuantizedMatmul(kiln::FusionOp fusion,
                                             std::string &why);
  // Quantized NHWC convolution regions (MatchQuantized.cpp): the same
  // kernel as an implicit GEMM.
  mlir::LogicalResult rewriteQuantizedConv(kiln::FusionOp fusion,
                                           std::string &why);
  /// A quantized chain's residual block's R as the kernel reads it (C's
  /// layout): in place, or copied; null without a block.
  mlir::Value residualSource(const QuantizedChain &chain,
                             kiln::FusionOp fusion);
  /// The filter `[O][KH][KW][C/g]` with its channels zero-padded to
  /// `paddedChannels`: a load of a new weight global holding the padded
  /// data, with the pad recorded in its origin. Null when the filter is not
  /// a weight global whose bytes are known. With `view`, the global's bytes
  /// are read as that shape (the same element count; recorded as a
  /// `reshape` step before the pad).
  mlir::Value paddedFilter(mlir::Value filter, int64_t paddedChannels,
                           kiln::FusionOp fusion, bool dryRun,
                           mlir::RankedTensorType view = {});
  /// A depthwise convolution region (MatchDepthwise.cpp): the CUDA-core
  /// kernel of DepthwiseKernels.h, the filter reordered to [KH][KW][O].
  mlir::LogicalResult rewriteDepthwise(kiln::FusionOp fusion,
                                       kiln::ConvOp conv, std::string &why);
  /// The filter `[O][KH][KW][1]` as `[KH][KW][O][1]`: a load of a new
  /// weight global, the transpose recorded in its origin. Null when the
  /// filter is not a weight global whose bytes are known.
  mlir::Value depthwiseFilter(mlir::Value filter, kiln::FusionOp fusion,
                              bool dryRun);
  /// Replaces the results of `fusion` by `stored` (the kernel's output, for
  /// result `storedIndex`) and, for the others, by a new region after the
  /// kernel computing them from it.
  /// With `auxIndex`, the results equal to that one are `aux` (the
  /// kernel's second output).
  void replaceResults(kiln::FusionOp fusion, unsigned storedIndex,
                      mlir::Value stored,
                      std::optional<unsigned> auxIndex = std::nullopt,
                      mlir::Value aux = {});

  // Shared (MatchContractions.cpp).
  /// `v`, computed in `fusion` without its anchor, as the result of a new
  /// region placed before it (which kiln-collapse-fusions makes a kernel).
  mlir::Value materialize(mlir::Value v, kiln::FusionOp fusion);
  /// What an epilogue reads for `v`, computed in `fusion` without its
  /// anchor: the narrow input of a lossless widening cast (read as float),
  /// else `v` materialised.
  mlir::Value widenedInput(mlir::Value v, kiln::FusionOp fusion);
  /// The ops of the region that depend on `anchor`, each elementwise on
  /// its result's shape, in block order; fails when one is not, or when a
  /// result of the region does not depend on the anchor.
  mlir::LogicalResult
  collectEpilogue(kiln::FusionOp fusion, mlir::Operation *anchor,
                  llvm::SetVector<mlir::Operation *> &epilogue,
                  std::string &why);
  /// The result the region's kernel stores (storedResult) and, in
  /// `epilogue`, the ops of collectEpilogue that it needs; nullopt with
  /// `why` set when the region has no such result. Several results (a
  /// conv's f32 value and its bf16 copy, a matmul's value and its relu):
  /// replaceResults runs the others in a region after the kernel.
  /// With `auxIndex` (the GEMM kernels, which can store a second output):
  /// when the region has exactly one other result, computed from the
  /// stored one by epilogue ops and no wider, it is set to that result and
  /// `epilogue` holds the ops of both.
  std::optional<unsigned>
  storedEpilogue(kiln::FusionOp fusion, mlir::Operation *anchor,
                 llvm::SetVector<mlir::Operation *> &epilogue,
                 std::string &why,
                 std::optional<unsigned> *auxIndex = nullptr);
  /// The epilogue computing `result` from the anchor's value by the ops
  /// `epilogue`, with the values it reads that the region computes split
  /// off. `accBias`, if set, is added to the accumulator first (a
  /// convolution's bias).
  mlir::FailureOr<EmittedEpilogue>
  emitRegionEpilogue(kiln::FusionOp fusion, mlir::Operation *anchor,
                     llvm::ArrayRef<mlir::Operation *> epilogue,
                     mlir::Value result, const OutputIndexing &indexing,
                     mlir::Value accBias, std::string &why,
                     mlir::Value auxResult = {});
  /// Select: the tuner's config for the problem (`lastConfigOrigin` says
  /// where it came from), recorded for the region. Lower: the region's
  /// config, specialised and compiled.
  mlir::FailureOr<contraction::GemmKernels>
  compile(kiln::FusionOp fusion, const contraction::GemmProblem &problem,
          contraction::Family family, const EmittedEpilogue &epilogue,
          llvm::StringRef prefix, std::string &why);
  /// The same with the kernel's epilogue given (the int8 kernel's).
  mlir::FailureOr<contraction::GemmKernels>
  compile(kiln::FusionOp fusion, const contraction::GemmProblem &problem,
          contraction::Family family, const contraction::Epilogue &epilogue,
          llvm::StringRef prefix, std::string &why);
  /// Lower: gives `kernels` (specialised with kEntryPlaceholder as their
  /// name) their names, `prefix` and a number; a kernel identical to one
  /// made before (the same source and NVRTC options) takes that one's name,
  /// and `lastKernelShared` is set: its gpu.binary exists, and the target
  /// step compiles it once.
  void nameKernels(contraction::GemmKernels &kernels, llvm::StringRef prefix);
  bool lastKernelShared = false;
  /// The kernels made so far, by source and options.
  llvm::StringMap<std::string> kernelNames;
  /// Declares `kernel`'s gpu.binary: the template source, compiled in the
  /// target step (lib/Target/CUDA/TemplateEmission.cpp).
  void declareBinary(const contraction::GemmKernels &kernels,
                     const contraction::GemmKernel &kernel,
                     mlir::Location loc);

  /// Select: what the region will get once it is matched (attached by
  /// run on success).
  mlir::Attribute selected;
  bool selectedWeightKMajor = false;
  bool selecting() const { return mode == Mode::Select; }
  /// Lower: the region's config of type `Attr`; null with `why` set when
  /// it has another.
  template <typename Attr>
  Attr configOf(kiln::FusionOp fusion, std::string &why) {
    auto attr = fusion->getAttrOfType<Attr>(
        KilnDialect::KernelAttrHelper::getNameStr());
    if (!attr)
      why = "the region's kiln.kernel is not a " +
            Attr::getMnemonic().str();
    return attr;
  }
  /// The kernels' calls; C's value, and in `aux` the second output's
  /// (of `auxType`) when the kernels have one. `extras` are the custom
  /// epilogue's operands (`epilogue0`, ...); `named`, other pointer
  /// parameters by name (the integer epilogue's `scale`, `bias`,
  /// `zeroPointB`).
  mlir::Value
  buildCalls(kiln::FusionOp fusion, const contraction::GemmKernels &kernels,
             const contraction::GemmProblem &problem, mlir::Value a,
             mlir::Value b, llvm::ArrayRef<mlir::Value> extras,
             mlir::RankedTensorType resultType,
             mlir::RankedTensorType auxType = {}, mlir::Value *aux = nullptr,
             llvm::ArrayRef<std::pair<std::string, mlir::Value>> named = {});

  /// The problem the kernel config is chosen for: `problem`, or its M at
  /// the symbolic dim's opt (kilnc --dim N=MIN..MAX:OPT, OPT < MAX).
  contraction::GemmProblem
  problemAtOpt(const contraction::GemmProblem &problem) const;

  /// Select: for a GEMM whose M follows the symbol (M's rows are A's
  /// leading slices, so its launch scales), a config per smaller bucket
  /// where it differs from `main`'s ({kernel, min, max}), or null.
  mlir::ArrayAttr chooseVariants(const contraction::GemmProblem &problem,
                                 contraction::Family family,
                                 const contraction::GemmConfig &main);
  mlir::ArrayAttr selectedVariants;
  /// Lower: the last compile()'s region, epilogue and name prefix (a size
  /// bucket's kernels are specialised with them).
  mlir::Operation *lastCompiled = nullptr;
  contraction::Epilogue lastEpilogue;
  std::string lastPrefix;
  /// buildCalls for one config: C and aux written into `destC` and
  /// `destAux` (new tensors when null), every call guarded by `guard` (a
  /// #kiln.size_guard, or null).
  mlir::Value
  buildCallChain(kiln::FusionOp fusion, const contraction::GemmKernels &kernels,
                 const contraction::GemmProblem &problem, mlir::Value a,
                 mlir::Value b, llvm::ArrayRef<mlir::Value> extras,
                 mlir::RankedTensorType resultType,
                 mlir::RankedTensorType auxType, mlir::Value *aux,
                 llvm::ArrayRef<std::pair<std::string, mlir::Value>> named,
                 mlir::Value destC, mlir::Value destAux, mlir::Attribute guard);

  mlir::ModuleOp module;
  unsigned smVersion;
  std::string chip;
  Mode mode;
  tuning::Tuner *tuner;
  std::string lastConfigOrigin;
  unsigned nextKernel = 0;
  /// Producers split off the region being rewritten (erased if it fails).
  llvm::SmallVector<kiln::FusionOp> splitOff;
  /// Channel-padded (reordered, transposed) weights made so far, by source
  /// global and what was done to it.
  llvm::StringMap<mlir::ml_program::GlobalOp> paddedFilters;
  /// Globals a padded filter replaced (erased once nothing reads them).
  llvm::SetVector<mlir::Operation *> replacedWeights;
};

/// An `attention` region as two: its scores (first matmul to the softmax
/// and P's casts) and the P V matmul with its epilogue.
llvm::SmallVector<kiln::FusionOp> splitAttention(kiln::FusionOp fusion);

/// A region of matmuls side by side (kiln-fuse's rule 4: Q, K and V) whose
/// results each depend on a matmul of their own becomes one region per
/// result, so that each can be a template kernel. Returns the new regions,
/// or just `fusion` when it is not such a region.
llvm::SmallVector<kiln::FusionOp> splitSideBySide(kiln::FusionOp fusion);

} // namespace kiln::templates

#endif // KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_REGIONMATCHER_H

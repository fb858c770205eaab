//===- SeparableDims.h - Which symbolic dims the runtime may pad -*- C++
//-*-===//
//
// A model compiled with `kilnc --dim N=1..64` is compiled at N = 64. The
// runtime may still run it at any N in the range, by padding the inputs to
// 64 with zeros and slicing the outputs, when N is *separable*: every op
// maps the slices along N independently (elementwise and broadcast ops,
// matmul rows and batch dims, convolution and pooling batches,
// normalisations and softmax over other axes, transposes, reshapes that
// keep N outermost in its dim, ...). One op that reduces over N, mixes
// values along it or splits it makes N non-separable, and the artifact then
// runs N = 64 only; the reason names the node.
//
// analyzeSeparableDims reads the importer's `kiln.symbolic_dims` (function
// arguments) and `kiln.dim_ranges` (module) on the freshly imported @main
// and follows each symbol through the ops to the results.
// docs/runtime.md "Sizes at run time".
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_SEPARABLEDIMS_H
#define KILN_COMPILER_SEPARABLEDIMS_H

#include "kiln/runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

struct SeparableDims {
  /// Each symbol of `kiln.dim_ranges`, with its range, whether it is
  /// separable and, when not, why.
  std::vector<runtime::SymbolicDim> symbols;
  /// By tensor name (`kiln.name`): the dims that follow a symbol.
  llvm::StringMap<std::vector<runtime::SymbolicAxis>> inputs, outputs;
  /// Per symbol: whether a valid slice reads padded ones (a masked softmax,
  /// a contraction or a sum over zero padding), so the padded slices must
  /// be computed and launch scaling is off for it.
  std::vector<bool> readsPadding;

  /// Where a masked walk needs the runtime's help (insertSizeMasks):
  ///  - AdditiveMask: a softmax, max or argmax along the symbol; its
  ///    input gets -inf at the padded positions along `dim` (+inf for a
  ///    min or argmin: `subtract`);
  ///  - KeepMask: a sum, mean or contraction over finite padding; operand
  ///    `operand` is multiplied by 1 at the valid positions along `dim`,
  ///    0 at the padded ones;
  ///  - MeanScale: a mean over the symbol; its result is multiplied by
  ///    max / n.
  /// `factor`: the dim carries the symbol times this.
  struct MaskSite {
    mlir::Operation *op = nullptr;
    uint32_t symbol = 0;
    runtime::SizeMaskKind kind = runtime::SizeMaskKind::AdditiveMask;
    /// AdditiveMask only: subtract the mask (+inf at the padded positions:
    /// a min or argmin along the symbol) instead of adding it.
    bool subtract = false;
    unsigned operand = 0;
    int64_t dim = 0;
    int64_t factor = 1;
    /// "node 'softmax_3' (kiln.softmax)", for kilnc --stats.
    std::string node;
  };
  std::vector<MaskSite> maskSites;
  /// The arguments insertSizeMasks added, by name: the runtime fills each
  /// per run (runtime::SizeMask).
  struct MaskInput {
    std::string name;
    uint32_t symbol = 0;
    int64_t factor = 1;
    runtime::SizeMaskKind kind = runtime::SizeMaskKind::AdditiveMask;
  };
  std::vector<MaskInput> maskInputs;

  bool empty() const { return symbols.empty(); }
};

/// Follows every symbol of `module`'s function `function` (kiln IR, as
/// imported) to its results. A module without `kiln.dim_ranges` gives an
/// empty result.
/// "node 'softmax_3' (kiln.softmax) (-inf)": a mask site and what it got,
/// for kilnc --stats.
std::string describeMaskSite(const SeparableDims::MaskSite &site);

SeparableDims analyzeSeparableDims(mlir::ModuleOp module,
                                   llvm::StringRef function = "main");

/// Adds one argument per (kind, symbol, factor, element type) of `dims`'
/// maskSites to `function`: a vector of the symbol's maximum times the
/// factor named `kiln.size_mask.S` (additive) or `kiln.size_keep.S` (keep;
/// `.xF` for a factor F, `.bf16` for a type other than f32), or an f32
/// scalar `kiln.size_scale.S`, and applies it at each site (MaskSite). The
/// runtime fills them per run (runtime::fillSizeMask). Records the
/// arguments in `dims.maskInputs`.
void insertSizeMasks(mlir::ModuleOp module, SeparableDims &dims,
                     llvm::StringRef function = "main");

/// Records `dims` in `artifact` (its symbolicDims, and each signature
/// tensor's symbolicAxes, matched by name; its sizeMasks). A symbol whose
/// tensors the compiled signature does not show at the maximum becomes
/// non-separable rather than wrong.
void attachSymbolicDims(const SeparableDims &dims, runtime::Artifact &artifact);

} // namespace kiln

#endif // KILN_COMPILER_SEPARABLEDIMS_H

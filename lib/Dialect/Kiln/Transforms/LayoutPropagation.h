//===- LayoutPropagation.h - Moving layout transposes through ops -*- C++
//-*-===//
//
// Shared by kiln-assign-layout's files: permutations between channels-first
// and channels-last activations, and the rewrite patterns that sink layout
// transposes through layout-agnostic ops so that inverse pairs meet and
// cancel.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_DIALECT_KILN_TRANSFORMS_LAYOUTPROPAGATION_H
#define KILN_LIB_DIALECT_KILN_TRANSFORMS_LAYOUTPROPAGATION_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/PatternMatch.h"

namespace kiln::layout {

using Permutation = llvm::SmallVector<int64_t, 6>;

/// The permutation (in kiln.transpose's convention, result dim i = input dim
/// perm[i]) that takes an activation of `rank` from the other format to
/// `to`: [0, 2, ..., rank-1, 1] for channels-last, [0, rank-1, 1, ...,
/// rank-2] for channels-first.
Permutation permutationTo(DataFormat to, int64_t rank);

DataFormat otherFormat(DataFormat format);

Permutation invertPermutation(llvm::ArrayRef<int64_t> perm);

/// `values` reordered as a transpose by `perm` reorders dimensions.
llvm::SmallVector<int64_t> permute(llvm::ArrayRef<int64_t> values,
                                   llvm::ArrayRef<int64_t> perm);

mlir::RankedTensorType permuteType(mlir::RankedTensorType type,
                                   llvm::ArrayRef<int64_t> perm);

/// Whether transposing `shape` by `perm` only moves dimensions of size 1:
/// the elements keep their row-major order, so the transpose is a reshape.
bool isRelabeling(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> perm);

/// Whether `value` is known at compile time: a kiln.constant or a load of an
/// immutable ml_program.global, possibly reshaped, transposed or padded.
bool isCompileTimeValue(mlir::Value value);

/// Ranks whose activations layout assignment converts: 2-D and 3-D images.
inline bool isLayoutRank(int64_t rank) { return rank == 4 || rank == 5; }

/// Patterns that move a transpose from `target` back to the other format
/// below the layout-agnostic ops that read it (elementwise with broadcast
/// operands, reductions, softmax, concat, split, slice, pad, tile, and
/// batch_norm/global_pool, which switch to `target`), and that turn a
/// transpose moving only unit dimensions into a reshape.
void populateLayoutPropagationPatterns(mlir::RewritePatternSet &patterns,
                                       DataFormat target);

} // namespace kiln::layout

#endif // KILN_LIB_DIALECT_KILN_TRANSFORMS_LAYOUTPROPAGATION_H

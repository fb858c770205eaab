//===- KernelConfigAttrs.h - Template configs <-> kiln attributes -*- C++ -*-===//
//
// The template kernels' configurations (ContractionKernels.h, no MLIR) as
// the typed attributes kiln-select-contraction-kernels attaches and
// kiln-match-contractions follows (KilnKernelAttrs.td), and back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_KERNELCONFIGATTRS_H
#define KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_KERNELCONFIGATTRS_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDA/AttentionKernels.h"
#include "kiln/Target/CUDA/ContractionKernels.h"
#include "kiln/Target/CUDA/DepthwiseKernels.h"

namespace kiln::templates {

/// The attribute names the selection and the lowering share.
/// On a fusion region (and the kernel calls it becomes): its kernel config.
inline constexpr llvm::StringLiteral kKernelAttr =
    KilnDialect::KernelAttrHelper::getNameStr();
/// On a fusion region: where its config came from ("heuristic", "tuned
/// (cache)", ...), for kilnc --stats.
inline constexpr llvm::StringLiteral kKernelOriginAttr =
    KilnDialect::KernelOriginAttrHelper::getNameStr();
/// On a fusion region the selection kept generic: why.
inline constexpr llvm::StringLiteral kGenericReasonAttr =
    KilnDialect::GenericReasonAttrHelper::getNameStr();
/// On a tf32 matmul region: the selection chose to store the row-major
/// weight B transposed (K-major), which tf32 wgmma reads without a
/// transposing copy; the problem it tuned has B column-major.
inline constexpr llvm::StringLiteral kWeightKMajorAttr =
    KilnDialect::WeightKmajorAttrHelper::getNameStr();
/// On a fusion region: report lines that precede its own (an attention
/// region split in two says why on its first part).
inline constexpr llvm::StringLiteral kSelectionNoteAttr =
    KilnDialect::SelectionNoteAttrHelper::getNameStr();

GemmConfigAttr toAttr(mlir::MLIRContext *ctx,
                      const contraction::GemmConfig &config);
contraction::GemmConfig fromAttr(GemmConfigAttr attr);

DepthwiseConfigAttr toAttr(mlir::MLIRContext *ctx,
                           const contraction::DepthwiseConfig &config);
contraction::DepthwiseConfig fromAttr(DepthwiseConfigAttr attr);

/// `tensorCores`: the problem's inputs are bf16/f16 (the family of a
/// non-wgmma config is mma_f16, else simt_f32).
AttentionConfigAttr toAttr(mlir::MLIRContext *ctx,
                           const contraction::AttentionConfig &config,
                           bool tensorCores);
contraction::AttentionConfig fromAttr(AttentionConfigAttr attr);

} // namespace kiln::templates

#endif // KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_KERNELCONFIGATTRS_H

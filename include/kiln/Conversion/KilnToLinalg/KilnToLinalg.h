//===- KilnToLinalg.h - kiln to linalg-on-tensors patterns ------*- C++ -*-===//
//
// One populate function per op family; the kiln-lower-to-linalg pass uses all
// of them. Each family lives in its own source file.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H
#define KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace kiln {

void populateElementwiseToLinalgPatterns(mlir::RewritePatternSet &patterns);
void populateContractionToLinalgPatterns(mlir::RewritePatternSet &patterns);
void populateReductionToLinalgPatterns(mlir::RewritePatternSet &patterns);
void populateDataMovementToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// kiln.resize.
void populateResizeToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// kiln.gather_nd and kiln.scatter_nd.
void populateIndexingToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// kiln.grid_sample, kiln.roi_align and kiln.deform_sample.
void populateImageToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// kiln.cumsum and kiln.top_k, as reductions along their axis.
void populateScanToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// kiln.philox and kiln.dropout_mask (Philox-4x32-10 in the generic's body).
void populateRandomToLinalgPatterns(mlir::RewritePatternSet &patterns);

/// All of the above.
void populateKilnToLinalgPatterns(mlir::RewritePatternSet &patterns);

} // namespace kiln

#endif // KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H

//===- LowerToLinalgPass.cpp - The kiln-lower-to-linalg pass
//----------------===//

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERTOLINALGPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

void kiln::populateKilnToLinalgPatterns(RewritePatternSet &patterns) {
  populateElementwiseToLinalgPatterns(patterns);
  populateContractionToLinalgPatterns(patterns);
  populateReductionToLinalgPatterns(patterns);
  populateDataMovementToLinalgPatterns(patterns);
  populateResizeToLinalgPatterns(patterns);
  populateIndexingToLinalgPatterns(patterns);
  populateScanToLinalgPatterns(patterns);
  populateImageToLinalgPatterns(patterns);
  populateRandomToLinalgPatterns(patterns);
}

namespace {
struct LowerToLinalgPass
    : kiln::impl::LowerToLinalgPassBase<LowerToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, tensor::TensorDialect>();
    target.addIllegalDialect<kiln::KilnDialect>();
    // Fusion regions stay (their contents are lowered in place), and so do
    // calls of precompiled kernels.
    target.addLegalOp<kiln::FusionOp, kiln::YieldOp, kiln::CallKernelOp>();
    // Anything else (func, ml_program weights) passes through untouched.
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });

    RewritePatternSet patterns(&getContext());
    kiln::populateKilnToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

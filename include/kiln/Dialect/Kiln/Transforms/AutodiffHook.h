//===- AutodiffHook.h - kiln-autodiff's forward hook -------------*- C++
//-*-===//
//
// A light header (Pipelines.h takes it without the passes' declarations).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_TRANSFORMS_AUTODIFFHOOK_H
#define KILN_DIALECT_KILN_TRANSFORMS_AUTODIFFHOOK_H

#include "mlir/Support/LLVM.h"
#include "llvm/Support/LogicalResult.h"

#include <functional>

namespace mlir {
class Value;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace kiln {

/// Called by kiln-autodiff on @train_grad once the norms are in training
/// form and the loss is appended (`loss`; returned while the hook runs, so
/// that a mask the hook puts on it replaces it), before the
/// reverse sweep: what it inserts into the forward graph is differentiated
/// with it. kilnc --train --dim inserts its size masks here, so that the
/// gradients are the masked forward's (a batch smaller than compiled).
using AutodiffForwardHook = std::function<llvm::LogicalResult(
    mlir::func::FuncOp grad, mlir::Value loss)>;

} // namespace kiln

#endif // KILN_DIALECT_KILN_TRANSFORMS_AUTODIFFHOOK_H

//===- Passes.h - Kiln graph passes ------------------------------*- C++ -*-===//
//
// The graph-level passes: layout assignment, precision lowering, fusion.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_H
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_H

#include "kiln/Dialect/Kiln/Transforms/AutodiffHook.h"

#include "mlir/Pass/Pass.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"

/// kiln-autodiff with a forward hook (not reachable from a textual
/// pipeline; `hook` may be empty).
std::unique_ptr<mlir::Pass>
createAutodiffPass(const AutodiffPassOptions &options,
                   AutodiffForwardHook hook);

} // namespace kiln

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_H

//===- Passes.td - Kiln conversion passes ------------------*- tablegen -*-===//

#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToLinalgPass : Pass<"kiln-lower-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Lower kiln ops to linalg on tensors";
  let description = [{
    Rewrites every kiln op into `linalg` structured ops (mostly
    `linalg.generic`, whose indexing maps carry broadcasting, strides and
    windows), `tensor` ops for pure data movement, and `arith`/`math` for
    scalar bodies. Value semantics are kept: the result is still on tensors,
    ready for tiling and bufferization. A kiln op without a lowering is an
    error naming it.

    Example:

    ```mlir
    %y = kiln.relu %x : tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %y = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel"]}
        ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) { ... }
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect",
    "mlir::tensor::TensorDialect",
  ];
}

#endif // KILN_CONVERSION_PASSES_TD

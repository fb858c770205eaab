//===- KilnAutodiffOps.td - Gradients asked for in the graph -*- tablegen -*-===//
//
// ONNX's ai.onnx.preview.training Gradient: a model may ask for the
// derivative of one of its tensors with respect to others. kiln.gradient
// holds that request until kiln-expand-gradients replaces it with the
// backward ops kiln-autodiff's vector-Jacobian rules build.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNAUTODIFFOPS_TD
#define KILN_DIALECT_KILN_IR_KILNAUTODIFFOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Kiln_GradientOp : Kiln_Op<"gradient", [InferTypeOpAdaptor]> {
  let summary = "d sum(y) / d x for each x, before kiln-expand-gradients";
  let description = [{
    Result `i` is the gradient of `y` with respect to `xs[i]`, with the
    shape and type of `xs[i]`: the vector-Jacobian product with a seed of
    ones, that is the gradient of the sum of `y`'s elements (for a scalar
    `y`, its plain derivative). A result is zeros where `y` does not depend
    on its `x`. The `xs` may be graph inputs, weights or intermediate values;
    when one `x` depends on another, the gradient flows only as far back as
    the `xs` (the ONNX operator requires them independent). Every value
    between the `xs` and `y` must be produced by an op with a
    kiln-autodiff rule. Higher derivatives are gradients of gradients:
    kiln-expand-gradients expands in program order, so a later
    `kiln.gradient` differentiates the backward ops of an earlier one.

    Example:

    ```mlir
    %dw, %dx = kiln.gradient %loss wrt %w, %x
        : tensor<f32> wrt tensor<4x3xf32>, tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$y, Variadic<Kiln_FloatTensor>:$xs);
  let results = (outs Variadic<Kiln_FloatTensor>:$grads);
  let assemblyFormat = [{
    $y `wrt` $xs attr-dict `:` type($y) `wrt` type($xs)
  }];
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNAUTODIFFOPS_TD

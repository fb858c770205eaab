//===- KilnIndexingOps.td - N-d gathers and scatters -------*- tablegen -*-===//
//
// Ops that address a tensor by index tuples: each row of the last dimension
// of `indices` names a slice of the input by its leading coordinates.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNINDEXINGOPS_TD
#define KILN_DIALECT_KILN_IR_KILNINDEXINGOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

def Kiln_GatherNdOp : Kiln_Op<"gather_nd", [InferTypeOpAdaptor]> {
  let summary = "gather slices by index tuples (ONNX GatherND)";
  let description = [{
    With `b = batch_dims` and `q` the last extent of `indices`, every index
    tuple `indices[i..., :]` addresses the slice `input[i[:b]..., t0, ...,
    tq-1, ...]` of the input: the first `b` dimensions are shared batch
    dimensions, the next `q` are indexed. The result has shape
    `indices.shape[:-1] + input.shape[b + q:]`. Negative indices count from
    the end of their dimension; out-of-range ones are clamped (ONNX leaves
    them undefined), so no read leaves the input.

    Example:

    ```mlir
    %y = kiln.gather_nd %x, %i : tensor<2x2x2xf32>, tensor<2x1x2xi64>
        -> tensor<2x1x2xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($result)
  }];
}

def Kiln_ScatterNdOp : Kiln_Op<"scatter_nd", [InferTypeOpAdaptor]> {
  let summary = "scatter slices by index tuples (ONNX ScatterND)";
  let description = [{
    A copy of `input` in which, for every index tuple `indices[u..., :]` (of
    length `q`), the slice `input[t0, ..., tq-1, ...]` becomes
    `updates[u..., ...]`, or is combined with it by `reduction` (`add`,
    `mul`, `max`, `min`). Updates apply in row-major order of `u`, so with
    `none` the last write to an element wins. `updates` has shape
    `indices.shape[:-1] + input.shape[q:]`. Negative indices count from the
    end; an index tuple outside the input updates nothing.

    Example:

    ```mlir
    %y = kiln.scatter_nd %x, %i, %u {reduction = #kiln.scatter_reduction<add>}
        : tensor<4x4x4xf32>, tensor<2x1xi64>, tensor<2x4x4xf32>
        -> tensor<4x4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       Kiln_Tensor:$updates,
                       DefaultValuedAttr<Kiln_ScatterReductionAttr,
                           "::kiln::ScatterReduction::None">:$reduction);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `,` $updates attr-dict `:` type($input) `,`
    type($indices) `,` type($updates) `->` type($result)
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNINDEXINGOPS_TD

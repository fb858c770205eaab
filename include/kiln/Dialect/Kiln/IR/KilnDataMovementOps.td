//===- KilnDataMovementOps.td - Shape and data movement ops -*- tablegen -*-===//

#ifndef KILN_DIALECT_KILN_IR_KILNDATAMOVEMENTOPS_TD
#define KILN_DIALECT_KILN_IR_KILNDATAMOVEMENTOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

def Kiln_ConstantOp : Kiln_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor known at compile time";
  let description = [{
    A small constant: shape arithmetic, scalars, splats. Large weights are
    `ml_program.global` ops instead, so printing IR never dumps them.

    Example:

    ```mlir
    %shape = kiln.constant dense<[1, 2048]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Kiln_IotaOp : Kiln_Op<"iota"> {
  let summary = "an arithmetic sequence (ONNX Range)";
  let description = [{
    A 1-D tensor with `result[i] = start + i * step`; the result type fixes
    the length.

    Example:

    ```mlir
    %r = kiln.iota {start = 0.0, step = 1.0} : tensor<128xi64>
    ```
  }];
  let arguments = (ins F64Attr:$start, F64Attr:$step);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape"> {
  let summary = "same elements, new shape";
  let description = [{
    Reinterprets the elements in row-major order under the result's shape.
    The element counts must match; the element type stays.

    Example:

    ```mlir
    %y = kiln.reshape %x : tensor<1x2048x1x1xf32> -> tensor<1x2048xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransposeOp : Kiln_Op<"transpose", [InferTypeOpAdaptor]> {
  let summary = "permute dimensions";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`. Layout assignment
    inserts these where layouts meet and cancels inverse pairs.

    Example:

    ```mlir
    %y = kiln.transpose %x {permutation = array<i64: 0, 2, 3, 1>}
        : tensor<1x64x56x56xf32> -> tensor<1x56x56x64xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast"> {
  let summary = "stretch to a larger shape by numpy rules (ONNX Expand)";
  let description = [{
    Broadcasts the input to the result shape: trailing dimensions align and
    a dimension of size 1 stretches. The result rank is at least the
    input's.

    Example:

    ```mlir
    %y = kiln.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [InferTypeOpAdaptor]> {
  let summary = "join tensors along one axis";
  let description = [{
    All inputs share rank, element type and every dimension but `axis`
    (non-negative).

    Example:

    ```mlir
    %y = kiln.concat %a, %b {axis = 1 : i64}
        : tensor<1x64x28x28xf32>, tensor<1x32x28x28xf32> -> tensor<1x96x28x28xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [InferTypeOpAdaptor]> {
  let summary = "a strided window of a tensor";
  let description = [{
    For each dimension `d`, takes indices `starts[d], starts[d] + steps[d],
    ...` up to but excluding `limits[d]`. All three lists have one entry per
    dimension and are normalised by the importer: starts and limits clamped
    into range, steps non-zero (negative steps walk backwards, with
    `limits[d] = -1` meaning "past the front").

    Example:

    ```mlir
    %y = kiln.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 4, 9>,
        steps = array<i64: 1, 2>} : tensor<4x10xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$steps);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  // A region verifier runs after the InferTypeOpInterface check, so it may
  // index the attributes and result type that type inference validated.
  let hasRegionVerifier = 1;
  let hasFolder = 1;
}

def Kiln_GatherOp : Kiln_Op<"gather", [InferTypeOpAdaptor]> {
  let summary = "take slices along an axis by index (ONNX Gather)";
  let description = [{
    `result[i..., j..., k...] = input[i..., indices[j...], k...]` where the
    `i` range over the dimensions before `axis` and `k` those after.
    Negative indices count from the end. This is the embedding lookup of
    transformer models.

    Example:

    ```mlir
    %e = kiln.gather %table, %ids {axis = 0 : i64}
        : tensor<30522x768xf32>, tensor<1x128xi64> -> tensor<1x128x768xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($result)
  }];
  let hasFolder = 1;
}

def Kiln_GatherElementsOp : Kiln_Op<"gather_elements", [InferTypeOpAdaptor]> {
  let summary = "elementwise gather along an axis";
  let description = [{
    `result[p] = input[p with p[axis] replaced by indices[p]]`; the result
    has the shape of `indices`, which has the input's rank.

    Example:

    ```mlir
    %y = kiln.gather_elements %x, %i {axis = 1 : i64}
        : tensor<3x4xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($result)
  }];
}

def Kiln_ScatterElementsOp : Kiln_Op<"scatter_elements", [InferTypeOpAdaptor]> {
  let summary = "elementwise scatter along an axis";
  let description = [{
    A copy of `input` where, for every position `p` of `indices`, the element
    at `p` with `p[axis]` replaced by `indices[p]` becomes `updates[p]`
    (combined with the old value by `reduction` when it is not `none`).

    Example:

    ```mlir
    %y = kiln.scatter_elements %x, %i, %u {axis = 1 : i64,
        reduction = #kiln.scatter_reduction<add>}
        : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       Kiln_Tensor:$updates, I64Attr:$axis,
                       DefaultValuedAttr<Kiln_ScatterReductionAttr,
                           "::kiln::ScatterReduction::None">:$reduction);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `,` $updates attr-dict `:` type($input) `,`
    type($indices) `,` type($updates) `->` type($result)
  }];
}

def Kiln_PadOp : Kiln_Op<"pad", [InferTypeOpAdaptor]> {
  let summary = "grow a tensor at its borders";
  let description = [{
    Adds `low[d]` elements before and `high[d]` after every dimension `d`
    (non-negative), filled by `mode`: `constant` writes `value`, `reflect`
    mirrors without repeating the edge, `edge` repeats the edge.

    Example:

    ```mlir
    %y = kiln.pad <constant> %x {low = array<i64: 0, 0, 1, 1>,
        high = array<i64: 0, 0, 1, 1>, value = 0.0}
        : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
    ```
  }];
  let arguments = (ins Kiln_PadModeAttr:$mode, Kiln_Tensor:$input,
                       DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$mode $input attr-dict `:` type($input) `->` type($result)";
  // A region verifier runs after the InferTypeOpInterface check, so it may
  // index the attributes and result type that type inference validated.
  let hasRegionVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SplitOp : Kiln_Op<"split", [InferTypeOpAdaptor]> {
  let summary = "cut a tensor into pieces along one axis";
  let description = [{
    Produces one result per entry of `sizes`; the sizes sum to the input's
    extent along `axis`.

    Example:

    ```mlir
    %q, %k, %v = kiln.split %qkv {axis = 2 : i64, sizes = array<i64: 768, 768, 768>}
        : tensor<1x128x2304xf32> -> tensor<1x128x768xf32>, tensor<1x128x768xf32>,
          tensor<1x128x768xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Kiln_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def Kiln_TileOp : Kiln_Op<"tile", [InferTypeOpAdaptor]> {
  let summary = "repeat a tensor along each dimension";
  let description = [{
    `result.shape[d] = input.shape[d] * repeats[d]`, with the input copied
    into every tile.

    Example:

    ```mlir
    %y = kiln.tile %x {repeats = array<i64: 2, 1>} : tensor<3x4xf32> -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$repeats);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Kiln_ResizeOp : Kiln_Op<"resize", [AttrSizedOperandSegments]> {
  let summary = "nearest, (multi)linear or (multi)cubic resampling";
  let description = [{
    Resamples the input to the result shape (same rank and element type).
    `coordinate_mode` maps an output coordinate to an input coordinate
    (`x_in = (x_out + 0.5) / scale - 0.5` for `half_pixel`), `mode` picks
    nearest (rounded by `nearest_mode`), linear or cubic interpolation in
    every resized dimension. `scales` has one entry per dimension; when empty
    the scale is the ratio of output to input size.

    Cubic interpolation weighs the four pixels around the input coordinate
    with Keys' kernel of parameter `cubic_coeff_a` (-0.75 by default; only
    cubic takes a non-default value). Pixels past the border repeat the edge,
    unless `exclude_outside` (cubic only) gives them weight 0 and rescales
    the others to sum to 1.

    `antialias` (linear and cubic only) widens the interpolation kernel by
    `1 / scale` where a dimension shrinks (`scale < 1`), so every input
    pixel under the output pixel contributes: the kernel is evaluated at
    `(x_in - i) * scale` for the `ceil(support / scale)` input pixels `i` on
    each side and the weights are normalised to sum to 1 (ONNX Resize-18's
    antialias, the way Pillow resamples).

    `tf_half_pixel_for_nn` (Resize-11's nearest mode of TensorFlow) maps
    `x_in = (x_out + 0.5) / scale`.

    `tf_crop_and_resize` resamples the region `roi` (per dimension a start
    and an end as fractions of the input extent, all starts first, then all
    ends; required by this mode and only taken by it) and gives output
    elements whose input coordinate falls outside the input
    `extrapolation_value`.

    Scales and the region may be given at run time (an exported model's
    graph input, checked by a ShapeGuard before the launches):
    `runtime_scales` holds one scale per dimension of `value_axes`, in that
    order (the `scales` attribute is then empty, and the dimensions outside
    `value_axes` keep their size and are not resampled); `runtime_roi`
    holds the region's starts, then its ends, for the dimensions of
    `value_axes`; they replace the `roi` attribute's entries there (the
    attribute stays required by the mode). Both are f32 or f64, read in
    f64.

    Example:

    ```mlir
    %y = kiln.resize %x {mode = #kiln.resize_mode<nearest>,
        coordinate_mode = #kiln.coordinate_mode<asymmetric>,
        nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64>}
        : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
    %z = kiln.resize %x scales(%s : tensor<2xf32>) {mode = #kiln.resize_mode<linear>,
        coordinate_mode = #kiln.coordinate_mode<half_pixel>,
        scales = array<f64>, value_axes = array<i64: 2, 3>}
        : tensor<1x64x16x16xf32> -> tensor<1x64x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input,
                       Optional<Kiln_FloatTensor>:$runtime_scales,
                       Optional<Kiln_FloatTensor>:$runtime_roi,
                       OptionalAttr<DenseI64ArrayAttr>:$value_axes,
                       Kiln_ResizeModeAttr:$mode,
                       Kiln_CoordinateModeAttr:$coordinate_mode,
                       DefaultValuedAttr<Kiln_NearestModeAttr,
                           "::kiln::NearestMode::RoundPreferFloor">:$nearest_mode,
                       DenseF64ArrayAttr:$scales,
                       DefaultValuedAttr<F64Attr, "-0.75">:$cubic_coeff_a,
                       UnitAttr:$exclude_outside,
                       OptionalAttr<DenseF64ArrayAttr>:$roi,
                       DefaultValuedAttr<F64Attr, "0.0">:$extrapolation_value,
                       UnitAttr:$antialias);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scales` `(` $runtime_scales^ `:` type($runtime_scales) `)`)?
    (`roi` `(` $runtime_roi^ `:` type($runtime_roi) `)`)?
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether dimension `d` is resampled (not read as it is): its size
    /// changes, its scale is not 1, it has a region, or a scale or region
    /// given at run time covers it.
    bool resamples(int64_t d);
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNDATAMOVEMENTOPS_TD

//===- KilnReductionOps.td - Reductions, normalisation, pooling -*- tablegen -*-===//

#ifndef KILN_DIALECT_KILN_IR_KILNREDUCTIONOPS_TD
#define KILN_DIALECT_KILN_IR_KILNREDUCTIONOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Kiln_ReduceOp : Kiln_Op<"reduce", [InferTypeOpAdaptor]> {
  let summary = "reduction over a set of axes";
  let description = [{
    Combines the elements along every axis in `axes` (sorted, unique,
    non-negative) with `kind`: sum, mean, max, min or prod. With `keepdims`
    the reduced axes stay as size 1; otherwise they are dropped. An empty
    `axes` list reduces nothing and the op is the identity.

    Example:

    ```mlir
    %m = kiln.reduce <mean> %x {axes = array<i64: 2, 3>, keepdims = true}
        : tensor<1x64x56x56xf32> -> tensor<1x64x1x1xf32>
    ```
  }];
  let arguments = (ins Kiln_ReduceKindAttr:$kind, Kiln_NumericTensor:$input,
                       DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

class Kiln_ArgReduceOp<string mnemonic, string which>
    : Kiln_Op<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "index of the " # which # " element along an axis";
  let description = "The i64 index of the " # which # " element along "
    # "`axis`. Ties resolve to the first occurrence, or the last with "
    # "`select_last_index`. With `keepdims` the axis stays as size 1.\n\n"
    # "Example:\n\n```mlir\n%i = kiln." # mnemonic
    # " %x {axis = 1 : i64, keepdims = false} : tensor<4x1000xf32> -> "
    # "tensor<4xi64>\n```";
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                       UnitAttr:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_ArgMaxOp : Kiln_ArgReduceOp<"argmax", "largest">;
def Kiln_ArgMinOp : Kiln_ArgReduceOp<"argmin", "smallest">;

def Kiln_CumSumOp : Kiln_Op<"cumsum", [SameOperandsAndResultType]> {
  let summary = "running sum along an axis (ONNX CumSum)";
  let description = [{
    `result[..., i, ...] = sum of input[..., j, ...]` over `j <= i` along
    `axis`; `exclusive` leaves out `j = i` (the first element becomes 0),
    `reverse` sums from the other end (`j >= i`). Integers wrap.

    Example:

    ```mlir
    %y = kiln.cumsum %x {axis = 1 : i64, exclusive} : tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Kiln_TopKOp : Kiln_Op<"top_k", [InferTypeOpAdaptor]> {
  let summary = "the k largest (or smallest) elements along an axis";
  let description = [{
    Along `axis`, the `k` largest elements (the smallest with `smallest`),
    sorted from the largest (smallest) down, and their i64 positions. Of
    equal elements the one at the lower position comes first, as ONNX TopK
    requires. NaN counts as larger than every number. The results have the
    input's shape with `k` along `axis`; `k` is at most the axis extent.

    Example:

    ```mlir
    %v, %i = kiln.top_k %x {axis = 1 : i64, k = 3 : i64}
        : tensor<3x4xf32> -> tensor<3x3xf32>, tensor<3x3xi64>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis, I64Attr:$k,
                       UnitAttr:$smallest);
  let results = (outs Kiln_NumericTensor:$values,
                      RankedTensorOf<[I64]>:$indices);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($values) `,` type($indices)
  }];
}

class Kiln_SoftmaxLikeOp<string mnemonic, string formula>
    : Kiln_Op<mnemonic, [SameOperandsAndResultType]> {
  let summary = formula # " along one axis";
  let description = "Computes `" # formula # "` along `axis`; every other "
    # "dimension indexes an independent row. Implementations subtract the "
    # "row maximum first, so large inputs do not overflow.\n\n"
    # "Example:\n\n```mlir\n%p = kiln." # mnemonic
    # " %x {axis = -1 : i64} : tensor<8x12x128x128xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Kiln_SoftmaxOp : Kiln_SoftmaxLikeOp<"softmax", "e^x_i / sum_j e^x_j">;
def Kiln_LogSoftmaxOp : Kiln_SoftmaxLikeOp<"log_softmax",
    "x_i - ln(sum_j e^x_j)">;

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

def Kiln_LayerNormOp : Kiln_Op<"layer_norm", [AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over the dimensions from `axis` to the last: subtracts their
    mean, divides by `sqrt(variance + epsilon)`, then multiplies by `scale`
    and adds the optional `bias`. `scale` and `bias` broadcast against the
    normalised dimensions (numpy rules).

    Example:

    ```mlir
    %y = kiln.layer_norm %x, %gamma, %beta {axis = -1 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>)
        -> tensor<1x128x768xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Optional<Kiln_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_BatchNormOp : Kiln_Op<"batch_norm", [AllTypesMatch<["input", "result"]>]> {
  let summary = "batch normalisation with running statistics (inference)";
  let description = [{
    `(x - mean) / sqrt(variance + epsilon) * scale + bias`, per channel; the
    channel dimension is the one `data_format` names. `scale`, `bias`, `mean`
    and `variance` are 1-D with one entry per channel.

    Example:

    ```mlir
    %y = kiln.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-05 : f32}
        : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>,
           tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Kiln_FloatTensor:$bias, Kiln_FloatTensor:$mean,
                       Kiln_FloatTensor:$variance,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon,
                       DefaultValuedAttr<Kiln_DataFormatAttr,
                           "::kiln::DataFormat::ChannelsFirst">:$data_format);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_InstanceNormOp : Kiln_Op<"instance_norm", [AllTypesMatch<["input", "result"]>]> {
  let summary = "instance normalisation";
  let description = [{
    Normalises each (sample, channel) plane over its spatial dimensions, then
    applies the per-channel `scale` and `bias`. Input `[N, C, spatial...]`.

    Example:

    ```mlir
    %y = kiln.instance_norm %x, %s, %b {epsilon = 1.0e-05 : f32}
        : (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x16x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Kiln_FloatTensor:$bias,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_LrnOp : Kiln_Op<"lrn", [SameOperandsAndResultType]> {
  let summary = "local response normalisation across channels";
  let description = [{
    AlexNet-style LRN over a window of `size` neighbouring channels
    (dimension 1, `nchw`): `x / (bias + alpha / size * sum(x_j^2))^beta`,
    the sum running over channels `c - floor((size - 1) / 2)` to
    `c + ceil((size - 1) / 2)` clipped to the valid range.

    Example:

    ```mlir
    %y = kiln.lrn %x {size = 5 : i64, alpha = 1.0e-04 : f32, beta = 7.5e-01 : f32,
        bias = 1.0 : f32} : tensor<1x96x55x55xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$size,
                       DefaultValuedAttr<F32Attr, "1.0e-4f">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.75f">:$beta,
                       DefaultValuedAttr<F32Attr, "1.0f">:$bias);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

def Kiln_PoolOp : Kiln_Op<"pool", [InferTypeOpAdaptor]> {
  let summary = "max or average pooling over sliding windows";
  let description = [{
    Pools each window of `kernel` elements over the spatial dimensions
    (`nchw`: all after the first two; `nhwc`: all but the first and last).
    `padding` lists the low pads of every spatial dimension, then the high
    pads. Average pooling divides by the number of in-bounds elements unless
    `count_include_pad` is set; max pooling ignores padding. With `ceil_mode`
    a partial last window counts.

    Example:

    ```mlir
    %y = kiln.pool <max> %x {kernel = array<i64: 3, 3>,
        strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>,
        padding = array<i64: 1, 1, 1, 1>}
        : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins Kiln_PoolKindAttr:$kind, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$padding,
                       UnitAttr:$count_include_pad, UnitAttr:$ceil_mode,
                       DefaultValuedAttr<Kiln_DataFormatAttr,
                           "::kiln::DataFormat::ChannelsFirst">:$data_format);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input) `->` type($result)";
  // A region verifier runs after the InferTypeOpInterface check, so it may
  // index the attributes and result type that type inference validated.
  let hasRegionVerifier = 1;
}

def Kiln_PoolIndicesOp : Kiln_Op<"pool_indices", [InferTypeOpAdaptor]> {
  let summary = "where each max-pooling window's maximum lies (MaxPool's Indices)";
  let description = [{
    For the windows `kiln.pool <max>` takes with the same attributes (`nchw`
    layout), the i64 position of each window's maximum in the whole input
    flattened: `((n * C + c) * H + h) * W + w` for 2-D, or with
    `column_major` the spatial part in column-major order (`(n * C + c) *
    H * W + w * H + h`, ONNX's storage_order 1). Padding never wins; of
    equal values the first in the window's row-major scan does.

    Example:

    ```mlir
    %i = kiln.pool_indices %x {kernel = array<i64: 2, 2>,
        strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>,
        padding = array<i64: 0, 0, 0, 0>}
        : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xi64>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$padding,
                       UnitAttr:$ceil_mode, UnitAttr:$column_major);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_GlobalPoolOp : Kiln_Op<"global_pool", [InferTypeOpAdaptor]> {
  let summary = "max or average over all spatial positions";
  let description = [{
    Reduces every spatial dimension to size 1 with `kind`, keeping the batch
    and channel dimensions where `data_format` puts them.

    Example:

    ```mlir
    %y = kiln.global_pool <avg> %x : tensor<1x2048x7x7xf32> -> tensor<1x2048x1x1xf32>
    ```
  }];
  let arguments = (ins Kiln_PoolKindAttr:$kind, Kiln_FloatTensor:$input,
                       DefaultValuedAttr<Kiln_DataFormatAttr,
                           "::kiln::DataFormat::ChannelsFirst">:$data_format);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input) `->` type($result)";
}

#endif // KILN_DIALECT_KILN_IR_KILNREDUCTIONOPS_TD

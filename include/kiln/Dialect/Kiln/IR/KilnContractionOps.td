//===- KilnContractionOps.td - matmul, conv, conv_transpose -*- tablegen -*-===//

#ifndef KILN_DIALECT_KILN_IR_KILNCONTRACTIONOPS_TD
#define KILN_DIALECT_KILN_IR_KILNCONTRACTIONOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

def Kiln_MatmulOp : Kiln_Op<"matmul", [InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "batched matrix product with numpy semantics";
  let description = [{
    `numpy.matmul`: the last two dimensions are the matrices
    (`[..., M, K] x [..., K, N] -> [..., M, N]`) and the leading (batch)
    dimensions broadcast. A 1-D `lhs` is a row vector and a 1-D `rhs` a
    column vector; the added dimension is dropped from the result. Operands
    share an element type. With `bf16` or `f16` operands the result may be
    `f32`: the products then accumulate in f32 and are not rounded back
    (`kiln-lower-precision` emits this form). Otherwise the result has the
    operands' element type.

    Example:

    ```mlir
    %c = kiln.matmul %a, %b : tensor<8x128x64xf32>, tensor<64x32xf32>
        -> tensor<8x128x32xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$lhs, Kiln_NumericTensor:$rhs);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

// Shared attributes of the sliding-window ops. `padding` holds the low pads
// of every spatial dimension followed by the high pads.
// Like matmul, a bf16 or f16 convolution may have an f32 result (f32
// accumulation, see kiln-lower-precision).
class Kiln_WindowOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic,
              !listconcat(traits, [InferTypeOpAdaptorWithIsCompatible])>;

def Kiln_ConvOp : Kiln_WindowOp<"conv"> {
  let summary = "1-D, 2-D or 3-D grouped, strided, dilated convolution";
  let description = [{
    Cross-correlation of `input` with `filter`, plus an optional per-channel
    `bias`. With `data_format = nchw` the input is `[N, C, spatial...]` and
    the filter `[O, C / groups, kernel...]`; with `nhwc` the input is
    `[N, spatial..., C]` and the filter `[O, kernel..., C / groups]`. The
    result keeps the input's format. `strides` and `dilations` have one entry
    per spatial dimension; `padding` has the low pads of every spatial
    dimension followed by the high pads. Output size per spatial dimension:
    `(in + lo + hi - dilation * (k - 1) - 1) / stride + 1`.

    Example:

    ```mlir
    %y = kiln.conv %x, %w, %b {strides = array<i64: 2, 2>,
        dilations = array<i64: 1, 1>, padding = array<i64: 3, 3, 3, 3>,
        groups = 1 : i64, data_format = #kiln.data_format<nchw>}
        : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>)
        -> tensor<1x64x112x112xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$filter,
                       Optional<Kiln_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       DefaultValuedAttr<Kiln_DataFormatAttr,
                           "::kiln::DataFormat::ChannelsFirst">:$data_format);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  // A region verifier runs after the InferTypeOpInterface check, so it may
  // index the attributes and result type that type inference validated.
  let hasRegionVerifier = 1;
}

def Kiln_ConvTransposeOp : Kiln_WindowOp<"conv_transpose"> {
  let summary = "transposed (fractionally strided) convolution";
  let description = [{
    The gradient of `kiln.conv` with respect to its input, used as a learned
    upsampler. Input `[N, C, spatial...]` (`nchw`), filter
    `[C, O / groups, kernel...]`, optional bias `[O]`. Output size per
    spatial dimension:
    `stride * (in - 1) + output_padding + dilation * (k - 1) + 1 - lo - hi`.

    Example:

    ```mlir
    %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>,
        dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>,
        output_padding = array<i64: 1, 1>}
        : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$filter,
                       Optional<Kiln_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$output_padding,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       DefaultValuedAttr<Kiln_DataFormatAttr,
                           "::kiln::DataFormat::ChannelsFirst">:$data_format);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  // A region verifier runs after the InferTypeOpInterface check, so it may
  // index the attributes and result type that type inference validated.
  let hasRegionVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Recurrence
//===----------------------------------------------------------------------===//

def Kiln_RecurrenceOp : Kiln_Op<"recurrence", [AttrSizedOperandSegments]> {
  let summary = "the time loop of one direction of an RNN, GRU or LSTM layer";
  let description = [{
    The recurrent part of one direction of an ONNX `RNN`, `GRU` or `LSTM`
    layer (G = 1, 3 or 4 gates, ONNX's gate order: RNN `h`, GRU `z r h`,
    LSTM `i o f c`). The input projections of every step are already
    computed: `input_projection` is `[T, B, G * H]`, `X W^T` plus the
    biases (for GRU with `linear_before_reset`, without R's bias of the `h`
    gate, which is `reset_bias`). `recurrence` is R, `[G * H, H]`, as ONNX
    stores one direction of it. Per step t (from T - 1 down with
    `reverse`), with `x` the step's projection and `f`, `g`, `h` the
    activations:

    - rnn: `H' = f(x + H R^T)`;
    - gru: `z = f(x_z + H R_z^T)`, `r = f(x_r + H R_r^T)`,
      `c = g(x_h + (r * H) R_h^T)` (with `linear_before_reset`:
      `g(x_h + r * (H R_h^T + reset_bias))`), `H' = (1 - z) * c + z * H`;
    - lstm: `i = f(x_i + H R_i^T + p_i * C)`, `f' = f(x_f + H R_f^T +
      p_f * C)` (`1 - i` with `input_forget`), `c = g(x_c + H R_c^T)`,
      `C' = f' * C + i * c`, `o = f(x_o + H R_o^T + p_o * C')`,
      `H' = o * h(C')`.

    `clip` bounds every gate's pre-activation to [-clip, clip] (not the
    cell state that `h` reads). With `sequence_lens` (`[B]` i32), a step
    at or past a row's length keeps the row's state and writes zeros to
    `y`, and a row of length 0 has zero last states (as onnxruntime's LSTM
    and GRU give; not its initial ones). Results: `y` `[T, B, H]` (H' of every step, in time order), the
    last H and, for lstm, the last C, `[B, H]` each.

    `activations` names one activation per role (rnn 1, gru 2, lstm 3),
    lower case, as ONNX spells them: relu, tanh, sigmoid, softsign,
    softplus, leakyrelu, thresholdedrelu, elu, hardsigmoid, affine,
    scaledtanh; `activation_alpha` and `activation_beta` hold each one's
    parameters (ignored by those without).

    The importer makes one per direction for inference; kilnc
    --recurrence=unroll, and training, unroll the loop into kiln ops
    instead. kiln-lower-recurrence turns it into one persistent kernel.

    Example:

    ```mlir
    %y, %h, %c = kiln.recurrence <lstm> %x, %r, %h0 initial_c(%c0)
        {activations = ["sigmoid", "tanh", "tanh"],
         activation_alpha = array<f32: 0.0, 0.0, 0.0>,
         activation_beta = array<f32: 0.0, 0.0, 0.0>}
        : (tensor<100x8x1024xf32>, tensor<1024x256xf32>, tensor<8x256xf32>,
           tensor<8x256xf32>)
        -> (tensor<100x8x256xf32>, tensor<8x256xf32>, tensor<8x256xf32>)
    ```
  }];
  let arguments = (ins Kiln_RecurrentCellAttr:$cell,
                       Kiln_FloatTensor:$input_projection,
                       Kiln_FloatTensor:$recurrence,
                       Kiln_FloatTensor:$initial_h,
                       Optional<Kiln_FloatTensor>:$initial_c,
                       Optional<Kiln_FloatTensor>:$peepholes,
                       Optional<RankedTensorOf<[I32]>>:$sequence_lens,
                       Optional<Kiln_FloatTensor>:$reset_bias,
                       StrArrayAttr:$activations,
                       DenseF32ArrayAttr:$activation_alpha,
                       DenseF32ArrayAttr:$activation_beta,
                       OptionalAttr<F32Attr>:$clip,
                       UnitAttr:$reverse,
                       UnitAttr:$linear_before_reset,
                       UnitAttr:$input_forget);
  let results = (outs Kiln_FloatTensor:$y, Kiln_FloatTensor:$last_h,
                      Optional<Kiln_FloatTensor>:$last_c);
  let assemblyFormat = [{
    $cell $input_projection `,` $recurrence `,` $initial_h
    (`initial_c` `(` $initial_c^ `)`)? (`peepholes` `(` $peepholes^ `)`)?
    (`sequence_lens` `(` $sequence_lens^ `)`)?
    (`reset_bias` `(` $reset_bias^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Gates per cell: 1, 3 or 4.
    int64_t getGateCount();
    /// Activations per cell: 1, 2 or 3.
    int64_t getActivationCount();
    /// Whether `name` is an activation the op takes.
    static bool isKnownActivation(::llvm::StringRef name);
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNCONTRACTIONOPS_TD

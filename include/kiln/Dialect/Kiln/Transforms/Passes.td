//===- Passes.td - Kiln graph passes -----------------------*- tablegen -*-===//
//
// Graph passes on the kiln dialect, in the order the inference pipeline runs
// them: layout, precision, fusion (lib/Pipelines/Pipelines.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AssignLayoutPass : Pass<"kiln-assign-layout", "mlir::ModuleOp"> {
  let summary = "Choose NCHW or NHWC per op and make layout changes explicit";
  let description = [{
    Picks channels-first (`nchw`) or channels-last (`nhwc`) activations for
    every 2-D and 3-D image op, and makes each layout change an explicit
    `kiln.transpose`. `layout=auto` picks `nhwc` when the convolutions run
    on tensor cores: `precision` is `tf32`, `bf16` or `fp16` and the code
    generator has tensor-core convolution kernels (`tensor-core-convs`).
    `kilnc` passes `tensor-core-convs` as its `--contraction-kernels`
    (default true), with which `kiln-match-contractions` turns NHWC
    convolution regions into implicit-GEMM template kernels. Without them
    auto means `nchw`: the generic kernels read NHWC filters with a stride
    of a whole filter between a warp's lanes, and on an H200 ResNet-50 at
    batch 32 took 532 ms in NHWC against 52-54 ms in NCHW, in bf16 and fp32
    alike (docs/benchmarks.md). In fp32 auto means `nchw`, unless
    `int8-convs` is set (kilnc's `--int8-kernels`) and the module holds a
    quantized convolution chain the int8 tensor-core kernel takes
    (`QuantizedChains.h`): an int8 model is a tensor-core model whatever
    its float precision, and that kernel reads NHWC images. The
    rules, in the order the pass applies them:

    - **Layout-sensitive ops.** Every `kiln.conv`, `kiln.conv_transpose`
      and `kiln.pool` on a rank-4 or rank-5 tensor takes the target
      `data_format`: its input and filter are transposed into the target
      layout before it and its result back after it. 1-D (rank-3) ops keep
      their layout.
    - **Propagation.** A transpose back to the other layout moves below the
      layout-agnostic ops that read it, which then work in the target
      layout: elementwise ops (unary, cast, binary with broadcasting,
      select), `softmax`/`log_softmax`/`argmax`/`argmin` (axis remapped),
      `reduce` (axes remapped; without `keepdims` a smaller transpose
      restores the order of the surviving dims where it differs),
      `concat`/`split` (axis remapped), `slice`/`pad`/`tile` (per-dimension
      lists permuted), and `batch_norm`/`global_pool`, which switch their
      `data_format`. A broadcast operand of an elementwise op (a bias or a
      batch-norm parameter of shape `[C, 1, 1]`) is extended to the full
      rank and permuted too: a permutation that only moves unit dims is a
      `kiln.reshape` (no data moves), otherwise the operand must be known at
      compile time (its transpose folds into the weight). An op with any
      other operand keeps the transpose in front of it: that is where the
      layouts meet, as at function results and ops with no layout variant
      (`lrn`, `instance_norm`, `layer_norm`, `resize`, `gather`).
    - **Hoisting.** A transpose into the target layout that is the only
      use of an elementwise op moves above it when at most one operand then
      needs a run-time transpose (input scaling before the first
      convolution: the transpose lands on the function argument).
    - **Cancellation.** `transpose(transpose(x))` composes and an identity
      permutation folds away, so a back transpose that reaches the next
      converted op cancels with its input transpose. A transpose that only
      moves unit dims becomes a `kiln.reshape` (global pooling's
      `[1, C, 1, 1]` result, flattened before a classifier).
    - **Reshapes** (`nhwc` only) pass a layout transpose only where that is
      legal without moving data: a reshape that splits the channel dim
      (`[N, C, H, W] -> [N, g, C/g, H, W]`) becomes a split of the last dim
      followed by a transpose, and a channels-last transpose of a reshape
      that merges dims into the channels becomes a transpose followed by the
      merge; the transposes then compose with the model's own (a channel
      shuffle is one transpose in NHWC). A flatten of `[N, C, H, W]` that
      feeds a `kiln.matmul` with a compile-time weight `[C * H * W, O]`
      flattens the NHWC value instead, and the weight's rows are permuted
      to match (folded into the weight). Any other reshape keeps the
      transpose in front of it.
    - **Channel padding** (`nhwc` only). A convolution with `groups = 1`
      whose input channel count is not a multiple of `channel-multiple`
      (default 8, what tensor-core MMA shapes need along the reduction)
      reads its input padded with zero channels (`kiln.pad`) and its filter
      padded alike; zero channels add nothing to the sums, and the
      function's inputs and outputs keep their shapes. `channel-multiple=1`
      turns this off. With `int8-convs`, quantized convolution chains are
      not padded (the int8 kernel pads its filter to its 16-channel chunk
      at compile time, and a pad between the chain's ops would hide it).
    - **Weights.** A transpose or pad of a value known at compile time (an
      immutable `ml_program.global`, a `kiln.constant`, possibly reshaped)
      becomes a load of a new global holding the moved data (`@w_nhwc`,
      `@w_nhwc_pad`, `@w_t`), computed here; the old global is erased when
      nothing reads it. Small all-constant results stay `kiln.constant`.
      This also folds the transposes the importer writes for `Gemm`
      weights, with any layout. The new global's `kiln.origin` (the source's
      initializer plus the `transpose`/`pad`/`reshape` steps) is recorded,
      so new weights can be bound into the artifact (`kiln-run --weights`).

    Running the pass a second time changes nothing. The pass is a module
    pass because the weight rule adds globals.

    Example (`layout=nhwc`):

    ```mlir
    func.func @main(%x: tensor<1x3x32x32xf32>) -> tensor<1x16x16x16xf32> {
      %w = ml_program.global_load_const @w : tensor<16x3x3x3xf32>
      %b = kiln.constant dense<0.5> : tensor<16x1x1xf32>
      %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
          padding = array<i64: 1, 1, 1, 1>}
          : (tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x32x32xf32>
      %a = kiln.add %c, %b : tensor<1x16x32x32xf32>, tensor<16x1x1xf32> -> tensor<1x16x32x32xf32>
      %r = kiln.relu %a : tensor<1x16x32x32xf32>
      %p = kiln.pool <max> %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
          dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>}
          : tensor<1x16x32x32xf32> -> tensor<1x16x16x16xf32>
      return %p : tensor<1x16x16x16xf32>
    }
    // becomes
    func.func @main(%x: tensor<1x3x32x32xf32>) -> tensor<1x16x16x16xf32> {
      %t = kiln.transpose %x {permutation = array<i64: 0, 2, 3, 1>}
          : tensor<1x3x32x32xf32> -> tensor<1x32x32x3xf32>
      %xp = kiln.pad <constant> %t {low = array<i64: 0, 0, 0, 0>, high = array<i64: 0, 0, 0, 5>}
          : tensor<1x32x32x3xf32> -> tensor<1x32x32x8xf32>
      %w = ml_program.global_load_const @w_nhwc_pad : tensor<16x3x3x8xf32>
      %c = kiln.conv %xp, %w {..., data_format = #kiln.data_format<nhwc>}
          : (tensor<1x32x32x8xf32>, tensor<16x3x3x8xf32>) -> tensor<1x32x32x16xf32>
      %b = kiln.constant dense<0.5> : tensor<1x1x1x16xf32>
      %a = kiln.add %c, %b : tensor<1x32x32x16xf32>, tensor<1x1x1x16xf32> -> tensor<1x32x32x16xf32>
      %r = kiln.relu %a : tensor<1x32x32x16xf32>
      %p = kiln.pool <max> %r {..., data_format = #kiln.data_format<nhwc>}
          : tensor<1x32x32x16xf32> -> tensor<1x16x16x16xf32>
      %y = kiln.transpose %p {permutation = array<i64: 0, 3, 1, 2>}
          : tensor<1x16x16x16xf32> -> tensor<1x16x16x16xf32>
      return %y : tensor<1x16x16x16xf32>
    }
    ```

    Errors: a `layout` other than `nchw`, `nhwc`, `auto`, a `precision`
    other than `fp32`, `tf32`, `bf16`, `fp16`, or a `channel-multiple` below
    1 fails the pass with one line.
  }];
  let options = [
    Option<"layout", "layout", "std::string", /*default=*/"\"auto\"",
           "nchw, nhwc, or auto (NHWC when the precision uses tensor cores)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "the precision the model is compiled for (auto layout uses it)">,
    Option<"tensorCoreConvs", "tensor-core-convs", "bool", /*default=*/"true",
           "whether convolutions in a low precision get tensor-core kernels "
           "(auto layout picks NHWC only then; kilnc passes its "
           "--contraction-kernels)">,
    Option<"channelMultiple", "channel-multiple", "int64_t", /*default=*/"8",
           "pad the input channels of NHWC convolutions to a multiple of "
           "this (1: no padding)">,
    Option<"int8Convs", "int8-convs", "bool", /*default=*/"false",
           "quantized convolution chains run on the int8 tensor-core kernel "
           "(kilnc --int8-kernels): auto layout picks NHWC when the module "
           "has one, and their channels are not padded (the kernel pads the "
           "filter itself)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def LowerPrecisionPass : Pass<"kiln-lower-precision", "mlir::ModuleOp"> {
  let summary = "Run matmuls and convolutions in a lower precision";
  let description = [{
    Runs `kiln.matmul`, `kiln.conv` and `kiln.conv_transpose` on `bf16` or
    `f16` operands with `f32` accumulation, or on `f32` operands rounded to
    `tf32`, and keeps everything numerically sensitive in `f32`. Precision
    changes are explicit `kiln.cast` ops. The policy, rule by rule:

    - **Contractions.** `f32` operands (lhs and rhs; input and filter) are
      cast to the low type; the result stays `f32`: the products accumulate
      in `f32` and are not rounded back, so bias, batch norm, activations and
      residual adds after a convolution see the accumulator (fusion puts
      them, and the narrowing cast the next contraction needs, in the
      contraction's epilogue). A bias stays `f32`. A contraction the model
      declares in `bf16`/`f16` gets an `f32` result too, cast back to the
      declared type after it. A window sum stays `f32`: a convolution whose
      filter holds only ones (and zero channel padding), as the importer
      computes LpPool's sums of `|x|^p`, whose range `f16` does not hold.
    - **`tf32`.** The operand types stay `f32`; each operand is rounded to
      `tf32` (10 mantissa bits, nearest even) by the pair
      `kiln.cast f32 -> tf32` + `kiln.cast tf32 -> f32`. Tensor cores round
      (or truncate) `f32` inputs of a tf32 MMA this way; the scalar kernels
      emulate it: kiln-lower-to-linalg turns the pair into one kernel that
      rounds the bits (`cvt.rn.tf32.f32` semantics) and stores `f32`. The
      template kernels take the pair off and round themselves: mma.sync
      with `cvt.rna`; the sm_90a wgmma kernel rounds each shared-memory
      stage with `cvt.rna` before its wgmmas read it (the tensor core itself
      would keep an unrounded operand's upper 19 bits, truncating it, as
      CUTLASS's sm90 tf32 kernels leave it to; weights are also rounded at
      compile time, below).
    - **f32-only ops.** `softmax`, `log_softmax`, `layer_norm`,
      `batch_norm`, `instance_norm`, `lrn`, `reduce`, average `pool` and
      `global_pool`,
      and `exp`, `log`, `erf`, `pow`, `sigmoid`, `softplus`, `gelu`, `elu`,
      `tanh` compute in `f32`: `bf16`/`f16` operands of these ops (a model
      declared in a low type) are cast to `f32` and their results cast back.
      With `fp16` this is also the overflow guard: sums, means and variances
      of values near 65504 never form in `f16`. Because contractions return
      `f32`, these ops never get low operands from the pass itself.
    - **Other elementwise ops** keep the type they have: the pass never
      narrows them, and ops the model declares in `bf16`/`f16` stay low.
    - **Hoisting.** A narrowing cast to `bf16`/`f16` moves above pure data
      movement (`reshape`, `transpose`, `broadcast`, `slice`, `tile`,
      `concat`, `gather`) and max pools (`pool <max>`, `global_pool <max>`:
      rounding is monotone, so the max of rounded values is the rounded
      max) when every user of that op narrows the same way; the result is
      bit-identical and the op handles half the bytes. (ResNet's stem conv
      then stores `bf16` and its max pool reads `bf16`.)
      Casts are placed right after the value they convert, so one cast
      serves every use (merging).
    - **Shared values** (`residual-precision`). A `f32` value that a
      contraction reads narrowed and other ops read as it is (ResNet's block
      output: the next convolution's image and the next residual add's
      operand) stays exact for those other ops by default (`fp32`): fusion
      then stores it twice, in `f32` and in the low type. With `low` the
      other ops read the narrowed value widened back
      (`cast(cast(x, bf16), f32)`), so only the low-precision copy is
      stored, as PyTorch autocast and TensorRT keep activations: fewer
      bytes (ResNet-50 bf16 at batch 32: 3.04 -> 2.27 GB moved, `kilnc
      --stats`; emu estimate 1215 -> 972 us) for one more rounding of the
      skip connection (ResNet-50 with random weights vs onnxruntime fp32:
      1.1e-2, against 1.3e-2 with `fp32`; both are bf16 rounding noise).
      Values the function returns keep `f32`.
    - **Cancelling.** `cast(cast(x))` becomes one cast (or `x`) only when the
      middle type holds every value of the source (`bf16 -> f32 -> bf16`,
      `f16 -> f32 -> f16`); `f32 -> bf16 -> f32` rounds and is kept.
      Unused casts are erased.
    - **Weights.** A cast (or tf32 rounding pair) of an immutable `f32`
      `ml_program.global` becomes a load of a new global (`@w_bf16`,
      `@w_f16`, `@w_tf32`) holding the converted values, computed at compile
      time with round-to-nearest-even; the `f32` global is erased when
      nothing else reads it. A cast of a `kiln.constant` (a splat, as
      `ConstantOfShape` imports) folds into a converted constant. No kernel
      converts weights at run time; the new global's `kiln.origin` gains
      a `convert` step (`kiln-run --weights` replays it). (A
      tf32 global keeps type `f32` and carries `kiln.tf32_rounded`, so a
      second run does not round it again.)
    - **Inputs and outputs** keep their declared types. `io-precision`
      (`fp32`, `bf16`, `fp16`) changes the `f32`/`bf16`/`f16` arguments and
      results of every function to that type, with casts at the entry and
      before the return (which then cancel where lossless).

    `precision=fp32` without `io-precision` changes nothing. Running the
    pass a second time changes nothing. The pass is a module pass because
    the weight rule adds globals. It rewrites function bodies, never the
    inside of a `kiln.fusion` region (a kernel already formed).

    Example (`precision=bf16`):

    ```mlir
    ml_program.global private @w(dense_resource<w> : tensor<64x32xf32>) : tensor<64x32xf32>
    func.func @main(%x: tensor<8x64xf32>) -> tensor<8x32xf32> {
      %w = ml_program.global_load_const @w : tensor<64x32xf32>
      %y = kiln.matmul %x, %w : tensor<8x64xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
      %z = kiln.softmax %y {axis = 1 : i64} : tensor<8x32xf32> -> tensor<8x32xf32>
      return %z : tensor<8x32xf32>
    }
    // becomes
    ml_program.global private @w_bf16(dense_resource<w_bf16> : tensor<64x32xbf16>) : tensor<64x32xbf16>
    func.func @main(%x: tensor<8x64xf32>) -> tensor<8x32xf32> {
      %xl = kiln.cast %x : tensor<8x64xf32> -> tensor<8x64xbf16>
      %w = ml_program.global_load_const @w_bf16 : tensor<64x32xbf16>
      %y = kiln.matmul %xl, %w : tensor<8x64xbf16>, tensor<64x32xbf16> -> tensor<8x32xf32>
      %z = kiln.softmax %y {axis = 1 : i64} : tensor<8x32xf32> -> tensor<8x32xf32>
      return %z : tensor<8x32xf32>
    }
    ```

    Errors: an unknown `precision` or `io-precision` (`tf32` is not a
    storage type, so not an io-precision) fails the pass with one line.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32, tf32, bf16 or fp16">,
    Option<"ioPrecision", "io-precision", "std::string", /*default=*/"\"\"",
           "element type of model inputs and outputs: fp32, bf16 or fp16 "
           "(default: as declared)">,
    Option<"f32HeadLayers", "f32-head-layers", "int64_t", /*default=*/"0",
           "keep the last N layers of contractions before the outputs in f32 "
           "(a classifier's head; 0: none)">,
    Option<"residualPrecision", "residual-precision", "std::string",
           /*default=*/"\"fp32\"",
           "values a bf16/f16 contraction reads that other ops read too "
           "(skip connections): fp32 or low (f32: fp32, the old spelling)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def FuseSiblingContractionsPass
    : Pass<"kiln-fuse-sibling-contractions", "mlir::ModuleOp"> {
  let summary = "Merge matmuls that share an input into one with concatenated weights";
  let description = [{
    Horizontal fusion (issue 23). Matmuls in one block that read the same
    left operand with constant weights `[K][N_i]` of one element type (the
    Q, K and V projections of an attention layer) become one matmul
    against a new global holding the weights concatenated along N
    (`[K][sum N_i]`); when every sibling adds a constant `[N_i]` bias, the
    biases are concatenated the same way and added once. Each sibling's
    value becomes a `kiln.slice` of the fused result along its last
    dimension: kiln-fuse copies slices into their consumers as index
    arithmetic, and the attention kernel reads its operands through them at
    an offset, so one kernel replaces one per sibling and nothing is copied.

    A sibling is left alone when its weight is not a constant global of
    rank 2 (an activation, a mutable parameter), when its siblings differ
    in input, K, element type or in having a bias, or when its slice would
    not be free: its value (or a reshape, transpose, slice or broadcast of
    it) is a function result (the output would be a copy), is read by a
    matmul against a constant weight (a GEMM kernel takes whole buffers,
    so it would read a copy), or the value itself has an elementwise user
    (that would be its kernel's epilogue, and the fused kernel has one
    epilogue for all columns). Concats and attention-like matmuls (both
    operands activations) read through slices. The new globals' origins
    stack the siblings' origins and end in `concat AXIS`
    (docs/artifact-format.md), so stripped artifacts rebind; a sibling
    without an origin leaves the fused weight without one. Globals nothing
    loads afterwards are erased.

    Example (the encoder's Q and K projections):

    ```mlir
    %q = kiln.matmul %x, %wq : tensor<1x128x256xf32>, tensor<256x256xf32> -> tensor<1x128x256xf32>
    %k = kiln.matmul %x, %wk : tensor<1x128x256xf32>, tensor<256x256xf32> -> tensor<1x128x256xf32>
    // becomes
    %w = ml_program.global_load_const @wq_siblings : tensor<256x512xf32>
    %f = kiln.matmul %x, %w : tensor<1x128x256xf32>, tensor<256x512xf32> -> tensor<1x128x512xf32>
    %q = kiln.slice %f {starts = array<i64: 0, 0, 0>, limits = array<i64: 1, 128, 256>, steps = array<i64: 1, 1, 1>} : ...
    %k = kiln.slice %f {starts = array<i64: 0, 0, 256>, limits = array<i64: 1, 128, 512>, steps = array<i64: 1, 1, 1>} : ...
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def FuseQuantizedPass : Pass<"kiln-fuse-quantized", "mlir::func::FuncOp"> {
  let summary = "Put quantized matmul and convolution chains into regions "
                "for the int8 kernel";
  let description = [{
    Issue 26, stage 2. Recognises, around each `kiln.matmul` and
    `kiln.conv`, the compositions the importer writes for the quantized
    ONNX ops (`include/kiln/Dialect/Kiln/Transforms/QuantizedChains.h`):

    - **QLinearMatMul**: i8/ui8 operands cast to i32 (minus a constant zero
      point), an i32 matmul, then cast, multiply by one constant scale,
      round, add the output zero point, clip and cast to i8/ui8;
    - **MatMulInteger**: the same without the requantization (i32 output);
    - **QDQ** (DequantizeLinear -> MatMul -> QuantizeLinear): each operand
      cast to f32, minus its zero point, times its scale; an f32 matmul;
      divided by the output scale, rounded, plus the zero point, clipped and
      cast;
    - **QLinearConv**, **ConvInteger** and **QDQ convolutions** likewise
      (the importer's integer convolutions are f64 convolutions of the i32
      values cast up), with per-output-channel weight parameters along the
      filter's dimension 0 and multipliers along the result's dimension 1,
      and a bias the kernel can add as int32: QLinearConv's (folded to
      integral values), or a QDQ one folded to f32, whose int32 values
      `bias / (a_scale * w_scale[o])` must give back every folded value
      exactly.

    The zero point's add may be missing (the importer leaves out a zero
    point 0); the clip must be the output type's range. B must be a
    constant weight (`ml_program.global_load_const`): the int8 kernel
    (`Family::MmaS8`) reads it K-major and folds A's zero point into a
    per-column offset at compile time. A's scale and zero point are one
    constant each; B's may also be one per column (a constant or a
    constant global along N, through reshapes and integer casts), as
    `quantize_static(per_channel=True)` writes them. The kernel's scale is
    the f32 multiplier onnxruntime uses, `(a_scale * b_scale) / y_scale`
    in f32 (one per column with per-column weight scales).

    A requantized int8 chain whose result's only reader is a QDQ residual
    block (dequantized, added to another per-tensor dequantized 8-bit
    tensor of the same shape, optionally Relu, quantized per tensor to 8
    bits: a ResNet add as onnxruntime's quantizer writes it) takes the
    block too: the region reads the other tensor from above and yields the
    block's result, and the kernel runs the block in its epilogue
    (`IntegerEpilogue::Residual`). The remark and report line end in
    `; + residual <type> zero point <z>[, Relu], sum <type> zero point
    <z>`.

    A QDQ chain of float8 operands (opset 19's DequantizeLinear of
    f8E4M3FN or f8E5M2 tensors, as `kilnc --precision=fp8` writes them)
    is an fp8 chain: its zero points are 0, its result is the f32 product
    with its f32 bias added or, when that sum's only reader is a
    saturating QuantizeLinear to e4m3 or e5m2 (after a Relu or not), that
    float8 value (the kernel divides by y_scale and stores float8),
    and its region gets a `wgmma_f8` (sm_90 with wgmma) or `mma_f8`
    config: the fp8 kernels (`Family::WgmmaF8`, `MmaF8`) multiply the
    exact-product sum by `a_scale * b_scale[n]` in f32 and add the bias.
    The FNUZ variants (no NVIDIA instruction reads them), and an 8-bit
    integer operand with a float8 one, stay on the fallback, reported as
    `fp8 fallback` (`int8 fallback` when A is an integer).

    With `regions` (the default), each matmul chain (the ops between its
    8-bit operands and its result) becomes one `kiln.fusion` region of
    kind `quantized_matmul`, and each channels-last (NHWC) convolution
    chain one of kind `quantized_conv` (the kernel is an implicit GEMM over
    the NHWC image). A channels-first convolution chain stays on the
    fallback, reported: kilnc runs the pass twice, on matmuls before
    sibling fusion (`convolutions=false`) and on convolutions after
    kiln-assign-layout has made them NHWC (`matmuls=false`; its
    `int8-convs` option picks NHWC for them under the auto layout). A
    depthwise chain (one input channel per group) stays on the fallback
    too: the kernel's 16-channel chunks would be 15/16 zeros. kiln-select-contraction-kernels gives it a
    `wgmma_s8` (sm_90 with wgmma) or `mma_s8` config and kiln-match-contractions the int8 tensor-core
    kernel, reading the parameters again from the region's ops; a region
    no kernel takes is the exact fallback in one generic kernel. An
    intermediate value something else also reads (a dequantized activation
    feeding a float op) stays computed outside for that reader.

    Before matching convolutions, a convolution whose input is a
    kiln-assign-layout transpose (or the reshape canonicalization makes of
    one, for one channel) of a per-tensor dequantize (a cast up from 8
    bits, then sub/mul/add by single values: a graph input's QDQ, still
    NCHW) gets the transpose moved below the cast, onto the 8-bit tensor,
    so that its A is a dequantized 8-bit tensor again.

    Each chain that does not fit (a per-row zero point of A, a scale along
    B's K, a non-constant scale or weight, a scale that is not an f32
    value, a bias that is no int32, a clip narrower than the type, no
    requantization after a dequantized product, a channels-first or
    depthwise convolution), is recorded on the function as one line of
    `kiln.quantized_report` (appended to what an earlier run recorded) (kilnc --stats prints
    them) and keeps the exact fallback lowering. Float matmuls whose A is
    not dequantized are no quantized chains and are not mentioned. With
    `report`, one remark per chain says the same (and, for a match, the
    kernel's parameters).

    Example (QLinearMatMul, u8 activations with zero point 3, s8 weights):

    ```mlir
    %0 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xi32>
    %1 = kiln.sub %0, %c3 : tensor<4x32xi32>, tensor<i32> -> tensor<4x32xi32>
    %2 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
    %3 = kiln.matmul %1, %2 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
    ... cast, mul, round, add, clip, cast to ui8
    ```

    becomes

    ```mlir
    %r = kiln.fusion "quantized_matmul" -> tensor<4x16xui8> {
      ... the same ops, reading %x, %w and the constants ...
      kiln.yield %12 : tensor<4x16xui8>
    }
    ```
  }];
  let options = [
    Option<"regions", "regions", "bool", /*default=*/"true",
           "Put each chain the int8 kernel can run into a quantized_matmul "
           "or quantized_conv region">,
    Option<"matmuls", "matmuls", "bool", /*default=*/"true",
           "Look at matmul chains">,
    Option<"convolutions", "convolutions", "bool", /*default=*/"true",
           "Look at convolution chains">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per quantized chain: the int8 kernel's "
           "parameters, or why it stays on the exact fallback">
  ];
  let dependentDialects = ["::kiln::KilnDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def FusePass : Pass<"kiln-fuse", "mlir::func::FuncOp"> {
  let summary = "Group ops into kiln.fusion regions, one kernel each";
  let description = [{
    Forms `kiln.fusion` regions; `kiln-collapse-fusions` then makes each one
    a single `linalg.generic` that computes every value of the region at the
    point where it is used, so each region is exactly one kernel and nothing
    computed inside it reaches memory. The whole policy (the cost model) is
    in `lib/Dialect/Kiln/Transforms/Fuse.cpp`; its rules, in order:

    1. **Epilogues.** An elementwise op joins the region of one of its
       operands' producers when its result has that region's shape (the
       kernel's iteration space) and no other operand depends on the region
       (regions stay acyclic). Convolutions, matmuls, reductions and pooling
       thus absorb bias, batch norm at inference, activation, residual add,
       scale and cast. A value also used outside its region becomes one more
       result of it (same shape), written once. A lossless widening cast
       (`bf16`/`f16` -> `f32`) is the exception: it costs nothing where its
       result is read, so it is a prologue of its consumers (rule 3) and the
       producer stores the narrow value alone (kiln-lower-precision's
       `residual-precision=low` makes such casts for skip connections).
    2. **Short contractions into softmax.** A softmax whose input comes from
       a matmul with a reduction of at most 64 (attention scores: head
       dimension) absorbs that matmul: the row kernel recomputes each score
       in its three passes over the row (max, sum, normalise), which costs
       less than writing and re-reading the scores tensor.
    3. **Prologues.** Data movement (transpose, reshape, broadcast, slice,
       constant pad, concat, gather, gather_elements, tile) is copied into
       every consumer region,
       where it becomes index arithmetic; cheap elementwise producers are
       copied into elementwise and reduction regions, and into a
       contraction's region only when that region is their only user (an
       elementwise op is never duplicated into a contraction's inner loop).
       A producer's whole cone is copied or none of it. A cheap region that
       every user copied is not materialized.
    4. **Side by side.** Matmul regions with one result type that read the
       same input and do not depend on each other become one region with a
       result each (Q, K and V projections: one kernel).
    5. **Attention** (option `attention`, which kilnc sets with
       `--contraction-kernels`). A matmul whose left operand is a softmax
       over the last axis (through elementwise ops such as a cast to bf16),
       whose input is computed from a matmul by elementwise ops only (the
       scale, an additive or causal mask), becomes one region of kind
       `attention` holding both matmuls, the ops between them and their
       operands' data movement (the head split, K's transpose, GQA's
       broadcast of K and V). It runs before rule 2 and only when each
       intermediate value has no user outside the pattern;
       `kiln-match-contractions` makes the region one flash-attention
       kernel, or splits it back when it cannot.

    Bounds: at most 48 ops per region (registers); contractions, reductions
    and pooling are never duplicated except under rule 2. Ops fusion does
    not know (resize, scatter, ...) stay outside regions. Regions are never
    re-fused, so running the pass twice changes nothing.

    `kilnc --stats` prints kernels and estimated bytes moved, fused and
    unfused; `scripts/fusion-report.sh` checks issue 5's targets on ResNet-50
    (batch 1 and 32) and the encoder layer (measurements below).

    Example (a ResNet bottleneck's last convolution):

    ```mlir
    %c = kiln.conv %x, %w {...} : (...) -> tensor<1x256x56x56xf32>
    %b = kiln.batch_norm %c, %s, %o, %m, %v : (...) -> tensor<1x256x56x56xf32>
    %a = kiln.add %b, %shortcut : ...
    %r = kiln.relu %a : tensor<1x256x56x56xf32>
    // becomes
    %r = kiln.fusion "conv" -> tensor<1x256x56x56xf32> {
      %c = kiln.conv %x, %w {...} : (...) -> tensor<1x256x56x56xf32>
      %b = kiln.batch_norm %c, %s, %o, %m, %v : (...) -> tensor<1x256x56x56xf32>
      %a = kiln.add %b, %shortcut : ...
      %r = kiln.relu %a : tensor<1x256x56x56xf32>
      kiln.yield %r : tensor<1x256x56x56xf32>
    }
    ```

    and in the encoder layer, attention scores with their scale and softmax:

    ```mlir
    %p = kiln.fusion "matmul+softmax" -> tensor<1x4x128x128xf32> {
      %q = kiln.transpose (kiln.reshape %proj#0) ...   // indexing only
      %k = kiln.transpose (kiln.reshape %proj#1) ...
      %s = kiln.matmul %q, %k : ... -> tensor<1x4x128x128xf32>
      %d = kiln.div %s, %scale : ...
      %p = kiln.softmax %d {axis = 3 : i64} : tensor<1x4x128x128xf32>
      kiln.yield %p : tensor<1x4x128x128xf32>
    }
    ```
  }];
  let options = [
    Option<"attention", "attention", "bool", /*default=*/"false",
           "fuse matmul -> softmax -> matmul into one `attention` region "
           "(rule 5; for kiln-match-contractions' attention kernel)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def AugmentPass : Pass<"kiln-augment", "mlir::ModuleOp"> {
  let summary = "Random crop, flip and normalisation of a training image input";
  let description = [{
    On-device data augmentation (`kilnc --train --augment=SPEC`). Runs after
    kiln-autodiff, on the training function (`train-function`, default
    `@train_grad`) and the evaluation function (`eval-function`, default
    `@main`; empty for none). `input` names the image input (default: the
    first argument), a static 4-D float tensor, NCHW unless the spec says
    `layout:nhwc`. SPEC is a comma-separated list:

    - `crop:PAD`: zero-pad height and width by PAD on each side, then take
      the window at a per-sample offset `(dy, dx)`, each
      `philox_word mod (2 PAD + 1)` (the word read as a signed i32, the
      remainder non-negative);
    - `flip`: mirror the width of each sample whose word is negative (its
      top bit set: probability 1/2);
    - `normalize:MEAN/STD`: `(x - MEAN) / STD` per channel, one number for
      all channels or one per channel each (`normalize:0.49,0.48,0.45/
      0.25,0.24,0.26`); the evaluation function normalises too.

    They apply in that order (crop, flip, normalise), whatever the order
    in SPEC. The words are `kiln.philox` draws of shape `[N]` (element n is
    sample n) from the function's `rng.key` and `rng.counter` arguments
    (added when dropout has not added them; kiln-optimizer feeds them from
    the RNG state, so every step draws anew and runs reproduce), with the
    streams 2^31 (crop rows), 2^31 + 1 (crop columns) and 2^31 + 2 (flip);
    dropouts use the streams 0, 1, .... Everything is kiln ops (pad,
    gather_elements, slice with step -1, select), compiled into the entry
    point's kernels.

    Errors (one line each): a SPEC token that is not one of the above, a
    non-positive PAD or STD, MEAN and STD of different lengths or not one
    per channel, an input that is not a static 4-D float tensor, a missing
    function or input.
  }];
  let options = [
    Option<"spec", "spec", "std::string", /*default=*/"\"\"",
           "flip,crop:PAD,normalize:MEAN/STD,layout:nchw|nhwc">,
    Option<"input", "input", "std::string", /*default=*/"\"\"",
           "the image input (default: the first argument)">,
    Option<"trainFunction", "train-function", "std::string",
           /*default=*/"\"train_grad\"", "the function that augments">,
    Option<"evalFunction", "eval-function", "std::string",
           /*default=*/"\"main\"", "the function that only normalises">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def OptimizerPass : Pass<"kiln-optimizer", "mlir::ModuleOp"> {
  let summary = "Build @train_step (gradients + fused optimizer update) and @eval";
  let description = [{
    Consumes the gradient function the autodiff pipeline leaves,
    `func.func @train_grad(<inputs>..., <labels>...) -> (loss, grad_0, ...)`
    with `kiln.gradients = [@global_0, ...]` (grad_i has global_i's f32
    type), and the forward `@main`, and replaces both with the two entry
    points of a training artifact:

    - `@train_step(<inputs>..., <labels>..., <state>...) -> (loss,
      <new state>...)`: the gradients, optionally clipped to a global norm,
      and one optimizer update;
    - `@eval(<inputs>..., params) -> <outputs>`: the forward pass on the
      current weights.

    **Persistent state is flat.** The trainable globals (those named in
    `kiln.gradients`, in that order) are laid end to end in one
    `tensor<Nxf32>` argument `params`; each weight is a `kiln.slice` +
    `kiln.reshape` of it, and the gradients are concatenated into one
    `tensor<Nxf32>`, so the update is one elementwise kernel over all weights
    (plus one for the concatenation and, with `grad-clip`, one reduction),
    not one per weight. Optimizer state (`opt.m`, `opt.v`) has the same flat
    layout; the step counter `opt.step` is a `tensor<f32>` (exact to 2^24
    steps). State arguments carry `kiln.state = "<name>"` and `kiln.name =
    "kiln.state.<name>"`; the result that replaces a state after a step
    carries the same `kiln.state` and `kiln.name = "kiln.state.<name>.next"`.
    The module gets `kiln.training = {layout = [{global = @g, offset = O},
    ...], size = N, optimizer = "..."}` so the driver can build the initial
    state from the globals and name each weight in checkpoints. Globals not
    in `kiln.gradients` (frozen, `--freeze`) stay constant globals.

    **Batch-norm running statistics.** kiln-autodiff returns the new running
    mean and variance of each batch norm after the gradients and names
    their globals in `kiln.state_updates`. Those globals become the flat
    state `bn.stats` (last of the state arguments, the same slice +
    reshape views in both entry points, so `@eval` normalises with the
    running statistics); `@train_step`'s last result is the updates
    concatenated. The module's `kiln.training` gets `stats_layout` and
    `stats_size` (as `layout` and `size`), which name each statistic's ONNX
    initializer in checkpoints and `--export`.

    **Optimizers** (`t` = step counter + 1, `g` = gradient after clipping,
    `wd` = weight-decay; PyTorch's update rules, zero-initialised state):

    | optimizer | update |
    |---|---|
    | `sgd` | `w -= lr(t) * (g + wd*w)` |
    | `momentum` | `m = mu*m + (g + wd*w)`, `w -= lr(t) * m` |
    | `nesterov` | `m = mu*m + g'`, `w -= lr(t) * (g' + mu*m)`, `g' = g + wd*w` |
    | `adam` | `g' = g + wd*w`, `m = b1*m + (1-b1)*g'`, `v = b2*v + (1-b2)*g'^2`, `w -= lr(t) * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)` |
    | `adamw` | as adam with `g' = g`, after `w *= 1 - lr(t)*wd` |

    **Learning-rate schedules**, computed on the device from the step
    counter: `constant` (`lr`), `step` (`lr * gamma^floor((t-1)/step-size)`),
    `cosine` (`min-lr + (lr-min-lr)/2 * (1 + cos(pi * min(1, (t-w)/(T-w))))`
    with `T` = total-steps, `w` = warmup-steps). With `warmup-steps` = w > 0
    every schedule is `lr * t / w` for `t <= w`.

    **Gradient clipping** (`grad-clip` > 0): all gradients are scaled by
    `min(1, grad-clip / (||g||_2 + 1e-6))`, with the global norm over every
    trainable weight (PyTorch's `clip_grad_norm_`).

    **Loss scaling** (`loss-scale` = `dynamic` or `static`; mixed
    precision, `kilnc --loss-scale`). `@train_grad` must have the
    `kiln.loss_seed` argument (kiln-autodiff `loss-seed-argument`); it is
    replaced by the state `loss_scale` (`tensor<f32>`, initially
    `loss-scale-init`), so the backward pass computes `scale * dloss` in
    whatever precision its contractions run. Then, all on the device:

    1. the flat gradient is unscaled, `g *= 1/scale`;
    2. one reduction, `s = sum(g*g)` (the squared global norm, which
       `grad-clip` reuses), decides: the step is finite when `|s| <=
       FLT_MAX` (an inf or NaN gradient makes `s` inf or NaN; so does a
       finite gradient whose square overflows f32, which is counted as an
       overflow too);
    3. a non-finite step changes no weight, no moment and not `opt.step`
       (each next state is `select(finite, new, old)`: PyTorch's GradScaler
       skips `optimizer.step()`, so the schedule does not advance either);
    4. `dynamic` only: the scale halves on a non-finite step and
       `loss_scale.good_steps` (`tensor<f32>`) restarts at 0; after
       `loss-scale-growth-interval` finite steps in a row the scale doubles
       and the count restarts (GradScaler's growth 2, backoff 0.5). `static`
       keeps the scale.

    The loss `@train_step` returns is unscaled, and a last result
    `tensor<f32>` named `skipped` is 1 for a skipped step and 0 otherwise.
    Errors: an unknown `loss-scale`, a non-positive `loss-scale-init`, a
    growth interval outside [1, 2^24], loss scaling without the seed
    argument. Without loss scaling a `kiln.loss_seed` argument is bound to 1.

    Example (`optimizer=sgd lr=0.1`):

    ```mlir
    func.func @train_grad(%x: tensor<2x4xf32>, %y: tensor<2x3xf32>)
        -> (tensor<f32>, tensor<4x3xf32>) attributes {kiln.gradients = [@w]}
    // becomes
    func.func @train_step(%x: tensor<2x4xf32>, %y: tensor<2x3xf32>,
        %params: tensor<12xf32> {kiln.state = "params"},
        %step: tensor<f32> {kiln.state = "opt.step"})
        -> (tensor<f32> {kiln.name = "loss"},
            tensor<12xf32> {kiln.state = "params"},
            tensor<f32> {kiln.state = "opt.step"})
    ```

    **RNG state** (dropout). When `@train_grad` has the arguments
    `rng.key` (tensor<2xi32>) and `rng.counter` (tensor<4xi32>) that
    kiln-autodiff gives it for training-mode dropout, `rng.key` becomes the
    state `rng.key` (initial value `[seed mod 2^32, seed div 2^32]`, from
    `seed`; no step changes it) and `rng.counter` is `[0, 0, opt.step, 0]`
    (the step before this one, as i32): every step draws new masks, and a
    run resumed from a checkpoint (which holds both states) draws the
    same ones. The state argument carries `kiln.initial`, its first value.

    **Gradient buckets** (`bucket-elements` = E >= 1, with
    `data-parallel` and without ZeRO; kilnc `--bucket-mb`). The weights'
    gradients are grouped as PyTorch DDP groups them: from the last weight
    to the first (the backward pass produces the last layer's gradients
    first), contiguous runs of at most E elements, a larger weight alone.
    With more than one bucket, `@train_step` writes bucket k as its own
    state `grad.k` (k = 0 holds the last weights), a `kiln.concat` placed
    right after the last of its gradients is computed, so the runtime can
    start its all-reduce while the rest of the backward pass runs;
    `@train_update` reads `grad.0` ... `grad.K-1` and concatenates them
    back into the flat gradients. With one bucket (or E = 0) the state is
    `grad`, as before. The module's `kiln.training` gets `buckets`: each
    bucket's state, offset and count in the flat gradients.
    Errors: `bucket-elements` without `data-parallel`, or negative.

    **ZeRO stage 1** (`shard-optimizer` = N >= 1, with `data-parallel`;
    kilnc `--shard-optimizer=N`). The flat state is cut into N shards of
    `S = ceil(size / N)` elements; rank r owns elements `[r*S, (r+1)*S)`.
    `@train_step` writes `grad` padded with zeros to `N*S` elements.
    `@train_update` is the data-parallel update with every `tensor<size>`
    retyped to `tensor<S>`: it reads `grad.shard` (this rank's averaged
    gradients, which the runtime reduce-scatters) and `params.shard` (its
    slice of `params`), owns `opt.m`/`opt.v` of S elements, and returns
    the new `params.shard`, which the runtime all-gathers into `params`.
    When the update needs the global squared norm (`grad-clip`, loss
    scaling), a third function `@train_grad_norm(grad.shard[,
    loss_scale])` returns the shard's sum of squares of the unscaled
    gradients as state `grad.sqnorm`; the runtime sums the ranks' values,
    and `@train_update` reads the global sum from state `grad.sqnorm`
    instead of reducing its shard, so every rank clips and skips alike.
    Errors: `shard-optimizer` without `data-parallel`, or negative.

    Errors (one line each): no `@train_grad`, or no `@main`; a
    `kiln.gradients` entry that is not an f32 `ml_program.global`, or whose
    gradient's type differs from it; `@train_grad` results that are not a
    scalar loss followed by one gradient per entry; an unknown optimizer or
    schedule; a non-positive learning rate; `cosine` without
    `total-steps` > `warmup-steps`; `step` without `step-size` > 0; a
    `kiln.state_updates` entry that is not an f32 global, that is also
    trained, or whose update is missing or of another type.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd, momentum, nesterov, adam or adamw">,
    Option<"lr", "lr", "double", /*default=*/"0.01", "learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "momentum and nesterov: the momentum factor mu">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "adam(w): beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "adam(w): beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "adam(w): epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0",
           "L2 penalty (sgd, momentum, nesterov, adam) or decoupled decay "
           "(adamw)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"constant\"",
           "learning-rate schedule: constant, step or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "linear warm-up over the first N steps">,
    Option<"stepSize", "step-size", "int64_t", /*default=*/"0",
           "step schedule: multiply by gamma every N steps">,
    Option<"gamma", "gamma", "double", /*default=*/"0.1",
           "step schedule: the factor">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "cosine schedule: the step at which it reaches min-lr">,
    Option<"minLr", "min-lr", "double", /*default=*/"0",
           "cosine schedule: the final learning rate">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0",
           "clip the global gradient norm to this (0: off)">,
    Option<"lossScale", "loss-scale", "std::string", /*default=*/"\"none\"",
           "loss scaling: none, dynamic or static (needs @train_grad's "
           "kiln.loss_seed argument)">,
    Option<"lossScaleInit", "loss-scale-init", "double", /*default=*/"65536",
           "the initial (dynamic) or fixed (static) loss scale">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval", "int64_t",
           /*default=*/"2000",
           "dynamic: double the scale after this many finite steps in a row">,
    Option<"seed", "seed", "uint64_t", /*default=*/"0",
           "dropout: the initial Philox key (state rng.key)">,
    Option<"dataParallel", "data-parallel", "bool", /*default=*/"false",
           "split the update into @train_update, reading the flat "
           "gradients as state `grad` that @train_step writes, so the "
           "runtime can average them across ranks in between">,
    Option<"shardOptimizer", "shard-optimizer", "int64_t", /*default=*/"0",
           "ZeRO stage 1 over this many ranks (needs data-parallel; 0: "
           "off): @train_update runs on one rank's shard of the flat "
           "state (ceil(size / N) elements)">,
    Option<"bucketElements", "bucket-elements", "int64_t", /*default=*/"0",
           "data-parallel without ZeRO: group the gradients into buckets "
           "of at most this many elements, from the last weight to the "
           "first (a larger weight alone); with more than one, each is a "
           "state `grad.K` that @train_step writes as soon as its "
           "gradients are computed (0: one state `grad`)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def ExpandGradientsPass : Pass<"kiln-expand-gradients", "mlir::func::FuncOp"> {
  let summary = "Replace each kiln.gradient (ONNX Gradient) with its backward ops";
  let description = [{
    Each `kiln.gradient %y wrt %x0, ...` (the importer's form of
    `ai.onnx.preview.training` Gradient) becomes the reverse sweep of
    kiln-autodiff over the ops before it: the values that depend on an
    `x` are active, the seed of `y` is ones of `y`'s type (so the result is
    the gradient of the sum of `y`, the plain derivative for a scalar `y`),
    and each op on the way back applies its vector-Jacobian rule (the same
    rules as kiln-autodiff). The backward ops are inserted where the
    `kiln.gradient` was and reuse the forward values; a result whose `x`
    does not reach `y` is zeros. Gradients expand in program order, so the
    gradient of a gradient's result (a second derivative) differentiates
    the first one's backward ops. An op on the path without a rule is an
    error naming it (and its ONNX node). kilnc runs the pass right after
    import (the `kiln` phase), so inference, `--gradients` and `--train`
    all see ordinary kiln ops.

    Example:

    ```mlir
    %y = kiln.mul %x, %x : ...
    %s = kiln.reduce sum %y ...
    %dx = kiln.gradient %s wrt %x : tensor<f32> wrt tensor<3xf32>
    // becomes
    %one = kiln.constant dense<1.0> : tensor<f32>
    ... %dx = kiln.add (kiln.mul %g, %x), (kiln.mul %g, %x)
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def AutodiffPass : Pass<"kiln-autodiff", "mlir::ModuleOp"> {
  let summary = "Build @train_grad: the loss and its gradient for every weight";
  let description = [{
    Reverse-mode automatic differentiation over the kiln dialect. The pass
    leaves the forward `func.func @main` unchanged and adds
    `func.func @train_grad(<main's inputs>..., <labels>) -> (loss, grad_0,
    ..., grad_{n-1})` with the function attribute
    `kiln.gradients`, the list of the n globals in order: `loss` is a rank-0
    `f32` tensor and `grad_i`, named `grad.<initializer>`, has exactly
    `global_i`'s type and is d loss / d `global_i`. It runs on the imported
    graph, before layout, precision and fusion; the backward graph is
    ordinary kiln ops that those passes and the same kernels compile.

    - **Trainable weights** are the float `ml_program.global`s read from
      ONNX initializers (their `kiln.origin` starts with `initializer`),
      in module order, except those whose initializer name `freeze` (a
      POSIX extended regular expression) matches in full. `kilnc` imports
      every float initializer as a global when it differentiates, biases
      included.
    - **The loss** is appended to the output `loss-on` (optional when the
      model has one output): `cross_entropy` (log-softmax over dimension 1,
      the classes, then the negative log-likelihood), `nll` (the output
      holds log-probabilities), `mse` or `l1`, each the mean over the batch
      (and spatial positions for class losses), built as a `kiln.reduce
      <mean>` over every dim (times `-classes` for class losses) so that
      kilnc --dim can rescale it for a smaller batch. The labels are a new
      last argument, `labels=NAME:SHAPE:DTYPE` (`32:int64` class indices
      for a `[32, 10]` output, or float probabilities of the output's
      shape; float targets of the output's shape for `mse` and `l1`). A
      dim spelled as a symbol of the module's `kiln.dim_ranges`
      (`N:int64`, `Nx10:f32`) is that symbol's maximum, and the argument
      gets `kiln.symbolic_dims` naming it. kilnc's C++ pipeline may pass a
      hook (`AutodiffForwardHook`) that runs on `@train_grad` between the
      loss and the reverse sweep: `kilnc --train --dim` inserts its size
      masks there (docs/runtime.md "Training with a run-time batch"). With
      `loss-output=NAME` the model computes its own loss: that output,
      which must hold one float, is the loss and no labels are added.
    - **Dropout** (`kiln.dropout`, training-mode ONNX Dropout) draws its
      mask with Philox: `@train_grad` gets the arguments `rng.key`
      (tensor<2xi32>) and `rng.counter` (tensor<4xi32>) after main's
      inputs, and each dropout becomes `x * kiln.dropout_mask(rng.key,
      rng.counter)` with `stream` = its index among the function's
      dropouts. The mask is a pure function of those arguments, so the
      backward multiplies by the same mask (the multiply's VJP), which
      rematerialisation always recomputes there instead of keeping it,
      whatever `rematerialize` says (4 bytes per element kept against a few
      dozen integer operations). In `@main` dropout is the identity.
    - **Activity.** Only values that depend on a trainable weight get a
      gradient; a gradient flows into an op only through those operands.
    - **Norms in training form.** Before the sweep, `layer_norm`,
      `instance_norm` and `batch_norm` in `@train_grad` are rewritten into
      the ops they are made of (reduce mean, sub, mul, rsqrt, add), so the
      elementwise and reduction rules differentiate them. `batch_norm`
      trains with the batch's statistics (mean and biased variance over all
      but the channels, ONNX `training_mode=1`); the running mean and
      variance it read are state, not weights, and their updates
      `momentum * running + (1 - momentum) * batch` (the importer's
      `kiln.momentum`, default 0.9) follow the gradients as results named
      `update.<initializer>`, listed by the attribute `kiln.state_updates`.
    - **The reverse sweep** visits the ops in reverse order and applies
      each op's vector-Jacobian rule (`lib/Dialect/Kiln/Transforms/Autodiff/`,
      one file per op family): elementwise (`add`, `sub`, `mul`, `div`,
      `max`, `min`, `pow` with broadcasting, where a broadcast operand's
      gradient is summed back to its shape; `neg`, `abs`, `exp`, `log`,
      `sqrt`, `rsqrt`, `reciprocal`, `relu`, `leaky_relu`, `sigmoid`,
      `tanh`, `softplus`, `erf`, `gelu`, `clip`, `select`, `cast`);
      `matmul` (batched, broadcast, 1-D operands); `conv` (NCHW, 1-3
      spatial dims, strides, dilations, padding, groups: the data gradient
      is a `conv_transpose`, the filter gradient a convolution of the input
      with the output gradient, the bias gradient a sum) and
      `conv_transpose`; `pool` (max: the gradient goes to the first element
      of each window equal to the maximum; average: spread by a transposed
      convolution with a ones filter, divided by each window's count;
      ceil mode and `count_include_pad` included) and `global_pool`;
      `reshape`, `transpose`, `broadcast`, `concat`, `split`, `slice`
      (any steps: the gradient is put back with zeros between),
      `pad` (constant, reflect and edge: each padded slab is added back
      onto the element it copies), `tile`, `gather` (scatter-add into the
      table, so repeated ids sum) and `gather_elements`; `reduce` (sum, mean, max,
      min), `softmax` and `log_softmax`. Gradients of a value with several
      uses are summed.
    - **Rematerialisation** (`rematerialize`, off by default). An
      activation (a forward value a backward op reads) that is cheap (an
      elementwise op or pure data movement) and whose operands stay
      available for the backward anyway (arguments, weights, constants,
      kept or recomputed activations) is recomputed right before its first
      backward use: the clone carries `kiln.recomputed` (so CSE keeps it)
      and the forward value dies after the forward pass. A relu's output,
      for example, is recomputed from its input, which the relu's own
      gradient keeps. The module attribute `kiln.remat_report` counts the
      activations kept and recomputed, with their bytes, either way;
      `kilnc --stats` prints it with the peak arena. Measured (kilnc
      --stats, peak arena with and without): a 4-layer MLP at batch 64,
      851200 bytes both; the norms test model, 8448 with against 7680
      without (the clone is a kernel of its own and its operand lives
      longer). Hence off by default until the policy reads the memory plan
      (recompute only values live across the peak).
    - **Outputs.** A weight the loss does not depend on gets a zero
      gradient. Forward values the loss does not need are erased from
      `@train_grad`. With `gradients-as-main`, `@main` is replaced by
      `@train_grad` renamed to `@main` (`kilnc --gradients`: an inference
      artifact whose outputs are the loss and the gradients, to check them
      with `kiln-run`).
    - **Loss seed** (`loss-seed-argument`). The reverse sweep starts from
      d loss / d loss = 1, a constant. With this option `@train_grad` gets a
      last argument `tensor<f32>` with `kiln.loss_seed` (`kiln.name =
      "loss_seed"`) and starts from it instead, so every gradient is scaled
      by it while the returned loss is not: kiln-optimizer binds it to the
      loss scale (mixed precision), so the scaled values are what the
      backward's fp16 contractions see.

    Example (`loss=mse labels=t:4x2:f32`):

    ```mlir
    ml_program.global private @w(dense<...> : tensor<3x2xf32>) : tensor<3x2xf32>
        {kiln.origin = "initializer f32 3x2 w"}
    func.func @main(%x: tensor<4x3xf32> {kiln.name = "x"})
        -> (tensor<4x2xf32> {kiln.name = "y"}) {
      %w = ml_program.global_load_const @w : tensor<3x2xf32>
      %y = kiln.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
      return %y : tensor<4x2xf32>
    }
    // adds
    func.func @train_grad(%x: tensor<4x3xf32> {kiln.name = "x"},
                          %t: tensor<4x2xf32> {kiln.name = "t"})
        -> (tensor<f32> {kiln.name = "loss"}, tensor<3x2xf32> {kiln.name = "grad.w"})
        attributes {kiln.gradients = [@w]} {
      ... forward, (y - t)^2 averaged, then dW = x^T dY ...
    }
    ```

    Errors (one line each, naming what is wrong): an op on the path from
    the weights to the loss without a rule (naming the op and its ONNX
    node), a loss output that is not a float scalar, no trainable weights,
    an unknown loss, output or labels spec, labels that do not fit the
    output, a loss that does not depend on any weight.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "the loss appended to loss-on: cross_entropy, nll, mse or l1">,
    Option<"lossOn", "loss-on", "std::string", /*default=*/"\"\"",
           "the output the loss reads (default: the only output)">,
    Option<"labels", "labels", "std::string", /*default=*/"\"\"",
           "the labels argument, NAME:SHAPE:DTYPE (e.g. y:32:int64)">,
    Option<"lossOutput", "loss-output", "std::string", /*default=*/"\"\"",
           "an output that already is the scalar loss (instead of loss)">,
    Option<"freeze", "freeze", "std::string", /*default=*/"\"\"",
           "initializers whose name this regular expression matches in "
           "full do not train">,
    Option<"rematerialize", "rematerialize", "bool", /*default=*/"false",
           "recompute cheap activations in the backward pass instead of "
           "keeping them">,
    Option<"gradientsAsMain", "gradients-as-main", "bool", /*default=*/"false",
           "replace @main by @train_grad (kilnc --gradients)">,
    Option<"lossSeedArgument", "loss-seed-argument", "bool",
           /*default=*/"false",
           "seed the backward pass from a trailing tensor<f32> argument "
           "(kiln.loss_seed) instead of 1 (loss scaling)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD

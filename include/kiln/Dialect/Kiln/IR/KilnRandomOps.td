//===- KilnRandomOps.td - Counter-based random numbers -----*- tablegen -*-===//
//
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): every element's random bits are a pure function of a key, a
// counter and the element's index, so any kernel can recompute them, the
// backward pass sees the forward's draws, and runs reproduce.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNRANDOMOPS_TD
#define KILN_DIALECT_KILN_IR_KILNRANDOMOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

def Kiln_I32Tensor : RankedTensorOf<[I32]>;

def Kiln_PhiloxOp : Kiln_Op<"philox", []> {
  let summary = "Philox-4x32-10 random bits, one 32-bit word per element";
  let description = [{
    Element `i` of the result (its row-major linear index) is word `i mod 4`
    of Philox-4x32-10 applied to the counter `(counter[0] + i div 4,
    counter[1] + stream, counter[2], counter[3])`, each word wrapping modulo
    2^32, under the key `(key[0], key[1])`.
    So a result of four elements with stream 0 is exactly
    `philox4x32_10(counter, key)`, the function of the Random123 known-answer
    vectors. `stream` separates the draws of different ops that share a key
    and counter (kiln-autodiff numbers its dropouts). The words are i32
    tensors holding the unsigned bits.

    Example:

    ```mlir
    %bits = kiln.philox %key, %counter {stream = 1}
        : tensor<2xi32>, tensor<4xi32> -> tensor<8x16xi32>
    ```
  }];
  let arguments = (ins Kiln_I32Tensor:$key, Kiln_I32Tensor:$counter,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Kiln_I32Tensor:$result);
  let assemblyFormat = [{
    $key `,` $counter attr-dict `:` type($key) `,` type($counter) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_DropoutMaskOp : Kiln_Op<"dropout_mask", []> {
  let summary = "the scaled keep mask of dropout, drawn with Philox";
  let description = [{
    `bits < keep * 2^32 ? 1 / keep : 0` for every element, with `keep = 1 -
    ratio` and `bits` the element's word of `kiln.philox` with the same key,
    counter and stream (compared as unsigned integers; the threshold is
    `keep * 2^32` rounded to the nearest integer). The keep probability is
    therefore `keep` to within 2^-33. Training-mode dropout is `x *
    dropout_mask`; the backward pass multiplies by the same mask, which it
    recomputes instead of keeping. `ratio` is in `[0, 1)`.

    Example:

    ```mlir
    %m = kiln.dropout_mask %key, %counter {ratio = 0.5 : f32, stream = 0}
        : tensor<2xi32>, tensor<4xi32> -> tensor<32x128xf32>
    ```
  }];
  let arguments = (ins Kiln_I32Tensor:$key, Kiln_I32Tensor:$counter,
                       F32Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $key `,` $counter attr-dict `:` type($key) `,` type($counter) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_DropoutOp : Kiln_Op<"dropout", [SameOperandsAndResultType]> {
  let summary = "training-mode dropout, before kiln-autodiff draws its mask";
  let description = [{
    ONNX Dropout in training mode with a non-zero `ratio`. It has no RNG
    operands: kiln-autodiff rewrites it in `@train_grad` to `x *
    kiln.dropout_mask` (key and counter from the step's RNG arguments) and
    to the identity in `@main` (inference: `eval`). It never reaches code
    generation. `ratio` is in `(0, 1)`.

    Example:

    ```mlir
    %y = kiln.dropout %x {ratio = 0.1 : f32} : tensor<32x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$ratio);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNRANDOMOPS_TD

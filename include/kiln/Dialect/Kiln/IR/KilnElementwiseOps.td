//===- KilnElementwiseOps.td - Elementwise kiln ops --------*- tablegen -*-===//
//
// Unary math and activations (same type in and out), binary arithmetic and
// comparisons with numpy broadcasting, select and cast.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNELEMENTWISEOPS_TD
#define KILN_DIALECT_KILN_IR_KILNELEMENTWISEOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

// `formula` reads in terms of `x`; it becomes the op's description.
class Kiln_UnaryOp<string mnemonic, string formula, Type tensorType,
                   list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits,
          [Elementwise, SameOperandsAndResultType])> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element `x` of the "
    # "input. The result has the input's shape and element type.\n\n"
    # "Example:\n\n```mlir\n%y = kiln." # mnemonic
    # " %x : tensor<2x3xf32>\n```";
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Kiln_UnaryFloatOp<string mnemonic, string formula, list<Trait> traits = []>
    : Kiln_UnaryOp<mnemonic, formula, Kiln_FloatTensor, traits>;
class Kiln_UnaryNumericOp<string mnemonic, string formula, list<Trait> traits = []>
    : Kiln_UnaryOp<mnemonic, formula, Kiln_NumericTensor, traits>;

def Kiln_NegOp : Kiln_UnaryNumericOp<"neg", "-x"> { let hasFolder = 1; }
def Kiln_AbsOp : Kiln_UnaryNumericOp<"abs", "|x|"> { let hasFolder = 1; }
def Kiln_ExpOp : Kiln_UnaryFloatOp<"exp", "e^x">;
def Kiln_LogOp : Kiln_UnaryFloatOp<"log", "ln(x)">;
def Kiln_SqrtOp : Kiln_UnaryFloatOp<"sqrt", "sqrt(x)">;
def Kiln_RsqrtOp : Kiln_UnaryFloatOp<"rsqrt", "1 / sqrt(x)">;
def Kiln_ReciprocalOp : Kiln_UnaryFloatOp<"reciprocal", "1 / x">;
def Kiln_TanhOp : Kiln_UnaryFloatOp<"tanh", "tanh(x)">;
def Kiln_SigmoidOp : Kiln_UnaryFloatOp<"sigmoid", "1 / (1 + e^-x)">;
def Kiln_ErfOp : Kiln_UnaryFloatOp<"erf", "erf(x)">;
def Kiln_SinOp : Kiln_UnaryFloatOp<"sin", "sin(x)">;
def Kiln_CosOp : Kiln_UnaryFloatOp<"cos", "cos(x)">;
def Kiln_AsinOp : Kiln_UnaryFloatOp<"asin", "asin(x)">;
def Kiln_AcosOp : Kiln_UnaryFloatOp<"acos", "acos(x)">;
def Kiln_AtanOp : Kiln_UnaryFloatOp<"atan", "atan(x)">;
def Kiln_SinhOp : Kiln_UnaryFloatOp<"sinh", "sinh(x)">;
def Kiln_CoshOp : Kiln_UnaryFloatOp<"cosh", "cosh(x)">;
def Kiln_AsinhOp : Kiln_UnaryFloatOp<"asinh", "asinh(x)">;
def Kiln_AcoshOp : Kiln_UnaryFloatOp<"acosh", "acosh(x)">;
def Kiln_AtanhOp : Kiln_UnaryFloatOp<"atanh", "atanh(x)">;
def Kiln_FloorOp : Kiln_UnaryFloatOp<"floor", "floor(x)"> { let hasFolder = 1; }
def Kiln_CeilOp : Kiln_UnaryFloatOp<"ceil", "ceil(x)"> { let hasFolder = 1; }
def Kiln_RoundOp : Kiln_UnaryFloatOp<"round",
    "x rounded to the nearest integer, ties to even">;
def Kiln_SignOp : Kiln_UnaryNumericOp<"sign", "-1, 0 or 1 by the sign of x"> { let hasFolder = 1; }
def Kiln_NotOp : Kiln_UnaryOp<"not", "logical not x", Kiln_BoolTensor> { let hasFolder = 1; }
def Kiln_BitwiseNotOp : Kiln_UnaryOp<"bitwise_not",
    "~x, every bit of the integer x flipped", Kiln_IntTensor>;
def Kiln_ReluOp : Kiln_UnaryNumericOp<"relu", "max(x, 0)">;
def Kiln_SoftplusOp : Kiln_UnaryFloatOp<"softplus", "ln(1 + e^x)">;
def Kiln_HardSwishOp : Kiln_UnaryFloatOp<"hard_swish",
    "x * max(0, min(1, x / 6 + 1 / 2))">;

def Kiln_LeakyReluOp : Kiln_UnaryFloatOp<"leaky_relu",
    "x >= 0 ? x : alpha * x"> {
  let arguments = (ins Kiln_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.01f">:$alpha);
}

def Kiln_EluOp : Kiln_UnaryFloatOp<"elu", "x >= 0 ? x : alpha * (e^x - 1)"> {
  let arguments = (ins Kiln_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "1.0f">:$alpha);
}

def Kiln_GeluOp : Kiln_UnaryFloatOp<"gelu", "x * Phi(x)"> {
  let description = [{
    The Gaussian error linear unit, `x * Phi(x)` with `Phi` the standard
    normal CDF. Exact by default (`0.5 * x * (1 + erf(x / sqrt(2)))`); with
    the `tanh` unit attribute, the tanh approximation
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.

    Example:

    ```mlir
    %y = kiln.gelu %x {tanh} : tensor<2x768xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, UnitAttr:$tanh);
}

def Kiln_HardSigmoidOp : Kiln_UnaryFloatOp<"hard_sigmoid",
    "max(0, min(1, alpha * x + beta))"> {
  let arguments = (ins Kiln_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.2f">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.5f">:$beta);
}

def Kiln_ClipOp : Kiln_UnaryNumericOp<"clip", "min(max(x, min), max)"> {
  let description = [{
    Clamps every element to `[min, max]`. Either bound may be absent, which
    leaves that side open. Bounds are stored as f64 and converted to the
    element type; `min` must not exceed `max`.

    Example:

    ```mlir
    %y = kiln.clip %x {min = 0.0, max = 6.0} : tensor<1x32x112x112xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Binary, with numpy broadcasting
//===----------------------------------------------------------------------===//

class Kiln_BinaryOp<string mnemonic, string formula, Type operandType,
                    list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor,
                                             Kiln_BroadcastingBinary])> {
  let summary = "elementwise " # formula # " with numpy broadcasting";
  let description = "Computes `" # formula # "` for each pair of elements "
    # "`a`, `b` after broadcasting both operands to a common shape by numpy "
    # "rules (align trailing dimensions; a dimension of size 1 stretches).\n\n"
    # "Example:\n\n```mlir\n%c = kiln." # mnemonic
    # " %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>\n```";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::kiln::inferBroadcastResult(loc, adaptor.getLhs().getType(),
          adaptor.getRhs().getType(), resultElementType(adaptor), types);
    }
  }];
  // The result element type follows the operands unless a subclass says
  // otherwise (comparisons yield i1).
  code resultElementTypeBody = "return ::mlir::getElementTypeOrSelf("
                               "adaptor.getLhs().getType());";
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(Adaptor adaptor) {
  }] # resultElementTypeBody # [{
    }
  }];
}

class Kiln_ArithmeticOp<string mnemonic, string formula, list<Trait> traits = []>
    : Kiln_BinaryOp<mnemonic, formula, Kiln_NumericTensor, traits>;
class Kiln_LogicalOp<string mnemonic, string formula>
    : Kiln_BinaryOp<mnemonic, formula, Kiln_BoolTensor, [Commutative]>;
class Kiln_CompareOp<string mnemonic, string formula>
    : Kiln_BinaryOp<mnemonic, formula, Kiln_Tensor> {
  let resultElementTypeBody = "return ::mlir::IntegerType::get("
      "adaptor.getLhs().getType().getContext(), 1);";
}

def Kiln_AddOp : Kiln_ArithmeticOp<"add", "a + b", [Commutative]>;
def Kiln_SubOp : Kiln_ArithmeticOp<"sub", "a - b">;
def Kiln_MulOp : Kiln_ArithmeticOp<"mul", "a * b", [Commutative]>;
def Kiln_DivOp : Kiln_ArithmeticOp<"div", "a / b (integers truncate toward zero)">;
def Kiln_PowOp : Kiln_ArithmeticOp<"pow", "a ^ b">;
def Kiln_MaxOp : Kiln_ArithmeticOp<"max", "max(a, b)", [Commutative]>;
def Kiln_MinOp : Kiln_ArithmeticOp<"min", "min(a, b)", [Commutative]>;
def Kiln_ModOp : Kiln_ArithmeticOp<"mod", "a mod b"> {
  let description = [{
    The remainder of `a / b` after numpy broadcasting. By default the result
    takes the sign of the divisor, as Python's `%` (integers only); with the
    `fmod` unit attribute it takes the sign of the dividend, as C's `fmod`
    (required for floats).

    Example:

    ```mlir
    %r = kiln.mod %a, %b {fmod} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$lhs, Kiln_NumericTensor:$rhs,
                       UnitAttr:$fmod);
  let hasVerifier = 1;
}
def Kiln_AndOp : Kiln_LogicalOp<"and", "a and b">;
def Kiln_OrOp : Kiln_LogicalOp<"or", "a or b">;
def Kiln_XorOp : Kiln_LogicalOp<"xor", "a xor b">;

// Integers only (signed or unsigned); ONNX BitwiseAnd/Or/Xor and BitShift.
class Kiln_BitwiseOp<string mnemonic, string formula, list<Trait> traits = []>
    : Kiln_BinaryOp<mnemonic, formula, Kiln_IntTensor, traits>;
def Kiln_BitwiseAndOp : Kiln_BitwiseOp<"bitwise_and", "a & b", [Commutative]>;
def Kiln_BitwiseOrOp : Kiln_BitwiseOp<"bitwise_or", "a | b", [Commutative]>;
def Kiln_BitwiseXorOp : Kiln_BitwiseOp<"bitwise_xor", "a ^ b", [Commutative]>;
def Kiln_ShiftLeftOp : Kiln_BitwiseOp<"shift_left",
    "a << b (0 when b is negative or at least the bit width)">;
def Kiln_ShiftRightOp : Kiln_BitwiseOp<"shift_right",
    "a >> b: logical for unsigned a, arithmetic for signed a; a shift by a "
    "negative amount or at least the bit width gives 0 (-1 for a negative "
    "signed a)">;
def Kiln_EqualOp : Kiln_CompareOp<"equal", "a == b">;
def Kiln_LessOp : Kiln_CompareOp<"less", "a < b">;
def Kiln_LessEqualOp : Kiln_CompareOp<"less_equal", "a <= b">;
def Kiln_GreaterOp : Kiln_CompareOp<"greater", "a > b">;
def Kiln_GreaterEqualOp : Kiln_CompareOp<"greater_equal", "a >= b">;

//===----------------------------------------------------------------------===//
// Select and cast
//===----------------------------------------------------------------------===//

def Kiln_SelectOp : Kiln_Op<"select", [InferTypeOpAdaptor]> {
  let summary = "elementwise choice between two tensors (ONNX Where)";
  let description = [{
    `cond ? a : b` for every element, after broadcasting all three operands
    to a common shape by numpy rules. `a` and `b` share an element type.

    Example:

    ```mlir
    %r = kiln.select %c, %a, %b
        : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$condition, Kiln_Tensor:$true_value,
                       Kiln_Tensor:$false_value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` type($condition)
    `,` type($true_value) `,` type($false_value) `->` type($result)
  }];
  let hasFolder = 1;
}

def Kiln_CastOp : Kiln_Op<"cast", [Elementwise]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Converts every element to the result's element type; shapes must match.
    Float to integer truncates toward zero; to `i1` means `x != 0`; float
    narrowing rounds to nearest even. Precision lowering inserts, hoists and
    cancels these ops.

    Example:

    ```mlir
    %y = kiln.cast %x : tensor<2x3xf32> -> tensor<2x3xbf16>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// bf16 or f16 to f32: every value exact and free where it is read
    /// (kiln-fuse runs it in its consumers; template epilogues read the
    /// narrow input).
    bool isStorageWidening();
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNELEMENTWISEOPS_TD

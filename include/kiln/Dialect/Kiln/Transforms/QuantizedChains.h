//===- QuantizedChains.h - The importer's quantized contractions -*- C++
//-*-===//
//
// The importer composes every quantized ONNX contraction from plain kiln ops
// (docs/architecture.md, "Quantized models"): QLinearMatMul, MatMulInteger,
// QDQ MatMul, and the convolutions QLinearConv, ConvInteger, QDQ Conv. This
// analysis recognises such a chain around its kiln.matmul or kiln.conv and
// reads off what the int8 kernel (Family::MmaS8, include/kiln/Target/CUDA/
// ContractionKernels.h) needs to compute it: the 8-bit operands, their zero
// points, the bias, onnxruntime's f32 requantization multipliers and the
// output's type and zero point.
//
// A requantized int8 chain may end in a QDQ residual block, what
// onnxruntime's quantizer writes around a ResNet add: the requantized
// value dequantized, added to another dequantized 8-bit tensor R of the
// same shape, optionally Relu, and quantized again
// (`QuantizedChain::residual`); the chain's result is then that last
// quantization's, and R one more 8-bit input.
//
// A QDQ chain whose operands are float8 (opset 19's DequantizeLinear of
// FLOAT8E4M3FN/E5M2 tensors) is an fp8 chain (`fp8`), for the fp8 kernels
// (Family::MmaF8, WgmmaF8): its result is the f32 product (with the f32
// bias added), scaled by a_scale * b_scale[n], or, when the product's only
// reader is a saturating QuantizeLinear to e4m3 or e5m2 (`x / y_scale`,
// clipped to the type's largest finite value, cast), that float8 value:
// the kernel stores it (QuantizedChain::outputScale).
//
// kiln-fuse-quantized runs it to form `quantized_matmul` and
// `quantized_conv` regions;
// kiln-select-contraction-kernels and kiln-match-contractions run it again
// on the region's body to build the kernel, so the parameters live in the
// IR that computes them, not in a side attribute.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_TRANSFORMS_QUANTIZEDCHAINS_H
#define KILN_DIALECT_KILN_TRANSFORMS_QUANTIZEDCHAINS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// The kinds of the kiln.fusion regions kiln-fuse-quantized forms: one
/// matmul chain, one NHWC convolution chain.
inline constexpr llvm::StringLiteral kQuantizedMatmulKind = "quantized_matmul";
inline constexpr llvm::StringLiteral kQuantizedConvKind = "quantized_conv";

struct QuantizedChain {
  /// The kiln.matmul or kiln.conv.
  mlir::Operation *contraction = nullptr;
  bool conv = false;
  /// "QLinearMatMul", "MatMulInteger", "QDQ", "QLinearConv", "ConvInteger",
  /// "QDQ conv", "QDQ fp8" or "QDQ fp8 conv".
  std::string form;
  /// float8 operands (f8E4M3FN or f8E5M2), an f32 result.
  bool fp8 = false;
  /// The 8-bit tensors the chain reads (B a constant weight load).
  mlir::Value a, b;
  /// A matmul's B is read transposed from a [N][K] weight (Gemm's transB):
  /// `b` is that weight, K-major already.
  bool bTransposed = false;
  /// i8 or ui8 (fp8 chains: f8E4M3FN or f8E5M2).
  mlir::Type aStorage, bStorage;
  int64_t aZeroPoint = 0;
  /// One, or one per output channel.
  std::vector<int64_t> bZeroPoints{0};
  /// One int32 per output channel; empty without a bias.
  std::vector<int32_t> bias;
  /// fp8 chains: one f32 per output channel; empty without a bias.
  std::vector<float> floatBias;
  /// Output channels (N; a convolution's O).
  int64_t channels = 1;
  /// Whether the product is requantized to 8 bits (else the i32 product
  /// is the result: MatMulInteger, ConvInteger).
  bool requantized = false;
  /// onnxruntime's f32 multipliers (a_scale * b_scale) / y_scale: one, or
  /// one per output channel. Empty without a requantization. fp8 chains:
  /// the dequantization's a_scale * b_scale (f32).
  std::vector<float> multipliers;
  /// i8 or ui8 when requantized, else i32 (fp8 chains: f32, or the fused
  /// QuantizeLinear's f8E4M3FN or f8E5M2). With a residual block: the
  /// requantized value's, before the block.
  mlir::Type outputStorage;
  /// fp8 chains with a float8 output: the QuantizeLinear's y_scale (the
  /// kernel divides by it before the conversion); 1 otherwise. `relu`: a
  /// Relu between the sum and that QuantizeLinear, applied first.
  float outputScale = 1.0f;
  bool relu = false;
  int64_t outputZeroPoint = 0;
  /// The QDQ residual block the chain ends in:
  ///   Q(relu?(DQ(requantized) + DQ(bytes)), sumScale, sumZeroPoint)
  /// with each dequantization `(f32(x) - zp) * scale`, per tensor.
  struct Residual {
    /// R: an 8-bit tensor (i8 or ui8) of the result's shape.
    mlir::Value bytes;
    mlir::Type storage;
    int64_t zeroPoint = 0;
    float scale = 1.0f;
    /// The requantized value's dequantization (its zero point is
    /// outputZeroPoint).
    float requantizedScale = 1.0f;
    bool relu = false;
    /// The sum's quantization; `storage` i8 or ui8.
    float sumScale = 1.0f;
    int64_t sumZeroPoint = 0;
    mlir::Type sumStorage;
  };
  std::optional<Residual> residual;
  /// The chain's last value (the narrowing cast's result, or the i32
  /// product; with a residual block, the block's).
  mlir::Value result;
};

/// The chain around `contraction` (a kiln.matmul or kiln.conv). On failure
/// `why` says why the int8 kernel cannot run it, or is empty when the
/// contraction is no quantized chain at all (a float matmul whose operands
/// are not dequantized).
std::optional<QuantizedChain> matchQuantizedChain(mlir::Operation *contraction,
                                                  std::string &why);

/// The ops that compute `chain.result` from its 8-bit operands (a residual
/// block's R among them), the
/// contraction included, in block order: the chain and the ops computing
/// its constant scales, zero points and bias (reshapes and casts of
/// weight globals), so that later passes (kiln-fuse) keep them with it.
llvm::SmallVector<mlir::Operation *> chainOps(const QuantizedChain &chain);

/// One line: the form and the kernel's parameters ("(QLinearMatMul): A ui8
/// zero point 3, B i8 constant, zero point 0, scale 4.000000e-03 (f32),
/// output ui8 zero point 128").
std::string describeChain(const QuantizedChain &chain);

/// The float8 types the fp8 kernels read: f8E4M3FN and f8E5M2 (not the FNUZ
/// variants, which no NVIDIA instruction reads).
bool isFp8KernelType(mlir::Type type);

} // namespace kiln

#endif // KILN_DIALECT_KILN_TRANSFORMS_QUANTIZEDCHAINS_H

//===- QuantizationCompose.h - Quantize, dequantize as kiln ops -*- C++ -*-===//
//
// The compositions the ONNX (QuantizationHandlers.cpp) and com.microsoft
// (ContribQuantizationHandlers.cpp) quantized ops share. Each returns null
// after a failure, as Composer's builders do.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERS_QUANTIZATIONCOMPOSE_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERS_QUANTIZATIONCOMPOSE_H

#include "Composer.h"

#include <optional>
#include <string>
#include <utility>

namespace kiln::onnx_frontend::quant {

/// The range of an 8- or 16-bit integer storage type, or nothing; with
/// `fourBit`, the range of INT4/UINT4 held in an i8/ui8.
std::optional<std::pair<double, double>> integerRange(mlir::Type type,
                                                      bool fourBit = false);
std::string typeName(mlir::Type type);

/// round_half_even(v) + zero_point, saturated to `storage`, as `storage`.
mlir::Value roundSaturate(Composer &c, mlir::Value v, mlir::Value zeroPoint,
                          mlir::Type storage, bool fourBit = false);
/// A per-tensor parameter as a rank-0 value, or fails naming it.
mlir::Value perTensor(Composer &c, mlir::Value v, llvm::StringRef what);
/// `(f32(x) - f32(zeroPoint)) * scale` in f32; per-tensor parameters.
mlir::Value dequantizeF32(Composer &c, mlir::Value x, mlir::Value scale,
                          mlir::Value zeroPoint);
/// round_half_even(v / scale) + zeroPoint, saturated; `v` f32, per-tensor
/// parameters, the storage type the zero point's.
mlir::Value quantizeF32(Composer &c, mlir::Value v, mlir::Value scale,
                        mlir::Value zeroPoint);
/// The i32 product of two quantized matrices, zero points subtracted (a
/// per-row zero point of `a` lies along its rows).
mlir::Value integerMatmul(Composer &c, mlir::Value a, mlir::Value aZeroPoint,
                          mlir::Value b, mlir::Value bZeroPoint);
/// DynamicQuantizeLinear's uint8 value, f32 scale and uint8 zero point.
struct DynamicQuantized {
  mlir::Value value, scale, zeroPoint;
};
DynamicQuantized dynamicQuantize(Composer &c, mlir::Value x);

/// The ONNX handlers com.microsoft's QuantizeLinear/DequantizeLinear reuse.
llvm::LogicalResult importQuantizeLinear(NodeImporter &n);
llvm::LogicalResult importDequantizeLinear(NodeImporter &n);

} // namespace kiln::onnx_frontend::quant

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERS_QUANTIZATIONCOMPOSE_H

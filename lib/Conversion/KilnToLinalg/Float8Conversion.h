//===- Float8Conversion.h - float8 <-> f32 by integer bit manipulation ---===//
//
// Private to lib/Conversion/KilnToLinalg. The ONNX float8 types (MLIR's
// f8E4M3FN, f8E4M3FNUZ, f8E5M2, f8E5M2FNUZ) are storage types in Kiln: the
// NVPTX path has no arithmetic on them before sm_89 and MLIR's arith
// expansions do not cover them, so a conversion is integer arithmetic on the
// bits (LLVM lowering carries an 8-bit float as i8).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOLINALG_FLOAT8CONVERSION_H
#define KILN_LIB_CONVERSION_KILNTOLINALG_FLOAT8CONVERSION_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace kiln::lowering {

/// Whether `type` is one of the four float8 storage types.
bool isFloat8StorageType(mlir::Type type);

/// The f32 value of a float8 scalar (exact for every code; NaN codes give a
/// quiet NaN, E5M2's infinities infinities).
mlir::Value emitFloat8ToF32(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value x);

/// A float8 scalar of type `to` from an f32 one, rounded to nearest even.
/// Out of range is ONNX Cast's saturate=0: E5M2 gives +-Inf, the others NaN
/// (FNUZ types have one NaN, 0x80, and no negative zero). Saturation is the
/// importer's clip in front of the cast.
mlir::Value emitF32ToFloat8(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value x, mlir::FloatType to);

} // namespace kiln::lowering

#endif // KILN_LIB_CONVERSION_KILNTOLINALG_FLOAT8CONVERSION_H

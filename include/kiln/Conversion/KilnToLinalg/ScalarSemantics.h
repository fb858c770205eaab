//===- ScalarSemantics.h - What each elementwise kiln op computes -*- C++ -*-===//
//
// The one definition of the element-level meaning of Kiln's elementwise ops:
// the arith and math ops that compute one result element from its operands'
// elements, NaN, infinities, signed zeros and subnormals included. Two code
// generators read it:
//   - kiln-lower-to-linalg builds each elementwise op's linalg.generic body
//     from it (ElementwiseToLinalg.cpp, and batch norm's in
//     ReductionToLinalg.cpp);
//   - the template kernels' fused epilogues build the same ops on a scratch
//     block and print them as CUDA C++ (FusionToTemplates/ScalarToCpp.cpp),
//     so a fused epilogue cannot mean something else than the generated
//     kernel (issue 23, "one definition of each op's semantics").
// Scalars are the operands' element types, integers signless.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_KILNTOLINALG_SCALARSEMANTICS_H
#define KILN_CONVERSION_KILNTOLINALG_SCALARSEMANTICS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace kiln {

/// The result element of the elementwise kiln op `op` (kiln.cast and
/// kiln.batch_norm included; batch_norm's operands are (x, scale, bias,
/// mean, variance) at one element), given its operands' elements `args`.
/// `isUnsigned` says the integer operands are unsigned. Returns a null value
/// for an op that is not elementwise. A cast's result is signless when its
/// kiln type is an unsigned integer.
mlir::Value buildScalar(mlir::Operation *op, mlir::OpBuilder &b,
                        mlir::Location loc, mlir::ValueRange args,
                        bool isUnsigned = false);

/// `x` converted to element type `to` by kiln.cast's rules (integers
/// signless; `fromUnsigned` and `toUnsigned` give their signedness).
mlir::Value buildScalarCast(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value x, mlir::Type to,
                            bool fromUnsigned = false, bool toUnsigned = false);

/// An f32 rounded to tf32 and held in f32 (10 mantissa bits, nearest even,
/// as cvt.rn.tf32.f32; NaN kept): the f32 -> tf32 -> f32 cast pair that
/// kiln-lower-precision puts on tf32 contraction operands.
mlir::Value buildRoundToTf32(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value x);

} // namespace kiln

#endif // KILN_CONVERSION_KILNTOLINALG_SCALARSEMANTICS_H

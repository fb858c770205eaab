//===- WeightOrigins.h - Which initializer each weight came from -*- C++ -*-===//
//
// Every weight the importer reads from an ONNX initializer, and every weight a
// graph pass derives from one at compile time (a folded transpose, pad or
// reshape, a precision conversion), records its *origin*: the initializer and
// the transforms applied since, as text the runtime can replay to bind new
// weights into a compiled artifact (kiln-run --weights, kilnc
// --strip-weights; docs/artifact-format.md, section weight-origins).
//
// An origin is one line per step:
//
//   initializer f32 64x3x7x7 conv1_w_0    (dtype, shape, name: rest of line)
//   transpose 0,2,3,1
//   pad 0,0,0,0 0,0,0,5                   (low, high; zero fill)
//   reshape 64,7,7,8
//   convert bf16                          (bf16 | f16 | tf32, nearest even)
//
// An origin is a `kiln.origin` string attribute on the weight's
// `ml_program.global`. kiln-materialize-weights, which turns the globals into
// constants, moves the origins into the module attribute
// `kiln.weight_origins`, keyed by each weight's resource blob, which stays
// with the data through bufferization to the artifact builder. A weight
// without an origin (computed from several values, or from a Constant node)
// keeps its compiled bytes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_WEIGHTORIGINS_H
#define KILN_DIALECT_KILN_IR_WEIGHTORIGINS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kiln {

/// The origin recorded on a weight global; empty when it has none.
std::string getWeightOrigin(mlir::ml_program::GlobalOp global);

/// Records `origin` on a weight global (nothing for an empty origin).
void setWeightOrigin(mlir::ml_program::GlobalOp global, llvm::StringRef origin);

/// Records `origin` for the resource blob `value` (ignored for other values
/// and for an empty origin), for the artifact builder.
void setBlobOrigin(mlir::ModuleOp module, mlir::Attribute value,
                   llvm::StringRef origin);

/// The origin recorded for the resource blob `value`; empty when none.
std::string getBlobOrigin(mlir::ModuleOp module, mlir::Attribute value);

/// The first line of an origin: an initializer of `type` named `name`.
/// Empty when the name cannot be written on one line.
std::string initializerOrigin(llvm::StringRef name,
                              mlir::RankedTensorType type);

/// `origin` followed by one more step ("transpose 0,2,3,1"); empty stays
/// empty (a derived value of an unknown origin has none either).
std::string appendOriginStep(llvm::StringRef origin, llvm::StringRef step,
                             llvm::ArrayRef<int64_t> values = {},
                             llvm::ArrayRef<int64_t> more = {});

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_WEIGHTORIGINS_H

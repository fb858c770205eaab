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
// Origins live in a module attribute keyed by the weight's resource blob key,
// which stays with the data through bufferization to the artifact builder.
// A weight without an origin (computed from several values, or from a
// Constant node) keeps its compiled bytes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_WEIGHTORIGINS_H
#define KILN_DIALECT_KILN_IR_WEIGHTORIGINS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kiln {

/// The origin recorded for a weight's value; empty when it has none (or the
/// value is not a resource blob).
std::string getWeightOrigin(mlir::ModuleOp module, mlir::Attribute value);

/// Records `origin` for a resource-blob value (ignored for other values and
/// for an empty origin).
void setWeightOrigin(mlir::ModuleOp module, mlir::Attribute value,
                     llvm::StringRef origin);

/// Records the value of an initializer the importer compiled in as a
/// constant (too small for a weight): rebinding weights checks that a new
/// value of it, if given, is unchanged.
void recordInlinedInitializer(mlir::ModuleOp module, llvm::StringRef name,
                              mlir::DenseElementsAttr value);

/// The recorded inlined initializers, by name (empty when none).
mlir::DictionaryAttr getInlinedInitializers(mlir::ModuleOp module);

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

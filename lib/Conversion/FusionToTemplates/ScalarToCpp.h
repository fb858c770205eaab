//===- ScalarToCpp.h - Scalar arith/math ops as CUDA C++ --------*- C++ -*-===//
//
// Prints the scalar ops that ScalarSemantics.h builds for an elementwise op
// as CUDA C++ statements, for a template kernel's fused epilogue: the
// epilogue then computes exactly what the generated kernel computes, from
// the same IR. Floats of every width are held in `float` and rounded to
// their type after each op, as the generated kernels' bf16/f16 arithmetic
// rounds; i1 is `bool`, i32 `u32` (bit manipulation only).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_SCALARTOCPP_H
#define KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_SCALARTOCPP_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace kiln::templates {

/// A C++ float literal for `v` (NaN and infinities as bit patterns).
std::string floatLiteral(double v);

class ScalarPrinter {
public:
  /// Statements are appended to `body`; names are `v<N>` from `nextName`.
  ScalarPrinter(std::string &body, unsigned &nextName)
      : body(body), nextName(nextName) {}

  /// `value` (a block argument of the scratch block) is the C++ expression
  /// `expr`.
  void bind(mlir::Value value, std::string expr) { names[value] = expr; }

  /// Appends `op`'s statement. Fails, with `why` set, for an op or type
  /// without a C++ form here.
  llvm::LogicalResult print(mlir::Operation *op, std::string &why);

  /// The C++ expression of a value bound or printed before.
  std::string nameOf(mlir::Value value) const { return names.lookup(value); }

private:
  std::string &body;
  unsigned &nextName;
  llvm::DenseMap<mlir::Value, std::string> names;
};

} // namespace kiln::templates

#endif // KILN_LIB_CONVERSION_FUSIONTOTEMPLATES_SCALARTOCPP_H

//===- SymbolRules.h - How each op moves a symbolic dim ---------*- C++ -*-===//
//
// The per-op rules of the symbolic-dims analysis (SeparableDims.cpp): given
// the dim (and factor) at which each operand carries a symbol, where each
// result carries it, or why the op does not keep the slices along it
// independent. Rules are by op family; an op with no rule that sees the
// symbol fails, which is always safe.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_SYMBOLRULES_H
#define KILN_LIB_COMPILER_SYMBOLRULES_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace kiln::symbols {

/// Where a value carries the symbol.
struct Carried {
  int64_t dim = 0;
  int64_t factor = 1;
  bool operator==(const Carried &other) const {
    return dim == other.dim && factor == other.factor;
  }
};

/// Where each result carries the symbol (nullopt: it does not), or why the
/// op breaks separability.
struct Propagation {
  llvm::SmallVector<std::optional<Carried>> results;
  std::string reason;
  bool failed() const { return !reason.empty(); }
};

mlir::ArrayRef<int64_t> shapeOf(mlir::Value value);
int64_t rankOf(mlir::Value value);
int64_t normalizeAxis(int64_t axis, int64_t rank);

/// Where `op`'s results carry the symbol when its operands carry it at
/// `operands` (nullopt: that operand does not), or why it cannot say.
Propagation propagate(mlir::Operation *op,
                      llvm::ArrayRef<std::optional<Carried>> operands);

} // namespace kiln::symbols

#endif // KILN_LIB_COMPILER_SYMBOLRULES_H

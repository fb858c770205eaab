//===- Kiln.h - The kiln dialect and its ops ---------------------*- C++
//-*-===//
//
// Include this to use the kiln dialect. It pulls in MLIR's IR headers, so
// code that does not build or inspect kiln IR should not include it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILN_H
#define KILN_DIALECT_KILN_IR_KILN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/Kiln/IR/KilnOpsDialect.h.inc"

namespace kiln::trait {
/// An elementwise op over two operands broadcast by numpy rules
/// (KilnBase.td, Kiln_BroadcastingBinary): one result.
template <typename ConcreteType>
class BroadcastingBinary
    : public mlir::OpTrait::TraitBase<ConcreteType, BroadcastingBinary> {
public:
  static llvm::LogicalResult verifyTrait(mlir::Operation *op) {
    if (op->getNumOperands() != 2 || op->getNumResults() != 1)
      return op->emitOpError("is BroadcastingBinary: two operands, one result");
    return llvm::success();
  }
};
} // namespace kiln::trait

#include "kiln/Dialect/Kiln/IR/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnAttrs.h.inc"

namespace kiln {

/// Whether `op` computes each result element from the operand elements at
/// the same (broadcast) position only: OpTrait::Elementwise ops and the
/// BroadcastingBinary ones.
inline bool isBroadcastingElementwise(mlir::Operation *op) {
  return op->hasTrait<mlir::OpTrait::Elementwise>() ||
         op->hasTrait<trait::BroadcastingBinary>();
}

/// Shape of broadcasting `lhs` and `rhs` by numpy rules, or nullopt when the
/// shapes are incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// Result type of an elementwise op over broadcast operands; emits an error at
/// `loc` (when given) and fails when the shapes do not broadcast.
llvm::LogicalResult
inferBroadcastResult(std::optional<mlir::Location> loc, mlir::Type lhs,
                     mlir::Type rhs, mlir::Type elementType,
                     llvm::SmallVectorImpl<mlir::Type> &results);

/// Output extent of one spatial dimension of a sliding-window op (conv,
/// pool): `(in + lo + hi - dilation * (k - 1) - 1) / stride + 1`, rounded up
/// instead of down with `ceilMode`.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t dilation, int64_t lo, int64_t hi,
                         bool ceilMode = false);

/// `axis` in [-rank, rank) made non-negative, or -1 when out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank);

/// A device-side loop's body is a function marked `kiln.device_loop` = k
/// (DeviceLoop.cpp), called once: the call's first k operands are the loop
/// state (flag, counter, carried values), then come the loop-invariant
/// operands. `finals` receives the body's results: the call's results
/// before bufferization, its out-parameters after (the callee's trailing
/// arguments marked bufferize.result); the first k are the final state,
/// any after them the last iteration's outputs.
struct DeviceLoopParts {
  mlir::ValueRange state, invariants, finals;
};
/// The state count of a device-loop body, or 0 for another function.
int64_t deviceLoopStateCount(mlir::Operation *func);
/// Splits the operands of a call of device-loop body `body`; nullopt when
/// they do not fit.
std::optional<DeviceLoopParts> deviceLoopParts(mlir::Operation *call,
                                               mlir::Operation *body);
/// The `kiln.device_loop` attribute's verifier (KilnDialect::
/// verifyOperationAttribute): on a func.func, at least 2, the state's
/// argument types paired with the first results' (or out-parameters'),
/// the flag an i1 and the counter an i64 of one element.
llvm::LogicalResult verifyDeviceLoop(mlir::Operation *op,
                                     mlir::NamedAttribute attr);

} // namespace kiln

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECT_KILN_IR_KILN_H

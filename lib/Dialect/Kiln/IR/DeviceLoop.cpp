//===- DeviceLoop.cpp - The kiln.device_loop attribute --------------------===//
//
// An ONNX Loop whose trip count or condition is only known at run time is
// imported as a private function for its body, marked `kiln.device_loop` =
// k, and one call of it (ControlFlowHandlers.cpp). The body's first k
// arguments are the loop state (flag, counter, carried values), its other
// arguments loop-invariant; before bufferization it returns the next state
// (its first k results), after it writes it to its first k out-parameters
// (the trailing arguments marked bufferize.result, BufferResultsToOutParams).
// Results after the k are outputs of the last iteration, undefined when
// the loop runs none (an If's branch run as a loop of at most one
// iteration gives its outputs so). The mark is on the function
// because bufferization rebuilds calls without their attributes. The
// artifact builder repeats the body's launches while the flag holds
// (lib/Target/CUDA/DeviceLoops.cpp).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace kiln {

int64_t deviceLoopStateCount(Operation *func) {
  auto count = func ? func->getAttrOfType<IntegerAttr>(
                          KilnDialect::DeviceLoopAttrHelper::getNameStr())
                    : IntegerAttr();
  return count ? count.getInt() : 0;
}

/// The body's out-parameters after bufferization: its trailing arguments
/// marked `bufferize.result` (BufferResultsToOutParams).
static size_t outParameters(Operation *func) {
  auto body = dyn_cast<FunctionOpInterface>(func);
  size_t count = 0;
  if (body)
    for (unsigned i = body.getNumArguments(); i > 0; --i, ++count)
      if (!body.getArgAttr(i - 1, "bufferize.result"))
        break;
  return count;
}

std::optional<DeviceLoopParts> deviceLoopParts(Operation *call,
                                               Operation *body) {
  int64_t k = deviceLoopStateCount(body);
  if (k < 2)
    return std::nullopt;
  size_t n = static_cast<size_t>(k);
  ValueRange operands = call->getOperands();
  DeviceLoopParts parts;
  if (call->getNumResults()) {
    if (call->getNumResults() < n || operands.size() < n)
      return std::nullopt;
    parts.finals = call->getResults();
  } else {
    size_t outs = outParameters(body);
    if (outs < n || operands.size() < n + outs)
      return std::nullopt;
    parts.finals = operands.take_back(outs);
    operands = operands.drop_back(outs);
  }
  parts.state = operands.take_front(n);
  parts.invariants = operands.drop_front(n);
  return parts;
}

LogicalResult verifyDeviceLoop(Operation *op, NamedAttribute attr) {
  if (attr.getName() != KilnDialect::DeviceLoopAttrHelper::getNameStr())
    return success();
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError("'kiln.device_loop' belongs on a func.func (a "
                         "device-side loop's body)");
  auto count = dyn_cast<IntegerAttr>(attr.getValue());
  if (!count || count.getInt() < 2)
    return op->emitError("'kiln.device_loop' must be an integer of at least "
                         "2 (the flag, the counter and the carried values)");
  size_t k = static_cast<size_t>(count.getInt());
  ArrayRef<Type> args = func.getArgumentTypes();
  ArrayRef<Type> results = func.getResultTypes();
  // Before bufferization the next state is returned, after it written to
  // the trailing out-parameters; outputs of the last iteration may follow.
  ArrayRef<Type> next =
      results.empty() ? args.take_back(outParameters(op)) : results;
  if (args.size() < k || next.size() < k)
    return op->emitError()
           << "'kiln.device_loop' = " << k
           << " needs as many loop-state arguments and at least as many "
              "results (or trailing out-parameters); the body has "
           << args.size() << " arguments and " << next.size()
           << (results.empty() ? " out-parameters" : " results");
  for (size_t i = 0; i < k; ++i)
    if (args[i] != next[i])
      return op->emitError() << "device loop state " << i << " enters as "
                             << args[i] << " but leaves as " << next[i];
  auto scalarOf = [](Type t, Type element) {
    auto type = dyn_cast<ShapedType>(t);
    return type && type.hasStaticShape() && type.getNumElements() == 1 &&
           type.getElementType() == element;
  };
  Builder b(op->getContext());
  if (!scalarOf(args[0], b.getI1Type()))
    return op->emitError("device loop state 0 (the flag) must be one i1");
  if (!scalarOf(args[1], b.getIntegerType(64)))
    return op->emitError("device loop state 1 (the counter) must be one i64");
  return success();
}

} // namespace kiln

//===- StructureOps.cpp - kiln.fusion, kiln.yield, kiln.call_kernel -------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;

namespace kiln {

YieldOp FusionOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

LogicalResult FusionOp::verify() {
  YieldOp yield = getYield();
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes() << " but its results are "
           << getResultTypes();
  if (getNumResults() == 0)
    return emitOpError("must yield at least one value");
  auto shape = cast<ShapedType>(getResult(0).getType()).getShape();
  for (Type type : getResultTypes())
    if (cast<ShapedType>(type).getShape() != shape)
      return emitOpError("results must share one shape (the kernel's "
                         "iteration space), got ")
             << getResult(0).getType() << " and " << type;
  for (Operation &op : getBody().front().without_terminator()) {
    // Lowering rewrites the contents in place, so any side-effect-free op
    // may appear; what would be a kernel's side effect may not.
    if (!isMemoryEffectFree(&op))
      return op.emitOpError("cannot be part of a kiln.fusion region: it has "
                            "side effects");
    if (isa<FusionOp>(op))
      return op.emitOpError("cannot nest inside another kiln.fusion");
  }
  return success();
}

bool CallKernelOp::hasBufferSemantics() {
  return llvm::all_of(getOperandTypes(),
                      [](Type t) { return isa<MemRefType>(t); });
}

LogicalResult CallKernelOp::verify() {
  if (getGrid().size() != 3 || getBlock().size() != 3)
    return emitOpError("grid and block must have 3 dimensions each");
  for (int32_t d : llvm::concat<const int32_t>(getGrid(), getBlock()))
    if (d <= 0)
      return emitOpError("grid and block dimensions must be positive");
  if (getOutputs().empty())
    return emitOpError("must have at least one output");
  bool tensors = llvm::all_of(getOperandTypes(), [](Type t) {
    return isa<RankedTensorType>(t);
  });
  if (!tensors && !hasBufferSemantics())
    return emitOpError("operands must be all ranked tensors or all memrefs");
  if (tensors && getResultTypes() != getOutputs().getTypes())
    return emitOpError("results ")
           << getResultTypes() << " must match the outputs' types "
           << getOutputs().getTypes();
  if (!tensors && getNumResults() != 0)
    return emitOpError("has no results on memrefs");
  if (std::optional<ArrayRef<int32_t>> order = getPointerOrder()) {
    llvm::SmallBitVector seen(getNumOperands());
    for (int32_t i : *order) {
      if (i < 0 || i >= static_cast<int32_t>(getNumOperands()) || seen.test(i))
        return emitOpError("pointer_order must be a permutation of the ")
               << getNumOperands() << " operand indices";
      seen.set(i);
    }
    if (order->size() != getNumOperands())
      return emitOpError("pointer_order must be a permutation of the ")
             << getNumOperands() << " operand indices";
  }
  for (Attribute scalar : getScalars()) {
    auto value = dyn_cast<IntegerAttr>(scalar);
    if (!value || (!value.getType().isInteger(32) &&
                   !value.getType().isInteger(64)))
      return emitOpError("scalars must be i32 or i64 integers, got ")
             << scalar;
  }
  return success();
}

LogicalResult
CallKernelOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  // The kernel is @binary::@entry; only the binary is a symbol.
  Operation *binary = symbolTable.lookupNearestSymbolFrom(
      *this, getKernel().getRootReference());
  if (!isa_and_nonnull<gpu::BinaryOp>(binary))
    return emitOpError("kernel ")
           << getKernel() << " does not name a gpu.binary";
  if (getKernel().getNestedReferences().size() != 1)
    return emitOpError("kernel must be @binary::@entry, got ")
           << getKernel();
  return success();
}

void CallKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (!hasBufferSemantics())
    return; // Pure on tensors.
  for (OpOperand &in : getInputsMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &in,
                         SideEffects::DefaultResource::get());
  for (OpOperand &out : getOutputsMutable())
    effects.emplace_back(MemoryEffects::Write::get(), &out,
                         SideEffects::DefaultResource::get());
}

// Bufferization: inputs are read, outputs written (never read: the kernel
// writes every element), each output's buffer becomes its result.
bool CallKernelOp::bufferizesToMemoryRead(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return !isDpsInit(&operand);
}

bool CallKernelOp::bufferizesToMemoryWrite(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return isDpsInit(&operand);
}

bufferization::AliasingValueList
CallKernelOp::getAliasingValues(OpOperand &operand,
                                const bufferization::AnalysisState &) {
  if (!isDpsInit(&operand))
    return {};
  return {{getTiedOpResult(&operand), bufferization::BufferRelation::Equivalent}};
}

LogicalResult
CallKernelOp::bufferize(RewriterBase &rewriter,
                        const bufferization::BufferizationOptions &options,
                        bufferization::BufferizationState &state) {
  SmallVector<Value> inputs, outputs;
  for (Value v : getInputs()) {
    FailureOr<Value> buffer = bufferization::getBuffer(rewriter, v, options, state);
    if (failed(buffer))
      return failure();
    inputs.push_back(*buffer);
  }
  for (Value v : getOutputs()) {
    FailureOr<Value> buffer = bufferization::getBuffer(rewriter, v, options, state);
    if (failed(buffer))
      return failure();
    outputs.push_back(*buffer);
  }
  rewriter.setInsertionPoint(*this);
  auto call = CallKernelOp::create(
      rewriter, getLoc(), TypeRange{}, getKernelAttr(), inputs, outputs,
      getGridAttr(), getBlockAttr(), getDynamicSharedBytesAttr(),
      getScalarsAttr(), getPointerOrderAttr());
  call->setDiscardableAttrs((*this)->getDiscardableAttrDictionary());
  bufferization::replaceOpWithBufferizedValues(rewriter, *this, outputs);
  return success();
}

} // namespace kiln

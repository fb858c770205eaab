//===- MaterializeCallOperands.cpp - Whole buffers into device loops ------===//
//
// A device-side loop's body is bound to the caller's buffers by the
// artifact builder (lib/Target/CUDA/DeviceLoops.cpp), and kernels take
// whole buffers: a view passed to the call (a Split part's subview, an
// unfused Reshape's expand_shape) is copied into a buffer of its own
// first. Found by fusion_fuzz.py --focus loop (docs/reliability.md,
// finding 31: "passes a buffer view; kernels must take whole buffers").
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace kiln {
#define GEN_PASS_DEF_MATERIALIZECALLOPERANDSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
/// Whether `v` is a whole buffer the artifact builder can bind: a function
/// argument, an allocation or a global.
bool isWholeBuffer(Value v) {
  Operation *def = v.getDefiningOp();
  return !def || isa<memref::AllocOp, memref::GetGlobalOp>(def);
}

struct MaterializeCallOperandsPass
    : kiln::impl::MaterializeCallOperandsPassBase<MaterializeCallOperandsPass> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([&](func::CallOp call) {
      OpBuilder b(call);
      for (OpOperand &operand : call->getOpOperands()) {
        auto type = dyn_cast<MemRefType>(operand.get().getType());
        if (!type || isWholeBuffer(operand.get()))
          continue;
        if (!type.hasStaticShape()) {
          call.emitError() << "passes a buffer view of dynamic shape "
                           << type << " to a device-side loop's body";
          return signalPassFailure();
        }
        auto whole = MemRefType::get(type.getShape(), type.getElementType());
        Value copy = memref::AllocOp::create(b, call.getLoc(), whole);
        memref::CopyOp::create(b, call.getLoc(), operand.get(), copy);
        operand.set(copy);
      }
    });
  }
};
} // namespace

//===- AlignKernelArgs.cpp - Alignment of kernel buffer parameters --------===//
//
// The memory plan puts every buffer at a 256-byte aligned arena offset and
// every weight at a 64-byte aligned offset of its blob; kernels receive
// whole buffers (kiln-map-to-gpu rebuilds views inside). This pass says so on
// the kernels' parameters (llvm.align), which is what lets LLVM keep
// 128-bit loads and stores (PTX `.ptr .align 16`).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

namespace kiln {
#define GEN_PASS_DEF_ALIGNKERNELARGSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Whether `value` is a whole buffer the runtime places: a function
/// argument (an input, output or weight binding), an allocation (an arena
/// buffer) or a global (a weight).
bool isWholeBuffer(Value value) {
  if (isa<BlockArgument>(value))
    return isa_and_nonnull<func::FuncOp>(
        cast<BlockArgument>(value).getOwner()->getParentOp());
  return isa_and_nonnull<memref::AllocOp, memref::GetGlobalOp>(
      value.getDefiningOp());
}

struct AlignKernelArgsPass
    : kiln::impl::AlignKernelArgsPassBase<AlignKernelArgsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || !llvm::isPowerOf2_64(alignment)) {
      module.emitError() << "kiln-align-kernel-args: alignment "
                         << static_cast<int64_t>(alignment)
                         << " is not a positive power of two";
      return signalPassFailure();
    }
    // Per kernel, the parameters some launch passes anything else.
    DenseMap<Operation *, llvm::SmallBitVector> unproven;
    DenseSet<Operation *> launched;
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (!kernel)
        return;
      launched.insert(kernel);
      llvm::SmallBitVector &bits = unproven[kernel];
      bits.resize(kernel.getNumArguments());
      for (auto [i, operand] : llvm::enumerate(launch.getKernelOperands()))
        if (i < bits.size() && !isWholeBuffer(operand))
          bits.set(i);
    });
    auto name = StringAttr::get(&getContext(),
                                LLVM::LLVMDialect::getAlignAttrName());
    Builder b(&getContext());
    module.walk([&](gpu::GPUFuncOp kernel) {
      if (!kernel.isKernel() || !launched.contains(kernel))
        return;
      const llvm::SmallBitVector &bits = unproven[kernel];
      // The parameters (the body's block also holds shared-memory
      // workgroup attributions after them).
      for (auto [i, arg] : llvm::enumerate(
               kernel.getArguments().take_front(kernel.getNumArguments()))) {
        auto type = dyn_cast<MemRefType>(arg.getType());
        if (!type || bits.test(i) || !type.hasStaticShape())
          continue;
        // LLVM may widen loads up to their known alignment (the
        // load-store vectorizer turns three f32 loads into one 16-byte
        // load); that must not leave the buffer, so a buffer whose size is
        // not a multiple of the alignment gets the largest power of two
        // that divides its size.
        int64_t bytes = type.getNumElements() *
                        ((type.getElementTypeBitWidth() + 7) / 8);
        int64_t align = alignment;
        while (align > 1 && bytes % align != 0)
          align /= 2;
        if (align > 1)
          kernel.setArgAttr(i, name, b.getI64IntegerAttr(align));
      }
    });
  }
};

} // namespace

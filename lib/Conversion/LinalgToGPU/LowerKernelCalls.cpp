//===- LowerKernelCalls.cpp - kiln.call_kernel to gpu.launch_func ---------===//
//
// Precompiled kernels (NVRTC-compiled templates) already sit in gpu.binary
// ops; once their calls are on memrefs, launching them is a gpu.launch_func
// with the call's geometry. The artifact builder then treats them like any
// outlined kernel.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERKERNELCALLSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct LowerKernelCallsPass
    : kiln::impl::LowerKernelCallsPassBase<LowerKernelCallsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<kiln::CallKernelOp> calls;
    module.walk([&](kiln::CallKernelOp call) { calls.push_back(call); });
    if (calls.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    for (kiln::CallKernelOp call : calls) {
      if (!call.hasBufferSemantics()) {
        call.emitOpError("must be bufferized before it is launched");
        return signalPassFailure();
      }
      OpBuilder b(call);
      Location loc = call.getLoc();
      auto dim = [&](ArrayRef<int32_t> dims) {
        return gpu::KernelDim3{
            arith::ConstantIndexOp::create(b, loc, dims[0]),
            arith::ConstantIndexOp::create(b, loc, dims[1]),
            arith::ConstantIndexOp::create(b, loc, dims[2])};
      };
      SmallVector<Value> operands;
      if (std::optional<ArrayRef<int32_t>> order = call.getPointerOrder())
        for (int32_t i : *order)
          operands.push_back(call->getOperand(i));
      else
        llvm::append_range(operands, call->getOperands());
      for (Attribute scalar : call.getScalars())
        operands.push_back(
            arith::ConstantOp::create(b, loc, cast<IntegerAttr>(scalar)));
      Value smem;
      if (call.getDynamicSharedBytes() != 0)
        smem = arith::ConstantIntOp::create(b, loc, call.getDynamicSharedBytes(),
                                            32);
      auto launch = gpu::LaunchFuncOp::create(b, loc, call.getKernel(),
                                              dim(call.getGrid()),
                                              dim(call.getBlock()), smem,
                                              operands);
      // For kilnc --stats: which kernel operands are written, and the
      // FLOPs the call recorded.
      SmallVector<int32_t> written;
      for (auto [i, operand] : llvm::enumerate(operands))
        if (llvm::is_contained(call.getOutputs(), operand))
          written.push_back(static_cast<int32_t>(i));
      launch->setAttr(kiln::KilnDialect::WrittenOperandsAttrHelper::getNameStr(),
                      b.getDenseI32ArrayAttr(written));
      if (Attribute flops =
              call->getAttr(kiln::KilnDialect::FlopsAttrHelper::getNameStr()))
        launch->setAttr(kiln::KilnDialect::FlopsAttrHelper::getNameStr(), flops);
      // The template's config (kilnc --stats).
      if (Attribute config =
              call->getAttr(kiln::KilnDialect::KernelAttrHelper::getNameStr()))
        launch->setAttr(kiln::KilnDialect::KernelAttrHelper::getNameStr(),
                        config);
      // TMA tensor maps: parameters after the scalars (ArtifactBuilder).
      if (Attribute maps =
              call->getAttr(kiln::KilnDialect::TensorMapsAttrHelper::getNameStr()))
        launch->setAttr(kiln::KilnDialect::TensorMapsAttrHelper::getNameStr(), maps);
      call.erase();
    }
  }
};
} // namespace

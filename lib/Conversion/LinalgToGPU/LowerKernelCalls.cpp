//===- LowerKernelCalls.cpp - kiln.call_kernel to gpu.launch_func ---------===//
//
// Precompiled kernels (NVRTC-compiled templates) already sit in gpu.binary
// ops; once their calls are on memrefs, launching them is a gpu.launch_func
// with the call's geometry. The artifact builder then treats them like any
// outlined kernel.
//
// A split-K template GEMM (a `#kiln.gemm_config` with split_k > 1) also
// takes per-tile semaphores after its pointers (SplitKReduce.cuh): u32
// counters that are zero before each launch and zero again after it. The
// launches run one after another, so every split-K launch shares one
// zero-initialised, mutable memref.global sized for the largest grid; the
// artifact builder makes it a zeroed buffer, which the runtime zeroes once.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERKERNELCALLSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
/// The u32 semaphores a split-K template kernel takes (one per output tile:
/// the grid without its splits), or 0 for any other kernel.
int64_t semaphoresOf(kiln::CallKernelOp call) {
  auto config = dyn_cast_or_null<kiln::GemmConfigAttr>(
      call->getAttr(kiln::KilnDialect::KernelAttrHelper::getNameStr()));
  if (!config || config.getSplitK() <= 1)
    return 0;
  ArrayRef<int32_t> grid = call.getGrid();
  return int64_t(grid[0]) * grid[1] * (grid[2] / config.getSplitK());
}

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
    memref::GlobalOp semaphores;
    int64_t semaphoreCount = 0;
    for (kiln::CallKernelOp call : calls)
      semaphoreCount = std::max(semaphoreCount, semaphoresOf(call));
    if (semaphoreCount) {
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      auto type = MemRefType::get({semaphoreCount}, b.getI32Type());
      semaphores = memref::GlobalOp::create(
          b, module.getLoc(), "kiln_split_k_semaphores",
          b.getStringAttr("private"), type,
          DenseElementsAttr::get(
              RankedTensorType::get({semaphoreCount}, b.getI32Type()),
              b.getI32IntegerAttr(0)),
          /*constant=*/false, /*alignment=*/nullptr);
      SymbolTable(module).insert(semaphores);
    }
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
      if (semaphoresOf(call))
        operands.push_back(memref::GetGlobalOp::create(
            b, loc, semaphores.getType(), semaphores.getSymName()));
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
      if (Attribute guard = call->getAttr(
              kiln::KilnDialect::SizeGuardAttrHelper::getNameStr()))
        launch->setAttr(kiln::KilnDialect::SizeGuardAttrHelper::getNameStr(),
                        guard);
      if (Attribute maps =
              call->getAttr(kiln::KilnDialect::TensorMapsAttrHelper::getNameStr()))
        launch->setAttr(kiln::KilnDialect::TensorMapsAttrHelper::getNameStr(), maps);
      // Launch scaling (kiln-map-to-gpu's proof; ArtifactBuilder records
      // it). Split-K's semaphores index tiles by the launched grid and
      // each tile leaves its semaphore zero, so fewer tiles stay correct.
      using GridScale = kiln::KilnDialect::GridScaleAttrHelper;
      if (Attribute scale = call->getAttr(GridScale::getNameStr()))
        launch->setAttr(GridScale::getNameStr(), scale);
      call.erase();
    }
  }
};
} // namespace

//===- NameKernels.cpp - Unique kernel names after outlining
//----------------===//

#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kiln {
#define GEN_PASS_DEF_NAMEKERNELSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct NameKernelsPass : kiln::impl::NameKernelsPassBase<NameKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
      for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>())
        if (kernel.isKernel())
          kernel.setName(gpuModule.getName());
    module.walk([&](gpu::LaunchFuncOp launch) {
      StringAttr moduleName = launch.getKernelModuleName();
      // Precompiled kernels (gpu.binary) keep the entry names they have.
      if (!module.lookupSymbol<gpu::GPUModuleOp>(moduleName))
        return;
      launch.setKernelAttr(
          SymbolRefAttr::get(moduleName, {FlatSymbolRefAttr::get(moduleName)}));
    });
  }
};
} // namespace

//===- NameKernels.cpp - Unique kernel names after outlining --------------===//

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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
    // kiln-map-to-gpu listed each function's kernel decisions in launch
    // order (outlining drops the launches' attributes): each outlined
    // launch gets its own back.
    llvm::DenseMap<Operation *, unsigned> nextConfig;
    module.walk([&](gpu::LaunchFuncOp launch) {
      StringAttr moduleName = launch.getKernelModuleName();
      // Precompiled kernels (gpu.binary) keep the entry names they have.
      if (!module.lookupSymbol<gpu::GPUModuleOp>(moduleName))
        return;
      launch.setKernelAttr(
          SymbolRefAttr::get(moduleName, {FlatSymbolRefAttr::get(moduleName)}));
      auto func = launch->getParentOfType<func::FuncOp>();
      auto configs =
          func ? func->getAttrOfType<ArrayAttr>(kiln::KilnDialect::LaunchKernelsAttrHelper::getNameStr()) : nullptr;
      auto scales = func ? func->getAttrOfType<ArrayAttr>(
                               kiln::KilnDialect::
                                   LaunchGridScalesAttrHelper::getNameStr())
                         : nullptr;
      unsigned &next = nextConfig[func];
      if (scales && next < scales.size())
        if (auto scale = dyn_cast<kiln::GridScaleAttr>(scales[next]))
          launch->setAttr(
              kiln::KilnDialect::GridScaleAttrHelper::getNameStr(), scale);
      if (configs && next < configs.size())
        launch->setAttr(kiln::KilnDialect::KernelAttrHelper::getNameStr(), configs[next++]);
    });
    module.walk([](func::FuncOp func) {
      func->removeAttr(kiln::KilnDialect::LaunchKernelsAttrHelper::getNameStr());
      func->removeAttr(
          kiln::KilnDialect::LaunchGridScalesAttrHelper::getNameStr());
    });
  }
};
} // namespace

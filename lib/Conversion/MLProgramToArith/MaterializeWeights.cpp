//===- MaterializeWeights.cpp - ml_program weights to tensor constants
//-------===//

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/SymbolTable.h"

namespace kiln {
#define GEN_PASS_DEF_MATERIALIZEWEIGHTSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct MaterializeWeightsPass
    : kiln::impl::MaterializeWeightsPassBase<MaterializeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    WalkResult result = module.walk([&](ml_program::GlobalLoadConstOp load) {
      auto global = symbols.lookup<ml_program::GlobalOp>(
          load.getGlobal().getRootReference().getValue());
      // An elements attribute: a #ml_program.extern value has no data.
      auto value = global ? dyn_cast_or_null<ElementsAttr>(global.getValueAttr())
                          : nullptr;
      if (!global || global.getIsMutable() || !value) {
        load.emitOpError("reads a global that is not an immutable, initialized "
                         "weight");
        return WalkResult::interrupt();
      }
      // The origin moves to the module, keyed by the data's blob, for the
      // artifact builder (WeightOrigins.h).
      kiln::setBlobOrigin(module, value, kiln::getWeightOrigin(global));
      OpBuilder b(load);
      load.replaceAllUsesWith(
          arith::ConstantOp::create(b, load.getLoc(), value).getResult());
      load.erase();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    for (auto global :
         llvm::make_early_inc_range(module.getOps<ml_program::GlobalOp>()))
      if (SymbolTable::symbolKnownUseEmpty(global, module))
        global.erase();
  }
};
} // namespace

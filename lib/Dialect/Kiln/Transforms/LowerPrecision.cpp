//===- LowerPrecision.cpp - kiln-lower-precision --------------------------------------------===//
//
// (Being written: see issue 5.)
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERPRECISIONPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct LowerPrecisionPass : kiln::impl::LowerPrecisionPassBase<LowerPrecisionPass> {
  using Base::Base;
  void runOnOperation() override {}
};
} // namespace

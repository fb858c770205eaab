//===- AssignLayout.cpp - kiln-assign-layout --------------------------------------------===//
//
// (Being written: see issue 5.)
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_ASSIGNLAYOUTPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct AssignLayoutPass : kiln::impl::AssignLayoutPassBase<AssignLayoutPass> {
  using Base::Base;
  void runOnOperation() override {}
};
} // namespace

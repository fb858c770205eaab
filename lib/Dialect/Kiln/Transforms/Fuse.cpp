//===- Fuse.cpp - kiln-fuse --------------------------------------------===//
//
// (Being written: see issue 5.)
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_FUSEPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct FusePass : kiln::impl::FusePassBase<FusePass> {
  using Base::Base;
  void runOnOperation() override {}
};
} // namespace

//===- TestLaunchToLoops.cpp - Run mapped launches on the CPU (tests)
//-------===//

#include "TestPasses.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <limits>

namespace kiln::test {
#define GEN_PASS_DEF_TESTLAUNCHTOLOOPSPASS
#include "TestPasses.h.inc"
} // namespace kiln::test

using namespace mlir;

namespace {

Value constantOf(OpBuilder &b, Location loc, Type type, double v) {
  if (auto f = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f, v));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(v)));
}

/// The identity and the combining op of an all-reduce kind.
std::pair<Value, std::function<Value(Value, Value)>>
combinerOf(OpBuilder &b, Location loc, gpu::AllReduceOperation kind,
           Type type) {
  double inf = std::numeric_limits<double>::infinity();
  bool isFloat = isa<FloatType>(type);
  double lowest =
      isFloat ? -inf : std::ldexp(-1.0, type.getIntOrFloatBitWidth() - 1);
  using K = gpu::AllReduceOperation;
  auto make = [&](double identity, auto fn) {
    return std::make_pair(constantOf(b, loc, type, identity),
                          std::function<Value(Value, Value)>(fn));
  };
  switch (kind) {
  case K::ADD:
    return make(0, [&b, loc, isFloat](Value x, Value y) -> Value {
      return isFloat ? Value(arith::AddFOp::create(b, loc, x, y))
                     : Value(arith::AddIOp::create(b, loc, x, y));
    });
  case K::MUL:
    return make(1, [&b, loc, isFloat](Value x, Value y) -> Value {
      return isFloat ? Value(arith::MulFOp::create(b, loc, x, y))
                     : Value(arith::MulIOp::create(b, loc, x, y));
    });
  case K::MAXIMUMF:
    return make(lowest, [&b, loc](Value x, Value y) -> Value {
      return arith::MaximumFOp::create(b, loc, x, y);
    });
  case K::MINIMUMF:
    return make(-lowest, [&b, loc](Value x, Value y) -> Value {
      return arith::MinimumFOp::create(b, loc, x, y);
    });
  case K::MAXNUMF:
    return make(lowest, [&b, loc](Value x, Value y) -> Value {
      return arith::MaxNumFOp::create(b, loc, x, y);
    });
  case K::MINNUMF:
    return make(-lowest, [&b, loc](Value x, Value y) -> Value {
      return arith::MinNumFOp::create(b, loc, x, y);
    });
  case K::MAXSI:
    return make(lowest, [&b, loc](Value x, Value y) -> Value {
      return arith::MaxSIOp::create(b, loc, x, y);
    });
  case K::MINSI:
    return make(-lowest - 1, [&b, loc](Value x, Value y) -> Value {
      return arith::MinSIOp::create(b, loc, x, y);
    });
  default:
    return {nullptr, nullptr};
  }
}

struct TestLaunchToLoopsPass
    : kiln::test::impl::TestLaunchToLoopsPassBase<TestLaunchToLoopsPass> {
  using Base::Base;

  LogicalResult convert(gpu::LaunchOp launch) {
    Location loc = launch.getLoc();
    OpBuilder b(launch);
    APInt grid, block;
    if (!matchPattern(launch.getGridSizeX(), m_ConstantInt(&grid)) ||
        !matchPattern(launch.getBlockSizeX(), m_ConstantInt(&block)))
      return launch.emitOpError("needs a constant 1-D grid and block");
    // One thread at a time cannot run threads that meet at a barrier
    // (kiln-map-to-gpu's shared-memory kernels: tiled-transpose=false
    // reduction-kernels=false leave them out).
    APInt extent;
    if (!launch.getWorkgroupAttributions().empty() ||
        !matchPattern(launch.getBlockSizeY(), m_ConstantInt(&extent)) ||
        extent != 1 ||
        launch.getBody()
            .walk([](gpu::BarrierOp) { return WalkResult::interrupt(); })
            .wasInterrupted())
      return launch.emitOpError(
          "uses shared memory, barriers or a 2-D block, which this test "
          "pass does not emulate");
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value blocks = arith::ConstantIndexOp::create(b, loc, grid.getSExtValue());
    Value threads =
        arith::ConstantIndexOp::create(b, loc, block.getSExtValue());
    Block &body = launch.getBody().front();
    SmallVector<gpu::AllReduceOp> reduces;
    for (Operation &op : body)
      if (auto r = dyn_cast<gpu::AllReduceOp>(op))
        reduces.push_back(r);

    auto blockLoop = scf::ForOp::create(b, loc, zero, blocks, one);
    b.setInsertionPointToStart(blockLoop.getBody());
    IRMapping base;
    base.map(launch.getBlockIds().x, blockLoop.getInductionVar());
    base.map(launch.getBlockIds().y, zero);
    base.map(launch.getBlockIds().z, zero);
    base.map(launch.getThreadIds().y, zero);
    base.map(launch.getThreadIds().z, zero);
    base.map(launch.getGridSizeX(), blocks);
    base.map(launch.getBlockSizeX(), threads);
    for (Value v : {launch.getGridSizeY(), launch.getGridSizeZ(),
                    launch.getBlockSizeY(), launch.getBlockSizeZ()})
      base.map(v, one);
    for (auto [arg, size] :
         llvm::zip_equal(body.getArguments().take_back(6),
                         ValueRange{blocks, one, one, threads, one, one}))
      base.map(arg, size);

    // Clones [from, to) for one thread; block-wide reductions already
    // computed are mapped to their totals.
    auto cloneRange = [&](IRMapping &mapping, Block::iterator from,
                          Block::iterator to) {
      for (Operation &op : llvm::make_range(from, to))
        if (!isa<gpu::TerminatorOp, gpu::AllReduceOp>(op))
          b.clone(op, mapping);
    };

    // Each block-wide reduction is a loop over the block's threads that
    // runs the body up to it; then every thread runs the whole body with the
    // totals (code after a reduction that only thread 0 should run carries
    // its own guard).
    for (gpu::AllReduceOp reduce : reduces) {
      if (!reduce.getOp())
        return reduce.emitOpError("needs a reduction kind");
      Type type = reduce.getType();
      auto [identity, combine] = combinerOf(b, loc, *reduce.getOp(), type);
      if (!identity)
        return reduce.emitOpError(
            "has a reduction kind this test pass does not emulate");
      auto threadLoop =
          scf::ForOp::create(b, loc, zero, threads, one, ValueRange(identity));
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(threadLoop.getBody());
        IRMapping mapping = base;
        mapping.map(launch.getThreadIds().x, threadLoop.getInductionVar());
        cloneRange(mapping, body.begin(), Block::iterator(reduce));
        Value folded = combine(threadLoop.getRegionIterArgs().front(),
                               mapping.lookup(reduce.getValue()));
        scf::YieldOp::create(b, loc, folded);
      }
      base.map(reduce.getResult(), threadLoop.getResult(0));
    }
    auto threadLoop = scf::ForOp::create(b, loc, zero, threads, one);
    b.setInsertionPointToStart(threadLoop.getBody());
    IRMapping mapping = base;
    mapping.map(launch.getThreadIds().x, threadLoop.getInductionVar());
    cloneRange(mapping, body.begin(), body.end());
    return success();
  }

  void runOnOperation() override {
    // The CPU harness's buffers (globals, allocations) are only element
    // aligned, unlike the runtime's: the vector accesses keep their
    // indexing but not the 16-byte alignment the runtime guarantees.
    getOperation().walk([](Operation *access) {
      if (auto load = dyn_cast<vector::LoadOp>(access))
        load.setAlignment(std::nullopt);
      else if (auto store = dyn_cast<vector::StoreOp>(access))
        store.setAlignment(std::nullopt);
    });
    // The kernel decisions (kiln.kernel, kiln.launch_kernels) mean nothing
    // to the CPU loops, and upstream tools read what this pass prints.
    getOperation()->removeAttr(kiln::KilnDialect::LaunchKernelsAttrHelper::getNameStr());
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp launch) {
      launch->removeAttr(kiln::KilnDialect::KernelAttrHelper::getNameStr());
      launches.push_back(launch);
    });
    for (gpu::LaunchOp launch : launches) {
      if (failed(convert(launch)))
        return signalPassFailure();
      launch.erase();
    }
  }
};

} // namespace

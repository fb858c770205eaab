//===- TestPasses.td - Passes for Kiln's tests only -------*- tablegen -*-===//
//
// Registered by kiln-opt alone (test/lib), never linked into kilnc or the
// production libraries.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_PASSES
#define KILN_TEST_PASSES

include "mlir/Pass/PassBase.td"

def TestLaunchToLoopsPass : Pass<"kiln-test-launch-to-loops", "mlir::func::FuncOp"> {
  let summary = "Run kiln-map-to-gpu's launches as CPU loops (testing only)";
  let description = [{
    For numerics tests without a GPU: each 1-D `gpu.launch` that
    `kiln-map-to-gpu` produced becomes a loop over blocks and, inside, a loop
    over threads. A block-wide `gpu.all_reduce` splits the body: the loop
    over threads folds every thread's partial with the reduction's combiner,
    then the rest of the body runs once as thread 0 with the total. This is
    exactly the semantics the kernels rely on (threads of a block only meet
    at the all-reduce), so the CPU result checks the kernels' indexing and
    reductions before any PTX exists. The CPU harness allocates buffers at
    element alignment only, so the `alignment` of vectorised accesses
    (which the runtime's 16-byte aligned buffers back on a GPU) is dropped.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

#endif // KILN_TEST_PASSES

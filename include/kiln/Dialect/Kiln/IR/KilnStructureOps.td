//===- KilnStructureOps.td - Ops that structure the graph --*- tablegen -*-===//
//
// kiln.fusion groups ops that codegen compiles into exactly one kernel.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNSTRUCTUREOPS_TD
#define KILN_DIALECT_KILN_IR_KILNSTRUCTUREOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def Kiln_FusionOp : Op<Kiln_Dialect, "fusion", [
    RecursiveMemoryEffects, RecursivelySpeculatable,
    SingleBlockImplicitTerminator<"::kiln::YieldOp">]> {
  let summary = "A fused subgraph: one kernel";
  let description = [{
    Holds a subgraph of kiln ops that code generation turns into exactly one
    GPU kernel. The region is not isolated: its ops use values defined above
    (region inputs) directly, and `kiln.yield` names the values the kernel
    writes to memory, which become the op's results. Everything else computed
    inside stays in registers. All results have the same shape, the
    iteration space of the kernel. `kiln-fuse` forms these ops; the `kind`
    attribute records which of its rules formed the region (for `--stats`
    and for reading IR), codegen does not depend on it.

    Example:

    ```mlir
    %y = kiln.fusion "conv_epilogue" -> tensor<1x8x4x4xf32> {
      %c = kiln.conv %x, %w ... : ... -> tensor<1x8x4x4xf32>
      %r = kiln.relu %c : tensor<1x8x4x4xf32>
      kiln.yield %r : tensor<1x8x4x4xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$kind);
  let results = (outs Variadic<Kiln_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind (`->` type($results)^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::kiln::YieldOp getYield();
  }];
}

def Kiln_YieldOp : Op<Kiln_Dialect, "yield", [
    Pure, Terminator, ReturnLike, HasParent<"::kiln::FusionOp">]> {
  let summary = "The values a fusion region writes to memory";
  let description = [{
    Terminates a `kiln.fusion` region; its operands become the region's
    results.

    Example:

    ```mlir
    kiln.yield %a, %b : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ /* empty */ }]>];
}

#endif // KILN_DIALECT_KILN_IR_KILNSTRUCTUREOPS_TD

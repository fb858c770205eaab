//===- KilnStructureOps.td - Ops that structure the graph --*- tablegen -*-===//
//
// kiln.fusion groups ops that codegen compiles into exactly one kernel;
// kiln.call_kernel runs a kernel compiled ahead of codegen (a specialised
// template: tensor-core contractions).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNSTRUCTUREOPS_TD
#define KILN_DIALECT_KILN_IR_KILNSTRUCTUREOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.td"

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

def Kiln_CallKernelOp : Op<Kiln_Dialect, "call_kernel", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<BufferizableOpInterface,
        ["bufferizesToMemoryRead", "bufferizesToMemoryWrite",
         "getAliasingValues", "bufferize"]>]> {
  let summary = "Launch a template kernel specialised before codegen";
  let description = [{
    Runs `kernel`, a `.entry` of a `gpu.binary` that holds a kernel template
    specialised for one region (its CUDA C++ source, which the target step
    compiles with NVRTC, or PTX), on
    `grid` x `block` threads with `dynamic_shared_bytes` of dynamic shared
    memory. The kernel's parameters are a pointer per operand, then the
    `scalars` (each an i32 or i64 integer attribute, passed by value). The
    pointers come in operand order (inputs, then outputs) unless
    `pointer_order` gives another: a permutation of the operand indices
    (a template's output pointer usually sits between its inputs).

    The op is destination-style and exists in two forms. On tensors (before
    bufferization) it reads `inputs` and returns one tensor per `outputs`
    operand (its init, usually `tensor.empty`: the kernel writes every
    element, so the init's contents are not read). On memrefs (after
    bufferization) it has no results, reads the inputs and writes the
    outputs in place. `kiln-lower-kernel-calls` turns the memref form into
    `gpu.launch_func`.

    Example:

    ```mlir
    %y = kiln.call_kernel @gemm0::@gemm0 ins(%a, %b : tensor<64x32xbf16>, tensor<32x16xbf16>)
           outs(%init : tensor<64x16xf32>) grid [1, 1, 1] block [128, 1, 1]
           scalars [64 : i32, 16 : i32, 32 : i32] -> tensor<64x16xf32>
    ```
  }];
  let arguments = (ins SymbolRefAttr:$kernel, Variadic<AnyShaped>:$inputs,
                       Variadic<AnyShaped>:$outputs,
                       DenseI32ArrayAttr:$grid, DenseI32ArrayAttr:$block,
                       DefaultValuedAttr<I32Attr, "0">:$dynamic_shared_bytes,
                       DefaultValuedAttr<ArrayAttr, "{}">:$scalars,
                       OptionalAttr<DenseI32ArrayAttr>:$pointer_order);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $kernel (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    `grid` $grid `block` $block (`scalars` $scalars^)?
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    /// Whether every operand is a memref (the form after bufferization).
    bool hasBufferSemantics();
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNSTRUCTUREOPS_TD

//===- Passes.td - Kiln graph passes -----------------------*- tablegen -*-===//
//
// Graph passes on the kiln dialect, in the order the inference pipeline runs
// them: layout, precision, fusion (lib/Pipelines/Pipelines.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AssignLayoutPass : Pass<"kiln-assign-layout", "mlir::func::FuncOp"> {
  let summary = "Choose NCHW or NHWC per op and make layout changes explicit";
  let description = [{
    (Being written: see issue 5.)
  }];
  let options = [
    Option<"layout", "layout", "std::string", /*default=*/"\"auto\"",
           "nchw, nhwc, or auto (NHWC when the precision uses tensor cores)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "the precision the model is compiled for (auto layout uses it)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def LowerPrecisionPass : Pass<"kiln-lower-precision", "mlir::func::FuncOp"> {
  let summary = "Run matmuls and convolutions in a lower precision";
  let description = [{
    (Being written: see issue 5.)
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32, tf32, bf16 or fp16">,
    Option<"ioPrecision", "io-precision", "std::string", /*default=*/"\"\"",
           "element type of model inputs and outputs (default: as declared)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def FusePass : Pass<"kiln-fuse", "mlir::func::FuncOp"> {
  let summary = "Group ops into kiln.fusion regions, one kernel each";
  let description = [{
    (Being written: see issue 5.)
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD

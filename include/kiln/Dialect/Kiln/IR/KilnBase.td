//===- KilnBase.td - The kiln dialect, its types and enums -*- tablegen -*-===//
//
// The dialect definition, the operand type constraints and the enum attributes
// shared by every op family.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNBASE_TD
#define KILN_DIALECT_KILN_IR_KILNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Deep-learning graph operations on ranked tensors";
  let description = [{
    The `kiln` dialect is Kiln's graph-level IR. Every op works on ranked
    tensors with value semantics and has no side effects; shapes are static
    today, and shape logic lives only in the ops' type inference so symbolic
    dimensions can come later. Layout-sensitive ops carry their data format
    as an attribute, and layout or precision changes are explicit
    `kiln.transpose` / `kiln.cast` ops so that graph passes can move, merge
    and cancel them. Weights are not inline constants: the ONNX importer
    stores them in `ml_program.global` ops backed by resource blobs.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // `kiln.kernel` holds a kernel configuration (KilnKernelAttrs.td).
  let hasOperationAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Kiln_Tensor : RankedTensorOf<[AnyType]>;
def Kiln_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Kiln_IntTensor : RankedTensorOf<[AnyInteger]>;
def Kiln_NumericTensor : RankedTensorOf<[AnyFloat, AnyInteger]>;
def Kiln_BoolTensor : RankedTensorOf<[I1]>;
def Kiln_IndexTensor : RankedTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kiln_DataFormat : I32EnumAttr<"DataFormat",
    "where the channel dimension of an activation lives", [
      I32EnumAttrCase<"ChannelsFirst", 0, "nchw">,
      I32EnumAttrCase<"ChannelsLast", 1, "nhwc">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_DataFormatAttr : EnumAttr<Kiln_Dialect, Kiln_DataFormat, "data_format"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_ReduceKind : I32EnumAttr<"ReduceKind", "a reduction's combiner", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Mean", 1, "mean">,
      I32EnumAttrCase<"Max", 2, "max">,
      I32EnumAttrCase<"Min", 3, "min">,
      I32EnumAttrCase<"Prod", 4, "prod">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_ReduceKindAttr : EnumAttr<Kiln_Dialect, Kiln_ReduceKind, "reduce_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_PoolKind : I32EnumAttr<"PoolKind", "a pooling window's combiner", [
      I32EnumAttrCase<"Max", 0, "max">,
      I32EnumAttrCase<"Avg", 1, "avg">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_PoolKindAttr : EnumAttr<Kiln_Dialect, Kiln_PoolKind, "pool_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_PadMode : I32EnumAttr<"PadMode", "how pad fills the border", [
      I32EnumAttrCase<"Constant", 0, "constant">,
      I32EnumAttrCase<"Reflect", 1, "reflect">,
      I32EnumAttrCase<"Edge", 2, "edge">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_PadModeAttr : EnumAttr<Kiln_Dialect, Kiln_PadMode, "pad_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_ScatterReduction : I32EnumAttr<"ScatterReduction",
    "how scatter combines an update with the existing element", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Add", 1, "add">,
      I32EnumAttrCase<"Mul", 2, "mul">,
      I32EnumAttrCase<"Max", 3, "max">,
      I32EnumAttrCase<"Min", 4, "min">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_ScatterReductionAttr
    : EnumAttr<Kiln_Dialect, Kiln_ScatterReduction, "scatter_reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_ResizeMode : I32EnumAttr<"ResizeMode", "resize interpolation", [
      I32EnumAttrCase<"Nearest", 0, "nearest">,
      I32EnumAttrCase<"Linear", 1, "linear">,
      I32EnumAttrCase<"Cubic", 2, "cubic">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_ResizeModeAttr : EnumAttr<Kiln_Dialect, Kiln_ResizeMode, "resize_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_CoordinateMode : I32EnumAttr<"CoordinateMode",
    "how resize maps an output coordinate to an input coordinate", [
      I32EnumAttrCase<"HalfPixel", 0, "half_pixel">,
      I32EnumAttrCase<"PytorchHalfPixel", 1, "pytorch_half_pixel">,
      I32EnumAttrCase<"AlignCorners", 2, "align_corners">,
      I32EnumAttrCase<"Asymmetric", 3, "asymmetric">,
      I32EnumAttrCase<"HalfPixelSymmetric", 4, "half_pixel_symmetric">,
      I32EnumAttrCase<"TfCropAndResize", 5, "tf_crop_and_resize">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_CoordinateModeAttr
    : EnumAttr<Kiln_Dialect, Kiln_CoordinateMode, "coordinate_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_NearestMode : I32EnumAttr<"NearestMode",
    "how nearest-neighbour resize rounds a fractional coordinate", [
      I32EnumAttrCase<"RoundPreferFloor", 0, "round_prefer_floor">,
      I32EnumAttrCase<"RoundPreferCeil", 1, "round_prefer_ceil">,
      I32EnumAttrCase<"Floor", 2, "floor">,
      I32EnumAttrCase<"Ceil", 3, "ceil">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_NearestModeAttr : EnumAttr<Kiln_Dialect, Kiln_NearestMode, "nearest_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Base op classes
//===----------------------------------------------------------------------===//

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, !listconcat(traits, [Pure])>;

#endif // KILN_DIALECT_KILN_IR_KILNBASE_TD

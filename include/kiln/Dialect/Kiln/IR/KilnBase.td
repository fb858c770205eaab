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

  // The discardable `kiln.*` attributes passes leave on ops, functions'
  // arguments and results, and modules; each gets a typed helper
  // (KilnDialect::NameAttrHelper, ...: getNameStr(), getAttr(op),
  // setAttr(op, value)), so no pass writes an attribute name as a string.
  // docs/passes.md says which pass sets and which reads each one.
  let discardableAttrs = (ins
    // Graph signature (importer; func arguments and results).
    "::mlir::StringAttr":$name,
    // The model (importer; module).
    "::mlir::StringAttr":$source,
    "::mlir::IntegerAttr":$opset,
    "::mlir::StringAttr":$graph_name,
    // Symbolic dimensions (importer; func arguments, module): the symbol of
    // each of an input's dims ("" where fixed), and each symbol's range as
    // [min, max, opt] (kilnc --dim).
    "::mlir::ArrayAttr":$symbolic_dims,
    "::mlir::DictionaryAttr":$dim_ranges,
    // Where a weight came from (importer; ml_program.global, module).
    "::mlir::StringAttr":$origin,
    "::mlir::DictionaryAttr":$weight_origins,
    // BatchNormalization's running-statistics momentum (importer; op).
    "::mlir::FloatAttr":$momentum,
    // tf32 contractions and their rounded weights (kiln-lower-precision).
    "::mlir::UnitAttr":$tf32,
    "::mlir::UnitAttr":$tf32_rounded,
    // Training (kiln-autodiff, kiln-optimizer): state arguments and
    // results, their first values, the loss seed, the gradients and state
    // updates of @train_grad, the flat layout of the trainable weights.
    "::mlir::StringAttr":$state,
    "::mlir::DenseElementsAttr":$initial,
    "::mlir::UnitAttr":$loss_seed,
    "::mlir::ArrayAttr":$gradients,
    "::mlir::ArrayAttr":$state_updates,
    "::mlir::DictionaryAttr":$training,
    "::mlir::UnitAttr":$recomputed,
    "::mlir::DictionaryAttr":$remat_report,
    // Kernel choices: `kiln.kernel` is a region's, kernel call's or
    // launch's typed config (#kiln.gemm_config, ..., #kiln.generic_kernel;
    // kiln-select-contraction-kernels, kiln-select-generic-kernels), with
    // where it came from, whether a tf32 weight is stored K-major and
    // report lines that precede the region's own.
    "::mlir::StringAttr":$kernel_origin,
    "::mlir::UnitAttr":$weight_kmajor,
    "::mlir::ArrayAttr":$selection_note,
    // kiln-map-to-gpu's launches' configs, in order, on their function, for
    // kiln-name-kernels to move onto the outlined launches.
    "::mlir::ArrayAttr":$launch_kernels,
    // Template kernels (kiln-match-contractions): the kernel call's
    // FLOPs and TMA tensor maps, why a region kept a generic kernel, the
    // per-region report (module); kiln-lower-kernel-calls copies FLOPs and
    // maps to the launch and adds the operands the kernel writes.
    "::mlir::Attribute":$kernel,
    "::mlir::IntegerAttr":$flops,
    "::mlir::ArrayAttr":$tensor_maps,
    "::mlir::StringAttr":$generic_reason,
    "::mlir::ArrayAttr":$contraction_report,
    "::mlir::DenseI32ArrayAttr":$written_operands,
    // The kind of the kiln.fusion a linalg.generic came from
    // (kiln-collapse-fusions).
    "::mlir::StringAttr":$fusion_kind,
    // Launch scaling (KilnKernelAttrs.td): a GEMM template call's
    // #kiln.grid_rows, a call's or launch's #kiln.grid_scale, and a
    // function's list of them in generic-launch order (kiln-map-to-gpu to
    // kiln-name-kernels). Typed as Attribute: the dialect's helpers are
    // declared before its attribute classes.
    "::mlir::Attribute":$grid_rows,
    "::mlir::Attribute":$grid_scale,
    "::mlir::ArrayAttr":$launch_grid_scales,
    // Size buckets (kilnc --size-buckets): a region's configs for the
    // smaller buckets of its one symbolic dim (kiln-select-contraction-
    // kernels: dictionaries {kernel, min, max}), and a kernel call's or
    // launch's #kiln.size_guard.
    "::mlir::ArrayAttr":$kernel_variants,
    "::mlir::Attribute":$size_guard,
    // The importer's notes for the separable-dims analysis (kilnc --dim):
    // a kiln.slice's dims whose start or end ONNX counts from the end of
    // the dim, and a kiln.reshape that is a Squeeze without axes, both
    // resolved at the compiled (maximum) sizes.
    "::mlir::DenseI64ArrayAttr":$slice_from_end,
    "::mlir::UnitAttr":$squeeze_all,
    // kiln-fuse-quantized (module): one line per quantized contraction
    // chain that stays on the exact fallback, and why (kilnc --stats).
    "::mlir::ArrayAttr":$quantized_report,
    // kiln-lower-recurrence (module): one line per persistent recurrence
    // kernel (kilnc --stats).
    "::mlir::ArrayAttr":$recurrence_report,
    // A device-side loop (importer; func.call of the loop's body): the
    // number of loop-state operands, which lead the call's operands
    // (flag, counter, carried values) and pair with its results (or, after
    // bufferization, with its last out-parameters).
    "::mlir::IntegerAttr":$device_loop
  );
}

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

// Elementwise over two operands broadcast by numpy rules (every
// Kiln_BinaryOp: arithmetic, logical, comparisons). OpTrait::Elementwise
// (operands of one shape) does not hold for them, but the graph passes treat
// them as elementwise: kiln-fuse groups them, layout propagation moves
// transposes through them, rematerialisation recomputes them. Passes ask
// `op->hasTrait<kiln::trait::BroadcastingBinary>()` (Kiln.h
// isBroadcastingElementwise) instead of listing the ops.
def Kiln_BroadcastingBinary : NativeOpTrait<"BroadcastingBinary"> {
  let cppNamespace = "::kiln::trait";
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

def Kiln_RecurrentCell : I32EnumAttr<"RecurrentCell",
    "a recurrent layer's cell", [
      I32EnumAttrCase<"Rnn", 0, "rnn">,
      I32EnumAttrCase<"Gru", 1, "gru">,
      I32EnumAttrCase<"Lstm", 2, "lstm">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_RecurrentCellAttr : EnumAttr<Kiln_Dialect, Kiln_RecurrentCell,
                                      "recurrent_cell"> {
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
      I32EnumAttrCase<"TfCropAndResize", 5, "tf_crop_and_resize">,
      I32EnumAttrCase<"TfHalfPixelForNn", 6, "tf_half_pixel_for_nn">
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

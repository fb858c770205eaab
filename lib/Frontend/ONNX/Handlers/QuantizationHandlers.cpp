//===- QuantizationHandlers.cpp - ONNX quantize, dequantize, QLinear* -----===//
//
// QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
// QLinearConv, composed from kiln ops so that every value is the one ONNX's
// reference evaluator computes:
//
//  - quantize: `x / scale` in x's type, rounded half to even, plus the zero
//    point, saturated to the storage type's range;
//  - dequantize: `(float(x) - float(zero_point)) * scale` in f32 (f64 for an
//    int32 x, as numpy promotes), then the scale's type;
//  - integer products: the zero points are subtracted in i32 and the sums
//    are exact (matmul in i32; conv in f64, whose 53-bit mantissa holds any
//    int8/uint8 sum of fewer than 2^37 terms exactly);
//  - requantize (QLinearMatMul, QLinearConv): the multiplier
//    `a_scale * b_scale / y_scale` in the scales' type, the accumulator times
//    it in f64 (numpy's int32 * float32 promotion), plus the zero point,
//    rounded half to even and saturated. onnxruntime multiplies in f32; the
//    two differ only where the f32 product rounds across a .5 tie.
//
// This is the honest fallback lowering: the tensor-core int8 kernels come
// from fusing these compositions (docs/architecture.md, "Quantized models").
//
//===----------------------------------------------------------------------===//

#include "QuantizationCompose.h"
#include "WindowAttrs.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace quant {

std::optional<std::pair<double, double>> integerRange(Type type,
                                                      bool fourBit) {
  auto intType = dyn_cast<IntegerType>(type);
  if (!intType || intType.getWidth() == 1 || intType.getWidth() > 16)
    return std::nullopt;
  unsigned bits = fourBit ? 4 : intType.getWidth();
  if (intType.isUnsigned())
    return std::make_pair(0.0, std::ldexp(1.0, bits) - 1);
  return std::make_pair(-std::ldexp(1.0, bits - 1),
                        std::ldexp(1.0, bits - 1) - 1);
}

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

} // namespace quant

using namespace quant;

namespace {

/// A scale or zero point reshaped (per axis) or repeated (blocked) so that
/// it broadcasts to `shape`, as the reference's reshape_input does. A
/// one-element parameter is a scalar.
Value broadcastQuantParam(Composer &c, Value param, ArrayRef<int64_t> shape,
                          int64_t axis, int64_t blockSize, StringRef what) {
  if (!param)
    return {};
  RankedTensorType type = typeOf(param);
  if (type.getNumElements() == 1)
    return c.reshape(param, {});
  int64_t rank = shape.size();
  if (axis < 0 || axis >= rank)
    return c.fail(Twine(what) + " of shape " + formatInts(type.getShape()) +
                  " is per axis, but axis " + Twine(axis) +
                  " is out of range for rank " + Twine(rank));
  if (blockSize <= 0) {
    if (type.getRank() != 1 || type.getDimSize(0) != shape[axis])
      return c.fail(Twine(what) + " of shape " + formatInts(type.getShape()) +
                    " is neither a scalar nor a vector of the " +
                    Twine(shape[axis]) + " elements of axis " + Twine(axis));
    SmallVector<int64_t> dims(rank, 1);
    dims[axis] = shape[axis];
    return c.reshape(param, dims);
  }
  int64_t blocks = (shape[axis] + blockSize - 1) / blockSize;
  if (type.getRank() != rank)
    return c.fail(Twine(what) + " of shape " + formatInts(type.getShape()) +
                  " must have the input's rank " + Twine(rank) +
                  " for blocked quantization");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t expected = d == axis ? blocks : shape[d];
    if (type.getDimSize(d) != expected)
      return c.fail(Twine(what) + " of shape " + formatInts(type.getShape()) +
                    " does not match input shape " + formatInts(shape) +
                    " in blocks of " + Twine(blockSize) + " along axis " +
                    Twine(axis));
  }
  // [.., blocks, ..] -> [.., blocks, 1, ..] -> [.., blocks, B, ..]
  // -> [.., blocks * B, ..] -> the first shape[axis] rows.
  SmallVector<int64_t> split(type.getShape());
  split.insert(split.begin() + axis + 1, 1);
  Value v = c.reshape(param, split);
  split[axis + 1] = blockSize;
  v = c.broadcast(v, split);
  SmallVector<int64_t> merged(type.getShape());
  merged[axis] = blocks * blockSize;
  v = c.reshape(v, merged);
  if (blocks * blockSize != shape[axis])
    v = c.sliceAxis(v, axis, 0, shape[axis]);
  return v;
}

/// Whether every element of `v`, a load of a float8 weight global, is a
/// zero; nullopt when `v` is no such load or its bytes are not known.
std::optional<bool> float8GlobalIsZero(Value v) {
  auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>();
  if (!load)
    return std::nullopt;
  auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
      load, load.getGlobalAttr());
  auto resource =
      global && global.getValue()
          ? dyn_cast<DenseResourceElementsAttr>(*global.getValue())
          : DenseResourceElementsAttr();
  AsmResourceBlob *blob = resource ? resource.getRawHandle().getBlob()
                                   : nullptr;
  Type element = getElementTypeOrSelf(v.getType());
  if (!blob || !isa<FloatType>(element) ||
      element.getIntOrFloatBitWidth() != 8)
    return std::nullopt;
  // The FNUZ types have no -0: their 0x80 is NaN.
  bool fnuz = isa<Float8E4M3FNUZType, Float8E5M2FNUZType>(element);
  for (char byte : blob->getData())
    if (byte != 0 && (fnuz || static_cast<uint8_t>(byte) != 0x80))
      return false;
  return true;
}

/// A float8 zero point (input 2) must be 0, as the spec says; the reference
/// refuses others on dequantize and ignores them on quantize. Kiln refuses
/// a constant other than 0. One given at run time cannot be checked before
/// the run: quantize ignores it, as the reference does, and dequantize
/// subtracts it (nothing, for the 0 the spec allows); `runtime` says so.
LogicalResult requireZeroPoint0(NodeImporter &n, StringRef what,
                                bool *runtime = nullptr) {
  if (runtime)
    *runtime = false;
  if (!n.hasInput(2))
    return success();
  std::optional<DenseElementsAttr> zero = n.constantInput(2);
  if (!zero) {
    // A per-axis zero point above the inline-constant limit is a weight
    // global: all of its bytes zero (+0; or 0x80, -0 where that is not
    // FNUZ's NaN) is the 0 the spec asks for, known at compile time.
    if (std::optional<bool> zeros = float8GlobalIsZero(n.input(2)))
      return *zeros ? success()
                    : n.fail(Twine(what) +
                             " of float8 type must be 0, got a nonzero value");
    if (runtime)
      *runtime = true;
    return success();
  }
  for (APFloat v : zero->getValues<APFloat>())
    if (!v.isZero())
      return n.fail(Twine(what) + " of float8 type must be 0, got " +
                    llvm::formatv("{0}", v.convertToDouble()).str());
  return success();
}

/// The quantization axis (opset 13 on) and block size (opset 21 on).
FailureOr<std::pair<int64_t, int64_t>> readAxisAndBlock(NodeImporter &n) {
  // The axis only matters to per-axis and blocked parameters (a per-tensor
  // node may keep the default 1 on a 1-D input): broadcastQuantParam checks
  // it where it is used.
  int64_t rank = n.inputType(0).getRank();
  int64_t axis = n.opset() >= 13 ? n.intAttr("axis", 1) : 0;
  if (axis < 0)
    axis += rank;
  int64_t blockSize = n.opset() >= 21 ? n.intAttr("block_size", 0) : 0;
  if (blockSize < 0) {
    (void)n.fail("block_size " + Twine(blockSize) + " must be positive");
    return failure();
  }
  return std::make_pair(axis, blockSize);
}

} // namespace

/// `v` and `zeroPoint` (already broadcastable) are floats of one type.
Value quant::roundSaturate(Composer &c, Value v, Value zeroPoint, Type storage,
                          bool fourBit) {
  auto range = integerRange(storage, fourBit);
  if (!v || c.failed())
    return {};
  if (!range)
    return c.fail("the storage type " + typeName(storage) +
                  " is not an 8- or 16-bit integer");
  v = c.make<RoundOp>(v);
  if (zeroPoint)
    v = c.make<AddOp>({v, c.cast(zeroPoint, elementTypeOf(v))});
  NodeImporter &n = c.importer();
  v = c.make<ClipOp>(v, {n.namedF64("min", range->first),
                         n.namedF64("max", range->second)});
  return c.cast(v, storage);
}

Value quant::perTensor(Composer &c, Value v, StringRef what) {
  if (!v)
    return {};
  if (typeOf(v).getNumElements() != 1)
    return c.fail(Twine(what) + " must be a scalar (per-tensor), got shape " +
                  formatInts(typeOf(v).getShape()));
  return c.reshape(v, {});
}

Value quant::dequantizeF32(Composer &c, Value x, Value scale,
                           Value zeroPoint) {
  Type f32 = c.importer().builder().getF32Type();
  Value v = c.cast(x, f32);
  if (zeroPoint)
    v = c.make<SubOp>({v, c.cast(perTensor(c, zeroPoint, "zero point"), f32)});
  return c.make<MulOp>({v, c.cast(perTensor(c, scale, "scale"), f32)});
}

Value quant::quantizeF32(Composer &c, Value v, Value scale, Value zeroPoint) {
  if (!zeroPoint)
    return c.fail("a zero point is required");
  Type f32 = c.importer().builder().getF32Type();
  Value q = c.make<DivOp>({v, c.cast(perTensor(c, scale, "scale"), f32)});
  return roundSaturate(c, q, perTensor(c, zeroPoint, "zero point"),
                       elementTypeOf(zeroPoint));
}

namespace {

/// The type integer arithmetic of a quantized value is exact in before the
/// scale multiply: f32 holds every 16-bit integer and their differences.
Type dequantComputeType(NodeImporter &n, Type storage) {
  if (storage.isInteger(32))
    return n.builder().getF64Type();
  return n.builder().getF32Type();
}

} // namespace

LogicalResult quant::importQuantizeLinear(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)))
    return failure();
  auto axisBlock = readAxisAndBlock(n);
  if (failed(axisBlock))
    return failure();
  auto [axis, blockSize] = *axisBlock;
  Composer c(n);
  Value x = n.input(0);
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  Type storage;
  // INT4/UINT4 are held as i8/ui8: the zero point's ONNX type or
  // output_dtype says which range applies.
  bool fourBit = false;
  if (n.hasInput(2)) {
    storage = elementTypeOf(n.input(2));
    fourBit = n.inputIsFourBit(2);
  } else if (n.hasAttr("output_dtype")) {
    auto outputType = static_cast<int32_t>(n.intAttr("output_dtype", 0));
    storage = convertElementType(outputType, n.context());
    fourBit = isFourBitType(outputType);
  } else {
    storage = n.builder().getIntegerType(8, /*isSigned=*/false);
  }
  bool float8 = storage && isa<FloatType>(storage) &&
                storage.getIntOrFloatBitWidth() == 8;
  if (!storage || (!float8 && !integerRange(storage)))
    return n.fail("quantizing to " +
                  (storage ? typeName(storage)
                           : onnxTypeName(n.intAttr("output_dtype", 0))) +
                  " is not supported (int4, uint4, int8, uint8, int16, uint16 "
                  "and the float8 types are)");
  if (n.hasAttr("output_dtype") && n.hasInput(2) &&
      convertElementType(n.intAttr("output_dtype", 0), n.context()) != storage)
    return n.fail("output_dtype " +
                  onnxTypeName(n.intAttr("output_dtype", 0)) +
                  " differs from the zero point's type " + typeName(storage));
  Type xType = elementTypeOf(x);
  Value scale = n.input(1);
  // An integer x divides as numpy does: in f64.
  if (isa<IntegerType>(xType)) {
    x = c.cast(x, n.builder().getF64Type());
    scale = c.cast(scale, n.builder().getF64Type());
  } else if (elementTypeOf(scale) != xType) {
    return n.fail("y_scale's type " + typeName(elementTypeOf(scale)) +
                  " differs from x's type " + typeName(xType));
  }
  scale = broadcastQuantParam(c, scale, shape, axis, blockSize, "y_scale");
  Value q = c.make<DivOp>({x, scale});
  // Round and add the zero point where every 16-bit value is exact.
  if (!elementTypeOf(x).isF64())
    q = c.cast(q, n.builder().getF32Type());
  if (float8) {
    // The reference converts x / scale (as f32) and ignores the zero point,
    // which must be 0; saturate clips to +-max first, as Cast does.
    if (failed(requireZeroPoint0(n, "y_zero_point")))
      return failure();
    q = c.cast(q, n.builder().getF32Type());
    if (n.intAttr("saturate", 1) != 0) {
      double max = isa<Float8E4M3FNType>(storage)     ? 448.0
                   : isa<Float8E4M3FNUZType>(storage) ? 240.0
                                                : 57344.0;
      q = c.make<ClipOp>(q, {n.namedF64("min", -max), n.namedF64("max", max)});
    }
    return bindComposed(c, c.cast(q, storage));
  }
  if (fourBit)
    n.markOutputFourBit(0);
  Value zeroPoint =
      n.hasInput(2) ? broadcastQuantParam(c, n.input(2), shape, axis,
                                          blockSize, "y_zero_point")
                    : Value();
  return bindComposed(c, roundSaturate(c, q, zeroPoint, storage, fourBit));
}

LogicalResult quant::importDequantizeLinear(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)))
    return failure();
  auto axisBlock = readAxisAndBlock(n);
  if (failed(axisBlock))
    return failure();
  auto [axis, blockSize] = *axisBlock;
  Composer c(n);
  Value x = n.input(0);
  Type storage = elementTypeOf(x);
  bool float8 =
      isa<FloatType>(storage) && storage.getIntOrFloatBitWidth() == 8;
  if (!float8 && !integerRange(storage) && !storage.isInteger(32))
    return n.fail("dequantizing " + typeName(storage) +
                  " is not supported (int4, uint4, int8, uint8, int16, "
                  "uint16, int32 and the float8 types are)");
  if (n.hasInput(2) && elementTypeOf(n.input(2)) != storage)
    return n.fail("x_zero_point's type " + typeName(elementTypeOf(n.input(2))) +
                  " differs from x's type " + typeName(storage));
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  Type compute = dequantComputeType(n, storage);
  Value dx = c.cast(x, compute);
  bool runtimeZero = false;
  if (float8 && failed(requireZeroPoint0(n, "x_zero_point", &runtimeZero)))
    return failure();
  if (n.hasInput(2) && (!float8 || runtimeZero))
    dx = c.make<SubOp>(
        {dx, c.cast(broadcastQuantParam(c, n.input(2), shape, axis, blockSize,
                                        "x_zero_point"),
                    compute)});
  Value scale = n.input(1);
  Type scaleType = elementTypeOf(scale);
  if (!isa<FloatType>(scaleType))
    return n.fail("x_scale must be a float tensor, got " + typeName(scaleType));
  Value y = c.make<MulOp>(
      {dx, c.cast(broadcastQuantParam(c, scale, shape, axis, blockSize,
                                      "x_scale"),
                  compute)});
  return bindComposed(c, c.cast(y, scaleType));
}

DynamicQuantized quant::dynamicQuantize(Composer &c, Value x) {
  NodeImporter &n = c.importer();
  Type f32 = n.builder().getF32Type();
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, typeOf(x).getRank()));
  Value zero = c.scalar(f32, 0.0);
  Value maxX = c.make<MaxOp>({c.reduce(ReduceKind::Max, x, all, false), zero});
  Value minX = c.make<MinOp>({c.reduce(ReduceKind::Min, x, all, false), zero});
  Value range = c.make<SubOp>({maxX, minX});
  Value same = c.make<EqualOp>({maxX, minX});
  Value scale = c.make<DivOp>(
      {c.make<SelectOp>({same, c.scalar(f32, 1.0), range}),
       c.scalar(f32, 255.0)});
  Value zp = c.make<SubOp>({zero, c.make<DivOp>({minX, scale})});
  zp = c.make<RoundOp>(c.make<ClipOp>(
      zp, {n.namedF64("min", 0.0), n.namedF64("max", 255.0)}));
  Type u8 = n.builder().getIntegerType(8, /*isSigned=*/false);
  Value y = roundSaturate(c, c.make<DivOp>({x, scale}), zp, u8);
  return {y, scale, c.cast(zp, u8)};
}

namespace {

/// DynamicQuantizeLinear: uint8 with a scale and zero point from x's range
/// (widened to include 0), computed in f32 as the reference does.
LogicalResult importDynamicQuantizeLinear(NodeImporter &n) {
  if (failed(n.checkArity(1, 1, 3)))
    return failure();
  Value x = n.input(0);
  if (elementTypeOf(x) != n.builder().getF32Type())
    return n.fail("x must be f32, got " + typeName(elementTypeOf(x)));
  Composer c(n);
  DynamicQuantized q = dynamicQuantize(c, x);
  return bindComposed(c, {q.value, q.scale, q.zeroPoint});
}

/// `value` as i32 minus its zero point. A per-row zero point of a matrix
/// operand ([M] for an [..., M, K] lhs) lies along the rows.
Value subtractZeroPoint(Composer &c, Value value, Value zeroPoint,
                        bool perRow) {
  Type i32 = c.importer().builder().getIntegerType(32);
  Value v = c.cast(value, i32);
  if (!zeroPoint || !v)
    return v;
  RankedTensorType zpType = typeOf(zeroPoint);
  Value zp = c.cast(zeroPoint, i32);
  if (zpType.getNumElements() == 1) {
    zp = c.reshape(zp, {});
  } else if (perRow && zpType.getRank() == 1 && typeOf(v).getRank() >= 2) {
    zp = c.reshape(zp, {zpType.getDimSize(0), 1});
  }
  return c.make<SubOp>({v, zp});
}

} // namespace

Value quant::integerMatmul(Composer &c, Value a, Value aZeroPoint, Value b,
                           Value bZeroPoint) {
  Value a32 = subtractZeroPoint(c, a, aZeroPoint, /*perRow=*/true);
  Value b32 = subtractZeroPoint(c, b, bZeroPoint, /*perRow=*/false);
  return c.make<MatmulOp>({a32, b32});
}

namespace {

bool isInt8Storage(Type type) {
  auto intType = dyn_cast<IntegerType>(type);
  return intType && intType.getWidth() == 8;
}

LogicalResult checkInt8(NodeImporter &n, size_t i, StringRef what) {
  if (!n.hasInput(i) || isInt8Storage(elementTypeOf(n.input(i))))
    return success();
  return n.fail(Twine(what) + " must be int8 or uint8, got " +
                typeName(elementTypeOf(n.input(i))));
}

/// checkInt8 on each named input (an empty name skips that input).
LogicalResult checkInt8s(NodeImporter &n,
                         std::initializer_list<const char *> names) {
  size_t i = 0;
  for (const char *what : names) {
    if (*what && failed(checkInt8(n, i, what)))
      return failure();
    ++i;
  }
  return success();
}

LogicalResult importMatMulInteger(NodeImporter &n) {
  if (failed(n.checkArity(2, 4)))
    return failure();
  if (failed(checkInt8s(n, {"A", "B", "a_zero_point", "b_zero_point"})))
    return failure();
  Composer c(n);
  return bindComposed(
      c, integerMatmul(c, n.input(0), n.input(2), n.input(1), n.input(3)));
}

/// The exact integer convolution of x and w (zero points subtracted) plus
/// an optional i32 bias, as f64. Padding adds zeros after the zero point is
/// subtracted, i.e. the zero point itself in x's domain, as onnxruntime does.
Value integerConv(Composer &c, size_t xIndex, size_t xZeroPoint, size_t wIndex,
                  size_t wZeroPoint, std::optional<size_t> biasIndex) {
  NodeImporter &n = c.importer();
  RankedTensorType xType = n.inputType(xIndex);
  RankedTensorType wType = n.inputType(wIndex);
  int64_t rank = xType.getRank();
  if (rank < 3 || rank > 5 || wType.getRank() != rank)
    return c.fail("only 1-D, 2-D and 3-D convolutions are supported, got "
                  "input rank " +
                  Twine(rank) + " and weight rank " + Twine(wType.getRank()));
  FailureOr<WindowAttrs> w =
      readWindowAttrs(n, rank - 2, wType.getShape().drop_front(2));
  if (failed(w))
    return c.fail("bad window attributes");
  resolveForwardPadding(*w, xType.getShape().drop_front(2));
  Type f64 = n.builder().getF64Type();
  Value x32 = subtractZeroPoint(c, n.input(xIndex), n.input(xZeroPoint),
                                /*perRow=*/false);
  // A per-output-channel weight zero point lies along w's first axis.
  Value w32 = c.cast(n.input(wIndex), n.builder().getIntegerType(32));
  if (n.hasInput(wZeroPoint)) {
    RankedTensorType zpType = n.inputType(wZeroPoint);
    Value zp = c.cast(n.input(wZeroPoint), n.builder().getIntegerType(32));
    if (zpType.getNumElements() == 1) {
      zp = c.reshape(zp, {});
    } else if (zpType.getRank() == 1 &&
               zpType.getDimSize(0) == wType.getDimSize(0)) {
      SmallVector<int64_t> dims(rank, 1);
      dims[0] = wType.getDimSize(0);
      zp = c.reshape(zp, dims);
    } else {
      return c.fail("w_zero_point of shape " +
                    formatInts(zpType.getShape()) +
                    " is neither a scalar nor one per output channel");
    }
    w32 = c.make<SubOp>({w32, zp});
  }
  SmallVector<Value> operands{c.cast(x32, f64), c.cast(w32, f64)};
  if (biasIndex && n.hasInput(*biasIndex)) {
    if (!n.inputType(*biasIndex).getElementType().isInteger(32))
      return c.fail("B must be int32");
    operands.push_back(c.cast(n.input(*biasIndex), f64));
  }
  if (c.failed())
    return {};
  return c.make<ConvOp>(operands,
                        {n.namedArray("strides", w->strides),
                         n.namedArray("dilations", w->dilations),
                         n.namedArray("padding", w->padding),
                         n.namedI64("groups", n.intAttr("group", 1))});
}

LogicalResult importConvInteger(NodeImporter &n) {
  if (failed(n.checkArity(2, 4)))
    return failure();
  if (failed(checkInt8s(n, {"x", "w", "x_zero_point", "w_zero_point"})))
    return failure();
  Composer c(n);
  Value y = integerConv(c, 0, 2, 1, 3, std::nullopt);
  return bindComposed(c, c.cast(y, n.builder().getIntegerType(32)));
}

/// acc * (aScale * bScale / yScale) + y_zero_point, rounded and saturated to
/// the zero point's type. The multiplier is computed in the scales' type,
/// the product in f64. `scaleShape` reshapes a per-channel multiplier.
Value requantize(Composer &c, Value acc, Value aScale, Value bScale,
                 Value yScale, Value yZeroPoint, Type storage,
                 std::function<Value(Value)> alongChannels) {
  NodeImporter &n = c.importer();
  Type f64 = n.builder().getF64Type();
  Value multiplier =
      c.make<DivOp>({c.make<MulOp>({aScale, bScale}), yScale});
  multiplier = alongChannels(multiplier);
  Value r = c.make<MulOp>({c.cast(acc, f64), c.cast(multiplier, f64)});
  Value zp = yZeroPoint ? c.reshape(yZeroPoint, {}) : Value();
  return roundSaturate(c, r, zp, storage);
}

LogicalResult importQLinearMatMul(NodeImporter &n) {
  if (failed(n.checkArity(8, 8)))
    return failure();
  if (failed(checkInt8s(n, {"a", "", "a_zero_point", "b", "", "b_zero_point",
                            "", "y_zero_point"})))
    return failure();
  Composer c(n);
  Value acc = integerMatmul(c, n.input(0), n.input(2), n.input(3), n.input(5));
  Value y = requantize(
      c, acc, perTensor(c, n.input(1), "a_scale"),
      perTensor(c, n.input(4), "b_scale"), perTensor(c, n.input(6), "y_scale"),
      perTensor(c, n.input(7), "y_zero_point"), elementTypeOf(n.input(7)),
      [](Value v) { return v; });
  return bindComposed(c, y);
}

LogicalResult importQLinearConv(NodeImporter &n) {
  if (failed(n.checkArity(8, 9)))
    return failure();
  if (failed(checkInt8s(n, {"x", "", "x_zero_point", "w", "", "w_zero_point",
                            "", "y_zero_point"})))
    return failure();
  Composer c(n);
  Value acc = integerConv(c, 0, 2, 3, 5, 8);
  int64_t rank = n.inputType(0).getRank();
  int64_t channels = n.inputType(3).getDimSize(0);
  Value wScale = n.input(4);
  RankedTensorType wScaleType = typeOf(wScale);
  if (wScaleType.getNumElements() == 1) {
    wScale = c.reshape(wScale, {});
  } else if (wScaleType.getRank() != 1 ||
             wScaleType.getDimSize(0) != channels) {
    return n.fail("w_scale of shape " + formatInts(wScaleType.getShape()) +
                  " is neither a scalar nor one per output channel (" +
                  Twine(channels) + ")");
  }
  auto alongChannels = [&](Value v) -> Value {
    if (!v || typeOf(v).getRank() == 0)
      return v;
    SmallVector<int64_t> dims(rank, 1);
    dims[1] = channels;
    return c.reshape(v, dims);
  };
  Value y = requantize(c, acc, perTensor(c, n.input(1), "x_scale"), wScale,
                       perTensor(c, n.input(6), "y_scale"),
                       perTensor(c, n.input(7), "y_zero_point"),
                       elementTypeOf(n.input(7)), alongChannels);
  return bindComposed(c, y);
}

} // namespace

void registerQuantizationHandlers(SmallVectorImpl<Handler> &handlers) {
  const char *qLimits = "float8 zero points must be 0 (as the spec says)";
  handlers.append({
      {"QuantizeLinear", 10, importQuantizeLinear, qLimits},
      {"QuantizeLinear", 13, importQuantizeLinear, qLimits},
      {"QuantizeLinear", 19, importQuantizeLinear, qLimits},
      {"QuantizeLinear", 21, importQuantizeLinear, qLimits},
      {"DequantizeLinear", 10, importDequantizeLinear, qLimits},
      {"DequantizeLinear", 13, importDequantizeLinear, qLimits},
      {"DequantizeLinear", 19, importDequantizeLinear, qLimits},
      {"DequantizeLinear", 21, importDequantizeLinear, qLimits},
      {"DynamicQuantizeLinear", 11, importDynamicQuantizeLinear, ""},
      {"MatMulInteger", 10, importMatMulInteger, ""},
      {"ConvInteger", 10, importConvInteger, "1-D to 3-D only"},
      {"QLinearMatMul", 10, importQLinearMatMul,
       "per-tensor scales and zero points"},
      {"QLinearMatMul", 21, importQLinearMatMul,
       "per-tensor scales and zero points"},
      {"QLinearConv", 10, importQLinearConv,
       "1-D to 3-D only; per-tensor x and y parameters"},
  });
}

} // namespace kiln::onnx_frontend

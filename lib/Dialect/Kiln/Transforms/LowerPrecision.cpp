//===- LowerPrecision.cpp - Run contractions in bf16, fp16 or tf32 --------===//
//
// kiln-lower-precision: matmul and conv read their operands in the low type
// and accumulate (and return) f32; everything numerically sensitive stays in
// f32. The policy is in the pass description (Passes.td); this file applies
// it in fixed steps:
//
//   1. model inputs and outputs (io-precision),
//   2. contractions: operands to the low type (tf32: rounded in f32), f32
//      result,
//   3. f32-only ops (softmax, norms, reductions, transcendentals) that a
//      low-precision model declared in bf16/f16 get f32 operands,
//   4. casts to bf16/f16 hoisted above pure data movement and max pools;
//      with residual-precision=low, the other users of a narrowed value
//      read it narrowed and widened back,
//   5. lossless cast chains cancelled, duplicate casts merged, dead casts
//      erased,
//   6. casts of weights folded into new globals holding converted values.
//
// The pass works on the module because step 6 adds ml_program.globals. It
// rewrites function bodies only, never inside kiln.fusion regions: those
// are kernels already formed (the pipeline runs it before kiln-fuse).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>
#include <cstring>

namespace kiln {
#define GEN_PASS_DEF_LOWERPRECISIONPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

enum class Precision { FP32, TF32, BF16, FP16 };

std::optional<Precision> parsePrecision(StringRef name) {
  return llvm::StringSwitch<std::optional<Precision>>(name)
      .Case("fp32", Precision::FP32)
      .Case("tf32", Precision::TF32)
      .Case("bf16", Precision::BF16)
      .Case("fp16", Precision::FP16)
      .Default(std::nullopt);
}

bool isLowFloat(Type type) { return type.isBF16() || type.isF16(); }

/// The float types io-precision converts (f64 inputs stay f64).
bool isIoFloat(Type type) { return type.isF32() || isLowFloat(type); }

Type elementTypeOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getElementType() : Type();
}

RankedTensorType withElementType(Value value, Type elementType) {
  return cast<RankedTensorType>(value.getType()).clone(elementType);
}

bool isContraction(Operation *op) {
  return isa<MatmulOp, ConvOp, ConvTransposeOp>(op);
}

/// A window sum: a convolution whose filter is all ones (how the importer
/// computes LpPool's sums of |x|^p, one group per channel; zeros where the
/// layout pass padded its channels). It stays f32:
/// |x|^p spans far more range than fp16 holds (a window of values near
/// 1e-5 cubed underflows to 0; fuzz finding 29), and a box filter gains
/// nothing from tensor cores.
bool isWindowSum(Operation *op) {
  auto conv = dyn_cast<ConvOp>(op);
  if (!conv)
    return false;
  // The filter: a constant, or a weight global (the layout pass stores the
  // NHWC filter as one), through reshapes and transposes.
  Value filter = conv.getFilter();
  while (Operation *def = filter.getDefiningOp()) {
    if (!isa<ReshapeOp, TransposeOp>(def))
      break;
    filter = def->getOperand(0);
  }
  Attribute value;
  if (auto constant = filter.getDefiningOp<ConstantOp>())
    value = constant.getValue();
  else if (auto load = filter.getDefiningOp<ml_program::GlobalLoadConstOp>())
    if (auto global =
            SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
                load, load.getGlobalAttr()))
      value = global.getValueAttr();
  // Ones, and the zeros kiln-assign-layout pads channels with.
  auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
  if (!dense || !isa<FloatType>(dense.getElementType()))
    return false;
  bool one = false;
  for (const APFloat &f : dense.getValues<APFloat>()) {
    double v = f.convertToDouble();
    if (v != 0.0 && v != 1.0)
      return false;
    one |= v == 1.0;
  }
  return one;
}

/// A max pool (windowed or global): it only selects elements, so it is
/// exact in any float type.
bool isMaxPool(Operation *op) {
  if (auto pool = dyn_cast<PoolOp>(op))
    return pool.getKind() == PoolKind::Max;
  if (auto pool = dyn_cast<GlobalPoolOp>(op))
    return pool.getKind() == PoolKind::Max;
  return false;
}

/// Ops whose arithmetic must run in f32 whatever the model's type: the
/// statistics of normalisations, reductions and softmax (long sums), and
/// transcendentals. (Max pools select, so they run in any type.)
bool needsF32(Operation *op) {
  return isa<ReduceOp, SoftmaxOp, LogSoftmaxOp, LayerNormOp, BatchNormOp,
             InstanceNormOp, LrnOp, PoolOp, GlobalPoolOp, ExpOp, LogOp, ErfOp,
             PowOp, SigmoidOp, SoftplusOp, GeluOp, EluOp, TanhOp>(op) &&
         !isMaxPool(op);
}

/// Ops that only move or replicate elements: a float narrowing after them
/// equals the same ops on narrowed operands, bit for bit. (pad's constant is
/// an f64 attribute, rounded to the element type when lowered, like the
/// cast would round it.)
bool isPureDataMovement(Operation *op) {
  return isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp, TileOp, ConcatOp,
             GatherOp, PadOp>(op);
}

/// Ops a narrowing cast after them can move above, bit for bit: data
/// movement, and max pools (round-to-nearest-even is monotone, so the max
/// of the rounded window is the rounded max; the -inf padding rounds to
/// itself).
bool commutesWithNarrowing(Operation *op) {
  return isPureDataMovement(op) || isMaxPool(op);
}

/// The operands of a data-movement op that carry its data (gather's indices
/// do not).
SmallVector<unsigned> dataOperands(Operation *op) {
  if (isa<ConcatOp>(op))
    return llvm::to_vector(llvm::seq<unsigned>(0, op->getNumOperands()));
  return {0};
}

/// `src -> mid -> dst` equals `src -> dst` when `mid` holds every `src` value.
bool isLosslessMiddle(Type src, Type mid) {
  auto srcFloat = dyn_cast<FloatType>(src), midFloat = dyn_cast<FloatType>(mid);
  if (srcFloat && midFloat)
    return APFloat::isRepresentableBy(srcFloat.getFloatSemantics(),
                                      midFloat.getFloatSemantics());
  auto srcInt = dyn_cast<IntegerType>(src), midInt = dyn_cast<IntegerType>(mid);
  return srcInt && midInt && srcInt.getWidth() > 1 &&
         srcInt.getWidth() < midInt.getWidth() &&
         srcInt.isUnsigned() == midInt.isUnsigned();
}

//===----------------------------------------------------------------------===//
// Weight conversion (bit-exact with kiln.cast: round to nearest even)
//===----------------------------------------------------------------------===//

uint16_t floatToBf16(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u); // quiet NaN
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

uint16_t floatToHalf(uint32_t bits) {
  uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN: keep the top payload bits, quiet
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) // >= 65520 rounds to infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) { // normal: rebias 127 -> 15, round at bit 13
    uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal (or zero): a multiple of 2^-24, rounded to nearest even.
  float value;
  std::memcpy(&value, &magnitude, sizeof(value));
  return static_cast<uint16_t>(sign |
                               static_cast<uint32_t>(std::nearbyint(
                                   value * 16777216.0f)));
}

/// tf32 keeps f32's exponent and the top 10 mantissa bits.
uint32_t roundToTf32(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return bits;
  return (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
}

enum class WeightConversion { ToBF16, ToF16, RoundToTF32 };

/// Marks a contraction whose f32 operands were rounded to tf32.
constexpr llvm::StringLiteral kTf32ContractionAttr =
    KilnDialect::Tf32AttrHelper::getNameStr();
/// Marks a global made by rounding an f32 weight to tf32.
constexpr llvm::StringLiteral kTf32RoundedAttr =
    KilnDialect::Tf32RoundedAttrHelper::getNameStr();

/// Little-endian f32 data of an elements attribute; nullopt when it is not
/// an f32 tensor whose bytes are at hand (e.g. an elided resource).
std::optional<std::vector<uint32_t>> f32Bits(Attribute value) {
  auto elements = dyn_cast_or_null<ElementsAttr>(value);
  if (!elements || !elements.getElementType().isF32())
    return std::nullopt;
  int64_t count = elements.getNumElements();
  std::vector<uint32_t> bits(count);
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != count * sizeof(uint32_t))
      return std::nullopt;
    std::memcpy(bits.data(), blob->getData().data(), bits.size() * 4);
    return bits;
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return std::nullopt;
  int64_t i = 0;
  for (APFloat f : dense.getValues<APFloat>())
    bits[i++] = static_cast<uint32_t>(f.bitcastToAPInt().getZExtValue());
  return bits;
}

/// The converted value of a weight, as a resource blob like the importer's.
Attribute convertWeight(ArrayRef<uint32_t> bits, RankedTensorType type,
                        WeightConversion conversion, StringRef name) {
  std::vector<char> bytes;
  if (conversion == WeightConversion::RoundToTF32) {
    std::vector<uint32_t> rounded(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      rounded[i] = roundToTf32(bits[i]);
    bytes.resize(rounded.size() * 4);
    std::memcpy(bytes.data(), rounded.data(), bytes.size());
  } else {
    std::vector<uint16_t> narrow(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      narrow[i] = conversion == WeightConversion::ToBF16 ? floatToBf16(bits[i])
                                                         : floatToHalf(bits[i]);
    bytes.resize(narrow.size() * 2);
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  }
  auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
      ArrayRef<char>(bytes.data(), bytes.size()), alignof(uint64_t));
  return DenseResourceElementsAttr::get(type, name, std::move(blob));
}

/// A constant's f32 values converted like a weight, as a dense attribute
/// (splats stay splats); null when `value` is not a dense f32 attribute.
DenseElementsAttr convertConstant(Attribute value, RankedTensorType type,
                                  WeightConversion conversion) {
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense || !dense.getElementType().isF32())
    return {};
  auto convertOne = [&](const APFloat &f) -> APFloat {
    auto bits = static_cast<uint32_t>(f.bitcastToAPInt().getZExtValue());
    switch (conversion) {
    case WeightConversion::ToBF16:
      return APFloat(APFloat::BFloat(), APInt(16, floatToBf16(bits)));
    case WeightConversion::ToF16:
      return APFloat(APFloat::IEEEhalf(), APInt(16, floatToHalf(bits)));
    case WeightConversion::RoundToTF32:
      return APFloat(APFloat::IEEEsingle(), APInt(32, roundToTf32(bits)));
    }
    llvm_unreachable("unknown conversion");
  };
  if (dense.isSplat())
    return DenseElementsAttr::get(type,
                                  convertOne(dense.getSplatValue<APFloat>()));
  SmallVector<APFloat> values;
  for (const APFloat &f : dense.getValues<APFloat>())
    values.push_back(convertOne(f));
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// The rewriter
//===----------------------------------------------------------------------===//

class PrecisionLowering {
public:
  PrecisionLowering(ModuleOp module, Precision precision, Type ioType,
                    int64_t f32HeadLayers, bool lowResiduals)
      : module(module), precision(precision), ioType(ioType),
        f32HeadLayers(f32HeadLayers), lowResiduals(lowResiduals),
        f32(Float32Type::get(module.getContext())) {
    MLIRContext *context = module.getContext();
    if (precision == Precision::BF16)
      lowType = BFloat16Type::get(context);
    else if (precision == Precision::FP16)
      lowType = Float16Type::get(context);
    else if (precision == Precision::TF32)
      lowType = FloatTF32Type::get(context);
  }

  void run() {
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (ioType)
        lowerSignature(func);
      if (precision != Precision::FP32) {
        lowerContractions(func);
        widenF32OnlyOps(func);
        hoistNarrowingCasts(func);
        if (lowResiduals && isLowFloat(lowType))
          shareNarrowedValues(func);
      }
      cleanUpCasts(func);
    }
    foldWeightCasts();
  }

private:
  /// `value` converted to `elementType`: an existing cast of it placed right
  /// after its definition is reused; a new one goes there (so every use is
  /// dominated, and later requests find it).
  Value castTo(Value value, Type elementType) {
    if (elementTypeOf(value) == elementType)
      return value;
    RankedTensorType type = withElementType(value, elementType);
    for (Operation *user : value.getUsers())
      if (auto castOp = dyn_cast<CastOp>(user))
        if (castOp.getType() == type && isRightAfterDefinition(castOp))
          return castOp;
    OpBuilder b(value.getContext());
    setInsertionPointAfterDefinition(b, value);
    return CastOp::create(b, value.getLoc(), type, value);
  }

  static void setInsertionPointAfterDefinition(OpBuilder &b, Value value) {
    if (Operation *def = value.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
  }

  /// Whether `cast` sits where castTo puts casts of its input: immediately
  /// after the producer, perhaps behind other such casts.
  static bool isRightAfterDefinition(CastOp castOp) {
    Value input = castOp.getInput();
    Block *block = castOp->getBlock();
    Operation *def = input.getDefiningOp();
    if (def ? def->getBlock() != block
            : cast<BlockArgument>(input).getOwner() != block)
      return false;
    for (Operation *prev = castOp->getPrevNode(); prev != def;
         prev = prev->getPrevNode()) {
      if (!prev)
        return !def;
      auto other = dyn_cast<CastOp>(prev);
      if (!other || other.getInput() != input)
        return false;
    }
    return true;
  }

  /// Replaces the uses of `value` (all but those by `except`) with `with`.
  static void replaceUsesExcept(Value value, Value with, Operation *except) {
    value.replaceAllUsesExcept(with, except);
  }

  /// Step 1: float arguments and results take `ioType`; a cast at the entry
  /// and before the return keeps the body's types.
  void lowerSignature(func::FuncOp func) {
    Block &entry = func.getBody().front();
    SmallVector<Type> argTypes, resultTypes;
    for (BlockArgument arg : entry.getArguments()) {
      Type elementType = elementTypeOf(arg);
      if (elementType && isIoFloat(elementType) && elementType != ioType) {
        arg.setType(withElementType(arg, ioType));
        OpBuilder b(func.getContext());
        b.setInsertionPointToStart(&entry);
        auto back = CastOp::create(
            b, arg.getLoc(),
            cast<RankedTensorType>(arg.getType()).clone(elementType), arg);
        replaceUsesExcept(arg, back, back);
      }
      argTypes.push_back(arg.getType());
    }
    func.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Type elementType = elementTypeOf(operand.get());
        if (elementType && isIoFloat(elementType) && elementType != ioType)
          operand.set(CastOp::create(b, ret.getLoc(),
                                     withElementType(operand.get(), ioType),
                                     operand.get()));
      }
      resultTypes.assign(ret->getOperandTypes().begin(),
                         ret->getOperandTypes().end());
    });
    func.setFunctionType(
        FunctionType::get(func.getContext(), argTypes, resultTypes));
  }

  /// For each op of `func`'s body, the fewest contractions its value passes
  /// through on a path to a function result (0 for the last contraction
  /// before an output; a large number when no result depends on it).
  /// Contractions with a depth below f32HeadLayers stay f32.
  DenseMap<Operation *, int64_t> contractionDepths(func::FuncOp func) {
    constexpr int64_t kUnreached = std::numeric_limits<int64_t>::max() / 2;
    DenseMap<Operation *, int64_t> depth;
    Block &body = func.getBody().front();
    for (Operation &op : llvm::reverse(body)) {
      int64_t best = kUnreached;
      for (Operation *user : op.getUsers()) {
        Operation *ancestor = body.findAncestorOpInBlock(*user);
        if (!ancestor)
          continue;
        if (isa<func::ReturnOp>(ancestor))
          best = 0;
        else if (auto it = depth.find(ancestor); it != depth.end())
          best = std::min(best, it->second + (isContraction(ancestor) ? 1 : 0));
      }
      depth[&op] = best;
    }
    return depth;
  }

  /// Step 2: matmul, conv and conv_transpose read the low type and return
  /// f32 (tf32: f32 operands rounded to tf32 by a cast pair).
  void lowerContractions(func::FuncOp func) {
    DenseMap<Operation *, int64_t> depth = contractionDepths(func);
    SmallVector<Operation *> contractions;
    for (Operation &op : func.getBody().getOps())
      if (isContraction(&op) && !isWindowSum(&op) &&
          depth.lookup(&op) >= f32HeadLayers)
        contractions.push_back(&op);
    for (Operation *op : contractions) {
      Type elementType = elementTypeOf(op->getOperand(0));
      if (elementType.isF32()) {
        for (unsigned i : {0u, 1u}) {
          Value operand = op->getOperand(i);
          op->setOperand(i, precision == Precision::TF32
                                ? roundedToTf32(operand)
                                : castTo(operand, lowType));
        }
        // Codegen may then run it on tf32 tensor cores, which round the
        // operands themselves (kiln-match-contractions).
        if (precision == Precision::TF32)
          op->setAttr(kTf32ContractionAttr, UnitAttr::get(op->getContext()));
      } else if (isLowFloat(elementType) &&
                 elementTypeOf(op->getResult(0)) == elementType) {
        // Declared in bf16/f16: accumulate and return f32, narrow after.
        Value result = op->getResult(0);
        result.setType(withElementType(result, f32));
        if (op->getNumOperands() > 2)
          op->setOperand(2, castTo(op->getOperand(2), f32));
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        auto back = CastOp::create(b, op->getLoc(),
                                   withElementType(result, elementType), result);
        replaceUsesExcept(result, back, back);
      }
    }
  }

  /// `value` (f32) rounded to tf32 and back, unless it already is: a
  /// rounding pair, or a weight whose values all are tf32 (step 6 made it).
  Value roundedToTf32(Value value) {
    // A cast from tf32, or from bf16/f16 (whose values tf32 holds).
    if (auto widen = value.getDefiningOp<CastOp>())
      if (auto from =
              dyn_cast<FloatType>(elementTypeOf(widen.getInput())))
        if (APFloat::isRepresentableBy(from.getFloatSemantics(),
                                       APFloat::FloatTF32()))
          return value;
    if (auto constant = value.getDefiningOp<ConstantOp>())
      if (auto dense = dyn_cast<DenseElementsAttr>(constant.getValue()))
        if (dense.getElementType().isF32() &&
            llvm::all_of(dense.getValues<APFloat>(), [](const APFloat &f) {
              auto b =
                  static_cast<uint32_t>(f.bitcastToAPInt().getZExtValue());
              return roundToTf32(b) == b;
            }))
          return value;
    if (auto load = value.getDefiningOp<ml_program::GlobalLoadConstOp>())
      if (auto global = SymbolTable::lookupNearestSymbolFrom<
              ml_program::GlobalOp>(load, load.getGlobalAttr())) {
        if (global->hasAttr(kTf32RoundedAttr))
          return value;
        if (std::optional<std::vector<uint32_t>> bits =
                f32Bits(global.getValueAttr()))
          if (llvm::all_of(*bits,
                           [](uint32_t b) { return roundToTf32(b) == b; }))
            return value;
      }
    return castTo(castTo(value, lowType), f32);
  }

  /// Step 3: a bf16/f16 operand or result of an f32-only op becomes f32.
  void widenF32OnlyOps(func::FuncOp func) {
    SmallVector<Operation *> ops;
    auto isLow = [](Value v) {
      Type t = elementTypeOf(v);
      return t && isLowFloat(t);
    };
    for (Operation &op : func.getBody().getOps())
      if (needsF32(&op) && (llvm::any_of(op.getOperands(), isLow) ||
                            llvm::any_of(op.getResults(), isLow)))
        ops.push_back(&op);
    for (Operation *op : ops) {
      for (OpOperand &operand : op->getOpOperands())
        if (Type t = elementTypeOf(operand.get()); t && isLowFloat(t))
          operand.set(castTo(operand.get(), f32));
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      for (OpResult result : op->getResults()) {
        Type t = elementTypeOf(result);
        if (!t || !isLowFloat(t))
          continue;
        result.setType(withElementType(result, f32));
        auto back = CastOp::create(b, op->getLoc(),
                                   withElementType(result, t), result);
        replaceUsesExcept(result, back, back);
      }
    }
  }

  /// Step 4: cast(move(x)) -> move(cast(x)) for a narrowing to bf16/f16,
  /// when every user of the data-movement op (or max pool) narrows the same
  /// way: the
  /// movement then reads and writes half the bytes, and a weight reaches its
  /// cast directly (step 6 folds it).
  void hoistNarrowingCasts(func::FuncOp func) {
    SmallVector<CastOp> worklist(func.getBody().getOps<CastOp>());
    while (!worklist.empty()) {
      CastOp cast = worklist.pop_back_val();
      Type to = cast.getType().getElementType();
      Operation *move = cast.getInput().getDefiningOp();
      if (!isLowFloat(to) || !elementTypeOf(cast.getInput()).isF32() ||
          !move || !commutesWithNarrowing(move) || move->getNumResults() != 1 ||
          move->getBlock() != cast->getBlock())
        continue;
      SmallVector<CastOp> users;
      for (Operation *user : move->getUsers()) {
        auto userCast = dyn_cast<CastOp>(user);
        if (!userCast || userCast.getType() != cast.getType())
          break;
        users.push_back(userCast);
      }
      if (users.size() != llvm::range_size(move->getUsers()))
        continue;
      IRMapping mapping;
      SmallVector<CastOp> created;
      for (unsigned i : dataOperands(move)) {
        Value operand = move->getOperand(i);
        Value narrowed = castTo(operand, to);
        mapping.map(operand, narrowed);
        if (auto newCast = narrowed.getDefiningOp<CastOp>())
          created.push_back(newCast);
      }
      OpBuilder b(move);
      Operation *narrowMove = b.clone(*move, mapping);
      narrowMove->getResult(0).setType(cast.getType());
      for (CastOp user : users) {
        user.replaceAllUsesWith(narrowMove->getResult(0));
        llvm::erase(worklist, user);
        user.erase();
      }
      move->erase();
      llvm::append_range(worklist, created);
    }
  }

  /// Step 4b (residual-precision=low): an f32 value narrowed for a
  /// contraction (a cast to the low type among its users) whose other
  /// users read it in f32: they read the narrowed value widened back, so
  /// only the low-precision copy needs storing. Returned values keep f32.
  void shareNarrowedValues(func::FuncOp func) {
    SmallVector<CastOp> narrowings;
    for (CastOp cast : func.getBody().getOps<CastOp>())
      if (cast.getType().getElementType() == lowType &&
          elementTypeOf(cast.getInput()).isF32() &&
          !isa<BlockArgument>(cast.getInput()))
        narrowings.push_back(cast);
    llvm::DenseSet<Value> done;
    for (CastOp cast : narrowings) {
      Value value = cast.getInput();
      // The copy right after the value (castTo's) dominates every use.
      if (!isRightAfterDefinition(cast) || !done.insert(value).second)
        continue;
      SmallVector<OpOperand *> others;
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        auto userCast = dyn_cast<CastOp>(user);
        if ((userCast && isLowFloat(userCast.getType().getElementType())) ||
            isa<func::ReturnOp>(user) || user->getBlock() != cast->getBlock())
          continue;
        others.push_back(&use);
      }
      if (others.empty())
        continue;
      OpBuilder b(cast->getContext());
      b.setInsertionPointAfter(cast);
      auto widened = CastOp::create(b, cast.getLoc(), value.getType(),
                                    cast.getResult());
      for (OpOperand *use : others)
        use->set(widened);
    }
  }

  /// Step 5: cast(cast(x)) through a lossless middle type becomes one cast
  /// (or x), a cast to its own type disappears, casts of one value to one
  /// type merge, and unused casts go.
  void cleanUpCasts(func::FuncOp func) {
    // Only the function body: a kiln.fusion region (when the pass runs after
    // kiln-fuse) is a kernel already formed, left as it is.
    auto collect = [&](SmallVectorImpl<CastOp> &casts) {
      for (auto cast : func.getBody().getOps<CastOp>())
        casts.push_back(cast);
    };
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<CastOp> casts;
      collect(casts);
      for (CastOp cast : casts) {
        if (cast.getInput().getType() == cast.getType()) {
          cast.replaceAllUsesWith(cast.getInput());
          cast.erase();
          changed = true;
          continue;
        }
        auto inner = cast.getInput().getDefiningOp<CastOp>();
        if (!inner ||
            !isLosslessMiddle(elementTypeOf(inner.getInput()),
                              inner.getType().getElementType()))
          continue;
        cast.replaceAllUsesWith(
            castTo(inner.getInput(), cast.getType().getElementType()));
        cast.erase();
        changed = true;
      }
      casts.clear();
      collect(casts);
      for (CastOp cast : llvm::reverse(casts))
        if (cast->use_empty()) {
          cast.erase();
          changed = true;
        }
    }
    // Merge: the first cast of a value to a type (moved next to the value's
    // definition) serves every use.
    llvm::MapVector<std::pair<Value, Type>, SmallVector<CastOp>> groups;
    SmallVector<CastOp> casts;
    collect(casts);
    for (CastOp cast : casts)
      groups[{cast.getInput(), cast.getType()}].push_back(cast);
    for (auto &[key, group] : groups) {
      if (group.size() < 2)
        continue;
      Value input = key.first;
      Block *block = input.getDefiningOp()
                         ? input.getDefiningOp()->getBlock()
                         : cast<BlockArgument>(input).getOwner();
      if (llvm::any_of(group,
                       [&](CastOp c) { return c->getBlock() != block; }))
        continue;
      CastOp keep = group.front();
      if (Operation *def = input.getDefiningOp())
        keep->moveAfter(def);
      else
        keep->moveBefore(&block->front());
      for (CastOp other : ArrayRef(group).drop_front()) {
        other.replaceAllUsesWith(keep.getResult());
        other.erase();
      }
    }
  }

  /// Step 6: a cast of an immutable f32 weight (or a tf32 rounding pair on
  /// one) reads a new global holding the converted values, computed here;
  /// no kernel converts weights at run time. Globals left unread go.
  void foldWeightCasts() {
    SymbolTable symbols(module);
    llvm::DenseMap<std::pair<Operation *, int>, ml_program::GlobalOp> made;
    llvm::SetVector<Operation *> sources;
    SmallVector<Operation *> replaced;
    module.walk([&](CastOp cast) {
      Type to = cast.getType().getElementType();
      Value input = cast.getInput();
      WeightConversion conversion;
      if (to.isBF16()) {
        conversion = WeightConversion::ToBF16;
      } else if (to.isF16()) {
        conversion = WeightConversion::ToF16;
      } else if (to.isF32() && elementTypeOf(input).isTF32()) {
        auto round = input.getDefiningOp<CastOp>();
        if (!round)
          return;
        input = round.getInput();
        conversion = WeightConversion::RoundToTF32;
      } else {
        return;
      }
      if (auto constant = input.getDefiningOp<ConstantOp>()) {
        // A constant in the IR (small, or a splat): fold the conversion in
        // place.
        if (DenseElementsAttr converted = convertConstant(
                constant.getValue(), cast.getType(), conversion)) {
          OpBuilder b(cast);
          cast.replaceAllUsesWith(
              ConstantOp::create(b, cast.getLoc(), converted).getResult());
          replaced.push_back(cast);
        }
        return;
      }
      auto load = input.getDefiningOp<ml_program::GlobalLoadConstOp>();
      if (!load || !elementTypeOf(load).isF32())
        return;
      auto global = symbols.lookup<ml_program::GlobalOp>(
          load.getGlobal().getRootReference().getValue());
      if (!global || global.getIsMutable())
        return;
      ml_program::GlobalOp &converted =
          made[{global.getOperation(), static_cast<int>(conversion)}];
      if (!converted) {
        std::optional<std::vector<uint32_t>> bits =
            f32Bits(global.getValueAttr());
        if (!bits)
          return;
        StringRef suffix = conversion == WeightConversion::ToBF16  ? "_bf16"
                           : conversion == WeightConversion::ToF16 ? "_f16"
                                                                   : "_tf32";
        std::string name = (global.getSymName() + suffix).str();
        auto type = cast.getType();
        OpBuilder b(global);
        b.setInsertionPointAfter(global);
        converted = ml_program::GlobalOp::create(
            b, global.getLoc(), name, type, /*is_mutable=*/false,
            convertWeight(*bits, type, conversion, name),
            global.getSymVisibilityAttr());
        symbols.insert(converted); // renames on a clash
        // tf32 values keep the f32 type: say so, for a second run (which
        // may not see the data, e.g. printed with weights elided).
        if (conversion == WeightConversion::RoundToTF32)
          converted->setAttr(kTf32RoundedAttr,
                             UnitAttr::get(module.getContext()));
        setWeightOrigin(converted,
                        appendOriginStep(getWeightOrigin(global),
                                         "convert " +
                                             suffix.drop_front().str()));
        sources.insert(global);
      }
      OpBuilder b(cast);
      Value replacement = ml_program::GlobalLoadConstOp::create(
          b, cast.getLoc(), converted.getType(),
          FlatSymbolRefAttr::get(converted.getSymNameAttr()));
      // The cast, and the load and rounding cast before it, are erased
      // below once unused.
      cast.replaceAllUsesWith(replacement);
      replaced.push_back(cast);
    });
    // The replaced casts, and the loads, constants and rounding casts they
    // read once unused (only those: other dead ops are not this pass's).
    for (size_t i = 0; i < replaced.size(); ++i) {
      Operation *op = replaced[i];
      if (!op->use_empty())
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (isa<CastOp, ConstantOp, ml_program::GlobalLoadConstOp>(def) &&
              !llvm::is_contained(replaced, def))
            replaced.push_back(def);
      op->dropAllUses();
      op->erase();
      replaced[i] = nullptr;
      // Keep scanning: entries after i may now be unused.
    }
    for (Operation *global : sources)
      if (SymbolTable::symbolKnownUseEmpty(global, module))
        global->erase();
  }

  ModuleOp module;
  Precision precision;
  Type ioType;
  int64_t f32HeadLayers;
  bool lowResiduals;
  Type f32;
  Type lowType; // bf16, f16 or tf32; null for fp32
};

struct LowerPrecisionPass
    : kiln::impl::LowerPrecisionPassBase<LowerPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Precision> parsed = parsePrecision(precision);
    if (!parsed) {
      module.emitError("kiln-lower-precision: precision '")
          << precision << "' is not one of fp32, tf32, bf16, fp16";
      return signalPassFailure();
    }
    Type ioType;
    if (!ioPrecision.empty()) {
      std::optional<Precision> io = parsePrecision(ioPrecision);
      if (!io || *io == Precision::TF32) {
        module.emitError("kiln-lower-precision: io-precision '")
            << ioPrecision << "' is not one of fp32, bf16, fp16";
        return signalPassFailure();
      }
      MLIRContext *context = module.getContext();
      ioType = *io == Precision::FP32   ? Type(Float32Type::get(context))
               : *io == Precision::BF16 ? Type(BFloat16Type::get(context))
                                        : Type(Float16Type::get(context));
    }
    if (*parsed == Precision::FP32 && !ioType)
      return; // nothing to lower: the pass is the identity
    if (f32HeadLayers < 0) {
      module.emitError("kiln-lower-precision: f32-head-layers ")
          << static_cast<int64_t>(f32HeadLayers) << " is negative";
      return signalPassFailure();
    }
    // "f32" is the spelling before kilnc's vocabulary settled on fp32.
    if (residualPrecision != "fp32" && residualPrecision != "f32" &&
        residualPrecision != "low") {
      module.emitError("kiln-lower-precision: residual-precision '")
          << residualPrecision << "' is not one of fp32, low";
      return signalPassFailure();
    }
    PrecisionLowering(module, *parsed, ioType, f32HeadLayers,
                      residualPrecision == "low")
        .run();
  }
};

} // namespace

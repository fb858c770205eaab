//===- ElementwiseOps.cpp - Verifiers and folders of elementwise ops
//--------===//

#include "ConstantFolding.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/APSInt.h"

using namespace mlir;
using namespace kiln;

namespace {
/// The operand that an identity-producing fold may return: only valid when it
/// already has the result type (broadcasting could otherwise change it).
OpFoldResult foldToOperandIfSameType(Value operand, Type resultType) {
  return operand.getType() == resultType ? OpFoldResult(operand) : nullptr;
}

std::optional<APInt> divInts(const APInt &a, const APInt &b, bool isUnsigned) {
  if (b.isZero())
    return std::nullopt;
  return isUnsigned ? a.udiv(b) : a.sdiv(b);
}
} // namespace

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  auto zero = DenseElementsAttr::get(
      getType(), Builder(getContext()).getZeroAttr(getType().getElementType()));
  return foldBinary(
      zero, adaptor.getInput(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a - b; },
      [](const APFloat &, const APFloat &b) { return neg(b); });
}

// Unary folds serve shape arithmetic (a mask from Not(Equal), sizes through
// Cast -> Mul -> Floor -> Cast): foldBinary with the operand twice applies
// them elementwise.
OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getInput(), adaptor.getInput(), getType(),
      [](const APInt &a, const APInt &, bool isUnsigned) {
        return isUnsigned ? a : a.abs();
      },
      [](const APFloat &a, const APFloat &) { return abs(a); });
}

OpFoldResult FloorOp::fold(FoldAdaptor adaptor) {
  return foldBinary(adaptor.getInput(), adaptor.getInput(), getType(), nullptr,
                    [](const APFloat &a, const APFloat &) {
                      APFloat r = a;
                      r.roundToIntegral(APFloat::rmTowardNegative);
                      return r;
                    });
}

OpFoldResult CeilOp::fold(FoldAdaptor adaptor) {
  return foldBinary(adaptor.getInput(), adaptor.getInput(), getType(), nullptr,
                    [](const APFloat &a, const APFloat &) {
                      APFloat r = a;
                      r.roundToIntegral(APFloat::rmTowardPositive);
                      return r;
                    });
}

OpFoldResult SignOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getInput(), adaptor.getInput(), getType(),
      [](const APInt &a, const APInt &, bool isUnsigned) {
        unsigned width = a.getBitWidth();
        if (a.isZero())
          return APInt(width, 0);
        return (!isUnsigned && a.isNegative()) ? APInt::getAllOnes(width)
                                               : APInt(width, 1);
      },
      [](const APFloat &a, const APFloat &) -> std::optional<APFloat> {
        if (a.isNaN())
          return std::nullopt; // left to the kernel
        if (a.isZero())
          return a;
        APFloat one(a.getSemantics(), 1);
        if (a.isNegative())
          one.changeSign();
        return one;
      });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldBinary(adaptor.getInput(), adaptor.getInput(), getType(),
                    [](const APInt &a, const APInt &, bool) { return ~a; },
                    nullptr);
}

LogicalResult ClipOp::verify() {
  std::optional<APFloat> lo = getMin(), hi = getMax();
  if (lo && hi && lo->convertToDouble() > hi->convertToDouble())
    return emitOpError("min (") << lo->convertToDouble() << ") exceeds max ("
                                << hi->convertToDouble() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    if (OpFoldResult same = foldToOperandIfSameType(getLhs(), getType()))
      return same;
  if (isSplatOf(adaptor.getLhs(), 0.0))
    if (OpFoldResult same = foldToOperandIfSameType(getRhs(), getType()))
      return same;
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a + b; },
      [](const APFloat &a, const APFloat &b) { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    if (OpFoldResult same = foldToOperandIfSameType(getLhs(), getType()))
      return same;
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a - b; },
      [](const APFloat &a, const APFloat &b) { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    if (OpFoldResult same = foldToOperandIfSameType(getLhs(), getType()))
      return same;
  if (isSplatOf(adaptor.getLhs(), 1.0))
    if (OpFoldResult same = foldToOperandIfSameType(getRhs(), getType()))
      return same;
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a * b; },
      [](const APFloat &a, const APFloat &b) { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    if (OpFoldResult same = foldToOperandIfSameType(getLhs(), getType()))
      return same;
  return foldBinary(adaptor.getLhs(), adaptor.getRhs(), getType(), divInts,
                    [](const APFloat &a, const APFloat &b) { return a / b; });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    if (OpFoldResult same = foldToOperandIfSameType(getLhs(), getType()))
      return same;
  return {};
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs())
    return getLhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool isUnsigned) {
        return (isUnsigned ? a.uge(b) : a.sge(b)) ? a : b;
      },
      [](const APFloat &a, const APFloat &b) { return maximum(a, b); });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs())
    return getLhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool isUnsigned) {
        return (isUnsigned ? a.ule(b) : a.sle(b)) ? a : b;
      },
      [](const APFloat &a, const APFloat &b) { return minimum(a, b); });
}

OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  // Shape arithmetic (Swin's window padding, (w - H % w) % w) must fold.
  bool fmod = getFmod();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [fmod](const APInt &a, const APInt &b,
             bool isUnsigned) -> std::optional<APInt> {
        if (b.isZero())
          return std::nullopt;
        if (isUnsigned)
          return a.urem(b);
        APInt r = a.srem(b); // the sign of the dividend, as C's fmod
        if (!fmod && !r.isZero() && r.isNegative() != b.isNegative())
          r += b; // the sign of the divisor, as Python's %
        return r;
      },
      [](const APFloat &a, const APFloat &b) -> std::optional<APFloat> {
        APFloat r = a;
        r.mod(b); // fmod semantics; floats require the fmod attribute
        return r;
      });
}

LogicalResult ModOp::verify() {
  if (isa<FloatType>(getElementTypeOrSelf(getLhs().getType())) && !getFmod())
    return emitOpError("on floats requires the 'fmod' attribute");
  return success();
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a & b; }, nullptr);
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a | b; }, nullptr);
}

OpFoldResult XorOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a ^ b; }, nullptr);
}

OpFoldResult BitwiseAndOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a & b; }, nullptr);
}

OpFoldResult BitwiseOrOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a | b; }, nullptr);
}

OpFoldResult BitwiseXorOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a ^ b; }, nullptr);
}

namespace {
/// The shift amount `b` when it lies in [0, width), else nothing.
std::optional<unsigned> shiftAmount(const APInt &b, bool isUnsigned) {
  unsigned width = b.getBitWidth();
  if (!isUnsigned && b.isNegative())
    return std::nullopt;
  if (b.getActiveBits() > 32 || b.getZExtValue() >= width)
    return std::nullopt;
  return static_cast<unsigned>(b.getZExtValue());
}
} // namespace

OpFoldResult ShiftLeftOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool isUnsigned) {
        std::optional<unsigned> amount = shiftAmount(b, isUnsigned);
        return amount ? a.shl(*amount) : APInt::getZero(a.getBitWidth());
      },
      nullptr);
}

OpFoldResult ShiftRightOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool isUnsigned) {
        std::optional<unsigned> amount = shiftAmount(b, isUnsigned);
        if (isUnsigned)
          return amount ? a.lshr(*amount) : APInt::getZero(a.getBitWidth());
        if (!amount)
          return a.isNegative() ? APInt::getAllOnes(a.getBitWidth())
                                : APInt::getZero(a.getBitWidth());
        return a.ashr(*amount);
      },
      nullptr);
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool) { return a == b; },
      [](const APFloat &a, const APFloat &b) {
        return a.compare(b) == APFloat::cmpEqual;
      });
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool u) {
        return u ? a.ult(b) : a.slt(b);
      },
      [](const APFloat &a, const APFloat &b) {
        return a.compare(b) == APFloat::cmpLessThan;
      });
}

OpFoldResult LessEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool u) {
        return u ? a.ule(b) : a.sle(b);
      },
      [](const APFloat &a, const APFloat &b) {
        APFloat::cmpResult c = a.compare(b);
        return c == APFloat::cmpLessThan || c == APFloat::cmpEqual;
      });
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool u) {
        return u ? a.ugt(b) : a.sgt(b);
      },
      [](const APFloat &a, const APFloat &b) {
        return a.compare(b) == APFloat::cmpGreaterThan;
      });
}

OpFoldResult GreaterEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](const APInt &a, const APInt &b, bool u) {
        return u ? a.uge(b) : a.sge(b);
      },
      [](const APFloat &a, const APFloat &b) {
        APFloat::cmpResult c = a.compare(b);
        return c == APFloat::cmpGreaterThan || c == APFloat::cmpEqual;
      });
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto cond = cast<RankedTensorType>(adaptor.getCondition().getType());
  auto a = cast<RankedTensorType>(adaptor.getTrueValue().getType());
  auto b = cast<RankedTensorType>(adaptor.getFalseValue().getType());
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc,
                             "true and false values differ in element type: ",
                             a.getElementType(), " vs ", b.getElementType());
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(a.getShape(), b.getShape());
  if (shape)
    shape = broadcastShapes(cond.getShape(), *shape);
  if (!shape)
    return emitOptionalError(loc, "operand shapes do not broadcast");
  types.push_back(RankedTensorType::get(*shape, a.getElementType()));
  return success();
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  Value chosen;
  if (getTrueValue() == getFalseValue())
    chosen = getTrueValue();
  else if (auto cond =
               dyn_cast_or_null<DenseElementsAttr>(adaptor.getCondition());
           cond && cond.isSplat())
    chosen = cond.getSplatValue<bool>() ? getTrueValue() : getFalseValue();
  if (chosen)
    return foldToOperandIfSameType(chosen, getType());

  // Small constant selects appear in exporters' shape logic (Where on shapes).
  auto cond = getFoldableElements(adaptor.getCondition());
  auto a = getFoldableElements(adaptor.getTrueValue());
  auto b = getFoldableElements(adaptor.getFalseValue());
  RankedTensorType type = getType();
  if (!cond || !a || !b || type.getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    bool c = cond.getValues<bool>()[broadcastSourceIndex(
        i, shape, cond.getType().getShape())];
    DenseElementsAttr src = c ? a : b;
    values.push_back(src.getValues<Attribute>()[broadcastSourceIndex(
        i, shape, src.getType().getShape())]);
  }
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

bool CastOp::isStorageWidening() {
  return isa<BFloat16Type, Float16Type>(
             getElementTypeOrSelf(getInput().getType())) &&
         getElementTypeOrSelf(getType()).isF32();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("changes the shape from ")
           << getInput().getType() << " to " << getType();
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto input = getFoldableElements(adaptor.getInput());
  if (!input)
    return {};
  Type from = input.getElementType(), to = getType().getElementType();
  auto convert = [&](auto &&fn) -> Attribute {
    if (input.isSplat())
      return DenseElementsAttr::get(getType(),
                                    fn(input.getValues<Attribute>()[0]));
    SmallVector<Attribute> values;
    for (Attribute v : input.getValues<Attribute>())
      values.push_back(fn(v));
    return DenseElementsAttr::get(getType(), values);
  };
  auto toInt = cast_or_null<IntegerType>(dyn_cast<IntegerType>(to));
  if (isa<IntegerType>(from) && toInt) {
    bool isUnsigned = from.isUnsignedInteger() || from.isInteger(1);
    return convert([&](Attribute v) -> Attribute {
      APInt value = cast<IntegerAttr>(v).getValue();
      if (toInt.getWidth() == 1)
        return IntegerAttr::get(to, APInt(1, !value.isZero()));
      return IntegerAttr::get(to, isUnsigned
                                      ? value.zextOrTrunc(toInt.getWidth())
                                      : value.sextOrTrunc(toInt.getWidth()));
    });
  }
  if (isa<IntegerType>(from) && isa<FloatType>(to)) {
    bool isUnsigned = from.isUnsignedInteger() || from.isInteger(1);
    return convert([&](Attribute v) -> Attribute {
      APFloat f(cast<FloatType>(to).getFloatSemantics());
      f.convertFromAPInt(cast<IntegerAttr>(v).getValue(), !isUnsigned,
                         APFloat::rmNearestTiesToEven);
      return FloatAttr::get(to, f);
    });
  }
  if (isa<FloatType>(from) && isa<FloatType>(to)) {
    return convert([&](Attribute v) -> Attribute {
      APFloat f = cast<FloatAttr>(v).getValue();
      bool losesInfo;
      f.convert(cast<FloatType>(to).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &losesInfo);
      return FloatAttr::get(to, f);
    });
  }
  if (isa<FloatType>(from) && toInt && toInt.getWidth() > 1) {
    return convert([&](Attribute v) -> Attribute {
      APSInt result(toInt.getWidth(), toInt.isUnsigned());
      bool exact;
      cast<FloatAttr>(v).getValue().convertToInteger(
          result, APFloat::rmTowardZero, &exact);
      return IntegerAttr::get(to, result);
    });
  }
  return {};
}

namespace {
/// cast(cast(x)) -> cast(x) when the middle type loses nothing: a widening
/// float conversion, or an integer widening, in between.
struct MergeLosslessCasts : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<CastOp>();
    if (!inner)
      return failure();
    Type src = inner.getInput().getType().getElementType();
    Type mid = inner.getType().getElementType();
    bool lossless = false;
    if (auto srcF = dyn_cast<FloatType>(src))
      if (auto midF = dyn_cast<FloatType>(mid))
        lossless = APFloat::isRepresentableBy(srcF.getFloatSemantics(),
                                              midF.getFloatSemantics());
    if (auto srcI = dyn_cast<IntegerType>(src))
      if (auto midI = dyn_cast<IntegerType>(mid))
        lossless = srcI.getWidth() < midI.getWidth() &&
                   srcI.isUnsigned() == midI.isUnsigned() &&
                   srcI.getWidth() > 1;
    if (!lossless)
      return failure();
    rewriter.replaceOpWithNewOp<CastOp>(op, op.getType(), inner.getInput());
    return success();
  }
};
} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<MergeLosslessCasts>(context);
}

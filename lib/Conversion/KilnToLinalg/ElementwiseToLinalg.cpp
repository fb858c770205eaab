//===- ElementwiseToLinalg.cpp - Elementwise kiln ops to linalg.generic
//-----===//
//
// Every elementwise kiln op becomes one linalg.generic whose indexing maps do
// the numpy broadcasting; what each op computes per element is
// ScalarSemantics.h's, which the template epilogues print too.
//
//===----------------------------------------------------------------------===//

#include "Float8Conversion.h"
#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Conversion/KilnToLinalg/ScalarSemantics.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// kiln.cast f32 -> tf32 whose users all cast back to f32: the rounding
/// pair kiln-lower-precision puts on tf32 contraction operands. tf32 has no
/// storage type, so the pair becomes one generic that rounds the f32 bits to
/// tf32 (10 mantissa bits, nearest even: cvt.rn.tf32.f32; NaN kept) and
/// stores f32.
struct RoundToTf32Pair : OpRewritePattern<CastOp> {
  RoundToTf32Pair(MLIRContext *context)
      : OpRewritePattern<CastOp>(context, /*benefit=*/2) {}
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().getElementType().isTF32() ||
        !op.getInput().getType().getElementType().isF32())
      return failure();
    SmallVector<Operation *> users(op->getUsers());
    if (llvm::any_of(users, [](Operation *user) {
          auto back = dyn_cast<CastOp>(user);
          return !back || !back.getType().getElementType().isF32();
        }))
      return rewriter.notifyMatchFailure(
          op, "a tf32 tensor can only be cast back to f32");
    RankedTensorType type = op.getInput().getType();
    Value rounded = elementwiseGeneric(
        rewriter, op.getLoc(), type, op.getInput(),
        [](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return buildRoundToTf32(b, loc, args.front());
        });
    for (Operation *user : users)
      rewriter.replaceOp(user, rounded);
    rewriter.eraseOp(op);
    return success();
  }
};

/// An unsigned integer type's signless twin; other types unchanged.
Type toSignless(Type type) {
  if (type.isUnsignedInteger())
    return IntegerType::get(type.getContext(), type.getIntOrFloatBitWidth());
  return type;
}

/// `value` as a signless integer when it is an unsigned one.
Value toSignless(OpBuilder &b, Location loc, Value value) {
  Type signless = toSignless(value.getType());
  if (signless == value.getType())
    return value;
  return UnrealizedConversionCastOp::create(b, loc, signless, value)
      .getResult(0);
}

template <typename OpTy> struct ElementwiseToGeneric : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    // tf32 tensors exist only inside RoundToTf32Pair's pair.
    if constexpr (std::is_same_v<OpTy, CastOp>)
      if (op.getType().getElementType().isTF32() ||
          op.getInput().getType().getElementType().isTF32())
        return rewriter.notifyMatchFailure(op, "tf32 has no storage type");
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    // Unsigned integers: arith wants signless ones, so the body casts its
    // arguments to signless integers of the same width and its result back;
    // the casts vanish when both sides become LLVM's iN.
    auto isUnsigned = [](Type type) {
      return getElementTypeOrSelf(type).isUnsignedInteger();
    };
    bool unsignedOperands = llvm::any_of(op->getOperandTypes(), isUnsigned);
    Type resultElement = resultType.getElementType();
    bool unsignedResult = isUnsigned(resultElement);
    Value result = elementwiseGeneric(
        rewriter, op.getLoc(), resultType, op->getOperands(),
        [&](OpBuilder &b, Location loc, ValueRange blockArgs) -> Value {
          SmallVector<Value> args;
          for (Value arg : blockArgs)
            args.push_back(toSignless(b, loc, arg));
          Value value = buildScalar(op, b, loc, args, unsignedOperands);
          if (value && value.getType() != resultElement)
            value = UnrealizedConversionCastOp::create(b, loc, resultElement,
                                                       value)
                        .getResult(0);
          return value;
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

template <typename... OpTys>
void addElementwisePatterns(RewritePatternSet &patterns) {
  (patterns.add<ElementwiseToGeneric<OpTys>>(patterns.getContext()), ...);
}

} // namespace

void kiln::populateElementwiseToLinalgPatterns(RewritePatternSet &patterns) {
  addElementwisePatterns<
      NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp,
      SigmoidOp, ErfOp, SinOp, CosOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp,
      AsinhOp, AcoshOp, AtanhOp, FloorOp, CeilOp, RoundOp, SignOp, NotOp,
      ReluOp, SoftplusOp, HardSwishOp, LeakyReluOp, EluOp, GeluOp,
      HardSigmoidOp, ClipOp, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp,
      ModOp, AndOp, OrOp, XorOp, BitwiseNotOp, BitwiseAndOp, BitwiseOrOp,
      BitwiseXorOp, ShiftLeftOp, ShiftRightOp, EqualOp, LessOp, LessEqualOp, GreaterOp,
      GreaterEqualOp, SelectOp, CastOp>(patterns);
  patterns.add<RoundToTf32Pair>(patterns.getContext());
}

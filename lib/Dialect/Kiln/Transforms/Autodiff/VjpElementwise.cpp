//===- VjpElementwise.cpp - Gradients of elementwise kiln ops --------------===//
//
// Unary math and activations, binary arithmetic with numpy broadcasting (the
// gradient of a broadcast operand is summed back to its shape), select and
// cast. Rules reuse the forward result where the derivative is cheaper in
// terms of it (sigmoid, tanh, exp, sqrt).
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::autodiff {

namespace {
RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `cond ? grad : 0`.
Value maskGrad(GradBuilder &g, Value cond, Value grad) {
  Value zero = g.scalar(getElementTypeOrSelf(grad.getType()), 0.0);
  return SelectOp::create(g.b, cond, grad, zero);
}
} // namespace

RuleStatus elementwiseVjp(GradBuilder &g, Operation *op,
                          ArrayRef<Value> resultGrads,
                          MutableArrayRef<Value> operandGrads,
                          std::string &why) {
  Value dy = resultGrads.empty() ? Value() : resultGrads.front();
  auto binary = [&](Value dl, Value dr) {
    operandGrads[0] = g.unbroadcast(dl, typeOf(op->getOperand(0)));
    operandGrads[1] = g.unbroadcast(dr, typeOf(op->getOperand(1)));
    return RuleStatus::Applied;
  };
  auto unary = [&](Value dx) {
    operandGrads[0] = dx;
    return RuleStatus::Applied;
  };
  auto zeroLike = [&](Value x) {
    return g.scalar(getElementTypeOrSelf(x.getType()), 0.0);
  };
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](AddOp) { return binary(dy, dy); })
      .Case([&](SubOp) { return binary(dy, g.neg(dy)); })
      .Case([&](MulOp m) {
        return binary(g.mul(dy, m.getRhs()), g.mul(dy, m.getLhs()));
      })
      .Case([&](DivOp d) {
        // d(a/b)/db = -(a/b)/b.
        return binary(g.div(dy, d.getRhs()),
                      g.neg(g.div(g.mul(dy, d.getResult()), d.getRhs())));
      })
      .Case([&](MaxOp m) {
        // Ties send the gradient to the lhs, as the forward picks it.
        Value lhsWins = GreaterEqualOp::create(g.b, m.getLhs(), m.getRhs());
        return binary(maskGrad(g, lhsWins, dy),
                      SelectOp::create(g.b, lhsWins, zeroLike(dy), dy));
      })
      .Case([&](MinOp m) {
        Value lhsWins = LessEqualOp::create(g.b, m.getLhs(), m.getRhs());
        return binary(maskGrad(g, lhsWins, dy),
                      SelectOp::create(g.b, lhsWins, zeroLike(dy), dy));
      })
      .Case([&](PowOp p) {
        // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b ln a (a > 0).
        Value a = p.getLhs(), bb = p.getRhs(), y = p.getResult();
        Type t = getElementTypeOrSelf(y.getType());
        Value bm1 = g.sub(bb, g.scalar(t, 1.0));
        Value da = g.mul(dy, g.mul(bb, PowOp::create(g.b, a, bm1)));
        Value db = g.mul(dy, g.mul(y, LogOp::create(g.b, a)));
        return binary(da, db);
      })
      .Case([&](NegOp) { return unary(g.neg(dy)); })
      .Case([&](ReluOp r) {
        Value x = r.getInput();
        return unary(
            maskGrad(g, GreaterOp::create(g.b, x, zeroLike(x)), dy));
      })
      .Case([&](LeakyReluOp r) {
        Value x = r.getInput();
        Value pos = GreaterEqualOp::create(g.b, x, zeroLike(x));
        return unary(SelectOp::create(g.b, pos, dy,
                                      g.scale(dy, r.getAlpha().convertToFloat())));
      })
      .Case([&](SigmoidOp s) {
        Value y = s.getResult();
        Type t = getElementTypeOrSelf(y.getType());
        return unary(g.mul(dy, g.mul(y, g.sub(g.scalar(t, 1.0), y))));
      })
      .Case([&](TanhOp s) {
        Value y = s.getResult();
        Type t = getElementTypeOrSelf(y.getType());
        return unary(g.mul(dy, g.sub(g.scalar(t, 1.0), g.mul(y, y))));
      })
      .Case([&](ExpOp e) { return unary(g.mul(dy, e.getResult())); })
      .Case([&](LogOp l) { return unary(g.div(dy, l.getInput())); })
      .Case([&](SqrtOp s) {
        return unary(g.div(g.scale(dy, 0.5), s.getResult()));
      })
      .Case([&](RsqrtOp s) {
        // d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3.
        Value y = s.getResult();
        return unary(g.mul(g.scale(dy, -0.5), g.mul(y, g.mul(y, y))));
      })
      .Case([&](ReciprocalOp r) {
        Value y = r.getResult();
        return unary(g.neg(g.mul(dy, g.mul(y, y))));
      })
      .Case([&](AbsOp a) {
        return unary(g.mul(dy, SignOp::create(g.b, a.getInput())));
      })
      .Case([&](SoftplusOp s) {
        return unary(g.mul(dy, SigmoidOp::create(g.b, s.getInput())));
      })
      .Case([&](ErfOp e) {
        // d erf(x) = 2/sqrt(pi) e^(-x^2).
        Value x = e.getInput();
        Value gauss = ExpOp::create(g.b, g.neg(g.mul(x, x)));
        return unary(g.mul(g.scale(dy, 1.1283791670955126), gauss));
      })
      .Case([&](GeluOp gelu) -> RuleStatus {
        if (gelu.getTanh()) {
          why = "the tanh approximation of gelu has no gradient rule yet";
          return RuleStatus::Unsupported;
        }
        // d(x Phi(x)) = Phi(x) + x phi(x).
        Value x = gelu.getInput();
        Type t = getElementTypeOrSelf(x.getType());
        Value phiCdf = g.scale(
            g.add(g.scalar(t, 1.0),
                  ErfOp::create(g.b, g.scale(x, 0.7071067811865476))),
            0.5);
        Value pdf = g.scale(ExpOp::create(g.b, g.scale(g.mul(x, x), -0.5)),
                            0.3989422804014327);
        return unary(g.mul(dy, g.add(phiCdf, g.mul(x, pdf))));
      })
      .Case([&](ClipOp c) {
        // The gradient passes where the input is strictly inside the bounds.
        Value x = c.getInput();
        Type t = getElementTypeOrSelf(x.getType());
        Value grad = dy;
        if (auto lo = c.getMin())
          grad = maskGrad(
              g, GreaterOp::create(g.b, x, g.scalar(t, lo->convertToDouble())),
              grad);
        if (auto hi = c.getMax())
          grad = maskGrad(
              g, LessOp::create(g.b, x, g.scalar(t, hi->convertToDouble())),
              grad);
        return unary(grad);
      })
      .Case([&](SelectOp s) {
        Value zero = zeroLike(dy);
        Value c = s.getCondition();
        operandGrads[1] = g.unbroadcast(SelectOp::create(g.b, c, dy, zero),
                                        typeOf(s.getTrueValue()));
        operandGrads[2] = g.unbroadcast(SelectOp::create(g.b, c, zero, dy),
                                        typeOf(s.getFalseValue()));
        return RuleStatus::Applied;
      })
      .Case([&](CastOp c) -> RuleStatus {
        if (!isa<FloatType>(getElementTypeOrSelf(c.getInput().getType())))
          return RuleStatus::Applied; // No gradient into integers.
        return unary(CastOp::create(g.b, typeOf(c.getInput()), dy));
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

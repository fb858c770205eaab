//===- TrainingHandlers.cpp - ONNX ai.onnx.preview.training ops ------------===//
//
// Gradient becomes kiln.gradient, which kiln-expand-gradients differentiates
// right after import. Adagrad, Momentum and Adam of the
// ai.onnx.preview.training domain (opset 1): each updates n tensors at once (inputs R, T, then n X, n G and the
// n per-tensor states; outputs the new X, then the new states) and is plain
// elementwise math on kiln ops, the formulas of the ONNX operator
// documentation. R (the learning rate) and T (the update count, int64) are
// scalars that may be graph inputs: T > 0 becomes a kiln.select.
//
//===----------------------------------------------------------------------===//

#include "WindowAttrs.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

/// Scalar-and-tensor arithmetic for one update, in the type of the X's.
struct UpdateMath {
  NodeImporter &n;
  Type element;
  bool failed = false;

  Value check(FailureOr<Value> v) {
    if (mlir::failed(v)) {
      failed = true;
      return n.scalar(element, 0);
    }
    return *v;
  }
  Value c(double v) { return n.scalar(element, v); }
  Value add(Value a, Value b) { return check(n.make<AddOp>({a, b})); }
  Value sub(Value a, Value b) { return check(n.make<SubOp>({a, b})); }
  Value mul(Value a, Value b) { return check(n.make<MulOp>({a, b})); }
  Value div(Value a, Value b) { return check(n.make<DivOp>({a, b})); }
  Value pow(Value a, Value b) { return check(n.make<PowOp>({a, b})); }
  Value sqrt(Value a) { return check(n.make<SqrtOp>({a})); }
  Value select(Value cond, Value a, Value b) {
    return check(n.make<SelectOp>({cond, a, b}));
  }
  /// `value` converted to the X's element type (R, T).
  Value toElement(Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == element)
      return value;
    return check(n.makeTyped<CastOp>(
        RankedTensorType::get(type.getShape(), element), value));
  }
  /// norm_coefficient * x + g
  Value regularized(Value x, Value g, double normCoefficient) {
    return normCoefficient == 0 ? g : add(mul(c(normCoefficient), x), g);
  }
};

/// Checks the common layout: R, T, then `groups` groups of n tensors, the
/// X's float and every tensor of a group shaped like its X. Returns n.
FailureOr<size_t> checkLayout(NodeImporter &n, size_t groups) {
  auto bad = [&](const Twine &message) -> FailureOr<size_t> {
    (void)n.fail(message);
    return failure();
  };
  size_t count = n.numInputs();
  if (count < 2 + groups || (count - 2) % groups != 0)
    return bad("expects R, T and " + Twine(groups) +
                  " groups of equally many tensors, got " + Twine(count) +
                  " inputs");
  size_t tensors = (count - 2) / groups;
  for (size_t i = 0; i < count; ++i)
    if (!n.hasInput(i))
      return bad("input " + Twine(i) + " is missing");
  if (n.inputType(0).getNumElements() != 1 ||
      !isa<FloatType>(n.inputType(0).getElementType()))
    return bad("R must be a float scalar");
  if (n.inputType(1).getNumElements() != 1 ||
      !n.inputType(1).getElementType().isInteger(64))
    return bad("T must be an int64 scalar");
  for (size_t i = 0; i < tensors; ++i) {
    RankedTensorType x = n.inputType(2 + i);
    if (!isa<FloatType>(x.getElementType()))
      return bad("X " + Twine(i) + " must be float");
    for (size_t g = 1; g < groups; ++g)
      if (n.inputType(2 + g * tensors + i) != x)
        return bad("input " + Twine(2 + g * tensors + i) +
                      " does not have the type of X " + Twine(i));
  }
  if (n.node().output_size() > static_cast<int>(tensors * (groups - 1)))
    return bad("expects at most " + Twine(tensors * (groups - 1)) +
                  " outputs");
  return tensors;
}

/// R and T as rank-0 tensors of the X's type, and T > 0.
struct Step {
  Value rate, count, positive;
};
Step stepScalars(NodeImporter &n, UpdateMath &m) {
  auto scalarOf = [&](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() == 0)
      return v;
    return m.check(n.makeTyped<ReshapeOp>(
        RankedTensorType::get({}, type.getElementType()), v));
  };
  Value t = scalarOf(n.input(1));
  Value positive = m.check(
      n.make<GreaterOp>({t, n.scalar(n.builder().getI64Type(), 0)}));
  return {m.toElement(scalarOf(n.input(0))), m.toElement(t), positive};
}

LogicalResult importAdagrad(NodeImporter &n) {
  FailureOr<size_t> tensors = checkLayout(n, 3);
  if (failed(tensors))
    return failure();
  UpdateMath m{n, n.inputType(2).getElementType()};
  Step s = stepScalars(n, m);
  double decay = n.floatAttr("decay_factor", 0);
  double eps = n.floatAttr("epsilon", 1e-6);
  double norm = n.floatAttr("norm_coefficient", 0);
  // r = R / (1 + T * decay_factor)
  Value rate = m.div(s.rate, m.add(m.c(1), m.mul(s.count, m.c(decay))));
  SmallVector<Value> xs, hs;
  for (size_t i = 0; i < *tensors; ++i) {
    Value x = n.input(2 + i), g = n.input(2 + *tensors + i),
          h = n.input(2 + 2 * *tensors + i);
    Value gr = m.regularized(x, g, norm);
    Value hNew = m.add(h, m.mul(gr, gr));
    Value adaptive = m.add(m.sqrt(hNew), m.c(eps));
    xs.push_back(m.sub(x, m.div(m.mul(rate, gr), adaptive)));
    hs.push_back(hNew);
  }
  if (m.failed)
    return failure();
  llvm::append_range(xs, hs);
  return n.setResults(xs);
}

LogicalResult importMomentum(NodeImporter &n) {
  FailureOr<size_t> tensors = checkLayout(n, 3);
  if (failed(tensors))
    return failure();
  for (const char *name : {"alpha", "beta", "mode", "norm_coefficient"})
    if (!n.hasAttr(name))
      return n.fail(Twine("attribute '") + name + "' is required");
  std::string mode = n.stringAttr("mode", "");
  if (mode != "standard" && mode != "nesterov")
    return n.fail("mode '" + mode + "' is not standard or nesterov");
  UpdateMath m{n, n.inputType(2).getElementType()};
  Step s = stepScalars(n, m);
  double alpha = n.floatAttr("alpha", 0), beta = n.floatAttr("beta", 0);
  double norm = n.floatAttr("norm_coefficient", 0);
  // The first update (T = 0) takes the gradient unscaled.
  Value betaAdjusted = m.select(s.positive, m.c(beta), m.c(1));
  SmallVector<Value> xs, vs;
  for (size_t i = 0; i < *tensors; ++i) {
    Value x = n.input(2 + i), g = n.input(2 + *tensors + i),
          v = n.input(2 + 2 * *tensors + i);
    Value gr = m.regularized(x, g, norm);
    Value vNew = m.add(m.mul(m.c(alpha), v), m.mul(betaAdjusted, gr));
    Value direction =
        mode == "nesterov" ? m.add(gr, m.mul(m.c(alpha), vNew)) : vNew;
    xs.push_back(m.sub(x, m.mul(s.rate, direction)));
    vs.push_back(vNew);
  }
  if (m.failed)
    return failure();
  llvm::append_range(xs, vs);
  return n.setResults(xs);
}

LogicalResult importAdam(NodeImporter &n) {
  FailureOr<size_t> tensors = checkLayout(n, 4);
  if (failed(tensors))
    return failure();
  UpdateMath m{n, n.inputType(2).getElementType()};
  Step s = stepScalars(n, m);
  double alpha = n.floatAttr("alpha", 0.9), beta = n.floatAttr("beta", 0.999);
  double eps = n.floatAttr("epsilon", 1e-6);
  double norm = n.floatAttr("norm_coefficient", 0);
  double normPost = n.floatAttr("norm_coefficient_post", 0);
  // With T > 0 the bias-corrected rate R sqrt(1 - beta^T) / (1 - alpha^T);
  // the other branch (0 / 0 at T = 0) is discarded by the select.
  Value corrected =
      m.div(m.mul(s.rate, m.sqrt(m.sub(m.c(1), m.pow(m.c(beta), s.count)))),
            m.sub(m.c(1), m.pow(m.c(alpha), s.count)));
  Value rate = m.select(s.positive, corrected, s.rate);
  SmallVector<Value> xs, vs, hs;
  for (size_t i = 0; i < *tensors; ++i) {
    Value x = n.input(2 + i), g = n.input(2 + *tensors + i),
          v = n.input(2 + 2 * *tensors + i), h = n.input(2 + 3 * *tensors + i);
    Value gr = m.regularized(x, g, norm);
    Value vNew = m.add(m.mul(m.c(alpha), v), m.mul(m.c(1 - alpha), gr));
    Value hNew = m.add(m.mul(m.c(beta), h), m.mul(m.c(1 - beta), m.mul(gr, gr)));
    Value hSqrt = m.add(m.sqrt(hNew), m.c(eps));
    Value xNew = m.sub(x, m.mul(rate, m.div(vNew, hSqrt)));
    if (normPost != 0)
      xNew = m.mul(m.c(1 - normPost), xNew);
    xs.push_back(xNew);
    vs.push_back(vNew);
    hs.push_back(hNew);
  }
  if (m.failed)
    return failure();
  llvm::append_range(xs, vs);
  llvm::append_range(xs, hs);
  return n.setResults(xs);
}

/// Gradient(xs..., zs...) {xs, zs, y}: the inputs are the tensors `xs`
/// names, then those `zs` names (held fixed: only the xs are
/// differentiated, so zs need nothing here); output i is d y / d xs[i].
LogicalResult importGradient(NodeImporter &n) {
  SmallVector<std::string> xs = n.stringsAttr("xs");
  SmallVector<std::string> zs = n.stringsAttr("zs");
  std::string yName = n.stringAttr("y", "");
  if (xs.empty())
    return n.fail("attribute 'xs' must name at least one tensor");
  if (yName.empty())
    return n.fail("attribute 'y' must name the differentiated tensor");
  const onnx::NodeProto &node = n.node();
  if (static_cast<size_t>(node.input_size()) != xs.size() + zs.size())
    return n.fail("has " + Twine(node.input_size()) + " inputs; 'xs' and 'zs' name " +
                  Twine(xs.size() + zs.size()));
  for (size_t i = 0; i < xs.size() + zs.size(); ++i) {
    const std::string &expected = i < xs.size() ? xs[i] : zs[i - xs.size()];
    if (node.input(i) != expected)
      return n.fail("input " + Twine(i) + " is '" + node.input(i) +
                    "', but 'xs' then 'zs' name '" + expected + "' there");
  }
  if (node.output_size() > static_cast<int>(xs.size()))
    return n.fail("has " + Twine(node.output_size()) +
                  " outputs for " + Twine(xs.size()) + " xs");
  Value y = n.graphValue(yName);
  if (!y)
    return n.fail("'y' names '" + yName +
                  "', which no node before this one computes");
  if (!isa<FloatType>(cast<RankedTensorType>(y.getType()).getElementType()))
    return n.fail("'y' ('" + yName + "') is not a float tensor");
  SmallVector<Value> operands{y};
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!isa<FloatType>(n.inputType(i).getElementType()))
      return n.fail("x '" + xs[i] + "' is not a float tensor");
    operands.push_back(n.input(i));
  }
  FailureOr<SmallVector<Value>> grads =
      n.makeMulti<GradientOp>(xs.size(), operands);
  if (failed(grads))
    return failure();
  return n.setResults(*grads);
}

} // namespace

void registerTrainingHandlers(SmallVectorImpl<Handler> &handlers) {
  constexpr const char *limits = "elementwise update (kiln ops)";
  handlers.append({
      {"ai.onnx.preview.training.Adagrad", 1, importAdagrad, limits},
      {"ai.onnx.preview.training.Adam", 1, importAdam, limits},
      {"ai.onnx.preview.training.Gradient", 1, importGradient,
       "float xs and y; y's gradient is that of the sum of its elements; "
       "the ops between need kiln-autodiff rules"},
      {"ai.onnx.preview.training.Momentum", 1, importMomentum, limits},
  });
}

} // namespace kiln::onnx_frontend

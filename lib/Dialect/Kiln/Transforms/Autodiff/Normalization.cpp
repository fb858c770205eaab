//===- Normalization.cpp - Norms in training form, before the sweep --------===//
//
// kiln-autodiff rewrites layer_norm, instance_norm and batch_norm in
// @train_grad into the ops they are made of (reduce mean, sub, mul, rsqrt,
// add) before the reverse sweep, so their gradients come from the
// elementwise and reduction rules, as jax.grad of the same formula would
// give them. batch_norm becomes *training mode*: it normalises with the
// statistics of the batch (mean and biased variance over every dimension
// but the channels, ONNX's training_mode=1), and the running statistics it
// read are updated,
//   running = momentum * running + (1 - momentum) * batch,
// as extra results of @train_grad (momentum: the op's `kiln.momentum`
// attribute, ONNX's default 0.9 without it).
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::autodiff {

namespace {
RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

struct Moments {
  Value centered; // x - mean
  Value mean;     // keepdims
  Value variance; // biased, keepdims
};

Moments moments(GradBuilder &g, Value x, ArrayRef<int64_t> axes) {
  Value mean = ReduceOp::create(g.b, ReduceKind::Mean, x, axes, true);
  Value centered = g.sub(x, mean);
  Value variance = ReduceOp::create(g.b, ReduceKind::Mean,
                                    g.mul(centered, centered), axes, true);
  return {centered, mean, variance};
}

/// (x - mean) / sqrt(var + eps).
Value normalized(GradBuilder &g, const Moments &m, double epsilon) {
  Type element = getElementTypeOrSelf(m.variance.getType());
  Value inv = RsqrtOp::create(g.b, g.add(m.variance, g.scalar(element, epsilon)));
  return g.mul(m.centered, inv);
}

/// A per-channel [C] value shaped to broadcast against [N, C, spatial...].
Value perChannel(GradBuilder &g, Value value, int64_t rank) {
  SmallVector<int64_t> shape(rank - 1, 1);
  shape[0] = typeOf(value).getDimSize(0);
  return g.reshape(value, shape);
}
} // namespace

LogicalResult decomposeNormalizations(func::FuncOp func,
                                      SmallVectorImpl<StateUpdate> &updates,
                                      std::string &error) {
  SmallVector<Operation *> norms;
  func.walk([&](Operation *op) {
    if (isa<LayerNormOp, InstanceNormOp, BatchNormOp>(op))
      norms.push_back(op);
  });
  for (Operation *op : norms) {
    ImplicitLocOpBuilder b(op->getLoc(), op);
    GradBuilder g(b);
    Value x = op->getOperand(0);
    RankedTensorType type = typeOf(x);
    int64_t rank = type.getRank();
    Value result;
    if (auto ln = dyn_cast<LayerNormOp>(op)) {
      int64_t axis = normalizeAxis(ln.getAxis(), rank);
      SmallVector<int64_t> axes =
          llvm::to_vector(llvm::seq<int64_t>(axis, rank));
      result = g.mul(normalized(g, moments(g, x, axes),
                                ln.getEpsilon().convertToDouble()),
                     ln.getScale());
      if (ln.getBias())
        result = g.add(result, ln.getBias());
    } else if (auto in = dyn_cast<InstanceNormOp>(op)) {
      SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(2, rank));
      result = g.mul(normalized(g, moments(g, x, axes),
                                in.getEpsilon().convertToDouble()),
                     perChannel(g, in.getScale(), rank));
      result = g.add(result, perChannel(g, in.getBias(), rank));
    } else {
      auto bn = cast<BatchNormOp>(op);
      if (bn.getDataFormat() != DataFormat::ChannelsFirst || rank < 2) {
        error = "batch_norm: only nchw inputs of rank >= 2 (autodiff runs "
                "before kiln-assign-layout)";
        return failure();
      }
      SmallVector<int64_t> axes{0};
      for (int64_t d = 2; d < rank; ++d)
        axes.push_back(d);
      Moments m = moments(g, x, axes);
      result = g.mul(normalized(g, m, bn.getEpsilon().convertToDouble()),
                     perChannel(g, bn.getScale(), rank));
      result = g.add(result, perChannel(g, bn.getBias(), rank));
      double momentum = 0.9;
      if (auto attr = op->getAttrOfType<FloatAttr>(
              KilnDialect::MomentumAttrHelper::getNameStr()))
        momentum = attr.getValueAsDouble();
      int64_t channels = type.getDimSize(1);
      for (auto [running, batch] :
           {std::pair{bn.getMean(), m.mean}, std::pair{bn.getVariance(), m.variance}}) {
        auto load = running.getDefiningOp<ml_program::GlobalLoadConstOp>();
        if (!load)
          continue; // A constant: nothing to update.
        Value updated =
            g.add(g.scale(running, momentum),
                  g.scale(g.reshape(batch, {channels}), 1.0 - momentum));
        updates.push_back({updated, load.getGlobal().getLeafReference()});
      }
    }
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  }
  return success();
}

} // namespace kiln::autodiff

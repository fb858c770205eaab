//===- VjpDataMovement.cpp - Gradients of shape and data movement ops ------===//
//
// Data movement is linear, so each gradient is the adjoint movement:
// reshape back, transpose by the inverse permutation, sum a broadcast back,
// slice a concat's gradient apart and concatenate a split's, put a slice's
// gradient back in place (zeros between the steps), crop a pad's (adding a reflect or
// edge pad's slabs back onto the elements they copy),
// sum a tile's tiles, and scatter-add a gather's into zeros of the table.
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

/// The piece [offset, offset + size) of `value` along `axis`.
Value sliceAlong(GradBuilder &g, Value value, int64_t axis, int64_t offset,
                 int64_t size) {
  RankedTensorType type = typeOf(value);
  SmallVector<int64_t> starts(type.getRank(), 0);
  SmallVector<int64_t> limits(type.getShape());
  SmallVector<int64_t> steps(type.getRank(), 1);
  starts[axis] = offset;
  limits[axis] = offset + size;
  return SliceOp::create(g.b, value, g.b.getDenseI64ArrayAttr(starts),
                         g.b.getDenseI64ArrayAttr(limits),
                         g.b.getDenseI64ArrayAttr(steps));
}

/// The gradient of `kiln.gather` (along `axis`) w.r.t. its table: dY
/// scatter-added into zeros, through scatter_elements over a [pre, A, post]
/// view of the table.
Value gatherTableGrad(GradBuilder &g, GatherOp op, Value dy) {
  RankedTensorType table = typeOf(op.getInput());
  RankedTensorType indicesType = typeOf(op.getIndices());
  int64_t axis = op.getAxis();
  int64_t pre = 1, post = 1, extent = table.getDimSize(axis);
  for (int64_t d = 0; d < axis; ++d)
    pre *= table.getDimSize(d);
  for (int64_t d = axis + 1; d < table.getRank(); ++d)
    post *= table.getDimSize(d);
  int64_t count = indicesType.getNumElements();
  Type indexElement = indicesType.getElementType();
  // Negative indices count from the end.
  Value indices = g.reshape(op.getIndices(), {1, count, 1});
  Value zero = g.scalar(indexElement, 0.0);
  Value wrapped = g.add(indices, g.scalar(indexElement, double(extent)));
  indices = SelectOp::create(g.b, LessOp::create(g.b, indices, zero), wrapped,
                             indices);
  indices = g.broadcastTo(
      indices, RankedTensorType::get({pre, count, post}, indexElement));
  Value updates = g.reshape(dy, {pre, count, post});
  Value zeros = g.splat(RankedTensorType::get({pre, extent, post},
                                              table.getElementType()),
                        0.0);
  Value summed = ScatterElementsOp::create(g.b, zeros, indices, updates,
                                           /*axis=*/1, ScatterReduction::Add);
  return g.reshape(summed, table.getShape());
}
/// The gradient of a pad: the interior of `dy`, plus, for reflect and edge
/// pads, each padded slab added onto the input element it copies. Pads are
/// separable (the result is padded one axis after another), so axis by
/// axis: along axis d (input size n, pads lo/hi), edge pads copy element 0
/// lo times and element n-1 hi times (their slabs are summed onto those);
/// reflect pads copy elements lo..1 and n-2..n-1-hi (the slabs, reversed,
/// land on those positions).
Value padAdjoint(GradBuilder &g, PadOp p, Value dy) {
  RankedTensorType inType = cast<RankedTensorType>(p.getInput().getType());
  int64_t rank = inType.getRank();
  ArrayRef<int64_t> low = p.getLow(), high = p.getHigh();
  Value current = dy;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = inType.getDimSize(d), lo = low[d], hi = high[d];
    if (lo == 0 && hi == 0)
      continue;
    auto type = cast<RankedTensorType>(current.getType());
    SmallVector<int64_t> starts(rank, 0), limits(type.getShape()),
        steps(rank, 1), zeros(rank, 0);
    // The slab [from, to) of `current` along d, walked with `step`.
    auto slab = [&](int64_t from, int64_t to, int64_t step) {
      SmallVector<int64_t> st(starts), lim(limits), sp(steps);
      st[d] = step > 0 ? from : to - 1;
      lim[d] = step > 0 ? to : from - 1;
      sp[d] = step;
      return g.slice(current, st, lim, sp);
    };
    // `value` (extent k along d) placed at [at, at + k) of n, zeros around.
    auto place = [&](Value value, int64_t at) {
      int64_t k = cast<RankedTensorType>(value.getType()).getDimSize(d);
      SmallVector<int64_t> l(zeros), h(zeros);
      l[d] = at;
      h[d] = n - at - k;
      return g.pad(value, l, h);
    };
    Value grad = slab(lo, lo + n, 1);
    if (p.getMode() == PadMode::Edge) {
      SmallVector<int64_t> axis{d};
      if (lo > 0)
        grad = g.add(grad, place(g.sumKeep(slab(0, lo, 1), axis), 0));
      if (hi > 0)
        grad = g.add(grad,
                     place(g.sumKeep(slab(lo + n, lo + n + hi, 1), axis), n - 1));
    } else if (p.getMode() == PadMode::Reflect) {
      // Output j < lo copies element lo - j; j = lo + n + t copies n - 2 - t.
      if (lo > 0)
        grad = g.add(grad, place(slab(0, lo, -1), 1));
      if (hi > 0)
        grad = g.add(grad, place(slab(lo + n, lo + n + hi, -1), n - 1 - hi));
    }
    current = grad;
  }
  return current;
}

} // namespace

RuleStatus dataMovementVjp(GradBuilder &g, Operation *op,
                           ArrayRef<Value> resultGrads,
                           MutableArrayRef<Value> operandGrads,
                           std::string &why) {
  return llvm::TypeSwitch<Operation *, RuleStatus>(op)
      .Case([&](ReshapeOp r) {
        operandGrads[0] =
            g.reshape(resultGrads[0], typeOf(r.getInput()).getShape());
        return RuleStatus::Applied;
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = static_cast<int64_t>(i);
        operandGrads[0] = g.transpose(resultGrads[0], inverse);
        return RuleStatus::Applied;
      })
      .Case([&](BroadcastOp bc) {
        operandGrads[0] = g.unbroadcast(resultGrads[0], typeOf(bc.getInput()));
        return RuleStatus::Applied;
      })
      .Case([&](ConcatOp c) {
        int64_t axis = c.getAxis();
        int64_t offset = 0;
        for (auto [i, input] : llvm::enumerate(c.getInputs())) {
          int64_t size = typeOf(input).getDimSize(axis);
          operandGrads[i] = sliceAlong(g, resultGrads[0], axis, offset, size);
          offset += size;
        }
        return RuleStatus::Applied;
      })
      .Case([&](SplitOp s) {
        operandGrads[0] = ConcatOp::create(
            g.b, resultGrads, g.b.getI64IntegerAttr(s.getAxis()));
        return RuleStatus::Applied;
      })
      .Case([&](SliceOp sl) {
        operandGrads[0] = g.sliceAdjoint(resultGrads[0], typeOf(sl.getInput()),
                                         sl.getStarts(), sl.getSteps());
        return RuleStatus::Applied;
      })
      .Case([&](PadOp p) -> RuleStatus {
        operandGrads[0] = padAdjoint(g, p, resultGrads[0]);
        return RuleStatus::Applied;
      })
      .Case([&](TileOp t) {
        // [r0 * d0, r1 * d1, ...] viewed as [r0, d0, r1, d1, ...], summed
        // over the repeats.
        RankedTensorType inType = typeOf(t.getInput());
        SmallVector<int64_t> split, axes;
        for (auto [d, repeat] : llvm::enumerate(t.getRepeats())) {
          axes.push_back(static_cast<int64_t>(split.size()));
          split.push_back(repeat);
          split.push_back(inType.getDimSize(d));
        }
        Value summed = g.sumKeep(g.reshape(resultGrads[0], split), axes);
        operandGrads[0] = g.reshape(summed, inType.getShape());
        return RuleStatus::Applied;
      })
      .Case([&](GatherOp gather) {
        operandGrads[0] = gatherTableGrad(g, gather, resultGrads[0]);
        return RuleStatus::Applied;
      })
      .Case([&](GatherElementsOp gather) {
        RankedTensorType inType = typeOf(gather.getInput());
        Value indices = gather.getIndices();
        Type indexElement = getElementTypeOrSelf(indices.getType());
        Value zero = g.scalar(indexElement, 0.0);
        Value wrapped = g.add(
            indices, g.scalar(indexElement,
                              double(inType.getDimSize(gather.getAxis()))));
        indices = SelectOp::create(
            g.b, LessOp::create(g.b, indices, zero), wrapped, indices);
        operandGrads[0] = ScatterElementsOp::create(
            g.b, g.splat(inType, 0.0), indices, resultGrads[0],
            gather.getAxis(), ScatterReduction::Add);
        return RuleStatus::Applied;
      })
      .Default([](Operation *) { return RuleStatus::NoRule; });
}

} // namespace kiln::autodiff

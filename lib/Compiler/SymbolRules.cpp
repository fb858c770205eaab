//===- SymbolRules.cpp - How each op moves a symbolic dim -----------------===//
//
// A value *carries* the symbol on one of its dims, with a factor: index i of
// that dim belongs to slice i / factor of the symbol (factor 1 on inputs; a
// reshape that merges the symbol's dim with the dims after it,
// [N, S, H] -> [N*S, H], gives S). Each rule says where an op's results
// carry the symbol, or why the slices stop being independent.
//
//===----------------------------------------------------------------------===//

#include "SymbolRules.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::symbols {

ArrayRef<int64_t> shapeOf(Value value) {
  if (auto type = dyn_cast<RankedTensorType>(value.getType()))
    return type.getShape();
  return {};
}

int64_t rankOf(Value value) {
  return static_cast<int64_t>(shapeOf(value).size());
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

namespace {

Propagation fail(std::string reason) {
  Propagation p;
  p.reason = std::move(reason);
  return p;
}
Propagation same(Operation *op, std::optional<Carried> where) {
  Propagation p;
  p.results.assign(op->getNumResults(), where);
  return p;
}

/// numpy broadcasting: operand dims align with the result's trailing dims.
Propagation broadcasting(Operation *op,
                                ArrayRef<std::optional<Carried>> operands) {
  if (op->getNumResults() != 1)
    return fail("is not known to keep slices along it independent");
  Value result = op->getResult(0);
  std::optional<Carried> where;
  for (auto [operand, carried] : llvm::zip(op->getOperands(), operands)) {
    if (!carried)
      continue;
    Carried mapped{carried->dim + rankOf(result) - rankOf(operand),
                   carried->factor};
    if (mapped.dim < 0 ||
        shapeOf(result)[mapped.dim] != shapeOf(operand)[carried->dim])
      return fail("broadcasts along it");
    if (where && !(*where == mapped))
      return fail("combines it from two different dims");
    where = mapped;
  }
  return same(op, where);
}

/// Ops whose result has the first operand's shape and that mix values
/// only along `mixed` dims of it; every other operand must not carry it.
Propagation alongInput(Operation *op,
                              ArrayRef<std::optional<Carried>> operands,
                              llvm::function_ref<bool(int64_t)> mixes,
                              StringRef how = "mixes values along it") {
  for (size_t i = 1; i < operands.size(); ++i)
    if (operands[i])
      return fail("takes it in a parameter operand");
  if (!operands[0])
    return same(op, std::nullopt);
  if (mixes(operands[0]->dim))
    return fail(how.str());
  return same(op, operands[0]);
}

Propagation matmul(MatmulOp op,
                          ArrayRef<std::optional<Carried>> operands) {
  int64_t lr = rankOf(op.getLhs()), rr = rankOf(op.getRhs());
  int64_t resultRank = rankOf(op.getResult());
  std::optional<Carried> where;
  auto place = [&](Carried c) -> bool {
    if (where && !(*where == c))
      return false;
    where = c;
    return true;
  };
  if (operands[0]) {
    int64_t d = operands[0]->dim;
    if (lr == 1 || d == lr - 1)
      return fail("contracts over it");
    // [..., M, K]: batch dims align right with the result's batch dims,
    // M is the result's second to last.
    int64_t mapped = d == lr - 2 ? (rr == 1 ? resultRank - 1 : resultRank - 2)
                                 : d + (resultRank - lr);
    if (!place({mapped, operands[0]->factor}))
      return fail("puts it on two dims");
  }
  if (operands[1]) {
    int64_t d = operands[1]->dim;
    if (rr == 1 || d == rr - 2)
      return fail("contracts over it");
    int64_t mapped = d == rr - 1 ? resultRank - 1 : d + (resultRank - rr);
    if (!place({mapped, operands[1]->factor}))
      return fail("puts it on two dims");
  }
  if (where && shapeOf(op.getResult())[where->dim] !=
                   (operands[0] ? shapeOf(op.getLhs())[operands[0]->dim]
                                : shapeOf(op.getRhs())[operands[1]->dim]))
    return fail("broadcasts along it");
  return same(op, where);
}

/// A reshape keeps the symbol when the dims before it multiply to the
/// same count (so every slice stays one contiguous block) and the new dim
/// that starts the block is a multiple of the symbol's size.
Propagation reshape(ReshapeOp op, Carried in) {
  ArrayRef<int64_t> from = shapeOf(op.getInput());
  ArrayRef<int64_t> to = shapeOf(op.getResult());
  int64_t outer = 1;
  for (int64_t i = 0; i < in.dim; ++i)
    outer *= from[i];
  int64_t symbolSize = from[in.dim] / in.factor;
  int64_t prefix = 1;
  for (int64_t j = 0; j < static_cast<int64_t>(to.size()); ++j) {
    if (prefix == outer && symbolSize > 0 && to[j] % symbolSize == 0 &&
        to[j] != 0)
      return same(op, Carried{j, to[j] / symbolSize});
    prefix *= to[j];
    if (prefix > outer)
      break;
  }
  return fail("splits it or merges it with a dim before it");
}

} // namespace

Propagation propagate(Operation *op, ArrayRef<std::optional<Carried>> operands) {
  std::optional<Carried> first;
  if (!operands.empty())
    first = operands[0];
  if (op->hasTrait<OpTrait::Elementwise>() ||
      op->hasTrait<kiln::trait::BroadcastingBinary>() ||
      isa<SelectOp, BroadcastOp>(op))
    return broadcasting(op, operands);
  return llvm::TypeSwitch<Operation *, Propagation>(op)
      .Case([&](MatmulOp m) { return matmul(m, operands); })
      .Case([&](ConvOp conv) {
        return alongInput(
            conv, operands, [](int64_t d) { return d != 0; },
            "mixes values along it (only the batch dim "
            "passes through a convolution)");
      })
      .Case([&](ConvTransposeOp conv) {
        return alongInput(
            conv, operands, [](int64_t d) { return d != 0; },
            "mixes values along it (only the batch dim "
            "passes through a convolution)");
      })
      .Case([&](PoolOp pool) {
        int64_t channels = pool.getDataFormat() == DataFormat::ChannelsFirst
                               ? 1
                               : rankOf(pool.getInput()) - 1;
        return alongInput(pool, operands,
                          [&](int64_t d) { return d != 0 && d != channels; });
      })
      .Case([&](GlobalPoolOp pool) {
        int64_t channels = pool.getDataFormat() == DataFormat::ChannelsFirst
                               ? 1
                               : rankOf(pool.getInput()) - 1;
        return alongInput(pool, operands,
                          [&](int64_t d) { return d != 0 && d != channels; });
      })
      .Case([&](PoolIndicesOp pool) {
        return alongInput(pool, operands, [](int64_t d) { return d > 1; });
      })
      .Case([&](BatchNormOp) {
        // Inference form: per-channel statistics that are parameters.
        return alongInput(op, operands, [](int64_t) { return false; });
      })
      .Case([&](InstanceNormOp) {
        return alongInput(op, operands, [](int64_t d) { return d > 1; });
      })
      .Case([&](LrnOp) {
        return alongInput(op, operands, [](int64_t d) { return d == 1; });
      })
      .Case([&](LayerNormOp norm) {
        int64_t start = normalizeAxis(norm.getAxisAttr().getInt(),
                                      rankOf(norm.getInput()));
        return alongInput(
            op, operands, [&](int64_t d) { return d >= start; },
            "normalises over it");
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto softmax) {
        int64_t axis = normalizeAxis(softmax.getAxisAttr().getInt(),
                                     rankOf(softmax.getInput()));
        return alongInput(op, operands, [&](int64_t d) { return d == axis; });
      })
      .Case([&](CumSumOp sum) {
        int64_t axis =
            normalizeAxis(sum.getAxisAttr().getInt(), rankOf(sum.getInput()));
        return alongInput(
            op, operands, [&](int64_t d) { return d == axis; },
            "accumulates along it");
      })
      .Case([&](DropoutOp) {
        return alongInput(op, operands, [](int64_t) { return false; });
      })
      .Case([&](ReduceOp reduce) {
        int64_t rank = rankOf(reduce.getInput());
        if (reduce.getAxes().empty())
          return fail("reduces over it");
        int64_t before = 0;
        for (int64_t axis : reduce.getAxes()) {
          int64_t a = normalizeAxis(axis, rank);
          if (a == first->dim)
            return fail("reduces over it");
          before += a < first->dim;
        }
        return same(op, Carried{reduce.getKeepdims() ? first->dim
                                                     : first->dim - before,
                                first->factor});
      })
      .Case<ArgMaxOp, ArgMinOp>([&](auto arg) {
        int64_t axis =
            normalizeAxis(arg.getAxisAttr().getInt(), rankOf(arg.getInput()));
        if (axis == first->dim)
          return fail("reduces over it");
        int64_t dim = !arg.getKeepdims() && first->dim > axis ? first->dim - 1
                                                              : first->dim;
        return same(op, Carried{dim, first->factor});
      })
      .Case([&](TopKOp topk) {
        int64_t axis = normalizeAxis(topk.getAxisAttr().getInt(),
                                     rankOf(topk.getInput()));
        if (axis == first->dim)
          return fail("selects along it");
        return same(op, first);
      })
      .Case([&](TransposeOp transpose) {
        for (auto [i, from] : llvm::enumerate(transpose.getPermutation()))
          if (from == first->dim)
            return same(op, Carried{static_cast<int64_t>(i), first->factor});
        return fail("drops it");
      })
      .Case([&](ReshapeOp r) { return reshape(r, *first); })
      .Case([&](ConcatOp concat) {
        int64_t axis = normalizeAxis(concat.getAxisAttr().getInt(),
                                     rankOf(concat.getResult()));
        std::optional<Carried> where;
        for (const std::optional<Carried> &c : operands) {
          if (!c)
            continue;
          if (c->dim == axis)
            return fail("concatenates along it");
          if (where && !(*where == *c))
            return fail("combines it from two different dims");
          where = c;
        }
        return same(op, where);
      })
      .Case([&](SliceOp slice) {
        int64_t d = first->dim;
        if (slice.getStarts()[d] != 0 || slice.getSteps()[d] != 1 ||
            slice.getLimits()[d] != shapeOf(slice.getInput())[d])
          return fail("slices along it");
        return same(op, first);
      })
      .Case([&](PadOp pad) {
        int64_t d = first->dim;
        if (pad.getLow()[d] != 0 || pad.getHigh()[d] != 0)
          return fail("pads along it");
        return same(op, first);
      })
      .Case([&](TileOp tile) {
        if (tile.getRepeats()[first->dim] != 1)
          return fail("tiles along it");
        return same(op, first);
      })
      .Case([&](ResizeOp resize) {
        if (resize.resamples(first->dim))
          return fail("resizes along it");
        return same(op, first);
      })
      .Case([&](SplitOp split) {
        int64_t axis = normalizeAxis(split.getAxisAttr().getInt(),
                                     rankOf(split.getInput()));
        if (axis == first->dim)
          return fail("splits along it");
        return same(op, first);
      })
      .Case([&](GatherOp gather) {
        int64_t rank = rankOf(gather.getInput());
        int64_t axis = normalizeAxis(gather.getAxisAttr().getInt(), rank);
        int64_t indicesRank = rankOf(gather.getIndices());
        std::optional<Carried> where;
        if (operands[0]) {
          if (operands[0]->dim == axis)
            return fail("gathers along it");
          int64_t d = operands[0]->dim;
          where = Carried{d < axis ? d : d + indicesRank - 1,
                          operands[0]->factor};
        }
        if (operands[1]) {
          Carried fromIndices{axis + operands[1]->dim, operands[1]->factor};
          if (where && !(*where == fromIndices))
            return fail("puts it on two dims");
          where = fromIndices;
        }
        return same(op, where);
      })
      .Case([&](GatherElementsOp gather) {
        int64_t axis = normalizeAxis(gather.getAxisAttr().getInt(),
                                     rankOf(gather.getInput()));
        std::optional<Carried> where;
        for (const std::optional<Carried> &c : operands) {
          if (!c)
            continue;
          if (c->dim == axis)
            return fail("gathers along it");
          if (where && !(*where == *c))
            return fail("combines it from two different dims");
          where = c;
        }
        return same(op, where);
      })
      .Default([&](Operation *) {
        return fail("is not known to keep slices along it independent");
      });
}


} // namespace kiln::symbols

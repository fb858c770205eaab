//===- RuntimeAxes.cpp - Axes inputs taken at run time --------------------===//
//
// RuntimeAxes.h: which axes sets a declared shape allows, and the on-device
// choice among them. The choice costs one computation per set (two for the
// reductions the ONNX node tests give without keepdims), which is why it is
// made only where the declared shape leaves more than one.
//
//===----------------------------------------------------------------------===//

#include "RuntimeAxes.h"

#include "Composer.h"

#include "llvm/ADT/bit.h"

using namespace mlir;

namespace kiln::onnx_frontend {

SmallVector<AxesChoice> axesForDeclaredShape(ArrayRef<int64_t> in,
                                             ArrayRef<int64_t> out,
                                             bool keepdims,
                                             bool identityOnOnes) {
  int64_t rank = static_cast<int64_t>(in.size());
  if (keepdims) {
    if (out.size() != in.size())
      return {};
    AxesChoice choice;
    for (int64_t d = 0; d < rank; ++d) {
      if (in[d] == 1 && out[d] == 1)
        choice.free.push_back(d);
      else if (out[d] == 1)
        choice.axes.push_back(d);
      else if (out[d] != in[d])
        return {};
    }
    if (choice.axes.empty() || (!choice.free.empty() && !identityOnOnes))
      return {};
    return {choice};
  }
  int64_t dropped = rank - static_cast<int64_t>(out.size());
  if (dropped <= 0 || rank > 16)
    return {};
  SmallVector<AxesChoice> choices;
  for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
    if (llvm::popcount(mask) != dropped)
      continue;
    SmallVector<int64_t> kept;
    for (int64_t d = 0; d < rank; ++d)
      if (!(mask & (1u << d)))
        kept.push_back(in[d]);
    if (ArrayRef<int64_t>(kept) != out)
      continue;
    AxesChoice choice;
    for (int64_t d = 0; d < rank; ++d)
      if (mask & (1u << d))
        choice.axes.push_back(d);
    choices.push_back(std::move(choice));
  }
  return choices;
}

FailureOr<Value> selectByRuntimeAxes(
    NodeImporter &n, size_t i, StringRef operand, ArrayRef<int64_t> inputShape,
    ArrayRef<AxesChoice> choices, bool noopWithEmptyAxes,
    function_ref<FailureOr<Value>(ArrayRef<int64_t>)> build) {
  assert(!choices.empty() && "selectByRuntimeAxes needs a choice");
  // The guard: the given set must be one of the choices' (free axes either
  // way); its `expected` are the choices' bitmasks, `free` one mask.
  SmallVector<int64_t> masks;
  int64_t freeMask = 0;
  for (const AxesChoice &choice : choices) {
    int64_t mask = 0;
    for (int64_t d : choice.axes)
      mask |= int64_t{1} << d;
    for (int64_t d : choice.free)
      freeMask |= int64_t{1} << d;
    masks.push_back(mask);
  }
  n.guardInput(i, operand, "axes-one-of", inputShape, masks,
               {{"free", {freeMask}},
                {"noop_with_empty_axes", {noopWithEmptyAxes ? 1 : 0}}});
  if (choices.size() == 1)
    return build(choices.front().axes);

  // On the device: the given axes counted from the start, then for each
  // choice but the last "every given axis is one of its axes" (the sets
  // have one size, so that is equality), and a chain of selects.
  Composer c(n);
  Value axes = n.input(i);
  Type t = cast<RankedTensorType>(axes.getType()).getElementType();
  int64_t rank = static_cast<int64_t>(inputShape.size());
  Value negative = c.make<LessOp>({axes, c.scalar(t, 0)});
  Value normalized = c.make<AddOp>(
      {axes, c.make<MulOp>({c.cast(negative, t), c.scalar(t, rank)})});
  bool scalar = cast<RankedTensorType>(axes.getType()).getRank() == 0;
  Value result;
  for (size_t k = choices.size(); k-- > 0;) {
    FailureOr<Value> built = build(choices[k].axes);
    if (failed(built))
      return failure();
    if (!result) {
      result = *built;
      continue;
    }
    Value member;
    for (int64_t d : choices[k].axes) {
      Value equal = c.make<EqualOp>({normalized, c.scalar(t, d)});
      member = member ? c.make<OrOp>({member, equal}) : equal;
    }
    Value all = member;
    if (!scalar)
      all = c.make<EqualOp>(
          {c.reduce(ReduceKind::Min, c.cast(member, t), {0}, false),
           c.scalar(t, 1)});
    result = c.make<SelectOp>({all, *built, result});
  }
  if (c.failed())
    return failure();
  return result;
}

} // namespace kiln::onnx_frontend

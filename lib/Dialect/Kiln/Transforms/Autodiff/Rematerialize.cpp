//===- Rematerialize.cpp - Recompute cheap activations in the backward ----===//
//
// An activation is a forward value the backward ops read; it stays in
// memory from the forward pass until its last backward use. A cheap one
// (an elementwise op, or pure data movement) whose operands stay alive for
// the backward anyway (arguments, weights, constants, kept activations, or
// values recomputed themselves) is instead recomputed right before its
// first backward use: the clone (marked `kiln.recomputed`, so CSE does not
// merge it back) feeds the backward ops, and the forward value dies with
// its last forward use. Fusion then usually folds the clone into the
// kernel that reads it. The counts go into the module attribute
// `kiln.remat_report` for kilnc --stats.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

using namespace mlir;

namespace kiln::autodiff {

namespace {
bool isCheap(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumRegions() != 0)
    return false;
  // Pow (a transcendental) and mod (a division and a floor) cost more than
  // keeping their result; xor was never in the cheap list and stays out, so
  // plans are unchanged.
  if (isa<PowOp, ModOp, XorOp>(op))
    return false;
  return isBroadcastingElementwise(op) ||
         isa<SelectOp, ReshapeOp, BroadcastOp, TransposeOp, NotOp, PhiloxOp,
             DropoutMaskOp>(op);
}

bool isFree(Value value) {
  Operation *def = value.getDefiningOp();
  return !def || isa<ConstantOp, ml_program::GlobalLoadConstOp>(def);
}

int64_t bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() *
         ((type.getElementTypeBitWidth() + 7) / 8);
}
} // namespace

void rematerialize(func::FuncOp func, ArrayRef<Operation *> forward,
                   RematStats &stats, bool recompute) {
  llvm::DenseSet<Operation *> isForward(forward.begin(), forward.end());
  // Backward users of a forward value, in block order.
  auto backwardUsers = [&](Value value) {
    SmallVector<Operation *> users;
    for (Operation *user : value.getUsers())
      if (!isForward.contains(user) && !isa<func::ReturnOp>(user))
        users.push_back(user);
    llvm::sort(users, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    return users;
  };
  llvm::DenseSet<Value> available; // in the backward without extra memory
  llvm::DenseMap<Value, Operation *> clones;
  // The clone of `value` (recursively its recomputed operands) placed
  // before `point`.
  std::function<void(Operation *, Operation *)> hoistBefore =
      [&](Operation *clone, Operation *point) {
        if (clone->isBeforeInBlock(point))
          return;
        clone->moveBefore(point);
        for (Value operand : clone->getOperands())
          if (Operation *def = operand.getDefiningOp())
            if (def->hasAttr(KilnDialect::RecomputedAttrHelper::getNameStr()))
              hoistBefore(def, clone);
      };
  for (Operation *op : forward) {
    if (op->getNumResults() != 1 || isFree(op->getResult(0)))
      continue;
    Value value = op->getResult(0);
    SmallVector<Operation *> users = backwardUsers(value);
    if (users.empty())
      continue;
    bool operandsAvailable = llvm::all_of(op->getOperands(), [&](Value v) {
      return isFree(v) || available.contains(v);
    });
    // Dropout masks are recomputed whatever the policy: a Philox draw is a
    // few dozen integer ops per element, keeping it 4 bytes per element.
    bool alwaysRecompute = isa<DropoutMaskOp, PhiloxOp>(op);
    if (!(recompute || alwaysRecompute) || !isCheap(op) || !operandsAvailable) {
      available.insert(value);
      ++stats.kept;
      stats.keptBytes += bytesOf(value);
      continue;
    }
    OpBuilder b(users.front());
    IRMapping mapping;
    for (Value operand : op->getOperands())
      if (auto it = clones.find(operand); it != clones.end())
        mapping.map(operand, it->second->getResult(0));
    Operation *clone = b.clone(*op, mapping);
    clone->setAttr(KilnDialect::RecomputedAttrHelper::getNameStr(),
                   b.getUnitAttr());
    for (Value operand : clone->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (def->hasAttr(KilnDialect::RecomputedAttrHelper::getNameStr()))
          hoistBefore(def, clone);
    for (Operation *user : users)
      user->replaceUsesOfWith(value, clone->getResult(0));
    clones[value] = clone;
    available.insert(value);
    ++stats.recomputed;
    stats.recomputedBytes += bytesOf(value);
  }
}

} // namespace kiln::autodiff

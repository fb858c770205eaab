//===- Optimizer.cpp - @train_grad + optimizer update = @train_step -------===//
//
// kiln-optimizer: turns the autodiff pipeline's @train_grad into @train_step
// (gradients, global-norm clipping, the learning-rate schedule and one
// optimizer update, all on the device) and @main into @eval. The trainable
// weights, their gradients and the optimizer state are flat tensors, so the
// update is one elementwise kernel over every weight. The rules are in the
// pass description (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>

namespace kiln {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

enum class Rule { SGD, Momentum, Nesterov, Adam, AdamW };

std::optional<Rule> parseRule(StringRef name) {
  return llvm::StringSwitch<std::optional<Rule>>(name)
      .Case("sgd", Rule::SGD)
      .Case("momentum", Rule::Momentum)
      .Case("nesterov", Rule::Nesterov)
      .Case("adam", Rule::Adam)
      .Case("adamw", Rule::AdamW)
      .Default(std::nullopt);
}

/// One trainable weight: its global and where it lives in the flat params.
struct Slot {
  ml_program::GlobalOp global;
  RankedTensorType type;
  int64_t offset = 0;
};

/// Builds f32 tensor arithmetic; scalars are tensor<f32> and broadcast.
struct Math {
  OpBuilder &b;
  Location loc;

  Value constant(double value) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return ConstantOp::create(
        b, loc, type,
        DenseElementsAttr::get(type, b.getF32FloatAttr(value).getValue()));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
  Value pow(Value x, Value y) { return PowOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value cos(Value x) { return CosOp::create(b, loc, x); }
  Value floor(Value x) { return FloorOp::create(b, loc, x); }
  Value lessEqual(Value x, Value y) { return LessEqualOp::create(b, loc, x, y); }
  Value greaterEqual(Value x, Value y) {
    return GreaterEqualOp::create(b, loc, x, y);
  }
  Value abs(Value x) { return AbsOp::create(b, loc, x); }
  Value select(Value c, Value x, Value y) {
    return SelectOp::create(b, loc, c, x, y);
  }
  /// The sum of every element of a 1-D tensor, as a scalar.
  Value sum(Value x) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return ReduceOp::create(b, loc, type,
                            ReduceKindAttr::get(b.getContext(), ReduceKind::Sum),
                            x, b.getDenseI64ArrayAttr({0}),
                            b.getBoolAttr(false));
  }
};

/// [{global = @g, offset = O}, ...]: where each global lives in a flat state.
ArrayAttr layoutAttr(Builder &attrs, ArrayRef<Slot> slots) {
  SmallVector<Attribute> layout;
  for (Slot slot : slots)
    layout.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr("global",
                            FlatSymbolRefAttr::get(slot.global.getSymNameAttr())),
         attrs.getNamedAttr("offset", attrs.getI64IntegerAttr(slot.offset))}));
  return attrs.getArrayAttr(layout);
}

/// Batch norms' running means and variances (@train_grad's
/// kiln.state_updates), laid end to end as the state bn.stats.
struct RunningStats {
  SmallVector<Slot> slots;
  llvm::DenseMap<StringAttr, Slot> bySymbol;
  int64_t total = 0;

  RankedTensorType type(MLIRContext *ctx) const {
    return RankedTensorType::get({total}, Float32Type::get(ctx));
  }
};

/// Fills `stats` from kiln.state_updates; returns an error message (empty
/// on success). A running statistic cannot also be a trainable weight.
std::string collectRunningStats(func::FuncOp grad,
                                const llvm::DenseMap<StringAttr, Slot> &weights,
                                RunningStats &stats) {
  auto updates = grad->getAttrOfType<ArrayAttr>(
      KilnDialect::StateUpdatesAttrHelper::getNameStr());
  if (!updates)
    return "";
  auto module = grad->getParentOfType<ModuleOp>();
  for (Attribute entry : updates) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(entry);
    auto global =
        ref ? module.lookupSymbol<ml_program::GlobalOp>(ref.getAttr()) : nullptr;
    if (!global)
      return "kiln.state_updates entry " +
             (ref ? "@" + ref.getValue().str() : std::string("(not a symbol)")) +
             " is not an ml_program.global";
    auto type = dyn_cast<RankedTensorType>(global.getType());
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return "running statistic @" + global.getSymName().str() +
             " is not a static f32 tensor";
    if (weights.count(global.getSymNameAttr()) ||
        stats.bySymbol.count(global.getSymNameAttr()))
      return "global @" + global.getSymName().str() +
             " appears twice in kiln.gradients and kiln.state_updates";
    Slot slot{global, type, stats.total};
    stats.total += type.getNumElements();
    stats.slots.push_back(slot);
    stats.bySymbol[global.getSymNameAttr()] = slot;
  }
  return "";
}

/// bn.stats after the step: @train_grad's updates (operands `first`... of
/// its return), flattened and concatenated in slot order.
Value concatRunningStats(OpBuilder &b, Location loc, func::ReturnOp ret,
                         unsigned first, const RunningStats &stats) {
  SmallVector<Value> flat;
  for (auto [i, slot] : llvm::enumerate(stats.slots)) {
    Value v = ret.getOperand(first + i);
    if (slot.type.getRank() != 1)
      v = ReshapeOp::create(
          b, loc,
          RankedTensorType::get({slot.type.getNumElements()},
                                slot.type.getElementType()),
          v);
    flat.push_back(v);
  }
  if (flat.size() == 1)
    return flat.front();
  return ConcatOp::create(b, loc, stats.type(b.getContext()), flat,
                          b.getI64IntegerAttr(0));
}

struct OptimizerPass : kiln::impl::OptimizerPassBase<OptimizerPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  LogicalResult checkOptions(Operation *at);
  /// Replaces each load of a trainable global in `func` with its view of
  /// `params` (a slice and a reshape).
  void replaceLoads(func::FuncOp func, Value params,
                    const llvm::DenseMap<StringAttr, Slot> &slots);
  /// The learning rate at step t (a scalar tensor, t = counter + 1).
  Value learningRate(Math &m, Value t);
  /// Loss scaling: whether it is on, and its state ("loss_scale", then
  /// "loss_scale.good_steps" when dynamic).
  bool scalesLoss() const { return lossScale != "none"; }
  void addLossScaleState(
      SmallVectorImpl<std::pair<std::string, RankedTensorType>> &state,
      RankedTensorType scalar) const;
  /// The next loss scale and good-step count after a step whose gradients
  /// were all finite (`finite`, a tensor<i1>) or not.
  SmallVector<Value> nextLossScaleState(Math &m, Value finite, Value scale,
                                        Value goodSteps);
};

LogicalResult OptimizerPass::checkOptions(Operation *at) {
  if (!parseRule(optimizer))
    return at->emitError() << "kiln-optimizer: unknown optimizer '"
                           << optimizer
                           << "' (sgd, momentum, nesterov, adam, adamw)";
  if (!(lr > 0))
    return at->emitError() << "kiln-optimizer: the learning rate must be "
                              "positive (lr="
                           << lr << ")";
  if (!llvm::is_contained({"constant", "step", "cosine"}, schedule.getValue()))
    return at->emitError() << "kiln-optimizer: unknown schedule '" << schedule
                           << "' (constant, step, cosine)";
  if (schedule == "step" && stepSize <= 0)
    return at->emitError()
           << "kiln-optimizer: the step schedule needs step-size > 0";
  if (schedule == "cosine" && totalSteps <= warmupSteps)
    return at->emitError() << "kiln-optimizer: the cosine schedule needs "
                              "total-steps > warmup-steps (total-steps="
                           << static_cast<int64_t>(totalSteps) << ", warmup-steps="
                           << static_cast<int64_t>(warmupSteps)
                           << ")";
  if (shardOptimizer < 0)
    return at->emitError() << "kiln-optimizer: shard-optimizer must not be "
                              "negative (shard-optimizer="
                           << static_cast<int64_t>(shardOptimizer) << ")";
  if (shardOptimizer > 0 && !dataParallel)
    return at->emitError() << "kiln-optimizer: shard-optimizer needs "
                              "data-parallel=true";
  if (bucketElements < 0)
    return at->emitError() << "kiln-optimizer: bucket-elements must not be "
                              "negative (bucket-elements="
                           << static_cast<int64_t>(bucketElements) << ")";
  if (bucketElements > 0 && !dataParallel)
    return at->emitError() << "kiln-optimizer: bucket-elements needs "
                              "data-parallel=true";
  if (warmupSteps < 0 || gradClip < 0 || weightDecay < 0)
    return at->emitError() << "kiln-optimizer: warmup-steps, grad-clip and "
                              "weight-decay must not be negative";
  if (!llvm::is_contained({"none", "dynamic", "static"}, lossScale.getValue()))
    return at->emitError() << "kiln-optimizer: unknown loss-scale '"
                           << lossScale << "' (none, dynamic, static)";
  if (scalesLoss() && !(lossScaleInit > 0 && std::isfinite(lossScaleInit)))
    return at->emitError() << "kiln-optimizer: loss-scale-init must be a "
                              "positive finite number (loss-scale-init="
                           << lossScaleInit << ")";
  if (lossScale == "dynamic" &&
      (lossScaleGrowthInterval < 1 || lossScaleGrowthInterval > (1 << 24)))
    return at->emitError()
           << "kiln-optimizer: loss-scale-growth-interval must be in [1, "
              "2^24] (loss-scale-growth-interval="
           << static_cast<int64_t>(lossScaleGrowthInterval) << ")";
  return success();
}

void OptimizerPass::replaceLoads(func::FuncOp func, Value params,
                                 const llvm::DenseMap<StringAttr, Slot> &slots) {
  SmallVector<ml_program::GlobalLoadConstOp> loads;
  func.walk([&](ml_program::GlobalLoadConstOp load) { loads.push_back(load); });
  for (ml_program::GlobalLoadConstOp load : loads) {
    auto it = slots.find(load.getGlobalAttr().getLeafReference());
    if (it == slots.end())
      continue; // Frozen: stays a constant weight.
    const Slot &slot = it->second;
    OpBuilder b(load);
    int64_t count = slot.type.getNumElements();
    auto flat = RankedTensorType::get({count}, slot.type.getElementType());
    Value view = SliceOp::create(b, load.getLoc(), flat, params,
                                 b.getDenseI64ArrayAttr({slot.offset}),
                                 b.getDenseI64ArrayAttr({slot.offset + count}),
                                 b.getDenseI64ArrayAttr({1}));
    if (slot.type.getRank() != 1)
      view = ReshapeOp::create(b, load.getLoc(), slot.type, view);
    load.getResult().replaceAllUsesWith(view);
    load.erase();
  }
}

Value OptimizerPass::learningRate(Math &m, Value t) {
  Value base = m.constant(lr);
  Value rate = base;
  if (schedule == "step") {
    Value epochs = m.floor(
        m.div(m.sub(t, m.constant(1)), m.constant(double(stepSize))));
    rate = m.mul(base, m.pow(m.constant(gamma), epochs));
  } else if (schedule == "cosine") {
    double span = double(totalSteps - warmupSteps);
    Value progress = m.min(
        m.div(m.sub(t, m.constant(double(warmupSteps))), m.constant(span)),
        m.constant(1));
    Value wave = m.add(m.constant(1),
                       m.cos(m.mul(progress, m.constant(M_PI))));
    rate = m.add(m.constant(minLr),
                 m.mul(m.constant((lr - minLr) / 2), wave));
  }
  if (warmupSteps > 0) {
    Value warm = m.mul(base, m.div(t, m.constant(double(warmupSteps))));
    rate = m.select(m.lessEqual(t, m.constant(double(warmupSteps))), warm,
                    rate);
  }
  return rate;
}

void OptimizerPass::addLossScaleState(
    SmallVectorImpl<std::pair<std::string, RankedTensorType>> &state,
    RankedTensorType scalar) const {
  if (!scalesLoss())
    return;
  state.push_back({"loss_scale", scalar});
  if (lossScale == "dynamic")
    state.push_back({"loss_scale.good_steps", scalar});
}

SmallVector<Value> OptimizerPass::nextLossScaleState(Math &m, Value finite,
                                                     Value scale,
                                                     Value goodSteps) {
  if (lossScale != "dynamic")
    return {scale};
  // torch.cuda.amp.GradScaler: halve on overflow and restart the count;
  // double after growth-interval finite steps in a row.
  Value count = m.add(goodSteps, m.constant(1));
  Value grow =
      m.greaterEqual(count, m.constant(double(lossScaleGrowthInterval)));
  Value finiteScale = m.select(grow, m.mul(scale, m.constant(2)), scale);
  Value finiteCount = m.select(grow, m.constant(0), count);
  return {m.select(finite, finiteScale, m.mul(scale, m.constant(0.5))),
          m.select(finite, finiteCount, m.constant(0))};
}

/// Feeds kiln-autodiff's dropout arguments from the state: `rng.key`
/// becomes the state of that name (first value from `seed`) and
/// `rng.counter` is `[0, 0, opt.step, 0]`. Nothing when `step` has neither.
static void bindRngState(func::FuncOp step, uint64_t seed) {
  std::optional<unsigned> key, counter, optStep;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(
        i, KilnDialect::NameAttrHelper::getNameStr());
    if (!name)
      continue;
    if (name.getValue() == "rng.key")
      key = i;
    else if (name.getValue() == "rng.counter")
      counter = i;
    else if (name.getValue() == "kiln.state.opt.step")
      optStep = i;
  }
  if (!key || !counter || !optStep)
    return;
  MLIRContext *ctx = step.getContext();
  Builder attrs(ctx);
  auto i32 = IntegerType::get(ctx, 32);
  auto keyType = RankedTensorType::get({2}, i32);
  step.setArgAttr(*key, KilnDialect::StateAttrHelper::getNameStr(),
                  attrs.getStringAttr("rng.key"));
  step.setArgAttr(*key, KilnDialect::NameAttrHelper::getNameStr(),
                  attrs.getStringAttr("kiln.state.rng.key"));
  step.setArgAttr(*key, KilnDialect::InitialAttrHelper::getNameStr(),
                  DenseElementsAttr::get(
                      keyType, ArrayRef<APInt>{APInt(32, seed & 0xffffffffu),
                                               APInt(32, seed >> 32)}));
  OpBuilder b = OpBuilder::atBlockBegin(&step.front());
  Location loc = step.getLoc();
  auto zeros = [&](int64_t n) {
    auto type = RankedTensorType::get({n}, i32);
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(type, APInt(32, 0)))
        .getResult();
  };
  Value stepInt = CastOp::create(b, loc, RankedTensorType::get({}, i32),
                                 step.getArgument(*optStep));
  Value stepWord =
      ReshapeOp::create(b, loc, RankedTensorType::get({1}, i32), stepInt);
  Value value =
      ConcatOp::create(b, loc, RankedTensorType::get({4}, i32),
                       ValueRange{zeros(2), stepWord, zeros(1)},
                       b.getI64IntegerAttr(0))
          .getResult();
  step.getArgument(*counter).replaceAllUsesWith(value);
  (void)step.eraseArgument(*counter);
}

/// Erases the ops of `func`'s body whose results nobody uses, then the
/// unused arguments for which `erasable` holds.
void pruneFunction(func::FuncOp func,
                   llvm::function_ref<bool(unsigned)> erasable) {
  Block &body = func.front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  llvm::BitVector unused(func.getNumArguments());
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgument(i).use_empty() && erasable(i))
      unused.set(i);
  (void)func.eraseArguments(unused);
}

LogicalResult shardUpdate(func::FuncOp update, RankedTensorType full,
                          int64_t shard, Value squaredNorm);

/// One gradient bucket of a data-parallel @train_step: the flat gradients
/// [offset, offset + count), which @train_step writes as state `state`.
struct GradientBucket {
  std::string state;
  int64_t offset = 0;
  int64_t count = 0;
};

/// The flat gradients `pieces` (one per weight, in offset order) grouped
/// as PyTorch DDP groups them: from the last weight to the first (the
/// backward pass produces the last layer's gradients first), contiguous
/// runs of at most `bucketElements` elements, a larger weight alone. Each
/// group is a range [first, end) of `pieces`; 0 elements: one group.
SmallVector<std::pair<size_t, size_t>> bucketPieces(ArrayRef<Value> pieces,
                                                    int64_t bucketElements) {
  if (bucketElements <= 0)
    return {{0, pieces.size()}};
  SmallVector<std::pair<size_t, size_t>> groups;
  int64_t count = 0;
  for (size_t i = pieces.size(); i-- > 0;) {
    int64_t n = cast<RankedTensorType>(pieces[i].getType()).getNumElements();
    if (!groups.empty() && count + n <= bucketElements) {
      groups.back().first = i;
      count += n;
      continue;
    }
    groups.push_back({i, i + 1});
    count = n;
  }
  return groups;
}

/// kiln-optimizer data-parallel=true: splits the finished @train_step at
/// the flat gradients `flatGrad`. @train_step keeps the forward and
/// backward passes and returns the loss, the batch norms' statistics and
/// the gradients as state `grad`; a new @train_update reads state `grad`
/// and holds the rest (unscaling, clipping, the rule, the loss scale, the
/// skipped flag). The runtime averages `grad` across the ranks between
/// the two (docs/runtime.md "Data-parallel training"). With `shards` > 0
/// (ZeRO stage 1) `grad` is padded to a multiple of the shards and the
/// update runs on one shard (shardUpdate).
///
/// Without ZeRO, the gradients are grouped into buckets of at most
/// `bucketElements` (bucketPieces). With more than one bucket each is a
/// state of its own, `grad.0` (the last weights) to `grad.K-1`, assembled
/// right after the last of its weights' gradients is computed, so its
/// all-reduce can start while the backward pass goes on; @train_update
/// reads them all and concatenates them again. `buckets` receives them.
LogicalResult splitUpdate(func::FuncOp step, Value flatGrad, Value squaredNorm,
                          int64_t shards, int64_t bucketElements,
                          SmallVectorImpl<GradientBucket> &buckets) {
  MLIRContext *ctx = step.getContext();
  Builder attrs(ctx);
  auto stateOf = [&](unsigned result) -> StringRef {
    auto state = step.getResultAttrOfType<StringAttr>(
        result, KilnDialect::StateAttrHelper::getNameStr());
    return state ? state.getValue() : StringRef();
  };
  // The loss (result 0) and the batch-norm statistics stay with the
  // forward pass; every other result is the optimizer's.
  auto stepKeeps = [&](unsigned result) {
    return result == 0 || stateOf(result) == "bn.stats";
  };
  auto isState = [](func::FuncOp func, unsigned arg) {
    return func.getArgAttr(arg, KilnDialect::StateAttrHelper::getNameStr()) !=
           nullptr;
  };

  IRMapping mapping;
  auto update = cast<func::FuncOp>(step->clone(mapping));
  update.setSymName("train_update");
  OpBuilder builder(step);
  builder.setInsertionPointAfter(step);
  builder.insert(update);

  auto rewriteResults = [&](func::FuncOp func, bool keepForStep,
                            ArrayRef<std::pair<Value, std::string>> extra) {
    auto ret = cast<func::ReturnOp>(func.front().getTerminator());
    SmallVector<Value> operands;
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (stepKeeps(i) != keepForStep)
        continue;
      operands.push_back(ret.getOperand(i));
      resultAttrs.push_back(step.getResultAttrDict(i));
    }
    for (const auto &[value, state] : extra) {
      operands.push_back(value);
      resultAttrs.push_back(attrs.getDictionaryAttr(
          {attrs.getNamedAttr(KilnDialect::StateAttrHelper::getNameStr(),
                              attrs.getStringAttr(state)),
           attrs.getNamedAttr(
               KilnDialect::NameAttrHelper::getNameStr(),
               attrs.getStringAttr("kiln.state." + state + ".next"))}));
    }
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), operands);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : operands)
      types.push_back(v.getType());
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(), types));
    func.setAllResultAttrs(resultAttrs);
  };

  // The buckets (one, `grad`, with ZeRO or when everything fits in one).
  SmallVector<Value> pieces;
  if (auto concat = flatGrad.getDefiningOp<ConcatOp>())
    llvm::append_range(pieces, concat.getInputs());
  else
    pieces.push_back(flatGrad);
  SmallVector<std::pair<size_t, size_t>> groups =
      bucketPieces(pieces, shards > 0 ? 0 : bucketElements);
  if (groups.size() == 1)
    groups = {{0, pieces.size()}};
  SmallVector<int64_t> pieceOffsets = {0};
  for (Value piece : pieces)
    pieceOffsets.push_back(
        pieceOffsets.back() +
        cast<RankedTensorType>(piece.getType()).getNumElements());
  for (auto [k, group] : llvm::enumerate(groups))
    buckets.push_back(
        {groups.size() == 1 ? std::string("grad") : "grad." + std::to_string(k),
         pieceOffsets[group.first],
         pieceOffsets[group.second] - pieceOffsets[group.first]});

  // @train_update: the clone, reading the gradients from the buckets'
  // states (in offset order: the last bucket first).
  Block &body = update.front();
  SmallVector<Value> bucketArgs;
  for (const GradientBucket &bucket : buckets)
    bucketArgs.push_back(body.addArgument(
        RankedTensorType::get(
            {bucket.count},
            cast<RankedTensorType>(flatGrad.getType()).getElementType()),
        update.getLoc()));
  update.setType(FunctionType::get(ctx, body.getArgumentTypes(),
                                   update.getResultTypes()));
  for (auto [k, arg] : llvm::enumerate(bucketArgs)) {
    unsigned index = cast<BlockArgument>(arg).getArgNumber();
    update.setArgAttr(index, KilnDialect::StateAttrHelper::getNameStr(),
                      attrs.getStringAttr(buckets[k].state));
    update.setArgAttr(index, KilnDialect::NameAttrHelper::getNameStr(),
                      attrs.getStringAttr("kiln.state." + buckets[k].state));
  }
  Value updateGrad = bucketArgs.front();
  if (groups.size() > 1) {
    OpBuilder front = OpBuilder::atBlockBegin(&body);
    updateGrad = ConcatOp::create(front, update.getLoc(), flatGrad.getType(),
                                  llvm::to_vector(llvm::reverse(bucketArgs)),
                                  front.getI64IntegerAttr(0));
  }
  mapping.lookup(flatGrad).replaceAllUsesWith(updateGrad);
  rewriteResults(update, /*keepForStep=*/false, {});
  Value updateNorm = squaredNorm ? mapping.lookup(squaredNorm) : Value();
  pruneFunction(update, [](unsigned) { return true; });

  auto flatType = cast<RankedTensorType>(flatGrad.getType());
  int64_t total = flatType.getNumElements();
  int64_t shard = shards > 0 ? (total + shards - 1) / shards : total;
  Value stepGrad = flatGrad;
  if (shards > 0 && shard * shards > total) {
    // Zeros up to N x S elements, so that every rank's shard is S long.
    OpBuilder b(step.front().getTerminator());
    auto padType = RankedTensorType::get({shard * shards - total},
                                         flatType.getElementType());
    Value zeros = ConstantOp::create(
        b, step.getLoc(), padType,
        DenseElementsAttr::get(padType, b.getF32FloatAttr(0).getValue()));
    stepGrad = ConcatOp::create(
        b, step.getLoc(),
        RankedTensorType::get({shard * shards}, flatType.getElementType()),
        ValueRange{flatGrad, zeros}, b.getI64IntegerAttr(0));
  }
  SmallVector<std::pair<Value, std::string>> stepBuckets;
  if (groups.size() == 1) {
    stepBuckets.push_back({stepGrad, buckets.front().state});
  } else {
    // Each bucket right after the last of its gradients, so that nothing
    // after it in @train_step has to run before its all-reduce can.
    for (auto [k, group] : llvm::enumerate(groups)) {
      ArrayRef<Value> members = ArrayRef<Value>(pieces).slice(
          group.first, group.second - group.first);
      // The flattening reshapes kiln-optimizer put at the end first go
      // right after the gradients they flatten.
      for (Value member : members)
        if (auto reshape = member.getDefiningOp<ReshapeOp>()) {
          if (Operation *def = reshape.getInput().getDefiningOp())
            reshape->moveAfter(def);
          else
            reshape->moveBefore(&step.front().front());
        }
      Value value = members.front();
      if (members.size() > 1) {
        Operation *last = nullptr;
        for (Value member : members)
          if (Operation *def = member.getDefiningOp())
            if (!last || last->isBeforeInBlock(def))
              last = def;
        OpBuilder b(ctx);
        if (last)
          b.setInsertionPointAfter(last);
        else
          b.setInsertionPointToStart(&step.front());
        value =
            ConcatOp::create(b, step.getLoc(),
                             RankedTensorType::get({buckets[k].count},
                                                   flatType.getElementType()),
                             members, b.getI64IntegerAttr(0));
      }
      stepBuckets.push_back({value, buckets[k].state});
    }
  }
  rewriteResults(step, /*keepForStep=*/true, stepBuckets);
  pruneFunction(step, [&](unsigned i) { return isState(step, i); });
  if (shards == 0)
    return success();
  return shardUpdate(update, flatType, shard, updateNorm);
}

/// ZeRO stage 1: @train_update (from splitUpdate) on one shard of `shard`
/// elements. Its ops are elementwise over the flat `full` tensors, plus
/// the sum of squares `squaredNorm` (null without clipping and loss
/// scaling), so retyping every `full` value to the shard's type gives the
/// same update on the shard. The states it reads and writes whole become
/// `params.shard` and `grad.shard`; `opt.m`/`opt.v` keep their names and
/// shrink. The squared norm must cover every rank's shard: it moves to a
/// new @train_grad_norm (the shard's part, state `grad.sqnorm`) and
/// @train_update reads the ranks' sum from state `grad.sqnorm`.
LogicalResult shardUpdate(func::FuncOp update, RankedTensorType full,
                          int64_t shard, Value squaredNorm) {
  MLIRContext *ctx = update.getContext();
  Builder attrs(ctx);
  auto part = RankedTensorType::get({shard}, full.getElementType());
  auto scalar = RankedTensorType::get({}, full.getElementType());
  Block &body = update.front();
  for (BlockArgument arg : body.getArguments())
    if (arg.getType() == full)
      arg.setType(part);
  update.walk([&](Operation *op) {
    for (OpResult result : op->getResults())
      if (result.getType() == full)
        result.setType(part);
  });
  auto stateAttrs = [&](StringRef state, bool next) {
    return attrs.getDictionaryAttr(
        {attrs.getNamedAttr(KilnDialect::StateAttrHelper::getNameStr(),
                            attrs.getStringAttr(state)),
         attrs.getNamedAttr(KilnDialect::NameAttrHelper::getNameStr(),
                            attrs.getStringAttr("kiln.state." + state +
                                                (next ? ".next" : "")))});
  };
  auto renameState = [&](DictionaryAttr dict, bool next) -> DictionaryAttr {
    auto state =
        dict
            ? dict.getAs<StringAttr>(KilnDialect::StateAttrHelper::getNameStr())
            : StringAttr();
    if (!state || (state.getValue() != "params" && state.getValue() != "grad"))
      return dict;
    return stateAttrs((state.getValue() + ".shard").str(), next);
  };
  auto retypeFunction = [&](func::FuncOp func) {
    SmallVector<Type> results;
    for (Value v : func.front().getTerminator()->getOperands())
      results.push_back(v.getType());
    func.setType(
        FunctionType::get(ctx, func.front().getArgumentTypes(), results));
  };
  for (unsigned i = 0; i < update.getNumArguments(); ++i)
    if (DictionaryAttr dict = update.getArgAttrDict(i))
      update.setArgAttrs(i, renameState(dict, false));
  for (unsigned i = 0; i < update.getNumResults(); ++i)
    if (DictionaryAttr dict = update.getResultAttrDict(i))
      update.setResultAttrs(i, renameState(dict, true));
  retypeFunction(update);

  if (squaredNorm) {
    // @train_grad_norm: a clone returning only the shard's sum of squares.
    IRMapping mapping;
    auto norm = cast<func::FuncOp>(update->clone(mapping));
    norm.setSymName("train_grad_norm");
    OpBuilder builder(update);
    builder.setInsertionPoint(update);
    builder.insert(norm);
    Operation *ret = norm.front().getTerminator();
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret->getLoc(),
                           ValueRange{mapping.lookup(squaredNorm)});
    ret->erase();
    retypeFunction(norm);
    SmallVector<DictionaryAttr> normResults = {stateAttrs("grad.sqnorm", true)};
    norm.setAllResultAttrs(normResults);
    pruneFunction(norm, [](unsigned) { return true; });

    // @train_update reads the sum over the ranks instead.
    Value sum = body.addArgument(scalar, update.getLoc());
    squaredNorm.replaceAllUsesWith(sum);
    retypeFunction(update);
    update.setArgAttrs(body.getNumArguments() - 1,
                       stateAttrs("grad.sqnorm", false));
    pruneFunction(update, [](unsigned) { return true; });
    if (failed(mlir::verify(norm)))
      return failure();
  }
  return mlir::verify(update);
}

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto fail = [&](Operation *at, const Twine &message) {
    at->emitError() << "kiln-optimizer: " << message;
    signalPassFailure();
  };
  auto grad = module.lookupSymbol<func::FuncOp>("train_grad");
  if (!grad)
    return fail(module, "the module has no @train_grad (run the autodiff "
                        "pipeline first: kilnc --train)");
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return fail(module, "the module has no forward @main");
  if (failed(checkOptions(grad)))
    return signalPassFailure();
  if (grad.getBlocks().size() != 1 || main.getBlocks().size() != 1)
    return fail(grad, "@train_grad and @main must have one block each");
  Rule rule = *parseRule(optimizer);

  auto gradients = grad->getAttrOfType<ArrayAttr>(
      KilnDialect::GradientsAttrHelper::getNameStr());
  if (!gradients)
    return fail(grad, "@train_grad has no kiln.gradients attribute");
  if (gradients.empty())
    return fail(grad, "kiln.gradients is empty: there is nothing to train "
                      "(is every weight frozen?)");
  SmallVector<Slot> slots;
  llvm::DenseMap<StringAttr, Slot> bySymbol;
  int64_t total = 0;
  for (Attribute entry : gradients) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(entry);
    auto global =
        ref ? module.lookupSymbol<ml_program::GlobalOp>(ref.getAttr()) : nullptr;
    if (!global)
      return fail(grad, "kiln.gradients entry " +
                            (ref ? "@" + ref.getValue().str()
                                 : std::string("(not a symbol)")) +
                            " is not an ml_program.global");
    auto type = dyn_cast<RankedTensorType>(global.getType());
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return fail(grad, "trainable global @" + global.getSymName().str() +
                            " is not a static f32 tensor");
    if (bySymbol.count(global.getSymNameAttr()))
      return fail(grad, "global @" + global.getSymName().str() +
                            " appears twice in kiln.gradients");
    Slot slot{global, type, total};
    total += type.getNumElements();
    slots.push_back(slot);
    bySymbol[global.getSymNameAttr()] = slot;
  }

  // kiln-autodiff returns batch norms' running statistics after the
  // gradients: they become the flat state bn.stats.
  RunningStats stats;
  if (std::string error = collectRunningStats(grad, bySymbol, stats);
      !error.empty())
    return fail(grad, error);

  auto gradReturn = cast<func::ReturnOp>(grad.front().getTerminator());
  auto scalar = RankedTensorType::get({}, Float32Type::get(&getContext()));
  if (gradReturn.getNumOperands() != slots.size() + 1 + stats.slots.size() ||
      gradReturn.getOperand(0).getType() != scalar)
    return fail(grad, "@train_grad must return a tensor<f32> loss, one "
                      "gradient per kiln.gradients entry (" +
                          std::to_string(slots.size()) +
                          ") and one update per kiln.state_updates entry (" +
                          std::to_string(stats.slots.size()) + ")");
  for (auto [i, slot] : llvm::enumerate(slots))
    if (gradReturn.getOperand(i + 1).getType() != slot.type)
      return fail(grad, "gradient " + std::to_string(i) + " does not have @" +
                            slot.global.getSymName().str() + "'s type");
  for (auto [i, slot] : llvm::enumerate(stats.slots))
    if (gradReturn.getOperand(slots.size() + 1 + i).getType() != slot.type)
      return fail(grad, "state update " + std::to_string(i) +
                            " does not have @" +
                            slot.global.getSymName().str() + "'s type");

  MLIRContext *ctx = &getContext();
  Builder attrs(ctx);
  auto flatType = RankedTensorType::get({total}, Float32Type::get(ctx));

  // The state, in argument order: params, then the optimizer's.
  SmallVector<std::pair<std::string, RankedTensorType>> state = {
      {"params", flatType}};
  if (rule != Rule::SGD)
    state.push_back({"opt.m", flatType});
  if (rule == Rule::Adam || rule == Rule::AdamW)
    state.push_back({"opt.v", flatType});
  state.push_back({"opt.step", scalar});
  if (!stats.slots.empty())
    state.push_back({"bn.stats", stats.type(ctx)});

  // Loss scaling scales the backward's seed (kiln-autodiff
  // loss-seed-argument): the argument is replaced by the loss scale, or 1.
  std::optional<unsigned> seedArg;
  for (unsigned i = 0; i < grad.getNumArguments(); ++i)
    if (grad.getArgAttr(i, KilnDialect::LossSeedAttrHelper::getNameStr()))
      seedArg = i;
  if (scalesLoss() && !seedArg)
    return fail(grad, "loss-scale=" + lossScale + " needs a @train_grad whose "
                      "backward is seeded from an argument (kiln.loss_seed: "
                      "kiln-autodiff loss-seed-argument)");
  if (seedArg && (*seedArg + 1 != grad.getNumArguments() ||
                  grad.getArgument(*seedArg).getType() != scalar))
    return fail(grad, "the kiln.loss_seed argument must be @train_grad's "
                      "last, a tensor<f32>");
  addLossScaleState(state, scalar);

  // @train_step: @train_grad's body, with the state appended.
  Block &body = grad.front();
  Value seedValue = seedArg ? grad.getArgument(*seedArg) : Value();
  unsigned firstState = body.getNumArguments() - (seedArg ? 1 : 0);
  SmallVector<Value> stateArgs;
  for (auto &[name, type] : state)
    stateArgs.push_back(body.addArgument(type, grad.getLoc()));
  replaceLoads(grad, stateArgs[0], bySymbol);
  auto stateArg = [&](StringRef name) -> Value {
    for (auto [i, entry] : llvm::enumerate(state))
      if (entry.first == name)
        return stateArgs[i];
    return {};
  };
  Value scaleArg = stateArg("loss_scale");
  if (seedValue) {
    Value seed = scaleArg;
    if (!seed) {
      OpBuilder front = OpBuilder::atBlockBegin(&body);
      seed = Math{front, grad.getLoc()}.constant(1);
    }
    seedValue.replaceAllUsesWith(seed);
    if (failed(grad.eraseArgument(*seedArg)))
      return fail(grad, "cannot remove the kiln.loss_seed argument");
  }
  if (!stats.slots.empty())
    replaceLoads(grad, stateArg("bn.stats"), stats.bySymbol);

  OpBuilder b(gradReturn);
  Math m{b, grad.getLoc()};
  Value loss = gradReturn.getOperand(0);
  SmallVector<Value> flatGrads;
  for (auto [i, slot] : llvm::enumerate(slots)) {
    Value g = gradReturn.getOperand(i + 1);
    if (slot.type.getRank() != 1)
      g = ReshapeOp::create(
          b, m.loc,
          RankedTensorType::get({slot.type.getNumElements()},
                                Float32Type::get(ctx)),
          g);
    flatGrads.push_back(g);
  }
  Value g = flatGrads.size() == 1
                ? flatGrads.front()
                : ConcatOp::create(b, m.loc, flatType, flatGrads,
                                   b.getI64IntegerAttr(0))
                      .getResult();
  Value flatGradients = g;
  // With loss scaling the gradients are unscaled (1/scale is exact: the
  // scale is a power of two unless static:S says otherwise), and one
  // reduction, the squared global norm that clipping needs anyway, decides
  // whether they are all finite: an inf or NaN makes it inf or NaN.
  Value finite;
  Value squaredNorm;
  if (scaleArg) {
    g = m.mul(g, m.div(m.constant(1), scaleArg));
    squaredNorm = m.sum(m.mul(g, g));
    finite = m.lessEqual(m.abs(squaredNorm),
                         m.constant(std::numeric_limits<float>::max()));
  }
  if (gradClip > 0) {
    if (!squaredNorm)
      squaredNorm = m.sum(m.mul(g, g));
    Value norm = m.sqrt(squaredNorm);
    Value factor = m.min(
        m.constant(1), m.div(m.constant(gradClip), m.add(norm, m.constant(1e-6))));
    g = m.mul(g, factor);
  }
  Value w = stateArgs[0];
  Value t = m.add(stateArg("opt.step"), m.constant(1));
  Value rate = learningRate(m, t);
  Value decay = m.constant(weightDecay);
  SmallVector<Value> next;
  switch (rule) {
  case Rule::SGD: {
    Value step = weightDecay > 0 ? m.add(g, m.mul(decay, w)) : g;
    next = {m.sub(w, m.mul(rate, step))};
    break;
  }
  case Rule::Momentum:
  case Rule::Nesterov: {
    Value step = weightDecay > 0 ? m.add(g, m.mul(decay, w)) : g;
    Value mu = m.constant(momentum);
    Value buf = m.add(m.mul(mu, stateArgs[1]), step);
    Value direction = rule == Rule::Nesterov ? m.add(step, m.mul(mu, buf)) : buf;
    next = {m.sub(w, m.mul(rate, direction)), buf};
    break;
  }
  case Rule::Adam:
  case Rule::AdamW: {
    Value step = g;
    Value weights = w;
    if (rule == Rule::Adam && weightDecay > 0)
      step = m.add(g, m.mul(decay, w));
    if (rule == Rule::AdamW && weightDecay > 0)
      weights = m.mul(w, m.sub(m.constant(1), m.mul(rate, decay)));
    Value b1 = m.constant(beta1), b2 = m.constant(beta2);
    Value mNext = m.add(m.mul(b1, stateArgs[1]),
                        m.mul(m.constant(1 - beta1), step));
    Value vNext = m.add(m.mul(b2, stateArgs[2]),
                        m.mul(m.constant(1 - beta2), m.mul(step, step)));
    Value c1 = m.sub(m.constant(1), m.pow(b1, t));
    Value c2 = m.sub(m.constant(1), m.pow(b2, t));
    Value update = m.div(m.div(mNext, c1),
                         m.add(m.sqrt(m.div(vNext, c2)), m.constant(eps)));
    next = {m.sub(weights, m.mul(rate, update)), mNext, vNext};
    break;
  }
  }
  next.push_back(t);
  if (finite) {
    // A step with an inf/NaN gradient changes nothing (weights, moments,
    // and the step counter, as GradScaler skips optimizer.step()), only the
    // loss scale. The batch-norm statistics of its forward pass still
    // update, as in PyTorch (the forward ran).
    for (unsigned i = 0; i < next.size(); ++i)
      next[i] = m.select(finite, next[i], stateArgs[i]);
  }
  if (!stats.slots.empty())
    next.push_back(concatRunningStats(b, m.loc, gradReturn, slots.size() + 1,
                                      stats));
  if (finite)
    llvm::append_range(next,
                       nextLossScaleState(m, finite, scaleArg,
                                          stateArg("loss_scale.good_steps")));

  SmallVector<Value> results = {loss};
  llvm::append_range(results, next);
  if (finite)
    results.push_back(m.select(finite, m.constant(0), m.constant(1)));
  func::ReturnOp::create(b, gradReturn.getLoc(), results);
  gradReturn.erase();

  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  grad.setType(FunctionType::get(ctx, body.getArgumentTypes(), resultTypes));
  for (auto [i, entry] : llvm::enumerate(state)) {
    unsigned arg = firstState + i;
    grad.setArgAttr(arg, KilnDialect::StateAttrHelper::getNameStr(),
                    attrs.getStringAttr(entry.first));
    grad.setArgAttr(arg, KilnDialect::NameAttrHelper::getNameStr(),
                    attrs.getStringAttr("kiln.state." + entry.first));
    grad.setResultAttr(i + 1, KilnDialect::StateAttrHelper::getNameStr(),
                       attrs.getStringAttr(entry.first));
    grad.setResultAttr(
        i + 1, KilnDialect::NameAttrHelper::getNameStr(),
        attrs.getStringAttr("kiln.state." + entry.first + ".next"));
  }
  // A state's non-zero initial value travels as `kiln.initial`.
  if (scaleArg)
    grad.setArgAttr(
        cast<BlockArgument>(scaleArg).getArgNumber(),
        KilnDialect::InitialAttrHelper::getNameStr(),
        DenseElementsAttr::get(
            scalar, attrs.getF32FloatAttr(lossScaleInit).getValue()));
  grad.setResultAttr(0, KilnDialect::NameAttrHelper::getNameStr(),
                     attrs.getStringAttr("loss"));
  if (finite)
    grad.setResultAttr(results.size() - 1,
                       KilnDialect::NameAttrHelper::getNameStr(),
                       attrs.getStringAttr("skipped"));
  grad->removeAttr(KilnDialect::GradientsAttrHelper::getNameStr());
  grad.setSymName("train_step");
  bindRngState(grad, seed);
  SmallVector<GradientBucket> buckets;
  if (dataParallel &&
      failed(splitUpdate(grad, flatGradients, squaredNorm, shardOptimizer,
                         bucketElements, buckets)))
    return fail(grad, "sharding @train_update failed (shard-optimizer=" +
                          std::to_string(shardOptimizer) + ")");

  // @eval: @main reading the trainable weights from params.
  Block &forward = main.front();
  Value params = forward.addArgument(flatType, main.getLoc());
  replaceLoads(main, params, bySymbol);
  unsigned paramsArg = forward.getNumArguments() - 1;
  if (!stats.slots.empty())
    replaceLoads(main,
                 forward.addArgument(stats.type(ctx), main.getLoc()),
                 stats.bySymbol);
  main.setType(FunctionType::get(ctx, forward.getArgumentTypes(),
                                 main.getResultTypes()));
  main.setArgAttr(paramsArg, KilnDialect::StateAttrHelper::getNameStr(),
                  attrs.getStringAttr("params"));
  main.setArgAttr(paramsArg, KilnDialect::NameAttrHelper::getNameStr(),
                  attrs.getStringAttr("kiln.state.params"));
  if (!stats.slots.empty()) {
    main.setArgAttr(paramsArg + 1, KilnDialect::StateAttrHelper::getNameStr(),
                    attrs.getStringAttr("bn.stats"));
    main.setArgAttr(paramsArg + 1, KilnDialect::NameAttrHelper::getNameStr(),
                    attrs.getStringAttr("kiln.state.bn.stats"));
  }
  main.setSymName("eval");

  SmallVector<NamedAttribute> training = {
      attrs.getNamedAttr("layout", layoutAttr(attrs, slots)),
      attrs.getNamedAttr("optimizer", attrs.getStringAttr(optimizer)),
      attrs.getNamedAttr("size", attrs.getI64IntegerAttr(total))};
  if (!stats.slots.empty()) {
    training.push_back(
        attrs.getNamedAttr("stats_layout", layoutAttr(attrs, stats.slots)));
    training.push_back(attrs.getNamedAttr(
        "stats_size", attrs.getI64IntegerAttr(stats.total)));
  }
  if (!buckets.empty()) {
    SmallVector<Attribute> list;
    for (const GradientBucket &bucket : buckets)
      list.push_back(attrs.getDictionaryAttr(
          {attrs.getNamedAttr("state", attrs.getStringAttr(bucket.state)),
           attrs.getNamedAttr("offset", attrs.getI64IntegerAttr(bucket.offset)),
           attrs.getNamedAttr("count",
                              attrs.getI64IntegerAttr(bucket.count))}));
    training.push_back(attrs.getNamedAttr("buckets", attrs.getArrayAttr(list)));
  }
  module->setAttr(KilnDialect::TrainingAttrHelper::getNameStr(),
                  attrs.getDictionaryAttr(training));
}

} // namespace

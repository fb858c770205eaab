//===- Autodiff.cpp - Reverse-mode differentiation of @main ---------------===//
//
// kiln-autodiff: builds `func.func @train_grad` next to the forward
// `@main` (left unchanged). @train_grad takes main's inputs and the labels,
// recomputes the forward graph, appends the loss, and returns the loss and
// d loss / d w for every trainable weight w. The steps:
//
//   1. the trainable weights: float ml_program.globals read from ONNX
//      initializers (kiln.origin), minus those `freeze` matches;
//   2. the loss: built from an output and the labels (Losses.cpp), or an
//      output the model computes itself (loss-output);
//   3. activity: the values that depend on a trainable weight (varied); a
//      gradient flows only into those;
//   4. the reverse sweep: ops in reverse order, each asking its family's
//      VJP rule (Vjp.h) for its operands' gradients, summed where a value
//      has several uses; an op on the path without a rule is an error
//      naming it;
//   5. the results: loss, then one gradient per weight (the sum over its
//      loads; zeros when the loss does not depend on it), and the
//      `kiln.gradients` attribute naming the globals in that order; then
//      the new running statistics of batch norms (Normalization.cpp, which
//      rewrites the norms before step 1), named by `kiln.state_updates`.
//      Dropouts draw their masks from the arguments rng.key and
//      rng.counter (Dropout.cpp, also before step 1); @main keeps none.
//   6. rematerialisation (Rematerialize.cpp): cheap activations are
//      recomputed in the backward instead of kept. Dead forward ops
//      (outputs the loss does not need) are erased.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Regex.h"

namespace kiln {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::autodiff;

namespace {

constexpr StringLiteral kNameAttr = KilnDialect::NameAttrHelper::getNameStr();

/// The initializer a weight global was read from (its origin's first line),
/// or "" when it has none (a hoisted Constant node, a derived weight).
std::string initializerName(ml_program::GlobalOp global) {
  std::string origin = getWeightOrigin(global);
  StringRef first = StringRef(origin).split('\n').first;
  if (!first.consume_front("initializer "))
    return "";
  // "<dtype> <shape> <name>": the name is the rest of the line.
  first = first.split(' ').second.split(' ').second;
  return first.str();
}

std::optional<LossKind> parseLoss(StringRef name) {
  return llvm::StringSwitch<std::optional<LossKind>>(name)
      .Case("cross_entropy", LossKind::CrossEntropy)
      .Case("nll", LossKind::Nll)
      .Case("mse", LossKind::Mse)
      .Case("l1", LossKind::L1)
      .Default(std::nullopt);
}

/// The labels argument: its name, type and, per dim, the symbol of
/// `kiln.dim_ranges` it follows ("" for a fixed dim; empty when none does).
struct Labels {
  std::string name;
  RankedTensorType type;
  SmallVector<std::string> symbols;
};

/// Parses "NAME:SHAPE:DTYPE" (SHAPE: 32x10, N, Nx10, or "scalar"; DTYPE:
/// int64, int32, float32 or i64, i32, f32). A dim spelled as a symbol of
/// `ranges` (kilnc --dim) is that symbol's maximum, and follows it.
FailureOr<Labels> parseLabels(MLIRContext *context, StringRef spec,
                              DictionaryAttr ranges, std::string &error) {
  auto [rest, dtype] = spec.rsplit(':');
  auto [name, dims] = rest.rsplit(':');
  if (name.empty() || dims.empty() || dtype.empty() || rest == spec ||
      name == rest) {
    error = "labels '" + spec.str() + "' is not NAME:SHAPE:DTYPE";
    return failure();
  }
  Builder b(context);
  Type element = llvm::StringSwitch<Type>(dtype)
                     .Cases("int64", "i64", b.getI64Type())
                     .Cases("int32", "i32", b.getI32Type())
                     .Cases("float32", "f32", b.getF32Type())
                     .Default(Type());
  if (!element) {
    error = "labels '" + spec.str() + "': dtype '" + dtype.str() +
            "' is not int64, int32 or float32";
    return failure();
  }
  SmallVector<int64_t> shape;
  SmallVector<std::string> symbols;
  bool symbolic = false;
  if (dims != "scalar") {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t d;
      auto range =
          ranges ? ranges.getAs<DenseI64ArrayAttr>(part) : DenseI64ArrayAttr();
      if (range && range.size() == 3) {
        shape.push_back(range[1]);
        symbols.push_back(part.str());
        symbolic = true;
        continue;
      }
      if (part.getAsInteger(10, d) || d <= 0) {
        error = "labels '" + spec.str() + "': '" + part.str() +
                "' is not a dimension" +
                (ranges ? " or a symbol given to --dim" : "");
        return failure();
      }
      shape.push_back(d);
      symbols.push_back("");
    }
  }
  if (!symbolic)
    symbols.clear();
  return Labels{name.str(), RankedTensorType::get(shape, element),
                std::move(symbols)};
}

struct AutodiffPass : kiln::impl::AutodiffPassBase<AutodiffPass> {
  using Base::Base;
  void runOnOperation() override;

  /// kilnc's hook between the loss and the reverse sweep (may be empty).
  AutodiffForwardHook forwardHook;

private:
  /// Builds @train_grad; on failure it has emitted an error and erased
  /// what it built.
  LogicalResult buildTrainGrad(ModuleOp module, func::FuncOp main);
  /// Appends the loss to `grad`'s body, before its return.
  FailureOr<Value> appendLoss(func::FuncOp grad, GradBuilder &g);
  /// Appends the tensor<f32> argument the reverse sweep starts from
  /// (loss-seed-argument).
  Value addLossSeedArgument(func::FuncOp grad);
};

FailureOr<Value> AutodiffPass::appendLoss(func::FuncOp grad, GradBuilder &g) {
  auto ret = cast<func::ReturnOp>(grad.front().getTerminator());
  auto resultIndex = [&](StringRef name) -> std::optional<unsigned> {
    for (unsigned i = 0; i < grad.getNumResults(); ++i)
      if (auto attr = grad.getResultAttrOfType<StringAttr>(i, kNameAttr))
        if (attr.getValue() == name)
          return i;
    return std::nullopt;
  };
  auto outputNames = [&]() {
    std::string s;
    for (unsigned i = 0; i < grad.getNumResults(); ++i) {
      auto attr = grad.getResultAttrOfType<StringAttr>(i, kNameAttr);
      s += (i ? ", " : "") + (attr ? attr.getValue().str() : "?");
    }
    return s;
  };

  if (!lossOutput.empty()) {
    if (!loss.empty() || !labels.empty()) {
      emitError(grad.getLoc()) << "kiln-autodiff: loss-output names a loss "
                                  "the model computes; it takes no loss or labels";
      return failure();
    }
    std::optional<unsigned> index = resultIndex(lossOutput);
    if (!index) {
      emitError(grad.getLoc()) << "kiln-autodiff: loss-output '" << lossOutput
                               << "' is not an output of the model (outputs: "
                               << outputNames() << ")";
      return failure();
    }
    Value value = ret.getOperand(*index);
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getNumElements() != 1 || !isa<FloatType>(type.getElementType())) {
      emitError(grad.getLoc())
          << "kiln-autodiff: the loss '" << lossOutput
          << "' must be a float scalar, got " << type;
      return failure();
    }
    Value scalar = g.reshape(value, {});
    if (!type.getElementType().isF32())
      scalar = CastOp::create(g.b, RankedTensorType::get({}, g.b.getF32Type()),
                              scalar);
    return scalar;
  }

  std::optional<LossKind> kind = parseLoss(loss);
  if (!kind) {
    emitError(grad.getLoc())
        << "kiln-autodiff: loss '" << loss
        << "' is not one of cross_entropy, nll, mse, l1 (or give loss-output)";
    return failure();
  }
  std::optional<unsigned> index;
  if (lossOn.empty()) {
    if (grad.getNumResults() != 1) {
      emitError(grad.getLoc())
          << "kiln-autodiff: the model has " << grad.getNumResults()
          << " outputs (" << outputNames() << "): say which with loss-on";
      return failure();
    }
    index = 0;
  } else {
    index = resultIndex(lossOn);
    if (!index) {
      emitError(grad.getLoc()) << "kiln-autodiff: loss-on '" << lossOn
                               << "' is not an output of the model (outputs: "
                               << outputNames() << ")";
      return failure();
    }
  }
  if (labels.empty()) {
    emitError(grad.getLoc()) << "kiln-autodiff: loss '" << loss
                             << "' needs labels=NAME:SHAPE:DTYPE";
    return failure();
  }
  std::string error;
  auto parsed = parseLabels(
      &getContext(), labels,
      grad->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(
          KilnDialect::DimRangesAttrHelper::getNameStr()),
      error);
  if (failed(parsed)) {
    emitError(grad.getLoc()) << "kiln-autodiff: " << error;
    return failure();
  }
  for (unsigned i = 0; i < grad.getNumArguments(); ++i)
    if (auto attr = grad.getArgAttrOfType<StringAttr>(i, kNameAttr))
      if (attr.getValue() == parsed->name) {
        emitError(grad.getLoc()) << "kiln-autodiff: labels '" << parsed->name
                                 << "' has the name of a model input";
        return failure();
      }
  unsigned argIndex = grad.getNumArguments();
  SmallVector<NamedAttribute> argAttrs{
      g.b.getNamedAttr(kNameAttr, g.b.getStringAttr(parsed->name))};
  if (!parsed->symbols.empty()) {
    SmallVector<Attribute> spelled;
    for (const std::string &symbol : parsed->symbols)
      spelled.push_back(g.b.getStringAttr(symbol));
    argAttrs.push_back(
        g.b.getNamedAttr(KilnDialect::SymbolicDimsAttrHelper::getNameStr(),
                         g.b.getArrayAttr(spelled)));
  }
  if (failed(grad.insertArgument(argIndex, parsed->type,
                                 g.b.getDictionaryAttr(argAttrs),
                                 grad.getLoc())))
    return failure();
  FailureOr<Value> value = buildLoss(g, *kind, ret.getOperand(*index),
                                     grad.getArgument(argIndex), error);
  if (failed(value)) {
    emitError(grad.getLoc()) << "kiln-autodiff: loss '" << loss << "' on '"
                             << (lossOn.empty() ? outputNames() : lossOn.getValue())
                             << "': " << error;
    return failure();
  }
  return value;
}

Value AutodiffPass::addLossSeedArgument(func::FuncOp grad) {
  Builder b(&getContext());
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  unsigned index = grad.getNumArguments();
  if (failed(grad.insertArgument(index, scalar,
                                 b.getDictionaryAttr({b.getNamedAttr(
                                     kNameAttr, b.getStringAttr("loss_seed"))}),
                                 grad.getLoc())))
    return {};
  grad.setArgAttr(index, KilnDialect::LossSeedAttrHelper::getNameStr(),
                  b.getUnitAttr());
  return grad.getArgument(index);
}

LogicalResult AutodiffPass::buildTrainGrad(ModuleOp module, func::FuncOp main) {
  MLIRContext *context = &getContext();

  // The function, with norms in training form (their running statistics
  // are state, not weights).
  func::FuncOp grad = main.clone();
  grad.setSymName("train_grad");
  module.insert(std::next(Block::iterator(main)), grad);
  auto fail = [&]() {
    grad.erase();
    return failure();
  };
  SmallVector<StateUpdate> updates;
  std::string normError;
  if (failed(decomposeNormalizations(grad, updates, normError))) {
    emitError(grad.getLoc()) << "kiln-autodiff: " << normError;
    return fail();
  }
  expandDropouts(grad);
  llvm::DenseSet<StringRef> stateSymbols;
  for (const StateUpdate &update : updates)
    stateSymbols.insert(update.global.getValue());

  // 1. Trainable weights.
  std::optional<llvm::Regex> freezeRegex;
  if (!freeze.empty()) {
    freezeRegex.emplace("^(" + freeze + ")$");
    std::string regexError;
    if (!freezeRegex->isValid(regexError)) {
      module.emitError() << "kiln-autodiff: freeze '" << freeze
                         << "' is not a regular expression: " << regexError;
      return fail();
    }
  }
  SmallVector<ml_program::GlobalOp> weights;
  SmallVector<std::string> weightNames;
  for (auto global : module.getOps<ml_program::GlobalOp>()) {
    std::string name = initializerName(global);
    auto type = dyn_cast<RankedTensorType>(global.getType());
    if (name.empty() || !type || !isa<FloatType>(type.getElementType()) ||
        stateSymbols.contains(global.getSymName()))
      continue;
    if (freezeRegex && freezeRegex->match(name))
      continue;
    weights.push_back(global);
    weightNames.push_back(name);
  }
  if (weights.empty()) {
    module.emitError() << "kiln-autodiff: no trainable weights (no float "
                          "initializer"
                       << (freeze.empty() ? "" : " outside freeze") << ")";
    return fail();
  }
  llvm::DenseSet<StringRef> weightSymbols;
  for (auto global : weights)
    weightSymbols.insert(global.getSymName());

  // 2. The loss.
  Block &body = grad.front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  ImplicitLocOpBuilder b(NameLoc::get(StringAttr::get(context, "loss")), ret);
  GradBuilder g(b);
  FailureOr<Value> lossValue = appendLoss(grad, g);
  if (failed(lossValue))
    return fail();
  if (forwardHook) {
    // The loss is returned while the hook runs: what the hook puts on it
    // (a mean's max / n) replaces its uses, that one included.
    unsigned at = ret.getNumOperands();
    ret->insertOperands(at, *lossValue);
    LogicalResult hooked = forwardHook(grad, *lossValue);
    lossValue = ret.getOperand(at);
    ret->eraseOperand(at);
    if (failed(hooked))
      return fail();
  }

  // 3. Activity: values that depend on a trainable weight.
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  llvm::DenseSet<Value> varied;
  propagateActivity(
      forward,
      [&](Operation *op) {
        auto load = dyn_cast<ml_program::GlobalLoadConstOp>(op);
        return load &&
               weightSymbols.contains(load.getGlobal().getLeafReference());
      },
      varied);
  if (!varied.contains(*lossValue)) {
    emitError(grad.getLoc())
        << "kiln-autodiff: the loss does not depend on any trainable weight";
    return fail();
  }

  // 4. The reverse sweep.
  llvm::DenseMap<Value, Value> grads;
  grads[*lossValue] = lossSeedArgument ? addLossSeedArgument(grad)
                                       : g.scalar(b.getF32Type(), 1.0);
  if (failed(backpropagate(g, forward, varied, grads,
                           {"kiln-autodiff", "the weights to the loss"})))
    return fail();

  // 5. Results: the loss, then one gradient per weight.
  b.setLoc(grad.getLoc());
  SmallVector<Value> results{*lossValue};
  SmallVector<Attribute> symbols;
  for (auto global : weights) {
    Value total;
    for (Operation *op : forward) {
      auto load = dyn_cast<ml_program::GlobalLoadConstOp>(op);
      if (!load || load.getGlobal().getLeafReference() != global.getSymName())
        continue;
      if (Value dw = grads.lookup(load.getResult()))
        total = total ? g.add(total, dw) : dw;
    }
    results.push_back(total ? total : g.splat(global.getType(), 0.0));
    symbols.push_back(FlatSymbolRefAttr::get(global.getSymNameAttr()));
  }
  SmallVector<Attribute> stateSymbolRefs;
  for (const StateUpdate &update : updates) {
    results.push_back(update.value);
    stateSymbolRefs.push_back(FlatSymbolRefAttr::get(update.global));
  }
  func::ReturnOp::create(b, results);
  ret.erase();
  // 6. Dead ops go (forward outputs the loss does not need, gradients of
  // operands nothing reads), then rematerialisation.
  llvm::DenseSet<Operation *> forwardSet(forward.begin(), forward.end());
  auto eraseDead = [&]() {
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op)) {
        forwardSet.erase(&op);
        op.erase();
      }
  };
  eraseDead();
  SmallVector<Operation *> liveForward;
  for (Operation &op : body)
    if (forwardSet.contains(&op))
      liveForward.push_back(&op);
  RematStats remat;
  autodiff::rematerialize(grad, liveForward, remat, rematerialize);
  eraseDead();
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  module->setAttr(
      KilnDialect::RematReportAttrHelper::getNameStr(),
      b.getDictionaryAttr(
          {b.getNamedAttr("kept", i64(remat.kept)),
           b.getNamedAttr("kept_bytes", i64(remat.keptBytes)),
           b.getNamedAttr("recomputed", i64(remat.recomputed)),
           b.getNamedAttr("recomputed_bytes", i64(remat.recomputedBytes))}));

  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  auto named = [&](StringRef name) {
    return b.getDictionaryAttr(
        b.getNamedAttr(kNameAttr, b.getStringAttr(name)));
  };
  resultTypes.push_back(lossValue->getType());
  resultAttrs.push_back(named("loss"));
  for (auto [global, name] : llvm::zip(weights, weightNames)) {
    resultTypes.push_back(global.getType());
    resultAttrs.push_back(named("grad." + name));
  }
  for (const StateUpdate &update : updates) {
    auto global = module.lookupSymbol<ml_program::GlobalOp>(update.global);
    std::string name = initializerName(global);
    resultTypes.push_back(update.value.getType());
    resultAttrs.push_back(
        named("update." + (name.empty() ? update.global.str() : name)));
  }
  grad.setFunctionType(
      FunctionType::get(context, grad.getArgumentTypes(), resultTypes));
  grad.setAllResultAttrs(resultAttrs);
  grad->setAttr(KilnDialect::GradientsAttrHelper::getNameStr(),
                ArrayAttr::get(context, symbols));
  if (!updates.empty())
    grad->setAttr(KilnDialect::StateUpdatesAttrHelper::getNameStr(),
                  ArrayAttr::get(context, stateSymbolRefs));

  if (gradientsAsMain) {
    main.erase();
    grad.setSymName("main");
  } else {
    removeDropouts(main);
  }
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || !main.getBody().hasOneBlock()) {
    module.emitError("kiln-autodiff: the module has no single-block func @main");
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_grad")) {
    module.emitError("kiln-autodiff: the module already has @train_grad");
    return signalPassFailure();
  }
  if (failed(buildTrainGrad(module, main)))
    signalPassFailure();
}

} // namespace

std::unique_ptr<Pass>
kiln::createAutodiffPass(const AutodiffPassOptions &options,
                         AutodiffForwardHook hook) {
  auto pass = std::make_unique<AutodiffPass>(options);
  pass->forwardHook = std::move(hook);
  return pass;
}

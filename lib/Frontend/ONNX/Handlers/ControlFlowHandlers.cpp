//===- ControlFlowHandlers.cpp - ONNX If, Loop and Scan -------------------===//
//
// Control flow whose structure is known at compile time, resolved at import:
//
//   - If with a constant condition imports the chosen branch inline. With a
//     run-time condition, branches that hold heavy work (a contraction, a
//     recurrence, a loop) become device-side loops of at most one iteration
//     each (below), so only the chosen one runs; lighter branches are both
//     imported inline and every output is a kiln.select on the condition:
//     the choice is made on the device, with no read-back to the host, at
//     the cost of running both branches (ONNX subgraphs are pure, so the
//     branch not chosen has no effect). Outputs
//     whose shapes differ between the branches need run-time shapes: an
//     error naming the node. A branch may give a sequence or optional: with
//     a constant condition it passes through; with a run-time one both
//     branches must give as many tensors, selected one by one.
//   - Loop with a compile-time trip count (and a condition that folds to a
//     constant every iteration) is unrolled, up to kMaxUnrolledIterations;
//     scan outputs are stacked along a new leading axis. Loop-carried
//     values may be sequences or optionals (an exported SequenceMap builds
//     its output that way), resolved per iteration like the rest.
//   - Scan (opset 9+) over static sequence lengths is unrolled the same way,
//     with every scan_input/output axis and direction; Scan-8's batched
//     form is unrolled per batch row (sequence_lens, when given, must be a
//     constant equal to the sequence length).
//
// A Loop whose trip count or condition is only known at run time (or that
// runs more iterations than the unrolling limit) becomes a device-side
// loop: its body is imported as a private function of its own, which also
// computes the next iteration count and whether to go on (`cond and i + 1 <
// M`), and the node becomes a `func.call` of it marked `kiln.device_loop`
// on the body (the number of loop-state arguments: the flag, the counter,
// the carried values). Everything after import compiles the body like any function;
// the artifact builder turns the call into a While region of the launch
// list (docs/architecture.md "Device-side loops"). Its scan outputs would
// have a data-dependent length: an error naming the node.
//
// Subgraphs capture outer values by name and nest to any depth: the
// GraphImporter imports them inline (NodeImporter::importSubgraph).
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

/// Iterations a Loop or Scan may unroll to.
constexpr int64_t kMaxUnrolledIterations = 1024;

std::optional<DenseElementsAttr> constantOf(Value v) {
  DenseElementsAttr value;
  if (v && matchPattern(v, m_Constant(&value)))
    return value;
  return std::nullopt;
}

/// The value of a one-element bool tensor known at compile time.
std::optional<bool> constantBool(Value v) {
  std::optional<DenseElementsAttr> value = constantOf(v);
  if (!value || value->getNumElements() != 1 ||
      !value->getElementType().isInteger(1))
    return std::nullopt;
  return *value->getValues<bool>().begin();
}

std::string shapeText(RankedTensorType type) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(type.getShape()))
    s += (i ? "x" : "") + std::to_string(d);
  return "[" + s + "]";
}

/// "a tensor", "a sequence of 2 tensors", "an empty optional", for messages.
std::string describe(const SubgraphValue &value) {
  if (!value.composite)
    return "a tensor";
  size_t count = value.composite->elements.size();
  if (value.composite->kind == CompositeValue::Kind::Optional)
    return count ? "a full optional" : "an empty optional";
  return "a sequence of " + std::to_string(count) + " tensors";
}

/// Binds a node's outputs to what a subgraph gave: tensors as results,
/// sequences and optionals as composite results.
LogicalResult setSubgraphResults(NodeImporter &n,
                                 ArrayRef<SubgraphValue> values) {
  SmallVector<Value> tensors;
  for (auto [i, value] : llvm::enumerate(values)) {
    tensors.push_back(value.tensor);
    if (value.composite)
      n.setCompositeResult(i, *value.composite);
  }
  return n.setResults(tensors);
}

SmallVector<Value> closeOverCaptures(func::FuncOp func);

/// `base`, or `base_N` for the first N that names no symbol of `module`.
std::string uniqueSymbol(ModuleOp module, StringRef base) {
  std::string name = base.str();
  for (int i = 1; SymbolTable::lookupSymbolIn(module, name); ++i)
    name = base.str() + "_" + std::to_string(i);
  return name;
}

/// A private device-loop body `base`(_N) of `argTypes`, next to the
/// function being imported, with its entry block; results come later.
func::FuncOp createBodyFunction(NodeImporter &n, StringRef base,
                                ArrayRef<Type> argTypes) {
  OpBuilder &b = n.builder();
  OpBuilder::InsertionGuard guard(b);
  auto parent =
      b.getInsertionBlock()->getParent()->getParentOfType<func::FuncOp>();
  b.setInsertionPointAfter(parent);
  auto func = func::FuncOp::create(
      b, parent.getLoc(),
      uniqueSymbol(parent->getParentOfType<ModuleOp>(), base),
      b.getFunctionType(argTypes, {}));
  func.setPrivate();
  func.addEntryBlock();
  return func;
}

/// Closes `func` over what it captured, marks it a device-loop body with
/// `stateCount` state arguments (on the body: bufferization rebuilds
/// calls, not functions) and calls it with `operands` then the captured
/// values; returns the call's results after the flag and the counter.
ValueRange callDeviceLoop(NodeImporter &n, func::FuncOp func,
                          int64_t stateCount, SmallVector<Value> operands) {
  SmallVector<Value> captured = closeOverCaptures(func);
  operands.append(captured);
  func->setAttr(KilnDialect::DeviceLoopAttrHelper::getNameStr(),
                n.builder().getI64IntegerAttr(stateCount));
  auto call = func::CallOp::create(n.builder(), n.loc(), func, operands);
  return call.getResults().drop_front(2);
}

/// Erases the pure ops of `func` whose results nothing uses.
void removeDeadOps(func::FuncOp func) {
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops))
    if (op != func && op->use_empty() && isPure(op) &&
        !op->hasTrait<OpTrait::IsTerminator>())
      op->erase();
}

/// Whether a subgraph, at any depth, holds an op worth not running for
/// nothing: a contraction, a recurrence or a loop.
bool holdsHeavyWork(const onnx::GraphProto &graph) {
  static const llvm::StringSet<> heavy = {
      "MatMul",     "Gemm",         "Conv",          "ConvTranspose",
      "LSTM",       "GRU",          "RNN",           "Attention",
      "Einsum",     "MatMulInteger", "ConvInteger",  "QLinearConv",
      "QLinearMatMul", "Loop",      "Scan"};
  for (const onnx::NodeProto &node : graph.node()) {
    if (heavy.contains(node.op_type()))
      return true;
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_g() && holdsHeavyWork(attr.g()))
        return true;
      for (const onnx::GraphProto &g : attr.graphs())
        if (holdsHeavyWork(g))
          return true;
    }
  }
  return false;
}

/// One If branch run on the device only when `flag` holds: a device-loop
/// body `(flag, i, captured...) -> (false, i, outputs...)` (state count 2,
/// its outputs after the state: what the one iteration gives, undefined
/// when it does not run) and a call of it. Returns the branch's outputs;
/// nullopt, with nothing built, when one is a sequence or optional.
FailureOr<std::optional<SmallVector<Value>>>
importDeviceBranch(NodeImporter &n, const onnx::GraphProto &graph,
                   Value flag) {
  OpBuilder &b = n.builder();
  Composer c(n);
  Type i64 = b.getIntegerType(64);
  func::FuncOp func =
      createBodyFunction(n, "if_branch",
                         {RankedTensorType::get({}, b.getI1Type()),
                          RankedTensorType::get({}, i64)});
  {
    OpBuilder::InsertionGuard guard(b);
    Block *entry = &func.front();
    b.setInsertionPointToStart(entry);
    FailureOr<SmallVector<SubgraphValue>> out =
        n.importSubgraphValues(graph, {});
    if (failed(out)) {
      func.erase();
      return failure();
    }
    // The next flag is false (one iteration at most), written as `not
    // flag`, which reads the flag (see importDeviceLoop: a state argument
    // the body does not read may be overwritten before the call).
    SmallVector<Value> results{c.make<NotOp>({entry->getArgument(0)}),
                               entry->getArgument(1)};
    for (const SubgraphValue &v : *out) {
      if (v.composite) {
        func.erase();
        return std::optional<SmallVector<Value>>();
      }
      results.push_back(v.tensor);
    }
    if (c.failed()) {
      func.erase();
      return failure();
    }
    func::ReturnOp::create(b, func.getLoc(), results);
    func.setType(b.getFunctionType(func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
  }
  ValueRange outputs = callDeviceLoop(n, func, 2, {flag, c.scalar(i64, 0)});
  return std::optional<SmallVector<Value>>(SmallVector<Value>(outputs));
}

LogicalResult importIf(NodeImporter &n) {
  if (failed(n.checkArity(1, 1, static_cast<size_t>(n.node().output_size()))))
    return failure();
  const onnx::GraphProto *thenGraph = n.graphAttr("then_branch");
  const onnx::GraphProto *elseGraph = n.graphAttr("else_branch");
  if (!thenGraph || !elseGraph)
    return failure();
  if (n.inputType(0).getNumElements() != 1 ||
      !n.inputType(0).getElementType().isInteger(1))
    return n.fail("cond must be a one-element bool tensor");
  if (thenGraph->output_size() != n.node().output_size() ||
      elseGraph->output_size() != n.node().output_size())
    return n.fail("then_branch and else_branch must each have " +
                  Twine(n.node().output_size()) +
                  " outputs, one per output of the node");
  if (std::optional<bool> cond = constantBool(n.input(0))) {
    FailureOr<SmallVector<SubgraphValue>> chosen =
        n.importSubgraphValues(*cond ? *thenGraph : *elseGraph, {});
    if (failed(chosen))
      return failure();
    return setSubgraphResults(n, *chosen);
  }
  // Branches with heavy work (a contraction, a recurrence, a loop) run on
  // the device only when chosen: each is a loop of at most one iteration
  // (a While region whose body clears its flag), and a select picks the
  // result, the branch not taken leaving its outputs undefined. Training
  // keeps the select form (kiln-autodiff differentiates it), and so do
  // branches that give sequences or optionals, and models with sizes chosen
  // at run time (kilnc --dim: the separable-dims analysis does not look
  // into a device loop, so the artifact would run its maximum size only).
  bool runtimeSizes = n.builder()
                          .getInsertionBlock()
                          ->getParentOp()
                          ->getParentOfType<ModuleOp>()
                          ->hasAttr(KilnDialect::DimRangesAttrHelper::getNameStr());
  if (!n.training() && !runtimeSizes &&
      (holdsHeavyWork(*thenGraph) || holdsHeavyWork(*elseGraph))) {
    Composer c(n);
    Value cond = c.reshape(n.input(0), {});
    Value notCond = c.make<NotOp>({cond});
    if (c.failed())
      return failure();
    FailureOr<std::optional<SmallVector<Value>>> thenOut =
        importDeviceBranch(n, *thenGraph, cond);
    if (failed(thenOut))
      return failure();
    FailureOr<std::optional<SmallVector<Value>>> elseOut =
        *thenOut ? importDeviceBranch(n, *elseGraph, notCond)
                 : std::optional<SmallVector<Value>>();
    if (failed(elseOut))
      return failure();
    if (*thenOut && *elseOut) {
      SmallVector<Value> results;
      for (auto [i, pair] :
           llvm::enumerate(llvm::zip_equal(**thenOut, **elseOut))) {
        auto [a, b] = pair;
        RankedTensorType ta = typeOf(a), tb = typeOf(b);
        if (ta != tb)
          return n.fail("output " + Twine(i) + ": then_branch gives " +
                        shapeText(ta) + " and else_branch " + shapeText(tb) +
                        " (or another element type); a shape chosen at run "
                        "time needs run-time shapes (not supported yet)");
        results.push_back(c.make<SelectOp>({cond, a, b}));
      }
      if (c.failed())
        return failure();
      return n.setResults(results);
    }
    // A branch gives a sequence or optional: the select form below.
  }
  FailureOr<SmallVector<SubgraphValue>> thenValues =
      n.importSubgraphValues(*thenGraph, {});
  if (failed(thenValues))
    return failure();
  FailureOr<SmallVector<SubgraphValue>> elseValues =
      n.importSubgraphValues(*elseGraph, {});
  if (failed(elseValues))
    return failure();
  Composer c(n);
  Value cond = c.reshape(n.input(0), {});
  // One select per tensor; a sequence or optional is selected tensor by
  // tensor, so both branches must give the same number of tensors.
  auto select = [&](int64_t i, Value a, Value b) -> FailureOr<Value> {
    RankedTensorType ta = typeOf(a), tb = typeOf(b);
    if (ta.getElementType() != tb.getElementType())
      return n.fail("output " + Twine(i) +
                    ": the branches give different element types");
    if (ta.getShape() != tb.getShape())
      return n.fail("output " + Twine(i) + ": then_branch gives " +
                    shapeText(ta) + " and else_branch " + shapeText(tb) +
                    "; a shape chosen at run time needs run-time shapes "
                    "(not supported yet)");
    return c.make<SelectOp>({cond, a, b});
  };
  SmallVector<SubgraphValue> results;
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip_equal(*thenValues, *elseValues))) {
    auto &[a, b] = pair;
    if (!a.composite && !b.composite) {
      FailureOr<Value> v = select(i, a.tensor, b.tensor);
      if (failed(v))
        return failure();
      results.push_back(*v);
      continue;
    }
    if (!a.composite || !b.composite ||
        a.composite->kind != b.composite->kind ||
        a.composite->elements.size() != b.composite->elements.size())
      return n.fail("output " + Twine(i) + ": then_branch gives " +
                    describe(a) + " and else_branch " + describe(b) +
                    "; Kiln resolves sequences and optionals at compile "
                    "time, so under a run-time condition both branches must "
                    "give the same kind and number of tensors");
    CompositeValue selected = *a.composite;
    for (size_t k = 0; k < selected.elements.size(); ++k) {
      FailureOr<Value> v =
          select(i, selected.elements[k], b.composite->elements[k]);
      if (failed(v))
        return failure();
      selected.elements[k] = *v;
    }
    if (selected.elements.empty() && !selected.elementType)
      selected.elementType = b.composite->elementType;
    results.push_back(std::move(selected));
  }
  if (c.failed())
    return failure();
  return setSubgraphResults(n, results);
}

/// Stacks per-iteration tensors along a new axis `axis` (ONNX scan output).
Value stack(Composer &c, ArrayRef<Value> items, int64_t axis) {
  SmallVector<Value> expanded;
  for (Value v : items) {
    SmallVector<int64_t> shape(typeOf(v).getShape());
    shape.insert(shape.begin() + axis, 1);
    expanded.push_back(c.reshape(v, shape));
  }
  return c.concat(expanded, axis);
}

/// Makes `func` (a device-loop body imported inside another function)
/// self-contained: each value it uses from an enclosing function becomes a
/// new argument, except constants and weight loads (operand-free pure ops),
/// which are cloned in so that the body still sees them at compile time.
/// Returns the values the call site passes for the new arguments, in order.
SmallVector<Value> closeOverCaptures(func::FuncOp func) {
  Region &body = func.getBody();
  llvm::SetVector<Value> captured;
  body.walk([&](Operation *op) {
    for (Value operand : op->getOperands())
      if (!body.isAncestor(operand.getParentRegion()))
        captured.insert(operand);
  });
  Block &entry = body.front();
  OpBuilder b(&entry, entry.begin());
  SmallVector<Value> operands;
  for (Value outer : captured) {
    Operation *def = outer.getDefiningOp();
    Value inner;
    if (def && def->getNumOperands() == 0 && def->getNumRegions() == 0 &&
        isPure(def)) {
      inner = b.clone(*def)->getResult(cast<OpResult>(outer).getResultNumber());
    } else {
      inner = entry.addArgument(outer.getType(), outer.getLoc());
      operands.push_back(outer);
    }
    replaceAllUsesInRegionWith(outer, inner, body);
  }
  func.setType(FunctionType::get(func.getContext(), entry.getArgumentTypes(),
                                 func.getResultTypes()));
  // One-shot bufferization must not write into the caller's buffers: the
  // loop state is copied, never aliased.
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    func.setArgAttr(i, "bufferization.writable", b.getBoolAttr(false));
  return operands;
}

/// A Loop whose trip count or condition is only known at run time, or that
/// runs too many iterations to unroll: the body becomes a private function
/// `(flag, i, carried..., [M], captured...) -> (flag', i + 1, carried'...)`
/// marked `kiln.device_loop` = 2 + #carried and the node a call of it, the
/// artifact builder's cue to repeat the call's launches while the flag
/// holds (module comment).
LogicalResult importDeviceLoop(NodeImporter &n, const onnx::GraphProto &body,
                               size_t numCarried, int64_t numScan,
                               const Twine &why) {
  if (numScan > 0)
    return n.fail(why + ", so it runs as a device-side loop, which does "
                  "not produce scan outputs yet (it has " +
                  Twine(numScan) + ")");
  OpBuilder &b = n.builder();
  Composer c(n);
  Type i1 = b.getI1Type(), i64 = b.getIntegerType(64);
  auto flagType = RankedTensorType::get({}, i1);
  auto counterType = RankedTensorType::get({}, i64);
  SmallVector<Value> carried;
  for (size_t i = 0; i < numCarried; ++i) {
    if (n.compositeInput(i + 2))
      return n.fail(why + "; loop-carried value " + Twine(i) +
                    " is a sequence or optional, which a device-side loop "
                    "does not carry (Kiln resolves them at compile time)");
    if (!n.hasInput(i + 2))
      return n.fail("loop-carried value " + Twine(i) + " is omitted");
    carried.push_back(n.input(i + 2));
  }
  Value tripCount =
      n.hasInput(0) ? c.cast(c.reshape(n.input(0), {}), i64) : Value();
  Value cond = n.hasInput(1) ? c.reshape(n.input(1), {})
                             : c.constant(flagType, {1.0});

  // The body function, next to the function being imported.
  SmallVector<Type> argTypes{flagType, counterType};
  for (Value v : carried)
    argTypes.push_back(v.getType());
  if (tripCount)
    argTypes.push_back(counterType);
  func::FuncOp func = createBodyFunction(n, "loop_body", argTypes);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *entry = &func.front();
    b.setInsertionPointToStart(entry);
    SmallVector<SubgraphValue> args{entry->getArgument(1),
                                    entry->getArgument(0)};
    for (size_t i = 0; i < numCarried; ++i)
      args.push_back(entry->getArgument(2 + i));
    FailureOr<SmallVector<SubgraphValue>> out =
        n.importSubgraphValues(body, args);
    if (failed(out)) {
      func.erase();
      return failure();
    }
    SmallVector<Value> results;
    for (auto [k, v] : llvm::enumerate(*out)) {
      if (k > numCarried)
        break;
      // (The message is written before the body, which holds the values it
      // names, is erased.)
      std::string problem;
      if (v.composite)
        problem = "the body's " +
                  (k ? "loop-carried output " + std::to_string(k - 1)
                     : std::string("condition")) +
                  " is " + describe(v) + "; it must be a tensor";
      else if (k && v.tensor.getType() != carried[k - 1].getType())
        problem = "loop-carried value " + std::to_string(k - 1) +
                  " enters the body as " + shapeText(typeOf(carried[k - 1])) +
                  " and leaves it as " + shapeText(typeOf(v.tensor)) +
                  " (or another element type); a device-side loop needs "
                  "fixed shapes";
      if (!problem.empty()) {
        func.erase();
        return n.fail(why + "; " + problem);
      }
      results.push_back(v.tensor);
    }
    // Every state argument must be read by the body: bufferization may
    // otherwise let another value overwrite the caller's buffer for it
    // before the call (a call does not read what its callee does not),
    // and the loop copies every initial value in, and returns it when it
    // runs no iteration (finding 30 of docs/reliability.md). The flag is
    // true whenever the body runs, so `and flag` and `select(flag, next,
    // h)` change nothing there but read the flag and an unread carried h.
    auto ret = func::ReturnOp::create(b, func.getLoc(), results);
    removeDeadOps(func);
    b.setInsertionPoint(ret);
    Value flagIn = entry->getArgument(0);
    Value next = c.make<AddOp>({entry->getArgument(1), c.scalar(i64, 1)});
    Value keep = c.make<AndOp>({c.reshape(results[0], {}), flagIn});
    if (tripCount)
      keep = c.make<AndOp>(
          {keep, c.make<LessOp>({next, entry->getArguments().back()})});
    for (size_t j = 0; j < numCarried; ++j)
      if (entry->getArgument(2 + j).use_empty())
        results[1 + j] =
            c.make<SelectOp>({flagIn, results[1 + j], entry->getArgument(2 + j)});
    if (c.failed()) {
      func.erase();
      return failure();
    }
    results[0] = keep;
    results.insert(results.begin() + 1, next);
    ret->setOperands(results);
    func.setType(b.getFunctionType(func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
  }
  // The call: the state starts at (cond and 0 < M, 0, the initial values).
  Value zero = c.scalar(i64, 0);
  Value flag = tripCount ? c.make<AndOp>({cond, c.make<LessOp>({zero, tripCount})})
                         : cond;
  if (c.failed())
    return failure();
  SmallVector<Value> operands{flag, zero};
  operands.append(carried);
  if (tripCount)
    operands.push_back(tripCount);
  return n.setResults(callDeviceLoop(n, func, 2 + numCarried, operands));
}

LogicalResult importLoop(NodeImporter &n) {
  const onnx::GraphProto *body = n.graphAttr("body");
  if (!body)
    return failure();
  size_t numCarried = n.numInputs() < 2 ? 0 : n.numInputs() - 2;
  int64_t numScan = body->output_size() - 1 - static_cast<int64_t>(numCarried);
  if (body->input_size() != static_cast<int>(numCarried) + 2 || numScan < 0)
    return n.fail("body must take (iteration, condition, " +
                  Twine(numCarried) +
                  " loop-carried values) and return (condition, the carried "
                  "values, scan outputs)");
  if (n.node().output_size() > static_cast<int>(numCarried + numScan))
    return n.fail("more outputs than loop-carried values and scan outputs");
  for (size_t i = 0; i < 2; ++i)
    if (n.compositeInput(i))
      return n.fail(Twine(i == 0 ? "trip count M" : "condition") +
                    " must be a tensor, not a sequence or optional");
  for (size_t i = 0; i < 2; ++i)
    if (n.hasInput(i) && n.inputType(i).getNumElements() != 1)
      return n.fail(Twine(i == 0 ? "trip count M" : "condition") +
                    " must have one element");
  std::optional<int64_t> tripCount;
  if (n.hasInput(0)) {
    std::optional<DenseElementsAttr> m = constantOf(n.input(0));
    if (!m)
      return importDeviceLoop(n, *body, numCarried, numScan,
                              "trip count M is only known at run time");
    tripCount = (*m->getValues<APInt>().begin()).getSExtValue();
  }
  std::optional<bool> cond = true;
  if (n.hasInput(1)) {
    cond = constantBool(n.input(1));
    if (!cond)
      return importDeviceLoop(n, *body, numCarried, numScan,
                              "the initial condition is only known at run "
                              "time");
  }
  Composer c(n);
  Type i64 = n.builder().getIntegerType(64);
  Value condValue = n.hasInput(1)
                        ? n.input(1)
                        : c.constant(RankedTensorType::get(
                                         {}, n.builder().getI1Type()),
                                     {1.0});
  // Loop-carried values may be sequences or optionals: the body's inserts
  // and erases resolve per iteration, like everything else unrolled.
  SmallVector<SubgraphValue> carried;
  for (size_t i = 0; i < numCarried; ++i) {
    FailureOr<SubgraphValue> value = n.subgraphInput(i + 2);
    if (failed(value))
      return failure();
    carried.push_back(*value);
  }
  SmallVector<SmallVector<Value>> scans(numScan);
  int64_t iteration = 0;
  while (*cond && (!tripCount || iteration < *tripCount)) {
    // The iterations unrolled so far are dead code (removed later).
    if (iteration == kMaxUnrolledIterations)
      return importDeviceLoop(n, *body, numCarried, numScan,
                              "runs more than " +
                                  Twine(kMaxUnrolledIterations) +
                                  " iterations, the most Kiln unrolls");
    SmallVector<SubgraphValue> args{
        c.scalar(i64, static_cast<double>(iteration)), condValue};
    args.append(carried);
    FailureOr<SmallVector<SubgraphValue>> out =
        n.importSubgraphValues(*body, args);
    if (failed(out))
      return failure();
    for (int64_t k = 0; k < 1 + numScan; ++k) {
      const SubgraphValue &v = (*out)[k ? numCarried + k : 0];
      if (v.composite)
        return n.fail((k ? "scan output " + std::to_string(k - 1)
                         : std::string("the body's condition")) +
                      " is " + describe(v) + "; it must be a tensor");
    }
    condValue = (*out)[0].tensor;
    cond = constantBool(condValue);
    if (!cond)
      return importDeviceLoop(n, *body, numCarried, numScan,
                              "the body's condition is only known at run "
                              "time");
    for (size_t i = 0; i < numCarried; ++i)
      carried[i] = (*out)[1 + i];
    for (int64_t j = 0; j < numScan; ++j)
      scans[j].push_back((*out)[1 + numCarried + j].tensor);
    ++iteration;
  }
  SmallVector<SubgraphValue> results(carried);
  for (int64_t j = 0; j < numScan; ++j) {
    if (scans[j].empty())
      return n.fail("scan output " + Twine(j) +
                    " of a loop that runs no iteration has no known shape");
    results.push_back(stack(c, scans[j], 0));
  }
  if (c.failed())
    return failure();
  return setSubgraphResults(n, results);
}

/// Runs a Scan body over `steps` slices of `scanInputs` (along `axes`,
/// reversed where `directions` is 1), threading `states`; appends each
/// step's scan outputs to `outs`.
LogicalResult unrollScan(Composer &c, const onnx::GraphProto &body,
                         SmallVectorImpl<Value> &states,
                         ArrayRef<Value> scanInputs, ArrayRef<int64_t> axes,
                         ArrayRef<int64_t> directions, int64_t steps,
                         SmallVectorImpl<SmallVector<Value>> &outs) {
  NodeImporter &n = c.importer();
  size_t numStates = states.size();
  for (int64_t s = 0; s < steps; ++s) {
    SmallVector<Value> args(states.begin(), states.end());
    for (auto [j, in] : llvm::enumerate(scanInputs)) {
      int64_t t = directions[j] ? steps - 1 - s : s;
      SmallVector<int64_t> shape(typeOf(in).getShape());
      shape.erase(shape.begin() + axes[j]);
      args.push_back(c.reshape(c.sliceAxis(in, axes[j], t, t + 1), shape));
    }
    if (c.failed())
      return failure();
    FailureOr<SmallVector<Value>> out = n.importSubgraph(body, args);
    if (failed(out))
      return failure();
    for (size_t i = 0; i < numStates; ++i)
      states[i] = (*out)[i];
    for (size_t j = 0; j < outs.size(); ++j)
      outs[j].push_back((*out)[numStates + j]);
  }
  return success();
}

LogicalResult importScan(NodeImporter &n) {
  const onnx::GraphProto *body = n.graphAttr("body");
  if (!body)
    return failure();
  int64_t numScanInputs = n.intAttr("num_scan_inputs", -1);
  int64_t numInputs = static_cast<int64_t>(n.numInputs());
  if (numScanInputs < 1 || numScanInputs > numInputs)
    return n.fail("num_scan_inputs must be between 1 and the number of "
                  "inputs");
  int64_t numStates = numInputs - numScanInputs;
  int64_t numScanOutputs = body->output_size() - numStates;
  if (body->input_size() != numInputs || numScanOutputs < 0)
    return n.fail("body must take the " + Twine(numStates) +
                  " states and one slice of each scan input, and return the "
                  "states and the scan outputs");
  for (int64_t i = 0; i < numInputs; ++i)
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) + " is omitted");
  auto listAttr = [&](StringRef name, int64_t count,
                      int64_t fill) -> SmallVector<int64_t> {
    SmallVector<int64_t> v = n.intsAttr(name);
    if (v.empty())
      v.assign(count, fill);
    return v;
  };
  SmallVector<int64_t> inAxes = listAttr("scan_input_axes", numScanInputs, 0);
  SmallVector<int64_t> inDirs =
      listAttr("scan_input_directions", numScanInputs, 0);
  SmallVector<int64_t> outAxes =
      listAttr("scan_output_axes", numScanOutputs, 0);
  SmallVector<int64_t> outDirs =
      listAttr("scan_output_directions", numScanOutputs, 0);
  if (static_cast<int64_t>(inAxes.size()) != numScanInputs ||
      static_cast<int64_t>(inDirs.size()) != numScanInputs ||
      static_cast<int64_t>(outAxes.size()) != numScanOutputs ||
      static_cast<int64_t>(outDirs.size()) != numScanOutputs)
    return n.fail("scan_input_axes/directions need one entry per scan input "
                  "and scan_output_axes/directions one per scan output");
  int64_t steps = -1;
  for (int64_t j = 0; j < numScanInputs; ++j) {
    RankedTensorType type = n.inputType(numStates + j);
    FailureOr<int64_t> axis =
        normalizeAxisOrFail(n, inAxes[j], type.getRank(), "scan_input_axes");
    if (failed(axis))
      return failure();
    inAxes[j] = *axis;
    int64_t length = type.getDimSize(*axis);
    if (steps >= 0 && length != steps)
      return n.fail("scan inputs have different sequence lengths (" +
                    Twine(steps) + " and " + Twine(length) + ")");
    steps = length;
  }
  if (steps > kMaxUnrolledIterations)
    return n.fail("scans " + Twine(steps) + " steps, more than the " +
                  Twine(kMaxUnrolledIterations) + " Kiln unrolls");
  if (steps == 0 && numScanOutputs > 0)
    return n.fail("a scan of no steps gives scan outputs of unknown shape");
  Composer c(n);
  SmallVector<Value> states, scanInputs;
  for (int64_t i = 0; i < numStates; ++i)
    states.push_back(n.input(i));
  for (int64_t j = 0; j < numScanInputs; ++j)
    scanInputs.push_back(n.input(numStates + j));
  SmallVector<SmallVector<Value>> outs(numScanOutputs);
  if (failed(unrollScan(c, *body, states, scanInputs, inAxes, inDirs, steps,
                        outs)))
    return failure();
  SmallVector<Value> results(states);
  for (int64_t j = 0; j < numScanOutputs; ++j) {
    int64_t rank = typeOf(outs[j].front()).getRank() + 1;
    FailureOr<int64_t> axis =
        normalizeAxisOrFail(n, outAxes[j], rank, "scan_output_axes");
    if (failed(axis))
      return failure();
    if (outDirs[j])
      std::reverse(outs[j].begin(), outs[j].end());
    results.push_back(stack(c, outs[j], *axis));
  }
  return bindComposed(c, results);
}

/// Scan-8: a leading batch axis on every state and scan input (scan axis
/// 1), an optional sequence_lens first; each batch row is scanned on its
/// own and the results stacked again.
LogicalResult importScan8(NodeImporter &n) {
  const onnx::GraphProto *body = n.graphAttr("body");
  if (!body)
    return failure();
  int64_t numScanInputs = n.intAttr("num_scan_inputs", -1);
  int64_t numInputs = static_cast<int64_t>(n.numInputs()) - 1;
  if (numScanInputs < 1 || numScanInputs > numInputs)
    return n.fail("num_scan_inputs must be between 1 and the number of "
                  "inputs after sequence_lens");
  int64_t numStates = numInputs - numScanInputs;
  int64_t numScanOutputs = body->output_size() - numStates;
  if (body->input_size() != numInputs || numScanOutputs < 0)
    return n.fail("body must take the " + Twine(numStates) +
                  " states and one slice of each scan input, and return the "
                  "states and the scan outputs");
  for (int64_t i = 1; i <= numInputs; ++i)
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) + " is omitted");
  SmallVector<int64_t> dirs = n.intsAttr("directions");
  if (dirs.empty())
    dirs.assign(numScanInputs, 0);
  if (static_cast<int64_t>(dirs.size()) != numScanInputs)
    return n.fail("directions needs one entry per scan input");
  int64_t batch = -1, steps = -1;
  for (int64_t i = 1; i <= numInputs; ++i) {
    RankedTensorType type = n.inputType(i);
    bool scanInput = i > numStates;
    if (type.getRank() < (scanInput ? 2 : 1) ||
        (batch >= 0 && type.getDimSize(0) != batch))
      return n.fail("every state and scan input needs the same leading "
                    "batch dimension (and scan inputs a sequence axis)");
    batch = type.getDimSize(0);
    if (scanInput) {
      if (steps >= 0 && type.getDimSize(1) != steps)
        return n.fail("scan inputs have different sequence lengths (" +
                      Twine(steps) + " and " + Twine(type.getDimSize(1)) +
                      ")");
      steps = type.getDimSize(1);
    }
  }
  if (n.hasInput(0)) {
    std::optional<DenseElementsAttr> lens = constantOf(n.input(0));
    if (!lens)
      return n.fail("sequence_lens is only known at run time (not supported "
                    "yet)");
    for (const APInt &v : lens->getValues<APInt>())
      if (v.getSExtValue() != steps)
        return n.fail("sequence_lens shorter than the sequence (" +
                      Twine(v.getSExtValue()) + " of " + Twine(steps) +
                      ") are not supported yet");
  }
  if (batch * steps > kMaxUnrolledIterations)
    return n.fail("scans " + Twine(batch) + " x " + Twine(steps) +
                  " steps, more than the " + Twine(kMaxUnrolledIterations) +
                  " Kiln unrolls");
  if (steps == 0 && numScanOutputs > 0)
    return n.fail("a scan of no steps gives scan outputs of unknown shape");
  Composer c(n);
  auto row = [&](Value v, int64_t b) {
    SmallVector<int64_t> shape(typeOf(v).getShape());
    shape.erase(shape.begin());
    return c.reshape(c.sliceAxis(v, 0, b, b + 1), shape);
  };
  SmallVector<SmallVector<Value>> finalStates(numStates),
      scanOutputs(numScanOutputs);
  for (int64_t b = 0; b < batch; ++b) {
    SmallVector<Value> states, scanInputs;
    for (int64_t i = 1; i <= numStates; ++i)
      states.push_back(row(n.input(i), b));
    for (int64_t j = 0; j < numScanInputs; ++j)
      scanInputs.push_back(row(n.input(1 + numStates + j), b));
    SmallVector<int64_t> axes(numScanInputs, 0);
    SmallVector<SmallVector<Value>> outs(numScanOutputs);
    if (failed(unrollScan(c, *body, states, scanInputs, axes, dirs, steps,
                          outs)))
      return failure();
    for (int64_t i = 0; i < numStates; ++i)
      finalStates[i].push_back(states[i]);
    for (int64_t j = 0; j < numScanOutputs; ++j)
      scanOutputs[j].push_back(stack(c, outs[j], 0));
  }
  SmallVector<Value> results;
  for (int64_t i = 0; i < numStates; ++i)
    results.push_back(stack(c, finalStates[i], 0));
  for (int64_t j = 0; j < numScanOutputs; ++j)
    results.push_back(stack(c, scanOutputs[j], 0));
  return bindComposed(c, results);
}

} // namespace

void registerControlFlowHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.push_back(
      {"If", 1, importIf,
       "run-time condition: branches with a contraction, recurrence or "
       "loop run on the device only when chosen, lighter ones both run and "
       "kiln.select picks; branch outputs must have equal shapes; a "
       "sequence or optional output needs as many tensors in both "
       "branches"});
  handlers.push_back(
      {"Loop", 1, importLoop,
       "compile-time trip count and condition: unrolled (up to 1024 "
       "iterations; loop-carried sequences and optionals resolved per "
       "iteration); otherwise a device-side loop (fixed-shape tensor "
       "state, no scan outputs)"});
  handlers.push_back({"Scan", 8, importScan8,
                      "batched form: sequence_lens must be a constant equal "
                      "to the sequence length; unrolled per batch row (at "
                      "most 1024 steps in all)"});
  handlers.push_back({"Scan", 9, importScan,
                      "static sequence length, unrolled (at most 1024 "
                      "steps)"});
}

} // namespace kiln::onnx_frontend

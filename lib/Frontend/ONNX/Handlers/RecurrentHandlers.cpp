//===- RecurrentHandlers.cpp - ONNX RNN, GRU and LSTM
//----------------------===//
//
// The recurrent layers, decomposed into kiln ops at import:
//
//   1. the input projections of every time step are one kiln.matmul up front,
//      `[T * B, I] x [I, G * H]` per direction (G gates), with the input and
//      recurrent biases folded in, so they reach the tensor-core templates;
//   2. the recurrence is unrolled over the (static) sequence length: per step
//      one `[B, H] x [H, G * H]` kiln.matmul with the recurrent weights and
//      the gate arithmetic, which kiln-fuse turns into one elementwise kernel.
//
// For inference the second part is one kiln.recurrence per direction
// instead (persistentDirection), which kiln-lower-recurrence turns into one
// persistent kernel: all T steps in one launch, R resident in shared
// memory. The unrolled form stays for training (kiln-autodiff
// differentiates the steps), for `kilnc --recurrence=unroll`, and for
// layers the kernel does not take (symbolic sizes, H above 4096, a clip
// that is not positive).
//
// Everything in the ONNX spec is supported: directions forward, reverse and
// bidirectional; every activation the spec allows with activation_alpha /
// activation_beta (consumed in the order of the activations, as onnxruntime
// does); `clip` on every gate's pre-activation (not on the LSTM cell state
// that h reads); `sequence_lens` (a step at or
// past a batch row's length keeps that row's state and writes zeros to Y, so
// a reverse direction starts at the row's last valid step; a row of length
// 0 has zero last states, as onnxruntime's LSTM and GRU give); initial states;
// LSTM peepholes and `input_forget`; GRU's `linear_before_reset`; `layout` 0
// and 1; all optional outputs.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
};

/// Gates per cell and activations per direction.
int64_t gateCount(Cell cell) {
  return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
}
int64_t activationCount(Cell cell) {
  return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
}

/// Whether an activation reads alpha / beta, and their ONNX defaults.
struct ActivationInfo {
  bool known, usesAlpha, usesBeta;
  float alpha, beta;
};
ActivationInfo activationInfo(StringRef name) {
  return llvm::StringSwitch<ActivationInfo>(name.lower())
      .Case("relu", {true, false, false, 0, 0})
      .Case("tanh", {true, false, false, 0, 0})
      .Case("sigmoid", {true, false, false, 0, 0})
      .Case("softsign", {true, false, false, 0, 0})
      .Case("softplus", {true, false, false, 0, 0})
      .Case("leakyrelu", {true, true, false, 0.01f, 0})
      .Case("thresholdedrelu", {true, true, false, 1.0f, 0})
      .Case("elu", {true, true, false, 1.0f, 0})
      .Case("hardsigmoid", {true, true, true, 0.2f, 0.5f})
      .Case("affine", {true, true, true, 1.0f, 0.0f})
      .Case("scaledtanh", {true, true, true, 1.0f, 1.0f})
      .Default({false, false, false, 0, 0});
}

/// The activations of every direction, `numDirections * activationCount`
/// entries; a list of one direction's worth serves both directions.
FailureOr<SmallVector<Activation>> readActivations(NodeImporter &n, Cell cell,
                                                   int64_t numDirections) {
  int64_t count = activationCount(cell);
  SmallVector<std::string> names = n.stringsAttr("activations");
  if (names.empty()) {
    static const char *const defaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < numDirections; ++d)
      for (int64_t i = 0; i < count; ++i)
        names.push_back(cell == Cell::Rnn ? "Tanh" : defaults[i]);
  } else if (static_cast<int64_t>(names.size()) == count &&
             numDirections == 2) {
    SmallVector<std::string> once(names);
    names.append(once.begin(), once.end());
  }
  if (static_cast<int64_t>(names.size()) != count * numDirections)
    return n.fail("activations has " + Twine(names.size()) +
                  " entries; expected " + Twine(count * numDirections) + " (" +
                  Twine(count) + " per direction)");
  SmallVector<float> alphas = n.floatsAttr("activation_alpha");
  SmallVector<float> betas = n.floatsAttr("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  SmallVector<Activation> result;
  for (const std::string &name : names) {
    ActivationInfo info = activationInfo(name);
    if (!info.known)
      return n.fail("activation '" + name + "' is not one the spec allows");
    Activation a{name, info.alpha, info.beta};
    if (info.usesAlpha && nextAlpha < alphas.size())
      a.alpha = alphas[nextAlpha++];
    if (info.usesBeta && nextBeta < betas.size())
      a.beta = betas[nextBeta++];
    result.push_back(a);
  }
  return result;
}

Value activate(Composer &c, const Activation &a, Value x) {
  if (!x)
    return {};
  NodeImporter &n = c.importer();
  Type type = elementTypeOf(x);
  std::string name = StringRef(a.name).lower();
  if (name == "relu")
    return c.make<ReluOp>(x);
  if (name == "tanh")
    return c.make<TanhOp>(x);
  if (name == "sigmoid")
    return c.make<SigmoidOp>(x);
  if (name == "softplus")
    return c.make<SoftplusOp>(x);
  if (name == "softsign")
    return c.make<DivOp>(
        {x, c.make<AddOp>({c.make<AbsOp>(x), c.scalar(type, 1.0)})});
  if (name == "leakyrelu")
    return c.make<LeakyReluOp>(x, {n.namedF32("alpha", a.alpha)});
  if (name == "elu")
    return c.make<EluOp>(x, {n.namedF32("alpha", a.alpha)});
  if (name == "hardsigmoid")
    return c.make<HardSigmoidOp>(
        x, {n.namedF32("alpha", a.alpha), n.namedF32("beta", a.beta)});
  if (name == "thresholdedrelu")
    return c.make<SelectOp>({c.make<GreaterOp>({x, c.scalar(type, a.alpha)}),
                             x, c.scalar(type, 0.0)});
  if (name == "affine")
    return c.make<AddOp>(
        {c.make<MulOp>({x, c.scalar(type, a.alpha)}), c.scalar(type, a.beta)});
  // scaledtanh: alpha * tanh(beta * x).
  return c.make<MulOp>(
      {c.make<TanhOp>(c.make<MulOp>({x, c.scalar(type, a.beta)})),
       c.scalar(type, a.alpha)});
}

/// What one direction's recurrence reads.
struct Direction {
  bool reverse = false;
  Value inputProjection; // [T, B, G * H], biases folded in
  Value recurrentT;      // [H, G * H]
  Value recurrentBiasH;  // GRU linear_before_reset: R's bias of the h gate
  Value peepholes[3];    // LSTM: i, o, f, [H] each (null when absent)
  Value initialH, initialC; // [B, H]
  bool initialHIsZero = false; // no initial_h
  ArrayRef<Activation> activations;
};

struct CellConfig {
  Cell cell;
  int64_t steps, batch, hidden;
  std::optional<float> clip;
  bool linearBeforeReset = false;
  bool inputForget = false;
  Value sequenceLens; // [B, 1] i32, null when every row runs all steps
};

/// Runs one direction; returns Y ([T, 1, B, H]), the last H and the last C.
std::tuple<Value, Value, Value> runDirection(Composer &c, const CellConfig &cfg,
                                             const Direction &dir) {
  NodeImporter &n = c.importer();
  int64_t h = cfg.hidden, g = gateCount(cfg.cell);
  Type type = elementTypeOf(dir.inputProjection);
  auto gate = [&](Value v, int64_t index) {
    return c.sliceAxis(v, 1, index * h, (index + 1) * h);
  };
  auto clipped = [&](Value v) {
    if (!cfg.clip || !v)
      return v;
    return c.make<ClipOp>(v, {n.namedF64("min", -*cfg.clip),
                              n.namedF64("max", *cfg.clip)});
  };
  auto f = [&](unsigned i, Value v) {
    return activate(c, dir.activations[i], clipped(v));
  };
  Value H = dir.initialH, C = dir.initialC;
  // Without initial_h the first step's recurrent products are zero: they are
  // left out rather than computed from a zero constant.
  bool zeroH = dir.initialHIsZero;
  auto recur = [&](Value lhs, Value rhs) -> Value {
    return zeroH ? Value() : c.make<MatmulOp>({lhs, rhs});
  };
  auto plus = [&](Value a, Value b) { return b ? c.make<AddOp>({a, b}) : a; };
  SmallVector<Value> outputs(cfg.steps);
  for (int64_t s = 0; s < cfg.steps; ++s) {
    int64_t t = dir.reverse ? cfg.steps - 1 - s : s;
    Value x = c.reshape(c.sliceAxis(dir.inputProjection, 0, t, t + 1),
                        {cfg.batch, g * h});
    Value newH, newC;
    if (cfg.cell == Cell::Rnn) {
      newH = f(0, plus(x, recur(H, dir.recurrentT)));
    } else if (cfg.cell == Cell::Lstm) {
      Value pre = plus(x, recur(H, dir.recurrentT));
      auto peep = [&](Value v, int64_t which, Value state) {
        if (!dir.peepholes[which])
          return v;
        return c.make<AddOp>({v, c.make<MulOp>({dir.peepholes[which], state})});
      };
      Value i = f(0, peep(gate(pre, 0), 0, C));
      Value forget = cfg.inputForget
                         ? c.make<SubOp>({c.scalar(type, 1.0), i})
                         : f(0, peep(gate(pre, 2), 2, C));
      Value candidate = f(1, gate(pre, 3));
      newC = c.make<AddOp>(
          {c.make<MulOp>({forget, C}), c.make<MulOp>({i, candidate})});
      Value o = f(0, peep(gate(pre, 1), 1, newC));
      // `clip` bounds the gates' pre-activations, not the cell state that
      // h reads (onnxruntime does the same).
      newH = c.make<MulOp>({o, activate(c, dir.activations[2], newC)});
    } else {
      // GRU: gates z, r, h.
      Value zr = c.sliceAxis(dir.recurrentT, 1, 0, 2 * h);
      Value rh = c.sliceAxis(dir.recurrentT, 1, 2 * h, 3 * h);
      Value z, r, candidate;
      if (cfg.linearBeforeReset) {
        Value hr = recur(H, dir.recurrentT);
        z = f(0, plus(gate(x, 0), hr ? gate(hr, 0) : Value()));
        r = f(0, plus(gate(x, 1), hr ? gate(hr, 1) : Value()));
        Value hh = plus(dir.recurrentBiasH, hr ? gate(hr, 2) : Value());
        candidate = f(1, c.make<AddOp>({gate(x, 2), c.make<MulOp>({r, hh})}));
      } else {
        Value hzr = recur(H, zr);
        z = f(0, plus(gate(x, 0), hzr ? gate(hzr, 0) : Value()));
        r = f(0, plus(gate(x, 1), hzr ? gate(hzr, 1) : Value()));
        Value reset = zeroH ? Value()
                            : c.make<MatmulOp>({c.make<MulOp>({r, H}), rh});
        candidate = f(1, plus(gate(x, 2), reset));
      }
      // (1 - z) * candidate + z * H = candidate + z * (H - candidate).
      newH = c.make<AddOp>(
          {candidate, c.make<MulOp>({z, c.make<SubOp>({H, candidate})})});
    }
    Value y = newH;
    if (cfg.sequenceLens) {
      Value live = c.make<LessOp>(
          {c.scalar(elementTypeOf(cfg.sequenceLens), static_cast<double>(t)),
           cfg.sequenceLens});
      y = c.make<SelectOp>({live, newH, c.scalar(type, 0.0)});
      newH = c.make<SelectOp>({live, newH, H});
      if (newC)
        newC = c.make<SelectOp>({live, newC, C});
    }
    outputs[t] = c.reshape(y, {1, 1, cfg.batch, h});
    H = newH;
    C = newC;
    zeroH = false;
  }
  // A row of length 0 has no last state: zeros, as onnxruntime's LSTM and
  // GRU give (not the initial state).
  if (cfg.sequenceLens) {
    Value some = c.make<GreaterOp>(
        {cfg.sequenceLens, c.scalar(elementTypeOf(cfg.sequenceLens), 0.0)});
    H = c.make<SelectOp>({some, H, c.scalar(type, 0.0)});
    if (C)
      C = c.make<SelectOp>({some, C, c.scalar(type, 0.0)});
  }
  return {c.concat(outputs, 0), H, C};
}

/// Whether one direction becomes a kiln.recurrence (a persistent kernel,
/// kiln-lower-recurrence) rather than unrolled steps: static sizes, a float
/// type the kernel reads, a positive clip, and H <= 4096 (one batch row's
/// state, fp32 h twice, the gates, c and GRU's r * h, then fits sm_80's
/// 163 KB in one block; the kernel cuts the batch into chunks that fit).
bool persistentFits(NodeImporter &n, const CellConfig &cfg, Type type) {
  constexpr int64_t kMaxHidden = 4096;
  return n.persistentRecurrence() && !ShapedType::isDynamic(cfg.batch) &&
         !ShapedType::isDynamic(cfg.hidden) &&
         !ShapedType::isDynamic(cfg.steps) && cfg.hidden <= kMaxHidden &&
         (!cfg.clip || *cfg.clip > 0) &&
         (type.isF32() || type.isF16() || type.isBF16());
}

/// One direction as a kiln.recurrence: Y ([T, 1, B, H]), the last H and
/// the last C.
std::tuple<Value, Value, Value>
persistentDirection(Composer &c, const CellConfig &cfg, const Direction &dir,
                    Value recurrence, Value peepholes, Value lens) {
  NodeImporter &n = c.importer();
  OpBuilder &b = n.builder();
  Type type = elementTypeOf(dir.inputProjection);
  auto state = RankedTensorType::get({cfg.batch, cfg.hidden}, type);
  SmallVector<Type> types{
      RankedTensorType::get({cfg.steps, cfg.batch, cfg.hidden}, type), state};
  if (cfg.cell == Cell::Lstm)
    types.push_back(state);
  SmallVector<Value> operands{dir.inputProjection, recurrence, dir.initialH};
  int32_t segments[7] = {1, 1, 1, 0, 0, 0, 0};
  auto optional = [&](int index, Value v) {
    if (!v)
      return;
    operands.push_back(v);
    segments[index] = 1;
  };
  optional(3, dir.initialC);
  optional(4, peepholes);
  optional(5, lens);
  // The zero reset bias the importer makes when B is absent is left out.
  if (cfg.linearBeforeReset && n.hasInput(3))
    optional(6, dir.recurrentBiasH);
  SmallVector<Attribute> names;
  SmallVector<float> alphas, betas;
  for (const Activation &a : dir.activations) {
    names.push_back(b.getStringAttr(StringRef(a.name).lower()));
    alphas.push_back(a.alpha);
    betas.push_back(a.beta);
  }
  StringRef cellName = cfg.cell == Cell::Rnn   ? "rnn"
                       : cfg.cell == Cell::Gru ? "gru"
                                               : "lstm";
  SmallVector<NamedAttribute> attrs{
      n.named("cell", RecurrentCellAttr::get(
                          b.getContext(), *symbolizeRecurrentCell(cellName))),
      n.named("activations", b.getArrayAttr(names)),
      n.named("activation_alpha", b.getDenseF32ArrayAttr(alphas)),
      n.named("activation_beta", b.getDenseF32ArrayAttr(betas)),
      n.named("operandSegmentSizes", b.getDenseI32ArrayAttr(segments))};
  if (cfg.clip)
    attrs.push_back(n.namedF32("clip", *cfg.clip));
  if (dir.reverse)
    attrs.push_back(n.namedUnit("reverse"));
  if (cfg.cell == Cell::Gru && cfg.linearBeforeReset)
    attrs.push_back(n.namedUnit("linear_before_reset"));
  if (cfg.inputForget)
    attrs.push_back(n.namedUnit("input_forget"));
  if (c.failed())
    return {};
  FailureOr<SmallVector<Value>> results =
      n.makeMultiTyped<RecurrenceOp>(types, operands, attrs);
  if (failed(results)) {
    c.fail("cannot build the recurrence");
    return {};
  }
  Value y = c.reshape((*results)[0], {cfg.steps, 1, cfg.batch, cfg.hidden});
  return {y, (*results)[1], cfg.cell == Cell::Lstm ? (*results)[2] : Value()};
}

template <Cell cell> LogicalResult importRecurrent(NodeImporter &n) {
  // Inputs: X, W, R, B, sequence_lens, initial_h (, initial_c, P for LSTM).
  size_t maxInputs = cell == Cell::Lstm ? 8 : 6;
  size_t maxOutputs = cell == Cell::Lstm ? 3 : 2;
  if (failed(n.checkArity(3, maxInputs, maxOutputs)))
    return failure();
  Composer c(n);
  int64_t layout = n.intAttr("layout", 0);
  if (layout != 0 && layout != 1)
    return n.fail("layout " + Twine(layout) + " is not 0 or 1");
  std::string direction = n.stringAttr("direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return n.fail("direction '" + direction +
                  "' is not forward, reverse or bidirectional");
  int64_t numDirections = direction == "bidirectional" ? 2 : 1;

  RankedTensorType xType = n.inputType(0), wType = n.inputType(1),
                   rType = n.inputType(2);
  if (xType.getRank() != 3 || wType.getRank() != 3 || rType.getRank() != 3)
    return n.fail("X, W and R must have rank 3 (got " +
                  Twine(xType.getRank()) + ", " + Twine(wType.getRank()) +
                  ", " + Twine(rType.getRank()) + ")");
  if (!isa<FloatType>(xType.getElementType()))
    return n.fail("X must be a float tensor");
  int64_t g = gateCount(cell);
  int64_t hidden = rType.getDimSize(2);
  int64_t steps = xType.getDimSize(layout == 0 ? 0 : 1);
  int64_t batch = xType.getDimSize(layout == 0 ? 1 : 0);
  int64_t inputSize = xType.getDimSize(2);
  if (n.hasAttr("hidden_size") && n.intAttr("hidden_size", 0) != hidden)
    return n.fail("hidden_size " + Twine(n.intAttr("hidden_size", 0)) +
                  " disagrees with R's last dimension " + Twine(hidden));
  if (wType.getShape() != ArrayRef<int64_t>{numDirections, g * hidden,
                                            inputSize} ||
      rType.getShape() != ArrayRef<int64_t>{numDirections, g * hidden, hidden})
    return n.fail("W must be [" + Twine(numDirections) + ", " +
                  Twine(g * hidden) + ", " + Twine(inputSize) + "] and R [" +
                  Twine(numDirections) + ", " + Twine(g * hidden) + ", " +
                  Twine(hidden) + "] for direction '" + direction + "'");
  if (steps < 1)
    return n.fail("sequence length must be at least 1");
  Type type = xType.getElementType();
  for (size_t i = 1; i < n.numInputs(); ++i)
    if (n.hasInput(i) && i != 4 && n.inputType(i).getElementType() != type)
      return n.fail("input " + Twine(i) + " has another element type than X");
  auto expectShape = [&](size_t i, ArrayRef<int64_t> shape,
                         StringRef what) -> LogicalResult {
    if (!n.hasInput(i) || n.inputType(i).getShape() == shape)
      return success();
    std::string dims;
    for (auto [k, d] : llvm::enumerate(shape))
      dims += (k ? ", " : "") + std::to_string(d);
    return n.fail(Twine(what) + " must have shape [" + dims + "]");
  };
  SmallVector<int64_t> stateShape =
      layout == 0 ? SmallVector<int64_t>{numDirections, batch, hidden}
                  : SmallVector<int64_t>{batch, numDirections, hidden};
  if (failed(expectShape(3, {numDirections, 2 * g * hidden}, "B")) ||
      failed(expectShape(4, {batch}, "sequence_lens")) ||
      failed(expectShape(5, stateShape, "initial_h")) ||
      (cell == Cell::Lstm &&
       (failed(expectShape(6, stateShape, "initial_c")) ||
        failed(expectShape(7, {numDirections, 3 * hidden}, "P")))))
    return failure();
  if (n.hasInput(4) && !n.inputType(4).getElementType().isInteger(32))
    return n.fail("sequence_lens must be int32");

  FailureOr<SmallVector<Activation>> activations =
      readActivations(n, cell, numDirections);
  if (failed(activations))
    return failure();

  CellConfig cfg{cell, steps, batch, hidden, std::nullopt};
  if (n.hasAttr("clip"))
    cfg.clip = n.floatAttr("clip", 0);
  cfg.linearBeforeReset = n.intAttr("linear_before_reset", 0) != 0;
  cfg.inputForget = n.intAttr("input_forget", 0) != 0;
  if (n.hasInput(4)) {
    bool allFull = false;
    if (std::optional<DenseElementsAttr> lens = n.constantInput(4)) {
      allFull = true;
      for (const APInt &v : lens->getValues<APInt>()) {
        int64_t len = v.getSExtValue();
        if (len < 0 || len > steps)
          return n.fail("sequence_lens holds " + Twine(len) +
                        ", outside [0, " + Twine(steps) + "]");
        allFull &= len == steps;
      }
    }
    if (!allFull)
      cfg.sequenceLens = c.reshape(n.input(4), {batch, 1});
  }
  bool persistent = persistentFits(n, cfg, type);

  // Everything in layout 0: X [T, B, I], states [D, B, H].
  Value x = layout == 0 ? n.input(0) : c.transpose(n.input(0), {1, 0, 2});
  Value xRows = c.reshape(x, {steps * batch, inputSize});
  auto state = [&](size_t i) -> Value {
    if (!n.hasInput(i))
      return c.constant(RankedTensorType::get({numDirections, batch, hidden},
                                              type),
                        {0.0});
    return layout == 0 ? n.input(i) : c.transpose(n.input(i), {1, 0, 2});
  };
  Value initialH = state(5);
  Value initialC = cell == Cell::Lstm ? state(6) : Value();

  SmallVector<Value> ys, lastH, lastC;
  for (int64_t d = 0; d < numDirections; ++d) {
    Direction dir;
    dir.reverse = direction == "reverse" || d == 1;
    dir.activations = ArrayRef<Activation>(*activations)
                          .slice(d * activationCount(cell),
                                 activationCount(cell));
    Value w = c.reshape(c.sliceAxis(n.input(1), 0, d, d + 1),
                        {g * hidden, inputSize});
    Value r = c.reshape(c.sliceAxis(n.input(2), 0, d, d + 1),
                        {g * hidden, hidden});
    if (!persistent)
      dir.recurrentT = c.transpose(r, {1, 0});
    Value projection = c.make<MatmulOp>({xRows, c.transpose(w, {1, 0})});
    if (n.hasInput(3)) {
      Value b = c.reshape(c.sliceAxis(n.input(3), 0, d, d + 1),
                          {2 * g * hidden});
      Value wb = c.sliceAxis(b, 0, 0, g * hidden);
      Value rb = c.sliceAxis(b, 0, g * hidden, 2 * g * hidden);
      Value bias = wb;
      if (cell == Cell::Gru && cfg.linearBeforeReset) {
        // R's bias of the h gate is applied inside r * (...).
        Value rbZr = c.sliceAxis(rb, 0, 0, 2 * hidden);
        Value zeros = c.constant(RankedTensorType::get({hidden}, type), {0.0});
        bias = c.make<AddOp>({wb, c.concat({rbZr, zeros}, 0)});
        dir.recurrentBiasH = c.sliceAxis(rb, 0, 2 * hidden, 3 * hidden);
      } else {
        bias = c.make<AddOp>({wb, rb});
      }
      projection = c.make<AddOp>({projection, bias});
    }
    if (cell == Cell::Gru && cfg.linearBeforeReset && !dir.recurrentBiasH)
      dir.recurrentBiasH =
          c.constant(RankedTensorType::get({hidden}, type), {0.0});
    dir.inputProjection = c.reshape(projection, {steps, batch, g * hidden});
    Value peepholes;
    if (cell == Cell::Lstm && n.hasInput(7)) {
      Value p = c.reshape(c.sliceAxis(n.input(7), 0, d, d + 1), {3 * hidden});
      peepholes = p;
      for (int64_t k = 0; k < 3 && !persistent; ++k)
        dir.peepholes[k] = c.sliceAxis(p, 0, k * hidden, (k + 1) * hidden);
    }
    dir.initialH =
        c.reshape(c.sliceAxis(initialH, 0, d, d + 1), {batch, hidden});
    dir.initialHIsZero = !n.hasInput(5);
    if (initialC)
      dir.initialC =
          c.reshape(c.sliceAxis(initialC, 0, d, d + 1), {batch, hidden});
    if (c.failed())
      return failure();
    auto [y, h, cState] =
        persistent
            ? persistentDirection(c, cfg, dir, r, peepholes,
                                  cfg.sequenceLens ? n.input(4) : Value())
            : runDirection(c, cfg, dir);
    if (c.failed())
      return failure();
    ys.push_back(y);
    lastH.push_back(c.reshape(h, {1, batch, hidden}));
    if (cell == Cell::Lstm)
      lastC.push_back(c.reshape(cState, {1, batch, hidden}));
  }
  Value y = c.concat(ys, 1);                   // [T, D, B, H]
  Value yh = c.concat(lastH, 0);               // [D, B, H]
  Value yc = cell == Cell::Lstm ? c.concat(lastC, 0) : Value();
  if (layout == 1) {
    y = c.transpose(y, {2, 0, 1, 3}); // [B, T, D, H]
    yh = c.transpose(yh, {1, 0, 2});
    if (yc)
      yc = c.transpose(yc, {1, 0, 2});
  }
  SmallVector<Value> results{y, yh};
  if (cell == Cell::Lstm)
    results.push_back(yc);
  return bindComposed(c, results);
}

} // namespace

void registerRecurrentHandlers(SmallVectorImpl<Handler> &handlers) {
  constexpr const char *limits =
      "static sequence length; each direction one persistent kernel (a "
      "cluster of up to 8 blocks per 16 batch rows on sm_90) when H <= "
      "4096, else, and for training or --recurrence=unroll, unrolled over "
      "time steps";
  handlers.push_back({"RNN", 7, importRecurrent<Cell::Rnn>, limits});
  handlers.push_back({"RNN", 14, importRecurrent<Cell::Rnn>, limits});
  handlers.push_back({"GRU", 7, importRecurrent<Cell::Gru>, limits});
  handlers.push_back({"GRU", 14, importRecurrent<Cell::Gru>, limits});
  handlers.push_back({"LSTM", 7, importRecurrent<Cell::Lstm>, limits});
  handlers.push_back({"LSTM", 14, importRecurrent<Cell::Lstm>, limits});
}

} // namespace kiln::onnx_frontend

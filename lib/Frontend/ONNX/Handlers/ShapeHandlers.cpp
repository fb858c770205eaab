//===- ShapeHandlers.cpp - ONNX constants, shapes and pass-through ops
//-----===//
//
// Constant, ConstantOfShape, Shape, Size and Range produce compile-time values:
// with static shapes, the Shape -> Gather -> Concat -> Reshape subgraphs that
// exporters emit fold away as they are imported. Identity and inference-mode
// Dropout forward their input.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

RankedTensorType i64Tensor(NodeImporter &n, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, n.builder().getI64Type());
}

LogicalResult importConstant(NodeImporter &n) {
  if (failed(n.checkArity(0, 0)))
    return failure();
  Builder &b = n.builder();
  if (n.hasAttr("value")) {
    FailureOr<DenseElementsAttr> value = n.tensorAttr("value");
    if (failed(value))
      return failure();
    return n.setResult(n.constant(*value));
  }
  if (n.hasAttr("value_float"))
    return n.setResult(n.scalar(b.getF32Type(), n.floatAttr("value_float", 0)));
  if (n.hasAttr("value_int"))
    return n.setResult(n.scalar(
        b.getI64Type(), static_cast<double>(n.intAttr("value_int", 0))));
  if (n.hasAttr("value_floats")) {
    SmallVector<float> values = n.floatsAttr("value_floats");
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getF32Type());
    return n.setResult(
        n.constant(DenseElementsAttr::get(type, ArrayRef(values))));
  }
  if (n.hasAttr("value_ints")) {
    SmallVector<int64_t> values = n.intsAttr("value_ints");
    return n.setResult(n.constant(DenseElementsAttr::get(
        i64Tensor(n, {static_cast<int64_t>(values.size())}),
        ArrayRef(values))));
  }
  return n.fail("only value, value_float(s) and value_int(s) are supported "
                "(sparse and string constants are not)");
}

/// A splat of the shape given by the (constant) input; the value attribute
/// is a one-element tensor, f32 zero by default.
LogicalResult importConstantOfShape(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  // A shape given at run time: the declared result, guarded.
  FailureOr<SmallVector<int64_t>> shape =
      n.constantOrDeclaredInts(0, "shape", [](ArrayRef<int64_t> declared) {
        return std::optional(SmallVector<int64_t>(declared));
      });
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return n.fail("shape has a negative dimension");
  DenseElementsAttr element;
  if (n.hasAttr("value")) {
    FailureOr<DenseElementsAttr> value = n.tensorAttr("value");
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1)
      return n.fail("value must hold exactly one element");
    element = *value;
  } else {
    element = DenseElementsAttr::get(
        RankedTensorType::get({1}, n.builder().getF32Type()),
        n.builder().getF32FloatAttr(0));
  }
  auto type = RankedTensorType::get(*shape, element.getElementType());
  return n.setResult(n.constant(
      DenseElementsAttr::get(type, element.getValues<Attribute>()[0])));
}

LogicalResult importShape(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  int64_t rank = static_cast<int64_t>(shape.size());
  // start/end (opset 15) clamp like Python slicing.
  int64_t start = n.intAttr("start", 0), end = n.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  return n.setResult(n.constant(DenseElementsAttr::get(
      i64Tensor(n, {static_cast<int64_t>(dims.size())}), ArrayRef(dims))));
}

LogicalResult importSize(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  return n.setResult(
      n.scalar(n.builder().getI64Type(),
               static_cast<double>(n.inputType(0).getNumElements())));
}

/// Range needs constant operands: its length decides the result shape.
/// Range with start, limit or delta given at run time: the declared output
/// length, guarded (kind `range`); the device computes start + i * delta
/// in the element type, as the constant path's kiln.iota does.
std::optional<LogicalResult> importRuntimeRange(NodeImporter &n) {
  bool runtime = false;
  for (size_t i = 0; i < 3; ++i) {
    if (n.constantInput(i))
      continue;
    if (!n.canGuardInput(i, /*allowFloat=*/true) ||
        n.inputType(i).getNumElements() != 1)
      return std::nullopt;
    runtime = true;
  }
  std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
  if (!runtime || !declared || declared->size() != 1)
    return std::nullopt;
  const StringRef names[] = {"start", "limit", "delta"};
  SmallVector<NodeImporter::GuardOperand> operands;
  for (auto [i, name] : llvm::enumerate(names)) {
    if (!n.constantInput(i)) {
      operands.push_back({name, i, std::nullopt});
      continue;
    }
    FailureOr<SmallVector<double>> value = n.constantFloats(i, name);
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return LogicalResult(n.fail(Twine(name) + " must be a scalar"));
    operands.push_back({name, std::nullopt, std::nullopt, *value});
  }
  n.guardOperands("range", operands, {}, *declared);
  Type element = n.inputType(0).getElementType();
  Composer c(n);
  Value iota =
      c.makeTyped<IotaOp>(RankedTensorType::get(*declared, element), {},
                          {n.namedF64("start", 0.0), n.namedF64("step", 1.0)});
  Value start = c.reshape(n.input(0), {}), delta = c.reshape(n.input(2), {});
  return bindComposed(c, c.make<AddOp>({start, c.make<MulOp>({iota, delta})}));
}

LogicalResult importRange(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  if (std::optional<LogicalResult> runtime = importRuntimeRange(n))
    return *runtime;
  SmallVector<double> bounds;
  const StringRef names[] = {"start", "limit", "delta"};
  for (auto [i, name] : llvm::enumerate(names)) {
    FailureOr<SmallVector<double>> value = n.constantFloats(i, name);
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return n.fail(Twine(name) + " must be a scalar");
    bounds.push_back(value->front());
  }
  double start = bounds[0], limit = bounds[1], delta = bounds[2];
  if (delta == 0)
    return n.fail("delta is zero");
  int64_t count = std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  auto type = RankedTensorType::get({count}, n.inputType(0).getElementType());
  FailureOr<Value> iota = n.makeTyped<IotaOp>(
      type, {}, {n.namedF64("start", start), n.namedF64("step", delta)});
  if (failed(iota))
    return failure();
  return n.setResult(*iota);
}

LogicalResult importIdentity(NodeImporter &n) {
  // A sequence or optional is passed on as it is.
  if (const CompositeValue *value = n.compositeInput(0)) {
    n.setCompositeResult(0, *value);
    return success();
  }
  if (failed(n.checkArity(1, 1)))
    return failure();
  return n.setResult(n.input(0));
}

/// Inference-mode dropout is the identity; its mask output is all true. So is
/// training-mode dropout with ratio 0 (it keeps every element, scaled by
/// 1 / (1 - 0)). Other ratios drop at random: kiln.dropout when the model is
/// imported for training (train_step draws the mask), an error otherwise.
/// Training-mode dropout in an inference artifact (not kilnc --train): a
/// Philox mask drawn from the node's `seed` (0 when absent) on a stream of
/// its own, the same on every run, as RandomHandlers.cpp draws. The mask
/// output is where the mask keeps elements.
LogicalResult importInferenceTrainingDropout(NodeImporter &n, double ratio) {
  if (!(ratio > 0 && ratio < 1))
    return n.fail("ratio must be in [0, 1)");
  RankedTensorType type = n.inputType(0);
  if (!isa<FloatType>(type.getElementType()))
    return n.fail("training-mode dropout needs a floating-point input");
  Builder &b = n.builder();
  Type i32 = b.getI32Type();
  auto bits = static_cast<uint64_t>(
      static_cast<int64_t>(n.intAttr("seed", 0)));
  Value key = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({2}, i32),
      ArrayRef<int32_t>{static_cast<int32_t>(bits & 0xffffffffu),
                        static_cast<int32_t>(bits >> 32)}));
  Value counter = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({4}, i32), b.getI32IntegerAttr(0)));
  int64_t stream = Composer::philoxStream(
      n.node().output_size() ? n.node().output(0) : "");
  FailureOr<Value> mask = n.makeTyped<DropoutMaskOp>(
      type, {key, counter},
      {n.namedF32("ratio", static_cast<float>(ratio)),
       n.namedI64("stream", stream)});
  if (failed(mask))
    return failure();
  FailureOr<Value> y = n.make<MulOp>({n.input(0), *mask});
  if (failed(y))
    return failure();
  SmallVector<Value> results{*y};
  if (n.node().output_size() > 1 && !n.node().output(1).empty()) {
    FailureOr<Value> kept =
        n.make<GreaterOp>({*mask, n.scalar(type.getElementType(), 0.0)});
    if (failed(kept))
      return failure();
    results.push_back(*kept);
  }
  return n.setResults(results);
}

/// Training-mode dropout whose `training_mode` or `ratio` is given at run
/// time, in an inference artifact: element i is kept when u_i >= ratio, u_i
/// the 24-bit uniform of the node's Philox stream (RandomUniform's draw,
/// not kiln.dropout_mask's 32-bit compare: the same keep probability to
/// within 2^-24, another mask than a constant ratio gives), and scaled by
/// 1 / (1 - ratio); training_mode false selects the input and an all-true
/// mask. Ratio 0 keeps every element exactly.
LogicalResult importRuntimeDropout(NodeImporter &n) {
  RankedTensorType type = n.inputType(0);
  Type element = type.getElementType();
  if (!isa<FloatType>(element))
    return n.fail("training-mode dropout needs a floating-point input");
  if (n.training())
    return n.fail("input 'training_mode' and 'ratio' must be compile-time "
                  "constants under kilnc --train");
  Composer c(n);
  Type i32 = n.builder().getI32Type();
  auto bits = static_cast<uint64_t>(static_cast<int64_t>(n.intAttr("seed", 0)));
  Value key =
      c.constant(RankedTensorType::get({2}, i32),
                 {static_cast<double>(static_cast<int32_t>(bits & 0xffffffffu)),
                  static_cast<double>(static_cast<int32_t>(bits >> 32))});
  Value counter = c.constant(RankedTensorType::get({4}, i32), {0.0});
  Value words = c.makeTyped<PhiloxOp>(
      RankedTensorType::get(type.getShape(), i32), {key, counter},
      {n.namedI64("stream", Composer::philoxStream(n.node().output_size()
                                                       ? n.node().output(0)
                                                       : ""))});
  Type f32 = n.builder().getF32Type();
  Value u = c.make<MulOp>(
      {c.cast(c.make<BitwiseAndOp>(
                  {c.make<ShiftRightOp>({words, c.scalar(i32, 8)}),
                   c.scalar(i32, 0xffffff)}),
              f32),
       c.scalar(f32, std::ldexp(1.0, -24))});
  Value ratio = n.hasInput(1) ? c.cast(c.reshape(n.input(1), {}), f32)
                              : c.scalar(f32, 0.5);
  Value kept = c.make<GreaterEqualOp>({u, ratio});
  Value scale =
      c.cast(c.make<DivOp>({c.scalar(f32, 1.0),
                            c.make<SubOp>({c.scalar(f32, 1.0), ratio})}),
             element);
  Value y = c.make<SelectOp>(
      {kept, c.make<MulOp>({n.input(0), scale}), c.scalar(element, 0.0)});
  Value training = c.reshape(n.input(2), {});
  SmallVector<Value> results{c.make<SelectOp>({training, y, n.input(0)})};
  if (n.node().output_size() > 1 && !n.node().output(1).empty())
    results.push_back(c.make<OrOp>({kept, c.make<NotOp>({training})}));
  return bindComposed(c, results);
}

LogicalResult importDropout(NodeImporter &n) {
  if (failed(n.checkArity(1, 3, 2)))
    return failure();
  bool runtimeTraining = n.hasInput(2) && !n.constantInput(2);
  bool runtimeRatio = n.hasInput(1) && !n.constantInput(1);
  if (runtimeTraining || (runtimeRatio && n.hasInput(2) &&
                          n.constantInput(2)->getSplatValue<bool>()))
    return importRuntimeDropout(n);
  if (n.hasInput(2)) {
    std::optional<DenseElementsAttr> training = n.constantInput(2);
    if (!training)
      return n.fail("input 'training_mode' must be a compile-time constant");
    if (training->getSplatValue<bool>()) {
      double ratio = 0.5;
      if (n.hasInput(1)) {
        FailureOr<SmallVector<double>> given = n.constantFloats(1, "ratio");
        if (failed(given))
          return failure();
        if (given->size() != 1)
          return n.fail("input 'ratio' must be a scalar");
        ratio = given->front();
      }
      if (ratio != 0 && n.training()) {
        if (!(ratio > 0 && ratio < 1))
          return n.fail("ratio must be in [0, 1)");
        if (n.node().output_size() > 1 && !n.node().output(1).empty())
          return n.fail("the mask output of training-mode dropout is not "
                        "supported");
        FailureOr<Value> dropped = n.makeTyped<DropoutOp>(
            n.inputType(0), n.input(0), {n.namedF32("ratio", float(ratio))});
        if (failed(dropped))
          return failure();
        return n.setResult(*dropped);
      }
      if (ratio != 0)
        return importInferenceTrainingDropout(n, ratio);
    }
  }
  if (n.opset() < 7 && n.intAttr("is_test", 0) == 0)
    return n.fail("is_test must be 1 (inference only)");
  SmallVector<Value> results{n.input(0)};
  if (n.node().output_size() > 1 && !n.node().output(1).empty()) {
    auto type = RankedTensorType::get(n.inputType(0).getShape(),
                                      n.builder().getI1Type());
    results.push_back(n.constant(DenseElementsAttr::get(type, true)));
  }
  return n.setResults(results);
}

} // namespace

void registerShapeHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"Constant", 1, importConstant,
       "no sparse values; a STRING `value` is a host-step constant"},
      {"ConstantOfShape", 9, importConstantOfShape,
       "shape: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Shape", 1, importShape, ""},
      {"Shape", 15, importShape, ""},
      {"Size", 1, importSize, ""},
      {"Range", 11, importRange,
       "start, limit and delta: " KILN_FIXED_BY_DECLARED_SHAPE},
      {"Identity", 1, importIdentity,
       "tensors only (no sequences or optionals)"},
      {"Dropout", 7, importDropout, "inference only"},
      {"Dropout", 12, importDropout,
       "training_mode and ratio at run time: a Philox mask (not under "
       "kilnc --train); training mode: with "
       "kilnc --train a Philox mask per step (no mask output), otherwise a "
       "seeded Philox mask, the same on every run"},
  });
}

} // namespace kiln::onnx_frontend

//===- ReductionHandlers.cpp - ONNX reductions, normalisation, pooling ----===//
//
// Reduce* (kiln.reduce; L1, L2, SumSquare, LogSum and LogSumExp decomposed
// around it), ArgMax/ArgMin, Softmax/LogSoftmax, the normalisations kiln has
// ops for (layer, batch, instance, LRN) and the two it does not (Lp, mean-
// variance, decomposed), and pooling. Pooling shares its window attributes
// with Conv through WindowAttrs.h.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"
#include "RuntimeAxes.h"
#include "WindowAttrs.h"

#include <functional>
#include <numeric>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

bool keepdimsAttr(NodeImporter &n) { return n.intAttr("keepdims", 1) != 0; }

FailureOr<Value> reshape(NodeImporter &n, Value value,
                         ArrayRef<int64_t> shape) {
  return n.makeTyped<ReshapeOp>(
      RankedTensorType::get(shape, typeOf(value).getElementType()), value);
}

FailureOr<Value> reduce(NodeImporter &n, ReduceKind kind, Value input,
                        ArrayRef<int64_t> axes, bool keepdims) {
  return n.make<ReduceOp>(
      input, {n.named("kind", ReduceKindAttr::get(n.context(), kind)),
              n.namedArray("axes", axes),
              n.named("keepdims", n.builder().getBoolAttr(keepdims))});
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Makes `axes` non-negative and sorted; fails on out-of-range or repeated
/// axes.
FailureOr<SmallVector<int64_t>>
normalizeAxes(NodeImporter &n, ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    FailureOr<int64_t> d = normalizeAxisOrFail(n, axis, rank, "axes entry");
    if (failed(d))
      return failure();
    result.push_back(*d);
  }
  llvm::sort(result);
  if (std::adjacent_find(result.begin(), result.end()) != result.end())
    return n.fail("axes " + formatInts(axes) + " name an axis twice");
  return result;
}

/// Whether a Reduce* node of this opset asks to reduce nothing when it names
/// no axes.
bool isNoop(NodeImporter &n, int64_t axesInputSince) {
  return n.opset() >= axesInputSince &&
         n.intAttr("noop_with_empty_axes", 0) != 0;
}

/// For a reduction whose axes input is a graph input: the axes sets its
/// declared output shape allows (RuntimeAxes.h); none when the input is a
/// constant or cannot be guarded, or when no declared shape fixes it.
SmallVector<AxesChoice> runtimeAxesChoices(NodeImporter &n,
                                           int64_t axesInputSince,
                                           bool identityOnOnes) {
  if (n.opset() < axesInputSince || !n.canGuardInput(1) ||
      !n.inputType(0).hasStaticShape())
    return {};
  std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
  if (!declared)
    return {};
  return axesForDeclaredShape(n.inputType(0).getShape(), *declared,
                              keepdimsAttr(n), identityOnOnes);
}

/// A reduction whose axes input the declared shape fixes
/// (runtimeAxesChoices): `build` per allowed axes set, one picked at run
/// time; nothing when that does not apply.
std::optional<LogicalResult>
importRuntimeAxesReduce(NodeImporter &n, int64_t axesInputSince,
                        bool identityOnOnes,
                        function_ref<FailureOr<Value>(ArrayRef<int64_t>)> build) {
  SmallVector<AxesChoice> choices =
      runtimeAxesChoices(n, axesInputSince, identityOnOnes);
  if (choices.empty())
    return std::nullopt;
  if (failed(n.checkArity(1, 2)))
    return failure();
  return bind(n, selectByRuntimeAxes(n, 1, "axes", n.inputType(0).getShape(),
                                     choices, isNoop(n, axesInputSince),
                                     build));
}

/// The axes a Reduce* node reduces, non-negative and sorted. They come from
/// the `axes` attribute before `axesInputSince` and from the optional second
/// input (a compile-time constant) from then on. No axes means every axis,
/// unless noop_with_empty_axes (defined from `axesInputSince`) asks for
/// none. (A graph input the declared shape fixes: runtimeAxesChoices.)
FailureOr<SmallVector<int64_t>> readReduceAxes(NodeImporter &n,
                                               int64_t axesInputSince) {
  SmallVector<int64_t> axes;
  if (n.opset() < axesInputSince) {
    if (failed(n.checkArity(1, 1)))
      return failure();
    axes = n.intsAttr("axes");
  } else {
    if (failed(n.checkArity(1, 2)))
      return failure();
    if (n.hasInput(1)) {
      FailureOr<SmallVector<int64_t>> values = n.constantInts(1, "axes");
      if (failed(values))
        return failure();
      axes = std::move(*values);
    }
  }
  int64_t rank = n.inputType(0).getRank();
  if (!axes.empty())
    return normalizeAxes(n, axes, rank);
  if (isNoop(n, axesInputSince))
    return axes;
  return llvm::to_vector(llvm::seq<int64_t>(0, rank));
}

template <ReduceKind kind, int64_t axesInputSince>
LogicalResult importReduce(NodeImporter &n) {
  // Reducing a size-1 axis gives the input back for every kind here.
  if (std::optional<LogicalResult> done = importRuntimeAxesReduce(
          n, axesInputSince, /*identityOnOnes=*/true,
          [&](ArrayRef<int64_t> axes) {
            return reduce(n, kind, n.input(0), axes, keepdimsAttr(n));
          }))
    return *done;
  FailureOr<SmallVector<int64_t>> axes = readReduceAxes(n, axesInputSince);
  if (failed(axes))
    return failure();
  return bind(n, reduce(n, kind, n.input(0), *axes, keepdimsAttr(n)));
}

/// A reduction ONNX defines on top of sum or max, built from kiln ops.
using ReduceDecomposition = FailureOr<Value> (*)(NodeImporter &n, Value x,
                                                 ArrayRef<int64_t> axes,
                                                 bool keepdims);

/// sum(|x|).
FailureOr<Value> reduceL1(NodeImporter &n, Value x, ArrayRef<int64_t> axes,
                          bool keepdims) {
  FailureOr<Value> magnitude = n.make<AbsOp>(x);
  if (failed(magnitude))
    return failure();
  return reduce(n, ReduceKind::Sum, *magnitude, axes, keepdims);
}

/// sum(x * x).
FailureOr<Value> reduceSumSquare(NodeImporter &n, Value x,
                                 ArrayRef<int64_t> axes, bool keepdims) {
  FailureOr<Value> square = n.make<MulOp>({x, x});
  if (failed(square))
    return failure();
  return reduce(n, ReduceKind::Sum, *square, axes, keepdims);
}

/// sqrt(sum(x * x)).
FailureOr<Value> reduceL2(NodeImporter &n, Value x, ArrayRef<int64_t> axes,
                          bool keepdims) {
  FailureOr<Value> sumSquare = reduceSumSquare(n, x, axes, keepdims);
  if (failed(sumSquare))
    return failure();
  return n.make<SqrtOp>(*sumSquare);
}

/// log(sum(x)).
FailureOr<Value> reduceLogSum(NodeImporter &n, Value x, ArrayRef<int64_t> axes,
                              bool keepdims) {
  FailureOr<Value> sum = reduce(n, ReduceKind::Sum, x, axes, keepdims);
  if (failed(sum))
    return failure();
  return n.make<LogOp>(*sum);
}

/// log(sum(exp(x - m))) + m with m = max(x): exp never overflows. Both
/// reductions keep their axes so m broadcasts back; a final reshape drops them
/// without keepdims.
FailureOr<Value> reduceLogSumExp(NodeImporter &n, Value x,
                                 ArrayRef<int64_t> axes, bool keepdims) {
  FailureOr<Value> max = reduce(n, ReduceKind::Max, x, axes, /*keepdims=*/true);
  if (failed(max))
    return failure();
  FailureOr<Value> shifted = n.make<SubOp>({x, *max});
  if (failed(shifted))
    return failure();
  FailureOr<Value> exp = n.make<ExpOp>(*shifted);
  if (failed(exp))
    return failure();
  FailureOr<Value> sum =
      reduce(n, ReduceKind::Sum, *exp, axes, /*keepdims=*/true);
  if (failed(sum))
    return failure();
  FailureOr<Value> log = n.make<LogOp>(*sum);
  if (failed(log))
    return failure();
  FailureOr<Value> result = n.make<AddOp>({*log, *max});
  if (failed(result) || keepdims)
    return result;
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(typeOf(x).getShape())) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
      shape.push_back(size);
  }
  return reshape(n, *result, shape);
}

template <ReduceDecomposition decompose>
LogicalResult importDecomposedReduce(NodeImporter &n) {
  // All of these take their axes as an input from opset 18.
  constexpr int64_t axesInputSince = 18;
  // Not the identity on a size-1 axis: |x|, x * x, log(x).
  if (std::optional<LogicalResult> done = importRuntimeAxesReduce(
          n, axesInputSince, /*identityOnOnes=*/false,
          [&](ArrayRef<int64_t> axes) {
            return decompose(n, n.input(0), axes, keepdimsAttr(n));
          }))
    return *done;
  FailureOr<SmallVector<int64_t>> axes = readReduceAxes(n, axesInputSince);
  if (failed(axes))
    return failure();
  // The spec makes a no-op reduction the identity, not e.g. |x| for ReduceL1.
  if (axes->empty() && isNoop(n, axesInputSince))
    return n.setResult(n.input(0));
  return bind(n, decompose(n, n.input(0), *axes, keepdimsAttr(n)));
}

template <typename OpTy> LogicalResult importArgReduce(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", 0), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  SmallVector<NamedAttribute> attrs{
      n.namedI64("axis", *axis),
      n.named("keepdims", n.builder().getBoolAttr(keepdimsAttr(n)))};
  if (n.intAttr("select_last_index", 0) != 0)
    attrs.push_back(n.namedUnit("select_last_index"));
  return bind(n, n.make<OpTy>(n.input(0), attrs));
}

/// Softmax and LogSoftmax. From opset 13 they work along `axis` (default -1).
/// Before, they flattened the input to 2-D, [product of the dims before
/// `axis`, product of the rest] (default axis 1), and worked along the
/// second; the two agree when `axis` is the last dimension.
template <typename OpTy> LogicalResult importSoftmax(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  int64_t rank = shape.size();
  bool flattens = n.opset() < 13;
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", flattens ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  if (!flattens || *axis == rank - 1)
    return bind(n, n.make<OpTy>(x, {n.namedI64("axis", *axis)}));

  auto product = [](ArrayRef<int64_t> dims) {
    return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                           std::multiplies<>());
  };
  FailureOr<Value> matrix = reshape(
      n, x,
      {product(shape.take_front(*axis)), product(shape.drop_front(*axis))});
  if (failed(matrix))
    return failure();
  FailureOr<Value> rows = n.make<OpTy>(*matrix, {n.namedI64("axis", 1)});
  if (failed(rows))
    return failure();
  return bind(n, reshape(n, *rows, shape));
}

/// hardmax(x) = 1 where x is the first maximum along `axis`, else 0: an
/// argmax compared with an iota along the axis (exact, one reduction). Before
/// opset 13 the input is flattened to 2-D at `axis` (default 1) as Softmax
/// does.
LogicalResult importHardmax(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  bool flattens = n.opset() < 13;
  FailureOr<int64_t> axis = normalizeAxisOrFail(
      n, n.intAttr("axis", flattens ? 1 : -1), shape.size());
  if (failed(axis))
    return failure();
  Value rows = x;
  int64_t along = *axis;
  if (flattens && *axis != static_cast<int64_t>(shape.size()) - 1) {
    rows = c.reshape(x, {Composer::product(shape.take_front(*axis)),
                         Composer::product(shape.drop_front(*axis))});
    along = 1;
  }
  RankedTensorType rowsType = typeOf(rows);
  Value index =
      c.make<ArgMaxOp>(rows, {n.namedI64("axis", along),
                              n.named("keepdims", n.builder().getBoolAttr(true))});
  Value iota = c.iotaAlong(rowsType.getDimSize(along), along,
                           rowsType.getRank(), n.builder().getI64Type());
  Value hit = c.make<EqualOp>({iota, index});
  Value y = c.reshape(c.cast(hit, rowsType.getElementType()), shape);
  return bindComposed(c, y);
}

/// CumSum's axis is a scalar input, which must be a compile-time constant.
LogicalResult importCumSum(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  SmallVector<NamedAttribute> flags;
  if (n.intAttr("exclusive", 0) != 0)
    flags.push_back(n.namedUnit("exclusive"));
  if (n.intAttr("reverse", 0) != 0)
    flags.push_back(n.namedUnit("reverse"));
  // An axis given at run time: any axis gives the input's shape, so each
  // is built and the input picks one on the device.
  RankedTensorType type = n.inputType(0);
  if (n.canGuardInput(1) && type.getRank() > 0 &&
      n.inputType(1).getNumElements() == 1) {
    SmallVector<AxesChoice> choices;
    for (int64_t d = 0; d < type.getRank(); ++d)
      choices.push_back({{d}, {}});
    return bind(n, selectByRuntimeAxes(
                       n, 1, "axis", type.getShape(), choices,
                       /*noopWithEmptyAxes=*/false, [&](ArrayRef<int64_t> axis) {
                         SmallVector<NamedAttribute> attrs{
                             n.namedI64("axis", axis.front())};
                         attrs.append(flags);
                         return n.make<CumSumOp>(n.input(0), attrs);
                       }));
  }
  FailureOr<SmallVector<int64_t>> axisValues = n.constantInts(1, "axis");
  if (failed(axisValues))
    return failure();
  if (axisValues->size() != 1)
    return n.fail("axis must hold one value, got " +
                  Twine(axisValues->size()));
  FailureOr<int64_t> axis = normalizeAxisOrFail(n, axisValues->front(),
                                                n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  SmallVector<NamedAttribute> attrs{n.namedI64("axis", *axis)};
  attrs.append(flags);
  return bind(n, n.make<CumSumOp>(n.input(0), attrs));
}

/// TopK-1 takes k as an attribute, later versions as an input (a
/// compile-time constant). kiln.top_k always sorts, which `sorted = 0`
/// (any order) allows.
LogicalResult importTopK(NodeImporter &n) {
  int64_t k;
  if (n.opset() < 10) {
    if (failed(n.checkArity(1, 1, 2)))
      return failure();
    if (!n.hasAttr("k"))
      return n.fail("missing attribute 'k'");
    k = n.intAttr("k", 0);
  } else {
    if (failed(n.checkArity(2, 2, 2)))
      return failure();
    // K given at run time: the declared outputs' extent along the axis,
    // guarded.
    int64_t rank = n.inputType(0).getRank();
    int64_t kAxis = n.intAttr("axis", -1);
    kAxis = kAxis < 0 ? kAxis + rank : kAxis;
    FailureOr<SmallVector<int64_t>> kValues = n.constantOrDeclaredInts(
        1, "K",
        [&](ArrayRef<int64_t> declared)
            -> std::optional<SmallVector<int64_t>> {
          if (kAxis < 0 || kAxis >= rank ||
              static_cast<int64_t>(declared.size()) != rank)
            return std::nullopt;
          return SmallVector<int64_t>{declared[kAxis]};
        });
    if (failed(kValues))
      return failure();
    if (kValues->size() != 1)
      return n.fail("K must hold one value, got " + Twine(kValues->size()));
    k = kValues->front();
  }
  FailureOr<int64_t> axis = normalizeAxisOrFail(n, n.intAttr("axis", -1),
                                                n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  int64_t extent = n.inputType(0).getDimSize(*axis);
  if (k < 0 || k > extent)
    return n.fail("k " + Twine(k) + " is outside [0, " + Twine(extent) +
                  "], the extent of axis " + Twine(*axis));
  SmallVector<NamedAttribute> attrs{n.namedI64("axis", *axis),
                                    n.namedI64("k", k)};
  if (n.opset() >= 11 && n.intAttr("largest", 1) == 0)
    attrs.push_back(n.namedUnit("smallest"));
  FailureOr<SmallVector<Value>> results =
      n.makeMulti<TopKOp>(2, n.input(0), attrs);
  if (failed(results))
    return failure();
  return n.setResults(*results);
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// Only output 0 is supported; the mean and inverse standard deviation
/// outputs (training) are refused by checkArity. stash_type only sets the
/// precision of the statistics, which precision lowering decides.
/// The optional Mean and InvStdDev outputs are computed beside kiln.layer_norm
/// (which yields Y only) in the stash type, as the function body defines them:
/// mean over axes [axis, rank) with kept dims, 1 / sqrt(mean((x - mean)^2) +
/// epsilon).
LogicalResult importLayerNormalization(NodeImporter &n) {
  if (failed(n.checkArity(2, 3, 3)))
    return failure();
  int64_t rank = n.inputType(0).getRank();
  FailureOr<int64_t> axis = normalizeAxisOrFail(n, n.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  float epsilon = n.floatAttr("epsilon", 1e-5f);
  SmallVector<Value> operands{n.input(0), n.input(1)};
  if (n.hasInput(2))
    operands.push_back(n.input(2));
  FailureOr<Value> y = n.make<LayerNormOp>(
      operands, {n.namedI64("axis", *axis), n.namedF32("epsilon", epsilon)});
  if (failed(y))
    return failure();
  auto used = [&](int i) {
    return n.node().output_size() > i && !n.node().output(i).empty();
  };
  if (!used(1) && !used(2))
    return n.setResult(*y);

  int64_t stash = n.intAttr("stash_type", 1);
  Type stashType = convertElementType(static_cast<int32_t>(stash), n.context());
  if (!stashType || !isa<FloatType>(stashType))
    return n.fail("stash_type " + Twine(stash) +
                  " is not a supported floating-point type");
  Value x = n.input(0);
  if (elementTypeOf(x) != stashType) {
    FailureOr<Value> cast = n.makeTyped<CastOp>(
        RankedTensorType::get(typeOf(x).getShape(), stashType), x);
    if (failed(cast))
      return failure();
    x = *cast;
  }
  SmallVector<int64_t> axes;
  for (int64_t d = *axis; d < rank; ++d)
    axes.push_back(d);
  FailureOr<Value> mean = reduce(n, ReduceKind::Mean, x, axes, true);
  if (failed(mean))
    return failure();
  FailureOr<Value> deviation = n.make<SubOp>({x, *mean});
  if (failed(deviation))
    return failure();
  FailureOr<Value> square = n.make<MulOp>({*deviation, *deviation});
  if (failed(square))
    return failure();
  FailureOr<Value> variance = reduce(n, ReduceKind::Mean, *square, axes, true);
  if (failed(variance))
    return failure();
  FailureOr<Value> shifted =
      n.make<AddOp>({*variance, n.scalar(stashType, epsilon)});
  if (failed(shifted))
    return failure();
  FailureOr<Value> deviationScale = n.make<SqrtOp>(*shifted);
  if (failed(deviationScale))
    return failure();
  FailureOr<Value> invStdDev =
      n.make<DivOp>({n.scalar(stashType, 1.0), *deviationScale});
  if (failed(invStdDev))
    return failure();
  return n.setResults({*y, *mean, *invStdDev});
}

/// Uses the running mean and variance; in training mode (opset 14) the
/// batch's own (biased) statistics instead, and outputs the updated running
/// ones: running * momentum + batch * (1 - momentum). Opset 15 lets the
/// scale/bias and mean/variance types differ from the input's; they are cast.
LogicalResult importBatchNormalization(NodeImporter &n) {
  if (n.opset() < 9 && n.intAttr("spatial", 1) != 1)
    return n.fail("spatial 0 (per-activation statistics) is not supported");
  bool training = n.intAttr("training_mode", 0) != 0;
  if (failed(n.checkArity(5, 5, training ? 3 : 1)))
    return failure();
  Type elementType = n.inputType(0).getElementType();
  SmallVector<Value> operands{n.input(0)};
  for (size_t i = 1; i < 5; ++i) {
    Value param = n.input(i);
    if (typeOf(param).getElementType() != elementType) {
      FailureOr<Value> cast = n.makeTyped<CastOp>(
          RankedTensorType::get(typeOf(param).getShape(), elementType), param);
      if (failed(cast))
        return failure();
      param = *cast;
    }
    operands.push_back(param);
  }
  NamedAttribute epsilon = n.namedF32("epsilon", n.floatAttr("epsilon", 1e-5f));
  if (!training) {
    // kiln-autodiff updates the running statistics with the model's
    // momentum (ONNX's default 0.9 when the attribute is absent).
    float momentum = n.floatAttr("momentum", 0.9f);
    if (momentum == 0.9f)
      return bind(n, n.make<BatchNormOp>(operands, {epsilon}));
    return bind(
        n,
        n.make<BatchNormOp>(
            operands,
            {epsilon, n.namedF32(KilnDialect::MomentumAttrHelper::getNameStr(),
                                 momentum)}));
  }
  if (!isa<FloatType>(elementType))
    return n.fail("training mode needs a floating-point input");
  Value x = operands[0];
  int64_t rank = typeOf(x).getRank();
  if (rank < 2)
    return n.fail("training mode needs an input of rank >= 2, got rank " +
                  Twine(rank));
  SmallVector<int64_t> axes{0};
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  FailureOr<Value> keptMean = reduce(n, ReduceKind::Mean, x, axes, true);
  FailureOr<Value> batchMean = reduce(n, ReduceKind::Mean, x, axes, false);
  if (failed(keptMean) || failed(batchMean))
    return failure();
  FailureOr<Value> deviation = n.make<SubOp>({x, *keptMean});
  if (failed(deviation))
    return failure();
  FailureOr<Value> square = n.make<MulOp>({*deviation, *deviation});
  if (failed(square))
    return failure();
  FailureOr<Value> batchVar = reduce(n, ReduceKind::Mean, *square, axes, false);
  if (failed(batchVar))
    return failure();
  FailureOr<Value> y = n.make<BatchNormOp>(
      {x, operands[1], operands[2], *batchMean, *batchVar}, {epsilon});
  if (failed(y))
    return failure();
  double momentum = n.floatAttr("momentum", 0.9f);
  auto blend = [&](Value running, Value batch) -> FailureOr<Value> {
    FailureOr<Value> kept =
        n.make<MulOp>({running, n.scalar(elementType, momentum)});
    FailureOr<Value> added =
        n.make<MulOp>({batch, n.scalar(elementType, 1 - momentum)});
    if (failed(kept) || failed(added))
      return failure();
    return n.make<AddOp>({*kept, *added});
  };
  FailureOr<Value> runningMean = blend(operands[3], *batchMean);
  FailureOr<Value> runningVar = blend(operands[4], *batchVar);
  if (failed(runningMean) || failed(runningVar))
    return failure();
  return n.setResults({*y, *runningMean, *runningVar});
}

/// Instance normalisation over [N, G, C / G * spatial] (groups as channels,
/// unit scale, zero bias), then the per-channel scale and bias. Opset 18's
/// scale and bias are per group; they are repeated over the group's
/// channels.
LogicalResult importGroupNormalization(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  RankedTensorType type = n.inputType(0);
  if (type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
    return n.fail("expects a floating-point input [N, C, ...]");
  int64_t groups = n.intAttr("num_groups", 0);
  int64_t channels = type.getDimSize(1), batch = type.getDimSize(0);
  if (groups < 1 || channels % groups)
    return n.fail("num_groups " + Twine(groups) + " must divide the " +
                  Twine(channels) + " channels");
  bool perGroup = n.opset() < 21;
  int64_t paramSize = perGroup ? groups : channels;
  for (size_t i : {1, 2})
    if (n.inputType(i).getNumElements() != paramSize)
      return n.fail(Twine(i == 1 ? "scale" : "bias") + " must have " +
                    Twine(paramSize) + " elements");
  Composer c(n);
  Type t = type.getElementType();
  int64_t rest = type.getNumElements() / (batch * groups);
  Value grouped = c.reshape(n.input(0), {batch, groups, rest});
  auto vectorType = RankedTensorType::get({groups}, t);
  Value normalized = c.make<InstanceNormOp>(
      {grouped, c.constant(vectorType, {1.0}), c.constant(vectorType, {0.0})},
      {n.namedF32("epsilon", n.floatAttr("epsilon", 1e-5f))});
  Value y = c.reshape(normalized, type.getShape());
  SmallVector<int64_t> channelShape(type.getRank() - 1, 1);
  channelShape[0] = channels;
  auto perChannel = [&](Value v) {
    v = c.cast(v, t);
    if (perGroup)
      v = c.reshape(c.broadcast(c.reshape(v, {groups, 1}),
                                {groups, channels / groups}),
                    {channels});
    return c.reshape(v, channelShape);
  };
  y = c.make<AddOp>({c.make<MulOp>({y, perChannel(n.input(1))}),
                     perChannel(n.input(2))});
  return bindComposed(c, y);
}

LogicalResult importInstanceNormalization(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)))
    return failure();
  return bind(n, n.make<InstanceNormOp>(
                     {n.input(0), n.input(1), n.input(2)},
                     {n.namedF32("epsilon", n.floatAttr("epsilon", 1e-5f))}));
}

LogicalResult importLrn(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  if (!n.hasAttr("size"))
    return n.fail("missing attribute 'size'");
  return bind(n,
              n.make<LrnOp>(n.input(0),
                            {n.namedI64("size", n.intAttr("size", 0)),
                             n.namedF32("alpha", n.floatAttr("alpha", 1e-4f)),
                             n.namedF32("beta", n.floatAttr("beta", 0.75f)),
                             n.namedF32("bias", n.floatAttr("bias", 1.0f))}));
}

/// x / ||x||_p along `axis`, p = 1 or 2, as ONNX's reference computes it (a
/// zero row divides by zero).
LogicalResult importLpNormalization(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  int64_t p = n.intAttr("p", 2);
  if (p != 1 && p != 2)
    return n.fail("p " + Twine(p) + " is not supported (supported: 1, 2)");
  Value x = n.input(0);
  FailureOr<int64_t> axis =
      normalizeAxisOrFail(n, n.intAttr("axis", -1), typeOf(x).getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> norm = p == 1 ? reduceL1(n, x, {*axis}, /*keepdims=*/true)
                                 : reduceL2(n, x, {*axis}, /*keepdims=*/true);
  if (failed(norm))
    return failure();
  return bind(n, n.make<DivOp>({x, *norm}));
}

/// (x - mean(x)) / (sqrt(mean(x^2) - mean(x)^2) + 1e-9) over `axes` (default
/// [0, 2, 3]), the function body ONNX defines the op by.
LogicalResult importMeanVarianceNormalization(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  SmallVector<int64_t> requested =
      n.hasAttr("axes") ? n.intsAttr("axes") : SmallVector<int64_t>{0, 2, 3};
  FailureOr<SmallVector<int64_t>> axes =
      normalizeAxes(n, requested, typeOf(x).getRank());
  if (failed(axes))
    return failure();
  FailureOr<Value> mean =
      reduce(n, ReduceKind::Mean, x, *axes, /*keepdims=*/true);
  FailureOr<Value> square = n.make<MulOp>({x, x});
  if (failed(mean) || failed(square))
    return failure();
  FailureOr<Value> meanOfSquare =
      reduce(n, ReduceKind::Mean, *square, *axes, true);
  FailureOr<Value> squareOfMean = n.make<MulOp>({*mean, *mean});
  if (failed(meanOfSquare) || failed(squareOfMean))
    return failure();
  FailureOr<Value> variance = n.make<SubOp>({*meanOfSquare, *squareOfMean});
  if (failed(variance))
    return failure();
  FailureOr<Value> deviation = n.make<SqrtOp>(*variance);
  if (failed(deviation))
    return failure();
  FailureOr<Value> denominator =
      n.make<AddOp>({*deviation, n.scalar(typeOf(x).getElementType(), 1e-9)});
  FailureOr<Value> centered = n.make<SubOp>({x, *mean});
  if (failed(denominator) || failed(centered))
    return failure();
  return bind(n, n.make<DivOp>({*centered, *denominator}));
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Whether MaxPool takes `type` through f32 exactly: the 8- and 16-bit
/// integers (quantized models pool int8 activations directly).
bool isSmallInteger(Type type) {
  auto intType = dyn_cast<IntegerType>(type);
  return intType && (intType.getWidth() == 8 || intType.getWidth() == 16);
}

/// kiln pools floats laid out [N, C, spatial...].
LogicalResult checkPoolInput(NodeImporter &n, bool smallIntegers = false) {
  RankedTensorType type = n.inputType(0);
  if (!isa<FloatType>(type.getElementType()) &&
      !(smallIntegers && isSmallInteger(type.getElementType())))
    return n.fail("only floating-point inputs are supported");
  if (type.getRank() < 3) {
    return n.fail(
        "expects an input of rank >= 3 ([N, C, spatial...]), got rank " +
        Twine(type.getRank()));
  }
  return success();
}

FailureOr<Value> pool(NodeImporter &n, PoolKind kind, bool countIncludePad,
                      Value input = {}) {
  if (!input)
    input = n.input(0);
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  FailureOr<WindowAttrs> w = readWindowAttrs(n, shape.size() - 2);
  if (failed(w))
    return failure();
  resolveForwardPadding(*w, shape.drop_front(2));
  SmallVector<NamedAttribute> attrs{
      n.named("kind", PoolKindAttr::get(n.context(), kind)),
      n.namedArray("kernel", w->kernel), n.namedArray("strides", w->strides),
      n.namedArray("dilations", w->dilations),
      n.namedArray("padding", w->padding)};
  if (n.intAttr("ceil_mode", 0) != 0)
    attrs.push_back(n.namedUnit("ceil_mode"));
  if (countIncludePad)
    attrs.push_back(n.namedUnit("count_include_pad"));
  return n.make<PoolOp>(input, attrs);
}

/// The optional Indices output (opset 8) is kiln.pool_indices over the same
/// windows; storage_order 1 numbers it column-major.
LogicalResult importMaxPool(NodeImporter &n) {
  if (failed(n.checkArity(1, 1, n.opset() >= 8 ? 2 : 1)) ||
      failed(checkPoolInput(n, /*smallIntegers=*/true)))
    return failure();
  // Small integers pool as f32, which holds each of them exactly.
  Type elementType = n.inputType(0).getElementType();
  Value input = n.input(0);
  if (isSmallInteger(elementType)) {
    FailureOr<Value> widened = n.makeTyped<CastOp>(
        RankedTensorType::get(n.inputType(0).getShape(),
                              n.builder().getF32Type()),
        input);
    if (failed(widened))
      return failure();
    input = *widened;
  }
  FailureOr<Value> values =
      pool(n, PoolKind::Max, /*countIncludePad=*/false, input);
  if (failed(values))
    return failure();
  if (isSmallInteger(elementType))
    values = n.makeTyped<CastOp>(
        RankedTensorType::get(cast<RankedTensorType>(values->getType())
                                  .getShape(),
                              elementType),
        *values);
  if (failed(values))
    return failure();
  if (n.node().output_size() < 2 || n.node().output(1).empty())
    return n.setResult(*values);
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  FailureOr<WindowAttrs> w = readWindowAttrs(n, shape.size() - 2);
  if (failed(w))
    return failure();
  resolveForwardPadding(*w, shape.drop_front(2));
  SmallVector<NamedAttribute> attrs{
      n.namedArray("kernel", w->kernel), n.namedArray("strides", w->strides),
      n.namedArray("dilations", w->dilations),
      n.namedArray("padding", w->padding)};
  if (n.intAttr("ceil_mode", 0) != 0)
    attrs.push_back(n.namedUnit("ceil_mode"));
  int64_t order = n.intAttr("storage_order", 0);
  if (order != 0 && order != 1)
    return n.fail("storage_order " + Twine(order) + " must be 0 or 1");
  if (order == 1)
    attrs.push_back(n.namedUnit("column_major"));
  FailureOr<Value> indices = n.make<PoolIndicesOp>(n.input(0), attrs);
  if (failed(indices))
    return failure();
  return n.setResults({*values, *indices});
}

/// (sum over the window of |x|^p)^(1/p): the window sums are a depthwise
/// convolution with a filter of ones (exact sums, zero padding adds
/// nothing); p = 1 and p = 2 avoid pow.
LogicalResult importLpPool(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(checkPoolInput(n)))
    return failure();
  double p = n.opset() < 2 ? n.floatAttr("p", 2.0f)
                           : static_cast<double>(n.intAttr("p", 2));
  if (!(p > 0))
    return n.fail("p must be positive");
  RankedTensorType type = n.inputType(0);
  ArrayRef<int64_t> shape = type.getShape();
  size_t spatial = shape.size() - 2;
  FailureOr<WindowAttrs> w = readWindowAttrs(n, spatial);
  if (failed(w))
    return failure();
  resolveForwardPadding(*w, shape.drop_front(2));
  if (n.intAttr("ceil_mode", 0) != 0) {
    // A partial last window: pad the high side up to it with zeros.
    for (size_t i = 0; i < spatial; ++i) {
      int64_t out = windowOutputSize(shape[2 + i], w->kernel[i], w->strides[i],
                                     w->dilations[i], w->padding[i],
                                     w->padding[spatial + i], true);
      int64_t reach = (out - 1) * w->strides[i] +
                      w->dilations[i] * (w->kernel[i] - 1) + 1;
      int64_t have = shape[2 + i] + w->padding[i] + w->padding[spatial + i];
      w->padding[spatial + i] += std::max<int64_t>(0, reach - have);
    }
  }
  Composer c(n);
  Type t = type.getElementType();
  Value x = n.input(0);
  Value powered = p == 1   ? c.make<AbsOp>(x)
                  : p == 2 ? c.make<MulOp>({x, x})
                           : c.make<PowOp>({c.make<AbsOp>(x), c.scalar(t, p)});
  int64_t channels = shape[1];
  SmallVector<int64_t> filterShape{channels, 1};
  llvm::append_range(filterShape, w->kernel);
  Value ones = c.constant(RankedTensorType::get(filterShape, t), {1.0});
  Value sums = c.make<ConvOp>(
      {powered, ones},
      {n.namedArray("strides", w->strides),
       n.namedArray("dilations", w->dilations),
       n.namedArray("padding", w->padding), n.namedI64("groups", channels)});
  Value y = p == 1   ? sums
            : p == 2 ? c.make<SqrtOp>(sums)
                     : c.make<PowOp>({sums, c.scalar(t, 1.0 / p)});
  return bindComposed(c, y);
}

LogicalResult importAveragePool(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(checkPoolInput(n)))
    return failure();
  return bind(n,
              pool(n, PoolKind::Avg, n.intAttr("count_include_pad", 0) != 0));
}

template <PoolKind kind> LogicalResult importGlobalPool(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(checkPoolInput(n)))
    return failure();
  return bind(n, n.make<GlobalPoolOp>(
                     n.input(0),
                     {n.named("kind", PoolKindAttr::get(n.context(), kind))}));
}

} // namespace

void registerReductionHandlers(SmallVectorImpl<Handler> &handlers) {
  constexpr const char *axesLimit =
      "axes input: " KILN_FIXED_BY_DECLARED_SHAPE;
  handlers.append({
      {"ReduceSum", 1, importReduce<ReduceKind::Sum, 13>, ""},
      {"ReduceSum", 13, importReduce<ReduceKind::Sum, 13>, axesLimit},
      {"ReduceMean", 1, importReduce<ReduceKind::Mean, 18>, ""},
      {"ReduceMean", 18, importReduce<ReduceKind::Mean, 18>, axesLimit},
      {"ReduceMax", 1, importReduce<ReduceKind::Max, 18>, ""},
      {"ReduceMax", 18, importReduce<ReduceKind::Max, 18>, axesLimit},
      {"ReduceMin", 1, importReduce<ReduceKind::Min, 18>, ""},
      {"ReduceMin", 18, importReduce<ReduceKind::Min, 18>, axesLimit},
      {"ReduceProd", 1, importReduce<ReduceKind::Prod, 18>, ""},
      {"ReduceProd", 18, importReduce<ReduceKind::Prod, 18>, axesLimit},
      {"ReduceL1", 1, importDecomposedReduce<reduceL1>,
       "decomposed as sum(abs(x))"},
      {"ReduceL1", 18, importDecomposedReduce<reduceL1>, axesLimit},
      {"ReduceL2", 1, importDecomposedReduce<reduceL2>,
       "decomposed as sqrt(sum(x * x))"},
      {"ReduceL2", 18, importDecomposedReduce<reduceL2>, axesLimit},
      {"ReduceSumSquare", 1, importDecomposedReduce<reduceSumSquare>,
       "decomposed as sum(x * x)"},
      {"ReduceSumSquare", 18, importDecomposedReduce<reduceSumSquare>,
       axesLimit},
      {"ReduceLogSum", 1, importDecomposedReduce<reduceLogSum>,
       "decomposed as log(sum(x))"},
      {"ReduceLogSum", 18, importDecomposedReduce<reduceLogSum>, axesLimit},
      {"ReduceLogSumExp", 1, importDecomposedReduce<reduceLogSumExp>,
       "decomposed as log(sum(exp(x - max))) + max"},
      {"ReduceLogSumExp", 18, importDecomposedReduce<reduceLogSumExp>,
       axesLimit},
      {"ArgMax", 1, importArgReduce<ArgMaxOp>, ""},
      {"ArgMax", 12, importArgReduce<ArgMaxOp>, ""},
      {"ArgMin", 1, importArgReduce<ArgMinOp>, ""},
      {"ArgMin", 12, importArgReduce<ArgMinOp>, ""},
      {"Softmax", 1, importSoftmax<SoftmaxOp>,
       "flattened to 2-D around kiln.softmax"},
      {"Softmax", 13, importSoftmax<SoftmaxOp>, ""},
      {"Hardmax", 1, importHardmax, ""},
      {"CumSum", 11, importCumSum,
       "axis: a constant, or a graph input (each axis built, one picked at "
       "run time)"},
      {"CumSum", 14, importCumSum,
       "axis: a constant, or a graph input (each axis built, one picked at "
       "run time)"},
      {"TopK", 1, importTopK, ""},
      {"TopK", 10, importTopK, "K: " KILN_FIXED_BY_DECLARED_SHAPE},
      // (Opset 10 has no `sorted`: its results are sorted by definition.)
      {"TopK", 11, importTopK, "results always sorted"},
      {"Hardmax", 13, importHardmax, ""},
      {"LogSoftmax", 1, importSoftmax<LogSoftmaxOp>,
       "flattened to 2-D around kiln.log_softmax"},
      {"LogSoftmax", 13, importSoftmax<LogSoftmaxOp>, ""},
      {"LayerNormalization", 17, importLayerNormalization,
       "Mean and InvStdDev outputs computed beside kiln.layer_norm"},
      {"BatchNormalization", 7, importBatchNormalization,
       "inference only, output 0 only; spatial=0 unsupported"},
      {"BatchNormalization", 9, importBatchNormalization,
       "inference only, output 0 only"},
      {"BatchNormalization", 14, importBatchNormalization,
       "training_mode=1 decomposed (batch statistics)"},
      {"BatchNormalization", 15, importBatchNormalization,
       "training_mode=1 decomposed (batch statistics)"},
      {"InstanceNormalization", 6, importInstanceNormalization, ""},
      {"LRN", 1, importLrn, ""},
      {"LpNormalization", 1, importLpNormalization,
       "p = 1 or 2 only; decomposed"},
      {"MeanVarianceNormalization", 9, importMeanVarianceNormalization,
       "decomposed"},
      {"MaxPool", 1, importMaxPool, "float, 8- and 16-bit integers"},
      {"MaxPool", 8, importMaxPool, "float, 8- and 16-bit integers"},
      {"MaxPool", 10, importMaxPool, "float, 8- and 16-bit integers"},
      {"MaxPool", 12, importMaxPool, "float, 8- and 16-bit integers"},
      {"LpPool", 1, importLpPool, "float only"},
      {"LpPool", 2, importLpPool, "float only"},
      {"LpPool", 11, importLpPool, "float only"},
      {"LpPool", 18, importLpPool, "float only"},
      {"GroupNormalization", 18, importGroupNormalization, ""},
      {"GroupNormalization", 21, importGroupNormalization, ""},
      {"AveragePool", 7, importAveragePool, "float only"},
      {"AveragePool", 10, importAveragePool, "float only"},
      {"AveragePool", 19, importAveragePool, "float only"},
      {"GlobalAveragePool", 1, importGlobalPool<PoolKind::Avg>, "float only"},
      {"GlobalMaxPool", 1, importGlobalPool<PoolKind::Max>, "float only"},
  });
}

} // namespace kiln::onnx_frontend

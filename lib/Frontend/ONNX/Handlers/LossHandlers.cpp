//===- LossHandlers.cpp - ONNX loss operators --------------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, decomposed into
// kiln ops: the target class of each position is picked by a one-hot mask
// (labels == iota over the classes on dimension 1), weighted by the class
// weights and zeroed where the label is ignore_index, then reduced:
//   none  the per-position loss [N, d...]
//   sum   its sum
//   mean  its sum over the sum of the weights picked (the count of
//         positions not ignored, without weights), as ONNX defines it.
// A model that computes its loss this way trains with kilnc --loss-output.
//
//===----------------------------------------------------------------------===//

#include "WindowAttrs.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

FailureOr<Value> reshapeTo(NodeImporter &n, Value value,
                           ArrayRef<int64_t> shape) {
  if (typeOf(value).getShape() == shape)
    return value;
  return n.makeTyped<ReshapeOp>(
      RankedTensorType::get(shape, elementTypeOf(value)), value);
}

FailureOr<Value> sumOver(NodeImporter &n, Value value, ArrayRef<int64_t> axes,
                         bool keepdims) {
  return n.make<ReduceOp>(
      value, {n.named("kind", ReduceKindAttr::get(n.context(), ReduceKind::Sum)),
              n.namedArray("axes", axes),
              n.named("keepdims", n.builder().getBoolAttr(keepdims))});
}

/// The loss of `logp` ([N, C, d...], log-probabilities) against the class
/// labels `target` ([N, d...]), with optional class weights.
FailureOr<Value> nllLoss(NodeImporter &n, Value logp, Value target,
                         Value weight) {
  RankedTensorType type = typeOf(logp);
  RankedTensorType labelType = typeOf(target);
  if (type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
    return n.fail("the scores must be float of rank >= 2 ([N, C, ...]), got " +
                  formatInts(type.getShape()));
  SmallVector<int64_t> expected(type.getShape());
  int64_t classes = expected[1];
  expected.erase(expected.begin() + 1);
  if (labelType.getShape() != ArrayRef<int64_t>(expected) ||
      !isa<IntegerType>(labelType.getElementType()))
    return n.fail("the labels must be integers of shape " +
                  formatInts(expected) + ", got " +
                  formatInts(labelType.getShape()));
  int64_t rank = type.getRank();
  SmallVector<int64_t> wideShape(expected);
  wideShape.insert(wideShape.begin() + 1, 1);
  SmallVector<int64_t> classShape(rank, 1);
  classShape[1] = classes;
  Type labelElement = labelType.getElementType();

  FailureOr<Value> wide = reshapeTo(n, target, wideShape);
  FailureOr<Value> iota = n.makeTyped<IotaOp>(
      RankedTensorType::get({classes}, labelElement), {},
      {n.namedF64("start", 0.0), n.namedF64("step", 1.0)});
  if (failed(wide) || failed(iota))
    return failure();
  FailureOr<Value> iotaWide = reshapeTo(n, *iota, classShape);
  if (failed(iotaWide))
    return failure();
  FailureOr<Value> hit = n.make<EqualOp>({*wide, *iotaWide});
  if (failed(hit))
    return failure();
  FailureOr<Value> picked =
      n.makeTyped<CastOp>(typeOf(*hit).clone(type.getElementType()), *hit);
  if (failed(picked))
    return failure();
  if (weight) {
    if (typeOf(weight).getShape() != ArrayRef<int64_t>{classes})
      return n.fail("the weights must have shape [" + Twine(classes) +
                    "], got " + formatInts(typeOf(weight).getShape()));
    FailureOr<Value> w = reshapeTo(n, weight, classShape);
    if (failed(w) || failed(picked = n.make<MulOp>({*picked, *w})))
      return failure();
  }
  if (n.hasAttr("ignore_index")) {
    FailureOr<Value> ignored = n.make<EqualOp>(
        {*wide, n.scalar(labelElement, double(n.intAttr("ignore_index", 0)))});
    if (failed(ignored))
      return failure();
    FailureOr<Value> kept = n.make<NotOp>(*ignored);
    if (failed(kept))
      return failure();
    FailureOr<Value> keep =
        n.makeTyped<CastOp>(typeOf(*kept).clone(type.getElementType()), *kept);
    if (failed(keep) || failed(picked = n.make<MulOp>({*picked, *keep})))
      return failure();
  }
  FailureOr<Value> product = n.make<MulOp>({logp, *picked});
  if (failed(product))
    return failure();
  FailureOr<Value> perPosition = sumOver(n, *product, {1}, false);
  if (failed(perPosition) ||
      failed(perPosition = n.make<NegOp>(*perPosition)))
    return failure();
  std::string reduction = n.stringAttr("reduction", "mean");
  if (reduction == "none")
    return perPosition;
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
  FailureOr<Value> total = sumOver(n, *perPosition, all, false);
  if (failed(total) || reduction == "sum")
    return total;
  if (reduction != "mean")
    return n.fail("reduction '" + reduction + "' is not none, sum or mean");
  FailureOr<Value> weights = sumOver(
      n, *picked, llvm::to_vector(llvm::seq<int64_t>(0, rank)), false);
  if (failed(weights))
    return failure();
  return n.make<DivOp>({*total, *weights});
}

LogicalResult importNegativeLogLikelihoodLoss(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)))
    return failure();
  return bind(n, nllLoss(n, n.input(0), n.input(1), n.input(2)));
}

LogicalResult importSoftmaxCrossEntropyLoss(NodeImporter &n) {
  if (failed(n.checkArity(2, 3, 2)))
    return failure();
  if (typeOf(n.input(0)).getRank() < 2)
    return n.fail("the scores must have rank >= 2 ([N, C, ...])");
  FailureOr<Value> logp =
      n.make<LogSoftmaxOp>(n.input(0), {n.namedI64("axis", 1)});
  if (failed(logp))
    return failure();
  FailureOr<Value> loss = nllLoss(n, *logp, n.input(1), n.input(2));
  if (failed(loss))
    return failure();
  return n.setResults({*loss, *logp});
}

} // namespace

void registerLossHandlers(SmallVectorImpl<Handler> &handlers) {
  constexpr const char *limits =
      "decomposed (log_softmax, one-hot mask, reduce)";
  handlers.append({
      {"NegativeLogLikelihoodLoss", 12, importNegativeLogLikelihoodLoss,
       limits},
      {"NegativeLogLikelihoodLoss", 13, importNegativeLogLikelihoodLoss,
       limits},
      {"NegativeLogLikelihoodLoss", 22, importNegativeLogLikelihoodLoss,
       limits},
      {"SoftmaxCrossEntropyLoss", 12, importSoftmaxCrossEntropyLoss, limits},
      {"SoftmaxCrossEntropyLoss", 13, importSoftmaxCrossEntropyLoss, limits},
  });
}

} // namespace kiln::onnx_frontend

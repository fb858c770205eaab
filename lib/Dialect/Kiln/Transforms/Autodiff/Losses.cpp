//===- Losses.cpp - The scalar losses kiln-autodiff appends ----------------===//
//
// Each loss is written in ordinary kiln ops (log_softmax, a one-hot mask
// from the labels, mul, reduce), so autodiff differentiates it with the
// same rules as the model and codegen fuses it like any other graph.
//
//   cross_entropy  -mean_n sum_c onehot(label)_nc * log_softmax(x)_nc
//   nll            -mean_n x[n, label_n]     (x: log-probabilities)
//   mse            mean (x - t)^2
//   l1             mean |x - t|
//
// Class losses take classes on dimension 1 and average over every other
// position (batch and spatial), as ONNX's SoftmaxCrossEntropyLoss with
// reduction=mean does.
//
//===----------------------------------------------------------------------===//

#include "Vjp.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln::autodiff {

namespace {
RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

std::string shapeText(RankedTensorType type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(type.getShape(), os, ",");
  os << "] " << type.getElementType();
  return s;
}

/// The mean of every element, a rank-0 tensor, times `factor`. A mean
/// (not a sum times 1 / count), so that kilnc --dim sees the average over
/// the batch and scales it by max / n when a run has a smaller batch
/// (SeparableDims.h, size masks).
Value meanAllScaled(GradBuilder &g, Value value, double factor) {
  int64_t rank = typeOf(value).getRank();
  Value mean = ReduceOp::create(g.b, ReduceKind::Mean, value,
                                llvm::to_vector(llvm::seq<int64_t>(0, rank)),
                                /*keepdims=*/false);
  return factor == 1.0 ? mean : g.scale(mean, factor);
}

/// The f32 class weights of a class loss: a one-hot mask of integer labels
/// (classes on dimension 1), or the labels themselves when they are float
/// probabilities of the output's shape.
FailureOr<Value> classTargets(GradBuilder &g, Value output, Value labels,
                              std::string &error) {
  RankedTensorType outType = typeOf(output), labelType = typeOf(labels);
  Type f32 = g.b.getF32Type();
  if (outType.getRank() < 2) {
    error = "a class loss needs an output of rank >= 2 ([batch, classes, "
            "...]), got " + shapeText(outType);
    return failure();
  }
  if (isa<FloatType>(labelType.getElementType())) {
    if (labelType.getShape() != outType.getShape()) {
      error = "float labels (class probabilities) must have the output's "
              "shape " + shapeText(outType) + ", got " + shapeText(labelType);
      return failure();
    }
    return labelType.getElementType() == f32
               ? labels
               : Value(CastOp::create(g.b, labelType.clone(f32), labels));
  }
  SmallVector<int64_t> expected(outType.getShape());
  int64_t classes = expected[1];
  expected.erase(expected.begin() + 1);
  if (labelType.getShape() != ArrayRef<int64_t>(expected)) {
    error = "class labels must have the output's shape without the class "
            "dimension, [";
    llvm::raw_string_ostream os(error);
    llvm::interleave(expected, os, ",");
    os << "], got " << shapeText(labelType);
    return failure();
  }
  // onehot[n, c, ...] = (labels[n, 1, ...] == c).
  SmallVector<int64_t> withClassDim(expected);
  withClassDim.insert(withClassDim.begin() + 1, 1);
  Value wide = g.reshape(labels, withClassDim);
  Value iota = IotaOp::create(
      g.b, RankedTensorType::get({classes}, labelType.getElementType()),
      g.b.getF64FloatAttr(0.0), g.b.getF64FloatAttr(1.0));
  SmallVector<int64_t> classShape(outType.getRank(), 1);
  classShape[1] = classes;
  Value hit = EqualOp::create(g.b, wide, g.reshape(iota, classShape));
  return Value(CastOp::create(g.b, outType.clone(f32), hit));
}
} // namespace

FailureOr<Value> buildLoss(GradBuilder &g, LossKind kind, Value output,
                           Value labels, std::string &error) {
  RankedTensorType outType = typeOf(output);
  Type f32 = g.b.getF32Type();
  if (!isa<FloatType>(outType.getElementType())) {
    error = "the loss needs a float output, got " + shapeText(outType);
    return failure();
  }
  Value x = outType.getElementType() == f32
                ? output
                : Value(CastOp::create(g.b, outType.clone(f32), output));
  switch (kind) {
  case LossKind::CrossEntropy:
  case LossKind::Nll: {
    FailureOr<Value> targets = classTargets(g, x, labels, error);
    if (failed(targets))
      return failure();
    Value logp = kind == LossKind::Nll
                     ? x
                     : Value(LogSoftmaxOp::create(g.b, x, g.b.getI64IntegerAttr(1)));
    // -sum / positions = -classes * mean over [batch, classes, spatial].
    return meanAllScaled(g, g.mul(logp, *targets),
                         -double(outType.getDimSize(1)));
  }
  case LossKind::Mse:
  case LossKind::L1: {
    RankedTensorType labelType = typeOf(labels);
    if (labelType.getShape() != outType.getShape() ||
        !isa<FloatType>(labelType.getElementType())) {
      error = "regression labels must be float with the output's shape " +
              shapeText(outType) + ", got " + shapeText(labelType);
      return failure();
    }
    Value t = labelType.getElementType() == f32
                  ? labels
                  : Value(CastOp::create(g.b, labelType.clone(f32), labels));
    Value diff = g.sub(x, t);
    Value per = kind == LossKind::Mse ? g.mul(diff, diff)
                                      : Value(AbsOp::create(g.b, diff));
    return meanAllScaled(g, per, 1.0);
  }
  }
  return failure();
}

} // namespace kiln::autodiff

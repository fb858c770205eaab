//===- RecurrenceOps.cpp - The verifier of kiln.recurrence
//-----------------===//
//
// Static shapes only: the op becomes one kernel specialised for T, B and H
// (the importer unrolls a layer whose sizes are symbolic).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace kiln;

int64_t RecurrenceOp::getGateCount() {
  switch (getCell()) {
  case RecurrentCell::Rnn:
    return 1;
  case RecurrentCell::Gru:
    return 3;
  case RecurrentCell::Lstm:
    return 4;
  }
  return 1;
}

int64_t RecurrenceOp::getActivationCount() {
  switch (getCell()) {
  case RecurrentCell::Rnn:
    return 1;
  case RecurrentCell::Gru:
    return 2;
  case RecurrentCell::Lstm:
    return 3;
  }
  return 1;
}

bool RecurrenceOp::isKnownActivation(StringRef name) {
  return llvm::StringSwitch<bool>(name)
      .Cases({"relu", "tanh", "sigmoid", "softsign", "softplus"}, true)
      .Cases({"leakyrelu", "thresholdedrelu", "elu", "hardsigmoid"}, true)
      .Cases({"affine", "scaledtanh"}, true)
      .Default(false);
}

LogicalResult RecurrenceOp::verify() {
  auto shapeText = [](ArrayRef<int64_t> shape) {
    std::string s = "[";
    for (auto [i, d] : llvm::enumerate(shape))
      s += (i ? ", " : "") +
           (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
    return s + "]";
  };
  auto xType = cast<RankedTensorType>(getInputProjection().getType());
  auto rType = cast<RankedTensorType>(getRecurrence().getType());
  if (!xType.hasStaticShape() || !rType.hasStaticShape())
    return emitOpError("needs static shapes (got input_projection ")
           << shapeText(xType.getShape()) << ", recurrence "
           << shapeText(rType.getShape()) << ")";
  if (xType.getRank() != 3 || rType.getRank() != 2)
    return emitOpError("input_projection must be [T, B, G * H] and "
                       "recurrence [G * H, H]");
  int64_t g = getGateCount();
  int64_t steps = xType.getDimSize(0), batch = xType.getDimSize(1);
  int64_t hidden = rType.getDimSize(1);
  if (steps < 1 || batch < 1 || hidden < 1)
    return emitOpError("T, B and H must be at least 1");
  if (rType.getDimSize(0) != g * hidden || xType.getDimSize(2) != g * hidden)
    return emitOpError("a ")
           << stringifyRecurrentCell(getCell()) << " cell has " << g
           << " gates: recurrence must be [" << g * hidden << ", " << hidden
           << "] and input_projection [" << steps << ", " << batch << ", "
           << g * hidden << "] (got " << shapeText(rType.getShape()) << " and "
           << shapeText(xType.getShape()) << ")";
  Type element = xType.getElementType();
  auto expect = [&](Value v, ArrayRef<int64_t> shape,
                    StringRef what) -> LogicalResult {
    if (!v)
      return success();
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getShape() != shape)
      return emitOpError() << what << " must be " << shapeText(shape)
                           << " (got " << shapeText(type.getShape()) << ")";
    if (what != "sequence_lens" && type.getElementType() != element)
      return emitOpError() << what
                           << " must have input_projection's element type";
    return success();
  };
  bool lstm = getCell() == RecurrentCell::Lstm;
  bool gru = getCell() == RecurrentCell::Gru;
  if (failed(expect(getRecurrence(), {g * hidden, hidden}, "recurrence")) ||
      failed(expect(getInitialH(), {batch, hidden}, "initial_h")) ||
      failed(expect(getInitialC(), {batch, hidden}, "initial_c")) ||
      failed(expect(getPeepholes(), {3 * hidden}, "peepholes")) ||
      failed(expect(getSequenceLens(), {batch}, "sequence_lens")) ||
      failed(expect(getResetBias(), {hidden}, "reset_bias")) ||
      failed(expect(getY(), {steps, batch, hidden}, "y")) ||
      failed(expect(getLastH(), {batch, hidden}, "last_h")) ||
      failed(expect(getLastC(), {batch, hidden}, "last_c")))
    return failure();
  if (lstm != static_cast<bool>(getInitialC()) ||
      lstm != static_cast<bool>(getLastC()))
    return emitOpError("initial_c and last_c are there exactly for lstm");
  if (!lstm && (getPeepholes() || getInputForget()))
    return emitOpError("peepholes and input_forget are lstm's");
  if (!gru && (getResetBias() || getLinearBeforeReset()))
    return emitOpError("reset_bias and linear_before_reset are gru's");
  if (getResetBias() && !getLinearBeforeReset())
    return emitOpError("reset_bias needs linear_before_reset");
  int64_t count = getActivationCount();
  if (static_cast<int64_t>(getActivations().size()) != count ||
      static_cast<int64_t>(getActivationAlpha().size()) != count ||
      static_cast<int64_t>(getActivationBeta().size()) != count)
    return emitOpError("a ")
           << stringifyRecurrentCell(getCell()) << " cell takes " << count
           << " activations, each with an alpha and a beta (got "
           << getActivations().size() << ", " << getActivationAlpha().size()
           << " and " << getActivationBeta().size() << ")";
  for (Attribute a : getActivations())
    if (!isKnownActivation(cast<StringAttr>(a).getValue()))
      return emitOpError("unknown activation '")
             << cast<StringAttr>(a).getValue() << "'";
  if (std::optional<APFloat> clip = getClip();
      clip && !(clip->convertToFloat() > 0))
    return emitOpError("clip must be positive (got ")
           << clip->convertToFloat() << ")";
  return success();
}

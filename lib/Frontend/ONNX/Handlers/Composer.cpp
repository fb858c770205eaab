//===- Composer.cpp - Building an ONNX op out of kiln ops -----------------===//

#include "Composer.h"

using namespace mlir;

namespace kiln::onnx_frontend {

Value Composer::constant(RankedTensorType type, ArrayRef<double> values) {
  if (hasFailed)
    return {};
  Type elementType = type.getElementType();
  auto element = [&](double v) -> Attribute {
    if (isa<FloatType>(elementType))
      return n.builder().getFloatAttr(elementType, v);
    if (elementType.isInteger(1))
      return n.builder().getIntegerAttr(elementType, v != 0 ? 1 : 0);
    return n.builder().getIntegerAttr(elementType, static_cast<int64_t>(v));
  };
  if (values.size() == 1)
    return n.constant(DenseElementsAttr::get(type, element(values.front())));
  if (static_cast<int64_t>(values.size()) != type.getNumElements())
    return fail("internal error: constant of " +
                Twine(type.getNumElements()) + " elements given " +
                Twine(values.size()) + " values");
  SmallVector<Attribute> elements;
  elements.reserve(values.size());
  for (double v : values)
    elements.push_back(element(v));
  return n.constant(DenseElementsAttr::get(type, elements));
}

Value Composer::slice(Value v, ArrayRef<int64_t> starts,
                      ArrayRef<int64_t> limits, ArrayRef<int64_t> steps) {
  if (!v)
    return {};
  SmallVector<int64_t> stepList(steps);
  if (stepList.empty())
    stepList.assign(starts.size(), 1);
  ArrayRef<int64_t> shape = typeOf(v).getShape();
  bool whole = true;
  for (size_t d = 0; d < shape.size(); ++d)
    whole &= starts[d] == 0 && limits[d] == shape[d] && stepList[d] == 1;
  if (whole)
    return v;
  return make<SliceOp>(v, {n.namedArray("starts", starts),
                           n.namedArray("limits", limits),
                           n.namedArray("steps", stepList)});
}

Value Composer::sliceAxis(Value v, int64_t axis, int64_t start, int64_t limit,
                          int64_t step) {
  if (!v)
    return {};
  ArrayRef<int64_t> shape = typeOf(v).getShape();
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      steps(shape.size(), 1);
  starts[axis] = start;
  limits[axis] = limit;
  steps[axis] = step;
  return slice(v, starts, limits, steps);
}

Value Composer::iotaAlong(int64_t size, int64_t axis, int64_t rank,
                          Type elementType) {
  if (hasFailed)
    return {};
  Value iota = makeTyped<IotaOp>(RankedTensorType::get({size}, elementType), {},
                                 {n.namedF64("start", 0.0),
                                  n.namedF64("step", 1.0)});
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = size;
  return reshape(iota, shape);
}

} // namespace kiln::onnx_frontend

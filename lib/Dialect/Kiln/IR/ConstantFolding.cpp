//===- ConstantFolding.cpp - Folding helpers for kiln ops
//-------------------===//

#include "ConstantFolding.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln {

DenseElementsAttr getFoldableElements(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return {};
  if (!dense.isSplat() && dense.getNumElements() > kMaxFoldElements)
    return {};
  return dense;
}

SmallVector<int64_t> computeStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

int64_t broadcastSourceIndex(int64_t linear, ArrayRef<int64_t> resultShape,
                             ArrayRef<int64_t> operandShape) {
  int64_t offset = resultShape.size() - operandShape.size();
  int64_t source = 0, operandStride = 1;
  for (int64_t d = static_cast<int64_t>(resultShape.size()) - 1; d >= 0; --d) {
    int64_t coord = linear % resultShape[d];
    linear /= resultShape[d];
    if (d < offset)
      continue;
    int64_t extent = operandShape[d - offset];
    if (extent != 1)
      source += coord * operandStride;
    operandStride *= extent;
  }
  return source;
}

namespace {
/// Walks the broadcast result and hands each pair of source indices to `fn`.
/// Splat results are computed once.
template <typename Fn>
bool forEachBroadcastPair(DenseElementsAttr lhs, DenseElementsAttr rhs,
                          RankedTensorType resultType, Fn fn) {
  if (lhs.isSplat() && rhs.isSplat())
    return fn(0, 0);
  if (resultType.getNumElements() > kMaxFoldElements)
    return false;
  ArrayRef<int64_t> shape = resultType.getShape();
  for (int64_t i = 0, e = resultType.getNumElements(); i < e; ++i) {
    int64_t l = lhs.isSplat()
                    ? 0
                    : broadcastSourceIndex(i, shape, lhs.getType().getShape());
    int64_t r = rhs.isSplat()
                    ? 0
                    : broadcastSourceIndex(i, shape, rhs.getType().getShape());
    if (!fn(l, r))
      return false;
  }
  return true;
}

/// Bools order as 0 < 1 (numpy's False < True), so they count as unsigned.
bool isUnsignedElement(DenseElementsAttr attr) {
  Type type = attr.getElementType();
  return type.isUnsignedInteger() || type.isInteger(1);
}
} // namespace

Attribute foldBinary(Attribute lhsAttr, Attribute rhsAttr,
                     RankedTensorType resultType, const IntBinaryFn &intFn,
                     const FloatBinaryFn &floatFn) {
  DenseElementsAttr lhs = getFoldableElements(lhsAttr);
  DenseElementsAttr rhs = getFoldableElements(rhsAttr);
  if (!lhs || !rhs || !resultType.hasStaticShape())
    return {};
  Type elementType = lhs.getElementType();
  if (isa<IntegerType>(elementType) && intFn) {
    bool isUnsigned = isUnsignedElement(lhs);
    auto l = lhs.getValues<APInt>();
    auto r = rhs.getValues<APInt>();
    SmallVector<APInt> values;
    bool ok =
        forEachBroadcastPair(lhs, rhs, resultType, [&](int64_t i, int64_t j) {
          std::optional<APInt> v = intFn(l[i], r[j], isUnsigned);
          if (v)
            values.push_back(*v);
          return v.has_value();
        });
    if (!ok)
      return {};
    return DenseElementsAttr::get(resultType, values);
  }
  if (isa<FloatType>(elementType) && floatFn) {
    auto l = lhs.getValues<APFloat>();
    auto r = rhs.getValues<APFloat>();
    SmallVector<APFloat> values;
    bool ok =
        forEachBroadcastPair(lhs, rhs, resultType, [&](int64_t i, int64_t j) {
          std::optional<APFloat> v = floatFn(l[i], r[j]);
          if (v)
            values.push_back(*v);
          return v.has_value();
        });
    if (!ok)
      return {};
    return DenseElementsAttr::get(resultType, values);
  }
  return {};
}

Attribute foldCompare(Attribute lhsAttr, Attribute rhsAttr,
                      RankedTensorType resultType, const IntCompareFn &intFn,
                      const FloatCompareFn &floatFn) {
  DenseElementsAttr lhs = getFoldableElements(lhsAttr);
  DenseElementsAttr rhs = getFoldableElements(rhsAttr);
  if (!lhs || !rhs || !resultType.hasStaticShape())
    return {};
  SmallVector<bool> values;
  Type elementType = lhs.getElementType();
  bool ok = false;
  if (isa<IntegerType>(elementType)) {
    bool isUnsigned = isUnsignedElement(lhs);
    auto l = lhs.getValues<APInt>();
    auto r = rhs.getValues<APInt>();
    ok = forEachBroadcastPair(lhs, rhs, resultType, [&](int64_t i, int64_t j) {
      values.push_back(intFn(l[i], r[j], isUnsigned));
      return true;
    });
  } else if (isa<FloatType>(elementType)) {
    auto l = lhs.getValues<APFloat>();
    auto r = rhs.getValues<APFloat>();
    ok = forEachBroadcastPair(lhs, rhs, resultType, [&](int64_t i, int64_t j) {
      values.push_back(floatFn(l[i], r[j]));
      return true;
    });
  }
  if (!ok)
    return {};
  return DenseElementsAttr::get(resultType, values);
}

bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type type = dense.getElementType();
  if (auto intType = dyn_cast<IntegerType>(type)) {
    if (intType.getWidth() == 1)
      return false;
    APInt v = dense.getSplatValue<APInt>();
    return intType.isUnsigned() ? double(v.getZExtValue()) == value
                                : double(v.getSExtValue()) == value;
  }
  if (isa<FloatType>(type))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  return false;
}

} // namespace kiln
